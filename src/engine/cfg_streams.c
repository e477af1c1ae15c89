/* SPDX-License-Identifier: Apache-2.0 */
/* streams.json: binding of "selected_streams" and "streams", partition expressions (firn's
 * "day(created_at)" and OLake's "/{created_at, day}"), merging both halves into one list of
 * streams, and writing the file back in OLake's layout. */
#include "cfg_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static firn_stream_config *stream_append(firn_streams_config *s)
{
    s->items = firn_reallocarray(s->items, s->count + 1, sizeof(*s->items));
    firn_stream_config *st = &s->items[s->count++];
    memset(st, 0, sizeof(*st));
    st->sync_new_columns = true;
    return st;
}

static const cfg_node *items_of(const cfg_node *root, const char *key)
{
    for (const cfg_prop *p = root->props; p->name; p++) {
        if (strcmp(p->name, key) == 0)
            return p->node->items;
    }
    return NULL;
}

/* Binds one array element with conflict checks scoped to it. */
static firn_rc
bind_entry(cfg_ctx *ctx, const cfg_node *node, const json_t *v, void *elem, firn_err *err)
{
    size_t seen = ctx->n_seen;
    firn_rc rc = firn__cfg_walk(ctx, node, v, elem, err);
    firn__cfg_seen_truncate(ctx, seen);
    return rc;
}

firn_rc firn__cfg_bind_selected(cfg_ctx *ctx, const json_t *v, void *base, firn_err *err)
{
    firn_streams_config *s = base;
    const cfg_node *item_node = items_of(&firn__cfg_streams_root, "selected_streams");
    if (json_is_null(v))
        return FIRN_OK;
    if (!json_is_object(v))
        return firn__cfg_fail(ctx, err, "\"%s\" must be an object of schema -> array of streams",
                              firn__cfg_path(ctx));
    const char *ns;
    const json_t *list;
    json_object_foreach((json_t *)v, ns, list)
    {
        size_t old = firn__cfg_path_push(ctx, ns);
        firn_rc rc = FIRN_OK;
        if (!json_is_array(list))
            rc = firn__cfg_fail(ctx, err, "\"%s\" must be an array", firn__cfg_path(ctx));
        size_t i;
        const json_t *entry;
        json_array_foreach(list, i, entry)
        {
            if (rc)
                break;
            size_t old_i = firn__cfg_path_index(ctx, i);
            firn_stream_config *st = stream_append(s);
            st->selected = true;
            st->namespace = firn_strdup(ns);
            rc = bind_entry(ctx, item_node, entry, st, err);
            if (rc == FIRN_OK)
                st->selection = firn__cfg_json_text(entry, JSON_COMPACT | JSON_PRESERVE_ORDER);
            firn__cfg_path_pop(ctx, old_i);
        }
        firn__cfg_path_pop(ctx, old);
        FIRN_TRY(rc);
    }
    return FIRN_OK;
}

