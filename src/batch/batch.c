/* SPDX-License-Identifier: Apache-2.0 */
/* Column batches: growable typed arrays with validity bitmaps and offsets, plus per-row
 * operation and source position. */
#include "firn/batch.h"

#include <string.h>

/* String/binary bytes one column may hold in one batch; offsets are 32-bit. The engine flushes
 * by bytes long before this. */
#define COLUMN_DATA_MAX ((size_t)UINT32_MAX)

struct firn_column {
    const firn_field *field;
    size_t length;
    size_t null_count;
    size_t width;        /* bytes per fixed-width value, 0 otherwise */
    uint8_t *validity;   /* NULL until the first null */
    size_t validity_cap; /* bytes */
    uint8_t *values;     /* fixed-width values */
    size_t values_cap;   /* slots */
    uint32_t *offsets;   /* length + 1 entries for string/binary/list/map */
    size_t offsets_cap;  /* entries */
    firn_buf data;       /* string/binary bytes */
    size_t n_children;
    firn_column **children;
    bool list_open;
};

struct firn_batch {
    const firn_field *schema;
    size_t n_columns;
    firn_column **columns;
    size_t rows;
    size_t rows_cap;
    uint8_t *ops;
    uint64_t *lsns;
    int64_t commit_ts_us; /* INT64_MIN: null */
    int64_t ingest_ts_us; /* INT64_MIN: take the clock at the next row */
    int64_t ingest_now_us;
    bool has_meta;
};

static bool has_offsets(const firn_field *f)
{
    return f->type == FIRN_TYPE_STRING || f->type == FIRN_TYPE_BINARY ||
           f->type == FIRN_TYPE_LIST || f->type == FIRN_TYPE_MAP;
}

static firn_column *column_new(const firn_field *f)
{
    firn_column *c = firn_calloc(1, sizeof(*c));
    c->field = f;
    c->width = firn_type_value_size(f);
    firn_buf_init(&c->data, COLUMN_DATA_MAX);
    if (has_offsets(f)) {
        c->offsets_cap = 16;
        c->offsets = firn_calloc(c->offsets_cap, sizeof(uint32_t));
    }
    c->n_children = f->n_children;
    if (c->n_children) {
        c->children = firn_calloc(c->n_children, sizeof(*c->children));
        for (size_t i = 0; i < c->n_children; i++)
            c->children[i] = column_new(f->children[i]);
    }
    return c;
}

static void column_free(firn_column *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_children; i++)
        column_free(c->children[i]);
    firn_free(c->children);
    firn_free(c->validity);
    firn_free(c->values);
    firn_free(c->offsets);
    firn_buf_deinit(&c->data);
    firn_free(c);
}

static void column_reset(firn_column *c)
{
    c->length = 0;
    c->null_count = 0;
    c->list_open = false;
    if (c->validity)
        memset(c->validity, 0, c->validity_cap);
    if (c->offsets)
        c->offsets[0] = 0;
    firn_buf_reset(&c->data);
    for (size_t i = 0; i < c->n_children; i++)
        column_reset(c->children[i]);
}

/* Grows the validity bitmap (when present) to hold slot c->length and sets its bit. */
static void set_valid(firn_column *c, bool valid)
{
    size_t i = c->length;
    if (!valid && !c->validity) {
        c->validity_cap = 64;
        while (c->validity_cap * 8 <= i)
            c->validity_cap *= 2;
        c->validity = firn_calloc(c->validity_cap, 1);
        memset(c->validity, 0xff, i / 8);
        for (size_t k = i / 8 * 8; k < i; k++)
            c->validity[k / 8] |= (uint8_t)(1u << (k % 8));
    }
    if (c->validity) {
        if (i / 8 >= c->validity_cap) {
            size_t cap = c->validity_cap * 2;
            c->validity = firn_realloc(c->validity, cap);
            memset(c->validity + c->validity_cap, 0, cap - c->validity_cap);
            c->validity_cap = cap;
        }
        if (valid)
            c->validity[i / 8] |= (uint8_t)(1u << (i % 8));
        else
            c->validity[i / 8] &= (uint8_t) ~(1u << (i % 8));
    }
    if (!valid)
        c->null_count++;
}

