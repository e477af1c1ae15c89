/* SPDX-License-Identifier: Apache-2.0 */
/* Single-value serialization (spec Appendix D) and partition transforms against the spec's
 * reference values (Appendix B bucket hashes, truncate and temporal examples). */
#include "firn/manifest.h"
#include "t.h"

#define DAY_2017_11_16       17486
#define TS_2017_11_16_223108 1510871468000000LL

static firn_value val_i(firn_type t, int64_t x)
{
    firn_value v = firn_value_null((firn_ptype){t, 0, 0, 0});
    v.is_null = false;
    v.i = x;
    return v;
}

static firn_value val_bytes(firn_type t, const void *p, size_t len)
{
    firn_value v = firn_value_null((firn_ptype){t, 0, 0, t == FIRN_TYPE_FIXED ? (int32_t)len : 0});
    v.is_null = false;
    v.bytes = (firn_slice){p, len};
    return v;
}

static firn_value val_dec(int64_t unscaled, int32_t p, int32_t s)
{
    firn_value v = firn_value_null((firn_ptype){FIRN_TYPE_DECIMAL, p, s, 0});
    v.is_null = false;
    v.dec_hi = unscaled < 0 ? -1 : 0;
    v.dec_lo = (uint64_t)unscaled;
    return v;
}

static int32_t hash_of(firn_value v)
{
    firn_err err = {0};
    int32_t h = 0;
    T_OK_ERR(firn_bucket_hash(&v, &h, &err), &err);
    return h;
}

static const uint8_t UUID[16] = {0xf7, 0x9c, 0x3e, 0x09, 0x67, 0x7c, 0x4b, 0xbd,
                                 0xa4, 0x79, 0x3f, 0x34, 0x9c, 0xb7, 0x85, 0xe7};

T_TEST(bucket_hashes_match_spec)
{
    T_EQ_INT(hash_of(val_i(FIRN_TYPE_INT, 34)), 2017239379);
    T_EQ_INT(hash_of(val_i(FIRN_TYPE_LONG, 34)), 2017239379);
    T_EQ_INT(hash_of(val_dec(1420, 4, 2)), -500754589);
    T_EQ_INT(hash_of(val_i(FIRN_TYPE_DATE, DAY_2017_11_16)), -653330422);
    T_EQ_INT(hash_of(val_i(FIRN_TYPE_TIME, 81068000000LL)), -662762989);
    T_EQ_INT(hash_of(val_i(FIRN_TYPE_TIMESTAMP, TS_2017_11_16_223108)), -2047944441);
    T_EQ_INT(hash_of(val_i(FIRN_TYPE_TIMESTAMPTZ, TS_2017_11_16_223108)), -2047944441);
    T_EQ_INT(hash_of(val_i(FIRN_TYPE_TIMESTAMP_NS, TS_2017_11_16_223108 * 1000 + 1001)),
             -1207196810);
    T_EQ_INT(hash_of(val_bytes(FIRN_TYPE_STRING, "iceberg", 7)), 1210000089);
    T_EQ_INT(hash_of(val_bytes(FIRN_TYPE_UUID, UUID, 16)), 1488055340);
    T_EQ_INT(hash_of(val_bytes(FIRN_TYPE_FIXED, "\x00\x01\x02\x03", 4)), -188683207);
    T_EQ_INT(hash_of(val_bytes(FIRN_TYPE_BINARY, "\x00\x01\x02\x03", 4)), -188683207);
}

static firn_value apply(const char *transform, firn_value in)
{
    firn_err err = {0};
    firn_transform t;
    T_OK_ERR(firn_transform_parse(transform, &t, &err), &err);
    firn_value out;
    T_OK_ERR(firn_transform_apply(t, &in, &out, &err), &err);
    return out;
}

