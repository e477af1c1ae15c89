/* SPDX-License-Identifier: Apache-2.0 */
/* The type mapping table (docs/type-mapping.md): which decoder and Iceberg type each PostgreSQL
 * type gets, resolution of domains and arrays through the catalog, and field building. */
#include "pg_int.h"

#include <string.h>

/* One row of the mapping for built-in types, by oid (stable across PostgreSQL versions). */
typedef struct type_rule {
    uint32_t oid;
    firn_pg_kind kind;
    bool text_cast;
} type_rule;

static const type_rule RULES[] = {
    {16, FIRN_PG_KIND_BOOL, false},          /* bool */
    {17, FIRN_PG_KIND_BYTEA, false},         /* bytea */
    {18, FIRN_PG_KIND_TEXT, true},           /* "char" (escapes high bytes in text form) */
    {19, FIRN_PG_KIND_TEXT, false},          /* name */
    {20, FIRN_PG_KIND_INT8, false},          /* int8 */
    {21, FIRN_PG_KIND_INT2, false},          /* int2 */
    {23, FIRN_PG_KIND_INT4, false},          /* int4 */
    {25, FIRN_PG_KIND_TEXT, false},          /* text */
    {26, FIRN_PG_KIND_OID, false},           /* oid */
    {114, FIRN_PG_KIND_TEXT, false},         /* json */
    {142, FIRN_PG_KIND_TEXT, true},          /* xml */
    {600, FIRN_PG_KIND_TEXT, true},          /* point */
    {601, FIRN_PG_KIND_TEXT, true},          /* lseg */
    {602, FIRN_PG_KIND_TEXT, true},          /* path */
    {603, FIRN_PG_KIND_TEXT, true},          /* box */
    {604, FIRN_PG_KIND_TEXT, true},          /* polygon */
    {628, FIRN_PG_KIND_TEXT, true},          /* line */
    {650, FIRN_PG_KIND_TEXT, true},          /* cidr */
    {700, FIRN_PG_KIND_FLOAT4, false},       /* float4 */
    {701, FIRN_PG_KIND_FLOAT8, false},       /* float8 */
    {718, FIRN_PG_KIND_TEXT, true},          /* circle */
    {774, FIRN_PG_KIND_TEXT, true},          /* macaddr8 */
    {790, FIRN_PG_KIND_MONEY, false},        /* money */
    {829, FIRN_PG_KIND_TEXT, true},          /* macaddr */
    {869, FIRN_PG_KIND_TEXT, true},          /* inet */
    {1042, FIRN_PG_KIND_TEXT, false},        /* bpchar */
    {1043, FIRN_PG_KIND_TEXT, false},        /* varchar */
    {1082, FIRN_PG_KIND_DATE, false},        /* date */
    {1083, FIRN_PG_KIND_TIME, false},        /* time */
    {1114, FIRN_PG_KIND_TIMESTAMP, false},   /* timestamp */
    {1184, FIRN_PG_KIND_TIMESTAMPTZ, false}, /* timestamptz */
    {1186, FIRN_PG_KIND_INTERVAL, false},    /* interval */
    {1266, FIRN_PG_KIND_TEXT, true},         /* timetz */
    {1560, FIRN_PG_KIND_TEXT, true},         /* bit */
    {1562, FIRN_PG_KIND_TEXT, true},         /* varbit */
    {1700, FIRN_PG_KIND_DECIMAL, false},     /* numeric (NUMSTR without a fitting typmod) */
    {2950, FIRN_PG_KIND_UUID, false},        /* uuid */
    {3220, FIRN_PG_KIND_TEXT, true},         /* pg_lsn */
    {3614, FIRN_PG_KIND_TEXT, true},         /* tsvector */
    {3615, FIRN_PG_KIND_TEXT, true},         /* tsquery */
    {3802, FIRN_PG_KIND_JSONB, false},       /* jsonb */
    {4072, FIRN_PG_KIND_TEXT, true},         /* jsonpath */
};

/* Extension types known by name (their oids differ per database). */
static const char *const TEXT_BY_NAME[] = {"citext", "hstore", "ltree", "isbn", "ean13"};

