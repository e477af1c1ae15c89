/* SPDX-License-Identifier: Apache-2.0 */
/* PostgreSQL change stream: the pgoutput logical replication protocol (decoder and encoder of
 * every message, protocol versions 1-4), the replication connection with its feedback loop,
 * and the transaction assembler that hands the engine committed transactions in commit order.
 * Protocol reference: PostgreSQL docs "Logical Streaming Replication Protocol" and "Logical
 * Replication Message Formats"; server side src/backend/replication/logical/proto.c. */
#ifndef FIRN_PGOUTPUT_H
#define FIRN_PGOUTPUT_H

#include "firn/util.h"

/** Microseconds between the Unix epoch and the PostgreSQL epoch (2000-01-01 UTC). */
#define FIRN_PGO_EPOCH_OFFSET_US INT64_C(946684800000000)

/* ------------------------------------------------------------------------------------------------
 * pgoutput messages (the payload of an XLogData message)
 * ----------------------------------------------------------------------------------------------*/

/** pgoutput message types; the value is the tag byte on the wire. */
typedef enum firn_pgo_msg_type {
    FIRN_PGO_BEGIN = 'B',
    FIRN_PGO_MESSAGE = 'M', /* logical decoding message (pg_logical_emit_message) */
    FIRN_PGO_COMMIT = 'C',
    FIRN_PGO_ORIGIN = 'O',
    FIRN_PGO_RELATION = 'R',
    FIRN_PGO_TYPE = 'Y',
    FIRN_PGO_INSERT = 'I',
    FIRN_PGO_UPDATE = 'U',
    FIRN_PGO_DELETE = 'D',
    FIRN_PGO_TRUNCATE = 'T',
    FIRN_PGO_STREAM_START = 'S', /* v2+ */
    FIRN_PGO_STREAM_STOP = 'E',
    FIRN_PGO_STREAM_COMMIT = 'c',
    FIRN_PGO_STREAM_ABORT = 'A',
    FIRN_PGO_BEGIN_PREPARE = 'b', /* v3+ two-phase */
    FIRN_PGO_PREPARE = 'P',
    FIRN_PGO_COMMIT_PREPARED = 'K',
    FIRN_PGO_ROLLBACK_PREPARED = 'r',
    FIRN_PGO_STREAM_PREPARE = 'p',
} firn_pgo_msg_type;

/** Kinds of a tuple column; the value is the tag byte on the wire. */
typedef enum firn_pgo_col_kind {
    FIRN_PGO_COL_NULL = 'n',
    FIRN_PGO_COL_UNCHANGED =
        'u',                   /* unchanged TOASTed value: not sent, see pgo_toast / docs/cdc.md */
    FIRN_PGO_COL_TEXT = 't',   /* type's text output */
    FIRN_PGO_COL_BINARY = 'b', /* type's binary send format (binary 'true') */
} firn_pgo_col_kind;

/** One column of a tuple: kind and, for text/binary, the value bytes (borrowed). */
typedef struct firn_pgo_col {
    uint8_t kind; /* firn_pgo_col_kind */
    firn_slice value;
} firn_pgo_col;

/** TupleData: n_cols columns (cols borrowed from the message holding it). */
typedef struct firn_pgo_tuple {
    uint16_t n_cols;
    firn_pgo_col *cols;
} firn_pgo_tuple;

/** Column of a Relation message. */
typedef struct firn_pgo_relcol {
    uint8_t flags; /* 1: part of the replica identity key */
    const char *name;
    uint32_t type_oid;
    int32_t typmod; /* -1 when none */
} firn_pgo_relcol;

/** Truncate option flags. */
#define FIRN_PGO_TRUNCATE_CASCADE          1
#define FIRN_PGO_TRUNCATE_RESTART_IDENTITY 2

/** A decoded pgoutput message. Strings and value slices point into the decoded input, which
 * must stay alive and unchanged while the message is used; column arrays live in the message
 * (reused by the next decode into it). Times are microseconds since the PostgreSQL epoch
 * (add FIRN_PGO_EPOCH_OFFSET_US for Unix). Initialise with firn_pgo_msg_init. */
