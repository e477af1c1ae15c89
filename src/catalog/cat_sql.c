/* SPDX-License-Identifier: Apache-2.0 */
/* The SQL catalog on SQLite: the tables of Iceberg's JDBC catalog and pyiceberg's SqlCatalog
 * (pyiceberg/catalog/sql.py), so both open each other's tables. A commit writes the next
 * metadata file and swaps metadata_location with a compare-and-swap UPDATE in one immediate
 * transaction; the loser of a race gets FIRN_ERR_CONFLICT. */
#include "cat_int.h"
#include "firn/net.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define METADATA_MAX_BYTES (64u * 1024u * 1024u)
#define PATH_MAX_BYTES     4096

typedef struct sql_catalog {
    firn_catalog base;
    sqlite3 *db;
    char *name;
    char *warehouse; /* no trailing '/', NULL when not configured */
    firn_io *io;
    bool own_io;
    bool has_type_column; /* pyiceberg "v1" schema: iceberg_type present */
} sql_catalog;

static const char DDL_TABLES[] = "CREATE TABLE IF NOT EXISTS iceberg_tables (\n"
                                 "\tcatalog_name VARCHAR(255) NOT NULL, \n"
                                 "\ttable_namespace VARCHAR(255) NOT NULL, \n"
                                 "\ttable_name VARCHAR(255) NOT NULL, \n"
                                 "\tmetadata_location VARCHAR(1000), \n"
                                 "\tprevious_metadata_location VARCHAR(1000), \n"
                                 "\ticeberg_type VARCHAR(5), \n"
                                 "\tPRIMARY KEY (catalog_name, table_namespace, table_name)\n"
                                 ")";
static const char DDL_PROPS[] = "CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (\n"
                                "\tcatalog_name VARCHAR(255) NOT NULL, \n"
                                "\tnamespace VARCHAR(255) NOT NULL, \n"
                                "\tproperty_key VARCHAR(255) NOT NULL, \n"
                                "\tproperty_value VARCHAR(1000) NOT NULL, \n"
                                "\tPRIMARY KEY (catalog_name, namespace, property_key)\n"
                                ")";

/* ------------------------------------------------------------------------------------------------
 * SQLite helpers
 * ----------------------------------------------------------------------------------------------*/

static firn_rc db_fail(sql_catalog *c, int src, const char *what, firn_err *err)
{
    /* A full or read-only disk carries its errno, so the exit code says destination (4)
     * wherever the engine meets it, as for the warehouse's files. */
    int sys = (src & 0xff) == SQLITE_FULL ? ENOSPC : sqlite3_system_errno(c->db);
    if (sys == ENOSPC || sys == EDQUOT || sys == EROFS)
        return firn_err_set_errno(err, FIRN_ERR_IO, sys, "could not %s in the SQL catalog \"%s\"",
                                  what, sqlite3_db_filename(c->db, "main"));
    firn_rc rc = (src == SQLITE_BUSY || src == SQLITE_LOCKED) ? FIRN_ERR_UNAVAILABLE : FIRN_ERR_IO;
    return firn_err_set(err, rc, "could not %s in the SQL catalog: %s", what,
                        sqlite3_errmsg(c->db));
}

static firn_rc db_exec(sql_catalog *c, const char *sql, firn_err *err)
{
    int src = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
    return src == SQLITE_OK ? FIRN_OK : db_fail(c, src, "run statement", err);
}

/* Prepares sql and binds args[0..n) as text (NULL binds SQL NULL). */
static firn_rc db_prepare(sql_catalog *c,
                          const char *sql,
                          const char *const *args,
                          size_t n,
                          sqlite3_stmt **out,
                          firn_err *err)
{
    *out = NULL;
    int src = sqlite3_prepare_v2(c->db, sql, -1, out, NULL);
    if (src != SQLITE_OK)
        return db_fail(c, src, "prepare a statement", err);
    for (size_t i = 0; i < n; i++) {
        src = args[i] ? sqlite3_bind_text(*out, (int)i + 1, args[i], -1, SQLITE_TRANSIENT)
                      : sqlite3_bind_null(*out, (int)i + 1);
        if (src != SQLITE_OK) {
            sqlite3_finalize(*out);
            *out = NULL;
            return db_fail(c, src, "bind a value", err);
        }
    }
    return FIRN_OK;
}

