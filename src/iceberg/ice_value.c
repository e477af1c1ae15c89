/* SPDX-License-Identifier: Apache-2.0 */
/* Primitive types and single values: Iceberg single-value binary serialization
 * (format/spec.md Appendix D), ordering, and human strings for partition paths. */
#include "ice_manifest_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

firn_ptype firn_ptype_of(const firn_field *f)
{
    firn_ptype t = {f->type, 0, 0, 0};
    if (f->type == FIRN_TYPE_DECIMAL) {
        t.precision = f->precision;
        t.scale = f->scale;
    } else if (f->type == FIRN_TYPE_FIXED) {
        t.length = f->length;
    }
    return t;
}

void firn_ptype_format(firn_ptype t, char *out, size_t out_cap)
{
    firn_field f = {0};
    f.type = t.type;
    f.precision = t.precision;
    f.scale = t.scale;
    f.length = t.length;
    firn_type_format(&f, out, out_cap);
}

bool firn__type_is_integral(firn_type t)
{
    switch (t) {
    case FIRN_TYPE_INT:
    case FIRN_TYPE_LONG:
    case FIRN_TYPE_DATE:
    case FIRN_TYPE_TIME:
    case FIRN_TYPE_TIMESTAMP:
    case FIRN_TYPE_TIMESTAMPTZ:
    case FIRN_TYPE_TIMESTAMP_NS:
    case FIRN_TYPE_TIMESTAMPTZ_NS:
        return true;
    default:
        return false;
    }
}

bool firn__type_is_primitive(firn_type t)
{
    return t >= FIRN_TYPE_BOOLEAN && t <= FIRN_TYPE_BINARY;
}

firn_value firn_value_null(firn_ptype t)
{
    firn_value v;
    memset(&v, 0, sizeof v);
    v.type = t;
    v.is_null = true;
    return v;
}

int64_t firn__floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

size_t firn__dec_min_bytes(firn__i128 x, uint8_t out[16])
{
    uint8_t be[16];
    unsigned __int128 u = (unsigned __int128)x;
    for (int i = 15; i >= 0; i--) {
        be[i] = (uint8_t)u;
        u >>= 8;
    }
    size_t start = 0;
    while (start < 15) {
        bool redundant = (be[start] == 0x00 && !(be[start + 1] & 0x80)) ||
                         (be[start] == 0xff && (be[start + 1] & 0x80));
        if (!redundant)
            break;
        start++;
    }
    memcpy(out, be + start, 16 - start);
    return 16 - start;
}

firn_rc firn_value_to_bytes(const firn_value *v, firn_buf *out, firn_err *err)
{
    if (v->is_null)
        return FIRN_OK;
    firn_rc rc = FIRN_OK;
    switch (v->type.type) {
    case FIRN_TYPE_BOOLEAN:
        rc = firn_wr_u8(out, v->b ? 1 : 0);
        break;
    case FIRN_TYPE_INT:
    case FIRN_TYPE_DATE:
        rc = firn_wr_le32(out, (uint32_t)(int32_t)v->i);
        break;
    case FIRN_TYPE_LONG:
    case FIRN_TYPE_TIME:
    case FIRN_TYPE_TIMESTAMP:
    case FIRN_TYPE_TIMESTAMPTZ:
    case FIRN_TYPE_TIMESTAMP_NS:
    case FIRN_TYPE_TIMESTAMPTZ_NS:
        rc = firn_wr_le64(out, (uint64_t)v->i);
        break;
    case FIRN_TYPE_FLOAT: {
        float f = (float)v->d;
        uint32_t bits;
        memcpy(&bits, &f, sizeof bits);
        rc = firn_wr_le32(out, bits);
        break;
    }
    case FIRN_TYPE_DOUBLE: {
        uint64_t bits;
        memcpy(&bits, &v->d, sizeof bits);
        rc = firn_wr_le64(out, bits);
        break;
    }
    case FIRN_TYPE_DECIMAL: {
        uint8_t be[16];
        size_t n = firn__dec_min_bytes(firn__dec_get(v), be);
        rc = firn_buf_append(out, be, n);
        break;
    }
    case FIRN_TYPE_STRING:
    case FIRN_TYPE_BINARY:
    case FIRN_TYPE_FIXED:
    case FIRN_TYPE_UUID:
        if (v->bytes.len > 0)
            rc = firn_buf_append(out, v->bytes.ptr, v->bytes.len);
        break;
    default:
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "cannot serialize a value of nested type %d",
                            (int)v->type.type);
    }
    if (rc)
        return firn_err_set(err, rc, "single value does not fit its buffer");
    return FIRN_OK;
}

static firn_rc bad_len(firn_ptype t, size_t len, firn_err *err)
{
    char name[48];
    firn_ptype_format(t, name, sizeof name);
    return firn_err_set(err, FIRN_ERR_PARSE, "invalid single-value length %zu for type %s", len,
                        name);
}

static uint64_t load_le(const uint8_t *p, size_t n)
{
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++)
        x |= (uint64_t)p[i] << (8 * i);
    return x;
}

