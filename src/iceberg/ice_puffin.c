/* SPDX-License-Identifier: Apache-2.0 */
/* deletion-vector-v1 blobs and Puffin files (format/puffin-spec.md, format/spec.md "Deletion
 * Vectors"; DELETES.md §4): what Iceberg Java's BaseDVFileWriter and PuffinWriter produce, with
 * an uncompressed footer as pyiceberg requires. */
#include "firn/puffin.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

static const uint8_t DV_MAGIC[4] = {0xD1, 0xD3, 0x39, 0x64};
static const uint8_t PUFFIN_MAGIC[4] = {'P', 'F', 'A', '1'};
#define FOOTER_FLAG_COMPRESSED 0x01 /* byte 0, bit 0 */

static uint32_t crc32_of(const uint8_t *p, size_t len)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    while (len > 0) {
        uInt chunk = len > (1u << 30) ? (1u << 30) : (uInt)len;
        crc = crc32(crc, p, chunk);
        p += chunk;
        len -= chunk;
    }
    return (uint32_t)crc;
}

firn_rc firn_dv_encode(const firn_bitmap64 *b, firn_buf *out)
{
    size_t mark = out->len;
    firn_rc rc = firn_wr_be32(out, 0); /* length, patched below */
    if (!rc)
        rc = firn_buf_append(out, DV_MAGIC, sizeof(DV_MAGIC));
    if (!rc)
        rc = firn_bitmap64_serialize(b, out);
    size_t body = mark + 4;
    size_t body_len = out->len - body;
    if (!rc && body_len > UINT32_MAX)
        rc = FIRN_ERR_TOO_LARGE;
    if (!rc)
        rc = firn_wr_be32(out, crc32_of(out->data + body, body_len));
    if (rc) {
        firn_buf_truncate(out, mark);
        return rc;
    }
    uint32_t l = (uint32_t)body_len;
    uint8_t be[4] = {(uint8_t)(l >> 24), (uint8_t)(l >> 16), (uint8_t)(l >> 8), (uint8_t)l};
    memcpy(out->data + mark, be, 4);
    return FIRN_OK;
}

