/* SPDX-License-Identifier: Apache-2.0 */
/* Page compression: zstd (standard frame, or raw-block frame for pages it cannot shrink), snappy
 * (raw block), gzip (with header), none. */
#include "pq_int.h"

#include <snappy-c.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>
#ifdef FIRN_HAVE_LZ4
#include <lz4.h>
#endif

struct pq_codec {
    firn_pq_codec codec;
    int level;
    ZSTD_CCtx *zc;
    z_stream zs;
    bool zs_ready;
};

firn_rc firn__pq_codec_new(firn_pq_codec codec, int level, pq_codec **out, firn_err *err)
{
    pq_codec *c = firn_calloc(1, sizeof(*c));
    c->codec = codec;
    c->level = level;
    switch (codec) {
    case FIRN_PQ_UNCOMPRESSED:
    case FIRN_PQ_SNAPPY:
        break;
    case FIRN_PQ_ZSTD:
        c->zc = ZSTD_createCCtx();
        if (!c->zc || ZSTD_isError(ZSTD_CCtx_setParameter(c->zc, ZSTD_c_compressionLevel,
                                                          level ? level : 1))) {
            firn__pq_codec_free(c);
            return firn_err_set(err, FIRN_ERR_INVALID, "invalid zstd level %d", level);
        }
        break;
    case FIRN_PQ_GZIP:
        if (deflateInit2(&c->zs, level ? level : Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                         Z_DEFAULT_STRATEGY) != Z_OK) {
            firn__pq_codec_free(c);
            return firn_err_set(err, FIRN_ERR_INVALID, "invalid gzip level %d", level);
        }
        c->zs_ready = true;
        break;
    default:
        firn__pq_codec_free(c);
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "unsupported parquet codec %d", codec);
    }
    *out = c;
    return FIRN_OK;
}

void firn__pq_codec_free(pq_codec *c)
{
    if (!c)
        return;
    ZSTD_freeCCtx(c->zc);
    if (c->zs_ready)
        deflateEnd(&c->zs);
    firn_free(c);
}

static firn_rc gzip_compress(pq_codec *c, firn_buf *out, const void *src, size_t len, firn_err *err)
{
    if (deflateReset(&c->zs) != Z_OK)
        return firn_err_set(err, FIRN_ERR_INTERNAL, "could not reset gzip stream");
    size_t bound = deflateBound(&c->zs, (uLong)len) + 32;
    FIRN_TRY(firn_buf_reserve(out, bound));
    c->zs.next_in = (Bytef *)(uintptr_t)src;
    c->zs.avail_in = (uInt)len;
    c->zs.next_out = out->data + out->len;
    c->zs.avail_out = (uInt)bound;
    if (deflate(&c->zs, Z_FINISH) != Z_STREAM_END)
        return firn_err_set(err, FIRN_ERR_INTERNAL, "could not gzip a page");
    out->len += bound - c->zs.avail_out;
    out->data[out->len] = 0;
    return FIRN_OK;
}

firn_rc firn__pq_compress(pq_codec *c, firn_buf *out, const void *src, size_t len, firn_err *err)
{
    switch (c->codec) {
    case FIRN_PQ_ZSTD: {
        size_t bound = ZSTD_compressBound(len);
        FIRN_TRY(firn_buf_reserve(out, bound));
        size_t n = ZSTD_compress2(c->zc, out->data + out->len, bound, src, len);
        if (ZSTD_isError(n))
            return firn_err_set(err, FIRN_ERR_INTERNAL, "could not zstd a page: %s",
                                ZSTD_getErrorName(n));
        out->len += n;
        out->data[out->len] = 0;
        return FIRN_OK;
    }
    case FIRN_PQ_SNAPPY: {
        size_t bound = snappy_max_compressed_length(len);
        FIRN_TRY(firn_buf_reserve(out, bound));
        if (snappy_compress(src, len, (char *)out->data + out->len, &bound) != SNAPPY_OK)
            return firn_err_set(err, FIRN_ERR_INTERNAL, "could not snappy a page");
        out->len += bound;
        out->data[out->len] = 0;
        return FIRN_OK;
    }
    case FIRN_PQ_GZIP:
        return gzip_compress(c, out, src, len, err);
    default:
        return firn_buf_append(out, src, len);
    }
}

#define ZSTD_MAGIC_LE    0xFD2FB528u
#define ZSTD_RAW_BLOCK   ((size_t)128 << 10) /* Block_Maximum_Size (RFC 8878 3.1.1.2.4) */
#define ZSTD_FHD_SINGLE  0x20u               /* Single_Segment_flag: no Window_Descriptor */
#define ZSTD_FCS_2_DELTA 256u                /* a 2-byte Frame_Content_Size holds size - 256 */

