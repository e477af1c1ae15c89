/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP client over libcurl easy handles: one pooled handle per request in flight (connections
 * stay alive in each handle), per-attempt authentication, retries with exponential backoff and
 * jitter honouring Retry-After, error mapping to firn_rc, and redacted request traces. */
#include "net_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define POOL_MAX        16
#define ERR_SNIPPET_MAX 160

struct firn_http {
    firn_http_options o;
    char *ca_bundle;
    char *user_agent;
    pthread_mutex_t mu;
    CURL *pool[POOL_MAX];
    int pool_len;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_code;
static _Atomic uint64_t rand_counter;

static void curl_init_once(void)
{
    curl_init_code = curl_global_init(CURL_GLOBAL_DEFAULT);
}

firn_http_options firn_http_options_default(void)
{
    firn_http_options o = {
        .connect_timeout_ms = 10000,
        .timeout_ms = 120000,
        .max_retries = 4,
        .backoff_base_ms = 100,
        .backoff_max_ms = 10000,
        .retry_after_max_ms = 60000,
        .retry_budget_ms = 300000,
    };
    return o;
}

static void apply_defaults(firn_http_options *o)
{
    const firn_http_options d = firn_http_options_default();
    if (o->connect_timeout_ms <= 0)
        o->connect_timeout_ms = d.connect_timeout_ms;
    if (o->timeout_ms <= 0)
        o->timeout_ms = d.timeout_ms;
    if (o->max_retries == 0)
        o->max_retries = d.max_retries;
    if (o->max_retries < 0)
        o->max_retries = 0;
    if (o->backoff_base_ms <= 0)
        o->backoff_base_ms = d.backoff_base_ms;
    if (o->backoff_max_ms <= 0)
        o->backoff_max_ms = d.backoff_max_ms;
    if (o->retry_after_max_ms <= 0)
        o->retry_after_max_ms = d.retry_after_max_ms;
    if (o->retry_budget_ms <= 0)
        o->retry_budget_ms = d.retry_budget_ms;
}

firn_rc firn_http_new(const firn_http_options *opts, firn_http **out, firn_err *err)
{
    *out = NULL;
    pthread_once(&curl_once, curl_init_once);
    if (curl_init_code != CURLE_OK)
        return firn_err_set(err, FIRN_ERR_CONFIG, "could not initialize libcurl: %s",
                            curl_easy_strerror(curl_init_code));
    firn_http *http = firn_calloc(1, sizeof(*http));
    http->o = opts ? *opts : firn_http_options_default();
    apply_defaults(&http->o);
    if (http->o.ca_bundle) {
        http->ca_bundle = firn_strdup(http->o.ca_bundle);
        if (access(http->ca_bundle, R_OK) != 0) {
            firn_rc rc = firn_err_set_errno(err, FIRN_ERR_CONFIG, errno,
                                            "could not read CA bundle \"%s\"", http->ca_bundle);
            firn_http_free(http);
            return rc;
        }
    }
    http->user_agent = firn_strdup(http->o.user_agent ? http->o.user_agent : "firn/" FIRN_VERSION);
    http->o.ca_bundle = http->ca_bundle;
    http->o.user_agent = http->user_agent;
    pthread_mutex_init(&http->mu, NULL);
    *out = http;
    return FIRN_OK;
}

void firn_http_free(firn_http *http)
{
    if (!http)
        return;
    for (int i = 0; i < http->pool_len; i++)
        curl_easy_cleanup(http->pool[i]);
    pthread_mutex_destroy(&http->mu);
    firn_free(http->ca_bundle);
    firn_free(http->user_agent);
    firn_free(http);
}

static CURL *pool_get(firn_http *http)
{
    CURL *h = NULL;
    pthread_mutex_lock(&http->mu);
    if (http->pool_len > 0)
        h = http->pool[--http->pool_len];
    pthread_mutex_unlock(&http->mu);
    if (!h)
        h = curl_easy_init();
    FIRN_ASSERT(h != NULL);
    return h;
}

static void pool_put(firn_http *http, CURL *h)
{
    pthread_mutex_lock(&http->mu);
    if (http->pool_len < POOL_MAX) {
        http->pool[http->pool_len++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&http->mu);
    if (h)
        curl_easy_cleanup(h);
}

const char *firn_http_method_name(firn_http_method m)
{
    switch (m) {
    case FIRN_HTTP_GET:
        return "GET";
    case FIRN_HTTP_HEAD:
        return "HEAD";
    case FIRN_HTTP_PUT:
        return "PUT";
    case FIRN_HTTP_POST:
        return "POST";
    case FIRN_HTTP_DELETE:
        return "DELETE";
    }
    return "GET";
}

void firn_http_response_init(firn_http_response *resp)
{
    resp->status = 0;
    resp->attempts = 0;
    firn_http_headers_init(&resp->headers);
    firn_buf_init(&resp->body, FIRN_HTTP_DEFAULT_MAX_RESPONSE);
}

void firn_http_response_deinit(firn_http_response *resp)
{
    if (!resp)
        return;
    firn_http_headers_deinit(&resp->headers);
    firn_buf_deinit(&resp->body);
}

firn_rc firn_http_status_rc(long status)
{
    if (status < 400)
        return FIRN_OK;
    switch (status) {
    case 400:
        return FIRN_ERR_INVALID;
    case 401:
    case 419:
        return FIRN_ERR_AUTH;
    case 403:
        return FIRN_ERR_PERMISSION;
    case 404:
        return FIRN_ERR_NOT_FOUND;
    case 408:
        return FIRN_ERR_TIMEOUT;
    case 409:
        return FIRN_ERR_CONFLICT;
    case 412:
        return FIRN_ERR_EXISTS;
    case 429:
        return FIRN_ERR_THROTTLED;
    default:
        return status >= 500 ? FIRN_ERR_UNAVAILABLE : FIRN_ERR_PROTOCOL;
    }
}

bool firn__http_status_retryable(long status)
{
    return status == 408 || status == 429 || (status >= 500 && status != 501 && status != 505);
}

long firn__http_backoff_ms(const firn_http_options *o, int attempt, uint64_t rnd)
{
    long d = o->backoff_base_ms;
    for (int i = 0; i < attempt && d < o->backoff_max_ms; i++)
        d *= 2;
    if (d > o->backoff_max_ms)
        d = o->backoff_max_ms;
    long half = d / 2;
    return d - half + (long)(rnd % (uint64_t)(half + 1));
}

long firn__http_retry_after_ms(const char *value, time_t now_s)
{
    if (!value)
        return -1;
    while (*value == ' ' || *value == '\t')
        value++;
    size_t len = strlen(value);
    while (len > 0 && (value[len - 1] == ' ' || value[len - 1] == '\t'))
        len--;
    if (len == 0)
        return -1;
    int64_t secs = 0;
    if (firn_parse_i64(value, len, &secs, NULL) == FIRN_OK)
        return secs < 0 ? -1 : (secs > 86400 ? 86400000L : (long)secs * 1000);
    char *copy = firn_strndup(value, len);
    time_t t = curl_getdate(copy, NULL);
    firn_free(copy);
    if (t == -1)
        return -1;
    if (t <= now_s)
        return 0;
    return t - now_s > 86400 ? 86400000L : (long)(t - now_s) * 1000;
}

static uint64_t next_rand(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* ---- one attempt ---- */

typedef struct attempt {
    firn_http_response *resp;
    bool overflow;
    char errbuf[CURL_ERROR_SIZE];
} attempt;

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    attempt *a = ud;
    size_t len = size * n;
    if (firn_buf_append(&a->resp->body, p, len)) {
        a->overflow = true;
        return 0;
    }
    return len;
}

static size_t trim_len(const char *s, size_t len)
{
    while (len > 0 &&
           (s[len - 1] == '\r' || s[len - 1] == '\n' || s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    attempt *a = ud;
    size_t len = size * n;
    if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) {
        /* A new response starts (after 100 Continue): keep only its headers. */
        firn_http_headers_clear(&a->resp->headers);
        return len;
    }
    const char *colon = memchr(p, ':', len);
    if (!colon)
        return len;
    size_t name_len = trim_len(p, (size_t)(colon - p));
    const char *v = colon + 1;
    size_t v_len = len - (size_t)(v - p);
    while (v_len > 0 && (*v == ' ' || *v == '\t')) {
        v++;
        v_len--;
    }
    v_len = trim_len(v, v_len);
    char *name = firn_strndup(p, name_len);
    char *value = firn_strndup(v, v_len);
    firn_http_headers_add(&a->resp->headers, name, value);
    firn_free(name);
    firn_free(value);
    return len;
}

static struct curl_slist *build_header_list(const firn_http_request *req,
                                            const firn_http_headers *hdrs)
{
    struct curl_slist *list = NULL;
    firn_buf line;
    firn_buf_init(&line, 1 << 20);
    for (size_t i = 0; i < hdrs->count; i++) {
        firn_buf_reset(&line);
        const char *v = hdrs->items[i].value;
        firn_rc rc = *v ? firn_buf_appendf(&line, "%s: %s", hdrs->items[i].name, v)
                        : firn_buf_appendf(&line, "%s;", hdrs->items[i].name);
        FIRN_ASSERT(rc == FIRN_OK);
        list = curl_slist_append(list, (const char *)line.data);
    }
    firn_buf_deinit(&line);
    /* No 100-continue round trip, and no form content type curl would invent for a body. */
    list = curl_slist_append(list, "Expect:");
    bool has_body_method = req->method == FIRN_HTTP_PUT || req->method == FIRN_HTTP_POST;
    if (has_body_method && !firn_http_headers_get(hdrs, "Content-Type"))
        list = curl_slist_append(list, "Content-Type:");
    FIRN_ASSERT(list != NULL);
    return list;
}

static void set_method(CURL *h, const firn_http_request *req)
{
    const void *body = req->body ? req->body : "";
    switch (req->method) {
    case FIRN_HTTP_GET:
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
        break;
    case FIRN_HTTP_HEAD:
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
        break;
    case FIRN_HTTP_DELETE:
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
        if (req->body_len > 0) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        }
        break;
    case FIRN_HTTP_PUT:
    case FIRN_HTTP_POST:
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        if (req->method == FIRN_HTTP_PUT)
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
        break;
    }
}

static CURLcode perform(firn_http *http,
                        CURL *h,
                        const firn_http_request *req,
                        const firn_http_headers *hdrs,
                        attempt *a)
{
    const firn_http_options *o = &http->o;
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, req->url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, o->connect_timeout_ms);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, o->timeout_ms);
    if (o->low_speed_time_s > 0) {
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, o->low_speed_time_s);
    }
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, o->tls_skip_verify ? 0L : 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, o->tls_skip_verify ? 0L : 2L);
    if (o->ca_bundle)
        curl_easy_setopt(h, CURLOPT_CAINFO, o->ca_bundle);
    curl_easy_setopt(h, CURLOPT_USERAGENT, o->user_agent);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, a->errbuf);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, a);
    /* libcurl resends a request once when a reused connection turns out dead; a request that
     * must not be sent twice gets a connection of its own. */
    if (req->not_idempotent)
        curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
    set_method(h, req);
    struct curl_slist *list = build_header_list(req, hdrs);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
    a->errbuf[0] = '\0';
    CURLcode cc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    a->resp->status = status;
    curl_slist_free_all(list);
    return cc;
}