firn_rc firn__cfg_bind_catalog_streams(cfg_ctx *ctx, const json_t *v, void *base, firn_err *err)
{
    firn_streams_config *s = base;
    const cfg_node *item_node = items_of(&firn__cfg_streams_root, "streams");
    if (json_is_null(v))
        return FIRN_OK;
    if (!json_is_array(v))
        return firn__cfg_fail(ctx, err, "\"%s\" must be an array", firn__cfg_path(ctx));
    size_t i;
    const json_t *entry;
    json_array_foreach(v, i, entry)
    {
        size_t old = firn__cfg_path_index(ctx, i);
        firn_stream_config *st = stream_append(s);
        firn_rc rc = bind_entry(ctx, item_node, entry, st, err);
        firn__cfg_path_pop(ctx, old);
        FIRN_TRY(rc);
    }
    return FIRN_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Partition expressions
 * ----------------------------------------------------------------------------------------------*/

static const char *const transform_names[] = {"identity", "year",   "month",    "day",
                                              "hour",     "bucket", "truncate", "void"};

const char *firn_cfg_transform_name(firn_cfg_transform t)
{
    if ((size_t)t < sizeof(transform_names) / sizeof(transform_names[0]))
        return transform_names[t];
    return "unknown";
}

static void trim(const char **p, size_t *len)
{
    while (*len && isspace((unsigned char)**p)) {
        (*p)++;
        (*len)--;
    }
    while (*len && isspace((unsigned char)(*p)[*len - 1]))
        (*len)--;
}

static bool lookup_transform(const char *p, size_t len, firn_cfg_transform *out)
{
    for (size_t i = 0; i < sizeof(transform_names) / sizeof(transform_names[0]); i++) {
        if (strlen(transform_names[i]) == len && memcmp(transform_names[i], p, len) == 0) {
            *out = (firn_cfg_transform)i;
            return true;
        }
    }
    return false;
}

static bool parse_param(const char *p, size_t len, int64_t *out)
{
    trim(&p, &len);
    firn_err perr = {0};
    return firn_parse_i64(p, len, out, &perr) == FIRN_OK && *out > 0 && *out <= 1000000;
}

static bool valid_column(const char *p, size_t len)
{
    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (p[i] == '(' || p[i] == ')' || p[i] == ',' || p[i] == '{' || p[i] == '}')
            return len == 5 && memcmp(p, "now()", 5) == 0;
    }
    return true;
}

/* transform(col), transform(n, col) or a bare column (identity). */
firn_rc
firn__cfg_parse_partition_expr(const char *text, firn_cfg_partition *f, char *why, size_t why_cap)
{
    const char *p = text;
    size_t len = strlen(text);
    trim(&p, &len);
    memset(f, 0, sizeof(*f));
    const char *open = memchr(p, '(', len);
    if (!open || (len == 5 && memcmp(p, "now()", 5) == 0)) {
        if (!valid_column(p, len)) {
            snprintf(why, why_cap, "expected a column or transform(column)");
            return FIRN_ERR_PARSE;
        }
        f->column = firn_strndup(p, len);
        return FIRN_OK;
    }
    if (p[len - 1] != ')') {
        snprintf(why, why_cap, "missing \")\"");
        return FIRN_ERR_PARSE;
    }
    const char *name = p;
    size_t name_len = (size_t)(open - p);
    trim(&name, &name_len);
    if (!lookup_transform(name, name_len, &f->transform)) {
        snprintf(why, why_cap, "unknown transform \"%.*s\"", (int)(name_len > 32 ? 32 : name_len),
                 name);
        return FIRN_ERR_PARSE;
    }
    const char *args = open + 1;
    size_t args_len = (size_t)(p + len - 1 - args);
    const char *comma = memchr(args, ',', args_len);
    bool wants_param =
        f->transform == FIRN_CFG_TRANSFORM_BUCKET || f->transform == FIRN_CFG_TRANSFORM_TRUNCATE;
    if (wants_param != (comma != NULL)) {
        snprintf(why, why_cap,
                 wants_param ? "%s needs a width: %s(N, column)"
                             : "%s takes one column: %s(column)",
                 transform_names[f->transform], transform_names[f->transform]);
        return FIRN_ERR_PARSE;
    }
    if (comma) {
        if (!parse_param(args, (size_t)(comma - args), &f->param)) {
            snprintf(why, why_cap, "width must be an integer from 1 to 1000000");
            return FIRN_ERR_PARSE;
        }
        args_len -= (size_t)(comma + 1 - args);
        args = comma + 1;
    }
    trim(&args, &args_len);
    if (!valid_column(args, args_len)) {
        snprintf(why, why_cap, "expected a column name");
        return FIRN_ERR_PARSE;
    }
    f->column = firn_strndup(args, args_len);
    return FIRN_OK;
}

