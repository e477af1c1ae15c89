/* SPDX-License-Identifier: Apache-2.0 */
/* Credential providers that add a bearer token: none, static, a callback (vended tokens) and the
 * OAuth2 client-credentials grant (RFC 6749 §4.4; ICEBERG.md §G "Auth options"), with the token
 * cache they share. */
#include "net_int.h"

#include <jansson.h>
#include <stdatomic.h>
#include <string.h>

/* ---- base ---- */

firn_cred *firn_cred_ref(firn_cred *c)
{
    if (c)
        atomic_fetch_add(&c->refs, 1);
    return c;
}

void firn_cred_unref(firn_cred *c)
{
    if (c && atomic_fetch_sub(&c->refs, 1) == 1)
        c->vt->destroy(c);
}

firn_rc
firn_cred_apply(firn_cred *c, const firn_http_request *req, firn_http_headers *hdrs, firn_err *err)
{
    if (!c)
        return FIRN_OK;
    return c->vt->apply(c, req, hdrs, err);
}

void firn_cred_invalidate(firn_cred *c)
{
    if (c && c->vt->invalidate)
        c->vt->invalidate(c);
}

/* ---- token cache ---- */

void firn__token_cache_init(firn__token_cache *tc, long margin_ms)
{
    pthread_mutex_init(&tc->mu, NULL);
    tc->token = NULL;
    tc->expires_at_ms = 0;
    tc->refresh_at_ms = 0;
    tc->margin_ms = margin_ms;
    tc->fetches = 0;
}

void firn__token_cache_deinit(firn__token_cache *tc)
{
    pthread_mutex_destroy(&tc->mu);
    firn_free(tc->token);
    tc->token = NULL;
}

void firn__token_cache_store(firn__token_cache *tc,
                             char *token,
                             int64_t expires_at_ms,
                             int64_t now_ms)
{
    firn_secret_register_token(token); /* an echo of the request never shows it */
    firn_free(tc->token);
    tc->token = token;
    tc->expires_at_ms = expires_at_ms;
    tc->refresh_at_ms = 0;
    tc->fetches++;
    if (expires_at_ms > 0) {
        /* Refresh margin_ms early, but never spend more than a fifth of a short lifetime. */
        int64_t margin = tc->margin_ms;
        int64_t life = expires_at_ms - now_ms;
        if (life > 0 && margin > life / 5)
            margin = life / 5;
        tc->refresh_at_ms = expires_at_ms - margin;
    }
}

bool firn__token_cache_fresh(const firn__token_cache *tc, int64_t now_ms)
{
    return tc->token && (tc->refresh_at_ms == 0 || now_ms < tc->refresh_at_ms);
}

static int64_t now_ms(void)
{
    return firn_now_us() / 1000;
}

static bool is_token_kind(const firn_cred *c)
{
    const char *k = c->vt->kind;
    return strcmp(k, "oauth2") == 0 || strcmp(k, "google") == 0 || strcmp(k, "token-fn") == 0;
}

int firn__cred_token_fetches(firn_cred *c)
{
    if (!c || !is_token_kind(c))
        return -1;
    firn__token_cred *t = (firn__token_cred *)c;
    pthread_mutex_lock(&t->tc.mu);
    int n = t->tc.fetches;
    pthread_mutex_unlock(&t->tc.mu);
    return n;
}

void firn__token_invalidate(firn_cred *c)
{
    firn__token_cred *t = (firn__token_cred *)c;
    pthread_mutex_lock(&t->tc.mu);
    t->tc.refresh_at_ms = 1; /* stale: the next request fetches a new token */
    pthread_mutex_unlock(&t->tc.mu);
}

static void add_bearer(firn_http_headers *hdrs, const char *token)
{
    firn_buf v;
    firn_buf_init(&v, 1 << 20);
    firn_rc rc = firn_buf_appendf(&v, "Bearer %s", token);
    FIRN_ASSERT(rc == FIRN_OK);
    firn_http_headers_set(hdrs, "Authorization", (const char *)v.data);
    firn_buf_deinit(&v);
}

