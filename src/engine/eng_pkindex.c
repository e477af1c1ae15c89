/* SPDX-License-Identifier: Apache-2.0 */
/* The primary-key index with bounded memory (DELETES.md §5.2, docs/internals/pkindex.md): key
 * fingerprints in an open-addressing memtable that flushes to immutable hash-sorted runs on local
 * disk, size-tiered merges that drop shadowed entries and tombstones, and lookups as sorted batch
 * probes merge-joined with the runs through a bounded page cache. */
#include "eng_pkindex_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MEMORY_MIN ((size_t)64 << 10)

static void spill_free(firn__pkindex *idx);
static void bb_free(firn__pkindex *idx);
static void mt_reserve(firn__pkindex *idx, uint64_t keys);
/* Newest runs of one level merged at once, in normal and in bulk mode. */
#define MERGE_FANIN 4u
#define BULK_FANIN  32u
/* Memtable: load factor (numerator / 4) and the smallest capacity. */
#define MT_LOAD_4  3u
#define MT_CAP_MIN 64u

/* ---- key fingerprints ---------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static inline uint64_t rotl(uint64_t x, unsigned b)
{
    return (x << b) | (x >> (64 - b));
}

#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = rotl(v1, 13);                                                                         \
        v1 ^= v0;                                                                                  \
        v0 = rotl(v0, 32);                                                                         \
        v2 += v3;                                                                                  \
        v3 = rotl(v3, 16);                                                                         \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = rotl(v3, 21);                                                                         \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = rotl(v1, 17);                                                                         \
        v1 ^= v2;                                                                                  \
        v2 = rotl(v2, 32);                                                                         \
    } while (0)

static uint64_t le64(const uint8_t *p, size_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (n == 8) { /* a bigint key: one load */
        uint64_t w;
        memcpy(&w, p, 8);
        return w;
    }
#endif
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void firn__pk_siphash128(const uint8_t key[16], const uint8_t *p, size_t len, uint64_t out[2])
{
    uint64_t k0 = le64(key, 8), k1 = le64(key + 8, 8);
    uint64_t v0 = 0x736f6d6570736575ull ^ k0, v1 = 0x646f72616e646f6dull ^ k1;
    uint64_t v2 = 0x6c7967656e657261ull ^ k0, v3 = 0x7465646279746573ull ^ k1;
    v1 ^= 0xee;
    size_t whole = len & ~(size_t)7;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m = le64(p + i, 8);
        v3 ^= m;
        SIPROUND;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t b = (uint64_t)len << 56 | le64(p + whole, len - whole);
    v3 ^= b;
    SIPROUND;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xee;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    out[0] = v0 ^ v1 ^ v2 ^ v3;
    v1 ^= 0xdd;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    out[1] = v0 ^ v1 ^ v2 ^ v3;
}

firn__pkkey firn__pkindex_key(const firn__pkindex *idx, const uint8_t *key, size_t len)
{
    firn__pkkey k;
    /* A non-null integer of 1, 2, 4 or 8 bytes (tag 1, then the value as stored): sign-extended
     * and mixed by splitmix64, a bijection, so such keys never share a fingerprint. */
    if ((len == 2 || len == 3 || len == 5 || len == 9) && key[0] == 1) {
        unsigned bits = (unsigned)(len - 1) * 8;
        uint64_t v = le64(key + 1, len - 1);
        if (bits < 64 && (v >> (bits - 1)) & 1)
            v |= ~0ull << bits;
        k.h = splitmix64(v);
        k.c = 0;
        return k;
    }
    uint64_t out[2];
    firn__pk_siphash128(idx->seed, key, len, out);
    k.h = out[0];
    k.c = (uint32_t)out[1];
    return k;
}

/* ---- setup --------------------------------------------------------------------------------- */

static void random_seed(uint8_t seed[16])
{
    uint8_t a[16], b[16];
    firn_uuid_v4(a);
    firn_uuid_v4(b);
    for (int i = 0; i < 16; i++)
        seed[i] = (uint8_t)(a[i] ^ (b[(i + 7) % 16] << 1));
}

static void mt_alloc(firn__pkindex *idx)
{
    idx->mt_cap = idx->mt_cap_max >> idx->mt_shift;
    idx->mt_len = idx->mt_cap + idx->mt_cap / 16 + 16;
    idx->mt = firn_malloc(idx->mt_len * sizeof(pk_slot));
    memset(idx->mt, 0xFF, idx->mt_len * sizeof(pk_slot));
    idx->mt_used = 0;
}

/* Allocates the memtable at its starting size: the largest halving of mt_cap_max still at
 * least 1024 slots (or mt_cap_max itself when smaller). */
static void mt_alloc_smallest(firn__pkindex *idx)
{
    idx->mt_shift = 0;
    while ((idx->mt_cap_max >> (idx->mt_shift + 1)) >= 1024)
        idx->mt_shift++;
    mt_alloc(idx);
}

firn__pkindex *firn__pkindex_new_opts(const firn__pkindex_opts *o)
{
    firn__pkindex *idx = firn_calloc(1, sizeof(*idx));
    size_t limit = o && o->memory_limit ? o->memory_limit : FIRN_PKINDEX_MEMORY_DEFAULT;
    idx->mem_limit = limit < MEMORY_MIN ? MEMORY_MIN : limit;
    if (o && o->dir)
        idx->dir = firn_strdup(o->dir);
    if (o && o->seed)
        memcpy(idx->seed, o->seed, 16);
    else
        random_seed(idx->seed);
    /* 3/8 of the budget to the memtable (counting the old table while it grows: 1.5x plus
     * tails), 3/8 to the page cache, the rest to fences, buffers and the file table. */
    size_t slots = idx->mem_limit / 8 * 3 / sizeof(pk_slot);
    idx->mt_cap_max = slots > 64 ? (slots - 32) * 10 / 16 : 0;
    if (idx->mt_cap_max < MT_CAP_MIN)
        idx->mt_cap_max = MT_CAP_MIN;
    mt_alloc_smallest(idx);
    idx->cache_bytes = idx->mem_limit / 8 * 3;
    idx->cache = firn__pkcache_new(idx->cache_bytes);
    idx->next_run_id = 1;
    idx->lock_fd = -1;
    return idx;
}

firn__pkindex *firn__pkindex_new(void)
{
    return firn__pkindex_new_opts(NULL);
}

void firn__pkindex_free(firn__pkindex *idx)
{
    if (!idx)
        return;
    spill_free(idx);
    bb_free(idx);
    firn__pkindex_close_dir(idx);
    firn_free(idx->runs);
    firn_free(idx->dir);
    firn_free(idx->mt);
    firn__pkcache_free(idx->cache);
    for (uint32_t i = 0; i < idx->n_files; i++)
        firn_free(idx->files[i]);
    firn_free(idx->files);
    firn_free(idx);
}

size_t firn__pkindex_count(const firn__pkindex *idx)
{
    return idx->live;
}

uint32_t firn__pkindex_add_file(firn__pkindex *idx, const char *location)
{
    FIRN_ASSERT(idx->n_files < PK_FILE_MAX);
    firn__pkindex_touch(idx);
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

/* ---- memtable ------------------------------------------------------------------------------ */

static inline uint64_t slot_h(const pk_slot *s)
{
    return (uint64_t)s->hhi << 32 | s->hlo;
}

static inline size_t mt_home(const firn__pkindex *idx, uint64_t h)
{
    return (size_t)(((h >> 32) * (uint64_t)idx->mt_cap) >> 32);
}

/* The slot holding k (*found) or the empty slot where it would go; SIZE_MAX when the probe runs
 * off the end of the table. */
static size_t mt_probe(const firn__pkindex *idx, firn__pkkey k, bool *found)
{
    *found = false;
    for (size_t i = mt_home(idx, k.h); i < idx->mt_len; i++) {
        const pk_slot *s = &idx->mt[i];
        if (s->file1 == PK_MT_EMPTY)
            return i;
        if (s->hlo == (uint32_t)k.h && s->hhi == (uint32_t)(k.h >> 32) && s->c == k.c) {
            *found = true;
            return i;
        }
    }
    return SIZE_MAX;
}

/* Places slots into an empty table; false when one runs off its end. */
static bool mt_place(firn__pkindex *idx, const pk_slot *from, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (from[i].file1 == PK_MT_EMPTY)
            continue;
        firn__pkkey k = {slot_h(&from[i]), from[i].c};
        bool found;
        size_t at = mt_probe(idx, k, &found);
        if (at == SIZE_MAX)
            return false;
        idx->mt[at] = from[i];
        idx->mt_used++;
    }
    return true;
}