T_TEST(bucket_and_truncate)
{
    firn_value b = apply("bucket[16]", val_i(FIRN_TYPE_LONG, 34));
    T_EQ_INT(b.type.type, FIRN_TYPE_INT);
    T_EQ_INT(b.i, (2017239379 & 0x7fffffff) % 16);
    b = apply("bucket[100]", val_bytes(FIRN_TYPE_STRING, "iceberg", 7));
    T_EQ_INT(b.i, 1210000089 % 100);
    T_EQ_INT(apply("truncate[10]", val_i(FIRN_TYPE_INT, 1)).i, 0);
    T_EQ_INT(apply("truncate[10]", val_i(FIRN_TYPE_INT, -1)).i, -10);
    T_EQ_INT(apply("truncate[10]", val_i(FIRN_TYPE_LONG, 25)).i, 20);
    firn_value d = apply("truncate[50]", val_dec(1065, 4, 2));
    T_EQ_INT((int64_t)d.dec_lo, 1050);
    T_EQ_INT(d.type.scale, 2);
    firn_value s = apply("truncate[3]", val_bytes(FIRN_TYPE_STRING, "iceberg", 7));
    T_EQ_UINT(s.bytes.len, 3);
    /* Code points, not bytes: "é" is 2 bytes, "雪" 3, "🧊" 4. */
    const char *u = "\xc3\xa9\xe9\x9b\xaa\xf0\x9f\xa7\x8a!";
    T_EQ_UINT(apply("truncate[2]", val_bytes(FIRN_TYPE_STRING, u, strlen(u))).bytes.len, 5);
    T_EQ_UINT(apply("truncate[3]", val_bytes(FIRN_TYPE_STRING, u, strlen(u))).bytes.len, 9);
    T_EQ_UINT(apply("truncate[3]", val_bytes(FIRN_TYPE_BINARY, "\x01\x02\x03\x04", 4)).bytes.len,
              3);
    firn_value n = apply("bucket[4]", firn_value_null((firn_ptype){FIRN_TYPE_LONG, 0, 0, 0}));
    T_TRUE(n.is_null);
    T_EQ_INT(n.type.type, FIRN_TYPE_INT);
}

T_TEST(temporal_transforms)
{
    firn_value ts = val_i(FIRN_TYPE_TIMESTAMPTZ, TS_2017_11_16_223108);
    T_EQ_INT(apply("year", ts).i, 47);
    T_EQ_INT(apply("month", ts).i, 47 * 12 + 10);
    firn_value day = apply("day", ts);
    T_EQ_INT(day.i, DAY_2017_11_16);
    T_EQ_INT(day.type.type, FIRN_TYPE_DATE);
    T_EQ_INT(apply("hour", ts).i, DAY_2017_11_16 * 24LL + 22);
    firn_value before = val_i(FIRN_TYPE_TIMESTAMP, -1);
    T_EQ_INT(apply("year", before).i, -1);
    T_EQ_INT(apply("month", before).i, -1);
    T_EQ_INT(apply("day", before).i, -1);
    T_EQ_INT(apply("hour", before).i, -1);
    firn_value date = val_i(FIRN_TYPE_DATE, DAY_2017_11_16);
    T_EQ_INT(apply("year", date).i, 47);
    T_EQ_INT(apply("month", date).i, 574);
    T_EQ_INT(apply("day", date).i, DAY_2017_11_16);
    T_EQ_INT(apply("month", val_i(FIRN_TYPE_DATE, -365)).i, -12);
    firn_value ns = val_i(FIRN_TYPE_TIMESTAMP_NS, TS_2017_11_16_223108 * 1000 + 5);
    T_EQ_INT(apply("day", ns).i, DAY_2017_11_16);
    T_EQ_INT(apply("identity", date).i, DAY_2017_11_16);
    T_TRUE(apply("void", date).is_null);
}

