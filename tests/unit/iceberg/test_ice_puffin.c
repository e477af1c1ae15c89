/* SPDX-License-Identifier: Apache-2.0 */
/* Position bitmaps, deletion-vector-v1 blobs and Puffin files: DELETES.md §4 test vectors byte for
 * byte, hand-built array/bitset/run containers from other writers, round trips of random sets,
 * corrupt inputs refused. */
#include "firn/puffin.h"
#include "t.h"

#include <stdlib.h>

/* Hex (spaces ignored) into out; returns the byte count. */
static size_t unhex(const char *hex, uint8_t *out, size_t cap)
{
    size_t n = 0;
    int hi = -1;
    for (const char *p = hex; *p; p++) {
        int v;
        if (*p >= '0' && *p <= '9')
            v = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            v = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F')
            v = *p - 'A' + 10;
        else
            continue;
        if (hi < 0) {
            hi = v;
            continue;
        }
        T_TRUE(n < cap);
        out[n++] = (uint8_t)(hi << 4 | v);
        hi = -1;
    }
    return n;
}

static void check_vector(firn_bitmap64 *b, const char *hex)
{
    uint8_t want[256];
    size_t n = unhex(hex, want, sizeof want);
    firn_buf out;
    firn_buf_init(&out, 1 << 20);
    T_OK(firn_dv_encode(b, &out));
    T_EQ_UINT(out.len, n);
    T_EQ_MEM(out.data, want, n);
    firn_bitmap64 *back = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_dv_decode(want, n, &back, &err), &err);
    T_EQ_UINT(firn_bitmap64_cardinality(back), firn_bitmap64_cardinality(b));
    firn_bitmap64_free(back);
    firn_buf_deinit(&out);
}

T_TEST(dv_test_vectors)
{
    firn_bitmap64 *b = firn_bitmap64_new();
    firn_bitmap64_add(b, 5);
    check_vector(b, "00000022 D1D33964 0100000000000000 00000000 3A300000 01000000 0000 0000 "
                    "10000000 0500 8AD140F0");
    firn_bitmap64_add(b, 1);
    firn_bitmap64_add(b, 5);
    check_vector(b, "00000024 D1D33964 0100000000000000 00000000 3A300000 01000000 0000 0100 "
                    "10000000 0100 0500 3E6E302F");
    firn_bitmap64_free(b);
    b = firn_bitmap64_new();
    firn_bitmap64_add_range(b, 0, 100);
    check_vector(b, "0000001F D1D33964 0100000000000000 00000000 3B300000 01 0000 6300 0100 0000 "
                    "6300 883CD529");
    firn_bitmap64_free(b);
}

T_TEST(dv_empty_and_sparse_keys)
{
    firn_bitmap64 *b = firn_bitmap64_new();
    firn_buf empty;
    firn_buf_init(&empty, 1 << 20);
    T_OK(firn_dv_encode(b, &empty));
    T_EQ_UINT(empty.len, 4 + 4 + 8 + 4);
    firn_bitmap64 *none = NULL;
    firn_err e0 = {0};
    T_OK_ERR(firn_dv_decode(empty.data, empty.len, &none, &e0), &e0);
    T_EQ_UINT(firn_bitmap64_cardinality(none), 0);
    firn_bitmap64_free(none);
    firn_buf_deinit(&empty);
    /* A position in the second 2^32 block: Java writes an empty bitmap for key 0 first. */
    firn_bitmap64_add(b, ((uint64_t)1 << 32) + 7);
    firn_buf out;
    firn_buf_init(&out, 1 << 20);
    T_OK(firn_bitmap64_serialize(b, &out));
    uint8_t want[64];
    size_t n = unhex("0200000000000000 00000000 3A300000 00000000 "
                     "01000000 3A300000 01000000 0000 0000 10000000 0700",
                     want, sizeof want);
    T_EQ_UINT(out.len, n);
    T_EQ_MEM(out.data, want, n);
    firn_bitmap64 *back = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_bitmap64_deserialize(out.data, out.len, &back, &err), &err);
    T_TRUE(firn_bitmap64_contains(back, ((uint64_t)1 << 32) + 7));
    T_FALSE(firn_bitmap64_contains(back, 7));
    T_EQ_UINT(firn_bitmap64_cardinality(back), 1);
    firn_bitmap64_free(back);
    firn_buf_deinit(&out);
    firn_bitmap64_free(b);
}

