/* SPDX-License-Identifier: Apache-2.0 */
/* The BigLake destination of the README: the file parses to a REST catalog with Google auth and
 * the project id, and opening it (against a scripted stand-in for Google's token endpoint and
 * BigLake) signs a service-account JWT, takes the prefix from /v1/config and sends
 * x-goog-user-project and the Google token on every catalog request, /v1/config included. */
#include "engine/engine_int.h"
#include "t.h"
#include "unit/net/fake_http.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The README's destination.json, with the key file and (for the second test) the URI filled
 * in. */
#define BIGLAKE_DESTINATION                                                                        \
    "{\n"                                                                                          \
    "  \"catalog\": {\n"                                                                           \
    "    \"type\": \"rest\",\n"                                                                    \
    "    \"uri\": \"%s\",\n"                                                                       \
    "    \"warehouse\": \"gs://my-lake-bucket\",\n"                                                \
    "    \"auth\": \"google\",\n"                                                                  \
    "    \"google_credentials_file\": \"%s\",\n"                                                   \
    "    \"scope\": \"https://www.googleapis.com/auth/cloud-platform\",\n"                         \
    "    \"project_id\": \"my-project\",\n"                                                        \
    "    \"headers\": {\"X-Iceberg-Access-Delegation\": \"vended-credentials\"}\n"                 \
    "  },\n"                                                                                       \
    "  \"namespace\": \"{database}_{schema}\",\n"                                                  \
    "  \"readers\": [\"bigquery\"]\n"                                                              \
    "}\n"

static firn_rc parse_destination(firn_config *cfg, const char *uri, const char *key_file)
{
    char text[4096];
    snprintf(text, sizeof(text), BIGLAKE_DESTINATION, uri, key_file);
    firn_err err = {0};
    firn_rc rc =
        firn_config_parse(cfg, "destination", text, strlen(text), "destination.json", &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    return rc;
}

/* Writes a fresh service-account key whose token_uri is token_uri; returns its path. */
static void write_key(const char *token_uri, char *path, size_t cap)
{
    EVP_PKEY *k = EVP_RSA_gen(2048);
    T_TRUE(k != NULL);
    BIO *b = BIO_new(BIO_s_mem());
    T_TRUE(PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL) == 1);
    char *data = NULL;
    long n = BIO_get_mem_data(b, &data);
    firn_buf pem;
    firn_buf_init(&pem, 1 << 16);
    for (long i = 0; i < n; i++) {
        if (data[i] == '\n')
            T_OK(firn_buf_append_cstr(&pem, "\\n"));
        else
            T_OK(firn_buf_append(&pem, &data[i], 1));
    }
    snprintf(path, cap, "/tmp/firn-biglake-key-%d.json", (int)getpid());
    FILE *f = fopen(path, "w");
    T_TRUE(f != NULL);
    fprintf(f,
            "{\"type\":\"service_account\",\"project_id\":\"my-project\",\"private_key_id\":"
            "\"kid-1\",\"private_key\":\"%s\",\"client_email\":"
            "\"firn-writer@my-project.iam.gserviceaccount.com\",\"token_uri\":\"%s\"}",
            (const char *)pem.data, token_uri);
    fclose(f);
    firn_buf_deinit(&pem);
    BIO_free(b);
    EVP_PKEY_free(k);
}

