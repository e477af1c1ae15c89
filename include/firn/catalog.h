/* SPDX-License-Identifier: Apache-2.0 */
/* Iceberg catalogs: one interface (a vtable) over the embedded SQL catalog on SQLite (the
 * layout of Iceberg's JDBC catalog and pyiceberg's SqlCatalog) and, later, the REST catalog.
 * Namespaces are dotted strings ("sales" or "a.b"); tables are (namespace, name). Commits are
 * optimistic: a lost race is FIRN_ERR_CONFLICT, and the caller reloads and retries. */
#ifndef FIRN_CATALOG_H
#define FIRN_CATALOG_H

#include "firn/iceberg.h"
#include "firn/io.h"
#include "firn/util.h"

typedef struct firn_catalog firn_catalog;

/** A loaded table: its metadata and the location of the metadata file it was read from. */
typedef struct firn_catalog_table {
    firn_table_metadata *metadata; /* owned */
    char *metadata_location;       /* owned */
} firn_catalog_table;

/** Frees what t owns and zeroes it (NULL accepted). */
void firn_catalog_table_deinit(firn_catalog_table *t);

/** Operations of one catalog implementation; see the firn_catalog_* wrappers below for the
 * contract of each. */
typedef struct firn_catalog_vtable {
    const char *kind; /* "sql", "rest" */
    firn_rc (*create_namespace)(firn_catalog *c,
                                const char *ns,
                                const firn_props *props,
                                firn_err *err);
    firn_rc (*list_namespaces)(firn_catalog *c,
                               const char *parent,
                               firn_strlist *out,
                               firn_err *err);
    firn_rc (*namespace_exists)(firn_catalog *c, const char *ns, bool *out, firn_err *err);
    firn_rc (*load_namespace)(firn_catalog *c, const char *ns, firn_props *out, firn_err *err);
    firn_rc (*update_namespace)(firn_catalog *c,
                                const char *ns,
                                const firn_props *updates,
                                const char *const *removals,
                                size_t n_removals,
                                firn_err *err);
    firn_rc (*drop_namespace)(firn_catalog *c, const char *ns, firn_err *err);
    firn_rc (*create_table)(firn_catalog *c,
                            const char *ns,
                            const char *name,
                            const firn_table_create *opts,
                            firn_catalog_table *out,
                            firn_err *err);
    firn_rc (*load_table)(
        firn_catalog *c, const char *ns, const char *name, firn_catalog_table *out, firn_err *err);
    firn_rc (*table_exists)(
        firn_catalog *c, const char *ns, const char *name, bool *out, firn_err *err);
    firn_rc (*list_tables)(firn_catalog *c, const char *ns, firn_strlist *out, firn_err *err);
    firn_rc (*drop_table)(firn_catalog *c, const char *ns, const char *name, firn_err *err);
    firn_rc (*commit)(firn_catalog *c,
                      const char *ns,
                      const char *name,
                      const firn_table_changes *changes,
                      firn_catalog_table *out,
                      firn_err *err);
    void (*destroy)(firn_catalog *c);
} firn_catalog_vtable;

/** Base of every catalog; implementations embed it first. */
struct firn_catalog {
    const firn_catalog_vtable *vt;
};

/** Options of the SQL catalog. Zero-initialize; NULL members take defaults. */
typedef struct firn_catalog_sql_opts {
    const char *name;      /* catalog_name column (pyiceberg: the name given to load_catalog) */
    const char *uri;       /* "sqlite:///<path>" (SQLAlchemy style) or a plain file path */
    const char *warehouse; /* "file:///<dir>" or a path: default table location root */
    firn_io *io;           /* borrowed FileIO for metadata files; NULL: a local FileIO */
    int busy_timeout_ms;   /* SQLite busy timeout; 0: 10000 */
} firn_catalog_sql_opts;

/** Opens (creating when missing) a SQL catalog in a SQLite database with exactly the tables of
 * Iceberg's JDBC catalog / pyiceberg's SqlCatalog: iceberg_tables(catalog_name,
 * table_namespace, table_name, metadata_location, previous_metadata_location, iceberg_type) and
 * iceberg_namespace_properties(catalog_name, namespace, property_key, property_value). Several
 * processes may use one database at once. Free with firn_catalog_free. FIRN_ERR_CONFIG for a
 * bad uri, FIRN_ERR_IO when the database cannot be opened. The catalog is not thread-safe: use
 * one per thread. */
FIRN_MUST_CHECK firn_rc firn_catalog_sql_open(const firn_catalog_sql_opts *opts,
                                              firn_catalog **out,
                                              firn_err *err);

