/* SPDX-License-Identifier: Apache-2.0 */
/* AWS Signature Version 4 (header signing): canonical request, string to sign, derived key;
 * and the signing credential provider for S3, Glue and S3 Tables with static, environment or
 * vended (callback) keys. */
#include "net_int.h"

#include <openssl/crypto.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SIG_MAX ((size_t)1 << 20)

typedef struct url_parts {
    const char *scheme;
    size_t scheme_len;
    const char *host; /* authority without user info */
    size_t host_len;
    const char *path;
    size_t path_len;
    const char *query; /* after '?', without fragment */
    size_t query_len;
} url_parts;

static firn_rc split_url(const char *url, url_parts *u, firn_err *err)
{
    memset(u, 0, sizeof(*u));
    const char *sep = strstr(url, "://");
    if (!sep || sep == url)
        return firn_err_set(err, FIRN_ERR_INVALID, "cannot sign URL without a scheme");
    u->scheme = url;
    u->scheme_len = (size_t)(sep - url);
    const char *p = sep + 3;
    size_t alen = strcspn(p, "/?#");
    const char *at = memchr(p, '@', alen);
    if (at) {
        alen -= (size_t)(at + 1 - p);
        p = at + 1;
    }
    if (alen == 0)
        return firn_err_set(err, FIRN_ERR_INVALID, "cannot sign URL without a host");
    u->host = p;
    u->host_len = alen;
    p += alen;
    u->path = p;
    u->path_len = strcspn(p, "?#");
    p += u->path_len;
    if (*p == '?') {
        u->query = p + 1;
        u->query_len = strcspn(p + 1, "#");
    }
    return FIRN_OK;
}

/* Host header value: the authority without a default port. */
static char *host_value(const url_parts *u)
{
    size_t len = u->host_len;
    bool https = u->scheme_len == 5 && strncasecmp(u->scheme, "https", 5) == 0;
    const char *dflt = https ? ":443" : ":80";
    size_t dlen = strlen(dflt);
    if (len > dlen && memcmp(u->host + len - dlen, dflt, dlen) == 0)
        len -= dlen;
    return firn_strndup(u->host, len);
}

static firn_rc canonical_uri(firn_buf *out, const url_parts *u, bool single, firn_err *err)
{
    if (u->path_len == 0)
        return firn_buf_append(out, "/", 1);
    if (!single)
        return firn_url_encode(out, u->path, u->path_len, true);
    firn_buf raw;
    firn_buf_init(&raw, SIG_MAX);
    firn_rc rc = firn_url_decode(&raw, u->path, u->path_len, err);
    if (!rc)
        rc = firn_url_encode(out, (const char *)raw.data, raw.len, true);
    firn_buf_deinit(&raw);
    return rc;
}

typedef struct kv {
    char *k;
    char *v;
} kv;

static int kv_cmp(const void *a, const void *b)
{
    const kv *x = a, *y = b;
    int c = strcmp(x->k, y->k);
    return c ? c : strcmp(x->v, y->v);
}

/* Decodes then re-encodes s[0..len) the AWS way into an owned string. */
static firn_rc reencode(const char *s, size_t len, char **out, firn_err *err)
{
    firn_buf raw, enc;
    firn_buf_init(&raw, SIG_MAX);
    firn_buf_init(&enc, SIG_MAX);
    firn_rc rc = firn_url_decode(&raw, s, len, err);
    if (!rc)
        rc = firn_url_encode(&enc, (const char *)raw.data, raw.len, false);
    *out = rc ? NULL : (char *)firn_buf_take(&enc, NULL);
    firn_buf_deinit(&raw);
    firn_buf_deinit(&enc);
    return rc;
}

static firn_rc canonical_query(firn_buf *out, const url_parts *u, firn_err *err)
{
    size_t n = 0, cap = 8;
    kv *items = firn_calloc(cap, sizeof(*items));
    firn_rc rc = FIRN_OK;
    const char *q = u->query, *end = u->query + u->query_len;
    while (q && q < end && !rc) {
        size_t plen = (size_t)(end - q);
        const char *amp = memchr(q, '&', plen);
        if (amp)
            plen = (size_t)(amp - q);
        if (plen > 0) {
            if (n == cap) {
                cap *= 2;
                items = firn_reallocarray(items, cap, sizeof(*items));
            }
            const char *eq = memchr(q, '=', plen);
            size_t klen = eq ? (size_t)(eq - q) : plen;
            rc = reencode(q, klen, &items[n].k, err);
            if (!rc)
                rc = eq ? reencode(eq + 1, plen - klen - 1, &items[n].v, err)
                        : reencode("", 0, &items[n].v, err);
            n++;
        }
        q = amp ? amp + 1 : end;
    }
    if (!rc)
        qsort(items, n, sizeof(*items), kv_cmp);
    for (size_t i = 0; i < n && !rc; i++)
        rc = firn_buf_appendf(out, "%s%s=%s", i ? "&" : "", items[i].k, items[i].v);
    for (size_t i = 0; i < n; i++) {
        firn_free(items[i].k);
        firn_free(items[i].v);
    }
    firn_free(items);
    return rc;
}

