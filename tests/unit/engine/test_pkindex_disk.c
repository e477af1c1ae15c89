/* SPDX-License-Identifier: Apache-2.0 */
/* The key index on disk: run files (validation, damaged and partial files), failed writes that
 * leave the index usable, checkpoints that the next open loads or ignores, the folder lock. */
#include "engine/eng_pkindex_int.h"
#include "t.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define N_KEYS 30000u

static char *temp_dir(void)
{
    char tmpl[] = "/tmp/firn-test-pkdisk-XXXXXX";
    char *d = mkdtemp(tmpl);
    FIRN_ASSERT(d != NULL);
    return firn_strdup(d);
}

static void sh(const char *fmt, ...) FIRN_PRINTF(1, 2);

static void sh(const char *fmt, ...)
{
    char cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    T_EQ_INT(system(cmd), 0);
}

static void remove_dir(char *dir)
{
    sh("rm -rf '%s'", dir);
    firn_free(dir);
}

static firn__pkkey key_of(const firn__pkindex *idx, uint32_t i)
{
    uint8_t k[32];
    int n = snprintf((char *)k + 5, sizeof(k) - 5, "k%u", i * 7919u);
    k[0] = 1;
    k[1] = (uint8_t)n;
    k[2] = k[3] = k[4] = 0;
    return firn__pkindex_key(idx, k, 5 + (size_t)n);
}

/* Keys i < N_KEYS with i % 5 != 0 live at (i % 7, i); the rest were removed. */
static void fill(firn__pkindex *idx)
{
    firn_err err = {0};
    for (uint32_t f = 0; f < 7; f++) {
        char loc[64];
        snprintf(loc, sizeof(loc), "file:///w/t/data/%u.parquet", f);
        firn__pkindex_add_file(idx, loc);
    }
    for (uint32_t i = 0; i < N_KEYS; i++)
        T_OK_ERR(firn__pkindex_set(idx, key_of(idx, i), (firn__pkloc){i % 7, i}, false, &err),
                 &err);
    for (uint32_t i = 0; i < N_KEYS; i += 5)
        T_OK_ERR(firn__pkindex_unset(idx, key_of(idx, i), true, &err), &err);
}

static void check(firn__pkindex *idx)
{
    firn_err err = {0};
    firn__pkkey *keys = firn_calloc(N_KEYS, sizeof(*keys));
    firn__pkloc *locs = firn_calloc(N_KEYS, sizeof(*locs));
    bool *found = firn_calloc(N_KEYS, sizeof(*found));
    for (uint32_t i = 0; i < N_KEYS; i++)
        keys[i] = key_of(idx, i);
    T_OK_ERR(firn__pkindex_lookup(idx, keys, N_KEYS, locs, found, &err), &err);
    for (uint32_t i = 0; i < N_KEYS; i++) {
        T_EQ_INT(found[i], i % 5 != 0);
        if (found[i]) {
            T_EQ_UINT(locs[i].file, i % 7);
            T_EQ_UINT(locs[i].pos, i);
        }
    }
    T_EQ_UINT(firn__pkindex_count(idx), N_KEYS - N_KEYS / 5);
    T_EQ_UINT(firn__pkindex_files(idx), 7);
    T_EQ_STR(firn__pkindex_file(idx, 3), "file:///w/t/data/3.parquet");
    firn_free(keys);
    firn_free(locs);
    firn_free(found);
}

static size_t count_files(const char *dir, const char *suffix)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "ls '%s' | grep -c '%s$' || true", dir, suffix);
    FILE *p = popen(cmd, "r");
    FIRN_ASSERT(p != NULL);
    unsigned n = 0;
    T_EQ_INT(fscanf(p, "%u", &n), 1); /* test code: not subject to checksrc */
    pclose(p);
    return n;
}

