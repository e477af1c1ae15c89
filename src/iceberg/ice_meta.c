/* SPDX-License-Identifier: Apache-2.0 */
/* Table metadata: the document model, metadata.json parse and serialize (format/spec.md "Table
 * Metadata Fields", ICEBERG.md §A; member order as Java's TableMetadataParser). */
#include "ice_meta_int.h"

#include <string.h>

void firn_table_metadata_free(firn_table_metadata *md)
{
    if (!md)
        return;
    firn_free(md->location);
    for (size_t i = 0; i < md->n_schemas; i++)
        firn_schema_free(md->schemas[i]);
    firn_free(md->schemas);
    for (size_t i = 0; i < md->n_specs; i++)
        firn_partition_spec_free(md->specs[i]);
    firn_free(md->specs);
    for (size_t i = 0; i < md->n_sort_orders; i++)
        firn_sort_order_free(md->sort_orders[i]);
    firn_free(md->sort_orders);
    firn_props_deinit(&md->properties);
    for (size_t i = 0; i < md->n_snapshots; i++)
        firn_snapshot_free(md->snapshots[i]);
    firn_free(md->snapshots);
    for (size_t i = 0; i < md->n_refs; i++)
        firn_free(md->refs[i].name);
    firn_free(md->refs);
    firn_free(md->snapshot_log);
    for (size_t i = 0; i < md->n_metadata_log; i++)
        firn_free(md->metadata_log[i].metadata_file);
    firn_free(md->metadata_log);
    json_decref(md->extra);
    firn_free(md);
}

firn_table_metadata *firn_table_metadata_clone(const firn_table_metadata *md)
{
    firn_table_metadata *c = firn_memdup(md, sizeof(*md));
    c->location = firn_strdup(md->location);
    c->schemas = firn_calloc(md->n_schemas + 1, sizeof(*c->schemas));
    for (size_t i = 0; i < md->n_schemas; i++)
        c->schemas[i] = firn_schema_clone(md->schemas[i]);
    c->specs = firn_calloc(md->n_specs + 1, sizeof(*c->specs));
    for (size_t i = 0; i < md->n_specs; i++)
        c->specs[i] = firn_partition_spec_clone(md->specs[i]);
    c->sort_orders = firn_calloc(md->n_sort_orders + 1, sizeof(*c->sort_orders));
    for (size_t i = 0; i < md->n_sort_orders; i++)
        c->sort_orders[i] = firn_sort_order_clone(md->sort_orders[i]);
    firn_props_copy(&c->properties, &md->properties);
    c->snapshots = firn_calloc(md->n_snapshots + 1, sizeof(*c->snapshots));
    for (size_t i = 0; i < md->n_snapshots; i++)
        c->snapshots[i] = firn_snapshot_clone(md->snapshots[i]);
    c->refs = firn_calloc(md->n_refs + 1, sizeof(*c->refs));
    for (size_t i = 0; i < md->n_refs; i++)
        firn__ice_ref_copy(&c->refs[i], &md->refs[i]);
    c->snapshot_log = firn_calloc(md->n_snapshot_log + 1, sizeof(*c->snapshot_log));
    if (md->n_snapshot_log > 0)
        memcpy(c->snapshot_log, md->snapshot_log, md->n_snapshot_log * sizeof(*c->snapshot_log));
    c->metadata_log = firn_calloc(md->n_metadata_log + 1, sizeof(*c->metadata_log));
    for (size_t i = 0; i < md->n_metadata_log; i++) {
        c->metadata_log[i].metadata_file = firn_strdup(md->metadata_log[i].metadata_file);
        c->metadata_log[i].timestamp_ms = md->metadata_log[i].timestamp_ms;
    }
    c->extra = md->extra ? json_deep_copy(md->extra) : NULL;
    return c;
}

/* ------------------------------------------------------------------------------------------------
 * Accessors
 * ----------------------------------------------------------------------------------------------*/

const firn_schema *firn_table_metadata_schema_by_id(const firn_table_metadata *md,
                                                    int32_t schema_id)
{
    for (size_t i = 0; i < md->n_schemas; i++) {
        if (md->schemas[i]->schema_id == schema_id)
            return md->schemas[i];
    }
    return NULL;
}

const firn_schema *firn_table_metadata_schema(const firn_table_metadata *md)
{
    return firn_table_metadata_schema_by_id(md, md->current_schema_id);
}

