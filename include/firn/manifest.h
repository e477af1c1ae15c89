/* SPDX-License-Identifier: Apache-2.0 */
/* Iceberg manifests (second public header of the iceberg module): single-value binary
 * encoding, partition specs and transforms, data files with their metrics, manifest and
 * manifest-list writers and readers, and the snapshot producer that writes the manifests and
 * manifest list of one commit (format/spec.md "Manifests", "Manifest Lists", "Partition
 * Transforms", Appendix B and D; ICEBERG.md §B, §D, §E). */
#ifndef FIRN_MANIFEST_H
#define FIRN_MANIFEST_H

#include "firn/avro.h"
#include "firn/batch.h"
#include "firn/io.h"
#include "firn/util.h"

struct firn_pq_file_metrics; /* firn/parquet.h */

/* ------------------------------------------------------------------------------------------------
 * Primitive types and single values
 * ----------------------------------------------------------------------------------------------*/

/** A primitive Iceberg type: a firn_type plus decimal precision/scale and fixed length. */
typedef struct firn_ptype {
    firn_type type;
    int32_t precision; /* decimal */
    int32_t scale;     /* decimal */
    int32_t length;    /* fixed */
} firn_ptype;

/** The primitive type of a schema field (nested types keep their type, other members 0). */
firn_ptype firn_ptype_of(const firn_field *f);
/** Iceberg's name of t ("long", "decimal(9,2)", "fixed[16]") into out (always NUL-terminated). */
void firn_ptype_format(firn_ptype t, char *out, size_t out_cap);

/** One value of a primitive type, or null. A plain struct: bytes are borrowed.
 * boolean: b; int, long, date, time, timestamps (µs, ns for the _ns types): i; float, double:
 * d; decimal: the unscaled value as a 128-bit two's-complement integer (dec_hi, dec_lo);
 * string (UTF-8), binary, fixed, uuid (16 bytes, big endian): bytes. */
typedef struct firn_value {
    firn_ptype type;
    bool is_null;
    bool b;
    int64_t i;
    double d;
    int64_t dec_hi;
    uint64_t dec_lo;
    firn_slice bytes;
} firn_value;

/** Appends the Iceberg single-value binary serialization of v (format/spec.md Appendix D:
 * little-endian numbers, raw UTF-8/bytes, big-endian uuid, minimal big-endian two's-complement
 * decimals) to out. A null value appends nothing. FIRN_ERR_TOO_LARGE when out is full,
 * FIRN_ERR_UNSUPPORTED for nested types. Thread-safe. */
FIRN_MUST_CHECK firn_rc firn_value_to_bytes(const firn_value *v, firn_buf *out, firn_err *err);
/** Decodes a single-value serialization of type t (inverse of firn_value_to_bytes; bytes of
 * string/binary/fixed/uuid stay borrowed from p). Accepts the shorter encodings of promoted
 * types (4-byte int for long, 4-byte float for double). FIRN_ERR_PARSE on a wrong length. */
FIRN_MUST_CHECK firn_rc
firn_value_from_bytes(firn_ptype t, const void *p, size_t len, firn_value *out, firn_err *err);
/** Orders two non-null values of the same type: negative, 0 or positive. Numbers by value
 * (floats: -0.0 before +0.0, NaN last), strings and binary as unsigned bytes, decimals by
 * unscaled value. */
int firn_value_compare(const firn_value *a, const firn_value *b);
/** A null value of type t. */
firn_value firn_value_null(firn_ptype t);

/* ------------------------------------------------------------------------------------------------
 * Partition transforms and specs (ICEBERG.md §E)
 * ----------------------------------------------------------------------------------------------*/

typedef enum firn_transform_kind {
    FIRN_TRANSFORM_IDENTITY = 0,
    FIRN_TRANSFORM_BUCKET,   /* param: number of buckets N > 0 */
    FIRN_TRANSFORM_TRUNCATE, /* param: width W > 0 */
    FIRN_TRANSFORM_YEAR,
    FIRN_TRANSFORM_MONTH,
    FIRN_TRANSFORM_DAY,
    FIRN_TRANSFORM_HOUR,
    FIRN_TRANSFORM_VOID,
} firn_transform_kind;

typedef struct firn_transform {
    firn_transform_kind kind;
    int32_t param;
} firn_transform;

