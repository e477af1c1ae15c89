/* SPDX-License-Identifier: Apache-2.0 */
/* Row staging for the binary COPY decoder. A tuple is decoded when it arrives, while its bytes
 * are still in the cache, in one pass over its fields: each field by the decoder chosen once for
 * its column into that column's plain typed array at the tuple's row (a tuple that is not all
 * there yet is taken back and staged whole by a later call). At the flush
 * (STAGE_ROWS tuples, or STAGE_RAW_MAX bytes of kept fields) each column is appended to the batch
 * in bulk (one firn_column_append_fixed_n per column and one firn_batch_end_rows per stage). The
 * common backfill types (int2/int4/int8/oid/time, bool, float4/float8, date, timestamp(tz),
 * numeric(p<=18,s)) have such decoders; text and bytea values are kept one after another per
 * column and appended at the flush; every other type is kept as sent and decoded at the flush by
 * firn_pg_value_decode into a side batch, then copied over. Every value of a stage is decoded
 * before any reaches the batch, so a bad value leaves the batch as it was. Values equal what
 * firn_pg_value_decode appends (tests/unit/source_pg/test_pg_stage.c checks both paths).
 *
 * Decoding at the flush instead, column by column over the staged tuples, runs fewer
 * instructions (the type dispatch once per column) but reads each field back from a ~60 KiB stage
 * that no longer fits the L1 cache: bench/copy_decode_bench measured 0.231 against 0.192 CPU-s
 * per million taxi rows for this (docs/internals/backfill.md). */
#include "pg_int.h"

#include <limits.h>
#include <string.h>

#define STAGE_ROWS 256
/* Bytes of kept fields (text, bytea, side-decoded) after which the stage is full: offsets stay
 * far below 4 GiB (a tuple is at most COPY_PENDING_MAX, 2 GiB) and a stage of short rows stays in
 * the cache. */
#define STAGE_RAW_MAX ((size_t)8 << 20)
#define NUMERIC_NEG   0x4000
#define NUMERIC_NAN   0xC000
#define NUMERIC_PINF  0xD000
#define NUMERIC_NINF  0xF000
#define NBASE         10000

typedef enum stage_kind {
    SK_I16 = 1, /* int2 -> int32 */
    SK_I32,     /* int4 */
    SK_I64,     /* int8, time */
    SK_OID,     /* oid -> int64 */
    SK_BOOL,
    SK_F32,
    SK_F64,
    SK_DATE,
    SK_TS,    /* timestamp, timestamptz */
    SK_DEC64, /* numeric(p<=18,s) -> unscaled int64 */
    SK_BYTES, /* text, bytea: bytes as sent */
    SK_GENERIC,
    SK_END, /* the entry after the last column: the tuple's fields are all staged */
} stage_kind;

typedef struct stage_col {
    stage_kind kind;
    const firn_pg_type *type;
    size_t width;   /* bytes per staged fixed-width value */
    uint8_t *vals;  /* STAGE_ROWS values (zeros for nulls) */
    uint8_t *valid; /* STAGE_ROWS flags, nonzero = present; all 1 while nulls is 0 */
    size_t nulls;
    firn_buf bytes; /* SK_BYTES: the staged values' bytes, one after another */
    uint32_t *ends; /* SK_BYTES: [row] end of its value in bytes (a null's is empty) */
    int64_t limit;  /* SK_DEC64: 10^precision */
    int scale;      /* SK_DEC64: the type's scale */
    /* SK_DEC64: weight - ndigits of a stored value whose last base-10000 digit holds -e = k =
     * 1..3 decimal digits beyond the scale (e = 4 * (weight - ndigits + 1) + scale = -k), when
     * the scale is not a multiple of 4 (else INT_MIN, never met), and the exact division by
     * 10^k = 2^k * 5^k for it (Granlund-Montgomery, section 9; Hacker's Delight 10-16): q =
     * rotr(acc * frac_inv, k) with frac_inv the inverse of 5^k modulo 2^64 is acc / 10^k when 10^k
     * divides acc, and above UINT64_MAX / 10^k otherwise; frac_lim = min(limit, UINT64_MAX / 10^k +
     * 1), so that one compare refuses both the inexact and the too large. */
    int frac_wd;
    unsigned frac_k;
    uint64_t frac_inv, frac_lim;
    /* SK_DEC64: per length n = 8..16 (index n - 8), the first and last 8 bytes (so all n of
     * them) of the last value of that length the fast path decoded, and its value. One entry
     * per length keeps a column's zeros (8 bytes) apart from its other values, which take turns
     * with them in the fee columns; and a value of another length whose first and last 8 bytes
     * match (its digit count then does not match its length) never meets the entry. At first,
     * for even n, the bytes of a 0 with (n - 8) / 2 zero digits, weight 0 and dscale 0, whose
     * value is 0; for odd n (no value of the fast path), first bytes that the last bytes
     * contradict where they overlap, so that no field matches. */
    uint64_t seen_head[9], seen_tail[9];
    int64_t seen_value[9];
} stage_col;

