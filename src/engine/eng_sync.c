/* SPDX-License-Identifier: Apache-2.0 */
/* The engine's entry points: `firn sync` (backfill and CDC per stream, exactly once), `check`,
 * `discover` and `status`. Each failure records where it happened (source, destination or
 * configuration) so the CLI can choose the exit code. */
#include "cfg_int.h"
#include "eng_mysql_int.h"
#include "engine_int.h"

#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

static _Thread_local firn_fault last_fault;

/* First key of the advisory lock a run holds on its slot ('firn' in ASCII). */
#define FIRN_SLOT_LOCK_CLASS 0x6669726e

firn_fault firn_engine_last_fault(void)
{
    return last_fault;
}

static firn_rc fail(firn_fault where, firn_rc rc)
{
    if (rc)
        last_fault = where;
    return rc;
}

firn_rc firn__blame(firn_err *err, firn_fault where, firn_rc rc)
{
    if (!rc || !err || err->fault)
        return rc;
    switch (rc) {
    case FIRN_ERR_CONFIG:
    case FIRN_ERR_SCHEMA:
    case FIRN_ERR_CANCELLED:
    case FIRN_ERR_INTERNAL:
    case FIRN_ERR_SOURCE:
    case FIRN_ERR_UNSUPPORTED:
        return rc;
    default:
        err->fault = (int)where;
        return rc;
    }
}

/* The fault of a failed entry point: the side the error names when it says one (a commit the
 * catalog refused during the CDC phase is the destination's), else where the run failed. */
static firn_fault fault_of(firn_rc rc, const firn_err *err, firn_fault phase)
{
    if (rc && err && err->fault > FIRN_FAULT_NONE && err->fault <= FIRN_FAULT_DESTINATION)
        return (firn_fault)err->fault;
    return rc ? phase : FIRN_FAULT_NONE;
}

/* ---- state -------------------------------------------------------------------------------- */

static void copy_state(firn_state *dst, const firn_state *src)
{
    dst->global_lsn = src->global_lsn;
    for (size_t i = 0; i < src->count; i++) {
        const firn_stream_state *s = &src->items[i];
        firn_stream_state *d = firn_state_stream(dst, s->namespace, s->name, true);
        d->sync_mode = s->sync_mode;
        d->backfill_done = s->backfill_done;
        d->chunks_done = s->chunks_done;
        d->committed_lsn = s->committed_lsn;
        d->last_commit_us = s->last_commit_us;
        d->snapshot_id = s->snapshot_id;
        if (s->cursor_field)
            d->cursor_field = firn_strdup(s->cursor_field);
        if (s->cursor_value)
            d->cursor_value = firn_strdup(s->cursor_value);
    }
}

firn_rc firn__engine_save_state(firn__engine *e, firn_err *err)
{
    if (!e->cfg->state_path)
        return FIRN_OK;
    return firn_state_save(&e->state, e->cfg->state_path, err);
}

void firn__engine_note_commit(firn__engine *e, firn__table *t)
{
    firn_stream_state *st =
        firn_state_stream(&e->state, t->stream->namespace, t->stream->name, true);
    st->sync_mode = t->stream->sync_mode;
    st->backfill_done = !t->needs_backfill;
    st->committed_lsn = t->committed_lsn;
    st->last_commit_us = firn_now_us();
    t->commits++;
    const firn_snapshot *s = firn_table_metadata_current_snapshot(t->cat.metadata);
    st->snapshot_id = s ? s->snapshot_id : 0;
}

/* At the end of a run: each table's state entry as the table now is, also for tables this run
 * did not commit (a state file lost or replaced since their last commit) and for commits that
 * do not note themselves (compactions), so `firn status` shows what the tables hold. */
static void refresh_state(firn__engine *e)
{
    for (size_t i = 0; i < e->n_tables; i++) {
        firn__table *t = e->tables[i];
        const firn_snapshot *s =
            t->cat.metadata ? firn_table_metadata_current_snapshot(t->cat.metadata) : NULL;
        if (!s)
            continue;
        firn_stream_state *st =
            firn_state_stream(&e->state, t->stream->namespace, t->stream->name, true);
        st->sync_mode = t->stream->sync_mode;
        st->backfill_done = !t->needs_backfill;
        if (t->committed_lsn > st->committed_lsn)
            st->committed_lsn = t->committed_lsn;
        if (st->snapshot_id != s->snapshot_id && st->last_commit_us < s->timestamp_ms * 1000)
            st->last_commit_us = s->timestamp_ms * 1000;
        st->snapshot_id = s->snapshot_id;
    }
}

/* ---- opening the engine ------------------------------------------------------------------- */

static firn_rc open_catalog(firn__engine *e, firn_err *err)
{
    firn_rc rc =
        firn__engine_open_destination(&e->cfg->destination, &e->catalog, &e->io, &e->io_owned, err);
    return fail(rc == FIRN_ERR_CONFIG ? FIRN_FAULT_CONFIG : FIRN_FAULT_DESTINATION, rc);
}

static firn_rc open_source(firn__engine *e, firn_err *err)
{
    FIRN_TRY(
        fail(FIRN_FAULT_CONFIG, firn_source_conninfo(&e->cfg->source, false, &e->conninfo, err)));
    memset(&e->conn, 0, sizeof(e->conn));
    e->conn.uri = e->conninfo;
    e->conn.application_name = "firn";
    e->conn.connect_timeout_s = (int)(e->cfg->source.connect_timeout_ms / 1000);
    firn_rc rc = firn_pg_conn_open(&e->conn, FIRN_PG_CONN_SQL, &e->sql, err);
    if (rc && firn__conn_error_is_config(err))
        return fail(FIRN_FAULT_CONFIG, FIRN_ERR_CONFIG);
    return fail(FIRN_FAULT_SOURCE, rc);
}

static void pq_options(firn__engine *e)
{
    const firn_destination_config *d = &e->cfg->destination;
    static const firn_pq_codec codecs[] = {FIRN_PQ_ZSTD, FIRN_PQ_SNAPPY, FIRN_PQ_GZIP,
                                           FIRN_PQ_UNCOMPRESSED};
    firn_pq_options_init(&e->pq);
    e->pq.codec = codecs[d->compression];
    e->pq.compression_level = (int)d->compression_level;
    if (d->target_file_bytes)
        e->pq.file_bytes = d->target_file_bytes;
    if (d->row_group_bytes)
        e->pq.row_group_bytes = d->row_group_bytes;
    if (d->page_bytes)
        e->pq.page_bytes = d->page_bytes;
    e->pq_buffered = e->pq;
    e->pq_buffered.row_group_value_bytes = e->pq.row_group_bytes;
}

firn_pg_relname *firn__selected_names(const firn_streams_config *ss, size_t *out_n)
{
    firn_pg_relname *names = firn_calloc(ss->count ? ss->count : 1, sizeof(*names));
    size_t n = 0;
    for (size_t i = 0; i < ss->count; i++) {
        if (!ss->items[i].selected)
            continue;
        names[n].schema = ss->items[i].namespace;
        names[n++].name = ss->items[i].name;
    }
    *out_n = n;
    return names;
}

static firn_rc discover_selected(firn__engine *e, firn_err *err)
{
    const firn_streams_config *ss = &e->cfg->streams;
    size_t n = 0;
    firn_pg_relname *names = firn__selected_names(ss, &n);
    firn_rc rc = FIRN_OK;
    if (n == 0)
        rc = firn_err_set(err, FIRN_ERR_CONFIG,
                          "no stream is selected; run firn discover and select streams");
    else
        rc = firn_pg_discover_named(e->sql, names, n, &e->pgcat, err);
    firn_free(names);
    return fail(rc == FIRN_ERR_CONFIG ? FIRN_FAULT_CONFIG : FIRN_FAULT_SOURCE, rc);
}

/* The stream's primary_key override, whose columns must be NOT NULL in upsert tables. */
static firn_rc set_stream_key(const firn_stream_config *s, firn_pg_table *pg, firn_err *err)
{
    if (!s->primary_key.count)
        return FIRN_OK;
    FIRN_TRY(
        fail(FIRN_FAULT_CONFIG, firn_pg_table_set_key(pg, (const char *const *)s->primary_key.items,
                                                      s->primary_key.count, err)));
    /* A NULL key would stop every run at the change that brings it (Iceberg identifier
     * fields are required): refuse before anything is written. */
    for (size_t k = 0; k < pg->n_key && !s->append_mode; k++) {
        const firn_pg_column *col = &pg->columns[pg->key_columns[k]];
        char qcol[FIRN_PG_QUOTED_MAX];
        if (!col->not_null)
            return fail(FIRN_FAULT_CONFIG,
                        firn_err_set(err, FIRN_ERR_CONFIG,
                                     "stream \"%s.%s\": primary_key column \"%s\" allows "
                                     "NULL; run ALTER TABLE %s ALTER COLUMN %s SET NOT "
                                     "NULL, or pick NOT NULL columns",
                                     s->namespace, s->name, col->name, pg->qualified,
                                     firn_pg_ident_text(qcol, sizeof(qcol), col->name)));
    }
    return FIRN_OK;
}

