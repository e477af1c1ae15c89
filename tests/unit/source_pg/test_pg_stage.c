/* SPDX-License-Identifier: Apache-2.0 */
/* The staged binary COPY decoder (pg_stage.c: per-column decoders, bulk appends) against the
 * per-value decoder firn_pg_value_decode: a generated stream of the fuzz table fz (every fast
 * kind plus generic ones) with edge values and nulls over several stages must give equal
 * columns, positions and counters; bad values fail alike. */
#include "../../../fuzz/pg_copy.c"
#include "../../../src/source/pg/pg_int.h"
#include "t.h"

#include <stdio.h>
#include <stdlib.h>

#define ROWS 700

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void put16(firn_buf *b, uint16_t v)
{
    T_OK(firn_wr_be16(b, v));
}

static void put32(firn_buf *b, uint32_t v)
{
    T_OK(firn_wr_be32(b, v));
}

static void put64(firn_buf *b, uint64_t v)
{
    T_OK(firn_wr_be64(b, v));
}

/* numeric_send of unscaled value v at scale s: base-10000 groups around the decimal point,
 * leading and trailing zero groups kept (the decoder must not care). */
static void put_numeric(firn_buf *b, int64_t v, int s, uint16_t special)
{
    uint64_t mag = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    uint64_t p10 = 1;
    for (int i = 0; i < s; i++)
        p10 *= 10;
    uint64_t ip = mag / p10, fp = mag % p10;
    int fgroups = (s + 3) / 4;
    for (int i = s; i < 4 * fgroups; i++)
        fp *= 10;
    uint16_t ig[8], fg[8];
    int ni = 0;
    for (; ip > 0; ip /= 10000)
        ig[ni++] = (uint16_t)(ip % 10000);
    for (int i = fgroups - 1; i >= 0; i--, fp /= 10000)
        fg[i] = (uint16_t)(fp % 10000);
    int nd = special ? 0 : ni + fgroups;
    put32(b, (uint32_t)(8 + 2 * nd));
    put16(b, (uint16_t)nd);
    put16(b, (uint16_t)(ni - 1));
    put16(b, special ? special : v < 0 ? 0x4000 : 0);
    put16(b, (uint16_t)s);
    for (int i = 0; !special && i < ni; i++)
        put16(b, ig[ni - 1 - i]);
    for (int i = 0; !special && i < fgroups; i++)
        put16(b, fg[i]);
}

static void put_bytes(firn_buf *b, const void *p, size_t n)
{
    put32(b, (uint32_t)n);
    T_OK(firn_buf_append(b, p, n));
}

static void put_fixed(firn_buf *b, uint64_t v, size_t n)
{
    put32(b, (uint32_t)n);
    for (size_t i = n; i-- > 0;)
        T_OK(firn_wr_u8(b, (uint8_t)(v >> (8 * i))));
}

static int64_t pick(const int64_t *edges, size_t n_edges, int64_t mod)
{
    uint64_t r = next_rand();
    if (r % 4 == 0)
        return edges[(r >> 8) % n_edges];
    return (int64_t)((r >> 8) % (uint64_t)mod) - mod / 2;
}

static void put_array(firn_buf *b)
{
    put32(b, 12 + 8 + 2 * 8);
    put32(b, 1);
    put32(b, 0);
    put32(b, 23);
    put32(b, 2);
    put32(b, 1);
    put_fixed(b, next_rand(), 4);
    put_fixed(b, next_rand(), 4);
}

/* One value of column i (a null one time in seven, a few kinds never null). */
static void put_value(firn_buf *b, size_t i)
{
    static const int64_t I32[] = {0, 1, -1, INT32_MAX, INT32_MIN};
    static const int64_t I64[] = {0,
                                  INT64_MAX,
                                  INT64_MIN,
                                  INT64_MAX - 1,
                                  INT64_MIN + 1,
                                  INT64_MAX - 946684800000000 - 1,
                                  INT64_MAX - 946684800000000};
    static const int64_t DEC[] = {0, 9999999999, -9999999999, 1, -1, 100, 10000};
    static const int64_t DATE[] = {INT32_MAX, INT32_MIN, 0, -10957, 2147483647 - 10958};
    if (next_rand() % 7 == 0 && COLS[i].kind != FIRN_PG_KIND_ARRAY) {
        put32(b, 0xffffffffu);
        return;
    }
    char text[24];
    size_t tl = next_rand() % sizeof(text);
    for (size_t k = 0; k < tl; k++)
        text[k] = (char)('a' + next_rand() % 26);
    switch (COLS[i].kind) {
    case FIRN_PG_KIND_INT2:
        put_fixed(b, (uint64_t)pick(I32, 5, 1 << 16), 2);
        return;
    case FIRN_PG_KIND_INT4:
    case FIRN_PG_KIND_FLOAT4:
        put_fixed(b, (uint64_t)pick(I32, 5, INT64_C(1) << 32), 4);
        return;
    case FIRN_PG_KIND_OID:
        put_fixed(b, next_rand(), 4);
        return;
    case FIRN_PG_KIND_BOOL:
        put_fixed(b, next_rand() % 3, 1);
        return;
    case FIRN_PG_KIND_DATE:
        put_fixed(b, (uint64_t)pick(DATE, 5, 1 << 24), 4);
        return;
    case FIRN_PG_KIND_INT8:
    case FIRN_PG_KIND_FLOAT8:
    case FIRN_PG_KIND_TIME:
    case FIRN_PG_KIND_MONEY:
    case FIRN_PG_KIND_TIMESTAMP:
    case FIRN_PG_KIND_TIMESTAMPTZ:
        put_fixed(b, (uint64_t)pick(I64, 7, INT64_C(1) << 62), 8);
        return;
    case FIRN_PG_KIND_DECIMAL:
        if (next_rand() % 50 == 0)
            put_numeric(b, 0, 0, 0xC000); /* NaN */
        else
            put_numeric(b, pick(DEC, 7, 19999999999), COLS[i].scale, 0);
        return;
    case FIRN_PG_KIND_NUMSTR:
        put_numeric(b, pick(DEC, 7, INT64_C(1) << 50), 5, 0);
        return;
    case FIRN_PG_KIND_TEXT:
    case FIRN_PG_KIND_BYTEA:
        put_bytes(b, text, tl);
        return;
    case FIRN_PG_KIND_JSONB:
        put_bytes(b, "\001{}", 3);
        return;
    case FIRN_PG_KIND_UUID:
    case FIRN_PG_KIND_INTERVAL:
        put32(b, 16);
        put64(b, next_rand());
        put64(b, next_rand() & 0x7fffffffffffffffull);
        return;
    case FIRN_PG_KIND_ARRAY:
        if (i == 13)
            put_array(b);
        else
            put32(b, 0xffffffffu);
        return;
    }
}

