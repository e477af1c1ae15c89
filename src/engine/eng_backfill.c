/* SPDX-License-Identifier: Apache-2.0 */
/* The initial copy: chunks of every table read in parallel inside one exported snapshot,
 * encoded to Parquet by the worker that read them (so encoding runs in parallel), and committed
 * once per table at the end with the backfill marker. A chunk that is retried drops the files it
 * had written; a crash before the commit leaves only unreferenced files, and the next run starts
 * that table's copy again (README "Operations"). */
#include "engine_int.h"

#include <string.h>

/* The open data-file stream of one chunk being read (unpartitioned tables), and the keys of
 * its rows in order, for the index once the files are known. */
typedef struct chunk_out {
    uint32_t chunk_id;
    firn__table *t;
    firn__stream *stream;
    firn_buf keys;
    uint32_t *key_end; /* per row: end offset of its key in keys */
    size_t n_rows;
    size_t cap_rows;
} chunk_out;

typedef struct bf_ctx {
    firn__engine *e;
    pthread_mutex_t mu; /* guards open and the progress clock */
    chunk_out **open;
    size_t n_open;
    int64_t start_ns;
    int64_t last_report_ns;
} bf_ctx;

#define PROGRESS_EVERY_NS (5 * 1000000000LL)

/* One progress line per table in backfill every few seconds: rows, rate, share of the estimate
 * and time left. */
static void maybe_report(bf_ctx *c)
{
    int64_t now = firn_monotonic_ns();
    pthread_mutex_lock(&c->mu);
    bool due = now - c->last_report_ns >= PROGRESS_EVERY_NS;
    if (due)
        c->last_report_ns = now;
    pthread_mutex_unlock(&c->mu);
    if (!due)
        return;
    firn__stats_write(c->e, "backfill", true);
    double secs = (double)(now - c->start_ns) / 1e9;
    for (size_t i = 0; i < c->e->n_tables; i++) {
        firn__table *t = c->e->tables[i];
        if (!t->needs_backfill)
            continue;
        pthread_mutex_lock(&t->mu);
        uint64_t rows = t->rows_written;
        pthread_mutex_unlock(&t->mu);
        double rate = secs > 0 ? (double)rows / secs : 0;
        double est = t->pg->estimated_rows;
        char pct[32] = "?", eta[32] = "?";
        if (est > 0) {
            snprintf(pct, sizeof(pct), "%.0f%%", 100.0 * (double)rows / est);
            if (rate > 0 && est > (double)rows)
                snprintf(eta, sizeof(eta), "%.0fs", (est - (double)rows) / rate);
        }
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "backfill \"%s\": %llu rows (%s of ~%.0f), %.0f rows/s, eta %s", t->display,
                 (unsigned long long)rows, pct, est > 0 ? est : 0, rate, eta);
    }
}

static firn__table *table_of(firn__engine *e, const firn_pg_table *pg)
{
    for (size_t i = 0; i < e->n_tables; i++) {
        if (e->tables[i]->pg == pg)
            return e->tables[i];
    }
    return NULL;
}

/* Files written for one batch, moved into the table's pending list under its lock; their keys
 * go to the index (new keys: the copy reads each row once). */
static firn_rc adopt_files(firn__table *t,
                           firn_data_file *files,
                           size_t n,
                           const firn__rowloc *locs,
                           firn_batch *b,
                           uint32_t chunk_id,
                           firn_err *err)
{
    uint32_t ords[64];
    uint32_t *ord = n <= 64 ? ords : firn_calloc(n, sizeof(uint32_t));
    firn_rc rc = FIRN_OK;
    pthread_mutex_lock(&t->mu);
    t->pending = firn_reallocarray(t->pending, t->n_pending + n, sizeof(*t->pending));
    for (size_t i = 0; i < n; i++) {
        if (t->index)
            ord[i] = firn__table_add_file(t, &files[i]);
        t->pending[t->n_pending] = files[i];
        /* The chunk id rides in sort_order_id until commit (cleared there). */
        t->pending[t->n_pending].has_sort_order_id = false;
        t->pending[t->n_pending].sort_order_id = (int32_t)chunk_id;
        t->n_pending++;
    }
    if (t->index) {
        firn_buf key;
        firn_buf_init(&key, 1 << 20);
        for (size_t r = 0; r < firn_batch_rows(b) && rc == FIRN_OK; r++) {
            firn_buf_reset(&key);
            if (firn_batch_key_encode(b, r, t->key_cols, t->n_key, &key))
                continue;
            firn__pkloc loc = {ord[locs[r].file], locs[r].pos};
            rc = firn__pkindex_set(t->index, firn__pkindex_key(t->index, key.data, key.len), loc,
                                   false, err);
        }
        firn_buf_deinit(&key);
    }
    t->rows_written += firn_batch_rows(b);
    pthread_mutex_unlock(&t->mu);
    if (ord != ords)
        firn_free(ord);
    return rc;
}

