/* SPDX-License-Identifier: Apache-2.0 */
/* Backfill: tables split into CTID block-range chunks, read in parallel over N connections that
 * all import one exported snapshot, rows decoded from binary COPY straight into batches. */
#include "pg_int.h"

#include <errno.h>
#include <limits.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>

#define CHUNK_BYTES_DEFAULT ((size_t)64 << 20)
#define BATCH_ROWS_DEFAULT  65536
#define BATCH_BYTES_DEFAULT ((size_t)32 << 20)
#define WORKERS_DEFAULT     2
#define WORKERS_MAX         64
#define RETRIES_DEFAULT     3
#define BYTES_CHECK_ROWS    256 /* firn_batch_bytes walks every column: check now and then */
#define SNAPSHOT_NAME_MAX   64
#define COPY_RCVLOWAT       (128 * 1024) /* bytes the socket gathers before waking the reader */
#define COPY_POLL_MS        2            /* the longest a reader waits for a smaller tail */
/* A reader looks at the run (cancelled, failed) and its batch (full) once this many messages or
 * bytes were fed since its last look, after the fill that passed the mark (copy_fill feeds
 * FIRN_PG_COPY_FILL bytes or one longer message at a time): per row, the loads of the run's
 * shared flags were ~1 % of a taxi backfill's CPU. The batch (filled a stage of <= 256 rows or
 * 8 MiB at a time) overshoots batch_rows or batch_bytes by at most that much plus a fill more. A
 * reader waiting for bytes looks at the run before each wait (copy_next). */
#define CHECK_ROWS        64
#define CHECK_BYTES       ((size_t)1 << 20)
#define COPY_INBUF_TEXT   "262144" /* bytes of the value that grows libpq's input buffer */
#define COPY_STOP_POLL_MS 100  /* how often a TLS reader waiting on a silent server checks stop */
#define COPY_STOPPED      (-3) /* copy_next: the run is stopping, the wait was left */

struct firn_pg_plan {
    size_t n_chunks;
    size_t cap;
    firn_pg_chunk *chunks;
};

void firn_pg_plan_free(firn_pg_plan *p)
{
    if (!p)
        return;
    firn_free(p->chunks);
    firn_free(p);
}

size_t firn_pg_plan_chunks(const firn_pg_plan *p)
{
    return p->n_chunks;
}

firn_pg_chunk *firn_pg_plan_chunk(firn_pg_plan *p, size_t i)
{
    FIRN_ASSERT(i < p->n_chunks);
    return &p->chunks[i];
}

void firn_pg_plan_set_done(firn_pg_plan *p, uint32_t chunk_id)
{
    if (chunk_id < p->n_chunks)
        p->chunks[chunk_id].done = true;
}

static void plan_add(firn_pg_plan *p, firn_pg_table *t, size_t leaf, uint32_t start, uint32_t end)
{
    if (p->n_chunks == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 64;
        p->chunks = firn_reallocarray(p->chunks, p->cap, sizeof(*p->chunks));
    }
    firn_pg_chunk *c = &p->chunks[p->n_chunks];
    memset(c, 0, sizeof(*c));
    c->id = (uint32_t)p->n_chunks;
    c->table = t;
    c->leaf = leaf;
    c->start_block = start;
    c->end_block = end;
    p->n_chunks++;
}

static firn_rc
leaf_blocks(firn_pg_conn *c, uint32_t oid, uint64_t *out, uint64_t *block_size, firn_err *err)
{
    static const char SQL[] = "SELECT pg_relation_size($1::oid), current_setting('block_size')";
    char oid_s[16];
    snprintf(oid_s, sizeof(oid_s), "%u", oid);
    const char *params[1] = {oid_s};
    PGresult *res = NULL;
    FIRN_TRY(firn__pg_query(c, SQL, 1, params, &res, err));
    uint64_t size = 0;
    firn_rc rc = FIRN_OK;
    if (PQntuples(res) != 1)
        rc = firn_err_set(err, FIRN_ERR_NOT_FOUND, "relation with oid %u does not exist", oid);
    if (!rc)
        rc = firn_parse_u64(PQgetvalue(res, 0, 0), strlen(PQgetvalue(res, 0, 0)), &size, err);
    if (!rc)
        rc = firn_parse_u64(PQgetvalue(res, 0, 1), strlen(PQgetvalue(res, 0, 1)), block_size, err);
    PQclear(res);
    if (!rc && *block_size == 0)
        rc = firn_err_set(err, FIRN_ERR_SOURCE, "server reports a block size of 0");
    if (!rc)
        *out = size / *block_size;
    return rc;
}