/* ---- tracing ---- */

static bool trace_on(const firn_http *http, firn_log_level level)
{
    return http->o.trace != NULL || firn_log_enabled(level, "net");
}

static void emit(const firn_http *http, firn_log_level level, const char *line)
{
    if (http->o.trace) {
        char text[8192];
        snprintf(text, sizeof(text), "%s", line);
        firn_redact_text(text, sizeof(text));
        http->o.trace(http->o.trace_ctx, level, text);
    } else
        firn_log_write(level, "net", "%s", line);
}

static void trace_headers(const firn_http *http, const char *dir, const firn_http_headers *h)
{
    firn_buf line;
    firn_buf_init(&line, 1 << 16);
    for (size_t i = 0; i < h->count; i++) {
        firn_buf_reset(&line);
        if (firn_buf_appendf(&line, "%s %s: ", dir, h->items[i].name) == FIRN_OK &&
            firn__http_redact_header(&line, h->items[i].name, h->items[i].value) == FIRN_OK)
            emit(http, FIRN_LOG_TRACE, (const char *)line.data);
    }
    firn_buf_deinit(&line);
}

static void trace_attempt(const firn_http *http,
                          const firn_http_request *req,
                          const firn_http_headers *hdrs,
                          const attempt *a,
                          CURLcode cc,
                          int64_t elapsed_ns)
{
    if (!trace_on(http, FIRN_LOG_DEBUG))
        return;
    firn_buf line;
    firn_buf_init(&line, 1 << 16);
    firn_rc rc = firn_buf_appendf(&line, "%s ", firn_http_method_name(req->method));
    if (!rc)
        rc = firn__http_redact_url(&line, req->url);
    if (!rc && cc == CURLE_OK)
        rc = firn_buf_appendf(&line, " -> %ld", a->resp->status);
    else if (!rc)
        rc = firn_buf_appendf(&line, " -> error: %s",
                              a->errbuf[0] ? a->errbuf : curl_easy_strerror(cc));
    if (!rc)
        rc = firn_buf_appendf(&line, " (%zu bytes up, %zu down, %lld ms, attempt %d)",
                              req->body_len, a->resp->body.len, (long long)(elapsed_ns / 1000000),
                              a->resp->attempts);
    if (!rc)
        emit(http, FIRN_LOG_DEBUG, (const char *)line.data);
    firn_buf_deinit(&line);
    if (trace_on(http, FIRN_LOG_TRACE)) {
        trace_headers(http, ">", hdrs);
        trace_headers(http, "<", &a->resp->headers);
    }
}

