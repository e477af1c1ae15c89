/* SPDX-License-Identifier: Apache-2.0 */
/* A selected stream against its source table, before anything is written: partition columns
 * and transforms that fit their types, cursor columns that exist. `firn check` (with the
 * streams file) and `firn sync` run the same checks, so check cannot pass what sync refuses. */
#include "engine_int.h"

#include <stdio.h>
#include <string.h>

static const firn_field *column_named(const firn_pg_table *pg, const char *name)
{
    for (size_t i = 0; pg->schema && i < pg->schema->n_children; i++) {
        if (strcmp(pg->schema->children[i]->name, name) == 0)
            return pg->schema->children[i];
    }
    return NULL;
}

/* Up to a few column names of pg, for a hint ("id, v, ts and 4 more"). */
static void some_columns(const firn_pg_table *pg, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < pg->n_columns && used < cap; i++) {
        if (i == 4) {
            snprintf(out + used, cap - used, " and %zu more", pg->n_columns - 4);
            return;
        }
        used +=
            (size_t)snprintf(out + used, cap - used, "%s%s", i ? ", " : "", pg->columns[i].name);
    }
}

static firn_rc check_cursor_column(const firn_stream_config *s,
                                   const firn_pg_table *pg,
                                   const char *col,
                                   firn_err *err)
{
    /* Types with no ordering: max() and ">=" fail on them (json, xml, the geometric types). */
    static const uint32_t unordered[] = {114, 142, 600, 601, 602, 603, 604, 628, 718};
    for (size_t i = 0; i < pg->n_columns; i++) {
        const firn_pg_column *c = &pg->columns[i];
        if (strcmp(c->name, col) != 0)
            continue;
        for (size_t k = 0; k < sizeof(unordered) / sizeof(unordered[0]); k++) {
            if (c->type && c->type->base_oid == unordered[k])
                return firn_err_set(err, FIRN_ERR_CONFIG,
                                    "stream \"%s.%s\": cursor_field \"%s\" is of type %s, which "
                                    "has no order; pick a timestamp, date, number or text column",
                                    s->namespace, s->name, col,
                                    c->type->name ? c->type->name : "?");
        }
        return FIRN_OK;
    }
    if (column_named(pg, col))
        return FIRN_OK;
    char cols[120];
    some_columns(pg, cols, sizeof(cols));
    return firn_err_set(err, FIRN_ERR_CONFIG,
                        "stream \"%s.%s\": cursor_field \"%s\" does not exist in the table "
                        "(its columns: %s); pick one of the stream's available_cursor_fields",
                        s->namespace, s->name, col, cols);
}

/* What the transform needs, for the hint. */
static const char *transform_needs(firn_transform_kind k)
{
    switch (k) {
    case FIRN_TRANSFORM_BUCKET:
        return "bucket needs an integer, decimal, date, time, timestamp, string, uuid or binary "
               "column";
    case FIRN_TRANSFORM_TRUNCATE:
        return "truncate needs an integer, decimal, string or binary column";
    case FIRN_TRANSFORM_HOUR:
        return "hour needs a timestamp column";
    case FIRN_TRANSFORM_IDENTITY:
        return "identity needs a column that is not a list, map or composite";
    default:
        return "year, month and day need a date or timestamp column";
    }
}

static firn_rc check_partition(const firn_stream_config *s,
                               const firn_pg_table *pg,
                               const firn_cfg_partition *p,
                               firn_err *err)
{
    firn_transform tr = {firn__transform_kind(p->transform), (int32_t)p->param};
    char expr[256];
    if (tr.kind == FIRN_TRANSFORM_IDENTITY)
        snprintf(expr, sizeof(expr), "%s", p->column);
    else if (tr.kind == FIRN_TRANSFORM_BUCKET || tr.kind == FIRN_TRANSFORM_TRUNCATE)
        snprintf(expr, sizeof(expr), "%s(%lld, %s)",
                 tr.kind == FIRN_TRANSFORM_BUCKET ? "bucket" : "truncate", (long long)p->param,
                 p->column);
    else {
        char tn[32];
        firn_transform_format(tr, tn, sizeof(tn));
        snprintf(expr, sizeof(expr), "%s(%s)", tn, p->column);
    }
    if (strcmp(p->column, "now()") == 0)
        return FIRN_OK; /* the table's own check names it */
    const firn_field *f = column_named(pg, p->column);
    if (!f)
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "stream \"%s.%s\": partition \"%s\": column \"%s\" does not exist in "
                            "the table; name another column in \"partition\" or leave it out "
                            "(a table already created keeps its partition spec)",
                            s->namespace, s->name, expr, p->column);
    firn_ptype out;
    firn_err ignored = {0};
    if (firn_transform_result_type(tr, firn_ptype_of(f), &out, &ignored) == FIRN_OK)
        return FIRN_OK;
    char tname[48];
    firn_ptype_format(firn_ptype_of(f), tname, sizeof(tname));
    return firn_err_set(err, FIRN_ERR_CONFIG,
                        "stream \"%s.%s\": partition \"%s\": column \"%s\" is %s in Iceberg and "
                        "%s; pick another transform or column",
                        s->namespace, s->name, expr, p->column, tname, transform_needs(tr.kind));
}

/* The first column of the override outside the primary key, when the stream upserts from the
 * WAL under REPLICA IDENTITY DEFAULT: an UPDATE that changes only such a column carries no old
 * value of it, so the row under the old key could not be found. NULL when the key is safe. */
