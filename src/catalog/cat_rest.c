/* SPDX-License-Identifier: Apache-2.0 */
/* The Iceberg REST catalog client (open-api/rest-catalog-open-api.yaml, ICEBERG.md §G-I):
 * configuration handshake, namespaces, tables, single- and multi-table commits, error documents
 * mapped to firn codes, and vended storage credentials handed to the catalog's FileIO. */
#include "cat_int.h"
#include "cat_rest_int.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define URL_MAX_BYTES      (64u * 1024u)
#define BODY_MAX_BYTES     (64u * 1024u * 1024u)
#define LIST_MAX_PAGES     100000
#define DEFAULT_SEPARATOR  "%1F"
#define ENDPOINT_COMMIT_TX "POST /v1/{prefix}/transactions/commit"
#define ENDPOINT_CREDS     "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials"
#define ENDPOINT_NS_HEAD   "HEAD /v1/{prefix}/namespaces/{namespace}"
#define ENDPOINT_TBL_HEAD  "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}"

typedef struct rest_catalog {
    firn_catalog base;
    char *name;
    char *uri; /* without trailing '/' */
    char *warehouse;
    char *prefix; /* NULL: no prefix segment */
    char *sep;    /* namespace separator as sent in paths */
    firn_http *http;
    firn_cred *cred;
    firn_http_headers headers;
    firn_props config; /* effective: defaults, client properties, overrides */
    firn_strlist endpoints;
    bool has_endpoints; /* the server listed its endpoints */
    bool idempotency;   /* the server advertised idempotency-key-lifetime */
    long page_size;     /* 0: do not ask for pages */
    firn__rest_io *io;
} rest_catalog;

/* Request flags. */
enum {
    REQ_MUTATION = 1u << 0,    /* changes state: Idempotency-Key when advertised */
    REQ_ONCE = 1u << 1,        /* never resend: failures after sending are unknown outcomes */
    REQ_DELEGATION = 1u << 2,  /* may receive vended credentials */
    REQ_ALLOW_EMPTY = 1u << 3, /* an empty 2xx body is fine */
};

/* ------------------------------------------------------------------------------------------------
 * URLs
 * ----------------------------------------------------------------------------------------------*/

static bool has_endpoint(const rest_catalog *c, const char *endpoint)
{
    return !c->has_endpoints || firn_strlist_contains(&c->endpoints, endpoint);
}

/* "<uri>/v1/<prefix>/" into b (reset first). */
static firn_rc url_root(const rest_catalog *c, firn_buf *b)
{
    firn_buf_reset(b);
    FIRN_TRY(firn_buf_appendf(b, "%s/v1/", c->uri));
    if (c->prefix)
        FIRN_TRY(firn_buf_appendf(b, "%s/", c->prefix));
    return FIRN_OK;
}

/* Appends the namespace levels of ns (dotted), each percent-encoded, joined by the separator. */
static firn_rc append_ns(const rest_catalog *c, firn_buf *b, const char *ns)
{
    const char *p = ns;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        FIRN_TRY(firn_url_encode(b, p, n, false));
        if (!dot)
            return FIRN_OK;
        FIRN_TRY(firn_buf_append_cstr(b, c->sep));
        p = dot + 1;
    }
}

static firn_rc url_ns(const rest_catalog *c, firn_buf *b, const char *ns, firn_err *err)
{
    firn_rc rc = url_root(c, b);
    if (!rc)
        rc = firn_buf_append_cstr(b, "namespaces/");
    if (!rc)
        rc = append_ns(c, b, ns);
    if (rc)
        return firn_err_set(err, rc, "URL of namespace \"%s\" is too long", ns);
    return FIRN_OK;
}

