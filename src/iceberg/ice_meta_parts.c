/* SPDX-License-Identifier: Apache-2.0 */
/* Partition specs, sort orders, snapshots and refs: the value types and their JSON forms
 * (format/spec.md "Partition Specs", "Sort Orders", "Snapshots", "Snapshot References",
 * Appendix C; member order as Java's parsers). */
#include "ice_meta_int.h"

#include <string.h>

/* ------------------------------------------------------------------------------------------------
 * Partition specs
 * ----------------------------------------------------------------------------------------------*/

firn_partition_spec *firn_partition_spec_clone(const firn_partition_spec *s)
{
    firn_partition_spec *c = firn_partition_spec_new(s->spec_id);
    for (size_t i = 0; i < s->n_fields; i++) {
        const firn_partition_field *f = &s->fields[i];
        firn_partition_spec_add(c, f->source_id, f->field_id, f->name, f->transform);
    }
    return c;
}

bool firn_partition_spec_same(const firn_partition_spec *a, const firn_partition_spec *b)
{
    if (a->n_fields != b->n_fields)
        return false;
    for (size_t i = 0; i < a->n_fields; i++) {
        const firn_partition_field *x = &a->fields[i], *y = &b->fields[i];
        if (x->source_id != y->source_id || x->field_id != y->field_id ||
            strcmp(x->name, y->name) != 0 || x->transform.kind != y->transform.kind ||
            x->transform.param != y->transform.param)
            return false;
    }
    return true;
}

/* v3 multi-argument transforms carry "source-ids"; a single id is accepted. */
static firn_rc spec_source_id(const json_t *jf, int32_t *out, firn_err *err)
{
    if (json_object_get(jf, "source-id"))
        return firn__ice_get_i32(jf, "source-id", true, 0, out, err);
    const json_t *ids;
    FIRN_TRY(firn__ice_get_array(jf, "source-ids", true, &ids, err));
    if (json_array_size(ids) != 1 || !json_is_integer(json_array_get(ids, 0)))
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED,
                            "partition fields with several source columns are not supported");
    json_int_t id = json_integer_value(json_array_get(ids, 0));
    if (id < 0 || id > INT32_MAX)
        return firn_err_set(err, FIRN_ERR_PARSE, "partition source id out of range");
    *out = (int32_t)id;
    return FIRN_OK;
}

firn_rc firn__ice_spec_from_jv(const json_t *v, firn_partition_spec **out, firn_err *err)
{
    int32_t spec_id;
    const json_t *fields;
    *out = NULL;
    FIRN_TRY(firn__ice_get_i32(v, "spec-id", true, 0, &spec_id, err));
    FIRN_TRY(firn__ice_get_array(v, "fields", true, &fields, err));
    firn_partition_spec *s = firn_partition_spec_new(spec_id);
    firn_rc rc = FIRN_OK;
    size_t i;
    const json_t *jf;
    json_array_foreach(fields, i, jf)
    {
        int32_t source_id, field_id;
        const char *name, *transform;
        rc = spec_source_id(jf, &source_id, err);
        if (!rc)
            rc = firn__ice_get_i32(jf, "field-id", true, 0, &field_id, err);
        if (!rc)
            rc = firn__ice_get_str(jf, "name", true, &name, err);
        if (!rc)
            rc = firn__ice_get_str(jf, "transform", true, &transform, err);
        firn_transform t;
        if (!rc)
            rc = firn_transform_parse(transform, &t, err);
        if (rc)
            break;
        firn_partition_spec_add(s, source_id, field_id, name, t);
    }
    if (rc) {
        firn_partition_spec_free(s);
        return rc;
    }
    *out = s;
    return FIRN_OK;
}