/* Returns room for one fixed-width value at slot c->length. */
static uint8_t *value_slot(firn_column *c)
{
    if (c->length >= c->values_cap) {
        size_t cap = c->values_cap ? c->values_cap * 2 : 64;
        c->values = firn_reallocarray(c->values, cap, c->width);
        c->values_cap = cap;
    }
    return c->values + c->length * c->width;
}

static void push_offset(firn_column *c, size_t off)
{
    FIRN_ASSERT(off <= UINT32_MAX);
    if (c->length + 2 > c->offsets_cap) {
        c->offsets_cap *= 2;
        c->offsets = firn_reallocarray(c->offsets, c->offsets_cap, sizeof(uint32_t));
    }
    c->offsets[c->length + 1] = (uint32_t)off;
}

void firn_column_append_null(firn_column *c)
{
    FIRN_ASSERT(!c->list_open);
    set_valid(c, false);
    if (c->width)
        memset(value_slot(c), 0, c->width);
    if (c->field->type == FIRN_TYPE_STRING || c->field->type == FIRN_TYPE_BINARY)
        push_offset(c, c->data.len);
    else if (c->offsets)
        push_offset(c, c->children[0]->length);
    if (c->field->type == FIRN_TYPE_STRUCT) {
        for (size_t i = 0; i < c->n_children; i++)
            firn_column_append_null(c->children[i]);
    }
    c->length++;
}

static void append_fixed(firn_column *c, const void *p, size_t len)
{
    FIRN_ASSERT(c->width == len);
    set_valid(c, true);
    memcpy(value_slot(c), p, len);
    c->length++;
}

void firn_column_append_bool(firn_column *c, bool v)
{
    FIRN_ASSERT(c->field->type == FIRN_TYPE_BOOLEAN);
    uint8_t b = v ? 1 : 0;
    append_fixed(c, &b, 1);
}

void firn_column_append_i32(firn_column *c, int32_t v)
{
    FIRN_ASSERT(c->field->type == FIRN_TYPE_INT || c->field->type == FIRN_TYPE_DATE);
    append_fixed(c, &v, 4);
}

void firn_column_append_i64(firn_column *c, int64_t v)
{
    FIRN_ASSERT(c->width == 8 && c->field->type != FIRN_TYPE_DOUBLE);
    append_fixed(c, &v, 8);
}

void firn_column_append_float(firn_column *c, float v)
{
    FIRN_ASSERT(c->field->type == FIRN_TYPE_FLOAT);
    append_fixed(c, &v, 4);
}

void firn_column_append_double(firn_column *c, double v)
{
    FIRN_ASSERT(c->field->type == FIRN_TYPE_DOUBLE);
    append_fixed(c, &v, 8);
}

void firn_column_append_i128(firn_column *c, int64_t hi, uint64_t lo)
{
    FIRN_ASSERT(c->field->type == FIRN_TYPE_DECIMAL && c->width == 16);
    uint64_t v[2] = {lo, (uint64_t)hi};
    append_fixed(c, v, 16);
}

void firn_column_append_bytes(firn_column *c, const void *p, size_t len)
{
    if (c->width) {
        FIRN_ASSERT(c->field->type == FIRN_TYPE_UUID || c->field->type == FIRN_TYPE_FIXED);
        append_fixed(c, p, len);
        return;
    }
    FIRN_ASSERT(c->field->type == FIRN_TYPE_STRING || c->field->type == FIRN_TYPE_BINARY);
    firn_rc rc = firn_buf_append(&c->data, p, len);
    FIRN_ASSERT(rc == FIRN_OK); /* the engine flushes far below 4 GiB per column */
    set_valid(c, true);
    push_offset(c, c->data.len);
    c->length++;
}

/* Makes room for slots up to new_len in the validity bitmap (creating it, all set, when
 * make is true and it does not exist yet). */
