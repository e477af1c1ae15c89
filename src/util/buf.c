/* SPDX-License-Identifier: Apache-2.0 */
/* Bounded growable buffers (curl dynbuf), fixed-width writers and the wire read cursor
 * (postgres pqformat). */
#include "firn/util.h"

#include <stdio.h>
#include <string.h>

firn_slice firn_slice_cstr(const char *s)
{
    firn_slice sl = {(const uint8_t *)s, strlen(s)};
    return sl;
}

bool firn_slice_eq(firn_slice a, firn_slice b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

void firn_buf_init(firn_buf *b, size_t max_bytes)
{
    FIRN_ASSERT(max_bytes > 0);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max_bytes;
}

void firn_buf_deinit(firn_buf *b)
{
    firn_free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void firn_buf_reset(firn_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

firn_rc firn_buf_reserve(firn_buf *b, size_t extra)
{
    if (extra > b->max || b->len > b->max - extra)
        return FIRN_ERR_TOO_LARGE;
    size_t need = b->len + extra + 1; /* room for the trailing NUL */
    if (need <= b->cap)
        return FIRN_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    if (cap > b->max + 1)
        cap = b->max + 1;
    b->data = firn_realloc(b->data, cap);
    b->cap = cap;
    return FIRN_OK;
}

firn_rc firn_buf_append(firn_buf *b, const void *p, size_t len)
{
    FIRN_TRY(firn_buf_reserve(b, len));
    if (len)
        memcpy(b->data + b->len, p, len);
    b->len += len;
    b->data[b->len] = '\0';
    return FIRN_OK;
}

firn_rc firn_buf_append_cstr(firn_buf *b, const char *s)
{
    return firn_buf_append(b, s, strlen(s));
}

firn_rc firn_buf_vappendf(firn_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return FIRN_ERR_INVALID;
    FIRN_TRY(firn_buf_reserve(b, (size_t)n));
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return FIRN_OK;
}

firn_rc firn_buf_appendf(firn_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    firn_rc rc = firn_buf_vappendf(b, fmt, ap);
    va_end(ap);
    return rc;
}

firn_rc firn_buf_fill(firn_buf *b, uint8_t c, size_t n)
{
    FIRN_TRY(firn_buf_reserve(b, n));
    memset(b->data + b->len, c, n);
    b->len += n;
    b->data[b->len] = '\0';
    return FIRN_OK;
}

uint8_t *firn_buf_take(firn_buf *b, size_t *out_len)
{
    uint8_t *p = b->data;
    if (!p) {
        p = firn_malloc(1);
        p[0] = '\0';
    }
    if (out_len)
        *out_len = b->len;
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    return p;
}

void firn_buf_truncate(firn_buf *b, size_t new_len)
{
    FIRN_ASSERT(new_len <= b->len);
    b->len = new_len;
    if (b->data)
        b->data[new_len] = '\0';
}

uint8_t *firn_buf_room(firn_buf *b, size_t min, size_t *room)
{
    if (firn_buf_reserve(b, min) != FIRN_OK) {
        *room = 0;
        return NULL;
    }
    *room = b->cap - b->len - 1; /* reserve keeps a byte for the trailing NUL */
    return b->data + b->len;
}

void firn_buf_commit(firn_buf *b, size_t n)
{
    FIRN_ASSERT(b->data && n < b->cap - b->len);
    b->len += n;
    b->data[b->len] = '\0';
}

firn_rc firn_wr_u8(firn_buf *b, uint8_t v)
{
    return firn_buf_append(b, &v, 1);
}

static firn_rc wr_be(firn_buf *b, uint64_t v, int nbytes)
{
    uint8_t tmp[8];
    for (int i = 0; i < nbytes; i++)
        tmp[i] = (uint8_t)(v >> (8 * (nbytes - 1 - i)));
    return firn_buf_append(b, tmp, (size_t)nbytes);
}

static firn_rc wr_le(firn_buf *b, uint64_t v, int nbytes)
{
    uint8_t tmp[8];
    for (int i = 0; i < nbytes; i++)
        tmp[i] = (uint8_t)(v >> (8 * i));
    return firn_buf_append(b, tmp, (size_t)nbytes);
}

firn_rc firn_wr_be16(firn_buf *b, uint16_t v)
{
    return wr_be(b, v, 2);
}

firn_rc firn_wr_be32(firn_buf *b, uint32_t v)
{
    return wr_be(b, v, 4);
}

firn_rc firn_wr_be64(firn_buf *b, uint64_t v)
{
    return wr_be(b, v, 8);
}

firn_rc firn_wr_le16(firn_buf *b, uint16_t v)
{
    return wr_le(b, v, 2);
}

firn_rc firn_wr_le32(firn_buf *b, uint32_t v)
{
    return wr_le(b, v, 4);
}

firn_rc firn_wr_le64(firn_buf *b, uint64_t v)
{
    return wr_le(b, v, 8);
}

firn_rc firn_wr_uvarint(firn_buf *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;
    while (v >= 0x80) {
        tmp[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (uint8_t)v;
    return firn_buf_append(b, tmp, n);
}

void firn_rd_init(firn_rd *r, const void *p, size_t len)
{
    r->ptr = p;
    r->len = len;
    r->pos = 0;
    r->failed = false;
}

size_t firn_rd_remaining(const firn_rd *r)
{
    return r->failed ? 0 : r->len - r->pos;
}

void firn_rd_fail(firn_rd *r)
{
    r->failed = true;
}

const uint8_t *firn_rd_bytes(firn_rd *r, size_t n)
{
    if (r->failed || n > r->len - r->pos) {
        r->failed = true;
        return NULL;
    }
    const uint8_t *p = r->ptr + r->pos;
    r->pos += n;
    return p;
}

static uint64_t rd_be(firn_rd *r, int nbytes)
{
    const uint8_t *p = firn_rd_bytes(r, (size_t)nbytes);
    if (!p)
        return 0;
    uint64_t v = 0;
    for (int i = 0; i < nbytes; i++)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t rd_le(firn_rd *r, int nbytes)
{
    const uint8_t *p = firn_rd_bytes(r, (size_t)nbytes);
    if (!p)
        return 0;
    uint64_t v = 0;
    for (int i = nbytes - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

uint8_t firn_rd_u8(firn_rd *r)
{
    return (uint8_t)rd_be(r, 1);
}

uint16_t firn_rd_be16(firn_rd *r)
{
    return (uint16_t)rd_be(r, 2);
}

uint32_t firn_rd_be32(firn_rd *r)
{
    return (uint32_t)rd_be(r, 4);
}

uint64_t firn_rd_be64(firn_rd *r)
{
    return rd_be(r, 8);
}

uint16_t firn_rd_le16(firn_rd *r)
{
    return (uint16_t)rd_le(r, 2);
}

uint32_t firn_rd_le32(firn_rd *r)
{
    return (uint32_t)rd_le(r, 4);
}

uint64_t firn_rd_le64(firn_rd *r)
{
    return rd_le(r, 8);
}

uint64_t firn_rd_uvarint(firn_rd *r)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        const uint8_t *p = firn_rd_bytes(r, 1);
        if (!p)
            return 0;
        if (shift == 63 && *p > 1)
            break; /* more than 64 bits */
        v |= (uint64_t)(*p & 0x7f) << shift;
        if (!(*p & 0x80))
            return v;
    }
    r->failed = true;
    return 0;
}

const char *firn_rd_cstr(firn_rd *r, size_t *out_len)
{
    if (r->failed)
        return NULL;
    const uint8_t *start = r->ptr + r->pos;
    const uint8_t *nul = memchr(start, 0, r->len - r->pos);
    if (!nul) {
        r->failed = true;
        return NULL;
    }
    size_t n = (size_t)(nul - start);
    r->pos += n + 1;
    if (out_len)
        *out_len = n;
    return (const char *)start;
}