struct firn__pg_stage {
    const firn_pg_table *table;
    stage_col *cols;
    size_t rows;
    firn_buf raw;    /* the SK_GENERIC fields of the staged tuples as sent */
    uint32_t *field; /* [column * STAGE_ROWS + row]: offset in raw of such a field's length word */
    size_t kept;     /* bytes in raw and in the SK_BYTES columns' buffers */
    firn_pg_decode_stats stats; /* counted by the staged rows; added to the caller's at the flush */
    firn_batch *side;           /* SK_GENERIC values; NULL when no column needs it */
};

static const int64_t POW10[19] = {1,
                                  10,
                                  100,
                                  1000,
                                  10000,
                                  100000,
                                  1000000,
                                  10000000,
                                  100000000,
                                  1000000000,
                                  10000000000,
                                  100000000000,
                                  1000000000000,
                                  10000000000000,
                                  100000000000000,
                                  1000000000000000,
                                  10000000000000000,
                                  100000000000000000,
                                  1000000000000000000};

/* The staged decoder of a column type, its value width, or SK_GENERIC. */
static stage_kind kind_of(const firn_pg_type *t, size_t *width)
{
    static const struct {
        firn_pg_kind pg;
        stage_kind sk;
        size_t width;
    } MAP[] = {
        {FIRN_PG_KIND_INT2, SK_I16, 4},       {FIRN_PG_KIND_INT4, SK_I32, 4},
        {FIRN_PG_KIND_INT8, SK_I64, 8},       {FIRN_PG_KIND_TIME, SK_I64, 8},
        {FIRN_PG_KIND_OID, SK_OID, 8},        {FIRN_PG_KIND_BOOL, SK_BOOL, 1},
        {FIRN_PG_KIND_FLOAT4, SK_F32, 4},     {FIRN_PG_KIND_FLOAT8, SK_F64, 8},
        {FIRN_PG_KIND_DATE, SK_DATE, 4},      {FIRN_PG_KIND_TIMESTAMP, SK_TS, 8},
        {FIRN_PG_KIND_TIMESTAMPTZ, SK_TS, 8}, {FIRN_PG_KIND_TEXT, SK_BYTES, 0},
        {FIRN_PG_KIND_BYTEA, SK_BYTES, 0},
    };
    *width = 0;
    if (t->kind == FIRN_PG_KIND_DECIMAL && t->precision >= 1 && t->precision <= 18) {
        *width = 8;
        return SK_DEC64;
    }
    for (size_t i = 0; i < sizeof(MAP) / sizeof(MAP[0]); i++) {
        if (MAP[i].pg == t->kind) {
            *width = MAP[i].width;
            return MAP[i].sk;
        }
    }
    return SK_GENERIC;
}

