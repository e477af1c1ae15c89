/* SPDX-License-Identifier: Apache-2.0 */
/* Per-type decoders from PostgreSQL's binary send formats (src/backend/utils/adt/ *send) into
 * column values, following the mapping in docs/type-mapping.md. */
#include "pg_int.h"

#include <string.h>

#define NUMERIC_POS    0x0000
#define NUMERIC_NEG    0x4000
#define NUMERIC_NAN    0xC000
#define NUMERIC_PINF   0xD000
#define NUMERIC_NINF   0xF000
#define NBASE          10000
#define ARRAY_DIMS_MAX FIRN_PG_ARRAY_DIMS_MAX
#define NUMSTR_STACK   512

typedef unsigned __int128 u128;

static firn_rc bad_value(const firn_pg_type *t, size_t len, firn_err *err, const char *why)
{
    return firn_err_set(err, FIRN_ERR_PARSE, "invalid binary value of type \"%s\" (%zu bytes): %s",
                        t->name ? t->name : firn_pg_kind_name(t->kind), len, why);
}

firn_rc firn__pg_bad_value(const firn_pg_type *t, size_t len, firn_err *err, const char *why)
{
    return bad_value(t, len, err, why);
}

static firn_rc want_len(const firn_pg_type *t, size_t len, size_t want, firn_err *err)
{
    if (len != want)
        return bad_value(t, len, err, "wrong length");
    return FIRN_OK;
}

/* A numeric's header and digit array, checked against the value's length. */
typedef struct numeric_var {
    int ndigits;
    int weight;
    uint16_t sign;
    int dscale;
    const uint8_t *digits; /* ndigits big-endian int16 */
} numeric_var;

static firn_rc
read_numeric(const firn_pg_type *t, const uint8_t *p, size_t len, numeric_var *v, firn_err *err)
{
    if (len < 8)
        return bad_value(t, len, err, "short numeric header");
    v->ndigits = (int16_t)firn__pg_be16(p);
    v->weight = (int16_t)firn__pg_be16(p + 2);
    v->sign = firn__pg_be16(p + 4);
    v->dscale = (int16_t)firn__pg_be16(p + 6);
    v->digits = p + 8;
    if (v->ndigits < 0 || (size_t)v->ndigits * 2 != len - 8 || v->dscale < 0)
        return bad_value(t, len, err, "bad numeric header");
    if (v->sign != NUMERIC_POS && v->sign != NUMERIC_NEG && v->sign != NUMERIC_NAN &&
        v->sign != NUMERIC_PINF && v->sign != NUMERIC_NINF)
        return bad_value(t, len, err, "bad numeric sign");
    for (int i = 0; i < v->ndigits; i++) {
        if (firn__pg_be16(v->digits + 2 * i) >= NBASE)
            return bad_value(t, len, err, "numeric digit out of range");
    }
    return FIRN_OK;
}

/* 10^0 .. 10^38 (u128 has no literal syntax: products of 64-bit constants). */
static const u128 pow10_table[39] = {(u128)1ULL,
                                     (u128)10ULL,
                                     (u128)100ULL,
                                     (u128)1000ULL,
                                     (u128)10000ULL,
                                     (u128)100000ULL,
                                     (u128)1000000ULL,
                                     (u128)10000000ULL,
                                     (u128)100000000ULL,
                                     (u128)1000000000ULL,
                                     (u128)10000000000ULL,
                                     (u128)100000000000ULL,
                                     (u128)1000000000000ULL,
                                     (u128)10000000000000ULL,
                                     (u128)100000000000000ULL,
                                     (u128)1000000000000000ULL,
                                     (u128)10000000000000000ULL,
                                     (u128)100000000000000000ULL,
                                     (u128)1000000000000000000ULL,
                                     (u128)10000000000000000000ULL,
                                     (u128)10000000000000000000ULL * 10ULL,
                                     (u128)10000000000000000000ULL * 100ULL,
                                     (u128)10000000000000000000ULL * 1000ULL,
                                     (u128)10000000000000000000ULL * 10000ULL,
                                     (u128)10000000000000000000ULL * 100000ULL,
                                     (u128)10000000000000000000ULL * 1000000ULL,
                                     (u128)10000000000000000000ULL * 10000000ULL,
                                     (u128)10000000000000000000ULL * 100000000ULL,
                                     (u128)10000000000000000000ULL * 1000000000ULL,
                                     (u128)10000000000000000000ULL * 10000000000ULL,
                                     (u128)10000000000000000000ULL * 100000000000ULL,
                                     (u128)10000000000000000000ULL * 1000000000000ULL,
                                     (u128)10000000000000000000ULL * 10000000000000ULL,
                                     (u128)10000000000000000000ULL * 100000000000000ULL,
                                     (u128)10000000000000000000ULL * 1000000000000000ULL,
                                     (u128)10000000000000000000ULL * 10000000000000000ULL,
                                     (u128)10000000000000000000ULL * 100000000000000000ULL,
                                     (u128)10000000000000000000ULL * 1000000000000000000ULL,
                                     (u128)10000000000000000000ULL * 10000000000000000000ULL};