/* Lower-cased name and value with outer space trimmed and inner runs collapsed. */
static kv canonical_header(const firn_http_header *h)
{
    kv e;
    e.k = firn_strdup(h->name);
    for (char *c = e.k; *c; c++) {
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    }
    size_t len = strlen(h->value);
    e.v = firn_malloc(len + 1);
    size_t n = 0;
    bool space = false;
    for (const char *c = h->value; *c; c++) {
        if (*c == ' ' || *c == '\t' || *c == '\n' || *c == '\r') {
            space = n > 0;
            continue;
        }
        if (space)
            e.v[n++] = ' ';
        space = false;
        e.v[n++] = *c;
    }
    e.v[n] = '\0';
    return e;
}

static int kv_name_cmp(const void *a, const void *b)
{
    return strcmp(((const kv *)a)->k, ((const kv *)b)->k);
}

/* Appends the canonical headers block and stores the signed-headers list in signed_out. */
static firn_rc canonical_headers(firn_buf *out, firn_buf *signed_out, const firn_http_headers *h)
{
    kv *items = firn_calloc(h->count + 1, sizeof(*items));
    size_t n = 0;
    for (size_t i = 0; i < h->count; i++) {
        if (strcasecmp(h->items[i].name, "authorization") != 0)
            items[n++] = canonical_header(&h->items[i]);
    }
    /* Stable order for equal names keeps the values in the order they were added. */
    for (size_t i = 1; i < n; i++) {
        for (size_t j = i; j > 0 && kv_name_cmp(&items[j - 1], &items[j]) > 0; j--) {
            kv t = items[j];
            items[j] = items[j - 1];
            items[j - 1] = t;
        }
    }
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        bool same = i > 0 && strcmp(items[i - 1].k, items[i].k) == 0;
        if (same) {
            rc = firn_buf_appendf(out, ",%s", items[i].v);
            continue;
        }
        if (i > 0)
            rc = firn_buf_append(out, "\n", 1);
        if (!rc)
            rc = firn_buf_appendf(out, "%s:%s", items[i].k, items[i].v);
        if (!rc)
            rc = firn_buf_appendf(signed_out, "%s%s", signed_out->len ? ";" : "", items[i].k);
    }
    if (!rc && n > 0)
        rc = firn_buf_append(out, "\n", 1);
    for (size_t i = 0; i < n; i++) {
        firn_free(items[i].k);
        firn_free(items[i].v);
    }
    firn_free(items);
    return rc;
}

static void signing_key(const firn_sigv4_params *p, const char *date, uint8_t key[32])
{
    firn_buf k;
    firn_buf_init(&k, SIG_MAX);
    firn_rc rc = firn_buf_appendf(&k, "AWS4%s", p->secret_access_key);
    FIRN_ASSERT(rc == FIRN_OK);
    firn__net_hmac_sha256(k.data, k.len, date, strlen(date), key);
    firn__net_hmac_sha256(key, 32, p->region, strlen(p->region), key);
    firn__net_hmac_sha256(key, 32, p->service, strlen(p->service), key);
    firn__net_hmac_sha256(key, 32, "aws4_request", 12, key);
    OPENSSL_cleanse(k.data, k.len);
    firn_buf_deinit(&k);
}

/* Sets the x-amz-* headers the signature covers; returns the payload hash in use. */
static void prepare_headers(const firn_sigv4_params *p,
                            const url_parts *u,
                            const char *amz_date,
                            const char *payload_hash,
                            firn_http_headers *hdrs)
{
    firn_http_headers_remove(hdrs, "Authorization");
    if (!firn_http_headers_get(hdrs, "Host")) {
        char *host = host_value(u);
        firn_http_headers_add(hdrs, "Host", host);
        firn_free(host);
    }
    firn_http_headers_set(hdrs, "X-Amz-Date", amz_date);
    if (p->session_token && *p->session_token)
        firn_http_headers_set(hdrs, "X-Amz-Security-Token", p->session_token);
    if (p->content_sha256_header)
        firn_http_headers_set(hdrs, "X-Amz-Content-Sha256", payload_hash);
}

