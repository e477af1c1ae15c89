/* SPDX-License-Identifier: Apache-2.0 */
/* The JSON API under /api/v1 (docs/serve.md "API"): first-run setup, sessions (HttpOnly cookie
 * plus a CSRF token) and API tokens (bearer), sources and destinations with "test connection"
 * (`firn check`) and table discovery (`firn discover`), jobs, runs and their logs. Errors are
 * application/problem+json; secrets are accepted but never returned. */
#include "srv_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SESSION_IDLE_SECS   (12 * 3600)
#define SESSION_MAX_SECS    (7 * 86400)
#define LOGIN_FREE_FAILURES 5
#define LOGIN_LOCK_SECS     30
#define MIN_PASSWORD        12
#define CHILD_TIMEOUT_SECS  120
#define LOG_PAGE_DEFAULT    65536
#define LOG_PAGE_MAX        (1 << 20)
#define CHECK_OUTPUT_MAX    65536

/** Who is asking. */
typedef struct who {
    int64_t user_id;
    char username[65];
    char role[16];
    char csrf[65];
    bool cookie; /* authenticated by the session cookie (CSRF applies) */
} who;

static void problem(srv_resp *out, unsigned status, const char *title, const char *fmt, ...)
    FIRN_PRINTF(4, 5);
static void problem(srv_resp *out, unsigned status, const char *title, const char *fmt, ...)
{
    char detail[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    json_decref(out->body);
    out->status = status;
    out->problem = "application/problem+json";
    out->body = json_pack("{s:s, s:s, s:i, s:s}", "type", "about:blank", "title", title, "status",
                          (int)status, "detail", detail);
}

static void reply(srv_resp *out, unsigned status, json_t *body)
{
    json_decref(out->body);
    out->status = status;
    out->body = body;
}

static const char *jstr(json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* ---------------------------------------------------------------------------------------------
 * Sessions, tokens, CSRF
 * -------------------------------------------------------------------------------------------*/

static bool load_user(srv *s, int64_t user_id, who *w)
{
    sqlite3_stmt *st = firn__srv_prepare(s, "SELECT username, role FROM users WHERE id = ?");
    if (!st)
        return false;
    sqlite3_bind_int64(st, 1, user_id);
    bool ok = sqlite3_step(st) == SQLITE_ROW;
    if (ok) {
        w->user_id = user_id;
        snprintf(w->username, sizeof(w->username), "%s", sqlite3_column_text(st, 0));
        snprintf(w->role, sizeof(w->role), "%s", sqlite3_column_text(st, 1));
    }
    sqlite3_finalize(st);
    return ok;
}

/* Resolves the session cookie or the bearer token into *w. */
static bool authenticate(srv *s, const srv_req *rq, who *w)
{
    memset(w, 0, sizeof(*w));
    int64_t now = firn__srv_now();
    char hash[65];
    if (rq->authorization && strncmp(rq->authorization, "Bearer ", 7) == 0) {
        firn__srv_sha256_hex(rq->authorization + 7, hash);
        sqlite3_stmt *st = firn__srv_prepare(s, "SELECT id, user_id FROM api_tokens"
                                                " WHERE token_hash = ?");
        sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
        int64_t tid = 0, uid = 0;
        if (sqlite3_step(st) == SQLITE_ROW) {
            tid = sqlite3_column_int64(st, 0);
            uid = sqlite3_column_int64(st, 1);
        }
        sqlite3_finalize(st);
        if (!tid || !load_user(s, uid, w))
            return false;
        st = firn__srv_prepare(s, "UPDATE api_tokens SET last_used_at = ? WHERE id = ?");
        sqlite3_bind_int64(st, 1, now);
        sqlite3_bind_int64(st, 2, tid);
        (void)sqlite3_step(st);
        sqlite3_finalize(st);
        return true;
    }
    if (!rq->cookie_session)
        return false;
    firn__srv_sha256_hex(rq->cookie_session, hash);
    sqlite3_stmt *st = firn__srv_prepare(s, "SELECT user_id, csrf_token, created_at, last_seen_at"
                                            " FROM sessions WHERE token_hash = ?");
    sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
    bool found = sqlite3_step(st) == SQLITE_ROW;
    int64_t uid = 0, created = 0, seen = 0;
    if (found) {
        uid = sqlite3_column_int64(st, 0);
        snprintf(w->csrf, sizeof(w->csrf), "%s", sqlite3_column_text(st, 1));
        created = sqlite3_column_int64(st, 2);
        seen = sqlite3_column_int64(st, 3);
    }
    sqlite3_finalize(st);
    if (!found)
        return false;
    if (now - seen > SESSION_IDLE_SECS || now - created > SESSION_MAX_SECS) {
        st = firn__srv_prepare(s, "DELETE FROM sessions WHERE token_hash = ?");
        sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
        (void)sqlite3_step(st);
        sqlite3_finalize(st);
        return false;
    }
    if (now - seen >= 60) {
        st = firn__srv_prepare(s, "UPDATE sessions SET last_seen_at = ? WHERE token_hash = ?");
        sqlite3_bind_int64(st, 1, now);
        sqlite3_bind_text(st, 2, hash, -1, SQLITE_STATIC);
        (void)sqlite3_step(st);
        sqlite3_finalize(st);
    }
    w->cookie = true;
    return load_user(s, uid, w);
}

/* The request comes from this server's own pages: an Origin, when sent, is this server, and
 * Sec-Fetch-Site, when sent, is same-origin (or none: typed by the user). */
static bool same_origin(srv *s, const srv_req *rq)
{
    (void)s;
    if (rq->sec_fetch_site && strcmp(rq->sec_fetch_site, "same-origin") != 0 &&
        strcmp(rq->sec_fetch_site, "none") != 0)
        return false;
    if (!rq->origin)
        return true;
    if (!rq->host)
        return false;
    char want[512];
    snprintf(want, sizeof(want), "%s://%s", s->tls ? "https" : "http", rq->host);
    return strcmp(rq->origin, want) == 0;
}

/* Creates a session for user_id: the cookie goes into out, the CSRF token into csrf. */
static void new_session(srv *s, int64_t user_id, srv_resp *out, char csrf[65])
{
    char token[65], hash[65];
    firn__srv_random_hex(token, 32);
    firn__srv_random_hex(csrf, 32);
    firn__srv_sha256_hex(token, hash);
    int64_t now = firn__srv_now();
    sqlite3_stmt *st = firn__srv_prepare(s, "INSERT INTO sessions(token_hash, user_id,"
                                            " csrf_token, created_at, last_seen_at)"
                                            " VALUES (?, ?, ?, ?, ?)");
    sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, user_id);
    sqlite3_bind_text(st, 3, csrf, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, now);
    sqlite3_bind_int64(st, 5, now);
    (void)sqlite3_step(st);
    sqlite3_finalize(st);
    size_t n = 256;
    out->cookie = firn_malloc(n);
    snprintf(out->cookie, n, "firn_session=%s; Path=/; HttpOnly; SameSite=Strict; Max-Age=%d%s",
             token, SESSION_MAX_SECS, s->tls ? "; Secure" : "");
}

static json_t *me_json(const who *w, const char *csrf)
{
    return json_pack("{s:{s:I, s:s, s:s}, s:s}", "user", "id", (json_int_t)w->user_id, "username",
                     w->username, "role", w->role, "csrf_token", csrf);
}

static bool valid_username(const char *u)
{
    size_t n = u ? strlen(u) : 0;
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = u[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == '@'))
            return false;
    }
    return true;
}

static int64_t count_users(srv *s)
{
    sqlite3_stmt *st = firn__srv_prepare(s, "SELECT COUNT(*) FROM users");
    int64_t n = st && sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_finalize(st);
    return n;
}

