/* SPDX-License-Identifier: Apache-2.0 */
/* Iceberg table metadata: schemas, partition specs, sort orders, snapshots and the table
 * metadata document (format/spec.md "Table Metadata", ICEBERG.md §A), their JSON forms, metadata
 * changes modelled as REST requirements + updates (ICEBERG.md §G) and schema evolution (§F). */
#ifndef FIRN_ICEBERG_H
#define FIRN_ICEBERG_H

#include "firn/batch.h"
#include "firn/manifest.h"
#include "firn/util.h"

struct json_t; /* jansson; opaque here, used to keep unmodelled JSON members intact */

/* ------------------------------------------------------------------------------------------------
 * Ordered string maps (table/namespace properties, snapshot summaries)
 * ----------------------------------------------------------------------------------------------*/

/** An insertion-ordered string -> string map with owned copies. Embed and firn_props_init. */
typedef struct firn_props {
    size_t n;
    size_t cap;
    char **keys;
    char **vals;
} firn_props;

/** Initializes an empty map. */
void firn_props_init(firn_props *p);
/** Frees every entry; p is empty afterwards (NULL accepted). */
void firn_props_deinit(firn_props *p);
/** Sets key to val (copies both); an existing key keeps its position. */
void firn_props_set(firn_props *p, const char *key, const char *val);
/** Borrowed value of key, NULL when absent. */
const char *firn_props_get(const firn_props *p, const char *key);
/** Removes key; true when it was present. */
bool firn_props_remove(firn_props *p, const char *key);
/** Initializes dst as a deep copy of src. */
void firn_props_copy(firn_props *dst, const firn_props *src);
/** True when both maps hold the same pairs (order ignored). */
bool firn_props_equal(const firn_props *a, const firn_props *b);

/* ------------------------------------------------------------------------------------------------
 * Schemas (spec "Schemas and Data Types", ICEBERG.md §A "Schema JSON")
 * ----------------------------------------------------------------------------------------------*/

/** One schema of a table: a STRUCT field tree with Iceberg field ids. Owned by its creator;
 * immutable once inside table metadata. */
typedef struct firn_schema {
    int32_t schema_id;
    firn_field *root; /* owned; type FIRN_TYPE_STRUCT, id 0, name "" */
    int32_t *identifier_field_ids;
    size_t n_identifier_field_ids;
    /* private: "doc", "initial-default", "write-default" by field id, kept across a parse and
     * serialize round trip (NULL when none) */
    struct json_t *field_extras;
} firn_schema;

/** Returns a new schema owning root (a STRUCT field; ownership taken). Free with
 * firn_schema_free. */
firn_schema *firn_schema_new(int32_t schema_id, firn_field *root);
/** Frees s (NULL accepted). */
void firn_schema_free(firn_schema *s);
/** Returns an owned deep copy. */
firn_schema *firn_schema_clone(const firn_schema *s);
/** Replaces the identifier field ids with a copy of ids[0..n). */
void firn_schema_set_identifier_ids(firn_schema *s, const int32_t *ids, size_t n);
/** The field (at any depth, including list elements and map keys/values) with field id id, or
 * NULL. Borrowed. */
const firn_field *firn_schema_find_id(const firn_schema *s, int32_t id);
/** The top-level field named name, or NULL. Borrowed. */
const firn_field *firn_schema_find_name(const firn_schema *s, const char *name);
/** Highest field id in the schema (0 for an empty struct). */
int32_t firn_schema_highest_id(const firn_schema *s);
/** True when a and b have the same fields, types, ids, names, required flags and identifier
 * fields; schema ids are ignored (Java "sameSchema"). */
bool firn_schema_same(const firn_schema *a, const firn_schema *b);
/** Checks the rules of the spec: unique field ids (> 0, below the reserved range), non-empty
 * unique names per struct, identifier fields required primitive non-float fields not nested in
 * lists, maps or optional structs. FIRN_ERR_SCHEMA naming the offending field. */