/** Frees c (NULL accepted). */
void firn_catalog_free(firn_catalog *c);

/** Creates namespace ns with properties (NULL: none; the SQL catalog then stores pyiceberg's
 * marker "exists"="true"). FIRN_ERR_EXISTS when it exists. */
FIRN_MUST_CHECK firn_rc firn_catalog_create_namespace(firn_catalog *c,
                                                      const char *ns,
                                                      const firn_props *props,
                                                      firn_err *err);
/** Lists the namespaces directly below parent (NULL or "": top level) into out (initialized by
 * the callee), sorted. FIRN_ERR_NOT_FOUND when parent does not exist. */
FIRN_MUST_CHECK firn_rc firn_catalog_list_namespaces(firn_catalog *c,
                                                     const char *parent,
                                                     firn_strlist *out,
                                                     firn_err *err);
/** Sets *out to whether ns exists (it has properties or tables, or a child namespace does). */
FIRN_MUST_CHECK firn_rc firn_catalog_namespace_exists(firn_catalog *c,
                                                      const char *ns,
                                                      bool *out,
                                                      firn_err *err);
/** Loads the properties of ns into out (initialized by the callee). FIRN_ERR_NOT_FOUND. */
FIRN_MUST_CHECK firn_rc firn_catalog_load_namespace(firn_catalog *c,
                                                    const char *ns,
                                                    firn_props *out,
                                                    firn_err *err);
/** Removes then sets namespace properties in one transaction. FIRN_ERR_NOT_FOUND. */
FIRN_MUST_CHECK firn_rc firn_catalog_update_namespace(firn_catalog *c,
                                                      const char *ns,
                                                      const firn_props *updates,
                                                      const char *const *removals,
                                                      size_t n_removals,
                                                      firn_err *err);
/** Drops an empty namespace. FIRN_ERR_NOT_FOUND; FIRN_ERR_INVALID when it holds tables. */
FIRN_MUST_CHECK firn_rc firn_catalog_drop_namespace(firn_catalog *c, const char *ns, firn_err *err);

/** Creates table ns.name (firn_table_metadata_new semantics: fresh ids, zstd default). The
 * location defaults to the namespace's "location" property + "/<name>", else
 * "<warehouse>/<ns>/<name>" (pyiceberg). Writes "<location>/metadata/00000-<uuid>.metadata.json"
 * and registers it; out receives the new table. FIRN_ERR_NOT_FOUND when ns does not exist,
 * FIRN_ERR_EXISTS when the table does. */
FIRN_MUST_CHECK firn_rc firn_catalog_create_table(firn_catalog *c,
                                                  const char *ns,
                                                  const char *name,
                                                  const firn_table_create *opts,
                                                  firn_catalog_table *out,
                                                  firn_err *err);
/** Loads the current metadata of ns.name into out. FIRN_ERR_NOT_FOUND. */
FIRN_MUST_CHECK firn_rc firn_catalog_load_table(
    firn_catalog *c, const char *ns, const char *name, firn_catalog_table *out, firn_err *err);
/** Sets *out to whether ns.name exists. */
FIRN_MUST_CHECK firn_rc firn_catalog_table_exists(
    firn_catalog *c, const char *ns, const char *name, bool *out, firn_err *err);
/** Lists the table names of ns into out (initialized by the callee), sorted.
 * FIRN_ERR_NOT_FOUND when ns does not exist. */
FIRN_MUST_CHECK firn_rc firn_catalog_list_tables(firn_catalog *c,
                                                 const char *ns,
                                                 firn_strlist *out,
                                                 firn_err *err);
/** Unregisters ns.name (files stay). FIRN_ERR_NOT_FOUND. */
FIRN_MUST_CHECK firn_rc firn_catalog_drop_table(firn_catalog *c,
                                                const char *ns,
                                                const char *name,
                                                firn_err *err);
/** Commits changes to ns.name: checks the requirements against the current metadata, applies
 * the updates (firn_table_metadata_apply), writes the next "<NNNNN>-<uuid>.metadata.json" and
 * swaps the table's metadata pointer if nobody else did meanwhile. out receives the new table.
 * A table that does not exist is created when changes require assert-create.
 * FIRN_ERR_CONFLICT when a requirement fails or another commit won the race (reload, rebuild
 * the changes on the new metadata, retry); FIRN_ERR_NOT_FOUND for a missing table; other
 * errors of firn_table_metadata_apply. */
FIRN_MUST_CHECK firn_rc firn_catalog_commit(firn_catalog *c,
                                            const char *ns,
                                            const char *name,
                                            const firn_table_changes *changes,
                                            firn_catalog_table *out,
                                            firn_err *err);

#endif
