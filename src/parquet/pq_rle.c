/* SPDX-License-Identifier: Apache-2.0 */
/* The RLE / bit-packed hybrid of parquet-format Encodings.md, for levels and dictionary ids:
 * runs of 8+ equal values become RLE runs, the rest bit-packed groups of 8 (LSB first). */
#include "pq_int.h"

#include <string.h>

#define MAX_LITERAL_GROUPS 63 /* keeps each literal header one byte, as parquet-java does */

#define DEFINE_RLE(NAME, T)                                                                        \
    static size_t NAME##_run(const T *v, size_t i, size_t n, size_t limit)                         \
    {                                                                                              \
        size_t j = i + 1;                                                                          \
        while (j < n && j - i < limit && v[j] == v[i])                                             \
            j++;                                                                                   \
        return j - i;                                                                              \
    }                                                                                              \
    static void NAME##_pack(uint8_t *dst, const T *v, size_t i, size_t n, size_t count, int bw)    \
    {                                                                                              \
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