/* A 32-bit portable bitmap with a bitset container and a run container, laid out by hand as
 * CRoaring writes them (cookie 12347 with four containers: offsets present). */
T_TEST(dv_decodes_foreign_containers)
{
    firn_buf v;
    firn_buf_init(&v, 1 << 20);
    T_OK(firn_wr_le64(&v, 1));
    T_OK(firn_wr_le32(&v, 0));
    size_t start = v.len;
    T_OK(firn_wr_le32(&v, 12347u | 3u << 16));
    T_OK(firn_wr_u8(&v, 0x0A)); /* containers 1 and 3 are runs */
    /* keys/cardinality-1: 0 array {3, 9}; 1 run [0, 9999]; 2 bitset (even values); 5 run */
    uint16_t desc[] = {0, 1, 1, 9999, 2, 32767, 5, 1};
    for (int i = 0; i < 8; i++)
        T_OK(firn_wr_le16(&v, desc[i]));
    size_t sizes[] = {4, 6, 8192, 6};
    size_t at = 4 + 1 + 16 + 16;
    for (int i = 0; i < 4; i++) {
        T_OK(firn_wr_le32(&v, (uint32_t)at));
        at += sizes[i];
    }
    T_OK(firn_wr_le16(&v, 3));
    T_OK(firn_wr_le16(&v, 9));
    T_OK(firn_wr_le16(&v, 1)); /* one run: 0..9999 */
    T_OK(firn_wr_le16(&v, 0));
    T_OK(firn_wr_le16(&v, 9999));
    for (int w = 0; w < 1024; w++)
        T_OK(firn_wr_le64(&v, 0x5555555555555555ull));
    T_OK(firn_wr_le16(&v, 1)); /* one run: 65534..65535 */
    T_OK(firn_wr_le16(&v, 65534));
    T_OK(firn_wr_le16(&v, 1));
    T_EQ_UINT(v.len - start, at);
    firn_bitmap64 *b = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_bitmap64_deserialize(v.data, v.len, &b, &err), &err);
    T_EQ_UINT(firn_bitmap64_cardinality(b), 2 + 10000 + 32768 + 2);
    T_TRUE(firn_bitmap64_contains(b, 3) && firn_bitmap64_contains(b, 9));
    T_FALSE(firn_bitmap64_contains(b, 4));
    T_TRUE(firn_bitmap64_contains(b, 65536 + 9999));
    T_FALSE(firn_bitmap64_contains(b, 65536 + 10000));
    T_TRUE(firn_bitmap64_contains(b, 2 * 65536 + 4));
    T_FALSE(firn_bitmap64_contains(b, 2 * 65536 + 5));
    T_TRUE(firn_bitmap64_contains(b, 5 * 65536 + 65535));
    /* Re-serialized, it reads back to the same set (runs chosen where smaller). */
    firn_buf again;
    firn_buf_init(&again, 1 << 20);
    T_OK(firn_bitmap64_serialize(b, &again));
    firn_bitmap64 *b2 = NULL;
    T_OK_ERR(firn_bitmap64_deserialize(again.data, again.len, &b2, &err), &err);
    T_EQ_UINT(firn_bitmap64_cardinality(b2), firn_bitmap64_cardinality(b));
    T_TRUE(firn_bitmap64_contains(b2, 2 * 65536 + 65534));
    T_FALSE(firn_bitmap64_contains(b2, 2 * 65536 + 65535));
    firn_bitmap64_free(b2);
    firn_buf_deinit(&again);
    firn_bitmap64_free(b);
    firn_buf_deinit(&v);
}

