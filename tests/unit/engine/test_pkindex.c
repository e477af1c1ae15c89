/* SPDX-License-Identifier: Apache-2.0 */
/* The bounded primary-key index against an exact reference map: random sets, removals and batch
 * lookups with small memory budgets that force many runs and merges, integer and string keys. */
#include "engine/eng_pkindex_int.h"
#include "t.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Key encoding as firn_batch_key_encode writes it: an int64 (tag 1, 8 bytes LE), or a string
 * (tag 1, u32 LE length, bytes) when str. */
static size_t make_key(uint64_t v, bool str, uint8_t *out)
{
    out[0] = 1;
    if (!str) {
        for (int i = 0; i < 8; i++)
            out[1 + i] = (uint8_t)(v >> (8 * i));
        return 9;
    }
    char s[40];
    int n = snprintf(s, sizeof(s), "customer-%llu", (unsigned long long)v);
    out[1] = (uint8_t)n;
    out[2] = out[3] = out[4] = 0;
    memcpy(out + 5, s, (size_t)n);
    return 5 + (size_t)n;
}

static char *temp_dir(void)
{
    char tmpl[] = "/tmp/firn-test-pkindex-XXXXXX";
    char *d = mkdtemp(tmpl);
    FIRN_ASSERT(d != NULL);
    return firn_strdup(d);
}

static void remove_dir(char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    T_EQ_INT(system(cmd), 0);
    firn_free(dir);
}

T_TEST(siphash128_reference_vectors)
{
    /* veorq/SipHash vectors_sip128: key 00..0f, message 00..(len-1). */
    static const struct {
        size_t len;
        uint8_t want[16];
    } v[] = {
        {0,
         {0xa3, 0x81, 0x7f, 0x04, 0xba, 0x25, 0xa8, 0xe6, 0x6d, 0xf6, 0x72, 0x14, 0xc7, 0x55, 0x02,
          0x93}},
        {1,
         {0xda, 0x87, 0xc1, 0xd8, 0x6b, 0x99, 0xaf, 0x44, 0x34, 0x76, 0x59, 0x11, 0x9b, 0x22, 0xfc,
          0x45}},
        {2,
         {0x81, 0x77, 0x22, 0x8d, 0xa4, 0xa4, 0x5d, 0xc7, 0xfc, 0xa3, 0x8b, 0xde, 0xf6, 0x0a, 0xff,
          0xe4}},
        {15,
         {0x54, 0x93, 0xe9, 0x99, 0x33, 0xb0, 0xa8, 0x11, 0x7e, 0x08, 0xec, 0x0f, 0x97, 0xcf, 0xc3,
          0xd9}},
    };
    uint8_t key[16], msg[16];
    for (int i = 0; i < 16; i++)
        key[i] = msg[i] = (uint8_t)i;
    for (size_t t = 0; t < sizeof(v) / sizeof(v[0]); t++) {
        uint64_t out[2];
        firn__pk_siphash128(key, msg, v[t].len, out);
        uint8_t got[16];
        for (int i = 0; i < 8; i++) {
            got[i] = (uint8_t)(out[0] >> (8 * i));
            got[8 + i] = (uint8_t)(out[1] >> (8 * i));
        }
        T_EQ_MEM(got, v[t].want, 16);
    }
}

T_TEST(integer_keys_are_exact)
{
    firn__pkindex *idx = firn__pkindex_new();
    uint8_t k8[9] = {1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}; /* int64 -1 */
    uint8_t k4[5] = {1, 0xff, 0xff, 0xff, 0xff};                         /* int32 -1 */
    firn__pkkey a = firn__pkindex_key(idx, k8, sizeof(k8));
    firn__pkkey b = firn__pkindex_key(idx, k4, sizeof(k4));
    T_EQ_UINT(a.h, b.h); /* int -> long promotion keeps fingerprints */
    T_EQ_UINT(a.c, 0);
    /* Distinct values, distinct hashes (a bijection): a dense range as a spot check. */
    uint64_t prev = 0;
    for (uint64_t v = 0; v < 1000; v++) {
        uint8_t k[9];
        make_key(v, false, k);
        firn__pkkey x = firn__pkindex_key(idx, k, 9);
        T_TRUE(v == 0 || x.h != prev);
        prev = x.h;
    }
    uint8_t s[64];
    size_t n = make_key(7, true, s);
    firn__pkkey x = firn__pkindex_key(idx, s, n);
    firn__pkkey y = firn__pkindex_key(idx, s, n);
    T_EQ_UINT(x.h, y.h);
    T_EQ_UINT(x.c, y.c);
    firn__pkindex_free(idx);
}

typedef struct model_run {
    size_t universe;
    size_t ops;
    size_t memory;
    bool str;
    bool bulk_phase;
} model_run;