/* A new table of the engine for stream s and its source table pg (borrowed). */
static firn__table *push_table(firn__engine *e, const firn_stream_config *s, firn_pg_table *pg)
{
    firn__table *t = firn_calloc(1, sizeof(*t));
    e->tables = firn_reallocarray(e->tables, e->n_tables + 1, sizeof(*e->tables));
    e->tables[e->n_tables++] = t;
    t->eng = e;
    t->stream = s;
    t->pg = pg;
    t->ns = firn_strdup(s->target_namespace);
    t->name = firn_strdup(s->target_table);
    firn_buf d;
    firn_buf_init(&d, 4096);
    firn_rc_ignore(firn_buf_appendf(&d, "%s.%s", t->ns, t->name));
    t->display = (char *)firn_buf_take(&d, NULL);
    return t;
}

static firn_rc add_table(firn__engine *e, const firn_stream_config *s, firn_err *err)
{
    firn_pg_table *pg = firn_pg_catalog_find(e->pgcat, s->namespace, s->name);
    FIRN_ASSERT(pg); /* check_missing stopped the run or made the stream a stopped one */
    FIRN_TRY(fail(FIRN_FAULT_CONFIG, firn__stream_check_table(s, pg, err)));
    FIRN_TRY(set_stream_key(s, pg, err));
    for (size_t i = 0; i < e->n_tables; i++) {
        const firn__table *o = e->tables[i];
        if (strcmp(o->ns, s->target_namespace) == 0 && strcmp(o->name, s->target_table) == 0)
            return fail(FIRN_FAULT_CONFIG,
                        firn_err_set(err, FIRN_ERR_CONFIG,
                                     "streams \"%s.%s\" and \"%s.%s\" both write table "
                                     "\"%s.%s\"; give one a target_table, or use {schema} in "
                                     "the destination's namespace",
                                     o->stream->namespace, o->stream->name, s->namespace, s->name,
                                     o->ns, o->name));
    }
    firn_strlist left_out = {0};
    firn_rc crc = firn__columns_setup(e, s, pg, &left_out, err);
    if (crc) {
        firn_strlist_deinit(&left_out);
        return fail(crc == FIRN_ERR_CONFIG ? FIRN_FAULT_CONFIG : FIRN_FAULT_DESTINATION, crc);
    }
    firn__table *t = push_table(e, s, pg);
    t->left_out = left_out;
    bool eq = e->cfg->destination.delete_mode == FIRN_DELETE_EQUALITY;
    /* A table without a usable key whose old rows arrive whole (REPLICA IDENTITY FULL) is a
     * multiset of rows: an UPDATE or DELETE removes exactly one copy of its old image, which
     * the key index finds by (whole row, occurrence number) and removes by position, in every
     * delete mode (an equality delete on every column would remove all identical copies).
     * Only CDC streams: an incremental run reads rows again, which must not become copies. */
    bool cdc = s->sync_mode == FIRN_SYNC_FULL_REFRESH_CDC || s->sync_mode == FIRN_SYNC_CDC_ONLY;
    bool full = !s->append_mode && pg->n_key == 0 && pg->replica_identity == 'f';
    t->multiset = full && cdc;
    t->eqdel = eq && !s->append_mode && (pg->n_key > 0 || (full && !cdc));
    t->upsert = !s->append_mode && (pg->n_key > 0 || t->multiset || t->eqdel);
    t->soft_delete = t->upsert && !t->multiset && s->soft_delete;
    if (s->soft_delete && t->multiset)
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "table %s has no primary key: its deletes remove one copy of the old row, "
                 "soft_delete has no effect (set primary_key in the streams file for tombstones)",
                 pg->qualified);
    if (s->soft_delete && !t->upsert)
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "table %s is written in append mode, where every delete is already a row: "
                 "soft_delete has no effect",
                 pg->qualified);
    if (!s->append_mode && !t->upsert)
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "table %s has no primary key: written in append mode (set primary_key in "
                 "the streams file for upserts%s)",
                 pg->qualified,
                 cdc  ? ", or ALTER TABLE ... REPLICA IDENTITY FULL"
                 : eq ? ", or REPLICA IDENTITY FULL for equality deletes on every column"
                      : "");
    firn_rc rc = firn__table_open(t, err);
    if (rc)
        firn_err_context(err, "while opening table \"%s\"", t->display);
    return fail(rc == FIRN_ERR_SCHEMA || rc == FIRN_ERR_CONFIG ? FIRN_FAULT_CONFIG
                                                               : FIRN_FAULT_DESTINATION,
                rc);
}

/* ---- streams whose source table is missing ------------------------------------------------ */

/* True when firn synced stream s before: its Iceberg table or its state entry exists. */
static firn_rc synced_before(firn__engine *e, const firn_stream_config *s, bool *out, firn_err *err)
{
    *out = firn_state_stream(&e->state, s->namespace, s->name, false) != NULL;
    if (*out)
        return FIRN_OK;
    return firn_catalog_table_exists(e->catalog, s->target_namespace, s->target_table, out, err);
}

/* Before anything is written: a selected stream whose source table does not exist and that
 * was never synced names a table that never was (a misspelt name): a configuration error, one
 * line for all of them. */
static firn_rc check_missing(firn__engine *e, firn_err *err)
{
    const firn_streams_config *ss = &e->cfg->streams;
    size_t *never = firn_calloc(ss->count ? ss->count : 1, sizeof(size_t));
    size_t n = 0;
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; rc == FIRN_OK && i < ss->count; i++) {
        const firn_stream_config *s = &ss->items[i];
        bool synced = false;
        if (!s->selected || firn_pg_catalog_find(e->pgcat, s->namespace, s->name))
            continue;
        rc = fail(FIRN_FAULT_DESTINATION, synced_before(e, s, &synced, err));
        if (rc == FIRN_OK && !synced)
            never[n++] = i;
    }
    if (rc == FIRN_OK && n > 0) {
        firn_buf b;
        firn_buf_init(&b, 1 << 16);
        firn__streams_names_append(&b, ss->items, never, n);
        rc = fail(FIRN_FAULT_CONFIG,
                  firn_err_set(err, FIRN_ERR_CONFIG,
                               "source table%s %s of %s selected stream%s %s not exist and firn "
                               "never synced %s; fix the namespace or stream_name in the streams "
                               "file (firn discover lists the tables) or remove %s",
                               n > 1 ? "s" : "", (const char *)b.data, n > 1 ? "the" : "a",
                               n > 1 ? "s" : "", n > 1 ? "do" : "does", n > 1 ? "them" : "it",
                               n > 1 ? "those streams" : "the stream"));
        firn_buf_deinit(&b);
    }
    firn_free(never);
    return rc;
}

/* A stub source description for a missing table: its names, no columns (owned by the table). */
static firn_pg_table *stub_source(const firn_stream_config *s)
{
    firn_pg_table *pg = firn_calloc(1, sizeof(*pg));
    char qs[FIRN_PG_QUOTED_MAX], qn[FIRN_PG_QUOTED_MAX];
    firn_buf q;
    firn_buf_init(&q, 4 * FIRN_PG_QUOTED_MAX);
    firn_rc_ignore(firn_buf_appendf(&q, "%s.%s", firn_pg_ident_text(qs, sizeof(qs), s->namespace),
                                    firn_pg_ident_text(qn, sizeof(qn), s->name)));
    pg->qualified = (char *)firn_buf_take(&q, NULL);
    pg->schema_name = firn_strdup(s->namespace);
    pg->name = firn_strdup(s->name);
    pg->relkind = 'r';
    pg->replica_identity = 'd';
    pg->estimated_rows = -1;
    pg->schema = firn_field_new(0, "schema", FIRN_TYPE_STRUCT, true);
    return pg;
}

/* A synced stream whose source table is gone (renamed, moved or dropped): stopped like a stream
 * at an incompatible schema change, the others go on, and the run ends with its line (exit 3). */
static firn_rc add_stopped(firn__engine *e, const firn_stream_config *s, firn_err *err)
{
    firn__table *t = push_table(e, s, stub_source(s));
    t->missing = true;
    firn_rc rc = firn__table_open_stopped(t, err);
    if (rc) {
        firn_err_context(err, "while opening table \"%s\"", t->display);
        return fail(FIRN_FAULT_DESTINATION, rc);
    }
    firn_err why = {0};
    FIRN_TRY(fail(FIRN_FAULT_SOURCE, firn__rename_missing_line(t, &why, err)));
    FIRN_LOG(FIRN_LOG_ERROR, "engine", "%s", why.msg);
    if (!e->halt.code)
        e->halt = why;
    return FIRN_OK;
}

