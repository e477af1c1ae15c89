/* SPDX-License-Identifier: Apache-2.0 */
/* PostgreSQL source: connections, discovery of tables and their Iceberg schemas, the type
 * mapping with its per-type binary value decoders, the binary COPY decoder and the parallel,
 * chunked, single-snapshot backfill (issue 5; docs/type-mapping.md). The CDC stream (pgoutput)
 * lives in firn/pgoutput.h and reuses the types and decoders declared here. */
#ifndef FIRN_SOURCE_PG_H
#define FIRN_SOURCE_PG_H

#include "firn/batch.h"
#include "firn/util.h"

struct pg_conn; /* libpq's PGconn */

/* ------------------------------------------------------------------------------------------------
 * Connections
 * ----------------------------------------------------------------------------------------------*/

/** Where and how to connect. Every field is optional (NULL/0 = libpq default or environment:
 * PGHOST, PGPORT, ...). When uri is set it is parsed first (a postgresql:// URI or a key=value
 * conninfo string) and the discrete fields given override it. All strings are borrowed. */
typedef struct firn_pg_conn_config {
    const char *uri;
    const char *host;
    const char *port;
    const char *dbname;
    const char *user;
    const char *password;     /* taken literally; never logged */
    const char *password_env; /* name of an environment variable holding the password; used when
                               * password is NULL. Without either, libpq reads PGPASSWORD/.pgpass */
    const char *sslmode;      /* disable, allow, prefer, require, verify-ca, verify-full */
    const char *sslrootcert;
    const char *sslcert;
    const char *sslkey;
    const char *application_name; /* default "firn" */
    const char *options;          /* libpq "options": server settings such as
                                   * "-c statement_timeout=10min -c lock_timeout=1s" */
    int connect_timeout_s;        /* 0: 10 seconds */
} firn_pg_conn_config;

typedef struct firn_pg_conn firn_pg_conn;

/** Connection flavours. */
typedef enum firn_pg_conn_mode {
    FIRN_PG_CONN_SQL = 0,     /* ordinary session */
    FIRN_PG_CONN_REPLICATION, /* replication=database (walsender that also accepts SQL) */
} firn_pg_conn_mode;

/** Opens a connection and fixes the session settings that change how values are sent
 * (client_encoding UTF8, DateStyle ISO, TimeZone UTC, IntervalStyle postgres,
 * extra_float_digits 3, bytea_output hex). Returns an owned connection in *out (free with
 * firn_pg_conn_close). Errors are one line with the server's wording and never the password:
 * FIRN_ERR_AUTH (e.g. "password authentication failed for user \"x\""), FIRN_ERR_NOT_FOUND
 * (database does not exist), FIRN_ERR_NETWORK (unreachable, refused, timeout, TLS), FIRN_ERR_CONFIG
 * (bad conninfo). Thread-safe (each connection is used by one thread at a time). */
FIRN_MUST_CHECK firn_rc firn_pg_conn_open(const firn_pg_conn_config *cfg,
                                          firn_pg_conn_mode mode,
                                          firn_pg_conn **out,
                                          firn_err *err);
/** Closes and frees c (NULL accepted). */
void firn_pg_conn_close(firn_pg_conn *c);
/** The libpq handle (borrowed; owned by c). For the pgoutput stream. */
struct pg_conn *firn_pg_conn_pq(firn_pg_conn *c);
/** Server version as PostgreSQL reports it (150004 for 15.4). */
int firn_pg_conn_server_version(const firn_pg_conn *c);
/** Runs one or more SQL statements that return no rows we need. FIRN_ERR_SOURCE with the
 * server's message (and SQLSTATE) on failure. */
FIRN_MUST_CHECK firn_rc firn_pg_conn_exec(firn_pg_conn *c, const char *sql, firn_err *err);
/** Runs a query returning one value (first row, first column) into out (out_cap bytes, NUL
 * terminated; "" for NULL). FIRN_ERR_NOT_FOUND when no row, FIRN_ERR_SOURCE on server error. */
FIRN_MUST_CHECK firn_rc firn_pg_conn_query_value(
    firn_pg_conn *c, const char *sql, char *out, size_t out_cap, firn_err *err);
/** A redacted description of the target for logs: "host=h port=p dbname=d user=u". */
const char *firn_pg_conn_describe(const firn_pg_conn *c);

/** Room for any quoted PostgreSQL identifier or literal of a name of at most 63 bytes
 * (NAMEDATALEN - 1): every byte doubled, two quotes and a NUL. */
