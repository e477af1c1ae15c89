/* SPDX-License-Identifier: Apache-2.0 */
/* A stream's column selection (`columns`, `sync_new_columns`) and backfill `filter`: which
 * source columns reach the Iceberg table, in the COPY queries and in CDC, and their checks
 * at `firn check` (docs/configuration.md "Columns and filter"). */
#include "cfg_int.h"
#include "engine_int.h"

#include <jansson.h>
#include <libpq-fe.h>
#include <string.h>

/* The column names of a discovered `type_schema` (firn's Iceberg JSON "fields", or OLake's
 * "properties" object) into out; false when s has none or it cannot be read. */
static bool baseline_names(const firn_stream_config *s, firn_strlist *out)
{
    if (!s->type_schema)
        return false;
    json_t *root = json_loads(s->type_schema, 0, NULL);
    json_t *fields = json_object_get(root, "fields");
    json_t *props = json_object_get(root, "properties");
    bool ok = json_is_array(fields) || json_is_object(props);
    size_t i;
    json_t *v;
    json_array_foreach(fields, i, v)
    {
        const char *name = json_string_value(json_object_get(v, "name"));
        if (name && strncmp(name, "_firn_", 6) != 0)
            firn_strlist_push(out, name);
    }
    const char *key;
    json_object_foreach(props, key, v)
    {
        firn_strlist_push(out, key);
    }
    json_decref(root);
    return ok;
}

static int32_t column_index(const firn_pg_table *pg, const char *name)
{
    for (size_t i = 0; i < pg->n_columns; i++) {
        if (strcmp(pg->columns[i].name, name) == 0)
            return (int32_t)i;
    }
    return -1;
}

/* Why column i must be copied whatever the selection says, or NULL. */
static const char *required_as(const firn_stream_config *s, const firn_pg_table *pg, size_t i)
{
    const char *name = pg->columns[i].name;
    for (size_t k = 0; k < pg->n_key; k++) {
        if (pg->key_columns[k] == i)
            return s->primary_key.count ? "primary_key" : "primary key";
    }
    if (s->sync_mode == FIRN_SYNC_INCREMENTAL &&
        ((s->cursor_field && strcmp(s->cursor_field, name) == 0) ||
         (s->cursor_fallback && strcmp(s->cursor_fallback, name) == 0)))
        return "cursor_field";
    for (size_t k = 0; k < s->partition_count; k++) {
        if (s->partition[k].column && strcmp(s->partition[k].column, name) == 0)
            return "partition column";
    }
    return NULL;
}

/* Every name of `columns` is a column of the source table; one the discovered type_schema
 * lists that the source dropped since is skipped with a warning. */
static firn_rc check_names(const firn_stream_config *s,
                           const firn_pg_table *pg,
                           const firn_strlist *base,
                           firn_err *err)
{
    for (size_t k = 0; k < s->columns.count; k++) {
        const char *name = s->columns.items[k];
        if (column_index(pg, name) >= 0)
            continue;
        if (firn_strlist_contains(base, name)) {
            FIRN_LOG(FIRN_LOG_WARN, "engine",
                     "stream \"%s.%s\": selected column \"%s\" no longer exists in the source: "
                     "skipped",
                     s->namespace, s->name, name);
            continue;
        }
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "stream \"%s.%s\": selected column \"%s\" does not exist in source "
                            "table %s (column names are case-sensitive)",
                            s->namespace, s->name, name, pg->qualified);
    }
    return FIRN_OK;
}

enum { NOT_SELECTED = 0, LISTED, NEW_COLUMN };

/* Whether source column `name` is copied: selected (LISTED, or part of the baseline when no
 * list is given), or a NEW_COLUMN and sync_new_columns. Without a discovered baseline, the
 * columns the Iceberg table already has count as synced new columns. */
