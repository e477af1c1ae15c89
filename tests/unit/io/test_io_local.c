/* SPDX-License-Identifier: Apache-2.0 */
/* Local FileIO: location forms, atomic publish without overwrite, reads, sizes, removal. */
#include "firn/io.h"
#include "t.h"

#include <stdlib.h>
#include <sys/stat.h>

static char dir[256];

static void make_dir(void)
{
    snprintf(dir, sizeof(dir), "/tmp/firn_io_test_XXXXXX");
    T_TRUE(mkdtemp(dir) != NULL);
}

T_TEST(location_forms)
{
    char out[512];
    firn_err err = {0};
    T_OK(firn_io_local_path("/a/b c", out, sizeof(out), &err));
    T_EQ_STR(out, "/a/b c");
    /* Byte for byte: a partition folder "region=z%C3%BCrich" is opened as it is written. */
    T_OK(firn_io_local_path("file:///a/b%20c/region=z%C3%BCrich", out, sizeof(out), &err));
    T_EQ_STR(out, "/a/b%20c/region=z%C3%BCrich");
    T_OK(firn_io_local_path("file:///a/b c/z\xc3\xbc", out, sizeof(out), &err));
    T_EQ_STR(out, "/a/b c/z\xc3\xbc");
    T_OK(firn_io_local_path("file://localhost/a/b", out, sizeof(out), &err));
    T_EQ_STR(out, "/a/b");
    T_OK(firn_io_local_path("file:/a/b", out, sizeof(out), &err));
    T_EQ_STR(out, "/a/b");
    T_EQ_INT(firn_io_local_path("s3://bucket/x", out, sizeof(out), &err), FIRN_ERR_INVALID);
    T_EQ_STR(err.msg, "location \"s3://bucket/x\" is not a local path");
    T_EQ_INT(firn_io_local_path("relative/x", out, sizeof(out), &err), FIRN_ERR_INVALID);
    T_OK(firn_io_local_path("file:///a%zz", out, sizeof(out), &err));
    T_EQ_STR(out, "/a%zz");
    T_EQ_INT(firn_io_local_path("/abcdef", out, 4, &err), FIRN_ERR_TOO_LARGE);
}

T_TEST(write_read_never_overwrite)
{
    make_dir();
    firn_io *io = firn_io_local_new();
    firn_err err = {0};
    char loc[512];
    snprintf(loc, sizeof(loc), "file://%s/deep/er/data.bin", dir);
    firn_io_writer *w = NULL;
    T_OK_ERR(firn_io_create(io, loc, &w, &err), &err);
    T_OK(firn_io_write(w, "hello ", 6, &err));
    /* Not visible before close. */
    uint64_t size = 0;
    T_EQ_INT(firn_io_size(io, loc, &size, &err), FIRN_ERR_NOT_FOUND);
    T_OK(firn_io_write(w, "world", 5, &err));
    T_OK_ERR(firn_io_close(w, &size, &err), &err);
    T_EQ_UINT(size, 11);
    firn_buf b;
    firn_buf_init(&b, 1024);
    T_OK(firn_io_read(io, loc, &b, &err));
    T_EQ_STR((char *)b.data, "hello world");
    firn_buf_reset(&b);
    T_OK(firn_io_read_range(io, loc, 6, 5, &b, &err));
    T_EQ_STR((char *)b.data, "world");
    firn_buf_reset(&b);
    T_EQ_INT(firn_io_read_range(io, loc, 6, 50, &b, &err), FIRN_ERR_IO);
    /* A second object at the same location is refused and the first stays. */
    T_EQ_INT(firn_io_write_all(io, loc, "other", 5, &err), FIRN_ERR_EXISTS);
    firn_buf_reset(&b);
    T_OK(firn_io_read(io, loc, &b, &err));
    T_EQ_STR((char *)b.data, "hello world");
    /* An aborted writer leaves nothing. */
    char loc2[512];
    snprintf(loc2, sizeof(loc2), "%s/aborted.bin", dir);
    T_OK(firn_io_create(io, loc2, &w, &err));
    T_OK(firn_io_write(w, "x", 1, &err));
    firn_io_abort(w);
    T_EQ_INT(firn_io_size(io, loc2, &size, &err), FIRN_ERR_NOT_FOUND);
    T_OK(firn_io_remove(io, loc, &err));
    T_EQ_INT(firn_io_remove(io, loc, &err), FIRN_ERR_NOT_FOUND);
    firn_buf_deinit(&b);
    firn_io_free(io);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    T_EQ_INT(system(cmd), 0);
}

T_MAIN(T_CASE(location_forms), T_CASE(write_read_never_overwrite))
