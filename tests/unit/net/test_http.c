/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP client: retries and backoff on 5xx/429 (Retry-After), no retry for non-idempotent
 * requests, status and transport error mapping, 401 refresh, size limits, redacted traces.
 * Faults come from the scripted server in fake_http.h. */
#include "firn/net.h"
#include "net/net_int.h"
#include "t.h"
#include "unit/net/fake_http.h"

static firn_http *client(int max_retries, long timeout_ms)
{
    firn_http_options o = firn_http_options_default();
    o.max_retries = max_retries;
    o.backoff_base_ms = 5;
    o.backoff_max_ms = 50;
    if (timeout_ms)
        o.timeout_ms = timeout_ms;
    firn_http *http = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_http_new(&o, &http, &err), &err);
    return http;
}

static firn_rc get(firn_http *http,
                   fake_server *s,
                   firn_http_method m,
                   bool not_idempotent,
                   firn_http_response *resp,
                   firn_err *err)
{
    char url[128];
    fake_url(s, "/obj?x=1", url, sizeof(url));
    firn_http_request req = {.method = m, .url = url, .not_idempotent = not_idempotent};
    return firn_http_do(http, &req, resp, err);
}

T_TEST(retries_503_then_succeeds)
{
    fake_resp script[] = {{503, NULL, "busy", 0, false},
                          {503, NULL, "busy", 0, false},
                          {200, "ETag: \"e1\"\r\n", "hello", 0, false}};
    fake_server *s = fake_start(script, 3);
    firn_http *http = client(4, 0);
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_err err = {0};
    T_OK_ERR(get(http, s, FIRN_HTTP_GET, false, &resp, &err), &err);
    T_EQ_INT(resp.status, 200);
    T_EQ_STR((char *)resp.body.data, "hello");
    T_EQ_STR(firn_http_headers_get(&resp.headers, "etag"), "\"e1\"");
    T_EQ_INT(resp.attempts, 3);
    T_EQ_INT(fake_requests(s), 3);
    firn_http_response_deinit(&resp);
    firn_http_free(http);
    fake_stop(s);
}

T_TEST(gives_up_after_max_retries)
{
    fake_resp script[] = {{500, NULL, "{\"error\":\"boom\"}", 0, false}};
    fake_server *s = fake_start(script, 1);
    firn_http *http = client(2, 0);
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_err err = {0};
    T_EQ_INT(get(http, s, FIRN_HTTP_GET, false, &resp, &err), FIRN_ERR_UNAVAILABLE);
    T_EQ_INT(fake_requests(s), 3);
    T_EQ_INT(resp.status, 500);
    T_TRUE(strstr(err.msg, "HTTP 500") != NULL);
    T_TRUE(strstr(err.msg, "boom") != NULL);
    T_TRUE(firn_rc_is_transient(err.code));
    firn_http_response_deinit(&resp);
    firn_http_free(http);
    fake_stop(s);
}

T_TEST(retry_after_is_honoured)
{
    fake_resp script[] = {{429, "Retry-After: 1\r\n", NULL, 0, false}, {200, NULL, "ok", 0, false}};
    fake_server *s = fake_start(script, 2);
    firn_http *http = client(3, 0);
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_err err = {0};
    int64_t t0 = firn_monotonic_ns();
    T_OK_ERR(get(http, s, FIRN_HTTP_GET, false, &resp, &err), &err);
    int64_t ms = (firn_monotonic_ns() - t0) / 1000000;
    T_TRUE(ms >= 950);
    T_TRUE(ms < 5000);
    T_EQ_INT(fake_requests(s), 2);
    firn_http_response_deinit(&resp);
    firn_http_free(http);
    fake_stop(s);
}