json_t *firn__ice_spec_to_jv(const firn_partition_spec *s)
{
    json_t *obj = json_object();
    json_object_set_new(obj, "spec-id", json_integer(s->spec_id));
    json_t *fields = json_array();
    for (size_t i = 0; i < s->n_fields; i++) {
        const firn_partition_field *f = &s->fields[i];
        json_t *jf = json_object();
        char t[32];
        firn_transform_format(f->transform, t, sizeof(t));
        json_object_set_new(jf, "name", json_string(f->name));
        json_object_set_new(jf, "transform", json_string(t));
        json_object_set_new(jf, "source-id", json_integer(f->source_id));
        json_object_set_new(jf, "field-id", json_integer(f->field_id));
        json_array_append_new(fields, jf);
    }
    json_object_set_new(obj, "fields", fields);
    return obj;
}

firn_rc firn_partition_spec_from_json(const char *json,
                                      size_t len,
                                      firn_partition_spec **out,
                                      firn_err *err)
{
    json_t *v;
    FIRN_TRY(firn__ice_json_load(json, len, &v, err));
    firn_rc rc = firn__ice_spec_from_jv(v, out, err);
    json_decref(v);
    return rc;
}

firn_rc firn_partition_spec_to_json(const firn_partition_spec *s, firn_buf *out, firn_err *err)
{
    json_t *v = firn__ice_spec_to_jv(s);
    firn_rc rc = firn__ice_json_dump(v, out, err);
    json_decref(v);
    return rc;
}

/* ------------------------------------------------------------------------------------------------
 * Sort orders
 * ----------------------------------------------------------------------------------------------*/

firn_sort_order *firn_sort_order_new(int32_t order_id)
{
    firn_sort_order *o = firn_calloc(1, sizeof(*o));
    o->order_id = order_id;
    return o;
}

void firn_sort_order_add(
    firn_sort_order *o, int32_t source_id, const char *transform, bool descending, bool nulls_first)
{
    o->fields = firn_reallocarray(o->fields, o->n_fields + 1, sizeof(*o->fields));
    firn_sort_field *f = &o->fields[o->n_fields++];
    f->source_id = source_id;
    f->transform = firn_strdup(transform);
    f->descending = descending;
    f->nulls_first = nulls_first;
}

void firn_sort_order_free(firn_sort_order *o)
{
    if (!o)
        return;
    for (size_t i = 0; i < o->n_fields; i++)
        firn_free(o->fields[i].transform);
    firn_free(o->fields);
    firn_free(o);
}

firn_sort_order *firn_sort_order_clone(const firn_sort_order *o)
{
    firn_sort_order *c = firn_sort_order_new(o->order_id);
    for (size_t i = 0; i < o->n_fields; i++) {
        const firn_sort_field *f = &o->fields[i];
        firn_sort_order_add(c, f->source_id, f->transform, f->descending, f->nulls_first);
    }
    return c;
}

static bool sort_same(const firn_sort_order *a, const firn_sort_order *b)
{
    if (a->n_fields != b->n_fields)
        return false;
    for (size_t i = 0; i < a->n_fields; i++) {
        const firn_sort_field *x = &a->fields[i], *y = &b->fields[i];
        if (x->source_id != y->source_id || strcmp(x->transform, y->transform) != 0 ||
            x->descending != y->descending || x->nulls_first != y->nulls_first)
            return false;
    }
    return true;
}

static firn_rc sort_field_from_jv(const json_t *jf, firn_sort_order *o, firn_err *err)
{
    int32_t source_id;
    const char *transform, *direction, *null_order;
    FIRN_TRY(firn__ice_get_i32(jf, "source-id", true, 0, &source_id, err));
    FIRN_TRY(firn__ice_get_str(jf, "transform", true, &transform, err));
    FIRN_TRY(firn__ice_get_str(jf, "direction", true, &direction, err));
    FIRN_TRY(firn__ice_get_str(jf, "null-order", true, &null_order, err));
    bool desc = strcmp(direction, "desc") == 0;
    bool nulls_first = strcmp(null_order, "nulls-first") == 0;
    if (!desc && strcmp(direction, "asc") != 0)
        return firn_err_set(err, FIRN_ERR_PARSE, "invalid sort direction \"%s\"", direction);
    if (!nulls_first && strcmp(null_order, "nulls-last") != 0)
        return firn_err_set(err, FIRN_ERR_PARSE, "invalid null order \"%s\"", null_order);
    firn_sort_order_add(o, source_id, transform, desc, nulls_first);
    return FIRN_OK;
}

