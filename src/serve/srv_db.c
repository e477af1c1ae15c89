/* SPDX-License-Identifier: Apache-2.0 */
/* The server's SQLite store (docs/serve.md "State"): one file under --data, WAL mode, migrated
 * step by step by PRAGMA user_version. */
#include "srv_int.h"

#include <string.h>
#include <time.h>

/* Migration i takes the schema from user_version i to i + 1; never edit a released step. */
static const char *const migrations[] = {
    /* 0 -> 1 */
    "CREATE TABLE users(id INTEGER PRIMARY KEY, username TEXT NOT NULL UNIQUE,"
    " password_hash TEXT NOT NULL,"
    " role TEXT NOT NULL CHECK (role IN ('admin', 'operator', 'viewer')),"
    " created_at INTEGER NOT NULL);"
    "CREATE TABLE sessions(token_hash TEXT PRIMARY KEY,"
    " user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
    " csrf_token TEXT NOT NULL, created_at INTEGER NOT NULL, last_seen_at INTEGER NOT NULL);"
    "CREATE TABLE api_tokens(id INTEGER PRIMARY KEY,"
    " user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE, name TEXT NOT NULL,"
    " token_hash TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL, last_used_at INTEGER);"
    "CREATE TABLE sources(id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE,"
    " config TEXT NOT NULL, secrets BLOB, created_at INTEGER NOT NULL,"
    " updated_at INTEGER NOT NULL);"
    "CREATE TABLE destinations(id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE,"
    " config TEXT NOT NULL, secrets BLOB, created_at INTEGER NOT NULL,"
    " updated_at INTEGER NOT NULL);"
    "CREATE TABLE jobs(id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE,"
    " source_id INTEGER NOT NULL REFERENCES sources(id),"
    " destination_id INTEGER NOT NULL REFERENCES destinations(id),"
    " tables TEXT NOT NULL, paused INTEGER NOT NULL DEFAULT 0,"
    " created_at INTEGER NOT NULL);"
    "CREATE TABLE schedules(job_id INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,"
    " kind TEXT NOT NULL CHECK (kind IN ('manual', 'interval', 'continuous')),"
    " interval_seconds INTEGER, next_run_at INTEGER);"
    "CREATE TABLE runs(id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    " trigger TEXT NOT NULL,"
    " state TEXT NOT NULL CHECK (state IN"
    " ('running', 'succeeded', 'failed', 'cancelled', 'abandoned')),"
    " pid INTEGER, started_at INTEGER NOT NULL, ended_at INTEGER, exit_code INTEGER,"
    " error TEXT, stop_requested INTEGER NOT NULL DEFAULT 0);"
    /* one run per job at a time, whatever the code above does */
    "CREATE UNIQUE INDEX runs_one_running ON runs(job_id) WHERE state = 'running';"
    "CREATE INDEX runs_by_job ON runs(job_id, id);"
    "CREATE TABLE run_logs(run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,"
    " path TEXT NOT NULL);",
    /* 1 -> 2: cron schedules */
    "CREATE TABLE schedules_new(job_id INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,"
    " kind TEXT NOT NULL CHECK (kind IN ('manual', 'interval', 'continuous', 'cron')),"
    " interval_seconds INTEGER, cron TEXT, next_run_at INTEGER);"
    "INSERT INTO schedules_new(job_id, kind, interval_seconds, next_run_at)"
    " SELECT job_id, kind, interval_seconds, next_run_at FROM schedules;"
    "DROP TABLE schedules;"
    "ALTER TABLE schedules_new RENAME TO schedules;",
};
#define N_MIGRATIONS (sizeof(migrations) / sizeof(migrations[0]))

int64_t firn__srv_now(void)
{
    return (int64_t)time(NULL);
}

bool firn__srv_exec(srv *s, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        FIRN_LOG(FIRN_LOG_ERROR, "serve", "database: %s (in \"%.40s\")", msg ? msg : "?", sql);
        sqlite3_free(msg);
        return false;
    }
    return true;
}

sqlite3_stmt *firn__srv_prepare(srv *s, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
        FIRN_LOG(FIRN_LOG_ERROR, "serve", "database: %s (in \"%.40s\")", sqlite3_errmsg(s->db),
                 sql);
        return NULL;
    }
    return st;
}