static uint32_t be32_at(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

firn_rc firn_dv_decode(const void *p, size_t len, firn_bitmap64 **out, firn_err *err)
{
    const uint8_t *b = p;
    if (len < 12)
        return firn_err_set(err, FIRN_ERR_PARSE, "deletion vector of %zu bytes is too short", len);
    uint32_t l = be32_at(b);
    if ((size_t)l != len - 8)
        return firn_err_set(err, FIRN_ERR_PARSE,
                            "deletion vector length %u does not match its %zu-byte blob",
                            (unsigned)l, len);
    if (memcmp(b + 4, DV_MAGIC, 4) != 0)
        return firn_err_set(err, FIRN_ERR_PARSE, "invalid deletion vector magic");
    uint32_t crc = be32_at(b + len - 4);
    if (crc32_of(b + 4, l) != crc)
        return firn_err_set(err, FIRN_ERR_PARSE, "deletion vector checksum mismatch");
    firn_rc rc = firn_bitmap64_deserialize(b + 8, l - 4, out, err);
    if (rc)
        firn_err_context(err, "while decoding a deletion vector");
    return rc;
}

/* ---- Puffin writer ------------------------------------------------------------------------ */

struct firn_puffin_writer {
    char *created_by;
    firn_buf bytes;
    json_t *blobs;
    bool finished;
};

firn_puffin_writer *firn_puffin_writer_new(const char *created_by)
{
    firn_puffin_writer *w = firn_calloc(1, sizeof(*w));
    w->created_by = firn_strdup(created_by ? created_by : "firn");
    firn_buf_init(&w->bytes, FIRN_PUFFIN_MAX_BYTES);
    FIRN_ASSERT(firn_buf_append(&w->bytes, PUFFIN_MAGIC, 4) == FIRN_OK);
    w->blobs = json_array();
    return w;
}

void firn_puffin_writer_free(firn_puffin_writer *w)
{
    if (!w)
        return;
    firn_free(w->created_by);
    firn_buf_deinit(&w->bytes);
    json_decref(w->blobs);
    firn_free(w);
}

size_t firn_puffin_writer_count(const firn_puffin_writer *w)
{
    return json_array_size(w->blobs);
}

firn_rc firn_puffin_writer_add_dv(firn_puffin_writer *w,
                                  const char *referenced_data_file,
                                  const firn_bitmap64 *b,
                                  int64_t *out_offset,
                                  int64_t *out_length,
                                  firn_err *err)
{
    if (w->finished)
        return firn_err_set(err, FIRN_ERR_INVALID, "puffin file is already finished");
    size_t offset = w->bytes.len;
    if (firn_dv_encode(b, &w->bytes))
        return firn_err_set(err, FIRN_ERR_TOO_LARGE, "puffin file passes %zu bytes",
                            (size_t)FIRN_PUFFIN_MAX_BYTES);
    size_t length = w->bytes.len - offset;
    char card[24];
    snprintf(card, sizeof(card), "%" PRIu64, firn_bitmap64_cardinality(b));
    json_t *props =
        json_pack("{s:s, s:s}", "referenced-data-file", referenced_data_file, "cardinality", card);
    json_t *blob =
        json_pack("{s:s, s:[i], s:i, s:i, s:I, s:I, s:o}", "type", FIRN_DV_BLOB_TYPE, "fields",
                  (int)FIRN_DV_FIELD_ID, "snapshot-id", -1, "sequence-number", -1, "offset",
                  (json_int_t)offset, "length", (json_int_t)length, "properties", props);
    FIRN_ASSERT(blob != NULL);
    json_array_append_new(w->blobs, blob);
    *out_offset = (int64_t)offset;
    *out_length = (int64_t)length;
    return FIRN_OK;
}

static int dump_cb(const char *p, size_t len, void *data)
{
    return firn_buf_append(data, p, len) ? -1 : 0;
}

firn_rc firn_puffin_writer_finish(firn_puffin_writer *w, firn_buf *out, firn_err *err)
{
    if (w->finished)
        return firn_err_set(err, FIRN_ERR_INVALID, "puffin file is already finished");
    w->finished = true;
    json_t *footer =
        json_pack("{s:O, s:{s:s}}", "blobs", w->blobs, "properties", "created-by", w->created_by);
    FIRN_ASSERT(footer != NULL);
    firn_buf *b = &w->bytes;
    firn_rc rc = firn_buf_append(b, PUFFIN_MAGIC, 4);
    size_t payload_at = b->len;
    if (!rc && json_dump_callback(footer, dump_cb, b, JSON_COMPACT) != 0)
        rc = FIRN_ERR_TOO_LARGE;
    json_decref(footer);
    size_t payload_len = b->len - payload_at;
    if (!rc && payload_len > INT32_MAX)
        rc = FIRN_ERR_TOO_LARGE;
    if (!rc)
        rc = firn_wr_le32(b, (uint32_t)payload_len);
    if (!rc)
        rc = firn_wr_le32(b, 0); /* flags: footer not compressed */
    if (!rc)
        rc = firn_buf_append(b, PUFFIN_MAGIC, 4);
    firn_buf_reset(out);
    if (!rc)
        rc = firn_buf_append(out, b->data, b->len);
    if (rc)
        return firn_err_set(err, rc, "puffin file does not fit its buffer");
    return FIRN_OK;
}

/* ---- Puffin footer reader ----------------------------------------------------------------- */

void firn_puffin_footer_deinit(firn_puffin_footer *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n_blobs; i++) {
        firn_free(f->blobs[i].type);
        firn_free(f->blobs[i].compression_codec);
        firn_free(f->blobs[i].referenced_data_file);
    }
    firn_free(f->blobs);
    firn_free(f->created_by);
    memset(f, 0, sizeof(*f));
}

