/* SPDX-License-Identifier: Apache-2.0 */
/* firn configuration: the four JSON files (source, destination, streams, state) in OLake's layout
 * with firn's own keys on top, loaded into one plain C struct the engine reads. Validation is
 * strict (unknown keys, wrong types and ranges are errors naming the file and the key path) and
 * "${VAR}" / "${VAR:-default}" in string values are taken from the environment. The same tables
 * drive validation and `firn spec` (JSON Schema), so the two cannot drift. See
 * docs/configuration.md for every key and its OLake alias. */
#ifndef FIRN_CONFIG_H
#define FIRN_CONFIG_H

#include "firn/util.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------------------------------
 * Small containers. All strings are owned by the config and freed by firn_config_free; NULL
 * means "not given".
 * ----------------------------------------------------------------------------------------------*/

/** One key/value pair of owned strings. */
typedef struct firn_kv {
    char *key;
    char *value;
} firn_kv;

/** A list of key/value pairs in file order (libpq parameters, table properties, headers). */
typedef struct firn_kvlist {
    firn_kv *items;
    size_t count;
} firn_kvlist;

/** Returns the value of key in l, or NULL. */
const char *firn_kvlist_get(const firn_kvlist *l, const char *key);

/* ------------------------------------------------------------------------------------------------
 * Enumerations
 * ----------------------------------------------------------------------------------------------*/

/** How a stream is copied. OLake's "cdc" is firn's full refresh + CDC (a backfill, then the WAL);
 * OLake's "strict_cdc" is firn's CDC only. */
typedef enum firn_sync_mode {
    FIRN_SYNC_UNSET = 0,        /* not given: the source's default_mode decides */
    FIRN_SYNC_FULL_REFRESH,     /* "full_refresh": copy every row on each run */
    FIRN_SYNC_FULL_REFRESH_CDC, /* "full_refresh_cdc" (OLake "cdc"): backfill, then stream */
    FIRN_SYNC_CDC_ONLY,         /* "cdc_only" (OLake "strict_cdc"): stream changes, no backfill */
    FIRN_SYNC_INCREMENTAL,      /* "incremental": rows whose cursor column grew since last run */
} firn_sync_mode;

/** Returns the firn name of m ("full_refresh_cdc"); static storage. */
const char *firn_sync_mode_name(firn_sync_mode m);
/** Returns OLake's name of m ("cdc" for FULL_REFRESH_CDC, "strict_cdc" for CDC_ONLY). */
const char *firn_sync_mode_olake_name(firn_sync_mode m);

/** libpq sslmode. */
typedef enum firn_sslmode {
    FIRN_SSL_DISABLE = 0,
    FIRN_SSL_ALLOW,
    FIRN_SSL_PREFER, /* the default, as in libpq */
    FIRN_SSL_REQUIRE,
    FIRN_SSL_VERIFY_CA,
    FIRN_SSL_VERIFY_FULL,
} firn_sslmode;

/** Returns the libpq spelling of m ("verify-full"). */
const char *firn_sslmode_name(firn_sslmode m);

/** Whether the source reads the WAL at all (OLake update_method.type). */
typedef enum firn_update_method {
    FIRN_UPDATE_AUTO = 0,   /* CDC when a stream needs it */
    FIRN_UPDATE_CDC,        /* OLake "CDC" */
    FIRN_UPDATE_STANDALONE, /* OLake "Standalone": no slot, no WAL; CDC modes are errors */
} firn_update_method;

/** Iceberg catalog implementation. */
typedef enum firn_catalog_kind {
    FIRN_CATALOG_SQL = 0, /* embedded SQLite "SQL catalog" (OLake "jdbc" with a sqlite URL) */
    FIRN_CATALOG_REST,    /* Iceberg REST catalog */
} firn_catalog_kind;

/** How firn authenticates to a REST catalog. */
typedef enum firn_rest_auth {
    FIRN_REST_AUTH_NONE = 0,
    FIRN_REST_AUTH_BEARER, /* static token ("token") */
    FIRN_REST_AUTH_OAUTH2, /* client credentials ("credential" = "id:secret") */
    FIRN_REST_AUTH_GOOGLE, /* Google service account / application default credentials */
    FIRN_REST_AUTH_SIGV4,  /* AWS SigV4 request signing (S3 Tables, Glue REST) */
} firn_rest_auth;

