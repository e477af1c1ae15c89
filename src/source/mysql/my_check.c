/* SPDX-License-Identifier: Apache-2.0 */
/* The MySQL/MariaDB preflight of `firn check`: binlog settings, GTIDs, retention, privileges,
 * firn's server_id and primary keys, each failure one line with its remedy. */
#include "my_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static firn_rc var(firn_my_conn *c, const char *sql, char *out, size_t cap, firn_err *err)
{
    bool null = false;
    firn_rc rc = firn_my_conn_query_value(c, sql, out, cap, &null, err);
    if (rc == FIRN_OK && null)
        out[0] = '\0';
    return rc;
}

/* A server variable that may not exist on this server or version: "" then. */
static void var_opt(firn_my_conn *c, const char *sql, char *out, size_t cap)
{
    firn_err ignored = {0};
    if (var(c, sql, out, cap, &ignored))
        out[0] = '\0';
}

static firn_rc check_binlog(firn_my_conn *c, firn_err *err)
{
    char v[64];
    FIRN_TRY(var(c, "SELECT @@GLOBAL.log_bin", v, sizeof(v), err));
    if (strcmp(v, "1") != 0)
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "the binary log is off on the source (log_bin=OFF); CDC reads it: "
                            "start the server with log_bin and binlog_format=ROW");
    FIRN_TRY(var(c, "SELECT @@GLOBAL.binlog_format", v, sizeof(v), err));
    if (strcasecmp(v, "ROW") != 0)
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "binlog_format is %s on the source; CDC needs ROW: run SET GLOBAL "
                            "binlog_format = 'ROW' and set binlog_format=ROW in the server's "
                            "option file",
                            v);
    FIRN_TRY(var(c, "SELECT @@GLOBAL.binlog_row_image", v, sizeof(v), err));
    if (strcasecmp(v, "FULL") != 0)
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "binlog_row_image is %s on the source; firn needs FULL row images: "
                            "run SET GLOBAL binlog_row_image = 'FULL' and set it in the "
                            "server's option file",
                            v);
    var_opt(c, "SELECT @@GLOBAL.binlog_row_metadata", v, sizeof(v));
    if (strcasecmp(v, "FULL") != 0)
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "binlog_row_metadata is %s on the source; firn needs FULL (column "
                            "names and signedness in the binlog): run SET GLOBAL "
                            "binlog_row_metadata = 'FULL' (MySQL 8.0.1+, MariaDB 10.5+)",
                            v[0] ? v : "not available");
    return FIRN_OK;
}

static firn_rc check_gtid(firn_my_conn *c, firn_strlist *warnings, firn_err *err)
{
    char v[64];
    if (firn_my_conn_is_mariadb(c)) {
        FIRN_TRY(var(c, "SELECT @@GLOBAL.gtid_strict_mode", v, sizeof(v), err));
        if (strcmp(v, "1") != 0 && warnings)
            firn_strlist_push(warnings,
                              "gtid_strict_mode is OFF on the source: firn resumes by GTID "
                              "position; SET GLOBAL gtid_strict_mode = 1 keeps that position "
                              "well-defined across failovers");
        return FIRN_OK;
    }
    var_opt(c, "SELECT @@GLOBAL.gtid_mode", v, sizeof(v));
    if (strcasecmp(v, "ON") != 0)
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "gtid_mode is %s on the source; firn resumes by GTID: set "
                            "enforce_gtid_consistency=ON and gtid_mode=ON (stepwise: "
                            "OFF_PERMISSIVE, ON_PERMISSIVE, ON)",
                            v[0] ? v : "not available");
    return FIRN_OK;
}

static void duration_text(int64_t s, char *out, size_t cap)
{
    if (s % 86400 == 0)
        snprintf(out, cap, "%lldd", (long long)(s / 86400));
    else if (s % 3600 == 0)
        snprintf(out, cap, "%lldh", (long long)(s / 3600));
    else
        snprintf(out, cap, "%llds", (long long)s);
}

