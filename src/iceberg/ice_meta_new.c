/* SPDX-License-Identifier: Apache-2.0 */
/* Metadata for a new table (Java TableMetadata.newTableMetadata, pyiceberg new_table_metadata):
 * fresh field ids, partition field ids from 1000, unsorted or remapped sort order, a new uuid. */
#include "ice_meta_int.h"

#include <stdio.h>
#include <string.h>

static int32_t map_id(const int32_t *map, size_t n_map, int32_t old_id)
{
    for (size_t i = 0; i < n_map; i++) {
        if (map[2 * i] == old_id)
            return map[2 * i + 1];
    }
    return -1;
}

/* Re-keys doc/default extras from old to new field ids. */
static json_t *remap_extras(const json_t *extras, const int32_t *map, size_t n_map)
{
    if (!extras)
        return NULL;
    json_t *out = json_object();
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)extras, key, val)
    {
        int32_t old_id;
        if (firn_parse_i32(key, strlen(key), &old_id, NULL))
            continue;
        int32_t new_id = map_id(map, n_map, old_id);
        if (new_id < 0)
            continue;
        char nk[16];
        snprintf(nk, sizeof(nk), "%d", new_id);
        json_object_set(out, nk, val);
    }
    return out;
}

static firn_rc fresh_schema(
    const firn_schema *in, firn_schema **out, int32_t **out_map, size_t *out_n_map, firn_err *err)
{
    size_t n = firn__ice_field_count(in->root);
    int32_t *map = firn_calloc(2 * n + 2, sizeof(int32_t));
    size_t n_map = 0;
    int32_t next_id = 1;
    firn_schema *s = firn_schema_new(0, firn__ice_fresh_ids(in->root, &next_id, map, &n_map));
    int32_t *ids = firn_calloc(in->n_identifier_field_ids + 1, sizeof(int32_t));
    for (size_t i = 0; i < in->n_identifier_field_ids; i++)
        ids[i] = map_id(map, n_map, in->identifier_field_ids[i]);
    firn_schema_set_identifier_ids(s, ids, in->n_identifier_field_ids);
    firn_free(ids);
    s->field_extras = remap_extras(in->field_extras, map, n_map);
    firn_rc rc = firn_schema_validate(s, err);
    if (rc) {
        firn_schema_free(s);
        firn_free(map);
        return rc;
    }
    *out = s;
    *out_map = map;
    *out_n_map = n_map;
    return FIRN_OK;
}

static firn_rc fresh_spec(const firn_partition_spec *in,
                          const int32_t *map,
                          size_t n_map,
                          firn_partition_spec **out,
                          firn_err *err)
{
    firn_partition_spec *s = firn_partition_spec_new(0);
    for (size_t i = 0; in && i < in->n_fields; i++) {
        const firn_partition_field *f = &in->fields[i];
        int32_t src = map_id(map, n_map, f->source_id);
        if (src < 0) {
            firn_partition_spec_free(s);
            return firn_err_set(err, FIRN_ERR_INVALID,
                                "partition field \"%s\" refers to unknown column %d", f->name,
                                f->source_id);
        }
        firn_partition_spec_add(s, src, FIRN_PARTITION_FIELD_ID_START + (int32_t)i, f->name,
                                f->transform);
    }
    *out = s;
    return FIRN_OK;
}

static firn_rc fresh_sort(const firn_sort_order *in,
                          const int32_t *map,
                          size_t n_map,
                          firn_sort_order **out,
                          firn_err *err)
{
    firn_sort_order *o = firn_sort_order_new(in && in->n_fields > 0 ? 1 : 0);
    for (size_t i = 0; in && i < in->n_fields; i++) {
        const firn_sort_field *f = &in->fields[i];
        int32_t src = map_id(map, n_map, f->source_id);
        if (src < 0) {
            firn_sort_order_free(o);
            return firn_err_set(err, FIRN_ERR_INVALID, "sort field refers to unknown column %d",
                                f->source_id);
        }
        firn_sort_order_add(o, src, f->transform, f->descending, f->nulls_first);
    }
    *out = o;
    return FIRN_OK;
}

