/* SPDX-License-Identifier: Apache-2.0 */
/* Value and level decoders of parquet-format Encodings.md for the column reader: the RLE /
 * bit-packed hybrid, deprecated BIT_PACKED levels, PLAIN booleans and byte arrays,
 * DELTA_BINARY_PACKED and BYTE_STREAM_SPLIT. Every reader is bounded by the length it is given
 * and returns false on malformed input. */
#include "pq_read_int.h"

#include <string.h>

void firn__pq_rd_grow(void **p, size_t *cap, size_t n, size_t sz)
{
    if (n <= *cap)
        return;
    size_t c = *cap ? *cap : 256;
    while (c < n)
        c *= 2;
    *p = firn_reallocarray(*p, c, sz);
    *cap = c;
}

/* Little-endian 8 bytes at p, fewer when only avail (>= 1) remain. */
static inline uint64_t load64(const uint8_t *p, size_t avail)
{
    uint64_t v = 0;
    memcpy(&v, p, avail >= 8 ? 8 : avail);
    return v;
}

static bool rd_uvarint(const uint8_t *p, size_t len, size_t *pos, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*pos >= len)
            return false;
        uint8_t b = p[(*pos)++];
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* Unpacks count LSB-first values of bw (0..32) bits from src, which holds avail >= the bytes
 * they need. */
#define DEFINE_UNPACK(NAME, T)                                                                     \
    static void NAME(const uint8_t *src, size_t avail, int bw, T *out, size_t count)               \
    {                                                                                              \
        if (bw == 0) {                                                                             \
            memset(out, 0, count * sizeof(T));                                                     \
            return;                                                                                \
        }                                                                                          \
        uint64_t mask = ((uint64_t)1 << bw) - 1;                                                   \
        size_t bit = 0, k = 0;                                                                     \
        /* fast part: 8 bytes readable at every value's first byte */                              \
        size_t fast = avail >= 8 ? ((avail - 8) * 8) / (size_t)bw + 1 : 0;                         \
        if (fast > count)                                                                          \
            fast = count;                                                                          \
        for (; k < fast; k++, bit += (size_t)bw) {                                                 \
            uint64_t w;                                                                            \
            memcpy(&w, src + (bit >> 3), 8);                                                       \
            out[k] = (T)((w >> (bit & 7)) & mask);                                                 \
        }                                                                                          \
        for (; k < count; k++, bit += (size_t)bw) {                                                \
            uint64_t w = load64(src + (bit >> 3), avail - (bit >> 3));                             \
            out[k] = (T)((w >> (bit & 7)) & mask);                                                 \
        }                                                                                          \
    }

DEFINE_UNPACK(unpack_slow_u32, uint32_t)
DEFINE_UNPACK(unpack_u8, uint8_t)

/* Whole groups of 8 values of a constant width (inlined per width so shifts are constants);
 * needs 8 readable bytes past each group's last value byte. */
static inline __attribute__((always_inline)) void
unpack_groups(const uint8_t *src, uint32_t *out, size_t groups, const int bw)
{
    const uint64_t mask = ((uint64_t)1 << bw) - 1;
    for (size_t g = 0; g < groups; g++, src += bw, out += 8) {
        for (int k = 0; k < 8; k++) {
            uint64_t w;
            memcpy(&w, src + ((k * bw) >> 3), 8);
            out[k] = (uint32_t)((w >> ((k * bw) & 7)) & mask);
        }
    }
}

#define UNPACK_CASE(W)                                                                             \
    case W:                                                                                        \
        unpack_groups(src, out, groups, W);                                                        \
        break;

static void unpack_u32(const uint8_t *src, size_t avail, int bw, uint32_t *out, size_t count)
{
    size_t groups = count / 8;
    if (bw == 0 || bw > 32)
        groups = 0;
    /* the fast groups read up to 8 bytes past their last byte */
    size_t room = avail > 8 ? (avail - 8) / (size_t)(bw ? bw : 1) : 0;
    groups = groups < room ? groups : room;
    switch (groups ? bw : 0) {
        UNPACK_CASE(1)
        UNPACK_CASE(2)
        UNPACK_CASE(3)
        UNPACK_CASE(4)
        UNPACK_CASE(5)
        UNPACK_CASE(6)
        UNPACK_CASE(7)
        UNPACK_CASE(8)
        UNPACK_CASE(9)
        UNPACK_CASE(10)
        UNPACK_CASE(11)
        UNPACK_CASE(12)
        UNPACK_CASE(13)
        UNPACK_CASE(14)
        UNPACK_CASE(15)
        UNPACK_CASE(16)
        UNPACK_CASE(17)
        UNPACK_CASE(18)
        UNPACK_CASE(19)
        UNPACK_CASE(20)
        UNPACK_CASE(21)
        UNPACK_CASE(22)
        UNPACK_CASE(23)
        UNPACK_CASE(24)
        UNPACK_CASE(25)
        UNPACK_CASE(26)
        UNPACK_CASE(27)
        UNPACK_CASE(28)
        UNPACK_CASE(29)
        UNPACK_CASE(30)
        UNPACK_CASE(31)
        UNPACK_CASE(32)
    default:
        groups = 0;
        break;
    }
    size_t done = groups * 8, skip = groups * (size_t)bw;
    if (done < count)
        unpack_slow_u32(src + skip, avail - skip, bw, out + done, count - done);
}

