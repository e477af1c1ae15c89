/* SPDX-License-Identifier: Apache-2.0 */
/* Column selection for the reader (Iceberg spec "Column Projection": field ids, else names) with
 * the type conversions Iceberg allows (int -> long, float -> double, decimal widening, coarser
 * time units), and the row-group driver that decodes each selected column chunk in turn. */
#include "pq_read_int.h"

#include <string.h>

/* ConvertedType values used here */
enum {
    CT_DECIMAL = 5,
    CT_TIME_MILLIS = 7,
    CT_TIME_MICROS = 8,
    CT_TS_MILLIS = 9,
    CT_TS_MICROS = 10,
    CT_UINT_32 = 13,
    CT_UINT_64 = 14,
};
enum { LT_DECIMAL = 5, LT_TIME = 7, LT_TIMESTAMP = 8, LT_INTEGER = 10 };
enum { UNIT_MS = 1, UNIT_US = 2, UNIT_NS = 3 };

static const char *ptype_name(int t)
{
    static const char *const names[] = {"BOOLEAN", "INT32",  "INT64",      "INT96",
                                        "FLOAT",   "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"};
    return t >= 0 && t < 8 ? names[t] : "unknown";
}

/* Time unit of an element: logical type, then converted type, else def. */
static int elem_unit(const firn_pq_schema_elem *e, int def)
{
    if ((e->logical_type == LT_TIME || e->logical_type == LT_TIMESTAMP) && e->logical_unit > 0)
        return e->logical_unit;
    if (e->converted_type == CT_TIME_MILLIS || e->converted_type == CT_TS_MILLIS)
        return UNIT_MS;
    if (e->converted_type == CT_TIME_MICROS || e->converted_type == CT_TS_MICROS)
        return UNIT_US;
    return def;
}

static bool elem_unsigned(const firn_pq_schema_elem *e, int bits)
{
    if (e->logical_type == LT_INTEGER && e->logical_int_bits == bits && !e->logical_int_signed)
        return true;
    return e->converted_type == (bits == 32 ? CT_UINT_32 : CT_UINT_64);
}

static void out_of(rd_col *c)
{
    const firn_field *f = c->field;
    c->ow = firn_type_value_size(f);
    switch (f->type) {
    case FIRN_TYPE_BOOLEAN:
        c->out = OUT_BOOL;
        break;
    case FIRN_TYPE_INT:
    case FIRN_TYPE_DATE:
        c->out = OUT_I32;
        break;
    case FIRN_TYPE_FLOAT:
        c->out = OUT_F32;
        break;
    case FIRN_TYPE_DOUBLE:
        c->out = OUT_F64;
        break;
    case FIRN_TYPE_DECIMAL:
        c->out = f->precision <= 18 ? OUT_I64 : OUT_I128;
        break;
    case FIRN_TYPE_UUID:
    case FIRN_TYPE_FIXED:
        c->out = OUT_FIXED;
        break;
    case FIRN_TYPE_STRING:
    case FIRN_TYPE_BINARY:
        c->out = OUT_BYTES;
        break;
    default:
        c->out = OUT_I64; /* long, time, timestamps */
        break;
    }
}

/* Decimal: same scale, precision no wider than the field's. */
static bool decimal_conv(rd_col *c, const firn_pq_schema_elem *e)
{
    const firn_field *f = c->field;
    int32_t scale = -1, prec = -1;
    if (e->logical_type == LT_DECIMAL)
        scale = e->logical_scale, prec = e->logical_precision;
    else if (e->converted_type == CT_DECIMAL)
        scale = e->scale, prec = e->precision;
    if ((scale >= 0 && scale != f->scale) || prec > f->precision)
        return false;
    bool wide = c->out == OUT_I128;
    switch (c->ptype) {
    case PQ_INT32:
        c->conv = wide ? CV_I32_I128 : CV_I32_I64;
        return true;
    case PQ_INT64:
        c->conv = wide ? CV_I64_I128 : CV_COPY;
        return true;
    case PQ_FLBA:
    case PQ_BYTE_ARRAY:
        c->conv = wide ? CV_BE_I128 : CV_BE_I64;
        return true;
    }
    return false;
}

/* Time and timestamps: INT64 (or INT32 millis for time) in a unit no finer than the field's. */
static bool time_conv(rd_col *c, const firn_pq_schema_elem *e)
{
    bool ns =
        c->field->type == FIRN_TYPE_TIMESTAMP_NS || c->field->type == FIRN_TYPE_TIMESTAMPTZ_NS;
    int want = ns ? UNIT_NS : UNIT_US;
    int unit = elem_unit(e, c->ptype == PQ_INT32 ? UNIT_MS : want);
    static const int64_t scale[4] = {0, 1000000, 1000, 1}; /* unit -> nanoseconds / 1000 */
    if (unit < UNIT_MS || unit > want)
        return false;
    c->mult = scale[unit] / scale[want];
    if (c->ptype == PQ_INT32) {
        c->conv = CV_I32_I64;
        return c->field->type == FIRN_TYPE_TIME;
    }
    c->conv = c->mult == 1 ? CV_COPY : CV_I64_MUL;
    return c->ptype == PQ_INT64;
}

