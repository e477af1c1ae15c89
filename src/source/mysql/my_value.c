/* SPDX-License-Identifier: Apache-2.0 */
/* Decoders of MySQL/MariaDB text-protocol values (a utf8mb4, time_zone '+00:00' session) into
 * batch columns, one per kind of docs/type-mapping.md "MySQL and MariaDB". Scalars decode
 * without heap allocation. */
#include "my_int.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned __int128 u128;

#define NUM_TEXT_MAX 96 /* longest numeric text: DECIMAL(65,30) "-" + 65 digits + "." */
#define US_PER_S     INT64_C(1000000)
#define US_PER_DAY   (INT64_C(86400) * US_PER_S)

static firn_rc bad(const firn_my_type *t, firn_err *err)
{
    return firn_err_set(err, FIRN_ERR_PARSE, "malformed %s value",
                        t->column_type ? t->column_type : firn_my_kind_name(t->kind));
}

/* Copies a numeric value into buf as a NUL-terminated string; false when it is too long. */
static bool num_text(const uint8_t *p, size_t len, char *buf, size_t cap)
{
    if (len == 0 || len >= cap)
        return false;
    memcpy(buf, p, len);
    buf[len] = '\0';
    return true;
}

/* Days from 1970-01-01 to y-m-d of the proleptic Gregorian calendar (Howard Hinnant's
 * days_from_civil), valid for every year MySQL stores (0..9999). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const int64_t yoe = y - era * 400;
    const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* Reads exactly n digits at *p (advancing it) into *out; false when one is not a digit. */
static bool digits(const uint8_t **p, const uint8_t *end, int n, int64_t *out)
{
    int64_t v = 0;
    for (int i = 0; i < n; i++) {
        if (*p >= end || (**p < '0' || **p > '9'))
            return false;
        v = v * 10 + (**p - '0');
        (*p)++;
    }
    *out = v;
    return true;
}

/* Reads 1..max_n digits at *p. */
static bool digits_var(const uint8_t **p, const uint8_t *end, int max_n, int64_t *out)
{
    int64_t v = 0;
    int n = 0;
    while (*p < end && **p >= '0' && **p <= '9' && n < max_n) {
        v = v * 10 + (**p - '0');
        (*p)++;
        n++;
    }
    *out = v;
    return n > 0;
}

static bool expect(const uint8_t **p, const uint8_t *end, char c)
{
    if (*p >= end || **p != (uint8_t)c)
        return false;
    (*p)++;
    return true;
}

/* ".ffffff" (1..6 digits) -> microseconds; nothing -> 0. */
static bool fraction_us(const uint8_t **p, const uint8_t *end, int64_t *out)
{
    *out = 0;
    if (*p >= end || **p != '.')
        return true;
    (*p)++;
    int n = 0;
    int64_t v = 0;
    while (*p < end && **p >= '0' && **p <= '9') {
        if (n == 6)
            return false;
        v = v * 10 + (**p - '0');
        (*p)++;
        n++;
    }
    if (n == 0)
        return false;
    for (; n < 6; n++)
        v *= 10;
    *out = v;
    return true;
}

typedef struct civil {
    int64_t y, m, d;
} civil;

static bool parse_date(const uint8_t **p, const uint8_t *end, civil *c)
{
    return digits(p, end, 4, &c->y) && expect(p, end, '-') && digits(p, end, 2, &c->m) &&
           expect(p, end, '-') && digits(p, end, 2, &c->d);
}

static bool valid_date(const civil *c)
{
    static const int8_t mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (c->m < 1 || c->m > 12 || c->d < 1 || c->d > mdays[c->m - 1])
        return false;
    const bool leap = (c->y % 4 == 0 && c->y % 100 != 0) || c->y % 400 == 0;
    return c->m != 2 || c->d <= 28 || leap;
}

/* Zero, partial-zero and (ALLOW_INVALID_DATES) impossible dates such as 2023-02-31: no
 * calendar day, stored as null and counted. A month or day out of any range is malformed. */
static bool null_date(const civil *c)
{
    return c->m <= 12 && c->d <= 31 && !valid_date(c);
}

static firn_rc decode_date(const firn_my_type *t,
                           const uint8_t *p,
                           size_t len,
                           firn_column *col,
                           firn_my_decode_stats *stats,
                           firn_err *err)
{
    const uint8_t *end = p + len;
    civil c;
    if (!parse_date(&p, end, &c) || p != end)
        return bad(t, err);
    if (null_date(&c)) { /* documented null */
        if (stats)
            stats->zero_dates++;
        firn_column_append_null(col);
        return FIRN_OK;
    }
    if (!valid_date(&c))
        return bad(t, err);
    firn_column_append_i32(col, (int32_t)days_from_civil(c.y, c.m, c.d));
    return FIRN_OK;
}