static firn_rc canonical_request(firn_buf *cr,
                                 firn_buf *signed_hdrs,
                                 const firn_sigv4_params *p,
                                 firn_http_method method,
                                 const url_parts *u,
                                 const firn_http_headers *hdrs,
                                 const char *payload_hash,
                                 firn_err *err)
{
    FIRN_TRY(firn_buf_appendf(cr, "%s\n", firn_http_method_name(method)));
    FIRN_TRY(canonical_uri(cr, u, p->single_encode_path, err));
    FIRN_TRY(firn_buf_append(cr, "\n", 1));
    FIRN_TRY(canonical_query(cr, u, err));
    FIRN_TRY(firn_buf_append(cr, "\n", 1));
    FIRN_TRY(canonical_headers(cr, signed_hdrs, hdrs));
    return firn_buf_appendf(cr, "\n%s\n%s", (const char *)signed_hdrs->data, payload_hash);
}

firn_rc firn_sigv4_sign(const firn_sigv4_params *p,
                        firn_http_method method,
                        const char *url,
                        const void *body,
                        size_t body_len,
                        firn_http_headers *hdrs,
                        firn_err *err)
{
    url_parts u;
    FIRN_TRY(split_url(url, &u, err));
    char now_date[17];
    const char *amz_date = p->amz_date;
    if (!amz_date) {
        firn__net_amz_date((time_t)(firn_now_us() / 1000000), now_date);
        amz_date = now_date;
    }
    if (strlen(amz_date) != 16)
        return firn_err_set(err, FIRN_ERR_INVALID, "bad X-Amz-Date \"%s\"", amz_date);
    char hash[65];
    const char *payload_hash = p->payload_hash;
    if (!payload_hash) {
        firn_sha256_hex(body ? body : "", body ? body_len : 0, hash);
        payload_hash = hash;
    }
    prepare_headers(p, &u, amz_date, payload_hash, hdrs);
    char date[9];
    memcpy(date, amz_date, 8);
    date[8] = '\0';

    firn_buf cr, sh, sts;
    firn_buf_init(&cr, SIG_MAX);
    firn_buf_init(&sh, SIG_MAX);
    firn_buf_init(&sts, SIG_MAX);
    firn_rc rc = canonical_request(&cr, &sh, p, method, &u, hdrs, payload_hash, err);
    if (rc)
        goto out;
    char cr_hash[65];
    firn_sha256_hex(cr.data, cr.len, cr_hash);
    rc = firn_buf_appendf(&sts, "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s", amz_date, date,
                          p->region, p->service, cr_hash);
    if (rc)
        goto out;
    uint8_t key[32], sig[32];
    signing_key(p, date, key);
    firn__net_hmac_sha256(key, sizeof(key), sts.data, sts.len, sig);
    OPENSSL_cleanse(key, sizeof(key));
    char sig_hex[65];
    firn__net_hex(sig, sizeof(sig), sig_hex);
    firn_buf_reset(&sts);
    rc = firn_buf_appendf(&sts,
                          "AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, "
                          "SignedHeaders=%s, Signature=%s",
                          p->access_key_id, date, p->region, p->service, (const char *)sh.data,
                          sig_hex);
    if (!rc)
        firn_http_headers_set(hdrs, "Authorization", (const char *)sts.data);
out:
    if (rc == FIRN_ERR_TOO_LARGE)
        rc = firn_err_set(err, rc, "request too large to sign");
    firn_buf_deinit(&cr);
    firn_buf_deinit(&sh);
    firn_buf_deinit(&sts);
    return rc;
}

/* ---- provider ---- */

void firn_aws_keys_clear(firn_aws_keys *k)
{
    if (k->secret_access_key)
        OPENSSL_cleanse(k->secret_access_key, strlen(k->secret_access_key));
    firn_free(k->access_key_id);
    firn_free(k->secret_access_key);
    firn_free(k->session_token);
    memset(k, 0, sizeof(*k));
}

typedef struct sigv4_cred {
    firn_cred base;
    pthread_mutex_t mu;
    char *service;
    char *region;
    firn_aws_keys keys;
    bool stale;
    firn_aws_keys_fn fn;
    void *fn_ctx;
    long margin_ms;
    bool unsigned_payload;
} sigv4_cred;

