/* SPDX-License-Identifier: Apache-2.0 */
/* Private pieces of the primary-key index shared by eng_pkindex*.c: entries, immutable
 * hash-sorted run files with their fence pointers, and the bounded page cache
 * (docs/internals/pkindex.md). */
#ifndef FIRN_ENG_PKINDEX_INT_H
#define FIRN_ENG_PKINDEX_INT_H

#include "engine_int.h"

/* Page size of run files; every page but the header holds entries. */
#define PK_PAGE 4096
/* Bytes after a page buffer so the bit reader may run past its end (damaged page) before the
 * overrun check: one entry is at most 208 bits, and reads load 8 bytes. */
#define PK_PAGE_PAD 64
/* Entries per page are capped so a decoded page fits a fixed array. */
#define PK_PAGE_MAX_ENTRIES 1024
/* Bytes of a data page before its bit stream: crc32, entry count, anchor count, reserved, first
 * hash. */
#define PK_PAGE_HEAD 16
/* Every PK_ANCHOR_EVERY-th entry of a page is an anchor: its hash and bit offset, stored at the
 * page end (PK_ANCHOR_BYTES each), so a lookup decodes at most that many entries. */
#define PK_ANCHOR_EVERY 64
#define PK_ANCHOR_BYTES 13
/* file1 of a tombstone (a key removed: shadows older runs). Live entries hold file + 1. */
#define PK_TOMB 0u
/* Largest file ordinal the index takes. */
#define PK_FILE_MAX 0xFFFFFFF0u

/** One index entry: key fingerprint (h, c), and where the key lives (file1 = file ordinal + 1,
 * PK_TOMB for a removed key). Entries sort by (h, c). */
typedef struct pk_entry {
    uint64_t h;
    uint32_t c;
    uint32_t file1;
    uint32_t pos;
} pk_entry;

static inline int pk_entry_cmp(const pk_entry *a, uint64_t h, uint32_t c)
{
    if (a->h != h)
        return a->h < h ? -1 : 1;
    return a->c == c ? 0 : (a->c < c ? -1 : 1);
}

/* ---- page cache --------------------------------------------------------------------------- */

typedef struct firn__pkcache firn__pkcache;

/** A cache of up to bytes / PK_PAGE pages of run files (at least 4), read with pread; frames
 * are allocated on first use. */
firn__pkcache *firn__pkcache_new(size_t bytes);
void firn__pkcache_free(firn__pkcache *pc);
/** Page `page` (0-based data page) of run `run_id` read from fd, checked against its crc. The
 * pointer (PK_PAGE + PK_PAGE_PAD bytes) stays valid until the next call. FIRN_ERR_IO,
 * FIRN_ERR_PARSE for a damaged page. */
FIRN_MUST_CHECK firn_rc firn__pkcache_get(
    firn__pkcache *pc, int fd, uint32_t run_id, uint32_t page, const uint8_t **out, firn_err *err);
/** Forgets the pages of run_id (its file is gone). */
void firn__pkcache_drop_run(firn__pkcache *pc, uint32_t run_id);
/** Bytes of frames allocated so far. */
size_t firn__pkcache_bytes(const firn__pkcache *pc);
/** Reads, hits. */
void firn__pkcache_stats(const firn__pkcache *pc, uint64_t *out_reads, uint64_t *out_hits);

/* ---- runs --------------------------------------------------------------------------------- */

/** An open, validated run file. fences[p] is the hash of the first entry of data page p. */
typedef struct firn__pkrun {
    uint32_t id;
    uint32_t level; /* 0: flushed memtable; merges of level L give L + 1 */
    char *path;
    int fd;
    uint64_t n_entries;
    uint64_t n_tombs;
    uint64_t min_h, max_h;
    uint64_t file_bytes;
    uint32_t n_pages;
    uint8_t k;     /* Rice parameter of hash deltas */
    uint8_t fb;    /* bits of file1 */
    uint8_t pb;    /* bits of pos */
    uint8_t has_c; /* entries carry the 32-bit check hash */
    /* crc32 of the whole file, when known without reading it: computed by the writer as it
     * wrote the bytes, or checked when the file was downloaded (firn__pkindex_upload uses it). */
    bool has_file_crc;
    uint32_t file_crc;
    uint64_t *fences;
} firn__pkrun;

typedef struct firn__pkrun_writer firn__pkrun_writer;

/** Parameters of a run to write: an upper bound on entries (sets the Rice parameter), the
 * largest file1 and pos among them, whether any entry has c != 0. */
typedef struct firn__pkrun_shape {
    uint64_t n_upper;
    uint32_t max_file1;
    uint32_t max_pos;
    bool has_c;
    uint32_t level;
} firn__pkrun_shape;

