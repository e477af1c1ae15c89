/* SPDX-License-Identifier: Apache-2.0 */
/* The key index kept next to the table (docs/internals/pkindex.md "Persistence"): the index
 * manifest (seed, key count, runs with their checksums, the file table, the snapshot it holds),
 * uploading the run files a manifest names through the table's FileIO, and downloading them into
 * an index's local folder. Files are streamed in PK_XFER_CHUNK pieces, never read whole. */
#include "eng_pkindex_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define XMAN_MAGIC   "FIRNPKX1"
#define XMAN_VERSION 1u
#define XMAN_MAX     ((size_t)1 << 30)
/* Bytes per read or write while a run is copied to or from the table's storage. */
#define PK_XFER_CHUNK ((size_t)1 << 20)

/* ---- manifest encoding --------------------------------------------------------------------- */

static firn_rc wr_str(firn_buf *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    FIRN_TRY(firn_wr_le32(b, (uint32_t)n));
    return firn_buf_append(b, s ? s : "", n);
}

static char *rd_str(firn_rd *r)
{
    uint32_t n = firn_rd_le32(r);
    const uint8_t *p = firn_rd_bytes(r, n);
    return firn_rd_ok(r) ? firn_strndup((const char *)p, n) : NULL;
}

static firn_rc encode_run(firn_buf *b, const firn__pkxrun *x)
{
    FIRN_TRY(wr_str(b, x->name));
    FIRN_TRY(firn_wr_le32(b, x->id));
    FIRN_TRY(firn_wr_le32(b, x->level));
    FIRN_TRY(firn_wr_le64(b, x->bytes));
    FIRN_TRY(firn_wr_le64(b, x->entries));
    FIRN_TRY(firn_wr_le64(b, x->min_h));
    FIRN_TRY(firn_wr_le64(b, x->max_h));
    return firn_wr_le32(b, x->crc);
}

firn_rc firn__pkxman_encode(const firn__pkxman *m, firn_buf *b)
{
    size_t start = b->len;
    FIRN_TRY(firn_buf_append(b, XMAN_MAGIC, 8));
    FIRN_TRY(firn_wr_le32(b, XMAN_VERSION));
    FIRN_TRY(firn_wr_le32(b, 0)); /* crc32 of what follows, set below */
    FIRN_TRY(wr_str(b, m->table_uuid));
    FIRN_TRY(firn_wr_le64(b, (uint64_t)m->snapshot_id));
    FIRN_TRY(firn_buf_append(b, m->seed, 16));
    FIRN_TRY(firn_wr_le64(b, m->keys));
    FIRN_TRY(firn_wr_le32(b, m->next_run_id));
    FIRN_TRY(firn_wr_le32(b, (uint32_t)m->n_runs));
    for (size_t i = 0; i < m->n_runs; i++)
        FIRN_TRY(encode_run(b, &m->runs[i]));
    FIRN_TRY(firn_wr_le32(b, m->n_files));
    for (uint32_t i = 0; i < m->n_files; i++)
        FIRN_TRY(wr_str(b, m->files[i]));
    uint32_t crc = firn__pk_crc32(0, b->data + start + 16, b->len - start - 16);
    for (int i = 0; i < 4; i++)
        b->data[start + 12 + i] = (uint8_t)(crc >> (8 * i));
    return FIRN_OK;
}

static bool decode_runs(firn_rd *r, firn__pkxman *m)
{
    uint32_t n = firn_rd_le32(r);
    if (!firn_rd_ok(r) || n > 4096)
        return false;
    m->runs = firn_calloc(n ? n : 1, sizeof(*m->runs));
    for (uint32_t i = 0; i < n; i++) {
        firn__pkxrun *x = &m->runs[i];
        x->name = rd_str(r);
        m->n_runs++;
        x->id = firn_rd_le32(r);
        x->level = firn_rd_le32(r);
        x->bytes = firn_rd_le64(r);
        x->entries = firn_rd_le64(r);
        x->min_h = firn_rd_le64(r);
        x->max_h = firn_rd_le64(r);
        x->crc = firn_rd_le32(r);
        /* Names are plain file names next to the manifest. */
        if (!firn_rd_ok(r) || !x->name || !x->name[0] || strchr(x->name, '/'))
            return false;
    }
    return true;
}

