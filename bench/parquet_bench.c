/* SPDX-License-Identifier: Apache-2.0 */
/* Parquet write benchmark: a taxi-shaped table (18 columns: ints, timestamps, doubles,
 * decimals, short strings) generated in memory, then written with firn's writer (zstd). Prints
 * one JSON line: rows, CPU seconds of the write alone (getrusage), output bytes.
 * Usage: parquet_bench ROWS OUT.parquet [ZSTD_LEVEL [PASSES [edge|backfill|trips]]]. PASSES writes
 * the file that many times (cpu_s is their sum, cpu_s_min the fastest), so that generating the rows
 * does not dominate a profile. "edge" makes the values awkward for the encoder, to compare the
 * bytes two builds write (scripts/pq_identity.sh): NaNs of several bit patterns, -0.0, infinities,
 * a float and a decimal(38) column, int dictionaries that grow past the 2 MiB limit and fall back
 * to PLAIN mid-chunk. "backfill" is the table of a `firn sync` backfill of the taxi trips (24
 * columns: a sequential bigint id, 5 ints, 2 timestamps, 11 numeric(15,2) as int64 decimals, a
 * 1-char text, and firn's metadata columns as a backfill fills them: _firn_op "r" and one
 * _firn_lsn on every row, _firn_commit_ts null, _firn_ingest_ts one time per batch). "trips" is
 * that schema with bench/datagen.py's value distributions of the trips table.
 * Driven by bench/run_parquet_bench.py. */
#include "firn/parquet.h"

#include <errno.h>
#include <math.h>
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

static bool edge;     /* the "edge" shape of the usage line */
static bool backfill; /* the "backfill" shape (or "trips": its schema, datagen's values) */
static bool trips;    /* the "trips" shape */

static firn_field *backfill_schema(void)
{
    firn_field *s = firn_field_new(0, "table", FIRN_TYPE_STRUCT, true);
    int32_t id = 1;
    firn_field_add(s, firn_field_new(id++, "id", FIRN_TYPE_LONG, false));
    const char *ints[] = {"vendor_id", "passenger_count", "ratecode_id", "pu_location_id",
                          "do_location_id"};
    for (size_t i = 0; i < 5; i++)
        firn_field_add(s, firn_field_new(id++, ints[i], FIRN_TYPE_INT, false));
    firn_field_add(s, firn_field_new(id++, "pickup_at", FIRN_TYPE_TIMESTAMP, false));
    firn_field_add(s, firn_field_new(id++, "dropoff_at", FIRN_TYPE_TIMESTAMP, false));
    const char *money[] = {"trip_distance", "fare_amount",       "extra",
                           "mta_tax",       "tip_amount",        "tolls_amount",
                           "improvement",   "total_amount",      "congestion_surcharge",
                           "airport_fee",   "cbd_congestion_fee"};
    for (size_t i = 0; i < 11; i++)
        firn_field_add(s, firn_field_new_decimal(id++, money[i], 15, 2, false));
    firn_field_add(s, firn_field_new(id++, "store_and_fwd_flag", FIRN_TYPE_STRING, false));
    firn_field_add(s, firn_field_new(id++, "_firn_op", FIRN_TYPE_STRING, false));
    firn_field_add(s, firn_field_new(id++, "_firn_lsn", FIRN_TYPE_LONG, false));
    firn_field_add(s, firn_field_new(id++, "_firn_commit_ts", FIRN_TYPE_TIMESTAMPTZ, false));
    firn_field_add(s, firn_field_new(id++, "_firn_ingest_ts", FIRN_TYPE_TIMESTAMPTZ, false));
    return s;
}

/* A row of the backfill shape: cents of thousands to tens of thousands of distinct values
 * (distance, fare, tip, total), a few (extra, fees), the metadata of a backfill. */