static int selected(const firn_stream_config *s,
                    const firn_strlist *base,
                    bool has_base,
                    const firn_strlist *table_cols,
                    const char *name)
{
    bool listed;
    if (s->columns.count)
        listed = firn_strlist_contains(&s->columns, name);
    else if (has_base)
        listed = firn_strlist_contains(base, name);
    else
        listed = !table_cols || firn_strlist_contains(table_cols, name);
    bool is_new = has_base ? !firn_strlist_contains(base, name)
                           : table_cols && firn_strlist_contains(table_cols, name);
    return listed ? LISTED : s->sync_new_columns && is_new ? NEW_COLUMN : NOT_SELECTED;
}

/* Without a type_schema, a column the table has that `columns` does not list may be one synced
 * as new or one removed from the list: it is kept, and the operator told how to leave it out. */
static void note_kept(const firn_stream_config *s, bool has_base, const char *name)
{
    if (!has_base && s->columns.count)
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "stream \"%s.%s\": column \"%s\" is not in columns but its table has it: "
                 "synced as a new column (sync_new_columns); to leave it out, set "
                 "sync_new_columns to false or keep the streams half firn discover writes",
                 s->namespace, s->name, name);
}

firn_rc firn__columns_apply(const firn_stream_config *s,
                            const firn_strlist *table_cols,
                            firn_pg_table *pg,
                            firn_strlist *left_out,
                            firn_err *err)
{
    firn_pg_table_set_filter(pg, s->filter);
    if (s->filter && s->filter[0] && s->sync_mode == FIRN_SYNC_CDC_ONLY)
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "stream \"%s.%s\": filter has no effect in sync mode cdc_only (it applies to "
                 "copies, never to changes)",
                 s->namespace, s->name);
    if (s->columns.count == 0 && s->sync_new_columns)
        return FIRN_OK;
    firn_strlist base = {0};
    bool has_base = baseline_names(s, &base);
    firn_rc rc = check_names(s, pg, &base, err);
    bool *keep = firn_calloc(pg->n_columns, sizeof(bool));
    size_t n_keep = 0;
    for (size_t i = 0; rc == FIRN_OK && i < pg->n_columns; i++) {
        const char *name = pg->columns[i].name;
        int how = selected(s, &base, has_base, table_cols, name);
        if (how == NEW_COLUMN)
            note_kept(s, has_base, name);
        keep[i] = how != NOT_SELECTED;
        const char *why = keep[i] ? NULL : required_as(s, pg, i);
        if (why)
            FIRN_LOG(FIRN_LOG_INFO, "engine",
                     "stream \"%s.%s\": column \"%s\" is not selected but is the %s: copied too",
                     s->namespace, s->name, name, why);
        keep[i] |= why != NULL;
        n_keep += keep[i];
        if (!keep[i])
            firn_strlist_push(left_out, name);
    }
    if (rc == FIRN_OK && n_keep == 0)
        rc = firn_err_set(err, FIRN_ERR_CONFIG, "stream \"%s.%s\": no column is selected",
                          s->namespace, s->name);
    if (rc == FIRN_OK && n_keep < pg->n_columns)
        firn_pg_table_keep_columns(pg, keep);
    firn_free(keep);
    firn_strlist_deinit(&base);
    return rc;
}

/* The source columns of the stream's existing Iceberg table into out; *out_rows: it is settled
 * (firn__table_settled). Nothing when the table does not exist yet. */
static firn_rc table_columns(firn__engine *e,
                             const firn_stream_config *s,
                             firn_strlist *out,
                             bool *out_exists,
                             bool *out_rows,
                             firn_err *err)
{
    *out_exists = *out_rows = false;
    FIRN_TRY(firn_catalog_table_exists(e->catalog, s->target_namespace, s->target_table, out_exists,
                                       err));
    if (!*out_exists)
        return FIRN_OK;
    firn_catalog_table ct = {0};
    FIRN_TRY(firn_catalog_load_table(e->catalog, s->target_namespace, s->target_table, &ct, err));
    const firn_field *root = firn_table_metadata_schema(ct.metadata)->root;
    for (size_t i = 0; i < root->n_children; i++)
        firn_strlist_push(out, root->children[i]->name);
    *out_rows = firn__table_settled(ct.metadata, s->sync_mode);
    firn_catalog_table_deinit(&ct);
    return FIRN_OK;
}

