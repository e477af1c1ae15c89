/* SPDX-License-Identifier: Apache-2.0 */
/* The pgoutput stream against a real PostgreSQL: scripted workloads drained through a slot and
 * compared with the expected event transcript, values included. */
#include "pgo_itest.h"

#include <stdio.h>
#include <time.h>

/* Creates a publication and a slot named after tag, covering the given tables and it_marker. */
static void setup(PGconn *c, const char *tag, const char *tables, const char *pub_opts)
{
    char sql[1024];
    it_sql(c, "CREATE TABLE IF NOT EXISTS it_marker (id serial PRIMARY KEY)");
    snprintf(sql, sizeof(sql), "CREATE PUBLICATION p_%s FOR TABLE %s, it_marker %s", tag, tables,
             pub_opts ? pub_opts : "");
    it_sql(c, sql);
    snprintf(sql, sizeof(sql), "SELECT pg_create_logical_replication_slot('s_%s', 'pgoutput')",
             tag);
    it_sql(c, sql);
}

static firn_pgo_stream *start(const char *tag, bool text, size_t budget)
{
    static char slot[64], pub[64];
    static const char *pubs[1];
    snprintf(slot, sizeof(slot), "s_%s", tag);
    snprintf(pub, sizeof(pub), "p_%s", tag);
    pubs[0] = pub;
    firn_pgo_stream *s = it_open(slot, pubs, 1, text, budget);
    firn_err err = {0};
    T_OK_ERR(firn_pgo_stream_preflight(s, NULL, 0, false, NULL, &err), &err);
    T_OK_ERR(firn_pgo_stream_start(s, 0, &err), &err);
    return s;
}

T_TEST(dml_in_text)
{
    PGconn *c = it_connect();
    it_sql(c, "CREATE TABLE dml (id int PRIMARY KEY, v text)");
    setup(c, "dml", "dml", NULL);
    firn_pgo_stream *s = start("dml", true, 0);
    it_sql(c, "INSERT INTO dml VALUES (1, 'a'), (2, 'b')");
    it_sql(c, "UPDATE dml SET v = 'a2' WHERE id = 1");
    it_sql(c, "UPDATE dml SET id = 3 WHERE id = 2"); /* primary key change */
    it_sql(c, "DELETE FROM dml WHERE id = 1");
    it_sql(c, "BEGIN; INSERT INTO dml VALUES (7, 'x'); UPDATE dml SET v = 'y' WHERE id = 7;"
              " DELETE FROM dml WHERE id = 7; COMMIT");
    it_sql(c, "INSERT INTO dml VALUES (8, NULL), (9, ''), (10, 'ünï ''q'' \"dq\"')");
    it_sql(c, "TRUNCATE dml");
    firn_buf out;
    firn_buf_init(&out, 1 << 20);
    it_drain(s, c, &out, NULL, NULL);
    T_EQ_STR(it_text(&out), "B\nR public.dml *id:23 v:25\nI dml (1,a)\nI dml (2,b)\nC\n"
                            "B\nU dml (1,a2)\nC\n"
                            "B\nU dml K(2,n)(3,b)\nC\n"
                            "B\nD dml K(1,n)\nC\n"
                            "B\nI dml (7,x)\nU dml (7,y)\nD dml K(7,n)\nC\n"
                            "B\nI dml (8,n)\nI dml (9,)\nI dml (10,ünï 'q' \"dq\")\nC\n"
                            "B\nT n=1 opt=0\nC\n");
    firn_pgo_stream_free(s);
    firn_buf_deinit(&out);
    PQfinish(c);
}

T_TEST(binary_values)
{
    PGconn *c = it_connect();
    it_sql(c, "CREATE TABLE bin (id int PRIMARY KEY, b bigint, f float8, t text, by bytea,"
              " ts timestamptz)");
    setup(c, "bin", "bin", NULL);
    firn_pgo_stream *s = start("bin", false, 0);
    firn_pgo_stats st;
    firn_pgo_stream_stats(s, &st);
    it_sql(c, "INSERT INTO bin VALUES (1, -2, 1.5, 'hi', '\\x00ff', '2000-01-01 00:00:01+00')");
    firn_buf out;
    firn_buf_init(&out, 1 << 20);
    it_drain(s, c, &out, NULL, NULL);
    if (st.server_version >= 140000)
        T_EQ_STR(it_text(&out), "B\nR public.bin *id:23 b:20 f:701 t:25 by:17 ts:1184\n"
                                "I bin (x00000001,xfffffffffffffffe,x3ff8000000000000,x6869,"
                                "x00ff,x00000000000f4240)\nC\n");
    firn_pgo_stream_free(s);
    firn_buf_deinit(&out);
    PQfinish(c);
}