/* One random operation against idx and the reference map. */
static void model_step(firn__pkindex *idx, firn__keymap *ref, const model_run *mr, uint32_t files)
{
    firn_err err = {0};
    uint8_t key[64];
    uint64_t r = rnd();
    size_t len = make_key(r % mr->universe, mr->str, key);
    unsigned op = (unsigned)((r >> 40) % 10);
    firn__pkloc want, got;
    bool had = firn__keymap_get(ref, key, len, &want);
    if (op < 6) {
        firn__pkloc loc = {(uint32_t)(rnd() % files), (uint32_t)(rnd() % 5000000)};
        T_OK_ERR(firn__pkindex_put(idx, key, len, loc, &err), &err);
        firn__keymap_put(ref, key, len, loc);
    } else if (op < 9) {
        bool removed = false;
        T_OK_ERR(firn__pkindex_remove(idx, key, len, &removed, &err), &err);
        T_EQ_INT(removed, had);
        firn__keymap_remove(ref, key, len);
    } else {
        bool found = false;
        T_OK_ERR(firn__pkindex_get(idx, key, len, &found, &got, &err), &err);
        T_EQ_INT(found, had);
        if (found && had) {
            T_EQ_UINT(got.file, want.file);
            T_EQ_UINT(got.pos, want.pos);
        }
    }
}

/* Every key of the universe in one batch lookup (in a shuffled order), against the model. */
static void model_check_all(firn__pkindex *idx, firn__keymap *ref, const model_run *mr)
{
    firn_err err = {0};
    size_t n = mr->universe;
    firn__pkkey *keys = firn_calloc(n, sizeof(*keys));
    uint64_t *vals = firn_calloc(n, sizeof(*vals));
    firn__pkloc *locs = firn_calloc(n, sizeof(*locs));
    bool *found = firn_calloc(n, sizeof(*found));
    for (size_t i = 0; i < n; i++)
        vals[i] = i;
    for (size_t i = n; i > 1; i--) {
        size_t j = rnd() % i;
        uint64_t t = vals[i - 1];
        vals[i - 1] = vals[j];
        vals[j] = t;
    }
    uint8_t key[64];
    for (size_t i = 0; i < n; i++)
        keys[i] = firn__pkindex_key(idx, key, make_key(vals[i], mr->str, key));
    T_OK_ERR(firn__pkindex_lookup(idx, keys, n, locs, found, &err), &err);
    size_t live = 0;
    for (size_t i = 0; i < n; i++) {
        firn__pkloc want;
        bool had = firn__keymap_get(ref, key, make_key(vals[i], mr->str, key), &want);
        live += had;
        T_EQ_INT(found[i], had);
        if (had && found[i]) {
            T_EQ_UINT(locs[i].file, want.file);
            T_EQ_UINT(locs[i].pos, want.pos);
        }
    }
    T_EQ_UINT(firn__pkindex_count(idx), live);
    firn_free(keys);
    firn_free(vals);
    firn_free(locs);
    firn_free(found);
}

static void run_model(const model_run *mr, uint64_t seed)
{
    rng_state = seed;
    char *dir = temp_dir();
    firn__pkindex_opts o = {dir, mr->memory, NULL};
    firn__pkindex *idx = firn__pkindex_new_opts(&o);
    firn__keymap *ref = firn__keymap_new();
    firn_err err = {0};
    uint32_t files = 3000; /* file1 needs 12 bits */
    for (uint32_t i = 0; i < files; i++) {
        char loc[64];
        snprintf(loc, sizeof(loc), "file:///w/data/%u.parquet", i);
        T_EQ_UINT(firn__pkindex_add_file(idx, loc), i);
    }
    T_EQ_STR(firn__pkindex_file(idx, 17), "file:///w/data/17.parquet");
    T_TRUE(firn__pkindex_file(idx, files) == NULL);
    if (mr->bulk_phase)
        T_OK(firn__pkindex_bulk(idx, true, &err));
    for (size_t i = 0; i < mr->ops; i++) {
        model_step(idx, ref, mr, files);
        if (mr->bulk_phase && i == mr->ops / 3)
            T_OK_ERR(firn__pkindex_bulk(idx, false, &err), &err);
        if (i % (mr->ops / 4) == 0)
            model_check_all(idx, ref, mr);
    }
    model_check_all(idx, ref, mr);
    firn__pkindex_stats st;
    firn__pkindex_stats_get(idx, &st);
    T_TRUE(st.flushes > 10);
    T_TRUE(st.merges > 2);
    T_TRUE(st.memtable_bytes + st.cache_bytes <= mr->memory);
    firn__pkindex_free(idx);
    firn__keymap_free(ref);
    remove_dir(dir);
}

T_TEST(model_int_keys_small_budget)
{
    model_run mr = {8000, 60000, 64 << 10, false, false};
    run_model(&mr, 1);
}

T_TEST(model_string_keys_small_budget)
{
    model_run mr = {8000, 50000, 64 << 10, true, false};
    run_model(&mr, 2);
}

T_TEST(model_bulk_then_updates)
{
    model_run mr = {20000, 60000, 96 << 10, true, true};
    run_model(&mr, 3);
}

/* Keys i * golden ratio for i in [0, n) by steps of step are found at (0, i). */
static void check_spread_keys(firn__pkindex *idx, uint32_t n, uint32_t step)
{
    firn_err err = {0};
    for (uint32_t i = 0; i < n; i += step) {
        firn__pkkey k = {(uint64_t)i * 0x9E3779B97F4A7C15ull, 0};
        firn__pkloc got;
        bool found;
        T_OK_ERR(firn__pkindex_lookup(idx, &k, 1, &got, &found, &err), &err);
        T_TRUE(found);
        T_EQ_UINT(got.pos, i);
    }
}

/* A memtable reserved for a copy's estimated keys is allocated once at that size (bounded by
 * its share of the budget), not for a few keys, not once it holds entries; keys set afterwards
 * are found as usual. */
