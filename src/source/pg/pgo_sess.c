/* SPDX-License-Identifier: Apache-2.0 */
/* The pgoutput session: relation cache and transaction assembler. Ordinary transactions pass
 * straight through (the server sends them whole after commit); streamed ones (protocol v2+)
 * are buffered per top-level xid, in memory up to a budget and then in an unlinked temporary
 * file, trimmed on subtransaction abort, dropped on abort, and replayed as one ordinary
 * transaction at Stream Commit, so the engine only sees committed transactions in commit order
 * (after postgres src/backend/replication/logical/worker.c, "STREAMED TRANSACTIONS"). */
#include "pgo_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void firn__pgo_sess_init(firn__pgo_sess *s,
                         uint32_t proto_version,
                         size_t mem_budget_bytes,
                         const char *spill_dir)
{
    memset(s, 0, sizeof(*s));
    s->opts.proto_version = proto_version;
    s->mem_budget_bytes = mem_budget_bytes ? mem_budget_bytes : FIRN__PGO_DEFAULT_BUDGET_BYTES;
    s->spill_dir = spill_dir;
    firn_buf_init(&s->in, FIRN__PGO_MAX_MSG_BYTES);
    firn_buf_init(&s->rec, FIRN__PGO_MAX_MSG_BYTES);
    firn_pgo_msg_init(&s->msg);
}

static void rel_free(firn_pgo_rel *r)
{
    if (!r)
        return;
    for (uint16_t i = 0; i < r->n_cols; i++)
        firn_free((char *)r->cols[i].name);
    firn_free(r->cols);
    firn_free(r->nspname);
    firn_free(r->relname);
    firn_free(r);
}

static void txbuf_free(firn__pgo_sess *s, firn__pgo_txbuf *t)
{
    if (!t)
        return;
    if (!t->file)
        s->mem_used_bytes -= t->mem.len;
    firn_buf_deinit(&t->mem);
    if (t->file)
        fclose(t->file);
    firn_free(t->subs);
    firn_free(t);
}

void firn__pgo_sess_deinit(firn__pgo_sess *s)
{
    for (size_t i = 0; i < s->n_rels; i++)
        rel_free(s->rels[i]);
    firn_free(s->rels);
    rel_free(s->retired);
    for (size_t i = 0; i < s->n_txns; i++)
        txbuf_free(s, s->txns[i]);
    firn_free(s->txns);
    txbuf_free(s, s->replay);
    firn_buf_deinit(&s->in);
    firn_buf_deinit(&s->rec);
    firn_pgo_msg_deinit(&s->msg);
    memset(s, 0, sizeof(*s));
}

bool firn__pgo_sess_idle(const firn__pgo_sess *s)
{
    return !s->in_txn && !s->pending && s->n_txns == 0 && !s->replay && !s->cur_stream;
}

/* ------------------------------------------------------------------------------------------------
 * Relation cache
 * ----------------------------------------------------------------------------------------------*/

static size_t rel_index(const firn__pgo_sess *s, uint32_t relid)
{
    for (size_t i = 0; i < s->n_rels; i++) {
        if (s->rels[i]->relid == relid)
            return i;
    }
    return SIZE_MAX;
}

const firn_pgo_rel *firn__pgo_sess_rel(const firn__pgo_sess *s, uint32_t relid)
{
    const size_t i = rel_index(s, relid);
    return i == SIZE_MAX ? NULL : s->rels[i];
}

static bool rel_same(const firn_pgo_rel *r, const firn_pgo_msg *m)
{
    if (strcmp(r->nspname, m->relation.nspname) != 0 ||
        strcmp(r->relname, m->relation.relname) != 0 || r->replident != m->relation.replident ||
        r->n_cols != m->relation.n_cols)
        return false;
    for (uint16_t i = 0; i < r->n_cols; i++) {
        const firn_pgo_relcol *a = &r->cols[i], *b = &m->relation.cols[i];
        if (a->flags != b->flags || a->type_oid != b->type_oid || a->typmod != b->typmod ||
            strcmp(a->name, b->name) != 0)
            return false;
    }
    return true;
}

