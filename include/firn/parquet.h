/* SPDX-License-Identifier: Apache-2.0 */
/* Parquet for Iceberg: a streaming file writer fed with column batches (data page v1, PLAIN and
 * RLE_DICTIONARY, zstd/snappy/gzip), a rolling layer that starts a new file at a target size, the
 * per-field metrics Iceberg manifests need, and a footer (FileMetaData) reader. Writes through a
 * sink callback, never through FileIO (ICEBERG.md §C, parquet-format parquet.thrift). */
#ifndef FIRN_PARQUET_H
#define FIRN_PARQUET_H

#include "firn/batch.h"

/* ------------------------------------------------------------------------------------------------
 * Options
 * ----------------------------------------------------------------------------------------------*/

/** Compression codecs (values of parquet.thrift CompressionCodec). */
typedef enum firn_pq_codec {
    FIRN_PQ_UNCOMPRESSED = 0,
    FIRN_PQ_SNAPPY = 1,
    FIRN_PQ_GZIP = 2,
    FIRN_PQ_ZSTD = 6,
    FIRN_PQ_LZ4_RAW = 7, /* reader only, when built with liblz4 */
} firn_pq_codec;

/** One key_value_metadata entry of the footer (both strings borrowed). */
typedef struct firn_pq_kv {
    const char *key;
    const char *value;
} firn_pq_kv;

/** Writer settings. Fill with firn_pq_options_init, then change what you need. Sizes are bytes of
 * encoded (compressed) data as the writer estimates them while buffering. */
typedef struct firn_pq_options {
    firn_pq_codec codec;   /* default FIRN_PQ_ZSTD */
    int compression_level; /* zstd 1..22 (default 1, as pyarrow), gzip 1..9 (default 6); 0 = default
                            */
    size_t page_bytes;     /* data page target, default 1 MiB */
    size_t page_rows;      /* most level entries (rows for flat columns) per page, 20000 */
    size_t dict_bytes;     /* dictionary size after which a chunk falls back to PLAIN, 2 MiB */
    size_t row_group_bytes;       /* row group target, default 128 MiB */
    size_t row_group_value_bytes; /* also ends a row group once its rows held this many bytes in
                                   * the batches written (firn_batch_bytes): what a reader
                                   * decodes at once, however well they compress; 0 = no limit
                                   * (the default) */
    size_t file_bytes;            /* roller only: file size at which a new file starts, 512 MiB */
    const firn_pq_kv *kv;         /* footer key_value_metadata (e.g. "iceberg.schema"), borrowed */
    size_t n_kv;                  /* entries in kv */
} firn_pq_options;

/** Fills o with the defaults listed in firn_pq_options. */
void firn_pq_options_init(firn_pq_options *o);

/* ------------------------------------------------------------------------------------------------
 * Metrics of a finished file (Iceberg manifest data_file fields, format/spec.md "Manifests")
 * ----------------------------------------------------------------------------------------------*/

/** Largest Iceberg bound: 16 code points of UTF-8 (truncate(16)) or a 16-byte decimal/uuid. */
#define FIRN_PQ_BOUND_MAX 64

/** Metrics of one leaf column. Bounds are Iceberg single-value binary (spec Appendix D): ints
 * and floats little-endian, decimals big-endian two's complement in the fewest bytes, strings
 * truncated to 16 code points (the upper bound incremented, Iceberg Java truncate(16)), binary
 * and fixed truncated to 16 bytes, uuid 16 bytes. NaN never enters a bound (nan_count instead);
 * leaves inside a list or map have no bounds (Iceberg Java). */
typedef struct firn_pq_field_metrics {
    int32_t field_id;
    uint64_t column_size_bytes; /* compressed bytes of the column's chunks, page headers included */
    uint64_t value_count;       /* level entries: values + nulls (+ empty lists) */
    uint64_t null_count;
    bool has_nan_count; /* float and double only */
    uint64_t nan_count;
    bool has_lower;
    uint8_t lower[FIRN_PQ_BOUND_MAX];
    size_t lower_len;
    bool has_upper;
    uint8_t upper[FIRN_PQ_BOUND_MAX];
    size_t upper_len;
} firn_pq_field_metrics;

