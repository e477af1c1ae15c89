/* SPDX-License-Identifier: Apache-2.0 */
/* Parquet reader benchmark: `pq_read_bench N seq|rand [FILE [save]]` writes N int64 keys
 * (sequential or random) with firn's writer (zstd, default options) to memory (and to FILE with
 * "save"), or reads FILE whose first column is an int64 key (e.g. written by pyarrow), then decodes
 * the key column from memory with the column reader several times and prints the best time as
 * values per second. Single-threaded. */
#include "firn/parquet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static firn_rc mem_write(void *ctx, const void *p, size_t len, firn_err *err)
{
    (void)err;
    return firn_buf_append(ctx, p, len);
}

static void die(const char *what, const firn_err *err)
{
    fprintf(stderr, "pq_read_bench: %s: %s\n", what, err ? err->msg : "");
    exit(2);
}

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static void write_keys(const firn_field *schema, size_t n, bool seq, firn_buf *out)
{
    firn_err err = {0};
    firn_pq_writer *w;
    firn_buf_init(out, (size_t)1 << 34);
    if (firn_pq_writer_new(schema, NULL, mem_write, out, &w, &err))
        die("writer", &err);
    firn_batch *b = firn_batch_new(schema);
    for (size_t done = 0; done < n;) {
        size_t k = n - done < 65536 ? n - done : 65536;
        firn_batch_reset(b);
        int64_t *v = firn_column_append_fixed_n(firn_batch_column(b, 0), k, NULL);
        for (size_t i = 0; i < k; i++)
            v[i] = seq ? (int64_t)(done + i) : (int64_t)mix(done + i);
        if (firn_batch_end_rows(b, k, FIRN_OP_INSERT, 0, &err) || firn_pq_writer_write(w, b, &err))
            die("write", &err);
        done += k;
    }
    if (firn_pq_writer_close(w, &err))
        die("close", &err);
    firn_pq_writer_free(w);
    firn_batch_free(b);
}

static void read_file(const char *path, firn_buf *out)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        die("cannot open input", NULL);
    firn_buf_init(out, (size_t)1 << 34);
    uint8_t chunk[1 << 16];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), fp)) > 0) {
        if (firn_buf_append(out, chunk, n))
            die("file too large", NULL);
    }
    fclose(fp);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        die("usage: pq_read_bench N seq|rand [FILE [save]]", NULL);
    uint64_t n;
    firn_err perr = {0};
    if (firn_parse_u64(argv[1], strlen(argv[1]), &n, &perr))
        die("bad N", &perr);
    bool seq = strcmp(argv[2], "seq") == 0;
    firn_field *schema = firn_field_new(0, "root", FIRN_TYPE_STRUCT, true);
    firn_field_add(schema, firn_field_new(1, "key", FIRN_TYPE_LONG, true));
    firn_buf file;
    if (argc > 3 && !(argc > 4 && strcmp(argv[4], "save") == 0)) {
        read_file(argv[3], &file);
    } else {
        write_keys(schema, (size_t)n, seq, &file);
        FILE *fp = argc > 4 ? fopen(argv[3], "wb") : NULL;
        if (fp && fwrite(file.data, 1, file.len, fp) != file.len)
            die("could not save the file", NULL);
        if (fp)
            fclose(fp);
    }
    firn_err err = {0};
    firn_batch *b = firn_batch_new(schema);
    double best = 1e30;
    int32_t reps = 5;
    const char *reps_env = getenv("REPS"); /* more repetitions for profiling */
    if (reps_env && firn_parse_i32(reps_env, strlen(reps_env), &reps, &err))
        die("bad REPS", &err);
    uint64_t sum = 0, rows = 0;
    for (int rep = 0; rep < reps; rep++) {
        int64_t t0 = firn_monotonic_ns();
        firn_pq_reader *r;
        if (firn_pq_reader_open_mem(file.data, file.len, &r, &err) ||
            firn_pq_reader_select(r, schema, &err))
            die("open", &err);
        rows = 0;
        for (size_t g = 0; g < firn_pq_reader_row_groups(r); g++) {
            if (firn_pq_reader_read_row_group(r, g, b, &err))
                die("read", &err);
            const int64_t *v = firn_column_values(firn_batch_column(b, 0));
            sum += (uint64_t)v[firn_batch_rows(b) - 1];
            rows += firn_batch_rows(b);
        }
        firn_pq_reader_free(r);
        double s = (double)(firn_monotonic_ns() - t0) / 1e9;
        best = s < best ? s : best;
    }
    printf("{\"rows\": %llu, \"file_bytes\": %zu, \"best_s\": %.4f, \"mvalues_per_s\": %.1f, "
           "\"check\": %llu}\n",
           (unsigned long long)rows, file.len, best, (double)rows / best / 1e6,
           (unsigned long long)sum % 1000);
    firn_batch_free(b);
    firn_buf_deinit(&file);
    firn_field_free(schema);
    return 0;
}
