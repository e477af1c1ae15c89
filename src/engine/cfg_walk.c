/* SPDX-License-Identifier: Apache-2.0 */
/* Validates a JSON document against the configuration tables and stores each value in the C
 * struct: unknown keys (with a "did you mean"), types, ranges, required keys, alias conflicts and
 * ${VAR} substitution. Every error is one line naming the file and the key path, never a
 * secret's value. */
#include "cfg_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

firn_rc firn__cfg_fail(cfg_ctx *ctx, firn_err *err, const char *fmt, ...)
{
    char msg[FIRN_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return firn_err_set(err, FIRN_ERR_CONFIG, "%s: %s", ctx->file, msg);
}

void firn__cfg_warn(cfg_ctx *ctx, const char *fmt, ...)
{
    char line[FIRN_ERR_MSG_MAX + 128]; /* one buffer: stack buffers stay about 1 KiB */
    int n = snprintf(line, sizeof(line), "%s: ", ctx->file);
    if (n < 0)
        n = 0;
    else if ((size_t)n >= sizeof(line))
        n = (int)sizeof(line) - 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    if (ctx->cfg)
        firn_strlist_push(&ctx->cfg->warnings, line);
}

size_t firn__cfg_path_push(cfg_ctx *ctx, const char *key)
{
    size_t old = ctx->path_len;
    int n = snprintf(ctx->path + old, sizeof(ctx->path) - old, "%s%s", old ? "." : "", key);
    if (n > 0)
        ctx->path_len =
            old + (size_t)n < sizeof(ctx->path) ? old + (size_t)n : sizeof(ctx->path) - 1;
    return old;
}

size_t firn__cfg_path_index(cfg_ctx *ctx, size_t i)
{
    size_t old = ctx->path_len;
    int n = snprintf(ctx->path + old, sizeof(ctx->path) - old, "[%zu]", i);
    if (n > 0)
        ctx->path_len =
            old + (size_t)n < sizeof(ctx->path) ? old + (size_t)n : sizeof(ctx->path) - 1;
    return old;
}

void firn__cfg_path_pop(cfg_ctx *ctx, size_t len)
{
    ctx->path_len = len;
    ctx->path[len] = '\0';
}

const char *firn__cfg_path(const cfg_ctx *ctx)
{
    return ctx->path_len ? ctx->path : "(top level)";
}

bool firn__cfg_was_set(const cfg_ctx *ctx, const void *addr)
{
    for (size_t i = 0; i < ctx->n_seen; i++) {
        if (ctx->seen[i].addr == addr)
            return true;
    }
    return false;
}

void firn__cfg_seen_truncate(cfg_ctx *ctx, size_t n)
{
    while (ctx->n_seen > n)
        firn_free(ctx->seen[--ctx->n_seen].path);
}

void firn__cfg_ctx_deinit(cfg_ctx *ctx)
{
    for (size_t i = 0; i < ctx->n_seen; i++)
        firn_free(ctx->seen[i].path);
    firn_free(ctx->seen);
    ctx->seen = NULL;
    ctx->n_seen = ctx->cap_seen = 0;
}

/* Optimal string alignment distance: insertions, deletions, substitutions and transpositions of
 * adjacent characters ("mdoe" -> "mode" is 1). */
size_t firn__cfg_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 32 || lb > 32)
        return 16;
    size_t buf[3][33];
    size_t *older = buf[0], *prev = buf[1], *cur = buf[2];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            size_t best = prev[j - 1] + cost;
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                older[j - 2] + 1 < best)
                best = older[j - 2] + 1;
            cur[j] = best;
        }
        size_t *t = older;
        older = prev;
        prev = cur;
        cur = t;
    }
    return prev[lb] < 16 ? prev[lb] : 16;
}

/* The "}" closing the "${" whose text starts at p, skipping nested "${...}" and "$$"; NULL when
 * there is none. */
static const char *closing_brace(const char *p)
{
    int depth = 1;
    for (; *p; p++) {
        if (p[0] == '$' && (p[1] == '$' || p[1] == '{')) {
            depth += p[1] == '{';
            p++;
        } else if (*p == '}' && --depth == 0) {
            return p;
        }
    }
    return NULL;
}

