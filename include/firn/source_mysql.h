/* SPDX-License-Identifier: Apache-2.0 */
/* MySQL and MariaDB source (issue 27): connections over libmariadb (Connector/C), the preflight
 * `firn check` runs, discovery of a database's tables with the lossless type mapping of
 * docs/type-mapping.md ("MySQL and MariaDB"), the decoders of text-protocol values into batch
 * columns, and the single-snapshot backfill recorded at a GTID position. Binlog CDC is issue 28. */
#ifndef FIRN_SOURCE_MYSQL_H
#define FIRN_SOURCE_MYSQL_H

#include "firn/batch.h"
#include "firn/util.h"

struct st_mysql; /* libmariadb's MYSQL */

/* ------------------------------------------------------------------------------------------------
 * Connections
 * ----------------------------------------------------------------------------------------------*/

/** TLS use, as MySQL's --ssl-mode names it. */
typedef enum firn_my_ssl_mode {
    FIRN_MY_SSL_DISABLED = 0,    /* plain TCP */
    FIRN_MY_SSL_PREFERRED,       /* TLS when the server offers it, no certificate check */
    FIRN_MY_SSL_REQUIRED,        /* TLS or fail, no certificate check */
    FIRN_MY_SSL_VERIFY_CA,       /* TLS, the server certificate chains to ssl_ca */
    FIRN_MY_SSL_VERIFY_IDENTITY, /* VERIFY_CA and the certificate names the host */
} firn_my_ssl_mode;

/** Returns MySQL's spelling of m ("verify_identity"); static storage. */
const char *firn_my_ssl_mode_name(firn_my_ssl_mode m);

/** Where and how to connect. Strings are borrowed; NULL = not given. */
typedef struct firn_my_conn_config {
    const char *host;     /* required (a name or an address; never a socket path) */
    int port;             /* 0: 3306 */
    const char *database; /* default database of the session (NULL: none) */
    const char *user;     /* required */
    const char *password; /* taken literally; never logged */
    firn_my_ssl_mode ssl_mode;
    const char *ssl_ca; /* CA file; required by VERIFY_CA and VERIFY_IDENTITY */
    const char *ssl_cert;
    const char *ssl_key;
    int connect_timeout_s; /* 0: 10 seconds */
    int read_timeout_s;    /* 0: none (a long chunk read may take hours) */
} firn_my_conn_config;

typedef struct firn_my_conn firn_my_conn;

/** Opens a connection and fixes the session settings values depend on: character set utf8mb4
 * (every text column arrives as UTF-8, decoded by its collation on the server), time_zone
 * '+00:00' (TIMESTAMP values in UTC), sql_mode without NO_ZERO_DATE/NO_ZERO_IN_DATE checks
 * (zero dates are read, never refused). Returns an owned connection in *out (firn_my_conn_close).
 * Errors are one line naming the server (host:port, user) and never the password:
 * FIRN_ERR_AUTH (access denied), FIRN_ERR_NOT_FOUND (unknown database), FIRN_ERR_NETWORK
 * (unreachable, refused, timeout, TLS handshake or certificate), FIRN_ERR_CONFIG (a VERIFY mode
 * without ssl_ca), FIRN_ERR_SOURCE for other server errors. Thread-safe (each connection is used
 * by one thread at a time). */
FIRN_MUST_CHECK firn_rc firn_my_conn_open(const firn_my_conn_config *cfg,
                                          firn_my_conn **out,
                                          firn_err *err);
/** Closes and frees c (NULL accepted). */
void firn_my_conn_close(firn_my_conn *c);
/** The libmariadb handle (borrowed; owned by c). */
struct st_mysql *firn_my_conn_handle(firn_my_conn *c);
/** True when the server is MariaDB (its version string says so). */
bool firn_my_conn_is_mariadb(const firn_my_conn *c);
/** Server version as a number (major*10000 + minor*100 + patch: 101119 for 10.11.19). */
unsigned long firn_my_conn_server_version(const firn_my_conn *c);
/** The server's version text ("10.11.19-MariaDB-0+deb12u1-log"), owned by c. */
const char *firn_my_conn_version_text(const firn_my_conn *c);
/** True when the connection runs over TLS. */
bool firn_my_conn_tls(const firn_my_conn *c);
/** A redacted description for messages: "host:port user u". Static per connection. */
const char *firn_my_conn_describe(const firn_my_conn *c);
/** Runs one statement that returns no rows we need. FIRN_ERR_SOURCE with the server's message
 * and error number on failure (FIRN_ERR_PERMISSION for a denied command, FIRN_ERR_NOT_FOUND for an
 * unknown table or database, FIRN_ERR_NETWORK when the connection is gone). */