/* The columns of fz in the stream (all, or those of the table FAST). */
static size_t SEL[N_COLS];
static size_t N_SEL;

static void select_all(void)
{
    for (N_SEL = 0; N_SEL < N_COLS; N_SEL++)
        SEL[N_SEL] = N_SEL;
}

static void make_stream(firn_buf *b)
{
    T_OK(firn_buf_append(b, "PGCOPY\n\377\r\n\0", 11));
    put32(b, 0);
    put32(b, 0);
    for (size_t r = 0; r < ROWS; r++) {
        put16(b, (uint16_t)N_SEL);
        for (size_t k = 0; k < N_SEL; k++)
            put_value(b, SEL[k]);
    }
    put16(b, 0xffff);
}

/* The reference: each value of the tuple at *p through firn_pg_value_decode, row by row. */
static void reference_row(firn_batch *b, const uint8_t **p, uint64_t lsn, firn_pg_decode_stats *st)
{
    const uint8_t *q = *p + 2;
    for (size_t i = 0; i < N_SEL; i++) {
        int32_t n = (int32_t)(((uint32_t)q[0] << 24) | ((uint32_t)q[1] << 16) | (q[2] << 8) | q[3]);
        q += 4;
        firn_column *c = firn_batch_column(b, i);
        if (n == -1) {
            firn_column_append_null(c);
            continue;
        }
        firn_err err = {0};
        T_OK_ERR(firn_pg_value_decode(&TYPES[SEL[i]], q, (size_t)n, c, st, &err), &err);
        q += n;
    }
    T_OK(firn_batch_end_row(b, FIRN_OP_READ, lsn, NULL));
    *p = q;
}

/* Column equality: slots, validity, values, offsets, bytes and children. */
static void same_column(const firn_column *a, const firn_column *b)
{
    size_t n = firn_column_length(a);
    T_EQ_UINT(firn_column_length(b), n);
    T_EQ_UINT(firn_column_null_count(b), firn_column_null_count(a));
    for (size_t r = 0; r < n; r++)
        T_EQ_INT(firn_column_is_valid(a, r), firn_column_is_valid(b, r));
    size_t w = firn_type_value_size(firn_column_field(a));
    if (w && n)
        T_TRUE(memcmp(firn_column_values(a), firn_column_values(b), n * w) == 0);
    const uint32_t *oa = firn_column_offsets(a), *ob = firn_column_offsets(b);
    if (oa && n) {
        T_TRUE(memcmp(oa, ob, (n + 1) * sizeof(uint32_t)) == 0);
        if (!firn_column_children(a))
            T_TRUE(memcmp(firn_column_data(a), firn_column_data(b), oa[n]) == 0);
    }
    for (size_t k = 0; k < firn_column_children(a); k++)
        same_column(firn_column_child((firn_column *)a, k), firn_column_child((firn_column *)b, k));
}

/* Feeds s to d in steps of step bytes (0: as much as the room takes) through
 * firn_pg_copy_room and firn_pg_copy_feed_room: a step ends anywhere, inside a tuple or after
 * one and into the next, whose start must wait in the buffer. */
static void feed_through_room(firn_pg_copy *d, const firn_buf *s, size_t step, firn_err *err)
{
    for (size_t pos = 0; pos < s->len;) {
        size_t room = 0;
        uint8_t *at = firn_pg_copy_room(d, &room);
        T_TRUE(at != NULL && room >= FIRN_PG_COPY_ROOM);
        size_t n = s->len - pos;
        n = step && step < n ? step : n;
        n = n < room ? n : room;
        memcpy(at, s->data + pos, n);
        T_OK_ERR(firn_pg_copy_feed_room(d, n, 5, err), err);
        pos += n;
    }
}

