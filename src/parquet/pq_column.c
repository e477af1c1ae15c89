/* SPDX-License-Identifier: Apache-2.0 */
/* Column chunk writer: shreds batch columns into levels and values, encodes values with a
 * dictionary (open addressing) that falls back to PLAIN past a size limit, cuts data pages v1 by
 * bytes and rows, compresses them and keeps chunk statistics (parquet-format Encodings.md). */
#include "pq_int.h"

#include <math.h>
#include <string.h>

#define STEP_VALUES     4096 /* values encoded between page-size checks */
#define DICT_INIT_BYTES 4096 /* slot table of a new or emptied dictionary */
#define BUF_MAX         ((size_t)1 << 40)
/* Bytes kept free in front of a page's PLAIN values (pq_colw.plain) for its levels: the levels
 * of a page without nulls (4-byte length, varint, value) or with a few null runs go there, and
 * the page is compressed from the PLAIN buffer in place instead of from a copy. */
#define LEVELS_ROOM 32

/* Slots of the dictionaries of 4- and 8-byte values (int32, int64, float, double): the value's
 * bits next to its id + 1 (0 = empty), so that a probe reads one cache line instead of a slot
 * and then the entry it names. Bytes and FLBA dictionaries have slots of only the id + 1. */
typedef struct slot4 {
    uint32_t key;
    uint32_t id1;
} slot4;
typedef struct slot8 {
    uint64_t key;
    uint32_t id1;
    uint32_t pad;
} slot8;

static size_t kind_width(const pq_leaf *l)
{
    switch (l->kind) {
    case PQK_BOOL:
        return 1;
    case PQK_I32:
    case PQK_I32_I64:
    case PQK_FLOAT:
        return 4;
    case PQK_I64:
    case PQK_DOUBLE:
        return 8;
    case PQK_DEC128:
    case PQK_FLBA:
        return (size_t)l->type_length;
    case PQK_BYTES:
        return 0;
    }
    return 0;
}

static size_t slot_bytes(const pq_leaf *l)
{
    switch (l->kind) {
    case PQK_I32:
    case PQK_I32_I64:
    case PQK_FLOAT:
        return sizeof(slot4);
    case PQK_I64: /* narrow first (widen_slots) */
        return sizeof(slot4);
    case PQK_DOUBLE:
        return sizeof(slot8);
    default:
        return sizeof(uint32_t);
    }
}

static void dict_alloc_slots(pq_dict *d)
{
    d->mask = DICT_INIT_BYTES / d->slot_bytes - 1;
    d->slots = firn_calloc(d->mask + 1, d->slot_bytes);
}

static void dict_init(pq_dict *d, size_t slot_size)
{
    memset(d, 0, sizeof(*d));
    d->slot_bytes = slot_size;
    dict_alloc_slots(d);
    firn_buf_init(&d->plain, BUF_MAX);
}

/* Drops the direct window (lookups then go to the keyed slots), keeping its memory. */
static void direct_clear(pq_dict *d)
{
    d->direct_base = 0;
    d->direct_span = 0;
}

static void dict_deinit(pq_dict *d)
{
    firn_free(d->slots);
    firn_free(d->direct);
    firn_free(d->offs);
    firn_free(d->lens);
    firn_free(d->hashes);
    firn_buf_deinit(&d->plain);
}

static void dict_reset(pq_dict *d)
{
    memset(d->slots, 0, (d->mask + 1) * d->slot_bytes);
    d->n = 0;
    firn_buf_reset(&d->plain);
    direct_clear(d); /* the next chunk's values may lie elsewhere; the memory stays */
}

/* Empties the page's PLAIN values, keeping LEVELS_ROOM bytes in front of them. */
static void plain_clear(pq_colw *cw)
{
    firn_buf_reset(&cw->plain);
    firn_rc rc = firn_buf_reserve(&cw->plain, LEVELS_ROOM);
    FIRN_ASSERT(rc == FIRN_OK); /* far below the buffer's maximum */
    memset(cw->plain.data, 0, LEVELS_ROOM + 1);
    cw->plain.len = LEVELS_ROOM;
}

/* Bytes of the page's PLAIN values. */
static size_t plain_bytes(const pq_colw *cw)
{
    return cw->plain.len - LEVELS_ROOM;
}

void firn__pq_colw_init(pq_colw *cw, const pq_leaf *leaf, const firn_pq_options *opts)
{
    memset(cw, 0, sizeof(*cw));
    cw->leaf = leaf;
    cw->opts = opts;
    cw->value_width = kind_width(leaf);
    firn_buf_init(&cw->plain, LEVELS_ROOM + PQ_PAGE_MAX);
    plain_clear(cw);
    firn_buf_init(&cw->pages, BUF_MAX);
    dict_init(&cw->dict, slot_bytes(leaf));
    cw->dict_on = leaf->kind != PQK_BOOL;
    firn__pq_stat_init(&cw->stat);
    firn__pq_stat_init(&cw->file_stat);
}

void firn__pq_colw_deinit(pq_colw *cw)
{
    firn_free(cw->def);
    firn_free(cw->rep);
    firn_free(cw->ids);
    firn_free(cw->vidx);
    firn_buf_deinit(&cw->plain);
    firn_buf_deinit(&cw->pages);
    dict_deinit(&cw->dict);
    firn__pq_stat_deinit(&cw->stat);
    firn__pq_stat_deinit(&cw->file_stat);
}

static void levels_reserve(pq_colw *cw, size_t n)
{
    if (cw->n_levels + n <= cw->levels_cap)
        return;
    size_t cap = cw->levels_cap ? cw->levels_cap : 1024;
    while (cap < cw->n_levels + n)
        cap *= 2;
    if (cw->leaf->max_def)
        cw->def = firn_realloc(cw->def, cap);
    if (cw->leaf->max_rep)
        cw->rep = firn_realloc(cw->rep, cap);
    cw->levels_cap = cap;
}

/* Room for n more ids after the page's n_ids, whose pending run (run_ids copies of run_id) is
 * written out first. */
static uint32_t *ids_reserve(pq_colw *cw, size_t n)
{
    if (cw->n_ids + n > cw->ids_cap) {
        size_t cap = cw->ids_cap ? cw->ids_cap : 1024;
        while (cap < cw->n_ids + n)
            cap *= 2;
        cw->ids = firn_reallocarray(cw->ids, cap, sizeof(uint32_t));
        cw->ids_cap = cap;
    }
    if (cw->run_ids) {
        uint32_t *run = cw->ids + cw->n_ids - cw->run_ids;
        const uint32_t id = cw->run_id;
        for (size_t i = 0; i < cw->run_ids; i++)
            run[i] = id;
        cw->run_ids = 0;
    }
    return cw->ids + cw->n_ids;
}

/* n > 1 ids of value id (a step of equal values) end the page: they extend its pending run,
 * or start one after writing out a run of another id. A column of one value a page (firn's
 * metadata columns in a backfill) never stores its ids: flush_page writes its run. */
static void ids_run(pq_colw *cw, uint32_t id, size_t n)
{
    if (cw->run_ids && cw->run_id != id)
        (void)ids_reserve(cw, 0);
    cw->run_id = id;
    cw->run_ids += n;
    cw->n_ids += n;
}

static void vidx_reserve(pq_colw *cw, size_t n)
{
    if (n > cw->vidx_cap) {
        size_t cap = cw->vidx_cap ? cw->vidx_cap : 1024;
        while (cap < n)
            cap *= 2;
        cw->vidx = firn_reallocarray(cw->vidx, cap, sizeof(uint32_t));
        cw->vidx_cap = cap;
    }
}

static inline uint64_t hash64(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x9E3779B97F4A7C15ull;
    return x ^ (x >> 29);
}

