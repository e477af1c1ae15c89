/* SPDX-License-Identifier: Apache-2.0 */
/* The REST catalog against a scripted server (faults and shapes a real server does not produce
 * on demand): a BigLake-style prefix with slashes taken verbatim from /v1/config, headers on
 * every request (x-goog-user-project included, /v1/config too), error documents mapped to
 * codes and one-line messages naming the table, 5xx on a commit as an unknown outcome, the
 * multi-table commit refused when not advertised, and vended GCS tokens used (and refreshed by
 * reloading the table) by the catalog's FileIO. */
#include "t.h"
#include "firn/catalog.h"
#include "unit/net/fake_http.h"

#include <stdlib.h>
#include <string.h>

#define MD_DOC                                                                                     \
    "{\"format-version\":2,\"table-uuid\":\"9c12d441-03fe-4693-9a96-a0705ddf69c1\","               \
    "\"location\":\"gs://bkt/sales/orders/abc123\",\"last-sequence-number\":0,"                    \
    "\"last-updated-ms\":1700000000000,\"last-column-id\":1,\"current-schema-id\":0,"              \
    "\"schemas\":[{\"type\":\"struct\",\"schema-id\":0,\"fields\":[{\"id\":1,\"name\":\"id\","     \
    "\"required\":true,\"type\":\"long\"}]}],\"default-spec-id\":0,\"partition-specs\":[{"         \
    "\"spec-id\":0,\"fields\":[]}],\"last-partition-id\":999,\"default-sort-order-id\":0,"         \
    "\"sort-orders\":[{\"order-id\":0,\"fields\":[]}],\"properties\":{},"                          \
    "\"current-snapshot-id\":-1,\"refs\":{},\"snapshots\":[],\"snapshot-log\":[],"                 \
    "\"metadata-log\":[]}"

#define CONFIG_DOC                                                                                 \
    "{\"defaults\":{\"prefix\":\"wrong\"},\"overrides\":{\"prefix\":"                              \
    "\"projects/p-1/catalogs/bkt\"},\"endpoints\":[\"GET /v1/{prefix}/namespaces\","               \
    "\"HEAD /v1/{prefix}/namespaces/{namespace}\","                                                \
    "\"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}\","                                  \
    "\"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}\"]}"

static firn_catalog *open_at(fake_server *s, firn_http_headers *h, firn_cred *cred)
{
    char uri[128];
    fake_url(s, "/iceberg/v1/restcatalog/", uri, sizeof(uri));
    firn_http_options ho = firn_http_options_default();
    ho.max_retries = 1;
    ho.backoff_base_ms = 1;
    firn_gcs_options gcs = {0};
    char ep[128];
    fake_url(s, "", ep, sizeof(ep));
    gcs.endpoint = ep;
    gcs.http = ho;
    firn_catalog_rest_opts o = {
        .uri = uri, .warehouse = "gs://bkt", .headers = h, .cred = cred, .http = &ho, .gcs = &gcs};
    firn_catalog *c = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_catalog_rest_open(&o, &c, &err), &err);
    return c;
}

/* The request line of request i ("GET /path HTTP/1.1"). */
static void request_line(fake_server *s, int i, char *out, size_t cap)
{
    const char *r = fake_request(s, i);
    size_t n = strcspn(r, "\r\n");
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), r);
}