/* Decodes the stream of the SEL columns of fz as table t, whole and split, fed as given and
 * through the decoder's room, and compares with the per-value decoder. */
static void check_staged(const firn_pg_table *t)
{
    firn_buf s;
    firn_buf_init(&s, (size_t)1 << 30);
    make_stream(&s);
    firn_batch *want = firn_batch_new(t->schema);
    firn_pg_decode_stats want_st = {0};
    const uint8_t *p = s.data + 19;
    for (size_t r = 0; r < ROWS; r++)
        reference_row(want, &p, 5, &want_st);
    const size_t steps[] = {s.len, 1, 13, 0, 1, 13, 1000};
    for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
        firn_batch *got = firn_batch_new(t->schema);
        firn_pg_copy *d = firn_pg_copy_new(t, got);
        firn_err err = {0};
        for (size_t pos = 0; k < 3 && pos < s.len; pos += steps[k]) {
            size_t n = s.len - pos < steps[k] ? s.len - pos : steps[k];
            T_OK_ERR(firn_pg_copy_feed(d, s.data + pos, n, 5, &err), &err);
        }
        if (k >= 3)
            feed_through_room(d, &s, steps[k], &err);
        T_OK_ERR(firn_pg_copy_finish(d, &err), &err);
        T_EQ_UINT(firn_batch_rows(got), ROWS);
        for (size_t i = 0; i < N_SEL; i++)
            same_column(firn_batch_column(want, i), firn_batch_column(got, i));
        const firn_pg_decode_stats *st = firn_pg_copy_stats(d);
        T_EQ_UINT(st->nan_to_null, want_st.nan_to_null);
        T_EQ_UINT(st->clamped, want_st.clamped);
        T_TRUE(st->nan_to_null > 0 && st->clamped > 0);
        firn_pg_copy_free(d);
        firn_batch_free(got);
    }
    firn_batch_free(want);
    firn_buf_deinit(&s);
}

T_TEST(staged_equals_per_value_decoding)
{
    build_table();
    select_all();
    check_staged(&TABLE);
}

/* Only columns with staged decoders: no side batch, so a tuple split across feeds is staged
 * column by column and taken back (values, nulls, bytes, counters) until it is complete. */
T_TEST(split_tuples_taken_back_without_side_columns)
{
    build_table();
    static const size_t FAST[] = {0, 1, 2, 3, 4, 7, 8, 10, 11, 18, 19, 20, 21};
    firn_pg_table fast = TABLE;
    firn_pg_column cols[N_COLS];
    fast.schema = firn_field_new(0, "schema", FIRN_TYPE_STRUCT, true);
    N_SEL = sizeof(FAST) / sizeof(FAST[0]);
    for (size_t k = 0; k < N_SEL; k++) {
        SEL[k] = FAST[k];
        cols[k] = COLUMNS[FAST[k]];
        firn_field_add(fast.schema, firn_field_clone(TABLE.schema->children[FAST[k]]));
    }
    fast.columns = cols;
    fast.n_columns = N_SEL;
    check_staged(&fast);
    firn_field_free(fast.schema);
    select_all();
}

T_TEST(positions_follow_each_feed)
{
    build_table();
    select_all();
    firn_buf s;
    firn_buf_init(&s, (size_t)1 << 30);
    make_stream(&s);
    firn_batch *got = firn_batch_new(TABLE.schema);
    firn_pg_copy *d = firn_pg_copy_new(&TABLE, got);
    firn_err err = {0};
    T_OK_ERR(firn_pg_copy_feed(d, s.data, 19, 1, &err), &err);
    const uint8_t *p = s.data + 19;
    firn_batch *ref = firn_batch_new(TABLE.schema);
    firn_pg_decode_stats st = {0};
    for (size_t r = 0; r < ROWS; r++) {
        const uint8_t *start = p;
        reference_row(ref, &p, 0, &st);
        T_OK_ERR(firn_pg_copy_feed(d, start, (size_t)(p - start), r / 100, &err), &err);
        if (r == 450) { /* a flush in the middle of a stage */
            T_OK_ERR(firn_pg_copy_flush(d, &err), &err);
            T_EQ_UINT(firn_batch_rows(got), 451);
        }
    }
    T_OK_ERR(firn_pg_copy_feed(d, p, 2, 99, &err), &err);
    T_OK_ERR(firn_pg_copy_finish(d, &err), &err);
    T_EQ_UINT(firn_batch_rows(got), ROWS);
    for (size_t r = 0; r < ROWS; r++)
        T_EQ_UINT(firn_batch_lsn(got, r), r / 100);
    firn_pg_copy_free(d);
    firn_batch_free(got);
    firn_batch_free(ref);
    firn_buf_deinit(&s);
}

/* A one-row stream whose column col holds the value bytes v[0..n). */
static firn_rc decode_bad(size_t col, const uint8_t *v, size_t n, firn_err *err)
{
    firn_buf s;
    firn_buf_init(&s, (size_t)1 << 20);
    T_OK(firn_buf_append(&s, "PGCOPY\n\377\r\n\0", 11));
    put32(&s, 0);
    put32(&s, 0);
    put16(&s, (uint16_t)N_COLS);
    for (size_t i = 0; i < N_COLS; i++) {
        if (i == col)
            put_bytes(&s, v, n);
        else
            put32(&s, 0xffffffffu);
    }
    put16(&s, 0xffff);
    firn_batch *b = firn_batch_new(TABLE.schema);
    firn_pg_copy *d = firn_pg_copy_new(&TABLE, b);
    firn_rc rc = firn_pg_copy_feed(d, s.data, s.len, 0, err);
    if (!rc)
        rc = firn_pg_copy_finish(d, err);
    firn_pg_copy_free(d);
    firn_batch_free(b);
    firn_buf_deinit(&s);
    return rc;
}