static firn_rc
url_table(const rest_catalog *c, firn_buf *b, const char *ns, const char *name, firn_err *err)
{
    FIRN_TRY(url_ns(c, b, ns, err));
    firn_rc rc = firn_buf_append_cstr(b, "/tables/");
    /* "." and ".." stay themselves in percent-encoding, and a server that normalizes the path
     * would then act on the namespace: encode their dots. */
    if (!rc && (strcmp(name, ".") == 0 || strcmp(name, "..") == 0))
        rc = firn_buf_append_cstr(b, name[1] ? "%2E%2E" : "%2E");
    else if (!rc)
        rc = firn_url_encode(b, name, strlen(name), false);
    if (rc)
        return firn_err_set(err, rc, "URL of table \"%s.%s\" is too long", ns, name);
    return FIRN_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Requests and error documents
 * ----------------------------------------------------------------------------------------------*/

/* Copies the first line of s into out (cap bytes), control characters as spaces. */
static void one_line(char *out, size_t cap, const char *s)
{
    size_t n = 0;
    for (; *s && *s != '\n' && *s != '\r' && n + 1 < cap; s++)
        out[n++] = (unsigned char)*s < 0x20 ? ' ' : *s;
    out[firn_utf8_whole_len(out, n)] = '\0'; /* cut inside a UTF-8 sequence: drop it */
}

/* Rewrites err for a failed request: "could not <what>: <server message> (<type>, HTTP <n>)"
 * when the body is a REST error document, else "could not <what>: <http layer message>".
 * Returns rc. */
static firn_rc
rest_fail(firn_rc rc, const firn_http_response *resp, firn_err *err, const char *fmt, ...)
    FIRN_PRINTF(4, 5);

static firn_rc
rest_fail(firn_rc rc, const firn_http_response *resp, firn_err *err, const char *fmt, ...)
{
    char what[512], detail[FIRN_ERR_MSG_MAX + 64]; /* the message is cut at the first size */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    const char *msg = NULL, *type = NULL;
    json_t *doc = NULL;
    if (resp && resp->status >= 400 && resp->body.len > 0) {
        doc = json_loadb((const char *)resp->body.data, resp->body.len, 0, NULL);
        json_t *e = json_object_get(doc, "error");
        msg = json_string_value(json_object_get(e, "message"));
        type = json_string_value(json_object_get(e, "type"));
    }
    if (msg) {
        char line[FIRN_ERR_MSG_MAX];
        one_line(line, sizeof(line), msg);
        snprintf(detail, sizeof(detail), "%s (%s%sHTTP %ld)", line, type ? type : "",
                 type ? ", " : "", resp->status);
    } else {
        one_line(detail, sizeof(detail), err && err->msg[0] ? err->msg : firn_rc_message(rc));
    }
    json_decref(doc);
    int64_t retry_after_ms = err ? err->retry_after_ms : 0; /* the server's hint stays */
    firn_rc_ignore(firn_err_set(err, rc, "could not %s: %s", what, detail));
    if (err)
        err->retry_after_ms = retry_after_ms;
    return rc;
}

/* Sends one request to the catalog. body NULL: none. On FIRN_OK *out_doc (NULL accepted) holds
 * the parsed JSON body (NULL for an empty one). On error resp keeps the error document. */
static firn_rc rest_send(rest_catalog *c,
                         firn_http_method method,
                         const char *url,
                         const firn_buf *body,
                         unsigned flags,
                         firn_http_response *resp,
                         json_t **out_doc,
                         firn_err *err)
{
    if (out_doc)
        *out_doc = NULL;
    firn_http_headers h;
    firn_http_headers_init(&h);
    firn_http_headers_copy(&h, &c->headers);
    if (!(flags & REQ_DELEGATION))
        firn_http_headers_remove(&h, "X-Iceberg-Access-Delegation");
    if (body)
        firn_http_headers_set(&h, "Content-Type", "application/json");
    if ((flags & REQ_MUTATION) && c->idempotency) {
        uint8_t raw[16];
        char key[37];
        firn_uuid_v4(raw);
        firn_uuid_format(raw, key);
        firn_http_headers_set(&h, "Idempotency-Key", key);
    }
    firn_http_request req = {0};
    req.method = method;
    req.url = url;
    req.headers = &h;
    req.body = body ? body->data : NULL;
    req.body_len = body ? body->len : 0;
    req.cred = c->cred;
    req.not_idempotent = (flags & REQ_ONCE) != 0;
    firn_rc rc = firn_http_do(c->http, &req, resp, err);
    firn_http_headers_deinit(&h);
    if (rc || !out_doc || method == FIRN_HTTP_HEAD || resp->body.len == 0)
        return rc;
    json_error_t jerr;
    *out_doc = json_loadb((const char *)resp->body.data, resp->body.len, 0, &jerr);
    char brief[FIRN_JSON_ERROR_BRIEF_MAX], safe[FIRN_URL_REDACTED_MAX];
    if (!*out_doc)
        return firn_err_set(err, FIRN_ERR_PROTOCOL, "catalog sent malformed JSON for %s %s: %s",
                            firn_http_method_name(method), firn_url_redact(safe, sizeof(safe), url),
                            firn_json_error_brief(brief, sizeof(brief), jerr.text, NULL, 0, 0));
    return FIRN_OK;
}

/* ------------------------------------------------------------------------------------------------
 * JSON helpers
 * ----------------------------------------------------------------------------------------------*/

/* Dotted name of a JSON array of namespace levels; NULL when malformed. Owned. */
static char *ns_from_json(const json_t *levels)
{
    if (!json_is_array(levels) || json_array_size(levels) == 0)
        return NULL;
    firn_buf b;
    firn_buf_init(&b, URL_MAX_BYTES);
    for (size_t i = 0; i < json_array_size(levels); i++) {
        const char *s = json_string_value(json_array_get(levels, i));
        if (!s || firn_buf_appendf(&b, "%s%s", i ? "." : "", s)) {
            firn_buf_deinit(&b);
            return NULL;
        }
    }
    return (char *)firn_buf_take(&b, NULL);
}

/* JSON array of the levels of dotted ns. */
static json_t *ns_to_json(const char *ns)
{
    json_t *a = json_array();
    const char *p = ns;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        json_array_append_new(a, json_stringn(p, n));
        if (!dot)
            return a;
        p = dot + 1;
    }
}

static int dump_cb(const char *p, size_t n, void *ctx)
{
    return firn_buf_append(ctx, p, n) ? -1 : 0;
}

/* Appends the compact JSON text of v to b. */
static firn_rc json_text(const json_t *v, firn_buf *b)
{
    if (json_dump_callback(v, dump_cb, b, JSON_COMPACT | JSON_ENCODE_ANY) != 0)
        return FIRN_ERR_TOO_LARGE;
    return FIRN_OK;
}

/* Adds the string members of obj (others as their JSON text) to props. */
static void props_from_json(firn_props *props, const json_t *obj)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v)
    {
        if (json_is_string(v)) {
            firn_props_set(props, k, json_string_value(v));
        } else if (!json_is_null(v)) {
            firn_buf b;
            firn_buf_init(&b, BODY_MAX_BYTES);
            if (json_text(v, &b) == FIRN_OK)
                firn_props_set(props, k, (const char *)b.data);
            firn_buf_deinit(&b);
        }
    }
}

static json_t *props_to_json(const firn_props *props)
{
    json_t *o = json_object();
    for (size_t i = 0; props && i < props->n; i++)
        json_object_set_new(o, props->keys[i], json_string(props->vals[i]));
    return o;
}

/* Serializes doc (reference stolen) into b (reset first). */
static firn_rc dump_json(json_t *doc, firn_buf *b, firn_err *err)
{
    firn_buf_reset(b);
    firn_rc rc = json_text(doc, b);
    json_decref(doc);
    if (rc)
        return firn_err_set(err, rc, "request body is too large");
    return FIRN_OK;
}

/* Parses a JSON document member (a schema, spec, metadata) through its text form. */
typedef firn_rc (*from_text_fn)(const char *json, size_t len, void *out, firn_err *err);

static firn_rc parse_member(const json_t *v, from_text_fn fn, void *out, firn_err *err)
{
    firn_buf b;
    firn_buf_init(&b, BODY_MAX_BYTES);
    firn_rc rc = json_text(v, &b);
    if (rc)
        rc = firn_err_set(err, rc, "JSON member is too large");
    else
        rc = fn((const char *)b.data, b.len, out, err);
    firn_buf_deinit(&b);
    return rc;
}