/** Metrics of one file: one fields entry per leaf column in schema order; split_offsets are the
 * row groups' first page offsets. Owned by whoever took them; free with
 * firn_pq_file_metrics_deinit. */
typedef struct firn_pq_file_metrics {
    uint64_t record_count;
    uint64_t file_size_bytes;
    size_t n_fields;
    firn_pq_field_metrics *fields;
    size_t n_split_offsets;
    int64_t *split_offsets;
} firn_pq_file_metrics;

/** Frees the arrays of m and zeroes it (NULL accepted). */
void firn_pq_file_metrics_deinit(firn_pq_file_metrics *m);

/* ------------------------------------------------------------------------------------------------
 * Writer: one Parquet file
 * ----------------------------------------------------------------------------------------------*/

/** The byte sink of a file: appends len bytes at p (borrowed for the call). The writer calls it
 * in file order and tracks the offset itself. Any error aborts the file. */
typedef firn_rc (*firn_pq_write_fn)(void *ctx, const void *p, size_t len, firn_err *err);

typedef struct firn_pq_writer firn_pq_writer;

/** Starts a file for rows of schema (a STRUCT field whose children are the columns; borrowed,
 * must outlive the writer). Writes the leading "PAR1" through write(ctx, ...). opts is copied
 * (its kv strings stay borrowed until close); NULL means defaults. Errors: FIRN_ERR_INVALID for
 * bad options, FIRN_ERR_UNSUPPORTED for a type Parquet cannot hold, the sink's error. Memory:
 * about one row group of encoded data. Not thread-safe; one writer per thread. */
FIRN_MUST_CHECK firn_rc firn_pq_writer_new(const firn_field *schema,
                                           const firn_pq_options *opts,
                                           firn_pq_write_fn write,
                                           void *ctx,
                                           firn_pq_writer **out,
                                           firn_err *err);

/** Appends rows [row_begin, row_end) of batch b (made for the writer's schema; borrowed for the
 * call; values are encoded and copied, so b may be reset afterwards). Flushes a row group to the
 * sink when it passes the row-group target. Errors: FIRN_ERR_INVALID (NULL in a required field,
 * batch of another schema), the sink's error; after an error the writer only accepts free. */
FIRN_MUST_CHECK firn_rc firn_pq_writer_write_rows(
    firn_pq_writer *w, firn_batch *b, size_t row_begin, size_t row_end, firn_err *err);

/** firn_pq_writer_write_rows for every row of b. */
FIRN_MUST_CHECK firn_rc firn_pq_writer_write(firn_pq_writer *w, firn_batch *b, firn_err *err);

/** Bytes the file would have if closed now, roughly: bytes written to the sink plus the encoded
 * size of the buffered row group (footer excluded). For rolling files by size. */
uint64_t firn_pq_writer_bytes(const firn_pq_writer *w);

/** Rows appended so far. */
uint64_t firn_pq_writer_rows(const firn_pq_writer *w);

/** Flushes the last row group and writes the footer and the trailing "PAR1". A file with no rows
 * is valid (no row groups). Afterwards firn_pq_writer_take_metrics is available. */
FIRN_MUST_CHECK firn_rc firn_pq_writer_close(firn_pq_writer *w, firn_err *err);

/** Moves the metrics of the closed file into *out (caller owns them: free with
 * firn_pq_file_metrics_deinit). A second call yields empty metrics. Asserts the file is closed. */
void firn_pq_writer_take_metrics(firn_pq_writer *w, firn_pq_file_metrics *out);

/** Frees the writer (NULL accepted). An unclosed file is abandoned: nothing more is written. */
void firn_pq_writer_free(firn_pq_writer *w);