/* Runs a statement without result rows; *out_changes (NULL accepted) gets the rows changed. */
static firn_rc db_run(sql_catalog *c,
                      const char *sql,
                      const char *const *args,
                      size_t n,
                      int *out_changes,
                      firn_err *err)
{
    sqlite3_stmt *st;
    FIRN_TRY(db_prepare(c, sql, args, n, &st, err));
    int src = sqlite3_step(st);
    sqlite3_finalize(st);
    if (src != SQLITE_DONE) {
        if (src == SQLITE_CONSTRAINT)
            return firn_err_set(err, FIRN_ERR_EXISTS, "row exists in the SQL catalog");
        return db_fail(c, src, "write", err);
    }
    if (out_changes)
        *out_changes = sqlite3_changes(c->db);
    return FIRN_OK;
}

/* Collects column 0 of every row as strings into out (appended). */
static firn_rc db_strings(sql_catalog *c,
                          const char *sql,
                          const char *const *args,
                          size_t n,
                          firn_strlist *out,
                          firn_err *err)
{
    sqlite3_stmt *st;
    FIRN_TRY(db_prepare(c, sql, args, n, &st, err));
    int src;
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *v = sqlite3_column_text(st, 0);
        out->items = firn_reallocarray(out->items, out->count + 1, sizeof(*out->items));
        out->items[out->count++] = firn_strdup(v ? (const char *)v : "");
    }
    sqlite3_finalize(st);
    return src == SQLITE_DONE ? FIRN_OK : db_fail(c, src, "read", err);
}

static firn_rc db_begin(sql_catalog *c, firn_err *err)
{
    return db_exec(c, "BEGIN IMMEDIATE", err);
}

static firn_rc db_end(sql_catalog *c, firn_rc rc, firn_err *err)
{
    if (rc) {
        firn_rc_ignore(db_exec(c, "ROLLBACK", NULL));
        return rc;
    }
    return db_exec(c, "COMMIT", err);
}

/* ------------------------------------------------------------------------------------------------
 * Namespaces (pyiceberg SqlCatalog semantics)
 * ----------------------------------------------------------------------------------------------*/

/* "a_b" -> "a!_b.%": the LIKE pattern of namespaces below ns. Owned. */
static char *child_pattern(const char *ns)
{
    firn_buf b;
    firn_buf_init(&b, 4 * strlen(ns) + 16);
    for (const char *p = ns; *p; p++) {
        if (*p == '!' || *p == '_' || *p == '%')
            firn_rc_ignore(firn_buf_append(&b, "!", 1));
        firn_rc_ignore(firn_buf_append(&b, p, 1));
    }
    firn_rc_ignore(firn_buf_append_cstr(&b, ".%"));
    return (char *)firn_buf_take(&b, NULL);
}

static firn_rc sql_namespace_exists(firn_catalog *base, const char *ns, bool *out, firn_err *err)
{
    sql_catalog *c = (sql_catalog *)base;
    char *pat = child_pattern(ns);
    const char *args[] = {c->name, ns, pat};
    firn_strlist rows = {0};
    firn_rc rc = db_strings(c,
                            "SELECT EXISTS(SELECT 1 FROM iceberg_tables WHERE catalog_name = ?1 "
                            "AND (table_namespace = ?2 OR table_namespace LIKE ?3 ESCAPE '!')) "
                            "OR EXISTS(SELECT 1 FROM iceberg_namespace_properties WHERE "
                            "catalog_name = ?1 AND (namespace = ?2 OR namespace LIKE ?3 "
                            "ESCAPE '!'))",
                            args, 3, &rows, err);
    *out = !rc && rows.count == 1 && strcmp(rows.items[0], "1") == 0;
    firn_strlist_deinit(&rows);
    firn_free(pat);
    return rc;
}

static firn_rc require_namespace(sql_catalog *c, const char *ns, firn_err *err)
{
    bool exists;
    FIRN_TRY(sql_namespace_exists(&c->base, ns, &exists, err));
    if (!exists)
        return firn_err_set(err, FIRN_ERR_NOT_FOUND, "namespace \"%s\" does not exist", ns);
    return FIRN_OK;
}

static firn_rc put_props(sql_catalog *c, const char *ns, const firn_props *props, firn_err *err)
{
    for (size_t i = 0; i < props->n; i++) {
        const char *args[] = {c->name, ns, props->keys[i], props->vals[i]};
        FIRN_TRY(db_run(c,
                        "INSERT OR REPLACE INTO iceberg_namespace_properties (catalog_name, "
                        "namespace, property_key, property_value) VALUES (?1, ?2, ?3, ?4)",
                        args, 4, NULL, err));
    }
    return FIRN_OK;
}