firn__pg_stage *firn__pg_stage_new(const firn_pg_table *t)
{
    firn__pg_stage *s = firn_calloc(1, sizeof(*s));
    s->table = t;
    s->cols = firn_calloc(t->n_columns + 1, sizeof(*s->cols));
    s->cols[t->n_columns].kind = SK_END;
    s->field = firn_calloc((t->n_columns ? t->n_columns : 1) * STAGE_ROWS, sizeof(uint32_t));
    firn_buf_init(&s->raw, (size_t)UINT32_MAX);
    for (size_t i = 0; i < t->n_columns; i++) {
        stage_col *c = &s->cols[i];
        c->type = t->columns[i].type;
        c->kind = kind_of(c->type, &c->width);
        c->valid = firn_malloc(STAGE_ROWS);
        memset(c->valid, 1, STAGE_ROWS);
        if (c->width)
            c->vals = firn_calloc(STAGE_ROWS, c->width);
        if (c->kind == SK_BYTES) {
            firn_buf_init(&c->bytes, (size_t)UINT32_MAX);
            c->ends = firn_calloc(STAGE_ROWS, sizeof(uint32_t));
        }
        if (c->kind == SK_DEC64) {
            for (uint32_t n = 8; n <= 16; n++) {
                uint8_t zero[16] = {0, (uint8_t)((n - 8) / 2)};
                memcpy(&c->seen_head[n - 8], zero, 8);
                memcpy(&c->seen_tail[n - 8], zero + n - 8, 8);
                if (n % 2)
                    c->seen_tail[n - 8] = ~c->seen_head[n - 8];
            }
            c->limit = POW10[c->type->precision];
            c->scale = c->type->scale;
            int k = 4 - c->scale % 4;
            c->frac_wd = INT_MIN;
            if (k < 4) {
                /* inv of 5^k by Newton's iteration: odd * odd = 1 mod 2^3, and each step
                 * doubles the low bits that are right (3, 6, ... 96) */
                uint64_t odd = (uint64_t)POW10[k] >> k, inv = odd;
                for (int step = 0; step < 5; step++)
                    inv *= 2 - odd * inv;
                c->frac_wd = -2 - c->scale / 4;
                c->frac_k = (unsigned)k;
                c->frac_inv = inv;
                c->frac_lim = UINT64_MAX / (uint64_t)POW10[k] + 1;
                if ((uint64_t)c->limit < c->frac_lim)
                    c->frac_lim = (uint64_t)c->limit;
            }
        }
        if (c->kind == SK_GENERIC && !s->side)
            s->side = firn_batch_new(t->schema);
    }
    return s;
}

void firn__pg_stage_free(firn__pg_stage *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->table->n_columns; i++) {
        firn_free(s->cols[i].vals);
        firn_free(s->cols[i].valid);
        firn_free(s->cols[i].ends);
        firn_buf_deinit(&s->cols[i].bytes);
    }
    firn_free(s->cols);
    firn_free(s->field);
    firn_buf_deinit(&s->raw);
    firn_batch_free(s->side);
    firn_free(s);
}

size_t firn__pg_stage_rows(const firn__pg_stage *s)
{
    return s->rows;
}

bool firn__pg_stage_full(const firn__pg_stage *s)
{
    return s->rows == STAGE_ROWS || s->kept >= STAGE_RAW_MAX;
}

size_t firn__pg_stage_held(const firn__pg_stage *s)
{
    size_t held = s->raw.cap;
    for (size_t i = 0; i < s->table->n_columns; i++)
        held += s->cols[i].bytes.cap;
    return held;
}

/* Empties b; with release, gives its memory back. */
static void kept_reset(firn_buf *b, bool release)
{
    if (release) {
        firn_buf_deinit(b);
        firn_buf_init(b, (size_t)UINT32_MAX);
    }
    firn_buf_reset(b);
}

void firn__pg_stage_clear(firn__pg_stage *s)
{
    /* The buffers keep their memory for the next stage, unless together they hold more than
     * 4 * STAGE_RAW_MAX: after a huge tuple, or when text columns took turns at large values
     * (each buffer alone may have grown to a stage's worth). */
    bool release = firn__pg_stage_held(s) > 4 * STAGE_RAW_MAX;
    for (size_t i = 0; i < s->table->n_columns; i++) {
        stage_col *c = &s->cols[i];
        if (c->nulls)
            memset(c->valid, 1, STAGE_ROWS);
        c->nulls = 0;
        if (c->kind == SK_BYTES)
            kept_reset(&c->bytes, release);
    }
    kept_reset(&s->raw, release);
    s->kept = 0;
    if (s->side)
        firn_batch_reset(s->side);
    s->rows = 0;
    memset(&s->stats, 0, sizeof(s->stats));
}