static bool env_name_ok(const char *p, size_t len)
{
    if (len == 0 || len >= 128 || (p[0] >= '0' && p[0] <= '9'))
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9')))
            return false;
    }
    return true;
}

/* One "${NAME}" or "${NAME:-default}" starting at d (d[0..1] == "${"): appends its value to b
 * and sets *next past it. The default may itself hold ${...} (expanded only when used). */
static firn_rc
expand_ref(cfg_ctx *ctx, const char *d, firn_buf *b, const char **next, firn_err *err)
{
    const char *close = closing_brace(d + 2);
    if (!close)
        return firn__cfg_fail(ctx, err, "\"%s\": unterminated \"${\" in value",
                              firn__cfg_path(ctx));
    const char *name_end = d + 2 + strcspn(d + 2, ":}");
    bool has_default = name_end < close && name_end[0] == ':' && name_end[1] == '-';
    bool bad_name =
        (!has_default && name_end != close) || !env_name_ok(d + 2, (size_t)(name_end - (d + 2)));
    if (bad_name && ctx->secret)
        return firn__cfg_fail(ctx, err,
                              "\"%s\": bad variable name in \"${...}\" (not shown: the value is "
                              "a secret; write ${NAME} or ${NAME:-default}, and $$ for a literal "
                              "\"$\")",
                              firn__cfg_path(ctx));
    if (bad_name)
        return firn__cfg_fail(ctx, err,
                              "\"%s\": bad variable name \"%.*s\" in \"${...}\" (write ${NAME} "
                              "or ${NAME:-default}; a name has letters, digits and \"_\")",
                              firn__cfg_path(ctx),
                              (int)(name_end - (d + 2) < 64 ? name_end - (d + 2) : 64), d + 2);
    char name[128];
    memcpy(name, d + 2, (size_t)(name_end - (d + 2)));
    name[name_end - (d + 2)] = '\0';
    *next = close + 1;
    const char *val = getenv(name);
    if (val)
        return firn_buf_append_cstr(b, val);
    if (!has_default)
        return firn__cfg_fail(ctx, err, "\"%s\": environment variable \"%s\" is not set",
                              firn__cfg_path(ctx), name);
    char *def = firn_strndup(name_end + 2, (size_t)(close - (name_end + 2)));
    char *sub = NULL;
    firn_rc rc = firn__cfg_expand(ctx, def, &sub, err);
    if (rc == FIRN_OK)
        rc = firn_buf_append_cstr(b, sub);
    firn_free(sub);
    firn_free(def);
    return rc;
}

/* ${VAR} and ${VAR:-default} (the default may hold ${...} itself); "$$" is a literal "$". */
firn_rc firn__cfg_expand(cfg_ctx *ctx, const char *text, char **out, firn_err *err)
{
    firn_buf b;
    firn_buf_init(&b, 1u << 20);
    firn_rc rc = FIRN_OK;
    const char *p = text;
    while (*p) {
        const char *d = strchr(p, '$');
        if (!d) {
            rc = firn_buf_append_cstr(&b, p);
            break;
        }
        rc = firn_buf_append(&b, p, (size_t)(d - p));
        if (rc)
            break;
        if (d[1] == '$') {
            rc = firn_buf_append(&b, "$", 1);
            p = d + 2;
        } else if (d[1] == '{') {
            rc = expand_ref(ctx, d, &b, &p, err);
        } else {
            rc = firn_buf_append(&b, "$", 1);
            p = d + 1;
        }
        if (rc)
            break;
    }
    if (rc) {
        if (rc == FIRN_ERR_TOO_LARGE)
            rc = firn__cfg_fail(ctx, err, "\"%s\": value too long", firn__cfg_path(ctx));
        firn_buf_deinit(&b);
        return rc;
    }
    *out = (char *)firn_buf_take(&b, NULL);
    return FIRN_OK;
}

static int dump_to_buf(const char *text, size_t len, void *data)
{
    return firn_buf_append(data, text, len) ? -1 : 0;
}