static bool decode_body(firn_rd *r, firn__pkxman *m)
{
    m->table_uuid = rd_str(r);
    m->snapshot_id = (int64_t)firn_rd_le64(r);
    const uint8_t *seed = firn_rd_bytes(r, 16);
    if (!firn_rd_ok(r) || !m->table_uuid)
        return false;
    memcpy(m->seed, seed, 16);
    m->keys = firn_rd_le64(r);
    m->next_run_id = firn_rd_le32(r);
    if (!decode_runs(r, m))
        return false;
    uint32_t n = firn_rd_le32(r);
    if (!firn_rd_ok(r) || n > firn_rd_remaining(r) / 4)
        return false;
    m->files = firn_calloc(n ? n : 1, sizeof(char *));
    for (uint32_t i = 0; i < n; i++) {
        m->files[i] = rd_str(r);
        if (!m->files[i])
            return false;
        m->n_files++;
    }
    return firn_rd_remaining(r) == 0;
}

firn_rc firn__pkxman_decode(const uint8_t *p, size_t len, firn__pkxman *m, firn_err *err)
{
    memset(m, 0, sizeof(*m));
    firn_rd r;
    firn_rd_init(&r, p, len);
    const uint8_t *magic = firn_rd_bytes(&r, 8);
    uint32_t version = firn_rd_le32(&r), crc = firn_rd_le32(&r);
    if (!firn_rd_ok(&r) || memcmp(magic, XMAN_MAGIC, 8) != 0)
        return firn_err_set(err, FIRN_ERR_PARSE, "not a firn key index manifest");
    if (version != XMAN_VERSION)
        return firn_err_set(err, FIRN_ERR_PARSE, "key index manifest version %u is not known",
                            version);
    if (crc != firn__pk_crc32(0, p + 16, len - 16))
        return firn_err_set(err, FIRN_ERR_PARSE, "key index manifest checksum mismatch");
    if (!decode_body(&r, m)) {
        firn__pkxman_free(m);
        return firn_err_set(err, FIRN_ERR_PARSE, "key index manifest damaged");
    }
    return FIRN_OK;
}

void firn__pkxman_free(firn__pkxman *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_runs; i++)
        firn_free(m->runs[i].name);
    firn_free(m->runs);
    for (uint32_t i = 0; i < m->n_files; i++)
        firn_free(m->files[i]);
    firn_free(m->files);
    firn_free(m->table_uuid);
    memset(m, 0, sizeof(*m));
}

/* ---- uploading --------------------------------------------------------------------------- */

static char *join(const char *folder, const char *name)
{
    firn_buf b;
    firn_buf_init(&b, 16384);
    firn_rc_ignore(firn_buf_appendf(&b, "%s/%s", folder, name));
    return (char *)firn_buf_take(&b, NULL);
}

/* Whether run r of an index is the run x of an earlier manifest (same seed checked by the
 * caller): runs are immutable, and this identity (id, level, size, entries, hash range) is what
 * the run's checksummed header says. */
static bool same_run(const firn__pkrun *r, const firn__pkxrun *x)
{
    return r->id == x->id && r->level == x->level && r->file_bytes == x->bytes &&
           r->n_entries == x->entries && r->min_h == x->min_h && r->max_h == x->max_h;
}

/* Reads run r in PK_XFER_CHUNK pieces, writing each to w (NULL: none) and, when out_crc is not
 * NULL, computing the crc32 of the whole file into it. */
static firn_rc stream_run(const firn__pkrun *r, firn_io_writer *w, uint32_t *out_crc, firn_err *err)
{
    uint8_t *buf = firn_malloc(PK_XFER_CHUNK);
    uint32_t crc = 0;
    firn_rc rc = FIRN_OK;
    for (uint64_t off = 0; rc == FIRN_OK && off < r->file_bytes;) {
        size_t want =
            r->file_bytes - off < PK_XFER_CHUNK ? (size_t)(r->file_bytes - off) : PK_XFER_CHUNK;
        ssize_t n = pread(r->fd, buf, want, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = firn_err_set_errno(err, FIRN_ERR_IO, n < 0 ? errno : EIO, "could not read \"%s\"",
                                    r->path);
            break;
        }
        if (out_crc)
            crc = firn__pk_crc32(crc, buf, (size_t)n);
        if (w)
            rc = firn_io_write(w, buf, (size_t)n, err);
        off += (uint64_t)n;
    }
    firn_free(buf);
    if (rc == FIRN_OK && out_crc)
        *out_crc = crc;
    return rc;
}

