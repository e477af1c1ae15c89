/* SPDX-License-Identifier: Apache-2.0 */
/* Test tool for the Parquet reader interop tests:
 *   pq_read_tool FILE SCHEMA_JSON [--callback] [--batches]
 * reads the columns SCHEMA_JSON selects ([{"id": 1, "name": "a", "type": "long", "required":
 * false}, ...]; decimal takes precision/scale, fixed length) from FILE with firn's reader (from
 * memory, or with --callback through the range-read callback over pread) and prints one JSON
 * array per row: numbers for integers, floats and doubles ("NaN", "Infinity", "-Infinity"),
 * decimals as unscaled integer strings, strings as strings, binary/uuid/fixed as hex, null.
 * --batches also prints {"row_group": g, "first_row": n, "rows": k} before each row group.
 * On error prints "error: FIRN_ERR_X: message" on stderr and exits 2. */
#include "firn/parquet.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void die(firn_rc rc, const char *msg)
{
    fprintf(stderr, "error: %s: %s\n", firn_rc_name(rc), msg);
    exit(2);
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
};

static firn_field *parse_field(json_t *j)
{
    const char *tname = json_string_value(json_object_get(j, "type"));
    const char *name = json_string_value(json_object_get(j, "name"));
    int32_t id = (int32_t)json_integer_value(json_object_get(j, "id"));
    bool req = json_is_true(json_object_get(j, "required"));
    for (size_t i = 0; tname && name && i < sizeof(TYPES) / sizeof(TYPES[0]); i++) {
        if (strcmp(TYPES[i].name, tname) != 0)
            continue;
        if (TYPES[i].type == FIRN_TYPE_DECIMAL)
            return firn_field_new_decimal(
                id, name, (int32_t)json_integer_value(json_object_get(j, "precision")),
                (int32_t)json_integer_value(json_object_get(j, "scale")), req);
        if (TYPES[i].type == FIRN_TYPE_FIXED)
            return firn_field_new_fixed(
                id, name, (int32_t)json_integer_value(json_object_get(j, "length")), req);
        firn_field *f = firn_field_new(id, name, TYPES[i].type, req);
        if (TYPES[i].type == FIRN_TYPE_STRUCT || TYPES[i].type == FIRN_TYPE_LIST)
            firn_field_add(f, firn_field_new(id + 1000, "element", FIRN_TYPE_INT, false));
        return f;
    }
    die(FIRN_ERR_INVALID, "bad field in schema");
    return NULL;
}

static json_t *hex(const uint8_t *p, size_t n)
{
    char *s = malloc(2 * n + 1);
    for (size_t i = 0; i < n; i++)
        snprintf(s + 2 * i, 3, "%02x", p[i]);
    s[2 * n] = 0;
    json_t *j = json_string(s);
    free(s);
    return j;
}

static json_t *real(double d)
{
    if (isnan(d))
        return json_string("NaN");
    if (isinf(d))
        return json_string(d > 0 ? "Infinity" : "-Infinity");
    return json_real(d);
}

static json_t *i128(const uint8_t *p)
{
    uint64_t lo, hi;
    memcpy(&lo, p, 8);
    memcpy(&hi, p + 8, 8);
    unsigned __int128 v = ((unsigned __int128)hi << 64) | lo;
    bool neg = (int64_t)hi < 0;
    if (neg)
        v = ~v + 1;
    char buf[64];
    size_t at = sizeof(buf) - 1;
    buf[at] = 0;
    do {
        buf[--at] = (char)('0' + (int)(v % 10));
        v /= 10;
    } while (v);
    if (neg)
        buf[--at] = '-';
    return json_string(buf + at);
}

