/* SPDX-License-Identifier: Apache-2.0 */
/* Parquet writer unit tests: Thrift compact round trips, the RLE/bit-packed hybrid, footers read
 * back with firn's own decoder, required-field errors, metrics and file rolling. Independent
 * readers (pyarrow, DuckDB, pyiceberg) check the files in tests/interop/test_parquet_*.py. */
#include "parquet/pq_int.h"
#include "t.h"

typedef struct membuf {
    firn_buf b;
    int fail_after; /* fail the Nth write (0 = never) */
    int writes;
} membuf;

static firn_rc mem_write(void *ctx, const void *p, size_t len, firn_err *err)
{
    membuf *m = ctx;
    if (m->fail_after && ++m->writes >= m->fail_after)
        return firn_err_set(err, FIRN_ERR_IO, "injected write failure");
    return firn_buf_append(&m->b, p, len);
}

/* Writes b (schema s) as one Parquet file into m (initialised here) and takes its metrics. */
static void write_to_mem(firn_field *s, firn_batch *b, membuf *m, firn_pq_file_metrics *fm)
{
    firn_err err = {0};
    firn_buf_init(&m->b, 1 << 26);
    firn_pq_writer *w = NULL;
    T_OK_ERR(firn_pq_writer_new(s, NULL, mem_write, m, &w, &err), &err);
    T_OK_ERR(firn_pq_writer_write(w, b, &err), &err);
    T_OK_ERR(firn_pq_writer_close(w, &err), &err);
    firn_pq_writer_take_metrics(w, fm);
    firn_pq_writer_free(w);
}

T_TEST(thrift_roundtrip)
{
    firn_buf b;
    firn_buf_init(&b, 1 << 20);
    pq_tw w;
    firn__pq_tw_init(&w, &b);
    firn__pq_tw_struct_begin(&w);
    firn__pq_tw_field_i32(&w, 1, -5);
    firn__pq_tw_field_i64(&w, 40, INT64_MIN); /* long form: delta > 15 */
    firn__pq_tw_field_bool(&w, 41, true);
    firn__pq_tw_field_struct(&w, 42);
    firn__pq_tw_field_bin(&w, 1, "hi", 2);
    firn__pq_tw_struct_end(&w);
    firn__pq_tw_field_list(&w, 43, TC_I32, 20);
    for (int i = 0; i < 20; i++)
        firn__pq_tw_i32(&w, i * 1000);
    firn__pq_tw_field_i32(&w, 2, 7); /* backwards: long form */
    firn__pq_tw_struct_end(&w);
    T_OK(w.rc);

    pq_tr r;
    int16_t id;
    uint8_t t;
    firn__pq_tr_init(&r, b.data, b.len);
    firn__pq_tr_struct_begin(&r);
    T_TRUE(firn__pq_tr_field(&r, &id, &t));
    T_EQ_INT(id, 1);
    T_EQ_INT(firn__pq_tr_int(&r, t), -5);
    T_TRUE(firn__pq_tr_field(&r, &id, &t));
    T_EQ_INT(id, 40);
    T_EQ_INT(firn__pq_tr_int(&r, t), INT64_MIN);
    T_TRUE(firn__pq_tr_field(&r, &id, &t));
    T_EQ_INT(id, 41);
    T_TRUE(firn__pq_tr_bool(&r, t));
    T_TRUE(firn__pq_tr_field(&r, &id, &t));
    T_EQ_INT(id, 42);
    firn__pq_tr_skip(&r, t);
    T_TRUE(firn__pq_tr_field(&r, &id, &t));
    T_EQ_INT(id, 43);
    uint8_t et;
    T_EQ_INT(firn__pq_tr_list(&r, &et), 20);
    for (int i = 0; i < 20; i++)
        T_EQ_INT(firn__pq_tr_int(&r, et), i * 1000);
    T_TRUE(firn__pq_tr_field(&r, &id, &t));
    T_EQ_INT(id, 2);
    T_EQ_INT(firn__pq_tr_int(&r, t), 7);
    T_FALSE(firn__pq_tr_field(&r, &id, &t));
    T_TRUE(firn_rd_ok(&r.rd));
    T_EQ_UINT(firn_rd_remaining(&r.rd), 0);
    firn_buf_deinit(&b);
}

T_TEST(rle_roundtrip)
{
    uint32_t v[5000], out[5000];
    uint64_t x = 88172645463325252ull;
    for (int bw = 1; bw <= 20; bw++) {
        for (size_t i = 0; i < 5000; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            /* runs and noise */
            v[i] = (i / 100) % 2 ? (uint32_t)(i / 300) & ((1u << bw) - 1)
                                 : (uint32_t)x & ((1u << bw) - 1);
        }
        for (size_t n = 0; n < 5000; n += 997) {
            firn_buf b;
            firn_buf_init(&b, 1 << 20);
            T_OK(firn__pq_rle_u32(&b, v, n, bw));
            T_TRUE(firn__pq_rle_decode(b.data, b.len, bw, out, n));
            T_EQ_MEM(out, v, n * sizeof(uint32_t));
            firn_buf_deinit(&b);
        }
    }
}

/* The hybrid encoding written one value at a time (the encoder before its 8-value packing and
 * word-wise run scan): firn__pq_rle_u8/u32 must produce the same bytes. */