/* Publishes run r at loc as a hard link of its local file, when io is the local FileIO (not a
 * wrapper) and loc is on the run's file system: no byte is read or written. Runs are never
 * changed in place, here or in the index folder (new files are renamed or linked into place,
 * old ones unlinked), so sharing the inode shares nothing that changes. The run is made durable
 * first, as the FileIO's close does for a copy. False when this cannot be done (nothing
 * published; the caller copies). */
static bool link_run(firn_io *io, const firn__pkrun *r, const char *loc)
{
    char path[PATH_MAX];
    firn_err e = {0};
    if (strcmp(io->vt->scheme, "file") != 0 ||
        firn_io_local_path(loc, path, sizeof(path), &e) != FIRN_OK ||
        firn__pkrun_sync(r, &e) != FIRN_OK)
        return false;
    /* Missing folders above it are made as the FileIO makes them (a failure shows in link). */
    for (char *at = path + 1; *at; at++) {
        if (*at != '/')
            continue;
        *at = '\0';
        (void)mkdir(path, 0755);
        *at = '/';
    }
    return link(r->path, path) == 0;
}

bool firn__pkindex_upload_no_link;

/* Publishes run r as folder/run-<uuid>.pkr through io (a hard link for a local warehouse, else a
 * copy in chunks) and describes it in x, with the crc32 of the whole file: the writer's (or the
 * download's) when the run has one, else computed from the bytes. */
static firn_rc
upload_run(firn_io *io, const char *folder, const firn__pkrun *r, firn__pkxrun *x, firn_err *err)
{
    uint8_t raw[16];
    char uuid[37], name[64];
    firn_uuid_v4(raw);
    firn_uuid_format(raw, uuid);
    snprintf(name, sizeof(name), "run-%s.pkr", uuid);
    char *loc = join(folder, name);
    uint32_t crc = r->file_crc;
    uint32_t *want_crc = r->has_file_crc ? NULL : &crc;
    firn_rc rc = FIRN_OK;
    if (!firn__pkindex_upload_no_link && link_run(io, r, loc)) {
        if (want_crc)
            rc = stream_run(r, NULL, want_crc, err);
        if (rc) {
            firn_err e = {0};
            firn_rc_ignore(firn_io_remove(io, loc, &e));
        }
    } else {
        firn_io_writer *w = NULL;
        rc = firn_io_create(io, loc, &w, err);
        if (rc == FIRN_OK)
            rc = stream_run(r, w, want_crc, err);
        if (rc == FIRN_OK) {
            rc = firn_io_close(w, NULL, err);
            w = NULL;
        }
        firn_io_abort(w);
    }
    firn_free(loc);
    if (rc)
        return rc;
    x->name = firn_strdup(name);
    x->id = r->id;
    x->level = r->level;
    x->bytes = r->file_bytes;
    x->entries = r->n_entries;
    x->min_h = r->min_h;
    x->max_h = r->max_h;
    x->crc = crc;
    return FIRN_OK;
}

/* The entry of prev for run r, when prev (same seed) already names an uploaded copy of it. */
static const firn__pkxrun *
uploaded_copy(const firn__pkxman *prev, const firn__pkindex *idx, const firn__pkrun *r)
{
    if (!prev || memcmp(prev->seed, idx->seed, 16) != 0)
        return NULL;
    for (size_t i = 0; i < prev->n_runs; i++) {
        if (same_run(r, &prev->runs[i]))
            return &prev->runs[i];
    }
    return NULL;
}

/* Removes the runs of m not in keep (NULL: all of them); best effort. */
static void
remove_runs(firn_io *io, const char *folder, const firn__pkxman *m, const firn__pkxman *keep)
{
    for (size_t i = 0; m && i < m->n_runs; i++) {
        bool kept = false;
        for (size_t j = 0; keep && j < keep->n_runs && !kept; j++)
            kept = strcmp(keep->runs[j].name, m->runs[i].name) == 0;
        if (kept)
            continue;
        char *loc = join(folder, m->runs[i].name);
        firn_err e = {0};
        firn_rc_ignore(firn_io_remove(io, loc, &e));
        firn_free(loc);
    }
}