static inline uint64_t load64(const uint8_t *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

static inline uint64_t load32(const uint8_t *p)
{
    uint32_t w;
    memcpy(&w, p, 4);
    return w;
}

/* The n <= 8 bytes at p as one word, reading only inside them: two overlapping 4-byte loads,
 * or bytes 0, n/2 and n-1 below 4. Words of strings of the same length are equal exactly when
 * the strings are (the loads cover every byte). */
static inline uint64_t load_short(const uint8_t *p, size_t n)
{
    if (n >= 4)
        return load32(p) | load32(p + n - 4) << 32;
    if (n > 0)
        return (uint64_t)p[0] | (uint64_t)p[n >> 1] << 8 | (uint64_t)p[n - 1] << 16;
    return 0;
}

/* a and b, n bytes each, are equal; no library call below 17 bytes (short strings: codes,
 * flags, zone names). */
static inline bool bytes_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
    if (n <= 8)
        return load_short(a, n) == load_short(b, n);
    if (n <= 16)
        return load64(a) == load64(b) && load64(a + n - 8) == load64(b + n - 8);
    return memcmp(a, b, n) == 0;
}

static inline uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 0x243F6A8885A308D3ull ^ (n * 0x9E3779B97F4A7C15ull);
    if (n <= 8)
        return hash64((h ^ load_short(p, n)) * 0xC4CEB9FE1A85EC53ull);
    const uint8_t *end = p + n;
    while (end - p > 8) {
        h = (h ^ load64(p)) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        p += 8;
    }
    h = (h ^ load64(end - 8)) * 0xC4CEB9FE1A85EC53ull; /* the last 8, overlapping */
    return hash64(h);
}

/* Doubles the slot table of a bytes or FLBA dictionary (width 0: bytes, whose hashes are kept);
 * rehash reads each entry back. */
static void dict_grow(pq_dict *d, size_t width)
{
    size_t cap = (d->mask + 1) * 2;
    uint32_t *slots = firn_calloc(cap, sizeof(uint32_t));
    for (uint32_t e = 0; e < d->n; e++) {
        uint64_t h =
            width == 0 ? d->hashes[e] : hash_bytes(d->plain.data + (size_t)e * width, width);
        size_t pos = h & (cap - 1);
        while (slots[pos])
            pos = (pos + 1) & (cap - 1);
        slots[pos] = e + 1;
    }
    firn_free(d->slots);
    d->slots = slots;
    d->mask = cap - 1;
}

/* Home slot of a key in a keyed table of 2^(64 - shift) slots: Fibonacci hashing (the top bits
 * of a multiply, which consecutive keys spread evenly) of the key with its high half folded into
 * its low one, so that keys differing only in high bits (doubles of small integers) spread too. */
static inline size_t key_slot(uint64_t k, int shift)
{
    return (size_t)(((k ^ (k >> 32)) * 0x9E3779B97F4A7C15ull) >> shift);
}

static int slot_shift(const pq_dict *d)
{
    return 64 - firn__pq_bit_width(d->mask);
}

/* Doubles a keyed slot table of SLOT, moving each slot (key and id) to its new home. */
#define DEFINE_KEYED_GROW(NAME, SLOT)                                                              \
    static void NAME(pq_dict *d)                                                                   \
    {                                                                                              \
        size_t cap = (d->mask + 1) * 2;                                                            \
        const SLOT *old = d->slots;                                                                \
        SLOT *slots = firn_calloc(cap, sizeof(SLOT));                                              \
        int shift = slot_shift(d) - 1;                                                             \
        for (size_t i = 0; i <= d->mask; i++) {                                                    \
            if (!old[i].id1)                                                                       \
                continue;                                                                          \
            size_t pos = key_slot(old[i].key, shift);                                              \
            while (slots[pos].id1)                                                                 \
                pos = (pos + 1) & (cap - 1);                                                       \
            slots[pos] = old[i];                                                                   \
        }                                                                                          \
        firn_free(d->slots);                                                                       \
        d->slots = slots;                                                                          \
        d->mask = cap - 1;                                                                         \
    }

DEFINE_KEYED_GROW(grow_slot4, slot4)
DEFINE_KEYED_GROW(grow_slot8, slot8)

/* An int64 dictionary starts with narrow slots (slot4, the low half of keys that fit in 32 bits:
 * counts, cents, ids), half the memory and cache lines of slot8, until its first key that does
 * not fit: then its slots widen to slot8 in place of them, for the rest of the writer's life. */
static void widen_slots(pq_dict *d)
{
    size_t cap = d->mask + 1;
    const slot4 *old = d->slots;
    slot8 *slots = firn_calloc(cap, sizeof(slot8));
    for (size_t i = 0; i < cap; i++) {
        if (!old[i].id1)
            continue;
        uint64_t key = (uint64_t)(int64_t)(int32_t)old[i].key;
        size_t pos = key_slot(key, slot_shift(d));
        while (slots[pos].id1)
            pos = (pos + 1) & d->mask;
        slots[pos].key = key;
        slots[pos].id1 = old[i].id1;
    }
    firn_free(d->slots);
    d->slots = slots;
    d->slot_bytes = sizeof(slot8);
}

/* The load past which a keyed slot table doubles: 3/4 (a found key is ~2.5 slots of linear
 * probing away, mostly in its first slot's cache line; only new keys walk the longer runs). */
static bool slots_full(const pq_dict *d)
{
    return (size_t)d->n * 4 > (d->mask + 1) * 3;
}

static bool dict_full(const pq_colw *cw)
{
    return cw->dict.plain.len > cw->opts->dict_bytes || cw->dict.n >= (1u << 30);
}

/* ---- direct window of integer dictionaries ------------------------------------------------ */

/* Values of a direct window: at least DIRECT_MIN, at most DIRECT_MAX (256 KiB of ids), and at
 * most DIRECT_PER_ENTRY per dictionary entry (64 bytes an entry, about 4 times the keyed slots':
 * a column whose few entries lie far apart keeps only its keyed slots). */
#define DIRECT_MIN       256
#define DIRECT_MAX       ((size_t)1 << 16)
#define DIRECT_PER_ENTRY 16
#define DIRECT_NONE      UINT32_MAX /* a window slot of a value that is not an entry */

/* The value of entry e of an integer dictionary whose PLAIN values are width (4 or 8) bytes. */
static int64_t entry_int(const pq_dict *d, uint32_t e, size_t width)
{
    if (width == 4) {
        int32_t v;
        memcpy(&v, d->plain.data + (size_t)e * 4, 4);
        return v;
    }
    int64_t v;
    memcpy(&v, d->plain.data + (size_t)e * 8, 8);
    return v;
}

/* Moves the direct window to span values centred on the entries' range d->lo .. d->hi (which
 * fits in span) and fills it with every entry. */
static void direct_rebuild(pq_dict *d, size_t span, size_t width)
{
    const uint64_t range = (uint64_t)d->hi - (uint64_t)d->lo + 1;
    FIRN_ASSERT(range <= span && span <= DIRECT_MAX);
    if (span > d->direct_cap) {
        firn_free(d->direct);
        d->direct = firn_reallocarray(NULL, span, sizeof(uint32_t));
        d->direct_cap = span;
    }
    memset(d->direct, 0xFF, span * sizeof(uint32_t)); /* DIRECT_NONE */
    d->direct_base = (uint64_t)d->lo - (span - range) / 2;
    d->direct_span = span;
    for (uint32_t e = 0; e < d->n; e++) {
        const uint64_t off = (uint64_t)entry_int(d, e, width) - d->direct_base;
        FIRN_DASSERT(off < span);
        d->direct[off] = e;
    }
}

/* Records the new entry id1 - 1 (value v, PLAIN width 4 or 8 bytes) in the direct window. One
 * outside it moves the window to one at least twice as large that holds every entry, while the
 * entries' range fits in DIRECT_MAX values and the window in DIRECT_PER_ENTRY per entry; so a
 * dictionary rebuilds its window at most log2(DIRECT_MAX / DIRECT_MIN) + 1 times a chunk.
 * Otherwise the value stays in the keyed slots alone. */
