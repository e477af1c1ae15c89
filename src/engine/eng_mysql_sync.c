/* SPDX-License-Identifier: Apache-2.0 */
/* `firn sync` for MySQL and MariaDB sources, full refresh (issue 27; binlog CDC is issue 28):
 * one consistent snapshot whose binlog position each table's commit records, every selected
 * table streamed chunk by chunk into Parquet data files and committed as one snapshot per table
 * (replacing the table's rows). Until the source interface lands, this is its own path beside
 * the PostgreSQL one; it reuses the engine's file writer and committer. */
#include "eng_mysql_int.h"
#include "engine_int.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define SUMMARY_GTID   "firn.mysql.gtid-position"
#define SUMMARY_FILE   "firn.mysql.binlog-file"
#define SUMMARY_OFFSET "firn.mysql.binlog-offset"

typedef struct my_target {
    firn__table t;
    firn_my_table *src;
    firn_schema *schema; /* the Iceberg table's schema (owned) */
    char *data_location;
    firn__stream *out;
    firn_data_file *files;
    size_t n_files;
    uint64_t rows;
    firn_my_decode_stats replaced;
} my_target;

typedef struct my_sync {
    firn__engine e;
    my_target *targets;
    size_t n;
    firn_my_position pos;
    firn_my_conn *conn;
    firn_my_catalog *cat;
} my_sync;

static firn_rc dest_fail(firn_fault *fault, firn_rc rc)
{
    if (rc)
        *fault = FIRN_FAULT_DESTINATION;
    return rc;
}

static firn_schema *source_schema(const firn_my_table *src, const firn_stream_config *st)
{
    firn_schema *s = firn_schema_new(0, firn_field_clone(src->schema));
    if (st->append_mode || src->n_key == 0)
        return s;
    int32_t ids[64];
    size_t n = 0;
    for (size_t k = 0; k < src->n_key && n < 64; k++)
        ids[n++] = src->columns[src->key[k]].field_id;
    firn_schema_set_identifier_ids(s, ids, n);
    return s;
}

/* Same fields, ids, types, required flags and identifier fields: the JSON forms are equal
 * (the schema id apart, which both have 0 here as firn_schema_to_json writes it). */
static bool same_schema(const firn_schema *a, const firn_schema *b)
{
    firn_schema *ca = firn_schema_clone(a);
    ca->schema_id = b->schema_id;
    firn_buf x, y;
    firn_buf_init(&x, (size_t)64 << 20);
    firn_buf_init(&y, (size_t)64 << 20);
    const bool same = firn_schema_to_json(ca, &x, NULL) == FIRN_OK &&
                      firn_schema_to_json(b, &y, NULL) == FIRN_OK && x.len == y.len &&
                      memcmp(x.data, y.data, x.len) == 0;
    firn_buf_deinit(&x);
    firn_buf_deinit(&y);
    firn_schema_free(ca);
    return same;
}

/* Opens or creates the Iceberg table of target x; an existing table must have the schema the
 * source has now (a full refresh replaces its rows, never its columns). */
static firn_rc open_table(my_sync *m, my_target *x, firn_fault *fault, firn_err *err)
{
    firn__table *t = &x->t;
    firn_catalog *cat = m->e.catalog;
    firn_schema *want = source_schema(x->src, t->stream);
    bool exists = false;
    firn_rc rc = firn_catalog_namespace_exists(cat, t->ns, &exists, err);
    if (rc == FIRN_OK && !exists) {
        rc = firn_catalog_create_namespace(cat, t->ns, NULL, err);
        t->created_ns = rc == FIRN_OK;
    }
    if (rc == FIRN_OK)
        rc = firn_catalog_table_exists(cat, t->ns, t->name, &exists, err);
    if (rc == FIRN_OK && !exists) {
        firn_table_create opts = {0};
        opts.schema = want;
        opts.format_version = m->e.cfg->destination.format_version == 3 ? 3 : 2;
        rc = firn_catalog_create_table(cat, t->ns, t->name, &opts, &t->cat, err);
        t->created = rc == FIRN_OK;
        if (rc == FIRN_OK)
            FIRN_LOG(FIRN_LOG_INFO, "engine", "table=%s created (format v%d)", t->display,
                     opts.format_version);
    } else if (rc == FIRN_OK) {
        rc = firn_catalog_load_table(cat, t->ns, t->name, &t->cat, err);
    }
    if (rc) {
        firn_schema_free(want);
        firn_err_context(err, "while opening table \"%s\"", t->display);
        return dest_fail(fault, rc);
    }
    const firn_schema *have = firn_table_metadata_schema(t->cat.metadata);
    if (!same_schema(have, want)) {
        firn_schema_free(want);
        *fault = FIRN_FAULT_CONFIG;
        return firn_err_set(err, FIRN_ERR_SCHEMA,
                            "table \"%s\" has other columns than source table `%s`.`%s` now: "
                            "drop the Iceberg table (or set another target_table) and sync "
                            "again",
                            t->display, x->src->database, x->src->name);
    }
    firn_schema_free(want);
    x->schema = firn_schema_clone(have);
    t->schema = x->schema->root;
    char loc[4096];
    snprintf(loc, sizeof(loc), "%s/data", t->cat.metadata->location);
    x->data_location = firn_strdup(loc);
    return FIRN_OK;
}