FIRN_MUST_CHECK firn_rc firn_my_conn_exec(firn_my_conn *c, const char *sql, firn_err *err);
/** Runs a query returning one value (first row, first column) into out (out_cap bytes, NUL
 * terminated, cut to fit; "" for NULL, then *out_null is set when out_null is not NULL).
 * FIRN_ERR_NOT_FOUND when there is no row; server errors as firn_my_conn_exec. */
FIRN_MUST_CHECK firn_rc firn_my_conn_query_value(
    firn_my_conn *c, const char *sql, char *out, size_t out_cap, bool *out_null, firn_err *err);

/** Room for any quoted MySQL identifier of at most 64 characters of 4 bytes: every byte doubled,
 * two backquotes and a NUL. */
#define FIRN_MY_QUOTED_MAX 516

/** Appends s to b as a MySQL identifier: in backquotes, embedded backquotes doubled (`a``b`).
 * FIRN_ERR_TOO_LARGE past b's maximum. Thread-safe (b is the caller's). */
FIRN_MUST_CHECK firn_rc firn_my_ident_append(firn_buf *b, const char *s);
/** Appends s to b as a single-quoted string literal for a session with NO_BACKSLASH_ESCAPES
 * off ('it''s', backslashes doubled). FIRN_ERR_TOO_LARGE past b's maximum. */
FIRN_MUST_CHECK firn_rc firn_my_literal_append(firn_buf *b, const char *s);

/* ------------------------------------------------------------------------------------------------
 * Types: the mapping (docs/type-mapping.md "MySQL and MariaDB") and the value decoders
 * ----------------------------------------------------------------------------------------------*/

/** How values of a column are decoded and stored. */
typedef enum firn_my_kind {
    FIRN_MY_KIND_INT = 1,   /* int: TINYINT, SMALLINT, MEDIUMINT (signed or not), INT signed */
    FIRN_MY_KIND_LONG,      /* long: INT UNSIGNED, BIGINT signed */
    FIRN_MY_KIND_ULONG,     /* decimal(20,0): BIGINT UNSIGNED (0 .. 2^64-1 exact) */
    FIRN_MY_KIND_DECIMAL,   /* decimal(p,s): DECIMAL with p <= 38 */
    FIRN_MY_KIND_DECTEXT,   /* string: DECIMAL with p > 38, its exact digits ("-1.50") */
    FIRN_MY_KIND_FLOAT,     /* float */
    FIRN_MY_KIND_DOUBLE,    /* double */
    FIRN_MY_KIND_DATE,      /* date; zero and partial-zero dates -> null (counted) */
    FIRN_MY_KIND_DATETIME,  /* timestamp (us); zero dates -> null (counted) */
    FIRN_MY_KIND_TIMESTAMP, /* timestamptz (us, UTC); 0000-00-00 00:00:00 -> null (counted) */
    FIRN_MY_KIND_TIME,      /* long: signed microseconds (-838:59:59.999999 .. 838:59:59.999999) */
    FIRN_MY_KIND_YEAR,      /* int: 1901..2155, 0 for YEAR 0000 */
    FIRN_MY_KIND_STRING,    /* string: CHAR, VARCHAR, TEXT, ENUM, SET, JSON (as UTF-8 text) */
    FIRN_MY_KIND_FIXED,     /* fixed(n): BINARY(n), with its trailing zero bytes */
    FIRN_MY_KIND_BINARY,    /* binary: VARBINARY, BLOB */
    FIRN_MY_KIND_BOOL,      /* boolean: BIT(1) */
    FIRN_MY_KIND_BITS,      /* long: BIT(2..63) as an unsigned number */
    FIRN_MY_KIND_UBITS,     /* decimal(20,0): BIT(64) */
    FIRN_MY_KIND_GEOMETRY,  /* binary: OGC WKB (the server's 4-byte SRID prefix removed) */
} firn_my_kind;