static firn_rc decode_datetime(const firn_my_type *t,
                               const uint8_t *p,
                               size_t len,
                               firn_column *col,
                               firn_my_decode_stats *stats,
                               firn_err *err)
{
    const uint8_t *end = p + len;
    civil c;
    int64_t hh, mi, ss, us;
    if (!parse_date(&p, end, &c) || !expect(&p, end, ' ') || !digits(&p, end, 2, &hh) ||
        !expect(&p, end, ':') || !digits(&p, end, 2, &mi) || !expect(&p, end, ':') ||
        !digits(&p, end, 2, &ss) || !fraction_us(&p, end, &us) || p != end)
        return bad(t, err);
    if (null_date(&c) && hh <= 23 && mi <= 59 && ss <= 59) {
        if (stats)
            stats->zero_dates++;
        firn_column_append_null(col);
        return FIRN_OK;
    }
    if (!valid_date(&c) || hh > 23 || mi > 59 || ss > 59)
        return bad(t, err);
    const int64_t days = days_from_civil(c.y, c.m, c.d);
    firn_column_append_i64(col, days * US_PER_DAY + ((hh * 60 + mi) * 60 + ss) * US_PER_S + us);
    return FIRN_OK;
}

/* "[-]H..H:MM:SS[.ffffff]": signed microseconds; MySQL's range is +-838:59:59.999999. */
static firn_rc
decode_time(const firn_my_type *t, const uint8_t *p, size_t len, firn_column *col, firn_err *err)
{
    const uint8_t *end = p + len;
    const bool neg = p < end && *p == '-';
    if (neg)
        p++;
    int64_t hh, mi, ss, us;
    if (!digits_var(&p, end, 4, &hh) || !expect(&p, end, ':') || !digits(&p, end, 2, &mi) ||
        !expect(&p, end, ':') || !digits(&p, end, 2, &ss) || !fraction_us(&p, end, &us) ||
        p != end || mi > 59 || ss > 59)
        return bad(t, err);
    const int64_t v = ((hh * 60 + mi) * 60 + ss) * US_PER_S + us;
    firn_column_append_i64(col, neg ? -v : v);
    return FIRN_OK;
}

/* DECIMAL text "[-]digits[.digits]" -> unscaled value at scale t->scale. */
static firn_rc decode_decimal(
    const firn_my_type *t, const uint8_t *p, size_t len, bool wide, firn_column *col, firn_err *err)
{
    const uint8_t *end = p + len;
    const bool neg = p < end && *p == '-';
    if (neg)
        p++;
    u128 mag = 0;
    int ndigits = 0, frac = -1;
    bool saw_digit = false;
    for (; p < end; p++) {
        if (*p == '.' && frac < 0) {
            frac = 0;
            continue;
        }
        if (*p < '0' || *p > '9')
            return bad(t, err);
        if (frac >= 0 && ++frac > t->scale)
            return bad(t, err);
        saw_digit = true;
        mag = mag * 10 + (unsigned)(*p - '0');
        if (mag != 0 && ++ndigits > 38)
            return bad(t, err);
    }
    if (frac == 0 || !saw_digit)
        return bad(t, err);
    for (int f = frac < 0 ? 0 : frac; f < t->scale; f++)
        mag *= 10;
    const __int128 s = neg ? -(__int128)mag : (__int128)mag;
    if (wide)
        firn_column_append_i128(col, (int64_t)(s >> 64), (uint64_t)s);
    else
        firn_column_append_i64(col, (int64_t)s);
    return FIRN_OK;
}

static bool decimal_wide(const firn_my_type *t)
{
    if (t->kind == FIRN_MY_KIND_ULONG || t->kind == FIRN_MY_KIND_UBITS)
        return true;
    return t->precision > 18;
}

static firn_rc decode_int(
    const firn_my_type *t, const uint8_t *p, size_t len, bool wide, firn_column *col, firn_err *err)
{
    char buf[NUM_TEXT_MAX];
    int64_t v;
    firn_err ignored = {0};
    if (!num_text(p, len, buf, sizeof(buf)) || firn_parse_i64(buf, len, &v, &ignored))
        return bad(t, err);
    if (!wide) {
        if (v < INT32_MIN || v > INT32_MAX)
            return bad(t, err);
        firn_column_append_i32(col, (int32_t)v);
    } else {
        firn_column_append_i64(col, v);
    }
    return FIRN_OK;
}

static firn_rc
decode_ulong(const firn_my_type *t, const uint8_t *p, size_t len, firn_column *col, firn_err *err)
{
    char buf[NUM_TEXT_MAX];
    uint64_t v;
    firn_err ignored = {0};
    if (!num_text(p, len, buf, sizeof(buf)) || firn_parse_u64(buf, len, &v, &ignored))
        return bad(t, err);
    firn_column_append_i128(col, 0, v);
    return FIRN_OK;
}

