/* SPDX-License-Identifier: Apache-2.0 */
/* The throwaway PostgreSQL cluster works from C: create a table, write rows, read them back
 * through libpq and compare values; logical replication is enabled. */
#include "firn/util.h"
#include "t.h"

#include <libpq-fe.h>

static PGconn *connect_or_fail(void)
{
    const char *uri = getenv("FIRN_TEST_PGURI");
    if (!uri)
        T_FAIL("FIRN_TEST_PGURI is not set; run through tests/harness/pg_cluster.sh");
    PGconn *c = PQconnectdb(uri);
    if (PQstatus(c) != CONNECTION_OK)
        T_FAIL("could not connect: %s", PQerrorMessage(c));
    return c;
}

static PGresult *exec_ok(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        T_FAIL("%s: %s", sql, PQerrorMessage(c));
    return r;
}

T_TEST(table_round_trip)
{
    PGconn *c = connect_or_fail();
    PQclear(exec_ok(c, "CREATE TABLE t (id int8 PRIMARY KEY, name text, amount numeric(12,2),"
                       " at timestamptz)"));
    PQclear(exec_ok(c, "SET TimeZone = 'UTC'"));
    PQclear(exec_ok(c, "INSERT INTO t VALUES (1, 'ünïcødé', 12.34, '2024-05-01 10:00:00+02'),"
                       " (2, '', -0.01, NULL), (3, NULL, NULL, '1900-01-01 00:00:00+00')"));
    PGresult *r = exec_ok(c, "SELECT id, name, amount, at FROM t ORDER BY id");
    T_EQ_INT(PQntuples(r), 3);
    static const char *expect[3][4] = {
        {"1", "ünïcødé", "12.34", "2024-05-01 08:00:00+00"},
        {"2", "", "-0.01", NULL},
        {"3", NULL, NULL, "1900-01-01 00:00:00+00"},
    };
    for (int row = 0; row < 3; row++) {
        for (int col = 0; col < 4; col++) {
            if (!expect[row][col]) {
                T_TRUE(PQgetisnull(r, row, col));
                continue;
            }
            T_FALSE(PQgetisnull(r, row, col));
            T_EQ_STR(PQgetvalue(r, row, col), expect[row][col]);
        }
    }
    PQclear(r);
    PQfinish(c);
}

T_TEST(logical_replication_enabled)
{
    PGconn *c = connect_or_fail();
    PGresult *r = exec_ok(c, "SHOW wal_level");
    T_EQ_STR(PQgetvalue(r, 0, 0), "logical");
    PQclear(r);
    r = exec_ok(c, "SELECT slot_name FROM pg_create_logical_replication_slot('probe', "
                   "'pgoutput')");
    T_EQ_STR(PQgetvalue(r, 0, 0), "probe");
    PQclear(r);
    PQclear(exec_ok(c, "SELECT pg_drop_replication_slot('probe')"));
    PQfinish(c);
}

T_MAIN(T_CASE(table_round_trip), T_CASE(logical_replication_enabled))
