/* SPDX-License-Identifier: Apache-2.0 */
/* Per-type decoders from PostgreSQL's text output formats (src/backend/utils/adt/ *out) into
 * the same column values the binary decoders of pg_value.c produce (docs/type-mapping.md, "Text
 * values"). The formats parsed are those of the session settings every firn connection fixes:
 * DateStyle ISO, TimeZone UTC, IntervalStyle iso_8601 (replication) or postgres (SQL),
 * extra_float_digits 3, bytea_output hex, client_encoding UTF8. */
#include "pg_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NUM_TEXT_MAX    64   /* longest float text accepted (shortest round-trip is ~25) */
#define BYTEA_STACK     4096 /* bytea values up to this many bytes decode without allocation */
#define ELEM_STACK      256  /* escaped array elements up to this size unescape on the stack */
#define USECS_PER_SEC   INT64_C(1000000)
#define USECS_PER_DAY   INT64_C(86400000000)
#define UNIX_EPOCH_JDAY 2440588 /* date2j(1970, 1, 1) */

typedef unsigned __int128 u128;

static firn_rc bad_text(const firn_pg_type *t, size_t len, firn_err *err, const char *why)
{
    return firn_err_set(err, FIRN_ERR_PARSE, "invalid text value of type \"%s\" (%zu bytes): %s",
                        t->name ? t->name : firn_pg_kind_name(t->kind), len, why);
}

static bool eq_text(const uint8_t *p, size_t len, const char *lit)
{
    return strlen(lit) == len && memcmp(p, lit, len) == 0;
}

static bool is_digit(uint8_t c)
{
    return c >= '0' && c <= '9';
}

