/* SPDX-License-Identifier: Apache-2.0 */
/* Private to the parquet module: Thrift compact encoder/decoder, schema leaves, the column chunk
 * writer, RLE/bit-packed hybrid, codecs and Iceberg bounds. */
#ifndef FIRN_PQ_INT_H
#define FIRN_PQ_INT_H

#include "firn/parquet.h"

#define PQ_MAX_DEPTH  64 /* Thrift nesting and schema depth */
#define PQ_FOOTER_MAX (256u << 20)
#define PQ_PAGE_MAX   ((size_t)1 << 31)
#define PQ_STATS_MAX  4096 /* longest min or max value written into the footer, in bytes */

__extension__ typedef __int128 pq_i128;

/* parquet.thrift enums */
enum {
    PQ_BOOLEAN = 0,
    PQ_INT32 = 1,
    PQ_INT64 = 2,
    PQ_FLOAT = 4,
    PQ_DOUBLE = 5,
    PQ_BYTE_ARRAY = 6,
    PQ_FLBA = 7,
};
enum { PQ_REQUIRED = 0, PQ_OPTIONAL = 1, PQ_REPEATED = 2 };
enum { PQ_ENC_PLAIN = 0, PQ_ENC_RLE = 3, PQ_ENC_RLE_DICTIONARY = 8 };
enum { PQ_PAGE_DATA = 0, PQ_PAGE_DICTIONARY = 2 };

/* Thrift compact field types */
enum {
    TC_STOP = 0,
    TC_TRUE = 1,
    TC_FALSE = 2,
    TC_BYTE = 3,
    TC_I16 = 4,
    TC_I32 = 5,
    TC_I64 = 6,
    TC_DOUBLE = 7,
    TC_BINARY = 8,
    TC_LIST = 9,
    TC_SET = 10,
    TC_MAP = 11,
    TC_STRUCT = 12,
};

/* ---- Thrift compact encoder: a sticky-error writer into a firn_buf -------------------------- */
typedef struct pq_tw {
    firn_buf *b;
    int depth;
    int16_t last[PQ_MAX_DEPTH];
    firn_rc rc;
} pq_tw;

void firn__pq_tw_init(pq_tw *w, firn_buf *b);
void firn__pq_tw_struct_begin(pq_tw *w); /* a list element or the top-level struct */
void firn__pq_tw_struct_end(pq_tw *w);
void firn__pq_tw_field_struct(pq_tw *w, int16_t id); /* field header + begin */
void firn__pq_tw_field_i32(pq_tw *w, int16_t id, int32_t v);
void firn__pq_tw_field_i64(pq_tw *w, int16_t id, int64_t v);
void firn__pq_tw_field_i16(pq_tw *w, int16_t id, int16_t v);
void firn__pq_tw_field_i8(pq_tw *w, int16_t id, int8_t v);
void firn__pq_tw_field_bool(pq_tw *w, int16_t id, bool v);
void firn__pq_tw_field_bin(pq_tw *w, int16_t id, const void *p, size_t len);
void firn__pq_tw_field_list(pq_tw *w, int16_t id, uint8_t elem_type, size_t n);
void firn__pq_tw_i32(pq_tw *w, int32_t v); /* list element */
void firn__pq_tw_i64(pq_tw *w, int64_t v);
void firn__pq_tw_bin(pq_tw *w, const void *p, size_t len);

/* ---- Thrift compact decoder -------------------------------------------------------------- */
typedef struct pq_tr {
    firn_rd rd;
    int depth;
    int16_t last[PQ_MAX_DEPTH];
} pq_tr;

void firn__pq_tr_init(pq_tr *r, const void *p, size_t len);
/* Enters a struct (fails the cursor past PQ_MAX_DEPTH). */
void firn__pq_tr_struct_begin(pq_tr *r);
void firn__pq_tr_struct_end(pq_tr *r);
/* Reads the next field header; false at the stop byte or on failure. *out_type is TC_*. */
bool firn__pq_tr_field(pq_tr *r, int16_t *out_id, uint8_t *out_type);
/* Reads a list header; the size is checked against the bytes left. */
size_t firn__pq_tr_list(pq_tr *r, uint8_t *out_elem_type);
int64_t firn__pq_tr_int(pq_tr *r, uint8_t type); /* i8/i16/i32/i64 of that type */
bool firn__pq_tr_bool(pq_tr *r, uint8_t type);   /* field bool (type TC_TRUE/TC_FALSE) */
const uint8_t *firn__pq_tr_bin(pq_tr *r, size_t *out_len);
void firn__pq_tr_skip(pq_tr *r, uint8_t type);