static firn_rc metadata_from_text(const char *json, size_t len, void *out, firn_err *err)
{
    return firn_table_metadata_from_json(json, len, (firn_table_metadata **)out, err);
}

/* ------------------------------------------------------------------------------------------------
 * Vended storage credentials (LoadTableResult "config" and "storage-credentials")
 * ----------------------------------------------------------------------------------------------*/

/* Flattens the storage settings for location: the table config, then the config of the
 * storage-credentials entry with the longest prefix of location (any entry when none
 * matches). */
static void creds_from_result(const json_t *doc, const char *location, firn_props *out)
{
    firn_props_init(out);
    props_from_json(out, json_object_get(doc, "config"));
    const json_t *list = json_object_get(doc, "storage-credentials");
    const json_t *best = NULL;
    size_t best_len = 0;
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *e = json_array_get(list, i);
        const char *prefix = json_string_value(json_object_get(e, "prefix"));
        size_t n = prefix ? strlen(prefix) : 0;
        bool match = prefix && location && strncmp(location, prefix, n) == 0;
        if (!best || (match && n >= best_len)) {
            best = e;
            best_len = match ? n : 0;
        }
    }
    if (best)
        props_from_json(out, json_object_get(best, "config"));
}

/* Reads a LoadTableResult into out and hands its credentials to the FileIO. */
static firn_rc take_load_result(rest_catalog *c,
                                const char *ns,
                                const char *name,
                                const json_t *doc,
                                firn_catalog_table *out,
                                firn_err *err)
{
    const json_t *md = json_object_get(doc, "metadata");
    const char *loc = json_string_value(json_object_get(doc, "metadata-location"));
    if (!json_is_object(md))
        return firn_err_set(err, FIRN_ERR_PROTOCOL, "catalog sent no metadata for table \"%s.%s\"",
                            ns, name);
    firn_table_metadata *m = NULL;
    firn_rc rc = parse_member(md, metadata_from_text, &m, err);
    if (rc) {
        firn_err_context(err, "while reading table \"%s.%s\" from the catalog", ns, name);
        return rc;
    }
    firn_props creds;
    creds_from_result(doc, m->location, &creds);
    firn__rest_io_set_table(c->io, ns, name, m->location, &creds);
    firn_props_deinit(&creds);
    out->metadata = m;
    out->metadata_location = firn_strdup(loc ? loc : "");
    return FIRN_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Namespaces
 * ----------------------------------------------------------------------------------------------*/

static firn_rc
rest_create_namespace(firn_catalog *base, const char *ns, const firn_props *props, firn_err *err)
{
    rest_catalog *c = (rest_catalog *)base;
    firn_buf url, body;
    firn_buf_init(&url, URL_MAX_BYTES);
    firn_buf_init(&body, BODY_MAX_BYTES);
    firn_http_response resp;
    firn_http_response_init(&resp);
    json_t *req = json_object();
    json_object_set_new(req, "namespace", ns_to_json(ns));
    json_object_set_new(req, "properties", props_to_json(props));
    firn_rc rc = dump_json(req, &body, err);
    if (!rc && url_root(c, &url) == FIRN_OK && firn_buf_append_cstr(&url, "namespaces") == FIRN_OK)
        rc = rest_send(c, FIRN_HTTP_POST, (const char *)url.data, &body, REQ_MUTATION, &resp, NULL,
                       err);
    if (rc == FIRN_ERR_CONFLICT)
        rc = rest_fail(FIRN_ERR_EXISTS, &resp, err, "create namespace \"%s\"", ns);
    else if (rc)
        rc = rest_fail(rc, &resp, err, "create namespace \"%s\"", ns);
    firn_http_response_deinit(&resp);
    firn_buf_deinit(&body);
    firn_buf_deinit(&url);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One page of a listing: appends the names of member `key` of the reply to out and stores the
 * next page token (owned, NULL at the end). */
typedef char *(*list_item_fn)(const json_t *item);

static char *item_namespace(const json_t *item)
{
    return ns_from_json(item);
}

static char *item_table(const json_t *item)
{
    const char *name = json_string_value(json_object_get(item, "name"));
    return name ? firn_strdup(name) : NULL;
}

static firn_rc list_pages(rest_catalog *c,
                          firn_buf *url,
                          const char *key,
                          list_item_fn item,
                          firn_strlist *out,
                          const char *what,
                          firn_err *err)
{
    size_t base_len = url->len;
    bool has_query = memchr(url->data, '?', url->len) != NULL;
    char *token = NULL;
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_rc rc = FIRN_OK;
    for (int page = 0; page < LIST_MAX_PAGES && !rc; page++) {
        firn_buf_truncate(url, base_len);
        char sepc = has_query ? '&' : '?';
        if (c->page_size > 0) {
            rc = firn_buf_appendf(url, "%cpageSize=%ld", sepc, c->page_size);
            sepc = '&';
        }
        if (!rc && token) {
            rc = firn_buf_appendf(url, "%cpageToken=", sepc);
            if (!rc)
                rc = firn_url_encode(url, token, strlen(token), false);
        }
        if (rc) {
            rc = firn_err_set(err, rc, "could not %s: URL too long", what);
            break;
        }
        json_t *doc = NULL;
        rc = rest_send(c, FIRN_HTTP_GET, (const char *)url->data, NULL, 0, &resp, &doc, err);
        if (rc) {
            rc = rest_fail(rc, &resp, err, "%s", what);
            break;
        }
        const json_t *items = json_object_get(doc, key);
        for (size_t i = 0; i < json_array_size(items); i++) {
            char *s = item(json_array_get(items, i));
            if (s)
                firn_strlist_push(out, s);
            firn_free(s);
        }
        const char *next = json_string_value(json_object_get(doc, "next-page-token"));
        firn_free(token);
        token = next && *next && json_array_size(items) > 0 ? firn_strdup(next) : NULL;
        json_decref(doc);
        if (!token)
            break;
    }
    firn_free(token);
    firn_http_response_deinit(&resp);
    if (!rc && out->count > 1)
        qsort(out->items, out->count, sizeof(*out->items), cmp_str);
    return rc;
}

static firn_rc
rest_list_namespaces(firn_catalog *base, const char *parent, firn_strlist *out, firn_err *err)
{
    rest_catalog *c = (rest_catalog *)base;
    firn_buf url;
    firn_buf_init(&url, URL_MAX_BYTES);
    firn_rc rc = url_root(c, &url);
    if (!rc)
        rc = firn_buf_append_cstr(&url, "namespaces");
    if (!rc && parent) {
        rc = firn_buf_append_cstr(&url, "?parent=");
        if (!rc)
            rc = append_ns(c, &url, parent);
    }
    char what[300];
    snprintf(what, sizeof(what), "list namespaces%s%s%s", parent ? " of \"" : "",
             parent ? parent : "", parent ? "\"" : "");
    if (rc)
        rc = firn_err_set(err, rc, "could not %s: URL too long", what);
    else
        rc = list_pages(c, &url, "namespaces", item_namespace, out, what, err);
    firn_buf_deinit(&url);
    return rc;
}

/* HEAD (when advertised) or GET on url: *out tells whether it exists (404: false). */
static firn_rc exists_at(rest_catalog *c,
                         const char *url,
                         bool head,
                         bool *out,
                         const char *what,
                         const char *ident,
                         firn_err *err)
{
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_rc rc =
        rest_send(c, head ? FIRN_HTTP_HEAD : FIRN_HTTP_GET, url, NULL, 0, &resp, NULL, err);
    *out = rc == FIRN_OK;
    if (rc == FIRN_ERR_NOT_FOUND)
        rc = FIRN_OK;
    else if (rc)
        rc = rest_fail(rc, &resp, err, "check whether %s \"%s\" exists", what, ident);
    firn_http_response_deinit(&resp);
    return rc;
}

static firn_rc rest_namespace_exists(firn_catalog *base, const char *ns, bool *out, firn_err *err)
{
    rest_catalog *c = (rest_catalog *)base;
    firn_buf url;
    firn_buf_init(&url, URL_MAX_BYTES);
    firn_rc rc = url_ns(c, &url, ns, err);
    if (!rc)
        rc = exists_at(c, (const char *)url.data, has_endpoint(c, ENDPOINT_NS_HEAD), out,
                       "namespace", ns, err);
    firn_buf_deinit(&url);
    return rc;
}

static firn_rc
rest_load_namespace(firn_catalog *base, const char *ns, firn_props *out, firn_err *err)
{
    rest_catalog *c = (rest_catalog *)base;
    firn_buf url;
    firn_buf_init(&url, URL_MAX_BYTES);
    firn_http_response resp;
    firn_http_response_init(&resp);
    json_t *doc = NULL;
    firn_rc rc = url_ns(c, &url, ns, err);
    if (!rc)
        rc = rest_send(c, FIRN_HTTP_GET, (const char *)url.data, NULL, 0, &resp, &doc, err);
    if (rc)
        rc = rest_fail(rc, &resp, err, "load namespace \"%s\"", ns);
    else
        props_from_json(out, json_object_get(doc, "properties"));
    json_decref(doc);
    firn_http_response_deinit(&resp);
    firn_buf_deinit(&url);
    return rc;
}

static firn_rc rest_update_namespace(firn_catalog *base,
                                     const char *ns,
                                     const firn_props *updates,
                                     const char *const *removals,
                                     size_t n_removals,
                                     firn_err *err)
{
    rest_catalog *c = (rest_catalog *)base;
    firn_buf url, body;
    firn_buf_init(&url, URL_MAX_BYTES);
    firn_buf_init(&body, BODY_MAX_BYTES);
    firn_http_response resp;
    firn_http_response_init(&resp);
    json_t *req = json_object();
    json_t *rem = json_array();
    for (size_t i = 0; i < n_removals; i++)
        json_array_append_new(rem, json_string(removals[i]));
    json_object_set_new(req, "removals", rem);
    json_object_set_new(req, "updates", props_to_json(updates));
    firn_rc rc = dump_json(req, &body, err);
    if (!rc)
        rc = url_ns(c, &url, ns, err);
    if (!rc && firn_buf_append_cstr(&url, "/properties")) /* cannot pass the URL limit */
        rc = firn_err_set(err, FIRN_ERR_TOO_LARGE, "URL of namespace \"%s\" is too long", ns);
    if (!rc) {
        rc = rest_send(c, FIRN_HTTP_POST, (const char *)url.data, &body, REQ_MUTATION, &resp, NULL,
                       err);
        if (rc)
            rc = rest_fail(rc, &resp, err, "update the properties of namespace \"%s\"", ns);
    }
    firn_http_response_deinit(&resp);
    firn_buf_deinit(&body);
    firn_buf_deinit(&url);
    return rc;
}

static firn_rc rest_drop_namespace(firn_catalog *base, const char *ns, firn_err *err)
{
    rest_catalog *c = (rest_catalog *)base;
    firn_buf url;
    firn_buf_init(&url, URL_MAX_BYTES);
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_rc rc = url_ns(c, &url, ns, err);
    if (!rc)
        rc = rest_send(c, FIRN_HTTP_DELETE, (const char *)url.data, NULL, REQ_MUTATION, &resp, NULL,
                       err);
    /* Iceberg answers NamespaceNotEmptyException with 409 */
    if (rc == FIRN_ERR_CONFLICT)
        rc = rest_fail(FIRN_ERR_INVALID, &resp, err, "drop namespace \"%s\"", ns);
    else if (rc)
        rc = rest_fail(rc, &resp, err, "drop namespace \"%s\"", ns);
    firn_http_response_deinit(&resp);
    firn_buf_deinit(&url);
    return rc;
}

/* ------------------------------------------------------------------------------------------------
 * Tables
 * ----------------------------------------------------------------------------------------------*/

static firn_rc member_json(const char *name,
                           firn_rc (*fn)(const void *, firn_buf *, firn_err *),
                           const void *v,
                           json_t *into,
                           firn_err *err)
{
    firn_buf b;
    firn_buf_init(&b, BODY_MAX_BYTES);
    firn_rc rc = fn(v, &b, err);
    json_t *doc = rc ? NULL : json_loadb((const char *)b.data, b.len, 0, NULL);
    firn_buf_deinit(&b);
    if (rc)
        return rc;
    if (!doc)
        return firn_err_set(err, FIRN_ERR_INTERNAL, "could not re-read the %s of a new table",
                            name);
    json_object_set_new(into, name, doc);
    return FIRN_OK;
}

static firn_rc schema_json(const void *v, firn_buf *b, firn_err *err)
{
    return firn_schema_to_json(v, b, err);
}

static firn_rc spec_json(const void *v, firn_buf *b, firn_err *err)
{
    return firn_partition_spec_to_json(v, b, err);
}

static firn_rc order_json(const void *v, firn_buf *b, firn_err *err)
{
    return firn_sort_order_to_json(v, b, err);
}

/* CreateTableRequest (ICEBERG.md §I.1); format-version travels as a property. */
static firn_rc
create_request(const char *name, const firn_table_create *o, firn_buf *body, firn_err *err)
{
    json_t *req = json_object();
    json_object_set_new(req, "name", json_string(name));
    firn_rc rc = member_json("schema", schema_json, o->schema, req, err);
    if (!rc && o->spec)
        rc = member_json("partition-spec", spec_json, o->spec, req, err);
    if (!rc && o->sort_order)
        rc = member_json("write-order", order_json, o->sort_order, req, err);
    if (rc) {
        json_decref(req);
        return rc;
    }
    if (o->location)
        json_object_set_new(req, "location", json_string(o->location));
    json_object_set_new(req, "stage-create", json_false());
    json_t *props = props_to_json(o->properties);
    if (o->format_version > 0) {
        char v[16];
        snprintf(v, sizeof(v), "%d", o->format_version);
        json_object_set_new(props, "format-version", json_string(v));
    } else if (!json_object_get(props, "format-version")) {
        json_object_set_new(props, "format-version", json_string("2"));
    }
    json_object_set_new(req, "properties", props);
    return dump_json(req, body, err);
}

/* A table whose name is no safe folder name ("../x"): servers place a table at
 * <namespace location>/<name> as it is, so firn asks for the location with the name encoded as
 * the SQL catalog does; without a namespace location it cannot, and refuses. */
static firn_rc
safe_location(firn_catalog *base, const char *ns, const char *name, char **out, firn_err *err)
{
    firn_props props;
    FIRN_TRY(firn_catalog_load_namespace(base, ns, &props, err));
    const char *nsloc = firn_props_get(&props, "location");
    firn_rc rc = FIRN_OK;
    if (!nsloc || !nsloc[0]) {
        rc = firn_err_set(err, FIRN_ERR_CONFIG,
                          "cannot create table \"%s.%s\": its name is not a safe folder name and "
                          "namespace \"%s\" has no location to place it under; set the "
                          "namespace's location property or choose a target_table",
                          ns, name, ns);
    } else {
        firn_buf b;
        firn_buf_init(&b, URL_MAX_BYTES);
        size_t n = strlen(nsloc);
        while (n > 0 && nsloc[n - 1] == '/')
            n--;
        rc = firn_buf_appendf(&b, "%.*s/", (int)n, nsloc);
        rc = rc ? rc : firn__cat_append_segment(&b, name);
        if (rc)
            rc = firn_err_set(err, rc, "location of table \"%s.%s\" is too long", ns, name);
        *out = rc ? NULL : (char *)firn_buf_take(&b, NULL);
        firn_buf_deinit(&b);
    }
    firn_props_deinit(&props);
    return rc;
}

static firn_rc rest_create_table(firn_catalog *base,
                                 const char *ns,
                                 const char *name,
                                 const firn_table_create *opts,
                                 firn_catalog_table *out,
                                 firn_err *err)
{
    rest_catalog *c = (rest_catalog *)base;
    char *location = NULL;
    firn_table_create o = *opts;
    if (!o.location && firn__cat_segment_needs_encoding(name)) {
        FIRN_TRY(safe_location(base, ns, name, &location, err));
        o.location = location;
    }
    firn_buf url, body;
    firn_buf_init(&url, URL_MAX_BYTES);
    firn_buf_init(&body, BODY_MAX_BYTES);
    firn_http_response resp;
    firn_http_response_init(&resp);
    json_t *doc = NULL;
    firn_rc rc = create_request(name, &o, &body, err);
    firn_free(location);
    if (!rc)
        rc = url_ns(c, &url, ns, err);
    if (!rc && firn_buf_append_cstr(&url, "/tables"))
        rc = firn_err_set(err, FIRN_ERR_TOO_LARGE, "URL of namespace \"%s\" is too long", ns);
    if (!rc) {
        /* A lost reply is safe to resend: the retry then gets 409 and the caller loads. */
        rc = rest_send(c, FIRN_HTTP_POST, (const char *)url.data, &body,
                       REQ_MUTATION | REQ_DELEGATION, &resp, &doc, err);
        if (rc == FIRN_ERR_CONFLICT)
            rc = rest_fail(FIRN_ERR_EXISTS, &resp, err, "create table \"%s.%s\"", ns, name);
        else if (rc)
            rc = rest_fail(rc, &resp, err, "create table \"%s.%s\"", ns, name);
    }
    if (!rc)
        rc = take_load_result(c, ns, name, doc, out, err);
    json_decref(doc);
    firn_http_response_deinit(&resp);
    firn_buf_deinit(&body);
    firn_buf_deinit(&url);
    return rc;
}

/* GET the table; *out_doc receives the LoadTableResult. */
static firn_rc
get_table(rest_catalog *c, const char *ns, const char *name, json_t **out_doc, firn_err *err)
{
    firn_buf url;
    firn_buf_init(&url, URL_MAX_BYTES);
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_rc rc = url_table(c, &url, ns, name, err);
    if (!rc)
        rc = rest_send(c, FIRN_HTTP_GET, (const char *)url.data, NULL, REQ_DELEGATION, &resp,
                       out_doc, err);
    if (rc)
        rc = rest_fail(rc, &resp, err, "load table \"%s.%s\"", ns, name);
    else if (!*out_doc)
        rc = firn_err_set(err, FIRN_ERR_PROTOCOL, "catalog sent an empty reply for table \"%s.%s\"",
                          ns, name);
    firn_http_response_deinit(&resp);
    firn_buf_deinit(&url);
    return rc;
}

static firn_rc rest_load_table(
    firn_catalog *base, const char *ns, const char *name, firn_catalog_table *out, firn_err *err)
{
    rest_catalog *c = (rest_catalog *)base;
    json_t *doc = NULL;
    firn_rc rc = get_table(c, ns, name, &doc, err);
    if (!rc)
        rc = take_load_result(c, ns, name, doc, out, err);
    json_decref(doc);
    return rc;
}

static firn_rc
rest_table_exists(firn_catalog *base, const char *ns, const char *name, bool *out, firn_err *err)
{
    rest_catalog *c = (rest_catalog *)base;
    firn_buf url;
    firn_buf_init(&url, URL_MAX_BYTES);
    char ident[600];
    snprintf(ident, sizeof(ident), "%s.%s", ns, name);
    firn_rc rc = url_table(c, &url, ns, name, err);
    if (!rc)
        rc = exists_at(c, (const char *)url.data, has_endpoint(c, ENDPOINT_TBL_HEAD), out, "table",
                       ident, err);
    firn_buf_deinit(&url);
    return rc;
}

static firn_rc
rest_list_tables(firn_catalog *base, const char *ns, firn_strlist *out, firn_err *err)
{
    rest_catalog *c = (rest_catalog *)base;
    firn_buf url;
    firn_buf_init(&url, URL_MAX_BYTES);
    firn_rc rc = url_ns(c, &url, ns, err);
    if (!rc && firn_buf_append_cstr(&url, "/tables"))
        rc = firn_err_set(err, FIRN_ERR_TOO_LARGE, "URL of namespace \"%s\" is too long", ns);
    char what[300];
    snprintf(what, sizeof(what), "list the tables of namespace \"%s\"", ns);
    if (!rc)
        rc = list_pages(c, &url, "identifiers", item_table, out, what, err);
    firn_buf_deinit(&url);
    return rc;
}

static firn_rc rest_drop_table(firn_catalog *base, const char *ns, const char *name, firn_err *err)
{
    rest_catalog *c = (rest_catalog *)base;
    firn_buf url;
    firn_buf_init(&url, URL_MAX_BYTES);
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_rc rc = url_table(c, &url, ns, name, err);
    if (!rc && firn_buf_append_cstr(&url, "?purgeRequested=false"))
        rc = firn_err_set(err, FIRN_ERR_TOO_LARGE, "URL of table \"%s.%s\" is too long", ns, name);
    if (!rc)
        rc = rest_send(c, FIRN_HTTP_DELETE, (const char *)url.data, NULL, REQ_MUTATION, &resp, NULL,
                       err);
    if (rc)
        rc = rest_fail(rc, &resp, err, "drop table \"%s.%s\"", ns, name);
    firn_http_response_deinit(&resp);
    firn_buf_deinit(&url);
    return rc;
}

/* ------------------------------------------------------------------------------------------------
 * Commits
 * ----------------------------------------------------------------------------------------------*/

/* Maps a failed commit: 409 conflict, 5xx/timeout unknown outcome, the rest with the server's
 * message naming the table. */
static firn_rc commit_fail(
    firn_rc rc, const firn_http_response *resp, const char *ns, const char *name, firn_err *err)
{
    if (rc == FIRN_ERR_UNAVAILABLE || rc == FIRN_ERR_TIMEOUT)
        rc = FIRN_ERR_UNKNOWN_OUTCOME; /* sent once: it may have landed */
    if (name)
        return rest_fail(rc, resp, err, "commit to table \"%s.%s\"", ns, name);
    return rest_fail(rc, resp, err, "commit the transaction");
}

static firn_rc rest_commit(firn_catalog *base,
                           const char *ns,
                           const char *name,
                           const firn_table_changes *changes,
                           firn_catalog_table *out,
                           firn_err *err)
{
    rest_catalog *c = (rest_catalog *)base;
    firn_buf url, body;
    firn_buf_init(&url, URL_MAX_BYTES);
    firn_buf_init(&body, BODY_MAX_BYTES);
    firn_http_response resp;
    firn_http_response_init(&resp);
    json_t *doc = NULL;
    firn_rc rc = firn_table_changes_to_json(changes, &body, err);
    if (!rc)
        rc = url_table(c, &url, ns, name, err);
    if (!rc) {
        rc = rest_send(c, FIRN_HTTP_POST, (const char *)url.data, &body,
                       REQ_MUTATION | REQ_ONCE | REQ_DELEGATION, &resp, &doc, err);
        if (rc)
            rc = commit_fail(rc, &resp, ns, name, err);
        else if (!doc)
            rc = firn_err_set(err, FIRN_ERR_PROTOCOL,
                              "catalog sent an empty reply to the commit to table \"%s.%s\"", ns,
                              name);
    }
    if (!rc) {
        const json_t *md = json_object_get(doc, "metadata");
        const char *loc = json_string_value(json_object_get(doc, "metadata-location"));
        rc = json_is_object(md) ? parse_member(md, metadata_from_text, &out->metadata, err)
                                : firn_err_set(err, FIRN_ERR_PROTOCOL,
                                               "catalog sent no metadata after the commit to "
                                               "table \"%s.%s\"",
                                               ns, name);
        if (!rc)
            out->metadata_location = firn_strdup(loc ? loc : "");
        else
            firn_err_context(err, "while reading the commit reply of table \"%s.%s\"", ns, name);
    }
    if (rc == FIRN_ERR_CONFLICT)
        FIRN_LOG(FIRN_LOG_DEBUG, "catalog", "commit to %s.%s conflicted: %s", ns, name,
                 err ? err->msg : "");
    json_decref(doc);
    firn_http_response_deinit(&resp);
    firn_buf_deinit(&body);
    firn_buf_deinit(&url);
    return rc;
}

/* {"identifier":{...},"requirements":[...],"updates":[...]} */
static firn_rc table_change_json(const firn_catalog_table_commit *t, json_t **out, firn_err *err)
{
    firn_buf b;
    firn_buf_init(&b, BODY_MAX_BYTES);
    firn_rc rc = firn_table_changes_to_json(t->changes, &b, err);
    json_t *doc = rc ? NULL : json_loadb((const char *)b.data, b.len, 0, NULL);
    firn_buf_deinit(&b);
    if (rc)
        return rc;
    if (!doc)
        return firn_err_set(err, FIRN_ERR_INTERNAL, "could not re-read the changes of \"%s.%s\"",
                            t->ns, t->name);
    json_t *ident = json_object();
    json_object_set_new(ident, "namespace", ns_to_json(t->ns));
    json_object_set_new(ident, "name", json_string(t->name));
    json_object_set_new(doc, "identifier", ident);
    *out = doc;
    return FIRN_OK;
}

static firn_rc rest_commit_transaction(firn_catalog *base,
                                       const firn_catalog_table_commit *commits,
                                       size_t n,
                                       firn_err *err)
{
    rest_catalog *c = (rest_catalog *)base;
    if (!has_endpoint(c, ENDPOINT_COMMIT_TX))
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED,
                            "catalog \"%s\" does not offer multi-table commits", c->name);
    json_t *list = json_array();
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        json_t *one = NULL;
        rc = table_change_json(&commits[i], &one, err);
        if (!rc)
            json_array_append_new(list, one);
    }
    json_t *req = json_object();
    json_object_set_new(req, "table-changes", list);
    firn_buf url, body;
    firn_buf_init(&url, URL_MAX_BYTES);
    firn_buf_init(&body, BODY_MAX_BYTES);
    firn_http_response resp;
    firn_http_response_init(&resp);
    if (rc)
        json_decref(req);
    else
        rc = dump_json(req, &body, err);
    if (!rc && (url_root(c, &url) || firn_buf_append_cstr(&url, "transactions/commit")))
        rc = firn_err_set(err, FIRN_ERR_TOO_LARGE, "catalog URL is too long");
    if (!rc) {
        rc = rest_send(c, FIRN_HTTP_POST, (const char *)url.data, &body, REQ_MUTATION | REQ_ONCE,
                       &resp, NULL, err);
        if (rc)
            rc = commit_fail(rc, &resp, NULL, NULL, err);
    }
    firn_http_response_deinit(&resp);
    firn_buf_deinit(&body);
    firn_buf_deinit(&url);
    return rc;
}

