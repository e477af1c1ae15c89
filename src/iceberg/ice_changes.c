/* SPDX-License-Identifier: Apache-2.0 */
/* Metadata change sets: REST requirements and updates (rest-catalog-open-api.yaml
 * TableRequirement / TableUpdate, ICEBERG.md §G): builders and the CommitTableRequest JSON. */
#include "ice_meta_int.h"

#include <string.h>

static const struct {
    firn_requirement_type type;
    const char *name;
    const char *member; /* the single-valued asserts' member */
} REQS[] = {
    {FIRN_REQ_ASSERT_CREATE, "assert-create", NULL},
    {FIRN_REQ_ASSERT_TABLE_UUID, "assert-table-uuid", NULL},
    {FIRN_REQ_ASSERT_REF_SNAPSHOT_ID, "assert-ref-snapshot-id", NULL},
    {FIRN_REQ_ASSERT_LAST_ASSIGNED_FIELD_ID, "assert-last-assigned-field-id",
     "last-assigned-field-id"},
    {FIRN_REQ_ASSERT_CURRENT_SCHEMA_ID, "assert-current-schema-id", "current-schema-id"},
    {FIRN_REQ_ASSERT_LAST_ASSIGNED_PARTITION_ID, "assert-last-assigned-partition-id",
     "last-assigned-partition-id"},
    {FIRN_REQ_ASSERT_DEFAULT_SPEC_ID, "assert-default-spec-id", "default-spec-id"},
    {FIRN_REQ_ASSERT_DEFAULT_SORT_ORDER_ID, "assert-default-sort-order-id",
     "default-sort-order-id"},
};
#define N_REQS (sizeof(REQS) / sizeof(REQS[0]))

static const struct {
    firn_update_action action;
    const char *name;
} UPDS[] = {
    {FIRN_UPD_ASSIGN_UUID, "assign-uuid"},
    {FIRN_UPD_UPGRADE_FORMAT_VERSION, "upgrade-format-version"},
    {FIRN_UPD_ADD_SCHEMA, "add-schema"},
    {FIRN_UPD_SET_CURRENT_SCHEMA, "set-current-schema"},
    {FIRN_UPD_ADD_SPEC, "add-spec"},
    {FIRN_UPD_SET_DEFAULT_SPEC, "set-default-spec"},
    {FIRN_UPD_ADD_SORT_ORDER, "add-sort-order"},
    {FIRN_UPD_SET_DEFAULT_SORT_ORDER, "set-default-sort-order"},
    {FIRN_UPD_ADD_SNAPSHOT, "add-snapshot"},
    {FIRN_UPD_SET_SNAPSHOT_REF, "set-snapshot-ref"},
    {FIRN_UPD_REMOVE_SNAPSHOTS, "remove-snapshots"},
    {FIRN_UPD_REMOVE_SNAPSHOT_REF, "remove-snapshot-ref"},
    {FIRN_UPD_SET_LOCATION, "set-location"},
    {FIRN_UPD_SET_PROPERTIES, "set-properties"},
    {FIRN_UPD_REMOVE_PROPERTIES, "remove-properties"},
};
#define N_UPDS (sizeof(UPDS) / sizeof(UPDS[0]))

/* ------------------------------------------------------------------------------------------------
 * Lifetime and builders
 * ----------------------------------------------------------------------------------------------*/

void firn_table_changes_init(firn_table_changes *c)
{
    memset(c, 0, sizeof(*c));
}

static void update_deinit(firn_table_update *u)
{
    firn_schema_free(u->schema);
    firn_partition_spec_free(u->spec);
    firn_sort_order_free(u->sort_order);
    firn_snapshot_free(u->snapshot);
    firn_free(u->ref.name);
    firn_free(u->snapshot_ids);
    firn_free(u->location);
    firn_props_deinit(&u->props);
    for (size_t i = 0; i < u->n_removals; i++)
        firn_free(u->removals[i]);
    firn_free(u->removals);
}

void firn_table_changes_deinit(firn_table_changes *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_requirements; i++)
        firn_free(c->requirements[i].ref);
    firn_free(c->requirements);
    for (size_t i = 0; i < c->n_updates; i++)
        update_deinit(&c->updates[i]);
    firn_free(c->updates);
    memset(c, 0, sizeof(*c));
}

static firn_table_requirement *new_req(firn_table_changes *c, firn_requirement_type type)
{
    c->requirements =
        firn_reallocarray(c->requirements, c->n_requirements + 1, sizeof(*c->requirements));
    firn_table_requirement *r = &c->requirements[c->n_requirements++];
    memset(r, 0, sizeof(*r));
    r->type = type;
    r->snapshot_id = -1;
    return r;
}