static firn_rc refresh_keys(sigv4_cred *s, firn_err *err)
{
    int64_t now_ms = firn_now_us() / 1000;
    bool expiring = s->keys.expires_at_ms > 0 && now_ms + s->margin_ms >= s->keys.expires_at_ms;
    if (!s->fn || (s->keys.access_key_id && !s->stale && !expiring))
        return FIRN_OK;
    firn_aws_keys fresh = {0};
    firn_rc rc = s->fn(s->fn_ctx, &fresh, err);
    if (!rc && (!fresh.access_key_id || !fresh.secret_access_key))
        rc = firn_err_set(err, FIRN_ERR_AUTH, "credential source returned no AWS keys");
    if (rc) {
        firn_aws_keys_clear(&fresh);
        bool usable = s->keys.access_key_id && !s->stale &&
                      (s->keys.expires_at_ms == 0 || now_ms + 5000 < s->keys.expires_at_ms);
        return usable ? FIRN_OK : rc;
    }
    firn_aws_keys_clear(&s->keys);
    firn_secret_register_token(fresh.secret_access_key);
    firn_secret_register_token(fresh.session_token);
    s->keys = fresh;
    s->stale = false;
    return FIRN_OK;
}

static firn_rc
sigv4_apply(firn_cred *c, const firn_http_request *req, firn_http_headers *hdrs, firn_err *err)
{
    sigv4_cred *s = (sigv4_cred *)c;
    char hash[65];
    if (!s->unsigned_payload)
        firn_sha256_hex(req->body ? req->body : "", req->body ? req->body_len : 0, hash);
    bool is_s3 = strcmp(s->service, "s3") == 0;
    pthread_mutex_lock(&s->mu);
    firn_rc rc = refresh_keys(s, err);
    if (!rc) {
        firn_sigv4_params p = {
            .access_key_id = s->keys.access_key_id,
            .secret_access_key = s->keys.secret_access_key,
            .session_token = s->keys.session_token,
            .region = s->region,
            .service = s->service,
            .payload_hash = s->unsigned_payload ? "UNSIGNED-PAYLOAD" : hash,
            .content_sha256_header = is_s3,
            .single_encode_path = is_s3,
        };
        rc = firn_sigv4_sign(&p, req->method, req->url, req->body, req->body_len, hdrs, err);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static void sigv4_invalidate(firn_cred *c)
{
    sigv4_cred *s = (sigv4_cred *)c;
    pthread_mutex_lock(&s->mu);
    s->stale = s->fn != NULL;
    pthread_mutex_unlock(&s->mu);
}

static void sigv4_destroy(firn_cred *c)
{
    sigv4_cred *s = (sigv4_cred *)c;
    firn_aws_keys_clear(&s->keys);
    firn_free(s->service);
    firn_free(s->region);
    pthread_mutex_destroy(&s->mu);
    firn_free(s);
}

static const firn_cred_vtable sigv4_vt = {"sigv4", sigv4_apply, sigv4_invalidate, sigv4_destroy};

static const char *env_nonempty(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static char *dup_or_null(const char *s)
{
    return s && *s ? firn_strdup(s) : NULL;
}

firn_rc firn_cred_sigv4_new(const firn_sigv4_options *opts, firn_cred **out, firn_err *err)
{
    *out = NULL;
    if (!opts->service || !*opts->service)
        return firn_err_set(err, FIRN_ERR_CONFIG, "AWS signing needs a service name");
    firn_aws_keys keys = {0};
    if (opts->access_key_id && *opts->access_key_id) {
        keys.access_key_id = firn_strdup(opts->access_key_id);
        keys.secret_access_key = dup_or_null(opts->secret_access_key);
        keys.session_token = dup_or_null(opts->session_token);
    } else if (!opts->fn && env_nonempty("AWS_ACCESS_KEY_ID")) {
        keys.access_key_id = firn_strdup(env_nonempty("AWS_ACCESS_KEY_ID"));
        keys.secret_access_key = dup_or_null(env_nonempty("AWS_SECRET_ACCESS_KEY"));
        keys.session_token = dup_or_null(env_nonempty("AWS_SESSION_TOKEN"));
    }
    firn_secret_register(keys.secret_access_key);
    firn_secret_register(keys.session_token);
    if (!opts->fn && (!keys.access_key_id || !keys.secret_access_key)) {
        firn_aws_keys_clear(&keys);
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "no AWS credentials: set an access key id and secret, "
                            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a credential source");
    }
    const char *region = opts->region && *opts->region ? opts->region : env_nonempty("AWS_REGION");
    if (!region)
        region = env_nonempty("AWS_DEFAULT_REGION");
    sigv4_cred *s = firn_calloc(1, sizeof(*s));
    s->base.vt = &sigv4_vt;
    atomic_init(&s->base.refs, 1);
    pthread_mutex_init(&s->mu, NULL);
    s->service = firn_strdup(opts->service);
    s->region = firn_strdup(region ? region : "us-east-1");
    s->keys = keys;
    s->fn = opts->fn;
    s->fn_ctx = opts->fn_ctx;
    s->margin_ms = opts->refresh_margin_ms > 0 ? opts->refresh_margin_ms : 60000;
    s->unsigned_payload = opts->unsigned_payload;
    *out = &s->base;
    return FIRN_OK;
}
