/* SPDX-License-Identifier: Apache-2.0 */
/* Incremental sync by a cursor column, for tables or sources without CDC. The first run copies
 * every row (NULL cursors included) up to the largest cursor value at its start; each later run
 * copies the rows whose cursor is at or above the value the table's last incremental snapshot
 * recorded (`firn.cursor`), inside one REPEATABLE READ snapshot. Rows equal to that value are
 * read again only when their count (`firn.cursor-count`) changed, so rows that share the last
 * value but arrived after it was read are not missed. Tables with a key are upserted (a re-read
 * row replaces its earlier image, and NULL-cursor rows are re-read on every run), others
 * appended. The cursor is committed with the rows, so a crash re-reads from the last committed
 * cursor; without one (a table written by OLake), state.json's cursor is the start. */
#include "cfg_int.h"
#include "engine_int.h"

#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUM_CURSOR       "firn.cursor"
#define SUM_CURSOR_FIELD "firn.cursor-field"
#define SUM_CURSOR_COUNT "firn.cursor-count"

/* Where the previous runs got to. */
typedef struct incr_pos {
    bool done;     /* an earlier run copied the table, NULL-cursor rows included */
    char *value;   /* text of the last cursor value read, or NULL */
    char *value2;  /* OLake's "a:b" state: b's value (the lower of both is the start) */
    int64_t count; /* rows whose cursor equalled value when it was read; -1 unknown */
} incr_pos;

/* The cursor at the start of this run, in its snapshot. */
typedef struct incr_max {
    bool null; /* no row has a non-NULL cursor */
    char value[1024];
    char type[64]; /* pg_typeof of the cursor expression */
    int64_t count; /* rows at value */
} incr_max;

static void pos_free(incr_pos *p)
{
    firn_free(p->value);
    firn_free(p->value2);
    memset(p, 0, sizeof(*p));
}

/* The cursor as the streams file gives it: "col" or "col:fallback". */
static void cursor_spec(const firn_stream_config *s, char *out, size_t cap)
{
    if (s->cursor_fallback)
        snprintf(out, cap, "%s:%s", s->cursor_field, s->cursor_fallback);
    else
        snprintf(out, cap, "%s", s->cursor_field);
}

static int64_t parse_count(const char *v)
{
    int64_t n = -1;
    if (!v || firn_parse_i64(v, strlen(v), &n, NULL) != FIRN_OK)
        return -1;
    return n;
}

/* The newest incremental commit of the table's main lineage. Returns false when there is none;
 * true otherwise, with p->done false when it was made for another cursor column (copy again). */
static bool table_position(const firn__table *t, const char *spec, incr_pos *p)
{
    const firn_table_metadata *md = t->cat.metadata;
    const firn_snapshot *s = firn_table_metadata_current_snapshot(md);
    for (; s; s = s->parent_snapshot_id >= 0
                      ? firn_table_metadata_snapshot(md, s->parent_snapshot_id)
                      : NULL) {
        const char *v = firn_props_get(&s->summary, SUM_CURSOR);
        const char *field = firn_props_get(&s->summary, SUM_CURSOR_FIELD);
        if (!v && !field)
            continue;
        if (field && strcmp(field, spec) != 0) {
            FIRN_LOG(FIRN_LOG_WARN, "engine",
                     "table \"%s\": cursor_field changed from \"%s\" to \"%s\": copying every "
                     "row again",
                     t->display, field, spec);
            return true;
        }
        p->done = true;
        p->value = v ? firn_strdup(v) : NULL;
        p->count = parse_count(firn_props_get(&s->summary, SUM_CURSOR_COUNT));
        return true;
    }
    return false;
}

/* A JSON cursor value as SQL literal text (strings as they are, numbers as printed); NULL for
 * null or anything else. */
static char *json_cursor_text(const json_t *v)
{
    char num[64];
    if (json_is_string(v))
        return firn_strdup(json_string_value(v));
    if (json_is_integer(v)) {
        snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
        return firn_strdup(num);
    }
    if (json_is_real(v)) {
        snprintf(num, sizeof(num), "%.17g", json_real_value(v));
        return firn_strdup(num);
    }
    return NULL;
}

