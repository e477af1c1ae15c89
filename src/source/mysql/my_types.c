/* SPDX-License-Identifier: Apache-2.0 */
/* The MySQL/MariaDB type mapping (docs/type-mapping.md "MySQL and MariaDB"): which Iceberg type
 * each column type gets, chosen so that every value is stored exactly. */
#include "my_int.h"

#include <string.h>
#include <strings.h>

const char *firn_my_kind_name(firn_my_kind kind)
{
    switch (kind) {
    case FIRN_MY_KIND_INT:
        return "int";
    case FIRN_MY_KIND_LONG:
        return "long";
    case FIRN_MY_KIND_ULONG:
        return "ulong";
    case FIRN_MY_KIND_DECIMAL:
        return "decimal";
    case FIRN_MY_KIND_DECTEXT:
        return "decimal-text";
    case FIRN_MY_KIND_FLOAT:
        return "float";
    case FIRN_MY_KIND_DOUBLE:
        return "double";
    case FIRN_MY_KIND_DATE:
        return "date";
    case FIRN_MY_KIND_DATETIME:
        return "datetime";
    case FIRN_MY_KIND_TIMESTAMP:
        return "timestamp";
    case FIRN_MY_KIND_TIME:
        return "time";
    case FIRN_MY_KIND_YEAR:
        return "year";
    case FIRN_MY_KIND_STRING:
        return "string";
    case FIRN_MY_KIND_FIXED:
        return "fixed";
    case FIRN_MY_KIND_BINARY:
        return "binary";
    case FIRN_MY_KIND_BOOL:
        return "bit1";
    case FIRN_MY_KIND_BITS:
        return "bits";
    case FIRN_MY_KIND_UBITS:
        return "bits64";
    case FIRN_MY_KIND_GEOMETRY:
        return "geometry";
    }
    return "?";
}

typedef struct type_rule {
    const char *name;
    firn_my_kind kind;
} type_rule;

/* DATA_TYPE as information_schema spells it (MySQL 8 and MariaDB 10.11) -> kind. Integers,
 * DECIMAL and BIT are decided by signedness and width in resolve_numeric. */
static const type_rule RULES[] = {
    {"float", FIRN_MY_KIND_FLOAT},
    {"double", FIRN_MY_KIND_DOUBLE},
    {"real", FIRN_MY_KIND_DOUBLE},
    {"date", FIRN_MY_KIND_DATE},
    {"datetime", FIRN_MY_KIND_DATETIME},
    {"timestamp", FIRN_MY_KIND_TIMESTAMP},
    {"time", FIRN_MY_KIND_TIME},
    {"year", FIRN_MY_KIND_YEAR},
    {"char", FIRN_MY_KIND_STRING},
    {"varchar", FIRN_MY_KIND_STRING},
    {"tinytext", FIRN_MY_KIND_STRING},
    {"text", FIRN_MY_KIND_STRING},
    {"mediumtext", FIRN_MY_KIND_STRING},
    {"longtext", FIRN_MY_KIND_STRING},
    {"enum", FIRN_MY_KIND_STRING},
    {"set", FIRN_MY_KIND_STRING},
    {"json", FIRN_MY_KIND_STRING},
    {"uuid", FIRN_MY_KIND_STRING},  /* MariaDB 10.7+: its text form */
    {"inet4", FIRN_MY_KIND_STRING}, /* MariaDB 10.10+ */
    {"inet6", FIRN_MY_KIND_STRING}, /* MariaDB 10.5+ */
    {"binary", FIRN_MY_KIND_FIXED},
    {"varbinary", FIRN_MY_KIND_BINARY},
    {"tinyblob", FIRN_MY_KIND_BINARY},
    {"blob", FIRN_MY_KIND_BINARY},
    {"mediumblob", FIRN_MY_KIND_BINARY},
    {"longblob", FIRN_MY_KIND_BINARY},
    {"geometry", FIRN_MY_KIND_GEOMETRY},
    {"point", FIRN_MY_KIND_GEOMETRY},
    {"linestring", FIRN_MY_KIND_GEOMETRY},
    {"polygon", FIRN_MY_KIND_GEOMETRY},
    {"multipoint", FIRN_MY_KIND_GEOMETRY},
    {"multilinestring", FIRN_MY_KIND_GEOMETRY},
    {"multipolygon", FIRN_MY_KIND_GEOMETRY},
    {"geometrycollection", FIRN_MY_KIND_GEOMETRY},
    {"geomcollection", FIRN_MY_KIND_GEOMETRY},
};

static bool resolve_numeric(const char *dt, bool uns, int64_t prec, int64_t scale, firn_my_type *t)
{
    if (!strcasecmp(dt, "tinyint") || !strcasecmp(dt, "smallint") || !strcasecmp(dt, "mediumint")) {
        t->kind = FIRN_MY_KIND_INT;
    } else if (!strcasecmp(dt, "int") || !strcasecmp(dt, "integer")) {
        t->kind = uns ? FIRN_MY_KIND_LONG : FIRN_MY_KIND_INT;
    } else if (!strcasecmp(dt, "bigint")) {
        t->kind = uns ? FIRN_MY_KIND_ULONG : FIRN_MY_KIND_LONG;
    } else if (!strcasecmp(dt, "decimal") || !strcasecmp(dt, "numeric")) {
        t->precision = (int32_t)(prec > 0 ? prec : 10);
        t->scale = (int32_t)(scale > 0 ? scale : 0);
        t->kind = t->precision <= 38 ? FIRN_MY_KIND_DECIMAL : FIRN_MY_KIND_DECTEXT;
    } else if (!strcasecmp(dt, "bit")) {
        t->precision = (int32_t)(prec > 0 ? prec : 1);
        t->kind = t->precision == 1    ? FIRN_MY_KIND_BOOL
                  : t->precision <= 63 ? FIRN_MY_KIND_BITS
                                       : FIRN_MY_KIND_UBITS;
    } else {
        return false;
    }
    return true;
}