/** Parses "identity", "bucket[16]", "truncate[4]", "year", "month", "day", "hour", "void".
 * FIRN_ERR_UNSUPPORTED naming the text for anything else. */
FIRN_MUST_CHECK firn_rc firn_transform_parse(const char *s, firn_transform *out, firn_err *err);
/** The spec name of t ("bucket[16]") into out (always NUL-terminated). */
void firn_transform_format(firn_transform t, char *out, size_t out_cap);
/** The result type of t applied to source type src: identity/truncate keep it, bucket, year,
 * month and hour give int, day gives date. FIRN_ERR_UNSUPPORTED when t cannot apply to src
 * (bucket on boolean/float/double, hour on date, a time transform on a non-temporal type...). */
FIRN_MUST_CHECK firn_rc firn_transform_result_type(firn_transform t,
                                                   firn_ptype src,
                                                   firn_ptype *out,
                                                   firn_err *err);
/** Applies t to in (any value of the source type; null gives null), storing a value of the
 * result type in out. Truncated strings/binaries borrow in's bytes. Errors as
 * firn_transform_result_type. Thread-safe. */
FIRN_MUST_CHECK firn_rc firn_transform_apply(firn_transform t,
                                             const firn_value *in,
                                             firn_value *out,
                                             firn_err *err);
/** The 32-bit Murmur3 hash the bucket transform uses for v (spec Appendix B: integer family as
 * 8-byte little-endian longs, nanosecond timestamps converted to µs, decimals as minimal
 * big-endian unscaled bytes, strings as UTF-8, uuids as 16 big-endian bytes). */
FIRN_MUST_CHECK firn_rc firn_bucket_hash(const firn_value *v, int32_t *out, firn_err *err);

/** One partition field: source column id, partition field id (>= 1000), name, transform. */
typedef struct firn_partition_field {
    int32_t source_id;
    int32_t field_id;
    char *name; /* owned by the spec */
    firn_transform transform;
} firn_partition_field;

/** A partition spec (format/spec.md "Partition Specs"). Build with firn_partition_spec_new and
 * _add, or fill the struct yourself (then you free it). Immutable once built; share read-only. */
typedef struct firn_partition_spec {
    int32_t spec_id;
    size_t n_fields;
    firn_partition_field *fields;
} firn_partition_spec;

/** Returns an owned empty (unpartitioned) spec with id spec_id. Free with
 * firn_partition_spec_free. */
firn_partition_spec *firn_partition_spec_new(int32_t spec_id);
/** Appends a field (name copied). */
void firn_partition_spec_add(firn_partition_spec *spec,
                             int32_t source_id,
                             int32_t field_id,
                             const char *name,
                             firn_transform transform);
/** Frees a spec from firn_partition_spec_new (NULL accepted). */
void firn_partition_spec_free(firn_partition_spec *spec);
/** Appends the JSON array of the spec's fields ([{"name","transform","source-id","field-id"}],
 * the manifest header "partition-spec" form) to out. */
FIRN_MUST_CHECK firn_rc firn_partition_spec_fields_json(const firn_partition_spec *spec,
                                                        firn_buf *out);
/** Result types of every spec field for the table schema (a STRUCT field tree) into
 * out[spec->n_fields]. FIRN_ERR_SCHEMA when a source id is missing or not primitive,
 * FIRN_ERR_UNSUPPORTED when a transform does not fit its source type. */
FIRN_MUST_CHECK firn_rc firn_partition_spec_types(const firn_partition_spec *spec,
                                                  const firn_field *schema,
                                                  firn_ptype *out,
                                                  firn_err *err);
/** Appends the Hive-style relative path of a partition tuple to out: "name=value" segments
 * joined by '/', names and values URL-escaped; values human-readable (year "2024", month
 * "2024-05", day "2024-05-01", hour "2024-05-01-13", null "null"). Nothing for an
 * unpartitioned spec. values[spec->n_fields] are of the result types. */
FIRN_MUST_CHECK firn_rc firn_partition_path(const firn_partition_spec *spec,
                                            const firn_value *values,
                                            firn_buf *out,
                                            firn_err *err);

/* ------------------------------------------------------------------------------------------------
 * Data files and manifest entries (format/spec.md "Manifests")
 * ----------------------------------------------------------------------------------------------*/

typedef enum firn_file_content {
    FIRN_CONTENT_DATA = 0,
    FIRN_CONTENT_POSITION_DELETES = 1,
    FIRN_CONTENT_EQUALITY_DELETES = 2,
} firn_file_content;

