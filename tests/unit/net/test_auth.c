/* SPDX-License-Identifier: Apache-2.0 */
/* Token providers: OAuth2 client credentials (form, default endpoint, refresh before expiry,
 * error documents) and Google service accounts (RS256 JWT verified with the public key through
 * OpenSSL, jwt-bearer exchange, x-goog-user-project, re-minting). */
#include "firn/net.h"
#include "net/net_int.h"
#include "t.h"
#include "unit/net/fake_http.h"

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static const char *auth_of(firn_http_headers *h)
{
    const char *v = firn_http_headers_get(h, "Authorization");
    return v ? v : "(none)";
}

static firn_rc apply(firn_cred *c, firn_http_headers *h, firn_err *err)
{
    firn_http_request req = {.method = FIRN_HTTP_GET, .url = "https://catalog.example/v1/config"};
    firn_http_headers_clear(h);
    return firn_cred_apply(c, &req, h, err);
}

T_TEST(oauth2_client_credentials_refresh)
{
    fake_resp script[] = {
        {200, NULL, "{\"access_token\":\"t1\",\"token_type\":\"bearer\",\"expires_in\":2}", 0,
         false},
        {200, NULL, "{\"access_token\":\"t2\",\"token_type\":\"bearer\",\"expires_in\":\"3600\"}",
         0, false}};
    fake_server *s = fake_start(script, 2);
    char catalog[128];
    fake_url(s, "/api/catalog/", catalog, sizeof(catalog));
    firn_oauth2_options o = {.catalog_uri = catalog,
                             .client_id = "cid",
                             .client_secret = "s&cret",
                             .scope = "PRINCIPAL_ROLE:ALL"};
    firn_cred *c = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_cred_oauth2_new(&o, &c, &err), &err);
    T_EQ_INT(fake_requests(s), 0); /* lazy */
    firn_http_headers h;
    firn_http_headers_init(&h);
    T_OK_ERR(apply(c, &h, &err), &err);
    T_EQ_STR(auth_of(&h), "Bearer t1");
    const char *raw = fake_request(s, 0);
    T_TRUE(strncmp(raw, "POST /api/catalog/v1/oauth/tokens HTTP/1.1", 42) == 0);
    T_TRUE(fake_strcasestr(raw, "Content-Type: application/x-www-form-urlencoded") != NULL);
    T_TRUE(strstr(raw, "\r\n\r\ngrant_type=client_credentials&client_id=cid&client_secret="
                       "s%26cret&scope=PRINCIPAL_ROLE%3AALL") != NULL);
    T_OK_ERR(apply(c, &h, &err), &err);
    T_EQ_STR(auth_of(&h), "Bearer t1");
    T_EQ_INT(fake_requests(s), 1);
    /* A 2 s token is refreshed a fifth of its life early (0.4 s), not 60 s early. */
    sleep_ms(1700);
    T_OK_ERR(apply(c, &h, &err), &err);
    T_EQ_STR(auth_of(&h), "Bearer t2");
    T_EQ_INT(fake_requests(s), 2);
    T_OK_ERR(apply(c, &h, &err), &err);
    T_EQ_INT(fake_requests(s), 2);
    firn_http_headers_deinit(&h);
    firn_cred_unref(c);
    fake_stop(s);
}

T_TEST(oauth2_error_document)
{
    fake_resp script[] = {{401, NULL,
                           "{\"error\":\"invalid_client\",\"error_description\":\"bad secret\"}", 0,
                           false}};
    fake_server *s = fake_start(script, 1);
    char uri[128];
    fake_url(s, "/idp/token", uri, sizeof(uri));
    firn_oauth2_options o = {.token_uri = uri, .client_id = "cid", .client_secret = "x"};
    firn_cred *c = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_cred_oauth2_new(&o, &c, &err), &err);
    firn_http_headers h;
    firn_http_headers_init(&h);
    T_EQ_INT(apply(c, &h, &err), FIRN_ERR_AUTH);
    T_TRUE(strstr(err.msg, "invalid_client") != NULL);
    T_TRUE(strstr(err.msg, "bad secret") != NULL);
    T_TRUE(strstr(fake_request(s, 0), "scope=catalog") != NULL);
    T_TRUE(firn_http_headers_get(&h, "Authorization") == NULL);
    firn_http_headers_deinit(&h);
    firn_cred_unref(c);
    fake_stop(s);
    firn_oauth2_options bad = {.client_id = "cid", .client_secret = "x"};
    T_EQ_INT(firn_cred_oauth2_new(&bad, &c, &err), FIRN_ERR_CONFIG);
}