#define FIRN_PG_QUOTED_MAX 130

/** Appends s to b as a PostgreSQL identifier: in double quotes, embedded quotes doubled
 * ("a""b"), so any text names exactly that object. For SQL that runs and for the remedies
 * messages print (ALTER PUBLICATION ... ADD TABLE ...): the one quoting of names in firn.
 * Errors: FIRN_ERR_TOO_LARGE past b's maximum. Thread-safe (b is the caller's). */
FIRN_MUST_CHECK firn_rc firn_pg_ident_append(firn_buf *b, const char *s);

/** s as a quoted identifier (as firn_pg_ident_append) in out (cap bytes, at least 3), for
 * messages; returns out. A name that does not fit is cut at a character boundary and still
 * closed with a quote, so the text stays one identifier. Never fails; thread-safe. */
const char *firn_pg_ident_text(char *out, size_t cap, const char *s);

/** s as a quoted string literal ('it''s') in out, for messages, cut like firn_pg_ident_text;
 * returns out. Never fails; thread-safe. */
const char *firn_pg_literal_text(char *out, size_t cap, const char *s);

/* ------------------------------------------------------------------------------------------------
 * Types: the one mapping table (docs/type-mapping.md) and the per-value decoders
 * ----------------------------------------------------------------------------------------------*/

/** How values of a column are decoded; chosen from the (domain-resolved) source type. */
typedef enum firn_pg_kind {
    FIRN_PG_KIND_BOOL = 1,    /* boolean */
    FIRN_PG_KIND_INT2,        /* int (32-bit) */
    FIRN_PG_KIND_INT4,        /* int */
    FIRN_PG_KIND_INT8,        /* long */
    FIRN_PG_KIND_OID,         /* long (oid is unsigned 32-bit) */
    FIRN_PG_KIND_FLOAT4,      /* float */
    FIRN_PG_KIND_FLOAT8,      /* double */
    FIRN_PG_KIND_DECIMAL,     /* numeric(p<=38,s): decimal(p,s); NaN -> null + warning */
    FIRN_PG_KIND_NUMSTR,      /* numeric without typmod or p > 38: exact text ("NaN", "Infinity") */
    FIRN_PG_KIND_MONEY,       /* decimal(19, lc_monetary digits), exact cents */
    FIRN_PG_KIND_TEXT,        /* string: the value's bytes are UTF-8 text (text, varchar, char,
                               * name, citext, json, enum, and every type read as ::text) */
    FIRN_PG_KIND_JSONB,       /* string: jsonb binary format 1 (version byte + text) */
    FIRN_PG_KIND_BYTEA,       /* binary */
    FIRN_PG_KIND_UUID,        /* uuid */
    FIRN_PG_KIND_DATE,        /* date (days since 1970-01-01); +-infinity -> +-INT32_MAX */
    FIRN_PG_KIND_TIME,        /* time (microseconds) */
    FIRN_PG_KIND_TIMESTAMP,   /* timestamp (us since 1970); +-infinity -> +-INT64_MAX */
    FIRN_PG_KIND_TIMESTAMPTZ, /* timestamptz (us since 1970 UTC); +-infinity -> +-INT64_MAX */
    FIRN_PG_KIND_INTERVAL,    /* struct<months int, days int, microseconds long> */
    FIRN_PG_KIND_ARRAY,       /* list<element> (nested lists for declared multi-dim arrays) */
} firn_pg_kind;

/** A resolved column type: what the source declares, and how firn reads and stores it. Built by
 * firn_pg_type_resolve or discovery; immutable afterwards and safe to share between threads. */
typedef struct firn_pg_type firn_pg_type;
struct firn_pg_type {
    uint32_t oid;      /* declared type (may be a domain or an array) */
    int32_t typmod;    /* declared typmod (-1 none); for domains the domain's typmod */
    uint32_t base_oid; /* oid after resolving domains */
    firn_pg_kind kind;
    bool text_cast;     /* the COPY query reads the column as ::text (::text[] for arrays) and
                         * the decoder expects the text form */
    bool unknown;       /* a type firn does not know (extension): stored as its text form */
    int32_t precision;  /* DECIMAL / MONEY */
    int32_t scale;      /* DECIMAL / MONEY */
    int32_t ndims;      /* ARRAY: list nesting depth (declared dimensions, at least 1) */
    firn_pg_type *elem; /* ARRAY: element type (owned) */
    char *name;         /* format_type(oid, typmod), e.g. "numeric(10,2)" (owned) */
    char typdelim;      /* pg_type.typdelim of the base type: what separates this type's values
                         * in an array's text form (',' for most; ';' box, ':' PostGIS) */
};

