/* SPDX-License-Identifier: Apache-2.0 */
/* Parquet column reader unit tests: files from firn's own writer (every primitive type, NULLs,
 * dictionary and PLAIN fallback, many pages and row groups, every codec) read back from memory
 * and through the range-read callback and compared value by value; column selection by id and
 * name, conversions, schema errors; hand-built encodings; corrupt files rejected without crashes.
 * Files of other writers are checked in tests/interop/test_parquet_read.py. */
#include "parquet/pq_read_int.h"
#include "t.h"

#include <math.h>

static firn_rc mem_write(void *ctx, const void *p, size_t len, firn_err *err)
{
    (void)err;
    return firn_buf_append(ctx, p, len);
}

typedef struct cb_file {
    const uint8_t *p;
    size_t len;
    int reads;
} cb_file;

static firn_rc cb_read(void *ctx, uint64_t off, size_t len, firn_buf *out, firn_err *err)
{
    cb_file *f = ctx;
    f->reads++;
    if (off > f->len || len > f->len - off)
        return firn_err_set(err, FIRN_ERR_IO, "read past the end");
    return firn_buf_append(out, f->p + off, len);
}

enum {
    C_BOOL,
    C_INT,
    C_LONG,
    C_FLOAT,
    C_DOUBLE,
    C_DEC9,
    C_DEC18,
    C_DEC38,
    C_DATE,
    C_TIME,
    C_TS,
    C_TSTZ,
    C_TSNS,
    C_STR,
    C_BIN,
    C_UUID,
    C_FIXED,
    C_KEY,
    N_COLS
};

/* Every primitive type; odd columns optional, except the key. */
static firn_field *all_types(void)
{
    firn_field *s = firn_field_new(0, "root", FIRN_TYPE_STRUCT, true);
    static const struct {
        const char *name;
        firn_type t;
    } cols[N_COLS] = {
        {"b", FIRN_TYPE_BOOLEAN},       {"i", FIRN_TYPE_INT},        {"l", FIRN_TYPE_LONG},
        {"f", FIRN_TYPE_FLOAT},         {"d", FIRN_TYPE_DOUBLE},     {"d9", FIRN_TYPE_DECIMAL},
        {"d18", FIRN_TYPE_DECIMAL},     {"d38", FIRN_TYPE_DECIMAL},  {"dt", FIRN_TYPE_DATE},
        {"tm", FIRN_TYPE_TIME},         {"ts", FIRN_TYPE_TIMESTAMP}, {"tz", FIRN_TYPE_TIMESTAMPTZ},
        {"ns", FIRN_TYPE_TIMESTAMP_NS}, {"s", FIRN_TYPE_STRING},     {"bin", FIRN_TYPE_BINARY},
        {"u", FIRN_TYPE_UUID},          {"fx", FIRN_TYPE_FIXED},     {"key", FIRN_TYPE_LONG},
    };
    for (int i = 0; i < N_COLS; i++) {
        int32_t id = 100 + i;
        bool req = i % 2 == 0 || i == C_KEY;
        firn_field *f;
        if (i == C_DEC9)
            f = firn_field_new_decimal(id, cols[i].name, 9, 2, req);
        else if (i == C_DEC18)
            f = firn_field_new_decimal(id, cols[i].name, 18, 4, req);
        else if (i == C_DEC38)
            f = firn_field_new_decimal(id, cols[i].name, 38, 10, req);
        else if (i == C_FIXED)
            f = firn_field_new_fixed(id, cols[i].name, 5, req);
        else
            f = firn_field_new(id, cols[i].name, cols[i].t, req);
        firn_field_add(s, f);
    }
    return s;
}

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Row r of the test data: low-cardinality values in the first half of the file (dictionary),
 * unique ones after (forces the PLAIN fallback); every 7th optional value NULL. */
static void append_row(firn_batch *b, size_t r, size_t n)
{
    uint64_t x = r < n / 2 ? mix(r % 13) : mix(r);
    for (int i = 0; i < N_COLS; i++) {
        firn_column *c = firn_batch_column(b, (size_t)i);
        uint64_t v = mix(x + (uint64_t)i);
        if (!firn_column_field(c)->required && (r + (size_t)i) % 7 == 0) {
            firn_column_append_null(c);
            continue;
        }
        char s[64];
        uint8_t raw[16];
        memcpy(raw, &v, 8);
        memcpy(raw + 8, &x, 8);
        switch (i) {
        case C_BOOL:
            firn_column_append_bool(c, v & 1);
            break;
        case C_INT:
        case C_DATE:
            firn_column_append_i32(c, (int32_t)v);
            break;
        case C_DEC9:
            firn_column_append_i64(c, (int64_t)(v % 999999999) - 499999999);
            break;
        case C_DEC18:
            firn_column_append_i64(c, (int64_t)(v % 999999999999999999ull) - 499999999999999999);
            break;
        case C_DEC38:
            firn_column_append_i128(c, (int64_t)(v >> 20) - (1ll << 42), x);
            break;
        case C_FLOAT:
            firn_column_append_float(c, r % 101 == 0 ? (float)NAN : (float)(int64_t)v / 7.0f);
            break;
        case C_DOUBLE:
            firn_column_append_double(c, (double)(int64_t)v / 3.0);
            break;
        case C_STR:
            firn_column_append_bytes(
                c, s, (size_t)snprintf(s, sizeof(s), "v%llx", (unsigned long long)(v >> (v & 31))));
            break;
        case C_BIN:
            firn_column_append_bytes(c, raw, v % 17);
            break;
        case C_UUID:
            firn_column_append_bytes(c, raw, 16);
            break;
        case C_FIXED:
            firn_column_append_bytes(c, raw, 5);
            break;
        case C_KEY:
            firn_column_append_i64(c, (int64_t)r);
            break;
        case C_TS:
        case C_TSTZ:
            firn_column_append_i64(c, (int64_t)(v >> 11) - (1ll << 52));
            break;
        default:
            firn_column_append_i64(c, (int64_t)v);
        }
    }
    T_OK(firn_batch_end_row(b, FIRN_OP_INSERT, 0, NULL));
}

/* Writes n rows with small pages, row groups and dictionary limit. */
static void
write_file(const firn_field *s, size_t n, firn_pq_codec codec, firn_buf *out, firn_batch **src)
{
    firn_pq_options o;
    firn_pq_options_init(&o);
    o.codec = codec;
    o.page_rows = 700;
    o.page_bytes = 16 << 10;
    o.dict_bytes = 4 << 10;
    o.row_group_bytes = 64 << 10;
    firn_err err = {0};
    firn_pq_writer *w;
    firn_buf_init(out, (size_t)1 << 30);
    *src = firn_batch_new(s);
    for (size_t r = 0; r < n; r++)
        append_row(*src, r, n);
    T_OK_ERR(firn_pq_writer_new(s, &o, mem_write, out, &w, &err), &err);
    T_OK_ERR(firn_pq_writer_write(w, *src, &err), &err);
    T_OK_ERR(firn_pq_writer_close(w, &err), &err);
    firn_pq_writer_free(w);
}

