/* SPDX-License-Identifier: Apache-2.0 */
/* JSON plumbing for the metadata codecs: loading and dumping through jansson into bounded
 * buffers, checked member readers, and the ordered string map used for properties. */
#include "ice_meta_int.h"

#include <string.h>

/* ------------------------------------------------------------------------------------------------
 * Ordered string maps
 * ----------------------------------------------------------------------------------------------*/

void firn_props_init(firn_props *p)
{
    memset(p, 0, sizeof(*p));
}

void firn_props_deinit(firn_props *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++) {
        firn_free(p->keys[i]);
        firn_free(p->vals[i]);
    }
    firn_free(p->keys);
    firn_free(p->vals);
    memset(p, 0, sizeof(*p));
}

static ptrdiff_t props_find(const firn_props *p, const char *key)
{
    for (size_t i = 0; i < p->n; i++) {
        if (strcmp(p->keys[i], key) == 0)
            return (ptrdiff_t)i;
    }
    return -1;
}

void firn_props_set(firn_props *p, const char *key, const char *val)
{
    ptrdiff_t i = props_find(p, key);
    if (i >= 0) {
        char *copy = firn_strdup(val);
        firn_free(p->vals[i]);
        p->vals[i] = copy;
        return;
    }
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 8;
        p->keys = firn_reallocarray(p->keys, p->cap, sizeof(*p->keys));
        p->vals = firn_reallocarray(p->vals, p->cap, sizeof(*p->vals));
    }
    p->keys[p->n] = firn_strdup(key);
    p->vals[p->n] = firn_strdup(val);
    p->n++;
}

const char *firn_props_get(const firn_props *p, const char *key)
{
    ptrdiff_t i = props_find(p, key);
    return i >= 0 ? p->vals[i] : NULL;
}

bool firn_props_remove(firn_props *p, const char *key)
{
    ptrdiff_t i = props_find(p, key);
    if (i < 0)
        return false;
    firn_free(p->keys[i]);
    firn_free(p->vals[i]);
    size_t rest = p->n - (size_t)i - 1;
    memmove(&p->keys[i], &p->keys[i + 1], rest * sizeof(*p->keys));
    memmove(&p->vals[i], &p->vals[i + 1], rest * sizeof(*p->vals));
    p->n--;
    return true;
}

void firn_props_copy(firn_props *dst, const firn_props *src)
{
    firn_props_init(dst);
    for (size_t i = 0; i < src->n; i++)
        firn_props_set(dst, src->keys[i], src->vals[i]);
}

bool firn_props_equal(const firn_props *a, const firn_props *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++) {
        const char *v = firn_props_get(b, a->keys[i]);
        if (!v || strcmp(v, a->vals[i]) != 0)
            return false;
    }
    return true;
}

firn_rc firn__ice_props_from_jv(const json_t *obj, firn_props *props, firn_err *err)
{
    if (!json_is_object(obj))
        return firn_err_set(err, FIRN_ERR_PARSE, "expected a JSON object of strings");
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)obj, key, val)
    {
        if (!json_is_string(val))
            return firn_err_set(err, FIRN_ERR_PARSE, "value of \"%s\" is not a string", key);
        firn_props_set(props, key, json_string_value(val));
    }
    return FIRN_OK;
}

json_t *firn__ice_props_to_jv(const firn_props *props)
{
    json_t *obj = json_object();
    for (size_t i = 0; i < props->n; i++)
        json_object_set_new(obj, props->keys[i], json_string(props->vals[i]));
    return obj;
}

/* ------------------------------------------------------------------------------------------------
 * Loading and dumping
 * ----------------------------------------------------------------------------------------------*/

firn_rc firn__ice_json_load(const char *json, size_t len, json_t **out, firn_err *err)
{
    json_error_t jerr;
    *out = NULL;
    if (len > FIRN__ICE_JSON_MAX)
        return firn_err_set(err, FIRN_ERR_TOO_LARGE, "JSON document of %zu bytes is too large",
                            len);
    json_t *v = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!v)
        return firn_err_set(err, FIRN_ERR_PARSE, "invalid JSON at line %d column %d: %s", jerr.line,
                            jerr.column, jerr.text);
    *out = v;
    return FIRN_OK;
}

typedef struct dump_ctx {
    firn_buf *out;
    firn_rc rc;
} dump_ctx;