FIRN_MUST_CHECK firn_rc firn_schema_validate(const firn_schema *s, firn_err *err);
/** Parses schema JSON (`{"type":"struct","schema-id":..,"fields":[..]}`) into an owned schema.
 * Accepts every v2 type string plus timestamp_ns/timestamptz_ns; other v3 types give
 * FIRN_ERR_UNSUPPORTED, malformed input FIRN_ERR_PARSE. */
FIRN_MUST_CHECK firn_rc firn_schema_from_json(const char *json,
                                              size_t len,
                                              firn_schema **out,
                                              firn_err *err);
/** Appends the schema's JSON to out. FIRN_ERR_TOO_LARGE past out's maximum. */
FIRN_MUST_CHECK firn_rc firn_schema_to_json(const firn_schema *s, firn_buf *out, firn_err *err);

/* ------------------------------------------------------------------------------------------------
 * Partition specs and sort orders (ICEBERG.md §A, §E)
 * ----------------------------------------------------------------------------------------------*/

/** First partition field id; last-partition-id of a table without partition fields is 999. */
#define FIRN_PARTITION_FIELD_ID_START 1000

/* firn_partition_spec, firn_partition_field, firn_partition_spec_new/_add/_free and the
 * transforms live in firn/manifest.h; these add copying, comparing and the JSON form. */

/** Returns an owned deep copy. */
firn_partition_spec *firn_partition_spec_clone(const firn_partition_spec *s);
/** True when both specs have the same fields (spec ids ignored). */
bool firn_partition_spec_same(const firn_partition_spec *a, const firn_partition_spec *b);
/** Parses partition spec JSON into an owned spec (FIRN_ERR_PARSE; FIRN_ERR_UNSUPPORTED for an
 * unknown transform). */
FIRN_MUST_CHECK firn_rc firn_partition_spec_from_json(const char *json,
                                                      size_t len,
                                                      firn_partition_spec **out,
                                                      firn_err *err);
/** Appends the spec's JSON to out. */
FIRN_MUST_CHECK firn_rc firn_partition_spec_to_json(const firn_partition_spec *s,
                                                    firn_buf *out,
                                                    firn_err *err);

typedef struct firn_sort_field {
    int32_t source_id;
    char *transform; /* owned */
    bool descending;
    bool nulls_first;
} firn_sort_field;

typedef struct firn_sort_order {
    int32_t order_id; /* 0 = unsorted */
    size_t n_fields;
    firn_sort_field *fields;
} firn_sort_order;

/** Returns a new empty sort order. */
firn_sort_order *firn_sort_order_new(int32_t order_id);
/** Appends a field (transform copied). */
void firn_sort_order_add(firn_sort_order *o,
                         int32_t source_id,
                         const char *transform,
                         bool descending,
                         bool nulls_first);
/** Frees o (NULL accepted). */
void firn_sort_order_free(firn_sort_order *o);
/** Returns an owned deep copy. */
firn_sort_order *firn_sort_order_clone(const firn_sort_order *o);
/** Parses sort order JSON into an owned sort order (FIRN_ERR_PARSE). */
FIRN_MUST_CHECK firn_rc firn_sort_order_from_json(const char *json,
                                                  size_t len,
                                                  firn_sort_order **out,
                                                  firn_err *err);
/** Appends the sort order's JSON to out. */
FIRN_MUST_CHECK firn_rc firn_sort_order_to_json(const firn_sort_order *o,
                                                firn_buf *out,
                                                firn_err *err);

/* ------------------------------------------------------------------------------------------------
 * Snapshots and refs (spec "Snapshots", "Snapshot References")
 * ----------------------------------------------------------------------------------------------*/

typedef struct firn_snapshot {
    int64_t snapshot_id;
    int64_t parent_snapshot_id; /* -1 when none */
    int64_t sequence_number;
    int64_t timestamp_ms;
    char *manifest_list;  /* owned */
    firn_props summary;   /* "operation" first */
    int32_t schema_id;    /* -1 when absent */
    int64_t first_row_id; /* v3; -1 when absent */
    int64_t added_rows;   /* v3; -1 when absent */
    struct json_t *extra; /* private: unmodelled members, kept as they are */
} firn_snapshot;

