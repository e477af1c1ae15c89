/* SPDX-License-Identifier: Apache-2.0 */
/* The text-format value decoder (firn_pg_value_decode_text) on tricky literals: numeric scale
 * padding and rejection, money in several locales' formats, BC dates, timestamps with offsets,
 * clamping, intervals in both styles, floats' exact bits, array quoting, escapes, nesting,
 * flattening, bounds and malformed literals. Where a binary form is easy to build, the result
 * is compared with firn_pg_value_decode's. */
#include "firn/source_pg.h"
#include "t.h"

#include <math.h>

typedef struct one {
    firn_field *schema;
    firn_batch *batch;
    firn_column *col;
    firn_pg_decode_stats stats;
    firn_err err;
} one;

static firn_pg_type mk(firn_pg_kind kind)
{
    firn_pg_type t;
    memset(&t, 0, sizeof(t));
    t.kind = kind;
    t.typmod = -1;
    return t;
}

static firn_pg_type mk_dec(int32_t p, int32_t s)
{
    firn_pg_type t = mk(FIRN_PG_KIND_DECIMAL);
    t.precision = p;
    t.scale = s;
    return t;
}

static firn_pg_type mk_arr(firn_pg_type *elem, int32_t ndims)
{
    firn_pg_type t = mk(FIRN_PG_KIND_ARRAY);
    t.elem = elem;
    t.ndims = ndims;
    return t;
}

static void one_init(one *o, const firn_pg_type *t)
{
    memset(o, 0, sizeof(*o));
    int32_t next = 2;
    o->schema = firn_field_new(0, "s", FIRN_TYPE_STRUCT, true);
    firn_field_add(o->schema, firn_pg_type_field(t, 1, "v", false, &next));
    o->batch = firn_batch_new(o->schema);
    o->col = firn_batch_column(o->batch, 0);
}

static void one_free(one *o)
{
    firn_batch_free(o->batch);
    firn_field_free(o->schema);
}

static firn_rc dec(one *o, const firn_pg_type *t, const char *text)
{
    return firn_pg_value_decode_text(t, (const uint8_t *)text, strlen(text), o->col, &o->stats,
                                     &o->err);
}

/* Decodes text as a fresh single value and returns slot 0's raw fixed-width value. */
static void dec_ok(one *o, const firn_pg_type *t, const char *text)
{
    one_init(o, t);
    firn_rc rc = dec(o, t, text);
    if (rc)
        T_FAIL("decoding \"%s\" failed: %s", text, o->err.msg);
    T_EQ_UINT(firn_column_length(o->col), 1);
}

static int64_t i64_of(const firn_pg_type *t, const char *text)
{
    one o;
    dec_ok(&o, t, text);
    int64_t v = ((const int64_t *)firn_column_values(o.col))[0];
    one_free(&o);
    return v;
}

static int32_t i32_of(const firn_pg_type *t, const char *text)
{
    one o;
    dec_ok(&o, t, text);
    int32_t v = ((const int32_t *)firn_column_values(o.col))[0];
    one_free(&o);
    return v;
}

static __int128 i128_of(const firn_pg_type *t, const char *text)
{
    one o;
    dec_ok(&o, t, text);
    const uint64_t *w = firn_column_values(o.col);
    __int128 v = (__int128)(((unsigned __int128)w[1] << 64) | w[0]);
    one_free(&o);
    return v;
}

static void bad(const firn_pg_type *t, const char *text)
{
    one o;
    one_init(&o, t);
    firn_rc rc = dec(&o, t, text);
    if (rc != FIRN_ERR_PARSE)
        T_FAIL("\"%s\" should be rejected, got %d", text, rc);
    T_TRUE(strstr(o.err.msg, "invalid text value") != NULL);
    one_free(&o);
}

