/* SPDX-License-Identifier: Apache-2.0 */
/* Schema JSON <-> firn_field tree: every primitive, nested list/map/struct ids, required flags,
 * identifier fields, docs kept, validation errors, fresh-id order of new tables. */
#include "firn/iceberg.h"
#include "t.h"

#include <string.h>

static const char ALL_TYPES[] =
    "{\"type\":\"struct\",\"schema-id\":3,\"identifier-field-ids\":[1],\"fields\":["
    "{\"id\":1,\"name\":\"id\",\"required\":true,\"type\":\"long\",\"doc\":\"key\"},"
    "{\"id\":2,\"name\":\"b\",\"required\":false,\"type\":\"boolean\"},"
    "{\"id\":3,\"name\":\"i\",\"required\":false,\"type\":\"int\"},"
    "{\"id\":4,\"name\":\"f\",\"required\":false,\"type\":\"float\"},"
    "{\"id\":5,\"name\":\"d\",\"required\":false,\"type\":\"double\"},"
    "{\"id\":6,\"name\":\"dec\",\"required\":false,\"type\":\"decimal(38, 10)\"},"
    "{\"id\":7,\"name\":\"dt\",\"required\":false,\"type\":\"date\"},"
    "{\"id\":8,\"name\":\"tm\",\"required\":false,\"type\":\"time\"},"
    "{\"id\":9,\"name\":\"ts\",\"required\":false,\"type\":\"timestamp\"},"
    "{\"id\":10,\"name\":\"tstz\",\"required\":false,\"type\":\"timestamptz\"},"
    "{\"id\":11,\"name\":\"tsn\",\"required\":false,\"type\":\"timestamp_ns\"},"
    "{\"id\":12,\"name\":\"tstzn\",\"required\":false,\"type\":\"timestamptz_ns\"},"
    "{\"id\":13,\"name\":\"s\",\"required\":false,\"type\":\"string\"},"
    "{\"id\":14,\"name\":\"u\",\"required\":false,\"type\":\"uuid\"},"
    "{\"id\":15,\"name\":\"fx\",\"required\":false,\"type\":\"fixed[16]\"},"
    "{\"id\":16,\"name\":\"bin\",\"required\":false,\"type\":\"binary\"},"
    "{\"id\":17,\"name\":\"l\",\"required\":false,\"type\":{\"type\":\"list\",\"element-id\":18,"
    "\"element\":\"string\",\"element-required\":false}},"
    "{\"id\":19,\"name\":\"m\",\"required\":true,\"type\":{\"type\":\"map\",\"key-id\":20,"
    "\"key\":\"string\",\"value-id\":21,\"value\":{\"type\":\"struct\",\"fields\":["
    "{\"id\":22,\"name\":\"x\",\"required\":true,\"type\":\"decimal(9,2)\"}]},"
    "\"value-required\":true}}]}";

T_TEST(schema_all_types)
{
    firn_err err = {0};
    firn_schema *s = NULL;
    T_OK_ERR(firn_schema_from_json(ALL_TYPES, strlen(ALL_TYPES), &s, &err), &err);
    T_EQ_INT(s->schema_id, 3);
    T_EQ_INT(s->root->n_children, 18);
    T_EQ_INT(s->n_identifier_field_ids, 1);
    T_EQ_INT(s->identifier_field_ids[0], 1);
    const firn_field *dec = firn_schema_find_id(s, 6);
    T_EQ_INT(dec->type, FIRN_TYPE_DECIMAL);
    T_EQ_INT(dec->precision, 38);
    T_EQ_INT(dec->scale, 10);
    T_EQ_INT(firn_schema_find_id(s, 15)->length, 16);
    T_EQ_INT(firn_schema_find_id(s, 12)->type, FIRN_TYPE_TIMESTAMPTZ_NS);
    const firn_field *l = firn_schema_find_name(s, "l");
    T_EQ_INT(l->type, FIRN_TYPE_LIST);
    T_EQ_INT(l->children[0]->id, 18);
    T_FALSE(l->children[0]->required);
    const firn_field *m = firn_schema_find_id(s, 19);
    T_TRUE(m->required);
    T_EQ_INT(m->children[0]->id, 20);
    T_EQ_INT(m->children[1]->id, 21);
    T_EQ_INT(m->children[1]->type, FIRN_TYPE_STRUCT);
    T_EQ_INT(firn_schema_find_id(s, 22)->precision, 9);
    T_EQ_INT(firn_schema_highest_id(s), 22);

    /* serialize, parse again: same schema, same text */
    firn_buf b1, b2;
    firn_buf_init(&b1, 1 << 20);
    firn_buf_init(&b2, 1 << 20);
    T_OK_ERR(firn_schema_to_json(s, &b1, &err), &err);
    T_TRUE(strstr((char *)b1.data, "\"doc\":\"key\"") != NULL);
    T_TRUE(strstr((char *)b1.data, "\"decimal(38, 10)\"") != NULL);
    firn_schema *s2 = NULL;
    T_OK_ERR(firn_schema_from_json((char *)b1.data, b1.len, &s2, &err), &err);
    T_TRUE(firn_schema_same(s, s2));
    T_OK_ERR(firn_schema_to_json(s2, &b2, &err), &err);
    T_EQ_STR((char *)b1.data, (char *)b2.data);
    firn_buf_deinit(&b1);
    firn_buf_deinit(&b2);
    firn_schema_free(s);
    firn_schema_free(s2);
}