typedef struct firn_pgo_msg {
    firn_pgo_msg_type type;
    bool has_xid; /* R Y I U D T M inside a stream block carry the (sub)transaction id */
    uint32_t xid; /* that id when has_xid */
    union {
        struct {
            uint64_t final_lsn;
            int64_t commit_time;
            uint32_t xid;
        } begin;
        struct {
            uint8_t flags;
            uint64_t commit_lsn;
            uint64_t end_lsn;
            int64_t commit_time;
        } commit;
        struct {
            uint64_t commit_lsn;
            const char *name;
        } origin;
        struct {
            uint32_t relid;
            const char *nspname;
            const char *relname;
            uint8_t replident; /* 'd' default, 'n' nothing, 'f' full, 'i' index */
            uint16_t n_cols;
            firn_pgo_relcol *cols;
        } relation;
        struct {
            uint32_t type_oid;
            const char *nspname;
            const char *typname;
        } pgtype;
        /* I, U, D. old_kind: 'K' (old key columns), 'O' (whole old row) or 0 (none; insert
         * and update without identity change). Insert/update have new_tuple; delete has only
         * old_tuple. */
        struct {
            uint32_t relid;
            uint8_t old_kind;
            firn_pgo_tuple old_tuple;
            firn_pgo_tuple new_tuple;
        } change;
        struct {
            uint32_t n_relids;
            uint8_t options; /* FIRN_PGO_TRUNCATE_* */
            uint32_t *relids;
        } truncate;
        struct {
            uint8_t flags; /* 1: transactional */
            uint64_t lsn;
            const char *prefix;
            firn_slice content;
        } message;
        struct {
            uint32_t xid;
            uint8_t first_segment;
        } stream_start;
        struct {
            uint32_t xid;
            uint8_t flags;
            uint64_t commit_lsn;
            uint64_t end_lsn;
            int64_t commit_time;
        } stream_commit;
        struct {
            uint32_t xid;
            uint32_t subxid;
            bool has_lsn; /* v4 with streaming = parallel */
            uint64_t abort_lsn;
            int64_t abort_time;
        } stream_abort;
        /* b, P, K, p: lsn is the prepare (b, P, p) or commit (K) LSN. */
        struct {
            uint8_t flags;
            uint64_t lsn;
            uint64_t end_lsn;
            int64_t time;
            uint32_t xid;
            const char *gid;
        } prepare;
        struct {
            uint8_t flags;
            uint64_t prepare_end_lsn;
            uint64_t rollback_end_lsn;
            int64_t prepare_time;
            int64_t rollback_time;
            uint32_t xid;
            const char *gid;
        } rollback_prepared;
    };
    /* Storage reused across decodes; private. */
    firn_pgo_relcol *relcols_;
    size_t relcols_cap_;
    firn_pgo_col *cols_[2];
    size_t cols_cap_[2];
    uint32_t *relids_;
    size_t relids_cap_;
} firn_pgo_msg;

/** Decoding context: what the surrounding stream says about the next message. */
typedef struct firn_pgo_proto_opts {
    uint32_t proto_version; /* 1..4; messages newer than this are rejected */
    bool in_stream;         /* between Stream Start and Stream Stop: R Y I U D T M carry an xid */
    bool parallel_abort;    /* v4 streaming = parallel: Stream Abort carries LSN and time */
} firn_pgo_proto_opts;

/** Initialises an empty message (no allocation). */
void firn_pgo_msg_init(firn_pgo_msg *m);
/** Frees the message's column storage (NULL accepted); m can be re-initialised. */
void firn_pgo_msg_deinit(firn_pgo_msg *m);

/** Decodes one pgoutput message from len bytes at p (borrowed; the message points into it).
 * Errors: FIRN_ERR_PROTOCOL for an unrecognized message type ("unrecognized message type
 * 'Z'"), an unknown tuple column kind or old-tuple marker, a message not defined in
 * opts->proto_version, bytes left over or a message cut short ("insufficient data left in
 * message"). Not thread-safe per message; different messages are independent. */
FIRN_MUST_CHECK firn_rc firn_pgo_msg_decode(
    firn_pgo_msg *m, const void *p, size_t len, const firn_pgo_proto_opts *opts, firn_err *err);

/** Appends the wire form of m to out (the inverse of firn_pgo_msg_decode with the same opts):
 * FIRN_ERR_INVALID for a type or column kind the protocol does not know, FIRN_ERR_TOO_LARGE
 * when out is full (out then holds a partial message: truncate it). */