static void ref_rle(firn_buf *out, const uint32_t *v, size_t n, int bw)
{
    size_t i = 0;
    while (i < n) {
        size_t run = 1;
        while (i + run < n && v[i + run] == v[i])
            run++;
        if (run >= 8) {
            uint64_t x = v[i];
            T_OK(firn_wr_uvarint(out, (uint64_t)run << 1));
            T_OK(firn_buf_append(out, &x, (size_t)(bw + 7) / 8));
            i += run;
            continue;
        }
        size_t start = i, groups = 0;
        while (i < n && groups < 63) {
            size_t r = 1;
            while (i + r < n && r < 8 && v[i + r] == v[i])
                r++;
            if (i != start && r >= 8)
                break;
            i += 8;
            groups++;
        }
        T_OK(firn_wr_uvarint(out, ((uint64_t)groups << 1) | 1));
        uint64_t acc = 0;
        int bits = 0;
        for (size_t k = start; k < start + groups * 8; k++) {
            acc |= (uint64_t)(k < n ? v[k] : 0) << bits;
            for (bits += bw; bits >= 8; bits -= 8, acc >>= 8)
                T_OK(firn_wr_u8(out, (uint8_t)acc));
        }
        if (i > n)
            i = n;
    }
}

T_TEST(rle_matches_reference_bytes)
{
    uint32_t v[3001];
    uint8_t v8[3001];
    uint64_t x = 0x2545F4914F6CDD1Dull;
    for (int bw = 1; bw <= 32; bw++) {
        uint64_t mask = ((uint64_t)1 << bw) - 1;
        for (size_t i = 0; i < 3001; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            /* runs of 1..40 equal values (word-scan edges) between noise */
            v[i] = (i / 37) % 3 == 1 ? (uint32_t)(i / 37 & mask) : (uint32_t)(x & mask);
            if ((i / 41) % 4 == 2)
                v[i] = (uint32_t)((i / (1 + i % 40)) & mask);
            v8[i] = (uint8_t)(v[i] & 0xFF);
        }
        for (size_t n = 0; n <= 3001; n += 1 + n / 3) {
            firn_buf a, b;
            firn_buf_init(&a, 1 << 20);
            firn_buf_init(&b, 1 << 20);
            T_OK(firn__pq_rle_u32(&a, v, n, bw));
            ref_rle(&b, v, n, bw);
            T_EQ_UINT(a.len, b.len);
            T_EQ_MEM(a.data, b.data, b.len);
            if (bw <= 8) {
                uint32_t w[3001];
                for (size_t i = 0; i < n; i++)
                    w[i] = v8[i];
                firn_buf_reset(&a);
                firn_buf_reset(&b);
                T_OK(firn__pq_rle_u8(&a, v8, n, bw));
                ref_rle(&b, w, n, bw);
                T_EQ_UINT(a.len, b.len);
                T_EQ_MEM(a.data, b.data, b.len);
            }
            firn_buf_deinit(&a);
            firn_buf_deinit(&b);
        }
    }
}

/* firn__pq_rle_u32_repeat (a page whose ids are one run, written without an array of them)
 * writes the bytes firn__pq_rle_u32 and the one-value-at-a-time encoder write for the array:
 * literal groups below 8 values, one run from 8 on (headers of 1, 2 and 3 bytes, 64 values the
 * first of 2), values of every width up to 32 bits. */
T_TEST(rle_repeat_matches_array)
{
    static uint32_t v[70000];
    static const size_t NS[] = {0, 1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 504, 505, 4096, 69999};
    for (int bw = 1; bw <= 32; bw++) {
        const uint32_t mask = (uint32_t)((1ull << bw) - 1), x = mask ^ (mask >> 2); /* top bit */
        for (size_t k = 0; k < sizeof(NS) / sizeof(NS[0]); k++) {
            size_t n = NS[k];
            for (size_t i = 0; i < n; i++)
                v[i] = x;
            firn_buf a, b, c;
            firn_buf_init(&a, 1 << 20);
            firn_buf_init(&b, 1 << 20);
            firn_buf_init(&c, 1 << 20);
            T_OK(firn__pq_rle_u32_repeat(&a, x, n, bw));
            T_OK(firn__pq_rle_u32(&b, v, n, bw));
            ref_rle(&c, v, n, bw);
            T_EQ_UINT(a.len, c.len);
            T_EQ_MEM(a.data, c.data, c.len);
            T_EQ_UINT(b.len, c.len);
            T_EQ_MEM(b.data, c.data, c.len);
            firn_buf_deinit(&a);
            firn_buf_deinit(&b);
            firn_buf_deinit(&c);
        }
    }
}

static firn_field *small_schema(void)
{
    firn_field *s = firn_field_new(0, "table", FIRN_TYPE_STRUCT, true);
    firn_field_add(s, firn_field_new(1, "id", FIRN_TYPE_LONG, true));
    firn_field_add(s, firn_field_new(2, "name", FIRN_TYPE_STRING, false));
    firn_field *l = firn_field_new(3, "xs", FIRN_TYPE_LIST, false);
    firn_field_add(l, firn_field_new(4, "element", FIRN_TYPE_DOUBLE, false));
    firn_field_add(s, l);
    return s;
}

static void fill(firn_batch *b, size_t n)
{
    firn_err err = {0};
    for (size_t i = 0; i < n; i++) {
        firn_column_append_i64(firn_batch_column(b, 0), (int64_t)i - 10);
        if (i % 3 == 0)
            firn_column_append_null(firn_batch_column(b, 1));
        else
            firn_column_append_bytes(firn_batch_column(b, 1), i % 2 ? "odd" : "even",
                                     i % 2 ? 3 : 4);
        firn_column *xs = firn_batch_column(b, 2);
        firn_column_list_begin(xs);
        if (i % 4 == 1)
            firn_column_append_null(firn_column_child(xs, 0));
        if (i % 4 == 2)
            firn_column_append_double(firn_column_child(xs, 0), 0.0 / 0.0);
        firn_column_append_double(firn_column_child(xs, 0), (double)i);
        firn_column_list_end(xs);
        T_OK_ERR(firn_batch_end_row(b, FIRN_OP_INSERT, 0, &err), &err);
    }
}