/* OLake: "/{created_at, day}/{id, bucket[16]}". */
static firn_rc
parse_olake_group(const char *p, size_t len, firn_cfg_partition *f, char *why, size_t why_cap)
{
    memset(f, 0, sizeof(*f));
    const char *comma = memchr(p, ',', len);
    const char *col = p;
    size_t col_len = comma ? (size_t)(comma - p) : len;
    trim(&col, &col_len);
    if (!valid_column(col, col_len)) {
        snprintf(why, why_cap, "expected {column, transform}");
        return FIRN_ERR_PARSE;
    }
    if (comma) {
        const char *t = comma + 1;
        size_t t_len = len - (size_t)(t - p);
        trim(&t, &t_len);
        const char *br = memchr(t, '[', t_len);
        size_t name_len = br ? (size_t)(br - t) : t_len;
        if (t_len && !lookup_transform(t, name_len, &f->transform)) {
            snprintf(why, why_cap, "unknown transform \"%.*s\"",
                     (int)(name_len > 32 ? 32 : name_len), t);
            return FIRN_ERR_PARSE;
        }
        bool wants = f->transform == FIRN_CFG_TRANSFORM_BUCKET ||
                     f->transform == FIRN_CFG_TRANSFORM_TRUNCATE;
        if (wants != (br != NULL) ||
            (br &&
             (t[t_len - 1] != ']' || !parse_param(br + 1, t_len - name_len - 2, &f->param)))) {
            snprintf(why, why_cap, "bucket and truncate need a width: bucket[16]");
            return FIRN_ERR_PARSE;
        }
    }
    f->column = firn_strndup(col, col_len);
    return FIRN_OK;
}

static void partition_push(firn_stream_config *st, const firn_cfg_partition *f)
{
    st->partition =
        firn_reallocarray(st->partition, st->partition_count + 1, sizeof(*st->partition));
    st->partition[st->partition_count++] = *f;
}

static firn_rc
bind_olake_regex(cfg_ctx *ctx, const char *text, firn_stream_config *st, firn_err *err)
{
    const char *p = text;
    char why[96];
    while (*p) {
        if (*p == '/' || isspace((unsigned char)*p)) {
            p++;
            continue;
        }
        const char *close = strchr(p, '}');
        if (*p != '{' || !close)
            return firn__cfg_fail(ctx, err, "\"%s\": expected \"/{column, transform}\"",
                                  firn__cfg_path(ctx));
        firn_cfg_partition f;
        if (parse_olake_group(p + 1, (size_t)(close - p - 1), &f, why, sizeof(why)))
            return firn__cfg_fail(ctx, err, "\"%s\": %s", firn__cfg_path(ctx), why);
        partition_push(st, &f);
        p = close + 1;
    }
    return FIRN_OK;
}

