/* SPDX-License-Identifier: Apache-2.0 */
/* pgoutput wire format: decoder and encoder of every logical replication message (protocol
 * versions 1-4) and of the streaming replication CopyData messages. Pure code, no libpq.
 * Mirrors postgres src/backend/replication/logical/proto.c. */
#include "firn/pgoutput.h"

#include <string.h>

/* Largest column count of a relation or tuple (MaxTupleAttributeNumber is 1664). */
#define PGO_MAX_COLS 1664

void firn_pgo_msg_init(firn_pgo_msg *m)
{
    memset(m, 0, sizeof(*m));
}

void firn_pgo_msg_deinit(firn_pgo_msg *m)
{
    if (!m)
        return;
    firn_free(m->relcols_);
    firn_free(m->cols_[0]);
    firn_free(m->cols_[1]);
    firn_free(m->relids_);
    memset(m, 0, sizeof(*m));
}

const char *firn_pgo_msg_type_name(int type)
{
    switch (type) {
    case FIRN_PGO_BEGIN:
        return "Begin";
    case FIRN_PGO_MESSAGE:
        return "Message";
    case FIRN_PGO_COMMIT:
        return "Commit";
    case FIRN_PGO_ORIGIN:
        return "Origin";
    case FIRN_PGO_RELATION:
        return "Relation";
    case FIRN_PGO_TYPE:
        return "Type";
    case FIRN_PGO_INSERT:
        return "Insert";
    case FIRN_PGO_UPDATE:
        return "Update";
    case FIRN_PGO_DELETE:
        return "Delete";
    case FIRN_PGO_TRUNCATE:
        return "Truncate";
    case FIRN_PGO_STREAM_START:
        return "Stream Start";
    case FIRN_PGO_STREAM_STOP:
        return "Stream Stop";
    case FIRN_PGO_STREAM_COMMIT:
        return "Stream Commit";
    case FIRN_PGO_STREAM_ABORT:
        return "Stream Abort";
    case FIRN_PGO_BEGIN_PREPARE:
        return "Begin Prepare";
    case FIRN_PGO_PREPARE:
        return "Prepare";
    case FIRN_PGO_COMMIT_PREPARED:
        return "Commit Prepared";
    case FIRN_PGO_ROLLBACK_PREPARED:
        return "Rollback Prepared";
    case FIRN_PGO_STREAM_PREPARE:
        return "Stream Prepare";
    default:
        return "unknown";
    }
}

/* Protocol version that introduced a message type; 0 for an unknown type. */
static uint32_t type_min_version(int type)
{
    switch (type) {
    case FIRN_PGO_BEGIN:
    case FIRN_PGO_MESSAGE:
    case FIRN_PGO_COMMIT:
    case FIRN_PGO_ORIGIN:
    case FIRN_PGO_RELATION:
    case FIRN_PGO_TYPE:
    case FIRN_PGO_INSERT:
    case FIRN_PGO_UPDATE:
    case FIRN_PGO_DELETE:
    case FIRN_PGO_TRUNCATE:
        return 1;
    case FIRN_PGO_STREAM_START:
    case FIRN_PGO_STREAM_STOP:
    case FIRN_PGO_STREAM_COMMIT:
    case FIRN_PGO_STREAM_ABORT:
        return 2;
    case FIRN_PGO_BEGIN_PREPARE:
    case FIRN_PGO_PREPARE:
    case FIRN_PGO_COMMIT_PREPARED:
    case FIRN_PGO_ROLLBACK_PREPARED:
    case FIRN_PGO_STREAM_PREPARE:
        return 3;
    default:
        return 0;
    }
}

/* True for the types that carry a transaction id inside a stream block. */
static bool type_has_stream_xid(int type)
{
    return type == FIRN_PGO_RELATION || type == FIRN_PGO_TYPE || type == FIRN_PGO_INSERT ||
           type == FIRN_PGO_UPDATE || type == FIRN_PGO_DELETE || type == FIRN_PGO_TRUNCATE ||
           type == FIRN_PGO_MESSAGE;
}

