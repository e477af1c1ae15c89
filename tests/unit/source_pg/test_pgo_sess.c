/* SPDX-License-Identifier: Apache-2.0 */
/* The pgoutput session: ordinary transactions pass through, streamed ones are assembled
 * (also after spilling to disk), aborted (sub)transactions vanish, relation changes are
 * reported, misplaced messages are errors. Events are compared as a text transcript. */
#include "t.h"

#include "source/pg/pgo_int.h"

static const firn_pgo_proto_opts PLAIN = {4, false, false};
static const firn_pgo_proto_opts INSTREAM = {4, true, false};

typedef struct fx {
    firn__pgo_sess s;
    firn_buf out; /* transcript */
    firn_buf enc;
} fx;

static void fx_init(fx *f, size_t budget)
{
    firn__pgo_sess_init(&f->s, 4, budget, NULL);
    firn_buf_init(&f->out, 1 << 20);
    firn_buf_init(&f->enc, 1 << 20);
}

static void fx_deinit(fx *f)
{
    firn__pgo_sess_deinit(&f->s);
    firn_buf_deinit(&f->out);
    firn_buf_deinit(&f->enc);
}

static void render_tuple(firn_buf *o, const firn_pgo_tuple *t)
{
    T_OK(firn_buf_append_cstr(o, "("));
    for (uint16_t i = 0; i < t->n_cols; i++) {
        const firn_pgo_col *c = &t->cols[i];
        if (i)
            T_OK(firn_buf_append_cstr(o, ","));
        if (c->kind == 't')
            T_OK(firn_buf_appendf(o, "%.*s", (int)c->value.len, (const char *)c->value.ptr));
        else
            T_OK(firn_buf_appendf(o, "%c", c->kind));
    }
    T_OK(firn_buf_append_cstr(o, ")"));
}

/* Drains the session's events into the transcript, one line each. */
static void drain(fx *f)
{
    firn_err err = {0};
    for (;;) {
        firn_pgo_event ev;
        T_OK_ERR(firn__pgo_sess_next(&f->s, &ev, &err), &err);
        if (ev.type == 0)
            return;
        firn_buf *o = &f->out;
        const firn_pgo_msg *m = ev.msg;
        switch (ev.type) {
        case FIRN_PGO_BEGIN:
            T_OK(firn_buf_appendf(o, "B %u %llx%s\n", (unsigned)ev.xid,
                                  (unsigned long long)ev.commit_lsn, ev.streamed ? " s" : ""));
            break;
        case FIRN_PGO_COMMIT:
            T_OK(firn_buf_appendf(o, "C %llx %llx\n", (unsigned long long)ev.commit_lsn,
                                  (unsigned long long)ev.end_lsn));
            break;
        case FIRN_PGO_RELATION:
            T_OK(firn_buf_appendf(o, "R %s.%s v%u cols=%u%s\n", ev.rel->nspname, ev.rel->relname,
                                  (unsigned)ev.rel->version, (unsigned)ev.rel->n_cols,
                                  ev.prev_rel ? " changed" : ""));
            break;
        case FIRN_PGO_INSERT:
        case FIRN_PGO_UPDATE:
        case FIRN_PGO_DELETE:
            T_OK(firn_buf_appendf(o, "%c %s ", ev.type, ev.rel->relname));
            if (m->change.old_kind) {
                T_OK(firn_buf_appendf(o, "%c", m->change.old_kind));
                render_tuple(o, &m->change.old_tuple);
            }
            if (ev.type != FIRN_PGO_DELETE)
                render_tuple(o, &m->change.new_tuple);
            T_OK(firn_buf_appendf(o, " @%llx\n", (unsigned long long)ev.commit_lsn));
            break;
        case FIRN_PGO_TRUNCATE:
            T_OK(firn_buf_appendf(o, "T n=%u opt=%u\n", (unsigned)m->truncate.n_relids,
                                  (unsigned)m->truncate.options));
            break;
        default:
            T_OK(firn_buf_appendf(o, "%c\n", ev.type));
            break;
        }
    }
}

