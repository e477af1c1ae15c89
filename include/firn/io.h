/* SPDX-License-Identifier: Apache-2.0 */
/* FileIO: where table files go. One interface (a vtable) over local paths and file:// URIs here,
 * object stores (s3://, gs://) later, and fault-injection wrappers in tests. Files are written
 * once and never overwritten in place (DESIGN.md step 4). */
#ifndef FIRN_IO_H
#define FIRN_IO_H

#include "firn/util.h"

typedef struct firn_io firn_io;
typedef struct firn_io_writer firn_io_writer;

/** Operations of one FileIO implementation. Every function reports failures through err with a
 * message naming the location; FIRN_ERR_NOT_FOUND for a missing object, FIRN_ERR_EXISTS when
 * creating an object that exists, FIRN_ERR_PERMISSION, FIRN_ERR_IO for the rest (transient codes
 * for network stores). Implementations must be thread-safe for distinct locations. */
typedef struct firn_io_vtable {
    const char *scheme; /* "file", "s3", "gs", or a wrapper's name */
    firn_rc (*create)(firn_io *io, const char *location, firn_io_writer **out, firn_err *err);
    firn_rc (*write)(firn_io_writer *w, const void *p, size_t len, firn_err *err);
    /* Makes the object visible at its location (atomically: all bytes or nothing) and frees w. */
    firn_rc (*close)(firn_io_writer *w, uint64_t *out_size_bytes, firn_err *err);
    /* Drops a writer without creating the object; frees w. */
    void (*abort)(firn_io_writer *w);
    firn_rc (*read)(firn_io *io, const char *location, firn_buf *out, firn_err *err);
    firn_rc (*read_range)(firn_io *io,
                          const char *location,
                          uint64_t offset,
                          size_t len,
                          firn_buf *out,
                          firn_err *err);
    firn_rc (*size)(firn_io *io, const char *location, uint64_t *out_size_bytes, firn_err *err);
    firn_rc (*remove)(firn_io *io, const char *location, firn_err *err);
    void (*destroy)(firn_io *io);
    /* Optional (NULL: FIRN_ERR_UNSUPPORTED): every object under a folder (firn_io_list). */
    firn_rc (*list)(firn_io *io,
                    const char *prefix,
                    firn_rc (*fn)(void *ctx,
                                  const char *location,
                                  uint64_t size_bytes,
                                  int64_t modified_ms,
                                  firn_err *err),
                    void *ctx,
                    firn_err *err);
} firn_io_vtable;

/** Base of every FileIO object; implementations embed it first. */
struct firn_io {
    const firn_io_vtable *vt;
};

/** Base of every writer; implementations embed it first. */
struct firn_io_writer {
    firn_io *io;
    uint64_t bytes_written;
};

/** Returns a FileIO for local paths and file:// URIs ("file:///w/t/data/x.parquet" and
 * "/w/t/data/x.parquet" name the same file). Writers write to a hidden temporary name in the
 * target folder (creating missing folders) and rename on close; close fails with
 * FIRN_ERR_EXISTS rather than replace an existing file. Free with firn_io_free. */
firn_io *firn_io_local_new(void);
/** Frees io (NULL accepted). */
void firn_io_free(firn_io *io);

/** Starts writing a new object at location; *out is owned until firn_io_close/firn_io_abort. */
FIRN_MUST_CHECK firn_rc firn_io_create(firn_io *io,
                                       const char *location,
                                       firn_io_writer **out,
                                       firn_err *err);
/** Appends len bytes. On error the caller must still firn_io_abort the writer. */
FIRN_MUST_CHECK firn_rc firn_io_write(firn_io_writer *w, const void *p, size_t len, firn_err *err);
/** Publishes the object and frees w, also on error (then nothing is published). Stores the
 * object's exact size in bytes in out_size_bytes (NULL accepted). */
FIRN_MUST_CHECK firn_rc firn_io_close(firn_io_writer *w, uint64_t *out_size_bytes, firn_err *err);
/** Discards w and whatever it wrote (NULL accepted). */
void firn_io_abort(firn_io_writer *w);
/** Writes a whole object in one call (create + write + close). */
FIRN_MUST_CHECK firn_rc
firn_io_write_all(firn_io *io, const char *location, const void *p, size_t len, firn_err *err);
/** Appends the whole object at location to out (bounded by out's maximum: FIRN_ERR_TOO_LARGE). */
FIRN_MUST_CHECK firn_rc firn_io_read(firn_io *io,
                                     const char *location,
                                     firn_buf *out,
                                     firn_err *err);
/** Appends len bytes starting at offset to out; FIRN_ERR_IO when the object is shorter. */
FIRN_MUST_CHECK firn_rc firn_io_read_range(
    firn_io *io, const char *location, uint64_t offset, size_t len, firn_buf *out, firn_err *err);
/** Size of the object in bytes. */
FIRN_MUST_CHECK firn_rc firn_io_size(firn_io *io,
                                     const char *location,
                                     uint64_t *out_size_bytes,
                                     firn_err *err);
/** Deletes the object; FIRN_ERR_NOT_FOUND if it does not exist. */
FIRN_MUST_CHECK firn_rc firn_io_remove(firn_io *io, const char *location, firn_err *err);

/** Called by firn_io_list for each object: its location (borrowed for the call, spelled with
 * the prefix's scheme and authority), size in bytes and last modification in milliseconds since
 * the epoch (0: unknown). A non-OK return stops the listing and is returned by it. */
typedef firn_rc (*firn_io_list_fn)(
    void *ctx, const char *location, uint64_t size_bytes, int64_t modified_ms, firn_err *err);
/** Lists every object whose location starts with prefix + "/" (prefix: a folder location
 * without a trailing '/'), at any depth, in no particular order; local folders that do not
 * exist list nothing. Local: a directory walk (symbolic links are not followed); S3:
 * ListObjectsV2 pages; GCS: the JSON API's objects.list pages. FIRN_ERR_UNSUPPORTED for a
 * FileIO without listing, else the errors of the walk or the requests. */
FIRN_MUST_CHECK firn_rc
firn_io_list(firn_io *io, const char *prefix, firn_io_list_fn fn, void *ctx, firn_err *err);

/** Converts a local location ("/abs", "file:///abs", "file://localhost/abs", "file:/abs") to
 * the filesystem path into out (out_cap bytes, NUL-terminated): the path part byte for byte, a
 * '%' included (no percent-decoding, as pyiceberg, DuckDB and Iceberg Java read locations).
 * Returns FIRN_ERR_INVALID for other schemes or a relative path, FIRN_ERR_TOO_LARGE when the
 * path does not fit out. */
FIRN_MUST_CHECK firn_rc firn_io_local_path(const char *location,
                                           char *out,
                                           size_t out_cap,
                                           firn_err *err);

#endif
