/* SPDX-License-Identifier: Apache-2.0 */
/* Snapshot producer: a chain of commits (append, row delta, delete by path, truncate, merge)
 * checked by reading the written manifest lists and manifests back, and by the summaries. */
#include "t.h"
#include "firn/manifest.h"

#include <stdlib.h>

typedef struct table {
    char dir[256];
    char meta[300];
    firn_io *io;
    firn_field *schema;
    firn_partition_spec *spec;
    char *list;           /* current manifest list */
    firn_summary summary; /* current summary */
    int64_t snapshot_id;
    int64_t seq;
    int64_t next_row_id; /* v3 */
} table;

static void table_init(table *t)
{
    memset(t, 0, sizeof *t);
    snprintf(t->dir, sizeof t->dir, "/tmp/firn-ice-snap-XXXXXX");
    T_TRUE(mkdtemp(t->dir) != NULL);
    snprintf(t->meta, sizeof t->meta, "%s/metadata", t->dir);
    t->io = firn_io_local_new();
    t->schema = firn_field_new(0, "table", FIRN_TYPE_STRUCT, true);
    firn_field_add(t->schema, firn_field_new(1, "id", FIRN_TYPE_LONG, true));
    firn_field_add(t->schema, firn_field_new(2, "region", FIRN_TYPE_STRING, false));
    t->spec = firn_partition_spec_new(0);
    firn_transform id = {FIRN_TRANSFORM_IDENTITY, 0};
    firn_partition_spec_add(t->spec, 2, 1000, "region", id);
    t->snapshot_id = -1;
}

static void table_deinit(table *t)
{
    firn_free(t->list);
    firn_summary_deinit(&t->summary);
    firn_partition_spec_free(t->spec);
    firn_field_free(t->schema);
    firn_io_free(t->io);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->dir);
    T_EQ_INT(system(cmd), 0);
}

static void file_at(firn_data_file *f,
                    const char *name,
                    const char *region,
                    int64_t rows,
                    firn_file_content content)
{
    char path[256];
    snprintf(path, sizeof path, "file:///w/data/%s.parquet", name);
    firn_data_file_init(f, content, path, 0);
    firn_value v = firn_value_null((firn_ptype){FIRN_TYPE_STRING, 0, 0, 0});
    v.is_null = region == NULL;
    if (region)
        v.bytes = firn_slice_cstr(region);
    firn_data_file_set_partition(f, &v, 1);
    f->record_count = rows;
    f->file_size_in_bytes = rows * 10;
    if (content == FIRN_CONTENT_EQUALITY_DELETES) {
        int32_t ids[1] = {1};
        firn_data_file_set_equality_ids(f, ids, 1);
    }
}

typedef struct change {
    const firn_data_file *data;
    size_t n_data;
    const firn_data_file *deletes;
    size_t n_deletes;
    const char *const *removed;
    size_t n_removed;
    bool truncate;
    size_t merge;
    int format_version; /* 0: 2 */
    const firn_dv_replace *replaces;
    size_t n_replaces;
    const char *const *required; /* data files the deletes refer to */
    size_t n_required;
} change;

