/* SPDX-License-Identifier: Apache-2.0 */
/* Iceberg schemas: the firn_field tree with schema id and identifier fields, its JSON form
 * (format/spec.md Appendix C "JSON serialization", ICEBERG.md §A "Schema JSON"), validation and
 * fresh id assignment. */
#include "ice_meta_int.h"

#include <stdio.h>
#include <string.h>

/* Field ids above this are reserved for metadata columns (spec "Reserved Field IDs"). */
#define RESERVED_ID_MIN 2147483447

firn_schema *firn_schema_new(int32_t schema_id, firn_field *root)
{
    FIRN_ASSERT(root && root->type == FIRN_TYPE_STRUCT);
    firn_schema *s = firn_calloc(1, sizeof(*s));
    s->schema_id = schema_id;
    s->root = root;
    return s;
}

void firn_schema_free(firn_schema *s)
{
    if (!s)
        return;
    firn_field_free(s->root);
    firn_free(s->identifier_field_ids);
    json_decref(s->field_extras);
    firn_free(s);
}

firn_schema *firn_schema_clone(const firn_schema *s)
{
    firn_schema *c = firn_schema_new(s->schema_id, firn_field_clone(s->root));
    firn_schema_set_identifier_ids(c, s->identifier_field_ids, s->n_identifier_field_ids);
    c->field_extras = s->field_extras ? json_deep_copy(s->field_extras) : NULL;
    return c;
}

void firn_schema_set_identifier_ids(firn_schema *s, const int32_t *ids, size_t n)
{
    firn_free(s->identifier_field_ids);
    s->identifier_field_ids = n ? firn_memdup(ids, n * sizeof(*ids)) : NULL;
    s->n_identifier_field_ids = n;
}

static const firn_field *find_id(const firn_field *f, int32_t id)
{
    for (size_t i = 0; i < f->n_children; i++) {
        const firn_field *c = f->children[i];
        if (c->id == id)
            return c;
        const firn_field *r = find_id(c, id);
        if (r)
            return r;
    }
    return NULL;
}

const firn_field *firn_schema_find_id(const firn_schema *s, int32_t id)
{
    return find_id(s->root, id);
}

const firn_field *firn_schema_find_name(const firn_schema *s, const char *name)
{
    for (size_t i = 0; i < s->root->n_children; i++) {
        if (strcmp(s->root->children[i]->name, name) == 0)
            return s->root->children[i];
    }
    return NULL;
}

static int32_t highest_id(const firn_field *f)
{
    int32_t hi = 0;
    for (size_t i = 0; i < f->n_children; i++) {
        int32_t c = f->children[i]->id;
        int32_t sub = highest_id(f->children[i]);
        hi = c > hi ? c : hi;
        hi = sub > hi ? sub : hi;
    }
    return hi;
}

int32_t firn_schema_highest_id(const firn_schema *s)
{
    return highest_id(s->root);
}

size_t firn__ice_field_count(const firn_field *f)
{
    size_t n = f->n_children;
    for (size_t i = 0; i < f->n_children; i++)
        n += firn__ice_field_count(f->children[i]);
    return n;
}

static bool field_same(const firn_field *a, const firn_field *b)
{
    if (a->id != b->id || a->type != b->type || a->required != b->required ||
        strcmp(a->name, b->name) != 0 || a->n_children != b->n_children)
        return false;
    if (a->type == FIRN_TYPE_DECIMAL && (a->precision != b->precision || a->scale != b->scale))
        return false;
    if (a->type == FIRN_TYPE_FIXED && a->length != b->length)
        return false;
    for (size_t i = 0; i < a->n_children; i++) {
        if (!field_same(a->children[i], b->children[i]))
            return false;
    }
    return true;
}

bool firn_schema_same(const firn_schema *a, const firn_schema *b)
{
    if (a->n_identifier_field_ids != b->n_identifier_field_ids)
        return false;
    for (size_t i = 0; i < a->n_identifier_field_ids; i++) {
        if (a->identifier_field_ids[i] != b->identifier_field_ids[i])
            return false;
    }
    return field_same(a->root, b->root);
}

/* ------------------------------------------------------------------------------------------------
 * Validation
 * ----------------------------------------------------------------------------------------------*/

typedef struct id_set {
    int32_t *ids;
    size_t n;
} id_set;