/* Resolves unchanged TOAST values from the old row and checks the values. */
typedef struct toast_ctx {
    const char *big1;
    int resolved;
} toast_ctx;

static void on_toast(void *p, firn_pgo_event *ev)
{
    toast_ctx *x = p;
    if (ev->type != FIRN_PGO_UPDATE || strcmp(ev->rel->relname, "tf") != 0)
        return;
    firn_pgo_tuple *nt = &ev->msg->change.new_tuple;
    if (nt->cols[1].kind != 'u')
        return;
    T_EQ_INT(firn_pgo_toast_from_old(ev->msg), FIRN_PGO_TOAST_COMPLETE);
    T_EQ_INT(nt->cols[1].kind, 't');
    T_EQ_UINT(nt->cols[1].value.len, strlen(x->big1));
    T_EQ_MEM(nt->cols[1].value.ptr, x->big1, strlen(x->big1));
    x->resolved++;
}

T_TEST(toast_default_and_full)
{
    PGconn *c = it_connect();
    it_sql(c, "CREATE TABLE td (id int PRIMARY KEY, big text, n int);"
              "CREATE TABLE tf (id int PRIMARY KEY, big text, n int);"
              "ALTER TABLE tf REPLICA IDENTITY FULL");
    setup(c, "toast", "td, tf", NULL);
    firn_pgo_stream *s = start("toast", true, 0);
    /* 40 KB of md5 hex: does not compress below the 2 KB TOAST threshold. */
    it_sql(c, "CREATE TABLE big_src AS SELECT string_agg(md5(i::text), '') AS v "
              "FROM generate_series(1, 1250) i");
    it_sql(c, "INSERT INTO td SELECT 1, v, 0 FROM big_src; INSERT INTO tf SELECT 1, v, 0 FROM "
              "big_src");
    it_sql(c, "UPDATE td SET n = 1; UPDATE tf SET n = 1");
    it_sql(c, "UPDATE td SET big = 'small', n = 2; UPDATE tf SET big = 'small', n = 2");
    char *big1 = it_value(c, "SELECT v FROM big_src");
    T_EQ_UINT(strlen(big1), 40000);
    toast_ctx x = {big1, 0};
    firn_buf out;
    firn_buf_init(&out, 1 << 20);
    it_drain(s, c, &out, on_toast, &x);
    T_EQ_INT(x.resolved, 1);
    char want[2048];
    snprintf(want, sizeof(want),
             "B\nR public.td *id:23 big:25 n:23\nI td (1,len40000:%.8s,0)\n"
             "R public.tf *id:23 *big:25 *n:23\nI tf (1,len40000:%.8s,0)\nC\n"
             /* DEFAULT: the untouched value is 'u'; FULL: resolved from the old row. */
             "B\nU td (1,u,1)\nU tf O(1,len40000:%.8s,0)(1,len40000:%.8s,1)\nC\n"
             "B\nU td (1,small,2)\nU tf O(1,len40000:%.8s,1)(1,small,2)\nC\n",
             big1, big1, big1, big1, big1);
    T_EQ_STR(it_text(&out), want);
    firn_free(big1);
    firn_pgo_stream_free(s);
    firn_buf_deinit(&out);
    PQfinish(c);
}

/* Counts rows and checks they arrive in order with the streamed flag. */
typedef struct big_ctx {
    int rows;
    int next_id;
    bool streamed;
} big_ctx;

