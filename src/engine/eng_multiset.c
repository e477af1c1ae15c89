/* SPDX-License-Identifier: Apache-2.0 */
/* Tables without a usable key and with REPLICA IDENTITY FULL (docs/configuration.md "Tables
 * without a primary key"): the table is a multiset of rows, and an UPDATE or DELETE removes
 * exactly one copy of its old image. The key index holds each copy under its own key: the row's
 * encoding over every source column followed by an occurrence number, 0 .. n - 1 for the n
 * copies of that row. A copy added takes number n; a copy removed is number n - 1, deleted by
 * position. Identical copies are indistinguishable, so removing any one of them is exact. */
#include "engine_int.h"

#include <string.h>

void firn__multiset_open(firn__table *t, bool exists)
{
    const char *mode = exists ? firn_props_get(&t->cat.metadata->properties, "firn.mode") : NULL;
    const char *why = NULL;
    char col[160] = "";
    if (mode && strcmp(mode, "append") == 0)
        why = "it was created in append mode, whose rows include deletes";
    t->n_key = 0;
    for (size_t i = 0; !why && i < t->pg->n_columns; i++) {
        const firn_field *f = t->schema->children[i];
        if (f->n_children > 0 || f->type == FIRN_TYPE_STRUCT || f->type == FIRN_TYPE_LIST ||
            f->type == FIRN_TYPE_MAP || t->n_key == 32) {
            snprintf(col, sizeof(col), "column \"%s\" is nested or past 32 columns", f->name);
            why = col;
            break;
        }
        t->key_cols[t->n_key++] = (uint32_t)i;
    }
    if (!why && t->n_key == 0)
        why = "it has no columns";
    if (!why)
        return;
    FIRN_LOG(FIRN_LOG_WARN, "engine",
             "table \"%s\" has no primary key and REPLICA IDENTITY FULL, but %s: written in "
             "append mode, where an UPDATE or DELETE adds a row (set primary_key in the streams "
             "file, or drop the Iceberg table and sync again, for exact updates)",
             t->display, why);
    t->multiset = false;
    t->upsert = false;
    t->soft_delete = false;
    t->n_key = 0;
}

/* The index key of occurrence k of the row encoded as row[0..len). */
static firn__pkkey
occ_key(const firn__table *t, const uint8_t *row, size_t len, uint32_t k, firn_buf *scratch)
{
    firn_buf_reset(scratch);
    firn_rc rc = firn_buf_append(scratch, row, len);
    if (rc == FIRN_OK)
        rc = firn_wr_le32(scratch, k);
    FIRN_ASSERT(rc == FIRN_OK); /* bounded by the fold's key limit plus 4 bytes */
    return firn__pkindex_key(t->index, scratch->data, scratch->len);
}

/* Number of copies of the row the index holds (occurrences 0 .. n - 1 are present). */
static firn_rc count_copies(
    firn__table *t, const uint8_t *row, size_t len, firn_buf *scratch, uint32_t *out, firn_err *err)
{
    uint32_t n = 0;
    for (;;) {
        firn__pkkey k = occ_key(t, row, len, n, scratch);
        firn__pkloc loc;
        bool found = false;
        FIRN_TRY(firn__pkindex_lookup(t->index, &k, 1, &loc, &found, err));
        if (!found)
            break;
        n++;
    }
    *out = n;
    return FIRN_OK;
}

firn_rc
firn__multiset_add(firn__table *t, const uint8_t *row, size_t len, firn__pkloc loc, firn_err *err)
{
    firn_buf scratch;
    firn_buf_init(&scratch, (size_t)UINT32_MAX + 8);
    uint32_t n = 0;
    firn_rc rc = count_copies(t, row, len, &scratch, &n, err);
    if (rc == FIRN_OK)
        rc = firn__pkindex_set(t->index, occ_key(t, row, len, n, &scratch), loc, false, err);
    firn_buf_deinit(&scratch);
    return rc;
}