static void engine_close(firn__engine *e)
{
    for (size_t i = 0; i < e->n_tables; i++) {
        firn__table_deinit(e->tables[i]);
        firn_free(e->tables[i]);
    }
    firn_free(e->tables);
    firn_pg_catalog_free(e->pgcat);
    firn_free(e->copy_snapshot);
    firn_pg_conn_close(e->sql);
    if (e->io_owned)
        firn_io_free(e->io);
    firn_catalog_free(e->catalog);
    firn_state_free(&e->state);
    if (e->conninfo) {
        memset(e->conninfo, 0, strlen(e->conninfo)); /* holds the password */
        firn_free(e->conninfo);
    }
}

/* One firn per replication slot, on any host: a session advisory lock on the slot's name,
 * held by the SQL connection for the whole run and taken before any table is opened (a second
 * firn would otherwise rebuild key indexes and only then find the slot busy). Runs without a
 * CDC stream do not read the slot and take no lock. */
static firn_rc lock_slot(firn__engine *e, firn_err *err)
{
    bool cdc = false;
    for (size_t i = 0; i < e->cfg->streams.count; i++) {
        const firn_stream_config *s = &e->cfg->streams.items[i];
        cdc |= s->selected &&
               (s->sync_mode == FIRN_SYNC_FULL_REFRESH_CDC || s->sync_mode == FIRN_SYNC_CDC_ONLY);
    }
    const char *slot = e->cfg->source.slot;
    if (!cdc || !slot || strchr(slot, '\''))
        return FIRN_OK;
    char sql[512], out[64];
    snprintf(sql, sizeof(sql), "SELECT pg_try_advisory_lock(%d, hashtext('firn slot %s'))::text",
             FIRN_SLOT_LOCK_CLASS, slot);
    FIRN_TRY(firn_pg_conn_query_value(e->sql, sql, out, sizeof(out), err));
    if (strcmp(out, "true") == 0)
        return FIRN_OK;
    snprintf(sql, sizeof(sql),
             "SELECT coalesce((SELECT pid::text FROM pg_locks WHERE locktype = 'advisory' AND "
             "classid = %d AND objid = hashtext('firn slot %s')::oid AND granted LIMIT 1), "
             "'unknown')",
             FIRN_SLOT_LOCK_CLASS, slot);
    if (firn_pg_conn_query_value(e->sql, sql, out, sizeof(out), NULL) != FIRN_OK)
        snprintf(out, sizeof(out), "unknown");
    return firn_err_set(err, FIRN_ERR_UNAVAILABLE,
                        "replication slot \"%s\" is in use by another firn sync (server process "
                        "%s holds it, streaming or copying; the slot is active while it streams); "
                        "stop that one first, or give this run its own slot and publication",
                        slot, out);
}

static firn_rc engine_open(firn__engine *e,
                           const firn_config *cfg,
                           const firn_sync_options *opts,
                           firn__metrics *metrics,
                           firn_err *err)
{
    memset(e, 0, sizeof(*e));
    e->cfg = cfg;
    e->opts = opts;
    e->metrics = metrics;
    e->start_ns = firn_monotonic_ns();
    e->start_us = firn_now_us();
    copy_state(&e->state, &cfg->state);
    pq_options(e);
    FIRN_TRY(open_source(e, err));
    FIRN_TRY(fail(FIRN_FAULT_SOURCE, lock_slot(e, err)));
    FIRN_TRY(open_catalog(e, err));
    FIRN_TRY(discover_selected(e, err));
    FIRN_TRY(check_missing(e, err));
    for (size_t i = 0; i < cfg->streams.count; i++) {
        const firn_stream_config *s = &cfg->streams.items[i];
        if (!s->selected)
            continue;
        if (firn_pg_catalog_find(e->pgcat, s->namespace, s->name))
            FIRN_TRY(add_table(e, s, err));
        else
            FIRN_TRY(add_stopped(e, s, err));
    }
    return FIRN_OK;
}

/* ---- sync --------------------------------------------------------------------------------- */

static bool slot_exists(firn__engine *e, const char *slot, firn_err *err, firn_rc *rc)
{
    char sql[512], out[16];
    char *lit = firn_strdup(slot);
    for (char *p = lit; *p; p++) {
        if (*p == '\'')
            *p = '_'; /* slot names are [a-z0-9_]; a quote cannot name a real slot */
    }
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '%s'",
             lit);
    firn_free(lit);
    *rc = firn_pg_conn_query_value(e->sql, sql, out, sizeof(out), err);
    return *rc == FIRN_OK && strcmp(out, "1") == 0;
}

/* "1" in out when the publication exists, else "0". */
static firn_rc publication_exists(firn__engine *e, char *out, size_t cap, firn_err *err)
{
    PGconn *pq = firn_pg_conn_pq(e->sql);
    const char *name = e->cfg->source.publication;
    char *lit = PQescapeLiteral(pq, name, strlen(name));
    if (!lit)
        return firn_err_set(err, FIRN_ERR_SOURCE, "could not quote publication name \"%s\"", name);
    firn_buf q;
    firn_buf_init(&q, 4096);
    firn_rc rc =
        firn_buf_appendf(&q, "SELECT count(*) FROM pg_publication WHERE pubname = %s", lit);
    PQfreemem(lit);
    if (rc == FIRN_OK)
        rc = firn_pg_conn_query_value(e->sql, (const char *)q.data, out, cap, err);
    else
        rc = firn_err_set(err, rc, "publication name \"%s\" is too long", name);
    firn_buf_deinit(&q);
    return rc;
}

/* A table firn already streamed changes of that is no longer in the publication: the changes
 * made while it was out are not in the slot (pgoutput filters by publication when it decodes),
 * so adding it back, the preflight's remedy, would resume after a silent gap. Says so, with the
 * copy that makes the table whole again. Runs only when the publication exists. */
static firn_rc synced_table_left_publication(firn__engine *e, firn_err *err)
{
    const char *pub = e->cfg->source.publication;
    PGconn *pq = firn_pg_conn_pq(e->sql);
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; i < e->n_tables && rc == FIRN_OK; i++) {
        const firn__table *t = e->tables[i];
        /* a partitioned table is listed by its leaves without publish_via_partition_root */
        if (!t->cdc || t->missing || t->needs_backfill || t->committed_lsn == 0 ||
            t->pg->relkind != 'r')
            continue;
        char *lp = PQescapeLiteral(pq, pub, strlen(pub));
        char *ls = PQescapeLiteral(pq, t->pg->schema_name, strlen(t->pg->schema_name));
        char *ln = PQescapeLiteral(pq, t->pg->name, strlen(t->pg->name));
        firn_buf q;
        firn_buf_init(&q, 1 << 16);
        char out[16] = "";
        if (!lp || !ls || !ln)
            rc = firn_err_set(err, FIRN_ERR_SOURCE, "could not quote the name of %s",
                              t->pg->qualified);
        else
            rc = firn_buf_appendf(&q,
                                  "SELECT count(*) FROM pg_publication_tables WHERE pubname = %s "
                                  "AND schemaname = %s AND tablename = %s",
                                  lp, ls, ln);
        if (rc == FIRN_OK)
            rc = firn_pg_conn_query_value(e->sql, (const char *)q.data, out, sizeof(out), err);
        if (rc == FIRN_OK && strcmp(out, "0") == 0)
            rc = firn_err_set(err, FIRN_ERR_CONFIG,
                              "table %s left publication \"%s\" after firn streamed its changes "
                              "(up to %X/%X): the changes made while it was out are not in the "
                              "slot; add it back (ALTER PUBLICATION ... ADD TABLE %s), then drop "
                              "table \"%s\" and run firn sync to copy it again",
                              t->pg->qualified, pub, (unsigned)(t->committed_lsn >> 32),
                              (unsigned)t->committed_lsn, t->pg->qualified, t->display);
        PQfreemem(lp);
        PQfreemem(ls);
        PQfreemem(ln);
        firn_buf_deinit(&q);
    }
    return rc;
}

/* Appends the CDC tables the source has ("a", "b"); false when there is none. */
static bool append_cdc_tables(const firn__engine *e, firn_buf *b)
{
    bool first = true;
    for (size_t i = 0; i < e->n_tables; i++) {
        if (!e->tables[i]->cdc || e->tables[i]->missing)
            continue;
        firn_rc_ignore(firn_buf_appendf(b, "%s%s", first ? "" : ", ", e->tables[i]->pg->qualified));
        first = false;
    }
    return !first;
}