static firn_rc collect_ids(const firn_field *f, id_set *set, firn_err *err)
{
    for (size_t i = 0; i < f->n_children; i++) {
        const firn_field *c = f->children[i];
        if (c->id <= 0 || c->id >= RESERVED_ID_MIN)
            return firn_err_set(err, FIRN_ERR_SCHEMA, "field \"%s\" has invalid field id %d",
                                c->name, c->id);
        for (size_t j = 0; j < set->n; j++) {
            if (set->ids[j] == c->id)
                return firn_err_set(err, FIRN_ERR_SCHEMA, "field id %d is used more than once",
                                    c->id);
        }
        set->ids[set->n++] = c->id;
        if (f->type == FIRN_TYPE_STRUCT) {
            if (c->name[0] == '\0')
                return firn_err_set(err, FIRN_ERR_SCHEMA, "field %d has an empty name", c->id);
            for (size_t j = 0; j < i; j++) {
                if (strcmp(f->children[j]->name, c->name) == 0)
                    return firn_err_set(err, FIRN_ERR_SCHEMA, "field name \"%s\" is used twice",
                                        c->name);
            }
        }
        FIRN_TRY(collect_ids(c, set, err));
    }
    return FIRN_OK;
}

/* Finds the path to id through required structs only; false when nested in a list, map or an
 * optional struct, or absent. */
static bool identifier_reachable(const firn_field *f, int32_t id, const firn_field **out)
{
    for (size_t i = 0; i < f->n_children; i++) {
        const firn_field *c = f->children[i];
        if (c->id == id) {
            *out = c;
            return true;
        }
        if (c->type == FIRN_TYPE_STRUCT && c->required && identifier_reachable(c, id, out))
            return true;
    }
    return false;
}

static firn_rc validate_identifier(const firn_schema *s, int32_t id, firn_err *err)
{
    const firn_field *f = NULL;
    if (!identifier_reachable(s->root, id, &f))
        return firn_err_set(err, FIRN_ERR_SCHEMA,
                            "identifier field %d is missing or nested in a list, map or optional "
                            "struct",
                            id);
    if (!f->required)
        return firn_err_set(err, FIRN_ERR_SCHEMA, "identifier field \"%s\" must be required",
                            f->name);
    if (f->type == FIRN_TYPE_STRUCT || f->type == FIRN_TYPE_LIST || f->type == FIRN_TYPE_MAP ||
        f->type == FIRN_TYPE_FLOAT || f->type == FIRN_TYPE_DOUBLE)
        return firn_err_set(err, FIRN_ERR_SCHEMA,
                            "identifier field \"%s\" must be a primitive type other than float "
                            "or double",
                            f->name);
    return FIRN_OK;
}

firn_rc firn_schema_validate(const firn_schema *s, firn_err *err)
{
    if (!s->root || s->root->type != FIRN_TYPE_STRUCT)
        return firn_err_set(err, FIRN_ERR_SCHEMA, "schema root is not a struct");
    id_set set = {firn_calloc(firn__ice_field_count(s->root) + 1, sizeof(int32_t)), 0};
    firn_rc rc = collect_ids(s->root, &set, err);
    firn_free(set.ids);
    if (rc)
        return rc;
    for (size_t i = 0; i < s->n_identifier_field_ids; i++)
        FIRN_TRY(validate_identifier(s, s->identifier_field_ids[i], err));
    return FIRN_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Type strings
 * ----------------------------------------------------------------------------------------------*/

static const struct {
    const char *name;
    firn_type type;
} PRIMITIVES[] = {
    {"boolean", FIRN_TYPE_BOOLEAN},
    {"int", FIRN_TYPE_INT},
    {"long", FIRN_TYPE_LONG},
    {"float", FIRN_TYPE_FLOAT},
    {"double", FIRN_TYPE_DOUBLE},
    {"date", FIRN_TYPE_DATE},
    {"time", FIRN_TYPE_TIME},
    {"timestamp", FIRN_TYPE_TIMESTAMP},
    {"timestamptz", FIRN_TYPE_TIMESTAMPTZ},
    {"timestamp_ns", FIRN_TYPE_TIMESTAMP_NS},
    {"timestamptz_ns", FIRN_TYPE_TIMESTAMPTZ_NS},
    {"string", FIRN_TYPE_STRING},
    {"uuid", FIRN_TYPE_UUID},
    {"binary", FIRN_TYPE_BINARY},
};

/* Reads a decimal number of at most 9 digits at *p, skipping spaces around it. */
static bool read_small_int(const char **p, int32_t *out)
{
    const char *s = *p;
    while (*s == ' ')
        s++;
    int32_t v = 0;
    int digits = 0;
    while (*s >= '0' && *s <= '9' && digits < 9) {
        v = v * 10 + (*s - '0');
        s++;
        digits++;
    }
    if (digits == 0 || (*s >= '0' && *s <= '9'))
        return false;
    while (*s == ' ')
        s++;
    *p = s;
    *out = v;
    return true;
}

static firn_rc parse_decimal(const char *t, firn_field *f, firn_err *err)
{
    const char *p = t + strlen("decimal(");
    int32_t prec, scale;
    if (!read_small_int(&p, &prec) || *p++ != ',' || !read_small_int(&p, &scale) || *p++ != ')' ||
        *p != '\0')
        return firn_err_set(err, FIRN_ERR_PARSE, "malformed decimal type \"%s\"", t);
    if (prec < 1 || prec > 38 || scale < 0 || scale > prec)
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "unsupported decimal type \"%s\"", t);
    f->type = FIRN_TYPE_DECIMAL;
    f->precision = prec;
    f->scale = scale;
    return FIRN_OK;
}