static char *str_member(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? firn_strdup(json_string_value(v)) : NULL;
}

static int64_t int_member(json_t *obj, const char *key, int64_t dflt)
{
    json_t *v = json_object_get(obj, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

static firn_rc read_blob(json_t *j, size_t file_len, firn_puffin_blob *out, firn_err *err)
{
    memset(out, 0, sizeof(*out));
    out->type = str_member(j, "type");
    out->offset = int_member(j, "offset", -1);
    out->length = int_member(j, "length", -1);
    out->snapshot_id = int_member(j, "snapshot-id", -1);
    out->sequence_number = int_member(j, "sequence-number", -1);
    out->compression_codec = str_member(j, "compression-codec");
    out->cardinality = -1;
    json_t *props = json_object_get(j, "properties");
    if (json_is_object(props)) {
        out->referenced_data_file = str_member(props, "referenced-data-file");
        json_t *card = json_object_get(props, "cardinality");
        int64_t n = 0;
        if (json_is_string(card) &&
            firn_parse_i64(json_string_value(card), strlen(json_string_value(card)), &n, NULL) ==
                FIRN_OK)
            out->cardinality = n;
    }
    if (!out->type || out->offset < 4 || out->length < 0 ||
        (uint64_t)out->offset + (uint64_t)out->length > file_len)
        return firn_err_set(err, FIRN_ERR_PARSE, "puffin blob metadata is invalid");
    return FIRN_OK;
}

static firn_rc parse_payload(
    const char *json, size_t json_len, size_t file_len, firn_puffin_footer *out, firn_err *err)
{
    json_error_t jerr;
    json_t *root = json_loadb(json, json_len, 0, &jerr);
    json_t *blobs = root ? json_object_get(root, "blobs") : NULL;
    if (!json_is_array(blobs)) {
        json_decref(root);
        return firn_err_set(err, FIRN_ERR_PARSE, "puffin footer is not valid JSON with \"blobs\"");
    }
    size_t n = json_array_size(blobs);
    out->blobs = firn_calloc(n ? n : 1, sizeof(*out->blobs));
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; !rc && i < n; i++) {
        rc = read_blob(json_array_get(blobs, i), file_len, &out->blobs[i], err);
        out->n_blobs = i + 1;
    }
    json_t *props = json_object_get(root, "properties");
    if (!rc && json_is_object(props))
        out->created_by = str_member(props, "created-by");
    json_decref(root);
    return rc;
}

firn_rc
firn_puffin_footer_parse(const void *file, size_t len, firn_puffin_footer *out, firn_err *err)
{
    const uint8_t *p = file;
    memset(out, 0, sizeof(*out));
    if (len < 4 + 4 + 12 || memcmp(p, PUFFIN_MAGIC, 4) != 0 ||
        memcmp(p + len - 4, PUFFIN_MAGIC, 4) != 0)
        return firn_err_set(err, FIRN_ERR_PARSE, "not a puffin file (magic missing)");
    const uint8_t *tail = p + len - 12;
    uint32_t payload_len = (uint32_t)tail[0] | (uint32_t)tail[1] << 8 | (uint32_t)tail[2] << 16 |
                           (uint32_t)tail[3] << 24;
    if (tail[4] & FOOTER_FLAG_COMPRESSED)
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "compressed puffin footers are not read");
    if ((size_t)payload_len > len - 4 - 12 - 4)
        return firn_err_set(err, FIRN_ERR_PARSE, "puffin footer length %u is invalid",
                            (unsigned)payload_len);
    const uint8_t *footer = tail - payload_len - 4;
    if (memcmp(footer, PUFFIN_MAGIC, 4) != 0)
        return firn_err_set(err, FIRN_ERR_PARSE, "puffin footer magic missing");
    firn_rc rc = parse_payload((const char *)footer + 4, payload_len, len, out, err);
    if (rc)
        firn_puffin_footer_deinit(out);
    return rc;
}
