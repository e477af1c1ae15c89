/* SPDX-License-Identifier: Apache-2.0 */
/* Local FileIO: paths and file:// URIs; write to a temporary name, fsync, then link into place
 * so a file appears complete or not at all and is never replaced. */
#include "firn/io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct local_writer {
    firn_io_writer base;
    int fd;
    char path[PATH_MAX];
    char tmp_path[PATH_MAX];
} local_writer;

firn_rc firn_io_local_path(const char *location, char *out, size_t out_cap, firn_err *err)
{
    const char *p = location;
    if (strncmp(p, "file://", 7) == 0) {
        p += 7;
        if (strncmp(p, "localhost/", 10) == 0)
            p += 9;
    } else if (strncmp(p, "file:/", 6) == 0) {
        /* Hadoop's Path (Spark, Iceberg Java) writes "file:/abs/path". */
        p += 5;
    } else if (strstr(p, "://")) {
        return firn_err_set(err, FIRN_ERR_INVALID, "location \"%s\" is not a local path", location);
    }
    if (*p != '/')
        return firn_err_set(err, FIRN_ERR_INVALID, "location \"%s\" is not an absolute path",
                            location);
    /* The rest is the path byte for byte, '%' included: no percent-decoding. pyiceberg, DuckDB
     * and Iceberg Java open a file:// location so, and partition folders are percent-encoded
     * names ("region=z%C3%BCrich") that must be opened as written. */
    const size_t n = strlen(p);
    if (n + 1 > out_cap)
        return firn_err_set(err, FIRN_ERR_TOO_LARGE, "location \"%s\" is too long", location);
    memcpy(out, p, n + 1);
    return FIRN_OK;
}

/* Creates every missing folder above path (mkdir -p of its dirname). */
static firn_rc make_parents(const char *path, firn_err *err)
{
    char dir[PATH_MAX];
    size_t len = strlen(path);
    FIRN_ASSERT(len < sizeof(dir));
    memcpy(dir, path, len + 1);
    for (char *s = dir + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
            return firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not create folder \"%s\"",
                                      dir);
        *s = '/';
    }
    return FIRN_OK;
}

static firn_rc errno_rc(int e)
{
    switch (e) {
    case ENOENT:
        return FIRN_ERR_NOT_FOUND;
    case EEXIST:
        return FIRN_ERR_EXISTS;
    case EACCES:
    case EPERM:
    case EROFS:
        return FIRN_ERR_PERMISSION;
    default:
        return FIRN_ERR_IO;
    }
}

static firn_rc local_create(firn_io *io, const char *location, firn_io_writer **out, firn_err *err)
{
    local_writer *w = firn_calloc(1, sizeof(*w));
    w->base.io = io;
    w->fd = -1;
    firn_rc rc = firn_io_local_path(location, w->path, sizeof(w->path), err);
    if (rc)
        goto fail;
    rc = make_parents(w->path, err);
    if (rc)
        goto fail;
    const char *slash = strrchr(w->path, '/');
    uint8_t rnd[16];
    char hex[37];
    firn_uuid_v4(rnd);
    firn_uuid_format(rnd, hex);
    int n = snprintf(w->tmp_path, sizeof(w->tmp_path), "%.*s/.%s.%s.tmp", (int)(slash - w->path),
                     w->path, slash + 1, hex);
    if (n < 0 || (size_t)n >= sizeof(w->tmp_path)) {
        rc = firn_err_set(err, FIRN_ERR_TOO_LARGE, "path \"%s\" is too long", w->path);
        goto fail;
    }
    w->fd = open(w->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        int e = errno;
        rc = firn_err_set_errno(err, errno_rc(e), e, "could not create file \"%s\"", w->tmp_path);
        goto fail;
    }
    *out = &w->base;
    return FIRN_OK;
fail:
    firn_free(w);
    return rc;
}

static firn_rc local_write(firn_io_writer *base, const void *p, size_t len, firn_err *err)
{
    local_writer *w = (local_writer *)base;
    const uint8_t *b = p;
    while (len > 0) {
        ssize_t n = write(w->fd, b, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            return firn_err_set_errno(err, errno_rc(e), e, "could not write file \"%s\"",
                                      w->tmp_path);
        }
        b += n;
        len -= (size_t)n;
        w->base.bytes_written += (uint64_t)n;
    }
    return FIRN_OK;
}

static void local_abort(firn_io_writer *base)
{
    local_writer *w = (local_writer *)base;
    if (w->fd >= 0)
        close(w->fd);
    unlink(w->tmp_path);
    firn_free(w);
}

static firn_rc local_close(firn_io_writer *base, uint64_t *out_size, firn_err *err)
{
    local_writer *w = (local_writer *)base;
    firn_rc rc = FIRN_OK;
    if (fsync(w->fd) != 0) {
        int e = errno;
        rc = firn_err_set_errno(err, FIRN_ERR_IO, e, "could not sync file \"%s\"", w->tmp_path);
        goto out;
    }
    /* link(2) fails with EEXIST instead of replacing, unlike rename(2). */
    if (link(w->tmp_path, w->path) != 0) {
        int e = errno;
        rc = firn_err_set_errno(err, errno_rc(e), e, "could not publish file \"%s\"", w->path);
        goto out;
    }
    if (out_size)
        *out_size = w->base.bytes_written;
out:
    local_abort(base);
    return rc;
}

static firn_rc
local_open_read(const char *location, int *out_fd, char *path, size_t cap, firn_err *err)
{
    FIRN_TRY(firn_io_local_path(location, path, cap, err));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return firn_err_set_errno(err, errno_rc(e), e, "could not open file \"%s\"", path);
    }
    *out_fd = fd;
    return FIRN_OK;
}