/* The same bad value through firn_pg_value_decode: the message the staged path must give. */
static void same_error(size_t col, const uint8_t *v, size_t n)
{
    firn_err want = {0}, got = {0};
    firn_batch *b = firn_batch_new(TABLE.schema);
    T_EQ_INT(firn_pg_value_decode(&TYPES[col], v, n, firn_batch_column(b, col), NULL, &want),
             FIRN_ERR_PARSE);
    firn_batch_free(b);
    T_EQ_INT(decode_bad(col, v, n, &got), FIRN_ERR_PARSE);
    T_TRUE(strstr(got.msg, want.msg) != NULL);
}

T_TEST(bad_values_fail_as_per_value_decoding)
{
    build_table();
    static const uint8_t short4[3] = {0, 0, 1};
    same_error(0, short4, 3);  /* int4 of 3 bytes */
    same_error(21, short4, 3); /* int2 of 3 bytes */
    same_error(10, short4, 3); /* date */
    static const uint8_t date_far[4] = {0x7f, 0xff, 0xff, 0xf0};
    same_error(10, date_far, 4);
    /* numeric(10,2): 10^8 needs 11 digits; 0.001 has 3 fraction digits; digit 10000 */
    static const uint8_t big[10] = {0, 1, 0, 2, 0, 0, 0, 0, 0, 1};
    same_error(4, big, 10);
    static const uint8_t frac[10] = {0, 1, 0xff, 0xff, 0, 0, 0, 3, 0, 10};
    same_error(4, frac, 10);
    static const uint8_t digit[10] = {0, 1, 0, 0, 0, 0, 0, 0, 0x27, 0x10};
    same_error(4, digit, 10);
    static const uint8_t sign[8] = {0, 0, 0, 0, 0x12, 0x34, 0, 0};
    same_error(4, sign, 8);
    static const uint8_t hdr[9] = {0, 1, 0, 0, 0, 0, 0, 0, 0};
    same_error(4, hdr, 9);
}

/* Decodes the one-row stream of the numeric bytes v[0..n) for column type t through the staged
 * decoder (the stage's fast path and dec64) and through firn_pg_value_decode: the same value,
 * null or error message. padded: a bigint column follows, so that the numeric is not the end of
 * the tuple (its digits are followed by bytes that look like digits: the decoder must stop at
 * the value's length). */
static void same_numeric_in(firn_pg_type *t, const uint8_t *v, size_t n, bool padded)
{
    firn_pg_type bigint = {.kind = FIRN_PG_KIND_INT8, .name = (char *)"int8"};
    firn_pg_column col[2] = {{.name = (char *)"n", .type = t, .field_id = 1},
                             {.name = (char *)"pad", .type = &bigint, .field_id = 2}};
    int32_t next_id = 3;
    firn_pg_table tab = {.columns = col, .n_columns = padded ? 2 : 1, .name = (char *)"num"};
    tab.qualified = (char *)"\"public\".\"num\"";
    tab.schema = firn_field_new(0, "schema", FIRN_TYPE_STRUCT, true);
    firn_field_add(tab.schema, firn_pg_type_field(t, 1, "n", false, &next_id));
    if (padded)
        firn_field_add(tab.schema, firn_pg_type_field(col[1].type, 2, "pad", false, &next_id));
    firn_buf s;
    firn_buf_init(&s, (size_t)1 << 20);
    T_OK(firn_buf_append(&s, "PGCOPY\n\377\r\n\0", 11));
    put32(&s, 0);
    put32(&s, 0);
    put16(&s, padded ? 2 : 1);
    put_bytes(&s, v, n);
    if (padded) {
        put32(&s, 8);
        put64(&s, 0x0777077707770777ull); /* four valid base-10000 digits */
    }
    put16(&s, 0xffff);
    firn_batch *want = firn_batch_new(tab.schema), *got = firn_batch_new(tab.schema);
    firn_err we = {0}, ge = {0};
    firn_pg_decode_stats wst = {0};
    firn_rc wrc = firn_pg_value_decode(t, v, n, firn_batch_column(want, 0), &wst, &we);
    if (padded)
        firn_column_append_i64(firn_batch_column(want, 1), 0x0777077707770777ll);
    firn_pg_copy *d = firn_pg_copy_new(&tab, got);
    firn_rc grc = firn_pg_copy_feed(d, s.data, s.len, 0, &ge);
    if (!grc)
        grc = firn_pg_copy_finish(d, &ge);
    T_EQ_INT(grc, wrc);
    if (wrc) {
        if (!strstr(ge.msg, we.msg))
            fprintf(stderr, "staged: %s\nper value: %s\n", ge.msg, we.msg);
        T_TRUE(strstr(ge.msg, we.msg) != NULL);
    } else {
        T_OK(firn_batch_end_row(want, FIRN_OP_READ, 0, NULL));
        same_column(firn_batch_column(want, 0), firn_batch_column(got, 0));
        T_EQ_UINT(firn_pg_copy_stats(d)->nan_to_null, wst.nan_to_null);
    }
    firn_pg_copy_free(d);
    firn_batch_free(want);
    firn_batch_free(got);
    firn_buf_deinit(&s);
    firn_field_free(tab.schema);
}