/* Compares row r of a (all columns) with row ra of b through the canonical key encoding. */
static void same_row(const firn_batch *a, size_t ra, const firn_batch *b, size_t rb, size_t n_cols)
{
    uint32_t cols[64];
    for (uint32_t i = 0; i < n_cols; i++)
        cols[i] = i;
    firn_buf ka, kb;
    firn_buf_init(&ka, 1 << 20);
    firn_buf_init(&kb, 1 << 20);
    T_OK(firn_batch_key_encode(a, ra, cols, n_cols, &ka));
    T_OK(firn_batch_key_encode(b, rb, cols, n_cols, &kb));
    if (ka.len != kb.len || memcmp(ka.data, kb.data, ka.len) != 0)
        T_FAIL("row %zu differs", ra);
    firn_buf_deinit(&ka);
    firn_buf_deinit(&kb);
}

/* Reads every row group of r into one batch per group and checks it against src. */
static void check_all(firn_pq_reader *r, const firn_field *s, firn_batch *src)
{
    firn_err err = {0};
    T_OK_ERR(firn_pq_reader_select(r, s, &err), &err);
    firn_batch *b = firn_batch_new(s);
    size_t row = 0;
    T_TRUE(firn_pq_reader_row_groups(r) > 2);
    for (size_t g = 0; g < firn_pq_reader_row_groups(r); g++) {
        T_EQ_UINT(firn_pq_reader_row_group_first_row(r, g), row);
        T_OK_ERR(firn_pq_reader_read_row_group(r, g, b, &err), &err);
        T_EQ_UINT(firn_batch_rows(b), firn_pq_reader_row_group_rows(r, g));
        for (size_t i = 0; i < firn_batch_rows(b); i++)
            same_row(src, row + i, b, i, s->n_children);
        T_EQ_INT(firn_batch_op(b, 0), FIRN_OP_READ);
        row += firn_batch_rows(b);
    }
    T_EQ_UINT(row, firn_batch_rows(src));
    T_EQ_UINT(firn_pq_reader_rows(r), row);
    firn_batch_free(b);
}

static void roundtrip(firn_pq_codec codec)
{
    firn_field *s = all_types();
    firn_buf file;
    firn_batch *src;
    write_file(s, 30000, codec, &file, &src);
    firn_err err = {0};
    firn_pq_reader *r;
    T_OK_ERR(firn_pq_reader_open_mem(file.data, file.len, &r, &err), &err);
    check_all(r, s, src);
    firn_pq_reader_free(r);

    cb_file f = {file.data, file.len, 0};
    T_OK_ERR(firn_pq_reader_open(cb_read, &f, file.len, &r, &err), &err);
    check_all(r, s, src);
    firn_pq_reader_free(r);
    firn_batch_free(src);
    firn_buf_deinit(&file);
    firn_field_free(s);
}

T_TEST(roundtrip_zstd)
{
    roundtrip(FIRN_PQ_ZSTD);
}

T_TEST(roundtrip_snappy)
{
    roundtrip(FIRN_PQ_SNAPPY);
}

T_TEST(roundtrip_gzip)
{
    roundtrip(FIRN_PQ_GZIP);
}

T_TEST(roundtrip_uncompressed)
{
    roundtrip(FIRN_PQ_UNCOMPRESSED);
}

/* The written file really has dictionary and PLAIN pages, several row groups and many pages. */
T_TEST(file_shape)
{
    firn_field *s = all_types();
    firn_buf file;
    firn_batch *src;
    write_file(s, 30000, FIRN_PQ_ZSTD, &file, &src);
    firn_err err = {0};
    firn_pq_reader *r;
    T_OK_ERR(firn_pq_reader_open_mem(file.data, file.len, &r, &err), &err);
    const firn_pq_file_meta *m = firn_pq_reader_meta(r);
    T_TRUE(m->n_row_groups >= 3);
    bool dict = false, plain = false;
    for (size_t g = 0; g < m->n_row_groups; g++) {
        const firn_pq_chunk_meta *c = &m->row_groups[g].columns[C_LONG];
        for (size_t k = 0; k < c->n_encodings; k++) {
            dict |= c->encodings[k] == RD_ENC_RLE_DICT;
            plain |= c->encodings[k] == RD_ENC_PLAIN;
        }
    }
    T_TRUE(dict && plain);
    T_TRUE(m->row_groups[0].num_rows > 5 * 700); /* many pages per chunk */
    firn_pq_reader_free(r);
    firn_batch_free(src);
    firn_buf_deinit(&file);
    firn_field_free(s);
}

/* Selection: a subset in another order, by id; a missing optional column reads as nulls. */
T_TEST(select_subset_by_id)
{
    firn_field *s = all_types();
    firn_buf file;
    firn_batch *src;
    write_file(s, 5000, FIRN_PQ_ZSTD, &file, &src);
    firn_field *sel = firn_field_new(0, "sel", FIRN_TYPE_STRUCT, true);
    firn_field_add(sel, firn_field_new(100 + C_KEY, "renamed", FIRN_TYPE_LONG, true));
    firn_field_add(sel, firn_field_new(100 + C_STR, "s", FIRN_TYPE_STRING, false));
    firn_field_add(sel, firn_field_new(999, "gone", FIRN_TYPE_INT, false));
    firn_field_add(sel, firn_field_new(100 + C_INT, "i_as_long", FIRN_TYPE_LONG, false));
    firn_field_add(sel, firn_field_new(100 + C_FLOAT, "f_as_double", FIRN_TYPE_DOUBLE, false));
    firn_err err = {0};
    firn_pq_reader *r;
    T_OK_ERR(firn_pq_reader_open_mem(file.data, file.len, &r, &err), &err);
    T_OK_ERR(firn_pq_reader_select(r, sel, &err), &err);
    firn_batch *b = firn_batch_new(sel);
    size_t row = 0;
    for (size_t g = 0; g < firn_pq_reader_row_groups(r); g++) {
        T_OK_ERR(firn_pq_reader_read_row_group(r, g, b, &err), &err);
        const int64_t *keys = firn_column_values(firn_batch_column(b, 0));
        firn_column *str = firn_batch_column(b, 1), *gone = firn_batch_column(b, 2);
        firn_column *src_str = firn_batch_column(src, C_STR);
        const int64_t *il = firn_column_values(firn_batch_column(b, 3));
        const int32_t *is = firn_column_values(firn_batch_column(src, C_INT));
        const double *fd = firn_column_values(firn_batch_column(b, 4));
        const float *fs = firn_column_values(firn_batch_column(src, C_FLOAT));
        for (size_t i = 0; i < firn_batch_rows(b); i++, row++) {
            T_EQ_INT(keys[i], (int64_t)row);
            T_EQ_INT(firn_column_is_valid(str, i), firn_column_is_valid(src_str, row));
            if (firn_column_is_valid(str, i)) {
                const uint32_t *o = firn_column_offsets(str), *so = firn_column_offsets(src_str);
                T_EQ_UINT(o[i + 1] - o[i], so[row + 1] - so[row]);
                T_EQ_MEM(firn_column_data(str) + o[i], firn_column_data(src_str) + so[row],
                         o[i + 1] - o[i]);
            }
            T_FALSE(firn_column_is_valid(gone, i));
            T_EQ_INT(il[i], is[row]);
            if (fs[row] == fs[row])
                T_EQ_DBL(fd[i], (double)fs[row]);
        }
    }
    T_EQ_UINT(row, 5000);
    firn_batch_free(b);
    firn_pq_reader_free(r);
    firn_field_free(sel);
    firn_batch_free(src);
    firn_buf_deinit(&file);
    firn_field_free(s);
}