/** How deletes of keyed tables are encoded (DESIGN.md "Tables, keys and modes"). */
typedef enum firn_delete_mode {
    FIRN_DELETE_AUTO = 0,        /* from the declared readers and format version */
    FIRN_DELETE_POSITION,        /* v2 position delete files */
    FIRN_DELETE_DELETION_VECTOR, /* v3 deletion vectors */
    FIRN_DELETE_EQUALITY,        /* equality deletes (only on request) */
} firn_delete_mode;

/** Parquet compression codec. */
typedef enum firn_codec {
    FIRN_CODEC_ZSTD = 0,
    FIRN_CODEC_SNAPPY,
    FIRN_CODEC_GZIP,
    FIRN_CODEC_UNCOMPRESSED,
} firn_codec;

/** Query engines the user declares will read the tables (bit set); they decide the format
 * version and delete encoding when those are not given. */
typedef enum firn_reader {
    FIRN_READER_BIGQUERY = 1u << 0,
    FIRN_READER_SPARK = 1u << 1,
    FIRN_READER_TRINO = 1u << 2,
    FIRN_READER_DUCKDB = 1u << 3,
    FIRN_READER_PYICEBERG = 1u << 4,
    FIRN_READER_SNOWFLAKE = 1u << 5,
    FIRN_READER_DATABRICKS = 1u << 6,
    FIRN_READER_ATHENA = 1u << 7,
    FIRN_READER_FLINK = 1u << 8,
    FIRN_READER_STARROCKS = 1u << 9,
    FIRN_READER_CLICKHOUSE = 1u << 10,
    FIRN_READER_DREMIO = 1u << 11,
} firn_reader;

/** Iceberg partition transform. */
typedef enum firn_cfg_transform {
    FIRN_CFG_TRANSFORM_IDENTITY = 0,
    FIRN_CFG_TRANSFORM_YEAR,
    FIRN_CFG_TRANSFORM_MONTH,
    FIRN_CFG_TRANSFORM_DAY,
    FIRN_CFG_TRANSFORM_HOUR,
    FIRN_CFG_TRANSFORM_BUCKET,   /* param = number of buckets */
    FIRN_CFG_TRANSFORM_TRUNCATE, /* param = width */
    FIRN_CFG_TRANSFORM_VOID,
} firn_cfg_transform;

/** Returns the Iceberg spelling of t ("bucket"); static storage. */
const char *firn_cfg_transform_name(firn_cfg_transform t);

/* ------------------------------------------------------------------------------------------------
 * source.json (OLake: the driver's config.json)
 * ----------------------------------------------------------------------------------------------*/

/** Source kinds ("type" of source.json). */
typedef enum firn_source_kind {
    FIRN_SOURCE_POSTGRES = 0, /* "postgres", "postgresql" */
    FIRN_SOURCE_MYSQL = 1,    /* "mysql" (MySQL 8 or MariaDB: the server says which) */
    FIRN_SOURCE_MARIADB = 2,  /* "mariadb" */
} firn_source_kind;

/** The source (PostgreSQL, MySQL or MariaDB). Defaults are filled in by the loader. */
typedef struct firn_source_config {
    int type;       /* firn_source_kind */
    char *host;     /* required unless uri is given */
    int64_t port;   /* default 5432 */
    char *database; /* required unless uri names one */
    char *username;
    char *password;     /* secret: never logged */
    char *uri;          /* a libpq URI or conninfo used as the base; the fields above override it */
    firn_kvlist params; /* extra libpq parameters (OLake jdbc_url_params) */
    firn_sslmode sslmode; /* default prefer (OLake files without "ssl": disable) */
    char *sslrootcert;    /* paths (OLake ssl.server_ca / client_cert / client_key) */
    char *sslcert;
    char *sslkey;
    firn_update_method update_method;
    char *slot;                 /* replication slot; default "firn_<database>" */
    char *publication;          /* default "firn_<database>" */
    bool slot_given;            /* user named the slot: it must exist unless create_slot */
    bool publication_given;     /* user named the publication: it must exist unless ... */
    bool create_slot;           /* create when missing (default: !slot_given) */
    bool create_publication;    /* create when missing (default: !publication_given) */
    int64_t initial_wait_ms;    /* OLake initial_wait_time: idle time before a CDC run ends */
    firn_strlist schemas;       /* schemas discover looks at; empty = all non-system */
    int64_t parallelism;        /* backfill connections (OLake max_threads), default 4 */
    uint64_t chunk_bytes;       /* backfill chunk size, default 64 MiB */
    int chunking;               /* firn_pg_chunking: "auto" (default), "ctid", "primary_key" */
    int64_t batch_rows;         /* rows per column batch (OLake reader_batch_size), default 65536 */
    int64_t connect_timeout_ms; /* default 10 s */
    int64_t replication_timeout_ms; /* silence on the replication connection that ends a CDC run
                                       (docs/configuration.md); default 60 s, 0: none */
    int64_t reconnect_timeout_ms;   /* --follow: how long to try reconnecting after the source
                                       connection is lost (docs/configuration.md); default
                                       300 s, 0: exit at once */
    firn_sync_mode default_mode;    /* for streams without sync_mode; default full_refresh_cdc */
    int64_t server_id; /* MySQL/MariaDB: firn's replica server_id for the binlog; 0 = not set */
    int64_t backfill_hours; /* MySQL/MariaDB: expected backfill time the binlog retention must
                               exceed (`firn check`); 0 = 1 hour */
} firn_source_config;