static void validity_grow(firn_column *c, size_t new_len, bool make)
{
    if (!c->validity && !make)
        return;
    size_t need = (new_len + 7) / 8;
    if (!c->validity) {
        size_t cap = 64;
        while (cap < need)
            cap *= 2;
        c->validity = firn_calloc(cap, 1);
        c->validity_cap = cap;
        memset(c->validity, 0xff, c->length / 8);
        for (size_t k = c->length / 8 * 8; k < c->length; k++)
            c->validity[k / 8] |= (uint8_t)(1u << (k % 8));
    }
    if (need > c->validity_cap) {
        size_t cap = c->validity_cap * 2;
        while (cap < need)
            cap *= 2;
        c->validity = firn_realloc(c->validity, cap);
        memset(c->validity + c->validity_cap, 0, cap - c->validity_cap);
        c->validity_cap = cap;
    }
}

/* Makes room for n more fixed-width values after slot c->length. */
static void values_reserve(firn_column *c, size_t n)
{
    if (c->length + n > c->values_cap || !c->values) {
        size_t cap = c->values_cap ? c->values_cap : 64;
        while (cap < c->length + n)
            cap *= 2;
        c->values = firn_reallocarray(c->values, cap, c->width);
        c->values_cap = cap;
    }
}

/* Nulls among n flags (nonzero = present); 0 when valid is NULL. */
static size_t count_nulls(size_t n, const uint8_t *valid)
{
    size_t nulls = 0;
    for (size_t i = 0; valid && i < n; i++)
        nulls += !valid[i];
    return nulls;
}

/* Sets (valid) or clears the bits of slots [from, from + n) of a bitmap: the partial bytes at
 * either end bit by bit, the whole bytes between with one memset. */
static void bits_set_range(uint8_t *bits, size_t from, size_t n, bool valid)
{
    const uint8_t fill = valid ? 0xFF : 0;
    size_t k = from, end = from + n;
    for (; k < end && k % 8 != 0; k++)
        bits[k / 8] = (uint8_t)((bits[k / 8] & ~(1u << (k % 8))) | (fill & (1u << (k % 8))));
    if (end - k >= 8) {
        memset(bits + k / 8, fill, (end - k) / 8);
        k += (end - k) / 8 * 8;
    }
    for (; k < end; k++)
        bits[k / 8] = (uint8_t)((bits[k / 8] & ~(1u << (k % 8))) | (fill & (1u << (k % 8))));
}

/* Sets the validity bits of slots length..length+n-1 from valid (NULL: all present), creating
 * the bitmap when one of them (nulls > 0) is a null. Leaves length as it is. */
static void mark_valid_n(firn_column *c, size_t n, const uint8_t *valid, size_t nulls)
{
    validity_grow(c, c->length + n, nulls > 0);
    if (!c->validity)
        return;
    if (!valid) {
        bits_set_range(c->validity, c->length, n, true);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        size_t k = c->length + i;
        if (valid[i])
            c->validity[k / 8] |= (uint8_t)(1u << (k % 8));
        else
            c->validity[k / 8] &= (uint8_t) ~(1u << (k % 8));
    }
}

void *firn_column_append_fixed_n(firn_column *c, size_t n, const uint8_t *valid)
{
    FIRN_ASSERT(c->width && !c->list_open && c->field->type != FIRN_TYPE_STRUCT);
    size_t nulls = count_nulls(n, valid);
    values_reserve(c, n);
    mark_valid_n(c, n, valid, nulls);
    uint8_t *out = c->values + c->length * c->width;
    if (valid)
        memset(out, 0, n * c->width);
    c->null_count += nulls;
    c->length += n;
    return out;
}