static bool mt_grow(firn__pkindex *idx)
{
    pk_slot *old = idx->mt;
    size_t old_len = idx->mt_len, old_cap = idx->mt_cap, old_used = idx->mt_used;
    idx->mt_shift--;
    mt_alloc(idx);
    if (mt_place(idx, old, old_len)) {
        firn_free(old);
        return true;
    }
    firn_free(idx->mt); /* practically unreachable: a half-full table spilling past its tail */
    idx->mt = old;
    idx->mt_len = old_len;
    idx->mt_cap = old_cap;
    idx->mt_used = old_used;
    idx->mt_shift++;
    return false;
}

static int slot_cmp(const void *a, const void *b)
{
    const pk_slot *x = a, *y = b;
    uint64_t hx = slot_h(x), hy = slot_h(y);
    if (hx != hy)
        return hx < hy ? -1 : 1;
    return x->c == y->c ? 0 : (x->c < y->c ? -1 : 1);
}

/* Slots come nearly sorted (homes follow hash order); insertion sort, with a budget of moves
 * past which the general sort takes over (clustered or hostile hashes). */
static void sort_slots(pk_slot *s, size_t n)
{
    size_t budget = 32 * n + 1024;
    for (size_t i = 1; i < n; i++) {
        pk_slot x = s[i];
        size_t j = i;
        while (j > 0 && slot_cmp(&x, &s[j - 1]) < 0) {
            s[j] = s[j - 1];
            j--;
            if (--budget == 0) {
                s[j] = x;
                qsort(s, n, sizeof(*s), slot_cmp);
                return;
            }
        }
        s[j] = x;
    }
}

/* ---- runs ---------------------------------------------------------------------------------- */

static void runs_replace(firn__pkindex *idx, size_t from, size_t n, firn__pkrun *with)
{
    for (size_t i = from; i < from + n; i++) {
        firn__pkcache_drop_run(idx->cache, idx->runs[i]->id);
        firn__pkrun_close(idx->runs[i], true);
    }
    size_t add = with ? 1 : 0;
    size_t rest = idx->n_runs - from - n;
    if (add > n)
        idx->runs = firn_reallocarray(idx->runs, idx->n_runs + add - n, sizeof(*idx->runs));
    memmove(idx->runs + from + add, idx->runs + from + n, rest * sizeof(*idx->runs));
    if (with)
        idx->runs[from] = with;
    idx->n_runs = idx->n_runs + add - n;
}

typedef struct merge_src {
    firn__pkrun_iter it;
    uint64_t h;     /* key of the current entry, kept here so the heap compares without */
    uint32_t c;     /* reaching into the iterator's page */
    uint32_t order; /* 0 = newest: wins ties */
} merge_src;

/* Advances s and copies the key of its new current entry. */
static firn_rc src_next(merge_src *s, firn_err *err)
{
    FIRN_TRY(firn__pkrun_iter_next(&s->it, err));
    if (!s->it.done) {
        s->h = s->it.ents[s->it.i].h;
        s->c = s->it.ents[s->it.i].c;
    }
    return FIRN_OK;
}

static bool src_less(const merge_src *a, const merge_src *b)
{
    if (a->h != b->h)
        return a->h < b->h;
    return a->c != b->c ? a->c < b->c : a->order < b->order;
}

static void heap_down(merge_src **h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < n && src_less(h[l], h[m]))
            m = l;
        if (l + 1 < n && src_less(h[l + 1], h[m]))
            m = l + 1;
        if (m == i)
            return;
        merge_src *t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* Level of a run of n entries by size: flushes are level 0, each level MERGE_FANIN times
 * larger. */
static uint32_t size_level(const firn__pkindex *idx, uint64_t n)
{
    uint64_t s = (uint64_t)idx->mt_cap_max * MT_LOAD_4 / 4;
    uint32_t level = 0;
    while (s < n && level < 30) {
        s *= MERGE_FANIN;
        level++;
    }
    return level;
}

static void
merge_shape(const firn__pkindex *idx, size_t from, size_t n, bool drop_tombs, firn__pkrun_shape *sh)
{
    memset(sh, 0, sizeof(*sh));
    for (size_t i = from; i < from + n; i++) {
        const firn__pkrun *r = idx->runs[i];
        sh->n_upper += r->n_entries - (drop_tombs ? r->n_tombs : 0);
        uint32_t mf = r->fb >= 32 ? UINT32_MAX : (1u << r->fb) - 1;
        uint32_t mp = r->pb >= 32 ? UINT32_MAX : (1u << r->pb) - 1;
        sh->max_file1 = mf > sh->max_file1 ? mf : sh->max_file1;
        sh->max_pos = mp > sh->max_pos ? mp : sh->max_pos;
        sh->has_c |= r->has_c != 0;
        sh->level = r->level + 1 > sh->level ? r->level + 1 : sh->level;
    }
    uint32_t by_size = size_level(idx, sh->n_upper);
    sh->level = by_size > sh->level ? by_size : sh->level;
}

/* k-way merge of the heap into w: the newest entry of each key, tombstones dropped when the
 * merge reaches the oldest run. */
static firn_rc
merge_loop(merge_src **heap, size_t n, bool drop_tombs, firn__pkrun_writer *w, firn_err *err)
{
    bool have_last = false;
    uint64_t last_h = 0;
    uint32_t last_c = 0;
    while (n > 0) {
        merge_src *s = heap[0];
        pk_entry e = s->it.ents[s->it.i];
        if (!have_last || e.h != last_h || e.c != last_c) {
            have_last = true;
            last_h = e.h;
            last_c = e.c;
            if (!(drop_tombs && e.file1 == PK_TOMB))
                FIRN_TRY(firn__pkrun_writer_add(w, &e, err));
        }
        FIRN_TRY(src_next(s, err));
        if (s->it.done)
            heap[0] = heap[--n];
        heap_down(heap, n, 0);
    }
    return FIRN_OK;
}

/* Merges runs [from, from + n) (contiguous in age) into one run in their place. */
static firn_rc merge_runs(firn__pkindex *idx, size_t from, size_t n, firn_err *err)
{
    bool drop_tombs = from + n == idx->n_runs;
    firn__pkrun_shape sh;
    merge_shape(idx, from, n, drop_tombs, &sh);
    merge_src *srcs = firn_calloc(n, sizeof(*srcs));
    merge_src **heap = firn_calloc(n, sizeof(*heap));
    size_t hn = 0;
    firn__pkrun_writer *w = NULL;
    firn__pkrun *out = NULL;
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; i < n; i++) {
        firn__pkrun_iter_init(&srcs[i].it, idx->runs[from + i]);
        srcs[i].order = (uint32_t)i;
        if (rc == FIRN_OK)
            rc = src_next(&srcs[i], err);
        if (rc == FIRN_OK && !srcs[i].it.done)
            heap[hn++] = &srcs[i];
    }
    for (size_t i = hn; i-- > 0;)
        heap_down(heap, hn, i);
    if (rc == FIRN_OK)
        rc = firn__pkrun_writer_open(idx->dir, idx->next_run_id++, &sh, &w, err);
    if (rc == FIRN_OK)
        rc = merge_loop(heap, hn, drop_tombs, w, err);
    if (rc == FIRN_OK) {
        rc = firn__pkrun_writer_finish(w, &out, err);
        w = NULL;
    }
    firn__pkrun_writer_abort(w);
    for (size_t i = 0; i < n; i++)
        firn__pkrun_iter_deinit(&srcs[i].it);
    firn_free(srcs);
    firn_free(heap);
    if (rc == FIRN_ERR_PARSE)
        firn__pkindex_touch(idx);
    if (rc == FIRN_OK) {
        runs_replace(idx, from, n, out);
        idx->merges++;
    }
    return rc;
}

/* Size-tiered: the newest `fanin` runs of one level become one run of the next level. */
static firn_rc maybe_merge(firn__pkindex *idx, firn_err *err)
{
    size_t fanin = idx->bulk ? BULK_FANIN : MERGE_FANIN;
    while (idx->n_runs >= fanin) {
        uint32_t level = idx->runs[0]->level;
        bool same = true;
        for (size_t i = 1; i < fanin && same; i++)
            same = idx->runs[i]->level == level;
        if (!same)
            break;
        FIRN_TRY(merge_runs(idx, 0, fanin, err));
    }
    return FIRN_OK;
}

/* ---- flushing the memtable ----------------------------------------------------------------- */