/* The integer primary-key column that key ranges split t by, or NULL. */
static const firn_pg_column *range_key(const firn_pg_table *t)
{
    if (!t->has_primary_key || t->n_key != 1)
        return NULL;
    const firn_pg_column *k = &t->columns[t->key_columns[0]];
    firn_pg_kind kind = k->type->kind;
    return kind == FIRN_PG_KIND_INT2 || kind == FIRN_PG_KIND_INT4 || kind == FIRN_PG_KIND_INT8
               ? k
               : NULL;
}

/* min and max of key column k in a leaf (*empty when it has no rows). */
static firn_rc key_bounds(firn_pg_conn *c,
                          const firn_pg_table *t,
                          size_t leaf,
                          const firn_pg_column *k,
                          int64_t *lo,
                          int64_t *hi,
                          bool *empty,
                          firn_err *err)
{
    firn_buf sql;
    firn_buf_init(&sql, FIRN_PG_SQL_MAX);
    firn_rc rc = firn_buf_append_cstr(&sql, "SELECT min(");
    if (!rc)
        rc = firn__pg_quote_ident(&sql, k->name);
    if (!rc)
        rc = firn_buf_append_cstr(&sql, ")::int8, max(");
    if (!rc)
        rc = firn__pg_quote_ident(&sql, k->name);
    if (!rc)
        rc = firn_buf_appendf(&sql, ")::int8 FROM ONLY %s", t->leaves[leaf].qualified);
    PGresult *res = NULL;
    if (!rc)
        rc = firn__pg_query(c, (const char *)sql.data, 0, NULL, &res, err);
    else
        rc = firn_err_set(err, rc, "key range query for %s too long", t->qualified);
    firn_buf_deinit(&sql);
    FIRN_TRY(rc);
    *empty = PQntuples(res) != 1 || PQgetisnull(res, 0, 0);
    if (!*empty) {
        const char *a = PQgetvalue(res, 0, 0), *b = PQgetvalue(res, 0, 1);
        rc = firn_parse_i64(a, strlen(a), lo, err);
        if (!rc)
            rc = firn_parse_i64(b, strlen(b), hi, err);
    }
    PQclear(res);
    return rc;
}

static void plan_add_keys(firn_pg_plan *p, firn_pg_table *t, size_t leaf, int64_t lo, int64_t hi)
{
    plan_add(p, t, leaf, 0, UINT32_MAX);
    firn_pg_chunk *c = &p->chunks[p->n_chunks - 1];
    c->key_range = true;
    c->key_lo = lo;
    c->key_hi = hi;
}

/* Splits a leaf into n key ranges of equal width over [lo, hi]; the outer ones are open. */
static void
plan_key_ranges(firn_pg_plan *p, firn_pg_table *t, size_t leaf, int64_t lo, int64_t hi, uint64_t n)
{
    uint64_t width = (uint64_t)hi - (uint64_t)lo; /* hi >= lo */
    if (n > width)
        n = width ? width : 1;
    uint64_t step = width / n + 1;
    int64_t start = INT64_MIN;
    for (uint64_t i = 1; i < n && step * i <= width; i++) {
        int64_t end = (int64_t)((uint64_t)lo + step * i); /* <= hi */
        plan_add_keys(p, t, leaf, start, end);
        start = end;
    }
    plan_add_keys(p, t, leaf, start, INT64_MAX);
}

static firn_rc plan_leaf(firn_pg_conn *c,
                         firn_pg_plan *p,
                         firn_pg_table *t,
                         size_t li,
                         size_t chunk_bytes,
                         firn_pg_chunking chunking,
                         firn_err *err)
{
    bool tid_ranges = firn_pg_conn_server_version(c) >= 140000;
    uint64_t blocks = 0, block_size = 0;
    FIRN_TRY(leaf_blocks(c, t->leaves[li].oid, &blocks, &block_size, err));
    uint64_t step = chunk_bytes / block_size ? chunk_bytes / block_size : 1;
    const firn_pg_column *key = range_key(t);
    bool by_key =
        key && (chunking == FIRN_PG_CHUNK_KEY || (chunking == FIRN_PG_CHUNK_AUTO && !tid_ranges));
    if (by_key) {
        int64_t lo = 0, hi = 0;
        bool empty = false;
        FIRN_TRY(key_bounds(c, t, li, key, &lo, &hi, &empty, err));
        if (empty)
            plan_add_keys(p, t, li, INT64_MIN, INT64_MAX);
        else
            plan_key_ranges(p, t, li, lo, hi, (blocks + step - 1) / step);
        return FIRN_OK;
    }
    uint64_t start = 0;
    /* The last chunk is open-ended: blocks added after measuring are still read. */
    while (tid_ranges && start + step < blocks && start + step < UINT32_MAX) {
        plan_add(p, t, li, (uint32_t)start, (uint32_t)(start + step));
        start += step;
    }
    plan_add(p, t, li, (uint32_t)start, UINT32_MAX);
    return FIRN_OK;
}