char *firn__cfg_json_text(const json_t *v, size_t flags)
{
    firn_buf b;
    firn_buf_init(&b, 256u << 20);
    if (json_dump_callback(v, dump_to_buf, &b, flags) != 0) {
        firn_buf_deinit(&b);
        return NULL;
    }
    return (char *)firn_buf_take(&b, NULL);
}

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "a value";
}

static firn_rc type_error(cfg_ctx *ctx, const json_t *v, const char *want, firn_err *err)
{
    return firn__cfg_fail(ctx, err, "\"%s\" must be %s, got %s", firn__cfg_path(ctx), want,
                          json_kind(v));
}

/* Records that the value at addr was set by the current path; two keys setting one value (an
 * OLake alias and the firn key) is an error. */
firn_rc firn__cfg_mark_seen(cfg_ctx *ctx, const void *addr, firn_err *err)
{
    for (size_t i = 0; i < ctx->n_seen; i++) {
        if (ctx->seen[i].addr == addr)
            return firn__cfg_fail(ctx, err, "\"%s\" and \"%s\" set the same option; keep one",
                                  ctx->seen[i].path, firn__cfg_path(ctx));
    }
    if (ctx->n_seen == ctx->cap_seen) {
        ctx->cap_seen = ctx->cap_seen ? ctx->cap_seen * 2 : 16;
        ctx->seen = firn_reallocarray(ctx->seen, ctx->cap_seen, sizeof(*ctx->seen));
    }
    ctx->seen[ctx->n_seen].addr = addr;
    ctx->seen[ctx->n_seen].path = firn_strdup(firn__cfg_path(ctx));
    ctx->n_seen++;
    return FIRN_OK;
}

/* A scalar given as a string holding ${VAR}: expanded text to parse, or NULL when v is not such
 * a string. */
static firn_rc env_scalar(cfg_ctx *ctx, const json_t *v, char **out, firn_err *err)
{
    *out = NULL;
    if (!json_is_string(v) || !strstr(json_string_value(v), "${"))
        return FIRN_OK;
    return firn__cfg_expand(ctx, json_string_value(v), out, err);
}

static firn_rc
bind_string(cfg_ctx *ctx, const cfg_node *node, const json_t *v, void *at, firn_err *err)
{
    if (!json_is_string(v))
        return type_error(ctx, v, "a string", err);
    char *s = NULL;
    ctx->secret = node->type == CFG_SECRET;
    firn_rc rc = firn__cfg_expand(ctx, json_string_value(v), &s, err);
    ctx->secret = false;
    FIRN_TRY(rc);
    if (node->type == CFG_SECRET) /* kept out of every message and log line from here on */
        firn_secret_register_config(s);
    char **slot = at;
    firn_free(*slot);
    *slot = s;
    return FIRN_OK;
}

static firn_rc
bind_int(cfg_ctx *ctx, const cfg_node *node, const json_t *v, void *at, firn_err *err)
{
    int64_t val = 0;
    char *text = NULL;
    FIRN_TRY(env_scalar(ctx, v, &text, err));
    if (text) {
        firn_err perr = {0};
        firn_rc rc = firn_parse_i64(text, strlen(text), &val, &perr);
        firn_free(text);
        if (rc)
            return firn__cfg_fail(ctx, err, "\"%s\" must be an integer (from the environment)",
                                  firn__cfg_path(ctx));
    } else if (json_is_integer(v)) {
        val = (int64_t)json_integer_value(v);
    } else {
        return type_error(ctx, v, "an integer", err);
    }
    if (val < node->min || val > node->max)
        return firn__cfg_fail(ctx, err, "\"%s\" must be between %lld and %lld, got %lld",
                              firn__cfg_path(ctx), (long long)node->min, (long long)node->max,
                              (long long)val);
    *(int64_t *)at = val;
    return FIRN_OK;
}