static void on_big(void *p, firn_pgo_event *ev)
{
    big_ctx *x = p;
    if (ev->type == FIRN_PGO_BEGIN && ev->streamed)
        x->streamed = true;
    if (ev->type != FIRN_PGO_INSERT || strcmp(ev->rel->relname, "bigt") != 0)
        return;
    char id[16];
    snprintf(id, sizeof(id), "%d", x->next_id);
    const firn_pgo_col *col = &ev->msg->change.new_tuple.cols[0];
    T_EQ_UINT(col->value.len, strlen(id));
    T_EQ_MEM(col->value.ptr, id, strlen(id));
    x->next_id++;
    x->rows++;
}

T_TEST(large_streamed_transactions)
{
    PGconn *c = it_connect();
    it_sql(c, "ALTER SYSTEM SET logical_decoding_work_mem = '64kB'");
    it_sql(c, "SELECT pg_reload_conf()");
    it_sql(c, "CREATE TABLE bigt (id int PRIMARY KEY, pad text)");
    setup(c, "big", "bigt", NULL);
    firn_pgo_stream *s = start("big", true, 32 * 1024);
    firn_pgo_stats st;
    firn_pgo_stream_stats(s, &st);
    if (st.server_version < 140000)
        T_SKIP("streaming needs PostgreSQL 14");
    /* A large transaction, an aborted large one, and one with a rolled back savepoint. */
    it_sql(c, "INSERT INTO bigt SELECT i, repeat('p', 50) FROM generate_series(1, 5000) i");
    it_sql(c, "BEGIN; INSERT INTO bigt SELECT i, 'gone' FROM generate_series(10001, 15000) i;"
              " ROLLBACK");
    it_sql(c,
           "BEGIN; INSERT INTO bigt SELECT i, 'kept' FROM generate_series(5001, 8000) i;"
           " SAVEPOINT sp; INSERT INTO bigt SELECT i, 'gone' FROM generate_series(20001, 23000) i;"
           " ROLLBACK TO sp; INSERT INTO bigt VALUES (8001, 'kept'); COMMIT");
    big_ctx x = {0, 1, false};
    firn_buf out;
    firn_buf_init(&out, 64 << 20);
    it_drain(s, c, &out, on_big, &x);
    T_EQ_INT(x.rows, 8001);
    T_TRUE(x.streamed);
    firn_pgo_stream_stats(s, &st);
    T_TRUE(st.txns_streamed >= 2);
    T_TRUE(st.txns_aborted >= 1);
    T_TRUE(st.spilled_bytes > 32 * 1024);
    T_TRUE(firn_mem_peak() < (size_t)64 << 20);
    it_sql(c, "ALTER SYSTEM RESET logical_decoding_work_mem");
    it_sql(c, "SELECT pg_reload_conf()");
    firn_pgo_stream_free(s);
    firn_buf_deinit(&out);
    PQfinish(c);
}

T_TEST(schema_changes)
{
    PGconn *c = it_connect();
    it_sql(c, "CREATE TABLE sc (id int PRIMARY KEY, a int)");
    setup(c, "sc", "sc", NULL);
    firn_pgo_stream *s = start("sc", true, 0);
    it_sql(c, "INSERT INTO sc VALUES (1, 10)");
    it_sql(c, "ALTER TABLE sc ADD COLUMN b text");
    it_sql(c, "INSERT INTO sc VALUES (2, 20, 'x')");
    it_sql(c, "ALTER TABLE sc ALTER COLUMN a TYPE bigint");
    it_sql(c, "INSERT INTO sc VALUES (3, 30, 'y')");
    it_sql(c, "ALTER TABLE sc DROP COLUMN b");
    it_sql(c, "INSERT INTO sc VALUES (4, 40)");
    firn_buf out;
    firn_buf_init(&out, 1 << 20);
    it_drain(s, c, &out, NULL, NULL);
    T_EQ_STR(it_text(&out), "B\nR public.sc *id:23 a:23\nI sc (1,10)\nC\n"
                            "B\nR public.sc *id:23 a:23 b:25 changed\nI sc (2,20,x)\nC\n"
                            "B\nR public.sc *id:23 a:20 b:25 changed\nI sc (3,30,y)\nC\n"
                            "B\nR public.sc *id:23 a:20 changed\nI sc (4,40)\nC\n");
    firn_pgo_stream_free(s);
    firn_buf_deinit(&out);
    PQfinish(c);
}