/* True when field is spec's "a:b" as "b:a" (OLake's two cursor keys in the other order). */
static bool is_swapped(const char *field, const char *spec)
{
    const char *c1 = strchr(field, ':'), *c2 = strchr(spec, ':');
    if (!c1 || !c2)
        return false;
    size_t a = (size_t)(c1 - field), b = (size_t)(c2 - spec);
    return strlen(c1 + 1) == b && strncmp(c1 + 1, spec, b) == 0 && strlen(c2 + 1) == a &&
           strncmp(c2 + 1, field, a) == 0;
}

/* state.json's cursor (firn's cursor_field/cursor_value, or OLake's {"<column>": value}), used
 * when the table holds no incremental commit: a table OLake wrote goes on where OLake stopped.
 * A state written by firn for a snapshot the table no longer has (the table was dropped) does
 * not count. */
static void state_position(firn__engine *e, const firn__table *t, const char *spec, incr_pos *p)
{
    const firn_stream_state *st =
        firn_state_stream(&e->state, t->stream->namespace, t->stream->name, false);
    if (!st || !st->cursor_field)
        return;
    if (st->snapshot_id && !firn_table_metadata_snapshot(t->cat.metadata, st->snapshot_id))
        return;
    bool swapped = is_swapped(st->cursor_field, spec);
    if (strcmp(st->cursor_field, spec) != 0 && !swapped) {
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "table \"%s\": the state file's cursor is for \"%s\", not \"%s\": copying every "
                 "row",
                 t->display, st->cursor_field, spec);
        return;
    }
    json_error_t jerr;
    json_t *v = st->cursor_value ? json_loads(st->cursor_value, JSON_DECODE_ANY, &jerr) : NULL;
    p->done = true;
    p->count = -1;
    if (json_is_array(v) && json_array_size(v) == 2) {
        p->value = json_cursor_text(json_array_get(v, swapped ? 1 : 0));
        p->value2 = json_cursor_text(json_array_get(v, swapped ? 0 : 1));
    } else {
        p->value = json_cursor_text(v);
    }
    json_decref(v);
    FIRN_LOG(FIRN_LOG_INFO, "engine", "table \"%s\": starting from the state file's cursor %s",
             t->display, st->cursor_value ? st->cursor_value : "null");
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

static firn_rc source_error(const firn__table *t, PGconn *pq, firn_err *err)
{
    return firn_err_set(err, FIRN_ERR_SOURCE, "incremental read of \"%s\" failed: %s",
                        t->pg->qualified, PQerrorMessage(pq));
}

static firn_rc exec_ok(PGconn *pq, const char *sql, const firn__table *t, firn_err *err)
{
    PGresult *r = PQexec(pq, sql);
    ExecStatusType st = PQresultStatus(r);
    firn_rc rc = FIRN_OK;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_COPY_OUT)
        rc = source_error(t, pq, err);
    PQclear(r);
    return rc;
}

/* Runs a query returning one row; copies up to three of its columns into outs ("" for NULL,
 * null[i] set). */
static firn_rc query_row(PGconn *pq,
                         const char *sql,
                         const firn__table *t,
                         char *outs[],
                         const size_t caps[],
                         bool nulls[],
                         int n,
                         firn_err *err)
{
    PGresult *r = PQexec(pq, sql);
    firn_rc rc = FIRN_OK;
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 || PQnfields(r) < n)
        rc = source_error(t, pq, err);
    for (int i = 0; rc == FIRN_OK && i < n; i++) {
        nulls[i] = PQgetisnull(r, 0, i);
        const char *v = PQgetvalue(r, 0, i);
        if (strlen(v) >= caps[i])
            rc = firn_err_set(err, FIRN_ERR_TOO_LARGE,
                              "cursor value of \"%s\" is longer than %zu bytes", t->pg->qualified,
                              caps[i] - 1);
        else
            snprintf(outs[i], caps[i], "%s", v);
    }
    PQclear(r);
    return rc;
}

static firn_rc count_where(PGconn *pq,
                           const firn__table *t,
                           const char *expr,
                           const char *cond,
                           int64_t *out,
                           firn_err *err)
{
    char buf[32];
    char *outs[1] = {buf};
    size_t caps[1] = {sizeof(buf)};
    bool nulls[1];
    firn_buf sql;
    firn_buf_init(&sql, 1 << 20);
    firn_rc rc =
        firn_buf_appendf(&sql, "SELECT count(*) FROM %s WHERE %s %s", t->pg->qualified, expr, cond);
    if (rc == FIRN_OK && t->pg->filter) /* the rows the run copies: docs/configuration.md */
        rc = firn_buf_appendf(&sql, " AND (%s)", t->pg->filter);
    if (rc == FIRN_OK)
        rc = query_row(pq, (const char *)sql.data, t, outs, caps, nulls, 1, err);
    firn_buf_deinit(&sql);
    *out = rc == FIRN_OK ? parse_count(buf) : -1;
    return rc;
}

