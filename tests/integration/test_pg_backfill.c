/* SPDX-License-Identifier: Apache-2.0 */
/* Discovery and parallel backfill against the throwaway cluster: edge tables (empty, one row,
 * many chunks, 300+ columns, no primary key, partitioned, quoted/unicode/reserved names), no
 * duplicates or gaps across chunks (CTID block ranges and primary-key ranges), a chunk retried
 * after its connection is killed, an invalid snapshot, and retries running out. */
#include "firn/source_pg.h"
#include "t.h"

#include <pthread.h>

#define BIG_ROWS 200000

static const char *pre_run_uri;        /* take the bf.big lock after planning, before the run */
static firn_pg_chunking test_chunking; /* chunking of the next plans */
static size_t key_chunks;              /* key-range chunks in the last plan */
static const char *after_snapshot_sql; /* run after the export; then plan on that connection */
static void take_lock(const char *uri);

static const char SETUP[] =
    "DROP SCHEMA IF EXISTS bf CASCADE; DROP SCHEMA IF EXISTS \"MixedCase\" CASCADE;"
    "CREATE SCHEMA bf;"
    "CREATE TABLE bf.empty (id int8 PRIMARY KEY, v text);"
    "CREATE TABLE bf.one (id int8 PRIMARY KEY, v text); INSERT INTO bf.one VALUES (7, 'seven');"
    "CREATE TABLE bf.big (id int8 PRIMARY KEY, v text, f float8);"
    "INSERT INTO bf.big SELECT g, repeat('x', 20) || g, g / 3.0 FROM generate_series(1, 200000) g;"
    "CREATE TABLE bf.nopk (id int8, v text); INSERT INTO bf.nopk VALUES (1, 'a'), (1, 'a'), (2, "
    "NULL);"
    "CREATE TABLE bf.parted (id int8, k date, v text, PRIMARY KEY (id, k)) PARTITION BY RANGE (k);"
    "CREATE TABLE bf.parted_2023 PARTITION OF bf.parted FOR VALUES FROM ('2023-01-01') TO "
    "('2024-01-01');"
    "CREATE TABLE bf.parted_2024 PARTITION OF bf.parted FOR VALUES FROM ('2024-01-01') TO "
    "('2025-01-01');"
    "CREATE TABLE bf.parted_other PARTITION OF bf.parted DEFAULT;"
    "INSERT INTO bf.parted SELECT g, date '2022-12-01' + g, 'p' || g FROM generate_series(1, 1000) "
    "g;"
    "CREATE TABLE bf.gen (id int8 PRIMARY KEY, a int4, b int4 GENERATED ALWAYS AS (a * 2) STORED);"
    "INSERT INTO bf.gen (id, a) VALUES (1, 21);"
    "CREATE SCHEMA \"MixedCase\";"
    "CREATE TABLE \"MixedCase\".\"Ünïcode Tbl\" (\"Select\" int4 PRIMARY KEY, \"from\" text,"
    " \"order\" int8, \"ÄÖ col\" text, \"a\"\"quote\" text, \"user\" bool);"
    "INSERT INTO \"MixedCase\".\"Ünïcode Tbl\" VALUES (1, 'f', 2, '雪', 'q', true);";

static const char *uri_or_skip(void)
{
    const char *v = getenv("FIRN_TEST_PGURI");
    if (!v || !*v)
        T_SKIP("FIRN_TEST_PGURI not set (run under tests/harness/pg_cluster.sh)");
    return v;
}

static firn_pg_conn *connect_setup(firn_pg_conn_config *cfg)
{
    cfg->uri = uri_or_skip();
    firn_pg_conn *c = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_pg_conn_open(cfg, FIRN_PG_CONN_SQL, &c, &err), &err);
    return c;
}

static void setup_once(firn_pg_conn *c)
{
    firn_err err = {0};
    char v[16];
    firn_rc rc = firn_pg_conn_query_value(
        c, "SELECT count(*) FROM bf.big WHERE EXISTS (SELECT 1 FROM bf.gen)", v, sizeof(v), &err);
    if (rc == FIRN_OK && strcmp(v, "200000") == 0)
        return;
    T_OK_ERR(firn_pg_conn_exec(c, SETUP, &err), &err);
    T_OK_ERR(firn_pg_conn_exec(c, "ANALYZE", &err), &err);
}