static void same_numeric(firn_pg_type *t, const uint8_t *v, size_t n)
{
    same_numeric_in(t, v, n, false);
    same_numeric_in(t, v, n, true);
}

/* numeric(p<=18,s) has a fast path for the form PostgreSQL stores; it must agree with the
 * per-value decoder on every input: stored forms of values up to the column's limit, leading
 * and trailing zero digits, digits of 10000 and more, weights far out, NaN and infinities,
 * lengths that do not match the header. */
T_TEST(numeric_fast_path_equals_per_value_decoding)
{
    static const uint16_t SIGNS[] = {0, 0x4000, 0xC000, 0xD000, 0xF000, 0x1234};
    for (int32_t prec = 1; prec <= 18; prec++) {
        for (int32_t scale = 0; scale <= prec; scale++) {
            firn_pg_type t = {.kind = FIRN_PG_KIND_DECIMAL, .precision = prec, .scale = scale};
            t.name = (char *)"numeric";
            int64_t limit = 1;
            for (int32_t k = 0; k < prec; k++)
                limit *= 10;
            /* digits beyond the scale, sent with their own scale: values to refuse */
            static const int64_t FRACTIONS[] = {16, 128, 1024, 6, 32, 2048, 65536, 96};
            for (size_t k = 0; k < sizeof(FRACTIONS) / sizeof(FRACTIONS[0]); k++) {
                for (int more = 1; more <= 4 && scale + more <= 18; more++) {
                    firn_buf b;
                    firn_buf_init(&b, 1024);
                    put_numeric(&b, FRACTIONS[k], scale + more, 0);
                    same_numeric(&t, b.data + 4, b.len - 4);
                    firn_buf_deinit(&b);
                }
            }
            for (int k = 0; k < 60; k++) {
                firn_buf b;
                firn_buf_init(&b, 1024);
                uint64_t r = next_rand();
                int64_t v = (int64_t)(r % (uint64_t)(2 * limit + 1)) - limit; /* +-limit: edges */
                if (k < 4)
                    v = k == 0 ? limit - 1 : k == 1 ? 1 - limit : k == 2 ? limit : 0;
                put_numeric(&b, v, scale, 0); /* a stored form, trailing zero groups kept */
                same_numeric(&t, b.data + 4, b.len - 4);
                firn_buf_reset(&b);
                uint16_t nd = (uint16_t)(next_rand() % 7);
                put16(&b, nd);
                put16(&b, (uint16_t)((int)(next_rand() % 13) - 6));
                put16(&b, next_rand() % 8 ? SIGNS[next_rand() % 2] : SIGNS[next_rand() % 6]);
                put16(&b, (uint16_t)(next_rand() % 64 ? next_rand() % 20 : 0x8000));
                for (uint16_t i = 0; i < nd; i++) {
                    uint64_t x = next_rand();
                    put16(&b, (uint16_t)(x % 16 == 0   ? 0
                                         : x % 32 == 1 ? 10000 + x % 60000
                                                       : x % 10000));
                }
                size_t n = b.len;
                if (next_rand() % 32 == 0)
                    n -= n > 0 ? 1 : 0; /* a length that does not match the digits */
                same_numeric(&t, b.data, n);
                firn_buf_deinit(&b);
            }
        }
    }
}

/* A numeric whose last base-10000 digit holds digits beyond the scale (scales 1-3 of a
 * numeric(18,s): one fractional digit; 5-7: two): every such digit 0..9999, behind one integer
 * digit (the fast path) and behind leading zero digits (the general path), must decode as the
 * per-value decoder does, exact when the digits beyond the scale are zeros, refused otherwise. */
T_TEST(numeric_last_digit_beyond_scale_every_value)
{
    static const int32_t SCALES[] = {1, 2, 3, 5, 6, 7};
    for (size_t si = 0; si < sizeof(SCALES) / sizeof(SCALES[0]); si++) {
        int32_t scale = SCALES[si];
        uint16_t groups = scale < 4 ? 1 : 2; /* fractional base-10000 digits */
        firn_pg_type t = {.kind = FIRN_PG_KIND_DECIMAL, .precision = 18, .scale = scale};
        t.name = (char *)"numeric";
        for (uint16_t lead = 0; lead <= 3; lead += 3) {
            for (uint32_t d = 0; d < 10000; d++) {
                firn_buf b;
                firn_buf_init(&b, 64);
                put16(&b, (uint16_t)(lead + 1 + groups)); /* ndigits */
                put16(&b, (uint16_t)lead);                /* weight: the integer digit is 10000^0 */
                put16(&b, d % 2 ? 0x4000 : 0);            /* sign */
                put16(&b, (uint16_t)scale);               /* dscale */
                for (uint16_t i = 0; i < lead; i++)       /* leading zero digits */
                    put16(&b, 0);
                put16(&b, 7);
                if (groups == 2)
                    put16(&b, 1234);
                put16(&b, (uint16_t)d);
                same_numeric(&t, b.data, b.len);
                firn_buf_deinit(&b);
            }
        }
    }
}