static const char *key_outside_identity(const firn_stream_config *s, const firn_pg_table *pg)
{
    const bool cdc =
        s->sync_mode == FIRN_SYNC_FULL_REFRESH_CDC || s->sync_mode == FIRN_SYNC_CDC_ONLY;
    if (!cdc || s->append_mode || pg->replica_identity != 'd' || !pg->has_primary_key)
        return NULL;
    for (size_t i = 0; i < s->primary_key.count; i++) {
        bool in_pk = false;
        for (size_t k = 0; k < pg->n_key && !in_pk; k++)
            in_pk = strcmp(pg->columns[pg->key_columns[k]].name, s->primary_key.items[i]) == 0;
        if (!in_pk)
            return s->primary_key.items[i];
    }
    return NULL;
}

firn_rc
firn__stream_check_table(const firn_stream_config *s, const firn_pg_table *pg, firn_err *err)
{
    for (size_t i = 0; i < s->partition_count; i++)
        FIRN_TRY(check_partition(s, pg, &s->partition[i], err));
    const char *outside = key_outside_identity(s, pg);
    if (outside)
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "stream \"%s.%s\": primary_key column \"%s\" is not in the table's "
                            "primary key, and under REPLICA IDENTITY DEFAULT an UPDATE that "
                            "changes it carries no old value, so the old row would stay; run "
                            "ALTER TABLE %s REPLICA IDENTITY FULL, or leave primary_key out",
                            s->namespace, s->name, outside, pg->qualified);
    if (s->sync_mode == FIRN_SYNC_INCREMENTAL && s->cursor_field) {
        FIRN_TRY(check_cursor_column(s, pg, s->cursor_field, err));
        if (s->cursor_fallback)
            FIRN_TRY(check_cursor_column(s, pg, s->cursor_fallback, err));
    }
    return FIRN_OK;
}

void firn__streams_names_append(firn_buf *b,
                                const firn_stream_config *items,
                                const size_t *idx,
                                size_t n)
{
    for (size_t i = 0; i < n && i < 5; i++)
        firn_rc_ignore(firn_buf_appendf(b, "%s\"%s.%s\"", i ? ", " : "", items[idx[i]].namespace,
                                        items[idx[i]].name));
    if (n > 5)
        firn_rc_ignore(firn_buf_appendf(b, " and %zu more", n - 5));
}

firn_rc firn__streams_check_missing(const firn_config *cfg,
                                    firn_pg_catalog *pgcat,
                                    bool *out_config,
                                    firn_err *err)
{
    const firn_streams_config *ss = &cfg->streams;
    size_t *missing = firn_calloc(ss->count ? ss->count : 1, sizeof(size_t));
    size_t n = 0;
    *out_config = false;
    for (size_t i = 0; i < ss->count; i++) {
        const firn_stream_config *s = &ss->items[i];
        if (!s->selected || firn_pg_catalog_find(pgcat, s->namespace, s->name))
            continue;
        missing[n++] = i;
        /* Never synced (no state entry): a name that never was a table. */
        *out_config |= !firn_state_stream((firn_state *)&cfg->state, s->namespace, s->name, false);
    }
    firn_rc rc = FIRN_OK;
    if (n > 0) {
        firn_buf b;
        firn_buf_init(&b, 1 << 16);
        firn__streams_names_append(&b, ss->items, missing, n);
        rc = firn_err_set(err, FIRN_ERR_NOT_FOUND,
                          "source has no table %s%s selected in the streams file; a table renamed: "
                          "rename it back or point its stream at the new name with "
                          "\"target_table\" (its Iceberg table); dropped: remove the stream; "
                          "misspelt: fix its namespace or stream_name (firn discover lists the "
                          "tables)",
                          n > 1 ? "for these streams: " : "", (const char *)b.data);
        firn_buf_deinit(&b);
    }
    firn_free(missing);
    return rc;
}

firn_rc
firn__streams_check_source(const firn_config *cfg, firn_pg_conn *c, bool *out_config, firn_err *err)
{
    const firn_streams_config *ss = &cfg->streams;
    size_t n = 0;
    firn_pg_relname *names = firn__selected_names(ss, &n);
    firn_pg_catalog *pgcat = NULL;
    firn_rc rc = n ? firn_pg_discover_named(c, names, n, &pgcat, err) : FIRN_OK;
    *out_config = false;
    if (rc == FIRN_OK && n)
        rc = firn__streams_check_missing(cfg, pgcat, out_config, err);
    for (size_t i = 0; rc == FIRN_OK && i < ss->count; i++) {
        const firn_stream_config *s = &ss->items[i];
        const firn_pg_table *pg =
            s->selected ? firn_pg_catalog_find(pgcat, s->namespace, s->name) : NULL;
        if (pg)
            rc = firn__stream_check_table(s, pg, err);
        *out_config = rc != FIRN_OK;
    }
    firn_free(names);
    firn_pg_catalog_free(pgcat);
    return rc;
}

bool firn__conn_error_is_config(firn_err *err)
{
    if (!err)
        return false;
    const char *m = err->msg;
    const char *failed = strstr(m, " failed: ");
    if (failed && strncmp(m, "connection to server", 20) == 0)
        m = failed + 9;
    if (strncmp(m, "invalid ", 8) != 0 ||
        (!strstr(m, " value") && !strstr(m, "connection option") && !strstr(m, "port number")))
        return false;
    char msg[FIRN_ERR_MSG_MAX];
    snprintf(msg, sizeof(msg), "%s", m);
    firn_rc_ignore(firn_err_set(err, FIRN_ERR_CONFIG,
                                "source connection parameters: %s; fix it in source.json (params, "
                                "uri or the key of that name)",
                                msg));
    return true;
}