/** Returns a new snapshot (manifest list copied) with no parent, schema id, row lineage or
 * summary entries. */
firn_snapshot *firn_snapshot_new(int64_t snapshot_id,
                                 int64_t sequence_number,
                                 int64_t timestamp_ms,
                                 const char *manifest_list);
/** Frees s (NULL accepted). */
void firn_snapshot_free(firn_snapshot *s);
/** Returns an owned deep copy. */
firn_snapshot *firn_snapshot_clone(const firn_snapshot *s);
/** Returns a random positive 63-bit snapshot id (Java style: UUID halves XORed, sign masked).
 * Thread-safe. */
int64_t firn_snapshot_id_new(void);

typedef struct firn_snapshot_ref {
    char *name; /* owned */
    int64_t snapshot_id;
    bool is_tag;                   /* false: branch */
    int64_t min_snapshots_to_keep; /* -1 when absent */
    int64_t max_snapshot_age_ms;   /* -1 when absent */
    int64_t max_ref_age_ms;        /* -1 when absent */
} firn_snapshot_ref;

typedef struct firn_snapshot_log_entry {
    int64_t snapshot_id;
    int64_t timestamp_ms;
} firn_snapshot_log_entry;

typedef struct firn_metadata_log_entry {
    char *metadata_file; /* owned */
    int64_t timestamp_ms;
} firn_metadata_log_entry;

/* ------------------------------------------------------------------------------------------------
 * Table metadata (ICEBERG.md §A)
 * ----------------------------------------------------------------------------------------------*/

/** Default of write.metadata.previous-versions-max. */
#define FIRN_METADATA_PREVIOUS_VERSIONS_MAX 100

/** Parsed table metadata. Treat as immutable once built: changes go through
 * firn_table_metadata_apply, which returns a new object. Not thread-safe to free while read. */
typedef struct firn_table_metadata {
    int format_version; /* 1, 2 or 3 */
    char table_uuid[37];
    char *location;
    int64_t last_sequence_number;
    int64_t last_updated_ms;
    int32_t last_column_id;
    int32_t current_schema_id;
    size_t n_schemas;
    firn_schema **schemas;
    int32_t default_spec_id;
    size_t n_specs;
    firn_partition_spec **specs;
    int32_t last_partition_id;
    int32_t default_sort_order_id;
    size_t n_sort_orders;
    firn_sort_order **sort_orders;
    firn_props properties;
    int64_t current_snapshot_id; /* -1 when none */
    size_t n_snapshots;
    firn_snapshot **snapshots;
    size_t n_refs;
    firn_snapshot_ref *refs;
    size_t n_snapshot_log;
    firn_snapshot_log_entry *snapshot_log;
    size_t n_metadata_log;
    firn_metadata_log_entry *metadata_log;
    int64_t next_row_id;  /* v3; -1 when absent */
    struct json_t *extra; /* private: unmodelled members (statistics, encryption-keys, ...) */
} firn_table_metadata;

/** Frees md (NULL accepted). */
void firn_table_metadata_free(firn_table_metadata *md);
/** Returns an owned deep copy. */
firn_table_metadata *firn_table_metadata_clone(const firn_table_metadata *md);

/** Parses a metadata.json document (format 1-3). Accepts Java's -1 for "no current snapshot",
 * v1 "schema"/"partition-spec" without the lists, and v3 members (next-row-id, row lineage);
 * members it does not model (statistics, encryption-keys, ...) are kept and written back.
 * FIRN_ERR_PARSE with the member name on malformed input, FIRN_ERR_UNSUPPORTED for format
 * versions above 3. Returns owned metadata in out. Thread-safe. */
FIRN_MUST_CHECK firn_rc firn_table_metadata_from_json(const char *json,
                                                      size_t len,
                                                      firn_table_metadata **out,
                                                      firn_err *err);
