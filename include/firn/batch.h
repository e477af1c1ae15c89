/* SPDX-License-Identifier: Apache-2.0 */
/* Typed column batches: the one currency between sources, the engine and the file writers.
 * A batch holds rows column by column (Arrow-like: values, validity bitmap, offsets), plus the
 * per-row change operation and source position. Its schema is a tree of fields carrying Iceberg
 * field ids and Iceberg types (format/spec.md "Schemas and Data Types"). */
#ifndef FIRN_BATCH_H
#define FIRN_BATCH_H

#include "firn/util.h"

/* ------------------------------------------------------------------------------------------------
 * Schema: Iceberg types and fields
 * ----------------------------------------------------------------------------------------------*/

/** Iceberg types (format v2 plus the v3 nanosecond timestamps). */
typedef enum firn_type {
    FIRN_TYPE_BOOLEAN = 1,
    FIRN_TYPE_INT,          /* 32-bit signed */
    FIRN_TYPE_LONG,         /* 64-bit signed */
    FIRN_TYPE_FLOAT,        /* IEEE 754 single */
    FIRN_TYPE_DOUBLE,       /* IEEE 754 double */
    FIRN_TYPE_DECIMAL,      /* decimal(precision <= 38, scale) */
    FIRN_TYPE_DATE,         /* days since 1970-01-01, int32 */
    FIRN_TYPE_TIME,         /* microseconds since midnight, int64 */
    FIRN_TYPE_TIMESTAMP,    /* microseconds since epoch, no zone, int64 */
    FIRN_TYPE_TIMESTAMPTZ,  /* microseconds since epoch, UTC, int64 */
    FIRN_TYPE_TIMESTAMP_NS, /* v3: nanoseconds since epoch, no zone, int64 */
    FIRN_TYPE_TIMESTAMPTZ_NS,
    FIRN_TYPE_STRING, /* UTF-8 */
    FIRN_TYPE_UUID,   /* 16 bytes, big-endian (RFC 4122 byte order) */
    FIRN_TYPE_FIXED,  /* fixed(length) bytes */
    FIRN_TYPE_BINARY,
    FIRN_TYPE_STRUCT,
    FIRN_TYPE_LIST,
    FIRN_TYPE_MAP,
} firn_type;

/** One field of a schema tree. A plain value type shared read-only by every module once built:
 * struct fields are its children; a list has one child (the element), a map two (key, value).
 * Owned by whoever built it (firn_field_free frees a tree built with firn_field_new/_add). */
typedef struct firn_field firn_field;
struct firn_field {
    int32_t id;        /* Iceberg field id (element-id/key-id/value-id for list/map children) */
    char *name;        /* owned; "element", "key", "value" for list/map children */
    bool required;     /* Iceberg "required" (element-required / value-required for children) */
    firn_type type;    /* FIRN_TYPE_* */
    int32_t precision; /* decimal only: 1..38 */
    int32_t scale;     /* decimal only: 0..precision */
    int32_t length;    /* fixed only: bytes */
    size_t n_children; /* struct: fields; list: 1; map: 2 */
    firn_field **children;
    uint8_t meta; /* FIRN_META_*: a top-level column firn_batch_end_row fills; 0 = data */
};

/** Metadata columns the engine adds to every table (README "Metadata columns"). A top-level
 * field with one of these kinds in `meta` is filled by firn_batch_end_row, never by sources. */
typedef enum firn_meta_kind {
    FIRN_META_NONE = 0,
    FIRN_META_OP = 1,        /* string: "r", "c", "u" or "d" (firn_op) */
    FIRN_META_LSN = 2,       /* long: source position (PostgreSQL LSN as an integer) */
    FIRN_META_COMMIT_TS = 3, /* timestamptz: source commit time; null for snapshot reads */
    FIRN_META_INGEST_TS = 4, /* timestamptz: when firn read the change */
    FIRN_META_NULL = 5,      /* any type: always null (a column the source no longer has) */
} firn_meta_kind;

/** Returns a new owned field (name copied). Free with firn_field_free. */
firn_field *firn_field_new(int32_t id, const char *name, firn_type type, bool required);
/** Returns a new decimal(precision, scale) field. */
firn_field *firn_field_new_decimal(
    int32_t id, const char *name, int32_t precision, int32_t scale, bool required);
/** Returns a new fixed(length) field. */
firn_field *firn_field_new_fixed(int32_t id, const char *name, int32_t length, bool required);
/** Appends child to parent (a struct, list or map); parent takes ownership of child. */
void firn_field_add(firn_field *parent, firn_field *child);
/** Frees a field tree (NULL accepted). */
void firn_field_free(firn_field *f);
/** Returns an owned deep copy. */
firn_field *firn_field_clone(const firn_field *f);
/** True when the type is stored as fixed-width values (not string/binary/nested). */
bool firn_type_is_fixed_width(const firn_field *f);
/** Byte width of one value of a fixed-width type in a column (boolean 1, int/date 4,
 * long/time/timestamps 8, float 4, double 8, decimal 8 when precision <= 18 else 16, uuid 16,
 * fixed its length); 0 for variable-length and nested types. */
