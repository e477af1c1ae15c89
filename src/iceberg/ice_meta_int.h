/* SPDX-License-Identifier: Apache-2.0 */
/* Private to the iceberg module's metadata half: JSON helpers over jansson shared by the schema,
 * spec, snapshot, metadata and change-set codecs. */
#ifndef FIRN_ICE_META_INT_H
#define FIRN_ICE_META_INT_H

#include "firn/iceberg.h"

#include <jansson.h>

/* Largest metadata/changes document accepted or produced (16 MiB). */
#define FIRN__ICE_JSON_MAX (16u * 1024u * 1024u)

/* Parses len bytes of JSON into an owned value (FIRN_ERR_PARSE with line and column). */
firn_rc firn__ice_json_load(const char *json, size_t len, json_t **out, firn_err *err);
/* Appends v serialized (compact, insertion order) to out. */
firn_rc firn__ice_json_dump(const json_t *v, firn_buf *out, firn_err *err);

/* Member readers. A missing member is an error when required, else *out keeps dflt. Integers
 * must be JSON integers in range; strings are borrowed from obj. */
firn_rc firn__ice_get_i64(
    const json_t *obj, const char *key, bool required, int64_t dflt, int64_t *out, firn_err *err);
firn_rc firn__ice_get_i32(
    const json_t *obj, const char *key, bool required, int32_t dflt, int32_t *out, firn_err *err);
firn_rc firn__ice_get_bool(
    const json_t *obj, const char *key, bool required, bool dflt, bool *out, firn_err *err);
firn_rc firn__ice_get_str(
    const json_t *obj, const char *key, bool required, const char **out, firn_err *err);
/* Array member (NULL when absent and not required). */
firn_rc firn__ice_get_array(
    const json_t *obj, const char *key, bool required, const json_t **out, firn_err *err);
/* Reads a JSON object of strings into props (appended). */
firn_rc firn__ice_props_from_jv(const json_t *obj, firn_props *props, firn_err *err);
json_t *firn__ice_props_to_jv(const firn_props *props);

/* Object codecs (new references on the _to_jv side). */
firn_rc firn__ice_schema_from_jv(const json_t *v, firn_schema **out, firn_err *err);
json_t *firn__ice_schema_to_jv(const firn_schema *s);
firn_rc firn__ice_spec_from_jv(const json_t *v, firn_partition_spec **out, firn_err *err);
json_t *firn__ice_spec_to_jv(const firn_partition_spec *s);
firn_rc firn__ice_sort_from_jv(const json_t *v, firn_sort_order **out, firn_err *err);
json_t *firn__ice_sort_to_jv(const firn_sort_order *o);
firn_rc firn__ice_snapshot_from_jv(const json_t *v, firn_snapshot **out, firn_err *err);
json_t *firn__ice_snapshot_to_jv(const firn_snapshot *s);
firn_rc
firn__ice_ref_from_jv(const char *name, const json_t *v, firn_snapshot_ref *out, firn_err *err);
json_t *firn__ice_ref_to_jv(const firn_snapshot_ref *r, bool with_ref_name);
void firn__ice_ref_copy(firn_snapshot_ref *dst, const firn_snapshot_ref *src);
bool firn__ice_sort_same(const firn_sort_order *a, const firn_sort_order *b);

/* Validates that s is a UUID in text form (36 characters, hex and dashes). */
bool firn__ice_uuid_valid(const char *s);
/* Copies a field tree with ids reassigned from *next_id (breadth-first per struct, like Java's
 * AssignFreshIds); records old -> new in map (pairs, n_map entries) when map is not NULL. */
firn_field *firn__ice_fresh_ids(const firn_field *f, int32_t *next_id, int32_t *map, size_t *n_map);
/* Number of fields in the tree below f (f excluded). */
size_t firn__ice_field_count(const firn_field *f);

#endif
