/* SPDX-License-Identifier: Apache-2.0 */
/* Pages of one column chunk for the column reader: PageHeader (parquet.thrift), decompression
 * with size checks, definition levels, dictionary pages and the value encodings of data pages
 * v1 and v2, appended to a batch column around the nulls. */
#include "pq_read_int.h"

#include <snappy-c.h>
#include <string.h>
#include <zstd.h>

typedef struct rd_hdr {
    int32_t type, usize, csize;
    int32_t num_values, num_nulls, encoding, def_enc;
    int32_t def_len, rep_len;
    bool is_compressed;
    bool has_v1, has_v2, has_dict;
} rd_hdr;

#define FOR_FIELDS(r, id, t) for (firn__pq_tr_struct_begin(r); firn__pq_tr_field((r), &(id), &(t));)

static int32_t hdr_i32(pq_tr *r, uint8_t t)
{
    int64_t v = firn__pq_tr_int(r, t);
    if (v < INT32_MIN || v > INT32_MAX)
        firn_rd_fail(&r->rd);
    return (int32_t)v;
}

/* DataPageHeader (5), DictionaryPageHeader (7) and DataPageHeaderV2 (8). */
static void read_sub(pq_tr *r, int16_t which, rd_hdr *h)
{
    int16_t id;
    uint8_t t;
    FOR_FIELDS(r, id, t)
    {
        if (id == 1) {
            h->num_values = hdr_i32(r, t);
        } else if (which == 5 && id <= 4 && id >= 2) {
            int32_t v = hdr_i32(r, t);
            if (id == 2)
                h->encoding = v;
            else if (id == 3)
                h->def_enc = v;
        } else if (which == 7 && id == 2) {
            h->encoding = hdr_i32(r, t);
        } else if (which == 8 && id >= 2 && id <= 6) {
            int32_t v = hdr_i32(r, t);
            if (id == 2)
                h->num_nulls = v;
            else if (id == 4)
                h->encoding = v;
            else if (id == 5)
                h->def_len = v;
            else if (id == 6)
                h->rep_len = v;
        } else if (which == 8 && id == 7 && (t == TC_TRUE || t == TC_FALSE)) {
            h->is_compressed = firn__pq_tr_bool(r, t);
        } else {
            firn__pq_tr_skip(r, t);
        }
    }
    firn__pq_tr_struct_end(r);
}

/* Parses a PageHeader at p; *used is its size. */
static bool read_header(const uint8_t *p, size_t len, rd_hdr *h, size_t *used)
{
    pq_tr r;
    int16_t id;
    uint8_t t;
    memset(h, 0, sizeof(*h));
    h->type = h->usize = h->csize = -1;
    h->is_compressed = true;
    firn__pq_tr_init(&r, p, len);
    FOR_FIELDS(&r, id, t)
    {
        if (id >= 1 && id <= 3) {
            int32_t v = hdr_i32(&r, t);
            if (id == 1)
                h->type = v;
            else if (id == 2)
                h->usize = v;
            else
                h->csize = v;
        } else if ((id == 5 || id == 7 || id == 8) && t == TC_STRUCT) {
            h->has_v1 |= id == 5;
            h->has_dict |= id == 7;
            h->has_v2 |= id == 8;
            read_sub(&r, id, h);
        } else {
            firn__pq_tr_skip(&r, t);
        }
    }
    firn__pq_tr_struct_end(&r);
    *used = r.rd.pos;
    return firn_rd_ok(&r.rd) && h->type >= 0 && h->usize >= 0 && h->csize >= 0;
}

/* Checks a claimed decompressed size against what the codec can produce from clen bytes. */
static firn_rc
plausible(firn_pq_codec codec, const uint8_t *src, size_t clen, size_t ulen, firn_err *err)
{
    if (ulen > RD_PAGE_MAX)
        return firn_err_set(err, FIRN_ERR_TOO_LARGE, "page of %zu bytes exceeds the %zu limit",
                            ulen, RD_PAGE_MAX);
    bool ok = true;
    if (codec == FIRN_PQ_SNAPPY) {
        size_t n = 0;
        ok = snappy_uncompressed_length((const char *)src, clen, &n) == SNAPPY_OK && n == ulen;
    } else if (codec == FIRN_PQ_ZSTD) {
        unsigned long long n = ZSTD_getFrameContentSize(src, clen);
        ok = n != ZSTD_CONTENTSIZE_ERROR && (n == ZSTD_CONTENTSIZE_UNKNOWN || n == ulen);
    } else if (codec == FIRN_PQ_GZIP) {
        ok = ulen / 1032 <= clen; /* deflate's largest ratio */
    } else if (codec == FIRN_PQ_LZ4_RAW) {
        ok = ulen / 255 <= clen;
    }
    if (!ok)
        return firn_err_set(err, FIRN_ERR_PARSE,
                            "compressed page of %zu bytes cannot hold the %zu bytes it claims",
                            clen, ulen);
    return FIRN_OK;
}