/* What a changed selection means for the rows already copied (docs/configuration.md). */
static void note_changes(const firn_stream_config *s,
                         const firn_pg_table *pg,
                         const firn_strlist *table_cols,
                         const firn_strlist *left_out)
{
    for (size_t i = 0; i < pg->n_columns; i++) {
        if (!firn_strlist_contains(table_cols, pg->columns[i].name))
            FIRN_LOG(FIRN_LOG_WARN, "engine",
                     "table \"%s.%s\": column \"%s\" is new to the table (selected since the "
                     "last run, or added to the source): rows copied before hold null in it and "
                     "are not copied again (drop the table to copy them with it)",
                     s->target_namespace, s->target_table, pg->columns[i].name);
    }
    for (size_t k = 0; k < left_out->count; k++) {
        if (firn_strlist_contains(table_cols, left_out->items[k]))
            FIRN_LOG(FIRN_LOG_WARN, "engine",
                     "table \"%s.%s\": column \"%s\" is no longer selected: kept in the table, "
                     "null in the rows written from now on",
                     s->target_namespace, s->target_table, left_out->items[k]);
    }
}

firn_rc firn__columns_setup(firn__engine *e,
                            const firn_stream_config *s,
                            firn_pg_table *pg,
                            firn_strlist *left_out,
                            firn_err *err)
{
    if (s->columns.count == 0 && s->sync_new_columns)
        return firn__columns_apply(s, NULL, pg, left_out, err);
    firn_strlist cols = {0};
    bool exists = false, rows = false;
    firn_rc rc = table_columns(e, s, &cols, &exists, &rows, err);
    /* A table not settled (nothing committed, or a first copy not finished) counts as none: the
     * next copy follows the selection, and the table's schema is narrowed to it (eng_table.c
     * narrow_unsettled). */
    if (rc == FIRN_OK)
        rc = firn__columns_apply(s, exists && rows ? &cols : NULL, pg, left_out, err);
    if (rc == FIRN_OK && rows)
        note_changes(s, pg, &cols, left_out);
    firn_strlist_deinit(&cols);
    return rc;
}

bool firn__columns_left_out(firn__table *t, const char *name)
{
    if (firn_strlist_contains(&t->left_out, name))
        return true;
    if (t->stream->sync_new_columns)
        return false;
    FIRN_LOG(FIRN_LOG_INFO, "engine",
             "column \"%s\" added to source table %s is not synced to table \"%s\" "
             "(sync_new_columns is false)",
             name, t->pg->qualified, t->display);
    firn_strlist_push(&t->left_out, name);
    return true;
}

/* EXPLAIN of the stream's filter on its table: a syntax error, an unknown column or a missing
 * right is the server's message, naming the stream. One statement (extended protocol). */
static firn_rc
check_filter(firn_pg_conn *c, const firn_stream_config *s, const firn_pg_table *pg, firn_err *err)
{
    firn_buf sql;
    firn_buf_init(&sql, (size_t)1 << 20);
    firn_rc rc =
        firn_buf_appendf(&sql, "EXPLAIN SELECT 1 FROM %s WHERE (%s)", pg->qualified, s->filter);
    PGconn *pq = firn_pg_conn_pq(c);
    PGresult *r =
        rc ? NULL : PQexecParams(pq, (const char *)sql.data, 0, NULL, NULL, NULL, NULL, 0);
    if (r && PQresultStatus(r) != PGRES_TUPLES_OK) {
        const char *msg = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
        rc = firn_err_set(err, FIRN_ERR_CONFIG, "stream \"%s.%s\": filter is not valid: %s",
                          s->namespace, s->name, msg ? msg : PQerrorMessage(pq));
    }
    PQclear(r);
    firn_buf_deinit(&sql);
    return rc;
}

