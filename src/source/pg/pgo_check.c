/* SPDX-License-Identifier: Apache-2.0 */
/* Preflight checks of the replication setup, each failure one error that says what to run:
 * wal_level, role attributes, slot (exists, pgoutput, this database, not active elsewhere, not
 * invalidated), publications (exist, cover every table), replica identity, privileges; and the
 * tables at risk of unchanged TOAST values. Runs simple-protocol SQL on the replication
 * connection (walsenders accept only the simple query protocol). */
#include "firn/source_pg.h"
#include "pgo_stream_int.h"

#include <string.h>

typedef struct chk {
    firn_pgo_stream *s;
    firn_err *err;
    firn_buf q;
    PGresult *res;
} chk;

/* Runs the query in c->q; the result (one or more rows) is in c->res. */
static firn_rc run(chk *c, const char *what)
{
    PQclear(c->res);
    c->res = PQexec(c->s->conn, (const char *)c->q.data);
    if (PQresultStatus(c->res) != PGRES_TUPLES_OK)
        return firn__pgo_result_error(c->res, c->s->conn, what, c->err);
    return FIRN_OK;
}

static firn_rc q_start(chk *c, const char *sql)
{
    firn_buf_reset(&c->q);
    return firn_buf_append_cstr(&c->q, sql);
}

/* Appends s as a SQL literal. */
static firn_rc q_lit(chk *c, const char *s)
{
    char *lit = PQescapeLiteral(c->s->conn, s, strlen(s));
    if (!lit)
        return firn_err_set(c->err, FIRN_ERR_SOURCE, "could not quote \"%s\"", s);
    firn_rc rc = firn_buf_append_cstr(&c->q, lit);
    PQfreemem(lit);
    return rc;
}

/* Appends the publications as a SQL text array literal: ARRAY['a','b']. */
static firn_rc q_pubs(chk *c)
{
    FIRN_TRY(firn_buf_append_cstr(&c->q, "ARRAY["));
    for (size_t i = 0; i < c->s->cfg.n_publications; i++) {
        if (i)
            FIRN_TRY(firn_buf_append_cstr(&c->q, ","));
        FIRN_TRY(q_lit(c, c->s->cfg.publications[i]));
    }
    return firn_buf_append_cstr(&c->q, "]::text[]");
}

static bool val_true(const PGresult *res, int row, int col)
{
    return !PQgetisnull(res, row, col) && PQgetvalue(res, row, col)[0] == 't';
}

/* Quoted names for the remedies the messages print (firn_pg_ident_text): "a""b"."t". */
typedef struct qname {
    char v[2 * FIRN_PG_QUOTED_MAX + 2];
} qname;

static const char *qident(qname *q, const char *s)
{
    return firn_pg_ident_text(q->v, sizeof(q->v), s);
}

static const char *qtable(qname *q, const firn_pgo_table *t)
{
    char name[FIRN_PG_QUOTED_MAX];
    firn_pg_ident_text(q->v, FIRN_PG_QUOTED_MAX, t->schema);
    const size_t n = strlen(q->v);
    snprintf(q->v + n, sizeof(q->v) - n, ".%s", firn_pg_ident_text(name, sizeof(name), t->name));
    return q->v;
}

static const char *qlit(qname *q, const char *s)
{
    return firn_pg_literal_text(q->v, sizeof(q->v), s);
}

static firn_rc check_server(chk *c)
{
    FIRN_TRY(q_start(c, "SELECT current_setting('wal_level'), current_user, "
                        "(SELECT rolreplication OR rolsuper FROM pg_roles "
                        "WHERE rolname = current_user)"));
    FIRN_TRY(run(c, "read server settings"));
    const char *wal_level = PQgetvalue(c->res, 0, 0);
    if (strcmp(wal_level, "logical") != 0)
        return firn_err_set(c->err, FIRN_ERR_CONFIG,
                            "wal_level is \"%s\" but logical replication needs \"logical\"; run "
                            "ALTER SYSTEM SET wal_level = logical and restart the server",
                            wal_level);
    qname role;
    if (!val_true(c->res, 0, 2))
        return firn_err_set(c->err, FIRN_ERR_PERMISSION,
                            "role \"%s\" lacks the REPLICATION attribute; run ALTER ROLE %s "
                            "REPLICATION",
                            PQgetvalue(c->res, 0, 1), qident(&role, PQgetvalue(c->res, 0, 1)));
    return FIRN_OK;
}