FIRN_MUST_CHECK firn_rc firn_pgo_msg_encode(firn_buf *out,
                                            const firn_pgo_msg *m,
                                            const firn_pgo_proto_opts *opts,
                                            firn_err *err);

/** Name of a message type ("Begin", "Stream Commit"), "unknown" otherwise; static storage. */
const char *firn_pgo_msg_type_name(int type);

/* ------------------------------------------------------------------------------------------------
 * Streaming replication CopyData messages (docs: "Streaming Replication Protocol")
 * ----------------------------------------------------------------------------------------------*/

/** A CopyData message of the replication stream. */
typedef struct firn_pgo_copy {
    uint8_t kind; /* 'w' XLogData, 'k' primary keepalive (server -> client); 'r' standby status
                     update (client -> server) */
    uint64_t wal_start; /* w: start of the data */
    uint64_t wal_end;   /* w, k: current end of WAL on the server */
    int64_t send_time;  /* w, k, r: microseconds since the PostgreSQL epoch */
    bool reply_requested;
    firn_slice payload; /* w: the pgoutput message (borrowed from the input) */
    uint64_t write_lsn; /* r */
    uint64_t flush_lsn; /* r */
    uint64_t apply_lsn; /* r */
} firn_pgo_copy;

/** Decodes a CopyData payload of kind 'w', 'k' or 'r'. FIRN_ERR_PROTOCOL for other kinds
 * ("unrecognized replication message type 'x'"), short or overlong messages. */
FIRN_MUST_CHECK firn_rc firn_pgo_copy_decode(firn_pgo_copy *out,
                                             const void *p,
                                             size_t len,
                                             firn_err *err);
/** Appends the wire form of c (kind 'w', 'k' or 'r') to out. FIRN_ERR_INVALID for another
 * kind, FIRN_ERR_TOO_LARGE when out is full. */
FIRN_MUST_CHECK firn_rc firn_pgo_copy_encode(firn_buf *out, const firn_pgo_copy *c, firn_err *err);

/* ------------------------------------------------------------------------------------------------
 * Relations known to a stream (the relation cache)
 * ----------------------------------------------------------------------------------------------*/

/** A relation as last described by a Relation message (owned by the stream). */
typedef struct firn_pgo_rel {
    uint32_t relid;
    char *nspname;
    char *relname;
    uint8_t replident; /* 'd' 'n' 'f' 'i' */
    uint16_t n_cols;
    firn_pgo_relcol *cols; /* names owned by the rel */
    uint32_t version;      /* 1 for the first description, +1 for each change */
} firn_pgo_rel;

/* ------------------------------------------------------------------------------------------------
 * Events handed to the engine
 * ----------------------------------------------------------------------------------------------*/

/** What firn_pgo_stream_next delivers: one message of a committed transaction, in commit
 * order. A transaction is BEGIN, then RELATION/TYPE/ORIGIN/INSERT/UPDATE/DELETE/TRUNCATE/
 * MESSAGE events, then COMMIT; streamed (v2) transactions are assembled first, so the engine
 * never sees Stream Start/Stop/Commit/Abort and never an aborted change. type 0: nothing
 * arrived before the timeout. Everything is borrowed and valid until the next call on the
 * stream. */
typedef struct firn_pgo_event {
    int type;          /* firn_pgo_msg_type, or 0 for "nothing yet" */
    firn_pgo_msg *msg; /* the message (mutable so the engine can resolve TOAST in place) */
    /* The transaction the event belongs to (valid for every non-0 event). */
    uint32_t xid;
    uint64_t commit_lsn;    /* position of the commit record: the row's source position */
    uint64_t end_lsn;       /* end of the commit record: the LSN to confirm once committed */
    int64_t commit_time_us; /* Unix epoch microseconds */
    bool streamed;          /* the transaction arrived in streamed chunks */
    /* INSERT/UPDATE/DELETE/RELATION: the relation (for RELATION: its new description). */
    const firn_pgo_rel *rel;
    /* RELATION only: the previous description when this one differs from it (a schema change
     * to apply before the following rows), NULL for a first or identical description. */
    const firn_pgo_rel *prev_rel;
} firn_pgo_event;

/* ------------------------------------------------------------------------------------------------
 * The replication stream
 * ----------------------------------------------------------------------------------------------*/