/** Counters of values that could not be stored exactly and were replaced by the documented
 * rule (the backfill logs them once per chunk and hands them on in firn_pg_chunk.replaced; the
 * engine counts CDC's into stats.json). Plain counters, one per decoding thread. */
typedef struct firn_pg_decode_stats {
    uint64_t nan_to_null;       /* numeric NaN in a decimal column -> null */
    uint64_t clamped;           /* timestamp beyond the int64 microsecond range -> clamped */
    uint64_t array_flattened;   /* multi-dimensional value in a one-level list, row-major */
    uint64_t array_lbound_lost; /* array lower bound other than 1 (dropped) */
} firn_pg_decode_stats;

/** Resolves (oid, typmod) through the catalog of c: domains to their base type, arrays to their
 * element; ndims is the declared number of array dimensions (pg_attribute.attndims, 0 if
 * unknown). Returns an owned type in *out (free with firn_pg_type_free). Unknown types resolve
 * to FIRN_PG_KIND_TEXT with text_cast and unknown set. FIRN_ERR_SOURCE on server error,
 * FIRN_ERR_NOT_FOUND when the oid does not exist. Not thread-safe per connection. */
FIRN_MUST_CHECK firn_rc firn_pg_type_resolve(firn_pg_conn *c,
                                             uint32_t oid,
                                             int32_t typmod,
                                             int32_t ndims,
                                             firn_pg_type **out,
                                             firn_err *err);
/** Frees a type (NULL accepted). */
void firn_pg_type_free(firn_pg_type *t);
/** Returns an owned deep copy. */
firn_pg_type *firn_pg_type_clone(const firn_pg_type *t);
/** Builds the Iceberg field for a column of type t: the column gets id `id`; nested fields
 * (list elements, interval struct members) take ids from *next_id, which is advanced. Returns
 * an owned field (free with firn_field_free). */
firn_field *firn_pg_type_field(
    const firn_pg_type *t, int32_t id, const char *name, bool required, int32_t *next_id);
/** Short name of a kind ("decimal", "timestamptz", ...), static storage. */
const char *firn_pg_kind_name(firn_pg_kind kind);

/** Decodes one non-NULL value of type t from its binary send format (the text form when
 * t->text_cast, and for array elements whose type is text_cast) at p/len and appends it to col,
 * whose field must be the one firn_pg_type_field built for t. Counts replaced values in stats
 * (NULL accepted). On a malformed value returns FIRN_ERR_PARSE naming the type; col may then
 * hold a partial nested value and the row must be discarded. Thread-safe (no shared state). */
FIRN_MUST_CHECK firn_rc firn_pg_value_decode(const firn_pg_type *t,
                                             const uint8_t *p,
                                             size_t len,
                                             firn_column *col,
                                             firn_pg_decode_stats *stats,
                                             firn_err *err);

/** Decodes one non-NULL value of type t from its TEXT output form at p/len (not NUL-terminated;
 * pgoutput's 't' tuple columns, simple-query results) and appends to col exactly what
 * firn_pg_value_decode appends for the same value in binary form (docs/type-mapping.md "Text
 * values"): same column values, nulls, nesting and stats (NaN/±Infinity decimals -> null,
 * clamped timestamps, flattened arrays, lost lower bounds). The text must come from a session
 * with the settings firn fixes on every connection (DateStyle ISO, TimeZone UTC, IntervalStyle
 * iso_8601 or postgres, extra_float_digits 3, bytea_output hex, client_encoding UTF8); money is
 * read as the digits of its amount under any lc_monetary whose currency symbol has no digits.
 * Arrays are array_out literals ("{1,NULL}", "{{1,2},{3,4}}", "[0:1]={a,b}", quoted and
 * backslash-escaped elements, delimited by the element type's typdelim: ';' for box); text_cast
 * types, text, json, jsonb and unconstrained numerics are stored as the bytes given. Decimal text
 * with more nonzero fractional digits than the column scale, or more digits than its precision, is
 * rejected. On a malformed value returns FIRN_ERR_PARSE naming the type (never the value); col may
 * then hold a partial nested value and the row must be discarded. Scalars decode without heap
 * allocation (except bytea values over 4 KiB). Thread-safe (no shared state). */
