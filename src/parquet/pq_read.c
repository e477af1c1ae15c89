/* SPDX-License-Identifier: Apache-2.0 */
/* Parquet column reader: opens a file from memory or through a range-read callback, checks the
 * footer's schema tree and row groups, matches requested Iceberg fields to file columns (by field
 * id, else by name; Iceberg spec "Column Projection") with their type conversions, and decodes
 * row groups column by column into batches. */
#include "pq_read_int.h"

#include <string.h>

/* ---- schema tree ----------------------------------------------------------------------------- */

typedef struct tree_walk {
    firn_pq_reader *r;
    size_t next; /* next element to visit */
} tree_walk;

static bool walk(tree_walk *w, long parent, int depth, int16_t def, int16_t rep)
{
    firn_pq_file_meta *m = w->r->meta;
    if (w->next >= m->n_schema || depth >= PQ_MAX_DEPTH)
        return false;
    size_t i = w->next++;
    const firn_pq_schema_elem *e = &m->schema[i];
    rd_elem *re = &w->r->elems[i];
    re->parent = parent;
    re->leaf = -1;
    if (parent >= 0) {
        if (e->repetition < -1 || e->repetition > PQ_REPEATED)
            return false;
        def += e->repetition == PQ_OPTIONAL || e->repetition == PQ_REPEATED;
        rep += e->repetition == PQ_REPEATED;
        w->r->has_ids |= e->has_field_id;
    }
    re->max_def = def;
    re->max_rep = rep;
    if (e->num_children > 0) {
        if ((size_t)e->num_children > m->n_schema - w->next)
            return false;
        for (int32_t k = 0; k < e->num_children; k++) {
            if (!walk(w, (long)i, depth + 1, def, rep))
                return false;
        }
    } else if (e->type >= 0 && parent >= 0) {
        re->leaf = (long)w->r->n_leaves;
        w->r->leaf_elem[w->r->n_leaves++] = (long)i;
    }
    return true;
}

static firn_rc check_meta(firn_pq_reader *r, firn_err *err)
{
    firn_pq_file_meta *m = r->meta;
    if (m->n_schema == 0 || m->schema[0].num_children < 0)
        return firn_err_set(err, FIRN_ERR_PARSE, "parquet footer has no schema");
    r->elems = firn_calloc(m->n_schema, sizeof(*r->elems));
    r->leaf_elem = firn_calloc(m->n_schema, sizeof(*r->leaf_elem));
    tree_walk w = {r, 0};
    if (!walk(&w, -1, 0, 0, 0) || w.next != m->n_schema)
        return firn_err_set(err, FIRN_ERR_PARSE, "malformed parquet schema tree");
    r->first_row = firn_calloc(m->n_row_groups + 1, sizeof(uint64_t));
    for (size_t g = 0; g < m->n_row_groups; g++) {
        const firn_pq_row_group_meta *rg = &m->row_groups[g];
        if (rg->n_columns != r->n_leaves || rg->num_rows < 0 ||
            (uint64_t)rg->num_rows > UINT64_MAX / 2 - r->first_row[g])
            return firn_err_set(err, FIRN_ERR_PARSE,
                                "row group %zu has %zu columns and %lld rows for %zu leaves", g,
                                rg->n_columns, (long long)rg->num_rows, r->n_leaves);
        r->first_row[g + 1] = r->first_row[g] + (uint64_t)rg->num_rows;
    }
    return FIRN_OK;
}

/* ---- opening --------------------------------------------------------------------------------- */

static firn_pq_reader *reader_new(uint64_t file_size)
{
    firn_pq_reader *r = firn_calloc(1, sizeof(*r));
    r->file_size = file_size;
    firn_buf_init(&r->chunk, RD_CHUNK_MAX);
    return r;
}

static firn_rc tail_check(const uint8_t tail[8], uint64_t size, uint32_t *flen, firn_err *err)
{
    if (size >= 8 && memcmp(tail + 4, "PARE", 4) == 0)
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "encrypted parquet files are not supported");
    FIRN_TRY(firn_pq_footer_locate(tail, size, flen, err));
    if (*flen > PQ_FOOTER_MAX)
        return firn_err_set(err, FIRN_ERR_TOO_LARGE, "parquet footer of %u bytes", *flen);
    return FIRN_OK;
}

