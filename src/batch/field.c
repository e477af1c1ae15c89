/* SPDX-License-Identifier: Apache-2.0 */
/* Schema fields: Iceberg types with field ids, built as an owned tree. */
#include "firn/batch.h"

#include <stdio.h>
#include <string.h>

firn_field *firn_field_new(int32_t id, const char *name, firn_type type, bool required)
{
    firn_field *f = firn_calloc(1, sizeof(*f));
    f->id = id;
    f->name = firn_strdup(name);
    f->type = type;
    f->required = required;
    return f;
}

firn_field *firn_field_new_decimal(
    int32_t id, const char *name, int32_t precision, int32_t scale, bool required)
{
    FIRN_ASSERT(precision >= 1 && precision <= 38 && scale >= 0 && scale <= precision);
    firn_field *f = firn_field_new(id, name, FIRN_TYPE_DECIMAL, required);
    f->precision = precision;
    f->scale = scale;
    return f;
}

firn_field *firn_field_new_fixed(int32_t id, const char *name, int32_t length, bool required)
{
    FIRN_ASSERT(length > 0);
    firn_field *f = firn_field_new(id, name, FIRN_TYPE_FIXED, required);
    f->length = length;
    return f;
}

void firn_field_add(firn_field *parent, firn_field *child)
{
    FIRN_ASSERT(parent->type == FIRN_TYPE_STRUCT ||
                (parent->type == FIRN_TYPE_LIST && parent->n_children < 1) ||
                (parent->type == FIRN_TYPE_MAP && parent->n_children < 2));
    parent->children =
        firn_reallocarray(parent->children, parent->n_children + 1, sizeof(*parent->children));
    parent->children[parent->n_children++] = child;
}

void firn_field_free(firn_field *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n_children; i++)
        firn_field_free(f->children[i]);
    firn_free(f->children);
    firn_free(f->name);
    firn_free(f);
}

firn_field *firn_field_clone(const firn_field *f)
{
    firn_field *c = firn_memdup(f, sizeof(*f));
    c->name = firn_strdup(f->name);
    c->children = NULL;
    c->n_children = 0;
    for (size_t i = 0; i < f->n_children; i++)
        firn_field_add(c, firn_field_clone(f->children[i]));
    return c;
}

size_t firn_type_value_size(const firn_field *f)
{
    switch (f->type) {
    case FIRN_TYPE_BOOLEAN:
        return 1;
    case FIRN_TYPE_INT:
    case FIRN_TYPE_DATE:
    case FIRN_TYPE_FLOAT:
        return 4;
    case FIRN_TYPE_LONG:
    case FIRN_TYPE_TIME:
    case FIRN_TYPE_TIMESTAMP:
    case FIRN_TYPE_TIMESTAMPTZ:
    case FIRN_TYPE_TIMESTAMP_NS:
    case FIRN_TYPE_TIMESTAMPTZ_NS:
    case FIRN_TYPE_DOUBLE:
        return 8;
    case FIRN_TYPE_DECIMAL:
        return f->precision <= 18 ? 8 : 16;
    case FIRN_TYPE_UUID:
        return 16;
    case FIRN_TYPE_FIXED:
        return (size_t)f->length;
    case FIRN_TYPE_STRING:
    case FIRN_TYPE_BINARY:
    case FIRN_TYPE_STRUCT:
    case FIRN_TYPE_LIST:
    case FIRN_TYPE_MAP:
        return 0;
    }
    return 0;
}

bool firn_type_is_fixed_width(const firn_field *f)
{
    return firn_type_value_size(f) > 0;
}

void firn_type_format(const firn_field *f, char *out, size_t out_cap)
{
    static const char *names[] = {
        [FIRN_TYPE_BOOLEAN] = "boolean",
        [FIRN_TYPE_INT] = "int",
        [FIRN_TYPE_LONG] = "long",
        [FIRN_TYPE_FLOAT] = "float",
        [FIRN_TYPE_DOUBLE] = "double",
        [FIRN_TYPE_DECIMAL] = "decimal",
        [FIRN_TYPE_DATE] = "date",
        [FIRN_TYPE_TIME] = "time",
        [FIRN_TYPE_TIMESTAMP] = "timestamp",
        [FIRN_TYPE_TIMESTAMPTZ] = "timestamptz",
        [FIRN_TYPE_TIMESTAMP_NS] = "timestamp_ns",
        [FIRN_TYPE_TIMESTAMPTZ_NS] = "timestamptz_ns",
        [FIRN_TYPE_STRING] = "string",
        [FIRN_TYPE_UUID] = "uuid",
        [FIRN_TYPE_FIXED] = "fixed",
        [FIRN_TYPE_BINARY] = "binary",
        [FIRN_TYPE_STRUCT] = "struct",
        [FIRN_TYPE_LIST] = "list",
        [FIRN_TYPE_MAP] = "map",
    };
    if (f->type == FIRN_TYPE_DECIMAL)
        snprintf(out, out_cap, "decimal(%d,%d)", f->precision, f->scale);
    else if (f->type == FIRN_TYPE_FIXED)
        snprintf(out, out_cap, "fixed[%d]", f->length);
    else
        snprintf(out, out_cap, "%s", names[f->type]);
}
