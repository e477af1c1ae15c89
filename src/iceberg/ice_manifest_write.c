/* SPDX-License-Identifier: Apache-2.0 */
/* Manifest and manifest-list writers, format v2 and v3 (format/spec.md "Manifests", "Manifest
 * Lists"; ICEBERG.md §B): entries encoded in Java's V2Metadata/V3Metadata field order, partition
 * field summaries, exact lengths of what was uploaded. */
#include "ice_manifest_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct part_stats {
    bool contains_null;
    bool contains_nan;
    bool has_bounds;
    firn_value lower;
    firn_value upper;
    firn_buf lower_bytes; /* storage behind lower.bytes */
    firn_buf upper_bytes;
} part_stats;

struct firn_manifest_writer {
    firn_manifest_opts opts;
    firn_ptype *types;
    part_stats *stats;
    firn_avro_writer *avro;
    int32_t added_files, existing_files, deleted_files;
    int64_t added_rows, existing_rows, deleted_rows;
    int64_t min_seq; /* smallest explicit data sequence number of live entries, or -1 */
    bool has_unassigned;
};

void firn_manifest_writer_free(firn_manifest_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; w->stats && i < w->opts.spec->n_fields; i++) {
        firn_buf_deinit(&w->stats[i].lower_bytes);
        firn_buf_deinit(&w->stats[i].upper_bytes);
    }
    firn_free(w->stats);
    firn_free(w->types);
    firn_avro_writer_free(w->avro);
    firn_free(w);
}

static firn_rc set_meta(firn_manifest_writer *w, const char *key, const char *value, firn_err *err)
{
    return firn_avro_writer_set_meta(w->avro, key, value, strlen(value), err);
}

static firn_rc write_header(firn_manifest_writer *w, firn_err *err)
{
    const firn_manifest_opts *o = &w->opts;
    char num[24];
    firn_buf spec_json;
    firn_buf_init(&spec_json, 1 << 20);
    firn_rc rc = firn_partition_spec_fields_json(o->spec, &spec_json);
    if (rc) {
        firn_buf_deinit(&spec_json);
        return firn_err_set(err, rc, "partition spec json too large");
    }
    rc = set_meta(w, "schema", o->schema_json ? o->schema_json : "", err);
    snprintf(num, sizeof num, "%d", (int)o->schema_id);
    if (!rc)
        rc = set_meta(w, "schema-id", num, err);
    if (!rc)
        rc = set_meta(w, "partition-spec", (const char *)spec_json.data, err);
    snprintf(num, sizeof num, "%d", (int)o->spec->spec_id);
    if (!rc)
        rc = set_meta(w, "partition-spec-id", num, err);
    snprintf(num, sizeof num, "%d", o->format_version);
    if (!rc)
        rc = set_meta(w, "format-version", num, err);
    if (!rc)
        rc = set_meta(w, "content", o->content == FIRN_MANIFEST_DELETES ? "deletes" : "data", err);
    firn_buf_deinit(&spec_json);
    return rc;
}

firn_rc
firn_manifest_writer_new(const firn_manifest_opts *opts, firn_manifest_writer **out, firn_err *err)
{
    if (opts->format_version != 2 && opts->format_version != 3)
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED,
                            "cannot write manifests of format version %d", opts->format_version);
    firn_manifest_writer *w = firn_calloc(1, sizeof *w);
    w->opts = *opts;
    w->min_seq = -1;
    size_t nf = opts->spec->n_fields;
    w->types = firn_calloc(nf ? nf : 1, sizeof *w->types);
    w->stats = firn_calloc(nf ? nf : 1, sizeof *w->stats);
    for (size_t i = 0; i < nf; i++) {
        firn_buf_init(&w->stats[i].lower_bytes, 1 << 20);
        firn_buf_init(&w->stats[i].upper_bytes, 1 << 20);
    }
    firn_buf schema;
    firn_buf_init(&schema, 1 << 20);
    firn_rc rc = firn_partition_spec_types(opts->spec, opts->schema, w->types, err);
    if (!rc && firn__manifest_entry_schema(opts->spec, w->types, opts->format_version, &schema))
        rc = firn_err_set(err, FIRN_ERR_TOO_LARGE, "manifest schema too large");
    if (!rc) {
        w->avro =
            firn_avro_writer_new((const char *)schema.data, opts->codec, FIRN__MANIFEST_MAX_BYTES);
        rc = write_header(w, err);
    }
    firn_buf_deinit(&schema);
    if (rc) {
        firn_manifest_writer_free(w);
        return rc;
    }
    *out = w;
    return FIRN_OK;
}

