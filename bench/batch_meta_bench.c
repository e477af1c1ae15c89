/* SPDX-License-Identifier: Apache-2.0 */
/* The batch side of a backfill's metadata columns: ROWS rows of one id column plus firn's four
 * _firn_* columns, appended as the COPY stage does (one firn_column_append_fixed_n per column and
 * one firn_batch_end_rows per 256 rows, a batch reset every BATCH_ROWS). For instruction counts
 * under callgrind, not for timing: usage batch_meta_bench [ROWS]. */
#include "firn/batch.h"
#include "firn/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STAGE_ROWS 256
#define BATCH_ROWS 131072

int main(int argc, char **argv)
{
    size_t rows = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 1000000;
    firn_field *s = firn_field_new(0, "root", FIRN_TYPE_STRUCT, true);
    firn_field_add(s, firn_field_new(1, "id", FIRN_TYPE_LONG, true));
    static const struct {
        const char *name;
        firn_type type;
        uint8_t meta;
    } META[] = {{"_firn_op", FIRN_TYPE_STRING, FIRN_META_OP},
                {"_firn_lsn", FIRN_TYPE_LONG, FIRN_META_LSN},
                {"_firn_commit_ts", FIRN_TYPE_TIMESTAMPTZ, FIRN_META_COMMIT_TS},
                {"_firn_ingest_ts", FIRN_TYPE_TIMESTAMPTZ, FIRN_META_INGEST_TS}};
    for (size_t i = 0; i < 4; i++) {
        firn_field *f = firn_field_new((int32_t)i + 2, META[i].name, META[i].type, false);
        f->meta = META[i].meta;
        firn_field_add(s, f);
    }
    firn_batch *b = firn_batch_new(s);
    firn_batch_set_times(b, INT64_MIN, 1764590400000000);
    firn_err err = {0};
    uint64_t sum = 0;
    for (size_t done = 0; done < rows;) {
        size_t n = rows - done < STAGE_ROWS ? rows - done : STAGE_ROWS;
        int64_t *ids = firn_column_append_fixed_n(firn_batch_column(b, 0), n, NULL);
        for (size_t i = 0; i < n; i++)
            ids[i] = (int64_t)(done + i);
        if (firn_batch_end_rows(b, n, FIRN_OP_READ, 0x1A2B3C4D5E, &err)) {
            fprintf(stderr, "batch_meta_bench: %s\n", err.msg);
            return 1;
        }
        done += n;
        if (firn_batch_rows(b) >= BATCH_ROWS || done == rows) {
            sum += firn_batch_rows(b) + firn_column_null_count(firn_batch_column(b, 3));
            firn_batch_reset(b);
        }
    }
    printf("{\"rows\": %zu, \"check\": %llu}\n", rows, (unsigned long long)sum);
    firn_batch_free(b);
    firn_field_free(s);
    return 0;
}