T_TEST(not_idempotent_is_never_retried)
{
    fake_resp script[] = {{503, NULL, NULL, 0, false}, {200, NULL, NULL, 0, false}};
    fake_server *s = fake_start(script, 2);
    firn_http *http = client(4, 0);
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_err err = {0};
    T_EQ_INT(get(http, s, FIRN_HTTP_POST, true, &resp, &err), FIRN_ERR_UNKNOWN_OUTCOME);
    T_EQ_INT(fake_requests(s), 1);
    T_EQ_INT(resp.status, 503);
    T_EQ_INT(firn_rc_classify(err.code), FIRN_RC_CLASS_UNKNOWN);
    firn_http_response_deinit(&resp);
    firn_http_free(http);
    fake_stop(s);
}

/* A request sent once hands the server's Retry-After (seconds here; an HTTP date goes through
 * the same parser, backoff_and_retry_after_arithmetic) to the caller, whose own retries honour
 * it; an error without one, and the next error, carry none. */
T_TEST(retry_after_reaches_the_caller)
{
    fake_resp script[] = {{503, "Retry-After: 7\r\n", NULL, 0, false},
                          {429, "Retry-After: 2\r\n", NULL, 0, false},
                          {500, NULL, NULL, 0, false}};
    fake_server *s = fake_start(script, 3);
    firn_http *http = client(4, 0);
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_err err = {0};
    T_EQ_INT(get(http, s, FIRN_HTTP_POST, true, &resp, &err), FIRN_ERR_UNKNOWN_OUTCOME);
    T_EQ_INT(err.retry_after_ms, 7000);
    T_EQ_INT(get(http, s, FIRN_HTTP_POST, true, &resp, &err), FIRN_ERR_THROTTLED);
    T_EQ_INT(err.retry_after_ms, 2000);
    T_EQ_INT(get(http, s, FIRN_HTTP_POST, true, &resp, &err), FIRN_ERR_UNKNOWN_OUTCOME);
    T_EQ_INT(err.retry_after_ms, 0);
    T_EQ_INT(fake_requests(s), 3);
    firn_http_response_deinit(&resp);
    firn_http_free(http);
    fake_stop(s);
}

T_TEST(client_errors_map_without_retry)
{
    static const struct {
        int status;
        firn_rc rc;
    } cases[] = {{400, FIRN_ERR_INVALID},   {401, FIRN_ERR_AUTH},     {403, FIRN_ERR_PERMISSION},
                 {404, FIRN_ERR_NOT_FOUND}, {409, FIRN_ERR_CONFLICT}, {412, FIRN_ERR_EXISTS},
                 {418, FIRN_ERR_PROTOCOL}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fake_resp script[] = {{cases[i].status, NULL, "no", 0, false}};
        fake_server *s = fake_start(script, 1);
        firn_http *http = client(4, 0);
        firn_http_response resp;
        firn_http_response_init(&resp);
        firn_err err = {0};
        T_EQ_INT(get(http, s, FIRN_HTTP_GET, false, &resp, &err), cases[i].rc);
        T_EQ_INT(fake_requests(s), 1);
        T_EQ_INT(resp.status, cases[i].status);
        firn_http_response_deinit(&resp);
        firn_http_free(http);
        fake_stop(s);
    }
    T_EQ_INT(firn_http_status_rc(429), FIRN_ERR_THROTTLED);
    T_EQ_INT(firn_http_status_rc(502), FIRN_ERR_UNAVAILABLE);
    T_EQ_INT(firn_http_status_rc(204), FIRN_OK);
    T_EQ_INT(firn_http_status_rc(308), FIRN_OK);
}

T_TEST(timeouts_map_to_timeout_or_unknown)
{
    fake_resp script[] = {{200, NULL, "late", 1500, false}};
    fake_server *s = fake_start(script, 1);
    firn_http *http = client(-1, 300);
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_err err = {0};
    T_EQ_INT(get(http, s, FIRN_HTTP_GET, false, &resp, &err), FIRN_ERR_TIMEOUT);
    T_EQ_INT(get(http, s, FIRN_HTTP_POST, true, &resp, &err), FIRN_ERR_UNKNOWN_OUTCOME);
    firn_http_response_deinit(&resp);
    firn_http_free(http);
    fake_stop(s);
}

