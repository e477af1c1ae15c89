/* SPDX-License-Identifier: Apache-2.0 */
/* Parses Avro schema JSON (Avro spec "Schema Declaration") into a tree, keeping the Iceberg
 * attributes readers resolve by: field-id, element-id, key-id, value-id and logicalType. */
#include "avro_int.h"

#include <jansson.h>
#include <string.h>

struct firn_avro_schema_set {
    firn_avro_schema *root;
    firn_avro_schema **nodes; /* every node, for freeing */
    size_t n_nodes;
    size_t cap_nodes;
    firn_avro_schema **named; /* record, enum and fixed nodes by full name */
    size_t n_named;
};

typedef struct parse_ctx {
    firn_avro_schema_set *set;
    firn_err *err;
} parse_ctx;

static firn_rc
parse_node(parse_ctx *c, json_t *j, const char *ns, int depth, firn_avro_schema **out);

static firn_avro_schema *new_node(firn_avro_schema_set *set, firn_avro_type type)
{
    firn_avro_schema *n = firn_calloc(1, sizeof *n);
    n->type = type;
    n->element_id = FIRN_AVRO_NO_ID;
    n->key_id = FIRN_AVRO_NO_ID;
    n->value_id = FIRN_AVRO_NO_ID;
    n->adjust_to_utc = -1;
    if (set->n_nodes == set->cap_nodes) {
        set->cap_nodes = set->cap_nodes ? set->cap_nodes * 2 : 16;
        set->nodes = firn_reallocarray(set->nodes, set->cap_nodes, sizeof *set->nodes);
    }
    set->nodes[set->n_nodes++] = n;
    return n;
}

static void free_node(firn_avro_schema *n)
{
    firn_free(n->name);
    firn_free(n->logical_type);
    for (size_t i = 0; i < n->n_fields; i++)
        firn_free(n->fields[i].name);
    firn_free(n->fields);
    firn_free(n->branches);
    for (size_t i = 0; i < n->n_symbols; i++)
        firn_free(n->symbols[i]);
    firn_free(n->symbols);
    firn_free(n);
}

void firn_avro_schema_set_free(firn_avro_schema_set *set)
{
    if (!set)
        return;
    for (size_t i = 0; i < set->n_nodes; i++)
        free_node(set->nodes[i]);
    firn_free(set->nodes);
    firn_free(set->named);
    firn_free(set);
}

const firn_avro_schema *firn_avro_schema_root(const firn_avro_schema_set *set)
{
    return set->root;
}

int firn_avro_schema_field_index(const firn_avro_schema *record, const char *name)
{
    if (record->type != FIRN_AVRO_RECORD)
        return -1;
    for (size_t i = 0; i < record->n_fields; i++) {
        if (strcmp(record->fields[i].name, name) == 0)
            return (int)i;
    }
    return -1;
}

static const struct {
    const char *name;
    firn_avro_type type;
} PRIMITIVES[] = {
    {"null", FIRN_AVRO_NULL},   {"boolean", FIRN_AVRO_BOOLEAN}, {"int", FIRN_AVRO_INT},
    {"long", FIRN_AVRO_LONG},   {"float", FIRN_AVRO_FLOAT},     {"double", FIRN_AVRO_DOUBLE},
    {"bytes", FIRN_AVRO_BYTES}, {"string", FIRN_AVRO_STRING},
};

static int primitive_type(const char *name)
{
    for (size_t i = 0; i < sizeof PRIMITIVES / sizeof PRIMITIVES[0]; i++) {
        if (strcmp(PRIMITIVES[i].name, name) == 0)
            return (int)PRIMITIVES[i].type;
    }
    return -1;
}

static const char *short_name(const char *full)
{
    const char *dot = strrchr(full, '.');
    return dot ? dot + 1 : full;
}

static firn_avro_schema *
find_named(const firn_avro_schema_set *set, const char *ref, const char *ns)
{
    for (size_t i = 0; i < set->n_named; i++) {
        if (strcmp(set->named[i]->name, ref) == 0)
            return set->named[i];
    }
    if (ns && ns[0] && !strchr(ref, '.')) {
        size_t nsl = strlen(ns);
        for (size_t i = 0; i < set->n_named; i++) {
            const char *n = set->named[i]->name;
            if (strncmp(n, ns, nsl) == 0 && n[nsl] == '.' && strcmp(n + nsl + 1, ref) == 0)
                return set->named[i];
        }
    }
    for (size_t i = 0; i < set->n_named; i++) {
        if (strcmp(short_name(set->named[i]->name), ref) == 0)
            return set->named[i];
    }
    return NULL;
}

/* Reads an integer attribute given as a JSON integer or a numeric string. */
static firn_rc get_id(parse_ctx *c, json_t *obj, const char *key, int32_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return FIRN_OK;
    if (json_is_integer(v) && json_integer_value(v) >= INT32_MIN &&
        json_integer_value(v) <= INT32_MAX) {
        *out = (int32_t)json_integer_value(v);
        return FIRN_OK;
    }
    if (json_is_string(v))
        return firn_parse_i32(json_string_value(v), json_string_length(v), out, c->err);
    return firn_err_set(c->err, FIRN_ERR_PARSE, "invalid \"%s\" in avro schema", key);
}