/* Creates the publication for the CDC tables when firn may and it is missing. */
static firn_rc ensure_publication(firn__engine *e, firn_err *err)
{
    const firn_source_config *src = &e->cfg->source;
    char out[16];
    FIRN_TRY(publication_exists(e, out, sizeof(out), err));
    if (strcmp(out, "0") != 0)
        return synced_table_left_publication(e, err);
    if (!src->create_publication)
        return FIRN_OK;
    /* Creating a publication on a server that cannot stream it would only leave it behind. */
    FIRN_TRY(firn_pg_conn_query_value(e->sql, "SHOW wal_level", out, sizeof(out), err));
    if (strcmp(out, "logical") != 0)
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "wal_level is \"%s\" but logical replication needs \"logical\"; run "
                            "ALTER SYSTEM SET wal_level = logical and restart the server",
                            out);
    firn_buf b;
    firn_buf_init(&b, 1 << 20);
    firn_rc_ignore(firn_buf_append_cstr(&b, "CREATE PUBLICATION "));
    firn_rc_ignore(firn_pg_ident_append(&b, src->publication));
    firn_rc_ignore(firn_buf_append_cstr(&b, " FOR TABLE "));
    if (!append_cdc_tables(e, &b)) { /* every CDC stream's table is missing */
        firn_buf_deinit(&b);
        return FIRN_OK;
    }
    firn_rc_ignore(firn_buf_append_cstr(&b, " WITH (publish_via_partition_root = true)"));
    firn_rc rc = firn_pg_conn_exec(e->sql, (const char *)b.data, err);
    e->publication_created = rc == FIRN_OK;
    if (rc == FIRN_OK)
        FIRN_LOG(FIRN_LOG_INFO, "engine", "created publication \"%s\"", src->publication);
    else if (rc == FIRN_ERR_PERMISSION && err) {
        /* CREATE PUBLICATION ... FOR TABLE needs ownership of every table, not just CREATE. */
        const char *why = strstr(err->msg, "must be owner of ");
        char cause[96];
        snprintf(cause, sizeof(cause), "%s", why ? why : "permission denied");
        char *paren = strstr(cause, " (SQLSTATE");
        if (paren)
            *paren = '\0';
        const char *stmt = (const char *)b.data;
        char head[FIRN_ERR_MSG_MAX];
        int n = snprintf(head, sizeof(head),
                         "could not create publication \"%s\" (%s): only the tables' owner or a "
                         "superuser can; have one run: ",
                         src->publication, cause);
        if (n > 0 && (size_t)n + strlen(stmt) < sizeof(head))
            rc = firn_err_set(err, FIRN_ERR_PERMISSION, "%s%s", head, stmt);
        else {
            FIRN_LOG(FIRN_LOG_WARN, "engine", "publication \"%s\" is missing; create it with: %s",
                     src->publication, stmt);
            rc = firn_err_set(err, FIRN_ERR_PERMISSION,
                              "could not create publication \"%s\" (%s): only the tables' owner "
                              "or a superuser can; have one run the CREATE PUBLICATION in the "
                              "warning above",
                              src->publication, cause);
        }
    }
    firn_buf_deinit(&b);
    return rc;
}

/* True when nothing was read from the existing slot yet: every CDC table is a full_refresh_cdc
 * table whose initial copy is pending or is still its last commit, and one copy is pending
 * (a run died inside the initial copy). */
static bool slot_unused(const firn__engine *e)
{
    bool pending = false;
    for (size_t i = 0; i < e->n_tables; i++) {
        const firn__table *t = e->tables[i];
        if (!t->cdc)
            continue;
        /* A stopped stream still needs the slot's changes: it is not copied again. */
        if (t->stream->sync_mode != FIRN_SYNC_FULL_REFRESH_CDC || t->halted)
            return false;
        pending |= t->needs_backfill;
        if (!t->needs_backfill && !firn__table_backfill_is_last(t))
            return false;
    }
    return pending;
}

/* True when the unfinished copy can go on without dropping the slot: some table committed
 * chunks of it, and every CDC table still copying is keyed (upsert). Rows of the remaining
 * chunks then come from a newer snapshot than the committed ones; replaying the slot from its
 * start (the committed chunks' snapshot) as upserts turns both into the source's state, which
 * an append-mode table could not (docs/internals/backfill.md). */
static bool resumable_copy(const firn__engine *e)
{
    bool partial = false;
    for (size_t i = 0; i < e->n_tables; i++) {
        const firn__table *t = e->tables[i];
        if (!t->cdc || !t->needs_backfill)
            continue;
        if (!t->upsert)
            return false;
        partial |= t->backfill_chunks != NULL;
    }
    return partial;
}

/* A run that created the slot died inside the initial copy. The slot's exported snapshot is
 * gone, and a copy in a fresh snapshot plus a replay from the slot would write the changes in
 * between twice to append-mode tables. Since nothing was read from the slot yet, drop it and
 * copy every table again in the snapshot of a new one (DESIGN.md "Exactly-once"). */
/* Names the CDC tables whose copy is pending into out ("a, b, c and 2 more"); returns their
 * count. */
static size_t pending_copies(const firn__engine *e, char *out, size_t cap)
{
    size_t n = 0, used = 0;
    out[0] = 0;
    for (size_t i = 0; i < e->n_tables; i++) {
        const firn__table *t = e->tables[i];
        if (!t->cdc || !t->needs_backfill)
            continue;
        if (n++ < 3 && used < cap)
            used += (size_t)snprintf(out + used, cap - used, "%s%s", n > 1 ? ", " : "",
                                     t->pg->qualified);
    }
    if (n > 3 && used < cap)
        snprintf(out + used, cap - used, " and %zu more", n - 3);
    return n;
}

/* True when this run created every CDC table and the state file records no position
 * acknowledged to a slot. A run of this destination creates its tables before the slot, so a
 * slot that exists when none of them did was made by someone else: another destination syncing
 * the same database under the same slot name, which would lose the changes it has not read yet
 * if firn dropped or read the slot. (Tables dropped to be copied again leave the state's
 * position behind: their slot is this destination's.) */
static bool slot_of_another(firn__engine *e)
{
    if (e->state.global_lsn != 0)
        return false;
    bool any = false;
    for (size_t i = 0; i < e->n_tables; i++) {
        const firn__table *t = e->tables[i];
        if (!t->cdc)
            continue;
        if (!t->created)
            return false;
        /* A table dropped to be copied again whose stream the state file holds a position of
         * (a catch-up run that read no change acknowledges none): the slot is this one's. */
        const firn_stream_state *st =
            firn_state_stream(&e->state, t->stream->namespace, t->stream->name, false);
        if (st && st->committed_lsn != 0)
            return false;
        any = true;
    }
    return any;
}

static firn_rc drop_unused_slot(firn__engine *e, bool *have_slot, firn_err *err)
{
    const char *slot = e->cfg->source.slot;
    if (!*have_slot || !e->cfg->source.create_slot || !slot_unused(e))
        return FIRN_OK;
    if (slot_of_another(e))
        return firn_err_set(err, FIRN_ERR_EXISTS,
                            "replication slot \"%s\" already exists, but this destination has no "
                            "table synced from it (another destination or consumer may read it): "
                            "give this destination its own \"slot\" in the source file, or drop "
                            "the slot with SELECT pg_drop_replication_slot('%s') if nothing uses "
                            "it",
                            slot, slot);
    if (resumable_copy(e)) {
        e->backfill_resume = true;
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "kept replication slot \"%s\" of an unfinished initial copy: keyed tables copy "
                 "only their missing chunks, as upserts in a new snapshot, and the slot's changes "
                 "since its start are applied over them",
                 slot);
        return FIRN_OK;
    }
    char sql[512];
    if (strchr(slot, '\''))
        return firn_err_set(err, FIRN_ERR_CONFIG, "invalid slot name \"%s\"", slot);
    snprintf(sql, sizeof(sql), "SELECT pg_drop_replication_slot('%s')", slot);
    FIRN_TRY(firn_pg_conn_exec(e->sql, sql, err));
    char pending[256];
    size_t n_pending = pending_copies(e, pending, sizeof(pending));
    FIRN_LOG(FIRN_LOG_INFO, "engine",
             "dropped replication slot \"%s\": no change was read from it yet and %s still "
             "need%s an initial copy; copying every CDC table again in the snapshot of a new slot",
             slot, pending, n_pending == 1 ? "s" : "");
    for (size_t i = 0; i < e->n_tables; i++) {
        if (e->tables[i]->cdc)
            firn__table_restart_backfill(e->tables[i]);
    }
    *have_slot = false;
    return FIRN_OK;
}