/* ---- classification ---- */

static bool curl_nothing_sent(CURLcode cc)
{
    return cc == CURLE_COULDNT_RESOLVE_HOST || cc == CURLE_COULDNT_RESOLVE_PROXY ||
           cc == CURLE_COULDNT_CONNECT;
}

static firn_rc curl_rc(CURLcode cc)
{
    switch (cc) {
    case CURLE_OPERATION_TIMEDOUT:
        return FIRN_ERR_TIMEOUT;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
        return FIRN_ERR_INVALID;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
        return FIRN_ERR_CONFIG;
    case CURLE_OUT_OF_MEMORY:
        return FIRN_ERR_INTERNAL;
    default:
        return FIRN_ERR_NETWORK;
    }
}

static bool transport_retryable(CURLcode cc)
{
    firn_rc rc = curl_rc(cc);
    return rc == FIRN_ERR_TIMEOUT || rc == FIRN_ERR_NETWORK;
}

/* Appends up to ERR_SNIPPET_MAX printable bytes of the body, for error messages. */
static void body_snippet(const firn_buf *body, char *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < body->len && n + 1 < cap && n < ERR_SNIPPET_MAX; i++) {
        unsigned char c = body->data[i];
        out[n++] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
    }
    out[n] = '\0';
}

static firn_rc classify(const firn_http_request *req, const attempt *a, CURLcode cc, firn_err *err)
{
    const char *method = firn_http_method_name(req->method);
    char safe[FIRN_URL_REDACTED_MAX];
    const char *u = firn_url_redact(safe, sizeof(safe), req->url);
    firn_rc rc = FIRN_OK;
    if (cc != CURLE_OK && a->overflow) {
        rc = firn_err_set(err, FIRN_ERR_TOO_LARGE, "response to %s \"%s\" exceeds %zu bytes",
                          method, u, a->resp->body.max);
    } else if (cc != CURLE_OK) {
        rc = curl_rc(cc);
        if (req->not_idempotent && !curl_nothing_sent(cc))
            rc = FIRN_ERR_UNKNOWN_OUTCOME;
        firn_rc_ignore(firn_err_set(err, rc, "could not %s \"%s\": %s", method, u,
                                    a->errbuf[0] ? a->errbuf : curl_easy_strerror(cc)));
    } else if (a->resp->status >= 400) {
        rc = firn_http_status_rc(a->resp->status);
        if (req->not_idempotent && a->resp->status >= 500)
            rc = FIRN_ERR_UNKNOWN_OUTCOME;
        char snippet[ERR_SNIPPET_MAX + 1];
        body_snippet(&a->resp->body, snippet, sizeof(snippet));
        firn_rc_ignore(firn_err_set(err, rc, "%s \"%s\" failed with HTTP %ld%s%s", method, u,
                                    a->resp->status, snippet[0] ? ": " : "", snippet));
        long ra = firn__http_retry_after_ms(firn_http_headers_get(&a->resp->headers, "Retry-After"),
                                            time(NULL));
        if (err && ra > 0)
            err->retry_after_ms = ra;
    }
    return rc;
}