/** True when src is a MySQL or MariaDB source. */
bool firn_source_is_mysql(const firn_source_config *src);

/** Builds a libpq conninfo string ("host='h' port='5432' ...") from src: uri first, then the
 * fields, params and ssl settings; adds "replication=database" when replication is true.
 * Returns an owned string in *out_conninfo (free with firn_free); it contains the password, so
 * log it only through firn_redact_conninfo. FIRN_ERR_TOO_LARGE past 8 KiB. Thread-safe. */
FIRN_MUST_CHECK firn_rc firn_source_conninfo(const firn_source_config *src,
                                             bool replication,
                                             char **out_conninfo,
                                             firn_err *err);

/* ------------------------------------------------------------------------------------------------
 * destination.json (OLake: {"type": "ICEBERG", "writer": {...}})
 * ----------------------------------------------------------------------------------------------*/

/** The Iceberg catalog. */
typedef struct firn_catalog_config {
    firn_catalog_kind kind; /* default sql */
    char *name;             /* catalog name (SQL catalog's catalog_name column), default "firn" */
    char *uri;              /* sql: path of the SQLite file; rest: base URL */
    char *warehouse;        /* sql: file:// or s3:// root; rest: warehouse name or location */
    char *prefix;           /* rest: optional path prefix */
    firn_rest_auth auth;    /* default: bearer if token, oauth2 if credential, else none */
    char *token;            /* secret */
    char *credential;       /* secret, "client_id:client_secret" */
    char *oauth2_server_uri;
    char *scope;
    char *google_credentials_file; /* service-account JSON; NULL = application default */
    char *project_id;              /* rest: Google project sent as x-goog-user-project (BigLake) */
    char *sigv4_region;
    char *sigv4_service; /* default "execute-api" when auth is sigv4 */
    firn_kvlist headers; /* extra HTTP headers for REST */
    firn_kvlist properties;
} firn_catalog_config;

/** Object storage for data files (S3 or S3-compatible; local paths need nothing). */
typedef struct firn_storage_config {
    char *endpoint; /* S3-compatible endpoint URL (MinIO); NULL = AWS */
    char *region;
    char *access_key_id;
    char *secret_access_key; /* secret */
    char *session_token;     /* secret */
    bool path_style;         /* default: true when endpoint is set */
    bool use_ssl;            /* default true */
} firn_storage_config;

/** When a table's buffered changes become a commit: whichever limit is reached first. */
typedef struct firn_commit_policy {
    int64_t interval_ms; /* default 10000 (10 s); 0 in a stream = destination default */
    uint64_t max_bytes;  /* buffered bytes, default 64 MiB; 0 in a stream = default */
} firn_commit_policy;

/** Table maintenance while ingesting (docs/maintenance.md). Iceberg's table properties
 * history.expire.max-snapshot-age-ms, history.expire.min-snapshots-to-keep and
 * history.expire.max-ref-age-ms take precedence over these defaults. */
typedef struct firn_maintenance_config {
    int external;                  /* "mode": 0 "firn" (default); 1 "external": another tool
                                    * (Spark procedures, BigLake table management) expires and
                                    * compacts, firn only consolidates its position deletes */
    bool expire_snapshots;         /* default true */
    int64_t snapshot_max_age_ms;   /* default 86400000 (1 day) */
    int64_t min_snapshots_to_keep; /* default 10 */
    uint64_t max_metadata_bytes;   /* metadata JSON budget per table; 0 = default: 900 KiB when
                                    * the catalog is BigLake (it refuses metadata over 1 MB),
                                    * else 4 MiB */
} firn_maintenance_config;