static firn_rc finish_open(
    firn_pq_reader *r, const uint8_t *footer, uint32_t flen, firn_pq_reader **out, firn_err *err)
{
    r->data_end = r->file_size - 8 - flen;
    firn_rc rc = firn_pq_footer_parse(footer, flen, &r->meta, err);
    if (!rc)
        rc = check_meta(r, err);
    if (rc) {
        firn_pq_reader_free(r);
        return rc;
    }
    *out = r;
    return FIRN_OK;
}

firn_rc firn_pq_reader_open_mem(const void *p, size_t len, firn_pq_reader **out, firn_err *err)
{
    const uint8_t *b = p;
    uint32_t flen;
    if (len < 12 || memcmp(b, "PAR1", 4) != 0)
        return firn_err_set(err, FIRN_ERR_PARSE, "not a parquet file (no leading magic)");
    FIRN_TRY(tail_check(b + len - 8, len, &flen, err));
    firn_pq_reader *r = reader_new(len);
    r->mem = b;
    return finish_open(r, b + len - 8 - flen, flen, out, err);
}

firn_rc firn__pq_rd_range(firn_pq_reader *r, uint64_t off, size_t len, firn_buf *buf, firn_err *err)
{
    firn_buf_reset(buf);
    FIRN_TRY(firn_buf_reserve(buf, len));
    FIRN_TRY(r->read_at(r->ctx, off, len, buf, err));
    if (buf->len != len)
        return firn_err_set(err, FIRN_ERR_IO, "short read: %zu of %zu bytes at offset %llu",
                            buf->len, len, (unsigned long long)off);
    return FIRN_OK;
}

firn_rc firn_pq_reader_open(
    firn_pq_read_fn read_at, void *ctx, uint64_t file_size, firn_pq_reader **out, firn_err *err)
{
    if (file_size < 12)
        return firn_err_set(err, FIRN_ERR_PARSE, "not a parquet file (%llu bytes)",
                            (unsigned long long)file_size);
    firn_pq_reader *r = reader_new(file_size);
    r->read_at = read_at;
    r->ctx = ctx;
    size_t tail = file_size < RD_TAIL_BYTES ? (size_t)file_size : RD_TAIL_BYTES;
    uint32_t flen = 0;
    firn_rc rc = firn__pq_rd_range(r, file_size - tail, tail, &r->chunk, err);
    if (!rc)
        rc = tail_check(r->chunk.data + tail - 8, file_size, &flen, err);
    if (!rc && tail == file_size && memcmp(r->chunk.data, "PAR1", 4) != 0)
        rc = firn_err_set(err, FIRN_ERR_PARSE, "not a parquet file (no leading magic)");
    if (!rc && (size_t)flen + 8 > tail) /* a footer longer than the tail read */
        rc = firn__pq_rd_range(r, file_size - 8 - flen, flen, &r->chunk, err);
    if (rc) {
        firn_pq_reader_free(r);
        return rc;
    }
    bool reread = (size_t)flen + 8 > tail;
    const uint8_t *footer = reread ? r->chunk.data : r->chunk.data + tail - 8 - flen;
    return finish_open(r, footer, flen, out, err);
}

static void scratch_free(rd_scratch *s)
{
    void *ps[] = {s->page,  s->dict, s->def, s->idx,   s->phys,     s->outv,     s->ints,
                  s->ints2, s->ptr,  s->len, s->delta, s->dict_out, s->dict_ptr, s->dict_len};
    for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++)
        firn_free(ps[i]);
}

void firn_pq_reader_free(firn_pq_reader *r)
{
    if (!r)
        return;
    firn_pq_file_meta_free(r->meta);
    firn_free(r->elems);
    firn_free(r->leaf_elem);
    firn_free(r->first_row);
    firn_free(r->cols);
    firn_buf_deinit(&r->chunk);
    scratch_free(&r->s);
    firn_free(r);
}

const firn_pq_file_meta *firn_pq_reader_meta(const firn_pq_reader *r)
{
    return r->meta;
}

size_t firn_pq_reader_row_groups(const firn_pq_reader *r)
{
    return r->meta->n_row_groups;
}

uint64_t firn_pq_reader_row_group_rows(const firn_pq_reader *r, size_t g)
{
    FIRN_ASSERT(g < r->meta->n_row_groups);
    return r->first_row[g + 1] - r->first_row[g];
}

uint64_t firn_pq_reader_row_group_first_row(const firn_pq_reader *r, size_t g)
{
    FIRN_ASSERT(g < r->meta->n_row_groups);
    return r->first_row[g];
}

uint64_t firn_pq_reader_rows(const firn_pq_reader *r)
{
    return r->first_row[r->meta->n_row_groups];
}
