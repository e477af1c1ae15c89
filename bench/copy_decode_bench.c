/* SPDX-License-Identifier: Apache-2.0 */
/* Binary COPY decode benchmark: the rows of one table, saved once as the COPY stream firn reads
 * (`COPY (SELECT <firn's select list>) TO STDOUT (FORMAT binary)`), fed as the backfill's reader
 * feeds it (CopyData messages copied into the decoder's room until
 * FIRN_PG_COPY_FILL bytes are there, as PQgetlineAsync copies them), into batches of BATCH_ROWS
 * rows (reset when full, as the backfill does after each delivery). No network and no server work:
 * CPU per row of the decoder alone, repeatable to a few percent where `backfill_quick.sh` varies by
 * +-15 %. Prints one JSON line: rows, the lowest CPU seconds of REPS passes (getrusage), CPU-s per
 * million rows. copy_decode_bench URI SCHEMA.TABLE FILE [REPS] FILE: psql -XAtc "COPY (SELECT *
 * FROM trips) TO STDOUT (FORMAT binary)" > trips.copy (for tables whose columns firn reads as they
 * are; text-cast types need firn's select list). */
#include "firn/source_pg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define BATCH_ROWS   65536
#define HEADER_LEN   19
#define REPS_DEFAULT 5

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = (size_t)1 << 20, n = 0;
    uint8_t *p = firn_malloc(cap);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            p = firn_realloc(p, cap);
        }
        size_t got = fread(p + n, 1, cap - n, f);
        if (got == 0)
            break;
        n += got;
    }
    fclose(f);
    *len = n;
    return p;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Offsets of the tuples in the stream (and of the trailer at the end); returns their count. */
static size_t split(const uint8_t *p, size_t len, size_t **out)
{
    size_t cap = 1024, n = 0, pos = HEADER_LEN + be32(p + 15);
    size_t *offs = firn_malloc(cap * sizeof(size_t));
    while (pos + 2 <= len) {
        if (n + 1 >= cap) {
            cap *= 2;
            offs = firn_realloc(offs, cap * sizeof(size_t));
        }
        offs[n++] = pos;
        int16_t nf = (int16_t)(p[pos] << 8 | p[pos + 1]);
        pos += 2;
        if (nf == -1)
            break;
        for (int i = 0; i < nf; i++) {
            int32_t fl = (int32_t)be32(p + pos);
            pos += 4 + (fl > 0 ? (size_t)fl : 0);
        }
    }
    offs[n] = pos;
    *out = offs;
    return n;
}

static firn_rc
pass(const firn_pg_table *t, const uint8_t *p, const size_t *offs, size_t n, firn_err *err)
{
    firn_batch *b = firn_batch_new(t->schema);
    firn_pg_copy *d = firn_pg_copy_new(t, b);
    firn_rc rc = firn_pg_copy_feed(d, p, offs[0], 0, err); /* header */
    size_t i = 0, done = 0; /* tuple i, of which done bytes were given */
    while (rc == FIRN_OK && i < n) {
        /* as the backfill's reader: tuples copied into the decoder's room up to the fill size,
         * the way PQgetlineAsync copies them out of libpq's input buffer (a tuple that does not
         * fit in part), so the decoder meets them in the cache as it does in a backfill */
        size_t room = 0, filled = 0;
        uint8_t *at = firn_pg_copy_room(d, &room);
        if (!at) {
            rc = FIRN_ERR_TOO_LARGE;
            break;
        }
        while (i < n && filled < room && filled < FIRN_PG_COPY_FILL) {
            size_t left = offs[i + 1] - offs[i] - done;
            size_t take = left < room - filled ? left : room - filled;
            memcpy(at + filled, p + offs[i] + done, take);
            filled += take;
            done += take;
            if (done == offs[i + 1] - offs[i]) {
                i++;
                done = 0;
            }
        }
        rc = firn_pg_copy_feed_room(d, filled, 0, err);
        if (rc == FIRN_OK && firn_batch_rows(b) >= BATCH_ROWS)
            firn_batch_reset(b);
    }
    if (rc == FIRN_OK)
        rc = firn_pg_copy_finish(d, err);
    firn_pg_copy_free(d);
    firn_batch_free(b);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: copy_decode_bench URI SCHEMA.TABLE FILE [REPS]\n");
        return 2;
    }
    int reps = argc > 4 ? (int)strtol(argv[4], NULL, 10) : REPS_DEFAULT;
    firn_err err = {0};
    firn_pg_conn_config cfg = {.uri = argv[1]};
    firn_pg_conn *conn = NULL;
    firn_pg_catalog *cat = NULL;
    const char *pattern = argv[2];
    firn_rc rc = firn_pg_conn_open(&cfg, FIRN_PG_CONN_SQL, &conn, &err);
    if (rc == FIRN_OK)
        rc = firn_pg_discover(conn, &pattern, 1, &cat, &err);
    size_t len = 0, *offs = NULL;
    uint8_t *p = rc == FIRN_OK ? read_file(argv[3], &len) : NULL;
    if (rc == FIRN_OK && (!p || len < HEADER_LEN)) {
        fprintf(stderr, "could not read \"%s\": %s\n", argv[3], strerror(errno));
        return 2;
    }
    if (rc || firn_pg_catalog_tables(cat) != 1) {
        fprintf(stderr, "%s\n", rc ? err.msg : "the pattern must match one table");
        return 2;
    }
    const firn_pg_table *t = firn_pg_catalog_table(cat, 0);
    size_t n = split(p, len, &offs);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_seconds();
        rc = pass(t, p, offs, n, &err);
        double s = cpu_seconds() - t0;
        if (rc) {
            fprintf(stderr, "%s\n", err.msg);
            return 2;
        }
        best = s < best ? s : best;
    }
    size_t rows = n ? n - 1 : 0; /* the last offset is the trailer */
    printf("{\"rows\": %zu, \"cpu_s\": %.4f, \"cpu_s_per_m_rows\": %.4f}\n", rows, best,
           rows ? best * 1e6 / (double)rows : 0.0);
    firn_free(offs);
    firn_free(p);
    firn_pg_catalog_free(cat);
    firn_pg_conn_close(conn);
    return 0;
}