static firn_rc
check_stream(firn_pg_conn *c, const firn_stream_config *s, firn_pg_catalog *cat, firn_err *err)
{
    firn_pg_table *pg = firn_pg_catalog_find(cat, s->namespace, s->name);
    if (!pg)
        return FIRN_OK; /* reported by the sync's own checks */
    if (s->primary_key.count)
        FIRN_TRY(firn_pg_table_set_key(pg, (const char *const *)s->primary_key.items,
                                       s->primary_key.count, err));
    firn_strlist left_out = {0};
    firn_rc rc = firn__columns_apply(s, NULL, pg, &left_out, err);
    firn_strlist_deinit(&left_out);
    if (rc == FIRN_OK && s->filter && s->filter[0])
        rc = check_filter(c, s, pg, err);
    return rc;
}

firn_rc firn__columns_check(const firn_config *cfg, firn_pg_conn *c, firn_err *err)
{
    const firn_streams_config *ss = &cfg->streams;
    firn_pg_relname *names = firn_calloc(ss->count ? ss->count : 1, sizeof(*names));
    size_t n = 0;
    for (size_t i = 0; i < ss->count; i++) {
        const firn_stream_config *s = &ss->items[i];
        if (!s->selected || (s->columns.count == 0 && s->sync_new_columns && !s->filter))
            continue;
        names[n].schema = s->namespace;
        names[n++].name = s->name;
    }
    firn_pg_catalog *cat = NULL;
    firn_rc rc = FIRN_OK;
    if (n)
        rc = firn_pg_discover_named(c, names, n, &cat, err);
    for (size_t i = 0; rc == FIRN_OK && n && i < ss->count; i++) {
        if (ss->items[i].selected)
            rc = check_stream(c, &ss->items[i], cat, err);
    }
    firn_free(names);
    firn_pg_catalog_free(cat);
    return rc;
}

/* Writes st->columns into the stream's selected_streams entry as written (st->selection), in
 * the form it uses ("selected_columns": {"columns"} or "columns"). */
static void selection_set_columns(firn_stream_config *st)
{
    json_t *sel = st->selection ? json_loads(st->selection, 0, NULL) : NULL;
    if (!json_is_object(sel)) {
        json_decref(sel);
        return;
    }
    json_t *list = json_array();
    for (size_t k = 0; k < st->columns.count; k++)
        json_array_append_new(list, json_string(st->columns.items[k]));
    json_t *sc = json_object_get(sel, "selected_columns");
    json_object_set_new(json_is_object(sc) ? sc : sel, "columns", list);
    char *text = firn__cfg_json_text(sel, JSON_COMPACT);
    if (text) {
        firn_free(st->selection);
        st->selection = text;
    }
    json_decref(sel);
}

void firn__columns_rediscover(firn_stream_config *st,
                              const firn_pg_table *t,
                              const firn_stream_config *old)
{
    if (!old || !old->selected || (old->columns.count == 0) == old->sync_new_columns)
        return;
    firn_strlist base = {0};
    if (!baseline_names(old, &base)) {
        firn_strlist_deinit(&base);
        return;
    }
    firn_strlist next = {0};
    bool changed = false;
    for (size_t k = 0; k < old->columns.count; k++)
        firn_strlist_push(&next, old->columns.items[k]);
    for (size_t i = 0; i < t->n_columns; i++) {
        const char *name = t->columns[i].name;
        bool is_new = !firn_strlist_contains(&base, name);
        if (old->columns.count ? !is_new || firn_strlist_contains(&next, name) : is_new)
            continue;
        firn_strlist_push(&next, name); /* a new synced column, or a known one kept */
        changed |= is_new;
    }
    changed |= old->columns.count == 0 && next.count < t->n_columns;
    if (changed) {
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "stream \"%s.%s\": columns added to the source since the last discover are "
                 "%s the selection (sync_new_columns is %s)",
                 st->namespace, st->name, old->columns.count ? "added to" : "left out of",
                 old->sync_new_columns ? "true" : "false");
        firn_strlist_deinit(&st->columns);
        st->columns = next;
        next = (firn_strlist){0};
        selection_set_columns(st);
    }
    firn_strlist_deinit(&next);
    firn_strlist_deinit(&base);
}
