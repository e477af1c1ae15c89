/* SPDX-License-Identifier: Apache-2.0 */
/* Private to the pgoutput stream files: the stream object and libpq helpers shared by
 * pgo_stream.c (replication loop) and pgo_check.c (preflight checks). */
#ifndef FIRN_PGO_STREAM_INT_H
#define FIRN_PGO_STREAM_INT_H

#include "pgo_int.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>

/* Called with every pgoutput message received (tests capture corpora with it). */
typedef void (*firn__pgo_capture_fn)(void *ctx,
                                     const firn_pgo_proto_opts *opts,
                                     const uint8_t *p,
                                     size_t len);

/* A CopyData message the receiver thread queued: XLogData ('w', payload inside buf) or a
 * keepalive ('k', wal_end only). */
typedef struct firn__pgo_item {
    struct firn__pgo_item *next;
    char *buf; /* libpq's copy buffer (PQfreemem) or NULL */
    const uint8_t *payload;
    size_t len;
    uint64_t wal_start;
    uint64_t wal_end;
    uint8_t kind;
    bool reply_requested; /* a keepalive that asks for the position at once */
} firn__pgo_item;

/* The receiver thread (pgo_recv.c). mu guards the queue and the flags; report_lsn is written by
 * the engine's thread, reported_lsn by the receiver. */
typedef struct firn__pgo_recv {
    pthread_t thread;
    bool running;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a message queued or the thread ended */
    int wake[2];       /* pipe that wakes the thread from poll */
    firn__pgo_item *head, *tail;
    size_t bytes, max_bytes;
    bool stop, want_status, done;
    firn_rc rc; /* why the thread ended (after the queued messages) */
    firn_err err;
    _Atomic uint64_t report_lsn;   /* flush position to report (the engine's thread sets it) */
    _Atomic uint64_t reported_lsn; /* last flush position sent */
    int64_t timeout_ns;            /* silence that ends the stream (0: none) */
    int64_t heard_ns;              /* last message read (or the queue full: not reading) */
    int64_t ping_ns;               /* last status update that asked for a reply */
} firn__pgo_recv;

struct firn_pgo_stream {
    firn_pgo_config cfg;
    PGconn *conn;
    uint32_t server_version;
    uint32_t proto_version;
    bool binary;
    bool streaming;
    bool started;
    firn__pgo_sess sess;
    uint64_t received_lsn;  /* start of the last XLogData received */
    uint64_t idle_wal_end;  /* highest server WAL end seen in a keepalive while idle */
    bool reply_asked;       /* a keepalive asked for a reply since the engine last looked */
    bool lost;              /* the connection was lost or the server ended the stream */
    uint64_t wal_end_seen;  /* highest WAL position of a message handed out */
    uint64_t confirmed_lsn; /* what the engine confirmed */
    uint64_t flushed_lsn;   /* what was last reported as flushed (before the receiver starts) */
    int64_t status_interval_ns;
    int64_t last_status_ns; /* the receiver's once it runs */
    firn__pgo_recv recv;
    uint64_t bytes_received;
    uint64_t messages;
    firn__pgo_capture_fn capture;
    void *capture_ctx;
};

/* Formats an LSN as PostgreSQL does ("16/B374D848") into out. */
void firn__pgo_lsn_format(uint64_t lsn, char out[24]);
/* Parses "X/Y" (hexadecimal halves). FIRN_ERR_PARSE otherwise. */
FIRN_MUST_CHECK firn_rc firn__pgo_lsn_parse(const char *s, uint64_t *out, firn_err *err);
/* Sets err from a failed result ("could not <what>: <server message>"), classified by SQLSTATE:
 * NOT_FOUND, EXISTS, PERMISSION, UNAVAILABLE (slot active for another process, server shutting
 * down or the session terminated by an administrator), NETWORK (connection lost) or SOURCE.
 * Returns the code. */
firn_rc firn__pgo_result_error(const PGresult *res, PGconn *conn, const char *what, firn_err *err);
/* Sends a standby status update reporting flush (connection owner only). FIRN_ERR_NETWORK. */
FIRN_MUST_CHECK firn_rc firn__pgo_send_status_at(firn_pgo_stream *s, uint64_t flush, firn_err *err);
/* firn__pgo_send_status_at; with ask_reply the server answers at once with a keepalive. */
FIRN_MUST_CHECK firn_rc firn__pgo_send_status_ask(firn_pgo_stream *s,
                                                  uint64_t flush,
                                                  bool ask_reply,
                                                  firn_err *err);
/* The copy stream ended (r: PQgetCopyData's result): the server's reason or a lost connection. */
firn_rc firn__pgo_stream_ended(firn_pgo_stream *s, int r, firn_err *err);
/* Starts the receiver thread on a started stream; from then on only it uses s->conn. */
FIRN_MUST_CHECK firn_rc firn__pgo_recv_start(firn_pgo_stream *s, firn_err *err);
/* Stops and joins the receiver thread and frees its queue (no-op when it never started). */
void firn__pgo_recv_stop(firn_pgo_stream *s);
/* Publishes the flush position the receiver reports (never backwards); send_now: at once. */
void firn__pgo_recv_publish(firn_pgo_stream *s, uint64_t flush_lsn, bool send_now);
/* Takes the next queued message, waiting until *deadline_ns (monotonic; when negative, the
 * first wait sets it to now + timeout_ms, so a call that finds a message reads no clock); *out
 * NULL on timeout. The receiver's error once the queue is empty. Free the message with
 * firn__pgo_item_free. */
FIRN_MUST_CHECK firn_rc firn__pgo_recv_pop(
    firn_pgo_stream *s, int timeout_ms, int64_t *deadline_ns, firn__pgo_item **out, firn_err *err);
void firn__pgo_item_free(firn__pgo_item *it);
/* Installs a hook that sees every pgoutput message received (NULL to remove). */
void firn__pgo_stream_set_capture(firn_pgo_stream *s, firn__pgo_capture_fn fn, void *ctx);

#endif
