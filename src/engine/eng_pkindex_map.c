/* SPDX-License-Identifier: Apache-2.0 */
/* An exact in-memory map of key bytes (firn__keymap): open addressing over 64-bit key hashes,
 * full keys kept in one growing byte arena so lookups are exact. For short-lived maps the size of
 * a buffer; the table-wide key index is eng_pkindex.c. */
#include "engine_int.h"

#include <string.h>

#define PKINDEX_KEYS_MAX ((size_t)1 << 40)

typedef struct slot {
    uint64_t hash;    /* 0 = empty; hashes are forced non-zero */
    uint64_t key_off; /* into keys; UINT64_MAX = tombstone */
    uint32_t key_len;
    firn__pkloc loc;
} slot;

struct firn__keymap {
    slot *slots;
    size_t cap;  /* power of two */
    size_t used; /* live + tombstones */
    size_t live;
    firn_buf keys;
};

#define TOMBSTONE UINT64_MAX

static uint64_t key_hash(const uint8_t *key, size_t len)
{
    uint64_t h = firn_key_hash(key, len);
    return h ? h : 1;
}

firn__keymap *firn__keymap_new(void)
{
    firn__keymap *m = firn_calloc(1, sizeof(*m));
    m->cap = 1024;
    m->slots = firn_calloc(m->cap, sizeof(slot));
    firn_buf_init(&m->keys, PKINDEX_KEYS_MAX);
    return m;
}

void firn__keymap_free(firn__keymap *m)
{
    if (!m)
        return;
    firn_free(m->slots);
    firn_buf_deinit(&m->keys);
    firn_free(m);
}

size_t firn__keymap_count(const firn__keymap *m)
{
    return m->live;
}

static bool
slot_matches(const firn__keymap *m, const slot *s, uint64_t h, const uint8_t *key, size_t len)
{
    return s->hash == h && s->key_off != TOMBSTONE && s->key_len == len &&
           memcmp(m->keys.data + s->key_off, key, len) == 0;
}

/* Returns the slot holding key, or NULL. */
static slot *find(const firn__keymap *m, const uint8_t *key, size_t len, uint64_t h)
{
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        slot *s = &m->slots[i];
        if (s->hash == 0)
            return NULL;
        if (slot_matches(m, s, h, key, len))
            return s;
    }
}

static void grow(firn__keymap *m)
{
    slot *old = m->slots;
    size_t old_cap = m->cap;
    /* Rehash into a table twice the live size (tombstones vanish). */
    while (m->cap < (m->live + 1) * 4)
        m->cap *= 2;
    m->slots = firn_calloc(m->cap, sizeof(slot));
    m->used = 0;
    /* Live keys move to a fresh arena, dropping the bytes of removed keys. */
    firn_buf keys;
    firn_buf_init(&keys, PKINDEX_KEYS_MAX);
    size_t mask = m->cap - 1;
    for (size_t k = 0; k < old_cap; k++) {
        if (old[k].hash == 0 || old[k].key_off == TOMBSTONE)
            continue;
        size_t i = old[k].hash & mask;
        while (m->slots[i].hash != 0)
            i = (i + 1) & mask;
        m->slots[i] = old[k];
        m->slots[i].key_off = keys.len;
        firn_rc rc = firn_buf_append(&keys, m->keys.data + old[k].key_off, old[k].key_len);
        FIRN_ASSERT(rc == FIRN_OK);
        m->used++;
    }
    firn_buf_deinit(&m->keys);
    m->keys = keys;
    firn_free(old);
}

bool firn__keymap_get(const firn__keymap *m, const uint8_t *key, size_t len, firn__pkloc *out)
{
    const slot *s = find(m, key, len, key_hash(key, len));
    if (!s)
        return false;
    *out = s->loc;
    return true;
}

void firn__keymap_put(firn__keymap *m, const uint8_t *key, size_t len, firn__pkloc loc)
{
    FIRN_ASSERT(len <= UINT32_MAX);
    uint64_t h = key_hash(key, len);
    slot *s = find(m, key, len, h);
    if (s) {
        s->loc = loc;
        return;
    }
    if ((m->used + 1) * 10 > m->cap * 7)
        grow(m);
    size_t mask = m->cap - 1;
    size_t i = h & mask;
    while (m->slots[i].hash != 0)
        i = (i + 1) & mask;
    slot ns = {h, m->keys.len, (uint32_t)len, loc};
    firn_rc rc = firn_buf_append(&m->keys, key, len);
    FIRN_ASSERT(rc == FIRN_OK);
    m->slots[i] = ns;
    m->used++;
    m->live++;
}

bool firn__keymap_remove(firn__keymap *m, const uint8_t *key, size_t len)
{
    slot *s = find(m, key, len, key_hash(key, len));
    if (!s)
        return false;
    s->key_off = TOMBSTONE; /* the probe chain stays intact; bytes are reclaimed on rebuild */
    m->live--;
    return true;
}
