/* SPDX-License-Identifier: Apache-2.0 */
/* Parquet write benchmark: a taxi-shaped table (18 columns: ints, timestamps, doubles,
 * decimals, short strings) generated in memory, then written with firn's writer (zstd). Prints
 * one JSON line: rows, CPU seconds of the write alone (getrusage), output bytes.
 * Usage: parquet_bench ROWS OUT.parquet [ZSTD_LEVEL]. Driven by bench/run_parquet_bench.py. */
#include "firn/parquet.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define BATCH_ROWS 500000

static firn_rc file_write(void *ctx, const void *p, size_t len, firn_err *err)
{
    if (fwrite(p, 1, len, (FILE *)ctx) != len)
        return firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not write");
    return FIRN_OK;
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static firn_field *taxi_schema(void)
{
    firn_field *s = firn_field_new(0, "table", FIRN_TYPE_STRUCT, true);
    int32_t id = 1;
    firn_field_add(s, firn_field_new(id++, "vendor_id", FIRN_TYPE_INT, false));
    firn_field_add(s, firn_field_new(id++, "pickup_at", FIRN_TYPE_TIMESTAMP, false));
    firn_field_add(s, firn_field_new(id++, "dropoff_at", FIRN_TYPE_TIMESTAMP, false));
    firn_field_add(s, firn_field_new(id++, "passenger_count", FIRN_TYPE_LONG, false));
    firn_field_add(s, firn_field_new(id++, "trip_distance", FIRN_TYPE_DOUBLE, false));
    firn_field_add(s, firn_field_new(id++, "ratecode_id", FIRN_TYPE_LONG, false));
    firn_field_add(s, firn_field_new(id++, "store_and_fwd_flag", FIRN_TYPE_STRING, false));
    firn_field_add(s, firn_field_new(id++, "pu_location_id", FIRN_TYPE_INT, false));
    firn_field_add(s, firn_field_new(id++, "do_location_id", FIRN_TYPE_INT, false));
    firn_field_add(s, firn_field_new(id++, "payment_type", FIRN_TYPE_LONG, false));
    const char *money[] = {"fare_amount", "extra",        "mta_tax",
                           "tip_amount",  "tolls_amount", "total_amount"};
    for (size_t i = 0; i < 6; i++)
        firn_field_add(s, firn_field_new_decimal(id++, money[i], 10, 2, false));
    firn_field_add(s, firn_field_new(id++, "congestion_surcharge", FIRN_TYPE_DOUBLE, false));
    firn_field_add(s, firn_field_new(id++, "pu_zone", FIRN_TYPE_STRING, false));
    return s;
}

static void gen_row(firn_batch *b, int64_t *clock_us)
{
    firn_err err = {0};
    char s[32];
    size_t c = 0;
    uint64_t r = rnd();
    *clock_us += (int64_t)(r % 2000000);
    int64_t trip_us = 60000000 + (int64_t)(rnd() % 3600000000ull);
    firn_column_append_i32(firn_batch_column(b, c++), 1 + (int32_t)(r >> 60 & 1));
    firn_column_append_i64(firn_batch_column(b, c++), *clock_us);
    firn_column_append_i64(firn_batch_column(b, c++), *clock_us + trip_us);
    if (r % 50 == 0)
        firn_column_append_null(firn_batch_column(b, c++));
    else
        firn_column_append_i64(firn_batch_column(b, c++), (int64_t)(r >> 20) % 6 + 1);
    double dist = (double)(rnd() % 3000) / 100.0;
    firn_column_append_double(firn_batch_column(b, c++), dist);
    firn_column_append_i64(firn_batch_column(b, c++), r % 97 == 0 ? 5 : 1);
    firn_column_append_bytes(firn_batch_column(b, c++), r % 100 == 0 ? "Y" : "N", 1);
    int32_t pu = 1 + (int32_t)(rnd() % 265), dl = 1 + (int32_t)(rnd() % 265);
    firn_column_append_i32(firn_batch_column(b, c++), pu);
    firn_column_append_i32(firn_batch_column(b, c++), dl);
    firn_column_append_i64(firn_batch_column(b, c++), 1 + (int64_t)(r >> 40) % 4);
    int64_t fare = 250 + (int64_t)(dist * 250) + (int64_t)(rnd() % 500);
    int64_t extra = (int64_t)(r >> 8) % 4 * 50, tax = 50, tip = (int64_t)(rnd() % 2000);
    int64_t tolls = r % 20 == 0 ? 655 : 0;
    int64_t cents[6] = {fare, extra, tax, tip, tolls, fare + extra + tax + tip + tolls + 30};
    for (size_t i = 0; i < 6; i++)
        firn_column_append_i64(firn_batch_column(b, c++), cents[i]);
    if (r % 30 == 0)
        firn_column_append_null(firn_batch_column(b, c++));
    else
        firn_column_append_double(firn_batch_column(b, c++), r % 3 ? 2.5 : 0.0);
    int len = snprintf(s, sizeof(s), "Zone %d", pu);
    firn_column_append_bytes(firn_batch_column(b, c++), s, (size_t)len);
    if (firn_batch_end_row(b, FIRN_OP_INSERT, 0, &err)) {
        fprintf(stderr, "parquet_bench: %s\n", err.msg);
        exit(2);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: parquet_bench ROWS OUT.parquet [ZSTD_LEVEL]\n");
        return 2;
    }
    size_t rows = (size_t)strtoull(argv[1], NULL, 10);
    firn_field *schema = taxi_schema();
    size_t n_batches = (rows + BATCH_ROWS - 1) / BATCH_ROWS;
    firn_batch **batches = firn_calloc(n_batches ? n_batches : 1, sizeof(*batches));
    int64_t clock_us = 1704067200000000; /* 2024-01-01 */
    for (size_t k = 0; k < n_batches; k++) {
        batches[k] = firn_batch_new(schema);
        size_t n = rows - k * BATCH_ROWS < BATCH_ROWS ? rows - k * BATCH_ROWS : BATCH_ROWS;
        for (size_t i = 0; i < n; i++)
            gen_row(batches[k], &clock_us);
    }
    firn_pq_options opts;
    firn_pq_options_init(&opts);
    opts.codec = FIRN_PQ_ZSTD;
    opts.compression_level = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 3;
    FILE *fp = fopen(argv[2], "wb");
    if (!fp) {
        perror("parquet_bench: open");
        return 2;
    }
    firn_err err = {0};
    firn_pq_writer *w = NULL;
    double t0 = cpu_seconds();
    firn_rc rc = firn_pq_writer_new(schema, &opts, file_write, fp, &w, &err);
    for (size_t k = 0; !rc && k < n_batches; k++)
        rc = firn_pq_writer_write(w, batches[k], &err);
    if (!rc)
        rc = firn_pq_writer_close(w, &err);
    if (!rc && fflush(fp) != 0)
        rc = FIRN_ERR_IO;
    double t1 = cpu_seconds();
    if (rc) {
        fprintf(stderr, "parquet_bench: %s\n", err.msg);
        return 1;
    }
    long bytes = ftell(fp);
    fclose(fp);
    printf("{\"rows\": %zu, \"cpu_s\": %.4f, \"bytes\": %ld}\n", rows, t1 - t0, bytes);
    firn_pq_writer_free(w);
    for (size_t k = 0; k < n_batches; k++)
        firn_batch_free(batches[k]);
    firn_free(batches);
    firn_field_free(schema);
    return 0;
}