T_TEST(test_bool_ints)
{
    firn_pg_type b = mk(FIRN_PG_KIND_BOOL), i2 = mk(FIRN_PG_KIND_INT2), i4 = mk(FIRN_PG_KIND_INT4),
                 i8 = mk(FIRN_PG_KIND_INT8), oid = mk(FIRN_PG_KIND_OID);
    one o;
    dec_ok(&o, &b, "t");
    T_EQ_INT(((const uint8_t *)firn_column_values(o.col))[0], 1);
    one_free(&o);
    bad(&b, "true ");
    bad(&b, "");
    T_EQ_INT(i32_of(&i2, "-32768"), -32768);
    bad(&i2, "32768");
    T_EQ_INT(i32_of(&i4, "-2147483648"), INT32_MIN);
    bad(&i4, "2147483648");
    bad(&i4, " 1");
    T_EQ_INT(i64_of(&i8, "-9223372036854775808"), INT64_MIN);
    bad(&i8, "9223372036854775808");
    T_EQ_INT(i64_of(&oid, "4294967295"), 4294967295LL);
    bad(&oid, "4294967296");
    bad(&oid, "-1");
}

static uint32_t f4_bits(const char *text)
{
    firn_pg_type t = mk(FIRN_PG_KIND_FLOAT4);
    one o;
    dec_ok(&o, &t, text);
    uint32_t bits;
    memcpy(&bits, firn_column_values(o.col), 4);
    one_free(&o);
    return bits;
}

static uint64_t f8_bits(const char *text)
{
    firn_pg_type t = mk(FIRN_PG_KIND_FLOAT8);
    one o;
    dec_ok(&o, &t, text);
    uint64_t bits;
    memcpy(&bits, firn_column_values(o.col), 8);
    one_free(&o);
    return bits;
}

T_TEST(test_floats_exact)
{
    /* Shortest round-trip texts as float4out/float8out print them. */
    T_EQ_UINT(f4_bits("3.4028235e+38"), 0x7f7fffffu);
    T_EQ_UINT(f4_bits("1e-45"), 0x00000001u); /* denormal: strtod then cast would not do */
    T_EQ_UINT(f4_bits("1.5"), 0x3fc00000u);
    T_EQ_UINT(f4_bits("-0"), 0x80000000u);
    T_EQ_UINT(f4_bits("Infinity"), 0x7f800000u);
    T_EQ_UINT(f8_bits("1.7976931348623157e+308"), 0x7fefffffffffffffull);
    T_EQ_UINT(f8_bits("5e-324"), 1);
    T_EQ_UINT(f8_bits("0.1"), 0x3fb999999999999aull);
    T_EQ_UINT(f8_bits("-Infinity"), 0xfff0000000000000ull);
    uint64_t nan = f8_bits("NaN");
    double d;
    memcpy(&d, &nan, 8);
    T_TRUE(isnan(d));
    firn_pg_type f8 = mk(FIRN_PG_KIND_FLOAT8), f4 = mk(FIRN_PG_KIND_FLOAT4);
    bad(&f8, "1e999");
    bad(&f4, "1e39");
    bad(&f8, " 1");
    bad(&f8, "1x");
    bad(&f8, "");
}