/* Makes *out point at the ulen decompressed bytes of src (src itself when uncompressed). */
static firn_rc inflate(firn_pq_codec codec,
                       const uint8_t *src,
                       size_t clen,
                       size_t ulen,
                       uint8_t **buf,
                       size_t *cap,
                       const uint8_t **out,
                       firn_err *err)
{
    if (codec == FIRN_PQ_UNCOMPRESSED) {
        if (clen != ulen)
            return firn_err_set(err, FIRN_ERR_PARSE,
                                "uncompressed page of %zu bytes claims %zu bytes", clen, ulen);
        *out = src;
        return FIRN_OK;
    }
    FIRN_TRY(plausible(codec, src, clen, ulen, err));
    firn__pq_rd_grow((void **)buf, cap, ulen + 1, 1);
    FIRN_TRY(firn__pq_decompress(codec, src, clen, *buf, ulen, err));
    *out = *buf;
    return FIRN_OK;
}

/* ---- values -------------------------------------------------------------------------------- */

static const char *enc_name(int enc)
{
    static const char *const names[] = {
        "PLAIN",          "GROUP_VAR_INT",       "PLAIN_DICTIONARY",        "RLE",
        "BIT_PACKED",     "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
        "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
    return enc >= 0 && enc < (int)(sizeof(names) / sizeof(names[0])) ? names[enc] : "unknown";
}

static firn_rc bad_values(firn_err *err, int enc)
{
    return firn_err_set(err, FIRN_ERR_PARSE, "malformed %s values", enc_name(enc));
}

/* Decodes n present values of a non-dictionary encoding into physical form. */
static firn_rc decode_phys(
    rd_chunk_ctx *cx, int enc, const uint8_t *p, size_t len, size_t n, rd_vals *v, firn_err *err)
{
    const rd_col *c = cx->col;
    rd_scratch *s = cx->s;
    v->n = n;
    bool ba = c->ptype == PQ_BYTE_ARRAY;
    if (ba || enc == RD_ENC_DELTA_BA) {
        firn__pq_rd_grow((void **)&s->ptr, &s->ptr_cap, n + 1, sizeof(*s->ptr));
        firn__pq_rd_grow((void **)&s->len, &s->len_cap, n + 1, sizeof(*s->len));
        v->ptr = s->ptr;
        v->len = s->len;
    }
    switch (enc) {
    case RD_ENC_PLAIN:
        if (c->ptype == PQ_BOOLEAN) {
            firn__pq_rd_grow((void **)&s->phys, &s->phys_cap, n + 1, 1);
            v->fixed = s->phys;
            return firn__pq_rd_bools(p, len, s->phys, n) ? FIRN_OK : bad_values(err, enc);
        }
        if (ba)
            return firn__pq_rd_plain_bytes(p, len, n, v->ptr, v->len) ? FIRN_OK
                                                                      : bad_values(err, enc);
        if (n > len / c->pw)
            return firn_err_set(err, FIRN_ERR_PARSE, "page holds fewer than %zu values", n);
        v->fixed = p;
        return FIRN_OK;
    case RD_ENC_RLE: {
        uint32_t l;
        if (c->ptype != PQ_BOOLEAN)
            break;
        firn__pq_rd_grow((void **)&s->phys, &s->phys_cap, n + 1, 1);
        v->fixed = s->phys;
        if (len < 4)
            return bad_values(err, enc);
        memcpy(&l, p, 4);
        if (l > len - 4 || !firn__pq_rd_rle_u8(p + 4, l, 1, s->phys, n))
            return bad_values(err, enc);
        return FIRN_OK;
    }
    case RD_ENC_DELTA_BP: {
        size_t got, used;
        if (c->ptype != PQ_INT32 && c->ptype != PQ_INT64)
            break;
        if (!firn__pq_rd_delta_bp(p, len, c->ptype == PQ_INT32, &s->ints, &s->ints_cap, n, &got,
                                  &used) ||
            got != n)
            return bad_values(err, enc);
        if (c->ptype == PQ_INT64) {
            v->fixed = (const uint8_t *)s->ints;
            return FIRN_OK;
        }
        firn__pq_rd_grow((void **)&s->phys, &s->phys_cap, n * 4 + 1, 1);
        int32_t *o = (int32_t *)(void *)s->phys;
        for (size_t i = 0; i < n; i++)
            o[i] = (int32_t)(uint32_t)(uint64_t)s->ints[i];
        v->fixed = s->phys;
        return FIRN_OK;
    }
    case RD_ENC_DELTA_LBA:
    case RD_ENC_DELTA_BA:
        if (enc == RD_ENC_DELTA_LBA && !ba)
            break;
        if (!ba && c->ptype != PQ_FLBA)
            break;
        return firn__pq_rd_delta_bytes(cx, enc == RD_ENC_DELTA_BA, p, len, v, err);
    case RD_ENC_BSS:
        if (c->ptype == PQ_BOOLEAN || ba)
            break;
        firn__pq_rd_grow((void **)&s->phys, &s->phys_cap, n * c->pw + 1, 1);
        v->fixed = s->phys;
        return firn__pq_rd_bss(p, len, c->pw, s->phys, n) ? FIRN_OK : bad_values(err, enc);
    default:
        break;
    }
    return firn_err_set(err, FIRN_ERR_UNSUPPORTED,
                        "encoding %s (%d) is not supported for parquet type %d", enc_name(enc), enc,
                        c->ptype);
}

/* Dictionary ids of n present values into s->idx, checked against the dictionary size. */
static firn_rc decode_ids(rd_chunk_ctx *cx, const uint8_t *p, size_t len, size_t n, firn_err *err)
{
    rd_scratch *s = cx->s;
    if (!s->has_dict)
        return firn_err_set(err, FIRN_ERR_PARSE, "dictionary-encoded page without a dictionary");
    firn__pq_rd_grow((void **)&s->idx, &s->idx_cap, n + 1, sizeof(uint32_t));
    if (n == 0)
        return FIRN_OK;
    if (len < 1 || !firn__pq_rd_rle_u32(p + 1, len - 1, p[0], s->idx, n))
        return firn_err_set(err, FIRN_ERR_PARSE, "malformed dictionary ids");
    uint32_t mx = 0;
    for (size_t i = 0; i < n; i++)
        mx = s->idx[i] > mx ? s->idx[i] : mx;
    if (mx >= s->dict_n)
        return firn_err_set(err, FIRN_ERR_PARSE, "dictionary id %u past the %zu entries", mx,
                            s->dict_n);
    return FIRN_OK;
}

#define GATHER(T)                                                                                  \
    do {                                                                                           \
        const T *d_ = (const T *)(const void *)s->dict_out;                                        \
        T *o_ = (T *)(void *)dst;                                                                  \
        for (size_t i = 0; i < n; i++)                                                             \
            o_[i] = d_[s->idx[i]];                                                                 \
    } while (0)

/* Writes n present values (output form) to dst. */
static firn_rc decode_fixed(
    rd_chunk_ctx *cx, int enc, const uint8_t *p, size_t len, size_t n, uint8_t *dst, firn_err *err)
{
    const rd_col *c = cx->col;
    rd_scratch *s = cx->s;
    if (enc == RD_ENC_PLAIN_DICT || enc == RD_ENC_RLE_DICT) {
        FIRN_TRY(decode_ids(cx, p, len, n, err));
        switch (c->ow) {
        case 1:
            GATHER(uint8_t);
            break;
        case 4:
            GATHER(uint32_t);
            break;
        case 8:
            GATHER(uint64_t);
            break;
        default:
            for (size_t i = 0; i < n; i++)
                memcpy(dst + i * c->ow, s->dict_out + (size_t)s->idx[i] * c->ow, c->ow);
        }
        return FIRN_OK;
    }
    rd_vals v = {0};
    FIRN_TRY(decode_phys(cx, enc, p, len, n, &v, err));
    if (c->conv == CV_COPY) {
        if (n)
            memcpy(dst, v.fixed, n * c->ow);
        return FIRN_OK;
    }
    return firn__pq_rd_convert(c, &v, dst, err);
}

/* Pointers and lengths of n present byte-array values into s->ptr/s->len. */
static firn_rc decode_bytes(
    rd_chunk_ctx *cx, int enc, const uint8_t *p, size_t len, size_t n, rd_vals *v, firn_err *err)
{
    rd_scratch *s = cx->s;
    if (enc == RD_ENC_PLAIN_DICT || enc == RD_ENC_RLE_DICT) {
        FIRN_TRY(decode_ids(cx, p, len, n, err));
        firn__pq_rd_grow((void **)&s->ptr, &s->ptr_cap, n + 1, sizeof(*s->ptr));
        firn__pq_rd_grow((void **)&s->len, &s->len_cap, n + 1, sizeof(*s->len));
        for (size_t i = 0; i < n; i++) {
            s->ptr[i] = s->dict_ptr[s->idx[i]];
            s->len[i] = s->dict_len[s->idx[i]];
        }
        v->n = n;
        v->ptr = s->ptr;
        v->len = s->len;
        return FIRN_OK;
    }
    return decode_phys(cx, enc, p, len, n, v, err);
}

/* Appends n slots (def: levels turned into 0/1 validity, NULL when all present) holding the
 * n_present values decoded from p[0..len) with encoding enc. */
static firn_rc put_values(rd_chunk_ctx *cx,
                          int enc,
                          const uint8_t *p,
                          size_t len,
                          size_t n,
                          const uint8_t *def,
                          size_t n_present,
                          firn_err *err)
{
    const rd_col *c = cx->col;
    rd_scratch *s = cx->s;
    if (c->out != OUT_BYTES) {
        if (!def) {
            uint8_t *dst = firn_column_append_fixed_n(cx->column, n, NULL);
            return decode_fixed(cx, enc, p, len, n, dst, err);
        }
        firn__pq_rd_grow((void **)&s->outv, &s->outv_cap, n_present * c->ow + 1, 1);
        FIRN_TRY(decode_fixed(cx, enc, p, len, n_present, s->outv, err));
        uint8_t *dst = firn_column_append_fixed_n(cx->column, n, def);
        for (size_t i = 0, j = 0; i < n; i++) {
            if (def[i])
                memcpy(dst + i * c->ow, s->outv + (j++) * c->ow, c->ow);
        }
        return FIRN_OK;
    }
    rd_vals v = {0};
    FIRN_TRY(decode_bytes(cx, enc, p, len, n_present, &v, err));
    uint64_t used = firn_column_offsets(cx->column)[firn_column_length(cx->column)];
    for (size_t i = 0, j = 0; i < n; i++) {
        if (def && !def[i]) {
            firn_column_append_null(cx->column);
            continue;
        }
        used += v.len[j];
        if (used > UINT32_MAX)
            return firn_err_set(err, FIRN_ERR_TOO_LARGE,
                                "string data of one row group column exceeds 4 GiB");
        firn_column_append_bytes(cx->column, v.ptr[j], v.len[j]);
        j++;
    }
    return FIRN_OK;
}

/* ---- pages ------------------------------------------------------------------------------- */

/* Turns levels into 0/1 validity in place; returns false on a level past max_def. */
static bool levels_to_valid(uint8_t *def, size_t n, int16_t max_def, size_t *n_present)
{
    size_t present = 0;
    uint8_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        bad |= def[i] > max_def;
        def[i] = def[i] == max_def;
        present += def[i];
    }
    *n_present = present;
    return !bad;
}