static firn_rc commit(table *t, const change *c, firn_snapshot_result *res, firn_err *err)
{
    firn_summary extra;
    firn_summary_init(&extra);
    firn_summary_set(&extra, "firn.position", "0/16B3748");
    firn_snapshot_input in = {
        .format_version = c->format_version ? c->format_version : 2,
        .first_row_id = t->next_row_id,
        .dv_replaces = c->replaces,
        .n_dv_replaces = c->n_replaces,
        .required_data_paths = c->required,
        .n_required_data_paths = c->n_required,
        .snapshot_id = 1000 + t->seq + 1,
        .parent_snapshot_id = t->snapshot_id,
        .sequence_number = t->seq + 1,
        .metadata_location = t->meta,
        .parent_manifest_list = t->list,
        .parent_summary = t->list ? &t->summary : NULL,
        .spec = t->spec,
        .schema = t->schema,
        .schema_json = "{\"type\":\"struct\",\"schema-id\":0,\"fields\":[]}",
        .added_data = c->data,
        .n_added_data = c->n_data,
        .added_deletes = c->deletes,
        .n_added_deletes = c->n_deletes,
        .removed_paths = c->removed,
        .n_removed_paths = c->n_removed,
        .truncate = c->truncate,
        .merge_min_count = c->merge,
        .extra = &extra,
        .codec = FIRN_AVRO_CODEC_DEFLATE,
    };
    firn_rc rc = firn_snapshot_produce(t->io, &in, res, err);
    firn_summary_deinit(&extra);
    if (rc)
        return rc;
    t->seq++;
    t->snapshot_id = in.snapshot_id;
    if (res->added_rows >= 0)
        t->next_row_id = res->first_row_id + res->added_rows;
    firn_free(t->list);
    t->list = firn_strdup(res->manifest_list);
    firn_summary_deinit(&t->summary);
    for (size_t i = 0; i < res->summary.n; i++)
        firn_summary_set(&t->summary, res->summary.kv[i].key, res->summary.kv[i].value);
    return FIRN_OK;
}

static const char *sget(const firn_snapshot_result *r, const char *key)
{
    const char *v = firn_summary_get(&r->summary, key);
    return v ? v : "(absent)";
}

/* Live files of the current snapshot as "path:status:seq" lines, sorted by the list order. */
static void live_files(table *t, char *out, size_t cap, int64_t *out_rows)
{
    firn_err err = {0};
    firn_manifest_file *mfs = NULL;
    size_t n = 0;
    T_OK_ERR(firn_manifest_list_read(t->io, t->list, &mfs, &n, &err), &err);
    size_t o = 0;
    out[0] = 0;
    *out_rows = 0;
    for (size_t i = 0; i < n; i++) {
        firn_manifest *m = NULL;
        T_OK_ERR(firn_manifest_read(t->io, &mfs[i], &m, &err), &err);
        for (size_t k = 0; k < m->n_entries; k++) {
            const firn_manifest_entry *e = &m->entries[k];
            if (e->status == FIRN_ENTRY_DELETED)
                continue;
            const char *base = strrchr(e->file.file_path, '/') + 1;
            o +=
                (size_t)snprintf(out + o, cap - o, "%s@%lld ", base, (long long)e->sequence_number);
            if (e->file.content == FIRN_CONTENT_DATA)
                *out_rows += e->file.record_count;
        }
        firn_manifest_free(m);
    }
    firn_manifest_files_free(mfs, n);
}