size_t firn_type_value_size(const firn_field *f);
/** Iceberg's name of a primitive type ("long", "decimal(9,2)", "fixed[16]") into out. */
void firn_type_format(const firn_field *f, char *out, size_t out_cap);

/* ------------------------------------------------------------------------------------------------
 * Columns and batches
 * ----------------------------------------------------------------------------------------------*/

/** Per-row change operation (DESIGN.md "The path of a change"). */
typedef enum firn_op {
    FIRN_OP_READ = 'r',   /* snapshot (backfill) read */
    FIRN_OP_INSERT = 'c', /* insert */
    FIRN_OP_UPDATE = 'u', /* update: the row is the new image */
    FIRN_OP_DELETE = 'd', /* delete: the row holds the key (or old image) */
} firn_op;

typedef struct firn_column firn_column;
typedef struct firn_batch firn_batch;

/** Returns an empty batch for the fields of schema (a STRUCT field; borrowed, must outlive the
 * batch): one column per top-level field, nested columns for struct/list/map. Memory grows as
 * rows are appended; firn_batch_reset keeps it. Free with firn_batch_free. Not thread-safe. */
firn_batch *firn_batch_new(const firn_field *schema);
/** Frees the batch and its columns (NULL accepted). */
void firn_batch_free(firn_batch *b);
/** Empties every column and the row metadata, keeping allocated memory. */
void firn_batch_reset(firn_batch *b);
/** The schema the batch was made for (borrowed). */
const firn_field *firn_batch_schema(const firn_batch *b);
/** Number of complete rows. */
size_t firn_batch_rows(const firn_batch *b);
/** Number of top-level columns (= schema children). */
size_t firn_batch_columns(const firn_batch *b);
/** Top-level column i (borrowed; valid for the batch's lifetime). */
firn_column *firn_batch_column(firn_batch *b, size_t i);
/** Completes a row after one value was appended to every top-level data column: records its
 * operation and source position (PostgreSQL: commit LSN) and fills the metadata columns (fields
 * with `meta` set) from them and from firn_batch_set_times. FIRN_ERR_INTERNAL (with a message
 * naming the column) when a column's length does not equal the new row count. */
FIRN_MUST_CHECK firn_rc firn_batch_end_row(firn_batch *b, firn_op op, uint64_t lsn, firn_err *err);
/** Completes n rows at once, all with operation op and position lsn, after n values were
 * appended to every top-level column. Errors as firn_batch_end_row. */
FIRN_MUST_CHECK firn_rc
firn_batch_end_rows(firn_batch *b, size_t n, firn_op op, uint64_t lsn, firn_err *err);
/** Sets the times metadata columns receive from the next firn_batch_end_row on: commit_ts_us
 * (microseconds since epoch; INT64_MIN = null) and ingest_ts_us (INT64_MIN = the wall clock at
 * the first row after this call or after a reset). */
void firn_batch_set_times(firn_batch *b, int64_t commit_ts_us, int64_t ingest_ts_us);
/** Operation of row i (i < rows). */
firn_op firn_batch_op(const firn_batch *b, size_t i);
/** Source position of row i. */
uint64_t firn_batch_lsn(const firn_batch *b, size_t i);
/** Approximate bytes held by values, offsets and bitmaps (for memory budgets and flushing). */
size_t firn_batch_bytes(const firn_batch *b);

/* Appending values. Each call appends one slot to the column; the value must match the
 * column's type (asserted). Nested values: for a list, call firn_column_list_begin, append the
 * elements to firn_column_child(col, 0), then firn_column_list_end; a map is a list of entries
 * whose key and value columns are children 0 and 1 (append one key and one value per entry); a
 * struct appends one value to each child then firn_column_struct_end. */
void firn_column_append_null(firn_column *c);
void firn_column_append_bool(firn_column *c, bool v);
/** int, date (days since epoch). */
void firn_column_append_i32(firn_column *c, int32_t v);
/** long, time, timestamp(tz) (microseconds; nanoseconds for the _ns types), decimal with
 * precision <= 18 (unscaled value). */
void firn_column_append_i64(firn_column *c, int64_t v);
void firn_column_append_float(firn_column *c, float v);
void firn_column_append_double(firn_column *c, double v);
/** decimal with precision > 18: unscaled value as a 128-bit two's-complement integer given as
 * its high and low 64-bit halves. */
void firn_column_append_i128(firn_column *c, int64_t hi, uint64_t lo);
/** string (UTF-8, not validated here), binary; uuid (len 16), fixed (len = length). Bytes are
 * copied. */
void firn_column_append_bytes(firn_column *c, const void *p, size_t len);
/** Starts a list (or map) value; elements go to the child column(s). */
void firn_column_list_begin(firn_column *c);
/** Appends a copy of slot i of src (a column of the same type, e.g. of another batch of the
 * same schema) to c, nested values included. */