T_TEST(oauth2_token_parsing)
{
    char *tok = NULL;
    int64_t exp = 0;
    const char *ok = "{\"access_token\":\"abc\",\"expires_in\":10}";
    T_OK(firn__oauth2_parse_token(ok, strlen(ok), 1000, &tok, &exp, NULL));
    T_EQ_STR(tok, "abc");
    T_EQ_INT(exp, 11000);
    firn_free(tok);
    const char *noexp = "{\"access_token\":\"abc\"}";
    T_OK(firn__oauth2_parse_token(noexp, strlen(noexp), 1000, &tok, &exp, NULL));
    T_EQ_INT(exp, 0);
    firn_free(tok);
    T_EQ_INT(firn__oauth2_parse_token("[1]", 3, 0, &tok, &exp, NULL), FIRN_ERR_PROTOCOL);
    T_EQ_INT(firn__oauth2_parse_token("{}", 2, 0, &tok, &exp, NULL), FIRN_ERR_AUTH);
    T_TRUE(tok == NULL);
}

/* ---- Google ---- */

static char *make_pem(EVP_PKEY **out_key)
{
    EVP_PKEY *k = EVP_RSA_gen(2048);
    T_TRUE(k != NULL);
    BIO *b = BIO_new(BIO_s_mem());
    T_TRUE(PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL) == 1);
    char *data = NULL;
    long n = BIO_get_mem_data(b, &data);
    char *pem = firn_strndup(data, (size_t)n);
    BIO_free(b);
    *out_key = k;
    return pem;
}

static json_t *decode_part(const char *s, size_t len)
{
    firn_buf b;
    firn_buf_init(&b, 1 << 16);
    T_OK(firn__net_b64url_decode(&b, s, len, NULL));
    json_t *j = json_loadb((const char *)b.data, b.len, 0, NULL);
    T_TRUE(j != NULL);
    firn_buf_deinit(&b);
    return j;
}

/* EVP_DigestVerify of jwt's RS256 signature with key's public half only, as Google does. */
static int sig_verify(const char *jwt, size_t len, EVP_PKEY *key)
{
    const char *dot2 = NULL;
    for (size_t i = 0; i < len; i++) {
        if (jwt[i] == '.')
            dot2 = jwt + i;
    }
    T_TRUE(dot2 != NULL);
    firn_buf sig;
    firn_buf_init(&sig, 4096);
    T_OK(firn__net_b64url_decode(&sig, dot2 + 1, len - (size_t)(dot2 + 1 - jwt), NULL));
    T_EQ_UINT(sig.len, 256);
    BIO *b = BIO_new(BIO_s_mem());
    T_TRUE(PEM_write_bio_PUBKEY(b, key) == 1);
    EVP_PKEY *pub = PEM_read_bio_PUBKEY(b, NULL, NULL, NULL);
    T_TRUE(pub != NULL);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    T_TRUE(EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, pub) == 1);
    int ok = EVP_DigestVerify(ctx, sig.data, sig.len, (const uint8_t *)jwt, (size_t)(dot2 - jwt));
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(pub);
    BIO_free(b);
    firn_buf_deinit(&sig);
    return ok;
}

/* Checks the header and the signature of jwt; returns its claims. */
static json_t *verify_jwt(const char *jwt, size_t len, EVP_PKEY *key, const char *want_kid)
{
    const char *dot1 = memchr(jwt, '.', len);
    T_TRUE(dot1 != NULL);
    const char *dot2 = memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - jwt));
    T_TRUE(dot2 != NULL);
    json_t *hdr = decode_part(jwt, (size_t)(dot1 - jwt));
    T_EQ_STR(json_string_value(json_object_get(hdr, "alg")), "RS256");
    T_EQ_STR(json_string_value(json_object_get(hdr, "typ")), "JWT");
    T_EQ_STR(json_string_value(json_object_get(hdr, "kid")), want_kid);
    json_decref(hdr);
    T_EQ_INT(sig_verify(jwt, len, key), 1);
    return decode_part(dot1 + 1, (size_t)(dot2 - dot1 - 1));
}

T_TEST(google_jwt_is_rs256_signed)
{
    EVP_PKEY *key = NULL;
    char *pem = make_pem(&key);
    firn_buf jwt;
    firn_buf_init(&jwt, 1 << 16);
    firn_err err = {0};
    T_OK_ERR(firn__google_jwt(&jwt, pem, "kid-1", "sa@p.iam.gserviceaccount.com",
                              "https://www.googleapis.com/auth/cloud-platform",
                              "https://oauth2.googleapis.com/token", 1700000000, 3600, &err),
             &err);
    T_TRUE(strchr((char *)jwt.data, '=') == NULL); /* unpadded base64url */
    json_t *claims = verify_jwt((char *)jwt.data, jwt.len, key, "kid-1");
    T_EQ_STR(json_string_value(json_object_get(claims, "iss")), "sa@p.iam.gserviceaccount.com");
    T_EQ_STR(json_string_value(json_object_get(claims, "scope")),
             "https://www.googleapis.com/auth/cloud-platform");
    T_EQ_STR(json_string_value(json_object_get(claims, "aud")),
             "https://oauth2.googleapis.com/token");
    T_EQ_INT(json_integer_value(json_object_get(claims, "iat")), 1700000000);
    T_EQ_INT(json_integer_value(json_object_get(claims, "exp")), 1700003600);
    json_decref(claims);
    /* A flipped byte in the signed part must fail verification. */
    jwt.data[5] ^= 1;
    T_TRUE(sig_verify((char *)jwt.data, jwt.len, key) != 1);
    firn_buf_reset(&jwt);
    T_EQ_INT(firn__google_jwt(&jwt, "not a key", "k", "e", "s", "a", 0, 60, &err), FIRN_ERR_CONFIG);
    firn_buf_deinit(&jwt);
    firn_free(pem);
    EVP_PKEY_free(key);
}