static firn_pgo_rel *rel_from_msg(const firn_pgo_msg *m)
{
    firn_pgo_rel *r = firn_calloc(1, sizeof(*r));
    r->relid = m->relation.relid;
    r->nspname = firn_strdup(m->relation.nspname);
    r->relname = firn_strdup(m->relation.relname);
    r->replident = m->relation.replident;
    r->n_cols = m->relation.n_cols;
    r->cols = firn_calloc(r->n_cols ? r->n_cols : 1, sizeof(firn_pgo_relcol));
    for (uint16_t i = 0; i < r->n_cols; i++) {
        r->cols[i] = m->relation.cols[i];
        r->cols[i].name = firn_strdup(m->relation.cols[i].name);
    }
    r->version = 1;
    return r;
}

/* Applies a Relation message to the cache; fills the event's rel and prev_rel. */
static void apply_relation(firn__pgo_sess *s, firn_pgo_event *ev)
{
    const size_t i = rel_index(s, s->msg.relation.relid);
    if (i != SIZE_MAX && rel_same(s->rels[i], &s->msg)) {
        ev->rel = s->rels[i];
        return;
    }
    firn_pgo_rel *r = rel_from_msg(&s->msg);
    if (i == SIZE_MAX) {
        if (s->n_rels == s->cap_rels) {
            s->cap_rels = s->cap_rels ? s->cap_rels * 2 : 16;
            s->rels = firn_reallocarray(s->rels, s->cap_rels, sizeof(*s->rels));
        }
        s->rels[s->n_rels++] = r;
    } else {
        r->version = s->rels[i]->version + 1;
        rel_free(s->retired);
        s->retired = s->rels[i];
        s->rels[i] = r;
        ev->prev_rel = s->retired;
    }
    ev->rel = r;
}

/* Checks a change against its relation and fills ev->rel. */
static firn_rc bind_change(firn__pgo_sess *s, firn_pgo_event *ev, firn_err *err)
{
    const firn_pgo_msg *m = &s->msg;
    const firn_pgo_rel *r = firn__pgo_sess_rel(s, m->change.relid);
    if (!r)
        return firn_err_set(err, FIRN_ERR_PROTOCOL,
                            "%s for relation %u arrived before its Relation message",
                            firn_pgo_msg_type_name(m->type), (unsigned)m->change.relid);
    const firn_pgo_tuple *t[2] = {&m->change.old_tuple, &m->change.new_tuple};
    for (int k = 0; k < 2; k++) {
        if (t[k]->n_cols != 0 && t[k]->n_cols != r->n_cols)
            return firn_err_set(err, FIRN_ERR_PROTOCOL,
                                "%s for relation \"%s.%s\" has %u columns, its Relation message %u",
                                firn_pgo_msg_type_name(m->type), r->nspname, r->relname,
                                (unsigned)t[k]->n_cols, (unsigned)r->n_cols);
    }
    ev->rel = r;
    return FIRN_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Streamed transaction buffers
 * ----------------------------------------------------------------------------------------------*/

static size_t txn_index(const firn__pgo_sess *s, uint32_t xid)
{
    for (size_t i = 0; i < s->n_txns; i++) {
        if (s->txns[i]->xid == xid)
            return i;
    }
    return SIZE_MAX;
}

static firn__pgo_txbuf *txn_get(firn__pgo_sess *s, uint32_t xid)
{
    const size_t i = txn_index(s, xid);
    if (i != SIZE_MAX)
        return s->txns[i];
    firn__pgo_txbuf *t = firn_calloc(1, sizeof(*t));
    t->xid = xid;
    t->last_sub = xid;
    firn_buf_init(&t->mem, SIZE_MAX / 2);
    if (s->n_txns == s->cap_txns) {
        s->cap_txns = s->cap_txns ? s->cap_txns * 2 : 4;
        s->txns = firn_reallocarray(s->txns, s->cap_txns, sizeof(*s->txns));
    }
    s->txns[s->n_txns++] = t;
    return t;
}

/* Removes t from the list of open transactions (does not free it). */
static void txn_detach(firn__pgo_sess *s, firn__pgo_txbuf *t)
{
    const size_t i = txn_index(s, t->xid);
    FIRN_ASSERT(i != SIZE_MAX);
    s->txns[i] = s->txns[--s->n_txns];
}

static uint64_t txn_len(const firn__pgo_txbuf *t)
{
    return t->file ? t->file_len : t->mem.len;
}

static firn_rc spill_open(firn__pgo_sess *s, firn__pgo_txbuf *t, firn_err *err)
{
    const char *dir = s->spill_dir ? s->spill_dir : getenv("TMPDIR");
    char path[1024];
    int n = snprintf(path, sizeof(path), "%s/firn-pgo-%u-XXXXXX", dir && *dir ? dir : "/tmp",
                     (unsigned)t->xid);
    if (n < 0 || (size_t)n >= sizeof(path))
        return firn_err_set(err, FIRN_ERR_CONFIG, "spill folder path is too long");
    const int fd = mkstemp(path);
    if (fd < 0)
        return firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not create spill file \"%s\"",
                                  path);
    unlink(path); /* removed by the OS when closed, also after a crash */
    t->file = fdopen(fd, "w+b");
    if (!t->file) {
        const int e = errno;
        close(fd);
        return firn_err_set_errno(err, FIRN_ERR_IO, e, "could not open spill file");
    }
    if (t->mem.len && fwrite(t->mem.data, 1, t->mem.len, t->file) != t->mem.len)
        return firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not write spill file");
    t->file_len = t->mem.len;
    s->spilled_bytes += t->mem.len;
    s->mem_used_bytes -= t->mem.len;
    firn_buf_deinit(&t->mem);
    firn_buf_init(&t->mem, SIZE_MAX / 2);
    return FIRN_OK;
}

