/* SPDX-License-Identifier: Apache-2.0 */
/* Avro write schemas of v2 and v3 manifests and manifest lists, field for field as Iceberg Java's
 * V2Metadata/V3Metadata and AvroSchemaUtil produce them: record names manifest_entry, r2, r102,
 * k<key>_v<value>, manifest_file, r508; optional fields as ["null", T] with default null. */
#include "ice_manifest_int.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Named Avro types already written in this schema: later uses refer to them by name. */
typedef struct named_set {
    char names[64][40];
    size_t n;
} named_set;

static bool named_seen(named_set *ns, const char *name)
{
    for (size_t i = 0; i < ns->n; i++) {
        if (strcmp(ns->names[i], name) == 0)
            return true;
    }
    if (ns->n < 64)
        snprintf(ns->names[ns->n++], sizeof ns->names[0], "%s", name);
    return false;
}

static json_t *opt(json_t *t)
{
    return json_pack("[s, o]", "null", t);
}

/* A record field in Java's key order: name, type, default (optional only), field-id. */
static json_t *field(const char *name, json_t *type, int32_t id, bool optional)
{
    json_t *f = json_object();
    json_object_set_new(f, "name", json_string(name));
    json_object_set_new(f, "type", optional ? opt(type) : type);
    if (optional)
        json_object_set_new(f, "default", json_null());
    json_object_set_new(f, "field-id", json_integer(id));
    return f;
}

static json_t *record(const char *name, json_t *fields)
{
    return json_pack("{s:s, s:s, s:o}", "type", "record", "name", name, "fields", fields);
}

/* An int-keyed map: array of k<key>_v<value> records with logicalType map. */
static json_t *int_map(int32_t key_id, int32_t value_id, const char *value_type)
{
    char name[32];
    snprintf(name, sizeof name, "k%d_v%d", key_id, value_id);
    json_t *fields = json_array();
    json_array_append_new(fields, field("key", json_string("int"), key_id, false));
    json_array_append_new(fields, field("value", json_string(value_type), value_id, false));
    return json_pack("{s:s, s:o, s:s}", "type", "array", "items", record(name, fields),
                     "logicalType", "map");
}

static json_t *list_of(const char *item_type, int32_t element_id)
{
    return json_pack("{s:s, s:s, s:i}", "type", "array", "items", item_type, "element-id",
                     (int)element_id);
}

static int decimal_required_bytes(int32_t precision)
{
    int n = 1;
    while (pow(2.0, 8.0 * n - 1) < pow(10.0, precision))
        n++;
    return n;
}

static json_t *logical(const char *base, const char *logical_type)
{
    return json_pack("{s:s, s:s}", "type", base, "logicalType", logical_type);
}

static json_t *fixed_type(named_set *ns, const char *name, int size)
{
    if (named_seen(ns, name))
        return json_string(name);
    return json_pack("{s:s, s:s, s:i}", "type", "fixed", "name", name, "size", size);
}

