/* SPDX-License-Identifier: Apache-2.0 */
/* Partition transforms (format/spec.md "Partition Transforms", Appendix B), partition specs,
 * their result types and Hive-style partition paths. */
#include "ice_manifest_int.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#define US_PER_HOUR 3600000000LL
#define US_PER_DAY  86400000000LL

static const char *const KIND_NAMES[] = {
    [FIRN_TRANSFORM_IDENTITY] = "identity", [FIRN_TRANSFORM_BUCKET] = "bucket",
    [FIRN_TRANSFORM_TRUNCATE] = "truncate", [FIRN_TRANSFORM_YEAR] = "year",
    [FIRN_TRANSFORM_MONTH] = "month",       [FIRN_TRANSFORM_DAY] = "day",
    [FIRN_TRANSFORM_HOUR] = "hour",         [FIRN_TRANSFORM_VOID] = "void",
};

firn_rc firn_transform_parse(const char *s, firn_transform *out, firn_err *err)
{
    size_t len = strlen(s);
    for (size_t k = 0; k < sizeof KIND_NAMES / sizeof KIND_NAMES[0]; k++) {
        size_t nl = strlen(KIND_NAMES[k]);
        if (strncmp(s, KIND_NAMES[k], nl) != 0)
            continue;
        bool takes_param = k == FIRN_TRANSFORM_BUCKET || k == FIRN_TRANSFORM_TRUNCATE;
        if (!takes_param && len == nl) {
            *out = (firn_transform){(firn_transform_kind)k, 0};
            return FIRN_OK;
        }
        if (takes_param && len > nl + 2 && s[nl] == '[' && s[len - 1] == ']') {
            int32_t param = 0;
            firn_err perr = {0};
            if (firn_parse_i32(s + nl + 1, len - nl - 2, &param, &perr) || param <= 0)
                break;
            *out = (firn_transform){(firn_transform_kind)k, param};
            return FIRN_OK;
        }
    }
    return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "unsupported partition transform \"%.64s\"", s);
}

void firn_transform_format(firn_transform t, char *out, size_t out_cap)
{
    if (t.kind == FIRN_TRANSFORM_BUCKET || t.kind == FIRN_TRANSFORM_TRUNCATE)
        snprintf(out, out_cap, "%s[%d]", KIND_NAMES[t.kind], t.param);
    else
        snprintf(out, out_cap, "%s", KIND_NAMES[t.kind]);
}

static bool is_temporal(firn_type t)
{
    return t == FIRN_TYPE_DATE || t == FIRN_TYPE_TIMESTAMP || t == FIRN_TYPE_TIMESTAMPTZ ||
           t == FIRN_TYPE_TIMESTAMP_NS || t == FIRN_TYPE_TIMESTAMPTZ_NS;
}

static bool transform_fits(firn_transform t, firn_type s)
{
    switch (t.kind) {
    case FIRN_TRANSFORM_IDENTITY:
    case FIRN_TRANSFORM_VOID:
        return true;
    case FIRN_TRANSFORM_BUCKET:
        return s != FIRN_TYPE_BOOLEAN && s != FIRN_TYPE_FLOAT && s != FIRN_TYPE_DOUBLE;
    case FIRN_TRANSFORM_TRUNCATE:
        return s == FIRN_TYPE_INT || s == FIRN_TYPE_LONG || s == FIRN_TYPE_DECIMAL ||
               s == FIRN_TYPE_STRING || s == FIRN_TYPE_BINARY;
    case FIRN_TRANSFORM_HOUR:
        return is_temporal(s) && s != FIRN_TYPE_DATE;
    default:
        return is_temporal(s);
    }
}