/* The slot is gone but tables already hold streamed changes: what happened between their
 * position and a new slot is no longer in the WAL. Copy those tables again in the new slot's
 * snapshot (never resume silently at the new slot's position). */
static firn_rc recopy_after_lost_slot(firn__engine *e, firn_err *err)
{
    for (size_t i = 0; i < e->n_tables; i++) {
        firn__table *t = e->tables[i];
        if (!t->cdc || t->needs_backfill || t->committed_lsn == 0)
            continue;
        if (t->stream->sync_mode == FIRN_SYNC_CDC_ONLY)
            return firn_err_set(err, FIRN_ERR_NOT_FOUND,
                                "replication slot \"%s\" does not exist, but table \"%s\" holds "
                                "changes up to %X/%X and the changes since are lost; sync it with "
                                "full_refresh_cdc to copy it again",
                                e->cfg->source.slot, t->display, (unsigned)(t->committed_lsn >> 32),
                                (unsigned)t->committed_lsn);
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "replication slot \"%s\" is missing while table \"%s\" holds changes up to "
                 "%X/%X: copying it again in the snapshot of a new slot",
                 e->cfg->source.slot, t->display, (unsigned)(t->committed_lsn >> 32),
                 (unsigned)t->committed_lsn);
        firn__table_restart_backfill(t);
    }
    return FIRN_OK;
}

/* A slot the user manages (create_slot false) is gone while tables hold streamed changes: a new
 * slot would resume after a gap silently, so the preflight's "create it" is not the remedy.
 * Name the table and the one that is: let firn create the slot and copy the tables again. */
static firn_rc lost_user_slot(firn__engine *e, firn_err *err)
{
    for (size_t i = 0; i < e->n_tables; i++) {
        const firn__table *t = e->tables[i];
        if (!t->cdc || t->needs_backfill || t->committed_lsn == 0)
            continue;
        return firn_err_set(err, FIRN_ERR_NOT_FOUND,
                            "replication slot \"%s\" does not exist, but table \"%s\" holds "
                            "changes up to %X/%X and the changes made since are lost with the "
                            "slot; set \"create_slot\": true in the source file to have firn "
                            "create it and copy the tables again (a slot created by hand resumes "
                            "without those changes)",
                            e->cfg->source.slot, t->display, (unsigned)(t->committed_lsn >> 32),
                            (unsigned)t->committed_lsn);
    }
    return FIRN_OK;
}

/* True when some table's initial copy is pending; warns about the append-mode ones that a
 * copy outside the slot's snapshot may duplicate changes in. */
static bool pending_backfill(const firn__engine *e)
{
    bool pending = false;
    for (size_t i = 0; i < e->n_tables; i++) {
        const firn__table *t = e->tables[i];
        pending |= t->needs_backfill;
        if (t->needs_backfill && t->cdc && !t->upsert)
            FIRN_LOG(FIRN_LOG_WARN, "engine",
                     "table \"%s\" is in append mode and is copied outside the snapshot of "
                     "slot \"%s\": changes made between the slot's position and this copy may "
                     "appear twice",
                     t->display, e->cfg->source.slot);
    }
    return pending;
}

/* firn__backfill_run; a copy that lost the server (a restart, the network: its retries in the
 * same snapshot cannot outlast a restart, which ends the snapshot) says what to do. */
static firn_rc
backfill(firn__engine *e, const char *snapshot, uint64_t consistent, uint64_t hold, firn_err *err)
{
    firn_rc rc = firn__backfill_run(e, snapshot, consistent, hold, err);
    if (rc == FIRN_ERR_NETWORK && err) {
        char why[FIRN_ERR_MSG_MAX];
        snprintf(why, sizeof(why), "%s", err->msg);
        rc = firn_err_set(err, rc,
                          "%s; run firn sync again once the server is up (the copy resumes or "
                          "starts over)",
                          why);
    }
    return rc;
}

static firn_rc backfill_without_slot(firn__engine *e, firn_err *err)
{
    firn_pg_conn *exp = NULL;
    char snapshot[128];
    FIRN_TRY(fail(FIRN_FAULT_SOURCE, firn_pg_conn_open(&e->conn, FIRN_PG_CONN_SQL, &exp, err)));
    firn_rc rc = firn_pg_snapshot_export(exp, snapshot, sizeof(snapshot), err);
    if (rc == FIRN_OK) {
        /* The copy's position is 0: the slot's changes from before it are told by their
         * transaction ids, which its snapshot sees (eng_cdc.c in_copy), and are not replayed
         * (a TRUNCATE replayed would empty the copy, a row inserted before it would return). */
        PGconn *pq = firn_pg_conn_pq(exp);
        /* A transaction committed after the WAL position read after the snapshot is not in
         * it, whatever its id says (an id can look old again after 2^31 more). */
        PGresult *r = PQexec(pq, "SELECT txid_current_snapshot()::text, (CASE WHEN "
                                 "pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE "
                                 "pg_current_wal_insert_lsn() END)::text");
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
            firn_free(e->copy_snapshot);
            e->copy_snapshot = firn_strdup(PQgetvalue(r, 0, 0));
            rc = firn_lsn_parse(PQgetvalue(r, 0, 1), &e->copy_lsn, err);
        } else
            rc = firn_err_set(err, FIRN_ERR_SOURCE, "could not read the copy's snapshot: %s",
                              PQerrorMessage(pq));
        PQclear(r);
    }
    if (rc == FIRN_OK)
        rc = backfill(e, snapshot, 0, 0, err);
    firn_pg_conn_close(exp);
    return fail(FIRN_FAULT_SOURCE, rc);
}

/* Before any side effect on the source: a table whose updates cannot be replicated must not
 * enter a publication (PostgreSQL would then refuse the application's UPDATEs on it). */
static firn_rc check_replica_identity(firn__engine *e, firn_err *err)
{
    for (size_t i = 0; i < e->n_tables; i++) {
        const firn_pg_table *pg = e->tables[i]->pg;
        if (!e->tables[i]->cdc || e->tables[i]->missing)
            continue;
        if (pg->replica_identity == 'n' || (pg->replica_identity == 'd' && !pg->has_primary_key))
            return firn_err_set(err, FIRN_ERR_CONFIG,
                                "table %s has no primary key or replica identity, so CDC cannot "
                                "carry its updates and deletes; add a primary key, run ALTER "
                                "TABLE %s REPLICA IDENTITY FULL, or sync it with full_refresh or "
                                "incremental",
                                pg->qualified, pg->qualified);
    }
    return FIRN_OK;
}

/* The CDC tables for the preflight with the columns each stream selects (t->pg's, borrowed):
 * only those count for the TOAST warning and the column grants. *out_flat holds the name
 * arrays (free with firn_free, after the tables). */
static firn_pgo_table *
preflight_tables(const firn__engine *e, size_t *out_n, const char ***out_flat)
{
    size_t total = 0, n = 0, used = 0;
    for (size_t i = 0; i < e->n_tables; i++)
        total += e->tables[i]->pg->n_columns;
    const char **flat = firn_calloc(total ? total : 1, sizeof(*flat));
    firn_pgo_table *tabs = firn_calloc(e->n_tables ? e->n_tables : 1, sizeof(*tabs));
    for (size_t i = 0; i < e->n_tables; i++) {
        const firn__table *t = e->tables[i];
        if (!t->cdc || t->missing)
            continue;
        tabs[n].schema = t->pg->schema_name;
        tabs[n].name = t->pg->name;
        tabs[n].columns = flat + used;
        tabs[n++].n_columns = t->pg->n_columns;
        for (size_t j = 0; j < t->pg->n_columns; j++)
            flat[used++] = t->pg->columns[j].name;
    }
    *out_n = n;
    *out_flat = flat;
    return tabs;
}

/* The replication stream's settings (pubs: the one publication, which must outlive the stream). */
static void stream_config(const firn__engine *e, const char **pubs, firn_pgo_config *pc)
{
    const firn_source_config *src = &e->cfg->source;
    memset(pc, 0, sizeof(*pc));
    pubs[0] = src->publication;
    pc->conninfo = e->conninfo;
    pc->slot_name = src->slot;
    pc->publications = pubs;
    pc->n_publications = 1;
    pc->text_values = true;
    pc->recv_timeout_ms = src->replication_timeout_ms > 0 ? (int)src->replication_timeout_ms : -1;
}

/* ---- reconnecting under --follow ---------------------------------------------------------- */

#define RECONNECT_FIRST_MS 1000  /* the first wait; each next one doubles, */
#define RECONNECT_MAX_MS   30000 /* up to this */
#define RECONNECT_NAP_MS   100   /* a stop request ends a wait within this */