static bool streamed(const firn__table *t)
{
    return firn_table_metadata_spec(t->cat.metadata)->n_fields == 0;
}

static firn__write_ctx backfill_write_ctx(firn__table *t, char *dir, size_t cap)
{
    snprintf(dir, cap, "%s/data", t->cat.metadata->location);
    firn__write_ctx w = {t->eng->io, dir, t->schema, firn_table_metadata_spec(t->cat.metadata),
                         &t->eng->pq};
    return w;
}

/* Partitioned tables: each batch becomes its own files, split by partition. */
static firn_rc
write_batch_files(firn__table *t, const firn_pg_chunk *chunk, firn_batch *batch, firn_err *err)
{
    char data_dir[4096];
    firn__write_ctx w = backfill_write_ctx(t, data_dir, sizeof(data_dir));
    firn_data_file *files = NULL;
    size_t n_files = 0;
    size_t rows = firn_batch_rows(batch);
    firn__rowloc *locs = t->index ? firn_calloc(rows ? rows : 1, sizeof(*locs)) : NULL;
    firn_rc rc = firn__write_data_files(&w, batch, NULL, 0, &files, &n_files, locs, err);
    if (rc == FIRN_OK) {
        rc = adopt_files(t, files, n_files, locs, batch, chunk->id, err);
        firn__fault_point("backfill-batch");
    } else {
        for (size_t i = 0; i < n_files; i++)
            firn_data_file_deinit(&files[i]);
    }
    firn_free(files);
    firn_free(locs);
    return rc;
}

/* Finds (or with create, starts) the open stream of a chunk. */
static chunk_out *chunk_find(bf_ctx *c, uint32_t chunk_id, bool take)
{
    chunk_out *found = NULL;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n_open; i++) {
        if (c->open[i]->chunk_id != chunk_id)
            continue;
        found = c->open[i];
        if (take)
            c->open[i] = c->open[--c->n_open];
        break;
    }
    pthread_mutex_unlock(&c->mu);
    return found;
}

static void chunk_out_free(chunk_out *o)
{
    if (!o)
        return;
    firn__stream_abort(o->stream);
    firn_buf_deinit(&o->keys);
    firn_free(o->key_end);
    firn_free(o);
}

static firn_rc
chunk_start(bf_ctx *c, firn__table *t, uint32_t chunk_id, chunk_out **out, firn_err *err)
{
    char data_dir[4096];
    firn__write_ctx w = backfill_write_ctx(t, data_dir, sizeof(data_dir));
    chunk_out *o = firn_calloc(1, sizeof(*o));
    o->chunk_id = chunk_id;
    o->t = t;
    firn_buf_init(&o->keys, (size_t)1 << 34);
    firn_rc rc = firn__stream_open(&w, &o->stream, err);
    if (rc) {
        chunk_out_free(o);
        return rc;
    }
    pthread_mutex_lock(&c->mu);
    c->open = firn_reallocarray(c->open, c->n_open + 1, sizeof(*c->open));
    c->open[c->n_open++] = o;
    pthread_mutex_unlock(&c->mu);
    *out = o;
    return FIRN_OK;
}

/* Keeps the keys of the batch's rows, in order, until the chunk's files are known. */
static firn_rc keep_keys(chunk_out *o, firn_batch *b, firn_err *err)
{
    size_t rows = firn_batch_rows(b);
    if (o->n_rows + rows > o->cap_rows) {
        o->cap_rows = (o->n_rows + rows) * 2;
        o->key_end = firn_reallocarray(o->key_end, o->cap_rows, sizeof(uint32_t));
    }
    for (size_t r = 0; r < rows; r++) {
        if (firn_batch_key_encode(b, r, o->t->key_cols, o->t->n_key, &o->keys) ||
            o->keys.len > UINT32_MAX)
            return firn_err_set(err, FIRN_ERR_TOO_LARGE,
                                "keys of one backfill chunk of \"%s\" exceed 4 GiB", o->t->display);
        o->key_end[o->n_rows++] = (uint32_t)o->keys.len;
    }
    return FIRN_OK;
}