/* ------------------------------------------------------------------------------------------------
 * Roller: a sequence of files of about file_bytes each
 * ----------------------------------------------------------------------------------------------*/

/** Callbacks of the roller; the Iceberg layer puts FileIO behind them. */
typedef struct firn_pq_roll_callbacks {
    void *ctx;
    /** Opens file number file_index (0, 1, ...) and gives its sink. */
    firn_rc (*open_file)(void *ctx,
                         uint32_t file_index,
                         firn_pq_write_fn *out_write,
                         void **out_write_ctx,
                         firn_err *err);
    /** The file is complete (footer written): the callee closes the sink. To keep the
     * metrics it copies *metrics and zeroes it (then owns the arrays: free with
     * firn_pq_file_metrics_deinit); whatever is left in *metrics is freed by the roller. */
    firn_rc (*close_file)(void *ctx,
                          uint32_t file_index,
                          firn_pq_file_metrics *metrics,
                          firn_err *err);
} firn_pq_roll_callbacks;

typedef struct firn_pq_roller firn_pq_roller;

/** Makes a roller for schema (borrowed) with opts (copied; NULL = defaults) and callbacks (copied).
 * No file is opened until the first row arrives. Not thread-safe. */
FIRN_MUST_CHECK firn_rc firn_pq_roller_new(const firn_field *schema,
                                           const firn_pq_options *opts,
                                           const firn_pq_roll_callbacks *cb,
                                           firn_pq_roller **out,
                                           firn_err *err);

/** Appends every row of b, closing the current file and opening the next whenever it reaches
 * opts.file_bytes (checked every few thousand rows, so files end slightly past the target).
 * Errors: as firn_pq_writer_write_rows and the callbacks'. */
FIRN_MUST_CHECK firn_rc firn_pq_roller_write(firn_pq_roller *r, firn_batch *b, firn_err *err);

/** Closes the current file, if any (close_file is called for it). */
FIRN_MUST_CHECK firn_rc firn_pq_roller_close(firn_pq_roller *r, firn_err *err);

/** Number of files completed so far. */
uint32_t firn_pq_roller_files(const firn_pq_roller *r);

/** Frees the roller and abandons an open file without calling close_file (NULL accepted). */
void firn_pq_roller_free(firn_pq_roller *r);

/* ------------------------------------------------------------------------------------------------
 * Footer reader (FileMetaData, Thrift compact)
 * ----------------------------------------------------------------------------------------------*/

/** Statistics of a column chunk (min/max as PLAIN bytes without length prefix). */
typedef struct firn_pq_stats {
    bool has_null_count;
    int64_t null_count;
    bool has_min;
    uint8_t *min_value;
    size_t min_len;
    bool has_max;
    uint8_t *max_value;
    size_t max_len;
    bool has_nan_count;
    int64_t nan_count;
} firn_pq_stats;

/** One SchemaElement. Integers absent from the file are -1 (logical_type 0). */
typedef struct firn_pq_schema_elem {
    char *name;
    int32_t type;           /* parquet Type, -1 for groups */
    int32_t type_length;    /* FIXED_LEN_BYTE_ARRAY width */
    int32_t repetition;     /* REQUIRED 0, OPTIONAL 1, REPEATED 2; -1 absent (root) */
    int32_t num_children;   /* groups */
    int32_t converted_type; /* ConvertedType */
    int32_t scale;
    int32_t precision;
    bool has_field_id;
    int32_t field_id;
    int32_t logical_type;  /* LogicalType union member id (1 STRING ... 14 UUID), 0 none */
    bool logical_utc;      /* TIME/TIMESTAMP isAdjustedToUTC */
    int32_t logical_unit;  /* TIME/TIMESTAMP unit: 1 MILLIS, 2 MICROS, 3 NANOS */
    int32_t logical_scale; /* DECIMAL */
    int32_t logical_precision;
    int32_t logical_int_bits; /* INTEGER bitWidth (8, 16, 32, 64), -1 absent */
    bool logical_int_signed;  /* INTEGER isSigned */
} firn_pq_schema_elem;