firn_rc firn_transform_result_type(firn_transform t, firn_ptype src, firn_ptype *out, firn_err *err)
{
    if (!firn__type_is_primitive(src.type) || !transform_fits(t, src.type)) {
        char tn[32], sn[48];
        firn_transform_format(t, tn, sizeof tn);
        firn_ptype_format(src, sn, sizeof sn);
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "transform %s cannot apply to type %s", tn,
                            sn);
    }
    switch (t.kind) {
    case FIRN_TRANSFORM_BUCKET:
    case FIRN_TRANSFORM_YEAR:
    case FIRN_TRANSFORM_MONTH:
    case FIRN_TRANSFORM_HOUR:
        *out = (firn_ptype){FIRN_TYPE_INT, 0, 0, 0};
        break;
    case FIRN_TRANSFORM_DAY:
        *out = (firn_ptype){FIRN_TYPE_DATE, 0, 0, 0};
        break;
    default:
        *out = src;
        break;
    }
    return FIRN_OK;
}

firn_rc firn_bucket_hash(const firn_value *v, int32_t *out, firn_err *err)
{
    uint8_t buf[16];
    const void *p = buf;
    size_t n = 8;
    int64_t x = v->i;
    switch (v->type.type) {
    case FIRN_TYPE_TIMESTAMP_NS:
    case FIRN_TYPE_TIMESTAMPTZ_NS:
        x = firn__floor_div(x, 1000);
        /* fallthrough */
    case FIRN_TYPE_INT:
    case FIRN_TYPE_LONG:
    case FIRN_TYPE_DATE:
    case FIRN_TYPE_TIME:
    case FIRN_TYPE_TIMESTAMP:
    case FIRN_TYPE_TIMESTAMPTZ:
        for (int i = 0; i < 8; i++)
            buf[i] = (uint8_t)((uint64_t)x >> (8 * i));
        break;
    case FIRN_TYPE_DECIMAL:
        n = firn__dec_min_bytes(firn__dec_get(v), buf);
        break;
    case FIRN_TYPE_STRING:
    case FIRN_TYPE_BINARY:
    case FIRN_TYPE_FIXED:
    case FIRN_TYPE_UUID:
        p = v->bytes.ptr;
        n = v->bytes.len;
        break;
    default:
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "cannot bucket a value of type %d",
                            (int)v->type.type);
    }
    *out = (int32_t)firn_murmur3_32(p, n, 0);
    return FIRN_OK;
}

/* Byte length of the first w code points of UTF-8 text. */
static size_t utf8_prefix(const uint8_t *p, size_t len, int32_t w)
{
    size_t i = 0;
    for (int32_t cp = 0; cp < w && i < len; cp++) {
        i++;
        while (i < len && (p[i] & 0xc0) == 0x80)
            i++;
    }
    return i;
}

static firn_rc apply_truncate(firn_transform t, const firn_value *in, firn_value *out)
{
    int64_t w = t.param;
    switch (in->type.type) {
    case FIRN_TYPE_INT:
    case FIRN_TYPE_LONG:
        out->i = (int64_t)((uint64_t)in->i - (uint64_t)(((in->i % w) + w) % w));
        break;
    case FIRN_TYPE_DECIMAL: {
        firn__i128 x = firn__dec_get(in);
        firn__dec_set(out, x - (((x % w) + w) % w));
        break;
    }
    case FIRN_TYPE_STRING:
        out->bytes.len = utf8_prefix(in->bytes.ptr, in->bytes.len, t.param);
        break;
    default: /* binary */
        if (out->bytes.len > (size_t)w)
            out->bytes.len = (size_t)w;
        break;
    }
    return FIRN_OK;
}

static firn_rc apply_time(firn_transform t, const firn_value *in, firn_value *out)
{
    int64_t us = in->i;
    if (in->type.type == FIRN_TYPE_TIMESTAMP_NS || in->type.type == FIRN_TYPE_TIMESTAMPTZ_NS)
        us = firn__floor_div(in->i, 1000);
    int64_t days = in->type.type == FIRN_TYPE_DATE ? in->i : firn__floor_div(us, US_PER_DAY);
    int64_t y;
    int m, d;
    switch (t.kind) {
    case FIRN_TRANSFORM_HOUR:
        out->i = firn__floor_div(us, US_PER_HOUR);
        break;
    case FIRN_TRANSFORM_DAY:
        out->i = days;
        break;
    case FIRN_TRANSFORM_MONTH:
        firn__civil_from_days(days, &y, &m, &d);
        out->i = (y - 1970) * 12 + (m - 1);
        break;
    default:
        firn__civil_from_days(days, &y, &m, &d);
        out->i = y - 1970;
        break;
    }
    return FIRN_OK;
}