static int hex_value(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* ------------------------------------------------------------------------------------------------
 * Numbers
 * ----------------------------------------------------------------------------------------------*/

static firn_rc
decode_int(const firn_pg_type *t, const uint8_t *p, size_t len, firn_column *col, firn_err *err)
{
    if (t->kind == FIRN_PG_KIND_OID) {
        uint64_t u = 0;
        if (firn_parse_u64((const char *)p, len, &u, NULL) || u > UINT32_MAX)
            return bad_text(t, len, err, "not an oid");
        firn_column_append_i64(col, (int64_t)u);
        return FIRN_OK;
    }
    int64_t v = 0;
    if (firn_parse_i64((const char *)p, len, &v, NULL))
        return bad_text(t, len, err, "not an integer");
    if (t->kind == FIRN_PG_KIND_INT8) {
        firn_column_append_i64(col, v);
        return FIRN_OK;
    }
    int64_t lim = t->kind == FIRN_PG_KIND_INT2 ? INT16_MAX : INT32_MAX;
    if (v > lim || v < -lim - 1)
        return bad_text(t, len, err, "integer out of range");
    firn_column_append_i32(col, (int32_t)v);
    return FIRN_OK;
}

/* float4out/float8out with extra_float_digits > 0 print the shortest text that reads back to the
 * same value, so strtof/strtod (correctly rounded) restore the exact bits. */
static firn_rc
decode_float(const firn_pg_type *t, const uint8_t *p, size_t len, firn_column *col, firn_err *err)
{
    char buf[NUM_TEXT_MAX];
    if (len == 0 || len >= sizeof(buf) ||
        !(is_digit(p[0]) || p[0] == '-' || p[0] == 'N' || p[0] == 'I' || p[0] == '.'))
        return bad_text(t, len, err, "not a floating-point number");
    memcpy(buf, p, len);
    buf[len] = '\0';
    char *end = NULL;
    errno = 0;
    if (t->kind == FIRN_PG_KIND_FLOAT4) {
        float f = strtof(buf, &end);
        if (end != buf + len || (errno == ERANGE && isinf(f)))
            return bad_text(t, len, err, "not a floating-point number");
        firn_column_append_float(col, f);
        return FIRN_OK;
    }
    double d = strtod(buf, &end);
    if (end != buf + len || (errno == ERANGE && isinf(d)))
        return bad_text(t, len, err, "not a floating-point number");
    firn_column_append_double(col, d);
    return FIRN_OK;
}

/* Unscaled value being built: digits after the leading zeros are counted, so a value of more
 * than precision digits is caught without 128-bit divisions (and before it could overflow). */
typedef struct dec_acc {
    u128 v;
    int32_t sig;
} dec_acc;

static void push_digit(dec_acc *a, unsigned d)
{
    if (a->sig == 0 && d == 0)
        return;
    if (++a->sig <= 38)
        a->v = a->v * 10 + d;
}

/* Exact unscaled value of numeric_out text "[-]digits[.digits]" at the column's scale: fewer
 * fractional digits are padded, more are accepted only when they are zeros (as the binary
 * decoder does), and the result must have at most precision digits. */
static firn_rc numeric_unscaled(
    const firn_pg_type *t, const uint8_t *p, size_t len, u128 *out, bool *neg, firn_err *err)
{
    size_t i = 0;
    *neg = len > 0 && p[0] == '-';
    i += *neg;
    dec_acc acc = {0, 0};
    size_t int_digits = 0, frac = 0;
    for (; i < len && is_digit(p[i]); i++, int_digits++)
        push_digit(&acc, (unsigned)(p[i] - '0'));
    if (i < len && p[i] == '.') {
        for (i++; i < len && is_digit(p[i]); i++, frac++) {
            if ((int32_t)frac < t->scale)
                push_digit(&acc, (unsigned)(p[i] - '0'));
            else if (p[i] != '0')
                return bad_text(t, len, err, "more fractional digits than the column scale");
        }
        if (frac == 0)
            return bad_text(t, len, err, "not a numeric");
    }
    if (i != len || int_digits == 0)
        return bad_text(t, len, err, "not a numeric");
    for (int32_t k = (int32_t)frac; k < t->scale; k++)
        push_digit(&acc, 0);
    if (acc.sig > t->precision)
        return bad_text(t, len, err, "value exceeds the column precision");
    *out = acc.v;
    return FIRN_OK;
}

static firn_rc decode_decimal(const firn_pg_type *t,
                              const uint8_t *p,
                              size_t len,
                              firn_column *col,
                              firn_pg_decode_stats *stats,
                              firn_err *err)
{
    if (eq_text(p, len, "NaN") || eq_text(p, len, "Infinity") || eq_text(p, len, "-Infinity")) {
        /* As the binary decoder: no decimal for NaN and the infinities, documented. */
        if (stats)
            stats->nan_to_null++;
        firn_column_append_null(col);
        return FIRN_OK;
    }
    u128 mag = 0;
    bool neg = false;
    FIRN_TRY(numeric_unscaled(t, p, len, &mag, &neg, err));
    __int128 s = neg ? -(__int128)mag : (__int128)mag;
    if (t->precision <= 18)
        firn_column_append_i64(col, (int64_t)s);
    else
        firn_column_append_i128(col, (int64_t)(s >> 64), (uint64_t)s);
    return FIRN_OK;
}

/* cash_out prints every digit of the int64 amount (in units of the smallest currency digit) with
 * a locale's currency symbol, separators and sign around them: "$1,234.56", "-$0.05",
 * "($1.00)", "1.234,56 EUR". The digits read in order are the amount whatever lc_monetary's
 * fraction digits; a '-' or '(' marks it negative. Currency symbols with digits are not
 * supported (none exist in glibc locales); the replication connection fixes lc_monetary=C. */
static firn_rc
decode_money(const firn_pg_type *t, const uint8_t *p, size_t len, firn_column *col, firn_err *err)
{
    uint64_t mag = 0;
    bool neg = false;
    size_t digits = 0;
    for (size_t i = 0; i < len; i++) {
        if (is_digit(p[i])) {
            uint64_t d = (uint64_t)(p[i] - '0');
            if (mag > (UINT64_MAX - d) / 10)
                return bad_text(t, len, err, "money out of range");
            mag = mag * 10 + d;
            digits++;
        } else if (p[i] == '-' || p[i] == '(') {
            neg = true;
        }
    }
    if (digits == 0)
        return bad_text(t, len, err, "no digits in money");
    if (mag > (uint64_t)INT64_MAX + (neg ? 1 : 0))
        return bad_text(t, len, err, "money out of range");
    int64_t cents = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    firn_column_append_i128(col, cents < 0 ? -1 : 0, (uint64_t)cents);
    return FIRN_OK;
}

/* ------------------------------------------------------------------------------------------------
 * bytea and uuid
 * ----------------------------------------------------------------------------------------------*/

static firn_rc
decode_bytea(const firn_pg_type *t, const uint8_t *p, size_t len, firn_column *col, firn_err *err)
{
    if (len < 2 || p[0] != '\\' || p[1] != 'x' || len % 2 != 0)
        return bad_text(t, len, err, "not hex bytea (\\x...)");
    size_t n = (len - 2) / 2;
    uint8_t stack[BYTEA_STACK];
    uint8_t *buf = n <= sizeof(stack) ? stack : firn_malloc(n);
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; i < n; i++) {
        int hi = hex_value(p[2 + 2 * i]), lo = hex_value(p[3 + 2 * i]);
        if (hi < 0 || lo < 0) {
            rc = bad_text(t, len, err, "bad hex digit in bytea");
            goto out;
        }
        buf[i] = (uint8_t)(hi << 4 | lo);
    }
    firn_column_append_bytes(col, buf, n);
out:
    if (buf != stack)
        firn_free(buf);
    return rc;
}

