/* SPDX-License-Identifier: Apache-2.0 */
/* The key index kept next to the table: the index manifest's encoding (round trip, damage
 * refused), upload and download through the local FileIO (the downloaded index answers like the
 * original; unchanged runs are not uploaded again; a damaged or missing run is refused). */
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
    char tmpl[] = "/tmp/firn-test-pkremote-XXXXXX";
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

static char *sub(const char *dir, const char *name)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return firn_strdup(p);
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

/* Keys i < N_KEYS with i % 5 != 0 live at (i % 7, i + shift). */
static void fill(firn__pkindex *idx, uint32_t shift)
{
    firn_err err = {0};
    for (uint32_t f = 0; f < 7 && firn__pkindex_files(idx) < 7; f++) {
        char loc[64];
        snprintf(loc, sizeof(loc), "file:///w/t/data/%u.parquet", f);
        firn__pkindex_add_file(idx, loc);
    }
    for (uint32_t i = 0; i < N_KEYS; i++)
        T_OK_ERR(firn__pkindex_set(idx, key_of(idx, i), (firn__pkloc){i % 7, i + shift}, shift > 0,
                                   &err),
                 &err);
    for (uint32_t i = 0; i < N_KEYS && shift == 0; i += 5)
        T_OK_ERR(firn__pkindex_unset(idx, key_of(idx, i), true, &err), &err);
}

static void check(firn__pkindex *idx, uint32_t shift)
{
    firn_err err = {0};
    firn__pkkey *keys = firn_calloc(N_KEYS, sizeof(*keys));
    firn__pkloc *locs = firn_calloc(N_KEYS, sizeof(*locs));
    bool *found = firn_calloc(N_KEYS, sizeof(*found));
    for (uint32_t i = 0; i < N_KEYS; i++)
        keys[i] = key_of(idx, i);
    T_OK_ERR(firn__pkindex_lookup(idx, keys, N_KEYS, locs, found, &err), &err);
    for (uint32_t i = 0; i < N_KEYS; i++) {
        T_EQ_INT(found[i], shift > 0 || i % 5 != 0);
        if (found[i]) {
            T_EQ_UINT(locs[i].file, i % 7);
            T_EQ_UINT(locs[i].pos, i + shift);
        }
    }
    T_EQ_UINT(firn__pkindex_files(idx), 7);
    T_EQ_STR(firn__pkindex_file(idx, 3), "file:///w/t/data/3.parquet");
    firn_free(keys);
    firn_free(locs);
    firn_free(found);
}

static firn__pkindex *open_dir(const char *dir)
{
    firn__pkindex_opts o = {dir, 96 << 10, NULL};
    firn__pkindex *idx = NULL;
    char why[256];
    bool loaded = true;
    firn_err err = {0};
    T_OK_ERR(firn__pkindex_open(&o, "t@1", &idx, &loaded, why, sizeof(why), &err), &err);
    T_FALSE(loaded);
    return idx;
}

