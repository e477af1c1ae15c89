/* SPDX-License-Identifier: Apache-2.0 */
/* Incremental sync by a cursor column, for tables or sources without CDC: each run copies the
 * rows whose cursor is above the value the table's last snapshot recorded (`firn.cursor`), up to
 * the largest value at the start of the run, inside one REPEATABLE READ snapshot. Tables with a
 * key are upserted (a re-read row replaces its earlier image), others appended. The cursor value
 * is committed with the rows, so a crash re-reads from the last committed cursor. */
#include "engine_int.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <string.h>

#define FIRN_SUMMARY_CURSOR "firn.cursor"

/* The newest firn.cursor of the table's main lineage, or NULL (borrowed from the metadata). */
static const char *committed_cursor(const firn__table *t)
{
    const firn_table_metadata *md = t->cat.metadata;
    const firn_snapshot *s = firn_table_metadata_current_snapshot(md);
    while (s) {
        const char *v = firn_props_get(&s->summary, FIRN_SUMMARY_CURSOR);
        if (v)
            return v;
        s = s->parent_snapshot_id >= 0 ? firn_table_metadata_snapshot(md, s->parent_snapshot_id)
                                       : NULL;
    }
    return NULL;
}

/* The cursor expression: the column, or coalesce(column, fallback). */
static firn_rc cursor_expr(PGconn *pq, const firn_stream_config *s, firn_buf *out, firn_err *err)
{
    char *col = PQescapeIdentifier(pq, s->cursor_field, strlen(s->cursor_field));
    char *fb = s->cursor_fallback
                   ? PQescapeIdentifier(pq, s->cursor_fallback, strlen(s->cursor_fallback))
                   : NULL;
    firn_rc rc = FIRN_OK;
    if (!col || (s->cursor_fallback && !fb))
        rc = firn_err_set(err, FIRN_ERR_CONFIG, "invalid cursor column of stream \"%s.%s\"",
                          s->namespace, s->name);
    else if (fb)
        rc = firn_buf_appendf(out, "coalesce(%s, %s)", col, fb);
    else
        rc = firn_buf_append_cstr(out, col);
    PQfreemem(col);
    PQfreemem(fb);
    return rc;
}

static firn_rc exec_ok(PGconn *pq, const char *sql, const firn__table *t, firn_err *err)
{
    PGresult *r = PQexec(pq, sql);
    ExecStatusType st = PQresultStatus(r);
    firn_rc rc = FIRN_OK;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_COPY_OUT)
        rc = firn_err_set(err, FIRN_ERR_SOURCE, "incremental read of \"%s\" failed: %s",
                          t->pg->qualified, PQerrorMessage(pq));
    PQclear(r);
    return rc;
}

/* Streams the COPY into the table's buffer, flushing (without moving the cursor) whenever the
 * buffer passes the commit size. */
static firn_rc copy_rows(firn__table *t, PGconn *pq, uint64_t max_bytes, firn_err *err)
{
    firn_pg_copy *d = firn_pg_copy_new(t->pg, t->buf);
    firn_rc rc = FIRN_OK;
    for (;;) {
        char *data = NULL;
        int n = PQgetCopyData(pq, &data, 0);
        if (n == -1)
            break;
        if (n < 0) {
            rc = firn_err_set(err, FIRN_ERR_SOURCE, "incremental read of \"%s\" failed: %s",
                              t->pg->qualified, PQerrorMessage(pq));
            break;
        }
        rc = firn_pg_copy_feed(d, (const uint8_t *)data, (size_t)n, 0, err);
        PQfreemem(data);
        if (rc == FIRN_OK && firn_batch_bytes(t->buf) >= max_bytes)
            rc = firn__table_flush(t, 0, err);
        if (rc)
            break;
    }
    if (rc == FIRN_OK)
        rc = firn_pg_copy_finish(d, err);
    PGresult *r;
    while ((r = PQgetResult(pq)) != NULL) {
        if (rc == FIRN_OK && PQresultStatus(r) != PGRES_COMMAND_OK)
            rc = firn_err_set(err, FIRN_ERR_SOURCE, "incremental read of \"%s\" failed: %s",
                              t->pg->qualified, PQerrorMessage(pq));
        PQclear(r);
    }
    firn_pg_copy_free(d);
    return rc;
}