static void api_setup(srv *s, const srv_req *rq, json_t *body, srv_resp *out)
{
    if (strcmp(rq->method, "GET") == 0) {
        reply(out, 200, json_pack("{s:b}", "needed", count_users(s) == 0));
        return;
    }
    if (count_users(s) > 0) {
        problem(out, 409, "Already set up", "an administrator exists; sign in instead");
        return;
    }
    const char *token = jstr(body, "setup_token"), *user = jstr(body, "username"),
               *pw = jstr(body, "password");
    if (!token || !s->setup_token[0] || !firn__srv_str_eq_ct(token, s->setup_token)) {
        problem(out, 403, "Wrong setup token",
                "the setup token is printed by firn serve at start and kept in %s/setup-token",
                s->data_dir);
        return;
    }
    if (!valid_username(user)) {
        problem(out, 422, "Invalid user name", "username: 1-64 letters, digits and . _ - @");
        return;
    }
    if (!pw || strlen(pw) < MIN_PASSWORD) {
        problem(out, 422, "Password too short", "password: at least %d characters", MIN_PASSWORD);
        return;
    }
    char *hash = firn__srv_password_hash(pw);
    sqlite3_stmt *st = firn__srv_prepare(s, "INSERT INTO users(username, password_hash, role,"
                                            " created_at) VALUES (?, ?, 'admin', ?)");
    sqlite3_bind_text(st, 1, user, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, hash ? hash : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, firn__srv_now());
    int rc = hash ? sqlite3_step(st) : SQLITE_ERROR;
    sqlite3_finalize(st);
    firn_free(hash);
    if (rc != SQLITE_DONE) {
        problem(out, 500, "Setup failed", "could not store the user");
        return;
    }
    who w = {0};
    (void)load_user(s, sqlite3_last_insert_rowid(s->db), &w);
    s->setup_token[0] = '\0';
    char path[4200];
    snprintf(path, sizeof(path), "%s/setup-token", s->data_dir);
    unlink(path);
    FIRN_LOG(FIRN_LOG_INFO, "serve", "first-run setup: administrator \"%s\" created", w.username);
    char csrf[65];
    new_session(s, w.user_id, out, csrf);
    reply(out, 201, me_json(&w, csrf));
}

static srv_throttle *throttle_of(srv *s, const char *user)
{
    srv_throttle *oldest = &s->throttle[0];
    for (size_t i = 0; i < sizeof(s->throttle) / sizeof(s->throttle[0]); i++) {
        if (strcmp(s->throttle[i].user, user) == 0)
            return &s->throttle[i];
        if (s->throttle[i].locked_until < oldest->locked_until || !s->throttle[i].user[0])
            oldest = &s->throttle[i];
    }
    memset(oldest, 0, sizeof(*oldest));
    snprintf(oldest->user, sizeof(oldest->user), "%s", user);
    return oldest;
}

static void api_login(srv *s, json_t *body, srv_resp *out)
{
    const char *user = jstr(body, "username"), *pw = jstr(body, "password");
    if (!user || !pw) {
        problem(out, 422, "Missing credentials", "give username and password");
        return;
    }
    int64_t now = firn__srv_now();
    srv_throttle *t = throttle_of(s, valid_username(user) ? user : "?");
    if (t->locked_until > now) {
        out->retry_after = (int)(t->locked_until - now);
        problem(out, 429, "Too many failed sign-ins",
                "too many wrong passwords for this user; try again in %d s", out->retry_after);
        return;
    }
    sqlite3_stmt *st =
        firn__srv_prepare(s, "SELECT id, password_hash FROM users WHERE username = ?");
    sqlite3_bind_text(st, 1, user, -1, SQLITE_STATIC);
    int64_t uid = 0;
    char *stored = NULL;
    if (sqlite3_step(st) == SQLITE_ROW) {
        uid = sqlite3_column_int64(st, 0);
        stored = firn_strdup((const char *)sqlite3_column_text(st, 1));
    }
    sqlite3_finalize(st);
    /* an unknown user costs the same hash as a known one */
    bool ok = firn__srv_password_check(pw, stored ? stored
                                                  : "pbkdf2-sha256$600000$AAAAAAAAAAAAAAAAAAAAAA==$"
                                                    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
    ok = ok && stored;
    firn_free(stored);
    if (!ok) {
        if (++t->failures >= LOGIN_FREE_FAILURES)
            t->locked_until = now + LOGIN_LOCK_SECS;
        FIRN_LOG(FIRN_LOG_WARN, "serve", "failed sign-in for \"%s\" (%d in a row)",
                 valid_username(user) ? user : "?", t->failures);
        problem(out, 401, "Wrong user name or password", "wrong user name or password");
        return;
    }
    memset(t, 0, sizeof(*t));
    who w = {0};
    (void)load_user(s, uid, &w);
    char csrf[65];
    new_session(s, uid, out, csrf);
    reply(out, 200, me_json(&w, csrf));
}

static void api_logout(srv *s, const srv_req *rq, srv_resp *out)
{
    if (rq->cookie_session) {
        char hash[65];
        firn__srv_sha256_hex(rq->cookie_session, hash);
        sqlite3_stmt *st = firn__srv_prepare(s, "DELETE FROM sessions WHERE token_hash = ?");
        sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
        (void)sqlite3_step(st);
        sqlite3_finalize(st);
    }
    out->cookie = firn_strdup("firn_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
    reply(out, 204, NULL);
}

/* ---------------------------------------------------------------------------------------------
 * Sources and destinations
 * -------------------------------------------------------------------------------------------*/

typedef struct field_spec {
    const char *name;
    bool required;
    bool secret;
    bool integer;
} field_spec;

static const field_spec source_fields[] = {
    {"host", true, false, false},     {"port", false, false, true},
    {"database", true, false, false}, {"username", true, false, false},
    {"password", false, true, false}, {"sslmode", false, false, false},
    {NULL, false, false, false},
};

static const field_spec destination_fields[] = {
    {"catalog_type", true, false, false},
    {"catalog_name", false, false, false},
    {"catalog_uri", false, false, false},
    {"warehouse", false, false, false},
    {"namespace", false, false, false},
    {"token", false, true, false},
    {"storage_endpoint", false, false, false},
    {"storage_region", false, false, false},
    {"access_key_id", false, false, false},
    {"secret_access_key", false, true, false},
    {NULL, false, false, false},
};

static const char *resource_label(const char *table)
{
    return strcmp(table, "sources") == 0 ? "source" : "destination";
}

/* Checks body against the fields of table and splits it into config and secrets (merged onto
 * old_secrets: a secret left out keeps its value, null clears it). Returns false with out
 * filled on bad input. */
static bool split_fields(const char *table,
                         json_t *body,
                         json_t *old_secrets,
                         json_t **config,
                         json_t **secrets,
                         srv_resp *out)
{
    const field_spec *fields = strcmp(table, "sources") == 0 ? source_fields : destination_fields;
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v)
    {
        if (strcmp(key, "name") == 0)
            continue;
        bool known = false;
        for (const field_spec *f = fields; f->name; f++)
            known = known || strcmp(f->name, key) == 0;
        if (!known) {
            problem(out, 422, "Unknown field", "%s: unknown field \"%s\"", resource_label(table),
                    key);
            return false;
        }
    }
    *config = json_object();
    *secrets = old_secrets ? json_deep_copy(old_secrets) : json_object();
    for (const field_spec *f = fields; f->name; f++) {
        v = json_object_get(body, f->name);
        bool empty = !v || json_is_null(v) || (json_is_string(v) && json_string_length(v) == 0);
        if (f->secret) {
            if (v && json_is_null(v))
                json_object_del(*secrets, f->name);
            else if (!empty && json_is_string(v))
                json_object_set(*secrets, f->name, v);
            else if (!empty)
                goto bad_type;
            continue;
        }
        if (empty) {
            if (f->required) {
                problem(out, 422, "Missing field", "%s: \"%s\" is required", resource_label(table),
                        f->name);
                goto fail;
            }
            continue;
        }
        if (f->integer) {
            if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 65535) {
                problem(out, 422, "Invalid field", "%s: \"%s\" must be a number 1-65535",
                        resource_label(table), f->name);
                goto fail;
            }
        } else if (!json_is_string(v) || json_string_length(v) > 4096) {
            goto bad_type;
        }
        json_object_set(*config, f->name, v);
    }
    if (strcmp(table, "sources") == 0) {
        const char *mode = jstr(*config, "sslmode");
        static const char *const modes[] = {"disable", "allow",     "prefer",
                                            "require", "verify-ca", "verify-full"};
        bool ok = !mode;
        for (size_t i = 0; mode && i < 6; i++)
            ok = ok || strcmp(mode, modes[i]) == 0;
        if (!ok) {
            problem(out, 422, "Invalid field",
                    "source: \"sslmode\" must be disable, allow, prefer, require, verify-ca or "
                    "verify-full");
            goto fail;
        }
    } else {
        const char *type = jstr(*config, "catalog_type");
        if (strcmp(type, "sql") != 0 && strcmp(type, "rest") != 0) {
            problem(out, 422, "Invalid field",
                    "destination: \"catalog_type\" must be sql (embedded SQLite catalog) or rest");
            goto fail;
        }
        if (strcmp(type, "sql") == 0 && !jstr(*config, "warehouse")) {
            problem(out, 422, "Missing field",
                    "destination: a sql catalog needs \"warehouse\" (a folder such as "
                    "/var/lib/firn/warehouse, or s3://bucket/path)");
            goto fail;
        }
        if (strcmp(type, "rest") == 0 && !jstr(*config, "catalog_uri")) {
            problem(out, 422, "Missing field",
                    "destination: a rest catalog needs \"catalog_uri\" (its http(s):// URL)");
            goto fail;
        }
    }
    return true;
bad_type:
    problem(out, 422, "Invalid field", "%s: a field has the wrong type (text expected)",
            resource_label(table));
fail:
    json_decref(*config);
    json_decref(*secrets);
    return false;
}

