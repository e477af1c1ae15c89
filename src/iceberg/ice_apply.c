/* SPDX-License-Identifier: Apache-2.0 */
/* Applying a change set to table metadata the way a REST catalog server does (Java
 * UpdateRequirement.validate + TableMetadata.Builder, ICEBERG.md §G): requirements first
 * (FIRN_ERR_CONFLICT when one fails), then updates in order. */
#include "ice_meta_int.h"

#include <string.h>
#include <strings.h>

typedef struct apply_state {
    firn_table_metadata *md;
    int32_t last_added_schema;
    int32_t last_added_spec;
    int32_t last_added_order;
    int64_t *added;
    size_t n_added;
    int64_t now_ms;
    int64_t updated_ms;
} apply_state;

/* ------------------------------------------------------------------------------------------------
 * Requirements
 * ----------------------------------------------------------------------------------------------*/

static firn_rc
check_value(const firn_table_requirement *r, const firn_table_metadata *b, firn_err *err)
{
    int32_t actual;
    const char *what;
    switch (r->type) {
    case FIRN_REQ_ASSERT_LAST_ASSIGNED_FIELD_ID:
        actual = b->last_column_id;
        what = "last assigned field id";
        break;
    case FIRN_REQ_ASSERT_CURRENT_SCHEMA_ID:
        actual = b->current_schema_id;
        what = "current schema id";
        break;
    case FIRN_REQ_ASSERT_LAST_ASSIGNED_PARTITION_ID:
        actual = b->last_partition_id;
        what = "last assigned partition id";
        break;
    case FIRN_REQ_ASSERT_DEFAULT_SPEC_ID:
        actual = b->default_spec_id;
        what = "default partition spec id";
        break;
    default:
        actual = b->default_sort_order_id;
        what = "default sort order id";
        break;
    }
    if (actual != r->value)
        return firn_err_set(err, FIRN_ERR_CONFLICT,
                            "requirement failed: %s changed: expected %d, found %d", what, r->value,
                            actual);
    return FIRN_OK;
}

static firn_rc
check_ref(const firn_table_requirement *r, const firn_table_metadata *b, firn_err *err)
{
    const firn_snapshot_ref *ref = firn_table_metadata_ref(b, r->ref);
    if (r->snapshot_id < 0 && ref)
        return firn_err_set(err, FIRN_ERR_CONFLICT,
                            "requirement failed: ref \"%s\" was created concurrently", r->ref);
    if (r->snapshot_id >= 0 && !ref)
        return firn_err_set(err, FIRN_ERR_CONFLICT, "requirement failed: ref \"%s\" is missing",
                            r->ref);
    if (ref && ref->snapshot_id != r->snapshot_id)
        return firn_err_set(err, FIRN_ERR_CONFLICT,
                            "requirement failed: ref \"%s\" changed: expected snapshot %lld, "
                            "found %lld",
                            r->ref, (long long)r->snapshot_id, (long long)ref->snapshot_id);
    return FIRN_OK;
}

static firn_rc
check_requirement(const firn_table_requirement *r, const firn_table_metadata *b, firn_err *err)
{
    if (r->type == FIRN_REQ_ASSERT_CREATE)
        return b ? firn_err_set(err, FIRN_ERR_CONFLICT, "requirement failed: table already exists")
                 : FIRN_OK;
    if (!b)
        return firn_err_set(err, FIRN_ERR_CONFLICT,
                            "requirement failed: current table metadata is missing");
    switch (r->type) {
    case FIRN_REQ_ASSERT_TABLE_UUID:
        if (strcasecmp(r->uuid, b->table_uuid) != 0)
            return firn_err_set(err, FIRN_ERR_CONFLICT,
                                "requirement failed: table uuid does not match: expected %s, "
                                "found %s",
                                r->uuid, b->table_uuid);
        return FIRN_OK;
    case FIRN_REQ_ASSERT_REF_SNAPSHOT_ID:
        return check_ref(r, b, err);
    default:
        return check_value(r, b, err);
    }
}

