/* SPDX-License-Identifier: Apache-2.0 */
/* The key index's local folder: creation and locking, stale-file cleanup, and checkpoints (a
 * manifest naming the run files, file table and seed under a tag) that let the next start load
 * the index instead of rebuilding it (docs/internals/pkindex.md "Persistence"). */
#include "eng_pkindex_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define MANIFEST_NAME    "MANIFEST"
#define MANIFEST_MAGIC   "FIRNPKM1"
#define MANIFEST_VERSION 1u
#define MANIFEST_MAX     ((size_t)1 << 30)

static char *run_path(const char *dir, uint32_t id)
{
    char name[32];
    snprintf(name, sizeof(name), "run-%08u.pkr", id);
    return firn__pk_path(dir, name);
}

static firn_rc mkdir_p(const char *path, firn_err *err)
{
    char *p = firn_strdup(path);
    firn_rc rc = FIRN_OK;
    for (char *s = p + 1;; s++) {
        bool end = *s == '\0';
        if (*s == '/' || end) {
            *s = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                rc = firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not create folder \"%s\"",
                                        p);
                break;
            }
            if (end)
                break;
            *s = '/';
        }
    }
    firn_free(p);
    return rc;
}

firn_rc firn__engine_check_index_dir(const firn_destination_config *d, firn_err *err)
{
    if (!d->index_dir)
        return FIRN_OK;
    firn_err e = {0};
    firn_rc rc = mkdir_p(d->index_dir, &e);
    if (rc == FIRN_OK && access(d->index_dir, W_OK | X_OK) != 0)
        rc = firn_err_set_errno(&e, FIRN_ERR_IO, errno, "cannot write in \"%s\"", d->index_dir);
    if (rc)
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "\"index_dir\": %s; point it at a writable local folder (or leave it "
                            "out for ~/.cache/firn)",
                            e.msg);
    return FIRN_OK;
}

/* Whether run file name belongs to the runs of idx (by id). */
static bool is_live_run(const firn__pkindex *idx, const char *name)
{
    for (size_t i = 0; i < idx->n_runs; i++) {
        char want[32];
        snprintf(want, sizeof(want), "run-%08u.pkr", idx->runs[i]->id);
        if (strcmp(name, want) == 0)
            return true;
    }
    return false;
}

/* Removes the files of the folder that are not part of idx: run files (finished or not) of a
 * former index, a manifest unless keep_manifest. */
static void remove_stale(const firn__pkindex *idx, bool keep_manifest)
{
    DIR *d = opendir(idx->dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        size_t n = strlen(name);
        bool run = strncmp(name, "run-", 4) == 0 && n > 8 &&
                   (strcmp(name + n - 4, ".pkr") == 0 || strcmp(name + n - 4, ".tmp") == 0);
        bool manifest = strncmp(name, MANIFEST_NAME, strlen(MANIFEST_NAME)) == 0;
        if ((run && !is_live_run(idx, name)) || (manifest && !keep_manifest)) {
            char *p = firn__pk_path(idx->dir, name);
            unlink(p);
            firn_free(p);
        }
    }
    closedir(d);
}

/* Creates and locks the given folder (one process per folder). */
static firn_rc lock_dir(firn__pkindex *idx, firn_err *err)
{
    if (idx->lock_fd >= 0)
        return FIRN_OK;
    FIRN_TRY(mkdir_p(idx->dir, err));
    char *p = firn__pk_path(idx->dir, "LOCK");
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    firn_rc rc = FIRN_OK;
    if (fd < 0) {
        rc = firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not open \"%s\"", p);
    } else if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        rc = errno == EWOULDBLOCK
                 ? firn_err_set(err, FIRN_ERR_UNAVAILABLE,
                                "key index folder \"%s\" is in use by another process", idx->dir)
                 : firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not lock \"%s\"", p);
        close(fd);
    } else {
        idx->lock_fd = fd;
    }
    firn_free(p);
    return rc;
}