firn_rc firn_pg_backfill_plan_chunked(firn_pg_conn *c,
                                      firn_pg_table *const *tables,
                                      size_t n_tables,
                                      size_t chunk_bytes,
                                      firn_pg_chunking chunking,
                                      firn_pg_plan **out,
                                      firn_err *err)
{
    *out = NULL;
    if (chunk_bytes == 0)
        chunk_bytes = CHUNK_BYTES_DEFAULT;
    firn_pg_plan *p = firn_calloc(1, sizeof(*p));
    for (size_t ti = 0; ti < n_tables; ti++) {
        firn_pg_table *t = tables[ti];
        for (size_t li = 0; li < t->n_leaves; li++) {
            firn_rc rc = plan_leaf(c, p, t, li, chunk_bytes, chunking, err);
            if (rc) {
                firn_err_context(err, "while planning the backfill of %s", t->qualified);
                firn_pg_plan_free(p);
                return rc;
            }
        }
    }
    *out = p;
    return FIRN_OK;
}

firn_rc firn_pg_backfill_plan(firn_pg_conn *c,
                              firn_pg_table *const *tables,
                              size_t n_tables,
                              size_t chunk_bytes,
                              firn_pg_plan **out,
                              firn_err *err)
{
    return firn_pg_backfill_plan_chunked(c, tables, n_tables, chunk_bytes, FIRN_PG_CHUNK_AUTO, out,
                                         err);
}

/* ------------------------------------------------------------------------------------------------
 * Runner
 * ----------------------------------------------------------------------------------------------*/

typedef struct runner {
    firn_pg_plan *plan;
    const firn_pg_backfill_opts *opts;
    size_t batch_rows;
    size_t batch_bytes;
    int max_retries;
    pthread_mutex_t lock;    /* next, failed, err */
    pthread_mutex_t cb_lock; /* serializes on_chunk_done and on_chunk_retry */
    size_t next;
    volatile int failed;
    firn_rc rc;
    firn_err err;
} runner;

typedef struct worker {
    runner *r;
    int index;
    firn_pg_conn *conn;
    const firn_pg_table *table; /* table of batch/decoder */
    firn_batch *batch;
    firn_pg_copy *copy;
    size_t checked_rows; /* batch rows at the last batch_full check */
    firn_err err;
    char reconnect_msg[FIRN_ERR_MSG_MAX];
    bool same_again; /* the last COPY error would repeat on a retry (bad data, SQL, privilege) */
} worker;

static bool should_stop(const runner *r)
{
    return r->failed || (r->opts->cancel && *r->opts->cancel);
}

/* Waits before retry attempt (1, 2, ...) of a chunk: 250 ms, 1 s, 4 s, then 8 s each, so the
 * retries outlast a short network outage or a server restart instead of failing within
 * milliseconds; returns early when the run stops. */
static void retry_backoff(const runner *r, int attempt)
{
    long ms = attempt >= 3 ? 8000 : 250L << (2 * (attempt - 1));
    for (long waited = 0; waited < ms && !should_stop(r); waited += 50)
        firn_sleep_ms(50);
}

static void runner_fail(runner *r, firn_rc rc, const firn_err *err)
{
    pthread_mutex_lock(&r->lock);
    if (!r->failed) {
        r->failed = 1;
        r->rc = rc;
        r->err = *err;
        r->err.code = rc;
    }
    pthread_mutex_unlock(&r->lock);
}

static firn_pg_chunk *next_chunk(runner *r)
{
    firn_pg_chunk *c = NULL;
    pthread_mutex_lock(&r->lock);
    while (!r->failed && r->next < r->plan->n_chunks) {
        firn_pg_chunk *cand = &r->plan->chunks[r->next++];
        if (!cand->done) {
            c = cand;
            break;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return c;
}

static bool snapshot_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= SNAPSHOT_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'A' && ch <= 'F') || (ch >= 'a' && ch <= 'f') ||
              ch == '-'))
            return false;
    }
    return true;
}

/* Grows libpq's input buffer from its first 16 KiB to 512 KiB: libpq enlarges the buffer to
 * hold the longest message received (doubling) and keeps it for the connection's life, so one
 * 256 KiB value is enough. Each read of a COPY then takes what the socket gathered (up to
 * COPY_RCVLOWAT and more, see copy_next) instead of 16 KiB at a time: for 1 M taxi rows 1.5 to
 * 6 times fewer recv calls (docs/internals/backfill.md), and fewer ACKs sent back. Outside
 * any transaction; a failure only costs the speed-up (the next statement shows a broken
 * connection). */