const char *firn_pg_kind_name(firn_pg_kind kind)
{
    switch (kind) {
    case FIRN_PG_KIND_BOOL:
        return "boolean";
    case FIRN_PG_KIND_INT2:
        return "int2";
    case FIRN_PG_KIND_INT4:
        return "int4";
    case FIRN_PG_KIND_INT8:
        return "int8";
    case FIRN_PG_KIND_OID:
        return "oid";
    case FIRN_PG_KIND_FLOAT4:
        return "float4";
    case FIRN_PG_KIND_FLOAT8:
        return "float8";
    case FIRN_PG_KIND_DECIMAL:
        return "decimal";
    case FIRN_PG_KIND_NUMSTR:
        return "numeric-string";
    case FIRN_PG_KIND_MONEY:
        return "money";
    case FIRN_PG_KIND_TEXT:
        return "text";
    case FIRN_PG_KIND_JSONB:
        return "jsonb";
    case FIRN_PG_KIND_BYTEA:
        return "bytea";
    case FIRN_PG_KIND_UUID:
        return "uuid";
    case FIRN_PG_KIND_DATE:
        return "date";
    case FIRN_PG_KIND_TIME:
        return "time";
    case FIRN_PG_KIND_TIMESTAMP:
        return "timestamp";
    case FIRN_PG_KIND_TIMESTAMPTZ:
        return "timestamptz";
    case FIRN_PG_KIND_INTERVAL:
        return "interval";
    case FIRN_PG_KIND_ARRAY:
        return "array";
    }
    return "?";
}

static const type_rule *find_rule(uint32_t oid)
{
    for (size_t i = 0; i < sizeof(RULES) / sizeof(RULES[0]); i++) {
        if (RULES[i].oid == oid)
            return &RULES[i];
    }
    return NULL;
}

/* numeric(p,s) with 1 <= p <= 38 and 0 <= s <= p becomes decimal(p,s); anything else (no typmod,
 * p > 38, negative scale or scale above precision, allowed since PostgreSQL 15) stays text. */
static void set_numeric(firn_pg_type *t, int32_t typmod)
{
    if (typmod < 4) {
        t->kind = FIRN_PG_KIND_NUMSTR;
        return;
    }
    int32_t p = ((typmod - 4) >> 16) & 0xffff;
    int32_t s = (((typmod - 4) & 0x7ff) ^ 1024) - 1024;
    if (p < 1 || p > 38 || s < 0 || s > p) {
        t->kind = FIRN_PG_KIND_NUMSTR;
        return;
    }
    t->kind = FIRN_PG_KIND_DECIMAL;
    t->precision = p;
    t->scale = s;
}

typedef struct type_row {
    char typtype;
    uint32_t basetype;
    int32_t typtypmod;
    uint32_t typelem;
    bool is_array;
    char typdelim;
    char typname[64];
    char format[128];
} type_row;

static firn_rc
fetch_type_row(firn_pg_conn *c, uint32_t oid, int32_t typmod, type_row *row, firn_err *err)
{
    static const char SQL[] =
        "SELECT t.typtype, t.typbasetype, t.typtypmod, t.typelem,"
        " (t.typcategory = 'A' AND t.typelem <> 0 AND t.typlen = -1), t.typname,"
        " format_type($1::oid, $2::int4), t.typdelim FROM pg_type t WHERE t.oid = $1::oid";
    char oid_s[16], typmod_s[16];
    snprintf(oid_s, sizeof(oid_s), "%u", oid);
    snprintf(typmod_s, sizeof(typmod_s), "%d", typmod);
    const char *params[2] = {oid_s, typmod_s};
    PGresult *res = NULL;
    FIRN_TRY(firn__pg_query(c, SQL, 2, params, &res, err));
    firn_rc rc = FIRN_OK;
    if (PQntuples(res) != 1) {
        rc = firn_err_set(err, FIRN_ERR_NOT_FOUND, "type with oid %u does not exist", oid);
        goto out;
    }
    int64_t v = 0;
    row->typtype = PQgetvalue(res, 0, 0)[0];
    rc = firn_parse_i64(PQgetvalue(res, 0, 1), strlen(PQgetvalue(res, 0, 1)), &v, err);
    row->basetype = (uint32_t)v;
    if (!rc)
        rc = firn_parse_i32(PQgetvalue(res, 0, 2), strlen(PQgetvalue(res, 0, 2)), &row->typtypmod,
                            err);
    if (!rc)
        rc = firn_parse_i64(PQgetvalue(res, 0, 3), strlen(PQgetvalue(res, 0, 3)), &v, err);
    row->typelem = (uint32_t)v;
    row->is_array = PQgetvalue(res, 0, 4)[0] == 't';
    snprintf(row->typname, sizeof(row->typname), "%s", PQgetvalue(res, 0, 5));
    snprintf(row->format, sizeof(row->format), "%s", PQgetvalue(res, 0, 6));
    row->typdelim = PQgetvalue(res, 0, 7)[0] ? PQgetvalue(res, 0, 7)[0] : ',';
out:
    PQclear(res);
    return rc;
}