T_TEST(biglake_prefix_headers_and_errors)
{
    static const fake_resp script[] = {
        {200, NULL, CONFIG_DOC},
        {204, NULL, NULL},
        {200, NULL, "{\"metadata-location\":\"gs://bkt/m.json\",\"metadata\":" MD_DOC "}"},
        {503, NULL, "{\"error\":{\"message\":\"backend busy\",\"type\":\"X\",\"code\":503}}"},
        {409, NULL,
         "{\"error\":{\"message\":\"Requirement failed: branch main has changed\\nmore\","
         "\"type\":\"CommitFailedException\",\"code\":409}}"},
        {400, NULL,
         "{\"error\":{\"message\":\"Cannot set last-sequence-number\",\"type\":"
         "\"BadRequestException\",\"code\":400}}"},
    };
    fake_server *s = fake_start(script, 6);
    firn_http_headers h;
    firn_http_headers_init(&h);
    firn_http_headers_set(&h, "x-goog-user-project", "proj-1");
    firn_cred *cred = firn_cred_bearer_new("tok-1");
    firn_catalog *c = open_at(s, &h, cred);
    firn_cred_unref(cred);
    firn_http_headers_deinit(&h);
    firn_err err = {0};

    bool exists = false;
    T_OK_ERR(firn_catalog_namespace_exists(c, "sales", &exists, &err), &err);
    T_TRUE(exists);
    firn_catalog_table t = {0};
    T_OK_ERR(firn_catalog_load_table(c, "sales", "orders", &t, &err), &err);
    T_EQ_STR(t.metadata->location, "gs://bkt/sales/orders/abc123");
    T_EQ_STR(t.metadata_location, "gs://bkt/m.json");

    firn_table_changes ch;
    firn_table_changes_init(&ch);
    firn_table_changes_require_uuid(&ch, t.metadata->table_uuid);
    firn_table_changes_set_property(&ch, "k", "v");
    firn_catalog_table out = {0};
    T_EQ_INT(firn_catalog_commit(c, "sales", "orders", &ch, &out, &err), FIRN_ERR_UNKNOWN_OUTCOME);
    T_TRUE(strstr(err.msg, "sales.orders") != NULL);
    T_EQ_INT(firn_catalog_commit(c, "sales", "orders", &ch, &out, &err), FIRN_ERR_CONFLICT);
    T_TRUE(strstr(err.msg, "branch main has changed (CommitFailedException, HTTP 409)") != NULL);
    T_TRUE(strchr(err.msg, '\n') == NULL);
    T_EQ_INT(firn_catalog_commit(c, "sales", "orders", &ch, &out, &err), FIRN_ERR_INVALID);
    T_EQ_STR(err.msg, "could not commit to table \"sales.orders\": Cannot set "
                      "last-sequence-number (BadRequestException, HTTP 400)");
    /* not advertised: refused without a request */
    firn_catalog_table_commit tc = {"sales", "orders", &ch};
    int before = fake_requests(s);
    T_EQ_INT(firn_catalog_commit_transaction(c, &tc, 1, &err), FIRN_ERR_UNSUPPORTED);
    T_EQ_INT(fake_requests(s), before);
    firn_table_changes_deinit(&ch);
    firn_catalog_table_deinit(&t);
    firn_catalog_free(c);

    T_EQ_INT(fake_requests(s), 6);
    char line[512];
    static const char *const want[] = {
        "GET /iceberg/v1/restcatalog/v1/config?warehouse=gs%3A%2F%2Fbkt HTTP/1.1",
        "HEAD /iceberg/v1/restcatalog/v1/projects/p-1/catalogs/bkt/namespaces/sales HTTP/1.1",
        "GET /iceberg/v1/restcatalog/v1/projects/p-1/catalogs/bkt/namespaces/sales/tables/orders "
        "HTTP/1.1",
        "POST /iceberg/v1/restcatalog/v1/projects/p-1/catalogs/bkt/namespaces/sales/tables/orders "
        "HTTP/1.1",
    };
    for (int i = 0; i < 6; i++) {
        request_line(s, i, line, sizeof(line));
        T_EQ_STR(line, want[i < 3 ? i : 3]);
        const char *r = fake_request(s, i);
        T_TRUE(fake_strcasestr(r, "\r\nx-goog-user-project: proj-1\r\n") != NULL);
        T_TRUE(fake_strcasestr(r, "\r\nAuthorization: Bearer tok-1\r\n") != NULL);
    }
    T_TRUE(fake_strcasestr(fake_request(s, 3), "\"type\":\"assert-table-uuid\"") != NULL);
    fake_stop(s);
}

T_TEST(nested_namespaces_and_pages)
{
    static const fake_resp script[] = {
        {200, NULL, "{\"overrides\":{\"rest-page-size\":\"2\"}}"},
        {200, NULL, "{\"namespaces\":[[\"a\",\"z\"],[\"a\",\"b\"]],\"next-page-token\":\"t 1\"}"},
        {200, NULL, "{\"namespaces\":[[\"a\",\"c\"]],\"next-page-token\":null}"},
        {200, NULL, "{\"identifiers\":[{\"namespace\":[\"a\",\"b\"],\"name\":\"t\"}]}"},
        {404, NULL, "{\"error\":{\"message\":\"nope\",\"type\":\"NoSuchTableException\"}}"},
        {409, NULL,
         "{\"error\":{\"message\":\"Namespace already exists: a.b\",\"type\":"
         "\"AlreadyExistsException\"}}"},
    };
    fake_server *s = fake_start(script, 6);
    firn_catalog *c = open_at(s, NULL, NULL);
    firn_err err = {0};
    firn_strlist l;
    T_OK_ERR(firn_catalog_list_namespaces(c, "a", &l, &err), &err);
    T_EQ_INT(l.count, 3);
    T_EQ_STR(l.items[0], "a.b");
    T_EQ_STR(l.items[1], "a.c");
    T_EQ_STR(l.items[2], "a.z");
    firn_strlist_deinit(&l);
    T_OK_ERR(firn_catalog_list_tables(c, "a.b", &l, &err), &err);
    T_EQ_INT(l.count, 1);
    T_EQ_STR(l.items[0], "t");
    firn_strlist_deinit(&l);
    /* HEAD: a server that lists no endpoints offers the core set */
    bool exists = true;
    T_OK_ERR(firn_catalog_table_exists(c, "a.b", "t", &exists, &err), &err);
    T_FALSE(exists);
    T_EQ_INT(firn_catalog_create_namespace(c, "a.b", NULL, &err), FIRN_ERR_EXISTS);
    firn_catalog_free(c);
    char line[512];
    request_line(s, 1, line, sizeof(line));
    T_EQ_STR(line, "GET /iceberg/v1/restcatalog/v1/namespaces?parent=a&pageSize=2 HTTP/1.1");
    request_line(s, 2, line, sizeof(line));
    T_EQ_STR(line, "GET /iceberg/v1/restcatalog/v1/namespaces?parent=a&pageSize=2&pageToken=t%201 "
                   "HTTP/1.1");
    request_line(s, 3, line, sizeof(line));
    T_EQ_STR(line, "GET /iceberg/v1/restcatalog/v1/namespaces/a%1Fb/tables?pageSize=2 HTTP/1.1");
    request_line(s, 4, line, sizeof(line));
    T_EQ_STR(line, "HEAD /iceberg/v1/restcatalog/v1/namespaces/a%1Fb/tables/t HTTP/1.1");
    T_TRUE(strstr(fake_request(s, 5), "{\"namespace\":[\"a\",\"b\"],\"properties\":{}}") != NULL);
    fake_stop(s);
}

