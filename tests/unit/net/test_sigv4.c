/* SPDX-License-Identifier: Apache-2.0 */
/* AWS Signature Version 4 against the published test-suite vectors (aws-sig-v4-test-suite, as
 * shipped with the AWS SDKs: region us-east-1, service "service", 2015-08-30T12:36:00Z) and the
 * S3 GET-object example of the S3 API reference. */
#include "firn/net.h"
#include "net/net_int.h"
#include "t.h"

#define AKID   "AKIDEXAMPLE"
#define SECRET "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define DATE   "20150830T123600Z"
#define CRED   "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "

typedef struct vec {
    const char *name;
    firn_http_method method;
    const char *url;
    const char *headers[6]; /* name, value pairs, NULL-terminated */
    const char *body;
    const char *session_token;
    const char *authorization;
} vec;

static const vec vectors[] = {
    {"get-vanilla",
     FIRN_HTTP_GET,
     "https://example.amazonaws.com/",
     {NULL},
     NULL,
     NULL,
     CRED "SignedHeaders=host;x-amz-date, "
          "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
    {"get-vanilla-query-order-key-case",
     FIRN_HTTP_GET,
     "https://example.amazonaws.com/?Param2=value2&Param1=value1",
     {NULL},
     NULL,
     NULL,
     CRED "SignedHeaders=host;x-amz-date, "
          "Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
    {"get-vanilla-query-unreserved",
     FIRN_HTTP_GET,
     "https://example.amazonaws.com/"
     "?-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz="
     "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
     {NULL},
     NULL,
     NULL,
     CRED "SignedHeaders=host;x-amz-date, "
          "Signature=9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197"},
    {"get-vanilla-utf8-query",
     FIRN_HTTP_GET,
     "https://example.amazonaws.com/?%E1%88%B4=bar",
     {NULL},
     NULL,
     NULL,
     CRED "SignedHeaders=host;x-amz-date, "
          "Signature=2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04"},
    {"get-unreserved",
     FIRN_HTTP_GET,
     "https://example.amazonaws.com/"
     "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
     {NULL},
     NULL,
     NULL,
     CRED "SignedHeaders=host;x-amz-date, "
          "Signature=07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f"},
    {"get-header-key-duplicate",
     FIRN_HTTP_GET,
     "https://example.amazonaws.com/",
     {"My-Header1", "value2", "My-Header1", "value2", "My-Header1", "value1"},
     NULL,
     NULL,
     CRED "SignedHeaders=host;my-header1;x-amz-date, "
          "Signature=c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea"},
    {"get-header-value-order",
     FIRN_HTTP_GET,
     "https://example.amazonaws.com/",
     {"My-Header1", "value4,value1,value3,value2", NULL},
     NULL,
     NULL,
     CRED "SignedHeaders=host;my-header1;x-amz-date, "
          "Signature=08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01"},
    {"get-header-value-trim",
     FIRN_HTTP_GET,
     "https://example.amazonaws.com/",
     {"My-Header1", " value1", "My-Header2", " \"a   b   c\"", NULL},
     NULL,
     NULL,
     CRED "SignedHeaders=host;my-header1;my-header2;x-amz-date, "
          "Signature=acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"},
    {"post-vanilla",
     FIRN_HTTP_POST,
     "https://example.amazonaws.com/",
     {NULL},
     NULL,
     NULL,
     CRED "SignedHeaders=host;x-amz-date, "
          "Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"},
    {"post-vanilla-query",
     FIRN_HTTP_POST,
     "https://example.amazonaws.com/?Param1=value1",
     {NULL},
     NULL,
     NULL,
     CRED "SignedHeaders=host;x-amz-date, "
          "Signature=28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11"},
    {"post-header-value-case",
     FIRN_HTTP_POST,
     "https://example.amazonaws.com/",
     {"My-Header1", "VALUE1", NULL},
     NULL,
     NULL,
     CRED "SignedHeaders=host;my-header1;x-amz-date, "
          "Signature=cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d"},
    {"post-x-www-form-urlencoded",
     FIRN_HTTP_POST,
     "https://example.amazonaws.com/",
     {"Content-Type", "application/x-www-form-urlencoded", NULL},
     "Param1=value1",
     NULL,
     "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
     "SignedHeaders=content-type;host;x-amz-date, "
     "Signature=ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"},
    {"post-x-www-form-urlencoded-parameters",
     FIRN_HTTP_POST,
     "https://example.amazonaws.com/",
     {"Content-Type", "application/x-www-form-urlencoded; charset=utf8", NULL},
     "Param1=value1",
     NULL,
     CRED "SignedHeaders=content-type;host;x-amz-date, "
          "Signature=1a72ec8f64bd914b0e42e42607c7fbce7fb2c7465f63e3092b3b0d39fa77a6fe"},
    {"post-sts-header-before",
     FIRN_HTTP_POST,
     "https://example.amazonaws.com/",
     {NULL},
     NULL,
     "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPf"
     "IeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7W"
     "Z0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8"
     "FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA==",
     CRED "SignedHeaders=host;x-amz-date;x-amz-security-token, "
          "Signature=85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead"},
};

static void run_vector(const vec *v, bool single_encode)
{
    firn_http_headers h;
    firn_http_headers_init(&h);
    for (int i = 0; i < 6 && v->headers[i]; i += 2)
        firn_http_headers_add(&h, v->headers[i], v->headers[i + 1]);
    firn_sigv4_params p = {.access_key_id = AKID,
                           .secret_access_key = SECRET,
                           .session_token = v->session_token,
                           .region = "us-east-1",
                           .service = "service",
                           .amz_date = DATE,
                           .single_encode_path = single_encode};
    firn_err err = {0};
    size_t blen = v->body ? strlen(v->body) : 0;
    T_OK_ERR(firn_sigv4_sign(&p, v->method, v->url, v->body, blen, &h, &err), &err);
    const char *auth = firn_http_headers_get(&h, "Authorization");
    if (!auth || strcmp(auth, v->authorization) != 0)
        T_FAIL("vector %s:\n  got  %s\n  want %s", v->name, auth ? auth : "(none)",
               v->authorization);
    T_EQ_STR(firn_http_headers_get(&h, "Host"), "example.amazonaws.com");
    T_EQ_STR(firn_http_headers_get(&h, "X-Amz-Date"), DATE);
    firn_http_headers_deinit(&h);
}

T_TEST(aws_test_suite_vectors)
{
    for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++)
        run_vector(&vectors[i], false);
}

T_TEST(get_utf8_path_single_encoded)
{
    /* get-utf8: the suite's raw path "/ሴ" is sent as "/%E1%88%B4"; its canonical URI encodes it
     * once, which is what single_encode_path does for an already-encoded path. */
    vec v = {"get-utf8",
             FIRN_HTTP_GET,
             "https://example.amazonaws.com/%E1%88%B4",
             {NULL},
             NULL,
             NULL,
             CRED "SignedHeaders=host;x-amz-date, "
                  "Signature=8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"};
    run_vector(&v, true);
}

T_TEST(s3_get_object_example)
{
    /* S3 API reference, "Signature Calculations for the Authorization Header", GET Object. */
    firn_http_headers h;
    firn_http_headers_init(&h);
    firn_http_headers_add(&h, "Range", "bytes=0-9");
    firn_sigv4_params p = {.access_key_id = "AKIAIOSFODNN7EXAMPLE",
                           .secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                           .region = "us-east-1",
                           .service = "s3",
                           .amz_date = "20130524T000000Z",
                           .content_sha256_header = true,
                           .single_encode_path = true};
    firn_err err = {0};
    T_OK_ERR(firn_sigv4_sign(&p, FIRN_HTTP_GET, "https://examplebucket.s3.amazonaws.com/test.txt",
                             NULL, 0, &h, &err),
             &err);
    T_EQ_STR(firn_http_headers_get(&h, "Authorization"),
             "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
             "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
             "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
    T_EQ_STR(firn_http_headers_get(&h, "X-Amz-Content-Sha256"),
             "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    firn_http_headers_deinit(&h);
}

T_TEST(host_drops_default_port_and_userinfo)
{
    firn_http_headers h;
    firn_http_headers_init(&h);
    firn_sigv4_params p = {.access_key_id = AKID,
                           .secret_access_key = SECRET,
                           .region = "r",
                           .service = "s3",
                           .amz_date = DATE};
    T_OK(firn_sigv4_sign(&p, FIRN_HTTP_GET, "https://u:pw@h.example:443/b/k", NULL, 0, &h, NULL));
    T_EQ_STR(firn_http_headers_get(&h, "Host"), "h.example");
    firn_http_headers_clear(&h);
    T_OK(firn_sigv4_sign(&p, FIRN_HTTP_GET, "http://127.0.0.1:7070/b/k", NULL, 0, &h, NULL));
    T_EQ_STR(firn_http_headers_get(&h, "Host"), "127.0.0.1:7070");
    firn_http_headers_clear(&h);
    T_EQ_INT(firn_sigv4_sign(&p, FIRN_HTTP_GET, "no-scheme", NULL, 0, &h, NULL), FIRN_ERR_INVALID);
    firn_http_headers_deinit(&h);
}

T_TEST(double_encoding_for_other_services)
{
    /* Glue and S3 Tables encode the already-encoded path again (%1F -> %251F); S3 does not. */
    firn_http_headers a, b;
    firn_http_headers_init(&a);
    firn_http_headers_init(&b);
    firn_sigv4_params p = {.access_key_id = AKID,
                           .secret_access_key = SECRET,
                           .region = "us-east-1",
                           .service = "glue",
                           .amz_date = DATE};
    T_OK(firn_sigv4_sign(&p, FIRN_HTTP_GET, "https://glue.example/v1/namespaces/a%1Fb", NULL, 0, &a,
                         NULL));
    p.single_encode_path = true;
    T_OK(firn_sigv4_sign(&p, FIRN_HTTP_GET, "https://glue.example/v1/namespaces/a%1Fb", NULL, 0, &b,
                         NULL));
    T_TRUE(strcmp(firn_http_headers_get(&a, "Authorization"),
                  firn_http_headers_get(&b, "Authorization")) != 0);
    firn_http_headers_deinit(&a);
    firn_http_headers_deinit(&b);
}

static int keys_calls;

static firn_rc vended_keys(void *ctx, firn_aws_keys *out, firn_err *err)
{
    (void)ctx;
    (void)err;
    keys_calls++;
    out->access_key_id = firn_strdup(keys_calls == 1 ? "AKID1" : "AKID2");
    out->secret_access_key = firn_strdup("secret");
    out->session_token = firn_strdup("sess");
    /* The first keys are about to expire, so the second request fetches new ones. */
    out->expires_at_ms = firn_now_us() / 1000 + (keys_calls == 1 ? 1000 : 3600000);
    return FIRN_OK;
}

T_TEST(provider_refreshes_vended_keys)
{
    firn_sigv4_options o = {.service = "s3", .region = "eu-west-1", .fn = vended_keys};
    firn_cred *c = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_cred_sigv4_new(&o, &c, &err), &err);
    firn_http_request req = {.method = FIRN_HTTP_PUT,
                             .url = "http://127.0.0.1:1/bucket/key",
                             .body = "abc",
                             .body_len = 3};
    firn_http_headers h;
    firn_http_headers_init(&h);
    T_OK_ERR(firn_cred_apply(c, &req, &h, &err), &err);
    T_TRUE(strstr(firn_http_headers_get(&h, "Authorization"), "Credential=AKID1/") != NULL);
    T_EQ_STR(firn_http_headers_get(&h, "X-Amz-Security-Token"), "sess");
    char hash[65];
    firn_sha256_hex("abc", 3, hash);
    T_EQ_STR(firn_http_headers_get(&h, "X-Amz-Content-Sha256"), hash);
    firn_http_headers_clear(&h);
    T_OK_ERR(firn_cred_apply(c, &req, &h, &err), &err);
    T_TRUE(strstr(firn_http_headers_get(&h, "Authorization"), "Credential=AKID2/") != NULL);
    T_EQ_INT(keys_calls, 2);
    firn_http_headers_clear(&h);
    T_OK_ERR(firn_cred_apply(c, &req, &h, &err), &err);
    T_EQ_INT(keys_calls, 2);
    firn_http_headers_deinit(&h);
    firn_cred_unref(c);
}

T_TEST(provider_needs_keys)
{
    unsetenv("AWS_ACCESS_KEY_ID");
    firn_sigv4_options o = {.service = "s3"};
    firn_cred *c = NULL;
    firn_err err = {0};
    T_EQ_INT(firn_cred_sigv4_new(&o, &c, &err), FIRN_ERR_CONFIG);
    setenv("AWS_ACCESS_KEY_ID", "envkey", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
    setenv("AWS_REGION", "ap-south-1", 1);
    T_OK_ERR(firn_cred_sigv4_new(&o, &c, &err), &err);
    firn_http_request req = {.method = FIRN_HTTP_GET, .url = "https://s3.example/b/k"};
    firn_http_headers h;
    firn_http_headers_init(&h);
    T_OK_ERR(firn_cred_apply(c, &req, &h, &err), &err);
    T_TRUE(strstr(firn_http_headers_get(&h, "Authorization"), "envkey/") != NULL);
    T_TRUE(strstr(firn_http_headers_get(&h, "Authorization"), "/ap-south-1/s3/") != NULL);
    firn_http_headers_deinit(&h);
    firn_cred_unref(c);
}

T_MAIN(T_CASE(aws_test_suite_vectors),
       T_CASE(get_utf8_path_single_encoded),
       T_CASE(s3_get_object_example),
       T_CASE(host_drops_default_port_and_userinfo),
       T_CASE(double_encoding_for_other_services),
       T_CASE(provider_refreshes_vended_keys),
       T_CASE(provider_needs_keys))
