/* SPDX-License-Identifier: Apache-2.0 */
/* io_tool: drives the S3 and GCS FileIOs for the interop tests. Runs a sequence of commands:
 *
 *   put LOC FILE        write FILE to LOC in 64 KiB writes; prints "size N"
 *   abortput LOC FILE   write FILE, then abort the writer (nothing may appear)
 *   parput PREFIX FILE N  N threads write FILE to PREFIX0 .. PREFIX<N-1> through one FileIO
 *   get LOC             whole object to stdout
 *   range LOC OFF LEN   LEN bytes from OFF to stdout
 *   size LOC            prints "size N"
 *   rm LOC              delete
 *   mkbucket URL        signed PUT of a bucket URL (S3 only)
 *   httpget URL         signed GET with firn's own SigV4 code, body to stdout
 *   sleep MS
 *   tokens              prints "tokens N", Google tokens fetched so far
 *
 * Settings from the environment: S3: FIRN_S3_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 * AWS_REGION, FIRN_S3_ADDRESSING (path|virtual), FIRN_S3_THRESHOLD, FIRN_S3_PART_SIZE,
 * FIRN_S3_CONDITIONAL=1. GCS: FIRN_GCS_ENDPOINT, FIRN_GCS_KEY_FILE, FIRN_GCS_PROJECT,
 * FIRN_GCS_THRESHOLD, FIRN_GCS_CHUNK. FIRN_HTTP_TRACE=1 logs requests (redacted) to stderr.
 * Errors print "error: <code name>: <message>" and exit 1. */
#include "firn/io_remote.h"
#include "net/net_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct tool {
    firn_io *s3;
    firn_io *gcs;
    firn_cred *google;
    firn_cred *sigv4;
    firn_http *http;
} tool;

static size_t env_size(const char *name)
{
    const char *v = getenv(name);
    uint64_t n = 0;
    if (v && *v && firn_parse_u64(v, strlen(v), &n, NULL) == FIRN_OK)
        return (size_t)n;
    return 0;
}

static void trace_to_stderr(void *ctx, firn_log_level level, const char *line)
{
    (void)ctx;
    (void)level;
    fprintf(stderr, "trace: %s\n", line);
}

static firn_http_options http_options(void)
{
    firn_http_options o = firn_http_options_default();
    o.backoff_base_ms = 20;
    const char *t = getenv("FIRN_HTTP_TRACE");
    if (t && strcmp(t, "1") == 0)
        o.trace = trace_to_stderr;
    return o;
}

static firn_rc s3_io(tool *t, firn_io **out, firn_err *err)
{
    if (!t->s3) {
        firn_s3_options o = {0};
        o.endpoint = getenv("FIRN_S3_ENDPOINT");
        const char *a = getenv("FIRN_S3_ADDRESSING");
        if (a && strcmp(a, "path") == 0)
            o.addressing = FIRN_S3_ADDRESSING_PATH;
        else if (a && strcmp(a, "virtual") == 0)
            o.addressing = FIRN_S3_ADDRESSING_VIRTUAL;
        o.multipart_threshold = env_size("FIRN_S3_THRESHOLD");
        o.part_size = env_size("FIRN_S3_PART_SIZE");
        o.conditional_put = env_size("FIRN_S3_CONDITIONAL") == 1;
        o.http = http_options();
        FIRN_TRY(firn_io_s3_new(&o, &t->s3, err));
    }
    *out = t->s3;
    return FIRN_OK;
}

static firn_rc gcs_io(tool *t, firn_io **out, firn_err *err)
{
    if (!t->gcs) {
        const char *key = getenv("FIRN_GCS_KEY_FILE");
        firn_http_options h = http_options();
        if (key && *key) {
            firn_google_options go = {
                .key_file = key, .user_project = getenv("FIRN_GCS_PROJECT"), .http = &h};
            FIRN_TRY(firn_cred_google_new(&go, &t->google, err));
        }
        firn_gcs_options o = {.endpoint = getenv("FIRN_GCS_ENDPOINT"),
                              .cred = t->google,
                              .resumable_threshold = env_size("FIRN_GCS_THRESHOLD"),
                              .chunk_size = env_size("FIRN_GCS_CHUNK"),
                              .http = h};
        FIRN_TRY(firn_io_gcs_new(&o, &t->gcs, err));
    }
    *out = t->gcs;
    return FIRN_OK;
}