static firn_rc
decode_uuid(const firn_pg_type *t, const uint8_t *p, size_t len, firn_column *col, firn_err *err)
{
    uint8_t out[16];
    if (len != 36)
        return bad_text(t, len, err, "wrong length");
    size_t o = 0;
    for (size_t i = 0; i < 36;) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (p[i] != '-')
                return bad_text(t, len, err, "bad uuid");
            i++;
            continue;
        }
        int hi = hex_value(p[i]), lo = hex_value(p[i + 1]);
        if (hi < 0 || lo < 0)
            return bad_text(t, len, err, "bad uuid");
        out[o++] = (uint8_t)(hi << 4 | lo);
        i += 2;
    }
    firn_column_append_bytes(col, out, 16);
    return FIRN_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Dates and times (DateStyle ISO, TimeZone UTC)
 * ----------------------------------------------------------------------------------------------*/

typedef struct cur {
    const uint8_t *p;
    const uint8_t *end;
} cur;

/* Reads min..max decimal digits as an unsigned number. */
static bool cur_uint(cur *c, int min, int max, int64_t *out)
{
    int n = 0;
    int64_t v = 0;
    while (c->p < c->end && n < max && is_digit(*c->p)) {
        v = v * 10 + (*c->p++ - '0');
        n++;
    }
    *out = v;
    return n >= min;
}

static bool cur_char(cur *c, uint8_t ch)
{
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

static bool cur_lit(cur *c, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0)
        return false;
    c->p += n;
    return true;
}

/* ".ffffff" (1 to 6 digits) as microseconds; nothing when absent. */
static bool cur_fraction(cur *c, int64_t *us)
{
    *us = 0;
    if (!cur_char(c, '.'))
        return true;
    int n = 0;
    while (c->p < c->end && is_digit(*c->p)) {
        if (n == 6)
            return false;
        *us = *us * 10 + (*c->p++ - '0');
        n++;
    }
    for (int k = n; k < 6; k++)
        *us *= 10;
    return n > 0;
}

/* PostgreSQL's date2j (src/backend/utils/adt/datetime.c) with astronomical years (1 BC = 0),
 * minus the Unix epoch: days since 1970-01-01. */
static int64_t days_from_civil(int64_t year, int64_t month, int64_t day)
{
    if (month > 2) {
        month += 1;
        year += 4800;
    } else {
        month += 13;
        year += 4799;
    }
    int64_t century = year / 100;
    int64_t julian = year * 365 - 32167;
    julian += year / 4 - century + century / 4;
    julian += 7834 * month / 256 + day;
    return julian - UNIX_EPOCH_JDAY;
}

/* "YYYY-MM-DD" (year of 4 or more digits); the era is applied by the caller. */
static bool cur_date(cur *c, int64_t *year, int64_t *month, int64_t *day)
{
    return cur_uint(c, 4, 9, year) && cur_char(c, '-') && cur_uint(c, 2, 2, month) &&
           cur_char(c, '-') && cur_uint(c, 2, 2, day) && *month >= 1 && *month <= 12 && *day >= 1 &&
           *day <= 31 && *year >= 1;
}

/* "HH:MM:SS[.ffffff]" as microseconds; 24:00:00 is allowed (time_out prints it). */
static bool cur_time(cur *c, int64_t *us)
{
    int64_t h = 0, m = 0, s = 0, f = 0;
    if (!cur_uint(c, 2, 2, &h) || !cur_char(c, ':') || !cur_uint(c, 2, 2, &m) ||
        !cur_char(c, ':') || !cur_uint(c, 2, 2, &s) || !cur_fraction(c, &f))
        return false;
    if (h > 24 || m > 59 || s > 59 || (h == 24 && (m || s || f)))
        return false;
    *us = ((h * 60 + m) * 60 + s) * USECS_PER_SEC + f;
    return true;
}

/* Era suffix " BC": converts the year to astronomical numbering (1 BC = 0). */
static void cur_era(cur *c, int64_t *year)
{
    if (cur_lit(c, " BC"))
        *year = 1 - *year;
}