static firn_table_update *new_upd(firn_table_changes *c, firn_update_action action)
{
    c->updates = firn_reallocarray(c->updates, c->n_updates + 1, sizeof(*c->updates));
    firn_table_update *u = &c->updates[c->n_updates++];
    memset(u, 0, sizeof(*u));
    u->action = action;
    u->last_column_id = -1;
    u->id = -1;
    u->ref.min_snapshots_to_keep = u->ref.max_snapshot_age_ms = u->ref.max_ref_age_ms = -1;
    firn_props_init(&u->props);
    return u;
}

static void copy_uuid(char dst[37], const char *uuid)
{
    size_t n = strlen(uuid);
    n = n > 36 ? 36 : n;
    memcpy(dst, uuid, n);
    dst[n] = '\0';
}

void firn_table_changes_require_create(firn_table_changes *c)
{
    new_req(c, FIRN_REQ_ASSERT_CREATE);
}

void firn_table_changes_require_uuid(firn_table_changes *c, const char *uuid)
{
    copy_uuid(new_req(c, FIRN_REQ_ASSERT_TABLE_UUID)->uuid, uuid);
}

void firn_table_changes_require_ref(firn_table_changes *c, const char *ref, int64_t snapshot_id)
{
    firn_table_requirement *r = new_req(c, FIRN_REQ_ASSERT_REF_SNAPSHOT_ID);
    r->ref = firn_strdup(ref);
    r->snapshot_id = snapshot_id < 0 ? -1 : snapshot_id;
}

void firn_table_changes_require(firn_table_changes *c, firn_requirement_type type, int32_t value)
{
    new_req(c, type)->value = value;
}

void firn_table_changes_assign_uuid(firn_table_changes *c, const char *uuid)
{
    copy_uuid(new_upd(c, FIRN_UPD_ASSIGN_UUID)->uuid, uuid);
}

void firn_table_changes_upgrade_format_version(firn_table_changes *c, int format_version)
{
    new_upd(c, FIRN_UPD_UPGRADE_FORMAT_VERSION)->format_version = format_version;
}

void firn_table_changes_add_schema(firn_table_changes *c,
                                   const firn_schema *schema,
                                   int32_t last_column_id)
{
    firn_table_update *u = new_upd(c, FIRN_UPD_ADD_SCHEMA);
    u->schema = firn_schema_clone(schema);
    u->last_column_id = last_column_id;
}

void firn_table_changes_set_current_schema(firn_table_changes *c, int32_t schema_id)
{
    new_upd(c, FIRN_UPD_SET_CURRENT_SCHEMA)->id = schema_id;
}

void firn_table_changes_add_spec(firn_table_changes *c, const firn_partition_spec *spec)
{
    new_upd(c, FIRN_UPD_ADD_SPEC)->spec = firn_partition_spec_clone(spec);
}

void firn_table_changes_set_default_spec(firn_table_changes *c, int32_t spec_id)
{
    new_upd(c, FIRN_UPD_SET_DEFAULT_SPEC)->id = spec_id;
}

void firn_table_changes_add_sort_order(firn_table_changes *c, const firn_sort_order *order)
{
    new_upd(c, FIRN_UPD_ADD_SORT_ORDER)->sort_order = firn_sort_order_clone(order);
}

void firn_table_changes_set_default_sort_order(firn_table_changes *c, int32_t order_id)
{
    new_upd(c, FIRN_UPD_SET_DEFAULT_SORT_ORDER)->id = order_id;
}

void firn_table_changes_add_snapshot(firn_table_changes *c, const firn_snapshot *snapshot)
{
    new_upd(c, FIRN_UPD_ADD_SNAPSHOT)->snapshot = firn_snapshot_clone(snapshot);
}

void firn_table_changes_set_ref(firn_table_changes *c,
                                const char *name,
                                int64_t snapshot_id,
                                bool is_tag)
{
    firn_table_update *u = new_upd(c, FIRN_UPD_SET_SNAPSHOT_REF);
    u->ref.name = firn_strdup(name);
    u->ref.snapshot_id = snapshot_id;
    u->ref.is_tag = is_tag;
}

void firn_table_changes_remove_snapshots(firn_table_changes *c, const int64_t *ids, size_t n)
{
    firn_table_update *u = new_upd(c, FIRN_UPD_REMOVE_SNAPSHOTS);
    u->snapshot_ids = firn_calloc(n + 1, sizeof(int64_t));
    if (n > 0)
        memcpy(u->snapshot_ids, ids, n * sizeof(int64_t));
    u->n_snapshot_ids = n;
}

