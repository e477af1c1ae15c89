/* SPDX-License-Identifier: Apache-2.0 */
/* Column batches: flat and nested appends, validity, offsets, row metadata, reset. */
#include "firn/batch.h"
#include "t.h"

#include <string.h>

static firn_field *make_schema(void)
{
    firn_field *s = firn_field_new(0, "root", FIRN_TYPE_STRUCT, true);
    firn_field_add(s, firn_field_new(1, "id", FIRN_TYPE_LONG, true));
    firn_field_add(s, firn_field_new(2, "name", FIRN_TYPE_STRING, false));
    firn_field_add(s, firn_field_new_decimal(3, "amount", 38, 2, false));
    firn_field *tags = firn_field_new(4, "tags", FIRN_TYPE_LIST, false);
    firn_field_add(tags, firn_field_new(5, "element", FIRN_TYPE_INT, false));
    firn_field_add(s, tags);
    firn_field *pt = firn_field_new(6, "pt", FIRN_TYPE_STRUCT, false);
    firn_field_add(pt, firn_field_new(7, "x", FIRN_TYPE_DOUBLE, true));
    firn_field_add(s, pt);
    return s;
}

T_TEST(flat_and_nested_rows)
{
    firn_field *schema = make_schema();
    firn_batch *b = firn_batch_new(schema);
    firn_err err = {0};
    T_EQ_UINT(firn_batch_columns(b), 5);
    /* row 0: all values */
    firn_column_append_i64(firn_batch_column(b, 0), 1);
    firn_column_append_bytes(firn_batch_column(b, 1), "héllo", strlen("héllo"));
    firn_column_append_i128(firn_batch_column(b, 2), -1, (uint64_t)-12345);
    firn_column *tags = firn_batch_column(b, 3);
    firn_column_list_begin(tags);
    firn_column_append_i32(firn_column_child(tags, 0), 10);
    firn_column_append_null(firn_column_child(tags, 0));
    firn_column_list_end(tags);
    firn_column *pt = firn_batch_column(b, 4);
    firn_column_append_double(firn_column_child(pt, 0), 2.5);
    firn_column_struct_end(pt);
    T_OK_ERR(firn_batch_end_row(b, FIRN_OP_INSERT, 100, &err), &err);
    /* row 1: nulls and an empty list */
    firn_column_append_i64(firn_batch_column(b, 0), 2);
    firn_column_append_null(firn_batch_column(b, 1));
    firn_column_append_null(firn_batch_column(b, 2));
    firn_column_list_begin(tags);
    firn_column_list_end(tags);
    firn_column_append_null(pt);
    T_OK_ERR(firn_batch_end_row(b, FIRN_OP_DELETE, 200, &err), &err);

    T_EQ_UINT(firn_batch_rows(b), 2);
    T_EQ_INT(firn_batch_op(b, 1), FIRN_OP_DELETE);
    T_EQ_UINT(firn_batch_lsn(b, 0), 100);
    const int64_t *ids = firn_column_values(firn_batch_column(b, 0));
    T_EQ_INT(ids[0], 1);
    T_EQ_INT(ids[1], 2);
    T_TRUE(firn_column_validity(firn_batch_column(b, 0)) == NULL);
    firn_column *name = firn_batch_column(b, 1);
    const uint32_t *off = firn_column_offsets(name);
    T_EQ_UINT(off[0], 0);
    T_EQ_UINT(off[1], strlen("héllo"));
    T_EQ_UINT(off[2], strlen("héllo"));
    T_EQ_MEM(firn_column_data(name), "héllo", strlen("héllo"));
    T_TRUE(firn_column_is_valid(name, 0));
    T_FALSE(firn_column_is_valid(name, 1));
    T_EQ_UINT(firn_column_null_count(name), 1);
    const uint64_t *dec = firn_column_values(firn_batch_column(b, 2));
    T_EQ_UINT(dec[0], (uint64_t)-12345);
    T_EQ_INT((int64_t)dec[1], -1);
    const uint32_t *toff = firn_column_offsets(tags);
    T_EQ_UINT(toff[1], 2);
    T_EQ_UINT(toff[2], 2);
    T_EQ_UINT(firn_column_length(firn_column_child(tags, 0)), 2);
    T_FALSE(firn_column_is_valid(firn_column_child(tags, 0), 1));
    /* A null struct also appends a null to each child, keeping lengths aligned. */
    T_EQ_UINT(firn_column_length(firn_column_child(pt, 0)), 2);
    T_FALSE(firn_column_is_valid(pt, 1));
    T_TRUE(firn_batch_bytes(b) > 0);

    firn_batch_reset(b);
    T_EQ_UINT(firn_batch_rows(b), 0);
    T_EQ_UINT(firn_column_length(name), 0);
    T_EQ_UINT(firn_column_null_count(name), 0);
    firn_batch_free(b);
    firn_field_free(schema);
}