/** Appends md as metadata.json to out, with the members and order Java writes (format-version,
 * table-uuid, location, last-sequence-number, last-updated-ms, last-column-id, current-schema-id,
 * schemas, default-spec-id, partition-specs, last-partition-id, default-sort-order-id,
 * sort-orders, properties, current-snapshot-id (-1 when none, as Java), refs, snapshots, ...,
 * snapshot-log, metadata-log). FIRN_ERR_TOO_LARGE past out's maximum. */
FIRN_MUST_CHECK firn_rc firn_table_metadata_to_json(const firn_table_metadata *md,
                                                    firn_buf *out,
                                                    firn_err *err);

/** Borrowed current schema (never NULL for valid metadata). */
const firn_schema *firn_table_metadata_schema(const firn_table_metadata *md);
/** Borrowed schema with schema_id, or NULL. */
const firn_schema *firn_table_metadata_schema_by_id(const firn_table_metadata *md,
                                                    int32_t schema_id);
/** Borrowed default partition spec. */
const firn_partition_spec *firn_table_metadata_spec(const firn_table_metadata *md);
/** Borrowed snapshot with snapshot_id, or NULL. */
const firn_snapshot *firn_table_metadata_snapshot(const firn_table_metadata *md,
                                                  int64_t snapshot_id);
/** Borrowed current snapshot (of main), or NULL. */
const firn_snapshot *firn_table_metadata_current_snapshot(const firn_table_metadata *md);
/** Borrowed ref named name, or NULL. */
const firn_snapshot_ref *firn_table_metadata_ref(const firn_table_metadata *md, const char *name);

/** Options for firn_table_metadata_new. Zero-initialize; NULL members take defaults. */
typedef struct firn_table_create {
    const firn_schema *schema;         /* required; field ids are reassigned from 1 */
    const firn_partition_spec *spec;   /* NULL: unpartitioned; source ids refer to schema */
    const firn_sort_order *sort_order; /* NULL: unsorted */
    const char *location;              /* required for firn_table_metadata_new */
    const firn_props *properties;      /* NULL: none; "format-version" is honoured and removed */
    int format_version;                /* 0: properties' format-version, else 2 */
} firn_table_create;

/** Builds metadata for a new table (Java/pyiceberg "newTableMetadata"): fresh field ids from 1
 * in breadth-first order (identifier fields, spec and sort order sources remapped), partition
 * field ids from 1000, last-partition-id 999 when unpartitioned, a random table uuid, and the
 * property write.parquet.compression-codec=zstd unless given. FIRN_ERR_SCHEMA for an invalid
 * schema, FIRN_ERR_INVALID for a spec or sort order naming an unknown source column. */
FIRN_MUST_CHECK firn_rc firn_table_metadata_new(const firn_table_create *opts,
                                                firn_table_metadata **out,
                                                firn_err *err);

/* ------------------------------------------------------------------------------------------------
 * Metadata changes: REST requirements and updates (ICEBERG.md §G), applied locally by the SQL
 * catalog and sent as JSON by the REST catalog.
 * ----------------------------------------------------------------------------------------------*/

typedef enum firn_requirement_type {
    FIRN_REQ_ASSERT_CREATE = 1,
    FIRN_REQ_ASSERT_TABLE_UUID,
    FIRN_REQ_ASSERT_REF_SNAPSHOT_ID,
    FIRN_REQ_ASSERT_LAST_ASSIGNED_FIELD_ID,
    FIRN_REQ_ASSERT_CURRENT_SCHEMA_ID,
    FIRN_REQ_ASSERT_LAST_ASSIGNED_PARTITION_ID,
    FIRN_REQ_ASSERT_DEFAULT_SPEC_ID,
    FIRN_REQ_ASSERT_DEFAULT_SORT_ORDER_ID,
} firn_requirement_type;

typedef struct firn_table_requirement {
    firn_requirement_type type;
    char uuid[37];       /* assert-table-uuid */
    char *ref;           /* assert-ref-snapshot-id (owned) */
    int64_t snapshot_id; /* assert-ref-snapshot-id; -1 = the ref must not exist */
    int32_t value;       /* the five single-valued asserts */
} firn_table_requirement;