/* ---- RLE / bit-packed hybrid ------------------------------------------------------------- */
FIRN_MUST_CHECK firn_rc firn__pq_rle_u8(firn_buf *out, const uint8_t *v, size_t n, int bit_width);
FIRN_MUST_CHECK firn_rc firn__pq_rle_u32(firn_buf *out, const uint32_t *v, size_t n, int bit_width);
/* The bytes firn__pq_rle_u32 writes for n copies of v (one RLE run when n >= 8), without an
 * array of them. */
FIRN_MUST_CHECK firn_rc firn__pq_rle_u32_repeat(firn_buf *out, uint32_t v, size_t n, int bit_width);
/* Decodes n values; false on malformed input. */
bool firn__pq_rle_decode(const uint8_t *p, size_t len, int bit_width, uint32_t *out, size_t n);
static inline int firn__pq_bit_width(uint64_t max_value)
{
    int w = 0;
    while (max_value) {
        w++;
        max_value >>= 1;
    }
    return w;
}

/* ---- Codecs ------------------------------------------------------------------------------ */
typedef struct pq_codec pq_codec;
FIRN_MUST_CHECK firn_rc firn__pq_codec_new(firn_pq_codec codec,
                                           int level,
                                           pq_codec **out,
                                           firn_err *err);
void firn__pq_codec_free(pq_codec *c);
/* Appends the compressed form of src to out. */
FIRN_MUST_CHECK firn_rc
firn__pq_compress(pq_codec *c, firn_buf *out, const void *src, size_t len, firn_err *err);
/* Pages that zstd would shrink by less than this share (percent) are not worth its CPU: a page
 * whose compression saved less makes the next pages of its chunk go out as raw-block frames.
 * zstd's cost on such pages (dictionary ids) is its Huffman stage, about the same per byte
 * whatever it saves; 6 keeps files of the taxi trips within 0.25 % of fully compressed ones
 * (docs/internals/parquet.md, "Page compression"). */
#define PQ_ZSTD_MIN_SAVING_PCT 6
/* Pages shorter than this (bytes) always go out as raw-block frames: zstd cannot shrink them. */
#define PQ_ZSTD_RAW_BELOW 128
/* Raw pages after a poor probe start at PQ_ZSTD_BACKOFF_FIRST and double up to _MAX. */
#define PQ_ZSTD_BACKOFF_FIRST 2
#define PQ_ZSTD_BACKOFF_MAX   16
/* Pages longer than this are always compressed (a raw frame of one segment asks a streaming
 * decoder for a window of the whole page; zstd's default decoder limit is 2^27). */
#define PQ_ZSTD_RAW_MAX ((size_t)1 << 27)

/* What a column chunk's zstd pages taught so far (firn__pq_compress_page); zero it when a
 * chunk starts. Other codecs ignore it. */
typedef struct pq_squeeze {
    uint32_t raw_left; /* pages still to store raw before zstd is tried again */
    uint32_t backoff;  /* raw pages after the next poor probe (0: none failed yet) */
} pq_squeeze;

/* Bytes of the raw-block zstd frame of len bytes: magic, frame header (Single_Segment,
 * Frame_Content_Size), one 3-byte header per block of at most 128 KiB (one block when len is 0). */
size_t firn__pq_zstd_raw_size(size_t len);
/* Appends to out the zstd frame (RFC 8878) that stores the len bytes at src (NULL when len is 0)
 * in Raw_Block blocks, without checksum: firn__pq_zstd_raw_size(len) bytes that any zstd
 * decoder reads back at the cost of a copy. len at most PQ_ZSTD_RAW_MAX. Errors: those of
 * firn_buf_reserve (out then unchanged). */
FIRN_MUST_CHECK firn_rc firn__pq_zstd_raw_frame(firn_buf *out, const void *src, size_t len);
/* firn__pq_compress for one page of a column chunk whose history sq holds (borrowed, updated).
 * zstd: a page shorter than PQ_ZSTD_RAW_BELOW, or one met while sq->raw_left counts down after
 * a compressed page saved less than PQ_ZSTD_MIN_SAVING_PCT, goes out as a raw-block frame; a
 * poor probe doubles the raw run (PQ_ZSTD_BACKOFF_FIRST .. _MAX), a good one ends it. Other
 * codecs: firn__pq_compress. Errors: those of firn__pq_compress. */