firn_rc firn__ice_sort_from_jv(const json_t *v, firn_sort_order **out, firn_err *err)
{
    int32_t order_id;
    const json_t *fields;
    *out = NULL;
    FIRN_TRY(firn__ice_get_i32(v, "order-id", true, 0, &order_id, err));
    FIRN_TRY(firn__ice_get_array(v, "fields", true, &fields, err));
    firn_sort_order *o = firn_sort_order_new(order_id);
    size_t i;
    const json_t *jf;
    json_array_foreach(fields, i, jf)
    {
        firn_rc rc = sort_field_from_jv(jf, o, err);
        if (rc) {
            firn_sort_order_free(o);
            return rc;
        }
    }
    *out = o;
    return FIRN_OK;
}

json_t *firn__ice_sort_to_jv(const firn_sort_order *o)
{
    json_t *obj = json_object();
    json_object_set_new(obj, "order-id", json_integer(o->order_id));
    json_t *fields = json_array();
    for (size_t i = 0; i < o->n_fields; i++) {
        const firn_sort_field *f = &o->fields[i];
        json_t *jf = json_object();
        json_object_set_new(jf, "transform", json_string(f->transform));
        json_object_set_new(jf, "source-id", json_integer(f->source_id));
        json_object_set_new(jf, "direction", json_string(f->descending ? "desc" : "asc"));
        json_object_set_new(jf, "null-order",
                            json_string(f->nulls_first ? "nulls-first" : "nulls-last"));
        json_array_append_new(fields, jf);
    }
    json_object_set_new(obj, "fields", fields);
    return obj;
}

firn_rc
firn_sort_order_from_json(const char *json, size_t len, firn_sort_order **out, firn_err *err)
{
    json_t *v;
    FIRN_TRY(firn__ice_json_load(json, len, &v, err));
    firn_rc rc = firn__ice_sort_from_jv(v, out, err);
    json_decref(v);
    return rc;
}

firn_rc firn_sort_order_to_json(const firn_sort_order *o, firn_buf *out, firn_err *err)
{
    json_t *v = firn__ice_sort_to_jv(o);
    firn_rc rc = firn__ice_json_dump(v, out, err);
    json_decref(v);
    return rc;
}

bool firn__ice_sort_same(const firn_sort_order *a, const firn_sort_order *b)
{
    return sort_same(a, b);
}

/* ------------------------------------------------------------------------------------------------
 * Snapshots
 * ----------------------------------------------------------------------------------------------*/

firn_snapshot *firn_snapshot_new(int64_t snapshot_id,
                                 int64_t sequence_number,
                                 int64_t timestamp_ms,
                                 const char *manifest_list)
{
    firn_snapshot *s = firn_calloc(1, sizeof(*s));
    s->snapshot_id = snapshot_id;
    s->parent_snapshot_id = -1;
    s->sequence_number = sequence_number;
    s->timestamp_ms = timestamp_ms;
    s->manifest_list = firn_strdup(manifest_list);
    firn_props_init(&s->summary);
    s->schema_id = -1;
    s->first_row_id = -1;
    s->added_rows = -1;
    return s;
}

void firn_snapshot_free(firn_snapshot *s)
{
    if (!s)
        return;
    firn_free(s->manifest_list);
    firn_props_deinit(&s->summary);
    json_decref(s->extra);
    firn_free(s);
}