static void grow_input_buffer(PGconn *pq)
{
    PGresult *res = PQexec(pq, "SELECT pg_catalog.repeat('x', " COPY_INBUF_TEXT ")");
    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        FIRN_LOG(FIRN_LOG_DEBUG, FIRN_PG_LOG_COMP, "could not grow the COPY input buffer: %s",
                 PQresultErrorMessage(res));
    PQclear(res);
}

static firn_rc worker_connect(worker *w, firn_err *err)
{
    firn_pg_conn_close(w->conn);
    w->conn = NULL;
    FIRN_TRY(firn_pg_conn_open(w->r->opts->conn, FIRN_PG_CONN_SQL, &w->conn, err));
    grow_input_buffer(firn_pg_conn_pq(w->conn));
    firn_rc rc =
        firn_pg_conn_exec(w->conn, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", err);
    if (rc)
        return rc;
    /* The name comes from the state file when a backfill resumes: a literal, never SQL. */
    const char *snap = w->r->opts->snapshot;
    char *lit = PQescapeLiteral(firn_pg_conn_pq(w->conn), snap, strlen(snap));
    if (!lit)
        return firn_err_set(err, FIRN_ERR_SOURCE, "could not quote snapshot name \"%s\"", snap);
    char sql[256];
    snprintf(sql, sizeof(sql), "SET TRANSACTION SNAPSHOT %.200s", lit);
    PQfreemem(lit);
    PGresult *res = PQexec(firn_pg_conn_pq(w->conn), sql);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        rc = firn__pg_result_error(firn_pg_conn_pq(w->conn), res, err,
                                   "could not import the backfill snapshot");
        if (state && (strcmp(state, "22023") == 0 || strcmp(state, "0A000") == 0))
            rc = firn_err_set(err, FIRN_ERR_NOT_FOUND,
                              "snapshot \"%s\" is no longer valid (the session that exported "
                              "it ended: a server restart or a lost connection); run firn sync "
                              "again to copy under a new snapshot",
                              w->r->opts->snapshot);
    }
    PQclear(res);
    return rc;
}

/* " WHERE key >= lo AND key < hi" of a key-range chunk (open bounds left out). */
static firn_rc key_where(const firn_pg_chunk *c, firn_buf *sql)
{
    const char *name = c->table->columns[c->table->key_columns[0]].name;
    bool lo = c->key_lo != INT64_MIN, hi = c->key_hi != INT64_MAX;
    if (lo) {
        FIRN_TRY(firn_buf_append_cstr(sql, " WHERE "));
        FIRN_TRY(firn__pg_quote_ident(sql, name));
        FIRN_TRY(firn_buf_appendf(sql, " >= %lld", (long long)c->key_lo));
    }
    if (hi) {
        FIRN_TRY(firn_buf_append_cstr(sql, lo ? " AND " : " WHERE "));
        FIRN_TRY(firn__pg_quote_ident(sql, name));
        FIRN_TRY(firn_buf_appendf(sql, " < %lld", (long long)c->key_hi));
    }
    return FIRN_OK;
}

/* The end of a chunk's COPY: the stream's filter (docs/configuration.md "filter"), in
 * parentheses so that its OR cannot widen the chunk's range. */
static firn_rc chunk_sql_end(const firn_pg_chunk *c, bool has_where, firn_buf *sql)
{
    if (c->table->filter)
        FIRN_TRY(firn_buf_appendf(sql, " %s (%s)", has_where ? "AND" : "WHERE", c->table->filter));
    return firn_buf_append_cstr(sql, ") TO STDOUT (FORMAT binary)");
}

static firn_rc chunk_sql(const firn_pg_chunk *c, bool tid_ranges, firn_buf *sql)
{
    FIRN_TRY(firn_buf_append_cstr(sql, "COPY (SELECT "));
    FIRN_TRY(firn_pg_copy_select_list(c->table, sql));
    FIRN_TRY(firn_buf_appendf(sql, " FROM ONLY %s", c->table->leaves[c->leaf].qualified));
    if (c->key_range) {
        FIRN_TRY(key_where(c, sql));
        return chunk_sql_end(c, c->key_lo != INT64_MIN || c->key_hi != INT64_MAX, sql);
    }
    if (tid_ranges && c->start_block > 0)
        FIRN_TRY(firn_buf_appendf(sql, " WHERE ctid >= '(%u,0)'::tid", c->start_block));
    if (tid_ranges && c->end_block != UINT32_MAX)
        FIRN_TRY(firn_buf_appendf(sql, " %s ctid < '(%u,0)'::tid",
                                  c->start_block > 0 ? "AND" : "WHERE", c->end_block));
    return chunk_sql_end(c, tid_ranges && (c->start_block > 0 || c->end_block != UINT32_MAX), sql);
}