T_TEST(transform_parse_and_types)
{
    firn_err err = {0};
    firn_transform t;
    const char *bad[] = {"bucket",       "bucket[]", "bucket[0]",   "bucket[x]",
                         "truncate[-1]", "days",     "identity[1]", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        T_EQ_INT(firn_transform_parse(bad[i], &t, &err), FIRN_ERR_UNSUPPORTED);
    T_OK(firn_transform_parse("bucket[16]", &t, &err));
    char name[32];
    firn_transform_format(t, name, sizeof name);
    T_EQ_STR(name, "bucket[16]");
    firn_ptype out;
    T_EQ_INT(firn_transform_result_type(t, (firn_ptype){FIRN_TYPE_DOUBLE, 0, 0, 0}, &out, &err),
             FIRN_ERR_UNSUPPORTED);
    T_OK(firn_transform_parse("hour", &t, &err));
    T_EQ_INT(firn_transform_result_type(t, (firn_ptype){FIRN_TYPE_DATE, 0, 0, 0}, &out, &err),
             FIRN_ERR_UNSUPPORTED);
    T_OK(firn_transform_parse("truncate[4]", &t, &err));
    T_EQ_INT(firn_transform_result_type(t, (firn_ptype){FIRN_TYPE_UUID, 0, 0, 0}, &out, &err),
             FIRN_ERR_UNSUPPORTED);
    T_OK(firn_transform_result_type(t, (firn_ptype){FIRN_TYPE_DECIMAL, 9, 2, 0}, &out, &err));
    T_EQ_INT(out.type, FIRN_TYPE_DECIMAL);
    T_EQ_INT(out.precision, 9);
}

static void check_bytes(firn_value v, const char *hex_want)
{
    firn_err err = {0};
    firn_buf b;
    firn_buf_init(&b, 64);
    T_OK_ERR(firn_value_to_bytes(&v, &b, &err), &err);
    char got[80] = {0};
    for (size_t i = 0; i < b.len; i++)
        snprintf(got + 2 * i, 3, "%02x", b.data[i]);
    T_EQ_STR(got, hex_want);
    firn_value back;
    T_OK_ERR(firn_value_from_bytes(v.type, b.data, b.len, &back, &err), &err);
    T_EQ_INT(firn_value_compare(&v, &back), 0);
    if (v.type.type == FIRN_TYPE_DECIMAL) {
        T_EQ_INT(back.dec_hi, v.dec_hi);
        T_EQ_UINT(back.dec_lo, v.dec_lo);
    }
    firn_buf_deinit(&b);
}

T_TEST(single_value_encodings)
{
    firn_value b = val_i(FIRN_TYPE_BOOLEAN, 0);
    b.b = true;
    check_bytes(b, "01");
    check_bytes(val_i(FIRN_TYPE_INT, -2), "feffffff");
    check_bytes(val_i(FIRN_TYPE_DATE, DAY_2017_11_16), "4e440000");
    check_bytes(val_i(FIRN_TYPE_LONG, 1), "0100000000000000");
    check_bytes(val_i(FIRN_TYPE_TIMESTAMPTZ, -1), "ffffffffffffffff");
    firn_value f = val_i(FIRN_TYPE_FLOAT, 0);
    f.d = 1.0;
    check_bytes(f, "0000803f");
    firn_value d = val_i(FIRN_TYPE_DOUBLE, 0);
    d.d = -2.5;
    check_bytes(d, "00000000000004c0");
    check_bytes(val_dec(1420, 4, 2), "058c");
    check_bytes(val_dec(0, 4, 2), "00");
    check_bytes(val_dec(-1, 4, 2), "ff");
    check_bytes(val_dec(128, 9, 0), "0080");
    check_bytes(val_dec(-129, 9, 0), "ff7f");
    check_bytes(val_dec(INT64_MIN, 38, 0), "8000000000000000");
    check_bytes(val_bytes(FIRN_TYPE_STRING, "ab", 2), "6162");
    check_bytes(val_bytes(FIRN_TYPE_STRING, "", 0), "");
    check_bytes(val_bytes(FIRN_TYPE_UUID, UUID, 16), "f79c3e09677c4bbda4793f349cb785e7");
    check_bytes(val_bytes(FIRN_TYPE_FIXED, "\x00\x09", 2), "0009");
    /* Promoted types read their shorter encodings; wrong lengths fail. */
    firn_err err = {0};
    firn_value v;
    T_OK(firn_value_from_bytes((firn_ptype){FIRN_TYPE_LONG, 0, 0, 0}, "\xfe\xff\xff\xff", 4, &v,
                               &err));
    T_EQ_INT(v.i, -2);
    T_OK(firn_value_from_bytes((firn_ptype){FIRN_TYPE_DOUBLE, 0, 0, 0}, "\x00\x00\x80\x3f", 4, &v,
                               &err));
    T_EQ_DBL(v.d, 1.0);
    T_EQ_INT(firn_value_from_bytes((firn_ptype){FIRN_TYPE_INT, 0, 0, 0}, "\x01", 1, &v, &err),
             FIRN_ERR_PARSE);
    T_EQ_INT(firn_value_from_bytes((firn_ptype){FIRN_TYPE_UUID, 0, 0, 0}, "\x01", 1, &v, &err),
             FIRN_ERR_PARSE);
    T_EQ_INT(firn_value_from_bytes((firn_ptype){FIRN_TYPE_DECIMAL, 38, 0, 0}, "", 0, &v, &err),
             FIRN_ERR_PARSE);
}

T_TEST(value_ordering)
{
    firn_value a = val_i(FIRN_TYPE_DOUBLE, 0), b = val_i(FIRN_TYPE_DOUBLE, 0);
    a.d = -0.0;
    b.d = 0.0;
    T_TRUE(firn_value_compare(&a, &b) < 0);
    b.d = __builtin_nan("");
    T_TRUE(firn_value_compare(&a, &b) < 0);
    firn_value s1 = val_bytes(FIRN_TYPE_STRING, "ab", 2), s2 = val_bytes(FIRN_TYPE_STRING, "a", 1);
    firn_value s3 = val_bytes(FIRN_TYPE_STRING, "\xc3\xa9", 2);
    T_TRUE(firn_value_compare(&s2, &s1) < 0);
    T_TRUE(firn_value_compare(&s1, &s3) < 0);
    firn_value d1 = val_dec(-5, 9, 2), d2 = val_dec(3, 9, 2);
    T_TRUE(firn_value_compare(&d1, &d2) < 0);
}

T_TEST(partition_paths)
{
    firn_err err = {0};
    firn_partition_spec *spec = firn_partition_spec_new(0);
    firn_transform t;
    T_OK(firn_transform_parse("day", &t, &err));
    firn_partition_spec_add(spec, 4, 1000, "ts_day", t);
    T_OK(firn_transform_parse("bucket[8]", &t, &err));
    firn_partition_spec_add(spec, 1, 1001, "id_bucket", t);
    T_OK(firn_transform_parse("identity", &t, &err));
    firn_partition_spec_add(spec, 2, 1002, "na me", t);
    T_OK(firn_transform_parse("hour", &t, &err));
    firn_partition_spec_add(spec, 4, 1003, "ts_hour", t);
    T_OK(firn_transform_parse("month", &t, &err));
    firn_partition_spec_add(spec, 4, 1004, "ts_month", t);
    firn_value vals[5] = {
        val_i(FIRN_TYPE_DATE, DAY_2017_11_16),
        val_i(FIRN_TYPE_INT, 3),
        val_bytes(FIRN_TYPE_STRING, "a b/c\xc3\xa9", 7),
        val_i(FIRN_TYPE_INT, DAY_2017_11_16 * 24LL + 22),
        firn_value_null((firn_ptype){FIRN_TYPE_INT, 0, 0, 0}),
    };
    firn_buf out;
    firn_buf_init(&out, 1024);
    T_OK_ERR(firn_partition_path(spec, vals, &out, &err), &err);
    T_EQ_STR((char *)out.data, "ts_day=2017-11-16/id_bucket=3/na+me=a+b%2Fc%C3%A9/"
                               "ts_hour=2017-11-16-22/ts_month=null");
    firn_buf_reset(&out);
    vals[4] = val_i(FIRN_TYPE_INT, 574);
    firn_partition_spec sub = {0, 1, &spec->fields[4]};
    T_OK_ERR(firn_partition_path(&sub, &vals[4], &out, &err), &err);
    T_EQ_STR((char *)out.data, "ts_month=2017-11");
    firn_buf_reset(&out);
    T_OK(firn_partition_spec_fields_json(spec, &out));
    T_TRUE(
        strstr((char *)out.data,
               "{\"name\":\"ts_day\",\"transform\":\"day\",\"source-id\":4,\"field-id\":1000}") !=
        NULL);
    firn_buf_deinit(&out);
    firn_partition_spec_free(spec);
}

T_MAIN(T_CASE(bucket_hashes_match_spec),
       T_CASE(bucket_and_truncate),
       T_CASE(temporal_transforms),
       T_CASE(transform_parse_and_types),
       T_CASE(single_value_encodings),
       T_CASE(value_ordering),
       T_CASE(partition_paths))