static firn_rc put_opt_long(firn_buf *b, int64_t v)
{
    if (v == FIRN_SEQ_NULL)
        return firn_avro_put_long(b, 0);
    FIRN_TRY(firn_avro_put_long(b, 1));
    return firn_avro_put_long(b, v);
}

/* Decimal as Avro fixed of the precision's byte count, sign-extended big endian. */
static firn_rc put_decimal_fixed(firn_buf *b, const firn_value *v)
{
    int n = firn__decimal_bytes(v->type.precision);
    firn__i128 x = firn__dec_get(v);
    uint8_t out[32];
    if (n > (int)sizeof out)
        n = (int)sizeof out;
    for (int i = n - 1; i >= 0; i--) {
        out[i] = (uint8_t)x;
        x >>= 8; /* arithmetic shift keeps the sign */
    }
    return firn_avro_put_fixed(b, out, (size_t)n);
}

static firn_rc put_partition_value(firn_buf *b, const firn_value *v)
{
    if (v->is_null)
        return firn_avro_put_long(b, 0);
    FIRN_TRY(firn_avro_put_long(b, 1));
    switch (v->type.type) {
    case FIRN_TYPE_BOOLEAN:
        return firn_avro_put_bool(b, v->b);
    case FIRN_TYPE_FLOAT:
        return firn_avro_put_float(b, (float)v->d);
    case FIRN_TYPE_DOUBLE:
        return firn_avro_put_double(b, v->d);
    case FIRN_TYPE_DECIMAL:
        return put_decimal_fixed(b, v);
    case FIRN_TYPE_STRING:
    case FIRN_TYPE_BINARY:
        return firn_avro_put_bytes(b, v->bytes.ptr, v->bytes.len);
    case FIRN_TYPE_UUID:
    case FIRN_TYPE_FIXED:
        return firn_avro_put_fixed(b, v->bytes.ptr, v->bytes.len);
    default:
        return firn_avro_put_long(b, v->i);
    }
}

enum { M_SIZE, M_VALUES, M_NULLS, M_NANS, M_LOWER, M_UPPER };

static bool metric_present(const firn_col_metrics *m, int which)
{
    switch (which) {
    case M_SIZE:
        return m->column_size >= 0;
    case M_VALUES:
        return m->value_count >= 0;
    case M_NULLS:
        return m->null_count >= 0;
    case M_NANS:
        return m->nan_count >= 0;
    case M_LOWER:
        return m->lower != NULL;
    default:
        return m->upper != NULL;
    }
}

static firn_rc put_metric_map(firn_buf *b, const firn_data_file *f, int which)
{
    size_t n = 0;
    for (size_t i = 0; i < f->n_metrics; i++)
        n += metric_present(&f->metrics[i], which);
    if (n == 0)
        return firn_avro_put_long(b, 0);
    FIRN_TRY(firn_avro_put_long(b, 1));
    FIRN_TRY(firn_avro_put_long(b, (int64_t)n));
    for (size_t i = 0; i < f->n_metrics; i++) {
        const firn_col_metrics *m = &f->metrics[i];
        if (!metric_present(m, which))
            continue;
        FIRN_TRY(firn_avro_put_long(b, m->field_id));
        switch (which) {
        case M_SIZE:
            FIRN_TRY(firn_avro_put_long(b, m->column_size));
            break;
        case M_VALUES:
            FIRN_TRY(firn_avro_put_long(b, m->value_count));
            break;
        case M_NULLS:
            FIRN_TRY(firn_avro_put_long(b, m->null_count));
            break;
        case M_NANS:
            FIRN_TRY(firn_avro_put_long(b, m->nan_count));
            break;
        case M_LOWER:
            FIRN_TRY(firn_avro_put_bytes(b, m->lower, m->lower_len));
            break;
        default:
            FIRN_TRY(firn_avro_put_bytes(b, m->upper, m->upper_len));
            break;
        }
    }
    return firn_avro_put_long(b, 0);
}

static firn_rc put_opt_string(firn_buf *b, const char *s)
{
    if (!s)
        return firn_avro_put_long(b, 0);
    FIRN_TRY(firn_avro_put_long(b, 1));
    return firn_avro_put_string(b, s);
}

/* v3 tail: first_row_id (data files only), referenced_data_file, content_offset and
 * content_size_in_bytes (position deletes only), as Java's V3Metadata writes them. */