static firn_rc read_fd(
    int fd, const char *path, uint64_t offset, size_t len, bool exact, firn_buf *out, firn_err *err)
{
    uint8_t chunk[65536];
    size_t got = 0;
    while (got < len) {
        size_t want = len - got < sizeof(chunk) ? len - got : sizeof(chunk);
        ssize_t n = pread(fd, chunk, want, (off_t)(offset + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            return firn_err_set_errno(err, FIRN_ERR_IO, e, "could not read file \"%s\"", path);
        }
        if (n == 0)
            break;
        if (firn_buf_append(out, chunk, (size_t)n))
            return firn_err_set(err, FIRN_ERR_TOO_LARGE, "file \"%s\" is too large to read", path);
        got += (size_t)n;
    }
    if (exact && got < len)
        return firn_err_set(err, FIRN_ERR_IO, "file \"%s\" is shorter than %llu bytes", path,
                            (unsigned long long)(offset + len));
    return FIRN_OK;
}

static firn_rc local_read(firn_io *io, const char *location, firn_buf *out, firn_err *err)
{
    (void)io;
    char path[PATH_MAX];
    int fd = -1;
    FIRN_TRY(local_open_read(location, &fd, path, sizeof(path), err));
    firn_rc rc = read_fd(fd, path, 0, SIZE_MAX, false, out, err);
    close(fd);
    return rc;
}

static firn_rc local_read_range(
    firn_io *io, const char *location, uint64_t offset, size_t len, firn_buf *out, firn_err *err)
{
    (void)io;
    char path[PATH_MAX];
    int fd = -1;
    FIRN_TRY(local_open_read(location, &fd, path, sizeof(path), err));
    firn_rc rc = read_fd(fd, path, offset, len, true, out, err);
    close(fd);
    return rc;
}

static firn_rc local_size(firn_io *io, const char *location, uint64_t *out, firn_err *err)
{
    (void)io;
    char path[PATH_MAX];
    FIRN_TRY(firn_io_local_path(location, path, sizeof(path), err));
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        return firn_err_set_errno(err, errno_rc(e), e, "could not stat file \"%s\"", path);
    }
    *out = (uint64_t)st.st_size;
    return FIRN_OK;
}

static firn_rc local_remove(firn_io *io, const char *location, firn_err *err)
{
    (void)io;
    char path[PATH_MAX];
    FIRN_TRY(firn_io_local_path(location, path, sizeof(path), err));
    if (unlink(path) != 0) {
        int e = errno;
        return firn_err_set_errno(err, errno_rc(e), e, "could not remove file \"%s\"", path);
    }
    return FIRN_OK;
}

/* Walks folder path (shown to fn as loc, the same object under the prefix's spelling). */
static firn_rc walk(char *path,
                    size_t path_cap,
                    char *loc,
                    size_t loc_cap,
                    firn_io_list_fn fn,
                    void *ctx,
                    firn_err *err)
{
    DIR *d = opendir(path);
    if (!d) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR)
            return FIRN_OK;
        return firn_err_set_errno(err, errno_rc(e), e, "could not list folder \"%s\"", path);
    }
    size_t plen = strlen(path), llen = strlen(loc);
    firn_rc rc = FIRN_OK;
    struct dirent *de;
    while (rc == FIRN_OK && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        size_t n = strlen(de->d_name);
        if (plen + 1 + n >= path_cap || llen + 1 + n >= loc_cap) {
            rc = firn_err_set(err, FIRN_ERR_TOO_LARGE, "path under \"%s\" is too long", path);
            break;
        }
        path[plen] = '/';
        memcpy(path + plen + 1, de->d_name, n + 1);
        loc[llen] = '/';
        memcpy(loc + llen + 1, de->d_name, n + 1);
        struct stat st;
        if (lstat(path, &st) != 0) {
            int e = errno;
            if (e != ENOENT) /* removed meanwhile */
                rc = firn_err_set_errno(err, errno_rc(e), e, "could not stat \"%s\"", path);
        } else if (S_ISDIR(st.st_mode)) {
            rc = walk(path, path_cap, loc, loc_cap, fn, ctx, err);
        } else if (S_ISREG(st.st_mode)) {
            int64_t ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
            rc = fn(ctx, loc, (uint64_t)st.st_size, ms, err);
        }
        path[plen] = '\0';
        loc[llen] = '\0';
    }
    closedir(d);
    return rc;
}

static firn_rc
local_list(firn_io *io, const char *prefix, firn_io_list_fn fn, void *ctx, firn_err *err)
{
    (void)io;
    char path[PATH_MAX], loc[PATH_MAX + 64];
    FIRN_TRY(firn_io_local_path(prefix, path, sizeof(path), err));
    size_t n = strlen(prefix);
    while (n > 1 && prefix[n - 1] == '/')
        n--;
    if (n >= sizeof(loc))
        return firn_err_set(err, FIRN_ERR_TOO_LARGE, "location \"%s\" is too long", prefix);
    memcpy(loc, prefix, n);
    loc[n] = '\0';
    size_t pn = strlen(path);
    while (pn > 1 && path[pn - 1] == '/')
        path[--pn] = '\0';
    return walk(path, sizeof(path), loc, sizeof(loc), fn, ctx, err);
}

static void local_destroy(firn_io *io)
{
    firn_free(io);
}

static const firn_io_vtable local_vt = {
    .scheme = "file",
    .create = local_create,
    .write = local_write,
    .close = local_close,
    .abort = local_abort,
    .read = local_read,
    .read_range = local_read_range,
    .size = local_size,
    .remove = local_remove,
    .destroy = local_destroy,
    .list = local_list,
};

firn_io *firn_io_local_new(void)
{
    firn_io *io = firn_calloc(1, sizeof(*io));
    io->vt = &local_vt;
    return io;
}