FIRN_MUST_CHECK firn_rc firn__pq_compress_page(
    pq_codec *c, pq_squeeze *sq, firn_buf *out, const void *src, size_t len, firn_err *err);
/* Decompresses into dst of exactly dst_len bytes (tests and readers). */
FIRN_MUST_CHECK firn_rc firn__pq_decompress(
    firn_pq_codec codec, const void *src, size_t len, void *dst, size_t dst_len, firn_err *err);

/* ---- Schema leaves ----------------------------------------------------------------------- */
typedef enum pq_kind {
    PQK_BOOL,
    PQK_I32,     /* from int32 values */
    PQK_I32_I64, /* decimal(P<=9) from int64 values */
    PQK_I64,
    PQK_FLOAT,
    PQK_DOUBLE,
    PQK_DEC128, /* decimal(P>18): FLBA of minimal width from 128-bit values */
    PQK_FLBA,   /* uuid, fixed */
    PQK_BYTES,  /* string, binary */
} pq_kind;

typedef struct pq_leaf {
    const firn_field *field; /* the leaf */
    size_t top;              /* index of its top-level column */
    size_t depth;            /* nodes from the top-level field to the leaf */
    const firn_field *path[PQ_MAX_DEPTH];
    size_t child[PQ_MAX_DEPTH];   /* child index taken below path[k] */
    int16_t rep_at[PQ_MAX_DEPTH]; /* repetition level of list/map node k */
    int16_t max_def;
    int16_t max_rep;
    bool in_repeated;
    pq_kind kind;
    int ptype;           /* parquet physical type */
    int32_t type_length; /* FLBA width */
    size_t n_names;
    const char *names[2 * PQ_MAX_DEPTH]; /* path_in_schema */
} pq_leaf;

/* Collects the leaves of schema (a struct). FIRN_ERR_UNSUPPORTED/INVALID on bad schemas. */
FIRN_MUST_CHECK firn_rc firn__pq_leaves(const firn_field *schema,
                                        pq_leaf **out,
                                        size_t *out_n,
                                        firn_err *err);
/* Writes the schema list<SchemaElement> as field 2 of FileMetaData. */
void firn__pq_schema_write(pq_tw *w, const firn_field *schema);
/* Bytes of a FLBA decimal of this precision. */
int32_t firn__pq_decimal_bytes(int32_t precision);

/* ---- Statistics -------------------------------------------------------------------------- */
typedef struct pq_stat {
    bool has; /* min/max seen */
    int64_t imin, imax;
    double dmin, dmax;
    pq_i128 qmin, qmax;
    firn_buf bmin, bmax;
} pq_stat;

void firn__pq_stat_init(pq_stat *s);
void firn__pq_stat_deinit(pq_stat *s);
void firn__pq_stat_reset(pq_stat *s);
/* Folds src into dst (same kind). */
FIRN_MUST_CHECK firn_rc firn__pq_stat_merge(pq_stat *dst, const pq_stat *src, pq_kind kind);
FIRN_MUST_CHECK firn_rc firn__pq_stat_bytes(pq_stat *s,
                                            const uint8_t *p,
                                            size_t len,
                                            bool is_signed);
/* PLAIN min/max bytes of a stat (with the ±0.0 rule); false when there is none. */
bool firn__pq_stat_plain(const pq_stat *s,
                         const pq_leaf *leaf,
                         bool is_max,
                         uint8_t *buf,
                         size_t cap,
                         const uint8_t **out,
                         size_t *out_len);
/* Iceberg single-value bounds into m (lower and upper). */
void firn__pq_bounds(const pq_stat *s, const pq_leaf *leaf, firn_pq_field_metrics *m);
/* Signed compare of two big-endian two's complement byte strings of equal length. */
int firn__pq_cmp_signed_be(const uint8_t *a, const uint8_t *b, size_t len);