static void mt_clear(firn__pkindex *idx)
{
    memset(idx->mt, 0xFF, idx->mt_len * sizeof(pk_slot));
    idx->mt_used = 0;
}

/* Puts the compacted, sorted slots [0, n) back in their homes after a failed flush. */
static void mt_restore(firn__pkindex *idx, size_t n)
{
    pk_slot *copy = firn_memdup(idx->mt, n * sizeof(pk_slot));
    mt_clear(idx);
    bool ok = mt_place(idx, copy, n);
    FIRN_ASSERT(ok); /* the same entries fitted before, in arrival order */
    firn_free(copy);
}

/* Appends the sorted slots s[0..n) to the run being written, a batch of entries at a time: the
 * newest of equal keys only (the sort is stable: the last of them), tombstones dropped when
 * nothing older is left to shadow. */
static firn_rc
emit_slots(firn__pkrun_writer *w, const pk_slot *s, size_t n, bool drop_tombs, firn_err *err)
{
    enum { BATCH = 512 };
    pk_entry *batch = firn_malloc(BATCH * sizeof(*batch));
    size_t m = 0;
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; i < n && rc == FIRN_OK; i++) {
        if (i + 1 < n && s[i + 1].hhi == s[i].hhi && s[i + 1].hlo == s[i].hlo &&
            s[i + 1].c == s[i].c)
            continue;
        if (drop_tombs && s[i].file1 == PK_TOMB)
            continue;
        batch[m++] = (pk_entry){slot_h(&s[i]), s[i].c, s[i].file1, s[i].pos};
        if (m == BATCH) {
            rc = firn__pkrun_writer_add_n(w, batch, m, err);
            m = 0;
        }
    }
    if (rc == FIRN_OK && m > 0)
        rc = firn__pkrun_writer_add_n(w, batch, m, err);
    firn_free(batch);
    return rc;
}

static firn_rc write_slots(firn__pkindex *idx, size_t n, firn__pkrun **out, firn_err *err)
{
    firn__pkrun_shape sh = {n, 0, 0, false, 0};
    for (size_t i = 0; i < n; i++) {
        const pk_slot *s = &idx->mt[i];
        sh.max_file1 = s->file1 > sh.max_file1 ? s->file1 : sh.max_file1;
        sh.max_pos = s->pos > sh.max_pos ? s->pos : sh.max_pos;
        sh.has_c |= s->c != 0;
    }
    firn__pkrun_writer *w = NULL;
    FIRN_TRY(firn__pkindex_ensure_dir(idx, err));
    FIRN_TRY(firn__pkrun_writer_open(idx->dir, idx->next_run_id++, &sh, &w, err));
    firn_rc rc = emit_slots(w, idx->mt, n, false, err); /* keys unique, tombstones kept */
    if (rc) {
        firn__pkrun_writer_abort(w);
        return rc;
    }
    return firn__pkrun_writer_finish(w, out, err);
}

static firn_rc mt_flush(firn__pkindex *idx, firn_err *err)
{
    bool drop_tombs = idx->n_runs == 0; /* nothing older to shadow */
    size_t n = 0;
    for (size_t i = 0; i < idx->mt_len; i++) {
        uint32_t f = idx->mt[i].file1;
        if (f != PK_MT_EMPTY && !(drop_tombs && f == PK_TOMB))
            idx->mt[n++] = idx->mt[i];
    }
    sort_slots(idx->mt, n);
    firn__pkrun *run = NULL;
    firn_rc rc = n ? write_slots(idx, n, &run, err) : FIRN_OK;
    if (rc) {
        mt_restore(idx, n);
        return rc;
    }
    mt_clear(idx);
    if (run) {
        run->level = 0;
        runs_replace(idx, 0, 0, run);
        idx->flushes++;
    }
    return maybe_merge(idx, err);
}

/* ---- bulk spill ---------------------------------------------------------------------------- */

/* A bulk load (a table's first copy) that outgrows the memtable does not write it out as runs to
 * merge at the end. Its keys go, in arrival order, to SPILL_PARTS partitions by the top 8 bits of
 * their hash: a buffer each, written in blocks to one unlinked temporary file. When bulk mode ends
 * (or anything else needs the index) each partition is read back, sorted in memory and appended
 * to one run, in partition order: every key is written once to the temporary file and once to
 * the run, where flush-and-merge decoded and rewrote each key once more and spent a heap step on
 * it. A partition larger than the sort space (a copy of more than about 200 M keys with the
 * default budget) is sorted in pieces, each piece after the first starting a new run; bulk
 * mode's end then merges those runs as before. */

#define SPILL_PARTS 256u

typedef struct spill_block {
    uint64_t off;       /* in the temporary file */
    uint32_t n;         /* slots */
    uint32_t slot_size; /* bytes a slot: sizeof(pk_slot16) or sizeof(pk_slot) */
} spill_block;

/* A spilled slot without a check hash: 16 bytes where a pk_slot takes 20 (hhi at the same
 * offset). Every key of a spill is in this form until the first key with a check hash arrives. */
typedef struct pk_slot16 {
    uint32_t hlo, hhi, file1, pos;
} pk_slot16;

typedef struct spill_part {
    spill_block *blocks;
    uint32_t n_blocks, cap_blocks;
    uint32_t n_buf; /* slots waiting in the partition's buffer */
} spill_part;

typedef struct pk_spill {
    int fd;
    char *path;         /* for messages: the file itself is unlinked once open */
    uint64_t off;       /* bytes written */
    size_t part_bytes;  /* bytes of each partition's buffer */
    uint32_t slot_size; /* sizeof(pk_slot16) while no key has a check hash (has_c), then pk_slot */
    uint32_t buf_slots; /* capacity of each partition's buffer: part_bytes / slot_size */
    uint8_t *buf;       /* SPILL_PARTS * part_bytes */
    spill_part parts[SPILL_PARTS];
    uint64_t n; /* slots spilled */
    uint32_t max_file1, max_pos;
    bool has_c;
} pk_spill;

static void spill_free(firn__pkindex *idx)
{
    pk_spill *sp = idx->spill;
    if (!sp)
        return;
    if (sp->fd >= 0)
        close(sp->fd);
    for (size_t p = 0; p < SPILL_PARTS; p++)
        firn_free(sp->parts[p].blocks);
    firn_free(sp->buf);
    firn_free(sp->path);
    firn_free(sp);
    idx->spill = NULL;
}

static inline void *spill_buf(const pk_spill *sp, uint32_t p)
{
    return sp->buf + (size_t)p * sp->part_bytes;
}

static firn_rc spill_write_block(pk_spill *sp, uint32_t p, firn_err *err)
{
    spill_part *part = &sp->parts[p];
    if (part->n_buf == 0)
        return FIRN_OK;
    size_t bytes = (size_t)part->n_buf * sp->slot_size;
    /* At the recorded end, whatever a failed write before this one left behind it. */
    if (lseek(sp->fd, (off_t)sp->off, SEEK_SET) < 0)
        return firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not seek in \"%s\"", sp->path);
    FIRN_TRY(firn__pk_write_all(sp->fd, spill_buf(sp, p), bytes, sp->path, err));
    if (part->n_blocks == part->cap_blocks) {
        part->cap_blocks = part->cap_blocks ? part->cap_blocks * 2 : 8;
        part->blocks = firn_reallocarray(part->blocks, part->cap_blocks, sizeof(spill_block));
    }
    part->blocks[part->n_blocks++] = (spill_block){sp->off, part->n_buf, sp->slot_size};
    sp->off += bytes;
    part->n_buf = 0;
    return FIRN_OK;
}

/* The first key with a check hash: the 16-byte slots waiting are written, and slots are 20 bytes
 * from here on (the blocks remember their size). */
static firn_rc spill_widen(pk_spill *sp, firn_err *err)
{
    for (uint32_t p = 0; p < SPILL_PARTS; p++)
        FIRN_TRY(spill_write_block(sp, p, err));
    sp->slot_size = sizeof(pk_slot);
    sp->buf_slots = (uint32_t)(sp->part_bytes / sizeof(pk_slot));
    sp->has_c = true;
    return FIRN_OK;
}

