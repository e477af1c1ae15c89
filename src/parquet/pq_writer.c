/* SPDX-License-Identifier: Apache-2.0 */
/* The Parquet file writer: "PAR1", row groups of column chunks flushed by size, the FileMetaData
 * footer (Thrift compact), and the per-field Iceberg metrics of the finished file. */
#include "pq_int.h"

#include <string.h>

#define SLICE_ROWS 8192 /* rows encoded between row-group size checks */

#ifndef FIRN_VERSION
#define FIRN_VERSION "0.0.0"
#endif
#ifndef FIRN_BUILD_ID
#define FIRN_BUILD_ID "unknown"
#endif

typedef struct pq_rg {
    int64_t num_rows;
    int64_t total_byte_size;
    int64_t total_compressed;
    int64_t file_offset;
    pq_chunk_meta *chunks;
} pq_rg;

struct firn_pq_writer {
    const firn_field *schema;
    firn_pq_options opts;
    pq_sink sink;
    pq_leaf *leaves;
    size_t n_leaves;
    pq_colw *cols;
    pq_codec *codec;
    firn_buf body, comp;
    uint64_t rg_rows, total_rows;
    uint64_t rg_value_bytes; /* firn_batch_bytes of the row group's rows, about */
    pq_rg *rgs;
    size_t n_rgs, cap_rgs;
    bool closed, failed;
    firn_pq_file_metrics metrics;
};

void firn_pq_options_init(firn_pq_options *o)
{
    memset(o, 0, sizeof(*o));
    o->codec = FIRN_PQ_ZSTD;
    o->page_bytes = (size_t)1 << 20;
    o->page_rows = 20000;
    o->dict_bytes = (size_t)2 << 20;
    o->row_group_bytes = (size_t)128 << 20;
    o->file_bytes = (size_t)512 << 20;
}

void firn_pq_file_metrics_deinit(firn_pq_file_metrics *m)
{
    if (!m)
        return;
    firn_free(m->fields);
    firn_free(m->split_offsets);
    memset(m, 0, sizeof(*m));
}

static firn_rc check_options(const firn_pq_options *o, firn_err *err)
{
    if (o->page_bytes == 0 || o->page_rows == 0 || o->row_group_bytes == 0 || o->file_bytes == 0)
        return firn_err_set(err, FIRN_ERR_INVALID, "parquet sizes must be positive");
    if (o->page_rows > INT32_MAX || o->page_bytes > ((size_t)1 << 30))
        return firn_err_set(err, FIRN_ERR_INVALID, "parquet page target too large");
    return FIRN_OK;
}

firn_rc firn_pq_writer_new(const firn_field *schema,
                           const firn_pq_options *opts,
                           firn_pq_write_fn write,
                           void *ctx,
                           firn_pq_writer **out,
                           firn_err *err)
{
    firn_pq_writer *w = firn_calloc(1, sizeof(*w));
    firn_rc rc;
    w->schema = schema;
    if (opts)
        w->opts = *opts;
    else
        firn_pq_options_init(&w->opts);
    w->sink.write = write;
    w->sink.ctx = ctx;
    firn_buf_init(&w->body, PQ_FOOTER_MAX > PQ_PAGE_MAX ? PQ_FOOTER_MAX : PQ_PAGE_MAX);
    firn_buf_init(&w->comp, PQ_PAGE_MAX + ((size_t)1 << 20));
    rc = check_options(&w->opts, err);
    if (!rc)
        rc = firn__pq_leaves(schema, &w->leaves, &w->n_leaves, err);
    if (!rc)
        rc = firn__pq_codec_new(w->opts.codec, w->opts.compression_level, &w->codec, err);
    if (rc)
        goto out;
    w->cols = firn_calloc(w->n_leaves ? w->n_leaves : 1, sizeof(pq_colw));
    for (size_t i = 0; i < w->n_leaves; i++)
        firn__pq_colw_init(&w->cols[i], &w->leaves[i], &w->opts);
    rc = firn__pq_sink_write(&w->sink, "PAR1", 4, err);
out:
    if (rc) {
        firn_pq_writer_free(w);
        return rc;
    }
    *out = w;
    return FIRN_OK;
}

void firn_pq_writer_free(firn_pq_writer *w)
{
    if (!w)
        return;
    if (w->cols) {
        for (size_t i = 0; i < w->n_leaves; i++)
            firn__pq_colw_deinit(&w->cols[i]);
    }
    for (size_t g = 0; g < w->n_rgs; g++) {
        for (size_t i = 0; i < w->n_leaves; i++)
            firn__pq_chunk_meta_deinit(&w->rgs[g].chunks[i]);
        firn_free(w->rgs[g].chunks);
    }
    firn_free(w->rgs);
    firn_free(w->cols);
    firn_free(w->leaves);
    firn__pq_codec_free(w->codec);
    firn_buf_deinit(&w->body);
    firn_buf_deinit(&w->comp);
    firn_pq_file_metrics_deinit(&w->metrics);
    firn_free(w);
}

