/* SPDX-License-Identifier: Apache-2.0 */
/* pgoutput decoder and encoder: round trips of every message type and version, golden bytes
 * written by hand from the protocol documentation, and malformed inputs rejected. */
#include "t.h"

#include "firn/pgoutput.h"

static const firn_pgo_proto_opts V1 = {1, false, false};
static const firn_pgo_proto_opts V4 = {4, false, false};
static const firn_pgo_proto_opts V4S = {4, true, false};
static const firn_pgo_proto_opts V4P = {4, false, true};

/* Encodes m, decodes the bytes, re-encodes the decoded message and checks both encodings are
 * equal; also checks every strict prefix is rejected. Returns the decoded message in out. */
static void
round_trip(const firn_pgo_msg *m, const firn_pgo_proto_opts *o, firn_pgo_msg *out, firn_buf *bytes)
{
    firn_err err = {0};
    firn_buf again;
    firn_buf_init(bytes, 1 << 20);
    firn_buf_init(&again, 1 << 20);
    T_OK_ERR(firn_pgo_msg_encode(bytes, m, o, &err), &err);
    T_EQ_INT(bytes->data[0], m->type);
    firn_pgo_msg_init(out);
    T_OK_ERR(firn_pgo_msg_decode(out, bytes->data, bytes->len, o, &err), &err);
    T_EQ_INT(out->type, m->type);
    T_OK_ERR(firn_pgo_msg_encode(&again, out, o, &err), &err);
    T_EQ_UINT(again.len, bytes->len);
    T_EQ_MEM(again.data, bytes->data, bytes->len);
    for (size_t n = 0; n < bytes->len; n++) {
        firn_pgo_msg cut;
        firn_pgo_msg_init(&cut);
        T_EQ_INT(firn_pgo_msg_decode(&cut, bytes->data, n, o, &err), FIRN_ERR_PROTOCOL);
        firn_pgo_msg_deinit(&cut);
    }
    /* One byte too many is rejected too. */
    T_OK(firn_buf_append(&again, "x", 1));
    firn_pgo_msg extra;
    firn_pgo_msg_init(&extra);
    T_EQ_INT(firn_pgo_msg_decode(&extra, again.data, again.len, o, &err), FIRN_ERR_PROTOCOL);
    firn_pgo_msg_deinit(&extra);
    firn_buf_deinit(&again);
}

T_TEST(begin_commit_golden)
{
    /* Begin: 'B', final LSN 0/16B3748, commit time 1, xid 735. */
    static const uint8_t begin[] = {'B', 0, 0, 0, 0, 1, 0x6b, 0x37, 0x48, 0,   0,
                                    0,   0, 0, 0, 0, 1, 0,    0,    0x02, 0xdf};
    firn_pgo_msg m;
    firn_pgo_msg_init(&m);
    firn_err err = {0};
    T_OK_ERR(firn_pgo_msg_decode(&m, begin, sizeof(begin), &V1, &err), &err);
    T_EQ_INT(m.type, FIRN_PGO_BEGIN);
    T_EQ_UINT(m.begin.final_lsn, 0x16b3748);
    T_EQ_INT(m.begin.commit_time, 1);
    T_EQ_UINT(m.begin.xid, 735);
    firn_buf b;
    firn_buf_init(&b, 256);
    T_OK(firn_pgo_msg_encode(&b, &m, &V1, &err));
    T_EQ_UINT(b.len, sizeof(begin));
    T_EQ_MEM(b.data, begin, sizeof(begin));

    firn_pgo_msg c = {.type = FIRN_PGO_COMMIT};
    c.commit.commit_lsn = 0x100;
    c.commit.end_lsn = 0x180;
    c.commit.commit_time = -5;
    firn_pgo_msg d;
    firn_buf cb;
    round_trip(&c, &V1, &d, &cb);
    T_EQ_UINT(cb.len, 1 + 1 + 8 + 8 + 8);
    T_EQ_UINT(d.commit.commit_lsn, 0x100);
    T_EQ_UINT(d.commit.end_lsn, 0x180);
    T_EQ_INT(d.commit.commit_time, -5);
    firn_buf_deinit(&cb);
    firn_buf_deinit(&b);
    firn_pgo_msg_deinit(&d);
    firn_pgo_msg_deinit(&m);
}