static firn_rc
bind_bool(cfg_ctx *ctx, const cfg_node *node, const json_t *v, void *at, firn_err *err)
{
    bool val = false;
    char *text = NULL;
    FIRN_TRY(env_scalar(ctx, v, &text, err));
    if (text) {
        bool ok = strcmp(text, "true") == 0 || strcmp(text, "false") == 0;
        val = strcmp(text, "true") == 0;
        firn_free(text);
        if (!ok)
            return firn__cfg_fail(ctx, err, "\"%s\" must be true or false (from the environment)",
                                  firn__cfg_path(ctx));
    } else if (json_is_boolean(v)) {
        val = json_is_true(v);
    } else {
        return type_error(ctx, v, "true or false", err);
    }
    *(bool *)at = node->type == CFG_NOT_BOOL ? !val : val;
    return FIRN_OK;
}

static void enum_list(const cfg_enum_value *values, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (const cfg_enum_value *e = values; e->name && len < cap; e++) {
        if (e->unsupported)
            continue;
        int n = snprintf(out + len, cap - len, "%s\"%s\"", len ? ", " : "", e->name);
        if (n < 0)
            break;
        len += (size_t)n;
    }
}

static firn_rc
lookup_enum(cfg_ctx *ctx, const cfg_node *node, const char *s, int *out, firn_err *err)
{
    for (const cfg_enum_value *e = node->values; e->name; e++) {
        if (strcmp(e->name, s) != 0)
            continue;
        if (e->unsupported)
            return firn__cfg_fail(ctx, err, "\"%s\": \"%s\" is not supported: %s",
                                  firn__cfg_path(ctx), s, e->unsupported);
        *out = e->value;
        return FIRN_OK;
    }
    char list[160];
    enum_list(node->values, list, sizeof(list));
    return firn__cfg_fail(ctx, err, "\"%s\" must be one of %s; got \"%.40s\"", firn__cfg_path(ctx),
                          list, s);
}

static firn_rc
bind_enum(cfg_ctx *ctx, const cfg_node *node, const json_t *v, void *at, firn_err *err)
{
    if (!json_is_string(v))
        return type_error(ctx, v, "a string", err);
    char *s = NULL;
    FIRN_TRY(firn__cfg_expand(ctx, json_string_value(v), &s, err));
    int val = 0;
    firn_rc rc = lookup_enum(ctx, node, s, &val, err);
    firn_free(s);
    if (rc == FIRN_OK)
        *(int *)at = val;
    return rc;
}

static firn_rc
bind_flags(cfg_ctx *ctx, const cfg_node *node, const json_t *v, void *at, firn_err *err)
{
    if (!json_is_array(v))
        return type_error(ctx, v, "an array of strings", err);
    uint32_t bits = 0;
    size_t i;
    const json_t *item;
    json_array_foreach(v, i, item)
    {
        size_t old = firn__cfg_path_index(ctx, i);
        int val = 0;
        firn_rc rc = bind_enum(ctx, node, item, &val, err);
        firn__cfg_path_pop(ctx, old);
        if (rc)
            return rc;
        bits |= (uint32_t)val;
    }
    *(uint32_t *)at = bits;
    return FIRN_OK;
}

static firn_rc bind_size(cfg_ctx *ctx, const json_t *v, void *at, firn_err *err)
{
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0)
            return firn__cfg_fail(ctx, err, "\"%s\" must not be negative", firn__cfg_path(ctx));
        *(uint64_t *)at = (uint64_t)json_integer_value(v);
        return FIRN_OK;
    }
    if (!json_is_string(v))
        return type_error(ctx, v, "a size (bytes, or text such as \"64MiB\")", err);
    char *s = NULL;
    FIRN_TRY(firn__cfg_expand(ctx, json_string_value(v), &s, err));
    firn_err perr = {0};
    firn_rc rc = firn_size_parse(s, (uint64_t *)at, &perr);
    firn_free(s);
    if (rc)
        return firn__cfg_fail(ctx, err, "\"%s\" must be a size such as 1048576 or \"64MiB\"",
                              firn__cfg_path(ctx));
    return FIRN_OK;
}

