/* SPDX-License-Identifier: Apache-2.0 */
/* Iceberg schema -> Parquet schema (Iceberg spec Appendix A): leaf columns with their levels and
 * path, and the SchemaElement list of the footer with field ids and logical/converted types. */
#include "pq_int.h"

#include <string.h>

/* ConvertedType values */
enum {
    CT_UTF8 = 0,
    CT_MAP = 1,
    CT_LIST = 3,
    CT_DECIMAL = 5,
    CT_DATE = 6,
    CT_TIME_MICROS = 8,
    CT_TIMESTAMP_MICROS = 10,
};
/* LogicalType union member ids */
enum {
    LT_STRING = 1,
    LT_MAP = 2,
    LT_LIST = 3,
    LT_DECIMAL = 5,
    LT_DATE = 6,
    LT_TIME = 7,
    LT_TIMESTAMP = 8,
    LT_UUID = 14,
};

int32_t firn__pq_decimal_bytes(int32_t precision)
{
    /* smallest n with 2^(8n-1) > 10^precision */
    static const int8_t bytes[39] = {1,  1,  1,  2,  2,  3,  3,  4,  4,  4,  5,  5,  6,
                                     6,  6,  7,  7,  8,  8,  9,  9,  9,  10, 10, 11, 11,
                                     11, 12, 12, 13, 13, 13, 14, 14, 15, 15, 16, 16, 16};
    return precision < 0 || precision > 38 ? 16 : bytes[precision];
}

static firn_rc leaf_kind(const firn_field *f, pq_leaf *l, firn_err *err)
{
    switch (f->type) {
    case FIRN_TYPE_BOOLEAN:
        l->kind = PQK_BOOL, l->ptype = PQ_BOOLEAN;
        break;
    case FIRN_TYPE_INT:
    case FIRN_TYPE_DATE:
        l->kind = PQK_I32, l->ptype = PQ_INT32;
        break;
    case FIRN_TYPE_LONG:
    case FIRN_TYPE_TIME:
    case FIRN_TYPE_TIMESTAMP:
    case FIRN_TYPE_TIMESTAMPTZ:
    case FIRN_TYPE_TIMESTAMP_NS:
    case FIRN_TYPE_TIMESTAMPTZ_NS:
        l->kind = PQK_I64, l->ptype = PQ_INT64;
        break;
    case FIRN_TYPE_FLOAT:
        l->kind = PQK_FLOAT, l->ptype = PQ_FLOAT;
        break;
    case FIRN_TYPE_DOUBLE:
        l->kind = PQK_DOUBLE, l->ptype = PQ_DOUBLE;
        break;
    case FIRN_TYPE_DECIMAL:
        if (f->precision < 1 || f->precision > 38 || f->scale < 0 || f->scale > f->precision)
            return firn_err_set(err, FIRN_ERR_INVALID, "invalid decimal(%d,%d) for column \"%s\"",
                                f->precision, f->scale, f->name);
        if (f->precision <= 9)
            l->kind = PQK_I32_I64, l->ptype = PQ_INT32;
        else if (f->precision <= 18)
            l->kind = PQK_I64, l->ptype = PQ_INT64;
        else
            l->kind = PQK_DEC128, l->ptype = PQ_FLBA,
            l->type_length = firn__pq_decimal_bytes(f->precision);
        break;
    case FIRN_TYPE_UUID:
        l->kind = PQK_FLBA, l->ptype = PQ_FLBA, l->type_length = 16;
        break;
    case FIRN_TYPE_FIXED:
        if (f->length < 1)
            return firn_err_set(err, FIRN_ERR_INVALID, "invalid fixed[%d] for column \"%s\"",
                                f->length, f->name);
        l->kind = PQK_FLBA, l->ptype = PQ_FLBA, l->type_length = f->length;
        break;
    case FIRN_TYPE_STRING:
    case FIRN_TYPE_BINARY:
        l->kind = PQK_BYTES, l->ptype = PQ_BYTE_ARRAY;
        break;
    default:
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "unsupported type %d for column \"%s\"",
                            (int)f->type, f->name);
    }
    return FIRN_OK;
}

typedef struct leaf_walk {
    pq_leaf *leaves;
    size_t n, cap;
    pq_leaf cur; /* path so far */
    firn_err *err;
} leaf_walk;