/** The Iceberg side. */
typedef struct firn_destination_config {
    int type; /* "iceberg" (OLake "ICEBERG"), the only kind */
    firn_catalog_config catalog;
    firn_storage_config storage;
    char *namespace_pattern; /* default "{database}_{schema}"; OLake iceberg_db is a constant */
    uint32_t readers;        /* firn_reader bits; 0 = not declared (default set: bigquery,
                              * spark, trino, duckdb, pyiceberg) */
    int64_t format_version;  /* 2 or 3; 0 = from readers (v3 only if every reader reads v3
                              * deletion vectors GA, DELETES.md §5.1) */
    firn_delete_mode delete_mode;
    char *format_reason;       /* why format_version was chosen (for the table-creation log line) */
    firn_codec compression;    /* default zstd */
    int64_t compression_level; /* 0 = codec default */
    uint64_t target_file_bytes; /* default 128 MiB */
    uint64_t row_group_bytes;   /* default 64 MiB */
    uint64_t page_bytes;        /* default 1 MiB */
    bool identifier_fields;     /* default true (OLake no_identifier_fields inverts) */
    bool metadata_columns;      /* add _firn_op, _firn_lsn, ... columns; default true */
    firn_commit_policy commit;
    firn_maintenance_config maintenance;
    int64_t commit_retry_timeout_ms;   /* commit.retry_timeout_seconds: how long a commit the
                                        * catalog refuses (HTTP 429/5xx, unreachable) is retried;
                                        * -1 (unset) = 300 s for a catch-up run, no limit under
                                        * --follow; 0 = no limit */
    int64_t commit_retry_max_wait_ms;  /* commit.retry_max_wait_seconds: longest wait between
                                        * two attempts (backoff cap), default 60 s */
    uint64_t memory_limit_bytes;       /* process budget for buffers, default 1 GiB */
    uint64_t index_memory_limit_bytes; /* resident budget of the key indexes, default 128 MiB */
    char *index_dir; /* local folder of key-index runs; NULL: $XDG_CACHE_HOME/firn, ~/.cache/firn,
                        else next to the state file */
    bool persist_key_index; /* upload key indexes next to their tables; default true */
    int64_t persist_key_index_interval_ms; /* least time between two uploads while running,
                                            * default 600 s (a clean stop always uploads) */
    int64_t consolidate_deletes_after; /* v2 upsert tables: consolidate position deletes into one
                                        * file per data file once this many delete files are
                                        * not; default 8, 0 = never */
    int64_t compact_small_files;       /* v2 upsert tables: rewrite a partition's data files once
                                        * this many are under 3/4 of target_file_bytes; default 8,
                                        * 0 = never */
    int64_t compact_delete_percent;    /* ... and any data file with this % of its rows deleted
                                        * (with the partition's small files); default 20, 0 = never */
    char *log;                         /* log spec ("info,pg=debug"); the --log flag wins */
    int log_format;                    /* 0 logfmt, 1 json ("log_format"); --log-format wins */
    char *metrics_listen; /* "HOST:PORT" firn sync serves /metrics, /healthz and /readyz on
                             (docs/operations.md "Metrics and health"); NULL: none; --metrics-listen
                             wins */
    firn_kvlist table_properties;
} firn_destination_config;

/* ------------------------------------------------------------------------------------------------
 * streams.json (OLake's catalog file: "selected_streams" + "streams")
 * ----------------------------------------------------------------------------------------------*/

/** One partition field: transform(column[, param]). column may be "now()" (OLake's writer
 * clock pseudo-column). */
typedef struct firn_cfg_partition {
    char *column;
    firn_cfg_transform transform;
    int64_t param; /* bucket count or truncate width, else 0 */
} firn_cfg_partition;

/** One source table and what to do with it, merged from "streams" and "selected_streams" and
 * completed with the defaults of the other files by firn_config_load. */