T_TEST(vended_gcs_token_refreshed_by_reload)
{
    char soon[64], later[64];
    int64_t now_ms = firn_now_us() / 1000;
    snprintf(soon, sizeof(soon), "%lld", (long long)(now_ms + 30000));
    snprintf(later, sizeof(later), "%lld", (long long)(now_ms + 3600000));
    char first[4096], second[4096];
    snprintf(first, sizeof(first),
             "{\"metadata-location\":\"gs://bkt/m.json\",\"metadata\":" MD_DOC
             ",\"config\":{\"gcs.oauth2.token\":\"stale-token\"},\"storage-credentials\":["
             "{\"prefix\":\"gs://other\",\"config\":{\"gcs.oauth2.token\":\"wrong\"}},"
             "{\"prefix\":\"gs://bkt/sales\",\"config\":{\"gcs.oauth2.token\":\"vended-1\","
             "\"gcs.oauth2.token-expires-at\":\"%s\"}}]}",
             soon);
    snprintf(second, sizeof(second),
             "{\"metadata-location\":\"gs://bkt/m.json\",\"metadata\":" MD_DOC
             ",\"config\":{\"gcs.oauth2.token\":\"vended-2\",\"gcs.oauth2.token-expires-at\":"
             "\"%s\"}}",
             later);
    fake_resp script[] = {
        {200, NULL, "{}"},
        {200, NULL, first},
        {200, NULL, second}, /* the refresh: reload of the table */
        {200, NULL, "{\"name\":\"x\",\"size\":\"4\"}"},
    };
    fake_server *s = fake_start(script, 4);
    firn_http_headers h;
    firn_http_headers_init(&h);
    firn_http_headers_set(&h, "x-goog-user-project", "proj-1");
    firn_catalog *c = open_at(s, &h, NULL);
    firn_http_headers_deinit(&h);
    firn_err err = {0};
    firn_catalog_table t = {0};
    T_OK_ERR(firn_catalog_load_table(c, "sales", "orders", &t, &err), &err);
    firn_io *io = firn_catalog_rest_io(c);
    T_TRUE(io != NULL);
    T_OK_ERR(firn_io_write_all(io, "gs://bkt/sales/orders/abc123/data/x.parquet", "PAR1", 4, &err),
             &err);
    T_EQ_INT(fake_requests(s), 4);
    char line[512];
    request_line(s, 2, line, sizeof(line));
    T_EQ_STR(line, "GET /iceberg/v1/restcatalog/v1/namespaces/sales/tables/orders HTTP/1.1");
    const char *upload = fake_request(s, 3);
    T_TRUE(strstr(upload, "POST /upload/storage/v1/b/bkt/o?") == upload);
    T_TRUE(fake_strcasestr(upload, "\r\nAuthorization: Bearer vended-2\r\n") != NULL);
    T_TRUE(fake_strcasestr(upload, "x-goog-user-project") == NULL); /* catalog requests only */
    T_TRUE(fake_strcasestr(fake_request(s, 0), "\r\nx-goog-user-project: proj-1\r\n") != NULL);
    /* a location outside any table with vended credentials: no FileIO for an unknown scheme */
    T_EQ_INT(firn_io_write_all(io, "hdfs://x/y", "a", 1, &err), FIRN_ERR_UNSUPPORTED);
    firn_catalog_table_deinit(&t);
    firn_catalog_free(c);
    fake_stop(s);
}

T_MAIN(T_CASE(biglake_prefix_headers_and_errors),
       T_CASE(nested_namespaces_and_pages),
       T_CASE(vended_gcs_token_refreshed_by_reload))