FIRN_MUST_CHECK firn_rc firn_pg_value_decode_text(const firn_pg_type *t,
                                                  const uint8_t *p,
                                                  size_t len,
                                                  firn_column *col,
                                                  firn_pg_decode_stats *stats,
                                                  firn_err *err);

/* ------------------------------------------------------------------------------------------------
 * Discovery
 * ----------------------------------------------------------------------------------------------*/

/** One column of a source table (generated columns are not listed: logical replication does
 * not send them, see docs/type-mapping.md). */
typedef struct firn_pg_column {
    char *name;         /* exactly as in PostgreSQL */
    int16_t attnum;     /* pg_attribute.attnum */
    bool not_null;      /* attnotnull */
    firn_pg_type *type; /* owned */
    int32_t field_id;   /* Iceberg field id (1..N in column order) */
} firn_pg_column;

/** One leaf relation that holds rows (the table itself, or each partition of a partitioned
 * table). */
typedef struct firn_pg_leaf {
    uint32_t oid;
    char *qualified; /* quoted "schema"."name" */
} firn_pg_leaf;

/** A discovered table (a stream). Read-only once built; owned by its firn_pg_catalog. */
typedef struct firn_pg_table {
    uint32_t oid;
    char *schema_name;     /* unquoted */
    char *name;            /* unquoted */
    char *qualified;       /* quoted "schema"."name" for SQL */
    char relkind;          /* 'r' table, 'p' partitioned */
    char replica_identity; /* 'd' default (pk), 'n' nothing, 'f' full, 'i' index */
    size_t n_columns;
    firn_pg_column *columns;
    size_t n_key;        /* identifier columns: primary key, or the user-given key */
    size_t *key_columns; /* indexes into columns, in key order */
    bool has_primary_key;
    size_t n_leaves; /* 1 for plain tables */
    firn_pg_leaf *leaves;
    double estimated_rows; /* pg_class.reltuples summed over leaves (-1 if never analyzed) */
    int64_t size_bytes;    /* pg_relation_size summed over leaves */
    firn_field *schema;    /* Iceberg schema (STRUCT, owned); field ids 1..N then nested ids */
    int32_t last_field_id; /* highest id used in schema */
    char *filter; /* SQL condition every backfill COPY adds as "AND (filter)" (owned), or NULL */
} firn_pg_table;

typedef struct firn_pg_catalog firn_pg_catalog;

/** Discovers the tables matching any of patterns ("schema.table", "schema.*", "*", or "table"
 * for schema public; names are matched exactly, case-sensitive, the first '.' separates schema
 * from table; NULL or an
 * empty list means every table outside pg_catalog/information_schema). Partitions are reached
 * through their partitioned root, which is the stream; a partition named explicitly is its own
 * stream. Returns an owned catalog (free with firn_pg_catalog_free). FIRN_ERR_NOT_FOUND when a
 * pattern without '*' names no table; FIRN_ERR_SOURCE on server errors. Logs one warning per
 * column of an unknown type. */
FIRN_MUST_CHECK firn_rc firn_pg_discover(firn_pg_conn *c,
                                         const char *const *patterns,
                                         size_t n_patterns,
                                         firn_pg_catalog **out,
                                         firn_err *err);
/** A table named exactly: unquoted schema and name (borrowed). */
typedef struct firn_pg_relname {
    const char *schema;
    const char *name;
} firn_pg_relname;

/** Discovers exactly the tables names gives (n_names entries), each name taken literally
 * ('*', '?' and '.' are characters of the name, never a pattern; a partition named is its own
 * stream). A name the source has no table of is left out, not an error: firn_pg_catalog_find
 * returns NULL for it and the caller decides. Returns an owned catalog (free with
 * firn_pg_catalog_free); FIRN_ERR_SOURCE on server errors. Logs one warning per column of an
 * unknown type. Not thread-safe per connection. */
FIRN_MUST_CHECK firn_rc firn_pg_discover_named(firn_pg_conn *c,
                                               const firn_pg_relname *names,
                                               size_t n_names,
                                               firn_pg_catalog **out,
                                               firn_err *err);
/** Which tables of cat the publication named `publication` (unquoted, borrowed) carries, as the
 * CDC preflight counts it: the table itself, one of its partitions, or an ancestor.
 * out_covered[i] (caller-allocated, firn_pg_catalog_tables(cat) entries) for table i;
 * *out_exists false, and every entry false, when no publication of that name exists.
 * FIRN_ERR_SOURCE on server errors. Borrows cat; not thread-safe per connection. */
