/* SPDX-License-Identifier: Apache-2.0 */
/* PostgreSQL connections: conninfo from discrete fields or a URI, fixed session settings, one-line
 * errors that keep the server's wording and never show the password. */
#include "pg_int.h"

#include <stdlib.h>
#include <string.h>

#define CONN_PARAMS_MAX 24
#define DESCRIBE_MAX    256

struct firn_pg_conn {
    PGconn *pq;
    int server_version;
    int money_scale;  /* -1 until asked */
    bool replication; /* walsender: simple query protocol only */
    char describe[DESCRIBE_MAX];
};

/* Settings that change how values are sent; every connection fixes them (issue 5 "Scope"). */
static const char SESSION_SQL[] = "SET DateStyle = 'ISO, YMD'; SET TimeZone = 'UTC'; "
                                  "SET IntervalStyle = 'postgres'; SET extra_float_digits = 3; "
                                  "SET bytea_output = 'hex'; SET client_encoding = 'UTF8'";

typedef struct conn_params {
    const char *keys[CONN_PARAMS_MAX + 1];
    const char *values[CONN_PARAMS_MAX + 1];
    int n;
    char timeout[16];
} conn_params;

/* Dead peer found after 30 s idle plus 3 unanswered probes 10 s apart (docs/configuration.md). */
const char *const firn__pg_keepalive_keys[FIRN_PG_KEEPALIVE_N] = {
    "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count"};
const char *const firn__pg_keepalive_values[FIRN_PG_KEEPALIVE_N] = {"1", "30", "10", "3"};

static void param_add(conn_params *p, const char *key, const char *value)
{
    if (!value || !*value)
        return;
    FIRN_ASSERT(p->n < CONN_PARAMS_MAX);
    p->keys[p->n] = key;
    p->values[p->n] = value;
    p->n++;
}

static void build_params(const firn_pg_conn_config *cfg, firn_pg_conn_mode mode, conn_params *p)
{
    memset(p, 0, sizeof(*p));
    /* TCP keepalives, so that a vanished server or a cut network ends a blocked read instead
     * of hanging for hours (the kernel's default is 2 h idle); before the URI, whose own
     * settings override them. */
    for (size_t i = 0; i < FIRN_PG_KEEPALIVE_N; i++)
        param_add(p, firn__pg_keepalive_keys[i], firn__pg_keepalive_values[i]);
    /* The URI goes first as "dbname" so libpq expands it; later fields override its parts. */
    param_add(p, "dbname", cfg->uri);
    param_add(p, "host", cfg->host);
    param_add(p, "port", cfg->port);
    param_add(p, "dbname", cfg->dbname);
    param_add(p, "user", cfg->user);
    const char *password = cfg->password;
    if (!password && cfg->password_env)
        password = getenv(cfg->password_env);
    param_add(p, "password", password);
    param_add(p, "sslmode", cfg->sslmode);
    param_add(p, "sslrootcert", cfg->sslrootcert);
    param_add(p, "sslcert", cfg->sslcert);
    param_add(p, "sslkey", cfg->sslkey);
    param_add(p, "application_name", cfg->application_name ? cfg->application_name : "firn");
    param_add(p, "options", cfg->options);
    param_add(p, "client_encoding", "UTF8");
    int timeout_s = cfg->connect_timeout_s > 0 ? cfg->connect_timeout_s : 10;
    snprintf(p->timeout, sizeof(p->timeout), "%d", timeout_s);
    param_add(p, "connect_timeout", p->timeout);
    if (mode == FIRN_PG_CONN_REPLICATION)
        param_add(p, "replication", "database");
}

void firn__pg_one_line(const char *msg, char *out, size_t out_cap)
{
    size_t o = 0;
    for (const char *s = msg; *s && o + 3 < out_cap; s++) {
        if (*s == '\n') {
            if (s[1] == '\0')
                break;
            out[o++] = ';';
            out[o++] = ' ';
            while (s[1] == '\t' || s[1] == ' ') /* libpq indents continuation lines */
                s++;
        } else if (*s == '\t' || *s == '\r') {
            out[o++] = ' ';
        } else {
            out[o++] = *s;
        }
    }
    o = firn_utf8_whole_len(out, o); /* cut inside a UTF-8 sequence: drop it */
    while (o > 0 && out[o - 1] == ' ')
        o--;
    out[o] = '\0';
}

/* Sorts a failed connection attempt by the wording libpq and the server use. */
static firn_rc classify_connect_error(const char *msg)
{
    static const struct {
        const char *needle;
        firn_rc rc;
    } rules[] = {
        {"password authentication failed", FIRN_ERR_AUTH},
        {"no password supplied", FIRN_ERR_AUTH},
        {"authentication failed", FIRN_ERR_AUTH},
        {"pg_hba.conf", FIRN_ERR_AUTH},
        {"role \"", FIRN_ERR_AUTH},
        {"database \"", FIRN_ERR_NOT_FOUND},
        {"invalid connection option", FIRN_ERR_CONFIG},
        {"invalid sslmode", FIRN_ERR_CONFIG},
        {"invalid URI", FIRN_ERR_CONFIG},
        {"invalid integer value", FIRN_ERR_CONFIG},
        {"missing \"=\"", FIRN_ERR_CONFIG},
        {"certificate", FIRN_ERR_CONFIG},
        {"server does not support SSL", FIRN_ERR_CONFIG},
    };
    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
        if (strstr(msg, rules[i].needle))
            return rules[i].rc;
    }
    return FIRN_ERR_NETWORK;
}