/* Formats a tag byte for messages: printable as itself, else as a hex escape. */
static const char *tag_text(uint8_t tag, char out[8])
{
    if (tag >= 0x20 && tag < 0x7f) {
        out[0] = (char)tag;
        out[1] = 0;
    } else {
        static const char hex[] = "0123456789abcdef";
        out[0] = '\\';
        out[1] = 'x';
        out[2] = hex[tag >> 4];
        out[3] = hex[tag & 15];
        out[4] = 0;
    }
    return out;
}

/* ------------------------------------------------------------------------------------------------
 * Decoding
 * ----------------------------------------------------------------------------------------------*/

typedef struct dec {
    firn_rd rd;
    firn_pgo_msg *m;
    const firn_pgo_proto_opts *opts;
    firn_err *err;
} dec;

static firn_rc short_msg(dec *d)
{
    return firn_err_set(d->err, FIRN_ERR_PROTOCOL, "insufficient data left in %s message",
                        firn_pgo_msg_type_name(d->m->type));
}

static int64_t rd_i64(firn_rd *r)
{
    return (int64_t)firn_rd_be64(r);
}

static firn_rc decode_tuple(dec *d, int slot, firn_pgo_tuple *t)
{
    firn_pgo_msg *m = d->m;
    const uint16_t n = firn_rd_be16(&d->rd);
    if (!firn_rd_ok(&d->rd))
        return short_msg(d);
    if (n > PGO_MAX_COLS)
        return firn_err_set(d->err, FIRN_ERR_PROTOCOL, "tuple of %u columns exceeds the limit %d",
                            (unsigned)n, PGO_MAX_COLS);
    if (n > m->cols_cap_[slot]) {
        m->cols_[slot] = firn_reallocarray(m->cols_[slot], n, sizeof(firn_pgo_col));
        m->cols_cap_[slot] = n;
    }
    t->n_cols = n;
    t->cols = m->cols_[slot];
    for (uint16_t i = 0; i < n; i++) {
        firn_pgo_col *c = &t->cols[i];
        c->kind = firn_rd_u8(&d->rd);
        c->value = (firn_slice){NULL, 0};
        if (!firn_rd_ok(&d->rd))
            return short_msg(d);
        if (c->kind == FIRN_PGO_COL_TEXT || c->kind == FIRN_PGO_COL_BINARY) {
            const uint32_t len = firn_rd_be32(&d->rd);
            if (len > INT32_MAX)
                return firn_err_set(d->err, FIRN_ERR_PROTOCOL, "invalid value length %u",
                                    (unsigned)len);
            c->value.ptr = firn_rd_bytes(&d->rd, len);
            c->value.len = len;
            if (!firn_rd_ok(&d->rd))
                return short_msg(d);
        } else if (c->kind != FIRN_PGO_COL_NULL && c->kind != FIRN_PGO_COL_UNCHANGED) {
            char tb[8];
            return firn_err_set(d->err, FIRN_ERR_PROTOCOL, "unrecognized tuple column kind '%s'",
                                tag_text(c->kind, tb));
        }
    }
    return FIRN_OK;
}

static const char *rd_str(dec *d)
{
    const char *s = firn_rd_cstr(&d->rd, NULL);
    return s ? s : "";
}

static firn_rc decode_begin(dec *d)
{
    d->m->begin.final_lsn = firn_rd_be64(&d->rd);
    d->m->begin.commit_time = rd_i64(&d->rd);
    d->m->begin.xid = firn_rd_be32(&d->rd);
    return FIRN_OK;
}

static firn_rc decode_commit(dec *d)
{
    d->m->commit.flags = firn_rd_u8(&d->rd);
    d->m->commit.commit_lsn = firn_rd_be64(&d->rd);
    d->m->commit.end_lsn = firn_rd_be64(&d->rd);
    d->m->commit.commit_time = rd_i64(&d->rd);
    return FIRN_OK;
}

