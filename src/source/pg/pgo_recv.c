/* SPDX-License-Identifier: Apache-2.0 */
/* The receiver thread of a started replication stream (docs/cdc.md "Feedback"): it owns the
 * connection from START_REPLICATION until the stream is freed, keeps reading CopyData while the
 * engine decodes, flushes and commits, queues the XLogData and keepalive messages in order (up to
 * a byte budget; past it, it stops reading and the server waits), answers keepalives at once and
 * sends a standby status update every status interval with the flush position the engine's
 * thread last published. The engine's thread takes the messages in order (firn_pgo_stream_next)
 * and decodes them; the session, the relations and every event stay on that thread. */
#include "pg_int.h"
#include "pgo_stream_int.h"

#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define RECV_ITEM_OVERHEAD 64  /* bytes counted per queued message besides its payload */
#define RECV_BATCH         256 /* messages read before the thread looks at its flags again */
/* Once the socket holds nothing more, the receiver naps this long before it waits on it again,
 * so that the next round takes what arrived meanwhile in many packets: both threads wake up
 * (and switch) far less often than at every packet, for at most this much more latency. While
 * data keeps coming the socket is read again at once: libpq reads at most its input buffer
 * (16 KiB) per call, so a nap after each read would cap the stream at 16 KiB per nap, and under
 * load a nap lasts several milliseconds: a 40 MB backlog took 6-8 s instead of 3). */
#define RECV_NAP_MS 1
/* Bytes the socket must hold for the thread to read again at once rather than nap: reading
 * every packet as it arrives costs a system call (and, on loopback, the ACK it sends) per few
 * hundred bytes; what is left waits for the nap's end. */
#define RECV_PULL_MIN 8192

static void wake(firn__pgo_recv *r)
{
    const char b = 1;
    /* A full pipe already holds a wakeup: nothing is lost when this write fails. */
    ssize_t n = write(r->wake[1], &b, 1);
    (void)n;
}

static void drain_wake(firn__pgo_recv *r)
{
    char b[64];
    while (read(r->wake[0], b, sizeof(b)) > 0) {
    }
}

/* Messages read in one go, queued together (one lock and one wakeup for many messages). */
typedef struct batch {
    firn__pgo_item *head, *tail;
    size_t bytes;
} batch;

static void push(firn__pgo_recv *r, batch *b)
{
    if (!b->head)
        return;
    pthread_mutex_lock(&r->mu);
    if (r->tail)
        r->tail->next = b->head;
    else
        r->head = b->head;
    r->tail = b->tail;
    r->bytes += b->bytes;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    memset(b, 0, sizeof(*b));
}

/* Adds a message to the batch (takes buf, which may be NULL for a keepalive). */
static void add(batch *b, const firn_pgo_copy *c, char *buf)
{
    firn__pgo_item *it = firn_calloc(1, sizeof(*it));
    it->kind = c->kind;
    it->buf = buf;
    it->wal_start = c->wal_start;
    it->wal_end = c->wal_end;
    it->reply_requested = c->kind == 'k' && c->reply_requested;
    if (c->kind == 'w') {
        it->payload = c->payload.ptr;
        it->len = c->payload.len;
    }
    if (b->tail)
        b->tail->next = it;
    else
        b->head = it;
    b->tail = it;
    b->bytes += it->len + RECV_ITEM_OVERHEAD;
}

/* Reads what libpq has, up to RECV_BATCH messages, into b; *n_read: how many. */
static firn_rc read_some(firn_pgo_stream *s, batch *b, int *n_read, firn_err *err)
{
    firn__pgo_recv *r = &s->recv;
    *n_read = 0;
    for (int i = 0; i < RECV_BATCH; i++) {
        char *buf = NULL;
        const int n = PQgetCopyData(s->conn, &buf, 1);
        if (n == 0)
            return FIRN_OK;
        if (n < 0)
            return firn__pgo_stream_ended(s, n, err);
        ++*n_read;
        firn_pgo_copy c;
        firn_rc rc = firn_pgo_copy_decode(&c, buf, (size_t)n, err);
        if (rc == FIRN_OK && c.kind != 'w' && c.kind != 'k')
            rc =
                firn_err_set(err, FIRN_ERR_PROTOCOL, "unexpected replication message '%c'", c.kind);
        if (rc) {
            PQfreemem(buf);
            return rc;
        }
        if (c.kind == 'k') {
            PQfreemem(buf);
            add(b, &c, NULL); /* in order: the engine's thread judges its WAL end */
            if (c.reply_requested)
                FIRN_TRY(firn__pgo_send_status_at(s, atomic_load(&r->report_lsn), err));
            continue;
        }
        if (c.wal_start > s->received_lsn)
            s->received_lsn = c.wal_start;
        add(b, &c, buf);
    }
    return FIRN_OK;
}

