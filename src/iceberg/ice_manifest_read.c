/* SPDX-License-Identifier: Apache-2.0 */
/* Manifest and manifest-list readers. Fields are resolved by Iceberg field id from the writer
 * schema in the file, so manifests of Java, Spark, pyiceberg and firn read alike; v2
 * sequence-number inheritance (format/spec.md "Sequence Number Inheritance") is applied. */
#include "ice_manifest_int.h"

#include <string.h>

/* A field by id; a union value is already its branch (firn_avro_value is transparent). */
static const firn_avro_value *fid(const firn_avro_value *rec, int32_t id)
{
    const firn_avro_value *v = firn_avro_value_field_id(rec, id);
    return (v && v->type != FIRN_AVRO_NULL) ? v : NULL;
}

static bool get_long(const firn_avro_value *rec, int32_t id, int64_t *out)
{
    const firn_avro_value *v = fid(rec, id);
    if (!v || (v->type != FIRN_AVRO_LONG && v->type != FIRN_AVRO_INT))
        return false;
    *out = v->l;
    return true;
}

static int64_t long_or(const firn_avro_value *rec, int32_t id, int64_t dflt)
{
    int64_t x = dflt;
    return get_long(rec, id, &x) ? x : dflt;
}

static char *get_string(const firn_avro_value *rec, int32_t id)
{
    const firn_avro_value *v = fid(rec, id);
    if (!v || (v->type != FIRN_AVRO_STRING && v->type != FIRN_AVRO_BYTES))
        return NULL;
    return firn_strndup((const char *)v->bytes.ptr, v->bytes.len);
}

static uint8_t *get_bytes(const firn_avro_value *rec, int32_t id, size_t *out_len)
{
    const firn_avro_value *v = fid(rec, id);
    if (!v || (v->type != FIRN_AVRO_BYTES && v->type != FIRN_AVRO_FIXED))
        return NULL;
    *out_len = v->bytes.len;
    return v->bytes.len ? firn_memdup(v->bytes.ptr, v->bytes.len) : firn_malloc(0);
}

firn_rc firn__ptype_of_avro(const firn_avro_schema *s, firn_ptype *out, firn_err *err)
{
    if (s->type == FIRN_AVRO_UNION) {
        for (size_t i = 0; i < s->n_branches; i++) {
            if (s->branches[i]->type != FIRN_AVRO_NULL)
                return firn__ptype_of_avro(s->branches[i], out, err);
        }
    }
    const char *lt = s->logical_type ? s->logical_type : "";
    *out = (firn_ptype){FIRN_TYPE_BOOLEAN, 0, 0, 0};
    switch (s->type) {
    case FIRN_AVRO_BOOLEAN:
        return FIRN_OK;
    case FIRN_AVRO_INT:
        out->type = strcmp(lt, "date") == 0 ? FIRN_TYPE_DATE : FIRN_TYPE_INT;
        return FIRN_OK;
    case FIRN_AVRO_LONG:
        out->type = FIRN_TYPE_LONG;
        if (strcmp(lt, "time-micros") == 0)
            out->type = FIRN_TYPE_TIME;
        else if (strcmp(lt, "timestamp-micros") == 0)
            out->type = s->adjust_to_utc == 0 ? FIRN_TYPE_TIMESTAMP : FIRN_TYPE_TIMESTAMPTZ;
        else if (strcmp(lt, "local-timestamp-micros") == 0)
            out->type = FIRN_TYPE_TIMESTAMP;
        else if (strcmp(lt, "timestamp-nanos") == 0)
            out->type = s->adjust_to_utc == 0 ? FIRN_TYPE_TIMESTAMP_NS : FIRN_TYPE_TIMESTAMPTZ_NS;
        else if (strcmp(lt, "local-timestamp-nanos") == 0)
            out->type = FIRN_TYPE_TIMESTAMP_NS;
        return FIRN_OK;
    case FIRN_AVRO_FLOAT:
        out->type = FIRN_TYPE_FLOAT;
        return FIRN_OK;
    case FIRN_AVRO_DOUBLE:
        out->type = FIRN_TYPE_DOUBLE;
        return FIRN_OK;
    case FIRN_AVRO_STRING:
        out->type = FIRN_TYPE_STRING;
        return FIRN_OK;
    case FIRN_AVRO_BYTES:
    case FIRN_AVRO_FIXED:
        if (strcmp(lt, "decimal") == 0)
            *out = (firn_ptype){FIRN_TYPE_DECIMAL, s->precision, s->scale, 0};
        else if (strcmp(lt, "uuid") == 0 && s->type == FIRN_AVRO_FIXED)
            out->type = FIRN_TYPE_UUID;
        else if (s->type == FIRN_AVRO_FIXED)
            *out = (firn_ptype){FIRN_TYPE_FIXED, 0, 0, (int32_t)s->fixed_size};
        else
            out->type = FIRN_TYPE_BINARY;
        return FIRN_OK;
    default:
        return firn_err_set(err, FIRN_ERR_PARSE, "unsupported partition field type in manifest");
    }
}