/* Chooses the conversion from the file column e to the requested field; false when none. */
static bool choose_conv(rd_col *c, const firn_pq_schema_elem *e)
{
    int t = c->ptype;
    c->conv = CV_COPY;
    c->mult = 1;
    switch (c->field->type) {
    case FIRN_TYPE_BOOLEAN:
        return t == PQ_BOOLEAN;
    case FIRN_TYPE_INT:
        return t == PQ_INT32 && !elem_unsigned(e, 32);
    case FIRN_TYPE_DATE:
        return t == PQ_INT32;
    case FIRN_TYPE_LONG:
        if (t == PQ_INT32)
            c->conv = elem_unsigned(e, 32) ? CV_U32_I64 : CV_I32_I64;
        return (t == PQ_INT64 && !elem_unsigned(e, 64)) || t == PQ_INT32;
    case FIRN_TYPE_FLOAT:
        return t == PQ_FLOAT;
    case FIRN_TYPE_DOUBLE:
        if (t == PQ_FLOAT)
            c->conv = CV_F32_F64;
        return t == PQ_DOUBLE || t == PQ_FLOAT;
    case FIRN_TYPE_DECIMAL:
        return decimal_conv(c, e);
    case FIRN_TYPE_TIME:
    case FIRN_TYPE_TIMESTAMP:
    case FIRN_TYPE_TIMESTAMPTZ:
    case FIRN_TYPE_TIMESTAMP_NS:
    case FIRN_TYPE_TIMESTAMPTZ_NS:
        return time_conv(c, e);
    case FIRN_TYPE_STRING:
    case FIRN_TYPE_BINARY:
        return t == PQ_BYTE_ARRAY;
    case FIRN_TYPE_UUID:
    case FIRN_TYPE_FIXED:
        return t == PQ_FLBA && (size_t)e->type_length == c->ow;
    default:
        return false;
    }
}

/* Finds the element for field f: by id anywhere when the file has ids, else a top-level name. */
static long find_elem(const firn_pq_reader *r, const firn_field *f)
{
    const firn_pq_file_meta *m = r->meta;
    for (size_t i = 1; i < m->n_schema; i++) {
        const firn_pq_schema_elem *e = &m->schema[i];
        if (r->has_ids ? (e->has_field_id && e->field_id == f->id)
                       : (r->elems[i].parent == 0 && strcmp(e->name, f->name) == 0))
            return (long)i;
    }
    return -1;
}

static firn_rc resolve(firn_pq_reader *r, rd_col *c, firn_err *err)
{
    const firn_field *f = c->field;
    char tname[64];
    if (f->type == FIRN_TYPE_STRUCT || f->type == FIRN_TYPE_LIST || f->type == FIRN_TYPE_MAP)
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED,
                            "field \"%s\" is nested: the parquet reader reads primitive columns",
                            f->name);
    out_of(c);
    long ei = find_elem(r, f);
    c->leaf = -1;
    if (ei < 0) {
        if (f->required)
            return firn_err_set(err, FIRN_ERR_SCHEMA,
                                "required column \"%s\" (field id %d) is missing from the file",
                                f->name, f->id);
        return FIRN_OK;
    }
    const firn_pq_schema_elem *e = &r->meta->schema[ei];
    const rd_elem *re = &r->elems[ei];
    c->name = e->name;
    if (re->leaf < 0 || re->max_rep > 0)
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED,
                            "column \"%s\" (field id %d) is %s: only flat primitive columns are "
                            "read",
                            e->name, f->id, re->leaf < 0 ? "a group" : "repeated");
    c->leaf = re->leaf;
    c->ptype = e->type;
    c->max_def = re->max_def;
    static const size_t widths[] = {1, 4, 8, 12, 4, 8, 0, 0};
    if (e->type < 0 || e->type > PQ_FLBA || e->type == 3)
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "column \"%s\" has parquet type %s", e->name,
                            ptype_name(e->type));
    c->pw =
        e->type == PQ_FLBA ? (size_t)(e->type_length > 0 ? e->type_length : 0) : widths[e->type];
    if (e->type == PQ_FLBA && (c->pw == 0 || c->pw > (1u << 20)))
        return firn_err_set(err, FIRN_ERR_PARSE, "column \"%s\" has fixed length %d", e->name,
                            e->type_length);
    if (!choose_conv(c, e)) {
        firn_type_format(f, tname, sizeof(tname));
        return firn_err_set(err, FIRN_ERR_SCHEMA,
                            "column \"%s\" of parquet type %s cannot be read as %s", e->name,
                            ptype_name(e->type), tname);
    }
    return FIRN_OK;
}

