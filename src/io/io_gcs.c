/* SPDX-License-Identifier: Apache-2.0 */
/* GCS FileIO over the JSON API (ICEBERG.md §H "GCS data plane"): media uploads for small
 * objects, resumable uploads in 256 KiB-aligned chunks for large ones (cancelled on failure),
 * ranged media downloads, object metadata for sizes, deletes. Authentication comes from a Google
 * token provider (the same one a BigLake catalog uses) or vended tokens. */
#include "io_remote_int.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KIB256         ((size_t)256 << 10)
#define DEFAULT_CHUNK  ((size_t)8 << 20)
#define DEFAULT_RESUME ((size_t)8 << 20)
#define URL_MAX        ((size_t)1 << 16)
#define JSON_REPLY_MAX ((size_t)1 << 20)
#define GCS_ENDPOINT   "https://storage.googleapis.com"

typedef struct gcs_io {
    firn_io base;
    firn_http *http;
    firn_cred *cred;
    char *endpoint; /* without trailing '/' */
    size_t threshold;
    size_t chunk;
    bool allow_overwrite;
} gcs_io;

typedef struct gcs_writer {
    firn_io_writer base;
    char *location;
    char *bucket;
    char *object;
    firn_buf buf;
    char *session; /* resumable session URI, NULL before the first chunk */
    uint64_t sent; /* bytes the session has persisted */
} gcs_writer;

static firn_rc split(const char *location, char **bucket, char **object, firn_err *err)
{
    char *scheme = NULL;
    FIRN_TRY(firn_io_split_location(location, &scheme, bucket, object, err));
    bool ok = strcmp(scheme, "gs") == 0;
    firn_free(scheme);
    if (ok)
        return FIRN_OK;
    firn_free(*bucket);
    firn_free(*object);
    *bucket = *object = NULL;
    return firn_err_set(err, FIRN_ERR_INVALID, "location \"%s\" is not a gs:// location", location);
}

static firn_rc call(gcs_io *g,
                    firn_http_method method,
                    const char *url,
                    const firn_http_headers *hdrs,
                    const void *body,
                    size_t len,
                    size_t max_reply,
                    firn_http_response *resp,
                    firn_err *err)
{
    firn_http_request req = {.method = method,
                             .url = url,
                             .headers = hdrs,
                             .body = body,
                             .body_len = len,
                             .cred = g->cred,
                             .max_response_bytes = max_reply};
    return firn_http_do(g->http, &req, resp, err);
}

/* <endpoint>/storage/v1/b/<bucket>/o/<object, fully encoded>[?query] */
static firn_rc object_url(
    const gcs_io *g, const char *bucket, const char *object, const char *query, firn_buf *out)
{
    FIRN_TRY(firn_buf_appendf(out, "%s/storage/v1/b/", g->endpoint));
    FIRN_TRY(firn_url_encode(out, bucket, strlen(bucket), false));
    FIRN_TRY(firn_buf_append_cstr(out, "/o/"));
    FIRN_TRY(firn_url_encode(out, object, strlen(object), false));
    if (query)
        FIRN_TRY(firn_buf_appendf(out, "?%s", query));
    return FIRN_OK;
}

/* <endpoint>/upload/storage/v1/b/<bucket>/o?uploadType=<type>&name=<object>[&ifGenerationMatch=0]
 */
static firn_rc upload_url(const gcs_io *g, const gcs_writer *w, const char *type, firn_buf *out)
{
    FIRN_TRY(firn_buf_appendf(out, "%s/upload/storage/v1/b/", g->endpoint));
    FIRN_TRY(firn_url_encode(out, w->bucket, strlen(w->bucket), false));
    FIRN_TRY(firn_buf_appendf(out, "/o?uploadType=%s&name=", type));
    FIRN_TRY(firn_url_encode(out, w->object, strlen(w->object), false));
    if (!g->allow_overwrite)
        FIRN_TRY(firn_buf_append_cstr(out, "&ifGenerationMatch=0"));
    return FIRN_OK;
}

