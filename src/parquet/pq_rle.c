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

static size_t rle_u32_run(const uint32_t *v, size_t i, size_t n, size_t limit)
{
    size_t j = i + 1;
    while (j < n && j - i < limit && v[j] == v[i])
        j++;
    return j - i;
}

/* Bit-packs 8 values of at most 16 bits (bw bytes out): two 64-bit words of 4 values each, one
 * shift-or per value; false for wider values or a group past n (packed one at a time). */
#define DEFINE_PACK8(NAME, T)                                                                      \
    static bool NAME##_pack8(uint8_t *dst, const T *v, size_t i, size_t n, int bw)                 \
    {                                                                                              \
        if (bw > 16 || n - i < 8)                                                                  \
            return false;                                                                          \
        const T *g = v + i;                                                                        \
        uint64_t a = (uint64_t)g[0] | (uint64_t)g[1] << bw | (uint64_t)g[2] << 2 * bw |            \
                     (uint64_t)g[3] << 3 * bw;                                                     \
        uint64_t b = (uint64_t)g[4] | (uint64_t)g[5] << bw | (uint64_t)g[6] << 2 * bw |            \
                     (uint64_t)g[7] << 3 * bw;                                                     \
        int half = 4 * bw; /* bits of a and of b */                                                \
        uint64_t lo = half == 64 ? a : a | b << half;                                              \
        uint64_t hi = half == 64 ? b : b >> (64 - half);                                           \
        if (bw <= 8) {                                                                             \
            memcpy(dst, &lo, (size_t)bw);                                                          \
        } else {                                                                                   \
            memcpy(dst, &lo, 8);                                                                   \
            memcpy(dst + 8, &hi, (size_t)bw - 8);                                                  \
        }                                                                                          \
        return true;                                                                               \
    }

DEFINE_PACK8(rle_u8, uint8_t)
DEFINE_PACK8(rle_u32, uint32_t)

#define DEFINE_RLE(NAME, T)                                                                        \
    static void NAME##_pack(uint8_t *dst, const T *v, size_t i, size_t n, size_t count, int bw)    \
    {                                                                                              \
        while (count >= 8 && NAME##_pack8(dst, v, i, n, bw)) {                                     \
            dst += bw;                                                                             \
            i += 8;                                                                                \
            count -= 8;                                                                            \
        }                                                                                          \
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
                uint64_t x = (uint64_t)v[i];                                                       \
                FIRN_TRY(firn_wr_uvarint(out, (uint64_t)run << 1));                                \
                FIRN_TRY(firn_buf_append(out, &x, vbytes)); /* little-endian host */               \
                i += run;                                                                          \
                continue;                                                                          \
            }                                                                                      \
            size_t start = i, groups = 0;                                                          \
            while (i < n && groups < MAX_LITERAL_GROUPS) {                                         \
                if (i != start && NAME##_run(v, i, n, 8) >= 8)                                     \
                    break;                                                                         \
                i += 8;                                                                            \
                groups++;                                                                          \
            }                                                                                      \
            if (i > n)                                                                             \
                i = n;                                                                             \
            FIRN_TRY(firn_wr_uvarint(out, ((uint64_t)groups << 1) | 1));                           \
            FIRN_TRY(firn_buf_reserve(out, groups *(size_t)bw));                                   \
            NAME##_pack(out->data + out->len, v, start, n, groups * 8, bw);                        \
            out->len += groups * (size_t)bw;                                                       \
            out->data[out->len] = 0;                                                               \
        }                                                                                          \
        return FIRN_OK;                                                                            \
    }

DEFINE_RLE(rle_u8, uint8_t)
DEFINE_RLE(rle_u32, uint32_t)

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