static void set_scalar_kind(firn_pg_conn *c, firn_pg_type *t, const type_row *row)
{
    const type_rule *rule = find_rule(t->base_oid);
    if (rule) {
        t->kind = rule->kind;
        t->text_cast = rule->text_cast;
        if (t->kind == FIRN_PG_KIND_DECIMAL)
            set_numeric(t, t->typmod);
        if (t->kind == FIRN_PG_KIND_MONEY) {
            t->precision = 19;
            t->scale = firn__pg_conn_money_scale(c);
        }
        return;
    }
    t->kind = FIRN_PG_KIND_TEXT;
    t->text_cast = true;
    if (row->typtype == 'e') {
        t->text_cast = false; /* enum_send sends the label */
        return;
    }
    if (row->typtype == 'c' || row->typtype == 'r' || row->typtype == 'm')
        return; /* composite, range, multirange: their text form, documented */
    for (size_t i = 0; i < sizeof(TEXT_BY_NAME) / sizeof(TEXT_BY_NAME[0]); i++) {
        if (strcmp(row->typname, TEXT_BY_NAME[i]) == 0)
            return;
    }
    t->unknown = true;
}

#define DOMAIN_DEPTH_MAX 32

static firn_rc resolve(
    firn_pg_conn *c, uint32_t oid, int32_t typmod, int32_t ndims, firn_pg_type **out, firn_err *err)
{
    firn_pg_type *t = firn_calloc(1, sizeof(*t));
    t->oid = oid;
    t->typmod = typmod;
    type_row row;
    firn_rc rc = fetch_type_row(c, oid, typmod, &row, err);
    if (rc)
        goto out;
    t->name = firn_strdup(row.format);
    /* Domains: walk to the base type; the innermost domain typmod applies when none given. */
    for (int depth = 0; row.typtype == 'd'; depth++) {
        if (depth == DOMAIN_DEPTH_MAX) {
            rc = firn_err_set(err, FIRN_ERR_UNSUPPORTED, "domain chain of type \"%s\" too deep",
                              t->name);
            goto out;
        }
        if (t->typmod < 0)
            t->typmod = row.typtypmod;
        oid = row.basetype;
        rc = fetch_type_row(c, oid, t->typmod, &row, err);
        if (rc)
            goto out;
    }
    t->base_oid = oid;
    t->typdelim = row.typdelim;
    if (row.is_array) {
        t->kind = FIRN_PG_KIND_ARRAY;
        t->ndims = ndims > 1 ? ndims : 1;
        rc = resolve(c, row.typelem, t->typmod, 0, &t->elem, err);
        if (rc)
            goto out;
        t->text_cast = t->elem->text_cast;
        t->unknown = t->elem->unknown;
        if (t->elem->kind == FIRN_PG_KIND_ARRAY) {
            /* Arrays of arrays that are scalars to PostgreSQL (int2vector[], oidvector[], arrays
             * of domains over arrays): their text form, read as ::text in both paths. */
            firn_pg_type_free(t->elem);
            t->elem = NULL;
            t->kind = FIRN_PG_KIND_TEXT;
            t->ndims = 0;
            t->text_cast = true;
            t->unknown = false;
        }
    } else {
        set_scalar_kind(c, t, &row);
    }
out:
    if (rc) {
        firn_pg_type_free(t);
        t = NULL;
    }
    *out = t;
    return rc;
}