/* Gives a named node its full name and registers it; duplicates are an error. */
static firn_rc register_named(parse_ctx *c, firn_avro_schema *n, json_t *obj, const char **ns)
{
    json_t *name = json_object_get(obj, "name");
    if (!json_is_string(name) || json_string_length(name) == 0)
        return firn_err_set(c->err, FIRN_ERR_PARSE, "named avro type without a name");
    const char *nm = json_string_value(name);
    json_t *jns = json_object_get(obj, "namespace");
    if (json_is_string(jns))
        *ns = json_string_value(jns);
    if (!strchr(nm, '.') && *ns && (*ns)[0]) {
        firn_buf b;
        firn_buf_init(&b, 4096);
        if (firn_buf_appendf(&b, "%s.%s", *ns, nm)) {
            firn_buf_deinit(&b);
            return firn_err_set(c->err, FIRN_ERR_PARSE, "avro type name too long");
        }
        n->name = (char *)firn_buf_take(&b, NULL);
    } else {
        n->name = firn_strdup(nm);
        if (strchr(nm, '.'))
            *ns = NULL; /* a full name sets its own namespace; children use short lookups */
    }
    for (size_t i = 0; i < c->set->n_named; i++) {
        if (strcmp(c->set->named[i]->name, n->name) == 0)
            return firn_err_set(c->err, FIRN_ERR_PARSE, "avro type \"%s\" is defined twice",
                                n->name);
    }
    c->set->named = firn_reallocarray(c->set->named, c->set->n_named + 1, sizeof *c->set->named);
    c->set->named[c->set->n_named++] = n;
    return FIRN_OK;
}

static firn_rc
parse_record(parse_ctx *c, json_t *obj, const char *ns, int depth, firn_avro_schema *n)
{
    FIRN_TRY(register_named(c, n, obj, &ns));
    json_t *fields = json_object_get(obj, "fields");
    if (!json_is_array(fields))
        return firn_err_set(c->err, FIRN_ERR_PARSE, "avro record \"%s\" has no fields", n->name);
    size_t nf = json_array_size(fields);
    n->fields = firn_calloc(nf ? nf : 1, sizeof *n->fields);
    for (size_t i = 0; i < nf; i++) {
        json_t *f = json_array_get(fields, i);
        json_t *fname = json_object_get(f, "name");
        if (!json_is_string(fname))
            return firn_err_set(c->err, FIRN_ERR_PARSE,
                                "field without a name in avro record \"%s\"", n->name);
        firn_avro_field *fld = &n->fields[i];
        fld->name = firn_strdup(json_string_value(fname));
        fld->field_id = FIRN_AVRO_NO_ID;
        n->n_fields = i + 1;
        FIRN_TRY(get_id(c, f, "field-id", &fld->field_id));
        FIRN_TRY(parse_node(c, json_object_get(f, "type"), ns, depth + 1, &fld->type));
    }
    return FIRN_OK;
}

static firn_rc parse_enum(parse_ctx *c, json_t *obj, const char *ns, firn_avro_schema *n)
{
    FIRN_TRY(register_named(c, n, obj, &ns));
    json_t *symbols = json_object_get(obj, "symbols");
    if (!json_is_array(symbols))
        return firn_err_set(c->err, FIRN_ERR_PARSE, "avro enum \"%s\" has no symbols", n->name);
    size_t ns_count = json_array_size(symbols);
    n->symbols = firn_calloc(ns_count ? ns_count : 1, sizeof *n->symbols);
    for (size_t i = 0; i < ns_count; i++) {
        json_t *s = json_array_get(symbols, i);
        if (!json_is_string(s))
            return firn_err_set(c->err, FIRN_ERR_PARSE, "invalid symbol in avro enum \"%s\"",
                                n->name);
        n->symbols[i] = firn_strdup(json_string_value(s));
        n->n_symbols = i + 1;
    }
    return FIRN_OK;
}

static firn_rc parse_fixed(parse_ctx *c, json_t *obj, const char *ns, firn_avro_schema *n)
{
    FIRN_TRY(register_named(c, n, obj, &ns));
    json_t *size = json_object_get(obj, "size");
    if (!json_is_integer(size) || json_integer_value(size) < 0 ||
        json_integer_value(size) > (1 << 20))
        return firn_err_set(c->err, FIRN_ERR_PARSE, "invalid size of avro fixed \"%s\"", n->name);
    n->fixed_size = (size_t)json_integer_value(size);
    return FIRN_OK;
}

