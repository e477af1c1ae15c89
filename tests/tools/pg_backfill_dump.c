/* SPDX-License-Identifier: Apache-2.0 */
/* Backfills the given PostgreSQL tables with firn's source and prints what it read as JSON
 * lines, for tests/interop/test_pg_*.py to compare with psycopg:
 *   pg_backfill_dump [--workers N] [--chunk-bytes B] [--batch-rows R] [--schema] URI PATTERN...
 * --schema prints one line per table: {"table", "relkind", "replica_identity", "leaves", "key",
 *   "identifier_ids", "fields": [{"id","name","type","required","children"}]}.
 * Otherwise one line per row: {"t": "schema.name", "c": chunk_id, "r": {"column": value, ...}}
 * with values as the Iceberg mapping stores them: int/long/date (days)/time/timestamps (us) as
 * numbers, decimal as an exact string, float/double as numbers or "NaN"/"Infinity"/"-Infinity",
 * string as string, binary as hex, uuid canonical, list as array, struct as object. Then a
 * final line {"done": true, "chunks": N, "rows": N}. Exit 2 on error (message on stderr). */
#include "firn/source_pg.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dump_ctx {
    uint64_t rows;
    uint64_t chunks;
} dump_ctx;

static void json_str(const uint8_t *p, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        uint8_t ch = p[i];
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

static void print_decimal(const firn_field *f, const void *values, size_t i)
{
    unsigned __int128 mag;
    bool neg;
    if (f->precision <= 18) {
        int64_t v = ((const int64_t *)values)[i];
        neg = v < 0;
        mag = neg ? (unsigned __int128)(-(__int128)v) : (unsigned __int128)v;
    } else {
        const uint64_t *w = (const uint64_t *)values + 2 * i;
        __int128 v = (__int128)(((unsigned __int128)w[1] << 64) | w[0]);
        neg = v < 0;
        mag = neg ? (unsigned __int128)(-v) : (unsigned __int128)v;
    }
    char digits[64];
    int n = 0;
    do {
        digits[n++] = (char)('0' + (int)(mag % 10));
        mag /= 10;
    } while (mag > 0);
    while (n <= f->scale)
        digits[n++] = '0';
    putchar('"');
    if (neg)
        putchar('-');
    for (int k = n - 1; k >= 0; k--) {
        putchar(digits[k]);
        if (k == f->scale && k > 0)
            putchar('.');
    }
    putchar('"');
}

static void print_float(double d, bool single)
{
    if (isnan(d))
        fputs("\"NaN\"", stdout);
    else if (isinf(d))
        fputs(d > 0 ? "\"Infinity\"" : "\"-Infinity\"", stdout);
    else
        printf(single ? "%.9g" : "%.17g", d);
}

static void print_value(firn_column *c, size_t i);

static void print_nested(firn_column *c, const firn_field *f, size_t i)
{
    if (f->type == FIRN_TYPE_LIST) {
        const uint32_t *off = firn_column_offsets(c);
        putchar('[');
        for (uint32_t k = off[i]; k < off[i + 1]; k++) {
            if (k > off[i])
                putchar(',');
            print_value(firn_column_child(c, 0), k);
        }
        putchar(']');
        return;
    }
    putchar('{');
    for (size_t k = 0; k < f->n_children; k++) {
        if (k)
            putchar(',');
        json_str((const uint8_t *)f->children[k]->name, strlen(f->children[k]->name));
        putchar(':');
        print_value(firn_column_child(c, k), i);
    }
    putchar('}');
}

static void print_value(firn_column *c, size_t i)
{
    const firn_field *f = firn_column_field(c);
    if (!firn_column_is_valid(c, i)) {
        fputs("null", stdout);
        return;
    }
    const void *v = firn_column_values(c);
    switch (f->type) {
    case FIRN_TYPE_BOOLEAN:
        fputs(((const uint8_t *)v)[i] ? "true" : "false", stdout);
        return;
    case FIRN_TYPE_INT:
    case FIRN_TYPE_DATE:
        printf("%" PRId32, ((const int32_t *)v)[i]);
        return;
    case FIRN_TYPE_LONG:
    case FIRN_TYPE_TIME:
    case FIRN_TYPE_TIMESTAMP:
    case FIRN_TYPE_TIMESTAMPTZ:
    case FIRN_TYPE_TIMESTAMP_NS:
    case FIRN_TYPE_TIMESTAMPTZ_NS:
        printf("%" PRId64, ((const int64_t *)v)[i]);
        return;
    case FIRN_TYPE_FLOAT:
        print_float(((const float *)v)[i], true);
        return;
    case FIRN_TYPE_DOUBLE:
        print_float(((const double *)v)[i], false);
        return;
    case FIRN_TYPE_DECIMAL:
        print_decimal(f, v, i);
        return;
    case FIRN_TYPE_UUID: {
        char s[37];
        firn_uuid_format((const uint8_t *)v + 16 * i, s);
        printf("\"%s\"", s);
        return;
    }
    case FIRN_TYPE_STRING:
    case FIRN_TYPE_BINARY:
    case FIRN_TYPE_FIXED: {
        const uint32_t *off = firn_column_offsets(c);
        const uint8_t *data = firn_column_data(c);
        if (f->type == FIRN_TYPE_STRING) {
            json_str(data + off[i], off[i + 1] - off[i]);
            return;
        }
        putchar('"');
        for (uint32_t k = off[i]; k < off[i + 1]; k++)
            printf("%02x", data[k]);
        putchar('"');
        return;
    }
    case FIRN_TYPE_LIST:
    case FIRN_TYPE_STRUCT:
    case FIRN_TYPE_MAP:
        print_nested(c, f, i);
        return;
    }
}

static firn_rc on_batch(void *vctx, const firn_pg_chunk *chunk, firn_batch *b, firn_err *err)
{
    (void)err;
    dump_ctx *ctx = vctx;
    const firn_pg_table *t = chunk->table;
    flockfile(stdout); /* batches arrive from several workers at once */
    for (size_t r = 0; r < firn_batch_rows(b); r++) {
        fputs("{\"t\":", stdout);
        char name[300];
        snprintf(name, sizeof(name), "%s.%s", t->schema_name, t->name);
        json_str((const uint8_t *)name, strlen(name));
        printf(",\"c\":%u,\"r\":{", chunk->id);
        for (size_t k = 0; k < firn_batch_columns(b); k++) {
            if (k)
                putchar(',');
            json_str((const uint8_t *)t->columns[k].name, strlen(t->columns[k].name));
            putchar(':');
            print_value(firn_batch_column(b, k), r);
        }
        fputs("}}\n", stdout);
    }
    ctx->rows += firn_batch_rows(b);
    funlockfile(stdout);
    return FIRN_OK;
}

static firn_rc on_chunk_done(void *vctx, const firn_pg_chunk *chunk, firn_err *err)
{
    (void)chunk;
    (void)err;
    ((dump_ctx *)vctx)->chunks++;
    return FIRN_OK;
}

static void print_field(const firn_field *f)
{
    char type[64];
    firn_type_format(f, type, sizeof(type));
    printf("{\"id\":%d,\"name\":", f->id);
    json_str((const uint8_t *)f->name, strlen(f->name));
    printf(",\"type\":\"%s\",\"required\":%s,\"children\":[", type, f->required ? "true" : "false");
    for (size_t i = 0; i < f->n_children; i++) {
        if (i)
            putchar(',');
        print_field(f->children[i]);
    }
    fputs("]}", stdout);
}

static void print_schema(const firn_pg_table *t)
{
    char name[300];
    snprintf(name, sizeof(name), "%s.%s", t->schema_name, t->name);
    fputs("{\"table\":", stdout);
    json_str((const uint8_t *)name, strlen(name));
    printf(",\"relkind\":\"%c\",\"replica_identity\":\"%c\",\"leaves\":[", t->relkind,
           t->replica_identity);
    for (size_t i = 0; i < t->n_leaves; i++) {
        if (i)
            putchar(',');
        json_str((const uint8_t *)t->leaves[i].qualified, strlen(t->leaves[i].qualified));
    }
    printf("],\"has_pk\":%s,\"identifier_ids\":[", t->has_primary_key ? "true" : "false");
    int32_t ids[64];
    size_t n = firn_pg_table_identifier_ids(t, ids, 64);
    for (size_t i = 0; i < n; i++)
        printf("%s%d", i ? "," : "", ids[i]);
    printf("],\"last_field_id\":%d,\"pg_types\":[", t->last_field_id);
    for (size_t i = 0; i < t->n_columns; i++) {
        if (i)
            putchar(',');
        json_str((const uint8_t *)t->columns[i].type->name, strlen(t->columns[i].type->name));
    }
    fputs("],\"fields\":[", stdout);
    for (size_t i = 0; i < t->schema->n_children; i++) {
        if (i)
            putchar(',');
        print_field(t->schema->children[i]);
    }
    fputs("]}\n", stdout);
}

typedef struct args {
    int workers;
    size_t chunk_bytes;
    size_t batch_rows;
    bool schema;
    const char *uri;
    const char **patterns;
    size_t n_patterns;
} args;

static int parse_args(int argc, char **argv, args *a)
{
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        uint64_t v = 0;
        firn_err err = {0};
        if (strcmp(argv[i], "--schema") == 0) {
            a->schema = true;
            continue;
        }
        if (i + 1 >= argc || firn_parse_u64(argv[i + 1], strlen(argv[i + 1]), &v, &err))
            return -1;
        if (strcmp(argv[i], "--workers") == 0)
            a->workers = (int)v;
        else if (strcmp(argv[i], "--chunk-bytes") == 0)
            a->chunk_bytes = (size_t)v;
        else if (strcmp(argv[i], "--batch-rows") == 0)
            a->batch_rows = (size_t)v;
        else
            return -1;
        i++;
    }
    if (i >= argc)
        return -1;
    a->uri = argv[i++];
    a->patterns = (const char **)(argv + i);
    a->n_patterns = (size_t)(argc - i);
    return 0;
}

