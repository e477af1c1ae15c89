/* SPDX-License-Identifier: Apache-2.0 */
/* Thrift compact protocol (apache/thrift doc/specs/thrift-compact-protocol.md): a sticky-error
 * encoder into a firn_buf and a bounded decoder over a firn_rd cursor. */
#include "pq_int.h"

#include <string.h>

/* ---- encoder ------------------------------------------------------------------------------ */

void firn__pq_tw_init(pq_tw *w, firn_buf *b)
{
    w->b = b;
    w->depth = 0;
    w->last[0] = 0;
    w->rc = FIRN_OK;
}

static void put_u8(pq_tw *w, uint8_t v)
{
    if (!w->rc)
        w->rc = firn_wr_u8(w->b, v);
}

static void put_varint(pq_tw *w, uint64_t v)
{
    if (!w->rc)
        w->rc = firn_wr_uvarint(w->b, v);
}

static void put_bytes(pq_tw *w, const void *p, size_t len)
{
    if (!w->rc && len)
        w->rc = firn_buf_append(w->b, p, len);
}

static void field_header(pq_tw *w, int16_t id, uint8_t type)
{
    int16_t delta = (int16_t)(id - w->last[w->depth]);
    if (delta > 0 && delta <= 15) {
        put_u8(w, (uint8_t)((delta << 4) | type));
    } else {
        put_u8(w, type);
        put_varint(w, firn_zigzag64(id));
    }
    w->last[w->depth] = id;
}

void firn__pq_tw_struct_begin(pq_tw *w)
{
    FIRN_ASSERT(w->depth + 1 < PQ_MAX_DEPTH);
    w->depth++;
    w->last[w->depth] = 0;
}

void firn__pq_tw_struct_end(pq_tw *w)
{
    FIRN_ASSERT(w->depth > 0);
    put_u8(w, TC_STOP);
    w->depth--;
}

void firn__pq_tw_field_struct(pq_tw *w, int16_t id)
{
    field_header(w, id, TC_STRUCT);
    firn__pq_tw_struct_begin(w);
}

void firn__pq_tw_field_i32(pq_tw *w, int16_t id, int32_t v)
{
    field_header(w, id, TC_I32);
    put_varint(w, firn_zigzag64(v));
}

void firn__pq_tw_field_i64(pq_tw *w, int16_t id, int64_t v)
{
    field_header(w, id, TC_I64);
    put_varint(w, firn_zigzag64(v));
}

void firn__pq_tw_field_i16(pq_tw *w, int16_t id, int16_t v)
{
    field_header(w, id, TC_I16);
    put_varint(w, firn_zigzag64(v));
}

void firn__pq_tw_field_i8(pq_tw *w, int16_t id, int8_t v)
{
    field_header(w, id, TC_BYTE);
    put_u8(w, (uint8_t)v);
}

void firn__pq_tw_field_bool(pq_tw *w, int16_t id, bool v)
{
    field_header(w, id, v ? TC_TRUE : TC_FALSE);
}

void firn__pq_tw_field_bin(pq_tw *w, int16_t id, const void *p, size_t len)
{
    field_header(w, id, TC_BINARY);
    firn__pq_tw_bin(w, p, len);
}

void firn__pq_tw_field_list(pq_tw *w, int16_t id, uint8_t elem_type, size_t n)
{
    field_header(w, id, TC_LIST);
    if (n < 15) {
        put_u8(w, (uint8_t)((n << 4) | elem_type));
    } else {
        put_u8(w, (uint8_t)(0xF0 | elem_type));
        put_varint(w, n);
    }
}

void firn__pq_tw_i32(pq_tw *w, int32_t v)
{
    put_varint(w, firn_zigzag64(v));
}

void firn__pq_tw_i64(pq_tw *w, int64_t v)
{
    put_varint(w, firn_zigzag64(v));
}

void firn__pq_tw_bin(pq_tw *w, const void *p, size_t len)
{
    put_varint(w, len);
    put_bytes(w, p, len);
}

void firn__pq_page_header(pq_tw *w,
                          int type,
                          size_t uncompressed,
                          size_t compressed,
                          int32_t num_values,
                          int encoding,
                          bool has_levels)
{
    (void)has_levels;
    firn__pq_tw_struct_begin(w);
    firn__pq_tw_field_i32(w, 1, type);
    firn__pq_tw_field_i32(w, 2, (int32_t)uncompressed);
    firn__pq_tw_field_i32(w, 3, (int32_t)compressed);
    if (type == PQ_PAGE_DATA) {
        firn__pq_tw_field_struct(w, 5);
        firn__pq_tw_field_i32(w, 1, num_values);
        firn__pq_tw_field_i32(w, 2, encoding);
        firn__pq_tw_field_i32(w, 3, PQ_ENC_RLE);
        firn__pq_tw_field_i32(w, 4, PQ_ENC_RLE);
        firn__pq_tw_struct_end(w);
    } else {
        firn__pq_tw_field_struct(w, 7);
        firn__pq_tw_field_i32(w, 1, num_values);
        firn__pq_tw_field_i32(w, 2, encoding);
        firn__pq_tw_struct_end(w);
    }
    firn__pq_tw_struct_end(w);
}

/* ---- decoder ------------------------------------------------------------------------------ */

void firn__pq_tr_init(pq_tr *r, const void *p, size_t len)
{
    firn_rd_init(&r->rd, p, len);
    r->depth = 0;
    r->last[0] = 0;
}

