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

/* A checker of numeric columns: one stage (so each column's repeat cache sees every value the
 * checker gives it, in order, across errors) against firn_pg_value_decode of each value alone.
 * Rows are staged until the stage is full or a value the per-value decoder refuses comes; then
 * the staged rows are flushed and compared value by value (a difference names its input). */
enum { NC_MAX = 3 };
typedef struct numchk {
    size_t ncols;
    firn_pg_type types[NC_MAX];
    firn_pg_column cols[NC_MAX];
    char names[NC_MAX][4];
    firn_pg_table tab;
    firn__pg_stage *st;
    firn_batch *got, *ref[NC_MAX];
    firn_field *ref_schema[NC_MAX];
    firn_column *out[NC_MAX];
    size_t rows; /* staged rows, each with the expected values below */
    int64_t want[256][NC_MAX];
    bool valid[256][NC_MAX];
    uint8_t in[256][NC_MAX][24];
    size_t in_len[256][NC_MAX];
    uint64_t nan_want, values, refused;
} numchk;

static void numchk_init(numchk *k, size_t ncols, const int32_t (*ps)[2])
{
    memset(k, 0, sizeof(*k));
    k->ncols = ncols;
    int32_t next_id = (int32_t)ncols + 1;
    k->tab = (firn_pg_table){.columns = k->cols, .n_columns = ncols, .name = (char *)"num"};
    k->tab.qualified = (char *)"\"public\".\"num\"";
    k->tab.schema = firn_field_new(0, "schema", FIRN_TYPE_STRUCT, true);
    for (size_t c = 0; c < ncols; c++) {
        k->types[c] = (firn_pg_type){.kind = FIRN_PG_KIND_DECIMAL,
                                     .precision = ps[c][0],
                                     .scale = ps[c][1],
                                     .name = (char *)"numeric"};
        k->names[c][0] = 'n';
        k->names[c][1] = (char)('0' + c);
        k->cols[c] =
            (firn_pg_column){.name = k->names[c], .type = &k->types[c], .field_id = (int32_t)c + 1};
        firn_field_add(k->tab.schema, firn_pg_type_field(&k->types[c], (int32_t)c + 1, k->names[c],
                                                         false, &next_id));
        k->ref_schema[c] = firn_field_new(0, "schema", FIRN_TYPE_STRUCT, true);
        int32_t id = 2;
        firn_field_add(k->ref_schema[c], firn_pg_type_field(&k->types[c], 1, "n", false, &id));
        k->ref[c] = firn_batch_new(k->ref_schema[c]);
    }
    k->st = firn__pg_stage_new(&k->tab);
    k->got = firn_batch_new(k->tab.schema);
    for (size_t c = 0; c < ncols; c++)
        k->out[c] = firn_batch_column(k->got, c);
}

static void numchk_show(const numchk *k, size_t c, const uint8_t *v, size_t n)
{
    fprintf(stderr, "numeric(%d,%d) column %zu, %zu bytes:", k->types[c].precision,
            k->types[c].scale, c, n);
    for (size_t i = 0; i < n && n != SIZE_MAX; i++)
        fprintf(stderr, "%s%02x", i % 2 ? "" : " ", v[i]);
    fputc('\n', stderr);
}

static void numchk_flush(numchk *k)
{
    if (!k->rows)
        return;
    firn_pg_decode_stats st = {0};
    firn_err err = {0};
    T_OK_ERR(firn__pg_stage_flush(k->st, k->got, k->out, 0, &st, &err), &err);
    T_EQ_UINT(st.nan_to_null, k->nan_want);
    for (size_t c = 0; c < k->ncols; c++) {
        T_EQ_UINT(firn_column_length(k->out[c]), k->rows);
        const int64_t *got = firn_column_values(k->out[c]);
        for (size_t r = 0; r < k->rows; r++) {
            bool ok = firn_column_is_valid(k->out[c], r) == k->valid[r][c];
            if (ok && k->valid[r][c])
                ok = got[r] == k->want[r][c];
            if (!ok) {
                numchk_show(k, c, k->in[r][c], k->in_len[r][c]);
                T_FAIL("staged %s %lld, per value %s %lld",
                       firn_column_is_valid(k->out[c], r) ? "value" : "null", (long long)got[r],
                       k->valid[r][c] ? "value" : "null", (long long)k->want[r][c]);
            }
        }
    }
    firn_batch_reset(k->got);
    k->rows = 0;
    k->nan_want = 0;
}