firn_rc firn_pq_reader_select(firn_pq_reader *r, const firn_field *schema, firn_err *err)
{
    r->schema = NULL;
    r->n_cols = 0;
    if (!schema || schema->type != FIRN_TYPE_STRUCT)
        return firn_err_set(err, FIRN_ERR_INVALID, "reader schema must be a struct");
    r->cols =
        firn_reallocarray(r->cols, schema->n_children ? schema->n_children : 1, sizeof(rd_col));
    memset(r->cols, 0, (schema->n_children ? schema->n_children : 1) * sizeof(rd_col));
    for (size_t i = 0; i < schema->n_children; i++) {
        rd_col *c = &r->cols[i];
        c->field = schema->children[i];
        c->name = c->field->name;
        FIRN_TRY(resolve(r, c, err));
    }
    r->schema = schema;
    r->n_cols = schema->n_children;
    return FIRN_OK;
}

/* ---- row groups ---------------------------------------------------------------------------- */

static const char *codec_name(int32_t c)
{
    static const char *const names[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO",
                                        "BROTLI",       "LZ4",    "ZSTD", "LZ4_RAW"};
    return c >= 0 && c < 8 ? names[c] : "unknown";
}

/* Checks the chunk metadata and finds its byte range. */
static firn_rc chunk_range(const firn_pq_reader *r,
                           const rd_col *c,
                           const firn_pq_chunk_meta *cm,
                           int64_t rows,
                           uint64_t *start,
                           uint64_t *len,
                           firn_err *err)
{
    if (cm->type != c->ptype || cm->num_values != rows)
        return firn_err_set(err, FIRN_ERR_PARSE,
                            "chunk metadata (type %d, %lld values) "
                            "disagrees with the schema (type %d, %lld rows)",
                            cm->type, (long long)cm->num_values, c->ptype, (long long)rows);
    if (cm->codec != FIRN_PQ_UNCOMPRESSED && cm->codec != FIRN_PQ_SNAPPY &&
        cm->codec != FIRN_PQ_GZIP && cm->codec != FIRN_PQ_ZSTD && cm->codec != FIRN_PQ_LZ4_RAW)
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "parquet codec %s (%d) is not supported",
                            codec_name(cm->codec), cm->codec);
    int64_t s = cm->data_page_offset;
    if (cm->dictionary_page_offset >= 4 && cm->dictionary_page_offset < s)
        s = cm->dictionary_page_offset;
    if (s < 4 || cm->total_compressed_size <= 0 || (uint64_t)s > r->data_end ||
        (uint64_t)cm->total_compressed_size > r->data_end - (uint64_t)s)
        return firn_err_set(err, FIRN_ERR_PARSE,
                            "column chunk at %lld of %lld bytes lies outside the file data",
                            (long long)s, (long long)cm->total_compressed_size);
    if ((uint64_t)cm->total_compressed_size > RD_CHUNK_MAX)
        return firn_err_set(err, FIRN_ERR_TOO_LARGE, "column chunk of %lld bytes",
                            (long long)cm->total_compressed_size);
    *start = (uint64_t)s;
    *len = (uint64_t)cm->total_compressed_size;
    return FIRN_OK;
}

static firn_rc
read_column(firn_pq_reader *r, const rd_col *c, size_t g, firn_column *col, firn_err *err)
{
    const firn_pq_row_group_meta *rg = &r->meta->row_groups[g];
    if (c->leaf < 0 || rg->num_rows == 0) {
        firn_column_append_nulls(col, (size_t)rg->num_rows);
        return FIRN_OK;
    }
    const firn_pq_chunk_meta *cm = &rg->columns[c->leaf];
    uint64_t start = 0, len = 0;
    FIRN_TRY(chunk_range(r, c, cm, rg->num_rows, &start, &len, err));
    const uint8_t *p;
    if (r->mem) {
        p = r->mem + start;
    } else {
        FIRN_TRY(firn__pq_rd_range(r, start, (size_t)len, &r->chunk, err));
        p = r->chunk.data;
    }
    rd_chunk_ctx cx = {c, (firn_pq_codec)cm->codec, g, &r->s, col, rg->num_rows};
    return firn__pq_rd_chunk(&cx, p, (size_t)len, err);
}

firn_rc firn_pq_reader_read_row_group(firn_pq_reader *r, size_t g, firn_batch *b, firn_err *err)
{
    if (!r->schema)
        return firn_err_set(err, FIRN_ERR_INVALID, "no columns selected");
    if (g >= r->meta->n_row_groups)
        return firn_err_set(err, FIRN_ERR_INVALID, "row group %zu of %zu", g,
                            r->meta->n_row_groups);
    if (firn_batch_schema(b) != r->schema)
        return firn_err_set(err, FIRN_ERR_INVALID, "batch made for another schema");
    firn_batch_reset(b);
    size_t rows = (size_t)r->meta->row_groups[g].num_rows;
    for (size_t i = 0; i < r->n_cols; i++) {
        firn_rc rc = read_column(r, &r->cols[i], g, firn_batch_column(b, i), err);
        if (!rc && firn_column_length(firn_batch_column(b, i)) != rows)
            rc = firn_err_set(err, FIRN_ERR_PARSE, "column has %zu values for %zu rows",
                              firn_column_length(firn_batch_column(b, i)), rows);
        if (rc) {
            firn_err_context(err, "while reading column \"%s\" of row group %zu", r->cols[i].name,
                             g);
            return rc;
        }
    }
    return firn_batch_end_rows(b, rows, FIRN_OP_READ, 0, err);
}