static firn_rc
sql_create_namespace(firn_catalog *base, const char *ns, const firn_props *props, firn_err *err)
{
    sql_catalog *c = (sql_catalog *)base;
    FIRN_TRY(db_begin(c, err));
    bool exists;
    firn_rc rc = sql_namespace_exists(base, ns, &exists, err);
    if (!rc && exists)
        rc = firn_err_set(err, FIRN_ERR_EXISTS, "namespace \"%s\" already exists", ns);
    firn_props marker;
    firn_props_init(&marker);
    firn_props_set(&marker, "exists", "true");
    if (!rc)
        rc = put_props(c, ns, props && props->n > 0 ? props : &marker, err);
    firn_props_deinit(&marker);
    return db_end(c, rc, err);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Keeps the first level+1 levels of ns when it lies below parent; NULL otherwise. Owned. */
static char *child_at(const char *ns, const char *parent, size_t levels)
{
    size_t plen = parent ? strlen(parent) : 0;
    if (parent && (strncmp(ns, parent, plen) != 0 || ns[plen] != '.'))
        return NULL;
    const char *p = ns;
    for (size_t i = 0; i <= levels; i++) {
        const char *dot = strchr(p, '.');
        if (i == levels)
            return firn_strndup(ns, dot ? (size_t)(dot - ns) : strlen(ns));
        if (!dot)
            return NULL;
        p = dot + 1;
    }
    return NULL;
}

static firn_rc
sql_list_namespaces(firn_catalog *base, const char *parent, firn_strlist *out, firn_err *err)
{
    sql_catalog *c = (sql_catalog *)base;
    if (parent)
        FIRN_TRY(require_namespace(c, parent, err));
    firn_strlist all = {0};
    const char *args[] = {c->name};
    FIRN_TRY(db_strings(c,
                        "SELECT table_namespace FROM iceberg_tables WHERE catalog_name = ?1 "
                        "UNION SELECT namespace FROM iceberg_namespace_properties WHERE "
                        "catalog_name = ?1",
                        args, 1, &all, err));
    size_t levels = 0;
    for (const char *p = parent; p && *p; p++)
        levels += *p == '.';
    levels += parent ? 1 : 0;
    for (size_t i = 0; i < all.count; i++) {
        char *child = child_at(all.items[i], parent, levels);
        bool dup = false;
        for (size_t j = 0; child && j < out->count && !dup; j++)
            dup = strcmp(out->items[j], child) == 0;
        if (!child || dup) {
            firn_free(child);
            continue;
        }
        out->items = firn_reallocarray(out->items, out->count + 1, sizeof(*out->items));
        out->items[out->count++] = child;
    }
    firn_strlist_deinit(&all);
    if (out->count > 1)
        qsort(out->items, out->count, sizeof(*out->items), cmp_str);
    return FIRN_OK;
}

static firn_rc
sql_load_namespace(firn_catalog *base, const char *ns, firn_props *out, firn_err *err)
{
    sql_catalog *c = (sql_catalog *)base;
    FIRN_TRY(require_namespace(c, ns, err));
    sqlite3_stmt *st;
    const char *args[] = {c->name, ns};
    FIRN_TRY(db_prepare(c,
                        "SELECT property_key, property_value FROM iceberg_namespace_properties "
                        "WHERE catalog_name = ?1 AND namespace = ?2 ORDER BY property_key",
                        args, 2, &st, err));
    int src;
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *k = sqlite3_column_text(st, 0), *v = sqlite3_column_text(st, 1);
        firn_props_set(out, k ? (const char *)k : "", v ? (const char *)v : "");
    }
    sqlite3_finalize(st);
    return src == SQLITE_DONE ? FIRN_OK : db_fail(c, src, "read namespace properties", err);
}