T_TEST(relation_round_trip)
{
    firn_pgo_relcol cols[3] = {{1, "id", 23, -1}, {0, "name", 25, -1}, {0, "price", 1700, 655366}};
    for (int stream = 0; stream < 2; stream++) {
        firn_pgo_msg m = {.type = FIRN_PGO_RELATION, .xid = 77};
        m.relation.relid = 16384;
        m.relation.nspname = "public";
        m.relation.relname = "Items";
        m.relation.replident = 'd';
        m.relation.n_cols = 3;
        m.relation.cols = cols;
        firn_pgo_msg d;
        firn_buf b;
        round_trip(&m, stream ? &V4S : &V1, &d, &b);
        T_EQ_INT(d.has_xid, stream);
        T_EQ_UINT(d.xid, stream ? 77 : 0);
        T_EQ_UINT(d.relation.relid, 16384);
        T_EQ_STR(d.relation.nspname, "public");
        T_EQ_STR(d.relation.relname, "Items");
        T_EQ_INT(d.relation.replident, 'd');
        T_EQ_UINT(d.relation.n_cols, 3);
        T_EQ_STR(d.relation.cols[2].name, "price");
        T_EQ_UINT(d.relation.cols[2].type_oid, 1700);
        T_EQ_INT(d.relation.cols[2].typmod, 655366);
        T_EQ_INT(d.relation.cols[0].flags, 1);
        T_EQ_INT(d.relation.cols[1].typmod, -1);
        firn_buf_deinit(&b);
        firn_pgo_msg_deinit(&d);
    }
}

T_TEST(changes_round_trip)
{
    firn_pgo_col oldc[3] = {{'t', {(const uint8_t *)"1", 1}}, {'n', {0}}, {'u', {0}}};
    firn_pgo_col newc[3] = {
        {'b', {(const uint8_t *)"\0\0\0\2", 4}}, {'t', {(const uint8_t *)"", 0}}, {'u', {0}}};
    const int types[] = {FIRN_PGO_INSERT, FIRN_PGO_UPDATE, FIRN_PGO_UPDATE,
                         FIRN_PGO_UPDATE, FIRN_PGO_DELETE, FIRN_PGO_DELETE};
    const uint8_t olds[] = {0, 0, 'K', 'O', 'K', 'O'};
    for (size_t i = 0; i < sizeof(olds); i++) {
        firn_pgo_msg m = {.type = (firn_pgo_msg_type)types[i], .xid = 9};
        m.change.relid = 42;
        m.change.old_kind = olds[i];
        m.change.old_tuple = (firn_pgo_tuple){3, oldc};
        m.change.new_tuple = (firn_pgo_tuple){3, newc};
        firn_pgo_msg d;
        firn_buf b;
        round_trip(&m, (i & 1) ? &V4S : &V1, &d, &b);
        T_EQ_UINT(d.change.relid, 42);
        T_EQ_INT(d.change.old_kind, olds[i]);
        if (olds[i]) {
            T_EQ_UINT(d.change.old_tuple.n_cols, 3);
            T_EQ_INT(d.change.old_tuple.cols[0].kind, 't');
            T_EQ_MEM(d.change.old_tuple.cols[0].value.ptr, "1", 1);
            T_EQ_INT(d.change.old_tuple.cols[1].kind, 'n');
            T_EQ_INT(d.change.old_tuple.cols[2].kind, 'u');
        } else {
            T_EQ_UINT(d.change.old_tuple.n_cols, 0);
        }
        if (types[i] != FIRN_PGO_DELETE) {
            T_EQ_UINT(d.change.new_tuple.n_cols, 3);
            T_EQ_INT(d.change.new_tuple.cols[0].kind, 'b');
            T_EQ_UINT(d.change.new_tuple.cols[0].value.len, 4);
            T_EQ_MEM(d.change.new_tuple.cols[0].value.ptr, "\0\0\0\2", 4);
            T_EQ_INT(d.change.new_tuple.cols[1].kind, 't');
            T_EQ_UINT(d.change.new_tuple.cols[1].value.len, 0);
        } else {
            T_EQ_UINT(d.change.new_tuple.n_cols, 0);
        }
        firn_buf_deinit(&b);
        firn_pgo_msg_deinit(&d);
    }
}

