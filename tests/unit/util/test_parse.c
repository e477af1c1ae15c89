/* SPDX-License-Identifier: Apache-2.0 */
/* Strict number parsing, murmur3 reference values, UUIDs. */
#include "firn/util.h"
#include "t.h"

#include <math.h>

#define S(x) x, strlen(x)

T_TEST(parse_integers)
{
    int64_t v = 0;
    firn_err err = {0};
    T_OK(firn_parse_i64(S("0"), &v, &err));
    T_EQ_INT(v, 0);
    T_OK(firn_parse_i64(S("-9223372036854775808"), &v, &err));
    T_EQ_INT(v, INT64_MIN);
    T_OK(firn_parse_i64(S("9223372036854775807"), &v, &err));
    T_EQ_INT(v, INT64_MAX);
    T_EQ_INT(firn_parse_i64(S("9223372036854775808"), &v, &err), FIRN_ERR_PARSE);
    T_EQ_STR(err.msg, "invalid integer (out of range) \"9223372036854775808\"");
    T_EQ_INT(firn_parse_i64(S(""), &v, NULL), FIRN_ERR_PARSE);
    T_EQ_INT(firn_parse_i64(S("-"), &v, NULL), FIRN_ERR_PARSE);
    T_EQ_INT(firn_parse_i64(S("+1"), &v, NULL), FIRN_ERR_PARSE);
    T_EQ_INT(firn_parse_i64(S(" 1"), &v, NULL), FIRN_ERR_PARSE);
    T_EQ_INT(firn_parse_i64(S("12a"), &v, NULL), FIRN_ERR_PARSE);
    /* Only the given length is parsed. */
    T_OK(firn_parse_i64("123456", 3, &v, NULL));
    T_EQ_INT(v, 123);
    uint64_t u = 0;
    T_OK(firn_parse_u64(S("18446744073709551615"), &u, NULL));
    T_EQ_UINT(u, UINT64_MAX);
    T_EQ_INT(firn_parse_u64(S("18446744073709551616"), &u, NULL), FIRN_ERR_PARSE);
    T_EQ_INT(firn_parse_u64(S("-1"), &u, NULL), FIRN_ERR_PARSE);
    int32_t i = 0;
    T_OK(firn_parse_i32(S("-2147483648"), &i, NULL));
    T_EQ_INT(i, INT32_MIN);
    T_EQ_INT(firn_parse_i32(S("2147483648"), &i, &err), FIRN_ERR_PARSE);
    T_EQ_STR(err.msg, "invalid 32-bit integer \"2147483648\"");
}

T_TEST(parse_doubles)
{
    double d = 0;
    T_OK(firn_parse_double(S("1.5e3"), &d, NULL));
    T_EQ_DBL(d, 1500.0);
    T_OK(firn_parse_double(S("-Infinity"), &d, NULL));
    T_TRUE(isinf(d) && d < 0);
    T_OK(firn_parse_double(S("NaN"), &d, NULL));
    T_TRUE(isnan(d));
    T_OK(firn_parse_double(S("4.9e-324"), &d, NULL));
    T_TRUE(d > 0);
    T_EQ_INT(firn_parse_double(S("1e999"), &d, NULL), FIRN_ERR_PARSE);
    T_EQ_INT(firn_parse_double(S("1.0x"), &d, NULL), FIRN_ERR_PARSE);
    T_EQ_INT(firn_parse_double(S(""), &d, NULL), FIRN_ERR_PARSE);
}

/* Reference values from the Iceberg spec, Appendix B (32-bit hash of each value). */
T_TEST(murmur3_iceberg_reference)
{
    uint8_t le[8];
    int64_t v = 34;
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)((uint64_t)v >> (8 * i));
    T_EQ_INT((int32_t)firn_murmur3_32(le, 8, 0), 2017239379);
    T_EQ_INT((int32_t)firn_murmur3_32("iceberg", 7, 0), 1210000089);
    static const uint8_t uuid[16] = {0xf7, 0x9c, 0x3e, 0x09, 0x67, 0x7c, 0x4b, 0xbd,
                                     0xa4, 0x79, 0x3f, 0x34, 0x9c, 0xb7, 0x85, 0xe7};
    T_EQ_INT((int32_t)firn_murmur3_32(uuid, 16, 0), 1488055340);
    static const uint8_t bytes[4] = {0, 1, 2, 3};
    T_EQ_INT((int32_t)firn_murmur3_32(bytes, 4, 0), -188683207);
    T_EQ_UINT(firn_murmur3_32("", 0, 0), 0);
}

T_TEST(uuid_v4_format)
{
    uint8_t a[16], b[16];
    firn_uuid_v4(a);
    firn_uuid_v4(b);
    T_TRUE(memcmp(a, b, 16) != 0);
    T_EQ_INT(a[6] >> 4, 4);
    T_EQ_INT(a[8] >> 6, 2);
    static const uint8_t fixed[16] = {0xf7, 0x9c, 0x3e, 0x09, 0x67, 0x7c, 0x4b, 0xbd,
                                      0xa4, 0x79, 0x3f, 0x34, 0x9c, 0xb7, 0x85, 0xe7};
    char s[37];
    firn_uuid_format(fixed, s);
    T_EQ_STR(s, "f79c3e09-677c-4bbd-a479-3f349cb785e7");
}

T_TEST(clocks_move)
{
    int64_t t0 = firn_monotonic_ns();
    int64_t now = firn_now_us();
    T_TRUE(now > 1700000000LL * 1000000);
    T_TRUE(firn_monotonic_ns() >= t0);
}

T_MAIN(T_CASE(parse_integers),
       T_CASE(parse_doubles),
       T_CASE(murmur3_iceberg_reference),
       T_CASE(uuid_v4_format),
       T_CASE(clocks_move))