/** Metrics of one column (leaf field id) of a file. -1 marks an absent count. */
typedef struct firn_col_metrics {
    int32_t field_id;
    int64_t column_size; /* bytes (compressed chunks); -1 absent */
    int64_t value_count; /* values incl. nulls and NaN; -1 absent */
    int64_t null_count;  /* -1 absent */
    int64_t nan_count;   /* -1 absent (only floats and doubles have one) */
    uint8_t *lower;      /* single-value bound, owned; NULL absent */
    size_t lower_len;
    uint8_t *upper; /* owned; NULL absent */
    size_t upper_len;
} firn_col_metrics;

/** A data or delete file as a manifest records it. Plain struct: every pointer is owned by it
 * and freed by firn_data_file_deinit; build with firn_data_file_init and the setters, or copy
 * with firn_data_file_copy. Optional members: NULL/0 counts mean absent. */
typedef struct firn_data_file {
    firn_file_content content;
    char *file_path;
    char *file_format;  /* "parquet", "avro", "orc", "puffin" */
    int32_t spec_id;    /* partition spec of the file (not stored per entry in Avro) */
    size_t n_partition; /* values of the partition tuple, result types of the spec */
    firn_value *partition;
    uint8_t *partition_bytes; /* owned storage behind partition[].bytes */
    int64_t record_count;
    int64_t file_size_in_bytes;
    size_t n_metrics;
    firn_col_metrics *metrics; /* sorted by field id */
    uint8_t *key_metadata;     /* NULL absent */
    size_t key_metadata_len;
    size_t n_split_offsets;
    int64_t *split_offsets; /* NULL absent */
    size_t n_equality_ids;
    int32_t *equality_ids; /* NULL absent; required for content 2 */
    bool has_sort_order_id;
    int32_t sort_order_id;
    bool has_first_row_id; /* v3 data files: _row_id of row 0; false = null (inherited) */
    int64_t first_row_id;
    char *referenced_data_file; /* NULL absent; required for DVs */
    bool has_content_offset;    /* v3 DVs: where the blob lies in the Puffin file */
    int64_t content_offset;
    int64_t content_size_in_bytes;
} firn_data_file;

/** Initializes f as an empty data file of the given content, path (copied), format "parquet",
 * spec spec_id. */
void firn_data_file_init(firn_data_file *f,
                         firn_file_content content,
                         const char *file_path,
                         int32_t spec_id);
/** Frees what f owns and zeroes it (NULL accepted). */
void firn_data_file_deinit(firn_data_file *f);
/** Fills f's counts, per-column metrics (every metric the Parquet writer reported, bounds
 * copied), record count, file size and split offsets from the metrics of a written Parquet file
 * (include/firn/parquet.h). f must be initialized (firn_data_file_init); m is borrowed. */
void firn_data_file_set_pq_metrics(firn_data_file *f, const struct firn_pq_file_metrics *m);
/** Deep copy of src into dst (dst uninitialized). */
void firn_data_file_copy(firn_data_file *dst, const firn_data_file *src);
/** Sets the partition tuple (values copied, including their bytes). */
void firn_data_file_set_partition(firn_data_file *f, const firn_value *values, size_t n);
/** Returns the metrics slot of field_id, adding an empty one (all counts -1) if missing. */
firn_col_metrics *firn_data_file_metrics(firn_data_file *f, int32_t field_id);
/** Sets a bound (copied) of the field; upper selects the upper bound. */
void firn_data_file_set_bound(
    firn_data_file *f, int32_t field_id, bool upper, const void *p, size_t len);
/** Sets split offsets (copied, ascending). */
void firn_data_file_set_split_offsets(firn_data_file *f, const int64_t *offsets, size_t n);
/** Sets equality field ids (copied). */
void firn_data_file_set_equality_ids(firn_data_file *f, const int32_t *ids, size_t n);
/** Sets referenced_data_file (copied; NULL clears). */
void firn_data_file_set_referenced(firn_data_file *f, const char *path);
/** True when f is a deletion vector (position deletes in a Puffin file, format/spec.md
 * "Deletion Vectors"). */