FIRN_MUST_CHECK firn_rc firn_pg_publication_coverage(firn_pg_conn *c,
                                                     const char *publication,
                                                     const firn_pg_catalog *cat,
                                                     bool *out_exists,
                                                     bool *out_covered,
                                                     firn_err *err);
/** Where a relation of the replication stream that is none of the known tables belongs now
 * (firn_pg_leaf_place). */
typedef struct firn_pg_place {
    bool exists;     /* the relation exists now */
    bool partition;  /* it is a partition now (pg_class.relispartition) */
    bool published;  /* the publication carries it or one of its ancestors now */
    size_t root;     /* index into roots of its nearest ancestor there; SIZE_MAX: none */
    char *qualified; /* its quoted "schema"."name" now (owned; NULL when !exists) */
} firn_pg_place;

/** Places relation relid (a Relation message's oid) as the catalog of c has it now: walks
 * pg_partition_ancestors(relid) from its parent up (any number of levels) and sets out->root to
 * the index of the first ancestor found in roots (n_roots oids of partitioned tables); published
 * tells whether publication `publication` (unquoted, borrowed) lists the relation or one of its
 * ancestors. The catalog is the current one, not the one at the message's position: a partition
 * detached or dropped since is no longer placed. out->qualified is owned by the caller
 * (firn_free). FIRN_ERR_SOURCE on server errors (out then holds nothing to free). Not
 * thread-safe per connection. */
FIRN_MUST_CHECK firn_rc firn_pg_leaf_place(firn_pg_conn *c,
                                           uint32_t relid,
                                           const uint32_t *roots,
                                           size_t n_roots,
                                           const char *publication,
                                           firn_pg_place *out,
                                           firn_err *err);

/** Sets *out to whether leaf partition leaf_oid (quoted name `qualified`, borrowed) of table
 * root_oid holds rows it already had when it became part of root_oid: rows whose inserting
 * transaction is older than the newest pg_inherits link on the leaf's way up to the root (an
 * ATTACH PARTITION of a table that held rows; of a partitioned table whose leaves did), or the
 * same transaction's earlier commands (cmin). PostgreSQL sends no change for such rows. A row
 * updated since counts as new (its update was sent). A transaction older than the link that
 * inserted after it counts as old (a false alarm, never a miss). Reads the leaf (a sequential
 * scan that stops at the first such row). *out false when the leaf is not under root_oid now.
 * FIRN_ERR_SOURCE on server errors. Not thread-safe per connection. */
FIRN_MUST_CHECK firn_rc firn_pg_leaf_preattached(firn_pg_conn *c,
                                                 uint32_t leaf_oid,
                                                 const char *qualified,
                                                 uint32_t root_oid,
                                                 bool *out,
                                                 firn_err *err);

/** A leaf of a partitioned table now, with the age of the moment it became part of it. */
typedef struct firn_pg_leaf_link {
    uint32_t oid;
    char *qualified; /* quoted "schema"."name" (owned) */
    int64_t age;     /* age() in transactions of the newest pg_inherits link on its way up to
                      * the root (2147483647 for a frozen link) */
} firn_pg_leaf_link;

/** The leaf partitions (relkind 'r', any level) of partitioned table root_oid as the catalog of
 * c has them now, each with its link age (firn_pg_leaf_link); *out_xid_age gets age(xid) of
 * transaction id `xid` (decimal text, borrowed; NULL: -1) measured in the same statement, so a
 * leaf whose age is greater joined the root before that transaction started. *out (owned, n
 * entries; free with firn_pg_leaf_links_free) is NULL when there is no leaf. FIRN_ERR_SOURCE on
 * server errors. Not thread-safe per connection. */
FIRN_MUST_CHECK firn_rc firn_pg_leaf_links(firn_pg_conn *c,
                                           uint32_t root_oid,
                                           const char *xid,
                                           firn_pg_leaf_link **out,
                                           size_t *n,
                                           int64_t *out_xid_age,
                                           firn_err *err);
/** Frees n links of firn_pg_leaf_links (NULL accepted). */
void firn_pg_leaf_links_free(firn_pg_leaf_link *links, size_t n);

/** Registers leaf oid (quoted name `qualified`, copied) as one more leaf of t, as the leaves
 * discovery found are: CDC then routes its changes to t's table. A leaf t already has is not
 * added again. Not thread-safe (the CDC thread's). */