T_TEST(dropped_connection_is_retried)
{
    fake_resp script[] = {{0, NULL, NULL, 0, true}, {200, NULL, "again", 0, false}};
    fake_server *s = fake_start(script, 2);
    firn_http *http = client(2, 0);
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_err err = {0};
    T_OK_ERR(get(http, s, FIRN_HTTP_GET, false, &resp, &err), &err);
    T_EQ_STR((char *)resp.body.data, "again");
    T_EQ_INT(fake_requests(s), 2);
    firn_http_response_deinit(&resp);
    firn_http_free(http);
    fake_stop(s);
}

T_TEST(not_idempotent_is_not_resent_on_a_dead_reused_connection)
{
    /* The GET leaves a kept-alive connection; the server then swallows the POST and closes.
     * libcurl would resend a request on a reused connection that died; a commit must not be. */
    fake_resp script[] = {{200, NULL, "first", 0, false, true},
                          {0, NULL, NULL, 0, true, false},
                          {200, NULL, "resent", 0, false, false}};
    fake_server *s = fake_start(script, 3);
    firn_http *http = client(4, 0);
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_err err = {0};
    T_OK_ERR(get(http, s, FIRN_HTTP_GET, false, &resp, &err), &err);
    T_EQ_INT(get(http, s, FIRN_HTTP_POST, true, &resp, &err), FIRN_ERR_UNKNOWN_OUTCOME);
    T_EQ_INT(fake_requests(s), 2);
    firn_http_response_deinit(&resp);
    firn_http_free(http);
    fake_stop(s);
}

T_TEST(connection_refused_is_network_error)
{
    fake_resp script[] = {{200, NULL, NULL, 0, false}};
    fake_server *s = fake_start(script, 1);
    char url[128];
    fake_url(s, "/", url, sizeof(url));
    fake_stop(s); /* the port is now closed */
    firn_http *http = client(1, 0);
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_err err = {0};
    firn_http_request req = {.method = FIRN_HTTP_POST, .url = url, .not_idempotent = true};
    /* Nothing reached a server, so even a commit may safely be tried again. */
    T_EQ_INT(firn_http_do(http, &req, &resp, &err), FIRN_ERR_NETWORK);
    req.not_idempotent = false;
    T_EQ_INT(firn_http_do(http, &req, &resp, &err), FIRN_ERR_NETWORK);
    T_EQ_INT(resp.attempts, 2);
    firn_http_response_deinit(&resp);
    firn_http_free(http);
}

T_TEST(body_is_sent_as_given)
{
    fake_resp script[] = {{201, NULL, NULL, 0, false}};
    fake_server *s = fake_start(script, 1);
    firn_http *http = client(0, 0);
    char url[128];
    fake_url(s, "/put/here", url, sizeof(url));
    firn_http_headers h;
    firn_http_headers_init(&h);
    firn_http_headers_add(&h, "X-Test", "1");
    firn_http_request req = {.method = FIRN_HTTP_PUT,
                             .url = url,
                             .headers = &h,
                             .body = "payload-bytes",
                             .body_len = 13};
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_err err = {0};
    T_OK_ERR(firn_http_do(http, &req, &resp, &err), &err);
    const char *raw = fake_request(s, 0);
    T_TRUE(strncmp(raw, "PUT /put/here HTTP/1.1\r\n", 24) == 0);
    T_TRUE(strstr(raw, "\r\nX-Test: 1\r\n") != NULL);
    T_TRUE(strstr(raw, "Content-Length: 13\r\n") != NULL);
    T_TRUE(strstr(raw, "\r\n\r\npayload-bytes") != NULL);
    T_TRUE(fake_strcasestr(raw, "Expect:") == NULL);
    T_TRUE(fake_strcasestr(raw, "Content-Type:") == NULL);
    firn_http_response_deinit(&resp);
    firn_http_headers_deinit(&h);
    firn_http_free(http);
    fake_stop(s);
}