/* The largest cursor value now among the rows the run copies (the stream's filter applies: a
 * row it leaves out must not move the cursor past rows it copies), its type and how many of
 * those rows hold it. */
static firn_rc
read_max(PGconn *pq, const firn__table *t, const char *expr, incr_max *m, firn_err *err)
{
    char count[32];
    char *outs[3] = {m->value, m->type, count};
    size_t caps[3] = {sizeof(m->value), sizeof(m->type), sizeof(count)};
    bool nulls[3];
    const char *f = t->pg->filter;
    firn_buf sql;
    firn_buf_init(&sql, 1 << 20);
    firn_rc rc =
        firn_buf_appendf(&sql,
                         "SELECT m::text, pg_typeof(m)::text, (SELECT count(*) FROM %s "
                         "WHERE %s = s.m%s%s%s) FROM (SELECT max(%s) AS m FROM %s%s%s%s) s",
                         t->pg->qualified, expr, f ? " AND (" : "", f ? f : "", f ? ")" : "", expr,
                         t->pg->qualified, f ? " WHERE (" : "", f ? f : "", f ? ")" : "");
    if (rc == FIRN_OK)
        rc = query_row(pq, (const char *)sql.data, t, outs, caps, nulls, 3, err);
    firn_buf_deinit(&sql);
    m->null = rc == FIRN_OK && nulls[0];
    m->count = parse_count(count);
    return rc;
}

/* OLake's "a:b" state holds both columns' maximums: start from the lower one (rows of either
 * column at or above it are read again; the key upsert folds them). */
static firn_rc
merge_olake_pair(PGconn *pq, const firn__table *t, const incr_max *m, incr_pos *p, firn_err *err)
{
    if (!p->value2)
        return FIRN_OK;
    if (!p->value) {
        p->value = p->value2;
        p->value2 = NULL;
        return FIRN_OK;
    }
    char *a = PQescapeLiteral(pq, p->value, strlen(p->value));
    char *b = PQescapeLiteral(pq, p->value2, strlen(p->value2));
    char low[1024];
    char *outs[1] = {low};
    size_t caps[1] = {sizeof(low)};
    bool nulls[1];
    firn_buf sql;
    firn_buf_init(&sql, 1 << 16);
    firn_rc rc = firn_buf_appendf(&sql, "SELECT least(%s::%s, %s::%s)::text", a ? a : "NULL",
                                  m->type, b ? b : "NULL", m->type);
    if (rc == FIRN_OK)
        rc = query_row(pq, (const char *)sql.data, t, outs, caps, nulls, 1, err);
    if (rc == FIRN_OK) {
        firn_free(p->value);
        p->value = firn_strdup(low);
    }
    firn_buf_deinit(&sql);
    PQfreemem(a);
    PQfreemem(b);
    return rc;
}

/* The WHERE condition of this run's copy. */
static firn_rc build_where(PGconn *pq,
                           const firn__table *t,
                           const char *expr,
                           const incr_pos *p,
                           const incr_max *m,
                           firn_buf *out,
                           firn_err *err)
{
    firn_rc rc = FIRN_OK;
    const char *op = ">=";
    if (p->done && p->value && p->count >= 0) {
        char *lit = PQescapeLiteral(pq, p->value, strlen(p->value));
        char cond[1100];
        snprintf(cond, sizeof(cond), "= %s", lit ? lit : "NULL");
        PQfreemem(lit);
        int64_t now = -1;
        FIRN_TRY(count_where(pq, t, expr, cond, &now, err));
        if (now == p->count)
            op = ">"; /* no row joined the last value since it was read */
    }
    char *maxlit = m->null ? NULL : PQescapeLiteral(pq, m->value, strlen(m->value));
    char *lit = p->done && p->value ? PQescapeLiteral(pq, p->value, strlen(p->value)) : NULL;
    if (m->null)
        rc = firn_buf_append_cstr(out, "(false");
    else
        rc = firn_buf_appendf(out, "(%s <= %s", expr, maxlit ? maxlit : "NULL");
    if (rc == FIRN_OK && lit)
        rc = firn_buf_appendf(out, " AND %s %s %s", expr, op, lit);
    if (rc == FIRN_OK)
        rc = firn_buf_append_cstr(out, ")");
    /* NULL cursors: every row in the first run, and on every run where the key folds them. */
    if (rc == FIRN_OK && (!p->done || t->upsert))
        rc = firn_buf_appendf(out, " OR %s IS NULL", expr);
    PQfreemem(maxlit);
    PQfreemem(lit);
    return rc;
}