firn_rc firn_transform_apply(firn_transform t, const firn_value *in, firn_value *out, firn_err *err)
{
    firn_ptype rt;
    FIRN_TRY(firn_transform_result_type(t, in->type, &rt, err));
    if (in->is_null || t.kind == FIRN_TRANSFORM_VOID) {
        *out = firn_value_null(rt);
        return FIRN_OK;
    }
    *out = *in;
    out->type = rt;
    switch (t.kind) {
    case FIRN_TRANSFORM_IDENTITY:
        return FIRN_OK;
    case FIRN_TRANSFORM_BUCKET: {
        int32_t h = 0;
        FIRN_TRY(firn_bucket_hash(in, &h, err));
        *out = firn_value_null(rt);
        out->is_null = false;
        out->i = (h & INT32_MAX) % t.param;
        return FIRN_OK;
    }
    case FIRN_TRANSFORM_TRUNCATE:
        return apply_truncate(t, in, out);
    default: {
        firn_value tmp = firn_value_null(rt);
        tmp.is_null = false;
        *out = tmp;
        return apply_time(t, in, out);
    }
    }
}

firn_partition_spec *firn_partition_spec_new(int32_t spec_id)
{
    firn_partition_spec *s = firn_calloc(1, sizeof *s);
    s->spec_id = spec_id;
    return s;
}

void firn_partition_spec_add(firn_partition_spec *spec,
                             int32_t source_id,
                             int32_t field_id,
                             const char *name,
                             firn_transform transform)
{
    spec->fields = firn_reallocarray(spec->fields, spec->n_fields + 1, sizeof *spec->fields);
    spec->fields[spec->n_fields++] =
        (firn_partition_field){source_id, field_id, firn_strdup(name), transform};
}

void firn_partition_spec_free(firn_partition_spec *spec)
{
    if (!spec)
        return;
    for (size_t i = 0; i < spec->n_fields; i++)
        firn_free(spec->fields[i].name);
    firn_free(spec->fields);
    firn_free(spec);
}

static int dump_to_buf(const char *p, size_t len, void *data)
{
    return firn_buf_append(data, p, len) ? -1 : 0;
}

firn_rc firn_partition_spec_fields_json(const firn_partition_spec *spec, firn_buf *out)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < spec->n_fields; i++) {
        const firn_partition_field *f = &spec->fields[i];
        char tn[32];
        firn_transform_format(f->transform, tn, sizeof tn);
        json_array_append_new(arr, json_pack("{s:s, s:s, s:i, s:i}", "name", f->name, "transform",
                                             tn, "source-id", (int)f->source_id, "field-id",
                                             (int)f->field_id));
    }
    int jrc = json_dump_callback(arr, dump_to_buf, out, JSON_COMPACT);
    json_decref(arr);
    return jrc ? FIRN_ERR_TOO_LARGE : FIRN_OK;
}

const firn_field *firn__schema_find(const firn_field *schema, int32_t id)
{
    if (!schema)
        return NULL;
    for (size_t i = 0; i < schema->n_children; i++) {
        const firn_field *c = schema->children[i];
        if (c->id == id)
            return c;
        const firn_field *found = firn__schema_find(c, id);
        if (found)
            return found;
    }
    return NULL;
}

