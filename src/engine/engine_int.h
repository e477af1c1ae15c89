/* SPDX-License-Identifier: Apache-2.0 */
/* Private interfaces of the engine module: the primary-key index and change folding. */
#ifndef FIRN_ENGINE_INT_H
#define FIRN_ENGINE_INT_H

#include "firn/batch.h"

/* ------------------------------------------------------------------------------------------------
 * Primary-key index: key -> (data file ordinal, row position) with bounded memory
 * (DELETES.md §5.2, docs/internals/pkindex.md): keys become 64-bit fingerprints (exact for single
 * integer keys, keyed SipHash plus a 32-bit check hash otherwise), held in a memtable that flushes
 * to immutable hash-sorted runs on local disk, merged size-tiered; lookups are sorted batch probes
 * merge-joined with the runs through a bounded page cache. Not thread-safe: one caller at a time.
 * ----------------------------------------------------------------------------------------------*/

typedef struct firn__pkindex firn__pkindex;

/** Where a row lives: the ordinal of its data file in the index's file table, and its 0-based
 * row position inside that file. */
typedef struct firn__pkloc {
    uint32_t file;
    uint32_t pos;
} firn__pkloc;

/** A key's fingerprint in one index: h sorts the runs; c is 0 for single integer keys (h is then
 * a bijection of the value) and a second, independent 32-bit hash otherwise. */
typedef struct firn__pkkey {
    uint64_t h;
    uint32_t c;
} firn__pkkey;

/** How an index is set up. Zero values take the defaults. */
typedef struct firn__pkindex_opts {
    const char *dir;     /* folder for run files (created on first flush); NULL: a private
                            temporary folder removed by firn__pkindex_free */
    size_t memory_limit; /* resident budget in bytes: memtable, page cache, fences; default
                            FIRN_PKINDEX_MEMORY_DEFAULT, at least 64 KiB */
    const uint8_t *seed; /* 16 bytes keying the hash of non-integer keys; NULL: random */
} firn__pkindex_opts;

#define FIRN_PKINDEX_MEMORY_DEFAULT ((size_t)128 << 20)

/** Figures for logs, tests and the benchmark. */
typedef struct firn__pkindex_stats {
    size_t keys;           /* live keys (firn__pkindex_count) */
    size_t runs;           /* run files */
    uint64_t run_entries;  /* entries in runs, tombstones and shadowed ones included */
    uint64_t disk_bytes;   /* bytes of run files */
    size_t memtable_bytes; /* memtable slots allocated */
    size_t memtable_entries;
    size_t cache_bytes; /* page cache frames allocated */
    size_t fence_bytes;
    uint64_t flushes, merges, page_reads, page_hits;
    uint64_t spill_keys;  /* slots in an open bulk spill */
    uint64_t spill_bytes; /* the bytes they take, in its file and its partition buffers */
} firn__pkindex_stats;

/** Returns an empty index in a private temporary folder with the default budget. Free with
 * firn__pkindex_free. */
firn__pkindex *firn__pkindex_new(void);
/** Returns an empty index set up by o (NULL: defaults). Run files already in o->dir are removed
 * when the first run is written. */
firn__pkindex *firn__pkindex_new_opts(const firn__pkindex_opts *o);
/** Opens the index kept in o->dir (required; created when missing) by the last
 * firn__pkindex_checkpoint: loaded (*out_loaded true) when that checkpoint carries tag and its
 * files check out, else an empty index (why[why_cap] says why; the folder's old files go at
 * first use). The folder stays locked until free. FIRN_ERR_IO; FIRN_ERR_UNAVAILABLE when
 * another process holds the folder. */
FIRN_MUST_CHECK firn_rc firn__pkindex_open(const firn__pkindex_opts *o,
                                           const char *tag,
                                           firn__pkindex **out,
                                           bool *out_loaded,
                                           char *why,
                                           size_t why_cap,
                                           firn_err *err);
/** Makes the current state durable in the index's folder under tag (the memtable becomes a
 * run, runs are fsynced, a manifest written atomically), so that firn__pkindex_open with the
 * same tag loads it; kept by firn__pkindex_free until the next change. No-op for an index in a
 * private folder. FIRN_ERR_IO. */
FIRN_MUST_CHECK firn_rc firn__pkindex_checkpoint(firn__pkindex *idx,
                                                 const char *tag,
                                                 firn_err *err);
/** Frees idx and removes its run files unless they hold the last checkpoint (NULL accepted). */
void firn__pkindex_free(firn__pkindex *idx);
/** Number of live keys. Exact as long as the presence given to firn__pkindex_set/unset is
 * (it is for the byte-key calls below). */
size_t firn__pkindex_count(const firn__pkindex *idx);
/** Registers a data file (location copied) and returns its ordinal (at most 0xFFFFFFF0). */
uint32_t firn__pkindex_add_file(firn__pkindex *idx, const char *location);
/** Location of file ordinal (borrowed), NULL when out of range. */
const char *firn__pkindex_file(const firn__pkindex *idx, uint32_t file);
/** Number of registered files. */
uint32_t firn__pkindex_files(const firn__pkindex *idx);
/** Fingerprint of a key encoding (len bytes, from firn_batch_key_encode) in idx. */
firn__pkkey firn__pkindex_key(const firn__pkindex *idx, const uint8_t *key, size_t len);

/** Looks keys[0..n) up, in any order (sorted internally and merge-joined with the runs):
 * out_found[i] tells whether keys[i] is present, out_locs[i] is then its location. Errors:
 * FIRN_ERR_IO, FIRN_ERR_PARSE for a damaged run file. */
FIRN_MUST_CHECK firn_rc firn__pkindex_lookup(firn__pkindex *idx,
                                             const firn__pkkey *keys,
                                             size_t n,
                                             firn__pkloc *out_locs,
                                             bool *out_found,
                                             firn_err *err);
/** Sets k -> loc. present says whether k had a location before (from a lookup; false for keys
 * known new, as in a backfill); it keeps the count exact and is not needed for correctness of
 * lookups. May write a run and merge runs: FIRN_ERR_IO. */
FIRN_MUST_CHECK firn_rc
firn__pkindex_set(firn__pkindex *idx, firn__pkkey k, firn__pkloc loc, bool present, firn_err *err);
/** Adds keys[0..n), each new to the index (present false, as in a table's first copy), at rows
 * first_pos, first_pos + 1, ... of file ordinal `file` (at most 0xFFFFFFF0; first_pos + n - 1
 * must fit 32 bits): the same answers as firn__pkindex_set of each in turn. In bulk mode the keys
 * are appended to the bulk buffer (one run when bulk mode ends) or, once it is full, to the
 * spill's partitions, in one loop each; otherwise they go into the memtable, its lines prefetched
 * ahead.
 * Borrows keys. On error some of the keys may have been added. May write a run and merge runs:
 * FIRN_ERR_IO. */
FIRN_MUST_CHECK firn_rc firn__pkindex_add_new(firn__pkindex *idx,
                                              const firn__pkkey *keys,
                                              size_t n,
                                              uint32_t file,
                                              uint32_t first_pos,
                                              firn_err *err);
/** Fingerprints (firn__pkindex_key) of n key encodings laid end to end in bytes, into
 * out[0..n): key 0 is bytes[start, ends[0]), key i bytes[ends[i - 1], ends[i]) (the offsets
 * firn_batch_keys_encode gives). A bigint key is mixed in place, without a call per key. Borrows
 * bytes and ends. */
void firn__pkindex_keys(const firn__pkindex *idx,
                        const uint8_t *bytes,
                        uint32_t start,
                        const uint32_t *ends,
                        size_t n,
                        firn__pkkey *out);
/** Removes k (present as for firn__pkindex_set; nothing to do when false). FIRN_ERR_IO. */
FIRN_MUST_CHECK firn_rc firn__pkindex_unset(firn__pkindex *idx,
                                            firn__pkkey k,
                                            bool present,
                                            firn_err *err);

/** Finds key (len bytes, from firn_batch_key_encode): *out_found and, when found, *out. */
FIRN_MUST_CHECK firn_rc firn__pkindex_get(firn__pkindex *idx,
                                          const uint8_t *key,
                                          size_t len,
                                          bool *out_found,
                                          firn__pkloc *out,
                                          firn_err *err);
/** Sets key -> loc, replacing an earlier location (looks the key up first). */
FIRN_MUST_CHECK firn_rc firn__pkindex_put(
    firn__pkindex *idx, const uint8_t *key, size_t len, firn__pkloc loc, firn_err *err);
/** Removes key; *out_removed (NULL accepted) tells whether it was present. */
FIRN_MUST_CHECK firn_rc firn__pkindex_remove(
    firn__pkindex *idx, const uint8_t *key, size_t len, bool *out_removed, firn_err *err);

/** Sizes the empty memtable for about `keys` new keys (within its share of the memory limit) at
 * once, so that a large copy does not grow it by doubling: each growth touches a fresh table
 * (page faults) and places every entry again. No effect on a memtable holding entries or for a
 * few keys. In bulk mode the sizing waits for the first key: firn__pkindex_set sizes the
 * memtable, firn__pkindex_add_new the bulk buffer (within half the memtable's share), and the
 * other stays small. */