typedef enum firn_update_action {
    FIRN_UPD_ASSIGN_UUID = 1,
    FIRN_UPD_UPGRADE_FORMAT_VERSION,
    FIRN_UPD_ADD_SCHEMA,
    FIRN_UPD_SET_CURRENT_SCHEMA,
    FIRN_UPD_ADD_SPEC,
    FIRN_UPD_SET_DEFAULT_SPEC,
    FIRN_UPD_ADD_SORT_ORDER,
    FIRN_UPD_SET_DEFAULT_SORT_ORDER,
    FIRN_UPD_ADD_SNAPSHOT,
    FIRN_UPD_SET_SNAPSHOT_REF,
    FIRN_UPD_REMOVE_SNAPSHOTS,
    FIRN_UPD_REMOVE_SNAPSHOT_REF,
    FIRN_UPD_SET_LOCATION,
    FIRN_UPD_SET_PROPERTIES,
    FIRN_UPD_REMOVE_PROPERTIES,
} firn_update_action;

/** One update; only the members of its action are set, all owned by the update. */
typedef struct firn_table_update {
    firn_update_action action;
    char uuid[37];               /* assign-uuid */
    int format_version;          /* upgrade-format-version */
    firn_schema *schema;         /* add-schema */
    int32_t last_column_id;      /* add-schema (deprecated member; -1 when absent) */
    int32_t id;                  /* set-current-schema / set-default-spec /
                                    set-default-sort-order; -1 = the last one added */
    firn_partition_spec *spec;   /* add-spec */
    firn_sort_order *sort_order; /* add-sort-order */
    firn_snapshot *snapshot;     /* add-snapshot */
    firn_snapshot_ref ref;       /* set-snapshot-ref; remove-snapshot-ref uses ref.name */
    int64_t *snapshot_ids;       /* remove-snapshots */
    size_t n_snapshot_ids;
    char *location;   /* set-location */
    firn_props props; /* set-properties */
    char **removals;  /* remove-properties */
    size_t n_removals;
} firn_table_update;

/** A commit's requirements and updates (CommitTableRequest). Embed, firn_table_changes_init. */
typedef struct firn_table_changes {
    size_t n_requirements;
    firn_table_requirement *requirements;
    size_t n_updates;
    firn_table_update *updates;
} firn_table_changes;

/** Initializes an empty change set. */
void firn_table_changes_init(firn_table_changes *c);
/** Frees all requirements and updates (NULL accepted). */
void firn_table_changes_deinit(firn_table_changes *c);

/* Requirement builders (strings copied). */
void firn_table_changes_require_create(firn_table_changes *c);
void firn_table_changes_require_uuid(firn_table_changes *c, const char *uuid);
/** snapshot_id -1: the ref must not exist. */
void firn_table_changes_require_ref(firn_table_changes *c, const char *ref, int64_t snapshot_id);
/** Any of the five single-valued asserts (type FIRN_REQ_ASSERT_LAST_ASSIGNED_FIELD_ID etc.). */
void firn_table_changes_require(firn_table_changes *c, firn_requirement_type type, int32_t value);

/* Update builders; objects are copied (the caller keeps its own), strings copied. */
void firn_table_changes_assign_uuid(firn_table_changes *c, const char *uuid);
void firn_table_changes_upgrade_format_version(firn_table_changes *c, int format_version);
/** last_column_id -1: omit the deprecated member. */
void firn_table_changes_add_schema(firn_table_changes *c,
                                   const firn_schema *schema,
                                   int32_t last_column_id);
void firn_table_changes_set_current_schema(firn_table_changes *c, int32_t schema_id);
void firn_table_changes_add_spec(firn_table_changes *c, const firn_partition_spec *spec);
void firn_table_changes_set_default_spec(firn_table_changes *c, int32_t spec_id);
void firn_table_changes_add_sort_order(firn_table_changes *c, const firn_sort_order *order);
void firn_table_changes_set_default_sort_order(firn_table_changes *c, int32_t order_id);
void firn_table_changes_add_snapshot(firn_table_changes *c, const firn_snapshot *snapshot);
/** A branch (is_tag false) or tag named name pointing at snapshot_id. */
void firn_table_changes_set_ref(firn_table_changes *c,
                                const char *name,
                                int64_t snapshot_id,
                                bool is_tag);