T_TEST(commit_chain)
{
    firn_err err = {0};
    table t;
    table_init(&t);
    firn_data_file d[4], del[2];
    file_at(&d[0], "a", "eu", 10, FIRN_CONTENT_DATA);
    file_at(&d[1], "b", "us", 20, FIRN_CONTENT_DATA);
    file_at(&d[2], "c", NULL, 5, FIRN_CONTENT_DATA);
    file_at(&d[3], "d", "eu", 7, FIRN_CONTENT_DATA);
    file_at(&del[0], "p1", "eu", 2, FIRN_CONTENT_POSITION_DELETES);
    file_at(&del[1], "e1", "us", 3, FIRN_CONTENT_EQUALITY_DELETES);
    char live[2048];
    int64_t rows = 0;

    /* 1: append two files. */
    firn_snapshot_result r;
    change c1 = {.data = d, .n_data = 2};
    T_OK_ERR(commit(&t, &c1, &r, &err), &err);
    T_EQ_STR(r.operation, "append");
    T_EQ_STR(r.summary.kv[0].key, "operation");
    T_EQ_STR(sget(&r, "added-data-files"), "2");
    T_EQ_STR(sget(&r, "added-records"), "30");
    T_EQ_STR(sget(&r, "added-files-size"), "300");
    T_EQ_STR(sget(&r, "changed-partition-count"), "2");
    T_EQ_STR(sget(&r, "total-records"), "30");
    T_EQ_STR(sget(&r, "total-data-files"), "2");
    T_EQ_STR(sget(&r, "total-delete-files"), "0");
    T_EQ_STR(sget(&r, "firn.position"), "0/16B3748");
    T_EQ_STR(sget(&r, "deleted-records"), "(absent)");
    T_EQ_UINT(r.n_manifests, 1);
    T_TRUE(strstr(r.manifest_list, "/snap-1001-1-") != NULL);
    firn_snapshot_result_deinit(&r);
    live_files(&t, live, sizeof live, &rows);
    T_EQ_STR(live, "a.parquet@1 b.parquet@1 ");

    /* 2: row delta: one data file, a position and an equality delete file. */
    change c2 = {.data = &d[2], .n_data = 1, .deletes = del, .n_deletes = 2};
    T_OK_ERR(commit(&t, &c2, &r, &err), &err);
    T_EQ_STR(r.operation, "overwrite");
    T_EQ_STR(sget(&r, "added-delete-files"), "2");
    T_EQ_STR(sget(&r, "added-position-delete-files"), "1");
    T_EQ_STR(sget(&r, "added-equality-delete-files"), "1");
    T_EQ_STR(sget(&r, "added-position-deletes"), "2");
    T_EQ_STR(sget(&r, "added-equality-deletes"), "3");
    T_EQ_STR(sget(&r, "total-records"), "35");
    T_EQ_STR(sget(&r, "total-delete-files"), "2");
    T_EQ_STR(sget(&r, "total-position-deletes"), "2");
    T_EQ_STR(sget(&r, "total-files-size"), "400");
    T_EQ_UINT(r.n_manifests, 3);
    T_EQ_UINT(r.manifests_kept, 1);
    firn_snapshot_result_deinit(&r);
    live_files(&t, live, sizeof live, &rows);
    T_EQ_STR(live, "c.parquet@2 p1.parquet@2 e1.parquet@2 a.parquet@1 b.parquet@1 ");

    /* 3: remove a data file and the position delete file. */
    const char *gone[] = {"file:///w/data/p1.parquet", "file:///w/data/a.parquet"};
    change c3 = {.removed = gone, .n_removed = 2};
    T_OK_ERR(commit(&t, &c3, &r, &err), &err);
    T_EQ_STR(r.operation, "delete");
    T_EQ_STR(sget(&r, "deleted-data-files"), "1");
    T_EQ_STR(sget(&r, "deleted-records"), "10");
    T_EQ_STR(sget(&r, "removed-position-delete-files"), "1");
    T_EQ_STR(sget(&r, "removed-delete-files"), "1");
    T_EQ_STR(sget(&r, "removed-files-size"), "120");
    T_EQ_STR(sget(&r, "total-records"), "25");
    T_EQ_STR(sget(&r, "total-data-files"), "2");
    T_EQ_STR(sget(&r, "total-delete-files"), "1");
    T_EQ_STR(sget(&r, "total-position-deletes"), "0");
    T_EQ_UINT(r.manifests_replaced, 2);
    firn_snapshot_result_deinit(&r);
    live_files(&t, live, sizeof live, &rows);
    T_EQ_STR(live, "e1.parquet@2 b.parquet@1 c.parquet@2 ");
    T_EQ_INT(rows, 25);

    /* Removing a file that is not live fails and writes no list. */
    change bad = {.removed = gone, .n_removed = 1};
    T_EQ_INT(commit(&t, &bad, &r, &err), FIRN_ERR_NOT_FOUND);
    change none = {0};
    T_EQ_INT(commit(&t, &none, &r, &err), FIRN_ERR_INVALID);

    /* Deletes that refer to a data file another writer removed (a.parquet) fail; to live ones
     * (b, c) they land. */
    const char *gone_data[] = {"file:///w/data/b.parquet", "file:///w/data/a.parquet"};
    change stale = {.deletes = &del[0], .n_deletes = 1, .required = gone_data, .n_required = 2};
    T_EQ_INT(commit(&t, &stale, &r, &err), FIRN_ERR_NOT_FOUND);
    T_TRUE(strstr(err.msg, "a.parquet") != NULL);
    const char *live_data[] = {"file:///w/data/c.parquet", "file:///w/data/b.parquet"};
    change fresh = {.deletes = &del[0], .n_deletes = 1, .required = live_data, .n_required = 2};
    T_OK_ERR(commit(&t, &fresh, &r, &err), &err);
    firn_snapshot_result_deinit(&r);
    live_files(&t, live, sizeof live, &rows);
    T_EQ_STR(live, "p1.parquet@4 e1.parquet@2 b.parquet@1 c.parquet@2 ");

    /* 4: truncate, then append again. */
    change c4 = {.truncate = true};
    T_OK_ERR(commit(&t, &c4, &r, &err), &err);
    T_EQ_STR(r.operation, "delete");
    T_EQ_STR(sget(&r, "total-records"), "0");
    T_EQ_STR(sget(&r, "total-data-files"), "0");
    T_EQ_STR(sget(&r, "total-delete-files"), "0");
    T_EQ_STR(sget(&r, "total-files-size"), "0");
    firn_snapshot_result_deinit(&r);
    live_files(&t, live, sizeof live, &rows);
    T_EQ_STR(live, "");
    change c5 = {.data = &d[3], .n_data = 1};
    T_OK_ERR(commit(&t, &c5, &r, &err), &err);
    T_EQ_STR(sget(&r, "total-records"), "7");
    firn_snapshot_result_deinit(&r);
    live_files(&t, live, sizeof live, &rows);
    T_EQ_STR(live, "d.parquet@6 ");

    for (int i = 0; i < 4; i++)
        firn_data_file_deinit(&d[i]);
    firn_data_file_deinit(&del[0]);
    firn_data_file_deinit(&del[1]);
    table_deinit(&t);
}

