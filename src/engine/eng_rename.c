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

/* ---- columns ------------------------------------------------------------------------------ */

firn_rc firn__rename_attnum(firn__table *t, const char *name, int16_t *out, firn_err *err)
{
    PGconn *pq = firn_pg_conn_pq(t->eng->sql);
    char oid[16];
    snprintf(oid, sizeof(oid), "%u", (unsigned)t->pg->oid);
    const char *params[2] = {oid, name};
    PGresult *r = PQexecParams(pq,
                               "SELECT attnum FROM pg_attribute WHERE attrelid = $1::oid AND "
                               "attname = $2 AND attnum > 0 AND NOT attisdropped",
                               2, NULL, params, NULL, NULL, 0);
    firn_rc rc = FIRN_OK;
    int32_t v = 0;
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        rc = firn_err_set(err, FIRN_ERR_SOURCE, "could not look up column \"%s\" of %s: %s", name,
                          t->pg->qualified, PQerrorMessage(pq));
    else if (PQntuples(r) > 0)
        rc = firn_parse_i32(PQgetvalue(r, 0, 0), (size_t)PQgetlength(r, 0, 0), &v, err);
    PQclear(r);
    *out = (int16_t)v;
    return rc;
}

/* The current name of column attnum of t in out ("" when it is dropped or gone). */
static firn_rc attnum_name(firn__table *t, int16_t attnum, char *out, size_t cap, firn_err *err)
{
    PGconn *pq = firn_pg_conn_pq(t->eng->sql);
    char oid[16], num[16];
    snprintf(oid, sizeof(oid), "%u", (unsigned)t->pg->oid);
    snprintf(num, sizeof(num), "%d", (int)attnum);
    const char *params[2] = {oid, num};
    PGresult *r = PQexecParams(pq,
                               "SELECT attname FROM pg_attribute WHERE attrelid = $1::oid AND "
                               "attnum = $2::int2 AND NOT attisdropped",
                               2, NULL, params, NULL, NULL, 0);
    firn_rc rc = FIRN_OK;
    out[0] = '\0';
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        rc = firn_err_set(err, FIRN_ERR_SOURCE, "could not look up the columns of %s: %s",
                          t->pg->qualified, PQerrorMessage(pq));
    else if (PQntuples(r) > 0)
        snprintf(out, cap, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    return rc;
}

static bool table_has_field(const firn__table *t, const char *name)
{
    for (size_t i = 0; i < t->schema->n_children; i++) {
        if (strcmp(t->schema->children[i]->name, name) == 0)
            return true;
    }
    return false;
}

/* Index of the Relation message's column named name that the table does not know, or -1. */
static int32_t
unknown_named(firn__table *t, const firn_pgo_rel *rel, const int32_t *batch_col, const char *name)
{
    for (uint16_t i = 0; i < rel->n_cols; i++) {
        if (batch_col[i] < 0 && strcmp(rel->cols[i].name, name) == 0 && !table_has_field(t, name) &&
            !firn__columns_left_out(t, name))
            return (int32_t)i;
    }
    return -1;
}

static bool mapped(const firn_pgo_rel *rel, const int32_t *batch_col, size_t k)
{
    for (uint16_t i = 0; i < rel->n_cols; i++) {
        if (batch_col[i] == (int32_t)k)
            return true;
    }
    return false;
}

/* A source column of t the message lacks (by name) while the message has columns the table does
 * not know: the column's attnum says what it is called now. That name among the unknown ones
 * is a rename (attnums are never reused; the column kept its attnum since the table knew it).
 * Another name means it was renamed again since, and which column of the message it is cannot
 * be told: the stream stops (*halt, why) rather than guess. */
static firn_rc plan_one(firn__table *t,
                        const firn_pgo_rel *rel,
                        int32_t *batch_col,
                        size_t k,
                        firn__colrename *out,
                        size_t *n_out,
                        firn_err *why,
                        bool *halt,
                        firn_err *err)
{
    const firn_pg_column *pc = &t->pg->columns[k];
    char now[256];
    FIRN_TRY(attnum_name(t, pc->attnum, now, sizeof(now), err));
    if (now[0] == '\0')
        return FIRN_OK; /* dropped */
    const int32_t i = unknown_named(t, rel, batch_col, now);
    if (i >= 0) {
        out[*n_out].idx = k;
        out[*n_out].rel_col = (uint16_t)i;
        (*n_out)++;
        batch_col[i] = (int32_t)k;
        return FIRN_OK;
    }
    *halt = true;
    firn_err_set(why, FIRN_ERR_SCHEMA,
                 "column \"%s\" of \"%s.%s\" was renamed while streaming and again since (now "
                 "\"%s\"): stream stopped, the slot keeps its changes; drop table \"%s\" and run "
                 "firn sync to copy it again",
                 pc->name, t->pg->schema_name, t->pg->name, now, t->display);
    return FIRN_OK;
}

/* Column i of a Relation message by position (pos_col[i]: the table's source column with the
 * catalog's i-th attnum, -1 when the table has none), when the message's names are, in order,
 * the catalog's now and every column the table knows is among them (*match): pgoutput lists a
 * relation's live, not generated columns in attnum order, so the message then describes the
 * catalog as it is. A message whose names differ describes an earlier state (renames or drops
 * since): *match false. */
static firn_rc
positional(firn__table *t, const firn_pgo_rel *rel, int32_t *pos_col, bool *match, firn_err *err)
{
    *match = false;
    PGconn *pq = firn_pg_conn_pq(t->eng->sql);
    char oid[16];
    snprintf(oid, sizeof(oid), "%u", (unsigned)t->pg->oid);
    const char *params[1] = {oid};
    PGresult *r = PQexecParams(pq,
                               "SELECT attnum, attname FROM pg_attribute WHERE attrelid = $1::oid "
                               "AND attnum > 0 AND NOT attisdropped AND attgenerated = '' "
                               "ORDER BY attnum",
                               1, NULL, params, NULL, NULL, 0);
    firn_rc rc = FIRN_OK;
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        rc = firn_err_set(err, FIRN_ERR_SOURCE, "could not look up the columns of %s: %s",
                          t->pg->qualified, PQerrorMessage(pq));
    else if (PQntuples(r) == (int)rel->n_cols) {
        *match = true;
        for (uint16_t i = 0; *match && i < rel->n_cols; i++)
            *match = strcmp(PQgetvalue(r, i, 1), rel->cols[i].name) == 0;
        for (uint16_t i = 0; *match && rc == FIRN_OK && i < rel->n_cols; i++) {
            int32_t num = 0;
            rc = firn_parse_i32(PQgetvalue(r, i, 0), (size_t)PQgetlength(r, i, 0), &num, err);
            pos_col[i] = -1;
            for (size_t k = 0; k < t->pg->n_columns; k++) {
                if (t->pg->columns[k].attnum > 0 && t->pg->columns[k].attnum == num)
                    pos_col[i] = (int32_t)k;
            }
        }
        /* Every column the table knows is still there: one dropped since (say a dropped, b
         * renamed to a, a new b added) would make equal names describe other columns. */
        for (size_t k = 0; *match && k < t->pg->n_columns; k++) {
            bool found = t->pg->columns[k].attnum <= 0;
            for (uint16_t i = 0; !found && i < rel->n_cols; i++)
                found = pos_col[i] == (int32_t)k;
            *match = found;
        }
    }
    PQclear(r);
    return rc;
}

/* True when a known column sits at another place by position than by name (pos_col from
 * positional): a rename onto a name the table knows, as in a swap of two names. */
static bool moved(const firn_pgo_rel *rel, const int32_t *batch_col, const int32_t *pos_col)
{
    for (uint16_t i = 0; i < rel->n_cols; i++) {
        if (pos_col[i] >= 0 && pos_col[i] != batch_col[i])
            return true;
    }
    return false;
}

firn_rc firn__rename_permuted(
    firn__table *t, const firn_pgo_rel *rel, const int32_t *batch_col, bool *out, firn_err *err)
{
    *out = false;
    int32_t *pos_col = firn_calloc(rel->n_cols ? rel->n_cols : 1, sizeof(int32_t));
    bool match = false;
    firn_rc rc = positional(t, rel, pos_col, &match, err);
    *out = rc == FIRN_OK && match && moved(rel, batch_col, pos_col);
    firn_free(pos_col);
    return rc;
}

/* The message describes the catalog now and a known column moved (firn__rename_permuted): every
 * column is mapped by its attnum, and each known column under another name is a rename. */
static firn_rc plan_positional(firn__table *t,
                               const firn_pgo_rel *rel,
                               int32_t *batch_col,
                               firn__colrename *out,
                               size_t *n_out,
                               bool *done,
                               firn_err *err)
{
    *done = false;
    int32_t *pos_col = firn_calloc(rel->n_cols ? rel->n_cols : 1, sizeof(int32_t));
    bool match = false;
    firn_rc rc = positional(t, rel, pos_col, &match, err);
    if (rc == FIRN_OK && match && moved(rel, batch_col, pos_col)) {
        for (uint16_t i = 0; i < rel->n_cols; i++) {
            batch_col[i] = pos_col[i];
            if (pos_col[i] >= 0 && strcmp(t->pg->columns[pos_col[i]].name, rel->cols[i].name)) {
                out[*n_out].idx = (size_t)pos_col[i];
                out[*n_out].rel_col = i;
                (*n_out)++;
            }
        }
        *done = true;
    }
    firn_free(pos_col);
    return rc;
}

firn_rc firn__rename_plan(firn__table *t,
                          const firn_pgo_rel *rel,
                          int32_t *batch_col,
                          firn__colrename *out,
                          size_t *n_out,
                          firn_err *why,
                          bool *halt,
                          firn_err *err)
{
    *n_out = 0;
    *halt = false;
    bool done = false;
    FIRN_TRY(plan_positional(t, rel, batch_col, out, n_out, &done, err));
    if (done)
        return FIRN_OK;
    bool unknown = false;
    for (uint16_t i = 0; i < rel->n_cols && !unknown; i++)
        unknown = batch_col[i] < 0 && !table_has_field(t, rel->cols[i].name) &&
                  !firn__columns_left_out(t, rel->cols[i].name);
    for (size_t k = 0; unknown && !*halt && k < t->pg->n_columns; k++) {
        if (t->pg->columns[k].attnum <= 0 || mapped(rel, batch_col, k))
            continue;
        FIRN_TRY(plan_one(t, rel, batch_col, k, out, n_out, why, halt, err));
    }
    return FIRN_OK;
}

int32_t firn__rename_historic(const firn__table *t, const firn_pgo_rel *rel, const char *name)
{
    const firn_table_metadata *md = t->cat.metadata;
    if (table_has_field(t, name))
        return -1;
    for (size_t s = 0; s < md->n_schemas; s++) {
        const firn_field *root = md->schemas[s]->root;
        for (size_t f = 0; f < root->n_children; f++) {
            if (strcmp(root->children[f]->name, name) != 0)
                continue;
            for (size_t k = 0; k < t->pg->n_columns; k++) {
                const firn_field *now = t->schema->children[k];
                bool in_rel = false;
                for (uint16_t i = 0; i < rel->n_cols && !in_rel; i++)
                    in_rel = strcmp(rel->cols[i].name, now->name) == 0;
                if (now->id == root->children[f]->id && !in_rel)
                    return (int32_t)k;
            }
        }
    }
    return -1;
}

/* ---- between runs: the attnums of the table's columns ----------------------------------- */

static const firn_field *top_named(const firn_field *root, const char *name)
{
    for (size_t i = 0; i < root->n_children; i++) {
        if (strcmp(root->children[i]->name, name) == 0)
            return root->children[i];
    }
    return NULL;
}

static bool source_has(const firn__table *t, const char *name)
{
    for (size_t i = 0; i < t->pg->n_columns; i++) {
        if (strcmp(t->pg->columns[i].name, name) == 0)
            return true;
    }
    return false;
}

firn_rc firn__rename_attnums_text(const firn__table *t, const firn_field *root, firn_buf *out)
{
    firn_buf_reset(out);
    for (size_t i = 0; i < t->pg->n_columns; i++) {
        const firn_field *f = top_named(root, t->pg->columns[i].name);
        if (!f || t->pg->columns[i].attnum <= 0)
            continue;
        FIRN_TRY(firn_buf_appendf(out, "%s%d:%d", out->len ? "," : "", (int)f->id,
                                  (int)t->pg->columns[i].attnum));
    }
    return FIRN_OK;
}

/* The field id FIRN_PROP_ATTNUMS gives attnum, 0 when none. */
static int32_t field_of_attnum(const char *prop, int16_t attnum)
{
    for (const char *p = prop; p && *p;) {
        const char *colon = strchr(p, ':');
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        int32_t id = 0, num = 0;
        if (!colon || colon > end || firn_parse_i32(p, (size_t)(colon - p), &id, NULL) != FIRN_OK ||
            firn_parse_i32(colon + 1, (size_t)(end - colon - 1), &num, NULL) != FIRN_OK)
            return 0;
        if (num == attnum)
            return id;
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* The field of root that FIRN_PROP_ATTNUMS (prop) gives source column pc, NULL when none. */
static const firn_field *
field_of_column(const char *prop, const firn_field *root, const firn_pg_column *pc)
{
    const int32_t id = pc->attnum > 0 ? field_of_attnum(prop, pc->attnum) : 0;
    for (size_t k = 0; id > 0 && k < root->n_children; k++) {
        if (root->children[k]->id == id)
            return root->children[k]->meta ? NULL : root->children[k];
    }
    return NULL;
}

/* True when the field named `name` in root is itself renamed to another name between runs
 * (its source column, by attnum, is named otherwise now): its name is free for another. */
static bool
name_freed(const firn__table *t, const char *prop, const firn_field *root, const char *name)
{
    const firn_field *held = top_named(root, name);
    for (size_t i = 0; held && i < t->pg->n_columns; i++) {
        if (field_of_column(prop, root, &t->pg->columns[i]) == held)
            return strcmp(t->pg->columns[i].name, name) != 0;
    }
    return false;
}

void firn__rename_between_runs(firn__table *t, const firn_field *root)
{
    const char *prop = firn_props_get(&t->cat.metadata->properties, FIRN_PROP_ATTNUMS);
    /* The attnums are the source table's only while it is the same table (its oid): then they
     * are authoritative, names moved between columns included. Otherwise (a table recorded
     * before the oid was, or one dropped and created again) only a column whose name is new to
     * the table and whose old name left the source is taken as renamed. */
    const char *prop_oid = firn_props_get(&t->cat.metadata->properties, FIRN_PROP_SOURCE_OID);
    char oid[16];
    snprintf(oid, sizeof(oid), "%u", (unsigned)t->pg->oid);
    const bool same_table = prop_oid && t->pg->oid != 0 && strcmp(prop_oid, oid) == 0;
    for (size_t i = 0; prop && i < t->pg->n_columns; i++) {
        const firn_pg_column *pc = &t->pg->columns[i];
        const firn_field *f = field_of_column(prop, root, pc);
        if (!f || strcmp(f->name, pc->name) == 0 || firn_strlist_contains(&t->rename_from, f->name))
            continue;
        /* The new name may be another field's only when that field is renamed too (names
         * swapped or rotated). */
        if (top_named(root, pc->name) && (!same_table || !name_freed(t, prop, root, pc->name)))
            continue;
        if (!same_table && source_has(t, f->name))
            continue;
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "table \"%s\": column \"%s\" was renamed to \"%s\" on the source: renamed in the "
                 "table (field id %d)",
                 t->display, f->name, pc->name, (int)f->id);
        firn_strlist_push(&t->rename_from, f->name);
        firn_strlist_push(&t->rename_to, pc->name);
    }
}

firn_schema *firn__rename_apply(const firn__table *t, const firn_schema *cur)
{
    if (t->rename_from.count == 0)
        return NULL;
    firn_schema *s = firn_schema_clone(cur);
    /* All at once: the fields are found by their old names before any is renamed, so names
     * swapped or rotated (a to b, b to a) rename the fields they belong to. */
    size_t n = t->rename_from.count;
    firn_field **hit = firn_calloc(n ? n : 1, sizeof(*hit));
    for (size_t r = 0; r < n; r++) {
        for (size_t i = 0; i < s->root->n_children && !hit[r]; i++) {
            if (strcmp(s->root->children[i]->name, t->rename_from.items[r]) == 0)
                hit[r] = s->root->children[i];
        }
    }
    for (size_t r = 0; r < n; r++) {
        if (!hit[r])
            continue;
        firn_free(hit[r]->name);
        hit[r]->name = firn_strdup(t->rename_to.items[r]);
    }
    firn_free(hit);
    return s;
}

/* firn__rename_save_attnums's one attempt, from the metadata t holds. */
static firn_rc save_attnums_once(firn__table *t, void *ctx, firn_err *err)
{
    (void)ctx;
    firn_buf text;
    firn_buf_init(&text, 1 << 16);
    const firn_table_metadata *md = t->cat.metadata;
    firn_rc rc = firn__rename_attnums_text(t, firn_table_metadata_schema(md)->root, &text);
    if (rc)
        rc = firn_err_set(err, rc, "could not record the column attnums of table \"%s\"",
                          t->display);
    const char *prop = firn_props_get(&md->properties, FIRN_PROP_ATTNUMS);
    const char *prop_oid = firn_props_get(&md->properties, FIRN_PROP_SOURCE_OID);
    char oid[16];
    snprintf(oid, sizeof(oid), "%u", (unsigned)t->pg->oid);
    const bool new_attnums = text.len > 0 && (!prop || strcmp(prop, (const char *)text.data) != 0);
    const bool new_oid = t->pg->oid != 0 && (!prop_oid || strcmp(prop_oid, oid) != 0);
    if (rc || (!new_attnums && !new_oid)) {
        firn_buf_deinit(&text);
        return rc;
    }
    firn_table_changes ch;
    firn_table_changes_init(&ch);
    firn_table_changes_require_uuid(&ch, md->table_uuid);
    if (new_attnums)
        firn_table_changes_set_property(&ch, FIRN_PROP_ATTNUMS, (const char *)text.data);
    if (new_oid)
        firn_table_changes_set_property(&ch, FIRN_PROP_SOURCE_OID, oid);
    firn_catalog_table out = {0};
    rc = firn_catalog_commit(t->eng->catalog, t->ns, t->name, &ch, &out, err);
    if (rc == FIRN_OK) {
        firn_catalog_table_deinit(&t->cat);
        t->cat = out;
    }
    firn_table_changes_deinit(&ch);
    firn_buf_deinit(&text);
    return rc;
}

firn_rc firn__rename_save_attnums(firn__table *t, firn_err *err)
{
    return firn__table_meta_commit(t, save_attnums_once, NULL, err);
}

firn_rc firn__rename_missing_line(firn__table *t, firn_err *why, firn_err *err)
{
    const char *prop =
        t->cat.metadata ? firn_props_get(&t->cat.metadata->properties, FIRN_PROP_SOURCE_OID) : NULL;
    uint64_t oid = 0;
    char ns[256] = "", name[256] = "";
    if (prop && firn_parse_u64(prop, strlen(prop), &oid, NULL) == FIRN_OK && oid > 0 &&
        oid <= UINT32_MAX)
        FIRN_TRY(current_name(t, (uint32_t)oid, ns, sizeof(ns), name, sizeof(name), err));
    if (name[0]) { /* the same table under another name: the rename stop's line */
        renamed_line(t, ns, name, why);
        return FIRN_OK;
    }
    firn_err_set(why, FIRN_ERR_SCHEMA,
                 "source table \"%s.%s\" does not exist (renamed or dropped): stream stopped%s; "
                 "rename it back or point the stream at the new name with \"target_table\": "
                 "\"%s\", or remove the stream if the table was dropped; then run firn sync",
                 t->pg->schema_name, t->pg->name, t->cdc ? ", the slot keeps its changes" : "",
                 t->name);
    return FIRN_OK;
}

firn_rc firn__rename_unplaced(
    firn__table *t, const firn_pgo_rel *rel, const int32_t *batch_col, bool *out, firn_err *err)
{
    *out = false;
    for (size_t k = 0; !*out && k < t->pg->n_columns; k++) {
        if (t->pg->columns[k].attnum <= 0 || mapped(rel, batch_col, k))
            continue;
        char now[256];
        FIRN_TRY(attnum_name(t, t->pg->columns[k].attnum, now, sizeof(now), err));
        *out = now[0] != '\0';
    }
    return FIRN_OK;
}