static firn_rc
decode_number(firn_ptype t, const uint8_t *p, size_t len, firn_value *out, firn_err *err)
{
    switch (t.type) {
    case FIRN_TYPE_BOOLEAN:
        if (len != 1)
            return bad_len(t, len, err);
        out->b = p[0] != 0;
        return FIRN_OK;
    case FIRN_TYPE_INT:
    case FIRN_TYPE_DATE:
        if (len != 4)
            return bad_len(t, len, err);
        out->i = (int32_t)(uint32_t)load_le(p, 4);
        return FIRN_OK;
    case FIRN_TYPE_FLOAT:
    case FIRN_TYPE_DOUBLE:
        if (len == 4) {
            uint32_t bits = (uint32_t)load_le(p, 4);
            float f;
            memcpy(&f, &bits, sizeof f);
            out->d = f;
        } else if (len == 8 && t.type == FIRN_TYPE_DOUBLE) {
            uint64_t bits = load_le(p, 8);
            memcpy(&out->d, &bits, sizeof out->d);
        } else {
            return bad_len(t, len, err);
        }
        return FIRN_OK;
    default: /* long and the 8-byte temporal types; a 4-byte int/date promoted to them */
        if (len == 4)
            out->i = (int32_t)(uint32_t)load_le(p, 4);
        else if (len == 8)
            out->i = (int64_t)load_le(p, 8);
        else
            return bad_len(t, len, err);
        return FIRN_OK;
    }
}

firn_rc
firn_value_from_bytes(firn_ptype t, const void *data, size_t len, firn_value *out, firn_err *err)
{
    const uint8_t *p = data;
    memset(out, 0, sizeof *out);
    out->type = t;
    switch (t.type) {
    case FIRN_TYPE_DECIMAL: {
        if (len == 0 || len > 16)
            return bad_len(t, len, err);
        unsigned __int128 u = (p[0] & 0x80) ? ~(unsigned __int128)0 : 0;
        for (size_t i = 0; i < len; i++)
            u = (u << 8) | p[i];
        firn__dec_set(out, (firn__i128)u);
        return FIRN_OK;
    }
    case FIRN_TYPE_UUID:
        if (len != 16)
            return bad_len(t, len, err);
        out->bytes = (firn_slice){p, len};
        return FIRN_OK;
    case FIRN_TYPE_FIXED:
        if (t.length > 0 && len != (size_t)t.length)
            return bad_len(t, len, err);
        out->bytes = (firn_slice){p, len};
        return FIRN_OK;
    case FIRN_TYPE_STRING:
    case FIRN_TYPE_BINARY:
        out->bytes = (firn_slice){len ? p : (const uint8_t *)"", len};
        return FIRN_OK;
    default:
        if (!firn__type_is_primitive(t.type))
            return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "no single-value form for nested types");
        return decode_number(t, p, len, out, err);
    }
}

static int cmp_double(double a, double b)
{
    bool na = isnan(a), nb = isnan(b);
    if (na || nb)
        return na == nb ? 0 : (na ? 1 : -1);
    if (a < b)
        return -1;
    if (a > b)
        return 1;
    return (int)(signbit(b) != 0) - (int)(signbit(a) != 0);
}

int firn_value_compare(const firn_value *a, const firn_value *b)
{
    switch (a->type.type) {
    case FIRN_TYPE_BOOLEAN:
        return (int)a->b - (int)b->b;
    case FIRN_TYPE_FLOAT:
    case FIRN_TYPE_DOUBLE:
        return cmp_double(a->d, b->d);
    case FIRN_TYPE_DECIMAL: {
        firn__i128 x = firn__dec_get(a), y = firn__dec_get(b);
        return x < y ? -1 : (x > y ? 1 : 0);
    }
    case FIRN_TYPE_STRING:
    case FIRN_TYPE_BINARY:
    case FIRN_TYPE_FIXED:
    case FIRN_TYPE_UUID: {
        size_t n = a->bytes.len < b->bytes.len ? a->bytes.len : b->bytes.len;
        int c = n ? memcmp(a->bytes.ptr, b->bytes.ptr, n) : 0;
        if (c)
            return c < 0 ? -1 : 1;
        return a->bytes.len < b->bytes.len ? -1 : (a->bytes.len > b->bytes.len ? 1 : 0);
    }
    default:
        return a->i < b->i ? -1 : (a->i > b->i ? 1 : 0);
    }
}

