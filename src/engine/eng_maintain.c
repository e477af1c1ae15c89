/* SPDX-License-Identifier: Apache-2.0 */
/* `firn maintain status|expire` (docs/maintenance.md "By hand"): table maintenance run by hand
 * on any table of a destination's catalog, also on tables no stream writes now. Works on the
 * catalog alone (no source): the same expiry the committer runs (eng_expire.c), with the
 * destination's maintenance settings. */
#include "engine_int.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ORPHAN_DEFAULT_AGE_MS ((int64_t)3 * 86400 * 1000)

static _Thread_local firn_fault maintain_fault;

static firn_rc fault(firn_fault where, firn_rc rc)
{
    if (rc)
        maintain_fault = where;
    return rc;
}

firn_fault firn__maintain_fault(void)
{
    return maintain_fault;
}

/* Splits "ns.name" at its last dot (namespaces may be dotted) into owned parts. */
static firn_rc split_table(const char *arg, char **ns, char **name, firn_err *err)
{
    const char *dot = strrchr(arg, '.');
    if (!dot || dot == arg || dot[1] == '\0')
        return firn_err_set(
            err, FIRN_ERR_CONFIG,
            "table \"%s\" must be given as NAMESPACE.TABLE (e.g. shop_public.orders)", arg);
    *ns = firn_strndup(arg, (size_t)(dot - arg));
    *name = firn_strdup(dot + 1);
    return FIRN_OK;
}

/* Every table of the catalog, as "ns.name" (namespaces listed from the root, nested ones too). */
static firn_rc all_tables(firn_catalog *cat, firn_strlist *out, firn_err *err)
{
    firn_strlist todo = {0};
    firn_strlist_push(&todo, "");
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; i < todo.count && rc == FIRN_OK; i++) {
        firn_strlist children = {0};
        const char *parent = todo.items[i][0] ? todo.items[i] : NULL;
        rc = firn_catalog_list_namespaces(cat, parent, &children, err);
        if (rc == FIRN_ERR_UNSUPPORTED && parent) { /* no nested namespaces */
            firn_err_clear(err);
            rc = FIRN_OK;
        }
        for (size_t k = 0; rc == FIRN_OK && k < children.count; k++) {
            bool seen = false;
            for (size_t j = 0; j < todo.count && !seen; j++)
                seen = strcmp(todo.items[j], children.items[k]) == 0;
            if (!seen)
                firn_strlist_push(&todo, children.items[k]);
        }
        firn_strlist_deinit(&children);
        if (rc || !parent)
            continue;
        firn_strlist tables = {0};
        rc = firn_catalog_list_tables(cat, parent, &tables, err);
        for (size_t k = 0; rc == FIRN_OK && k < tables.count; k++) {
            char full[2048];
            snprintf(full, sizeof(full), "%s.%s", parent, tables.items[k]);
            firn_strlist_push(out, full);
        }
        firn_strlist_deinit(&tables);
    }
    firn_strlist_deinit(&todo);
    return rc;
}

static const char *summary(const firn_snapshot *s, const char *key)
{
    const char *v = s ? firn_props_get(&s->summary, key) : NULL;
    return v ? v : "0";
}

/* One line per table: snapshots and refs, metadata size against the budget, files and
 * records from the current snapshot's summary totals. */
static void print_status(const firn_config *cfg, const firn__table *t, FILE *out)
{
    const firn_table_metadata *md = t->cat.metadata;
    const firn_snapshot *s = firn_table_metadata_current_snapshot(md);
    firn_buf b;
    firn_buf_init(&b, (size_t)1 << 30);
    size_t bytes = firn_table_metadata_to_json(md, &b, NULL) == FIRN_OK ? b.len : 0;
    firn_buf_deinit(&b);
    uint64_t budget = firn__metadata_budget(&cfg->destination);
    char size_text[FIRN_SIZE_TEXT_MAX], budget_text[FIRN_SIZE_TEXT_MAX];
    firn_size_format(bytes, size_text);
    firn_size_format(budget, budget_text);
    int64_t oldest = -1;
    for (size_t i = 0; i < md->n_snapshots; i++) {
        if (oldest < 0 || md->snapshots[i]->timestamp_ms < oldest)
            oldest = md->snapshots[i]->timestamp_ms;
    }
    char age[FIRN_DURATION_TEXT_MAX] = "-";
    if (oldest >= 0)
        firn_duration_format((firn_now_us() / 1000 - oldest) / 1000, age);
    fprintf(out,
            "%s: %zu snapshot%s (oldest %s ago), %zu ref%s, metadata %s (%.0f%% of %s); %s data "
            "files, %s delete files, %s records, %s position deletes, %s equality deletes\n",
            t->display, md->n_snapshots, md->n_snapshots == 1 ? "" : "s", age, md->n_refs,
            md->n_refs == 1 ? "" : "s", size_text,
            budget ? 100.0 * (double)bytes / (double)budget : 0.0, budget_text,
            summary(s, "total-data-files"), summary(s, "total-delete-files"),
            summary(s, "total-records"), summary(s, "total-position-deletes"),
            summary(s, "total-equality-deletes"));
}

