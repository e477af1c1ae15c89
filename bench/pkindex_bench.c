/* SPDX-License-Identifier: Apache-2.0 */
/* Primary-key index benchmark: `pkindex_bench N [--str] [--mem MiB] [--dir PATH] [--load-only]
 * [--upload FOLDER [--copy]]` loads N keys (int64 ids, or strings with --str) in bulk mode as a
 * backfill does (then, with --upload, copies the index next to a table in a local FOLDER, as the
 * end of a backfill does through the local FileIO; --copy: a copy of the bytes even where a hard
 * link would do), then measures batch lookups (flush-sized batches of random live keys), single
 * lookups and update rounds (lookup
 * + set, as a CDC flush does), checking every answer, and prints bytes per key on disk, resident
 * memory (now and peak, from /proc/self/status) and rates. Single-threaded. */
#include "engine/eng_pkindex_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define ROWS_PER_FILE 1000000u

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static void die(const char *what, const firn_err *err)
{
    fprintf(stderr, "pkindex_bench: %s: %s\n", what, err ? err->msg : "");
    exit(2);
}

static double now_s(void)
{
    return (double)firn_monotonic_ns() / 1e9;
}

/* VmRSS and VmHWM in MiB. */
static void rss_mib(double *now, double *peak)
{
    FILE *fp = fopen("/proc/self/status", "r");
    char line[256];
    *now = *peak = 0;
    while (fp && fgets(line, sizeof(line), fp)) {
        char *end;
        if (strncmp(line, "VmRSS:", 6) == 0)
            *now = (double)strtoull(line + 6, &end, 10) / 1024.0;
        if (strncmp(line, "VmHWM:", 6) == 0)
            *peak = (double)strtoull(line + 6, &end, 10) / 1024.0;
    }
    if (fp)
        fclose(fp);
}

typedef struct bench {
    firn__pkindex *idx;
    uint64_t n;
    bool str;
} bench;

/* Key id i: an int64 primary key (ids 1..N, as a serial column), or a string. */
static firn__pkkey key_of(const bench *b, uint64_t i)
{
    uint8_t k[64];
    size_t len;
    k[0] = 1;
    if (!b->str) {
        uint64_t v = i + 1;
        for (int j = 0; j < 8; j++)
            k[1 + j] = (uint8_t)(v >> (8 * j));
        len = 9;
    } else {
        char s[48];
        int n = snprintf(s, sizeof(s), "order-%016llx", (unsigned long long)mix(i));
        k[1] = (uint8_t)n;
        k[2] = k[3] = k[4] = 0;
        memcpy(k + 5, s, (size_t)n);
        len = 5 + (size_t)n;
    }
    return firn__pkindex_key(b->idx, k, len);
}

/* Where key id i lives after `gen` updates: updates append to files after the backfill's. The
 * location encodes i and gen, so answers are checked without a table of expected values. */
static firn__pkloc loc_of(const bench *b, uint64_t i, uint32_t gen)
{
    uint64_t row = gen ? b->n + (uint64_t)gen * 7919 + i : i;
    firn__pkloc l = {(uint32_t)(row / ROWS_PER_FILE), (uint32_t)(row % ROWS_PER_FILE)};
    return l;
}

/* The generation of a location of key id i; -1 when it is not a location of i. */
static int64_t gen_of(const bench *b, uint64_t i, firn__pkloc l)
{
    uint64_t row = (uint64_t)l.file * ROWS_PER_FILE + l.pos;
    if (row < b->n)
        return row == i ? 0 : -1;
    if (row < b->n + i || (row - b->n - i) % 7919 != 0)
        return -1;
    return (int64_t)((row - b->n - i) / 7919);
}

/* The key encodings (firn_batch_key_encode) of key ids [from, from + n) into kb, and where each
 * ends into ends[0..n), as a backfill keeps them for a chunk's rows. */
static size_t encode_keys(const bench *b, uint64_t from, size_t n, uint8_t *kb, uint32_t *ends)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t id = from + i;
        kb[len++] = 1;
        if (!b->str) {
            uint64_t v = id + 1;
            for (int j = 0; j < 8; j++)
                kb[len++] = (uint8_t)(v >> (8 * j));
        } else {
            char s[48];
            int sn = snprintf(s, sizeof(s), "order-%016llx", (unsigned long long)mix(id));
            kb[len++] = (uint8_t)sn;
            kb[len++] = 0;
            kb[len++] = 0;
            kb[len++] = 0;
            memcpy(kb + len, s, (size_t)sn);
            len += (size_t)sn;
        }
        ends[i] = (uint32_t)len;
    }
    return len;
}