static firn_rc make_temp_dir(firn__pkindex *idx, firn_err *err)
{
    const char *tmp = getenv("TMPDIR");
    char *path = firn__pk_path(tmp && *tmp ? tmp : "/tmp", "firn-pkindex-XXXXXX");
    if (!mkdtemp(path)) {
        firn_rc rc = firn_err_set_errno(err, FIRN_ERR_IO, errno,
                                        "could not create a folder for the key index");
        firn_free(path);
        return rc;
    }
    idx->dir = path;
    idx->dir_owned = true;
    return FIRN_OK;
}

firn_rc firn__pkindex_ensure_dir(firn__pkindex *idx, firn_err *err)
{
    if (idx->dir_ready)
        return FIRN_OK;
    if (!idx->dir) {
        FIRN_TRY(make_temp_dir(idx, err));
    } else {
        FIRN_TRY(lock_dir(idx, err));
        remove_stale(idx, false);
    }
    idx->dir_ready = true;
    return FIRN_OK;
}

void firn__pkindex_touch(firn__pkindex *idx)
{
    if (!idx->checkpointed)
        return;
    /* The runs may change from here on: the manifest must not name them any more. */
    char *p = firn__pk_path(idx->dir, MANIFEST_NAME);
    unlink(p);
    firn_free(p);
    idx->checkpointed = false;
}

void firn__pkindex_close_dir(firn__pkindex *idx)
{
    bool keep = idx->checkpointed && !idx->dir_owned;
    for (size_t i = 0; i < idx->n_runs; i++)
        firn__pkrun_close(idx->runs[i], !keep);
    idx->n_runs = 0;
    if (!keep && idx->dir_ready) {
        char *p = firn__pk_path(idx->dir, MANIFEST_NAME);
        unlink(p);
        firn_free(p);
    }
    if (idx->dir_owned && idx->dir_ready)
        rmdir(idx->dir);
    if (idx->lock_fd >= 0)
        close(idx->lock_fd); /* releases the lock */
    idx->lock_fd = -1;
}

/* ---- manifest ------------------------------------------------------------------------------ */

static firn_rc encode_manifest(const firn__pkindex *idx, const char *tag, firn_buf *b)
{
    size_t tag_len = strlen(tag);
    FIRN_TRY(firn_buf_append(b, MANIFEST_MAGIC, 8));
    FIRN_TRY(firn_wr_le32(b, MANIFEST_VERSION));
    FIRN_TRY(firn_wr_le32(b, 0)); /* crc32 of what follows, set below */
    FIRN_TRY(firn_wr_le32(b, (uint32_t)tag_len));
    FIRN_TRY(firn_buf_append(b, tag, tag_len));
    FIRN_TRY(firn_buf_append(b, idx->seed, 16));
    FIRN_TRY(firn_wr_le64(b, idx->live));
    FIRN_TRY(firn_wr_le32(b, idx->next_run_id));
    FIRN_TRY(firn_wr_le32(b, (uint32_t)idx->n_runs));
    for (size_t i = 0; i < idx->n_runs; i++) {
        FIRN_TRY(firn_wr_le32(b, idx->runs[i]->id));
        FIRN_TRY(firn_wr_le32(b, idx->runs[i]->level));
        FIRN_TRY(firn_wr_le64(b, idx->runs[i]->file_bytes));
    }
    FIRN_TRY(firn_wr_le32(b, idx->n_files));
    for (uint32_t i = 0; i < idx->n_files; i++) {
        size_t n = strlen(idx->files[i]);
        FIRN_TRY(firn_wr_le32(b, (uint32_t)n));
        FIRN_TRY(firn_buf_append(b, idx->files[i], n));
    }
    uint32_t crc = firn__pk_crc32(0, b->data + 16, b->len - 16);
    for (int i = 0; i < 4; i++)
        b->data[12 + i] = (uint8_t)(crc >> (8 * i));
    return FIRN_OK;
}