/** ColumnChunk + ColumnMetaData. */
typedef struct firn_pq_chunk_meta {
    int32_t type;
    int32_t codec;
    size_t n_path;
    char **path;
    size_t n_encodings;
    int32_t *encodings;
    int64_t num_values;
    int64_t total_uncompressed_size;
    int64_t total_compressed_size;
    int64_t data_page_offset;
    int64_t dictionary_page_offset; /* -1 when absent */
    firn_pq_stats stats;
} firn_pq_chunk_meta;

typedef struct firn_pq_row_group_meta {
    int64_t num_rows;
    int64_t total_byte_size;
    int64_t file_offset;           /* -1 when absent */
    int64_t total_compressed_size; /* -1 when absent */
    size_t n_columns;
    firn_pq_chunk_meta *columns;
} firn_pq_row_group_meta;

typedef struct firn_pq_file_meta {
    int32_t version;
    int64_t num_rows;
    char *created_by; /* NULL when absent */
    size_t n_schema;
    firn_pq_schema_elem *schema; /* depth-first, root first */
    size_t n_row_groups;
    firn_pq_row_group_meta *row_groups;
    size_t n_kv;
    char **kv_keys;
    char **kv_values; /* entries may be NULL */
    size_t n_column_orders;
} firn_pq_file_meta;

/** Locates the footer from the last 8 bytes of a file of file_size bytes: checks the magic and
 * stores the FileMetaData length in *out_len. FIRN_ERR_PARSE when it is not a Parquet tail. */
FIRN_MUST_CHECK firn_rc firn_pq_footer_locate(const uint8_t tail[8],
                                              uint64_t file_size,
                                              uint32_t *out_len,
                                              firn_err *err);

/** Decodes FileMetaData from len bytes at p (borrowed). Returns an owned tree in *out (free with
 * firn_pq_file_meta_free). FIRN_ERR_PARSE on malformed or truncated input (never reads past
 * len; nesting and counts are bounded). Thread-safe. */
FIRN_MUST_CHECK firn_rc firn_pq_footer_parse(const void *p,
                                             size_t len,
                                             firn_pq_file_meta **out,
                                             firn_err *err);

/** Frees a decoded footer (NULL accepted). */
void firn_pq_file_meta_free(firn_pq_file_meta *m);

/* ================================================================================================
 * Column reader (owner: pqread). Reads selected flat primitive columns of any writer's file into
 * column batches, row group by row group (parquet-format: parquet.thrift PageHeader, Encodings.md,
 * Compression.md; Iceberg spec "Column Projection" for field-id and name matching).
 *
 * Supported: physical BOOLEAN, INT32, INT64, FLOAT, DOUBLE, BYTE_ARRAY, FIXED_LEN_BYTE_ARRAY;
 * REQUIRED/OPTIONAL leaves with max repetition level 0; encodings PLAIN, PLAIN_DICTIONARY,
 * RLE_DICTIONARY, RLE (booleans, levels), BIT_PACKED (levels), DELTA_BINARY_PACKED,
 * DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY, BYTE_STREAM_SPLIT; data pages v1 and v2; codecs
 * uncompressed, snappy, gzip, zstd and LZ4_RAW (when built with liblz4).
 * Everything read from the file is untrusted: sizes are checked against the file size and the
 * footer, decompressed sizes against the page header, and malformed input is FIRN_ERR_PARSE.
 * ==============================================================================================*/

/** Reads len bytes at offset of the file: the callee appends exactly len bytes to out (which
 * the reader has emptied; its max is at least len) or fails (e.g. FIRN_ERR_IO). A FileIO range
 * read goes behind it, so the parquet module does not depend on io. */
typedef firn_rc (*firn_pq_read_fn)(
    void *ctx, uint64_t offset, size_t len, firn_buf *out, firn_err *err);

typedef struct firn_pq_reader firn_pq_reader;

