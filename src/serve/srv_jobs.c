/* SPDX-License-Identifier: Apache-2.0 */
/* Jobs and runs (docs/serve.md "Jobs and runs"): each job has a folder DATA/jobs/<id> with the
 * CLI's own files (source.json, destination.json, streams.json, state.json, stats.json), and
 * each run is a `firn sync` child process of this binary in that folder, its output in
 * DATA/runs/<run id>.log. Secrets stay out of the files: they name environment variables
 * (`${FIRN_SOURCE_PASSWORD}`) whose values the server passes to the child. */
#define _GNU_SOURCE /* posix_spawn_file_actions_addchdir_np (glibc 2.29) */
#include "srv_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define CONTINUOUS_RESTART_SECS 30 /* a continuous job that ended starts again after this */
#define LOG_TAIL_BYTES          16384

char *firn__srv_job_dir(srv *s, int64_t job_id)
{
    size_t n = strlen(s->data_dir) + 32;
    char *dir = firn_malloc(n);
    snprintf(dir, n, "%s/jobs/%lld", s->data_dir, (long long)job_id);
    return dir;
}

void firn__srv_slot_name(srv *s, int64_t job_id, char *out, size_t cap)
{
    snprintf(out, cap, "firn_%s_job%lld", s->instance_id, (long long)job_id);
}

/* Writes text to dir/name through a temporary file and a rename (mode 0600). */
static firn_rc write_file(const char *dir, const char *name, const char *text, firn_err *err)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return firn_err_set_errno(err, FIRN_ERR_IO, errno, "cannot write %s: %s", tmp,
                                  strerror(errno));
    size_t len = strlen(text);
    bool ok = write(fd, text, len) == (ssize_t)len && write(fd, "\n", 1) == 1 && fsync(fd) == 0;
    close(fd);
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return firn_err_set_errno(err, FIRN_ERR_IO, e, "cannot write %s: %s", path, strerror(e));
    }
    return FIRN_OK;
}

static firn_rc write_json(const char *dir, const char *name, json_t *doc, firn_err *err)
{
    char *text = firn__srv_json_text(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!text)
        return firn_err_set(err, FIRN_ERR_INTERNAL, "could not encode %s", name);
    firn_rc rc = write_file(dir, name, text, err);
    firn_free(text);
    return rc;
}

/* The config object and decrypted secrets object of a source or destination row. */
static firn_rc
load_row(srv *s, const char *table, int64_t id, json_t **config, json_t **secrets, firn_err *err)
{
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT config, secrets FROM %s WHERE id = ?", table);
    sqlite3_stmt *st = firn__srv_prepare(s, sql);
    if (!st)
        return firn_err_set(err, FIRN_ERR_INTERNAL, "database error");
    sqlite3_bind_int64(st, 1, id);
    if (sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_finalize(st);
        return firn_err_set(err, FIRN_ERR_NOT_FOUND, "%s %lld does not exist", table,
                            (long long)id);
    }
    *config = json_loads((const char *)sqlite3_column_text(st, 0), 0, NULL);
    *secrets = NULL;
    const void *blob = sqlite3_column_blob(st, 1);
    int blen = sqlite3_column_bytes(st, 1);
    if (blob && blen > 0) {
        size_t plen = 0;
        char *plain = firn__srv_open(s, table, blob, (size_t)blen, &plen);
        if (!plain) {
            sqlite3_finalize(st);
            json_decref(*config);
            return firn_err_set(err, FIRN_ERR_CONFIG,
                                "the secrets of %s %lld do not decrypt: is --key-file the key "
                                "this data folder was made with?",
                                table, (long long)id);
        }
        *secrets = json_loads(plain, 0, NULL);
        memset(plain, 0, plen);
        firn_free(plain);
    }
    sqlite3_finalize(st);
    if (!*config)
        return firn_err_set(err, FIRN_ERR_INTERNAL, "%s %lld: stored config is not JSON", table,
                            (long long)id);
    if (!*secrets)
        *secrets = json_object();
    return FIRN_OK;
}

/* Copies key from cfg into out when it is set (non-empty string or number/boolean). */
static void copy_key(json_t *out, const char *out_key, json_t *cfg, const char *key)
{
    json_t *v = json_object_get(cfg, key);
    if (!v || json_is_null(v) || (json_is_string(v) && json_string_length(v) == 0))
        return;
    json_object_set(out, out_key, v);
}