typedef struct firn_stream_config {
    char *namespace; /* source schema */
    char *name;      /* source table */
    bool selected;   /* listed in selected_streams: it is synced */
    firn_sync_mode sync_mode;
    char *cursor_field;       /* incremental: cursor column (OLake "a:b" -> cursor_field a, ...) */
    char *cursor_fallback;    /* ... cursor_fallback b, used when a is NULL */
    firn_strlist primary_key; /* override; empty = the source's key */
    firn_strlist source_primary_key; /* discovered (source_defined_primary_key) */
    bool append_mode;                /* every change as a new row (no upsert) */
    bool soft_delete;      /* upsert: a delete replaces the row by a tombstone (_firn_op "d") */
    firn_strlist columns;  /* selected columns; empty = all */
    bool sync_new_columns; /* columns added later are synced too (default true) */
    firn_cfg_partition *partition;
    size_t partition_count;
    char *target_namespace;    /* resolved: explicit, else the destination's pattern */
    char *target_table;        /* resolved: explicit, else name */
    char *filter;              /* SQL condition for backfill rows (OLake filter) */
    firn_commit_policy commit; /* resolved against the destination default */
    char *type_schema;         /* discovered JSON (OLake type_schema), compact text, or NULL */
    char *selection;           /* its "selected_streams" entry as written (compact JSON), or
                                * NULL: `firn discover` writes it back unchanged */
    firn_strlist supported_sync_modes;
    firn_strlist available_cursor_fields;
    firn_strlist notes; /* discover: why a sync mode is not in supported_sync_modes ("notes") */
} firn_stream_config;

/** All streams of a streams file, in file order ("streams" first, then selections not in it). */
typedef struct firn_streams_config {
    firn_stream_config *items;
    size_t count;
} firn_streams_config;

/** Returns the stream namespace.name, or NULL. */
firn_stream_config *
firn_streams_find(const firn_streams_config *s, const char *namespace, const char *name);

/** Writes s as an OLake-layout streams file ("selected_streams" for the selected streams with
 * firn's keys, "streams" with the discovered details) atomically to path (temporary file,
 * fsync, rename). FIRN_ERR_IO naming the path on failure. Not thread-safe for one path. */
FIRN_MUST_CHECK firn_rc firn_streams_save(const firn_streams_config *s,
                                          const char *path,
                                          firn_err *err);

/* ------------------------------------------------------------------------------------------------
 * state.json (OLake layout: {"type": "GLOBAL", "global": {"state": {"lsn"}}, "streams": [...]})
 * ----------------------------------------------------------------------------------------------*/

/** Progress of one stream. */
typedef struct firn_stream_state {
    char *namespace;
    char *name;
    firn_sync_mode sync_mode; /* mode the state was written for (UNSET if unknown) */
    bool backfill_done;
    int64_t chunks_done;    /* backfill chunks committed */
    char *chunks;           /* OLake's pending chunks, compact JSON array text, or NULL */
    uint64_t committed_lsn; /* last source position committed to the table; 0 = none */
    char *cursor_field;     /* incremental: column and its last value (compact JSON) */
    char *cursor_value;
    int64_t last_commit_us; /* wall clock of the last commit, 0 = never */
    int64_t snapshot_id;    /* Iceberg snapshot of the last commit, 0 = none */
} firn_stream_state;

/** The state file. */
typedef struct firn_state {
    uint64_t global_lsn;         /* position acknowledged to the source (all CDC streams) */
    char *snapshot_name;         /* exported snapshot of an unfinished backfill, or NULL */
    firn_strlist global_streams; /* "namespace.name" of the streams global_lsn covers */
    firn_stream_state *items;
    size_t count;
    size_t cap;
} firn_state;

/** Returns the state of namespace.name; when missing and create is true, appends an empty one,
 * else returns NULL. The pointer is valid until the next call that creates. */
firn_stream_state *
firn_state_stream(firn_state *st, const char *namespace, const char *name, bool create);

/** Writes st to path atomically: a temporary file in the same folder, fsync, rename over path,
 * fsync of the folder. A crash leaves either the old or the new file. FIRN_ERR_IO naming the
 * path on failure. Not thread-safe for one path. */
FIRN_MUST_CHECK firn_rc firn_state_save(const firn_state *st, const char *path, firn_err *err);

/** Frees everything st owns and zeroes it. NULL accepted. */
void firn_state_free(firn_state *st);

/** Formats an LSN as PostgreSQL does ("16/B374D848") into out (at least 18 bytes). */
void firn_lsn_format(uint64_t lsn, char out[18]);
/** Parses "X/Y" (hex, each part up to 8 digits). FIRN_ERR_PARSE naming the text otherwise. */
FIRN_MUST_CHECK firn_rc firn_lsn_parse(const char *text, uint64_t *out_lsn, firn_err *err);

/* ------------------------------------------------------------------------------------------------
 * Loading
 * ----------------------------------------------------------------------------------------------*/

/** The files to load; NULL skips a file. */
typedef struct firn_config_paths {
    const char *source;
    const char *destination;
    const char *streams;
    const char *state; /* a missing state file is an empty state, not an error */
} firn_config_paths;