/* Raw numeric bytes: nd digits d after a header (weight w, sign, dscale), as numeric_send. */
static size_t raw_numeric(
    uint8_t *out, uint16_t w, uint16_t sign, uint16_t dscale, const uint16_t *d, uint16_t nd)
{
    uint16_t h[4] = {nd, w, sign, dscale};
    for (int i = 0; i < 4; i++) {
        out[2 * i] = (uint8_t)(h[i] >> 8);
        out[2 * i + 1] = (uint8_t)h[i];
    }
    for (uint16_t i = 0; i < nd; i++) {
        out[8 + 2 * i] = (uint8_t)(d[i] >> 8);
        out[9 + 2 * i] = (uint8_t)d[i];
    }
    return 8 + 2 * (size_t)nd;
}

/* The fast path divides a stored value's digits by 10^k (k = 1..3 digits beyond the scale) with
 * a multiply by an inverse and a rotate: for 2 and 4 digits at that exponent, the last digit
 * every value 0..9999 behind leading digits 0, 1 and 9999 (past a numeric(15,s)'s limit), both
 * signs, must decode as the per-value decoder does: exact when 10^k divides, refused otherwise. */
T_TEST(numeric_exact_division_every_last_digit)
{
    static const int32_t SCALES[] = {1, 2, 3};
    static const uint16_t LEAD[] = {0, 1, 9999};
    for (size_t si = 0; si < sizeof(SCALES) / sizeof(SCALES[0]); si++) {
        for (int32_t prec = 15; prec <= 18; prec += 3) {
            firn_pg_type t = {.kind = FIRN_PG_KIND_DECIMAL, .precision = prec, .scale = SCALES[si]};
            t.name = (char *)"numeric";
            for (uint16_t nd = 2; nd <= 4; nd += 2) {
                for (uint32_t d = 0; d < 10000; d++) {
                    uint16_t dig[4];
                    for (uint16_t i = 0; i + 1 < nd; i++)
                        dig[i] = LEAD[(d + i) % 3];
                    dig[nd - 1] = (uint16_t)d;
                    uint8_t v[16];
                    size_t n = raw_numeric(v, (uint16_t)(nd - 2), d % 2 ? 0x4000 : 0,
                                           (uint16_t)SCALES[si], dig, nd);
                    same_numeric_in(&t, v, n, false);
                }
            }
        }
    }
}

/* Decodes one row per value vals[i][0..lens[i]) of a numeric column of type t, through the
 * staged decoder (so that each value meets what the values before it left in the column's
 * repeat cache) and through firn_pg_value_decode: the same values, or the same error at the
 * first value the per-value decoder refuses. */
static void
same_numeric_rows(firn_pg_type *t, const uint8_t (*vals)[16], const size_t *lens, size_t nv)
{
    firn_pg_column col = {.name = (char *)"n", .type = t, .field_id = 1};
    int32_t next_id = 2;
    firn_pg_table tab = {.columns = &col, .n_columns = 1, .name = (char *)"num"};
    tab.qualified = (char *)"\"public\".\"num\"";
    tab.schema = firn_field_new(0, "schema", FIRN_TYPE_STRUCT, true);
    firn_field_add(tab.schema, firn_pg_type_field(t, 1, "n", false, &next_id));
    firn_buf s;
    firn_buf_init(&s, (size_t)1 << 20);
    T_OK(firn_buf_append(&s, "PGCOPY\n\377\r\n\0", 11));
    put32(&s, 0);
    put32(&s, 0);
    firn_batch *want = firn_batch_new(tab.schema), *got = firn_batch_new(tab.schema);
    firn_err we = {0}, ge = {0};
    firn_pg_decode_stats wst = {0};
    firn_rc wrc = FIRN_OK;
    for (size_t i = 0; i < nv && !wrc; i++) {
        put16(&s, 1);
        put_bytes(&s, vals[i], lens[i]);
        wrc = firn_pg_value_decode(t, vals[i], lens[i], firn_batch_column(want, 0), &wst, &we);
        if (!wrc)
            T_OK(firn_batch_end_row(want, FIRN_OP_READ, 0, NULL));
    }
    put16(&s, 0xffff);
    firn_pg_copy *d = firn_pg_copy_new(&tab, got);
    firn_rc grc = firn_pg_copy_feed(d, s.data, s.len, 0, &ge);
    if (!grc)
        grc = firn_pg_copy_finish(d, &ge);
    T_EQ_INT(grc, wrc);
    if (wrc)
        T_TRUE(strstr(ge.msg, we.msg) != NULL);
    else
        same_column(firn_batch_column(want, 0), firn_batch_column(got, 0));
    firn_pg_copy_free(d);
    firn_batch_free(want);
    firn_batch_free(got);
    firn_buf_deinit(&s);
    firn_field_free(tab.schema);
}

/* The repeat cache holds one value per length 8..16: a field of another length whose first and
 * last 8 bytes equal a cached value's (its digit count then does not match its length) must
 * take dec64's error, not the cached value; so must every field of zero bytes of each length
 * met first (the entries' starting contents); zeros and other values taking turns keep their
 * values. */
