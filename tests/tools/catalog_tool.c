/* SPDX-License-Identifier: Apache-2.0 */
/* Drives firn's SQL or REST catalog for the interop tests (tests/interop/test_catalog_*.py):
 *   catalog_tool <catalog-name> <db-uri> <warehouse> <command> [args...]
 * A db-uri starting with http:// or https:// opens the REST catalog at that URL (environment:
 * FIRN_REST_PAGE_SIZE pages listings, FIRN_REST_TOKEN sends a bearer token).
 * commands: create-namespace <ns> [k=v...] | list-namespaces [parent] | ns-props <ns> |
 *   create-table <ns> <name> <schema.json> [--spec f] [--sort f] [--location l] [k=v...] |
 *   evolve <ns> <name> <target-schema.json> | set-props <ns> <name> [k=v...] |
 *   show <ns> <name> | list-tables <ns> | drop-table <ns> <name> |
 *   hammer <ns> <name> <writer> <count>  (count property commits, retried on conflict) |
 *   ns-exists <ns> | table-exists <ns> <name> | drop-namespace <ns> |
 *   update-ns <ns> [k=v...] [-k...] | tx-props <ns> <name1> <name2> [k=v...] (one atomic
 *   commit setting the properties on both tables)
 * Output: JSON on stdout; errors on stderr with exit status 1. */
#include "firn/catalog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    char *buf = firn_malloc(1 << 22);
    *len = fread(buf, 1, (1 << 22) - 1, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

static void die(firn_rc rc, const firn_err *err)
{
    fprintf(stderr, "error %s: %s\n", firn_rc_name(rc), err->msg);
    exit(rc == FIRN_ERR_CONFLICT ? 3 : 1);
}

#define CHECK(expr)                                                                                \
    do {                                                                                           \
        firn_rc rc_ = (expr);                                                                      \
        if (rc_)                                                                                   \
            die(rc_, &err);                                                                        \
    } while (0)

/* Parses k=v arguments into props. */
static void kv_args(int argc, char **argv, firn_props *props)
{
    for (int i = 0; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) {
            fprintf(stderr, "expected key=value, got %s\n", argv[i]);
            exit(2);
        }
        *eq = '\0';
        firn_props_set(props, argv[i], eq + 1);
        *eq = '=';
    }
}

static void print_list(const firn_strlist *l)
{
    printf("[");
    for (size_t i = 0; i < l->count; i++)
        printf("%s\"%s\"", i ? "," : "", l->items[i]);
    printf("]\n");
}

static void print_table(const firn_catalog_table *t)
{
    firn_buf b;
    firn_err err = {0};
    firn_buf_init(&b, 1 << 26);
    CHECK(firn_table_metadata_to_json(t->metadata, &b, &err));
    printf("{\"metadata-location\":\"%s\",\"metadata\":%s}\n", t->metadata_location,
           (char *)b.data);
    firn_buf_deinit(&b);
}

static void small_sleep(void)
{
    struct timespec ts = {0, (long)(rand() % 5000) * 1000};
    nanosleep(&ts, NULL);
}

static int cmd_create_table(firn_catalog *cat, int argc, char **argv)
{
    firn_err err = {0};
    if (argc < 3)
        return 2;
    size_t len;
    char *text = slurp(argv[2], &len);
    firn_schema *schema = NULL;
    CHECK(firn_schema_from_json(text, len, &schema, &err));
    firn_free(text);
    firn_table_create opts = {.schema = schema};
    firn_partition_spec *spec = NULL;
    firn_sort_order *sort = NULL;
    firn_props props;
    firn_props_init(&props);
    int i = 3;
    for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        if (strcmp(argv[i], "--location") == 0) {
            opts.location = argv[i + 1];
            continue;
        }
        text = slurp(argv[i + 1], &len);
        if (strcmp(argv[i], "--spec") == 0)
            CHECK(firn_partition_spec_from_json(text, len, &spec, &err));
        else
            CHECK(firn_sort_order_from_json(text, len, &sort, &err));
        firn_free(text);
    }
    kv_args(argc - i, argv + i, &props);
    opts.spec = spec;
    opts.sort_order = sort;
    opts.properties = &props;
    firn_catalog_table t;
    CHECK(firn_catalog_create_table(cat, argv[0], argv[1], &opts, &t, &err));
    print_table(&t);
    firn_catalog_table_deinit(&t);
    firn_props_deinit(&props);
    firn_partition_spec_free(spec);
    firn_sort_order_free(sort);
    firn_schema_free(schema);
    return 0;
}

/* Commits the changes built by build() on the latest metadata, retrying on conflicts; returns
 * the number of retries. */
typedef void (*build_fn)(const firn_table_metadata *md, firn_table_changes *c, void *arg);