/** A resolved column type. Immutable once built; safe to share between threads. */
typedef struct firn_my_type {
    firn_my_kind kind;
    bool is_unsigned;
    int32_t precision; /* DECIMAL: digits; BIT: bits; BINARY: bytes */
    int32_t scale;     /* DECIMAL: fraction digits; temporal types: fractional digits (fsp) */
    char *data_type;   /* information_schema DATA_TYPE ("bigint") (owned) */
    char *column_type; /* information_schema COLUMN_TYPE ("bigint(20) unsigned") (owned) */
} firn_my_type;

/** Values the decoders stored by a documented rule instead of as given (docs/type-mapping.md).
 * Plain counters, one per decoding thread. */
typedef struct firn_my_decode_stats {
    uint64_t zero_dates; /* zero, partial-zero or impossible (2023-02-31) dates -> null */
} firn_my_decode_stats;

/** Resolves a column type from its information_schema.COLUMNS fields (borrowed strings):
 * data_type ("int"), column_type ("int(10) unsigned", "enum('a','b')"), numeric precision and
 * scale (-1 when NULL), datetime precision (-1 when NULL) and character maximum length (-1 when
 * NULL). Fills *out (firn_my_type_deinit). FIRN_ERR_UNSUPPORTED naming the type for one firn
 * cannot store exactly (none of MySQL 8 / MariaDB 10.11's built-in types; a plugin type would
 * be). Thread-safe. */
FIRN_MUST_CHECK firn_rc firn_my_type_resolve(const char *data_type,
                                             const char *column_type,
                                             int64_t numeric_precision,
                                             int64_t numeric_scale,
                                             int64_t datetime_precision,
                                             int64_t char_max_length,
                                             firn_my_type *out,
                                             firn_err *err);
/** Frees what t owns (NULL accepted) and zeroes it. */
void firn_my_type_deinit(firn_my_type *t);
/** Deep copy of src into dst. */
void firn_my_type_copy(firn_my_type *dst, const firn_my_type *src);
/** True when values of kind k can be zero dates (their Iceberg field is then always optional). */
bool firn_my_kind_zero_dates(firn_my_kind k);
/** Builds the Iceberg field of a column of type t (id, name copied; required only when the column
 * is NOT NULL and its kind cannot hold zero dates). Owned; free with firn_field_free. */
firn_field *firn_my_type_field(const firn_my_type *t, int32_t id, const char *name, bool not_null);
/** Short name of a kind ("ulong"), static storage. */
const char *firn_my_kind_name(firn_my_kind kind);

/** Decodes one non-NULL value of type t from its text-protocol form at p/len (the bytes a
 * utf8mb4, time_zone '+00:00' session reads: "-12.50", "2024-01-02 03:04:05.123456",
 * "-838:59:59", raw bytes for BINARY/BLOB/BIT/GEOMETRY) and appends it to col, whose field must
 * be firn_my_type_field's for t. Zero dates append null and count in stats (NULL accepted).
 * FIRN_ERR_PARSE naming the type (never the value) for a malformed value. Thread-safe. */
FIRN_MUST_CHECK firn_rc firn_my_value_decode(const firn_my_type *t,
                                             const uint8_t *p,
                                             size_t len,
                                             firn_column *col,
                                             firn_my_decode_stats *stats,
                                             firn_err *err);

/* ------------------------------------------------------------------------------------------------
 * Discovery
 * ----------------------------------------------------------------------------------------------*/

/** One column of a source table, in ordinal order; generated and invisible columns included. */
typedef struct firn_my_column {
    char *name; /* exactly as in MySQL (owned) */
    int32_t ordinal;
    bool not_null;
    bool generated; /* VIRTUAL or STORED generated column */
    bool invisible; /* INVISIBLE (left out of SELECT *) */
    firn_my_type type;
    int32_t field_id; /* Iceberg field id (1..N in column order) */
} firn_my_column;

/** One base table of a database. Owned by its catalog. */
typedef struct firn_my_table {
    char *database; /* the Iceberg namespace by default (owned) */
    char *name;     /* (owned) */
    char *engine;   /* InnoDB, MyISAM, Aria, ... (owned; "" when unknown) */
    int64_t rows_estimate;
    int64_t data_bytes; /* information_schema DATA_LENGTH, an estimate */
    firn_my_column *columns;
    size_t n_columns;
    size_t *key; /* primary-key column indexes, in key order (n_key entries; owned) */
    size_t n_key;
    firn_field *schema; /* Iceberg schema (struct of the columns; owned) */
} firn_my_table;