static void describe_conn(firn_pg_conn *c)
{
    const char *host = PQhost(c->pq);
    const char *port = PQport(c->pq);
    const char *db = PQdb(c->pq);
    const char *user = PQuser(c->pq);
    snprintf(c->describe, sizeof(c->describe), "host=%s port=%s dbname=%s user=%s",
             host ? host : "", port ? port : "", db ? db : "", user ? user : "");
}

static void log_notice(void *arg, const char *message)
{
    (void)arg;
    char line[FIRN_ERR_MSG_MAX];
    firn__pg_one_line(message, line, sizeof(line));
    FIRN_LOG(FIRN_LOG_WARN, "pg", "server: %s", line);
}

void firn__pg_route_notices(PGconn *pq)
{
    PQsetNoticeProcessor(pq, log_notice, NULL);
}

firn_rc firn_pg_conn_open(const firn_pg_conn_config *cfg,
                          firn_pg_conn_mode mode,
                          firn_pg_conn **out,
                          firn_err *err)
{
    *out = NULL;
    conn_params p;
    build_params(cfg, mode, &p);
    PGconn *pq = PQconnectdbParams(p.keys, p.values, 1);
    if (!pq)
        return firn_err_set(err, FIRN_ERR_INTERNAL, "could not allocate a libpq connection");
    if (PQstatus(pq) != CONNECTION_OK) {
        char line[FIRN_ERR_MSG_MAX];
        firn__pg_one_line(PQerrorMessage(pq), line, sizeof(line));
        firn_rc rc = classify_connect_error(line);
        PQfinish(pq);
        return firn_err_set(err, rc, "%s", line[0] ? line : "could not connect to PostgreSQL");
    }
    firn__pg_route_notices(pq);
    firn_pg_conn *c = firn_calloc(1, sizeof(*c));
    c->pq = pq;
    c->server_version = PQserverVersion(pq);
    c->money_scale = -1;
    c->replication = mode == FIRN_PG_CONN_REPLICATION;
    describe_conn(c);
    firn_rc rc = firn_pg_conn_exec(c, SESSION_SQL, err);
    if (rc) {
        firn_err_context(err, "while setting up the session on %s", c->describe);
        firn_pg_conn_close(c);
        return rc;
    }
    *out = c;
    return FIRN_OK;
}

void firn_pg_conn_close(firn_pg_conn *c)
{
    if (!c)
        return;
    PQfinish(c->pq);
    firn_free(c);
}

struct pg_conn *firn_pg_conn_pq(firn_pg_conn *c)
{
    return c->pq;
}

int firn_pg_conn_server_version(const firn_pg_conn *c)
{
    return c->server_version;
}

const char *firn_pg_conn_describe(const firn_pg_conn *c)
{
    return c->describe;
}

firn_rc firn__pg_result_error(PGconn *pq, const PGresult *res, firn_err *err, const char *context)
{
    char line[FIRN_ERR_MSG_MAX];
    const char *msg = res ? PQresultErrorMessage(res) : NULL;
    if (!msg || !*msg)
        msg = PQerrorMessage(pq);
    firn__pg_one_line(msg, line, sizeof(line));
    /* The primary message without "ERROR:  " reads better inside firn's own line. */
    const char *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    firn_rc rc = PQstatus(pq) == CONNECTION_OK ? FIRN_ERR_SOURCE : FIRN_ERR_NETWORK;
    if (state && strcmp(state, "42501") == 0) /* insufficient_privilege: retrying cannot help */
        rc = FIRN_ERR_PERMISSION;
    if (primary) {
        firn__pg_one_line(primary, line, sizeof(line));
        return firn_err_set(err, rc, "%s: %s (SQLSTATE %s)", context, line, state ? state : "?");
    }
    return firn_err_set(err, rc, "%s: %s", context, line[0] ? line : "connection lost");
}

firn_rc firn_pg_conn_exec(firn_pg_conn *c, const char *sql, firn_err *err)
{
    PGresult *res = PQexec(c->pq, sql);
    ExecStatusType st = PQresultStatus(res);
    firn_rc rc = FIRN_OK;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        rc = firn__pg_result_error(c->pq, res, err, "query failed");
    PQclear(res);
    return rc;
}

/* Replication connections speak only the simple query protocol: parameters ($1..$9) are inlined
 * as escaped literals. */