static firn_rc check_retention(firn_my_conn *c, int64_t backfill_hours, firn_err *err)
{
    char v[64];
    int64_t secs = 0;
    var_opt(c, "SELECT @@GLOBAL.binlog_expire_logs_seconds", v, sizeof(v));
    if (v[0]) {
        secs = strtoll(v, NULL, 10);
    } else {
        var_opt(c, "SELECT @@GLOBAL.expire_logs_days", v, sizeof(v));
        secs = (int64_t)(strtod(v, NULL) * 86400.0);
    }
    if (secs <= 0)
        return FIRN_OK; /* never purged by age */
    const int64_t need = (backfill_hours > 0 ? backfill_hours : 1) * 3600;
    if (secs >= need)
        return FIRN_OK;
    char have_s[32], need_s[32];
    duration_text(secs, have_s, sizeof(have_s));
    duration_text(need, need_s, sizeof(need_s));
    return firn_err_set(err, FIRN_ERR_CONFIG,
                        "binary logs expire after %s on the source, before the expected "
                        "backfill time (%s): the stream could not start where the copy ends; run "
                        "SET GLOBAL binlog_expire_logs_seconds = %lld (or more)",
                        have_s, need_s, (long long)need * 2);
}

/* Whether the user's grants (SHOW GRANTS) give priv on *.* (or ALL PRIVILEGES there). */
static firn_rc has_global_priv(firn_my_conn *c, const char *const *privs, bool *out, firn_err *err)
{
    *out = false;
    MYSQL_RES *res = NULL;
    FIRN_TRY(firn__my_query(c, "SHOW GRANTS FOR CURRENT_USER()", &res, err));
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(res)) != NULL) {
        const char *g = row[0];
        const char *on = g ? strstr(g, " ON *.* ") : NULL;
        if (!on)
            continue;
        const size_t head = (size_t)(on - g);
        for (const char *const *p = privs; *p; p++) {
            const char *hit = strstr(g, *p);
            if (hit && (size_t)(hit - g) < head)
                *out = true;
        }
        const char *all = strstr(g, "ALL PRIVILEGES");
        if (all && (size_t)(all - g) < head)
            *out = true;
    }
    mysql_free_result(res);
    return FIRN_OK;
}

static firn_rc check_privileges(firn_my_conn *c, const char *user, firn_err *err)
{
    static const char *const slave[] = {"REPLICATION SLAVE", NULL};
    static const char *const client[] = {"REPLICATION CLIENT", "BINLOG MONITOR", "SUPER", NULL};
    bool ok = false;
    FIRN_TRY(has_global_priv(c, slave, &ok, err));
    if (!ok)
        return firn_err_set(err, FIRN_ERR_PERMISSION,
                            "user %s lacks REPLICATION SLAVE, which reading the binlog needs: run "
                            "GRANT REPLICATION SLAVE ON *.* TO <firn's user>",
                            user);
    FIRN_TRY(has_global_priv(c, client, &ok, err));
    if (!ok)
        return firn_err_set(err, FIRN_ERR_PERMISSION,
                            "user %s lacks REPLICATION CLIENT (MariaDB: BINLOG MONITOR), which "
                            "reading binlog positions needs: run GRANT REPLICATION CLIENT ON *.* "
                            "TO <firn's user>",
                            user);
    return FIRN_OK;
}