/** Starts "<dir>/run-<id>.pkr" as "<...>.tmp". Errors: FIRN_ERR_IO. */
FIRN_MUST_CHECK firn_rc firn__pkrun_writer_open(const char *dir,
                                                uint32_t id,
                                                const firn__pkrun_shape *shape,
                                                firn__pkrun_writer **out,
                                                firn_err *err);
/** Appends e; entries come in (h, c) order, each (h, c) once (asserted). */
FIRN_MUST_CHECK firn_rc firn__pkrun_writer_add(firn__pkrun_writer *w,
                                               const pk_entry *e,
                                               firn_err *err);
/** firn__pkrun_writer_add of e[0..n) in turn (the same bytes), the common case of each in a
 * tight loop. Borrows e. */
FIRN_MUST_CHECK firn_rc firn__pkrun_writer_add_n(firn__pkrun_writer *w,
                                                 const pk_entry *e,
                                                 size_t n,
                                                 firn_err *err);
/** Writes the header and fences, renames the file into place (not synced), and opens it with
 * its whole-file crc32 (has_file_crc). The writer is freed whatever the outcome; on error the
 * temporary file is removed. */
FIRN_MUST_CHECK firn_rc firn__pkrun_writer_finish(firn__pkrun_writer *w,
                                                  firn__pkrun **out,
                                                  firn_err *err);
/** Drops an unfinished run (temporary file removed). NULL accepted. */
void firn__pkrun_writer_abort(firn__pkrun_writer *w);

/** Opens and validates a run file (magic, header and fence checksums, size). FIRN_ERR_IO,
 * FIRN_ERR_PARSE for a damaged or partial file. */
FIRN_MUST_CHECK firn_rc firn__pkrun_open(const char *path, firn__pkrun **out, firn_err *err);
/** Makes r's file durable (fsync). FIRN_ERR_IO. */
FIRN_MUST_CHECK firn_rc firn__pkrun_sync(const firn__pkrun *r, firn_err *err);
/** fsyncs a folder (best effort), after renames in it. */
void firn__pkrun_fsync_dir(const char *dir);
/** Closes r, deleting its file when unlink_file. NULL accepted. */
void firn__pkrun_close(firn__pkrun *r, bool unlink_file);
/** Decodes data page `page` (bytes from the cache or a read) into out[PK_PAGE_MAX_ENTRIES].
 * FIRN_ERR_PARSE when the page does not decode. */
FIRN_MUST_CHECK firn_rc firn__pkrun_decode(
    const firn__pkrun *r, const uint8_t *bytes, pk_entry *out, size_t *out_n, firn_err *err);
/** Checks the crc of a page read from run r. */
FIRN_MUST_CHECK firn_rc firn__pkrun_check_page(const uint8_t *bytes,
                                               const char *path,
                                               uint32_t page,
                                               firn_err *err);
/** Index of the page where entries with hash h may start: the last page whose first hash is
 * below h (0 when none). */
uint32_t firn__pkrun_find_page(const firn__pkrun *r, uint64_t h, uint32_t from);

/** A position in one page of a run, decoding entries on demand (lookups). e is the current
 * entry while ok. */
typedef struct firn__pkpage_cur {
    const uint8_t *bytes;
    size_t bitpos;
    size_t end; /* bits of the entry stream */
    uint32_t n, i;
    uint32_t n_anchors, next_anchor;
    pk_entry e;
    bool ok;
    bool lazy;        /* e.c, e.file1, e.pos not decoded yet (firn__pkpage_fields) */
    size_t fields_at; /* bit position of the current entry's fields */
} firn__pkpage_cur;

/** Positions c in a page (bytes from the cache) at the first entry or, with h > 0, at the last
 * anchor whose hash is below h (entries >= h come after it). FIRN_ERR_PARSE. */
FIRN_MUST_CHECK firn_rc firn__pkpage_begin(
    const firn__pkrun *r, const uint8_t *bytes, uint64_t h, firn__pkpage_cur *c, firn_err *err);
/** Moves c forward to the last anchor whose hash is below h, when one is past c. */
FIRN_MUST_CHECK firn_rc firn__pkpage_seek(const firn__pkrun *r,
                                          firn__pkpage_cur *c,
                                          uint64_t h,
                                          firn_err *err);
/** Moves c to the next entry of its page; c->ok false past the last. FIRN_ERR_PARSE. */
FIRN_MUST_CHECK firn_rc firn__pkpage_step(const firn__pkrun *r, firn__pkpage_cur *c, firn_err *err);
/** firn__pkpage_step decoding the hash only (c->lazy): the fields are skipped until
 * firn__pkpage_fields, so a lookup walking past entries pays for their hashes alone. */
FIRN_MUST_CHECK firn_rc firn__pkpage_step_hash(const firn__pkrun *r,
                                               firn__pkpage_cur *c,
                                               firn_err *err);