/* What a reconnect needs to know about the stream it replaces. */
typedef struct follow_link {
    const char *pubs[1]; /* the publication list of the stream (borrowed by it) */
    char server[300];    /* "host:port" of the source, for messages */
    uint64_t slot_bound; /* no flush position firn reported can be past this: the slot's
                          * confirmed position when the stream started, or the highest WAL
                          * position a stream handed out; a slot found past it was created
                          * again or advanced by someone else */
    unsigned attempts;   /* of the reconnect at hand */
} follow_link;

static bool stop_asked(const firn__engine *e)
{
    return e->opts && e->opts->stop && *e->opts->stop;
}

static bool reconnects(const firn__engine *e)
{
    return e->opts && e->opts->follow && e->cfg->source.reconnect_timeout_ms > 0;
}

static bool sql_broken(firn__engine *e)
{
    return e->sql && PQstatus(firn_pg_conn_pq(e->sql)) == CONNECTION_BAD;
}

/* The slot's confirmed position (*exists false: there is no such slot). */
static firn_rc slot_confirmed(firn__engine *e, bool *exists, uint64_t *out, firn_err *err)
{
    const char *slot = e->cfg->source.slot;
    *exists = false;
    *out = 0;
    if (strchr(slot, '\''))
        return firn_err_set(err, FIRN_ERR_CONFIG, "invalid slot name \"%s\"", slot);
    char sql[512], text[64];
    snprintf(sql, sizeof(sql),
             "SELECT coalesce((SELECT coalesce(confirmed_flush_lsn::text, '0/0') FROM "
             "pg_replication_slots WHERE slot_name = '%s'), '')",
             slot);
    FIRN_TRY(firn_pg_conn_query_value(e->sql, sql, text, sizeof(text), err));
    *exists = text[0] != '\0';
    return *exists ? firn_lsn_parse(text, out, err) : FIRN_OK;
}

/* After a reconnect: the slot is still the one firn streamed from. A slot dropped, or created
 * again (it starts at the WAL position of its creation) or advanced by another consumer while
 * firn was away, lost changes firn never received: the tables cannot be made exact from it. */
static firn_rc check_slot_kept(firn__engine *e, const follow_link *l, firn_err *err)
{
    const char *slot = e->cfg->source.slot;
    bool exists = false;
    uint64_t pos = 0;
    FIRN_TRY(slot_confirmed(e, &exists, &pos, err));
    if (!exists)
        return firn_err_set(err, FIRN_ERR_NOT_FOUND,
                            "replication slot \"%s\" no longer exists on the server at %s: the "
                            "changes made since firn's last confirmed position are gone with it; "
                            "run firn sync again to copy the tables again in a new slot",
                            slot, l->server);
    if (pos > l->slot_bound)
        return firn_err_set(err, FIRN_ERR_SOURCE,
                            "replication slot \"%s\" on the server at %s is at %X/%X, past "
                            "everything firn received from it (%X/%X): it was created again or "
                            "advanced by another consumer while firn was disconnected, and the "
                            "changes in between are lost; drop it (SELECT "
                            "pg_drop_replication_slot('%s')) and run firn sync again to copy the "
                            "tables again in a new slot",
                            slot, l->server, (unsigned)(pos >> 32), (unsigned)pos,
                            (unsigned)(l->slot_bound >> 32), (unsigned)l->slot_bound, slot);
    return FIRN_OK;
}

/* One reconnect attempt, the start of a run without its copy: the SQL connection and the
 * slot's lock, the slot (still the same), the publication (still carrying the tables: a table
 * taken out is an error), the preflight, and a new stream from the slot's confirmed position. */
static firn_rc reconnect_once(firn__engine *e, follow_link *l, firn_pgo_stream **out, firn_err *err)
{
    *out = NULL;
    FIRN_TRY(firn_pg_conn_open(&e->conn, FIRN_PG_CONN_SQL, &e->sql, err));
    FIRN_TRY(lock_slot(e, err));
    FIRN_TRY(check_slot_kept(e, l, err));
    FIRN_TRY(ensure_publication(e, err));
    firn_pgo_config pc;
    stream_config(e, l->pubs, &pc);
    /* The walsender of the lost connection may not have noticed yet: START_REPLICATION then
     * fails with FIRN_ERR_UNAVAILABLE ("active for PID"), and the next attempt tries again. */
    pc.slot_may_be_active = true;
    firn_pgo_stream *s = NULL;
    FIRN_TRY(firn_pgo_stream_open(&pc, &s, err));
    size_t n = 0;
    const char **flat = NULL;
    firn_pgo_table *tabs = preflight_tables(e, &n, &flat);
    firn_rc rc = firn_pgo_stream_preflight(s, tabs, n, false, NULL, err);
    firn_free(tabs);
    firn_free(flat);
    if (rc == FIRN_OK)
        rc = firn_pgo_stream_start(s, 0, err);
    if (rc)
        firn_pgo_stream_free(s);
    else
        *out = s;
    return rc;
}

/* A failed attempt that a later one may get past: the server is down, starting, shutting down,
 * unreachable, or its walsender of before still holds the slot (FIRN_ERR_UNAVAILABLE, also the
 * slot's lock held by the SQL session of before). Authentication, a missing slot or table and
 * every other refusal end the run at once. */
static bool attempt_transient(firn__engine *e, firn_rc rc)
{
    return rc == FIRN_ERR_NETWORK || rc == FIRN_ERR_UNAVAILABLE || sql_broken(e);
}

/* err's message up to the remedy for a run that exits (its first "; "), on one line. */
static void cause_text(const firn_err *err, char *out, size_t cap)
{
    snprintf(out, cap, "%s", err->msg);
    char *cut = strstr(out, "; ");
    if (cut)
        *cut = '\0';
    cut = strchr(out, '\n');
    if (cut)
        *cut = '\0';
}

/* Waits ms (in naps, so that SIGINT or SIGTERM ends the wait at once); true when a stop was
 * requested. */
static bool wait_or_stop(const firn__engine *e, int64_t ms)
{
    for (int64_t left = ms; left > 0 && !stop_asked(e); left -= RECONNECT_NAP_MS)
        firn_sleep_ms(left < RECONNECT_NAP_MS ? (long)left : RECONNECT_NAP_MS);
    return stop_asked(e);
}

static firn_rc give_up(firn__engine *e, const follow_link *l, int64_t limit_ms, firn_err *err)
{
    char cause[FIRN_ERR_MSG_MAX];
    cause_text(err, cause, sizeof(cause));
    return firn_err_set(err, FIRN_ERR_NETWORK,
                        "could not reconnect to the server at %s for replication slot \"%s\" "
                        "within %.0f s (reconnect_timeout_seconds, %u attempts; last: %s); check "
                        "that the server is up and reachable, then run firn sync again (it "
                        "resumes at the last confirmed position)",
                        l->server, e->cfg->source.slot, (double)limit_ms / 1000.0, l->attempts,
                        cause);
}

/* The connection of stream *s or the SQL one beside it was lost (err says how): drops what the
 * tables buffered and did not commit, then opens both again with backoff, as a new run would
 * start streaming (the slot's confirmed position; what the tables hold is skipped), until
 * reconnect_timeout_seconds have passed. *s is then the new stream. FIRN_ERR_CANCELLED when a
 * stop is requested meanwhile; a refusal that is not transient ends it with its own error. */