static firn_rc on_batch(void *ctx, const firn_pg_chunk *chunk, firn_batch *batch, firn_err *err)
{
    bf_ctx *c = ctx;
    firn__table *t = table_of(c->e, chunk->table);
    FIRN_ASSERT(t != NULL);
    if (!streamed(t))
        return write_batch_files(t, chunk, batch, err);
    chunk_out *o = chunk_find(c, chunk->id, false);
    if (!o)
        FIRN_TRY(chunk_start(c, t, chunk->id, &o, err));
    FIRN_TRY(firn__stream_write(o->stream, batch, err));
    if (t->index)
        FIRN_TRY(keep_keys(o, batch, err));
    pthread_mutex_lock(&t->mu);
    t->rows_written += firn_batch_rows(batch);
    pthread_mutex_unlock(&t->mu);
    maybe_report(c);
    return FIRN_OK;
}

/* The chunk is complete: its files join the table's pending files, its keys the index. */
static firn_rc on_chunk_done(void *ctx, const firn_pg_chunk *chunk, firn_err *err)
{
    bf_ctx *c = ctx;
    chunk_out *o = chunk_find(c, chunk->id, true);
    if (!o)
        return FIRN_OK; /* an empty chunk, or a partitioned table */
    firn_data_file *files = NULL;
    size_t n_files = 0;
    firn__stream *s = o->stream;
    o->stream = NULL;
    firn_rc rc = firn__stream_close(s, &files, &n_files, err);
    firn__table *t = o->t;
    if (rc == FIRN_OK) {
        pthread_mutex_lock(&t->mu);
        t->pending = firn_reallocarray(t->pending, t->n_pending + n_files, sizeof(*t->pending));
        size_t row = 0;
        for (size_t i = 0; i < n_files; i++) {
            uint32_t ord = t->index ? firn__table_add_file(t, &files[i]) : 0;
            for (int64_t pos = 0; t->index && pos < files[i].record_count; pos++, row++) {
                uint32_t start = row ? o->key_end[row - 1] : 0;
                firn__pkloc loc = {ord, (uint32_t)pos};
                firn__pkkey k =
                    firn__pkindex_key(t->index, o->keys.data + start, o->key_end[row] - start);
                if (rc == FIRN_OK) /* new keys: the copy reads each row once */
                    rc = firn__pkindex_set(t->index, k, loc, false, err);
            }
            t->pending[t->n_pending] = files[i];
            t->pending[t->n_pending].sort_order_id = (int32_t)chunk->id;
            t->n_pending++;
        }
        pthread_mutex_unlock(&t->mu);
    } else {
        for (size_t i = 0; i < n_files; i++)
            firn_data_file_deinit(&files[i]);
    }
    firn_free(files);
    chunk_out_free(o);
    return rc;
}

/* A chunk is read again from its start: forget the files it wrote; the index is rebuilt from
 * the committed files afterwards. */
static firn_rc on_chunk_retry(void *ctx, const firn_pg_chunk *chunk, firn_err *err)
{
    (void)err;
    bf_ctx *c = ctx;
    firn__table *t = table_of(c->e, chunk->table);
    chunk_out_free(chunk_find(c, chunk->id, true));
    pthread_mutex_lock(&t->mu);
    size_t keep = 0;
    for (size_t i = 0; i < t->n_pending; i++) {
        if (t->pending[i].sort_order_id == (int32_t)chunk->id)
            firn_data_file_deinit(&t->pending[i]);
        else
            t->pending[keep++] = t->pending[i];
    }
    t->n_pending = keep;
    t->index_dirty = true;
    pthread_mutex_unlock(&t->mu);
    FIRN_LOG(FIRN_LOG_WARN, "engine", "table \"%s\": chunk %u is read again", t->display,
             chunk->id);
    return FIRN_OK;
}

/* Resets the key index to the table's committed files. */
static firn_rc reset_index(firn__table *t, firn_err *err)
{
    firn__table_reset_index(t);
    return firn__table_rebuild_index(t, err);
}