/** Decodes the fields of c's current entry when c->lazy. FIRN_ERR_PARSE. */
FIRN_MUST_CHECK firn_rc firn__pkpage_fields(const firn__pkrun *r,
                                            firn__pkpage_cur *c,
                                            firn_err *err);

/** SipHash-2-4 with a 128-bit result (Aumasson and Bernstein) of p[0..len) under key[16]. */
void firn__pk_siphash128(const uint8_t key[16], const uint8_t *p, size_t len, uint64_t out[2]);

/** Reads a run front to back (merges), a few pages per read, decoded one page at a time. */
typedef struct firn__pkrun_iter {
    const firn__pkrun *run;
    uint8_t *buf;       /* PK_ITER_PAGES pages (+ pad) */
    uint32_t next_page; /* next page to decode */
    uint32_t buf_first; /* first page held in buf */
    uint32_t buf_n;     /* pages held in buf */
    pk_entry *ents;     /* decoded current page */
    size_t n, i;
    bool done;
} firn__pkrun_iter;

void firn__pkrun_iter_init(firn__pkrun_iter *it, const firn__pkrun *r);
void firn__pkrun_iter_deinit(firn__pkrun_iter *it);
/** Moves to the next entry; sets it->done past the last. The current entry is
 * it->ents[it->i] while !done. */
FIRN_MUST_CHECK firn_rc firn__pkrun_iter_next(firn__pkrun_iter *it, firn_err *err);

/** "<dir>/<name>", owned. */
char *firn__pk_path(const char *dir, const char *name);
/** zlib's crc32(crc, p, len) (CRC-32, polynomial 0xEDB88320; crc 0 to start), with PCLMULQDQ
 * where the processor has it: the same values, about ten times faster. Any len; thread-safe. */
uint32_t firn__pk_crc32(uint32_t crc, const void *p, size_t len);
/** The crc32 of A followed by B from crc1 = crc32 of A, crc2 = crc32 of B and len2 = B's length
 * in bytes (zlib's crc32_combine). Thread-safe. */
uint32_t firn__pk_crc32_combine(uint32_t crc1, uint32_t crc2, uint64_t len2);
/** Writes all len bytes of p to fd (path for messages). FIRN_ERR_IO. */
FIRN_MUST_CHECK firn_rc
firn__pk_write_all(int fd, const void *p, size_t len, const char *path, firn_err *err);

/** Reads exactly len bytes of fd at off into p (path for messages). FIRN_ERR_IO, FIRN_ERR_PARSE
 * when the file ends first. */
FIRN_MUST_CHECK firn_rc
firn__pk_read_at(int fd, void *p, size_t len, uint64_t off, const char *path, firn_err *err);

/** Test hook: when not 0, counts down once per page written (all writers of the process, not
 * thread-safe) and the write that brings it to 0 fails with FIRN_ERR_IO. */
extern uint64_t firn__pkrun_fail_after_pages;

/* ---- the index (eng_pkindex.c, its folder and checkpoints in eng_pkindex_disk.c) ---------- */

/* A memtable slot: 20 bytes. file1 is PK_MT_EMPTY, PK_TOMB or the file ordinal + 1. */
typedef struct pk_slot {
    uint32_t hlo, hhi, c, file1, pos;
} pk_slot;

#define PK_MT_EMPTY 0xFFFFFFFFu

struct firn__pkindex {
    char *dir;
    bool dir_owned; /* a private temporary folder: removed at free */
    bool dir_ready; /* exists, locked, and holds only this index's files */
    int lock_fd;
    bool checkpointed; /* the folder's manifest describes the current state */
    uint8_t seed[16];
    size_t mem_limit;
    /* memtable: slots [0, mt_len) with homes in [0, mt_cap); the tail catches probes past the
     * last home so slot order follows hash order (no wrap-around) */
    pk_slot *mt;
    size_t mt_cap, mt_len, mt_used;
    size_t mt_cap_max;
    unsigned mt_shift;  /* mt_cap == mt_cap_max >> mt_shift */
    firn__pkrun **runs; /* newest first */
    size_t n_runs;
    uint32_t next_run_id;
    firn__pkcache *cache;
    size_t cache_bytes;
    bool bulk;
    /* a copy's keys in arrival order, before they fill it (eng_pkindex.c "bulk buffer") */
    pk_slot *bb;
    size_t bb_n, bb_cap;
    uint32_t bb_max_file1, bb_max_pos; /* of the slots in bb: the shape of its run */
    bool bb_has_c;
    uint64_t reserve_keys;  /* firn__pkindex_reserve's estimate, applied at first use */
    struct pk_spill *spill; /* a bulk load past the memtable (eng_pkindex.c "bulk spill") */
    char **files;
    uint32_t n_files, files_cap;
    size_t live;
    uint64_t flushes, merges;
};