firn_snapshot *firn_snapshot_clone(const firn_snapshot *s)
{
    firn_snapshot *c = firn_memdup(s, sizeof(*s));
    c->manifest_list = firn_strdup(s->manifest_list);
    firn_props_copy(&c->summary, &s->summary);
    c->extra = s->extra ? json_deep_copy(s->extra) : NULL;
    return c;
}

int64_t firn_snapshot_id_new(void)
{
    uint8_t u[16];
    firn_uuid_v4(u);
    uint64_t hi = 0, lo = 0;
    for (int i = 0; i < 8; i++) {
        hi = hi << 8 | u[i];
        lo = lo << 8 | u[8 + i];
    }
    int64_t id = (int64_t)((hi ^ lo) & INT64_MAX);
    return id ? id : 1;
}

static const char *const SNAPSHOT_KEYS[] = {
    "sequence-number", "snapshot-id", "parent-snapshot-id", "timestamp-ms", "summary",
    "manifest-list",   "schema-id",   "first-row-id",       "added-rows",   NULL,
};

static bool is_snapshot_key(const char *k)
{
    for (size_t i = 0; SNAPSHOT_KEYS[i]; i++) {
        if (strcmp(k, SNAPSHOT_KEYS[i]) == 0)
            return true;
    }
    return false;
}

static firn_rc snapshot_summary_from_jv(const json_t *v, firn_snapshot *s, firn_err *err)
{
    const json_t *sum = json_object_get(v, "summary");
    if (!sum || json_is_null(sum))
        return FIRN_OK; /* v1 snapshots may lack one */
    const char *op;
    FIRN_TRY(firn__ice_get_str(sum, "operation", true, &op, err));
    firn_props_set(&s->summary, "operation", op);
    return firn__ice_props_from_jv(sum, &s->summary, err);
}

static firn_rc snapshot_fill(const json_t *v, firn_snapshot *s, firn_err *err)
{
    FIRN_TRY(firn__ice_get_i64(v, "parent-snapshot-id", false, -1, &s->parent_snapshot_id, err));
    FIRN_TRY(firn__ice_get_i32(v, "schema-id", false, -1, &s->schema_id, err));
    FIRN_TRY(firn__ice_get_i64(v, "first-row-id", false, -1, &s->first_row_id, err));
    FIRN_TRY(firn__ice_get_i64(v, "added-rows", false, -1, &s->added_rows, err));
    FIRN_TRY(snapshot_summary_from_jv(v, s, err));
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        if (is_snapshot_key(key))
            continue;
        if (!s->extra)
            s->extra = json_object();
        json_object_set(s->extra, key, val);
    }
    return FIRN_OK;
}

firn_rc firn__ice_snapshot_from_jv(const json_t *v, firn_snapshot **out, firn_err *err)
{
    int64_t id, seq, ts;
    const char *list;
    *out = NULL;
    FIRN_TRY(firn__ice_get_i64(v, "snapshot-id", true, 0, &id, err));
    FIRN_TRY(firn__ice_get_i64(v, "sequence-number", false, 0, &seq, err));
    FIRN_TRY(firn__ice_get_i64(v, "timestamp-ms", true, 0, &ts, err));
    FIRN_TRY(firn__ice_get_str(v, "manifest-list", false, &list, err));
    if (!list) {
        /* v1 "manifests" lists are not modelled: such snapshots keep them as extra members */
        if (!json_object_get(v, "manifests"))
            return firn_err_set(err, FIRN_ERR_PARSE, "snapshot %lld has no manifest list",
                                (long long)id);
        list = "";
    }
    firn_snapshot *s = firn_snapshot_new(id, seq, ts, list);
    firn_rc rc = snapshot_fill(v, s, err);
    if (rc) {
        firn_snapshot_free(s);
        return rc;
    }
    *out = s;
    return FIRN_OK;
}