/* Adds "Authorization: Bearer <token>", fetching a token with fetch when the cache is stale. */
firn_rc firn__bearer_apply(firn__token_cred *t,
                           firn__token_fetch_fn fetch,
                           firn_http_headers *hdrs,
                           firn_err *err)
{
    pthread_mutex_lock(&t->tc.mu);
    firn_rc rc = FIRN_OK;
    int64_t now = now_ms();
    if (!firn__token_cache_fresh(&t->tc, now)) {
        char *token = NULL;
        int64_t exp = 0;
        rc = fetch(t, &token, &exp, err);
        if (!rc)
            firn__token_cache_store(&t->tc, token, exp, now);
        else if (t->tc.token && t->tc.expires_at_ms > now + 5000 && t->tc.refresh_at_ms != 1) {
            /* The early refresh failed; the cached token is still valid for a while. */
            FIRN_LOG(FIRN_LOG_WARN, "net",
                     "could not refresh a %s token, using the current one: %s", t->base.vt->kind,
                     err ? err->msg : firn_rc_message(rc));
            rc = FIRN_OK;
        }
    }
    if (!rc)
        add_bearer(hdrs, t->tc.token);
    pthread_mutex_unlock(&t->tc.mu);
    return rc;
}

/* ---- none and static bearer ---- */

static firn_rc
none_apply(firn_cred *c, const firn_http_request *req, firn_http_headers *hdrs, firn_err *err)
{
    (void)c;
    (void)req;
    (void)hdrs;
    (void)err;
    return FIRN_OK;
}

static void plain_destroy(firn_cred *c)
{
    firn_free(c);
}

static const firn_cred_vtable none_vt = {"none", none_apply, NULL, plain_destroy};

firn_cred *firn_cred_none_new(void)
{
    firn_cred *c = firn_calloc(1, sizeof(*c));
    c->vt = &none_vt;
    atomic_init(&c->refs, 1);
    return c;
}

typedef struct bearer_cred {
    firn_cred base;
    char *token;
} bearer_cred;

static firn_rc static_bearer_apply(firn_cred *c,
                                   const firn_http_request *req,
                                   firn_http_headers *hdrs,
                                   firn_err *err)
{
    (void)req;
    (void)err;
    add_bearer(hdrs, ((bearer_cred *)c)->token);
    return FIRN_OK;
}

static void bearer_destroy(firn_cred *c)
{
    firn_free(((bearer_cred *)c)->token);
    firn_free(c);
}

static const firn_cred_vtable bearer_vt = {"bearer", static_bearer_apply, NULL, bearer_destroy};

firn_cred *firn_cred_bearer_new(const char *token)
{
    bearer_cred *b = firn_calloc(1, sizeof(*b));
    b->base.vt = &bearer_vt;
    atomic_init(&b->base.refs, 1);
    b->token = firn_strdup(token);
    firn_secret_register(token);
    return &b->base;
}

/* ---- callback (vended tokens) ---- */

typedef struct fn_cred {
    firn__token_cred t;
    firn_token_fn fn;
    void *ctx;
} fn_cred;

static firn_rc fn_fetch(firn__token_cred *t, char **out_token, int64_t *out_exp, firn_err *err)
{
    fn_cred *f = (fn_cred *)t;
    return f->fn(f->ctx, out_token, out_exp, err);
}

static firn_rc
fn_apply(firn_cred *c, const firn_http_request *req, firn_http_headers *hdrs, firn_err *err)
{
    (void)req;
    return firn__bearer_apply((firn__token_cred *)c, fn_fetch, hdrs, err);
}

void firn__token_destroy(firn_cred *c)
{
    firn__token_cache_deinit(&((firn__token_cred *)c)->tc);
    firn_free(c);
}

static const firn_cred_vtable fn_vt = {"token-fn", fn_apply, firn__token_invalidate,
                                       firn__token_destroy};

