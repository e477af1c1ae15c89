/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP server of --metrics-listen (docs/operations.md "Metrics and health"): libmicrohttpd on a
 * socket firn binds itself (so a bad address is one clear line before anything starts), one
 * internal thread serving GET /metrics, /healthz and /readyz from the metrics' copies. */
#include "engine_int.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define METRICS_TEXT_MAX   ((size_t)64 << 20)
#define SERVE_CONNECTIONS  16
#define SERVE_TIMEOUT_SECS 10

struct firn__metrics_server {
    struct MHD_Daemon *daemon;
    firn__metrics *m;
};

/* Splits "HOST:PORT" into host (cap bytes, brackets of an IPv6 address removed) and port. */
static firn_rc split_listen(const char *origin,
                            const char *text,
                            char *host,
                            size_t cap,
                            char *port,
                            size_t port_cap,
                            firn_err *err)
{
    const char *colon = strrchr(text, ':');
    const char *form = "expected HOST:PORT, such as 127.0.0.1:9187, 0.0.0.0:9187 (every "
                       "interface) or [::1]:9187";
    if (!colon || colon == text)
        return firn_err_set(err, FIRN_ERR_CONFIG, "%s \"%s\": %s", origin, text, form);
    const char *h = text;
    size_t hlen = (size_t)(colon - text);
    if (h[0] == '[') {
        if (hlen < 3 || h[hlen - 1] != ']')
            return firn_err_set(err, FIRN_ERR_CONFIG, "%s \"%s\": %s", origin, text, form);
        h++;
        hlen -= 2;
    } else if (memchr(h, ':', hlen)) {
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "%s \"%s\": an IPv6 address goes in brackets, such as [::1]:9187",
                            origin, text);
    }
    if (hlen >= cap)
        return firn_err_set(err, FIRN_ERR_CONFIG, "%s \"%s\": the host is too long", origin, text);
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    int64_t p = -1;
    firn_err perr = {0};
    const char *ptext = colon + 1;
    if (firn_parse_i64(ptext, strlen(ptext), &p, &perr) || p < 0 || p > 65535)
        return firn_err_set(err, FIRN_ERR_CONFIG, "%s \"%s\": the port must be a number 0-65535",
                            origin, text);
    snprintf(port, port_cap, "%d", (int)p);
    return FIRN_OK;
}

firn_rc firn__metrics_listen_check(const char *origin, const char *text, firn_err *err)
{
    char host[256], port[8];
    return split_listen(origin, text, host, sizeof(host), port, sizeof(port), err);
}

/* A listening TCP socket on text's address: the first address it resolves to that binds. */
static firn_rc bind_listen(const char *origin, const char *text, int *out, firn_err *err)
{
    char host[256], port[8];
    FIRN_TRY(split_listen(origin, text, host, sizeof(host), port, sizeof(port), err));
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai != 0)
        return firn_err_set(err, FIRN_ERR_CONFIG, "%s \"%s\": cannot resolve host \"%s\": %s",
                            origin, text, host, gai_strerror(gai));
    int fd = -1, saved = 0;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        const int one = 1;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 64) != 0) {
            saved = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "%s \"%s\": cannot listen there: %s; choose a free port on an "
                            "address of this machine",
                            origin, text, strerror(saved));
    *out = fd;
    return FIRN_OK;
}

firn_rc firn_http_listen(const char *origin, const char *text, int *fd_out, firn_err *err)
{
    return bind_listen(origin, text, fd_out, err);
}

static enum MHD_Result
send_text(struct MHD_Connection *c, unsigned status, const char *type, const void *data, size_t len)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    (void)MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    (void)MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result serve_metrics(struct MHD_Connection *c, firn__metrics *m)
{
    firn_buf out;
    firn_buf_init(&out, METRICS_TEXT_MAX);
    enum MHD_Result ok;
    if (firn__metrics_render(m, &out))
        ok = send_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain; charset=utf-8",
                       "metrics too large\n", 18);
    else
        ok = send_text(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", out.data,
                       out.len);
    firn_buf_deinit(&out);
    return ok;
}

static enum MHD_Result on_request(void *cls,
                                  struct MHD_Connection *c,
                                  const char *url,
                                  const char *method,
                                  const char *version,
                                  const char *upload_data,
                                  size_t *upload_data_size,
                                  void **req_cls)
{
    static int seen;
    firn__metrics_server *s = cls;
    (void)version;
    (void)upload_data;
    if (!*req_cls) { /* the headers: answer once the request is complete */
        *req_cls = &seen;
        return MHD_YES;
    }
    if (*upload_data_size) {
        *upload_data_size = 0; /* a body is read and ignored */
        return MHD_YES;
    }
    const char *text = "text/plain; charset=utf-8";
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return send_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, text, "only GET and HEAD\n", 18);
    if (strcmp(url, "/metrics") == 0)
        return serve_metrics(c, s->m);
    if (strcmp(url, "/healthz") == 0)
        return send_text(c, MHD_HTTP_OK, text, "ok\n", 3);
    if (strcmp(url, "/readyz") == 0) {
        char why[1024];
        if (firn__metrics_ready(s->m, why, sizeof(why)))
            return send_text(c, MHD_HTTP_OK, text, "ready\n", 6);
        return send_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, text, why, strlen(why));
    }
    return send_text(c, MHD_HTTP_NOT_FOUND, text, "not found: try /metrics, /healthz or /readyz\n",
                     45);
}

firn_rc firn__metrics_serve(firn__metrics *m,
                            const char *origin,
                            const char *text,
                            firn__metrics_server **out,
                            firn_err *err)
{
    *out = NULL;
    int fd = -1;
    FIRN_TRY(bind_listen(origin, text, &fd, err));
    firn__metrics_server *s = firn_calloc(1, sizeof(*s));
    s->m = m;
    /* The server's thread inherits the signal mask: SIGINT and SIGTERM stay with the engine's
     * threads, whose waits they end. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    /* epoll or poll, never select: a busy firn may hold descriptors past FD_SETSIZE. */
    s->daemon = MHD_start_daemon(
        MHD_USE_AUTO_INTERNAL_THREAD, 0, NULL, NULL, on_request, s, MHD_OPTION_LISTEN_SOCKET,
        (MHD_socket)fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)SERVE_CONNECTIONS,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)SERVE_TIMEOUT_SECS, MHD_OPTION_END);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!s->daemon) {
        close(fd);
        firn_free(s);
        return firn_err_set(err, FIRN_ERR_CONFIG, "%s \"%s\": could not start the HTTP server",
                            origin, text);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    FIRN_LOG(FIRN_LOG_INFO, "engine", "serving /metrics, /healthz and /readyz on %s (port %u)",
             text, info ? (unsigned)info->port : 0u);
    *out = s;
    return FIRN_OK;
}

void firn__metrics_server_stop(firn__metrics_server *s)
{
    if (!s)
        return;
    MHD_stop_daemon(s->daemon); /* closes the listening socket too */
    firn_free(s);
}
