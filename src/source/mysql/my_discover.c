/* SPDX-License-Identifier: Apache-2.0 */
/* Discovery of a MySQL/MariaDB server's base tables from information_schema: columns in ordinal
 * order (generated and invisible ones included), types through the mapping of my_types.c,
 * primary keys, and the SELECT list the backfill reads them with. */
#include "my_int.h"

#include <stdlib.h>
#include <string.h>

#define SQL_MAX ((size_t)1 << 20)

struct firn_my_catalog {
    firn_my_table *tables;
    size_t n, cap;
};

static const char SYSTEM_DBS[] = "('mysql', 'information_schema', 'performance_schema', 'sys')";

/* " AND <col> IN ('a', 'b')" or the system-database exclusion. */
static firn_rc
append_filter(firn_buf *b, const char *col, const char *const *dbs, size_t n, firn_err *err)
{
    firn_rc rc;
    if (n == 0) {
        rc = firn_buf_appendf(b, " AND %s NOT IN %s", col, SYSTEM_DBS);
    } else {
        rc = firn_buf_appendf(b, " AND %s IN (", col);
        for (size_t i = 0; rc == FIRN_OK && i < n; i++) {
            if (i)
                rc = firn_buf_append_cstr(b, ", ");
            if (rc == FIRN_OK)
                rc = firn_my_literal_append(b, dbs[i]);
        }
        if (rc == FIRN_OK)
            rc = firn_buf_append_cstr(b, ")");
    }
    if (rc)
        return firn_err_set(err, rc, "discovery query too long (%zu databases)", n);
    return FIRN_OK;
}

static int64_t num_or(const char *s, int64_t dflt)
{
    if (!s)
        return dflt;
    int64_t v;
    firn_err ignored = {0};
    if (firn_parse_i64(s, strlen(s), &v, &ignored))
        return dflt;
    return v;
}

static firn_my_table *table_add(firn_my_catalog *cat)
{
    if (cat->n == cat->cap) {
        cat->cap = cat->cap ? cat->cap * 2 : 16;
        cat->tables = firn_reallocarray(cat->tables, cat->cap, sizeof(*cat->tables));
    }
    firn_my_table *t = &cat->tables[cat->n++];
    memset(t, 0, sizeof(*t));
    return t;
}

static firn_rc
run_query(firn_my_conn *c, firn_buf *sql, MYSQL_RES **res, const char *what, firn_err *err)
{
    firn_rc rc = firn__my_query(c, (const char *)sql->data, res, err);
    if (rc)
        firn_err_context(err, "while listing %s", what);
    return rc;
}

static firn_rc load_tables(
    firn_my_conn *c, firn_my_catalog *cat, const char *const *dbs, size_t n_dbs, firn_err *err)
{
    firn_buf sql;
    firn_buf_init(&sql, SQL_MAX);
    firn_rc rc = firn_buf_append_cstr(
        &sql, "SELECT TABLE_SCHEMA, TABLE_NAME, IFNULL(ENGINE, ''), IFNULL(TABLE_ROWS, 0), "
              "IFNULL(DATA_LENGTH, 0) FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE "
              "TABLE'");
    if (rc == FIRN_OK)
        rc = append_filter(&sql, "TABLE_SCHEMA", dbs, n_dbs, err);
    if (rc == FIRN_OK)
        rc = firn_buf_append_cstr(&sql, " ORDER BY TABLE_SCHEMA, TABLE_NAME");
    MYSQL_RES *res = NULL;
    if (rc == FIRN_OK)
        rc = run_query(c, &sql, &res, "tables", err);
    firn_buf_deinit(&sql);
    if (rc)
        return rc;
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(res)) != NULL) {
        firn_my_table *t = table_add(cat);
        t->database = firn_strdup(row[0] ? row[0] : "");
        t->name = firn_strdup(row[1] ? row[1] : "");
        t->engine = firn_strdup(row[2] ? row[2] : "");
        t->rows_estimate = num_or(row[3], 0);
        t->data_bytes = num_or(row[4], 0);
    }
    mysql_free_result(res);
    return FIRN_OK;
}