T_TEST(end_row_checks_lengths)
{
    firn_field *schema = make_schema();
    firn_batch *b = firn_batch_new(schema);
    firn_err err = {0};
    firn_column_append_i64(firn_batch_column(b, 0), 1);
    T_EQ_INT(firn_batch_end_row(b, FIRN_OP_INSERT, 1, &err), FIRN_ERR_INTERNAL);
    T_EQ_STR(err.msg, "column \"name\" has 0 values, expected 1");
    firn_batch_free(b);
    firn_field_free(schema);
}

T_TEST(many_rows_validity_growth)
{
    firn_field *s = firn_field_new(0, "root", FIRN_TYPE_STRUCT, true);
    firn_field_add(s, firn_field_new(1, "v", FIRN_TYPE_INT, false));
    firn_batch *b = firn_batch_new(s);
    firn_err err = {0};
    for (int i = 0; i < 100000; i++) {
        if (i % 3 == 0 && i > 1000)
            firn_column_append_null(firn_batch_column(b, 0));
        else
            firn_column_append_i32(firn_batch_column(b, 0), i);
        T_OK(firn_batch_end_row(b, FIRN_OP_READ, 0, &err));
    }
    firn_column *c = firn_batch_column(b, 0);
    const int32_t *v = firn_column_values(c);
    size_t nulls = 0;
    for (int i = 0; i < 100000; i++) {
        bool expect_null = i % 3 == 0 && i > 1000;
        T_EQ_INT(firn_column_is_valid(c, (size_t)i), !expect_null);
        if (!expect_null)
            T_EQ_INT(v[i], i);
        nulls += expect_null;
    }
    T_EQ_UINT(firn_column_null_count(c), nulls);
    firn_batch_free(b);
    firn_field_free(s);
}

T_TEST(type_names_and_sizes)
{
    char name[32];
    firn_field *d = firn_field_new_decimal(1, "d", 9, 2, true);
    firn_type_format(d, name, sizeof(name));
    T_EQ_STR(name, "decimal(9,2)");
    T_EQ_UINT(firn_type_value_size(d), 8);
    firn_field *f = firn_field_new_fixed(2, "f", 7, true);
    firn_type_format(f, name, sizeof(name));
    T_EQ_STR(name, "fixed[7]");
    T_EQ_UINT(firn_type_value_size(f), 7);
    firn_field *c = firn_field_clone(f);
    T_EQ_STR(c->name, "f");
    T_EQ_INT(c->length, 7);
    firn_field_free(c);
    firn_field_free(f);
    firn_field_free(d);
}