typedef struct firn_my_catalog firn_my_catalog;

/** Lists the base tables (not views) of the given databases (NULL/0: every database except
 * mysql, information_schema, performance_schema and sys) with their columns, types and primary
 * keys, in database then table order. Returns an owned catalog (firn_my_catalog_free).
 * FIRN_ERR_UNSUPPORTED naming the table and column for a column of a type firn cannot store;
 * server errors as firn_my_conn_exec. Not thread-safe per connection. */
FIRN_MUST_CHECK firn_rc firn_my_discover(firn_my_conn *c,
                                         const char *const *databases,
                                         size_t n_databases,
                                         firn_my_catalog **out,
                                         firn_err *err);
/** Frees the catalog (NULL accepted). */
void firn_my_catalog_free(firn_my_catalog *cat);
/** Number of tables. */
size_t firn_my_catalog_tables(const firn_my_catalog *cat);
/** Table i (borrowed). */
firn_my_table *firn_my_catalog_table(firn_my_catalog *cat, size_t i);
/** The table database.name (borrowed), NULL when absent. */
firn_my_table *firn_my_catalog_find(firn_my_catalog *cat, const char *database, const char *name);
/** Appends the SELECT list that firn_my_value_decode reads for t ("`a`, CAST(`f` AS DOUBLE)"),
 * every column named (invisible ones included; FLOAT read as its exact double). FIRN_ERR_TOO_LARGE
 * past out's maximum. */
FIRN_MUST_CHECK firn_rc firn_my_select_list(const firn_my_table *t, firn_buf *out);

/* ------------------------------------------------------------------------------------------------
 * Preflight (`firn check`)
 * ----------------------------------------------------------------------------------------------*/

/** What the preflight is asked to check. */
typedef struct firn_my_check_opts {
    bool cdc;               /* a stream needs the binlog: log_bin, formats, GTIDs, retention */
    int64_t server_id;      /* firn's replica server_id (0: none configured) */
    int64_t backfill_hours; /* expected backfill time; binlog retention must exceed it (0: 1) */
    firn_my_table *const *tables; /* the selected tables: SELECT and primary key (borrowed) */
    size_t n_tables;
    bool keyless_ok; /* tables without a primary key are accepted (append mode) */
} firn_my_check_opts;

/** Runs the preflight on c: the binlog settings CDC needs (log_bin ON, binlog_format ROW,
 * binlog_row_image FULL, binlog_row_metadata FULL, MariaDB gtid_strict_mode / MySQL gtid_mode
 * ON, binlog retention longer than the expected backfill), privileges (REPLICATION SLAVE,
 * REPLICATION CLIENT / BINLOG MONITOR, SELECT on each table), a server_id for firn that no other
 * replica and not the server itself uses, and a primary key on each table. Returns the first
 * failure as one line naming the setting, its value and the remedy (FIRN_ERR_CONFIG for server
 * settings and tables, FIRN_ERR_PERMISSION for privileges); FIRN_OK otherwise, with warnings (one
 * line each) appended to warnings (NULL accepted). Not thread-safe per connection. */
FIRN_MUST_CHECK firn_rc firn_my_check(firn_my_conn *c,
                                      const firn_my_check_opts *o,
                                      firn_strlist *warnings,
                                      firn_err *err);

/* ------------------------------------------------------------------------------------------------
 * Snapshot and backfill
 * ----------------------------------------------------------------------------------------------*/

/** The binlog position of a snapshot: MariaDB's GTID position (BINLOG_GTID_POS of the snapshot's
 * binlog file and offset) or MySQL's gtid_executed, plus the file and offset. */
typedef struct firn_my_position {
    char gtid[4096]; /* "0-1-23,1-2-7" (MariaDB) or "uuid:1-5,..." (MySQL); "" when GTIDs off */
    char file[256];  /* binlog file name; "" when the binlog is off */
    uint64_t offset; /* byte offset in file */
} firn_my_position;