/* d / 10^-e for a base-10000 digit d (< 10000) whose last -e decimal digits lie beyond the
 * scale (e in -3..-1); UINT32_MAX when they are not all zero, or e < -3. A multiply and a shift
 * by a reciprocal exact for every d < 10000 (tests/unit/source_pg/test_pg_stage.c tries each),
 * no division: written as a switch of v % 10, v % 100 and v % 1000, GCC turned the cases into one
 * 64-bit `div` by a divisor loaded from a table, whose latency was ~13 % of the decoder's time on
 * taxi rows (numeric(15,2) columns reach it with e = -2 for every value with cents). */
static inline uint32_t frac_digits(uint32_t d, int e)
{
    static const uint32_t MUL[4] = {0, 52429, 5243, 8389}, POW[4] = {1, 10, 100, 1000};
    static const uint8_t SHIFT[4] = {0, 19, 19, 23};
    unsigned k = (unsigned)-e;
    if (k - 1 > 2)
        return UINT32_MAX;
    uint32_t q = (d * MUL[k]) >> SHIFT[k];
    return q * POW[k] == d ? q : UINT32_MAX;
}

/* numeric(p<=18, s) as its unscaled value; the checks and messages of decode_decimal in
 * pg_value.c. A base-10000 digit d times 10^e stays below 10^18 for e <= 14; for larger e, d *
 * 10^e >= 10^18 >= limit unless d < 10^(18-e). */
static firn_rc dec64(const stage_col *c,
                     const uint8_t *p,
                     size_t len,
                     int64_t *out,
                     bool *null,
                     firn_pg_decode_stats *stats,
                     firn_err *err)
{
    const firn_pg_type *t = c->type;
    if (len < 8)
        return firn__pg_bad_value(t, len, err, "short numeric header");
    int nd = (int16_t)firn__pg_be16(p);
    int weight = (int16_t)firn__pg_be16(p + 2);
    uint16_t sign = firn__pg_be16(p + 4);
    if (nd < 0 || (size_t)nd * 2 != len - 8 || (int16_t)firn__pg_be16(p + 6) < 0)
        return firn__pg_bad_value(t, len, err, "bad numeric header");
    if (sign != 0 && sign != NUMERIC_NEG && sign != NUMERIC_NAN && sign != NUMERIC_PINF &&
        sign != NUMERIC_NINF)
        return firn__pg_bad_value(t, len, err, "bad numeric sign");
    const uint8_t *dg = p + 8;
    for (int i = 0; i < nd; i++) { /* first, as decode_decimal: the same message */
        if (firn__pg_be16(dg + 2 * i) >= NBASE)
            return firn__pg_bad_value(t, len, err, "numeric digit out of range");
    }
    if (sign != 0 && sign != NUMERIC_NEG) {
        if (stats)
            stats->nan_to_null++;
        *null = true;
        return FIRN_OK;
    }
    uint64_t acc = 0;
    for (int i = 0; i < nd; i++) {
        uint32_t d = firn__pg_be16(dg + 2 * i);
        if (d == 0)
            continue;
        int e = 4 * (weight - i) + t->scale;
        if (e >= 0) {
            if (e >= t->precision || (e >= 15 && (int64_t)d >= POW10[18 - e]))
                return firn__pg_bad_value(t, len, err, "value exceeds the column precision");
            acc += (uint64_t)d * (uint64_t)POW10[e];
        } else {
            uint32_t q = frac_digits(d, e);
            if (q == UINT32_MAX)
                return firn__pg_bad_value(t, len, err,
                                          "more fractional digits than the column scale");
            acc += q;
        }
        if (acc >= (uint64_t)c->limit)
            return firn__pg_bad_value(t, len, err, "value exceeds the column precision");
    }
    *out = sign == NUMERIC_NEG ? -(int64_t)acc : (int64_t)acc;
    return FIRN_OK;
}

/* timestamp(tz): +-infinity to +-INT64_MAX, beyond the int64 microseconds since 1970 clamped
 * (counted), as decode_timestamp in pg_value.c. */