/** Creates (and for a given folder, locks and empties of stale run files) the run folder on
 * first use. FIRN_ERR_IO; FIRN_ERR_UNAVAILABLE when another process holds the folder. */
FIRN_MUST_CHECK firn_rc firn__pkindex_ensure_dir(firn__pkindex *idx, firn_err *err);
/** Closes the folder: removes run files and manifest unless checkpointed, releases the lock,
 * removes a private folder. */
void firn__pkindex_close_dir(firn__pkindex *idx);
/** The state changes: a manifest on disk no longer describes it. */
void firn__pkindex_touch(firn__pkindex *idx);
/** Writes the memtable to a run (eng_pkindex.c). */
FIRN_MUST_CHECK firn_rc firn__pkindex_flush(firn__pkindex *idx, firn_err *err);

/* ---- the copy next to the table (eng_pkindex_remote.c) ------------------------------------ */

/** One run of a persisted index: its file name next to the manifest, and what its header says
 * (the identity that lets a later upload reuse it), the size and crc32 of the whole file. */
typedef struct firn__pkxrun {
    char *name; /* "run-<uuid>.pkr" */
    uint32_t id, level;
    uint64_t bytes, entries, min_h, max_h;
    uint32_t crc;
} firn__pkxrun;

/** An index manifest: the index of table table_uuid at snapshot snapshot_id, with its runs
 * (newest first, files next to the manifest) and its file table (ordinal -> data file path). */
typedef struct firn__pkxman {
    char *table_uuid;
    int64_t snapshot_id;
    uint8_t seed[16];
    uint64_t keys;
    uint32_t next_run_id;
    firn__pkxrun *runs;
    size_t n_runs;
    char **files;
    uint32_t n_files;
} firn__pkxman;

/** Files and bytes copied by an upload or download. */
typedef struct firn__pkxfer {
    uint64_t runs, bytes;
} firn__pkxfer;

/** Appends the encoding of m to b: "FIRNPKX1", version, crc32 of the rest, then the fields
 * (little endian, strings length-prefixed). FIRN_ERR_TOO_LARGE past b's maximum. */
FIRN_MUST_CHECK firn_rc firn__pkxman_encode(const firn__pkxman *m, firn_buf *b);
/** Decodes a manifest into *m (owned: firn__pkxman_free). FIRN_ERR_PARSE for a damaged one. */
FIRN_MUST_CHECK firn_rc firn__pkxman_decode(const uint8_t *p,
                                            size_t len,
                                            firn__pkxman *m,
                                            firn_err *err);
/** Reads and decodes the manifest at location. FileIO errors (FIRN_ERR_NOT_FOUND), PARSE. */
FIRN_MUST_CHECK firn_rc firn__pkxman_read(firn_io *io,
                                          const char *location,
                                          firn__pkxman *m,
                                          firn_err *err);
/** Frees what m owns and zeroes it (NULL accepted). */
void firn__pkxman_free(firn__pkxman *m);
/** Deletes (best effort) the run files of old under folder that keep does not name. */
void firn__pkxman_remove_unused(firn_io *io,
                                const char *folder,
                                const firn__pkxman *old,
                                const firn__pkxman *keep);
/** Flushes idx's memtable and copies every run that prev (an earlier manifest of the same seed,
 * NULL: none) does not already name to folder/run-<uuid>.pkr: through the local FileIO (io's
 * scheme "file") a hard link of the run when the folder is on the index folder's file system,
 * else streaming PK_XFER_CHUNK bytes at a time; *out describes idx at snapshot_id, each run's
 * crc32 taken from its writer or download when known. On error, the copies this call made are
 * removed. Errors from FileIO and the run files. Not thread-safe with other calls on idx. */
/** Tests and benchmarks: true makes firn__pkindex_upload copy runs through the FileIO even where
 * it could link them. */
extern bool firn__pkindex_upload_no_link;
FIRN_MUST_CHECK firn_rc firn__pkindex_upload(firn__pkindex *idx,
                                             firn_io *io,
                                             const char *folder,
                                             const char *table_uuid,
                                             int64_t snapshot_id,
                                             const firn__pkxman *prev,
                                             firn__pkxman *out,
                                             firn__pkxfer *stats,
                                             firn_err *err);
/** Fills the empty index idx (its own folder, locked and emptied here) with m: copies m's runs
 * from folder, checking their sizes and crc32, opens them and takes m's seed, key count and
 * file table. On error idx is in an undefined state: free it. Errors from FileIO; FIRN_ERR_PARSE
 * for a run that does not match m. */
FIRN_MUST_CHECK firn_rc firn__pkindex_download(firn__pkindex *idx,
                                               firn_io *io,
                                               const char *folder,
                                               const firn__pkxman *m,
                                               firn__pkxfer *stats,
                                               firn_err *err);

#endif