static bool collect(void *ctx, uint64_t pos)
{
    uint64_t **p = ctx;
    *(*p)++ = pos;
    return true;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

T_TEST(dv_random_round_trips)
{
    srand(7);
    for (int round = 0; round < 30; round++) {
        /* dense (one container), medium (arrays and bitsets), sparse over 2^33 (one value per
         * container, several 2^32 blocks) */
        uint64_t span = round % 3 == 0 ? 5000 : (round % 3 == 1 ? 300000 : ((uint64_t)1 << 33));
        size_t n = (size_t)(rand() % (round % 3 == 2 ? 3000 : 20000));
        uint64_t *pos = firn_calloc(n + 1, sizeof(uint64_t));
        firn_bitmap64 *a = firn_bitmap64_new(), *b = firn_bitmap64_new();
        for (size_t i = 0; i < n; i++) {
            pos[i] = ((uint64_t)rand() << 16 ^ (uint64_t)rand()) % span;
            firn_bitmap64_add(i % 2 ? a : b, pos[i]);
        }
        firn_bitmap64_or(a, b);
        qsort(pos, n, sizeof(uint64_t), cmp_u64);
        size_t uniq = 0;
        for (size_t i = 0; i < n; i++) {
            if (i == 0 || pos[i] != pos[i - 1])
                pos[uniq++] = pos[i];
        }
        T_EQ_UINT(firn_bitmap64_cardinality(a), uniq);
        firn_buf out;
        firn_buf_init(&out, 1 << 24);
        T_OK(firn_dv_encode(a, &out));
        firn_bitmap64 *back = NULL;
        firn_err err = {0};
        T_OK_ERR(firn_dv_decode(out.data, out.len, &back, &err), &err);
        uint64_t *got = firn_calloc(uniq + 1, sizeof(uint64_t)), *w = got;
        T_EQ_UINT(firn_bitmap64_cardinality(back), uniq);
        firn_bitmap64_foreach(back, collect, &w);
        T_EQ_MEM(got, pos, uniq * sizeof(uint64_t));
        for (size_t i = 0; i < uniq; i += 97)
            T_TRUE(firn_bitmap64_contains(back, pos[i]));
        firn_free(got);
        firn_bitmap64_free(back);
        firn_buf_deinit(&out);
        firn_bitmap64_free(a);
        firn_bitmap64_free(b);
        firn_free(pos);
    }
}

T_TEST(dv_ranges_and_dense_containers)
{
    firn_bitmap64 *b = firn_bitmap64_new();
    firn_bitmap64_add_range(b, 100, 70000);   /* crosses a container */
    firn_bitmap64_add_range(b, 65530, 65540); /* overlaps */
    for (uint64_t p = 200000; p < 260000; p += 2)
        firn_bitmap64_add(b, p); /* dense, no runs: bitset */
    T_EQ_UINT(firn_bitmap64_cardinality(b), 69900 + 30000);
    firn_buf out;
    firn_buf_init(&out, 1 << 24);
    T_OK(firn_dv_encode(b, &out));
    T_TRUE(out.len < 2 * 8192 + 200); /* the range is two run containers */
    firn_bitmap64 *back = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_dv_decode(out.data, out.len, &back, &err), &err);
    T_EQ_UINT(firn_bitmap64_cardinality(back), 99900);
    T_TRUE(firn_bitmap64_contains(back, 69999) && !firn_bitmap64_contains(back, 70000));
    T_TRUE(firn_bitmap64_contains(back, 200002) && !firn_bitmap64_contains(back, 200003));
    firn_bitmap64_free(back);
    firn_buf_deinit(&out);
    firn_bitmap64_free(b);
}

T_TEST(dv_corrupt_inputs)
{
    firn_bitmap64 *b = firn_bitmap64_new();
    firn_bitmap64_add(b, 5);
    firn_bitmap64_add(b, 70000);
    firn_buf out;
    firn_buf_init(&out, 1 << 20);
    T_OK(firn_dv_encode(b, &out));
    firn_err err = {0};
    firn_bitmap64 *back = NULL;
    /* Every single-byte flip and every truncation is refused, never crashes. */
    for (size_t i = 0; i < out.len; i++) {
        out.data[i] ^= 0x41;
        T_EQ_INT(firn_dv_decode(out.data, out.len, &back, &err), FIRN_ERR_PARSE);
        out.data[i] ^= 0x41;
        T_EQ_INT(firn_dv_decode(out.data, i, &back, &err), FIRN_ERR_PARSE);
    }
    /* Raw vectors: unknown cookie, descending keys, trailing bytes. */
    uint8_t raw[64];
    size_t n = unhex("0100000000000000 00000000 39300000 01000000", raw, sizeof raw);
    T_EQ_INT(firn_bitmap64_deserialize(raw, n, &back, &err), FIRN_ERR_PARSE);
    n = unhex("0100000000000000 00000000 3A300000 02000000 0100 0000 0000 0000 "
              "18000000 1A000000 0100 0100",
              raw, sizeof raw);
    T_EQ_INT(firn_bitmap64_deserialize(raw, n, &back, &err), FIRN_ERR_PARSE);
    n = unhex("0100000000000000 00000000 3A300000 00000000 00", raw, sizeof raw);
    T_EQ_INT(firn_bitmap64_deserialize(raw, n, &back, &err), FIRN_ERR_PARSE);
    firn_buf_deinit(&out);
    firn_bitmap64_free(b);
}