static json_t *value(firn_column *c, size_t i)
{
    const firn_field *f = firn_column_field(c);
    if (!firn_column_is_valid(c, i))
        return json_null();
    const uint8_t *v = firn_column_values(c);
    size_t w = firn_type_value_size(f);
    char buf[32];
    int32_t i32;
    int64_t i64;
    float f32;
    double f64;
    switch (f->type) {
    case FIRN_TYPE_BOOLEAN:
        return json_boolean(v[i]);
    case FIRN_TYPE_INT:
    case FIRN_TYPE_DATE:
        memcpy(&i32, v + i * 4, 4);
        return json_integer(i32);
    case FIRN_TYPE_FLOAT:
        memcpy(&f32, v + i * 4, 4);
        return real((double)f32);
    case FIRN_TYPE_DOUBLE:
        memcpy(&f64, v + i * 8, 8);
        return real(f64);
    case FIRN_TYPE_DECIMAL:
        if (w == 16)
            return i128(v + i * 16);
        memcpy(&i64, v + i * 8, 8);
        snprintf(buf, sizeof(buf), "%" PRId64, i64);
        return json_string(buf);
    case FIRN_TYPE_UUID:
    case FIRN_TYPE_FIXED:
        return hex(v + i * w, w);
    case FIRN_TYPE_STRING:
    case FIRN_TYPE_BINARY: {
        const uint32_t *o = firn_column_offsets(c);
        const uint8_t *d = firn_column_data(c) + o[i];
        size_t n = o[i + 1] - o[i];
        json_t *s = f->type == FIRN_TYPE_STRING ? json_stringn((const char *)d, n) : NULL;
        return s ? s : hex(d, n);
    }
    default:
        memcpy(&i64, v + i * 8, 8);
        return json_integer(i64);
    }
}

typedef struct fd_file {
    int fd;
} fd_file;

static firn_rc fd_read(void *ctx, uint64_t off, size_t len, firn_buf *out, firn_err *err)
{
    fd_file *f = ctx;
    FIRN_TRY(firn_buf_reserve(out, len));
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(f->fd, out->data + out->len + got, len - got, (off_t)(off + got));
        if (n <= 0)
            return firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not read");
        got += (size_t)n;
    }
    out->len += len;
    return FIRN_OK;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        die(FIRN_ERR_INVALID, "usage: pq_read_tool FILE SCHEMA_JSON [--callback] [--batches]");
    bool callback = false, batches = false;
    for (int i = 3; i < argc; i++) {
        callback |= strcmp(argv[i], "--callback") == 0;
        batches |= strcmp(argv[i], "--batches") == 0;
    }
    json_error_t jerr;
    json_t *spec = json_loads(argv[2], 0, &jerr);
    if (!json_is_array(spec))
        die(FIRN_ERR_INVALID, "schema must be a JSON array");
    firn_field *schema = firn_field_new(0, "root", FIRN_TYPE_STRUCT, true);
    for (size_t i = 0; i < json_array_size(spec); i++)
        firn_field_add(schema, parse_field(json_array_get(spec, i)));
    json_decref(spec);

    fd_file f = {open(argv[1], O_RDONLY)};
    struct stat st;
    if (f.fd < 0 || fstat(f.fd, &st) != 0)
        die(FIRN_ERR_IO, "could not open file");
    uint8_t *mem = NULL;
    firn_err err = {0};
    firn_pq_reader *r;
    firn_rc rc;
    if (callback) {
        rc = firn_pq_reader_open(fd_read, &f, (uint64_t)st.st_size, &r, &err);
    } else {
        mem = malloc((size_t)st.st_size + 1);
        for (size_t got = 0; got < (size_t)st.st_size;) {
            ssize_t n = pread(f.fd, mem + got, (size_t)st.st_size - got, (off_t)got);
            if (n <= 0)
                die(FIRN_ERR_IO, "could not read file");
            got += (size_t)n;
        }
        rc = firn_pq_reader_open_mem(mem, (size_t)st.st_size, &r, &err);
    }
    if (rc)
        die(rc, err.msg);
    if ((rc = firn_pq_reader_select(r, schema, &err)) != FIRN_OK)
        die(rc, err.msg);
    firn_batch *b = firn_batch_new(schema);
    for (size_t g = 0; g < firn_pq_reader_row_groups(r); g++) {
        if ((rc = firn_pq_reader_read_row_group(r, g, b, &err)) != FIRN_OK)
            die(rc, err.msg);
        if (batches)
            printf("{\"row_group\": %zu, \"first_row\": %" PRIu64 ", \"rows\": %zu}\n", g,
                   firn_pq_reader_row_group_first_row(r, g), firn_batch_rows(b));
        for (size_t i = 0; i < firn_batch_rows(b); i++) {
            json_t *row = json_array();
            for (size_t c = 0; c < firn_batch_columns(b); c++)
                json_array_append_new(row, value(firn_batch_column(b, c), i));
            char *s = json_dumps(row, JSON_COMPACT | JSON_ENCODE_ANY);
            puts(s);
            free(s);
            json_decref(row);
        }
    }
    firn_batch_free(b);
    firn_pq_reader_free(r);
    firn_field_free(schema);
    free(mem);
    close(f.fd);
    return 0;
}