static int64_t ts_value(int64_t v, firn_pg_decode_stats *stats)
{
    if (v == INT64_MAX || v == INT64_MIN)
        return v == INT64_MAX ? INT64_MAX : -INT64_MAX;
    if (v > INT64_MAX - 1 - FIRN_PG_EPOCH_US) {
        if (stats)
            stats->clamped++;
        return INT64_MAX - 1;
    }
    return v + FIRN_PG_EPOCH_US;
}

static firn_rc date_value(const stage_col *c, const uint8_t *p, int32_t *out, firn_err *err)
{
    int32_t d = (int32_t)firn__pg_be32(p);
    if (d == INT32_MAX || d == INT32_MIN) {
        *out = d == INT32_MAX ? INT32_MAX : -INT32_MAX;
        return FIRN_OK;
    }
    int64_t days = (int64_t)d + FIRN_PG_EPOCH_DAYS;
    if (days >= INT32_MAX || days <= -INT32_MAX)
        return firn__pg_bad_value(c->type, 4, err, "date out of range");
    *out = (int32_t)days;
    return FIRN_OK;
}

/* Marks slot r of c null; its value slot is the caller's to zero. */
static inline void stage_null(stage_col *c, size_t r)
{
    c->valid[r] = 0;
    c->nulls++;
}

/* numeric(p<=18, s) in the form PostgreSQL sends for stored values (at most 4 base-10000
 * digits, each below 10000, at most 3 decimal digits beyond the scale), p[0..len) with len
 * 8..16 (the caller's test: no other length has at most 4 digits): the unscaled value, or
 * false to leave it to dec64, which gives the same value or the error for anything else (all
 * zero digits at an exponent this path does not take included). The digits d[0..nd) make acc =
 * sum d[i] * 10000^(nd-1-i), and the value is acc * 10^e with e = 4 * (weight - nd + 1) +
 * scale. Straight-line code per digit count: the loop's count tests and the carried "digit out
 * of range" flag cost more than the digits (most have 1-2). */
static inline bool dec64_fast(const stage_col *c, const uint8_t *p, uint32_t len, int64_t *out)
{
    uint32_t nd = firn__pg_be16(p), sign = firn__pg_be16(p + 4);
    FIRN_DASSERT(len >= 8 && len <= 16); /* so len == 8 + 2 * nd has nd <= 4 */
    if (len != 8 + 2 * nd || (sign != 0 && sign != NUMERIC_NEG) || (p[6] & 0x80))
        return false;
    uint32_t d0, d1, d2, d3;
    uint64_t acc;
    if (nd == 0) {
        *out = 0;
        return true;
    }
    d0 = firn__pg_be16(p + 8); /* the bytes after a value's are not ours to read */
    switch (nd) {
    case 1:
        if (d0 >= NBASE)
            return false;
        acc = d0;
        break;
    case 2:
        d1 = firn__pg_be16(p + 10);
        if (d0 >= NBASE || d1 >= NBASE)
            return false;
        acc = (uint64_t)d0 * NBASE + d1;
        break;
    case 3:
        d1 = firn__pg_be16(p + 10);
        d2 = firn__pg_be16(p + 12);
        if (d0 >= NBASE || d1 >= NBASE || d2 >= NBASE)
            return false;
        acc = ((uint64_t)d0 * NBASE + d1) * NBASE + d2;
        break;
    default:
        d1 = firn__pg_be16(p + 10);
        d2 = firn__pg_be16(p + 12);
        d3 = firn__pg_be16(p + 14);
        if (d0 >= NBASE || d1 >= NBASE || d2 >= NBASE || d3 >= NBASE)
            return false;
        acc = (((uint64_t)d0 * NBASE + d1) * NBASE + d2) * NBASE + d3;
        break;
    }
    int wd = (int16_t)firn__pg_be16(p + 2) - (int)nd;
    if (wd == c->frac_wd) { /* the digits beyond the scale of a stored form (e < 0) */
        uint64_t x = acc * c->frac_inv;
        acc = (x >> c->frac_k) | (x << (64 - c->frac_k));
        if (acc >= c->frac_lim)
            return false; /* not zeros beyond the scale, or beyond the limit */
    } else {
        int e = 4 * (wd + 1) + c->scale; /* e < 0 but another: not a stored form */
        if (e < 0 || e > 18 || __builtin_mul_overflow(acc, (uint64_t)POW10[e], &acc) ||
            acc >= (uint64_t)c->limit)
            return false;
    }
    *out = sign == NUMERIC_NEG ? -(int64_t)acc : (int64_t)acc;
    return true;
}