T_TEST(reserve_sizes_memtable_once)
{
    char *dir = temp_dir();
    firn__pkindex_opts o = {dir, 16 << 20, NULL};
    firn__pkindex *idx = firn__pkindex_new_opts(&o);
    firn_err err = {0};
    firn__pkindex_add_file(idx, "f");
    firn__pkindex_stats st;
    firn__pkindex_stats_get(idx, &st);
    size_t small = st.memtable_bytes;
    firn__pkindex_reserve(idx, 10); /* fits already */
    firn__pkindex_stats_get(idx, &st);
    T_EQ_UINT(st.memtable_bytes, small);
    firn__pkindex_reserve(idx, 100000);
    firn__pkindex_stats_get(idx, &st);
    size_t sized = st.memtable_bytes;
    T_TRUE(sized >= (size_t)100000 * 4 / 3 * 20);       /* 20-byte slots at 3/4 load */
    T_TRUE(sized + st.cache_bytes <= (size_t)16 << 20); /* within the budget */
    firn__pkindex_reserve(idx, 1000000000);             /* capped at the budget's share */
    firn__pkindex_stats_get(idx, &st);
    T_TRUE(st.memtable_bytes >= sized && st.memtable_bytes + st.cache_bytes <= (size_t)16 << 20);
    size_t capped = st.memtable_bytes;
    for (uint32_t i = 0; i < 100000; i++) {
        firn__pkkey k = {(uint64_t)i * 0x9E3779B97F4A7C15ull, 0};
        T_OK_ERR(firn__pkindex_set(idx, k, (firn__pkloc){0, i}, false, &err), &err);
    }
    firn__pkindex_reserve(idx, 5); /* holds entries: unchanged */
    firn__pkindex_stats_get(idx, &st);
    T_EQ_UINT(st.memtable_bytes, capped);
    T_EQ_UINT(st.flushes, 0);
    check_spread_keys(idx, 100000, 997);
    T_EQ_UINT(firn__pkindex_count(idx), 100000);
    firn__pkindex_free(idx);
    remove_dir(dir);
}

/* A bulk copy past the memtable (the backfill's path: set with present = false): keys spill to
 * hash partitions and become one run at the end. Checked against the model: state from before
 * the copy (older runs, memtable entries, tombstones), keys set twice during the copy (the later
 * location wins), a lookup in the middle of the copy (the spill ends early, a second one
 * starts), string keys (check hashes) and a budget so small that partitions are sorted in
 * pieces (several runs, merged when bulk mode ends). */
static void run_bulk_spill(size_t memory, bool str, uint32_t n, uint64_t seed)
{
    rng_state = seed;
    char *dir = temp_dir();
    firn__pkindex_opts o = {dir, memory, NULL};
    firn__pkindex *idx = firn__pkindex_new_opts(&o);
    firn__keymap *ref = firn__keymap_new();
    firn_err err = {0};
    for (uint32_t i = 0; i < 40; i++) {
        char loc[32];
        snprintf(loc, sizeof(loc), "f%u", i);
        firn__pkindex_add_file(idx, loc);
    }
    uint8_t key[64];
    /* Before the copy: keys 0..2999 in runs and the memtable, every third removed. */
    for (uint32_t v = 0; v < 3000; v++) {
        size_t len = make_key(v, str, key);
        firn__pkloc loc = {v % 3, v};
        T_OK_ERR(firn__pkindex_put(idx, key, len, loc, &err), &err);
        firn__keymap_put(ref, key, len, loc);
    }
    for (uint32_t v = 0; v < 3000; v += 3) {
        size_t len = make_key(v, str, key);
        T_OK_ERR(firn__pkindex_remove(idx, key, len, NULL, &err), &err);
        firn__keymap_remove(ref, key, len);
    }
    T_OK(firn__pkindex_bulk(idx, true, &err));
    for (uint32_t i = 0; i < n; i++) {
        /* new keys 3000.., and every 50th a key set earlier in the copy again */
        uint64_t v = i % 50 == 49 ? 3000 + rnd() % (i + 1) : 3000 + (uint64_t)i;
        size_t len = make_key(v, str, key);
        firn__pkloc loc = {3 + (uint32_t)(rnd() % 37), (uint32_t)(rnd() % 3000000)};
        bool present = firn__keymap_get(ref, key, len, &(firn__pkloc){0});
        T_OK_ERR(firn__pkindex_set(idx, firn__pkindex_key(idx, key, len), loc, present, &err),
                 &err);
        firn__keymap_put(ref, key, len, loc);
        if (i == n / 2) { /* a lookup in the middle of the copy */
            firn__pkloc got;
            bool found;
            T_OK_ERR(firn__pkindex_get(idx, key, len, &found, &got, &err), &err);
            T_TRUE(found);
            T_EQ_UINT(got.pos, loc.pos);
        }
    }
    firn__pkindex_stats st;
    firn__pkindex_stats_get(idx, &st);
    T_TRUE(st.spill_keys > 0); /* slots of 16 bytes for integer keys, 20 with check hashes */
    T_EQ_UINT(st.spill_bytes, (str ? 20 : 16) * st.spill_keys);
    T_OK_ERR(firn__pkindex_bulk(idx, false, &err), &err);
    firn__pkindex_stats_get(idx, &st);
    T_EQ_UINT(st.runs, 1); /* one run for the whole copy */
    model_run mr = {3000 + n, 0, memory, str, true};
    model_check_all(idx, ref, &mr);
    /* and the index goes on as usual after the copy */
    for (uint32_t v = 3000; v < 3000 + n; v += 7) {
        size_t len = make_key(v, str, key);
        T_OK_ERR(firn__pkindex_remove(idx, key, len, NULL, &err), &err);
        firn__keymap_remove(ref, key, len);
    }
    model_check_all(idx, ref, &mr);
    firn__pkindex_free(idx);
    firn__keymap_free(ref);
    remove_dir(dir);
}