/* The Avro type Iceberg Java uses for a primitive type (TypeToSchema). */
static json_t *avro_type_of(firn_ptype t, named_set *ns)
{
    char name[40];
    json_t *j;
    switch (t.type) {
    case FIRN_TYPE_BOOLEAN:
        return json_string("boolean");
    case FIRN_TYPE_INT:
        return json_string("int");
    case FIRN_TYPE_LONG:
        return json_string("long");
    case FIRN_TYPE_FLOAT:
        return json_string("float");
    case FIRN_TYPE_DOUBLE:
        return json_string("double");
    case FIRN_TYPE_DATE:
        return logical("int", "date");
    case FIRN_TYPE_TIME:
        return logical("long", "time-micros");
    case FIRN_TYPE_TIMESTAMP:
    case FIRN_TYPE_TIMESTAMPTZ:
    case FIRN_TYPE_TIMESTAMP_NS:
    case FIRN_TYPE_TIMESTAMPTZ_NS: {
        bool ns_unit = t.type == FIRN_TYPE_TIMESTAMP_NS || t.type == FIRN_TYPE_TIMESTAMPTZ_NS;
        j = logical("long", ns_unit ? "timestamp-nanos" : "timestamp-micros");
        bool utc = t.type == FIRN_TYPE_TIMESTAMPTZ || t.type == FIRN_TYPE_TIMESTAMPTZ_NS;
        json_object_set_new(j, "adjust-to-utc", json_boolean(utc));
        return j;
    }
    case FIRN_TYPE_STRING:
        return json_string("string");
    case FIRN_TYPE_BINARY:
        return json_string("bytes");
    case FIRN_TYPE_UUID:
        j = fixed_type(ns, "uuid_fixed", 16);
        if (json_is_object(j))
            json_object_set_new(j, "logicalType", json_string("uuid"));
        return j;
    case FIRN_TYPE_FIXED:
        snprintf(name, sizeof name, "fixed_%d", t.length);
        return fixed_type(ns, name, t.length);
    case FIRN_TYPE_DECIMAL:
        snprintf(name, sizeof name, "decimal_%d_%d", t.precision, t.scale);
        j = fixed_type(ns, name, decimal_required_bytes(t.precision));
        if (json_is_object(j)) {
            json_object_set_new(j, "logicalType", json_string("decimal"));
            json_object_set_new(j, "precision", json_integer(t.precision));
            json_object_set_new(j, "scale", json_integer(t.scale));
        }
        return j;
    default:
        return json_string("null");
    }
}

/* Java's AvroSchemaUtil.sanitize: invalid characters become _x<HEX>, a leading digit _<d>. */
static void sanitize(const char *name, char *out, size_t cap, bool *changed)
{
    size_t o = 0;
    *changed = false;
    for (size_t i = 0; name[i] && o + 12 < cap; i++) {
        unsigned char c = (unsigned char)name[i];
        bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        bool digit = c >= '0' && c <= '9';
        if (letter || (digit && i > 0)) {
            out[o++] = (char)c;
        } else if (digit) {
            o += (size_t)snprintf(out + o, cap - o, "_%c", c);
            *changed = true;
        } else {
            o += (size_t)snprintf(out + o, cap - o, "_x%X", c);
            *changed = true;
        }
    }
    out[o] = 0;
}

static json_t *partition_record(const firn_partition_spec *spec, const firn_ptype *types)
{
    named_set ns = {0};
    json_t *fields = json_array();
    for (size_t i = 0; i < spec->n_fields; i++) {
        const firn_partition_field *pf = &spec->fields[i];
        char name[256];
        bool changed = false;
        sanitize(pf->name, name, sizeof name, &changed);
        json_t *f = field(name, avro_type_of(types[i], &ns), pf->field_id, true);
        if (changed)
            json_object_set_new(f, "iceberg-field-name", json_string(pf->name));
        json_array_append_new(fields, f);
    }
    return record("r102", fields);
}

static int dump_cb(const char *p, size_t len, void *data)
{
    return firn_buf_append(data, p, len) ? -1 : 0;
}