/* ------------------------------------------------------------------------------------------------
 * Credential refresh for the FileIO
 * ----------------------------------------------------------------------------------------------*/

static firn_rc fetch_credentials(rest_catalog *c,
                                 const char *ns,
                                 const char *name,
                                 const char *location,
                                 firn_props *out,
                                 firn_err *err)
{
    json_t *doc = NULL;
    firn_rc rc;
    if (c->has_endpoints && has_endpoint(c, ENDPOINT_CREDS)) {
        firn_buf url;
        firn_buf_init(&url, URL_MAX_BYTES);
        firn_http_response resp;
        firn_http_response_init(&resp);
        rc = url_table(c, &url, ns, name, err);
        if (!rc && firn_buf_append_cstr(&url, "/credentials"))
            rc = firn_err_set(err, FIRN_ERR_TOO_LARGE, "URL of table \"%s.%s\" is too long", ns,
                              name);
        if (!rc)
            rc = rest_send(c, FIRN_HTTP_GET, (const char *)url.data, NULL, REQ_DELEGATION, &resp,
                           &doc, err);
        if (rc)
            rc = rest_fail(rc, &resp, err, "load the storage credentials of table \"%s.%s\"", ns,
                           name);
        firn_http_response_deinit(&resp);
        firn_buf_deinit(&url);
    } else {
        rc = get_table(c, ns, name, &doc, err);
    }
    if (!rc)
        creds_from_result(doc, location, out);
    json_decref(doc);
    return rc;
}