static firn_rc decode_origin(dec *d)
{
    d->m->origin.commit_lsn = firn_rd_be64(&d->rd);
    d->m->origin.name = rd_str(d);
    return FIRN_OK;
}

static firn_rc decode_relation(dec *d)
{
    firn_pgo_msg *m = d->m;
    m->relation.relid = firn_rd_be32(&d->rd);
    m->relation.nspname = rd_str(d);
    m->relation.relname = rd_str(d);
    m->relation.replident = firn_rd_u8(&d->rd);
    const uint16_t n = firn_rd_be16(&d->rd);
    if (!firn_rd_ok(&d->rd))
        return short_msg(d);
    if (n > PGO_MAX_COLS)
        return firn_err_set(d->err, FIRN_ERR_PROTOCOL,
                            "relation of %u columns exceeds the limit %d", (unsigned)n,
                            PGO_MAX_COLS);
    if (n > m->relcols_cap_) {
        m->relcols_ = firn_reallocarray(m->relcols_, n, sizeof(firn_pgo_relcol));
        m->relcols_cap_ = n;
    }
    m->relation.n_cols = n;
    m->relation.cols = m->relcols_;
    for (uint16_t i = 0; i < n && firn_rd_ok(&d->rd); i++) {
        firn_pgo_relcol *c = &m->relcols_[i];
        c->flags = firn_rd_u8(&d->rd);
        c->name = rd_str(d);
        c->type_oid = firn_rd_be32(&d->rd);
        c->typmod = (int32_t)firn_rd_be32(&d->rd);
    }
    return FIRN_OK;
}

static firn_rc decode_type(dec *d)
{
    d->m->pgtype.type_oid = firn_rd_be32(&d->rd);
    d->m->pgtype.nspname = rd_str(d);
    d->m->pgtype.typname = rd_str(d);
    return FIRN_OK;
}

static firn_rc decode_change(dec *d)
{
    firn_pgo_msg *m = d->m;
    m->change.relid = firn_rd_be32(&d->rd);
    m->change.old_kind = 0;
    m->change.old_tuple = (firn_pgo_tuple){0, NULL};
    m->change.new_tuple = (firn_pgo_tuple){0, NULL};
    uint8_t tag = firn_rd_u8(&d->rd);
    if (!firn_rd_ok(&d->rd))
        return short_msg(d);
    char tb[8];
    if (m->type != FIRN_PGO_INSERT && (tag == 'K' || tag == 'O')) {
        m->change.old_kind = tag;
        FIRN_TRY(decode_tuple(d, 1, &m->change.old_tuple));
        if (m->type == FIRN_PGO_DELETE)
            return FIRN_OK;
        tag = firn_rd_u8(&d->rd);
        if (!firn_rd_ok(&d->rd))
            return short_msg(d);
    }
    if (m->type == FIRN_PGO_DELETE || tag != 'N')
        return firn_err_set(d->err, FIRN_ERR_PROTOCOL, "unrecognized tuple marker '%s' in %s",
                            tag_text(tag, tb), firn_pgo_msg_type_name(m->type));
    return decode_tuple(d, 0, &m->change.new_tuple);
}

static firn_rc decode_truncate(dec *d)
{
    firn_pgo_msg *m = d->m;
    const uint32_t n = firn_rd_be32(&d->rd);
    m->truncate.options = firn_rd_u8(&d->rd);
    if (!firn_rd_ok(&d->rd))
        return short_msg(d);
    if (n > firn_rd_remaining(&d->rd) / 4)
        return short_msg(d);
    if (n > m->relids_cap_) {
        m->relids_ = firn_reallocarray(m->relids_, n, sizeof(uint32_t));
        m->relids_cap_ = n;
    }
    m->truncate.n_relids = n;
    m->truncate.relids = m->relids_;
    for (uint32_t i = 0; i < n; i++)
        m->relids_[i] = firn_rd_be32(&d->rd);
    return FIRN_OK;
}

