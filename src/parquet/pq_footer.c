/* SPDX-License-Identifier: Apache-2.0 */
/* Footer reader: FileMetaData (parquet.thrift) decoded from Thrift compact into plain structs.
 * Unknown fields are skipped (Thrift evolution); wrong wire types and truncation are errors. */
#include "pq_int.h"

#include <string.h>

static char *dup_bin(pq_tr *r)
{
    size_t len;
    const uint8_t *p = firn__pq_tr_bin(r, &len);
    return p ? firn_strndup((const char *)p, len) : firn_strdup("");
}

static uint8_t *dup_bytes(pq_tr *r, size_t *out_len)
{
    const uint8_t *p = firn__pq_tr_bin(r, out_len);
    return firn_memdup(p ? p : (const uint8_t *)"", p ? *out_len : 0);
}

static int32_t rd_i32(pq_tr *r, uint8_t t)
{
    int64_t v = firn__pq_tr_int(r, t);
    if (v < INT32_MIN || v > INT32_MAX)
        firn_rd_fail(&r->rd);
    return (int32_t)v;
}

/* Guard: a field of the wrong wire type fails the cursor. */
static bool want(pq_tr *r, uint8_t t, uint8_t expected)
{
    if (t == expected || (expected == TC_TRUE && t == TC_FALSE))
        return true;
    firn_rd_fail(&r->rd);
    return false;
}

#define FOR_FIELDS(r, id, t) for (firn__pq_tr_struct_begin(r); firn__pq_tr_field((r), &(id), &(t));)

static void read_time_unit(pq_tr *r, firn_pq_schema_elem *e)
{
    int16_t id;
    uint8_t t;
    FOR_FIELDS(r, id, t)
    {
        if (id == 1 && want(r, t, TC_TRUE))
            e->logical_utc = firn__pq_tr_bool(r, t);
        else if (id == 2 && want(r, t, TC_STRUCT)) {
            int16_t uid;
            uint8_t ut;
            FOR_FIELDS(r, uid, ut)
            {
                e->logical_unit = uid;
                firn__pq_tr_skip(r, ut);
            }
            firn__pq_tr_struct_end(r);
        } else
            firn__pq_tr_skip(r, t);
    }
    firn__pq_tr_struct_end(r);
}

static void read_logical(pq_tr *r, firn_pq_schema_elem *e)
{
    int16_t id;
    uint8_t t;
    FOR_FIELDS(r, id, t)
    {
        e->logical_type = id;
        if (t != TC_STRUCT) {
            firn_rd_fail(&r->rd);
            break;
        }
        if (id == 7 || id == 8) {
            read_time_unit(r, e);
        } else if (id == 10) {
            int16_t iid;
            uint8_t it;
            FOR_FIELDS(r, iid, it)
            {
                if (iid == 1)
                    e->logical_int_bits = (int32_t)firn__pq_tr_int(r, it);
                else if (iid == 2 && want(r, it, TC_TRUE))
                    e->logical_int_signed = firn__pq_tr_bool(r, it);
                else
                    firn__pq_tr_skip(r, it);
            }
            firn__pq_tr_struct_end(r);
        } else if (id == 5) {
            int16_t did;
            uint8_t dt;
            FOR_FIELDS(r, did, dt)
            {
                if (did == 1)
                    e->logical_scale = rd_i32(r, dt);
                else if (did == 2)
                    e->logical_precision = rd_i32(r, dt);
                else
                    firn__pq_tr_skip(r, dt);
            }
            firn__pq_tr_struct_end(r);
        } else {
            firn__pq_tr_skip(r, t);
        }
    }
    firn__pq_tr_struct_end(r);
}