static firn_rc
partition_value(const firn_avro_field *f, const firn_avro_value *av, firn_value *out, firn_err *err)
{
    firn_ptype t;
    FIRN_TRY(firn__ptype_of_avro(f->type, &t, err));
    *out = firn_value_null(t);
    if (av->type == FIRN_AVRO_NULL)
        return FIRN_OK;
    out->is_null = false;
    switch (t.type) {
    case FIRN_TYPE_BOOLEAN:
        out->b = av->b;
        return FIRN_OK;
    case FIRN_TYPE_FLOAT:
    case FIRN_TYPE_DOUBLE:
        out->d = av->d;
        return FIRN_OK;
    case FIRN_TYPE_DECIMAL: {
        if (av->bytes.len == 0 || av->bytes.len > 16)
            return firn_err_set(err, FIRN_ERR_PARSE, "invalid decimal partition value");
        firn_value tmp;
        FIRN_TRY(firn_value_from_bytes(t, av->bytes.ptr, av->bytes.len, &tmp, err));
        *out = tmp;
        return FIRN_OK;
    }
    case FIRN_TYPE_STRING:
    case FIRN_TYPE_BINARY:
    case FIRN_TYPE_FIXED:
    case FIRN_TYPE_UUID:
        out->bytes = av->bytes;
        return FIRN_OK;
    default:
        out->i = av->l;
        return FIRN_OK;
    }
}

static firn_rc read_partition(const firn_avro_value *df, firn_data_file *f, firn_err *err)
{
    const firn_avro_value *p = fid(df, 102);
    if (!p || p->type != FIRN_AVRO_RECORD)
        return FIRN_OK;
    size_t n = p->schema->n_fields;
    firn_value *vals = firn_calloc(n ? n : 1, sizeof *vals);
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; !rc && i < n; i++)
        rc = partition_value(&p->schema->fields[i], &p->items[i], &vals[i], err);
    if (!rc)
        firn_data_file_set_partition(f, vals, n);
    firn_free(vals);
    return rc;
}

/* Int-keyed maps: arrays of key/value records (Iceberg) or, tolerated, none at all. */
static firn_rc
read_map(const firn_avro_value *df, int32_t id, int which, firn_data_file *f, firn_err *err)
{
    const firn_avro_value *m = fid(df, id);
    if (!m)
        return FIRN_OK;
    if (m->type != FIRN_AVRO_ARRAY)
        return firn_err_set(err, FIRN_ERR_PARSE, "manifest field %d is not an int-keyed map", id);
    for (size_t i = 0; i < m->n; i++) {
        const firn_avro_value *kv = &m->items[i];
        const firn_avro_value *k = firn_avro_value_field(kv, "key");
        const firn_avro_value *v = firn_avro_value_field(kv, "value");
        if (!k || !v || k->type != FIRN_AVRO_INT)
            return firn_err_set(err, FIRN_ERR_PARSE, "malformed map entry in manifest field %d",
                                id);
        firn_col_metrics *cm = firn_data_file_metrics(f, (int32_t)k->l);
        if (which >= 4) {
            if (v->type != FIRN_AVRO_BYTES)
                return firn_err_set(err, FIRN_ERR_PARSE, "bound of field %d is not bytes",
                                    (int)k->l);
            firn_data_file_set_bound(f, (int32_t)k->l, which == 5, v->bytes.ptr, v->bytes.len);
            continue;
        }
        if (v->type != FIRN_AVRO_LONG && v->type != FIRN_AVRO_INT)
            return firn_err_set(err, FIRN_ERR_PARSE, "count of field %d is not a long", (int)k->l);
        int64_t *slot[] = {&cm->column_size, &cm->value_count, &cm->null_count, &cm->nan_count};
        *slot[which] = v->l;
    }
    return FIRN_OK;
}

