/* SPDX-License-Identifier: Apache-2.0 */
/* S3 FileIO: SigV4-signed REST calls to AWS S3 or an S3-compatible server. Objects below the
 * multipart threshold are one PUT; larger ones are uploaded in parts while they are written and
 * completed on close, and the upload is aborted on any failure, so an object appears whole or
 * not at all. */
#include "io_remote_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB           ((size_t)1 << 20)
#define MIN_PART_SIZE (5 * MIB)
#define DEFAULT_PART  (8 * MIB)
#define DEFAULT_MULTI (16 * MIB)
#define MAX_PARTS     10000
#define URL_MAX       ((size_t)1 << 16)
#define XML_REPLY_MAX ((size_t)1 << 20)

typedef struct s3_io {
    firn_io base;
    firn_http *http;
    firn_cred *cred;
    char *scheme; /* "http" or "https" */
    char *host;   /* endpoint authority, "127.0.0.1:7070" */
    char *prefix; /* endpoint path without trailing '/', usually "" */
    bool path_style;
    bool dotted_path_style; /* virtual-host, except buckets with dots (TLS names) */
    size_t threshold;
    size_t part_size;
    bool conditional_put;
} s3_io;

typedef struct s3_part {
    char *etag;
} s3_part;

typedef struct s3_writer {
    firn_io_writer base;
    char *location;
    char *bucket;
    char *key;
    firn_buf buf;
    char *upload_id;
    s3_part *parts;
    size_t nparts;
    size_t cap;
} s3_writer;

/* ---- addressing ---- */

static bool scheme_ok(const char *scheme)
{
    return strcmp(scheme, "s3") == 0 || strcmp(scheme, "s3a") == 0 || strcmp(scheme, "s3n") == 0 ||
           strcmp(scheme, "gs") == 0;
}

static firn_rc split(const char *location, char **bucket, char **key, firn_err *err)
{
    char *scheme = NULL;
    FIRN_TRY(firn_io_split_location(location, &scheme, bucket, key, err));
    bool ok = scheme_ok(scheme);
    firn_free(scheme);
    if (ok)
        return FIRN_OK;
    firn_free(*bucket);
    firn_free(*key);
    *bucket = *key = NULL;
    return firn_err_set(err, FIRN_ERR_INVALID, "location \"%s\" is not an s3:// location",
                        location);
}

/* Appends the URL of bucket/key (key may be "" for bucket-level calls) and an optional query. */
static firn_rc
object_url(const s3_io *s, const char *bucket, const char *key, const char *query, firn_buf *out)
{
    if (s->path_style || (s->dotted_path_style && strchr(bucket, '.')))
        FIRN_TRY(firn_buf_appendf(out, "%s://%s%s/%s/", s->scheme, s->host, s->prefix, bucket));
    else
        FIRN_TRY(firn_buf_appendf(out, "%s://%s.%s%s/", s->scheme, bucket, s->host, s->prefix));
    FIRN_TRY(firn_url_encode(out, key, strlen(key), true));
    if (query && *query)
        FIRN_TRY(firn_buf_appendf(out, "?%s", query));
    return FIRN_OK;
}

firn_rc firn_io_s3_url(firn_io *io, const char *location, firn_buf *out, firn_err *err)
{
    char *bucket = NULL, *key = NULL;
    FIRN_TRY(split(location, &bucket, &key, err));
    firn_rc rc = object_url((s3_io *)io, bucket, key, NULL, out);
    if (rc)
        rc = firn_err_set(err, rc, "URL of \"%s\" is too long", location);
    firn_free(bucket);
    firn_free(key);
    return rc;
}

/* One request to bucket/key with query; resp is initialized by the caller. */
static firn_rc s3_call(s3_io *s,
                       firn_http_method method,
                       const char *bucket,
                       const char *key,
                       const char *query,
                       const firn_http_headers *hdrs,
                       const void *body,
                       size_t body_len,
                       size_t max_reply,
                       firn_http_response *resp,
                       firn_err *err)
{
    firn_buf url;
    firn_buf_init(&url, URL_MAX);
    firn_rc rc = object_url(s, bucket, key, query, &url);
    if (rc) {
        firn_buf_deinit(&url);
        return firn_err_set(err, rc, "URL of object \"%s\" is too long", key);
    }
    firn_http_request req = {.method = method,
                             .url = (const char *)url.data,
                             .headers = hdrs,
                             .body = body,
                             .body_len = body_len,
                             .cred = s->cred,
                             .max_response_bytes = max_reply};
    rc = firn_http_do(s->http, &req, resp, err);
    firn_buf_deinit(&url);
    return rc;
}