static firn_rc exists_error(firn_rc rc, const gcs_writer *w, firn_err *err)
{
    if (rc == FIRN_ERR_EXISTS)
        return firn_err_set(err, rc, "object \"%s\" already exists", w->location);
    return rc;
}

/* ---- writer ---- */

static void writer_free(gcs_writer *w)
{
    firn_buf_deinit(&w->buf);
    firn_free(w->session);
    firn_free(w->location);
    firn_free(w->bucket);
    firn_free(w->object);
    firn_free(w);
}

static firn_rc gcs_create(firn_io *io, const char *location, firn_io_writer **out, firn_err *err)
{
    gcs_io *g = (gcs_io *)io;
    *out = NULL;
    char *bucket = NULL, *object = NULL;
    FIRN_TRY(split(location, &bucket, &object, err));
    gcs_writer *w = firn_calloc(1, sizeof(*w));
    w->base.io = io;
    w->location = firn_strdup(location);
    w->bucket = bucket;
    w->object = object;
    firn_buf_init(&w->buf, (g->threshold > g->chunk ? g->threshold : g->chunk) + 1);
    *out = &w->base;
    return FIRN_OK;
}

static firn_rc start_session(gcs_io *g, gcs_writer *w, firn_err *err)
{
    firn_buf url;
    firn_buf_init(&url, URL_MAX);
    firn_http_headers h;
    firn_http_headers_init(&h);
    firn_http_headers_add(&h, "Content-Type", "application/json; charset=UTF-8");
    firn_http_headers_add(&h, "X-Upload-Content-Type", "application/octet-stream");
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_rc rc = upload_url(g, w, "resumable", &url);
    if (!rc)
        rc = call(g, FIRN_HTTP_POST, (const char *)url.data, &h, "{}", 2, JSON_REPLY_MAX, &resp,
                  err);
    const char *loc = rc ? NULL : firn_http_headers_get(&resp.headers, "Location");
    if (!rc && !loc)
        rc = firn_err_set(err, FIRN_ERR_PROTOCOL,
                          "resumable upload of \"%s\" started without a session URI", w->location);
    if (!rc)
        w->session = firn_strdup(loc);
    firn_http_response_deinit(&resp);
    firn_http_headers_deinit(&h);
    firn_buf_deinit(&url);
    return exists_error(rc, w, err);
}

/* Parses the persisted size from a 308 reply's "Range: bytes=0-N" (no header: nothing). */
static firn_rc persisted(const firn_http_response *resp, uint64_t *out, firn_err *err)
{
    const char *range = firn_http_headers_get(&resp->headers, "Range");
    *out = 0;
    if (!range)
        return FIRN_OK;
    const char *dash = strchr(range, '-');
    uint64_t last = 0;
    if (strncmp(range, "bytes=0-", 8) != 0 || !dash ||
        firn_parse_u64(dash + 1, strlen(dash + 1), &last, NULL) != FIRN_OK)
        return firn_err_set(err, FIRN_ERR_PROTOCOL, "bad Range \"%s\" in a resumable upload",
                            range);
    *out = last + 1;
    return FIRN_OK;
}