static void gen_backfill_row(firn_batch *b, int64_t *clock_us, size_t row, int64_t ingest_us)
{
    firn_err err = {0};
    size_t c = 0;
    uint64_t r = rnd();
    *clock_us += (int64_t)(r % 2000000);
    int64_t trip_us = 60000000 + (int64_t)(rnd() % 3600000000ull);
    firn_column_append_i64(firn_batch_column(b, c++), (int64_t)row + 1);
    int32_t ints[5] = {1 + (int32_t)(r >> 60 & 1), (int32_t)((r >> 20) % 7), r % 97 == 0 ? 5 : 1,
                       1 + (int32_t)(rnd() % 265), 1 + (int32_t)(rnd() % 265)};
    for (size_t i = 0; i < 5; i++)
        firn_column_append_i32(firn_batch_column(b, c++), ints[i]);
    firn_column_append_i64(firn_batch_column(b, c++), *clock_us);
    firn_column_append_i64(firn_batch_column(b, c++), *clock_us + trip_us);
    int64_t dist = (int64_t)(rnd() % 3000), fare = 250 + dist * 5 / 2 + (int64_t)(rnd() % 500);
    int64_t extra = (int64_t)(r >> 8) % 4 * 50, tax = 50, tip = (int64_t)(rnd() % 2000);
    int64_t tolls = r % 20 == 0 ? 655 + (int64_t)(r >> 32) % 400 : 0, impr = 100;
    int64_t cong = r % 9 == 0 ? 0 : 250, airport = r % 11 == 0 ? 175 : 0;
    int64_t cbd = r % 3 == 0 ? 75 : 0;
    int64_t total = fare + extra + tax + tip + tolls + impr + cong + airport + cbd;
    int64_t cents[11] = {dist, fare, extra, tax, tip, tolls, impr, total, cong, airport, cbd};
    for (size_t i = 0; i < 11; i++)
        firn_column_append_i64(firn_batch_column(b, c++), cents[i]);
    firn_column_append_bytes(firn_batch_column(b, c++), r % 100 == 0 ? "Y" : "N", 1);
    firn_column_append_bytes(firn_batch_column(b, c++), "r", 1);
    firn_column_append_i64(firn_batch_column(b, c++), 0x1A2B3C4D5E);
    firn_column_append_null(firn_batch_column(b, c++));
    firn_column_append_i64(firn_batch_column(b, c++), ingest_us);
    if (firn_batch_end_row(b, FIRN_OP_INSERT, 0, &err)) {
        fprintf(stderr, "parquet_bench: %s\n", err.msg);
        exit(2);
    }
}

#define TWO_PI 6.283185307179586

/* A uniform double in [0, 1). */
static double unif(void)
{
    return (double)(rnd() >> 11) * (1.0 / 9007199254740992.0);
}

/* One of the values of a 100-entry weighted table (bench/datagen.py's _weighted). */
static int64_t weighted(const int64_t *values, const uint8_t *weights)
{
    int left = (int)(rnd() % 100);
    for (size_t i = 0;; i++) {
        left -= weights[i];
        if (left < 0)
            return values[i];
    }
}

/* A row of the "trips" shape: the backfill schema with bench/datagen.py's distributions of the
 * trips table (skewed categories, 75 % of zones among 40 busy ones, log-normal minutes and
 * distances, fares and tips derived from them), so that dictionary ids compress as those of a
 * backfill of datagen's table do (zstd level 1 saves 7-13 % of their pages). */