/* An HTTP 200 whose body is an S3 <Error> document (CompleteMultipartUpload does this). */
static firn_rc check_xml_error(const firn_http_response *resp, const char *what, firn_err *err)
{
    const char *body = (const char *)resp->body.data;
    if (!body || !strstr(body, "<Error>"))
        return FIRN_OK;
    char *code = firn__io_xml_text(body, resp->body.len, "Code");
    char *msg = firn__io_xml_text(body, resp->body.len, "Message");
    bool transient = code && (strcmp(code, "InternalError") == 0 || strcmp(code, "SlowDown") == 0 ||
                              strcmp(code, "ServiceUnavailable") == 0);
    firn_rc rc =
        firn_err_set(err, transient ? FIRN_ERR_UNAVAILABLE : FIRN_ERR_IO, "could not %s: %s: %s",
                     what, code ? code : "error", msg ? msg : "(no message)");
    firn_free(code);
    firn_free(msg);
    return rc;
}

/* ---- writer ---- */

static void writer_free(s3_writer *w)
{
    for (size_t i = 0; i < w->nparts; i++)
        firn_free(w->parts[i].etag);
    firn_free(w->parts);
    firn_free(w->upload_id);
    firn_buf_deinit(&w->buf);
    firn_free(w->location);
    firn_free(w->bucket);
    firn_free(w->key);
    firn_free(w);
}

static firn_rc s3_create(firn_io *io, const char *location, firn_io_writer **out, firn_err *err)
{
    s3_io *s = (s3_io *)io;
    *out = NULL;
    char *bucket = NULL, *key = NULL;
    FIRN_TRY(split(location, &bucket, &key, err));
    s3_writer *w = firn_calloc(1, sizeof(*w));
    w->base.io = io;
    w->location = firn_strdup(location);
    w->bucket = bucket;
    w->key = key;
    firn_buf_init(&w->buf, (s->threshold > s->part_size ? s->threshold : s->part_size) + 1);
    *out = &w->base;
    return FIRN_OK;
}

static firn_rc initiate(s3_io *s, s3_writer *w, firn_err *err)
{
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_rc rc = s3_call(s, FIRN_HTTP_POST, w->bucket, w->key, "uploads", NULL, NULL, 0,
                         XML_REPLY_MAX, &resp, err);
    if (!rc) {
        w->upload_id = firn__io_xml_text((const char *)resp.body.data, resp.body.len, "UploadId");
        if (!w->upload_id)
            rc = firn_err_set(err, FIRN_ERR_PROTOCOL,
                              "multipart upload of \"%s\" started without an upload id",
                              w->location);
    }
    firn_http_response_deinit(&resp);
    return rc;
}

static firn_rc upload_part(s3_io *s, s3_writer *w, size_t len, firn_err *err)
{
    if (w->nparts >= MAX_PARTS)
        return firn_err_set(err, FIRN_ERR_TOO_LARGE, "object \"%s\" needs more than %d parts",
                            w->location, MAX_PARTS);
    firn_buf query;
    firn_buf_init(&query, URL_MAX);
    firn_rc rc = firn_buf_appendf(&query, "partNumber=%zu&uploadId=", w->nparts + 1);
    if (!rc)
        rc = firn_url_encode(&query, w->upload_id, strlen(w->upload_id), false);
    firn_http_response resp;
    firn_http_response_init(&resp);
    if (!rc)
        rc = s3_call(s, FIRN_HTTP_PUT, w->bucket, w->key, (const char *)query.data, NULL,
                     w->buf.data, len, XML_REPLY_MAX, &resp, err);
    const char *etag = rc ? NULL : firn_http_headers_get(&resp.headers, "ETag");
    if (!rc && !etag)
        rc = firn_err_set(err, FIRN_ERR_PROTOCOL, "part %zu of \"%s\" was stored without an ETag",
                          w->nparts + 1, w->location);
    if (!rc) {
        if (w->nparts == w->cap) {
            w->cap = w->cap ? w->cap * 2 : 16;
            w->parts = firn_reallocarray(w->parts, w->cap, sizeof(*w->parts));
        }
        w->parts[w->nparts++].etag = firn_strdup(etag);
        memmove(w->buf.data, w->buf.data + len, w->buf.len - len);
        firn_buf_truncate(&w->buf, w->buf.len - len);
    }
    firn_http_response_deinit(&resp);
    firn_buf_deinit(&query);
    return rc;
}