firn_cred *firn_cred_token_fn_new(firn_token_fn fn, void *ctx, long refresh_margin_ms)
{
    fn_cred *f = firn_calloc(1, sizeof(*f));
    f->t.base.vt = &fn_vt;
    atomic_init(&f->t.base.refs, 1);
    firn__token_cache_init(&f->t.tc, refresh_margin_ms > 0 ? refresh_margin_ms : 60000);
    f->fn = fn;
    f->ctx = ctx;
    return &f->t.base;
}

/* ---- OAuth2 token responses ---- */

firn_rc firn__oauth2_parse_token(const char *body,
                                 size_t len,
                                 int64_t now,
                                 char **out_token,
                                 int64_t *out_expires_at_ms,
                                 firn_err *err)
{
    *out_token = NULL;
    *out_expires_at_ms = 0;
    json_error_t jerr;
    json_t *doc = json_loadb(body, len, 0, &jerr);
    if (!doc || !json_is_object(doc)) {
        json_decref(doc);
        char brief[FIRN_JSON_ERROR_BRIEF_MAX];
        return firn_err_set(
            err, FIRN_ERR_PROTOCOL, "token endpoint sent no JSON object: %s",
            doc ? "another JSON value"
                : firn_json_error_brief(brief, sizeof(brief), jerr.text, NULL, 0, 0));
    }
    firn_rc rc = FIRN_OK;
    const char *token = json_string_value(json_object_get(doc, "access_token"));
    const char *error = json_string_value(json_object_get(doc, "error"));
    if (!token || !*token) {
        const char *desc = json_string_value(json_object_get(doc, "error_description"));
        rc =
            firn_err_set(err, FIRN_ERR_AUTH, "token endpoint returned no access token%s%s%s%s",
                         error ? ": " : "", error ? error : "", desc ? ": " : "", desc ? desc : "");
        goto out;
    }
    json_t *exp = json_object_get(doc, "expires_in");
    double secs = -1;
    if (json_is_number(exp))
        secs = json_number_value(exp);
    else if (json_is_string(exp))
        firn_rc_ignore(
            firn_parse_double(json_string_value(exp), json_string_length(exp), &secs, NULL));
    if (secs > 0 && secs < 1e9)
        *out_expires_at_ms = now + (int64_t)(secs * 1000);
    *out_token = firn_strdup(token);
out:
    json_decref(doc);
    return rc;
}

/* ---- OAuth2 client credentials ---- */

typedef struct oauth2_cred {
    firn__token_cred t;
    firn_http *http;
    char *token_uri;
    char *form; /* the request body, fixed for the provider's life */
} oauth2_cred;

firn_rc firn__oauth2_post(firn_http *http,
                          const char *uri,
                          const char *form,
                          char **out_token,
                          int64_t *out_exp,
                          firn_err *err)
{
    *out_token = NULL;
    *out_exp = 0;
    firn_http_headers h;
    firn_http_headers_init(&h);
    firn_http_headers_add(&h, "Content-Type", "application/x-www-form-urlencoded");
    firn_http_headers_add(&h, "Accept", "application/json");
    firn_http_request req = {.method = FIRN_HTTP_POST,
                             .url = uri,
                             .headers = &h,
                             .body = form,
                             .body_len = strlen(form),
                             .max_response_bytes = 1 << 20};
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_rc rc = firn_http_do(http, &req, &resp, err);
    if ((rc == FIRN_ERR_INVALID || rc == FIRN_ERR_AUTH) && resp.body.len > 0 &&
        resp.body.data[0] == '{') {
        /* RFC 6749 §5.2 errors come as 400/401 with a JSON document: report its text. */
        firn_err detail = {0};
        char *token = NULL;
        int64_t exp = 0;
        if (firn__oauth2_parse_token((const char *)resp.body.data, resp.body.len, 0, &token, &exp,
                                     &detail) == FIRN_ERR_AUTH &&
            err)
            *err = detail;
        firn_free(token);
        rc = FIRN_ERR_AUTH;
        if (err)
            err->code = rc;
    } else if (!rc) {
        rc = firn__oauth2_parse_token((const char *)resp.body.data, resp.body.len, now_ms(),
                                      out_token, out_exp, err);
    }
    char safe[FIRN_URL_REDACTED_MAX];
    if (rc)
        firn_err_context(err, "while fetching a token from \"%s\"",
                         firn_url_redact(safe, sizeof(safe), uri));
    firn_http_response_deinit(&resp);
    firn_http_headers_deinit(&h);
    return rc;
}

