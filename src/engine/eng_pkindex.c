/* SPDX-License-Identifier: Apache-2.0 */
/* In-memory primary-key index: open addressing over 64-bit key hashes, full keys kept in one
 * growing byte arena so lookups are exact. */
#include "engine_int.h"

#include <string.h>

#define PKINDEX_KEYS_MAX ((size_t)1 << 40)

typedef struct slot {
    uint64_t hash;    /* 0 = empty; hashes are forced non-zero */
    uint64_t key_off; /* into keys; UINT64_MAX = tombstone */
    uint32_t key_len;
    firn__pkloc loc;
} slot;

struct firn__pkindex {
    slot *slots;
    size_t cap;  /* power of two */
    size_t used; /* live + tombstones */
    size_t live;
    firn_buf keys;
    char **files;
    uint32_t n_files;
    uint32_t files_cap;
};

#define TOMBSTONE UINT64_MAX

static uint64_t key_hash(const uint8_t *key, size_t len)
{
    uint64_t h = firn_key_hash(key, len);
    return h ? h : 1;
}

firn__pkindex *firn__pkindex_new(void)
{
    firn__pkindex *idx = firn_calloc(1, sizeof(*idx));
    idx->cap = 1024;
    idx->slots = firn_calloc(idx->cap, sizeof(slot));
    firn_buf_init(&idx->keys, PKINDEX_KEYS_MAX);
    return idx;
}

void firn__pkindex_free(firn__pkindex *idx)
{
    if (!idx)
        return;
    for (uint32_t i = 0; i < idx->n_files; i++)
        firn_free(idx->files[i]);
    firn_free(idx->files);
    firn_free(idx->slots);
    firn_buf_deinit(&idx->keys);
    firn_free(idx);
}

size_t firn__pkindex_count(const firn__pkindex *idx)
{
    return idx->live;
}

uint32_t firn__pkindex_add_file(firn__pkindex *idx, const char *location)
{
    if (idx->n_files == idx->files_cap) {
        idx->files_cap = idx->files_cap ? idx->files_cap * 2 : 16;
        idx->files = firn_reallocarray(idx->files, idx->files_cap, sizeof(char *));
    }
    idx->files[idx->n_files] = firn_strdup(location);
    return idx->n_files++;
}

const char *firn__pkindex_file(const firn__pkindex *idx, uint32_t file)
{
    return file < idx->n_files ? idx->files[file] : NULL;
}

uint32_t firn__pkindex_files(const firn__pkindex *idx)
{
    return idx->n_files;
}

static bool
slot_matches(const firn__pkindex *idx, const slot *s, uint64_t h, const uint8_t *key, size_t len)
{
    return s->hash == h && s->key_off != TOMBSTONE && s->key_len == len &&
           memcmp(idx->keys.data + s->key_off, key, len) == 0;
}

/* Returns the slot holding key, or NULL. */
static slot *find(const firn__pkindex *idx, const uint8_t *key, size_t len, uint64_t h)
{
    size_t mask = idx->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        slot *s = &idx->slots[i];
        if (s->hash == 0)
            return NULL;
        if (slot_matches(idx, s, h, key, len))
            return s;
    }
}

static void grow(firn__pkindex *idx)
{
    slot *old = idx->slots;
    size_t old_cap = idx->cap;
    /* Rehash into a table twice the live size (tombstones vanish). */
    while (idx->cap < (idx->live + 1) * 4)
        idx->cap *= 2;
    idx->slots = firn_calloc(idx->cap, sizeof(slot));
    idx->used = 0;
    /* Live keys move to a fresh arena, dropping the bytes of removed keys. */
    firn_buf keys;
    firn_buf_init(&keys, PKINDEX_KEYS_MAX);
    size_t mask = idx->cap - 1;
    for (size_t k = 0; k < old_cap; k++) {
        if (old[k].hash == 0 || old[k].key_off == TOMBSTONE)
            continue;
        size_t i = old[k].hash & mask;
        while (idx->slots[i].hash != 0)
            i = (i + 1) & mask;
        idx->slots[i] = old[k];
        idx->slots[i].key_off = keys.len;
        firn_rc rc = firn_buf_append(&keys, idx->keys.data + old[k].key_off, old[k].key_len);
        FIRN_ASSERT(rc == FIRN_OK);
        idx->used++;
    }
    firn_buf_deinit(&idx->keys);
    idx->keys = keys;
    firn_free(old);
}

bool firn__pkindex_get(const firn__pkindex *idx, const uint8_t *key, size_t len, firn__pkloc *out)
{
    const slot *s = find(idx, key, len, key_hash(key, len));
    if (!s)
        return false;
    *out = s->loc;
    return true;
}

void firn__pkindex_put(firn__pkindex *idx, const uint8_t *key, size_t len, firn__pkloc loc)
{
    FIRN_ASSERT(len <= UINT32_MAX);
    uint64_t h = key_hash(key, len);
    slot *s = find(idx, key, len, h);
    if (s) {
        s->loc = loc;
        return;
    }
    if ((idx->used + 1) * 10 > idx->cap * 7)
        grow(idx);
    size_t mask = idx->cap - 1;
    size_t i = h & mask;
    while (idx->slots[i].hash != 0)
        i = (i + 1) & mask;
    slot ns = {h, idx->keys.len, (uint32_t)len, loc};
    firn_rc rc = firn_buf_append(&idx->keys, key, len);
    FIRN_ASSERT(rc == FIRN_OK);
    idx->slots[i] = ns;
    idx->used++;
    idx->live++;
}

bool firn__pkindex_remove(firn__pkindex *idx, const uint8_t *key, size_t len)
{
    slot *s = find(idx, key, len, key_hash(key, len));
    if (!s)
        return false;
    s->key_off = TOMBSTONE; /* the probe chain stays intact; bytes are reclaimed on rebuild */
    idx->live--;
    return true;
}