static firn_rc check_slot(chk *c, bool may_be_missing)
{
    const char *slot = c->s->cfg.slot_name;
    FIRN_TRY(q_start(c, "SELECT plugin, slot_type, database, active, active_pid, "));
    FIRN_TRY(
        firn_buf_append_cstr(&c->q, c->s->server_version >= 130000 ? "wal_status" : "'reserved'"));
    /* column 7: a firn sync holds the slot's advisory lock (eng_sync.c lock_slot, class
     * 0x6669726e): the consumer is firn, not another program */
    FIRN_TRY(firn_buf_append_cstr(
        &c->q, ", current_database(), EXISTS (SELECT 1 FROM pg_locks WHERE locktype = "
               "'advisory' AND granted AND classid = 1718186606 AND objid = hashtext('firn slot "
               "' || slot_name)::oid) FROM pg_replication_slots WHERE slot_name = "));
    FIRN_TRY(q_lit(c, slot));
    FIRN_TRY(run(c, "read replication slots"));
    qname lit;
    const char *slot_lit = qlit(&lit, slot);
    if (PQntuples(c->res) == 0) {
        if (may_be_missing)
            return FIRN_OK;
        return firn_err_set(c->err, FIRN_ERR_NOT_FOUND,
                            "replication slot \"%s\" does not exist; create it with SELECT "
                            "pg_create_logical_replication_slot(%s, 'pgoutput')",
                            slot, slot_lit);
    }
    const char *plugin = PQgetvalue(c->res, 0, 0);
    if (strcmp(PQgetvalue(c->res, 0, 1), "logical") != 0 || strcmp(plugin, "pgoutput") != 0)
        return firn_err_set(c->err, FIRN_ERR_CONFIG,
                            "replication slot \"%s\" uses plugin \"%s\", not pgoutput; drop it "
                            "with SELECT pg_drop_replication_slot(%s) and create it with "
                            "SELECT pg_create_logical_replication_slot(%s, 'pgoutput')",
                            slot, PQgetisnull(c->res, 0, 0) ? "(physical)" : plugin, slot_lit,
                            slot_lit);
    if (strcmp(PQgetvalue(c->res, 0, 2), PQgetvalue(c->res, 0, 6)) != 0)
        return firn_err_set(c->err, FIRN_ERR_CONFIG,
                            "replication slot \"%s\" belongs to database \"%s\", not \"%s\"; "
                            "connect to that database or create a slot in this one",
                            slot, PQgetvalue(c->res, 0, 2), PQgetvalue(c->res, 0, 6));
    if (strcmp(PQgetvalue(c->res, 0, 5), "lost") == 0)
        return firn_err_set(c->err, FIRN_ERR_SOURCE,
                            "replication slot \"%s\" is invalidated (wal_status lost): the WAL "
                            "it needed was removed; drop it with SELECT "
                            "pg_drop_replication_slot(%s), create it again and backfill",
                            slot, slot_lit);
    if (val_true(c->res, 0, 3) && c->s->cfg.slot_may_be_active && val_true(c->res, 0, 7)) {
        FIRN_LOG(FIRN_LOG_INFO, "pg", "replication slot \"%s\" is in use by PID %s", slot,
                 PQgetvalue(c->res, 0, 4));
        return FIRN_OK;
    }
    if (val_true(c->res, 0, 3))
        return firn_err_set(c->err, FIRN_ERR_CONFIG,
                            "replication slot \"%s\" is active for PID %s; stop the other "
                            "consumer (SELECT pg_terminate_backend(%s)) or use another slot",
                            slot, PQgetvalue(c->res, 0, 4), PQgetvalue(c->res, 0, 4));
    return FIRN_OK;
}

/* *out_upd_del: a publication carries updates or deletes; *out_missing: one does not exist yet
 * (allowed by publications_may_be_missing: the caller creates it, with every operation). */
static firn_rc check_publications(chk *c, bool *out_upd_del, bool *out_missing)
{
    *out_upd_del = false;
    *out_missing = false;
    for (size_t i = 0; i < c->s->cfg.n_publications; i++) {
        const char *pub = c->s->cfg.publications[i];
        FIRN_TRY(q_start(c, "SELECT pubupdate OR pubdelete FROM pg_publication WHERE pubname = "));
        FIRN_TRY(q_lit(c, pub));
        FIRN_TRY(run(c, "read publications"));
        if (PQntuples(c->res) == 0 && c->s->cfg.publications_may_be_missing) {
            *out_missing = *out_upd_del = true;
            continue;
        }
        qname q;
        if (PQntuples(c->res) == 0)
            return firn_err_set(c->err, FIRN_ERR_NOT_FOUND,
                                "publication \"%s\" does not exist; have a table owner or "
                                "superuser run CREATE PUBLICATION %s FOR TABLE ... WITH "
                                "(publish_via_partition_root = true)",
                                pub, qident(&q, pub));
        if (val_true(c->res, 0, 0))
            *out_upd_del = true;
    }
    return FIRN_OK;
}