T_TEST(other_v1_messages)
{
    uint32_t relids[3] = {1, 2, 0xffffffffu};
    firn_pgo_msg t = {.type = FIRN_PGO_TRUNCATE};
    t.truncate.n_relids = 3;
    t.truncate.options = FIRN_PGO_TRUNCATE_CASCADE | FIRN_PGO_TRUNCATE_RESTART_IDENTITY;
    t.truncate.relids = relids;
    firn_pgo_msg d;
    firn_buf b;
    round_trip(&t, &V1, &d, &b);
    T_EQ_UINT(d.truncate.n_relids, 3);
    T_EQ_UINT(d.truncate.relids[2], 0xffffffffu);
    T_EQ_INT(d.truncate.options, 3);
    firn_buf_deinit(&b);
    firn_pgo_msg_deinit(&d);

    firn_pgo_msg o = {.type = FIRN_PGO_ORIGIN};
    o.origin.commit_lsn = 0xabcdef;
    o.origin.name = "pg_16400";
    round_trip(&o, &V1, &d, &b);
    T_EQ_UINT(d.origin.commit_lsn, 0xabcdef);
    T_EQ_STR(d.origin.name, "pg_16400");
    firn_buf_deinit(&b);
    firn_pgo_msg_deinit(&d);

    firn_pgo_msg y = {.type = FIRN_PGO_TYPE, .xid = 5};
    y.pgtype.type_oid = 16500;
    y.pgtype.nspname = "public";
    y.pgtype.typname = "mood";
    round_trip(&y, &V4S, &d, &b);
    T_EQ_UINT(d.pgtype.type_oid, 16500);
    T_EQ_STR(d.pgtype.typname, "mood");
    T_EQ_UINT(d.xid, 5);
    firn_buf_deinit(&b);
    firn_pgo_msg_deinit(&d);

    firn_pgo_msg msg = {.type = FIRN_PGO_MESSAGE};
    msg.message.flags = 1;
    msg.message.lsn = 99;
    msg.message.prefix = "firn";
    msg.message.content = (firn_slice){(const uint8_t *)"a\0b", 3};
    round_trip(&msg, &V1, &d, &b);
    T_EQ_STR(d.message.prefix, "firn");
    T_EQ_UINT(d.message.content.len, 3);
    T_EQ_MEM(d.message.content.ptr, "a\0b", 3);
    firn_buf_deinit(&b);
    firn_pgo_msg_deinit(&d);
}

T_TEST(stream_messages)
{
    firn_pgo_msg d;
    firn_buf b;
    firn_pgo_msg s = {.type = FIRN_PGO_STREAM_START};
    s.stream_start.xid = 1234;
    s.stream_start.first_segment = 1;
    round_trip(&s, &V4, &d, &b);
    T_EQ_UINT(d.stream_start.xid, 1234);
    T_EQ_INT(d.stream_start.first_segment, 1);
    firn_buf_deinit(&b);
    firn_pgo_msg_deinit(&d);

    firn_pgo_msg e = {.type = FIRN_PGO_STREAM_STOP};
    round_trip(&e, &V4, &d, &b);
    T_EQ_UINT(b.len, 1);
    firn_buf_deinit(&b);
    firn_pgo_msg_deinit(&d);

    firn_pgo_msg c = {.type = FIRN_PGO_STREAM_COMMIT};
    c.stream_commit.xid = 1234;
    c.stream_commit.commit_lsn = 0x5000;
    c.stream_commit.end_lsn = 0x5030;
    c.stream_commit.commit_time = 777;
    round_trip(&c, &V4, &d, &b);
    T_EQ_UINT(d.stream_commit.end_lsn, 0x5030);
    T_EQ_INT(d.stream_commit.commit_time, 777);
    firn_buf_deinit(&b);
    firn_pgo_msg_deinit(&d);

    firn_pgo_msg a = {.type = FIRN_PGO_STREAM_ABORT};
    a.stream_abort.xid = 1234;
    a.stream_abort.subxid = 1240;
    round_trip(&a, &V4, &d, &b);
    T_EQ_UINT(b.len, 9);
    T_EQ_UINT(d.stream_abort.subxid, 1240);
    T_FALSE(d.stream_abort.has_lsn);
    firn_buf_deinit(&b);
    firn_pgo_msg_deinit(&d);

    a.stream_abort.abort_lsn = 0x9999;
    a.stream_abort.abort_time = 31;
    round_trip(&a, &V4P, &d, &b);
    T_EQ_UINT(b.len, 25);
    T_TRUE(d.stream_abort.has_lsn);
    T_EQ_UINT(d.stream_abort.abort_lsn, 0x9999);
    T_EQ_INT(d.stream_abort.abort_time, 31);
    firn_buf_deinit(&b);
    firn_pgo_msg_deinit(&d);
}

