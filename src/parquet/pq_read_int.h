/* SPDX-License-Identifier: Apache-2.0 */
/* Private to the Parquet column reader: selected-column state, page decoding and the value
 * encodings (parquet-format Encodings.md). */
#ifndef FIRN_PQ_READ_INT_H
#define FIRN_PQ_READ_INT_H

#include "pq_int.h"

#define RD_PAGE_MAX   ((size_t)1 << 30) /* largest decompressed page or dictionary */
#define RD_CHUNK_MAX  ((uint64_t)1 << 34)
#define RD_DELTA_MAX  ((size_t)1 << 30) /* bytes a DELTA_BYTE_ARRAY page may expand to */
#define RD_TAIL_BYTES ((size_t)64 << 10)

enum {
    RD_ENC_PLAIN = 0,
    RD_ENC_PLAIN_DICT = 2,
    RD_ENC_RLE = 3,
    RD_ENC_BIT_PACKED = 4,
    RD_ENC_DELTA_BP = 5,
    RD_ENC_DELTA_LBA = 6,
    RD_ENC_DELTA_BA = 7,
    RD_ENC_RLE_DICT = 8,
    RD_ENC_BSS = 9,
};
enum { RD_PAGE_DATA = 0, RD_PAGE_INDEX = 1, RD_PAGE_DICT = 2, RD_PAGE_DATA_V2 = 3 };

/* Output representation of a selected column (the batch's layout). */
typedef enum rd_out {
    OUT_BOOL,  /* 1 byte 0/1 */
    OUT_I32,   /* int, date */
    OUT_I64,   /* long, time, timestamps, decimal p <= 18 */
    OUT_F32,   /* float */
    OUT_F64,   /* double */
    OUT_I128,  /* decimal p > 18: {uint64 lo, int64 hi} */
    OUT_FIXED, /* uuid, fixed: raw bytes */
    OUT_BYTES, /* string, binary */
} rd_out;

/* How physical values become output values. */
typedef enum rd_conv {
    CV_COPY,    /* same bits and width */
    CV_I32_I64, /* sign-extend, times mult */
    CV_U32_I64, /* zero-extend */
    CV_I64_MUL, /* times mult (checked) */
    CV_F32_F64,
    CV_I32_I128,
    CV_I64_I128,
    CV_BE_I64, /* big-endian two's complement bytes (FLBA or BYTE_ARRAY) */
    CV_BE_I128,
} rd_conv;

/* One selected column. */
typedef struct rd_col {
    const firn_field *field; /* requested field */
    const char *name;        /* for messages */
    long leaf;               /* file leaf (column chunk) index, -1 = missing */
    int ptype;               /* physical type */
    size_t pw;               /* physical width (0 for BYTE_ARRAY) */
    int16_t max_def;
    rd_out out;
    size_t ow; /* output width (0 for bytes) */
    rd_conv conv;
    int64_t mult;
} rd_col;

/* Decoded present values of one page, before conversion: fixed physical values (pw each) or
 * pointers and lengths of byte arrays. */
typedef struct rd_vals {
    size_t n;
    const uint8_t *fixed;
    const uint8_t **ptr;
    uint32_t *len;
} rd_vals;

/* Scratch memory reused from page to page. */
typedef struct rd_scratch {
    uint8_t *page; /* decompressed page */
    size_t page_cap;
    uint8_t *dict; /* decompressed dictionary page (kept for the chunk) */
    size_t dict_cap;
    uint8_t *def;
    size_t def_cap;
    uint32_t *idx;
    size_t idx_cap;
    uint8_t *phys; /* physical values */
    size_t phys_cap;
    uint8_t *outv; /* output values before scattering around nulls */
    size_t outv_cap;
    int64_t *ints; /* DELTA_BINARY_PACKED values */
    size_t ints_cap;
    int64_t *ints2;
    size_t ints2_cap;
    const uint8_t **ptr;
    size_t ptr_cap;
    uint32_t *len;
    size_t len_cap;
    uint8_t *delta; /* DELTA_BYTE_ARRAY materialized values */
    size_t delta_cap;
    /* dictionary of the current chunk, converted to the output representation */
    size_t dict_n;
    uint8_t *dict_out; /* dict_n * ow (fixed outputs) */
    size_t dict_out_cap;
    const uint8_t **dict_ptr; /* bytes outputs */
    size_t dict_ptr_cap;
    uint32_t *dict_len;
    size_t dict_len_cap;
    bool has_dict;
} rd_scratch;