static firn_rc sql_update_namespace(firn_catalog *base,
                                    const char *ns,
                                    const firn_props *updates,
                                    const char *const *removals,
                                    size_t n_removals,
                                    firn_err *err)
{
    sql_catalog *c = (sql_catalog *)base;
    FIRN_TRY(db_begin(c, err));
    firn_rc rc = require_namespace(c, ns, err);
    for (size_t i = 0; !rc && i < n_removals; i++) {
        const char *args[] = {c->name, ns, removals[i]};
        rc = db_run(c,
                    "DELETE FROM iceberg_namespace_properties WHERE catalog_name = ?1 AND "
                    "namespace = ?2 AND property_key = ?3",
                    args, 3, NULL, err);
    }
    if (!rc && updates)
        rc = put_props(c, ns, updates, err);
    return db_end(c, rc, err);
}

static const char *type_filter(const sql_catalog *c)
{
    return c->has_type_column ? " AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)" : "";
}

static firn_rc sql_list_tables(firn_catalog *base, const char *ns, firn_strlist *out, firn_err *err)
{
    sql_catalog *c = (sql_catalog *)base;
    FIRN_TRY(require_namespace(c, ns, err));
    char sql[512];
    snprintf(sql, sizeof(sql),
             "SELECT table_name FROM iceberg_tables WHERE catalog_name = ?1 AND "
             "table_namespace = ?2%s ORDER BY table_name",
             type_filter(c));
    const char *args[] = {c->name, ns};
    return db_strings(c, sql, args, 2, out, err);
}

static firn_rc sql_drop_namespace(firn_catalog *base, const char *ns, firn_err *err)
{
    sql_catalog *c = (sql_catalog *)base;
    firn_strlist tables = {0};
    FIRN_TRY(db_begin(c, err));
    firn_rc rc = sql_list_tables(base, ns, &tables, err);
    if (!rc && tables.count > 0)
        rc = firn_err_set(err, FIRN_ERR_INVALID,
                          "cannot drop namespace \"%s\": it contains %zu tables", ns, tables.count);
    firn_strlist_deinit(&tables);
    const char *args[] = {c->name, ns};
    if (!rc)
        rc = db_run(c,
                    "DELETE FROM iceberg_namespace_properties WHERE catalog_name = ?1 AND "
                    "namespace = ?2",
                    args, 2, NULL, err);
    return db_end(c, rc, err);
}

/* ------------------------------------------------------------------------------------------------
 * Tables
 * ----------------------------------------------------------------------------------------------*/

/* Current metadata location of ns.name into *out (owned), NULL when the table is missing. */
static firn_rc
current_location(sql_catalog *c, const char *ns, const char *name, char **out, firn_err *err)
{
    *out = NULL;
    char sql[512];
    snprintf(sql, sizeof(sql),
             "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = ?1 AND "
             "table_namespace = ?2 AND table_name = ?3%s",
             type_filter(c));
    const char *args[] = {c->name, ns, name};
    firn_strlist rows = {0};
    FIRN_TRY(db_strings(c, sql, args, 3, &rows, err));
    if (rows.count == 1 && rows.items[0][0] != '\0') {
        *out = rows.items[0];
        rows.items[0] = NULL;
        rows.count = 0;
    }
    firn_strlist_deinit(&rows);
    return FIRN_OK;
}

static firn_rc
read_metadata(sql_catalog *c, const char *location, firn_table_metadata **out, firn_err *err)
{
    firn_buf b;
    firn_buf_init(&b, METADATA_MAX_BYTES);
    firn_rc rc = firn_io_read(c->io, location, &b, err);
    if (!rc)
        rc = firn_table_metadata_from_json((const char *)b.data, b.len, out, err);
    if (rc)
        firn_err_context(err, "while reading table metadata \"%s\"", location);
    firn_buf_deinit(&b);
    return rc;
}

static firn_rc sql_load_table(
    firn_catalog *base, const char *ns, const char *name, firn_catalog_table *out, firn_err *err)
{
    sql_catalog *c = (sql_catalog *)base;
    char *loc;
    FIRN_TRY(current_location(c, ns, name, &loc, err));
    if (!loc)
        return firn_err_set(err, FIRN_ERR_NOT_FOUND, "table \"%s.%s\" does not exist", ns, name);
    firn_rc rc = read_metadata(c, loc, &out->metadata, err);
    if (rc) {
        firn_free(loc);
        return rc;
    }
    out->metadata_location = loc;
    return FIRN_OK;
}

static firn_rc
sql_table_exists(firn_catalog *base, const char *ns, const char *name, bool *out, firn_err *err)
{
    char *loc;
    FIRN_TRY(current_location((sql_catalog *)base, ns, name, &loc, err));
    *out = loc != NULL;
    firn_free(loc);
    return FIRN_OK;
}