static void direct_note(pq_dict *d, int64_t v, uint32_t id1, size_t width)
{
    if (d->n == 1) {
        d->lo = d->hi = v;
    } else {
        d->lo = v < d->lo ? v : d->lo;
        d->hi = v > d->hi ? v : d->hi;
    }
    const uint64_t off = (uint64_t)v - d->direct_base;
    if (off < d->direct_span) {
        d->direct[off] = id1 - 1;
        return;
    }
    const uint64_t range = (uint64_t)d->hi - (uint64_t)d->lo + 1;
    if (range == 0 || range > DIRECT_MAX) /* 0: the whole int64 range */
        return;
    size_t span = DIRECT_MIN;
    while (span < range || span < 2 * d->direct_span)
        span *= 2;
    size_t most = (size_t)d->n * DIRECT_PER_ENTRY;
    if (span > DIRECT_MAX || span > (most > DIRECT_MIN ? most : DIRECT_MIN))
        return;
    direct_rebuild(d, span, width);
}

/* ---- fixed-width numbers ------------------------------------------------------------------ */

#define NO_NAN(v) 0
#define IS_NAN(v) ((v) != (v))

/* One value v (type DST) of a dictionary loop that the direct window did not find: its id into
 * ids[i] from a probe of the slots, keyed by KEY (breaking out of the loop at a value that does
 * not FIT). A new entry appends v's PLAIN bytes to the dictionary, goes into the slots and
 * (DIRECT) the window, and folds v into the stats. Breaks out of the loop on failure (*rc).
 * There is no shortcut for a value equal to the previous one: its compare mispredicted about
 * as often as it hit in low-cardinality columns (vendor, passengers, surcharges: callgrind's
 * branch simulation, parquet_bench taxi shape, 397 k -> 263 k mispredictions in the double
 * loop without it), and steps of one value take the equal-step path instead. */
#define DICT_STEP(KEY, SLOT, GROW, ST, DIRECT, FITS)                                               \
    if (!FITS(v))                                                                                  \
        break;                                                                                     \
    KEY k = key_of_##KEY(&v, sizeof(v));                                                           \
    size_t pos = key_slot(k, shift);                                                               \
    uint32_t e;                                                                                    \
    for (;;) { /* an empty slot (id1 0) may hold any key */                                        \
        e = slots[pos].id1;                                                                        \
        if (!e || slots[pos].key == k)                                                             \
            break;                                                                                 \
        pos = (pos + 1) & mask;                                                                    \
    }                                                                                              \
    if (!e) {                                                                                      \
        *rc = firn_buf_reserve(&d->plain, sizeof(v));                                              \
        if (*rc)                                                                                   \
            break;                                                                                 \
        memcpy(d->plain.data + d->plain.len, &v, sizeof(v));                                       \
        d->plain.len += sizeof(v);                                                                 \
        d->plain.data[d->plain.len] = 0;                                                           \
        e = ++d->n;                                                                                \
        slots[pos].key = k;                                                                        \
        slots[pos].id1 = e;                                                                        \
        if (slots_full(d)) {                                                                       \
            GROW(d);                                                                               \
            slots = d->slots;                                                                      \
            mask = d->mask;                                                                        \
            shift = slot_shift(d);                                                                 \
        }                                                                                          \
        if (DIRECT) {                                                                              \
            direct_note(d, (int64_t)v, e, sizeof(v));                                              \
            direct = d->direct;                                                                    \
            dbase = d->direct_base;                                                                \
            dspan = d->direct_span;                                                                \
        }                                                                                          \
        l = (ST)v < l ? (ST)v : l;                                                                 \
        h = (ST)v > h ? (ST)v : h;                                                                 \
    }                                                                                              \
    ids[i] = e - 1

/* NAME probes the dictionary for values [i, n) of src (type SRC, encoded as DST; value j at
 * src[idx[j]], or src[base + j] without idx), through the direct window first when DIRECT (a
 * tight loop, NAME_direct, that stops at the first value not found there), else
 * keyed by KEY (the value's bits, or the low half of an int64 that FITS in 32 bits) in slots
 * SLOT grown by GROW; ids[j] gets each value's id, new entries their PLAIN value and the stats
 * in *lo and *hi. Returns where it stopped: n, the first value that does not FIT, or a failure
 * (*rc). The loop is written twice so that neither tests idx per value. */
#define DEFINE_DICT_LOOP(NAME, SRC, DST, KEY, SLOT, GROW, ST, ISNAN, FITS, DIRECT)                 \
    static inline size_t NAME##_direct(const SRC *src, const uint32_t *idx, size_t base, size_t i, \
                                       size_t n, uint32_t *ids, const uint32_t *direct,            \
                                       uint64_t dbase, size_t dspan)                               \
    {                                                                                              \
        for (; i < n; i++) {                                                                       \
            const DST v = (DST)src[idx ? idx[i] : base + i];                                       \
            const uint64_t off = (uint64_t)(int64_t)v - dbase;                                     \
            if (off >= dspan)                                                                      \
                break;                                                                             \
            const uint32_t id = direct[off];                                                       \
            if (id == DIRECT_NONE)                                                                 \
                break;                                                                             \
            ids[i] = id;                                                                           \
        }                                                                                          \
        return i;                                                                                  \
    }                                                                                              \
    static size_t NAME(pq_dict *d, const SRC *src, const uint32_t *idx, size_t base, size_t i,     \
                       size_t n, uint32_t *ids, ST *lo, ST *hi, uint64_t *nans, firn_rc *rc)       \
    {                                                                                              \
        SLOT *slots = d->slots;                                                                    \
        size_t mask = d->mask;                                                                     \
        int shift = slot_shift(d);                                                                 \
        const uint32_t *direct = d->direct;                                                        \
        uint64_t dbase = d->direct_base;                                                           \
        size_t dspan = d->direct_span;                                                             \
        ST l = *lo, h = *hi;                                                                       \
        uint64_t nan_n = 0;                                                                        \
        if (idx) {                                                                                 \
            for (; i < n; i++) {                                                                   \
                if (DIRECT) {                                                                      \
                    i = NAME##_direct(src, idx, 0, i, n, ids, direct, dbase, dspan);               \
                    if (i == n)                                                                    \
                        break;                                                                     \
                }                                                                                  \
                DST v = (DST)src[idx[i]];                                                          \
                nan_n += ISNAN(v);                                                                 \
                DICT_STEP(KEY, SLOT, GROW, ST, DIRECT, FITS);                                      \
            }                                                                                      \
        } else {                                                                                   \
            for (; i < n; i++) {                                                                   \
                if (DIRECT) {                                                                      \
                    i = NAME##_direct(src, NULL, base, i, n, ids, direct, dbase, dspan);           \
                    if (i == n)                                                                    \
                        break;                                                                     \
                }                                                                                  \
                DST v = (DST)src[base + i];                                                        \
                nan_n += ISNAN(v);                                                                 \
                DICT_STEP(KEY, SLOT, GROW, ST, DIRECT, FITS);                                      \
            }                                                                                      \
        }                                                                                          \
        *lo = l;                                                                                   \
        *hi = h;                                                                                   \
        *nans += nan_n;                                                                            \
        return i;                                                                                  \
    }

/* The key of a value of 4 or 8 bytes: its bits (the low half for a narrow int64, see
 * widen_slots); NaNs and -0.0 are keys of their own, as their PLAIN bytes differ. */
static inline uint32_t key_of_uint32_t(const void *v, size_t size)
{
    uint64_t bits = 0;
    memcpy(&bits, v, size);
    return (uint32_t)bits;
}

static inline uint64_t key_of_uint64_t(const void *v, size_t size)
{
    uint64_t bits = 0;
    memcpy(&bits, v, size);
    return bits;
}

#define ANY(v)    1
#define NARROW(v) ((v) == (int32_t)(v))