static firn_rc decode_message(dec *d)
{
    firn_pgo_msg *m = d->m;
    m->message.flags = firn_rd_u8(&d->rd);
    m->message.lsn = firn_rd_be64(&d->rd);
    m->message.prefix = rd_str(d);
    const uint32_t len = firn_rd_be32(&d->rd);
    m->message.content.ptr = firn_rd_bytes(&d->rd, len);
    m->message.content.len = len;
    return FIRN_OK;
}

static firn_rc decode_stream(dec *d)
{
    firn_pgo_msg *m = d->m;
    switch (m->type) {
    case FIRN_PGO_STREAM_START:
        m->stream_start.xid = firn_rd_be32(&d->rd);
        m->stream_start.first_segment = firn_rd_u8(&d->rd);
        break;
    case FIRN_PGO_STREAM_COMMIT:
        m->stream_commit.xid = firn_rd_be32(&d->rd);
        m->stream_commit.flags = firn_rd_u8(&d->rd);
        m->stream_commit.commit_lsn = firn_rd_be64(&d->rd);
        m->stream_commit.end_lsn = firn_rd_be64(&d->rd);
        m->stream_commit.commit_time = rd_i64(&d->rd);
        break;
    case FIRN_PGO_STREAM_ABORT:
        m->stream_abort.xid = firn_rd_be32(&d->rd);
        m->stream_abort.subxid = firn_rd_be32(&d->rd);
        m->stream_abort.has_lsn = d->opts->parallel_abort && d->opts->proto_version >= 4;
        m->stream_abort.abort_lsn = 0;
        m->stream_abort.abort_time = 0;
        if (m->stream_abort.has_lsn) {
            m->stream_abort.abort_lsn = firn_rd_be64(&d->rd);
            m->stream_abort.abort_time = rd_i64(&d->rd);
        }
        break;
    default: /* Stream Stop has no body */
        break;
    }
    return FIRN_OK;
}

static firn_rc decode_twophase(dec *d)
{
    firn_pgo_msg *m = d->m;
    if (m->type == FIRN_PGO_ROLLBACK_PREPARED) {
        m->rollback_prepared.flags = firn_rd_u8(&d->rd);
        m->rollback_prepared.prepare_end_lsn = firn_rd_be64(&d->rd);
        m->rollback_prepared.rollback_end_lsn = firn_rd_be64(&d->rd);
        m->rollback_prepared.prepare_time = rd_i64(&d->rd);
        m->rollback_prepared.rollback_time = rd_i64(&d->rd);
        m->rollback_prepared.xid = firn_rd_be32(&d->rd);
        m->rollback_prepared.gid = rd_str(d);
        return FIRN_OK;
    }
    /* Begin Prepare has no flags byte; the others start with one. */
    m->prepare.flags = m->type == FIRN_PGO_BEGIN_PREPARE ? 0 : firn_rd_u8(&d->rd);
    m->prepare.lsn = firn_rd_be64(&d->rd);
    m->prepare.end_lsn = firn_rd_be64(&d->rd);
    m->prepare.time = rd_i64(&d->rd);
    m->prepare.xid = firn_rd_be32(&d->rd);
    m->prepare.gid = rd_str(d);
    return FIRN_OK;
}

static firn_rc decode_body(dec *d)
{
    switch (d->m->type) {
    case FIRN_PGO_BEGIN:
        return decode_begin(d);
    case FIRN_PGO_COMMIT:
        return decode_commit(d);
    case FIRN_PGO_ORIGIN:
        return decode_origin(d);
    case FIRN_PGO_RELATION:
        return decode_relation(d);
    case FIRN_PGO_TYPE:
        return decode_type(d);
    case FIRN_PGO_INSERT:
    case FIRN_PGO_UPDATE:
    case FIRN_PGO_DELETE:
        return decode_change(d);
    case FIRN_PGO_TRUNCATE:
        return decode_truncate(d);
    case FIRN_PGO_MESSAGE:
        return decode_message(d);
    case FIRN_PGO_STREAM_START:
    case FIRN_PGO_STREAM_STOP:
    case FIRN_PGO_STREAM_COMMIT:
    case FIRN_PGO_STREAM_ABORT:
        return decode_stream(d);
    default:
        return decode_twophase(d);
    }
}

