/* SPDX-License-Identifier: Apache-2.0 */
/* A scripted HTTP/1.1 server on 127.0.0.1 for the net unit tests: it answers each request with
 * the next scripted response (the last one repeats), records what it received, and can delay a
 * reply or drop the connection. Only for faults a real server cannot produce on demand. */
#ifndef FIRN_TEST_FAKE_HTTP_H
#define FIRN_TEST_FAKE_HTTP_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Scripts list responses positionally and leave trailing flags out. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define FAKE_MAX_SCRIPT 16
#define FAKE_MAX_REQ    (1 << 20)
#define FAKE_MAX_LOG    32

typedef struct fake_resp {
    int status;
    const char *headers; /* extra header lines, each ending with "\r\n"; NULL: none */
    const char *body;    /* NULL: empty */
    int delay_ms;        /* wait before replying */
    bool drop;           /* close the connection without replying */
    bool keep_alive;     /* keep the connection open for the next request */
} fake_resp;

typedef struct fake_server {
    int fd;
    int port;
    pthread_t thread;
    pthread_mutex_t mu;
    bool stop;
    fake_resp script[FAKE_MAX_SCRIPT];
    int nscript;
    int requests;
    char *log[FAKE_MAX_LOG]; /* raw requests (head + body), in order */
} fake_server;

/* Case-insensitive strstr (strcasestr is a GNU extension). */
static inline const char *fake_strcasestr(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        if (strncasecmp(hay, needle, n) == 0)
            return hay;
    }
    return NULL;
}

static inline char *fake_read_request(int c)
{
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap + 1);
    long need = -1;
    for (;;) {
        if (len == cap) {
            if (cap >= FAKE_MAX_REQ * 16)
                break;
            cap *= 2;
            buf = realloc(buf, cap + 1);
        }
        ssize_t n = read(c, buf + len, cap - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        if (end && need < 0) {
            long cl = 0;
            *end = '\0';
            const char *h = fake_strcasestr(buf, "\r\nContent-Length:");
            if (h)
                cl = strtol(h + 17, NULL, 10);
            *end = '\r';
            need = (long)(end + 4 - buf) + cl;
        }
        if (need >= 0 && (long)len >= need)
            break;
    }
    buf[len] = '\0';
    return buf;
}

static inline void fake_reply(int c, const fake_resp *r)
{
    char head[4096];
    const char *body = r->body ? r->body : "";
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d X\r\nContent-Length: %zu\r\nConnection: %s\r\n%s\r\n", r->status,
                     strlen(body), r->keep_alive ? "keep-alive" : "close",
                     r->headers ? r->headers : "");
    if (send(c, head, (size_t)n, MSG_NOSIGNAL) != n)
        return;
    if (*body && send(c, body, strlen(body), MSG_NOSIGNAL) < 0)
        return;
}

/* On a kept-alive connection, waits for the next request; returns false (the caller closes
 * it) when a new connection arrives first or the server stops. */
static inline bool fake_wait_same_connection(fake_server *s, int c)
{
    for (;;) {
        pthread_mutex_lock(&s->mu);
        bool stop = s->stop;
        pthread_mutex_unlock(&s->mu);
        if (stop)
            return false;
        struct pollfd pfd[2] = {{c, POLLIN, 0}, {s->fd, POLLIN, 0}};
        if (poll(pfd, 2, 50) <= 0)
            continue;
        return (pfd[0].revents & (POLLIN | POLLHUP)) != 0;
    }
}

static inline void *fake_main(void *arg)
{
    fake_server *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        bool stop = s->stop;
        pthread_mutex_unlock(&s->mu);
        if (stop)
            break;
        struct pollfd pfd = {s->fd, POLLIN, 0};
        if (poll(&pfd, 1, 50) <= 0)
            continue;
        int c = accept(s->fd, NULL, NULL);
        if (c < 0)
            continue;
        for (int served = 0;; served++) {
            if (served > 0 && !fake_wait_same_connection(s, c))
                break;
            char *req = fake_read_request(c);
            if (!*req) {
                free(req); /* the client closed a kept-alive connection */
                break;
            }
            pthread_mutex_lock(&s->mu);
            int i = s->requests < s->nscript ? s->requests : s->nscript - 1;
            fake_resp r = s->script[i];
            if (s->requests < FAKE_MAX_LOG)
                s->log[s->requests] = req;
            else
                free(req);
            s->requests++;
            pthread_mutex_unlock(&s->mu);
            if (r.delay_ms > 0) {
                struct timespec ts = {r.delay_ms / 1000, (r.delay_ms % 1000) * 1000000L};
                nanosleep(&ts, NULL);
            }
            if (!r.drop)
                fake_reply(c, &r);
            if (r.drop || !r.keep_alive)
                break;
        }
        close(c);
    }
    return NULL;
}

/* Starts a server answering with the given script (copied). */
static inline fake_server *fake_start(const fake_resp *script, int n)
{
    fake_server *s = calloc(1, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    memcpy(s->script, script, sizeof(*script) * (size_t)n);
    s->nscript = n;
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(s->fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(s->fd, 16) != 0) {
        perror("fake server");
        exit(1);
    }
    socklen_t al = sizeof(a);
    getsockname(s->fd, (struct sockaddr *)&a, &al);
    s->port = ntohs(a.sin_port);
    pthread_create(&s->thread, NULL, fake_main, s);
    return s;
}

static inline int fake_requests(fake_server *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->requests;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* The i-th raw request (borrowed), or "" if not recorded. */
static inline const char *fake_request(fake_server *s, int i)
{
    pthread_mutex_lock(&s->mu);
    const char *r = i < s->requests && i < FAKE_MAX_LOG ? s->log[i] : "";
    pthread_mutex_unlock(&s->mu);
    return r;
}

static inline void fake_url(fake_server *s, const char *path, char *out, size_t cap)
{
    snprintf(out, cap, "http://127.0.0.1:%d%s", s->port, path);
}

static inline void fake_stop(fake_server *s)
{
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    close(s->fd);
    for (int i = 0; i < s->requests && i < FAKE_MAX_LOG; i++)
        free(s->log[i]);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

#endif