T_TEST(bulk_spill_int_keys)
{
    run_bulk_spill(1 << 20, false, 60000, 11);
}

T_TEST(bulk_spill_string_keys)
{
    run_bulk_spill(1 << 20, true, 60000, 12);
}

T_TEST(bulk_spill_sorted_in_pieces)
{
    run_bulk_spill(64 << 10, false, 250000, 13);
}

/* A reserved memtable spills too: the copy of a table larger than the budget's share. */
T_TEST(bulk_spill_after_reserve)
{
    char *dir = temp_dir();
    firn__pkindex_opts o = {dir, 1 << 20, NULL};
    firn__pkindex *idx = firn__pkindex_new_opts(&o);
    firn_err err = {0};
    firn__pkindex_add_file(idx, "f");
    T_OK(firn__pkindex_bulk(idx, true, &err));
    firn__pkindex_reserve(idx, 200000);
    for (uint32_t i = 0; i < 200000; i++) {
        firn__pkkey k = {(uint64_t)i * 0x9E3779B97F4A7C15ull, 0};
        T_OK_ERR(firn__pkindex_set(idx, k, (firn__pkloc){0, i}, false, &err), &err);
    }
    T_OK_ERR(firn__pkindex_bulk(idx, false, &err), &err);
    firn__pkindex_stats st;
    firn__pkindex_stats_get(idx, &st);
    T_EQ_UINT(st.runs, 1);
    T_EQ_UINT(st.merges, 0); /* written once: no merge */
    T_EQ_UINT(st.keys, 200000);
    check_spread_keys(idx, 200000, 991);
    firn__pkindex_free(idx);
    remove_dir(dir);
}

/* firn__pkindex_keys over key encodings of every kind laid end to end (firn_batch_keys_encode's
 * layout), from the start and from the middle: each fingerprint equals firn__pkindex_key of its
 * encoding. Kinds: int64 (the fast path), 1-, 2- and 4-byte integers (sign-extended), strings, a
 * 16-byte value, a null, a two-column key. */