/** Settings of a stream. Strings are borrowed for the lifetime of the stream. */
typedef struct firn_pgo_config {
    const char *conninfo;  /* libpq conninfo or URI of the source database */
    const char *slot_name; /* logical replication slot using pgoutput */
    const char *const *publications;
    size_t n_publications;
    size_t mem_budget_bytes; /* memory for streamed transactions before spilling; 0: 64 MiB */
    const char *spill_dir;   /* folder for spill files; NULL: $TMPDIR or /tmp */
    int status_interval_ms;  /* standby status update period; 0: 10000 */
    /* Once streaming: nothing from the server for this long (its keepalives included; after a
     * third of it a status update asks for one) ends the stream with FIRN_ERR_NETWORK. 0:
     * 60000; negative: no limit. */
    int recv_timeout_ms;
    uint32_t proto_version; /* 0: by server version (14: 2, 15: 3, 16+: 4, else 1) */
    bool text_values;       /* true: text values even where binary mode is available */
    bool no_streaming;      /* true: never ask for streaming of in-progress transactions */
    /* Preflight only: a publication that does not exist yet is not an error (the caller creates
     * it, covering the tables, before streaming); tables are then not checked against it. */
    bool publications_may_be_missing;
    /* Preflight only: a slot active for another process (a running sync) is logged, not an
     * error. */
    bool slot_may_be_active;
} firn_pgo_config;

/** A table the stream must carry (for preflight checks). */
typedef struct firn_pgo_table {
    const char *schema;
    const char *name;
    /* The columns the stream selects (borrowed; n_columns 0: every column): only these count
     * for the TOAST warning. */
    const char *const *columns;
    size_t n_columns;
} firn_pgo_table;

/** Warnings from firn_pgo_stream_preflight that do not stop the stream. Owned; free with
 * firn_pgo_report_deinit. */
typedef struct firn_pgo_report {
    /* Tables whose REPLICA IDENTITY is not FULL and that have TOAST-able columns among the
     * selected ones (firn_pgo_table.columns): an update
     * that leaves such a column untouched sends it as "unchanged" (docs/cdc.md). "schema.name",
     * owned. */
    char **toast_risk;
    size_t n_toast_risk;
    /* Tables of the publications (any, selected or not; at most 50) that have neither a primary
     * key nor another replica identity while a publication carries updates or deletes:
     * PostgreSQL then refuses every UPDATE and DELETE on them ("cannot update table ... because
     * it does not have a replica identity and publishes updates"), the application's too.
     * "schema.name", owned. */
    char **no_identity;
    size_t n_no_identity;
} firn_pgo_report;

/** Frees the report's strings (NULL accepted). */
void firn_pgo_report_deinit(firn_pgo_report *r);

typedef struct firn_pgo_stream firn_pgo_stream;

/** Opens a replication connection (replication=database) with fixed session settings
 * (DateStyle ISO, TimeZone UTC, IntervalStyle iso_8601, extra_float_digits 3, bytea_output
 * hex). Returns an owned stream in *out (free with firn_pgo_stream_free). Errors:
 * FIRN_ERR_NETWORK/FIRN_ERR_AUTH/FIRN_ERR_SOURCE with libpq's message. Not thread-safe: one
 * thread uses a stream at a time. */
FIRN_MUST_CHECK firn_rc firn_pgo_stream_open(const firn_pgo_config *cfg,
                                             firn_pgo_stream **out,
                                             firn_err *err);

/** Checks up front what the stream needs, each failure one error saying what to run:
 * wal_level = logical; the REPLICATION attribute; the slot exists (unless slot_may_be_missing),
 * uses pgoutput, belongs to this database, is not active for another process and not
 * invalidated (wal_status lost); each publication exists and covers every table (through a
 * partition root or the partitions); no table has REPLICA IDENTITY NOTHING (or DEFAULT
 * without a primary key) while updates or deletes are published; SELECT on each table.
 * Errors: FIRN_ERR_CONFIG (setup to fix), FIRN_ERR_PERMISSION, FIRN_ERR_NOT_FOUND (slot or
 * publication missing), FIRN_ERR_SOURCE. Fills rep (may be NULL) with warnings. Must run
 * before firn_pgo_stream_create_slot / _start. */