static my_target *target_of(my_sync *m, const firn_my_table *src)
{
    for (size_t i = 0; i < m->n; i++) {
        if (m->targets[i].src == src)
            return &m->targets[i];
    }
    return NULL;
}

static firn_rc on_batch(void *ctx, const firn_my_chunk *ch, firn_batch *b, firn_err *err)
{
    my_sync *m = ctx;
    my_target *x = target_of(m, ch->table);
    FIRN_ASSERT(x);
    if (!x->out) {
        firn__write_ctx w = {0};
        w.io = m->e.io;
        w.data_location = x->data_location;
        w.schema = x->t.schema;
        w.pq_opts = &m->e.pq;
        FIRN_TRY(firn__blame(err, FIRN_FAULT_DESTINATION, firn__stream_open(&w, &x->out, err)));
    }
    x->rows += firn_batch_rows(b);
    return firn__blame(err, FIRN_FAULT_DESTINATION, firn__stream_write(x->out, b, err));
}

static firn_rc on_chunk_done(void *ctx, const firn_my_chunk *ch, firn_err *err)
{
    my_sync *m = ctx;
    my_target *x = target_of(m, ch->table);
    x->replaced.zero_dates += ch->replaced.zero_dates;
    (void)err;
    return FIRN_OK;
}

static firn_rc commit_target(my_sync *m, my_target *x, firn_err *err)
{
    if (x->out) {
        firn__stream *s = x->out;
        x->out = NULL;
        FIRN_TRY(firn__blame(err, FIRN_FAULT_DESTINATION,
                             firn__stream_close(s, &x->files, &x->n_files, err)));
    }
    firn_summary extra;
    firn_summary_init(&extra);
    firn_summary_set(&extra, SUMMARY_GTID, m->pos.gtid);
    firn_summary_set(&extra, SUMMARY_FILE, m->pos.file);
    firn_summary_set_i64(&extra, SUMMARY_OFFSET, (int64_t)m->pos.offset);
    const bool had_rows = firn_table_metadata_current_snapshot(x->t.cat.metadata) != NULL;
    firn_rc rc = FIRN_OK;
    /* An empty source table over an empty Iceberg table commits nothing: both are empty. */
    if (x->n_files || had_rows)
        rc = firn__table_commit(&x->t, x->files, x->n_files, NULL, 0, had_rows, 0, &extra, err);
    firn_summary_deinit(&extra);
    if (rc == FIRN_OK) {
        x->t.copied = true;
        x->t.rows_written = x->rows;
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "table=%s copied: %llu rows in %zu files at gtid=%s binlog=%s:%llu%s",
                 x->t.display, (unsigned long long)x->rows, x->n_files,
                 m->pos.gtid[0] ? m->pos.gtid : "-", m->pos.file[0] ? m->pos.file : "-",
                 (unsigned long long)m->pos.offset,
                 x->replaced.zero_dates ? " (zero dates stored as null)" : "");
    }
    return firn__blame(err, FIRN_FAULT_DESTINATION, rc);
}

/* firn's metadata columns (README "Metadata columns"), after the source's: _firn_op "r",
 * _firn_commit_ts null and _firn_ingest_ts as for PostgreSQL snapshot reads; _firn_lsn is null,
 * a MySQL position is no integer (the snapshot summary holds it). */
static const struct {
    const char *name;
    firn_type type;
    firn_meta_kind kind;
} META[] = {
    {"_firn_op", FIRN_TYPE_STRING, FIRN_META_OP},
    {"_firn_lsn", FIRN_TYPE_LONG, FIRN_META_NULL},
    {"_firn_commit_ts", FIRN_TYPE_TIMESTAMPTZ, FIRN_META_COMMIT_TS},
    {"_firn_ingest_ts", FIRN_TYPE_TIMESTAMPTZ, FIRN_META_INGEST_TS},
};