/* Sends buf[0, len) at offset sent; final tells the total size. */
static firn_rc put_chunk(gcs_io *g, gcs_writer *w, size_t len, bool final, firn_err *err)
{
    char range[128];
    uint64_t total = w->sent + len;
    if (len == 0)
        snprintf(range, sizeof(range), "bytes */%llu", (unsigned long long)total);
    else if (final)
        snprintf(range, sizeof(range), "bytes %llu-%llu/%llu", (unsigned long long)w->sent,
                 (unsigned long long)(total - 1), (unsigned long long)total);
    else
        snprintf(range, sizeof(range), "bytes %llu-%llu/*", (unsigned long long)w->sent,
                 (unsigned long long)(total - 1));
    firn_http_headers h;
    firn_http_headers_init(&h);
    firn_http_headers_add(&h, "Content-Range", range);
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_rc rc =
        call(g, FIRN_HTTP_PUT, w->session, &h, w->buf.data, len, JSON_REPLY_MAX, &resp, err);
    uint64_t have = total;
    if (!rc && !final && resp.status != 308)
        rc = firn_err_set(err, FIRN_ERR_PROTOCOL,
                          "resumable upload of \"%s\" answered HTTP %ld to a chunk", w->location,
                          resp.status);
    else if (!rc && !final)
        rc = persisted(&resp, &have, err);
    else if (!rc && resp.status == 308)
        rc = firn_err_set(err, FIRN_ERR_IO, "resumable upload of \"%s\" did not finish",
                          w->location);
    if (!rc && have != total)
        rc = firn_err_set(err, FIRN_ERR_IO, "resumable upload of \"%s\" kept %llu of %llu bytes",
                          w->location, (unsigned long long)have, (unsigned long long)total);
    if (!rc) {
        memmove(w->buf.data, w->buf.data + len, w->buf.len - len);
        firn_buf_truncate(&w->buf, w->buf.len - len);
        w->sent = total;
    }
    firn_http_response_deinit(&resp);
    firn_http_headers_deinit(&h);
    return exists_error(rc, w, err);
}

static firn_rc flush_chunks(gcs_io *g, gcs_writer *w, firn_err *err)
{
    if (!w->session)
        FIRN_TRY(start_session(g, w, err));
    /* Keep at least one byte back so the final request always carries the total. */
    while (w->buf.len > g->chunk)
        FIRN_TRY(put_chunk(g, w, g->chunk, false, err));
    return FIRN_OK;
}

static firn_rc gcs_write(firn_io_writer *wb, const void *p, size_t len, firn_err *err)
{
    gcs_writer *w = (gcs_writer *)wb;
    gcs_io *g = (gcs_io *)wb->io;
    const uint8_t *src = p;
    while (len > 0) {
        size_t limit = (w->session ? g->chunk : g->threshold) + 1;
        size_t room = limit > w->buf.len ? limit - w->buf.len : 0;
        size_t n = len < room ? len : room;
        FIRN_TRY(firn_buf_append(&w->buf, src, n));
        src += n;
        len -= n;
        wb->bytes_written += n;
        if (w->buf.len >= limit)
            FIRN_TRY(flush_chunks(g, w, err));
    }
    return FIRN_OK;
}

static firn_rc put_media(gcs_io *g, gcs_writer *w, firn_err *err)
{
    firn_buf url;
    firn_buf_init(&url, URL_MAX);
    firn_http_headers h;
    firn_http_headers_init(&h);
    firn_http_headers_add(&h, "Content-Type", "application/octet-stream");
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_rc rc = upload_url(g, w, "media", &url);
    if (!rc)
        rc = call(g, FIRN_HTTP_POST, (const char *)url.data, &h, w->buf.data, w->buf.len,
                  JSON_REPLY_MAX, &resp, err);
    firn_http_response_deinit(&resp);
    firn_http_headers_deinit(&h);
    firn_buf_deinit(&url);
    return exists_error(rc, w, err);
}

static void cancel_session(gcs_io *g, gcs_writer *w)
{
    if (!w->session)
        return;
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_err err = {0};
    /* GCS answers 499 to a cancelled session; any answer ends it. */
    firn_rc rc = call(g, FIRN_HTTP_DELETE, w->session, NULL, NULL, 0, JSON_REPLY_MAX, &resp, &err);
    if (rc && resp.status == 0)
        FIRN_LOG(FIRN_LOG_WARN, "io", "could not cancel the upload of \"%s\": %s", w->location,
                 err.msg);
    firn_http_response_deinit(&resp);
}