bool firn_data_file_is_dv(const firn_data_file *f);
/** Initializes f as the manifest entry of one deletion vector (content 1, file_format "PUFFIN",
 * spec spec_id): file_path/file_size_in_bytes of the Puffin file, referenced_data_file (copied),
 * content_offset/content_size_in_bytes of the blob, record_count = cardinality. Set the
 * partition of the data file with firn_data_file_set_partition. */
void firn_data_file_init_dv(firn_data_file *f,
                            const char *puffin_path,
                            int64_t puffin_size_bytes,
                            int32_t spec_id,
                            const char *referenced_data_file,
                            int64_t content_offset,
                            int64_t content_size_bytes,
                            int64_t cardinality);

/** Entry status in a manifest. */
typedef enum firn_entry_status {
    FIRN_ENTRY_EXISTING = 0,
    FIRN_ENTRY_ADDED = 1,
    FIRN_ENTRY_DELETED = 2,
} firn_entry_status;

/** "Null" for snapshot ids and sequence numbers of entries and unassigned manifest numbers. */
#define FIRN_SEQ_NULL (-1)

/** A manifest entry: status, snapshot id and data/file sequence numbers (FIRN_SEQ_NULL when
 * null, i.e. inherited from the manifest list, spec "Sequence Number Inheritance"). */
typedef struct firn_manifest_entry {
    firn_entry_status status;
    int64_t snapshot_id;
    int64_t sequence_number;
    int64_t file_sequence_number;
    firn_data_file file;
} firn_manifest_entry;

/* ------------------------------------------------------------------------------------------------
 * Manifest files (manifest-list records)
 * ----------------------------------------------------------------------------------------------*/

/** Per-partition-field summary of a manifest (r508). contains_nan: -1 null, 0, 1. */
typedef struct firn_partition_summary {
    bool contains_null;
    int8_t contains_nan;
    uint8_t *lower; /* single-value bytes, owned; NULL absent */
    size_t lower_len;
    uint8_t *upper; /* owned; NULL absent */
    size_t upper_len;
} firn_partition_summary;

typedef enum firn_manifest_content {
    FIRN_MANIFEST_DATA = 0,
    FIRN_MANIFEST_DELETES = 1,
} firn_manifest_content;

/** One manifest_file record of a manifest list (v2 schema, Java order). sequence_number and
 * min_sequence_number are FIRN_SEQ_NULL for a manifest written in the current commit until the
 * list writer assigns the commit's sequence number. Owns its pointers. */
typedef struct firn_manifest_file {
    char *manifest_path;
    int64_t manifest_length;
    int32_t partition_spec_id;
    firn_manifest_content content;
    int64_t sequence_number;
    int64_t min_sequence_number;
    int64_t added_snapshot_id;
    int32_t added_files_count;
    int32_t existing_files_count;
    int32_t deleted_files_count;
    int64_t added_rows_count;
    int64_t existing_rows_count;
    int64_t deleted_rows_count;
    bool has_partitions; /* false: the optional list is null */
    size_t n_partitions;
    firn_partition_summary *partitions;
    uint8_t *key_metadata; /* NULL absent */
    size_t key_metadata_len;
    bool has_first_row_id; /* v3 data manifests; false = null (assigned by the list writer) */
    int64_t first_row_id;
} firn_manifest_file;

/** Frees what mf owns and zeroes it (NULL accepted). */
void firn_manifest_file_deinit(firn_manifest_file *mf);
/** Deep copy of src into dst (dst uninitialized). */
void firn_manifest_file_copy(firn_manifest_file *dst, const firn_manifest_file *src);

/* ------------------------------------------------------------------------------------------------
 * Manifest writer
 * ----------------------------------------------------------------------------------------------*/

/** What a manifest is written for. Everything is borrowed for the writer's lifetime. */
typedef struct firn_manifest_opts {
    int format_version;              /* 2 or 3 (v3 adds first_row_id, content offset/size) */
    firn_manifest_content content;   /* data or deletes */
    const firn_partition_spec *spec; /* the one spec of every entry */
    const firn_field *schema;        /* table schema (STRUCT tree), for partition types */
    const char *schema_json;         /* Iceberg schema JSON for the "schema" header */
    int32_t schema_id;               /* for the "schema-id" header */
    int64_t snapshot_id;             /* snapshot committing the manifest (added_snapshot_id) */
    firn_avro_codec codec;           /* Java default: deflate */
} firn_manifest_opts;

typedef struct firn_manifest_writer firn_manifest_writer;