static void worker_set_table(worker *w, const firn_pg_table *t)
{
    w->checked_rows = 0;
    if (w->table == t) {
        firn_batch_reset(w->batch);
        return;
    }
    firn_batch_free(w->batch);
    w->table = t;
    w->batch = firn_batch_new(t->schema);
}

static firn_rc deliver(worker *w, const firn_pg_chunk *c, firn_err *err)
{
    runner *r = w->r;
    /* Not serialized: the engine encodes Parquet in the worker that read the rows. */
    firn_rc rc = r->opts->on_batch(r->opts->ctx, c, w->batch, err);
    firn_batch_reset(w->batch);
    w->checked_rows = 0;
    if (rc && err->code == FIRN_OK)
        firn_err_set(err, rc, "backfill batch callback failed");
    return rc;
}

/* The decoder adds rows a stage at a time: the batch is checked when its row count changed. */
static bool batch_full(worker *w)
{
    size_t rows = firn_batch_rows(w->batch);
    if (rows == w->checked_rows)
        return false;
    size_t before = w->checked_rows;
    w->checked_rows = rows;
    if (rows >= w->r->batch_rows)
        return true;
    return rows / BYTES_CHECK_ROWS != before / BYTES_CHECK_ROWS &&
           firn_batch_bytes(w->batch) >= w->r->batch_bytes;
}

/* Sets the socket's receive low-water mark (bytes); false when it cannot be set. */
static bool set_rcvlowat(int fd, int bytes)
{
    return fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof(bytes)) == 0;
}

/* Whether OpenSSL holds decrypted bytes of the connection that libpq has not read (poll does not
 * see them; libpq's own wait asks the same). */
static bool tls_pending(PGconn *pq)
{
    SSL *ssl = PQsslStruct(pq, "OpenSSL");
    return ssl && SSL_pending(ssl) > 0;
}

/* The next bytes of the COPY data, into room (room_len > 0 bytes): the count, -1 at the end of
 * the data (PQgetResult tells how it ended), -2 on a failure, COPY_STOPPED when r (NULL: not
 * checked) stops while no complete message is there (the server sends nothing for minutes
 * under a selective filter, or stopped amid a message: its send buffer ends anywhere).
 *
 * PQgetlineAsync copies the next complete CopyData message (a tuple) straight into room; one
 * longer than room_len comes in room_len-byte parts, the rest at the next calls (the decoder
 * takes the stream in any split). PQgetCopyData would malloc a block for every tuple and the
 * caller free it: ~140 instructions a row, 4 % of a taxi backfill's.
 *
 * Once libpq's buffer holds no complete message, the reader of a connection without TLS
 * (lowat: the socket's low-water mark set by the caller) sleeps until the socket holds
 * COPY_RCVLOWAT bytes, or COPY_POLL_MS passed (the smaller tail: CopyDone, CommandComplete, an
 * error), and then takes everything in one read (grow_input_buffer made room): a blocking
 * PQgetCopyData reads as soon as the buffer is drained, whatever the socket holds then (often
 * a few KiB while the server is the slower side), one recv and one wakeup each time. With TLS
 * (lowat false) the reader waits as libpq's blocking read would, for one byte on the socket or
 * decrypted bytes OpenSSL holds, but wakes each COPY_STOP_POLL_MS to see whether to stop. */
static int copy_next(const runner *r, PGconn *pq, bool lowat, uint8_t *room, size_t room_len)
{
    int len = room_len > INT_MAX ? INT_MAX : (int)room_len;
    for (;;) {
        int n = PQgetlineAsync(pq, (char *)room, len);
        if (n != 0)
            return n;
        if (r && should_stop(r))
            return COPY_STOPPED;
        if (lowat || !tls_pending(pq)) {
            struct pollfd p = {.fd = PQsocket(pq), .events = POLLIN};
            if (p.fd < 0 ||
                (poll(&p, 1, lowat ? COPY_POLL_MS : COPY_STOP_POLL_MS) < 0 && errno != EINTR))
                return -2;
        }
        if (!PQconsumeInput(pq)) /* after a timeout too: a read that finds nothing is cheap */
            return -2;
    }
}