/* Adds the keys of one data file as a backfill's index_file does (eng_backfill.c). */
static void index_file(bench *b, const uint8_t *kb, const uint32_t *ends, size_t n, uint32_t ord)
{
    firn_err err = {0};
    enum { BLOCK = 4096 };
    firn__pkkey *keys = firn_malloc(((n < BLOCK ? n : BLOCK) + 1) * sizeof(*keys));
    for (size_t i = 0; i < n; i += BLOCK) {
        size_t m = n - i < BLOCK ? n - i : BLOCK;
        firn__pkindex_keys(b->idx, kb, i ? ends[i - 1] : 0, ends + i, m, keys);
        if (firn__pkindex_add_new(b->idx, keys, m, ord, (uint32_t)i, &err))
            die("add", &err);
    }
    firn_free(keys);
}

/* Bulk load as a backfill does: memtable sized for the copy, then per data file of
 * ROWS_PER_FILE rows the kept key encodings turned into index entries. */
static void load(bench *b)
{
    firn_err err = {0};
    double t0 = now_s();
    if (firn__pkindex_bulk(b->idx, true, &err))
        die("bulk", &err);
    firn__pkindex_reserve(b->idx, b->n);
    uint8_t *kb = firn_malloc((size_t)ROWS_PER_FILE * 64);
    uint32_t *ends = firn_malloc((size_t)ROWS_PER_FILE * sizeof(uint32_t));
    for (uint64_t from = 0; from < b->n; from += ROWS_PER_FILE) {
        size_t n = b->n - from < ROWS_PER_FILE ? (size_t)(b->n - from) : ROWS_PER_FILE;
        encode_keys(b, from, n, kb, ends);
        index_file(b, kb, ends, n, (uint32_t)(from / ROWS_PER_FILE));
    }
    firn_free(kb);
    firn_free(ends);
    if (firn__pkindex_bulk(b->idx, false, &err))
        die("bulk end", &err);
    double dt = now_s() - t0;
    printf("load: %llu keys in %.1f s, %.2f M keys/s\n", (unsigned long long)b->n, dt,
           (double)b->n / dt / 1e6);
}

/* `rounds` batches of `batch` random keys; with update, each key then moves to its next
 * location. Every answer is checked. Returns keys per second of index time. */
static double lookups(bench *b, size_t batch, size_t rounds, bool update, uint64_t seed)
{
    firn_err err = {0};
    firn__pkkey *keys = firn_calloc(batch, sizeof(*keys));
    firn__pkloc *locs = firn_calloc(batch, sizeof(*locs));
    bool *found = firn_calloc(batch, sizeof(*found));
    uint64_t *ids = firn_calloc(batch, sizeof(*ids));
    double busy = 0;
    for (size_t r = 0; r < rounds; r++) {
        for (size_t j = 0; j < batch; j++) {
            ids[j] = mix(seed * 1000003 + r * batch + j) % b->n;
            keys[j] = key_of(b, ids[j]);
        }
        double t0 = now_s();
        if (firn__pkindex_lookup(b->idx, keys, batch, locs, found, &err))
            die("lookup", &err);
        for (size_t j = 0; j < batch; j++) {
            int64_t g = found[j] ? gen_of(b, ids[j], locs[j]) : -1;
            if (g < 0) {
                fprintf(stderr, "pkindex_bench: wrong answer for key %llu\n",
                        (unsigned long long)ids[j]);
                exit(1);
            }
            if (update &&
                firn__pkindex_set(b->idx, keys[j], loc_of(b, ids[j], (uint32_t)g + 1), true, &err))
                die("update", &err);
        }
        busy += now_s() - t0;
    }
    firn_free(keys);
    firn_free(locs);
    firn_free(found);
    firn_free(ids);
    return (double)(batch * rounds) / busy;
}

/* User and system CPU seconds of the process so far. */
static void cpu_s(double *user, double *sys)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
    *sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* Copies the index to folder through the local FileIO, as a backfill's end does
 * (eng_pkindex_share.c), and removes the copies again. */