T_TEST(puffin_file_layout)
{
    firn_puffin_writer *w = firn_puffin_writer_new("firn 0.1.0");
    firn_bitmap64 *a = firn_bitmap64_new(), *b = firn_bitmap64_new();
    firn_bitmap64_add(a, 5);
    firn_bitmap64_add_range(b, 0, 100);
    int64_t off_a, len_a, off_b, len_b;
    firn_err err = {0};
    T_OK_ERR(firn_puffin_writer_add_dv(w, "s3://b/t/data/a.parquet", a, &off_a, &len_a, &err),
             &err);
    T_OK_ERR(firn_puffin_writer_add_dv(w, "s3://b/t/data/b.parquet", b, &off_b, &len_b, &err),
             &err);
    T_EQ_INT(off_a, 4);
    T_EQ_INT(len_a, 42);
    T_EQ_INT(off_b, 46);
    T_EQ_INT(len_b, 39);
    T_EQ_UINT(firn_puffin_writer_count(w), 2);
    firn_buf file;
    firn_buf_init(&file, 1 << 20);
    T_OK_ERR(firn_puffin_writer_finish(w, &file, &err), &err);
    T_EQ_MEM(file.data, "PFA1", 4);
    T_EQ_MEM(file.data + file.len - 4, "PFA1", 4);
    T_EQ_MEM(file.data + file.len - 8, "\0\0\0\0", 4);
    const char *json = (const char *)file.data + 85 + 4;
    const char *want_start = "{\"blobs\":[{\"type\":\"deletion-vector-v1\",\"fields\":[2147483645],"
                             "\"snapshot-id\":-1,\"sequence-number\":-1,\"offset\":4,\"length\":42,"
                             "\"properties\":{\"referenced-data-file\":\"s3://b/t/data/a.parquet\","
                             "\"cardinality\":\"1\"}},";
    T_EQ_MEM(file.data + 85, "PFA1", 4);
    T_EQ_MEM(json, want_start, strlen(want_start));
    T_TRUE(strstr(json, "\"properties\":{\"created-by\":\"firn 0.1.0\"}}") != NULL);

    firn_puffin_footer f;
    T_OK_ERR(firn_puffin_footer_parse(file.data, file.len, &f, &err), &err);
    T_EQ_UINT(f.n_blobs, 2);
    T_EQ_STR(f.created_by, "firn 0.1.0");
    T_EQ_STR(f.blobs[1].type, FIRN_DV_BLOB_TYPE);
    T_EQ_STR(f.blobs[1].referenced_data_file, "s3://b/t/data/b.parquet");
    T_EQ_INT(f.blobs[1].cardinality, 100);
    T_EQ_INT(f.blobs[1].offset, 46);
    T_TRUE(f.blobs[1].compression_codec == NULL);
    firn_bitmap64 *back = NULL;
    T_OK_ERR(firn_dv_decode(file.data + f.blobs[1].offset, (size_t)f.blobs[1].length, &back, &err),
             &err);
    T_EQ_UINT(firn_bitmap64_cardinality(back), 100);
    firn_bitmap64_free(back);
    firn_puffin_footer_deinit(&f);

    /* A compressed footer is refused; a broken magic too. */
    file.data[file.len - 8] = 1;
    T_EQ_INT(firn_puffin_footer_parse(file.data, file.len, &f, &err), FIRN_ERR_UNSUPPORTED);
    file.data[file.len - 8] = 0;
    file.data[0] = 'X';
    T_EQ_INT(firn_puffin_footer_parse(file.data, file.len, &f, &err), FIRN_ERR_PARSE);
    firn_buf_deinit(&file);
    firn_bitmap64_free(a);
    firn_bitmap64_free(b);
    firn_puffin_writer_free(w);
}

T_MAIN(T_CASE(dv_test_vectors),
       T_CASE(dv_empty_and_sparse_keys),
       T_CASE(dv_decodes_foreign_containers),
       T_CASE(dv_random_round_trips),
       T_CASE(dv_ranges_and_dense_containers),
       T_CASE(dv_corrupt_inputs),
       T_CASE(puffin_file_layout))