static json_t *resource_json(srv *s, const char *table, int64_t id)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT id, name, config, secrets, created_at, updated_at FROM %s WHERE id = ?",
             table);
    sqlite3_stmt *st = firn__srv_prepare(s, sql);
    sqlite3_bind_int64(st, 1, id);
    json_t *o = NULL;
    if (sqlite3_step(st) == SQLITE_ROW) {
        json_t *cfg = json_loads((const char *)sqlite3_column_text(st, 2), 0, NULL);
        if (!cfg)
            cfg = json_object();
        /* which secrets are set, never their values */
        json_t *set = json_array();
        const void *blob = sqlite3_column_blob(st, 3);
        int blen = sqlite3_column_bytes(st, 3);
        if (blob && blen > 0) {
            size_t plen = 0;
            char *plain = firn__srv_open(s, table, blob, (size_t)blen, &plen);
            json_t *sec = plain ? json_loads(plain, 0, NULL) : NULL;
            const char *k;
            json_t *v;
            json_object_foreach(sec, k, v) json_array_append_new(set, json_string(k));
            json_decref(sec);
            if (plain) {
                memset(plain, 0, plen);
                firn_free(plain);
            }
        }
        json_object_set_new(cfg, "secrets_set", set);
        o = json_pack("{s:I, s:s, s:o, s:I, s:I}", "id", (json_int_t)sqlite3_column_int64(st, 0),
                      "name", (const char *)sqlite3_column_text(st, 1), "config", cfg, "created_at",
                      (json_int_t)sqlite3_column_int64(st, 4), "updated_at",
                      (json_int_t)sqlite3_column_int64(st, 5));
    }
    sqlite3_finalize(st);
    return o;
}

static bool store_resource(srv *s,
                           const char *table,
                           int64_t id,
                           const char *name,
                           json_t *config,
                           json_t *secrets,
                           int64_t *new_id,
                           srv_resp *out)
{
    char *cfg_text = firn__srv_json_text(config, JSON_COMPACT | JSON_SORT_KEYS);
    char *sec_text = firn__srv_json_text(secrets, JSON_COMPACT);
    size_t sealed_len = 0;
    uint8_t *sealed = json_object_size(secrets)
                          ? firn__srv_seal(s, table, sec_text, strlen(sec_text), &sealed_len)
                          : NULL;
    memset(sec_text, 0, strlen(sec_text));
    firn_free(sec_text);
    char sql[256];
    if (id)
        snprintf(sql, sizeof(sql),
                 "UPDATE %s SET name = ?, config = ?, secrets = ?, updated_at = ? WHERE id = ?",
                 table);
    else
        snprintf(sql, sizeof(sql),
                 "INSERT INTO %s(name, config, secrets, updated_at, created_at)"
                 " VALUES (?, ?, ?, ?, ?)",
                 table);
    sqlite3_stmt *st = firn__srv_prepare(s, sql);
    int64_t now = firn__srv_now();
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, cfg_text, -1, SQLITE_STATIC);
    if (sealed)
        sqlite3_bind_blob(st, 3, sealed, (int)sealed_len, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, 3);
    sqlite3_bind_int64(st, 4, now);
    if (id)
        sqlite3_bind_int64(st, 5, id);
    else
        sqlite3_bind_int64(st, 5, now);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    firn_free(cfg_text);
    firn_free(sealed);
    if (rc == SQLITE_CONSTRAINT) {
        problem(out, 409, "Name taken", "a %s named \"%s\" exists already", resource_label(table),
                name);
        return false;
    }
    if (rc != SQLITE_DONE) {
        problem(out, 500, "Database error", "could not store the %s", resource_label(table));
        return false;
    }
    *new_id = id ? id : sqlite3_last_insert_rowid(s->db);
    return true;
}

static json_t *old_secrets_of(srv *s, const char *table, int64_t id)
{
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT secrets FROM %s WHERE id = ?", table);
    sqlite3_stmt *st = firn__srv_prepare(s, sql);
    sqlite3_bind_int64(st, 1, id);
    json_t *sec = NULL;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_bytes(st, 0) > 0) {
        size_t plen = 0;
        char *plain = firn__srv_open(s, table, sqlite3_column_blob(st, 0),
                                     (size_t)sqlite3_column_bytes(st, 0), &plen);
        if (plain) {
            sec = json_loads(plain, 0, NULL);
            memset(plain, 0, plen);
            firn_free(plain);
        }
    }
    sqlite3_finalize(st);
    return sec;
}

/* A scratch folder under DATA/tmp (firn_malloc'd path), removed by drop_scratch. */
static char *make_scratch(srv *s)
{
    char hex[17];
    firn__srv_random_hex(hex, 8);
    size_t n = strlen(s->data_dir) + 32;
    char *dir = firn_malloc(n);
    snprintf(dir, n, "%s/tmp/%s", s->data_dir, hex);
    if (mkdir(dir, 0700) != 0) {
        firn_free(dir);
        return NULL;
    }
    return dir;
}

static void drop_scratch(char *dir)
{
    static const char *const names[] = {"source.json", "destination.json", "streams.json",
                                        "streams.json.tmp", "output.log"};
    char path[4200];
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
    firn_free(dir);
}

/* Runs `firn check` on a source or destination; replies {ok, exit_code, output}. */
static void api_test(srv *s, const char *table, int64_t id, srv_resp *out)
{
    char *dir = make_scratch(s);
    if (!dir) {
        problem(out, 500, "No scratch folder", "cannot create a folder under %s/tmp: %s",
                s->data_dir, strerror(errno));
        return;
    }
    firn_strlist env = {0};
    firn_err err = {0};
    bool is_source = strcmp(table, "sources") == 0;
    firn_rc rc = is_source ? firn__srv_write_source(s, id, dir, NULL, &env, &err)
                           : firn__srv_write_destination(s, id, dir, &env, &err);
    if (rc) {
        firn_strlist_clear(&env);
        drop_scratch(dir);
        problem(out, rc == FIRN_ERR_NOT_FOUND ? 404 : 500, "Cannot test", "%s", err.msg);
        return;
    }
    char file[4200], log_path[4200];
    snprintf(file, sizeof(file), "%s/%s", dir, is_source ? "source.json" : "destination.json");
    snprintf(log_path, sizeof(log_path), "%s/output.log", dir);
    const char *args[] = {"check", is_source ? "--source" : "--destination", file, NULL};
    pthread_mutex_unlock(&s->lock);
    int code = firn__srv_run_child(s, args, &env, dir, log_path, CHILD_TIMEOUT_SECS);
    pthread_mutex_lock(&s->lock);
    firn_strlist_clear(&env);
    char *text = firn__srv_read_file(log_path, CHECK_OUTPUT_MAX, true);
    drop_scratch(dir);
    json_t *o = json_pack("{s:b, s:i, s:s}", "ok", code == 0, "exit_code", code, "output",
                          text ? text : "");
    if (!o) /* output that is not UTF-8 */
        o = json_pack("{s:b, s:i, s:s}", "ok", code == 0, "exit_code", code, "output",
                      "(the output is not UTF-8 text)");
    firn_free(text);
    reply(out, 200, o);
}

/* The tables `firn discover` finds in a streams file, as [{namespace, name, sync_modes,
 * primary_key, notes}]. */
static json_t *tables_of_streams(json_t *streams_doc)
{
    json_t *a = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(streams_doc, "streams"), i, e)
    {
        json_t *st = json_object_get(e, "stream");
        json_t *t = json_object();
        json_object_set(t, "namespace", json_object_get(st, "namespace"));
        json_object_set(t, "name", json_object_get(st, "name"));
        json_object_set(t, "sync_modes", json_object_get(st, "supported_sync_modes"));
        json_object_set(t, "primary_key", json_object_get(st, "source_defined_primary_key"));
        if (json_object_get(st, "notes"))
            json_object_set(t, "notes", json_object_get(st, "notes"));
        json_array_append_new(a, t);
    }
    return a;
}

/* Runs `firn discover` for source id into dir/streams.json; returns the document or NULL with
 * out filled. Drops s->lock while discover runs. */