static firn_rc parse_str(const char *json, firn_err *err)
{
    firn_schema *s = NULL;
    firn_rc rc = firn_schema_from_json(json, strlen(json), &s, err);
    firn_schema_free(s);
    return rc;
}

T_TEST(schema_rejects_bad_input)
{
    firn_err err = {0};
    T_EQ_INT(parse_str("{\"type\":\"struct\",\"fields\":[{\"id\":1,\"name\":\"a\",\"required\":"
                       "true,\"type\":\"long\"},{\"id\":1,\"name\":\"b\",\"required\":true,"
                       "\"type\":\"int\"}]}",
                       &err),
             FIRN_ERR_SCHEMA);
    T_TRUE(strstr(err.msg, "field id 1") != NULL);
    T_EQ_INT(parse_str("{\"type\":\"struct\",\"identifier-field-ids\":[1],\"fields\":[{\"id\":1,"
                       "\"name\":\"a\",\"required\":false,\"type\":\"long\"}]}",
                       &err),
             FIRN_ERR_SCHEMA);
    T_EQ_INT(parse_str("{\"type\":\"struct\",\"identifier-field-ids\":[1],\"fields\":[{\"id\":1,"
                       "\"name\":\"a\",\"required\":true,\"type\":\"double\"}]}",
                       &err),
             FIRN_ERR_SCHEMA);
    T_EQ_INT(parse_str("{\"type\":\"struct\",\"fields\":[{\"id\":1,\"name\":\"a\",\"required\":"
                       "true,\"type\":\"variant\"}]}",
                       &err),
             FIRN_ERR_UNSUPPORTED);
    T_EQ_INT(parse_str("{\"type\":\"struct\",\"fields\":[{\"id\":1,\"name\":\"a\",\"required\":"
                       "true,\"type\":\"decimal(39,2)\"}]}",
                       &err),
             FIRN_ERR_UNSUPPORTED);
    T_EQ_INT(parse_str("{\"type\":\"struct\",\"fields\":[{\"id\":1,\"name\":\"a\",\"required\":"
                       "true,\"type\":\"decimal(9,2\"}]}",
                       &err),
             FIRN_ERR_PARSE);
    T_EQ_INT(parse_str("{\"type\":\"struct\",\"fields\":[{\"id\":1,\"name\":\"a\",\"type\":"
                       "\"int\"}]}",
                       &err),
             FIRN_ERR_PARSE);
    T_TRUE(strstr(err.msg, "required") != NULL);
    T_EQ_INT(parse_str("[1,2", &err), FIRN_ERR_PARSE);
}