/* ------------------------------------------------------------------------------------------------
 * Schema, spec and sort order updates
 * ----------------------------------------------------------------------------------------------*/

static firn_rc add_schema(apply_state *st, const firn_table_update *u, firn_err *err)
{
    firn_table_metadata *md = st->md;
    FIRN_TRY(firn_schema_validate(u->schema, err));
    int32_t hi = firn_schema_highest_id(u->schema);
    int32_t last = md->last_column_id;
    if (u->last_column_id > last)
        last = u->last_column_id;
    if (hi > last)
        last = hi;
    md->last_column_id = last;
    int32_t new_id = 0;
    for (size_t i = 0; i < md->n_schemas; i++) {
        if (firn_schema_same(md->schemas[i], u->schema)) {
            st->last_added_schema = md->schemas[i]->schema_id;
            return FIRN_OK;
        }
        if (md->schemas[i]->schema_id >= new_id)
            new_id = md->schemas[i]->schema_id + 1;
    }
    firn_schema *s = firn_schema_clone(u->schema);
    s->schema_id = new_id;
    md->schemas = firn_reallocarray(md->schemas, md->n_schemas + 1, sizeof(*md->schemas));
    md->schemas[md->n_schemas++] = s;
    st->last_added_schema = new_id;
    return FIRN_OK;
}

static firn_rc
resolve_id(int32_t id, int32_t last_added, const char *what, int32_t *out, firn_err *err)
{
    if (id == -1) {
        if (last_added < 0)
            return firn_err_set(err, FIRN_ERR_INVALID, "cannot set last added %s: none was added",
                                what);
        id = last_added;
    }
    *out = id;
    return FIRN_OK;
}

static firn_rc set_current_schema(apply_state *st, const firn_table_update *u, firn_err *err)
{
    int32_t id = 0;
    FIRN_TRY(resolve_id(u->id, st->last_added_schema, "schema", &id, err));
    if (!firn_table_metadata_schema_by_id(st->md, id))
        return firn_err_set(err, FIRN_ERR_INVALID, "cannot set current schema to unknown id %d",
                            id);
    st->md->current_schema_id = id;
    return FIRN_OK;
}

static firn_rc add_spec(apply_state *st, const firn_table_update *u, firn_err *err)
{
    firn_table_metadata *md = st->md;
    int32_t new_id = 0;
    for (size_t i = 0; i < md->n_specs; i++) {
        if (firn_partition_spec_same(md->specs[i], u->spec)) {
            st->last_added_spec = md->specs[i]->spec_id;
            return FIRN_OK;
        }
        if (md->specs[i]->spec_id >= new_id)
            new_id = md->specs[i]->spec_id + 1;
    }
    for (size_t i = 0; i < u->spec->n_fields; i++) {
        if (u->spec->fields[i].field_id > md->last_partition_id)
            md->last_partition_id = u->spec->fields[i].field_id;
        if (u->spec->fields[i].field_id < FIRN_PARTITION_FIELD_ID_START && md->format_version > 1)
            return firn_err_set(err, FIRN_ERR_INVALID, "invalid partition field id %d",
                                u->spec->fields[i].field_id);
    }
    firn_partition_spec *s = firn_partition_spec_clone(u->spec);
    s->spec_id = new_id;
    md->specs = firn_reallocarray(md->specs, md->n_specs + 1, sizeof(*md->specs));
    md->specs[md->n_specs++] = s;
    st->last_added_spec = new_id;
    return FIRN_OK;
}

static firn_rc set_default_spec(apply_state *st, const firn_table_update *u, firn_err *err)
{
    int32_t id = 0;
    FIRN_TRY(resolve_id(u->id, st->last_added_spec, "partition spec", &id, err));
    st->md->default_spec_id = id;
    if (!firn_table_metadata_spec(st->md))
        return firn_err_set(err, FIRN_ERR_INVALID, "cannot set default spec to unknown id %d", id);
    return FIRN_OK;
}

