/* SPDX-License-Identifier: Apache-2.0 */
/* Avro binary encoders and the object container writer (Avro spec "Binary Encoding",
 * "Object Container Files"), plus the raw deflate codec shared with the reader. */
#include "avro_int.h"

#include <string.h>
#include <zlib.h>

#define DEFAULT_BLOCK_BYTES ((size_t)1 << 20)

typedef struct meta_entry {
    char *key;
    uint8_t *value;
    size_t value_len;
} meta_entry;

struct firn_avro_writer {
    char *schema_json;
    firn_avro_codec codec;
    size_t max_file_bytes;
    size_t block_bytes;
    uint8_t sync[16];
    meta_entry *meta;
    size_t n_meta;
    firn_buf block; /* encoded records of the open block */
    uint64_t block_count;
    firn_buf blocks; /* finished blocks, framed */
    firn_buf scratch;
    uint64_t count;
};

firn_rc firn_avro_put_long(firn_buf *b, int64_t v)
{
    return firn_wr_uvarint(b, firn_zigzag64(v));
}

firn_rc firn_avro_put_bool(firn_buf *b, bool v)
{
    return firn_wr_u8(b, v ? 1 : 0);
}

firn_rc firn_avro_put_float(firn_buf *b, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return firn_wr_le32(b, bits);
}

firn_rc firn_avro_put_double(firn_buf *b, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    return firn_wr_le64(b, bits);
}

firn_rc firn_avro_put_bytes(firn_buf *b, const void *p, size_t len)
{
    size_t mark = b->len;
    firn_rc rc = firn_avro_put_long(b, (int64_t)len);
    if (!rc && len > 0)
        rc = firn_buf_append(b, p, len);
    if (rc)
        firn_buf_truncate(b, mark);
    return rc;
}

firn_rc firn_avro_put_string(firn_buf *b, const char *s)
{
    return firn_avro_put_bytes(b, s, strlen(s));
}

firn_rc firn_avro_put_fixed(firn_buf *b, const void *p, size_t len)
{
    if (len == 0)
        return FIRN_OK;
    return firn_buf_append(b, p, len);
}

firn_rc firn__avro_deflate(firn_buf *out, const uint8_t *p, size_t len, firn_err *err)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (len > UINT32_MAX / 2)
        return firn_err_set(err, FIRN_ERR_TOO_LARGE, "avro block of %zu bytes is too large", len);
    if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return firn_err_set(err, FIRN_ERR_INTERNAL, "could not initialize deflate");
    size_t bound = deflateBound(&zs, (uLong)len);
    firn_rc rc = firn_buf_reserve(out, bound);
    if (rc) {
        deflateEnd(&zs);
        return firn_err_set(err, rc, "avro file passes its size limit");
    }
    zs.next_in = (Bytef *)(uintptr_t)p;
    zs.avail_in = (uInt)len;
    zs.next_out = out->data + out->len;
    zs.avail_out = (uInt)bound;
    int zrc = deflate(&zs, Z_FINISH);
    size_t produced = bound - zs.avail_out;
    deflateEnd(&zs);
    if (zrc != Z_STREAM_END)
        return firn_err_set(err, FIRN_ERR_INTERNAL, "could not deflate avro block (zlib %d)", zrc);
    out->len += produced;
    out->data[out->len] = 0;
    return FIRN_OK;
}

firn_rc firn__avro_inflate(firn_buf *out, const uint8_t *p, size_t len, firn_err *err)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (len > UINT32_MAX)
        return firn_err_set(err, FIRN_ERR_TOO_LARGE, "avro block of %zu bytes is too large", len);
    if (inflateInit2(&zs, -15) != Z_OK)
        return firn_err_set(err, FIRN_ERR_INTERNAL, "could not initialize inflate");
    zs.next_in = (Bytef *)(uintptr_t)p;
    zs.avail_in = (uInt)len;
    firn_rc rc = FIRN_OK;
    int zrc = Z_OK;
    while (zrc != Z_STREAM_END) {
        size_t room = len * 2 + 4096;
        if (room > out->max - out->len)
            room = out->max - out->len;
        if (room == 0 || firn_buf_reserve(out, room)) {
            rc = firn_err_set(err, FIRN_ERR_TOO_LARGE, "inflated avro block passes %zu bytes",
                              out->max);
            goto out;
        }
        zs.next_out = out->data + out->len;
        zs.avail_out = (uInt)(room > UINT32_MAX ? UINT32_MAX : room);
        uInt before = zs.avail_out;
        zrc = inflate(&zs, Z_NO_FLUSH);
        out->len += before - zs.avail_out;
        out->data[out->len] = 0;
        if (zrc == Z_STREAM_END)
            break;
        if (zrc != Z_OK || (zs.avail_in == 0 && zs.avail_out != 0)) {
            rc = firn_err_set(err, FIRN_ERR_PARSE, "invalid deflate data in avro block");
            goto out;
        }
    }
out:
    inflateEnd(&zs);
    return rc;
}

firn_avro_writer *
firn_avro_writer_new(const char *schema_json, firn_avro_codec codec, size_t max_file_bytes)
{
    firn_avro_writer *w = firn_calloc(1, sizeof *w);
    w->schema_json = firn_strdup(schema_json);
    w->codec = codec;
    w->max_file_bytes = max_file_bytes;
    w->block_bytes = DEFAULT_BLOCK_BYTES;
    firn_buf_init(&w->block, max_file_bytes);
    firn_buf_init(&w->blocks, max_file_bytes);
    firn_buf_init(&w->scratch, max_file_bytes + 1024);
    firn_uuid_v4(w->sync);
    return w;
}