static firn_rc dict_page(rd_chunk_ctx *cx, const rd_hdr *h, const uint8_t *body, firn_err *err)
{
    const rd_col *c = cx->col;
    rd_scratch *s = cx->s;
    if (s->has_dict)
        return firn_err_set(err, FIRN_ERR_PARSE, "second dictionary page in a column chunk");
    if (h->encoding != RD_ENC_PLAIN && h->encoding != RD_ENC_PLAIN_DICT)
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "dictionary page encoding %s",
                            enc_name(h->encoding));
    if (h->num_values < 0 || (c->pw && (size_t)h->num_values > (size_t)h->usize / c->pw) ||
        (!c->pw && (size_t)h->num_values > (size_t)h->usize / 4))
        return firn_err_set(err, FIRN_ERR_PARSE, "dictionary of %d entries in %d bytes",
                            h->num_values, h->usize);
    const uint8_t *p;
    FIRN_TRY(inflate(cx->codec, body, (size_t)h->csize, (size_t)h->usize, &s->dict, &s->dict_cap,
                     &p, err));
    size_t n = (size_t)h->num_values;
    rd_vals v = {0};
    FIRN_TRY(decode_phys(cx, RD_ENC_PLAIN, p, (size_t)h->usize, n, &v, err));
    if (c->out == OUT_BYTES) {
        firn__pq_rd_grow((void **)&s->dict_ptr, &s->dict_ptr_cap, n + 1, sizeof(*s->dict_ptr));
        firn__pq_rd_grow((void **)&s->dict_len, &s->dict_len_cap, n + 1, sizeof(*s->dict_len));
        if (n) {
            memcpy(s->dict_ptr, v.ptr, n * sizeof(*v.ptr));
            memcpy(s->dict_len, v.len, n * sizeof(*v.len));
        }
    } else {
        firn__pq_rd_grow((void **)&s->dict_out, &s->dict_out_cap, n * c->ow + 1, 1);
        if (c->conv == CV_COPY) {
            if (n)
                memcpy(s->dict_out, v.fixed, n * c->ow);
        } else {
            FIRN_TRY(firn__pq_rd_convert(c, &v, s->dict_out, err));
        }
    }
    s->dict_n = n;
    s->has_dict = true;
    return FIRN_OK;
}

