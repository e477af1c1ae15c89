/* SPDX-License-Identifier: Apache-2.0 */
/* Change sets: JSON encoding of requirements/updates (the REST bodies of ICEBERG.md §I),
 * applying them (schema ids, snapshots, refs, logs, properties) and requirement conflicts. */
#include "firn/iceberg.h"
#include "t.h"

#include <string.h>

static firn_table_metadata *new_table(void)
{
    firn_field *root = firn_field_new(0, "", FIRN_TYPE_STRUCT, true);
    firn_field_add(root, firn_field_new(1, "order_id", FIRN_TYPE_LONG, true));
    firn_field_add(root, firn_field_new(2, "customer", FIRN_TYPE_STRING, false));
    firn_schema *s = firn_schema_new(0, root);
    int32_t ident = 1;
    firn_schema_set_identifier_ids(s, &ident, 1);
    firn_table_create opts = {.schema = s, .location = "/w/sales/orders"};
    firn_table_metadata *md = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_table_metadata_new(&opts, &md, &err), &err);
    firn_schema_free(s);
    return md;
}

static firn_snapshot *snap(int64_t id, int64_t parent, int64_t seq)
{
    firn_snapshot *s = firn_snapshot_new(id, seq, 1716000000000 + seq, "/w/m/snap.avro");
    s->parent_snapshot_id = parent;
    s->schema_id = 0;
    firn_props_set(&s->summary, "operation", "append");
    firn_props_set(&s->summary, "added-records", "10");
    return s;
}

/* Appends snapshot id on main of md the way a writer does; returns the new metadata. */
static firn_rc append(const firn_table_metadata *md,
                      int64_t id,
                      int64_t parent,
                      int64_t seq,
                      firn_table_metadata **out,
                      firn_err *err)
{
    firn_table_changes c;
    firn_table_changes_init(&c);
    firn_table_changes_require_uuid(&c, md->table_uuid);
    firn_table_changes_require_ref(&c, "main", parent);
    firn_snapshot *s = snap(id, parent, seq);
    firn_table_changes_add_snapshot(&c, s);
    firn_table_changes_set_ref(&c, "main", id, false);
    firn_rc rc = firn_table_metadata_apply(md, "/w/sales/orders/metadata/x.json", &c, 1716000001000,
                                           out, err);
    firn_snapshot_free(s);
    firn_table_changes_deinit(&c);
    return rc;
}

T_TEST(append_snapshots_and_conflicts)
{
    firn_err err = {0};
    firn_table_metadata *md0 = new_table(), *md1 = NULL, *md2 = NULL, *bad = NULL;
    T_OK_ERR(append(md0, 111, -1, 1, &md1, &err), &err);
    T_EQ_INT(md1->current_snapshot_id, 111);
    T_EQ_INT(md1->last_sequence_number, 1);
    T_EQ_INT(md1->n_snapshot_log, 1);
    T_EQ_INT(md1->snapshot_log[0].timestamp_ms, 1716000000001);
    T_EQ_INT(md1->n_metadata_log, 1);
    T_EQ_INT(md1->metadata_log[0].timestamp_ms, md0->last_updated_ms);
    T_OK_ERR(append(md1, 222, 111, 2, &md2, &err), &err);
    T_EQ_INT(md2->current_snapshot_id, 222);
    T_EQ_INT(firn_table_metadata_ref(md2, "main")->snapshot_id, 222);
    T_EQ_INT(md2->n_snapshots, 2);
    /* a writer that still sees snapshot 111 as main loses */
    T_EQ_INT(append(md2, 333, 111, 2, &bad, &err), FIRN_ERR_CONFLICT);
    T_TRUE(strstr(err.msg, "ref \"main\" changed") != NULL);
    /* a writer that thinks main does not exist loses */
    T_EQ_INT(append(md2, 333, -1, 1, &bad, &err), FIRN_ERR_CONFLICT);
    /* stale sequence number with a parent */
    T_EQ_INT(append(md2, 333, 222, 2, &bad, &err), FIRN_ERR_CONFLICT);
    T_TRUE(strstr(err.msg, "sequence number") != NULL);
    T_TRUE(bad == NULL);
    /* wrong uuid */
    firn_table_changes c;
    firn_table_changes_init(&c);
    firn_table_changes_require_uuid(&c, "00000000-0000-4000-8000-000000000000");
    T_EQ_INT(firn_table_metadata_apply(md2, NULL, &c, 1, &bad, &err), FIRN_ERR_CONFLICT);
    firn_table_changes_deinit(&c);
    /* assert-create against an existing table */
    firn_table_changes_init(&c);
    firn_table_changes_require_create(&c);
    T_EQ_INT(firn_table_metadata_apply(md2, NULL, &c, 1, &bad, &err), FIRN_ERR_CONFLICT);
    firn_table_changes_deinit(&c);
    firn_table_metadata_free(md0);
    firn_table_metadata_free(md1);
    firn_table_metadata_free(md2);
}

