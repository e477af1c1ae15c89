/* SPDX-License-Identifier: Apache-2.0 */
/* Schema evolution (format/spec.md "Schema Evolution", ICEBERG.md §F): add optional columns
 * with new ids, allowed type promotions, required -> optional, dropped columns kept (and made
 * optional: they are null from then on). */
#include "ice_meta_int.h"

#include <stdio.h>
#include <string.h>

bool firn_type_can_promote(const firn_field *from, const firn_field *to)
{
    if (from->type == to->type) {
        if (from->type == FIRN_TYPE_DECIMAL)
            return from->scale == to->scale && to->precision >= from->precision;
        if (from->type == FIRN_TYPE_FIXED)
            return from->length == to->length;
        return true;
    }
    return (from->type == FIRN_TYPE_INT && to->type == FIRN_TYPE_LONG) ||
           (from->type == FIRN_TYPE_FLOAT && to->type == FIRN_TYPE_DOUBLE);
}

static bool is_nested(const firn_field *f)
{
    return f->type == FIRN_TYPE_STRUCT || f->type == FIRN_TYPE_LIST || f->type == FIRN_TYPE_MAP;
}

static void type_name(const firn_field *f, char *out, size_t cap)
{
    if (f->type == FIRN_TYPE_DECIMAL)
        snprintf(out, cap, "decimal(%d, %d)", f->precision, f->scale);
    else
        firn_type_format(f, out, cap);
}

static firn_rc
incompatible(const char *path, const firn_field *from, const firn_field *to, firn_err *err)
{
    char a[48], b[48];
    type_name(from, a, sizeof(a));
    type_name(to, b, sizeof(b));
    return firn_err_set(err, FIRN_ERR_SCHEMA,
                        "cannot change type of column \"%s\" from %s to %s: not an allowed "
                        "promotion",
                        path, a, b);
}

/* Copies t with new ids for it and every field below it, starting at *last + 1. */
static firn_field *with_new_ids(const firn_field *t, int32_t *last)
{
    firn_field *tmp = firn_field_new(0, "", FIRN_TYPE_STRUCT, true);
    firn_field_add(tmp, firn_field_clone(t));
    int32_t next = *last + 1;
    firn_field *fresh = firn__ice_fresh_ids(tmp, &next, NULL, NULL);
    firn_field_free(tmp);
    firn_field *f = fresh->children[0];
    fresh->n_children = 0;
    firn_field_free(fresh);
    *last = next - 1;
    return f;
}

typedef struct evolve_ctx {
    int32_t *last;
    bool changed;
    const firn_schema *base; /* for its identifier fields */
} evolve_ctx;

static bool is_identifier(const firn_schema *s, int32_t id)
{
    for (size_t i = 0; i < s->n_identifier_field_ids; i++) {
        if (s->identifier_field_ids[i] == id)
            return true;
    }
    return false;
}

static bool has_child_named(const firn_field *f, const char *name)
{
    for (size_t i = 0; i < f->n_children; i++) {
        if (strcmp(f->children[i]->name, name) == 0)
            return true;
    }
    return false;
}

static firn_rc
evolve_field(evolve_ctx *ctx, firn_field *e, const firn_field *t, const char *path, firn_err *err);

static firn_rc
evolve_struct(evolve_ctx *ctx, firn_field *e, const firn_field *t, const char *path, firn_err *err)
{
    for (size_t i = 0; i < t->n_children; i++) {
        const firn_field *tc = t->children[i];
        firn_field *ec = NULL;
        for (size_t j = 0; j < e->n_children && !ec; j++) {
            if (strcmp(e->children[j]->name, tc->name) == 0)
                ec = e->children[j];
        }
        char sub[256];
        snprintf(sub, sizeof(sub), "%s%s%s", path, path[0] ? "." : "", tc->name);
        if (!ec) {
            firn_field *added = with_new_ids(tc, ctx->last);
            added->required = false;
            firn_field_add(e, added);
            ctx->changed = true;
            continue;
        }
        FIRN_TRY(evolve_field(ctx, ec, tc, sub, err));
    }
    /* Kept fields the target lacks get nulls from now on: they cannot stay required. */
    for (size_t j = 0; j < e->n_children; j++) {
        firn_field *ec = e->children[j];
        if (ec->required && !has_child_named(t, ec->name) && !is_identifier(ctx->base, ec->id)) {
            ec->required = false;
            ctx->changed = true;
        }
    }
    return FIRN_OK;
}

