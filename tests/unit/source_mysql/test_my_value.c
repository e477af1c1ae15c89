/* SPDX-License-Identifier: Apache-2.0 */
/* The MySQL/MariaDB type mapping and the text-protocol value decoders: every kind at its edges
 * (limits, zero dates, negative and > 24 h TIME, BIGINT UNSIGNED above 2^63, DECIMAL(38) and
 * DECIMAL(65) digits, BINARY padding, BIT widths, geometry SRID prefix) and malformed input. */
#include "firn/source_mysql.h"
#include "t.h"

#include <string.h>

typedef struct decoded {
    firn_field *schema;
    firn_batch *batch;
    firn_my_type type;
    firn_my_decode_stats stats;
} decoded;

static void setup(decoded *d,
                  const char *dt,
                  const char *ct,
                  int64_t prec,
                  int64_t scale,
                  int64_t dtp,
                  int64_t clen)
{
    memset(d, 0, sizeof(*d));
    firn_err err = {0};
    T_OK_ERR(firn_my_type_resolve(dt, ct, prec, scale, dtp, clen, &d->type, &err), &err);
    d->schema = firn_field_new(0, "schema", FIRN_TYPE_STRUCT, true);
    firn_field_add(d->schema, firn_my_type_field(&d->type, 1, "v", false));
    d->batch = firn_batch_new(d->schema);
}

static void teardown(decoded *d)
{
    firn_batch_free(d->batch);
    firn_field_free(d->schema);
    firn_my_type_deinit(&d->type);
}

static firn_rc put(decoded *d, const char *text)
{
    firn_err err = {0};
    return firn_my_value_decode(&d->type, (const uint8_t *)text, strlen(text),
                                firn_batch_column(d->batch, 0), &d->stats, &err);
}

static firn_column *col(decoded *d)
{
    return firn_batch_column(d->batch, 0);
}

static int64_t i64_at(decoded *d, size_t i)
{
    return ((const int64_t *)firn_column_values(col(d)))[i];
}

static int32_t i32_at(decoded *d, size_t i)
{
    return ((const int32_t *)firn_column_values(col(d)))[i];
}

/* 128-bit decimals are stored as {uint64 lo, int64 hi}. */
static void i128_at(decoded *d, size_t i, int64_t *hi, uint64_t *lo)
{
    const uint64_t *v = (const uint64_t *)firn_column_values(col(d)) + 2 * i;
    *lo = v[0];
    *hi = (int64_t)v[1];
}

