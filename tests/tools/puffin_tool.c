/* SPDX-License-Identifier: Apache-2.0 */
/* Test tool for tests/interop/test_dv_puffin.py.
 *   puffin_tool write <out.puffin> <spec.json>   spec: [{"file": "<data file>", "positions":
 *                                                [..], "ranges": [[lo, hi), ..]}, ..]; writes one
 *                                                Puffin file with a DV per entry and prints the
 *                                                blobs as JSON lines {file, offset, length,
 *                                                cardinality}
 *   puffin_tool read <in.puffin>                 prints firn's reading of each DV blob as a JSON
 *                                                line {file, offset, length, cardinality,
 *                                                positions} */
#include "firn/io.h"
#include "firn/puffin.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

static int fail(const char *what, const firn_err *err)
{
    fprintf(stderr, "puffin_tool: %s: %s\n", what, err ? err->msg : "failed");
    return 1;
}

static firn_bitmap64 *bitmap_of(json_t *entry)
{
    firn_bitmap64 *b = firn_bitmap64_new();
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(entry, "positions"), i, v)
        firn_bitmap64_add(b, (uint64_t)json_integer_value(v));
    json_array_foreach(json_object_get(entry, "ranges"), i, v)
        firn_bitmap64_add_range(b, (uint64_t)json_integer_value(json_array_get(v, 0)),
                                (uint64_t)json_integer_value(json_array_get(v, 1)));
    return b;
}

static int cmd_write(const char *out_path, const char *spec_path)
{
    json_error_t jerr;
    json_t *spec = json_load_file(spec_path, 0, &jerr);
    if (!json_is_array(spec)) {
        fprintf(stderr, "puffin_tool: cannot read spec \"%s\": %s\n", spec_path, jerr.text);
        return 1;
    }
    firn_puffin_writer *w = firn_puffin_writer_new("firn-test puffin_tool");
    firn_err err = {0};
    size_t i;
    json_t *entry;
    int rc = 0;
    json_array_foreach(spec, i, entry)
    {
        firn_bitmap64 *b = bitmap_of(entry);
        int64_t off = 0, len = 0;
        const char *file = json_string_value(json_object_get(entry, "file"));
        if (firn_puffin_writer_add_dv(w, file, b, &off, &len, &err))
            rc = fail("add_dv", &err);
        else
            printf("{\"file\": \"%s\", \"offset\": %" PRId64 ", \"length\": %" PRId64
                   ", \"cardinality\": %" PRIu64 "}\n",
                   file, off, len, firn_bitmap64_cardinality(b));
        firn_bitmap64_free(b);
    }
    firn_buf bytes;
    firn_buf_init(&bytes, FIRN_PUFFIN_MAX_BYTES);
    firn_io *io = firn_io_local_new();
    if (!rc && firn_puffin_writer_finish(w, &bytes, &err))
        rc = fail("finish", &err);
    if (!rc && firn_io_write_all(io, out_path, bytes.data, bytes.len, &err))
        rc = fail("write", &err);
    firn_io_free(io);
    firn_buf_deinit(&bytes);
    firn_puffin_writer_free(w);
    json_decref(spec);
    return rc;
}

static bool print_pos(void *ctx, uint64_t pos)
{
    bool *first = ctx;
    printf("%s%" PRIu64, *first ? "" : ", ", pos);
    *first = false;
    return true;
}

static int cmd_read(const char *path)
{
    firn_io *io = firn_io_local_new();
    firn_buf bytes;
    firn_buf_init(&bytes, FIRN_PUFFIN_MAX_BYTES);
    firn_err err = {0};
    firn_puffin_footer f = {0};
    int rc = 0;
    if (firn_io_read(io, path, &bytes, &err) ||
        firn_puffin_footer_parse(bytes.data, bytes.len, &f, &err))
        rc = fail("read", &err);
    for (size_t i = 0; !rc && i < f.n_blobs; i++) {
        const firn_puffin_blob *blob = &f.blobs[i];
        firn_bitmap64 *b = NULL;
        if (firn_dv_decode(bytes.data + blob->offset, (size_t)blob->length, &b, &err)) {
            rc = fail("decode", &err);
            break;
        }
        printf("{\"file\": \"%s\", \"offset\": %" PRId64 ", \"length\": %" PRId64
               ", \"cardinality\": %" PRIu64 ", \"positions\": [",
               blob->referenced_data_file ? blob->referenced_data_file : "", blob->offset,
               blob->length, firn_bitmap64_cardinality(b));
        bool first = true;
        firn_bitmap64_foreach(b, print_pos, &first);
        printf("]}\n");
        firn_bitmap64_free(b);
    }
    firn_puffin_footer_deinit(&f);
    firn_buf_deinit(&bytes);
    firn_io_free(io);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "write") == 0)
        return cmd_write(argv[2], argv[3]);
    if (argc == 3 && strcmp(argv[1], "read") == 0)
        return cmd_read(argv[2]);
    fprintf(stderr, "usage: puffin_tool write <out.puffin> <spec.json> | read <in.puffin>\n");
    return 2;
}
