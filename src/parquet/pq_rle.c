/* SPDX-License-Identifier: Apache-2.0 */
/* The RLE / bit-packed hybrid of parquet-format Encodings.md, for levels and dictionary ids:
 * runs of 8+ equal values become RLE runs, the rest bit-packed groups of 8 (LSB first). */
#include "pq_int.h"

#include <string.h>

#define MAX_LITERAL_GROUPS 63 /* keeps each literal header one byte, as parquet-java does */

/* Length of the run of bytes equal to v[i] from i (at most limit), 8 bytes at a compare: the
 * definition levels of a column without nulls are one run of page length. */
static size_t rle_u8_run(const uint8_t *v, size_t i, size_t n, size_t limit)
{
    size_t end = n - i < limit ? n : i + limit, j = i + 1;
    uint64_t pat = v[i] * 0x0101010101010101ull;
    while (j + 8 <= end) {
        uint64_t w;
        memcpy(&w, v + j, 8);
        if (w != pat)
            break;
        j += 8;
    }
    while (j < end && v[j] == v[i])
        j++;
    return j - i;
}

/* The same for 32-bit values (dictionary ids), 4 at a time: constant columns are one run. */
static size_t rle_u32_run(const uint32_t *v, size_t i, size_t n, size_t limit)
{
    size_t end = n - i < limit ? n : i + limit, j = i + 1;
    uint64_t pat = v[i] * 0x0000000100000001ull;
    while (j + 4 <= end) {
        uint64_t a, b;
        memcpy(&a, v + j, 8);
        memcpy(&b, v + j + 2, 8);
        if ((a ^ pat) | (b ^ pat))
            break;
        j += 4;
    }
    while (j < end && v[j] == v[i])
        j++;
    return j - i;
}

/* Bit-packs groups of 8 values of BW bits (a constant: the shifts compile to immediates) from
 * v, BW bytes each, into dst with one 8-byte store per group (BW <= 8) or two, of 4 values each
 * (zeros past a group's BW bytes are overwritten by the next group); returns the groups written:
 * those whose stores stay inside dst's room. */
#define DEFINE_PACK_BW(T, BW)                                                                      \
    static size_t pack_##T##_##BW(uint8_t *dst, size_t room, const T *v, size_t groups)            \
    {                                                                                              \
        size_t k = 0;                                                                              \
        for (; k < groups && k * (BW) + 16 <= room; k++, v += 8) {                                 \
            uint64_t a = 0, b = 0;                                                                 \
            if ((BW) <= 8) {                                                                       \
                for (int j = 0; j < 8; j++)                                                        \
                    a |= (uint64_t)v[j] << ((j * (BW)) & 63);                                      \
                memcpy(dst + k * (BW), &a, 8);                                                     \
                continue;                                                                          \
            }                                                                                      \
            for (int j = 0; j < 4; j++) {                                                          \
                a |= (uint64_t)v[j] << (j * (BW));                                                 \
                b |= (uint64_t)v[4 + j] << (j * (BW));                                             \
            }                                                                                      \
            /* 4 * BW bits in a and in b */                                                        \
            uint64_t lo = 4 * (BW) == 64 ? a : a | b << ((4 * (BW)) & 63);                         \
            uint64_t hi = 4 * (BW) == 64 ? b : b >> ((64 - 4 * (BW)) & 63);                        \
            memcpy(dst + k * (BW), &lo, 8);                                                        \
            memcpy(dst + k * (BW) + 8, &hi, 8);                                                    \
        }                                                                                          \
        return k;                                                                                  \
    }

