/* SPDX-License-Identifier: Apache-2.0 */
/* Folding a table's buffered changes by primary key: the last change of each key wins. */
#include "engine_int.h"

#include <string.h>

/* Largest total size of the keys of one folded buffer. */
#define FOLD_KEYS_MAX ((size_t)1 << 34)

void firn__fold_free(firn__fold *f)
{
    firn_free(f->upsert_rows);
    firn_free(f->delete_rows);
    firn_free(f->key_offsets);
    firn_free(f->net);
    firn_free(f->upsert_key);
    firn_buf_deinit(&f->keys);
    memset(f, 0, sizeof(*f));
}

/* Encodes the key of every row into keys with offsets[rows + 1]. */
static firn_rc encode_keys(const firn_batch *b,
                           const uint32_t *key_cols,
                           size_t n_key_cols,
                           firn_buf *keys,
                           uint32_t *offsets,
                           firn_err *err)
{
    size_t rows = firn_batch_rows(b);
    offsets[0] = 0;
    for (size_t i = 0; i < rows; i++) {
        if (firn_batch_key_encode(b, i, key_cols, n_key_cols, keys) || keys->len > UINT32_MAX)
            return firn_err_set(err, FIRN_ERR_TOO_LARGE,
                                "primary keys of one flush exceed %zu bytes", (size_t)UINT32_MAX);
        offsets[i + 1] = (uint32_t)keys->len;
    }
    return FIRN_OK;
}

static void append_key(firn__fold *out, const firn_buf *all, const uint32_t *offsets, size_t row)
{
    firn_rc rc =
        firn_buf_append(&out->keys, all->data + offsets[row], offsets[row + 1] - offsets[row]);
    FIRN_ASSERT(rc == FIRN_OK); /* bounded by the same limit as `all` */
    out->key_offsets[++out->n_keys] = (uint32_t)out->keys.len;
}

firn_rc firn__fold_run(const firn_batch *b,
                       const uint32_t *key_cols,
                       size_t n_key_cols,
                       firn__fold *out,
                       firn_err *err)
{
    return firn__fold_run_keep(b, key_cols, n_key_cols, false, out, err);
}

firn_rc firn__fold_run_keep(const firn_batch *b,
                            const uint32_t *key_cols,
                            size_t n_key_cols,
                            bool keep_deletes,
                            firn__fold *out,
                            firn_err *err)
{
    size_t rows = firn_batch_rows(b);
    memset(out, 0, sizeof(*out));
    firn_buf_init(&out->keys, FOLD_KEYS_MAX);
    out->upsert_rows = firn_calloc(rows ? rows : 1, sizeof(uint32_t));
    out->delete_rows = firn_calloc(rows ? rows : 1, sizeof(uint32_t));
    out->key_offsets = firn_calloc(rows + 1, sizeof(uint32_t));
    firn_buf all;
    firn_buf_init(&all, UINT32_MAX);
    uint32_t *offsets = firn_calloc(rows + 1, sizeof(uint32_t));
    firn__keymap *last = firn__keymap_new();
    firn_rc rc = encode_keys(b, key_cols, n_key_cols, &all, offsets, err);
    if (rc)
        goto out;
    for (size_t i = 0; i < rows; i++) {
        firn__pkloc loc = {0, (uint32_t)i};
        firn__keymap_put(last, all.data + offsets[i], offsets[i + 1] - offsets[i], loc);
    }
    /* Pass 1: rows that are the last change of their key and not deletes (with keep_deletes,
     * deletes too: they are written as tombstone rows). */
    for (size_t pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < rows; i++) {
            firn__pkloc loc;
            bool found =
                firn__keymap_get(last, all.data + offsets[i], offsets[i + 1] - offsets[i], &loc);
            FIRN_ASSERT(found);
            if (loc.pos != i)
                continue;
            bool is_delete = firn_batch_op(b, i) == FIRN_OP_DELETE && !keep_deletes;
            if (pass == 0 && !is_delete) {
                out->upsert_rows[out->n_upserts++] = (uint32_t)i;
                append_key(out, &all, offsets, i);
            } else if (pass == 1 && is_delete) {
                out->delete_rows[out->n_deletes++] = (uint32_t)i;
                append_key(out, &all, offsets, i);
            }
        }
    }
out:
    firn__keymap_free(last);
    firn_free(offsets);
    firn_buf_deinit(&all);
    if (rc)
        firn__fold_free(out);
    return rc;
}