/* Definition levels of a v1 page at p[0..len): sets *used to the bytes they take. */
static firn_rc levels_v1(rd_chunk_ctx *cx,
                         const rd_hdr *h,
                         const uint8_t *p,
                         size_t len,
                         size_t n,
                         size_t *used,
                         bool *all,
                         firn_err *err)
{
    rd_scratch *s = cx->s;
    int bw = firn__pq_bit_width((uint64_t)cx->col->max_def);
    bool ok;
    *all = false;
    if (h->def_enc == RD_ENC_RLE) {
        uint32_t l = 0;
        if (len >= 4)
            memcpy(&l, p, 4);
        ok = len >= 4 && l <= len - 4;
        *all = ok && firn__pq_rd_rle_all(p + 4, l, bw, (uint32_t)cx->col->max_def, n);
        ok = ok && (*all || firn__pq_rd_rle_u8(p + 4, l, bw, s->def, n));
        *used = 4 + (size_t)l;
    } else if (h->def_enc == RD_ENC_BIT_PACKED) {
        ok = firn__pq_rd_bitpacked_u8(p, len, bw, s->def, n);
        *used = (n * (size_t)bw + 7) / 8;
    } else {
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "definition level encoding %s",
                            enc_name(h->def_enc));
    }
    return ok ? FIRN_OK : firn_err_set(err, FIRN_ERR_PARSE, "malformed definition levels");
}

