/* SPDX-License-Identifier: Apache-2.0 */
/* The replication connection: connect with replication=database and fixed session settings,
 * create the slot with an exported snapshot, START_REPLICATION with pgoutput options chosen by
 * server version, and the engine's side of the CopyData stream: the messages the receiver
 * thread (pgo_recv.c: keepalive answers, standby status updates; after postgres
 * src/bin/pg_basebackup/pg_recvlogical.c) queued, decoded in order. Preflight: pgo_check.c. */
#include "pg_int.h"
#include "pgo_stream_int.h"

#include <errno.h>
#include <libpq-fe.h>
#include <string.h>

/* Session settings that change how values are sent (text output of dates, times, intervals,
 * floats, bytea and money; the encoding of all text): the formats firn_pg_value_decode_text
 * parses. */
#define PGO_SESSION_OPTIONS                                                                        \
    "-c datestyle=ISO,YMD -c timezone=UTC -c intervalstyle=iso_8601 -c extra_float_digits=3 "      \
    "-c bytea_output=hex -c lc_monetary=C"

#define PGO_DEFAULT_STATUS_INTERVAL_MS 10000

void firn__pgo_lsn_format(uint64_t lsn, char out[24])
{
    snprintf(out, 24, "%X/%X", (unsigned)(lsn >> 32), (unsigned)lsn);
}

firn_rc firn__pgo_lsn_parse(const char *s, uint64_t *out, firn_err *err)
{
    const char *slash = strchr(s, '/');
    uint64_t hi = 0, lo = 0;
    size_t nh = slash ? (size_t)(slash - s) : 0;
    bool ok = slash && nh > 0 && nh <= 8 && slash[1] && strlen(slash + 1) <= 8;
    for (size_t i = 0; ok && s[i]; i++) {
        const char c = s[i];
        if (i == nh)
            continue;
        const int v = (c >= '0' && c <= '9')   ? c - '0'
                      : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                      : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                               : -1;
        if (v < 0) {
            ok = false;
            break;
        }
        if (i < nh)
            hi = hi * 16 + (uint64_t)v;
        else
            lo = lo * 16 + (uint64_t)v;
    }
    if (!ok)
        return firn_err_set(err, FIRN_ERR_PARSE, "invalid LSN \"%s\"", s);
    *out = hi << 32 | lo;
    return FIRN_OK;
}

/* Sets err from a failed result: the server's primary message, classified. */
firn_rc firn__pgo_result_error(const PGresult *res, PGconn *conn, const char *what, firn_err *err)
{
    const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    firn_rc rc = FIRN_ERR_SOURCE;
    if (!msg) {
        msg = PQerrorMessage(conn);
        if (PQstatus(conn) == CONNECTION_BAD)
            rc = FIRN_ERR_NETWORK;
    }
    if (state && strcmp(state, "42704") == 0)
        rc = FIRN_ERR_NOT_FOUND; /* undefined_object: slot or publication */
    else if (state && (strcmp(state, "55006") == 0 || strncmp(state, "57P", 3) == 0))
        rc = FIRN_ERR_UNAVAILABLE; /* slot active (object_in_use), server shutting down */
    else if (state && strncmp(state, "08", 2) == 0)
        rc = FIRN_ERR_NETWORK; /* connection_exception */
    else if (state && strcmp(state, "42710") == 0)
        rc = FIRN_ERR_EXISTS;
    else if (state && strncmp(state, "42501", 5) == 0)
        rc = FIRN_ERR_PERMISSION;
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        n--;
    return firn_err_set(err, rc, "could not %s: %.*s", what, (int)n, msg);
}

static firn_rc connect_error(PGconn *conn, firn_err *err)
{
    const char *msg = conn ? PQerrorMessage(conn) : "out of memory";
    firn_rc rc = FIRN_ERR_NETWORK;
    if (conn && (PQconnectionNeedsPassword(conn) || strstr(msg, "authentication failed") ||
                 strstr(msg, "password")))
        rc = FIRN_ERR_AUTH;
    else if (strstr(msg, "no pg_hba.conf entry") || strstr(msg, "must have replication") ||
             strstr(msg, "permission denied"))
        rc = FIRN_ERR_PERMISSION;
    if (conn && strstr(msg, "replication role to start walsender")) { /* no REPLICATION */
        char role[FIRN_PG_QUOTED_MAX];
        return firn_err_set(err, FIRN_ERR_PERMISSION,
                            "role \"%s\" lacks the REPLICATION attribute; have a superuser run "
                            "ALTER ROLE %s REPLICATION",
                            PQuser(conn), firn_pg_ident_text(role, sizeof(role), PQuser(conn)));
    }
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        n--;
    return firn_err_set(err, rc, "could not open replication connection: %.*s", (int)n, msg);
}