static firn__pkindex *open_dir(const char *dir, const char *tag, bool *loaded)
{
    firn__pkindex_opts o = {dir, 96 << 10, NULL};
    firn__pkindex *idx = NULL;
    char why[256];
    firn_err err = {0};
    T_OK_ERR(firn__pkindex_open(&o, tag, &idx, loaded, why, sizeof(why), &err), &err);
    return idx;
}

T_TEST(checkpoint_then_open_loads)
{
    char *dir = temp_dir();
    bool loaded = true;
    firn__pkindex *idx = open_dir(dir, "t1:100", &loaded);
    T_FALSE(loaded);
    fill(idx);
    firn_err err = {0};
    T_OK_ERR(firn__pkindex_checkpoint(idx, "t1:100", &err), &err);
    firn__pkindex_stats st;
    firn__pkindex_stats_get(idx, &st);
    T_TRUE(st.runs > 0);
    T_EQ_UINT(st.memtable_entries, 0);
    check(idx);
    firn__pkindex_free(idx);
    T_EQ_UINT(count_files(dir, "MANIFEST"), 1);

    /* Another tag: not loaded; the old files go at first use. */
    idx = open_dir(dir, "t1:101", &loaded);
    T_FALSE(loaded);
    T_EQ_UINT(firn__pkindex_count(idx), 0);
    firn__pkindex_free(idx);

    idx = open_dir(dir, "t1:100", &loaded); /* the checkpoint survived a look */
    T_TRUE(loaded);
    check(idx);
    /* A change after the checkpoint withdraws it: an interrupted process must rebuild. */
    T_OK_ERR(firn__pkindex_set(idx, key_of(idx, 0), (firn__pkloc){1, 1}, false, &err), &err);
    T_EQ_UINT(count_files(dir, "MANIFEST"), 0);
    firn__pkindex_free(idx);
    T_EQ_UINT(count_files(dir, ".pkr"), 0);
    idx = open_dir(dir, "t1:100", &loaded);
    T_FALSE(loaded);
    firn__pkindex_free(idx);
    remove_dir(dir);
}

/* A copy of the folder taken right after a checkpoint stands for the disk of a process killed
 * later: stray files (a run being written, a finished run written after the checkpoint) are
 * ignored and removed, the checkpoint loads. */
T_TEST(killed_process_leftovers_are_ignored)
{
    char *dir = temp_dir();
    char *copy = temp_dir();
    bool loaded;
    firn__pkindex *idx = open_dir(dir, "t:7", &loaded);
    fill(idx);
    firn_err err = {0};
    T_OK_ERR(firn__pkindex_checkpoint(idx, "t:7", &err), &err);
    sh("cp -a '%s/.' '%s/'", dir, copy);
    firn__pkindex_free(idx);
    sh("head -c 5000 /dev/urandom > '%s/run-%s.tmp'", copy, "00000999");
    sh("head -c 9000 /dev/urandom > '%s/run-%s.pkr'", copy, "00000998");
    sh("rm -f '%s/LOCK'", copy);
    idx = open_dir(copy, "t:7", &loaded);
    T_TRUE(loaded);
    check(idx);
    T_EQ_UINT(count_files(copy, ".tmp"), 0);
    T_EQ_UINT(count_files(copy, "00000998.pkr"), 0);
    firn__pkindex_free(idx);
    remove_dir(dir);
    remove_dir(copy);
}