firn_rc firn__multiset_fold(const firn__table *t, firn__fold *out, firn_err *err)
{
    const firn_batch *b = t->buf;
    size_t rows = firn_batch_rows(b);
    memset(out, 0, sizeof(*out));
    firn_buf all;
    firn_buf_init(&all, UINT32_MAX);
    uint32_t *offsets = firn_calloc(rows + 1, sizeof(uint32_t));
    uint32_t *row_key = firn_calloc(rows ? rows : 1, sizeof(uint32_t));
    int64_t *net = firn_calloc(rows ? rows : 1, sizeof(int64_t));
    uint32_t *first = firn_calloc(rows ? rows : 1, sizeof(uint32_t)); /* a row of each key */
    firn__keymap *m = firn__keymap_new();
    size_t n_distinct = 0;
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; i < rows && rc == FIRN_OK; i++) {
        if (firn_batch_key_encode(b, i, t->key_cols, t->n_key, &all) || all.len > UINT32_MAX) {
            rc = firn_err_set(err, FIRN_ERR_TOO_LARGE, "rows of one flush exceed %zu bytes",
                              (size_t)UINT32_MAX);
            break;
        }
        offsets[i + 1] = (uint32_t)all.len;
        const uint8_t *key = all.data + offsets[i];
        size_t len = offsets[i + 1] - offsets[i];
        firn__pkloc v;
        if (!firn__keymap_get(m, key, len, &v)) {
            v = (firn__pkloc){(uint32_t)n_distinct, 0};
            first[n_distinct++] = (uint32_t)i;
            firn__keymap_put(m, key, len, v);
        }
        row_key[i] = v.file;
        net[v.file] += firn_batch_op(b, i) == FIRN_OP_DELETE ? -1 : 1;
    }
    if (rc == FIRN_OK) {
        /* Keys whose copies change, numbered in order; the rows written for a key that gains
         * copies are its last `net` images (metadata columns may differ between them). */
        uint32_t *slot = firn_calloc(n_distinct ? n_distinct : 1, sizeof(uint32_t));
        int64_t *left = firn_calloc(n_distinct ? n_distinct : 1, sizeof(int64_t));
        firn_buf_init(&out->keys, UINT32_MAX);
        out->key_offsets = firn_calloc(n_distinct + 1, sizeof(uint32_t));
        out->net = firn_calloc(n_distinct ? n_distinct : 1, sizeof(int64_t));
        for (size_t d = 0; d < n_distinct; d++) {
            slot[d] = UINT32_MAX;
            if (net[d] == 0)
                continue;
            slot[d] = (uint32_t)out->n_keys;
            out->net[out->n_keys] = net[d];
            uint32_t r = first[d];
            rc = firn_buf_append(&out->keys, all.data + offsets[r], offsets[r + 1] - offsets[r]);
            FIRN_ASSERT(rc == FIRN_OK); /* bounded by the same limit as `all` */
            out->key_offsets[++out->n_keys] = (uint32_t)out->keys.len;
            left[d] = net[d] > 0 ? net[d] : 0;
        }
        out->upsert_rows = firn_calloc(rows ? rows : 1, sizeof(uint32_t));
        out->upsert_key = firn_calloc(rows ? rows : 1, sizeof(uint32_t));
        for (size_t i = rows; i-- > 0;) {
            uint32_t d = row_key[i];
            if (firn_batch_op(b, i) == FIRN_OP_DELETE || left[d] == 0)
                continue;
            left[d]--;
            out->upsert_rows[out->n_upserts] = (uint32_t)i;
            out->upsert_key[out->n_upserts++] = slot[d];
        }
        for (size_t i = 0, j = out->n_upserts; i + 1 < j; i++, j--) { /* arrival order */
            uint32_t r = out->upsert_rows[i], k = out->upsert_key[i];
            out->upsert_rows[i] = out->upsert_rows[j - 1];
            out->upsert_key[i] = out->upsert_key[j - 1];
            out->upsert_rows[j - 1] = r;
            out->upsert_key[j - 1] = k;
        }
        firn_free(slot);
        firn_free(left);
    }
    firn__keymap_free(m);
    firn_free(first);
    firn_free(net);
    firn_free(row_key);
    firn_free(offsets);
    firn_buf_deinit(&all);
    if (rc)
        firn__fold_free(out);
    return rc;
}

