/* SPDX-License-Identifier: Apache-2.0 */
/* metadata.json parse/serialize: a file written by pyiceberg, a Java v1 file with -1 current
 * snapshot id, a v3 file with row lineage and unmodelled members, and the required v2 keys. */
#include "firn/iceberg.h"
#include "t.h"

#include <string.h>

static char *slurp(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/tests/data/iceberg/%s", FIRN_SOURCE_DIR, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        T_FAIL("cannot open %s", path);
    char *buf = firn_malloc(1 << 20);
    *len = fread(buf, 1, (1 << 20) - 1, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

static firn_table_metadata *load(const char *name)
{
    size_t len;
    char *text = slurp(name, &len);
    firn_err err = {0};
    firn_table_metadata *md = NULL;
    T_OK_ERR(firn_table_metadata_from_json(text, len, &md, &err), &err);
    firn_free(text);
    return md;
}

/* Serializes md, parses that, serializes again: the two texts must be equal. */
static firn_table_metadata *round_trip(const firn_table_metadata *md, firn_buf *text)
{
    firn_err err = {0};
    firn_buf again;
    firn_buf_init(&again, 1 << 24);
    T_OK_ERR(firn_table_metadata_to_json(md, text, &err), &err);
    firn_table_metadata *md2 = NULL;
    T_OK_ERR(firn_table_metadata_from_json((char *)text->data, text->len, &md2, &err), &err);
    T_OK_ERR(firn_table_metadata_to_json(md2, &again, &err), &err);
    T_EQ_STR((char *)text->data, (char *)again.data);
    firn_buf_deinit(&again);
    return md2;
}

T_TEST(pyiceberg_file)
{
    firn_table_metadata *md = load("pyiceberg_v2.metadata.json");
    T_EQ_INT(md->format_version, 2);
    T_EQ_STR(md->table_uuid, "8fb1fbec-b053-4e01-af1c-9eb93e4a0f4d");
    T_EQ_STR(md->location, "file:///tmp/pyi/wh/ns/t");
    T_EQ_INT(md->last_column_id, 21);
    T_EQ_INT(md->n_schemas, 2);
    T_EQ_INT(md->current_schema_id, 1);
    const firn_schema *s = firn_table_metadata_schema(md);
    T_EQ_STR(firn_schema_find_id(s, 21)->name, "extra");
    T_EQ_INT(firn_schema_find_id(s, 4)->precision, 12);
    T_EQ_INT(s->identifier_field_ids[0], 1);
    T_EQ_INT(md->specs[0]->fields[0].source_id, 3);
    T_EQ_INT(md->specs[0]->fields[0].transform.kind, FIRN_TRANSFORM_IDENTITY);
    T_EQ_INT(md->last_partition_id, 1000);
    T_EQ_INT(md->n_snapshots, 3);
    T_EQ_INT(md->current_snapshot_id, 6435680890278536686LL);
    const firn_snapshot *cur = firn_table_metadata_current_snapshot(md);
    T_EQ_INT(cur->parent_snapshot_id, 5040242925978805425LL);
    T_EQ_INT(cur->sequence_number, 3);
    T_EQ_INT(cur->schema_id, 1);
    T_EQ_STR(firn_props_get(&cur->summary, "operation"), "append");
    T_EQ_STR(firn_props_get(&cur->summary, "total-records"), "3");
    T_EQ_INT(md->last_sequence_number, 3);
    T_EQ_INT(firn_table_metadata_ref(md, "main")->snapshot_id, 6435680890278536686LL);
    T_EQ_INT(md->n_snapshot_log, 3);
    T_EQ_INT(md->n_metadata_log, 3);
    T_EQ_STR(firn_props_get(&md->properties, "write.metadata.previous-versions-max"), "3");

    firn_buf text;
    firn_buf_init(&text, 1 << 24);
    firn_table_metadata *md2 = round_trip(md, &text);
    const char *t = (const char *)text.data;
    /* Java member order starts like this */
    T_TRUE(strncmp(t, "{\"format-version\":2,\"table-uuid\":", 33) == 0);
    T_TRUE(strstr(t, "\"doc\":\"primary key\"") != NULL);
    T_TRUE(strstr(t, "\"statistics\":[]") != NULL);
    T_EQ_INT(md2->n_snapshots, 3);
    T_EQ_INT(md2->current_snapshot_id, md->current_snapshot_id);
    firn_buf_deinit(&text);
    firn_table_metadata_free(md2);
    firn_table_metadata_free(md);
}

T_TEST(java_v1_file)
{
    firn_table_metadata *md = load("v1_java.metadata.json");
    T_EQ_INT(md->format_version, 1);
    T_EQ_INT(md->current_snapshot_id, -1);
    T_TRUE(firn_table_metadata_current_snapshot(md) == NULL);
    T_EQ_INT(md->n_schemas, 1);
    T_EQ_INT(md->specs[0]->fields[0].field_id, 1000);
    T_EQ_INT(md->last_partition_id, 1000);
    T_EQ_INT(md->n_sort_orders, 1);
    T_EQ_INT(md->n_refs, 0);
    firn_buf text;
    firn_buf_init(&text, 1 << 24);
    firn_table_metadata *md2 = round_trip(md, &text);
    T_TRUE(strstr((char *)text.data, "\"current-snapshot-id\":-1") != NULL);
    T_TRUE(strstr((char *)text.data, "\"partition-spec\":[") != NULL);
    firn_buf_deinit(&text);
    firn_table_metadata_free(md2);
    firn_table_metadata_free(md);
}

T_TEST(v3_file_keeps_unmodelled_members)
{
    firn_table_metadata *md = load("v3_rowlineage.metadata.json");
    T_EQ_INT(md->format_version, 3);
    T_EQ_INT(md->next_row_id, 100);
    T_EQ_INT(md->snapshots[0]->first_row_id, 0);
    T_EQ_INT(md->snapshots[0]->added_rows, 100);
    T_EQ_INT(firn_schema_find_id(firn_table_metadata_schema(md), 2)->type,
             FIRN_TYPE_TIMESTAMPTZ_NS);
    firn_buf text;
    firn_buf_init(&text, 1 << 24);
    firn_table_metadata *md2 = round_trip(md, &text);
    const char *t = (const char *)text.data;
    T_TRUE(strstr(t, "\"next-row-id\":100") != NULL);
    T_TRUE(strstr(t, "\"encryption-keys\":[{\"key-id\":\"k1\"") != NULL);
    T_TRUE(strstr(t, "\"key-id\":\"k1\",") != NULL || strstr(t, "\"key-id\":\"k1\"}") != NULL);
    T_TRUE(strstr(t, "\"write-default\":\"2024-01-01T00:00:00.000000000+00:00\"") != NULL);
    firn_buf_deinit(&text);
    firn_table_metadata_free(md2);
    firn_table_metadata_free(md);
}

static firn_rc parse_text(const char *t, firn_err *err)
{
    firn_table_metadata *md = NULL;
    firn_rc rc = firn_table_metadata_from_json(t, strlen(t), &md, err);
    firn_table_metadata_free(md);
    return rc;
}

T_TEST(rejects_incomplete_v2)
{
    firn_err err = {0};
    static const char base[] =
        "{\"format-version\":2,\"table-uuid\":\"9c12d441-03fe-4693-9a96-a0705ddf69c1\","
        "\"location\":\"/t\",\"last-updated-ms\":1,\"last-sequence-number\":0,"
        "\"last-column-id\":1,\"current-schema-id\":0,\"schemas\":[{\"type\":\"struct\","
        "\"schema-id\":0,\"fields\":[{\"id\":1,\"name\":\"a\",\"required\":false,\"type\":"
        "\"int\"}]}],\"default-spec-id\":0,\"partition-specs\":[{\"spec-id\":0,\"fields\":[]}],"
        "\"last-partition-id\":999,\"default-sort-order-id\":0,\"sort-orders\":[{\"order-id\":0,"
        "\"fields\":[]}]%s}";
    char buf[2048];
    snprintf(buf, sizeof(buf), base, "");
    T_OK_ERR(parse_text(buf, &err), &err);
    snprintf(buf, sizeof(buf), base, ",\"current-snapshot-id\":5");
    T_EQ_INT(parse_text(buf, &err), FIRN_ERR_PARSE);
    T_TRUE(strstr(err.msg, "current snapshot 5") != NULL);
    /* drop "last-sequence-number" */
    snprintf(buf, sizeof(buf), base, "");
    char *p = strstr(buf, "\"last-sequence-number\":0,");
    memmove(p, p + 25, strlen(p + 25) + 1);
    T_EQ_INT(parse_text(buf, &err), FIRN_ERR_PARSE);
    T_TRUE(strstr(err.msg, "last-sequence-number") != NULL);
    snprintf(buf, sizeof(buf), base, "");
    p = strstr(buf, "\"format-version\":2");
    p[17] = '4';
    T_EQ_INT(parse_text(buf, &err), FIRN_ERR_UNSUPPORTED);
}

T_MAIN(T_CASE(pyiceberg_file),
       T_CASE(java_v1_file),
       T_CASE(v3_file_keeps_unmodelled_members),
       T_CASE(rejects_incomplete_v2))