/* Uploads whole parts from the buffer once it reached its limit. */
static firn_rc flush_parts(s3_io *s, s3_writer *w, firn_err *err)
{
    if (!w->upload_id)
        FIRN_TRY(initiate(s, w, err));
    while (w->buf.len >= s->part_size)
        FIRN_TRY(upload_part(s, w, s->part_size, err));
    return FIRN_OK;
}

static firn_rc s3_write(firn_io_writer *wb, const void *p, size_t len, firn_err *err)
{
    s3_writer *w = (s3_writer *)wb;
    s3_io *s = (s3_io *)wb->io;
    const uint8_t *src = p;
    while (len > 0) {
        size_t limit = w->upload_id ? s->part_size : s->threshold;
        size_t room = limit > w->buf.len ? limit - w->buf.len : 0;
        size_t n = len < room ? len : room;
        if (n > 0) {
            FIRN_TRY(firn_buf_append(&w->buf, src, n));
            src += n;
            len -= n;
            wb->bytes_written += n;
        }
        if (w->buf.len >= limit)
            FIRN_TRY(flush_parts(s, w, err));
    }
    return FIRN_OK;
}

static void abort_upload(s3_io *s, s3_writer *w)
{
    if (!w->upload_id)
        return;
    firn_buf query;
    firn_buf_init(&query, URL_MAX);
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_err err = {0};
    if (firn_buf_append_cstr(&query, "uploadId=") == FIRN_OK &&
        firn_url_encode(&query, w->upload_id, strlen(w->upload_id), false) == FIRN_OK &&
        s3_call(s, FIRN_HTTP_DELETE, w->bucket, w->key, (const char *)query.data, NULL, NULL, 0,
                XML_REPLY_MAX, &resp, &err) != FIRN_OK)
        FIRN_LOG(FIRN_LOG_WARN, "io", "could not abort multipart upload of \"%s\": %s", w->location,
                 err.msg);
    firn_http_response_deinit(&resp);
    firn_buf_deinit(&query);
}

static firn_rc complete_body(const s3_writer *w, firn_buf *xml)
{
    FIRN_TRY(firn_buf_append_cstr(xml, "<CompleteMultipartUpload>"));
    for (size_t i = 0; i < w->nparts; i++)
        FIRN_TRY(firn_buf_appendf(xml, "<Part><PartNumber>%zu</PartNumber><ETag>%s</ETag></Part>",
                                  i + 1, w->parts[i].etag));
    return firn_buf_append_cstr(xml, "</CompleteMultipartUpload>");
}

static void add_conditional(const s3_io *s, firn_http_headers *h)
{
    if (s->conditional_put)
        firn_http_headers_add(h, "If-None-Match", "*");
}

static firn_rc s3_head(s3_io *s, const char *location, uint64_t *out_size, firn_err *err);

/* A complete found no such upload: an earlier attempt whose reply was lost (retried by us or,
 * on a reused connection, by libcurl itself) may have finished it. Accept the object when it is
 * there with exactly the bytes written. */
static firn_rc completed_before(s3_io *s, s3_writer *w, firn_err *err)
{
    uint64_t size = 0;
    firn_err head_err = {0};
    if (s3_head(s, w->location, &size, &head_err) == FIRN_OK && size == w->base.bytes_written) {
        FIRN_LOG(FIRN_LOG_INFO, "io", "multipart upload of \"%s\" had completed already",
                 w->location);
        firn_err_clear(err);
        return FIRN_OK;
    }
    return firn_err_set(err, FIRN_ERR_IO,
                        "multipart upload of \"%s\" vanished before it was completed", w->location);
}