void firn_table_changes_remove_ref(firn_table_changes *c, const char *name)
{
    new_upd(c, FIRN_UPD_REMOVE_SNAPSHOT_REF)->ref.name = firn_strdup(name);
}

void firn_table_changes_set_location(firn_table_changes *c, const char *location)
{
    new_upd(c, FIRN_UPD_SET_LOCATION)->location = firn_strdup(location);
}

void firn_table_changes_set_property(firn_table_changes *c, const char *key, const char *val)
{
    firn_table_update *u = c->n_updates ? &c->updates[c->n_updates - 1] : NULL;
    if (!u || u->action != FIRN_UPD_SET_PROPERTIES)
        u = new_upd(c, FIRN_UPD_SET_PROPERTIES);
    firn_props_set(&u->props, key, val);
}

void firn_table_changes_remove_property(firn_table_changes *c, const char *key)
{
    firn_table_update *u = c->n_updates ? &c->updates[c->n_updates - 1] : NULL;
    if (!u || u->action != FIRN_UPD_REMOVE_PROPERTIES)
        u = new_upd(c, FIRN_UPD_REMOVE_PROPERTIES);
    u->removals = firn_reallocarray(u->removals, u->n_removals + 1, sizeof(*u->removals));
    u->removals[u->n_removals++] = firn_strdup(key);
}

/* ------------------------------------------------------------------------------------------------
 * Encoding
 * ----------------------------------------------------------------------------------------------*/

static json_t *req_jv(const firn_table_requirement *r)
{
    json_t *obj = json_object();
    for (size_t i = 0; i < N_REQS; i++) {
        if (REQS[i].type != r->type)
            continue;
        json_object_set_new(obj, "type", json_string(REQS[i].name));
        if (REQS[i].member)
            json_object_set_new(obj, REQS[i].member, json_integer(r->value));
    }
    if (r->type == FIRN_REQ_ASSERT_TABLE_UUID)
        json_object_set_new(obj, "uuid", json_string(r->uuid));
    if (r->type == FIRN_REQ_ASSERT_REF_SNAPSHOT_ID) {
        json_object_set_new(obj, "ref", json_string(r->ref));
        json_object_set_new(obj, "snapshot-id",
                            r->snapshot_id < 0 ? json_null() : json_integer(r->snapshot_id));
    }
    return obj;
}

static json_t *string_array(char *const *s, size_t n)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_string(s[i]));
    return arr;
}

static void upd_members(json_t *obj, const firn_table_update *u)
{
    switch (u->action) {
    case FIRN_UPD_ASSIGN_UUID:
        json_object_set_new(obj, "uuid", json_string(u->uuid));
        break;
    case FIRN_UPD_UPGRADE_FORMAT_VERSION:
        json_object_set_new(obj, "format-version", json_integer(u->format_version));
        break;
    case FIRN_UPD_ADD_SCHEMA:
        json_object_set_new(obj, "schema", firn__ice_schema_to_jv(u->schema));
        if (u->last_column_id >= 0)
            json_object_set_new(obj, "last-column-id", json_integer(u->last_column_id));
        break;
    case FIRN_UPD_SET_CURRENT_SCHEMA:
        json_object_set_new(obj, "schema-id", json_integer(u->id));
        break;
    case FIRN_UPD_ADD_SPEC:
        json_object_set_new(obj, "spec", firn__ice_spec_to_jv(u->spec));
        break;
    case FIRN_UPD_SET_DEFAULT_SPEC:
        json_object_set_new(obj, "spec-id", json_integer(u->id));
        break;
    case FIRN_UPD_ADD_SORT_ORDER:
        json_object_set_new(obj, "sort-order", firn__ice_sort_to_jv(u->sort_order));
        break;
    case FIRN_UPD_SET_DEFAULT_SORT_ORDER:
        json_object_set_new(obj, "sort-order-id", json_integer(u->id));
        break;
    case FIRN_UPD_ADD_SNAPSHOT:
        json_object_set_new(obj, "snapshot", firn__ice_snapshot_to_jv(u->snapshot));
        break;
    case FIRN_UPD_SET_SNAPSHOT_REF: {
        json_t *ref = firn__ice_ref_to_jv(&u->ref, true);
        json_object_update(obj, ref);
        json_decref(ref);
        break;
    }
    case FIRN_UPD_REMOVE_SNAPSHOTS: {
        json_t *ids = json_array();
        for (size_t i = 0; i < u->n_snapshot_ids; i++)
            json_array_append_new(ids, json_integer(u->snapshot_ids[i]));
        json_object_set_new(obj, "snapshot-ids", ids);
        break;
    }
    case FIRN_UPD_REMOVE_SNAPSHOT_REF:
        json_object_set_new(obj, "ref-name", json_string(u->ref.name));
        break;
    case FIRN_UPD_SET_LOCATION:
        json_object_set_new(obj, "location", json_string(u->location));
        break;
    case FIRN_UPD_SET_PROPERTIES:
        json_object_set_new(obj, "updates", firn__ice_props_to_jv(&u->props));
        break;
    case FIRN_UPD_REMOVE_PROPERTIES:
        json_object_set_new(obj, "removals", string_array(u->removals, u->n_removals));
        break;
    }
}