static json_t *row_object(sqlite3_stmt *st)
{
    json_t *o = json_object();
    int n = sqlite3_column_count(st);
    for (int i = 0; i < n; i++) {
        const char *name = sqlite3_column_name(st, i);
        switch (sqlite3_column_type(st, i)) {
        case SQLITE_INTEGER:
            json_object_set_new(o, name, json_integer(sqlite3_column_int64(st, i)));
            break;
        case SQLITE_FLOAT:
            json_object_set_new(o, name, json_real(sqlite3_column_double(st, i)));
            break;
        case SQLITE_TEXT:
            json_object_set_new(o, name, json_string((const char *)sqlite3_column_text(st, i)));
            break;
        default: /* NULL; blobs (secrets) never leave the store */
            json_object_set_new(o, name, json_null());
            break;
        }
    }
    return o;
}

json_t *firn__srv_rows(sqlite3_stmt *st)
{
    json_t *a = json_array();
    if (!st)
        return a;
    while (sqlite3_step(st) == SQLITE_ROW)
        json_array_append_new(a, row_object(st));
    sqlite3_finalize(st);
    return a;
}

json_t *firn__srv_row(sqlite3_stmt *st)
{
    if (!st)
        return NULL;
    json_t *o = sqlite3_step(st) == SQLITE_ROW ? row_object(st) : NULL;
    sqlite3_finalize(st);
    return o;
}

firn_rc firn__srv_db_open(srv *s, firn_err *err)
{
    firn_buf path;
    firn_buf_init(&path, SRV_BUF_MAX);
    if (firn_buf_appendf(&path, "%s/firn-serve.db", s->data_dir) || firn_buf_append(&path, "", 1)) {
        firn_buf_deinit(&path);
        return firn_err_set(err, FIRN_ERR_INTERNAL, "out of memory");
    }
    int rc =
        sqlite3_open_v2((const char *)path.data, &s->db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL);
    if (rc != SQLITE_OK) {
        firn_err_set(err, FIRN_ERR_CONFIG, "--data: cannot open the database %s: %s",
                     (const char *)path.data, s->db ? sqlite3_errmsg(s->db) : "out of memory");
        firn_buf_deinit(&path);
        return FIRN_ERR_CONFIG;
    }
    sqlite3_busy_timeout(s->db, 5000);
    if (!firn__srv_exec(s, "PRAGMA journal_mode=WAL; PRAGMA foreign_keys=ON;"
                           " PRAGMA synchronous=NORMAL;")) {
        firn_err_set(err, FIRN_ERR_CONFIG, "--data: %s is not a usable SQLite database: %s",
                     (const char *)path.data, sqlite3_errmsg(s->db));
        firn_buf_deinit(&path);
        return FIRN_ERR_CONFIG;
    }
    sqlite3_stmt *st = firn__srv_prepare(s, "PRAGMA user_version");
    int64_t version = 0;
    if (st && sqlite3_step(st) == SQLITE_ROW)
        version = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (version > (int64_t)N_MIGRATIONS) {
        firn_err_set(err, FIRN_ERR_CONFIG,
                     "--data: %s has schema version %lld, newer than this firn knows (%zu); "
                     "run the firn that wrote it",
                     (const char *)path.data, (long long)version, N_MIGRATIONS);
        firn_buf_deinit(&path);
        return FIRN_ERR_CONFIG;
    }
    for (size_t i = (size_t)version; i < N_MIGRATIONS; i++) {
        char bump[64];
        snprintf(bump, sizeof(bump), "PRAGMA user_version=%zu;", i + 1);
        if (!firn__srv_exec(s, "BEGIN IMMEDIATE") || !firn__srv_exec(s, migrations[i]) ||
            !firn__srv_exec(s, bump) || !firn__srv_exec(s, "COMMIT")) {
            (void)firn__srv_exec(s, "ROLLBACK");
            firn_err_set(err, FIRN_ERR_CONFIG, "--data: migrating %s to schema version %zu failed",
                         (const char *)path.data, i + 1);
            firn_buf_deinit(&path);
            return FIRN_ERR_CONFIG;
        }
        FIRN_LOG(FIRN_LOG_INFO, "serve", "database migrated to schema version %zu", i + 1);
    }
    firn_buf_deinit(&path);
    return FIRN_OK;
}

static int dump_to_buf(const char *text, size_t len, void *data)
{
    return firn_buf_append(data, text, len) ? -1 : 0;
}

char *firn__srv_json_text(const json_t *v, size_t flags)
{
    firn_buf b;
    firn_buf_init(&b, SRV_BUF_MAX);
    if (json_dump_callback(v, dump_to_buf, &b, flags) != 0) {
        firn_buf_deinit(&b);
        return NULL;
    }
    return (char *)firn_buf_take(&b, NULL);
}
