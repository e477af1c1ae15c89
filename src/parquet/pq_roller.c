/* SPDX-License-Identifier: Apache-2.0 */
/* Rolling Parquet files: one writer at a time, a new file once the current one reaches the
 * target size; the caller's callbacks open sinks and receive each finished file's metrics. */
#include "pq_int.h"

#include <string.h>

#define ROLL_CHECK_ROWS 8192

struct firn_pq_roller {
    const firn_field *schema;
    firn_pq_options opts;
    firn_pq_roll_callbacks cb;
    firn_pq_writer *cur;
    uint32_t next_index;
    uint32_t done;
};

firn_rc firn_pq_roller_new(const firn_field *schema,
                           const firn_pq_options *opts,
                           const firn_pq_roll_callbacks *cb,
                           firn_pq_roller **out,
                           firn_err *err)
{
    if (!cb || !cb->open_file || !cb->close_file)
        return firn_err_set(err, FIRN_ERR_INVALID, "parquet roller needs open and close callbacks");
    firn_pq_roller *r = firn_calloc(1, sizeof(*r));
    r->schema = schema;
    if (opts)
        r->opts = *opts;
    else
        firn_pq_options_init(&r->opts);
    r->cb = *cb;
    *out = r;
    return FIRN_OK;
}

static firn_rc roll_open(firn_pq_roller *r, firn_err *err)
{
    firn_pq_write_fn write = NULL;
    void *wctx = NULL;
    FIRN_TRY(r->cb.open_file(r->cb.ctx, r->next_index, &write, &wctx, err));
    r->next_index++;
    return firn_pq_writer_new(r->schema, &r->opts, write, wctx, &r->cur, err);
}

firn_rc firn_pq_roller_close(firn_pq_roller *r, firn_err *err)
{
    if (!r->cur)
        return FIRN_OK;
    firn_rc rc = firn_pq_writer_close(r->cur, err);
    if (!rc) {
        firn_pq_file_metrics m;
        firn_pq_writer_take_metrics(r->cur, &m);
        rc = r->cb.close_file(r->cb.ctx, r->next_index - 1, &m, err);
        firn_pq_file_metrics_deinit(&m); /* no-op when the callee took it */
    }
    firn_pq_writer_free(r->cur);
    r->cur = NULL;
    if (!rc)
        r->done++;
    return rc;
}

firn_rc firn_pq_roller_write(firn_pq_roller *r, firn_batch *b, firn_err *err)
{
    size_t rows = firn_batch_rows(b);
    for (size_t at = 0; at < rows;) {
        if (!r->cur)
            FIRN_TRY(roll_open(r, err));
        size_t end = rows - at > ROLL_CHECK_ROWS ? at + ROLL_CHECK_ROWS : rows;
        FIRN_TRY(firn_pq_writer_write_rows(r->cur, b, at, end, err));
        at = end;
        if (firn_pq_writer_bytes(r->cur) >= r->opts.file_bytes)
            FIRN_TRY(firn_pq_roller_close(r, err));
    }
    return FIRN_OK;
}

uint32_t firn_pq_roller_files(const firn_pq_roller *r)
{
    return r->done;
}

void firn_pq_roller_free(firn_pq_roller *r)
{
    if (!r)
        return;
    firn_pq_writer_free(r->cur);
    firn_free(r);
}