static firn_rc refresh_cb(void *ctx,
                          const char *ns,
                          const char *name,
                          const char *location,
                          firn_props *out,
                          firn_err *err)
{
    rest_catalog *c = ctx;
    firn_rc rc = fetch_credentials(c, ns, name, location, out, err);
    if (rc == FIRN_OK)
        FIRN_LOG(FIRN_LOG_INFO, "catalog", "refreshed the storage credentials of table %s.%s", ns,
                 name);
    return rc;
}

/* ------------------------------------------------------------------------------------------------
 * Opening
 * ----------------------------------------------------------------------------------------------*/

static void rest_destroy(firn_catalog *base)
{
    rest_catalog *c = (rest_catalog *)base;
    firn__rest_io_free(c->io);
    firn_http_free(c->http);
    firn_cred_unref(c->cred);
    firn_http_headers_deinit(&c->headers);
    firn_props_deinit(&c->config);
    firn_strlist_deinit(&c->endpoints);
    firn_free(c->name);
    firn_free(c->uri);
    firn_free(c->warehouse);
    firn_free(c->prefix);
    firn_free(c->sep);
    firn_free(c);
}

static const firn_catalog_vtable REST_VTABLE = {
    .kind = "rest",
    .create_namespace = rest_create_namespace,
    .list_namespaces = rest_list_namespaces,
    .namespace_exists = rest_namespace_exists,
    .load_namespace = rest_load_namespace,
    .update_namespace = rest_update_namespace,
    .drop_namespace = rest_drop_namespace,
    .create_table = rest_create_table,
    .load_table = rest_load_table,
    .table_exists = rest_table_exists,
    .list_tables = rest_list_tables,
    .drop_table = rest_drop_table,
    .commit = rest_commit,
    .destroy = rest_destroy,
    .commit_transaction = rest_commit_transaction,
};