static firn_rc write_file_synced(const char *path, const firn_buf *b, firn_err *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not create \"%s\"", path);
    firn_rc rc = firn__pk_write_all(fd, b->data, b->len, path, err);
    if (rc == FIRN_OK && fsync(fd) != 0)
        rc = firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not fsync \"%s\"", path);
    if (close(fd) != 0 && rc == FIRN_OK)
        rc = firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not close \"%s\"", path);
    return rc;
}

firn_rc firn__pkindex_checkpoint(firn__pkindex *idx, const char *tag, firn_err *err)
{
    if (idx->bulk)
        return firn_err_set(err, FIRN_ERR_INVALID, "key index in bulk mode cannot be saved");
    if (idx->checkpointed || !idx->dir || idx->dir_owned)
        return FIRN_OK; /* a private folder is gone with the process: nothing to keep */
    FIRN_TRY(firn__pkindex_flush(idx, err));
    FIRN_TRY(firn__pkindex_ensure_dir(idx, err));
    for (size_t i = 0; i < idx->n_runs; i++)
        FIRN_TRY(firn__pkrun_sync(idx->runs[i], err));
    firn_buf b;
    firn_buf_init(&b, MANIFEST_MAX);
    char *tmp = firn__pk_path(idx->dir, MANIFEST_NAME ".tmp");
    char *final = firn__pk_path(idx->dir, MANIFEST_NAME);
    firn_rc rc = encode_manifest(idx, tag, &b);
    if (rc)
        firn_err_set(err, rc, "key index manifest of \"%s\" is too large", idx->dir);
    if (rc == FIRN_OK)
        rc = write_file_synced(tmp, &b, err);
    if (rc == FIRN_OK && rename(tmp, final) != 0)
        rc = firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not rename \"%s\"", tmp);
    if (rc)
        unlink(tmp);
    else
        firn__pkrun_fsync_dir(idx->dir);
    idx->checkpointed = rc == FIRN_OK;
    firn_free(tmp);
    firn_free(final);
    firn_buf_deinit(&b);
    return rc;
}

/* ---- loading a checkpoint ------------------------------------------------------------------ */

static firn_rc read_whole(const char *path, firn_buf *out, char *why, size_t why_cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, why_cap, "no saved index");
        return FIRN_ERR_NOT_FOUND;
    }
    firn_rc rc = FIRN_OK;
    for (;;) {
        uint8_t chunk[4096];
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || (n > 0 && firn_buf_append(out, chunk, (size_t)n) != FIRN_OK)) {
            snprintf(why, why_cap, "manifest unreadable");
            rc = FIRN_ERR_IO;
            break;
        }
        if (n == 0)
            break;
    }
    close(fd);
    return rc;
}

/* Opens the runs a manifest names, newest first, each checked against its entry. */
static firn_rc load_runs(firn__pkindex *idx, firn_rd *r, char *why, size_t why_cap)
{
    uint32_t n = firn_rd_le32(r);
    if (!firn_rd_ok(r) || n > 4096) {
        snprintf(why, why_cap, "manifest damaged");
        return FIRN_ERR_PARSE;
    }
    idx->runs = firn_calloc(n ? n : 1, sizeof(*idx->runs));
    for (uint32_t i = 0; i < n; i++) {
        uint32_t id = firn_rd_le32(r), level = firn_rd_le32(r);
        uint64_t bytes = firn_rd_le64(r);
        char *p = run_path(idx->dir, id);
        firn__pkrun *run = NULL;
        firn_err e = {0};
        firn_rc rc = firn_rd_ok(r) ? firn__pkrun_open(p, &run, &e) : FIRN_ERR_PARSE;
        firn_free(p);
        if (rc == FIRN_OK && (run->id != id || run->level != level || run->file_bytes != bytes)) {
            firn__pkrun_close(run, false);
            rc = FIRN_ERR_PARSE;
        }
        if (rc) {
            snprintf(why, why_cap, "run %u unusable: %s", id, e.msg[0] ? e.msg : "damaged");
            return rc;
        }
        idx->runs[idx->n_runs++] = run;
    }
    return FIRN_OK;
}