DEFINE_DICT_LOOP(dict_i32, int32_t, int32_t, uint32_t, slot4, grow_slot4, int64_t, NO_NAN, ANY, 1)
DEFINE_DICT_LOOP(
    dict_i32_i64, int64_t, int32_t, uint32_t, slot4, grow_slot4, int64_t, NO_NAN, ANY, 1)
DEFINE_DICT_LOOP(
    dict_i64_narrow, int64_t, int64_t, uint32_t, slot4, grow_slot4, int64_t, NO_NAN, NARROW, 1)
DEFINE_DICT_LOOP(dict_i64, int64_t, int64_t, uint64_t, slot8, grow_slot8, int64_t, NO_NAN, ANY, 1)
DEFINE_DICT_LOOP(dict_f32, float, float, uint32_t, slot4, grow_slot4, double, IS_NAN, ANY, 0)
DEFINE_DICT_LOOP(dict_f64, double, double, uint64_t, slot8, grow_slot8, double, IS_NAN, ANY, 0)

/* Values compared by a same_* scan at a time: a step of differing values stops in its first
 * block, a step of equal ones (firn's metadata columns: one operation, one LSN, one time per
 * batch) is OR-ed 16 compares a block, which compilers vectorise. */
#define SAME_BLOCK 16

/* Whether the n > 0 values of type U at src (value j at src[idx[j]], or src[base + j] without
 * idx) all have the bits of the first: a NaN equals a NaN of the same bits, as its key does;
 * -0.0 differs from 0.0. Contiguous values are equal when their bytes repeat with the period of
 * one value, which one memcmp of the values against themselves shifted by one value checks
 * (libc's vector loop: about 1.1 instructions an int64 with the call against 3.4 of the scalar
 * blocks this replaced, callgrind, parquet_bench backfill shape; and an early exit in the first
 * 32 bytes of a step of differing values). Gathered values (a step with
 * nulls) are checked in whole blocks of SAME_BLOCK (a constant trip count, unrolled), then the
 * rest. */
#define DEFINE_SAME(NAME, U)                                                                       \
    static bool NAME##_at(const uint8_t *p, const uint32_t *idx, size_t n, U first)                \
    {                                                                                              \
        U x;                                                                                       \
        size_t i = 0;                                                                              \
        for (; n - i >= SAME_BLOCK; i += SAME_BLOCK) {                                             \
            U acc = 0;                                                                             \
            for (size_t j = 0; j < SAME_BLOCK; j++) {                                              \
                memcpy(&x, p + (size_t)idx[i + j] * sizeof(U), sizeof(U));                         \
                acc |= x ^ first;                                                                  \
            }                                                                                      \
            if (acc)                                                                               \
                return false;                                                                      \
        }                                                                                          \
        for (; i < n; i++) {                                                                       \
            memcpy(&x, p + (size_t)idx[i] * sizeof(U), sizeof(U));                                 \
            if (x != first)                                                                        \
                return false;                                                                      \
        }                                                                                          \
        return true;                                                                               \
    }                                                                                              \
    static bool NAME(const void *src, const uint32_t *idx, size_t base, size_t n)                  \
    {                                                                                              \
        const uint8_t *p = src;                                                                    \
        if (!idx)                                                                                  \
            return memcmp(p + (base + 1) * sizeof(U), p + base * sizeof(U),                        \
                          (n - 1) * sizeof(U)) == 0;                                               \
        U first;                                                                                   \
        memcpy(&first, p + (size_t)idx[0] * sizeof(U), sizeof(U));                                 \
        return NAME##_at(p, idx, n, first);                                                        \
    }

DEFINE_SAME(same_bits32, uint32_t)
DEFINE_SAME(same_bits64, uint64_t)

/* NAME encodes n values of source type SRC (physical DST) into the page, through the dictionary
 * loop LOOP (after NARROW_LOOP while the slots are narrow, see widen_slots); stats in ST fields
 * LO/HI of the chunk stat. A step of values of equal bits (SAME) probes its first value alone:
 * the others take its id (ids_run: no store per value) and, for a NaN, count as NaNs too. */
#define DEFINE_PUT_NUM(NAME, SRC, DST, ST, LO, HI, ST_MIN, ST_MAX, ISNAN, SAME, NARROW_LOOP, LOOP) \
    static firn_rc NAME(pq_colw *cw, const firn_column *col, const uint32_t *idx, size_t base,     \
                        size_t n)                                                                  \
    {                                                                                              \
        const SRC *src = firn_column_values(col);                                                  \
        ST lo = cw->stat.has ? (ST)cw->stat.LO : ST_MAX;                                           \
        ST hi = cw->stat.has ? (ST)cw->stat.HI : ST_MIN;                                           \
        uint64_t nans = 0;                                                                         \
        if (cw->dict_on) {                                                                         \
            pq_dict *d = &cw->dict;                                                                \
            firn_rc rc = FIRN_OK;                                                                  \
            size_t i = 0;                                                                          \
            bool same = n > 1 && SAME(src, idx, base, n);                                          \
            size_t end = same ? 1 : n;                                                             \
            uint32_t first_id = 0;                                                                 \
            uint32_t *ids = same ? &first_id : ids_reserve(cw, n);                                 \
            if (NARROW_LOOP != LOOP && d->slot_bytes == sizeof(slot4)) {                           \
                i = NARROW_LOOP(d, src, idx, base, 0, end, ids, &lo, &hi, &nans, &rc);             \
                if (i < end && !rc)                                                                \
                    widen_slots(d);                                                                \
            }                                                                                      \
            if (i < end && !rc)                                                                    \
                i = LOOP(d, src, idx, base, i, end, ids, &lo, &hi, &nans, &rc);                    \
            FIRN_TRY(rc);                                                                          \
            if (same) {                                                                            \
                ids_run(cw, first_id, n);                                                          \
                nans *= n;                                                                         \
            } else {                                                                               \
                cw->n_ids += n;                                                                    \
            }                                                                                      \
        } else {                                                                                   \
            FIRN_TRY(firn_buf_reserve(&cw->plain, n * sizeof(DST)));                               \
            uint8_t *out = cw->plain.data + cw->plain.len;                                         \
            for (size_t i = 0; i < n; i++) {                                                       \
                DST v = (DST)src[idx ? idx[i] : base + i];                                         \
                memcpy(out + i * sizeof(DST), &v, sizeof(DST));                                    \
                lo = (ST)v < lo ? (ST)v : lo;                                                      \
                hi = (ST)v > hi ? (ST)v : hi;                                                      \
                nans += ISNAN(v);                                                                  \
            }                                                                                      \
            cw->plain.len += n * sizeof(DST);                                                      \
        }                                                                                          \
        if (lo <= hi) {                                                                            \
            cw->stat.has = true;                                                                   \
            cw->stat.LO = lo;                                                                      \
            cw->stat.HI = hi;                                                                      \
        }                                                                                          \
        cw->nan_count += (int64_t)nans;                                                            \
        cw->page_values += n;                                                                      \
        return FIRN_OK;                                                                            \
    }

DEFINE_PUT_NUM(put_i32,
               int32_t,
               int32_t,
               int64_t,
               imin,
               imax,
               INT64_MIN,
               INT64_MAX,
               NO_NAN,
               same_bits32,
               dict_i32,
               dict_i32)
DEFINE_PUT_NUM(put_i32_i64,
               int64_t,
               int32_t,
               int64_t,
               imin,
               imax,
               INT64_MIN,
               INT64_MAX,
               NO_NAN,
               same_bits64,
               dict_i32_i64,
               dict_i32_i64)
DEFINE_PUT_NUM(put_i64,
               int64_t,
               int64_t,
               int64_t,
               imin,
               imax,
               INT64_MIN,
               INT64_MAX,
               NO_NAN,
               same_bits64,
               dict_i64_narrow,
               dict_i64)
DEFINE_PUT_NUM(put_f32,
               float,
               float,
               double,
               dmin,
               dmax,
               -INFINITY,
               INFINITY,
               IS_NAN,
               same_bits32,
               dict_f32,
               dict_f32)