/* A damaged or partial run named by the manifest: not loaded (rebuild), never wrong answers. */
T_TEST(damaged_checkpoint_is_not_loaded)
{
    char *dir = temp_dir();
    bool loaded;
    firn__pkindex *idx = open_dir(dir, "t:1", &loaded);
    fill(idx);
    firn_err err = {0};
    T_OK_ERR(firn__pkindex_checkpoint(idx, "t:1", &err), &err);
    firn__pkindex_stats st;
    firn__pkindex_stats_get(idx, &st);
    char run[64];
    snprintf(run, sizeof(run), "run-%08u.pkr", idx->runs[0]->id);
    firn__pkindex_free(idx);
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, run);
    struct stat sb;
    T_EQ_INT(stat(path, &sb), 0);
    T_EQ_INT(truncate(path, sb.st_size - 100), 0); /* a partial file */
    char why[256];
    firn__pkindex_opts o = {dir, 96 << 10, NULL};
    T_OK_ERR(firn__pkindex_open(&o, "t:1", &idx, &loaded, why, sizeof(why), &err), &err);
    T_FALSE(loaded);
    T_TRUE(strstr(why, "unusable") != NULL);
    firn__pkindex_free(idx);
    remove_dir(dir);
}

/* A page that fails its checksum is an error of the lookup, and withdraws the checkpoint. */
T_TEST(damaged_page_fails_lookup)
{
    char *dir = temp_dir();
    bool loaded;
    firn__pkindex *idx = open_dir(dir, "t:2", &loaded);
    fill(idx);
    firn_err err = {0};
    T_OK_ERR(firn__pkindex_checkpoint(idx, "t:2", &err), &err);
    firn__pkindex_free(idx);
    idx = open_dir(dir, "t:2", &loaded);
    T_TRUE(loaded);
    for (size_t r = 0; r < idx->n_runs; r++) {
        int fd = open(idx->runs[r]->path, O_WRONLY);
        T_TRUE(fd >= 0);
        T_EQ_INT(pwrite(fd, "garbage", 7, PK_PAGE + 100), 7); /* inside data page 0 */
        close(fd);
    }
    firn__pkkey *keys = firn_calloc(N_KEYS, sizeof(*keys));
    firn__pkloc *locs = firn_calloc(N_KEYS, sizeof(*locs));
    bool *found = firn_calloc(N_KEYS, sizeof(*found));
    for (uint32_t i = 0; i < N_KEYS; i++)
        keys[i] = key_of(idx, i);
    T_EQ_INT(firn__pkindex_lookup(idx, keys, N_KEYS, locs, found, &err), FIRN_ERR_PARSE);
    T_TRUE(strstr(err.msg, "checksum") != NULL);
    T_EQ_UINT(count_files(dir, "MANIFEST"), 0);
    firn_free(keys);
    firn_free(locs);
    firn_free(found);
    firn__pkindex_free(idx);
    remove_dir(dir);
}

/* A write that fails in the middle of a run (memtable flush, then merge) leaves no file behind
 * and the index whole; the next writes succeed. */
T_TEST(failed_run_write_leaves_index_whole)
{
    char *dir = temp_dir();
    firn__pkindex_opts o = {dir, 64 << 10, NULL};
    firn__pkindex *idx = firn__pkindex_new_opts(&o);
    firn_err err = {0};
    for (uint32_t f = 0; f < 7; f++) {
        char loc[64];
        snprintf(loc, sizeof(loc), "file:///w/t/data/%u.parquet", f);
        firn__pkindex_add_file(idx, loc);
    }
    size_t failures = 0;
    for (uint32_t i = 0; i < N_KEYS; i++) {
        if (i % 3000 == 1500)
            firn__pkrun_fail_after_pages = 2 + i % 4;
        firn_rc rc = firn__pkindex_set(idx, key_of(idx, i), (firn__pkloc){i % 7, i}, false, &err);
        if (rc) {
            T_EQ_INT(rc, FIRN_ERR_IO);
            T_EQ_UINT(count_files(dir, ".tmp"), 0);
            failures++;
            /* Retry: the set did not happen. */
            T_OK_ERR(firn__pkindex_set(idx, key_of(idx, i), (firn__pkloc){i % 7, i}, false, &err),
                     &err);
        }
    }
    firn__pkrun_fail_after_pages = 0;
    T_TRUE(failures >= 5);
    for (uint32_t i = 0; i < N_KEYS; i += 5)
        T_OK_ERR(firn__pkindex_unset(idx, key_of(idx, i), true, &err), &err);
    check(idx);
    firn__pkindex_free(idx);
    remove_dir(dir);
}