static firn_rc io_for(tool *t, const char *loc, firn_io **out, firn_err *err)
{
    if (strncmp(loc, "gs://", 5) == 0)
        return gcs_io(t, out, err);
    return s3_io(t, out, err);
}

static firn_rc put(tool *t, const char *loc, const char *path, bool abort_it, firn_err *err)
{
    firn_io *io = NULL;
    FIRN_TRY(io_for(t, loc, &io, err));
    FILE *f = fopen(path, "rb");
    if (!f)
        return firn_err_set(err, FIRN_ERR_IO, "could not open \"%s\"", path);
    firn_io_writer *w = NULL;
    firn_rc rc = firn_io_create(io, loc, &w, err);
    static char chunk[65536];
    size_t n;
    while (!rc && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        rc = firn_io_write(w, chunk, n, err);
    fclose(f);
    if (rc || abort_it) {
        firn_io_abort(w);
        return rc;
    }
    uint64_t size = 0;
    FIRN_TRY(firn_io_close(w, &size, err));
    printf("size %llu\n", (unsigned long long)size);
    return FIRN_OK;
}

typedef struct par_job {
    firn_io *io;
    char loc[1024];
    const uint8_t *data;
    size_t len;
    firn_rc rc;
    firn_err err;
} par_job;

static void *par_main(void *arg)
{
    par_job *j = arg;
    /* Odd sizes of writes, so part boundaries fall inside writes. */
    firn_io_writer *w = NULL;
    j->rc = firn_io_create(j->io, j->loc, &w, &j->err);
    for (size_t off = 0; !j->rc && off < j->len; off += 77777) {
        size_t n = j->len - off < 77777 ? j->len - off : 77777;
        j->rc = firn_io_write(w, j->data + off, n, &j->err);
    }
    if (j->rc)
        firn_io_abort(w);
    else
        j->rc = firn_io_close(w, NULL, &j->err);
    return NULL;
}

static firn_rc
parput(tool *t, const char *prefix, const char *path, const char *count, firn_err *err)
{
    firn_io *io = NULL;
    uint64_t n = 0;
    FIRN_TRY(firn_parse_u64(count, strlen(count), &n, err));
    if (n == 0 || n > 64)
        return firn_err_set(err, FIRN_ERR_INVALID, "parput takes 1 to 64 threads");
    FIRN_TRY(io_for(t, prefix, &io, err));
    firn_buf data;
    firn_buf_init(&data, (size_t)1 << 30);
    FILE *f = fopen(path, "rb");
    if (!f) {
        firn_buf_deinit(&data);
        return firn_err_set(err, FIRN_ERR_IO, "could not open \"%s\"", path);
    }
    static char chunk[65536];
    size_t got;
    firn_rc rc = FIRN_OK;
    while (!rc && (got = fread(chunk, 1, sizeof(chunk), f)) > 0)
        rc = firn_buf_append(&data, chunk, got);
    fclose(f);
    par_job *jobs = firn_calloc(n, sizeof(*jobs));
    pthread_t *threads = firn_calloc(n, sizeof(*threads));
    for (uint64_t i = 0; !rc && i < n; i++) {
        jobs[i].io = io;
        jobs[i].data = data.data;
        jobs[i].len = data.len;
        snprintf(jobs[i].loc, sizeof(jobs[i].loc), "%s%llu", prefix, (unsigned long long)i);
        pthread_create(&threads[i], NULL, par_main, &jobs[i]);
    }
    for (uint64_t i = 0; !rc && i < n; i++)
        pthread_join(threads[i], NULL);
    for (uint64_t i = 0; !rc && i < n; i++) {
        if (jobs[i].rc) {
            rc = jobs[i].rc;
            if (err)
                *err = jobs[i].err;
        }
    }
    firn_free(jobs);
    firn_free(threads);
    firn_buf_deinit(&data);
    return rc;
}

static firn_rc get(tool *t, const char *loc, const char *off, const char *len, firn_err *err)
{
    firn_io *io = NULL;
    FIRN_TRY(io_for(t, loc, &io, err));
    firn_buf b;
    firn_buf_init(&b, (size_t)1 << 30);
    firn_rc rc;
    if (off) {
        uint64_t o = 0, l = 0;
        FIRN_TRY(firn_parse_u64(off, strlen(off), &o, err));
        FIRN_TRY(firn_parse_u64(len, strlen(len), &l, err));
        rc = firn_io_read_range(io, loc, o, (size_t)l, &b, err);
    } else {
        rc = firn_io_read(io, loc, &b, err);
    }
    if (!rc && b.len > 0 && fwrite(b.data, 1, b.len, stdout) != b.len)
        rc = firn_err_set(err, FIRN_ERR_IO, "could not write stdout");
    firn_buf_deinit(&b);
    return rc;
}

static firn_rc signed_call(tool *t, firn_http_method m, const char *url, firn_err *err)
{
    if (!t->sigv4) {
        firn_sigv4_options so = {.service = "s3"};
        FIRN_TRY(firn_cred_sigv4_new(&so, &t->sigv4, err));
        firn_http_options h = http_options();
        FIRN_TRY(firn_http_new(&h, &t->http, err));
    }
    firn_http_request req = {.method = m, .url = url, .cred = t->sigv4};
    firn_http_response resp;
    firn_http_response_init(&resp);
    firn_rc rc = firn_http_do(t->http, &req, &resp, err);
    if (!rc && m == FIRN_HTTP_GET && resp.body.len > 0 &&
        fwrite(resp.body.data, 1, resp.body.len, stdout) != resp.body.len)
        rc = firn_err_set(err, FIRN_ERR_IO, "could not write stdout");
    firn_http_response_deinit(&resp);
    return rc;
}

/* Runs the command at argv[*i], advancing *i past its arguments. */
static firn_rc run(tool *t, int argc, char **argv, int *i, firn_err *err)
{
    const char *cmd = argv[(*i)++];
    int left = argc - *i;
    firn_io *io = NULL;
    uint64_t size = 0;
#define NEED(n)                                                                                    \
    if (left < (n))                                                                                \
    return firn_err_set(err, FIRN_ERR_INVALID, "%s needs %d arguments", cmd, (n))
    if (strcmp(cmd, "put") == 0 || strcmp(cmd, "abortput") == 0) {
        NEED(2);
        *i += 2;
        return put(t, argv[*i - 2], argv[*i - 1], cmd[0] == 'a', err);
    }
    if (strcmp(cmd, "parput") == 0) {
        NEED(3);
        *i += 3;
        return parput(t, argv[*i - 3], argv[*i - 2], argv[*i - 1], err);
    }
    if (strcmp(cmd, "get") == 0) {
        NEED(1);
        return get(t, argv[(*i)++], NULL, NULL, err);
    }
    if (strcmp(cmd, "range") == 0) {
        NEED(3);
        *i += 3;
        return get(t, argv[*i - 3], argv[*i - 2], argv[*i - 1], err);
    }
    if (strcmp(cmd, "size") == 0) {
        NEED(1);
        const char *loc = argv[(*i)++];
        FIRN_TRY(io_for(t, loc, &io, err));
        FIRN_TRY(firn_io_size(io, loc, &size, err));
        printf("size %llu\n", (unsigned long long)size);
        return FIRN_OK;
    }
    if (strcmp(cmd, "rm") == 0) {
        NEED(1);
        const char *loc = argv[(*i)++];
        FIRN_TRY(io_for(t, loc, &io, err));
        return firn_io_remove(io, loc, err);
    }
    if (strcmp(cmd, "mkbucket") == 0 || strcmp(cmd, "httpget") == 0) {
        NEED(1);
        return signed_call(t, cmd[0] == 'm' ? FIRN_HTTP_PUT : FIRN_HTTP_GET, argv[(*i)++], err);
    }
    if (strcmp(cmd, "sleep") == 0) {
        NEED(1);
        uint64_t ms = 0;
        FIRN_TRY(firn_parse_u64(argv[*i], strlen(argv[*i]), &ms, err));
        (*i)++;
        struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        return FIRN_OK;
    }
    if (strcmp(cmd, "tokens") == 0) {
        printf("tokens %d\n", firn__cred_token_fetches(t->google));
        return FIRN_OK;
    }
#undef NEED
    return firn_err_set(err, FIRN_ERR_INVALID, "unknown command \"%s\"", cmd);
}

int main(int argc, char **argv)
{
    tool t = {0};
    firn_err err = {0};
    firn_rc rc = FIRN_OK;
    for (int i = 1; i < argc && !rc;)
        rc = run(&t, argc, argv, &i, &err);
    fflush(stdout);
    if (rc)
        fprintf(stderr, "error: %s: %s\n", firn_rc_name(rc), err.msg);
    firn_io_free(t.s3);
    firn_io_free(t.gcs);
    firn_cred_unref(t.google);
    firn_cred_unref(t.sigv4);
    firn_http_free(t.http);
    return rc ? 1 : 0;
}