static firn_rc gcs_close(firn_io_writer *wb, uint64_t *out_size, firn_err *err)
{
    gcs_writer *w = (gcs_writer *)wb;
    gcs_io *g = (gcs_io *)wb->io;
    firn_rc rc = w->session ? put_chunk(g, w, w->buf.len, true, err) : put_media(g, w, err);
    if (rc)
        cancel_session(g, w);
    else if (out_size)
        *out_size = wb->bytes_written;
    writer_free(w);
    return rc;
}

static void gcs_abort(firn_io_writer *wb)
{
    gcs_writer *w = (gcs_writer *)wb;
    cancel_session((gcs_io *)wb->io, w);
    writer_free(w);
}

/* ---- reads, sizes, deletes ---- */

static firn_rc object_call(gcs_io *g,
                           firn_http_method method,
                           const char *location,
                           const char *query,
                           const firn_http_headers *h,
                           size_t max_reply,
                           firn_http_response *resp,
                           firn_err *err)
{
    char *bucket = NULL, *object = NULL;
    FIRN_TRY(split(location, &bucket, &object, err));
    firn_buf url;
    firn_buf_init(&url, URL_MAX);
    firn_rc rc = object_url(g, bucket, object, query, &url);
    if (rc)
        rc = firn_err_set(err, rc, "URL of \"%s\" is too long", location);
    else
        rc = call(g, method, (const char *)url.data, h, NULL, 0, max_reply, resp, err);
    if (rc == FIRN_ERR_NOT_FOUND)
        rc = firn_err_set(err, rc, "object \"%s\" does not exist", location);
    firn_buf_deinit(&url);
    firn_free(bucket);
    firn_free(object);
    return rc;
}

static firn_rc gcs_read(firn_io *io, const char *location, firn_buf *out, firn_err *err)
{
    firn_http_response resp;
    firn_http_response_init(&resp);
    size_t room = out->max - out->len;
    firn_rc rc = object_call((gcs_io *)io, FIRN_HTTP_GET, location, "alt=media", NULL,
                             room ? room : 1, &resp, err);
    if (!rc)
        rc = firn__io_take_range(&resp.body, resp.body.len, location, out, err);
    firn_http_response_deinit(&resp);
    return rc;
}

static firn_rc gcs_read_range(
    firn_io *io, const char *location, uint64_t offset, size_t len, firn_buf *out, firn_err *err)
{
    if (len == 0)
        return FIRN_OK;
    char range[64];
    snprintf(range, sizeof(range), "bytes=%llu-%llu", (unsigned long long)offset,
             (unsigned long long)(offset + len - 1));
    firn_http_headers h;
    firn_http_headers_init(&h);
    firn_http_headers_add(&h, "Range", range);
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_rc rc =
        object_call((gcs_io *)io, FIRN_HTTP_GET, location, "alt=media", &h, len + 1, &resp, err);
    if (rc == FIRN_ERR_PROTOCOL && resp.status == 416)
        rc = firn_err_set(err, FIRN_ERR_IO, "object \"%s\" is shorter than %llu bytes", location,
                          (unsigned long long)(offset + len));
    else if (!rc && resp.status != 206)
        rc = firn_err_set(err, FIRN_ERR_PROTOCOL, "server ignored the range of \"%s\" (HTTP %ld)",
                          location, resp.status);
    if (!rc)
        rc = firn__io_take_range(&resp.body, len, location, out, err);
    firn_http_response_deinit(&resp);
    firn_http_headers_deinit(&h);
    return rc;
}