static firn_rc sql_drop_table(firn_catalog *base, const char *ns, const char *name, firn_err *err)
{
    sql_catalog *c = (sql_catalog *)base;
    char sql[512];
    snprintf(sql, sizeof(sql),
             "DELETE FROM iceberg_tables WHERE catalog_name = ?1 AND table_namespace = ?2 AND "
             "table_name = ?3%s",
             type_filter(c));
    const char *args[] = {c->name, ns, name};
    int changes = 0;
    FIRN_TRY(db_run(c, sql, args, 3, &changes, err));
    if (changes == 0)
        return firn_err_set(err, FIRN_ERR_NOT_FOUND, "table \"%s.%s\" does not exist", ns, name);
    return FIRN_OK;
}

/* Version of a "<NNNNN>-<uuid>.metadata.json" location, -1 when it has none. */
static int64_t metadata_version(const char *location)
{
    const char *base = strrchr(location, '/');
    base = base ? base + 1 : location;
    const char *dash = strchr(base, '-');
    int64_t v;
    if (!dash || dash == base || firn_parse_i64(base, (size_t)(dash - base), &v, NULL) || v < 0)
        return -1;
    return v;
}

/* "<metadata folder>/<NNNNN>-<uuid>.metadata.json" for md (write.metadata.path honoured). */
static firn_rc new_metadata_location(
    const firn_table_metadata *md, int64_t version, char *out, size_t cap, firn_err *err)
{
    const char *dir = firn_props_get(&md->properties, "write.metadata.path");
    size_t dlen = dir ? strlen(dir) : 0;
    while (dlen > 0 && dir[dlen - 1] == '/')
        dlen--;
    uint8_t u[16];
    char uuid[37];
    firn_uuid_v4(u);
    firn_uuid_format(u, uuid);
    int n = dir ? snprintf(out, cap, "%.*s/%05lld-%s.metadata.json", (int)dlen, dir,
                           (long long)version, uuid)
                : snprintf(out, cap, "%s/metadata/%05lld-%s.metadata.json", md->location,
                           (long long)version, uuid);
    if (n < 0 || (size_t)n >= cap)
        return firn_err_set(err, FIRN_ERR_TOO_LARGE,
                            "metadata location of table \"%s\" is too long", md->location);
    return FIRN_OK;
}

static firn_rc
write_metadata(sql_catalog *c, const firn_table_metadata *md, const char *location, firn_err *err)
{
    firn_buf b;
    firn_buf_init(&b, METADATA_MAX_BYTES);
    firn_rc rc = firn_table_metadata_to_json(md, &b, err);
    if (!rc)
        rc = firn_io_write_all(c->io, location, b.data, b.len, err);
    firn_buf_deinit(&b);
    return rc;
}

/* Swaps the pointer of ns.name from expected (NULL: insert a new row) to location. */
static firn_rc swap_pointer(sql_catalog *c,
                            const char *ns,
                            const char *name,
                            const char *expected,
                            const char *location,
                            firn_err *err)
{
    FIRN_TRY(db_begin(c, err));
    int changes = 0;
    firn_rc rc;
    if (expected) {
        const char *args[] = {c->name, ns, name, location, expected};
        rc = db_run(c,
                    "UPDATE iceberg_tables SET metadata_location = ?4, "
                    "previous_metadata_location = ?5 WHERE catalog_name = ?1 AND "
                    "table_namespace = ?2 AND table_name = ?3 AND metadata_location = ?5",
                    args, 5, &changes, err);
        if (!rc && changes != 1)
            rc = firn_err_set(err, FIRN_ERR_CONFLICT,
                              "table \"%s.%s\" was changed by another commit", ns, name);
    } else {
        const char *args[] = {c->name, ns, name, location, c->has_type_column ? "TABLE" : NULL};
        rc = db_run(c,
                    c->has_type_column
                        ? "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, "
                          "metadata_location, previous_metadata_location, iceberg_type) VALUES "
                          "(?1, ?2, ?3, ?4, NULL, ?5)"
                        : "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, "
                          "metadata_location, previous_metadata_location) VALUES "
                          "(?1, ?2, ?3, ?4, NULL)",
                    args, c->has_type_column ? 5 : 4, NULL, err);
        if (rc == FIRN_ERR_EXISTS)
            firn_err_set(err, FIRN_ERR_EXISTS, "table \"%s.%s\" already exists", ns, name);
    }
    return db_end(c, rc, err);
}

