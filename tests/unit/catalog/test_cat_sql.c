/* SPDX-License-Identifier: Apache-2.0 */
/* The SQLite SQL catalog: namespaces, table create/load/list/drop, commits with requirements,
 * and a lost compare-and-swap between two catalog handles on one database. */
#include "firn/catalog.h"
#include "t.h"

#include <stdlib.h>
#include <string.h>

static char dir[256];

static firn_catalog *open_cat(void)
{
    char uri[512], wh[512];
    snprintf(uri, sizeof(uri), "sqlite:///%s/cat.db", dir);
    snprintf(wh, sizeof(wh), "file://%s/wh/", dir);
    firn_catalog_sql_opts o = {.name = "t", .uri = uri, .warehouse = wh};
    firn_catalog *c = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_catalog_sql_open(&o, &c, &err), &err);
    return c;
}

static firn_schema *schema(void)
{
    firn_field *root = firn_field_new(0, "", FIRN_TYPE_STRUCT, true);
    firn_field_add(root, firn_field_new(1, "id", FIRN_TYPE_LONG, true));
    return firn_schema_new(0, root);
}

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/firn_cat_XXXXXX");
    T_TRUE(mkdtemp(dir) != NULL);
}

T_TEST(namespaces_and_tables)
{
    setup();
    firn_err err = {0};
    firn_catalog *c = open_cat();
    firn_props p;
    firn_props_init(&p);
    firn_props_set(&p, "owner", "me");
    T_OK_ERR(firn_catalog_create_namespace(c, "a.b", &p, &err), &err);
    T_OK_ERR(firn_catalog_create_namespace(c, "z", NULL, &err), &err);
    T_EQ_INT(firn_catalog_create_namespace(c, "z", NULL, &err), FIRN_ERR_EXISTS);
    firn_strlist l;
    T_OK_ERR(firn_catalog_list_namespaces(c, NULL, &l, &err), &err);
    T_EQ_INT(l.count, 2);
    T_EQ_STR(l.items[0], "a");
    T_EQ_STR(l.items[1], "z");
    firn_strlist_deinit(&l);
    T_OK_ERR(firn_catalog_list_namespaces(c, "a", &l, &err), &err);
    T_EQ_INT(l.count, 1);
    T_EQ_STR(l.items[0], "a.b");
    firn_strlist_deinit(&l);
    bool exists;
    T_OK_ERR(firn_catalog_namespace_exists(c, "a", &exists, &err), &err);
    T_TRUE(exists);
    firn_props got;
    T_OK_ERR(firn_catalog_load_namespace(c, "z", &got, &err), &err);
    T_EQ_STR(firn_props_get(&got, "exists"), "true");
    firn_props_deinit(&got);

    firn_schema *s = schema();
    firn_table_create opts = {.schema = s};
    firn_catalog_table t;
    T_EQ_INT(firn_catalog_create_table(c, "nope", "t", &opts, &t, &err), FIRN_ERR_NOT_FOUND);
    T_OK_ERR(firn_catalog_create_table(c, "a.b", "t", &opts, &t, &err), &err);
    char want[512];
    snprintf(want, sizeof(want), "file://%s/wh/a.b/t", dir);
    T_EQ_STR(t.metadata->location, want);
    T_TRUE(strstr(t.metadata_location, "/a.b/t/metadata/00000-") != NULL);
    firn_catalog_table_deinit(&t);
    T_EQ_INT(firn_catalog_create_table(c, "a.b", "t", &opts, &t, &err), FIRN_ERR_EXISTS);
    T_OK_ERR(firn_catalog_list_tables(c, "a.b", &l, &err), &err);
    T_EQ_INT(l.count, 1);
    firn_strlist_deinit(&l);
    T_EQ_INT(firn_catalog_drop_namespace(c, "a.b", &err), FIRN_ERR_INVALID);
    T_OK_ERR(firn_catalog_drop_table(c, "a.b", "t", &err), &err);
    T_EQ_INT(firn_catalog_load_table(c, "a.b", "t", &t, &err), FIRN_ERR_NOT_FOUND);
    T_OK_ERR(firn_catalog_drop_namespace(c, "a.b", &err), &err);
    firn_schema_free(s);
    firn_props_deinit(&p);
    firn_catalog_free(c);
}