T_TEST(folder_is_locked)
{
    char *dir = temp_dir();
    bool loaded;
    firn__pkindex *a = open_dir(dir, "t", &loaded);
    firn__pkindex_opts o = {dir, 96 << 10, NULL};
    firn__pkindex *b = NULL;
    char why[64];
    firn_err err = {0};
    T_EQ_INT(firn__pkindex_open(&o, "t", &b, &loaded, why, sizeof(why), &err),
             FIRN_ERR_UNAVAILABLE);
    T_TRUE(strstr(err.msg, "in use") != NULL);
    T_TRUE(b == NULL);
    firn__pkindex_free(a);
    b = open_dir(dir, "t", &loaded); /* released */
    firn__pkindex_free(b);
    remove_dir(dir);
}

T_TEST(run_file_validation)
{
    char *dir = temp_dir();
    firn__pkrun_shape sh = {3, 5, 100, false, 0};
    firn__pkrun_writer *w = NULL;
    firn_err err = {0};
    T_OK_ERR(firn__pkrun_writer_open(dir, 42, &sh, &w, &err), &err);
    pk_entry e[3] = {{10, 0, 1, 7}, {20, 0, PK_TOMB, 0}, {~0ull, 0, 5, 100}};
    for (int i = 0; i < 3; i++)
        T_OK_ERR(firn__pkrun_writer_add(w, &e[i], &err), &err);
    firn__pkrun *r = NULL;
    T_OK_ERR(firn__pkrun_writer_finish(w, &r, &err), &err);
    T_EQ_UINT(r->n_entries, 3);
    T_EQ_UINT(r->n_tombs, 1);
    T_EQ_UINT(r->min_h, 10);
    T_EQ_UINT(r->max_h, ~0ull);
    pk_entry got[PK_PAGE_MAX_ENTRIES];
    size_t n = 0;
    uint8_t page[PK_PAGE + PK_PAGE_PAD] = {0};
    T_EQ_INT(pread(r->fd, page, PK_PAGE, PK_PAGE), PK_PAGE);
    T_OK_ERR(firn__pkrun_check_page(page, r->path, 0, &err), &err);
    T_OK_ERR(firn__pkrun_decode(r, page, got, &n, &err), &err);
    T_EQ_UINT(n, 3);
    for (int i = 0; i < 3; i++) {
        T_EQ_UINT(got[i].h, e[i].h);
        T_EQ_UINT(got[i].file1, e[i].file1);
        T_EQ_UINT(got[i].pos, e[i].pos);
    }
    char *path = firn_strdup(r->path);
    firn__pkrun_close(r, false);
    /* Wrong magic, then a short file. */
    int fd = open(path, O_WRONLY);
    T_EQ_INT(pwrite(fd, "X", 1, 0), 1);
    close(fd);
    T_EQ_INT(firn__pkrun_open(path, &r, &err), FIRN_ERR_PARSE);
    T_EQ_INT(truncate(path, 5000), 0);
    T_EQ_INT(firn__pkrun_open(path, &r, &err), FIRN_ERR_PARSE);
    T_TRUE(r == NULL);
    firn_free(path);
    remove_dir(dir);
}

static uint64_t golden_rng;