firn_rc firn_pg_type_resolve(
    firn_pg_conn *c, uint32_t oid, int32_t typmod, int32_t ndims, firn_pg_type **out, firn_err *err)
{
    return resolve(c, oid, typmod, ndims, out, err);
}

void firn_pg_type_free(firn_pg_type *t)
{
    if (!t)
        return;
    firn_pg_type_free(t->elem);
    firn_free(t->name);
    firn_free(t);
}

firn_pg_type *firn_pg_type_clone(const firn_pg_type *t)
{
    if (!t)
        return NULL;
    firn_pg_type *c = firn_memdup(t, sizeof(*t));
    c->name = t->name ? firn_strdup(t->name) : NULL;
    c->elem = firn_pg_type_clone(t->elem);
    return c;
}

static firn_field *
scalar_field(const firn_pg_type *t, int32_t id, const char *name, bool required, int32_t *next_id)
{
    switch (t->kind) {
    case FIRN_PG_KIND_BOOL:
        return firn_field_new(id, name, FIRN_TYPE_BOOLEAN, required);
    case FIRN_PG_KIND_INT2:
    case FIRN_PG_KIND_INT4:
        return firn_field_new(id, name, FIRN_TYPE_INT, required);
    case FIRN_PG_KIND_INT8:
    case FIRN_PG_KIND_OID:
        return firn_field_new(id, name, FIRN_TYPE_LONG, required);
    case FIRN_PG_KIND_FLOAT4:
        return firn_field_new(id, name, FIRN_TYPE_FLOAT, required);
    case FIRN_PG_KIND_FLOAT8:
        return firn_field_new(id, name, FIRN_TYPE_DOUBLE, required);
    case FIRN_PG_KIND_DECIMAL:
    case FIRN_PG_KIND_MONEY:
        return firn_field_new_decimal(id, name, t->precision, t->scale, required);
    case FIRN_PG_KIND_BYTEA:
        return firn_field_new(id, name, FIRN_TYPE_BINARY, required);
    case FIRN_PG_KIND_UUID:
        return firn_field_new(id, name, FIRN_TYPE_UUID, required);
    case FIRN_PG_KIND_DATE:
        return firn_field_new(id, name, FIRN_TYPE_DATE, required);
    case FIRN_PG_KIND_TIME:
        return firn_field_new(id, name, FIRN_TYPE_TIME, required);
    case FIRN_PG_KIND_TIMESTAMP:
        return firn_field_new(id, name, FIRN_TYPE_TIMESTAMP, required);
    case FIRN_PG_KIND_TIMESTAMPTZ:
        return firn_field_new(id, name, FIRN_TYPE_TIMESTAMPTZ, required);
    case FIRN_PG_KIND_INTERVAL: {
        firn_field *f = firn_field_new(id, name, FIRN_TYPE_STRUCT, required);
        firn_field_add(f, firn_field_new((*next_id)++, "months", FIRN_TYPE_INT, false));
        firn_field_add(f, firn_field_new((*next_id)++, "days", FIRN_TYPE_INT, false));
        firn_field_add(f, firn_field_new((*next_id)++, "microseconds", FIRN_TYPE_LONG, false));
        return f;
    }
    case FIRN_PG_KIND_NUMSTR:
    case FIRN_PG_KIND_TEXT:
    case FIRN_PG_KIND_JSONB:
    case FIRN_PG_KIND_ARRAY:
        break;
    }
    return firn_field_new(id, name, FIRN_TYPE_STRING, required);
}

firn_field *firn_pg_type_field(
    const firn_pg_type *t, int32_t id, const char *name, bool required, int32_t *next_id)
{
    if (t->kind != FIRN_PG_KIND_ARRAY)
        return scalar_field(t, id, name, required, next_id);
    /* Declared dimensions become nested lists; elements are optional (arrays hold NULLs). */
    firn_field *top = firn_field_new(id, name, FIRN_TYPE_LIST, required);
    firn_field *cur = top;
    for (int32_t d = 1; d < t->ndims; d++) {
        firn_field *inner = firn_field_new((*next_id)++, "element", FIRN_TYPE_LIST, false);
        firn_field_add(cur, inner);
        cur = inner;
    }
    int32_t elem_id = (*next_id)++;
    firn_field_add(cur, scalar_field(t->elem, elem_id, "element", false, next_id));
    return top;
}