T_TEST(footer_reads_back)
{
    firn_field *s = small_schema();
    firn_batch *b = firn_batch_new(s);
    fill(b, 1000);
    membuf m = {0};
    firn_err err = {0};
    firn_pq_file_metrics fm;
    write_to_mem(s, b, &m, &fm);

    T_EQ_UINT(fm.record_count, 1000);
    T_EQ_UINT(fm.file_size_bytes, m.b.len);
    T_EQ_UINT(fm.n_fields, 3);
    T_EQ_INT(fm.fields[0].field_id, 1);
    T_EQ_UINT(fm.fields[1].null_count, 334);
    T_EQ_INT(fm.fields[2].field_id, 4);
    T_EQ_UINT(fm.fields[2].value_count, 1500);
    T_EQ_UINT(fm.fields[2].null_count, 250);
    T_EQ_UINT(fm.fields[2].nan_count, 250);
    T_FALSE(fm.fields[2].has_lower); /* inside a list */
    int64_t lo;
    memcpy(&lo, fm.fields[0].lower, 8);
    T_EQ_INT(lo, -10);
    T_EQ_MEM(fm.fields[1].lower, "even", 4);
    T_EQ_UINT(fm.n_split_offsets, 1);
    T_EQ_INT(fm.split_offsets[0], 4);

    uint32_t len;
    T_OK_ERR(firn_pq_footer_locate(m.b.data + m.b.len - 8, m.b.len, &len, &err), &err);
    firn_pq_file_meta *md = NULL;
    T_OK_ERR(firn_pq_footer_parse(m.b.data + m.b.len - 8 - len, len, &md, &err), &err);
    T_EQ_INT(md->num_rows, 1000);
    T_TRUE(strncmp(md->created_by, "firn version ", 13) == 0);
    T_EQ_UINT(md->n_schema, 6);
    T_EQ_STR(md->schema[3].name, "xs");
    T_EQ_INT(md->schema[3].field_id, 3);
    T_EQ_INT(md->schema[3].converted_type, 3);
    T_FALSE(md->schema[4].has_field_id); /* the repeated middle group */
    T_EQ_INT(md->schema[5].field_id, 4);
    T_EQ_INT(md->schema[2].logical_type, 1);
    T_EQ_UINT(md->n_row_groups, 1);
    const firn_pq_chunk_meta *c = &md->row_groups[0].columns[1];
    T_EQ_INT(c->stats.null_count, 334);
    T_EQ_UINT(c->stats.min_len, 4);
    T_EQ_MEM(c->stats.min_value, "even", 4);
    T_EQ_MEM(c->stats.max_value, "odd", 3);
    T_TRUE(c->dictionary_page_offset > 0 && c->dictionary_page_offset < c->data_page_offset);
    T_EQ_UINT(c->n_path, 1);
    T_EQ_STR(md->row_groups[0].columns[2].path[1], "list");
    T_EQ_UINT(md->n_column_orders, 3);
    firn_pq_file_meta_free(md);

    /* every truncation of the footer fails cleanly */
    for (uint32_t cut = 0; cut < len; cut += 7) {
        md = NULL;
        T_TRUE(firn_pq_footer_parse(m.b.data + m.b.len - 8 - len, cut, &md, &err) != FIRN_OK);
    }
    firn_pq_file_metrics_deinit(&fm);
    firn_buf_deinit(&m.b);
    firn_batch_free(b);
    firn_field_free(s);
}

T_TEST(null_in_required_is_an_error)
{
    firn_field *s = small_schema();
    firn_batch *b = firn_batch_new(s);
    firn_err err = {0};
    firn_column_append_null(firn_batch_column(b, 0));
    firn_column_append_null(firn_batch_column(b, 1));
    firn_column_append_null(firn_batch_column(b, 2));
    T_OK(firn_batch_end_row(b, FIRN_OP_INSERT, 0, &err));
    membuf m = {0};
    firn_buf_init(&m.b, 1 << 20);
    firn_pq_writer *w = NULL;
    T_OK(firn_pq_writer_new(s, NULL, mem_write, &m, &w, &err));
    T_EQ_INT(firn_pq_writer_write(w, b, &err), FIRN_ERR_INVALID);
    T_TRUE(strstr(err.msg, "\"id\"") != NULL);
    T_EQ_INT(firn_pq_writer_close(w, &err), FIRN_ERR_INVALID);
    firn_pq_writer_free(w);
    firn_buf_deinit(&m.b);
    firn_batch_free(b);
    firn_field_free(s);
}

T_TEST(sink_failure_propagates)
{
    firn_field *s = small_schema();
    firn_batch *b = firn_batch_new(s);
    fill(b, 100);
    for (int n = 1; n <= 4; n++) {
        membuf m = {0};
        m.fail_after = n;
        firn_buf_init(&m.b, 1 << 20);
        firn_err err = {0};
        firn_pq_writer *w = NULL;
        firn_rc rc = firn_pq_writer_new(s, NULL, mem_write, &m, &w, &err);
        if (!rc)
            rc = firn_pq_writer_write(w, b, &err);
        if (!rc)
            rc = firn_pq_writer_close(w, &err);
        T_EQ_INT(rc, FIRN_ERR_IO);
        firn_pq_writer_free(w);
        firn_buf_deinit(&m.b);
    }
    firn_batch_free(b);
    firn_field_free(s);
}