void firn_column_append_bytes_n(
    firn_column *c, size_t n, const uint8_t *data, const uint32_t *ends, const uint8_t *valid)
{
    FIRN_ASSERT(!c->width && !c->list_open &&
                (c->field->type == FIRN_TYPE_STRING || c->field->type == FIRN_TYPE_BINARY));
    if (n == 0)
        return;
    size_t nulls = count_nulls(n, valid);
    const size_t base = c->data.len;
    FIRN_ASSERT(base + ends[n - 1] <= UINT32_MAX);
    if (ends[n - 1] > 0) {
        firn_rc rc = firn_buf_append(&c->data, data, ends[n - 1]);
        FIRN_ASSERT(rc == FIRN_OK); /* the engine flushes far below 4 GiB per column */
    }
    if (c->length + n + 1 > c->offsets_cap) {
        while (c->offsets_cap < c->length + n + 1)
            c->offsets_cap *= 2;
        c->offsets = firn_reallocarray(c->offsets, c->offsets_cap, sizeof(uint32_t));
    }
    uint32_t *off = c->offsets + c->length + 1;
    for (size_t i = 0; i < n; i++)
        off[i] = (uint32_t)base + ends[i];
    mark_valid_n(c, n, valid, nulls);
    c->null_count += nulls;
    c->length += n;
}

void firn_column_append_nulls(firn_column *c, size_t n)
{
    FIRN_ASSERT(c->n_children == 0);
    for (size_t i = 0; i < n; i++)
        firn_column_append_null(c);
}

void firn_column_list_begin(firn_column *c)
{
    FIRN_ASSERT((c->field->type == FIRN_TYPE_LIST || c->field->type == FIRN_TYPE_MAP) &&
                !c->list_open);
    c->list_open = true;
}

void firn_column_list_end(firn_column *c)
{
    FIRN_ASSERT(c->list_open);
    if (c->field->type == FIRN_TYPE_MAP)
        FIRN_ASSERT(c->children[0]->length == c->children[1]->length);
    c->list_open = false;
    set_valid(c, true);
    push_offset(c, c->children[0]->length);
    c->length++;
}

void firn_column_struct_end(firn_column *c)
{
    FIRN_ASSERT(c->field->type == FIRN_TYPE_STRUCT);
    for (size_t i = 0; i < c->n_children; i++)
        FIRN_ASSERT(c->children[i]->length == c->length + 1);
    set_valid(c, true);
    c->length++;
}

const firn_field *firn_column_field(const firn_column *c)
{
    return c->field;
}

size_t firn_column_length(const firn_column *c)
{
    return c->length;
}

size_t firn_column_null_count(const firn_column *c)
{
    return c->null_count;
}

const uint8_t *firn_column_validity(const firn_column *c)
{
    return c->null_count ? c->validity : NULL;
}

bool firn_column_is_valid(const firn_column *c, size_t i)
{
    FIRN_DASSERT(i < c->length);
    return !c->null_count || (c->validity[i / 8] >> (i % 8)) & 1;
}

const void *firn_column_values(const firn_column *c)
{
    return c->width ? c->values : NULL;
}

const uint32_t *firn_column_offsets(const firn_column *c)
{
    return c->offsets;
}

const uint8_t *firn_column_data(const firn_column *c)
{
    return c->data.data ? c->data.data : (const uint8_t *)"";
}

firn_column *firn_column_child(firn_column *c, size_t i)
{
    FIRN_ASSERT(i < c->n_children);
    return c->children[i];
}

size_t firn_column_children(const firn_column *c)
{
    return c->n_children;
}

static size_t column_bytes(const firn_column *c)
{
    size_t n = c->length * c->width + c->data.len + c->length / 8;
    if (c->offsets)
        n += (c->length + 1) * sizeof(uint32_t);
    for (size_t i = 0; i < c->n_children; i++)
        n += column_bytes(c->children[i]);
    return n;
}

firn_batch *firn_batch_new(const firn_field *schema)
{
    FIRN_ASSERT(schema->type == FIRN_TYPE_STRUCT);
    firn_batch *b = firn_calloc(1, sizeof(*b));
    b->schema = schema;
    b->n_columns = schema->n_children;
    b->columns = firn_calloc(b->n_columns ? b->n_columns : 1, sizeof(*b->columns));
    for (size_t i = 0; i < b->n_columns; i++) {
        b->columns[i] = column_new(schema->children[i]);
        b->has_meta |= schema->children[i]->meta != FIRN_META_NONE;
    }
    b->commit_ts_us = INT64_MIN;
    b->ingest_ts_us = INT64_MIN;
    b->ingest_now_us = INT64_MIN;
    return b;
}