/* Fast path for a page of a required column whose values are PLAIN, need no conversion and fill
 * the page exactly: decompress (or copy) straight into the batch column. False when the page
 * does not qualify. */
static bool direct_page(rd_chunk_ctx *cx,
                        const rd_hdr *h,
                        const uint8_t *src,
                        size_t clen,
                        size_t ulen,
                        firn_rc *rc,
                        firn_err *err)
{
    const rd_col *c = cx->col;
    size_t n = (size_t)h->num_values;
    if (c->max_def || h->encoding != RD_ENC_PLAIN || c->conv != CV_COPY || c->out == OUT_BYTES ||
        c->ptype == PQ_BOOLEAN || n == 0 || ulen / c->pw != n || ulen % c->pw ||
        (h->type == RD_PAGE_DATA_V2 && !h->is_compressed))
        return false;
    if (cx->codec == FIRN_PQ_UNCOMPRESSED) {
        if (clen != ulen)
            return false;
        memcpy(firn_column_append_fixed_n(cx->column, n, NULL), src, ulen);
        *rc = FIRN_OK;
        return true;
    }
    *rc = plausible(cx->codec, src, clen, ulen, err);
    if (!*rc)
        *rc = firn__pq_decompress(cx->codec, src, clen,
                                  firn_column_append_fixed_n(cx->column, n, NULL), ulen, err);
    return true;
}

