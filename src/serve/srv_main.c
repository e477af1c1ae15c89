/* SPDX-License-Identifier: Apache-2.0 */
/* firn serve's HTTP server (docs/serve.md): libmicrohttpd, a thread per connection, the API
 * under /api/v1, the embedded UI, /healthz, /readyz and /metrics; the main thread reaps runs
 * and fires schedules once a second. */
#include "srv_int.h"

#include "firn/engine.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define BODY_MAX           ((size_t)1 << 20)
#define SERVE_CONNECTIONS  64
#define SERVE_PER_IP       32
#define SERVE_TIMEOUT_SECS 300

/** One request's upload. */
typedef struct req_ctx {
    firn_buf body;
    bool too_large;
} req_ctx;

static void security_headers(struct MHD_Response *r)
{
    (void)MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    (void)MHD_add_response_header(r, "X-Frame-Options", "DENY");
    (void)MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    (void)MHD_add_response_header(
        r, "Content-Security-Policy",
        "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'self'");
}

static enum MHD_Result send_bytes(struct MHD_Connection *c,
                                  unsigned status,
                                  const char *type,
                                  const void *data,
                                  size_t len,
                                  bool must_copy)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, (void *)data, must_copy ? MHD_RESPMEM_MUST_COPY : MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    (void)MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    (void)MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    security_headers(r);
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result send_api(struct MHD_Connection *c, srv_resp *resp)
{
    char *text = resp->body ? firn__srv_json_text(resp->body, JSON_COMPACT) : NULL;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(text ? strlen(text) : 0, text, MHD_RESPMEM_MUST_COPY);
    firn_free(text);
    if (!r)
        return MHD_NO;
    if (resp->body)
        (void)MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                                      resp->problem ? resp->problem : "application/json");
    (void)MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (resp->cookie)
        (void)MHD_add_response_header(r, MHD_HTTP_HEADER_SET_COOKIE, resp->cookie);
    if (resp->retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof(ra), "%d", resp->retry_after);
        (void)MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, ra);
    }
    security_headers(r);
    enum MHD_Result ok = MHD_queue_response(c, resp->status ? resp->status : 500, r);
    MHD_destroy_response(r);
    return ok;
}

/* A Prometheus label value with \, " and newlines escaped (text format 0.0.4). */
static firn_rc label(firn_buf *b, const char *v)
{
    for (const char *p = v; *p; p++) {
        firn_rc rc = *p == '\\'   ? firn_buf_append_cstr(b, "\\\\")
                     : *p == '"'  ? firn_buf_append_cstr(b, "\\\"")
                     : *p == '\n' ? firn_buf_append_cstr(b, "\\n")
                                  : firn_buf_append(b, p, 1);
        FIRN_TRY(rc);
    }
    return FIRN_OK;
}

/* The server's own metrics: build info, jobs up, runs by result. A run's engine metrics come
 * from that `firn sync` (destination metrics_listen), not from here. */
static enum MHD_Result serve_metrics(struct MHD_Connection *c, srv *s)
{
    firn_buf b;
    firn_buf_init(&b, SRV_BUF_MAX);
    firn_rc rc = firn_buf_appendf(&b,
                                  "# HELP firn_build_info firn version and build.\n"
                                  "# TYPE firn_build_info gauge\n"
                                  "firn_build_info{version=\"%s\",commit=\"%s\"} 1\n"
                                  "# HELP firn_job_up Whether the job has a running firn sync.\n"
                                  "# TYPE firn_job_up gauge\n",
                                  FIRN_VERSION, FIRN_BUILD_ID);
    pthread_mutex_lock(&s->lock);
    sqlite3_stmt *st =
        firn__srv_prepare(s, "SELECT j.name, EXISTS (SELECT 1 FROM runs r WHERE r.job_id = j.id"
                             " AND r.state = 'running') FROM jobs j ORDER BY j.name");
    while (!rc && st && sqlite3_step(st) == SQLITE_ROW) {
        rc = firn_buf_append_cstr(&b, "firn_job_up{job=\"");
        if (!rc)
            rc = label(&b, (const char *)sqlite3_column_text(st, 0));
        if (!rc)
            rc = firn_buf_appendf(&b, "\"} %d\n", sqlite3_column_int(st, 1));
    }
    sqlite3_finalize(st);
    if (!rc)
        rc = firn_buf_append_cstr(&b, "# HELP firn_runs_total Runs that ended, by result.\n"
                                      "# TYPE firn_runs_total counter\n");
    st = firn__srv_prepare(s, "SELECT j.name, r.state, COUNT(*) FROM runs r JOIN jobs j ON"
                              " j.id = r.job_id WHERE r.state != 'running'"
                              " GROUP BY j.name, r.state ORDER BY j.name, r.state");
    while (!rc && st && sqlite3_step(st) == SQLITE_ROW) {
        rc = firn_buf_append_cstr(&b, "firn_runs_total{job=\"");
        if (!rc)
            rc = label(&b, (const char *)sqlite3_column_text(st, 0));
        if (!rc)
            rc = firn_buf_appendf(&b, "\",result=\"%s\"} %lld\n", sqlite3_column_text(st, 1),
                                  (long long)sqlite3_column_int64(st, 2));
    }
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->lock);
    enum MHD_Result ok =
        rc ? send_bytes(c, 500, "text/plain; charset=utf-8", "metrics too large\n", 18, false)
           : send_bytes(c, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len, true);
    firn_buf_deinit(&b);
    return ok;
}