/* One row: column c's value v[c][0..n[c]) (n[c] == SIZE_MAX: a null, n[c] <= 24). */
static void numchk_row(numchk *k, const uint8_t *const *v, const size_t *n)
{
    if (k->rows == 256 || firn__pg_stage_full(k->st))
        numchk_flush(k);
    const size_t r = k->rows;
    uint8_t tup[2 + NC_MAX * 28];
    size_t len = 2;
    tup[0] = 0;
    tup[1] = (uint8_t)k->ncols;
    firn_err we = {0};
    firn_rc wrc = FIRN_OK;
    size_t bad = 0;
    uint64_t nan = 0;
    for (size_t c = 0; c < k->ncols; c++) {
        uint32_t l = n[c] == SIZE_MAX ? UINT32_MAX : (uint32_t)n[c];
        for (int i = 0; i < 4; i++)
            tup[len++] = (uint8_t)(l >> (24 - 8 * i));
        k->in_len[r][c] = n[c];
        if (n[c] == SIZE_MAX) {
            k->valid[r][c] = false;
            continue;
        }
        memcpy(tup + len, v[c], n[c]);
        len += n[c];
        memcpy(k->in[r][c], v[c], n[c]);
        k->values++;
        if (wrc)
            continue;
        firn_pg_decode_stats wst = {0};
        firn_column *col = firn_batch_column(k->ref[c], 0);
        wrc = firn_pg_value_decode(&k->types[c], v[c], n[c], col, &wst, &we);
        if (wrc) {
            bad = c;
            continue;
        }
        nan += wst.nan_to_null;
        size_t at = firn_column_length(col) - 1;
        k->valid[r][c] = firn_column_is_valid(col, at);
        k->want[r][c] = k->valid[r][c] ? ((const int64_t *)firn_column_values(col))[at] : 0;
        T_OK(firn_batch_end_row(k->ref[c], FIRN_OP_READ, 0, NULL));
        if (firn_batch_rows(k->ref[c]) >= 4096)
            firn_batch_reset(k->ref[c]);
    }
    if (wrc) /* the staged rows first: a refused value drops them */
        numchk_flush(k);
    size_t used = 0;
    firn_err ge = {0};
    uint8_t *heap = malloc(len); /* exactly the tuple: a read past it is ASan's to report */
    T_TRUE(heap != NULL);
    memcpy(heap, tup, len);
    firn_rc grc = firn__pg_stage_row(k->st, heap, len, &used, &ge);
    free(heap);
    if (grc != wrc || (wrc && !strstr(ge.msg, we.msg))) {
        for (size_t c = 0; c < k->ncols; c++)
            numchk_show(k, c, v[c], n[c]);
        T_FAIL("staged rc %d \"%s\", per value rc %d \"%s\" (column %zu)", (int)grc, ge.msg,
               (int)wrc, we.msg, bad);
    }
    if (wrc) {
        k->refused++;
        return;
    }
    T_EQ_UINT(used, len);
    k->nan_want += nan;
    k->rows = r + 1;
}

static void numchk_one(numchk *k, const uint8_t *v, size_t n)
{
    numchk_row(k, &v, &n);
}

/* Ends the checker: every use of it has values both decoders accept and values both refuse. */
static void numchk_done(numchk *k)
{
    T_TRUE(k->refused > 0 && k->refused < k->values);
    numchk_flush(k);
    firn__pg_stage_free(k->st);
    firn_batch_free(k->got);
    for (size_t c = 0; c < k->ncols; c++) {
        firn_batch_free(k->ref[c]);
        firn_field_free(k->ref_schema[c]);
    }
    firn_field_free(k->tab.schema);
}