static void read_lists(const firn_avro_value *df, firn_data_file *f)
{
    const firn_avro_value *so = fid(df, 132);
    if (so && so->type == FIRN_AVRO_ARRAY) {
        f->split_offsets = firn_calloc(so->n ? so->n : 1, sizeof *f->split_offsets);
        f->n_split_offsets = so->n;
        for (size_t i = 0; i < so->n; i++)
            f->split_offsets[i] = so->items[i].l;
    }
    const firn_avro_value *eq = fid(df, 135);
    if (eq && eq->type == FIRN_AVRO_ARRAY) {
        f->equality_ids = firn_calloc(eq->n ? eq->n : 1, sizeof *f->equality_ids);
        f->n_equality_ids = eq->n;
        for (size_t i = 0; i < eq->n; i++)
            f->equality_ids[i] = (int32_t)eq->items[i].l;
    }
}

static firn_rc
read_data_file(const firn_avro_value *df, int32_t spec_id, firn_data_file *f, firn_err *err)
{
    memset(f, 0, sizeof *f);
    f->content = (firn_file_content)long_or(df, 134, 0);
    f->file_path = get_string(df, 100);
    f->file_format = get_string(df, 101);
    f->spec_id = spec_id;
    if (!f->file_path || !f->file_format || f->content > FIRN_CONTENT_EQUALITY_DELETES)
        return firn_err_set(err, FIRN_ERR_PARSE, "manifest entry without a valid file");
    for (char *c = f->file_format; *c; c++) {
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    }
    if (!get_long(df, 103, &f->record_count) || !get_long(df, 104, &f->file_size_in_bytes))
        return firn_err_set(err, FIRN_ERR_PARSE, "manifest entry of \"%s\" lacks counts",
                            f->file_path);
    FIRN_TRY(read_partition(df, f, err));
    static const int32_t MAP_IDS[] = {108, 109, 110, 137, 125, 128};
    for (int i = 0; i < 6; i++)
        FIRN_TRY(read_map(df, MAP_IDS[i], i, f, err));
    f->key_metadata = get_bytes(df, 131, &f->key_metadata_len);
    read_lists(df, f);
    int64_t so = 0;
    if (get_long(df, 140, &so)) {
        f->has_sort_order_id = true;
        f->sort_order_id = (int32_t)so;
    }
    f->has_first_row_id = get_long(df, 142, &f->first_row_id);
    f->referenced_data_file = get_string(df, 143);
    f->has_content_offset = get_long(df, 144, &f->content_offset);
    if (f->has_content_offset && !get_long(df, 145, &f->content_size_in_bytes))
        return firn_err_set(err, FIRN_ERR_PARSE,
                            "manifest entry of \"%s\" has content_offset without a size",
                            f->file_path);
    return FIRN_OK;
}

static void inherit(firn_manifest_entry *e, const firn_manifest_file *mf)
{
    if (!mf)
        return;
    if (e->snapshot_id == FIRN_SEQ_NULL)
        e->snapshot_id = mf->added_snapshot_id;
    bool take = mf->sequence_number == 0 || e->status == FIRN_ENTRY_ADDED;
    if (e->sequence_number == FIRN_SEQ_NULL && take)
        e->sequence_number = mf->sequence_number;
    if (e->file_sequence_number == FIRN_SEQ_NULL && take)
        e->file_sequence_number = mf->sequence_number;
}

static firn_rc read_entry(const firn_avro_value *v,
                          int32_t spec_id,
                          const firn_manifest_file *mf,
                          firn_manifest_entry *e,
                          firn_err *err)
{
    int64_t status = -1;
    if (!get_long(v, 0, &status) || status < 0 || status > 2)
        return firn_err_set(err, FIRN_ERR_PARSE, "manifest entry with invalid status");
    e->status = (firn_entry_status)status;
    e->snapshot_id = long_or(v, 1, FIRN_SEQ_NULL);
    e->sequence_number = long_or(v, 3, FIRN_SEQ_NULL);
    e->file_sequence_number = long_or(v, 4, FIRN_SEQ_NULL);
    const firn_avro_value *df = fid(v, 2);
    if (!df || df->type != FIRN_AVRO_RECORD)
        return firn_err_set(err, FIRN_ERR_PARSE, "manifest entry without data_file");
    FIRN_TRY(read_data_file(df, spec_id, &e->file, err));
    inherit(e, mf);
    return FIRN_OK;
}