/* Appends " AND a.attname = ANY (ARRAY['a','b']::name[])" for a table's selected columns. */
static firn_rc q_columns(chk *c, const firn_pgo_table *t)
{
    if (t->n_columns == 0)
        return FIRN_OK;
    FIRN_TRY(firn_buf_append_cstr(&c->q, " AND a.attname = ANY (ARRAY["));
    for (size_t i = 0; i < t->n_columns; i++) {
        if (i)
            FIRN_TRY(firn_buf_append_cstr(&c->q, ","));
        FIRN_TRY(q_lit(c, t->columns[i]));
    }
    return firn_buf_append_cstr(&c->q, "]::name[])");
}

/* Reads one table: relkind, replica identity, SELECT privilege, primary key, TOAST-able
 * columns (of the selected ones), and whether a publication covers it (itself, a partition or
 * an ancestor). */
static firn_rc read_table(chk *c, const firn_pgo_table *t)
{
    FIRN_TRY(q_start(c, "SELECT c.relkind, c.relreplident, has_table_privilege(c.oid, 'SELECT'), "
                        "EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND "
                        "i.indisprimary), EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid "
                        "= c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attlen = -1 AND "
                        "a.attstorage IN ('x', 'e')"));
    FIRN_TRY(q_columns(c, t));
    FIRN_TRY(firn_buf_append_cstr(&c->q, "), EXISTS (SELECT 1 FROM "
                                         "pg_publication_tables p JOIN pg_namespace pn ON "
                                         "pn.nspname = p.schemaname JOIN pg_class pc ON "
                                         "pc.relnamespace = pn.oid AND pc.relname = p.tablename "
                                         "WHERE p.pubname = ANY ("));
    FIRN_TRY(q_pubs(c));
    FIRN_TRY(firn_buf_append_cstr(
        &c->q, ") AND (pc.oid = c.oid OR pc.oid IN (SELECT relid FROM pg_partition_tree(c.oid)) "
               "OR pc.oid IN (SELECT pg_partition_ancestors(c.oid))))"));
    /* Column grants (GRANT SELECT (a, b) ON t): the selected columns the role cannot read, and
     * whether it can read any of them. */
    static const char COLS[] = " FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND "
                               "NOT a.attisdropped AND a.attgenerated = ''";
    FIRN_TRY(firn_buf_appendf(&c->q,
                              ", (SELECT string_agg('\"' || replace(a.attname, '\"', '\"\"') || "
                              "'\"', ', ' ORDER BY a.attnum)%s",
                              COLS));
    FIRN_TRY(q_columns(c, t));
    FIRN_TRY(firn_buf_appendf(&c->q,
                              " AND NOT has_column_privilege(c.oid, a.attnum, 'SELECT')), "
                              "EXISTS (SELECT 1%s",
                              COLS));
    FIRN_TRY(q_columns(c, t));
    FIRN_TRY(firn_buf_append_cstr(&c->q,
                                  " AND has_column_privilege(c.oid, a.attnum, 'SELECT'))"
                                  " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                                  "WHERE n.nspname = "));
    FIRN_TRY(q_lit(c, t->schema));
    FIRN_TRY(firn_buf_append_cstr(&c->q, " AND c.relname = "));
    FIRN_TRY(q_lit(c, t->name));
    FIRN_TRY(run(c, "read table"));
    if (PQntuples(c->res) == 0)
        return firn_err_set(c->err, FIRN_ERR_NOT_FOUND, "table \"%s.%s\" does not exist", t->schema,
                            t->name);
    return FIRN_OK;
}

/* Permission and replica identity of one table (the identity first: adding a table without one
 * to a publication that carries updates makes PostgreSQL refuse the application's UPDATEs and
 * DELETEs on it); *out_covered: a publication carries it. */
static firn_rc check_table(chk *c,
                           const firn_pgo_table *t,
                           bool upd_del,
                           bool pub_missing,
                           firn_pgo_report *rep,
                           bool *out_covered)
{
    FIRN_TRY(read_table(c, t));
    const char kind = PQgetvalue(c->res, 0, 0)[0];
    const char ident = PQgetvalue(c->res, 0, 1)[0];
    qname qt, qr;
    /* SELECT on the table, or on each selected column (GRANT SELECT (a, b) ON t). */
    const bool denied = !val_true(c->res, 0, 2) && !PQgetisnull(c->res, 0, 6);
    if (denied && !val_true(c->res, 0, 7))
        return firn_err_set(c->err, FIRN_ERR_PERMISSION,
                            "permission denied for table \"%s.%s\"; run GRANT SELECT ON %s TO %s",
                            t->schema, t->name, qtable(&qt, t), qident(&qr, PQuser(c->s->conn)));
    if (denied) {
        const char *cols = PQgetvalue(c->res, 0, 6);
        const bool one = strchr(cols, ',') == NULL;
        return firn_err_set(c->err, FIRN_ERR_PERMISSION,
                            "permission denied for column%s %s of table \"%s.%s\" (the role may "
                            "read only some columns); run GRANT SELECT (%s) ON %s TO %s, or leave "
                            "%s out with the stream's \"columns\"",
                            one ? "" : "s", cols, t->schema, t->name, cols, qtable(&qt, t),
                            qident(&qr, PQuser(c->s->conn)), one ? "it" : "them");
    }
    *out_covered = pub_missing || val_true(c->res, 0, 5);
    const bool has_pk = val_true(c->res, 0, 3);
    if (kind != 'p' && upd_del && (ident == 'n' || (ident == 'd' && !has_pk)))
        return firn_err_set(
            c->err, FIRN_ERR_CONFIG,
            "table \"%s.%s\" has %s, so its updates and deletes cannot be "
            "replicated; add a primary key or run ALTER TABLE %s REPLICA "
            "IDENTITY FULL%s",
            t->schema, t->name, ident == 'n' ? "REPLICA IDENTITY NOTHING" : "no primary key",
            qtable(&qt, t), *out_covered ? "" : " before adding it to the publication");
    if (rep && ident != 'f' && val_true(c->res, 0, 4)) {
        rep->toast_risk = firn_reallocarray(rep->toast_risk, rep->n_toast_risk + 1, sizeof(char *));
        firn_buf name;
        firn_buf_init(&name, 1024);
        firn_rc_ignore(firn_buf_appendf(&name, "%s.%s", t->schema, t->name));
        rep->toast_risk[rep->n_toast_risk++] = (char *)firn_buf_take(&name, NULL);
    }
    return FIRN_OK;
}

/* One error naming every table no publication covers (up to 5 by name, then a count) and the
 * ALTER PUBLICATION that adds them all; a statement too long for the message is logged. */
static firn_rc
coverage_error(chk *c, const firn_pgo_table *tables, const size_t *missing, size_t n_missing)
{
    firn_buf msg, stmt;
    firn_buf_init(&msg, 1 << 20);
    firn_buf_init(&stmt, 1 << 20);
    qname qp, qt;
    const char *pub = c->s->cfg.publications[0];
    firn_rc_ignore(firn_buf_appendf(&stmt, "ALTER PUBLICATION %s ADD TABLE ", qident(&qp, pub)));
    firn_rc_ignore(firn_buf_appendf(&msg, "publication \"%s\" does not cover ", pub));
    if (n_missing > 1)
        firn_rc_ignore(firn_buf_appendf(&msg, "%zu tables: ", n_missing));
    else
        firn_rc_ignore(firn_buf_append_cstr(&msg, "table "));
    for (size_t i = 0; i < n_missing; i++) {
        const firn_pgo_table *t = &tables[missing[i]];
        firn_rc_ignore(firn_buf_appendf(&stmt, "%s%s", i ? ", " : "", qtable(&qt, t)));
        if (i < 5)
            firn_rc_ignore(
                firn_buf_appendf(&msg, "%s\"%s.%s\"", i ? ", " : "", t->schema, t->name));
        else if (i == 5)
            firn_rc_ignore(firn_buf_appendf(&msg, " and %zu more", n_missing - 5));
    }
    const char *m = (const char *)msg.data, *sql = (const char *)stmt.data;
    firn_rc rc;
    if (msg.len + stmt.len + 8 < FIRN_ERR_MSG_MAX) {
        rc = firn_err_set(c->err, FIRN_ERR_CONFIG, "%s; run %s", m, sql);
    } else {
        FIRN_LOG(FIRN_LOG_ERROR, "pg", "publication \"%s\" lacks tables; add them with: %s", pub,
                 sql);
        rc = firn_err_set(c->err, FIRN_ERR_CONFIG,
                          "%s; run the ALTER PUBLICATION ... ADD TABLE logged above", m);
    }
    firn_buf_deinit(&msg);
    firn_buf_deinit(&stmt);
    return rc;
}

static firn_rc check_tables(chk *c,
                            const firn_pgo_table *tables,
                            size_t n_tables,
                            bool upd_del,
                            bool pub_missing,
                            firn_pgo_report *rep)
{
    size_t *missing = firn_calloc(n_tables ? n_tables : 1, sizeof(size_t));
    size_t n_missing = 0;
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; !rc && i < n_tables; i++) {
        bool covered = true;
        rc = check_table(c, &tables[i], upd_del, pub_missing, rep, &covered);
        if (!rc && !covered)
            missing[n_missing++] = i;
    }
    if (!rc && n_missing)
        rc = coverage_error(c, tables, missing, n_missing);
    firn_free(missing);
    return rc;
}

/* The publications' tables whose UPDATEs and DELETEs PostgreSQL refuses for want of a replica
 * identity (report only: they need not be selected). */
static firn_rc find_no_identity(chk *c, firn_pgo_report *rep)
{
    FIRN_TRY(q_start(c, "SELECT DISTINCT pt.schemaname, pt.tablename FROM pg_publication p "
                        "JOIN pg_publication_tables pt ON pt.pubname = p.pubname "
                        "JOIN pg_namespace n ON n.nspname = pt.schemaname "
                        "JOIN pg_class r ON r.relnamespace = n.oid AND r.relname = pt.tablename "
                        "WHERE (p.pubupdate OR p.pubdelete) AND p.pubname = ANY ("));
    FIRN_TRY(q_pubs(c));
    FIRN_TRY(firn_buf_append_cstr(&c->q,
                                  ") AND (r.relreplident = 'n' OR (r.relreplident = 'd' AND NOT "
                                  "EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = r.oid AND "
                                  "i.indisprimary))) ORDER BY 1, 2 LIMIT 50"));
    FIRN_TRY(run(c, "read the replica identity of the published tables"));
    for (int i = 0; i < PQntuples(c->res); i++) {
        firn_buf name;
        firn_buf_init(&name, 1024);
        firn_rc_ignore(
            firn_buf_appendf(&name, "%s.%s", PQgetvalue(c->res, i, 0), PQgetvalue(c->res, i, 1)));
        rep->no_identity =
            firn_reallocarray(rep->no_identity, rep->n_no_identity + 1, sizeof(char *));
        rep->no_identity[rep->n_no_identity++] = (char *)firn_buf_take(&name, NULL);
    }
    return FIRN_OK;
}

firn_rc firn_pgo_stream_preflight(firn_pgo_stream *s,
                                  const firn_pgo_table *tables,
                                  size_t n_tables,
                                  bool slot_may_be_missing,
                                  firn_pgo_report *rep,
                                  firn_err *err)
{
    if (s->started)
        return firn_err_set(err, FIRN_ERR_INVALID, "preflight must run before streaming starts");
    chk c = {.s = s, .err = err};
    firn_buf_init(&c.q, 1 << 16);
    bool upd_del = false, pub_missing = false;
    firn_rc rc = check_server(&c);
    rc = rc ? rc : check_slot(&c, slot_may_be_missing);
    rc = rc ? rc : check_publications(&c, &upd_del, &pub_missing);
    rc = rc ? rc : check_tables(&c, tables, n_tables, upd_del, pub_missing, rep);
    if (!rc && upd_del && !pub_missing && rep)
        rc = find_no_identity(&c, rep);
    if (rc == FIRN_ERR_TOO_LARGE && err && err->code == FIRN_OK)
        rc = firn_err_set(err, rc, "preflight query is too long");
    PQclear(c.res);
    firn_buf_deinit(&c.q);
    return rc;
}

void firn_pgo_report_deinit(firn_pgo_report *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_toast_risk; i++)
        firn_free(r->toast_risk[i]);
    firn_free(r->toast_risk);
    r->toast_risk = NULL;
    r->n_toast_risk = 0;
    for (size_t i = 0; i < r->n_no_identity; i++)
        firn_free(r->no_identity[i]);
    firn_free(r->no_identity);
    r->no_identity = NULL;
    r->n_no_identity = 0;
}