static void gen_trips_row(firn_batch *b, size_t row, int64_t ingest_us)
{
    static const int64_t vendor[] = {2, 1, 6}, pas[] = {1, 2, 3, 4, 5, 6, 0};
    static const int64_t rate[] = {1, 2, 5, 99, 3}, extras[] = {0, 100, 250, 500};
    static const uint8_t vendor_w[] = {72, 27, 1}, pas_w[] = {72, 14, 4, 2, 3, 2, 3};
    static const uint8_t rate_w[] = {92, 4, 2, 1, 1}, extras_w[] = {45, 20, 25, 10};
    static const int64_t hours[] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
                                    12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23};
    static const uint8_t hours_w[] = {3, 2, 1, 1, 1, 1, 2, 4, 5, 5, 5, 5,
                                      6, 6, 6, 6, 6, 7, 7, 6, 5, 4, 3, 3};
    static const int32_t popular[40] = {161, 237, 236, 162, 230, 186, 142, 170, 163, 132,
                                        138, 234, 239, 48,  68,  79,  107, 140, 141, 249,
                                        100, 113, 164, 229, 43,  246, 90,  263, 262, 233,
                                        151, 137, 238, 50,  125, 114, 87,  144, 148, 231};
    firn_err err = {0};
    size_t c = 0;
    const double n1 = sqrt(-2 * log(1 - unif())) * cos(TWO_PI * unif());
    const double n2 = sqrt(-2 * log(1 - unif())) * cos(TWO_PI * unif());
    double minutes = round(exp(log(12) + 0.65 * n1));
    minutes = minutes < 1 ? 1 : minutes > 180 ? 180 : minutes;
    const int64_t pickup = 1704067200000000 + (int64_t)(rnd() % 366) * 86400000000 +
                           weighted(hours, hours_w) * 3600000000 +
                           (int64_t)(unif() * 3600) * 1000000;
    int32_t zones[2];
    for (size_t i = 0; i < 2; i++)
        zones[i] = unif() < 0.75 ? popular[rnd() % 40] : 1 + (int32_t)(rnd() % 265);
    const int64_t rc = weighted(rate, rate_w);
    const int64_t dist = (int64_t)round(minutes * exp(log(0.17) + 0.35 * n2) * 100);
    const int64_t fare = rc == 2 ? 7000 : (int64_t)round(300 + 3.5 * (double)dist + 35 * minutes);
    const bool card = rnd() % 100 < 76;
    const int64_t tip =
        card && unif() < 0.9 ? (int64_t)round((double)fare * (0.12 + 0.13 * unif())) : 0;
    const int64_t extra = weighted(extras, extras_w), tolls = unif() < 0.07 ? 694 : 0;
    const int64_t cong = unif() < 0.9 ? 250 : 0;
    const int64_t airport = zones[0] == 132 || zones[0] == 138 ? 175 : 0;
    const int64_t total = fare + extra + 50 + tip + tolls + 100 + cong + airport;
    firn_column_append_i64(firn_batch_column(b, c++), (int64_t)row + 1);
    const int32_t ints[5] = {(int32_t)weighted(vendor, vendor_w), (int32_t)weighted(pas, pas_w),
                             (int32_t)rc, zones[0], zones[1]};
    for (size_t i = 0; i < 5; i++)
        firn_column_append_i32(firn_batch_column(b, c++), ints[i]);
    firn_column_append_i64(firn_batch_column(b, c++), pickup);
    firn_column_append_i64(firn_batch_column(b, c++), pickup + (int64_t)minutes * 60000000);
    const int64_t cents[11] = {dist, fare, extra, 50, tip, tolls, 100, total, cong, airport, 0};
    for (size_t i = 0; i < 11; i++)
        firn_column_append_i64(firn_batch_column(b, c++), cents[i]);
    firn_column_append_bytes(firn_batch_column(b, c++), unif() < 0.005 ? "Y" : "N", 1);
    firn_column_append_bytes(firn_batch_column(b, c++), "r", 1);
    firn_column_append_i64(firn_batch_column(b, c++), 0x1A2B3C4D5E);
    firn_column_append_null(firn_batch_column(b, c++));
    firn_column_append_i64(firn_batch_column(b, c++), ingest_us);
    if (firn_batch_end_row(b, FIRN_OP_INSERT, 0, &err)) {
        fprintf(stderr, "parquet_bench: %s\n", err.msg);
        exit(2);
    }
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
    if (edge) {
        firn_field_add(s, firn_field_new(id++, "edge_f32", FIRN_TYPE_FLOAT, false));
        firn_field_add(s, firn_field_new_decimal(id++, "edge_dec38", 38, 2, false));
    }
    return s;
}

/* A double of the edge shape: special values (NaNs of 3 bit patterns, ±0.0, ±inf) among
 * ordinary ones. */
static double edge_double(uint64_t r, double plain)
{
    static const uint64_t bits[] = {
        0x7FF8000000000000ull, 0x7FF8000000000001ull, 0xFFF8000000000000ull, 0x8000000000000000ull,
        0x0000000000000000ull, 0x7FF0000000000000ull, 0xFFF0000000000000ull};
    if (r % 7 != 0)
        return plain;
    double d;
    memcpy(&d, &bits[(r >> 8) % 7], 8);
    return d;
}

static void gen_edge(firn_batch *b, size_t row, uint64_t r)
{
    float f;
    uint32_t fb[] = {0x7FC00000u, 0x7FC00001u, 0x80000000u, 0u, (uint32_t)(r >> 3)};
    memcpy(&f, &fb[r % 5], 4);
    firn_column_append_float(firn_batch_column(b, 18), f);
    uint64_t lo = rnd() % (row / 4 + 16);
    firn_column_append_i128(firn_batch_column(b, 19), r % 2 ? -1 : 0, r % 2 ? ~lo : lo);
}

static void gen_row(firn_batch *b, int64_t *clock_us, size_t row)
{
    firn_err err = {0};
    char s[32];
    size_t c = 0;
    uint64_t r = rnd();
    *clock_us += (int64_t)(r % 2000000);
    int64_t trip_us = 60000000 + (int64_t)(rnd() % 3600000000ull);
    int32_t vendor = 1 + (int32_t)(r >> 60 & 1);
    if (edge) /* an int32 dictionary that outgrows the limit: 2^19 entries of 4 bytes */
        vendor = (int32_t)(uint32_t)(rnd() % (row < 20000 ? row / 2 + 64 : row) * 2654435761u);
    firn_column_append_i32(firn_batch_column(b, c++), vendor);
    firn_column_append_i64(firn_batch_column(b, c++), *clock_us);
    firn_column_append_i64(firn_batch_column(b, c++), *clock_us + trip_us);
    if (r % 50 == 0)
        firn_column_append_null(firn_batch_column(b, c++));
    else if (edge) /* an int64 dictionary that outgrows the limit (2^18 entries) */
        firn_column_append_i64(firn_batch_column(b, c++),
                               (int64_t)(rnd() % (row / 2 + 64)) * -1000003);
    else
        firn_column_append_i64(firn_batch_column(b, c++), (int64_t)(r >> 20) % 6 + 1);
    double dist = (double)(rnd() % 3000) / 100.0;
    firn_column_append_double(firn_batch_column(b, c++), edge ? edge_double(r, dist) : dist);
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
        firn_column_append_double(firn_batch_column(b, c++), r % 3           ? 2.5
                                                             : edge && r % 2 ? -0.0
                                                                             : 0.0);
    int len = snprintf(s, sizeof(s), "Zone %d", pu);
    firn_column_append_bytes(firn_batch_column(b, c++), s, (size_t)len);
    if (edge)
        gen_edge(b, row, r);
    if (firn_batch_end_row(b, FIRN_OP_INSERT, 0, &err)) {
        fprintf(stderr, "parquet_bench: %s\n", err.msg);
        exit(2);
    }
}