static int commit_retry(firn_catalog *cat,
                        const char *ns,
                        const char *name,
                        build_fn build,
                        void *arg,
                        firn_catalog_table *out)
{
    firn_err err = {0};
    for (int attempt = 0; attempt < 10000; attempt++) {
        firn_catalog_table cur;
        CHECK(firn_catalog_load_table(cat, ns, name, &cur, &err));
        firn_table_changes c;
        firn_table_changes_init(&c);
        build(cur.metadata, &c, arg);
        firn_rc rc = firn_catalog_commit(cat, ns, name, &c, out, &err);
        firn_table_changes_deinit(&c);
        firn_catalog_table_deinit(&cur);
        if (rc == FIRN_OK)
            return attempt;
        if (rc != FIRN_ERR_CONFLICT && rc != FIRN_ERR_UNAVAILABLE)
            die(rc, &err);
        small_sleep();
    }
    fprintf(stderr, "gave up after 10000 conflicts\n");
    exit(1);
}

static void build_evolve(const firn_table_metadata *md, firn_table_changes *c, void *arg)
{
    firn_err err = {0};
    const firn_schema *target = arg;
    const firn_schema *cur = firn_table_metadata_schema(md);
    int32_t last = md->last_column_id;
    firn_schema *next = NULL;
    bool changed;
    CHECK(firn_schema_evolve(cur, target->root, &last, &next, &changed, &err));
    firn_table_changes_require_uuid(c, md->table_uuid);
    firn_table_changes_require(c, FIRN_REQ_ASSERT_CURRENT_SCHEMA_ID, md->current_schema_id);
    firn_table_changes_require(c, FIRN_REQ_ASSERT_LAST_ASSIGNED_FIELD_ID, md->last_column_id);
    if (changed) {
        firn_table_changes_add_schema(c, next, last);
        firn_table_changes_set_current_schema(c, -1);
    }
    firn_schema_free(next);
}

typedef struct hammer_arg {
    const char *writer;
    int i;
} hammer_arg;

static void build_hammer(const firn_table_metadata *md, firn_table_changes *c, void *arg)
{
    const hammer_arg *h = arg;
    char key[64], val[32];
    snprintf(key, sizeof(key), "%s.%d", h->writer, h->i);
    snprintf(val, sizeof(val), "%d", h->i);
    firn_table_changes_require_uuid(c, md->table_uuid);
    firn_table_changes_set_property(c, key, val);
    snprintf(key, sizeof(key), "last.%s", h->writer);
    firn_table_changes_set_property(c, key, val);
}

static void build_props(const firn_table_metadata *md, firn_table_changes *c, void *arg)
{
    const firn_props *p = arg;
    firn_table_changes_require_uuid(c, md->table_uuid);
    for (size_t i = 0; i < p->n; i++)
        firn_table_changes_set_property(c, p->keys[i], p->vals[i]);
}

static void print_bool(bool b)
{
    printf("%s\n", b ? "true" : "false");
}

/* tx-props: both tables in one multi-table commit. */
static int cmd_tx_props(firn_catalog *cat, int argc, char **argv)
{
    firn_err err = {0};
    firn_props props;
    firn_props_init(&props);
    kv_args(argc - 3, argv + 3, &props);
    firn_catalog_table cur[2];
    firn_table_changes ch[2];
    firn_catalog_table_commit commits[2];
    for (int i = 0; i < 2; i++) {
        CHECK(firn_catalog_load_table(cat, argv[0], argv[1 + i], &cur[i], &err));
        firn_table_changes_init(&ch[i]);
        build_props(cur[i].metadata, &ch[i], &props);
        commits[i] = (firn_catalog_table_commit){argv[0], argv[1 + i], &ch[i]};
    }
    CHECK(firn_catalog_commit_transaction(cat, commits, 2, &err));
    for (int i = 0; i < 2; i++) {
        firn_table_changes_deinit(&ch[i]);
        firn_catalog_table_deinit(&cur[i]);
    }
    firn_props_deinit(&props);
    return 0;
}

static int run_more(firn_catalog *cat, const char *cmd, int argc, char **argv)
{
    firn_err err = {0};
    bool b = false;
    if (strcmp(cmd, "ns-exists") == 0 && argc == 1) {
        CHECK(firn_catalog_namespace_exists(cat, argv[0], &b, &err));
        print_bool(b);
    } else if (strcmp(cmd, "table-exists") == 0 && argc == 2) {
        CHECK(firn_catalog_table_exists(cat, argv[0], argv[1], &b, &err));
        print_bool(b);
    } else if (strcmp(cmd, "drop-namespace") == 0 && argc == 1) {
        CHECK(firn_catalog_drop_namespace(cat, argv[0], &err));
    } else if (strcmp(cmd, "update-ns") == 0 && argc >= 1) {
        firn_props props;
        firn_props_init(&props);
        const char *removals[64];
        size_t n_rem = 0;
        for (int i = 1; i < argc; i++) {
            if (argv[i][0] == '-' && n_rem < 64)
                removals[n_rem++] = argv[i] + 1;
            else
                kv_args(1, argv + i, &props);
        }
        CHECK(firn_catalog_update_namespace(cat, argv[0], &props, removals, n_rem, &err));
        firn_props_deinit(&props);
    } else if (strcmp(cmd, "tx-props") == 0 && argc >= 3) {
        return cmd_tx_props(cat, argc, argv);
    } else {
        return 2;
    }
    return 0;
}