static firn_rc run(const args *a, firn_err *err)
{
    firn_pg_conn_config cfg = {.uri = a->uri};
    firn_pg_conn *conn = NULL;
    firn_pg_catalog *cat = NULL;
    firn_pg_plan *plan = NULL;
    firn_pg_table **tables = NULL;
    dump_ctx ctx = {0};
    char snapshot[64];
    firn_rc rc = firn_pg_conn_open(&cfg, FIRN_PG_CONN_SQL, &conn, err);
    if (!rc)
        rc = firn_pg_discover(conn, a->patterns, a->n_patterns, &cat, err);
    if (rc)
        goto out;
    size_t n = firn_pg_catalog_tables(cat);
    tables = calloc(n ? n : 1, sizeof(*tables));
    for (size_t i = 0; i < n; i++) {
        tables[i] = firn_pg_catalog_table(cat, i);
        if (a->schema)
            print_schema(tables[i]);
    }
    if (a->schema)
        goto out;
    rc = firn_pg_snapshot_export(conn, snapshot, sizeof(snapshot), err);
    if (!rc)
        rc = firn_pg_backfill_plan(conn, tables, n, a->chunk_bytes, &plan, err);
    if (rc)
        goto out;
    firn_pg_backfill_opts opts = {.conn = &cfg,
                                  .snapshot = snapshot,
                                  .workers = a->workers,
                                  .batch_rows = a->batch_rows,
                                  .on_batch = on_batch,
                                  .on_chunk_done = on_chunk_done,
                                  .ctx = &ctx};
    rc = firn_pg_backfill_run(plan, &opts, err);
    if (!rc)
        printf("{\"done\":true,\"chunks\":%" PRIu64 ",\"planned\":%zu,\"rows\":%" PRIu64 "}\n",
               ctx.chunks, firn_pg_plan_chunks(plan), ctx.rows);
out:
    firn_pg_plan_free(plan);
    free(tables);
    firn_pg_catalog_free(cat);
    firn_pg_conn_close(conn);
    return rc;
}

int main(int argc, char **argv)
{
    args a = {0};
    if (parse_args(argc, argv, &a)) {
        fprintf(stderr, "usage: pg_backfill_dump [--workers N] [--chunk-bytes B] "
                        "[--batch-rows R] [--schema] URI [PATTERN...]\n");
        return 2;
    }
    firn_err err = {0};
    firn_rc rc = run(&a, &err);
    fflush(stdout);
    if (rc) {
        fprintf(stderr, "pg_backfill_dump: %s: %s\n", firn_rc_name(rc), err.msg);
        return 2;
    }
    return 0;
}