void firn__pkxman_remove_unused(firn_io *io,
                                const char *folder,
                                const firn__pkxman *old,
                                const firn__pkxman *keep)
{
    remove_runs(io, folder, old, keep);
}

/* Fills the header fields of m from idx. */
static void
describe(const firn__pkindex *idx, const char *table_uuid, int64_t snapshot_id, firn__pkxman *m)
{
    memset(m, 0, sizeof(*m));
    m->table_uuid = firn_strdup(table_uuid);
    m->snapshot_id = snapshot_id;
    memcpy(m->seed, idx->seed, 16);
    m->keys = idx->live;
    m->next_run_id = idx->next_run_id;
    m->files = firn_calloc(idx->n_files ? idx->n_files : 1, sizeof(char *));
    for (uint32_t i = 0; i < idx->n_files; i++)
        m->files[m->n_files++] = firn_strdup(idx->files[i]);
    m->runs = firn_calloc(idx->n_runs ? idx->n_runs : 1, sizeof(*m->runs));
}

firn_rc firn__pkindex_upload(firn__pkindex *idx,
                             firn_io *io,
                             const char *folder,
                             const char *table_uuid,
                             int64_t snapshot_id,
                             const firn__pkxman *prev,
                             firn__pkxman *out,
                             firn__pkxfer *stats,
                             firn_err *err)
{
    memset(out, 0, sizeof(*out));
    if (idx->bulk)
        return firn_err_set(err, FIRN_ERR_INVALID, "key index in bulk mode cannot be uploaded");
    FIRN_TRY(firn__pkindex_flush(idx, err)); /* the memtable becomes a run */
    firn__pkxman m;
    describe(idx, table_uuid, snapshot_id, &m);
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; i < idx->n_runs && rc == FIRN_OK; i++) {
        const firn__pkrun *r = idx->runs[i];
        const firn__pkxrun *old = uploaded_copy(prev, idx, r);
        firn__pkxrun *x = &m.runs[m.n_runs];
        if (old) {
            *x = *old;
            x->name = firn_strdup(old->name);
            m.n_runs++;
            continue;
        }
        rc = upload_run(io, folder, r, x, err);
        if (rc == FIRN_OK) {
            m.n_runs++;
            stats->runs++;
            stats->bytes += r->file_bytes;
        }
    }
    if (rc) {
        remove_runs(io, folder, &m, prev); /* the copies this attempt made */
        firn__pkxman_free(&m);
        return rc;
    }
    *out = m;
    return FIRN_OK;
}

/* ---- downloading --------------------------------------------------------------------------- */

/* Copies folder/x->name into the index folder as run-<id>.pkr (through a temporary file),
 * checking its size and crc32 against x. */
static firn_rc
download_run(firn_io *io, const char *folder, const char *dir, const firn__pkxrun *x, firn_err *err)
{
    char tmp_name[40], name[32];
    snprintf(tmp_name, sizeof(tmp_name), "run-%08u.tmp", x->id);
    snprintf(name, sizeof(name), "run-%08u.pkr", x->id);
    char *loc = join(folder, x->name);
    char *tmp = firn__pk_path(dir, tmp_name);
    char *final = firn__pk_path(dir, name);
    firn_buf b;
    firn_buf_init(&b, PK_XFER_CHUNK);
    uint32_t crc = 0;
    firn_rc rc = FIRN_OK;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        rc = firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not create \"%s\"", tmp);
    for (uint64_t off = 0; rc == FIRN_OK && off < x->bytes;) {
        size_t want = x->bytes - off < PK_XFER_CHUNK ? (size_t)(x->bytes - off) : PK_XFER_CHUNK;
        firn_buf_reset(&b);
        rc = firn_io_read_range(io, loc, off, want, &b, err);
        if (rc == FIRN_OK && b.len != want)
            rc = firn_err_set(err, FIRN_ERR_IO, "short read of \"%s\"", loc);
        if (rc == FIRN_OK) {
            crc = firn__pk_crc32(crc, b.data, b.len);
            rc = firn__pk_write_all(fd, b.data, b.len, tmp, err);
        }
        off += want;
    }
    uint64_t size = 0;
    if (rc == FIRN_OK && (firn_io_size(io, loc, &size, err) != FIRN_OK || size != x->bytes))
        rc = firn_err_set(err, FIRN_ERR_PARSE, "\"%s\" has %llu bytes, the manifest says %llu", loc,
                          (unsigned long long)size, (unsigned long long)x->bytes);
    if (rc == FIRN_OK && (uint32_t)crc != x->crc)
        rc = firn_err_set(err, FIRN_ERR_PARSE, "\"%s\" does not match its checksum", loc);
    if (fd >= 0 && close(fd) != 0 && rc == FIRN_OK)
        rc = firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not close \"%s\"", tmp);
    if (rc == FIRN_OK && rename(tmp, final) != 0)
        rc = firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not rename \"%s\"", tmp);
    if (rc)
        unlink(tmp);
    firn_buf_deinit(&b);
    firn_free(loc);
    firn_free(tmp);
    firn_free(final);
    return rc;
}