T_TEST(numeric_repeat_cache_per_length)
{
    firn_pg_type t = {.kind = FIRN_PG_KIND_DECIMAL, .precision = 15, .scale = 2};
    t.name = (char *)"numeric";
    static const uint16_t Z[4] = {0, 0, 0, 0}, D[4] = {12, 5000, 0, 0};
    uint8_t vals[4][16];
    size_t lens[4];
    /* 2 zero digits (12 bytes), then 16 bytes with the same first and last 8 */
    lens[0] = raw_numeric(vals[0], 0, 0, 2, Z, 2);
    memcpy(vals[1], vals[0], 8);
    memcpy(vals[1] + 8, vals[0] + 4, 8);
    lens[1] = 16;
    same_numeric_rows(&t, vals, lens, 2);
    lens[0] = raw_numeric(vals[0], 0, 0, 0, Z, 0); /* an 8-byte 0, then 16 bytes of 8 repeated */
    memcpy(vals[1], vals[0], 8);
    memcpy(vals[1] + 8, vals[0], 8);
    same_numeric_rows(&t, vals, lens, 2);
    for (size_t n = 8; n <= 16; n++) { /* zero bytes, each length, first in the column */
        memset(vals[0], 0, sizeof(vals[0]));
        lens[0] = n;
        same_numeric_rows(&t, vals, lens, 1);
        vals[0][1] = (uint8_t)((n - 8) / 2); /* the entry's 0 for even n */
        same_numeric_rows(&t, vals, lens, 1);
    }
    lens[0] = raw_numeric(vals[0], 0, 0, 2, Z, 0);      /* 0.00 */
    lens[1] = raw_numeric(vals[1], 0, 0, 2, D, 2);      /* 12.50 */
    lens[2] = raw_numeric(vals[2], 0, 0x4000, 2, D, 2); /* -12.50 */
    lens[3] = raw_numeric(vals[3], 0, 0, 2, D, 1);      /* 12.00 */
    uint8_t rows[12][16];
    size_t rlens[12];
    for (size_t i = 0; i < 12; i++) {
        size_t k = i % 2 ? 0 : (i / 2) % 4;
        memcpy(rows[i], vals[k], 16);
        rlens[i] = lens[k];
    }
    same_numeric_rows(&t, rows, rlens, 12);
}

/* The staged decoder reuses a numeric column's last value when the next one has the same bytes:
 * rows of a numeric(15,2) and a numeric(18,4) drawn from values that differ from one another in
 * a single byte (sign, weight, dscale, each digit, the length: a trailing zero digit kept), NaN
 * and infinities, nulls and repeats, must decode as the per-value decoder does. */
T_TEST(numeric_repeats_equal_per_value_decoding)
{
    static const uint16_t D[][4] = {{2, 5000, 0, 0}, {2, 5001, 0, 0}, {3, 5000, 0, 0},
                                    {1, 2, 3, 4},    {1, 2, 3, 5},    {1, 2, 4, 4},
                                    {1, 3, 3, 4},    {0, 0, 0, 0}};
    uint8_t vals[96][16];
    size_t lens[96], nv = 0;
    for (size_t k = 0; k < 8; k++) {
        for (uint16_t nd = 1; nd <= 4; nd += (k < 3 ? 1 : 3)) {
            lens[nv] = raw_numeric(vals[nv], nd > 2 ? 1 : 0, 0, 2, D[k], nd);
            nv++;
            lens[nv] = raw_numeric(vals[nv], nd > 2 ? 1 : 0, 0x4000, 2, D[k], nd);
            nv++;
            lens[nv] = raw_numeric(vals[nv], 0, 0, 3, D[k], nd); /* another dscale */
            nv++;
        }
    }
    lens[nv] = raw_numeric(vals[nv], 0, 0xC000, 0, NULL, 0); /* NaN: a null */
    nv++;
    lens[nv] = raw_numeric(vals[nv], 0, 0, 0, NULL, 0); /* zero */
    nv++;
    T_EQ_UINT(nv, 68);
    firn_pg_type t1 = {.kind = FIRN_PG_KIND_DECIMAL, .precision = 15, .scale = 2};
    firn_pg_type t2 = {.kind = FIRN_PG_KIND_DECIMAL, .precision = 18, .scale = 4};
    t1.name = t2.name = (char *)"numeric";
    firn_pg_column col[2] = {{.name = (char *)"a", .type = &t1, .field_id = 1},
                             {.name = (char *)"b", .type = &t2, .field_id = 2}};
    int32_t next_id = 3;
    firn_pg_table tab = {.columns = col, .n_columns = 2, .name = (char *)"num"};
    tab.qualified = (char *)"\"public\".\"num\"";
    tab.schema = firn_field_new(0, "schema", FIRN_TYPE_STRUCT, true);
    firn_field_add(tab.schema, firn_pg_type_field(&t1, 1, "a", false, &next_id));
    firn_field_add(tab.schema, firn_pg_type_field(&t2, 2, "b", false, &next_id));
    firn_batch *want = firn_batch_new(tab.schema), *got = firn_batch_new(tab.schema);
    firn_buf st;
    firn_buf_init(&st, (size_t)1 << 24);
    T_OK(firn_buf_append(&st, "PGCOPY\n\377\r\n\0", 11));
    put32(&st, 0);
    put32(&st, 0);
    size_t last[2] = {0, 0};
    firn_pg_decode_stats wst = {0};
    firn_err we = {0};
    for (int row = 0; row < 3000; row++) {
        put16(&st, 2);
        for (size_t c = 0; c < 2; c++) {
            uint64_t x = next_rand();
            size_t k = x % 3 == 0 ? last[c] : (size_t)((x >> 8) % nv); /* repeats, often */
            last[c] = k;
            firn_column *wc = firn_batch_column(want, c);
            if ((x >> 20) % 13 == 0) {
                put32(&st, 0xffffffffu);
                firn_column_append_null(wc);
                continue;
            }
            put_bytes(&st, vals[k], lens[k]);
            firn_rc wrc = firn_pg_value_decode(col[c].type, vals[k], lens[k], wc, &wst, &we);
            if (wrc) { /* digits beyond the scale of this column: leave the value out */
                st.len -= 4 + lens[k];
                put32(&st, 0xffffffffu);
                firn_column_append_null(wc);
            }
        }
        T_OK(firn_batch_end_row(want, FIRN_OP_READ, 0, NULL));
    }
    put16(&st, 0xffff);
    firn_pg_copy *d = firn_pg_copy_new(&tab, got);
    firn_err ge = {0};
    T_OK_ERR(firn_pg_copy_feed(d, st.data, st.len, 0, &ge), &ge);
    T_OK_ERR(firn_pg_copy_finish(d, &ge), &ge);
    T_EQ_UINT(firn_batch_rows(got), 3000);
    same_column(firn_batch_column(want, 0), firn_batch_column(got, 0));
    same_column(firn_batch_column(want, 1), firn_batch_column(got, 1));
    firn_pg_copy_free(d);
    firn_batch_free(want);
    firn_batch_free(got);
    firn_buf_deinit(&st);
    firn_field_free(tab.schema);
}