static const uint32_t POW10_SMALL[4] = {1, 10, 100, 1000};

/* Exact unscaled value of v at scale: fails when it has more fractional digits than scale or
 * does not fit precision digits. No divisions on the common path: a base-10000 digit d < 10^4
 * times 10^e cannot overflow 128 bits while e <= 34, and d * 10^e >= limit whenever e >= p. */
static firn_rc
numeric_unscaled(const firn_pg_type *t, const numeric_var *v, size_t len, u128 *out, firn_err *err)
{
    const u128 limit = pow10_table[t->precision];
    u128 acc = 0;
    for (int i = 0; i < v->ndigits; i++) {
        uint32_t d = firn__pg_be16(v->digits + 2 * i);
        if (d == 0)
            continue;
        int e = 4 * (v->weight - i) + t->scale;
        u128 term;
        if (e >= 0) {
            if (e >= t->precision)
                return bad_value(t, len, err, "value exceeds the column precision");
            if (e > 34 && (u128)d > limit / pow10_table[e])
                return bad_value(t, len, err, "value exceeds the column precision");
            term = (u128)d * pow10_table[e];
        } else {
            if (e <= -4 || d % POW10_SMALL[-e] != 0)
                return bad_value(t, len, err, "more fractional digits than the column scale");
            term = d / POW10_SMALL[-e];
        }
        acc += term;
        if (acc >= limit)
            return bad_value(t, len, err, "value exceeds the column precision");
    }
    *out = acc;
    return FIRN_OK;
}

static firn_rc decode_decimal(const firn_pg_type *t,
                              const uint8_t *p,
                              size_t len,
                              firn_column *col,
                              firn_pg_decode_stats *stats,
                              firn_err *err)
{
    numeric_var v;
    FIRN_TRY(read_numeric(t, p, len, &v, err));
    if (v.sign != NUMERIC_POS && v.sign != NUMERIC_NEG) {
        /* NaN (and infinities, which typmod'd numerics reject) have no decimal: documented. */
        if (stats)
            stats->nan_to_null++;
        firn_column_append_null(col);
        return FIRN_OK;
    }
    u128 mag = 0;
    FIRN_TRY(numeric_unscaled(t, &v, len, &mag, err));
    __int128 s = v.sign == NUMERIC_NEG ? -(__int128)mag : (__int128)mag;
    if (t->precision <= 18)
        firn_column_append_i64(col, (int64_t)s);
    else
        firn_column_append_i128(col, (int64_t)(s >> 64), (uint64_t)s);
    return FIRN_OK;
}

static size_t put_group(char *out, uint32_t d, bool pad)
{
    char tmp[4];
    int n = 0;
    for (int k = 0; k < 4; k++) {
        tmp[3 - k] = (char)('0' + d % 10);
        d /= 10;
    }
    int start = 0;
    if (!pad) {
        while (start < 3 && tmp[start] == '0')
            start++;
    }
    for (int k = start; k < 4; k++)
        out[n++] = tmp[k];
    return (size_t)n;
}

/* numeric_out's text for a finite value: sign, integer digits, then exactly dscale digits. */
static size_t format_numeric(const numeric_var *v, char *out)
{
    size_t o = 0;
    if (v->sign == NUMERIC_NEG)
        out[o++] = '-';
    if (v->weight < 0) {
        out[o++] = '0';
    } else {
        for (int d = 0; d <= v->weight; d++) {
            uint32_t dig = d < v->ndigits ? firn__pg_be16(v->digits + 2 * d) : 0;
            o += put_group(out + o, dig, d > 0);
        }
    }
    if (v->dscale > 0) {
        out[o++] = '.';
        size_t end = o + (size_t)v->dscale;
        for (int d = v->weight + 1; o < end; d++) {
            uint32_t dig = d >= 0 && d < v->ndigits ? firn__pg_be16(v->digits + 2 * d) : 0;
            char grp[4];
            put_group(grp, dig, true);
            for (int k = 0; k < 4 && o < end; k++)
                out[o++] = grp[k];
        }
    }
    return o;
}