static firn_rc add_sort_order(apply_state *st, const firn_table_update *u)
{
    firn_table_metadata *md = st->md;
    int32_t new_id = u->sort_order->n_fields == 0 ? 0 : 1;
    for (size_t i = 0; i < md->n_sort_orders; i++) {
        if (firn__ice_sort_same(md->sort_orders[i], u->sort_order)) {
            st->last_added_order = md->sort_orders[i]->order_id;
            return FIRN_OK;
        }
        if (u->sort_order->n_fields > 0 && md->sort_orders[i]->order_id >= new_id)
            new_id = md->sort_orders[i]->order_id + 1;
    }
    firn_sort_order *o = firn_sort_order_clone(u->sort_order);
    o->order_id = new_id;
    md->sort_orders =
        firn_reallocarray(md->sort_orders, md->n_sort_orders + 1, sizeof(*md->sort_orders));
    md->sort_orders[md->n_sort_orders++] = o;
    st->last_added_order = new_id;
    return FIRN_OK;
}

static firn_rc set_default_sort_order(apply_state *st, const firn_table_update *u, firn_err *err)
{
    int32_t id = 0;
    FIRN_TRY(resolve_id(u->id, st->last_added_order, "sort order", &id, err));
    for (size_t i = 0; i < st->md->n_sort_orders; i++) {
        if (st->md->sort_orders[i]->order_id == id) {
            st->md->default_sort_order_id = id;
            return FIRN_OK;
        }
    }
    return firn_err_set(err, FIRN_ERR_INVALID, "cannot set default sort order to unknown id %d",
                        id);
}

/* ------------------------------------------------------------------------------------------------
 * Snapshots and refs
 * ----------------------------------------------------------------------------------------------*/

static firn_rc add_snapshot(apply_state *st, const firn_table_update *u, firn_err *err)
{
    firn_table_metadata *md = st->md;
    const firn_snapshot *s = u->snapshot;
    if (firn_table_metadata_snapshot(md, s->snapshot_id))
        return firn_err_set(err, FIRN_ERR_INVALID, "snapshot %lld already exists",
                            (long long)s->snapshot_id);
    if (md->format_version > 1 && s->sequence_number <= md->last_sequence_number &&
        s->parent_snapshot_id >= 0)
        return firn_err_set(err, FIRN_ERR_CONFLICT,
                            "cannot add snapshot with sequence number %lld older than last "
                            "sequence number %lld",
                            (long long)s->sequence_number, (long long)md->last_sequence_number);
    if (md->format_version > 2) {
        if (s->first_row_id < 0 || s->added_rows < 0)
            return firn_err_set(err, FIRN_ERR_INVALID,
                                "v3 snapshot %lld lacks first-row-id or added-rows",
                                (long long)s->snapshot_id);
        if (s->first_row_id < md->next_row_id)
            return firn_err_set(err, FIRN_ERR_CONFLICT,
                                "cannot add snapshot: first-row-id %lld is behind next-row-id %lld",
                                (long long)s->first_row_id, (long long)md->next_row_id);
        md->next_row_id = s->first_row_id + s->added_rows;
    }
    md->snapshots = firn_reallocarray(md->snapshots, md->n_snapshots + 1, sizeof(*md->snapshots));
    md->snapshots[md->n_snapshots++] = firn_snapshot_clone(s);
    if (s->sequence_number > md->last_sequence_number)
        md->last_sequence_number = s->sequence_number;
    st->added = firn_reallocarray(st->added, st->n_added + 1, sizeof(*st->added));
    st->added[st->n_added++] = s->snapshot_id;
    if (s->timestamp_ms > st->updated_ms)
        st->updated_ms = s->timestamp_ms;
    return FIRN_OK;
}

static bool was_added(const apply_state *st, int64_t id)
{
    for (size_t i = 0; i < st->n_added; i++) {
        if (st->added[i] == id)
            return true;
    }
    return false;
}