/* Decodes the numeric(p<=18,s) field v[0..n) (not a null) into slot r of c; NaN
 * becomes a null. A value whose bytes equal the last one of its length that the fast path
 * decoded in this column (fees, flags and zeros repeat from row to row: by bench/datagen.py's
 * distributions, 5 of the taxi table's 11 numeric columns repeat their previous value 80-100 %
 * of the time, and zeros take turns with other values) takes that value after two word
 * compares, instead of the digits and the scale checks. */
static inline firn_rc stage_dec64(stage_col *c,
                                  size_t r,
                                  const uint8_t *v,
                                  uint32_t n,
                                  firn_pg_decode_stats *stats,
                                  firn_err *err)
{
    int64_t *v64 = (int64_t *)(void *)c->vals;
    if (n - 8 <= 8) { /* the fast path's lengths, 8..16 (at most 4 digits) */
        uint64_t head, tail;
        memcpy(&head, v, 8);
        memcpy(&tail, v + n - 8, 8);
        if (head == c->seen_head[n - 8] && tail == c->seen_tail[n - 8]) {
            v64[r] = c->seen_value[n - 8]; /* the same bytes as an earlier value */
            return FIRN_OK;
        }
        if (dec64_fast(c, v, n, &v64[r])) {
            c->seen_head[n - 8] = head;
            c->seen_tail[n - 8] = tail;
            c->seen_value[n - 8] = v64[r];
            return FIRN_OK;
        }
    }
    v64[r] = 0;
    bool null = false;
    FIRN_TRY(dec64(c, v, n, &v64[r], &null, stats, err));
    if (null) { /* numeric NaN: a null, its slot zero as every null's */
        v64[r] = 0;
        stage_null(c, r);
    }
    return FIRN_OK;
}

/* Takes back what the first i fields of an incomplete tuple staged at row s->rows: the kept
 * fields (raw from raw_len on), nulls, and the counters (stats0: as before the tuple). */
static void
take_back(firn__pg_stage *s, size_t i, size_t raw_len, const firn_pg_decode_stats *stats0)
{
    const size_t r = s->rows;
    firn_buf_truncate(&s->raw, raw_len);
    s->stats = *stats0;
    for (size_t j = 0; j < i; j++) {
        stage_col *c = &s->cols[j];
        if (c->kind == SK_BYTES)
            firn_buf_truncate(&c->bytes, r ? c->ends[r - 1] : 0);
        if (!c->valid[r]) {
            c->valid[r] = 1;
            c->nulls--;
        }
    }
}

/* Stages the null field of column c at row r: a zero value slot marked null, an empty text
 * value, or (SK_GENERIC) its length word kept as sent, q pointing at it. */
static firn_rc stage_null_field(firn__pg_stage *s, stage_col *c, size_t r, const uint8_t *q)
{
    switch (c->kind) {
    case SK_BYTES:
        c->ends[r] = (uint32_t)c->bytes.len;
        break;
    case SK_GENERIC:
        s->field[(size_t)(c - s->cols) * STAGE_ROWS + r] = (uint32_t)s->raw.len;
        if (firn_buf_append(&s->raw, q, 4))
            return FIRN_ERR_TOO_LARGE;
        s->kept += 4;
        return FIRN_OK; /* decoded as a null at the flush */
    default:
        memset(c->vals + r * c->width, 0, c->width);
        break;
    }
    stage_null(c, r);
    return FIRN_OK;
}