typedef struct roll_ctx {
    membuf files[64];
    uint64_t rows[64];
    uint32_t opened, closed;
} roll_ctx;

static firn_rc
roll_open(void *ctx, uint32_t idx, firn_pq_write_fn *out_write, void **out_ctx, firn_err *err)
{
    roll_ctx *r = ctx;
    (void)err;
    T_EQ_UINT(idx, r->opened);
    firn_buf_init(&r->files[idx].b, 1 << 26);
    *out_write = mem_write;
    *out_ctx = &r->files[idx];
    r->opened++;
    return FIRN_OK;
}

static firn_rc roll_close(void *ctx, uint32_t idx, firn_pq_file_metrics *m, firn_err *err)
{
    roll_ctx *r = ctx;
    (void)err;
    T_EQ_UINT(m->file_size_bytes, r->files[idx].b.len);
    r->rows[idx] = m->record_count;
    r->closed++;
    return FIRN_OK;
}

T_TEST(roller_splits_by_size)
{
    firn_field *s = small_schema();
    firn_batch *b = firn_batch_new(s);
    fill(b, 50000);
    roll_ctx rc = {0};
    firn_pq_roll_callbacks cb = {&rc, roll_open, roll_close};
    firn_pq_options o;
    firn_pq_options_init(&o);
    o.file_bytes = 64 << 10;
    o.row_group_bytes = 16 << 10;
    o.codec = FIRN_PQ_SNAPPY;
    firn_pq_roller *r = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_pq_roller_new(s, &o, &cb, &r, &err), &err);
    T_OK_ERR(firn_pq_roller_write(r, b, &err), &err);
    T_OK_ERR(firn_pq_roller_close(r, &err), &err);
    T_TRUE(rc.closed > 1);
    T_EQ_UINT(firn_pq_roller_files(r), rc.closed);
    uint64_t total = 0;
    for (uint32_t i = 0; i < rc.closed; i++) {
        total += rc.rows[i];
        T_TRUE(memcmp(rc.files[i].b.data + rc.files[i].b.len - 4, "PAR1", 4) == 0);
        firn_buf_deinit(&rc.files[i].b);
    }
    T_EQ_UINT(total, 50000);
    firn_pq_roller_free(r);
    firn_batch_free(b);
    firn_field_free(s);
}

/* A string column whose min or max is longer than 4096 bytes has no min/max in the footer (the
 * value twice made a 100 MB footer for one 50 MB text); the null count and the Iceberg bounds,
 * truncated to 16 characters, stay. */
T_TEST(long_string_stats_are_left_out)
{
    for (size_t big = 4096; big <= 4097; big++) {
        firn_field *s = firn_field_new(0, "table", FIRN_TYPE_STRUCT, true);
        firn_field_add(s, firn_field_new(1, "t", FIRN_TYPE_STRING, false));
        firn_batch *b = firn_batch_new(s);
        firn_err err = {0};
        char *text = firn_calloc(big, 1);
        memset(text, 'z', big);
        firn_column_append_bytes(firn_batch_column(b, 0), "a", 1);
        T_OK_ERR(firn_batch_end_row(b, FIRN_OP_INSERT, 0, &err), &err);
        firn_column_append_bytes(firn_batch_column(b, 0), text, big);
        T_OK_ERR(firn_batch_end_row(b, FIRN_OP_INSERT, 0, &err), &err);
        firn_column_append_null(firn_batch_column(b, 0));
        T_OK_ERR(firn_batch_end_row(b, FIRN_OP_INSERT, 0, &err), &err);
        membuf m = {0};
        firn_pq_file_metrics fm;
        write_to_mem(s, b, &m, &fm);
        T_TRUE(fm.fields[0].has_lower);
        T_EQ_UINT(fm.fields[0].upper_len, 16);
        uint32_t len;
        T_OK_ERR(firn_pq_footer_locate(m.b.data + m.b.len - 8, m.b.len, &len, &err), &err);
        firn_pq_file_meta *md = NULL;
        T_OK_ERR(firn_pq_footer_parse(m.b.data + m.b.len - 8 - len, len, &md, &err), &err);
        const firn_pq_chunk_meta *c = &md->row_groups[0].columns[0];
        T_EQ_INT(c->stats.null_count, 1);
        if (big == 4096) {
            T_EQ_UINT(c->stats.max_len, 4096);
            T_EQ_MEM(c->stats.min_value, "a", 1);
        } else {
            T_TRUE(c->stats.max_value == NULL && c->stats.min_value == NULL);
            T_TRUE(len < 1024);
        }
        firn_pq_file_meta_free(md);
        firn_pq_file_metrics_deinit(&fm);
        firn_buf_deinit(&m.b);
        firn_free(text);
        firn_batch_free(b);
        firn_field_free(s);
    }
}

/* ---- the column writer's dictionary, driven directly --------------------------------------- */

/* One optional column of type t, its batch, and a column writer over it whose current page
 * holds every value written (pages of 2^24 rows; dict_bytes as given). */
typedef struct colw_fx {
    firn_field *s;
    firn_batch *b;
    pq_leaf *leaves;
    size_t n_leaves;
    firn_pq_options o;
    pq_colw cw;
    pq_codec *codec;
    firn_buf scratch, comp;
    size_t written; /* rows handed to the writer */
} colw_fx;