static void append_snapshot_log(firn_table_metadata *md, int64_t id, int64_t ts)
{
    md->snapshot_log =
        firn_reallocarray(md->snapshot_log, md->n_snapshot_log + 1, sizeof(*md->snapshot_log));
    md->snapshot_log[md->n_snapshot_log].snapshot_id = id;
    md->snapshot_log[md->n_snapshot_log].timestamp_ms = ts;
    md->n_snapshot_log++;
}

static firn_rc set_ref(apply_state *st, const firn_table_update *u, firn_err *err)
{
    firn_table_metadata *md = st->md;
    const firn_snapshot *s = firn_table_metadata_snapshot(md, u->ref.snapshot_id);
    if (!s)
        return firn_err_set(err, FIRN_ERR_INVALID, "cannot set ref \"%s\" to unknown snapshot %lld",
                            u->ref.name, (long long)u->ref.snapshot_id);
    if (strcmp(u->ref.name, "main") == 0 && u->ref.is_tag)
        return firn_err_set(err, FIRN_ERR_INVALID, "ref \"main\" must be a branch");
    firn_snapshot_ref *r = (firn_snapshot_ref *)firn_table_metadata_ref(md, u->ref.name);
    if (r && r->snapshot_id == u->ref.snapshot_id && r->is_tag == u->ref.is_tag)
        return FIRN_OK;
    if (!r) {
        md->refs = firn_reallocarray(md->refs, md->n_refs + 1, sizeof(*md->refs));
        r = &md->refs[md->n_refs++];
    } else {
        firn_free(r->name);
    }
    firn__ice_ref_copy(r, &u->ref);
    if (strcmp(u->ref.name, "main") == 0) {
        md->current_snapshot_id = s->snapshot_id;
        int64_t ts = was_added(st, s->snapshot_id) ? s->timestamp_ms : st->now_ms;
        append_snapshot_log(md, s->snapshot_id, ts);
    }
    return FIRN_OK;
}

static void remove_ref_at(firn_table_metadata *md, size_t i)
{
    if (strcmp(md->refs[i].name, "main") == 0)
        md->current_snapshot_id = -1;
    firn_free(md->refs[i].name);
    memmove(&md->refs[i], &md->refs[i + 1], (md->n_refs - i - 1) * sizeof(*md->refs));
    md->n_refs--;
}

static void remove_ref(apply_state *st, const firn_table_update *u)
{
    for (size_t i = 0; i < st->md->n_refs; i++) {
        if (strcmp(st->md->refs[i].name, u->ref.name) == 0) {
            remove_ref_at(st->md, i);
            return;
        }
    }
}

static bool in_ids(const int64_t *ids, size_t n, int64_t id)
{
    for (size_t i = 0; i < n; i++) {
        if (ids[i] == id)
            return true;
    }
    return false;
}

/* Drops the statistics and partition statistics entries of removed snapshots (Java
 * TableMetadata.Builder.removeSnapshots does the same). */
static void remove_statistics(firn_table_metadata *md, const firn_table_update *u)
{
    static const char *const members[] = {"statistics", "partition-statistics"};
    for (size_t m = 0; md->extra && m < 2; m++) {
        json_t *arr = json_object_get(md->extra, members[m]);
        if (!json_is_array(arr))
            continue;
        for (size_t i = json_array_size(arr); i-- > 0;) {
            json_t *id = json_object_get(json_array_get(arr, i), "snapshot-id");
            if (json_is_integer(id) &&
                in_ids(u->snapshot_ids, u->n_snapshot_ids, (int64_t)json_integer_value(id)))
                json_array_remove(arr, i);
        }
    }
}