json_t *firn__ice_snapshot_to_jv(const firn_snapshot *s)
{
    json_t *obj = json_object();
    json_object_set_new(obj, "sequence-number", json_integer(s->sequence_number));
    json_object_set_new(obj, "snapshot-id", json_integer(s->snapshot_id));
    if (s->parent_snapshot_id >= 0)
        json_object_set_new(obj, "parent-snapshot-id", json_integer(s->parent_snapshot_id));
    json_object_set_new(obj, "timestamp-ms", json_integer(s->timestamp_ms));
    if (s->summary.n > 0) {
        json_t *sum = json_object();
        const char *op = firn_props_get(&s->summary, "operation");
        if (op)
            json_object_set_new(sum, "operation", json_string(op));
        for (size_t i = 0; i < s->summary.n; i++)
            json_object_set_new(sum, s->summary.keys[i], json_string(s->summary.vals[i]));
        json_object_set_new(obj, "summary", sum);
    }
    if (s->manifest_list[0] != '\0')
        json_object_set_new(obj, "manifest-list", json_string(s->manifest_list));
    if (s->schema_id >= 0)
        json_object_set_new(obj, "schema-id", json_integer(s->schema_id));
    if (s->first_row_id >= 0)
        json_object_set_new(obj, "first-row-id", json_integer(s->first_row_id));
    if (s->added_rows >= 0)
        json_object_set_new(obj, "added-rows", json_integer(s->added_rows));
    if (s->extra)
        json_object_update_missing(obj, s->extra);
    return obj;
}

/* ------------------------------------------------------------------------------------------------
 * Refs
 * ----------------------------------------------------------------------------------------------*/

firn_rc
firn__ice_ref_from_jv(const char *name, const json_t *v, firn_snapshot_ref *out, firn_err *err)
{
    const char *type;
    memset(out, 0, sizeof(*out));
    FIRN_TRY(firn__ice_get_i64(v, "snapshot-id", true, 0, &out->snapshot_id, err));
    FIRN_TRY(firn__ice_get_str(v, "type", true, &type, err));
    if (strcmp(type, "tag") != 0 && strcmp(type, "branch") != 0)
        return firn_err_set(err, FIRN_ERR_PARSE, "ref \"%s\" has invalid type \"%s\"", name, type);
    out->is_tag = strcmp(type, "tag") == 0;
    FIRN_TRY(
        firn__ice_get_i64(v, "min-snapshots-to-keep", false, -1, &out->min_snapshots_to_keep, err));
    FIRN_TRY(
        firn__ice_get_i64(v, "max-snapshot-age-ms", false, -1, &out->max_snapshot_age_ms, err));
    FIRN_TRY(firn__ice_get_i64(v, "max-ref-age-ms", false, -1, &out->max_ref_age_ms, err));
    out->name = firn_strdup(name);
    return FIRN_OK;
}

json_t *firn__ice_ref_to_jv(const firn_snapshot_ref *r, bool with_ref_name)
{
    json_t *obj = json_object();
    if (with_ref_name)
        json_object_set_new(obj, "ref-name", json_string(r->name));
    json_object_set_new(obj, "snapshot-id", json_integer(r->snapshot_id));
    json_object_set_new(obj, "type", json_string(r->is_tag ? "tag" : "branch"));
    if (r->min_snapshots_to_keep >= 0)
        json_object_set_new(obj, "min-snapshots-to-keep", json_integer(r->min_snapshots_to_keep));
    if (r->max_snapshot_age_ms >= 0)
        json_object_set_new(obj, "max-snapshot-age-ms", json_integer(r->max_snapshot_age_ms));
    if (r->max_ref_age_ms >= 0)
        json_object_set_new(obj, "max-ref-age-ms", json_integer(r->max_ref_age_ms));
    return obj;
}

void firn__ice_ref_copy(firn_snapshot_ref *dst, const firn_snapshot_ref *src)
{
    *dst = *src;
    dst->name = src->name ? firn_strdup(src->name) : NULL;
}