static void put_le(uint8_t *p, uint64_t v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Bytes of the Frame_Content_Size field of a single-segment frame, and its FCS_Field_Size. */
static size_t fcs_bytes(size_t len, unsigned *out_flag)
{
    if (len < 256) {
        *out_flag = 0;
        return 1;
    }
    if (len - ZSTD_FCS_2_DELTA <= UINT16_MAX) {
        *out_flag = 1;
        return 2;
    }
    if ((uint64_t)len <= UINT32_MAX) {
        *out_flag = 2;
        return 4;
    }
    *out_flag = 3;
    return 8;
}

size_t firn__pq_zstd_raw_size(size_t len)
{
    unsigned flag;
    const size_t blocks = len == 0 ? 1 : (len + ZSTD_RAW_BLOCK - 1) / ZSTD_RAW_BLOCK;
    return 4 + 1 + fcs_bytes(len, &flag) + 3 * blocks + len;
}

firn_rc firn__pq_zstd_raw_frame(firn_buf *out, const void *src, size_t len)
{
    FIRN_ASSERT(len <= PQ_ZSTD_RAW_MAX);
    FIRN_TRY(firn_buf_reserve(out, firn__pq_zstd_raw_size(len)));
    uint8_t *p = out->data + out->len;
    unsigned flag;
    const size_t fcs = fcs_bytes(len, &flag);
    put_le(p, ZSTD_MAGIC_LE, 4);
    p[4] = (uint8_t)(flag << 6 | ZSTD_FHD_SINGLE);
    put_le(p + 5, flag == 1 ? len - ZSTD_FCS_2_DELTA : len, fcs);
    p += 5 + fcs;
    const uint8_t *s = src;
    size_t left = len;
    do {
        const size_t n = left < ZSTD_RAW_BLOCK ? left : ZSTD_RAW_BLOCK;
        left -= n;
        /* Last_Block in bit 0, Block_Type 0 (Raw_Block) in bits 1-2, Block_Size above */
        put_le(p, (uint64_t)n << 3 | (left == 0 ? 1u : 0u), 3);
        if (n)
            memcpy(p + 3, s, n);
        p += 3 + n;
        s += n;
    } while (left > 0);
    out->len = (size_t)(p - out->data);
    out->data[out->len] = 0;
    return FIRN_OK;
}

firn_rc firn__pq_compress_page(
    pq_codec *c, pq_squeeze *sq, firn_buf *out, const void *src, size_t len, firn_err *err)
{
    if (c->codec != FIRN_PQ_ZSTD || len > PQ_ZSTD_RAW_MAX)
        return firn__pq_compress(c, out, src, len, err);
    if (len < PQ_ZSTD_RAW_BELOW)
        return firn__pq_zstd_raw_frame(out, src, len);
    if (sq->raw_left > 0) {
        sq->raw_left--;
        return firn__pq_zstd_raw_frame(out, src, len);
    }
    const size_t before = out->len;
    FIRN_TRY(firn__pq_compress(c, out, src, len, err));
    const size_t clen = out->len - before;
    if (clen >= len || (uint64_t)(len - clen) * 100 < (uint64_t)len * PQ_ZSTD_MIN_SAVING_PCT) {
        const uint32_t next = sq->backoff == 0 ? PQ_ZSTD_BACKOFF_FIRST : sq->backoff * 2;
        sq->backoff = next < PQ_ZSTD_BACKOFF_MAX ? next : PQ_ZSTD_BACKOFF_MAX;
        sq->raw_left = sq->backoff;
    } else {
        sq->backoff = 0;
    }
    return FIRN_OK;
}

static firn_rc gunzip(const void *src, size_t len, void *dst, size_t dst_len, firn_err *err)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    if (inflateInit2(&zs, 15 + 32) != Z_OK)
        return firn_err_set(err, FIRN_ERR_INTERNAL, "could not start gunzip");
    zs.next_in = (Bytef *)(uintptr_t)src;
    zs.avail_in = (uInt)len;
    zs.next_out = dst;
    zs.avail_out = (uInt)dst_len;
    int zrc = inflate(&zs, Z_FINISH);
    size_t got = dst_len - zs.avail_out;
    inflateEnd(&zs);
    if (zrc != Z_STREAM_END || got != dst_len)
        return firn_err_set(err, FIRN_ERR_PARSE, "corrupt gzip page");
    return FIRN_OK;
}

firn_rc firn__pq_decompress(
    firn_pq_codec codec, const void *src, size_t len, void *dst, size_t dst_len, firn_err *err)
{
    switch (codec) {
    case FIRN_PQ_UNCOMPRESSED:
        if (len != dst_len)
            return firn_err_set(err, FIRN_ERR_PARSE, "page size mismatch");
        memcpy(dst, src, len);
        return FIRN_OK;
    case FIRN_PQ_ZSTD: {
        size_t n = ZSTD_decompress(dst, dst_len, src, len);
        if (ZSTD_isError(n) || n != dst_len)
            return firn_err_set(err, FIRN_ERR_PARSE, "corrupt zstd page");
        return FIRN_OK;
    }
    case FIRN_PQ_SNAPPY: {
        size_t n = dst_len;
        if (snappy_uncompress(src, len, dst, &n) != SNAPPY_OK || n != dst_len)
            return firn_err_set(err, FIRN_ERR_PARSE, "corrupt snappy page");
        return FIRN_OK;
    }
    case FIRN_PQ_GZIP:
        return gunzip(src, len, dst, dst_len, err);
    case FIRN_PQ_LZ4_RAW:
#ifdef FIRN_HAVE_LZ4
        if (len > INT32_MAX || dst_len > INT32_MAX ||
            LZ4_decompress_safe(src, dst, (int)len, (int)dst_len) != (int)dst_len)
            return firn_err_set(err, FIRN_ERR_PARSE, "corrupt lz4 page");
        return FIRN_OK;
#else
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED,
                            "parquet codec LZ4_RAW needs liblz4, which this build lacks");
#endif
    }
    return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "unsupported parquet codec %d", codec);
}