/* The base-10000 digits of m * 10^-s (m < 10^20 as u128 pieces: m itself up to UINT64_MAX),
 * aligned at the group boundary as numeric_send aligns them: *w the weight of the first digit,
 * trailing zero digits of the fraction kept, no leading zero digits (m == 0: none). */
static uint16_t numeric_groups(uint64_t m, int s, uint16_t *d, int *w)
{
    int fg = (s + 3) / 4;
    unsigned __int128 x = m;
    for (int i = s; i < 4 * fg; i++)
        x *= 10;
    uint16_t rev[16];
    int nd = 0;
    for (; x > 0; x /= 10000)
        rev[nd++] = (uint16_t)(x % 10000);
    for (int i = 0; i < nd; i++)
        d[i] = rev[nd - 1 - i];
    *w = nd - 1 - fg;
    return (uint16_t)nd;
}

/* Raw numeric bytes into out (at most 24): header nd (the digit count written is min(nd, 8)),
 * weight w, sign, dscale, digits d; returns the length 8 + 2 * digits written. */
static size_t
raw_num(uint8_t *out, uint16_t nd, int w, uint16_t sign, uint16_t dscale, const uint16_t *d)
{
    uint16_t h[4] = {nd, (uint16_t)w, sign, dscale};
    for (int i = 0; i < 4; i++) {
        out[2 * i] = (uint8_t)(h[i] >> 8);
        out[2 * i + 1] = (uint8_t)h[i];
    }
    uint16_t k = nd < 8 ? nd : 8;
    for (uint16_t i = 0; i < k; i++) {
        out[8 + 2 * i] = (uint8_t)(d[i] >> 8);
        out[9 + 2 * i] = (uint8_t)d[i];
    }
    return 8 + 2 * (size_t)k;
}

/* FIRN_TEST_EXHAUSTIVE=1 widens the numeric checker tests below to every value of their spaces
 * (minutes under ASan); by default each takes a sample that runs in about a second. */
static bool exhaustive(void)
{
    const char *e = getenv("FIRN_TEST_EXHAUSTIVE");
    return e && *e && strcmp(e, "0") != 0;
}

static uint64_t pow10u(int k)
{
    uint64_t p = 1;
    while (k-- > 0)
        p *= 10;
    return p;
}

/* Every numeric(p,s), p <= 18: magnitudes at the edges (10^j - 1, 10^j, 10^j + 1 for each j,
 * the column's limit and one past), sent at the column's scale and at up to 4 more digits with
 * those zero or not (one past a multiple of 10), in numeric_send's form, with the trailing zero
 * digits stripped (as PostgreSQL stores them), with a leading zero digit and with a trailing
 * zero digit more; both signs, and dscales with the 0x4000 and 0x8000 bits. */
