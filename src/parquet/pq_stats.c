/* SPDX-License-Identifier: Apache-2.0 */
/* Column statistics: typed min/max, their Parquet PLAIN form (parquet.thrift Statistics) and
 * Iceberg single-value bounds (Iceberg spec Appendix D, MetricsModes truncate(16)). */
#include "pq_int.h"

#include <string.h>

#define TRUNCATE_LEN 16

void firn__pq_stat_init(pq_stat *s)
{
    memset(s, 0, sizeof(*s));
    firn_buf_init(&s->bmin, PQ_PAGE_MAX);
    firn_buf_init(&s->bmax, PQ_PAGE_MAX);
}

void firn__pq_stat_deinit(pq_stat *s)
{
    firn_buf_deinit(&s->bmin);
    firn_buf_deinit(&s->bmax);
}

void firn__pq_stat_reset(pq_stat *s)
{
    s->has = false;
    firn_buf_reset(&s->bmin);
    firn_buf_reset(&s->bmax);
}

int firn__pq_cmp_signed_be(const uint8_t *a, const uint8_t *b, size_t len)
{
    if (len == 0)
        return 0;
    if (a[0] != b[0])
        return (int8_t)a[0] < (int8_t)b[0] ? -1 : 1;
    return memcmp(a + 1, b + 1, len - 1);
}

static int cmp_unsigned(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    if (c)
        return c;
    return alen < blen ? -1 : alen > blen ? 1 : 0;
}

firn_rc firn__pq_stat_bytes(pq_stat *s, const uint8_t *p, size_t len, bool is_signed)
{
    if (!s->has) {
        firn_buf_reset(&s->bmin);
        firn_buf_reset(&s->bmax);
        FIRN_TRY(firn_buf_append(&s->bmin, p, len));
        FIRN_TRY(firn_buf_append(&s->bmax, p, len));
        s->has = true;
        return FIRN_OK;
    }
    int lo, hi;
    if (is_signed) {
        lo = firn__pq_cmp_signed_be(p, s->bmin.data, len);
        hi = firn__pq_cmp_signed_be(p, s->bmax.data, len);
    } else {
        lo = cmp_unsigned(p, len, s->bmin.data, s->bmin.len);
        hi = cmp_unsigned(p, len, s->bmax.data, s->bmax.len);
    }
    if (lo < 0) {
        firn_buf_reset(&s->bmin);
        FIRN_TRY(firn_buf_append(&s->bmin, p, len));
    }
    if (hi > 0) {
        firn_buf_reset(&s->bmax);
        FIRN_TRY(firn_buf_append(&s->bmax, p, len));
    }
    return FIRN_OK;
}

firn_rc firn__pq_stat_merge(pq_stat *dst, const pq_stat *src, pq_kind kind)
{
    if (!src->has)
        return FIRN_OK;
    switch (kind) {
    case PQK_BOOL:
    case PQK_I32:
    case PQK_I32_I64:
    case PQK_I64:
        dst->imin = !dst->has || src->imin < dst->imin ? src->imin : dst->imin;
        dst->imax = !dst->has || src->imax > dst->imax ? src->imax : dst->imax;
        break;
    case PQK_FLOAT:
    case PQK_DOUBLE:
        dst->dmin = !dst->has || src->dmin < dst->dmin ? src->dmin : dst->dmin;
        dst->dmax = !dst->has || src->dmax > dst->dmax ? src->dmax : dst->dmax;
        break;
    case PQK_DEC128:
        dst->qmin = !dst->has || src->qmin < dst->qmin ? src->qmin : dst->qmin;
        dst->qmax = !dst->has || src->qmax > dst->qmax ? src->qmax : dst->qmax;
        break;
    case PQK_FLBA:
    case PQK_BYTES:
        FIRN_TRY(firn__pq_stat_bytes(dst, src->bmin.data, src->bmin.len, false));
        FIRN_TRY(firn__pq_stat_bytes(dst, src->bmax.data, src->bmax.len, false));
        break;
    }
    dst->has = true;
    return FIRN_OK;
}