FIRN_MUST_CHECK firn_rc firn_pgo_stream_preflight(firn_pgo_stream *s,
                                                  const firn_pgo_table *tables,
                                                  size_t n_tables,
                                                  bool slot_may_be_missing,
                                                  firn_pgo_report *rep,
                                                  firn_err *err);

/** Creates the slot (pgoutput) with an exported snapshot. Returns the snapshot name (owned,
 * free with firn_free) for SET TRANSACTION SNAPSHOT in the backfill connections, and the
 * consistent point: the LSN the stream must start at. The snapshot stays valid until the next
 * call on this stream (firn_pgo_stream_start); import it everywhere first. Errors:
 * FIRN_ERR_EXISTS (slot exists), FIRN_ERR_SOURCE. */
FIRN_MUST_CHECK firn_rc firn_pgo_stream_create_slot(firn_pgo_stream *s,
                                                    char **out_snapshot,
                                                    uint64_t *out_consistent_lsn,
                                                    firn_err *err);

/** Starts streaming from start_lsn (0: the slot's confirmed position) and the receiver thread
 * that owns the connection from then on: it reads ahead into a bounded queue, answers keepalives
 * and sends status updates while the caller is busy (docs/cdc.md "Feedback"). Everything the
 * stream delivers before the engine confirms is redelivered after a restart. Errors:
 * FIRN_ERR_UNAVAILABLE (the slot is active for another process, e.g. the server's walsender of
 * a connection that dropped, not yet gone; or the server is shutting down), FIRN_ERR_SOURCE
 * (slot missing, invalidated: the message says so and what to run), FIRN_ERR_NETWORK, FIRN_ERR_IO
 * (the thread could not start). */
FIRN_MUST_CHECK firn_rc firn_pgo_stream_start(firn_pgo_stream *s,
                                              uint64_t start_lsn,
                                              firn_err *err);

/** Delivers the next event of a committed transaction, waiting at most timeout_ms (0: do not
 * wait); ev->type 0 when nothing arrived in time, or at once after a keepalive that asks for a
 * reply (firn_pgo_stream_take_reply_request). The receiver thread answers the server
 * meanwhile, also between calls however far apart. Errors: FIRN_ERR_NETWORK
 * (connection dropped or silent for recv_timeout_ms: restart the stream, nothing is lost),
 * FIRN_ERR_UNAVAILABLE (the server ended the stream: it is shutting down or restarting, or an
 * administrator ended the walsender), FIRN_ERR_SOURCE (server error, e.g. slot invalidated),
 * FIRN_ERR_PROTOCOL (undecodable message), FIRN_ERR_IO (spill file). Those two first set
 * firn_pgo_stream_lost. The event borrows from the stream until the next call. */
FIRN_MUST_CHECK firn_rc firn_pgo_stream_next(firn_pgo_stream *s,
                                             int timeout_ms,
                                             firn_pgo_event *ev,
                                             firn_err *err);

/** Tells the stream that every transaction whose COMMIT event had end_lsn <= flushed_lsn is
 * durably committed in the catalog. Reported as flush position in the next status update
 * (the server may then recycle that WAL); never moves backwards. When the engine has
 * confirmed everything delivered and no transaction is open, the stream also confirms the
 * server's WAL end so an idle publication does not pin WAL. */
void firn_pgo_stream_confirm(firn_pgo_stream *s, uint64_t flushed_lsn);

/** Sends a standby status update now (e.g. before a long pause); once streaming, the receiver
 * thread sends it. Errors: FIRN_ERR_NETWORK (before streaming only). */
FIRN_MUST_CHECK firn_rc firn_pgo_stream_send_status(firn_pgo_stream *s, firn_err *err);

/** True once after the server sent a keepalive asking for a reply, counted when the messages
 * before it were handed out by firn_pgo_stream_next (then clears the flag). A walsender asks
 * only when it heard nothing for half of wal_sender_timeout, or, over and over, while the server
 * shuts down: it then waits until the flush position reaches everything it sent (PostgreSQL's
 * walsender.c WalSndDone), so the caller should commit what it buffers and confirm it instead of
 * holding the shutdown (and every new connection) until its next commit. Engine thread only. */
bool firn_pgo_stream_take_reply_request(firn_pgo_stream *s);

