/* SPDX-License-Identifier: Apache-2.0 */
/* Shared helpers of the pgoutput integration tests: SQL on a normal connection, a stream on
 * a fresh slot and publication, and draining events into a text transcript. */
#ifndef FIRN_PGO_ITEST_H
#define FIRN_PGO_ITEST_H

#include "firn/pgoutput.h"
#include "source/pg/pgo_stream_int.h"
#include "t.h"

#include <libpq-fe.h>

static inline PGconn *it_connect(void)
{
    const char *uri = getenv("FIRN_TEST_PGURI");
    if (!uri)
        T_SKIP("FIRN_TEST_PGURI is not set; run through tests/harness/pg_cluster.sh");
    PGconn *c = PQconnectdb(uri);
    if (PQstatus(c) != CONNECTION_OK)
        T_FAIL("could not connect: %s", PQerrorMessage(c));
    return c;
}

/* Runs one or more statements; fails the test on error. */
static inline void it_sql(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        T_FAIL("%s: %s", sql, PQerrorMessage(c));
    PQclear(r);
}

/* Runs a query returning one value; returns an owned copy. */
static inline char *it_value(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) < 1)
        T_FAIL("%s: %s", sql, PQerrorMessage(c));
    char *v = firn_strdup(PQgetisnull(r, 0, 0) ? "" : PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

/* Appends every received message to $FIRN_PGO_CAPTURE_DIR/<slot>.stream as "u8 flags (fuzz
 * target layout), u32 length, bytes" (refreshes tests/data/pgoutput). */
static inline void it_capture(void *ctx, const firn_pgo_proto_opts *o, const uint8_t *p, size_t len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s.stream", getenv("FIRN_PGO_CAPTURE_DIR"), (const char *)ctx);
    FILE *f = fopen(path, "ab");
    if (!f)
        T_FAIL("cannot open %s", path);
    const uint8_t hdr[5] = {(uint8_t)((o->proto_version - 1) | (o->in_stream ? 4 : 0)),
                            (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
                            (uint8_t)len};
    fwrite(hdr, 1, 5, f);
    fwrite(p, 1, len, f);
    fclose(f);
}

static inline firn_pgo_stream *
it_open(const char *slot, const char *const *pubs, size_t n_pubs, bool text, size_t budget)
{
    firn_pgo_config cfg = {0};
    cfg.conninfo = getenv("FIRN_TEST_PGURI");
    cfg.slot_name = slot;
    cfg.publications = pubs;
    cfg.n_publications = n_pubs;
    cfg.text_values = text;
    cfg.mem_budget_bytes = budget;
    cfg.status_interval_ms = 200;
    firn_pgo_stream *s = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_pgo_stream_open(&cfg, &s, &err), &err);
    if (getenv("FIRN_PGO_CAPTURE_DIR"))
        firn__pgo_stream_set_capture(s, it_capture, (void *)slot);
    return s;
}

static inline void it_render_tuple(firn_buf *o, const firn_pgo_tuple *t)
{
    T_OK(firn_buf_append_cstr(o, "("));
    for (uint16_t i = 0; i < t->n_cols; i++) {
        const firn_pgo_col *c = &t->cols[i];
        if (i)
            T_OK(firn_buf_append_cstr(o, ","));
        if (c->kind == 't' && c->value.len > 64) {
            T_OK(firn_buf_appendf(o, "len%zu:%.8s", c->value.len, (const char *)c->value.ptr));
        } else if (c->kind == 't') {
            T_OK(firn_buf_appendf(o, "%.*s", (int)c->value.len, (const char *)c->value.ptr));
        } else if (c->kind == 'b') {
            T_OK(firn_buf_append_cstr(o, "x"));
            for (size_t k = 0; k < c->value.len && k < 16; k++)
                T_OK(firn_buf_appendf(o, "%02x", c->value.ptr[k]));
        } else {
            T_OK(firn_buf_appendf(o, "%c", c->kind));
        }
    }
    T_OK(firn_buf_append_cstr(o, ")"));
}

/* Whether b holds line ("\nR ...\n") as one of its lines. */
static inline bool it_holds_line(const firn_buf *b, const char *line)
{
    const char *d = b->len ? (const char *)b->data : "";
    return strncmp(d, line + 1, strlen(line + 1)) == 0 || strstr(d, line) != NULL;
}

/* Appends one line for ev to o (the transcript so far is before, then o; before NULL: every
 * Relation message is rendered); checks transaction positions are consistent. */
static inline void it_render(firn_buf *o, const firn_buf *before, const firn_pgo_event *ev)
{
    const firn_pgo_msg *m = ev->msg;
    switch (ev->type) {
    case FIRN_PGO_BEGIN:
        T_TRUE(ev->commit_lsn != 0);
        T_OK(firn_buf_append_cstr(o, ev->streamed ? "B streamed\n" : "B\n"));
        break;
    case FIRN_PGO_COMMIT:
        T_TRUE(ev->end_lsn > ev->commit_lsn);
        T_EQ_UINT(m->commit.commit_lsn, ev->commit_lsn);
        T_OK(firn_buf_append_cstr(o, "C\n"));
        break;
    case FIRN_PGO_RELATION: {
        /* PostgreSQL sends a Relation message again, unchanged, whenever its relcache entry was
         * invalidated (an autovacuum or autoanalyze of the table, a TRUNCATE). A resend of a line
         * the transcript already holds is left out, so transcripts do not depend on when
         * autovacuum runs. */
        firn_buf line;
        firn_buf_init(&line, 4096);
        T_OK(firn_buf_appendf(&line, "\nR %s.%s", ev->rel->nspname, ev->rel->relname));
        for (uint16_t i = 0; i < ev->rel->n_cols; i++)
            T_OK(firn_buf_appendf(&line, " %s%s:%u", ev->rel->cols[i].flags & 1 ? "*" : "",
                                  ev->rel->cols[i].name, (unsigned)ev->rel->cols[i].type_oid));
        T_OK(firn_buf_append_cstr(&line, ev->prev_rel ? " changed\n" : "\n"));
        const char *l = (const char *)line.data;
        if (!before || ev->prev_rel || !(it_holds_line(before, l) || it_holds_line(o, l)))
            T_OK(firn_buf_append_cstr(o, l + 1));
        firn_buf_deinit(&line);
        break;
    }
    case FIRN_PGO_INSERT:
    case FIRN_PGO_UPDATE:
    case FIRN_PGO_DELETE:
        T_OK(firn_buf_appendf(o, "%c %s ", ev->type, ev->rel->relname));
        if (m->change.old_kind) {
            T_OK(firn_buf_appendf(o, "%c", m->change.old_kind));
            it_render_tuple(o, &m->change.old_tuple);
        }
        if (ev->type != FIRN_PGO_DELETE)
            it_render_tuple(o, &m->change.new_tuple);
        T_OK(firn_buf_append_cstr(o, "\n"));
        break;
    case FIRN_PGO_TRUNCATE:
        T_OK(firn_buf_appendf(o, "T n=%u opt=%u\n", (unsigned)m->truncate.n_relids,
                              (unsigned)m->truncate.options));
        break;
    default:
        T_OK(firn_buf_appendf(o, "%c\n", ev->type));
        break;
    }
}

/* Inserts a marker row into it_marker (which every publication covers) and drains events
 * until its transaction commits, confirming each commit. Every event but the marker's own
 * transaction is rendered into out; fn (may be NULL) sees each event first. */
typedef void (*it_event_fn)(void *ctx, firn_pgo_event *ev);

static inline void it_drain(firn_pgo_stream *s, PGconn *c, firn_buf *out, it_event_fn fn, void *ctx)
{
    it_sql(c, "INSERT INTO it_marker VALUES (DEFAULT)");
    const int64_t deadline = firn_monotonic_ns() + INT64_C(60) * 1000000000;
    firn_buf txn;
    firn_buf_init(&txn, 1 << 26);
    bool marker = false;
    for (;;) {
        if (firn_monotonic_ns() > deadline)
            T_FAIL("no marker after 60 s; so far:\n%s%s", out->data ? (char *)out->data : "",
                   txn.data ? (char *)txn.data : "");
        firn_pgo_event ev;
        firn_err err = {0};
        T_OK_ERR(firn_pgo_stream_next(s, 500, &ev, &err), &err);
        if (ev.type == 0)
            continue;
        if (fn)
            fn(ctx, &ev);
        if (ev.type == FIRN_PGO_RELATION && strcmp(ev.rel->relname, "it_marker") == 0)
            continue;
        if (ev.type == FIRN_PGO_INSERT && strcmp(ev.rel->relname, "it_marker") == 0) {
            marker = true;
            continue;
        }
        it_render(&txn, out, &ev);
        if (ev.type == FIRN_PGO_COMMIT) {
            firn_pgo_stream_confirm(s, ev.end_lsn);
            if (marker)
                break;
            T_OK(firn_buf_append(out, txn.data, txn.len));
            firn_buf_reset(&txn);
        }
    }
    firn_buf_deinit(&txn);
}

static inline const char *it_text(const firn_buf *b)
{
    return b->data ? (const char *)b->data : "";
}

#endif