T_TEST(manifest_round_trip)
{
    firn__pkxrun runs[2] = {
        {"run-a.pkr", 7, 1, 123456, 30000, 5, UINT64_MAX - 3, 0xdeadbeefu},
        {"run-b.pkr", 3, 0, 8192, 1, 42, 42, 1},
    };
    char *files[3] = {"s3://b/t/data/0.parquet", "", "gs://b/t/data/2.parquet"};
    firn__pkxman m = {.table_uuid = "0c7f6d2e-1111-4a4b-8c8d-0123456789ab",
                      .snapshot_id = 8765432109876543210,
                      .keys = 123456789012ull,
                      .next_run_id = 9,
                      .runs = runs,
                      .n_runs = 2,
                      .files = files,
                      .n_files = 3};
    for (int i = 0; i < 16; i++)
        m.seed[i] = (uint8_t)(i * 17 + 1);
    firn_buf b;
    firn_buf_init(&b, 1 << 20);
    T_OK(firn__pkxman_encode(&m, &b));
    firn__pkxman d;
    firn_err err = {0};
    T_OK_ERR(firn__pkxman_decode(b.data, b.len, &d, &err), &err);
    T_EQ_STR(d.table_uuid, m.table_uuid);
    T_EQ_INT(d.snapshot_id, m.snapshot_id);
    T_EQ_MEM(d.seed, m.seed, 16);
    T_EQ_UINT(d.keys, m.keys);
    T_EQ_UINT(d.next_run_id, 9);
    T_EQ_UINT(d.n_runs, 2);
    for (size_t i = 0; i < 2; i++) {
        T_EQ_STR(d.runs[i].name, runs[i].name);
        T_EQ_UINT(d.runs[i].id, runs[i].id);
        T_EQ_UINT(d.runs[i].level, runs[i].level);
        T_EQ_UINT(d.runs[i].bytes, runs[i].bytes);
        T_EQ_UINT(d.runs[i].entries, runs[i].entries);
        T_EQ_UINT(d.runs[i].min_h, runs[i].min_h);
        T_EQ_UINT(d.runs[i].max_h, runs[i].max_h);
        T_EQ_UINT(d.runs[i].crc, runs[i].crc);
    }
    T_EQ_UINT(d.n_files, 3);
    for (size_t i = 0; i < 3; i++)
        T_EQ_STR(d.files[i], files[i]);
    firn__pkxman_free(&d);

    /* Every flipped byte and every truncation is refused (crc, magic, version, lengths). */
    for (size_t i = 0; i < b.len; i++) {
        b.data[i] ^= 0x20;
        T_TRUE(firn__pkxman_decode(b.data, b.len, &d, &err) == FIRN_ERR_PARSE);
        b.data[i] ^= 0x20;
    }
    for (size_t n = 0; n < b.len; n += 7)
        T_TRUE(firn__pkxman_decode(b.data, n, &d, &err) == FIRN_ERR_PARSE);
    /* A run name with a folder in it is refused even with a good crc. */
    runs[1].name = "../x.pkr";
    firn_buf_reset(&b);
    T_OK(firn__pkxman_encode(&m, &b));
    T_TRUE(firn__pkxman_decode(b.data, b.len, &d, &err) == FIRN_ERR_PARSE);
    firn_buf_deinit(&b);
}

static firn__pkindex *
download(const char *dir, firn_io *io, const char *folder, const firn__pkxman *m, firn_rc want)
{
    firn__pkindex *idx = open_dir(dir);
    firn__pkxfer x = {0};
    firn_err err = {0};
    firn_rc rc = firn__pkindex_download(idx, io, folder, m, &x, &err);
    T_EQ_INT(rc, want);
    if (rc == FIRN_OK)
        T_EQ_UINT(x.runs, m->n_runs);
    return idx;
}

T_TEST(upload_then_download)
{
    char *root = temp_dir();
    char *a = sub(root, "a"), *b = sub(root, "b"), *folder = sub(root, "table/metadata/firn-index");
    firn_io *io = firn_io_local_new();
    firn_err err = {0};
    firn__pkindex *idx = open_dir(a);
    fill(idx, 0);
    firn__pkxman m1, m2;
    firn__pkxfer x = {0};
    T_OK_ERR(firn__pkindex_upload(idx, io, folder, "uuid-1", 11, NULL, &m1, &x, &err), &err);
    firn__pkindex_stats st;
    firn__pkindex_stats_get(idx, &st);
    T_TRUE(st.runs > 1);
    T_EQ_UINT(m1.n_runs, st.runs);
    T_EQ_UINT(x.runs, st.runs);
    T_EQ_UINT(x.bytes, st.disk_bytes);
    T_EQ_UINT(m1.keys, N_KEYS - N_KEYS / 5);
    T_EQ_INT(m1.snapshot_id, 11);

    /* Unchanged: nothing uploaded again. Changed: only the new runs. */
    firn__pkxfer x2 = {0};
    T_OK_ERR(firn__pkindex_upload(idx, io, folder, "uuid-1", 12, &m1, &m2, &x2, &err), &err);
    T_EQ_UINT(x2.runs, 0);
    for (size_t i = 0; i < m2.n_runs; i++)
        T_EQ_STR(m2.runs[i].name, m1.runs[i].name);
    firn__pkxman_free(&m2);

    /* Another host: the downloaded index answers as the original. */
    firn__pkindex *got = download(b, io, folder, &m1, FIRN_OK);
    check(got, 0);
    T_EQ_UINT(firn__pkindex_count(got), N_KEYS - N_KEYS / 5);
    /* It keeps working: changes, merges, then another upload reuses what it can. */
    fill(got, 1);
    check(got, 1);
    x2 = (firn__pkxfer){0};
    T_OK_ERR(firn__pkindex_upload(got, io, folder, "uuid-1", 13, &m1, &m2, &x2, &err), &err);
    T_TRUE(x2.runs >= 1);
    firn__pkxman_remove_unused(io, folder, &m1, &m2);
    firn__pkindex_free(got);
    got = download(b, io, folder, &m2, FIRN_OK);
    check(got, 1);
    firn__pkindex_free(got);
    firn__pkxman_free(&m2);
    firn__pkindex_free(idx);
    firn__pkxman_free(&m1);
    firn_io_free(io);
    sh("rm -rf '%s'", root);
    firn_free(a);
    firn_free(b);
    firn_free(folder);
    firn_free(root);
}