void firn_pg_table_add_leaf(firn_pg_table *t, uint32_t oid, const char *qualified);

/** Frees the catalog and its tables (NULL accepted). */
void firn_pg_catalog_free(firn_pg_catalog *cat);
/** Number of tables discovered. */
size_t firn_pg_catalog_tables(const firn_pg_catalog *cat);
/** Table i (borrowed). */
firn_pg_table *firn_pg_catalog_table(firn_pg_catalog *cat, size_t i);
/** Finds a table by unquoted schema and name (borrowed), NULL when absent. */
firn_pg_table *firn_pg_catalog_find(firn_pg_catalog *cat, const char *schema, const char *name);
/** Sets the identifier columns of t to the named columns (for tables without a primary key;
 * replaces the primary key otherwise). FIRN_ERR_NOT_FOUND naming a missing column,
 * FIRN_ERR_CONFIG for a column whose type cannot be an Iceberg identifier (float, double,
 * nested). Not thread-safe. */
FIRN_MUST_CHECK firn_rc firn_pg_table_set_key(firn_pg_table *t,
                                              const char *const *names,
                                              size_t n_names,
                                              firn_err *err);
/** Keeps only the columns i of t with keep[i] true (t->n_columns entries; source order is
 * kept): the others are freed, field ids are numbered 1..N again, the key indexes follow and
 * the schema is rebuilt. Every key column must be kept and one column at least (asserted). For
 * a stream's `columns` selection, before anything reads t. Not thread-safe. */
void firn_pg_table_keep_columns(firn_pg_table *t, const bool *keep);
/** Sets the SQL condition the backfill COPY queries of t add to their WHERE (copied; NULL or ""
 * clears it). The text is the operator's raw SQL, run with the source user's rights. */
void firn_pg_table_set_filter(firn_pg_table *t, const char *filter);
/** Writes the identifier field ids of t (t->n_key entries) into out (out_cap entries); returns
 * the count. */
size_t firn_pg_table_identifier_ids(const firn_pg_table *t, int32_t *out, size_t out_cap);

/* ------------------------------------------------------------------------------------------------
 * Binary COPY decoding
 * ----------------------------------------------------------------------------------------------*/

typedef struct firn_pg_copy firn_pg_copy;

/** A decoder for a `COPY ... TO STDOUT (FORMAT binary)` stream whose columns are the columns of
 * t (in order, read as firn_pg_copy_select_list writes them) into batch (whose schema must be
 * t->schema). Borrows t and batch. Free with firn_pg_copy_free. */
firn_pg_copy *firn_pg_copy_new(const firn_pg_table *t, firn_batch *batch);
/** Frees the decoder (NULL accepted). */
void firn_pg_copy_free(firn_pg_copy *d);
/** Feeds the next len bytes of the stream (any split; one CopyData message per call is typical).
 * Each complete tuple becomes one row (operation FIRN_OP_READ, position lsn) of the batch, but
 * rows are staged in the decoder (up to 256) and reach the batch only at the next
 * firn_pg_copy_flush or firn_pg_copy_finish, or when the stage is full or lsn changes.
 * FIRN_ERR_PARSE on a bad signature, field count, length or value (the staged rows are then
 * dropped and the batch may hold part of them: discard it); FIRN_ERR_PROTOCOL for data after
 * the trailer. */
FIRN_MUST_CHECK firn_rc
firn_pg_copy_feed(firn_pg_copy *d, const uint8_t *p, size_t len, uint64_t lsn, firn_err *err);
/** Bytes of room firn_pg_copy_room gives at least. */
#define FIRN_PG_COPY_ROOM ((size_t)64 << 10)
/** Bytes after which a reader copying whole messages into the room feeds it rather than copying
 * more: the decoder then reads them from the L1 cache (with 64 KiB per feed, callgrind's cache
 * model of copy_decode_bench counted 2.86 M D1 read misses per 200 000 taxi rows; 2.17 M with
 * 8 KiB). A longer message is copied whole (up to the room) all the same. */
#define FIRN_PG_COPY_FILL ((size_t)8 << 10)
/** Room at the end of the decoder's input buffer for the caller to write the next bytes of the
 * stream into (e.g. with PQgetlineAsync, which copies a CopyData message there without the
 * malloc and free of PQgetCopyData), then hand over with firn_pg_copy_feed_room. *room gets its
 * size in bytes, at least FIRN_PG_COPY_ROOM. Owned by the decoder, valid until its next call.
 * NULL (and *room 0) when the buffer would pass its 2 GiB limit: a tuple that large is bad. */