/* v3 first-row-id inheritance (format/spec.md "First Row ID Inheritance"): live data files with a
 * null first_row_id take the manifest's plus the rows of the live ones before them, matching
 * the manifest-list writer's accounting (added + existing rows). */
static void inherit_row_ids(firn_manifest *m, const firn_manifest_file *mf)
{
    if (!mf || !mf->has_first_row_id || mf->content != FIRN_MANIFEST_DATA)
        return;
    int64_t next = mf->first_row_id;
    for (size_t i = 0; i < m->n_entries; i++) {
        firn_data_file *f = &m->entries[i].file;
        if (m->entries[i].status == FIRN_ENTRY_DELETED || f->content != FIRN_CONTENT_DATA ||
            f->has_first_row_id)
            continue;
        f->has_first_row_id = true;
        f->first_row_id = next;
        next += f->record_count;
    }
}

static char *meta_string(const firn_avro_reader *r, const char *key)
{
    size_t len = 0;
    const uint8_t *p = firn_avro_reader_meta(r, key, &len);
    return p ? firn_strndup((const char *)p, len) : NULL;
}

static int32_t meta_int(const firn_avro_reader *r, const char *key, int32_t dflt)
{
    size_t len = 0;
    const uint8_t *p = firn_avro_reader_meta(r, key, &len);
    int32_t x = dflt;
    if (p && firn_parse_i32((const char *)p, len, &x, NULL))
        x = dflt;
    return x;
}

static void
read_manifest_header(const firn_avro_reader *r, const firn_manifest_file *mf, firn_manifest *m)
{
    m->format_version = meta_int(r, "format-version", 1);
    m->spec_id = meta_int(r, "partition-spec-id", mf ? mf->partition_spec_id : 0);
    size_t len = 0;
    const uint8_t *c = firn_avro_reader_meta(r, "content", &len);
    m->content = (c && len == 7 && memcmp(c, "deletes", 7) == 0) ? FIRN_MANIFEST_DELETES
                                                                 : FIRN_MANIFEST_DATA;
    m->schema_json = meta_string(r, "schema");
    m->partition_spec_json = meta_string(r, "partition-spec");
}

firn_rc firn_manifest_parse(
    const void *data, size_t len, const firn_manifest_file *inh, firn_manifest **out, firn_err *err)
{
    firn_avro_reader *r = NULL;
    FIRN_TRY(firn_avro_reader_open(data, len, &r, err));
    firn_manifest *m = firn_calloc(1, sizeof *m);
    read_manifest_header(r, inh, m);
    size_t cap = 0;
    firn_rc rc = FIRN_OK;
    for (;;) {
        const firn_avro_value *v = NULL;
        rc = firn_avro_reader_next(r, &v, err);
        if (rc || !v)
            break;
        if (m->n_entries == cap) {
            cap = cap ? cap * 2 : 16;
            m->entries = firn_reallocarray(m->entries, cap, sizeof *m->entries);
        }
        firn_manifest_entry *e = &m->entries[m->n_entries];
        memset(e, 0, sizeof *e);
        m->n_entries++;
        rc = read_entry(v, m->spec_id, inh, e, err);
        if (rc)
            break;
    }
    firn_avro_reader_free(r);
    if (rc) {
        firn_manifest_free(m);
        return rc;
    }
    inherit_row_ids(m, inh);
    *out = m;
    return FIRN_OK;
}

void firn_manifest_free(firn_manifest *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_entries; i++)
        firn_data_file_deinit(&m->entries[i].file);
    firn_free(m->entries);
    firn_free(m->schema_json);
    firn_free(m->partition_spec_json);
    firn_free(m);
}

firn_rc
firn_manifest_read(firn_io *io, const firn_manifest_file *mf, firn_manifest **out, firn_err *err)
{
    firn_buf bytes;
    firn_buf_init(&bytes, FIRN__MANIFEST_MAX_BYTES);
    firn_rc rc = firn_io_read(io, mf->manifest_path, &bytes, err);
    if (!rc)
        rc = firn_manifest_parse(bytes.data, bytes.len, mf, out, err);
    if (rc)
        firn_err_context(err, "while reading manifest \"%s\"", mf->manifest_path);
    firn_buf_deinit(&bytes);
    return rc;
}