firn_rc firn_pgo_stream_open(const firn_pgo_config *cfg, firn_pgo_stream **out, firn_err *err)
{
    *out = NULL;
    if (!cfg->conninfo || !cfg->slot_name || cfg->n_publications == 0)
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "replication needs a connection string, a slot and a publication");
    /* Keepalives first: the conninfo's own settings override them (pg_conn.c). */
    const char *keys[FIRN_PG_KEEPALIVE_N + 6], *vals[FIRN_PG_KEEPALIVE_N + 6];
    size_t n = 0;
    for (; n < FIRN_PG_KEEPALIVE_N; n++) {
        keys[n] = firn__pg_keepalive_keys[n];
        vals[n] = firn__pg_keepalive_values[n];
    }
    const char *k2[] = {"application_name", "dbname", "replication", "options", "client_encoding"};
    const char *v2[] = {"firn", cfg->conninfo, "database", PGO_SESSION_OPTIONS, "UTF8"};
    for (size_t i = 0; i < 5; i++, n++) {
        keys[n] = k2[i];
        vals[n] = v2[i];
    }
    keys[n] = vals[n] = NULL;
    PGconn *conn = PQconnectdbParams(keys, vals, 1);
    if (!conn || PQstatus(conn) != CONNECTION_OK) {
        firn_rc rc = connect_error(conn, err);
        PQfinish(conn);
        return rc;
    }
    firn__pg_route_notices(conn);
    firn_pgo_stream *s = firn_calloc(1, sizeof(*s));
    s->cfg = *cfg;
    s->conn = conn;
    s->server_version = (uint32_t)PQserverVersion(conn);
    if (cfg->proto_version)
        s->proto_version = cfg->proto_version;
    else if (s->server_version >= 160000)
        s->proto_version = 4;
    else if (s->server_version >= 150000)
        s->proto_version = 3;
    else if (s->server_version >= 140000)
        s->proto_version = 2;
    else
        s->proto_version = 1;
    s->binary = !cfg->text_values && s->server_version >= 140000;
    s->streaming = !cfg->no_streaming && s->proto_version >= 2;
    s->status_interval_ns =
        (int64_t)(cfg->status_interval_ms > 0 ? cfg->status_interval_ms
                                              : PGO_DEFAULT_STATUS_INTERVAL_MS) *
        1000000;
    firn__pgo_sess_init(&s->sess, s->proto_version, cfg->mem_budget_bytes, cfg->spill_dir);
    FIRN_LOG(FIRN_LOG_INFO, "pg", "replication connection open server_version=%u proto_version=%u",
             (unsigned)s->server_version, (unsigned)s->proto_version);
    *out = s;
    return FIRN_OK;
}

/* Appends name as a replication-command identifier: double quotes, inner quotes doubled. */
static firn_rc append_ident(firn_buf *b, const char *name)
{
    FIRN_TRY(firn_buf_append_cstr(b, "\""));
    for (const char *p = name; *p; p++) {
        if (*p == '"')
            FIRN_TRY(firn_buf_append_cstr(b, "\""));
        FIRN_TRY(firn_buf_append(b, p, 1));
    }
    return firn_buf_append_cstr(b, "\"");
}

firn_rc firn_pgo_stream_create_slot(firn_pgo_stream *s,
                                    char **out_snapshot,
                                    uint64_t *out_consistent_lsn,
                                    firn_err *err)
{
    *out_snapshot = NULL;
    firn_buf q;
    firn_buf_init(&q, 4096);
    firn_rc rc = firn_buf_append_cstr(&q, "CREATE_REPLICATION_SLOT ");
    rc = rc ? rc : append_ident(&q, s->cfg.slot_name);
    rc = rc ? rc : firn_buf_append_cstr(&q, " LOGICAL pgoutput EXPORT_SNAPSHOT");
    if (rc) {
        firn_buf_deinit(&q);
        return firn_err_set(err, rc, "slot name is too long");
    }
    PGresult *res = PQexec(s->conn, (const char *)q.data);
    firn_buf_deinit(&q);
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 || PQnfields(res) < 3) {
        const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
        if (state && strcmp(state, "53400") == 0) /* configuration_limit_exceeded */
            rc = firn_err_set(err, FIRN_ERR_SOURCE,
                              "could not create replication slot \"%s\": all "
                              "max_replication_slots are in use; drop an unused slot listed in "
                              "pg_replication_slots (pg_drop_replication_slot) or raise "
                              "max_replication_slots",
                              s->cfg.slot_name);
        else
            rc = firn__pgo_result_error(res, s->conn, "create replication slot", err);
        PQclear(res);
        return rc;
    }
    rc = firn__pgo_lsn_parse(PQgetvalue(res, 0, 1), out_consistent_lsn, err);
    if (!rc)
        *out_snapshot = firn_strdup(PQgetvalue(res, 0, 2));
    PQclear(res);
    FIRN_LOG(FIRN_LOG_INFO, "pg", "created replication slot \"%s\" snapshot=%s", s->cfg.slot_name,
             *out_snapshot ? *out_snapshot : "");
    return rc;
}