static firn_rc
decode_numstr(const firn_pg_type *t, const uint8_t *p, size_t len, firn_column *col, firn_err *err)
{
    numeric_var v;
    FIRN_TRY(read_numeric(t, p, len, &v, err));
    const char *special = v.sign == NUMERIC_NAN    ? "NaN"
                          : v.sign == NUMERIC_PINF ? "Infinity"
                          : v.sign == NUMERIC_NINF ? "-Infinity"
                                                   : NULL;
    if (special) {
        firn_column_append_bytes(col, special, strlen(special));
        return FIRN_OK;
    }
    size_t need = 4 + 4 * (size_t)(v.weight > 0 ? v.weight + 1 : 1) + (size_t)v.dscale + 4;
    char stack[NUMSTR_STACK];
    char *buf = need <= sizeof(stack) ? stack : firn_malloc(need);
    size_t n = format_numeric(&v, buf);
    FIRN_ASSERT(n <= need);
    firn_column_append_bytes(col, buf, n);
    if (buf != stack)
        firn_free(buf);
    return FIRN_OK;
}

static firn_rc
decode_date(const firn_pg_type *t, const uint8_t *p, size_t len, firn_column *col, firn_err *err)
{
    FIRN_TRY(want_len(t, len, 4, err));
    int32_t d = (int32_t)firn__pg_be32(p);
    if (d == INT32_MAX || d == INT32_MIN) {
        firn_column_append_i32(col, d == INT32_MAX ? INT32_MAX : -INT32_MAX); /* +-infinity */
        return FIRN_OK;
    }
    int64_t days = (int64_t)d + FIRN_PG_EPOCH_DAYS;
    if (days >= INT32_MAX || days <= -INT32_MAX)
        return bad_value(t, len, err, "date out of range");
    firn_column_append_i32(col, (int32_t)days);
    return FIRN_OK;
}

static firn_rc decode_timestamp(const firn_pg_type *t,
                                const uint8_t *p,
                                size_t len,
                                firn_column *col,
                                firn_pg_decode_stats *stats,
                                firn_err *err)
{
    FIRN_TRY(want_len(t, len, 8, err));
    int64_t v = (int64_t)firn__pg_be64(p);
    if (v == INT64_MAX || v == INT64_MIN) {
        firn_column_append_i64(col, v == INT64_MAX ? INT64_MAX : -INT64_MAX); /* +-infinity */
        return FIRN_OK;
    }
    if (v > INT64_MAX - 1 - FIRN_PG_EPOCH_US) {
        /* Only years after 294246 (PostgreSQL allows 294276): clamp, counted and logged. */
        if (stats)
            stats->clamped++;
        firn_column_append_i64(col, INT64_MAX - 1);
        return FIRN_OK;
    }
    firn_column_append_i64(col, v + FIRN_PG_EPOCH_US);
    return FIRN_OK;
}

static firn_rc decode_interval(
    const firn_pg_type *t, const uint8_t *p, size_t len, firn_column *col, firn_err *err)
{
    FIRN_TRY(want_len(t, len, 16, err));
    firn_column_append_i32(firn_column_child(col, 0), (int32_t)firn__pg_be32(p + 12));
    firn_column_append_i32(firn_column_child(col, 1), (int32_t)firn__pg_be32(p + 8));
    firn_column_append_i64(firn_column_child(col, 2), (int64_t)firn__pg_be64(p));
    firn_column_struct_end(col);
    return FIRN_OK;
}

/* State of one array value being decoded (array_send format). */
typedef struct array_walk {
    const firn_pg_type *t;
    const uint8_t *p; /* next element */
    const uint8_t *end;
    int32_t eff[ARRAY_DIMS_MAX]; /* dimensions as the column's nesting sees them */
    firn_pg_decode_stats *stats;
    firn_err *err;
    size_t len;
} array_walk;

