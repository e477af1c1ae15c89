/* SPDX-License-Identifier: Apache-2.0 */
/* Private helpers of the manifest half of the iceberg module (values, transforms, manifests,
 * snapshot producer). */
#ifndef FIRN_ICE_MANIFEST_INT_H
#define FIRN_ICE_MANIFEST_INT_H

#include "firn/manifest.h"

__extension__ typedef __int128 firn__i128;

/* Largest manifest or manifest list firn writes or reads. */
#define FIRN__MANIFEST_MAX_BYTES ((size_t)1 << 30)

/* Unscaled value of a decimal firn_value. */
static inline firn__i128 firn__dec_get(const firn_value *v)
{
    return (firn__i128)(((unsigned __int128)(uint64_t)v->dec_hi << 64) | v->dec_lo);
}

/* Stores an unscaled value into a decimal firn_value. */
static inline void firn__dec_set(firn_value *v, firn__i128 x)
{
    v->dec_hi = (int64_t)(x >> 64);
    v->dec_lo = (uint64_t)x;
}

/* Minimal big-endian two's-complement bytes of x into out[16]; returns the length (>= 1). */
size_t firn__dec_min_bytes(firn__i128 x, uint8_t out[16]);
/* Floor division and modulo for epoch arithmetic. */
int64_t firn__floor_div(int64_t a, int64_t b);
/* Civil date of days since 1970-01-01 (proleptic Gregorian). */
void firn__civil_from_days(int64_t days, int64_t *y, int *m, int *d);
/* True for the integer-valued types stored in firn_value.i. */
bool firn__type_is_integral(firn_type t);
/* True when t is primitive (not struct/list/map). */
bool firn__type_is_primitive(firn_type t);
/* Appends a human string of v (partition paths) to out. */
firn_rc firn__value_human(const firn_value *v, firn_transform t, firn_buf *out);
/* Finds a field by id anywhere in a schema tree, or NULL. */
const firn_field *firn__schema_find(const firn_field *schema, int32_t id);

/* Appends the Avro schema JSON of v2 or v3 manifest entries for spec (result types types[]). */
firn_rc firn__manifest_entry_schema(const firn_partition_spec *spec,
                                    const firn_ptype *types,
                                    int format_version,
                                    firn_buf *out);
/* Appends the Avro schema JSON of v2 or v3 manifest lists. */
firn_rc firn__manifest_list_schema(int format_version, firn_buf *out);
/* Bytes of the Avro fixed holding a decimal of the given precision (Java decimalRequiredBytes). */
int firn__decimal_bytes(int32_t precision);
/* Partition value type of an Avro schema (union branches skipped). */
firn_rc firn__ptype_of_avro(const firn_avro_schema *s, firn_ptype *out, firn_err *err);

/* Parses a "partition-spec" manifest header (array of fields, or an object with "fields") into
 * an owned spec with id spec_id. FIRN_ERR_PARSE when malformed or NULL. */
firn_rc firn__partition_spec_parse_fields(const char *json,
                                          int32_t spec_id,
                                          firn_partition_spec **out,
                                          firn_err *err);

#endif
