/* SPDX-License-Identifier: Apache-2.0 */
/* Binary COPY and value decoders on streams captured from PostgreSQL 15 (the fuzz seeds in
 * fuzz/corpus/pg_copy, table fz of fuzz/pg_copy.c), fed whole and byte by byte. */
#include "../../../fuzz/pg_copy.c"
#include "t.h"

#include <stdio.h>

static uint8_t *load(const char *name, size_t *out_len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/fuzz/corpus/pg_copy/%s", FIRN_SOURCE_DIR, name);
    FILE *f = fopen(path, "rb");
    T_TRUE(f != NULL);
    uint8_t *buf = malloc(1 << 16);
    *out_len = fread(buf, 1, 1 << 16, f);
    fclose(f);
    return buf;
}

static firn_batch *decode(const uint8_t *p, size_t len, size_t step, firn_rc *out_rc, firn_err *err)
{
    build_table();
    firn_batch *b = firn_batch_new(TABLE.schema);
    firn_pg_copy *d = firn_pg_copy_new(&TABLE, b);
    firn_rc rc = FIRN_OK;
    for (size_t pos = 0; pos < len && !rc; pos += step)
        rc = firn_pg_copy_feed(d, p + pos, len - pos < step ? len - pos : step, 42, err);
    if (!rc)
        rc = firn_pg_copy_finish(d, err);
    *out_rc = rc;
    firn_pg_copy_free(d);
    return b;
}

static int64_t i64_at(firn_batch *b, size_t col, size_t row)
{
    return ((const int64_t *)firn_column_values(firn_batch_column(b, col)))[row];
}

static const char *str_at(firn_batch *b, size_t col, size_t row, char *out, size_t cap)
{
    firn_column *c = firn_batch_column(b, col);
    const uint32_t *off = firn_column_offsets(c);
    snprintf(out, cap, "%.*s", (int)(off[row + 1] - off[row]),
             (const char *)firn_column_data(c) + off[row]);
    return out;
}

T_TEST(all_rows_whole_and_byte_by_byte)
{
    size_t len = 0;
    uint8_t *p = load("seed_all.bin", &len);
    const size_t steps[] = {1, 7, len};
    for (size_t k = 0; k < 3; k++) {
        size_t step = steps[k];
        firn_err err = {0};
        firn_rc rc;
        firn_batch *b = decode(p + 1, len - 1, step, &rc, &err);
        T_OK_ERR(rc, &err);
        T_EQ_UINT(firn_batch_rows(b), 4);
        T_EQ_INT(firn_batch_lsn(b, 0), 42);
        char s[128];
        /* row 0: i4 1, d 12.34 -> 1234, dw exact i128, n "3.14159", t "héllo" */
        T_EQ_INT(((const int32_t *)firn_column_values(firn_batch_column(b, 0)))[0], 1);
        T_EQ_INT(i64_at(b, 4, 0), 1234);
        const uint64_t *dw = firn_column_values(firn_batch_column(b, 5));
        __int128 v = (__int128)(((unsigned __int128)dw[1] << 64) | dw[0]);
        T_TRUE(v == (__int128)123456789012345678LL * 1000000000000LL + 901234567891LL);
        T_EQ_STR(str_at(b, 6, 0, s, sizeof(s)), "3.14159");
        T_EQ_STR(str_at(b, 7, 0, s, sizeof(s)), "héllo");
        T_EQ_INT(i64_at(b, 11, 0), INT64_C(1704067200000000));
        /* row 2: NaN decimal -> null, -Infinity numeric text, -infinity date, infinity ts */
        T_FALSE(firn_column_is_valid(firn_batch_column(b, 4), 2));
        T_EQ_STR(str_at(b, 6, 2, s, sizeof(s)), "-Infinity");
        T_EQ_INT(((const int32_t *)firn_column_values(firn_batch_column(b, 10)))[2], -INT32_MAX);
        T_EQ_INT(i64_at(b, 11, 2), INT64_MAX);
        const uint64_t *dwn = firn_column_values(firn_batch_column(b, 5));
        __int128 vn = (__int128)(((unsigned __int128)dwn[5] << 64) | dwn[4]);
        T_TRUE(vn == -((__int128)999999999999999999LL * 1000000000000LL + 999999999999LL));
        /* row 3: tiny numeric keeps every digit; ts beyond int64 us is clamped */
        T_EQ_STR(str_at(b, 6, 3, s, sizeof(s)), "0.000000000000000000000000000001");
        T_EQ_INT(i64_at(b, 11, 3), INT64_MAX - 1);
        firn_batch_free(b);
    }
    free(p);
}

T_TEST(truncated_and_trailing_input_fails)
{
    size_t len = 0;
    uint8_t *p = load("seed_all.bin", &len);
    firn_err err = {0};
    firn_rc rc;
    firn_batch *b = decode(p + 1, len - 5, len, &rc, &err);
    T_EQ_INT(rc, FIRN_ERR_PARSE);
    firn_batch_free(b);
    uint8_t *q = malloc(len + 1);
    memcpy(q, p + 1, len - 1);
    q[len - 1] = 0;
    b = decode(q, len, len, &rc, &err);
    T_EQ_INT(rc, FIRN_ERR_PROTOCOL);
    firn_batch_free(b);
    memcpy(q, "PGCOPY\n\377\r\n\1", 11);
    b = decode(q, len - 1, len, &rc, &err);
    T_EQ_INT(rc, FIRN_ERR_PARSE);
    T_TRUE(strstr(err.msg, "signature") != NULL);
    firn_batch_free(b);
    free(q);
    free(p);
}

T_MAIN(T_CASE(all_rows_whole_and_byte_by_byte), T_CASE(truncated_and_trailing_input_fails))