/* Applies the /v1/config reply: defaults, client properties, overrides; endpoints. */
static void apply_config(rest_catalog *c, const json_t *doc, const firn_catalog_rest_opts *o)
{
    props_from_json(&c->config, json_object_get(doc, "defaults"));
    if (o->prefix)
        firn_props_set(&c->config, "prefix", o->prefix);
    for (size_t i = 0; o->properties && i < o->properties->n; i++)
        firn_props_set(&c->config, o->properties->keys[i], o->properties->vals[i]);
    props_from_json(&c->config, json_object_get(doc, "overrides"));
    const json_t *eps = json_object_get(doc, "endpoints");
    c->has_endpoints = json_is_array(eps);
    for (size_t i = 0; i < json_array_size(eps); i++) {
        const char *e = json_string_value(json_array_get(eps, i));
        if (e)
            firn_strlist_push(&c->endpoints, e);
    }
    c->idempotency = json_string_value(json_object_get(doc, "idempotency-key-lifetime")) != NULL;
    const char *prefix = firn_props_get(&c->config, "prefix");
    if (prefix) {
        size_t n = strlen(prefix);
        while (n > 0 && prefix[n - 1] == '/')
            n--;
        while (n > 0 && *prefix == '/') {
            prefix++;
            n--;
        }
        c->prefix = n ? firn_strndup(prefix, n) : NULL;
    }
    const char *sep = firn_props_get(&c->config, "namespace-separator");
    c->sep = firn_strdup(sep && *sep ? sep : DEFAULT_SEPARATOR);
    const char *ps = firn_props_get(&c->config, "rest-page-size");
    int64_t v = 0;
    if (ps && firn_parse_i64(ps, strlen(ps), &v, NULL) == FIRN_OK && v > 0)
        c->page_size = (long)v;
}