T_TEST(response_limit)
{
    fake_resp script[] = {{200, NULL, "0123456789abcdef", 0, false}};
    fake_server *s = fake_start(script, 1);
    firn_http *http = client(3, 0);
    char url[128];
    fake_url(s, "/", url, sizeof(url));
    firn_http_request req = {.method = FIRN_HTTP_GET, .url = url, .max_response_bytes = 8};
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_err err = {0};
    T_EQ_INT(firn_http_do(http, &req, &resp, &err), FIRN_ERR_TOO_LARGE);
    T_EQ_INT(fake_requests(s), 1);
    firn_http_response_deinit(&resp);
    firn_http_free(http);
    fake_stop(s);
}

static int token_calls;

static firn_rc next_token(void *ctx, char **out, int64_t *exp, firn_err *err)
{
    (void)ctx;
    (void)err;
    token_calls++;
    *out = firn_strdup(token_calls == 1 ? "tok-one" : "tok-two");
    *exp = 0;
    return FIRN_OK;
}

T_TEST(unauthorized_refreshes_once)
{
    fake_resp script[] = {{401, NULL, NULL, 0, false}, {200, NULL, "in", 0, false}};
    fake_server *s = fake_start(script, 2);
    firn_http *http = client(0, 0);
    firn_cred *cred = firn_cred_token_fn_new(next_token, NULL, 0);
    char url[128];
    fake_url(s, "/v1/config", url, sizeof(url));
    firn_http_request req = {
        .method = FIRN_HTTP_POST, .url = url, .cred = cred, .not_idempotent = true};
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_err err = {0};
    T_OK_ERR(firn_http_do(http, &req, &resp, &err), &err);
    T_TRUE(strstr(fake_request(s, 0), "Authorization: Bearer tok-one\r\n") != NULL);
    T_TRUE(strstr(fake_request(s, 1), "Authorization: Bearer tok-two\r\n") != NULL);
    T_EQ_INT(firn__cred_token_fetches(cred), 2);
    firn_http_response_deinit(&resp);
    firn_cred_unref(cred);
    firn_http_free(http);
    fake_stop(s);
}

typedef struct capture {
    char text[16384];
    size_t len;
    int lines;
} capture;

static void on_trace(void *ctx, firn_log_level level, const char *line)
{
    (void)level;
    capture *c = ctx;
    int n = snprintf(c->text + c->len, sizeof(c->text) - c->len, "%s\n", line);
    if (n > 0 && c->len + (size_t)n < sizeof(c->text))
        c->len += (size_t)n;
    c->lines++;
}

T_TEST(trace_redacts_secrets)
{
    fake_resp script[] = {{200, "Set-Cookie: session=SECRET3\r\n", "x", 0, false}};
    fake_server *s = fake_start(script, 1);
    capture cap = {{0}, 0, 0};
    firn_http_options o = firn_http_options_default();
    o.trace = on_trace;
    o.trace_ctx = &cap;
    firn_http *http = NULL;
    T_OK(firn_http_new(&o, &http, NULL));
    firn_cred *cred = firn_cred_bearer_new("SECRET1");
    char url[256];
    snprintf(url, sizeof(url),
             "http://user:SECRET4@127.0.0.1:%d/b/k?X-Amz-Signature=SECRET2&partNumber=3", s->port);
    firn_http_headers h;
    firn_http_headers_init(&h);
    firn_http_headers_add(&h, "X-Amz-Security-Token", "SECRET5");
    firn_http_request req = {.method = FIRN_HTTP_GET, .url = url, .cred = cred, .headers = &h};
    firn_http_response resp;
    firn_http_response_init(&resp);
    T_OK(firn_http_do(http, &req, &resp, NULL));
    T_TRUE(cap.lines >= 3);
    T_TRUE(strstr(cap.text, "GET http://<redacted>@127.0.0.1") != NULL);
    T_TRUE(strstr(cap.text, "partNumber=3") != NULL);
    T_TRUE(strstr(cap.text, "Authorization: Bearer <redacted>") != NULL);
    T_TRUE(strstr(cap.text, "SECRET") == NULL);
    firn_http_response_deinit(&resp);
    firn_http_headers_deinit(&h);
    firn_cred_unref(cred);
    firn_http_free(http);
    fake_stop(s);
}

