/* SPDX-License-Identifier: Apache-2.0 */
/* Preflight checks against a real PostgreSQL: each broken setup gives one exact error that
 * says what to run; a slot held by another consumer is refused; TOAST risks are reported. */
#include "pgo_itest.h"

#include <stdio.h>

static firn_rc preflight(const char *slot,
                         const char *pub,
                         const firn_pgo_table *t,
                         size_t n,
                         firn_pgo_report *rep,
                         firn_err *err)
{
    const char *pubs[] = {pub};
    firn_pgo_stream *s = it_open(slot, pubs, 1, true, 0);
    firn_rc rc = firn_pgo_stream_preflight(s, t, n, false, rep, err);
    firn_pgo_stream_free(s);
    return rc;
}

static void setup(PGconn *c)
{
    it_sql(c, "CREATE TABLE IF NOT EXISTS ok_t (id int PRIMARY KEY, doc text, n int)");
    it_sql(c, "CREATE TABLE IF NOT EXISTS full_t (id int PRIMARY KEY, doc text)");
    it_sql(c, "ALTER TABLE full_t REPLICA IDENTITY FULL");
    it_sql(c, "CREATE TABLE IF NOT EXISTS nothing_t (id int PRIMARY KEY)");
    it_sql(c, "ALTER TABLE nothing_t REPLICA IDENTITY NOTHING");
    it_sql(c, "CREATE TABLE IF NOT EXISTS nokey_t (id int)");
    it_sql(c, "CREATE TABLE IF NOT EXISTS other_t (id int PRIMARY KEY)");
}

T_TEST(missing_slot)
{
    PGconn *c = it_connect();
    setup(c);
    it_sql(c, "CREATE PUBLICATION pf_a FOR TABLE ok_t");
    firn_err err = {0};
    T_EQ_INT(preflight("nope", "pf_a", NULL, 0, NULL, &err), FIRN_ERR_NOT_FOUND);
    T_EQ_STR(err.msg, "replication slot \"nope\" does not exist; create it with SELECT "
                      "pg_create_logical_replication_slot('nope', 'pgoutput')");
    PQfinish(c);
}

T_TEST(wrong_plugin)
{
    PGconn *c = it_connect();
    setup(c);
    it_sql(c, "CREATE PUBLICATION pf_b FOR TABLE ok_t");
    it_sql(c, "SELECT pg_create_logical_replication_slot('td_slot', 'test_decoding')");
    firn_err err = {0};
    T_EQ_INT(preflight("td_slot", "pf_b", NULL, 0, NULL, &err), FIRN_ERR_CONFIG);
    T_EQ_STR(err.msg, "replication slot \"td_slot\" uses plugin \"test_decoding\", not pgoutput; "
                      "drop it with SELECT pg_drop_replication_slot('td_slot') and create it with "
                      "SELECT pg_create_logical_replication_slot('td_slot', 'pgoutput')");
    PQfinish(c);
}

T_TEST(slot_in_use)
{
    PGconn *c = it_connect();
    setup(c);
    it_sql(c, "CREATE PUBLICATION pf_c FOR TABLE ok_t");
    it_sql(c, "SELECT pg_create_logical_replication_slot('busy', 'pgoutput')");
    const char *pubs[] = {"pf_c"};
    firn_pgo_stream *first = it_open("busy", pubs, 1, true, 0);
    firn_err err = {0};
    T_OK_ERR(firn_pgo_stream_start(first, 0, &err), &err);
    char *pid = it_value(c, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'busy'");
    T_EQ_INT(preflight("busy", "pf_c", NULL, 0, NULL, &err), FIRN_ERR_CONFIG);
    char want[512];
    snprintf(want, sizeof(want),
             "replication slot \"busy\" is active for PID %s; stop the other consumer (SELECT "
             "pg_terminate_backend(%s)) or use another slot",
             pid, pid);
    T_EQ_STR(err.msg, want);
    /* Starting anyway: the server refuses and the error says so. */
    firn_pgo_stream *second = it_open("busy", pubs, 1, true, 0);
    /* Transient for a reconnect: the walsender of a lost connection holds the slot a while. */
    T_EQ_INT(firn_pgo_stream_start(second, 0, &err), FIRN_ERR_UNAVAILABLE);
    snprintf(want, sizeof(want),
             "could not start replication: replication slot \"busy\" is active for PID %s", pid);
    T_EQ_STR(err.msg, want);
    /* The first consumer loses its connection: a clear error, not an empty stream. */
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%s)", pid);
    it_sql(c, sql);
    firn_pgo_event ev;
    firn_rc rc = FIRN_OK;
    for (int i = 0; i < 50 && rc == FIRN_OK; i++)
        rc = firn_pgo_stream_next(first, 100, &ev, &err);
    /* 57P01 (admin_shutdown) or the connection gone: the stream was lost, not refused. */
    T_TRUE(rc == FIRN_ERR_NETWORK || rc == FIRN_ERR_UNAVAILABLE);
    T_TRUE(strstr(err.msg, "terminat") != NULL || strstr(err.msg, "connection") != NULL);
    T_TRUE(firn_pgo_stream_lost(first));
    T_FALSE(firn_pgo_stream_lost(second));
    firn_free(pid);
    firn_pgo_stream_free(first);
    firn_pgo_stream_free(second);
    PQfinish(c);
}