/* The start of each case of firn__pg_stage_row's dispatch: the field's length word at q, its
 * value v[0..n), q moved past it. A null's length (UINT32_MAX) is beyond any tuple's bytes, so
 * the one bounds test sends nulls, negative lengths and a tuple not all here yet to odd_field;
 * fewer than 4 bytes left go to short_tuple. */
#define FIELD_HEAD()                                                                               \
    do {                                                                                           \
        if (__builtin_expect((size_t)(lim - q) < 4, 0))                                            \
            goto short_tuple;                                                                      \
        v = q + 4;                                                                                 \
        n = firn__pg_be32(q);                                                                      \
        if (__builtin_expect(n > (size_t)(lim - v), 0))                                            \
            goto odd_field;                                                                        \
        q = v + n;                                                                                 \
    } while (0)

firn_rc
firn__pg_stage_row(firn__pg_stage *s, const uint8_t *p, size_t len, size_t *used, firn_err *err)
{
    FIRN_ASSERT(s->rows < STAGE_ROWS && len >= 2 && s->kept < STAGE_RAW_MAX);
    *used = 0;
    const size_t r = s->rows, raw_len = s->raw.len, kept = s->kept;
    const firn_pg_decode_stats stats0 = s->stats;
    const uint8_t *q = p + 2, *const lim = p + len; /* q: the next field, <= lim throughout */
    const uint8_t *v;
    uint32_t n;
    stage_col *c = s->cols; /* the SK_END entry after the last column ends the loop */
    firn_rc rc = FIRN_OK;
    /* One switch per field, on the column's kind; its case reads the field's length word
     * (FIELD_HEAD), checks the length and decodes: no second dispatch, and no test for the last
     * column (SK_END). */
    for (;; c++) {
        int32_t *v32 = (int32_t *)(void *)c->vals;
        int64_t *v64 = (int64_t *)(void *)c->vals;
        switch (c->kind) {
        case SK_END:
            s->rows++;
            *used = (size_t)(q - p);
            return FIRN_OK;
        case SK_I16:
            FIELD_HEAD();
            if (n != 2)
                goto odd;
            v32[r] = (int16_t)firn__pg_be16(v);
            continue;
        case SK_I32:
        case SK_F32:
            FIELD_HEAD();
            if (n != 4)
                goto odd;
            v32[r] = (int32_t)firn__pg_be32(v);
            continue;
        case SK_I64:
        case SK_F64:
            FIELD_HEAD();
            if (n != 8)
                goto odd;
            v64[r] = (int64_t)firn__pg_be64(v);
            continue;
        case SK_OID:
            FIELD_HEAD();
            if (n != 4)
                goto odd;
            v64[r] = (int64_t)firn__pg_be32(v);
            continue;
        case SK_BOOL:
            FIELD_HEAD();
            if (n != 1)
                goto odd;
            c->vals[r] = v[0] != 0;
            continue;
        case SK_DATE:
            FIELD_HEAD();
            if (n != 4)
                goto odd;
            rc = date_value(c, v, &v32[r], err);
            break;
        case SK_TS:
            FIELD_HEAD();
            if (n != 8)
                goto odd;
            v64[r] = ts_value((int64_t)firn__pg_be64(v), &s->stats);
            continue;
        case SK_DEC64:
            FIELD_HEAD();
            rc = stage_dec64(c, r, v, n, &s->stats, err);
            break;
        case SK_BYTES: /* < STAGE_RAW_MAX + a tuple's < 2 GiB */
            FIELD_HEAD();
            if (firn_buf_append_fast(&c->bytes, v, n))
                rc = firn_err_set(err, FIRN_ERR_TOO_LARGE, "staged COPY fields exceed 4 GiB");
            c->ends[r] = (uint32_t)c->bytes.len;
            s->kept += n;
            break;
        case SK_GENERIC:
            FIELD_HEAD();
            s->field[(size_t)(c - s->cols) * STAGE_ROWS + r] = (uint32_t)s->raw.len;
            if (firn_buf_append(&s->raw, v - 4, 4 + (size_t)n))
                rc = firn_err_set(err, FIRN_ERR_TOO_LARGE, "staged COPY fields exceed 4 GiB");
            s->kept += 4 + (size_t)n;
            break;
        default: /* kind_of gives one of the above: no range check before the jump */
            __builtin_unreachable();
        }
        if (rc)
            goto fail;
        continue;
    odd_field: /* a null, a negative length, or not all here yet */
        if (n == UINT32_MAX) {
            q = v;
            if (stage_null_field(s, c, r, v - 4) == FIRN_OK)
                continue;
            rc = firn_err_set(err, FIRN_ERR_TOO_LARGE, "staged COPY fields exceed 4 GiB");
            goto fail;
        }
        if (n <= INT32_MAX)
            goto short_tuple;
        firn__pg_stage_clear(s);
        return firn_err_set(err, FIRN_ERR_PARSE, "negative COPY field length %d", (int32_t)n);
    odd: /* a length that is not the type's (a null went to odd_field) */
        memset(c->vals + r * c->width, 0, c->width);
        rc = firn__pg_bad_value(c->type, n, err, "wrong length");
        goto fail;
    }
short_tuple: /* not all here yet: staged again, whole, by a later call */
    take_back(s, (size_t)(c - s->cols), raw_len, &stats0);
    s->kept = kept;
    return FIRN_OK;
fail:
    if (rc == FIRN_ERR_PARSE)
        firn_err_context(err, "while decoding column \"%s\"", s->table->columns[c - s->cols].name);
    firn__pg_stage_clear(s);
    return rc;
}