static firn_rc check_batch(const firn_pq_writer *w, firn_batch *b, firn_err *err)
{
    const firn_field *s = firn_batch_schema(b);
    if (s == w->schema)
        return FIRN_OK;
    bool same = s->n_children == w->schema->n_children;
    for (size_t i = 0; same && i < s->n_children; i++)
        same = s->children[i]->type == w->schema->children[i]->type &&
               s->children[i]->id == w->schema->children[i]->id;
    if (!same)
        return firn_err_set(err, FIRN_ERR_INVALID, "batch schema does not match the parquet file");
    return FIRN_OK;
}

static firn_rc flush_row_group(firn_pq_writer *w, firn_err *err)
{
    if (w->rg_rows == 0)
        return FIRN_OK;
    if (w->n_rgs == w->cap_rgs) {
        w->cap_rgs = w->cap_rgs ? w->cap_rgs * 2 : 4;
        w->rgs = firn_reallocarray(w->rgs, w->cap_rgs, sizeof(pq_rg));
    }
    pq_rg *g = &w->rgs[w->n_rgs++];
    memset(g, 0, sizeof(*g));
    g->chunks = firn_calloc(w->n_leaves ? w->n_leaves : 1, sizeof(pq_chunk_meta));
    g->file_offset = (int64_t)w->sink.offset;
    g->num_rows = (int64_t)w->rg_rows;
    for (size_t i = 0; i < w->n_leaves; i++) {
        FIRN_TRY(firn__pq_colw_flush_chunk(&w->cols[i], w->codec, &w->sink, &w->body, &w->comp,
                                           &g->chunks[i], err));
        g->total_byte_size += g->chunks[i].uncompressed;
        g->total_compressed += g->chunks[i].compressed;
    }
    w->rg_rows = 0;
    w->rg_value_bytes = 0;
    return FIRN_OK;
}

static size_t buffered_bytes(const firn_pq_writer *w)
{
    size_t n = 0;
    for (size_t i = 0; i < w->n_leaves; i++)
        n += firn__pq_colw_buffered(&w->cols[i]);
    return n;
}

static firn_rc write_slice(
    firn_pq_writer *w, firn_batch *b, size_t begin, size_t end, double row_bytes, firn_err *err)
{
    firn_column *cols[PQ_MAX_DEPTH];
    for (size_t i = 0; i < w->n_leaves; i++) {
        const pq_leaf *l = &w->leaves[i];
        cols[0] = firn_batch_column(b, l->top);
        for (size_t k = 1; k < l->depth; k++)
            cols[k] = firn_column_child(cols[k - 1], l->child[k - 1]);
        FIRN_TRY(
            firn__pq_colw_write(&w->cols[i], w->codec, cols, begin, end, &w->body, &w->comp, err));
    }
    w->rg_rows += end - begin;
    w->total_rows += end - begin;
    w->rg_value_bytes += (uint64_t)(row_bytes * (double)(end - begin));
    if (buffered_bytes(w) >= w->opts.row_group_bytes ||
        (w->opts.row_group_value_bytes && w->rg_value_bytes >= w->opts.row_group_value_bytes))
        return flush_row_group(w, err);
    return FIRN_OK;
}

firn_rc firn_pq_writer_write_rows(
    firn_pq_writer *w, firn_batch *b, size_t row_begin, size_t row_end, firn_err *err)
{
    if (w->failed || w->closed)
        return firn_err_set(err, FIRN_ERR_INVALID, "parquet writer is %s",
                            w->closed ? "closed" : "failed");
    if (row_begin > row_end || row_end > firn_batch_rows(b))
        return firn_err_set(err, FIRN_ERR_INVALID, "row range %zu..%zu outside batch of %zu",
                            row_begin, row_end, firn_batch_rows(b));
    firn_rc rc = check_batch(w, b, err);
    /* the batch's bytes per row, on average: slices count their share of them */
    double row_bytes = 0;
    if (w->opts.row_group_value_bytes && firn_batch_rows(b))
        row_bytes = (double)firn_batch_bytes(b) / (double)firn_batch_rows(b);
    for (size_t r = row_begin; !rc && r < row_end; r += SLICE_ROWS) {
        size_t e = row_end - r > SLICE_ROWS ? r + SLICE_ROWS : row_end;
        rc = write_slice(w, b, r, e, row_bytes, err);
    }
    if (rc)
        w->failed = true;
    return rc;
}