static firn_rc feed_msg(fx *f, const firn_pgo_msg *m, const firn_pgo_proto_opts *o, firn_err *err)
{
    firn_buf_reset(&f->enc);
    T_OK(firn_pgo_msg_encode(&f->enc, m, o, err));
    firn_rc rc = firn__pgo_sess_feed(&f->s, f->enc.data, f->enc.len, err);
    if (rc == FIRN_OK) {
        /* A change is checked against its relation when delivered. */
        firn_pgo_event ev;
        if (f->s.pending && (m->type == 'I' || m->type == 'U' || m->type == 'D')) {
            rc = firn__pgo_sess_next(&f->s, &ev, err);
            if (rc)
                return rc;
            f->s.pending = true; /* deliver it again through drain */
        }
        drain(f);
    }
    return rc;
}

static void feed(fx *f, const firn_pgo_msg *m, const firn_pgo_proto_opts *o)
{
    firn_err err = {0};
    T_OK_ERR(feed_msg(f, m, o, &err), &err);
}

static void begin(fx *f, uint32_t xid, uint64_t lsn)
{
    firn_pgo_msg m = {.type = FIRN_PGO_BEGIN};
    m.begin.final_lsn = lsn;
    m.begin.xid = xid;
    feed(f, &m, &PLAIN);
}

static void commit(fx *f, uint64_t lsn, uint64_t end)
{
    firn_pgo_msg m = {.type = FIRN_PGO_COMMIT};
    m.commit.commit_lsn = lsn;
    m.commit.end_lsn = end;
    feed(f, &m, &PLAIN);
}

static firn_pgo_relcol COLS[3] = {{1, "id", 23, -1}, {0, "v", 25, -1}, {0, "w", 20, -1}};

static void relation(fx *f, uint16_t ncols, const firn_pgo_proto_opts *o, uint32_t xid)
{
    firn_pgo_msg m = {.type = FIRN_PGO_RELATION, .xid = xid};
    m.relation.relid = 16384;
    m.relation.nspname = "public";
    m.relation.relname = "t";
    m.relation.replident = 'd';
    m.relation.n_cols = ncols;
    m.relation.cols = COLS;
    feed(f, &m, o);
}

static void
change(fx *f, int type, const char *id, const char *v, const firn_pgo_proto_opts *o, uint32_t xid)
{
    firn_pgo_col c[2] = {{'t', firn_slice_cstr(id)}, {v ? 't' : 'u', firn_slice_cstr(v ? v : "")}};
    firn_pgo_msg m = {.type = (firn_pgo_msg_type)type, .xid = xid};
    m.change.relid = 16384;
    if (type == FIRN_PGO_DELETE) {
        m.change.old_kind = 'K';
        c[1].kind = 'n';
        m.change.old_tuple = (firn_pgo_tuple){2, c};
    } else {
        m.change.new_tuple = (firn_pgo_tuple){2, c};
    }
    feed(f, &m, o);
}

static void stream_start(fx *f, uint32_t xid)
{
    firn_pgo_msg m = {.type = FIRN_PGO_STREAM_START};
    m.stream_start.xid = xid;
    feed(f, &m, &PLAIN);
}

static void stream_stop(fx *f)
{
    firn_pgo_msg m = {.type = FIRN_PGO_STREAM_STOP};
    feed(f, &m, &PLAIN);
}

static void stream_abort(fx *f, uint32_t xid, uint32_t sub)
{
    firn_pgo_msg m = {.type = FIRN_PGO_STREAM_ABORT};
    m.stream_abort.xid = xid;
    m.stream_abort.subxid = sub;
    feed(f, &m, &PLAIN);
}

static void stream_commit(fx *f, uint32_t xid, uint64_t lsn, uint64_t end)
{
    firn_pgo_msg m = {.type = FIRN_PGO_STREAM_COMMIT};
    m.stream_commit.xid = xid;
    m.stream_commit.commit_lsn = lsn;
    m.stream_commit.end_lsn = end;
    feed(f, &m, &PLAIN);
}

static const char *transcript(fx *f)
{
    return (const char *)(f->out.data ? f->out.data : (const uint8_t *)"");
}