DEFINE_PUT_NUM(put_f64,
               double,
               double,
               double,
               dmin,
               dmax,
               -INFINITY,
               INFINITY,
               IS_NAN,
               same_bits64,
               dict_f64,
               dict_f64)

static firn_rc
put_bool(pq_colw *cw, const firn_column *col, const uint32_t *idx, size_t base, size_t n)
{
    const uint8_t *src = firn_column_values(col);
    FIRN_TRY(firn_buf_reserve(&cw->plain, n));
    uint8_t *out = cw->plain.data + cw->plain.len;
    int64_t lo = cw->stat.has ? cw->stat.imin : 1, hi = cw->stat.has ? cw->stat.imax : 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t v = src[idx ? idx[i] : base + i] ? 1 : 0;
        out[i] = v;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    cw->plain.len += n;
    if (n) {
        cw->stat.has = true;
        cw->stat.imin = lo;
        cw->stat.imax = hi;
    }
    cw->page_values += n;
    return FIRN_OK;
}

/* ---- fixed-length byte arrays (uuid, fixed, decimal > 18 digits) -------------------------- */

static void dec128_be(const uint8_t *native16, uint8_t *out, size_t width)
{
    uint64_t lo, hi;
    memcpy(&lo, native16, 8);
    memcpy(&hi, native16 + 8, 8);
    uint8_t be[16];
    for (int i = 0; i < 8; i++) {
        be[i] = (uint8_t)(hi >> (56 - 8 * i));
        be[8 + i] = (uint8_t)(lo >> (56 - 8 * i));
    }
    memcpy(out, be + 16 - width, width);
}

static pq_i128 dec128_value(const uint8_t *native16)
{
    uint64_t lo;
    int64_t hi;
    memcpy(&lo, native16, 8);
    memcpy(&hi, native16 + 8, 8);
    return (pq_i128)(((unsigned __int128)(uint64_t)hi << 64) | lo);
}

static firn_rc stat_flba(pq_colw *cw, const uint8_t *raw, const uint8_t *bytes, size_t w)
{
    if (cw->leaf->kind != PQK_DEC128)
        return firn__pq_stat_bytes(&cw->stat, bytes, w, false);
    pq_i128 v = dec128_value(raw);
    if (!cw->stat.has || v < cw->stat.qmin)
        cw->stat.qmin = v;
    if (!cw->stat.has || v > cw->stat.qmax)
        cw->stat.qmax = v;
    cw->stat.has = true;
    return FIRN_OK;
}

static firn_rc
put_flba(pq_colw *cw, const firn_column *col, const uint32_t *idx, size_t base, size_t n)
{
    const uint8_t *src = firn_column_values(col);
    size_t w = cw->value_width, sw = cw->leaf->kind == PQK_DEC128 ? 16 : w;
    uint8_t tmp[16];
    pq_dict *d = &cw->dict;
    uint32_t *ids = cw->dict_on ? ids_reserve(cw, n) : NULL;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *raw = src + (idx ? idx[i] : base + i) * sw, *v = raw;
        if (cw->leaf->kind == PQK_DEC128) {
            dec128_be(raw, tmp, w);
            v = tmp;
        }
        if (!cw->dict_on) {
            FIRN_TRY(firn_buf_append(&cw->plain, v, w));
            FIRN_TRY(stat_flba(cw, raw, v, w));
            continue;
        }
        uint32_t *slots = d->slots;
        size_t pos = hash_bytes(v, w) & d->mask;
        uint32_t e;
        while ((e = slots[pos]) != 0 && memcmp(d->plain.data + (size_t)(e - 1) * w, v, w))
            pos = (pos + 1) & d->mask;
        if (!e) {
            FIRN_TRY(firn_buf_append(&d->plain, v, w));
            e = ++d->n;
            slots[pos] = e;
            if ((size_t)d->n * 2 > d->mask)
                dict_grow(d, w);
            FIRN_TRY(stat_flba(cw, raw, v, w));
        }
        ids[i] = e - 1;
    }
    if (cw->dict_on)
        cw->n_ids += n;
    cw->page_values += n;
    return FIRN_OK;
}

/* ---- byte arrays (string, binary) --------------------------------------------------------- */

static firn_rc dict_add_bytes(pq_dict *d, const uint8_t *p, uint32_t len, uint64_t h, size_t pos)
{
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 1024;
        d->offs = firn_reallocarray(d->offs, d->cap, sizeof(uint32_t));
        d->lens = firn_reallocarray(d->lens, d->cap, sizeof(uint32_t));
        d->hashes = firn_reallocarray(d->hashes, d->cap, sizeof(uint64_t));
    }
    if (d->plain.len + 4 + len > UINT32_MAX)
        return FIRN_ERR_TOO_LARGE;
    FIRN_TRY(firn_buf_reserve(&d->plain, 4 + (size_t)len));
    memcpy(d->plain.data + d->plain.len, &len, 4);
    if (len)
        memcpy(d->plain.data + d->plain.len + 4, p, len);
    d->offs[d->n] = (uint32_t)d->plain.len + 4;
    d->lens[d->n] = len;
    d->hashes[d->n] = h;
    d->plain.len += 4 + (size_t)len;
    ((uint32_t *)d->slots)[pos] = ++d->n;
    if ((size_t)d->n * 2 > d->mask)
        dict_grow(d, 0);
    return FIRN_OK;
}

/* Whether the n > 0 byte arrays at data (value j from off[idx[j]], or off[base + j] without
 * idx) all equal the first. Without idx the values are contiguous: they are equal when their
 * offsets step by the first one's length and their bytes repeat with that period (the bytes
 * after the first value equal the bytes from the first value on). */
static bool
same_bytes(const uint32_t *off, const uint8_t *data, const uint32_t *idx, size_t base, size_t n)
{
    size_t s0 = idx ? idx[0] : base;
    const uint32_t o0 = off[s0], len = off[s0 + 1] - o0;
    if (idx) {
        for (size_t j = 1; j < n; j++) {
            size_t s = idx[j];
            if (off[s + 1] - off[s] != len || !bytes_equal(data + off[s], data + o0, len))
                return false;
        }
        return true;
    }
    for (size_t i = 0; i < n; i += SAME_BLOCK) {
        size_t end = n - i < SAME_BLOCK ? n : i + SAME_BLOCK;
        uint32_t acc = 0;
        for (size_t j = i; j < end; j++)
            acc |= off[base + j + 1] - off[base + j] - len;
        if (acc)
            return false;
    }
    return memcmp(data + o0 + len, data + o0, (n - 1) * (size_t)len) == 0;
}

static firn_rc
put_bytes(pq_colw *cw, const firn_column *col, const uint32_t *idx, size_t base, size_t n)
{
    const uint32_t *off = firn_column_offsets(col);
    const uint8_t *data = firn_column_data(col);
    pq_dict *d = &cw->dict;
    uint32_t prev_e = 0; /* id + 1 of the previous value: runs skip the hash probe */
    const uint8_t *prev_p = NULL;
    uint32_t prev_len = 0;
    /* a step of equal values (_firn_op) probes its first value alone, the rest take its id */
    bool same = cw->dict_on && n > 1 && same_bytes(off, data, idx, base, n);
    size_t end = same ? 1 : n;
    uint32_t first_id = 0;
    uint32_t *ids = same ? &first_id : cw->dict_on ? ids_reserve(cw, n) : NULL;
    for (size_t i = 0; i < end; i++) {
        size_t s = idx ? idx[i] : base + i;
        const uint8_t *p = data + off[s];
        uint32_t len = off[s + 1] - off[s];
        if (prev_e && len == prev_len && bytes_equal(p, prev_p, len)) {
            ids[i] = prev_e - 1;
            continue;
        }
        if (!cw->dict_on) {
            FIRN_TRY(firn_buf_reserve(&cw->plain, 4 + (size_t)len));
            memcpy(cw->plain.data + cw->plain.len, &len, 4);
            if (len)
                memcpy(cw->plain.data + cw->plain.len + 4, p, len);
            cw->plain.len += 4 + (size_t)len;
            FIRN_TRY(firn__pq_stat_bytes(&cw->stat, p, len, false));
            continue;
        }
        uint64_t h = hash_bytes(p, len);
        const uint32_t *slots = d->slots;
        size_t pos = h & d->mask;
        uint32_t e;
        for (;;) {
            e = slots[pos];
            if (!e || (d->hashes[e - 1] == h && d->lens[e - 1] == len &&
                       bytes_equal(d->plain.data + d->offs[e - 1], p, len)))
                break;
            pos = (pos + 1) & d->mask;
        }
        if (!e) {
            FIRN_TRY(dict_add_bytes(d, p, len, h, pos));
            e = d->n;
            FIRN_TRY(firn__pq_stat_bytes(&cw->stat, p, len, false));
        }
        ids[i] = e - 1;
        prev_e = e;
        prev_p = p;
        prev_len = len;
    }
    if (same)
        ids_run(cw, first_id, n);
    else if (cw->dict_on)
        cw->n_ids += n;
    cw->page_values += n;
    return FIRN_OK;
}