T_TEST(partitioned_both_ways)
{
    PGconn *c = it_connect();
    it_sql(c, "CREATE TABLE pt (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);"
              "CREATE TABLE pt_1 PARTITION OF pt FOR VALUES FROM (0) TO (100);"
              "CREATE TABLE pt_2 PARTITION OF pt FOR VALUES FROM (100) TO (200)");
    setup(c, "viaroot", "pt", "WITH (publish_via_partition_root = true)");
    setup(c, "leaves", "pt", "WITH (publish_via_partition_root = false)");
    firn_pgo_stream *root = start("viaroot", true, 0);
    firn_pgo_stream *leaves = start("leaves", true, 0);
    it_sql(c, "INSERT INTO pt VALUES (1, 'a'), (150, 'b')");
    it_sql(c, "UPDATE pt SET v = 'c' WHERE id = 150");
    firn_buf out;
    firn_buf_init(&out, 1 << 20);
    it_drain(root, c, &out, NULL, NULL);
    /* Via the root: PostgreSQL also describes each leaf (maybe_send_schema), changes name
     * the root (whose Relation message it sends again before the second leaf's: a resend the
     * transcript leaves out). */
    T_EQ_STR(it_text(&out), "B\nR public.pt *id:23 v:25\nR public.pt_1 *id:23 v:25\nI pt (1,a)\n"
                            "R public.pt_2 *id:23 v:25\nI pt (150,b)\nC\n"
                            "B\nU pt (150,c)\nC\n");
    firn_buf_reset(&out);
    it_drain(leaves, c, &out, NULL, NULL);
    T_EQ_STR(it_text(&out), "B\nR public.pt_1 *id:23 v:25\nI pt_1 (1,a)\n"
                            "R public.pt_2 *id:23 v:25\nI pt_2 (150,b)\nC\n"
                            "B\nU pt_2 (150,c)\nC\n");
    firn_pgo_stream_free(root);
    firn_pgo_stream_free(leaves);
    firn_buf_deinit(&out);
    PQfinish(c);
}

T_TEST(exported_snapshot_and_idle_advance)
{
    PGconn *c = it_connect();
    it_sql(c, "CREATE TABLE snap (id int PRIMARY KEY); INSERT INTO snap VALUES (1), (2);"
              "CREATE TABLE unpublished (id int)");
    it_sql(c, "CREATE TABLE IF NOT EXISTS it_marker (id serial PRIMARY KEY);"
              "CREATE PUBLICATION p_snap FOR TABLE snap, it_marker");
    const char *pubs[] = {"p_snap"};
    firn_pgo_stream *s = it_open("s_snap", pubs, 1, true, 0);
    firn_err err = {0};
    T_OK_ERR(firn_pgo_stream_preflight(s, NULL, 0, true, NULL, &err), &err);
    char *snapshot = NULL;
    uint64_t lsn = 0;
    T_OK_ERR(firn_pgo_stream_create_slot(s, &snapshot, &lsn, &err), &err);
    T_TRUE(lsn != 0);
    /* Rows written after the slot are streamed, not in the snapshot. */
    it_sql(c, "INSERT INTO snap VALUES (3)");
    PGconn *b = it_connect();
    char sql[256];
    snprintf(sql, sizeof(sql),
             "BEGIN ISOLATION LEVEL REPEATABLE READ; SET TRANSACTION SNAPSHOT '%s'", snapshot);
    it_sql(b, sql);
    char *n = it_value(b, "SELECT string_agg(id::text, ',' ORDER BY id) FROM snap");
    T_EQ_STR(n, "1,2");
    firn_free(n);
    it_sql(b, "COMMIT");
    T_OK_ERR(firn_pgo_stream_start(s, lsn, &err), &err);
    firn_buf out;
    firn_buf_init(&out, 1 << 20);
    it_drain(s, c, &out, NULL, NULL);
    T_EQ_STR(it_text(&out), "B\nR public.snap *id:23\nI snap (3)\nC\n");

    /* Idle: WAL written for tables outside the publication; the slot still advances. */
    it_sql(c, "INSERT INTO unpublished SELECT generate_series(1, 1000)");
    char *target = it_value(c, "SELECT pg_current_wal_lsn()");
    bool advanced = false;
    const int64_t deadline = firn_monotonic_ns() + INT64_C(20) * 1000000000;
    while (!advanced && firn_monotonic_ns() < deadline) {
        firn_pgo_event ev;
        T_OK_ERR(firn_pgo_stream_next(s, 200, &ev, &err), &err);
        T_EQ_INT(ev.type, 0);
        snprintf(sql, sizeof(sql),
                 "SELECT confirmed_flush_lsn >= '%s' FROM pg_replication_slots "
                 "WHERE slot_name = 's_snap'",
                 target);
        char *v = it_value(c, sql);
        advanced = strcmp(v, "t") == 0;
        firn_free(v);
    }
    T_TRUE(advanced);
    firn_free(target);
    firn_free(snapshot);
    firn_pgo_stream_free(s);
    firn_buf_deinit(&out);
    PQfinish(b);
    PQfinish(c);
}