T_TEST(test_decimal_scale)
{
    firn_pg_type d = mk_dec(10, 2);
    T_EQ_INT(i64_of(&d, "12345.67"), 1234567);
    T_EQ_INT(i64_of(&d, "1.5"), 150);   /* padded to the scale */
    T_EQ_INT(i64_of(&d, "7"), 700);     /* no fraction at all */
    T_EQ_INT(i64_of(&d, "1.500"), 150); /* zeros beyond the scale, as the binary decoder */
    T_EQ_INT(i64_of(&d, "-0.01"), -1);
    T_EQ_INT(i64_of(&d, "99999999.99"), 9999999999LL);
    T_EQ_INT(i64_of(&d, "-00012.30"), -1230);
    bad(&d, "1.505");        /* more nonzero digits than the scale */
    bad(&d, "100000000.00"); /* more digits than the precision */
    bad(&d, "1e5");
    bad(&d, "-");
    bad(&d, "1.");
    bad(&d, ".5");
    bad(&d, "+1");
    bad(&d, "");
    firn_pg_type d38 = mk_dec(38, 0);
    __int128 max38 = 0;
    for (int i = 0; i < 38; i++)
        max38 = max38 * 10 + 9;
    T_TRUE(i128_of(&d38, "99999999999999999999999999999999999999") == max38);
    T_TRUE(i128_of(&d38, "-99999999999999999999999999999999999999") == -max38);
    bad(&d38, "100000000000000000000000000000000000000");
    bad(&d38, "999999999999999999999999999999999999999999999999999999");
    firn_pg_type d3810 = mk_dec(38, 10);
    T_TRUE(i128_of(&d3810, "-1234567890.0123456789") == -(__int128)12345678900123456789ULL);
    /* NaN and the infinities: null, counted (as the binary decoder). */
    one o;
    one_init(&o, &d);
    T_OK(dec(&o, &d, "NaN"));
    T_OK(dec(&o, &d, "Infinity"));
    T_OK(dec(&o, &d, "-Infinity"));
    T_EQ_UINT(firn_column_null_count(o.col), 3);
    T_EQ_UINT(o.stats.nan_to_null, 3);
    one_free(&o);
}

T_TEST(test_decimal_matches_binary)
{
    /* numeric(12,3) 123456789.123 in numeric_send form: ndigits 4, weight 2, dscale 3. */
    static const uint8_t bin[] = {0, 4, 0,    2,    0x40, 0,    0,    3,
                                  0, 1, 0x09, 0x29, 0x1a, 0x85, 0x04, 0xce};
    firn_pg_type d = mk_dec(12, 3);
    one a, b;
    one_init(&a, &d);
    one_init(&b, &d);
    T_OK_ERR(firn_pg_value_decode(&d, bin, sizeof(bin), a.col, NULL, &a.err), &a.err);
    T_OK(dec(&b, &d, "-123456789.123"));
    T_EQ_INT(((const int64_t *)firn_column_values(a.col))[0],
             ((const int64_t *)firn_column_values(b.col))[0]);
    T_EQ_INT(((const int64_t *)firn_column_values(b.col))[0], -123456789123LL);
    one_free(&a);
    one_free(&b);
}

T_TEST(test_money)
{
    firn_pg_type m = mk(FIRN_PG_KIND_MONEY);
    m.precision = 19;
    m.scale = 2;
    T_TRUE(i128_of(&m, "$1,234.56") == 123456);
    T_TRUE(i128_of(&m, "-$0.05") == -5);
    T_TRUE(i128_of(&m, "($1.00)") == -100);                 /* n_sign_posn 0 locales */
    T_TRUE(i128_of(&m, "1.234,56 \xe2\x82\xac") == 123456); /* de_DE: "1.234,56 €" */
    T_TRUE(i128_of(&m, "-$92,233,720,368,547,758.08") == INT64_MIN);
    T_TRUE(i128_of(&m, "$92,233,720,368,547,758.07") == INT64_MAX);
    T_TRUE(i128_of(&m, "$0.00") == 0);
    bad(&m, "$92,233,720,368,547,758.08");
    bad(&m, "$");
    bad(&m, "");
}