T_TEST(merge_small_manifests)
{
    firn_err err = {0};
    table t;
    table_init(&t);
    firn_data_file d[5];
    char name[8];
    firn_snapshot_result r;
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "m%d", i);
        file_at(&d[i], name, i % 2 ? "eu" : "us", i + 1, FIRN_CONTENT_DATA);
        change c = {.data = &d[i], .n_data = 1, .merge = 3};
        T_OK_ERR(commit(&t, &c, &r, &err), &err);
        /* After 3 carried manifests pile up they are merged into one. */
        T_TRUE(r.n_manifests <= 3);
        firn_snapshot_result_deinit(&r);
    }
    char live[1024];
    int64_t rows = 0;
    live_files(&t, live, sizeof live, &rows);
    T_EQ_INT(rows, 15);
    T_TRUE(strstr(live, "m0.parquet@1") && strstr(live, "m1.parquet@2") &&
           strstr(live, "m2.parquet@3") && strstr(live, "m3.parquet@4") &&
           strstr(live, "m4.parquet@5"));
    T_EQ_STR(firn_summary_get(&t.summary, "total-records"), "15");
    for (int i = 0; i < 5; i++)
        firn_data_file_deinit(&d[i]);
    table_deinit(&t);
}

static void dv_at(firn_data_file *f, const char *puffin, const char *data, int64_t off, int64_t n)
{
    char pp[256], dp[256];
    snprintf(pp, sizeof pp, "file:///w/data/%s.puffin", puffin);
    snprintf(dp, sizeof dp, "file:///w/data/%s.parquet", data);
    firn_data_file_init_dv(f, pp, 1000, 0, dp, off, 40 + n, n);
    firn_value v = firn_value_null((firn_ptype){FIRN_TYPE_STRING, 0, 0, 0});
    v.is_null = false;
    v.bytes = firn_slice_cstr("eu");
    firn_data_file_set_partition(f, &v, 1);
}

/* Every live entry of the current snapshot: data files with their first_row_id, DVs with their
 * referenced file and offset; and the manifest list's first_row_ids. */