static json_t *upd_jv(const firn_table_update *u)
{
    json_t *obj = json_object();
    for (size_t i = 0; i < N_UPDS; i++) {
        if (UPDS[i].action == u->action)
            json_object_set_new(obj, "action", json_string(UPDS[i].name));
    }
    upd_members(obj, u);
    return obj;
}

firn_rc firn_table_changes_to_json(const firn_table_changes *c, firn_buf *out, firn_err *err)
{
    json_t *obj = json_object();
    json_t *reqs = json_array();
    for (size_t i = 0; i < c->n_requirements; i++)
        json_array_append_new(reqs, req_jv(&c->requirements[i]));
    json_t *upds = json_array();
    for (size_t i = 0; i < c->n_updates; i++)
        json_array_append_new(upds, upd_jv(&c->updates[i]));
    json_object_set_new(obj, "requirements", reqs);
    json_object_set_new(obj, "updates", upds);
    firn_rc rc = firn__ice_json_dump(obj, out, err);
    json_decref(obj);
    return rc;
}

/* ------------------------------------------------------------------------------------------------
 * Decoding
 * ----------------------------------------------------------------------------------------------*/

static firn_rc req_from_jv(const json_t *v, firn_table_changes *c, firn_err *err)
{
    const char *type;
    FIRN_TRY(firn__ice_get_str(v, "type", true, &type, err));
    size_t i = 0;
    while (i < N_REQS && strcmp(REQS[i].name, type) != 0)
        i++;
    if (i == N_REQS)
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "unknown requirement type \"%s\"", type);
    firn_table_requirement *r = new_req(c, REQS[i].type);
    if (REQS[i].member)
        return firn__ice_get_i32(v, REQS[i].member, true, 0, &r->value, err);
    if (r->type == FIRN_REQ_ASSERT_TABLE_UUID) {
        const char *uuid;
        FIRN_TRY(firn__ice_get_str(v, "uuid", true, &uuid, err));
        copy_uuid(r->uuid, uuid);
    } else if (r->type == FIRN_REQ_ASSERT_REF_SNAPSHOT_ID) {
        const char *ref;
        FIRN_TRY(firn__ice_get_str(v, "ref", true, &ref, err));
        r->ref = firn_strdup(ref);
        FIRN_TRY(firn__ice_get_i64(v, "snapshot-id", false, -1, &r->snapshot_id, err));
    }
    return FIRN_OK;
}

static firn_rc string_list(const json_t *v, const char *key, firn_table_update *u, firn_err *err)
{
    const json_t *arr;
    FIRN_TRY(firn__ice_get_array(v, key, true, &arr, err));
    u->removals = firn_calloc(json_array_size(arr) + 1, sizeof(*u->removals));
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *s = json_array_get(arr, i);
        if (!json_is_string(s))
            return firn_err_set(err, FIRN_ERR_PARSE, "member \"%s\" holds a non-string", key);
        u->removals[u->n_removals++] = firn_strdup(json_string_value(s));
    }
    return FIRN_OK;
}

static firn_rc id_list(const json_t *v, firn_table_update *u, firn_err *err)
{
    const json_t *arr;
    FIRN_TRY(firn__ice_get_array(v, "snapshot-ids", true, &arr, err));
    u->snapshot_ids = firn_calloc(json_array_size(arr) + 1, sizeof(int64_t));
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *s = json_array_get(arr, i);
        if (!json_is_integer(s))
            return firn_err_set(err, FIRN_ERR_PARSE, "snapshot-ids holds a non-integer");
        u->snapshot_ids[u->n_snapshot_ids++] = (int64_t)json_integer_value(s);
    }
    return FIRN_OK;
}