void firn_table_changes_remove_snapshots(firn_table_changes *c, const int64_t *ids, size_t n);
void firn_table_changes_remove_ref(firn_table_changes *c, const char *name);
void firn_table_changes_set_location(firn_table_changes *c, const char *location);
/** Adds key=val to the (single, merged) set-properties update at the end of the list. */
void firn_table_changes_set_property(firn_table_changes *c, const char *key, const char *val);
void firn_table_changes_remove_property(firn_table_changes *c, const char *key);

/** Appends `{"requirements":[...],"updates":[...]}` (CommitTableRequest without identifier). */
FIRN_MUST_CHECK firn_rc firn_table_changes_to_json(const firn_table_changes *c,
                                                   firn_buf *out,
                                                   firn_err *err);
/** Parses a CommitTableRequest body into c (initialized by the caller, appended to).
 * FIRN_ERR_PARSE, FIRN_ERR_UNSUPPORTED for unknown requirement types or update actions. */
FIRN_MUST_CHECK firn_rc firn_table_changes_from_json(const char *json,
                                                     size_t len,
                                                     firn_table_changes *c,
                                                     firn_err *err);

/** Checks c's requirements against base (NULL: the table does not exist), then applies the
 * updates in order and returns owned new metadata in out (REST server semantics, Java
 * TableMetadata.Builder): add-schema reuses the id of an identical schema or takes max+1,
 * raises last-column-id; add-spec/add-sort-order likewise; -1 ids mean "last added";
 * add-snapshot requires a sequence number above last-sequence-number (v2+) and raises it (v3:
 * first-row-id >= next-row-id, next-row-id += added-rows); set-snapshot-ref of "main" moves
 * current-snapshot-id and appends to snapshot-log. When base_location is given (the metadata
 * file base was read from), it is appended to metadata-log, which is trimmed to
 * write.metadata.previous-versions-max. last-updated-ms becomes now_ms (or the added
 * snapshot's timestamp when later). Errors: FIRN_ERR_CONFLICT when a requirement fails or a
 * snapshot is stale (reload and retry), FIRN_ERR_INVALID for an update that can never apply
 * (unknown schema id, ...), FIRN_ERR_SCHEMA for an invalid schema. Thread-safe. */
FIRN_MUST_CHECK firn_rc firn_table_metadata_apply(const firn_table_metadata *base,
                                                  const char *base_location,
                                                  const firn_table_changes *c,
                                                  int64_t now_ms,
                                                  firn_table_metadata **out,
                                                  firn_err *err);

/* ------------------------------------------------------------------------------------------------
 * Schema evolution (ICEBERG.md §F)
 * ----------------------------------------------------------------------------------------------*/

/** True when a column of type from may be promoted to type to: same type, int -> long,
 * float -> double, decimal(P,S) -> decimal(P',S) with P' >= P. */
bool firn_type_can_promote(const firn_field *from, const firn_field *to);

/** Derives a new schema from base that matches target (a STRUCT whose fields are matched to
 * base's by name, recursively for structs; target ids are ignored):
 * - a target field missing in base is added as optional with new ids from *io_last_column_id+1
 *   (nested children too), and *io_last_column_id is raised;
 * - a field whose type changed is promoted when firn_type_can_promote allows it;
 * - base fields missing in target are kept (dropped source columns stay, read as null) and
 *   become optional unless they are identifier fields (writers fill them with nulls);
 * - required -> optional is applied; a target that is required where base is optional keeps
 *   base optional.
 * The result has schema_id base->schema_id + 1 (the catalog may renumber it) and base's
 * identifier fields. *out_changed tells whether anything changed (then *out is still a copy).
 * FIRN_ERR_SCHEMA for an incompatible change (type change that is not a promotion, list/map
 * element change, struct vs primitive), with a message naming the column and both types. */
FIRN_MUST_CHECK firn_rc firn_schema_evolve(const firn_schema *base,
                                           const firn_field *target,
                                           int32_t *io_last_column_id,
                                           firn_schema **out,
                                           bool *out_changed,
                                           firn_err *err);