static firn_rc spill_put(pk_spill *sp, const pk_slot *s, firn_err *err)
{
    if (s->c != 0 && !sp->has_c)
        FIRN_TRY(spill_widen(sp, err));
    uint32_t p = s->hhi >> 24;
    spill_part *part = &sp->parts[p];
    if (sp->has_c)
        ((pk_slot *)spill_buf(sp, p))[part->n_buf++] = *s;
    else
        ((pk_slot16 *)spill_buf(sp, p))[part->n_buf++] =
            (pk_slot16){s->hlo, s->hhi, s->file1, s->pos};
    sp->n++;
    sp->max_file1 = s->file1 > sp->max_file1 ? s->file1 : sp->max_file1; /* a tombstone's is 0 */
    sp->max_pos = s->pos > sp->max_pos ? s->pos : sp->max_pos;
    return part->n_buf == sp->buf_slots ? spill_write_block(sp, p, err) : FIRN_OK;
}

/* Stores the pk_slot16 {hash h, file1, pos} at dst as two 64-bit words (hlo and hhi are h's halves
 * in memory order on a little-endian host). */
static inline void put_slot16(uint8_t *dst, uint64_t h, uint32_t file1, uint32_t pos)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    uint64_t w0 = (uint64_t)(uint32_t)h << 32 | h >> 32, w1 = (uint64_t)file1 << 32 | pos;
#else
    uint64_t w0 = h, w1 = (uint64_t)pos << 32 | file1;
#endif
    memcpy(dst, &w0, 8);
    memcpy(dst + 8, &w1, 8);
}

/* The loop of spill_put_keys for one slot size (inlined with a constant has_c): the buffers'
 * base, size and capacity kept in locals (slot stores could alias them), a partition's buffer
 * written when full. */
static inline __attribute__((always_inline)) firn_rc put_keys_as(pk_spill *sp,
                                                                 const firn__pkkey *keys,
                                                                 size_t n,
                                                                 uint32_t file1,
                                                                 uint32_t pos,
                                                                 bool has_c,
                                                                 firn_err *err)
{
    uint8_t *const buf = sp->buf;
    const size_t part_bytes = sp->part_bytes;
    const uint32_t buf_slots = sp->buf_slots;
    for (size_t i = 0; i < n; i++) {
        uint64_t h = keys[i].h;
        uint32_t p = (uint32_t)(h >> 56);
        spill_part *part = &sp->parts[p];
        uint32_t at = part->n_buf;
        if (has_c)
            ((pk_slot *)(buf + p * part_bytes))[at] =
                (pk_slot){(uint32_t)h, (uint32_t)(h >> 32), keys[i].c, file1, pos + (uint32_t)i};
        else
            put_slot16(buf + p * part_bytes + (size_t)at * sizeof(pk_slot16), h, file1,
                       pos + (uint32_t)i);
        part->n_buf = at + 1;
        if (at + 1 == buf_slots)
            FIRN_TRY(spill_write_block(sp, p, err));
    }
    return FIRN_OK;
}

/* spill_put of new keys[0..n) at rows pos, pos + 1, ... of file1, in one loop of the spill's
 * slot size: the partition buffer written when full, the spill's maximums updated once. */
static firn_rc spill_put_keys(
    pk_spill *sp, const firn__pkkey *keys, size_t n, uint32_t file1, uint32_t pos, firn_err *err)
{
    uint32_t c_or = 0;
    for (size_t i = 0; i < n; i++)
        c_or |= keys[i].c;
    if (c_or != 0 && !sp->has_c)
        FIRN_TRY(spill_widen(sp, err));
    sp->n += n;
    sp->max_file1 = file1 > sp->max_file1 ? file1 : sp->max_file1;
    uint32_t last_pos = pos + (uint32_t)(n - 1);
    sp->max_pos = last_pos > sp->max_pos ? last_pos : sp->max_pos;
    return sp->has_c ? put_keys_as(sp, keys, n, file1, pos, true, err)
                     : put_keys_as(sp, keys, n, file1, pos, false, err);
}

/* The loop of spill_put_buffer for one slot size, as put_keys_as. */
static inline __attribute__((always_inline)) firn_rc
put_buffer_as(pk_spill *sp, const pk_slot *s, size_t n, bool has_c, firn_err *err)
{
    uint8_t *const buf = sp->buf;
    const size_t part_bytes = sp->part_bytes;
    const uint32_t buf_slots = sp->buf_slots;
    for (size_t i = 0; i < n; i++) {
        uint32_t p = s[i].hhi >> 24;
        spill_part *part = &sp->parts[p];
        uint32_t at = part->n_buf;
        if (has_c)
            ((pk_slot *)(buf + p * part_bytes))[at] = s[i];
        else
            put_slot16(buf + p * part_bytes + (size_t)at * sizeof(pk_slot16), slot_h(&s[i]),
                       s[i].file1, s[i].pos);
        part->n_buf = at + 1;
        if (at + 1 == buf_slots)
            FIRN_TRY(spill_write_block(sp, p, err));
    }
    return FIRN_OK;
}

/* spill_put of the bulk buffer's slots in one loop, its maximums taken as they were kept. */
static firn_rc spill_put_buffer(pk_spill *sp, const firn__pkindex *idx, firn_err *err)
{
    if (idx->bb_has_c && !sp->has_c)
        FIRN_TRY(spill_widen(sp, err));
    sp->n += idx->bb_n;
    sp->max_file1 = idx->bb_max_file1 > sp->max_file1 ? idx->bb_max_file1 : sp->max_file1;
    sp->max_pos = idx->bb_max_pos > sp->max_pos ? idx->bb_max_pos : sp->max_pos;
    return sp->has_c ? put_buffer_as(sp, idx->bb, idx->bb_n, true, err)
                     : put_buffer_as(sp, idx->bb, idx->bb_n, false, err);
}

/* The memtable's entries go to a new spill, oldest state first, and the memtable shrinks to its
 * smallest size: the partition buffers take half its memory, the sort at the end all of it. */
static firn_rc spill_begin(firn__pkindex *idx, firn_err *err)
{
    FIRN_TRY(firn__pkindex_ensure_dir(idx, err));
    pk_spill *sp = firn_calloc(1, sizeof(*sp));
    char name[48];
    snprintf(name, sizeof(name), "spill-%u.tmp", idx->next_run_id);
    sp->path = firn__pk_path(idx->dir, name);
    (void)unlink(sp->path); /* left by a process killed between its open and unlink */
    sp->fd = open(sp->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (sp->fd < 0) {
        firn_rc rc =
            firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not create \"%s\"", sp->path);
        firn_free(sp->path);
        firn_free(sp);
        return rc;
    }
    (void)unlink(sp->path); /* gone with the descriptor, also when the process dies */
    size_t bytes = idx->mt_cap_max * sizeof(pk_slot) / 2 / SPILL_PARTS;
    size_t wide_slots = bytes / sizeof(pk_slot) > 64 ? bytes / sizeof(pk_slot) : 64;
    sp->part_bytes = wide_slots * sizeof(pk_slot);
    sp->slot_size = sizeof(pk_slot16);
    sp->buf_slots = (uint32_t)(sp->part_bytes / sizeof(pk_slot16));
    sp->buf = firn_malloc(SPILL_PARTS * sp->part_bytes);
    idx->spill = sp;
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; i < idx->mt_len && rc == FIRN_OK; i++)
        if (idx->mt[i].file1 != PK_MT_EMPTY)
            rc = spill_put(sp, &idx->mt[i], err);
    if (rc == FIRN_OK) /* newer than the memtable's */
        rc = spill_put_buffer(sp, idx, err);
    if (rc) { /* the keys are still where they were */
        spill_free(idx);
        return rc;
    }
    bb_free(idx);
    firn_free(idx->mt);
    mt_alloc_smallest(idx);
    return FIRN_OK;
}

/* One pass of a least-significant-digit radix sort: turns the counts of each 8-bit digit among
 * n items into the digit's first position; false when one digit holds all n (the pass would not
 * move anything and is skipped). */
static bool radix_starts(size_t count[256], size_t n, unsigned first_digit)
{
    if (count[first_digit] == n)
        return false;
    size_t at = 0;
    for (size_t d = 0; d < 256; d++) {
        size_t c = count[d];
        count[d] = at;
        at += c;
    }
    return true;
}

/* Digits of the spill's radix sort, lowest first: SPILL_DIGIT_BITS bits of a slot's hhi each
 * (the last one what is left of its 32). */
#define SPILL_DIGIT_BITS 12u
#define SPILL_DIGIT_N    (1u << SPILL_DIGIT_BITS)
#define SPILL_DIGITS     ((32u + SPILL_DIGIT_BITS - 1) / SPILL_DIGIT_BITS)
#define SPILL_COUNT_N    (SPILL_DIGITS * SPILL_DIGIT_N)