/* The hybrid: runs of (header varint) either RLE (count << 1, value in ceil(bw/8) bytes) or
 * bit-packed groups of 8 ((groups << 1) | 1). A final literal run may be cut short after the
 * last value needed (some writers omit its padding). */
#define DEFINE_RLE_DEC(NAME, T, UNPACK)                                                            \
    bool NAME(const uint8_t *p, size_t len, int bw, T *out, size_t n)                              \
    {                                                                                              \
        if (bw < 0 || bw > 32)                                                                     \
            return false;                                                                          \
        size_t pos = 0, got = 0, vbytes = (size_t)(bw + 7) / 8;                                    \
        while (got < n) {                                                                          \
            uint64_t h;                                                                            \
            if (!rd_uvarint(p, len, &pos, &h))                                                     \
                return false;                                                                      \
            size_t avail = len - pos;                                                              \
            if (h & 1) {                                                                           \
                uint64_t groups = h >> 1;                                                          \
                uint64_t vals = groups > (SIZE_MAX / 64) ? SIZE_MAX / 8 : groups * 8;              \
                size_t take = vals < n - got ? (size_t)vals : n - got;                             \
                size_t need = (take * (size_t)bw + 7) / 8;                                         \
                if (need > avail)                                                                  \
                    return false;                                                                  \
                if (take)                                                                          \
                    UNPACK(p + pos, avail, bw, out + got, take);                                   \
                got += take;                                                                       \
                uint64_t full = groups > avail ? avail : groups * (uint64_t)bw;                    \
                pos += full < avail ? (size_t)full : avail;                                        \
            } else {                                                                               \
                uint64_t count = h >> 1;                                                           \
                if (count == 0 || vbytes > avail)                                                  \
                    return false;                                                                  \
                uint32_t v = 0;                                                                    \
                memcpy(&v, p + pos, vbytes);                                                       \
                pos += vbytes;                                                                     \
                size_t take = count < n - got ? (size_t)count : n - got;                           \
                T tv = (T)v;                                                                       \
                if ((uint32_t)tv != v)                                                             \
                    return false;                                                                  \
                for (size_t k = 0; k < take; k++)                                                  \
                    out[got + k] = tv;                                                             \
                got += take;                                                                       \
            }                                                                                      \
        }                                                                                          \
        return true;                                                                               \
    }

DEFINE_RLE_DEC(firn__pq_rd_rle_u32, uint32_t, unpack_u32)
DEFINE_RLE_DEC(firn__pq_rd_rle_u8, uint8_t, unpack_u8)

bool firn__pq_rd_rle_all(const uint8_t *p, size_t len, int bw, uint32_t value, size_t n)
{
    size_t pos = 0, vbytes = (size_t)(bw + 7) / 8;
    uint64_t h;
    uint32_t v = 0;
    if (bw < 1 || bw > 32 || !rd_uvarint(p, len, &pos, &h) || (h & 1) || (h >> 1) < n ||
        vbytes > len - pos)
        return false;
    memcpy(&v, p + pos, vbytes);
    return v == value;
}

bool firn__pq_rd_bitpacked_u8(const uint8_t *p, size_t len, int bw, uint8_t *out, size_t n)
{
    if (bw < 0 || bw > 8 || (n * (size_t)bw + 7) / 8 > len)
        return false;
    size_t bit = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned v = 0;
        for (int j = 0; j < bw; j++, bit++)
            v = (v << 1) | ((p[bit >> 3] >> (7 - (bit & 7))) & 1u);
        out[i] = (uint8_t)v;
    }
    return true;
}