static firn_rc array_elements(array_walk *w, firn_column *col, int level)
{
    firn_column_list_begin(col);
    firn_column *child = firn_column_child(col, 0);
    for (int32_t i = 0; i < w->eff[level]; i++) {
        if (level + 1 < w->t->ndims) {
            FIRN_TRY(array_elements(w, child, level + 1));
            continue;
        }
        if (w->end - w->p < 4)
            return bad_value(w->t, w->len, w->err, "truncated array element");
        int32_t n = (int32_t)firn__pg_be32(w->p);
        w->p += 4;
        if (n == -1) {
            firn_column_append_null(child);
            continue;
        }
        if (n < 0 || w->end - w->p < n)
            return bad_value(w->t, w->len, w->err, "bad array element length");
        FIRN_TRY(firn_pg_value_decode(w->t->elem, w->p, (size_t)n, child, w->stats, w->err));
        w->p += n;
    }
    firn_column_list_end(col);
    return FIRN_OK;
}

bool firn__pg_array_shape(const firn_pg_type *t,
                          const int32_t *dims,
                          int32_t ndim,
                          int32_t *eff,
                          firn_pg_decode_stats *stats)
{
    int32_t depth = t->ndims;
    if (ndim == 0) {
        eff[0] = 0;
        return true;
    }
    if (ndim >= depth) {
        for (int32_t d = 0; d < depth - 1; d++)
            eff[d] = dims[d];
        int64_t inner = 1; /* checked at each step: dims after a 0 are not bounded by the
                              value's length, and their product could overflow */
        for (int32_t d = depth - 1; d < ndim; d++) {
            inner *= dims[d];
            if (inner > INT32_MAX)
                return false;
        }
        eff[depth - 1] = (int32_t)inner;
        if (ndim > depth && stats)
            stats->array_flattened++;
        return true;
    }
    for (int32_t d = 0; d < depth - ndim; d++)
        eff[d] = 1;
    for (int32_t d = 0; d < ndim; d++)
        eff[depth - ndim + d] = dims[d];
    return true;
}

static firn_rc decode_array(const firn_pg_type *t,
                            const uint8_t *p,
                            size_t len,
                            firn_column *col,
                            firn_pg_decode_stats *stats,
                            firn_err *err)
{
    if (len < 12)
        return bad_value(t, len, err, "short array header");
    int32_t ndim = (int32_t)firn__pg_be32(p);
    uint32_t flags = firn__pg_be32(p + 4);
    if (ndim < 0 || ndim > ARRAY_DIMS_MAX || flags > 1 || t->ndims > ARRAY_DIMS_MAX)
        return bad_value(t, len, err, "bad array header");
    if (len - 12 < (size_t)ndim * 8)
        return bad_value(t, len, err, "short array dimensions");
    int32_t dims[ARRAY_DIMS_MAX] = {0};
    int64_t total = ndim ? 1 : 0;
    for (int32_t d = 0; d < ndim; d++) {
        dims[d] = (int32_t)firn__pg_be32(p + 12 + 8 * d);
        int32_t lbound = (int32_t)firn__pg_be32(p + 16 + 8 * d);
        if (dims[d] < 0)
            return bad_value(t, len, err, "negative array dimension");
        total *= dims[d];
        if (total > (int64_t)len)
            return bad_value(t, len, err, "array dimensions exceed the value");
        /* The vectors' lower bound 0 is their type's, not the value's: nothing is dropped. */
        if (lbound != 1 && stats && !firn__pg_is_vector(t))
            stats->array_lbound_lost++;
    }
    array_walk w = {.t = t,
                    .p = p + 12 + 8 * (size_t)ndim,
                    .end = p + len,
                    .stats = stats,
                    .err = err,
                    .len = len};
    if (!firn__pg_array_shape(t, dims, ndim, w.eff, stats))
        return bad_value(t, len, err, "array too large");
    if (ndim == 0) {
        firn_column_list_begin(col);
        firn_column_list_end(col);
    } else {
        FIRN_TRY(array_elements(&w, col, 0));
    }
    if (w.p != w.end)
        return bad_value(t, len, err, "trailing bytes after array elements");
    return FIRN_OK;
}