static void read_schema_elem(pq_tr *r, firn_pq_schema_elem *e)
{
    int16_t id;
    uint8_t t;
    e->type = e->type_length = e->repetition = e->num_children = -1;
    e->converted_type = e->scale = e->precision = -1;
    e->logical_unit = e->logical_scale = e->logical_precision = e->logical_int_bits = -1;
    FOR_FIELDS(r, id, t)
    {
        switch (id) {
        case 1:
            e->type = rd_i32(r, t);
            break;
        case 2:
            e->type_length = rd_i32(r, t);
            break;
        case 3:
            e->repetition = rd_i32(r, t);
            break;
        case 4:
            if (want(r, t, TC_BINARY) && !e->name)
                e->name = dup_bin(r);
            break;
        case 5:
            e->num_children = rd_i32(r, t);
            break;
        case 6:
            e->converted_type = rd_i32(r, t);
            break;
        case 7:
            e->scale = rd_i32(r, t);
            break;
        case 8:
            e->precision = rd_i32(r, t);
            break;
        case 9:
            e->has_field_id = true;
            e->field_id = rd_i32(r, t);
            break;
        case 10:
            if (want(r, t, TC_STRUCT))
                read_logical(r, e);
            break;
        default:
            firn__pq_tr_skip(r, t);
        }
    }
    firn__pq_tr_struct_end(r);
    if (!e->name)
        e->name = firn_strdup("");
}

static void read_stats(pq_tr *r, firn_pq_stats *s)
{
    int16_t id;
    uint8_t t;
    FOR_FIELDS(r, id, t)
    {
        if (id == 3) {
            s->has_null_count = true;
            s->null_count = firn__pq_tr_int(r, t);
        } else if (id == 5 && want(r, t, TC_BINARY) && !s->has_max) {
            s->has_max = true;
            s->max_value = dup_bytes(r, &s->max_len);
        } else if (id == 6 && want(r, t, TC_BINARY) && !s->has_min) {
            s->has_min = true;
            s->min_value = dup_bytes(r, &s->min_len);
        } else if (id == 9) {
            s->has_nan_count = true;
            s->nan_count = firn__pq_tr_int(r, t);
        } else {
            firn__pq_tr_skip(r, t);
        }
    }
    firn__pq_tr_struct_end(r);
}

static void read_i32_list(pq_tr *r, int32_t **out, size_t *out_n)
{
    uint8_t et;
    size_t n = firn__pq_tr_list(r, &et);
    if (*out || (n && et != TC_I32)) {
        firn_rd_fail(&r->rd);
        return;
    }
    *out = firn_calloc(n ? n : 1, sizeof(int32_t));
    *out_n = n;
    for (size_t i = 0; i < n; i++)
        (*out)[i] = rd_i32(r, TC_I32);
}

static void read_str_list(pq_tr *r, char ***out, size_t *out_n)
{
    uint8_t et;
    size_t n = firn__pq_tr_list(r, &et);
    if (*out || (n && et != TC_BINARY)) {
        firn_rd_fail(&r->rd);
        return;
    }
    *out = firn_calloc(n ? n : 1, sizeof(char *));
    *out_n = n;
    for (size_t i = 0; i < n && firn_rd_ok(&r->rd); i++)
        (*out)[i] = dup_bin(r);
}

static void read_col_meta(pq_tr *r, firn_pq_chunk_meta *c)
{
    int16_t id;
    uint8_t t;
    FOR_FIELDS(r, id, t)
    {
        switch (id) {
        case 1:
            c->type = rd_i32(r, t);
            break;
        case 2:
            if (want(r, t, TC_LIST))
                read_i32_list(r, &c->encodings, &c->n_encodings);
            break;
        case 3:
            if (want(r, t, TC_LIST))
                read_str_list(r, &c->path, &c->n_path);
            break;
        case 4:
            c->codec = rd_i32(r, t);
            break;
        case 5:
            c->num_values = firn__pq_tr_int(r, t);
            break;
        case 6:
            c->total_uncompressed_size = firn__pq_tr_int(r, t);
            break;
        case 7:
            c->total_compressed_size = firn__pq_tr_int(r, t);
            break;
        case 9:
            c->data_page_offset = firn__pq_tr_int(r, t);
            break;
        case 11:
            c->dictionary_page_offset = firn__pq_tr_int(r, t);
            break;
        case 12:
            if (want(r, t, TC_STRUCT))
                read_stats(r, &c->stats);
            break;
        default:
            firn__pq_tr_skip(r, t);
        }
    }
    firn__pq_tr_struct_end(r);
}