static firn_rc dry_run(const firn__table *t, FILE *out)
{
    const firn_maintenance_config *m = &t->eng->cfg->destination.maintenance;
    firn_expire_policy p;
    firn_expire_policy_from_table(t->cat.metadata, m->snapshot_max_age_ms, m->min_snapshots_to_keep,
                                  &p);
    firn_expire_plan plan;
    firn_expire_plan_make(t->cat.metadata, &p, firn_now_us() / 1000, &plan);
    fprintf(out, "%s: would expire %zu of %zu snapshots and remove %zu refs (dry run)\n",
            t->display, plan.n_expired, t->cat.metadata->n_snapshots, plan.n_removed_refs);
    firn_expire_plan_deinit(&plan);
    return FIRN_OK;
}

/* ---- orphans ------------------------------------------------------------------------------ */

/* The form locations are compared in: a local path for file:// and plain paths (spellings of
 * one file differ: file:/x, file:///x, /x), else the location as written. Owned. */
static char *comparable(const char *loc)
{
    if (strstr(loc, "://") == NULL || strncmp(loc, "file:", 5) == 0) {
        char path[4096];
        if (firn_io_local_path(loc, path, sizeof(path), NULL) == FIRN_OK)
            return firn_strdup(path);
    }
    return firn_strdup(loc);
}

/* "scheme://authority" of loc (owned), or NULL for local locations. */
static char *root_of(const char *loc)
{
    const char *sep = strstr(loc, "://");
    if (!sep || strncmp(loc, "file:", 5) == 0)
        return NULL;
    const char *slash = strchr(sep + 3, '/');
    return firn_strndup(loc, slash ? (size_t)(slash - loc) : strlen(loc));
}

typedef struct orphan_scan {
    const char *table;
    char *root;           /* scheme://authority of the table location (NULL: local) */
    const char *location; /* the table location as its metadata says */
    const char *loc_path; /* ... its path part after the authority */
    firn__strset refs;    /* comparable forms of every referenced file */
} orphan_scan;

/* Records loc as referenced. A location whose path is inside the table's but whose scheme or
 * authority differ (s3a:// against s3://) makes the scan refuse: its files would all look
 * unreferenced under the table location's spelling. */
static firn_rc reference(orphan_scan *o, const char *loc, firn_err *err)
{
    char *r = root_of(loc);
    bool differs = (r == NULL) != (o->root == NULL) || (r && strcmp(r, o->root) != 0);
    if (differs && o->root) {
        const char *path = r ? loc + strlen(r) : loc;
        if (strncmp(path, o->loc_path, strlen(o->loc_path)) == 0) {
            firn_free(r);
            return firn_err_set(err, FIRN_ERR_INVALID,
                                "table \"%s\": its metadata names \"%s\", under another scheme or "
                                "authority than the table location \"%s\": orphans are not looked "
                                "for (files of one spelling would look unreferenced under the "
                                "other)",
                                o->table, loc, o->location);
        }
    }
    firn_free(r);
    char *c = comparable(loc);
    firn__strset_add(&o->refs, c);
    firn_free(c);
    return FIRN_OK;
}

/* Every file the metadata references: metadata files, manifest lists, manifests, their
 * entries (deleted ones too: never delete a file any metadata still names), statistics. */
static firn_rc collect_refs(firn__table *t, orphan_scan *o, firn_err *err)
{
    const firn_table_metadata *md = t->cat.metadata;
    firn_io *io = t->eng->io;
    if (t->cat.metadata_location)
        FIRN_TRY(reference(o, t->cat.metadata_location, err));
    for (size_t i = 0; i < md->n_metadata_log; i++)
        FIRN_TRY(reference(o, md->metadata_log[i].metadata_file, err));
    static const char *const stats[] = {"statistics", "partition-statistics"};
    for (size_t k = 0; md->extra && k < 2; k++) {
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(md->extra, stats[k]), i, e)
        {
            const char *p = json_string_value(json_object_get(e, "statistics-path"));
            if (p)
                FIRN_TRY(reference(o, p, err));
        }
    }
    firn__strset manifests = {0}, files = {0};
    firn_rc rc = firn__snapshot_files(io, (const firn_snapshot *const *)md->snapshots,
                                      md->n_snapshots, true, &manifests, &files, err);
    for (size_t i = 0; rc == FIRN_OK && i < manifests.n; i++)
        rc = reference(o, manifests.v[i], err);
    for (size_t i = 0; rc == FIRN_OK && i < files.n; i++)
        rc = reference(o, files.v[i], err);
    firn__strset_free(&manifests);
    firn__strset_free(&files);
    return rc;
}