static firn_rc decode_fixed_int(
    const firn_pg_type *t, const uint8_t *p, size_t len, firn_column *col, firn_err *err)
{
    switch (t->kind) {
    case FIRN_PG_KIND_INT2:
        FIRN_TRY(want_len(t, len, 2, err));
        firn_column_append_i32(col, (int16_t)firn__pg_be16(p));
        return FIRN_OK;
    case FIRN_PG_KIND_INT4:
        FIRN_TRY(want_len(t, len, 4, err));
        firn_column_append_i32(col, (int32_t)firn__pg_be32(p));
        return FIRN_OK;
    case FIRN_PG_KIND_OID:
        FIRN_TRY(want_len(t, len, 4, err));
        firn_column_append_i64(col, (int64_t)firn__pg_be32(p));
        return FIRN_OK;
    default: /* INT8, TIME */
        FIRN_TRY(want_len(t, len, 8, err));
        firn_column_append_i64(col, (int64_t)firn__pg_be64(p));
        return FIRN_OK;
    }
}

static firn_rc
decode_float(const firn_pg_type *t, const uint8_t *p, size_t len, firn_column *col, firn_err *err)
{
    if (t->kind == FIRN_PG_KIND_FLOAT4) {
        FIRN_TRY(want_len(t, len, 4, err));
        uint32_t bits = firn__pg_be32(p);
        float f;
        memcpy(&f, &bits, 4);
        firn_column_append_float(col, f);
        return FIRN_OK;
    }
    FIRN_TRY(want_len(t, len, 8, err));
    uint64_t bits = firn__pg_be64(p);
    double d;
    memcpy(&d, &bits, 8);
    firn_column_append_double(col, d);
    return FIRN_OK;
}

static firn_rc
decode_money(const firn_pg_type *t, const uint8_t *p, size_t len, firn_column *col, firn_err *err)
{
    FIRN_TRY(want_len(t, len, 8, err));
    int64_t cents = (int64_t)firn__pg_be64(p);
    firn_column_append_i128(col, cents < 0 ? -1 : 0, (uint64_t)cents);
    return FIRN_OK;
}

firn_rc firn_pg_value_decode(const firn_pg_type *t,
                             const uint8_t *p,
                             size_t len,
                             firn_column *col,
                             firn_pg_decode_stats *stats,
                             firn_err *err)
{
    switch (t->kind) {
    case FIRN_PG_KIND_TEXT:
    case FIRN_PG_KIND_BYTEA:
        firn_column_append_bytes(col, p, len);
        return FIRN_OK;
    case FIRN_PG_KIND_INT2:
    case FIRN_PG_KIND_INT4:
    case FIRN_PG_KIND_INT8:
    case FIRN_PG_KIND_OID:
    case FIRN_PG_KIND_TIME:
        return decode_fixed_int(t, p, len, col, err);
    case FIRN_PG_KIND_BOOL:
        FIRN_TRY(want_len(t, len, 1, err));
        firn_column_append_bool(col, p[0] != 0);
        return FIRN_OK;
    case FIRN_PG_KIND_FLOAT4:
    case FIRN_PG_KIND_FLOAT8:
        return decode_float(t, p, len, col, err);
    case FIRN_PG_KIND_DECIMAL:
        return decode_decimal(t, p, len, col, stats, err);
    case FIRN_PG_KIND_NUMSTR:
        return decode_numstr(t, p, len, col, err);
    case FIRN_PG_KIND_MONEY:
        return decode_money(t, p, len, col, err);
    case FIRN_PG_KIND_JSONB:
        if (len < 1 || p[0] != 1)
            return bad_value(t, len, err, "unsupported jsonb version");
        firn_column_append_bytes(col, p + 1, len - 1);
        return FIRN_OK;
    case FIRN_PG_KIND_UUID:
        FIRN_TRY(want_len(t, len, 16, err));
        firn_column_append_bytes(col, p, 16);
        return FIRN_OK;
    case FIRN_PG_KIND_DATE:
        return decode_date(t, p, len, col, err);
    case FIRN_PG_KIND_TIMESTAMP:
    case FIRN_PG_KIND_TIMESTAMPTZ:
        return decode_timestamp(t, p, len, col, stats, err);
    case FIRN_PG_KIND_INTERVAL:
        return decode_interval(t, p, len, col, err);
    case FIRN_PG_KIND_ARRAY:
        return decode_array(t, p, len, col, stats, err);
    }
    return bad_value(t, len, err, "unknown decoder");
}
