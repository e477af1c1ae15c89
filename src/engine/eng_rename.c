/* SPDX-License-Identifier: Apache-2.0 */
/* Renames on the source while streaming (docs/cdc.md "Schema changes"): a Relation message names
 * a synced table (by its oid) under another name than the stream's, or lacks a column the table
 * has while carrying one it does not know. pgoutput messages carry names only, so identity comes
 * from the source catalog: the table's oid, a column's attnum. */
#include "engine_int.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <string.h>

/* name as an SQL identifier in out: double quotes, inner quotes doubled (PostgreSQL names have
 * at most 63 bytes, so 160 bytes hold any). */
static void quote_ident(char *out, size_t cap, const char *name)
{
    size_t o = 0;
    out[o++] = '"';
    for (const char *p = name; *p && o + 3 < cap; p++) {
        if (*p == '"')
            out[o++] = '"';
        out[o++] = *p;
    }
    out[o++] = '"';
    out[o] = '\0';
}

/* The statements that give the table (now ns.name) its stream's name again, in out. */
static void
rename_back(char *out, size_t cap, const firn__table *t, const char *ns, const char *name)
{
    char qns[160], qname[160], qold_ns[160], qold[160];
    quote_ident(qns, sizeof(qns), ns);
    quote_ident(qname, sizeof(qname), name);
    quote_ident(qold_ns, sizeof(qold_ns), t->pg->schema_name);
    quote_ident(qold, sizeof(qold), t->pg->name);
    const bool moved = strcmp(ns, t->pg->schema_name) != 0;
    const bool renamed = strcmp(name, t->pg->name) != 0;
    if (moved && renamed)
        snprintf(out, cap, "ALTER TABLE %s.%s SET SCHEMA %s; ALTER TABLE %s.%s RENAME TO %s", qns,
                 qname, qold_ns, qold_ns, qname, qold);
    else if (moved)
        snprintf(out, cap, "ALTER TABLE %s.%s SET SCHEMA %s", qns, qname, qold_ns);
    else
        snprintf(out, cap, "ALTER TABLE %s.%s RENAME TO %s", qns, qname, qold);
}

/* The one line of a stream stopped at a rename of its source table, with both remedies: the
 * old name back, or the stream pointed at the new name and kept on its Iceberg table (the
 * namespace too when the schema changed: the default namespace follows the schema). */
static void renamed_line(const firn__table *t, const char *ns, const char *name, firn_err *why)
{
    char sql[800], keep_ns[200] = "";
    rename_back(sql, sizeof(sql), t, ns, name);
    if (strcmp(ns, t->pg->schema_name) != 0)
        snprintf(keep_ns, sizeof(keep_ns), ", \"target_namespace\": \"%s\"", t->ns);
    firn_err_set(why, FIRN_ERR_SCHEMA,
                 "source table \"%s.%s\" was renamed to \"%s.%s\": stream stopped, the slot keeps "
                 "its changes; rename it back (%s) or stream \"%s.%s\" with \"target_table\": "
                 "\"%s\"%s; then run firn sync",
                 t->pg->schema_name, t->pg->name, ns, name, sql, ns, name, t->name, keep_ns);
}

/* The current schema and name of relation oid (empty strings: it no longer exists). */
static firn_rc current_name(firn__table *t,
                            uint32_t oid,
                            char *ns,
                            size_t ns_cap,
                            char *name,
                            size_t name_cap,
                            firn_err *err)
{
    PGconn *pq = firn_pg_conn_pq(t->eng->sql);
    char id[16];
    snprintf(id, sizeof(id), "%u", (unsigned)oid);
    const char *params[1] = {id};
    PGresult *r = PQexecParams(pq,
                               "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n "
                               "ON n.oid = c.relnamespace WHERE c.oid = $1::oid",
                               1, NULL, params, NULL, NULL, 0);
    firn_rc rc = FIRN_OK;
    ns[0] = name[0] = '\0';
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        rc = firn_err_set(err, FIRN_ERR_SOURCE, "could not look up the name of source table %s: %s",
                          t->pg->qualified, PQerrorMessage(pq));
    else if (PQntuples(r) > 0) {
        snprintf(ns, ns_cap, "%s", PQgetvalue(r, 0, 0));
        snprintf(name, name_cap, "%s", PQgetvalue(r, 0, 1));
    }
    PQclear(r);
    return rc;
}

firn_rc firn__rename_check_table(firn__table *t,
                                 const char *rel_ns,
                                 const char *rel_name,
                                 bool *out_renamed,
                                 firn_err *why,
                                 firn_err *err)
{
    *out_renamed = false;
    if (strcmp(rel_ns, t->pg->schema_name) == 0 && strcmp(rel_name, t->pg->name) == 0)
        return FIRN_OK;
    /* The message describes the relation as it was at its changes; the catalog says what it is
     * called now. Named as the stream again (renamed back since), its changes are the table's. */
    char ns[256], name[256];
    FIRN_TRY(current_name(t, t->pg->oid, ns, sizeof(ns), name, sizeof(name), err));
    if (strcmp(ns, t->pg->schema_name) == 0 && strcmp(name, t->pg->name) == 0) {
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "source table %s is named \"%s.%s\" in changes made while it was renamed: taken "
                 "into table \"%s\"",
                 t->pg->qualified, rel_ns, rel_name, t->display);
        return FIRN_OK;
    }
    *out_renamed = true;
    if (ns[0] == '\0') /* gone since: the name of the message is all there is */
        renamed_line(t, rel_ns, rel_name, why);
    else
        renamed_line(t, ns, name, why);
    return FIRN_OK;
}