/* True when the connection's socket holds at least RECV_PULL_MIN bytes not read yet. */
static bool socket_pending(firn_pgo_stream *s)
{
    int n = 0;
    const int fd = PQsocket(s->conn);
    return fd >= 0 && ioctl(fd, FIONREAD, &n) == 0 && n >= RECV_PULL_MIN;
}

/* The walsender sends a keepalive when it waits for WAL with our flush position behind, and
 * answers a status update that asks for a reply: silence for a third of the timeout asks, and
 * silence for all of it means the server or the network is gone (a stopped walsender, a host
 * that vanished: TCP alone notices neither for a long time). Not reading because the queue is
 * full is not silence. */
static firn_rc check_alive(firn_pgo_stream *s, bool full, firn_err *err)
{
    firn__pgo_recv *r = &s->recv;
    const int64_t now = firn_monotonic_ns();
    if (r->timeout_ns <= 0)
        return FIRN_OK;
    if (full)
        r->heard_ns = now;
    const int64_t quiet_ns = now - r->heard_ns;
    if (quiet_ns >= r->timeout_ns) {
        const char *host = PQhost(s->conn), *port = PQport(s->conn);
        return firn_err_set(err, FIRN_ERR_NETWORK,
                            "no message from the server at %s:%s for %.0f s on the replication "
                            "connection of slot \"%s\" (replication_timeout_seconds): check that "
                            "the server is up and reachable; a restart resumes at the last "
                            "confirmed position",
                            host ? host : "", port ? port : "", (double)quiet_ns / 1e9,
                            s->cfg.slot_name);
    }
    if (quiet_ns < r->timeout_ns / 3 || now - r->ping_ns < r->timeout_ns / 3)
        return FIRN_OK;
    r->ping_ns = now;
    return firn__pgo_send_status_ask(s, atomic_load(&r->report_lsn), true, err);
}

/* Waits for input (when the queue has room), a wakeup or the next status update; nap: only for a
 * wakeup, up to RECV_NAP_MS. */
static firn_rc wait_some(firn_pgo_stream *s, bool full, bool nap, firn_err *err)
{
    firn__pgo_recv *r = &s->recv;
    int64_t wait_ns = s->last_status_ns + s->status_interval_ns - firn_monotonic_ns();
    if (wait_ns < 0)
        wait_ns = 0;
    if (r->timeout_ns > 0 && wait_ns > r->timeout_ns / 6)
        wait_ns = r->timeout_ns / 6; /* check_alive looks in time */
    if (nap) {
        full = true; /* a wakeup or the nap's end, not the socket */
        if (wait_ns >= RECV_NAP_MS * 1000000)
            wait_ns = RECV_NAP_MS * 1000000 - 1000000; /* poll adds 1 ms */
    }
    struct pollfd p[2] = {{.fd = r->wake[0], .events = POLLIN},
                          {.fd = PQsocket(s->conn), .events = POLLIN}};
    if (p[1].fd < 0)
        return firn_err_set(err, FIRN_ERR_NETWORK, "replication connection is closed");
    const int n = poll(p, full ? 1 : 2, (int)(wait_ns / 1000000) + 1);
    if (n < 0 && errno != EINTR)
        return firn_err_set_errno(err, FIRN_ERR_NETWORK, errno, "could not wait for the server");
    if (n > 0 && (p[0].revents & POLLIN))
        drain_wake(r);
    if (n > 0 && !full && (p[1].revents & (POLLIN | POLLHUP | POLLERR)) && !PQconsumeInput(s->conn))
        return firn__pgo_stream_ended(s, -2, err);
    return FIRN_OK;
}