static firn_rc
decode_date(const firn_pg_type *t, const uint8_t *p, size_t len, firn_column *col, firn_err *err)
{
    if (eq_text(p, len, "infinity") || eq_text(p, len, "-infinity")) {
        firn_column_append_i32(col, p[0] == '-' ? -INT32_MAX : INT32_MAX);
        return FIRN_OK;
    }
    cur c = {p, p + len};
    int64_t y, m, d;
    if (!cur_date(&c, &y, &m, &d))
        return bad_text(t, len, err, "not an ISO date");
    cur_era(&c, &y);
    if (c.p != c.end)
        return bad_text(t, len, err, "trailing text after the date");
    int64_t days = days_from_civil(y, m, d);
    /* The binary decoder's range: PostgreSQL's day numbers that are not its infinities. */
    int64_t pg_days = days - FIRN_PG_EPOCH_DAYS;
    if (pg_days >= INT32_MAX || pg_days <= INT32_MIN || days >= INT32_MAX || days <= -INT32_MAX)
        return bad_text(t, len, err, "date out of range");
    firn_column_append_i32(col, (int32_t)days);
    return FIRN_OK;
}

static firn_rc
decode_time(const firn_pg_type *t, const uint8_t *p, size_t len, firn_column *col, firn_err *err)
{
    cur c = {p, p + len};
    int64_t us = 0;
    if (!cur_time(&c, &us) || c.p != c.end)
        return bad_text(t, len, err, "not a time");
    firn_column_append_i64(col, us);
    return FIRN_OK;
}

/* "+HH[:MM[:SS]]" or "-..." as seconds east of UTC (always "+00" under TimeZone UTC). */
static bool cur_offset(cur *c, int64_t *secs)
{
    bool neg = c->p < c->end && *c->p == '-';
    if (!cur_char(c, '+') && !cur_char(c, '-'))
        return false;
    int64_t h = 0, m = 0, s = 0;
    if (!cur_uint(c, 2, 2, &h))
        return false;
    if (cur_char(c, ':') && !cur_uint(c, 2, 2, &m))
        return false;
    if (cur_char(c, ':') && !cur_uint(c, 2, 2, &s))
        return false;
    *secs = (h * 3600 + m * 60 + s) * (neg ? -1 : 1);
    return true;
}