/** Opens a Parquet file held in memory: p (borrowed, must outlive the reader) of len bytes.
 * Parses the footer. Errors: FIRN_ERR_PARSE (not Parquet, malformed footer or schema),
 * FIRN_ERR_TOO_LARGE (footer over 256 MiB). The reader is not thread-safe; distinct readers
 * are independent. */
FIRN_MUST_CHECK firn_rc firn_pq_reader_open_mem(const void *p,
                                                size_t len,
                                                firn_pq_reader **out,
                                                firn_err *err);

/** Opens a Parquet file of file_size bytes read through read_at(ctx, ...) (ctx borrowed, must
 * outlive the reader). Reads the tail (up to 64 KiB, plus the rest of a longer footer) and parses
 * the footer. Errors: as firn_pq_reader_open_mem plus read_at's. */
FIRN_MUST_CHECK firn_rc firn_pq_reader_open(
    firn_pq_read_fn read_at, void *ctx, uint64_t file_size, firn_pq_reader **out, firn_err *err);

/** Frees the reader (NULL accepted). */
void firn_pq_reader_free(firn_pq_reader *r);

/** The decoded footer (borrowed; valid for the reader's lifetime). */
const firn_pq_file_meta *firn_pq_reader_meta(const firn_pq_reader *r);

/** Number of row groups. */
size_t firn_pq_reader_row_groups(const firn_pq_reader *r);

/** Rows of row group g (g < row groups). */
uint64_t firn_pq_reader_row_group_rows(const firn_pq_reader *r, size_t g);

/** Position in the file of the first row of row group g: the rows of the groups before it
 * (Iceberg position deletes count positions this way, from 0). */
uint64_t firn_pq_reader_row_group_first_row(const firn_pq_reader *r, size_t g);

/** Total rows of the file (sum of the row groups'). */
uint64_t firn_pq_reader_rows(const firn_pq_reader *r);

/** Chooses the columns to read: schema (borrowed, must outlive the selection) is a STRUCT whose
 * children are primitive fields. Each child is matched to a file column by Iceberg field id
 * (SchemaElement.field_id, any depth) when the file has field ids, otherwise by top-level name.
 * A field missing from the file reads as nulls when optional; a required one is FIRN_ERR_SCHEMA.
 * The file's type must convert to the field's without loss: equal types; int -> long; float ->
 * double; decimal(P,S) from any decimal physical type (INT32, INT64, FIXED_LEN_BYTE_ARRAY,
 * BYTE_ARRAY) with precision <= P and the same scale; timestamps/time in a coarser unit (millis
 * -> micros -> nanos). Otherwise FIRN_ERR_SCHEMA naming the column. FIRN_ERR_UNSUPPORTED for a
 * nested or repeated column, INT96 and other physical types the reader does not decode, and for
 * nested fields in schema. Replaces any earlier selection. */
FIRN_MUST_CHECK firn_rc firn_pq_reader_select(firn_pq_reader *r,
                                              const firn_field *schema,
                                              firn_err *err);

/** Resets b (made with firn_batch_new for the selected schema) and fills it with the rows of
 * row group g: one row per file row, in file order, operation FIRN_OP_READ and lsn 0. Columns
 * are decoded one after the other; memory besides b is one column chunk (compressed) plus one
 * decompressed page and the chunk's dictionary. Errors: FIRN_ERR_PARSE (malformed or
 * inconsistent data: its message names column, row group and page), FIRN_ERR_UNSUPPORTED
 * (encoding or codec not decoded here, naming it), FIRN_ERR_TOO_LARGE (a page or value past the
 * limits), FIRN_ERR_INVALID (no selection, g out of range, b of another schema), read_at's.
 * After an error b holds partial columns: reset it before use. */
FIRN_MUST_CHECK firn_rc firn_pq_reader_read_row_group(firn_pq_reader *r,
                                                      size_t g,
                                                      firn_batch *b,
                                                      firn_err *err);

#endif
