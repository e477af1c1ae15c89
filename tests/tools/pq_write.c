/* SPDX-License-Identifier: Apache-2.0 */
/* Test tool for the Parquet interop tests: `pq_write spec.json out.parquet` writes the rows of a
 * JSON spec ({"schema": [...], "rows": [[...]], "options": {...}}) with firn's writer and prints
 * the file's Iceberg metrics as JSON; `pq_write gen N out.parquet` writes N deterministic rows
 * (formulas mirrored in tests/interop/test_parquet_roundtrip.py). */
#include "firn/parquet.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const firn_err *err)
{
    fprintf(stderr, "pq_write: %s: %s\n", what, err ? err->msg : "");
    exit(2);
}

static firn_rc file_write(void *ctx, const void *p, size_t len, firn_err *err)
{
    if (fwrite(p, 1, len, (FILE *)ctx) != len)
        return firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not write");
    return FIRN_OK;
}

static const struct {
    const char *name;
    firn_type type;
} TYPES[] = {
    {"boolean", FIRN_TYPE_BOOLEAN},
    {"int", FIRN_TYPE_INT},
    {"long", FIRN_TYPE_LONG},
    {"float", FIRN_TYPE_FLOAT},
    {"double", FIRN_TYPE_DOUBLE},
    {"decimal", FIRN_TYPE_DECIMAL},
    {"date", FIRN_TYPE_DATE},
    {"time", FIRN_TYPE_TIME},
    {"timestamp", FIRN_TYPE_TIMESTAMP},
    {"timestamptz", FIRN_TYPE_TIMESTAMPTZ},
    {"timestamp_ns", FIRN_TYPE_TIMESTAMP_NS},
    {"timestamptz_ns", FIRN_TYPE_TIMESTAMPTZ_NS},
    {"string", FIRN_TYPE_STRING},
    {"uuid", FIRN_TYPE_UUID},
    {"fixed", FIRN_TYPE_FIXED},
    {"binary", FIRN_TYPE_BINARY},
    {"struct", FIRN_TYPE_STRUCT},
    {"list", FIRN_TYPE_LIST},
    {"map", FIRN_TYPE_MAP},
};

static firn_field *parse_field(json_t *j)
{
    const char *tname = json_string_value(json_object_get(j, "type"));
    const char *name = json_string_value(json_object_get(j, "name"));
    int32_t id = (int32_t)json_integer_value(json_object_get(j, "id"));
    bool req = json_is_true(json_object_get(j, "required"));
    firn_field *f = NULL;
    for (size_t i = 0; tname && i < sizeof(TYPES) / sizeof(TYPES[0]); i++) {
        if (strcmp(TYPES[i].name, tname) != 0)
            continue;
        if (TYPES[i].type == FIRN_TYPE_DECIMAL)
            f = firn_field_new_decimal(
                id, name, (int32_t)json_integer_value(json_object_get(j, "precision")),
                (int32_t)json_integer_value(json_object_get(j, "scale")), req);
        else if (TYPES[i].type == FIRN_TYPE_FIXED)
            f = firn_field_new_fixed(
                id, name, (int32_t)json_integer_value(json_object_get(j, "length")), req);
        else
            f = firn_field_new(id, name, TYPES[i].type, req);
    }
    if (!f)
        die("unknown type", NULL);
    json_t *kids = json_object_get(j, "children");
    for (size_t i = 0; i < json_array_size(kids); i++)
        firn_field_add(f, parse_field(json_array_get(kids, i)));
    return f;
}

static size_t unhex(const char *s, uint8_t *out, size_t cap)
{
    size_t n = strlen(s) / 2;
    if (n > cap)
        die("hex value too long", NULL);
    for (size_t i = 0; i < n; i++) {
        unsigned v = 0;
        for (int k = 0; k < 2; k++) {
            char c = s[2 * i + k];
            v = v * 16 + (unsigned)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
        }
        out[i] = (uint8_t)v;
    }
    return n;
}

static double num(json_t *v)
{
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        return strcmp(s, "NaN") == 0 ? NAN : s[0] == '-' ? -INFINITY : INFINITY;
    }
    return json_number_value(v);
}

/* Parses a decimal integer string into 128 bits. */
static void parse_i128(const char *s, int64_t *hi, uint64_t *lo)
{
    bool neg = *s == '-';
    unsigned __int128 v = 0;
    for (s += neg; *s; s++)
        v = v * 10 + (unsigned)(*s - '0');
    if (neg)
        v = ~v + 1;
    *hi = (int64_t)(uint64_t)(v >> 64);
    *lo = (uint64_t)v;
}