/* Writes the batches as one file at path; *out_cpu: CPU seconds of the write. */
static int write_file(firn_field *schema,
                      const firn_pq_options *opts,
                      firn_batch **batches,
                      size_t n_batches,
                      const char *path,
                      double *out_cpu,
                      long *out_bytes)
{
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        perror("parquet_bench: open");
        return 2;
    }
    firn_err err = {0};
    firn_pq_writer *w = NULL;
    double t0 = cpu_seconds();
    firn_rc rc = firn_pq_writer_new(schema, opts, file_write, fp, &w, &err);
    for (size_t k = 0; !rc && k < n_batches; k++)
        rc = firn_pq_writer_write(w, batches[k], &err);
    if (!rc)
        rc = firn_pq_writer_close(w, &err);
    if (!rc && fflush(fp) != 0)
        rc = FIRN_ERR_IO;
    *out_cpu = cpu_seconds() - t0;
    firn_pq_writer_free(w);
    if (rc) {
        fprintf(stderr, "parquet_bench: %s\n", err.msg);
        fclose(fp);
        return 1;
    }
    *out_bytes = ftell(fp);
    fclose(fp);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(
            stderr,
            "usage: parquet_bench ROWS OUT.parquet [ZSTD_LEVEL [PASSES [edge|backfill|trips]]]\n");
        return 2;
    }
    size_t rows = (size_t)strtoull(argv[1], NULL, 10);
    long passes = argc > 4 ? strtol(argv[4], NULL, 10) : 1;
    edge = argc > 5 && strcmp(argv[5], "edge") == 0;
    trips = argc > 5 && strcmp(argv[5], "trips") == 0;
    backfill = trips || (argc > 5 && strcmp(argv[5], "backfill") == 0);
    firn_field *schema = backfill ? backfill_schema() : taxi_schema();
    size_t n_batches = (rows + BATCH_ROWS - 1) / BATCH_ROWS;
    firn_batch **batches = firn_calloc(n_batches ? n_batches : 1, sizeof(*batches));
    int64_t clock_us = 1704067200000000; /* 2024-01-01 */
    for (size_t k = 0; k < n_batches; k++) {
        batches[k] = firn_batch_new(schema);
        size_t n = rows - k * BATCH_ROWS < BATCH_ROWS ? rows - k * BATCH_ROWS : BATCH_ROWS;
        for (size_t i = 0; i < n && trips; i++)
            gen_trips_row(batches[k], k * BATCH_ROWS + i, 1764590400000000 + (int64_t)k * 7000000);
        for (size_t i = 0; i < n && backfill && !trips; i++)
            gen_backfill_row(batches[k], &clock_us, k * BATCH_ROWS + i,
                             1764590400000000 + (int64_t)k * 7000000);
        for (size_t i = 0; i < n && !backfill; i++)
            gen_row(batches[k], &clock_us, k * BATCH_ROWS + i);
    }
    firn_pq_options opts;
    firn_pq_options_init(&opts);
    opts.codec = FIRN_PQ_ZSTD;
    opts.compression_level = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 3;
    double total = 0, best = -1;
    long bytes = 0;
    for (long p = 0; p < (passes > 0 ? passes : 1); p++) {
        double cpu = 0;
        if (write_file(schema, &opts, batches, n_batches, argv[2], &cpu, &bytes))
            return 1;
        total += cpu;
        best = best < 0 || cpu < best ? cpu : best;
    }
    printf("{\"rows\": %zu, \"cpu_s\": %.4f, \"cpu_s_min\": %.4f, \"bytes\": %ld}\n", rows, total,
           best, bytes);
    for (size_t k = 0; k < n_batches; k++)
        firn_batch_free(batches[k]);
    firn_free(batches);
    firn_field_free(schema);
    return 0;
}