static firn_rc commit_backfill(firn__table *t, uint64_t lsn_after, firn_err *err)
{
    if (t->upsert && t->index)
        FIRN_TRY(firn__pkindex_bulk(t->index, false, err)); /* one run for the whole copy */
    for (size_t i = 0; i < t->n_pending; i++)
        t->pending[i].sort_order_id = 0;
    firn_summary extra;
    firn_summary_init(&extra);
    firn_summary_set(&extra, FIRN_SUMMARY_BACKFILL, "done");
    bool has_parent = firn_table_metadata_current_snapshot(t->cat.metadata) != NULL;
    firn_rc rc = FIRN_OK;
    if (t->n_pending > 0 || has_parent)
        rc = firn__table_commit(t, t->pending, t->n_pending, NULL, 0, true, lsn_after, &extra, err);
    if (rc == FIRN_ERR_INVALID && t->n_pending == 0)
        rc = FIRN_OK; /* an empty table replacing an empty table: nothing to commit */
    if (rc == FIRN_OK && t->n_pending == 0 && !has_parent) {
        /* No snapshot to carry the marker: an empty source table. */
        firn_table_changes ch;
        firn_table_changes_init(&ch);
        firn_table_changes_require_uuid(&ch, t->cat.metadata->table_uuid);
        firn_table_changes_set_property(&ch, FIRN_SUMMARY_BACKFILL, "done");
        firn_catalog_table next = {0};
        rc = firn_catalog_commit(t->eng->catalog, t->ns, t->name, &ch, &next, err);
        if (rc == FIRN_OK) {
            firn_catalog_table_deinit(&t->cat);
            t->cat = next;
            if (lsn_after)
                t->committed_lsn = lsn_after;
        }
        firn_table_changes_deinit(&ch);
    }
    firn_summary_deinit(&extra);
    for (size_t i = 0; i < t->n_pending; i++)
        firn_data_file_deinit(&t->pending[i]);
    t->n_pending = 0;
    if (rc == FIRN_OK) {
        t->needs_backfill = false;
        FIRN_LOG(FIRN_LOG_INFO, "engine", "table \"%s\": backfill committed: %llu rows", t->display,
                 (unsigned long long)t->rows_written);
        if (t->index && t->index_dirty)
            rc = reset_index(t, err);
        else if (t->upsert && t->index)
            firn__table_index_synced(t);
        t->index_dirty = false;
        firn__engine_note_commit(t->eng, t);
    }
    return rc;
}

firn_rc firn__backfill_run(
    firn__engine *e, const char *snapshot, uint64_t snapshot_lsn, uint64_t lsn_after, firn_err *err)
{
    firn_pg_table **pgs = firn_calloc(e->n_tables ? e->n_tables : 1, sizeof(*pgs));
    size_t n = 0;
    for (size_t i = 0; i < e->n_tables; i++) {
        if (e->tables[i]->needs_backfill)
            pgs[n++] = e->tables[i]->pg;
    }
    firn_rc rc = FIRN_OK;
    firn_pg_plan *plan = NULL;
    if (n == 0)
        goto out;
    rc = firn_pg_backfill_plan(e->sql, pgs, n, e->cfg->source.chunk_bytes, &plan, err);
    if (rc)
        goto out;
    FIRN_LOG(FIRN_LOG_INFO, "engine", "backfill: %zu tables in %zu chunks over %d connections", n,
             firn_pg_plan_chunks(plan), (int)e->cfg->source.parallelism);
    for (size_t i = 0; i < e->n_tables; i++) {
        if (e->tables[i]->needs_backfill && e->tables[i]->upsert && e->tables[i]->index) {
            e->tables[i]->index_synced = false; /* takes the copy's keys from here on */
            rc = firn__pkindex_bulk(e->tables[i]->index, true, err);
        }
    }
    bf_ctx ctx = {0};
    ctx.e = e;
    ctx.start_ns = firn_monotonic_ns();
    ctx.last_report_ns = ctx.start_ns;
    pthread_mutex_init(&ctx.mu, NULL);
    firn_pg_backfill_opts o = {0};
    o.conn = &e->conn;
    o.snapshot = snapshot;
    o.snapshot_lsn = snapshot_lsn;
    o.workers = (int)e->cfg->source.parallelism;
    o.batch_rows = (size_t)e->cfg->source.batch_rows;
    o.on_batch = on_batch;
    o.on_chunk_done = on_chunk_done;
    o.on_chunk_retry = on_chunk_retry;
    o.ctx = &ctx;
    /* A requested stop ends the copy at once: nothing of it is committed, the next run starts
     * it again. */
    _Static_assert(sizeof(sig_atomic_t) == sizeof(int), "sig_atomic_t is an int");
    if (e->opts && e->opts->stop)
        o.cancel = (const volatile int *)e->opts->stop;
    rc = firn_pg_backfill_run(plan, &o, err);
    for (size_t i = 0; i < ctx.n_open; i++)
        chunk_out_free(ctx.open[i]);
    firn_free(ctx.open);
    pthread_mutex_destroy(&ctx.mu);
    for (size_t i = 0; rc == FIRN_OK && i < e->n_tables; i++) {
        if (e->tables[i]->needs_backfill)
            rc = commit_backfill(e->tables[i], lsn_after, err);
    }
    if (rc == FIRN_OK)
        rc = firn__engine_save_state(e, err);
out:
    firn_pg_plan_free(plan);
    firn_free(pgs);
    return rc;
}