/* The engine may not call firn_pgo_stream_next for a while (a long flush and catalog commit):
 * the receiver thread keeps answering the server, so a wal_sender_timeout far shorter than the
 * pause does not end the connection, and what was confirmed before the pause is reported. */
T_TEST(busy_consumer_keeps_connection)
{
    PGconn *c = it_connect();
    it_sql(c, "ALTER SYSTEM SET wal_sender_timeout = '1s'");
    it_sql(c, "SELECT pg_reload_conf()");
    it_sql(c, "CREATE TABLE busy (id int PRIMARY KEY)");
    setup(c, "busy", "busy", NULL);
    firn_pgo_stream *s = start("busy", true, 0);
    it_sql(c, "INSERT INTO busy VALUES (1)");
    firn_buf out;
    firn_buf_init(&out, 1 << 20);
    it_drain(s, c, &out, NULL, NULL); /* confirms every commit, the marker's included */
    T_EQ_STR(it_text(&out), "B\nR public.busy *id:23\nI busy (1)\nC\n");
    char *pid =
        it_value(c, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = 's_busy'");
    char *end = it_value(c, "SELECT pg_current_wal_insert_lsn()");
    /* Busy for four timeouts: writes go on meanwhile, nothing calls the stream. */
    it_sql(c, "INSERT INTO busy VALUES (2)");
    for (int i = 0; i < 8; i++) {
        struct timespec half = {0, 500000000};
        nanosleep(&half, NULL);
        it_sql(c, "INSERT INTO busy SELECT max(id) + 1 FROM busy");
    }
    char *pid2 =
        it_value(c, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = 's_busy'");
    T_EQ_STR(pid2, pid);
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT confirmed_flush_lsn >= '%s' FROM pg_replication_slots "
             "WHERE slot_name = 's_busy'",
             end);
    char *v = it_value(c, sql);
    T_EQ_STR(v, "t");
    firn_buf_reset(&out);
    it_drain(s, c, &out, NULL, NULL);
    T_EQ_STR(it_text(&out), "B\nI busy (2)\nC\nB\nI busy (3)\nC\nB\nI busy (4)\nC\n"
                            "B\nI busy (5)\nC\nB\nI busy (6)\nC\nB\nI busy (7)\nC\n"
                            "B\nI busy (8)\nC\nB\nI busy (9)\nC\nB\nI busy (10)\nC\n");
    it_sql(c, "ALTER SYSTEM RESET wal_sender_timeout");
    it_sql(c, "SELECT pg_reload_conf()");
    firn_free(v);
    firn_free(pid);
    firn_free(pid2);
    firn_free(end);
    firn_pgo_stream_free(s);
    firn_buf_deinit(&out);
    PQfinish(c);
}

T_MAIN(T_CASE(dml_in_text),
       T_CASE(binary_values),
       T_CASE(toast_default_and_full),
       T_CASE(large_streamed_transactions),
       T_CASE(schema_changes),
       T_CASE(partitioned_both_ways),
       T_CASE(exported_snapshot_and_idle_advance),
       T_CASE(busy_consumer_keeps_connection))