static firn_rc select_one(const firn_buf *file, firn_field *f, firn_err *err)
{
    firn_field *sel = firn_field_new(0, "sel", FIRN_TYPE_STRUCT, true);
    firn_field_add(sel, f);
    firn_pq_reader *r;
    T_OK_ERR(firn_pq_reader_open_mem(file->data, file->len, &r, err), err);
    firn_rc rc = firn_pq_reader_select(r, sel, err);
    firn_pq_reader_free(r);
    firn_field_free(sel);
    return rc;
}

T_TEST(select_errors)
{
    firn_field *s = all_types();
    firn_buf file;
    firn_batch *src;
    write_file(s, 100, FIRN_PQ_ZSTD, &file, &src);
    firn_err err = {0};
    T_EQ_INT(select_one(&file, firn_field_new(999, "x", FIRN_TYPE_LONG, true), &err),
             FIRN_ERR_SCHEMA);
    T_TRUE(strstr(err.msg, "\"x\"") != NULL);
    T_EQ_INT(select_one(&file, firn_field_new(100 + C_LONG, "l", FIRN_TYPE_INT, true), &err),
             FIRN_ERR_SCHEMA);
    T_TRUE(strstr(err.msg, "cannot be read as int") != NULL);
    T_EQ_INT(select_one(&file, firn_field_new_decimal(100 + C_DEC9, "d9", 9, 3, true), &err),
             FIRN_ERR_SCHEMA);
    T_EQ_INT(select_one(&file, firn_field_new(100 + C_TSNS, "ns", FIRN_TYPE_TIMESTAMP, true), &err),
             FIRN_ERR_SCHEMA);
    T_EQ_INT(select_one(&file, firn_field_new(100 + C_KEY, "k", FIRN_TYPE_STRUCT, true), &err),
             FIRN_ERR_UNSUPPORTED);
    T_EQ_INT(
        select_one(&file, firn_field_new(100 + C_TS, "ts", FIRN_TYPE_TIMESTAMP_NS, true), &err),
        FIRN_OK);
    T_EQ_INT(select_one(&file, firn_field_new_decimal(100 + C_DEC9, "d9", 20, 2, true), &err),
             FIRN_OK);
    firn_batch_free(src);
    firn_buf_deinit(&file);
    firn_field_free(s);
}

/* Widening conversions read the right values: decimal(9,2) as decimal(20,2), timestamp (us) as
 * timestamp_ns. */
T_TEST(widening_values)
{
    firn_field *s = all_types();
    firn_buf file;
    firn_batch *src;
    write_file(s, 3000, FIRN_PQ_SNAPPY, &file, &src);
    firn_field *sel = firn_field_new(0, "sel", FIRN_TYPE_STRUCT, true);
    firn_field_add(sel, firn_field_new_decimal(100 + C_DEC9, "d9", 20, 2, false));
    firn_field_add(sel, firn_field_new(100 + C_TS, "ts", FIRN_TYPE_TIMESTAMP_NS, true));
    firn_field_add(sel, firn_field_new_decimal(100 + C_DEC18, "d18", 30, 4, false));
    firn_err err = {0};
    firn_pq_reader *r;
    T_OK_ERR(firn_pq_reader_open_mem(file.data, file.len, &r, &err), &err);
    T_OK_ERR(firn_pq_reader_select(r, sel, &err), &err);
    firn_batch *b = firn_batch_new(sel);
    size_t row = 0;
    for (size_t g = 0; g < firn_pq_reader_row_groups(r); g++) {
        T_OK_ERR(firn_pq_reader_read_row_group(r, g, b, &err), &err);
        const int64_t *d9 = firn_column_values(firn_batch_column(src, C_DEC9));
        const int64_t *d18 = firn_column_values(firn_batch_column(src, C_DEC18));
        const int64_t *ts = firn_column_values(firn_batch_column(src, C_TS));
        const int64_t *w9 = firn_column_values(firn_batch_column(b, 0));
        const int64_t *wts = firn_column_values(firn_batch_column(b, 1));
        const int64_t *w18 = firn_column_values(firn_batch_column(b, 2));
        for (size_t i = 0; i < firn_batch_rows(b); i++, row++) {
            T_EQ_INT(w9[2 * i], d9[row]);
            T_EQ_INT(w9[2 * i + 1], d9[row] < 0 ? -1 : 0);
            T_EQ_INT(w18[2 * i], d18[row]);
            T_EQ_INT(w18[2 * i + 1], d18[row] < 0 ? -1 : 0);
            T_EQ_INT(wts[i], ts[row] * 1000);
        }
    }
    firn_batch_free(b);
    firn_pq_reader_free(r);
    firn_field_free(sel);
    firn_batch_free(src);
    firn_buf_deinit(&file);
    firn_field_free(s);
}

/* Reading through the callback reads one chunk per selected column and row group (plus the
 * tail), not the whole file. */