firn_rc firn__pkxman_read(firn_io *io, const char *location, firn__pkxman *out, firn_err *err)
{
    firn_buf b;
    firn_buf_init(&b, XMAN_MAX);
    firn_rc rc = firn_io_read(io, location, &b, err);
    if (rc == FIRN_OK)
        rc = firn__pkxman_decode(b.data, b.len, out, err);
    if (rc && rc != FIRN_ERR_NOT_FOUND)
        firn_err_context(err, "while reading the key index manifest \"%s\"", location);
    firn_buf_deinit(&b);
    return rc;
}

/* Opens the downloaded runs of m into idx, newest first, each checked against its entry. */
static firn_rc adopt_runs(firn__pkindex *idx, const firn__pkxman *m, firn_err *err)
{
    idx->runs = firn_reallocarray(idx->runs, m->n_runs ? m->n_runs : 1, sizeof(*idx->runs));
    for (size_t i = 0; i < m->n_runs; i++) {
        char name[32];
        snprintf(name, sizeof(name), "run-%08u.pkr", m->runs[i].id);
        char *p = firn__pk_path(idx->dir, name);
        firn__pkrun *run = NULL;
        firn_rc rc = firn__pkrun_open(p, &run, err);
        firn_free(p);
        if (rc)
            return rc;
        idx->runs[idx->n_runs++] = run;
        run->has_file_crc = true; /* download_run compared the file with it */
        run->file_crc = m->runs[i].crc;
        if (!same_run(run, &m->runs[i]) || run->id >= m->next_run_id)
            return firn_err_set(err, FIRN_ERR_PARSE, "run %u does not match the manifest",
                                m->runs[i].id);
    }
    return FIRN_OK;
}

firn_rc firn__pkindex_download(firn__pkindex *idx,
                               firn_io *io,
                               const char *folder,
                               const firn__pkxman *m,
                               firn__pkxfer *stats,
                               firn_err *err)
{
    FIRN_ASSERT(idx->n_runs == 0 && idx->n_files == 0 && idx->live == 0 && idx->mt_used == 0);
    if (idx->dir_owned || !idx->dir)
        return firn_err_set(err, FIRN_ERR_INVALID, "key index has no folder to download into");
    FIRN_TRY(firn__pkindex_ensure_dir(idx, err)); /* locked, emptied of old runs */
    for (size_t i = 0; i < m->n_runs; i++) {
        for (size_t j = 0; j < i; j++) {
            if (m->runs[j].id == m->runs[i].id)
                return firn_err_set(err, FIRN_ERR_PARSE, "run %u is named twice", m->runs[i].id);
        }
        FIRN_TRY(download_run(io, folder, idx->dir, &m->runs[i], err));
        stats->runs++;
        stats->bytes += m->runs[i].bytes;
    }
    firn_rc rc = adopt_runs(idx, m, err);
    if (rc == FIRN_OK) {
        memcpy(idx->seed, m->seed, 16);
        idx->live = (size_t)m->keys;
        idx->next_run_id = m->next_run_id;
        for (uint32_t i = 0; i < m->n_files; i++)
            firn__pkindex_add_file(idx, m->files[i]);
    }
    return rc;
}
