/* SPDX-License-Identifier: Apache-2.0 */
/* Iceberg catalogs: one interface (a vtable) over the embedded SQL catalog on SQLite (the
 * layout of Iceberg's JDBC catalog and pyiceberg's SqlCatalog) and the Iceberg REST catalog
 * (Apache's REST fixture, BigLake, Polaris, Lakekeeper, ...).
 * Namespaces are dotted strings ("sales" or "a.b"); tables are (namespace, name). Commits are
 * optimistic: a lost race is FIRN_ERR_CONFLICT, and the caller reloads and retries. */
#ifndef FIRN_CATALOG_H
#define FIRN_CATALOG_H

#include "firn/iceberg.h"
#include "firn/io.h"
#include "firn/io_remote.h"
#include "firn/net.h"
#include "firn/util.h"

typedef struct firn_catalog firn_catalog;

/** A loaded table: its metadata and the location of the metadata file it was read from. */
typedef struct firn_catalog_table {
    firn_table_metadata *metadata; /* owned */
    char *metadata_location;       /* owned */
} firn_catalog_table;

/** Frees what t owns and zeroes it (NULL accepted). */
void firn_catalog_table_deinit(firn_catalog_table *t);

/** One table's part of a multi-table commit (firn_catalog_commit_transaction); borrowed. */
typedef struct firn_catalog_table_commit {
    const char *ns;
    const char *name;
    const firn_table_changes *changes;
} firn_catalog_table_commit;

/** Operations of one catalog implementation; see the firn_catalog_* wrappers below for the
 * contract of each. Optional operations may be NULL. */
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
    /* optional: atomic commit to several tables */
    firn_rc (*commit_transaction)(firn_catalog *c,
                                  const firn_catalog_table_commit *commits,
                                  size_t n,
                                  firn_err *err);
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

/** Options of the REST catalog (ICEBERG.md §G, §H). Zero-initialize; NULL members take
 * defaults. Everything is copied or referenced by firn_catalog_rest_open. */
typedef struct firn_catalog_rest_opts {
    const char *name;                 /* for messages; NULL: "rest" */
    const char *uri;                  /* required: base URL; requests go to {uri}/v1/... */
    const char *warehouse;            /* sent as GET /v1/config?warehouse=; NULL: none */
    const char *prefix;               /* client "prefix" (the server's overrides win) */
    const firn_props *properties;     /* client config, merged between the server's defaults
                                         and overrides ("rest-page-size" pages listings) */
    const firn_http_headers *headers; /* extra headers on every catalog request (BigLake's
                                         x-goog-user-project, X-Iceberg-Access-Delegation) */
    firn_cred *cred;                  /* catalog authentication (a reference is taken); NULL:
                                         none */
    const firn_http_options *http;    /* timeouts, retries, TLS; NULL: defaults */
    /* Templates of the FileIOs of firn_catalog_rest_io: S3 (endpoint, region, addressing and the
     * keys used where the catalog vends none; NULL: defaults and the environment) and GCS
     * (endpoint and the token provider used where the catalog vends none). */
    const firn_s3_options *s3;
    const firn_gcs_options *gcs;
} firn_catalog_rest_opts;

/** Opens a REST catalog: GET {uri}/v1/config (with the warehouse), merges defaults, client
 * properties and overrides, takes the path prefix verbatim (BigLake's has slashes), the
 * namespace separator and the advertised endpoints. Tables are loaded with their vended storage
 * credentials (LoadTableResult `config` / `storage-credentials`), which firn_catalog_rest_io
 * uses. Errors: FIRN_ERR_CONFIG for a bad uri or a 400/404 on /v1/config (unknown warehouse),
 * FIRN_ERR_AUTH / FIRN_ERR_PERMISSION, transient network codes. Free with firn_catalog_free.
 * Operations may run from several threads at once (commits of different tables). */
FIRN_MUST_CHECK firn_rc firn_catalog_rest_open(const firn_catalog_rest_opts *opts,
                                               firn_catalog **out,
                                               firn_err *err);

/** The FileIO for the locations of a REST catalog's tables (borrowed; valid until the catalog
 * is freed; thread-safe): file:// and paths go to a local FileIO; s3:// and gs:// locations
 * inside a table that came with vended credentials go to that table's own S3 or GCS FileIO,
 * whose credentials are refreshed before they expire (GET .../credentials when the server
 * advertises it, else by reloading the table); other s3:// / gs:// locations go to a FileIO
 * made from the templates of the options. NULL when c is not a REST catalog. */
firn_io *firn_catalog_rest_io(firn_catalog *c);

/** Frees c (NULL accepted). */
void firn_catalog_free(firn_catalog *c);

/** Returns the implementation's kind ("sql", "rest"; static). */
const char *firn_catalog_kind_name(const firn_catalog *c);

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

/** Commits changes to several tables atomically (REST POST /v1/{prefix}/transactions/commit):
 * all or none. On success nothing is returned: reload the tables. FIRN_ERR_UNSUPPORTED when the
 * catalog cannot (the SQL catalog; a REST server that does not advertise the endpoint, such as
 * BigLake): commit table by table then. FIRN_ERR_CONFLICT when a requirement failed (reload,
 * rebuild, retry); FIRN_ERR_UNKNOWN_OUTCOME on a 5xx or timeout (reload and look). */
FIRN_MUST_CHECK firn_rc firn_catalog_commit_transaction(firn_catalog *c,
                                                        const firn_catalog_table_commit *commits,
                                                        size_t n,
                                                        firn_err *err);

#endif