T_TEST(mapping)
{
    static const struct {
        const char *dt, *ct;
        int64_t prec, scale, clen;
        firn_my_kind kind;
        const char *iceberg;
    } cases[] = {
        {"tinyint", "tinyint(3) unsigned", 3, 0, -1, FIRN_MY_KIND_INT, "int"},
        {"int", "int(11)", 10, 0, -1, FIRN_MY_KIND_INT, "int"},
        {"int", "int(10) unsigned", 10, 0, -1, FIRN_MY_KIND_LONG, "long"},
        {"bigint", "bigint(20)", 19, 0, -1, FIRN_MY_KIND_LONG, "long"},
        {"bigint", "bigint unsigned", 20, 0, -1, FIRN_MY_KIND_ULONG, "decimal(20,0)"},
        {"decimal", "decimal(38,10)", 38, 10, -1, FIRN_MY_KIND_DECIMAL, "decimal(38,10)"},
        {"decimal", "decimal(65,30)", 65, 30, -1, FIRN_MY_KIND_DECTEXT, "string"},
        {"float", "float", 12, -1, -1, FIRN_MY_KIND_FLOAT, "float"},
        {"double", "double", 22, -1, -1, FIRN_MY_KIND_DOUBLE, "double"},
        {"time", "time(6)", -1, -1, -1, FIRN_MY_KIND_TIME, "long"},
        {"datetime", "datetime(3)", -1, -1, -1, FIRN_MY_KIND_DATETIME, "timestamp"},
        {"timestamp", "timestamp(6)", -1, -1, -1, FIRN_MY_KIND_TIMESTAMP, "timestamptz"},
        {"year", "year(4)", -1, -1, -1, FIRN_MY_KIND_YEAR, "int"},
        {"binary", "binary(16)", -1, -1, 16, FIRN_MY_KIND_FIXED, "fixed[16]"},
        {"binary", "binary(0)", -1, -1, 0, FIRN_MY_KIND_BINARY, "binary"},
        {"longblob", "longblob", -1, -1, -1, FIRN_MY_KIND_BINARY, "binary"},
        {"bit", "bit(1)", 1, -1, -1, FIRN_MY_KIND_BOOL, "boolean"},
        {"bit", "bit(17)", 17, -1, -1, FIRN_MY_KIND_BITS, "long"},
        {"bit", "bit(64)", 64, -1, -1, FIRN_MY_KIND_UBITS, "decimal(20,0)"},
        {"enum", "enum('a','b')", -1, -1, 1, FIRN_MY_KIND_STRING, "string"},
        {"json", "json", -1, -1, -1, FIRN_MY_KIND_STRING, "string"},
        {"point", "point", -1, -1, -1, FIRN_MY_KIND_GEOMETRY, "binary"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        firn_my_type t;
        firn_err err = {0};
        T_OK_ERR(firn_my_type_resolve(cases[i].dt, cases[i].ct, cases[i].prec, cases[i].scale, 6,
                                      cases[i].clen, &t, &err),
                 &err);
        T_EQ_INT(t.kind, cases[i].kind);
        firn_field *f = firn_my_type_field(&t, 1, "c", true);
        char name[64];
        firn_type_format(f, name, sizeof(name));
        T_EQ_STR(name, cases[i].iceberg);
        /* zero dates make every temporal column optional */
        T_EQ_INT(f->required, !firn_my_kind_zero_dates(t.kind));
        firn_field_free(f);
        firn_my_type_deinit(&t);
    }
    firn_my_type t;
    firn_err err = {0};
    T_EQ_INT(firn_my_type_resolve("vector", "vector(3)", -1, -1, -1, -1, &t, &err),
             FIRN_ERR_UNSUPPORTED);
    T_TRUE(strstr(err.msg, "vector(3)") != NULL);
}

T_TEST(integers)
{
    decoded d;
    setup(&d, "bigint", "bigint(20) unsigned", 20, 0, -1, -1);
    T_OK(put(&d, "18446744073709551615"));
    T_OK(put(&d, "9223372036854775808"));
    T_OK(put(&d, "0"));
    T_EQ_INT(put(&d, "18446744073709551616"), FIRN_ERR_PARSE);
    T_EQ_INT(put(&d, "-1"), FIRN_ERR_PARSE);
    int64_t hi;
    uint64_t lo;
    i128_at(&d, 0, &hi, &lo);
    T_EQ_INT(hi, 0);
    T_EQ_UINT(lo, UINT64_MAX);
    i128_at(&d, 1, &hi, &lo);
    T_EQ_UINT(lo, UINT64_C(9223372036854775808));
    teardown(&d);

    setup(&d, "int", "int(11)", 10, 0, -1, -1);
    T_OK(put(&d, "-2147483648"));
    T_OK(put(&d, "2147483647"));
    T_EQ_INT(put(&d, "2147483648"), FIRN_ERR_PARSE);
    T_EQ_INT(put(&d, "12a"), FIRN_ERR_PARSE);
    T_EQ_INT(i32_at(&d, 0), INT32_MIN);
    T_EQ_INT(i32_at(&d, 1), INT32_MAX);
    teardown(&d);

    setup(&d, "int", "int(10) unsigned", 10, 0, -1, -1);
    T_OK(put(&d, "4294967295"));
    T_EQ_INT(i64_at(&d, 0), INT64_C(4294967295));
    teardown(&d);
}

T_TEST(decimals)
{
    decoded d;
    setup(&d, "decimal", "decimal(10,2)", 10, 2, -1, -1);
    T_OK(put(&d, "-12345678.90"));
    T_OK(put(&d, "0.05"));
    T_OK(put(&d, "7"));
    T_EQ_INT(put(&d, "1.234"), FIRN_ERR_PARSE); /* more fraction digits than the scale */
    T_EQ_INT(put(&d, "1."), FIRN_ERR_PARSE);
    T_EQ_INT(put(&d, "-"), FIRN_ERR_PARSE);
    T_EQ_INT(i64_at(&d, 0), INT64_C(-1234567890));
    T_EQ_INT(i64_at(&d, 1), 5);
    T_EQ_INT(i64_at(&d, 2), 700);
    teardown(&d);

    setup(&d, "decimal", "decimal(38,0)", 38, 0, -1, -1);
    T_OK(put(&d, "-99999999999999999999999999999999999999"));
    int64_t hi;
    uint64_t lo;
    i128_at(&d, 0, &hi, &lo);
    /* -(10^38 - 1) = 0xB4C2_53D4_09E4_8FE5 ... check the halves against __int128 */
    const __int128 want = -(((__int128)10000000000000000000ULL * 10000000000000000000ULL) - 1);
    T_EQ_INT(hi, (int64_t)(want >> 64));
    T_EQ_UINT(lo, (uint64_t)want);
    teardown(&d);

    setup(&d, "decimal", "decimal(65,30)", 65, 30, -1, -1);
    const char *big = "-12345678901234567890123456789012345.123456789012345678901234567890";
    T_OK(put(&d, big));
    const uint32_t *off = firn_column_offsets(col(&d));
    T_EQ_INT(off[1] - off[0], strlen(big));
    T_EQ_MEM(firn_column_data(col(&d)), big, strlen(big));
    teardown(&d);
}

T_TEST(reals)
{
    decoded d;
    setup(&d, "float", "float", 12, -1, -1, -1);
    T_OK(put(&d, "3.40282e38"));
    T_OK(put(&d, "-1.17549e-38"));
    T_OK(put(&d, "16777216"));
    T_OK(put(&d, "123456.703125")); /* CAST(FLOAT AS DOUBLE) text of 123456.7f */
    T_EQ_INT(put(&d, "1e99"), FIRN_ERR_PARSE);
    const float *f = firn_column_values(col(&d));
    T_TRUE(f[2] == 16777216.0f);
    T_TRUE(f[3] == 123456.7f);
    teardown(&d);

    setup(&d, "double", "double", 22, -1, -1, -1);
    T_OK(put(&d, "1.7976931348623157e308"));
    T_OK(put(&d, "2.2250738585072014e-308"));
    T_OK(put(&d, "0.1"));
    const double *v = firn_column_values(col(&d));
    T_TRUE(v[0] == 1.7976931348623157e308);
    T_TRUE(v[2] == 0.1);
    teardown(&d);
}

T_TEST(dates)
{
    decoded d;
    setup(&d, "date", "date", -1, -1, -1, -1);
    T_OK(put(&d, "1970-01-01"));
    T_OK(put(&d, "0000-00-00"));
    T_OK(put(&d, "2024-00-15"));
    T_OK(put(&d, "2024-02-00"));
    T_OK(put(&d, "9999-12-31"));
    T_OK(put(&d, "1000-01-01"));
    T_OK(put(&d, "0001-01-01"));
    T_OK(put(&d, "2023-02-29")); /* ALLOW_INVALID_DATES: no calendar day, null */
    T_OK(put(&d, "2024-02-29"));
    T_EQ_INT(put(&d, "2024-13-01"), FIRN_ERR_PARSE);
    T_EQ_INT(put(&d, "2024-1-1"), FIRN_ERR_PARSE);
    T_EQ_INT(d.stats.zero_dates, 4);
    T_FALSE(firn_column_is_valid(col(&d), 7));
    T_EQ_INT(i32_at(&d, 8), 19782);
    T_EQ_INT(i32_at(&d, 0), 0);
    T_FALSE(firn_column_is_valid(col(&d), 1));
    T_FALSE(firn_column_is_valid(col(&d), 2));
    T_FALSE(firn_column_is_valid(col(&d), 3));
    T_EQ_INT(i32_at(&d, 4), 2932896);
    T_EQ_INT(i32_at(&d, 5), -354285);
    T_EQ_INT(i32_at(&d, 6), -719162);
    teardown(&d);
}

T_TEST(datetimes)
{
    decoded d;
    setup(&d, "datetime", "datetime(6)", -1, -1, 6, -1);
    T_OK(put(&d, "2024-01-02 03:04:05.123456"));
    T_OK(put(&d, "1969-12-31 23:59:59.999999"));
    T_OK(put(&d, "0000-00-00 00:00:00"));
    T_OK(put(&d, "9999-12-31 23:59:59.5"));
    T_EQ_INT(put(&d, "2024-01-02 24:00:00"), FIRN_ERR_PARSE);
    T_EQ_INT(put(&d, "2024-01-02 03:04:05.1234567"), FIRN_ERR_PARSE);
    T_EQ_INT(i64_at(&d, 0), INT64_C(1704164645123456));
    T_EQ_INT(i64_at(&d, 1), -1);
    T_FALSE(firn_column_is_valid(col(&d), 2));
    T_EQ_INT(i64_at(&d, 3), INT64_C(253402300799500000));
    T_EQ_INT(d.stats.zero_dates, 1);
    teardown(&d);

    setup(&d, "timestamp", "timestamp", -1, -1, 0, -1);
    T_OK(put(&d, "2038-01-19 03:14:07"));
    T_OK(put(&d, "0000-00-00 00:00:00"));
    T_EQ_INT(i64_at(&d, 0), INT64_C(2147483647000000));
    T_FALSE(firn_column_is_valid(col(&d), 1));
    teardown(&d);
}

T_TEST(times)
{
    decoded d;
    setup(&d, "time", "time(6)", -1, -1, 6, -1);
    T_OK(put(&d, "838:59:59.000000"));
    T_OK(put(&d, "-838:59:59.000000"));
    T_OK(put(&d, "-00:00:00.010000"));
    T_OK(put(&d, "25:00:00"));
    T_OK(put(&d, "00:00:00"));
    T_EQ_INT(put(&d, "12:60:00"), FIRN_ERR_PARSE);
    T_EQ_INT(put(&d, "12:00"), FIRN_ERR_PARSE);
    const int64_t max = ((INT64_C(838) * 60 + 59) * 60 + 59) * 1000000;
    T_EQ_INT(i64_at(&d, 0), max);
    T_EQ_INT(i64_at(&d, 1), -max);
    T_EQ_INT(i64_at(&d, 2), -10000);
    T_EQ_INT(i64_at(&d, 3), INT64_C(90000000000));
    T_EQ_INT(i64_at(&d, 4), 0);
    teardown(&d);

    setup(&d, "year", "year(4)", -1, -1, -1, -1);
    T_OK(put(&d, "0000"));
    T_OK(put(&d, "1901"));
    T_OK(put(&d, "2155"));
    T_EQ_INT(put(&d, "1900"), FIRN_ERR_PARSE);
    T_EQ_INT(i32_at(&d, 0), 0);
    T_EQ_INT(i32_at(&d, 2), 2155);
    teardown(&d);
}

static firn_rc put_bytes(decoded *d, const void *p, size_t n)
{
    firn_err err = {0};
    return firn_my_value_decode(&d->type, p, n, col(d), &d->stats, &err);
}

T_TEST(bytes_and_bits)
{
    decoded d;
    setup(&d, "binary", "binary(4)", -1, -1, -1, 4);
    T_OK(put_bytes(&d, "\x01\x00\x00\x00", 4));
    T_OK(put_bytes(&d, "\x02", 1)); /* a trimmed image is padded back */
    T_EQ_INT(put_bytes(&d, "12345", 5), FIRN_ERR_PARSE);
    T_EQ_MEM(firn_column_values(col(&d)), "\x01\x00\x00\x00\x02\x00\x00\x00", 8);
    teardown(&d);

    setup(&d, "bit", "bit(1)", 1, -1, -1, -1);
    T_OK(put_bytes(&d, "\x01", 1));
    T_OK(put_bytes(&d, "\x00", 1));
    const uint8_t *b = firn_column_values(col(&d));
    T_TRUE(b[0] && !b[1]);
    teardown(&d);

    setup(&d, "bit", "bit(17)", 17, -1, -1, -1);
    T_OK(put_bytes(&d, "\x01\xff\xfe", 3));
    T_EQ_INT(i64_at(&d, 0), 0x1fffe);
    teardown(&d);

    setup(&d, "bit", "bit(64)", 64, -1, -1, -1);
    T_OK(put_bytes(&d, "\xff\xff\xff\xff\xff\xff\xff\xff", 8));
    int64_t hi;
    uint64_t lo;
    i128_at(&d, 0, &hi, &lo);
    T_EQ_INT(hi, 0);
    T_EQ_UINT(lo, UINT64_MAX);
    teardown(&d);

    setup(&d, "point", "point", -1, -1, -1, -1);
    /* SRID 4326 then WKB POINT(1 2) */
    static const uint8_t g[] = {0xe6, 0x10, 0,    0,    1, 1, 0, 0, 0, 0, 0, 0,   0,
                                0,    0,    0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0x40};
    T_OK(put_bytes(&d, g, sizeof(g)));
    const uint32_t *off = firn_column_offsets(col(&d));
    T_EQ_INT(off[1], sizeof(g) - 4);
    T_EQ_MEM(firn_column_data(col(&d)), g + 4, sizeof(g) - 4);
    T_EQ_INT(put_bytes(&d, g, 3), FIRN_ERR_PARSE);
    teardown(&d);
}

T_TEST(quoting)
{
    firn_buf b;
    firn_buf_init(&b, 256);
    T_OK(firn_my_ident_append(&b, "a`b"));
    T_OK(firn_buf_append_cstr(&b, " "));
    T_OK(firn_my_literal_append(&b, "it's a \\ path"));
    T_EQ_STR((const char *)b.data, "`a``b` 'it''s a \\\\ path'");
    firn_buf_deinit(&b);
}

T_MAIN(T_CASE(mapping),
       T_CASE(integers),
       T_CASE(decimals),
       T_CASE(reals),
       T_CASE(dates),
       T_CASE(datetimes),
       T_CASE(times),
       T_CASE(bytes_and_bits),
       T_CASE(quoting))
