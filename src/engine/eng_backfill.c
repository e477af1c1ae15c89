/* SPDX-License-Identifier: Apache-2.0 */
/* The initial copy: chunks of every table read in parallel inside one exported snapshot,
 * encoded to Parquet by the worker that read them (so encoding runs in parallel), and committed
 * once per table at the end with the backfill marker. A chunk that is retried drops the files it
 * had written; a crash before the commit leaves only unreferenced files, and the next run starts
 * that table's copy again (README "Operations"). */
#include "engine_int.h"

#include <string.h>

typedef struct bf_ctx {
    firn__engine *e;
    uint32_t *pending_chunk; /* per table: chunk id of each pending file (parallel arrays) */
} bf_ctx;

static firn__table *table_of(firn__engine *e, const firn_pg_table *pg)
{
    for (size_t i = 0; i < e->n_tables; i++) {
        if (e->tables[i]->pg == pg)
            return e->tables[i];
    }
    return NULL;
}

/* Files written for one batch, moved into the table's pending list under its lock. */
static void adopt_files(firn__table *t,
                        firn_data_file *files,
                        size_t n,
                        const firn__rowloc *locs,
                        firn_batch *b,
                        uint32_t chunk_id)
{
    uint32_t ords[64];
    uint32_t *ord = n <= 64 ? ords : firn_calloc(n, sizeof(uint32_t));
    pthread_mutex_lock(&t->mu);
    t->pending = firn_reallocarray(t->pending, t->n_pending + n, sizeof(*t->pending));
    for (size_t i = 0; i < n; i++) {
        if (t->upsert)
            ord[i] = firn__table_add_file(t, &files[i]);
        t->pending[t->n_pending] = files[i];
        /* The chunk id rides in sort_order_id until commit (cleared there). */
        t->pending[t->n_pending].has_sort_order_id = false;
        t->pending[t->n_pending].sort_order_id = (int32_t)chunk_id;
        t->n_pending++;
    }
    if (t->upsert) {
        firn_buf key;
        firn_buf_init(&key, 1 << 20);
        for (size_t r = 0; r < firn_batch_rows(b); r++) {
            firn_buf_reset(&key);
            if (firn_batch_key_encode(b, r, t->key_cols, t->n_key, &key))
                continue;
            firn__pkloc loc = {ord[locs[r].file], locs[r].pos};
            firn__pkindex_put(t->index, key.data, key.len, loc);
        }
        firn_buf_deinit(&key);
    }
    t->rows_written += firn_batch_rows(b);
    pthread_mutex_unlock(&t->mu);
    if (ord != ords)
        firn_free(ord);
}

static firn_rc on_batch(void *ctx, const firn_pg_chunk *chunk, firn_batch *batch, firn_err *err)
{
    bf_ctx *c = ctx;
    firn__table *t = table_of(c->e, chunk->table);
    FIRN_ASSERT(t != NULL);
    char data_dir[4096];
    snprintf(data_dir, sizeof(data_dir), "%s/data", t->cat.metadata->location);
    firn__write_ctx w = {c->e->io, data_dir, t->schema, firn_table_metadata_spec(t->cat.metadata),
                         &c->e->pq};
    firn_data_file *files = NULL;
    size_t n_files = 0;
    size_t rows = firn_batch_rows(batch);
    firn__rowloc *locs = t->upsert ? firn_calloc(rows ? rows : 1, sizeof(*locs)) : NULL;
    firn_rc rc = firn__write_data_files(&w, batch, NULL, 0, &files, &n_files, locs, err);
    if (rc == FIRN_OK) {
        adopt_files(t, files, n_files, locs, batch, chunk->id);
    } else {
        for (size_t i = 0; i < n_files; i++)
            firn_data_file_deinit(&files[i]);
    }
    firn_free(files);
    firn_free(locs);
    return rc;
}

/* A chunk is read again from its start: forget the files it wrote; the index is rebuilt from
 * the committed files afterwards. */
static firn_rc on_chunk_retry(void *ctx, const firn_pg_chunk *chunk, firn_err *err)
{
    (void)err;
    bf_ctx *c = ctx;
    firn__table *t = table_of(c->e, chunk->table);
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
    firn__pkindex_free(t->index);
    t->index = firn__pkindex_new();
    for (size_t i = 0; i < t->n_files; i++)
        firn_data_file_deinit(&t->files[i]);
    t->n_files = 0;
    return firn__table_rebuild_index(t, err);
}

static firn_rc commit_backfill(firn__table *t, uint64_t lsn_after, firn_err *err)
{
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
        if (t->upsert && t->index_dirty)
            rc = reset_index(t, err);
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
    bf_ctx ctx = {e, NULL};
    firn_pg_backfill_opts o = {0};
    o.conn = &e->conn;
    o.snapshot = snapshot;
    o.snapshot_lsn = snapshot_lsn;
    o.workers = (int)e->cfg->source.parallelism;
    o.batch_rows = (size_t)e->cfg->source.batch_rows;
    o.on_batch = on_batch;
    o.on_chunk_retry = on_chunk_retry;
    o.ctx = &ctx;
    rc = firn_pg_backfill_run(plan, &o, err);
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