T_TEST(backoff_and_retry_after_arithmetic)
{
    firn_http_options o = firn_http_options_default();
    o.backoff_base_ms = 100;
    o.backoff_max_ms = 1000;
    for (uint64_t r = 0; r < 1000; r += 37) {
        long d0 = firn__http_backoff_ms(&o, 0, r);
        T_TRUE(d0 >= 50 && d0 <= 100);
        long d3 = firn__http_backoff_ms(&o, 3, r);
        T_TRUE(d3 >= 400 && d3 <= 800);
        long d9 = firn__http_backoff_ms(&o, 9, r);
        T_TRUE(d9 >= 500 && d9 <= 1000);
        T_TRUE(firn__http_backoff_ms(&o, 40, r) <= 1000);
    }
    T_EQ_INT(firn__http_retry_after_ms("3", 0), 3000);
    T_EQ_INT(firn__http_retry_after_ms(" 0 ", 0), 0);
    T_EQ_INT(firn__http_retry_after_ms("soon", 0), -1);
    T_EQ_INT(firn__http_retry_after_ms(NULL, 0), -1);
    T_EQ_INT(firn__http_retry_after_ms("-5", 0), -1);
    /* Wed, 21 Oct 2015 07:28:00 GMT = 1445412480 */
    T_EQ_INT(firn__http_retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT", 1445412470), 10000);
    T_EQ_INT(firn__http_retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT", 1445412490), 0);
    T_TRUE(firn__http_status_retryable(503));
    T_TRUE(firn__http_status_retryable(429));
    T_TRUE(firn__http_status_retryable(500));
    T_FALSE(firn__http_status_retryable(501));
    T_FALSE(firn__http_status_retryable(404));
    T_FALSE(firn__http_status_retryable(409));
}

T_TEST(url_encoding)
{
    firn_buf b;
    firn_buf_init(&b, 1024);
    T_OK(firn_url_encode(&b, "a b/c~d+e=é", strlen("a b/c~d+e=é"), true));
    T_EQ_STR((char *)b.data, "a%20b/c~d%2Be%3D%C3%A9");
    firn_buf_reset(&b);
    T_OK(firn_url_encode(&b, "a/b", 3, false));
    T_EQ_STR((char *)b.data, "a%2Fb");
    firn_buf_reset(&b);
    T_OK(firn_url_decode(&b, "a%20b%2fc+", 10, NULL));
    T_EQ_STR((char *)b.data, "a b/c+");
    firn_buf_reset(&b);
    T_EQ_INT(firn_url_decode(&b, "bad%2", 5, NULL), FIRN_ERR_PARSE);
    T_EQ_INT(firn_url_decode(&b, "bad%zz", 6, NULL), FIRN_ERR_PARSE);
    firn_buf_deinit(&b);
}

T_MAIN(T_CASE(retries_503_then_succeeds),
       T_CASE(gives_up_after_max_retries),
       T_CASE(retry_after_is_honoured),
       T_CASE(not_idempotent_is_never_retried),
       T_CASE(retry_after_reaches_the_caller),
       T_CASE(client_errors_map_without_retry),
       T_CASE(timeouts_map_to_timeout_or_unknown),
       T_CASE(dropped_connection_is_retried),
       T_CASE(not_idempotent_is_not_resent_on_a_dead_reused_connection),
       T_CASE(connection_refused_is_network_error),
       T_CASE(body_is_sent_as_given),
       T_CASE(response_limit),
       T_CASE(unauthorized_refreshes_once),
       T_CASE(trace_redacts_secrets),
       T_CASE(backoff_and_retry_after_arithmetic),
       T_CASE(url_encoding))