void firn_column_append_from(firn_column *c, const firn_column *src, size_t i);
/** Ends the list value started last. */
void firn_column_list_end(firn_column *c);
/** Ends a struct value whose children each received one value. */
void firn_column_struct_end(firn_column *c);

/* Bulk appending (for decoders such as the Parquet reader). */

/** Appends n slots to a fixed-width column (firn_type_is_fixed_width) and returns a pointer to
 * their n values (firn_type_value_size bytes each, firn_column_values layout) for the caller to
 * fill; valid until the next append or reset. valid is NULL (every slot present) or n bytes,
 * nonzero = present; then the returned values are zeroed and the caller fills only the present
 * slots (null slots hold zeros). */
void *firn_column_append_fixed_n(firn_column *c, size_t n, const uint8_t *valid);
/** Appends n values to a string or binary column: value i is the bytes data[ends[i-1]..ends[i])
 * (ends[-1] taken as 0; ends ascending, offsets in bytes), a null when valid is not NULL and
 * valid[i] is 0 (its bytes empty: ends[i] == ends[i-1]). As n calls of firn_column_append_bytes
 * or firn_column_append_null; data, ends and valid are only read during the call. */
void firn_column_append_bytes_n(
    firn_column *c, size_t n, const uint8_t *data, const uint32_t *ends, const uint8_t *valid);
/** Appends n null slots to a primitive column (as n calls of firn_column_append_null). */
void firn_column_append_nulls(firn_column *c, size_t n);

/* Reading columns (for writers). Pointers are borrowed, valid until the next append or reset. */

/** The column's field (borrowed from the schema). */
const firn_field *firn_column_field(const firn_column *c);
/** Number of slots (values or nulls). */
size_t firn_column_length(const firn_column *c);
/** Number of null slots. */
size_t firn_column_null_count(const firn_column *c);
/** Validity bitmap, LSB-first, bit set = present; NULL when the column has no nulls. */
const uint8_t *firn_column_validity(const firn_column *c);
/** True when slot i holds a value. */
bool firn_column_is_valid(const firn_column *c, size_t i);
/** Fixed-width values, firn_type_value_size bytes each, native byte order (128-bit decimals as
 * {uint64 lo, int64 hi}; uuid/fixed as raw bytes). Null slots hold zeros. NULL for other types. */
const void *firn_column_values(const firn_column *c);
/** Offsets for string/binary (into firn_column_data) and list/map (into the child column):
 * length + 1 entries, slot i spans [offsets[i], offsets[i+1]). NULL for other types. */
const uint32_t *firn_column_offsets(const firn_column *c);
/** Concatenated bytes of a string/binary column. */
const uint8_t *firn_column_data(const firn_column *c);
/** Child column i of a struct, list (0: element) or map (0: key, 1: value). */
firn_column *firn_column_child(firn_column *c, size_t i);
/** Number of children (0 for primitive columns). */
size_t firn_column_children(const firn_column *c);

/* ------------------------------------------------------------------------------------------------
 * Row selection and keys (used by the engine to fold changes by primary key)
 * ----------------------------------------------------------------------------------------------*/

/** Appends rows rows[0..n) of src, in that order, to dst (same schema, asserted), with their
 * operations and positions. Copies values; src is unchanged. */
void firn_batch_append_rows(firn_batch *dst, const firn_batch *src, const uint32_t *rows, size_t n);
/** Appends the canonical encoding of the values of row `row` in the top-level columns
 * cols[0..n_cols) to out: per column a tag byte (0 null, 1 value), then fixed-width values as
 * stored, variable-length values as a 4-byte little-endian length and the bytes. Two rows have
 * equal encodings exactly when their key values are equal. Nested key columns are not allowed
 * (asserted). FIRN_ERR_TOO_LARGE when out is full. */
FIRN_MUST_CHECK firn_rc firn_batch_key_encode(
    const firn_batch *b, size_t row, const uint32_t *cols, size_t n_cols, firn_buf *out);
/** Appends the encodings (firn_batch_key_encode) of every row of b, in order, to out, and the
 * offset in out where each ends to ends[0..firn_batch_rows(b)) (caller-sized). A key of one
 * fixed-width column without nulls (an int or bigint primary key) is written in one pass.
 * FIRN_ERR_TOO_LARGE when out is full or its length would pass UINT32_MAX bytes (out is then
 * partly appended). */
FIRN_MUST_CHECK firn_rc firn_batch_keys_encode(
    const firn_batch *b, const uint32_t *cols, size_t n_cols, firn_buf *out, uint32_t *ends);
/** 64-bit hash of a key encoding (from firn_batch_key_encode); a bijection (splitmix64 of the
 * value) for a single non-null 8-byte integer key, so such keys never collide. */
uint64_t firn_key_hash(const uint8_t *key, size_t len);

#endif