const firn_partition_spec *firn_table_metadata_spec(const firn_table_metadata *md)
{
    for (size_t i = 0; i < md->n_specs; i++) {
        if (md->specs[i]->spec_id == md->default_spec_id)
            return md->specs[i];
    }
    return NULL;
}

const firn_snapshot *firn_table_metadata_snapshot(const firn_table_metadata *md,
                                                  int64_t snapshot_id)
{
    for (size_t i = 0; i < md->n_snapshots; i++) {
        if (md->snapshots[i]->snapshot_id == snapshot_id)
            return md->snapshots[i];
    }
    return NULL;
}

const firn_snapshot *firn_table_metadata_current_snapshot(const firn_table_metadata *md)
{
    return md->current_snapshot_id < 0 ? NULL
                                       : firn_table_metadata_snapshot(md, md->current_snapshot_id);
}

const firn_snapshot_ref *firn_table_metadata_ref(const firn_table_metadata *md, const char *name)
{
    for (size_t i = 0; i < md->n_refs; i++) {
        if (strcmp(md->refs[i].name, name) == 0)
            return &md->refs[i];
    }
    return NULL;
}

/* ------------------------------------------------------------------------------------------------
 * Parsing
 * ----------------------------------------------------------------------------------------------*/

static const char *const MODELLED_KEYS[] = {
    "format-version",
    "table-uuid",
    "location",
    "last-sequence-number",
    "last-updated-ms",
    "last-column-id",
    "schema",
    "schemas",
    "current-schema-id",
    "partition-spec",
    "partition-specs",
    "default-spec-id",
    "last-partition-id",
    "sort-orders",
    "default-sort-order-id",
    "properties",
    "current-snapshot-id",
    "snapshots",
    "refs",
    "snapshot-log",
    "metadata-log",
    "next-row-id",
    NULL,
};

static bool is_modelled(const char *key)
{
    for (size_t i = 0; MODELLED_KEYS[i]; i++) {
        if (strcmp(key, MODELLED_KEYS[i]) == 0)
            return true;
    }
    return false;
}

static firn_rc parse_schemas(const json_t *v, firn_table_metadata *md, firn_err *err)
{
    const json_t *arr;
    FIRN_TRY(firn__ice_get_array(v, "schemas", md->format_version > 1, &arr, err));
    if (!arr) {
        /* v1: a single "schema" */
        const json_t *one = json_object_get(v, "schema");
        if (!one)
            return firn_err_set(err, FIRN_ERR_PARSE, "missing member \"schemas\"");
        md->schemas = firn_calloc(1, sizeof(*md->schemas));
        FIRN_TRY(firn__ice_schema_from_jv(one, &md->schemas[0], err));
        md->n_schemas = 1;
        md->current_schema_id = md->schemas[0]->schema_id;
        return FIRN_OK;
    }
    FIRN_TRY(firn__ice_get_i32(v, "current-schema-id", true, 0, &md->current_schema_id, err));
    md->schemas = firn_calloc(json_array_size(arr) + 1, sizeof(*md->schemas));
    for (size_t i = 0; i < json_array_size(arr); i++) {
        FIRN_TRY(firn__ice_schema_from_jv(json_array_get(arr, i), &md->schemas[i], err));
        md->n_schemas++;
    }
    if (!firn_table_metadata_schema(md))
        return firn_err_set(err, FIRN_ERR_PARSE, "current schema %d is not among the schemas",
                            md->current_schema_id);
    return FIRN_OK;
}

static firn_rc parse_v1_spec(const json_t *v, firn_table_metadata *md, firn_err *err)
{
    const json_t *fields;
    FIRN_TRY(firn__ice_get_array(v, "partition-spec", true, &fields, err));
    json_t *wrap = json_object();
    json_object_set_new(wrap, "spec-id", json_integer(0));
    json_object_set(wrap, "fields", (json_t *)fields);
    md->specs = firn_calloc(1, sizeof(*md->specs));
    firn_rc rc = firn__ice_spec_from_jv(wrap, &md->specs[0], err);
    json_decref(wrap);
    if (!rc)
        md->n_specs = 1;
    md->default_spec_id = 0;
    return rc;
}