T_TEST(append_rows_and_keys)
{
    firn_field *schema = make_schema();
    firn_batch *src = firn_batch_new(schema);
    firn_err err = {0};
    for (int i = 0; i < 4; i++) {
        firn_column_append_i64(firn_batch_column(src, 0), i % 2);
        if (i == 3)
            firn_column_append_null(firn_batch_column(src, 1));
        else
            firn_column_append_bytes(firn_batch_column(src, 1), "k", 1);
        firn_column_append_i128(firn_batch_column(src, 2), 0, (uint64_t)i);
        firn_column *tags = firn_batch_column(src, 3);
        firn_column_list_begin(tags);
        for (int k = 0; k < i; k++)
            firn_column_append_i32(firn_column_child(tags, 0), k);
        firn_column_list_end(tags);
        firn_column_append_null(firn_batch_column(src, 4));
        T_OK(firn_batch_end_row(src, i == 2 ? FIRN_OP_DELETE : FIRN_OP_UPDATE, (uint64_t)i, &err));
    }
    firn_batch *dst = firn_batch_new(schema);
    static const uint32_t pick[] = {3, 0, 3};
    firn_batch_append_rows(dst, src, pick, 3);
    T_EQ_UINT(firn_batch_rows(dst), 3);
    T_EQ_UINT(firn_batch_lsn(dst, 0), 3);
    T_EQ_UINT(firn_batch_lsn(dst, 1), 0);
    firn_column *tags = firn_batch_column(dst, 3);
    const uint32_t *off = firn_column_offsets(tags);
    T_EQ_UINT(off[1] - off[0], 3);
    T_EQ_UINT(off[2] - off[1], 0);
    const int32_t *elems = firn_column_values(firn_column_child(tags, 0));
    T_EQ_INT(elems[2], 2);
    T_FALSE(firn_column_is_valid(firn_batch_column(dst, 1), 0));

    /* Keys (id, name): rows 0 and 2 equal ((0,"k")), row 3 differs by its null name. */
    static const uint32_t key_cols[] = {0, 1};
    firn_buf k0, k2, k3;
    firn_buf_init(&k0, 1024);
    firn_buf_init(&k2, 1024);
    firn_buf_init(&k3, 1024);
    T_OK(firn_batch_key_encode(src, 0, key_cols, 2, &k0));
    T_OK(firn_batch_key_encode(src, 2, key_cols, 2, &k2));
    T_OK(firn_batch_key_encode(src, 3, key_cols, 2, &k3));
    T_EQ_UINT(k0.len, 1 + 8 + 1 + 4 + 1);
    T_TRUE(firn_slice_eq((firn_slice){k0.data, k0.len}, (firn_slice){k2.data, k2.len}));
    T_FALSE(firn_slice_eq((firn_slice){k0.data, k0.len}, (firn_slice){k3.data, k3.len}));
    T_EQ_UINT(firn_key_hash(k0.data, k0.len), firn_key_hash(k2.data, k2.len));
    T_TRUE(firn_key_hash(k0.data, k0.len) != firn_key_hash(k3.data, k3.len));
    firn_buf_deinit(&k0);
    firn_buf_deinit(&k2);
    firn_buf_deinit(&k3);
    firn_batch_free(dst);
    firn_batch_free(src);
    firn_field_free(schema);
}