static void fx_init(colw_fx *f, firn_type t, size_t dict_bytes)
{
    firn_err err = {0};
    memset(f, 0, sizeof(*f));
    f->s = firn_field_new(0, "table", FIRN_TYPE_STRUCT, true);
    firn_field_add(f->s, firn_field_new(1, "v", t, false));
    f->b = firn_batch_new(f->s);
    T_OK_ERR(firn__pq_leaves(f->s, &f->leaves, &f->n_leaves, &err), &err);
    firn_pq_options_init(&f->o);
    f->o.page_rows = (size_t)1 << 24;
    f->o.page_bytes = (size_t)1 << 30;
    f->o.dict_bytes = dict_bytes;
    firn__pq_colw_init(&f->cw, &f->leaves[0], &f->o);
    T_OK_ERR(firn__pq_codec_new(FIRN_PQ_UNCOMPRESSED, 0, &f->codec, &err), &err);
    firn_buf_init(&f->scratch, 1u << 30);
    firn_buf_init(&f->comp, 1u << 30);
}

static void fx_end_row(colw_fx *f)
{
    firn_err err = {0};
    T_OK_ERR(firn_batch_end_row(f->b, FIRN_OP_INSERT, 0, &err), &err);
}

/* Hands the rows appended since the last call to the column writer. */
static void fx_write(colw_fx *f)
{
    firn_err err = {0};
    firn_column *cols[1] = {firn_batch_column(f->b, 0)};
    size_t rows = firn_batch_rows(f->b);
    T_OK_ERR(
        firn__pq_colw_write(&f->cw, f->codec, cols, f->written, rows, &f->scratch, &f->comp, &err),
        &err);
    f->written = rows;
}

static void fx_deinit(colw_fx *f)
{
    firn__pq_colw_deinit(&f->cw);
    firn__pq_codec_free(f->codec);
    firn_buf_deinit(&f->scratch);
    firn_buf_deinit(&f->comp);
    firn_free(f->leaves);
    firn_batch_free(f->b);
    firn_field_free(f->s);
}

/* The ids of the current page match a dictionary built by first appearance (a linear search),
 * and the dictionary's PLAIN bytes are the distinct values in that order. */
static void check_dict(const colw_fx *f, const void *values, size_t n, size_t width)
{
    const uint8_t *v = values;
    uint8_t *dict = firn_calloc(n ? n : 1, width);
    size_t n_dict = 0;
    T_EQ_UINT(f->cw.n_ids, n);
    for (size_t i = 0; i < n; i++) {
        size_t id = 0;
        while (id < n_dict && memcmp(dict + id * width, v + i * width, width) != 0)
            id++;
        if (id == n_dict)
            memcpy(dict + n_dict++ * width, v + i * width, width);
        if (f->cw.ids[i] != id) {
            T_EQ_UINT(f->cw.ids[i], id);
            break;
        }
    }
    T_EQ_UINT(f->cw.dict.n, n_dict);
    T_EQ_UINT(f->cw.dict.plain.len, n_dict * width);
    T_EQ_MEM(f->cw.dict.plain.data, dict, n_dict * width);
    firn_free(dict);
}

static uint64_t fx_rng = 0x9E3779B97F4A7C15ull;
static uint64_t fx_rnd(void)
{
    fx_rng ^= fx_rng << 13;
    fx_rng ^= fx_rng >> 7;
    fx_rng ^= fx_rng << 17;
    return fx_rng;
}

/* Thousands of int32 and int64 keys, repeated in random order, written in several calls: the
 * slot table doubles many times (rehash moves keys with their ids) under linear probing at a
 * high load, and keys equal in their low bits (k and k + 2^32, k and -k) stay distinct. */
T_TEST(dict_keys_grow_and_collide)
{
    enum { N = 60000, KEYS = 7000 };
    int64_t *v64 = firn_calloc(N, sizeof(int64_t));
    int32_t *v32 = firn_calloc(N, sizeof(int32_t));
    colw_fx f64, f32;
    fx_init(&f64, FIRN_TYPE_LONG, (size_t)2 << 20);
    fx_init(&f32, FIRN_TYPE_INT, (size_t)2 << 20);
    for (size_t i = 0; i < N; i++) {
        uint64_t r = fx_rnd();
        int64_t k = (int64_t)(r % KEYS);
        v64[i] = r >> 62 == 0 ? k : r >> 62 == 1 ? -k : k + ((int64_t)(r >> 62) << 32);
        v32[i] = (int32_t)(k * 2654435761u) ^ (int32_t)(r >> 63 << 31);
        firn_column_append_i64(firn_batch_column(f64.b, 0), v64[i]);
        fx_end_row(&f64);
        firn_column_append_i32(firn_batch_column(f32.b, 0), v32[i]);
        fx_end_row(&f32);
        if (i % 9999 == 0) {
            fx_write(&f64);
            fx_write(&f32);
        }
    }
    fx_write(&f64);
    fx_write(&f32);
    check_dict(&f64, v64, N, 8);
    check_dict(&f32, v32, N, 4);
    T_TRUE(f64.cw.dict.mask + 1 >= 4096); /* grew from its first 4 KiB */
    fx_deinit(&f64);
    fx_deinit(&f32);
    firn_free(v64);
    firn_free(v32);
}

/* An int64 dictionary keyed by the low half of narrow values widens at its first value beyond
 * int32 (here mid-call, after a negative key whose low half is 0xFFFFFFFF): the entries keep
 * their ids, -1 and 2^32 - 1 stay two keys, and runs keep working across the change. */
