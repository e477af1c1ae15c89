/* SPDX-License-Identifier: Apache-2.0 */
/* The text decoder against the binary one on the type corpus (tests/data/type_corpus.sql): the
 * table is read once through `COPY ... (FORMAT binary)` and firn_pg_value_decode (the backfill
 * path), and again as simple-query text results decoded with firn_pg_value_decode_text, under
 * the SQL connection's settings (IntervalStyle postgres) and under the replication connection's
 * (IntervalStyle iso_8601, lc_monetary C). The two batches must be equal value by value:
 * validity, fixed-width values (NaN equal to NaN), string bytes, list offsets, children, and
 * the decoding counters. */
#include "t.h"
#include "firn/source_pg.h"

#include <libpq-fe.h>
#include <math.h>

static const char *uri_or_skip(void)
{
    const char *v = getenv("FIRN_TEST_PGURI");
    if (!v || !*v)
        T_SKIP("FIRN_TEST_PGURI not set (run under tests/harness/pg_cluster.sh)");
    return v;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        T_FAIL("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n)
        T_FAIL("cannot read %s", path);
    s[n] = '\0';
    fclose(f);
    return s;
}

typedef struct corpus {
    firn_pg_conn *conn;
    firn_pg_catalog *cat;
    firn_pg_table *t;
} corpus;

static void corpus_open(corpus *c)
{
    firn_pg_conn_config cfg = {.uri = uri_or_skip()};
    firn_err err = {0};
    T_OK_ERR(firn_pg_conn_open(&cfg, FIRN_PG_CONN_SQL, &c->conn, &err), &err);
    char *sql = read_file(FIRN_SOURCE_DIR "/tests/data/type_corpus.sql");
    T_OK_ERR(firn_pg_conn_exec(c->conn, sql, &err), &err);
    free(sql);
    const char *pat = "public.firn_type_corpus";
    T_OK_ERR(firn_pg_discover(c->conn, &pat, 1, &c->cat, &err), &err);
    c->t = firn_pg_catalog_find(c->cat, "public", "firn_type_corpus");
    T_TRUE(c->t != NULL);
}

static void corpus_close(corpus *c)
{
    firn_pg_catalog_free(c->cat);
    firn_pg_conn_close(c->conn);
}

/* The binary path: COPY (SELECT <select list> ... ORDER BY id) TO STDOUT (FORMAT binary). */
static firn_batch *read_binary(corpus *c, firn_pg_decode_stats *stats)
{
    firn_batch *b = firn_batch_new(c->t->schema);
    firn_buf q;
    firn_buf_init(&q, 1 << 20);
    T_OK(firn_buf_append_cstr(&q, "COPY (SELECT "));
    T_OK(firn_pg_copy_select_list(c->t, &q));
    T_OK(firn_buf_append_cstr(&q, " FROM "));
    T_OK(firn_buf_append_cstr(&q, c->t->qualified));
    T_OK(firn_buf_append_cstr(&q, " ORDER BY id) TO STDOUT (FORMAT binary)"));
    T_OK(firn_buf_append(&q, "", 1));
    PGconn *pq = firn_pg_conn_pq(c->conn);
    PGresult *res = PQexec(pq, (const char *)q.data);
    if (PQresultStatus(res) != PGRES_COPY_OUT)
        T_FAIL("COPY failed: %s", PQerrorMessage(pq));
    PQclear(res);
    firn_pg_copy *d = firn_pg_copy_new(c->t, b);
    firn_err err = {0};
    char *buf = NULL;
    int n;
    while ((n = PQgetCopyData(pq, &buf, 0)) > 0) {
        T_OK_ERR(firn_pg_copy_feed(d, (const uint8_t *)buf, (size_t)n, 0, &err), &err);
        PQfreemem(buf);
    }
    T_EQ_INT(n, -1);
    res = PQgetResult(pq);
    T_EQ_INT(PQresultStatus(res), PGRES_COMMAND_OK);
    PQclear(res);
    T_OK_ERR(firn_pg_copy_finish(d, &err), &err);
    *stats = *firn_pg_copy_stats(d);
    firn_pg_copy_free(d);
    firn_buf_deinit(&q);
    return b;
}

/* The text path: every column as the server's text output (no casts), decoded as text. */
static firn_batch *read_text(corpus *c, firn_pg_decode_stats *stats)
{
    firn_batch *b = firn_batch_new(c->t->schema);
    firn_buf q;
    firn_buf_init(&q, 1 << 20);
    T_OK(firn_buf_append_cstr(&q, "SELECT "));
    for (size_t i = 0; i < c->t->n_columns; i++) {
        T_OK(firn_buf_append_cstr(&q, i ? ", \"" : "\""));
        T_OK(firn_buf_append_cstr(&q, c->t->columns[i].name));
        T_OK(firn_buf_append_cstr(&q, "\""));
    }
    T_OK(firn_buf_append_cstr(&q, " FROM "));
    T_OK(firn_buf_append_cstr(&q, c->t->qualified));
    T_OK(firn_buf_append_cstr(&q, " ORDER BY id"));
    T_OK(firn_buf_append(&q, "", 1));
    PGresult *res = PQexec(firn_pg_conn_pq(c->conn), (const char *)q.data);
    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        T_FAIL("SELECT failed: %s", PQresultErrorMessage(res));
    firn_err err = {0};
    for (int r = 0; r < PQntuples(res); r++) {
        for (size_t i = 0; i < c->t->n_columns; i++) {
            firn_column *col = firn_batch_column(b, i);
            if (PQgetisnull(res, r, (int)i)) {
                firn_column_append_null(col);
                continue;
            }
            const char *v = PQgetvalue(res, r, (int)i);
            firn_rc rc =
                firn_pg_value_decode_text(c->t->columns[i].type, (const uint8_t *)v,
                                          (size_t)PQgetlength(res, r, (int)i), col, stats, &err);
            if (rc)
                T_FAIL("row %d column %s text \"%s\": %s", r, c->t->columns[i].name, v, err.msg);
        }
        T_OK_ERR(firn_batch_end_row(b, FIRN_OP_READ, 0, &err), &err);
    }
    PQclear(res);
    firn_buf_deinit(&q);
    return b;
}

static void hex(const uint8_t *p, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 3 < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%02x", p[i]);
    out[o] = '\0';
}

static bool same_fixed(const firn_field *f, const uint8_t *a, const uint8_t *b, size_t w)
{
    if (f->type == FIRN_TYPE_FLOAT) {
        float x, y;
        memcpy(&x, a, 4);
        memcpy(&y, b, 4);
        if (isnan(x) && isnan(y))
            return true; /* the sign of a NaN is not in its text */
    } else if (f->type == FIRN_TYPE_DOUBLE) {
        double x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (isnan(x) && isnan(y))
            return true;
    }
    return memcmp(a, b, w) == 0;
}

/* Compares slots [0, n) of two columns of the same field, recursively; returns the values
 * compared. */
static size_t cmp_col(const char *path, firn_column *a, firn_column *b)
{
    const firn_field *f = firn_column_field(a);
    size_t n = firn_column_length(a);
    if (firn_column_length(b) != n)
        T_FAIL("%s: %zu slots (binary) != %zu (text)", path, n, firn_column_length(b));
    size_t w = firn_type_value_size(f);
    const uint32_t *oa = firn_column_offsets(a), *ob = firn_column_offsets(b);
    size_t compared = 0;
    for (size_t i = 0; i < n; i++) {
        bool va = firn_column_is_valid(a, i), vb = firn_column_is_valid(b, i);
        if (va != vb)
            T_FAIL("%s slot %zu: %s (binary) vs %s (text)", path, i, va ? "value" : "null",
                   vb ? "value" : "null");
        if (!va)
            continue;
        compared++;
        if (w > 0) {
            const uint8_t *x = (const uint8_t *)firn_column_values(a) + i * w;
            const uint8_t *y = (const uint8_t *)firn_column_values(b) + i * w;
            if (!same_fixed(f, x, y, w)) {
                char hx[80], hy[80];
                hex(x, w, hx, sizeof(hx));
                hex(y, w, hy, sizeof(hy));
                T_FAIL("%s slot %zu: %s (binary) != %s (text)", path, i, hx, hy);
            }
        } else if (f->type == FIRN_TYPE_STRING || f->type == FIRN_TYPE_BINARY) {
            size_t la = oa[i + 1] - oa[i], lb = ob[i + 1] - ob[i];
            const uint8_t *x = firn_column_data(a) + oa[i], *y = firn_column_data(b) + ob[i];
            if (la != lb || memcmp(x, y, la) != 0)
                T_FAIL("%s slot %zu: \"%.*s\" (binary) != \"%.*s\" (text)", path, i, (int)la,
                       (const char *)x, (int)lb, (const char *)y);
        } else if (f->type == FIRN_TYPE_LIST || f->type == FIRN_TYPE_MAP) {
            if (oa[i] != ob[i] || oa[i + 1] != ob[i + 1])
                T_FAIL("%s slot %zu: list [%u,%u) (binary) != [%u,%u) (text)", path, i, oa[i],
                       oa[i + 1], ob[i], ob[i + 1]);
        }
    }
    for (size_t k = 0; k < firn_column_children(a); k++) {
        char sub[256];
        snprintf(sub, sizeof(sub), "%s.%s", path, f->children[k]->name);
        compared += cmp_col(sub, firn_column_child(a, k), firn_column_child(b, k));
    }
    return compared;
}

static void compare_paths(corpus *c)
{
    firn_pg_decode_stats sb = {0}, st = {0};
    firn_batch *bin = read_binary(c, &sb);
    firn_batch *txt = read_text(c, &st);
    T_EQ_UINT(firn_batch_rows(bin), 10);
    T_EQ_UINT(firn_batch_rows(txt), 10);
    size_t values = 0;
    for (size_t i = 0; i < c->t->n_columns; i++)
        values +=
            cmp_col(c->t->columns[i].name, firn_batch_column(bin, i), firn_batch_column(txt, i));
    /* Every column of the corpus, nested values included, with a few hundred values. */
    T_TRUE(values > 400);
    T_EQ_UINT(st.nan_to_null, sb.nan_to_null);
    T_EQ_UINT(st.clamped, sb.clamped);
    T_EQ_UINT(st.array_flattened, sb.array_flattened);
    T_EQ_UINT(st.array_lbound_lost, sb.array_lbound_lost);
    /* The corpus exercises each rule at least once. */
    T_TRUE(sb.nan_to_null > 0 && sb.clamped > 0 && sb.array_flattened > 0 &&
           sb.array_lbound_lost > 0);
    firn_batch_free(bin);
    firn_batch_free(txt);
}

T_TEST(text_equals_binary_sql_settings)
{
    corpus c;
    corpus_open(&c);
    compare_paths(&c);
    corpus_close(&c);
}

T_TEST(text_equals_binary_replication_settings)
{
    corpus c;
    corpus_open(&c);
    firn_err err = {0};
    /* The settings pgo_stream.c gives the replication connection. */
    T_OK_ERR(firn_pg_conn_exec(c.conn, "SET IntervalStyle = iso_8601; SET lc_monetary = 'C'", &err),
             &err);
    compare_paths(&c);
    corpus_close(&c);
}

T_TEST(text_money_under_other_lc_monetary)
{
    /* The amount's digits do not depend on the locale's fraction digits or symbols. */
    corpus c;
    corpus_open(&c);
    firn_err err = {0};
    if (firn_pg_conn_exec(c.conn, "SET lc_monetary = 'C.UTF-8'", &err) != FIRN_OK)
        T_SKIP("no C.UTF-8 locale: %s", err.msg);
    compare_paths(&c);
    corpus_close(&c);
}

T_TEST(text_type_corpus_types_covered)
{
    /* Every decoder kind appears in the corpus, so the comparison covers each text parser. */
    corpus c;
    corpus_open(&c);
    bool seen[FIRN_PG_KIND_ARRAY + 1] = {0};
    for (size_t i = 0; i < c.t->n_columns; i++) {
        const firn_pg_type *ty = c.t->columns[i].type;
        seen[ty->kind] = true;
        if (ty->elem)
            seen[ty->elem->kind] = true;
    }
    for (int k = FIRN_PG_KIND_BOOL; k <= FIRN_PG_KIND_ARRAY; k++) {
        if (!seen[k])
            T_FAIL("no column of kind %s in the corpus", firn_pg_kind_name((firn_pg_kind)k));
    }
    corpus_close(&c);
}

T_MAIN(T_CASE(text_equals_binary_sql_settings),
       T_CASE(text_equals_binary_replication_settings),
       T_CASE(text_money_under_other_lc_monetary),
       T_CASE(text_type_corpus_types_covered))