static int run(firn_catalog *cat, const char *cmd, int argc, char **argv)
{
    firn_err err = {0};
    firn_catalog_table t;
    firn_strlist l;
    firn_props props;
    firn_props_init(&props);
    if (strcmp(cmd, "create-namespace") == 0 && argc >= 1) {
        kv_args(argc - 1, argv + 1, &props);
        CHECK(firn_catalog_create_namespace(cat, argv[0], &props, &err));
    } else if (strcmp(cmd, "list-namespaces") == 0) {
        CHECK(firn_catalog_list_namespaces(cat, argc ? argv[0] : NULL, &l, &err));
        print_list(&l);
        firn_strlist_deinit(&l);
    } else if (strcmp(cmd, "ns-props") == 0 && argc == 1) {
        firn_props_deinit(&props);
        CHECK(firn_catalog_load_namespace(cat, argv[0], &props, &err));
        for (size_t i = 0; i < props.n; i++)
            printf("%s%s=%s", i ? "\n" : "", props.keys[i], props.vals[i]);
        printf("\n");
    } else if (strcmp(cmd, "list-tables") == 0 && argc == 1) {
        CHECK(firn_catalog_list_tables(cat, argv[0], &l, &err));
        print_list(&l);
        firn_strlist_deinit(&l);
    } else if (strcmp(cmd, "create-table") == 0) {
        return cmd_create_table(cat, argc, argv);
    } else if (strcmp(cmd, "show") == 0 && argc == 2) {
        CHECK(firn_catalog_load_table(cat, argv[0], argv[1], &t, &err));
        print_table(&t);
        firn_catalog_table_deinit(&t);
    } else if (strcmp(cmd, "drop-table") == 0 && argc == 2) {
        CHECK(firn_catalog_drop_table(cat, argv[0], argv[1], &err));
    } else if (strcmp(cmd, "set-props") == 0 && argc >= 2) {
        kv_args(argc - 2, argv + 2, &props);
        commit_retry(cat, argv[0], argv[1], build_props, &props, &t);
        print_table(&t);
        firn_catalog_table_deinit(&t);
    } else if (strcmp(cmd, "evolve") == 0 && argc == 3) {
        size_t len;
        char *text = slurp(argv[2], &len);
        firn_schema *target = NULL;
        CHECK(firn_schema_from_json(text, len, &target, &err));
        firn_free(text);
        commit_retry(cat, argv[0], argv[1], build_evolve, target, &t);
        print_table(&t);
        firn_catalog_table_deinit(&t);
        firn_schema_free(target);
    } else if (strcmp(cmd, "hammer") == 0 && argc == 4) {
        int n = (int)strtol(argv[3], NULL, 10), retries = 0;
        for (int i = 0; i < n; i++) {
            hammer_arg h = {argv[2], i};
            retries += commit_retry(cat, argv[0], argv[1], build_hammer, &h, &t);
            firn_catalog_table_deinit(&t);
        }
        printf("{\"commits\":%d,\"retries\":%d}\n", n, retries);
    } else {
        return run_more(cat, cmd, argc, argv);
    }
    firn_props_deinit(&props);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: catalog_tool <catalog-name> <db-uri> <warehouse> <command> ...\n");
        return 2;
    }
    srand((unsigned)(firn_now_us() ^ (int64_t)getpid()));
    firn_err err = {0};
    firn_catalog *cat = NULL;
    if (strncmp(argv[2], "http://", 7) == 0 || strncmp(argv[2], "https://", 8) == 0) {
        firn_props props;
        firn_props_init(&props);
        const char *page = getenv("FIRN_REST_PAGE_SIZE");
        if (page)
            firn_props_set(&props, "rest-page-size", page);
        const char *token = getenv("FIRN_REST_TOKEN");
        firn_cred *cred = token ? firn_cred_bearer_new(token) : NULL;
        firn_catalog_rest_opts ro = {.name = argv[1],
                                     .uri = argv[2],
                                     .warehouse = argv[3][0] ? argv[3] : NULL,
                                     .properties = &props,
                                     .cred = cred};
        CHECK(firn_catalog_rest_open(&ro, &cat, &err));
        firn_cred_unref(cred);
        firn_props_deinit(&props);
    } else {
        firn_catalog_sql_opts opts = {.name = argv[1], .uri = argv[2], .warehouse = argv[3]};
        CHECK(firn_catalog_sql_open(&opts, &cat, &err));
    }
    int rc = run(cat, argv[4], argc - 5, argv + 5);
    if (rc == 2)
        fprintf(stderr, "bad command or arguments: %s\n", argv[4]);
    firn_catalog_free(cat);
    return rc;
}