T_TEST(dict_int64_widens_with_its_ids)
{
    static const int64_t seq[] = {7,
                                  -1,
                                  7,
                                  7,
                                  INT32_MIN,
                                  INT32_MAX,
                                  -1,
                                  0,
                                  4294967295ll,
                                  -1,
                                  7,
                                  (int64_t)1 << 40,
                                  0,
                                  4294967295ll,
                                  INT32_MIN,
                                  INT64_MIN,
                                  INT64_MAX,
                                  7,
                                  7,
                                  -((int64_t)1 << 40)};
    enum { N = sizeof(seq) / sizeof(seq[0]) };
    int64_t v[N * 3];
    colw_fx f;
    fx_init(&f, FIRN_TYPE_LONG, (size_t)2 << 20);
    for (size_t i = 0; i < N * 3; i++) {
        v[i] = seq[i % N];
        firn_column_append_i64(firn_batch_column(f.b, 0), v[i]);
        fx_end_row(&f);
        if (i == 3 || i == N + 1)
            fx_write(&f);
    }
    fx_write(&f);
    check_dict(&f, v, N * 3, 8);
    fx_deinit(&f);
}

/* Doubles and floats are keyed by their bits: 0.0 and -0.0, and NaNs of different bit patterns,
 * are distinct dictionary entries (as their PLAIN bytes differ), and NaNs are counted. */
T_TEST(dict_nan_and_signed_zero_are_distinct_keys)
{
    static const uint64_t dbits[] = {0x0000000000000000ull, 0x8000000000000000ull,
                                     0x7FF8000000000000ull, 0x7FF8000000000001ull,
                                     0xFFF8000000000000ull, 0x3FF0000000000000ull};
    static const uint32_t fbits[] = {0x00000000u, 0x80000000u, 0x7FC00000u,
                                     0x7FC00001u, 0xFFC00000u, 0x3F800000u};
    enum { N = 600 };
    double d[N];
    float fl[N];
    colw_fx fd, ff;
    fx_init(&fd, FIRN_TYPE_DOUBLE, (size_t)2 << 20);
    fx_init(&ff, FIRN_TYPE_FLOAT, (size_t)2 << 20);
    int64_t nans = 0;
    for (size_t i = 0; i < N; i++) {
        size_t k = (size_t)(fx_rnd() % 6);
        nans += k >= 2 && k <= 4;
        memcpy(&d[i], &dbits[k], 8);
        memcpy(&fl[i], &fbits[k], 4);
        firn_column_append_double(firn_batch_column(fd.b, 0), d[i]);
        fx_end_row(&fd);
        firn_column_append_float(firn_batch_column(ff.b, 0), fl[i]);
        fx_end_row(&ff);
    }
    fx_write(&fd);
    fx_write(&ff);
    check_dict(&fd, d, N, 8);
    check_dict(&ff, fl, N, 4);
    T_EQ_UINT(fd.cw.dict.n, 6);
    T_EQ_UINT(ff.cw.dict.n, 6);
    T_EQ_INT(fd.cw.nan_count, nans);
    T_EQ_INT(ff.cw.nan_count, nans);
    fx_deinit(&fd);
    fx_deinit(&ff);
}

/* Byte-array keys are compared and hashed a word at a time below 17 bytes: strings of each
 * length 0..24 that differ in one byte only (at each position), written twice in shuffled
 * order, are distinct entries with stable ids, in order of first appearance. */
T_TEST(dict_short_strings_differ_in_every_byte)
{
    enum { MAXLEN = 24, MAXN = 2 * (1 + (MAXLEN + 1) * (MAXLEN + 1)) };
    static char vals[MAXN][MAXLEN];
    size_t lens[MAXN], n = 0;
    for (size_t len = 0; len <= MAXLEN; len++) {
        for (size_t at = 0; at <= len; at++) { /* at == len: the unchanged string */
            memset(vals[n], 'a', len);
            if (at < len)
                vals[n][at] = 'b';
            lens[n++] = len;
        }
    }
    size_t distinct = n;
    for (size_t i = 0; i < distinct; i++, n++) { /* each again, in another order */
        size_t j = (i * 7919) % distinct;
        memcpy(vals[n], vals[j], lens[j]);
        lens[n] = lens[j];
    }
    colw_fx f;
    fx_init(&f, FIRN_TYPE_STRING, (size_t)2 << 20);
    for (size_t i = 0; i < n; i++) {
        firn_column_append_bytes(firn_batch_column(f.b, 0), vals[i], lens[i]);
        fx_end_row(&f);
    }
    fx_write(&f);
    T_EQ_UINT(f.cw.dict.n, distinct);
    for (size_t i = 0; i < n; i++) {
        size_t id = 0;
        while (lens[id] != lens[i] || memcmp(vals[id], vals[i], lens[i]) != 0)
            id++;
        if (f.cw.ids[i] != id) {
            T_EQ_UINT(f.cw.ids[i], id);
            break;
        }
    }
    fx_deinit(&f);
}

/* Appends v (int32 column when i32, else int64) to f's column, then a null when null. */
static void fx_put(colw_fx *f, bool i32, int64_t v, bool null)
{
    if (i32)
        firn_column_append_i32(firn_batch_column(f->b, 0), (int32_t)v);
    else
        firn_column_append_i64(firn_batch_column(f->b, 0), v);
    fx_end_row(f);
    if (null) {
        firn_column_append_null(firn_batch_column(f->b, 0));
        fx_end_row(f);
    }
}