static firn_rc object_member(const json_t *v, const char *key, const json_t **out, firn_err *err)
{
    *out = json_object_get(v, key);
    if (!*out || !json_is_object(*out))
        return firn_err_set(err, FIRN_ERR_PARSE, "missing object member \"%s\"", key);
    return FIRN_OK;
}

static firn_rc upd_members_from_jv(const json_t *v, firn_table_update *u, firn_err *err)
{
    const json_t *o;
    const char *s;
    switch (u->action) {
    case FIRN_UPD_ASSIGN_UUID:
        FIRN_TRY(firn__ice_get_str(v, "uuid", true, &s, err));
        copy_uuid(u->uuid, s);
        return FIRN_OK;
    case FIRN_UPD_UPGRADE_FORMAT_VERSION:
        return firn__ice_get_i32(v, "format-version", true, 0, &u->format_version, err);
    case FIRN_UPD_ADD_SCHEMA:
        FIRN_TRY(object_member(v, "schema", &o, err));
        FIRN_TRY(firn__ice_schema_from_jv(o, &u->schema, err));
        return firn__ice_get_i32(v, "last-column-id", false, -1, &u->last_column_id, err);
    case FIRN_UPD_SET_CURRENT_SCHEMA:
        return firn__ice_get_i32(v, "schema-id", true, 0, &u->id, err);
    case FIRN_UPD_ADD_SPEC:
        FIRN_TRY(object_member(v, "spec", &o, err));
        return firn__ice_spec_from_jv(o, &u->spec, err);
    case FIRN_UPD_SET_DEFAULT_SPEC:
        return firn__ice_get_i32(v, "spec-id", true, 0, &u->id, err);
    case FIRN_UPD_ADD_SORT_ORDER:
        FIRN_TRY(object_member(v, "sort-order", &o, err));
        return firn__ice_sort_from_jv(o, &u->sort_order, err);
    case FIRN_UPD_SET_DEFAULT_SORT_ORDER:
        return firn__ice_get_i32(v, "sort-order-id", true, 0, &u->id, err);
    case FIRN_UPD_ADD_SNAPSHOT:
        FIRN_TRY(object_member(v, "snapshot", &o, err));
        return firn__ice_snapshot_from_jv(o, &u->snapshot, err);
    case FIRN_UPD_SET_SNAPSHOT_REF:
        FIRN_TRY(firn__ice_get_str(v, "ref-name", true, &s, err));
        return firn__ice_ref_from_jv(s, v, &u->ref, err);
    case FIRN_UPD_REMOVE_SNAPSHOTS:
        return id_list(v, u, err);
    case FIRN_UPD_REMOVE_SNAPSHOT_REF:
        FIRN_TRY(firn__ice_get_str(v, "ref-name", true, &s, err));
        u->ref.name = firn_strdup(s);
        return FIRN_OK;
    case FIRN_UPD_SET_LOCATION:
        FIRN_TRY(firn__ice_get_str(v, "location", true, &s, err));
        u->location = firn_strdup(s);
        return FIRN_OK;
    case FIRN_UPD_SET_PROPERTIES:
        FIRN_TRY(object_member(v, "updates", &o, err));
        return firn__ice_props_from_jv(o, &u->props, err);
    case FIRN_UPD_REMOVE_PROPERTIES:
        return string_list(v, "removals", u, err);
    }
    return FIRN_OK;
}

static firn_rc upd_from_jv(const json_t *v, firn_table_changes *c, firn_err *err)
{
    const char *action;
    FIRN_TRY(firn__ice_get_str(v, "action", true, &action, err));
    size_t i = 0;
    while (i < N_UPDS && strcmp(UPDS[i].name, action) != 0)
        i++;
    if (i == N_UPDS)
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "unknown update action \"%s\"", action);
    return upd_members_from_jv(v, new_upd(c, UPDS[i].action), err);
}

firn_rc
firn_table_changes_from_json(const char *json, size_t len, firn_table_changes *c, firn_err *err)
{
    json_t *v;
    FIRN_TRY(firn__ice_json_load(json, len, &v, err));
    const json_t *reqs = NULL, *upds = NULL;
    firn_rc rc = firn__ice_get_array(v, "requirements", false, &reqs, err);
    if (!rc)
        rc = firn__ice_get_array(v, "updates", false, &upds, err);
    for (size_t i = 0; !rc && reqs && i < json_array_size(reqs); i++)
        rc = req_from_jv(json_array_get(reqs, i), c, err);
    for (size_t i = 0; !rc && upds && i < json_array_size(upds); i++)
        rc = upd_from_jv(json_array_get(upds, i), c, err);
    json_decref(v);
    return rc;
}
