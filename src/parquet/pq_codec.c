/* SPDX-License-Identifier: Apache-2.0 */
/* Page compression: zstd (standard frame), snappy (raw block), gzip (with header), none. */
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