static firn_rc data_page(rd_chunk_ctx *cx, const rd_hdr *h, const uint8_t *body, firn_err *err)
{
    const rd_col *c = cx->col;
    rd_scratch *s = cx->s;
    bool v2 = h->type == RD_PAGE_DATA_V2;
    if (h->num_values < 0 || h->num_values > cx->values_left)
        return firn_err_set(err, FIRN_ERR_PARSE, "page of %d values where %lld remain",
                            h->num_values, (long long)cx->values_left);
    if (h->num_values == 0)
        return FIRN_OK; /* nothing to decode (some writers emit empty pages) */
    size_t n = (size_t)h->num_values, lv = 0, n_present = n;
    bool all = false;
    const uint8_t *p = NULL;
    size_t len;
    firn_rc rc;
    if (h->def_len == 0 && h->rep_len == 0 &&
        direct_page(cx, h, body, (size_t)h->csize, (size_t)h->usize, &rc, err)) {
        cx->values_left -= rc ? 0 : (int64_t)n;
        return rc;
    }
    if (c->max_def)
        firn__pq_rd_grow((void **)&s->def, &s->def_cap, n + 1, 1);
    if (!v2) {
        FIRN_TRY(inflate(cx->codec, body, (size_t)h->csize, (size_t)h->usize, &s->page,
                         &s->page_cap, &p, err));
        len = (size_t)h->usize;
        if (c->max_def)
            FIRN_TRY(levels_v1(cx, h, p, len, n, &lv, &all, err));
    } else {
        if (h->def_len < 0 || h->rep_len != 0 || h->def_len > h->csize || h->def_len > h->usize)
            return firn_err_set(err, FIRN_ERR_PARSE, "bad level lengths in a v2 page");
        lv = (size_t)h->def_len;
        int bw = firn__pq_bit_width((uint64_t)c->max_def);
        all = c->max_def && ((lv == 0 && h->num_nulls == 0) ||
                             firn__pq_rd_rle_all(body, lv, bw, (uint32_t)c->max_def, n));
        if (c->max_def && !all && !firn__pq_rd_rle_u8(body, lv, bw, s->def, n))
            return firn_err_set(err, FIRN_ERR_PARSE, "malformed definition levels");
        size_t clen = (size_t)h->csize - lv, ulen = (size_t)h->usize - lv;
        p = body + lv;
        if (ulen && h->is_compressed && cx->codec != FIRN_PQ_UNCOMPRESSED)
            FIRN_TRY(inflate(cx->codec, body + lv, clen, ulen, &s->page, &s->page_cap, &p, err));
        else if (ulen && clen != ulen)
            return firn_err_set(err, FIRN_ERR_PARSE, "uncompressed v2 page size mismatch");
        len = ulen;
        lv = 0;
    }
    if (lv > len)
        return firn_err_set(err, FIRN_ERR_PARSE, "definition levels overrun the page");
    const uint8_t *def = NULL;
    if (c->max_def && !all) {
        if (!levels_to_valid(s->def, n, c->max_def, &n_present))
            return firn_err_set(err, FIRN_ERR_PARSE, "definition level above %d", c->max_def);
        def = n_present == n ? NULL : s->def;
    }
    FIRN_TRY(put_values(cx, h->encoding, p + lv, len - lv, n, def, n_present, err));
    cx->values_left -= (int64_t)n;
    return FIRN_OK;
}

firn_rc firn__pq_rd_chunk(rd_chunk_ctx *cx, const uint8_t *p, size_t len, firn_err *err)
{
    size_t pos = 0;
    int page = 0;
    cx->s->has_dict = false;
    cx->s->dict_n = 0;
    firn_rc rc = FIRN_OK;
    while (cx->values_left > 0 && !rc) {
        rd_hdr h;
        size_t used;
        if (pos >= len) {
            rc = firn_err_set(err, FIRN_ERR_PARSE, "column chunk ends %lld values short",
                              (long long)cx->values_left);
            break;
        }
        if (!read_header(p + pos, len - pos, &h, &used) || (size_t)h.csize > len - pos - used) {
            rc = firn_err_set(err, FIRN_ERR_PARSE, "malformed page header");
            break;
        }
        const uint8_t *body = p + pos + used;
        pos += used + (size_t)h.csize;
        if (h.type == RD_PAGE_DICT && h.has_dict)
            rc = page == 0 ? dict_page(cx, &h, body, err)
                           : firn_err_set(err, FIRN_ERR_PARSE, "dictionary page after data");
        else if ((h.type == RD_PAGE_DATA && h.has_v1) || (h.type == RD_PAGE_DATA_V2 && h.has_v2))
            rc = data_page(cx, &h, body, err);
        else if (h.type == RD_PAGE_DATA || h.type == RD_PAGE_DATA_V2 || h.type == RD_PAGE_DICT)
            rc = firn_err_set(err, FIRN_ERR_PARSE, "page header of type %d lacks its details",
                              h.type);
        if (rc)
            firn_err_context(err, "while reading page %d", page);
        page++;
    }
    return rc;
}