/* Appends the publication_names option value: a quoted identifier list inside a literal. */
static firn_rc append_publications(firn_buf *b, const firn_pgo_config *cfg)
{
    FIRN_TRY(firn_buf_append_cstr(b, "publication_names '"));
    for (size_t i = 0; i < cfg->n_publications; i++) {
        if (i)
            FIRN_TRY(firn_buf_append_cstr(b, ","));
        FIRN_TRY(firn_buf_append_cstr(b, "\""));
        for (const char *p = cfg->publications[i]; *p; p++) {
            if (*p == '"')
                FIRN_TRY(firn_buf_append_cstr(b, "\""));
            if (*p == '\'')
                FIRN_TRY(firn_buf_append_cstr(b, "'"));
            FIRN_TRY(firn_buf_append(b, p, 1));
        }
        FIRN_TRY(firn_buf_append_cstr(b, "\""));
    }
    return firn_buf_append_cstr(b, "'");
}

static firn_rc build_start(const firn_pgo_stream *s, uint64_t start_lsn, firn_buf *q)
{
    char lsn[24];
    firn__pgo_lsn_format(start_lsn, lsn);
    FIRN_TRY(firn_buf_append_cstr(q, "START_REPLICATION SLOT "));
    FIRN_TRY(append_ident(q, s->cfg.slot_name));
    FIRN_TRY(
        firn_buf_appendf(q, " LOGICAL %s (proto_version '%u', ", lsn, (unsigned)s->proto_version));
    FIRN_TRY(append_publications(q, &s->cfg));
    if (s->binary)
        FIRN_TRY(firn_buf_append_cstr(q, ", binary 'true'"));
    if (s->streaming)
        FIRN_TRY(firn_buf_append_cstr(q, ", streaming 'on'"));
    if (s->server_version >= 140000)
        FIRN_TRY(firn_buf_append_cstr(q, ", messages 'false'"));
    return firn_buf_append_cstr(q, ")");
}

firn_rc firn_pgo_stream_start(firn_pgo_stream *s, uint64_t start_lsn, firn_err *err)
{
    firn_buf q;
    firn_buf_init(&q, 65536);
    firn_rc rc = build_start(s, start_lsn, &q);
    if (rc) {
        firn_buf_deinit(&q);
        return firn_err_set(err, rc, "START_REPLICATION command is too long");
    }
    FIRN_LOG(FIRN_LOG_DEBUG, "pg", "%s", (const char *)q.data);
    PGresult *res = PQexec(s->conn, (const char *)q.data);
    firn_buf_deinit(&q);
    if (PQresultStatus(res) != PGRES_COPY_BOTH) {
        rc = firn__pgo_result_error(res, s->conn, "start replication", err);
        PQclear(res);
        return rc;
    }
    PQclear(res);
    s->started = true;
    s->flushed_lsn = start_lsn;
    s->confirmed_lsn = start_lsn;
    s->last_status_ns = firn_monotonic_ns();
    rc = firn__pgo_recv_start(s, err);
    if (rc)
        s->started = false;
    return rc;
}

/* ------------------------------------------------------------------------------------------------
 * Feedback
 * ----------------------------------------------------------------------------------------------*/

/* The flush position to report: what the engine confirmed, plus (when everything delivered is
 * confirmed and nothing is open) the end of empty transactions and the server's WAL end. */