T_TEST(plain_transaction)
{
    fx f;
    fx_init(&f, 0);
    begin(&f, 700, 0x100);
    relation(&f, 2, &PLAIN, 0);
    change(&f, 'I', "1", "a", &PLAIN, 0);
    change(&f, 'U', "1", NULL, &PLAIN, 0);
    change(&f, 'D', "1", NULL, &PLAIN, 0);
    T_TRUE(!firn__pgo_sess_idle(&f.s));
    commit(&f, 0x100, 0x130);
    T_TRUE(firn__pgo_sess_idle(&f.s));
    T_EQ_STR(transcript(&f), "B 700 100\n"
                             "R public.t v1 cols=2\n"
                             "I t (1,a) @100\n"
                             "U t (1,u) @100\n"
                             "D t K(1,n) @100\n"
                             "C 100 130\n");
    T_EQ_UINT(f.s.last_end_lsn, 0x130);
    T_EQ_UINT(f.s.last_data_end_lsn, 0x130);
    /* An empty transaction moves last_end_lsn only. */
    begin(&f, 701, 0x200);
    commit(&f, 0x200, 0x230);
    T_EQ_UINT(f.s.last_end_lsn, 0x230);
    T_EQ_UINT(f.s.last_data_end_lsn, 0x130);
    fx_deinit(&f);
}

T_TEST(relation_changes)
{
    fx f;
    fx_init(&f, 0);
    begin(&f, 1, 0x10);
    relation(&f, 2, &PLAIN, 0);
    relation(&f, 2, &PLAIN, 0);
    relation(&f, 3, &PLAIN, 0);
    T_EQ_UINT(firn__pgo_sess_rel(&f.s, 16384)->n_cols, 3);
    commit(&f, 0x10, 0x20);
    T_EQ_STR(transcript(&f), "B 1 10\n"
                             "R public.t v1 cols=2\n"
                             "R public.t v1 cols=2\n"
                             "R public.t v2 cols=3 changed\n"
                             "C 10 20\n");
    fx_deinit(&f);
}

static void streamed_scenario(size_t budget)
{
    fx f;
    fx_init(&f, budget);
    stream_start(&f, 100);
    relation(&f, 2, &INSTREAM, 100);
    change(&f, 'I', "1", "top", &INSTREAM, 100);
    change(&f, 'I', "2", "sub101", &INSTREAM, 101);
    stream_stop(&f);
    /* An ordinary transaction committed meanwhile is delivered at once. */
    begin(&f, 200, 0x500);
    relation(&f, 2, &PLAIN, 0);
    change(&f, 'I', "9", "other", &PLAIN, 0);
    commit(&f, 0x500, 0x540);
    stream_start(&f, 300); /* a second streamed transaction, later aborted */
    change(&f, 'I', "30", "gone", &INSTREAM, 300);
    stream_stop(&f);
    stream_start(&f, 100);
    change(&f, 'I', "3", "sub101b", &INSTREAM, 101);
    stream_stop(&f);
    stream_abort(&f, 100, 101); /* ROLLBACK TO SAVEPOINT: drops 2 and 3 */
    stream_start(&f, 100);
    change(&f, 'I', "4", "sub102", &INSTREAM, 102);
    change(&f, 'U', "1", "top2", &INSTREAM, 100);
    for (int i = 0; i < 50; i++)
        change(&f, 'I', "5", "bulk-bulk-bulk-bulk", &INSTREAM, 100);
    stream_stop(&f);
    stream_abort(&f, 300, 300);
    stream_abort(&f, 999, 999); /* never streamed: ignored */
    T_FALSE(firn__pgo_sess_idle(&f.s));
    stream_commit(&f, 100, 0x900, 0x948);
    T_TRUE(firn__pgo_sess_idle(&f.s));
    firn_buf want;
    firn_buf_init(&want, 1 << 20);
    T_OK(firn_buf_append_cstr(&want, "B 200 500\n"
                                     "R public.t v1 cols=2\n"
                                     "I t (9,other) @500\n"
                                     "C 500 540\n"
                                     "B 100 900 s\n"
                                     "R public.t v1 cols=2\n"
                                     "I t (1,top) @900\n"
                                     "I t (4,sub102) @900\n"
                                     "U t (1,top2) @900\n"));
    for (int i = 0; i < 50; i++)
        T_OK(firn_buf_append_cstr(&want, "I t (5,bulk-bulk-bulk-bulk) @900\n"));
    T_OK(firn_buf_append_cstr(&want, "C 900 948\n"));
    T_EQ_STR(transcript(&f), (const char *)want.data);
    T_EQ_UINT(f.s.txns_streamed, 1);
    T_EQ_UINT(f.s.txns_aborted, 1);
    T_EQ_UINT(f.s.mem_used_bytes, 0);
    if (budget)
        T_TRUE(f.s.spilled_bytes > 1000);
    else
        T_EQ_UINT(f.s.spilled_bytes, 0);
    firn_buf_deinit(&want);
    fx_deinit(&f);
}