static void remove_snapshots(apply_state *st, const firn_table_update *u)
{
    remove_statistics(st->md, u);
    firn_table_metadata *md = st->md;
    size_t keep = 0;
    for (size_t i = 0; i < md->n_snapshots; i++) {
        if (in_ids(u->snapshot_ids, u->n_snapshot_ids, md->snapshots[i]->snapshot_id))
            firn_snapshot_free(md->snapshots[i]);
        else
            md->snapshots[keep++] = md->snapshots[i];
    }
    md->n_snapshots = keep;
    for (size_t i = md->n_refs; i-- > 0;) {
        if (in_ids(u->snapshot_ids, u->n_snapshot_ids, md->refs[i].snapshot_id))
            remove_ref_at(md, i);
    }
    keep = 0;
    for (size_t i = 0; i < md->n_snapshot_log; i++) {
        if (!in_ids(u->snapshot_ids, u->n_snapshot_ids, md->snapshot_log[i].snapshot_id))
            md->snapshot_log[keep++] = md->snapshot_log[i];
    }
    md->n_snapshot_log = keep;
}

/* ------------------------------------------------------------------------------------------------
 * Driver
 * ----------------------------------------------------------------------------------------------*/

static firn_rc assign_uuid(apply_state *st, const firn_table_update *u, bool fresh, firn_err *err)
{
    if (!firn__ice_uuid_valid(u->uuid))
        return firn_err_set(err, FIRN_ERR_INVALID, "invalid table uuid \"%s\"", u->uuid);
    if (!fresh && strcasecmp(u->uuid, st->md->table_uuid) != 0)
        return firn_err_set(err, FIRN_ERR_INVALID, "cannot reassign the uuid of table %s",
                            st->md->table_uuid);
    memcpy(st->md->table_uuid, u->uuid, 37);
    return FIRN_OK;
}

static firn_rc upgrade(apply_state *st, const firn_table_update *u, firn_err *err)
{
    if (u->format_version > 3)
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "unsupported table format version %d",
                            u->format_version);
    if (u->format_version < st->md->format_version)
        return firn_err_set(err, FIRN_ERR_INVALID, "cannot downgrade format version %d to %d",
                            st->md->format_version, u->format_version);
    st->md->format_version = u->format_version;
    if (u->format_version >= 3 && st->md->next_row_id < 0)
        st->md->next_row_id = 0;
    return FIRN_OK;
}

static firn_rc apply_one(apply_state *st, const firn_table_update *u, bool fresh, firn_err *err)
{
    switch (u->action) {
    case FIRN_UPD_ASSIGN_UUID:
        return assign_uuid(st, u, fresh, err);
    case FIRN_UPD_UPGRADE_FORMAT_VERSION:
        return upgrade(st, u, err);
    case FIRN_UPD_ADD_SCHEMA:
        return add_schema(st, u, err);
    case FIRN_UPD_SET_CURRENT_SCHEMA:
        return set_current_schema(st, u, err);
    case FIRN_UPD_ADD_SPEC:
        return add_spec(st, u, err);
    case FIRN_UPD_SET_DEFAULT_SPEC:
        return set_default_spec(st, u, err);
    case FIRN_UPD_ADD_SORT_ORDER:
        return add_sort_order(st, u);
    case FIRN_UPD_SET_DEFAULT_SORT_ORDER:
        return set_default_sort_order(st, u, err);
    case FIRN_UPD_ADD_SNAPSHOT:
        return add_snapshot(st, u, err);
    case FIRN_UPD_SET_SNAPSHOT_REF:
        return set_ref(st, u, err);
    case FIRN_UPD_REMOVE_SNAPSHOTS:
        remove_snapshots(st, u);
        return FIRN_OK;
    case FIRN_UPD_REMOVE_SNAPSHOT_REF:
        remove_ref(st, u);
        return FIRN_OK;
    case FIRN_UPD_SET_LOCATION:
        firn_free(st->md->location);
        st->md->location = firn_strdup(u->location);
        return FIRN_OK;
    case FIRN_UPD_SET_PROPERTIES:
        for (size_t i = 0; i < u->props.n; i++)
            firn_props_set(&st->md->properties, u->props.keys[i], u->props.vals[i]);
        return FIRN_OK;
    case FIRN_UPD_REMOVE_PROPERTIES:
        for (size_t i = 0; i < u->n_removals; i++)
            firn_props_remove(&st->md->properties, u->removals[i]);
        return FIRN_OK;
    }
    return firn_err_set(err, FIRN_ERR_INVALID, "unknown update action %d", (int)u->action);
}