static inline uint32_t spill_digit(uint32_t hhi, unsigned d)
{
    return (hhi >> (d * SPILL_DIGIT_BITS)) & (SPILL_DIGIT_N - 1);
}

/* The radix part of the spill's sort of n slots of `size` bytes (pk_slot or pk_slot16: hhi at
 * byte 4 of both): a least-significant-digit radix sort of the upper 32 hash bits in digits of
 * 12, 12 and 8 bits, all counted in one pass (a digit the same for every slot, such as the
 * partition's top 8 bits, moves nothing and is skipped), from s into tmp or back. digits: how many
 * of them to sort by, lowest first (SPILL_DIGITS - 1 for a spill partition, whose top 8 bits are
 * its number: that digit is not even counted). count is SPILL_COUNT_N counters of scratch.
 * Inlined with a constant size and digits, so a slot moves in one or two vector stores. Returns
 * where the slots are. */
static inline __attribute__((always_inline)) void *
radix_hhi(void *s, void *tmp, size_t n, size_t size, unsigned digits, uint32_t *count)
{
    uint8_t *src = s, *dst = tmp;
    memset(count, 0, digits * SPILL_DIGIT_N * sizeof(*count));
    for (size_t i = 0; i < n; i++) {
        uint32_t hhi;
        memcpy(&hhi, src + i * size + 4, 4);
        for (unsigned d = 0; d < digits; d++)
            count[d * SPILL_DIGIT_N + spill_digit(hhi, d)]++;
    }
    for (unsigned d = 0; d < digits; d++) {
        uint32_t *c = count + d * SPILL_DIGIT_N;
        uint32_t hhi0;
        memcpy(&hhi0, src + 4, 4);
        if (c[spill_digit(hhi0, d)] == n)
            continue;
        uint32_t at = 0;
        for (uint32_t v = 0; v < SPILL_DIGIT_N; v++) {
            uint32_t k = c[v];
            c[v] = at;
            at += k;
        }
        for (size_t i = 0; i < n; i++) {
            uint32_t hhi;
            memcpy(&hhi, src + i * size + 4, 4);
            memcpy(dst + (size_t)c[spill_digit(hhi, d)]++ * size, src + i * size, size);
        }
        uint8_t *t = src;
        src = dst;
        dst = t;
    }
    return src;
}

/* Sorts s[0..n) by (h, c), stably: radix_hhi, then sort_slots for what the upper 32 bits leave
 * unordered (a few neighbours), into tmp or s. in_part: the slots are a spill partition's (one
 * top 8 bits). Returns where the sorted slots are. */
static pk_slot *spill_sort(pk_slot *s, pk_slot *tmp, size_t n, bool in_part, uint32_t *count)
{
    FIRN_ASSERT(n <= UINT32_MAX);
    if (n < 2)
        return s;
    pk_slot *src = in_part ? radix_hhi(s, tmp, n, sizeof(pk_slot), SPILL_DIGITS - 1, count)
                           : radix_hhi(s, tmp, n, sizeof(pk_slot), SPILL_DIGITS, count);
    sort_slots(src, n);
    return src;
}

static inline uint64_t slot16_h(const pk_slot16 *s)
{
    return (uint64_t)s->hhi << 32 | s->hlo;
}

static int slot16_cmp(const void *a, const void *b)
{
    uint64_t x = slot16_h(a), y = slot16_h(b);
    return x == y ? 0 : (x < y ? -1 : 1);
}

/* spill_sort of a spill partition's 16-byte slots (h alone orders them): the insertion pass
 * compares one 64-bit hash, with the same budget of moves before qsort takes over. */
static pk_slot16 *spill_sort16(pk_slot16 *s, pk_slot16 *tmp, size_t n, uint32_t *count)
{
    FIRN_ASSERT(n <= UINT32_MAX);
    if (n < 2)
        return s;
    pk_slot16 *src = radix_hhi(s, tmp, n, sizeof(pk_slot16), SPILL_DIGITS - 1, count);
    size_t budget = 32 * n + 1024;
    for (size_t i = 1; i < n; i++) {
        uint64_t h = slot16_h(&src[i]);
        if (slot16_h(&src[i - 1]) <= h)
            continue;
        pk_slot16 x = src[i];
        size_t j = i;
        for (; j > 0 && h < slot16_h(&src[j - 1]); j--) {
            src[j] = src[j - 1];
            if (--budget == 0) {
                src[j - 1] = x;
                qsort(src, n, sizeof(*src), slot16_cmp);
                return src;
            }
        }
        src[j] = x;
    }
    return src;
}

/* emit_slots of sorted 16-byte slots (no check hashes). */
static firn_rc
emit_slots16(firn__pkrun_writer *w, const pk_slot16 *s, size_t n, bool drop_tombs, firn_err *err)
{
    enum { BATCH = 512 };
    pk_entry *batch = firn_malloc(BATCH * sizeof(*batch));
    size_t m = 0;
    firn_rc rc = FIRN_OK;
    uint64_t h = n ? slot16_h(&s[0]) : 0;
    for (size_t i = 0; i < n && rc == FIRN_OK; i++) {
        /* Each hash loaded once: the next one, or (after the last) one that differs. */
        uint64_t next = i + 1 < n ? slot16_h(&s[i + 1]) : h + 1;
        uint64_t this_h = h;
        h = next;
        if (next == this_h)
            continue;
        if (drop_tombs && s[i].file1 == PK_TOMB)
            continue;
        batch[m++] = (pk_entry){this_h, 0, s[i].file1, s[i].pos};
        if (m == BATCH) {
            rc = firn__pkrun_writer_add_n(w, batch, m, err);
            m = 0;
        }
    }
    if (rc == FIRN_OK && m > 0)
        rc = firn__pkrun_writer_add_n(w, batch, m, err);
    firn_free(batch);
    return rc;
}

/* The sort space of spill_end: two arrays of max_n slots of the spill's slot size. */
typedef struct spill_space {
    void *a, *b;
    size_t max_n;
    uint32_t *count;
} spill_space;

/* Reads the next piece of a partition, from block *blk on (whole blocks, as many as fit), into the
 * sort space and sorts it: *out the sorted slots (pk_slot16 while the spill has no check hash,
 * else pk_slot, 16-byte blocks written before the first check hash widened on the way), *out_n
 * how many. */
static firn_rc spill_piece(pk_spill *sp,
                           const spill_part *part,
                           uint32_t *blk,
                           spill_space *ss,
                           const void **out,
                           size_t *out_n,
                           firn_err *err)
{
    size_t n = 0;
    for (; *blk < part->n_blocks && n + part->blocks[*blk].n <= ss->max_n; ++*blk) {
        const spill_block *bk = &part->blocks[*blk];
        size_t bytes = (size_t)bk->n * bk->slot_size;
        if (bk->slot_size == sp->slot_size) {
            FIRN_TRY(firn__pk_read_at(sp->fd, (uint8_t *)ss->a + n * sp->slot_size, bytes, bk->off,
                                      sp->path, err));
        } else {
            FIRN_TRY(firn__pk_read_at(sp->fd, ss->b, bytes, bk->off, sp->path, err));
            const pk_slot16 *from = ss->b;
            pk_slot *to = (pk_slot *)ss->a + n;
            for (size_t j = 0; j < bk->n; j++)
                to[j] = (pk_slot){from[j].hlo, from[j].hhi, 0, from[j].file1, from[j].pos};
        }
        n += bk->n;
    }
    if (sp->has_c)
        *out = spill_sort(ss->a, ss->b, n, true, ss->count);
    else
        *out = spill_sort16(ss->a, ss->b, n, ss->count);
    *out_n = n;
    return FIRN_OK;
}

/* The spill becomes one run (more when a partition had to be sorted in pieces), placed as the
 * newest; on error the index is as it was, spill included. */