static firn_rc add_column(firn_my_table *t, MYSQL_ROW row, firn_err *err)
{
    firn_my_column col = {0};
    firn_rc rc = firn_my_type_resolve(row[4], row[5], num_or(row[6], -1), num_or(row[7], -1),
                                      num_or(row[8], -1), num_or(row[9], -1), &col.type, err);
    if (rc) {
        firn_err_context(err, "column \"%s\" of table \"%s\".\"%s\"", row[2], t->database, t->name);
        return rc;
    }
    col.name = firn_strdup(row[2]);
    col.ordinal = (int32_t)num_or(row[3], 0);
    col.not_null = row[10] && strcmp(row[10], "NO") == 0;
    const char *extra = row[11] ? row[11] : "";
    col.generated = strstr(extra, "VIRTUAL GENERATED") || strstr(extra, "STORED GENERATED") ||
                    strstr(extra, "PERSISTENT GENERATED");
    col.invisible = strstr(extra, "INVISIBLE") != NULL;
    t->columns = firn_reallocarray(t->columns, t->n_columns + 1, sizeof(*t->columns));
    col.field_id = (int32_t)t->n_columns + 1;
    t->columns[t->n_columns++] = col;
    return FIRN_OK;
}

/* Rows arrive in (database, table) order as the tables did; the cursor follows them. */
static firn_my_table *table_at(firn_my_catalog *cat, size_t *cursor, const char *db, const char *n)
{
    if (*cursor < cat->n && !strcmp(cat->tables[*cursor].database, db) &&
        !strcmp(cat->tables[*cursor].name, n))
        return &cat->tables[*cursor];
    firn_my_table *t = firn_my_catalog_find(cat, db, n);
    if (t)
        *cursor = (size_t)(t - cat->tables);
    return t;
}

static firn_rc load_columns(
    firn_my_conn *c, firn_my_catalog *cat, const char *const *dbs, size_t n_dbs, firn_err *err)
{
    firn_buf sql;
    firn_buf_init(&sql, SQL_MAX);
    firn_rc rc = firn_buf_append_cstr(
        &sql, "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION, DATA_TYPE, "
              "COLUMN_TYPE, NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION, "
              "CHARACTER_MAXIMUM_LENGTH, IS_NULLABLE, EXTRA FROM information_schema.COLUMNS "
              "WHERE 1 = 1");
    if (rc == FIRN_OK)
        rc = append_filter(&sql, "TABLE_SCHEMA", dbs, n_dbs, err);
    if (rc == FIRN_OK)
        rc = firn_buf_append_cstr(&sql, " ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION");
    MYSQL_RES *res = NULL;
    if (rc == FIRN_OK)
        rc = run_query(c, &sql, &res, "columns", err);
    firn_buf_deinit(&sql);
    if (rc)
        return rc;
    size_t cursor = 0;
    MYSQL_ROW row;
    while (rc == FIRN_OK && (row = mysql_fetch_row(res)) != NULL) {
        if (!row[0] || !row[1] || !row[2] || !row[4])
            continue;
        firn_my_table *t = table_at(cat, &cursor, row[0], row[1]);
        if (t) /* views have columns too; they are not tables */
            rc = add_column(t, row, err);
    }
    mysql_free_result(res);
    return rc;
}

static firn_rc load_keys(
    firn_my_conn *c, firn_my_catalog *cat, const char *const *dbs, size_t n_dbs, firn_err *err)
{
    firn_buf sql;
    firn_buf_init(&sql, SQL_MAX);
    firn_rc rc = firn_buf_append_cstr(&sql, "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM "
                                            "information_schema.STATISTICS WHERE INDEX_NAME = "
                                            "'PRIMARY'");
    if (rc == FIRN_OK)
        rc = append_filter(&sql, "TABLE_SCHEMA", dbs, n_dbs, err);
    if (rc == FIRN_OK)
        rc = firn_buf_append_cstr(&sql, " ORDER BY TABLE_SCHEMA, TABLE_NAME, SEQ_IN_INDEX");
    MYSQL_RES *res = NULL;
    if (rc == FIRN_OK)
        rc = run_query(c, &sql, &res, "primary keys", err);
    firn_buf_deinit(&sql);
    if (rc)
        return rc;
    size_t cursor = 0;
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(res)) != NULL) {
        if (!row[0] || !row[1] || !row[2])
            continue;
        firn_my_table *t = table_at(cat, &cursor, row[0], row[1]);
        for (size_t i = 0; t && i < t->n_columns; i++) {
            if (strcmp(t->columns[i].name, row[2]) == 0) {
                t->key = firn_reallocarray(t->key, t->n_key + 1, sizeof(*t->key));
                t->key[t->n_key++] = i;
                break;
            }
        }
    }
    mysql_free_result(res);
    return FIRN_OK;
}