static firn_rc format_version_of(const firn_table_create *opts, int *out, firn_err *err)
{
    int fv = opts->format_version;
    const char *p = opts->properties ? firn_props_get(opts->properties, "format-version") : NULL;
    if (fv == 0 && p) {
        int32_t v;
        if (firn_parse_i32(p, strlen(p), &v, NULL))
            return firn_err_set(err, FIRN_ERR_INVALID, "invalid format-version \"%s\"", p);
        fv = v;
    }
    if (fv == 0)
        fv = 2;
    if (fv < 1 || fv > 3)
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "unsupported table format version %d", fv);
    *out = fv;
    return FIRN_OK;
}

static void set_defaults(firn_table_metadata *md, const firn_table_create *opts)
{
    firn_props_init(&md->properties);
    if (opts->properties) {
        for (size_t i = 0; i < opts->properties->n; i++) {
            if (strcmp(opts->properties->keys[i], "format-version") != 0)
                firn_props_set(&md->properties, opts->properties->keys[i],
                               opts->properties->vals[i]);
        }
    }
    if (!firn_props_get(&md->properties, "write.parquet.compression-codec"))
        firn_props_set(&md->properties, "write.parquet.compression-codec", "zstd");
    uint8_t u[16];
    firn_uuid_v4(u);
    firn_uuid_format(u, md->table_uuid);
    md->last_updated_ms = firn_now_us() / 1000;
    md->current_snapshot_id = -1;
    md->next_row_id = md->format_version >= 3 ? 0 : -1;
    md->refs = firn_calloc(1, sizeof(*md->refs));
    md->snapshots = firn_calloc(1, sizeof(*md->snapshots));
    md->snapshot_log = firn_calloc(1, sizeof(*md->snapshot_log));
    md->metadata_log = firn_calloc(1, sizeof(*md->metadata_log));
}

static size_t trim_location(const char *loc)
{
    size_t n = strlen(loc);
    while (n > 1 && loc[n - 1] == '/')
        n--;
    return n;
}

firn_rc
firn_table_metadata_new(const firn_table_create *opts, firn_table_metadata **out, firn_err *err)
{
    *out = NULL;
    if (!opts->schema || !opts->location || opts->location[0] == '\0')
        return firn_err_set(err, FIRN_ERR_INVALID, "a new table needs a schema and a location");
    int fv = 2;
    FIRN_TRY(format_version_of(opts, &fv, err));
    int32_t *map = NULL;
    size_t n_map = 0;
    firn_schema *schema;
    FIRN_TRY(fresh_schema(opts->schema, &schema, &map, &n_map, err));
    firn_partition_spec *spec = NULL;
    firn_sort_order *order = NULL;
    firn_rc rc = fresh_spec(opts->spec, map, n_map, &spec, err);
    if (!rc)
        rc = fresh_sort(opts->sort_order, map, n_map, &order, err);
    firn_free(map);
    if (rc) {
        firn_schema_free(schema);
        firn_partition_spec_free(spec);
        return rc;
    }
    firn_table_metadata *md = firn_calloc(1, sizeof(*md));
    md->format_version = fv;
    md->location = firn_strndup(opts->location, trim_location(opts->location));
    md->last_column_id = firn_schema_highest_id(schema);
    md->schemas = firn_calloc(1, sizeof(*md->schemas));
    md->schemas[md->n_schemas++] = schema;
    md->specs = firn_calloc(1, sizeof(*md->specs));
    md->specs[md->n_specs++] = spec;
    md->last_partition_id = FIRN_PARTITION_FIELD_ID_START - 1 + (int32_t)spec->n_fields;
    md->sort_orders = firn_calloc(1, sizeof(*md->sort_orders));
    md->sort_orders[md->n_sort_orders++] = order;
    md->default_sort_order_id = order->order_id;
    set_defaults(md, opts);
    *out = md;
    return FIRN_OK;
}