/** Starts a manifest (format v2 or v3: Avro schema exactly as Java's V2Metadata/V3Metadata write
 * it, with the r102 partition record typed per transform result and k<id>_v<id> int-keyed maps;
 * v3 adds data_file fields 142 first_row_id (data files), 144 content_offset and 145
 * content_size_in_bytes (position deletes); header keys schema, schema-id, partition-spec,
 * partition-spec-id, format-version, content). Errors from
 * firn_partition_spec_types; FIRN_ERR_UNSUPPORTED for other format versions. Free with
 * firn_manifest_writer_free. Not thread-safe. */
FIRN_MUST_CHECK firn_rc firn_manifest_writer_new(const firn_manifest_opts *opts,
                                                 firn_manifest_writer **out,
                                                 firn_err *err);
/** Frees w (NULL accepted); an unfinished manifest is dropped. */
void firn_manifest_writer_free(firn_manifest_writer *w);
/** Appends an entry as given (status, snapshot id and sequence numbers are written as they are;
 * an ADDED entry should have null sequence numbers, EXISTING and DELETED explicit ones).
 * FIRN_ERR_INVALID when the file's content does not match the manifest's content, the
 * partition tuple does not match the spec, or an equality delete has no equality ids. */
FIRN_MUST_CHECK firn_rc firn_manifest_writer_add(firn_manifest_writer *w,
                                                 const firn_manifest_entry *entry,
                                                 firn_err *err);
/** Appends a new file: status ADDED, snapshot id of the writer, null sequence numbers. */
FIRN_MUST_CHECK firn_rc firn_manifest_writer_add_file(firn_manifest_writer *w,
                                                      const firn_data_file *file,
                                                      firn_err *err);
/** Entries added so far. */
size_t firn_manifest_writer_count(const firn_manifest_writer *w);
/** Writes the manifest to location through io and fills *out (owned by the caller; deinit with
 * firn_manifest_file_deinit) with its exact length, counts and partition summaries. Sequence
 * numbers stay FIRN_SEQ_NULL when any live entry inherits them (the list writer assigns them);
 * min_sequence_number is the smallest explicit data sequence number of live entries otherwise.
 * FIRN_ERR_INVALID for an empty manifest (readers refuse them). */
FIRN_MUST_CHECK firn_rc firn_manifest_writer_finish(firn_manifest_writer *w,
                                                    firn_io *io,
                                                    const char *location,
                                                    firn_manifest_file *out,
                                                    firn_err *err);

/* ------------------------------------------------------------------------------------------------
 * Manifest list writer and readers
 * ----------------------------------------------------------------------------------------------*/

/** Writes a manifest list (v2 schema; header snapshot-id, parent-snapshot-id ("null" when
 * parent_snapshot_id < 0), sequence-number, format-version) with one record per file, in order,
 * replacing FIRN_SEQ_NULL sequence numbers by sequence_number. Stores the exact length in
 * out_length_bytes (NULL accepted). */
FIRN_MUST_CHECK firn_rc firn_manifest_list_write(firn_io *io,
                                                 const char *location,
                                                 int64_t snapshot_id,
                                                 int64_t parent_snapshot_id,
                                                 int64_t sequence_number,
                                                 const firn_manifest_file *files,
                                                 size_t n_files,
                                                 uint64_t *out_length_bytes,
                                                 firn_err *err);
/** Manifest-list header facts (ICEBERG.md §B.1). */
typedef struct firn_manifest_list_header {
    int format_version;         /* 2 or 3 */
    int64_t snapshot_id;        /* the snapshot the list belongs to */
    int64_t parent_snapshot_id; /* -1: "null" */
    int64_t sequence_number;    /* replaces FIRN_SEQ_NULL sequence numbers of the records */
    int64_t first_row_id;       /* v3: the snapshot's first-row-id (header "first-row-id") */
} firn_manifest_list_header;

/** Writes a manifest list of format h->format_version: as firn_manifest_list_write, and for v3
 * the first_row_id (520) of each record (null for delete manifests and for data manifests
 * without has_first_row_id) and the header key first-row-id. The caller assigns first row ids
 * (the snapshot producer does, ICEBERG.md §A "v3"). FIRN_ERR_UNSUPPORTED for other versions. */
FIRN_MUST_CHECK firn_rc firn_manifest_list_write_ex(firn_io *io,
                                                    const char *location,
                                                    const firn_manifest_list_header *h,
                                                    const firn_manifest_file *files,
                                                    size_t n_files,
                                                    uint64_t *out_length_bytes,
                                                    firn_err *err);
