/* SPDX-License-Identifier: Apache-2.0 */
/* Deletion vectors and Puffin files (third public header of the iceberg module): a set of 64-bit
 * row positions kept as Roaring containers, its "portable" 64-bit serialization, the
 * deletion-vector-v1 blob and the Puffin container around it (format/puffin-spec.md;
 * format/spec.md "Deletion Vectors"; DELETES.md §4 "Byte layout firn must produce"). */
#ifndef FIRN_PUFFIN_H
#define FIRN_PUFFIN_H

#include "firn/util.h"

/* ------------------------------------------------------------------------------------------------
 * Position bitmaps
 * ----------------------------------------------------------------------------------------------*/

/** A set of 64-bit row positions. Roaring layout in memory: one container per 2^16 positions,
 * a sorted array of 16-bit values up to 4096 members and an 8 KiB bitset beyond. Not
 * thread-safe; share read-only. */
typedef struct firn_bitmap64 firn_bitmap64;

/** Returns an empty bitmap. Free with firn_bitmap64_free. */
firn_bitmap64 *firn_bitmap64_new(void);
/** Frees b (NULL accepted). */
void firn_bitmap64_free(firn_bitmap64 *b);
/** Adds pos (no-op when present). */
void firn_bitmap64_add(firn_bitmap64 *b, uint64_t pos);
/** Adds every position of [lo, hi). */
void firn_bitmap64_add_range(firn_bitmap64 *b, uint64_t lo, uint64_t hi);
/** True when pos is in b. O(log containers + log 4096). */
bool firn_bitmap64_contains(const firn_bitmap64 *b, uint64_t pos);
/** Number of positions in b. */
uint64_t firn_bitmap64_cardinality(const firn_bitmap64 *b);
/** Adds every position of src to dst (dst |= src). */
void firn_bitmap64_or(firn_bitmap64 *dst, const firn_bitmap64 *src);
/** Calls fn for every position in ascending order; stops early when fn returns false. */
void firn_bitmap64_foreach(const firn_bitmap64 *b, bool (*fn)(void *ctx, uint64_t pos), void *ctx);

/** Appends the Roaring "portable" 64-bit serialization of b to out (used by Iceberg's DVs): u64 LE
 * count of 32-bit bitmaps, then per high-32-bit key (ascending, gaps below 1024 filled with empty
 * bitmaps as Java does) a u32 LE key and a standard 32-bit portable Roaring bitmap. Containers are
 * run-optimized: a run container is written when smaller than the array or bitset form.
 * FIRN_ERR_TOO_LARGE when out is full (out keeps its earlier bytes). */
FIRN_MUST_CHECK firn_rc firn_bitmap64_serialize(const firn_bitmap64 *b, firn_buf *out);
/** Parses a 64-bit portable serialization that fills exactly len bytes (array, bitset and run
 * containers, both cookies) into a new bitmap (*out, owned). FIRN_ERR_PARSE for malformed or
 * trailing bytes, keys out of order or values beyond a container. Thread-safe. */
FIRN_MUST_CHECK firn_rc firn_bitmap64_deserialize(const void *p,
                                                  size_t len,
                                                  firn_bitmap64 **out,
                                                  firn_err *err);

/* ------------------------------------------------------------------------------------------------
 * deletion-vector-v1 blobs
 * ----------------------------------------------------------------------------------------------*/

/** Blob type of a deletion vector. */
#define FIRN_DV_BLOB_TYPE "deletion-vector-v1"
/** The reserved field id a DV blob names (the _pos metadata column). */
#define FIRN_DV_FIELD_ID 2147483645

/** Appends the deletion-vector-v1 blob of b to out: u32 BE length of magic + vector, magic
 * D1 D3 39 64, the 64-bit portable vector, u32 BE CRC-32 of magic + vector. FIRN_ERR_TOO_LARGE
 * when out is full. */
