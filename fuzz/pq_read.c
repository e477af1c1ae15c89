/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the Parquet column reader on a whole file. The selection is derived from the
 * file's own schema (every flat leaf with a type the reader maps), so mutations reach page
 * headers, levels, every encoding and the codecs. Inputs of odd size go through the range-read
 * callback, even ones through memory. Any input must be decoded or rejected without reading out
 * of bounds, leaking or crashing. */
#include "firn/parquet.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ROWS (1u << 20) /* claimed rows past this are skipped (memory, not safety) */

typedef struct fz_file {
    const uint8_t *p;
    size_t len;
} fz_file;

static firn_rc fz_read(void *ctx, uint64_t off, size_t len, firn_buf *out, firn_err *err)
{
    fz_file *f = ctx;
    if (off > f->len || len > f->len - off)
        return firn_err_set(err, FIRN_ERR_IO, "read past the end");
    return firn_buf_append(out, f->p + off, len);
}

/* An Iceberg field for a file leaf, from its physical and logical type. */
static firn_field *leaf_field(const firn_pq_schema_elem *e, int32_t id)
{
    bool req = e->repetition == 0;
    bool dec = e->logical_type == 5 || e->converted_type == 5;
    int32_t prec = e->logical_type == 5 ? e->logical_precision : e->precision;
    int32_t scale = e->logical_type == 5 ? e->logical_scale : e->scale;
    if (dec && prec >= 1 && prec <= 38 && scale >= 0 && scale <= prec)
        return firn_field_new_decimal(id, e->name, prec, scale, req);
    switch (e->type) {
    case 0:
        return firn_field_new(id, e->name, FIRN_TYPE_BOOLEAN, req);
    case 1:
        return firn_field_new(id, e->name, e->logical_type == 7 ? FIRN_TYPE_TIME : FIRN_TYPE_LONG,
                              req);
    case 2:
        return firn_field_new(id, e->name,
                              e->logical_type == 8 ? FIRN_TYPE_TIMESTAMP_NS : FIRN_TYPE_LONG, req);
    case 4:
        return firn_field_new(id, e->name, FIRN_TYPE_DOUBLE, req);
    case 5:
        return firn_field_new(id, e->name, FIRN_TYPE_DOUBLE, req);
    case 6:
        return firn_field_new(id, e->name, FIRN_TYPE_BINARY, req);
    case 7:
        if (e->type_length >= 1 && e->type_length <= 4096)
            return firn_field_new_fixed(id, e->name, e->type_length, req);
        return NULL;
    default:
        return NULL;
    }
}

static void read_all(firn_pq_reader *r)
{
    const firn_pq_file_meta *m = firn_pq_reader_meta(r);
    if (firn_pq_reader_rows(r) > MAX_ROWS)
        return;
    bool ids = false;
    for (size_t i = 1; i < m->n_schema; i++)
        ids |= m->schema[i].has_field_id;
    firn_field *schema = firn_field_new(0, "root", FIRN_TYPE_STRUCT, true);
    for (size_t i = 1; i < m->n_schema && schema->n_children < 64; i++) {
        const firn_pq_schema_elem *e = &m->schema[i];
        if (e->num_children > 0)
            continue;
        firn_field *f = leaf_field(e, ids && e->has_field_id ? e->field_id : (int32_t)i);
        if (f)
            firn_field_add(schema, f);
    }
    firn_err err = {0};
    if (firn_pq_reader_select(r, schema, &err) == FIRN_OK) {
        firn_batch *b = firn_batch_new(schema);
        for (size_t g = 0; g < firn_pq_reader_row_groups(r); g++) {
            if (firn_pq_reader_read_row_group(r, g, b, &err) != FIRN_OK)
                break;
        }
        firn_batch_free(b);
    } else {
        /* one column at a time, so a single unsupported column does not hide the others */
        for (size_t c = 0; c < schema->n_children; c++) {
            firn_field *one = firn_field_new(0, "one", FIRN_TYPE_STRUCT, true);
            firn_field_add(one, firn_field_clone(schema->children[c]));
            if (firn_pq_reader_select(r, one, &err) == FIRN_OK) {
                firn_batch *b = firn_batch_new(one);
                for (size_t g = 0; g < firn_pq_reader_row_groups(r); g++) {
                    if (firn_pq_reader_read_row_group(r, g, b, &err) != FIRN_OK)
                        break;
                }
                firn_batch_free(b);
            }
            firn_field_free(one);
        }
    }
    firn_field_free(schema);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    firn_pq_reader *r = NULL;
    firn_err err = {0};
    fz_file f = {data, size};
    firn_rc rc = size % 2 ? firn_pq_reader_open(fz_read, &f, size, &r, &err)
                          : firn_pq_reader_open_mem(data, size, &r, &err);
    if (rc == FIRN_OK) {
        read_all(r);
        firn_pq_reader_free(r);
    }
    return 0;
}