/* Inverts the byte at off of the file at path: a change whatever the byte was (writing a fixed
 * byte left a run whose byte there already was that one unchanged, 1 time in 256). */
static void flip_byte(const char *path, off_t off)
{
    int fd = open(path, O_RDWR);
    T_TRUE(fd >= 0);
    uint8_t b = 0;
    T_EQ_INT(pread(fd, &b, 1, off), 1);
    b ^= 0xFF;
    T_EQ_INT(pwrite(fd, &b, 1, off), 1);
    close(fd);
}

T_TEST(damaged_or_missing_run_is_refused)
{
    char *root = temp_dir();
    char *a = sub(root, "a"), *b = sub(root, "b"), *folder = sub(root, "t/metadata/firn-index");
    firn_io *io = firn_io_local_new();
    firn_err err = {0};
    firn__pkindex *idx = open_dir(a);
    fill(idx, 0);
    firn__pkxman m;
    firn__pkxfer x = {0};
    T_OK_ERR(firn__pkindex_upload(idx, io, folder, "u", 1, NULL, &m, &x, &err), &err);
    T_TRUE(m.n_runs > 1);
    char *victim = sub(folder, m.runs[m.n_runs - 1].name);

    /* A manifest that disagrees with a run's header (another index's run under that name). */
    m.runs[0].entries++;
    firn__pkindex_free(download(b, io, folder, &m, FIRN_ERR_PARSE));
    m.runs[0].entries--;
    firn__pkindex_free(download(b, io, folder, &m, FIRN_OK));
    /* One flipped byte in a data page: the checksum of the whole file catches it. */
    flip_byte(victim, 5000);
    firn__pkindex_free(download(b, io, folder, &m, FIRN_ERR_PARSE));
    sh("test $(ls '%s' | grep -c 'tmp$') = 0", b); /* no leftovers */
    /* A missing one. */
    sh("rm '%s'", victim);
    firn__pkindex_free(download(b, io, folder, &m, FIRN_ERR_NOT_FOUND));
    firn__pkxman_free(&m);
    firn__pkindex_free(idx);
    firn_io_free(io);
    sh("rm -rf '%s'", root);
    firn_free(victim);
    firn_free(a);
    firn_free(b);
    firn_free(folder);
    firn_free(root);
}

/* crc32 (zlib's) and size of the file at path; the whole file into *out_bytes (owned). */
static uint32_t file_crc(const char *path, uint8_t **out_bytes, size_t *out_len)
{
    firn_buf b;
    firn_buf_init(&b, 1 << 28);
    firn_io *io = firn_io_local_new();
    firn_err err = {0};
    T_OK_ERR(firn_io_read(io, path, &b, &err), &err);
    firn_io_free(io);
    uint32_t crc = (uint32_t)crc32(0L, b.data, (uInt)b.len);
    *out_bytes = firn_buf_take(&b, out_len);
    return crc;
}

/* Uploads idx to folder (copies forced when no_link) and checks each copy against the local
 * run: the same bytes, the manifest's crc32 that of those bytes, and a hard link of the local
 * file exactly when linked. Returns the manifest (free with firn__pkxman_free). */