T_TEST(numeric_stored_forms_every_type_at_the_edges)
{
    uint64_t mags[96];
    size_t nm = 0;
    mags[nm++] = 0;
    for (int j = 0; j <= 19; j++) {
        uint64_t p = j == 19 ? 10000000000000000000ull : pow10u(j);
        mags[nm++] = p - 1 ? p - 1 : 2;
        mags[nm++] = p;
        mags[nm++] = p + 1;
        mags[nm++] = p * 5 > p && j < 19 ? p * 5 - 1 : UINT64_MAX;
    }
    for (int32_t prec = 1; prec <= 18; prec++) {
        for (int32_t scale = 0; scale <= prec; scale++) {
            numchk k;
            const int32_t ps[1][2] = {{prec, scale}};
            numchk_init(&k, 1, ps);
            /* all of it for the types at the ends (scale 0, 1, 3, 4, precision), a part for
             * the others unless exhaustive */
            bool all = exhaustive() || ((prec <= 2 || prec == 15 || prec == 18) &&
                                        (scale <= 1 || scale == 3 || scale == 4 || scale == prec));
            for (size_t mi = 0; mi < nm; mi++) {
                if (!exhaustive() && mi > 4 * (size_t)(prec + 2) && mi + 1 < nm)
                    continue; /* 10^j for j > prec + 1: refused as 10^(prec + 1) is */
                for (int more = 0; more <= (all ? 4 : 1); more++) {
                    for (int off = 0; off <= (more ? 1 : 0); off++) {
                        unsigned __int128 m = (unsigned __int128)mags[mi] * pow10u(more) + off;
                        if (m > UINT64_MAX)
                            continue;
                        int s = scale + more;
                        uint16_t d[24];
                        int w;
                        uint16_t nd = numeric_groups((uint64_t)m, s, d + 1, &w);
                        for (int form = 0; form < (all ? 4 : 2); form++) {
                            uint16_t *dd = d + 1, n = nd;
                            int ww = w;
                            if (form == 1) /* stripped */
                                while (n && dd[n - 1] == 0)
                                    n--;
                            if (form == 2 && n) { /* a leading zero digit */
                                d[0] = 0;
                                dd = d;
                                n++;
                                ww++;
                            }
                            if (form == 3) /* a trailing zero digit */
                                dd[n++] = 0;
                            if (n > 8)
                                continue;
                            for (int sg = 0; sg < 2; sg++) {
                                static const uint16_t DS[] = {0, 0x4000, 0x8000, 0x7fff};
                                for (size_t di = 0; di < (sg || !all ? 1 : 4); di++) {
                                    uint16_t ds = (uint16_t)(DS[di] | (di == 3 ? 0 : s));
                                    uint8_t v[24];
                                    size_t len = raw_num(v, n, ww, sg ? 0x4000 : 0, ds, dd);
                                    numchk_one(&k, v, len);
                                }
                            }
                        }
                    }
                }
            }
            numchk_done(&k);
        }
    }
}

/* Types at the ends of the fast path: scale % 4 of 0..3, scale 0 and scale == precision,
 * precisions 1, 15 and 18. */
static const int32_t EDGE_TYPES[][2] = {{1, 0},  {1, 1},  {4, 4},   {10, 5},  {15, 0},
                                        {15, 2}, {15, 3}, {15, 15}, {18, 0},  {18, 1},
                                        {18, 2}, {18, 3}, {18, 4},  {18, 17}, {18, 18}};
enum { N_EDGE_TYPES = sizeof(EDGE_TYPES) / sizeof(EDGE_TYPES[0]) };

/* Headers: every digit count 0..5 at weights near 0 and at the int16 limits (where weight -
 * ndigits and the exponent leave int16), zero, small and out-of-range digits; then header
 * words that are not a stored form's (digit counts with the high bits set, lengths 0..24 that
 * disagree with them, every sign class and garbage signs, dscales with the high bits). */