static firn_rc add_meta(firn_my_table *src, firn_err *err)
{
    const size_t n_meta = sizeof(META) / sizeof(META[0]);
    for (size_t i = 0; i < n_meta; i++) {
        for (size_t c = 0; c < src->n_columns; c++) {
            if (strcmp(src->columns[c].name, META[i].name) == 0)
                return firn_err_set(err, FIRN_ERR_CONFIG,
                                    "source table `%s`.`%s` has a column \"%s\", the name of a "
                                    "firn metadata column; rename it or set "
                                    "\"metadata_columns\": false in the destination",
                                    src->database, src->name, META[i].name);
        }
    }
    if (src->schema->n_children > src->n_columns)
        return FIRN_OK; /* added for another stream of the same table */
    int32_t id = (int32_t)src->n_columns;
    for (size_t i = 0; i < n_meta; i++) {
        firn_field *f = firn_field_new(++id, META[i].name, META[i].type, false);
        f->meta = (uint8_t)META[i].kind;
        firn_field_add(src->schema, f);
    }
    return FIRN_OK;
}

static firn_rc pick_targets(my_sync *m, firn_fault *fault, firn_err *err)
{
    const firn_config *cfg = m->e.cfg;
    m->targets = firn_calloc(cfg->streams.count + 1, sizeof(*m->targets));
    for (size_t i = 0; i < cfg->streams.count; i++) {
        const firn_stream_config *st = &cfg->streams.items[i];
        if (!st->selected)
            continue;
        if (st->sync_mode != FIRN_SYNC_FULL_REFRESH) {
            *fault = FIRN_FAULT_CONFIG;
            return firn_err_set(err, FIRN_ERR_CONFIG,
                                "stream %s.%s: sync_mode %s needs binlog CDC, which MySQL and "
                                "MariaDB sources do not have yet: set \"sync_mode\": "
                                "\"full_refresh\"",
                                st->namespace, st->name, firn_sync_mode_name(st->sync_mode));
        }
        firn_my_table *src = firn_my_catalog_find(m->cat, st->namespace, st->name);
        if (!src) {
            *fault = FIRN_FAULT_SOURCE;
            return firn_err_set(err, FIRN_ERR_NOT_FOUND,
                                "stream %s.%s: the source has no table `%s`.`%s` that firn's "
                                "user can see",
                                st->namespace, st->name, st->namespace, st->name);
        }
        if (cfg->destination.metadata_columns) {
            firn_rc rc = add_meta(src, err);
            if (rc) {
                *fault = FIRN_FAULT_CONFIG;
                return rc;
            }
        }
        my_target *x = &m->targets[m->n++];
        x->src = src;
        x->t.eng = &m->e;
        x->t.stream = st;
        x->t.ns = firn_strdup(st->target_namespace);
        x->t.name = firn_strdup(st->target_table);
        char disp[1024];
        snprintf(disp, sizeof(disp), "%s.%s", st->target_namespace, st->target_table);
        x->t.display = firn_strdup(disp);
        pthread_mutex_init(&x->t.mu, NULL);
    }
    return FIRN_OK;
}

static firn_rc copy_all(my_sync *m, firn_fault *fault, firn_err *err)
{
    firn_my_table **tabs = firn_calloc(m->n + 1, sizeof(*tabs));
    for (size_t i = 0; i < m->n; i++)
        tabs[i] = m->targets[i].src;
    firn_my_plan *plan = NULL;
    firn_rc rc = firn_my_snapshot_begin(m->conn, &m->pos, err);
    if (rc == FIRN_OK)
        rc = firn_my_backfill_plan(m->conn, tabs, m->n, m->e.cfg->source.chunk_bytes, &plan, err);
    if (rc)
        *fault = FIRN_FAULT_SOURCE;
    if (rc == FIRN_OK) {
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "snapshot at gtid=%s binlog=%s:%llu: %zu tables in %zu chunks",
                 m->pos.gtid[0] ? m->pos.gtid : "-", m->pos.file[0] ? m->pos.file : "-",
                 (unsigned long long)m->pos.offset, m->n, firn_my_plan_chunks(plan));
        firn_my_backfill_opts o = {0};
        o.batch_rows = (size_t)m->e.cfg->source.batch_rows;
        o.on_batch = on_batch;
        o.on_chunk_done = on_chunk_done;
        o.ctx = m;
        rc = firn_my_backfill_run(m->conn, plan, &o, err);
        if (rc && err->fault == FIRN_FAULT_NONE)
            *fault = FIRN_FAULT_SOURCE;
    }
    firn_my_plan_free(plan);
    firn_free(tabs);
    for (size_t i = 0; rc == FIRN_OK && i < m->n; i++)
        rc = commit_target(m, &m->targets[i], err);
    return rc;
}

/* A run that failed before a table's first commit drops the tables and namespaces it created,
 * so nothing is left half-made (as the PostgreSQL path does). */
