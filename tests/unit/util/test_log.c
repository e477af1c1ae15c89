/* SPDX-License-Identifier: Apache-2.0 */
/* Log levels per component, logfmt and JSON lines, password redaction. */
#include "firn/util.h"
#include "t.h"

/* Captures what the logger writes through a pipe. */
static void capture(char *out, size_t cap, void (*fn)(void))
{
    int fds[2];
    T_TRUE(pipe(fds) == 0);
    firn_log_set_fd(fds[1]);
    fn();
    close(fds[1]);
    ssize_t n = read(fds[0], out, cap - 1);
    out[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    firn_log_set_fd(2);
}

static void log_some(void)
{
    FIRN_LOG(FIRN_LOG_INFO, "engine", "committed %d rows", 5);
    FIRN_LOG(FIRN_LOG_DEBUG, "engine", "hidden");
    FIRN_LOG(FIRN_LOG_DEBUG, "pg", "shown \"quoted\"");
    FIRN_LOG(FIRN_LOG_ERROR, "io", "silenced");
    firn_log_event(FIRN_LOG_INFO, "engine", "commit", "table", "a b", "rows", "7", NULL);
}

T_TEST(levels_and_logfmt)
{
    firn_err err = {0};
    T_OK_ERR(firn_log_configure("info,pg=debug,-io", &err), &err);
    T_TRUE(firn_log_enabled(FIRN_LOG_INFO, "engine"));
    T_FALSE(firn_log_enabled(FIRN_LOG_DEBUG, "engine"));
    T_TRUE(firn_log_enabled(FIRN_LOG_DEBUG, "pg"));
    T_FALSE(firn_log_enabled(FIRN_LOG_ERROR, "io"));
    char out[4096];
    capture(out, sizeof(out), log_some);
    T_TRUE(strstr(out, "level=info comp=engine msg=\"committed 5 rows\"\n") != NULL);
    T_TRUE(strstr(out, "hidden") == NULL);
    T_TRUE(strstr(out, "silenced") == NULL);
    T_TRUE(strstr(out, "comp=pg msg=\"shown \\\"quoted\\\"\"") != NULL);
    T_TRUE(strstr(out, "msg=commit table=\"a b\" rows=7\n") != NULL);
    T_TRUE(strncmp(out, "ts=20", 5) == 0);
}

T_TEST(json_lines)
{
    firn_err err = {0};
    T_OK(firn_log_configure("debug", &err));
    firn_log_set_json(true);
    char out[4096];
    capture(out, sizeof(out), log_some);
    T_TRUE(strstr(out, "\"level\":\"info\",\"comp\":\"engine\",\"msg\":\"committed 5 rows\"}\n") !=
           NULL);
    T_TRUE(strstr(out, "\"msg\":\"commit\",\"table\":\"a b\",\"rows\":\"7\"}") != NULL);
    T_TRUE(strstr(out, "silenced") != NULL);
}

T_TEST(bad_spec_changes_nothing)
{
    firn_err err = {0};
    T_OK(firn_log_configure("warn", &err));
    T_EQ_INT(firn_log_configure("info,pg=loud", &err), FIRN_ERR_CONFIG);
    T_EQ_STR(err.msg, "unknown log level in \"pg=loud\"");
    T_EQ_INT(firn_log_configure("verbose", &err), FIRN_ERR_CONFIG);
    T_FALSE(firn_log_enabled(FIRN_LOG_INFO, "pg"));
    T_TRUE(firn_log_enabled(FIRN_LOG_WARN, "pg"));
}

T_TEST(redact_conninfo)
{
    char out[256];
    firn_redact_conninfo("host=db user=app password=s3cret dbname=x", out, sizeof(out));
    T_EQ_STR(out, "host=db user=app password=******** dbname=x");
    firn_redact_conninfo("host=db password = 'a b\\' c' port=5", out, sizeof(out));
    T_EQ_STR(out, "host=db password = ******** port=5");
    firn_redact_conninfo("postgresql://app:s3cret@db:5432/x?sslmode=require", out, sizeof(out));
    T_EQ_STR(out, "postgresql://app:********@db:5432/x?sslmode=require");
    firn_redact_conninfo("postgres://db/x?user=a&password=s3cret&sslmode=disable", out,
                         sizeof(out));
    T_EQ_STR(out, "postgres://db/x?user=a&password=********&sslmode=disable");
    firn_redact_conninfo("host=db", out, sizeof(out));
    T_EQ_STR(out, "host=db");
    char tiny[8];
    firn_redact_conninfo("password=abcdefghijkl", tiny, sizeof(tiny));
    T_TRUE(strstr(tiny, "abc") == NULL);
}

T_MAIN(T_CASE(levels_and_logfmt),
       T_CASE(json_lines),
       T_CASE(bad_spec_changes_nothing),
       T_CASE(redact_conninfo))