static json_t *
run_discover(srv *s, int64_t source_id, const char *dir, const char *slot, srv_resp *out)
{
    firn_strlist env = {0};
    firn_err err = {0};
    if (firn__srv_write_source(s, source_id, dir, slot, &env, &err)) {
        firn_strlist_clear(&env);
        problem(out, 422, "Cannot discover", "%s", err.msg);
        return NULL;
    }
    char src[4200], streams[4200], log_path[4200];
    snprintf(src, sizeof(src), "%s/source.json", dir);
    snprintf(streams, sizeof(streams), "%s/streams.json", dir);
    snprintf(log_path, sizeof(log_path), "%s/discover.log", dir);
    unlink(log_path);
    const char *args[] = {"discover", "--source", src, "--output", streams, NULL};
    pthread_mutex_unlock(&s->lock);
    int code = firn__srv_run_child(s, args, &env, dir, log_path, CHILD_TIMEOUT_SECS);
    pthread_mutex_lock(&s->lock);
    firn_strlist_clear(&env);
    char *text = firn__srv_read_file(log_path, CHECK_OUTPUT_MAX, true);
    unlink(log_path);
    json_t *doc = code == 0 ? json_load_file(streams, 0, NULL) : NULL;
    if (!doc) {
        /* the CLI's error line, else the last line of the output */
        char *line = text ? strstr(text, "firn: ") : NULL;
        line = line ? line + 6 : text;
        char *nl = line ? strchr(line, '\n') : NULL;
        if (nl)
            *nl = '\0';
        problem(out, 422, "Discovery failed", "%s",
                line && *line ? line : "firn discover failed without a message");
    }
    firn_free(text);
    return doc;
}

static void api_discover(srv *s, int64_t id, srv_resp *out)
{
    char *dir = make_scratch(s);
    if (!dir) {
        problem(out, 500, "No scratch folder", "cannot create a folder under %s/tmp", s->data_dir);
        return;
    }
    json_t *doc = run_discover(s, id, dir, NULL, out);
    drop_scratch(dir);
    if (!doc)
        return;
    reply(out, 200, json_pack("{s:o}", "tables", tables_of_streams(doc)));
    json_decref(doc);
}

static bool in_use(srv *s, const char *table, int64_t id)
{
    sqlite3_stmt *st = firn__srv_prepare(s, strcmp(table, "sources") == 0
                                                ? "SELECT 1 FROM jobs WHERE source_id = ?"
                                                : "SELECT 1 FROM jobs WHERE destination_id = ?");
    sqlite3_bind_int64(st, 1, id);
    bool used = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return used;
}

static void api_resources(srv *s,
                          const srv_req *rq,
                          const char *table,
                          int64_t id,
                          const char *action,
                          json_t *body,
                          srv_resp *out)
{
    const char *m = rq->method;
    const char *label = resource_label(table);
    if (!id && !action && strcmp(m, "GET") == 0) {
        char sql[128];
        snprintf(sql, sizeof(sql), "SELECT id FROM %s ORDER BY name", table);
        sqlite3_stmt *st = firn__srv_prepare(s, sql);
        json_t *items = json_array();
        while (st && sqlite3_step(st) == SQLITE_ROW) {
            json_t *o = resource_json(s, table, sqlite3_column_int64(st, 0));
            if (o)
                json_array_append_new(items, o);
        }
        sqlite3_finalize(st);
        reply(out, 200, json_pack("{s:o}", "items", items));
        return;
    }
    if (!id && !action && strcmp(m, "POST") == 0) {
        const char *name = jstr(body, "name");
        if (!name || !*name || strlen(name) > 100) {
            problem(out, 422, "Missing field", "%s: \"name\" is required (1-100 characters)",
                    label);
            return;
        }
        json_t *cfg, *sec;
        if (!split_fields(table, body, NULL, &cfg, &sec, out))
            return;
        int64_t nid = 0;
        if (store_resource(s, table, 0, name, cfg, sec, &nid, out))
            reply(out, 201, resource_json(s, table, nid));
        json_decref(cfg);
        json_decref(sec);
        return;
    }
    json_t *cur = id ? resource_json(s, table, id) : NULL;
    if (!cur) {
        problem(out, 404, "Not found", "%s %lld does not exist", label, (long long)id);
        return;
    }
    if (!action && strcmp(m, "GET") == 0) {
        reply(out, 200, cur);
        return;
    }
    if (!action && (strcmp(m, "PUT") == 0 || strcmp(m, "PATCH") == 0)) {
        const char *name = jstr(body, "name");
        if (!name)
            name = jstr(cur, "name");
        json_t *old = old_secrets_of(s, table, id);
        json_t *cfg, *sec;
        bool ok = split_fields(table, body, old, &cfg, &sec, out);
        json_decref(old);
        int64_t nid = 0;
        if (ok && store_resource(s, table, id, name, cfg, sec, &nid, out))
            reply(out, 200, resource_json(s, table, id));
        if (ok) {
            json_decref(cfg);
            json_decref(sec);
        }
        json_decref(cur);
        return;
    }
    json_decref(cur);
    if (!action && strcmp(m, "DELETE") == 0) {
        if (in_use(s, table, id)) {
            problem(out, 409, "In use", "a job uses this %s; delete the job first", label);
            return;
        }
        char sql[128];
        snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE id = ?", table);
        sqlite3_stmt *st = firn__srv_prepare(s, sql);
        sqlite3_bind_int64(st, 1, id);
        (void)sqlite3_step(st);
        sqlite3_finalize(st);
        reply(out, 204, NULL);
        return;
    }
    if (action && strcmp(action, "test") == 0 && strcmp(m, "POST") == 0) {
        api_test(s, table, id, out);
        return;
    }
    if (action && strcmp(action, "discover") == 0 && strcmp(m, "POST") == 0 &&
        strcmp(table, "sources") == 0) {
        api_discover(s, id, out);
        return;
    }
    problem(out, 405, "Method not allowed", "%s %s is not part of the API", m, rq->path);
}

/* ---------------------------------------------------------------------------------------------
 * Jobs and runs
 * -------------------------------------------------------------------------------------------*/

/* stats.json of the job (what firn sync writes), or NULL. */
static json_t *job_stats(srv *s, int64_t job_id)
{
    char *dir = firn__srv_job_dir(s, job_id);
    char path[4200];
    snprintf(path, sizeof(path), "%s/stats.json", dir);
    firn_free(dir);
    return json_load_file(path, 0, NULL);
}

/* The next three fire times of a job row's schedule (unix seconds; empty when none). */
static json_t *next_runs(json_t *job)
{
    json_t *a = json_array();
    const char *kind = jstr(job, "schedule_kind");
    int64_t at = json_integer_value(json_object_get(job, "next_run_at"));
    if (!at)
        return a;
    if (strcmp(kind, "interval") == 0) {
        int64_t every = json_integer_value(json_object_get(job, "interval_seconds"));
        for (int i = 0; i < 3; i++)
            json_array_append_new(a, json_integer(at + i * every));
    } else if (strcmp(kind, "cron") == 0 && jstr(job, "cron")) {
        srv_cron c;
        char why[256];
        if (firn__srv_cron_parse(jstr(job, "cron"), &c, why, sizeof(why))) {
            for (int i = 0; i < 3 && at > 0; i++) {
                json_array_append_new(a, json_integer(at));
                at = firn__srv_cron_next(&c, at);
            }
        }
    }
    return a;
}

/* POST /cron-preview {"cron"}: the next three fire times, or the parse error. */
static void api_cron_preview(json_t *body, srv_resp *out)
{
    const char *text = jstr(body, "cron");
    srv_cron c;
    char why[256];
    if (!text || !firn__srv_cron_parse(text, &c, why, sizeof(why))) {
        problem(out, 422, "Invalid cron expression", "%s",
                text ? why : "give \"cron\", such as \"*/15 * * * *\"");
        return;
    }
    json_t *a = json_array();
    int64_t at = firn__srv_now();
    for (int i = 0; i < 3; i++) {
        at = firn__srv_cron_next(&c, at);
        if (at < 0)
            break;
        json_array_append_new(a, json_integer(at));
    }
    if (json_array_size(a) == 0) {
        json_decref(a);
        problem(out, 422, "Invalid cron expression",
                "\"%s\" never fires (no such date in the next five years)", text);
        return;
    }
    reply(out, 200, json_pack("{s:o}", "next_runs", a));
}