static firn_rc
put_values(pq_colw *cw, const firn_column *col, const uint32_t *idx, size_t base, size_t n)
{
    switch (cw->leaf->kind) {
    case PQK_BOOL:
        return put_bool(cw, col, idx, base, n);
    case PQK_I32:
        return put_i32(cw, col, idx, base, n);
    case PQK_I32_I64:
        return put_i32_i64(cw, col, idx, base, n);
    case PQK_I64:
        return put_i64(cw, col, idx, base, n);
    case PQK_FLOAT:
        return put_f32(cw, col, idx, base, n);
    case PQK_DOUBLE:
        return put_f64(cw, col, idx, base, n);
    case PQK_DEC128:
    case PQK_FLBA:
        return put_flba(cw, col, idx, base, n);
    case PQK_BYTES:
        return put_bytes(cw, col, idx, base, n);
    }
    return FIRN_ERR_INTERNAL;
}

/* ---- pages -------------------------------------------------------------------------------- */

static firn_rc levels_block(firn_buf *body, const uint8_t *v, size_t n, int max_level)
{
    size_t at = body->len;
    FIRN_TRY(firn_wr_le32(body, 0));
    FIRN_TRY(firn__pq_rle_u8(body, v, n, firn__pq_bit_width((uint64_t)max_level)));
    uint32_t len = (uint32_t)(body->len - at - 4);
    memcpy(body->data + at, &len, 4);
    return FIRN_OK;
}

/* The definition levels of a page whose n >= 8 levels are all max_level (every value present):
 * the one RLE run levels_block would find, without scanning the levels. */
static firn_rc levels_run(firn_buf *body, size_t n, int max_level)
{
    size_t at = body->len;
    uint64_t x = (uint64_t)max_level;
    FIRN_TRY(firn_wr_le32(body, 0));
    FIRN_TRY(firn_wr_uvarint(body, (uint64_t)n << 1));
    FIRN_TRY(firn_buf_append(body, &x, (size_t)(firn__pq_bit_width(x) + 7) / 8));
    uint32_t len = (uint32_t)(body->len - at - 4);
    memcpy(body->data + at, &len, 4);
    return FIRN_OK;
}

static firn_rc pack_bools(firn_buf *body, const uint8_t *v, size_t n)
{
    size_t bytes = (n + 7) / 8;
    FIRN_TRY(firn_buf_reserve(body, bytes));
    uint8_t *out = body->data + body->len;
    memset(out, 0, bytes);
    for (size_t i = 0; i < n; i++)
        out[i / 8] |= (uint8_t)(v[i] << (i % 8));
    body->len += bytes;
    body->data[body->len] = 0;
    return FIRN_OK;
}

static int dict_bit_width(const pq_dict *d)
{
    int bw = firn__pq_bit_width(d->n ? d->n - 1 : 0);
    return bw ? bw : 1;
}

/* Appends header + compressed body of a page (len bytes at body) to out; returns the header
 * size. sq: the compression history of the page's chunk (firn__pq_compress_page), which
 * may store the page as a raw-block zstd frame. The body is compressed straight into out, behind a
 * header written for *guess compressed bytes (the size of the column's previous page; 0: a third of
 * len), which the real header, built in comp, overwrites: of the same length unless the two sizes'
 * varints differ in length (1, 2, 3 bytes below 64 B, 8 KiB, 1 MiB), when the compressed bytes move
 * to fit it. *guess becomes the compressed size. On failure out keeps its former length. */
static firn_rc emit_page(pq_codec *codec,
                         pq_squeeze *sq,
                         firn_buf *out,
                         firn_buf *comp,
                         const uint8_t *body,
                         size_t len,
                         int type,
                         int32_t num_values,
                         int encoding,
                         size_t *guess,
                         size_t *out_header,
                         firn_err *err)
{
    if (len > INT32_MAX)
        return firn_err_set(err, FIRN_ERR_TOO_LARGE, "parquet page of %zu bytes too large", len);
    const size_t before = out->len;
    pq_tw w;
    firn__pq_tw_init(&w, out);
    firn__pq_page_header(&w, type, len, *guess ? *guess : len / 3, num_values, encoding, true);
    firn_rc rc = w.rc;
    const size_t guessed = out->len - before;
    if (!rc)
        rc = firn__pq_compress_page(codec, sq, out, body ? body : (const uint8_t *)"", len, err);
    const size_t clen = out->len - before - guessed;
    if (!rc && clen > INT32_MAX)
        rc = firn_err_set(err, FIRN_ERR_TOO_LARGE, "parquet page of %zu bytes too large", len);
    firn_buf_reset(comp);
    firn__pq_tw_init(&w, comp);
    firn__pq_page_header(&w, type, len, clen, num_values, encoding, true);
    if (!rc)
        rc = w.rc;
    if (!rc && comp->len > guessed)
        rc = firn_buf_reserve(out, comp->len - guessed);
    if (rc) {
        out->len = before;
        if (out->data)
            out->data[before] = 0;
        return rc;
    }
    if (comp->len != guessed) { /* rare: the compressed bytes move to fit the header */
        memmove(out->data + before + comp->len, out->data + before + guessed, clen);
        out->len = before + comp->len + clen;
        out->data[out->len] = 0;
    }
    memcpy(out->data + before, comp->data, comp->len);
    *guess = clen;
    *out_header = comp->len;
    return FIRN_OK;
}