T_TEST(keys_of_encodings_match_key)
{
    static const uint8_t seed[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    firn__pkindex_opts o = {NULL, 64 << 10, seed};
    firn__pkindex *idx = firn__pkindex_new_opts(&o);
    enum { N = 800 };
    uint8_t *buf = firn_malloc((size_t)N * 64);
    uint32_t ends[N];
    size_t len = 0;
    rng_state = 21;
    for (size_t i = 0; i < N; i++) {
        uint64_t v = rnd();
        unsigned kind = (unsigned)(i % 8);
        static const size_t width[8] = {8, 1, 2, 4, 0, 16, 0, 0};
        if (kind == 4) {
            len += make_key(v % 100000, true, buf + len);
        } else if (kind == 6) {
            buf[len++] = 0;     /* null */
        } else if (kind == 7) { /* int32 and null: 9 bytes but not a bigint */
            buf[len] = 1;
            memcpy(buf + len + 1, &v, 4);
            buf[len + 5] = 0;
            memcpy(buf + len + 6, &v, 3);
            len += 9;
        } else {
            buf[len] = 1;
            for (size_t j = 0; j < width[kind]; j++)
                buf[len + 1 + j] = (uint8_t)(v >> (8 * (j % 8)));
            len += 1 + width[kind];
        }
        ends[i] = (uint32_t)len;
    }
    firn__pkkey *out = firn_malloc(N * sizeof(*out));
    memset(out, 0xAB, N * sizeof(*out));
    firn__pkindex_keys(idx, buf, 0, ends, N, out);
    for (size_t i = 0; i < N; i++) {
        uint32_t start = i ? ends[i - 1] : 0;
        firn__pkkey want = firn__pkindex_key(idx, buf + start, ends[i] - start);
        T_EQ_UINT(out[i].h, want.h);
        T_EQ_UINT(out[i].c, want.c);
    }
    memset(out, 0xAB, N * sizeof(*out));
    firn__pkindex_keys(idx, buf, ends[N / 2 - 1], ends + N / 2, N / 2, out);
    for (size_t i = 0; i < N / 2; i++) {
        firn__pkkey want = firn__pkindex_key(idx, buf + ends[N / 2 + i - 1],
                                             ends[N / 2 + i] - ends[N / 2 + i - 1]);
        T_EQ_UINT(out[i].h, want.h);
        T_EQ_UINT(out[i].c, want.c);
    }
    firn_free(out);
    firn_free(buf);
    firn__pkindex_free(idx);
}

/* The whole bytes of the file at path into *out (owned). */
static size_t read_whole(const char *path, uint8_t **out)
{
    FILE *fp = fopen(path, "rb");
    FIRN_ASSERT(fp != NULL);
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    *out = firn_malloc((size_t)size + 1);
    T_EQ_UINT(fread(*out, 1, (size_t)size, fp), (size_t)size);
    fclose(fp);
    return (size_t)size;
}

/* firn__pkindex_add_new (the backfill's bulk entry point) against firn__pkindex_set key by key
 * in a second index of the same seed: a bulk copy of n keys in files of uneven sizes fed in
 * blocks of uneven sizes, starting in the memtable and spilling in the middle of a block (with a
 * tiny budget, sorted in pieces and merged). Every key is found at its own file and row, keys
 * not copied are not found, the counts are n, and the two indexes' runs are the same bytes. */
static void run_add_new(size_t memory, bool str, uint32_t n)
{
    static const uint8_t seed[16] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6};
    static const uint32_t file_rows[] = {1, 5000, 777, 12345, 4096, 30011, 2};
    static const uint32_t block_rows[] = {4096, 1, 100, 3000, 4095, 17};
    char *dir_a = temp_dir(), *dir_b = temp_dir();
    firn__pkindex_opts oa = {dir_a, memory, seed}, ob = {dir_b, memory, seed};
    firn__pkindex *a = firn__pkindex_new_opts(&oa), *b = firn__pkindex_new_opts(&ob);
    firn_err err = {0};
    firn__pkkey *keys = firn_malloc((size_t)n * sizeof(*keys));
    firn__pkloc *want = firn_malloc((size_t)n * sizeof(*want));
    uint8_t key[64];
    for (uint32_t v = 0; v < n; v++)
        keys[v] = firn__pkindex_key(a, key, make_key((uint64_t)v * 3 + 1, str, key));
    T_OK(firn__pkindex_bulk(a, true, &err));
    T_OK(firn__pkindex_bulk(b, true, &err));
    uint32_t v = 0, nb = 0;
    for (uint32_t f = 0; v < n; f++) {
        char loc[32];
        snprintf(loc, sizeof(loc), "f%u", f);
        T_EQ_UINT(firn__pkindex_add_file(a, loc), f);
        T_EQ_UINT(firn__pkindex_add_file(b, loc), f);
        uint32_t rows = file_rows[f % 7] < n - v ? file_rows[f % 7] : n - v;
        for (uint32_t pos = 0; pos < rows;) {
            uint32_t m = block_rows[nb++ % 6];
            m = m < rows - pos ? m : rows - pos;
            T_OK_ERR(firn__pkindex_add_new(a, keys + v, m, f, pos, &err), &err);
            for (uint32_t i = 0; i < m; i++) {
                want[v + i] = (firn__pkloc){f, pos + i};
                T_OK_ERR(firn__pkindex_set(b, keys[v + i], want[v + i], false, &err), &err);
            }
            v += m;
            pos += m;
        }
    }
    T_EQ_UINT(firn__pkindex_count(a), n);
    T_OK_ERR(firn__pkindex_bulk(a, false, &err), &err);
    T_OK_ERR(firn__pkindex_bulk(b, false, &err), &err);
    T_EQ_UINT(firn__pkindex_count(a), n);
    T_EQ_UINT(a->n_runs, 1);
    T_EQ_UINT(b->n_runs, 1);
    uint8_t *bytes_a, *bytes_b;
    size_t len_a = read_whole(a->runs[0]->path, &bytes_a);
    size_t len_b = read_whole(b->runs[0]->path, &bytes_b);
    T_EQ_UINT(len_a, len_b);
    T_TRUE(len_a == len_b && memcmp(bytes_a, bytes_b, len_a) == 0);
    firn_free(bytes_a);
    firn_free(bytes_b);
    firn__pkloc *locs = firn_malloc((size_t)n * sizeof(*locs));
    bool *found = firn_malloc(n);
    T_OK_ERR(firn__pkindex_lookup(a, keys, n, locs, found, &err), &err);
    for (uint32_t i = 0; i < n; i++) {
        T_TRUE(found[i]);
        T_EQ_UINT(locs[i].file, want[i].file);
        T_EQ_UINT(locs[i].pos, want[i].pos);
    }
    for (uint32_t i = 0; i < n; i++) /* keys never copied: 3v + 2 */
        keys[i] = firn__pkindex_key(a, key, make_key((uint64_t)i * 3 + 2, str, key));
    T_OK_ERR(firn__pkindex_lookup(a, keys, n, locs, found, &err), &err);
    for (uint32_t i = 0; i < n; i++)
        T_TRUE(!found[i]);
    firn_free(locs);
    firn_free(found);
    firn_free(keys);
    firn_free(want);
    firn__pkindex_free(a);
    firn__pkindex_free(b);
    remove_dir(dir_a);
    remove_dir(dir_b);
}

T_TEST(add_new_int_keys)
{
    run_add_new(1 << 20, false, 60000);
}

T_TEST(add_new_string_keys)
{
    run_add_new(1 << 20, true, 40000);
}

T_TEST(add_new_sorted_in_pieces)
{
    run_add_new(64 << 10, false, 200000);
}

/* A spill that starts with integer keys (no check hashes: 16-byte slots) and then takes a few
 * string keys through firn__pkindex_add_new (20-byte slots from there on), too few to fill a
 * partition's buffer before the spill ends: the 16-byte blocks are widened as they are read back,
 * the run still carries the check hashes, and every key is found where it was added. */