static json_t *job_json(srv *s, int64_t job_id, bool detail)
{
    sqlite3_stmt *st = firn__srv_prepare(
        s, "SELECT j.id, j.name, j.source_id, src.name AS source_name, j.destination_id,"
           " dst.name AS destination_name, j.paused, j.created_at, COALESCE(c.kind, 'manual')"
           " AS schedule_kind, c.interval_seconds, c.cron, c.next_run_at, j.tables"
           " FROM jobs j JOIN sources src ON src.id = j.source_id"
           " JOIN destinations dst ON dst.id = j.destination_id"
           " LEFT JOIN schedules c ON c.job_id = j.id WHERE j.id = ?");
    sqlite3_bind_int64(st, 1, job_id);
    json_t *o = firn__srv_row(st);
    if (!o)
        return NULL;
    json_object_set_new(o, "next_runs", next_runs(o));
    json_t *tables = json_loads(jstr(o, "tables"), 0, NULL);
    json_object_set_new(o, "tables", tables ? tables : json_array());
    json_object_set_new(o, "paused",
                        json_boolean(json_integer_value(json_object_get(o, "paused"))));
    st = firn__srv_prepare(s, "SELECT id, trigger, state, started_at, ended_at, exit_code, error"
                              " FROM runs WHERE job_id = ? ORDER BY id DESC LIMIT 1");
    sqlite3_bind_int64(st, 1, job_id);
    json_t *last = firn__srv_row(st);
    json_object_set_new(o, "last_run", last ? last : json_null());
    st = firn__srv_prepare(s, "SELECT error FROM runs WHERE job_id = ? AND error IS NOT NULL"
                              " AND state IN ('failed', 'abandoned') ORDER BY id DESC LIMIT 1");
    sqlite3_bind_int64(st, 1, job_id);
    json_t *err_row = firn__srv_row(st);
    json_object_set(o, "last_error", err_row ? json_object_get(err_row, "error") : json_null());
    json_decref(err_row);
    const char *state = "idle";
    const char *last_state = last ? jstr(last, "state") : NULL;
    if (last_state && strcmp(last_state, "running") == 0)
        state = "running";
    else if (json_is_true(json_object_get(o, "paused")))
        state = "paused";
    else if (last_state && strcmp(last_state, "failed") == 0)
        state = "failing";
    else if (strcmp(jstr(o, "schedule_kind"), "manual") != 0)
        state = "scheduled";
    json_object_set_new(o, "state", json_string(state));
    json_t *stats = job_stats(s, job_id);
    json_t *sum = json_object();
    if (stats) {
        static const char *const keys[] = {"phase",           "mode",          "rows_written",
                                           "rows_per_second", "lag_bytes",     "acknowledged_lsn",
                                           "updated_at",      "source_wal_lsn"};
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
            json_t *v = json_object_get(stats, keys[i]);
            if (v)
                json_object_set(sum, keys[i], v);
        }
        const char *last_commit = NULL;
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(stats, "streams"), i, e)
        {
            const char *at = jstr(e, "last_commit_at");
            if (at && (!last_commit || strcmp(at, last_commit) > 0))
                last_commit = at;
        }
        if (last_commit)
            json_object_set_new(sum, "last_commit_at", json_string(last_commit));
        if (detail)
            json_object_set(o, "streams", json_object_get(stats, "streams"));
        json_decref(stats);
    }
    json_object_set_new(o, "stats", sum);
    if (detail) {
        char *dir = firn__srv_job_dir(s, job_id);
        json_object_set_new(o, "folder", json_string(dir));
        char slot[64];
        firn__srv_slot_name(s, job_id, slot, sizeof(slot));
        json_object_set_new(o, "slot", json_string(slot));
        firn_free(dir);
    }
    return o;
}

static bool parse_schedule(
    json_t *sched, const char **kind, int64_t *interval, const char **cron, srv_resp *out)
{
    *kind = "manual";
    *interval = 0;
    *cron = NULL;
    if (!sched || json_is_null(sched))
        return true;
    *kind = jstr(sched, "kind");
    if (!*kind || (strcmp(*kind, "manual") != 0 && strcmp(*kind, "interval") != 0 &&
                   strcmp(*kind, "continuous") != 0 && strcmp(*kind, "cron") != 0)) {
        problem(out, 422, "Invalid schedule",
                "schedule.kind must be manual, interval, cron or continuous");
        return false;
    }
    if (strcmp(*kind, "cron") == 0) {
        *cron = jstr(sched, "cron");
        srv_cron c;
        char why[256];
        if (!*cron || strlen(*cron) > 200) {
            problem(out, 422, "Invalid schedule",
                    "schedule.cron is required with kind cron, such as \"*/15 * * * *\" (UTC)");
            return false;
        }
        if (!firn__srv_cron_parse(*cron, &c, why, sizeof(why))) {
            problem(out, 422, "Invalid cron expression", "schedule.cron: %s", why);
            return false;
        }
        if (firn__srv_cron_next(&c, firn__srv_now()) < 0) {
            problem(out, 422, "Invalid cron expression",
                    "schedule.cron \"%s\" never fires (no such date in the next five years)",
                    *cron);
            return false;
        }
    }
    if (strcmp(*kind, "interval") == 0) {
        json_t *v = json_object_get(sched, "interval_seconds");
        if (!json_is_integer(v) || json_integer_value(v) < 60 ||
            json_integer_value(v) > 31 * 86400) {
            problem(out, 422, "Invalid schedule",
                    "schedule.interval_seconds must be a whole number from 60 (a minute) to "
                    "2678400 (31 days)");
            return false;
        }
        *interval = json_integer_value(v);
    }
    return true;
}

static void
store_schedule(srv *s, int64_t job_id, const char *kind, int64_t interval, const char *cron)
{
    sqlite3_stmt *st = firn__srv_prepare(
        s, "INSERT INTO schedules(job_id, kind, interval_seconds, cron, next_run_at)"
           " VALUES (?, ?, ?, ?, ?)"
           " ON CONFLICT(job_id) DO UPDATE SET kind = excluded.kind,"
           " interval_seconds = excluded.interval_seconds, cron = excluded.cron,"
           " next_run_at = excluded.next_run_at");
    sqlite3_bind_int64(st, 1, job_id);
    sqlite3_bind_text(st, 2, kind, -1, SQLITE_STATIC);
    srv_cron c;
    char why[256];
    if (interval) {
        sqlite3_bind_int64(st, 3, interval);
        sqlite3_bind_null(st, 4);
        sqlite3_bind_int64(st, 5, firn__srv_now() + interval);
    } else if (cron && firn__srv_cron_parse(cron, &c, why, sizeof(why))) {
        sqlite3_bind_null(st, 3);
        sqlite3_bind_text(st, 4, cron, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 5, firn__srv_cron_next(&c, firn__srv_now()));
    } else {
        sqlite3_bind_null(st, 3);
        sqlite3_bind_null(st, 4);
        sqlite3_bind_null(st, 5);
    }
    (void)sqlite3_step(st);
    sqlite3_finalize(st);
}

static bool exists(srv *s, const char *table, int64_t id)
{
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT 1 FROM %s WHERE id = ?", table);
    sqlite3_stmt *st = firn__srv_prepare(s, sql);
    sqlite3_bind_int64(st, 1, id);
    bool found = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return found;
}

static void delete_job_row(srv *s, int64_t id)
{
    sqlite3_stmt *st = firn__srv_prepare(s, "DELETE FROM jobs WHERE id = ?");
    sqlite3_bind_int64(st, 1, id);
    (void)sqlite3_step(st);
    sqlite3_finalize(st);
}

/* POST /jobs: checks the body, discovers the source into the job's folder, selects the tables
 * asked for in its streams.json, stores the job and its schedule. */