static uint64_t golden_rnd(void)
{
    uint64_t z = (golden_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Writes n entries of shape sh (hashes random and sorted, every 13th a tombstone) to run `id` in
 * dir, one by one or in batches of uneven sizes, reads every entry back, and returns the FNV-1a
 * hash of the file's bytes. */
static uint64_t
golden_run(const char *dir, uint32_t id, const firn__pkrun_shape *sh, size_t n, bool batched)
{
    firn_err err = {0};
    uint64_t *hs = firn_malloc(n * sizeof(*hs));
    for (size_t i = 0; i < n; i++)
        hs[i] = golden_rnd();
    qsort(hs, n, sizeof(*hs), cmp_u64);
    pk_entry *e = firn_malloc(n * sizeof(*e));
    size_t m = 0, tombs = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && hs[i] == e[m - 1].h)
            continue;
        uint64_t r = golden_rnd();
        e[m].h = hs[i];
        e[m].c = sh->has_c ? (uint32_t)r : 0;
        e[m].file1 = i % 13 == 5 ? PK_TOMB : (uint32_t)(r >> 32) % sh->max_file1 + 1;
        e[m].pos = e[m].file1 == PK_TOMB ? 0 : (uint32_t)(r >> 16) % sh->max_pos;
        tombs += e[m].file1 == PK_TOMB;
        m++;
    }
    firn__pkrun_writer *w = NULL;
    T_OK_ERR(firn__pkrun_writer_open(dir, id, sh, &w, &err), &err);
    static const size_t batches[] = {1, 7, 300, 1000, 2};
    for (size_t i = 0, b = 0; i < m;) {
        size_t k = batched ? batches[b++ % 5] : 1;
        k = k < m - i ? k : m - i;
        if (batched)
            T_OK_ERR(firn__pkrun_writer_add_n(w, &e[i], k, &err), &err);
        else
            T_OK_ERR(firn__pkrun_writer_add(w, &e[i], &err), &err);
        i += k;
    }
    firn__pkrun *r = NULL;
    T_OK_ERR(firn__pkrun_writer_finish(w, &r, &err), &err);
    T_EQ_UINT(r->n_entries, m);
    T_EQ_UINT(r->n_tombs, tombs);
    firn__pkrun_iter it;
    firn__pkrun_iter_init(&it, r);
    for (size_t i = 0; i < m; i++) {
        T_OK_ERR(firn__pkrun_iter_next(&it, &err), &err);
        T_TRUE(!it.done);
        if (it.done)
            break;
        const pk_entry *g = &it.ents[it.i];
        T_EQ_UINT(g->h, e[i].h);
        T_EQ_UINT(g->c, e[i].c);
        T_EQ_UINT(g->file1, e[i].file1);
        T_EQ_UINT(g->pos, e[i].pos);
    }
    T_OK_ERR(firn__pkrun_iter_next(&it, &err), &err);
    T_TRUE(it.done);
    firn__pkrun_iter_deinit(&it);
    uint64_t fnv = 0xcbf29ce484222325ull;
    uLong crc = crc32(0L, Z_NULL, 0);
    uint8_t buf[PK_PAGE];
    for (uint64_t off = 0; off < r->file_bytes; off += PK_PAGE) {
        size_t len = r->file_bytes - off < PK_PAGE ? (size_t)(r->file_bytes - off) : PK_PAGE;
        T_EQ_INT(pread(r->fd, buf, len, (off_t)off), (ssize_t)len);
        for (size_t i = 0; i < len; i++)
            fnv = (fnv ^ buf[i]) * 0x100000001b3ull;
        crc = crc32(crc, buf, (uInt)len);
    }
    /* The writer's crc32 of the whole file, which uploads use instead of reading it again. */
    T_TRUE(r->has_file_crc);
    T_EQ_UINT(r->file_crc, (uint32_t)crc);
    firn__pkrun_close(r, true);
    firn_free(e);
    firn_free(hs);
    return fnv;
}

/* The run format does not drift (files written by earlier versions stay readable, and a run
 * written now is what they wrote): runs of fixed pseudo-random entries hash to the values the
 * writer of format version 1 gave when this test was written. The shapes cover one-store and
 * split Rice codes (k of 62 and 53), escaped deltas (q >= RICE_ESC), check hashes, fields of 64
 * and 23 bits, anchors, tombstones and many pages. */
