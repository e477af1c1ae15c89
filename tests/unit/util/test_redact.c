/* SPDX-License-Identifier: Apache-2.0 */
/* firn_redact_text, the one place relayed text is cleaned: remembered secrets and credential
 * patterns become "<redacted>" in error messages and log lines; ordinary prose stays. */
#include "t.h"
#include "firn/util.h"

static const char *redacted(const char *in)
{
    static char out[FIRN_ERR_MSG_MAX];
    snprintf(out, sizeof(out), "%s", in);
    firn_redact_text(out, sizeof(out));
    return out;
}

T_TEST(patterns)
{
    T_EQ_STR(redacted("echo: Authorization: Bearer eyJhbGciOi.x-y_z"),
             "echo: Authorization: Bearer <redacted>");
    T_EQ_STR(redacted("{\"headers\": {\"Authorization\": \"Basic dXNlcjpwYXNz\"}}"),
             "{\"headers\": {\"Authorization\": \"Basic <redacted>\"}}");
    T_EQ_STR(redacted("{\"client_secret\": \"s3cr\\\"et\", \"scope\": \"catalog\"}"),
             "{\"client_secret\": \"<redacted>\", \"scope\": \"catalog\"}");
    T_EQ_STR(redacted("grant_type=client_credentials&client_secret=abc%2Fdef&scope=x"),
             "grant_type=client_credentials&client_secret=<redacted>&scope=x");
    T_EQ_STR(redacted("host=db password=hunter22 dbname=x"),
             "host=db password=<redacted> dbname=x");
    T_EQ_STR(redacted("see postgresql://app:hunter22@db:5432/x"),
             "see postgresql://app:<redacted>@db:5432/x");
    T_EQ_STR(redacted("X-Amz-Security-Token: FQoGZXIvYXdz"), "X-Amz-Security-Token: <redacted>");
    T_EQ_STR(redacted("{\"private_key\": \"-----BEGIN PRIVATE KEY-----\\nMIIE\\n\"}"),
             "{\"private_key\": \"<redacted>\"}");
    /* prose that names credentials keeps its words */
    const char *prose[] = {
        "token endpoint returned no access token: invalid_client",
        "could not refresh a bearer token, using the current one",
        "password authentication failed for user \"app\"",
        "OAuth2 client credentials need a client id and a client secret",
        "Key (id)=(1) already exists",
        "source.json: \"password\": environment variable \"X\" is not set",
    };
    for (size_t i = 0; i < sizeof(prose) / sizeof(prose[0]); i++)
        T_EQ_STR(redacted(prose[i]), prose[i]);
}

T_TEST(remembered_secrets)
{
    firn_secret_register("tok-9f8e7d6c");
    firn_secret_register_config("client-id:sec/ret+42");
    firn_secret_register_config("postgresql://app:pg%pw99@db/x");
    firn_secret_register("abc"); /* too short to remember: ordinary words stay */
    T_EQ_STR(redacted("server said tok-9f8e7d6c is bad"), "server said <redacted> is bad");
    T_EQ_STR(redacted("got sec/ret+42 back"), "got <redacted> back");
    T_EQ_STR(redacted("form: sec%2Fret%2B42"), "form: <redacted>");
    T_EQ_STR(redacted("libpq: pg%pw99 rejected"), "libpq: <redacted> rejected");
    T_EQ_STR(redacted("abc def"), "abc def");
    for (int i = 0; i < 100; i++) { /* rotating tokens never push out the lasting secrets */
        char tok[32];
        snprintf(tok, sizeof(tok), "rotating-token-%03d", i);
        firn_secret_register_token(tok);
    }
    T_EQ_STR(redacted("rotating-token-099 tok-9f8e7d6c"), "<redacted> <redacted>");
}

T_TEST(errors_and_logs)
{
    firn_secret_register("err-secret-77");
    firn_err err = {0};
    T_EQ_INT(firn_err_set(&err, FIRN_ERR_AUTH, "HTTP 401: %s", "{\"echo\": \"err-secret-77\"}"),
             FIRN_ERR_AUTH);
    T_EQ_STR(err.msg, "HTTP 401: {\"echo\": \"<redacted>\"}");
    firn_err_context(&err, "while loading %s", "Bearer err-secret-77");
    T_TRUE(strstr(err.msg, "err-secret-77") == NULL);
    int fds[2];
    T_TRUE(pipe(fds) == 0);
    firn_log_set_fd(fds[1]);
    FIRN_LOG(FIRN_LOG_ERROR, "net", "body: %s", "err-secret-77");
    firn_log_event(FIRN_LOG_ERROR, "net", "event", "detail", "password=err-secret-77", NULL);
    close(fds[1]);
    char out[4096];
    ssize_t n = read(fds[0], out, sizeof(out) - 1);
    out[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    firn_log_set_fd(2);
    T_TRUE(strstr(out, "err-secret-77") == NULL);
    T_TRUE(strstr(out, "body: <redacted>") != NULL);
    /* a result longer than the room is cut, never left with the secret */
    firn_secret_register("shortsec");
    char tiny[17];
    snprintf(tiny, sizeof(tiny), "%s", "0123456 shortsec");
    firn_redact_text(tiny, sizeof(tiny));
    T_EQ_STR(tiny, "0123456 <redacte");
}

T_MAIN(T_CASE(patterns), T_CASE(remembered_secrets), T_CASE(errors_and_logs))