T_TEST(metadata_columns_filled_by_end_row)
{
    firn_field *s = firn_field_new(0, "root", FIRN_TYPE_STRUCT, true);
    firn_field_add(s, firn_field_new(1, "id", FIRN_TYPE_LONG, true));
    firn_field *op = firn_field_new(2, "_firn_op", FIRN_TYPE_STRING, false);
    op->meta = FIRN_META_OP;
    firn_field_add(s, op);
    firn_field *lsn = firn_field_new(3, "_firn_lsn", FIRN_TYPE_LONG, false);
    lsn->meta = FIRN_META_LSN;
    firn_field_add(s, lsn);
    firn_field *cts = firn_field_new(4, "_firn_commit_ts", FIRN_TYPE_TIMESTAMPTZ, false);
    cts->meta = FIRN_META_COMMIT_TS;
    firn_field_add(s, cts);
    firn_field *its = firn_field_new(5, "_firn_ingest_ts", FIRN_TYPE_TIMESTAMPTZ, false);
    its->meta = FIRN_META_INGEST_TS;
    firn_field_add(s, its);
    firn_batch *b = firn_batch_new(s);
    firn_err err = {0};
    int64_t before = firn_now_us();
    firn_column_append_i64(firn_batch_column(b, 0), 7);
    T_OK_ERR(firn_batch_end_row(b, FIRN_OP_READ, 100, &err), &err);
    firn_batch_set_times(b, 1700000000000000LL, 1800000000000000LL);
    firn_column_append_i64(firn_batch_column(b, 0), 8);
    T_OK_ERR(firn_batch_end_row(b, FIRN_OP_DELETE, 200, &err), &err);
    firn_column *opc = firn_batch_column(b, 1);
    T_EQ_MEM(firn_column_data(opc), "rd", 2);
    const int64_t *lsns = firn_column_values(firn_batch_column(b, 2));
    T_EQ_INT(lsns[0], 100);
    T_EQ_INT(lsns[1], 200);
    firn_column *cc = firn_batch_column(b, 3);
    T_FALSE(firn_column_is_valid(cc, 0));
    T_EQ_INT(((const int64_t *)firn_column_values(cc))[1], 1700000000000000LL);
    const int64_t *ing = firn_column_values(firn_batch_column(b, 4));
    T_TRUE(ing[0] >= before && ing[0] <= firn_now_us());
    T_EQ_INT(ing[1], 1800000000000000LL);
    /* Gathered rows keep their metadata values. */
    firn_batch *c = firn_batch_new(s);
    static const uint32_t pick[] = {1};
    firn_batch_append_rows(c, b, pick, 1);
    T_EQ_MEM(firn_column_data(firn_batch_column(c, 1)), "d", 1);
    T_EQ_INT(((const int64_t *)firn_column_values(firn_batch_column(c, 2)))[0], 200);
    firn_batch_free(c);
    firn_batch_free(b);
    firn_field_free(s);
}

/* firn_batch_end_rows fills the metadata columns in bulk exactly as firn_batch_end_row does row
 * by row: null and present times, bitmaps grown past their first bytes, runs of validity bits
 * that start and end inside a byte (parts of 100, 200, 1 and 1000 rows), an operation column
 * with a bitmap (a null its caller appended), a FIRN_META_NULL column, operations and LSNs. */