static firn_rc
evolve_field(evolve_ctx *ctx, firn_field *e, const firn_field *t, const char *path, firn_err *err)
{
    if (e->required && !t->required) {
        e->required = false;
        ctx->changed = true;
    }
    if (is_nested(e) || is_nested(t)) {
        if (e->type != t->type)
            return incompatible(path, e, t, err);
        if (e->type == FIRN_TYPE_STRUCT)
            return evolve_struct(ctx, e, t, path, err);
        if (e->type == FIRN_TYPE_MAP) {
            firn_field *k = e->children[0];
            const firn_field *tk = t->children[0];
            if (is_nested(k) || is_nested(tk) || k->type != tk->type ||
                !firn_type_can_promote(k, tk) || !firn_type_can_promote(tk, k))
                return incompatible(path, k, tk, err);
        }
        return evolve_field(ctx, e->children[e->n_children - 1], t->children[t->n_children - 1],
                            path, err);
    }
    if (firn_type_can_promote(t, e) && firn_type_can_promote(e, t))
        return FIRN_OK;
    if (!firn_type_can_promote(e, t))
        return incompatible(path, e, t, err);
    e->type = t->type;
    e->precision = t->precision;
    e->scale = t->scale;
    e->length = t->length;
    ctx->changed = true;
    return FIRN_OK;
}

static firn_rc finish(firn_schema *s, firn_schema **out, firn_err *err)
{
    firn_rc rc = firn_schema_validate(s, err);
    if (rc) {
        firn_schema_free(s);
        return rc == FIRN_ERR_SCHEMA ? rc : firn_err_set(err, FIRN_ERR_SCHEMA, "invalid schema");
    }
    *out = s;
    return FIRN_OK;
}

firn_rc firn_schema_evolve(const firn_schema *base,
                           const firn_field *target,
                           int32_t *io_last_column_id,
                           firn_schema **out,
                           bool *out_changed,
                           firn_err *err)
{
    *out = NULL;
    *out_changed = false;
    if (target->type != FIRN_TYPE_STRUCT)
        return firn_err_set(err, FIRN_ERR_INVALID, "target schema is not a struct");
    int32_t last = *io_last_column_id;
    int32_t hi = firn_schema_highest_id(base);
    if (hi > last)
        last = hi;
    firn_schema *s = firn_schema_clone(base);
    s->schema_id = base->schema_id + 1;
    evolve_ctx ctx = {&last, false, base};
    firn_rc rc = evolve_struct(&ctx, s->root, target, "", err);
    if (rc) {
        firn_schema_free(s);
        return rc;
    }
    FIRN_TRY(finish(s, out, err));
    *io_last_column_id = last;
    *out_changed = ctx.changed;
    return FIRN_OK;
}

firn_rc firn_schema_add_column(const firn_schema *base,
                               const firn_field *field,
                               int32_t *io_last_column_id,
                               firn_schema **out,
                               firn_err *err)
{
    *out = NULL;
    if (firn_schema_find_name(base, field->name))
        return firn_err_set(err, FIRN_ERR_SCHEMA, "cannot add column \"%s\": it already exists",
                            field->name);
    if (field->required)
        return firn_err_set(err, FIRN_ERR_SCHEMA,
                            "cannot add required column \"%s\": existing rows have no value",
                            field->name);
    int32_t last = *io_last_column_id;
    int32_t hi = firn_schema_highest_id(base);
    if (hi > last)
        last = hi;
    firn_schema *s = firn_schema_clone(base);
    s->schema_id = base->schema_id + 1;
    firn_field_add(s->root, with_new_ids(field, &last));
    FIRN_TRY(finish(s, out, err));
    *io_last_column_id = last;
    return FIRN_OK;
}

static firn_field *find_mut(firn_field *f, int32_t id)
{
    for (size_t i = 0; i < f->n_children; i++) {
        if (f->children[i]->id == id)
            return f->children[i];
        firn_field *r = find_mut(f->children[i], id);
        if (r)
            return r;
    }
    return NULL;
}

firn_rc firn_schema_promote(const firn_schema *base,
                            int32_t field_id,
                            const firn_field *to,
                            firn_schema **out,
                            firn_err *err)
{
    *out = NULL;
    firn_schema *s = firn_schema_clone(base);
    s->schema_id = base->schema_id + 1;
    firn_field *f = find_mut(s->root, field_id);
    firn_rc rc = FIRN_OK;
    if (!f)
        rc = firn_err_set(err, FIRN_ERR_NOT_FOUND, "no field with id %d", field_id);
    else if (is_nested(f) || is_nested(to) || !firn_type_can_promote(f, to))
        rc = incompatible(f->name, f, to, err);
    if (rc) {
        firn_schema_free(s);
        return rc;
    }
    f->type = to->type;
    f->precision = to->precision;
    f->scale = to->scale;
    f->length = to->length;
    return finish(s, out, err);
}
