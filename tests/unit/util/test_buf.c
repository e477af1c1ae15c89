/* SPDX-License-Identifier: Apache-2.0 */
/* Bounded buffer, fixed-width writers, varints and the read cursor. */
#include "firn/util.h"
#include "t.h"

#include <string.h>

T_TEST(buf_append_and_nul)
{
    firn_buf b;
    firn_buf_init(&b, 100);
    T_OK(firn_buf_append(&b, "abc", 3));
    T_OK(firn_buf_appendf(&b, "-%d-%s", 42, "x"));
    T_EQ_UINT(b.len, 8);
    T_EQ_STR((char *)b.data, "abc-42-x");
    T_EQ_INT(b.data[b.len], 0);
    firn_buf_reset(&b);
    T_EQ_UINT(b.len, 0);
    T_EQ_STR((char *)b.data, "");
    firn_buf_deinit(&b);
}

T_TEST(buf_limit_leaves_contents)
{
    firn_buf b;
    firn_buf_init(&b, 5);
    T_OK(firn_buf_append(&b, "1234", 4));
    T_EQ_INT(firn_buf_append(&b, "56", 2), FIRN_ERR_TOO_LARGE);
    T_EQ_STR((char *)b.data, "1234");
    T_EQ_INT(firn_buf_appendf(&b, "%s", "xy"), FIRN_ERR_TOO_LARGE);
    T_EQ_STR((char *)b.data, "1234");
    T_OK(firn_buf_append(&b, "5", 1));
    T_EQ_STR((char *)b.data, "12345");
    T_EQ_INT(firn_wr_u8(&b, 1), FIRN_ERR_TOO_LARGE);
    firn_buf_deinit(&b);
}

T_TEST(buf_room_and_commit)
{
    firn_buf b;
    firn_buf_init(&b, 10);
    T_OK(firn_buf_append(&b, "ab", 2));
    size_t room = 0;
    uint8_t *at = firn_buf_room(&b, 3, &room);
    T_TRUE(at == b.data + 2 && room >= 3 && room <= 8); /* the NUL's byte is not room */
    memcpy(at, "cde", 3);
    firn_buf_commit(&b, 3);
    T_EQ_UINT(b.len, 5);
    T_EQ_STR((char *)b.data, "abcde"); /* NUL-terminated again */
    at = firn_buf_room(&b, 5, &room);
    T_TRUE(at != NULL && room == 5); /* up to max, which leaves exactly 5 */
    memcpy(at, "fghij", 5);
    firn_buf_commit(&b, 5);
    T_EQ_STR((char *)b.data, "abcdefghij");
    T_TRUE(firn_buf_room(&b, 1, &room) == NULL && room == 0); /* past max */
    T_EQ_STR((char *)b.data, "abcdefghij");
    firn_buf_deinit(&b);
}

T_TEST(buf_take_resets)
{
    firn_buf b;
    firn_buf_init(&b, 1 << 20);
    for (int i = 0; i < 1000; i++)
        T_OK(firn_buf_appendf(&b, "%04d", i));
    size_t len = 0;
    uint8_t *p = firn_buf_take(&b, &len);
    T_EQ_UINT(len, 4000);
    T_EQ_MEM(p + 3996, "0999", 4);
    T_EQ_UINT(b.len, 0);
    T_TRUE(b.data == NULL);
    firn_free(p);
    p = firn_buf_take(&b, &len);
    T_EQ_UINT(len, 0);
    T_EQ_STR((char *)p, "");
    firn_free(p);
}

T_TEST(writers_and_reader_round_trip)
{
    firn_buf b;
    firn_buf_init(&b, 1024);
    T_OK(firn_wr_u8(&b, 0xab));
    T_OK(firn_wr_be16(&b, 0x1234));
    T_OK(firn_wr_be32(&b, 0xdeadbeef));
    T_OK(firn_wr_be64(&b, 0x0102030405060708ull));
    T_OK(firn_wr_le32(&b, 0xdeadbeef));
    T_OK(firn_wr_le64(&b, 0x0102030405060708ull));
    T_OK(firn_buf_append(&b, "hi\0", 3));
    static const uint8_t expect_be32[] = {0xde, 0xad, 0xbe, 0xef};
    static const uint8_t expect_le32[] = {0xef, 0xbe, 0xad, 0xde};
    T_EQ_MEM(b.data + 3, expect_be32, 4);
    T_EQ_MEM(b.data + 15, expect_le32, 4);

    firn_rd r;
    firn_rd_init(&r, b.data, b.len);
    T_EQ_UINT(firn_rd_u8(&r), 0xab);
    T_EQ_UINT(firn_rd_be16(&r), 0x1234);
    T_EQ_UINT(firn_rd_be32(&r), 0xdeadbeef);
    T_EQ_UINT(firn_rd_be64(&r), 0x0102030405060708ull);
    T_EQ_UINT(firn_rd_le32(&r), 0xdeadbeef);
    T_EQ_UINT(firn_rd_le64(&r), 0x0102030405060708ull);
    size_t n = 0;
    T_EQ_STR(firn_rd_cstr(&r, &n), "hi");
    T_EQ_UINT(n, 2);
    T_TRUE(firn_rd_ok(&r));
    T_EQ_UINT(firn_rd_remaining(&r), 0);
    /* Short read: sticky failure, zero value. */
    T_EQ_UINT(firn_rd_be32(&r), 0);
    T_FALSE(firn_rd_ok(&r));
    T_TRUE(firn_rd_bytes(&r, 0) == NULL);
    firn_buf_deinit(&b);
}