/* Sets out[key] to "${VAR}" and appends VAR=value to env when secrets[name] is set. */
static void secret_ref(json_t *out,
                       const char *key,
                       json_t *secrets,
                       const char *name,
                       const char *var,
                       firn_strlist *env)
{
    const char *value = json_string_value(json_object_get(secrets, name));
    if (!value || !*value)
        return;
    char ref[96];
    snprintf(ref, sizeof(ref), "${%s}", var);
    json_object_set_new(out, key, json_string(ref));
    size_t n = strlen(var) + strlen(value) + 2;
    char *kv = firn_malloc(n);
    snprintf(kv, n, "%s=%s", var, value);
    firn_strlist_push(env, kv);
    memset(kv, 0, n);
    firn_free(kv);
}

firn_rc firn__srv_write_source(
    srv *s, int64_t source_id, const char *dir, const char *slot, firn_strlist *env, firn_err *err)
{
    json_t *cfg = NULL, *sec = NULL;
    FIRN_TRY(load_row(s, "sources", source_id, &cfg, &sec, err));
    json_t *out = json_object();
    json_object_set_new(out, "type", json_string("postgres"));
    copy_key(out, "host", cfg, "host");
    copy_key(out, "port", cfg, "port");
    copy_key(out, "database", cfg, "database");
    copy_key(out, "username", cfg, "username");
    secret_ref(out, "password", sec, "password", "FIRN_SOURCE_PASSWORD", env);
    copy_key(out, "sslmode", cfg, "sslmode");
    if (slot) {
        json_object_set_new(out, "slot", json_string(slot));
        json_object_set_new(out, "publication", json_string(slot));
        json_object_set_new(out, "create_slot", json_true());
        json_object_set_new(out, "create_publication", json_true());
    }
    firn_rc rc = write_json(dir, "source.json", out, err);
    json_decref(out);
    json_decref(cfg);
    json_decref(sec);
    return rc;
}

firn_rc firn__srv_write_destination(
    srv *s, int64_t destination_id, const char *dir, firn_strlist *env, firn_err *err)
{
    json_t *cfg = NULL, *sec = NULL;
    FIRN_TRY(load_row(s, "destinations", destination_id, &cfg, &sec, err));
    json_t *out = json_object();
    json_t *cat = json_object();
    copy_key(cat, "type", cfg, "catalog_type");
    copy_key(cat, "name", cfg, "catalog_name");
    copy_key(cat, "uri", cfg, "catalog_uri");
    copy_key(cat, "warehouse", cfg, "warehouse");
    secret_ref(cat, "token", sec, "token", "FIRN_CATALOG_TOKEN", env);
    json_object_set_new(out, "catalog", cat);
    copy_key(out, "namespace", cfg, "namespace");
    json_t *storage = json_object();
    copy_key(storage, "endpoint", cfg, "storage_endpoint");
    copy_key(storage, "region", cfg, "storage_region");
    copy_key(storage, "access_key_id", cfg, "access_key_id");
    secret_ref(storage, "secret_access_key", sec, "secret_access_key",
               "FIRN_STORAGE_SECRET_ACCESS_KEY", env);
    if (json_object_size(storage))
        json_object_set(out, "storage", storage);
    json_decref(storage);
    firn_rc rc = write_json(dir, "destination.json", out, err);
    json_decref(out);
    json_decref(cfg);
    json_decref(sec);
    return rc;
}

/* Spawns `firn args...` (args[0] is the command name after the binary) in cwd, output appended
 * to log_path, with env added to the environment, its own process group and default signals.
 * Returns the pid, -1 on failure (logged). */
static pid_t spawn_firn(
    srv *s, const char *const *args, const firn_strlist *env, const char *cwd, const char *log_path)
{
    size_t nargs = 0;
    while (args[nargs])
        nargs++;
    char **argv = firn_calloc(nargs + 2, sizeof(char *));
    argv[0] = s->exe;
    for (size_t i = 0; i < nargs; i++)
        argv[i + 1] = (char *)args[i];
    size_t nenv = 0;
    while (environ[nenv])
        nenv++;
    char **envp = firn_calloc(nenv + (env ? env->count : 0) + 1, sizeof(char *));
    size_t k = 0;
    for (size_t i = 0; i < nenv; i++) {
        /* the server's own secrets variables never leak into a child that has others */
        if (strncmp(environ[i], "FIRN_SOURCE_PASSWORD=", 21) == 0 ||
            strncmp(environ[i], "FIRN_CATALOG_TOKEN=", 19) == 0 ||
            strncmp(environ[i], "FIRN_STORAGE_SECRET_ACCESS_KEY=", 31) == 0)
            continue;
        envp[k++] = environ[i];
    }
    for (size_t i = 0; env && i < env->count; i++)
        envp[k++] = env->items[i];
    envp[k] = NULL;

    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    if (cwd)
        posix_spawn_file_actions_addchdir_np(&fa, cwd);
    /* the server's threads block SIGINT and SIGTERM: the child must get them back */
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGPIPE);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &defaults);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_SETPGROUP);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, s->exe, &fa, &at, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    firn_free(argv);
    firn_free(envp);
    if (rc != 0) {
        FIRN_LOG(FIRN_LOG_ERROR, "serve", "cannot start %s %s: %s", s->exe, args[0], strerror(rc));
        return -1;
    }
    return pid;
}