#define DEFINE_PACKS(T)                                                                            \
    DEFINE_PACK_BW(T, 1)                                                                           \
    DEFINE_PACK_BW(T, 2)                                                                           \
    DEFINE_PACK_BW(T, 3)                                                                           \
    DEFINE_PACK_BW(T, 4)                                                                           \
    DEFINE_PACK_BW(T, 5)                                                                           \
    DEFINE_PACK_BW(T, 6)                                                                           \
    DEFINE_PACK_BW(T, 7)                                                                           \
    DEFINE_PACK_BW(T, 8)                                                                           \
    DEFINE_PACK_BW(T, 9)                                                                           \
    DEFINE_PACK_BW(T, 10)                                                                          \
    DEFINE_PACK_BW(T, 11)                                                                          \
    DEFINE_PACK_BW(T, 12)                                                                          \
    DEFINE_PACK_BW(T, 13)                                                                          \
    DEFINE_PACK_BW(T, 14)                                                                          \
    DEFINE_PACK_BW(T, 15)                                                                          \
    DEFINE_PACK_BW(T, 16)                                                                          \
    /* Full groups of values of at most 16 bits, packed by the function of their width. */         \
    static size_t pack_groups_##T(uint8_t *dst, size_t room, const T *v, size_t groups, int bw)    \
    {                                                                                              \
        switch (bw) {                                                                              \
        case 1:                                                                                    \
            return pack_##T##_1(dst, room, v, groups);                                             \
        case 2:                                                                                    \
            return pack_##T##_2(dst, room, v, groups);                                             \
        case 3:                                                                                    \
            return pack_##T##_3(dst, room, v, groups);                                             \
        case 4:                                                                                    \
            return pack_##T##_4(dst, room, v, groups);                                             \
        case 5:                                                                                    \
            return pack_##T##_5(dst, room, v, groups);                                             \
        case 6:                                                                                    \
            return pack_##T##_6(dst, room, v, groups);                                             \
        case 7:                                                                                    \
            return pack_##T##_7(dst, room, v, groups);                                             \
        case 8:                                                                                    \
            return pack_##T##_8(dst, room, v, groups);                                             \
        case 9:                                                                                    \
            return pack_##T##_9(dst, room, v, groups);                                             \
        case 10:                                                                                   \
            return pack_##T##_10(dst, room, v, groups);                                            \
        case 11:                                                                                   \
            return pack_##T##_11(dst, room, v, groups);                                            \
        case 12:                                                                                   \
            return pack_##T##_12(dst, room, v, groups);                                            \
        case 13:                                                                                   \
            return pack_##T##_13(dst, room, v, groups);                                            \
        case 14:                                                                                   \
            return pack_##T##_14(dst, room, v, groups);                                            \
        case 15:                                                                                   \
            return pack_##T##_15(dst, room, v, groups);                                            \
        case 16:                                                                                   \
            return pack_##T##_16(dst, room, v, groups);                                            \
        default:                                                                                   \
            return 0;                                                                              \
        }                                                                                          \
    }

DEFINE_PACKS(uint8_t)
DEFINE_PACKS(uint32_t)

/* Appends a run or literal header h (a ULEB128 varint) and then the low vbytes (<= 4) bytes of x
 * (an RLE run's value, little endian; 0 bytes after a literal header) with one reserve of
 * exactly their size and no library call: as firn_wr_uvarint + firn_buf_append, which cost
 * ~110 instructions a run (two reserves, two memcpy calls). */
static firn_rc put_header(firn_buf *out, uint64_t h, uint32_t x, size_t vbytes)
{
    size_t hbytes = 1;
    for (uint64_t t = h; t >= 0x80; t >>= 7)
        hbytes++;
    FIRN_TRY(firn_buf_reserve(out, hbytes + vbytes));
    uint8_t *p = out->data + out->len;
    for (; h >= 0x80; h >>= 7)
        *p++ = (uint8_t)(h | 0x80);
    *p++ = (uint8_t)h;
    for (size_t k = 0; k < vbytes; k++)
        p[k] = (uint8_t)(x >> (8 * k));
    out->len += hbytes + vbytes;
    out->data[out->len] = 0;
    return FIRN_OK;
}

/* Whether v[i..i+8) are 8 equal values (a literal run ends before them); among literal values
 * the first compare fails. */
#define DEFINE_RUN8(NAME, T)                                                                       \
    static inline bool NAME##_run8(const T *v, size_t i, size_t n)                                 \
    {                                                                                              \
        if (n - i < 8)                                                                             \
            return false;                                                                          \
        for (int j = 1; j < 8; j++) {                                                              \
            if (v[i + j] != v[i])                                                                  \
                return false;                                                                      \
        }                                                                                          \
        return true;                                                                               \
    }

DEFINE_RUN8(rle_u8, uint8_t)
DEFINE_RUN8(rle_u32, uint32_t)