/* Streams the COPY into the table's buffer, flushing (without moving the cursor) whenever the
 * buffer passes the commit size before another row arrives, so the last rows stay buffered for
 * the commit that records the cursor. */
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
            rc = source_error(t, pq, err);
            break;
        }
        /* A 2-byte message is the binary COPY trailer: no row follows. */
        if (n > 2 && firn_batch_bytes(t->buf) >= max_bytes)
            rc = firn__table_flush(t, 0, err);
        if (rc == FIRN_OK)
            rc = firn_pg_copy_feed(d, (const uint8_t *)data, (size_t)n, 0, err);
        PQfreemem(data);
        if (rc)
            break;
    }
    if (rc == FIRN_OK)
        rc = firn_pg_copy_finish(d, err);
    PGresult *r;
    while ((r = PQgetResult(pq)) != NULL) {
        if (rc == FIRN_OK && PQresultStatus(r) != PGRES_COMMAND_OK)
            rc = source_error(t, pq, err);
        PQclear(r);
    }
    firn_pg_copy_free(d);
    return rc;
}

/* Records the cursor in the state file's entry: integers as JSON numbers (as OLake writes
 * them), everything else as the string PostgreSQL prints, which reads back exactly. */
static void note_state(
    firn__engine *e, const firn__table *t, const char *spec, const char *value, const char *type)
{
    firn_stream_state *st =
        firn_state_stream(&e->state, t->stream->namespace, t->stream->name, true);
    firn_free(st->cursor_field);
    firn_free(st->cursor_value);
    st->cursor_field = firn_strdup(spec);
    bool integer = strcmp(type, "smallint") == 0 || strcmp(type, "integer") == 0 ||
                   strcmp(type, "bigint") == 0;
    int64_t n = 0;
    json_t *v = !value ? json_null()
                : integer && firn_parse_i64(value, strlen(value), &n, NULL) == FIRN_OK
                    ? json_integer((json_int_t)n)
                    : json_string(value);
    char *text = firn__cfg_json_text(v, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(v);
    st->cursor_value = text ? text : firn_strdup("null");
}

/* Commits what is buffered together with the new cursor (an empty commit when no row arrived
 * is skipped: the cursor did not move). */
static firn_rc
commit_cursor(firn__table *t, const char *spec, const char *value, int64_t count, firn_err *err)
{
    if (firn_batch_rows(t->buf) == 0)
        return FIRN_OK;
    firn_summary extra;
    firn_summary_init(&extra);
    firn_summary_set(&extra, SUM_CURSOR_FIELD, spec);
    if (value)
        firn_summary_set(&extra, SUM_CURSOR, value);
    if (value && count >= 0)
        firn_summary_set_i64(&extra, SUM_CURSOR_COUNT, count);
    firn_rc rc = firn__table_flush_extra(t, 0, &extra, err);
    firn_summary_deinit(&extra);
    return rc;
}

/* Keyless tables do not read NULL-cursor rows again after the first run (each read would
 * append them once more): say how many there are. */
static firn_rc warn_nulls(PGconn *pq, const firn__table *t, const char *expr, firn_err *err)
{
    int64_t n = 0;
    FIRN_TRY(count_where(pq, t, expr, "IS NULL", &n, err));
    if (n > 0)
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "table \"%s\": %lld rows have a NULL cursor; a table without a key copies them "
                 "in its first run only, so later changes to them are not copied (make the "
                 "cursor NOT NULL, give it a fallback column \"%s:<column>\", or set a "
                 "primary_key)",
                 t->display, (long long)n, t->stream->cursor_field);
    return FIRN_OK;
}