static void be_bytes(pq_i128 v, uint8_t out[16])
{
    unsigned __int128 u = (unsigned __int128)v;
    for (int i = 15; i >= 0; i--) {
        out[i] = (uint8_t)u;
        u >>= 8;
    }
}

bool firn__pq_stat_plain(const pq_stat *s,
                         const pq_leaf *leaf,
                         bool is_max,
                         uint8_t *buf,
                         size_t cap,
                         const uint8_t **out,
                         size_t *out_len)
{
    FIRN_ASSERT(cap >= 16);
    if (!s->has)
        return false;
    int64_t i = is_max ? s->imax : s->imin;
    double d = is_max ? s->dmax : s->dmin;
    *out = buf;
    switch (leaf->kind) {
    case PQK_BOOL:
        buf[0] = (uint8_t)i;
        *out_len = 1;
        return true;
    case PQK_I32:
    case PQK_I32_I64: {
        int32_t v = (int32_t)i;
        memcpy(buf, &v, 4);
        *out_len = 4;
        return true;
    }
    case PQK_I64:
        memcpy(buf, &i, 8);
        *out_len = 8;
        return true;
    case PQK_FLOAT:
    case PQK_DOUBLE:
        if (d == 0.0) /* parquet-format: min -0.0, max +0.0 */
            d = is_max ? 0.0 : -0.0;
        if (leaf->kind == PQK_FLOAT) {
            float f = (float)d;
            memcpy(buf, &f, 4);
            *out_len = 4;
        } else {
            memcpy(buf, &d, 8);
            *out_len = 8;
        }
        return true;
    case PQK_DEC128: {
        uint8_t be[16];
        be_bytes(is_max ? s->qmax : s->qmin, be);
        memcpy(buf, be + 16 - leaf->type_length, (size_t)leaf->type_length);
        *out_len = (size_t)leaf->type_length;
        return true;
    }
    case PQK_FLBA:
    case PQK_BYTES: {
        const firn_buf *b = is_max ? &s->bmax : &s->bmin;
        *out = b->data ? b->data : buf;
        *out_len = b->len;
        return true;
    }
    }
    return false;
}

/* ---- Iceberg bounds ----------------------------------------------------------------------- */

/* Two's complement big-endian in the fewest bytes (Java BigInteger.toByteArray). */
static size_t decimal_bound(pq_i128 v, uint8_t *out)
{
    uint8_t be[16];
    be_bytes(v, be);
    size_t skip = 0;
    while (skip < 15 && ((be[skip] == 0x00 && !(be[skip + 1] & 0x80)) ||
                         (be[skip] == 0xFF && (be[skip + 1] & 0x80))))
        skip++;
    memcpy(out, be + skip, 16 - skip);
    return 16 - skip;
}

/* Length of the UTF-8 sequence starting with byte c (1 for stray bytes). */
static size_t utf8_len(uint8_t c)
{
    return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
}

/* Bytes of the first max_cp code points of p. */
static size_t utf8_prefix(const uint8_t *p, size_t len, size_t max_cp, size_t *out_cps)
{
    size_t at = 0, cps = 0;
    while (at < len && cps < max_cp) {
        size_t n = utf8_len(p[at]);
        at = at + n > len ? len : at + n;
        cps++;
    }
    *out_cps = cps;
    return at;
}

static size_t utf8_put(uint32_t cp, uint8_t *out)
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

static uint32_t utf8_get(const uint8_t *p, size_t n)
{
    static const uint8_t lead_mask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    uint32_t cp = p[0] & lead_mask[n];
    for (size_t i = 1; i < n; i++)
        cp = (cp << 6) | (p[i] & 0x3F);
    return cp;
}

/* Iceberg UnicodeUtil.truncateStringMax: keep 16 code points, then increment the last one that
 * can be (dropping those after it). False when none can. */