/** True once firn_pgo_stream_next failed because the connection was lost or went silent, or
 * the server ended the stream (FIRN_ERR_NETWORK, FIRN_ERR_UNAVAILABLE): a new stream on the
 * same slot resumes at its confirmed position and loses nothing. Engine thread only. */
bool firn_pgo_stream_lost(const firn_pgo_stream *s);

/** The relation with id relid as currently known, or NULL (borrowed). */
const firn_pgo_rel *firn_pgo_stream_rel(const firn_pgo_stream *s, uint32_t relid);

/** Counters of a stream. */
typedef struct firn_pgo_stats {
    uint64_t bytes_received; /* pgoutput payload bytes */
    uint64_t messages;       /* pgoutput messages */
    uint64_t txns_delivered; /* committed transactions handed out */
    uint64_t txns_streamed;  /* of those, assembled from streamed chunks */
    uint64_t txns_aborted;   /* streamed transactions discarded */
    uint64_t spilled_bytes;  /* bytes written to spill files */
    uint64_t flushed_lsn;    /* last flush position reported to the server */
    uint64_t idle_wal_end;   /* highest WAL end of a keepalive received with no transaction
                              * open: every transaction committed before it was handed out */
    uint64_t wal_end_seen;   /* highest WAL position of a message handed out (XLogData or
                              * keepalive): no flush position reported can be past it */
    uint32_t server_version; /* server_version_num */
    uint32_t proto_version;  /* negotiated pgoutput version */
} firn_pgo_stats;

/** Copies the counters into out. */
void firn_pgo_stream_stats(const firn_pgo_stream *s, firn_pgo_stats *out);

/** Sends a last status update (best effort), ends the connection and frees everything
 * (NULL accepted). Spill files are removed. */
void firn_pgo_stream_free(firn_pgo_stream *s);

/* ------------------------------------------------------------------------------------------------
 * Unchanged TOAST values (docs/cdc.md "Unchanged TOAST values")
 * ----------------------------------------------------------------------------------------------*/

/** Result of resolving the unchanged ('u') columns of an UPDATE. */
typedef enum firn_pgo_toast_state {
    FIRN_PGO_TOAST_COMPLETE = 0, /* no 'u' column left */
    FIRN_PGO_TOAST_NEEDS_FETCH,  /* some remain: fetch them by key, see firn_pgo_toast_fetch_sql */
} firn_pgo_toast_state;

/** Replaces each 'u' column of the new tuple of an UPDATE event by the value of the same
 * column in the old tuple when the message carries the whole old row ('O', REPLICA IDENTITY
 * FULL). Values stay borrowed from the message. Returns the state after that. Thread-safe
 * (touches only msg). */
firn_pgo_toast_state firn_pgo_toast_from_old(firn_pgo_msg *msg);

/** Replaces each 'u' column of tuple by the column of prev, an earlier image of the same row
 * (same key) seen in this batch, when that column is not 'u' there. Values are borrowed from
 * prev, which must outlive tuple's use. tuple and prev must have the same column count
 * (FIRN_PGO_TOAST_NEEDS_FETCH otherwise, nothing changed). */
firn_pgo_toast_state firn_pgo_toast_from_prev(firn_pgo_tuple *tuple, const firn_pgo_tuple *prev);

/** True when tuple still has 'u' columns. */
bool firn_pgo_tuple_has_unchanged(const firn_pgo_tuple *tuple);

/** Builds the query that fetches the current values of tuple's 'u' columns by replica
 * identity key: "SELECT "c1", "c2" FROM "ns"."t" WHERE "k1" = $1 AND ..." into out, and the
 * indexes of the key columns (into rel->cols and the tuple) into key_idx (cap key_cap),
 * their count into out_n_keys. The engine runs it with the key values (text or binary per
 * tuple) on a normal connection. FIRN_ERR_UNSUPPORTED when the relation has no key column,
 * FIRN_ERR_TOO_LARGE when out or key_idx is too small. */
FIRN_MUST_CHECK firn_rc firn_pgo_toast_fetch_sql(firn_buf *out,
                                                 const firn_pgo_rel *rel,
                                                 const firn_pgo_tuple *tuple,
                                                 uint16_t *key_idx,
                                                 size_t key_cap,
                                                 size_t *out_n_keys,
                                                 firn_err *err);

#endif