static uint64_t flush_position(const firn_pgo_stream *s)
{
    uint64_t flush = s->confirmed_lsn;
    if (firn__pgo_sess_idle(&s->sess) && s->confirmed_lsn >= s->sess.last_data_end_lsn) {
        if (s->sess.last_end_lsn > flush)
            flush = s->sess.last_end_lsn;
        if (s->idle_wal_end > flush)
            flush = s->idle_wal_end;
    }
    return flush > s->flushed_lsn ? flush : s->flushed_lsn;
}

/* Sends the status update; the receiver thread's once it runs (docs/cdc.md "Feedback"). */
firn_rc firn__pgo_send_status_at(firn_pgo_stream *s, uint64_t flush, firn_err *err)
{
    return firn__pgo_send_status_ask(s, flush, false, err);
}

firn_rc firn__pgo_send_status_ask(firn_pgo_stream *s, uint64_t flush, bool ask_reply, firn_err *err)
{
    firn_pgo_copy r = {.kind = 'r', .reply_requested = ask_reply};
    r.write_lsn = s->received_lsn > flush ? s->received_lsn : flush;
    r.flush_lsn = flush;
    r.apply_lsn = flush;
    r.send_time = firn_now_us() - FIRN_PGO_EPOCH_OFFSET_US;
    firn_buf b;
    firn_buf_init(&b, 64);
    firn_rc rc = firn_pgo_copy_encode(&b, &r, err);
    if (!rc &&
        (PQputCopyData(s->conn, (const char *)b.data, (int)b.len) <= 0 || PQflush(s->conn) != 0))
        rc = firn_err_set(err, FIRN_ERR_NETWORK, "could not send status update: %s",
                          PQerrorMessage(s->conn));
    firn_buf_deinit(&b);
    if (rc)
        return rc;
    if (flush != atomic_load(&s->recv.reported_lsn)) {
        char l[24];
        firn__pgo_lsn_format(flush, l);
        FIRN_LOG(FIRN_LOG_DEBUG, "pg", "confirmed flush lsn=%s", l);
    }
    atomic_store(&s->recv.reported_lsn, flush);
    s->last_status_ns = firn_monotonic_ns();
    return FIRN_OK;
}

/* The flush position as the engine's thread knows it, handed to the receiver thread. */
static void publish(firn_pgo_stream *s, bool send_now)
{
    s->flushed_lsn = flush_position(s);
    firn__pgo_recv_publish(s, s->flushed_lsn, send_now);
}

firn_rc firn_pgo_stream_send_status(firn_pgo_stream *s, firn_err *err)
{
    if (!s->started)
        return FIRN_OK;
    if (s->recv.running) {
        publish(s, true);
        return FIRN_OK;
    }
    s->flushed_lsn = flush_position(s);
    return firn__pgo_send_status_at(s, s->flushed_lsn, err);
}

void firn_pgo_stream_confirm(firn_pgo_stream *s, uint64_t flushed_lsn)
{
    if (flushed_lsn > s->confirmed_lsn)
        s->confirmed_lsn = flushed_lsn;
    if (s->recv.running)
        publish(s, false);
}

/* ------------------------------------------------------------------------------------------------
 * Receiving
 * ----------------------------------------------------------------------------------------------*/

/* A message the receiver queued, in order: a keepalive's WAL end counts as confirmed WAL when
 * everything before it was handed out and confirmed (flush_position); XLogData is decoded. */
static firn_rc handle_item(firn_pgo_stream *s, const firn__pgo_item *it, firn_err *err)
{
    if (it->wal_end > s->wal_end_seen)
        s->wal_end_seen = it->wal_end;
    if (it->kind == 'k') {
        if (firn__pgo_sess_idle(&s->sess) && it->wal_end > s->idle_wal_end)
            s->idle_wal_end = it->wal_end;
        s->reply_asked |= it->reply_requested;
        return FIRN_OK;
    }
    if (it->wal_start > s->wal_end_seen)
        s->wal_end_seen = it->wal_start;
    s->bytes_received += it->len;
    s->messages++;
    if (s->capture)
        s->capture(s->capture_ctx, &s->sess.opts, it->payload, it->len);
    firn_rc rc = firn__pgo_sess_feed(&s->sess, it->payload, it->len, err);
    if (rc) {
        char l[24];
        firn__pgo_lsn_format(it->wal_start, l);
        firn_err_context(err, "at LSN %s", l);
    }
    return rc;
}

/* The copy stream ended: the server's reason, or a lost connection. Both lines name the server
 * and the slot and say what to do: a server restart ends the stream too (a fast shutdown ends it
 * cleanly, an immediate one or a crash drops the connection). */