static void read_summaries(const firn_avro_value *v, firn_manifest_file *mf)
{
    const firn_avro_value *parts = fid(v, 507);
    if (!parts || parts->type != FIRN_AVRO_ARRAY)
        return;
    mf->has_partitions = true;
    mf->n_partitions = parts->n;
    mf->partitions = parts->n ? firn_calloc(parts->n, sizeof *mf->partitions) : NULL;
    for (size_t i = 0; i < parts->n; i++) {
        const firn_avro_value *s = &parts->items[i];
        firn_partition_summary *ps = &mf->partitions[i];
        const firn_avro_value *cn = fid(s, 509);
        ps->contains_null = cn && cn->type == FIRN_AVRO_BOOLEAN && cn->b;
        const firn_avro_value *nan = fid(s, 518);
        ps->contains_nan = (nan && nan->type == FIRN_AVRO_BOOLEAN) ? (int8_t)nan->b : -1;
        ps->lower = get_bytes(s, 510, &ps->lower_len);
        ps->upper = get_bytes(s, 511, &ps->upper_len);
    }
}

static firn_rc read_manifest_file(const firn_avro_value *v, firn_manifest_file *mf, firn_err *err)
{
    memset(mf, 0, sizeof *mf);
    mf->manifest_path = get_string(v, 500);
    int64_t spec = 0;
    if (!mf->manifest_path || !get_long(v, 501, &mf->manifest_length) || !get_long(v, 502, &spec))
        return firn_err_set(err, FIRN_ERR_PARSE, "manifest list record lacks path, length or spec");
    mf->partition_spec_id = (int32_t)spec;
    mf->content = long_or(v, 517, 0) == 1 ? FIRN_MANIFEST_DELETES : FIRN_MANIFEST_DATA;
    mf->sequence_number = long_or(v, 515, 0);
    mf->min_sequence_number = long_or(v, 516, 0);
    mf->added_snapshot_id = long_or(v, 503, FIRN_SEQ_NULL);
    mf->added_files_count = (int32_t)long_or(v, 504, 0);
    mf->existing_files_count = (int32_t)long_or(v, 505, 0);
    mf->deleted_files_count = (int32_t)long_or(v, 506, 0);
    mf->added_rows_count = long_or(v, 512, 0);
    mf->existing_rows_count = long_or(v, 513, 0);
    mf->deleted_rows_count = long_or(v, 514, 0);
    read_summaries(v, mf);
    mf->key_metadata = get_bytes(v, 519, &mf->key_metadata_len);
    mf->has_first_row_id = get_long(v, 520, &mf->first_row_id);
    return FIRN_OK;
}

firn_rc firn_manifest_list_parse(
    const void *data, size_t len, firn_manifest_file **out, size_t *out_n, firn_err *err)
{
    firn_avro_reader *r = NULL;
    FIRN_TRY(firn_avro_reader_open(data, len, &r, err));
    firn_manifest_file *files = NULL;
    size_t n = 0, cap = 0;
    firn_rc rc = FIRN_OK;
    for (;;) {
        const firn_avro_value *v = NULL;
        rc = firn_avro_reader_next(r, &v, err);
        if (rc || !v)
            break;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            files = firn_reallocarray(files, cap, sizeof *files);
        }
        rc = read_manifest_file(v, &files[n], err);
        n++;
        if (rc)
            break;
    }
    firn_avro_reader_free(r);
    if (rc) {
        firn_manifest_files_free(files, n);
        return rc;
    }
    *out = files;
    *out_n = n;
    return FIRN_OK;
}

firn_rc firn_manifest_list_read(
    firn_io *io, const char *location, firn_manifest_file **out, size_t *out_n, firn_err *err)
{
    firn_buf bytes;
    firn_buf_init(&bytes, FIRN__MANIFEST_MAX_BYTES);
    firn_rc rc = firn_io_read(io, location, &bytes, err);
    if (!rc)
        rc = firn_manifest_list_parse(bytes.data, bytes.len, out, out_n, err);
    if (rc)
        firn_err_context(err, "while reading manifest list \"%s\"", location);
    firn_buf_deinit(&bytes);
    return rc;
}