/* After copy_next put n > 0 bytes into room: the messages libpq already holds complete, copied
 * behind them until FIRN_PG_COPY_FILL bytes are there (the last one perhaps in part when the
 * room ends; the decoder takes the stream in any split); the bytes in room, *msgs the calls that
 * gave bytes. The decoder then takes ~35 taxi rows in one call instead of one call per tuple:
 * per row the room, feed and consume calls were ~115 instructions (callgrind). Never waits:
 * PQgetlineAsync returns 0 when no complete message is buffered, and -1 at the end of the data
 * (then again at the next call, where copy_next sees it). */
static size_t copy_fill(PGconn *pq, uint8_t *room, size_t room_len, size_t n, size_t *msgs)
{
    *msgs = 1;
    while (n < FIRN_PG_COPY_FILL && n < room_len) {
        size_t left = room_len - n;
        int got = PQgetlineAsync(pq, (char *)room + n, left > INT_MAX ? INT_MAX : (int)left);
        if (got <= 0)
            break;
        n += (size_t)got;
        (*msgs)++;
    }
    return n;
}

/* Asks the server to stop the COPY (best effort: the rest of the stream is read and dropped). */
static void cancel_copy(PGconn *pq)
{
    PGcancel *cancel = PQgetCancel(pq);
    char errbuf[256];
    if (cancel) {
        (void)PQcancel(cancel, errbuf, sizeof(errbuf));
        PQfreeCancel(cancel);
    }
}

static firn_rc copy_error(worker *w, PGconn *pq, const PGresult *res, firn_err *err);

/* Reads the COPY data of the current statement; on a decode or callback error the rest of the
 * stream is cancelled and drained so the connection stays usable. */
static firn_rc read_copy(worker *w, const firn_pg_chunk *c, bool *cb_failed, firn_err *err)
{
    PGconn *pq = firn_pg_conn_pq(w->conn);
    firn_rc rc = FIRN_OK;
    bool lowat = !PQsslInUse(pq) && set_rcvlowat(PQsocket(pq), COPY_RCVLOWAT);
    uint8_t drain[1024];                /* where the rest goes after a failure */
    size_t fed_rows = 0, fed_bytes = 0; /* since the last look at the run and the batch */
    for (;;) {
        size_t room_len = 0;
        uint8_t *room = rc ? NULL : firn_pg_copy_room(w->copy, &room_len);
        if (!rc && !room) {
            rc = firn_err_set(err, FIRN_ERR_TOO_LARGE, "COPY tuple of table %s over 2 GiB",
                              c->table->qualified);
            cancel_copy(pq);
        }
        if (!room) {
            room = drain;
            room_len = sizeof(drain);
        }
        /* Once failed, the wait ignores a stop: the cancel ends the stream soon. */
        int n = copy_next(rc ? NULL : w->r, pq, lowat, room, room_len);
        if (n < 0 && n != COPY_STOPPED)
            break;
        if (!rc && n == COPY_STOPPED) {
            rc = firn_err_set(err, FIRN_ERR_CANCELLED, "backfill cancelled");
            cancel_copy(pq);
        } else if (!rc) {
            size_t msgs = 0, filled = copy_fill(pq, room, room_len, (size_t)n, &msgs);
            uint64_t lsn = w->r->opts->snapshot_lsn;
            rc = firn_pg_copy_feed_room(w->copy, filled, lsn, err);
            fed_rows += msgs;
            fed_bytes += filled;
            if (!rc && (fed_rows >= CHECK_ROWS || fed_bytes >= CHECK_BYTES)) {
                fed_rows = fed_bytes = 0;
                if (should_stop(w->r)) {
                    rc = firn_err_set(err, FIRN_ERR_CANCELLED, "backfill cancelled");
                } else if (batch_full(w)) {
                    rc = deliver(w, c, err);
                    *cb_failed = rc != FIRN_OK;
                }
            }
            if (rc)
                cancel_copy(pq);
        }
    }
    if (lowat) /* libpq's blocking waits from here on must see every byte */
        (void)set_rcvlowat(PQsocket(pq), 1);
    PGresult *res = NULL;
    bool server_failed = false;
    while ((res = PQgetResult(pq)) != NULL) {
        if (PQresultStatus(res) != PGRES_COMMAND_OK && !rc) {
            rc = copy_error(w, pq, res, err);
            server_failed = true;
        }
        PQclear(res);
    }
    if (!rc && !server_failed)
        rc = firn_pg_copy_finish(w->copy, err);
    return rc;
}

/* A COPY error of res that a retry in the same snapshot meets again: a data exception (class
 * 22: a value the server cannot convert to the client encoding), a syntax or access rule
 * violation (42), a feature not supported (0A). The encoding case gets what to do. */