static firn_rc walk(leaf_walk *lw, const firn_field *f, int16_t def, int16_t rep)
{
    pq_leaf *c = &lw->cur;
    size_t k = c->depth;
    if (k + 1 >= PQ_MAX_DEPTH || c->n_names + 2 > 2 * PQ_MAX_DEPTH)
        return firn_err_set(lw->err, FIRN_ERR_UNSUPPORTED, "schema nested too deeply at \"%s\"",
                            f->name);
    c->path[k] = f;
    c->depth = k + 1;
    c->names[c->n_names++] = f->name;
    if (!f->required)
        def++;
    firn_rc rc = FIRN_OK;
    if (f->type == FIRN_TYPE_STRUCT || f->type == FIRN_TYPE_LIST || f->type == FIRN_TYPE_MAP) {
        bool repeated = f->type != FIRN_TYPE_STRUCT;
        size_t want = f->type == FIRN_TYPE_LIST ? 1 : f->type == FIRN_TYPE_MAP ? 2 : 0;
        if ((want && f->n_children != want) || (!want && f->n_children == 0))
            return firn_err_set(lw->err, FIRN_ERR_INVALID, "column \"%s\" has %zu children",
                                f->name, f->n_children);
        if (repeated) {
            def++, rep++;
            c->rep_at[k] = rep;
            c->names[c->n_names++] = f->type == FIRN_TYPE_LIST ? "list" : "key_value";
        }
        bool saved_rep = c->in_repeated;
        c->in_repeated = saved_rep || repeated;
        size_t saved_names = c->n_names;
        for (size_t i = 0; i < f->n_children && !rc; i++) {
            c->child[k] = i;
            c->n_names = saved_names;
            rc = walk(lw, f->children[i], def, rep);
        }
        c->in_repeated = saved_rep;
    } else {
        c->field = f;
        c->max_def = def;
        c->max_rep = rep;
        rc = leaf_kind(f, c, lw->err);
        if (!rc) {
            if (lw->n == lw->cap) {
                lw->cap = lw->cap ? lw->cap * 2 : 16;
                lw->leaves = firn_reallocarray(lw->leaves, lw->cap, sizeof(pq_leaf));
            }
            lw->leaves[lw->n++] = *c;
        }
    }
    c->depth = k;
    return rc;
}

firn_rc firn__pq_leaves(const firn_field *schema, pq_leaf **out, size_t *out_n, firn_err *err)
{
    if (schema->type != FIRN_TYPE_STRUCT)
        return firn_err_set(err, FIRN_ERR_INVALID, "parquet schema must be a struct");
    leaf_walk lw;
    memset(&lw, 0, sizeof(lw));
    lw.err = err;
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; i < schema->n_children && !rc; i++) {
        memset(&lw.cur, 0, sizeof(lw.cur));
        lw.cur.top = i;
        rc = walk(&lw, schema->children[i], 0, 0);
    }
    if (rc) {
        firn_free(lw.leaves);
        return rc;
    }
    *out = lw.leaves;
    *out_n = lw.n;
    return FIRN_OK;
}

/* ---- SchemaElement list ------------------------------------------------------------------- */

static size_t count_elements(const firn_field *f)
{
    size_t n = 1;
    if (f->type == FIRN_TYPE_LIST || f->type == FIRN_TYPE_MAP)
        n++; /* the repeated middle group */
    for (size_t i = 0; i < f->n_children; i++)
        n += count_elements(f->children[i]);
    return n;
}

static void write_time_unit(pq_tw *w, int16_t id, bool utc, bool nanos)
{
    firn__pq_tw_field_struct(w, id);
    firn__pq_tw_field_bool(w, 1, utc);
    firn__pq_tw_field_struct(w, 2);
    firn__pq_tw_field_struct(w, nanos ? 3 : 2);
    firn__pq_tw_struct_end(w);
    firn__pq_tw_struct_end(w);
    firn__pq_tw_struct_end(w);
}

/* Writes converted_type (6), scale/precision (7, 8) and returns after field 8. */
static void write_annotations_pre(pq_tw *w, const firn_field *f)
{
    switch (f->type) {
    case FIRN_TYPE_STRING:
        firn__pq_tw_field_i32(w, 6, CT_UTF8);
        break;
    case FIRN_TYPE_DATE:
        firn__pq_tw_field_i32(w, 6, CT_DATE);
        break;
    case FIRN_TYPE_TIME:
        firn__pq_tw_field_i32(w, 6, CT_TIME_MICROS);
        break;
    case FIRN_TYPE_TIMESTAMP:
    case FIRN_TYPE_TIMESTAMPTZ:
        firn__pq_tw_field_i32(w, 6, CT_TIMESTAMP_MICROS);
        break;
    case FIRN_TYPE_DECIMAL:
        firn__pq_tw_field_i32(w, 6, CT_DECIMAL);
        firn__pq_tw_field_i32(w, 7, f->scale);
        firn__pq_tw_field_i32(w, 8, f->precision);
        break;
    case FIRN_TYPE_LIST:
        firn__pq_tw_field_i32(w, 6, CT_LIST);
        break;
    case FIRN_TYPE_MAP:
        firn__pq_tw_field_i32(w, 6, CT_MAP);
        break;
    default:
        break;
    }
}