static void build_schema(firn_my_table *t)
{
    t->schema = firn_field_new(0, "schema", FIRN_TYPE_STRUCT, true);
    for (size_t i = 0; i < t->n_columns; i++) {
        const firn_my_column *c = &t->columns[i];
        bool key = false;
        for (size_t k = 0; k < t->n_key; k++)
            key = key || t->key[k] == i;
        /* Key columns are required (Iceberg identifier fields must be); a key column cannot
         * hold a zero date under InnoDB's rules for NOT NULL keys firn reads, and
         * firn_my_type_field keeps temporal columns optional otherwise. */
        firn_field *f = firn_my_type_field(&c->type, c->field_id, c->name, c->not_null);
        if (key && c->not_null)
            f->required = true;
        firn_field_add(t->schema, f);
    }
}

firn_rc firn_my_discover(firn_my_conn *c,
                         const char *const *databases,
                         size_t n_databases,
                         firn_my_catalog **out,
                         firn_err *err)
{
    *out = NULL;
    firn_my_catalog *cat = firn_calloc(1, sizeof(*cat));
    firn_rc rc = load_tables(c, cat, databases, n_databases, err);
    if (rc == FIRN_OK)
        rc = load_columns(c, cat, databases, n_databases, err);
    if (rc == FIRN_OK)
        rc = load_keys(c, cat, databases, n_databases, err);
    if (rc) {
        firn_my_catalog_free(cat);
        return rc;
    }
    for (size_t i = 0; i < cat->n; i++)
        build_schema(&cat->tables[i]);
    *out = cat;
    return FIRN_OK;
}

static void table_deinit(firn_my_table *t)
{
    for (size_t i = 0; i < t->n_columns; i++) {
        firn_free(t->columns[i].name);
        firn_my_type_deinit(&t->columns[i].type);
    }
    firn_free(t->columns);
    firn_free(t->key);
    firn_free(t->database);
    firn_free(t->name);
    firn_free(t->engine);
    firn_field_free(t->schema);
}

void firn_my_catalog_free(firn_my_catalog *cat)
{
    if (!cat)
        return;
    for (size_t i = 0; i < cat->n; i++)
        table_deinit(&cat->tables[i]);
    firn_free(cat->tables);
    firn_free(cat);
}

size_t firn_my_catalog_tables(const firn_my_catalog *cat)
{
    return cat->n;
}

firn_my_table *firn_my_catalog_table(firn_my_catalog *cat, size_t i)
{
    FIRN_ASSERT(i < cat->n);
    return &cat->tables[i];
}

firn_my_table *firn_my_catalog_find(firn_my_catalog *cat, const char *database, const char *name)
{
    for (size_t i = 0; i < cat->n; i++) {
        if (!strcmp(cat->tables[i].database, database) && !strcmp(cat->tables[i].name, name))
            return &cat->tables[i];
    }
    return NULL;
}

firn_rc firn_my_select_list(const firn_my_table *t, firn_buf *out)
{
    for (size_t i = 0; i < t->n_columns; i++) {
        if (i)
            FIRN_TRY(firn_buf_append_cstr(out, ", "));
        const bool single = t->columns[i].type.kind == FIRN_MY_KIND_FLOAT;
        if (single) /* the server prints FLOAT with 6 digits; its double is exact */
            FIRN_TRY(firn_buf_append_cstr(out, "CAST("));
        FIRN_TRY(firn_my_ident_append(out, t->columns[i].name));
        if (single)
            FIRN_TRY(firn_buf_append_cstr(out, " AS DOUBLE)"));
    }
    return FIRN_OK;
}