T_TEST(end_rows_equals_end_row)
{
    firn_field *s = firn_field_new(0, "root", FIRN_TYPE_STRUCT, true);
    firn_field_add(s, firn_field_new(1, "id", FIRN_TYPE_LONG, true));
    static const struct {
        const char *name;
        firn_type type;
        uint8_t meta;
    } META[] = {{"_firn_op", FIRN_TYPE_STRING, FIRN_META_OP},
                {"_firn_lsn", FIRN_TYPE_LONG, FIRN_META_LSN},
                {"_firn_commit_ts", FIRN_TYPE_TIMESTAMPTZ, FIRN_META_COMMIT_TS},
                {"_firn_ingest_ts", FIRN_TYPE_TIMESTAMPTZ, FIRN_META_INGEST_TS},
                {"gone", FIRN_TYPE_INT, FIRN_META_NULL}};
    for (size_t i = 0; i < 5; i++) {
        firn_field *f = firn_field_new((int32_t)i + 2, META[i].name, META[i].type, false);
        f->meta = META[i].meta;
        firn_field_add(s, f);
    }
    firn_batch *one = firn_batch_new(s), *bulk = firn_batch_new(s);
    firn_err err = {0};
    static const size_t PARTS[] = {100, 200, 1, 1000};
    for (size_t p = 0; p < 4; p++) {
        int64_t cts = p % 2 ? 1700000000000000LL : INT64_MIN;
        firn_batch_set_times(one, cts, 1800000000000000LL + (int64_t)p);
        firn_batch_set_times(bulk, cts, 1800000000000000LL + (int64_t)p);
        firn_op op = p == 2 ? FIRN_OP_DELETE : FIRN_OP_READ;
        for (size_t r = 0; r < PARTS[p]; r++) {
            firn_column_append_i64(firn_batch_column(one, 0), (int64_t)r);
            firn_column_append_i64(firn_batch_column(bulk, 0), (int64_t)r);
            if (p == 2) /* filled by the caller: a null, and _firn_op gets a validity bitmap */
                firn_column_append_null(firn_batch_column(one, 1));
            T_OK_ERR(firn_batch_end_row(one, op, 10 + p, &err), &err);
        }
        if (p == 2)
            firn_column_append_null(firn_batch_column(bulk, 1));
        T_OK_ERR(firn_batch_end_rows(bulk, PARTS[p], op, 10 + p, &err), &err);
    }
    size_t n = firn_batch_rows(one);
    T_EQ_UINT(firn_batch_rows(bulk), n);
    T_EQ_UINT(firn_column_null_count(firn_batch_column(bulk, 1)), 1);
    for (size_t r = 0; r < n; r++) {
        T_EQ_INT(firn_batch_op(bulk, r), firn_batch_op(one, r));
        T_EQ_UINT(firn_batch_lsn(bulk, r), firn_batch_lsn(one, r));
    }
    for (size_t i = 1; i < 6; i++) {
        firn_column *a = firn_batch_column(one, i), *b = firn_batch_column(bulk, i);
        T_EQ_UINT(firn_column_length(b), n);
        T_EQ_UINT(firn_column_null_count(b), firn_column_null_count(a));
        for (size_t r = 0; r < n; r++)
            T_EQ_INT(firn_column_is_valid(a, r), firn_column_is_valid(b, r));
        size_t w = firn_type_value_size(firn_column_field(a));
        if (w)
            T_EQ_MEM(firn_column_values(a), firn_column_values(b), n * w);
        else
            T_EQ_MEM(firn_column_offsets(a), firn_column_offsets(b), (n + 1) * 4);
    }
    T_EQ_MEM(firn_column_data(firn_batch_column(bulk, 1)),
             firn_column_data(firn_batch_column(one, 1)), n);
    T_EQ_UINT(firn_column_null_count(firn_batch_column(bulk, 3)), 101);
    T_EQ_UINT(firn_column_null_count(firn_batch_column(bulk, 5)), n);
    firn_batch_free(one);
    firn_batch_free(bulk);
    firn_field_free(s);
}

/* Bulk string appends (the binary COPY stage's) equal value-by-value ones: after earlier
 * single appends, with and without nulls, empty strings, offsets and validity growing past their
 * first capacities. */
T_TEST(bytes_in_bulk_equal_one_by_one)
{
    firn_field *s = firn_field_new(0, "root", FIRN_TYPE_STRUCT, true);
    firn_field_add(s, firn_field_new(1, "name", FIRN_TYPE_STRING, false));
    firn_batch *one = firn_batch_new(s), *bulk = firn_batch_new(s);
    firn_column *a = firn_batch_column(one, 0), *b = firn_batch_column(bulk, 0);
    firn_column_append_bytes(a, "first", 5); /* before the bulk appends: offsets start at 5 */
    firn_column_append_bytes(b, "first", 5);
    uint8_t data[4096];
    uint32_t ends[300];
    uint8_t valid[300];
    static const size_t PARTS[] = {1, 300, 0, 77, 300};
    size_t seed = 7;
    for (size_t p = 0; p < 5; p++) {
        uint32_t end = 0;
        bool with_nulls = p % 2 == 0;
        for (size_t i = 0; i < PARTS[p]; i++) {
            seed = seed * 1103515245u + 12345u;
            valid[i] = !with_nulls || seed % 5 != 0;
            size_t len = valid[i] ? (seed >> 8) % 12 : 0; /* empty strings too */
            for (size_t k = 0; k < len; k++)
                data[end + k] = (uint8_t)('a' + (seed + k) % 26);
            if (valid[i])
                firn_column_append_bytes(a, data + end, len);
            else
                firn_column_append_null(a);
            end += (uint32_t)len;
            ends[i] = end;
        }
        firn_column_append_bytes_n(b, PARTS[p], data, ends, with_nulls ? valid : NULL);
    }
    size_t n = firn_column_length(a);
    T_EQ_UINT(n, 1 + 300 + 77 + 300 + 1);
    T_EQ_UINT(firn_column_length(b), n);
    T_EQ_UINT(firn_column_null_count(b), firn_column_null_count(a));
    T_TRUE(firn_column_null_count(a) > 0);
    for (size_t r = 0; r < n; r++)
        T_EQ_INT(firn_column_is_valid(a, r), firn_column_is_valid(b, r));
    T_EQ_MEM(firn_column_offsets(a), firn_column_offsets(b), (n + 1) * 4);
    T_EQ_MEM(firn_column_data(a), firn_column_data(b), firn_column_offsets(a)[n]);
    firn_batch_free(one);
    firn_batch_free(bulk);
    firn_field_free(s);
}