uint8_t *firn_pg_copy_room(firn_pg_copy *d, size_t *room);
/** Feeds the n <= *room bytes written at firn_pg_copy_room's pointer: as firn_pg_copy_feed,
 * whose rows, staging and errors it shares (a tuple not all there yet waits in the buffer for
 * the next bytes). */
FIRN_MUST_CHECK firn_rc firn_pg_copy_feed_room(firn_pg_copy *d,
                                               size_t n,
                                               uint64_t lsn,
                                               firn_err *err);
/** Appends the rows staged by firn_pg_copy_feed to the batch (call before reading, flushing
 * or re-targeting the batch). FIRN_ERR_INTERNAL when the batch's columns are uneven. */
FIRN_MUST_CHECK firn_rc firn_pg_copy_flush(firn_pg_copy *d, firn_err *err);
/** Flushes the staged rows, then checks that the stream ended cleanly (trailer seen, nothing
 * pending): FIRN_ERR_PARSE otherwise. */
FIRN_MUST_CHECK firn_rc firn_pg_copy_finish(firn_pg_copy *d, firn_err *err);
/** Decoding counters (borrowed). */
const firn_pg_decode_stats *firn_pg_copy_stats(const firn_pg_copy *d);
/** Re-targets the decoder at another (empty or partly filled) batch of the same schema; no rows
 * may be staged (firn_pg_copy_flush first). */
void firn_pg_copy_set_batch(firn_pg_copy *d, firn_batch *batch);
/** Appends the SELECT list that matches the decoder for t ("\"a\", \"b\"::text, ...") to out.
 * text_cast columns read as the text of their type's output function, as pgoutput sends them
 * in text mode (::text, except inet: pg_catalog.textin(pg_catalog.inet_out(col)), and inet[]:
 * col::text::text[]). */
FIRN_MUST_CHECK firn_rc firn_pg_copy_select_list(const firn_pg_table *t, firn_buf *out);

/* ------------------------------------------------------------------------------------------------
 * Snapshot and backfill
 * ----------------------------------------------------------------------------------------------*/

/** Starts a REPEATABLE READ, READ ONLY transaction on c and exports its snapshot: the name goes
 * to out (out_cap >= 64). The snapshot stays valid while c stays open and in that transaction
 * (do not run other statements on c). For backfills without CDC; with CDC use the snapshot the
 * replication slot creation exported. FIRN_ERR_SOURCE on server errors. */
FIRN_MUST_CHECK firn_rc firn_pg_snapshot_export(firn_pg_conn *c,
                                                char *out,
                                                size_t out_cap,
                                                firn_err *err);

/** One chunk of a table's backfill: a block range of one leaf relation, read with a TID range
 * scan (`ctid >= '(start,0)' AND ctid < '(end,0)'`; end_block UINT32_MAX = open end), or with
 * key_range a range of its integer primary key (`key >= key_lo AND key < key_hi`; INT64_MIN and
 * INT64_MAX = no bound). */
typedef struct firn_pg_chunk {
    uint32_t id;          /* 0..n-1, unique in the plan */
    firn_pg_table *table; /* borrowed from the catalog */
    size_t leaf;          /* index into table->leaves */
    uint32_t start_block;
    uint32_t end_block; /* exclusive; UINT32_MAX = to the end of the relation */
    bool key_range;     /* a primary-key range: key_lo/key_hi, not the block range */
    int64_t key_lo;     /* inclusive; INT64_MIN = no lower bound */
    int64_t key_hi;     /* exclusive; INT64_MAX = no upper bound */
    bool done;
    firn_pg_decode_stats replaced; /* values of the chunk's last, successful read stored by the
                                    * fallback rules: set before on_chunk_done */
} firn_pg_chunk;

/** How tables are split into chunks. */
typedef enum firn_pg_chunking {
    FIRN_PG_CHUNK_AUTO = 0, /* CTID block ranges on PostgreSQL >= 14; before that primary-key
                             * ranges where the key is one integer column, else one chunk */
    FIRN_PG_CHUNK_CTID,     /* CTID block ranges (one chunk per leaf before PostgreSQL 14) */
    FIRN_PG_CHUNK_KEY,      /* primary-key ranges where the key is one integer column (int2,
                             * int4, int8), CTID ranges for other tables */
} firn_pg_chunking;

typedef struct firn_pg_plan firn_pg_plan;