void firn_batch_free(firn_batch *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->n_columns; i++)
        column_free(b->columns[i]);
    firn_free(b->columns);
    firn_free(b->ops);
    firn_free(b->lsns);
    firn_free(b);
}

void firn_batch_reset(firn_batch *b)
{
    for (size_t i = 0; i < b->n_columns; i++)
        column_reset(b->columns[i]);
    b->rows = 0;
    b->ingest_now_us = INT64_MIN;
}

void firn_batch_set_times(firn_batch *b, int64_t commit_ts_us, int64_t ingest_ts_us)
{
    b->commit_ts_us = commit_ts_us;
    b->ingest_ts_us = ingest_ts_us;
    b->ingest_now_us = INT64_MIN;
}

static void append_time(firn_column *c, int64_t us)
{
    if (us == INT64_MIN)
        firn_column_append_null(c);
    else
        firn_column_append_i64(c, us);
}

/* Appends the metadata values of the row being completed to the columns that lack them. */
static void fill_meta(firn_batch *b, firn_op op, uint64_t lsn, size_t at)
{
    for (size_t i = 0; i < b->n_columns; i++) {
        firn_column *c = b->columns[i];
        if (c->field->meta == FIRN_META_NONE || c->length != at)
            continue;
        switch ((firn_meta_kind)c->field->meta) {
        case FIRN_META_OP: {
            char code = (char)op;
            firn_column_append_bytes(c, &code, 1);
            break;
        }
        case FIRN_META_LSN:
            firn_column_append_i64(c, (int64_t)lsn);
            break;
        case FIRN_META_COMMIT_TS:
            append_time(c, b->commit_ts_us);
            break;
        case FIRN_META_INGEST_TS:
            if (b->ingest_ts_us != INT64_MIN) {
                append_time(c, b->ingest_ts_us);
                break;
            }
            if (b->ingest_now_us == INT64_MIN)
                b->ingest_now_us = firn_now_us();
            append_time(c, b->ingest_now_us);
            break;
        case FIRN_META_NULL:
            firn_column_append_null(c);
            break;
        case FIRN_META_NONE:
            break;
        }
    }
}

/* Appends n copies of the len bytes at p to a string/binary column: the bytes (one memset for a
 * single byte, _firn_op), offsets stepping by len, the validity bits (if the column has a
 * bitmap) set in bulk. */
static void append_repeat_bytes(firn_column *c, const void *p, size_t len, size_t n)
{
    FIRN_ASSERT(!c->width && !c->n_children);
    firn_rc rc = firn_buf_reserve(&c->data, len * n);
    FIRN_ASSERT(rc == FIRN_OK); /* the engine flushes far below 4 GiB per column */
    if (c->length + n + 1 > c->offsets_cap) {
        while (c->length + n + 1 > c->offsets_cap)
            c->offsets_cap *= 2;
        c->offsets = firn_reallocarray(c->offsets, c->offsets_cap, sizeof(uint32_t));
    }
    validity_grow(c, c->length + n, false);
    FIRN_ASSERT(c->data.len + len * n <= UINT32_MAX);
    uint8_t *out = c->data.data + c->data.len; /* reserved above */
    if (len == 1) {
        memset(out, *(const uint8_t *)p, n);
    } else {
        for (size_t i = 0; i < n; i++)
            memcpy(out + i * len, p, len);
    }
    const uint32_t base = (uint32_t)c->data.len, step = (uint32_t)len;
    uint32_t *off = c->offsets + c->length + 1;
    for (size_t i = 0; i < n; i++)
        off[i] = base + (uint32_t)(i + 1) * step;
    if (c->validity)
        bits_set_range(c->validity, c->length, n, true);
    c->data.len += len * n;
    c->data.data[c->data.len] = '\0'; /* as firn_buf_append keeps it */
    c->length += n;
}

/* Appends n slots holding v to a 64-bit column, marked present. */
static void append_repeat_i64(firn_column *c, int64_t v, size_t n)
{
    FIRN_ASSERT(c->width == 8);
    int64_t *out = firn_column_append_fixed_n(c, n, NULL);
    for (size_t i = 0; i < n; i++)
        out[i] = v;
}