static void append(firn_column *c, json_t *v)
{
    const firn_field *f = firn_column_field(c);
    uint8_t buf[4096];
    if (json_is_null(v)) {
        firn_column_append_null(c);
        return;
    }
    switch (f->type) {
    case FIRN_TYPE_BOOLEAN:
        firn_column_append_bool(c, json_is_true(v));
        break;
    case FIRN_TYPE_INT:
    case FIRN_TYPE_DATE:
        firn_column_append_i32(c, (int32_t)json_integer_value(v));
        break;
    case FIRN_TYPE_FLOAT:
        firn_column_append_float(c, (float)num(v));
        break;
    case FIRN_TYPE_DOUBLE:
        firn_column_append_double(c, num(v));
        break;
    case FIRN_TYPE_DECIMAL: {
        int64_t hi;
        uint64_t lo;
        parse_i128(json_string_value(v), &hi, &lo);
        if (f->precision <= 18)
            firn_column_append_i64(c, (int64_t)lo);
        else
            firn_column_append_i128(c, hi, lo);
        break;
    }
    case FIRN_TYPE_STRING:
        firn_column_append_bytes(c, json_string_value(v), json_string_length(v));
        break;
    case FIRN_TYPE_UUID:
    case FIRN_TYPE_FIXED:
    case FIRN_TYPE_BINARY:
        firn_column_append_bytes(c, buf, unhex(json_string_value(v), buf, sizeof(buf)));
        break;
    case FIRN_TYPE_STRUCT:
        for (size_t i = 0; i < firn_column_children(c); i++)
            append(firn_column_child(c, i), json_array_get(v, i));
        firn_column_struct_end(c);
        break;
    case FIRN_TYPE_LIST:
    case FIRN_TYPE_MAP:
        firn_column_list_begin(c);
        for (size_t i = 0; i < json_array_size(v); i++) {
            json_t *e = json_array_get(v, i);
            if (f->type == FIRN_TYPE_LIST) {
                append(firn_column_child(c, 0), e);
            } else {
                append(firn_column_child(c, 0), json_array_get(e, 0));
                append(firn_column_child(c, 1), json_array_get(e, 1));
            }
        }
        firn_column_list_end(c);
        break;
    default: /* long, time, timestamps */
        firn_column_append_i64(c, (int64_t)json_integer_value(v));
        break;
    }
}

static void hex(const uint8_t *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", p[i]);
    out[2 * n] = 0;
}

static void print_metrics(const firn_pq_file_metrics *m)
{
    char lo[2 * FIRN_PQ_BOUND_MAX + 1], up[2 * FIRN_PQ_BOUND_MAX + 1];
    printf("{\"record_count\": %" PRIu64 ", \"file_size\": %" PRIu64 ", \"split_offsets\": [",
           m->record_count, m->file_size_bytes);
    for (size_t i = 0; i < m->n_split_offsets; i++)
        printf("%s%" PRId64, i ? ", " : "", m->split_offsets[i]);
    printf("], \"fields\": [");
    for (size_t i = 0; i < m->n_fields; i++) {
        const firn_pq_field_metrics *f = &m->fields[i];
        hex(f->lower, f->lower_len, lo);
        hex(f->upper, f->upper_len, up);
        printf("%s{\"id\": %d, \"size\": %" PRIu64 ", \"values\": %" PRIu64 ", \"nulls\": %" PRIu64,
               i ? ", " : "", f->field_id, f->column_size_bytes, f->value_count, f->null_count);
        if (f->has_nan_count)
            printf(", \"nans\": %" PRIu64, f->nan_count);
        if (f->has_lower)
            printf(", \"lower\": \"%s\"", lo);
        if (f->has_upper)
            printf(", \"upper\": \"%s\"", up);
        printf("}");
    }
    printf("]}\n");
}

static void options_from(json_t *o, firn_pq_options *opts)
{
    const char *codec = json_string_value(json_object_get(o, "codec"));
    if (codec)
        opts->codec = strcmp(codec, "snappy") == 0 ? FIRN_PQ_SNAPPY
                      : strcmp(codec, "gzip") == 0 ? FIRN_PQ_GZIP
                      : strcmp(codec, "none") == 0 ? FIRN_PQ_UNCOMPRESSED
                                                   : FIRN_PQ_ZSTD;
    json_t *v;
    if ((v = json_object_get(o, "page_bytes")))
        opts->page_bytes = (size_t)json_integer_value(v);
    if ((v = json_object_get(o, "page_rows")))
        opts->page_rows = (size_t)json_integer_value(v);
    if ((v = json_object_get(o, "dict_bytes")))
        opts->dict_bytes = (size_t)json_integer_value(v);
    if ((v = json_object_get(o, "row_group_bytes")))
        opts->row_group_bytes = (size_t)json_integer_value(v);
    if ((v = json_object_get(o, "level")))
        opts->compression_level = (int)json_integer_value(v);
}