T_TEST(commits_and_conflicts)
{
    setup();
    firn_err err = {0};
    firn_catalog *c1 = open_cat(), *c2 = open_cat();
    T_OK_ERR(firn_catalog_create_namespace(c1, "ns", NULL, &err), &err);
    firn_schema *s = schema();
    firn_table_create opts = {.schema = s};
    firn_catalog_table t0, t1, t2;
    T_OK_ERR(firn_catalog_create_table(c1, "ns", "t", &opts, &t0, &err), &err);

    /* both writers saw t0 and assert main does not exist; the second loses */
    firn_table_changes ch;
    for (int w = 0; w < 2; w++) {
        firn_table_changes_init(&ch);
        firn_table_changes_require_uuid(&ch, t0.metadata->table_uuid);
        firn_table_changes_require_ref(&ch, "main", -1);
        firn_snapshot *snap = firn_snapshot_new(100 + w, 1, 1716000000000, "/m/l.avro");
        firn_props_set(&snap->summary, "operation", "append");
        firn_table_changes_add_snapshot(&ch, snap);
        firn_table_changes_set_ref(&ch, "main", 100 + w, false);
        firn_snapshot_free(snap);
        if (w == 0) {
            T_OK_ERR(firn_catalog_commit(c1, "ns", "t", &ch, &t1, &err), &err);
        } else {
            T_EQ_INT(firn_catalog_commit(c2, "ns", "t", &ch, &t2, &err), FIRN_ERR_CONFLICT);
            T_TRUE(strstr(err.msg, "ref \"main\"") != NULL);
        }
        firn_table_changes_deinit(&ch);
    }
    T_EQ_INT(t1.metadata->current_snapshot_id, 100);
    T_TRUE(strstr(t1.metadata_location, "/metadata/00001-") != NULL);
    T_EQ_INT(t1.metadata->n_metadata_log, 1);
    T_EQ_STR(t1.metadata->metadata_log[0].metadata_file, t0.metadata_location);

    /* the second handle loads the new state and reads what the first wrote */
    T_OK_ERR(firn_catalog_load_table(c2, "ns", "t", &t2, &err), &err);
    T_EQ_STR(t2.metadata_location, t1.metadata_location);
    T_EQ_INT(firn_table_metadata_current_snapshot(t2.metadata)->snapshot_id, 100);
    firn_catalog_table_deinit(&t2);

    /* a commit without updates changes nothing */
    firn_table_changes_init(&ch);
    T_OK_ERR(firn_catalog_commit(c2, "ns", "t", &ch, &t2, &err), &err);
    T_EQ_STR(t2.metadata_location, t1.metadata_location);
    firn_catalog_table_deinit(&t2);
    firn_table_changes_deinit(&ch);

    firn_catalog_table_deinit(&t0);
    firn_catalog_table_deinit(&t1);
    firn_schema_free(s);
    firn_catalog_free(c1);
    firn_catalog_free(c2);
}

/* Table names are any text: the location keeps them inside the namespace's folder. */
T_TEST(odd_names_stay_inside_the_warehouse)
{
    setup();
    firn_err err = {0};
    firn_catalog *c = open_cat();
    T_OK_ERR(firn_catalog_create_namespace(c, "ns", NULL, &err), &err);
    T_OK_ERR(firn_catalog_create_namespace(c, "a/b", NULL, &err), &err);
    firn_schema *s = schema();
    firn_table_create opts = {.schema = s};
    static const struct {
        const char *ns, *name, *segment;
    } cases[] = {
        {"ns", "../../../../tmp/pgevil", "ns/..~2F..~2F..~2F..~2Ftmp~2Fpgevil"},
        {"ns", "..", "ns/~2E~2E"},
        {"ns", ".", "ns/~2E"},
        {"ns", "a\\b%2F\tc~", "ns/a~5Cb~252F~09c~7E"},
        {"ns", "..x", "ns/..x"},
        {"ns", "caf\xc3\xa9 \"q\"", "ns/caf\xc3\xa9 \"q\""},
        {"a/b", "t", "a~2Fb/t"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        firn_catalog_table t;
        T_OK_ERR(firn_catalog_create_table(c, cases[i].ns, cases[i].name, &opts, &t, &err), &err);
        char want[512];
        snprintf(want, sizeof(want), "file://%s/wh/%s", dir, cases[i].segment);
        T_EQ_STR(t.metadata->location, want);
        /* the metadata file is where the location says, inside the warehouse */
        const char *path = t.metadata_location + strlen("file://");
        T_TRUE(strncmp(path, want + strlen("file://"), strlen(want) - strlen("file://")) == 0);
        FILE *f = fopen(path, "rb");
        T_TRUE(f != NULL);
        if (f)
            fclose(f);
        firn_catalog_table_deinit(&t);
        T_OK_ERR(firn_catalog_load_table(c, cases[i].ns, cases[i].name, &t, &err), &err);
        T_EQ_STR(t.metadata->location, want);
        firn_catalog_table_deinit(&t);
    }
    firn_schema_free(s);
    firn_catalog_free(c);
}

T_MAIN(T_CASE(namespaces_and_tables),
       T_CASE(commits_and_conflicts),
       T_CASE(odd_names_stay_inside_the_warehouse))