static firn_rc parse_specs(const json_t *v, firn_table_metadata *md, firn_err *err)
{
    const json_t *arr;
    FIRN_TRY(firn__ice_get_array(v, "partition-specs", md->format_version > 1, &arr, err));
    if (!arr) {
        FIRN_TRY(parse_v1_spec(v, md, err));
    } else {
        FIRN_TRY(firn__ice_get_i32(v, "default-spec-id", true, 0, &md->default_spec_id, err));
        md->specs = firn_calloc(json_array_size(arr) + 1, sizeof(*md->specs));
        for (size_t i = 0; i < json_array_size(arr); i++) {
            FIRN_TRY(firn__ice_spec_from_jv(json_array_get(arr, i), &md->specs[i], err));
            md->n_specs++;
        }
    }
    if (!firn_table_metadata_spec(md))
        return firn_err_set(err, FIRN_ERR_PARSE, "default spec %d is not among the specs",
                            md->default_spec_id);
    int32_t max_id = FIRN_PARTITION_FIELD_ID_START - 1;
    for (size_t i = 0; i < md->n_specs; i++) {
        for (size_t j = 0; j < md->specs[i]->n_fields; j++) {
            if (md->specs[i]->fields[j].field_id > max_id)
                max_id = md->specs[i]->fields[j].field_id;
        }
    }
    return firn__ice_get_i32(v, "last-partition-id", md->format_version > 1, max_id,
                             &md->last_partition_id, err);
}

static firn_rc parse_sort_orders(const json_t *v, firn_table_metadata *md, firn_err *err)
{
    const json_t *arr;
    FIRN_TRY(firn__ice_get_array(v, "sort-orders", md->format_version > 1, &arr, err));
    if (!arr) {
        md->sort_orders = firn_calloc(1, sizeof(*md->sort_orders));
        md->sort_orders[0] = firn_sort_order_new(0);
        md->n_sort_orders = 1;
        md->default_sort_order_id = 0;
        return FIRN_OK;
    }
    FIRN_TRY(
        firn__ice_get_i32(v, "default-sort-order-id", true, 0, &md->default_sort_order_id, err));
    md->sort_orders = firn_calloc(json_array_size(arr) + 1, sizeof(*md->sort_orders));
    for (size_t i = 0; i < json_array_size(arr); i++) {
        FIRN_TRY(firn__ice_sort_from_jv(json_array_get(arr, i), &md->sort_orders[i], err));
        md->n_sort_orders++;
    }
    return FIRN_OK;
}

static firn_rc parse_snapshots(const json_t *v, firn_table_metadata *md, firn_err *err)
{
    const json_t *arr;
    FIRN_TRY(firn__ice_get_array(v, "snapshots", false, &arr, err));
    size_t n = arr ? json_array_size(arr) : 0;
    md->snapshots = firn_calloc(n + 1, sizeof(*md->snapshots));
    for (size_t i = 0; i < n; i++) {
        FIRN_TRY(firn__ice_snapshot_from_jv(json_array_get(arr, i), &md->snapshots[i], err));
        md->n_snapshots++;
    }
    return FIRN_OK;
}

static firn_rc parse_refs(const json_t *v, firn_table_metadata *md, firn_err *err)
{
    const json_t *refs = json_object_get(v, "refs");
    if (refs && !json_is_null(refs)) {
        if (!json_is_object(refs))
            return firn_err_set(err, FIRN_ERR_PARSE, "member \"refs\" is not an object");
        md->refs = firn_calloc(json_object_size(refs) + 2, sizeof(*md->refs));
        const char *name;
        json_t *r;
        json_object_foreach((json_t *)refs, name, r)
        {
            FIRN_TRY(firn__ice_ref_from_jv(name, r, &md->refs[md->n_refs], err));
            md->n_refs++;
        }
    } else {
        md->refs = firn_calloc(2, sizeof(*md->refs));
    }
    /* Old writers have no refs: main is implied by current-snapshot-id. */
    if (!firn_table_metadata_ref(md, "main") && md->current_snapshot_id >= 0) {
        firn_snapshot_ref *m = &md->refs[md->n_refs++];
        memset(m, 0, sizeof(*m));
        m->name = firn_strdup("main");
        m->snapshot_id = md->current_snapshot_id;
        m->min_snapshots_to_keep = m->max_snapshot_age_ms = m->max_ref_age_ms = -1;
    }
    return FIRN_OK;
}

