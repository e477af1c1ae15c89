/* SPDX-License-Identifier: Apache-2.0 */
/* The exact in-memory key map and folding of changes by key. */
#include "engine/engine_int.h"
#include "t.h"

T_TEST(keymap_put_get_remove_grow)
{
    firn__keymap *idx = firn__keymap_new();
    const uint32_t n = 200000;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t k = (uint64_t)i * 7919;
        firn__pkloc loc = {i % 2, i};
        firn__keymap_put(idx, (const uint8_t *)&k, sizeof(k), loc);
    }
    T_EQ_UINT(firn__keymap_count(idx), n);
    for (uint32_t i = 0; i < n; i += 2) {
        uint64_t k = (uint64_t)i * 7919;
        T_TRUE(firn__keymap_remove(idx, (const uint8_t *)&k, sizeof(k)));
        T_FALSE(firn__keymap_remove(idx, (const uint8_t *)&k, sizeof(k)));
    }
    T_EQ_UINT(firn__keymap_count(idx), n / 2);
    /* Re-insert half of the removed keys with new locations, forcing rehashes. */
    for (uint32_t i = 0; i < n; i += 4) {
        uint64_t k = (uint64_t)i * 7919;
        firn__pkloc loc = {7, i + 1};
        firn__keymap_put(idx, (const uint8_t *)&k, sizeof(k), loc);
    }
    for (uint32_t i = 0; i < n; i++) {
        uint64_t k = (uint64_t)i * 7919;
        firn__pkloc loc = {0, 0};
        bool found = firn__keymap_get(idx, (const uint8_t *)&k, sizeof(k), &loc);
        if (i % 4 == 0) {
            T_TRUE(found);
            T_EQ_UINT(loc.file, 7);
            T_EQ_UINT(loc.pos, i + 1);
        } else if (i % 2 == 0) {
            T_FALSE(found);
        } else {
            T_TRUE(found);
            T_EQ_UINT(loc.file, i % 2);
            T_EQ_UINT(loc.pos, i);
        }
    }
    /* Same hash bucket, different lengths: exact comparison. */
    uint8_t a[3] = {1, 2, 3};
    firn__pkloc la = {1, 1};
    firn__keymap_put(idx, a, 2, la);
    firn__pkloc got;
    T_TRUE(firn__keymap_get(idx, a, 2, &got));
    T_FALSE(firn__keymap_get(idx, a, 3, &got));
    firn__keymap_free(idx);
}

static firn_field *kv_schema(void)
{
    firn_field *s = firn_field_new(0, "root", FIRN_TYPE_STRUCT, true);
    firn_field_add(s, firn_field_new(1, "id", FIRN_TYPE_LONG, true));
    firn_field_add(s, firn_field_new(2, "v", FIRN_TYPE_STRING, false));
    return s;
}

static void add_row(firn_batch *b, int64_t id, const char *v, firn_op op)
{
    firn_column_append_i64(firn_batch_column(b, 0), id);
    if (v)
        firn_column_append_bytes(firn_batch_column(b, 1), v, strlen(v));
    else
        firn_column_append_null(firn_batch_column(b, 1));
    firn_err err = {0};
    T_OK(firn_batch_end_row(b, op, 1, &err));
}

T_TEST(fold_last_change_wins)
{
    firn_field *s = kv_schema();
    firn_batch *b = firn_batch_new(s);
    add_row(b, 1, "a", FIRN_OP_INSERT);  /* 0 */
    add_row(b, 2, "b", FIRN_OP_INSERT);  /* 1 */
    add_row(b, 1, "a2", FIRN_OP_UPDATE); /* 2: id 1 final */
    add_row(b, 3, NULL, FIRN_OP_DELETE); /* 3: id 3 deleted */
    add_row(b, 2, NULL, FIRN_OP_DELETE); /* 4 */
    add_row(b, 2, "b3", FIRN_OP_INSERT); /* 5: id 2 re-inserted, final */
    add_row(b, 4, "d", FIRN_OP_INSERT);  /* 6 */
    add_row(b, 4, NULL, FIRN_OP_DELETE); /* 7: id 4 deleted */
    static const uint32_t key[] = {0};
    firn__fold f;
    firn_err err = {0};
    T_OK_ERR(firn__fold_run(b, key, 1, &f, &err), &err);
    T_EQ_UINT(f.n_upserts, 2);
    T_EQ_UINT(f.upsert_rows[0], 2);
    T_EQ_UINT(f.upsert_rows[1], 5);
    T_EQ_UINT(f.n_deletes, 2);
    T_EQ_UINT(f.delete_rows[0], 3); /* the last change of each deleted key (its key columns) */
    T_EQ_UINT(f.delete_rows[1], 7);
    T_EQ_UINT(f.n_keys, 4);
    /* Keys: 1, 2 (upserts) then 3, 4 (deletes); each is tag byte + 8-byte id. */
    static const int64_t expect[] = {1, 2, 3, 4};
    for (size_t k = 0; k < 4; k++) {
        T_EQ_UINT(f.key_offsets[k + 1] - f.key_offsets[k], 9);
        int64_t id;
        memcpy(&id, f.keys.data + f.key_offsets[k] + 1, 8);
        T_EQ_INT(id, expect[k]);
    }
    firn__fold_free(&f);
    firn_batch_free(b);
    firn_field_free(s);
}

T_TEST(fold_keep_deletes_as_tombstones)
{
    firn_field *s = kv_schema();
    firn_batch *b = firn_batch_new(s);
    add_row(b, 1, "a", FIRN_OP_INSERT);  /* 0 */
    add_row(b, 3, NULL, FIRN_OP_DELETE); /* 1: id 3's tombstone */
    add_row(b, 1, "a", FIRN_OP_DELETE);  /* 2: id 1's tombstone (full image) */
    add_row(b, 2, "b", FIRN_OP_INSERT);  /* 3 */
    static const uint32_t key[] = {0};
    firn__fold f;
    firn_err err = {0};
    T_OK_ERR(firn__fold_run_keep(b, key, 1, true, &f, &err), &err);
    T_EQ_UINT(f.n_upserts, 3);
    T_EQ_UINT(f.n_deletes, 0);
    T_EQ_UINT(f.n_keys, 3);
    T_EQ_UINT(f.upsert_rows[0], 1);
    T_EQ_UINT(f.upsert_rows[1], 2);
    T_EQ_UINT(f.upsert_rows[2], 3);
    firn__fold_free(&f);
    firn_batch_free(b);
    firn_field_free(s);
}

T_TEST(fold_empty)
{
    firn_field *s = kv_schema();
    firn_batch *b = firn_batch_new(s);
    static const uint32_t key[] = {0};
    firn__fold f;
    T_OK(firn__fold_run(b, key, 1, &f, NULL));
    T_EQ_UINT(f.n_upserts, 0);
    T_EQ_UINT(f.n_keys, 0);
    firn__fold_free(&f);
    firn_batch_free(b);
    firn_field_free(s);
}

T_MAIN(T_CASE(keymap_put_get_remove_grow),
       T_CASE(fold_last_change_wins),
       T_CASE(fold_keep_deletes_as_tombstones),
       T_CASE(fold_empty))