static enum MHD_Result serve_static(struct MHD_Connection *c, const char *url)
{
    const char *path = strcmp(url, "/") == 0 ? "/index.html" : url;
    for (const firn__srv_asset *a = firn__srv_assets; a->path; a++) {
        if (strcmp(a->path, path) == 0)
            return send_bytes(c, 200, a->type, a->data, a->len, false);
    }
    static const char msg[] = "not found\n";
    return send_bytes(c, 404, "text/plain; charset=utf-8", msg, sizeof(msg) - 1, false);
}

static const char *header(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
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
    srv *s = cls;
    (void)version;
    req_ctx *ctx = *req_cls;
    if (!ctx) {
        ctx = firn_calloc(1, sizeof(*ctx));
        firn_buf_init(&ctx->body, BODY_MAX);
        *req_cls = ctx;
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (!ctx->too_large && firn_buf_append(&ctx->body, upload_data, *upload_data_size))
            ctx->too_large = true;
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (strncmp(url, "/api/v1/", 8) == 0) {
        srv_resp resp;
        if (ctx->too_large) {
            memset(&resp, 0, sizeof(resp));
            resp.status = 413;
            resp.problem = "application/problem+json";
            resp.body =
                json_pack("{s:s, s:s, s:i, s:s}", "type", "about:blank", "title", "Body too large",
                          "status", 413, "detail", "request bodies are limited to 1 MiB");
        } else {
            srv_req rq = {
                .method = method,
                .path = url + 7,
                .cookie_session = MHD_lookup_connection_value(c, MHD_COOKIE_KIND, "firn_session"),
                .authorization = header(c, MHD_HTTP_HEADER_AUTHORIZATION),
                .csrf = header(c, "X-CSRF-Token"),
                .origin = header(c, "Origin"),
                .sec_fetch_site = header(c, "Sec-Fetch-Site"),
                .content_type = header(c, MHD_HTTP_HEADER_CONTENT_TYPE),
                .host = header(c, MHD_HTTP_HEADER_HOST),
                .body = (const char *)ctx->body.data,
                .body_len = ctx->body.len,
                .q_limit = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "limit"),
                .q_offset = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "offset"),
                .q_before = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "before"),
            };
            firn__srv_api(s, &rq, &resp);
        }
        enum MHD_Result ok = send_api(c, &resp);
        json_decref(resp.body);
        firn_free(resp.cookie);
        return ok;
    }
    const char *text = "text/plain; charset=utf-8";
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return send_bytes(c, 405, text, "only GET and HEAD outside /api/v1\n", 34, false);
    if (strcmp(url, "/healthz") == 0)
        return send_bytes(c, 200, text, "ok\n", 3, false);
    if (strcmp(url, "/readyz") == 0) {
        pthread_mutex_lock(&s->lock);
        bool ok = firn__srv_exec(s, "SELECT 1");
        pthread_mutex_unlock(&s->lock);
        return ok ? send_bytes(c, 200, text, "ready\n", 6, false)
                  : send_bytes(c, 503, text, "the state database does not answer\n", 35, false);
    }
    if (strcmp(url, "/metrics") == 0)
        return serve_metrics(c, s);
    return serve_static(c, url);
}

static void on_completed(void *cls,
                         struct MHD_Connection *c,
                         void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    req_ctx *ctx = *req_cls;
    if (ctx) {
        firn_buf_deinit(&ctx->body);
        firn_free(ctx);
        *req_cls = NULL;
    }
}

static firn_rc make_dir(const char *path, firn_err *err)
{
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return firn_err_set_errno(err, FIRN_ERR_CONFIG, errno, "--data: cannot create %s: %s", path,
                                  strerror(errno));
    return FIRN_OK;
}

/* DATA/instance-id: 16 hex digits made at the first start, so that the replication slots of two
 * servers on one PostgreSQL (each with its own job 1) never collide. */
static firn_rc load_instance_id(srv *s, firn_err *err)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/instance-id", s->data_dir);
    char *text = firn__srv_read_file(path, 64, false);
    if (text) {
        size_t n = strspn(text, "0123456789abcdef");
        if (n == 16) {
            memcpy(s->instance_id, text, 16);
            s->instance_id[16] = '\0';
        }
        firn_free(text);
        if (n != 16)
            return firn_err_set(err, FIRN_ERR_CONFIG,
                                "--data: %s must hold 16 hex digits (it names the jobs' "
                                "replication slots; restore it from a backup)",
                                path);
        return FIRN_OK;
    }
    firn__srv_random_hex(s->instance_id, 8);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    bool ok =
        fd >= 0 && write(fd, s->instance_id, 16) == 16 && write(fd, "\n", 1) == 1 && fsync(fd) == 0;
    if (fd >= 0)
        close(fd);
    if (!ok)
        return firn_err_set(err, FIRN_ERR_CONFIG, "--data: cannot write %s", path);
    return FIRN_OK;
}