static firn_rc spill_end(firn__pkindex *idx, firn_err *err)
{
    pk_spill *sp = idx->spill;
    for (uint32_t p = 0; p < SPILL_PARTS; p++)
        FIRN_TRY(spill_write_block(sp, p, err));
    firn_free(sp->buf);
    sp->buf = NULL;
    /* The sort space is the memtable's share: two arrays, at least a block (of 16-byte slots, the
     * most a block holds) each. */
    spill_space ss;
    ss.max_n = idx->mt_cap_max / 2 * sizeof(pk_slot) / sp->slot_size;
    if (ss.max_n < sp->part_bytes / sizeof(pk_slot16))
        ss.max_n = sp->part_bytes / sizeof(pk_slot16);
    ss.a = firn_malloc(ss.max_n * sp->slot_size);
    ss.b = firn_malloc(ss.max_n * sp->slot_size);
    ss.count = firn_malloc(SPILL_COUNT_N * sizeof(uint32_t));
    bool drop_tombs = idx->n_runs == 0;
    firn__pkrun_shape sh = {sp->n, sp->max_file1, sp->max_pos, sp->has_c, 0};
    sh.level = size_level(idx, sp->n);
    firn__pkrun **out = NULL;
    size_t n_out = 0;
    firn__pkrun_writer *w = NULL;
    firn_rc rc = FIRN_OK;
    for (uint32_t p = 0; p < SPILL_PARTS && rc == FIRN_OK; p++) {
        const spill_part *part = &sp->parts[p];
        for (uint32_t blk = 0; blk < part->n_blocks && rc == FIRN_OK;) {
            /* A piece: whole blocks, as many as fit. The first of a partition follows what the
             * run holds (earlier partitions, lower hashes); a later one may not, and starts a
             * new run. Only the first can hold tombstones (the memtable's, spilled first). */
            bool first = blk == 0;
            const void *sorted;
            size_t n;
            rc = spill_piece(sp, part, &blk, &ss, &sorted, &n, err);
            if (rc)
                break;
            if (w && !first) {
                firn__pkrun *r = NULL;
                rc = firn__pkrun_writer_finish(w, &r, err);
                w = NULL;
                if (rc)
                    break;
                out = firn_reallocarray(out, n_out + 1, sizeof(*out));
                out[n_out++] = r;
            }
            if (!w) {
                rc = firn__pkrun_writer_open(idx->dir, idx->next_run_id++, &sh, &w, err);
                if (rc)
                    break;
            }
            rc = sp->has_c ? emit_slots(w, sorted, n, drop_tombs && first, err)
                           : emit_slots16(w, sorted, n, drop_tombs && first, err);
        }
    }
    if (rc == FIRN_OK && w) {
        firn__pkrun *r = NULL;
        rc = firn__pkrun_writer_finish(w, &r, err);
        w = NULL;
        if (rc == FIRN_OK) {
            out = firn_reallocarray(out, n_out + 1, sizeof(*out));
            out[n_out++] = r;
        }
    }
    firn__pkrun_writer_abort(w);
    firn_free(ss.a);
    firn_free(ss.b);
    firn_free(ss.count);
    if (rc == FIRN_OK) {
        for (size_t i = 0; i < n_out; i++) { /* the later run, the newer */
            out[i]->level = sh.level;
            runs_replace(idx, 0, 0, out[i]);
        }
        idx->flushes += n_out;
        spill_free(idx);
    } else {
        for (size_t i = 0; i < n_out; i++)
            firn__pkrun_close(out[i], true);
        sp->buf = firn_malloc(SPILL_PARTS * sp->part_bytes);
    }
    firn_free(out);
    return rc;
}

/* ---- bulk buffer --------------------------------------------------------------------------- */

/* A copy's keys (firn__pkindex_add_new in bulk mode), and keys set after them, are appended in
 * arrival order to a flat array instead of the memtable: no probe of a random line per key, no
 * table to clear before or after. The array takes up to half the memtable's share of the budget,
 * the sort's second array at its end the other half. When bulk mode ends, or anything needs the
 * index, it is sorted as a spill partition is and written as one run; when it is full, the spill
 * takes its keys (after the memtable's, which are older) and goes on from there. */

static size_t bb_max(const firn__pkindex *idx)
{
    size_t n = idx->mem_limit / 8 * 3 / 2 / sizeof(pk_slot);
    return n > 64 ? n : 64;
}

static void bb_free(firn__pkindex *idx)
{
    firn_free(idx->bb);
    idx->bb = NULL;
    idx->bb_n = idx->bb_cap = 0;
    idx->bb_max_file1 = idx->bb_max_pos = 0;
    idx->bb_has_c = false;
}

/* Makes room for at least one more slot while the array may grow (doubling from 4096 slots, or
 * at once to a reserved count); false when it is full. */
static bool bb_room(firn__pkindex *idx)
{
    if (idx->bb_n < idx->bb_cap)
        return true;
    size_t max = bb_max(idx);
    if (idx->bb_cap >= max)
        return false;
    size_t cap = idx->bb_cap ? idx->bb_cap * 2 : 4096;
    if (idx->reserve_keys > cap)
        cap = idx->reserve_keys < max ? (size_t)idx->reserve_keys : max;
    idx->reserve_keys = 0;
    cap = cap < max ? cap : max;
    idx->bb = firn_reallocarray(idx->bb, cap, sizeof(pk_slot));
    idx->bb_cap = cap;
    return true;
}

/* Appends new keys[0..n) at rows pos, pos + 1, ... of file1 while they fit; returns how many. */
static size_t
bb_add_keys(firn__pkindex *idx, const firn__pkkey *keys, size_t n, uint32_t file1, uint32_t pos)
{
    size_t i = 0;
    uint32_t c_or = 0;
    while (i < n && bb_room(idx)) {
        size_t m = idx->bb_cap - idx->bb_n < n - i ? idx->bb_cap - idx->bb_n : n - i;
        pk_slot *s = idx->bb + idx->bb_n;
        for (size_t j = 0; j < m; j++) {
            uint64_t h = keys[i + j].h;
            s[j] = (pk_slot){(uint32_t)h, (uint32_t)(h >> 32), keys[i + j].c, file1,
                             pos + (uint32_t)(i + j)};
            c_or |= keys[i + j].c;
        }
        idx->bb_n += m;
        i += m;
    }
    if (i > 0) {
        uint32_t last_pos = pos + (uint32_t)(i - 1);
        idx->bb_max_file1 = file1 > idx->bb_max_file1 ? file1 : idx->bb_max_file1;
        idx->bb_max_pos = last_pos > idx->bb_max_pos ? last_pos : idx->bb_max_pos;
        idx->bb_has_c |= c_or != 0;
    }
    return i;
}

/* Appends one slot, or starts the spill with the array's keys when it is full. */
static firn_rc bb_put(firn__pkindex *idx, const pk_slot *s, firn_err *err)
{
    if (bb_room(idx)) {
        idx->bb[idx->bb_n++] = *s;
        idx->bb_max_file1 = s->file1 > idx->bb_max_file1 ? s->file1 : idx->bb_max_file1;
        idx->bb_max_pos = s->pos > idx->bb_max_pos ? s->pos : idx->bb_max_pos;
        idx->bb_has_c |= s->c != 0;
        return FIRN_OK;
    }
    FIRN_TRY(spill_begin(idx, err));
    return spill_put(idx->spill, s, err);
}

/* The array becomes the newest run (the memtable's older entries a run below it first). On error
 * the array is kept and the index is whole. */
static firn_rc bb_end(firn__pkindex *idx, firn_err *err)
{
    if (idx->bb_n == 0)
        return FIRN_OK;
    if (idx->mt_used > 0)
        FIRN_TRY(mt_flush(idx, err));
    FIRN_TRY(firn__pkindex_ensure_dir(idx, err));
    size_t n = idx->bb_n;
    pk_slot *tmp = firn_malloc(n * sizeof(pk_slot));
    uint32_t *count = firn_malloc(SPILL_COUNT_N * sizeof(uint32_t));
    const pk_slot *s = spill_sort(idx->bb, tmp, n, false, count);
    firn_free(count);
    /* As a spill's: keys set twice count twice in the bound (a copy has none). */
    firn__pkrun_shape sh = {n, idx->bb_max_file1, idx->bb_max_pos, idx->bb_has_c, 0};
    sh.level = size_level(idx, n);
    firn__pkrun_writer *w = NULL;
    firn__pkrun *run = NULL;
    firn_rc rc = firn__pkrun_writer_open(idx->dir, idx->next_run_id++, &sh, &w, err);
    if (rc == FIRN_OK)
        rc = emit_slots(w, s, n, idx->n_runs == 0, err);
    if (rc == FIRN_OK) {
        rc = firn__pkrun_writer_finish(w, &run, err);
        w = NULL;
    }
    firn__pkrun_writer_abort(w);
    if (rc && s == tmp) { /* keep the sorted copy (stable: equal keys in arrival order) */
        firn_free(idx->bb);
        idx->bb = tmp;
        idx->bb_cap = n;
        return rc;
    }
    firn_free(tmp);
    if (rc)
        return rc;
    bb_free(idx);
    if (run) {
        runs_replace(idx, 0, 0, run);
        idx->flushes++;
    }
    return maybe_merge(idx, err);
}