/* Appends n slots holding the time us (INT64_MIN: n nulls, zero values) to a timestamp
 * column. */
static void append_repeat_time(firn_column *c, int64_t us, size_t n)
{
    if (us != INT64_MIN) {
        append_repeat_i64(c, us, n);
        return;
    }
    FIRN_ASSERT(c->width == 8 && !c->list_open);
    values_reserve(c, n);
    memset(c->values + c->length * c->width, 0, n * c->width);
    validity_grow(c, c->length + n, true);
    bits_set_range(c->validity, c->length, n, false);
    c->null_count += n;
    c->length += n;
}

/* fill_meta for rows [at, at + n), all of operation op at position lsn: one bulk append per
 * metadata column. */
static void fill_meta_n(firn_batch *b, firn_op op, uint64_t lsn, size_t at, size_t n)
{
    for (size_t i = 0; i < b->n_columns; i++) {
        firn_column *c = b->columns[i];
        if (c->field->meta == FIRN_META_NONE || c->length != at)
            continue;
        if (c->field->meta == FIRN_META_INGEST_TS && b->ingest_ts_us == INT64_MIN &&
            b->ingest_now_us == INT64_MIN)
            b->ingest_now_us = firn_now_us();
        switch ((firn_meta_kind)c->field->meta) {
        case FIRN_META_OP: {
            char code = (char)op;
            append_repeat_bytes(c, &code, 1, n);
            break;
        }
        case FIRN_META_LSN:
            append_repeat_i64(c, (int64_t)lsn, n);
            break;
        case FIRN_META_COMMIT_TS:
            append_repeat_time(c, b->commit_ts_us, n);
            break;
        case FIRN_META_INGEST_TS:
            append_repeat_time(c, b->ingest_ts_us != INT64_MIN ? b->ingest_ts_us : b->ingest_now_us,
                               n);
            break;
        case FIRN_META_NULL:
        case FIRN_META_NONE:
            for (size_t k = 0; c->field->meta == FIRN_META_NULL && k < n; k++)
                firn_column_append_null(c);
            break;
        }
    }
}

const firn_field *firn_batch_schema(const firn_batch *b)
{
    return b->schema;
}

size_t firn_batch_rows(const firn_batch *b)
{
    return b->rows;
}

size_t firn_batch_columns(const firn_batch *b)
{
    return b->n_columns;
}

firn_column *firn_batch_column(firn_batch *b, size_t i)
{
    FIRN_ASSERT(i < b->n_columns);
    return b->columns[i];
}

firn_rc firn_batch_end_row(firn_batch *b, firn_op op, uint64_t lsn, firn_err *err)
{
    if (b->has_meta)
        fill_meta(b, op, lsn, b->rows);
    for (size_t i = 0; i < b->n_columns; i++) {
        if (b->columns[i]->length != b->rows + 1)
            return firn_err_set(err, FIRN_ERR_INTERNAL,
                                "column \"%s\" has %zu values, expected %zu",
                                b->columns[i]->field->name, b->columns[i]->length, b->rows + 1);
    }
    if (b->rows == b->rows_cap) {
        b->rows_cap = b->rows_cap ? b->rows_cap * 2 : 64;
        b->ops = firn_realloc(b->ops, b->rows_cap);
        b->lsns = firn_reallocarray(b->lsns, b->rows_cap, sizeof(uint64_t));
    }
    b->ops[b->rows] = (uint8_t)op;
    b->lsns[b->rows] = lsn;
    b->rows++;
    return FIRN_OK;
}