T_TEST(add_new_check_hashes_join_spill)
{
    char *dir = temp_dir();
    firn__pkindex_opts o = {dir, 1 << 20, NULL};
    firn__pkindex *idx = firn__pkindex_new_opts(&o);
    firn_err err = {0};
    enum { N_INT = 10000, N_STR = 3000 };
    firn__pkkey *keys = firn_malloc((N_INT + N_STR) * sizeof(*keys));
    uint8_t key[64];
    for (uint32_t i = 0; i < N_INT + N_STR; i++)
        keys[i] = firn__pkindex_key(idx, key, make_key(i, i >= N_INT, key));
    T_EQ_UINT(firn__pkindex_add_file(idx, "ints"), 0);
    T_EQ_UINT(firn__pkindex_add_file(idx, "strings"), 1);
    T_OK(firn__pkindex_bulk(idx, true, &err));
    T_OK_ERR(firn__pkindex_add_new(idx, keys, N_INT, 0, 0, &err), &err);
    T_TRUE(idx->spill != NULL);
    firn__pkindex_stats st;
    firn__pkindex_stats_get(idx, &st);
    uint64_t spilled = st.spill_keys;
    T_TRUE(spilled > 0 && spilled <= N_INT);
    T_EQ_UINT(st.spill_bytes, 16 * spilled); /* no check hash yet: 16-byte slots */
    T_OK_ERR(firn__pkindex_add_new(idx, keys + N_INT, N_STR, 1, 5, &err), &err);
    firn__pkindex_stats_get(idx, &st);
    T_EQ_UINT(st.spill_keys, spilled + N_STR);
    T_EQ_UINT(st.spill_bytes, 16 * spilled + 20 * N_STR); /* 20 bytes from the first */
    T_OK_ERR(firn__pkindex_bulk(idx, false, &err), &err);
    T_EQ_UINT(idx->n_runs, 1);
    T_EQ_INT(idx->runs[0]->has_c, 1);
    firn__pkloc *locs = firn_malloc((N_INT + N_STR) * sizeof(*locs));
    bool found[N_INT + N_STR];
    T_OK_ERR(firn__pkindex_lookup(idx, keys, N_INT + N_STR, locs, found, &err), &err);
    for (uint32_t i = 0; i < N_INT + N_STR; i++) {
        T_TRUE(found[i]);
        T_EQ_UINT(locs[i].file, i >= N_INT ? 1 : 0);
        T_EQ_UINT(locs[i].pos, i >= N_INT ? i - N_INT + 5 : i);
    }
    T_EQ_UINT(firn__pkindex_count(idx), N_INT + N_STR);
    firn_free(locs);
    firn_free(keys);
    firn__pkindex_free(idx);
    remove_dir(dir);
}

/* Many keys with the same h and different c (forced collisions of the 64-bit hash). */
T_TEST(same_hash_different_check)
{
    char *dir = temp_dir();
    firn__pkindex_opts o = {dir, 64 << 10, NULL};
    firn__pkindex *idx = firn__pkindex_new_opts(&o);
    firn_err err = {0};
    firn__pkindex_add_file(idx, "f");
    const uint32_t n = 5000;
    for (uint32_t i = 0; i < n; i++) {
        firn__pkkey k = {(uint64_t)(i / 3) * 0x100000001ull, i % 3 + 7};
        firn__pkloc loc = {0, i};
        T_OK_ERR(firn__pkindex_set(idx, k, loc, false, &err), &err);
    }
    for (uint32_t i = 0; i < n; i += 2) {
        firn__pkkey k = {(uint64_t)(i / 3) * 0x100000001ull, i % 3 + 7};
        T_OK_ERR(firn__pkindex_unset(idx, k, true, &err), &err);
    }
    T_EQ_UINT(firn__pkindex_count(idx), n / 2);
    firn__pkkey *keys = firn_calloc(n, sizeof(*keys));
    firn__pkloc *locs = firn_calloc(n, sizeof(*locs));
    bool *found = firn_calloc(n, sizeof(*found));
    for (uint32_t i = 0; i < n; i++)
        keys[n - 1 - i] = (firn__pkkey){(uint64_t)(i / 3) * 0x100000001ull, i % 3 + 7};
    T_OK_ERR(firn__pkindex_lookup(idx, keys, n, locs, found, &err), &err);
    for (uint32_t i = 0; i < n; i++) {
        T_EQ_INT(found[n - 1 - i], i % 2 == 1);
        if (i % 2 == 1)
            T_EQ_UINT(locs[n - 1 - i].pos, i);
    }
    firn_free(keys);
    firn_free(locs);
    firn_free(found);
    firn__pkindex_free(idx);
    remove_dir(dir);
}

/* The private temporary folder (under TMPDIR) disappears with the index. */
T_TEST(temporary_folder_removed)
{
    char *tmp = temp_dir();
    setenv("TMPDIR", tmp, 1);
    firn__pkindex_opts o = {NULL, 64 << 10, NULL};
    firn__pkindex *idx = firn__pkindex_new_opts(&o);
    firn_err err = {0};
    firn__pkindex_add_file(idx, "f");
    for (uint32_t i = 0; i < 20000; i++) {
        uint8_t k[9];
        make_key(i, false, k);
        T_OK_ERR(
            firn__pkindex_set(idx, firn__pkindex_key(idx, k, 9), (firn__pkloc){0, i}, false, &err),
            &err);
    }
    firn__pkindex_stats st;
    firn__pkindex_stats_get(idx, &st);
    T_TRUE(st.runs > 0);
    T_EQ_UINT(st.keys, 20000);
    firn__pkindex_free(idx);
    unsetenv("TMPDIR");
    T_EQ_INT(rmdir(tmp), 0); /* fails unless empty */
    firn_free(tmp);
}

