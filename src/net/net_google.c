/* SPDX-License-Identifier: Apache-2.0 */
/* Google service-account credentials (ICEBERG.md §H): an RS256-signed JWT assertion exchanged at
 * the key's token_uri for an OAuth2 access token (RFC 7523 jwt-bearer grant), cached and
 * re-minted before expiry; plus x-goog-user-project on every request. */
#include "net_int.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define KEY_FILE_MAX  ((size_t)1 << 16)
#define DEFAULT_SCOPE "https://www.googleapis.com/auth/cloud-platform"

static EVP_PKEY *load_private_key(const char *pem)
{
    BIO *bio = BIO_new_mem_buf(pem, -1);
    if (!bio)
        return NULL;
    EVP_PKEY *pkey = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
    BIO_free(bio);
    return pkey;
}

/* Appends base64url(compact JSON of j). */
static firn_rc append_json_b64(firn_buf *out, json_t *j)
{
    size_t n = json_dumpb(j, NULL, 0, JSON_COMPACT);
    FIRN_ASSERT(n > 0);
    char *tmp = firn_malloc(n);
    size_t m = json_dumpb(j, tmp, n, JSON_COMPACT);
    FIRN_ASSERT(m == n);
    firn_rc rc = firn__net_b64url(out, tmp, n);
    firn_free(tmp);
    return rc;
}

static firn_rc rs256_sign(firn_buf *out, EVP_PKEY *pkey, const void *msg, size_t len, firn_err *err)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    size_t sig_len = 0;
    uint8_t *sig = NULL;
    firn_rc rc = FIRN_OK;
    if (!ctx || EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, pkey) != 1 ||
        EVP_DigestSign(ctx, NULL, &sig_len, msg, len) != 1) {
        rc = firn_err_set(err, FIRN_ERR_CONFIG, "could not sign the service-account assertion");
        goto out;
    }
    sig = firn_malloc(sig_len);
    if (EVP_DigestSign(ctx, sig, &sig_len, msg, len) != 1) {
        rc = firn_err_set(err, FIRN_ERR_CONFIG, "could not sign the service-account assertion");
        goto out;
    }
    rc = firn__net_b64url(out, sig, sig_len);
out:
    firn_free(sig);
    EVP_MD_CTX_free(ctx);
    return rc;
}

firn_rc firn__google_jwt(firn_buf *out,
                         const char *pem,
                         const char *key_id,
                         const char *client_email,
                         const char *scope,
                         const char *audience,
                         int64_t iat_s,
                         long lifetime_s,
                         firn_err *err)
{
    EVP_PKEY *pkey = load_private_key(pem);
    if (!pkey)
        return firn_err_set(err, FIRN_ERR_CONFIG, "service-account private key is not a PEM key");
    json_t *hdr = json_pack("{s:s, s:s}", "alg", "RS256", "typ", "JWT");
    if (key_id && *key_id)
        json_object_set_new(hdr, "kid", json_string(key_id));
    json_t *claims =
        json_pack("{s:s, s:s, s:s, s:I, s:I}", "iss", client_email, "scope", scope, "aud", audience,
                  "iat", (json_int_t)iat_s, "exp", (json_int_t)(iat_s + lifetime_s));
    firn_rc rc = FIRN_OK;
    if (!hdr || !claims) {
        rc = firn_err_set(err, FIRN_ERR_CONFIG, "service-account fields are not valid UTF-8");
        goto out;
    }
    size_t start = out->len;
    rc = append_json_b64(out, hdr);
    if (!rc)
        rc = firn_buf_append(out, ".", 1);
    if (!rc)
        rc = append_json_b64(out, claims);
    if (!rc) {
        size_t signed_len = out->len - start;
        char *signing_input = firn_strndup((const char *)out->data + start, signed_len);
        rc = firn_buf_append(out, ".", 1);
        if (!rc)
            rc = rs256_sign(out, pkey, signing_input, signed_len, err);
        firn_free(signing_input);
    }
    if (rc == FIRN_ERR_TOO_LARGE)
        rc = firn_err_set(err, rc, "service-account assertion too large");
out:
    json_decref(hdr);
    json_decref(claims);
    EVP_PKEY_free(pkey);
    return rc;
}

/* ---- provider ---- */

typedef struct google_cred {
    firn__token_cred t;
    firn_http *http;
    char *email;
    char *pem;
    char *key_id;
    char *scope;
    char *token_uri;
    char *user_project;
    long jwt_lifetime_s;
} google_cred;

static firn_rc google_fetch(firn__token_cred *t, char **out_token, int64_t *out_exp, firn_err *err)
{
    google_cred *g = (google_cred *)t;
    firn_buf jwt, form;
    firn_buf_init(&jwt, 1 << 16);
    firn_buf_init(&form, 1 << 17);
    firn_rc rc = firn__google_jwt(&jwt, g->pem, g->key_id, g->email, g->scope, g->token_uri,
                                  firn_now_us() / 1000000, g->jwt_lifetime_s, err);
    if (!rc)
        rc = firn__net_form_add(&form, "grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer");
    if (!rc)
        rc = firn__net_form_add(&form, "assertion", (const char *)jwt.data);
    if (!rc) /* it buys a token: as secret as one */
        firn_secret_register_token((const char *)jwt.data);
    if (!rc)
        rc = firn__oauth2_post(g->http, g->token_uri, (const char *)form.data, out_token, out_exp,
                               err);
    firn_buf_deinit(&jwt);
    firn_buf_deinit(&form);
    return rc;
}