/** Returns a copy of base with one optional top-level column added (field copied, its ids and
 * those of its children assigned from *io_last_column_id + 1). FIRN_ERR_SCHEMA when the name
 * exists or the field is required. */
FIRN_MUST_CHECK firn_rc firn_schema_add_column(const firn_schema *base,
                                               const firn_field *field,
                                               int32_t *io_last_column_id,
                                               firn_schema **out,
                                               firn_err *err);

/** Returns a copy of base with the type of field field_id changed to that of to (a primitive
 * field: type, precision, scale, length). FIRN_ERR_SCHEMA when not an allowed promotion,
 * FIRN_ERR_NOT_FOUND for an unknown field id. */
FIRN_MUST_CHECK firn_rc firn_schema_promote(const firn_schema *base,
                                            int32_t field_id,
                                            const firn_field *to,
                                            firn_schema **out,
                                            firn_err *err);

/* ------------------------------------------------------------------------------------------------
 * Snapshot expiry (spec "Snapshot Retention Policy"; Iceberg Java RemoveSnapshots)
 * ----------------------------------------------------------------------------------------------*/

/** Table-wide retention; a ref's own min-snapshots-to-keep, max-snapshot-age-ms and
 * max-ref-age-ms win over these. */
typedef struct firn_expire_policy {
    int64_t max_snapshot_age_ms;   /* branch ancestors older than now - this may expire */
    int64_t min_snapshots_to_keep; /* each branch keeps at least this many ancestors (>= 1) */
    int64_t max_ref_age_ms;        /* refs other than main older than this are removed; -1: never */
    size_t max_main_snapshots;     /* metadata budget: main keeps at most this many ancestors,
                                    * overriding min_snapshots_to_keep and the age (0: no cap) */
    int64_t protect_snapshot_id;   /* main keeps its ancestors down to this one whatever the
                                    * rules say (firn's resume position); -1: none */
} firn_expire_policy;

/** Fills p from md's properties history.expire.max-snapshot-age-ms,
 * history.expire.min-snapshots-to-keep and history.expire.max-ref-age-ms, taking def_age_ms,
 * def_min_keep and -1 (never) where a property is absent or not a positive integer. Sets no cap
 * and no protected snapshot. */
void firn_expire_policy_from_table(const firn_table_metadata *md,
                                   int64_t def_age_ms,
                                   int64_t def_min_keep,
                                   firn_expire_policy *p);

/** What an expiry removes. Owned; free with firn_expire_plan_deinit. */
typedef struct firn_expire_plan {
    int64_t *expired; /* snapshot ids to remove, in md's order */
    size_t n_expired;
    char **removed_refs; /* refs whose max-ref-age passed (never "main") */
    size_t n_removed_refs;
    size_t n_retained; /* snapshots kept */
} firn_expire_plan;

/** Computes which snapshots of md expire at now_ms (milliseconds since the epoch) the way Java's
 * RemoveSnapshots does: refs past their max-ref-age are removed (main never); each remaining
 * branch keeps its ancestors while fewer than its min-snapshots-to-keep are kept or they are not
 * older than its max-snapshot-age; each tag keeps its snapshot; a snapshot no ref reaches is kept
 * while it is younger than the table's max age (expired at once under a max_main_snapshots cap);
 * the rest expires. The current snapshot never expires. out is initialized here. Thread-safe. */
void firn_expire_plan_make(const firn_table_metadata *md,
                           const firn_expire_policy *p,
                           int64_t now_ms,
                           firn_expire_plan *out);
/** Frees what plan owns (NULL accepted). */
void firn_expire_plan_deinit(firn_expire_plan *plan);
/** True when every snapshot of md is an ancestor of main's head and main is the only ref (or
 * there are no refs): then a file of an expired snapshot that any retained one references is
 * referenced by the oldest retained ancestor (writers carry manifests and files forward and
 * never bring a removed one back). */
bool firn_table_metadata_single_lineage(const firn_table_metadata *md);

#endif