static void undo_created(my_sync *m)
{
    for (size_t i = m->n; i-- > 0;) {
        firn__table *t = &m->targets[i].t;
        firn_err ignored = {0};
        if (t->created && !t->copied &&
            firn_catalog_drop_table(m->e.catalog, t->ns, t->name, &ignored) == FIRN_OK)
            FIRN_LOG(FIRN_LOG_INFO, "engine",
                     "table=%s dropped again: the run failed before "
                     "its first commit",
                     t->display);
        if (t->created_ns && !t->copied)
            firn_rc_ignore(firn_catalog_drop_namespace(m->e.catalog, t->ns, &ignored));
    }
}

static void state_entry_copy(firn_stream_state *dst, const firn_stream_state *src)
{
    dst->sync_mode = src->sync_mode;
    dst->backfill_done = src->backfill_done;
    dst->chunks_done = src->chunks_done;
    dst->committed_lsn = src->committed_lsn;
    dst->last_commit_us = src->last_commit_us;
    dst->snapshot_id = src->snapshot_id;
}

/* The state file after the run: every entry it had, and for each table copied the backfill
 * done, the time and the Iceberg snapshot of its commit (`firn status` reads them). */
static firn_rc save_state(my_sync *m, firn_err *err)
{
    const firn_config *cfg = m->e.cfg;
    if (!cfg->state_path)
        return FIRN_OK;
    firn_state st = {0};
    for (size_t i = 0; i < cfg->state.count; i++) {
        const firn_stream_state *old = &cfg->state.items[i];
        state_entry_copy(firn_state_stream(&st, old->namespace, old->name, true), old);
    }
    const int64_t now = firn_now_us();
    for (size_t i = 0; i < m->n; i++) {
        const my_target *x = &m->targets[i];
        if (!x->t.copied)
            continue;
        firn_stream_state *e =
            firn_state_stream(&st, x->t.stream->namespace, x->t.stream->name, true);
        e->sync_mode = FIRN_SYNC_FULL_REFRESH;
        e->backfill_done = true;
        e->last_commit_us = now;
        const firn_snapshot *snap = firn_table_metadata_current_snapshot(x->t.cat.metadata);
        e->snapshot_id = snap ? snap->snapshot_id : 0;
    }
    firn_rc rc = firn_state_save(&st, cfg->state_path, err);
    firn_state_free(&st);
    return rc;
}

static void targets_free(my_sync *m)
{
    for (size_t i = 0; i < m->n; i++) {
        my_target *x = &m->targets[i];
        firn__stream_abort(x->out);
        for (size_t k = 0; k < x->n_files; k++)
            firn_data_file_deinit(&x->files[k]);
        firn_free(x->files);
        firn_free(x->data_location);
        firn_schema_free(x->schema);
        firn_catalog_table_deinit(&x->t.cat);
        firn_free(x->t.ns);
        firn_free(x->t.name);
        firn_free(x->t.display);
        pthread_mutex_destroy(&x->t.mu);
    }
    firn_free(m->targets);
}

firn_rc firn__mysql_sync(const firn_config *cfg,
                         const firn_sync_options *opts,
                         firn_fault *fault,
                         firn_err *err)
{
    my_sync m;
    memset(&m, 0, sizeof(m));
    m.e.cfg = cfg;
    m.e.opts = opts;
    firn_pq_options_init(&m.e.pq);
    firn_rc rc = firn__mysql_open(cfg, &m.conn, fault, err);
    if (rc == FIRN_OK) {
        rc = firn__mysql_discover_catalog(cfg, m.conn, &m.cat, err);
        if (rc)
            *fault = FIRN_FAULT_SOURCE;
    }
    if (rc == FIRN_OK)
        rc = pick_targets(&m, fault, err);
    if (rc == FIRN_OK)
        rc = dest_fail(fault, firn__engine_open_destination(&cfg->destination, &m.e.catalog,
                                                            &m.e.io, &m.e.io_owned, err));
    for (size_t i = 0; rc == FIRN_OK && i < m.n; i++)
        rc = open_table(&m, &m.targets[i], fault, err);
    if (rc == FIRN_OK)
        rc = copy_all(&m, fault, err);
    if (rc == FIRN_OK) {
        rc = save_state(&m, err);
        if (rc)
            *fault = FIRN_FAULT_NONE;
    }
    if (rc && err->fault != FIRN_FAULT_NONE && *fault == FIRN_FAULT_NONE)
        *fault = err->fault;
    if (rc && m.e.catalog)
        undo_created(&m);
    targets_free(&m);
    firn_my_catalog_free(m.cat);
    firn_my_conn_close(m.conn);
    if (m.e.io_owned)
        firn_io_free(m.e.io);
    firn_catalog_free(m.e.catalog);
    return rc;
}