/* Starting point of a table created by updates alone (assert-create). */
static firn_table_metadata *empty_metadata(void)
{
    firn_table_metadata *md = firn_calloc(1, sizeof(*md));
    md->format_version = 2;
    uint8_t u[16];
    firn_uuid_v4(u);
    firn_uuid_format(u, md->table_uuid);
    md->location = firn_strdup("");
    md->current_schema_id = -1;
    md->default_spec_id = -1;
    md->last_partition_id = FIRN_PARTITION_FIELD_ID_START - 1;
    md->default_sort_order_id = -1;
    md->current_snapshot_id = -1;
    md->next_row_id = -1;
    firn_props_init(&md->properties);
    return md;
}

static void
log_previous(firn_table_metadata *md, const firn_table_metadata *base, const char *base_location)
{
    md->metadata_log =
        firn_reallocarray(md->metadata_log, md->n_metadata_log + 1, sizeof(*md->metadata_log));
    md->metadata_log[md->n_metadata_log].metadata_file = firn_strdup(base_location);
    md->metadata_log[md->n_metadata_log].timestamp_ms = base->last_updated_ms;
    md->n_metadata_log++;
    int64_t max = FIRN_METADATA_PREVIOUS_VERSIONS_MAX;
    const char *p = firn_props_get(&md->properties, "write.metadata.previous-versions-max");
    if (p && (firn_parse_i64(p, strlen(p), &max, NULL) || max < 1))
        max = FIRN_METADATA_PREVIOUS_VERSIONS_MAX;
    if (md->n_metadata_log > (size_t)max) {
        size_t drop = md->n_metadata_log - (size_t)max;
        for (size_t i = 0; i < drop; i++)
            firn_free(md->metadata_log[i].metadata_file);
        memmove(md->metadata_log, md->metadata_log + drop, (size_t)max * sizeof(*md->metadata_log));
        md->n_metadata_log = (size_t)max;
    }
}

static firn_rc check_result(const firn_table_metadata *md, firn_err *err)
{
    if (!firn_table_metadata_schema(md))
        return firn_err_set(err, FIRN_ERR_INVALID, "table metadata has no current schema");
    if (!firn_table_metadata_spec(md))
        return firn_err_set(err, FIRN_ERR_INVALID, "table metadata has no default partition spec");
    if (md->location[0] == '\0')
        return firn_err_set(err, FIRN_ERR_INVALID, "table metadata has no location");
    for (size_t i = 0; i < md->n_sort_orders; i++) {
        if (md->sort_orders[i]->order_id == md->default_sort_order_id)
            return FIRN_OK;
    }
    return firn_err_set(err, FIRN_ERR_INVALID, "table metadata has no default sort order");
}

firn_rc firn_table_metadata_apply(const firn_table_metadata *base,
                                  const char *base_location,
                                  const firn_table_changes *c,
                                  int64_t now_ms,
                                  firn_table_metadata **out,
                                  firn_err *err)
{
    *out = NULL;
    for (size_t i = 0; i < c->n_requirements; i++)
        FIRN_TRY(check_requirement(&c->requirements[i], base, err));
    apply_state st = {base ? firn_table_metadata_clone(base) : empty_metadata(),
                      -1,
                      -1,
                      -1,
                      NULL,
                      0,
                      now_ms,
                      now_ms};
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; !rc && i < c->n_updates; i++)
        rc = apply_one(&st, &c->updates[i], base == NULL, err);
    if (!rc)
        rc = check_result(st.md, err);
    firn_free(st.added);
    if (rc) {
        firn_table_metadata_free(st.md);
        return rc;
    }
    if (base && base->last_updated_ms > st.updated_ms)
        st.updated_ms = base->last_updated_ms;
    st.md->last_updated_ms = st.updated_ms;
    if (base && base_location)
        log_previous(st.md, base, base_location);
    *out = st.md;
    return FIRN_OK;
}