static firn__pkxman
upload_checked(firn__pkindex *idx, const char *folder, bool no_link, bool linked)
{
    firn_io *io = firn_io_local_new();
    firn_err err = {0};
    firn__pkxman m;
    firn__pkxfer x = {0};
    firn__pkindex_upload_no_link = no_link;
    T_OK_ERR(firn__pkindex_upload(idx, io, folder, "u", 1, NULL, &m, &x, &err), &err);
    firn__pkindex_upload_no_link = false;
    T_EQ_UINT(m.n_runs, idx->n_runs);
    for (size_t i = 0; i < m.n_runs && i < idx->n_runs; i++) {
        char *copy = sub(folder, m.runs[i].name);
        struct stat a, b;
        T_EQ_INT(stat(idx->runs[i]->path, &a), 0);
        T_EQ_INT(stat(copy, &b), 0);
        T_EQ_INT(a.st_dev == b.st_dev && a.st_ino == b.st_ino, linked);
        uint8_t *want, *got;
        size_t want_len, got_len;
        T_EQ_UINT(file_crc(idx->runs[i]->path, &want, &want_len), m.runs[i].crc);
        T_EQ_UINT(file_crc(copy, &got, &got_len), m.runs[i].crc);
        T_EQ_UINT(got_len, m.runs[i].bytes);
        T_EQ_UINT(got_len, want_len);
        if (got_len == want_len)
            T_EQ_MEM(got, want, got_len);
        firn_free(want);
        firn_free(got);
        firn_free(copy);
    }
    firn_io_free(io);
    return m;
}

/* Through the local FileIO, runs are published as hard links of the local files (no bytes
 * copied) with the crc32 their writer computed; forced copies and runs whose crc32 must be read
 * (opened from a checkpoint) give the same bytes and checksums; a linked copy downloads. */
T_TEST(local_upload_links_runs)
{
    char *root = temp_dir();
    char *a = sub(root, "a"), *b = sub(root, "b");
    char *linked = sub(root, "w/t/metadata/firn-index");
    char *copied = sub(root, "w/t2/metadata/firn-index");
    char *loaded = sub(root, "w/t3/metadata/firn-index");
    char *again = sub(root, "w/t4/metadata/firn-index");
    firn_err err = {0};
    firn__pkindex *idx = open_dir(a);
    fill(idx, 0);
    firn__pkxman m1 = upload_checked(idx, linked, false, true);
    T_TRUE(m1.n_runs > 1);
    for (size_t i = 0; i < idx->n_runs; i++)
        T_TRUE(idx->runs[i]->has_file_crc);
    firn__pkxman m2 = upload_checked(idx, copied, true, false);
    for (size_t i = 0; i < m1.n_runs && i < m2.n_runs; i++)
        T_EQ_UINT(m2.runs[i].crc, m1.runs[i].crc);
    /* Runs opened from a checkpoint carry no crc32: it is computed from their bytes. */
    T_OK_ERR(firn__pkindex_checkpoint(idx, "t@1", &err), &err);
    firn__pkindex_free(idx);
    firn__pkindex_opts o = {a, 96 << 10, NULL};
    char why[256];
    bool was_loaded = false;
    T_OK_ERR(firn__pkindex_open(&o, "t@1", &idx, &was_loaded, why, sizeof(why), &err), &err);
    T_TRUE(was_loaded);
    for (size_t i = 0; i < idx->n_runs; i++)
        T_FALSE(idx->runs[i]->has_file_crc);
    firn__pkxman m3 = upload_checked(idx, loaded, false, true);
    for (size_t i = 0; i < m1.n_runs && i < m3.n_runs; i++)
        T_EQ_UINT(m3.runs[i].crc, m1.runs[i].crc);
    firn__pkindex_free(idx);
    /* The linked copy is an ordinary copy for a new host; the downloaded runs keep the crc32
     * they were checked against. */
    firn_io *io = firn_io_local_new();
    idx = download(b, io, linked, &m1, FIRN_OK);
    check(idx, 0);
    for (size_t i = 0; i < idx->n_runs; i++)
        T_TRUE(idx->runs[i]->has_file_crc);
    firn__pkxman m4 = upload_checked(idx, again, false, true);
    firn__pkxman_free(&m4);
    firn__pkindex_free(idx);
    firn_io_free(io);
    firn__pkxman_free(&m1);
    firn__pkxman_free(&m2);
    firn__pkxman_free(&m3);
    sh("rm -rf '%s'", root);
    firn_free(a);
    firn_free(b);
    firn_free(linked);
    firn_free(copied);
    firn_free(loaded);
    firn_free(again);
    firn_free(root);
}

T_MAIN(T_CASE(manifest_round_trip),
       T_CASE(upload_then_download),
       T_CASE(damaged_or_missing_run_is_refused),
       T_CASE(local_upload_links_runs))