static void write_logical(pq_tw *w, const firn_field *f)
{
    int lt = 0;
    switch (f->type) {
    case FIRN_TYPE_STRING:
        lt = LT_STRING;
        break;
    case FIRN_TYPE_DATE:
        lt = LT_DATE;
        break;
    case FIRN_TYPE_UUID:
        lt = LT_UUID;
        break;
    case FIRN_TYPE_LIST:
        lt = LT_LIST;
        break;
    case FIRN_TYPE_MAP:
        lt = LT_MAP;
        break;
    case FIRN_TYPE_DECIMAL:
        firn__pq_tw_field_struct(w, 10);
        firn__pq_tw_field_struct(w, LT_DECIMAL);
        firn__pq_tw_field_i32(w, 1, f->scale);
        firn__pq_tw_field_i32(w, 2, f->precision);
        firn__pq_tw_struct_end(w);
        firn__pq_tw_struct_end(w);
        return;
    case FIRN_TYPE_TIME:
    case FIRN_TYPE_TIMESTAMP:
    case FIRN_TYPE_TIMESTAMPTZ:
    case FIRN_TYPE_TIMESTAMP_NS:
    case FIRN_TYPE_TIMESTAMPTZ_NS:
        firn__pq_tw_field_struct(w, 10);
        write_time_unit(w, f->type == FIRN_TYPE_TIME ? LT_TIME : LT_TIMESTAMP,
                        f->type == FIRN_TYPE_TIMESTAMPTZ || f->type == FIRN_TYPE_TIMESTAMPTZ_NS,
                        f->type == FIRN_TYPE_TIMESTAMP_NS || f->type == FIRN_TYPE_TIMESTAMPTZ_NS);
        firn__pq_tw_struct_end(w);
        return;
    default:
        return;
    }
    firn__pq_tw_field_struct(w, 10);
    firn__pq_tw_field_struct(w, (int16_t)lt);
    firn__pq_tw_struct_end(w);
    firn__pq_tw_struct_end(w);
}

static void write_element(pq_tw *w, const firn_field *f)
{
    bool group =
        f->type == FIRN_TYPE_STRUCT || f->type == FIRN_TYPE_LIST || f->type == FIRN_TYPE_MAP;
    firn__pq_tw_struct_begin(w);
    if (!group) {
        pq_leaf l;
        memset(&l, 0, sizeof(l));
        firn_rc_ignore(leaf_kind(f, &l, NULL)); /* validated by firn__pq_leaves */
        firn__pq_tw_field_i32(w, 1, l.ptype);
        if (l.ptype == PQ_FLBA)
            firn__pq_tw_field_i32(w, 2, l.type_length);
    }
    firn__pq_tw_field_i32(w, 3, f->required ? PQ_REQUIRED : PQ_OPTIONAL);
    firn__pq_tw_field_bin(w, 4, f->name, strlen(f->name));
    if (group)
        firn__pq_tw_field_i32(w, 5, f->type == FIRN_TYPE_STRUCT ? (int32_t)f->n_children : 1);
    write_annotations_pre(w, f);
    firn__pq_tw_field_i32(w, 9, f->id);
    write_logical(w, f);
    firn__pq_tw_struct_end(w);
    if (f->type == FIRN_TYPE_LIST || f->type == FIRN_TYPE_MAP) {
        const char *mid = f->type == FIRN_TYPE_LIST ? "list" : "key_value";
        firn__pq_tw_struct_begin(w);
        firn__pq_tw_field_i32(w, 3, PQ_REPEATED);
        firn__pq_tw_field_bin(w, 4, mid, strlen(mid));
        firn__pq_tw_field_i32(w, 5, (int32_t)f->n_children);
        firn__pq_tw_struct_end(w);
    }
    for (size_t i = 0; i < f->n_children; i++)
        write_element(w, f->children[i]);
}

void firn__pq_schema_write(pq_tw *w, const firn_field *schema)
{
    size_t n = 1;
    for (size_t i = 0; i < schema->n_children; i++)
        n += count_elements(schema->children[i]);
    firn__pq_tw_field_list(w, 2, TC_STRUCT, n);
    firn__pq_tw_struct_begin(w);
    const char *root = "table";
    firn__pq_tw_field_bin(w, 4, root, strlen(root));
    firn__pq_tw_field_i32(w, 5, (int32_t)schema->n_children);
    firn__pq_tw_struct_end(w);
    for (size_t i = 0; i < schema->n_children; i++)
        write_element(w, schema->children[i]);
}