FIRN_MUST_CHECK firn_rc firn_dv_encode(const firn_bitmap64 *b, firn_buf *out);
/** Decodes a whole deletion-vector-v1 blob (len = content_size_in_bytes) into a new bitmap.
 * FIRN_ERR_PARSE when the length prefix, magic or CRC-32 do not match or the vector is
 * malformed. Thread-safe. */
FIRN_MUST_CHECK firn_rc firn_dv_decode(const void *p,
                                       size_t len,
                                       firn_bitmap64 **out,
                                       firn_err *err);

/* ------------------------------------------------------------------------------------------------
 * Puffin files
 * ----------------------------------------------------------------------------------------------*/

/** Largest Puffin file firn writes or parses whole. */
#define FIRN_PUFFIN_MAX_BYTES ((size_t)1 << 31)

/** Builds one Puffin file in memory holding deletion vectors: "PFA1", the blobs, then the
 * uncompressed footer ("PFA1", UTF-8 JSON payload, u32 LE payload length, 4 zero flag bytes,
 * "PFA1"). Not thread-safe. */
typedef struct firn_puffin_writer firn_puffin_writer;

/** Returns a writer; created_by (copied) goes to the footer property "created-by". Free with
 * firn_puffin_writer_free. */
firn_puffin_writer *firn_puffin_writer_new(const char *created_by);
/** Frees w (NULL accepted). */
void firn_puffin_writer_free(firn_puffin_writer *w);
/** Appends the DV blob of b for the data file at referenced_data_file (copied; the exact location
 * the manifests name) with footer metadata: type deletion-vector-v1, fields [2147483645],
 * snapshot-id and sequence-number -1, offset, length, properties referenced-data-file and
 * cardinality. Stores the blob's offset in the file and its length in bytes
 * (content_offset/content_size_in_bytes of the manifest entry). FIRN_ERR_TOO_LARGE past
 * FIRN_PUFFIN_MAX_BYTES. */
FIRN_MUST_CHECK firn_rc firn_puffin_writer_add_dv(firn_puffin_writer *w,
                                                  const char *referenced_data_file,
                                                  const firn_bitmap64 *b,
                                                  int64_t *out_offset,
                                                  int64_t *out_length,
                                                  firn_err *err);
/** Number of blobs added. */
size_t firn_puffin_writer_count(const firn_puffin_writer *w);
/** Appends the footer and returns the whole file in out (replacing its contents). The writer
 * takes no more blobs afterwards. FIRN_ERR_TOO_LARGE when out is too small. */
FIRN_MUST_CHECK firn_rc firn_puffin_writer_finish(firn_puffin_writer *w,
                                                  firn_buf *out,
                                                  firn_err *err);

/** One blob described by a Puffin footer. Owned strings. */
typedef struct firn_puffin_blob {
    char *type;
    int64_t offset;
    int64_t length;
    int64_t snapshot_id;        /* -1 when given as -1 or absent */
    int64_t sequence_number;    /* -1 when given as -1 or absent */
    char *compression_codec;    /* NULL: uncompressed */
    char *referenced_data_file; /* property "referenced-data-file", NULL absent */
    int64_t cardinality;        /* property "cardinality", -1 absent */
} firn_puffin_blob;

/** A parsed Puffin footer. Free with firn_puffin_footer_deinit. */
typedef struct firn_puffin_footer {
    size_t n_blobs;
    firn_puffin_blob *blobs;
    char *created_by; /* NULL absent */
} firn_puffin_footer;

/** Parses the footer of a whole Puffin file (both magics, payload length, flags) into out.
 * FIRN_ERR_UNSUPPORTED for a compressed footer; FIRN_ERR_PARSE for a malformed file or a blob
 * outside the file. Thread-safe. */
FIRN_MUST_CHECK firn_rc firn_puffin_footer_parse(const void *file,
                                                 size_t len,
                                                 firn_puffin_footer *out,
                                                 firn_err *err);
/** Frees what f owns and zeroes it (NULL accepted). */
void firn_puffin_footer_deinit(firn_puffin_footer *f);

#endif