static int exit_code_of(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return -1;
}

int firn__srv_run_child(srv *s,
                        const char *const *args,
                        const firn_strlist *env,
                        const char *cwd,
                        const char *log_path,
                        int timeout_s)
{
    pid_t pid = spawn_firn(s, args, env, cwd, log_path);
    if (pid < 0)
        return -1;
    int status = 0;
    for (long waited_ms = 0;; waited_ms += 100) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return exit_code_of(status);
        if (r < 0 && errno != EINTR)
            return -1;
        if (waited_ms >= (long)timeout_s * 1000) {
            kill(pid, SIGKILL);
            (void)waitpid(pid, &status, 0);
            return 128 + SIGKILL;
        }
        firn_sleep_ms(100);
    }
}

char *firn__srv_read_file(const char *path, size_t max, bool tail)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        close(fd);
        return NULL;
    }
    size_t size = (size_t)sb.st_size;
    size_t want = size < max ? size : max;
    off_t from = tail ? (off_t)(size - want) : 0;
    char *out = firn_malloc(want + 1);
    ssize_t n = pread(fd, out, want, from);
    close(fd);
    if (n < 0) {
        firn_free(out);
        return NULL;
    }
    out[n] = '\0';
    return out;
}

/* The last "firn: ..." line of a log (the CLI's one error line), else NULL. */
static char *error_line(const char *log_path)
{
    char *text = firn__srv_read_file(log_path, LOG_TAIL_BYTES, true);
    if (!text)
        return NULL;
    char *found = NULL;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (strncmp(line, "firn: ", 6) == 0)
            found = line + 6;
        line = nl ? nl + 1 : NULL;
    }
    char *out = found ? firn_strdup(found) : NULL;
    firn_free(text);
    return out;
}

static char *log_path_of(srv *s, int64_t run_id)
{
    size_t n = strlen(s->data_dir) + 48;
    char *p = firn_malloc(n);
    snprintf(p, n, "%s/runs/%lld.log", s->data_dir, (long long)run_id);
    return p;
}

static bool job_running(srv *s, int64_t job_id)
{
    for (size_t i = 0; i < s->n_children; i++) {
        if (s->children[i].job_id == job_id)
            return true;
    }
    return false;
}