/** Reads a manifest list (written by firn, Java, pyiceberg...; v1 lists read with v2 defaults:
 * content data, sequence numbers 0) into an owned array (*out, *out_n); free with
 * firn_manifest_files_free. */
FIRN_MUST_CHECK firn_rc firn_manifest_list_read(
    firn_io *io, const char *location, firn_manifest_file **out, size_t *out_n, firn_err *err);
/** Same from bytes in memory (for tests and fuzzing). */
FIRN_MUST_CHECK firn_rc firn_manifest_list_parse(
    const void *data, size_t len, firn_manifest_file **out, size_t *out_n, firn_err *err);
/** Frees an array from firn_manifest_list_read (NULL accepted). */
void firn_manifest_files_free(firn_manifest_file *files, size_t n);

/** A manifest as read back: header facts and entries. Owned; free with firn_manifest_free. */
typedef struct firn_manifest {
    int format_version;
    firn_manifest_content content;
    int32_t spec_id;
    char *schema_json;         /* "schema" header, NULL if absent */
    char *partition_spec_json; /* "partition-spec" header, NULL if absent */
    size_t n_entries;
    firn_manifest_entry *entries;
} firn_manifest;

/** Reads the manifest mf points to and applies v2 inheritance from mf: null snapshot ids
 * become mf->added_snapshot_id; null data/file sequence numbers of ADDED entries (and of every
 * entry when the manifest's sequence number is 0, as in upgraded v1 tables) become
 * mf->sequence_number; and v3 first-row-id inheritance: live data files without first_row_id
 * get mf->first_row_id plus the record counts of the live ones before them. Fields are resolved by
 * field id, so manifests of Java, Spark and pyiceberg read as well. FIRN_ERR_PARSE for malformed
 * files. */
FIRN_MUST_CHECK firn_rc firn_manifest_read(firn_io *io,
                                           const firn_manifest_file *mf,
                                           firn_manifest **out,
                                           firn_err *err);
/** Parses manifest bytes; inherit may be NULL (no inheritance: nulls stay FIRN_SEQ_NULL). */
FIRN_MUST_CHECK firn_rc firn_manifest_parse(const void *data,
                                            size_t len,
                                            const firn_manifest_file *inherit,
                                            firn_manifest **out,
                                            firn_err *err);
/** Frees m (NULL accepted). */
void firn_manifest_free(firn_manifest *m);

/* ------------------------------------------------------------------------------------------------
 * Snapshot summary (string key/value list) and snapshot producer
 * ----------------------------------------------------------------------------------------------*/

typedef struct firn_summary_kv {
    char *key;
    char *value;
} firn_summary_kv;

/** An ordered string map (snapshot summary). Embed and zero-initialize, or firn_summary_init. */
typedef struct firn_summary {
    size_t n;
    firn_summary_kv *kv;
} firn_summary;

/** Initializes an empty summary. */
void firn_summary_init(firn_summary *s);
/** Frees the entries and empties s (NULL accepted). */
void firn_summary_deinit(firn_summary *s);
/** Sets key to value (both copied), replacing an existing value in place. */
void firn_summary_set(firn_summary *s, const char *key, const char *value);
/** Sets key to a decimal integer. */
void firn_summary_set_i64(firn_summary *s, const char *key, int64_t value);
/** Borrowed value of key, or NULL. */
const char *firn_summary_get(const firn_summary *s, const char *key);

/** The deletion vector a commit replaces for one data file (format/spec.md: at most one DV per
 * data file per snapshot; the new DV merges the old one's positions). Borrowed strings. */
typedef struct firn_dv_replace {
    const char *data_file; /* referenced data file of a DV added in the commit */
    const char *dv_path;   /* Puffin file of the DV it had when the caller merged, NULL: none */
    int64_t dv_offset;     /* content_offset of that DV */
} firn_dv_replace;