/* Commits what is buffered together with the new cursor value (an empty commit when no row
 * arrived is skipped: the cursor did not move). */
static firn_rc commit_cursor(firn__table *t, const char *cursor, firn_err *err)
{
    if (firn_batch_rows(t->buf) == 0)
        return FIRN_OK;
    firn_summary extra;
    firn_summary_init(&extra);
    firn_summary_set(&extra, FIRN_SUMMARY_CURSOR, cursor);
    firn_rc rc = firn__table_flush_extra(t, 0, &extra, err);
    firn_summary_deinit(&extra);
    return rc;
}

static firn_rc run_table(firn__engine *e, firn__table *t, firn_err *err)
{
    PGconn *pq = firn_pg_conn_pq(e->sql);
    const char *last = committed_cursor(t);
    firn_buf expr, sql, cols;
    firn_buf_init(&expr, 4096);
    firn_buf_init(&sql, 1 << 20);
    firn_buf_init(&cols, 1 << 20);
    char *lit = NULL;
    char max[1024] = "";
    firn_rc rc = cursor_expr(pq, t->stream, &expr, err);
    if (rc == FIRN_OK)
        rc = exec_ok(pq, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", t, err);
    if (rc == FIRN_OK) {
        firn_rc_ignore(firn_buf_appendf(&sql, "SELECT max(%s)::text FROM %s", (char *)expr.data,
                                        t->pg->qualified));
        rc = firn_pg_conn_query_value(e->sql, (const char *)sql.data, max, sizeof(max), err);
    }
    if (rc == FIRN_OK && max[0] != '\0' && (!last || strcmp(last, max) != 0)) {
        char *maxlit = PQescapeLiteral(pq, max, strlen(max));
        lit = last ? PQescapeLiteral(pq, last, strlen(last)) : NULL;
        firn_buf_reset(&sql);
        rc = firn_pg_copy_select_list(t->pg, &cols);
        if (rc == FIRN_OK)
            rc = firn_buf_appendf(&sql, "COPY (SELECT %s FROM %s WHERE %s <= %s", (char *)cols.data,
                                  t->pg->qualified, (char *)expr.data, maxlit);
        if (rc == FIRN_OK && lit)
            rc = firn_buf_appendf(&sql, " AND %s > %s", (char *)expr.data, lit);
        if (rc == FIRN_OK)
            rc = firn_buf_append_cstr(&sql, ") TO STDOUT (FORMAT binary)");
        PQfreemem(maxlit);
        if (rc == FIRN_OK)
            rc = exec_ok(pq, (const char *)sql.data, t, err);
        if (rc == FIRN_OK)
            rc = copy_rows(t, pq, e->cfg->destination.commit.max_bytes, err);
        if (rc == FIRN_OK)
            rc = commit_cursor(t, max, err);
        if (rc == FIRN_OK)
            FIRN_LOG(FIRN_LOG_INFO, "engine", "table \"%s\": incremental run up to cursor %s",
                     t->display, max);
    }
    firn_rc end = exec_ok(pq, rc ? "ROLLBACK" : "COMMIT", t, rc ? NULL : err);
    if (rc == FIRN_OK)
        rc = end;
    if (rc == FIRN_OK)
        firn__engine_note_commit(e, t);
    PQfreemem(lit);
    firn_buf_deinit(&cols);
    firn_buf_deinit(&sql);
    firn_buf_deinit(&expr);
    return rc;
}

firn_rc firn__incremental_run(firn__engine *e, firn_err *err)
{
    for (size_t i = 0; i < e->n_tables; i++) {
        firn__table *t = e->tables[i];
        if (t->stream->sync_mode != FIRN_SYNC_INCREMENTAL)
            continue;
        if (!t->stream->cursor_field)
            return firn_err_set(err, FIRN_ERR_CONFIG,
                                "stream \"%s.%s\" is incremental but has no cursor_field",
                                t->stream->namespace, t->stream->name);
        FIRN_TRY(run_table(e, t, err));
    }
    return FIRN_OK;
}
