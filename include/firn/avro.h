/* SPDX-License-Identifier: Apache-2.0 */
/* Avro object container files (Avro specification "Object Container Files" and "Binary
 * Encoding"), hand-rolled because Iceberg needs field ids, defaults, logical types and user
 * metadata in the header. Writer: binary encoders plus a block/sync container with codecs null
 * and deflate. Reader: parses the writer schema from the header and decodes records into a
 * small value tree. */
#ifndef FIRN_AVRO_H
#define FIRN_AVRO_H

#include "firn/util.h"

/* ------------------------------------------------------------------------------------------------
 * Binary encoding (Avro spec "Binary Encoding"). Each appends to a bounded firn_buf and fails
 * only with FIRN_ERR_TOO_LARGE. A record is its fields in schema order, a union is the branch
 * index (firn_avro_put_long) then the value, an array or map is firn_avro_put_block_count(n)
 * then n items (maps: a string key before each value), repeated, then firn_avro_put_long(0).
 * ----------------------------------------------------------------------------------------------*/

/** Zig-zag varint long (also used for int, enum indexes, union branches and counts). */
FIRN_MUST_CHECK firn_rc firn_avro_put_long(firn_buf *b, int64_t v);
/** Boolean as one byte 0/1. */
FIRN_MUST_CHECK firn_rc firn_avro_put_bool(firn_buf *b, bool v);
/** IEEE 754 float, 4 bytes little endian. */
FIRN_MUST_CHECK firn_rc firn_avro_put_float(firn_buf *b, float v);
/** IEEE 754 double, 8 bytes little endian. */
FIRN_MUST_CHECK firn_rc firn_avro_put_double(firn_buf *b, double v);
/** bytes or string: long length then the raw bytes (p may be NULL when len is 0). */
FIRN_MUST_CHECK firn_rc firn_avro_put_bytes(firn_buf *b, const void *p, size_t len);
/** string from a NUL-terminated C string. */
FIRN_MUST_CHECK firn_rc firn_avro_put_string(firn_buf *b, const char *s);
/** fixed: the raw bytes, no length. */
FIRN_MUST_CHECK firn_rc firn_avro_put_fixed(firn_buf *b, const void *p, size_t len);

/* ------------------------------------------------------------------------------------------------
 * Container writer
 * ----------------------------------------------------------------------------------------------*/

/** Block compression codecs ("avro.codec"). */
typedef enum firn_avro_codec {
    FIRN_AVRO_CODEC_NULL = 0, /* "null": blocks stored as is */
    FIRN_AVRO_CODEC_DEFLATE,  /* "deflate": raw RFC 1951 stream, no zlib header or trailer */
} firn_avro_codec;

typedef struct firn_avro_writer firn_avro_writer;

/** Returns a writer that builds a whole container file in memory (manifests and manifest lists
 * are small; the caller uploads the bytes and so knows their exact length). schema_json is
 * the writer schema, copied; it is not validated here (firn_avro_schema_parse does that).
 * max_file_bytes bounds the output (FIRN_ERR_TOO_LARGE past it). The sync marker is random.
 * Free with firn_avro_writer_free. Not thread-safe. */
firn_avro_writer *
firn_avro_writer_new(const char *schema_json, firn_avro_codec codec, size_t max_file_bytes);
/** Frees w (NULL accepted). */
void firn_avro_writer_free(firn_avro_writer *w);
/** Adds a user metadata entry to the header (key and value copied; value is stored as Avro
 * bytes). Keys starting with "avro." are reserved: FIRN_ERR_INVALID. Must precede the first
 * record (FIRN_ERR_INVALID after). A repeated key replaces the earlier value. */
FIRN_MUST_CHECK firn_rc firn_avro_writer_set_meta(
    firn_avro_writer *w, const char *key, const void *value, size_t value_len, firn_err *err);
/** Replaces the random 16-byte sync marker (for reproducible files in tests). */
void firn_avro_writer_set_sync(firn_avro_writer *w, const uint8_t sync[16]);
/** Sets the uncompressed size at which a block is closed (default 1 MiB). */
void firn_avro_writer_set_block_bytes(firn_avro_writer *w, size_t block_bytes);
/** Returns the buffer to append the binary encoding of the next record to (borrowed, valid
 * until the next writer call). Finish the record with firn_avro_writer_end_record. */
firn_buf *firn_avro_writer_record(firn_avro_writer *w);
/** Counts the record appended to firn_avro_writer_record's buffer and closes the block when it
 * is large enough. FIRN_ERR_TOO_LARGE past max_file_bytes, FIRN_ERR_INTERNAL on a codec
 * failure. */
FIRN_MUST_CHECK firn_rc firn_avro_writer_end_record(firn_avro_writer *w, firn_err *err);
/** Records written so far. */
uint64_t firn_avro_writer_count(const firn_avro_writer *w);
/** Completes the file (header, blocks) and gives its bytes to out (appended; out must be
 * initialized). The writer may only be freed afterwards. */
FIRN_MUST_CHECK firn_rc firn_avro_writer_finish(firn_avro_writer *w, firn_buf *out, firn_err *err);

/* ------------------------------------------------------------------------------------------------
 * Schemas (parsed writer schemas, read-only trees)
 * ----------------------------------------------------------------------------------------------*/