static void
write_file(const firn_field *schema, firn_batch *b, const firn_pq_options *opts, const char *path)
{
    firn_err err = {0};
    FILE *fp = fopen(path, "wb");
    if (!fp)
        die("could not open output", NULL);
    firn_pq_writer *w = NULL;
    if (firn_pq_writer_new(schema, opts, file_write, fp, &w, &err) ||
        firn_pq_writer_write(w, b, &err) || firn_pq_writer_close(w, &err))
        die("write failed", &err);
    firn_pq_file_metrics m;
    firn_pq_writer_take_metrics(w, &m);
    print_metrics(&m);
    firn_pq_file_metrics_deinit(&m);
    firn_pq_writer_free(w);
    fclose(fp);
}

/* Deterministic rows: id long required, v int optional (null when i % 7 == 3), d double, s
 * string optional (null when i % 11 == 5), ts timestamptz, dec decimal(12,2), tags list<int>. */
static void gen(size_t n, const char *path)
{
    firn_field *schema = firn_field_new(0, "table", FIRN_TYPE_STRUCT, true);
    firn_field_add(schema, firn_field_new(1, "id", FIRN_TYPE_LONG, true));
    firn_field_add(schema, firn_field_new(2, "v", FIRN_TYPE_INT, false));
    firn_field_add(schema, firn_field_new(3, "d", FIRN_TYPE_DOUBLE, false));
    firn_field_add(schema, firn_field_new(4, "s", FIRN_TYPE_STRING, false));
    firn_field_add(schema, firn_field_new(5, "ts", FIRN_TYPE_TIMESTAMPTZ, false));
    firn_field_add(schema, firn_field_new_decimal(6, "dec", 12, 2, false));
    firn_field *tags = firn_field_new(7, "tags", FIRN_TYPE_LIST, false);
    firn_field_add(tags, firn_field_new(8, "element", FIRN_TYPE_INT, true));
    firn_field_add(schema, tags);
    firn_batch *b = firn_batch_new(schema);
    firn_err err = {0};
    char s[32];
    for (size_t i = 0; i < n; i++) {
        firn_column_append_i64(firn_batch_column(b, 0), (int64_t)i);
        if (i % 7 == 3)
            firn_column_append_null(firn_batch_column(b, 1));
        else
            firn_column_append_i32(firn_batch_column(b, 1), (int32_t)(i % 1000) - 500);
        firn_column_append_double(firn_batch_column(b, 2), (double)i * 0.25);
        if (i % 11 == 5) {
            firn_column_append_null(firn_batch_column(b, 3));
        } else {
            int len = snprintf(s, sizeof(s), "s%zu", i % 5000);
            firn_column_append_bytes(firn_batch_column(b, 3), s, (size_t)len);
        }
        firn_column_append_i64(firn_batch_column(b, 4), 1600000000000000 + (int64_t)i * 1000003);
        firn_column_append_i64(firn_batch_column(b, 5), (int64_t)i * 37 - 5000000);
        firn_column *t = firn_batch_column(b, 6);
        firn_column_list_begin(t);
        for (size_t k = 0; k < i % 4; k++)
            firn_column_append_i32(firn_column_child(t, 0), (int32_t)(i + k));
        firn_column_list_end(t);
        if (firn_batch_end_row(b, FIRN_OP_INSERT, 0, &err))
            die("end_row", &err);
    }
    firn_pq_options opts;
    firn_pq_options_init(&opts);
    opts.row_group_bytes = 4 << 20; /* several row groups */
    write_file(schema, b, &opts, path);
    firn_batch_free(b);
    firn_field_free(schema);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "gen") == 0) {
        gen((size_t)strtoull(argv[2], NULL, 10), argv[3]);
        return 0;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: pq_write spec.json out.parquet | pq_write gen N out.parquet\n");
        return 2;
    }
    json_error_t jerr;
    json_t *spec = json_load_file(argv[1], 0, &jerr);
    if (!spec)
        die(jerr.text, NULL);
    firn_field *schema = firn_field_new(0, "table", FIRN_TYPE_STRUCT, true);
    json_t *fields = json_object_get(spec, "schema");
    for (size_t i = 0; i < json_array_size(fields); i++)
        firn_field_add(schema, parse_field(json_array_get(fields, i)));
    firn_batch *b = firn_batch_new(schema);
    json_t *rows = json_object_get(spec, "rows");
    firn_err err = {0};
    for (size_t r = 0; r < json_array_size(rows); r++) {
        json_t *row = json_array_get(rows, r);
        for (size_t c = 0; c < firn_batch_columns(b); c++)
            append(firn_batch_column(b, c), json_array_get(row, c));
        if (firn_batch_end_row(b, FIRN_OP_INSERT, 0, &err))
            die("end_row", &err);
    }
    firn_pq_options opts;
    firn_pq_options_init(&opts);
    options_from(json_object_get(spec, "options"), &opts);
    write_file(schema, b, &opts, argv[2]);
    firn_batch_free(b);
    firn_field_free(schema);
    json_decref(spec);
    return 0;
}