static void api_job_create(srv *s, json_t *body, srv_resp *out)
{
    const char *name = jstr(body, "name");
    json_t *tables = json_object_get(body, "tables");
    json_int_t src = json_integer_value(json_object_get(body, "source_id"));
    json_int_t dst = json_integer_value(json_object_get(body, "destination_id"));
    if (!name || !*name || strlen(name) > 100) {
        problem(out, 422, "Missing field", "job: \"name\" is required (1-100 characters)");
        return;
    }
    if (!exists(s, "sources", src) || !exists(s, "destinations", dst)) {
        problem(out, 422, "Unknown source or destination",
                "job: source_id and destination_id must name an existing source and "
                "destination");
        return;
    }
    if (!json_is_array(tables) || json_array_size(tables) == 0) {
        problem(out, 422, "No tables", "job: \"tables\" must list at least one table");
        return;
    }
    const char *kind, *cron;
    int64_t interval;
    if (!parse_schedule(json_object_get(body, "schedule"), &kind, &interval, &cron, out))
        return;
    json_t *clean = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(tables, i, t)
    {
        const char *ns = jstr(t, "namespace"), *tn = jstr(t, "name"), *mode = jstr(t, "sync_mode");
        if (!ns || !tn) {
            json_decref(clean);
            problem(out, 422, "Invalid table", "job: tables[%zu] needs namespace and name", i);
            return;
        }
        json_t *c = json_pack("{s:s, s:s}", "namespace", ns, "name", tn);
        if (mode)
            json_object_set_new(c, "sync_mode", json_string(mode));
        json_array_append_new(clean, c);
    }
    char *tables_text = firn__srv_json_text(clean, JSON_COMPACT);
    sqlite3_stmt *st = firn__srv_prepare(s, "INSERT INTO jobs(name, source_id, destination_id,"
                                            " tables, created_at) VALUES (?, ?, ?, ?, ?)");
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, src);
    sqlite3_bind_int64(st, 3, dst);
    sqlite3_bind_text(st, 4, tables_text, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, firn__srv_now());
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    firn_free(tables_text);
    if (rc != SQLITE_DONE) {
        json_decref(clean);
        if (rc == SQLITE_CONSTRAINT)
            problem(out, 409, "Name taken", "a job named \"%s\" exists already", name);
        else
            problem(out, 500, "Database error", "could not store the job");
        return;
    }
    int64_t id = sqlite3_last_insert_rowid(s->db);
    char *dir = firn__srv_job_dir(s, id);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        problem(out, 500, "Cannot create the job folder", "%s: %s", dir, strerror(errno));
        goto fail;
    }
    char slot[64];
    firn__srv_slot_name(s, id, slot, sizeof(slot));
    json_t *doc = run_discover(s, src, dir, slot, out);
    if (!doc)
        goto fail;
    /* selected_streams: exactly the tables asked for, each checked against what was found */
    json_t *selected = json_object();
    json_array_foreach(clean, i, t)
    {
        const char *ns = jstr(t, "namespace"), *tn = jstr(t, "name");
        bool found = false;
        size_t k;
        json_t *e;
        json_array_foreach(json_object_get(doc, "streams"), k, e)
        {
            json_t *sst = json_object_get(e, "stream");
            found = found || (jstr(sst, "namespace") && strcmp(jstr(sst, "namespace"), ns) == 0 &&
                              jstr(sst, "name") && strcmp(jstr(sst, "name"), tn) == 0);
        }
        if (!found) {
            problem(out, 422, "Unknown table", "job: the source has no table %s.%s", ns, tn);
            json_decref(selected);
            json_decref(doc);
            goto fail;
        }
        json_t *list = json_object_get(selected, ns);
        if (!list) {
            list = json_array();
            json_object_set_new(selected, ns, list);
        }
        json_t *entry = json_pack("{s:s}", "stream_name", tn);
        if (jstr(t, "sync_mode"))
            json_object_set(entry, "sync_mode", json_object_get(t, "sync_mode"));
        json_array_append_new(list, entry);
    }
    json_object_set_new(doc, "selected_streams", selected);
    char path[4200];
    snprintf(path, sizeof(path), "%s/streams.json", dir);
    if (json_dump_file(doc, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0) {
        json_decref(doc);
        problem(out, 500, "Cannot write streams.json", "%s", path);
        goto fail;
    }
    json_decref(doc);
    store_schedule(s, id, kind, interval, cron);
    json_decref(clean);
    firn_free(dir);
    reply(out, 201, job_json(s, id, true));
    return;
fail:
    json_decref(clean);
    firn_free(dir);
    delete_job_row(s, id);
}

static bool can_write(const who *w)
{
    return strcmp(w->role, "viewer") != 0;
}

static void api_jobs(srv *s,
                     const srv_req *rq,
                     const who *w,
                     int64_t id,
                     const char *action,
                     json_t *body,
                     srv_resp *out)
{
    const char *m = rq->method;
    if (!id && strcmp(m, "GET") == 0) {
        sqlite3_stmt *st = firn__srv_prepare(s, "SELECT id FROM jobs ORDER BY name");
        json_t *items = json_array();
        while (st && sqlite3_step(st) == SQLITE_ROW) {
            json_t *o = job_json(s, sqlite3_column_int64(st, 0), false);
            if (o)
                json_array_append_new(items, o);
        }
        sqlite3_finalize(st);
        reply(out, 200, json_pack("{s:o}", "items", items));
        return;
    }
    if (!id && strcmp(m, "POST") == 0) {
        if (strcmp(w->role, "admin") != 0) {
            problem(out, 403, "Forbidden", "only an admin creates jobs");
            return;
        }
        api_job_create(s, body, out);
        return;
    }
    json_t *job = id ? job_json(s, id, true) : NULL;
    if (!job) {
        problem(out, 404, "Not found", "job %lld does not exist", (long long)id);
        return;
    }
    bool running = strcmp(jstr(job, "state"), "running") == 0;
    if (!action && strcmp(m, "GET") == 0) {
        reply(out, 200, job);
        return;
    }
    json_decref(job);
    if (strcmp(m, "GET") == 0 && action && strcmp(action, "runs") == 0) {
        int64_t limit = 50, before = INT64_MAX;
        if (rq->q_limit && (firn_parse_i64(rq->q_limit, strlen(rq->q_limit), &limit, NULL) ||
                            limit < 1 || limit > 500)) {
            problem(out, 400, "Invalid limit", "limit must be 1-500");
            return;
        }
        if (rq->q_before &&
            (firn_parse_i64(rq->q_before, strlen(rq->q_before), &before, NULL) || before < 1)) {
            problem(out, 400, "Invalid cursor", "before must be a run id");
            return;
        }
        sqlite3_stmt *st = firn__srv_prepare(
            s, "SELECT id, job_id, trigger, state, pid, started_at, ended_at, exit_code, error"
               " FROM runs WHERE job_id = ? AND id < ? ORDER BY id DESC LIMIT ?");
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int64(st, 2, before);
        sqlite3_bind_int64(st, 3, limit + 1);
        json_t *items = firn__srv_rows(st);
        json_t *next = json_null();
        if ((int64_t)json_array_size(items) > limit) {
            json_array_remove(items, (size_t)limit);
            next = json_object_get(json_array_get(items, (size_t)limit - 1), "id");
            json_incref(next);
        }
        reply(out, 200, json_pack("{s:o, s:o}", "items", items, "next_before", next));
        return;
    }
    if (!can_write(w)) {
        problem(out, 403, "Forbidden", "the viewer role cannot change jobs");
        return;
    }
    if (!action && strcmp(m, "DELETE") == 0) {
        if (strcmp(w->role, "admin") != 0) {
            problem(out, 403, "Forbidden", "only an admin deletes jobs");
            return;
        }
        if (running) {
            problem(out, 409, "Job is running", "stop the job before deleting it");
            return;
        }
        delete_job_row(s, id);
        reply(out, 204, NULL);
        return;
    }
    if (!action && strcmp(m, "PATCH") == 0) {
        json_t *paused = json_object_get(body, "paused");
        json_t *sched = json_object_get(body, "schedule");
        if (paused && !json_is_boolean(paused)) {
            problem(out, 422, "Invalid field", "paused must be true or false");
            return;
        }
        if (sched) {
            const char *kind, *cron;
            int64_t interval;
            if (!parse_schedule(sched, &kind, &interval, &cron, out))
                return;
            if (running) {
                problem(out, 409, "Job is running", "stop the job before changing its schedule");
                return;
            }
            store_schedule(s, id, kind, interval, cron);
        }
        if (paused) {
            sqlite3_stmt *st = firn__srv_prepare(s, "UPDATE jobs SET paused = ? WHERE id = ?");
            sqlite3_bind_int(st, 1, json_is_true(paused));
            sqlite3_bind_int64(st, 2, id);
            (void)sqlite3_step(st);
            sqlite3_finalize(st);
        }
        reply(out, 200, job_json(s, id, true));
        return;
    }
    if (action && strcmp(action, "run") == 0 && strcmp(m, "POST") == 0) {
        /* a manual run resumes a paused job */
        sqlite3_stmt *st = firn__srv_prepare(s, "UPDATE jobs SET paused = 0 WHERE id = ?");
        sqlite3_bind_int64(st, 1, id);
        (void)sqlite3_step(st);
        sqlite3_finalize(st);
        firn_err err = {0};
        int64_t rid = 0;
        firn_rc rc = firn__srv_start_run(s, id, "manual", &rid, &err);
        if (rc == FIRN_ERR_CONFLICT)
            problem(out, 409, "Job is running", "%s", err.msg);
        else if (rc)
            problem(out, 500, "Run not started", "%s", err.msg);
        else
            reply(out, 202, json_pack("{s:I}", "run_id", (json_int_t)rid));
        return;
    }
    if (action && strcmp(action, "stop") == 0 && strcmp(m, "POST") == 0) {
        /* a stopped job stays stopped: its schedule waits until it is run or resumed */
        sqlite3_stmt *st = firn__srv_prepare(s, "UPDATE jobs SET paused = 1 WHERE id = ?");
        sqlite3_bind_int64(st, 1, id);
        (void)sqlite3_step(st);
        sqlite3_finalize(st);
        if (!firn__srv_stop_run(s, id)) {
            problem(out, 409, "Not running", "job %lld has no run to stop (it is paused now)",
                    (long long)id);
            return;
        }
        reply(out, 202, json_pack("{s:b}", "stopping", 1));
        return;
    }
    problem(out, 405, "Method not allowed", "%s %s is not part of the API", m, rq->path);
}

