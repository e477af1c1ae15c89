/* SPDX-License-Identifier: Apache-2.0 */
/* The initial copy: chunks of every table read in parallel inside one exported snapshot,
 * encoded to Parquet by the worker that read them (so encoding runs in parallel). Finished
 * chunks are committed every commit interval with firn.backfill=partial and the block ranges
 * done so far (firn.backfill-chunks); the last commit carries firn.backfill=done. A chunk that is
 * retried drops the files it had written. After a crash the exported snapshot is gone: a keyed
 * table whose slot is kept copies only its missing chunks, as upserts in a new snapshot, and the
 * slot's changes since the committed chunks' snapshot are applied over them; any other table
 * copies again from the start, replacing what was committed (docs/internals/backfill.md). */
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

/* One table being copied. The write context is copied from the table before the run:
 * chunk commits replace t->cat while other workers still write files. */
typedef struct bf_table {
    firn__table *t;
    char *data_dir;            /* "<table location>/data" */
    firn_partition_spec *spec; /* the table's spec */
    bool streamed;             /* unpartitioned: one data-file stream per chunk */
    bool resume;               /* the rest of an unfinished copy: rows go through t->buf */
    bool chunk_commits;        /* finished chunks are committed as they come (keyed CDC tables
                                * in their first copy): a crash keeps them */
    bool replaced;             /* a commit of this run replaced the table's earlier rows */
    firn_buf done;             /* FIRN_SUMMARY_BACKFILL_CHUNKS so far */
    int64_t last_commit_ns;
} bf_table;

typedef struct bf_ctx {
    firn__engine *e;
    pthread_mutex_t mu; /* guards open and the progress clock */
    chunk_out **open;
    size_t n_open;
    int64_t start_ns;
    int64_t last_report_ns;
    bf_table *tabs;
    size_t n_tabs;
    bool *chunk_done;          /* per plan chunk: finished in this run */
    pthread_mutex_t commit_mu; /* chunk commits, resumed tables' buffers, the state copy */
    uint64_t lsn_after;
    int64_t interval_ns; /* chunk commits at most this often */
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
    pthread_mutex_lock(&c->commit_mu); /* chunk commits change the tables and the state copy */
    firn__stats_write(c->e, "backfill", true);
    pthread_mutex_unlock(&c->commit_mu);
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
        if (est <= 0) { /* never analyzed (pg_class.reltuples -1 or 0): no estimate */
            FIRN_LOG(FIRN_LOG_INFO, "engine", "backfill \"%s\": %llu rows, %.0f rows/s", t->display,
                     (unsigned long long)rows, rate);
            continue;
        }
        char eta[32] = "?";
        if (rate > 0 && est > (double)rows)
            snprintf(eta, sizeof(eta), "%.0fs", (est - (double)rows) / rate);
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "backfill \"%s\": %llu rows (%.0f%% of ~%.0f), %.0f rows/s, eta %s", t->display,
                 (unsigned long long)rows, 100.0 * (double)rows / est, est, rate, eta);
    }
}

