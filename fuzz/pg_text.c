/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target of the PostgreSQL text-format value decoder (firn_pg_value_decode_text). Input:
 * one byte choosing the column type (scalars of every kind, decimals, money, arrays of one to
 * three declared levels with int, text, numeric, interval, timestamptz, bytea and box
 * elements), then the value's text. A value either decodes into exactly one slot or fails with
 * FIRN_ERR_PARSE; anything else (or a sanitizer report) is a bug. */
#include "firn/source_pg.h"

#include <stdlib.h>
#include <string.h>

#define N_SCALARS 21

static firn_pg_type scalars[N_SCALARS];
static firn_pg_type arrays[N_SCALARS * 3];
static bool ready;

static void setup(void)
{
    static const firn_pg_kind KINDS[N_SCALARS] = {
        FIRN_PG_KIND_BOOL,      FIRN_PG_KIND_INT2,        FIRN_PG_KIND_INT4,
        FIRN_PG_KIND_INT8,      FIRN_PG_KIND_OID,         FIRN_PG_KIND_FLOAT4,
        FIRN_PG_KIND_FLOAT8,    FIRN_PG_KIND_DECIMAL,     FIRN_PG_KIND_DECIMAL,
        FIRN_PG_KIND_DECIMAL,   FIRN_PG_KIND_NUMSTR,      FIRN_PG_KIND_MONEY,
        FIRN_PG_KIND_TEXT,      FIRN_PG_KIND_JSONB,       FIRN_PG_KIND_BYTEA,
        FIRN_PG_KIND_UUID,      FIRN_PG_KIND_DATE,        FIRN_PG_KIND_TIME,
        FIRN_PG_KIND_TIMESTAMP, FIRN_PG_KIND_TIMESTAMPTZ, FIRN_PG_KIND_INTERVAL,
    };
    static const int32_t PREC[3] = {10, 38, 18}, SCALE[3] = {2, 10, 0};
    int dec = 0;
    for (int i = 0; i < N_SCALARS; i++) {
        firn_pg_type *t = &scalars[i];
        memset(t, 0, sizeof(*t));
        t->kind = KINDS[i];
        t->typmod = -1;
        if (t->kind == FIRN_PG_KIND_DECIMAL) {
            t->precision = PREC[dec];
            t->scale = SCALE[dec++];
        } else if (t->kind == FIRN_PG_KIND_MONEY) {
            t->precision = 19;
            t->scale = 2;
        } else if (t->kind == FIRN_PG_KIND_TEXT) {
            t->base_oid = 603; /* box: ';' between array elements */
            t->typdelim = ';';
            t->text_cast = true;
        }
    }
    for (int d = 0; d < 3; d++) {
        for (int i = 0; i < N_SCALARS; i++) {
            firn_pg_type *a = &arrays[d * N_SCALARS + i];
            memset(a, 0, sizeof(*a));
            a->kind = FIRN_PG_KIND_ARRAY;
            a->typmod = -1;
            a->ndims = d + 1;
            a->elem = &scalars[i];
        }
    }
    ready = true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (!ready)
        setup();
    size_t pick = data[0] % (N_SCALARS * 4);
    const firn_pg_type *t = pick < N_SCALARS ? &scalars[pick] : &arrays[pick - N_SCALARS];
    int32_t next = 2;
    firn_field *schema = firn_field_new(0, "s", FIRN_TYPE_STRUCT, true);
    firn_field_add(schema, firn_pg_type_field(t, 1, "v", false, &next));
    firn_batch *b = firn_batch_new(schema);
    firn_column *col = firn_batch_column(b, 0);
    firn_pg_decode_stats stats = {0};
    firn_err err = {0};
    firn_rc rc = firn_pg_value_decode_text(t, data + 1, size - 1, col, &stats, &err);
    if (rc == FIRN_OK ? firn_column_length(col) != 1 : rc != FIRN_ERR_PARSE)
        abort();
    if (rc == FIRN_OK && firn_batch_end_row(b, FIRN_OP_READ, 0, &err) != FIRN_OK)
        abort();
    firn_batch_free(b);
    firn_field_free(schema);
    return 0;
}