T_TEST(schema_updates_and_requirements)
{
    firn_err err = {0};
    firn_table_metadata *md0 = new_table(), *md1 = NULL, *md2 = NULL, *bad = NULL;
    const firn_schema *cur = firn_table_metadata_schema(md0);
    int32_t last = md0->last_column_id;
    firn_field *status = firn_field_new(0, "status", FIRN_TYPE_STRING, false);
    firn_schema *evolved = NULL;
    T_OK_ERR(firn_schema_add_column(cur, status, &last, &evolved, &err), &err);
    T_EQ_INT(last, 3);
    firn_table_changes c;
    firn_table_changes_init(&c);
    firn_table_changes_require_uuid(&c, md0->table_uuid);
    firn_table_changes_require(&c, FIRN_REQ_ASSERT_CURRENT_SCHEMA_ID, 0);
    firn_table_changes_require(&c, FIRN_REQ_ASSERT_LAST_ASSIGNED_FIELD_ID, 2);
    firn_table_changes_add_schema(&c, evolved, last);
    firn_table_changes_set_current_schema(&c, -1);
    T_OK_ERR(firn_table_metadata_apply(md0, NULL, &c, 5, &md1, &err), &err);
    T_EQ_INT(md1->n_schemas, 2);
    T_EQ_INT(md1->current_schema_id, 1);
    T_EQ_INT(md1->last_column_id, 3);
    T_EQ_INT(firn_schema_find_name(firn_table_metadata_schema(md1), "status")->id, 3);
    /* the same change set again conflicts on the asserted ids */
    T_EQ_INT(firn_table_metadata_apply(md1, NULL, &c, 6, &bad, &err), FIRN_ERR_CONFLICT);
    T_TRUE(strstr(err.msg, "current schema id") != NULL);

    /* JSON body as REST sends it; parse it back and apply: same result */
    firn_buf body;
    firn_buf_init(&body, 1 << 20);
    T_OK_ERR(firn_table_changes_to_json(&c, &body, &err), &err);
    const char *b = (const char *)body.data;
    T_TRUE(strstr(b, "{\"type\":\"assert-current-schema-id\",\"current-schema-id\":0}") != NULL);
    T_TRUE(strstr(b, "{\"type\":\"assert-last-assigned-field-id\",\"last-assigned-field-id\":2}") !=
           NULL);
    T_TRUE(strstr(b, "\"action\":\"add-schema\"") != NULL);
    T_TRUE(strstr(b, "\"last-column-id\":3") != NULL);
    T_TRUE(strstr(b, "{\"action\":\"set-current-schema\",\"schema-id\":-1}") != NULL);
    firn_table_changes c2;
    firn_table_changes_init(&c2);
    T_OK_ERR(firn_table_changes_from_json(b, body.len, &c2, &err), &err);
    T_OK_ERR(firn_table_metadata_apply(md0, NULL, &c2, 5, &md2, &err), &err);
    T_TRUE(firn_schema_same(firn_table_metadata_schema(md1), firn_table_metadata_schema(md2)));
    firn_buf again;
    firn_buf_init(&again, 1 << 20);
    T_OK_ERR(firn_table_changes_to_json(&c2, &again, &err), &err);
    T_EQ_STR((char *)again.data, b);
    firn_buf_deinit(&again);
    firn_buf_deinit(&body);
    firn_table_changes_deinit(&c2);
    firn_table_changes_deinit(&c);
    firn_table_metadata_free(md2);

    /* adding an identical schema reuses its id */
    firn_table_changes_init(&c);
    firn_table_changes_add_schema(&c, evolved, -1);
    firn_table_changes_set_current_schema(&c, -1);
    T_OK_ERR(firn_table_metadata_apply(md1, NULL, &c, 7, &md2, &err), &err);
    T_EQ_INT(md2->n_schemas, 2);
    T_EQ_INT(md2->current_schema_id, 1);
    firn_table_changes_deinit(&c);
    firn_table_metadata_free(md2);

    /* unknown schema id */
    firn_table_changes_init(&c);
    firn_table_changes_set_current_schema(&c, 42);
    T_EQ_INT(firn_table_metadata_apply(md1, NULL, &c, 7, &bad, &err), FIRN_ERR_INVALID);
    firn_table_changes_deinit(&c);

    firn_field_free(status);
    firn_schema_free(evolved);
    firn_table_metadata_free(md0);
    firn_table_metadata_free(md1);
}