static firn_rc oauth2_fetch(firn__token_cred *t, char **out_token, int64_t *out_exp, firn_err *err)
{
    oauth2_cred *o = (oauth2_cred *)t;
    return firn__oauth2_post(o->http, o->token_uri, o->form, out_token, out_exp, err);
}

static firn_rc
oauth2_apply(firn_cred *c, const firn_http_request *req, firn_http_headers *hdrs, firn_err *err)
{
    (void)req;
    return firn__bearer_apply((firn__token_cred *)c, oauth2_fetch, hdrs, err);
}

static void oauth2_destroy(firn_cred *c)
{
    oauth2_cred *o = (oauth2_cred *)c;
    firn_http_free(o->http);
    firn_free(o->token_uri);
    firn_free(o->form);
    firn__token_destroy(c);
}

static const firn_cred_vtable oauth2_vt = {"oauth2", oauth2_apply, firn__token_invalidate,
                                           oauth2_destroy};

static char *oauth2_token_uri(const firn_oauth2_options *opts)
{
    if (opts->token_uri && *opts->token_uri)
        return firn_strdup(opts->token_uri);
    if (!opts->catalog_uri || !*opts->catalog_uri)
        return NULL;
    size_t len = strlen(opts->catalog_uri);
    while (len > 0 && opts->catalog_uri[len - 1] == '/')
        len--;
    firn_buf b;
    firn_buf_init(&b, 1 << 16);
    firn_rc rc = firn_buf_appendf(&b, "%.*s/v1/oauth/tokens", (int)len, opts->catalog_uri);
    FIRN_ASSERT(rc == FIRN_OK);
    return (char *)firn_buf_take(&b, NULL);
}

static firn_rc oauth2_form(const firn_oauth2_options *opts, char **out)
{
    firn_buf f;
    firn_buf_init(&f, 1 << 16);
    const char *scope = opts->scope ? opts->scope : "catalog";
    firn_rc rc = firn__net_form_add(&f, "grant_type", "client_credentials");
    if (!rc)
        rc = firn__net_form_add(&f, "client_id", opts->client_id);
    if (!rc)
        rc = firn__net_form_add(&f, "client_secret", opts->client_secret);
    if (!rc && *scope)
        rc = firn__net_form_add(&f, "scope", scope);
    if (!rc && opts->audience)
        rc = firn__net_form_add(&f, "audience", opts->audience);
    if (!rc && opts->resource)
        rc = firn__net_form_add(&f, "resource", opts->resource);
    *out = rc ? NULL : (char *)firn_buf_take(&f, NULL);
    firn_buf_deinit(&f);
    return rc;
}

firn_rc firn_cred_oauth2_new(const firn_oauth2_options *opts, firn_cred **out, firn_err *err)
{
    *out = NULL;
    if (!opts->client_id || !*opts->client_id || !opts->client_secret)
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "OAuth2 client credentials need a client id and a client secret");
    char *uri = oauth2_token_uri(opts);
    if (!uri)
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "OAuth2 client credentials need a token endpoint or a catalog URI");
    firn_secret_register(opts->client_secret);
    oauth2_cred *o = firn_calloc(1, sizeof(*o));
    o->t.base.vt = &oauth2_vt;
    atomic_init(&o->t.base.refs, 1);
    firn__token_cache_init(&o->t.tc, opts->refresh_margin_ms > 0 ? opts->refresh_margin_ms : 60000);
    o->token_uri = uri;
    firn_rc rc = oauth2_form(opts, &o->form);
    if (rc)
        rc = firn_err_set(err, rc, "OAuth2 client credentials are too long");
    if (!rc)
        rc = firn_http_new(opts->http, &o->http, err);
    if (rc) {
        oauth2_destroy(&o->t.base);
        return rc;
    }
    *out = &o->t.base;
    return FIRN_OK;
}