T_TEST(two_phase_messages)
{
    const int types[] = {FIRN_PGO_BEGIN_PREPARE, FIRN_PGO_PREPARE, FIRN_PGO_COMMIT_PREPARED,
                         FIRN_PGO_STREAM_PREPARE};
    for (size_t i = 0; i < 4; i++) {
        firn_pgo_msg m = {.type = (firn_pgo_msg_type)types[i]};
        m.prepare.lsn = 10 + i;
        m.prepare.end_lsn = 20 + i;
        m.prepare.time = 30;
        m.prepare.xid = 40;
        m.prepare.gid = "gid-1";
        firn_pgo_msg d;
        firn_buf b;
        round_trip(&m, &V4, &d, &b);
        T_EQ_UINT(b.len, (types[i] == FIRN_PGO_BEGIN_PREPARE ? 29u : 30u) + 6u);
        T_EQ_UINT(d.prepare.lsn, 10 + i);
        T_EQ_UINT(d.prepare.end_lsn, 20 + i);
        T_EQ_STR(d.prepare.gid, "gid-1");
        firn_buf_deinit(&b);
        firn_pgo_msg_deinit(&d);
    }
    firn_pgo_msg r = {.type = FIRN_PGO_ROLLBACK_PREPARED};
    r.rollback_prepared.prepare_end_lsn = 1;
    r.rollback_prepared.rollback_end_lsn = 2;
    r.rollback_prepared.prepare_time = 3;
    r.rollback_prepared.rollback_time = 4;
    r.rollback_prepared.xid = 5;
    r.rollback_prepared.gid = "g";
    firn_pgo_msg d;
    firn_buf b;
    round_trip(&r, &V4, &d, &b);
    T_EQ_UINT(d.rollback_prepared.rollback_end_lsn, 2);
    T_EQ_INT(d.rollback_prepared.rollback_time, 4);
    T_EQ_STR(d.rollback_prepared.gid, "g");
    firn_buf_deinit(&b);
    firn_pgo_msg_deinit(&d);
}

T_TEST(malformed_rejected)
{
    firn_pgo_msg m;
    firn_pgo_msg_init(&m);
    firn_err err = {0};
    T_EQ_INT(firn_pgo_msg_decode(&m, "Z", 1, &V4, &err), FIRN_ERR_PROTOCOL);
    T_EQ_STR(err.msg, "unrecognized message type 'Z'");
    T_EQ_INT(firn_pgo_msg_decode(&m, "\x01", 1, &V4, &err), FIRN_ERR_PROTOCOL);
    T_EQ_STR(err.msg, "unrecognized message type '\\x01'");
    T_EQ_INT(firn_pgo_msg_decode(&m, "", 0, &V4, &err), FIRN_ERR_PROTOCOL);
    /* Stream messages need v2, two-phase ones v3. */
    T_EQ_INT(firn_pgo_msg_decode(&m, "E", 1, &V1, &err), FIRN_ERR_PROTOCOL);
    T_EQ_STR(err.msg, "message type 'E' (Stream Stop) needs protocol version 2, stream uses 1");
    /* Insert with an unknown column kind 'x'. */
    static const uint8_t ins[] = {'I', 0, 0, 0, 42, 'N', 0, 1, 'x'};
    T_EQ_INT(firn_pgo_msg_decode(&m, ins, sizeof(ins), &V1, &err), FIRN_ERR_PROTOCOL);
    T_EQ_STR(err.msg, "unrecognized tuple column kind 'x'");
    /* Insert with 'K' instead of 'N'. */
    static const uint8_t ins2[] = {'I', 0, 0, 0, 42, 'K', 0, 0};
    T_EQ_INT(firn_pgo_msg_decode(&m, ins2, sizeof(ins2), &V1, &err), FIRN_ERR_PROTOCOL);
    T_EQ_STR(err.msg, "unrecognized tuple marker 'K' in Insert");
    /* Delete with 'N'. */
    static const uint8_t del[] = {'D', 0, 0, 0, 42, 'N', 0, 0};
    T_EQ_INT(firn_pgo_msg_decode(&m, del, sizeof(del), &V1, &err), FIRN_ERR_PROTOCOL);
    /* A text value whose length runs past the end. */
    static const uint8_t big[] = {'I', 0, 0, 0, 42, 'N', 0, 1, 't', 0, 0, 0, 9, 'a'};
    T_EQ_INT(firn_pgo_msg_decode(&m, big, sizeof(big), &V1, &err), FIRN_ERR_PROTOCOL);
    T_EQ_STR(err.msg, "insufficient data left in Insert message");
    /* A negative length. */
    static const uint8_t neg[] = {'I', 0, 0, 0, 42, 'N', 0, 1, 'b', 0xff, 0xff, 0xff, 0xff};
    T_EQ_INT(firn_pgo_msg_decode(&m, neg, sizeof(neg), &V1, &err), FIRN_ERR_PROTOCOL);
    /* Relation name without its NUL. */
    static const uint8_t rel[] = {'R', 0, 0, 0, 1, 'p', 'u', 'b'};
    T_EQ_INT(firn_pgo_msg_decode(&m, rel, sizeof(rel), &V1, &err), FIRN_ERR_PROTOCOL);
    /* Truncate claiming more relations than bytes. */
    static const uint8_t tr[] = {'T', 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1};
    T_EQ_INT(firn_pgo_msg_decode(&m, tr, sizeof(tr), &V1, &err), FIRN_ERR_PROTOCOL);
    firn_pgo_msg_deinit(&m);

    /* The encoder refuses what the protocol does not know. */
    firn_buf b;
    firn_buf_init(&b, 64);
    firn_pgo_msg bad = {.type = (firn_pgo_msg_type)'Z'};
    T_EQ_INT(firn_pgo_msg_encode(&b, &bad, &V4, &err), FIRN_ERR_INVALID);
    firn_pgo_col c = {'q', {0}};
    firn_pgo_msg ins3 = {.type = FIRN_PGO_INSERT};
    ins3.change.new_tuple = (firn_pgo_tuple){1, &c};
    T_EQ_INT(firn_pgo_msg_encode(&b, &ins3, &V4, &err), FIRN_ERR_INVALID);
    firn_buf_deinit(&b);
}