firn_rc firn__cfg_bind_partition(cfg_ctx *ctx, const json_t *v, void *base, firn_err *err)
{
    firn_stream_config *st = base;
    if (json_is_null(v))
        return FIRN_OK;
    FIRN_TRY(firn__cfg_mark_seen(ctx, &st->partition, err));
    if (json_is_string(v))
        return bind_olake_regex(ctx, json_string_value(v), st, err);
    if (!json_is_array(v))
        return firn__cfg_fail(ctx, err,
                              "\"%s\" must be an array of strings such as "
                              "\"day(created_at)\"",
                              firn__cfg_path(ctx));
    size_t i;
    const json_t *item;
    json_array_foreach(v, i, item)
    {
        size_t old = firn__cfg_path_index(ctx, i);
        firn_rc rc = FIRN_OK;
        char why[96];
        firn_cfg_partition f;
        if (!json_is_string(item))
            rc = firn__cfg_fail(ctx, err, "\"%s\" must be a string", firn__cfg_path(ctx));
        else if (firn__cfg_parse_partition_expr(json_string_value(item), &f, why, sizeof(why)))
            rc = firn__cfg_fail(ctx, err, "\"%s\": %s", firn__cfg_path(ctx), why);
        else
            partition_push(st, &f);
        firn__cfg_path_pop(ctx, old);
        FIRN_TRY(rc);
    }
    return FIRN_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Merging "streams" and "selected_streams"
 * ----------------------------------------------------------------------------------------------*/

static bool same_stream(const firn_stream_config *a, const firn_stream_config *b)
{
    return a->namespace && b->namespace && strcmp(a->namespace, b->namespace) == 0 &&
           strcmp(a->name, b->name) == 0;
}

#define TAKE_IF_UNSET(dst, src, field)                                                             \
    do {                                                                                           \
        if (!(dst)->field) {                                                                       \
            (dst)->field = (src)->field;                                                           \
            (src)->field = 0;                                                                      \
        }                                                                                          \
    } while (0)

static void take_list(firn_strlist *dst, firn_strlist *src)
{
    if (dst->count == 0) {
        firn_strlist_clear(dst);
        *dst = *src;
        memset(src, 0, sizeof(*src));
    }
}

/* Moves what only the discovered entry knows (and what the selection left unset) into sel. */
static void merge_into_selection(firn_stream_config *sel, firn_stream_config *disc)
{
    TAKE_IF_UNSET(sel, disc, type_schema);
    TAKE_IF_UNSET(sel, disc, sync_mode);
    TAKE_IF_UNSET(sel, disc, cursor_field);
    TAKE_IF_UNSET(sel, disc, target_namespace);
    TAKE_IF_UNSET(sel, disc, target_table);
    take_list(&sel->source_primary_key, &disc->source_primary_key);
    take_list(&sel->supported_sync_modes, &disc->supported_sync_modes);
    take_list(&sel->available_cursor_fields, &disc->available_cursor_fields);
}

static firn_rc check_stream(cfg_ctx *ctx, firn_stream_config *st, firn_err *err)
{
    if (st->selected && (!st->name[0] || !st->namespace[0]))
        return firn__cfg_fail(ctx, err, "stream \"%s.%s\": %s is empty; name the source table's %s",
                              st->namespace, st->name,
                              st->namespace[0] ? "\"stream_name\"" : "the schema key",
                              st->namespace[0] ? "name" : "schema");
    if (st->cursor_field) {
        char *colon = strchr(st->cursor_field, ':');
        if (colon) {
            st->cursor_fallback = firn_strdup(colon + 1);
            *colon = '\0';
        }
    }
    if (st->selected && st->sync_mode == FIRN_SYNC_INCREMENTAL && !st->cursor_field)
        return firn__cfg_fail(ctx, err,
                              "stream \"%s.%s\": sync mode \"incremental\" needs \"cursor_field\"",
                              st->namespace, st->name);
    if (st->cursor_field && st->cursor_field[0] == '\0')
        return firn__cfg_fail(ctx, err, "stream \"%s.%s\": \"cursor_field\" is empty",
                              st->namespace, st->name);
    if (st->cursor_fallback && st->cursor_fallback[0] == '\0')
        return firn__cfg_fail(ctx, err,
                              "stream \"%s.%s\": \"cursor_field\" \"%s:\" names no fallback "
                              "column; write \"%s\" or \"%s:<column>\"",
                              st->namespace, st->name, st->cursor_field, st->cursor_field,
                              st->cursor_field);
    if (st->target_table && st->target_table[0] == '\0')
        return firn__cfg_fail(ctx, err,
                              "stream \"%s.%s\": \"target_table\" is empty; leave it out to "
                              "use the table's name",
                              st->namespace, st->name);
    if (st->target_namespace && st->target_namespace[0] == '\0')
        return firn__cfg_fail(ctx, err,
                              "stream \"%s.%s\": \"target_namespace\" is empty; leave it out "
                              "to use the destination's namespace",
                              st->namespace, st->name);
    const char *why = NULL, *key = NULL, *val = NULL;
    if (st->target_namespace && (why = firn__cfg_iceberg_name_problem(st->target_namespace, true)))
        key = "target_namespace", val = st->target_namespace;
    else if (st->target_table && (why = firn__cfg_iceberg_name_problem(st->target_table, false)))
        key = "target_table", val = st->target_table;
    else if ((why = firn__cfg_iceberg_name_problem(st->name, false)))
        key = "stream_name", val = st->name;
    if (why)
        return firn__cfg_fail(ctx, err, "stream \"%.64s\": \"%s\" \"%.64s%s\" %s", st->name, key,
                              val, strlen(val) > 64 ? "..." : "", why);
    return FIRN_OK;
}

firn_rc firn__cfg_streams_post(cfg_ctx *ctx, firn_streams_config *s, firn_err *err)
{
    /* Selections were appended as separate entries; fold each into its discovered entry. */
    for (size_t i = 0; i < s->count; i++) {
        firn_stream_config *sel = &s->items[i];
        if (!sel->selected)
            continue;
        for (size_t j = 0; j < s->count; j++) {
            firn_stream_config *other = &s->items[j];
            if (j == i || !same_stream(sel, other))
                continue;
            if (other->selected)
                return firn__cfg_fail(ctx, err, "stream \"%s.%s\" is selected twice",
                                      sel->namespace, sel->name);
            merge_into_selection(sel, other);
            /* the selection takes the discovered entry's place, keeping discover's order */
            firn_stream_config tmp = *other;
            *other = *sel;
            *sel = tmp;
            firn__cfg_stream_free(sel);
            memmove(sel, sel + 1, (s->count - i - 1) * sizeof(*sel));
            s->count--;
            i--;
            break;
        }
    }
    for (size_t i = 0; i < s->count; i++) {
        for (size_t j = i + 1; j < s->count; j++) {
            if (!s->items[i].selected && !s->items[j].selected &&
                same_stream(&s->items[i], &s->items[j]))
                return firn__cfg_fail(ctx, err, "stream \"%s.%s\" is listed twice in \"streams\"",
                                      s->items[i].namespace, s->items[i].name);
        }
        FIRN_TRY(check_stream(ctx, &s->items[i], err));
    }
    return FIRN_OK;
}

firn_stream_config *
firn_streams_find(const firn_streams_config *s, const char *namespace, const char *name)
{
    for (size_t i = 0; i < s->count; i++) {
        firn_stream_config *st = &s->items[i];
        if (st->namespace && strcmp(st->namespace, namespace) == 0 && strcmp(st->name, name) == 0)
            return st;
    }
    return NULL;
}

/* ------------------------------------------------------------------------------------------------
 * Writing
 * ----------------------------------------------------------------------------------------------*/

static json_t *strlist_json(const firn_strlist *l)
{
    json_t *a = json_array();
    for (size_t i = 0; i < l->count; i++)
        json_array_append_new(a, json_string(l->items[i]));
    return a;
}

static void set_str(json_t *o, const char *key, const char *value)
{
    if (value)
        json_object_set_new(o, key, json_string(value));
}

static json_t *partition_json(const firn_stream_config *st)
{
    json_t *a = json_array();
    char buf[300];
    for (size_t i = 0; i < st->partition_count; i++) {
        const firn_cfg_partition *f = &st->partition[i];
        if (f->transform == FIRN_CFG_TRANSFORM_IDENTITY)
            snprintf(buf, sizeof(buf), "%s", f->column);
        else if (f->param)
            snprintf(buf, sizeof(buf), "%s(%lld, %s)", firn_cfg_transform_name(f->transform),
                     (long long)f->param, f->column);
        else
            snprintf(buf, sizeof(buf), "%s(%s)", firn_cfg_transform_name(f->transform), f->column);
        json_array_append_new(a, json_string(buf));
    }
    return a;
}

static json_t *cursor_json(const firn_stream_config *st)
{
    char buf[300];
    if (!st->cursor_field)
        return NULL;
    if (st->cursor_fallback)
        snprintf(buf, sizeof(buf), "%s:%s", st->cursor_field, st->cursor_fallback);
    else
        snprintf(buf, sizeof(buf), "%s", st->cursor_field);
    return json_string(buf);
}

static json_t *selection_json(const firn_stream_config *st)
{
    if (st->selection) {
        /* The user's entry, options and spelling as they wrote them, plus what OLake's layout
         * keeps in the "streams" entry (which firn writes without it). */
        json_error_t jerr;
        json_t *kept = json_loads(st->selection, 0, &jerr);
        if (json_is_object(kept)) {
            if (!json_object_get(kept, "sync_mode") && st->sync_mode)
                json_object_set_new(kept, "sync_mode",
                                    json_string(firn_sync_mode_name(st->sync_mode)));
            if (!json_object_get(kept, "cursor_field") && st->cursor_field)
                json_object_set_new(kept, "cursor_field", cursor_json(st));
            if (!json_object_get(kept, "target_table") &&
                !json_object_get(kept, "destination_table") && st->target_table &&
                strcmp(st->target_table, st->name) != 0)
                json_object_set_new(kept, "target_table", json_string(st->target_table));
            return kept;
        }
        json_decref(kept);
    }
    json_t *o = json_object();
    json_object_set_new(o, "stream_name", json_string(st->name));
    if (st->sync_mode)
        json_object_set_new(o, "sync_mode", json_string(firn_sync_mode_name(st->sync_mode)));
    if (st->cursor_field)
        json_object_set_new(o, "cursor_field", cursor_json(st));
    if (st->primary_key.count)
        json_object_set_new(o, "primary_key", strlist_json(&st->primary_key));
    json_object_set_new(o, "append_mode", json_boolean(st->append_mode));
    if (st->soft_delete)
        json_object_set_new(o, "soft_delete", json_true());
    if (st->columns.count)
        json_object_set_new(o, "columns", strlist_json(&st->columns));
    if (!st->sync_new_columns)
        json_object_set_new(o, "sync_new_columns", json_false());
    if (st->partition_count)
        json_object_set_new(o, "partition", partition_json(st));
    set_str(o, "target_namespace", st->target_namespace);
    set_str(o, "target_table", st->target_table);
    set_str(o, "filter", st->filter);
    if (st->commit.interval_ms || st->commit.max_bytes) {
        json_t *c = json_object();
        if (st->commit.interval_ms)
            json_object_set_new(c, "interval_seconds",
                                json_real((double)st->commit.interval_ms / 1000.0));
        if (st->commit.max_bytes)
            json_object_set_new(c, "max_bytes", json_integer((json_int_t)st->commit.max_bytes));
        json_object_set_new(o, "commit", c);
    }
    return o;
}

static json_t *discovered_json(const firn_stream_config *st)
{
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(st->name));
    json_object_set_new(o, "namespace", json_string(st->namespace ? st->namespace : ""));
    if (st->type_schema) {
        json_error_t jerr;
        json_t *ts = json_loads(st->type_schema, JSON_DECODE_ANY, &jerr);
        if (ts)
            json_object_set_new(o, "type_schema", ts);
    }
    json_object_set_new(o, "supported_sync_modes", strlist_json(&st->supported_sync_modes));
    json_object_set_new(o, "source_defined_primary_key", strlist_json(&st->source_primary_key));
    json_object_set_new(o, "available_cursor_fields", strlist_json(&st->available_cursor_fields));
    if (st->notes.count)
        json_object_set_new(o, "notes", strlist_json(&st->notes));
    if (st->sync_mode)
        json_object_set_new(o, "sync_mode", json_string(firn_sync_mode_olake_name(st->sync_mode)));
    json_t *wrap = json_object();
    json_object_set_new(wrap, "stream", o);
    return wrap;
}

firn_rc firn_streams_save(const firn_streams_config *s, const char *path, firn_err *err)
{
    json_t *root = json_object();
    json_t *selected = json_object();
    json_t *streams = json_array();
    for (size_t i = 0; i < s->count; i++) {
        const firn_stream_config *st = &s->items[i];
        const char *ns = st->namespace ? st->namespace : "";
        if (st->selected) {
            json_t *list = json_object_get(selected, ns);
            if (!list) {
                list = json_array();
                json_object_set_new(selected, ns, list);
            }
            json_array_append_new(list, selection_json(st));
        }
        json_array_append_new(streams, discovered_json(st));
    }
    json_object_set_new(root, "selected_streams", selected);
    json_object_set_new(root, "streams", streams);
    char *text = firn__cfg_json_text(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text)
        return firn_err_set(err, FIRN_ERR_INTERNAL, "could not encode streams file \"%s\"", path);
    firn_rc rc = firn__cfg_write_atomic(path, text, strlen(text), err);
    firn_free(text);
    return rc;
}