static firn_rc parse_logs(const json_t *v, firn_table_metadata *md, firn_err *err)
{
    const json_t *arr;
    FIRN_TRY(firn__ice_get_array(v, "snapshot-log", false, &arr, err));
    size_t n = arr ? json_array_size(arr) : 0;
    md->snapshot_log = firn_calloc(n + 1, sizeof(*md->snapshot_log));
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(arr, i);
        firn_snapshot_log_entry *l = &md->snapshot_log[i];
        FIRN_TRY(firn__ice_get_i64(e, "snapshot-id", true, 0, &l->snapshot_id, err));
        FIRN_TRY(firn__ice_get_i64(e, "timestamp-ms", true, 0, &l->timestamp_ms, err));
        md->n_snapshot_log++;
    }
    FIRN_TRY(firn__ice_get_array(v, "metadata-log", false, &arr, err));
    n = arr ? json_array_size(arr) : 0;
    md->metadata_log = firn_calloc(n + 1, sizeof(*md->metadata_log));
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(arr, i);
        const char *file;
        firn_metadata_log_entry *l = &md->metadata_log[i];
        FIRN_TRY(firn__ice_get_str(e, "metadata-file", true, &file, err));
        FIRN_TRY(firn__ice_get_i64(e, "timestamp-ms", true, 0, &l->timestamp_ms, err));
        l->metadata_file = firn_strdup(file);
        md->n_metadata_log++;
    }
    return FIRN_OK;
}

static firn_rc parse_header(const json_t *v, firn_table_metadata *md, firn_err *err)
{
    int32_t fv;
    const char *uuid, *location;
    FIRN_TRY(firn__ice_get_i32(v, "format-version", true, 0, &fv, err));
    if (fv < 1 || fv > 3)
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "unsupported table format version %d", fv);
    md->format_version = fv;
    FIRN_TRY(firn__ice_get_str(v, "table-uuid", fv > 1, &uuid, err));
    if (uuid && !firn__ice_uuid_valid(uuid))
        return firn_err_set(err, FIRN_ERR_PARSE, "invalid table-uuid \"%s\"", uuid);
    if (uuid)
        memcpy(md->table_uuid, uuid, 37);
    FIRN_TRY(firn__ice_get_str(v, "location", true, &location, err));
    md->location = firn_strdup(location);
    FIRN_TRY(
        firn__ice_get_i64(v, "last-sequence-number", fv > 1, 0, &md->last_sequence_number, err));
    FIRN_TRY(firn__ice_get_i64(v, "last-updated-ms", true, 0, &md->last_updated_ms, err));
    FIRN_TRY(firn__ice_get_i32(v, "last-column-id", true, 0, &md->last_column_id, err));
    FIRN_TRY(firn__ice_get_i64(v, "current-snapshot-id", false, -1, &md->current_snapshot_id, err));
    if (md->current_snapshot_id < 0)
        md->current_snapshot_id = -1;
    return firn__ice_get_i64(v, "next-row-id", fv > 2, -1, &md->next_row_id, err);
}

static firn_rc parse_metadata(const json_t *v, firn_table_metadata *md, firn_err *err)
{
    if (!json_is_object(v))
        return firn_err_set(err, FIRN_ERR_PARSE, "table metadata is not a JSON object");
    FIRN_TRY(parse_header(v, md, err));
    FIRN_TRY(parse_schemas(v, md, err));
    FIRN_TRY(parse_specs(v, md, err));
    FIRN_TRY(parse_sort_orders(v, md, err));
    const json_t *props = json_object_get(v, "properties");
    if (props && !json_is_null(props))
        FIRN_TRY(firn__ice_props_from_jv(props, &md->properties, err));
    FIRN_TRY(parse_snapshots(v, md, err));
    if (md->current_snapshot_id >= 0 && !firn_table_metadata_current_snapshot(md))
        return firn_err_set(err, FIRN_ERR_PARSE, "current snapshot %lld is not among the snapshots",
                            (long long)md->current_snapshot_id);
    FIRN_TRY(parse_refs(v, md, err));
    FIRN_TRY(parse_logs(v, md, err));
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        if (is_modelled(key))
            continue;
        if (!md->extra)
            md->extra = json_object();
        json_object_set(md->extra, key, val);
    }
    return FIRN_OK;
}

