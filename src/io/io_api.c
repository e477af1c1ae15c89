/* SPDX-License-Identifier: Apache-2.0 */
/* Dispatch of the FileIO interface to its implementation. */
#include "firn/io.h"

void firn_io_free(firn_io *io)
{
    if (io)
        io->vt->destroy(io);
}

firn_rc firn_io_create(firn_io *io, const char *location, firn_io_writer **out, firn_err *err)
{
    return io->vt->create(io, location, out, err);
}

firn_rc firn_io_write(firn_io_writer *w, const void *p, size_t len, firn_err *err)
{
    return w->io->vt->write(w, p, len, err);
}

firn_rc firn_io_close(firn_io_writer *w, uint64_t *out_size_bytes, firn_err *err)
{
    return w->io->vt->close(w, out_size_bytes, err);
}

void firn_io_abort(firn_io_writer *w)
{
    if (w)
        w->io->vt->abort(w);
}

firn_rc
firn_io_write_all(firn_io *io, const char *location, const void *p, size_t len, firn_err *err)
{
    firn_io_writer *w = NULL;
    FIRN_TRY(firn_io_create(io, location, &w, err));
    firn_rc rc = firn_io_write(w, p, len, err);
    if (rc) {
        firn_io_abort(w);
        return rc;
    }
    return firn_io_close(w, NULL, err);
}

firn_rc firn_io_read(firn_io *io, const char *location, firn_buf *out, firn_err *err)
{
    return io->vt->read(io, location, out, err);
}

firn_rc firn_io_read_range(
    firn_io *io, const char *location, uint64_t offset, size_t len, firn_buf *out, firn_err *err)
{
    return io->vt->read_range(io, location, offset, len, out, err);
}

firn_rc firn_io_size(firn_io *io, const char *location, uint64_t *out_size_bytes, firn_err *err)
{
    return io->vt->size(io, location, out_size_bytes, err);
}

firn_rc firn_io_remove(firn_io *io, const char *location, firn_err *err)
{
    return io->vt->remove(io, location, err);
}

firn_rc firn_io_list(firn_io *io, const char *prefix, firn_io_list_fn fn, void *ctx, firn_err *err)
{
    if (!io->vt->list)
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "this storage cannot list \"%s\"", prefix);
    return io->vt->list(io, prefix, fn, ctx, err);
}