/** One chunk of a table's backfill: a range of its primary key's first column (integer keys
 * only: lo inclusive, hi exclusive; has_lo/has_hi false = no bound), or the whole table. */
typedef struct firn_my_chunk {
    uint32_t id;          /* 0..n-1 in the plan */
    firn_my_table *table; /* borrowed */
    bool ranged;
    bool has_lo, has_hi;
    char lo[32]; /* decimal text of the bound (BIGINT UNSIGNED keys above 2^63 included) */
    char hi[32];
    bool done;
    firn_my_decode_stats replaced; /* values of the chunk's read stored by the fallback rules */
} firn_my_chunk;

typedef struct firn_my_plan firn_my_plan;

/** Plans the backfill of tables (borrowed; must outlive the plan): a table whose primary key
 * starts with an integer column is split into ranges of that column of about chunk_bytes of
 * data (0: 64 MiB) from its [MIN, MAX] measured on c (the first range has no lower bound, the
 * last no upper bound); any other table is one chunk. Returns an owned plan (firn_my_plan_free).
 * Server errors as firn_my_conn_exec. */
FIRN_MUST_CHECK firn_rc firn_my_backfill_plan(firn_my_conn *c,
                                              firn_my_table *const *tables,
                                              size_t n_tables,
                                              size_t chunk_bytes,
                                              firn_my_plan **out,
                                              firn_err *err);
/** Frees the plan (NULL accepted). */
void firn_my_plan_free(firn_my_plan *p);
/** Number of chunks. */
size_t firn_my_plan_chunks(const firn_my_plan *p);
/** Chunk i (borrowed). */
firn_my_chunk *firn_my_plan_chunk(firn_my_plan *p, size_t i);

/** Called with a filled batch of rows of one chunk (borrowed for the call only; rows have
 * operation FIRN_OP_READ and position 0: the snapshot's position is the run's). Return non-zero
 * (a firn_rc, err set) to stop the backfill. */
typedef firn_rc (*firn_my_on_batch)(void *ctx,
                                    const firn_my_chunk *chunk,
                                    firn_batch *batch,
                                    firn_err *err);
/** Called after the last batch of a chunk. */
typedef firn_rc (*firn_my_on_chunk)(void *ctx, const firn_my_chunk *chunk, firn_err *err);

/** Backfill options. Callbacks run on the calling thread, in chunk order. */
typedef struct firn_my_backfill_opts {
    size_t batch_rows;              /* deliver a batch at this many rows; 0: 65536 */
    size_t batch_bytes;             /* ... or this many bytes; 0: 32 MiB */
    firn_my_on_batch on_batch;      /* required */
    firn_my_on_chunk on_chunk_done; /* optional */
    void *ctx;
    const volatile int *cancel; /* optional: non-zero stops (FIRN_ERR_CANCELLED) */
} firn_my_backfill_opts;

/** Starts the snapshot on c: REPEATABLE READ, START TRANSACTION WITH CONSISTENT SNAPSHOT, READ
 * ONLY, and records its binlog position in *out (MariaDB: Binlog_snapshot_file/position of the
 * snapshot, turned into a GTID position with BINLOG_GTID_POS; MySQL: gtid_executed and SHOW
 * MASTER STATUS right after, which is exact only when nothing commits between the two: MySQL
 * needs the watermark reconciliation of issue 27, which is not built yet). Every chunk read on c
 * afterwards sees exactly the rows at that position. Server errors as firn_my_conn_exec. */
FIRN_MUST_CHECK firn_rc firn_my_snapshot_begin(firn_my_conn *c,
                                               firn_my_position *out,
                                               firn_err *err);

/** Reads every chunk of plan not yet done on c, inside the snapshot firn_my_snapshot_begin
 * started there, streaming each SELECT (mysql_use_result: memory stays one batch plus one row)
 * and decoding into batches of the table's schema. Marks chunks done as they finish. Errors:
 * FIRN_ERR_PARSE naming the table and column for a malformed value, server errors as
 * firn_my_conn_exec, the callbacks' errors, FIRN_ERR_CANCELLED. Blocking. */
FIRN_MUST_CHECK firn_rc firn_my_backfill_run(firn_my_conn *c,
                                             firn_my_plan *plan,
                                             const firn_my_backfill_opts *opts,
                                             firn_err *err);

#endif