static void *recv_main(void *arg)
{
    firn_pgo_stream *s = arg;
    firn__pgo_recv *r = &s->recv;
    firn_err err = {0};
    firn_rc rc = FIRN_OK;
    long got = 0; /* messages read since the thread last waited */
    while (rc == FIRN_OK) {
        pthread_mutex_lock(&r->mu);
        const bool stop = r->stop, want = r->want_status;
        r->want_status = false;
        pthread_mutex_unlock(&r->mu);
        if (stop)
            break;
        if (want || firn_monotonic_ns() - s->last_status_ns >= s->status_interval_ns)
            rc = firn__pgo_send_status_at(s, atomic_load(&r->report_lsn), &err);
        pthread_mutex_lock(&r->mu);
        const bool full = r->bytes >= r->max_bytes;
        pthread_mutex_unlock(&r->mu);
        int n = 0;
        batch b = {0};
        if (rc == FIRN_OK && !full)
            rc = read_some(s, &b, &n, &err);
        push(r, &b); /* what was read before an error too: it comes first */
        got += n;
        if (n > 0)
            r->heard_ns = firn_monotonic_ns();
        if (rc == FIRN_OK)
            rc = check_alive(s, full, &err);
        if (rc || full) {
            if (rc == FIRN_OK)
                rc = wait_some(s, true, false, &err);
            got = 0;
        } else if (n == RECV_BATCH) {
            continue; /* libpq may hold more */
        } else if (socket_pending(s)) {
            /* libpq's buffer is empty and the socket holds plenty more: read it now. */
            if (!PQconsumeInput(s->conn))
                rc = firn__pgo_stream_ended(s, -2, &err);
        } else {
            /* All read: nap after a round that read messages (so the next one takes many
             * packets), else wait for the socket. */
            rc = wait_some(s, false, got > 0, &err);
            got = 0;
        }
    }
    pthread_mutex_lock(&r->mu);
    if (rc) {
        r->rc = rc;
        r->err = err;
    }
    r->done = true;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

firn_rc firn__pgo_recv_start(firn_pgo_stream *s, firn_err *err)
{
    firn__pgo_recv *r = &s->recv;
    memset(r, 0, sizeof(*r));
    size_t budget = s->cfg.mem_budget_bytes ? s->cfg.mem_budget_bytes / 4 : 16u << 20;
    r->max_bytes = budget < (4u << 20) ? 4u << 20 : budget > (32u << 20) ? 32u << 20 : budget;
    if (pipe(r->wake) != 0)
        return firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not create a pipe");
    for (int i = 0; i < 2; i++)
        (void)fcntl(r->wake[i], F_SETFL, fcntl(r->wake[i], F_GETFL) | O_NONBLOCK);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&r->mu, NULL);
    atomic_store(&r->report_lsn, s->flushed_lsn);
    atomic_store(&r->reported_lsn, s->flushed_lsn);
    const int timeout_ms = s->cfg.recv_timeout_ms ? s->cfg.recv_timeout_ms : 60000;
    r->timeout_ns = timeout_ms > 0 ? (int64_t)timeout_ms * 1000000 : 0;
    r->heard_ns = r->ping_ns = firn_monotonic_ns();
    if (pthread_create(&r->thread, NULL, recv_main, s) != 0) {
        firn__pgo_recv_stop(s);
        return firn_err_set(err, FIRN_ERR_IO, "could not start the replication receiver thread");
    }
    r->running = true;
    return FIRN_OK;
}

void firn__pgo_recv_stop(firn_pgo_stream *s)
{
    firn__pgo_recv *r = &s->recv;
    if (!r->wake[1])
        return;
    if (r->running) {
        pthread_mutex_lock(&r->mu);
        r->stop = true;
        pthread_mutex_unlock(&r->mu);
        wake(r);
        pthread_join(r->thread, NULL);
        r->running = false;
    }
    while (r->head) {
        firn__pgo_item *it = r->head;
        r->head = it->next;
        firn__pgo_item_free(it);
    }
    r->tail = NULL;
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    close(r->wake[0]);
    close(r->wake[1]);
    r->wake[0] = r->wake[1] = 0;
}

void firn__pgo_recv_publish(firn_pgo_stream *s, uint64_t flush_lsn, bool send_now)
{
    firn__pgo_recv *r = &s->recv;
    if (flush_lsn > atomic_load(&r->report_lsn))
        atomic_store(&r->report_lsn, flush_lsn);
    if (!send_now)
        return;
    pthread_mutex_lock(&r->mu);
    r->want_status = true;
    pthread_mutex_unlock(&r->mu);
    wake(r);
}

firn_rc firn__pgo_recv_pop(
    firn_pgo_stream *s, int timeout_ms, int64_t *deadline_ns, firn__pgo_item **out, firn_err *err)
{
    firn__pgo_recv *r = &s->recv;
    *out = NULL;
    pthread_mutex_lock(&r->mu);
    if (!r->head && !r->done && *deadline_ns < 0)
        *deadline_ns = firn_monotonic_ns() + (int64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000;
    while (!r->head && !r->done && firn_monotonic_ns() < *deadline_ns) {
        struct timespec ts = {.tv_sec = *deadline_ns / 1000000000,
                              .tv_nsec = *deadline_ns % 1000000000};
        pthread_cond_timedwait(&r->cv, &r->mu, &ts);
    }
    firn_rc rc = FIRN_OK;
    firn__pgo_item *it = r->head;
    if (it) {
        const bool was_full = r->bytes >= r->max_bytes;
        r->head = it->next;
        if (!r->head)
            r->tail = NULL;
        r->bytes -= it->len + RECV_ITEM_OVERHEAD;
        if (was_full && r->bytes < r->max_bytes)
            wake(r);
        it->next = NULL;
    } else if (r->done && r->rc) {
        rc = r->rc;
        if (err)
            *err = r->err;
    } else if (r->done) {
        rc = firn_err_set(err, FIRN_ERR_INTERNAL, "the replication receiver stopped");
    }
    pthread_mutex_unlock(&r->mu);
    *out = it;
    return rc;
}

void firn__pgo_item_free(firn__pgo_item *it)
{
    if (!it)
        return;
    if (it->buf)
        PQfreemem(it->buf);
    firn_free(it);
}