static firn_rc copy_error(worker *w, PGconn *pq, const PGresult *res, firn_err *err)
{
    firn_rc rc = firn__pg_result_error(pq, res, err, "COPY failed");
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    w->same_again = state && (strncmp(state, "22", 2) == 0 || strncmp(state, "42", 2) == 0 ||
                              strncmp(state, "0A", 2) == 0);
    if (state && strcmp(state, "22021") == 0 && err) {
        char msg[FIRN_ERR_MSG_MAX];
        snprintf(msg, sizeof(msg), "%s", err->msg);
        rc = firn_err_set(err, rc,
                          "%s; the table holds bytes that are not valid in the client encoding "
                          "UTF8 (a SQL_ASCII database keeps whatever bytes it is given): correct "
                          "those values, or leave the column out with \"columns\"",
                          msg);
    }
    return rc;
}

static firn_rc run_chunk(worker *w, firn_pg_chunk *c, bool *retryable, firn_err *err)
{
    *retryable = false;
    w->same_again = false;
    worker_set_table(w, c->table);
    firn_pg_copy_free(w->copy);
    w->copy = firn_pg_copy_new(c->table, w->batch);
    firn_buf sql;
    firn_buf_init(&sql, FIRN_PG_SQL_MAX);
    firn_rc rc = chunk_sql(c, firn_pg_conn_server_version(w->conn) >= 140000, &sql);
    if (rc) {
        firn_buf_deinit(&sql);
        return firn_err_set(err, rc, "COPY statement for table %s too long", c->table->qualified);
    }
    PGconn *pq = firn_pg_conn_pq(w->conn);
    PGresult *res = PQexec(pq, (const char *)sql.data);
    firn_buf_deinit(&sql);
    if (PQresultStatus(res) != PGRES_COPY_OUT) {
        rc = copy_error(w, pq, res, err);
        PQclear(res);
        *retryable = rc != FIRN_ERR_PERMISSION && !w->same_again; /* a missing grant stays */
        return rc;
    }
    PQclear(res);
    bool cb_failed = false;
    rc = read_copy(w, c, &cb_failed, err);
    if (rc) {
        *retryable =
            !cb_failed && !w->same_again && (rc == FIRN_ERR_SOURCE || rc == FIRN_ERR_NETWORK);
        return rc;
    }
    if (firn_batch_rows(w->batch) > 0)
        FIRN_TRY(deliver(w, c, err));
    return FIRN_OK;
}

static void log_stats(const firn_pg_chunk *c, const firn_pg_decode_stats *s)
{
    if (s->nan_to_null || s->clamped || s->array_flattened || s->array_lbound_lost)
        FIRN_LOG(FIRN_LOG_WARN, FIRN_PG_LOG_COMP,
                 "table %s chunk %u: values stored by the documented fallback rules: "
                 "%llu numeric NaN as null, %llu timestamps clamped, %llu arrays flattened, "
                 "%llu array lower bounds dropped",
                 c->table->qualified, c->id, (unsigned long long)s->nan_to_null,
                 (unsigned long long)s->clamped, (unsigned long long)s->array_flattened,
                 (unsigned long long)s->array_lbound_lost);
}

/* Runs one chunk, retrying on a fresh connection after PostgreSQL errors. */
static firn_rc chunk_with_retries(worker *w, firn_pg_chunk *c, firn_err *err)
{
    runner *r = w->r;
    for (int attempt = 0;; attempt++) {
        bool retryable = false;
        firn_rc rc = w->conn ? run_chunk(w, c, &retryable, err)
                             : firn_err_set(err, FIRN_ERR_NETWORK, "%s", w->reconnect_msg);
        if (!rc) {
            c->replaced = *firn_pg_copy_stats(w->copy);
            log_stats(c, &c->replaced);
            return FIRN_OK;
        }
        if (!w->conn)
            retryable = true;
        if (w->batch)
            firn_batch_reset(w->batch);
        w->checked_rows = 0;
        if (!retryable || attempt >= r->max_retries || should_stop(r)) {
            if (c->key_range)
                firn_err_context(err, "while reading chunk %u (keys %lld..%lld) of table %s%s",
                                 c->id, (long long)c->key_lo, (long long)c->key_hi,
                                 c->table->qualified, attempt ? " after retries" : "");
            else if (c->end_block == UINT32_MAX)
                firn_err_context(err, "while reading chunk %u (blocks %u..end) of table %s%s",
                                 c->id, c->start_block, c->table->qualified,
                                 attempt ? " after retries" : "");
            else
                firn_err_context(err, "while reading chunk %u (blocks %u..%u) of table %s%s", c->id,
                                 c->start_block, c->end_block, c->table->qualified,
                                 attempt ? " after retries" : "");
            return rc;
        }
        FIRN_LOG(FIRN_LOG_WARN, FIRN_PG_LOG_COMP, "retrying chunk %u of table %s (attempt %d): %s",
                 c->id, c->table->qualified, attempt + 2, err->msg);
        if (r->opts->on_chunk_retry) {
            pthread_mutex_lock(&r->cb_lock);
            rc = r->opts->on_chunk_retry(r->opts->ctx, c, err);
            pthread_mutex_unlock(&r->cb_lock);
            if (rc)
                return rc;
        }
        firn_err_clear(err);
        retry_backoff(r, attempt + 1);
        rc = worker_connect(w, err);
        if (rc == FIRN_ERR_NOT_FOUND)
            return rc; /* the snapshot is gone: never mix two snapshots */
        if (rc) {
            snprintf(w->reconnect_msg, sizeof(w->reconnect_msg), "%s", err->msg);
            firn_pg_conn_close(w->conn);
            w->conn = NULL;
        }
    }
}