/* Makes text JSON-safe UTF-8: bytes of an invalid sequence become '?' (a page boundary may cut
 * a character in two). */
static void to_utf8(char *text, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned char c = (unsigned char)text[i];
        size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = n > 0 && i + n <= len && !(c == 0);
        for (size_t k = 1; ok && k < n; k++)
            ok = ((unsigned char)text[i + k] >> 6) == 2;
        if (!ok) {
            text[i++] = '?';
            continue;
        }
        i += n;
    }
}

static void api_runs(srv *s, const srv_req *rq, int64_t id, const char *action, srv_resp *out)
{
    if (strcmp(rq->method, "GET") != 0) {
        problem(out, 405, "Method not allowed", "runs are read only; stop a run through its job");
        return;
    }
    sqlite3_stmt *st = firn__srv_prepare(
        s, "SELECT r.id, r.job_id, j.name AS job_name, r.trigger, r.state, r.pid, r.started_at,"
           " r.ended_at, r.exit_code, r.error, l.path FROM runs r JOIN jobs j ON j.id = r.job_id"
           " LEFT JOIN run_logs l ON l.run_id = r.id WHERE r.id = ?");
    sqlite3_bind_int64(st, 1, id);
    json_t *run = firn__srv_row(st);
    if (!run) {
        problem(out, 404, "Not found", "run %lld does not exist", (long long)id);
        return;
    }
    char *path = jstr(run, "path") ? firn_strdup(jstr(run, "path")) : NULL;
    json_object_del(run, "path");
    struct stat sb;
    int64_t size = path && stat(path, &sb) == 0 ? (int64_t)sb.st_size : 0;
    json_object_set_new(run, "log_bytes", json_integer(size));
    if (!action) {
        firn_free(path);
        reply(out, 200, run);
        return;
    }
    json_decref(run);
    if (strcmp(action, "logs") != 0) {
        firn_free(path);
        problem(out, 404, "Not found", "no such resource %s", rq->path);
        return;
    }
    /* a byte range of the log: [offset, offset + limit), by default its last page */
    int64_t limit = LOG_PAGE_DEFAULT, offset = -1;
    if (rq->q_limit && (firn_parse_i64(rq->q_limit, strlen(rq->q_limit), &limit, NULL) ||
                        limit < 1 || limit > LOG_PAGE_MAX)) {
        firn_free(path);
        problem(out, 400, "Invalid limit", "limit must be 1-%d bytes", LOG_PAGE_MAX);
        return;
    }
    if (rq->q_offset &&
        (firn_parse_i64(rq->q_offset, strlen(rq->q_offset), &offset, NULL) || offset < 0)) {
        firn_free(path);
        problem(out, 400, "Invalid offset", "offset must be a byte position, 0 or more");
        return;
    }
    if (offset < 0)
        offset = size > limit ? size - limit : 0;
    if (offset > size)
        offset = size;
    int64_t end = offset + limit < size ? offset + limit : size;
    char *text = firn_malloc((size_t)(end - offset) + 1);
    size_t got = 0;
    if (path && end > offset) {
        FILE *f = fopen(path, "rb");
        if (f) {
            if (fseeko(f, (off_t)offset, SEEK_SET) == 0)
                got = fread(text, 1, (size_t)(end - offset), f);
            fclose(f);
        }
    }
    text[got] = '\0';
    to_utf8(text, got);
    firn_free(path);
    reply(out, 200,
          json_pack("{s:I, s:I, s:I, s:s%}", "offset", (json_int_t)offset, "end",
                    (json_int_t)(offset + (int64_t)got), "size", (json_int_t)size, "text", text,
                    got));
    firn_free(text);
}

static void
api_tokens(srv *s, const srv_req *rq, const who *w, int64_t id, json_t *body, srv_resp *out)
{
    if (!id && strcmp(rq->method, "GET") == 0) {
        sqlite3_stmt *st = firn__srv_prepare(s, "SELECT id, name, created_at, last_used_at"
                                                " FROM api_tokens WHERE user_id = ? ORDER BY id");
        sqlite3_bind_int64(st, 1, w->user_id);
        reply(out, 200, json_pack("{s:o}", "items", firn__srv_rows(st)));
        return;
    }
    if (!id && strcmp(rq->method, "POST") == 0) {
        const char *name = jstr(body, "name");
        if (!name || !*name || strlen(name) > 100) {
            problem(out, 422, "Missing field", "token: \"name\" is required (1-100 characters)");
            return;
        }
        char token[70], hash[65];
        memcpy(token, "firn_", 5);
        firn__srv_random_hex(token + 5, 32);
        firn__srv_sha256_hex(token, hash);
        sqlite3_stmt *st = firn__srv_prepare(s, "INSERT INTO api_tokens(user_id, name,"
                                                " token_hash, created_at) VALUES (?, ?, ?, ?)");
        sqlite3_bind_int64(st, 1, w->user_id);
        sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, hash, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, firn__srv_now());
        (void)sqlite3_step(st);
        sqlite3_finalize(st);
        /* the token itself is shown this once; only its hash is kept */
        reply(out, 201,
              json_pack("{s:I, s:s, s:s}", "id", (json_int_t)sqlite3_last_insert_rowid(s->db),
                        "name", name, "token", token));
        return;
    }
    if (id && strcmp(rq->method, "DELETE") == 0) {
        sqlite3_stmt *st =
            firn__srv_prepare(s, "DELETE FROM api_tokens WHERE id = ? AND user_id = ?");
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int64(st, 2, w->user_id);
        (void)sqlite3_step(st);
        sqlite3_finalize(st);
        if (sqlite3_changes(s->db) == 0)
            problem(out, 404, "Not found", "token %lld does not exist", (long long)id);
        else
            reply(out, 204, NULL);
        return;
    }
    problem(out, 405, "Method not allowed", "%s %s is not part of the API", rq->method, rq->path);
}

/* Users (admin only, a user may change their own password): list, create with a role,
 * change password or role, delete. A password change or a deletion ends the user's sessions. */