void firn__civil_from_days(int64_t days, int64_t *y, int *m, int *d)
{
    /* Howard Hinnant's days_from_civil inverse. */
    int64_t z = days + 719468;
    int64_t era = firn__floor_div(z, 146097);
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static firn_rc human_decimal(const firn_value *v, firn_buf *out)
{
    firn__i128 x = firn__dec_get(v);
    bool neg = x < 0;
    unsigned __int128 u = neg ? -(unsigned __int128)x : (unsigned __int128)x;
    char digits[48];
    size_t n = 0;
    do {
        digits[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u > 0);
    while ((int32_t)n <= v->type.scale)
        digits[n++] = '0';
    if (neg)
        FIRN_TRY(firn_wr_u8(out, '-'));
    for (size_t i = n; i-- > 0;) {
        FIRN_TRY(firn_wr_u8(out, (uint8_t)digits[i]));
        if (i == (size_t)v->type.scale && i > 0)
            FIRN_TRY(firn_wr_u8(out, '.'));
    }
    return FIRN_OK;
}

static firn_rc human_timestamp(int64_t us, bool tz, firn_buf *out)
{
    int64_t days = firn__floor_div(us, 86400000000LL);
    int64_t rest = us - days * 86400000000LL;
    int64_t y;
    int m, d;
    firn__civil_from_days(days, &y, &m, &d);
    int64_t secs = rest / 1000000;
    FIRN_TRY(firn_buf_appendf(out, "%04lld-%02d-%02dT%02lld:%02lld:%02lld", (long long)y, m, d,
                              (long long)(secs / 3600), (long long)(secs / 60 % 60),
                              (long long)(secs % 60)));
    if (rest % 1000000)
        FIRN_TRY(firn_buf_appendf(out, ".%06lld", (long long)(rest % 1000000)));
    return tz ? firn_buf_append_cstr(out, "+00:00") : FIRN_OK;
}

static firn_rc human_bytes(const firn_value *v, firn_buf *out)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const uint8_t *p = v->bytes.ptr;
    size_t n = v->bytes.len;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t x = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            x |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            x |= p[i + 2];
        char q[4] = {b64[(x >> 18) & 63], b64[(x >> 12) & 63], i + 1 < n ? b64[(x >> 6) & 63] : '=',
                     i + 2 < n ? b64[x & 63] : '='};
        FIRN_TRY(firn_buf_append(out, q, 4));
    }
    return FIRN_OK;
}

static firn_rc human_primitive(const firn_value *v, firn_buf *out)
{
    int64_t y;
    int m, d;
    switch (v->type.type) {
    case FIRN_TYPE_BOOLEAN:
        return firn_buf_append_cstr(out, v->b ? "true" : "false");
    case FIRN_TYPE_DATE:
        firn__civil_from_days(v->i, &y, &m, &d);
        return firn_buf_appendf(out, "%04lld-%02d-%02d", (long long)y, m, d);
    case FIRN_TYPE_TIME:
        return firn_buf_appendf(out, "%02lld:%02lld:%02lld.%06lld",
                                (long long)(v->i / 3600000000LL), (long long)(v->i / 60000000 % 60),
                                (long long)(v->i / 1000000 % 60), (long long)(v->i % 1000000));
    case FIRN_TYPE_TIMESTAMP:
    case FIRN_TYPE_TIMESTAMPTZ:
        return human_timestamp(v->i, v->type.type == FIRN_TYPE_TIMESTAMPTZ, out);
    case FIRN_TYPE_TIMESTAMP_NS:
    case FIRN_TYPE_TIMESTAMPTZ_NS:
        return human_timestamp(firn__floor_div(v->i, 1000),
                               v->type.type == FIRN_TYPE_TIMESTAMPTZ_NS, out);
    case FIRN_TYPE_FLOAT:
    case FIRN_TYPE_DOUBLE:
        return firn_buf_appendf(out, "%.17g", v->d);
    case FIRN_TYPE_DECIMAL:
        return human_decimal(v, out);
    case FIRN_TYPE_STRING:
        return firn_buf_append(out, v->bytes.ptr, v->bytes.len);
    case FIRN_TYPE_UUID: {
        char s[37];
        firn_uuid_format(v->bytes.ptr, s);
        return firn_buf_append_cstr(out, s);
    }
    case FIRN_TYPE_BINARY:
    case FIRN_TYPE_FIXED:
        return human_bytes(v, out);
    default:
        return firn_buf_appendf(out, "%lld", (long long)v->i);
    }
}

firn_rc firn__value_human(const firn_value *v, firn_transform t, firn_buf *out)
{
    if (v->is_null)
        return firn_buf_append_cstr(out, "null");
    int64_t y;
    int m, d;
    switch (t.kind) {
    case FIRN_TRANSFORM_YEAR:
        return firn_buf_appendf(out, "%04lld", (long long)(1970 + v->i));
    case FIRN_TRANSFORM_MONTH: {
        int64_t months = v->i;
        int64_t yy = 1970 + firn__floor_div(months, 12);
        return firn_buf_appendf(out, "%04lld-%02lld", (long long)yy,
                                (long long)(months - firn__floor_div(months, 12) * 12 + 1));
    }
    case FIRN_TRANSFORM_HOUR: {
        int64_t days = firn__floor_div(v->i, 24);
        firn__civil_from_days(days, &y, &m, &d);
        return firn_buf_appendf(out, "%04lld-%02d-%02d-%02lld", (long long)y, m, d,
                                (long long)(v->i - days * 24));
    }
    default:
        return human_primitive(v, out);
    }
}