static int dump_cb(const char *p, size_t len, void *data)
{
    dump_ctx *ctx = data;
    ctx->rc = firn_buf_append(ctx->out, p, len);
    return ctx->rc ? -1 : 0;
}

firn_rc firn__ice_json_dump(const json_t *v, firn_buf *out, firn_err *err)
{
    dump_ctx ctx = {out, FIRN_OK};
    size_t start = out->len;
    if (json_dump_callback(v, dump_cb, &ctx, JSON_COMPACT | JSON_ENCODE_ANY) != 0) {
        firn_buf_truncate(out, start);
        return firn_err_set(err, ctx.rc ? ctx.rc : FIRN_ERR_INTERNAL,
                            "could not serialize JSON document");
    }
    return FIRN_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Member readers
 * ----------------------------------------------------------------------------------------------*/

static firn_rc
member(const json_t *obj, const char *key, bool required, const json_t **out, firn_err *err)
{
    *out = NULL;
    if (!json_is_object(obj))
        return firn_err_set(err, FIRN_ERR_PARSE, "expected a JSON object holding \"%s\"", key);
    const json_t *v = json_object_get(obj, key);
    if (v && json_is_null(v))
        v = NULL;
    if (!v && required)
        return firn_err_set(err, FIRN_ERR_PARSE, "missing member \"%s\"", key);
    *out = v;
    return FIRN_OK;
}

firn_rc firn__ice_get_i64(
    const json_t *obj, const char *key, bool required, int64_t dflt, int64_t *out, firn_err *err)
{
    const json_t *v;
    FIRN_TRY(member(obj, key, required, &v, err));
    if (!v) {
        *out = dflt;
        return FIRN_OK;
    }
    if (!json_is_integer(v))
        return firn_err_set(err, FIRN_ERR_PARSE, "member \"%s\" is not an integer", key);
    *out = (int64_t)json_integer_value(v);
    return FIRN_OK;
}

firn_rc firn__ice_get_i32(
    const json_t *obj, const char *key, bool required, int32_t dflt, int32_t *out, firn_err *err)
{
    int64_t v = 0;
    FIRN_TRY(firn__ice_get_i64(obj, key, required, dflt, &v, err));
    if (v < INT32_MIN || v > INT32_MAX)
        return firn_err_set(err, FIRN_ERR_PARSE, "member \"%s\" is out of range: %lld", key,
                            (long long)v);
    *out = (int32_t)v;
    return FIRN_OK;
}

firn_rc firn__ice_get_bool(
    const json_t *obj, const char *key, bool required, bool dflt, bool *out, firn_err *err)
{
    const json_t *v;
    FIRN_TRY(member(obj, key, required, &v, err));
    if (!v) {
        *out = dflt;
        return FIRN_OK;
    }
    if (!json_is_boolean(v))
        return firn_err_set(err, FIRN_ERR_PARSE, "member \"%s\" is not a boolean", key);
    *out = json_is_true(v);
    return FIRN_OK;
}

firn_rc firn__ice_get_str(
    const json_t *obj, const char *key, bool required, const char **out, firn_err *err)
{
    const json_t *v;
    FIRN_TRY(member(obj, key, required, &v, err));
    *out = NULL;
    if (!v)
        return FIRN_OK;
    if (!json_is_string(v))
        return firn_err_set(err, FIRN_ERR_PARSE, "member \"%s\" is not a string", key);
    if (strlen(json_string_value(v)) != json_string_length(v))
        return firn_err_set(err, FIRN_ERR_PARSE, "member \"%s\" contains a NUL character", key);
    *out = json_string_value(v);
    return FIRN_OK;
}

firn_rc firn__ice_get_array(
    const json_t *obj, const char *key, bool required, const json_t **out, firn_err *err)
{
    FIRN_TRY(member(obj, key, required, out, err));
    if (*out && !json_is_array(*out))
        return firn_err_set(err, FIRN_ERR_PARSE, "member \"%s\" is not an array", key);
    return FIRN_OK;
}

bool firn__ice_uuid_valid(const char *s)
{
    if (strlen(s) != 36)
        return false;
    for (size_t i = 0; i < 36; i++) {
        char c = s[i];
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? c != '-'
                 : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
            return false;
    }
    return true;
}