static firn_rc put_tail_v3(firn_buf *b, const firn_data_file *f)
{
    bool data = f->content == FIRN_CONTENT_DATA;
    bool pos = f->content == FIRN_CONTENT_POSITION_DELETES;
    FIRN_TRY(put_opt_long(b, data && f->has_first_row_id ? f->first_row_id : FIRN_SEQ_NULL));
    FIRN_TRY(put_opt_string(b, pos ? f->referenced_data_file : NULL));
    bool off = pos && f->has_content_offset;
    FIRN_TRY(put_opt_long(b, off ? f->content_offset : FIRN_SEQ_NULL));
    return put_opt_long(b, off ? f->content_size_in_bytes : FIRN_SEQ_NULL);
}

static firn_rc put_tail(firn_buf *b, const firn_data_file *f, int format_version)
{
    if (f->key_metadata) {
        FIRN_TRY(firn_avro_put_long(b, 1));
        FIRN_TRY(firn_avro_put_bytes(b, f->key_metadata, f->key_metadata_len));
    } else {
        FIRN_TRY(firn_avro_put_long(b, 0));
    }
    FIRN_TRY(firn_avro_put_long(b, f->split_offsets ? 1 : 0));
    if (f->split_offsets) {
        if (f->n_split_offsets > 0) {
            FIRN_TRY(firn_avro_put_long(b, (int64_t)f->n_split_offsets));
            for (size_t i = 0; i < f->n_split_offsets; i++)
                FIRN_TRY(firn_avro_put_long(b, f->split_offsets[i]));
        }
        FIRN_TRY(firn_avro_put_long(b, 0));
    }
    FIRN_TRY(firn_avro_put_long(b, f->equality_ids ? 1 : 0));
    if (f->equality_ids) {
        if (f->n_equality_ids > 0) {
            FIRN_TRY(firn_avro_put_long(b, (int64_t)f->n_equality_ids));
            for (size_t i = 0; i < f->n_equality_ids; i++)
                FIRN_TRY(firn_avro_put_long(b, f->equality_ids[i]));
        }
        FIRN_TRY(firn_avro_put_long(b, 0));
    }
    FIRN_TRY(put_opt_long(b, f->has_sort_order_id ? f->sort_order_id : FIRN_SEQ_NULL));
    if (format_version >= 3)
        return put_tail_v3(b, f);
    return put_opt_string(b, f->referenced_data_file);
}

static firn_rc put_entry(firn_buf *b, const firn_manifest_entry *e, int format_version)
{
    const firn_data_file *f = &e->file;
    FIRN_TRY(firn_avro_put_long(b, e->status));
    FIRN_TRY(put_opt_long(b, e->snapshot_id));
    FIRN_TRY(put_opt_long(b, e->sequence_number));
    FIRN_TRY(put_opt_long(b, e->file_sequence_number));
    FIRN_TRY(firn_avro_put_long(b, f->content));
    FIRN_TRY(firn_avro_put_string(b, f->file_path));
    FIRN_TRY(firn_avro_put_string(b, f->file_format ? f->file_format : "parquet"));
    for (size_t i = 0; i < f->n_partition; i++)
        FIRN_TRY(put_partition_value(b, &f->partition[i]));
    FIRN_TRY(firn_avro_put_long(b, f->record_count));
    FIRN_TRY(firn_avro_put_long(b, f->file_size_in_bytes));
    for (int m = M_SIZE; m <= M_UPPER; m++)
        FIRN_TRY(put_metric_map(b, f, m));
    return put_tail(b, f, format_version);
}

static void keep_bound(firn_buf *store, firn_value *slot, const firn_value *v)
{
    *slot = *v;
    firn_buf_reset(store);
    if (v->bytes.len > 0 && !firn_buf_append(store, v->bytes.ptr, v->bytes.len))
        slot->bytes.ptr = store->data;
    else
        slot->bytes.len = 0;
}

static void update_stats(firn_manifest_writer *w, const firn_data_file *f)
{
    for (size_t i = 0; i < f->n_partition; i++) {
        part_stats *s = &w->stats[i];
        const firn_value *v = &f->partition[i];
        if (v->is_null) {
            s->contains_null = true;
        } else if ((v->type.type == FIRN_TYPE_FLOAT || v->type.type == FIRN_TYPE_DOUBLE) &&
                   isnan(v->d)) {
            s->contains_nan = true;
        } else if (!s->has_bounds) {
            keep_bound(&s->lower_bytes, &s->lower, v);
            keep_bound(&s->upper_bytes, &s->upper, v);
            s->has_bounds = true;
        } else {
            if (firn_value_compare(v, &s->lower) < 0)
                keep_bound(&s->lower_bytes, &s->lower, v);
            if (firn_value_compare(v, &s->upper) > 0)
                keep_bound(&s->upper_bytes, &s->upper, v);
        }
    }
}