/* Every slot of f's direct window holds the id of the entry of its value, or none when no entry
 * has that value (PLAIN entries of width 4 or 8 bytes). A missing id would cost a keyed probe
 * only, so this is the one check that the window is filled. */
static void check_window(const colw_fx *f, size_t width)
{
    const pq_dict *d = &f->cw.dict;
    uint32_t *want = firn_reallocarray(NULL, d->direct_span, sizeof(uint32_t));
    memset(want, 0xFF, d->direct_span * sizeof(uint32_t));
    for (uint32_t e = 0; e < d->n; e++) {
        int64_t v;
        if (width == 4) {
            int32_t v32;
            memcpy(&v32, d->plain.data + (size_t)e * 4, 4);
            v = v32;
        } else {
            memcpy(&v, d->plain.data + (size_t)e * 8, 8);
        }
        uint64_t off = (uint64_t)v - d->direct_base;
        if (off < d->direct_span)
            want[off] = e;
    }
    T_EQ_MEM(d->direct, want, d->direct_span * sizeof(uint32_t));
    firn_free(want);
}

/* Ends f's chunk, then writes values around -1000 to a fresh dictionary: its window starts
 * anew (small, in the memory of the chunk's large one) and ids start at 0. */
static void check_after_chunk(colw_fx *f, bool i32)
{
    firn_buf out;
    firn_buf_init(&out, 1u << 30);
    membuf m = {.b = out};
    pq_sink sink = {mem_write, &m, 0};
    pq_chunk_meta meta;
    firn_err err = {0};
    T_OK_ERR(firn__pq_colw_flush_chunk(&f->cw, f->codec, &sink, &f->scratch, &f->comp, &meta, &err),
             &err);
    firn__pq_chunk_meta_deinit(&meta);
    firn_buf_deinit(&m.b);
    T_EQ_UINT(f->cw.dict.direct_span, 0);
    int64_t v[300];
    for (size_t k = 0; k < 300; k++) {
        v[k] = -1000 + (int64_t)((k * 37) % 150);
        fx_put(f, i32, v[k], false);
    }
    fx_write(f);
    T_EQ_UINT(f->cw.dict.direct_span, 512); /* 256 around -1000, then twice that for -851 */
    check_window(f, i32 ? 4 : 8);
    int32_t v32[300];
    for (size_t k = 0; k < 300; k++)
        v32[k] = (int32_t)v[k];
    if (i32)
        check_dict(f, v32, 300, 4);
    else
        check_dict(f, v, 300, 8);
}

/* The direct window of an integer dictionary: 5 000 entries over 0..39 992 give it its largest
 * size (65 536 values, about centred on them), which then stays put; values just outside its edges
 * (base - 1, base + span) go to the keyed slots, values on them (base, base + span - 1) into
 * the window, both as new entries and again, with nulls between them, together with negative
 * values and the ends of int32 (and int64, whose slots widen); ids match the first-appearance
 * order of a linear search, in int32 and int64 columns. */
T_TEST(dict_direct_window_edges)
{
    enum { SPREAD = 5000, MAXN = 6000 };
    for (int t = 0; t < 2; t++) {
        bool i32 = t == 0;
        int64_t *v = firn_calloc(MAXN, sizeof(int64_t));
        size_t n = 0;
        colw_fx f;
        fx_init(&f, i32 ? FIRN_TYPE_INT : FIRN_TYPE_LONG, (size_t)2 << 20);
        for (size_t k = 0; k < SPREAD; k++) {
            v[n] = (int64_t)((k * 2654435761u) % SPREAD) * 8;
            fx_put(&f, i32, v[n++], k % 7 == 0);
        }
        fx_write(&f);
        const pq_dict *d = &f.cw.dict;
        T_EQ_UINT(d->direct_span, 65536);
        check_window(&f, i32 ? 4 : 8);
        const int64_t base = (int64_t)d->direct_base, span = 65536;
        T_TRUE(base <= 0 && base + span - 1 >= 39992 && base > -span / 2);
        const int64_t edges[] = {
            base - 1,  base,      base + span - 1, base + span,   -1, 0, 8, 39992,
            INT32_MIN, INT32_MAX, INT32_MIN + 1,   INT32_MAX - 1, -8};
        const int64_t wide[] = {INT64_MIN, INT64_MAX, (int64_t)1 << 40, base + span, base - 1};
        for (int round = 0; round < 3; round++) {
            for (size_t k = 0; k < sizeof(edges) / sizeof(edges[0]); k++) {
                size_t j = round == 1 ? sizeof(edges) / sizeof(edges[0]) - 1 - k : k;
                v[n] = edges[j];
                fx_put(&f, i32, v[n++], (k + (size_t)round) % 3 == 0);
                if (k % 4 == (size_t)round)
                    fx_write(&f);
            }
            for (size_t k = 0; !i32 && round > 0 && k < sizeof(wide) / sizeof(wide[0]); k++) {
                v[n] = wide[k];
                fx_put(&f, i32, v[n++], k % 2 == 0);
            }
            fx_write(&f);
        }
        T_EQ_UINT(d->direct_span, 65536); /* the window did not move: the edges were its own */
        T_EQ_INT((int64_t)d->direct_base, base);
        check_window(&f, i32 ? 4 : 8);
        if (!i32)
            T_EQ_UINT(d->slot_bytes, 16);
        if (i32) {
            int32_t *v32 = firn_calloc(n, sizeof(int32_t));
            for (size_t k = 0; k < n; k++)
                v32[k] = (int32_t)v[k];
            check_dict(&f, v32, n, 4);
            firn_free(v32);
        } else {
            check_dict(&f, v, n, 8);
        }
        check_after_chunk(&f, i32);
        fx_deinit(&f);
        firn_free(v);
    }
}