static firn_rc inline_params(firn_pg_conn *c,
                             const char *sql,
                             int n_params,
                             const char *const *params,
                             firn_buf *out,
                             firn_err *err)
{
    firn_rc rc = FIRN_OK;
    for (const char *p = sql; *p && !rc; p++) {
        int k = p[0] == '$' && p[1] >= '1' && p[1] <= '9' ? p[1] - '1' : -1;
        if (k < 0 || k >= n_params) {
            rc = firn_buf_append(out, p, 1);
            continue;
        }
        char *lit = PQescapeLiteral(c->pq, params[k], strlen(params[k]));
        if (!lit)
            return firn_err_set(err, FIRN_ERR_INVALID, "could not quote a query parameter");
        rc = firn_buf_append_cstr(out, lit);
        PQfreemem(lit);
        p++;
    }
    if (rc)
        return firn_err_set(err, rc, "query too long");
    return FIRN_OK;
}

firn_rc firn__pg_query(firn_pg_conn *c,
                       const char *sql,
                       int n_params,
                       const char *const *params,
                       PGresult **out,
                       firn_err *err)
{
    *out = NULL;
    PGresult *res;
    if (c->replication && n_params > 0) {
        firn_buf b;
        firn_buf_init(&b, FIRN_PG_SQL_MAX);
        firn_rc rc = inline_params(c, sql, n_params, params, &b, err);
        if (rc) {
            firn_buf_deinit(&b);
            return rc;
        }
        res = PQexec(c->pq, (const char *)b.data);
        firn_buf_deinit(&b);
    } else if (n_params == 0) {
        res = PQexec(c->pq, sql);
    } else {
        res = PQexecParams(c->pq, sql, n_params, NULL, params, NULL, NULL, 0);
    }
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        firn_rc rc = firn__pg_result_error(c->pq, res, err, "catalog query failed");
        PQclear(res);
        return rc;
    }
    *out = res;
    return FIRN_OK;
}

firn_rc
firn_pg_conn_query_value(firn_pg_conn *c, const char *sql, char *out, size_t out_cap, firn_err *err)
{
    PGresult *res = NULL;
    FIRN_TRY(firn__pg_query(c, sql, 0, NULL, &res, err));
    firn_rc rc = FIRN_OK;
    if (PQntuples(res) < 1 || PQnfields(res) < 1) {
        rc = firn_err_set(err, FIRN_ERR_NOT_FOUND, "query returned no rows");
    } else {
        const char *v = PQgetisnull(res, 0, 0) ? "" : PQgetvalue(res, 0, 0);
        snprintf(out, out_cap, "%s", v);
    }
    PQclear(res);
    return rc;
}

firn_rc firn__pg_quote_ident(firn_buf *b, const char *s)
{
    FIRN_TRY(firn_buf_append(b, "\"", 1));
    for (const char *p = s; *p; p++) {
        if (*p == '"')
            FIRN_TRY(firn_buf_append(b, "\"", 1));
        FIRN_TRY(firn_buf_append(b, p, 1));
    }
    return firn_buf_append(b, "\"", 1);
}

firn_rc firn_pg_ident_append(firn_buf *b, const char *s)
{
    return firn__pg_quote_ident(b, s);
}

/* s between quote characters q, each q in s doubled, cut to fit cap (UTF-8 aware). */
static const char *quote_text(char *out, size_t cap, const char *s, char q)
{
    FIRN_ASSERT(cap >= 3);
    size_t n = 0;
    out[n++] = q;
    for (const char *p = s; *p;) {
        size_t len = 1;
        while ((p[len] & 0xC0) == 0x80)
            len++;
        const size_t need = len + (*p == q ? 1 : 0);
        if (n + need + 2 > cap)
            break;
        if (*p == q)
            out[n++] = q;
        memcpy(out + n, p, len);
        n += len;
        p += len;
    }
    out[n++] = q;
    out[n] = '\0';
    return out;
}

const char *firn_pg_ident_text(char *out, size_t cap, const char *s)
{
    return quote_text(out, cap, s, '"');
}

const char *firn_pg_literal_text(char *out, size_t cap, const char *s)
{
    return quote_text(out, cap, s, '\'');
}

int firn__pg_conn_money_scale(firn_pg_conn *c)
{
    if (c->money_scale >= 0)
        return c->money_scale;
    char v[32];
    firn_err err = {0};
    int32_t scale = 2;
    if (firn_pg_conn_query_value(c, "SELECT scale(0::money::numeric)", v, sizeof(v), &err) ==
            FIRN_OK &&
        firn_parse_i32(v, strlen(v), &scale, &err) == FIRN_OK && scale >= 0 && scale <= 18)
        c->money_scale = scale;
    else
        c->money_scale = 2;
    return c->money_scale;
}

firn_rc firn_pg_snapshot_export(firn_pg_conn *c, char *out, size_t out_cap, firn_err *err)
{
    FIRN_TRY(firn_pg_conn_exec(c, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", err));
    return firn_pg_conn_query_value(c, "SELECT pg_export_snapshot()", out, out_cap, err);
}