/* Writes md as the next metadata version after base_location and publishes it. */
static firn_rc publish(sql_catalog *c,
                       const char *ns,
                       const char *name,
                       const firn_table_metadata *md,
                       const char *base_location,
                       char **out_location,
                       firn_err *err)
{
    char loc[PATH_MAX_BYTES];
    int64_t version = base_location ? metadata_version(base_location) + 1 : 0;
    FIRN_TRY(new_metadata_location(md, version, loc, sizeof(loc), err));
    FIRN_TRY(write_metadata(c, md, loc, err));
    firn_rc rc = swap_pointer(c, ns, name, base_location, loc, err);
    if (rc == FIRN_ERR_CONFLICT || rc == FIRN_ERR_EXISTS) {
        /* Nobody can reference a file whose swap definitely failed. */
        firn_rc_ignore(firn_io_remove(c->io, loc, NULL));
    }
    if (rc)
        return rc;
    *out_location = firn_strdup(loc);
    return FIRN_OK;
}

static firn_rc
default_location(sql_catalog *c, const char *ns, const char *name, char **out, firn_err *err)
{
    firn_props props;
    FIRN_TRY(firn_catalog_load_namespace(&c->base, ns, &props, err));
    const char *nsloc = firn_props_get(&props, "location");
    firn_buf b;
    firn_buf_init(&b, PATH_MAX_BYTES);
    firn_rc rc = FIRN_OK;
    if (nsloc) {
        size_t n = strlen(nsloc);
        while (n > 0 && nsloc[n - 1] == '/')
            n--;
        rc = firn_buf_appendf(&b, "%.*s/", (int)n, nsloc);
    } else if (c->warehouse) {
        rc = firn_buf_appendf(&b, "%s/", c->warehouse);
        rc = rc ? rc : firn__cat_append_segment(&b, ns);
        rc = rc ? rc : firn_buf_append_cstr(&b, "/");
    } else {
        rc = firn_err_set(err, FIRN_ERR_CONFIG,
                          "no location for table \"%s.%s\": configure a warehouse", ns, name);
    }
    firn_props_deinit(&props);
    rc = rc ? rc : firn__cat_append_segment(&b, name);
    if (rc) {
        firn_buf_deinit(&b);
        return rc == FIRN_ERR_TOO_LARGE
                   ? firn_err_set(err, rc, "location of table \"%s.%s\" is too long", ns, name)
                   : rc;
    }
    *out = (char *)firn_buf_take(&b, NULL);
    return FIRN_OK;
}

static firn_rc sql_create_table(firn_catalog *base,
                                const char *ns,
                                const char *name,
                                const firn_table_create *opts,
                                firn_catalog_table *out,
                                firn_err *err)
{
    sql_catalog *c = (sql_catalog *)base;
    bool exists;
    FIRN_TRY(require_namespace(c, ns, err));
    FIRN_TRY(sql_table_exists(base, ns, name, &exists, err));
    if (exists)
        return firn_err_set(err, FIRN_ERR_EXISTS, "table \"%s.%s\" already exists", ns, name);
    char *location = NULL;
    if (!opts->location)
        FIRN_TRY(default_location(c, ns, name, &location, err));
    firn_table_create o = *opts;
    if (location)
        o.location = location;
    firn_table_metadata *md = NULL;
    firn_rc rc = firn_table_metadata_new(&o, &md, err);
    firn_free(location);
    if (!rc)
        rc = publish(c, ns, name, md, NULL, &out->metadata_location, err);
    if (rc) {
        firn_table_metadata_free(md);
        return rc;
    }
    out->metadata = md;
    return FIRN_OK;
}

static bool wants_create(const firn_table_changes *changes)
{
    for (size_t i = 0; i < changes->n_requirements; i++) {
        if (changes->requirements[i].type == FIRN_REQ_ASSERT_CREATE)
            return true;
    }
    return false;
}

/* write.metadata.delete-after-commit.enabled (Java CatalogUtil.deleteRemovedMetadataFiles): the
 * metadata files base's metadata log named that md's no longer names are deleted once md is
 * published. Best effort: a file that cannot be deleted stays (an orphan), the commit stands. */