static firn_rc
bind_seconds(cfg_ctx *ctx, const cfg_node *node, const json_t *v, void *at, firn_err *err)
{
    double sec = 0;
    char *text = NULL;
    FIRN_TRY(env_scalar(ctx, v, &text, err));
    if (text) {
        firn_err perr = {0};
        firn_rc rc = firn_parse_double(text, strlen(text), &sec, &perr);
        firn_free(text);
        if (rc)
            return firn__cfg_fail(ctx, err, "\"%s\" must be a number (from the environment)",
                                  firn__cfg_path(ctx));
    } else if (json_is_number(v)) {
        sec = json_number_value(v);
    } else {
        return type_error(ctx, v, "a number of seconds", err);
    }
    if (!(sec >= (double)node->min && sec <= (double)node->max))
        return firn__cfg_fail(ctx, err, "\"%s\" must be between %lld and %lld seconds",
                              firn__cfg_path(ctx), (long long)node->min, (long long)node->max);
    *(int64_t *)at = (int64_t)(sec * 1000.0 + 0.5);
    return FIRN_OK;
}

static firn_rc bind_strlist(cfg_ctx *ctx, const json_t *v, void *at, firn_err *err)
{
    if (!json_is_array(v))
        return type_error(ctx, v, "an array of strings", err);
    firn_strlist *l = at;
    firn_strlist_clear(l);
    size_t i;
    const json_t *item;
    json_array_foreach(v, i, item)
    {
        size_t old = firn__cfg_path_index(ctx, i);
        char *s = NULL;
        firn_rc rc = json_is_string(item) ? firn__cfg_expand(ctx, json_string_value(item), &s, err)
                                          : type_error(ctx, item, "a string", err);
        firn__cfg_path_pop(ctx, old);
        if (rc)
            return rc;
        firn_strlist_push(l, s);
        firn_free(s);
    }
    return FIRN_OK;
}

static firn_rc bind_kvmap(cfg_ctx *ctx, const json_t *v, void *at, firn_err *err)
{
    if (!json_is_object(v))
        return type_error(ctx, v, "an object", err);
    firn_kvlist *l = at;
    firn__cfg_kvlist_clear(l);
    const char *key;
    const json_t *item;
    json_object_foreach((json_t *)v, key, item)
    {
        size_t old = firn__cfg_path_push(ctx, key);
        char *s = NULL;
        char num[64];
        firn_rc rc = FIRN_OK;
        if (json_is_string(item)) {
            rc = firn__cfg_expand(ctx, json_string_value(item), &s, err);
        } else if (json_is_integer(item)) {
            snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(item));
            s = firn_strdup(num);
        } else if (json_is_real(item)) {
            snprintf(num, sizeof(num), "%.17g", json_real_value(item));
            s = firn_strdup(num);
        } else if (json_is_boolean(item)) {
            s = firn_strdup(json_is_true(item) ? "true" : "false");
        } else {
            rc = type_error(ctx, item, "a string, number or boolean", err);
        }
        firn__cfg_path_pop(ctx, old);
        if (rc)
            return rc;
        firn__cfg_kvlist_push(l, key, s);
        firn_free(s);
    }
    return FIRN_OK;
}