firn_rc firn_pgo_msg_decode(
    firn_pgo_msg *m, const void *p, size_t len, const firn_pgo_proto_opts *opts, firn_err *err)
{
    dec d = {.m = m, .opts = opts, .err = err};
    firn_rd_init(&d.rd, p, len);
    const uint8_t tag = firn_rd_u8(&d.rd);
    char tb[8];
    if (!firn_rd_ok(&d.rd))
        return firn_err_set(err, FIRN_ERR_PROTOCOL, "empty pgoutput message");
    const uint32_t min_version = type_min_version(tag);
    if (min_version == 0)
        return firn_err_set(err, FIRN_ERR_PROTOCOL, "unrecognized message type '%s'",
                            tag_text(tag, tb));
    m->type = (firn_pgo_msg_type)tag;
    if (min_version > opts->proto_version)
        return firn_err_set(err, FIRN_ERR_PROTOCOL,
                            "message type '%s' (%s) needs protocol version %u, stream uses %u",
                            tag_text(tag, tb), firn_pgo_msg_type_name(tag), (unsigned)min_version,
                            (unsigned)opts->proto_version);
    m->has_xid = opts->in_stream && type_has_stream_xid(tag);
    m->xid = m->has_xid ? firn_rd_be32(&d.rd) : 0;
    FIRN_TRY(decode_body(&d));
    if (!firn_rd_ok(&d.rd))
        return short_msg(&d);
    if (firn_rd_remaining(&d.rd) != 0)
        return firn_err_set(err, FIRN_ERR_PROTOCOL,
                            "%zu unexpected bytes at the end of a %s message",
                            firn_rd_remaining(&d.rd), firn_pgo_msg_type_name(tag));
    return FIRN_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Encoding
 * ----------------------------------------------------------------------------------------------*/

static firn_rc wr_cstr(firn_buf *b, const char *s)
{
    return firn_buf_append(b, s ? s : "", s ? strlen(s) + 1 : 1);
}

static firn_rc encode_tuple(firn_buf *b, const firn_pgo_tuple *t, firn_err *err)
{
    FIRN_TRY(firn_wr_be16(b, t->n_cols));
    for (uint16_t i = 0; i < t->n_cols; i++) {
        const firn_pgo_col *c = &t->cols[i];
        FIRN_TRY(firn_wr_u8(b, c->kind));
        if (c->kind == FIRN_PGO_COL_TEXT || c->kind == FIRN_PGO_COL_BINARY) {
            if (c->value.len > INT32_MAX)
                return firn_err_set(err, FIRN_ERR_TOO_LARGE, "value of %zu bytes is too large",
                                    c->value.len);
            FIRN_TRY(firn_wr_be32(b, (uint32_t)c->value.len));
            FIRN_TRY(firn_buf_append(b, c->value.ptr, c->value.len));
        } else if (c->kind != FIRN_PGO_COL_NULL && c->kind != FIRN_PGO_COL_UNCHANGED) {
            return firn_err_set(err, FIRN_ERR_INVALID, "cannot encode tuple column kind %u",
                                (unsigned)c->kind);
        }
    }
    return FIRN_OK;
}

static firn_rc encode_relation(firn_buf *b, const firn_pgo_msg *m)
{
    FIRN_TRY(firn_wr_be32(b, m->relation.relid));
    FIRN_TRY(wr_cstr(b, m->relation.nspname));
    FIRN_TRY(wr_cstr(b, m->relation.relname));
    FIRN_TRY(firn_wr_u8(b, m->relation.replident));
    FIRN_TRY(firn_wr_be16(b, m->relation.n_cols));
    for (uint16_t i = 0; i < m->relation.n_cols; i++) {
        const firn_pgo_relcol *c = &m->relation.cols[i];
        FIRN_TRY(firn_wr_u8(b, c->flags));
        FIRN_TRY(wr_cstr(b, c->name));
        FIRN_TRY(firn_wr_be32(b, c->type_oid));
        FIRN_TRY(firn_wr_be32(b, (uint32_t)c->typmod));
    }
    return FIRN_OK;
}

static firn_rc encode_change(firn_buf *b, const firn_pgo_msg *m, firn_err *err)
{
    FIRN_TRY(firn_wr_be32(b, m->change.relid));
    if (m->type != FIRN_PGO_INSERT && m->change.old_kind) {
        if (m->change.old_kind != 'K' && m->change.old_kind != 'O')
            return firn_err_set(err, FIRN_ERR_INVALID, "cannot encode old tuple marker %u",
                                (unsigned)m->change.old_kind);
        FIRN_TRY(firn_wr_u8(b, m->change.old_kind));
        FIRN_TRY(encode_tuple(b, &m->change.old_tuple, err));
    } else if (m->type == FIRN_PGO_DELETE) {
        return firn_err_set(err, FIRN_ERR_INVALID, "cannot encode a delete without old tuple");
    }
    if (m->type == FIRN_PGO_DELETE)
        return FIRN_OK;
    FIRN_TRY(firn_wr_u8(b, 'N'));
    return encode_tuple(b, &m->change.new_tuple, err);
}

static firn_rc encode_txn(firn_buf *b, const firn_pgo_msg *m)
{
    switch (m->type) {
    case FIRN_PGO_BEGIN:
        FIRN_TRY(firn_wr_be64(b, m->begin.final_lsn));
        FIRN_TRY(firn_wr_be64(b, (uint64_t)m->begin.commit_time));
        return firn_wr_be32(b, m->begin.xid);
    case FIRN_PGO_COMMIT:
        FIRN_TRY(firn_wr_u8(b, m->commit.flags));
        FIRN_TRY(firn_wr_be64(b, m->commit.commit_lsn));
        FIRN_TRY(firn_wr_be64(b, m->commit.end_lsn));
        return firn_wr_be64(b, (uint64_t)m->commit.commit_time);
    case FIRN_PGO_ORIGIN:
        FIRN_TRY(firn_wr_be64(b, m->origin.commit_lsn));
        return wr_cstr(b, m->origin.name);
    case FIRN_PGO_TYPE:
        FIRN_TRY(firn_wr_be32(b, m->pgtype.type_oid));
        FIRN_TRY(wr_cstr(b, m->pgtype.nspname));
        return wr_cstr(b, m->pgtype.typname);
    case FIRN_PGO_TRUNCATE:
        FIRN_TRY(firn_wr_be32(b, m->truncate.n_relids));
        FIRN_TRY(firn_wr_u8(b, m->truncate.options));
        for (uint32_t i = 0; i < m->truncate.n_relids; i++)
            FIRN_TRY(firn_wr_be32(b, m->truncate.relids[i]));
        return FIRN_OK;
    default: /* FIRN_PGO_MESSAGE */
        FIRN_TRY(firn_wr_u8(b, m->message.flags));
        FIRN_TRY(firn_wr_be64(b, m->message.lsn));
        FIRN_TRY(wr_cstr(b, m->message.prefix));
        FIRN_TRY(firn_wr_be32(b, (uint32_t)m->message.content.len));
        return firn_buf_append(b, m->message.content.ptr, m->message.content.len);
    }
}

static firn_rc encode_stream(firn_buf *b, const firn_pgo_msg *m, const firn_pgo_proto_opts *opts)
{
    switch (m->type) {
    case FIRN_PGO_STREAM_START:
        FIRN_TRY(firn_wr_be32(b, m->stream_start.xid));
        return firn_wr_u8(b, m->stream_start.first_segment);
    case FIRN_PGO_STREAM_COMMIT:
        FIRN_TRY(firn_wr_be32(b, m->stream_commit.xid));
        FIRN_TRY(firn_wr_u8(b, m->stream_commit.flags));
        FIRN_TRY(firn_wr_be64(b, m->stream_commit.commit_lsn));
        FIRN_TRY(firn_wr_be64(b, m->stream_commit.end_lsn));
        return firn_wr_be64(b, (uint64_t)m->stream_commit.commit_time);
    case FIRN_PGO_STREAM_ABORT:
        FIRN_TRY(firn_wr_be32(b, m->stream_abort.xid));
        FIRN_TRY(firn_wr_be32(b, m->stream_abort.subxid));
        if (opts->parallel_abort && opts->proto_version >= 4) {
            FIRN_TRY(firn_wr_be64(b, m->stream_abort.abort_lsn));
            FIRN_TRY(firn_wr_be64(b, (uint64_t)m->stream_abort.abort_time));
        }
        return FIRN_OK;
    default: /* Stream Stop */
        return FIRN_OK;
    }
}

static firn_rc encode_twophase(firn_buf *b, const firn_pgo_msg *m)
{
    if (m->type == FIRN_PGO_ROLLBACK_PREPARED) {
        FIRN_TRY(firn_wr_u8(b, m->rollback_prepared.flags));
        FIRN_TRY(firn_wr_be64(b, m->rollback_prepared.prepare_end_lsn));
        FIRN_TRY(firn_wr_be64(b, m->rollback_prepared.rollback_end_lsn));
        FIRN_TRY(firn_wr_be64(b, (uint64_t)m->rollback_prepared.prepare_time));
        FIRN_TRY(firn_wr_be64(b, (uint64_t)m->rollback_prepared.rollback_time));
        FIRN_TRY(firn_wr_be32(b, m->rollback_prepared.xid));
        return wr_cstr(b, m->rollback_prepared.gid);
    }
    if (m->type != FIRN_PGO_BEGIN_PREPARE)
        FIRN_TRY(firn_wr_u8(b, m->prepare.flags));
    FIRN_TRY(firn_wr_be64(b, m->prepare.lsn));
    FIRN_TRY(firn_wr_be64(b, m->prepare.end_lsn));
    FIRN_TRY(firn_wr_be64(b, (uint64_t)m->prepare.time));
    FIRN_TRY(firn_wr_be32(b, m->prepare.xid));
    return wr_cstr(b, m->prepare.gid);
}

firn_rc firn_pgo_msg_encode(firn_buf *out,
                            const firn_pgo_msg *m,
                            const firn_pgo_proto_opts *opts,
                            firn_err *err)
{
    const uint32_t min_version = type_min_version(m->type);
    if (min_version == 0 || min_version > opts->proto_version)
        return firn_err_set(err, FIRN_ERR_INVALID, "cannot encode message type %d in version %u",
                            (int)m->type, (unsigned)opts->proto_version);
    firn_rc rc = firn_wr_u8(out, (uint8_t)m->type);
    if (!rc && opts->in_stream && type_has_stream_xid(m->type))
        rc = firn_wr_be32(out, m->xid);
    if (rc)
        return firn_err_set(err, rc, "pgoutput message does not fit its buffer");
    switch (m->type) {
    case FIRN_PGO_RELATION:
        rc = encode_relation(out, m);
        break;
    case FIRN_PGO_INSERT:
    case FIRN_PGO_UPDATE:
    case FIRN_PGO_DELETE:
        rc = encode_change(out, m, err);
        break;
    case FIRN_PGO_STREAM_START:
    case FIRN_PGO_STREAM_STOP:
    case FIRN_PGO_STREAM_COMMIT:
    case FIRN_PGO_STREAM_ABORT:
        rc = encode_stream(out, m, opts);
        break;
    default:
        rc = min_version == 3 ? encode_twophase(out, m) : encode_txn(out, m);
        break;
    }
    if (rc == FIRN_ERR_INVALID)
        return rc; /* err already says which field */
    if (rc)
        return firn_err_set(err, rc, "pgoutput message does not fit its buffer");
    return FIRN_OK;
}

/* ------------------------------------------------------------------------------------------------
 * CopyData messages of the replication protocol
 * ----------------------------------------------------------------------------------------------*/

firn_rc firn_pgo_copy_decode(firn_pgo_copy *out, const void *p, size_t len, firn_err *err)
{
    firn_rd r;
    firn_rd_init(&r, p, len);
    memset(out, 0, sizeof(*out));
    out->kind = firn_rd_u8(&r);
    char tb[8];
    switch (out->kind) {
    case 'w':
        out->wal_start = firn_rd_be64(&r);
        out->wal_end = firn_rd_be64(&r);
        out->send_time = (int64_t)firn_rd_be64(&r);
        out->payload.len = firn_rd_remaining(&r);
        out->payload.ptr = firn_rd_bytes(&r, out->payload.len);
        break;
    case 'k':
        out->wal_end = firn_rd_be64(&r);
        out->send_time = (int64_t)firn_rd_be64(&r);
        out->reply_requested = firn_rd_u8(&r) != 0;
        break;
    case 'r':
        out->write_lsn = firn_rd_be64(&r);
        out->flush_lsn = firn_rd_be64(&r);
        out->apply_lsn = firn_rd_be64(&r);
        out->send_time = (int64_t)firn_rd_be64(&r);
        out->reply_requested = firn_rd_u8(&r) != 0;
        break;
    default:
        if (!firn_rd_ok(&r))
            return firn_err_set(err, FIRN_ERR_PROTOCOL, "empty replication message");
        return firn_err_set(err, FIRN_ERR_PROTOCOL, "unrecognized replication message type '%s'",
                            tag_text(out->kind, tb));
    }
    if (!firn_rd_ok(&r))
        return firn_err_set(err, FIRN_ERR_PROTOCOL,
                            "insufficient data left in replication message '%c'", out->kind);
    if (firn_rd_remaining(&r) != 0)
        return firn_err_set(err, FIRN_ERR_PROTOCOL,
                            "%zu unexpected bytes at the end of replication message '%c'",
                            firn_rd_remaining(&r), out->kind);
    return FIRN_OK;
}

firn_rc firn_pgo_copy_encode(firn_buf *out, const firn_pgo_copy *c, firn_err *err)
{
    firn_rc rc = FIRN_OK;
    switch (c->kind) {
    case 'w':
        rc = firn_wr_u8(out, 'w');
        rc = rc ? rc : firn_wr_be64(out, c->wal_start);
        rc = rc ? rc : firn_wr_be64(out, c->wal_end);
        rc = rc ? rc : firn_wr_be64(out, (uint64_t)c->send_time);
        rc = rc ? rc : firn_buf_append(out, c->payload.ptr, c->payload.len);
        break;
    case 'k':
        rc = firn_wr_u8(out, 'k');
        rc = rc ? rc : firn_wr_be64(out, c->wal_end);
        rc = rc ? rc : firn_wr_be64(out, (uint64_t)c->send_time);
        rc = rc ? rc : firn_wr_u8(out, c->reply_requested ? 1 : 0);
        break;
    case 'r':
        rc = firn_wr_u8(out, 'r');
        rc = rc ? rc : firn_wr_be64(out, c->write_lsn);
        rc = rc ? rc : firn_wr_be64(out, c->flush_lsn);
        rc = rc ? rc : firn_wr_be64(out, c->apply_lsn);
        rc = rc ? rc : firn_wr_be64(out, (uint64_t)c->send_time);
        rc = rc ? rc : firn_wr_u8(out, c->reply_requested ? 1 : 0);
        break;
    default:
        return firn_err_set(err, FIRN_ERR_INVALID, "cannot encode replication message kind %u",
                            (unsigned)c->kind);
    }
    if (rc)
        return firn_err_set(err, rc, "replication message does not fit its buffer");
    return FIRN_OK;
}