/** Everything the engine needs. Embedded by the caller: zero it, firn_config_load, then
 * firn_config_free. Read-only after loading except `state`, which the engine updates and saves. */
typedef struct firn_config {
    char *source_path; /* copies of the paths loaded, or NULL */
    char *destination_path;
    char *streams_path;
    char *state_path;
    bool has_source;
    bool has_destination;
    bool has_streams;
    firn_source_config source;
    firn_destination_config destination;
    firn_streams_config streams;
    firn_state state;
    firn_strlist warnings; /* accepted-but-ignored OLake keys and the like, one line each */
} firn_config;

/** Loads the files named in paths into cfg (zeroed by the caller) and resolves the streams
 * against the source and destination (default sync mode, target namespace and table, commit
 * policy). On error cfg is freed and err holds one line "<file>: <what>" naming the key path
 * (never a secret's value): FIRN_ERR_CONFIG for a bad file (missing, unreadable, bad JSON,
 * unknown key, wrong type or range, missing key, unset environment variable). Not thread-safe
 * (reads the environment). */
FIRN_MUST_CHECK firn_rc firn_config_load(const firn_config_paths *paths,
                                         firn_config *cfg,
                                         firn_err *err);

/** Parses one file's text (which: "source", "destination", "streams" or "state") into cfg as
 * firn_config_load does for a file, display_name standing for the file name in messages. For
 * tests and for configs passed on stdin. Call firn_config_resolve after the last one. */
FIRN_MUST_CHECK firn_rc firn_config_parse(firn_config *cfg,
                                          const char *which,
                                          const char *text,
                                          size_t len,
                                          const char *display_name,
                                          firn_err *err);

/** Completes the streams with defaults from the source and destination (see firn_config_load).
 * Idempotent. FIRN_ERR_CONFIG when a stream conflicts with them (CDC with update_method
 * Standalone). */
FIRN_MUST_CHECK firn_rc firn_config_resolve(firn_config *cfg, firn_err *err);

/** Frees everything cfg owns and zeroes it. NULL accepted. */
void firn_config_free(firn_config *cfg);

/** Writes the JSON Schema (draft 2020-12) of one file (which: "source", "destination",
 * "streams", "state") or, with which NULL, an object holding all four, generated from the tables
 * that drive validation. Returns owned pretty-printed JSON text in *out_json (firn_free).
 * FIRN_ERR_INVALID for an unknown which. Thread-safe. */
FIRN_MUST_CHECK firn_rc firn_config_spec(const char *which, char **out_json, firn_err *err);

/** Parses a size: a non-negative integer of bytes, or text "<n>[B|KB|KiB|MB|MiB|GB|GiB|TB|TiB]"
 * (KB = 1000, KiB = 1024). FIRN_ERR_PARSE naming the text otherwise. */
FIRN_MUST_CHECK firn_rc firn_size_parse(const char *text, uint64_t *out_bytes, firn_err *err);

/** True when d's catalog is Google BigLake: a REST catalog whose URI is at
 * biglake.googleapis.com, or a bl:// warehouse (BigLake's multi-bucket form). BigLake takes
 * single-level namespaces only and table metadata up to 1 MB. */
bool firn_destination_is_biglake(const firn_destination_config *d);

/** Bytes a firn_size_format text needs with its NUL (the longest, "1023.9 GiB", has 10). */
#define FIRN_SIZE_TEXT_MAX 16
/** Writes a byte count as people read it into out (FIRN_SIZE_TEXT_MAX bytes): "0 bytes",
 * "1 byte", "1023 bytes", then one decimal (rounded half up) in the largest binary unit that
 * leaves at least 1.0 of it: "1.0 KiB", "1.5 MiB", "16.0 EiB" (KiB = 1024, as firn_size_parse
 * reads it). For display only: machine-readable output keeps exact byte counts. Thread-safe. */
void firn_size_format(uint64_t bytes, char out[FIRN_SIZE_TEXT_MAX]);

/** Bytes of the longest text firn_duration_format writes, with its NUL. */
#define FIRN_DURATION_TEXT_MAX 32
/** Writes a duration of whole seconds as people read it into out (FIRN_DURATION_TEXT_MAX
 * bytes), in its two largest units: "0s", "59s", "1m 5s", "2h 0m", "3d 4h". A negative
 * duration (a clock set back) reads as "0s". Thread-safe. */
void firn_duration_format(int64_t seconds, char out[FIRN_DURATION_TEXT_MAX]);

#endif