#define GOLDEN_WIDE   13963385382623080918ull
#define GOLDEN_NARROW 9036874858134345710ull
#define GOLDEN_MID    11776487369559845388ull
#define GOLDEN_SPARSE 13409302352991968255ull

/* golden_run of run `id` twice from the same random state, entry by entry and in batches
 * (firn__pkrun_writer_add_n): both give the file of hash want. */
static void
golden_both(const char *dir, uint32_t id, const firn__pkrun_shape *sh, size_t n, uint64_t want)
{
    uint64_t state = golden_rng;
    T_EQ_UINT(golden_run(dir, id, sh, n, false), want);
    golden_rng = state;
    T_EQ_UINT(golden_run(dir, id, sh, n, true), want);
}

T_TEST(run_format_golden)
{
    char *dir = temp_dir();
    golden_rng = 77;
    firn__pkrun_shape wide = {3, UINT32_MAX, UINT32_MAX, true, 0};
    golden_both(dir, 1, &wide, 3000, GOLDEN_WIDE);
    firn__pkrun_shape narrow = {100000, 5, 1000000, false, 2};
    golden_both(dir, 2, &narrow, 100000, GOLDEN_NARROW);
    firn__pkrun_shape mid = {2000, 300, 1u << 20, true, 1};
    golden_both(dir, 3, &mid, 2000, GOLDEN_MID);
    firn__pkrun_shape sparse = {1000000000, 3, 70000, false, 0}; /* k 33: every delta escaped */
    golden_both(dir, 4, &sparse, 20000, GOLDEN_SPARSE);
    remove_dir(dir);
}

/* firn__pk_crc32 (PCLMULQDQ where the processor has it) gives zlib's crc32 for every length
 * (the folded 64-byte blocks, the 16-byte blocks after them, the bytes after those), alignment
 * and starting crc, in one call or in pieces; firn__pk_crc32_combine gives zlib's crc32 of the
 * concatenation. */
T_TEST(crc32_matches_zlib)
{
    enum { BIG = (1 << 20) + 77 };
    uint8_t *b = firn_malloc(BIG + 16);
    golden_rng = 5;
    for (size_t i = 0; i < BIG + 16; i++)
        b[i] = (uint8_t)golden_rnd();
    static const uint32_t seeds[] = {0, 0xFFFFFFFFu, 0x12345678u};
    for (size_t len = 0; len <= 400; len++) {
        for (size_t off = 0; off < 16; off += 3) {
            for (size_t s = 0; s < 3; s++)
                T_EQ_UINT(firn__pk_crc32(seeds[s], b + off, len),
                          (uint32_t)crc32(seeds[s], b + off, (uInt)len));
        }
    }
    static const size_t lens[] = {4092, 4096, 65536 + 15, BIG};
    for (size_t i = 0; i < 4; i++) {
        uint32_t want = (uint32_t)crc32(0L, b + 1, (uInt)lens[i]);
        T_EQ_UINT(firn__pk_crc32(0, b + 1, lens[i]), want);
        size_t cut = lens[i] / 3 + 5;
        uint32_t head = firn__pk_crc32(0, b + 1, cut);
        T_EQ_UINT(firn__pk_crc32(head, b + 1 + cut, lens[i] - cut), want);
        T_EQ_UINT(firn__pk_crc32_combine(head, firn__pk_crc32(0, b + 1 + cut, lens[i] - cut),
                                         lens[i] - cut),
                  want);
    }
    firn_free(b);
}

T_MAIN(T_CASE(checkpoint_then_open_loads),
       T_CASE(killed_process_leftovers_are_ignored),
       T_CASE(damaged_checkpoint_is_not_loaded),
       T_CASE(damaged_page_fails_lookup),
       T_CASE(failed_run_write_leaves_index_whole),
       T_CASE(folder_is_locked),
       T_CASE(run_file_validation),
       T_CASE(run_format_golden),
       T_CASE(crc32_matches_zlib))