firn_rc firn_pq_writer_write(firn_pq_writer *w, firn_batch *b, firn_err *err)
{
    return firn_pq_writer_write_rows(w, b, 0, firn_batch_rows(b), err);
}

uint64_t firn_pq_writer_bytes(const firn_pq_writer *w)
{
    return w->sink.offset + buffered_bytes(w);
}

uint64_t firn_pq_writer_rows(const firn_pq_writer *w)
{
    return w->total_rows;
}

/* ---- footer -------------------------------------------------------------------------------- */

static void write_statistics(pq_tw *t, const pq_chunk_meta *c)
{
    firn__pq_tw_field_struct(t, 12);
    firn__pq_tw_field_i64(t, 3, c->null_count);
    if (c->has_minmax) {
        firn__pq_tw_field_bin(t, 5, c->max, c->max_len);
        firn__pq_tw_field_bin(t, 6, c->min, c->min_len);
        firn__pq_tw_field_bool(t, 7, true);
        firn__pq_tw_field_bool(t, 8, true);
    }
    if (c->has_nan)
        firn__pq_tw_field_i64(t, 9, c->nan_count);
    firn__pq_tw_struct_end(t);
}

static void write_encoding_stats(pq_tw *t, const pq_chunk_meta *c)
{
    int32_t rows[3][3] = {{PQ_PAGE_DICTIONARY, PQ_ENC_PLAIN, c->dict_pages},
                          {PQ_PAGE_DATA, PQ_ENC_RLE_DICTIONARY, c->dict_data_pages},
                          {PQ_PAGE_DATA, PQ_ENC_PLAIN, c->plain_data_pages}};
    size_t n = 0;
    for (int i = 0; i < 3; i++)
        n += rows[i][2] > 0;
    firn__pq_tw_field_list(t, 13, TC_STRUCT, n);
    for (int i = 0; i < 3; i++) {
        if (rows[i][2] == 0)
            continue;
        firn__pq_tw_struct_begin(t);
        firn__pq_tw_field_i32(t, 1, rows[i][0]);
        firn__pq_tw_field_i32(t, 2, rows[i][1]);
        firn__pq_tw_field_i32(t, 3, rows[i][2]);
        firn__pq_tw_struct_end(t);
    }
}

static void
write_column_chunk(const firn_pq_writer *w, pq_tw *t, const pq_leaf *l, const pq_chunk_meta *c)
{
    firn__pq_tw_struct_begin(t);
    firn__pq_tw_field_i64(t, 2, 0);
    firn__pq_tw_field_struct(t, 3);
    firn__pq_tw_field_i32(t, 1, l->ptype);
    int32_t encs[3];
    size_t n_encs = 0;
    if (c->dict_pages || c->plain_data_pages)
        encs[n_encs++] = PQ_ENC_PLAIN;
    encs[n_encs++] = PQ_ENC_RLE;
    if (c->dict_data_pages)
        encs[n_encs++] = PQ_ENC_RLE_DICTIONARY;
    firn__pq_tw_field_list(t, 2, TC_I32, n_encs);
    for (size_t i = 0; i < n_encs; i++)
        firn__pq_tw_i32(t, encs[i]);
    firn__pq_tw_field_list(t, 3, TC_BINARY, l->n_names);
    for (size_t i = 0; i < l->n_names; i++)
        firn__pq_tw_bin(t, l->names[i], strlen(l->names[i]));
    firn__pq_tw_field_i32(t, 4, (int32_t)w->opts.codec);
    firn__pq_tw_field_i64(t, 5, c->num_values);
    firn__pq_tw_field_i64(t, 6, c->uncompressed);
    firn__pq_tw_field_i64(t, 7, c->compressed);
    firn__pq_tw_field_i64(t, 9, c->data_page_offset);
    if (c->dict_page_offset >= 0)
        firn__pq_tw_field_i64(t, 11, c->dict_page_offset);
    write_statistics(t, c);
    write_encoding_stats(t, c);
    firn__pq_tw_struct_end(t);
    firn__pq_tw_struct_end(t);
}

static void write_row_groups(const firn_pq_writer *w, pq_tw *t)
{
    firn__pq_tw_field_list(t, 4, TC_STRUCT, w->n_rgs);
    for (size_t g = 0; g < w->n_rgs; g++) {
        const pq_rg *rg = &w->rgs[g];
        firn__pq_tw_struct_begin(t);
        firn__pq_tw_field_list(t, 1, TC_STRUCT, w->n_leaves);
        for (size_t i = 0; i < w->n_leaves; i++)
            write_column_chunk(w, t, &w->leaves[i], &rg->chunks[i]);
        firn__pq_tw_field_i64(t, 2, rg->total_byte_size);
        firn__pq_tw_field_i64(t, 3, rg->num_rows);
        firn__pq_tw_field_i64(t, 5, rg->file_offset);
        firn__pq_tw_field_i64(t, 6, rg->total_compressed);
        firn__pq_tw_field_i16(t, 7, (int16_t)(g > INT16_MAX ? INT16_MAX : g));
        firn__pq_tw_struct_end(t);
    }
}

