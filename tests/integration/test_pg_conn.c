/* SPDX-License-Identifier: Apache-2.0 */
/* PostgreSQL connections against the throwaway cluster: URI and discrete fields, passwords from
 * config and environment, one-line errors that keep the server's wording without the password,
 * and the fixed session settings. */
#include "firn/source_pg.h"
#include "t.h"

#define PW_ROLE   "firn_pw"
#define PW_SECRET "firn_pw_secret"

static const char *env_or_skip(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v)
        T_SKIP("%s not set (run under tests/harness/pg_cluster.sh)", name);
    return v;
}

T_TEST(connect_uri_and_session_settings)
{
    firn_pg_conn_config cfg = {.uri = env_or_skip("FIRN_TEST_PGURI")};
    firn_pg_conn *c = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_pg_conn_open(&cfg, FIRN_PG_CONN_SQL, &c, &err), &err);
    T_TRUE(firn_pg_conn_server_version(c) >= 100000);
    static const struct {
        const char *sql;
        const char *want;
    } settings[] = {
        {"SHOW DateStyle", "ISO, YMD"},     {"SHOW TimeZone", "UTC"},
        {"SHOW IntervalStyle", "postgres"}, {"SHOW extra_float_digits", "3"},
        {"SHOW bytea_output", "hex"},       {"SHOW client_encoding", "UTF8"},
        {"SHOW application_name", "firn"},
    };
    for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++) {
        char v[64];
        T_OK_ERR(firn_pg_conn_query_value(c, settings[i].sql, v, sizeof(v), &err), &err);
        T_EQ_STR(v, settings[i].want);
    }
    firn_pg_conn_close(c);
}

T_TEST(connect_discrete_fields_with_password)
{
    firn_pg_conn_config cfg = {.host = env_or_skip("PGHOST"),
                               .port = env_or_skip("PGPORT"),
                               .dbname = "postgres",
                               .user = PW_ROLE,
                               .password = PW_SECRET,
                               .sslmode = "disable",
                               .application_name = "firn-test"};
    firn_pg_conn *c = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_pg_conn_open(&cfg, FIRN_PG_CONN_SQL, &c, &err), &err);
    char v[64];
    T_OK_ERR(firn_pg_conn_query_value(c, "SELECT current_user", v, sizeof(v), &err), &err);
    T_EQ_STR(v, PW_ROLE);
    T_TRUE(strstr(firn_pg_conn_describe(c), "user=firn_pw") != NULL);
    T_TRUE(strstr(firn_pg_conn_describe(c), PW_SECRET) == NULL);
    firn_pg_conn_close(c);
}

T_TEST(password_from_named_env_and_pgpassword)
{
    firn_pg_conn_config cfg = {.host = env_or_skip("PGHOST"),
                               .port = env_or_skip("PGPORT"),
                               .dbname = "postgres",
                               .user = PW_ROLE,
                               .password_env = "FIRN_TEST_SECRET"};
    setenv("FIRN_TEST_SECRET", PW_SECRET, 1);
    firn_pg_conn *c = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_pg_conn_open(&cfg, FIRN_PG_CONN_SQL, &c, &err), &err);
    firn_pg_conn_close(c);
    /* Without config, libpq's PGPASSWORD applies. */
    cfg.password_env = NULL;
    setenv("PGPASSWORD", PW_SECRET, 1);
    T_OK_ERR(firn_pg_conn_open(&cfg, FIRN_PG_CONN_SQL, &c, &err), &err);
    firn_pg_conn_close(c);
    unsetenv("PGPASSWORD");
}

T_TEST(wrong_password_is_one_clear_line)
{
    firn_pg_conn_config cfg = {.host = env_or_skip("PGHOST"),
                               .port = env_or_skip("PGPORT"),
                               .dbname = "postgres",
                               .user = PW_ROLE,
                               .password = "not-the-secret-xyzzy"};
    firn_pg_conn *c = NULL;
    firn_err err = {0};
    T_EQ_INT(firn_pg_conn_open(&cfg, FIRN_PG_CONN_SQL, &c, &err), FIRN_ERR_AUTH);
    T_TRUE(c == NULL);
    T_TRUE(strstr(err.msg, "password authentication failed for user \"firn_pw\"") != NULL);
    T_TRUE(strstr(err.msg, "xyzzy") == NULL);
    T_TRUE(strchr(err.msg, '\n') == NULL);
}

T_TEST(missing_database_and_unreachable_host)
{
    firn_pg_conn_config cfg = {.uri = env_or_skip("FIRN_TEST_PGURI"), .dbname = "no_such_db"};
    firn_pg_conn *c = NULL;
    firn_err err = {0};
    T_EQ_INT(firn_pg_conn_open(&cfg, FIRN_PG_CONN_SQL, &c, &err), FIRN_ERR_NOT_FOUND);
    T_TRUE(strstr(err.msg, "database \"no_such_db\" does not exist") != NULL);

    /* Port 1 on loopback: nothing listens, the connection is refused at once. */
    firn_pg_conn_config down = {.host = "127.0.0.1",
                                .port = "1",
                                .dbname = "postgres",
                                .user = "x",
                                .password = "hidden-pw",
                                .connect_timeout_s = 2};
    T_EQ_INT(firn_pg_conn_open(&down, FIRN_PG_CONN_SQL, &c, &err), FIRN_ERR_NETWORK);
    T_TRUE(strstr(err.msg, "127.0.0.1") != NULL);
    T_TRUE(strstr(err.msg, "hidden-pw") == NULL);

    firn_pg_conn_config bad = {.uri = env_or_skip("FIRN_TEST_PGURI"), .sslmode = "sometimes"};
    T_EQ_INT(firn_pg_conn_open(&bad, FIRN_PG_CONN_SQL, &c, &err), FIRN_ERR_CONFIG);
    T_TRUE(strstr(err.msg, "sslmode") != NULL);
}

T_TEST(sslmode_require_against_non_tls_server)
{
    /* The test cluster has no TLS: require and verify-full must fail clearly, never fall back. */
    const char *modes[] = {"require", "verify-ca", "verify-full"};
    for (size_t i = 0; i < 3; i++) {
        firn_pg_conn_config cfg = {.uri = env_or_skip("FIRN_TEST_PGURI"),
                                   .sslmode = modes[i],
                                   .sslrootcert = "/nonexistent/root.crt"};
        firn_pg_conn *c = NULL;
        firn_err err = {0};
        firn_rc rc = firn_pg_conn_open(&cfg, FIRN_PG_CONN_SQL, &c, &err);
        T_TRUE(rc != FIRN_OK);
        T_TRUE(c == NULL);
        T_TRUE(err.msg[0] != '\0');
    }
}

T_TEST(replication_connection)
{
    firn_pg_conn_config cfg = {.uri = env_or_skip("FIRN_TEST_PGURI")};
    firn_pg_conn *c = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_pg_conn_open(&cfg, FIRN_PG_CONN_REPLICATION, &c, &err), &err);
    char v[64];
    T_OK_ERR(firn_pg_conn_query_value(c, "SHOW TimeZone", v, sizeof(v), &err), &err);
    T_EQ_STR(v, "UTC");
    firn_pg_conn_close(c);
}

T_MAIN(T_CASE(connect_uri_and_session_settings),
       T_CASE(connect_discrete_fields_with_password),
       T_CASE(password_from_named_env_and_pgpassword),
       T_CASE(wrong_password_is_one_clear_line),
       T_CASE(missing_database_and_unreachable_host),
       T_CASE(sslmode_require_against_non_tls_server),
       T_CASE(replication_connection))