firn_rc
firn__srv_start_run(srv *s, int64_t job_id, const char *trigger, int64_t *run_id, firn_err *err)
{
    if (job_running(s, job_id))
        return firn_err_set(err, FIRN_ERR_CONFLICT, "job %lld is running already; stop it first",
                            (long long)job_id);
    if (s->n_children >= SRV_MAX_CHILDREN)
        return firn_err_set(err, FIRN_ERR_THROTTLED, "%d runs at once already", SRV_MAX_CHILDREN);
    sqlite3_stmt *st = firn__srv_prepare(
        s, "SELECT j.source_id, j.destination_id, COALESCE(c.kind, 'manual') FROM jobs j"
           " LEFT JOIN schedules c ON c.job_id = j.id WHERE j.id = ?");
    if (!st)
        return firn_err_set(err, FIRN_ERR_INTERNAL, "database error");
    sqlite3_bind_int64(st, 1, job_id);
    if (sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_finalize(st);
        return firn_err_set(err, FIRN_ERR_NOT_FOUND, "job %lld does not exist", (long long)job_id);
    }
    int64_t source_id = sqlite3_column_int64(st, 0);
    int64_t dest_id = sqlite3_column_int64(st, 1);
    bool follow = strcmp((const char *)sqlite3_column_text(st, 2), "continuous") == 0;
    sqlite3_finalize(st);

    char *dir = firn__srv_job_dir(s, job_id);
    char slot[64];
    firn__srv_slot_name(s, job_id, slot, sizeof(slot));
    firn_strlist env = {0};
    firn_rc rc = firn__srv_write_source(s, source_id, dir, slot, &env, err);
    if (rc == FIRN_OK)
        rc = firn__srv_write_destination(s, dest_id, dir, &env, err);
    if (rc) {
        firn_strlist_clear(&env);
        firn_free(dir);
        return rc;
    }
    st = firn__srv_prepare(s, "INSERT INTO runs(job_id, trigger, state, started_at)"
                              " VALUES (?, ?, 'running', ?)");
    sqlite3_bind_int64(st, 1, job_id);
    sqlite3_bind_text(st, 2, trigger, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, firn__srv_now());
    int step = sqlite3_step(st);
    sqlite3_finalize(st);
    if (step != SQLITE_DONE) {
        firn_strlist_clear(&env);
        firn_free(dir);
        return firn_err_set(err, FIRN_ERR_CONFLICT, "job %lld is running already",
                            (long long)job_id);
    }
    int64_t rid = sqlite3_last_insert_rowid(s->db);
    char *log_path = log_path_of(s, rid);
    st = firn__srv_prepare(s, "INSERT INTO run_logs(run_id, path) VALUES (?, ?)");
    sqlite3_bind_int64(st, 1, rid);
    sqlite3_bind_text(st, 2, log_path, -1, SQLITE_STATIC);
    (void)sqlite3_step(st);
    sqlite3_finalize(st);

    size_t plen = strlen(dir) + 32;
    char *p_src = firn_malloc(plen), *p_dst = firn_malloc(plen), *p_str = firn_malloc(plen),
         *p_state = firn_malloc(plen);
    snprintf(p_src, plen, "%s/source.json", dir);
    snprintf(p_dst, plen, "%s/destination.json", dir);
    snprintf(p_str, plen, "%s/streams.json", dir);
    snprintf(p_state, plen, "%s/state.json", dir);
    const char *args[] = {
        "sync",      "--source", p_src,     "--destination", p_dst,
        "--streams", p_str,      "--state", p_state,         follow ? "--follow" : NULL,
        NULL};
    pid_t pid = spawn_firn(s, args, &env, dir, log_path);
    firn_strlist_clear(&env);
    firn_free(p_src);
    firn_free(p_dst);
    firn_free(p_str);
    firn_free(p_state);
    firn_free(dir);
    firn_free(log_path);
    if (pid < 0) {
        st = firn__srv_prepare(s, "UPDATE runs SET state = 'failed', ended_at = ?, error = ?"
                                  " WHERE id = ?");
        sqlite3_bind_int64(st, 1, firn__srv_now());
        sqlite3_bind_text(st, 2, "could not start firn sync (see the server's log)", -1,
                          SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, rid);
        (void)sqlite3_step(st);
        sqlite3_finalize(st);
        return firn_err_set(err, FIRN_ERR_INTERNAL, "could not start firn sync");
    }
    st = firn__srv_prepare(s, "UPDATE runs SET pid = ? WHERE id = ?");
    sqlite3_bind_int64(st, 1, pid);
    sqlite3_bind_int64(st, 2, rid);
    (void)sqlite3_step(st);
    sqlite3_finalize(st);
    s->children[s->n_children++] = (srv_child){.run_id = rid, .job_id = job_id, .pid = pid};
    FIRN_LOG(FIRN_LOG_INFO, "serve", "job %lld: run %lld started (%s, pid %d)", (long long)job_id,
             (long long)rid, trigger, (int)pid);
    *run_id = rid;
    return FIRN_OK;
}

bool firn__srv_stop_run(srv *s, int64_t job_id)
{
    for (size_t i = 0; i < s->n_children; i++) {
        if (s->children[i].job_id != job_id)
            continue;
        sqlite3_stmt *st = firn__srv_prepare(s, "UPDATE runs SET stop_requested = 1 WHERE id = ?");
        sqlite3_bind_int64(st, 1, s->children[i].run_id);
        (void)sqlite3_step(st);
        sqlite3_finalize(st);
        kill(s->children[i].pid, SIGTERM);
        FIRN_LOG(FIRN_LOG_INFO, "serve", "job %lld: stopping run %lld", (long long)job_id,
                 (long long)s->children[i].run_id);
        return true;
    }
    return false;
}

/* Records how run ended: succeeded (exit 0), cancelled (stopped by request or with the
 * server), failed (anything else, with the log's error line). */