static firn_rc parse_fixed(const char *t, firn_field *f, firn_err *err)
{
    const char *p = t + strlen("fixed[");
    int32_t len;
    if (!read_small_int(&p, &len) || *p++ != ']' || *p != '\0' || len < 1)
        return firn_err_set(err, FIRN_ERR_PARSE, "malformed fixed type \"%s\"", t);
    f->type = FIRN_TYPE_FIXED;
    f->length = len;
    return FIRN_OK;
}

/* Sets f's type from a primitive type string. */
static firn_rc parse_type_string(const char *t, firn_field *f, firn_err *err)
{
    for (size_t i = 0; i < sizeof(PRIMITIVES) / sizeof(PRIMITIVES[0]); i++) {
        if (strcmp(t, PRIMITIVES[i].name) == 0) {
            f->type = PRIMITIVES[i].type;
            return FIRN_OK;
        }
    }
    if (strncmp(t, "decimal(", 8) == 0)
        return parse_decimal(t, f, err);
    if (strncmp(t, "fixed[", 6) == 0)
        return parse_fixed(t, f, err);
    return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "unsupported Iceberg type \"%s\"", t);
}

static json_t *type_string_jv(const firn_field *f)
{
    char buf[64];
    if (f->type == FIRN_TYPE_DECIMAL)
        snprintf(buf, sizeof(buf), "decimal(%d, %d)", f->precision, f->scale);
    else if (f->type == FIRN_TYPE_FIXED)
        snprintf(buf, sizeof(buf), "fixed[%d]", f->length);
    else
        firn_type_format(f, buf, sizeof(buf));
    return json_string(buf);
}

/* ------------------------------------------------------------------------------------------------
 * JSON -> field tree
 * ----------------------------------------------------------------------------------------------*/

typedef struct parse_ctx {
    json_t *extras; /* field id -> {doc, initial-default, write-default}, NULL until needed */
    int depth;
} parse_ctx;

#define MAX_NESTING 200

static firn_rc parse_type(parse_ctx *ctx, const json_t *t, firn_field *f, firn_err *err);

static firn_rc keep_extras(parse_ctx *ctx, const json_t *jf, int32_t id)
{
    static const char *const keys[] = {"doc", "initial-default", "write-default"};
    json_t *kept = NULL;
    for (size_t i = 0; i < 3; i++) {
        json_t *v = json_object_get(jf, keys[i]);
        if (!v)
            continue;
        if (!kept)
            kept = json_object();
        json_object_set(kept, keys[i], v);
    }
    if (!kept)
        return FIRN_OK;
    if (!ctx->extras)
        ctx->extras = json_object();
    char key[16];
    snprintf(key, sizeof(key), "%d", id);
    json_object_set_new(ctx->extras, key, kept);
    return FIRN_OK;
}

static firn_rc
parse_struct_fields(parse_ctx *ctx, const json_t *jstruct, firn_field *parent, firn_err *err)
{
    const json_t *fields;
    FIRN_TRY(firn__ice_get_array(jstruct, "fields", true, &fields, err));
    size_t i;
    const json_t *jf;
    json_array_foreach(fields, i, jf)
    {
        int32_t id;
        const char *name;
        bool required;
        FIRN_TRY(firn__ice_get_i32(jf, "id", true, 0, &id, err));
        FIRN_TRY(firn__ice_get_str(jf, "name", true, &name, err));
        FIRN_TRY(firn__ice_get_bool(jf, "required", true, false, &required, err));
        const json_t *jt = json_object_get(jf, "type");
        if (!jt)
            return firn_err_set(err, FIRN_ERR_PARSE, "field \"%s\" has no type", name);
        firn_field *child = firn_field_new(id, name, FIRN_TYPE_STRING, required);
        firn_field_add(parent, child);
        FIRN_TRY(parse_type(ctx, jt, child, err));
        FIRN_TRY(keep_extras(ctx, jf, id));
    }
    return FIRN_OK;
}