/* A copy through firn__pkindex_add_new in bulk mode (the backfill's path): its keys go to the bulk
 * buffer, not the memtable, and become one run when bulk mode ends; with a budget too small for
 * them the spill takes the buffer over. Checked against the model, every key's file and row:
 * state from before the copy (runs, memtable entries and tombstones), removed keys copied again
 * (the copy must win over the older tombstones still in the memtable), keys moved by
 * firn__pkindex_set during the copy (after the buffered keys: the later location wins), a lookup
 * in the middle (the buffer becomes a run, a second buffer starts). */
static void run_bulk_buffer(size_t memory, bool str, uint32_t n, bool spills, uint64_t seed)
{
    static const uint32_t block_rows[] = {4096, 1, 100, 3000, 4095, 17, 777};
    rng_state = seed;
    char *dir = temp_dir();
    firn__pkindex_opts o = {dir, memory, NULL};
    firn__pkindex *idx = firn__pkindex_new_opts(&o);
    firn__keymap *ref = firn__keymap_new();
    firn_err err = {0};
    for (uint32_t i = 0; i < 48; i++) {
        char loc[32];
        snprintf(loc, sizeof(loc), "f%u", i);
        firn__pkindex_add_file(idx, loc);
    }
    uint8_t key[64];
    for (uint32_t v = 0; v < 3000; v++) { /* before the copy, every third key then removed */
        size_t len = make_key(v, str, key);
        firn__pkloc loc = {v % 3, v};
        T_OK_ERR(firn__pkindex_put(idx, key, len, loc, &err), &err);
        firn__keymap_put(ref, key, len, loc);
    }
    for (uint32_t v = 0; v < 3000; v += 3) {
        size_t len = make_key(v, str, key);
        T_OK_ERR(firn__pkindex_remove(idx, key, len, NULL, &err), &err);
        firn__keymap_remove(ref, key, len);
    }
    size_t mt_before = idx->mt_used;
    T_TRUE(mt_before > 0);
    T_OK(firn__pkindex_bulk(idx, true, &err));
    firn__pkindex_reserve(idx, n);
    /* The copy's keys: the removed 2700, 2703, ..., 2997 again, then 3000, 3001, ... */
    uint64_t *vals = firn_malloc((size_t)n * sizeof(*vals));
    for (uint32_t i = 0; i < n; i++)
        vals[i] = i < 100 ? 2700 + 3 * (uint64_t)i : 2900 + (uint64_t)i;
    firn__pkkey *keys = firn_malloc(4096 * sizeof(*keys));
    bool looked_up = false, saw_buffer = false, saw_spill = false;
    uint32_t v = 0;
    for (uint32_t b = 0; v < n; b++) {
        uint32_t m = block_rows[b % 7] < n - v ? block_rows[b % 7] : n - v;
        uint32_t file = 3 + b % 40, pos = (uint32_t)(rnd() % 1000);
        for (uint32_t i = 0; i < m; i++) {
            size_t len = make_key(vals[v + i], str, key);
            keys[i] = firn__pkindex_key(idx, key, len);
            firn__keymap_put(ref, key, len, (firn__pkloc){file, pos + i});
        }
        T_OK_ERR(firn__pkindex_add_new(idx, keys, m, file, pos, &err), &err);
        v += m;
        saw_buffer |= idx->bb_n > 0;
        saw_spill |= idx->spill != NULL;
        if (!looked_up) /* the memtable takes none of the copy's keys (a spill takes its own) */
            T_EQ_UINT(idx->mt_used, idx->spill ? 0 : mt_before);
        if (b % 3 == 1) { /* a key copied earlier moves */
            size_t len = make_key(vals[rnd() % v], str, key);
            firn__pkloc loc = {44, 5000000 + b};
            T_OK_ERR(firn__pkindex_set(idx, firn__pkindex_key(idx, key, len), loc, true, &err),
                     &err);
            firn__keymap_put(ref, key, len, loc);
        }
        if (!looked_up && v >= n / 2) { /* a lookup in the middle of the copy */
            looked_up = true;
            size_t len = make_key(vals[v - 1], str, key);
            firn__pkloc got, want;
            bool found;
            T_OK_ERR(firn__pkindex_get(idx, key, len, &found, &got, &err), &err);
            T_TRUE(firn__keymap_get(ref, key, len, &want));
            T_TRUE(found);
            T_EQ_UINT(got.file, want.file);
            T_EQ_UINT(got.pos, want.pos);
            T_EQ_UINT(idx->bb_n, 0);
            T_TRUE(idx->spill == NULL);
        }
    }
    T_TRUE(saw_buffer);
    T_EQ_INT(saw_spill, spills);
    T_OK_ERR(firn__pkindex_bulk(idx, false, &err), &err);
    T_EQ_UINT(idx->bb_n, 0);
    T_EQ_UINT(idx->n_runs, 1);
    model_run mr = {3000 + n, 0, memory, str, true};
    model_check_all(idx, ref, &mr);
    firn_free(keys);
    firn_free(vals);
    firn__pkindex_free(idx);
    firn__keymap_free(ref);
    remove_dir(dir);
}

T_TEST(bulk_buffer_int_keys)
{
    run_bulk_buffer(1 << 20, false, 8000, false, 21);
}