static void delete_dropped_metadata(sql_catalog *c,
                                    const firn_table_metadata *base,
                                    const firn_table_metadata *md)
{
    const char *on = firn_props_get(&md->properties, "write.metadata.delete-after-commit.enabled");
    if (!on || strcasecmp(on, "true") != 0)
        return;
    for (size_t i = 0; i < base->n_metadata_log; i++) {
        const char *f = base->metadata_log[i].metadata_file;
        bool kept = false;
        for (size_t k = 0; k < md->n_metadata_log && !kept; k++)
            kept = strcmp(md->metadata_log[k].metadata_file, f) == 0;
        if (kept)
            continue;
        firn_err derr = {0};
        firn_rc rc = firn_io_remove(c->io, f, &derr);
        if (rc && rc != FIRN_ERR_NOT_FOUND)
            FIRN_LOG(FIRN_LOG_DEBUG, "catalog", "old metadata file %s not deleted: %s", f,
                     derr.msg);
    }
}

static firn_rc sql_commit(firn_catalog *base,
                          const char *ns,
                          const char *name,
                          const firn_table_changes *changes,
                          firn_catalog_table *out,
                          firn_err *err)
{
    sql_catalog *c = (sql_catalog *)base;
    firn_catalog_table cur = {0};
    firn_rc rc = sql_load_table(base, ns, name, &cur, err);
    if (rc == FIRN_ERR_NOT_FOUND && wants_create(changes)) {
        FIRN_TRY(require_namespace(c, ns, err));
        rc = FIRN_OK;
    }
    if (rc)
        return rc;
    firn_table_metadata *md = NULL;
    rc = firn_table_metadata_apply(cur.metadata, cur.metadata_location, changes,
                                   firn_now_us() / 1000, &md, err);
    if (!rc && cur.metadata && changes->n_updates == 0) {
        /* Nothing to change: the current table is the result (pyiceberg does the same). */
        firn_table_metadata_free(md);
        *out = cur;
        return FIRN_OK;
    }
    if (!rc)
        rc = publish(c, ns, name, md, cur.metadata_location, &out->metadata_location, err);
    if (!rc && cur.metadata)
        delete_dropped_metadata(c, cur.metadata, md);
    firn_catalog_table_deinit(&cur);
    if (rc) {
        firn_table_metadata_free(md);
        if (rc == FIRN_ERR_CONFLICT)
            FIRN_LOG(FIRN_LOG_DEBUG, "catalog", "commit to %s.%s conflicted: %s", ns, name,
                     err ? err->msg : "");
        return rc;
    }
    out->metadata = md;
    return FIRN_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Opening
 * ----------------------------------------------------------------------------------------------*/

static void sql_destroy(firn_catalog *base)
{
    sql_catalog *c = (sql_catalog *)base;
    sqlite3_close(c->db);
    if (c->own_io)
        firn_io_free(c->io);
    firn_free(c->name);
    firn_free(c->warehouse);
    firn_free(c);
}

static const firn_catalog_vtable SQL_VTABLE = {
    .kind = "sql",
    .create_namespace = sql_create_namespace,
    .list_namespaces = sql_list_namespaces,
    .namespace_exists = sql_namespace_exists,
    .load_namespace = sql_load_namespace,
    .update_namespace = sql_update_namespace,
    .drop_namespace = sql_drop_namespace,
    .create_table = sql_create_table,
    .load_table = sql_load_table,
    .table_exists = sql_table_exists,
    .list_tables = sql_list_tables,
    .drop_table = sql_drop_table,
    .commit = sql_commit,
    .destroy = sql_destroy,
};

static firn_rc db_path(const char *uri, const char **out, firn_err *err)
{
    static const char prefix[] = "sqlite:///";
    if (!uri || uri[0] == '\0')
        return firn_err_set(err, FIRN_ERR_CONFIG, "the SQL catalog needs a uri");
    if (strncmp(uri, prefix, strlen(prefix)) == 0) {
        *out = uri + strlen(prefix);
    } else if (strstr(uri, "://")) {
        return firn_err_set(
            err, FIRN_ERR_CONFIG, "unsupported SQL catalog uri \"%s\"",
            firn_url_redact((char[FIRN_URL_REDACTED_MAX]){0}, FIRN_URL_REDACTED_MAX, uri));
    } else {
        *out = uri;
    }
    if ((*out)[0] == '\0')
        return firn_err_set(err, FIRN_ERR_CONFIG, "SQL catalog uri \"%s\" has no path", uri);
    return FIRN_OK;
}

static firn_rc init_schema(sql_catalog *c, firn_err *err)
{
    FIRN_TRY(db_begin(c, err));
    firn_rc rc = db_exec(c, DDL_TABLES, err);
    if (!rc)
        rc = db_exec(c, DDL_PROPS, err);
    FIRN_TRY(db_end(c, rc, err));
    sqlite3_stmt *st = NULL;
    c->has_type_column =
        sqlite3_prepare_v2(c->db, "SELECT iceberg_type FROM iceberg_tables LIMIT 0", -1, &st,
                           NULL) == SQLITE_OK;
    sqlite3_finalize(st);
    return FIRN_OK;
}

/* Creates the folders above the database file (like the warehouse, they need not exist yet). */
static void make_parent_dirs(const char *path)
{
    char dir[4096];
    size_t len = strlen(path);
    if (len >= sizeof(dir))
        return; /* sqlite3_open_v2 reports the path */
    memcpy(dir, path, len + 1);
    for (char *s = dir + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        (void)mkdir(dir, 0755); /* an error surfaces when SQLite opens the file */
        *s = '/';
    }
}

/* Why path cannot be a database file, when the file system says: a folder in its place, or a
 * file where one of its folders should be. Writes the reason to out and returns true. */
static bool unopenable_reason(const char *path, char *out, size_t cap)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(out, cap, "it is a folder; point \"catalog.uri\" at a file");
        return true;
    }
    char dir[4096];
    const size_t len = strlen(path);
    if (len >= sizeof(dir))
        return false;
    memcpy(dir, path, len + 1);
    for (char *s = dir + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
            snprintf(out, cap,
                     "\"%s\" is a file, not a folder; point \"catalog.warehouse\" (or "
                     "\"catalog.uri\") at a folder",
                     dir);
            return true;
        }
        *s = '/';
    }
    return false;
}