void firn__pq_tr_struct_begin(pq_tr *r)
{
    if (r->depth + 1 >= PQ_MAX_DEPTH) {
        firn_rd_fail(&r->rd);
        return;
    }
    r->depth++;
    r->last[r->depth] = 0;
}

void firn__pq_tr_struct_end(pq_tr *r)
{
    if (r->depth > 0)
        r->depth--;
}

bool firn__pq_tr_field(pq_tr *r, int16_t *out_id, uint8_t *out_type)
{
    uint8_t h = firn_rd_u8(&r->rd);
    if (!firn_rd_ok(&r->rd) || h == TC_STOP)
        return false;
    uint8_t type = h & 0x0F;
    int64_t id;
    if (h >> 4) {
        id = r->last[r->depth] + (h >> 4);
    } else {
        id = firn_unzigzag64(firn_rd_uvarint(&r->rd));
    }
    if (id < INT16_MIN || id > INT16_MAX || type > TC_STRUCT) {
        firn_rd_fail(&r->rd);
        return false;
    }
    r->last[r->depth] = (int16_t)id;
    *out_id = (int16_t)id;
    *out_type = type;
    return firn_rd_ok(&r->rd);
}

size_t firn__pq_tr_list(pq_tr *r, uint8_t *out_elem_type)
{
    uint8_t h = firn_rd_u8(&r->rd);
    uint64_t n = h >> 4;
    if (n == 15)
        n = firn_rd_uvarint(&r->rd);
    *out_elem_type = h & 0x0F;
    /* every element takes at least one byte, except bools packed in nothing: none are */
    if (!firn_rd_ok(&r->rd) || n > firn_rd_remaining(&r->rd) || *out_elem_type > TC_STRUCT) {
        firn_rd_fail(&r->rd);
        return 0;
    }
    return (size_t)n;
}

int64_t firn__pq_tr_int(pq_tr *r, uint8_t type)
{
    if (type == TC_BYTE)
        return (int8_t)firn_rd_u8(&r->rd);
    if (type == TC_I16 || type == TC_I32 || type == TC_I64)
        return firn_unzigzag64(firn_rd_uvarint(&r->rd));
    firn_rd_fail(&r->rd);
    return 0;
}

bool firn__pq_tr_bool(pq_tr *r, uint8_t type)
{
    if (type == TC_TRUE)
        return true;
    if (type != TC_FALSE)
        firn_rd_fail(&r->rd);
    return false;
}

const uint8_t *firn__pq_tr_bin(pq_tr *r, size_t *out_len)
{
    uint64_t n = firn_rd_uvarint(&r->rd);
    if (!firn_rd_ok(&r->rd) || n > firn_rd_remaining(&r->rd)) {
        firn_rd_fail(&r->rd);
        *out_len = 0;
        return NULL;
    }
    *out_len = (size_t)n;
    return firn_rd_bytes(&r->rd, (size_t)n);
}

static void skip_elem(pq_tr *r, uint8_t type)
{
    size_t len;
    switch (type) {
    case TC_TRUE:
    case TC_FALSE:
    case TC_BYTE:
        (void)firn_rd_u8(&r->rd);
        break;
    case TC_I16:
    case TC_I32:
    case TC_I64:
        (void)firn_rd_uvarint(&r->rd);
        break;
    case TC_DOUBLE:
        (void)firn_rd_bytes(&r->rd, 8);
        break;
    case TC_BINARY:
        (void)firn__pq_tr_bin(r, &len);
        break;
    case TC_LIST:
    case TC_SET:
    case TC_MAP:
    case TC_STRUCT:
        firn__pq_tr_skip(r, type);
        break;
    default:
        firn_rd_fail(&r->rd);
        break;
    }
}

void firn__pq_tr_skip(pq_tr *r, uint8_t type)
{
    int16_t id;
    uint8_t t;
    switch (type) {
    case TC_TRUE:
    case TC_FALSE:
        break; /* a field bool lives in its header */
    case TC_LIST:
    case TC_SET: {
        uint8_t et;
        size_t n = firn__pq_tr_list(r, &et);
        firn__pq_tr_struct_begin(r); /* bounds list-in-list nesting too */
        for (size_t i = 0; i < n && firn_rd_ok(&r->rd); i++)
            skip_elem(r, et);
        firn__pq_tr_struct_end(r);
        break;
    }
    case TC_MAP: {
        uint64_t n = firn_rd_uvarint(&r->rd);
        if (n == 0)
            break;
        uint8_t kv = firn_rd_u8(&r->rd);
        if (n > firn_rd_remaining(&r->rd)) {
            firn_rd_fail(&r->rd);
            break;
        }
        firn__pq_tr_struct_begin(r);
        for (uint64_t i = 0; i < n && firn_rd_ok(&r->rd); i++) {
            skip_elem(r, kv >> 4);
            skip_elem(r, kv & 0x0F);
        }
        firn__pq_tr_struct_end(r);
        break;
    }
    case TC_STRUCT:
        firn__pq_tr_struct_begin(r);
        while (firn__pq_tr_field(r, &id, &t))
            firn__pq_tr_skip(r, t);
        firn__pq_tr_struct_end(r);
        break;
    case TC_STOP:
        firn_rd_fail(&r->rd);
        break;
    default:
        skip_elem(r, type);
        break;
    }
}