T_TEST(callback_reads_chunks_only)
{
    firn_field *s = all_types();
    firn_buf file;
    firn_batch *src;
    write_file(s, 8000, FIRN_PQ_ZSTD, &file, &src);
    firn_field *sel = firn_field_new(0, "sel", FIRN_TYPE_STRUCT, true);
    firn_field_add(sel, firn_field_new(100 + C_KEY, "key", FIRN_TYPE_LONG, true));
    cb_file f = {file.data, file.len, 0};
    firn_err err = {0};
    firn_pq_reader *r;
    T_OK_ERR(firn_pq_reader_open(cb_read, &f, file.len, &r, &err), &err);
    T_EQ_INT(f.reads, 1);
    T_OK_ERR(firn_pq_reader_select(r, sel, &err), &err);
    firn_batch *b = firn_batch_new(sel);
    for (size_t g = 0; g < firn_pq_reader_row_groups(r); g++)
        T_OK_ERR(firn_pq_reader_read_row_group(r, g, b, &err), &err);
    T_EQ_INT(f.reads, 1 + (int)firn_pq_reader_row_groups(r));
    T_EQ_INT(firn_pq_reader_read_row_group(r, 99, b, &err), FIRN_ERR_INVALID);
    firn_batch_free(b);
    firn_pq_reader_free(r);
    firn_field_free(sel);
    firn_batch_free(src);
    firn_buf_deinit(&file);
    firn_field_free(s);
}

/* Hand-made DELTA_BINARY_PACKED: the parquet-format Encodings.md example 1..5, and a block with
 * negative deltas and several miniblocks. */