static firn_rc finish_chunk(worker *w, firn_pg_chunk *c, firn_err *err)
{
    runner *r = w->r;
    firn_rc rc = FIRN_OK;
    pthread_mutex_lock(&r->cb_lock);
    if (r->opts->on_chunk_done)
        rc = r->opts->on_chunk_done(r->opts->ctx, c, err);
    if (!rc)
        c->done = true;
    pthread_mutex_unlock(&r->cb_lock);
    return rc;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    runner *r = w->r;
    firn_rc rc = worker_connect(w, &w->err);
    if (rc) {
        runner_fail(r, rc, &w->err);
        return NULL;
    }
    for (;;) {
        firn_pg_chunk *c = next_chunk(r);
        if (!c)
            break;
        if (should_stop(r)) {
            rc = firn_err_set(&w->err, FIRN_ERR_CANCELLED, "backfill cancelled");
            break;
        }
        rc = chunk_with_retries(w, c, &w->err);
        if (!rc)
            rc = finish_chunk(w, c, &w->err);
        if (rc)
            break;
    }
    if (rc)
        runner_fail(r, rc, &w->err);
    return NULL;
}

static void worker_deinit(worker *w)
{
    firn_pg_copy_free(w->copy);
    firn_batch_free(w->batch);
    firn_pg_conn_close(w->conn);
}

firn_rc firn_pg_backfill_run(firn_pg_plan *plan, const firn_pg_backfill_opts *opts, firn_err *err)
{
    if (!opts->conn || !opts->on_batch || !opts->snapshot)
        return firn_err_set(err, FIRN_ERR_INVALID,
                            "backfill needs a connection, a snapshot and a "
                            "batch callback");
    if (!snapshot_name_ok(opts->snapshot))
        return firn_err_set(err, FIRN_ERR_INVALID, "invalid snapshot name \"%s\"", opts->snapshot);
    runner r = {.plan = plan, .opts = opts};
    r.batch_rows = opts->batch_rows ? opts->batch_rows : BATCH_ROWS_DEFAULT;
    r.batch_bytes = opts->batch_bytes ? opts->batch_bytes : BATCH_BYTES_DEFAULT;
    r.max_retries = opts->max_retries == 0  ? RETRIES_DEFAULT
                    : opts->max_retries < 0 ? 0
                                            : opts->max_retries;
    int n = opts->workers > 0 ? opts->workers : WORKERS_DEFAULT;
    if (n > WORKERS_MAX)
        n = WORKERS_MAX;
    pthread_mutex_init(&r.lock, NULL);
    pthread_mutex_init(&r.cb_lock, NULL);
    worker *ws = firn_calloc((size_t)n, sizeof(*ws));
    pthread_t *tids = firn_calloc((size_t)n, sizeof(*tids));
    int started = 0;
    for (; started < n; started++) {
        ws[started].r = &r;
        ws[started].index = started;
        if (pthread_create(&tids[started], NULL, worker_main, &ws[started]) != 0) {
            firn_err e = {0};
            firn_err_set(&e, FIRN_ERR_INTERNAL, "could not start backfill worker thread");
            runner_fail(&r, FIRN_ERR_INTERNAL, &e);
            break;
        }
    }
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    for (int i = 0; i < n; i++)
        worker_deinit(&ws[i]);
    firn_free(ws);
    firn_free(tids);
    pthread_mutex_destroy(&r.lock);
    pthread_mutex_destroy(&r.cb_lock);
    if (r.failed) {
        if (err)
            *err = r.err;
        return r.rc;
    }
    return FIRN_OK;
}