T_TEST(readme_config_parses)
{
    firn_config cfg = {0};
    T_OK(parse_destination(&cfg, "https://biglake.googleapis.com/iceberg/v1/restcatalog",
                           "/etc/firn/firn-writer.json"));
    firn_err err = {0};
    T_OK_ERR(firn_config_resolve(&cfg, &err), &err);
    const firn_catalog_config *c = &cfg.destination.catalog;
    T_EQ_INT(c->kind, FIRN_CATALOG_REST);
    T_EQ_STR(c->uri, "https://biglake.googleapis.com/iceberg/v1/restcatalog");
    T_EQ_STR(c->warehouse, "gs://my-lake-bucket");
    T_EQ_INT(c->auth, FIRN_REST_AUTH_GOOGLE);
    T_EQ_STR(c->google_credentials_file, "/etc/firn/firn-writer.json");
    T_EQ_STR(c->project_id, "my-project");
    T_EQ_STR(firn_kvlist_get(&c->headers, "X-Iceberg-Access-Delegation"), "vended-credentials");
    T_EQ_INT(cfg.destination.format_version, 2);
    T_EQ_INT(cfg.destination.delete_mode, FIRN_DELETE_POSITION);
    firn_config_free(&cfg);
}

T_TEST(requests_carry_project_and_google_token)
{
    static const fake_resp script[] = {
        {200, NULL,
         "{\"access_token\":\"ya29.firn\",\"expires_in\":3599,\"token_type\":\"Bearer\"}"},
        {200, NULL,
         "{\"defaults\":{},\"overrides\":{\"prefix\":\"projects/my-project/catalogs/"
         "my-lake-bucket\"},\"endpoints\":[\"GET /v1/{prefix}/namespaces\","
         "\"POST /v1/{prefix}/namespaces\",\"HEAD /v1/{prefix}/namespaces/{namespace}\"]}"},
        {204, NULL, NULL},
        {200, NULL, "{\"namespace\":[\"shop_public\"],\"properties\":{}}"},
    };
    fake_server *s = fake_start(script, 4);
    char token_uri[128], uri[160], key[256];
    fake_url(s, "/token", token_uri, sizeof(token_uri));
    fake_url(s, "/iceberg/v1/restcatalog", uri, sizeof(uri));
    write_key(token_uri, key, sizeof(key));
    firn_config cfg = {0};
    T_OK(parse_destination(&cfg, uri, key));
    firn_catalog *cat = NULL;
    firn_io *io = NULL;
    bool owned = true;
    firn_err err = {0};
    T_OK_ERR(firn__engine_open_destination(&cfg.destination, &cat, &io, &owned, &err), &err);
    T_TRUE(io != NULL && !owned);
    T_EQ_STR(firn_catalog_kind_name(cat), "rest");
    bool exists = false;
    T_OK_ERR(firn_catalog_namespace_exists(cat, "shop_public", &exists, &err), &err);
    T_TRUE(exists);
    T_OK_ERR(firn_catalog_create_namespace(cat, "shop_public", NULL, &err), &err);
    firn_catalog_free(cat);
    T_EQ_INT(fake_requests(s), 4);
    T_TRUE(strstr(fake_request(s, 0), "POST /token ") == fake_request(s, 0));
    T_TRUE(strstr(fake_request(s, 0), "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3A"
                                      "jwt-bearer") != NULL);
    static const char *const lines[] = {
        "GET /iceberg/v1/restcatalog/v1/config?warehouse=gs%3A%2F%2Fmy-lake-bucket ",
        "HEAD /iceberg/v1/restcatalog/v1/projects/my-project/catalogs/my-lake-bucket/namespaces/"
        "shop_public ",
        "POST /iceberg/v1/restcatalog/v1/projects/my-project/catalogs/my-lake-bucket/namespaces ",
    };
    for (int i = 1; i < 4; i++) {
        const char *r = fake_request(s, i);
        T_TRUE(strncmp(r, lines[i - 1], strlen(lines[i - 1])) == 0);
        T_TRUE(fake_strcasestr(r, "\r\nx-goog-user-project: my-project\r\n") != NULL);
        T_TRUE(fake_strcasestr(r, "\r\nAuthorization: Bearer ya29.firn\r\n") != NULL);
    }
    fake_stop(s);
    firn_config_free(&cfg);
    remove(key);
}

T_MAIN(T_CASE(readme_config_parses), T_CASE(requests_carry_project_and_google_token))