static void finish_run(srv *s, const srv_child *c, int code, const char *forced_state)
{
    sqlite3_stmt *st = firn__srv_prepare(s, "SELECT stop_requested FROM runs WHERE id = ?");
    sqlite3_bind_int64(st, 1, c->run_id);
    bool stop = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    const char *state = forced_state                                                  ? forced_state
                        : stop && (code == 0 || code == 130 || code == 128 + SIGTERM) ? "cancelled"
                        : code == 0                                                   ? "succeeded"
                                                                                      : "failed";
    char *log_path = log_path_of(s, c->run_id);
    char *error = strcmp(state, "failed") == 0 ? error_line(log_path) : NULL;
    char fallback[96];
    if (!error && strcmp(state, "failed") == 0) {
        snprintf(fallback, sizeof(fallback), "firn sync exited with code %d", code);
        error = firn_strdup(fallback);
    }
    st = firn__srv_prepare(s, "UPDATE runs SET state = ?, ended_at = ?, exit_code = ?,"
                              " error = ? WHERE id = ?");
    sqlite3_bind_text(st, 1, state, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, firn__srv_now());
    sqlite3_bind_int(st, 3, code);
    if (error)
        sqlite3_bind_text(st, 4, error, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, 4);
    sqlite3_bind_int64(st, 5, c->run_id);
    (void)sqlite3_step(st);
    sqlite3_finalize(st);
    FIRN_LOG(FIRN_LOG_INFO, "serve", "job %lld: run %lld %s (exit %d)", (long long)c->job_id,
             (long long)c->run_id, state, code);
    firn_free(error);
    firn_free(log_path);
}

static void reap(srv *s)
{
    for (size_t i = 0; i < s->n_children;) {
        int status = 0;
        pid_t r = waitpid(s->children[i].pid, &status, WNOHANG);
        if (r == s->children[i].pid || (r < 0 && errno == ECHILD)) {
            srv_child c = s->children[i];
            s->children[i] = s->children[--s->n_children];
            finish_run(s, &c, r > 0 ? exit_code_of(status) : -1, NULL);
            continue;
        }
        i++;
    }
}

static void schedule(srv *s)
{
    int64_t now = firn__srv_now();
    sqlite3_stmt *st = firn__srv_prepare(
        s, "SELECT c.job_id, c.kind, COALESCE(c.interval_seconds, 0), COALESCE(c.next_run_at, 0),"
           " (SELECT MAX(ended_at) FROM runs r WHERE r.job_id = c.job_id), c.cron"
           " FROM schedules c JOIN jobs j ON j.id = c.job_id"
           " WHERE j.paused = 0 AND c.kind != 'manual'");
    if (!st)
        return;
    int64_t due[SRV_MAX_CHILDREN];
    bool due_interval[SRV_MAX_CHILDREN];
    int64_t next[SRV_MAX_CHILDREN];
    size_t n_due = 0;
    while (sqlite3_step(st) == SQLITE_ROW && n_due < SRV_MAX_CHILDREN) {
        int64_t job = sqlite3_column_int64(st, 0);
        const char *kind = (const char *)sqlite3_column_text(st, 1);
        bool interval = strcmp(kind, "interval") == 0, cron = strcmp(kind, "cron") == 0;
        int64_t every = sqlite3_column_int64(st, 2), at = sqlite3_column_int64(st, 3);
        int64_t ended = sqlite3_column_int64(st, 4);
        if ((interval || cron) && at > 0 && at <= now) {
            due[n_due] = job;
            due_interval[n_due] = true;
            /* missed fires during downtime collapse into this one */
            int64_t following = now + (every > 0 ? every : 60);
            srv_cron c;
            char why[256];
            if (cron) {
                const char *text = (const char *)sqlite3_column_text(st, 5);
                following = text && firn__srv_cron_parse(text, &c, why, sizeof(why))
                                ? firn__srv_cron_next(&c, now)
                                : -1;
            }
            next[n_due++] = following;
        } else if (strcmp(kind, "continuous") == 0 && !job_running(s, job) &&
                   (ended == 0 || now - ended >= CONTINUOUS_RESTART_SECS)) {
            due[n_due] = job;
            due_interval[n_due] = false;
            next[n_due++] = 0;
        }
    }
    sqlite3_finalize(st);
    for (size_t i = 0; i < n_due; i++) {
        if (due_interval[i]) {
            sqlite3_stmt *u = firn__srv_prepare(s, "UPDATE schedules SET next_run_at = ?"
                                                   " WHERE job_id = ?");
            sqlite3_bind_int64(u, 1, next[i]);
            sqlite3_bind_int64(u, 2, due[i]);
            (void)sqlite3_step(u);
            sqlite3_finalize(u);
            if (job_running(s, due[i])) {
                FIRN_LOG(FIRN_LOG_INFO, "serve",
                         "job %lld: scheduled run skipped, the previous one still runs",
                         (long long)due[i]);
                continue;
            }
        }
        firn_err err = {0};
        int64_t rid = 0;
        if (firn__srv_start_run(s, due[i], due_interval[i] ? "schedule" : "continuous", &rid, &err))
            FIRN_LOG(FIRN_LOG_WARN, "serve", "job %lld: scheduled run not started: %s",
                     (long long)due[i], err.msg);
    }
}