bool firn__pq_rd_bools(const uint8_t *p, size_t len, uint8_t *out, size_t n)
{
    if ((n + 7) / 8 > len)
        return false;
    for (size_t i = 0; i < n; i++)
        out[i] = (p[i >> 3] >> (i & 7)) & 1;
    return true;
}

bool firn__pq_rd_plain_bytes(
    const uint8_t *p, size_t len, size_t n, const uint8_t **ptr, uint32_t *lens)
{
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t l;
        if (len - pos < 4)
            return false;
        memcpy(&l, p + pos, 4);
        pos += 4;
        if (l > len - pos)
            return false;
        ptr[i] = p + pos;
        lens[i] = l;
        pos += l;
    }
    return true;
}

bool firn__pq_rd_bss(const uint8_t *p, size_t len, size_t w, uint8_t *out, size_t n)
{
    if (w == 0 || n > len / w)
        return false;
    if (w == 4) {
        const uint8_t *s0 = p, *s1 = p + n, *s2 = p + 2 * n, *s3 = p + 3 * n;
        for (size_t i = 0; i < n; i++) {
            out[4 * i] = s0[i];
            out[4 * i + 1] = s1[i];
            out[4 * i + 2] = s2[i];
            out[4 * i + 3] = s3[i];
        }
        return true;
    }
    for (size_t k = 0; k < w; k++) {
        const uint8_t *s = p + k * n;
        for (size_t i = 0; i < n; i++)
            out[i * w + k] = s[i];
    }
    return true;
}

/* ---- DELTA_BINARY_PACKED ----------------------------------------------------------------- */

/* Value k (bw <= 64 bits, LSB first) of a miniblock at src holding avail bytes (enough). */
static inline uint64_t get_bits(const uint8_t *src, size_t avail, size_t bit, int bw)
{
    size_t byte = bit >> 3;
    unsigned sh = (unsigned)(bit & 7);
    uint64_t v = load64(src + byte, avail - byte) >> sh;
    if (sh + (unsigned)bw > 64)
        v |= (uint64_t)src[byte + 8] << (64 - sh);
    return bw == 64 ? v : v & (((uint64_t)1 << bw) - 1);
}

typedef struct dbp_hdr {
    uint64_t block, mini, total;
    uint64_t first;
} dbp_hdr;

static bool dbp_header(const uint8_t *p, size_t len, size_t *pos, dbp_hdr *h)
{
    uint64_t first;
    if (!rd_uvarint(p, len, pos, &h->block) || !rd_uvarint(p, len, pos, &h->mini) ||
        !rd_uvarint(p, len, pos, &h->total) || !rd_uvarint(p, len, pos, &first))
        return false;
    h->first = (uint64_t)firn_unzigzag64(first);
    /* spec: block a multiple of 128, miniblocks of a multiple of 32 values; accept any
     * byte-aligned miniblock */
    return h->block > 0 && h->block <= ((uint64_t)1 << 20) && h->mini > 0 && h->mini <= h->block &&
           h->block % h->mini == 0 && (h->block / h->mini) % 8 == 0;
}

/* Decodes one block's miniblocks into out[*got..total). */
static bool dbp_block(const uint8_t *p,
                      size_t len,
                      size_t *pos,
                      const dbp_hdr *h,
                      int64_t *out,
                      size_t *got,
                      uint64_t *prev)
{
    uint64_t md;
    if (!rd_uvarint(p, len, pos, &md))
        return false;
    uint64_t min_delta = (uint64_t)firn_unzigzag64(md);
    if (h->mini > len - *pos)
        return false;
    const uint8_t *widths = p + *pos;
    *pos += (size_t)h->mini;
    size_t vpm = (size_t)(h->block / h->mini);
    for (size_t m = 0; m < h->mini && *got < h->total; m++) {
        int bw = widths[m];
        if (bw > 64)
            return false;
        size_t avail = len - *pos, full = vpm * (size_t)bw / 8;
        size_t take = (size_t)h->total - *got < vpm ? (size_t)h->total - *got : vpm;
        if ((take * (size_t)bw + 7) / 8 > avail)
            return false;
        uint64_t v = *prev;
        int64_t *o = out + *got;
        if (bw == 0) {
            for (size_t k = 0; k < take; k++) {
                v += min_delta;
                o[k] = (int64_t)v;
            }
        } else {
            const uint8_t *src = p + *pos;
            for (size_t k = 0; k < take; k++) {
                v += min_delta + get_bits(src, avail, k * (size_t)bw, bw);
                o[k] = (int64_t)v;
            }
        }
        *prev = v;
        *got += take;
        *pos += full < avail ? full : avail;
    }
    return true;
}