static firn_rc reconnect(firn__engine *e, follow_link *l, firn_pgo_stream **s, firn_err *err)
{
    const int64_t limit_ms = e->cfg->source.reconnect_timeout_ms;
    firn_pgo_stats st;
    firn_pgo_stream_stats(*s, &st);
    if (st.wal_end_seen > l->slot_bound)
        l->slot_bound = st.wal_end_seen;
    char cause[FIRN_ERR_MSG_MAX];
    cause_text(err, cause, sizeof(cause));
    /* The stream's own lines name the server and the slot; a query's do not. */
    if (strstr(cause, l->server) && strstr(cause, e->cfg->source.slot))
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "%s; reconnecting for up to %.0f s "
                 "(reconnect_timeout_seconds)",
                 cause, (double)limit_ms / 1000.0);
    else
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "lost the connection to the server at %s (replication slot \"%s\"): %s; "
                 "reconnecting for up to %.0f s (reconnect_timeout_seconds)",
                 l->server, e->cfg->source.slot, cause, (double)limit_ms / 1000.0);
    firn_pgo_stream_free(*s);
    *s = NULL;
    firn__cdc_discard(e);
    firn_pg_conn_close(e->sql);
    e->sql = NULL;
    firn__stats_write(e, "reconnecting", true);
    const int64_t t0 = firn_monotonic_ns();
    int64_t delay_ms = RECONNECT_FIRST_MS;
    l->attempts = 0;
    for (;;) {
        const int64_t left_ms = limit_ms - (firn_monotonic_ns() - t0) / 1000000;
        if (wait_or_stop(e, delay_ms < left_ms ? delay_ms : (left_ms > 0 ? left_ms : 0))) {
            FIRN_LOG(FIRN_LOG_INFO, "engine", "stop requested while reconnecting to %s", l->server);
            return FIRN_ERR_CANCELLED;
        }
        l->attempts++;
        firn_rc rc = reconnect_once(e, l, s, err);
        if (rc == FIRN_OK) {
            firn__metrics_reconnected(e);
            FIRN_LOG(FIRN_LOG_INFO, "engine",
                     "reconnected to the server at %s after %.1f s: streaming replication slot "
                     "\"%s\" again from its confirmed position",
                     l->server, (double)(firn_monotonic_ns() - t0) / 1e9, e->cfg->source.slot);
            return FIRN_OK;
        }
        const bool again = attempt_transient(e, rc);
        firn_pg_conn_close(e->sql);
        e->sql = NULL;
        if (!again)
            return rc;
        const int64_t tried_ms = (firn_monotonic_ns() - t0) / 1000000;
        if (tried_ms >= limit_ms)
            return give_up(e, l, limit_ms, err); /* the last attempt came at the limit */
        FIRN_LOG(FIRN_LOG_DEBUG, "engine", "reconnect attempt %u: %s", l->attempts, err->msg);
        delay_ms = delay_ms * 2 < RECONNECT_MAX_MS ? delay_ms * 2 : RECONNECT_MAX_MS;
        firn__stats_write(e, "reconnecting", false);
    }
}

/* Streams until the run ends; under --follow a lost connection (replication or SQL) is
 * reconnected instead of ending it (reconnect). */
static firn_rc stream_changes(firn__engine *e, follow_link *l, firn_pgo_stream **s, firn_err *err)
{
    const char *host = PQhost(firn_pg_conn_pq(e->sql)), *port = PQport(firn_pg_conn_pq(e->sql));
    snprintf(l->server, sizeof(l->server), "%s:%s", host ? host : "", port ? port : "");
    if (reconnects(e)) {
        bool exists = false;
        FIRN_TRY(slot_confirmed(e, &exists, &l->slot_bound, err));
    }
    FIRN_TRY(firn_pgo_stream_start(*s, 0, err));
    firn_rc rc = firn__cdc_run(e, *s, err);
    while (rc && rc != FIRN_ERR_CANCELLED && reconnects(e) &&
           (firn_pgo_stream_lost(*s) || sql_broken(e))) {
        rc = reconnect(e, l, s, err);
        if (rc)
            break; /* *s is NULL */
        rc = firn__cdc_run(e, *s, err);
    }
    return rc;
}

static firn_rc run_cdc(firn__engine *e, firn_err *err)
{
    const firn_source_config *src = &e->cfg->source;
    FIRN_TRY(fail(FIRN_FAULT_SOURCE, check_replica_identity(e, err)));
    FIRN_TRY(fail(FIRN_FAULT_SOURCE, ensure_publication(e, err)));
    follow_link link = {0};
    firn_pgo_config pc;
    stream_config(e, link.pubs, &pc);
    firn_pgo_stream *s = NULL;
    FIRN_TRY(fail(FIRN_FAULT_SOURCE, firn_pgo_stream_open(&pc, &s, err)));
    size_t n = 0;
    const char **flat = NULL;
    firn_pgo_table *tabs = preflight_tables(e, &n, &flat);
    firn_rc rc = FIRN_OK;
    bool have_slot = slot_exists(e, src->slot, err, &rc);
    firn_pgo_report rep = {0};
    if (rc == FIRN_OK && !have_slot && !src->create_slot)
        rc = lost_user_slot(e, err);
    if (rc == FIRN_OK)
        rc = firn_pgo_stream_preflight(s, tabs, n, !have_slot && src->create_slot, &rep, err);
    if (rc == FIRN_OK)
        firn__engine_log_toast_risk(&rep, FIRN_LOG_INFO);
    firn_pgo_report_deinit(&rep);
    if (rc == FIRN_OK)
        rc = drop_unused_slot(e, &have_slot, err);
    if (rc == FIRN_OK && !have_slot)
        rc = recopy_after_lost_slot(e, err);
    if (rc == FIRN_OK)
        rc = firn__cdc_check_leaves(e, err);
    if (rc == FIRN_OK)
        e->started = true; /* every check passed: from here on the run keeps what it made */
    if (rc == FIRN_OK && !have_slot) {
        char *snapshot = NULL;
        uint64_t consistent = 0;
        rc = firn_pgo_stream_create_slot(s, &snapshot, &consistent, err);
        if (rc == FIRN_OK) {
            FIRN_LOG(FIRN_LOG_INFO, "engine", "created replication slot \"%s\"", src->slot);
            rc = backfill(e, snapshot, consistent, consistent ? consistent - 1 : 0, err);
        }
        firn_free(snapshot);
    } else if (rc == FIRN_OK && pending_backfill(e)) {
        /* The user's slot: copy in a fresh snapshot; replaying from the slot is idempotent in
         * upsert mode (DESIGN.md "Exactly-once"). */
        rc = backfill_without_slot(e, err);
    }
    firn_free(tabs);
    firn_free(flat);
    if (rc == FIRN_OK)
        rc = stream_changes(e, &link, &s, err);
    firn_pgo_stream_free(s);
    return fail(FIRN_FAULT_SOURCE, rc);
}

/* One sync per state file: an exclusive flock on "<state>.lock" (holding the pid) for the whole
 * run, taken before anything is opened, so a second firn on the same files stops at once with
 * the first one's pid instead of rebuilding key indexes and then meeting the busy slot. The
 * lock goes with the process, so a killed run leaves nothing to clean up. */
/* The pid the lock file names, when it is a live process. A holder that took the lock an
 * instant ago writes its pid just after, and until then the file holds the pid of the run
 * before (dead) or nothing: read again for up to 0.5 s rather than name a stale pid. */
static void lock_holder(int fd, char *out, size_t cap)
{
    for (int i = 0; i < 50; i++) {
        char buf[32];
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        buf[n > 0 ? n : 0] = 0;
        long pid = strtol(buf, NULL, 10);
        if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM)) {
            snprintf(out, cap, "%ld", pid);
            return;
        }
        const struct timespec nap = {0, 10 * 1000000L};
        nanosleep(&nap, NULL);
    }
}

static firn_rc lock_state(const firn_config *cfg, int *fd_out, firn_err *err)
{
    *fd_out = -1;
    if (!cfg->state_path)
        return FIRN_OK;
    char path[4200];
    snprintf(path, sizeof(path), "%s.lock", cfg->state_path);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not open \"%s\"", path);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char pid[32] = "unknown";
        lock_holder(fd, pid, sizeof(pid));
        close(fd);
        if (e != EWOULDBLOCK)
            return firn_err_set_errno(err, FIRN_ERR_IO, e, "could not lock \"%s\"", path);
        return firn_err_set(err, FIRN_ERR_UNAVAILABLE,
                            "state file \"%s\" is in use by another firn sync (pid %s); stop "
                            "that one first, or give this run its own --state",
                            cfg->state_path, pid);
    }
    char pid[32];
    int len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len)
        FIRN_LOG(FIRN_LOG_DEBUG, "engine", "could not write the pid into \"%s\"", path);
    *fd_out = fd;
    return FIRN_OK;
}

/* The end of a run: each table that committed gets the expiry its commits did not reach yet
 * (firn__expire_maybe plans every 16th commit). */
static void expire_at_end(firn__engine *e)
{
    if (!e->cfg->destination.maintenance.expire_snapshots)
        return;
    for (size_t i = 0; i < e->n_tables; i++) {
        firn__table *t = e->tables[i];
        if (t->commits == 0 || t->needs_backfill || t->halted || t->missing)
            continue;
        firn__expire_result res;
        firn_err lerr = {0};
        if (firn__expire_run(t, false, &res, &lerr) != FIRN_OK)
            FIRN_LOG(FIRN_LOG_WARN, "engine", "table \"%s\": snapshot expiry skipped: %s",
                     t->display, lerr.msg);
    }
}

/* --metrics-listen, else the destination's metrics_listen: the registry and its server (both
 * NULL without either). */