void firn__srv_tick(srv *s)
{
    reap(s);
    schedule(s);
}

/* Whether pid is a `firn sync` of the job folder dir (its command line names dir/source.json). */
static bool is_job_process(pid_t pid, const char *dir)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    static char buf[65536]; /* start-up only, one thread */
    ssize_t got = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (got <= 0)
        return false;
    buf[got] = '\0';
    char want[4200];
    snprintf(want, sizeof(want), "%s/source.json", dir);
    for (const char *a = buf; a < buf + got; a += strlen(a) + 1) {
        if (strcmp(a, want) == 0)
            return true;
    }
    return false;
}

void firn__srv_abandon_runs(srv *s)
{
    sqlite3_stmt *st = firn__srv_prepare(
        s, "SELECT id, job_id, COALESCE(pid, 0) FROM runs WHERE state = 'running'");
    if (!st)
        return;
    while (sqlite3_step(st) == SQLITE_ROW) {
        int64_t rid = sqlite3_column_int64(st, 0), job = sqlite3_column_int64(st, 1);
        pid_t pid = (pid_t)sqlite3_column_int64(st, 2);
        char *dir = firn__srv_job_dir(s, job);
        if (pid > 0 && is_job_process(pid, dir)) {
            /* a writer the previous server left behind: stop it before anything else runs */
            FIRN_LOG(FIRN_LOG_WARN, "serve",
                     "job %lld: run %lld's firn sync (pid %d) outlived the previous server; "
                     "stopping it",
                     (long long)job, (long long)rid, (int)pid);
            kill(pid, SIGTERM);
            for (int i = 0; i < 600 && kill(pid, 0) == 0 && is_job_process(pid, dir); i++)
                firn_sleep_ms(100);
            if (kill(pid, 0) == 0 && is_job_process(pid, dir))
                kill(pid, SIGKILL);
        }
        firn_free(dir);
        FIRN_LOG(FIRN_LOG_WARN, "serve",
                 "job %lld: run %lld abandoned (the server stopped while "
                 "it ran)",
                 (long long)job, (long long)rid);
    }
    sqlite3_finalize(st);
    st = firn__srv_prepare(s, "UPDATE runs SET state = 'abandoned', ended_at = ?, error ="
                              " 'firn serve stopped while this run was running; the next run"
                              " resumes from the committed state' WHERE state = 'running'");
    sqlite3_bind_int64(st, 1, firn__srv_now());
    (void)sqlite3_step(st);
    sqlite3_finalize(st);
}

void firn__srv_stop_all(srv *s)
{
    for (size_t i = 0; i < s->n_children; i++)
        kill(s->children[i].pid, SIGTERM);
    for (int waited = 0; s->n_children && waited < 600; waited++) {
        for (size_t i = 0; i < s->n_children;) {
            int status = 0;
            pid_t r = waitpid(s->children[i].pid, &status, WNOHANG);
            if (r == s->children[i].pid || (r < 0 && errno == ECHILD)) {
                srv_child c = s->children[i];
                s->children[i] = s->children[--s->n_children];
                finish_run(s, &c, r > 0 ? exit_code_of(status) : -1, "cancelled");
                continue;
            }
            i++;
        }
        if (s->n_children)
            firn_sleep_ms(100);
    }
    for (size_t i = 0; i < s->n_children; i++) {
        kill(s->children[i].pid, SIGKILL);
        (void)waitpid(s->children[i].pid, NULL, 0);
        finish_run(s, &s->children[i], 128 + SIGKILL, "cancelled");
    }
    s->n_children = 0;
}