firn_rc firn_partition_spec_types(const firn_partition_spec *spec,
                                  const firn_field *schema,
                                  firn_ptype *out,
                                  firn_err *err)
{
    for (size_t i = 0; i < spec->n_fields; i++) {
        const firn_partition_field *pf = &spec->fields[i];
        const firn_field *src = firn__schema_find(schema, pf->source_id);
        if (!src || !firn__type_is_primitive(src->type))
            return firn_err_set(err, FIRN_ERR_SCHEMA,
                                "partition field \"%s\" has no primitive source column %d",
                                pf->name, pf->source_id);
        FIRN_TRY(firn_transform_result_type(pf->transform, firn_ptype_of(src), &out[i], err));
    }
    return FIRN_OK;
}

/* URL-encodes like Java's URLEncoder (UTF-8): alphanumerics and ".-*_" stay, space is '+'. */
static firn_rc url_escape(const uint8_t *p, size_t len, firn_buf *out)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < len; i++) {
        uint8_t c = p[i];
        bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == '*' || c == '_';
        if (keep) {
            FIRN_TRY(firn_wr_u8(out, c));
        } else if (c == ' ') {
            FIRN_TRY(firn_wr_u8(out, '+'));
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            FIRN_TRY(firn_buf_append(out, e, 3));
        }
    }
    return FIRN_OK;
}

firn_rc firn_partition_path(const firn_partition_spec *spec,
                            const firn_value *values,
                            firn_buf *out,
                            firn_err *err)
{
    firn_buf tmp;
    firn_buf_init(&tmp, 1 << 20);
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; !rc && i < spec->n_fields; i++) {
        const firn_partition_field *pf = &spec->fields[i];
        firn_buf_reset(&tmp);
        rc = firn__value_human(&values[i], pf->transform, &tmp);
        if (!rc && i > 0)
            rc = firn_wr_u8(out, '/');
        if (!rc)
            rc = url_escape((const uint8_t *)pf->name, strlen(pf->name), out);
        if (!rc)
            rc = firn_wr_u8(out, '=');
        if (!rc)
            rc = url_escape(tmp.data ? tmp.data : (const uint8_t *)"", tmp.len, out);
    }
    firn_buf_deinit(&tmp);
    if (rc)
        return firn_err_set(err, rc, "partition path too long");
    return FIRN_OK;
}

static firn_rc spec_field_from_json(json_t *f, firn_partition_spec *spec, firn_err *err)
{
    json_t *name = json_object_get(f, "name");
    json_t *tr = json_object_get(f, "transform");
    json_t *src = json_object_get(f, "source-id");
    json_t *fid = json_object_get(f, "field-id");
    if (!json_is_string(name) || !json_is_string(tr) || !json_is_integer(src))
        return firn_err_set(err, FIRN_ERR_PARSE, "malformed partition field in manifest header");
    firn_transform t;
    FIRN_TRY(firn_transform_parse(json_string_value(tr), &t, err));
    int32_t field_id =
        json_is_integer(fid) ? (int32_t)json_integer_value(fid) : (int32_t)(1000 + spec->n_fields);
    firn_partition_spec_add(spec, (int32_t)json_integer_value(src), field_id,
                            json_string_value(name), t);
    return FIRN_OK;
}

firn_rc firn__partition_spec_parse_fields(const char *text,
                                          int32_t spec_id,
                                          firn_partition_spec **out,
                                          firn_err *err)
{
    if (!text)
        return firn_err_set(err, FIRN_ERR_PARSE, "manifest has no partition-spec header");
    json_t *root = json_loads(text, 0, NULL);
    json_t *fields = json_is_object(root) ? json_object_get(root, "fields") : root;
    if (!json_is_array(fields)) {
        json_decref(root);
        return firn_err_set(err, FIRN_ERR_PARSE, "malformed partition-spec header");
    }
    firn_partition_spec *spec = firn_partition_spec_new(spec_id);
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; !rc && i < json_array_size(fields); i++)
        rc = spec_field_from_json(json_array_get(fields, i), spec, err);
    json_decref(root);
    if (rc) {
        firn_partition_spec_free(spec);
        return rc;
    }
    *out = spec;
    return FIRN_OK;
}