static firn_rc check_entry(firn_manifest_writer *w, const firn_manifest_entry *e, firn_err *err)
{
    const firn_data_file *f = &e->file;
    bool is_delete = f->content != FIRN_CONTENT_DATA;
    if (is_delete != (w->opts.content == FIRN_MANIFEST_DELETES))
        return firn_err_set(err, FIRN_ERR_INVALID,
                            "file \"%s\" of content %d does not belong in a %s manifest",
                            f->file_path, (int)f->content, is_delete ? "data" : "delete");
    if (f->n_partition != w->opts.spec->n_fields)
        return firn_err_set(
            err, FIRN_ERR_INVALID, "file \"%s\" has %zu partition values, spec %d has %zu fields",
            f->file_path, f->n_partition, (int)w->opts.spec->spec_id, w->opts.spec->n_fields);
    for (size_t i = 0; i < f->n_partition; i++) {
        if (f->partition[i].type.type != w->types[i].type)
            return firn_err_set(err, FIRN_ERR_INVALID,
                                "partition value %zu of file \"%s\" has the wrong type", i,
                                f->file_path);
    }
    if (f->content == FIRN_CONTENT_EQUALITY_DELETES && f->n_equality_ids == 0)
        return firn_err_set(err, FIRN_ERR_INVALID,
                            "equality delete file \"%s\" has no equality ids", f->file_path);
    if (e->status > FIRN_ENTRY_DELETED)
        return firn_err_set(err, FIRN_ERR_INVALID, "invalid manifest entry status %d",
                            (int)e->status);
    return FIRN_OK;
}

firn_rc
firn_manifest_writer_add(firn_manifest_writer *w, const firn_manifest_entry *e, firn_err *err)
{
    FIRN_TRY(check_entry(w, e, err));
    firn_buf *rec = firn_avro_writer_record(w->avro);
    size_t mark = rec->len;
    firn_rc rc = put_entry(rec, e, w->opts.format_version);
    if (rc) {
        firn_buf_truncate(rec, mark);
        return firn_err_set(err, rc, "manifest passes its size limit");
    }
    FIRN_TRY(firn_avro_writer_end_record(w->avro, err));
    int64_t rows = e->file.record_count;
    if (e->status == FIRN_ENTRY_ADDED) {
        w->added_files++;
        w->added_rows += rows;
    } else if (e->status == FIRN_ENTRY_EXISTING) {
        w->existing_files++;
        w->existing_rows += rows;
    } else {
        w->deleted_files++;
        w->deleted_rows += rows;
    }
    if (e->status != FIRN_ENTRY_DELETED) {
        if (e->sequence_number == FIRN_SEQ_NULL)
            w->has_unassigned = true;
        else if (w->min_seq < 0 || e->sequence_number < w->min_seq)
            w->min_seq = e->sequence_number;
    }
    update_stats(w, &e->file);
    return FIRN_OK;
}

firn_rc
firn_manifest_writer_add_file(firn_manifest_writer *w, const firn_data_file *file, firn_err *err)
{
    firn_manifest_entry e;
    e.status = FIRN_ENTRY_ADDED;
    e.snapshot_id = w->opts.snapshot_id;
    e.sequence_number = FIRN_SEQ_NULL;
    e.file_sequence_number = FIRN_SEQ_NULL;
    e.file = *file; /* shallow: only read */
    return firn_manifest_writer_add(w, &e, err);
}

size_t firn_manifest_writer_count(const firn_manifest_writer *w)
{
    return (size_t)firn_avro_writer_count(w->avro);
}

static void fill_summaries(firn_manifest_writer *w, firn_manifest_file *mf)
{
    size_t nf = w->opts.spec->n_fields;
    mf->has_partitions = true;
    mf->n_partitions = nf;
    mf->partitions = nf ? firn_calloc(nf, sizeof *mf->partitions) : NULL;
    for (size_t i = 0; i < nf; i++) {
        part_stats *s = &w->stats[i];
        firn_partition_summary *ps = &mf->partitions[i];
        ps->contains_null = s->contains_null;
        bool floating = w->types[i].type == FIRN_TYPE_FLOAT || w->types[i].type == FIRN_TYPE_DOUBLE;
        ps->contains_nan = floating ? (int8_t)s->contains_nan : -1;
        if (!s->has_bounds)
            continue;
        firn_buf b;
        firn_buf_init(&b, 1 << 20);
        if (!firn_value_to_bytes(&s->lower, &b, NULL))
            ps->lower = firn_buf_take(&b, &ps->lower_len);
        if (!firn_value_to_bytes(&s->upper, &b, NULL))
            ps->upper = firn_buf_take(&b, &ps->upper_len);
        firn_buf_deinit(&b);
    }
}