T_TEST(new_table_fresh_ids_like_pyiceberg)
{
    /* pyiceberg/Java assign a struct's own fields first, then nested ids depth-first. */
    firn_err err = {0};
    firn_field *root = firn_field_new(0, "", FIRN_TYPE_STRUCT, true);
    firn_field_add(root, firn_field_new(10, "id", FIRN_TYPE_LONG, true));
    firn_field *l = firn_field_new(20, "l", FIRN_TYPE_LIST, false);
    firn_field_add(l, firn_field_new(21, "element", FIRN_TYPE_STRING, false));
    firn_field_add(root, l);
    firn_field *m = firn_field_new(30, "m", FIRN_TYPE_MAP, false);
    firn_field_add(m, firn_field_new(31, "key", FIRN_TYPE_STRING, true));
    firn_field_add(m, firn_field_new_decimal(32, "value", 10, 2, true));
    firn_field_add(root, m);
    firn_field_add(root, firn_field_new(40, "ts", FIRN_TYPE_TIMESTAMPTZ, false));
    firn_schema *s = firn_schema_new(7, root);
    int32_t ident = 10;
    firn_schema_set_identifier_ids(s, &ident, 1);
    firn_partition_spec *spec = firn_partition_spec_new(0);
    firn_partition_spec_add(spec, 40, 5, "ts_day", (firn_transform){FIRN_TRANSFORM_DAY, 0});
    firn_props props;
    firn_props_init(&props);
    firn_props_set(&props, "format-version", "2");
    firn_props_set(&props, "owner", "me");
    firn_table_create opts = {
        .schema = s, .spec = spec, .location = "file:///w/ns/t/", .properties = &props};
    firn_table_metadata *md = NULL;
    T_OK_ERR(firn_table_metadata_new(&opts, &md, &err), &err);
    const firn_schema *fs = firn_table_metadata_schema(md);
    T_EQ_INT(fs->schema_id, 0);
    T_EQ_INT(fs->root->children[0]->id, 1);
    T_EQ_INT(fs->root->children[1]->id, 2);
    T_EQ_INT(fs->root->children[2]->id, 3);
    T_EQ_INT(fs->root->children[3]->id, 4);
    T_EQ_INT(fs->root->children[1]->children[0]->id, 5);
    T_EQ_INT(fs->root->children[2]->children[0]->id, 6);
    T_EQ_INT(fs->root->children[2]->children[1]->id, 7);
    T_EQ_INT(fs->identifier_field_ids[0], 1);
    T_EQ_INT(md->last_column_id, 7);
    T_EQ_INT(md->specs[0]->fields[0].source_id, 4);
    T_EQ_INT(md->specs[0]->fields[0].field_id, 1000);
    T_EQ_INT(md->last_partition_id, 1000);
    T_EQ_STR(md->location, "file:///w/ns/t");
    T_EQ_INT(md->format_version, 2);
    T_TRUE(firn_props_get(&md->properties, "format-version") == NULL);
    T_EQ_STR(firn_props_get(&md->properties, "owner"), "me");
    T_EQ_STR(firn_props_get(&md->properties, "write.parquet.compression-codec"), "zstd");
    T_EQ_INT(md->current_snapshot_id, -1);
    T_EQ_INT(strlen(md->table_uuid), 36);
    firn_table_metadata_free(md);

    /* unpartitioned: last-partition-id 999 */
    opts.spec = NULL;
    opts.properties = NULL;
    T_OK_ERR(firn_table_metadata_new(&opts, &md, &err), &err);
    T_EQ_INT(md->last_partition_id, 999);
    T_EQ_INT(md->specs[0]->n_fields, 0);
    T_EQ_INT(md->sort_orders[0]->order_id, 0);
    firn_table_metadata_free(md);

    /* a spec naming an unknown column */
    firn_partition_spec *bad = firn_partition_spec_new(0);
    firn_partition_spec_add(bad, 99, 1000, "x", (firn_transform){FIRN_TRANSFORM_IDENTITY, 0});
    opts.spec = bad;
    T_EQ_INT(firn_table_metadata_new(&opts, &md, &err), FIRN_ERR_INVALID);
    firn_partition_spec_free(bad);
    firn_partition_spec_free(spec);
    firn_props_deinit(&props);
    firn_schema_free(s);
}

T_MAIN(T_CASE(schema_all_types),
       T_CASE(schema_rejects_bad_input),
       T_CASE(new_table_fresh_ids_like_pyiceberg))