static firn_rc complete(s3_io *s, s3_writer *w, firn_err *err)
{
    if (w->buf.len > 0 || w->nparts == 0)
        FIRN_TRY(upload_part(s, w, w->buf.len, err));
    firn_buf xml, query;
    firn_buf_init(&xml, (size_t)MAX_PARTS * 256);
    firn_buf_init(&query, URL_MAX);
    firn_http_headers h;
    firn_http_headers_init(&h);
    firn_http_headers_add(&h, "Content-Type", "application/xml");
    add_conditional(s, &h);
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_rc rc = complete_body(w, &xml);
    if (!rc)
        rc = firn_buf_append_cstr(&query, "uploadId=");
    if (!rc)
        rc = firn_url_encode(&query, w->upload_id, strlen(w->upload_id), false);
    if (!rc)
        rc = s3_call(s, FIRN_HTTP_POST, w->bucket, w->key, (const char *)query.data, &h, xml.data,
                     xml.len, XML_REPLY_MAX, &resp, err);
    if (!rc)
        rc = check_xml_error(&resp, "complete the multipart upload", err);
    if (rc == FIRN_ERR_NOT_FOUND)
        rc = completed_before(s, w, err);
    firn_http_response_deinit(&resp);
    firn_http_headers_deinit(&h);
    firn_buf_deinit(&xml);
    firn_buf_deinit(&query);
    return rc;
}

static firn_rc put_whole(s3_io *s, s3_writer *w, firn_err *err)
{
    firn_http_headers h;
    firn_http_headers_init(&h);
    add_conditional(s, &h);
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_rc rc = s3_call(s, FIRN_HTTP_PUT, w->bucket, w->key, NULL, &h, w->buf.data, w->buf.len,
                         XML_REPLY_MAX, &resp, err);
    firn_http_response_deinit(&resp);
    firn_http_headers_deinit(&h);
    return rc;
}

static firn_rc s3_close(firn_io_writer *wb, uint64_t *out_size, firn_err *err)
{
    s3_writer *w = (s3_writer *)wb;
    s3_io *s = (s3_io *)wb->io;
    firn_rc rc = w->upload_id ? complete(s, w, err) : put_whole(s, w, err);
    if (rc == FIRN_ERR_EXISTS)
        firn_rc_ignore(firn_err_set(err, rc, "object \"%s\" already exists", w->location));
    if (rc)
        abort_upload(s, w);
    else if (out_size)
        *out_size = wb->bytes_written;
    writer_free(w);
    return rc;
}

static void s3_abort(firn_io_writer *wb)
{
    s3_writer *w = (s3_writer *)wb;
    abort_upload((s3_io *)wb->io, w);
    writer_free(w);
}

/* ---- reads, sizes, deletes ---- */

static firn_rc s3_get(s3_io *s,
                      const char *location,
                      const char *range,
                      size_t max_reply,
                      firn_http_response *resp,
                      firn_err *err)
{
    char *bucket = NULL, *key = NULL;
    FIRN_TRY(split(location, &bucket, &key, err));
    firn_http_headers h;
    firn_http_headers_init(&h);
    if (range)
        firn_http_headers_add(&h, "Range", range);
    firn_rc rc = s3_call(s, FIRN_HTTP_GET, bucket, key, NULL, &h, NULL, 0, max_reply, resp, err);
    if (rc == FIRN_ERR_NOT_FOUND)
        rc = firn_err_set(err, rc, "object \"%s\" does not exist", location);
    firn_http_headers_deinit(&h);
    firn_free(bucket);
    firn_free(key);
    return rc;
}

static firn_rc s3_read(firn_io *io, const char *location, firn_buf *out, firn_err *err)
{
    firn_http_response resp;
    firn_http_response_init(&resp);
    size_t room = out->max - out->len;
    firn_rc rc = s3_get((s3_io *)io, location, NULL, room ? room : 1, &resp, err);
    if (!rc)
        rc = firn__io_take_range(&resp.body, resp.body.len, location, out, err);
    firn_http_response_deinit(&resp);
    return rc;
}