/* Grows *p to hold n elements of size sz (contents kept). */
void firn__pq_rd_grow(void **p, size_t *cap, size_t n, size_t sz);

/* ---- encodings (pq_read_enc.c); each returns false on malformed input --------------------- */

/* RLE/bit-packed hybrid: decodes exactly n values of bit width bw (0..32) from p[0..len). */
bool firn__pq_rd_rle_u32(const uint8_t *p, size_t len, int bw, uint32_t *out, size_t n);
bool firn__pq_rd_rle_u8(const uint8_t *p, size_t len, int bw, uint8_t *out, size_t n);
/* True when p starts with one RLE run of at least n copies of value (e.g. all rows present). */
bool firn__pq_rd_rle_all(const uint8_t *p, size_t len, int bw, uint32_t value, size_t n);
/* Deprecated BIT_PACKED levels (MSB first). */
bool firn__pq_rd_bitpacked_u8(const uint8_t *p, size_t len, int bw, uint8_t *out, size_t n);
/* PLAIN booleans (LSB-first bits) into n bytes of 0/1. */
bool firn__pq_rd_bools(const uint8_t *p, size_t len, uint8_t *out, size_t n);
/* DELTA_BINARY_PACKED: reads the header count into *out_n (checked <= cap), decodes the values
 * into out and stores the bytes used in *used. bits32 decodes INT32 (widths <= 32). */
bool firn__pq_rd_delta_bp(const uint8_t *p,
                          size_t len,
                          bool bits32,
                          int64_t **out,
                          size_t *out_cap,
                          size_t max_n,
                          size_t *out_n,
                          size_t *used);
/* PLAIN BYTE_ARRAY: n length-prefixed values. */
bool firn__pq_rd_plain_bytes(
    const uint8_t *p, size_t len, size_t n, const uint8_t **ptr, uint32_t *lens);
/* BYTE_STREAM_SPLIT of n values of width w. */
bool firn__pq_rd_bss(const uint8_t *p, size_t len, size_t w, uint8_t *out, size_t n);

/* ---- page decoding (pq_read_page.c) ------------------------------------------------------ */

typedef struct rd_chunk_ctx {
    const rd_col *col;
    firn_pq_codec codec;
    size_t row_group;
    rd_scratch *s;
    firn_column *column;
    int64_t values_left; /* level entries the chunk still holds */
} rd_chunk_ctx;

/* Decodes the pages of one column chunk (bytes p[0..len)) into the column. */
FIRN_MUST_CHECK firn_rc firn__pq_rd_chunk(rd_chunk_ctx *cx,
                                          const uint8_t *p,
                                          size_t len,
                                          firn_err *err);

/* DELTA_LENGTH_BYTE_ARRAY (prefixed false) or DELTA_BYTE_ARRAY of v->n values into v->ptr and
 * v->len (and v->fixed for FIXED_LEN_BYTE_ARRAY). */
FIRN_MUST_CHECK firn_rc firn__pq_rd_delta_bytes(
    rd_chunk_ctx *cx, bool prefixed, const uint8_t *p, size_t len, rd_vals *v, firn_err *err);

/* Converts n physical values to the output representation (fixed outputs). */
FIRN_MUST_CHECK firn_rc firn__pq_rd_convert(const rd_col *c,
                                            const rd_vals *v,
                                            uint8_t *out,
                                            firn_err *err);

/* What the reader knows about each SchemaElement. */
typedef struct rd_elem {
    long parent; /* -1 for the root */
    long leaf;   /* column chunk index, -1 for groups */
    int16_t max_def, max_rep;
} rd_elem;

struct firn_pq_reader {
    const uint8_t *mem; /* memory mode */
    firn_pq_read_fn read_at;
    void *ctx;
    uint64_t file_size;
    uint64_t data_end; /* where the footer starts */
    firn_pq_file_meta *meta;
    rd_elem *elems;
    size_t n_leaves;
    long *leaf_elem; /* element of each leaf */
    bool has_ids;
    uint64_t *first_row; /* n_row_groups + 1 prefix sums */
    const firn_field *schema;
    rd_col *cols;
    size_t n_cols;
    firn_buf chunk;
    rd_scratch s;
};

/* Reads len bytes at off through r->read_at into buf (emptied first); a short read is an
 * error. */
FIRN_MUST_CHECK firn_rc
firn__pq_rd_range(firn_pq_reader *r, uint64_t off, size_t len, firn_buf *buf, firn_err *err);

#endif
