/* SPDX-License-Identifier: Apache-2.0 */
/* Private interfaces of the engine module: the primary-key index and change folding. */
#ifndef FIRN_ENGINE_INT_H
#define FIRN_ENGINE_INT_H

#include "firn/batch.h"

/* ------------------------------------------------------------------------------------------------
 * Primary-key index: key -> (data file ordinal, row position), exact (full keys are kept).
 * Held in memory; DELETES.md §5.2 describes the bounded on-disk design that replaces it for
 * tables beyond a few million keys.
 * ----------------------------------------------------------------------------------------------*/

typedef struct firn__pkindex firn__pkindex;

/** Where a row lives: the ordinal of its data file in the index's file table, and its 0-based
 * row position inside that file. */
typedef struct firn__pkloc {
    uint32_t file;
    uint32_t pos;
} firn__pkloc;

/** Returns an empty index. Free with firn__pkindex_free. Not thread-safe. */
firn__pkindex *firn__pkindex_new(void);
/** Frees idx (NULL accepted). */
void firn__pkindex_free(firn__pkindex *idx);
/** Number of keys. */
size_t firn__pkindex_count(const firn__pkindex *idx);
/** Registers a data file (location copied) and returns its ordinal. */
uint32_t firn__pkindex_add_file(firn__pkindex *idx, const char *location);
/** Location of file ordinal (borrowed), NULL when out of range. */
const char *firn__pkindex_file(const firn__pkindex *idx, uint32_t file);
/** Number of registered files. */
uint32_t firn__pkindex_files(const firn__pkindex *idx);
/** Finds key (len bytes, from firn_batch_key_encode); true and *out set when present. */
bool firn__pkindex_get(const firn__pkindex *idx, const uint8_t *key, size_t len, firn__pkloc *out);
/** Sets key -> loc, replacing an earlier location. */
void firn__pkindex_put(firn__pkindex *idx, const uint8_t *key, size_t len, firn__pkloc loc);
/** Removes key; true when it was present. */
bool firn__pkindex_remove(firn__pkindex *idx, const uint8_t *key, size_t len);

/* ------------------------------------------------------------------------------------------------
 * Folding a buffer of changes by key (DESIGN.md step 2: last image wins).
 * ----------------------------------------------------------------------------------------------*/

/** The outcome of folding: rows of the buffer to write as final images (in arrival order of
 * their last change), and keys whose final state is deleted. Arrays owned by the fold; keys are
 * encodings from firn_batch_key_encode stored back to back in `keys` (offsets in key_offsets,
 * n_keys + 1 entries). */
typedef struct firn__fold {
    uint32_t *upsert_rows;
    size_t n_upserts;
    size_t n_keys;         /* every distinct key touched: upserted first, then deleted */
    uint32_t *key_offsets; /* n_keys + 1 */
    firn_buf keys;
    size_t n_deletes; /* keys [n_upserts, n_keys) are deletes */
} firn__fold;

/** Folds the rows of b by the key columns key_cols[0..n_key_cols): for each key, only its last
 * change counts; an insert/update/read gives an upserted row, a delete a deleted key. Keys of
 * upserted rows come first in `keys`, in the order of upsert_rows, then the deleted keys.
 * FIRN_ERR_TOO_LARGE when the keys pass the key buffer limit. Free with firn__fold_free. */
FIRN_MUST_CHECK firn_rc firn__fold_run(const firn_batch *b,
                                       const uint32_t *key_cols,
                                       size_t n_key_cols,
                                       firn__fold *out,
                                       firn_err *err);
/** Frees the arrays of f. */
void firn__fold_free(firn__fold *f);

/* ------------------------------------------------------------------------------------------------
 * Writing rows as Iceberg data files and position-delete files (table writer)
 * ----------------------------------------------------------------------------------------------*/

#include "firn/io.h"
#include "firn/manifest.h"
#include "firn/parquet.h"

/** Where one written row landed: index into the written files array and row position. */
typedef struct firn__rowloc {
    uint32_t file;
    uint32_t pos;
} firn__rowloc;

/** What to write and where. Everything borrowed. */
typedef struct firn__write_ctx {
    firn_io *io;
    const char *data_location;       /* "<table location>/data", no trailing '/' */
    const firn_field *schema;        /* table schema root (STRUCT); the batch's schema */
    const firn_partition_spec *spec; /* NULL or no fields: unpartitioned */
    const firn_pq_options *pq_opts;  /* NULL: defaults */
} firn__write_ctx;

/** Gets the primitive value of row `row` of a top-level or nested primitive column. */
void firn__column_value(firn_column *c, size_t row, firn_value *out);

/** Computes the partition tuple of row `row` of b into values[spec->n_fields] (types from
 * types[]); string/binary values borrow from the batch. */
FIRN_MUST_CHECK firn_rc firn__partition_of_row(const firn__write_ctx *w,
                                               firn_batch *b,
                                               size_t row,
                                               const firn_ptype *types,
                                               firn_value *values,
                                               firn_err *err);

/** Writes rows[0..n) of b (all rows when rows is NULL; n = rows of b then) as Parquet data
 * files, one or more per partition (rolled at pq_opts->file_bytes), named
 * "<data_location>/<partition path>/<uuid>-<k>.parquet". Appends the described files
 * (content 0, metrics from the writer, partition tuple) to *files / *n_files (array grown with
 * firn_reallocarray; caller frees each with firn_data_file_deinit and then the array) and, when
 * out_locs is not NULL, stores for the k-th written row (k < n) its file index (into *files)
 * and position in out_locs[k]. Errors from Parquet and FileIO; files already published stay
 * (unreferenced until committed). */
FIRN_MUST_CHECK firn_rc firn__write_data_files(const firn__write_ctx *w,
                                               firn_batch *b,
                                               const uint32_t *rows,
                                               size_t n,
                                               firn_data_file **files,
                                               size_t *n_files,
                                               firn__rowloc *out_locs,
                                               firn_err *err);

/** One row position to delete. */
typedef struct firn__posdel {
    const char *path; /* data file location (borrowed) */
    int64_t pos;
    uint32_t group; /* partition group: deletes of one group go to one file */
} firn__posdel;

/** Writes position deletes (format/spec.md "Position Delete Files": file_path 2147483546,
 * pos 2147483545, sorted by path then position) as one Parquet file per group, with the
 * partition tuple of the group's data files (partitions[group], n_partition values each,
 * spec spec_id). Sorts dels in place. Appends content-1 files to *files. Full, untruncated
 * bounds on file_path so readers prune by path; referenced_data_file set when a file refers
 * to one data file only. */
FIRN_MUST_CHECK firn_rc firn__write_position_deletes(const firn__write_ctx *w,
                                                     firn__posdel *dels,
                                                     size_t n_dels,
                                                     const firn_value *const *partitions,
                                                     size_t n_partition,
                                                     int32_t spec_id,
                                                     firn_data_file **files,
                                                     size_t *n_files,
                                                     firn_err *err);

#endif