static firn_rc
flush_page(pq_colw *cw, pq_codec *codec, firn_buf *body, firn_buf *comp, firn_err *err)
{
    const pq_leaf *l = cw->leaf;
    if (cw->n_levels == 0)
        return FIRN_OK;
    if (cw->n_levels > INT32_MAX)
        return firn_err_set(err, FIRN_ERR_TOO_LARGE, "too many values in a parquet page");
    firn_buf_reset(body);
    if (l->max_rep)
        FIRN_TRY(levels_block(body, cw->rep, cw->n_levels, l->max_rep));
    if (l->max_def && cw->page_values == cw->n_levels && cw->n_levels >= 8)
        FIRN_TRY(levels_run(body, cw->n_levels, l->max_def));
    else if (l->max_def)
        FIRN_TRY(levels_block(body, cw->def, cw->n_levels, l->max_def));
    int enc = PQ_ENC_PLAIN;
    if (cw->dict_on) {
        int bw = dict_bit_width(&cw->dict);
        enc = PQ_ENC_RLE_DICTIONARY;
        FIRN_TRY(firn_wr_u8(body, (uint8_t)bw));
        if (cw->run_ids == cw->n_ids) { /* every id of the page is run_id (or there are none) */
            FIRN_TRY(firn__pq_rle_u32_repeat(body, cw->run_id, cw->n_ids, bw));
        } else {
            (void)ids_reserve(cw, 0); /* writes out a pending run */
            FIRN_TRY(firn__pq_rle_u32(body, cw->ids, cw->n_ids, bw));
        }
        cw->dict_data_pages++;
    } else {
        if (cw->plain_data_pages == 0) /* ids that did not compress say nothing of PLAIN values */
            cw->squeeze = (pq_squeeze){0};
        if (l->kind == PQK_BOOL)
            FIRN_TRY(pack_bools(body, cw->plain.data + LEVELS_ROOM, plain_bytes(cw)));
        else if (body->len > LEVELS_ROOM)
            FIRN_TRY(firn_buf_append(body, cw->plain.data + LEVELS_ROOM, plain_bytes(cw)));
        cw->plain_data_pages++;
    }
    const uint8_t *page = body->data;
    size_t page_len = body->len;
    if (!cw->dict_on && l->kind != PQK_BOOL && body->len <= LEVELS_ROOM) {
        /* the levels go in front of the values: the page is compressed where the values are */
        uint8_t *at = cw->plain.data + LEVELS_ROOM - body->len;
        if (body->len)
            memcpy(at, body->data, body->len);
        page = at;
        page_len = body->len + plain_bytes(cw);
    }
    size_t header = 0;
    FIRN_TRY(emit_page(codec, &cw->squeeze, &cw->pages, comp, page, page_len, PQ_PAGE_DATA,
                       (int32_t)cw->n_levels, enc, &cw->comp_guess, &header, err));
    cw->data_pages_uncompressed += (int64_t)(header + page_len);
    cw->num_values += (int64_t)cw->n_levels;
    cw->n_levels = 0;
    cw->n_ids = 0;
    cw->run_ids = 0;
    cw->page_values = 0;
    plain_clear(cw);
    return FIRN_OK;
}

static size_t page_estimate(const pq_colw *cw)
{
    if (cw->dict_on)
        return cw->n_ids * (size_t)dict_bit_width(&cw->dict) / 8;
    return plain_bytes(cw);
}

size_t firn__pq_colw_buffered(const pq_colw *cw)
{
    return cw->pages.len + cw->dict.plain.len + page_estimate(cw) + cw->n_levels / 4;
}

/* At the end of a chunk's first page (parquet-mr's isCompressionSatisfying): a dictionary that
 * with its ids is no smaller than the PLAIN values (unique keys, timestamps) only costs hashing;
 * the chunk falls back to PLAIN after this page. Fixed-width kinds only (their PLAIN size is
 * known without a pass over the values). */
static bool dict_unprofitable(const pq_colw *cw)
{
    if (cw->dict_data_pages != 0 || cw->plain_data_pages != 0 || cw->leaf->kind == PQK_BYTES ||
        cw->leaf->kind == PQK_BOOL)
        return false;
    size_t raw = cw->page_values * cw->value_width;
    return cw->dict.plain.len + page_estimate(cw) >= raw;
}

/* The chunk falls back to PLAIN (after flush_page emitted its dictionary ids): of the dictionary
 * only its values stay, for the dictionary page written when the chunk ends; the hash slots, the
 * per-entry arrays of a byte-array dictionary and the id buffer go, so that a wide table's
 * columns do not each hold a full dictionary's lookup structures (a few MiB) until their chunk
 * ends. */
static void fall_back_to_plain(pq_colw *cw)
{
    pq_dict *d = &cw->dict;
    cw->dict_on = false;
    firn_free(d->slots);
    dict_alloc_slots(d);
    firn_free(d->direct);
    d->direct = NULL;
    d->direct_cap = 0;
    direct_clear(d);
    firn_free(d->offs);
    firn_free(d->lens);
    firn_free(d->hashes);
    d->offs = d->lens = NULL;
    d->hashes = NULL;
    d->cap = 0;
    FIRN_ASSERT(cw->n_ids == 0);
    firn_free(cw->ids);
    cw->ids = NULL;
    cw->ids_cap = 0;
}

static firn_rc
after_step(pq_colw *cw, pq_codec *codec, firn_buf *body, firn_buf *comp, firn_err *err)
{
    if (cw->dict_on && dict_full(cw)) {
        FIRN_TRY(flush_page(cw, codec, body, comp, err));
        fall_back_to_plain(cw);
        return FIRN_OK;
    }
    if (page_estimate(cw) >= cw->opts->page_bytes || cw->n_levels >= cw->opts->page_rows) {
        bool fall_back = cw->dict_on && dict_unprofitable(cw);
        FIRN_TRY(flush_page(cw, codec, body, comp, err));
        if (fall_back)
            fall_back_to_plain(cw);
    }
    return FIRN_OK;
}

/* ---- shredding ---------------------------------------------------------------------------- */

static firn_rc null_in_required(const pq_colw *cw, size_t k, firn_err *err)
{
    return firn_err_set(err, FIRN_ERR_INVALID, "null value in required field \"%s\"",
                        cw->leaf->path[k]->name);
}

/* Definition levels (0 or 1) of rows [r, r + n) from a validity bitmap into d, and the row of
 * each present value into vidx; returns the present values. Whole bytes of the bitmap with no
 * null (the rule in most columns) or only nulls (a column null in a whole batch, such as
 * _firn_commit_ts in a backfill) take short paths. */
static size_t
levels_from_validity(const uint8_t *valid, size_t r, size_t n, uint8_t *d, uint32_t *vidx)
{
    size_t nv = 0, i = 0;
    for (;;) {
        for (; i < n && ((r + i) & 7) != 0; i++) { /* to a byte boundary, or the rest */
            size_t s = r + i;
            uint8_t bit = (valid[s >> 3] >> (s & 7)) & 1;
            d[i] = bit;
            vidx[nv] = (uint32_t)s;
            nv += bit;
        }
        if (i == n)
            return nv;
        for (; n - i >= 8 && valid[(r + i) >> 3] == 0xFF; i += 8) {
            memset(d + i, 1, 8);
            for (uint32_t j = 0; j < 8; j++)
                vidx[nv + j] = (uint32_t)(r + i) + j;
            nv += 8;
        }
        for (; n - i >= 8 && valid[(r + i) >> 3] == 0; i += 8)
            memset(d + i, 0, 8);
        if (i == n)
            return nv;
        size_t s = r + i; /* a byte with a null, or the tail */
        uint8_t bit = (valid[s >> 3] >> (s & 7)) & 1;
        d[i] = bit;
        vidx[nv] = (uint32_t)s;
        nv += bit;
        i++;
    }
}

static firn_rc write_flat(pq_colw *cw,
                          pq_codec *codec,
                          firn_column *col,
                          size_t begin,
                          size_t end,
                          firn_buf *body,
                          firn_buf *comp,
                          firn_err *err)
{
    const uint8_t *valid = firn_column_validity(col);
    size_t r = begin;
    while (r < end) {
        size_t n = end - r, room = cw->opts->page_rows - cw->n_levels;
        n = n < STEP_VALUES ? n : STEP_VALUES;
        n = n < room ? n : room;
        const uint32_t *idx = NULL;
        size_t nv = n;
        if (cw->leaf->max_def) {
            levels_reserve(cw, n);
            uint8_t *d = cw->def + cw->n_levels;
            if (!valid) {
                memset(d, 1, n);
            } else {
                vidx_reserve(cw, n);
                nv = levels_from_validity(valid, r, n, d, cw->vidx);
                idx = cw->vidx;
            }
        } else if (valid) {
            for (size_t s = r; s < r + n; s++)
                if (!((valid[s >> 3] >> (s & 7)) & 1))
                    return null_in_required(cw, 0, err);
        }
        cw->null_count += (int64_t)(n - nv);
        cw->n_levels += n;
        FIRN_TRY(put_values(cw, col, idx, r, nv));
        r += n;
        FIRN_TRY(after_step(cw, codec, body, comp, err));
    }
    return FIRN_OK;
}

typedef struct shred_state {
    pq_colw *cw;
    firn_column *const *cols;
    size_t nv;
    firn_err *err;
} shred_state;