static firn_rc s3_read_range(
    firn_io *io, const char *location, uint64_t offset, size_t len, firn_buf *out, firn_err *err)
{
    if (len == 0)
        return FIRN_OK;
    char range[64];
    snprintf(range, sizeof(range), "bytes=%llu-%llu", (unsigned long long)offset,
             (unsigned long long)(offset + len - 1));
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_rc rc = s3_get((s3_io *)io, location, range, len + 1, &resp, err);
    if (rc == FIRN_ERR_PROTOCOL && resp.status == 416)
        rc = firn_err_set(err, FIRN_ERR_IO, "object \"%s\" is shorter than %llu bytes", location,
                          (unsigned long long)(offset + len));
    else if (!rc && resp.status != 206)
        rc = firn_err_set(err, FIRN_ERR_PROTOCOL, "server ignored the range of \"%s\" (HTTP %ld)",
                          location, resp.status);
    if (!rc)
        rc = firn__io_take_range(&resp.body, len, location, out, err);
    firn_http_response_deinit(&resp);
    return rc;
}

static firn_rc s3_head(s3_io *s, const char *location, uint64_t *out_size, firn_err *err)
{
    char *bucket = NULL, *key = NULL;
    FIRN_TRY(split(location, &bucket, &key, err));
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_rc rc =
        s3_call(s, FIRN_HTTP_HEAD, bucket, key, NULL, NULL, NULL, 0, XML_REPLY_MAX, &resp, err);
    if (rc == FIRN_ERR_NOT_FOUND)
        rc = firn_err_set(err, rc, "object \"%s\" does not exist", location);
    const char *cl = rc ? NULL : firn_http_headers_get(&resp.headers, "Content-Length");
    uint64_t size = 0;
    if (!rc && (!cl || firn_parse_u64(cl, strlen(cl), &size, NULL) != FIRN_OK))
        rc = firn_err_set(err, FIRN_ERR_PROTOCOL, "no object size for \"%s\"", location);
    if (!rc && out_size)
        *out_size = size;
    firn_http_response_deinit(&resp);
    firn_free(bucket);
    firn_free(key);
    return rc;
}

static firn_rc s3_size(firn_io *io, const char *location, uint64_t *out_size, firn_err *err)
{
    return s3_head((s3_io *)io, location, out_size, err);
}

static firn_rc s3_remove(firn_io *io, const char *location, firn_err *err)
{
    s3_io *s = (s3_io *)io;
    /* S3 deletes of missing keys succeed; the FileIO contract reports them. */
    FIRN_TRY(s3_head(s, location, NULL, err));
    char *bucket = NULL, *key = NULL;
    FIRN_TRY(split(location, &bucket, &key, err));
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_rc rc =
        s3_call(s, FIRN_HTTP_DELETE, bucket, key, NULL, NULL, NULL, 0, XML_REPLY_MAX, &resp, err);
    firn_http_response_deinit(&resp);
    firn_free(bucket);
    firn_free(key);
    return rc;
}

/* Calls fn for each <Contents> of one ListObjectsV2 page; *token is the next page's
 * continuation token (owned), NULL after the last page. */
static firn_rc list_page(const char *xml,
                         size_t len,
                         const char *scheme,
                         const char *bucket,
                         firn_io_list_fn fn,
                         void *ctx,
                         char **token,
                         firn_err *err)
{
    *token = NULL;
    const char *end = xml + len;
    firn_buf loc;
    firn_buf_init(&loc, URL_MAX);
    firn_rc rc = FIRN_OK;
    for (const char *p = xml; rc == FIRN_OK && p < end;) {
        const char *open = strstr(p, "<Contents>");
        if (!open || open >= end)
            break;
        const char *close = strstr(open, "</Contents>");
        if (!close || close >= end) {
            rc = firn_err_set(err, FIRN_ERR_PROTOCOL, "truncated ListObjectsV2 reply");
            break;
        }
        size_t n = (size_t)(close - open);
        char *key = firn__io_xml_text(open, n, "Key");
        char *size = firn__io_xml_text(open, n, "Size");
        char *modified = firn__io_xml_text(open, n, "LastModified");
        uint64_t bytes = 0;
        if (!key || !size || firn_parse_u64(size, strlen(size), &bytes, NULL) != FIRN_OK) {
            rc = firn_err_set(err, FIRN_ERR_PROTOCOL, "ListObjectsV2 entry without Key or Size");
        } else {
            firn_buf_reset(&loc);
            rc = firn_buf_appendf(&loc, "%s://%s/%s", scheme, bucket, key);
            if (rc == FIRN_OK)
                rc = fn(ctx, (const char *)loc.data, bytes, firn_time_parse_ms(modified), err);
        }
        firn_free(key);
        firn_free(size);
        firn_free(modified);
        p = close + strlen("</Contents>");
    }
    firn_buf_deinit(&loc);
    char *truncated = firn__io_xml_text(xml, len, "IsTruncated");
    if (rc == FIRN_OK && truncated && strcmp(truncated, "true") == 0) {
        *token = firn__io_xml_text(xml, len, "NextContinuationToken");
        if (!*token)
            rc = firn_err_set(err, FIRN_ERR_PROTOCOL, "truncated listing without a token");
    }
    firn_free(truncated);
    return rc;
}