/* Text columns that take turns at large values: each column's buffer of kept bytes grows to a
 * stage's worth once, but the stage gives them back when together they hold more than 32 MiB,
 * instead of keeping a large buffer per column. */
T_TEST(kept_text_memory_is_bounded)
{
    enum { N = 8, BIG = 7 << 20 };
    firn_pg_type text = {.kind = FIRN_PG_KIND_TEXT, .name = (char *)"text"};
    firn_pg_column cols[N];
    char names[N][8];
    firn_pg_table tab = {.columns = cols, .n_columns = N, .name = (char *)"wide"};
    tab.qualified = (char *)"\"public\".\"wide\"";
    tab.schema = firn_field_new(0, "schema", FIRN_TYPE_STRUCT, true);
    int32_t next_id = N + 1;
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "t%d", i);
        cols[i] = (firn_pg_column){.name = names[i], .type = &text, .field_id = i + 1};
        firn_field_add(tab.schema, firn_pg_type_field(&text, i + 1, names[i], false, &next_id));
    }
    uint8_t *big = malloc(BIG);
    T_TRUE(big != NULL);
    memset(big, 'x', BIG);
    firn__pg_stage *st = firn__pg_stage_new(&tab);
    firn_batch *b = firn_batch_new(tab.schema);
    firn_column *out[N];
    for (int i = 0; i < N; i++)
        out[i] = firn_batch_column(b, (size_t)i);
    firn_pg_decode_stats stats = {0};
    firn_err err = {0};
    size_t most = 0;
    for (int round = 0; round < 2 * N; round++) {
        firn_buf t;
        firn_buf_init(&t, (size_t)1 << 30);
        put16(&t, N);
        for (int i = 0; i < N; i++) {
            if (i == round % N)
                put_bytes(&t, big, BIG);
            else
                put32(&t, 0xffffffffu);
        }
        size_t used = 0;
        T_OK_ERR(firn__pg_stage_row(st, t.data, t.len, &used, &err), &err);
        T_EQ_UINT(used, t.len);
        size_t held = firn__pg_stage_held(st);
        most = held > most ? held : most;
        T_OK_ERR(firn__pg_stage_flush(st, b, out, 0, &stats, &err), &err);
        T_EQ_UINT(firn_batch_rows(b), 1);
        T_EQ_UINT(firn_column_offsets(out[round % N])[1], BIG);
        T_TRUE(!firn_column_is_valid(out[(round + 1) % N], 0));
        firn_batch_reset(b);
        firn_buf_deinit(&t);
    }
    /* at most the 32 MiB kept plus the stage being filled (a buffer of BIG rounded up) */
    T_TRUE(most <= ((size_t)32 << 20) + ((size_t)16 << 20));
    T_TRUE(most >= BIG);
    firn__pg_stage_free(st);
    firn_batch_free(b);
    free(big);
    firn_field_free(tab.schema);
}

T_MAIN(T_CASE(staged_equals_per_value_decoding),
       T_CASE(split_tuples_taken_back_without_side_columns),
       T_CASE(positions_follow_each_feed),
       T_CASE(bad_values_fail_as_per_value_decoding),
       T_CASE(numeric_fast_path_equals_per_value_decoding),
       T_CASE(numeric_last_digit_beyond_scale_every_value),
       T_CASE(numeric_exact_division_every_last_digit),
       T_CASE(numeric_repeat_cache_per_length),
       T_CASE(numeric_repeats_equal_per_value_decoding),
       T_CASE(kept_text_memory_is_bounded))