T_TEST(delta_binary_packed)
{
    /* 1 2 3 4 5: block 128, 4 miniblocks, 5 values, first 1; min delta 1, widths 0 */
    const uint8_t ex[] = {0x80, 0x01, 0x04, 0x05, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00};
    int64_t *out = NULL;
    size_t cap = 0, n, used;
    T_TRUE(firn__pq_rd_delta_bp(ex, sizeof(ex), false, &out, &cap, 10, &n, &used));
    T_EQ_UINT(n, 5);
    T_EQ_UINT(used, sizeof(ex));
    for (int i = 0; i < 5; i++)
        T_EQ_INT(out[i], i + 1);
    /* too many values for the page */
    T_FALSE(firn__pq_rd_delta_bp(ex, sizeof(ex), false, &out, &cap, 4, &n, &used));
    /* 7 5 3 1 2 3 4 5: first 7; deltas -2 -2 -2 1 1 1 1 -> min -2, bits 0 0 0 3 3 3 3 (w=2) */
    const uint8_t ex2[] = {0x80, 0x01, 0x04, 0x08, 0x0E, 0x03, 0x02, 0x00, 0x00,
                           0x00, 0xC0, 0xFF, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    T_TRUE(firn__pq_rd_delta_bp(ex2, sizeof(ex2), false, &out, &cap, 100, &n, &used));
    const int64_t want[] = {7, 5, 3, 1, 2, 3, 4, 5};
    T_EQ_UINT(n, 8);
    for (int i = 0; i < 8; i++)
        T_EQ_INT(out[i], want[i]);
    /* truncated */
    for (size_t cut = 0; cut < 12; cut++)
        T_FALSE(firn__pq_rd_delta_bp(ex2, cut, false, &out, &cap, 100, &n, &used));
    firn_free(out);
}

T_TEST(rle_hybrid_decode)
{
    uint32_t v[3000], out[3000];
    uint64_t x = 1;
    for (int bw = 1; bw <= 32; bw++) {
        for (size_t i = 0; i < 3000; i++) {
            x = mix(x);
            v[i] = (i / 100) % 3 ? (uint32_t)(x & (((uint64_t)1 << bw) - 1)) : 1;
        }
        firn_buf b;
        firn_buf_init(&b, 1 << 20);
        T_OK(firn__pq_rle_u32(&b, v, 3000, bw));
        T_TRUE(firn__pq_rd_rle_u32(b.data, b.len, bw, out, 3000));
        T_EQ_MEM(out, v, sizeof(v));
        T_FALSE(firn__pq_rd_rle_u32(b.data, b.len / 2, bw, out, 3000));
        firn_buf_deinit(&b);
    }
}

T_TEST(byte_stream_split)
{
    const uint8_t in[] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint8_t out[8];
    T_TRUE(firn__pq_rd_bss(in, 8, 4, out, 2));
    const uint8_t want[] = {1, 3, 5, 7, 2, 4, 6, 8};
    T_EQ_MEM(out, want, 8);
    T_FALSE(firn__pq_rd_bss(in, 7, 4, out, 2));
}

/* Flipped and truncated bytes anywhere: errors, never crashes, leaks or overreads (asan). */
T_TEST(corrupt_files)
{
    firn_field *s = all_types();
    firn_buf file;
    firn_batch *src;
    write_file(s, 2000, FIRN_PQ_SNAPPY, &file, &src);
    firn_batch *b = firn_batch_new(s);
    uint8_t *copy = firn_malloc(file.len);
    uint64_t x = 7;
    int opened = 0, failed = 0;
    for (int iter = 0; iter < 300; iter++) {
        memcpy(copy, file.data, file.len);
        size_t len = file.len;
        for (int k = 0; k < 4; k++) {
            x = mix(x);
            copy[x % len] ^= (uint8_t)(1u << (x >> 61));
        }
        if (iter % 10 == 0)
            len -= (x >> 8) % 200;
        firn_err err = {0};
        firn_pq_reader *r;
        if (firn_pq_reader_open_mem(copy, len, &r, &err) != FIRN_OK)
            continue;
        opened++;
        if (firn_pq_reader_select(r, s, &err) == FIRN_OK) {
            for (size_t g = 0; g < firn_pq_reader_row_groups(r); g++)
                failed += firn_pq_reader_read_row_group(r, g, b, &err) != FIRN_OK;
        }
        firn_pq_reader_free(r);
    }
    T_TRUE(opened > 0);
    T_TRUE(failed > 0);
    firn_free(copy);
    firn_batch_free(b);
    firn_batch_free(src);
    firn_buf_deinit(&file);
    firn_field_free(s);
}

T_TEST(not_parquet)
{
    firn_err err = {0};
    firn_pq_reader *r;
    T_EQ_INT(firn_pq_reader_open_mem("PAR1", 4, &r, &err), FIRN_ERR_PARSE);
    T_EQ_INT(firn_pq_reader_open_mem("PAR1xxxxxxxxxxxxPAR1", 20, &r, &err), FIRN_ERR_PARSE);
    T_EQ_INT(firn_pq_reader_open_mem("PAR1\0\0\0\0\0\0\0\0\0\0\0\0PARE", 20, &r, &err),
             FIRN_ERR_UNSUPPORTED);
}

/* row_group_value_bytes ends row groups by the bytes their rows held in the batches written, so
 * rows that compress to almost nothing still come back a bounded number at a time: 40 batches of
 * 250 rows of 1000 equal bytes (about 250 KB each, some hundred bytes compressed) with 1 MiB of
 * values per row group. Without it the whole file is one row group. */
static void text_row(firn_batch *b, size_t row)
{
    char text[1000];
    memset(text, 'a' + (int)(row % 26), sizeof(text));
    firn_column_append_i64(firn_batch_column(b, 0), (int64_t)row);
    firn_column_append_bytes(firn_batch_column(b, 1), text, sizeof(text));
    T_OK(firn_batch_end_row(b, FIRN_OP_INSERT, 0, NULL));
}

static void
write_compressible(const firn_field *s, size_t value_bytes, firn_buf *out, firn_batch *src)
{
    firn_pq_options o;
    firn_pq_options_init(&o);
    o.row_group_value_bytes = value_bytes;
    firn_err err = {0};
    firn_pq_writer *w;
    firn_buf_init(out, (size_t)1 << 30);
    T_OK_ERR(firn_pq_writer_new(s, &o, mem_write, out, &w, &err), &err);
    firn_batch *b = firn_batch_new(s);
    for (size_t k = 0; k < 40; k++) {
        firn_batch_reset(b);
        for (size_t r = 0; r < 250; r++) {
            text_row(b, k * 250 + r);
            text_row(src, k * 250 + r);
        }
        T_OK_ERR(firn_pq_writer_write(w, b, &err), &err);
    }
    T_OK_ERR(firn_pq_writer_close(w, &err), &err);
    firn_pq_writer_free(w);
    firn_batch_free(b);
}

T_TEST(row_group_value_bytes)
{
    firn_field *s = firn_field_new(0, "root", FIRN_TYPE_STRUCT, true);
    firn_field_add(s, firn_field_new(1, "id", FIRN_TYPE_LONG, true));
    firn_field_add(s, firn_field_new(2, "v", FIRN_TYPE_STRING, true));
    const size_t limit = (size_t)1 << 20;
    for (int bounded = 0; bounded < 2; bounded++) {
        firn_buf file;
        firn_batch *src = firn_batch_new(s);
        write_compressible(s, bounded ? limit : 0, &file, src);
        T_TRUE(file.len < limit / 4);
        firn_err err = {0};
        firn_pq_reader *r;
        T_OK_ERR(firn_pq_reader_open_mem(file.data, file.len, &r, &err), &err);
        if (!bounded) {
            T_EQ_UINT(firn_pq_reader_row_groups(r), 1);
        } else {
            check_all(r, s, src);
            firn_batch *b = firn_batch_new(s);
            for (size_t g = 0; g < firn_pq_reader_row_groups(r); g++) {
                T_OK_ERR(firn_pq_reader_read_row_group(r, g, b, &err), &err);
                /* at most the limit plus the batch written when it was passed */
                T_TRUE(firn_batch_bytes(b) < limit + limit / 3);
            }
            T_TRUE(firn_pq_reader_row_groups(r) >= 8);
            firn_batch_free(b);
        }
        firn_pq_reader_free(r);
        firn_batch_free(src);
        firn_buf_deinit(&file);
    }
    firn_field_free(s);
}

/* ---- steps of equal values (the writer probes their first value alone) --------------------- */

enum { EQ_SEG = 4096, EQ_SEGS = 12 };
enum { E_INT, E_LONG, E_DEC9, E_DEC15, E_FLOAT, E_DOUBLE, E_STR, E_TSTZ, E_COLS };

/* What row r holds, by segment of EQ_SEG rows (a writer step when there are no nulls and pages
 * are long): one value; one value but the last; a value already in the dictionary; a new value
 * but the first; NaN; NaN with another payload in the middle; -0.0; 0.0; a key wider than 32
 * bits; empty strings; "a" and "aa" in turn (bytes of period 1, offsets not); distinct values. */
typedef enum eq_kind {
    K_A,
    K_B,
    K_C,
    K_NAN,
    K_NAN2,
    K_NEG0,
    K_POS0,
    K_BIG,
    K_EMPTY,
    K_A1,
    K_A2,
    K_ROW
} eq_kind;

static int eq_kind_int(size_t r);

static eq_kind eq_kind_of(size_t r)
{
    size_t in = r % EQ_SEG;
    switch (r / EQ_SEG) {
    case 0:
        return K_A;
    case 1:
        return in == EQ_SEG - 1 ? K_B : K_A;
    case 2:
        return K_B;
    case 3:
        return in == 0 ? K_A : K_C;
    case 4:
        return K_NAN;
    case 5:
        return in == 2000 ? K_NAN2 : K_NAN;
    case 6:
        return K_NEG0;
    case 7:
        return K_POS0;
    case 8:
        return K_BIG;
    case 9:
        return K_EMPTY;
    case 10:
        return in % 2 ? K_A2 : K_A1;
    default:
        return K_ROW;
    }
}

static int eq_kind_int(size_t r)
{
    return (int)eq_kind_of(r);
}

static firn_field *eq_schema(void)
{
    firn_field *s = firn_field_new(0, "root", FIRN_TYPE_STRUCT, true);
    firn_field_add(s, firn_field_new(1, "i", FIRN_TYPE_INT, false));
    firn_field_add(s, firn_field_new(2, "l", FIRN_TYPE_LONG, false));
    firn_field_add(s, firn_field_new_decimal(3, "d9", 9, 2, false));
    firn_field_add(s, firn_field_new_decimal(4, "d15", 15, 2, false));
    firn_field_add(s, firn_field_new(5, "f", FIRN_TYPE_FLOAT, false));
    firn_field_add(s, firn_field_new(6, "d", FIRN_TYPE_DOUBLE, false));
    firn_field_add(s, firn_field_new(7, "s", FIRN_TYPE_STRING, false));
    firn_field_add(s, firn_field_new(8, "tz", FIRN_TYPE_TIMESTAMPTZ, false));
    return s;
}

static int64_t eq_int(eq_kind k, size_t r, int64_t big)
{
    static const int64_t v[] = {7, -3, 12345, 99, 98, -1, 0, 0, 5, 7, 7};
    if (k == K_BIG)
        return big;
    return k == K_ROW ? (int64_t)r : v[k];
}

static void eq_row(firn_batch *b, size_t r, bool nulls)
{
    static const uint32_t f_bits[] = {0x7FC00000u, 0x7FC00001u, 0x80000000u, 0u};
    static const uint64_t d_bits[] = {0x7FF8000000000000ull, 0xFFF8000000000001ull,
                                      0x8000000000000000ull, 0ull};
    /* K_B as long as K_A: only its bytes differ */
    static const char *const strs[] = {"seven", "sevem", "twelve", "nan", "nan2", "-0",
                                       "0",     "big",   "",       "a",   "aa"};
    eq_kind k = eq_kind_of(r);
    for (size_t c = 0; c < E_COLS; c++) {
        firn_column *col = firn_batch_column(b, c);
        if (nulls && r % 5 == 4 && (c + r / EQ_SEG) % 3 != 0) {
            firn_column_append_null(col);
            continue;
        }
        float f = (float)eq_int(k, r, 1 << 20);
        double d = (double)eq_int(k, r, (int64_t)1 << 40);
        if (k >= K_NAN && k <= K_POS0) {
            memcpy(&f, &f_bits[k - K_NAN], 4);
            memcpy(&d, &d_bits[k - K_NAN], 8);
        }
        char str[32];
        switch (c) {
        case E_INT:
            firn_column_append_i32(col, (int32_t)eq_int(k, r, INT32_MIN));
            break;
        case E_DEC9:
            firn_column_append_i64(col, eq_int(k, r, -999999999));
            break;
        case E_FLOAT:
            firn_column_append_float(col, f);
            break;
        case E_DOUBLE:
            firn_column_append_double(col, d);
            break;
        case E_STR:
            if (k == K_ROW)
                firn_column_append_bytes(col, str, (size_t)snprintf(str, sizeof(str), "r%zu", r));
            else
                firn_column_append_bytes(col, strs[k], strlen(strs[k]));
            break;
        default: /* long, decimal(15, 2), timestamptz: keys past 32 bits widen the slots */
            firn_column_append_i64(col, eq_int(k, r, (int64_t)1 << 40));
        }
    }
    T_OK(firn_batch_end_row(b, FIRN_OP_INSERT, 0, NULL));
}

/* Column c of a and b hold the same values, bit for bit (NaN payloads, -0.0); kind names the
 * row in a failure. */
static void same_column_bits(
    const firn_batch *a, const firn_batch *b, size_t c, size_t rows, int (*kind)(size_t))
{
    const firn_column *x = firn_batch_column((firn_batch *)a, c);
    const firn_column *y = firn_batch_column((firn_batch *)b, c);
    const firn_field *f = firn_column_field(x);
    bool bytes = f->type == FIRN_TYPE_STRING || f->type == FIRN_TYPE_BINARY;
    size_t w = bytes ? 0 : firn_type_value_size(f);
    for (size_t r = 0; r < rows; r++) {
        T_EQ_INT(firn_column_is_valid(y, r), firn_column_is_valid(x, r));
        if (!firn_column_is_valid(x, r))
            continue;
        bool same;
        if (bytes) {
            const uint32_t *ox = firn_column_offsets(x), *oy = firn_column_offsets(y);
            same = ox[r + 1] - ox[r] == oy[r + 1] - oy[r] &&
                   memcmp(firn_column_data(x) + ox[r], firn_column_data(y) + oy[r],
                          ox[r + 1] - ox[r]) == 0;
        } else {
            same = memcmp((const uint8_t *)firn_column_values(x) + r * w,
                          (const uint8_t *)firn_column_values(y) + r * w, w) == 0;
        }
        if (!same) {
            T_FAIL("column %zu row %zu (kind %d) differs", c, r, kind(r));
            return;
        }
    }
}

/* Writes src as one Parquet file into file (initialised here) with options o; the file's
 * metrics go to fm when it is not NULL (the caller deinits them). */
static void write_mem(const firn_field *s,
                      const firn_pq_options *o,
                      firn_batch *src,
                      firn_buf *file,
                      firn_pq_file_metrics *fm)
{
    firn_err err = {0};
    firn_buf_init(file, (size_t)1 << 30);
    firn_pq_writer *w;
    T_OK_ERR(firn_pq_writer_new(s, o, mem_write, file, &w, &err), &err);
    T_OK_ERR(firn_pq_writer_write(w, src, &err), &err);
    T_OK_ERR(firn_pq_writer_close(w, &err), &err);
    if (fm)
        firn_pq_writer_take_metrics(w, fm);
    firn_pq_writer_free(w);
}

/* Reads the one row group of file (schema s, rows rows) back with firn's reader into a new
 * batch (the caller frees it). */
static firn_batch *read_one_group(const firn_buf *file, const firn_field *s, size_t rows)
{
    firn_err err = {0};
    firn_pq_reader *r;
    T_OK_ERR(firn_pq_reader_open_mem(file->data, file->len, &r, &err), &err);
    T_OK_ERR(firn_pq_reader_select(r, s, &err), &err);
    T_EQ_UINT(firn_pq_reader_row_groups(r), 1);
    firn_batch *b = firn_batch_new(s);
    T_OK_ERR(firn_pq_reader_read_row_group(r, 0, b, &err), &err);
    T_EQ_UINT(firn_batch_rows(b), rows);
    firn_pq_reader_free(r);
    return b;
}

/* Steps whose values are all equal take the writer's short path (one probe, one id for the
 * step); these files read back value for value, with pages of 20000 rows (steps of 4096 rows
 * lined up with the segments of eq_kind_of) and of 3000 (steps across segments), without nulls
 * and with nulls inside the equal steps; the NaN counts cover every NaN of an equal step. */
T_TEST(equal_value_steps_read_back)
{
    firn_field *s = eq_schema();
    const size_t rows = EQ_SEGS * EQ_SEG;
    for (int variant = 0; variant < 4; variant++) {
        bool nulls = variant & 1;
        firn_batch *src = firn_batch_new(s);
        uint64_t nans[E_COLS] = {0};
        for (size_t r = 0; r < rows; r++) {
            eq_row(src, r, nulls);
            eq_kind k = eq_kind_of(r);
            for (size_t c = E_FLOAT; c <= E_DOUBLE; c++)
                nans[c] += (k == K_NAN || k == K_NAN2) &&
                           firn_column_is_valid(firn_batch_column(src, c), r);
        }
        firn_pq_options o;
        firn_pq_options_init(&o);
        o.page_rows = variant & 2 ? 3000 : 20000;
        firn_buf file;
        firn_pq_file_metrics fm;
        write_mem(s, &o, src, &file, &fm);
        T_EQ_UINT(fm.n_fields, E_COLS);
        for (size_t c = E_FLOAT; c <= E_DOUBLE; c++)
            T_EQ_UINT(fm.fields[c].nan_count, nans[c]);
        T_TRUE(nans[E_FLOAT] > 2 * EQ_SEG - 2 * EQ_SEG / 5 - 2);
        firn_pq_file_metrics_deinit(&fm);

        firn_batch *b = read_one_group(&file, s, rows);
        for (size_t c = 0; c < E_COLS; c++)
            same_column_bits(src, b, c, rows, eq_kind_int);
        firn_batch_free(b);
        firn_buf_deinit(&file);
        firn_batch_free(src);
    }
    firn_field_free(s);
}

/* ---- runs of one id that span steps and pages ---------------------------------------------- */

enum { CR_ROWS = 20005, CR_PAGE = 10000, CR_WRITE = 1000 };

/* The value index of row r: 0 in long runs (rows [0, 9000) in steps of CR_WRITE rows whose runs
 * of one id join, page 2 after its first row, and a last page of 5 rows: a run shorter than one
 * RLE run), 1 in rows 9000..9002 (a step with a short run of another value inside the first
 * page) and in row 10000 (page 2's first value, a step of its own, before a run of 0), 2 in row
 * 9999 (the last value of page 1 differs). */
static int cr_value(size_t r)
{
    if ((r >= 9000 && r < 9003) || r == CR_PAGE)
        return 1;
    return r == 9999 ? 2 : 0;
}

static void cr_row(firn_batch *b, size_t r)
{
    static const char *const strs[] = {"r", "u", "d"};
    static const int64_t longs[] = {0x1A2B3C4D5E, 7, (int64_t)1 << 40};
    int v = cr_value(r);
    firn_column_append_i32(firn_batch_column(b, 0), 100 + v); /* required */
    firn_column_append_i64(firn_batch_column(b, 1), longs[v]);
    firn_column_append_bytes(firn_batch_column(b, 2), strs[v], 1);
    /* null in the last page and at every 1000th row of the first: runs of present values with
     * nulls between them */
    if (r >= 2 * CR_PAGE || (r < CR_PAGE && r % CR_WRITE == 500))
        firn_column_append_null(firn_batch_column(b, 3));
    else
        firn_column_append_i64(firn_batch_column(b, 3), 1764590400000000 + v);
    firn_column_append_double(firn_batch_column(b, 4), v == 0 ? -0.0 : 0.5 * v);
    T_OK(firn_batch_end_row(b, FIRN_OP_READ, 0, NULL));
}

/* Steps of one value keep their ids as a pending run (ids_run) that later steps of the same id
 * extend, a step of other values writes out, and a page of one id writes as one RLE run: a
 * first page of a joined run, a short run of another value and a different last value; a page
 * of one value over 10 steps; a last page of 5 (a literal group); a column null in a whole page
 * and one with nulls between its runs; every physical type with a dictionary (int32, int64,
 * byte array, double). The file is written in batches of up to CR_WRITE rows (each a step of
 * its own) and reads back value for value. */
T_TEST(constant_runs_read_back)
{
    firn_field *s = firn_field_new(0, "root", FIRN_TYPE_STRUCT, true);
    firn_field_add(s, firn_field_new(1, "i", FIRN_TYPE_INT, true));
    firn_field_add(s, firn_field_new(2, "_firn_lsn", FIRN_TYPE_LONG, false));
    firn_field_add(s, firn_field_new(3, "_firn_op", FIRN_TYPE_STRING, false));
    firn_field_add(s, firn_field_new(4, "_firn_ingest_ts", FIRN_TYPE_TIMESTAMPTZ, false));
    firn_field_add(s, firn_field_new(5, "d", FIRN_TYPE_DOUBLE, false));
    firn_batch *all = firn_batch_new(s);
    firn_pq_options o;
    firn_pq_options_init(&o);
    o.page_rows = CR_PAGE;
    firn_err err = {0};
    firn_buf file;
    firn_buf_init(&file, (size_t)1 << 30);
    firn_pq_writer *w;
    T_OK_ERR(firn_pq_writer_new(s, &o, mem_write, &file, &w, &err), &err);
    for (size_t r0 = 0, end; r0 < CR_ROWS; r0 = end) {
        end = r0 == CR_PAGE ? r0 + 1 : (r0 / CR_WRITE + 1) * CR_WRITE; /* row 10000 alone */
        firn_batch *part = firn_batch_new(s);
        for (size_t r = r0; r < end && r < CR_ROWS; r++) {
            cr_row(part, r);
            cr_row(all, r);
        }
        T_OK_ERR(firn_pq_writer_write(w, part, &err), &err);
        firn_batch_free(part);
    }
    T_OK_ERR(firn_pq_writer_close(w, &err), &err);
    firn_pq_writer_free(w);
    firn_batch *b = read_one_group(&file, s, CR_ROWS);
    for (size_t c = 0; c < 5; c++)
        same_column_bits(all, b, c, CR_ROWS, cr_value);
    firn_batch_free(b);
    firn_buf_deinit(&file);
    firn_batch_free(all);
    firn_field_free(s);
}

/* ---- PLAIN pages compressed in place, page headers written before their sizes are known ---- */

enum { PL_ROWS = 30000, PL_PAGE = 2000 };

/* Which of three kinds the page of row r is: one value (a few compressed bytes), distinct
 * values (kilobytes), distinct values and every third null. */
static int pl_kind(size_t r)
{
    return (int)((r / PL_PAGE) * 7 % 3);
}

static void pl_row(firn_batch *b, size_t r)
{
    int k = pl_kind(r);
    uint64_t v = k == 0 ? 42 : mix(r);
    char str[32];
    firn_column_append_i64(firn_batch_column(b, 0), (int64_t)v); /* required */
    if (r % PL_PAGE == 77 || (k == 2 && r % 3 == 0))             /* a null a page, or many */
        firn_column_append_null(firn_batch_column(b, 1));
    else
        firn_column_append_i64(firn_batch_column(b, 1), (int64_t)v);
    if (k == 2 && r % 3 == 1)
        firn_column_append_null(firn_batch_column(b, 2));
    else
        firn_column_append_double(firn_batch_column(b, 2), (double)(int64_t)v / 7.0);
    firn_column_append_bool(firn_batch_column(b, 3), (v >> 7) & 1);
    firn_column_append_bytes(firn_batch_column(b, 4), str,
                             (size_t)snprintf(str, sizeof(str), "%llx", (unsigned long long)v));
    T_OK(firn_batch_end_row(b, FIRN_OP_INSERT, 0, NULL));
}

/* Columns of distinct values fall back to PLAIN after their first page; their pages are
 * compressed from the PLAIN buffer with the levels in front of the values when the levels are
 * short (required, without nulls, one null), from a copy when not (every third value null),
 * and every page header is written before its compressed size is known and corrected after:
 * pages of one value (a few bytes compressed) and of distinct values (kilobytes) alternate,
 * so that the size of a page's varint differs from its predecessor's both ways. Every codec;
 * values read back bit for bit. */
T_TEST(plain_pages_in_place_read_back)
{
    static const firn_pq_codec codecs[] = {FIRN_PQ_ZSTD, FIRN_PQ_SNAPPY, FIRN_PQ_GZIP,
                                           FIRN_PQ_UNCOMPRESSED};
    firn_field *s = firn_field_new(0, "root", FIRN_TYPE_STRUCT, true);
    firn_field_add(s, firn_field_new(1, "req", FIRN_TYPE_LONG, true));
    firn_field_add(s, firn_field_new(2, "opt", FIRN_TYPE_LONG, false));
    firn_field_add(s, firn_field_new(3, "dbl", FIRN_TYPE_DOUBLE, false));
    firn_field_add(s, firn_field_new(4, "flag", FIRN_TYPE_BOOLEAN, false));
    firn_field_add(s, firn_field_new(5, "str", FIRN_TYPE_STRING, false));
    firn_batch *src = firn_batch_new(s);
    for (size_t r = 0; r < PL_ROWS; r++)
        pl_row(src, r);
    for (size_t k = 0; k < sizeof(codecs) / sizeof(codecs[0]); k++) {
        firn_pq_options o;
        firn_pq_options_init(&o);
        o.codec = codecs[k];
        o.page_rows = PL_PAGE;
        o.dict_bytes = 4 << 10;
        firn_buf file;
        write_mem(s, &o, src, &file, NULL);
        firn_batch *b = read_one_group(&file, s, PL_ROWS);
        for (size_t c = 0; c < 5; c++)
            same_column_bits(src, b, c, PL_ROWS, pl_kind);
        firn_batch_free(b);
        firn_buf_deinit(&file);
    }
    firn_batch_free(src);
    firn_field_free(s);
}

/* ---- integer dictionaries' direct windows ------------------------------------------------- */

enum { DW_SPREAD = 5000, DW_LO = -70000, DW_HI = 110000, DW_SWEEP = DW_HI - DW_LO + 1 };

/* Row r of dw_rows: 5 000 distinct values over 0..39 992 (the dictionaries' direct windows
 * grow to their largest size around them), then every value of DW_LO..DW_HI upwards (across
 * both edges of the window, wherever the writer put it) and again in another order, then the
 * ends of int32 and int64 and values near 0. */
static int64_t dw_value(size_t r)
{
    static const int64_t ends[] = {INT32_MIN, INT32_MAX,        INT64_MIN, INT64_MAX,    -1, 0,
                                   1,         (int64_t)1 << 40, -8,        INT32_MIN + 1};
    if (r < DW_SPREAD)
        return (int64_t)((r * 2654435761u) % DW_SPREAD) * 8;
    r -= DW_SPREAD;
    if (r < DW_SWEEP)
        return DW_LO + (int64_t)r;
    r -= DW_SWEEP;
    if (r < DW_SWEEP)
        return DW_LO + (int64_t)((r * 7919) % DW_SWEEP);
    r -= DW_SWEEP;
    return ends[r % (sizeof(ends) / sizeof(ends[0]))];
}

static int dw_kind(size_t r)
{
    return r < DW_SPREAD ? 0 : r < DW_SPREAD + DW_SWEEP ? 1 : r < DW_SPREAD + 2 * DW_SWEEP ? 2 : 3;
}

/* int, long, decimal(9,2) (int32 from int64 values) and decimal(15,2) columns of dw_value,
 * each null every 11th row and where the value does not fit the column. */
static void dw_row(firn_batch *b, size_t r)
{
    const int64_t v = dw_value(r);
    const bool null = r % 11 == 5;
    if (null || v != (int32_t)v)
        firn_column_append_null(firn_batch_column(b, 0));
    else
        firn_column_append_i32(firn_batch_column(b, 0), (int32_t)v);
    if (null)
        firn_column_append_null(firn_batch_column(b, 1));
    else
        firn_column_append_i64(firn_batch_column(b, 1), v);
    if (null || v <= -1000000000 || v >= 1000000000)
        firn_column_append_null(firn_batch_column(b, 2));
    else
        firn_column_append_i64(firn_batch_column(b, 2), v);
    if (null || v <= -1000000000000000 || v >= 1000000000000000)
        firn_column_append_null(firn_batch_column(b, 3));
    else
        firn_column_append_i64(firn_batch_column(b, 3), v);
    T_OK(firn_batch_end_row(b, FIRN_OP_INSERT, 0, NULL));
}

/* Integer dictionaries find most values in a direct window over their range (values as ids)
 * and the rest in keyed slots: values on both sides of the window's edges, new and again,
 * negative ones, the ends of int32 and int64 (an int64 dictionary's slots widen) and nulls
 * between them read back value for value, with the default pages and with pages of 3 000
 * rows. */
T_TEST(direct_window_values_read_back)
{
    firn_field *s = firn_field_new(0, "root", FIRN_TYPE_STRUCT, true);
    firn_field_add(s, firn_field_new(1, "i32", FIRN_TYPE_INT, false));
    firn_field_add(s, firn_field_new(2, "i64", FIRN_TYPE_LONG, false));
    firn_field_add(s, firn_field_new_decimal(3, "d9", 9, 2, false));
    firn_field_add(s, firn_field_new_decimal(4, "d15", 15, 2, false));
    const size_t rows = DW_SPREAD + 2 * DW_SWEEP + 40;
    firn_batch *src = firn_batch_new(s);
    for (size_t r = 0; r < rows; r++)
        dw_row(src, r);
    for (int variant = 0; variant < 2; variant++) {
        firn_pq_options o;
        firn_pq_options_init(&o);
        if (variant == 1)
            o.page_rows = 3000;
        firn_buf file;
        write_mem(s, &o, src, &file, NULL);
        firn_batch *b = read_one_group(&file, s, rows);
        for (size_t c = 0; c < 4; c++)
            same_column_bits(src, b, c, rows, dw_kind);
        firn_batch_free(b);
        firn_buf_deinit(&file);
    }
    firn_batch_free(src);
    firn_field_free(s);
}

T_MAIN(T_CASE(roundtrip_zstd),
       T_CASE(roundtrip_snappy),
       T_CASE(roundtrip_gzip),
       T_CASE(roundtrip_uncompressed),
       T_CASE(file_shape),
       T_CASE(select_subset_by_id),
       T_CASE(select_errors),
       T_CASE(widening_values),
       T_CASE(callback_reads_chunks_only),
       T_CASE(delta_binary_packed),
       T_CASE(rle_hybrid_decode),
       T_CASE(byte_stream_split),
       T_CASE(corrupt_files),
       T_CASE(not_parquet),
       T_CASE(row_group_value_bytes),
       T_CASE(equal_value_steps_read_back),
       T_CASE(constant_runs_read_back),
       T_CASE(direct_window_values_read_back),
       T_CASE(plain_pages_in_place_read_back))