void firn__pkindex_reserve(firn__pkindex *idx, uint64_t keys);
/** Bulk mode (a table's first copy): while on, keys added by firn__pkindex_add_new (and keys set
 * after them) collect in a flat buffer in arrival order, keys set past what the memtable or that
 * buffer holds are spilled to hash partitions in a temporary file, and nothing is merged; turning
 * it off sorts the buffer or the spill into one run (eng_pkindex.c "bulk buffer", "bulk spill")
 * and merges every run into one. A lookup, removal or flush while on does the same first.
 * FIRN_ERR_IO. */
FIRN_MUST_CHECK firn_rc firn__pkindex_bulk(firn__pkindex *idx, bool on, firn_err *err);
/** Fills *out. */
void firn__pkindex_stats_get(const firn__pkindex *idx, firn__pkindex_stats *out);

/* An exact in-memory map of key bytes -> (u32, u32), for small, short-lived maps (folding a
 * buffer, grouping rows by partition). Not bounded: do not use for table-sized data. */
typedef struct firn__keymap firn__keymap;

/** Returns an empty map. Free with firn__keymap_free. */
firn__keymap *firn__keymap_new(void);
/** Frees m (NULL accepted). */
void firn__keymap_free(firn__keymap *m);
/** Number of keys. */
size_t firn__keymap_count(const firn__keymap *m);
/** Finds key; true and *out set when present. */
bool firn__keymap_get(const firn__keymap *m, const uint8_t *key, size_t len, firn__pkloc *out);
/** Sets key -> v, replacing an earlier value. */
void firn__keymap_put(firn__keymap *m, const uint8_t *key, size_t len, firn__pkloc v);
/** Removes key; true when it was present. */
bool firn__keymap_remove(firn__keymap *m, const uint8_t *key, size_t len);

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
    size_t n_deletes;      /* keys [n_upserts, n_keys) are deletes */
    uint32_t *delete_rows; /* row of the last change of each deleted key (n_deletes) */
    /* firn__multiset_fold only (NULL otherwise): per key, copies gained (> 0) or lost (< 0);
     * per upserted row, its key */
    int64_t *net;
    uint32_t *upsert_key;
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
/** firn__fold_run; with keep_deletes, a key whose last change is a delete is an upserted row
 * too (soft delete: the delete row is written as the key's tombstone) and n_deletes is 0. */