/* Notes the first record of a subtransaction (postgres subxact_info_add). */
static void note_subxact(firn__pgo_txbuf *t, uint32_t xid)
{
    if (xid == t->xid || xid == t->last_sub)
        return;
    t->last_sub = xid;
    for (size_t i = 0; i < t->n_subs; i++) {
        if (t->subs[i].xid == xid)
            return;
    }
    if (t->n_subs == t->cap_subs) {
        t->cap_subs = t->cap_subs ? t->cap_subs * 2 : 8;
        t->subs = firn_reallocarray(t->subs, t->cap_subs, sizeof(*t->subs));
    }
    t->subs[t->n_subs++] = (firn__pgo_subxact){xid, txn_len(t)};
}

static firn_rc
txn_append(firn__pgo_sess *s, firn__pgo_txbuf *t, const uint8_t *p, size_t len, firn_err *err)
{
    if (len > UINT32_MAX)
        return firn_err_set(err, FIRN_ERR_TOO_LARGE, "message of %zu bytes is too large", len);
    uint8_t hdr[4] = {(uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
                      (uint8_t)len};
    if (!t->file && s->mem_used_bytes + len + 4 > s->mem_budget_bytes)
        FIRN_TRY(spill_open(s, t, err));
    if (t->file) {
        if (fwrite(hdr, 1, 4, t->file) != 4 || fwrite(p, 1, len, t->file) != len)
            return firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not write spill file");
        t->file_len += len + 4;
        s->spilled_bytes += len + 4;
        return FIRN_OK;
    }
    const size_t before = t->mem.len;
    if (firn_buf_append(&t->mem, hdr, 4) || firn_buf_append(&t->mem, p, len)) {
        firn_buf_truncate(&t->mem, before);
        return firn_err_set(err, FIRN_ERR_TOO_LARGE, "streamed transaction buffer is full");
    }
    s->mem_used_bytes += len + 4;
    return FIRN_OK;
}

static firn_rc txn_truncate(firn__pgo_sess *s, firn__pgo_txbuf *t, uint64_t off, firn_err *err)
{
    if (!t->file) {
        s->mem_used_bytes -= t->mem.len - off;
        firn_buf_truncate(&t->mem, (size_t)off);
        return FIRN_OK;
    }
    if (fflush(t->file) != 0 || ftruncate(fileno(t->file), (off_t)off) != 0 ||
        fseeko(t->file, (off_t)off, SEEK_SET) != 0)
        return firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not truncate spill file");
    t->file_len = off;
    return FIRN_OK;
}

/* Stream Abort: drops the whole transaction, or a subtransaction and everything after its
 * first change. */
static firn_rc stream_abort(firn__pgo_sess *s, firn_err *err)
{
    const uint32_t xid = s->msg.stream_abort.xid, subxid = s->msg.stream_abort.subxid;
    const size_t i = txn_index(s, xid);
    if (i == SIZE_MAX)
        return FIRN_OK; /* nothing was streamed for it */
    firn__pgo_txbuf *t = s->txns[i];
    if (xid == subxid) {
        txn_detach(s, t);
        txbuf_free(s, t);
        s->txns_aborted++;
        return FIRN_OK;
    }
    for (size_t k = 0; k < t->n_subs; k++) {
        if (t->subs[k].xid == subxid) {
            FIRN_TRY(txn_truncate(s, t, t->subs[k].offset, err));
            t->n_subs = k;
            t->last_sub = t->xid;
            break;
        }
    }
    return FIRN_OK;
}

static firn_rc stream_commit(firn__pgo_sess *s, firn_err *err)
{
    const size_t i = txn_index(s, s->msg.stream_commit.xid);
    if (i == SIZE_MAX)
        return firn_err_set(err, FIRN_ERR_PROTOCOL,
                            "Stream Commit for transaction %u that was never streamed",
                            (unsigned)s->msg.stream_commit.xid);
    firn__pgo_txbuf *t = s->txns[i];
    txn_detach(s, t);
    s->replay = t;
    s->phase = FIRN__PGO_REPLAY_BEGIN;
    s->replay_off = 0;
    s->txn_xid = t->xid;
    s->txn_commit_lsn = s->msg.stream_commit.commit_lsn;
    s->txn_end_lsn = s->msg.stream_commit.end_lsn;
    s->txn_commit_time = s->msg.stream_commit.commit_time;
    if (t->file && (fflush(t->file) != 0 || fseeko(t->file, 0, SEEK_SET) != 0))
        return firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not rewind spill file");
    FIRN_LOG(FIRN_LOG_INFO, "pg",
             "streamed transaction %u committed: %llu bytes of changes, %s; replaying it",
             (unsigned)t->xid, (unsigned long long)txn_len(t),
             t->file ? "spilled to a temporary file" : "held in memory");
    return FIRN_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Feeding messages
 * ----------------------------------------------------------------------------------------------*/

/* A message inside a stream block: checked, then buffered raw with its subtransaction noted. */
static firn_rc feed_in_stream(firn__pgo_sess *s, const uint8_t *p, size_t len, firn_err *err)
{
    FIRN_TRY(firn_pgo_msg_decode(&s->msg, p, len, &s->opts, err));
    switch (s->msg.type) {
    case FIRN_PGO_STREAM_STOP:
        s->cur_stream = NULL;
        s->opts.in_stream = false;
        return FIRN_OK;
    case FIRN_PGO_ORIGIN:
        break;
    case FIRN_PGO_RELATION:
    case FIRN_PGO_TYPE:
    case FIRN_PGO_INSERT:
    case FIRN_PGO_UPDATE:
    case FIRN_PGO_DELETE:
    case FIRN_PGO_TRUNCATE:
    case FIRN_PGO_MESSAGE:
        note_subxact(s->cur_stream, s->msg.xid);
        break;
    default:
        return firn_err_set(err, FIRN_ERR_PROTOCOL, "unexpected %s message inside a stream block",
                            firn_pgo_msg_type_name(s->msg.type));
    }
    return txn_append(s, s->cur_stream, p, len, err);
}

static firn_rc feed_stream_control(firn__pgo_sess *s, firn_err *err)
{
    if (s->in_txn)
        return firn_err_set(err, FIRN_ERR_PROTOCOL, "unexpected %s message inside transaction %u",
                            firn_pgo_msg_type_name(s->msg.type), (unsigned)s->txn_xid);
    switch (s->msg.type) {
    case FIRN_PGO_STREAM_START:
        s->cur_stream = txn_get(s, s->msg.stream_start.xid);
        s->opts.in_stream = true;
        return FIRN_OK;
    case FIRN_PGO_STREAM_STOP:
        return firn_err_set(err, FIRN_ERR_PROTOCOL, "Stream Stop outside a stream block");
    case FIRN_PGO_STREAM_ABORT:
        return stream_abort(s, err);
    default:
        return stream_commit(s, err);
    }
}

firn_rc firn__pgo_sess_feed(firn__pgo_sess *s, const uint8_t *p, size_t len, firn_err *err)
{
    FIRN_ASSERT(!s->pending && !s->replay);
    if (len == 0)
        return firn_err_set(err, FIRN_ERR_PROTOCOL, "empty pgoutput message");
    if (s->cur_stream)
        return feed_in_stream(s, p, len, err);
    firn_buf_reset(&s->in);
    if (firn_buf_append(&s->in, p, len))
        return firn_err_set(err, FIRN_ERR_TOO_LARGE, "pgoutput message of %zu bytes is too large",
                            len);
    FIRN_TRY(firn_pgo_msg_decode(&s->msg, s->in.data, s->in.len, &s->opts, err));
    switch (s->msg.type) {
    case FIRN_PGO_STREAM_START:
    case FIRN_PGO_STREAM_STOP:
    case FIRN_PGO_STREAM_COMMIT:
    case FIRN_PGO_STREAM_ABORT:
        return feed_stream_control(s, err);
    case FIRN_PGO_BEGIN_PREPARE:
    case FIRN_PGO_PREPARE:
    case FIRN_PGO_COMMIT_PREPARED:
    case FIRN_PGO_ROLLBACK_PREPARED:
    case FIRN_PGO_STREAM_PREPARE:
        return firn_err_set(err, FIRN_ERR_PROTOCOL,
                            "unexpected %s message: two-phase decoding was not requested",
                            firn_pgo_msg_type_name(s->msg.type));
    case FIRN_PGO_BEGIN:
        if (s->in_txn)
            return firn_err_set(err, FIRN_ERR_PROTOCOL, "Begin inside transaction %u",
                                (unsigned)s->txn_xid);
        break;
    case FIRN_PGO_MESSAGE:
        if (!s->in_txn && (s->msg.message.flags & 1))
            return firn_err_set(err, FIRN_ERR_PROTOCOL,
                                "transactional Message outside a transaction");
        break;
    default:
        if (!s->in_txn)
            return firn_err_set(err, FIRN_ERR_PROTOCOL, "%s message outside a transaction",
                                firn_pgo_msg_type_name(s->msg.type));
        break;
    }
    s->pending = true;
    return FIRN_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Delivering events
 * ----------------------------------------------------------------------------------------------*/

/* Turns the decoded message s->msg into an event (transaction bookkeeping, relation cache). */
static firn_rc make_event(firn__pgo_sess *s, firn_pgo_event *ev, firn_err *err)
{
    switch (s->msg.type) {
    case FIRN_PGO_BEGIN:
        s->in_txn = true;
        s->txn_has_data = false;
        if (!s->replay) {
            s->txn_streamed = false;
            s->txn_xid = s->msg.begin.xid;
            s->txn_commit_lsn = s->msg.begin.final_lsn;
            s->txn_end_lsn = 0;
            s->txn_commit_time = s->msg.begin.commit_time;
        }
        break;
    case FIRN_PGO_COMMIT:
        s->txn_end_lsn = s->msg.commit.end_lsn;
        s->in_txn = false;
        s->last_end_lsn = s->txn_end_lsn;
        if (s->txn_has_data)
            s->last_data_end_lsn = s->txn_end_lsn;
        s->txns_delivered++;
        break;
    case FIRN_PGO_RELATION:
        apply_relation(s, ev);
        break;
    case FIRN_PGO_INSERT:
    case FIRN_PGO_UPDATE:
    case FIRN_PGO_DELETE:
        FIRN_TRY(bind_change(s, ev, err));
        s->txn_has_data = true;
        break;
    case FIRN_PGO_TRUNCATE:
        s->txn_has_data = true;
        break;
    default:
        break;
    }
    ev->type = s->msg.type;
    ev->msg = &s->msg;
    ev->xid = s->txn_xid;
    ev->commit_lsn = s->txn_commit_lsn;
    ev->end_lsn = s->txn_end_lsn;
    /* A commit time within FIRN_PGO_EPOCH_OFFSET_US of INT64_MAX (no server sends one; a
     * corrupt message may) saturates instead of overflowing. */
    ev->commit_time_us = s->txn_commit_time > INT64_MAX - FIRN_PGO_EPOCH_OFFSET_US
                             ? INT64_MAX
                             : s->txn_commit_time + FIRN_PGO_EPOCH_OFFSET_US;
    ev->streamed = s->txn_streamed;
    return FIRN_OK;
}

/* Reads the next record of the replayed transaction into s->msg; false at its end. */
static firn_rc replay_read(firn__pgo_sess *s, bool *out_more, firn_err *err)
{
    firn__pgo_txbuf *t = s->replay;
    const uint8_t *p;
    size_t len;
    *out_more = s->replay_off < txn_len(t);
    if (!*out_more)
        return FIRN_OK;
    if (!t->file) {
        const uint8_t *h = t->mem.data + s->replay_off;
        len = (size_t)h[0] << 24 | (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
        p = h + 4;
    } else {
        uint8_t h[4];
        if (fread(h, 1, 4, t->file) != 4)
            return firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not read spill file");
        len = (size_t)h[0] << 24 | (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
        firn_buf_reset(&s->rec);
        FIRN_TRY(firn_buf_reserve(&s->rec, len));
        if (fread(s->rec.data, 1, len, t->file) != len)
            return firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not read spill file");
        p = s->rec.data;
    }
    s->replay_off += len + 4;
    const firn_pgo_proto_opts o = {s->opts.proto_version, true, s->opts.parallel_abort};
    return firn_pgo_msg_decode(&s->msg, p, len, &o, err);
}

static firn_rc replay_next(firn__pgo_sess *s, firn_pgo_event *ev, firn_err *err)
{
    bool more = false;
    switch (s->phase) {
    case FIRN__PGO_REPLAY_BEGIN:
        s->msg.type = FIRN_PGO_BEGIN;
        s->msg.has_xid = false;
        s->msg.xid = 0;
        s->msg.begin.final_lsn = s->txn_commit_lsn;
        s->msg.begin.commit_time = s->txn_commit_time;
        s->msg.begin.xid = s->txn_xid;
        s->txn_streamed = true;
        s->phase = FIRN__PGO_REPLAY_BODY;
        return make_event(s, ev, err);
    case FIRN__PGO_REPLAY_BODY:
        FIRN_TRY(replay_read(s, &more, err));
        if (more)
            return make_event(s, ev, err);
        s->phase = FIRN__PGO_REPLAY_COMMIT;
        /* fall through */
    default: {
        const uint64_t end_lsn = s->txn_end_lsn;
        s->msg.type = FIRN_PGO_COMMIT;
        s->msg.has_xid = false;
        s->msg.commit.flags = 0;
        s->msg.commit.commit_lsn = s->txn_commit_lsn;
        s->msg.commit.end_lsn = end_lsn;
        s->msg.commit.commit_time = s->txn_commit_time;
        txbuf_free(s, s->replay);
        s->replay = NULL;
        s->phase = FIRN__PGO_REPLAY_NONE;
        s->txns_streamed++;
        return make_event(s, ev, err);
    }
    }
}

firn_rc firn__pgo_sess_next(firn__pgo_sess *s, firn_pgo_event *ev, firn_err *err)
{
    memset(ev, 0, sizeof(*ev));
    if (s->replay)
        return replay_next(s, ev, err);
    if (!s->pending)
        return FIRN_OK;
    s->pending = false;
    return make_event(s, ev, err);
}