T_TEST(properties_and_metadata_log_trim)
{
    firn_err err = {0};
    firn_table_metadata *md = new_table();
    firn_table_changes c;
    firn_table_changes_init(&c);
    firn_table_changes_set_property(&c, "write.metadata.previous-versions-max", "2");
    firn_table_changes_set_property(&c, "owner", "etl");
    firn_table_metadata *next = NULL;
    T_OK_ERR(firn_table_metadata_apply(md, "/m/0.json", &c, 10, &next, &err), &err);
    firn_table_changes_deinit(&c);
    firn_table_metadata_free(md);
    md = next;
    for (int i = 1; i <= 4; i++) {
        char loc[32];
        snprintf(loc, sizeof(loc), "/m/%d.json", i);
        firn_table_changes_init(&c);
        firn_table_changes_remove_property(&c, "owner");
        T_OK_ERR(firn_table_metadata_apply(md, loc, &c, 10 + i, &next, &err), &err);
        firn_table_changes_deinit(&c);
        firn_table_metadata_free(md);
        md = next;
    }
    T_TRUE(firn_props_get(&md->properties, "owner") == NULL);
    T_EQ_INT(md->n_metadata_log, 2);
    T_EQ_STR(md->metadata_log[0].metadata_file, "/m/3.json");
    T_EQ_STR(md->metadata_log[1].metadata_file, "/m/4.json");
    firn_table_metadata_free(md);
}

T_TEST(create_through_updates)
{
    /* a REST staged create: assert-create and every initial update */
    firn_err err = {0};
    firn_table_metadata *ref = new_table(), *md = NULL;
    firn_table_changes c;
    firn_table_changes_init(&c);
    firn_table_changes_require_create(&c);
    firn_table_changes_assign_uuid(&c, ref->table_uuid);
    firn_table_changes_upgrade_format_version(&c, 2);
    firn_table_changes_add_schema(&c, ref->schemas[0], ref->last_column_id);
    firn_table_changes_set_current_schema(&c, -1);
    firn_table_changes_add_spec(&c, ref->specs[0]);
    firn_table_changes_set_default_spec(&c, -1);
    firn_table_changes_add_sort_order(&c, ref->sort_orders[0]);
    firn_table_changes_set_default_sort_order(&c, -1);
    firn_table_changes_set_location(&c, ref->location);
    firn_table_changes_set_property(&c, "a", "b");
    T_OK_ERR(firn_table_metadata_apply(NULL, NULL, &c, 99, &md, &err), &err);
    T_EQ_STR(md->table_uuid, ref->table_uuid);
    T_EQ_INT(md->last_column_id, 2);
    T_EQ_INT(md->last_partition_id, 999);
    T_EQ_STR(md->location, "/w/sales/orders");
    T_TRUE(firn_schema_same(md->schemas[0], ref->schemas[0]));
    firn_buf t;
    firn_buf_init(&t, 1 << 20);
    T_OK_ERR(firn_table_metadata_to_json(md, &t, &err), &err);
    firn_table_metadata *back = NULL;
    T_OK_ERR(firn_table_metadata_from_json((char *)t.data, t.len, &back, &err), &err);
    firn_buf_deinit(&t);
    firn_table_metadata_free(back);
    firn_table_changes_deinit(&c);
    firn_table_metadata_free(md);
    firn_table_metadata_free(ref);
}

T_MAIN(T_CASE(append_snapshots_and_conflicts),
       T_CASE(schema_updates_and_requirements),
       T_CASE(properties_and_metadata_log_trim),
       T_CASE(create_through_updates))