static firn_rc
s3_list(firn_io *io, const char *prefix, firn_io_list_fn fn, void *ctx, firn_err *err)
{
    s3_io *s = (s3_io *)io;
    char *scheme = NULL, *bucket = NULL, *key = NULL;
    FIRN_TRY(firn_io_split_location(prefix, &scheme, &bucket, &key, err));
    firn_buf folder;
    firn_buf_init(&folder, URL_MAX);
    size_t kn = strlen(key);
    while (kn > 0 && key[kn - 1] == '/')
        kn--;
    firn_rc rc = firn_buf_append(&folder, key, kn);
    if (rc == FIRN_OK && kn > 0)
        rc = firn_buf_append_cstr(&folder, "/");
    if (rc == FIRN_OK)
        rc = firn_buf_append(&folder, "", 1);
    char *token = NULL;
    for (bool first = true; rc == FIRN_OK && (first || token); first = false) {
        firn_buf q;
        firn_buf_init(&q, URL_MAX);
        rc = firn_buf_append_cstr(&q, "list-type=2&prefix=");
        if (rc == FIRN_OK)
            rc = firn_url_encode(&q, (const char *)folder.data, strlen((char *)folder.data), false);
        if (rc == FIRN_OK && token) {
            rc = firn_buf_append_cstr(&q, "&continuation-token=");
            if (rc == FIRN_OK)
                rc = firn_url_encode(&q, token, strlen(token), false);
        }
        firn_free(token);
        token = NULL;
        if (rc == FIRN_OK)
            rc = firn_buf_append(&q, "", 1);
        firn_http_response resp;
        firn_http_response_init(&resp);
        if (rc == FIRN_OK)
            rc = s3_call(s, FIRN_HTTP_GET, bucket, "", (const char *)q.data, NULL, NULL, 0,
                         (size_t)64 << 20, &resp, err);
        if (rc == FIRN_OK)
            rc = check_xml_error(&resp, "list objects", err);
        if (rc == FIRN_OK)
            rc = list_page((const char *)resp.body.data, resp.body.len, scheme, bucket, fn, ctx,
                           &token, err);
        firn_http_response_deinit(&resp);
        firn_buf_deinit(&q);
    }
    if (rc && rc != FIRN_ERR_TOO_LARGE)
        firn_err_context(err, "while listing \"%s\"", prefix);
    firn_free(token);
    firn_buf_deinit(&folder);
    firn_free(scheme);
    firn_free(bucket);
    firn_free(key);
    return rc;
}

static void s3_destroy(firn_io *io)
{
    s3_io *s = (s3_io *)io;
    firn_http_free(s->http);
    firn_cred_unref(s->cred);
    firn_free(s->scheme);
    firn_free(s->host);
    firn_free(s->prefix);
    firn_free(s);
}

static const firn_io_vtable s3_vt = {
    .scheme = "s3",
    .create = s3_create,
    .write = s3_write,
    .close = s3_close,
    .abort = s3_abort,
    .read = s3_read,
    .read_range = s3_read_range,
    .size = s3_size,
    .remove = s3_remove,
    .destroy = s3_destroy,
    .list = s3_list,
};

/* ---- setup ---- */