/** Avro schema types. */
typedef enum firn_avro_type {
    FIRN_AVRO_NULL = 0,
    FIRN_AVRO_BOOLEAN,
    FIRN_AVRO_INT,
    FIRN_AVRO_LONG,
    FIRN_AVRO_FLOAT,
    FIRN_AVRO_DOUBLE,
    FIRN_AVRO_BYTES,
    FIRN_AVRO_STRING,
    FIRN_AVRO_FIXED,
    FIRN_AVRO_ENUM,
    FIRN_AVRO_ARRAY,
    FIRN_AVRO_MAP,
    FIRN_AVRO_RECORD,
    FIRN_AVRO_UNION,
} firn_avro_type;

/** "No id" marker for field_id, element_id, key_id and value_id. */
#define FIRN_AVRO_NO_ID INT32_MIN

typedef struct firn_avro_schema firn_avro_schema;

/** One record field: name, Iceberg "field-id" (FIRN_AVRO_NO_ID if absent) and type. */
typedef struct firn_avro_field {
    char *name;
    int32_t field_id;
    firn_avro_schema *type; /* borrowed from the schema tree */
} firn_avro_field;

/** A node of a parsed schema. Named types referenced again by name share one node. */
struct firn_avro_schema {
    firn_avro_type type;
    char *name;           /* record, enum, fixed: full name; else NULL */
    char *logical_type;   /* "logicalType" or NULL */
    size_t fixed_size;    /* fixed only */
    int32_t precision;    /* "precision" of decimal logical types, else 0 */
    int32_t scale;        /* "scale" of decimal logical types, else 0 */
    int8_t adjust_to_utc; /* Iceberg "adjust-to-utc": 1 true, 0 false, -1 absent */
    int32_t element_id;   /* array "element-id" */
    int32_t key_id;       /* map "key-id" */
    int32_t value_id;     /* map "value-id" */
    size_t n_fields;      /* record */
    firn_avro_field *fields;
    size_t n_branches; /* union */
    firn_avro_schema **branches;
    firn_avro_schema *items; /* array items, map values */
    size_t n_symbols;        /* enum */
    char **symbols;
};

typedef struct firn_avro_schema_set firn_avro_schema_set;

/** Parses schema JSON (len bytes, not NUL-terminated) into a tree owned by *out (free with
 * firn_avro_schema_set_free). FIRN_ERR_PARSE for invalid JSON, unknown types, unknown named
 * references, duplicate names or nesting deeper than 64. */
FIRN_MUST_CHECK firn_rc firn_avro_schema_parse(const char *json,
                                               size_t len,
                                               firn_avro_schema_set **out,
                                               firn_err *err);
/** The root schema of a parsed set (borrowed). */
const firn_avro_schema *firn_avro_schema_root(const firn_avro_schema_set *set);
/** Frees a parsed schema (NULL accepted). */
void firn_avro_schema_set_free(firn_avro_schema_set *set);
/** Index of the record field named name, or -1. */
int firn_avro_schema_field_index(const firn_avro_schema *record, const char *name);

/* ------------------------------------------------------------------------------------------------
 * Reader: decodes records into value trees
 * ----------------------------------------------------------------------------------------------*/

typedef struct firn_avro_value firn_avro_value;

/** A decoded value. Unions are transparent: a union value is the value of its branch (type
 * FIRN_AVRO_NULL for the null branch) with the branch index in `branch`. Arrays hold items in
 * `items`; maps hold values in `items` and keys in `keys`; records hold one item per schema
 * field. Bytes, strings and fixed point into reader memory (not NUL-terminated). */
struct firn_avro_value {
    firn_avro_type type;
    const firn_avro_schema *schema; /* the branch schema for unions */
    int32_t branch;                 /* union branch index, -1 outside unions */
    bool b;
    int64_t l; /* int, long, enum index */
    double d;  /* float, double */
    firn_slice bytes;
    size_t n;
    firn_avro_value *items;
    firn_slice *keys;
};

typedef struct firn_avro_reader firn_avro_reader;

/** Opens a container file held in memory (data borrowed: must outlive the reader): checks the
 * magic, reads the header metadata, parses "avro.schema" and accepts codecs null and deflate.
 * FIRN_ERR_PARSE for malformed input, FIRN_ERR_UNSUPPORTED for other codecs. Free with
 * firn_avro_reader_free. Not thread-safe. */
FIRN_MUST_CHECK firn_rc firn_avro_reader_open(const void *data,
                                              size_t len,
                                              firn_avro_reader **out,
                                              firn_err *err);
/** Frees r (NULL accepted). */
void firn_avro_reader_free(firn_avro_reader *r);
/** Borrowed value of header metadata key (with its length in out_len), or NULL if absent. */
const uint8_t *firn_avro_reader_meta(const firn_avro_reader *r, const char *key, size_t *out_len);
/** The writer schema (borrowed, valid for the reader's lifetime). */
const firn_avro_schema *firn_avro_reader_schema(const firn_avro_reader *r);
/** Decodes the next record into *out (borrowed, valid until the next call), or stores NULL at
 * the end of the file. FIRN_ERR_PARSE for malformed blocks or values (wrong sync marker, bad
 * deflate data, truncated values), FIRN_ERR_TOO_LARGE when a block or record passes the
 * reader's limits (256 MiB per block, 1 Mi values per record). */
FIRN_MUST_CHECK firn_rc firn_avro_reader_next(firn_avro_reader *r,
                                              const firn_avro_value **out,
                                              firn_err *err);

/** The record field named name (NULL when the record has none). */
const firn_avro_value *firn_avro_value_field(const firn_avro_value *record, const char *name);
/** The record field whose Iceberg field-id is id (NULL when none). */
const firn_avro_value *firn_avro_value_field_id(const firn_avro_value *record, int32_t id);

#endif
