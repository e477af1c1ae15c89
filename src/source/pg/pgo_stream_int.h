/* SPDX-License-Identifier: Apache-2.0 */
/* Private to the pgoutput stream files: the stream object and libpq helpers shared by
 * pgo_stream.c (replication loop) and pgo_check.c (preflight checks). */
#ifndef FIRN_PGO_STREAM_INT_H
#define FIRN_PGO_STREAM_INT_H

#include "pgo_int.h"

#include <libpq-fe.h>

/* Called with every pgoutput message received (tests capture corpora with it). */
typedef void (*firn__pgo_capture_fn)(void *ctx,
                                     const firn_pgo_proto_opts *opts,
                                     const uint8_t *p,
                                     size_t len);

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
    uint64_t confirmed_lsn; /* what the engine confirmed */
    uint64_t flushed_lsn;   /* what was last reported as flushed */
    int64_t status_interval_ns;
    int64_t last_status_ns;
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
 * NOT_FOUND, EXISTS, PERMISSION, NETWORK (connection lost) or SOURCE. Returns the code. */
firn_rc firn__pgo_result_error(const PGresult *res, PGconn *conn, const char *what, firn_err *err);
/* Installs a hook that sees every pgoutput message received (NULL to remove). */
void firn__pgo_stream_set_capture(firn_pgo_stream *s, firn__pgo_capture_fn fn, void *ctx);

#endif