/** Plans the backfill of tables (borrowed; must outlive the plan): every leaf is split into
 * block ranges of about chunk_bytes (0: 64 MiB) measured on c, which must see the backfill
 * snapshot or a later state (the last chunk of each leaf is open-ended, so rows in blocks added
 * after the measurement are still read). Returns an owned plan (firn_pg_plan_free). */
FIRN_MUST_CHECK firn_rc firn_pg_backfill_plan(firn_pg_conn *c,
                                              firn_pg_table *const *tables,
                                              size_t n_tables,
                                              size_t chunk_bytes,
                                              firn_pg_plan **out,
                                              firn_err *err);
/** firn_pg_backfill_plan with a chunking choice. Key ranges split [min, max] of the key
 * (measured on c, outside the snapshot: the first range has no lower and the last no upper
 * bound, so keys outside it are still read) into about size / chunk_bytes equal ranges. */
FIRN_MUST_CHECK firn_rc firn_pg_backfill_plan_chunked(firn_pg_conn *c,
                                                      firn_pg_table *const *tables,
                                                      size_t n_tables,
                                                      size_t chunk_bytes,
                                                      firn_pg_chunking chunking,
                                                      firn_pg_plan **out,
                                                      firn_err *err);
/** Frees the plan (NULL accepted). */
void firn_pg_plan_free(firn_pg_plan *p);
/** Number of chunks. */
size_t firn_pg_plan_chunks(const firn_pg_plan *p);
/** Chunk i (borrowed). */
firn_pg_chunk *firn_pg_plan_chunk(firn_pg_plan *p, size_t i);
/** Marks chunk id done (a resume from engine state: it will not be read again). */
void firn_pg_plan_set_done(firn_pg_plan *p, uint32_t chunk_id);

/** Called with a filled batch of rows of one chunk. The batch is borrowed for the call only
 * (copy or write it before returning); its rows have operation FIRN_OP_READ and lsn
 * opts.snapshot_lsn. Return non-zero (a firn_rc, with err set) to stop the backfill. */
typedef firn_rc (*firn_pg_on_batch)(void *ctx,
                                    const firn_pg_chunk *chunk,
                                    firn_batch *batch,
                                    firn_err *err);
/** Called after the last batch of a chunk: every row of the chunk was delivered. */
typedef firn_rc (*firn_pg_on_chunk)(void *ctx, const firn_pg_chunk *chunk, firn_err *err);

/** Backfill options. The callbacks are called from worker threads: on_batch concurrently from
 * different workers (each chunk's batches come from one worker, in order), on_chunk_done and
 * on_chunk_retry one at a time. */
typedef struct firn_pg_backfill_opts {
    const firn_pg_conn_config *conn; /* how workers connect (borrowed) */
    const char *snapshot;            /* exported snapshot name every worker imports (required) */
    uint64_t snapshot_lsn;           /* position stamped on every row (slot consistent point) */
    int workers;                     /* parallel connections; 0: 2 */
    size_t batch_rows;               /* deliver a batch at this many rows; 0: 65536 */
    size_t batch_bytes;              /* ... or this many bytes; 0: 32 MiB */
    int max_retries;                 /* per chunk after the first attempt; 0: 3; -1: none */
    firn_pg_on_batch on_batch;       /* required */
    firn_pg_on_chunk on_chunk_done;  /* optional: record the chunk as finished */
    firn_pg_on_chunk on_chunk_retry; /* optional: discard the rows delivered for this chunk, it
                                      * is read again from its start */
    void *ctx;
    const volatile int *cancel; /* optional: non-zero stops the workers (FIRN_ERR_CANCELLED) */
} firn_pg_backfill_opts;

/** Reads every chunk of plan not yet done, in parallel over opts->workers connections that all
 * import opts->snapshot, decoding straight into batches. A chunk that fails with a PostgreSQL
 * error (statement timeout, dropped connection, cancelled query) is retried up to max_retries
 * times on a fresh connection (after on_chunk_retry); then the backfill fails with the server's
 * message and the chunk named. FIRN_ERR_NOT_FOUND when the snapshot is no longer valid (the
 * caller must restart the table's backfill under a new snapshot, never mix the two). Marks chunks
 * done in plan as they finish. Blocking; returns once all workers stopped. */
FIRN_MUST_CHECK firn_rc firn_pg_backfill_run(firn_pg_plan *plan,
                                             const firn_pg_backfill_opts *opts,
                                             firn_err *err);

#endif