static firn_rc gcs_size(firn_io *io, const char *location, uint64_t *out_size, firn_err *err)
{
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_rc rc = object_call((gcs_io *)io, FIRN_HTTP_GET, location, "fields=size", NULL,
                             JSON_REPLY_MAX, &resp, err);
    if (!rc) {
        json_t *doc = json_loadb((const char *)resp.body.data, resp.body.len, 0, NULL);
        json_t *size = json_object_get(doc, "size");
        const char *text = json_string_value(size);
        uint64_t v = 0;
        if (json_is_integer(size) && json_integer_value(size) >= 0)
            v = (uint64_t)json_integer_value(size);
        else if (!text || firn_parse_u64(text, strlen(text), &v, NULL) != FIRN_OK)
            rc = firn_err_set(err, FIRN_ERR_PROTOCOL, "no object size for \"%s\"", location);
        if (!rc)
            *out_size = v;
        json_decref(doc);
    }
    firn_http_response_deinit(&resp);
    return rc;
}

static firn_rc gcs_remove(firn_io *io, const char *location, firn_err *err)
{
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_rc rc = object_call((gcs_io *)io, FIRN_HTTP_DELETE, location, NULL, NULL, JSON_REPLY_MAX,
                             &resp, err);
    firn_http_response_deinit(&resp);
    return rc;
}

/* Calls fn for each item of one objects.list page; *token is the next page's token (owned),
 * NULL after the last page. */
static firn_rc list_page(const firn_buf *body,
                         const char *bucket,
                         firn_io_list_fn fn,
                         void *ctx,
                         char **token,
                         firn_err *err)
{
    *token = NULL;
    json_error_t jerr;
    json_t *doc = json_loadb((const char *)body->data, body->len, 0, &jerr);
    if (!json_is_object(doc)) {
        json_decref(doc);
        return firn_err_set(err, FIRN_ERR_PROTOCOL, "objects.list reply is not a JSON object");
    }
    firn_buf loc;
    firn_buf_init(&loc, URL_MAX);
    firn_rc rc = FIRN_OK;
    size_t i;
    json_t *item;
    json_array_foreach(json_object_get(doc, "items"), i, item)
    {
        const char *name = json_string_value(json_object_get(item, "name"));
        const char *size = json_string_value(json_object_get(item, "size"));
        uint64_t bytes = 0;
        if (!name || !size || firn_parse_u64(size, strlen(size), &bytes, NULL) != FIRN_OK) {
            rc = firn_err_set(err, FIRN_ERR_PROTOCOL, "objects.list item without name or size");
            break;
        }
        firn_buf_reset(&loc);
        rc = firn_buf_appendf(&loc, "gs://%s/%s", bucket, name);
        if (rc == FIRN_OK)
            rc = fn(ctx, (const char *)loc.data, bytes,
                    firn_time_parse_ms(json_string_value(json_object_get(item, "updated"))), err);
        if (rc)
            break;
    }
    const char *next = json_string_value(json_object_get(doc, "nextPageToken"));
    if (rc == FIRN_OK && next && *next)
        *token = firn_strdup(next);
    firn_buf_deinit(&loc);
    json_decref(doc);
    return rc;
}

static firn_rc
gcs_list(firn_io *io, const char *prefix, firn_io_list_fn fn, void *ctx, firn_err *err)
{
    gcs_io *g = (gcs_io *)io;
    char *bucket = NULL, *object = NULL;
    FIRN_TRY(split(prefix, &bucket, &object, err));
    size_t on = strlen(object);
    while (on > 0 && object[on - 1] == '/')
        object[--on] = '\0';
    char *token = NULL;
    firn_rc rc = FIRN_OK;
    for (bool first = true; rc == FIRN_OK && (first || token); first = false) {
        firn_buf url;
        firn_buf_init(&url, URL_MAX);
        rc = firn_buf_appendf(&url, "%s/storage/v1/b/", g->endpoint);
        if (rc == FIRN_OK)
            rc = firn_url_encode(&url, bucket, strlen(bucket), false);
        if (rc == FIRN_OK)
            rc = firn_buf_append_cstr(&url, "/o?prefix=");
        if (rc == FIRN_OK)
            rc = firn_url_encode(&url, object, on, false);
        if (rc == FIRN_OK && on > 0)
            rc = firn_buf_append_cstr(&url, "%2F");
        if (rc == FIRN_OK && token) {
            rc = firn_buf_append_cstr(&url, "&pageToken=");
            if (rc == FIRN_OK)
                rc = firn_url_encode(&url, token, strlen(token), false);
        }
        firn_free(token);
        token = NULL;
        if (rc == FIRN_OK)
            rc = firn_buf_append(&url, "", 1);
        firn_http_response resp;
        firn_http_response_init(&resp);
        if (rc == FIRN_OK)
            rc = call(g, FIRN_HTTP_GET, (const char *)url.data, NULL, NULL, 0, (size_t)64 << 20,
                      &resp, err);
        if (rc == FIRN_OK)
            rc = list_page(&resp.body, bucket, fn, ctx, &token, err);
        firn_http_response_deinit(&resp);
        firn_buf_deinit(&url);
    }
    if (rc)
        firn_err_context(err, "while listing \"%s\"", prefix);
    firn_free(token);
    firn_free(bucket);
    firn_free(object);
    return rc;
}