/* Decides whether to retry after a failed attempt; returns the delay in ms or -1. */
static long retry_delay(const firn_http *http,
                        const firn_http_request *req,
                        const attempt *a,
                        CURLcode cc,
                        int retries_done,
                        int64_t deadline_ns,
                        uint64_t *rnd)
{
    if (req->not_idempotent || retries_done >= http->o.max_retries || a->overflow)
        return -1;
    bool retry =
        cc != CURLE_OK ? transport_retryable(cc) : firn__http_status_retryable(a->resp->status);
    if (!retry)
        return -1;
    long delay = firn__http_backoff_ms(&http->o, retries_done, next_rand(rnd));
    if (cc == CURLE_OK) {
        long ra = firn__http_retry_after_ms(firn_http_headers_get(&a->resp->headers, "Retry-After"),
                                            time(NULL));
        if (ra > http->o.retry_after_max_ms)
            ra = http->o.retry_after_max_ms;
        if (ra > delay)
            delay = ra;
    }
    if (firn_monotonic_ns() + (int64_t)delay * 1000000 > deadline_ns)
        return -1;
    return delay;
}

static void reset_response(firn_http_response *resp, size_t max_body)
{
    resp->status = 0;
    firn_http_headers_clear(&resp->headers);
    if (resp->body.max != max_body) {
        firn_buf_deinit(&resp->body);
        firn_buf_init(&resp->body, max_body);
    }
    firn_buf_reset(&resp->body);
}