firn_rc firn__pgo_stream_ended(firn_pgo_stream *s, int r, firn_err *err)
{
    const char *host = PQhost(s->conn), *port = PQport(s->conn);
    if (r == -2 || PQstatus(s->conn) == CONNECTION_BAD) {
        char line[256]; /* libpq's message has several lines ("\n\tThis probably means ...") */
        firn__pg_one_line(PQerrorMessage(s->conn), line, sizeof(line));
        size_t n = strlen(line);
        while (n > 0 && (line[n - 1] == '.' || line[n - 1] == ';'))
            line[--n] = '\0';
        return firn_err_set(err, FIRN_ERR_NETWORK,
                            "replication connection of slot \"%s\" to the server at %s:%s lost: "
                            "%s; run firn sync again once the server is up (it resumes at the "
                            "last confirmed position)",
                            s->cfg.slot_name, host ? host : "", port ? port : "", line);
    }
    PGresult *res = PQgetResult(s->conn);
    firn_rc rc;
    if (PQresultStatus(res) == PGRES_FATAL_ERROR)
        rc = firn__pgo_result_error(res, s->conn, "continue replication", err);
    else
        rc = firn_err_set(err, FIRN_ERR_UNAVAILABLE,
                          "the server at %s:%s ended the replication stream of slot \"%s\" (it "
                          "is shutting down or restarting); run firn sync again once the server "
                          "is up (it resumes at the last confirmed position)",
                          host ? host : "", port ? port : "", s->cfg.slot_name);
    PQclear(res);
    return rc;
}

firn_rc firn_pgo_stream_next(firn_pgo_stream *s, int timeout_ms, firn_pgo_event *ev, firn_err *err)
{
    memset(ev, 0, sizeof(*ev));
    if (!s->started)
        return firn_err_set(err, FIRN_ERR_INVALID, "replication stream is not started");
    int64_t deadline = -1; /* now + timeout_ms, once there is something to wait for */
    for (;;) {
        FIRN_TRY(firn__pgo_sess_next(&s->sess, ev, err));
        if (ev->type)
            return FIRN_OK;
        publish(s, false); /* everything decoded so far is handed out */
        firn__pgo_item *it = NULL;
        firn_rc rc = firn__pgo_recv_pop(s, timeout_ms, &deadline, &it, err);
        if (rc) {
            s->started = false;
            s->lost = rc == FIRN_ERR_NETWORK || rc == FIRN_ERR_UNAVAILABLE;
            return rc;
        }
        if (!it)
            return FIRN_OK;
        const bool asks = it->reply_requested;
        rc = handle_item(s, it, err);
        firn__pgo_item_free(it);
        if (rc || asks)
            return rc; /* a keepalive that asks: the caller sees an idle moment at once */
    }
}

bool firn_pgo_stream_take_reply_request(firn_pgo_stream *s)
{
    const bool asked = s->reply_asked;
    s->reply_asked = false;
    return asked;
}

bool firn_pgo_stream_lost(const firn_pgo_stream *s)
{
    return s->lost;
}

const firn_pgo_rel *firn_pgo_stream_rel(const firn_pgo_stream *s, uint32_t relid)
{
    return firn__pgo_sess_rel(&s->sess, relid);
}

void firn_pgo_stream_stats(const firn_pgo_stream *s, firn_pgo_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->bytes_received = s->bytes_received;
    out->messages = s->messages;
    out->txns_delivered = s->sess.txns_delivered;
    out->txns_streamed = s->sess.txns_streamed;
    out->txns_aborted = s->sess.txns_aborted;
    out->spilled_bytes = s->sess.spilled_bytes;
    out->flushed_lsn = atomic_load(&s->recv.reported_lsn);
    out->idle_wal_end = s->idle_wal_end;
    out->wal_end_seen = s->wal_end_seen;
    out->server_version = s->server_version;
    out->proto_version = s->proto_version;
}

void firn__pgo_stream_set_capture(firn_pgo_stream *s, firn__pgo_capture_fn fn, void *ctx)
{
    s->capture = fn;
    s->capture_ctx = ctx;
}

void firn_pgo_stream_free(firn_pgo_stream *s)
{
    if (!s)
        return;
    firn__pgo_recv_stop(s); /* the connection is this thread's again */
    if (s->started) {
        firn_err ignored = {0};
        firn_rc_ignore(firn_pgo_stream_send_status(s, &ignored));
    }
    PQfinish(s->conn);
    firn__pgo_sess_deinit(&s->sess);
    firn_free(s);
}