static void emit(shred_state *st, int16_t def, int16_t rep, size_t slot)
{
    pq_colw *cw = st->cw;
    levels_reserve(cw, 1);
    if (cw->leaf->max_def)
        cw->def[cw->n_levels] = (uint8_t)def;
    if (cw->leaf->max_rep)
        cw->rep[cw->n_levels] = (uint8_t)rep;
    cw->n_levels++;
    if (def == cw->leaf->max_def) {
        vidx_reserve(cw, st->nv + 1);
        cw->vidx[st->nv++] = (uint32_t)slot;
    } else {
        cw->null_count++;
    }
}

static firn_rc shred(shred_state *st, size_t k, size_t slot, int16_t def, int16_t rep)
{
    const pq_leaf *l = st->cw->leaf;
    firn_column *c = st->cols[k];
    const firn_field *f = l->path[k];
    bool valid = firn_column_is_valid(c, slot);
    if (!f->required) {
        if (!valid) {
            emit(st, def, rep, 0);
            return FIRN_OK;
        }
        def++;
    } else if (!valid) {
        return null_in_required(st->cw, k, st->err);
    }
    if (k + 1 == l->depth) {
        emit(st, def, rep, slot);
        return FIRN_OK;
    }
    if (f->type == FIRN_TYPE_STRUCT)
        return shred(st, k + 1, slot, def, rep);
    const uint32_t *off = firn_column_offsets(c);
    uint32_t b = off[slot], e = off[slot + 1];
    if (b == e) {
        emit(st, def, rep, 0);
        return FIRN_OK;
    }
    for (uint32_t i = b; i < e; i++)
        FIRN_TRY(shred(st, k + 1, i, (int16_t)(def + 1), i == b ? rep : l->rep_at[k]));
    return FIRN_OK;
}

static firn_rc write_nested(pq_colw *cw,
                            pq_codec *codec,
                            firn_column *const *cols,
                            size_t begin,
                            size_t end,
                            firn_buf *body,
                            firn_buf *comp,
                            firn_err *err)
{
    shred_state st = {cw, cols, 0, err};
    size_t r = begin;
    while (r < end) {
        size_t start = cw->n_levels;
        st.nv = 0;
        for (; r < end && cw->n_levels - start < STEP_VALUES && cw->n_levels < cw->opts->page_rows;
             r++)
            FIRN_TRY(shred(&st, 0, r, 0, 0));
        FIRN_TRY(put_values(cw, cols[cw->leaf->depth - 1], cw->vidx, 0, st.nv));
        FIRN_TRY(after_step(cw, codec, body, comp, err));
    }
    return FIRN_OK;
}

firn_rc firn__pq_colw_write(pq_colw *cw,
                            pq_codec *codec,
                            firn_column *const *cols,
                            size_t begin,
                            size_t end,
                            firn_buf *scratch,
                            firn_buf *comp,
                            firn_err *err)
{
    firn_rc rc;
    if (cw->leaf->depth == 1)
        rc = write_flat(cw, codec, cols[0], begin, end, scratch, comp, err);
    else
        rc = write_nested(cw, codec, cols, begin, end, scratch, comp, err);
    if (rc == FIRN_ERR_TOO_LARGE && (!err || err->code != rc))
        return firn_err_set(err, rc, "column \"%s\" too large for one parquet page",
                            cw->leaf->field->name);
    return rc;
}

/* ---- chunk end ---------------------------------------------------------------------------- */

firn_rc firn__pq_sink_write(pq_sink *s, const void *p, size_t len, firn_err *err)
{
    if (len == 0)
        return FIRN_OK;
    FIRN_TRY(s->write(s->ctx, p, len, err));
    s->offset += len;
    return FIRN_OK;
}

static firn_rc chunk_stats(pq_colw *cw, pq_chunk_meta *m)
{
    uint8_t buf[16];
    const uint8_t *p;
    size_t len;
    m->null_count = cw->null_count;
    m->has_nan = cw->leaf->kind == PQK_FLOAT || cw->leaf->kind == PQK_DOUBLE;
    m->nan_count = cw->nan_count;
    /* A long min or max is left out, as Arrow and parquet-java do: the footer would hold the
     * whole value twice (a 50 MB text made a 100 MB footer that Arrow's 100 MB Thrift limit
     * nearly refused), for a bound no reader prunes well with. */
    if (cw->stat.bmin.len > PQ_STATS_MAX || cw->stat.bmax.len > PQ_STATS_MAX)
        return FIRN_OK;
    if (!firn__pq_stat_plain(&cw->stat, cw->leaf, false, buf, sizeof(buf), &p, &len))
        return FIRN_OK;
    m->min = firn_memdup(p, len);
    m->min_len = len;
    FIRN_ASSERT(firn__pq_stat_plain(&cw->stat, cw->leaf, true, buf, sizeof(buf), &p, &len));
    m->max = firn_memdup(p, len);
    m->max_len = len;
    m->has_minmax = true;
    return FIRN_OK;
}

static void chunk_reset(pq_colw *cw)
{
    firn_buf_reset(&cw->pages);
    dict_reset(&cw->dict);
    cw->dict_on = cw->leaf->kind != PQK_BOOL;
    cw->data_pages_uncompressed = 0;
    cw->squeeze = (pq_squeeze){0};
    cw->dict_data_pages = cw->plain_data_pages = 0;
    cw->num_values = cw->null_count = cw->nan_count = 0;
    firn__pq_stat_reset(&cw->stat);
}

firn_rc firn__pq_colw_flush_chunk(pq_colw *cw,
                                  pq_codec *codec,
                                  pq_sink *sink,
                                  firn_buf *scratch,
                                  firn_buf *comp,
                                  pq_chunk_meta *m,
                                  firn_err *err)
{
    FIRN_TRY(flush_page(cw, codec, scratch, comp, err));
    memset(m, 0, sizeof(*m));
    m->dict_page_offset = -1;
    m->uncompressed = cw->data_pages_uncompressed;
    m->compressed = (int64_t)cw->pages.len;
    if (cw->dict_data_pages > 0) {
        firn_buf hdr;
        firn_buf_init(&hdr, BUF_MAX);
        size_t header = 0, guess = 0;
        pq_squeeze dict_squeeze = {0}; /* compressed unless short: one page, its own history */
        firn_rc rc =
            emit_page(codec, &dict_squeeze, &hdr, comp, cw->dict.plain.data, cw->dict.plain.len,
                      PQ_PAGE_DICTIONARY, (int32_t)cw->dict.n, PQ_ENC_PLAIN, &guess, &header, err);
        m->dict_page_offset = (int64_t)sink->offset;
        if (!rc)
            rc = firn__pq_sink_write(sink, hdr.data, hdr.len, err);
        m->uncompressed += (int64_t)(header + cw->dict.plain.len);
        m->compressed += (int64_t)hdr.len;
        firn_buf_deinit(&hdr);
        FIRN_TRY(rc);
        m->dict_pages = 1;
    }
    m->data_page_offset = (int64_t)sink->offset;
    FIRN_TRY(firn__pq_sink_write(sink, cw->pages.data, cw->pages.len, err));
    m->num_values = cw->num_values;
    m->dict_data_pages = cw->dict_data_pages;
    m->plain_data_pages = cw->plain_data_pages;
    FIRN_TRY(chunk_stats(cw, m));
    cw->file_values += (uint64_t)cw->num_values;
    cw->file_nulls += (uint64_t)cw->null_count;
    cw->file_nans += (uint64_t)cw->nan_count;
    cw->file_bytes += (uint64_t)m->compressed;
    FIRN_TRY(firn__pq_stat_merge(&cw->file_stat, &cw->stat, cw->leaf->kind));
    chunk_reset(cw);
    return FIRN_OK;
}

void firn__pq_chunk_meta_deinit(pq_chunk_meta *m)
{
    firn_free(m->min);
    firn_free(m->max);
    m->min = m->max = NULL;
}