T_TEST(copy_messages)
{
    firn_buf b;
    firn_buf_init(&b, 256);
    firn_err err = {0};
    firn_pgo_copy w = {.kind = 'w', .wal_start = 1, .wal_end = 2, .send_time = 3};
    w.payload = (firn_slice){(const uint8_t *)"E", 1};
    T_OK(firn_pgo_copy_encode(&b, &w, &err));
    T_EQ_UINT(b.len, 26);
    firn_pgo_copy d;
    T_OK_ERR(firn_pgo_copy_decode(&d, b.data, b.len, &err), &err);
    T_EQ_INT(d.kind, 'w');
    T_EQ_UINT(d.wal_start, 1);
    T_EQ_UINT(d.wal_end, 2);
    T_EQ_INT(d.send_time, 3);
    T_EQ_UINT(d.payload.len, 1);
    T_EQ_INT(d.payload.ptr[0], 'E');

    firn_buf_reset(&b);
    firn_pgo_copy k = {.kind = 'k', .wal_end = 0x1234, .send_time = 8, .reply_requested = true};
    T_OK(firn_pgo_copy_encode(&b, &k, &err));
    T_EQ_UINT(b.len, 18);
    T_OK(firn_pgo_copy_decode(&d, b.data, b.len, &err));
    T_EQ_UINT(d.wal_end, 0x1234);
    T_TRUE(d.reply_requested);
    T_EQ_INT(firn_pgo_copy_decode(&d, b.data, b.len - 1, &err), FIRN_ERR_PROTOCOL);

    firn_buf_reset(&b);
    firn_pgo_copy r = {.kind = 'r', .write_lsn = 5, .flush_lsn = 4, .apply_lsn = 3, .send_time = 2};
    T_OK(firn_pgo_copy_encode(&b, &r, &err));
    T_EQ_UINT(b.len, 34);
    T_OK(firn_pgo_copy_decode(&d, b.data, b.len, &err));
    T_EQ_UINT(d.write_lsn, 5);
    T_EQ_UINT(d.flush_lsn, 4);
    T_EQ_UINT(d.apply_lsn, 3);
    T_FALSE(d.reply_requested);

    T_EQ_INT(firn_pgo_copy_decode(&d, "x", 1, &err), FIRN_ERR_PROTOCOL);
    T_EQ_STR(err.msg, "unrecognized replication message type 'x'");
    firn_buf_deinit(&b);
}

T_MAIN(T_CASE(begin_commit_golden),
       T_CASE(relation_round_trip),
       T_CASE(changes_round_trip),
       T_CASE(other_v1_messages),
       T_CASE(stream_messages),
       T_CASE(two_phase_messages),
       T_CASE(malformed_rejected),
       T_CASE(copy_messages))
