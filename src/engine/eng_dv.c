/* SPDX-License-Identifier: Apache-2.0 */
/* Deletion vectors of format-v3 tables (DELETES.md §0, §4, §5.1): per commit one Puffin file with
 * one DV per touched data file (one Puffin file per DV when DuckDB reads the table, see
 * firn__dv_puffin_per_vector), each merging the file's earlier DV and position deletes, which
 * the commit removes; the deleted rows of every data file stay in memory with the location of
 * its live DV. */
#include "engine_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void firn__dv_files_free(firn__dvfile *dvs, size_t n)
{
    if (!dvs)
        return;
    for (size_t i = 0; i < n; i++) {
        firn_bitmap64_free(dvs[i].dead);
        firn_free(dvs[i].dv_path);
    }
    firn_free(dvs);
}

void firn__dv_batch_free(firn__dv_batch *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->n; i++)
        firn_bitmap64_free(b->dead ? b->dead[i] : NULL);
    firn_free(b->dead);
    firn_free(b->ords);
    firn_free(b->replaces);
    memset(b, 0, sizeof(*b));
}

static int posdel_by_file(const void *a, const void *b)
{
    const firn__posdel *x = a, *y = b;
    if (x->group != y->group)
        return x->group < y->group ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* The merged bitmaps: one per touched file ordinal, in ordinal order. */
static void merge_dead(firn__table *t, const firn__posdel *dels, size_t n, firn__dv_batch *b)
{
    firn__posdel *sorted = firn_memdup(dels, n * sizeof(*dels));
    qsort(sorted, n, sizeof(*sorted), posdel_by_file);
    b->ords = firn_calloc(n, sizeof(uint32_t));
    b->dead = firn_calloc(n, sizeof(firn_bitmap64 *));
    b->replaces = firn_calloc(n, sizeof(firn_dv_replace));
    for (size_t i = 0; i < n;) {
        uint32_t ord = sorted[i].group;
        FIRN_ASSERT(ord < t->n_files);
        const firn__dvfile *cur = &t->dv_files[ord];
        firn_bitmap64 *dead = firn_bitmap64_new();
        if (cur->dead)
            firn_bitmap64_or(dead, cur->dead);
        for (; i < n && sorted[i].group == ord; i++)
            firn_bitmap64_add(dead, (uint64_t)sorted[i].pos);
        if (cur->dv_path)
            b->replaces[b->n_replaces++] =
                (firn_dv_replace){t->files[ord].file_path, cur->dv_path, cur->dv_offset};
        b->ords[b->n] = ord;
        b->dead[b->n++] = dead;
    }
    firn_free(sorted);
}

static firn_rc puffin_location(const firn__write_ctx *w, char *out, size_t cap, firn_err *err)
{
    uint8_t u[16];
    char id[37];
    firn_uuid_v4(u);
    firn_uuid_format(u, id);
    int n = snprintf(out, cap, "%s/%s-dvs.puffin", w->data_location, id);
    if (n < 0 || (size_t)n >= cap)
        return firn_err_set(err, FIRN_ERR_TOO_LARGE, "data location \"%s\" is too long",
                            w->data_location);
    return FIRN_OK;
}

bool firn__dv_puffin_per_vector(const firn__table *t)
{
    uint32_t readers = t->eng->cfg->destination.readers;
    return readers == 0 || (readers & FIRN_READER_DUCKDB) != 0;
}

/* Writes the DVs out->dead[from..to) into one Puffin file and appends their entries. */
static firn_rc write_puffin(firn__table *t,
                            const firn__write_ctx *w,
                            firn__dv_batch *out,
                            size_t from,
                            size_t to,
                            firn_data_file **files,
                            size_t *n_files,
                            firn_err *err)
{
    char path[4096];
    char created_by[64];
    snprintf(created_by, sizeof(created_by), "firn %s", FIRN_VERSION);
    firn_puffin_writer *pw = firn_puffin_writer_new(created_by);
    int64_t *offsets = firn_calloc(to - from, sizeof(int64_t));
    int64_t *lengths = firn_calloc(to - from, sizeof(int64_t));
    firn_buf bytes;
    firn_buf_init(&bytes, FIRN_PUFFIN_MAX_BYTES);
    firn_rc rc = puffin_location(w, path, sizeof(path), err);
    for (size_t k = from; rc == FIRN_OK && k < to; k++)
        rc = firn_puffin_writer_add_dv(pw, t->files[out->ords[k]].file_path, out->dead[k],
                                       &offsets[k - from], &lengths[k - from], err);
    if (rc == FIRN_OK)
        rc = firn_puffin_writer_finish(pw, &bytes, err);
    if (rc == FIRN_OK)
        rc = firn_io_write_all(w->io, path, bytes.data, bytes.len, err);
    for (size_t k = from; rc == FIRN_OK && k < to; k++) {
        const firn_data_file *df = &t->files[out->ords[k]];
        *files = firn_reallocarray(*files, *n_files + 1, sizeof(firn_data_file));
        firn_data_file *f = &(*files)[(*n_files)++];
        firn_data_file_init_dv(f, path, (int64_t)bytes.len, df->spec_id, df->file_path,
                               offsets[k - from], lengths[k - from],
                               (int64_t)firn_bitmap64_cardinality(out->dead[k]));
        if (df->n_partition)
            firn_data_file_set_partition(f, df->partition, df->n_partition);
    }
    firn_buf_deinit(&bytes);
    firn_free(lengths);
    firn_free(offsets);
    firn_puffin_writer_free(pw);
    return rc;
}

firn_rc firn__dv_write(firn__table *t,
                       const firn__write_ctx *w,
                       const firn__posdel *dels,
                       size_t n_dels,
                       firn_data_file **files,
                       size_t *n_files,
                       firn__dv_batch *out,
                       firn_err *err)
{
    memset(out, 0, sizeof(*out));
    if (n_dels == 0)
        return FIRN_OK;
    merge_dead(t, dels, n_dels, out);
    if (!firn__dv_puffin_per_vector(t))
        return write_puffin(t, w, out, 0, out->n, files, n_files, err);
    firn_rc rc = FIRN_OK;
    for (size_t k = 0; rc == FIRN_OK && k < out->n; k++)
        rc = write_puffin(t, w, out, k, k + 1, files, n_files, err);
    return rc;
}

void firn__dv_commit_done(firn__table *t, const firn_data_file *dvs, firn__dv_batch *b)
{
    for (size_t k = 0; k < b->n; k++) {
        firn__dvfile *cur = &t->dv_files[b->ords[k]];
        firn_bitmap64_free(cur->dead);
        cur->dead = b->dead[k];
        b->dead[k] = NULL;
        firn_free(cur->dv_path);
        cur->dv_path = firn_strdup(dvs[k].file_path);
        cur->dv_offset = dvs[k].content_offset;
        cur->dv_size = dvs[k].content_size_in_bytes;
    }
}

firn_rc firn__dv_load(firn__table *t, const firn_data_file *dv, firn_bitmap64 **out, firn_err *err)
{
    if (!dv->has_content_offset || dv->content_offset < 0 || dv->content_size_in_bytes < 12 ||
        !dv->referenced_data_file)
        return firn_err_set(err, FIRN_ERR_PARSE,
                            "deletion vector in \"%s\" lacks its offset, size or data file",
                            dv->file_path);
    firn_buf blob;
    firn_buf_init(&blob, FIRN_PUFFIN_MAX_BYTES);
    firn_rc rc = firn_io_read_range(t->eng->io, dv->file_path, (uint64_t)dv->content_offset,
                                    (size_t)dv->content_size_in_bytes, &blob, err);
    if (rc == FIRN_OK && blob.len != (size_t)dv->content_size_in_bytes)
        rc = firn_err_set(err, FIRN_ERR_PARSE, "deletion vector in \"%s\" is truncated",
                          dv->file_path);
    if (rc == FIRN_OK)
        rc = firn_dv_decode(blob.data, blob.len, out, err);
    if (rc == FIRN_OK && (int64_t)firn_bitmap64_cardinality(*out) != dv->record_count) {
        rc = firn_err_set(err, FIRN_ERR_PARSE,
                          "deletion vector of \"%s\" holds %llu rows, its manifest says %lld",
                          dv->referenced_data_file,
                          (unsigned long long)firn_bitmap64_cardinality(*out),
                          (long long)dv->record_count);
        firn_bitmap64_free(*out);
        *out = NULL;
    }
    if (rc)
        firn_err_context(err, "while reading the deletion vector of \"%s\" in \"%s\"",
                         dv->referenced_data_file, dv->file_path);
    firn_buf_deinit(&blob);
    return rc;
}