static firn_rc decode_timestamp(const firn_pg_type *t,
                                const uint8_t *p,
                                size_t len,
                                firn_column *col,
                                firn_pg_decode_stats *stats,
                                firn_err *err)
{
    if (eq_text(p, len, "infinity") || eq_text(p, len, "-infinity")) {
        firn_column_append_i64(col, p[0] == '-' ? -INT64_MAX : INT64_MAX);
        return FIRN_OK;
    }
    cur c = {p, p + len};
    int64_t y, mo, d, tod = 0, off = 0;
    if (!cur_date(&c, &y, &mo, &d) || !cur_char(&c, ' ') || !cur_time(&c, &tod))
        return bad_text(t, len, err, "not an ISO timestamp");
    if (t->kind == FIRN_PG_KIND_TIMESTAMPTZ && !cur_offset(&c, &off))
        return bad_text(t, len, err, "timestamp without a UTC offset");
    cur_era(&c, &y);
    if (c.p != c.end)
        return bad_text(t, len, err, "trailing text after the timestamp");
    /* PostgreSQL's microseconds since 2000-01-01 UTC, then the binary decoder's rules. */
    __int128 v =
        ((__int128)(days_from_civil(y, mo, d) - FIRN_PG_EPOCH_DAYS) * 86400 - off) * USECS_PER_SEC +
        tod;
    if (v >= INT64_MAX || v <= INT64_MIN)
        return bad_text(t, len, err, "timestamp out of range");
    if (v > INT64_MAX - 1 - FIRN_PG_EPOCH_US) {
        if (stats)
            stats->clamped++;
        firn_column_append_i64(col, INT64_MAX - 1);
        return FIRN_OK;
    }
    firn_column_append_i64(col, (int64_t)v + FIRN_PG_EPOCH_US);
    return FIRN_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Intervals (IntervalStyle iso_8601 "P1Y2M3DT4H5M6.789S" or postgres "1 year 2 mons 04:05:06")
 * ----------------------------------------------------------------------------------------------*/

typedef struct ival {
    __int128 months;
    __int128 days;
    __int128 us;
} ival;

/* A signed count: '-'/'+' then 1 to 18 digits (more than any interval field has). */
static bool cur_signed(cur *c, bool *neg, int64_t *mag)
{
    *neg = cur_char(c, '-');
    if (!*neg)
        cur_char(c, '+');
    return cur_uint(c, 1, 18, mag);
}

static bool iso_interval(cur *c, ival *v)
{
    if (!cur_char(c, 'P'))
        return false;
    bool time = false;
    int last = -1; /* order of the designators Y M D T H M S */
    while (c->p < c->end) {
        if (!time && cur_char(c, 'T')) {
            time = true;
            continue;
        }
        bool neg;
        int64_t mag, frac = 0;
        if (!cur_signed(c, &neg, &mag) || !cur_fraction(c, &frac) || c->p == c->end)
            return false;
        __int128 n = neg ? -(__int128)mag : (__int128)mag;
        uint8_t unit = *c->p++;
        int order = !time ? (unit == 'Y'   ? 0
                             : unit == 'M' ? 1
                             : unit == 'D' ? 2
                                           : -1)
                          : (unit == 'H'   ? 3
                             : unit == 'M' ? 4
                             : unit == 'S' ? 5
                                           : -1);
        if (order <= last || (frac && order != 5))
            return false;
        last = order;
        if (order == 0)
            v->months += n * 12;
        else if (order == 1)
            v->months += n;
        else if (order == 2)
            v->days += n;
        else if (order == 3)
            v->us += n * 3600 * USECS_PER_SEC;
        else if (order == 4)
            v->us += n * 60 * USECS_PER_SEC;
        else
            v->us += (n * USECS_PER_SEC) + (neg ? -frac : frac);
    }
    return last >= 0;
}

/* "[+-]H+:MM:SS[.ffffff]" of the postgres style, the sign applying to the whole time. */
static bool pg_interval_time(cur *c, ival *v)
{
    bool neg;
    int64_t h, m = 0, s = 0, f = 0;
    if (!cur_signed(c, &neg, &h) || !cur_char(c, ':') || !cur_uint(c, 2, 2, &m) ||
        !cur_char(c, ':') || !cur_uint(c, 2, 2, &s) || !cur_fraction(c, &f))
        return false;
    __int128 us = ((__int128)h * 3600 + m * 60 + s) * USECS_PER_SEC + f;
    v->us += neg ? -us : us;
    return true;
}

static bool pg_interval(cur *c, ival *v)
{
    int last = -1;
    while (c->p < c->end) {
        if (last >= 0 && !cur_char(c, ' '))
            return false;
        const uint8_t *mark = c->p;
        bool neg;
        int64_t mag;
        if (!cur_signed(c, &neg, &mag))
            return false;
        if (c->p < c->end && *c->p == ':') {
            c->p = mark;
            return pg_interval_time(c, v) && c->p == c->end;
        }
        __int128 n = neg ? -(__int128)mag : (__int128)mag;
        int order = cur_lit(c, " year") ? 0 : cur_lit(c, " mon") ? 1 : cur_lit(c, " day") ? 2 : -1;
        if (order <= last)
            return false;
        cur_char(c, 's');
        last = order;
        if (order == 0)
            v->months += n * 12;
        else if (order == 1)
            v->months += n;
        else
            v->days += n;
    }
    return last >= 0;
}

static firn_rc decode_interval(
    const firn_pg_type *t, const uint8_t *p, size_t len, firn_column *col, firn_err *err)
{
    ival v = {0, 0, 0};
    cur c = {p, p + len};
    bool ok = len > 0 && p[0] == 'P' ? iso_interval(&c, &v) : pg_interval(&c, &v);
    if (!ok || c.p != c.end)
        return bad_text(t, len, err, "not an interval in iso_8601 or postgres style");
    if (v.months > INT32_MAX || v.months < INT32_MIN || v.days > INT32_MAX || v.days < INT32_MIN ||
        v.us > INT64_MAX || v.us < INT64_MIN)
        return bad_text(t, len, err, "interval out of range");
    firn_column_append_i32(firn_column_child(col, 0), (int32_t)v.months);
    firn_column_append_i32(firn_column_child(col, 1), (int32_t)v.days);
    firn_column_append_i64(firn_column_child(col, 2), (int64_t)v.us);
    firn_column_struct_end(col);
    return FIRN_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Arrays (array_out: "{1,2,NULL}", "{{1,2},{3,4}}", "[0:1]={a,b}", quoted and escaped elements)
 * ----------------------------------------------------------------------------------------------*/

typedef struct arr_text {
    const firn_pg_type *t;
    const uint8_t *p;
    const uint8_t *end;
    size_t len; /* of the whole value, for messages */
    uint8_t delim;
    int32_t ndim; /* -1 until the first element or "{}" */
    int32_t dims[FIRN_PG_ARRAY_DIMS_MAX];
    bool dim_seen[FIRN_PG_ARRAY_DIMS_MAX];
    int32_t eff[FIRN_PG_ARRAY_DIMS_MAX];
    firn_pg_decode_stats *stats;
    firn_err *err;
    uint8_t stack[ELEM_STACK]; /* unescaped element */
    uint8_t *heap;
    size_t heap_cap;
} arr_text;

/* One element as read: its bytes (into the value, or unescaped into the scratch space). */
typedef struct arr_elem {
    bool null;
    const uint8_t *p;
    size_t len;
} arr_elem;

static bool is_space(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static void arr_skip_space(arr_text *a)
{
    while (a->p < a->end && is_space(*a->p))
        a->p++;
}

static firn_rc arr_bad(arr_text *a, const char *why)
{
    return bad_text(a->t, a->len, a->err, why);
}

static uint8_t *arr_scratch(arr_text *a, size_t n)
{
    if (n <= sizeof(a->stack))
        return a->stack;
    if (n > a->heap_cap) {
        firn_free(a->heap);
        a->heap = firn_malloc(n);
        a->heap_cap = n;
    }
    return a->heap;
}

/* Copies src (n bytes) without its escaping backslashes; for unquoted elements drops trailing
 * whitespace that was not escaped (array_in's rule). */
static size_t arr_unescape(uint8_t *dst, const uint8_t *src, size_t n, bool quoted)
{
    size_t o = 0, keep = 0;
    for (size_t i = 0; i < n; i++) {
        bool escaped = src[i] == '\\';
        if (escaped)
            i++;
        dst[o++] = src[i];
        if (quoted || escaped || !is_space(src[i]))
            keep = o;
    }
    return keep;
}

/* Reads the element at a->p, stopping before the delimiter or '}' that follows it. With
 * out NULL only checks it. */
static firn_rc arr_read_elem(arr_text *a, arr_elem *out)
{
    bool quoted = a->p < a->end && *a->p == '"';
    const uint8_t *start = a->p + quoted;
    const uint8_t *q = start;
    bool escapes = false;
    for (;; q++) {
        if (q >= a->end)
            return arr_bad(a, "unterminated array element");
        if (*q == '\\') {
            escapes = true;
            if (++q >= a->end)
                return arr_bad(a, "unterminated array element");
            continue;
        }
        if (quoted ? *q == '"' : (*q == a->delim || *q == '}' || *q == '{' || *q == '"'))
            break;
    }
    if (!quoted && (*q == '{' || *q == '"'))
        return arr_bad(a, "unexpected character in an array element");
    size_t n = (size_t)(q - start);
    a->p = q + quoted;
    size_t trimmed = n;
    while (!quoted && !escapes && trimmed > 0 && is_space(start[trimmed - 1]))
        trimmed--;
    if (!quoted && trimmed == 0)
        return arr_bad(a, "empty unquoted array element");
    if (!out)
        return FIRN_OK;
    out->null = !quoted && !escapes && trimmed == 4 && (start[0] | 0x20) == 'n' &&
                (start[1] | 0x20) == 'u' && (start[2] | 0x20) == 'l' && (start[3] | 0x20) == 'l';
    if (!escapes) {
        out->p = start;
        out->len = trimmed;
        return FIRN_OK;
    }
    uint8_t *dst = arr_scratch(a, n);
    out->len = arr_unescape(dst, start, n, quoted);
    out->p = dst;
    return FIRN_OK;
}

/* First pass over one brace level at a->p ('{'): checks the structure and records dims. */
static firn_rc arr_scan(arr_text *a, int level)
{
    if (level >= FIRN_PG_ARRAY_DIMS_MAX)
        return arr_bad(a, "too many array dimensions");
    a->p++; /* '{' */
    arr_skip_space(a);
    if (a->p < a->end && *a->p == '}') {
        if (level != 0)
            return arr_bad(a, "empty inner array");
        a->p++;
        a->ndim = 0;
        return FIRN_OK;
    }
    int32_t count = 0;
    for (;;) {
        arr_skip_space(a);
        if (a->p >= a->end)
            return arr_bad(a, "unterminated array");
        if (*a->p == '{') {
            if (a->ndim >= 0 && level + 1 >= a->ndim)
                return arr_bad(a, "inconsistent array nesting");
            FIRN_TRY(arr_scan(a, level + 1));
        } else {
            if (a->ndim >= 0 && a->ndim != level + 1)
                return arr_bad(a, "inconsistent array nesting");
            a->ndim = level + 1;
            FIRN_TRY(arr_read_elem(a, NULL));
        }
        if (count == INT32_MAX)
            return arr_bad(a, "array too large");
        count++;
        arr_skip_space(a);
        if (a->p < a->end && *a->p == a->delim) {
            a->p++;
            continue;
        }
        if (a->p < a->end && *a->p == '}') {
            a->p++;
            break;
        }
        return arr_bad(a, "expected a delimiter or '}' in array");
    }
    if (a->dim_seen[level] && a->dims[level] != count)
        return arr_bad(a, "sub-arrays of different sizes");
    a->dims[level] = count;
    a->dim_seen[level] = true;
    return FIRN_OK;
}

/* Optional "[lb:ub][lb:ub]=" before the braces (array_out writes it when a lower bound is not
 * 1); each bound other than 1 is counted as lost, as the binary decoder does. */
static firn_rc arr_bounds(arr_text *a, int32_t *n, int64_t lb[], int64_t ub[])
{
    cur c = {a->p, a->end};
    *n = 0;
    while (cur_char(&c, '[')) {
        if (*n == FIRN_PG_ARRAY_DIMS_MAX)
            return arr_bad(a, "too many array dimensions");
        bool neg;
        int64_t v;
        if (!cur_signed(&c, &neg, &v))
            return arr_bad(a, "bad array bounds");
        lb[*n] = 1;
        ub[*n] = neg ? -v : v;
        if (cur_char(&c, ':')) {
            lb[*n] = ub[*n];
            if (!cur_signed(&c, &neg, &v))
                return arr_bad(a, "bad array bounds");
            ub[*n] = neg ? -v : v;
        }
        if (!cur_char(&c, ']'))
            return arr_bad(a, "bad array bounds");
        (*n)++;
    }
    if (*n > 0 && !cur_char(&c, '='))
        return arr_bad(a, "missing '=' after array bounds");
    a->p = c.p;
    return FIRN_OK;
}

/* Second pass: the next element in row-major order (structure already checked). */
static firn_rc arr_next(arr_text *a, arr_elem *e)
{
    while (a->p < a->end && (is_space(*a->p) || *a->p == '{' || *a->p == '}' || *a->p == a->delim))
        a->p++;
    return arr_read_elem(a, e);
}

static firn_rc arr_emit(arr_text *a, firn_column *col, int level)
{
    firn_column_list_begin(col);
    firn_column *child = firn_column_child(col, 0);
    for (int32_t i = 0; i < a->eff[level]; i++) {
        if (level + 1 < a->t->ndims) {
            FIRN_TRY(arr_emit(a, child, level + 1));
            continue;
        }
        arr_elem e;
        FIRN_TRY(arr_next(a, &e));
        if (e.null) {
            firn_column_append_null(child);
            continue;
        }
        FIRN_TRY(firn_pg_value_decode_text(a->t->elem, e.p, e.len, child, a->stats, a->err));
    }
    firn_column_list_end(col);
    return FIRN_OK;
}

static firn_rc arr_decode(arr_text *a, firn_column *col)
{
    int32_t nb = 0;
    int64_t lb[FIRN_PG_ARRAY_DIMS_MAX], ub[FIRN_PG_ARRAY_DIMS_MAX];
    arr_skip_space(a);
    FIRN_TRY(arr_bounds(a, &nb, lb, ub));
    arr_skip_space(a);
    if (a->p >= a->end || *a->p != '{')
        return arr_bad(a, "array does not start with '{'");
    const uint8_t *body = a->p;
    FIRN_TRY(arr_scan(a, 0));
    arr_skip_space(a);
    if (a->p != a->end)
        return arr_bad(a, "trailing text after array");
    if (nb > 0 && nb != a->ndim)
        return arr_bad(a, "array bounds do not match its dimensions");
    for (int32_t d = 0; d < nb; d++) {
        if (ub[d] - lb[d] + 1 != a->dims[d])
            return arr_bad(a, "array bounds do not match its dimensions");
        if (lb[d] != 1 && a->stats)
            a->stats->array_lbound_lost++;
    }
    if (!firn__pg_array_shape(a->t, a->dims, a->ndim, a->eff, a->stats))
        return arr_bad(a, "array too large");
    a->p = body;
    if (a->ndim == 0) {
        firn_column_list_begin(col);
        firn_column_list_end(col);
        return FIRN_OK;
    }
    return arr_emit(a, col, 0);
}

/* int2vector / oidvector text (int2vectorout, oidvectorout): the elements separated by single
 * spaces, no braces, never NULL; "" is the empty vector. Stored as the list the binary decoder
 * makes of the same value (single-element outer lists when more dimensions are declared). */
typedef struct vec_text {
    const firn_pg_type *t;
    cur c;
    int32_t eff[FIRN_PG_ARRAY_DIMS_MAX];
    firn_pg_decode_stats *stats;
    firn_err *err;
} vec_text;

static firn_rc vec_emit(vec_text *v, firn_column *col, int level)
{
    firn_column_list_begin(col);
    firn_column *child = firn_column_child(col, 0);
    for (int32_t i = 0; i < v->eff[level]; i++) {
        if (level + 1 < v->t->ndims) {
            FIRN_TRY(vec_emit(v, child, level + 1));
            continue;
        }
        while (v->c.p < v->c.end && *v->c.p == ' ')
            v->c.p++;
        const uint8_t *start = v->c.p;
        while (v->c.p < v->c.end && *v->c.p != ' ')
            v->c.p++;
        FIRN_TRY(firn_pg_value_decode_text(v->t->elem, start, (size_t)(v->c.p - start), child,
                                           v->stats, v->err));
    }
    firn_column_list_end(col);
    return FIRN_OK;
}

static firn_rc decode_vector(const firn_pg_type *t,
                             const uint8_t *p,
                             size_t len,
                             firn_column *col,
                             firn_pg_decode_stats *stats,
                             firn_err *err)
{
    int32_t n = 0;
    for (size_t i = 0; i < len;) {
        if (p[i] == ' ') {
            i++;
            continue;
        }
        if (n == INT32_MAX)
            return bad_text(t, len, err, "vector too large");
        n++;
        while (i < len && p[i] != ' ')
            i++;
    }
    vec_text v = {.t = t, .c = {p, p + len}, .stats = stats, .err = err};
    int32_t dims[1] = {n};
    if (!firn__pg_array_shape(t, dims, n ? 1 : 0, v.eff, stats))
        return bad_text(t, len, err, "vector too large");
    if (n == 0) {
        firn_column_list_begin(col);
        firn_column_list_end(col);
        return FIRN_OK;
    }
    return vec_emit(&v, col, 0);
}

static firn_rc decode_array(const firn_pg_type *t,
                            const uint8_t *p,
                            size_t len,
                            firn_column *col,
                            firn_pg_decode_stats *stats,
                            firn_err *err)
{
    if (t->ndims < 1 || t->ndims > FIRN_PG_ARRAY_DIMS_MAX || !t->elem)
        return bad_text(t, len, err, "bad array type");
    if (firn__pg_is_vector(t))
        return decode_vector(t, p, len, col, stats, err);
    arr_text a = {.t = t,
                  .p = p,
                  .end = p + len,
                  .len = len,
                  .delim = (uint8_t)(t->elem->typdelim ? t->elem->typdelim : ','),
                  .ndim = -1,
                  .stats = stats,
                  .err = err};
    firn_rc rc = arr_decode(&a, col);
    firn_free(a.heap);
    return rc;
}

/* ------------------------------------------------------------------------------------------------
 * Entry point
 * ----------------------------------------------------------------------------------------------*/

firn_rc firn_pg_value_decode_text(const firn_pg_type *t,
                                  const uint8_t *p,
                                  size_t len,
                                  firn_column *col,
                                  firn_pg_decode_stats *stats,
                                  firn_err *err)
{
    switch (t->kind) {
    case FIRN_PG_KIND_TEXT:
    case FIRN_PG_KIND_JSONB:  /* jsonb_send is a version byte and jsonb_out's text */
    case FIRN_PG_KIND_NUMSTR: /* the binary decoder rebuilds numeric_out's text */
        firn_column_append_bytes(col, p, len);
        return FIRN_OK;
    case FIRN_PG_KIND_BOOL:
        if (len != 1 || (p[0] != 't' && p[0] != 'f'))
            return bad_text(t, len, err, "not a boolean");
        firn_column_append_bool(col, p[0] == 't');
        return FIRN_OK;
    case FIRN_PG_KIND_INT2:
    case FIRN_PG_KIND_INT4:
    case FIRN_PG_KIND_INT8:
    case FIRN_PG_KIND_OID:
        return decode_int(t, p, len, col, err);
    case FIRN_PG_KIND_FLOAT4:
    case FIRN_PG_KIND_FLOAT8:
        return decode_float(t, p, len, col, err);
    case FIRN_PG_KIND_DECIMAL:
        return decode_decimal(t, p, len, col, stats, err);
    case FIRN_PG_KIND_MONEY:
        return decode_money(t, p, len, col, err);
    case FIRN_PG_KIND_BYTEA:
        return decode_bytea(t, p, len, col, err);
    case FIRN_PG_KIND_UUID:
        return decode_uuid(t, p, len, col, err);
    case FIRN_PG_KIND_DATE:
        return decode_date(t, p, len, col, err);
    case FIRN_PG_KIND_TIME:
        return decode_time(t, p, len, col, err);
    case FIRN_PG_KIND_TIMESTAMP:
    case FIRN_PG_KIND_TIMESTAMPTZ:
        return decode_timestamp(t, p, len, col, stats, err);
    case FIRN_PG_KIND_INTERVAL:
        return decode_interval(t, p, len, col, err);
    case FIRN_PG_KIND_ARRAY:
        return decode_array(t, p, len, col, stats, err);
    }
    return bad_text(t, len, err, "unknown decoder");
}