/* Definition levels and the present values of an optional column, with nulls in some bytes of
 * the validity bitmap, none in others and only nulls in others (the whole-byte paths), handed
 * over in pieces that start and end off byte boundaries. */
T_TEST(levels_from_validity_at_any_alignment)
{
    enum { N = 3000 };
    static const size_t pieces[] = {1, 3, 8, 13, 64, 5, 100, 7, 999, 16};
    int64_t present[N];
    uint8_t def[N];
    size_t n_present = 0;
    colw_fx f;
    fx_init(&f, FIRN_TYPE_LONG, (size_t)2 << 20);
    for (size_t i = 0; i < N; i++) {
        bool null = (i / 200) % 2 == 1 && (i * 7) % 13 == 0;
        if (i == 5 || i == 2999 || (i >= 1003 && i < 1400 && i != 1203 && i != 1301))
            null = true; /* and whole bytes of nulls, around two values */
        def[i] = null ? 0 : 1;
        if (null) {
            firn_column_append_null(firn_batch_column(f.b, 0));
        } else {
            present[n_present++] = (int64_t)(i % 37);
            firn_column_append_i64(firn_batch_column(f.b, 0), (int64_t)(i % 37));
        }
        fx_end_row(&f);
    }
    size_t at = 0;
    for (size_t k = 0; at < N; k++) {
        size_t step = pieces[k % (sizeof(pieces) / sizeof(pieces[0]))];
        at = at + step < N ? at + step : N;
        firn_column *cols[1] = {firn_batch_column(f.b, 0)};
        firn_err err = {0};
        T_OK_ERR(
            firn__pq_colw_write(&f.cw, f.codec, cols, f.written, at, &f.scratch, &f.comp, &err),
            &err);
        f.written = at;
    }
    T_EQ_UINT(f.cw.n_levels, N);
    T_EQ_MEM(f.cw.def, def, N);
    T_EQ_INT(f.cw.null_count, (int64_t)(N - n_present));
    check_dict(&f, present, n_present, 8);
    fx_deinit(&f);
}

/* A dictionary past dict_bytes falls back to PLAIN: its grown slot table is freed for a 4 KiB
 * one, the id buffer too, and the values that follow go to the PLAIN page; the next chunk has
 * a dictionary again, keyed as before (an int64 dictionary stays wide once widened). */
T_TEST(dict_fallback_frees_slots)
{
    colw_fx f;
    fx_init(&f, FIRN_TYPE_LONG, 64 << 10);
    size_t rows = 0;
    while (f.cw.dict_on) {
        for (size_t i = 0; i < 5000; i++, rows++) {
            firn_column_append_i64(firn_batch_column(f.b, 0), (int64_t)(rows * 3) << 33);
            fx_end_row(&f);
        }
        fx_write(&f);
        T_TRUE(rows < 100000);
    }
    T_TRUE(f.cw.dict.n > 8000); /* 64 KiB of 8-byte entries */
    T_EQ_UINT(f.cw.dict.slot_bytes, 16);
    T_EQ_UINT((f.cw.dict.mask + 1) * f.cw.dict.slot_bytes, 4096);
    T_TRUE(f.cw.ids == NULL);
    T_EQ_UINT(f.cw.n_ids, 0);
    size_t plain_before = f.cw.plain.len;
    firn_column_append_i64(firn_batch_column(f.b, 0), 5);
    fx_end_row(&f);
    fx_write(&f);
    T_EQ_UINT(f.cw.plain.len, plain_before + 8);

    firn_buf out;
    firn_buf_init(&out, 1u << 30);
    membuf m = {.b = out};
    pq_sink sink = {mem_write, &m, 0};
    pq_chunk_meta meta;
    firn_err err = {0};
    T_OK_ERR(firn__pq_colw_flush_chunk(&f.cw, f.codec, &sink, &f.scratch, &f.comp, &meta, &err),
             &err);
    T_TRUE(meta.dict_data_pages > 0 && meta.plain_data_pages > 0);
    firn__pq_chunk_meta_deinit(&meta);
    firn_buf_deinit(&m.b);
    T_TRUE(f.cw.dict_on);
    int64_t again[4] = {5, (int64_t)1 << 40, 5, -3};
    for (size_t i = 0; i < 4; i++) {
        firn_column_append_i64(firn_batch_column(f.b, 0), again[i]);
        fx_end_row(&f);
    }
    fx_write(&f);
    check_dict(&f, again, 4, 8);
    fx_deinit(&f);
}

T_MAIN(T_CASE(thrift_roundtrip),
       T_CASE(rle_roundtrip),
       T_CASE(rle_matches_reference_bytes),
       T_CASE(rle_repeat_matches_array),
       T_CASE(dict_keys_grow_and_collide),
       T_CASE(dict_int64_widens_with_its_ids),
       T_CASE(dict_nan_and_signed_zero_are_distinct_keys),
       T_CASE(dict_fallback_frees_slots),
       T_CASE(dict_short_strings_differ_in_every_byte),
       T_CASE(dict_direct_window_edges),
       T_CASE(levels_from_validity_at_any_alignment),
       T_CASE(footer_reads_back),
       T_CASE(long_string_stats_are_left_out),
       T_CASE(null_in_required_is_an_error),
       T_CASE(sink_failure_propagates),
       T_CASE(roller_splits_by_size))
