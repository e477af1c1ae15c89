/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the binary COPY decoder and the per-type value decoders. Input: one byte that
 * picks how the stream is split into feeds (1..64 bytes per feed, or whole when 0), then a
 * `COPY ... TO STDOUT (FORMAT binary)` stream for the table described by COLS (the seeds in
 * fuzz/corpus/pg_copy come from PostgreSQL for that table; see fuzz/corpus/pg_copy/README). */
#include "firn/source_pg.h"

#include <string.h>

typedef struct col_spec {
    const char *name;
    firn_pg_kind kind;
    int32_t precision;
    int32_t scale;
    int32_t ndims;
    firn_pg_kind elem;
    int32_t elem_precision;
    int32_t elem_scale;
} col_spec;

/* CREATE TABLE fz (i4 int4, i8 int8, b bool, f8 float8, d numeric(10,2), dw numeric(30,3),
 * n numeric, t text, by bytea, u uuid, dt date, ts timestamptz, iv interval, a int4[],
 * a2 int4[][], ad numeric(30,3)[], j jsonb, m money, f4 float4, tm time, o oid, i2 int2) */
static const col_spec COLS[] = {
    {"i4", FIRN_PG_KIND_INT4, 0, 0, 0, 0, 0, 0},
    {"i8", FIRN_PG_KIND_INT8, 0, 0, 0, 0, 0, 0},
    {"b", FIRN_PG_KIND_BOOL, 0, 0, 0, 0, 0, 0},
    {"f8", FIRN_PG_KIND_FLOAT8, 0, 0, 0, 0, 0, 0},
    {"d", FIRN_PG_KIND_DECIMAL, 10, 2, 0, 0, 0, 0},
    {"dw", FIRN_PG_KIND_DECIMAL, 30, 3, 0, 0, 0, 0},
    {"n", FIRN_PG_KIND_NUMSTR, 0, 0, 0, 0, 0, 0},
    {"t", FIRN_PG_KIND_TEXT, 0, 0, 0, 0, 0, 0},
    {"by", FIRN_PG_KIND_BYTEA, 0, 0, 0, 0, 0, 0},
    {"u", FIRN_PG_KIND_UUID, 0, 0, 0, 0, 0, 0},
    {"dt", FIRN_PG_KIND_DATE, 0, 0, 0, 0, 0, 0},
    {"ts", FIRN_PG_KIND_TIMESTAMPTZ, 0, 0, 0, 0, 0, 0},
    {"iv", FIRN_PG_KIND_INTERVAL, 0, 0, 0, 0, 0, 0},
    {"a", FIRN_PG_KIND_ARRAY, 0, 0, 1, FIRN_PG_KIND_INT4, 0, 0},
    {"a2", FIRN_PG_KIND_ARRAY, 0, 0, 2, FIRN_PG_KIND_INT4, 0, 0},
    {"ad", FIRN_PG_KIND_ARRAY, 0, 0, 1, FIRN_PG_KIND_DECIMAL, 30, 3},
    {"j", FIRN_PG_KIND_JSONB, 0, 0, 0, 0, 0, 0},
    {"m", FIRN_PG_KIND_MONEY, 19, 2, 0, 0, 0, 0},
    {"f4", FIRN_PG_KIND_FLOAT4, 0, 0, 0, 0, 0, 0},
    {"tm", FIRN_PG_KIND_TIME, 0, 0, 0, 0, 0, 0},
    {"o", FIRN_PG_KIND_OID, 0, 0, 0, 0, 0, 0},
    {"i2", FIRN_PG_KIND_INT2, 0, 0, 0, 0, 0, 0},
};
#define N_COLS (sizeof(COLS) / sizeof(COLS[0]))

static firn_pg_type TYPES[N_COLS];
static firn_pg_type ELEMS[N_COLS];
static firn_pg_column COLUMNS[N_COLS];
static firn_pg_table TABLE;

static void build_table(void)
{
    if (TABLE.schema)
        return;
    TABLE.schema = firn_field_new(0, "schema", FIRN_TYPE_STRUCT, true);
    int32_t next_id = (int32_t)N_COLS + 1;
    for (size_t i = 0; i < N_COLS; i++) {
        firn_pg_type *t = &TYPES[i];
        t->kind = COLS[i].kind;
        t->precision = COLS[i].precision;
        t->scale = COLS[i].scale;
        t->ndims = COLS[i].ndims;
        t->name = (char *)COLS[i].name;
        if (t->kind == FIRN_PG_KIND_ARRAY) {
            ELEMS[i].kind = COLS[i].elem;
            ELEMS[i].precision = COLS[i].elem_precision;
            ELEMS[i].scale = COLS[i].elem_scale;
            ELEMS[i].name = (char *)COLS[i].name;
            t->elem = &ELEMS[i];
        }
        COLUMNS[i].name = (char *)COLS[i].name;
        COLUMNS[i].type = t;
        COLUMNS[i].field_id = (int32_t)i + 1;
        firn_field_add(TABLE.schema,
                       firn_pg_type_field(t, (int32_t)i + 1, COLS[i].name, false, &next_id));
    }
    TABLE.columns = COLUMNS;
    TABLE.n_columns = N_COLS;
    TABLE.name = (char *)"fz";
    TABLE.qualified = (char *)"\"public\".\"fz\"";
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    build_table();
    size_t step = data[0] ? (size_t)(data[0] % 64) + 1 : size;
    data++;
    size--;
    firn_batch *batch = firn_batch_new(TABLE.schema);
    firn_pg_copy *d = firn_pg_copy_new(&TABLE, batch);
    firn_err err = {0};
    firn_rc rc = FIRN_OK;
    for (size_t pos = 0; pos < size && !rc; pos += step) {
        size_t n = size - pos < step ? size - pos : step;
        rc = firn_pg_copy_feed(d, data + pos, n, 1, &err);
    }
    if (!rc)
        firn_rc_ignore(firn_pg_copy_finish(d, &err));
    firn_pg_copy_free(d);
    firn_batch_free(batch);
    return 0;
}