static bool string_upper(const uint8_t *p, size_t len, uint8_t *out, size_t *out_len)
{
    size_t cps, n = utf8_prefix(p, len, TRUNCATE_LEN, &cps);
    if (n == len) {
        memcpy(out, p, len);
        *out_len = len;
        return true;
    }
    size_t starts[TRUNCATE_LEN], k = 0;
    for (size_t at = 0; at < n; at += utf8_len(p[at]))
        starts[k++] = at;
    while (k > 0) {
        size_t at = starts[--k], w = (k + 1 < cps ? starts[k + 1] : n) - at;
        uint32_t cp = utf8_get(p + at, w) + 1;
        if (cp >= 0xD800 && cp <= 0xDFFF)
            cp = 0xE000;
        if (cp <= 0x10FFFF) {
            memcpy(out, p, at);
            *out_len = at + utf8_put(cp, out + at);
            return true;
        }
    }
    return false;
}

/* BinaryUtil.truncateBinaryMax: 16 bytes, then increment the last byte below 0xFF. */
static bool binary_upper(const uint8_t *p, size_t len, uint8_t *out, size_t *out_len)
{
    if (len <= TRUNCATE_LEN) {
        memcpy(out, p, len);
        *out_len = len;
        return true;
    }
    for (size_t n = TRUNCATE_LEN; n > 0; n--) {
        if (p[n - 1] != 0xFF) {
            memcpy(out, p, n);
            out[n - 1]++;
            *out_len = n;
            return true;
        }
    }
    return false;
}

static void bytes_bounds(const pq_stat *s, const firn_field *f, firn_pq_field_metrics *m)
{
    size_t cps;
    if (f->type == FIRN_TYPE_UUID) {
        memcpy(m->lower, s->bmin.data, 16);
        memcpy(m->upper, s->bmax.data, 16);
        m->lower_len = m->upper_len = 16;
        m->has_lower = m->has_upper = true;
        return;
    }
    if (f->type == FIRN_TYPE_STRING) {
        m->lower_len = utf8_prefix(s->bmin.data, s->bmin.len, TRUNCATE_LEN, &cps);
        m->has_upper = string_upper(s->bmax.data, s->bmax.len, m->upper, &m->upper_len);
    } else {
        m->lower_len = s->bmin.len < TRUNCATE_LEN ? s->bmin.len : TRUNCATE_LEN;
        m->has_upper = binary_upper(s->bmax.data, s->bmax.len, m->upper, &m->upper_len);
    }
    if (m->lower_len)
        memcpy(m->lower, s->bmin.data, m->lower_len);
    m->has_lower = true;
}

void firn__pq_bounds(const pq_stat *s, const pq_leaf *leaf, firn_pq_field_metrics *m)
{
    m->has_lower = m->has_upper = false;
    m->lower_len = m->upper_len = 0;
    if (!s->has || leaf->in_repeated)
        return;
    const firn_field *f = leaf->field;
    if (f->type == FIRN_TYPE_DECIMAL) {
        pq_i128 lo = leaf->kind == PQK_DEC128 ? s->qmin : s->imin;
        pq_i128 hi = leaf->kind == PQK_DEC128 ? s->qmax : s->imax;
        m->lower_len = decimal_bound(lo, m->lower);
        m->upper_len = decimal_bound(hi, m->upper);
        m->has_lower = m->has_upper = true;
        return;
    }
    if (leaf->kind == PQK_FLBA || leaf->kind == PQK_BYTES) {
        bytes_bounds(s, f, m);
        return;
    }
    const uint8_t *p;
    uint8_t buf[16];
    /* ints, floats, booleans: Iceberg's little-endian forms equal Parquet's PLAIN forms */
    FIRN_ASSERT(firn__pq_stat_plain(s, leaf, false, buf, sizeof(buf), &p, &m->lower_len));
    memcpy(m->lower, p, m->lower_len);
    FIRN_ASSERT(firn__pq_stat_plain(s, leaf, true, buf, sizeof(buf), &p, &m->upper_len));
    memcpy(m->upper, p, m->upper_len);
    m->has_lower = m->has_upper = true;
}
