/* SPDX-License-Identifier: Apache-2.0 */
/* `firn spec`: JSON Schema (draft 2020-12) of each configuration file, generated from the same
 * tables that drive validation (cfg_schema.c), so the two cannot drift. */
#include "cfg_int.h"

#include <stdlib.h>
#include <string.h>

#define SCHEMA_DIALECT "https://json-schema.org/draft/2020-12/schema"

static json_t *node_schema(const cfg_node *node);

/* Scalars may also be strings holding ${VAR}, expanded at load time. */
static json_t *or_env(json_t *schema)
{
    json_t *env =
        json_pack("{s:s, s:s}", "type", "string", "pattern", "\\$\\{[A-Za-z_][A-Za-z0-9_]*");
    return json_pack("{s:[o,o]}", "anyOf", schema, env);
}

static json_t *enum_schema(const cfg_enum_value *values)
{
    json_t *list = json_array();
    for (const cfg_enum_value *e = values; e->name; e++) {
        if (!e->unsupported)
            json_array_append_new(list, json_string(e->name));
    }
    return json_pack("{s:s, s:o}", "type", "string", "enum", list);
}

static json_t *object_schema(const cfg_node *node)
{
    json_t *props = json_object();
    json_t *required = json_array();
    for (const cfg_prop *p = node->props; p->name; p++) {
        json_t *s = node_schema(p->node);
        const char *desc = p->desc ? p->desc : p->node->desc;
        char buf[512];
        if (p->canonical && (p->flags & CFG_OLAKE)) {
            snprintf(buf, sizeof(buf), "OLake name for \"%s\"%s%s", p->canonical, desc ? "; " : "",
                     desc ? desc : "");
            desc = buf;
        } else if ((p->flags & CFG_OLAKE) && p->node->type != CFG_IGNORED) {
            snprintf(buf, sizeof(buf), "OLake key%s%s", desc ? ": " : "", desc ? desc : "");
            desc = buf;
        }
        if (desc && json_is_object(s) && !json_object_get(s, "description"))
            json_object_set_new(s, "description", json_string(desc));
        if (p->node->def && json_is_object(s)) {
            json_error_t jerr;
            json_t *def = json_loads(p->node->def, JSON_DECODE_ANY, &jerr);
            if (def)
                json_object_set_new(s, "default", def);
        }
        json_object_set_new(props, p->name, s);
        if (p->flags & CFG_REQUIRED)
            json_array_append_new(required, json_string(p->name));
    }
    json_t *o = json_pack("{s:s, s:o}", "type", "object", "properties", props);
    if (json_array_size(required))
        json_object_set_new(o, "required", required);
    else
        json_decref(required);
    json_object_set_new(o, "additionalProperties", node->extra ? json_true() : json_false());
    return o;
}

static json_t *custom_schema(const cfg_node *node)
{
    json_error_t jerr;
    switch (node->shape) {
    case CFG_SHAPE_ARRAY:
        return json_pack("{s:s, s:o}", "type", "array", "items", node_schema(node->items));
    case CFG_SHAPE_MAP_OF_ARRAYS:
        return json_pack("{s:s, s:{s:s, s:o}}", "type", "object", "additionalProperties", "type",
                         "array", "items", node_schema(node->items));
    case CFG_SHAPE_SCHEMA:
        break;
    }
    json_t *s = json_loads(node->schema_json, 0, &jerr);
    return s ? s : json_object();
}

static json_t *node_schema(const cfg_node *node)
{
    switch (node->type) {
    case CFG_OBJECT:
        return object_schema(node);
    case CFG_STRING:
        return json_pack("{s:s}", "type", "string");
    case CFG_SECRET:
        return json_pack("{s:s, s:b}", "type", "string", "writeOnly", 1);
    case CFG_INT:
        return or_env(json_pack("{s:s, s:I, s:I}", "type", "integer", "minimum",
                                (json_int_t)node->min, "maximum", (json_int_t)node->max));
    case CFG_BOOL:
    case CFG_NOT_BOOL:
        return or_env(json_pack("{s:s}", "type", "boolean"));
    case CFG_ENUM:
        return enum_schema(node->values);
    case CFG_FLAGS:
        return json_pack("{s:s, s:o, s:b}", "type", "array", "items", enum_schema(node->values),
                         "uniqueItems", 1);
    case CFG_SIZE:
        return json_pack("{s:[{s:s, s:i}, {s:s, s:s}]}", "anyOf", "type", "integer", "minimum", 0,
                         "type", "string", "pattern",
                         "^([0-9]+ *(B|KB|KiB|MB|MiB|GB|GiB|TB|TiB)?|.*\\$\\{.*)$");
    case CFG_SECONDS:
        return or_env(json_pack("{s:s, s:I, s:I}", "type", "number", "minimum",
                                (json_int_t)node->min, "maximum", (json_int_t)node->max));
    case CFG_STRLIST:
        return json_pack("{s:s, s:{s:s}}", "type", "array", "items", "type", "string");
    case CFG_KVMAP:
        return json_pack("{s:s, s:{s:[s,s,s]}}", "type", "object", "additionalProperties", "type",
                         "string", "number", "boolean");
    case CFG_RAW:
    case CFG_IGNORED:
        return json_object();
    case CFG_CUSTOM:
        return custom_schema(node);
    }
    return json_object();
}

static json_t *file_schema(const char *which, const cfg_node *root)
{
    json_t *s = node_schema(root);
    char id[128];
    snprintf(id, sizeof(id), "https://firn.dev/schemas/%s.json", which);
    json_object_set_new(s, "$schema", json_string(SCHEMA_DIALECT));
    json_object_set_new(s, "$id", json_string(id));
    json_object_set_new(s, "title", json_string(which));
    if (root->desc)
        json_object_set_new(s, "description", json_string(root->desc));
    return s;
}

firn_rc firn_config_spec(const char *which, char **out_json, firn_err *err)
{
    static const struct {
        const char *name;
        const cfg_node *root;
    } files[] = {{"source", &firn__cfg_source_root},
                 {"destination", &firn__cfg_destination_root},
                 {"streams", &firn__cfg_streams_root},
                 {"state", &firn__cfg_state_root}};
    json_t *out = NULL;
    if (!which) {
        out = json_object();
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
            json_object_set_new(out, files[i].name, file_schema(files[i].name, files[i].root));
    } else {
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
            if (strcmp(files[i].name, which) == 0)
                out = file_schema(files[i].name, files[i].root);
        }
    }
    if (!out)
        return firn_err_set(err, FIRN_ERR_INVALID,
                            "unknown file \"%s\"; expected source, destination, streams or state",
                            which);
    char *text = firn__cfg_json_text(out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(out);
    if (!text)
        return firn_err_set(err, FIRN_ERR_INTERNAL, "could not encode the JSON Schema");
    *out_json = text;
    return FIRN_OK;
}