static firn_rc parse_child(parse_ctx *ctx,
                           const json_t *jt,
                           const char *id_key,
                           const char *type_key,
                           const char *req_key,
                           firn_field *parent,
                           firn_err *err)
{
    int32_t id;
    bool required = true;
    FIRN_TRY(firn__ice_get_i32(jt, id_key, true, 0, &id, err));
    if (req_key)
        FIRN_TRY(firn__ice_get_bool(jt, req_key, true, false, &required, err));
    const json_t *ct = json_object_get(jt, type_key);
    if (!ct)
        return firn_err_set(err, FIRN_ERR_PARSE, "missing member \"%s\"", type_key);
    firn_field *child = firn_field_new(id, type_key, FIRN_TYPE_STRING, required);
    firn_field_add(parent, child);
    return parse_type(ctx, ct, child, err);
}

static firn_rc parse_type(parse_ctx *ctx, const json_t *t, firn_field *f, firn_err *err)
{
    if (json_is_string(t))
        return parse_type_string(json_string_value(t), f, err);
    const char *kind;
    FIRN_TRY(firn__ice_get_str(t, "type", true, &kind, err));
    if (++ctx->depth > MAX_NESTING)
        return firn_err_set(err, FIRN_ERR_PARSE, "types nested deeper than %d levels", MAX_NESTING);
    firn_rc rc;
    if (strcmp(kind, "struct") == 0) {
        f->type = FIRN_TYPE_STRUCT;
        rc = parse_struct_fields(ctx, t, f, err);
    } else if (strcmp(kind, "list") == 0) {
        f->type = FIRN_TYPE_LIST;
        rc = parse_child(ctx, t, "element-id", "element", "element-required", f, err);
    } else if (strcmp(kind, "map") == 0) {
        f->type = FIRN_TYPE_MAP;
        rc = parse_child(ctx, t, "key-id", "key", NULL, f, err);
        if (!rc)
            rc = parse_child(ctx, t, "value-id", "value", "value-required", f, err);
    } else {
        rc = firn_err_set(err, FIRN_ERR_UNSUPPORTED, "unsupported nested type \"%s\"", kind);
    }
    ctx->depth--;
    return rc;
}

static firn_rc parse_identifiers(const json_t *v, firn_schema *s, firn_err *err)
{
    const json_t *ids;
    FIRN_TRY(firn__ice_get_array(v, "identifier-field-ids", false, &ids, err));
    if (!ids)
        return FIRN_OK;
    size_t n = json_array_size(ids);
    int32_t *buf = firn_calloc(n + 1, sizeof(int32_t));
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(ids, i);
        json_int_t id = json_is_integer(e) ? json_integer_value(e) : -1;
        if (id <= 0 || id > INT32_MAX) {
            firn_free(buf);
            return firn_err_set(err, FIRN_ERR_PARSE, "invalid identifier field id");
        }
        buf[i] = (int32_t)id;
    }
    firn_schema_set_identifier_ids(s, buf, n);
    firn_free(buf);
    return FIRN_OK;
}