T_TEST(streamed_in_memory)
{
    streamed_scenario(0);
}

T_TEST(streamed_spilled)
{
    streamed_scenario(64);
}

T_TEST(misplaced_messages)
{
    fx f;
    fx_init(&f, 0);
    firn_err err = {0};
    firn_pgo_col c[1] = {{'t', firn_slice_cstr("1")}};
    firn_pgo_msg ins = {.type = FIRN_PGO_INSERT};
    ins.change.relid = 5;
    ins.change.new_tuple = (firn_pgo_tuple){1, c};
    T_EQ_INT(feed_msg(&f, &ins, &PLAIN, &err), FIRN_ERR_PROTOCOL);
    T_EQ_STR(err.msg, "Insert message outside a transaction");
    begin(&f, 1, 0x10);
    T_EQ_INT(feed_msg(&f, &ins, &PLAIN, &err), FIRN_ERR_PROTOCOL);
    T_EQ_STR(err.msg, "Insert for relation 5 arrived before its Relation message");
    fx_deinit(&f);

    fx_init(&f, 0);
    begin(&f, 1, 0x10);
    relation(&f, 3, &PLAIN, 0);
    firn_pgo_msg ins2 = ins;
    ins2.change.relid = 16384;
    T_EQ_INT(feed_msg(&f, &ins2, &PLAIN, &err), FIRN_ERR_PROTOCOL);
    T_EQ_STR(err.msg, "Insert for relation \"public.t\" has 1 columns, its Relation message 3");
    fx_deinit(&f);

    fx_init(&f, 0);
    T_EQ_INT(firn__pgo_sess_feed(&f.s, (const uint8_t *)"Z", 1, &err), FIRN_ERR_PROTOCOL);
    T_EQ_STR(err.msg, "unrecognized message type 'Z'");
    stream_start(&f, 7);
    T_EQ_INT(firn__pgo_sess_feed(&f.s, (const uint8_t *)"Z", 1, &err), FIRN_ERR_PROTOCOL);
    T_EQ_STR(err.msg, "unrecognized message type 'Z'");
    firn_pgo_msg b = {.type = FIRN_PGO_BEGIN};
    T_EQ_INT(feed_msg(&f, &b, &PLAIN, &err), FIRN_ERR_PROTOCOL);
    T_EQ_STR(err.msg, "unexpected Begin message inside a stream block");
    stream_stop(&f);
    firn_pgo_msg sc = {.type = FIRN_PGO_STREAM_COMMIT};
    sc.stream_commit.xid = 8;
    T_EQ_INT(feed_msg(&f, &sc, &PLAIN, &err), FIRN_ERR_PROTOCOL);
    T_EQ_STR(err.msg, "Stream Commit for transaction 8 that was never streamed");
    firn_pgo_msg bp = {.type = FIRN_PGO_BEGIN_PREPARE};
    T_EQ_INT(feed_msg(&f, &bp, &PLAIN, &err), FIRN_ERR_PROTOCOL);
    T_EQ_STR(err.msg, "unexpected Begin Prepare message: two-phase decoding was not requested");
    fx_deinit(&f);
}

T_MAIN(T_CASE(plain_transaction),
       T_CASE(relation_changes),
       T_CASE(streamed_in_memory),
       T_CASE(streamed_spilled),
       T_CASE(misplaced_messages))