firn_rc firn_batch_end_rows(firn_batch *b, size_t n, firn_op op, uint64_t lsn, firn_err *err)
{
    if (b->has_meta && n > 0)
        fill_meta_n(b, op, lsn, b->rows, n);
    for (size_t i = 0; i < b->n_columns; i++) {
        if (b->columns[i]->length != b->rows + n)
            return firn_err_set(err, FIRN_ERR_INTERNAL,
                                "column \"%s\" has %zu values, expected %zu",
                                b->columns[i]->field->name, b->columns[i]->length, b->rows + n);
    }
    if (n == 0)
        return FIRN_OK;
    if (b->rows + n > b->rows_cap) {
        size_t cap = b->rows_cap ? b->rows_cap : 64;
        while (cap < b->rows + n)
            cap *= 2;
        b->ops = firn_realloc(b->ops, cap);
        b->lsns = firn_reallocarray(b->lsns, cap, sizeof(uint64_t));
        b->rows_cap = cap;
    }
    memset(b->ops + b->rows, (int)op, n);
    uint64_t *lsns = b->lsns + b->rows; /* a local: the stores cannot alias b->rows */
    for (size_t i = 0; i < n; i++)
        lsns[i] = lsn;
    b->rows += n;
    return FIRN_OK;
}

firn_op firn_batch_op(const firn_batch *b, size_t i)
{
    FIRN_ASSERT(i < b->rows);
    return (firn_op)b->ops[i];
}

uint64_t firn_batch_lsn(const firn_batch *b, size_t i)
{
    FIRN_ASSERT(i < b->rows);
    return b->lsns[i];
}

size_t firn_batch_bytes(const firn_batch *b)
{
    size_t n = b->rows * (1 + sizeof(uint64_t));
    for (size_t i = 0; i < b->n_columns; i++)
        n += column_bytes(b->columns[i]);
    return n;
}

static void copy_slot(firn_column *dst, const firn_column *src, size_t i);

/* Appends fixed-width slot i of src to dst through a copy: dst may be src, whose values move
 * when the append grows them. */
static void copy_fixed(firn_column *dst, const firn_column *src, size_t i)
{
    uint8_t local[32];
    uint8_t *tmp = src->width <= sizeof(local) ? local : firn_malloc(src->width);
    memcpy(tmp, src->values + i * src->width, src->width);
    append_fixed(dst, tmp, src->width);
    if (tmp != local)
        firn_free(tmp);
}

static void copy_list(firn_column *dst, const firn_column *src, size_t i)
{
    firn_column_list_begin(dst);
    for (uint32_t k = src->offsets[i]; k < src->offsets[i + 1]; k++) {
        for (size_t c = 0; c < src->n_children; c++)
            copy_slot(dst->children[c], src->children[c], k);
    }
    firn_column_list_end(dst);
}

/* Appends slot i of src to dst (same field). */
static void copy_slot(firn_column *dst, const firn_column *src, size_t i)
{
    if (!firn_column_is_valid(src, i)) {
        firn_column_append_null(dst);
        return;
    }
    switch (src->field->type) {
    case FIRN_TYPE_STRUCT:
        for (size_t c = 0; c < src->n_children; c++)
            copy_slot(dst->children[c], src->children[c], i);
        firn_column_struct_end(dst);
        return;
    case FIRN_TYPE_LIST:
    case FIRN_TYPE_MAP:
        copy_list(dst, src, i);
        return;
    case FIRN_TYPE_STRING:
    case FIRN_TYPE_BINARY: {
        size_t len = src->offsets[i + 1] - src->offsets[i];
        /* Copying a slot of the column onto its own end: grow first, so the bytes do not move
         * away under the copy. */
        if (dst == src) {
            firn_rc rc = firn_buf_reserve(&dst->data, len);
            FIRN_ASSERT(rc == FIRN_OK);
        }
        firn_column_append_bytes(dst, firn_column_data(src) + src->offsets[i], len);
        return;
    }
    default:
        copy_fixed(dst, src, i);
        return;
    }
}

void firn_column_append_from(firn_column *c, const firn_column *src, size_t i)
{
    FIRN_ASSERT(c->field->type == src->field->type && i < src->length);
    copy_slot(c, src, i);
}

void firn_batch_append_rows(firn_batch *dst, const firn_batch *src, const uint32_t *rows, size_t n)
{
    FIRN_ASSERT(dst->n_columns == src->n_columns);
    for (size_t k = 0; k < n; k++) {
        size_t r = rows[k];
        FIRN_ASSERT(r < src->rows);
        for (size_t c = 0; c < src->n_columns; c++)
            copy_slot(dst->columns[c], src->columns[c], r);
        firn_rc rc = firn_batch_end_row(dst, (firn_op)src->ops[r], src->lsns[r], NULL);
        FIRN_ASSERT(rc == FIRN_OK);
    }
}