#define DEFINE_RLE(NAME, T)                                                                        \
    /* Bit-packs count values from v[i] (values past n are 0) into dst (room bytes to its          \
     * buffer's end): full groups by their width's function, the rest one value at a time. */      \
    static void NAME##_pack(uint8_t *dst, size_t room, const T *v, size_t i, size_t n,             \
                            size_t count, int bw)                                                  \
    {                                                                                              \
        size_t full = n - i < count ? (n - i) / 8 : count / 8;                                     \
        size_t done = pack_groups_##T(dst, room, v + i, full, bw);                                 \
        dst += done * (size_t)bw;                                                                  \
        i += done * 8;                                                                             \
        count -= done * 8;                                                                         \
        uint64_t acc = 0;                                                                          \
        int bits = 0;                                                                              \
        for (size_t k = 0; k < count; k++) {                                                       \
            uint64_t x = i + k < n ? (uint64_t)v[i + k] : 0;                                       \
            acc |= x << bits;                                                                      \
            bits += bw;                                                                            \
            while (bits >= 8) {                                                                    \
                *dst++ = (uint8_t)acc;                                                             \
                acc >>= 8;                                                                         \
                bits -= 8;                                                                         \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    firn_rc firn__pq_##NAME(firn_buf *out, const T *v, size_t n, int bw)                           \
    {                                                                                              \
        size_t vbytes = (size_t)(bw + 7) / 8;                                                      \
        size_t i = 0;                                                                              \
        while (i < n) {                                                                            \
            size_t run = NAME##_run(v, i, n, SIZE_MAX);                                            \
            if (run >= 8) {                                                                        \
                FIRN_TRY(put_header(out, (uint64_t)run << 1, v[i], vbytes));                       \
                i += run;                                                                          \
                continue;                                                                          \
            }                                                                                      \
            size_t start = i, groups = 0;                                                          \
            while (i < n && groups < MAX_LITERAL_GROUPS) {                                         \
                if (i != start && NAME##_run8(v, i, n))                                            \
                    break;                                                                         \
                i += 8;                                                                            \
                groups++;                                                                          \
            }                                                                                      \
            if (i > n)                                                                             \
                i = n;                                                                             \
            FIRN_TRY(put_header(out, ((uint64_t)groups << 1) | 1, 0, 0));                          \
            FIRN_TRY(firn_buf_reserve(out, groups *(size_t)bw));                                   \
            NAME##_pack(out->data + out->len, out->cap - out->len, v, start, n, groups * 8, bw);   \
            out->len += groups * (size_t)bw;                                                       \
            out->data[out->len] = 0;                                                               \
        }                                                                                          \
        return FIRN_OK;                                                                            \
    }

DEFINE_RLE(rle_u8, uint8_t)
DEFINE_RLE(rle_u32, uint32_t)

firn_rc firn__pq_rle_u32_repeat(firn_buf *out, uint32_t v, size_t n, int bw)
{
    if (n < 8) { /* a literal group, as firn__pq_rle_u32 writes it */
        uint32_t few[8];
        for (size_t i = 0; i < n; i++)
            few[i] = v;
        return firn__pq_rle_u32(out, few, n, bw);
    }
    return put_header(out, (uint64_t)n << 1, v, (size_t)(bw + 7) / 8);
}

bool firn__pq_rle_decode(const uint8_t *p, size_t len, int bw, uint32_t *out, size_t n)
{
    firn_rd r;
    firn_rd_init(&r, p, len);
    size_t vbytes = (size_t)(bw + 7) / 8, got = 0;
    if (bw < 0 || bw > 32)
        return false;
    while (got < n) {
        uint64_t h = firn_rd_uvarint(&r);
        if (!firn_rd_ok(&r))
            return false;
        if (h & 1) {
            uint64_t count = (h >> 1) * 8;
            const uint8_t *src = firn_rd_bytes(&r, (size_t)(h >> 1) * (size_t)bw);
            if (!src || h >> 1 > len)
                return false;
            uint64_t acc = 0;
            int bits = 0;
            size_t pos = 0;
            for (uint64_t k = 0; k < count && got < n; k++) {
                while (bits < bw) {
                    acc |= (uint64_t)src[pos++] << bits;
                    bits += 8;
                }
                out[got++] = (uint32_t)(acc & ((bw == 32) ? 0xFFFFFFFFu : ((1u << bw) - 1)));
                acc >>= bw;
                bits -= bw;
            }
        } else {
            uint64_t count = h >> 1;
            uint32_t x = 0;
            const uint8_t *src = firn_rd_bytes(&r, vbytes);
            if (!src || count == 0)
                return false;
            memcpy(&x, src, vbytes);
            for (uint64_t k = 0; k < count && got < n; k++)
                out[got++] = x;
        }
    }
    return true;
}