bool firn__pq_rd_delta_bp(const uint8_t *p,
                          size_t len,
                          bool bits32,
                          int64_t **out,
                          size_t *out_cap,
                          size_t max_n,
                          size_t *out_n,
                          size_t *used)
{
    (void)bits32; /* deltas wrap modulo 2^64; INT32 values are truncated by the caller */
    size_t pos = 0;
    dbp_hdr h;
    if (!dbp_header(p, len, &pos, &h) || h.total > max_n)
        return false;
    firn__pq_rd_grow((void **)out, out_cap, h.total ? (size_t)h.total : 1, sizeof(int64_t));
    size_t got = 0;
    uint64_t prev = h.first;
    if (h.total) {
        (*out)[0] = (int64_t)h.first;
        got = 1;
    }
    while (got < h.total) {
        if (!dbp_block(p, len, &pos, &h, *out, &got, &prev))
            return false;
    }
    *out_n = (size_t)h.total;
    *used = pos;
    return true;
}

/* ---- DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY ----------------------------------------- */

static firn_rc bad_delta(firn_err *err, bool prefixed)
{
    return firn_err_set(err, FIRN_ERR_PARSE, "malformed %s values",
                        prefixed ? "DELTA_BYTE_ARRAY" : "DELTA_LENGTH_BYTE_ARRAY");
}

/* Builds value i = prefix of value i-1 + suffix i into s->delta; lengths into v->len. */
static firn_rc delta_join(rd_scratch *s,
                          const int64_t *pre,
                          const int64_t *suf,
                          const uint8_t *data,
                          size_t avail,
                          rd_vals *v,
                          firn_err *err)
{
    size_t o = 0, off = 0, prev_off = 0, prev_len = 0;
    for (size_t i = 0; i < v->n; i++) {
        int64_t pl = pre[i], sl = suf[i];
        if (pl < 0 || (uint64_t)pl > prev_len || sl < 0 || (uint64_t)sl > avail - off)
            return bad_delta(err, true);
        size_t l = (size_t)pl + (size_t)sl;
        if (l > UINT32_MAX || l > RD_DELTA_MAX - o)
            return firn_err_set(err, FIRN_ERR_TOO_LARGE,
                                "DELTA_BYTE_ARRAY page expands past %zu bytes", RD_DELTA_MAX);
        firn__pq_rd_grow((void **)&s->delta, &s->delta_cap, o + l + 1, 1);
        if (pl)
            memcpy(s->delta + o, s->delta + prev_off, (size_t)pl);
        if (sl)
            memcpy(s->delta + o + pl, data + off, (size_t)sl);
        v->len[i] = (uint32_t)l;
        prev_off = o;
        prev_len = l;
        o += l;
        off += (size_t)sl;
    }
    firn__pq_rd_grow((void **)&s->delta, &s->delta_cap, 1, 1);
    for (size_t i = 0, at = 0; i < v->n; i++) {
        v->ptr[i] = s->delta + at;
        at += v->len[i];
    }
    return FIRN_OK;
}

firn_rc firn__pq_rd_delta_bytes(
    rd_chunk_ctx *cx, bool prefixed, const uint8_t *p, size_t len, rd_vals *v, firn_err *err)
{
    rd_scratch *s = cx->s;
    size_t n = v->n, pos = 0, got, used;
    if (prefixed) {
        if (!firn__pq_rd_delta_bp(p, len, false, &s->ints2, &s->ints2_cap, n, &got, &used) ||
            got != n)
            return bad_delta(err, prefixed);
        pos = used;
    }
    if (!firn__pq_rd_delta_bp(p + pos, len - pos, false, &s->ints, &s->ints_cap, n, &got, &used) ||
        got != n)
        return bad_delta(err, prefixed);
    pos += used;
    const uint8_t *data = p + pos;
    size_t avail = len - pos;
    if (prefixed) {
        FIRN_TRY(delta_join(s, s->ints2, s->ints, data, avail, v, err));
    } else {
        for (size_t i = 0, off = 0; i < n; i++) {
            int64_t l = s->ints[i];
            if (l < 0 || (uint64_t)l > avail - off)
                return bad_delta(err, prefixed);
            v->ptr[i] = data + off;
            v->len[i] = (uint32_t)l;
            off += (size_t)l;
        }
    }
    if (cx->col->ptype == PQ_FLBA) {
        for (size_t i = 0; i < n; i++) {
            if (v->len[i] != cx->col->pw)
                return firn_err_set(err, FIRN_ERR_PARSE,
                                    "DELTA_BYTE_ARRAY value of %u bytes in a fixed[%zu] column",
                                    v->len[i], cx->col->pw);
        }
        v->fixed = s->delta; /* contiguous, pw bytes each */
    }
    return FIRN_OK;
}