static firn_rc
parse_object(parse_ctx *c, json_t *obj, const char *ns, int depth, firn_avro_schema **out)
{
    json_t *jt = json_object_get(obj, "type");
    if (!jt)
        return firn_err_set(c->err, FIRN_ERR_PARSE, "avro schema object without \"type\"");
    if (!json_is_string(jt))
        return parse_node(c, jt, ns, depth + 1, out);
    const char *t = json_string_value(jt);
    int prim = primitive_type(t);
    firn_avro_schema *n = NULL;
    if (prim >= 0) {
        n = new_node(c->set, (firn_avro_type)prim);
    } else if (strcmp(t, "record") == 0 || strcmp(t, "error") == 0) {
        n = new_node(c->set, FIRN_AVRO_RECORD);
        FIRN_TRY(parse_record(c, obj, ns, depth, n));
    } else if (strcmp(t, "enum") == 0) {
        n = new_node(c->set, FIRN_AVRO_ENUM);
        FIRN_TRY(parse_enum(c, obj, ns, n));
    } else if (strcmp(t, "fixed") == 0) {
        n = new_node(c->set, FIRN_AVRO_FIXED);
        FIRN_TRY(parse_fixed(c, obj, ns, n));
    } else if (strcmp(t, "array") == 0) {
        n = new_node(c->set, FIRN_AVRO_ARRAY);
        FIRN_TRY(get_id(c, obj, "element-id", &n->element_id));
        FIRN_TRY(parse_node(c, json_object_get(obj, "items"), ns, depth + 1, &n->items));
    } else if (strcmp(t, "map") == 0) {
        n = new_node(c->set, FIRN_AVRO_MAP);
        FIRN_TRY(get_id(c, obj, "key-id", &n->key_id));
        FIRN_TRY(get_id(c, obj, "value-id", &n->value_id));
        FIRN_TRY(parse_node(c, json_object_get(obj, "values"), ns, depth + 1, &n->items));
    } else {
        firn_avro_schema *named = find_named(c->set, t, ns);
        if (!named)
            return firn_err_set(c->err, FIRN_ERR_PARSE, "unknown avro type \"%.64s\"", t);
        *out = named;
        return FIRN_OK;
    }
    json_t *lt = json_object_get(obj, "logicalType");
    if (json_is_string(lt))
        n->logical_type = firn_strdup(json_string_value(lt));
    FIRN_TRY(get_id(c, obj, "precision", &n->precision));
    FIRN_TRY(get_id(c, obj, "scale", &n->scale));
    json_t *utc = json_object_get(obj, "adjust-to-utc");
    if (json_is_boolean(utc))
        n->adjust_to_utc = json_is_true(utc) ? 1 : 0;
    *out = n;
    return FIRN_OK;
}

static firn_rc
parse_union(parse_ctx *c, json_t *arr, const char *ns, int depth, firn_avro_schema **out)
{
    firn_avro_schema *n = new_node(c->set, FIRN_AVRO_UNION);
    size_t nb = json_array_size(arr);
    if (nb == 0)
        return firn_err_set(c->err, FIRN_ERR_PARSE, "empty avro union");
    n->branches = firn_calloc(nb, sizeof *n->branches);
    for (size_t i = 0; i < nb; i++) {
        FIRN_TRY(parse_node(c, json_array_get(arr, i), ns, depth + 1, &n->branches[i]));
        n->n_branches = i + 1;
        if (n->branches[i]->type == FIRN_AVRO_UNION)
            return firn_err_set(c->err, FIRN_ERR_PARSE, "avro union directly inside a union");
    }
    *out = n;
    return FIRN_OK;
}

static firn_rc
parse_node(parse_ctx *c, json_t *j, const char *ns, int depth, firn_avro_schema **out)
{
    if (depth > FIRN__AVRO_MAX_DEPTH)
        return firn_err_set(c->err, FIRN_ERR_PARSE, "avro schema nested deeper than %d",
                            FIRN__AVRO_MAX_DEPTH);
    if (json_is_string(j)) {
        const char *t = json_string_value(j);
        int prim = primitive_type(t);
        if (prim >= 0) {
            *out = new_node(c->set, (firn_avro_type)prim);
            return FIRN_OK;
        }
        *out = find_named(c->set, t, ns);
        if (!*out)
            return firn_err_set(c->err, FIRN_ERR_PARSE, "unknown avro type \"%.64s\"", t);
        return FIRN_OK;
    }
    if (json_is_array(j))
        return parse_union(c, j, ns, depth, out);
    if (json_is_object(j))
        return parse_object(c, j, ns, depth, out);
    return firn_err_set(c->err, FIRN_ERR_PARSE, "invalid avro schema element");
}

firn_rc
firn_avro_schema_parse(const char *json, size_t len, firn_avro_schema_set **out, firn_err *err)
{
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_DECODE_ANY, &jerr);
    if (!root)
        return firn_err_set(err, FIRN_ERR_PARSE, "invalid avro schema json: %s (line %d)",
                            jerr.text, jerr.line);
    firn_avro_schema_set *set = firn_calloc(1, sizeof *set);
    parse_ctx c = {set, err};
    firn_rc rc = parse_node(&c, root, "", 0, &set->root);
    json_decref(root);
    if (rc) {
        firn_avro_schema_set_free(set);
        return rc;
    }
    *out = set;
    return FIRN_OK;
}