static void live_v3(table *t, char *out, size_t cap)
{
    firn_err err = {0};
    firn_manifest_file *mfs = NULL;
    size_t n = 0, o = 0;
    T_OK_ERR(firn_manifest_list_read(t->io, t->list, &mfs, &n, &err), &err);
    out[0] = 0;
    for (size_t i = 0; i < n; i++) {
        o += (size_t)snprintf(out + o, cap - o, "[%s", mfs[i].content ? "del" : "data");
        if (mfs[i].has_first_row_id)
            o += (size_t)snprintf(out + o, cap - o, "@%lld", (long long)mfs[i].first_row_id);
        o += (size_t)snprintf(out + o, cap - o, "]");
        firn_manifest *m = NULL;
        T_OK_ERR(firn_manifest_read(t->io, &mfs[i], &m, &err), &err);
        T_EQ_INT(m->format_version, 3);
        for (size_t k = 0; k < m->n_entries; k++) {
            const firn_data_file *f = &m->entries[k].file;
            if (m->entries[k].status == FIRN_ENTRY_DELETED)
                continue;
            const char *base = strrchr(f->file_path, '/') + 1;
            if (f->content == FIRN_CONTENT_DATA) {
                T_TRUE(f->has_first_row_id);
                o += (size_t)snprintf(out + o, cap - o, " %s#%lld", base,
                                      (long long)f->first_row_id);
            } else {
                T_TRUE(firn_data_file_is_dv(f) && f->has_content_offset);
                o += (size_t)snprintf(
                    out + o, cap - o, " %s+%lld>%s(%lld)", base, (long long)f->content_offset,
                    strrchr(f->referenced_data_file, '/') + 1, (long long)f->record_count);
            }
        }
        o += (size_t)snprintf(out + o, cap - o, " ");
        firn_manifest_free(m);
    }
    firn_manifest_files_free(mfs, n);
}