firn_rc firn_batch_key_encode(
    const firn_batch *b, size_t row, const uint32_t *cols, size_t n_cols, firn_buf *out)
{
    FIRN_ASSERT(row < b->rows);
    for (size_t k = 0; k < n_cols; k++) {
        FIRN_ASSERT(cols[k] < b->n_columns);
        const firn_column *c = b->columns[cols[k]];
        FIRN_ASSERT(c->n_children == 0);
        if (!firn_column_is_valid(c, row)) {
            FIRN_TRY(firn_wr_u8(out, 0));
            continue;
        }
        FIRN_TRY(firn_wr_u8(out, 1));
        if (c->width) {
            FIRN_TRY(firn_buf_append(out, c->values + row * c->width, c->width));
        } else {
            uint32_t len = c->offsets[row + 1] - c->offsets[row];
            FIRN_TRY(firn_wr_le32(out, len));
            FIRN_TRY(firn_buf_append(out, firn_column_data(c) + c->offsets[row], len));
        }
    }
    return FIRN_OK;
}

/* The rows of keys_encode_fixed from at on, w bytes a value; inlined with a constant w (the
 * usual integer keys), a value is one load and store instead of a memcpy call. Returns the end. */
static inline __attribute__((always_inline)) uint32_t keys_encode_rows(
    const uint8_t *values, size_t w, size_t rows, uint8_t *at, uint32_t end, uint32_t *ends)
{
    for (size_t r = 0; r < rows; r++) {
        at[0] = 1;
        memcpy(at + 1, values + r * w, w);
        at += 1 + w;
        end += (uint32_t)(1 + w);
        ends[r] = end;
    }
    return end;
}

/* firn_batch_keys_encode for one fixed-width key column without nulls: [1][value] per row. */
static firn_rc keys_encode_fixed(const firn_column *c, size_t rows, firn_buf *out, uint32_t *ends)
{
    size_t w = c->width, need = rows * (1 + w);
    if (out->len + need > UINT32_MAX)
        return FIRN_ERR_TOO_LARGE;
    FIRN_TRY(firn_buf_reserve(out, need));
    uint8_t *at = out->data + out->len;
    uint32_t end = (uint32_t)out->len;
    switch (w) {
    case 8:
        end = keys_encode_rows(c->values, 8, rows, at, end, ends);
        break;
    case 4:
        end = keys_encode_rows(c->values, 4, rows, at, end, ends);
        break;
    default:
        end = keys_encode_rows(c->values, w, rows, at, end, ends);
        break;
    }
    out->len = end;
    out->data[end] = '\0';
    return FIRN_OK;
}

firn_rc firn_batch_keys_encode(
    const firn_batch *b, const uint32_t *cols, size_t n_cols, firn_buf *out, uint32_t *ends)
{
    if (n_cols == 1 && b->rows) {
        FIRN_ASSERT(cols[0] < b->n_columns);
        const firn_column *c = b->columns[cols[0]];
        if (c->width && c->n_children == 0 && firn_column_null_count(c) == 0)
            return keys_encode_fixed(c, b->rows, out, ends);
    }
    for (size_t r = 0; r < b->rows; r++) {
        FIRN_TRY(firn_batch_key_encode(b, r, cols, n_cols, out));
        if (out->len > UINT32_MAX)
            return FIRN_ERR_TOO_LARGE;
        ends[r] = (uint32_t)out->len;
    }
    return FIRN_OK;
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t firn_key_hash(const uint8_t *key, size_t len)
{
    if (len == 9 && key[0] == 1) {
        uint64_t v;
        memcpy(&v, key + 1, 8);
        return splitmix64(v);
    }
    /* FNV-1a folded through splitmix64 for avalanche. */
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ key[i]) * 0x100000001b3ull;
    return splitmix64(h ^ len);
}