firn_rc firn_table_metadata_from_json(const char *json,
                                      size_t len,
                                      firn_table_metadata **out,
                                      firn_err *err)
{
    json_t *v;
    *out = NULL;
    FIRN_TRY(firn__ice_json_load(json, len, &v, err));
    firn_table_metadata *md = firn_calloc(1, sizeof(*md));
    firn_props_init(&md->properties);
    firn_rc rc = parse_metadata(v, md, err);
    json_decref(v);
    if (rc) {
        firn_err_context(err, "while parsing table metadata");
        firn_table_metadata_free(md);
        return rc;
    }
    *out = md;
    return FIRN_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Serializing
 * ----------------------------------------------------------------------------------------------*/

static void put_lists(json_t *obj, const firn_table_metadata *md)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < md->n_schemas; i++)
        json_array_append_new(arr, firn__ice_schema_to_jv(md->schemas[i]));
    json_object_set_new(obj, "current-schema-id", json_integer(md->current_schema_id));
    json_object_set_new(obj, "schemas", arr);
    arr = json_array();
    for (size_t i = 0; i < md->n_specs; i++)
        json_array_append_new(arr, firn__ice_spec_to_jv(md->specs[i]));
    json_object_set_new(obj, "default-spec-id", json_integer(md->default_spec_id));
    json_object_set_new(obj, "partition-specs", arr);
    json_object_set_new(obj, "last-partition-id", json_integer(md->last_partition_id));
    arr = json_array();
    for (size_t i = 0; i < md->n_sort_orders; i++)
        json_array_append_new(arr, firn__ice_sort_to_jv(md->sort_orders[i]));
    json_object_set_new(obj, "default-sort-order-id", json_integer(md->default_sort_order_id));
    json_object_set_new(obj, "sort-orders", arr);
}

static void put_snapshots(json_t *obj, const firn_table_metadata *md)
{
    json_object_set_new(obj, "current-snapshot-id", json_integer(md->current_snapshot_id));
    json_t *refs = json_object();
    for (size_t i = 0; i < md->n_refs; i++)
        json_object_set_new(refs, md->refs[i].name, firn__ice_ref_to_jv(&md->refs[i], false));
    json_object_set_new(obj, "refs", refs);
    json_t *arr = json_array();
    for (size_t i = 0; i < md->n_snapshots; i++)
        json_array_append_new(arr, firn__ice_snapshot_to_jv(md->snapshots[i]));
    json_object_set_new(obj, "snapshots", arr);
}

static void put_logs(json_t *obj, const firn_table_metadata *md)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < md->n_snapshot_log; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "timestamp-ms", json_integer(md->snapshot_log[i].timestamp_ms));
        json_object_set_new(e, "snapshot-id", json_integer(md->snapshot_log[i].snapshot_id));
        json_array_append_new(arr, e);
    }
    json_object_set_new(obj, "snapshot-log", arr);
    arr = json_array();
    for (size_t i = 0; i < md->n_metadata_log; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "timestamp-ms", json_integer(md->metadata_log[i].timestamp_ms));
        json_object_set_new(e, "metadata-file", json_string(md->metadata_log[i].metadata_file));
        json_array_append_new(arr, e);
    }
    json_object_set_new(obj, "metadata-log", arr);
}

static json_t *metadata_to_jv(const firn_table_metadata *md)
{
    json_t *obj = json_object();
    json_object_set_new(obj, "format-version", json_integer(md->format_version));
    if (md->table_uuid[0]) /* optional in v1: a table read without one is written without */
        json_object_set_new(obj, "table-uuid", json_string(md->table_uuid));
    json_object_set_new(obj, "location", json_string(md->location));
    if (md->format_version > 1)
        json_object_set_new(obj, "last-sequence-number", json_integer(md->last_sequence_number));
    json_object_set_new(obj, "last-updated-ms", json_integer(md->last_updated_ms));
    json_object_set_new(obj, "last-column-id", json_integer(md->last_column_id));
    if (md->format_version == 1) {
        json_object_set_new(obj, "schema", firn__ice_schema_to_jv(firn_table_metadata_schema(md)));
        json_t *spec = firn__ice_spec_to_jv(firn_table_metadata_spec(md));
        json_object_set(obj, "partition-spec", json_object_get(spec, "fields"));
        json_decref(spec);
    }
    put_lists(obj, md);
    json_object_set_new(obj, "properties", firn__ice_props_to_jv(&md->properties));
    put_snapshots(obj, md);
    if (md->next_row_id >= 0)
        json_object_set_new(obj, "next-row-id", json_integer(md->next_row_id));
    if (md->extra)
        json_object_update_missing(obj, md->extra);
    put_logs(obj, md);
    return obj;
}

firn_rc firn_table_metadata_to_json(const firn_table_metadata *md, firn_buf *out, firn_err *err)
{
    json_t *v = metadata_to_jv(md);
    firn_rc rc = firn__ice_json_dump(v, out, err);
    json_decref(v);
    return rc;
}