static void
api_users(srv *s, const srv_req *rq, const who *w, int64_t id, json_t *body, srv_resp *out)
{
    const char *m = rq->method;
    bool admin = strcmp(w->role, "admin") == 0;
    bool self_pw = id == w->user_id && strcmp(m, "PATCH") == 0 && !json_object_get(body, "role");
    if (!admin && !self_pw) {
        problem(out, 403, "Forbidden", "only an admin manages users");
        return;
    }
    if (!id && strcmp(m, "GET") == 0) {
        sqlite3_stmt *st = firn__srv_prepare(s, "SELECT id, username, role, created_at FROM users"
                                                " ORDER BY username");
        reply(out, 200, json_pack("{s:o}", "items", firn__srv_rows(st)));
        return;
    }
    const char *role = jstr(body, "role"), *pw = jstr(body, "password");
    if (role && strcmp(role, "admin") != 0 && strcmp(role, "operator") != 0 &&
        strcmp(role, "viewer") != 0) {
        problem(out, 422, "Invalid field", "user: \"role\" must be admin, operator or viewer");
        return;
    }
    if (pw && strlen(pw) < MIN_PASSWORD) {
        problem(out, 422, "Password too short", "password: at least %d characters", MIN_PASSWORD);
        return;
    }
    if (!id && strcmp(m, "POST") == 0) {
        const char *user = jstr(body, "username");
        if (!valid_username(user)) {
            problem(out, 422, "Invalid user name", "username: 1-64 letters, digits and . _ - @");
            return;
        }
        if (!pw || !role) {
            problem(out, 422, "Missing field", "user: \"password\" and \"role\" are required");
            return;
        }
        char *hash = firn__srv_password_hash(pw);
        sqlite3_stmt *st = firn__srv_prepare(s, "INSERT INTO users(username, password_hash,"
                                                " role, created_at) VALUES (?, ?, ?, ?)");
        sqlite3_bind_text(st, 1, user, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, hash ? hash : "", -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, role, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, firn__srv_now());
        int rc = hash ? sqlite3_step(st) : SQLITE_ERROR;
        sqlite3_finalize(st);
        firn_free(hash);
        if (rc == SQLITE_CONSTRAINT)
            problem(out, 409, "Name taken", "a user named \"%s\" exists already", user);
        else if (rc != SQLITE_DONE)
            problem(out, 500, "Database error", "could not store the user");
        else
            reply(out, 201,
                  json_pack("{s:I, s:s, s:s}", "id", (json_int_t)sqlite3_last_insert_rowid(s->db),
                            "username", user, "role", role));
        return;
    }
    who target;
    if (!id || !load_user(s, id, &target)) {
        problem(out, 404, "Not found", "user %lld does not exist", (long long)id);
        return;
    }
    sqlite3_stmt *st;
    if (strcmp(m, "DELETE") == 0 ||
        (strcmp(m, "PATCH") == 0 && role && id == w->user_id && strcmp(role, "admin") != 0)) {
        if (id == w->user_id) {
            problem(out, 409, "Cannot remove yourself",
                    "another admin must delete or demote this user");
            return;
        }
    }
    if (strcmp(m, "DELETE") == 0) {
        st = firn__srv_prepare(s, "DELETE FROM users WHERE id = ?");
        sqlite3_bind_int64(st, 1, id);
        (void)sqlite3_step(st);
        sqlite3_finalize(st);
        reply(out, 204, NULL);
        return;
    }
    if (strcmp(m, "PATCH") != 0) {
        problem(out, 405, "Method not allowed", "%s %s is not part of the API", m, rq->path);
        return;
    }
    if (role) {
        st = firn__srv_prepare(s, "UPDATE users SET role = ? WHERE id = ?");
        sqlite3_bind_text(st, 1, role, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, id);
        (void)sqlite3_step(st);
        sqlite3_finalize(st);
    }
    if (pw) {
        char *hash = firn__srv_password_hash(pw);
        st = firn__srv_prepare(s, "UPDATE users SET password_hash = ? WHERE id = ?");
        sqlite3_bind_text(st, 1, hash ? hash : "", -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, id);
        if (hash)
            (void)sqlite3_step(st);
        sqlite3_finalize(st);
        firn_free(hash);
        /* every session of the user ends, the caller's own too */
        st = firn__srv_prepare(s, "DELETE FROM sessions WHERE user_id = ?");
        sqlite3_bind_int64(st, 1, id);
        (void)sqlite3_step(st);
        sqlite3_finalize(st);
    }
    (void)load_user(s, id, &target);
    reply(out, 200,
          json_pack("{s:I, s:s, s:s}", "id", (json_int_t)id, "username", target.username, "role",
                    target.role));
}

/* ---------------------------------------------------------------------------------------------
 * Dispatch
 * -------------------------------------------------------------------------------------------*/

/* Splits "/a/12/b" into up to 4 segments (pointers into buf). */
static size_t segments(const char *path, char *buf, size_t cap, char **seg, size_t max)
{
    snprintf(buf, cap, "%s", path);
    size_t n = 0;
    char *p = buf;
    while (*p == '/')
        p++;
    while (*p && n < max) {
        seg[n++] = p;
        char *slash = strchr(p, '/');
        if (!slash)
            break;
        *slash = '\0';
        p = slash + 1;
    }
    if (*p && n == max && strchr(p, '/'))
        return max + 1;
    return n;
}

static int64_t seg_id(const char *text)
{
    int64_t v = 0;
    if (!text || firn_parse_i64(text, strlen(text), &v, NULL) || v < 1)
        return -1;
    return v;
}

static bool mutating(const char *m)
{
    return strcmp(m, "GET") != 0 && strcmp(m, "HEAD") != 0;
}

static void dispatch(srv *s, const srv_req *rq, srv_resp *out)
{
    char buf[512];
    char *seg[4] = {0};
    size_t n = segments(rq->path, buf, sizeof(buf), seg, 4);
    if (n == 0 || n > 4) {
        problem(out, 404, "Not found", "no API resource at %s", rq->path);
        return;
    }
    json_t *body = NULL;
    if (mutating(rq->method) && rq->body_len) {
        if (!rq->content_type || strncmp(rq->content_type, "application/json", 16) != 0) {
            problem(out, 415, "Unsupported media type", "send the body as application/json");
            return;
        }
        json_error_t jerr;
        body = json_loadb(rq->body, rq->body_len, JSON_REJECT_DUPLICATES, &jerr);
        if (!body || !json_is_object(body)) {
            json_decref(body);
            problem(out, 400, "Invalid JSON", "the body must be one JSON object: %s", jerr.text);
            return;
        }
    }
    if (!body)
        body = json_object();
    /* pre-authentication endpoints: setup and sign-in */
    if (strcmp(seg[0], "setup") == 0 && n == 1) {
        if (mutating(rq->method) && !same_origin(s, rq))
            problem(out, 403, "Cross-site request", "setup comes from this server's own page");
        else if (strcmp(rq->method, "GET") == 0 || strcmp(rq->method, "POST") == 0)
            api_setup(s, rq, body, out);
        else
            problem(out, 405, "Method not allowed", "GET or POST /setup");
        json_decref(body);
        return;
    }
    if (strcmp(seg[0], "session") == 0 && n == 1 && strcmp(rq->method, "POST") == 0) {
        if (!same_origin(s, rq))
            problem(out, 403, "Cross-site request", "sign in from this server's own page");
        else
            api_login(s, body, out);
        json_decref(body);
        return;
    }
    who w;
    if (!authenticate(s, rq, &w)) {
        problem(out, 401, "Not signed in",
                count_users(s) == 0 ? "no user exists yet: finish the first-run setup"
                                    : "sign in, or send an API token as Authorization: Bearer");
        json_decref(body);
        return;
    }
    if (mutating(rq->method) && w.cookie &&
        (!rq->csrf || !w.csrf[0] || !firn__srv_str_eq_ct(rq->csrf, w.csrf) ||
         !same_origin(s, rq))) {
        problem(out, 403, "CSRF check failed",
                "a state-changing request needs the X-CSRF-Token header of the session and "
                "must come from this server's own pages");
        json_decref(body);
        return;
    }
    int64_t id = n >= 2 ? seg_id(seg[1]) : 0;
    const char *action = n >= 3 ? seg[2] : NULL;
    if (n >= 2 && id < 0) {
        problem(out, 404, "Not found", "no API resource at %s", rq->path);
    } else if (n == 4) {
        problem(out, 404, "Not found", "no API resource at %s", rq->path);
    } else if (strcmp(seg[0], "session") == 0 && n == 1 && strcmp(rq->method, "DELETE") == 0) {
        api_logout(s, rq, out);
    } else if (strcmp(seg[0], "me") == 0 && n == 1 && strcmp(rq->method, "GET") == 0) {
        reply(out, 200, me_json(&w, w.csrf));
    } else if (strcmp(seg[0], "sources") == 0 || strcmp(seg[0], "destinations") == 0) {
        bool reads = strcmp(rq->method, "GET") == 0;
        if (!reads && strcmp(w.role, "admin") != 0 && !(action && strcmp(action, "test") == 0))
            problem(out, 403, "Forbidden", "only an admin changes sources and destinations");
        else if (action && strcmp(w.role, "viewer") == 0)
            problem(out, 403, "Forbidden", "the viewer role cannot run tests");
        else
            api_resources(s, rq, seg[0], id, action, body, out);
    } else if (strcmp(seg[0], "jobs") == 0) {
        api_jobs(s, rq, &w, id, action, body, out);
    } else if (strcmp(seg[0], "runs") == 0 && id > 0) {
        api_runs(s, rq, id, action, out);
    } else if (strcmp(seg[0], "cron-preview") == 0 && n == 1 && strcmp(rq->method, "POST") == 0) {
        api_cron_preview(body, out);
    } else if (strcmp(seg[0], "users") == 0 && !action) {
        api_users(s, rq, &w, id, body, out);
    } else if (strcmp(seg[0], "tokens") == 0 && !action) {
        api_tokens(s, rq, &w, id, body, out);
    } else {
        problem(out, 404, "Not found", "no API resource at %s", rq->path);
    }
    json_decref(body);
}

void firn__srv_api(srv *s, const srv_req *rq, srv_resp *out)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&s->lock);
    dispatch(s, rq, out);
    pthread_mutex_unlock(&s->lock);
}