/* A column copies its own earlier slots onto its end (the engine fills unchanged TOAST values
 * of a row from an earlier image in the same buffer) while every append grows its buffers:
 * under ASan a copy from memory the growth freed fails. */
T_TEST(append_from_own_column)
{
    firn_field *schema = make_schema();
    firn_batch *b = firn_batch_new(schema);
    firn_err err = {0};
    char big[3000];
    memset(big, 'v', sizeof(big));
    firn_column *id = firn_batch_column(b, 0), *name = firn_batch_column(b, 1);
    firn_column *amount = firn_batch_column(b, 2), *tags = firn_batch_column(b, 3);
    firn_column_append_i64(id, 7);
    firn_column_append_bytes(name, big, sizeof(big));
    firn_column_append_i128(amount, -1, 42);
    firn_column_list_begin(tags);
    for (int k = 0; k < 100; k++)
        firn_column_append_i32(firn_column_child(tags, 0), k);
    firn_column_list_end(tags);
    firn_column_append_null(firn_batch_column(b, 4));
    T_OK(firn_batch_end_row(b, FIRN_OP_INSERT, 1, &err));
    for (size_t r = 1; r < 200; r++) {
        firn_column_append_from(id, id, r - 1);
        firn_column_append_from(name, name, r - 1);
        firn_column_append_from(amount, amount, r - 1);
        firn_column_append_from(tags, tags, r - 1);
        firn_column_append_null(firn_batch_column(b, 4));
        T_OK(firn_batch_end_row(b, FIRN_OP_UPDATE, r + 1, &err));
    }
    const uint32_t *off = firn_column_offsets(name);
    T_EQ_UINT(off[200] - off[199], sizeof(big));
    T_EQ_MEM(firn_column_data(name) + off[199], big, sizeof(big));
    T_EQ_INT(((const int64_t *)firn_column_values(id))[199], 7);
    const uint64_t *dec = firn_column_values(amount);
    T_EQ_UINT(dec[2 * 199], 42);
    T_EQ_UINT(dec[2 * 199 + 1], UINT64_MAX);
    const uint32_t *toff = firn_column_offsets(tags);
    T_EQ_UINT(toff[200] - toff[199], 100);
    T_EQ_INT(((const int32_t *)firn_column_values(firn_column_child(tags, 0)))[toff[199] + 99], 99);
    firn_batch_free(b);
    firn_field_free(schema);
}

/* The encodings of firn_batch_keys_encode, one pass for a single fixed-width column without
 * nulls, equal firn_batch_key_encode row by row, with each key's end offset. */