/* A database file SQLite cannot use: not a database at all, or damaged. */
static firn_rc bad_database(sql_catalog *c, const char *path, firn_rc rc, firn_err *err)
{
    const int code = sqlite3_errcode(c->db);
    if (code == SQLITE_NOTADB)
        return firn_err_set(err, FIRN_ERR_IO,
                            "cannot use \"%s\" as the SQL catalog: it is not a SQLite database; "
                            "point \"catalog.uri\" at firn's catalog file or at a new path",
                            path);
    if (code == SQLITE_CORRUPT)
        return firn_err_set(err, FIRN_ERR_IO,
                            "cannot use SQL catalog database \"%s\": it is damaged (%s); restore "
                            "it from a backup",
                            path, sqlite3_errmsg(c->db));
    return rc;
}

firn_rc firn_catalog_sql_open(const firn_catalog_sql_opts *opts, firn_catalog **out, firn_err *err)
{
    const char *path = NULL;
    *out = NULL;
    FIRN_TRY(db_path(opts->uri, &path, err));
    sql_catalog *c = firn_calloc(1, sizeof(*c));
    c->base.vt = &SQL_VTABLE;
    c->name = firn_strdup(opts->name ? opts->name : "default");
    if (opts->warehouse) {
        size_t n = strlen(opts->warehouse);
        while (n > 1 && opts->warehouse[n - 1] == '/')
            n--;
        c->warehouse = firn_strndup(opts->warehouse, n);
    }
    c->io = opts->io ? opts->io : firn_io_local_new();
    c->own_io = opts->io == NULL;
    make_parent_dirs(path);
    int src = sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    firn_rc rc = FIRN_OK;
    char why[FIRN_ERR_MSG_MAX / 2];
    if (src != SQLITE_OK && unopenable_reason(path, why, sizeof(why)))
        rc = firn_err_set(err, FIRN_ERR_IO, "cannot open SQL catalog database \"%s\": %s", path,
                          why);
    else if (src != SQLITE_OK)
        rc = firn_err_set(err, FIRN_ERR_IO, "could not open SQL catalog database \"%s\": %s", path,
                          c->db ? sqlite3_errmsg(c->db) : "out of memory");
    if (!rc) {
        sqlite3_busy_timeout(c->db, opts->busy_timeout_ms > 0 ? opts->busy_timeout_ms : 10000);
        rc = init_schema(c, err);
        if (rc)
            rc = bad_database(c, path, rc, err);
    }
    if (rc) {
        sql_destroy(&c->base);
        return rc;
    }
    *out = &c->base;
    return FIRN_OK;
}