static void read_chunk(pq_tr *r, firn_pq_chunk_meta *c)
{
    int16_t id;
    uint8_t t;
    c->dictionary_page_offset = -1;
    FOR_FIELDS(r, id, t)
    {
        if (id == 3 && want(r, t, TC_STRUCT))
            read_col_meta(r, c);
        else
            firn__pq_tr_skip(r, t);
    }
    firn__pq_tr_struct_end(r);
}

static void read_row_group(pq_tr *r, firn_pq_row_group_meta *g)
{
    int16_t id;
    uint8_t t;
    g->file_offset = g->total_compressed_size = -1;
    FOR_FIELDS(r, id, t)
    {
        if (id == 1 && want(r, t, TC_LIST) && !g->columns) {
            uint8_t et;
            size_t n = firn__pq_tr_list(r, &et);
            if (n && et != TC_STRUCT) {
                firn_rd_fail(&r->rd);
                break;
            }
            g->columns = firn_calloc(n ? n : 1, sizeof(firn_pq_chunk_meta));
            g->n_columns = n;
            for (size_t i = 0; i < n && firn_rd_ok(&r->rd); i++)
                read_chunk(r, &g->columns[i]);
        } else if (id == 2) {
            g->total_byte_size = firn__pq_tr_int(r, t);
        } else if (id == 3) {
            g->num_rows = firn__pq_tr_int(r, t);
        } else if (id == 5) {
            g->file_offset = firn__pq_tr_int(r, t);
        } else if (id == 6) {
            g->total_compressed_size = firn__pq_tr_int(r, t);
        } else {
            firn__pq_tr_skip(r, t);
        }
    }
    firn__pq_tr_struct_end(r);
}

/* Reads a list<struct> header into a fresh array of n elements of size sz. A second list for
 * the same field (existing) fails the read and keeps the first, which the caller frees. */
static void *struct_list(pq_tr *r, void *existing, size_t sz, size_t *out_n)
{
    uint8_t et;
    size_t n = firn__pq_tr_list(r, &et);
    if (existing || (n && et != TC_STRUCT) || !firn_rd_ok(&r->rd)) {
        firn_rd_fail(&r->rd);
        return existing;
    }
    *out_n = n;
    return firn_calloc(n ? n : 1, sz);
}

static void read_kv(pq_tr *r, firn_pq_file_meta *m)
{
    uint8_t et;
    size_t n = firn__pq_tr_list(r, &et);
    if (m->kv_keys || (n && et != TC_STRUCT) || !firn_rd_ok(&r->rd)) {
        firn_rd_fail(&r->rd);
        return;
    }
    m->kv_keys = firn_calloc(n ? n : 1, sizeof(char *));
    m->kv_values = firn_calloc(n ? n : 1, sizeof(char *));
    m->n_kv = n;
    for (size_t i = 0; i < n && firn_rd_ok(&r->rd); i++) {
        int16_t id;
        uint8_t t;
        FOR_FIELDS(r, id, t)
        {
            if (id == 1 && want(r, t, TC_BINARY) && !m->kv_keys[i])
                m->kv_keys[i] = dup_bin(r);
            else if (id == 2 && want(r, t, TC_BINARY) && !m->kv_values[i])
                m->kv_values[i] = dup_bin(r);
            else
                firn__pq_tr_skip(r, t);
        }
        firn__pq_tr_struct_end(r);
        if (!m->kv_keys[i])
            m->kv_keys[i] = firn_strdup("");
    }
}