firn_rc firn_manifest_writer_finish(firn_manifest_writer *w,
                                    firn_io *io,
                                    const char *location,
                                    firn_manifest_file *out,
                                    firn_err *err)
{
    if (firn_avro_writer_count(w->avro) == 0)
        return firn_err_set(err, FIRN_ERR_INVALID, "cannot write empty manifest \"%s\"", location);
    firn_buf bytes;
    firn_buf_init(&bytes, FIRN__MANIFEST_MAX_BYTES);
    firn_rc rc = firn_avro_writer_finish(w->avro, &bytes, err);
    if (!rc)
        rc = firn_io_write_all(io, location, bytes.data, bytes.len, err);
    if (!rc) {
        memset(out, 0, sizeof *out);
        out->manifest_path = firn_strdup(location);
        out->manifest_length = (int64_t)bytes.len;
        out->partition_spec_id = w->opts.spec->spec_id;
        out->content = w->opts.content;
        out->sequence_number = FIRN_SEQ_NULL;
        out->min_sequence_number = w->has_unassigned ? FIRN_SEQ_NULL : w->min_seq;
        out->added_snapshot_id = w->opts.snapshot_id;
        out->added_files_count = w->added_files;
        out->existing_files_count = w->existing_files;
        out->deleted_files_count = w->deleted_files;
        out->added_rows_count = w->added_rows;
        out->existing_rows_count = w->existing_rows;
        out->deleted_rows_count = w->deleted_rows;
        out->has_first_row_id = false; /* assigned by the manifest-list writer (v3) */
        fill_summaries(w, out);
    }
    firn_buf_deinit(&bytes);
    return rc;
}

static firn_rc put_summary(firn_buf *b, const firn_partition_summary *s)
{
    FIRN_TRY(firn_avro_put_bool(b, s->contains_null));
    if (s->contains_nan < 0) {
        FIRN_TRY(firn_avro_put_long(b, 0));
    } else {
        FIRN_TRY(firn_avro_put_long(b, 1));
        FIRN_TRY(firn_avro_put_bool(b, s->contains_nan != 0));
    }
    FIRN_TRY(firn_avro_put_long(b, s->lower ? 1 : 0));
    if (s->lower)
        FIRN_TRY(firn_avro_put_bytes(b, s->lower, s->lower_len));
    FIRN_TRY(firn_avro_put_long(b, s->upper ? 1 : 0));
    if (s->upper)
        FIRN_TRY(firn_avro_put_bytes(b, s->upper, s->upper_len));
    return FIRN_OK;
}

static firn_rc
put_manifest_file(firn_buf *b, const firn_manifest_file *mf, int64_t seq, int format_version)
{
    int64_t s = mf->sequence_number == FIRN_SEQ_NULL ? seq : mf->sequence_number;
    int64_t min_s = mf->min_sequence_number == FIRN_SEQ_NULL ? seq : mf->min_sequence_number;
    FIRN_TRY(firn_avro_put_string(b, mf->manifest_path));
    FIRN_TRY(firn_avro_put_long(b, mf->manifest_length));
    FIRN_TRY(firn_avro_put_long(b, mf->partition_spec_id));
    FIRN_TRY(firn_avro_put_long(b, mf->content));
    FIRN_TRY(firn_avro_put_long(b, s));
    FIRN_TRY(firn_avro_put_long(b, min_s));
    FIRN_TRY(firn_avro_put_long(b, mf->added_snapshot_id));
    FIRN_TRY(firn_avro_put_long(b, mf->added_files_count));
    FIRN_TRY(firn_avro_put_long(b, mf->existing_files_count));
    FIRN_TRY(firn_avro_put_long(b, mf->deleted_files_count));
    FIRN_TRY(firn_avro_put_long(b, mf->added_rows_count));
    FIRN_TRY(firn_avro_put_long(b, mf->existing_rows_count));
    FIRN_TRY(firn_avro_put_long(b, mf->deleted_rows_count));
    if (!mf->has_partitions) {
        FIRN_TRY(firn_avro_put_long(b, 0));
    } else {
        FIRN_TRY(firn_avro_put_long(b, 1));
        if (mf->n_partitions > 0) {
            FIRN_TRY(firn_avro_put_long(b, (int64_t)mf->n_partitions));
            for (size_t i = 0; i < mf->n_partitions; i++)
                FIRN_TRY(put_summary(b, &mf->partitions[i]));
        }
        FIRN_TRY(firn_avro_put_long(b, 0));
    }
    if (!mf->key_metadata) {
        FIRN_TRY(firn_avro_put_long(b, 0));
    } else {
        FIRN_TRY(firn_avro_put_long(b, 1));
        FIRN_TRY(firn_avro_put_bytes(b, mf->key_metadata, mf->key_metadata_len));
    }
    if (format_version < 3)
        return FIRN_OK;
    bool data = mf->content == FIRN_MANIFEST_DATA;
    return put_opt_long(b, data && mf->has_first_row_id ? mf->first_row_id : FIRN_SEQ_NULL);
}