/* Rows seen per chunk (first column as int64), so a retried chunk can drop what it delivered. */
typedef struct seen {
    size_t n_chunks;
    int64_t **ids;
    size_t *n_ids;
    size_t *caps;
    int batches;
    int retries;
    const char *last_table;
} seen;

static void seen_init(seen *s, size_t n_chunks)
{
    memset(s, 0, sizeof(*s));
    s->n_chunks = n_chunks;
    s->ids = calloc(n_chunks, sizeof(*s->ids));
    s->n_ids = calloc(n_chunks, sizeof(size_t));
    s->caps = calloc(n_chunks, sizeof(size_t));
}

static void seen_free(seen *s)
{
    for (size_t i = 0; i < s->n_chunks; i++)
        free(s->ids[i]);
    free(s->ids);
    free(s->n_ids);
    free(s->caps);
}

static int64_t first_col(firn_batch *b, size_t r)
{
    firn_column *c = firn_batch_column(b, 0);
    const firn_field *f = firn_column_field(c);
    if (f->type == FIRN_TYPE_INT)
        return ((const int32_t *)firn_column_values(c))[r];
    return ((const int64_t *)firn_column_values(c))[r];
}

static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;

static firn_rc on_batch_locked(void *ctx, const firn_pg_chunk *chunk, firn_batch *b, firn_err *err);

/* Batches arrive from several workers at once. */
static firn_rc on_batch(void *ctx, const firn_pg_chunk *chunk, firn_batch *b, firn_err *err)
{
    pthread_mutex_lock(&seen_lock);
    firn_rc rc = on_batch_locked(ctx, chunk, b, err);
    pthread_mutex_unlock(&seen_lock);
    return rc;
}

static firn_rc on_batch_locked(void *ctx, const firn_pg_chunk *chunk, firn_batch *b, firn_err *err)
{
    (void)err;
    seen *s = ctx;
    s->batches++;
    s->last_table = chunk->table->name;
    for (size_t r = 0; r < firn_batch_rows(b); r++) {
        if (firn_batch_op(b, r) != FIRN_OP_READ || firn_batch_lsn(b, r) != 0x1234)
            return firn_err_set(err, FIRN_ERR_INTERNAL, "bad row metadata");
        size_t k = chunk->id;
        if (s->n_ids[k] == s->caps[k]) {
            s->caps[k] = s->caps[k] ? s->caps[k] * 2 : 1024;
            s->ids[k] = realloc(s->ids[k], s->caps[k] * sizeof(int64_t));
        }
        s->ids[k][s->n_ids[k]++] = first_col(b, r);
    }
    return FIRN_OK;
}