FIRN_MUST_CHECK firn_rc firn__fold_run_keep(const firn_batch *b,
                                            const uint32_t *key_cols,
                                            size_t n_key_cols,
                                            bool keep_deletes,
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
#include "firn/puffin.h"

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

/** A sequence of data files of one unpartitioned table written from many batches (rolled at
 * pq_opts->file_bytes): the backfill keeps one open per chunk so files reach the target size. */
typedef struct firn__stream firn__stream;
/** Starts a stream (w copied; its strings borrowed until close). FIRN_ERR_INVALID for a
 * partitioned spec. */
FIRN_MUST_CHECK firn_rc firn__stream_open(const firn__write_ctx *w,
                                          firn__stream **out,
                                          firn_err *err);
/** Appends every row of b (row positions continue across files). */
FIRN_MUST_CHECK firn_rc firn__stream_write(firn__stream *s, firn_batch *b, firn_err *err);
/** Closes the last file, moves the described files to *files / *n_files (appended; rows in
 * write order: file k holds the next record_count rows) and frees s, also on error. */
FIRN_MUST_CHECK firn_rc firn__stream_close(firn__stream *s,
                                           firn_data_file **files,
                                           size_t *n_files,
                                           firn_err *err);
/** Drops s; files it already published stay unreferenced. NULL accepted. */
void firn__stream_abort(firn__stream *s);

/** One row position to delete. */
typedef struct firn__posdel {
    const char *path; /* data file location (borrowed) */
    int64_t pos;
    uint32_t group; /* partition group: deletes of one group go to one file */
    uint32_t ord;   /* the data file's ordinal in the table's index file table */
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

/* ------------------------------------------------------------------------------------------------
 * The sync engine: tables, commits, backfill and CDC
 * ----------------------------------------------------------------------------------------------*/

#include "firn/catalog.h"
#include "firn/config.h"
#include "firn/engine.h"
#include "firn/pgoutput.h"
#include "firn/source_pg.h"

#include <pthread.h>

/* Snapshot summary keys firn writes (DESIGN.md "Exactly-once"). */
#define FIRN_SUMMARY_LSN       "firn.lsn"       /* last source commit LSN the table holds */
#define FIRN_SUMMARY_COMMIT_ID "firn.commit-id" /* unique id of the commit */
#define FIRN_SUMMARY_BACKFILL                                                                      \
    "firn.backfill" /* "done" once the initial copy is complete,                                   \
                     * "partial" on the chunk commits before */
/* Block ranges the initial copy committed so far: "<leaf oid>:<first>-<end>,..." (end exclusive,
 * 4294967295 = to the end of the relation), on every "partial" commit (eng_backfill.c). */
#define FIRN_SUMMARY_BACKFILL_CHUNKS "firn.backfill-chunks"
/* A source transaction committed in parts (eng_cdc.c, docs/cdc.md "Transactions and ordering"):
 * commit LSN and how many of its changes of the table (in stream order) the table holds. Written
 * while that LSN is past firn.lsn; a replay of the transaction skips exactly those changes. */
#define FIRN_SUMMARY_PART_LSN     "firn.part-lsn"
#define FIRN_SUMMARY_PART_CHANGES "firn.part-changes"
/* Location of the newest key index manifest persisted next to an upsert table when the commit
 * was made (docs/internals/pkindex.md "Persistence"): a start catches it up from its snapshot. */
#define FIRN_SUMMARY_KEY_INDEX "firn.key-index"
/* "done" on every commit of a CDC table whose initial copy is complete: the resume state then
 * survives the expiry of the snapshot that carried firn.backfill=done (eng_expire.c). */
#define FIRN_SUMMARY_COPY "firn.copy"

typedef struct firn__engine firn__engine;

/** Deleted rows of one indexed data file of a format-v3 table and its current deletion vector
 * (DELETES.md §5.2: current DVs stay in memory). */
typedef struct firn__dvfile {
    firn_bitmap64 *dead; /* every deleted position (DV and position deletes); NULL: none */
    char *dv_path;       /* Puffin file of the live DV, NULL: none */
    int64_t dv_offset;   /* its content_offset */
    int64_t dv_size;     /* its content_size_in_bytes */
    bool gone;           /* no longer live (another writer removed it, or firn dropped it whole) */
} firn__dvfile;

/** A live position-delete file of a format-v2 table whose rows firn knows: the data files it
 * deletes from, so that a consolidation can replace it (docs/internals/pkindex.md). */
typedef struct firn__delfile {
    char *path;
    uint32_t *ords; /* data file ordinals, distinct */
    size_t n_ords;
} firn__delfile;

/** What a consolidating commit writes and removes (eng_consolidate.c). */
typedef struct firn__consolidation {
    bool on;
    firn__posdel *dels; /* every deleted position of the rewritten data files */
    size_t n_dels;
    const char **removed; /* delete files replaced and data files dropped (borrowed) */
    size_t n_removed;
    size_t *retired; /* indexes into t->delfiles, ascending */
    size_t n_retired;
    uint32_t *dropped; /* ordinals of data files every row of which is deleted */
    size_t n_dropped;
} firn__consolidation;

/** One synced stream: a source table and its Iceberg table. */
typedef struct firn__table {
    firn__engine *eng;
    const firn_stream_config *stream; /* borrowed from the configuration */
    firn_pg_table *pg;                /* borrowed from the engine's discovery; for a source
                                       * table that is missing, a stub the table owns */
    bool missing;                     /* the source has no table of the stream's name: a stopped
                                       * stream (firn__table_open_stopped) */
    char *ns;                         /* Iceberg namespace */
    char *name;                       /* Iceberg table name */
    char *display;                    /* "ns.name" for messages */
    firn_catalog_table cat;           /* current metadata and its location (owned) */
    firn_field *schema;               /* batch schema: pg->schema with Iceberg ids (borrowed) */
    bool upsert;                      /* folded by key with position deletes, else append */
    bool soft_delete;                 /* upsert table whose deletes leave a tombstone row */
    bool needs_backfill;
    bool created;          /* the Iceberg table was created by this run (it did not exist) */
    bool created_ns;       /* ... and so was its namespace */
    bool cdc;              /* changes come from the replication stream */
    uint32_t key_cols[32]; /* batch columns of the identifier */
    size_t n_key;
    firn__pkindex *index;  /* upsert tables: key -> live row */
    firn_data_file *files; /* index file table: path + partition per ordinal */
    size_t n_files;
    bool dv;                 /* format v3: deletes are deletion vectors, not position deletes */
    bool eqdel;              /* upsert with equality deletes ("delete_mode" "equality"): no index */
    bool multiset;           /* keyless REPLICA IDENTITY FULL upsert: rows keyed by every column
                                plus an occurrence number (eng_multiset.c) */
    firn__dvfile *dv_files;  /* per file ordinal: deleted rows, current DV (v3), liveness */
    firn__delfile *delfiles; /* v2 tables: live position-delete files firn can replace */
    size_t n_delfiles;
    uint64_t committed_lsn;  /* changes at or below are in the table */
    firn_batch *buf;         /* CDC changes not yet committed */
    firn_data_file *pending; /* backfill data files not yet committed */
    size_t n_pending;
    bool index_dirty;      /* backfill retried a chunk: rebuild after commit */
    char *backfill_chunks; /* unfinished initial copy: FIRN_SUMMARY_BACKFILL_CHUNKS of the
                            * last "partial" commit (NULL: none) */
    char *index_dir;       /* the index's local folder, NULL: a private temporary one */
    bool index_private;    /* the folder is another process's: keep to a temporary one */
    bool index_loaded;     /* index read from its folder: the rebuild only places files */
    bool index_synced;     /* the index holds exactly snapshot index_snapshot */
    int64_t index_snapshot;
    firn__keymap *index_paths; /* while placing files of a loaded index: path -> ordinal */
    bool index_catchup;        /* the loaded index holds an older snapshot: the rebuild indexes
                                * the data files it does not know instead of failing */
    char *index_ref;           /* newest index manifest next to the table (firn.key-index) */
    struct firn__pkxman *index_remote; /* its contents (runs already uploaded) */
    int64_t index_persist_ns;          /* monotonic time of the last upload or download, 0:
                                        * none (the next chance uploads) */
    pthread_mutex_t mu;                /* guards pending, files and index during backfill */
    firn_pg_decode_stats stats;        /* CDC: values stored by the fallback rules (decoders count
                                        * here; the CDC thread alone writes it) */
    firn_pg_decode_stats copy_stats;   /* the same for the copies of this run, under mu */
    unsigned replaced_warned;          /* CDC: kinds of fallback already warned of (bit per kind) */
    uint64_t rows_written;
    firn_strlist default_added; /* columns this run added to the table that have a source
                                   DEFAULT: existing rows hold a value no WAL change carried */
    bool copied;                /* the table was copied in this run (in a snapshot taken after
                                   its schema was read) */
    uint64_t changes_read[3];   /* CDC changes appended to buf by operation (FIRN__OP_*: insert,
                                   update, delete; stats file and metrics) */
    uint64_t commits;           /* snapshots committed by this run (stats file) */
    size_t txn_rows0;           /* CDC: rows buffered before the transaction being read */
    int64_t flush_ns;      /* CDC: monotonic time of the table's last flush (or of the start) */
    uint64_t hold_lsn;     /* CDC: with rows buffered, the end of the last transaction read before
                              the first of them: the slot may not be confirmed past it */
    uint64_t part_lsn;     /* commit LSN of a transaction committed in parts (0: none), and */
    uint64_t part_changes; /* how many of its changes of this table are committed */
    uint64_t txn_changes;  /* CDC: changes of this table in the transaction being read */
    bool buf_free;         /* the flush at hand may replace buf (CDC's: no decoder holds it) */
    bool halted;           /* CDC: stopped at a schema change the table cannot take; its changes
                              are skipped and the slot is not confirmed past halt_lsn */
    uint64_t halt_lsn;
    char *stop_reason; /* quarantined after a change it could not take (eng_cdc.c): why, owned */
    bool incompatible; /* the source has a type the table cannot take (check_promotions) */
    bool key_retyped;  /* a promotion changed the encoding of key values: the key index is built
                          again from the data files, not loaded */
    firn_strlist left_out; /* source columns the stream's `columns` / `sync_new_columns` leave
                              out: CDC drops their values (eng_columns.c) */
    /* Catalog outages met by this table's commits (eng_commit.c, under its own lock; read with
     * firn__table_outage): */
    uint64_t catalog_outages;                  /* commits the catalog refused at least once */
    int64_t outage_ns;                         /* time spent in the outages that ended */
    int64_t outage_since_ns;                   /* monotonic start of the ongoing one, 0: none */
    int64_t outage_since_us;                   /* its wall-clock start */
    char last_catalog_error[FIRN_ERR_MSG_MAX]; /* the catalog's last refusal, "" = none */
    size_t metrics_slot;        /* 1 + its entry in the engine's metrics, 0: none yet (guarded by
                                   the metrics' lock) */
    firn_strlist rename_from;   /* columns renamed on the source (old names) and their new names: */
    firn_strlist rename_to;     /* the next schema commit renames the Iceberg fields (same ids) */
    uint32_t expire_commits;    /* commits since expiry last planned (eng_expire.c) */
    bool metadata_warned;       /* the metadata-budget warning was logged in this run */
    size_t metadata_bytes;      /* metadata JSON size when expiry last measured it (0: not yet) */
    uint64_t snapshots_expired; /* by this run (stats file) */
} firn__table;

struct firn__engine {
    const firn_config *cfg;
    const firn_sync_options *opts;
    firn_state state; /* the engine's copy, saved after commits */
    firn_io *io;      /* owned when io_owned, else the catalog's */
    bool io_owned;
    firn_catalog *catalog;
    firn_pg_conn_config conn;
    char *conninfo; /* secret inside: never logged */
    firn_pg_conn *sql;
    firn_pg_catalog *pgcat;
    firn__table **tables;
    size_t n_tables;
    firn_pq_options pq;
    firn_pq_options pq_buffered; /* pq for rows a flush or a compaction holds in memory: row
                                    groups of at most row_group_size of values, so a reader
                                    (compaction) never decodes much more at once */
    char *warehouse;
    int64_t start_ns;     /* monotonic start of the run (stats file) */
    int64_t start_us;     /* wall-clock start */
    int64_t stats_ns;     /* last stats file write */
    firn_err halt;        /* the first stream stopped at a schema change (code 0: none) */
    uint64_t wal_lsn;     /* the source's WAL position when last asked (CDC; 0: unknown) */
    bool backfill_resume; /* the slot of an unfinished copy is kept: keyed tables copy only
                           * their missing chunks, as upserts (eng_backfill.c) */
    /* --metrics-listen: what /metrics serves (borrowed), or NULL */
    struct firn__metrics *metrics;
    /* txid_current_snapshot() text of this run's copy outside a slot's snapshot (owned; NULL:
     * none): the changes of the transactions it sees are in the tables it copied, and are not
     * replayed there; copy_lsn: the WAL position read just after it, past every commit it
     * sees */
    char *copy_snapshot;
    uint64_t copy_lsn;
    /* The run began to read or change data (a copy, a slot, the stream, an incremental read):
     * until then a failure undoes what the run created (firn__engine_undo_created) */
    bool started;
    bool publication_created; /* this run created the publication */
};

/* ---- metrics (eng_metrics.c) and their HTTP server (eng_serve.c) ---------------------------- */

/* Operations counted in firn__table.changes_read. */
#define FIRN__OP_INSERT 0
#define FIRN__OP_UPDATE 1
#define FIRN__OP_DELETE 2

/** What /metrics, /healthz and /readyz serve (docs/operations.md "Metrics and health"): copies of
 * the engine's counters, published by the engine and read by the server thread, each side under the
 * object's lock. Thread-safe. */
typedef struct firn__metrics firn__metrics;

/** Returns an empty registry for a run started at start_us (wall clock). Free with
 * firn__metrics_free. */
firn__metrics *firn__metrics_new(int64_t start_us);
/** Frees m (NULL accepted). The server reading it must be stopped first. */
void firn__metrics_free(firn__metrics *m);
/** Copies e's counters into e->metrics (nothing without one): per table changes read, rows
 * written, buffered changes, stopped streams, values replaced; the source's WAL position
 * and the acknowledged one; phase (static text as firn__stats_write takes it, NULL: unchanged).
 * Call where firn__stats_write may be called (the engine thread, or under the backfill's commit
 * lock); reads rows_written under each table's lock. */
void firn__metrics_publish(firn__engine *e, const char *phase);
/** In the CDC loop: firn__metrics_publish(e, "cdc") when the last one is a second old. */
void firn__metrics_tick(firn__engine *e);
/** Counts a reconnect to the source that succeeded. */
void firn__metrics_reconnected(firn__engine *e);
/** Counts one commit of t (firn__table_commit and its siblings) that took duration_ns: its
 * outcome rc (FIRN_OK; FIRN_ERR_CONFLICT; FIRN_ERR_UNKNOWN_OUTCOME; other: failed) and, when it
 * landed, the bytes of the data files data[0..n_data) and delete files deletes[0..n_deletes) it
 * added. Any thread. */
void firn__metrics_commit(firn__table *t,
                          firn_rc rc,
                          int64_t duration_ns,
                          const firn_data_file *data,
                          size_t n_data,
                          const firn_data_file *deletes,
                          size_t n_deletes);
/** A commit attempt of t failed with rc and is retried: counted, and t is not ready until a
 * commit of it lands. Any thread. */
void firn__metrics_commit_retry(firn__table *t, firn_rc rc);
/** A catalog outage of t's commits (monotonic ns) began at start_ns (end_ns 0) or ended at
 * end_ns: counted, and its time, for firn_catalog_outage*. Any thread. */
void firn__metrics_outage(firn__table *t, int64_t start_ns, int64_t end_ns);
/** Appends the Prometheus text exposition (format 0.0.4) of m to out. FIRN_ERR_TOO_LARGE past
 * out's maximum. */
FIRN_MUST_CHECK firn_rc firn__metrics_render(firn__metrics *m, firn_buf *out);
/** Whether the run is ready (docs/operations.md "Health"): reading the source (copying or
 * streaming), no stream stopped, no table whose last commit attempt failed. Otherwise why
 * (cap bytes) gets the reasons. */
bool firn__metrics_ready(firn__metrics *m, char *why, size_t cap);

/** Checks the form of a listen address "HOST:PORT" (HOST an IPv4 address, a bracketed IPv6
 * address or a host name; PORT 0-65535), without resolving it. origin names where it came from
 * in messages ("--metrics-listen"). FIRN_ERR_CONFIG with one line saying what is wrong. */
FIRN_MUST_CHECK firn_rc firn__metrics_listen_check(const char *origin,
                                                   const char *text,
                                                   firn_err *err);

typedef struct firn__metrics_server firn__metrics_server;
/** Binds text (as firn__metrics_listen_check) and serves m on it from a thread of its own:
 * GET /metrics, /healthz, /readyz. FIRN_ERR_CONFIG naming the address for a bad, unresolvable
 * or unbindable one (in use, not local). m is borrowed until firn__metrics_server_stop. */
FIRN_MUST_CHECK firn_rc firn__metrics_serve(firn__metrics *m,
                                            const char *origin,
                                            const char *text,
                                            firn__metrics_server **out,
                                            firn_err *err);
/** Stops the server and closes its socket (NULL accepted). */
void firn__metrics_server_stop(firn__metrics_server *s);

/** Applies stream s's `columns`, `sync_new_columns` and `filter` to its source table pg
 * (docs/configuration.md "Columns and filter"): the columns left out are removed from pg (so
 * from the Iceberg schema and the COPY queries) and their names pushed to left_out; key,
 * incremental cursor and partition source columns are kept with an INFO line. table_cols: the
 * columns of the stream's existing Iceberg table, NULL when there is none or it is not known
 * (`firn check`). FIRN_ERR_CONFIG naming the stream and column for a column the source table
 * does not have. Not thread-safe. */
FIRN_MUST_CHECK firn_rc firn__columns_apply(const firn_stream_config *s,
                                            const firn_strlist *table_cols,
                                            firn_pg_table *pg,
                                            firn_strlist *left_out,
                                            firn_err *err);
/** firn__columns_apply for a sync: table_cols read from the stream's Iceberg table through
 * e's catalog, and a warning per column the selection adds to or removes from a table that has
 * rows. Catalog errors. */
FIRN_MUST_CHECK firn_rc firn__columns_setup(firn__engine *e,
                                            const firn_stream_config *s,
                                            firn_pg_table *pg,
                                            firn_strlist *left_out,
                                            firn_err *err);
/** True when CDC leaves out source column `name`, which t's source description lacks: a column
 * the stream's `columns` left out, or any column added later when `sync_new_columns` is false
 * (logged once per column). */
bool firn__columns_left_out(firn__table *t, const char *name);
/** `firn discover` over an existing streams file: st (the new description of source table t,
 * its columns copied from old) keeps old's selection when the source gained columns since
 * old's type_schema: with `columns` and sync_new_columns true they are appended to `columns`;
 * without `columns` and sync_new_columns false, `columns` lists the known ones. Also rewrites
 * st->selection. Logs one INFO line when it changes anything. */
void firn__columns_rediscover(firn_stream_config *st,
                              const firn_pg_table *t,
                              const firn_stream_config *old);
/** `firn check` for the selected streams: every `columns` name exists in its source table, and
 * each `filter` is valid SQL for it (EXPLAIN on c). FIRN_ERR_CONFIG naming the stream. */
FIRN_MUST_CHECK firn_rc firn__columns_check(const firn_config *cfg, firn_pg_conn *c, firn_err *err);

/** Opens or creates the Iceberg table of t (namespace too), evolves its schema to the source's,
 * aligns the batch schema's field ids with the table's, reads the committed position and the
 * backfill marker from the snapshot summaries and, for upsert tables, loads the key index from
 * the live files. Errors from the catalog, FileIO, Parquet; FIRN_ERR_SCHEMA for a source schema
 * the table cannot take. */
FIRN_MUST_CHECK firn_rc firn__table_open(firn__table *t, firn_err *err);
/** For a stream whose source table is missing (t->missing, t->pg a stub): loads its Iceberg
 * table when it exists and reads the committed position, then marks the stream stopped like an
 * incompatible schema change (t->halted, halt_lsn the committed position, so the slot is not
 * confirmed past changes the stream still needs). Errors of the catalog. */
FIRN_MUST_CHECK firn_rc firn__table_open_stopped(firn__table *t, firn_err *err);
/** True when t's current snapshot is its initial copy (nothing committed after it), or when the
 * copy of an empty source table is recorded and nothing was committed since. */
bool firn__table_backfill_is_last(const firn__table *t);
/** True when anything was ever committed to the table of md: a snapshot, or the marker of the
 * copy of an empty source table. False for a table whose first copy failed or was stopped
 * before its first commit: its schema still follows the stream's column selection (columns
 * left out since are dropped from it, docs/configuration.md "Columns and filter"). */
bool firn__table_written(const firn_table_metadata *md);
/** True when the rules for changing a stream's columns on a table with rows apply
 * (docs/configuration.md "Columns and filter"): for full_refresh_cdc once the first copy is
 * finished (the newest backfill marker is "done"), for the other modes once anything was
 * committed (firn__table_written). Before that the table follows the selection exactly. */
bool firn__table_settled(const firn_table_metadata *md, firn_sync_mode mode);
/** Marks t's initial copy as pending again and empties its key index (the copy rebuilds it). */
void firn__table_restart_backfill(firn__table *t);
/** Frees what t owns (not t's borrowed stream and pg table). */
void firn__table_deinit(firn__table *t);
/** Sets *out to whether source column `name` of t satisfies `cond`, an SQL condition on
 * pg_attribute (e.g. "NOT attisdropped", "atthasdef OR atthasmissing"; a constant of the
 * caller, never user input). One catalog query on the engine's SQL connection; FIRN_ERR_SOURCE
 * naming the column when it fails. */
firn_rc firn__table_column_matches(
    const firn__table *t, const char *name, const char *cond, bool *out, firn_err *err);
/** Sets err to the one line that names a type change of source column `column` table t cannot
 * take (from: the table's Iceberg type; to: the source's new type name and its Iceberg field)
 * with the remedy (docs/cdc.md "Schema changes"). Returns FIRN_ERR_SCHEMA. */
firn_rc firn__table_incompatible(const firn__table *t,
                                 const char *column,
                                 const firn_field *from,
                                 const char *to_name,
                                 const firn_field *to,
                                 firn_err *err);
/** In-stream schema change (eng_cdc.c): appends source column `name` of type `type` (owned by
 * the table from then on) to t's source description and batch schema. Nothing is committed
 * until firn__table_schema_apply. */
void firn__table_column_add(firn__table *t, const char *name, firn_pg_type *type);
/** In-stream schema change: column idx of t's source description takes `type` (owned by the
 * table from then on), whose field `field` (owned too) the caller checked the table can take. */
void firn__table_column_retype(firn__table *t, size_t idx, firn_pg_type *type, firn_field *field);
/** After firn__table_column_add/_retype with an empty buffer: commits the evolved schema
 * through the catalog (a new schema id, new field ids after last-column-id: DESIGN.md "Schema
 * evolution"), gives the batch schema the table's ids and makes a new buffer for it. */
firn_rc firn__table_schema_apply(firn__table *t, firn_err *err);

/** A Relation message names t's source table (matched by oid) rel_ns.rel_name (eng_rename.c):
 * when the table is now named otherwise than its stream (renamed or moved to another schema
 * while streaming), *out_renamed is set and why holds the one line naming both names and the
 * remedies (FIRN_ERR_SCHEMA); a name the table has again (renamed back) is taken. One catalog
 * query on the engine's SQL connection; FIRN_ERR_SOURCE when it fails. */
firn_rc firn__rename_check_table(firn__table *t,
                                 const char *rel_ns,
                                 const char *rel_name,
                                 bool *out_renamed,
                                 firn_err *why,
                                 firn_err *err);

/** A column of a Relation message found to be a source column of the table renamed. */
typedef struct firn__colrename {
    size_t idx;       /* the table's source column */
    uint16_t rel_col; /* the message's column (its new name) */
} firn__colrename;

/** Table property: "<field id>:<attnum>,..." for the table's source columns, so that a column
 * renamed on the source between runs is found by its attnum (eng_table.c). */
#define FIRN_PROP_ATTNUMS "firn.source-attnums"

/** Sets *out to the attnum of live source column `name` of t, 0 when there is none. One
 * catalog query; FIRN_ERR_SOURCE. */
firn_rc firn__rename_attnum(firn__table *t, const char *name, int16_t *out, firn_err *err);
/** Finds the source columns of t that a Relation message shows renamed (eng_rename.c): when
 * the message describes the catalog now (firn__rename_permuted), every column by its attnum,
 * each known column under another name a rename; otherwise a
 * column the message lacks whose attnum is now named as a column of the message the table does
 * not know. out (rel->n_cols entries) gets them and batch_col maps them. *halt with why set (the
 * one line, FIRN_ERR_SCHEMA) when a lacking column is now named otherwise (renamed again: which
 * column of the message it is cannot be told). Catalog queries only when the message has a
 * column the table does not know; FIRN_ERR_SOURCE. */
firn_rc firn__rename_plan(firn__table *t,
                          const firn_pgo_rel *rel,
                          int32_t *batch_col,
                          firn__colrename *out,
                          size_t *n_out,
                          firn_err *why,
                          bool *halt,
                          firn_err *err);
/** *out: the Relation message describes the source catalog as it is now (its column names are,
 * in order, the catalog's live columns by attnum) and a known column is at another place by
 * position than by name (batch_col): names moved between columns (a swap: a to tmp, b to a, tmp
 * to b), which firn__rename_plan maps by attnum. One catalog query; FIRN_ERR_SOURCE. */
firn_rc firn__rename_permuted(
    firn__table *t, const firn_pgo_rel *rel, const int32_t *batch_col, bool *out, firn_err *err);
/** *out: a source column of t (of known attnum) that no column of a Relation message maps to
 * (batch_col) is live in the source catalog now: a column of the message that no longer exists
 * may be it under a name it had in between (renamed twice), so the message needs
 * firn__rename_plan. Catalog queries; FIRN_ERR_SOURCE. */
firn_rc firn__rename_unplaced(
    firn__table *t, const firn_pgo_rel *rel, const int32_t *batch_col, bool *out, firn_err *err);
/** The source column of t that column `name` of a Relation message is under an older name
 * (a field of an older Iceberg schema of the table with that name and the id of a source column
 * the message lacks: changes made before a rename the table took), or -1. */
int32_t firn__rename_historic(const firn__table *t, const firn_pgo_rel *rel, const char *name);

/** FIRN_PROP_ATTNUMS of t's source columns as named in root (a table schema) into out. */
FIRN_MUST_CHECK firn_rc firn__rename_attnums_text(const firn__table *t,
                                                  const firn_field *root,
                                                  firn_buf *out);
/** At the start of a run: a source column root (the table's schema) lacks whose attnum
 * FIRN_PROP_ATTNUMS gives to a field of root no source column is named as any more was renamed
 * on the source: queued in t->rename_from / rename_to for the next schema commit (logged). */
void firn__rename_between_runs(firn__table *t, const firn_field *root);
/** A copy of cur with t's queued renames applied (same ids), NULL when none are queued. */
firn_schema *firn__rename_apply(const firn__table *t, const firn_schema *cur);
/** Table property: the oid of the stream's source table, so that a table renamed between runs
 * is found under its new name (eng_rename.c). */
#define FIRN_PROP_SOURCE_OID "firn.source-oid"
/** Table property of a partitioned stream: the oids of its leaf partitions ("16390,16402") at
 * the last start of a run, so that one attached since is checked for rows PostgreSQL never sent
 * (eng_cdc.c firn__cdc_check_leaves). */
#define FIRN_PROP_LEAVES "firn.source-leaves"
/** Commits FIRN_PROP_ATTNUMS and FIRN_PROP_SOURCE_OID when the table's differ from the
 * source's (a table created before they were kept, columns added since, a table created again).
 * Errors of the catalog commit. */
FIRN_MUST_CHECK firn_rc firn__rename_save_attnums(firn__table *t, firn_err *err);
/** A stopped stream whose source table is missing at the start (t->missing): why gets its one
 * line (FIRN_ERR_SCHEMA). With FIRN_PROP_SOURCE_OID naming a table that now has another name,
 * the line of a renamed table with both remedies; else what to do for a renamed or a dropped
 * table. One catalog query on the engine's SQL connection; FIRN_ERR_SOURCE when it fails. */
FIRN_MUST_CHECK firn_rc firn__rename_missing_line(firn__table *t, firn_err *why, firn_err *err);

/** One file of the table's FileIO as firn_pq_reader_open's ranged source: io and path are
 * borrowed and must outlive the reader. */
typedef struct firn__file_range {
    firn_io *io;
    const char *path;
} firn__file_range;

/** firn_pq_reader_open's read callback over a firn__file_range (ctx): len bytes at offset
 * (bytes) into out; the errors of firn_io_read_range. */
firn_rc firn__file_range_read(void *ctx, uint64_t offset, size_t len, firn_buf *out, firn_err *err);

/** Rebuilds t's key index from the key columns of every live data file of the current
 * snapshot minus its position deletes. */
FIRN_MUST_CHECK firn_rc firn__table_rebuild_index(firn__table *t, firn_err *err);
/** Catches t's key index up with the commits between snapshot base_snapshot_id (which the
 * index reflects) and t's current snapshot, made by other writers: the data files they added are
 * indexed (a key found there now points at its newest row); data files they removed are marked
 * gone (a key still pointing there needs no delete: its row went with the file) and delete files
 * they removed are no longer tracked for consolidation. *out_ok is false, and nothing was
 * read, when base is not an ancestor of the current snapshot (or is too far back): rebuild the
 * index then. Errors from FileIO and Parquet. */
FIRN_MUST_CHECK firn_rc firn__table_index_since(firn__table *t,
                                                int64_t base_snapshot_id,
                                                bool *out_ok,
                                                firn_err *err);

/** A new, empty key index for t in its folder with its share of the memory budget
 * (eng_pkindex_table.c); t is marked as not holding a snapshot. */
firn__pkindex *firn__table_new_index(firn__table *t);
/** Sets t->index: with load, the copy a clean stop saved for the current snapshot when there is
 * one (t->index_loaded), else empty; in a private temporary folder when another process holds
 * the table's folder. FIRN_ERR_IO. */
FIRN_MUST_CHECK firn_rc firn__table_open_index(firn__table *t, bool load, firn_err *err);
/** For a loaded index: gives live data file f the ordinal the index knows it by (t->files and
 * t->dv_files sized to the index's file table). FIRN_ERR_NOT_FOUND when the index does not know
 * f (then it must be rebuilt). */
FIRN_MUST_CHECK firn_rc firn__table_index_place(firn__table *t,
                                                const firn_data_file *f,
                                                uint32_t *out_ord,
                                                firn_err *err);
/** Ends placing files of a loaded index. */
void firn__table_index_loaded_done(firn__table *t);
/** The index now holds exactly the current snapshot (after a rebuild, load, backfill commit or
 * truncate). */
void firn__table_index_synced(firn__table *t);
/** A flush committed t's own changes and updated the index: it still holds a snapshot exactly
 * when the new snapshot's parent is the one it held. */
void firn__table_index_advanced(firn__table *t);
/** At a clean stop: saves the index for the next start when it holds the current snapshot
 * (logs, never fails). */
void firn__table_save_index(firn__table *t);

/* ---- the key index next to the table (eng_pkindex_share.c) -------------------------------- */

/** With destination.persist_key_index, for the empty index just opened in t's folder: finds the
 * newest index persisted next to the table for an ancestor of the current snapshot and downloads
 * it into t->index (true; t->index_catchup when it holds an older snapshot). False when there is
 * none or it is not usable (one log line; t->index is then a new empty index). */
bool firn__table_share_fetch(firn__table *t);
/** After t's index was loaded from its local folder: remembers the manifest next to the table,
 * so that runs it already names are not uploaded again. */
void firn__table_share_adopt(firn__table *t);
/** With destination.persist_key_index: uploads t's index (new runs, a manifest
 * "<location>/metadata/firn-index/index-<snapshot id>.pkm") when it holds the current snapshot
 * exactly, is not there yet, and force or persist_key_index_interval passed since the last
 * upload (or none was made). Logs, never fails. Later commits name the manifest in their
 * summary (FIRN_SUMMARY_KEY_INDEX). */
void firn__table_share_persist(firn__table *t, bool force);
/** Frees t's persisted-index state. */
void firn__table_share_free(firn__table *t);

/** Runs apply(t, ctx, err) — a metadata-only change (table properties) built from
 * t->cat.metadata and committed with firn_catalog_commit, t->cat taken from the reply — and,
 * after a transient error (HTTP 429/5xx, a dropped connection), an unknown outcome or a
 * conflict, reloads the table and runs it again: as firn__table_commit retries (a refusing
 * catalog for up to commit.retry_timeout_seconds, conflicts for two minutes). apply must be
 * idempotent against the reloaded metadata: a change that already took effect (its reply lost)
 * is then found there and not made twice. Returns apply's last result. */
FIRN_MUST_CHECK firn_rc firn__table_meta_commit(firn__table *t,
                                                firn_rc (*apply)(firn__table *t,
                                                                 void *ctx,
                                                                 firn_err *err),
                                                void *ctx,
                                                firn_err *err);
/** Commits one snapshot to t: added data files, added delete files, removed files (paths) or
 * truncate, with firn.lsn = lsn (0: keep the previous value) and extra (NULL or more keys).
 * Retries on conflicts (reload, rebuild the manifest list on the new parent; for up to two
 * minutes with jittered backoff, so a table other writers keep busy cannot starve it), and while
 * the catalog refuses commits (HTTP 429/5xx, unreachable, lost replies: a catalog outage) with
 * capped exponential backoff and jitter, no sooner than a Retry-After, for up to
 * commit.retry_timeout_seconds (default 300 s for a catch-up run, no limit under --follow); the
 * outage is logged once when it starts and once when it ends, and counted for stats.json. Before
 * each retry it reloads and looks for the commit id (an unknown outcome is never committed
 * twice). A stop requested meanwhile ends the wait with FIRN_ERR_CANCELLED. Updates t->cat and
 * t->committed_lsn. */
FIRN_MUST_CHECK firn_rc firn__table_commit(firn__table *t,
                                           const firn_data_file *data,
                                           size_t n_data,
                                           const firn_data_file *deletes,
                                           size_t n_deletes,
                                           bool truncate,
                                           uint64_t lsn,
                                           const firn_summary *extra,
                                           firn_err *err);

/* The manifest transform of a streams-file partition transform (eng_table.c). */
firn_transform_kind firn__transform_kind(firn_cfg_transform t);

/* The source tables of the selected streams for firn_pg_discover_named (eng_sync.c), names
 * borrowed from ss: returns a firn_malloc'd array of *out_n entries (free with firn_free). */
firn_pg_relname *firn__selected_names(const firn_streams_config *ss, size_t *out_n);

/* Check (eng_streamcheck.c): the selected streams whose source table pgcat lacks, in one line
 * with what to do (FIRN_ERR_NOT_FOUND); *out_config when one of them was never synced (no
 * state entry: a misspelt name, a configuration error). FIRN_OK when none is missing. */
FIRN_MUST_CHECK firn_rc firn__streams_check_missing(const firn_config *cfg,
                                                    firn_pg_catalog *pgcat,
                                                    bool *out_config,
                                                    firn_err *err);
/* Appends "\"a.b\", \"c.d\" and 3 more" (up to 5 names) for the n streams of items[idx[i]]. */
void firn__streams_names_append(firn_buf *b,
                                const firn_stream_config *items,
                                const size_t *idx,
                                size_t n);

/** Records in err (NULL accepted) that a failure rc (FIRN_OK: nothing) happened on side where,
 * unless an inner call said already (err->fault set) or rc says nothing about a side (a
 * configuration error, a schema change, a stop, an internal error): the exit code follows the
 * side that failed, not the phase the run was in (README "Exit codes"). Returns rc. */
firn_rc firn__blame(firn_err *err, firn_fault where, firn_rc rc);

/** Writes t's buffered changes (fold by key, data files, position deletes) and commits them
 * with position lsn. Nothing to do for an empty buffer. Failures are blamed on the destination
 * (firn__blame). */
FIRN_MUST_CHECK firn_rc firn__table_flush(firn__table *t, uint64_t lsn, firn_err *err);
/** firn__table_flush with extra snapshot summary keys (NULL: none). */
FIRN_MUST_CHECK firn_rc firn__table_flush_extra(firn__table *t,
                                                uint64_t lsn,
                                                const firn_summary *extra,
                                                firn_err *err);
/** Runs the incremental (cursor column) streams: rows at or above the committed cursor
 * (docs/configuration.md "Incremental streams"). */
FIRN_MUST_CHECK firn_rc firn__incremental_run(firn__engine *e, firn_err *err);
/** Checks stream s against its discovered source table pg (borrowed): partition columns exist
 * and their transforms fit the columns' Iceberg types, incremental cursor columns exist, and a
 * primary_key override of a CDC upsert stream outside the primary key has REPLICA IDENTITY FULL.
 * FIRN_ERR_CONFIG with one line naming the stream and what to do. */
FIRN_MUST_CHECK firn_rc firn__stream_check_table(const firn_stream_config *s,
                                                 const firn_pg_table *pg,
                                                 firn_err *err);
/** True when err (a failed connection attempt) is libpq refusing a connection parameter (an
 * unknown option, an invalid sslmode or integer value): then err is rewritten as a
 * FIRN_ERR_CONFIG line that says where to fix it. NULL accepted (false). */
bool firn__conn_error_is_config(firn_err *err);
/** firn__stream_check_table for every selected stream of cfg whose table exists on c (tables
 * missing from the source are left to sync). *out_config is set when a stream is at fault (a
 * configuration error) rather than the source. */
FIRN_MUST_CHECK firn_rc firn__streams_check_source(const firn_config *cfg,
                                                   firn_pg_conn *c,
                                                   bool *out_config,
                                                   firn_err *err);
/** Registers a committed data file in t's index file table and returns its ordinal. */
uint32_t firn__table_add_file(firn__table *t, const firn_data_file *f);
/** Empties t's key index and index file table (with their deleted rows and DVs). */
void firn__table_reset_index(firn__table *t);

/* ---- equality-delete mode (eng_eqdel.c) --------------------------------------------------- */

/** For an equality-delete table (t->eqdel) after its Iceberg table is open: a table without a
 * usable key takes every source column as its key (FIRN_ERR_CONFIG when one cannot be an
 * equality column: float, double, nested); FIRN_ERR_CONFIG when a partition field is not
 * computed from key columns (the partition of a deleted row would be unknown). Logs the warning
 * naming the readers that cannot read equality deletes. */
FIRN_MUST_CHECK firn_rc firn__eqdel_open(firn__table *t, firn_err *err);

/* ---- keyless REPLICA IDENTITY FULL tables as multisets (eng_multiset.c) ------------------ */

/** Makes t (t->multiset set: no usable key, REPLICA IDENTITY FULL, not append mode) keyed by
 * every source column, the index telling the copies of a row apart by an occurrence number.
 * When that cannot be (an existing table created in append mode, whose rows include deletes; a
 * nested column; more than 32 columns) t is put in append mode instead, with a warning saying
 * why and what to do. exists: the Iceberg table exists (t->cat loaded). */
void firn__multiset_open(firn__table *t, bool exists);
/** Adds one copy of the row encoded as row[0..len) (firn_batch_key_encode over t->key_cols) at
 * loc to t's index: it takes the next occurrence number. Index errors (FIRN_ERR_IO, PARSE). */
FIRN_MUST_CHECK firn_rc
firn__multiset_add(firn__table *t, const uint8_t *row, size_t len, firn__pkloc loc, firn_err *err);
/** Folds t's buffer as a multiset: each distinct row (every source column) gains one copy per
 * insert or update image and loses one per delete (old image). out->keys holds the rows whose
 * count changes, out->net their gain (> 0) or loss (< 0); out->upsert_rows the rows to write
 * (a row gaining n copies: its last n images), out->upsert_key the key of each. n_deletes is 0.
 * FIRN_ERR_TOO_LARGE past the key buffer limit. Free with firn__fold_free. */
FIRN_MUST_CHECK firn_rc firn__multiset_fold(const firn__table *t, firn__fold *out, firn_err *err);

/** Deletes a multiset flush writes: per fold key, the copies indexed before (count) and the
 * occurrence number below which copies stay (keep: entries keep .. count - 1 are removed); the
 * position deletes (dels[0..n_dels), owned) of the live copies removed; copies a delete asked
 * for that the index did not hold (missing, logged). */
typedef struct firn__msdel {
    uint32_t *count;
    uint32_t *keep;
    firn__posdel *dels;
    size_t n_dels;
    uint64_t missing;
} firn__msdel;

/** Finds, for every fold key that loses copies, that many live copies in t's index (from the
 * highest occurrence number down; entries of rows already deleted are dropped on the way) and
 * fills *out (free with firn__msdel_free). Index errors. */
FIRN_MUST_CHECK firn_rc firn__multiset_deletes(firn__table *t,
                                               const firn__fold *f,
                                               firn__msdel *out,
                                               firn_err *err);
/** After the commit: removes the index entries d says were popped and adds each written row
 * (locs[i]: row f->upsert_rows[i] in the committed files) as the next copy of its key. A failure
 * leaves the index behind the table (the caller stops; the next start rebuilds it). */
FIRN_MUST_CHECK firn_rc firn__multiset_update(firn__table *t,
                                              const firn__fold *f,
                                              const firn__msdel *d,
                                              const firn__pkloc *locs,
                                              firn_err *err);
/** Frees what d owns and zeroes it. */
void firn__msdel_free(firn__msdel *d);
/** Flushes t's buffer in equality-delete mode: folds it by key, writes the final images as data
 * files and one equality-delete row (key columns, table field ids, equality_ids set) per key
 * touched, and commits both in one snapshot with position lsn (format/spec.md "Equality Delete
 * Files": the deletes reach only data files of lower sequence numbers, so the rows of this
 * commit stay). Errors from Parquet, FileIO and the commit. */
FIRN_MUST_CHECK firn_rc firn__eqdel_flush(firn__table *t,
                                          const firn__write_ctx *w,
                                          uint64_t lsn,
                                          const firn_summary *extra,
                                          firn_err *err);

/* ---- converting equality deletes (eng_eqconv.c) ---------------------------------------------- */

/** The rows a table's live equality deletes delete: per data file (borrowed entries of the
 * manifests given to firn__eqconv_resolve), and the equality-delete files themselves. */
typedef struct firn__eqconv {
    size_t n_files;
    const firn_data_file **files;
    firn_bitmap64 **rows; /* owned */
    size_t n_eq_files;
    const firn_data_file **eq_files;
    int64_t eq_records;
} firn__eqconv;

/** What a data file already has deleted (DV and position deletes) and its live DV. */
typedef struct firn__eqconv_dead {
    const firn_bitmap64 *rows; /* NULL: nothing */
    const char *dv_path;       /* NULL: no DV */
    int64_t dv_offset;
} firn__eqconv_dead;
typedef void (*firn__eqconv_dead_fn)(void *ctx, const char *data_path, firn__eqconv_dead *out);

/** Resolves every live equality-delete file of ms[0..n) (live manifests of the current
 * snapshot) against the live data files it applies to (lower data sequence number; its
 * partition, or all for an unpartitioned delete file: format/spec.md "Scan Planning"), reading
 * only the equality columns. Free out with firn__eqconv_free. Errors from FileIO and Parquet;
 * FIRN_ERR_UNSUPPORTED for equality ids that are not top-level columns. */
FIRN_MUST_CHECK firn_rc firn__eqconv_resolve(
    firn__table *t, firn_manifest **ms, size_t n, firn__eqconv *out, firn_err *err);
/** Commits c: position deletes (v2, one file per partition) or DVs merged with each data file's
 * current one (v3, one Puffin file), and removes the equality-delete files, in one snapshot.
 * dead_of tells what each data file already has deleted. */
FIRN_MUST_CHECK firn_rc firn__eqconv_commit(
    firn__table *t, const firn__eqconv *c, firn__eqconv_dead_fn dead_of, void *dctx, firn_err *err);
/** Frees what c owns. */
void firn__eqconv_free(firn__eqconv *c);
/** Commits a "replace" snapshot (compaction, eng_compact.c): adds the data files data[0..n_data)
 * with data sequence number data_seq (the sequence number of the snapshot the rewrite read) and
 * removes the live files removed[0..n_removed), keeping firn.lsn. Not retried on another parent:
 * FIRN_ERR_CONFLICT when another writer committed first (t reloaded; plan again),
 * FIRN_ERR_NOT_FOUND when a removed file is not live. As firn__table_commit otherwise. */
FIRN_MUST_CHECK firn_rc firn__table_commit_replace(firn__table *t,
                                                   const firn_data_file *data,
                                                   size_t n_data,
                                                   const char *const *removed,
                                                   size_t n_removed,
                                                   int64_t data_seq,
                                                   firn_err *err);

/* ---- small-file compaction (eng_compact.c) ----------------------------------------------- */

/** After a commit of a format-2 upsert table (key index at the current snapshot): when a
 * partition has destination.compact_small_files data files smaller than 3/4 of
 * target_file_size, or a data file with compact_delete_percent % of its rows deleted, rewrites
 * those files (rows minus deletes) into target-size files in one "replace" snapshot that also
 * removes the position-delete files deleting only from them, and points the moved keys at their
 * new rows. Tables with list, map or struct columns or live equality deletes are skipped (the
 * Parquet reader reads flat columns only; firn does not apply equality deletes). Another
 * writer's commit in between: the index catches up and the plan is made once more. Errors
 * before the commit are logged and skipped; errors after it (index update) are returned. */
FIRN_MUST_CHECK firn_rc firn__compact_maybe(firn__table *t, firn_err *err);

/** Commits added delete files (position deletes or DVs replacing replaces[]) and removes the
 * live files removed[0..n_removed), keeping firn.lsn; retries on conflicts on the new parent
 * (FIRN_ERR_NOT_FOUND when a removed file is gone). As firn__table_commit otherwise. */
FIRN_MUST_CHECK firn_rc firn__table_commit_rewrite(firn__table *t,
                                                   const firn_data_file *deletes,
                                                   size_t n_deletes,
                                                   const firn_dv_replace *replaces,
                                                   size_t n_replaces,
                                                   const char *const *removed,
                                                   size_t n_removed,
                                                   firn_err *err);

/* ---- deletion vectors (format v3 tables, eng_dv.c) ------------------------------------------ */

/** Frees the DV states of t's file ordinals [0, n) and the array. */
void firn__dv_files_free(firn__dvfile *dvs, size_t n);
/** The DVs of one flush: for the k-th written DV, its data file's ordinal and merged deleted
 * rows; and the earlier DVs they replace (strings borrowed from the table). */
typedef struct firn__dv_batch {
    size_t n;
    uint32_t *ords;
    firn_bitmap64 **dead; /* owned until firn__dv_commit_done takes them */
    firn_dv_replace *replaces;
    size_t n_replaces;
} firn__dv_batch;

/** Frees what b owns (NULL accepted). */
void firn__dv_batch_free(firn__dv_batch *b);
/** True when each DV goes in a Puffin file of its own: when duckdb is among the readers (declared
 * or the default set). DuckDB 1.5.5 with its external file cache on (the default) applies the
 * first DV it read from a Puffin file to every data file whose DV is in that file
 * (bench/README.md, "DuckDB and Puffin files with several vectors"). */
bool firn__dv_puffin_per_vector(const firn__table *t);
/** Writes one Puffin file "<data_location>/<uuid>-dvs.puffin" (one per DV when
 * firn__dv_puffin_per_vector) holding a DV per data file touched
 * by dels (group = file ordinal): each merges the file's earlier deleted rows with the new
 * positions. Appends the DV entries (partition and spec of their data file, in the order of
 * out->ords) to *files / *n_files. Nothing for n_dels == 0. Errors from FileIO. */
FIRN_MUST_CHECK firn_rc firn__dv_write(firn__table *t,
                                       const firn__write_ctx *w,
                                       const firn__posdel *dels,
                                       size_t n_dels,
                                       firn_data_file **files,
                                       size_t *n_files,
                                       firn__dv_batch *out,
                                       firn_err *err);
/** After a successful commit: the DVs dvs[0..b->n) written by firn__dv_write become the
 * current DVs of their data files, with b's merged rows (taken from b). */
void firn__dv_commit_done(firn__table *t, const firn_data_file *dvs, firn__dv_batch *b);
/** Reads the DV an entry describes (range read of its blob) and checks its cardinality against
 * record_count. FIRN_ERR_PARSE for a malformed or mismatched DV. */
FIRN_MUST_CHECK firn_rc firn__dv_load(firn__table *t,
                                      const firn_data_file *dv,
                                      firn_bitmap64 **out,
                                      firn_err *err);
/** Commits data files and DVs with the DVs they replace (format v3); as firn__table_commit. */
FIRN_MUST_CHECK firn_rc firn__table_commit_dvs(firn__table *t,
                                               const firn_data_file *data,
                                               size_t n_data,
                                               const firn_data_file *dvs,
                                               size_t n_dvs,
                                               const firn_dv_replace *replaces,
                                               size_t n_replaces,
                                               uint64_t lsn,
                                               const firn_summary *extra,
                                               firn_err *err);

/* ---- position deletes of format v2 tables (eng_consolidate.c) ---------------------------------
 */

/** Forgets every tracked delete file of t. */
void firn__delfiles_reset(firn__table *t);
/** Tracks delete file path (copied) as deleting from data file ordinals ords[0..n) (copied). */
void firn__delfiles_add(firn__table *t, const char *path, const uint32_t *ords, size_t n);
/** Forgets delete file path (another writer removed it); nothing when untracked. */
void firn__delfiles_forget(firn__table *t, const char *path);
/** Whether a commit adding deletes dels[0..n_dels) (group: the delete file each goes to) to t
 * consolidates: t is format 2, the policy is on (destination.consolidate_deletes_after N > 0)
 * and the commit would leave at least N delete files that are not the single file-scoped delete
 * file of their data file. */
bool firn__consolidate_due(const firn__table *t, const firn__posdel *dels, size_t n_dels);
/** Plans and writes a consolidation (group of each del = its data file ordinal): the data files
 * dels touch and those of the tracked delete files that are not consolidated get one file-scoped
 * position-delete file each with every deleted position (old and new), or are dropped when every
 * row is deleted; the delete files they had are retired. Appends the new delete files to
 * *files / *n_files. Errors from Parquet and FileIO. */
FIRN_MUST_CHECK firn_rc firn__consolidate_write(firn__table *t,
                                                const firn__write_ctx *w,
                                                const firn__posdel *dels,
                                                size_t n_dels,
                                                firn_data_file **files,
                                                size_t *n_files,
                                                firn__consolidation *out,
                                                firn_err *err);
/** Frees what c owns (NULL accepted) and zeroes it. */
void firn__consolidation_free(firn__consolidation *c);
/** After a v2 commit landed: the rows of dels[0..n_dels) (the deletes written, sorted by group:
 * group k went to delete file added[k]) join their files' dead rows, each added file is tracked
 * with the data files of its group, and a consolidation's retired delete files and dropped data
 * files go. */
void firn__delfiles_commit_done(firn__table *t,
                                const firn__posdel *dels,
                                size_t n_dels,
                                const firn_data_file *added,
                                size_t n_added,
                                const firn__consolidation *c);

/** Copies the selected streams in backfill (those with needs_backfill) inside the exported
 * snapshot (positions stamped with snapshot_lsn), commits each table once at its end with
 * firn.lsn = lsn_after (0: none) and the backfill marker. */
FIRN_MUST_CHECK firn_rc firn__backfill_run(firn__engine *e,
                                           const char *snapshot,
                                           uint64_t snapshot_lsn,
                                           uint64_t lsn_after,
                                           firn_err *err);

/** Streams changes of the CDC tables from the replication slot: until the WAL position of the
 * start (catch-up run) or until a stop is requested (follow). Under --follow it also ends
 * with FIRN_ERR_NETWORK when the engine's SQL connection is found lost (the stats tick), so
 * that the caller reconnects. On an error the tables may hold uncommitted changes, partial
 * transactions too: firn__cdc_discard before streaming again. */
FIRN_MUST_CHECK firn_rc firn__cdc_run(firn__engine *e, firn_pgo_stream *s, firn_err *err);

/** After firn__cdc_run failed on a lost connection: drops what the CDC tables buffered and did
 * not commit (whole and partial transactions), so that a new stream from the slot's confirmed
 * position replays exactly what the tables lack (changes at or below a table's committed
 * position are skipped, as after a restart). */
void firn__cdc_discard(firn__engine *e);
/** Before streaming from an existing slot: stops (t->halted at its committed position, e->halt
 * set, one error line) each partitioned CDC table not copied in this run that has a leaf it did
 * not have at the last start (FIRN_PROP_LEAVES; a table without the property: a leaf attached
 * since the slot's catalog_xmin) that held rows when it was attached (firn_pg_leaf_preattached):
 * PostgreSQL sent no change for them, so only a copy brings them (the line's remedy). The other
 * partitioned tables record their leaves in FIRN_PROP_LEAVES. Errors of the source
 * (FIRN_ERR_SOURCE) and of the catalog commit. */
FIRN_MUST_CHECK firn_rc firn__cdc_check_leaves(firn__engine *e, firn_err *err);

/** `firn check`, `discover` and `status` (eng_entry.c); the public entry points wrap them. */
FIRN_MUST_CHECK firn_rc firn__engine_check(const firn_config *cfg, firn_err *err);
FIRN_MUST_CHECK firn_rc firn__engine_discover(const firn_config *cfg,
                                              const char *path,
                                              firn_err *err);
FIRN_MUST_CHECK firn_rc firn__engine_status(const firn_config *cfg, FILE *out, firn_err *err);
/** Where the last of those three failed. */
firn_fault firn__entry_fault(void);

/** Logs, at `level`, the tables of a preflight report at risk of unchanged TOAST values (names
 * the first 8 and the remedy); nothing when there are none. Borrows rep. */
void firn__engine_log_toast_risk(const firn_pgo_report *rep, firn_log_level level);

/** TEST-ONLY (eng_fault.c): kills the process with SIGKILL when FIRN_TEST_CRASH names this
 * point and its count is reached ("after-upload:3": the third time). Thread-safe. */
void firn__fault_point(const char *name);
/** TEST-ONLY: with FIRN_TEST_PAUSE="<name>:<path>", creates "<path>.ready" and waits up to 60 s
 * until <path> exists (another writer commits meanwhile). Points: "compact-written" (a
 * compaction's files are written, its commit not made). */
void firn__fault_pause(const char *name);
/** TEST-ONLY: with FIRN_TEST_DECODE_FAIL="<schema.table>:<n>", true from the n-th streamed change
 * of that source table on (its decode then fails, as a value firn cannot read would), so the
 * quarantine of one table can be tested; a real PostgreSQL sends no such value on demand. */
bool firn__fault_decode(const char *schema, const char *table);

/** Opens the destination catalog (SQL or REST, with its authentication) and the FileIO for
 * table files: for REST the catalog's own FileIO (vended credentials; *out_io_owned false),
 * for SQL one chosen by the warehouse scheme (file://, s3://, gs://; owned). On error nothing is
 * left open. Errors of the catalog and FileIO constructors, with context. */
FIRN_MUST_CHECK firn_rc firn__engine_open_destination(const firn_destination_config *d,
                                                      firn_catalog **out_catalog,
                                                      firn_io **out_io,
                                                      bool *out_io_owned,
                                                      firn_err *err);

/** A table's catalog outages as firn__table_outage reads them. */
typedef struct firn__outage_stats {
    uint64_t outages;                  /* commits the catalog refused at least once */
    double seconds;                    /* time spent in them, the ongoing one included */
    int64_t since_us;                  /* wall-clock start of the ongoing one, 0: none */
    char last_error[FIRN_ERR_MSG_MAX]; /* the catalog's last refusal, "" = none */
} firn__outage_stats;

/** Copies t's catalog-outage counters into *out (thread-safe against the committing thread). */
void firn__table_outage(const firn__table *t, firn__outage_stats *out);

/** firn__stats_write with the phase of the last write, when the last write is 5 s old: for a
 * wait inside a phase (a commit retried while the catalog refuses commits). */
void firn__stats_refresh(firn__engine *e);
/** Replaces the stats file (stats.json next to the state file; nothing without a state file)
 * when force or when the last write is 5 s old; phase names what the run does ("backfill",
 * "cdc", "reconnecting", "finished", "stopped", "failed"). Never fails (a write error is logged).
 * Thread-safe against itself; reads table counters under each table's lock. */
void firn__stats_write(firn__engine *e, const char *phase, bool force);
/** Adds the chunk's values stored by the fallback rules (chunk->replaced, counted and logged by
 * the backfill) to t's copy counters, under t->mu. Thread-safe. */
void firn__stats_add_copied(firn__table *t, const firn_pg_chunk *chunk);
/** After a streamed value of column (borrowed, NUL-terminated) was decoded into t: when
 * t->stats counts a fallback of a kind the table has not replaced yet in this run (before: the
 * counters before the decode), one WARN line names the table, column and rule; later ones are
 * only counted (stats.json "values_replaced") and totalled by firn__stats_log_replaced. Called
 * from the CDC thread only. */
void firn__stats_note_replaced(firn__table *t,
                               const firn_pg_decode_stats *before,
                               const char *column);
/** At the end of a run: one WARN line per table whose streamed changes had values stored by the
 * fallback rules, with the totals per kind (the backfill logs its own per chunk). */
void firn__stats_log_replaced(firn__engine *e);
/** True when the stats file next to state_path (NULL: none) shows stream "namespace.name"
 * stopped at a schema change its table cannot take, or because its source table is missing
 * (*out_missing); lsn (cap bytes) gets the position, "" when the file knows none. */
bool firn__stats_stopped(
    const char *state_path, const char *stream, char *lsn, size_t cap, bool *out_missing);
/** Saves the engine's state copy to the state file (no-op without a state path). */
FIRN_MUST_CHECK firn_rc firn__engine_save_state(firn__engine *e, firn_err *err);
/** Records table progress in the state copy. */
void firn__engine_note_commit(firn__engine *e, firn__table *t);

/* Creates destination.index_dir when set (with its parents) and checks it is writable, so a
 * bad folder is a configuration error before anything is copied. FIRN_ERR_CONFIG naming the key
 * and the folder; FIRN_OK when index_dir is not set. */
firn_rc firn__engine_check_index_dir(const firn_destination_config *d, firn_err *err);

/* ---- string sets (eng_strset.c) ------------------------------------------------------------ */

/** A set of owned strings: embed zeroed, then add and look up in any order (O(1) each);
 * v[0..n) holds each string once, in the order first added. Free with firn__strset_free. */
typedef struct firn__strset {
    char **v;
    size_t n, cap;
    firn__keymap *map; /* membership */
} firn__strset;

/** Adds a copy of p unless it is there already. */
void firn__strset_add(firn__strset *s, const char *p);
/** True when p is in s. */
bool firn__strset_has(const firn__strset *s, const char *p);
/** Frees every string; s is empty afterwards. */
void firn__strset_free(firn__strset *s);

/* ---- snapshot expiry (eng_expire.c, docs/maintenance.md) ---------------------------------- */

/** What one expiry did. */
typedef struct firn__expire_result {
    size_t expired;           /* snapshots removed */
    size_t refs_removed;      /* refs past their max-ref-age removed */
    size_t retained;          /* snapshots left */
    size_t lists_deleted;     /* manifest lists deleted */
    size_t manifests_deleted; /* manifests deleted */
    size_t files_deleted;     /* data, delete and Puffin files deleted */
    size_t delete_failures;   /* files that could not be deleted (left as orphans) */
    size_t metadata_bytes;    /* metadata JSON size after the expiry */
} firn__expire_result;

/** Adds to manifests the manifest lists of snaps[0..n_snaps) and the manifests they list, and to
 * files the data, delete and Puffin files of those manifests' live entries (deleted entries too
 * with deleted_too); each manifest is read once. Read errors (a missing list or manifest
 * included) are returned: a caller deciding what to delete must not go on without them. */
FIRN_MUST_CHECK firn_rc firn__snapshot_files(firn_io *io,
                                             const firn_snapshot *const *snaps,
                                             size_t n_snaps,
                                             bool deleted_too,
                                             firn__strset *manifests,
                                             firn__strset *files,
                                             firn_err *err);
/** The metadata budget of a table of destination d in bytes: maintenance.max_metadata_size,
 * else 900 KiB for a BigLake catalog (REST URI at biglake.googleapis.com or a bl:// warehouse),
 * else 4 MiB. */
uint64_t firn__metadata_budget(const firn_destination_config *d);
/** Expires t's snapshots now: the plan of firn_expire_plan_make with t's retention (table
 * properties, else the destination's maintenance block), main kept down to firn's newest
 * snapshot, tightened while the metadata JSON is over 70 % of the budget (one WARN per run);
 * committed through the catalog with firn__table_meta_commit (conflicts plan again), then the
 * files only expired snapshots referenced are deleted (failures are logged and left as
 * orphans). Without force, nothing happens unless 16 snapshots or more expire or the budget
 * asks. One INFO line per expiry commit. Fills *res. Catalog errors of the commit; t->cat is
 * the table's metadata afterwards. */
FIRN_MUST_CHECK firn_rc firn__expire_run(firn__table *t,
                                         bool force,
                                         firn__expire_result *res,
                                         firn_err *err);
/** Called after each commit of t: every 16th commit runs firn__expire_run (when
 * maintenance.expire_snapshots is on and t is not copying or stopped). An expiry that fails
 * is logged (WARN) and left for the next time: always FIRN_OK (err untouched). */
FIRN_MUST_CHECK firn_rc firn__expire_maybe(firn__table *t, firn_err *err);

/** firn_engine_maintain's work (eng_maintain.c); the fault of its failure is
 * firn__maintain_fault(). */
FIRN_MUST_CHECK firn_rc firn__engine_maintain(const firn_config *cfg,
                                              const firn_maintain_options *o,
                                              FILE *out,
                                              firn_err *err);
/** Where the calling thread's last firn__engine_maintain failed. */
firn_fault firn__maintain_fault(void);

#endif