T_TEST(publication_problems)
{
    PGconn *c = it_connect();
    setup(c);
    it_sql(c, "SELECT pg_create_logical_replication_slot('s_pub', 'pgoutput')");
    firn_err err = {0};
    T_EQ_INT(preflight("s_pub", "missing_pub", NULL, 0, NULL, &err), FIRN_ERR_NOT_FOUND);
    T_EQ_STR(err.msg, "publication \"missing_pub\" does not exist; have a table owner or "
                      "superuser run CREATE PUBLICATION \"missing_pub\" FOR TABLE ... WITH "
                      "(publish_via_partition_root = true)");
    it_sql(c, "CREATE PUBLICATION pf_d FOR TABLE ok_t, full_t, nothing_t, nokey_t");
    const firn_pgo_table other[] = {{.schema = "public", .name = "other_t"}};
    T_EQ_INT(preflight("s_pub", "pf_d", other, 1, NULL, &err), FIRN_ERR_CONFIG);
    T_EQ_STR(err.msg, "publication \"pf_d\" does not cover table \"public.other_t\"; run ALTER "
                      "PUBLICATION \"pf_d\" ADD TABLE \"public\".\"other_t\"");
    const firn_pgo_table nothing[] = {{.schema = "public", .name = "nothing_t"}};
    T_EQ_INT(preflight("s_pub", "pf_d", nothing, 1, NULL, &err), FIRN_ERR_CONFIG);
    T_EQ_STR(err.msg, "table \"public.nothing_t\" has REPLICA IDENTITY NOTHING, so its updates "
                      "and deletes cannot be replicated; add a primary key or run ALTER TABLE "
                      "\"public\".\"nothing_t\" REPLICA IDENTITY FULL");
    const firn_pgo_table nokey[] = {{.schema = "public", .name = "nokey_t"}};
    T_EQ_INT(preflight("s_pub", "pf_d", nokey, 1, NULL, &err), FIRN_ERR_CONFIG);
    const firn_pgo_table missing[] = {{.schema = "public", .name = "no_such"}};
    T_EQ_INT(preflight("s_pub", "pf_d", missing, 1, NULL, &err), FIRN_ERR_NOT_FOUND);
    T_EQ_STR(err.msg, "table \"public.no_such\" does not exist");
    /* A good setup passes and names the tables at TOAST risk (not FULL, with text). */
    const firn_pgo_table good[] = {{.schema = "public", .name = "ok_t"},
                                   {.schema = "public", .name = "full_t"}};
    firn_pgo_report rep = {0};
    T_OK_ERR(preflight("s_pub", "pf_d", good, 2, &rep, &err), &err);
    T_EQ_UINT(rep.n_toast_risk, 1);
    T_EQ_STR(rep.toast_risk[0], "public.ok_t");
    firn_pgo_report_deinit(&rep);
    /* Only the selected columns count: ok_t without its text column is not at risk. */
    const char *const narrow_cols[] = {"id", "n"}, *const doc_cols[] = {"id", "doc"};
    const firn_pgo_table narrow[] = {
        {.schema = "public", .name = "ok_t", .columns = narrow_cols, .n_columns = 2}};
    T_OK_ERR(preflight("s_pub", "pf_d", narrow, 1, &rep, &err), &err);
    T_EQ_UINT(rep.n_toast_risk, 0);
    const firn_pgo_table with_doc[] = {
        {.schema = "public", .name = "ok_t", .columns = doc_cols, .n_columns = 2}};
    T_OK_ERR(preflight("s_pub", "pf_d", with_doc, 1, &rep, &err), &err);
    T_EQ_UINT(rep.n_toast_risk, 1);
    firn_pgo_report_deinit(&rep);
    /* FOR ALL TABLES covers everything, the BigLake walkthrough's setup. */
    it_sql(c, "CREATE PUBLICATION pf_all FOR ALL TABLES");
    T_OK_ERR(preflight("s_pub", "pf_all", other, 1, NULL, &err), &err);
    PQfinish(c);
}

T_TEST(missing_slot_at_start)
{
    PGconn *c = it_connect();
    setup(c);
    it_sql(c, "CREATE PUBLICATION pf_e FOR TABLE ok_t");
    const char *pubs[] = {"pf_e"};
    firn_pgo_stream *s = it_open("gone_slot", pubs, 1, true, 0);
    firn_err err = {0};
    T_EQ_INT(firn_pgo_stream_start(s, 0, &err), FIRN_ERR_NOT_FOUND);
    T_EQ_STR(err.msg, "could not start replication: replication slot \"gone_slot\" does not exist");
    firn_pgo_stream_free(s);
    PQfinish(c);
}

T_MAIN(T_CASE(missing_slot),
       T_CASE(wrong_plugin),
       T_CASE(slot_in_use),
       T_CASE(publication_problems),
       T_CASE(missing_slot_at_start))