static firn_rc
put_meta(firn_avro_writer *aw, const char *key, int64_t v, bool null_when_negative, firn_err *err)
{
    char num[24];
    if (null_when_negative && v < 0)
        snprintf(num, sizeof num, "null");
    else
        snprintf(num, sizeof num, "%" PRId64, v);
    return firn_avro_writer_set_meta(aw, key, num, strlen(num), err);
}

static firn_rc list_meta(firn_avro_writer *aw, const firn_manifest_list_header *h, firn_err *err)
{
    FIRN_TRY(put_meta(aw, "snapshot-id", h->snapshot_id, false, err));
    FIRN_TRY(put_meta(aw, "parent-snapshot-id", h->parent_snapshot_id, true, err));
    FIRN_TRY(put_meta(aw, "sequence-number", h->sequence_number, false, err));
    if (h->format_version >= 3)
        FIRN_TRY(put_meta(aw, "first-row-id", h->first_row_id, false, err));
    return put_meta(aw, "format-version", h->format_version, false, err);
}

firn_rc firn_manifest_list_write(firn_io *io,
                                 const char *location,
                                 int64_t snapshot_id,
                                 int64_t parent_snapshot_id,
                                 int64_t sequence_number,
                                 const firn_manifest_file *files,
                                 size_t n_files,
                                 uint64_t *out_length_bytes,
                                 firn_err *err)
{
    firn_manifest_list_header h = {2, snapshot_id, parent_snapshot_id, sequence_number, -1};
    return firn_manifest_list_write_ex(io, location, &h, files, n_files, out_length_bytes, err);
}

firn_rc firn_manifest_list_write_ex(firn_io *io,
                                    const char *location,
                                    const firn_manifest_list_header *h,
                                    const firn_manifest_file *files,
                                    size_t n_files,
                                    uint64_t *out_length_bytes,
                                    firn_err *err)
{
    if (h->format_version != 2 && h->format_version != 3)
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED,
                            "cannot write manifest lists of format version %d", h->format_version);
    firn_buf schema, bytes;
    firn_buf_init(&schema, 1 << 16);
    firn_buf_init(&bytes, FIRN__MANIFEST_MAX_BYTES);
    firn_avro_writer *aw = NULL;
    firn_rc rc = firn__manifest_list_schema(h->format_version, &schema);
    if (rc) {
        rc = firn_err_set(err, rc, "manifest list schema too large");
        goto out;
    }
    aw = firn_avro_writer_new((const char *)schema.data, FIRN_AVRO_CODEC_DEFLATE,
                              FIRN__MANIFEST_MAX_BYTES);
    rc = list_meta(aw, h, err);
    for (size_t i = 0; !rc && i < n_files; i++) {
        rc = put_manifest_file(firn_avro_writer_record(aw), &files[i], h->sequence_number,
                               h->format_version);
        if (rc)
            rc = firn_err_set(err, rc, "manifest list \"%s\" passes its size limit", location);
        else
            rc = firn_avro_writer_end_record(aw, err);
    }
    if (!rc)
        rc = firn_avro_writer_finish(aw, &bytes, err);
    if (!rc)
        rc = firn_io_write_all(io, location, bytes.data, bytes.len, err);
    if (!rc && out_length_bytes)
        *out_length_bytes = bytes.len;
out:
    firn_avro_writer_free(aw);
    firn_buf_deinit(&schema);
    firn_buf_deinit(&bytes);
    return rc;
}