firn_rc firn__multiset_deletes(firn__table *t, const firn__fold *f, firn__msdel *out, firn_err *err)
{
    size_t n = f->n_keys ? f->n_keys : 1;
    out->count = firn_calloc(n, sizeof(uint32_t));
    out->keep = firn_calloc(n, sizeof(uint32_t));
    out->dels = firn_calloc(n, sizeof(*out->dels));
    out->n_dels = 0;
    out->missing = 0;
    size_t cap = n;
    firn_buf scratch;
    firn_buf_init(&scratch, (size_t)UINT32_MAX + 8);
    firn_rc rc = FIRN_OK;
    for (size_t k = 0; k < f->n_keys && rc == FIRN_OK; k++) {
        const uint8_t *row = f->keys.data + f->key_offsets[k];
        size_t len = f->key_offsets[k + 1] - f->key_offsets[k];
        rc = count_copies(t, row, len, &scratch, &out->count[k], err);
        uint32_t j = out->count[k];
        int64_t need = f->net[k] < 0 ? -f->net[k] : 0;
        /* Pop copies from the top: one whose row is already deleted or whose file is gone (an
         * index caught up from an older snapshot keeps such entries) is dropped as well. */
        while (rc == FIRN_OK && need > 0 && j > 0) {
            j--;
            firn__pkkey key = occ_key(t, row, len, j, &scratch);
            firn__pkloc loc;
            bool found = false;
            rc = firn__pkindex_lookup(t->index, &key, 1, &loc, &found, err);
            FIRN_ASSERT(rc || found);
            const firn__dvfile *dv = rc == FIRN_OK ? &t->dv_files[loc.file] : NULL;
            if (!dv || dv->gone || (dv->dead && firn_bitmap64_contains(dv->dead, loc.pos)))
                continue;
            if (out->n_dels == cap) {
                cap *= 2;
                out->dels = firn_reallocarray(out->dels, cap, sizeof(*out->dels));
            }
            firn__posdel *d = &out->dels[out->n_dels++];
            memset(d, 0, sizeof(*d));
            d->path = firn__pkindex_file(t->index, loc.file);
            d->pos = loc.pos;
            d->group = loc.file;
            d->ord = loc.file;
            need--;
        }
        out->keep[k] = j;
        out->missing += (uint64_t)need;
    }
    firn_buf_deinit(&scratch);
    if (rc == FIRN_OK && out->missing > 0)
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "table \"%s\": %llu deletes of rows without a primary key found no copy of their "
                 "old row in the table (it was changed by another writer, or the source "
                 "replayed a change): nothing removed for them",
                 t->display, (unsigned long long)out->missing);
    return rc;
}

firn_rc firn__multiset_update(firn__table *t,
                              const firn__fold *f,
                              const firn__msdel *d,
                              const firn__pkloc *locs,
                              firn_err *err)
{
    firn_buf scratch;
    firn_buf_init(&scratch, (size_t)UINT32_MAX + 8);
    uint32_t *next = firn_calloc(f->n_keys ? f->n_keys : 1, sizeof(uint32_t));
    firn_rc rc = FIRN_OK;
    for (size_t k = 0; k < f->n_keys && rc == FIRN_OK; k++) {
        const uint8_t *row = f->keys.data + f->key_offsets[k];
        size_t len = f->key_offsets[k + 1] - f->key_offsets[k];
        next[k] = d->count[k];
        for (uint32_t j = d->keep[k]; j < d->count[k] && f->net[k] < 0 && rc == FIRN_OK; j++)
            rc = firn__pkindex_unset(t->index, occ_key(t, row, len, j, &scratch), true, err);
    }
    for (size_t i = 0; i < f->n_upserts && rc == FIRN_OK; i++) {
        uint32_t k = f->upsert_key[i];
        const uint8_t *row = f->keys.data + f->key_offsets[k];
        size_t len = f->key_offsets[k + 1] - f->key_offsets[k];
        rc = firn__pkindex_set(t->index, occ_key(t, row, len, next[k]++, &scratch), locs[i], false,
                               err);
    }
    firn_free(next);
    firn_buf_deinit(&scratch);
    return rc;
}

void firn__msdel_free(firn__msdel *d)
{
    firn_free(d->count);
    firn_free(d->keep);
    firn_free(d->dels);
    memset(d, 0, sizeof(*d));
}