/* ---- Column chunk writer ----------------------------------------------------------------- */
typedef struct pq_dict {
    void *slots; /* open addressing: entry index + 1 (0 = empty), with the key for fixed kinds */
    size_t slot_bytes; /* 4 (index only), 8 or 16 (4- or 8-byte key next to the index) */
    size_t mask;       /* slots - 1, a power of two less one */
    uint32_t n;
    firn_buf plain;   /* PLAIN encoding of the entries (the dictionary page body) */
    uint32_t *offs;   /* bytes: offset of each entry's bytes in plain */
    uint32_t *lens;   /* bytes: length of each entry */
    uint64_t *hashes; /* bytes: hash of each entry */
    size_t cap;       /* entries the offs/lens/hashes arrays hold */
    /* Integer kinds: a direct-mapped window over the values (as int64) base .. base + span - 1,
     * direct[v - base] = id of v (UINT32_MAX: not an entry). Every entry in the window is in
     * it, so a value found there needs no probe; the keyed slots hold every entry too, and a
     * value not found there is probed for in them. */
    uint32_t *direct;
    uint64_t direct_base; /* the window's lowest value, as uint64 (arithmetic modulo 2^64) */
    size_t direct_span;   /* values in the window (a power of two), 0 = no window */
    size_t direct_cap;    /* entries allocated at direct */
    int64_t lo, hi;       /* smallest and largest entry (integer kinds, n > 0) */
} pq_dict;

typedef struct pq_chunk_meta {
    int64_t num_values;
    int64_t uncompressed;
    int64_t compressed;
    int64_t data_page_offset;
    int64_t dict_page_offset; /* -1 none */
    int32_t dict_pages, dict_data_pages, plain_data_pages;
    int64_t null_count;
    bool has_nan;
    int64_t nan_count;
    bool has_minmax;
    uint8_t *min;
    size_t min_len;
    uint8_t *max;
    size_t max_len;
} pq_chunk_meta;

typedef struct pq_colw {
    const pq_leaf *leaf;
    const firn_pq_options *opts;
    size_t value_width; /* bytes per PLAIN value (fixed kinds) */
    /* current page */
    uint8_t *def, *rep;
    size_t n_levels, levels_cap;
    uint32_t *ids;
    size_t n_ids, ids_cap; /* n_ids: the page's ids, run_ids of them not stored in ids */
    size_t run_ids;        /* the last run_ids ids are all run_id, written into ids on demand */
    uint32_t run_id;
    firn_buf plain;
    size_t page_values; /* non-null values */
    /* dictionary */
    bool dict_on;
    pq_dict dict;
    /* encoded pages of the row group and their totals */
    firn_buf pages;
    size_t comp_guess;  /* compressed bytes of the last data page (emit_page) */
    pq_squeeze squeeze; /* how the chunk's data pages compress (firn__pq_compress_page) */
    int64_t data_pages_uncompressed;
    int32_t dict_data_pages, plain_data_pages;
    int64_t num_values, null_count, nan_count;
    pq_stat stat;
    /* file-wide */
    pq_stat file_stat;
    uint64_t file_values, file_nulls, file_nans, file_bytes;
    /* scratch for nested shredding */
    uint32_t *vidx;
    size_t vidx_cap;
} pq_colw;

void firn__pq_colw_init(pq_colw *cw, const pq_leaf *leaf, const firn_pq_options *opts);
void firn__pq_colw_deinit(pq_colw *cw);
/* Encodes rows [begin, end) of the leaf (cols: the column at each path node). */
FIRN_MUST_CHECK firn_rc firn__pq_colw_write(pq_colw *cw,
                                            pq_codec *codec,
                                            firn_column *const *cols,
                                            size_t begin,
                                            size_t end,
                                            firn_buf *scratch,
                                            firn_buf *comp,
                                            firn_err *err);
/* Bytes buffered for the row group (encoded pages, dictionary, current page estimate). */
size_t firn__pq_colw_buffered(const pq_colw *cw);
/* Ends the chunk: flushes the page, writes [dictionary page] + data pages to the sink at
 * *offset (advanced), fills meta and resets the chunk state. */
typedef struct pq_sink {
    firn_pq_write_fn write;
    void *ctx;
    uint64_t offset;
} pq_sink;
FIRN_MUST_CHECK firn_rc firn__pq_sink_write(pq_sink *s, const void *p, size_t len, firn_err *err);
FIRN_MUST_CHECK firn_rc firn__pq_colw_flush_chunk(pq_colw *cw,
                                                  pq_codec *codec,
                                                  pq_sink *sink,
                                                  firn_buf *scratch,
                                                  firn_buf *comp,
                                                  pq_chunk_meta *meta,
                                                  firn_err *err);
void firn__pq_chunk_meta_deinit(pq_chunk_meta *m);

/* Writes a page header (PageHeader struct) to b. */
void firn__pq_page_header(pq_tw *w,
                          int type,
                          size_t uncompressed,
                          size_t compressed,
                          int32_t num_values,
                          int encoding,
                          bool has_levels);

#endif