static firn_rc start_metrics(const firn_config *cfg,
                             const firn_sync_options *opts,
                             firn__metrics **out_m,
                             firn__metrics_server **out_srv,
                             firn_err *err)
{
    *out_m = NULL;
    *out_srv = NULL;
    const bool flag = opts && opts->metrics_listen;
    const char *listen = flag ? opts->metrics_listen : cfg->destination.metrics_listen;
    if (!listen)
        return FIRN_OK;
    firn__metrics *m = firn__metrics_new(firn_now_us());
    firn_rc rc =
        firn__metrics_serve(m, flag ? "--metrics-listen" : "metrics_listen of the destination file",
                            listen, out_srv, err);
    if (rc) {
        firn__metrics_free(m);
        return fail(FIRN_FAULT_CONFIG, rc);
    }
    *out_m = m;
    return FIRN_OK;
}

static firn_rc sync_run(const firn_config *cfg,
                        const firn_sync_options *opts,
                        firn__metrics *metrics,
                        firn_err *err);

/* A run that failed before it read or changed any data (a check of the source, the slot or the
 * publication, a table it could not open) leaves nothing behind: the Iceberg tables and
 * namespaces it created, still empty, and the publication it created are dropped again, so the
 * next run starts from the same place (issue 24 item 10). Best effort: what cannot be dropped
 * is logged. */
static void undo_created(firn__engine *e)
{
    for (size_t i = 0; e->catalog && i < e->n_tables; i++) {
        firn__table *t = e->tables[i];
        if (!t->created || t->commits != 0)
            continue;
        firn_err lerr = {0};
        if (firn_catalog_drop_table(e->catalog, t->ns, t->name, &lerr) != FIRN_OK) {
            FIRN_LOG(FIRN_LOG_WARN, "engine",
                     "table \"%s\" was created by this failed run and could not be dropped "
                     "again: %s",
                     t->display, lerr.msg);
            continue;
        }
        t->created = false;
        if (e->io && t->cat.metadata_location &&
            firn_io_remove(e->io, t->cat.metadata_location, &lerr) != FIRN_OK)
            FIRN_LOG(FIRN_LOG_DEBUG, "engine", "could not remove \"%s\": %s",
                     t->cat.metadata_location, lerr.msg);
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "dropped table \"%s\" again: this run created it and failed before writing to it",
                 t->display);
    }
    for (size_t i = 0; e->catalog && i < e->n_tables; i++) {
        firn__table *t = e->tables[i];
        firn_err lerr = {0};
        if (t->created_ns && !t->created &&
            firn_catalog_drop_namespace(e->catalog, t->ns, &lerr) == FIRN_OK) /* if empty */
            FIRN_LOG(FIRN_LOG_INFO, "engine", "dropped namespace \"%s\" again", t->ns);
        t->created_ns = false;
    }
    if (e->publication_created && e->sql) {
        firn_buf b;
        firn_buf_init(&b, 4096);
        firn_rc_ignore(firn_buf_append_cstr(&b, "DROP PUBLICATION IF EXISTS "));
        firn_rc_ignore(firn_pg_ident_append(&b, e->cfg->source.publication));
        firn_err lerr = {0};
        if (firn_pg_conn_exec(e->sql, (const char *)b.data, &lerr) == FIRN_OK)
            FIRN_LOG(FIRN_LOG_INFO, "engine",
                     "dropped publication \"%s\" again: this run created it and failed before "
                     "using it",
                     e->cfg->source.publication);
        else
            FIRN_LOG(FIRN_LOG_WARN, "engine",
                     "publication \"%s\" was created by this failed run and could not be dropped "
                     "again: %s",
                     e->cfg->source.publication, lerr.msg);
        firn_buf_deinit(&b);
        e->publication_created = false;
    }
}

firn_rc firn_engine_sync(const firn_config *cfg, const firn_sync_options *opts, firn_err *err)
{
    last_fault = FIRN_FAULT_NONE;
    if (firn_source_is_mysql(&cfg->source)) {
        firn_fault where = FIRN_FAULT_NONE;
        firn_rc rc = firn__mysql_sync(cfg, opts, &where, err);
        last_fault = fault_of(rc, err, where);
        return rc;
    }
    firn__metrics *m = NULL;
    firn__metrics_server *srv = NULL;
    FIRN_TRY(start_metrics(cfg, opts, &m, &srv, err));
    firn_rc rc = sync_run(cfg, opts, m, err);
    firn__metrics_server_stop(srv);
    firn__metrics_free(m);
    return rc;
}

static firn_rc sync_run(const firn_config *cfg,
                        const firn_sync_options *opts,
                        firn__metrics *metrics,
                        firn_err *err)
{
    int lock_fd = -1;
    FIRN_TRY(fail(FIRN_FAULT_CONFIG, firn__engine_check_index_dir(&cfg->destination, err)));
    FIRN_TRY(lock_state(cfg, &lock_fd, err));
    firn__engine e;
    int64_t t0 = firn_monotonic_ns();
    firn_rc rc = engine_open(&e, cfg, opts, metrics, err);
    bool cdc = false, backfill = false;
    for (size_t i = 0; rc == FIRN_OK && i < e.n_tables; i++)
        e.started |= e.tables[i]->stream->sync_mode == FIRN_SYNC_INCREMENTAL;
    if (rc == FIRN_OK)
        rc = fail(FIRN_FAULT_SOURCE, firn__incremental_run(&e, err));
    for (size_t i = 0; rc == FIRN_OK && i < e.n_tables; i++) {
        cdc |= e.tables[i]->cdc;
        backfill |= e.tables[i]->needs_backfill;
    }
    if (rc == FIRN_OK && !cdc && opts && opts->follow)
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "--follow: nothing to follow, no selected stream reads changes from the "
                 "replication slot (each is full_refresh or incremental): this run copies them "
                 "once and ends; give a stream sync_mode \"full_refresh_cdc\" or \"cdc\" to "
                 "stream it");
    if (rc == FIRN_OK && cdc)
        rc = run_cdc(&e, err);
    else if (rc == FIRN_OK && backfill) {
        e.started = true;
        rc = backfill_without_slot(&e, err);
    }
    if (rc != FIRN_OK && !e.started)
        undo_created(&e);
    bool stopped = rc == FIRN_OK && e.halt.code; /* a stopped stream outside CDC (no slot) */
    if (rc == FIRN_OK)
        expire_at_end(&e);
    if (rc == FIRN_OK || rc == FIRN_ERR_CANCELLED) {
        refresh_state(&e);
        firn_rc src = firn__engine_save_state(&e, err);
        if (src)
            rc = fail(FIRN_FAULT_NONE, src);
        for (size_t i = 0; i < e.n_tables; i++)
            firn__table_save_index(e.tables[i]); /* the next start reads it instead of the keys */
    }
    if (stopped && rc == FIRN_OK) {
        *err = e.halt; /* the run reports the stream it stopped (exit code 3) */
        rc = fail(FIRN_FAULT_SOURCE, e.halt.code);
    }
    firn__stats_log_replaced(&e);
    if (rc == FIRN_OK || rc == FIRN_ERR_CANCELLED) {
        uint64_t rows = 0;
        for (size_t i = 0; i < e.n_tables; i++)
            rows += e.tables[i]->rows_written;
        FIRN_LOG(FIRN_LOG_INFO, "engine", "sync %s: %zu table%s, %llu row%s written, %.1f s",
                 rc == FIRN_OK ? "finished" : "stopped", e.n_tables, e.n_tables == 1 ? "" : "s",
                 (unsigned long long)rows, rows == 1 ? "" : "s",
                 (double)(firn_monotonic_ns() - t0) / 1e9);
    }
    firn__stats_write(&e,
                      rc == FIRN_OK              ? "finished"
                      : rc == FIRN_ERR_CANCELLED ? "stopped"
                                                 : "failed",
                      true);
    engine_close(&e);
    if (lock_fd >= 0)
        close(lock_fd);
    last_fault = fault_of(rc, err, last_fault);
    return rc;
}

firn_rc firn_engine_check(const firn_config *cfg, firn_err *err)
{
    firn_rc rc = firn__engine_check(cfg, err);
    last_fault = fault_of(rc, err, firn__entry_fault());
    return rc;
}

firn_rc firn_engine_discover(const firn_config *cfg, const char *streams_out_path, firn_err *err)
{
    firn_rc rc = firn__engine_discover(cfg, streams_out_path, err);
    last_fault = fault_of(rc, err, firn__entry_fault());
    return rc;
}

firn_rc firn_engine_maintain(const firn_config *cfg,
                             const firn_maintain_options *o,
                             FILE *out,
                             firn_err *err)
{
    firn_rc rc = firn__engine_maintain(cfg, o, out, err);
    last_fault = rc ? firn__maintain_fault() : FIRN_FAULT_NONE;
    return rc;
}

firn_rc firn_engine_status(const firn_config *cfg, FILE *out, firn_err *err)
{
    firn_rc rc = firn__engine_status(cfg, out, err);
    last_fault = fault_of(rc, err, firn__entry_fault());
    return rc;
}