T_TEST(cstr_without_nul_fails)
{
    firn_rd r;
    firn_rd_init(&r, "abc", 3);
    T_TRUE(firn_rd_cstr(&r, NULL) == NULL);
    T_FALSE(firn_rd_ok(&r));
}

T_TEST(uvarint_round_trip_and_overlong)
{
    static const uint64_t values[] = {
        0, 1, 127, 128, 300, 16383, 16384, UINT32_MAX, UINT64_MAX - 1, UINT64_MAX};
    firn_buf b;
    firn_buf_init(&b, 1024);
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
        T_OK(firn_wr_uvarint(&b, values[i]));
    firn_rd r;
    firn_rd_init(&r, b.data, b.len);
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
        T_EQ_UINT(firn_rd_uvarint(&r), values[i]);
    T_TRUE(firn_rd_ok(&r));
    firn_buf_deinit(&b);

    static const uint8_t overlong[11] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                         0xff, 0xff, 0xff, 0xff, 0x01};
    firn_rd_init(&r, overlong, sizeof(overlong));
    (void)firn_rd_uvarint(&r);
    T_FALSE(firn_rd_ok(&r));
    static const uint8_t truncated[2] = {0x80, 0x80};
    firn_rd_init(&r, truncated, sizeof(truncated));
    (void)firn_rd_uvarint(&r);
    T_FALSE(firn_rd_ok(&r));
}

T_TEST(zigzag)
{
    T_EQ_UINT(firn_zigzag64(0), 0);
    T_EQ_UINT(firn_zigzag64(-1), 1);
    T_EQ_UINT(firn_zigzag64(1), 2);
    T_EQ_UINT(firn_zigzag64(-2), 3);
    T_EQ_UINT(firn_zigzag64(INT64_MIN), UINT64_MAX);
    T_EQ_INT(firn_unzigzag64(firn_zigzag64(INT64_MAX)), INT64_MAX);
    T_EQ_INT(firn_unzigzag64(firn_zigzag64(-123456789)), -123456789);
}

T_TEST(buf_append_fast_as_append)
{
    /* the inline path (room there), the call path (empty, growing) and the limit, each against
     * the bytes firn_buf_append leaves */
    firn_buf b, want;
    firn_buf_init(&b, 70);
    firn_buf_init(&want, 70);
    T_OK(firn_buf_append_fast(&b, "", 0)); /* no memory yet: the call path */
    for (int i = 0; i < 9; i++) {
        char chunk[8];
        memset(chunk, 'a' + i, sizeof(chunk));
        T_OK(firn_buf_append_fast(&b, chunk, (size_t)i));
        T_OK(firn_buf_append(&want, chunk, (size_t)i));
        T_EQ_UINT(b.len, want.len);
        T_TRUE(memcmp(b.data, want.data, want.len) == 0);
        T_EQ_INT(b.data[b.len], 0);
    }
    T_EQ_UINT(b.len, 36);
    T_OK(firn_buf_append_fast(&b, "0123456789012345678901234567890123", 34)); /* len 70 = max */
    T_EQ_INT(firn_buf_append_fast(&b, "x", 1), FIRN_ERR_TOO_LARGE);
    T_EQ_UINT(b.len, 70);
    T_EQ_INT(b.data[70], 0);
    firn_buf_deinit(&b);
    firn_buf_deinit(&want);
}

T_MAIN(T_CASE(buf_append_and_nul),
       T_CASE(buf_append_fast_as_append),
       T_CASE(buf_limit_leaves_contents),
       T_CASE(buf_room_and_commit),
       T_CASE(buf_take_resets),
       T_CASE(writers_and_reader_round_trip),
       T_CASE(cstr_without_nul_fails),
       T_CASE(uvarint_round_trip_and_overlong),
       T_CASE(zigzag))