static firn_rc decode_real(const firn_my_type *t,
                           const uint8_t *p,
                           size_t len,
                           bool single,
                           firn_column *col,
                           firn_err *err)
{
    char buf[NUM_TEXT_MAX];
    if (!num_text(p, len, buf, sizeof(buf)))
        return bad(t, err);
    char *endp = NULL;
    errno = 0;
    double d = strtod(buf, &endp);
    if (endp != buf + len || (errno == ERANGE && isinf(d)))
        return bad(t, err);
    if (single) {
        /* FLOAT is selected as CAST(col AS DOUBLE) (firn_my_select_list): the server prints a
         * FLOAT with 6 digits, its double exactly; the float of that double is the value. */
        if (isfinite(d) && fabs(d) > FLT_MAX)
            return bad(t, err);
        firn_column_append_float(col, (float)d);
    } else {
        firn_column_append_double(col, d);
    }
    return FIRN_OK;
}

/* BIT(n): big-endian bytes, (n + 7) / 8 of them. */
static firn_rc
decode_bits(const firn_my_type *t, const uint8_t *p, size_t len, firn_column *col, firn_err *err)
{
    if (len == 0 || len > 8)
        return bad(t, err);
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++)
        v = (v << 8) | p[i];
    if (t->kind == FIRN_MY_KIND_BOOL)
        firn_column_append_bool(col, v != 0);
    else if (t->kind == FIRN_MY_KIND_UBITS)
        firn_column_append_i128(col, 0, v);
    else
        firn_column_append_i64(col, (int64_t)v);
    return FIRN_OK;
}

static firn_rc
decode_fixed(const firn_my_type *t, const uint8_t *p, size_t len, firn_column *col, firn_err *err)
{
    const size_t n = (size_t)t->precision;
    if (len > n)
        return bad(t, err);
    if (len == n) {
        firn_column_append_bytes(col, p, len);
        return FIRN_OK;
    }
    /* BINARY(n) pads with zero bytes; a value given shorter (a binlog image trims them) is
     * padded back so both give the same bytes. */
    uint8_t stack[256];
    uint8_t *buf = n <= sizeof(stack) ? stack : firn_malloc(n);
    memcpy(buf, p, len);
    memset(buf + len, 0, n - len);
    firn_column_append_bytes(col, buf, n);
    if (buf != stack)
        firn_free(buf);
    return FIRN_OK;
}

static firn_rc
decode_year(const firn_my_type *t, const uint8_t *p, size_t len, firn_column *col, firn_err *err)
{
    const uint8_t *end = p + len;
    int64_t y;
    if (!digits_var(&p, end, 4, &y) || p != end || (y != 0 && (y < 1901 || y > 2155)))
        return bad(t, err);
    firn_column_append_i32(col, (int32_t)y);
    return FIRN_OK;
}

firn_rc firn_my_value_decode(const firn_my_type *t,
                             const uint8_t *p,
                             size_t len,
                             firn_column *col,
                             firn_my_decode_stats *stats,
                             firn_err *err)
{
    switch (t->kind) {
    case FIRN_MY_KIND_INT:
        return decode_int(t, p, len, false, col, err);
    case FIRN_MY_KIND_LONG:
        return decode_int(t, p, len, true, col, err);
    case FIRN_MY_KIND_ULONG:
        return decode_ulong(t, p, len, col, err);
    case FIRN_MY_KIND_DECIMAL:
        return decode_decimal(t, p, len, decimal_wide(t), col, err);
    case FIRN_MY_KIND_FLOAT:
        return decode_real(t, p, len, true, col, err);
    case FIRN_MY_KIND_DOUBLE:
        return decode_real(t, p, len, false, col, err);
    case FIRN_MY_KIND_DATE:
        return decode_date(t, p, len, col, stats, err);
    case FIRN_MY_KIND_DATETIME:
    case FIRN_MY_KIND_TIMESTAMP:
        return decode_datetime(t, p, len, col, stats, err);
    case FIRN_MY_KIND_TIME:
        return decode_time(t, p, len, col, err);
    case FIRN_MY_KIND_YEAR:
        return decode_year(t, p, len, col, err);
    case FIRN_MY_KIND_FIXED:
        return decode_fixed(t, p, len, col, err);
    case FIRN_MY_KIND_BOOL:
    case FIRN_MY_KIND_BITS:
    case FIRN_MY_KIND_UBITS:
        return decode_bits(t, p, len, col, err);
    case FIRN_MY_KIND_GEOMETRY:
        /* The server's form: a 4-byte little-endian SRID, then OGC WKB. */
        if (len < 4 + 5)
            return bad(t, err);
        firn_column_append_bytes(col, p + 4, len - 4);
        return FIRN_OK;
    case FIRN_MY_KIND_DECTEXT:
    case FIRN_MY_KIND_STRING:
    case FIRN_MY_KIND_BINARY:
        firn_column_append_bytes(col, p, len);
        return FIRN_OK;
    }
    return bad(t, err);
}