/* One run inside the open snapshot: read the maximum, copy the rows, commit with the cursor. */
static firn_rc copy_table(
    firn__engine *e, firn__table *t, const char *spec, const char *expr, incr_pos *p, firn_err *err)
{
    PGconn *pq = firn_pg_conn_pq(e->sql);
    incr_max m = {0};
    firn_buf sql, cols;
    firn_buf_init(&sql, 1 << 20);
    firn_buf_init(&cols, 1 << 20);
    firn_rc rc = read_max(pq, t, expr, &m, err);
    if (rc == FIRN_OK)
        rc = merge_olake_pair(pq, t, &m, p, err);
    if (rc == FIRN_OK && p->done && !t->upsert)
        rc = warn_nulls(pq, t, expr, err);
    if (rc == FIRN_OK)
        rc = firn_pg_copy_select_list(t->pg, &cols);
    if (rc == FIRN_OK)
        rc = firn_buf_appendf(&sql, "COPY (SELECT %s FROM %s WHERE (", (char *)cols.data,
                              t->pg->qualified);
    if (rc == FIRN_OK)
        rc = build_where(pq, t, expr, p, &m, &sql, err);
    if (rc == FIRN_OK && t->pg->filter) /* the stream's filter: docs/configuration.md */
        rc = firn_buf_appendf(&sql, ") AND (%s", t->pg->filter);
    if (rc == FIRN_OK)
        rc = firn_buf_append_cstr(&sql, ")");
    if (rc == FIRN_OK)
        rc = firn_buf_append_cstr(&sql, ") TO STDOUT (FORMAT binary)");
    if (rc == FIRN_OK)
        rc = exec_ok(pq, (const char *)sql.data, t, err);
    if (rc == FIRN_OK)
        rc = copy_rows(t, pq, e->cfg->destination.commit.max_bytes, err);
    /* The cursor stays where it was when every row now has a NULL one. */
    const char *value = m.null ? p->value : m.value;
    if (rc == FIRN_OK)
        rc = commit_cursor(t, spec, value, m.null ? -1 : m.count, err);
    if (rc == FIRN_OK) {
        note_state(e, t, spec, value, m.type);
        FIRN_LOG(FIRN_LOG_INFO, "engine", "table \"%s\": incremental run up to cursor %s",
                 t->display, value ? value : "(none)");
    }
    firn_buf_deinit(&cols);
    firn_buf_deinit(&sql);
    return rc;
}

static firn_rc run_table(firn__engine *e, firn__table *t, firn_err *err)
{
    PGconn *pq = firn_pg_conn_pq(e->sql);
    char spec[1024];
    cursor_spec(t->stream, spec, sizeof(spec));
    incr_pos p = {.count = -1};
    if (!table_position(t, spec, &p))
        state_position(e, t, spec, &p);
    firn_buf expr;
    firn_buf_init(&expr, 4096);
    firn_rc rc = cursor_expr(pq, t->stream, &expr, err);
    /* Fixed output styles: the cursor text read back in the next run (and written into
     * state.json) must not depend on the server's or the role's settings. */
    if (rc == FIRN_OK)
        rc = exec_ok(pq,
                     "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; SET LOCAL DateStyle = "
                     "'ISO, YMD'; SET LOCAL TimeZone = 'UTC'; SET LOCAL IntervalStyle = "
                     "'postgres'; SET LOCAL extra_float_digits = 3",
                     t, err);
    if (rc == FIRN_OK)
        rc = copy_table(e, t, spec, (const char *)expr.data, &p, err);
    firn_rc end = exec_ok(pq, rc ? "ROLLBACK" : "COMMIT", t, rc ? NULL : err);
    if (rc == FIRN_OK)
        rc = end;
    pos_free(&p);
    firn_buf_deinit(&expr);
    return rc;
}

firn_rc firn__incremental_run(firn__engine *e, firn_err *err)
{
    for (size_t i = 0; i < e->n_tables; i++) {
        firn__table *t = e->tables[i];
        if (t->stream->sync_mode != FIRN_SYNC_INCREMENTAL || t->halted)
            continue; /* a stopped stream (its source table is missing) copies nothing */
        if (!t->stream->cursor_field)
            return firn_err_set(err, FIRN_ERR_CONFIG,
                                "stream \"%s.%s\" is incremental but has no cursor_field",
                                t->stream->namespace, t->stream->name);
        FIRN_TRY(run_table(e, t, err));
    }
    return FIRN_OK;
}