T_TEST(v3_row_ids_and_dvs)
{
    firn_err err = {0};
    table t;
    table_init(&t);
    t.next_row_id = 100;
    firn_data_file d[3], dv[4], pd;
    file_at(&d[0], "a", "eu", 10, FIRN_CONTENT_DATA);
    file_at(&d[1], "b", "eu", 20, FIRN_CONTENT_DATA);
    file_at(&d[2], "c", "eu", 5, FIRN_CONTENT_DATA);
    dv_at(&dv[0], "p1", "a", 4, 2);
    dv_at(&dv[1], "p2", "a", 4, 3);
    dv_at(&dv[2], "p2", "b", 50, 1);
    dv_at(&dv[3], "p3", "a", 4, 4);
    file_at(&pd, "pos", "eu", 1, FIRN_CONTENT_POSITION_DELETES);
    char live[2048];
    firn_snapshot_result r;

    /* 1: append: the data manifest takes row ids [100, 130). */
    change c1 = {.data = d, .n_data = 2, .format_version = 3};
    T_OK_ERR(commit(&t, &c1, &r, &err), &err);
    T_EQ_INT(r.first_row_id, 100);
    T_EQ_INT(r.added_rows, 30);
    firn_snapshot_result_deinit(&r);
    live_v3(&t, live, sizeof live);
    T_EQ_STR(live, "[data@100] a.parquet#100 b.parquet#110 ");

    /* 2: a data file and the first DV of a. */
    change c2 = {
        .data = &d[2], .n_data = 1, .deletes = &dv[0], .n_deletes = 1, .format_version = 3};
    T_OK_ERR(commit(&t, &c2, &r, &err), &err);
    T_EQ_STR(r.operation, "overwrite");
    T_EQ_INT(r.first_row_id, 130);
    T_EQ_INT(r.added_rows, 5);
    T_EQ_STR(sget(&r, "added-dvs"), "1");
    T_EQ_STR(sget(&r, "added-delete-files"), "1");
    T_EQ_STR(sget(&r, "added-position-delete-files"), "(absent)");
    T_EQ_STR(sget(&r, "added-position-deletes"), "2");
    T_EQ_STR(sget(&r, "added-files-size"), "92"); /* 50 bytes of data + the 42-byte blob */
    T_EQ_STR(sget(&r, "total-delete-files"), "1");
    firn_snapshot_result_deinit(&r);
    live_v3(&t, live, sizeof live);
    T_EQ_STR(live, "[data@130] c.parquet#130 [del] p1.puffin+4>a.parquet(2) "
                   "[data@100] a.parquet#100 b.parquet#110 ");

    /* 3: a DV for a that ignores the live one, or expects another: refused. */
    change bad = {.deletes = &dv[1], .n_deletes = 1, .format_version = 3};
    T_EQ_INT(commit(&t, &bad, &r, &err), FIRN_ERR_EXISTS);
    firn_dv_replace wrong = {"file:///w/data/a.parquet", "file:///w/data/p1.puffin", 8};
    bad.replaces = &wrong;
    bad.n_replaces = 1;
    T_EQ_INT(commit(&t, &bad, &r, &err), FIRN_ERR_EXISTS);
    firn_dv_replace ghost = {"file:///w/data/b.parquet", "file:///w/data/p0.puffin", 4};
    change bad2 = {.deletes = &dv[2],
                   .n_deletes = 1,
                   .format_version = 3,
                   .replaces = &ghost,
                   .n_replaces = 1};
    T_EQ_INT(commit(&t, &bad2, &r, &err), FIRN_ERR_NOT_FOUND);
    change bad3 = {.deletes = &pd, .n_deletes = 1, .format_version = 3};
    T_EQ_INT(commit(&t, &bad3, &r, &err), FIRN_ERR_INVALID);

    /* 4: one Puffin with new DVs for a (replacing p1) and b (first). */
    firn_dv_replace ok = {"file:///w/data/a.parquet", "file:///w/data/p1.puffin", 4};
    change c4 = {
        .deletes = &dv[1], .n_deletes = 2, .format_version = 3, .replaces = &ok, .n_replaces = 1};
    T_OK_ERR(commit(&t, &c4, &r, &err), &err);
    T_EQ_STR(r.operation, "delete");
    T_EQ_INT(r.added_rows, 0);
    T_EQ_STR(sget(&r, "added-dvs"), "2");
    T_EQ_STR(sget(&r, "removed-dvs"), "1");
    T_EQ_STR(sget(&r, "removed-delete-files"), "1");
    T_EQ_STR(sget(&r, "total-delete-files"), "2");
    T_EQ_STR(sget(&r, "total-position-deletes"), "4");
    firn_snapshot_result_deinit(&r);
    live_v3(&t, live, sizeof live);
    T_EQ_STR(live, "[del] p2.puffin+4>a.parquet(3) p2.puffin+50>b.parquet(1) [del] "
                   "[data@130] c.parquet#130 [data@100] a.parquet#100 b.parquet#110 ");

    /* 5: replacing a's DV rewrites the manifest holding p2's two DVs: b's stays. Merging the
     * data manifests gives a new manifest whose files keep their row ids. */
    firn_dv_replace ok2 = {"file:///w/data/a.parquet", "file:///w/data/p2.puffin", 4};
    change c5 = {.deletes = &dv[3],
                 .n_deletes = 1,
                 .format_version = 3,
                 .replaces = &ok2,
                 .n_replaces = 1,
                 .merge = 2};
    T_OK_ERR(commit(&t, &c5, &r, &err), &err);
    T_EQ_INT(r.first_row_id, 135);
    T_EQ_INT(r.added_rows, 35); /* the merged manifest is new: its 35 existing rows count */
    firn_snapshot_result_deinit(&r);
    live_v3(&t, live, sizeof live);
    T_EQ_STR(live, "[del] p3.puffin+4>a.parquet(4) [del] p2.puffin+50>b.parquet(1) "
                   "[data@135] c.parquet#130 a.parquet#100 b.parquet#110 ");

    for (int i = 0; i < 3; i++)
        firn_data_file_deinit(&d[i]);
    for (int i = 0; i < 4; i++)
        firn_data_file_deinit(&dv[i]);
    firn_data_file_deinit(&pd);
    table_deinit(&t);
}

T_MAIN(T_CASE(commit_chain), T_CASE(merge_small_manifests), T_CASE(v3_row_ids_and_dvs))