static firn_rc load_config(rest_catalog *c, const firn_catalog_rest_opts *o, firn_err *err)
{
    firn_buf url;
    firn_buf_init(&url, URL_MAX_BYTES);
    firn_rc rc = firn_buf_appendf(&url, "%s/v1/config", c->uri);
    if (!rc && c->warehouse) {
        rc = firn_buf_append_cstr(&url, "?warehouse=");
        if (!rc)
            rc = firn_url_encode(&url, c->warehouse, strlen(c->warehouse), false);
    }
    firn_http_response resp;
    firn_http_response_init(&resp);
    json_t *doc = NULL;
    if (rc)
        rc = firn_err_set(err, rc, "catalog URL is too long");
    else
        rc = rest_send(c, FIRN_HTTP_GET, (const char *)url.data, NULL, 0, &resp, &doc, err);
    char safe[FIRN_URL_REDACTED_MAX], safe_wh[FIRN_URL_REDACTED_MAX];
    firn_url_redact(safe, sizeof(safe), c->uri);
    if (rc == FIRN_ERR_NOT_FOUND || rc == FIRN_ERR_INVALID)
        rc = rest_fail(FIRN_ERR_CONFIG, &resp, err, "read the configuration of catalog \"%s\"%s%s",
                       safe, c->warehouse ? " for warehouse " : "",
                       firn_url_redact(safe_wh, sizeof(safe_wh), c->warehouse));
    else if (rc)
        rc = rest_fail(rc, &resp, err, "read the configuration of catalog \"%s\"", safe);
    else if (!json_is_object(doc))
        rc = firn_err_set(err, FIRN_ERR_PROTOCOL, "catalog \"%s\" sent no configuration", safe);
    if (!rc)
        apply_config(c, doc, o);
    json_decref(doc);
    firn_http_response_deinit(&resp);
    firn_buf_deinit(&url);
    return rc;
}