/* A spill or a bulk buffer becomes runs: what lookups, removals and flushes need first. */
static firn_rc bulk_settle(firn__pkindex *idx, firn_err *err)
{
    if (idx->spill)
        return spill_end(idx, err);
    return bb_end(idx, err);
}

firn_rc firn__pkindex_flush(firn__pkindex *idx, firn_err *err)
{
    FIRN_TRY(bulk_settle(idx, err));
    return mt_flush(idx, err);
}

/* Makes sure one more slot fits: grows the table while the budget allows, else flushes. */
static firn_rc mt_room(firn__pkindex *idx, firn_err *err)
{
    if ((idx->mt_used + 1) * 4 <= idx->mt_cap * MT_LOAD_4)
        return FIRN_OK;
    if (idx->mt_shift > 0 && mt_grow(idx))
        return FIRN_OK;
    return mt_flush(idx, err);
}

/* A slot for k: existing (*found) or new and empty. */
static firn_rc
pk_slot_for(firn__pkindex *idx, firn__pkkey k, pk_slot **out, bool *found, firn_err *err)
{
    size_t at = mt_probe(idx, k, found);
    if (*found) {
        *out = &idx->mt[at];
        return FIRN_OK;
    }
    if (at == SIZE_MAX || (idx->mt_used + 1) * 4 > idx->mt_cap * MT_LOAD_4) {
        /* the table grows or flushes (mt_room), or the probe ran off its end: probe again */
        FIRN_TRY(mt_room(idx, err));
        at = mt_probe(idx, k, found);
    }
    if (at == SIZE_MAX) {
        FIRN_TRY(mt_flush(idx, err));
        at = mt_probe(idx, k, found);
        FIRN_ASSERT(at != SIZE_MAX);
    }
    pk_slot *s = &idx->mt[at];
    s->hlo = (uint32_t)k.h;
    s->hhi = (uint32_t)(k.h >> 32);
    s->c = k.c;
    idx->mt_used++;
    *out = s;
    return FIRN_OK;
}

/* firn__pkindex_set once the index is touched: k -> (file1, pos). */
static firn_rc set_slot(
    firn__pkindex *idx, firn__pkkey k, uint32_t file1, uint32_t pos, bool present, firn_err *err)
{
    if (idx->bulk && !idx->spill && idx->mt_shift == 0 &&
        (idx->mt_used + 1) * 4 > idx->mt_cap * MT_LOAD_4)
        FIRN_TRY(spill_begin(idx, err)); /* where bulk mode would flush the memtable */
    if (idx->spill ||
        idx->bb_n > 0) { /* after the copy's keys, which are newer than the memtable */
        pk_slot in = {(uint32_t)k.h, (uint32_t)(k.h >> 32), k.c, file1, pos};
        FIRN_TRY(idx->spill ? spill_put(idx->spill, &in, err) : bb_put(idx, &in, err));
        if (!present)
            idx->live++;
        return FIRN_OK;
    }
    if (idx->reserve_keys != 0) {
        mt_reserve(idx, idx->reserve_keys);
        idx->reserve_keys = 0;
    }
    pk_slot *s;
    bool found;
    FIRN_TRY(pk_slot_for(idx, k, &s, &found, err));
    if (found ? s->file1 == PK_TOMB : !present)
        idx->live++;
    s->file1 = file1;
    s->pos = pos;
    return FIRN_OK;
}

firn_rc
firn__pkindex_set(firn__pkindex *idx, firn__pkkey k, firn__pkloc loc, bool present, firn_err *err)
{
    FIRN_ASSERT(loc.file < PK_FILE_MAX);
    firn__pkindex_touch(idx);
    return set_slot(idx, k, loc.file + 1, loc.pos, present, err);
}

firn_rc firn__pkindex_add_new(firn__pkindex *idx,
                              const firn__pkkey *keys,
                              size_t n,
                              uint32_t file,
                              uint32_t first_pos,
                              firn_err *err)
{
    enum { AHEAD = 8 }; /* memtable lines fetched ahead: each key lands on a random one */
    FIRN_ASSERT(file < PK_FILE_MAX);
    FIRN_ASSERT(n == 0 || (uint64_t)first_pos + (n - 1) <= UINT32_MAX);
    firn__pkindex_touch(idx);
    size_t i = 0;
    if (idx->bulk && !idx->spill) {
        i = bb_add_keys(idx, keys, n, file + 1, first_pos);
        idx->live += i;
        if (i == n)
            return FIRN_OK;
        FIRN_TRY(spill_begin(idx, err));
    }
    for (; i < n && !idx->spill; i++) {
        if (i + AHEAD < n && idx->mt_len)
            __builtin_prefetch(&idx->mt[mt_home(idx, keys[i + AHEAD].h)], 1);
        FIRN_TRY(set_slot(idx, keys[i], file + 1, first_pos + (uint32_t)i, false, err));
    }
    if (i == n)
        return FIRN_OK;
    idx->live += n - i;
    return spill_put_keys(idx->spill, keys + i, n - i, file + 1, first_pos + (uint32_t)i, err);
}

void firn__pkindex_keys(const firn__pkindex *idx,
                        const uint8_t *bytes,
                        uint32_t start,
                        const uint32_t *ends,
                        size_t n,
                        firn__pkkey *out)
{
    for (size_t i = 0; i < n; i++) {
        size_t len = ends[i] - start;
        const uint8_t *key = bytes + start;
        if (len == 9 && key[0] == 1) { /* a bigint key, mixed as firn__pkindex_key does */
            out[i].h = splitmix64(le64(key + 1, 8));
            out[i].c = 0;
        } else {
            out[i] = firn__pkindex_key(idx, key, len);
        }
        start = ends[i];
    }
}

firn_rc firn__pkindex_unset(firn__pkindex *idx, firn__pkkey k, bool present, firn_err *err)
{
    firn__pkindex_touch(idx);
    /* a tombstone in the memtable must be newer than every spilled or buffered key */
    FIRN_TRY(bulk_settle(idx, err));
    bool found;
    size_t at = mt_probe(idx, k, &found);
    if (found) {
        if (idx->mt[at].file1 != PK_TOMB && idx->live > 0)
            idx->live--;
        idx->mt[at].file1 = PK_TOMB;
        return FIRN_OK;
    }
    if (!present)
        return FIRN_OK;
    pk_slot *s;
    FIRN_TRY(pk_slot_for(idx, k, &s, &found, err));
    s->file1 = PK_TOMB;
    s->pos = 0;
    if (idx->live > 0)
        idx->live--;
    return FIRN_OK;
}

/* ---- lookups ------------------------------------------------------------------------------- */

typedef struct probe {
    uint64_t h;
    uint32_t c;
    uint32_t i;
} probe;

static int probe_cmp(const void *a, const void *b)
{
    const probe *x = a, *y = b;
    if (x->h != y->h)
        return x->h < y->h ? -1 : 1;
    return x->c == y->c ? 0 : (x->c < y->c ? -1 : 1);
}

/* Sorts ps[0..m) by (h, c): a least-significant-digit radix sort of h, 8 bits a pass (passes
 * whose digit is the same for every probe are skipped), then insertion for equal hashes, which
 * only string keys colliding in 64 bits have. Fingerprints are uniform, so this is about 8
 * moves a probe where qsort took 2-3 % of a catch-up's CPU samples. */
static void sort_probes(probe *ps, size_t m)
{
    if (m < 64) {
        qsort(ps, m, sizeof(*ps), probe_cmp);
        return;
    }
    probe *tmp = firn_malloc(m * sizeof(*ps));
    probe *src = ps, *dst = tmp;
    for (unsigned shift = 0; shift < 64; shift += 8) {
        size_t count[256] = {0};
        for (size_t i = 0; i < m; i++)
            count[(src[i].h >> shift) & 0xFF]++;
        if (!radix_starts(count, m, (src[0].h >> shift) & 0xFF))
            continue;
        for (size_t i = 0; i < m; i++)
            dst[count[(src[i].h >> shift) & 0xFF]++] = src[i];
        probe *t = src;
        src = dst;
        dst = t;
    }
    if (src != ps)
        memcpy(ps, src, m * sizeof(*ps));
    firn_free(tmp);
    for (size_t i = 1; i < m; i++) {
        probe x = ps[i];
        size_t j = i;
        for (; j > 0 && ps[j - 1].h == x.h && ps[j - 1].c > x.c; j--)
            ps[j] = ps[j - 1];
        ps[j] = x;
    }
}

