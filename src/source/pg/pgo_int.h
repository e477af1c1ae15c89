/* SPDX-License-Identifier: Apache-2.0 */
/* Private to the pgoutput stream (src/source/pg/pgo_*.c): the session that turns pgoutput
 * messages into committed-transaction events (relation cache, streamed-transaction assembler
 * with spilling). No libpq here, so unit tests drive it with encoded messages. */
#ifndef FIRN_PGO_INT_H
#define FIRN_PGO_INT_H

#include "firn/pgoutput.h"

#include <stdio.h>

/* Largest pgoutput message accepted from a spill file (PostgreSQL values stop at 1 GiB). */
#define FIRN__PGO_MAX_MSG_BYTES ((size_t)1 << 31)
/* Default memory for streamed transactions before they spill to disk. */
#define FIRN__PGO_DEFAULT_BUDGET_BYTES ((size_t)64 << 20)

/* A subtransaction's first record in a streamed transaction (postgres apply worker
 * SubXactInfo): aborting it drops everything from there on. */
typedef struct firn__pgo_subxact {
    uint32_t xid;
    uint64_t offset;
} firn__pgo_subxact;

/* The buffered messages of one streamed (in-progress) transaction: records "u32 length,
 * message" in memory, or in an unlinked temporary file once the budget is exceeded. */
typedef struct firn__pgo_txbuf {
    uint32_t xid;
    firn_buf mem;
    FILE *file;
    uint64_t file_len;
    firn__pgo_subxact *subs;
    size_t n_subs;
    size_t cap_subs;
    uint32_t last_sub;
} firn__pgo_txbuf;

/* Replay progress of a committed streamed transaction. */
typedef enum firn__pgo_replay_phase {
    FIRN__PGO_REPLAY_NONE = 0,
    FIRN__PGO_REPLAY_BEGIN,
    FIRN__PGO_REPLAY_BODY,
    FIRN__PGO_REPLAY_COMMIT,
} firn__pgo_replay_phase;

typedef struct firn__pgo_sess {
    firn_pgo_proto_opts opts; /* in_stream is managed by the session */
    size_t mem_budget_bytes;
    size_t mem_used_bytes;
    const char *spill_dir;

    /* Relation cache, by relid (small: linear search). */
    firn_pgo_rel **rels;
    size_t n_rels;
    size_t cap_rels;
    firn_pgo_rel *retired; /* previous description, kept until the next event */

    /* Streamed transactions being received. */
    firn__pgo_txbuf **txns;
    size_t n_txns;
    size_t cap_txns;
    firn__pgo_txbuf *cur_stream; /* between Stream Start and Stream Stop */

    /* The message being delivered. */
    firn_buf in;
    firn_pgo_msg msg;
    bool pending; /* msg (from in) is an event not yet delivered */

    /* Replay of a committed streamed transaction. */
    firn__pgo_txbuf *replay;
    firn__pgo_replay_phase phase;
    uint64_t replay_off;
    firn_buf rec;

    /* The transaction being delivered. */
    bool in_txn;
    bool txn_has_data;
    bool txn_streamed;
    uint32_t txn_xid;
    uint64_t txn_commit_lsn;
    uint64_t txn_end_lsn;
    int64_t txn_commit_time;

    /* Delivery positions (for feedback): end LSN of the last transaction delivered, and of the
     * last one that carried changes. */
    uint64_t last_end_lsn;
    uint64_t last_data_end_lsn;

    uint64_t txns_delivered;
    uint64_t txns_streamed;
    uint64_t txns_aborted;
    uint64_t spilled_bytes;
} firn__pgo_sess;

/* Initialises a session for protocol proto_version with a memory budget (0: default) and a
 * spill folder (NULL: $TMPDIR or /tmp; borrowed). */
void firn__pgo_sess_init(firn__pgo_sess *s,
                         uint32_t proto_version,
                         size_t mem_budget_bytes,
                         const char *spill_dir);
/* Frees everything, closing (and so removing) spill files. */
void firn__pgo_sess_deinit(firn__pgo_sess *s);
/* Takes one pgoutput message (copied). Call only when firn__pgo_sess_next reported nothing
 * pending. FIRN_ERR_PROTOCOL for undecodable or out-of-place messages, FIRN_ERR_IO on spill
 * file errors. */
FIRN_MUST_CHECK firn_rc firn__pgo_sess_feed(firn__pgo_sess *s,
                                            const uint8_t *p,
                                            size_t len,
                                            firn_err *err);
/* Delivers the next pending event into ev (ev->type 0 when none). */
FIRN_MUST_CHECK firn_rc firn__pgo_sess_next(firn__pgo_sess *s, firn_pgo_event *ev, firn_err *err);
/* True when nothing is open: no transaction half delivered, no streamed one buffered. */
bool firn__pgo_sess_idle(const firn__pgo_sess *s);
/* The cached relation relid or NULL. */
const firn_pgo_rel *firn__pgo_sess_rel(const firn__pgo_sess *s, uint32_t relid);

#endif