void firn_avro_writer_free(firn_avro_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_meta; i++) {
        firn_free(w->meta[i].key);
        firn_free(w->meta[i].value);
    }
    firn_free(w->meta);
    firn_free(w->schema_json);
    firn_buf_deinit(&w->block);
    firn_buf_deinit(&w->blocks);
    firn_buf_deinit(&w->scratch);
    firn_free(w);
}

firn_rc firn_avro_writer_set_meta(
    firn_avro_writer *w, const char *key, const void *value, size_t value_len, firn_err *err)
{
    if (strncmp(key, "avro.", 5) == 0)
        return firn_err_set(err, FIRN_ERR_INVALID, "avro metadata key \"%s\" is reserved", key);
    if (w->count > 0 || w->block_count > 0)
        return firn_err_set(err, FIRN_ERR_INVALID,
                            "cannot set avro metadata \"%s\" after the first record", key);
    for (size_t i = 0; i < w->n_meta; i++) {
        if (strcmp(w->meta[i].key, key) == 0) {
            firn_free(w->meta[i].value);
            w->meta[i].value = firn_memdup(value, value_len);
            w->meta[i].value_len = value_len;
            return FIRN_OK;
        }
    }
    w->meta = firn_reallocarray(w->meta, w->n_meta + 1, sizeof *w->meta);
    w->meta[w->n_meta].key = firn_strdup(key);
    w->meta[w->n_meta].value = firn_memdup(value, value_len);
    w->meta[w->n_meta].value_len = value_len;
    w->n_meta++;
    return FIRN_OK;
}

void firn_avro_writer_set_sync(firn_avro_writer *w, const uint8_t sync[16])
{
    memcpy(w->sync, sync, 16);
}

void firn_avro_writer_set_block_bytes(firn_avro_writer *w, size_t block_bytes)
{
    w->block_bytes = block_bytes > 0 ? block_bytes : 1;
}

firn_buf *firn_avro_writer_record(firn_avro_writer *w)
{
    return &w->block;
}

uint64_t firn_avro_writer_count(const firn_avro_writer *w)
{
    return w->count;
}

/* Frames the open block (count, size, payload, sync) onto w->blocks. */
static firn_rc flush_block(firn_avro_writer *w, firn_err *err)
{
    if (w->block_count == 0)
        return FIRN_OK;
    const uint8_t *payload = w->block.data;
    size_t payload_len = w->block.len;
    firn_buf_reset(&w->scratch);
    if (w->codec == FIRN_AVRO_CODEC_DEFLATE) {
        FIRN_TRY(firn__avro_deflate(&w->scratch, w->block.data, w->block.len, err));
        payload = w->scratch.data;
        payload_len = w->scratch.len;
    }
    size_t mark = w->blocks.len;
    firn_rc rc = firn_avro_put_long(&w->blocks, (int64_t)w->block_count);
    if (!rc)
        rc = firn_avro_put_long(&w->blocks, (int64_t)payload_len);
    if (!rc)
        rc = firn_buf_append(&w->blocks, payload, payload_len);
    if (!rc)
        rc = firn_buf_append(&w->blocks, w->sync, 16);
    if (rc) {
        firn_buf_truncate(&w->blocks, mark);
        return firn_err_set(err, rc, "avro file passes its limit of %zu bytes", w->max_file_bytes);
    }
    firn_buf_reset(&w->block);
    w->block_count = 0;
    return FIRN_OK;
}

firn_rc firn_avro_writer_end_record(firn_avro_writer *w, firn_err *err)
{
    w->block_count++;
    w->count++;
    if (w->block.len >= w->block_bytes)
        return flush_block(w, err);
    return FIRN_OK;
}

static firn_rc put_meta(firn_buf *b, const char *key, const void *value, size_t value_len)
{
    FIRN_TRY(firn_avro_put_string(b, key));
    return firn_avro_put_bytes(b, value, value_len);
}

firn_rc firn_avro_writer_finish(firn_avro_writer *w, firn_buf *out, firn_err *err)
{
    FIRN_TRY(flush_block(w, err));
    const char *codec = w->codec == FIRN_AVRO_CODEC_DEFLATE ? "deflate" : "null";
    size_t mark = out->len;
    firn_rc rc = firn_buf_append(out, FIRN__AVRO_MAGIC, 4);
    if (!rc)
        rc = firn_avro_put_long(out, (int64_t)w->n_meta + 2);
    if (!rc)
        rc = put_meta(out, "avro.schema", w->schema_json, strlen(w->schema_json));
    if (!rc)
        rc = put_meta(out, "avro.codec", codec, strlen(codec));
    for (size_t i = 0; !rc && i < w->n_meta; i++)
        rc = put_meta(out, w->meta[i].key, w->meta[i].value, w->meta[i].value_len);
    if (!rc)
        rc = firn_avro_put_long(out, 0);
    if (!rc)
        rc = firn_buf_append(out, w->sync, 16);
    if (!rc && w->blocks.len > 0)
        rc = firn_buf_append(out, w->blocks.data, w->blocks.len);
    if (!rc && out->len - mark > w->max_file_bytes)
        rc = FIRN_ERR_TOO_LARGE;
    if (rc) {
        firn_buf_truncate(out, mark);
        return firn_err_set(err, rc, "avro file passes its limit of %zu bytes", w->max_file_bytes);
    }
    return FIRN_OK;
}