static firn_rc encode_footer(const firn_pq_writer *w, firn_buf *out)
{
    pq_tw t;
    firn__pq_tw_init(&t, out);
    firn__pq_tw_struct_begin(&t);
    firn__pq_tw_field_i32(&t, 1, 1);
    firn__pq_schema_write(&t, w->schema);
    firn__pq_tw_field_i64(&t, 3, (int64_t)w->total_rows);
    write_row_groups(w, &t);
    if (w->opts.n_kv) {
        firn__pq_tw_field_list(&t, 5, TC_STRUCT, w->opts.n_kv);
        for (size_t i = 0; i < w->opts.n_kv; i++) {
            firn__pq_tw_struct_begin(&t);
            firn__pq_tw_field_bin(&t, 1, w->opts.kv[i].key, strlen(w->opts.kv[i].key));
            if (w->opts.kv[i].value)
                firn__pq_tw_field_bin(&t, 2, w->opts.kv[i].value, strlen(w->opts.kv[i].value));
            firn__pq_tw_struct_end(&t);
        }
    }
    const char *created_by = "firn version " FIRN_VERSION " (build " FIRN_BUILD_ID ")";
    firn__pq_tw_field_bin(&t, 6, created_by, strlen(created_by));
    firn__pq_tw_field_list(&t, 7, TC_STRUCT, w->n_leaves);
    for (size_t i = 0; i < w->n_leaves; i++) {
        firn__pq_tw_struct_begin(&t);
        firn__pq_tw_field_struct(&t, 1);
        firn__pq_tw_struct_end(&t);
        firn__pq_tw_struct_end(&t);
    }
    firn__pq_tw_struct_end(&t);
    return t.rc;
}

static void build_metrics(firn_pq_writer *w)
{
    firn_pq_file_metrics *m = &w->metrics;
    m->record_count = w->total_rows;
    m->file_size_bytes = w->sink.offset;
    m->n_fields = w->n_leaves;
    m->fields = firn_calloc(w->n_leaves ? w->n_leaves : 1, sizeof(firn_pq_field_metrics));
    for (size_t i = 0; i < w->n_leaves; i++) {
        const pq_colw *cw = &w->cols[i];
        firn_pq_field_metrics *f = &m->fields[i];
        f->field_id = w->leaves[i].field->id;
        f->column_size_bytes = cw->file_bytes;
        f->value_count = cw->file_values;
        f->null_count = cw->file_nulls;
        f->has_nan_count = w->leaves[i].kind == PQK_FLOAT || w->leaves[i].kind == PQK_DOUBLE;
        f->nan_count = cw->file_nans;
        firn__pq_bounds(&cw->file_stat, &w->leaves[i], f);
    }
    m->n_split_offsets = w->n_rgs;
    m->split_offsets = firn_calloc(w->n_rgs ? w->n_rgs : 1, sizeof(int64_t));
    for (size_t g = 0; g < w->n_rgs; g++)
        m->split_offsets[g] = w->rgs[g].file_offset;
}

firn_rc firn_pq_writer_close(firn_pq_writer *w, firn_err *err)
{
    if (w->failed || w->closed)
        return firn_err_set(err, FIRN_ERR_INVALID, "parquet writer is %s",
                            w->closed ? "closed" : "failed");
    firn_rc rc = flush_row_group(w, err);
    if (!rc) {
        firn_buf_reset(&w->body);
        rc = encode_footer(w, &w->body);
        if (rc)
            firn_err_set(err, rc, "parquet footer too large");
    }
    if (!rc) {
        uint32_t len = (uint32_t)w->body.len;
        uint8_t tail[8];
        memcpy(tail, &len, 4);
        memcpy(tail + 4, "PAR1", 4);
        rc = firn__pq_sink_write(&w->sink, w->body.data, w->body.len, err);
        if (!rc)
            rc = firn__pq_sink_write(&w->sink, tail, 8, err);
    }
    if (rc) {
        w->failed = true;
        return rc;
    }
    w->closed = true;
    build_metrics(w);
    return FIRN_OK;
}

void firn_pq_writer_take_metrics(firn_pq_writer *w, firn_pq_file_metrics *out)
{
    FIRN_ASSERT(w->closed);
    *out = w->metrics;
    memset(&w->metrics, 0, sizeof(w->metrics));
}