typedef struct orphan_list {
    orphan_scan *scan;
    const char *index_dir; /* comparable form of <location>/metadata/firn-index/ */
    int64_t cutoff_ms;
    firn__strset found;
    uint64_t bytes;
    size_t young; /* unreferenced but too recent (or of unknown age) to be orphans */
} orphan_list;

static firn_rc
on_object(void *vctx, const char *loc, uint64_t size, int64_t modified_ms, firn_err *err)
{
    (void)err;
    orphan_list *l = vctx;
    char *c = comparable(loc);
    bool skip = strncmp(c, l->index_dir, strlen(l->index_dir)) == 0 || /* firn's own */
                firn__strset_has(&l->scan->refs, c);
    firn_free(c);
    if (skip)
        return FIRN_OK;
    if (modified_ms <= 0 || modified_ms > l->cutoff_ms) {
        l->young++;
        return FIRN_OK;
    }
    firn__strset_add(&l->found, loc);
    l->bytes += size;
    return FIRN_OK;
}

static firn_rc orphans(firn__table *t, const firn_maintain_options *o, FILE *out, firn_err *err)
{
    const firn_table_metadata *md = t->cat.metadata;
    size_t ln = strlen(md->location);
    while (ln > 1 && md->location[ln - 1] == '/')
        ln--;
    char *location = firn_strndup(md->location, ln);
    orphan_scan scan = {.table = t->display, .location = location, .root = root_of(location)};
    scan.loc_path = scan.root ? location + strlen(scan.root) : location;
    firn_rc rc = collect_refs(t, &scan, err);
    char index_dir[4200];
    char *cloc = comparable(location);
    snprintf(index_dir, sizeof(index_dir), "%s/metadata/firn-index/", cloc);
    firn_free(cloc);
    int64_t age = o->older_than_ms > 0 ? o->older_than_ms : ORPHAN_DEFAULT_AGE_MS;
    orphan_list l = {
        .scan = &scan, .index_dir = index_dir, .cutoff_ms = firn_now_us() / 1000 - age};
    if (rc == FIRN_OK)
        rc = firn_io_list(t->eng->io, location, on_object, &l, err);
    size_t deleted = 0, failed = 0;
    for (size_t i = 0; rc == FIRN_OK && i < l.found.n; i++) {
        if (!o->delete_orphans) {
            fprintf(out, "%s: orphan %s\n", t->display, l.found.v[i]);
            continue;
        }
        firn_err derr = {0};
        firn_rc drc = firn_io_remove(t->eng->io, l.found.v[i], &derr);
        if (drc == FIRN_OK || drc == FIRN_ERR_NOT_FOUND) {
            deleted++;
        } else {
            failed++;
            FIRN_LOG(FIRN_LOG_WARN, "engine", "table \"%s\": orphan not deleted: %s", t->display,
                     derr.msg);
        }
    }
    char size_text[FIRN_SIZE_TEXT_MAX];
    firn_size_format(l.bytes, size_text);
    if (rc == FIRN_OK && o->delete_orphans)
        fprintf(out,
                "%s: deleted %zu orphan files (%s)%s; %zu unreferenced files are newer than "
                "the threshold\n",
                t->display, deleted, size_text, failed ? ", some could not be deleted" : "",
                l.young);
    else if (rc == FIRN_OK)
        fprintf(out,
                "%s: %zu orphan files (%s), %zu unreferenced files newer than the threshold "
                "(a dry run: --delete removes the orphans)\n",
                t->display, l.found.n, size_text, l.young);
    if (rc == FIRN_OK && failed)
        rc = firn_err_set(err, FIRN_ERR_IO, "table \"%s\": %zu orphan files could not be deleted",
                          t->display, failed);
    firn__strset_free(&l.found);
    firn__strset_free(&scan.refs);
    firn_free(scan.root);
    firn_free(location);
    return rc;
}