firn_rc firn__ice_schema_from_jv(const json_t *v, firn_schema **out, firn_err *err)
{
    *out = NULL;
    const char *kind;
    int32_t schema_id;
    FIRN_TRY(firn__ice_get_str(v, "type", false, &kind, err));
    if (kind && strcmp(kind, "struct") != 0)
        return firn_err_set(err, FIRN_ERR_PARSE, "schema type \"%s\" is not \"struct\"", kind);
    FIRN_TRY(firn__ice_get_i32(v, "schema-id", false, 0, &schema_id, err));
    parse_ctx ctx = {NULL, 0};
    firn_schema *s = firn_schema_new(schema_id, firn_field_new(0, "", FIRN_TYPE_STRUCT, true));
    firn_rc rc = parse_struct_fields(&ctx, v, s->root, err);
    s->field_extras = ctx.extras;
    if (!rc)
        rc = parse_identifiers(v, s, err);
    if (!rc)
        rc = firn_schema_validate(s, err);
    if (rc) {
        firn_schema_free(s);
        return rc;
    }
    *out = s;
    return FIRN_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Field tree -> JSON (member order as Java's SchemaParser)
 * ----------------------------------------------------------------------------------------------*/

static json_t *type_jv(const firn_schema *s, const firn_field *f);

static json_t *struct_jv(const firn_schema *s, const firn_field *f, bool top)
{
    json_t *obj = json_object();
    json_object_set_new(obj, "type", json_string("struct"));
    if (top) {
        json_object_set_new(obj, "schema-id", json_integer(s->schema_id));
        if (s->n_identifier_field_ids > 0) {
            json_t *ids = json_array();
            for (size_t i = 0; i < s->n_identifier_field_ids; i++)
                json_array_append_new(ids, json_integer(s->identifier_field_ids[i]));
            json_object_set_new(obj, "identifier-field-ids", ids);
        }
    }
    json_t *fields = json_array();
    for (size_t i = 0; i < f->n_children; i++) {
        const firn_field *c = f->children[i];
        json_t *jf = json_object();
        json_object_set_new(jf, "id", json_integer(c->id));
        json_object_set_new(jf, "name", json_string(c->name));
        json_object_set_new(jf, "required", json_boolean(c->required));
        json_object_set_new(jf, "type", type_jv(s, c));
        if (s->field_extras) {
            char key[16];
            snprintf(key, sizeof(key), "%d", c->id);
            json_t *kept = json_object_get(s->field_extras, key);
            if (kept)
                json_object_update(jf, kept);
        }
        json_array_append_new(fields, jf);
    }
    json_object_set_new(obj, "fields", fields);
    return obj;
}

static json_t *type_jv(const firn_schema *s, const firn_field *f)
{
    json_t *obj;
    switch (f->type) {
    case FIRN_TYPE_STRUCT:
        return struct_jv(s, f, false);
    case FIRN_TYPE_LIST:
        obj = json_object();
        json_object_set_new(obj, "type", json_string("list"));
        json_object_set_new(obj, "element-id", json_integer(f->children[0]->id));
        json_object_set_new(obj, "element", type_jv(s, f->children[0]));
        json_object_set_new(obj, "element-required", json_boolean(f->children[0]->required));
        return obj;
    case FIRN_TYPE_MAP:
        obj = json_object();
        json_object_set_new(obj, "type", json_string("map"));
        json_object_set_new(obj, "key-id", json_integer(f->children[0]->id));
        json_object_set_new(obj, "key", type_jv(s, f->children[0]));
        json_object_set_new(obj, "value-id", json_integer(f->children[1]->id));
        json_object_set_new(obj, "value", type_jv(s, f->children[1]));
        json_object_set_new(obj, "value-required", json_boolean(f->children[1]->required));
        return obj;
    default:
        return type_string_jv(f);
    }
}

json_t *firn__ice_schema_to_jv(const firn_schema *s)
{
    return struct_jv(s, s->root, true);
}

firn_rc firn_schema_from_json(const char *json, size_t len, firn_schema **out, firn_err *err)
{
    json_t *v;
    FIRN_TRY(firn__ice_json_load(json, len, &v, err));
    firn_rc rc = firn__ice_schema_from_jv(v, out, err);
    json_decref(v);
    return rc;
}

firn_rc firn_schema_to_json(const firn_schema *s, firn_buf *out, firn_err *err)
{
    json_t *v = firn__ice_schema_to_jv(s);
    firn_rc rc = firn__ice_json_dump(v, out, err);
    json_decref(v);
    return rc;
}

/* ------------------------------------------------------------------------------------------------
 * Fresh ids (Java AssignFreshIds / pyiceberg _SetFreshIDs): a struct's own fields first, then
 * their nested types in order; a list's element id before the element type; a map's key and
 * value ids before their types.
 * ----------------------------------------------------------------------------------------------*/

static void record(int32_t *map, size_t *n_map, int32_t old_id, int32_t new_id)
{
    if (!map)
        return;
    map[2 * *n_map] = old_id;
    map[2 * *n_map + 1] = new_id;
    (*n_map)++;
}

static void
fresh_children(firn_field *copy, const firn_field *f, int32_t *next_id, int32_t *map, size_t *n_map)
{
    for (size_t i = 0; i < f->n_children; i++) {
        firn_field *c = copy->children[i];
        c->id = (*next_id)++;
        record(map, n_map, f->children[i]->id, c->id);
    }
    for (size_t i = 0; i < f->n_children; i++)
        fresh_children(copy->children[i], f->children[i], next_id, map, n_map);
}

firn_field *firn__ice_fresh_ids(const firn_field *f, int32_t *next_id, int32_t *map, size_t *n_map)
{
    firn_field *copy = firn_field_clone(f);
    fresh_children(copy, f, next_id, map, n_map);
    return copy;
}