static firn_rc bind_raw(const json_t *v, void *at)
{
    char **slot = at;
    firn_free(*slot);
    char *text = firn__cfg_json_text(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
    *slot = text ? text : firn_strdup("null");
    return FIRN_OK;
}

static const cfg_prop *find_prop(const cfg_node *node, const char *key)
{
    for (const cfg_prop *p = node->props; p && p->name; p++) {
        if (strcmp(p->name, key) == 0)
            return p;
    }
    return NULL;
}

static firn_rc unknown_key(cfg_ctx *ctx, const cfg_node *node, const char *key, firn_err *err)
{
    const char *best = NULL;
    size_t best_d = 3;
    for (const cfg_prop *p = node->props; p && p->name; p++) {
        size_t d = firn__cfg_edit_distance(key, p->name);
        if (d < best_d && d * 3 <= strlen(p->name) + 1) {
            best = p->name;
            best_d = d;
        }
    }
    size_t old = firn__cfg_path_push(ctx, key);
    firn_rc rc;
    if (best)
        rc = firn__cfg_fail(ctx, err, "unknown key \"%s\" (did you mean \"%s\"?)",
                            firn__cfg_path(ctx), best);
    else
        rc = firn__cfg_fail(ctx, err, "unknown key \"%s\"", firn__cfg_path(ctx));
    firn__cfg_path_pop(ctx, old);
    return rc;
}

static firn_rc check_required(cfg_ctx *ctx, const cfg_node *node, const json_t *v, firn_err *err)
{
    char names[160];
    size_t len = 0, missing = 0;
    names[0] = '\0';
    for (const cfg_prop *p = node->props; p && p->name; p++) {
        if (!(p->flags & CFG_REQUIRED) || json_object_get(v, p->name))
            continue;
        size_t old = firn__cfg_path_push(ctx, p->name);
        int n =
            snprintf(names + len, sizeof(names) - len, "%s\"%s\"", missing ? ", " : "", ctx->path);
        firn__cfg_path_pop(ctx, old);
        if (n > 0 && len + (size_t)n < sizeof(names))
            len += (size_t)n;
        missing++;
    }
    if (missing == 0)
        return FIRN_OK;
    return firn__cfg_fail(ctx, err, "missing required key%s %s", missing > 1 ? "s" : "", names);
}

static firn_rc
walk_object(cfg_ctx *ctx, const cfg_node *node, const json_t *v, void *base, firn_err *err)
{
    if (!json_is_object(v))
        return type_error(ctx, v, "an object", err);
    const char *key;
    const json_t *item;
    json_object_foreach((json_t *)v, key, item)
    {
        const cfg_prop *p = find_prop(node, key);
        if (!p && node->extra) {
            size_t old = firn__cfg_path_push(ctx, key);
            firn_rc rc = node->extra(ctx, key, item, base, err);
            firn__cfg_path_pop(ctx, old);
            FIRN_TRY(rc);
            continue;
        }
        if (!p)
            return unknown_key(ctx, node, key, err);
        size_t old = firn__cfg_path_push(ctx, key);
        firn_rc rc = firn__cfg_walk(ctx, p->node, item, (char *)base + p->off, err);
        firn__cfg_path_pop(ctx, old);
        FIRN_TRY(rc);
    }
    return check_required(ctx, node, v, err);
}

firn_rc firn__cfg_walk(cfg_ctx *ctx, const cfg_node *node, const json_t *v, void *at, firn_err *err)
{
    if (json_is_null(v) && node->type != CFG_CUSTOM)
        return FIRN_OK; /* null leaves the default, as OLake's writers do */
    switch (node->type) {
    case CFG_OBJECT:
        /* props of nested objects are offsets from the same base: objects do not move it */
        return walk_object(ctx, node, v, (char *)at, err);
    case CFG_IGNORED:
        if (!node->quiet)
            firn__cfg_warn(ctx, "\"%s\" is accepted for OLake compatibility and ignored",
                           firn__cfg_path(ctx));
        return FIRN_OK;
    case CFG_CUSTOM:
        return node->bind(ctx, v, at, err);
    default:
        break;
    }
    FIRN_TRY(firn__cfg_mark_seen(ctx, at, err));
    switch (node->type) {
    case CFG_STRING:
    case CFG_SECRET:
        return bind_string(ctx, node, v, at, err);
    case CFG_INT:
        return bind_int(ctx, node, v, at, err);
    case CFG_BOOL:
    case CFG_NOT_BOOL:
        return bind_bool(ctx, node, v, at, err);
    case CFG_ENUM:
        return bind_enum(ctx, node, v, at, err);
    case CFG_FLAGS:
        return bind_flags(ctx, node, v, at, err);
    case CFG_SIZE:
        return bind_size(ctx, v, at, err);
    case CFG_SECONDS:
        return bind_seconds(ctx, node, v, at, err);
    case CFG_STRLIST:
        return bind_strlist(ctx, v, at, err);
    case CFG_KVMAP:
        return bind_kvmap(ctx, v, at, err);
    case CFG_RAW:
        return bind_raw(v, at);
    default:
        return firn_err_set(err, FIRN_ERR_INTERNAL, "bad configuration node type %d",
                            (int)node->type);
    }
}