/* Positions cur in page p of r, near the entries of hash h. */
static firn_rc load_page(firn__pkindex *idx,
                         const firn__pkrun *r,
                         uint32_t p,
                         uint64_t h,
                         firn__pkpage_cur *cur,
                         firn_err *err)
{
    const uint8_t *bytes;
    FIRN_TRY(firn__pkcache_get(idx->cache, r->fd, r->id, p, &bytes, err));
    return firn__pkpage_begin(r, bytes, h, cur, err);
}

/* Moves the cursor to the first entry >= p (crossing into the next pages that may hold p's
 * hash); *cmp is the comparison of that entry with p, or -1 when there is none. */
static firn_rc seek(firn__pkindex *idx,
                    const firn__pkrun *r,
                    uint32_t *page,
                    firn__pkpage_cur *cur,
                    const probe *p,
                    int *cmp,
                    firn_err *err)
{
    if (cur->ok)
        FIRN_TRY(firn__pkpage_seek(r, cur, p->h, err));
    for (;;) {
        if (cur->ok) {
            /* Entries below the probe are walked past on their hashes alone. */
            if (cur->e.h == p->h)
                FIRN_TRY(firn__pkpage_fields(r, cur, err));
            *cmp = cur->e.h < p->h ? -1 : pk_entry_cmp(&cur->e, p->h, p->c);
            if (*cmp >= 0)
                return FIRN_OK;
            FIRN_TRY(firn__pkpage_step_hash(r, cur, err));
            continue;
        }
        if (*page + 1 < r->n_pages && r->fences[*page + 1] <= p->h) {
            ++*page;
            FIRN_TRY(load_page(idx, r, *page, p->h, cur, err));
            continue;
        }
        *cmp = -1;
        return FIRN_OK;
    }
}

/* Merge-joins the sorted probes ps[0..*m) with run r; resolved probes leave the list. */
static firn_rc probe_run(firn__pkindex *idx,
                         const firn__pkrun *r,
                         probe *ps,
                         size_t *m,
                         firn__pkloc *locs,
                         bool *found,
                         firn_err *err)
{
    size_t keep = 0;
    uint32_t page = UINT32_MAX;
    firn__pkpage_cur cur = {0};
    for (size_t j = 0; j < *m; j++) {
        const probe *p = &ps[j];
        if (p->h < r->min_h || p->h > r->max_h) {
            ps[keep++] = *p;
            continue;
        }
        uint32_t want = firn__pkrun_find_page(r, p->h, page == UINT32_MAX ? 0 : page);
        if (page == UINT32_MAX || want > page) {
            page = want;
            FIRN_TRY(load_page(idx, r, page, p->h, &cur, err));
        }
        int cmp;
        FIRN_TRY(seek(idx, r, &page, &cur, p, &cmp, err));
        if (cmp != 0) {
            ps[keep++] = *p;
            continue;
        }
        if (cur.e.file1 != PK_TOMB) {
            found[p->i] = true;
            locs[p->i].file = cur.e.file1 - 1;
            locs[p->i].pos = cur.e.pos;
        }
    }
    *m = keep;
    return FIRN_OK;
}

firn_rc firn__pkindex_lookup(firn__pkindex *idx,
                             const firn__pkkey *keys,
                             size_t n,
                             firn__pkloc *out_locs,
                             bool *out_found,
                             firn_err *err)
{
    FIRN_TRY(bulk_settle(idx, err));
    probe *ps = NULL;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        bool hit;
        size_t at = mt_probe(idx, keys[i], &hit);
        out_found[i] = false;
        if (hit) {
            const pk_slot *s = &idx->mt[at];
            if (s->file1 != PK_TOMB) {
                out_found[i] = true;
                out_locs[i].file = s->file1 - 1;
                out_locs[i].pos = s->pos;
            }
            continue;
        }
        if (idx->n_runs == 0)
            continue;
        if (!ps)
            ps = firn_malloc(n * sizeof(*ps));
        ps[m].h = keys[i].h;
        ps[m].c = keys[i].c;
        ps[m++].i = (uint32_t)i;
    }
    if (m > 1)
        sort_probes(ps, m);
    firn_rc rc = FIRN_OK;
    for (size_t r = 0; r < idx->n_runs && m > 0 && rc == FIRN_OK; r++)
        rc = probe_run(idx, idx->runs[r], ps, &m, out_locs, out_found, err);
    firn_free(ps);
    if (rc == FIRN_ERR_PARSE)
        firn__pkindex_touch(idx); /* a damaged run: the next start must not load it again */
    return rc;
}

/* ---- key bytes ----------------------------------------------------------------------------- */

firn_rc firn__pkindex_get(firn__pkindex *idx,
                          const uint8_t *key,
                          size_t len,
                          bool *out_found,
                          firn__pkloc *out,
                          firn_err *err)
{
    FIRN_ASSERT(len <= UINT32_MAX);
    firn__pkkey k = firn__pkindex_key(idx, key, len);
    return firn__pkindex_lookup(idx, &k, 1, out, out_found, err);
}

firn_rc firn__pkindex_put(
    firn__pkindex *idx, const uint8_t *key, size_t len, firn__pkloc loc, firn_err *err)
{
    firn__pkkey k = firn__pkindex_key(idx, key, len);
    firn__pkloc old;
    bool present;
    FIRN_TRY(firn__pkindex_lookup(idx, &k, 1, &old, &present, err));
    return firn__pkindex_set(idx, k, loc, present, err);
}

firn_rc firn__pkindex_remove(
    firn__pkindex *idx, const uint8_t *key, size_t len, bool *out_removed, firn_err *err)
{
    firn__pkkey k = firn__pkindex_key(idx, key, len);
    firn__pkloc old;
    bool present;
    FIRN_TRY(firn__pkindex_lookup(idx, &k, 1, &old, &present, err));
    if (out_removed)
        *out_removed = present;
    return firn__pkindex_unset(idx, k, present, err);
}

/* ---- bulk mode and figures ----------------------------------------------------------------- */

void firn__pkindex_reserve(firn__pkindex *idx, uint64_t keys)
{
    if (idx->bulk) /* the memtable or the bulk buffer, whichever the copy's keys go to */
        idx->reserve_keys = keys;
    else
        mt_reserve(idx, keys);
}

static void mt_reserve(firn__pkindex *idx, uint64_t keys)
{
    if (idx->mt_used != 0 || idx->spill)
        return; /* grown the usual way: the table holds entries */
    unsigned shift = idx->mt_shift;
    while (shift > 0 && (idx->mt_cap_max >> shift) * MT_LOAD_4 / 4 < keys)
        shift--;
    if (shift == idx->mt_shift)
        return;
    firn_free(idx->mt);
    idx->mt_shift = shift;
    mt_alloc(idx);
}

firn_rc firn__pkindex_bulk(firn__pkindex *idx, bool on, firn_err *err)
{
    firn__pkindex_touch(idx);
    if (on || !idx->bulk) {
        idx->bulk = on;
        return FIRN_OK;
    }
    idx->bulk = false;
    idx->reserve_keys = 0;
    FIRN_TRY(bulk_settle(idx, err));
    if (idx->n_runs > 1)
        FIRN_TRY(merge_runs(idx, 0, idx->n_runs, err));
    return maybe_merge(idx, err);
}

void firn__pkindex_stats_get(const firn__pkindex *idx, firn__pkindex_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->keys = idx->live;
    out->runs = idx->n_runs;
    for (size_t i = 0; i < idx->n_runs; i++) {
        out->run_entries += idx->runs[i]->n_entries;
        out->disk_bytes += idx->runs[i]->file_bytes;
        out->fence_bytes += (size_t)idx->runs[i]->n_pages * sizeof(uint64_t);
    }
    out->memtable_bytes = (idx->mt_len + idx->bb_cap) * sizeof(pk_slot);
    out->memtable_entries = idx->mt_used + idx->bb_n;
    out->cache_bytes = firn__pkcache_bytes(idx->cache);
    out->flushes = idx->flushes;
    out->merges = idx->merges;
    firn__pkcache_stats(idx->cache, &out->page_reads, &out->page_hits);
    const pk_spill *sp = idx->spill;
    if (sp) {
        out->spill_keys = sp->n;
        out->spill_bytes = sp->off;
        for (size_t p = 0; p < SPILL_PARTS; p++)
            out->spill_bytes += (uint64_t)sp->parts[p].n_buf * sp->slot_size;
    }
}