static firn_rc prepare_data(srv *s, const firn_serve_options *o, firn_err *err)
{
    FIRN_TRY(make_dir(o->data_dir, err));
    char real[PATH_MAX];
    if (!realpath(o->data_dir, real))
        return firn_err_set_errno(err, FIRN_ERR_CONFIG, errno, "--data: %s: %s", o->data_dir,
                                  strerror(errno));
    s->data_dir = firn_strdup(real);
    static const char *const subs[] = {"jobs", "runs", "tmp"};
    for (size_t i = 0; i < 3; i++) {
        char path[PATH_MAX + 8];
        snprintf(path, sizeof(path), "%s/%s", real, subs[i]);
        FIRN_TRY(make_dir(path, err));
    }
    char exe[PATH_MAX];
    const char *want = o->exe ? o->exe : "/proc/self/exe";
    if (!realpath(want, exe))
        return firn_err_set_errno(err, FIRN_ERR_CONFIG, errno,
                                  "cannot find the firn binary (%s) for the runs: %s", want,
                                  strerror(errno));
    s->exe = firn_strdup(exe);
    FIRN_TRY(load_instance_id(s, err));
    char key_path[PATH_MAX + 16];
    if (o->key_file)
        snprintf(key_path, sizeof(key_path), "%s", o->key_file);
    else
        snprintf(key_path, sizeof(key_path), "%s/secret.key", real);
    FIRN_TRY(firn__srv_key_load(s, key_path, err));
    return firn__srv_db_open(s, err);
}

static void announce_setup(srv *s)
{
    sqlite3_stmt *st = firn__srv_prepare(s, "SELECT COUNT(*) FROM users");
    int64_t users = st && sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 1;
    sqlite3_finalize(st);
    if (users)
        return;
    firn__srv_random_hex(s->setup_token, 16);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/setup-token", s->data_dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
        size_t n = strlen(s->setup_token);
        if (write(fd, s->setup_token, n) != (ssize_t)n || write(fd, "\n", 1) != 1)
            FIRN_LOG(FIRN_LOG_WARN, "serve", "could not write %s", path);
        close(fd);
    }
    fprintf(stderr,
            "firn serve: no user exists yet; open the page and create the administrator with "
            "the setup token %s (also in %s)\n",
            s->setup_token, path);
    fflush(stderr);
}

firn_rc firn_serve(const firn_serve_options *o, firn_err *err)
{
    srv *s = firn_calloc(1, sizeof(*s));
    pthread_mutex_init(&s->lock, NULL);
    int fd = -1;
    struct MHD_Daemon *d = NULL;
    firn_rc rc = firn_http_listen("--listen", o->listen, &fd, err);
    if (rc == FIRN_OK)
        rc = prepare_data(s, o, err);
    if (rc)
        goto out;
    firn__srv_abandon_runs(s);
    announce_setup(s);

    struct sockaddr_storage sa;
    socklen_t salen = sizeof(sa);
    unsigned port = 0;
    if (getsockname(fd, (struct sockaddr *)&sa, &salen) == 0)
        port = sa.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&sa)->sin6_port)
                                        : ntohs(((struct sockaddr_in *)&sa)->sin_port);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL, 0, NULL,
        NULL, on_request, s, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)SERVE_CONNECTIONS, MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)SERVE_PER_IP,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)SERVE_TIMEOUT_SECS, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, s, MHD_OPTION_END);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!d) {
        close(fd);
        fd = -1;
        rc = firn_err_set(err, FIRN_ERR_CONFIG, "--listen \"%s\": could not start the HTTP server",
                          o->listen);
        goto out;
    }
    {
        char host[256];
        const char *colon = strrchr(o->listen, ':');
        snprintf(host, sizeof(host), "%.*s", (int)(colon - o->listen), o->listen);
        printf("firn serve: listening on http://%s:%u/\n", host, port);
        fflush(stdout);
    }
    FIRN_LOG(FIRN_LOG_INFO, "serve", "serving the UI and /api/v1 on port %u, data in %s", port,
             s->data_dir);
    while (!*o->stop) {
        pthread_mutex_lock(&s->lock);
        firn__srv_tick(s);
        pthread_mutex_unlock(&s->lock);
        for (int i = 0; i < 10 && !*o->stop; i++)
            firn_sleep_ms(100);
    }
    FIRN_LOG(FIRN_LOG_INFO, "serve", "stopping: the HTTP server, then the running jobs");
    MHD_stop_daemon(d);
    pthread_mutex_lock(&s->lock);
    firn__srv_stop_all(s);
    pthread_mutex_unlock(&s->lock);
out:
    if (rc && fd >= 0)
        close(fd);
    if (s->db)
        sqlite3_close(s->db);
    memset(s->key, 0, sizeof(s->key));
    firn_free(s->data_dir);
    firn_free(s->exe);
    pthread_mutex_destroy(&s->lock);
    firn_free(s);
    return rc;
}