static firn_rc check_server_id(firn_my_conn *c, int64_t server_id, firn_strlist *w, firn_err *err)
{
    char v[64];
    if (server_id <= 0) {
        if (w)
            firn_strlist_push(w, "no \"server_id\" set for firn in source.json: CDC registers as "
                                 "a replica and needs one that no other replica uses");
        return FIRN_OK;
    }
    FIRN_TRY(var(c, "SELECT @@GLOBAL.server_id", v, sizeof(v), err));
    if (strtoll(v, NULL, 10) == server_id)
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "\"server_id\" %lld is the source server's own server_id: give firn "
                            "one that neither the server nor another replica uses",
                            (long long)server_id);
    MYSQL_RES *res = NULL;
    firn_err ignored = {0};
    /* SHOW SLAVE HOSTS needs REPLICATION MASTER ADMIN on MariaDB 10.5+; without it the replicas
     * cannot be listed and the check says so. */
    if (firn__my_query(c, "SHOW SLAVE HOSTS", &res, &ignored) &&
        firn__my_query(c, "SHOW REPLICAS", &res, &ignored)) { /* MySQL 8.4 */
        if (w)
            firn_strlist_push(w, "could not list the source's replicas (SHOW SLAVE HOSTS) to "
                                 "check that firn's server_id is unused");
        return FIRN_OK;
    }
    MYSQL_ROW row;
    bool taken = false;
    while ((row = mysql_fetch_row(res)) != NULL)
        taken = taken || (row[0] && strtoll(row[0], NULL, 10) == server_id);
    mysql_free_result(res);
    if (taken)
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "\"server_id\" %lld is used by a replica of the source (SHOW SLAVE "
                            "HOSTS): two replicas with one server_id disconnect each other; "
                            "give firn another",
                            (long long)server_id);
    return FIRN_OK;
}

static firn_rc check_table(firn_my_conn *c,
                           const firn_my_table *t,
                           bool cdc,
                           bool keyless_ok,
                           firn_strlist *w,
                           firn_err *err)
{
    firn_buf sql, name;
    firn_buf_init(&sql, 4096);
    firn_buf_init(&name, 2048);
    firn_rc rc = firn_my_ident_append(&name, t->database);
    if (rc == FIRN_OK)
        rc = firn_buf_append_cstr(&name, ".");
    if (rc == FIRN_OK)
        rc = firn_my_ident_append(&name, t->name);
    if (rc == FIRN_OK)
        rc = firn_buf_appendf(&sql, "SELECT 1 FROM %s LIMIT 0", (const char *)name.data);
    if (rc == FIRN_OK) {
        rc = firn_my_conn_exec(c, (const char *)sql.data, err);
        if (rc == FIRN_ERR_PERMISSION)
            firn_err_set(err, rc,
                         "user cannot read table %s: run GRANT SELECT ON %s TO <firn's user> "
                         "(or on the whole database)",
                         (const char *)name.data, (const char *)name.data);
    }
    if (rc == FIRN_OK && t->n_key == 0) {
        if (cdc && !keyless_ok)
            rc = firn_err_set(err, FIRN_ERR_CONFIG,
                              "table %s has no primary key: CDC upserts need one; add it (ALTER "
                              "TABLE %s ADD PRIMARY KEY (...)) or set the stream to append mode",
                              (const char *)name.data, (const char *)name.data);
        else if (w) {
            char line[2560];
            snprintf(line, sizeof(line),
                     "table %s has no primary key: it is copied in one chunk and written in "
                     "append mode",
                     (const char *)name.data);
            firn_strlist_push(w, line);
        }
    }
    firn_buf_deinit(&sql);
    firn_buf_deinit(&name);
    return rc;
}

firn_rc
firn_my_check(firn_my_conn *c, const firn_my_check_opts *o, firn_strlist *warnings, firn_err *err)
{
    char user[512];
    FIRN_TRY(var(c, "SELECT CURRENT_USER()", user, sizeof(user), err));
    if (o->cdc) {
        FIRN_TRY(check_binlog(c, err));
        FIRN_TRY(check_gtid(c, warnings, err));
        FIRN_TRY(check_retention(c, o->backfill_hours, err));
        FIRN_TRY(check_privileges(c, user, err));
        FIRN_TRY(check_server_id(c, o->server_id, warnings, err));
    }
    for (size_t i = 0; i < o->n_tables; i++)
        FIRN_TRY(check_table(c, o->tables[i], o->cdc, o->keyless_ok, warnings, err));
    return FIRN_OK;
}