T_TEST(test_bytea_uuid)
{
    firn_pg_type b = mk(FIRN_PG_KIND_BYTEA), u = mk(FIRN_PG_KIND_UUID);
    one o;
    dec_ok(&o, &b, "\\x00fF10");
    T_EQ_UINT(firn_column_offsets(o.col)[1], 3);
    T_EQ_MEM(firn_column_data(o.col), "\x00\xff\x10", 3);
    T_OK(dec(&o, &b, "\\x"));
    T_EQ_UINT(firn_column_offsets(o.col)[2], 3);
    one_free(&o);
    /* Larger than the stack buffer. */
    size_t n = 10000;
    char *big = malloc(2 + 2 * n + 1);
    memcpy(big, "\\x", 2);
    for (size_t i = 0; i < n; i++)
        memcpy(big + 2 + 2 * i, "a5", 2);
    big[2 + 2 * n] = '\0';
    dec_ok(&o, &b, big);
    T_EQ_UINT(firn_column_offsets(o.col)[1], n);
    T_EQ_INT(firn_column_data(o.col)[n - 1], 0xa5);
    one_free(&o);
    free(big);
    bad(&b, "\\x0");
    bad(&b, "\\xzz");
    bad(&b, "abc"); /* escape format is not expected */
    bad(&b, "");
    dec_ok(&o, &u, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
    T_EQ_MEM(firn_column_values(o.col),
             "\xa0\xee\xbc\x99\x9c\x0b\x4e\xf8\xbb\x6d\x6b\xb9\xbd\x38\x0a\x11", 16);
    one_free(&o);
    bad(&u, "a0eebc999c0b4ef8bb6d6bb9bd380a11");
    bad(&u, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1g");
    bad(&u, "a0eebc99-9c0b-4ef8-bb6d+6bb9bd380a11");
}

T_TEST(test_dates)
{
    firn_pg_type d = mk(FIRN_PG_KIND_DATE);
    T_EQ_INT(i32_of(&d, "1970-01-01"), 0);
    T_EQ_INT(i32_of(&d, "2000-01-01"), 10957);
    T_EQ_INT(i32_of(&d, "2024-02-29"), 19782);
    T_EQ_INT(i32_of(&d, "1969-12-31"), -1);
    T_EQ_INT(i32_of(&d, "0001-01-01"), -719162);
    T_EQ_INT(i32_of(&d, "0001-12-31 BC"), -719163);  /* the day before 1 AD */
    T_EQ_INT(i32_of(&d, "4713-01-01 BC"), -2440550); /* PostgreSQL's date2j: Julian day 38 */
    T_EQ_INT(i32_of(&d, "0044-03-15 BC"), -735160);
    T_EQ_INT(i32_of(&d, "5874897-12-31"), 2145042905);
    T_EQ_INT(i32_of(&d, "infinity"), INT32_MAX);
    T_EQ_INT(i32_of(&d, "-infinity"), -INT32_MAX);
    bad(&d, "2024-13-01");
    bad(&d, "24-01-01");
    bad(&d, "2024-01-01 AD");
    bad(&d, "0000-01-01");
    bad(&d, "2024-01-01 BC ");
    bad(&d, "Infinity");
}

T_TEST(test_times_and_timestamps)
{
    firn_pg_type tm = mk(FIRN_PG_KIND_TIME), ts = mk(FIRN_PG_KIND_TIMESTAMP),
                 tz = mk(FIRN_PG_KIND_TIMESTAMPTZ);
    T_EQ_INT(i64_of(&tm, "13:45:30.5"), ((13 * 60 + 45) * 60 + 30) * 1000000LL + 500000);
    T_EQ_INT(i64_of(&tm, "24:00:00"), 86400000000LL);
    T_EQ_INT(i64_of(&tm, "00:00:00.000001"), 1);
    bad(&tm, "24:00:01");
    bad(&tm, "12:60:00");
    bad(&tm, "12:00:00.1234567");
    bad(&tm, "12:00");
    T_EQ_INT(i64_of(&tz, "2024-05-01 10:00:00.123456+00"), 1714557600123456LL);
    T_EQ_INT(i64_of(&ts, "2024-05-01 10:00:00.123456"), 1714557600123456LL);
    T_EQ_INT(i64_of(&tz, "2024-05-01 15:30:00.123456+05:30"), 1714557600123456LL);
    T_EQ_INT(i64_of(&tz, "2024-05-01 09:59:00.123456-00:00:60"), 1714557600123456LL);
    T_EQ_INT(i64_of(&ts, "1970-01-01 00:00:00"), 0);
    T_EQ_INT(i64_of(&ts, "1969-12-31 23:59:59.999999"), -1);
    T_EQ_INT(i64_of(&ts, "4713-01-01 00:00:00 BC"), -2440550LL * 86400000000LL);
    T_EQ_INT(i64_of(&tz, "4713-01-01 00:00:00+00 BC"), -2440550LL * 86400000000LL);
    T_EQ_INT(i64_of(&ts, "infinity"), INT64_MAX);
    T_EQ_INT(i64_of(&tz, "-infinity"), -INT64_MAX);
    /* Beyond the int64 microsecond range from 1970: clamped and counted, as binary. */
    one o;
    dec_ok(&o, &ts, "294276-12-31 23:59:59.999999");
    T_EQ_INT(((const int64_t *)firn_column_values(o.col))[0], INT64_MAX - 1);
    T_EQ_UINT(o.stats.clamped, 1);
    one_free(&o);
    bad(&tz, "2024-05-01 10:00:00");    /* no offset */
    bad(&ts, "2024-05-01 10:00:00+00"); /* offset on a timestamp */
    bad(&ts, "2024-05-01T10:00:00");
    bad(&ts, "999999999-12-31 00:00:00");
}

typedef struct ivl {
    int32_t months, days;
    int64_t us;
} ivl;

static ivl ivl_of(const char *text)
{
    firn_pg_type t = mk(FIRN_PG_KIND_INTERVAL);
    one o;
    dec_ok(&o, &t, text);
    ivl v = {((const int32_t *)firn_column_values(firn_column_child(o.col, 0)))[0],
             ((const int32_t *)firn_column_values(firn_column_child(o.col, 1)))[0],
             ((const int64_t *)firn_column_values(firn_column_child(o.col, 2)))[0]};
    one_free(&o);
    return v;
}

#define T_IVL(text, m, d, u)                                                                       \
    do {                                                                                           \
        ivl v_ = ivl_of(text);                                                                     \
        T_EQ_INT(v_.months, m);                                                                    \
        T_EQ_INT(v_.days, d);                                                                      \
        T_EQ_INT(v_.us, u);                                                                        \
    } while (0)

T_TEST(test_intervals)
{
    const int64_t h4m5s6 = ((4 * 60 + 5) * 60 + 6) * 1000000LL;
    /* iso_8601 (the replication connection) */
    T_IVL("P1Y2M3DT4H5M6.789S", 14, 3, h4m5s6 + 789000);
    T_IVL("P-1Y-2M3DT-4H-5M-6.789S", -14, 3, -h4m5s6 - 789000);
    T_IVL("PT0S", 0, 0, 0);
    T_IVL("PT-0.5S", 0, 0, -500000);
    T_IVL("P-178000000Y", -2136000000, 0, 0);
    T_IVL("P-178000000Y-1DT-0.000001S", -2136000000, -1, -1);
    T_IVL("PT-2562047788H-54.775808S", 0, 0, INT64_MIN);
    T_IVL("PT2562047788H54.775807S", 0, 0, INT64_MAX);
    T_IVL("P1M", 1, 0, 0);
    T_IVL("PT1M", 0, 0, 60000000);
    /* postgres (the SQL connection) */
    T_IVL("1 year 2 mons 3 days 04:05:06.789", 14, 3, h4m5s6 + 789000);
    T_IVL("-1 years -2 mons +3 days -04:05:06.789", -14, 3, -h4m5s6 - 789000);
    T_IVL("00:00:00", 0, 0, 0);
    T_IVL("-00:00:01", 0, 0, -1000000);
    T_IVL("1 day", 0, 1, 0);
    T_IVL("-178000000 years -1 days -00:00:00.000001", -2136000000, -1, -1);
    T_IVL("-2562047788:00:54.775808", 0, 0, INT64_MIN);
    T_IVL("1 mon -1 days +00:00:01", 1, -1, 1000000);
    firn_pg_type t = mk(FIRN_PG_KIND_INTERVAL);
    bad(&t, "");
    bad(&t, "P");
    bad(&t, "P1S");   /* seconds need the T */
    bad(&t, "P1D2Y"); /* out of order */
    bad(&t, "P1.5D");
    bad(&t, "PT2562047788H54.775808S"); /* beyond int64 */
    bad(&t, "P178956971Y");             /* months beyond int32 */
    bad(&t, "1 days 2 years");
    bad(&t, "1 fortnight");
    bad(&t, "@ 1 day");
    bad(&t, "1 day  00:00:01");
    bad(&t, "00:00:00 1 day");
}

/* Reads a list<int> column (one level) into out; returns the total elements. */
static void expect_ints(firn_column *list, size_t row, const char *want)
{
    const uint32_t *off = firn_column_offsets(list);
    firn_column *el = firn_column_child(list, 0);
    const int32_t *v = firn_column_values(el);
    char got[256] = "";
    size_t o = 0;
    for (uint32_t i = off[row]; i < off[row + 1]; i++) {
        if (firn_column_is_valid(el, i))
            o += (size_t)snprintf(got + o, sizeof(got) - o, "%s%d", o ? "," : "", v[i]);
        else
            o += (size_t)snprintf(got + o, sizeof(got) - o, "%sN", o ? "," : "");
    }
    T_EQ_STR(got, want);
}

T_TEST(test_array_ints_and_shapes)
{
    firn_pg_type e = mk(FIRN_PG_KIND_INT4);
    firn_pg_type a1 = mk_arr(&e, 1), a2 = mk_arr(&e, 2);
    one o;
    one_init(&o, &a1);
    T_OK(dec(&o, &a1, "{1,2,NULL}"));
    T_OK(dec(&o, &a1, "{}"));
    T_OK(dec(&o, &a1, "{{1,2},{3,4}}")); /* flattened row-major, counted */
    T_OK(dec(&o, &a1, "[0:2]={7,8,9}")); /* lower bound dropped, counted */
    T_OK(dec(&o, &a1, " { 5 , null , \"6\" } "));
    T_OK(dec(&o, &a1, "{{{1},{2}},{{3},{4}}}"));
    T_EQ_UINT(firn_column_length(o.col), 6);
    expect_ints(o.col, 0, "1,2,N");
    expect_ints(o.col, 1, "");
    expect_ints(o.col, 2, "1,2,3,4");
    expect_ints(o.col, 3, "7,8,9");
    expect_ints(o.col, 4, "5,N,6");
    expect_ints(o.col, 5, "1,2,3,4");
    T_EQ_UINT(o.stats.array_flattened, 2);
    T_EQ_UINT(o.stats.array_lbound_lost, 1);
    one_free(&o);
    /* Declared two levels: nested lists, 1-D values wrapped, 3-D flattened inside. */
    one_init(&o, &a2);
    T_OK(dec(&o, &a2, "{{1,2},{3,4}}"));
    T_OK(dec(&o, &a2, "{7,8}"));
    T_OK(dec(&o, &a2, "[0:1][-1:0]={{1,2},{3,4}}"));
    T_OK(dec(&o, &a2, "{{{1,2}},{{3,4}}}"));
    T_OK(dec(&o, &a2, "{}"));
    T_EQ_UINT(o.stats.array_lbound_lost, 2);
    T_EQ_UINT(o.stats.array_flattened, 1);
    const uint32_t *outer = firn_column_offsets(o.col);
    firn_column *inner = firn_column_child(o.col, 0);
    T_EQ_UINT(outer[1] - outer[0], 2);
    T_EQ_UINT(outer[2] - outer[1], 1);
    T_EQ_UINT(outer[3] - outer[2], 2);
    T_EQ_UINT(outer[4] - outer[3], 2);
    T_EQ_UINT(outer[5] - outer[4], 0);
    expect_ints(inner, 0, "1,2");
    expect_ints(inner, 1, "3,4");
    expect_ints(inner, 2, "7,8");
    expect_ints(inner, 5, "1,2");
    expect_ints(inner, 6, "3,4");
    one_free(&o);
    static const char *const BAD[] = {
        "",           "{",
        "{1,2",       "{1,2}x",
        "1,2",        "{1,{2}}",
        "{{2},1}",    "{{1},{2,3}}",
        "{,}",        "{1,}",
        "{{}}",       "[0:2]={1,2}",
        "[0:1]{1,2}", "[1:2][1:1]={1,2}",
        "{a\"b}",     "{\"a}",
        "{1 2}",      "{{{{{{{1}}}}}}}",
        "{x}",        "{1\\}",
        "{\"1\"x}",
    };
    for (size_t i = 0; i < sizeof(BAD) / sizeof(BAD[0]); i++)
        bad(&a1, BAD[i]);
}

static void expect_str(firn_column *c, size_t i, const char *want)
{
    if (!want) {
        T_FALSE(firn_column_is_valid(c, i));
        return;
    }
    T_TRUE(firn_column_is_valid(c, i));
    const uint32_t *off = firn_column_offsets(c);
    T_EQ_UINT(off[i + 1] - off[i], strlen(want));
    T_EQ_MEM(firn_column_data(c) + off[i], want, strlen(want));
}

T_TEST(test_array_quoting)
{
    firn_pg_type e = mk(FIRN_PG_KIND_TEXT);
    firn_pg_type a = mk_arr(&e, 1);
    one o;
    one_init(&o, &a);
    T_OK(dec(&o, &a,
             "{\"a b\",\"with,comma\",\"quote\\\"d\",\"back\\\\slash\",NULL,\"NULL\",null,"
             "\"\",\"{}\",plain,a\\,b,\"  pad  \",x\\ ,\\\"q}"));
    firn_column *c = firn_column_child(o.col, 0);
    T_EQ_UINT(firn_column_length(c), 14);
    expect_str(c, 0, "a b");
    expect_str(c, 1, "with,comma");
    expect_str(c, 2, "quote\"d");
    expect_str(c, 3, "back\\slash");
    expect_str(c, 4, NULL);
    expect_str(c, 5, "NULL");
    expect_str(c, 6, NULL);
    expect_str(c, 7, "");
    expect_str(c, 8, "{}");
    expect_str(c, 9, "plain");
    expect_str(c, 10, "a,b");
    expect_str(c, 11, "  pad  ");
    expect_str(c, 12, "x "); /* escaped trailing space is kept */
    expect_str(c, 13, "\"q");
    one_free(&o);
    /* A long escaped element goes through the heap scratch space. */
    char big[1200];
    size_t n = 0;
    big[n++] = '{';
    big[n++] = '"';
    for (int i = 0; i < 500; i++) {
        big[n++] = '\\';
        big[n++] = '"';
    }
    big[n++] = '"';
    big[n++] = ',';
    big[n++] = 'z';
    big[n++] = '}';
    big[n] = '\0';
    one_init(&o, &a);
    T_OK(dec(&o, &a, big));
    c = firn_column_child(o.col, 0);
    T_EQ_UINT(firn_column_offsets(c)[1], 500);
    expect_str(c, 1, "z");
    one_free(&o);
}

T_TEST(test_array_elements_typed)
{
    /* box[] uses ';' between elements; text_cast elements are stored as their text. */
    firn_pg_type box = mk(FIRN_PG_KIND_TEXT);
    box.base_oid = 603;
    box.typdelim = ';';
    box.text_cast = true;
    firn_pg_type boxes = mk_arr(&box, 1);
    one o;
    one_init(&o, &boxes);
    T_OK(dec(&o, &boxes, "{(1,1),(0,0);(2,2),(1,1)}"));
    firn_column *c = firn_column_child(o.col, 0);
    T_EQ_UINT(firn_column_length(c), 2);
    expect_str(c, 0, "(1,1),(0,0)");
    expect_str(c, 1, "(2,2),(1,1)");
    one_free(&o);
    /* numeric(10,2)[]: scale padding, NaN -> null counted. */
    firn_pg_type d = mk_dec(10, 2);
    firn_pg_type ds = mk_arr(&d, 1);
    one_init(&o, &ds);
    T_OK(dec(&o, &ds, "{1.1,NaN,-2.25,NULL}"));
    c = firn_column_child(o.col, 0);
    T_EQ_INT(((const int64_t *)firn_column_values(c))[0], 110);
    T_FALSE(firn_column_is_valid(c, 1));
    T_EQ_INT(((const int64_t *)firn_column_values(c))[2], -225);
    T_FALSE(firn_column_is_valid(c, 3));
    T_EQ_UINT(o.stats.nan_to_null, 1);
    T_TRUE(dec(&o, &ds, "{1.123}") == FIRN_ERR_PARSE); /* element errors propagate */
    one_free(&o);
    /* bytea[] elements are quoted because of their backslash. */
    firn_pg_type by = mk(FIRN_PG_KIND_BYTEA);
    firn_pg_type bys = mk_arr(&by, 1);
    one_init(&o, &bys);
    T_OK(dec(&o, &bys, "{\"\\\\x00\",\"\\\\xdeadbeef\",NULL}"));
    c = firn_column_child(o.col, 0);
    T_EQ_UINT(firn_column_offsets(c)[1], 1);
    T_EQ_UINT(firn_column_offsets(c)[2], 5);
    T_EQ_MEM(firn_column_data(c) + 1, "\xde\xad\xbe\xef", 4);
    one_free(&o);
    /* interval[] */
    firn_pg_type iv = mk(FIRN_PG_KIND_INTERVAL);
    firn_pg_type ivs = mk_arr(&iv, 1);
    one_init(&o, &ivs);
    T_OK(dec(&o, &ivs, "{\"1 day\",\"-00:00:01\",PT1S}"));
    c = firn_column_child(o.col, 0);
    T_EQ_INT(((const int32_t *)firn_column_values(firn_column_child(c, 1)))[0], 1);
    T_EQ_INT(((const int64_t *)firn_column_values(firn_column_child(c, 2)))[1], -1000000);
    T_EQ_INT(((const int64_t *)firn_column_values(firn_column_child(c, 2)))[2], 1000000);
    one_free(&o);
}

T_TEST(test_as_is_kinds)
{
    static const firn_pg_kind KINDS[] = {FIRN_PG_KIND_TEXT, FIRN_PG_KIND_JSONB,
                                         FIRN_PG_KIND_NUMSTR};
    static const char *const VALUES[] = {"", "héllo \\ \"x\"", "{\"a\": [1, 2.50]}", "NaN",
                                         "-0.000010"};
    for (size_t k = 0; k < 3; k++) {
        firn_pg_type t = mk(KINDS[k]);
        one o;
        one_init(&o, &t);
        for (size_t i = 0; i < 5; i++)
            T_OK(dec(&o, &t, VALUES[i]));
        for (size_t i = 0; i < 5; i++)
            expect_str(o.col, i, VALUES[i]);
        one_free(&o);
    }
}

T_MAIN(T_CASE(test_bool_ints),
       T_CASE(test_floats_exact),
       T_CASE(test_decimal_scale),
       T_CASE(test_decimal_matches_binary),
       T_CASE(test_money),
       T_CASE(test_bytea_uuid),
       T_CASE(test_dates),
       T_CASE(test_times_and_timestamps),
       T_CASE(test_intervals),
       T_CASE(test_array_ints_and_shapes),
       T_CASE(test_array_quoting),
       T_CASE(test_array_elements_typed),
       T_CASE(test_as_is_kinds))