static const char *env_nonempty(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static firn_rc parse_endpoint(s3_io *s, const char *endpoint, firn_err *err)
{
    const char *sep = strstr(endpoint, "://");
    size_t slen = sep ? (size_t)(sep - endpoint) : 0;
    if (!sep || !((slen == 4 && strncmp(endpoint, "http", 4) == 0) ||
                  (slen == 5 && strncmp(endpoint, "https", 5) == 0)))
        return firn_err_set(
            err, FIRN_ERR_CONFIG, "S3 endpoint \"%s\" must start with http:// or https://",
            firn_url_redact((char[FIRN_URL_REDACTED_MAX]){0}, FIRN_URL_REDACTED_MAX, endpoint));
    const char *h = sep + 3;
    size_t hlen = strcspn(h, "/?#");
    if (hlen == 0)
        return firn_err_set(
            err, FIRN_ERR_CONFIG, "S3 endpoint \"%s\" has no host",
            firn_url_redact((char[FIRN_URL_REDACTED_MAX]){0}, FIRN_URL_REDACTED_MAX, endpoint));
    const char *path = h + hlen;
    size_t plen = strcspn(path, "?#");
    while (plen > 0 && path[plen - 1] == '/')
        plen--;
    s->scheme = firn_strndup(endpoint, slen);
    s->host = firn_strndup(h, hlen);
    s->prefix = firn_strndup(path, plen);
    return FIRN_OK;
}

static firn_rc make_cred(s3_io *s, const firn_s3_options *o, const char *region, firn_err *err)
{
    if (o->cred) {
        s->cred = firn_cred_ref(o->cred);
        return FIRN_OK;
    }
    firn_sigv4_options so = {.service = "s3",
                             .region = region,
                             .access_key_id = o->access_key_id,
                             .secret_access_key = o->secret_access_key,
                             .session_token = o->session_token,
                             .fn = o->keys_fn,
                             .fn_ctx = o->keys_ctx,
                             .unsigned_payload = o->unsigned_payload};
    return firn_cred_sigv4_new(&so, &s->cred, err);
}

firn_rc firn_io_s3_new(const firn_s3_options *o, firn_io **out, firn_err *err)
{
    *out = NULL;
    const char *region = o->region && *o->region ? o->region : env_nonempty("AWS_REGION");
    if (!region)
        region = env_nonempty("AWS_DEFAULT_REGION");
    if (!region)
        region = "us-east-1";
    const char *endpoint =
        o->endpoint && *o->endpoint ? o->endpoint : env_nonempty("AWS_ENDPOINT_URL_S3");
    if (!endpoint)
        endpoint = env_nonempty("AWS_ENDPOINT_URL");
    s3_io *s = firn_calloc(1, sizeof(*s));
    s->base.vt = &s3_vt;
    s->threshold = o->multipart_threshold ? o->multipart_threshold : DEFAULT_MULTI;
    s->part_size = o->part_size ? o->part_size : DEFAULT_PART;
    s->conditional_put = o->conditional_put;
    firn_rc rc = FIRN_OK;
    if (s->part_size < MIN_PART_SIZE)
        rc = firn_err_set(err, FIRN_ERR_CONFIG, "S3 part size %zu is below the 5 MiB minimum",
                          s->part_size);
    if (!rc && endpoint) {
        rc = parse_endpoint(s, endpoint, err);
    } else if (!rc) {
        firn_buf host;
        firn_buf_init(&host, 1024);
        rc = firn_buf_appendf(&host, "s3.%s.amazonaws.com", region);
        s->scheme = firn_strdup("https");
        s->host = (char *)firn_buf_take(&host, NULL);
        s->prefix = firn_strdup("");
    }
    if (!rc) {
        s->path_style = o->addressing == FIRN_S3_ADDRESSING_PATH ||
                        (o->addressing == FIRN_S3_ADDRESSING_AUTO && endpoint);
        s->dotted_path_style = o->addressing == FIRN_S3_ADDRESSING_AUTO;
        rc = make_cred(s, o, region, err);
    }
    if (!rc)
        rc = firn_http_new(&o->http, &s->http, err);
    if (rc) {
        s3_destroy(&s->base);
        return rc;
    }
    *out = &s->base;
    return FIRN_OK;
}