static void same_keys(const firn_batch *b, const uint32_t *cols, size_t n_cols)
{
    size_t rows = firn_batch_rows(b);
    firn_buf bulk, one;
    firn_buf_init(&bulk, 1 << 20);
    firn_buf_init(&one, 1 << 20);
    T_OK(firn_buf_append(&bulk, "x", 1)); /* ends are offsets in out, after what it held */
    T_OK(firn_buf_append(&one, "x", 1));
    uint32_t *ends = firn_calloc(rows, sizeof(uint32_t));
    T_OK(firn_batch_keys_encode(b, cols, n_cols, &bulk, ends));
    for (size_t r = 0; r < rows; r++) {
        T_OK(firn_batch_key_encode(b, r, cols, n_cols, &one));
        T_EQ_UINT(ends[r], one.len);
    }
    T_EQ_UINT(bulk.len, one.len);
    T_TRUE(memcmp(bulk.data, one.data, one.len) == 0);
    firn_free(ends);
    firn_buf_deinit(&bulk);
    firn_buf_deinit(&one);
}

T_TEST(keys_encoded_in_bulk_equal_row_by_row)
{
    firn_field *schema = make_schema();
    firn_batch *b = firn_batch_new(schema);
    firn_batch *with_null = firn_batch_new(schema);
    firn_err err = {0};
    for (int i = 0; i < 300; i++) {
        for (int k = 0; k < 2; k++) {
            firn_batch *t = k ? with_null : b;
            if (k && i == 7)
                firn_column_append_null(firn_batch_column(t, 0));
            else
                firn_column_append_i64(firn_batch_column(t, 0), (int64_t)i * 1000003 - 5);
            if (i % 5 == 0)
                firn_column_append_null(firn_batch_column(t, 1));
            else
                firn_column_append_bytes(firn_batch_column(t, 1), "key", (size_t)(i % 4));
            firn_column_append_i128(firn_batch_column(t, 2), -(int64_t)i, (uint64_t)i * 77);
            firn_column *tags = firn_batch_column(t, 3);
            firn_column_list_begin(tags);
            firn_column_list_end(tags);
            firn_column_append_null(firn_batch_column(t, 4));
            T_OK(firn_batch_end_row(t, FIRN_OP_READ, 0, &err));
        }
    }
    static const uint32_t id[] = {0}, name[] = {1}, dec[] = {2}, both[] = {0, 1};
    same_keys(b, id, 1);  /* one pass: bigint */
    same_keys(b, dec, 1); /* one pass: 16-byte decimal */
    same_keys(b, name, 1);
    same_keys(b, both, 2);
    same_keys(with_null, id, 1); /* a null in the column: row by row */
    firn_batch_free(b);
    firn_batch_free(with_null);
    firn_field_free(schema);
    /* A 4-byte integer key (its own one-pass loop) and a 4-byte date next to it. */
    firn_field *ints = firn_field_new(0, "root", FIRN_TYPE_STRUCT, true);
    firn_field_add(ints, firn_field_new(1, "id", FIRN_TYPE_INT, true));
    firn_field_add(ints, firn_field_new(2, "day", FIRN_TYPE_DATE, true));
    firn_batch *ib = firn_batch_new(ints);
    for (int i = 0; i < 300; i++) {
        firn_column_append_i32(firn_batch_column(ib, 0), i * 7919 - 100000);
        firn_column_append_i32(firn_batch_column(ib, 1), 20000 + i);
        T_OK(firn_batch_end_row(ib, FIRN_OP_READ, 0, &err));
    }
    static const uint32_t int_id[] = {0}, int_both[] = {0, 1};
    same_keys(ib, int_id, 1); /* one pass: int */
    same_keys(ib, int_both, 2);
    firn_batch_free(ib);
    firn_field_free(ints);
}

T_MAIN(T_CASE(flat_and_nested_rows),
       T_CASE(append_from_own_column),
       T_CASE(metadata_columns_filled_by_end_row),
       T_CASE(end_rows_equals_end_row),
       T_CASE(bytes_in_bulk_equal_one_by_one),
       T_CASE(append_rows_and_keys),
       T_CASE(keys_encoded_in_bulk_equal_row_by_row),
       T_CASE(end_row_checks_lengths),
       T_CASE(many_rows_validity_growth),
       T_CASE(type_names_and_sizes))