static void upload(bench *b, const char *folder)
{
    firn_err err = {0};
    firn_io *io = firn_io_local_new();
    firn__pkxman m;
    firn__pkxfer st = {0};
    double u0, s0, u1, s1;
    cpu_s(&u0, &s0);
    double t0 = now_s();
    if (firn__pkindex_upload(b->idx, io, folder, "bench", 1, NULL, &m, &st, &err))
        die("upload", &err);
    double dt = now_s() - t0;
    cpu_s(&u1, &s1);
    printf("upload: %llu runs, %.1f MiB in %.2f s (CPU: %.3f s user, %.3f s system)\n",
           (unsigned long long)st.runs, (double)st.bytes / 1048576.0, dt, u1 - u0, s1 - s0);
    firn__pkxman_remove_unused(io, folder, &m, NULL);
    firn__pkxman_free(&m);
    firn_io_free(io);
}

static void report(const bench *b, const char *when)
{
    firn__pkindex_stats st;
    firn__pkindex_stats_get(b->idx, &st);
    double rss, peak;
    rss_mib(&rss, &peak);
    printf("%s: %zu keys, %zu runs, %.2f bytes/key on disk (%.1f MiB), memtable %.1f MiB, "
           "cache %.1f MiB, fences %.2f MiB, RSS %.1f MiB (peak %.1f MiB), %llu flushes, "
           "%llu merges\n",
           when, st.keys, st.runs, (double)st.disk_bytes / (double)(st.keys ? st.keys : 1),
           (double)st.disk_bytes / 1048576.0, (double)st.memtable_bytes / 1048576.0,
           (double)st.cache_bytes / 1048576.0, (double)st.fence_bytes / 1048576.0, rss, peak,
           (unsigned long long)st.flushes, (unsigned long long)st.merges);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: pkindex_bench N [--str] [--mem MiB] [--dir PATH] [--load-only] "
                        "[--upload FOLDER [--copy]]\n");
        return 2;
    }
    bench b = {0};
    bool load_only = false;
    const char *upload_to = NULL;
    b.n = strtoull(argv[1], NULL, 10);
    firn__pkindex_opts o = {0};
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--str") == 0)
            b.str = true;
        else if (strcmp(argv[i], "--mem") == 0 && i + 1 < argc)
            o.memory_limit = (size_t)strtoull(argv[++i], NULL, 10) << 20;
        else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            o.dir = argv[++i];
        else if (strcmp(argv[i], "--load-only") == 0)
            load_only = true;
        else if (strcmp(argv[i], "--upload") == 0 && i + 1 < argc)
            upload_to = argv[++i];
        else if (strcmp(argv[i], "--copy") == 0)
            firn__pkindex_upload_no_link = true;
    }
    if (b.n < 1000)
        b.n = 1000;
    b.idx = firn__pkindex_new_opts(&o);
    for (uint64_t f = 0; f <= (b.n * 2 + 400000) / ROWS_PER_FILE + 1; f++) {
        char loc[96];
        snprintf(loc, sizeof(loc), "file:///warehouse/db/t/data/%08llu.parquet",
                 (unsigned long long)f);
        firn__pkindex_add_file(b.idx, loc);
    }
    printf("keys %llu (%s), memory limit %zu MiB\n", (unsigned long long)b.n,
           b.str ? "strings" : "int64",
           (o.memory_limit ? o.memory_limit : FIRN_PKINDEX_MEMORY_DEFAULT) >> 20);
    load(&b);
    report(&b, "after load");
    if (upload_to)
        upload(&b, upload_to);
    if (load_only) {
        firn__pkindex_free(b.idx);
        return 0;
    }
    printf("batch lookups (100000 per batch): %.0f keys/s\n", lookups(&b, 100000, 5, false, 1));
    printf("batch lookups (1000 per batch): %.0f keys/s\n", lookups(&b, 1000, 50, false, 2));
    printf("single lookups: %.0f keys/s\n", lookups(&b, 1, 20000, false, 3));
    printf("update rounds (lookup + set, 100000 per flush): %.0f keys/s\n",
           lookups(&b, 100000, 20, true, 4));
    report(&b, "after updates");
    printf("batch lookups after updates (100000 per batch): %.0f keys/s\n",
           lookups(&b, 100000, 5, false, 5));
    report(&b, "end");
    firn__pkindex_free(b.idx);
    return 0;
}