firn_rc firn_my_type_resolve(const char *data_type,
                             const char *column_type,
                             int64_t numeric_precision,
                             int64_t numeric_scale,
                             int64_t datetime_precision,
                             int64_t char_max_length,
                             firn_my_type *out,
                             firn_err *err)
{
    memset(out, 0, sizeof(*out));
    const char *ct = column_type ? column_type : data_type;
    out->is_unsigned = strstr(ct, "unsigned") != NULL;
    if (!resolve_numeric(data_type, out->is_unsigned, numeric_precision, numeric_scale, out)) {
        for (size_t i = 0; i < sizeof(RULES) / sizeof(RULES[0]); i++) {
            if (!strcasecmp(data_type, RULES[i].name)) {
                out->kind = RULES[i].kind;
                break;
            }
        }
    }
    if (out->kind == 0)
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "type \"%s\" is not supported", ct);
    if (out->kind == FIRN_MY_KIND_DATETIME || out->kind == FIRN_MY_KIND_TIMESTAMP ||
        out->kind == FIRN_MY_KIND_TIME)
        out->scale = (int32_t)(datetime_precision > 0 ? datetime_precision : 0);
    if (out->kind == FIRN_MY_KIND_FIXED) {
        out->precision = (int32_t)(char_max_length > 0 ? char_max_length : 0);
        if (out->precision == 0)
            out->kind = FIRN_MY_KIND_BINARY; /* BINARY(0): only '' and NULL; fixed[0] is no type */
    }
    out->data_type = firn_strdup(data_type);
    out->column_type = firn_strdup(ct);
    return FIRN_OK;
}

void firn_my_type_deinit(firn_my_type *t)
{
    if (!t)
        return;
    firn_free(t->data_type);
    firn_free(t->column_type);
    memset(t, 0, sizeof(*t));
}

void firn_my_type_copy(firn_my_type *dst, const firn_my_type *src)
{
    *dst = *src;
    dst->data_type = src->data_type ? firn_strdup(src->data_type) : NULL;
    dst->column_type = src->column_type ? firn_strdup(src->column_type) : NULL;
}

bool firn_my_kind_zero_dates(firn_my_kind k)
{
    return k == FIRN_MY_KIND_DATE || k == FIRN_MY_KIND_DATETIME || k == FIRN_MY_KIND_TIMESTAMP;
}

firn_field *firn_my_type_field(const firn_my_type *t, int32_t id, const char *name, bool not_null)
{
    const bool req = not_null && !firn_my_kind_zero_dates(t->kind);
    switch (t->kind) {
    case FIRN_MY_KIND_INT:
    case FIRN_MY_KIND_YEAR:
        return firn_field_new(id, name, FIRN_TYPE_INT, req);
    case FIRN_MY_KIND_LONG:
    case FIRN_MY_KIND_TIME:
    case FIRN_MY_KIND_BITS:
        return firn_field_new(id, name, FIRN_TYPE_LONG, req);
    case FIRN_MY_KIND_ULONG:
    case FIRN_MY_KIND_UBITS:
        return firn_field_new_decimal(id, name, 20, 0, req);
    case FIRN_MY_KIND_DECIMAL:
        return firn_field_new_decimal(id, name, t->precision, t->scale, req);
    case FIRN_MY_KIND_FLOAT:
        return firn_field_new(id, name, FIRN_TYPE_FLOAT, req);
    case FIRN_MY_KIND_DOUBLE:
        return firn_field_new(id, name, FIRN_TYPE_DOUBLE, req);
    case FIRN_MY_KIND_DATE:
        return firn_field_new(id, name, FIRN_TYPE_DATE, req);
    case FIRN_MY_KIND_DATETIME:
        return firn_field_new(id, name, FIRN_TYPE_TIMESTAMP, req);
    case FIRN_MY_KIND_TIMESTAMP:
        return firn_field_new(id, name, FIRN_TYPE_TIMESTAMPTZ, req);
    case FIRN_MY_KIND_FIXED:
        return firn_field_new_fixed(id, name, t->precision, req);
    case FIRN_MY_KIND_BINARY:
    case FIRN_MY_KIND_GEOMETRY:
        return firn_field_new(id, name, FIRN_TYPE_BINARY, req);
    case FIRN_MY_KIND_BOOL:
        return firn_field_new(id, name, FIRN_TYPE_BOOLEAN, req);
    case FIRN_MY_KIND_DECTEXT:
    case FIRN_MY_KIND_STRING:
        break;
    }
    return firn_field_new(id, name, FIRN_TYPE_STRING, req);
}