static firn_rc one_table(
    firn__engine *e, const firn_maintain_options *o, const char *full, FILE *out, firn_err *err)
{
    firn__table t;
    memset(&t, 0, sizeof(t));
    t.eng = e;
    FIRN_TRY(fault(FIRN_FAULT_CONFIG, split_table(full, &t.ns, &t.name, err)));
    t.display = firn_strdup(full);
    firn_rc rc = firn_catalog_load_table(e->catalog, t.ns, t.name, &t.cat, err);
    bool named = false;
    if (rc == FIRN_ERR_NOT_FOUND) {
        rc = firn_err_set(err, FIRN_ERR_NOT_FOUND,
                          "table \"%s\" does not exist in the catalog (firn maintain status lists "
                          "the tables)",
                          full);
        named = true;
    }
    if (rc == FIRN_OK) {
        if (o->action == FIRN_MAINTAIN_STATUS) {
            print_status(e->cfg, &t, out);
        } else if (o->action == FIRN_MAINTAIN_ORPHANS) {
            rc = orphans(&t, o, out, err);
        } else if (o->dry_run) {
            rc = dry_run(&t, out);
        } else {
            firn__expire_result res;
            rc = firn__expire_run(&t, true, &res, err);
            if (rc == FIRN_OK)
                fprintf(out,
                        "%s: expired %zu snapshots (%zu kept), removed %zu refs; deleted %zu "
                        "manifest lists, %zu manifests, %zu data and delete files%s\n",
                        t.display, res.expired, t.cat.metadata->n_snapshots, res.refs_removed,
                        res.lists_deleted, res.manifests_deleted, res.files_deleted,
                        res.delete_failures ? " (some files could not be deleted: see the log)"
                                            : "");
        }
    }
    if (rc && !named)
        firn_err_context(err, "while maintaining table \"%s\"", full);
    firn_catalog_table_deinit(&t.cat);
    firn_free(t.ns);
    firn_free(t.name);
    firn_free(t.display);
    return fault(rc == FIRN_ERR_CONFIG ? FIRN_FAULT_CONFIG : FIRN_FAULT_DESTINATION, rc);
}

/* A SQL catalog file must exist already: opening it would create an empty one, and a mistyped
 * path would look like a healthy catalog without tables. */
static firn_rc sql_catalog_exists(const firn_catalog_config *cc, firn_err *err)
{
    if (cc->kind != FIRN_CATALOG_SQL || !cc->uri)
        return FIRN_OK;
    const char *path = cc->uri;
    if (strncmp(path, "sqlite:///", 10) == 0)
        path += 10;
    else if (strstr(path, "://"))
        return FIRN_OK; /* the catalog reports what it cannot open */
    struct stat st;
    if (stat(path, &st) == 0)
        return FIRN_OK;
    return firn_err_set(err, FIRN_ERR_CONFIG,
                        "SQL catalog \"%s\" does not exist (firn sync creates it; check "
                        "\"catalog.uri\" of the destination file)",
                        path);
}

firn_rc firn__engine_maintain(const firn_config *cfg,
                              const firn_maintain_options *o,
                              FILE *out,
                              firn_err *err)
{
    maintain_fault = FIRN_FAULT_NONE;
    for (size_t i = 0; i < o->n_tables; i++) { /* every name is checked before anything runs */
        char *ns = NULL, *name = NULL;
        firn_rc nrc = split_table(o->tables[i], &ns, &name, err);
        firn_free(ns);
        firn_free(name);
        if (nrc)
            return fault(FIRN_FAULT_CONFIG, nrc);
    }
    FIRN_TRY(fault(FIRN_FAULT_CONFIG, sql_catalog_exists(&cfg->destination.catalog, err)));
    firn__engine e;
    memset(&e, 0, sizeof(e));
    e.cfg = cfg;
    firn_rc rc =
        firn__engine_open_destination(&cfg->destination, &e.catalog, &e.io, &e.io_owned, err);
    if (rc)
        return fault(rc == FIRN_ERR_CONFIG ? FIRN_FAULT_CONFIG : FIRN_FAULT_DESTINATION, rc);
    firn_strlist tables = {0};
    for (size_t i = 0; i < o->n_tables; i++)
        firn_strlist_push(&tables, o->tables[i]);
    if (o->n_tables == 0)
        rc = fault(FIRN_FAULT_DESTINATION, all_tables(e.catalog, &tables, err));
    if (rc == FIRN_OK && tables.count == 0)
        fprintf(out, "the catalog has no tables\n");
    firn_rc first = rc;
    firn_err first_err = *err;
    firn_fault first_fault = maintain_fault;
    for (size_t i = 0; rc == FIRN_OK && i < tables.count; i++) {
        firn_err terr = {0};
        firn_rc trc = one_table(&e, o, tables.items[i], out, &terr);
        if (trc && first != FIRN_OK) /* the first failure ends the command's output */
            FIRN_LOG(FIRN_LOG_ERROR, "engine", "%s", terr.msg);
        if (trc && first == FIRN_OK) { /* the other tables still get their turn */
            first = trc;
            first_err = terr;
            first_fault = maintain_fault;
        }
    }
    maintain_fault = first_fault;
    firn_strlist_deinit(&tables);
    if (e.io_owned)
        firn_io_free(e.io);
    firn_catalog_free(e.catalog);
    if (first)
        *err = first_err;
    return first;
}