static firn_rc
google_apply(firn_cred *c, const firn_http_request *req, firn_http_headers *hdrs, firn_err *err)
{
    (void)req;
    google_cred *g = (google_cred *)c;
    FIRN_TRY(firn__bearer_apply(&g->t, google_fetch, hdrs, err));
    if (g->user_project)
        firn_http_headers_set(hdrs, "x-goog-user-project", g->user_project);
    return FIRN_OK;
}

static void google_destroy(firn_cred *c)
{
    google_cred *g = (google_cred *)c;
    firn_http_free(g->http);
    firn_free(g->email);
    if (g->pem)
        OPENSSL_cleanse(g->pem, strlen(g->pem));
    firn_free(g->pem);
    firn_free(g->key_id);
    firn_free(g->scope);
    firn_free(g->token_uri);
    firn_free(g->user_project);
    firn__token_destroy(c);
}

static const firn_cred_vtable google_vt = {"google", google_apply, firn__token_invalidate,
                                           google_destroy};

static firn_rc read_key_file(const char *path, char **out, firn_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return firn_err_set_errno(err, FIRN_ERR_CONFIG, errno,
                                  "could not open service-account key \"%s\"", path);
    firn_buf b;
    firn_buf_init(&b, KEY_FILE_MAX);
    char chunk[4096];
    size_t n;
    firn_rc rc = FIRN_OK;
    while (!rc && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        rc = firn_buf_append(&b, chunk, n);
    if (!rc && ferror(f))
        rc = firn_err_set(err, FIRN_ERR_CONFIG, "could not read service-account key \"%s\"", path);
    else if (rc)
        rc = firn_err_set(err, FIRN_ERR_CONFIG, "service-account key \"%s\" is too large", path);
    fclose(f);
    *out = rc ? NULL : (char *)firn_buf_take(&b, NULL);
    firn_buf_deinit(&b);
    return rc;
}

static char *json_str_dup(json_t *doc, const char *key)
{
    const char *v = json_string_value(json_object_get(doc, key));
    return v && *v ? firn_strdup(v) : NULL;
}

static firn_rc parse_key(google_cred *g, const char *text, firn_err *err)
{
    json_error_t jerr;
    json_t *doc = json_loads(text, 0, &jerr);
    if (!doc || !json_is_object(doc)) {
        json_decref(doc);
        char brief[FIRN_JSON_ERROR_BRIEF_MAX];
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "service-account key is not a JSON object: %s (line %d)",
                            doc ? "another JSON value"
                                : firn_json_error_brief(brief, sizeof(brief), jerr.text, text,
                                                        strlen(text), (size_t)jerr.position),
                            doc ? 1 : jerr.line);
    }
    firn_rc rc = FIRN_OK;
    const char *type = json_string_value(json_object_get(doc, "type"));
    g->email = json_str_dup(doc, "client_email");
    g->pem = json_str_dup(doc, "private_key");
    g->key_id = json_str_dup(doc, "private_key_id");
    if (!g->token_uri)
        g->token_uri = json_str_dup(doc, "token_uri");
    if (type && strcmp(type, "service_account") != 0)
        rc = firn_err_set(err, FIRN_ERR_CONFIG,
                          "credentials of type \"%s\" are not a service-account key", type);
    else if (!g->email || !g->pem)
        rc = firn_err_set(err, FIRN_ERR_CONFIG,
                          "service-account key lacks \"client_email\" or \"private_key\"");
    json_decref(doc);
    return rc;
}

static firn_rc google_setup(google_cred *g, const firn_google_options *opts, firn_err *err)
{
    char *text = NULL;
    if (opts->key_json)
        text = firn_strdup(opts->key_json);
    else if (opts->key_file)
        FIRN_TRY(read_key_file(opts->key_file, &text, err));
    else
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "Google credentials need a service-account key file or JSON");
    firn_rc rc = parse_key(g, text, err);
    OPENSSL_cleanse(text, strlen(text));
    firn_free(text);
    FIRN_TRY(rc);
    if (!g->token_uri)
        g->token_uri = firn_strdup("https://oauth2.googleapis.com/token");
    EVP_PKEY *pkey = load_private_key(g->pem);
    if (!pkey)
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "service-account \"%s\" has no readable PEM private key", g->email);
    EVP_PKEY_free(pkey);
    return firn_http_new(opts->http, &g->http, err);
}

firn_rc firn_cred_google_new(const firn_google_options *opts, firn_cred **out, firn_err *err)
{
    *out = NULL;
    google_cred *g = firn_calloc(1, sizeof(*g));
    g->t.base.vt = &google_vt;
    atomic_init(&g->t.base.refs, 1);
    firn__token_cache_init(&g->t.tc,
                           opts->refresh_margin_ms > 0 ? opts->refresh_margin_ms : 300000);
    g->scope = firn_strdup(opts->scope && *opts->scope ? opts->scope : DEFAULT_SCOPE);
    g->token_uri = opts->token_uri && *opts->token_uri ? firn_strdup(opts->token_uri) : NULL;
    g->user_project =
        opts->user_project && *opts->user_project ? firn_strdup(opts->user_project) : NULL;
    g->jwt_lifetime_s = opts->jwt_lifetime_s > 0 ? opts->jwt_lifetime_s : 3600;
    firn_rc rc = google_setup(g, opts, err);
    if (rc) {
        google_destroy(&g->t.base);
        return rc;
    }
    *out = &g->t.base;
    return FIRN_OK;
}