static char *key_json(const char *pem, const char *token_uri)
{
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", "service_account", "client_email",
                          "firn-test@proj.iam.gserviceaccount.com", "private_key", pem,
                          "private_key_id", "kid-7", "token_uri", token_uri);
    size_t n = json_dumpb(j, NULL, 0, 0);
    char *s = firn_malloc(n + 1);
    T_EQ_UINT(json_dumpb(j, s, n, 0), n);
    s[n] = '\0';
    json_decref(j);
    return s;
}

/* Extracts and decodes the assertion form field of a raw token request. */
static char *assertion_of(const char *raw)
{
    const char *a = strstr(raw, "assertion=");
    T_TRUE(a != NULL);
    a += 10;
    size_t n = strcspn(a, "&");
    firn_buf b;
    firn_buf_init(&b, 1 << 16);
    T_OK(firn_url_decode(&b, a, n, NULL));
    return (char *)firn_buf_take(&b, NULL);
}

T_TEST(google_service_account_exchange)
{
    fake_resp script[] = {
        {200, NULL, "{\"access_token\":\"g1\",\"expires_in\":2,\"token_type\":\"Bearer\"}", 0,
         false},
        {200, NULL, "{\"access_token\":\"g2\",\"expires_in\":3599,\"token_type\":\"Bearer\"}", 0,
         false}};
    fake_server *s = fake_start(script, 2);
    char token_uri[128];
    fake_url(s, "/token", token_uri, sizeof(token_uri));
    EVP_PKEY *key = NULL;
    char *pem = make_pem(&key);
    char *json = key_json(pem, token_uri);
    firn_google_options o = {.key_json = json, .user_project = "billing-proj"};
    firn_cred *c = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_cred_google_new(&o, &c, &err), &err);
    firn_http_headers h;
    firn_http_headers_init(&h);
    T_OK_ERR(apply(c, &h, &err), &err);
    T_EQ_STR(auth_of(&h), "Bearer g1");
    T_EQ_STR(firn_http_headers_get(&h, "x-goog-user-project"), "billing-proj");
    const char *raw = fake_request(s, 0);
    T_TRUE(strncmp(raw, "POST /token HTTP/1.1", 20) == 0);
    T_TRUE(strstr(raw, "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer") != NULL);
    char *assertion = assertion_of(raw);
    json_t *claims = verify_jwt(assertion, strlen(assertion), key, "kid-7");
    T_EQ_STR(json_string_value(json_object_get(claims, "aud")), token_uri);
    T_EQ_STR(json_string_value(json_object_get(claims, "iss")),
             "firn-test@proj.iam.gserviceaccount.com");
    json_decref(claims);
    firn_free(assertion);
    T_OK_ERR(apply(c, &h, &err), &err);
    T_EQ_STR(auth_of(&h), "Bearer g1");
    T_EQ_INT(firn__cred_token_fetches(c), 1);
    sleep_ms(1700);
    T_OK_ERR(apply(c, &h, &err), &err);
    T_EQ_STR(auth_of(&h), "Bearer g2");
    T_EQ_STR(firn_http_headers_get(&h, "x-goog-user-project"), "billing-proj");
    T_EQ_INT(firn__cred_token_fetches(c), 2);
    firn_http_headers_deinit(&h);
    firn_cred_unref(c);
    firn_free(json);
    firn_free(pem);
    EVP_PKEY_free(key);
    fake_stop(s);
}

T_TEST(google_rejects_bad_keys)
{
    firn_cred *c = NULL;
    firn_err err = {0};
    firn_google_options o = {.key_json = "{\"type\":\"authorized_user\"}"};
    T_EQ_INT(firn_cred_google_new(&o, &c, &err), FIRN_ERR_CONFIG);
    T_TRUE(strstr(err.msg, "authorized_user") != NULL);
    o.key_json = "{\"type\":\"service_account\",\"client_email\":\"a@b\",\"private_key\":\"x\"}";
    T_EQ_INT(firn_cred_google_new(&o, &c, &err), FIRN_ERR_CONFIG);
    o.key_json = "not json";
    T_EQ_INT(firn_cred_google_new(&o, &c, &err), FIRN_ERR_CONFIG);
    firn_google_options f = {.key_file = "/nonexistent/key.json"};
    T_EQ_INT(firn_cred_google_new(&f, &c, &err), FIRN_ERR_CONFIG);
    T_TRUE(c == NULL);
}

T_MAIN(T_CASE(oauth2_client_credentials_refresh),
       T_CASE(oauth2_error_document),
       T_CASE(oauth2_token_parsing),
       T_CASE(google_jwt_is_rs256_signed),
       T_CASE(google_service_account_exchange),
       T_CASE(google_rejects_bad_keys))