static firn_rc on_retry(void *ctx, const firn_pg_chunk *chunk, firn_err *err)
{
    (void)err;
    seen *s = ctx;
    pthread_mutex_lock(&seen_lock);
    s->retries++;
    s->n_ids[chunk->id] = 0;
    pthread_mutex_unlock(&seen_lock);
    return FIRN_OK;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Backfills one table; returns the sorted ids in *out (malloc'd) and their count. */
static firn_rc backfill(firn_pg_conn *c,
                        firn_pg_table *t,
                        size_t chunk_bytes,
                        firn_pg_backfill_opts *opts,
                        seen *s,
                        size_t *out_chunks,
                        int64_t **out_ids,
                        size_t *out_n,
                        firn_err *err)
{
    char snap[64];
    firn_pg_plan *plan = NULL;
    T_OK_ERR(firn_pg_snapshot_export(c, snap, sizeof(snap), err), err);
    firn_pg_conn *planner = c;
    if (after_snapshot_sql) {
        /* Changes after the snapshot, seen by the planning connection only. */
        firn_pg_conn_config cfg = {.uri = uri_or_skip()};
        T_OK_ERR(firn_pg_conn_open(&cfg, FIRN_PG_CONN_SQL, &planner, err), err);
        T_OK_ERR(firn_pg_conn_exec(planner, after_snapshot_sql, err), err);
    }
    T_OK_ERR(firn_pg_backfill_plan_chunked(planner, &t, 1, chunk_bytes, test_chunking, &plan, err),
             err);
    if (planner != c)
        firn_pg_conn_close(planner);
    *out_chunks = firn_pg_plan_chunks(plan);
    key_chunks = 0;
    for (size_t i = 0; i < *out_chunks; i++)
        key_chunks += firn_pg_plan_chunk(plan, i)->key_range;
    seen_init(s, *out_chunks);
    if (pre_run_uri)
        take_lock(pre_run_uri);
    opts->snapshot = opts->snapshot ? opts->snapshot : snap;
    opts->snapshot_lsn = 0x1234;
    opts->on_batch = on_batch;
    if (!opts->on_chunk_retry)
        opts->on_chunk_retry = on_retry;
    opts->ctx = s;
    firn_rc rc = firn_pg_backfill_run(plan, opts, err);
    size_t total = 0;
    for (size_t i = 0; i < s->n_chunks; i++)
        total += s->n_ids[i];
    int64_t *ids = calloc(total ? total : 1, sizeof(int64_t));
    size_t n = 0;
    for (size_t i = 0; i < s->n_chunks; i++) {
        if (!rc)
            T_TRUE(firn_pg_plan_chunk(plan, i)->done);
        for (size_t k = 0; k < s->n_ids[i]; k++)
            ids[n++] = s->ids[i][k];
    }
    qsort(ids, n, sizeof(int64_t), cmp_i64);
    *out_ids = ids;
    *out_n = n;
    firn_pg_plan_free(plan);
    firn_err e2 = {0};
    T_OK_ERR(firn_pg_conn_exec(c, "COMMIT", &e2), &e2);
    return rc;
}

static firn_pg_table *find(firn_pg_catalog *cat, const char *schema, const char *name)
{
    firn_pg_table *t = firn_pg_catalog_find(cat, schema, name);
    if (!t)
        T_FAIL("table %s.%s not discovered", schema, name);
    return t;
}

T_TEST(discovery_of_edge_tables)
{
    firn_pg_conn_config cfg = {0};
    firn_pg_conn *c = connect_setup(&cfg);
    setup_once(c);
    firn_err err = {0};
    firn_pg_catalog *cat = NULL;
    const char *pats[] = {"bf.*", "MixedCase.Ünïcode Tbl", "bf.parted_2024"};
    T_OK_ERR(firn_pg_discover(c, pats, 3, &cat, &err), &err);
    /* parted's leaves are not streams of their own unless named (parted_2024 is). */
    T_EQ_INT(firn_pg_catalog_tables(cat), 8);
    T_TRUE(firn_pg_catalog_find(cat, "bf", "parted_2023") == NULL);
    firn_pg_table *p = find(cat, "bf", "parted");
    T_EQ_INT(p->relkind, 'p');
    T_EQ_INT(p->n_leaves, 3);
    T_EQ_STR(p->leaves[0].qualified, "\"bf\".\"parted_2023\"");
    T_EQ_INT(p->n_key, 2);
    int32_t ids[4];
    T_EQ_INT(firn_pg_table_identifier_ids(p, ids, 4), 2);
    T_EQ_INT(ids[0], 1);
    T_EQ_INT(ids[1], 2);
    T_TRUE(p->estimated_rows > 900 && p->estimated_rows < 1100);
    firn_pg_table *leaf = find(cat, "bf", "parted_2024");
    T_EQ_INT(leaf->n_leaves, 1);

    firn_pg_table *np = find(cat, "bf", "nopk");
    T_FALSE(np->has_primary_key);
    T_EQ_INT(np->n_key, 0);
    T_EQ_INT(np->replica_identity, 'd');
    const char *key[] = {"id"};
    T_OK_ERR(firn_pg_table_set_key(np, key, 1, &err), &err);
    T_EQ_INT(firn_pg_table_identifier_ids(np, ids, 4), 1);
    T_TRUE(np->schema->children[0]->required);
    const char *badkey[] = {"nope"};
    T_EQ_INT(firn_pg_table_set_key(np, badkey, 1, &err), FIRN_ERR_NOT_FOUND);

    firn_pg_table *g = find(cat, "bf", "gen");
    T_EQ_INT(g->n_columns, 2); /* generated column b is not copied */

    firn_pg_table *u = find(cat, "MixedCase", "Ünïcode Tbl");
    T_EQ_STR(u->qualified, "\"MixedCase\".\"Ünïcode Tbl\"");
    T_EQ_INT(u->n_columns, 6);
    T_EQ_STR(u->schema->children[4]->name, "a\"quote");
    T_EQ_INT(u->schema->children[4]->id, 5);
    T_TRUE(u->schema->children[0]->required);

    firn_pg_catalog_free(cat);
    const char *missing[] = {"bf.nope"};
    T_EQ_INT(firn_pg_discover(c, missing, 1, &cat, &err), FIRN_ERR_NOT_FOUND);
    T_TRUE(strstr(err.msg, "bf.nope") != NULL);
    firn_pg_conn_close(c);
}

T_TEST(discovery_over_replication_connection)
{
    firn_pg_conn_config cfg = {.uri = uri_or_skip()};
    firn_pg_conn *c = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_pg_conn_open(&cfg, FIRN_PG_CONN_SQL, &c, &err), &err);
    setup_once(c);
    firn_pg_conn_close(c);
    T_OK_ERR(firn_pg_conn_open(&cfg, FIRN_PG_CONN_REPLICATION, &c, &err), &err);
    firn_pg_catalog *cat = NULL;
    const char *pats[] = {"MixedCase.*"};
    T_OK_ERR(firn_pg_discover(c, pats, 1, &cat, &err), &err);
    T_EQ_INT(firn_pg_catalog_tables(cat), 1);
    firn_pg_catalog_free(cat);
    firn_pg_conn_close(c);
}

static void check_table(firn_pg_conn *c,
                        firn_pg_catalog *cat,
                        const char *name,
                        size_t chunk_bytes,
                        int64_t want_first,
                        size_t want_n,
                        size_t min_chunks)
{
    firn_pg_table *t = find(cat, "bf", name);
    firn_pg_backfill_opts opts = {
        .conn = &(firn_pg_conn_config){.uri = uri_or_skip()}, .workers = 3, .batch_rows = 5000};
    seen s;
    size_t chunks = 0, n = 0;
    int64_t *ids = NULL;
    firn_err err = {0};
    memset(&s, 0, sizeof(s));
    T_OK_ERR(backfill(c, t, chunk_bytes, &opts, &s, &chunks, &ids, &n, &err), &err);
    T_EQ_UINT(n, want_n);
    T_TRUE(chunks >= min_chunks);
    if (strcmp(name, "nopk") != 0) {
        for (size_t i = 0; i < n; i++)
            T_EQ_INT(ids[i], want_first + (int64_t)i); /* no duplicates, no gaps */
    }
    free(ids);
    seen_free(&s);
}

T_TEST(backfill_edge_tables_without_gaps_or_duplicates)
{
    firn_pg_conn_config cfg = {0};
    firn_pg_conn *c = connect_setup(&cfg);
    setup_once(c);
    firn_err err = {0};
    firn_pg_catalog *cat = NULL;
    const char *pats[] = {"bf.*"};
    T_OK_ERR(firn_pg_discover(c, pats, 1, &cat, &err), &err);
    check_table(c, cat, "empty", 0, 0, 0, 1);
    check_table(c, cat, "one", 0, 7, 1, 1);
    check_table(c, cat, "big", 1 << 20, 1, BIG_ROWS, 8);
    check_table(c, cat, "parted", 8192, 1, 1000, 3);
    check_table(c, cat, "nopk", 0, 1, 3, 1);
    firn_pg_catalog_free(cat);
    firn_pg_conn_close(c);
}

T_TEST(backfill_by_primary_key_ranges)
{
    firn_pg_conn_config cfg = {0};
    firn_pg_conn *c = connect_setup(&cfg);
    setup_once(c);
    firn_err err = {0};
    T_OK_ERR(firn_pg_conn_exec(c,
                               "DROP TABLE IF EXISTS bf.keys;"
                               "CREATE TABLE bf.keys (id int4 PRIMARY KEY, v text);"
                               "INSERT INTO bf.keys SELECT g, 'k' || g "
                               "FROM generate_series(-1000, 1000) g",
                               &err),
             &err);
    firn_pg_catalog *cat = NULL;
    const char *pats[] = {"bf.*"};
    T_OK_ERR(firn_pg_discover(c, pats, 1, &cat, &err), &err);
    test_chunking = FIRN_PG_CHUNK_KEY;
    check_table(c, cat, "empty", 0, 0, 0, 1);
    T_EQ_UINT(key_chunks, 1);
    check_table(c, cat, "one", 0, 7, 1, 1);
    check_table(c, cat, "big", 1 << 20, 1, BIG_ROWS, 8);
    T_TRUE(key_chunks >= 8);
    check_table(c, cat, "parted", 8192, 1, 1000, 3); /* a two-column key: block ranges */
    T_EQ_UINT(key_chunks, 0);
    check_table(c, cat, "nopk", 0, 1, 3, 1);
    T_EQ_UINT(key_chunks, 0);
    /* The planner sees the smallest and largest keys deleted after the snapshot: the outer
     * ranges are open, so the snapshot's rows beyond the measured bounds are still read. */
    after_snapshot_sql = "DELETE FROM bf.keys WHERE id < -900 OR id > 900";
    check_table(c, cat, "keys", 8192, -1000, 2001, 3);
    T_TRUE(key_chunks >= 3);
    after_snapshot_sql = NULL;
    test_chunking = FIRN_PG_CHUNK_AUTO;
    T_OK_ERR(firn_pg_conn_exec(c, "DROP TABLE bf.keys", &err), &err); /* others count bf.* */
    firn_pg_catalog_free(cat);
    firn_pg_conn_close(c);
}

/* A stream's column selection and filter (docs/configuration.md "Columns and filter"): the
 * table keeps its key and the selected columns with ids 1..N, and every chunk's COPY reads
 * only the filtered rows, with key ranges and with block ranges. */
T_TEST(selected_columns_and_filter_in_every_chunk)
{
    firn_pg_conn_config cfg = {0};
    firn_pg_conn *c = connect_setup(&cfg);
    setup_once(c);
    firn_err err = {0};
    firn_pg_catalog *cat = NULL;
    const char *pats[] = {"bf.big"};
    T_OK_ERR(firn_pg_discover(c, pats, 1, &cat, &err), &err);
    firn_pg_table *t = find(cat, "bf", "big");
    const bool keep[] = {true, false, true}; /* id, v, f */
    firn_pg_table_keep_columns(t, keep);
    T_EQ_UINT(t->n_columns, 2);
    T_EQ_STR(t->columns[1].name, "f");
    T_EQ_INT(t->columns[1].field_id, 2);
    T_EQ_UINT(t->schema->n_children, 2);
    T_EQ_STR(t->schema->children[1]->name, "f");
    T_EQ_UINT(t->key_columns[0], 0);
    T_TRUE(t->schema->children[0]->required);
    firn_pg_table_set_filter(t, "id % 10 = 0 OR v = 'none'"); /* an OR, on a column left out */
    for (int pass = 0; pass < 2; pass++) {
        test_chunking = pass ? FIRN_PG_CHUNK_CTID : FIRN_PG_CHUNK_KEY;
        firn_pg_backfill_opts opts = {
            .conn = &(firn_pg_conn_config){.uri = uri_or_skip()}, .workers = 2, .batch_rows = 5000};
        seen s;
        memset(&s, 0, sizeof(s));
        size_t chunks = 0, n = 0;
        int64_t *ids = NULL;
        T_OK_ERR(backfill(c, t, 1 << 20, &opts, &s, &chunks, &ids, &n, &err), &err);
        T_TRUE(chunks >= 4);
        T_EQ_UINT(n, BIG_ROWS / 10);
        for (size_t i = 0; i < n; i++)
            T_EQ_INT(ids[i], 10 * (int64_t)(i + 1));
        free(ids);
        seen_free(&s);
    }
    test_chunking = FIRN_PG_CHUNK_AUTO;
    firn_pg_catalog_free(cat);
    firn_pg_conn_close(c);
}

T_TEST(wide_table_of_320_columns)
{
    firn_pg_conn_config cfg = {0};
    firn_pg_conn *c = connect_setup(&cfg);
    firn_err err = {0};
    firn_buf sql;
    firn_buf_init(&sql, 1 << 20);
    T_OK(firn_buf_append_cstr(
        &sql, "DROP TABLE IF EXISTS public.wide; CREATE TABLE public.wide (id int4"));
    for (int i = 1; i < 320; i++)
        T_OK(firn_buf_appendf(&sql, ", c%d %s", i, i % 2 ? "int8" : "text"));
    T_OK(firn_buf_append_cstr(&sql, "); INSERT INTO public.wide (id, c1, c2, c319) VALUES "
                                    "(1, 10, 'two', 3190), (2, NULL, NULL, NULL)"));
    T_OK_ERR(firn_pg_conn_exec(c, (const char *)sql.data, &err), &err);
    firn_buf_deinit(&sql);
    firn_pg_catalog *cat = NULL;
    const char *pats[] = {"public.wide"};
    T_OK_ERR(firn_pg_discover(c, pats, 1, &cat, &err), &err);
    firn_pg_table *t = firn_pg_catalog_table(cat, 0);
    T_EQ_INT(t->n_columns, 320);
    T_EQ_INT(t->last_field_id, 320);
    T_EQ_INT(t->schema->children[319]->id, 320);
    firn_pg_backfill_opts opts = {.conn = &cfg, .workers = 1};
    seen s;
    size_t chunks = 0, n = 0;
    int64_t *ids = NULL;
    memset(&s, 0, sizeof(s));
    T_OK_ERR(backfill(c, t, 0, &opts, &s, &chunks, &ids, &n, &err), &err);
    T_EQ_UINT(n, 2);
    T_EQ_INT(ids[0], 1);
    free(ids);
    seen_free(&s);
    firn_pg_catalog_free(cat);
    firn_pg_conn_close(c);
}

/* Holds an ACCESS EXCLUSIVE lock on bf.big so every COPY of it waits (and times out or is
 * killed); released from the retry callback. */
static firn_pg_conn *lock_conn;
static int release_after_retries;

static firn_rc on_retry_release(void *ctx, const firn_pg_chunk *chunk, firn_err *err)
{
    seen *s = ctx;
    firn_rc rc = on_retry(ctx, chunk, err);
    if (lock_conn && s->retries >= release_after_retries) {
        T_OK_ERR(firn_pg_conn_exec(lock_conn, "COMMIT", err), err);
        firn_pg_conn_close(lock_conn);
        lock_conn = NULL;
    }
    return rc;
}

static void take_lock(const char *uri)
{
    firn_pg_conn_config cfg = {.uri = uri};
    firn_err err = {0};
    T_OK_ERR(firn_pg_conn_open(&cfg, FIRN_PG_CONN_SQL, &lock_conn, &err), &err);
    T_OK_ERR(
        firn_pg_conn_exec(lock_conn, "BEGIN; LOCK TABLE bf.big IN ACCESS EXCLUSIVE MODE", &err),
        &err);
}

/* Terminates the backend of a COPY that waits for the lock (a dropped connection mid-chunk). */
static void *killer_main(void *arg)
{
    const char *uri = arg;
    firn_pg_conn_config cfg = {.uri = uri};
    firn_pg_conn *c = NULL;
    firn_err err = {0};
    if (firn_pg_conn_open(&cfg, FIRN_PG_CONN_SQL, &c, &err))
        return NULL;
    for (int i = 0; i < 200; i++) {
        char v[16] = "";
        if (firn_pg_conn_query_value(c,
                                     "SELECT count(pg_terminate_backend(pid)) FROM "
                                     "pg_stat_activity WHERE query LIKE 'COPY (SELECT%' AND "
                                     "wait_event_type = 'Lock'",
                                     v, sizeof(v), &err) == FIRN_OK &&
            strcmp(v, "0") != 0)
            break;
        usleep(20000);
    }
    firn_pg_conn_close(c);
    return NULL;
}

static void run_locked(firn_pg_conn_config *cfg,
                       int max_retries,
                       int release_after,
                       bool kill,
                       firn_rc *out_rc,
                       seen *s,
                       size_t *out_n,
                       firn_err *err)
{
    firn_pg_conn *c = connect_setup(cfg);
    setup_once(c);
    firn_pg_catalog *cat = NULL;
    const char *pats[] = {"bf.big"};
    T_OK_ERR(firn_pg_discover(c, pats, 1, &cat, err), err);
    firn_pg_backfill_opts opts = {.conn = cfg, .workers = 1, .max_retries = max_retries};
    release_after_retries = release_after;
    pre_run_uri = cfg->uri;
    pthread_t killer;
    if (kill)
        T_TRUE(pthread_create(&killer, NULL, killer_main, (void *)cfg->uri) == 0);
    memset(s, 0, sizeof(*s));
    size_t chunks = 0;
    int64_t *ids = NULL;
    opts.on_chunk_retry = on_retry_release;
    *out_rc = backfill(c, firn_pg_catalog_table(cat, 0), (size_t)1 << 30, &opts, s, &chunks, &ids,
                       out_n, err);
    if (kill)
        pthread_join(killer, NULL);
    for (size_t i = 0; i < *out_n; i++)
        T_EQ_INT(ids[i], (int64_t)i + 1);
    free(ids);
    if (lock_conn) {
        firn_pg_conn_close(lock_conn);
        lock_conn = NULL;
    }
    firn_pg_catalog_free(cat);
    firn_pg_conn_close(c);
}

T_TEST(lock_timeout_mid_chunk_is_retried)
{
    firn_pg_conn_config cfg = {.options = "-c lock_timeout=200ms"};
    seen s;
    size_t n = 0;
    firn_rc rc;
    firn_err err = {0};
    run_locked(&cfg, 3, 1, false, &rc, &s, &n, &err);
    T_OK_ERR(rc, &err);
    T_EQ_INT(s.retries, 1);
    T_EQ_UINT(n, BIG_ROWS);
    seen_free(&s);
}

T_TEST(dropped_connection_is_retried)
{
    firn_pg_conn_config cfg = {0};
    seen s;
    size_t n = 0;
    firn_rc rc;
    firn_err err = {0};
    run_locked(&cfg, 3, 1, true, &rc, &s, &n, &err);
    T_OK_ERR(rc, &err);
    T_EQ_INT(s.retries, 1);
    T_EQ_UINT(n, BIG_ROWS);
    seen_free(&s);
}

T_TEST(retries_run_out_with_the_server_message)
{
    firn_pg_conn_config cfg = {.options = "-c lock_timeout=100ms"};
    seen s;
    size_t n = 0;
    firn_rc rc;
    firn_err err = {0};
    run_locked(&cfg, 2, 99, false, &rc, &s, &n, &err);
    T_EQ_INT(rc, FIRN_ERR_SOURCE);
    T_EQ_INT(s.retries, 2);
    T_TRUE(strstr(err.msg, "canceling statement due to lock timeout") != NULL);
    T_TRUE(strstr(err.msg, "chunk 0") != NULL);
    T_EQ_UINT(n, 0);
    seen_free(&s);
}

T_TEST(invalid_snapshot_is_reported)
{
    firn_pg_conn_config cfg = {0};
    firn_pg_conn *c = connect_setup(&cfg);
    setup_once(c);
    firn_err err = {0};
    firn_pg_catalog *cat = NULL;
    const char *pats[] = {"bf.one"};
    T_OK_ERR(firn_pg_discover(c, pats, 1, &cat, &err), &err);
    firn_pg_backfill_opts opts = {.conn = &cfg, .workers = 2, .snapshot = "00000003-0000001B-1"};
    seen s;
    memset(&s, 0, sizeof(s));
    size_t chunks = 0, n = 0;
    int64_t *ids = NULL;
    firn_rc rc = backfill(c, firn_pg_catalog_table(cat, 0), 0, &opts, &s, &chunks, &ids, &n, &err);
    T_EQ_INT(rc, FIRN_ERR_NOT_FOUND);
    T_TRUE(strstr(err.msg, "no longer valid") != NULL);
    T_EQ_UINT(n, 0);
    free(ids);
    seen_free(&s);
    firn_pg_catalog_free(cat);
    firn_pg_conn_close(c);
}

T_MAIN(T_CASE(discovery_of_edge_tables),
       T_CASE(discovery_over_replication_connection),
       T_CASE(backfill_edge_tables_without_gaps_or_duplicates),
       T_CASE(backfill_by_primary_key_ranges),
       T_CASE(selected_columns_and_filter_in_every_chunk),
       T_CASE(wide_table_of_320_columns),
       T_CASE(lock_timeout_mid_chunk_is_retried),
       T_CASE(dropped_connection_is_retried),
       T_CASE(retries_run_out_with_the_server_message),
       T_CASE(invalid_snapshot_is_reported))