firn_rc
firn_catalog_rest_open(const firn_catalog_rest_opts *opts, firn_catalog **out, firn_err *err)
{
    *out = NULL;
    const char *uri = opts->uri;
    if (!uri || (strncmp(uri, "http://", 7) != 0 && strncmp(uri, "https://", 8) != 0))
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "REST catalog uri \"%s\" must be an http:// or https:// URL",
                            uri ? uri : "");
    rest_catalog *c = firn_calloc(1, sizeof(*c));
    c->base.vt = &REST_VTABLE;
    c->name = firn_strdup(opts->name ? opts->name : "rest");
    size_t n = strlen(uri);
    while (n > 0 && uri[n - 1] == '/')
        n--;
    c->uri = firn_strndup(uri, n);
    c->warehouse = opts->warehouse && *opts->warehouse ? firn_strdup(opts->warehouse) : NULL;
    c->cred = firn_cred_ref(opts->cred);
    firn_http_headers_init(&c->headers);
    if (opts->headers)
        firn_http_headers_copy(&c->headers, opts->headers);
    firn_props_init(&c->config);
    firn_http_options ho = opts->http ? *opts->http : firn_http_options_default();
    firn_rc rc = firn_http_new(&ho, &c->http, err);
    if (!rc)
        rc = load_config(c, opts, err);
    if (rc) {
        rest_destroy(&c->base);
        return rc;
    }
    c->io = firn__rest_io_new(opts, refresh_cb, c);
    char safe[FIRN_URL_REDACTED_MAX];
    FIRN_LOG(FIRN_LOG_DEBUG, "catalog", "REST catalog %s: prefix \"%s\", %zu endpoints",
             firn_url_redact(safe, sizeof(safe), c->uri), c->prefix ? c->prefix : "",
             c->endpoints.count);
    *out = &c->base;
    return FIRN_OK;
}

firn_io *firn_catalog_rest_io(firn_catalog *base)
{
    if (!base || base->vt != &REST_VTABLE)
        return NULL;
    return firn__rest_io_base(((rest_catalog *)base)->io);
}