#undef FIELD_HEAD

/* Decodes a column without a staged decoder into its side batch column. */
static firn_rc decode_generic(
    firn__pg_stage *s, size_t i, const uint32_t *at, firn_pg_decode_stats *stats, firn_err *err)
{
    const stage_col *c = &s->cols[i];
    firn_column *side = firn_batch_column(s->side, i);
    for (size_t r = 0; r < s->rows; r++) {
        const uint8_t *q = s->raw.data + at[r];
        int32_t n = (int32_t)firn__pg_be32(q);
        if (n < 0)
            firn_column_append_null(side);
        else
            FIRN_TRY(firn_pg_value_decode(c->type, q + 4, (size_t)n, side, stats, err));
    }
    return FIRN_OK;
}

/* Appends the decoded values of column i to out. */
static void flush_column(firn__pg_stage *s, size_t i, firn_column *out)
{
    stage_col *c = &s->cols[i];
    size_t n = s->rows;
    if (c->kind == SK_GENERIC) {
        const firn_column *side = firn_batch_column(s->side, i);
        for (size_t r = 0; r < n; r++)
            firn_column_append_from(out, side, r);
        return;
    }
    if (c->kind == SK_BYTES) {
        firn_column_append_bytes_n(out, n, c->bytes.data, c->ends, c->nulls ? c->valid : NULL);
        return;
    }
    void *dst = firn_column_append_fixed_n(out, n, c->nulls ? c->valid : NULL);
    memcpy(dst, c->vals, n * c->width);
}

firn_rc firn__pg_stage_flush(firn__pg_stage *s,
                             firn_batch *b,
                             firn_column *const *cols,
                             uint64_t lsn,
                             firn_pg_decode_stats *stats,
                             firn_err *err)
{
    if (s->rows == 0)
        return FIRN_OK;
    for (size_t i = 0; i < s->table->n_columns; i++) {
        if (s->cols[i].kind != SK_GENERIC)
            continue;
        firn_rc rc = decode_generic(s, i, s->field + i * STAGE_ROWS, &s->stats, err);
        if (rc) { /* the stage's counters go with its rows */
            firn_err_context(err, "while decoding column \"%s\"", s->table->columns[i].name);
            firn__pg_stage_clear(s);
            return rc;
        }
    }
    for (size_t i = 0; i < s->table->n_columns; i++)
        flush_column(s, i, cols[i]);
    stats->nan_to_null += s->stats.nan_to_null;
    stats->clamped += s->stats.clamped;
    stats->array_flattened += s->stats.array_flattened;
    stats->array_lbound_lost += s->stats.array_lbound_lost;
    size_t n = s->rows;
    firn__pg_stage_clear(s);
    return firn_batch_end_rows(b, n, FIRN_OP_READ, lsn, err);
}