firn_rc
firn_http_do(firn_http *http, const firn_http_request *req, firn_http_response *resp, firn_err *err)
{
    size_t max_body =
        req->max_response_bytes ? req->max_response_bytes : FIRN_HTTP_DEFAULT_MAX_RESPONSE;
    resp->attempts = 0;
    uint64_t rnd =
        (uint64_t)firn_now_us() ^ (atomic_fetch_add(&rand_counter, 1) + 1) * 0x9E3779B97F4A7C15ULL;
    int64_t deadline_ns = firn_monotonic_ns() + (int64_t)http->o.retry_budget_ms * 1000000;
    firn_http_headers hdrs;
    firn_http_headers_init(&hdrs);
    CURL *h = pool_get(http);
    bool auth_retried = false;
    int retries_done = 0;
    firn_rc rc;
    for (;;) {
        firn_http_headers_clear(&hdrs);
        firn_http_headers_copy(&hdrs, req->headers);
        rc = firn_cred_apply(req->cred, req, &hdrs, err);
        if (rc)
            break;
        reset_response(resp, max_body);
        resp->attempts++;
        attempt a = {.resp = resp};
        int64_t t0 = firn_monotonic_ns();
        CURLcode cc = perform(http, h, req, &hdrs, &a);
        trace_attempt(http, req, &hdrs, &a, cc, firn_monotonic_ns() - t0);
        rc = classify(req, &a, cc, err);
        if (!rc)
            break;
        if (cc == CURLE_OK && (resp->status == 401 || resp->status == 419) && req->cred &&
            req->cred->vt->invalidate && !auth_retried) {
            firn_cred_invalidate(req->cred);
            auth_retried = true;
            continue;
        }
        long delay = retry_delay(http, req, &a, cc, retries_done, deadline_ns, &rnd);
        if (delay < 0)
            break;
        if (trace_on(http, FIRN_LOG_DEBUG)) {
            char line[FIRN_ERR_MSG_MAX + 64];
            snprintf(line, sizeof(line), "retrying in %ld ms after: %s", delay,
                     err ? err->msg : firn_rc_message(rc));
            emit(http, FIRN_LOG_DEBUG, line);
        }
        firn_sleep_ms(delay);
        retries_done++;
    }
    pool_put(http, h);
    firn_http_headers_deinit(&hdrs);
    return rc;
}