static void read_file_meta(pq_tr *r, firn_pq_file_meta *m)
{
    int16_t id;
    uint8_t t;
    FOR_FIELDS(r, id, t)
    {
        if (id == 1) {
            m->version = rd_i32(r, t);
        } else if (id == 2 && want(r, t, TC_LIST)) {
            m->schema = struct_list(r, m->schema, sizeof(*m->schema), &m->n_schema);
            for (size_t i = 0; m->schema && i < m->n_schema && firn_rd_ok(&r->rd); i++)
                read_schema_elem(r, &m->schema[i]);
        } else if (id == 3) {
            m->num_rows = firn__pq_tr_int(r, t);
        } else if (id == 4 && want(r, t, TC_LIST)) {
            m->row_groups = struct_list(r, m->row_groups, sizeof(*m->row_groups), &m->n_row_groups);
            for (size_t i = 0; m->row_groups && i < m->n_row_groups && firn_rd_ok(&r->rd); i++)
                read_row_group(r, &m->row_groups[i]);
        } else if (id == 5 && want(r, t, TC_LIST)) {
            read_kv(r, m);
        } else if (id == 6 && want(r, t, TC_BINARY) && !m->created_by) {
            m->created_by = dup_bin(r);
        } else if (id == 7 && want(r, t, TC_LIST)) {
            uint8_t et;
            m->n_column_orders = firn__pq_tr_list(r, &et);
            for (size_t i = 0; i < m->n_column_orders && firn_rd_ok(&r->rd); i++)
                firn__pq_tr_skip(r, et);
        } else {
            firn__pq_tr_skip(r, t);
        }
    }
    firn__pq_tr_struct_end(r);
}

firn_rc
firn_pq_footer_locate(const uint8_t tail[8], uint64_t file_size, uint32_t *out_len, firn_err *err)
{
    uint32_t len;
    memcpy(&len, tail, 4);
    if (memcmp(tail + 4, "PAR1", 4) != 0)
        return firn_err_set(err, FIRN_ERR_PARSE, "not a parquet file (no trailing magic)");
    if (file_size < 12 || len > file_size - 12)
        return firn_err_set(err, FIRN_ERR_PARSE, "parquet footer length %u exceeds file size", len);
    *out_len = len;
    return FIRN_OK;
}

firn_rc firn_pq_footer_parse(const void *p, size_t len, firn_pq_file_meta **out, firn_err *err)
{
    pq_tr r;
    firn__pq_tr_init(&r, p, len);
    firn_pq_file_meta *m = firn_calloc(1, sizeof(*m));
    read_file_meta(&r, m);
    if (!firn_rd_ok(&r.rd)) {
        firn_pq_file_meta_free(m);
        return firn_err_set(err, FIRN_ERR_PARSE, "malformed parquet footer near byte %zu",
                            r.rd.pos);
    }
    *out = m;
    return FIRN_OK;
}

static void free_chunk(firn_pq_chunk_meta *c)
{
    for (size_t i = 0; c->path && i < c->n_path; i++)
        firn_free(c->path[i]);
    firn_free(c->path);
    firn_free(c->encodings);
    firn_free(c->stats.min_value);
    firn_free(c->stats.max_value);
}

void firn_pq_file_meta_free(firn_pq_file_meta *m)
{
    if (!m)
        return;
    for (size_t i = 0; m->schema && i < m->n_schema; i++)
        firn_free(m->schema[i].name);
    firn_free(m->schema);
    for (size_t g = 0; m->row_groups && g < m->n_row_groups; g++) {
        for (size_t i = 0; m->row_groups[g].columns && i < m->row_groups[g].n_columns; i++)
            free_chunk(&m->row_groups[g].columns[i]);
        firn_free(m->row_groups[g].columns);
    }
    firn_free(m->row_groups);
    for (size_t i = 0; i < m->n_kv; i++) {
        firn_free(m->kv_keys[i]);
        firn_free(m->kv_values[i]);
    }
    firn_free(m->kv_keys);
    firn_free(m->kv_values);
    firn_free(m->created_by);
    firn_free(m);
}