static firn_rc load_files(firn__pkindex *idx, firn_rd *r, char *why, size_t why_cap)
{
    uint32_t n = firn_rd_le32(r);
    for (uint32_t i = 0; i < n && firn_rd_ok(r); i++) {
        uint32_t len = firn_rd_le32(r);
        const uint8_t *p = firn_rd_bytes(r, len);
        if (!firn_rd_ok(r))
            break;
        char *loc = firn_strndup((const char *)p, len);
        uint32_t ord = firn__pkindex_add_file(idx, loc);
        FIRN_ASSERT(ord == i);
        firn_free(loc);
    }
    if (!firn_rd_ok(r) || firn_rd_remaining(r) != 0) {
        snprintf(why, why_cap, "manifest damaged");
        return FIRN_ERR_PARSE;
    }
    return FIRN_OK;
}

static firn_rc
parse_manifest(firn__pkindex *idx, const firn_buf *b, const char *tag, char *why, size_t why_cap)
{
    firn_rd r;
    firn_rd_init(&r, b->data, b->len);
    const uint8_t *magic = firn_rd_bytes(&r, 8);
    uint32_t version = firn_rd_le32(&r), crc = firn_rd_le32(&r);
    if (!firn_rd_ok(&r) || memcmp(magic, MANIFEST_MAGIC, 8) != 0 || version != MANIFEST_VERSION ||
        crc != firn__pk_crc32(0, b->data + 16, b->len - 16)) {
        snprintf(why, why_cap, "manifest damaged");
        return FIRN_ERR_PARSE;
    }
    uint32_t tag_len = firn_rd_le32(&r);
    const uint8_t *got = firn_rd_bytes(&r, tag_len);
    if (!firn_rd_ok(&r) || tag_len != strlen(tag) || memcmp(got, tag, tag_len) != 0) {
        snprintf(why, why_cap, "saved for \"%.*s\", not \"%s\"", firn_rd_ok(&r) ? (int)tag_len : 0,
                 firn_rd_ok(&r) ? (const char *)got : "", tag);
        return FIRN_ERR_NOT_FOUND;
    }
    memcpy(idx->seed, firn_rd_bytes(&r, 16), 16);
    idx->live = (size_t)firn_rd_le64(&r);
    idx->next_run_id = firn_rd_le32(&r);
    FIRN_TRY(load_runs(idx, &r, why, why_cap));
    return load_files(idx, &r, why, why_cap);
}

firn_rc firn__pkindex_open(const firn__pkindex_opts *o,
                           const char *tag,
                           firn__pkindex **out,
                           bool *out_loaded,
                           char *why,
                           size_t why_cap,
                           firn_err *err)
{
    FIRN_ASSERT(o && o->dir);
    *out = NULL;
    *out_loaded = false;
    firn__pkindex *idx = firn__pkindex_new_opts(o);
    firn_rc rc = lock_dir(idx, err);
    if (rc) {
        firn__pkindex_free(idx);
        return rc;
    }
    firn_buf b;
    firn_buf_init(&b, MANIFEST_MAX);
    char *p = firn__pk_path(idx->dir, MANIFEST_NAME);
    bool loaded = read_whole(p, &b, why, why_cap) == FIRN_OK &&
                  parse_manifest(idx, &b, tag, why, why_cap) == FIRN_OK;
    firn_free(p);
    firn_buf_deinit(&b);
    if (!loaded) {
        /* Start empty: the folder is cleaned on first use. */
        firn__pkindex_opts fresh = *o;
        int fd = idx->lock_fd;
        idx->lock_fd = -1;
        firn__pkindex_free(idx);
        idx = firn__pkindex_new_opts(&fresh);
        idx->lock_fd = fd;
        *out = idx;
        return FIRN_OK;
    }
    idx->dir_ready = true;
    idx->checkpointed = true;
    remove_stale(idx, true);
    *out = idx;
    *out_loaded = true;
    return FIRN_OK;
}