static firn_rc dump(json_t *j, firn_buf *out)
{
    int rc = json_dump_callback(j, dump_cb, out, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(j);
    return rc ? FIRN_ERR_TOO_LARGE : FIRN_OK;
}

firn_rc firn__manifest_entry_schema(const firn_partition_spec *spec,
                                    const firn_ptype *types,
                                    int format_version,
                                    firn_buf *out)
{
    json_t *df = json_array();
    json_array_append_new(df, field("content", json_string("int"), 134, false));
    json_array_append_new(df, field("file_path", json_string("string"), 100, false));
    json_array_append_new(df, field("file_format", json_string("string"), 101, false));
    json_array_append_new(df, field("partition", partition_record(spec, types), 102, false));
    json_array_append_new(df, field("record_count", json_string("long"), 103, false));
    json_array_append_new(df, field("file_size_in_bytes", json_string("long"), 104, false));
    json_array_append_new(df, field("column_sizes", int_map(117, 118, "long"), 108, true));
    json_array_append_new(df, field("value_counts", int_map(119, 120, "long"), 109, true));
    json_array_append_new(df, field("null_value_counts", int_map(121, 122, "long"), 110, true));
    json_array_append_new(df, field("nan_value_counts", int_map(138, 139, "long"), 137, true));
    json_array_append_new(df, field("lower_bounds", int_map(126, 127, "bytes"), 125, true));
    json_array_append_new(df, field("upper_bounds", int_map(129, 130, "bytes"), 128, true));
    json_array_append_new(df, field("key_metadata", json_string("bytes"), 131, true));
    json_array_append_new(df, field("split_offsets", list_of("long", 133), 132, true));
    json_array_append_new(df, field("equality_ids", list_of("int", 136), 135, true));
    json_array_append_new(df, field("sort_order_id", json_string("int"), 140, true));
    if (format_version >= 3)
        json_array_append_new(df, field("first_row_id", json_string("long"), 142, true));
    json_array_append_new(df, field("referenced_data_file", json_string("string"), 143, true));
    if (format_version >= 3) {
        json_array_append_new(df, field("content_offset", json_string("long"), 144, true));
        json_array_append_new(df, field("content_size_in_bytes", json_string("long"), 145, true));
    }
    json_t *entry = json_array();
    json_array_append_new(entry, field("status", json_string("int"), 0, false));
    json_array_append_new(entry, field("snapshot_id", json_string("long"), 1, true));
    json_array_append_new(entry, field("sequence_number", json_string("long"), 3, true));
    json_array_append_new(entry, field("file_sequence_number", json_string("long"), 4, true));
    json_array_append_new(entry, field("data_file", record("r2", df), 2, false));
    return dump(record("manifest_entry", entry), out);
}

firn_rc firn__manifest_list_schema(int format_version, firn_buf *out)
{
    json_t *sum = json_array();
    json_array_append_new(sum, field("contains_null", json_string("boolean"), 509, false));
    json_array_append_new(sum, field("contains_nan", json_string("boolean"), 518, true));
    json_array_append_new(sum, field("lower_bound", json_string("bytes"), 510, true));
    json_array_append_new(sum, field("upper_bound", json_string("bytes"), 511, true));
    json_t *parts = json_pack("{s:s, s:o, s:i}", "type", "array", "items", record("r508", sum),
                              "element-id", 508);
    static const struct {
        const char *name;
        const char *type;
        int32_t id;
    } F[] = {
        {"manifest_path", "string", 500},     {"manifest_length", "long", 501},
        {"partition_spec_id", "int", 502},    {"content", "int", 517},
        {"sequence_number", "long", 515},     {"min_sequence_number", "long", 516},
        {"added_snapshot_id", "long", 503},   {"added_files_count", "int", 504},
        {"existing_files_count", "int", 505}, {"deleted_files_count", "int", 506},
        {"added_rows_count", "long", 512},    {"existing_rows_count", "long", 513},
        {"deleted_rows_count", "long", 514},
    };
    json_t *fields = json_array();
    for (size_t i = 0; i < sizeof F / sizeof F[0]; i++)
        json_array_append_new(fields, field(F[i].name, json_string(F[i].type), F[i].id, false));
    json_array_append_new(fields, field("partitions", parts, 507, true));
    json_array_append_new(fields, field("key_metadata", json_string("bytes"), 519, true));
    if (format_version >= 3)
        json_array_append_new(fields, field("first_row_id", json_string("long"), 520, true));
    return dump(record("manifest_file", fields), out);
}

int firn__decimal_bytes(int32_t precision)
{
    return decimal_required_bytes(precision);
}
