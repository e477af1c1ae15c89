/* SPDX-License-Identifier: Apache-2.0 */
/* Appends data files to one table through firn's engine commit path, for the concurrent-commit
 * interop test (tests/interop/test_iceberg_firn_race.py):
 *   commit_race <catalog-name> <db-uri> <warehouse> <ns> <table> <writer> <commits> <rows>
 *               <first-id> <start-at-us>
 * Waits until the wall clock reaches start-at-us (µs since the epoch; 0: at once), then makes
 * `commits` commits, each one Parquet data file of `rows` rows (id = first-id + k * rows + r,
 * writer = <writer>, n = k) written by the engine's table writer (firn__write_data_files) and
 * committed by firn__table_commit: snapshot producer + catalog compare-and-swap, with the
 * engine's reload-and-retry on conflicts. The table must exist with columns id long, writer
 * string, n int (any order, any extra optional columns). Each snapshot's summary carries
 * race.writer and race.commit. Output: one JSON line {"writer":...,"snapshots":[ids...]} in
 * commit order; errors on stderr with exit status 1. */
#include "engine/engine_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void die(const char *what, const firn_err *err)
{
    fprintf(stderr, "commit_race: %s: %s\n", what, err->msg);
    exit(1);
}

static void wait_until(int64_t at_us)
{
    for (int64_t now = firn_now_us(); now < at_us; now = firn_now_us()) {
        int64_t left = at_us - now;
        struct timespec ts = {(time_t)(left / 1000000), (long)(left % 1000000) * 1000L};
        nanosleep(&ts, NULL);
    }
}

/* Fills b (the table schema's batch) with the rows of commit k. */
static void fill_batch(
    firn_batch *b, const firn_field *root, const char *writer, int k, long rows, long first_id)
{
    for (long r = 0; r < rows; r++) {
        for (size_t c = 0; c < root->n_children; c++) {
            const char *name = root->children[c]->name;
            firn_column *col = firn_batch_column(b, c);
            if (strcmp(name, "id") == 0)
                firn_column_append_i64(col, first_id + (long)k * rows + r);
            else if (strcmp(name, "writer") == 0)
                firn_column_append_bytes(col, writer, strlen(writer));
            else if (strcmp(name, "n") == 0)
                firn_column_append_i32(col, k);
            else
                firn_column_append_null(col);
        }
        firn_err err = {0};
        if (firn_batch_end_row(b, FIRN_OP_INSERT, 0, &err))
            die("could not build a row", &err);
    }
}

/* One commit: write the data file(s) of commit k and commit them; returns the snapshot id. */
static int64_t commit_one(firn__table *t, const char *writer, int k, long rows, long first_id)
{
    firn_err err = {0};
    const firn_table_metadata *md = t->cat.metadata;
    const firn_schema *schema = firn_table_metadata_schema(md);
    char data_dir[4096];
    snprintf(data_dir, sizeof(data_dir), "%s/data", md->location);
    firn__write_ctx w = {t->eng->io, data_dir, schema->root, firn_table_metadata_spec(md), NULL};
    firn_batch *b = firn_batch_new(schema->root);
    fill_batch(b, schema->root, writer, k, rows, first_id);
    firn_data_file *files = NULL;
    size_t n_files = 0;
    if (firn__write_data_files(&w, b, NULL, 0, &files, &n_files, NULL, &err))
        die("could not write a data file", &err);
    firn_summary extra;
    firn_summary_init(&extra);
    firn_summary_set(&extra, "race.writer", writer);
    firn_summary_set_i64(&extra, "race.commit", k);
    if (firn__table_commit(t, files, n_files, NULL, 0, false, 0, &extra, &err))
        die("could not commit", &err);
    int64_t id = firn_table_metadata_current_snapshot(t->cat.metadata)->snapshot_id;
    firn_summary_deinit(&extra);
    for (size_t i = 0; i < n_files; i++)
        firn_data_file_deinit(&files[i]);
    firn_free(files);
    firn_batch_free(b);
    return id;
}

int main(int argc, char **argv)
{
    if (argc != 11) {
        fprintf(stderr, "usage: commit_race <catalog-name> <db-uri> <warehouse> <ns> <table> "
                        "<writer> <commits> <rows> <first-id> <start-at-us>\n");
        return 2;
    }
    firn_err err = {0};
    int commits = (int)strtol(argv[7], NULL, 10);
    long rows = strtol(argv[8], NULL, 10), first_id = strtol(argv[9], NULL, 10);
    int64_t start_us = strtoll(argv[10], NULL, 10);
    if (firn_log_configure("info", &err))
        die("could not configure logging", &err);
    firn__engine eng;
    memset(&eng, 0, sizeof(eng));
    eng.io = firn_io_local_new();
    firn_catalog_sql_opts opts = {
        .name = argv[1], .uri = argv[2], .warehouse = argv[3], .io = eng.io};
    if (firn_catalog_sql_open(&opts, &eng.catalog, &err))
        die("could not open the catalog", &err);
    firn__table t;
    memset(&t, 0, sizeof(t));
    t.eng = &eng;
    t.ns = argv[4];
    t.name = argv[5];
    t.display = argv[5];
    if (firn_catalog_load_table(eng.catalog, t.ns, t.name, &t.cat, &err))
        die("could not load the table", &err);
    wait_until(start_us);
    printf("{\"writer\":\"%s\",\"snapshots\":[", argv[6]);
    for (int k = 0; k < commits; k++)
        printf("%s%lld", k ? "," : "", (long long)commit_one(&t, argv[6], k, rows, first_id));
    printf("]}\n");
    firn_catalog_table_deinit(&t.cat);
    firn_catalog_free(eng.catalog);
    firn_io_free(eng.io);
    return 0;
}