T_TEST(bulk_buffer_string_keys)
{
    run_bulk_buffer(1 << 20, true, 8000, false, 22);
}

T_TEST(bulk_buffer_spills)
{
    run_bulk_buffer(1 << 20, false, 60000, true, 23);
}

/* The run a bulk buffer becomes has the bytes of the run the memtable gives for the same keys
 * set one by one and flushed; the keys never touched the memtable, and not copied keys are not
 * found. */
static void run_buffer_bytes(bool str)
{
    static const uint8_t seed[16] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};
    enum { N = 7000 };
    char *dir_a = temp_dir(), *dir_b = temp_dir();
    firn__pkindex_opts oa = {dir_a, 1 << 20, seed}, ob = {dir_b, 1 << 20, seed};
    firn__pkindex *a = firn__pkindex_new_opts(&oa), *b = firn__pkindex_new_opts(&ob);
    firn_err err = {0};
    firn__pkkey *keys = firn_malloc(N * sizeof(*keys));
    uint8_t key[64];
    for (uint32_t v = 0; v < N; v++)
        keys[v] = firn__pkindex_key(a, key, make_key((uint64_t)v * 5 + 1, str, key));
    for (uint32_t f = 0; f < 3; f++) {
        char loc[32];
        snprintf(loc, sizeof(loc), "f%u", f);
        firn__pkindex_add_file(a, loc);
        firn__pkindex_add_file(b, loc);
    }
    T_OK(firn__pkindex_bulk(a, true, &err));
    T_OK_ERR(firn__pkindex_add_new(a, keys, 3000, 1, 0, &err), &err);
    T_OK_ERR(firn__pkindex_add_new(a, keys + 3000, N - 3000, 2, 7, &err), &err);
    T_EQ_UINT(a->bb_n, N);
    T_EQ_UINT(a->mt_used, 0);
    T_EQ_UINT(firn__pkindex_count(a), N);
    for (uint32_t v = 0; v < N; v++) {
        firn__pkloc loc = {v < 3000 ? 1u : 2u, v < 3000 ? v : v - 3000 + 7};
        T_OK_ERR(firn__pkindex_set(b, keys[v], loc, false, &err), &err);
    }
    T_OK_ERR(firn__pkindex_bulk(a, false, &err), &err);
    T_OK_ERR(firn__pkindex_flush(b, &err), &err);
    T_EQ_UINT(a->n_runs, 1);
    T_EQ_UINT(b->n_runs, 1);
    T_EQ_UINT(firn__pkindex_count(a), N);
    uint8_t *bytes_a, *bytes_b;
    size_t len_a = read_whole(a->runs[0]->path, &bytes_a);
    size_t len_b = read_whole(b->runs[0]->path, &bytes_b);
    T_TRUE(len_a == len_b && memcmp(bytes_a, bytes_b, len_a) == 0);
    firn_free(bytes_a);
    firn_free(bytes_b);
    firn__pkloc *locs = firn_malloc(N * sizeof(*locs));
    bool *found = firn_malloc(N);
    T_OK_ERR(firn__pkindex_lookup(a, keys, N, locs, found, &err), &err);
    for (uint32_t v = 0; v < N; v++) {
        T_TRUE(found[v]);
        T_EQ_UINT(locs[v].file, v < 3000 ? 1 : 2);
        T_EQ_UINT(locs[v].pos, v < 3000 ? v : v - 3000 + 7);
    }
    for (uint32_t v = 0; v < N; v++)
        keys[v] = firn__pkindex_key(a, key, make_key((uint64_t)v * 5 + 2, str, key));
    T_OK_ERR(firn__pkindex_lookup(a, keys, N, locs, found, &err), &err);
    for (uint32_t v = 0; v < N; v++)
        T_TRUE(!found[v]);
    firn_free(locs);
    firn_free(found);
    firn_free(keys);
    firn__pkindex_free(a);
    firn__pkindex_free(b);
    remove_dir(dir_a);
    remove_dir(dir_b);
}

T_TEST(bulk_buffer_run_bytes_int)
{
    run_buffer_bytes(false);
}

T_TEST(bulk_buffer_run_bytes_string)
{
    run_buffer_bytes(true);
}

T_MAIN(T_CASE(siphash128_reference_vectors),
       T_CASE(integer_keys_are_exact),
       T_CASE(model_int_keys_small_budget),
       T_CASE(model_string_keys_small_budget),
       T_CASE(model_bulk_then_updates),
       T_CASE(reserve_sizes_memtable_once),
       T_CASE(same_hash_different_check),
       T_CASE(temporary_folder_removed),
       T_CASE(bulk_spill_int_keys),
       T_CASE(bulk_spill_string_keys),
       T_CASE(bulk_spill_sorted_in_pieces),
       T_CASE(bulk_spill_after_reserve),
       T_CASE(keys_of_encodings_match_key),
       T_CASE(add_new_int_keys),
       T_CASE(add_new_string_keys),
       T_CASE(add_new_sorted_in_pieces),
       T_CASE(add_new_check_hashes_join_spill),
       T_CASE(bulk_buffer_int_keys),
       T_CASE(bulk_buffer_string_keys),
       T_CASE(bulk_buffer_spills),
       T_CASE(bulk_buffer_run_bytes_int),
       T_CASE(bulk_buffer_run_bytes_string))