static bf_table *table_of(bf_ctx *c, const firn_pg_table *pg)
{
    for (size_t i = 0; i < c->n_tabs; i++) {
        if (c->tabs[i].t->pg == pg)
            return &c->tabs[i];
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
    if (t->index && !t->multiset) { /* a multiset's index is built after the copy */
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

static firn__write_ctx backfill_write_ctx(const bf_table *bt)
{
    firn__write_ctx w = {bt->t->eng->io, bt->data_dir, bt->t->schema, bt->spec, &bt->t->eng->pq};
    return w;
}

/* Partitioned tables: each batch becomes its own files, split by partition. */
static firn_rc
write_batch_files(bf_table *bt, const firn_pg_chunk *chunk, firn_batch *batch, firn_err *err)
{
    firn__table *t = bt->t;
    firn__write_ctx w = backfill_write_ctx(bt);
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
chunk_start(bf_ctx *c, bf_table *bt, uint32_t chunk_id, chunk_out **out, firn_err *err)
{
    firn__write_ctx w = backfill_write_ctx(bt);
    chunk_out *o = firn_calloc(1, sizeof(*o));
    o->chunk_id = chunk_id;
    o->t = bt->t;
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
    if (firn_batch_keys_encode(b, o->t->key_cols, o->t->n_key, &o->keys, o->key_end + o->n_rows))
        return firn_err_set(err, FIRN_ERR_TOO_LARGE,
                            "keys of one backfill chunk of \"%s\" exceed 4 GiB", o->t->display);
    o->n_rows += rows;
    return FIRN_OK;
}

static firn_rc commit_partial(bf_ctx *c, bf_table *bt, firn_err *err);

/* A resumed table: its rows may already be in the table (a committed chunk, or a row that moved
 * since), so they go through the table's buffer and are folded by key like changes. */
static firn_rc resume_batch(bf_ctx *c, bf_table *bt, firn_batch *batch, firn_err *err)
{
    firn__table *t = bt->t;
    size_t rows = firn_batch_rows(batch);
    uint32_t *idx = firn_calloc(rows ? rows : 1, sizeof(uint32_t));
    for (size_t r = 0; r < rows; r++)
        idx[r] = (uint32_t)r;
    firn_rc rc = FIRN_OK;
    pthread_mutex_lock(&c->commit_mu);
    firn_batch_append_rows(t->buf, batch, idx, rows); /* counted in rows_written by the flush */
    if (firn_batch_bytes(t->buf) >= t->eng->cfg->destination.commit.max_bytes)
        rc = commit_partial(c, bt, err);
    pthread_mutex_unlock(&c->commit_mu);
    firn_free(idx);
    return rc;
}

static firn_rc on_batch(void *ctx, const firn_pg_chunk *chunk, firn_batch *batch, firn_err *err)
{
    bf_ctx *c = ctx;
    bf_table *bt = table_of(c, chunk->table);
    FIRN_ASSERT(bt != NULL);
    firn__table *t = bt->t;
    if (bt->resume) {
        FIRN_TRY(resume_batch(c, bt, batch, err));
        maybe_report(c);
        return FIRN_OK;
    }
    if (!bt->streamed)
        return write_batch_files(bt, chunk, batch, err);
    chunk_out *o = chunk_find(c, chunk->id, false);
    if (!o)
        FIRN_TRY(chunk_start(c, bt, chunk->id, &o, err));
    FIRN_TRY(firn__stream_write(o->stream, batch, err));
    if (t->index && !t->multiset)
        FIRN_TRY(keep_keys(o, batch, err));
    pthread_mutex_lock(&t->mu);
    t->rows_written += firn_batch_rows(batch);
    pthread_mutex_unlock(&t->mu);
    maybe_report(c);
    return FIRN_OK;
}

/* Adds rows [row, row + n) of the chunk, positions 0..n of file ord, to the index as new keys
 * (the copy reads each row once), a block of fingerprints at a time. */
static firn_rc index_file(chunk_out *o, size_t row, size_t n, uint32_t ord, firn_err *err)
{
    enum { BLOCK = 4096 };
    firn__pkkey *keys = firn_malloc(((n < BLOCK ? n : BLOCK) + 1) * sizeof(*keys));
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; i < n && rc == FIRN_OK; i += BLOCK) {
        size_t m = n - i < BLOCK ? n - i : BLOCK;
        size_t r = row + i;
        firn__pkindex_keys(o->t->index, o->keys.data, r ? o->key_end[r - 1] : 0, o->key_end + r, m,
                           keys);
        rc = firn__pkindex_add_new(o->t->index, keys, m, ord, (uint32_t)i, err);
    }
    firn_free(keys);
    return rc;
}

/* The chunk is complete: its files join the table's pending files, its keys the index. */
static firn_rc close_chunk(bf_ctx *c, const firn_pg_chunk *chunk, firn_err *err)
{
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
            if (t->index && !t->multiset && rc == FIRN_OK)
                rc = index_file(o, row, (size_t)files[i].record_count, ord, err);
            row += (size_t)files[i].record_count;
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

/* Appends "<leaf oid>:<first>-<end>" of chunk to a FIRN_SUMMARY_BACKFILL_CHUNKS list. */
static void add_range(firn_buf *done, const firn_pg_chunk *chunk)
{
    uint32_t oid = chunk->table->leaves[chunk->leaf].oid;
    const char *sep = done->len ? "," : "";
    if (chunk->key_range)
        firn_rc_ignore(firn_buf_appendf(done, "%s%u:k%lld:%lld", sep, oid, (long long)chunk->key_lo,
                                        (long long)chunk->key_hi));
    else
        firn_rc_ignore(
            firn_buf_appendf(done, "%s%u:%u-%u", sep, oid, chunk->start_block, chunk->end_block));
}

/* Pending files of chunks finished in this run leave t->pending into *out (sort order reset). */
static void take_done_files(bf_ctx *c, firn__table *t, firn_data_file **out, size_t *n_out)
{
    pthread_mutex_lock(&t->mu);
    *out = firn_calloc(t->n_pending ? t->n_pending : 1, sizeof(**out));
    *n_out = 0;
    size_t keep = 0;
    for (size_t i = 0; i < t->n_pending; i++) {
        if (c->chunk_done[t->pending[i].sort_order_id]) {
            (*out)[*n_out] = t->pending[i];
            (*out)[(*n_out)++].sort_order_id = 0;
        } else {
            t->pending[keep++] = t->pending[i];
        }
    }
    t->n_pending = keep;
    pthread_mutex_unlock(&t->mu);
}

/* Commits what the finished chunks of bt wrote, with firn.backfill=partial and the block ranges
 * done so far (the first commit of a fresh copy replaces the table's earlier rows). Caller holds
 * commit_mu. */
static firn_rc commit_partial(bf_ctx *c, bf_table *bt, firn_err *err)
{
    firn__table *t = bt->t;
    firn_summary extra;
    firn_summary_init(&extra);
    firn_summary_set(&extra, FIRN_SUMMARY_BACKFILL, "partial");
    firn_summary_set(&extra, FIRN_SUMMARY_BACKFILL_CHUNKS, (const char *)bt->done.data);
    firn_rc rc = FIRN_OK;
    bool committed = false;
    if (bt->resume) {
        committed = firn_batch_rows(t->buf) > 0;
        if (committed)
            rc = firn__table_flush_extra(t, 0, &extra, err);
    } else {
        firn_data_file *files = NULL;
        size_t n = 0;
        take_done_files(c, t, &files, &n);
        committed = n > 0; /* chunks without rows wait for the next commit's list */
        if (committed)
            rc = firn__table_commit(t, files, n, NULL, 0, !bt->replaced, c->lsn_after, &extra, err);
        for (size_t i = 0; i < n; i++)
            firn_data_file_deinit(&files[i]);
        firn_free(files);
    }
    firn_summary_deinit(&extra);
    if (rc || !committed)
        return rc;
    bt->replaced = true;
    bt->last_commit_ns = firn_monotonic_ns();
    firn__engine_note_commit(t->eng, t);
    firn__fault_point("backfill-chunk");
    return FIRN_OK;
}

static firn_rc on_chunk_done(void *ctx, const firn_pg_chunk *chunk, firn_err *err)
{
    bf_ctx *c = ctx;
    FIRN_TRY(close_chunk(c, chunk, err));
    bf_table *bt = table_of(c, chunk->table);
    firn__stats_add_copied(bt->t, chunk);
    firn_rc rc = FIRN_OK;
    pthread_mutex_lock(&c->commit_mu);
    c->chunk_done[chunk->id] = true;
    add_range(&bt->done, chunk);
    if (bt->chunk_commits && firn_monotonic_ns() - bt->last_commit_ns >= c->interval_ns)
        rc = commit_partial(c, bt, err);
    pthread_mutex_unlock(&c->commit_mu);
    return rc;
}

/* A chunk is read again from its start: forget the files it wrote; the index is rebuilt from
 * the committed files afterwards. */
static firn_rc on_chunk_retry(void *ctx, const firn_pg_chunk *chunk, firn_err *err)
{
    (void)err;
    bf_ctx *c = ctx;
    bf_table *bt = table_of(c, chunk->table);
    firn__table *t = bt->t;
    chunk_out_free(chunk_find(c, chunk->id, true));
    if (bt->resume)
        return FIRN_OK; /* rows read twice fold by key */
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

/* The backfill marker as a table property, for a copy without a snapshot to carry it: an empty
 * source table, or a resumed copy whose last chunks held no rows (eng_table.c read_progress
 * takes the property before any snapshot's marker). */
static firn_rc mark_done_once(firn__table *t, void *ctx, firn_err *err)
{
    (void)ctx;
    const char *now = firn_props_get(&t->cat.metadata->properties, FIRN_SUMMARY_BACKFILL);
    if (now && strcmp(now, "done") == 0)
        return FIRN_OK; /* an attempt whose reply was lost */
    firn_table_changes ch;
    firn_table_changes_init(&ch);
    firn_table_changes_require_uuid(&ch, t->cat.metadata->table_uuid);
    firn_table_changes_set_property(&ch, FIRN_SUMMARY_BACKFILL, "done");
    firn_catalog_table next = {0};
    firn_rc rc = firn_catalog_commit(t->eng->catalog, t->ns, t->name, &ch, &next, err);
    if (rc == FIRN_OK) {
        firn_catalog_table_deinit(&t->cat);
        t->cat = next;
    }
    firn_table_changes_deinit(&ch);
    return rc;
}

static firn_rc mark_done(firn__table *t, uint64_t lsn_after, firn_err *err)
{
    FIRN_TRY(firn__table_meta_commit(t, mark_done_once, NULL, err));
    if (lsn_after)
        t->committed_lsn = lsn_after;
    return FIRN_OK;
}

/* The end of a resumed copy: what is buffered and the marker. */
static firn_rc commit_resumed(firn__table *t, firn_err *err)
{
    firn_summary extra;
    firn_summary_init(&extra);
    firn_summary_set(&extra, FIRN_SUMMARY_BACKFILL, "done");
    firn_rc rc;
    if (firn_batch_rows(t->buf) > 0) {
        rc = firn__table_flush_extra(t, 0, &extra, err);
    } else {
        rc = mark_done(t, 0, err);
    }
    firn_summary_deinit(&extra);
    return rc;
}

/* The end of a fresh copy: the rest of its files and the marker (replacing the table's earlier
 * rows when no chunk commit did). */
static firn_rc commit_fresh(bf_table *bt, uint64_t lsn_after, firn_err *err)
{
    firn__table *t = bt->t;
    if (t->upsert && t->index && !t->multiset)
        FIRN_TRY(firn__pkindex_bulk(t->index, false, err)); /* one run for the whole copy */
    for (size_t i = 0; i < t->n_pending; i++)
        t->pending[i].sort_order_id = 0;
    firn_summary extra;
    firn_summary_init(&extra);
    firn_summary_set(&extra, FIRN_SUMMARY_BACKFILL, "done");
    bool has_parent = firn_table_metadata_current_snapshot(t->cat.metadata) != NULL;
    firn_rc rc = FIRN_OK;
    if (t->n_pending > 0 || has_parent)
        rc = firn__table_commit(t, t->pending, t->n_pending, NULL, 0, !bt->replaced, lsn_after,
                                &extra, err);
    if (rc == FIRN_ERR_INVALID && t->n_pending == 0)
        rc = FIRN_OK; /* an empty table replacing an empty table: nothing to commit */
    if (rc == FIRN_OK && t->n_pending == 0 && !has_parent)
        rc = mark_done(t, lsn_after, err); /* no snapshot to carry the marker: an empty table */
    firn_summary_deinit(&extra);
    for (size_t i = 0; i < t->n_pending; i++)
        firn_data_file_deinit(&t->pending[i]);
    t->n_pending = 0;
    FIRN_TRY(rc);
    if (t->index && t->index_dirty)
        rc = reset_index(t, err);
    else if (t->upsert && t->index)
        firn__table_index_synced(t);
    if (rc == FIRN_OK && t->upsert && t->index && !t->index_dirty)
        firn__table_share_persist(t, true); /* the end of a backfill: the whole index is new */
    t->index_dirty = false;
    return rc;
}

static firn_rc commit_backfill(bf_table *bt, uint64_t lsn_after, firn_err *err)
{
    firn__table *t = bt->t;
    FIRN_TRY(bt->resume ? commit_resumed(t, err) : commit_fresh(bt, lsn_after, err));
    t->needs_backfill = false;
    t->copied = !bt->resume; /* in a snapshot taken after this run read the schema */
    firn_free(t->backfill_chunks);
    t->backfill_chunks = NULL;
    FIRN_LOG(FIRN_LOG_INFO, "engine", "table \"%s\": backfill committed: %llu rows", t->display,
             (unsigned long long)t->rows_written);
    firn__engine_note_commit(t->eng, t);
    return FIRN_OK;
}

/* True when one item of a FIRN_SUMMARY_BACKFILL_CHUNKS list ("<oid>:<first>-<end>" blocks or
 * "<oid>:k<lo>:<hi>" keys) holds chunk ch's whole range. */
static bool item_holds(const char *item, const firn_pg_chunk *ch)
{
    const char *colon = strchr(item, ':');
    uint64_t oid = 0;
    if (!colon || firn_parse_u64(item, (size_t)(colon - item), &oid, NULL) ||
        oid != ch->table->leaves[ch->leaf].oid)
        return false;
    const char *r = colon + 1;
    if (ch->key_range) {
        const char *mid = r[0] == 'k' ? strchr(r + 1, ':') : NULL;
        int64_t lo = 0, hi = 0;
        return mid && !firn_parse_i64(r + 1, (size_t)(mid - r - 1), &lo, NULL) &&
               !firn_parse_i64(mid + 1, strlen(mid + 1), &hi, NULL) && lo <= ch->key_lo &&
               ch->key_hi <= hi;
    }
    const char *dash = r[0] != 'k' ? strchr(r, '-') : NULL;
    uint64_t a = 0, b = 0;
    return dash && !firn_parse_u64(r, (size_t)(dash - r), &a, NULL) &&
           !firn_parse_u64(dash + 1, strlen(dash + 1), &b, NULL) && a <= ch->start_block &&
           ch->end_block <= b;
}

static bool range_done(const char *list, const firn_pg_chunk *ch)
{
    const char *p = list;
    while (p && *p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char item[96];
        if (n < sizeof(item)) {
            memcpy(item, p, n);
            item[n] = '\0';
            if (item_holds(item, ch))
                return true;
        }
        p = end ? end + 1 : NULL;
    }
    return false;
}

/* A resumed table: chunks inside ranges an earlier run committed are not read again (a chunk
 * only partly inside is read whole; its rows fold by key). */
static void skip_committed(firn_pg_plan *plan, bf_table *bt)
{
    size_t skipped = 0, total = 0;
    for (size_t i = 0; i < firn_pg_plan_chunks(plan); i++) {
        firn_pg_chunk *ch = firn_pg_plan_chunk(plan, i);
        if (ch->table != bt->t->pg)
            continue;
        total++;
        if (range_done(bt->t->backfill_chunks, ch)) {
            firn_pg_plan_set_done(plan, ch->id);
            add_range(&bt->done, ch);
            skipped++;
        }
    }
    FIRN_LOG(FIRN_LOG_INFO, "engine",
             "table \"%s\": resuming its initial copy: %zu of %zu chunks were committed by an "
             "earlier run; the rest is copied as upserts",
             bt->t->display, skipped, total);
}

/* The tables to copy and how: a keyed CDC table with committed chunks resumes when the slot of
 * those chunks was kept (e->backfill_resume); any other copy starts from the beginning. */
static void tables_init(bf_ctx *c, firn__engine *e)
{
    c->tabs = firn_calloc(e->n_tables ? e->n_tables : 1, sizeof(*c->tabs));
    for (size_t i = 0; i < e->n_tables; i++) {
        firn__table *t = e->tables[i];
        if (!t->needs_backfill)
            continue;
        bf_table *bt = &c->tabs[c->n_tabs++];
        bt->t = t;
        size_t n = strlen(t->cat.metadata->location) + sizeof("/data");
        bt->data_dir = firn_malloc(n);
        snprintf(bt->data_dir, n, "%s/data", t->cat.metadata->location);
        bt->spec = firn_partition_spec_clone(firn_table_metadata_spec(t->cat.metadata));
        bt->streamed = bt->spec->n_fields == 0;
        /* A multiset cannot fold rows read twice (each is one more copy): copied afresh. */
        bt->resume =
            e->backfill_resume && t->backfill_chunks && t->cdc && t->upsert && !t->multiset;
        if (!bt->resume) {
            firn_free(t->backfill_chunks);
            t->backfill_chunks = NULL;
        }
        /* Only a first copy: a copy replacing a table's rows (full_refresh, a lost slot, an
         * append-mode table's restart) stays one atomic commit. */
        bt->chunk_commits = bt->resume || (t->cdc && t->upsert &&
                                           !firn_table_metadata_current_snapshot(t->cat.metadata));
        firn_buf_init(&bt->done, (size_t)1 << 30);
        bt->last_commit_ns = c->start_ns;
    }
}

static void tables_free(bf_ctx *c)
{
    for (size_t i = 0; i < c->n_tabs; i++) {
        firn_free(c->tabs[i].data_dir);
        firn_partition_spec_free(c->tabs[i].spec);
        firn_buf_deinit(&c->tabs[i].done);
    }
    firn_free(c->tabs);
}

/* Plans the chunks of the tables to copy; resumed tables skip their committed chunks. Fresh
 * keyed tables take the copy's keys in bulk. */
static firn_rc plan_copy(bf_ctx *c, firn_pg_plan **plan, firn_err *err)
{
    firn__engine *e = c->e;
    firn_pg_table **pgs = firn_calloc(c->n_tabs ? c->n_tabs : 1, sizeof(*pgs));
    for (size_t i = 0; i < c->n_tabs; i++)
        pgs[i] = c->tabs[i].t->pg;
    firn_rc rc =
        firn_pg_backfill_plan_chunked(e->sql, pgs, c->n_tabs, e->cfg->source.chunk_bytes,
                                      (firn_pg_chunking)e->cfg->source.chunking, plan, err);
    firn_free(pgs);
    FIRN_TRY(rc);
    size_t chunks = firn_pg_plan_chunks(*plan);
    size_t conns =
        (size_t)e->cfg->source.parallelism < chunks ? (size_t)e->cfg->source.parallelism : chunks;
    FIRN_LOG(FIRN_LOG_INFO, "engine", "backfill: %zu table%s in %zu chunk%s over %zu connection%s",
             c->n_tabs, c->n_tabs == 1 ? "" : "s", chunks, chunks == 1 ? "" : "s", conns,
             conns == 1 ? "" : "s");
    c->chunk_done = firn_calloc(firn_pg_plan_chunks(*plan) + 1, sizeof(bool));
    for (size_t i = 0; i < c->n_tabs; i++) {
        bf_table *bt = &c->tabs[i];
        firn__table *t = bt->t;
        if (bt->resume)
            skip_committed(*plan, bt);
        else if (t->multiset && t->index) {
            /* Copies of a row are numbered by looking the row up: the index is built from the
             * committed files at the end of the copy. */
            t->index_synced = false;
            t->index_dirty = true;
        } else if (t->upsert && t->index) {
            t->index_synced = false; /* takes the copy's keys from here on */
            FIRN_TRY(firn__pkindex_bulk(t->index, true, err));
            if (t->pg && t->pg->estimated_rows > 0) /* pg_class.reltuples: -1 never analyzed */
                firn__pkindex_reserve(t->index, (uint64_t)t->pg->estimated_rows);
        }
    }
    return FIRN_OK;
}

static firn_rc
copy_chunks(bf_ctx *c, firn_pg_plan *plan, const char *snapshot, uint64_t lsn, firn_err *err)
{
    firn__engine *e = c->e;
    firn_pg_backfill_opts o = {0};
    o.conn = &e->conn;
    o.snapshot = snapshot;
    o.snapshot_lsn = lsn;
    o.workers = (int)e->cfg->source.parallelism;
    o.batch_rows = (size_t)e->cfg->source.batch_rows;
    o.on_batch = on_batch;
    o.on_chunk_done = on_chunk_done;
    o.on_chunk_retry = on_chunk_retry;
    o.ctx = c;
    /* A requested stop ends the copy at once: the chunks committed so far stay, the next run
     * goes on from them (keyed tables) or starts again. */
    _Static_assert(sizeof(sig_atomic_t) == sizeof(int), "sig_atomic_t is an int");
    if (e->opts && e->opts->stop)
        o.cancel = (const volatile int *)e->opts->stop;
    firn_rc rc = firn_pg_backfill_run(plan, &o, err);
    for (size_t i = 0; i < c->n_open; i++)
        chunk_out_free(c->open[i]);
    c->n_open = 0;
    return rc;
}

firn_rc firn__backfill_run(
    firn__engine *e, const char *snapshot, uint64_t snapshot_lsn, uint64_t lsn_after, firn_err *err)
{
    bf_ctx ctx = {0};
    ctx.e = e;
    ctx.start_ns = firn_monotonic_ns();
    ctx.last_report_ns = ctx.start_ns;
    ctx.lsn_after = lsn_after;
    ctx.interval_ns = e->cfg->destination.commit.interval_ms * 1000000LL;
    pthread_mutex_init(&ctx.mu, NULL);
    pthread_mutex_init(&ctx.commit_mu, NULL);
    tables_init(&ctx, e);
    firn__metrics_publish(e, "backfill"); /* the first progress report comes 5 s later */
    firn_pg_plan *plan = NULL;
    firn_rc rc = FIRN_OK;
    if (ctx.n_tabs > 0)
        rc = plan_copy(&ctx, &plan, err);
    if (rc == FIRN_OK && ctx.n_tabs > 0)
        rc = copy_chunks(&ctx, plan, snapshot, snapshot_lsn, err);
    for (size_t i = 0; rc == FIRN_OK && i < ctx.n_tabs; i++)
        rc = commit_backfill(&ctx.tabs[i], lsn_after, err);
    if (rc == FIRN_OK && ctx.n_tabs > 0)
        rc = firn__engine_save_state(e, err);
    firn_free(ctx.open);
    firn_free(ctx.chunk_done);
    tables_free(&ctx);
    pthread_mutex_destroy(&ctx.mu);
    pthread_mutex_destroy(&ctx.commit_mu);
    firn_pg_plan_free(plan);
    return rc;
}