static void gcs_destroy(firn_io *io)
{
    gcs_io *g = (gcs_io *)io;
    firn_http_free(g->http);
    firn_cred_unref(g->cred);
    firn_free(g->endpoint);
    firn_free(g);
}

static const firn_io_vtable gcs_vt = {
    .scheme = "gs",
    .create = gcs_create,
    .write = gcs_write,
    .close = gcs_close,
    .abort = gcs_abort,
    .read = gcs_read,
    .read_range = gcs_read_range,
    .size = gcs_size,
    .remove = gcs_remove,
    .destroy = gcs_destroy,
    .list = gcs_list,
};

static char *endpoint_of(const firn_gcs_options *o)
{
    const char *e = o->endpoint && *o->endpoint ? o->endpoint : NULL;
    const char *emu = getenv("STORAGE_EMULATOR_HOST");
    firn_buf b;
    firn_buf_init(&b, URL_MAX);
    firn_rc rc;
    if (e)
        rc = firn_buf_append_cstr(&b, e);
    else if (emu && *emu)
        rc = firn_buf_appendf(&b, "%s%s", strstr(emu, "://") ? "" : "http://", emu);
    else
        rc = firn_buf_append_cstr(&b, GCS_ENDPOINT);
    FIRN_ASSERT(rc == FIRN_OK);
    while (b.len > 0 && b.data[b.len - 1] == '/')
        firn_buf_truncate(&b, b.len - 1);
    return (char *)firn_buf_take(&b, NULL);
}

firn_rc firn_io_gcs_new(const firn_gcs_options *o, firn_io **out, firn_err *err)
{
    *out = NULL;
    gcs_io *g = firn_calloc(1, sizeof(*g));
    g->base.vt = &gcs_vt;
    g->endpoint = endpoint_of(o);
    g->cred = firn_cred_ref(o->cred);
    g->threshold = o->resumable_threshold ? o->resumable_threshold : DEFAULT_RESUME;
    g->chunk = o->chunk_size ? o->chunk_size / KIB256 * KIB256 : DEFAULT_CHUNK;
    g->allow_overwrite = o->allow_overwrite;
    firn_rc rc = FIRN_OK;
    if (g->chunk == 0)
        rc = firn_err_set(err, FIRN_ERR_CONFIG, "GCS chunk size must be at least 256 KiB");
    if (!rc && strncmp(g->endpoint, "http://", 7) != 0 && strncmp(g->endpoint, "https://", 8) != 0)
        rc = firn_err_set(err, FIRN_ERR_CONFIG,
                          "GCS endpoint \"%s\" must start with http:// or https://", g->endpoint);
    if (!rc)
        rc = firn_http_new(&o->http, &g->http, err);
    if (rc) {
        gcs_destroy(&g->base);
        return rc;
    }
    *out = &g->base;
    return FIRN_OK;
}