/* ---- physical -> output conversion ------------------------------------------------------- */

/* Sign-extends a big-endian two's complement integer of len bytes into 128 bits; false when it
 * does not fit in width (8 or 16) bytes. */
static bool be_int(const uint8_t *b, size_t len, size_t width, unsigned __int128 *out)
{
    if (len == 0) {
        *out = 0;
        return true;
    }
    uint8_t fill = (b[0] & 0x80) ? 0xFF : 0x00;
    size_t skip = len > width ? len - width : 0;
    for (size_t i = 0; i < skip; i++) {
        if (b[i] != fill)
            return false;
    }
    if (skip && ((b[skip] ^ fill) & 0x80))
        return false;
    unsigned __int128 v = fill ? ~(unsigned __int128)0 : 0;
    for (size_t i = skip; i < len; i++)
        v = (v << 8) | b[i];
    *out = v;
    return true;
}

static firn_rc convert_be(const rd_col *c, const rd_vals *v, uint8_t *out, firn_err *err)
{
    size_t width = c->conv == CV_BE_I64 ? 8 : 16;
    for (size_t i = 0; i < v->n; i++) {
        const uint8_t *b = v->ptr ? v->ptr[i] : v->fixed + i * c->pw;
        size_t len = v->ptr ? v->len[i] : c->pw;
        unsigned __int128 x;
        if (!be_int(b, len, width, &x))
            return firn_err_set(err, FIRN_ERR_PARSE, "decimal value of %zu bytes overflows %s", len,
                                width == 8 ? "64 bits" : "128 bits");
        if (width == 8) {
            int64_t y = (int64_t)(uint64_t)x;
            memcpy(out + i * 8, &y, 8);
        } else {
            uint64_t lo = (uint64_t)x, hi = (uint64_t)(x >> 64);
            memcpy(out + i * 16, &lo, 8);
            memcpy(out + i * 16 + 8, &hi, 8);
        }
    }
    return FIRN_OK;
}

static void put_i128(uint8_t *out, int64_t x)
{
    uint64_t lo = (uint64_t)x, hi = x < 0 ? UINT64_MAX : 0;
    memcpy(out, &lo, 8);
    memcpy(out + 8, &hi, 8);
}

firn_rc firn__pq_rd_convert(const rd_col *c, const rd_vals *v, uint8_t *out, firn_err *err)
{
    size_t n = v->n;
    const uint8_t *f = v->fixed;
    switch (c->conv) {
    case CV_COPY:
        if (n)
            memcpy(out, f, n * c->ow);
        return FIRN_OK;
    case CV_I32_I64:
    case CV_U32_I64:
    case CV_I32_I128:
        for (size_t i = 0; i < n; i++) {
            int32_t x;
            memcpy(&x, f + i * 4, 4);
            int64_t y = c->conv == CV_U32_I64 ? (int64_t)(uint32_t)x : (int64_t)x * c->mult;
            if (c->conv == CV_I32_I128)
                put_i128(out + i * 16, y);
            else
                memcpy(out + i * 8, &y, 8);
        }
        return FIRN_OK;
    case CV_I64_MUL:
    case CV_I64_I128:
        for (size_t i = 0; i < n; i++) {
            int64_t x, y = 0;
            memcpy(&x, f + i * 8, 8);
            if (c->conv == CV_I64_I128) {
                put_i128(out + i * 16, x);
                continue;
            }
            if (__builtin_mul_overflow(x, c->mult, &y))
                return firn_err_set(err, FIRN_ERR_PARSE, "value %lld overflows when scaled",
                                    (long long)x);
            memcpy(out + i * 8, &y, 8);
        }
        return FIRN_OK;
    case CV_F32_F64:
        for (size_t i = 0; i < n; i++) {
            float x;
            memcpy(&x, f + i * 4, 4);
            double y = (double)x;
            memcpy(out + i * 8, &y, 8);
        }
        return FIRN_OK;
    case CV_BE_I64:
    case CV_BE_I128:
        return convert_be(c, v, out, err);
    }
    return firn_err_set(err, FIRN_ERR_INTERNAL, "unknown conversion %d", (int)c->conv);
}