/** Inputs of one snapshot commit's manifest work. Everything borrowed. */
typedef struct firn_snapshot_input {
    int format_version;                 /* 2 or 3 */
    int64_t snapshot_id;                /* the new snapshot */
    int64_t parent_snapshot_id;         /* -1 when none */
    int64_t sequence_number;            /* the new snapshot's sequence number */
    const char *metadata_location;      /* folder for new manifests and the list, no trailing '/' */
    const char *parent_manifest_list;   /* NULL for the first snapshot */
    const firn_summary *parent_summary; /* NULL: totals start at 0 when there is no parent, and
                                         * are omitted when there is one */
    const firn_partition_spec *spec;    /* spec of the added files */
    const firn_field *schema;           /* current table schema */
    const char *schema_json;            /* its Iceberg JSON */
    int32_t schema_id;
    const firn_data_file *added_data; /* content 0 */
    size_t n_added_data;
    const firn_data_file *added_deletes; /* content 1 or 2 */
    size_t n_added_deletes;
    const char *const *removed_paths; /* live files (data or delete) to remove */
    size_t n_removed_paths;
    bool truncate;             /* remove every live file of the parent */
    size_t merge_min_count;    /* merge carried manifests of one content and spec once
                                * there are at least this many (0: never) */
    const firn_summary *extra; /* extra summary keys copied as is (firn.position...) */
    firn_avro_codec codec;     /* manifests and list; Java default deflate */
    int64_t first_row_id;      /* v3: the table's next-row-id (the snapshot's first-row-id) */
    const firn_dv_replace *dv_replaces; /* v3: the DV each added DV replaces (data files not
                                         * listed must have none) */
    size_t n_dv_replaces;
    const char *const *required_data_paths; /* data files the added deletes refer to: each must
                                             * be live in the parent (Java RowDelta
                                             * validateDataFilesExist); NULL: not checked */
    size_t n_required_data_paths;
    bool replace; /* a rewrite without logical change (compaction): operation "replace" */
    int64_t added_data_sequence_number; /* > 0: explicit data sequence number of the added
                                         * data files (a rewrite keeps the sequence number of
                                         * the snapshot it read, so equality deletes committed
                                         * after it still apply to the new files; Java
                                         * RewriteFiles.dataSequenceNumber); else inherited */
} firn_snapshot_input;

/** What a commit needs from the producer. Owned; free with firn_snapshot_result_deinit. */
typedef struct firn_snapshot_result {
    char *manifest_list;   /* location of the new manifest list */
    const char *operation; /* "append", "overwrite", "delete" or "replace" (static) */
    firn_summary summary;  /* complete snapshot summary, "operation" first */
    size_t n_manifests;    /* manifests in the new list */
    size_t manifests_created;
    size_t manifests_kept;
    size_t manifests_replaced;
    int64_t first_row_id; /* v3: the snapshot's first-row-id, -1 for v2 */
    int64_t added_rows;   /* v3: row ids assigned to new data manifests, -1 for v2 */
} firn_snapshot_result;

/** Writes one new manifest per content type (data; position and equality deletes share one
 * delete manifest), rewrites parent manifests that hold removed files (DELETED entries, others
 * EXISTING), carries the remaining parent manifests over unchanged (merging them past
 * merge_min_count), writes the manifest list "snap-<id>-1-<uuid>.avro" and returns its location
 * with the snapshot summary (ICEBERG.md §A "Snapshot summary"). Files are written through io
 * with new unique names and never overwritten. FIRN_ERR_NOT_FOUND when a removed path is not
 * live in the parent; FIRN_ERR_INVALID when nothing changes.
 * Format v3 (ICEBERG.md §A "v3", §D): first_row_id assigned to new data manifests in list order
 * from in->first_row_id (result added_rows); added deletes must be DVs or equality deletes; for
 * every data file that gets a DV, its earlier DV (which must be the one in dv_replaces) and
 * file-scoped position-delete files are removed in the same commit: FIRN_ERR_EXISTS when it has
 * a live DV other than the expected one, FIRN_ERR_NOT_FOUND when the expected DV is no longer
 * live (both: reload and merge again). FIRN_ERR_NOT_FOUND too when a required data path is not a
 * live data file of the parent (reads every data manifest of the parent then: another writer
 * removed a file the caller deletes from; recompute the deletes). On error, files already
 * written stay (unreferenced;
 * orphan cleanup removes them). Not thread-safe. */
FIRN_MUST_CHECK firn_rc firn_snapshot_produce(firn_io *io,
                                              const firn_snapshot_input *in,
                                              firn_snapshot_result *out,
                                              firn_err *err);
/** Frees what r owns (NULL accepted). */
void firn_snapshot_result_deinit(firn_snapshot_result *r);

#endif
