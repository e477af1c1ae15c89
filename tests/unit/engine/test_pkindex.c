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
    T_OK_ERR(firn__pkindex_bulk(idx, false, &err), &err);
    firn__pkindex_stats st;
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
       T_CASE(bulk_spill_after_reserve))