T_TEST(numeric_headers_weights_and_lengths)
{
    static const int W[] = {-32768, -32767, -32766, -32765, -32764, -16385, -16384, -8193, -4096,
                            -20,    -13,    -12,    -11,    -10,    -9,     -8,     -7,    -6,
                            -5,     -4,     -3,     -2,     -1,     0,      1,      2,     3,
                            4,      5,      6,      7,      8,      9,      12,     16,    4095,
                            8192,   16383,  16384,  32763,  32764,  32765,  32766,  32767};
    static const uint16_t PAT[][5] = {
        {1, 1, 1, 1, 1},  {0, 0, 0, 0, 0},     {9999, 9999, 9999, 9999, 9999},
        {5, 0, 0, 0, 10}, {0, 0, 0, 0, 10000}, {100, 2000, 3000, 40, 500},
        {1, 0, 0, 0, 1},  {65535, 0, 0, 0, 0}};
    static const uint16_t SIGNS[] = {0,      0x4000, 0xC000, 0xD000, 0xF000, 0x8000,
                                     0x3fff, 0x4001, 0x4040, 0xC001, 0x0040, 0x0001,
                                     0xE000, 0xFFFF, 0x1000, 0x5000};
    static const uint16_t NDS[] = {0,      1,      2,      3,      4,      5,
                                   6,      0x7fff, 0x8000, 0x8001, 0x8004, 0xfffc,
                                   0xffff, 0x0104, 0x0400, 0x4002, 0x0201};
    for (size_t ti = 0; ti < N_EDGE_TYPES; ti++) {
        numchk k;
        numchk_init(&k, 1, &EDGE_TYPES[ti]);
        uint16_t dscale = (uint16_t)EDGE_TYPES[ti][1];
        for (uint16_t nd = 0; nd <= 5; nd++) {
            for (size_t wi = 0; wi < sizeof(W) / sizeof(W[0]); wi++) {
                for (size_t pi = 0; pi < sizeof(PAT) / sizeof(PAT[0]); pi++) {
                    for (uint16_t sg = 0; sg <= 0x4000; sg += 0x4000) {
                        uint8_t v[24];
                        size_t n = raw_num(v, nd, W[wi], sg, dscale, PAT[pi]);
                        numchk_one(&k, v, n);
                    }
                }
            }
        }
        static const uint16_t D[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        for (size_t ni = 0; ni < sizeof(NDS) / sizeof(NDS[0]) && (ti % 3 == 0 || exhaustive());
             ni++) {
            for (size_t si = 0; si < sizeof(SIGNS) / sizeof(SIGNS[0]); si++) {
                for (int w = exhaustive() ? -1 : 0; w <= (exhaustive() ? 1 : 0); w++) {
                    uint8_t v[24];
                    raw_num(v, 8, w, SIGNS[si], dscale, D); /* 24 bytes of header and digits */
                    v[0] = (uint8_t)(NDS[ni] >> 8);
                    v[1] = (uint8_t)NDS[ni];
                    for (size_t len = 0; len <= 24; len++)
                        numchk_one(&k, v, len);
                }
            }
        }
        for (uint32_t ds = 0; ds <= 0xffff; ds += exhaustive() ? 1 : 0x3ff) {
            for (uint16_t nd = 0; nd <= 4; nd++) {
                uint8_t v[24];
                size_t n = raw_num(v, nd, 0, 0, (uint16_t)ds, D);
                numchk_one(&k, v, n);
            }
        }
        numchk_done(&k);
    }
}

/* Digits around each exponent: for every numeric(p,s) (exhaustive) or the edge types, 1..4
 * digits whose last sits at each exponent e = -6..5 (the digits beyond the scale of a stored
 * form at e = -1..-3, where the fast path divides by an inverse), the leading digits 0, 1 or
 * 9999 and the last digit each of 0..9999 (exhaustive) or the multiples of 10, 100 and 1000
 * near 0, 5000 and 10000 with their neighbours and a random sample. */
T_TEST(numeric_last_digit_at_each_exponent)
{
    uint16_t last[10000];
    size_t nl = 0;
    if (exhaustive()) {
        for (uint32_t d = 0; d < 10000; d++)
            last[nl++] = (uint16_t)d;
    } else {
        static const uint16_t AT[] = {0, 1000, 5000, 9000, 9990, 10000};
        for (size_t a = 0; a < sizeof(AT) / sizeof(AT[0]); a++) {
            for (int dd = -11; dd <= 11; dd++) {
                int d = AT[a] + dd;
                if (d >= 0 && d < 10000)
                    last[nl++] = (uint16_t)d;
            }
        }
        for (uint16_t d = 100; d < 10000; d += 700)
            last[nl++] = d;
        for (int i = 0; i < 40; i++)
            last[nl++] = (uint16_t)(next_rand() % 10000);
    }
    static const uint16_t LEAD[] = {0, 1, 9999};
    for (int32_t prec = 1; prec <= 18; prec++) {
        for (int32_t scale = 0; scale <= prec; scale++) {
            bool edge = false;
            for (size_t ti = 0; ti < N_EDGE_TYPES; ti++)
                edge |= EDGE_TYPES[ti][0] == prec && EDGE_TYPES[ti][1] == scale;
            if (!edge && !exhaustive())
                continue;
            numchk k;
            const int32_t ps[1][2] = {{prec, scale}};
            numchk_init(&k, 1, ps);
            for (uint16_t nd = 1; nd <= 4; nd++) {
                for (int e = -6; e <= 5; e++) {
                    /* e = 4 * (w - nd + 1) + scale for the last digit: w when it is whole */
                    int t = e - scale;
                    if (((t % 4) + 4) % 4)
                        continue;
                    int w = t / 4 + nd - 1;
                    for (size_t li = 0; li < (nd > 1 ? 3 : 1); li++) {
                        for (size_t i = 0; i < nl; i++) {
                            uint16_t d[4] = {LEAD[li], LEAD[li], LEAD[li], 0};
                            d[nd - 1] = last[i];
                            uint8_t v[24];
                            size_t n =
                                raw_num(v, nd, w, last[i] % 3 ? 0 : 0x4000, (uint16_t)scale, d);
                            numchk_one(&k, v, n);
                        }
                    }
                }
            }
            numchk_done(&k);
        }
    }
}

/* The repeat cache: three columns (numeric(15,2), (15,3), (18,0)) take rows drawn from values
 * that differ from one another in one byte of their first or last 8 (or in the middle bytes
 * of 12..16-byte values), the same bytes under another length, NaN, refused values behind
 * accepted ones with the same head, and nulls, often the previous row's value again; every row
 * must decode as the per-value decoder does, and a refused value fail alike, in any order. */
T_TEST(numeric_repeat_cache_adversarial_sequences)
{
    static const uint16_t BASE[][4] = {{12, 5000, 0, 0},         {0, 0, 0, 0},  {1, 2, 3, 4},
                                       {9999, 9999, 9999, 9990}, {0, 10, 0, 0}, {7, 0, 0, 1}};
    uint8_t pool[2400][24];
    size_t plen[2400], np = 0;
    for (size_t b = 0; b < sizeof(BASE) / sizeof(BASE[0]); b++) {
        for (uint16_t nd = 0; nd <= 4; nd++) {
            for (int w = -1; w <= 1; w++) {
                uint8_t v[24];
                size_t n = raw_num(v, nd, w, 0, 2, BASE[b]);
                memcpy(pool[np], v, 24);
                plen[np++] = n;
                for (size_t i = 0; i < n; i++) { /* one byte changed, each byte */
                    memcpy(pool[np], v, 24);
                    pool[np][i] ^= (uint8_t)(i % 2 ? 0x01 : 0x40);
                    plen[np++] = n;
                }
                for (int dl = -2; dl <= 2; dl += 4) { /* the same bytes, another length */
                    memcpy(pool[np], v, 24);
                    plen[np++] = (size_t)((int)n + dl);
                }
                for (size_t l = 8; l <= 16; l++) { /* its first and last 8, another length */
                    if (l == n)
                        continue;
                    memset(pool[np], 0, 24);
                    memcpy(pool[np], v, 8);
                    memcpy(pool[np] + l - 8, v + n - 8, 8);
                    plen[np++] = l;
                }
            }
        }
    }
    T_TRUE(np <= 2400);
    const int32_t ps[3][2] = {{15, 2}, {15, 3}, {18, 0}};
    numchk k;
    numchk_init(&k, 3, ps);
    size_t prev[3] = {0, 0, 0};
    long rows = exhaustive() ? 3000000 : 60000;
    for (long row = 0; row < rows; row++) {
        const uint8_t *v[3];
        size_t n[3];
        for (size_t c = 0; c < 3; c++) {
            uint64_t x = next_rand();
            size_t i = x % 4 == 0 ? prev[c] : x % 4 == 1 ? prev[(c + 1) % 3] : (x >> 8) % np;
            if (x % 7 == 0) /* a value near the previous one: one byte or the length changed */
                i = prev[c] + 1 + (x >> 16) % 3 < np ? prev[c] + 1 + (x >> 16) % 3 : 0;
            prev[c] = i;
            v[c] = pool[i];
            n[c] = (x >> 40) % 29 == 0 ? SIZE_MAX : plen[i];
        }
        numchk_row(&k, v, n);
    }
    numchk_done(&k);
}

/* A seeded random run: rows of three numeric columns of edge types (a new triple every 2000
 * rows) whose values have 0..5 digits (a length that disagrees now and then), weights near the
 * exponents of each column or anywhere in int16, signs and dscales mostly a stored value's,
 * digits biased to 0, 9999, multiples of 10^k and out of range, and repeats of the last. */
T_TEST(numeric_random_rows_seeded)
{
    static const uint16_t SIGNS[] = {0, 0x4000, 0xC000, 0xD000, 0xF000, 0x8000, 0x4001, 0xffff};
    long rows = exhaustive() ? 4000000 : 40000;
    uint8_t last[3][24];
    size_t last_n[3] = {SIZE_MAX, SIZE_MAX, SIZE_MAX};
    for (long done = 0; done < rows; done += 2000) {
        int32_t ps[3][2];
        for (size_t c = 0; c < 3; c++)
            memcpy(ps[c], EDGE_TYPES[next_rand() % N_EDGE_TYPES], sizeof(ps[c]));
        numchk k;
        numchk_init(&k, 3, ps);
        for (long row = 0; row < 2000; row++) {
            uint8_t v[3][24] = {{0}};
            const uint8_t *vp[3];
            size_t n[3];
            for (size_t c = 0; c < 3; c++) {
                uint64_t x = next_rand(), y = next_rand();
                vp[c] = v[c];
                if (x % 5 == 0 && last_n[c] != SIZE_MAX) { /* the last value again */
                    memcpy(v[c], last[c], 24);
                    n[c] = last_n[c];
                    continue;
                }
                if (x % 31 == 1) {
                    n[c] = SIZE_MAX;
                    continue;
                }
                uint16_t nd = (uint16_t)((x >> 8) % 6), d[5];
                for (uint16_t i = 0; i < nd; i++) {
                    uint64_t z = next_rand();
                    static const uint16_t POW[4] = {1, 10, 100, 1000};
                    d[i] = z % 8 == 0    ? 0
                           : z % 8 == 1  ? 9999
                           : z % 8 == 2  ? (uint16_t)((z >> 8) % 10 * POW[(z >> 16) % 4])
                           : z % 64 == 3 ? (uint16_t)(10000 + (z >> 8) % 55536)
                                         : (uint16_t)((z >> 8) % 10000);
                }
                /* the weight of a last digit at exponent -5..4, or anything */
                int w = (x >> 16) % 16 == 0 ? (int16_t)(y >> 32)
                                            : (int)((y >> 8) % 10) - 5 - ps[c][1] / 4 + nd - 1;
                uint16_t sign =
                    (x >> 24) % 8 ? (uint16_t)((x >> 28) % 2 ? 0x4000 : 0) : SIGNS[(x >> 32) % 8];
                uint16_t ds = (x >> 36) % 16 ? (uint16_t)ps[c][1] : (uint16_t)(y >> 40);
                n[c] = raw_num(v[c], nd, w, sign, ds, d);
                if ((x >> 44) % 32 == 0)
                    n[c] = (size_t)((y >> 48) % 21); /* disagrees with the digit count */
                memcpy(last[c], v[c], 24);
                last_n[c] = n[c];
            }
            numchk_row(&k, vp, n);
        }
        numchk_done(&k);
    }
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
       T_CASE(numeric_stored_forms_every_type_at_the_edges),
       T_CASE(numeric_headers_weights_and_lengths),
       T_CASE(numeric_last_digit_at_each_exponent),
       T_CASE(numeric_repeat_cache_adversarial_sequences),
       T_CASE(numeric_random_rows_seeded),
       T_CASE(kept_text_memory_is_bounded))
