/* SPDX-License-Identifier: Apache-2.0 */
/* The tables describing source.json, destination.json, streams.json and state.json: every key
 * firn accepts (its own and OLake's spellings), its type and range, and where it lands in the C
 * struct. Validation (cfg_walk.c) and `firn spec` (cfg_spec.c) both read these tables. */
#include "cfg_int.h"

#include "firn/source_pg.h"

#include <stddef.h>
#include <string.h>

#define SRC(f) offsetof(firn_source_config, f)
#define DST(f) offsetof(firn_destination_config, f)
#define STR(f) offsetof(firn_stream_config, f)
#define STA(f) offsetof(firn_state, f)
#define SST(f) offsetof(firn_stream_state, f)

/* ------------------------------------------------------------------------------------------------
 * Shared value kinds
 * ----------------------------------------------------------------------------------------------*/

static const cfg_node n_string = {.type = CFG_STRING};
static const cfg_node n_secret = {.type = CFG_SECRET, .desc = "secret: never logged"};
static const cfg_node n_bool = {.type = CFG_BOOL};
static const cfg_node n_strlist = {.type = CFG_STRLIST};
static const cfg_node n_kvmap = {.type = CFG_KVMAP};
static const cfg_node n_size = {.type = CFG_SIZE};
static const cfg_node n_raw = {.type = CFG_RAW};
static const cfg_node n_ignored = {.type = CFG_IGNORED,
                                   .desc = "OLake key accepted for compatibility; firn ignores it"};
static const cfg_node n_quiet = {.type = CFG_IGNORED,
                                 .desc = "OLake key accepted for compatibility; firn ignores it",
                                 .quiet = true};
static const cfg_node n_notes = {.type = CFG_IGNORED,
                                 .desc = "written by firn discover for people; firn ignores it",
                                 .quiet = true};

static const cfg_enum_value v_sync_mode[] = {
    {"full_refresh", FIRN_SYNC_FULL_REFRESH, NULL},
    {"full_refresh_cdc", FIRN_SYNC_FULL_REFRESH_CDC, NULL},
    {"cdc", FIRN_SYNC_FULL_REFRESH_CDC, NULL},
    {"cdc_only", FIRN_SYNC_CDC_ONLY, NULL},
    {"strict_cdc", FIRN_SYNC_CDC_ONLY, NULL},
    {"incremental", FIRN_SYNC_INCREMENTAL, NULL},
    {NULL, 0, NULL},
};
static const cfg_node n_sync_mode = {
    .type = CFG_ENUM,
    .values = v_sync_mode,
    .desc = "full_refresh, full_refresh_cdc (OLake \"cdc\": backfill then WAL), cdc_only (OLake "
            "\"strict_cdc\") or incremental"};

static const cfg_node n_commit_interval = {
    .type = CFG_SECONDS, .min = 0, .max = 86400, .desc = "commit at least this often (seconds)"};
static const cfg_node n_commit_retry = {.type = CFG_SECONDS, .min = 0, .max = 604800};
static const cfg_node n_commit_retry_wait = {
    .type = CFG_SECONDS, .min = 0, .max = 3600, .def = "60"};

/* ------------------------------------------------------------------------------------------------
 * source.json
 * ----------------------------------------------------------------------------------------------*/

static const cfg_enum_value v_source_type[] = {
    {"postgres", FIRN_SOURCE_POSTGRES, NULL}, {"postgresql", FIRN_SOURCE_POSTGRES, NULL},
    {"mysql", FIRN_SOURCE_MYSQL, NULL},       {"mariadb", FIRN_SOURCE_MARIADB, NULL},
    {"MYSQL", FIRN_SOURCE_MYSQL, NULL},       {NULL, 0, NULL},
};
static const cfg_node n_source_type = {.type = CFG_ENUM, .values = v_source_type};
static const cfg_node n_port = {
    .type = CFG_INT, .min = 1, .max = 65535, .def = "5432", .desc = "default 5432; MySQL 3306"};
static const cfg_node n_server_id = {.type = CFG_INT, .min = 1, .max = 4294967295};
static const cfg_node n_backfill_hours = {.type = CFG_INT, .min = 1, .max = 8760};

static const cfg_enum_value v_sslmode[] = {
    {"disable", FIRN_SSL_DISABLE, NULL},
    {"allow", FIRN_SSL_ALLOW, NULL},
    {"prefer", FIRN_SSL_PREFER, NULL},
    {"require", FIRN_SSL_REQUIRE, NULL},
    {"verify-ca", FIRN_SSL_VERIFY_CA, NULL},
    {"verify-full", FIRN_SSL_VERIFY_FULL, NULL},
    {NULL, 0, NULL},
};
static const cfg_node n_sslmode = {.type = CFG_ENUM, .values = v_sslmode, .def = "\"prefer\""};

/* MySQL's --ssl-mode spellings (MySQL/MariaDB sources; verify_identity = verify-full). */
static const cfg_enum_value v_my_sslmode[] = {
    {"disabled", FIRN_SSL_DISABLE, NULL},
    {"preferred", FIRN_SSL_PREFER, NULL},
    {"required", FIRN_SSL_REQUIRE, NULL},
    {"verify_ca", FIRN_SSL_VERIFY_CA, NULL},
    {"verify_identity", FIRN_SSL_VERIFY_FULL, NULL},
    {NULL, 0, NULL},
};
static const cfg_node n_my_sslmode = {
    .type = CFG_ENUM, .values = v_my_sslmode, .def = "\"preferred\""};

static const cfg_prop p_ssl[] = {
    {"mode", &n_sslmode, SRC(sslmode), CFG_OLAKE, "sslmode", NULL},
    {"server_ca", &n_string, SRC(sslrootcert), CFG_OLAKE, "sslrootcert", NULL},
    {"client_cert", &n_string, SRC(sslcert), CFG_OLAKE, "sslcert", NULL},
    {"client_key", &n_string, SRC(sslkey), CFG_OLAKE, "sslkey", NULL},
    {NULL, NULL, 0, 0, NULL, NULL},
};
static const cfg_node n_ssl = {.type = CFG_OBJECT, .props = p_ssl, .desc = "OLake's SSL block"};

static const cfg_enum_value v_update_type[] = {
    {"CDC", FIRN_UPDATE_CDC, NULL},
    {"Standalone", FIRN_UPDATE_STANDALONE, NULL},
    {NULL, 0, NULL},
};
static const cfg_node n_update_type = {.type = CFG_ENUM, .values = v_update_type};
static const cfg_node n_wait = {.type = CFG_SECONDS, .min = 0, .max = 86400};

static const cfg_prop p_update_method[] = {
    {"type", &n_update_type, SRC(update_method), CFG_OLAKE, NULL,
     "CDC reads the WAL; Standalone never does"},
    {"replication_slot", &n_string, SRC(slot), CFG_OLAKE, "slot", NULL},
    {"publication", &n_string, SRC(publication), CFG_OLAKE, "publication", NULL},
    {"initial_wait_time", &n_wait, SRC(initial_wait_ms), CFG_OLAKE, "initial_wait_seconds", NULL},
    {"intial_wait_time", &n_wait, SRC(initial_wait_ms), CFG_OLAKE, "initial_wait_seconds",
     "misspelling found in OLake's examples"},
    {"plugin_args", &n_ignored, 0, CFG_OLAKE, NULL, "firn always uses pgoutput"},
    {NULL, NULL, 0, 0, NULL, NULL},
};
static const cfg_node n_update_method = {
    .type = CFG_OBJECT, .props = p_update_method, .desc = "OLake's CDC settings"};

/* Only "no tunnel" is supported; a tunnel must be set up outside firn. */
static firn_rc bind_ssh_config(cfg_ctx *ctx, const json_t *v, void *base, firn_err *err)
{
    (void)base;
    if (json_is_null(v))
        return FIRN_OK;
    if (!json_is_object(v))
        return firn__cfg_fail(ctx, err, "\"%s\" must be an object", firn__cfg_path(ctx));
    const json_t *type = json_object_get(v, "type");
    if (!type || (json_is_string(type) && strcmp(json_string_value(type), "no_tunnel") == 0))
        return FIRN_OK;
    return firn__cfg_fail(ctx, err,
                          "\"%s.type\": SSH tunnels are not supported; use \"no_tunnel\" and "
                          "open the tunnel outside firn",
                          firn__cfg_path(ctx));
}
static const cfg_node n_ssh_config = {
    .type = CFG_CUSTOM,
    .bind = bind_ssh_config,
    .shape = CFG_SHAPE_SCHEMA,
    .schema_json = "{\"type\":\"object\",\"properties\":{\"type\":{\"const\":\"no_tunnel\"}}}",
    .desc = "OLake's SSH tunnel: only {\"type\": \"no_tunnel\"} is supported"};

static const cfg_node n_parallelism = {.type = CFG_INT, .min = 1, .max = 256, .def = "4"};
static const cfg_enum_value v_chunking[] = {
    {"auto", FIRN_PG_CHUNK_AUTO, NULL},
    {"ctid", FIRN_PG_CHUNK_CTID, NULL},
    {"primary_key", FIRN_PG_CHUNK_KEY, NULL},
    {NULL, 0, NULL},
};
static const cfg_node n_chunking = {.type = CFG_ENUM, .values = v_chunking, .def = "\"auto\""};
static const cfg_node n_batch_rows = {.type = CFG_INT, .min = 1, .max = 10000000, .def = "65536"};
static const cfg_node n_timeout = {.type = CFG_SECONDS, .min = 0, .max = 3600, .def = "10"};
static const cfg_node n_repl_timeout = {.type = CFG_SECONDS, .min = 0, .max = 86400, .def = "60"};
static const cfg_node n_reconnect_timeout = {
    .type = CFG_SECONDS, .min = 0, .max = 86400, .def = "300"};

static const cfg_prop p_source[] = {
    {"type", &n_source_type, SRC(type), 0, NULL, "source kind (default postgres)"},
    {"host", &n_string, SRC(host), 0, NULL, "server host name or address"},
    {"hosts", &n_string, SRC(host), CFG_OLAKE, "host", "OLake's MySQL spelling"},
    {"port", &n_port, SRC(port), 0, NULL, NULL},
    {"database", &n_string, SRC(database), 0, NULL, "database to replicate"},
    {"username", &n_string, SRC(username), 0, NULL, NULL},
    {"password", &n_secret, SRC(password), 0, NULL, NULL},
    {"uri", &n_secret, SRC(uri), 0, NULL,
     "libpq URI or conninfo used as the base; the other keys override it"},
    {"params", &n_kvmap, SRC(params), 0, NULL, "extra libpq connection parameters"},
    {"jdbc_url_params", &n_kvmap, SRC(params), CFG_OLAKE, "params", NULL},
    {"sslmode", &n_sslmode, SRC(sslmode), 0, NULL, NULL},
    {"sslrootcert", &n_string, SRC(sslrootcert), 0, NULL, "CA certificate file"},
    {"sslcert", &n_string, SRC(sslcert), 0, NULL, "client certificate file"},
    {"sslkey", &n_string, SRC(sslkey), 0, NULL, "client key file"},
    {"ssl_mode", &n_my_sslmode, SRC(sslmode), 0, NULL,
     "MySQL spelling of sslmode: disabled, preferred, required, verify_ca, verify_identity"},
    {"ssl_ca", &n_string, SRC(sslrootcert), 0, NULL, "MySQL: CA certificate file"},
    {"ssl_cert", &n_string, SRC(sslcert), 0, NULL, "MySQL: client certificate file"},
    {"ssl_key", &n_string, SRC(sslkey), 0, NULL, "MySQL: client key file"},
    {"server_id", &n_server_id, SRC(server_id), 0, NULL,
     "MySQL/MariaDB: firn's replica server_id, unique among the source's replicas"},
    {"backfill_hours", &n_backfill_hours, SRC(backfill_hours), 0, NULL,
     "MySQL/MariaDB: expected backfill time; firn check wants binlog retention longer"},
    {"ssl", &n_ssl, 0, CFG_OLAKE, NULL, NULL},
    {"slot", &n_string, SRC(slot), 0, NULL, "replication slot (default firn_<database>)"},
    {"publication", &n_string, SRC(publication), 0, NULL, "publication (default firn_<database>)"},
    {"create_slot", &n_bool, SRC(create_slot), 0, NULL,
     "create the slot when missing (default: only when not named)"},
    {"create_publication", &n_bool, SRC(create_publication), 0, NULL,
     "create the publication when missing (default: only when not named)"},
    {"update_method", &n_update_method, 0, CFG_OLAKE, NULL, NULL},
    {"initial_wait_seconds", &n_wait, SRC(initial_wait_ms), 0, NULL,
     "a catch-up run ends after the WAL was idle this long"},
    {"schemas", &n_strlist, SRC(schemas), 0, NULL, "schemas discover looks at (default all)"},
    {"parallelism", &n_parallelism, SRC(parallelism), 0, NULL, "backfill connections"},
    {"max_threads", &n_parallelism, SRC(parallelism), CFG_OLAKE, "parallelism", NULL},
    {"chunk_size", &n_size, SRC(chunk_bytes), 0, NULL, "backfill chunk size (default 64MiB)"},
    {"chunking", &n_chunking, SRC(chunking), 0, NULL,
     "backfill chunks: CTID block ranges, or ranges of a one-column integer primary key"},
    {"batch_rows", &n_batch_rows, SRC(batch_rows), 0, NULL, "rows per column batch"},
    {"reader_batch_size", &n_batch_rows, SRC(batch_rows), CFG_OLAKE, "batch_rows", NULL},
    {"connect_timeout_seconds", &n_timeout, SRC(connect_timeout_ms), 0, NULL, NULL},
    {"replication_timeout_seconds", &n_repl_timeout, SRC(replication_timeout_ms), 0, NULL,
     "a CDC run fails when the replication connection is silent this long (0: never)"},
    {"reconnect_timeout_seconds", &n_reconnect_timeout, SRC(reconnect_timeout_ms), 0, NULL,
     "--follow reconnects for this long after losing the source (0: exit at once)"},
    {"default_mode", &n_sync_mode, SRC(default_mode), 0, NULL,
     "sync mode of streams without one (default full_refresh_cdc)"},
    {"ssh_config", &n_ssh_config, 0, CFG_OLAKE, NULL, NULL},
    {"retry_count", &n_ignored, 0, CFG_OLAKE, NULL, NULL},
    {"backoff_retry_count", &n_ignored, 0, CFG_OLAKE, NULL, NULL},
    {"split_column", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {"aws_region", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL},
};

const cfg_node firn__cfg_source_root = {.type = CFG_OBJECT,
                                        .props = p_source,
                                        .desc =
                                            "firn source.json: the PostgreSQL, MySQL or MariaDB "
                                            "database to copy (OLake's source config.json)"};

/* ------------------------------------------------------------------------------------------------
 * destination.json
 * ----------------------------------------------------------------------------------------------*/

static const cfg_enum_value v_dest_type[] = {
    {"iceberg", 0, NULL},
    {"ICEBERG", 0, NULL},
    {"PARQUET", 0, "plain Parquet output is not supported; firn writes Iceberg tables"},
    {NULL, 0, NULL},
};
static const cfg_node n_dest_type = {.type = CFG_ENUM, .values = v_dest_type};

static const cfg_enum_value v_catalog_kind[] = {
    {"sql", FIRN_CATALOG_SQL, NULL},
    {"rest", FIRN_CATALOG_REST, NULL},
    {"jdbc", FIRN_CATALOG_SQL, NULL},
    {"glue", 0, "use the Glue Iceberg REST endpoint with catalog type \"rest\" and sigv4 auth"},
    {"hive", 0, "use an Iceberg REST catalog"},
    {"nessie", 0, "use Nessie's Iceberg REST endpoint with catalog type \"rest\""},
    {NULL, 0, NULL},
};
static const cfg_node n_catalog_kind = {
    .type = CFG_ENUM,
    .values = v_catalog_kind,
    .def = "\"sql\"",
    .desc = "sql: embedded SQLite catalog; rest: Iceberg REST catalog (OLake \"jdbc\" with a "
            "jdbc:sqlite: URL is the SQL catalog)"};

static const cfg_enum_value v_rest_auth[] = {
    {"none", FIRN_REST_AUTH_NONE, NULL},     {"bearer", FIRN_REST_AUTH_BEARER, NULL},
    {"oauth2", FIRN_REST_AUTH_OAUTH2, NULL}, {"google", FIRN_REST_AUTH_GOOGLE, NULL},
    {"sigv4", FIRN_REST_AUTH_SIGV4, NULL},   {NULL, 0, NULL},
};
static const cfg_node n_rest_auth = {
    .type = CFG_ENUM,
    .values = v_rest_auth,
    .desc = "default: bearer with a token, oauth2 with a credential, else none"};

static const cfg_prop p_catalog[] = {
    {"type", &n_catalog_kind, DST(catalog.kind), 0, NULL, NULL},
    {"name", &n_string, DST(catalog.name), 0, NULL, "catalog name (default \"firn\")"},
    {"uri", &n_string, DST(catalog.uri), 0, NULL,
     "sql: SQLite file (path or sqlite:///path); rest: base URL"},
    {"warehouse", &n_string, DST(catalog.warehouse), 0, NULL,
     "sql: file:// or s3:// root of the tables; rest: warehouse name or location"},
    {"prefix", &n_string, DST(catalog.prefix), 0, NULL, "rest: path prefix"},
    {"auth", &n_rest_auth, DST(catalog.auth), 0, NULL, NULL},
    {"token", &n_secret, DST(catalog.token), 0, NULL, "rest: bearer token"},
    {"credential", &n_secret, DST(catalog.credential), 0, NULL,
     "rest: OAuth2 client credentials \"id:secret\""},
    {"oauth2_server_uri", &n_string, DST(catalog.oauth2_server_uri), 0, NULL, NULL},
    {"scope", &n_string, DST(catalog.scope), 0, NULL, "rest: OAuth2 scope"},
    {"google_credentials_file", &n_string, DST(catalog.google_credentials_file), 0, NULL,
     "rest with google auth: service-account JSON (default: application default credentials)"},
    {"project_id", &n_string, DST(catalog.project_id), 0, NULL,
     "rest: Google Cloud project sent as x-goog-user-project on every catalog request "
     "(BigLake)"},
    {"sigv4_region", &n_string, DST(catalog.sigv4_region), 0, NULL, NULL},
    {"sigv4_service", &n_string, DST(catalog.sigv4_service), 0, NULL, NULL},
    {"headers", &n_kvmap, DST(catalog.headers), 0, NULL, "rest: extra HTTP headers"},
    {"properties", &n_kvmap, DST(catalog.properties), 0, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL},
};
static const cfg_node n_catalog = {.type = CFG_OBJECT, .props = p_catalog};

static const cfg_prop p_storage[] = {
    {"endpoint", &n_string, DST(storage.endpoint), 0, NULL, "S3-compatible endpoint URL"},
    {"region", &n_string, DST(storage.region), 0, NULL, NULL},
    {"access_key_id", &n_string, DST(storage.access_key_id), 0, NULL, NULL},
    {"secret_access_key", &n_secret, DST(storage.secret_access_key), 0, NULL, NULL},
    {"session_token", &n_secret, DST(storage.session_token), 0, NULL, NULL},
    {"path_style", &n_bool, DST(storage.path_style), 0, NULL,
     "path-style S3 URLs (default: true with an endpoint)"},
    {"use_ssl", &n_bool, DST(storage.use_ssl), 0, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL},
};
static const cfg_node n_storage = {
    .type = CFG_OBJECT, .props = p_storage, .desc = "object storage credentials"};

static const cfg_enum_value v_readers[] = {
    {"bigquery", FIRN_READER_BIGQUERY, NULL},
    {"spark", FIRN_READER_SPARK, NULL},
    {"trino", FIRN_READER_TRINO, NULL},
    {"duckdb", FIRN_READER_DUCKDB, NULL},
    {"pyiceberg", FIRN_READER_PYICEBERG, NULL},
    {"snowflake", FIRN_READER_SNOWFLAKE, NULL},
    {"databricks", FIRN_READER_DATABRICKS, NULL},
    {"athena", FIRN_READER_ATHENA, NULL},
    {"flink", FIRN_READER_FLINK, NULL},
    {"starrocks", FIRN_READER_STARROCKS, NULL},
    {"clickhouse", FIRN_READER_CLICKHOUSE, NULL},
    {"dremio", FIRN_READER_DREMIO, NULL},
    {NULL, 0, NULL},
};
static const cfg_node n_readers = {
    .type = CFG_FLAGS,
    .values = v_readers,
    .desc = "query engines that read the tables; they choose the format version and deletes"};
static const cfg_node n_format_version = {.type = CFG_INT, .min = 2, .max = 3};
static const cfg_node n_persist_interval = {
    .type = CFG_SECONDS, .min = 0, .max = 604800, .def = "600"};
static const cfg_node n_consolidate = {.type = CFG_INT, .min = 0, .max = 1000000, .def = "8"};
static const cfg_node n_compact_files = {.type = CFG_INT, .min = 0, .max = 1000000, .def = "8"};
static const cfg_node n_compact_pct = {.type = CFG_INT, .min = 0, .max = 100, .def = "20"};

static const cfg_enum_value v_delete_mode[] = {
    {"auto", FIRN_DELETE_AUTO, NULL},
    {"position", FIRN_DELETE_POSITION, NULL},
    {"deletion_vector", FIRN_DELETE_DELETION_VECTOR, NULL},
    {"equality", FIRN_DELETE_EQUALITY, NULL},
    {NULL, 0, NULL},
};
static const cfg_node n_delete_mode = {
    .type = CFG_ENUM, .values = v_delete_mode, .def = "\"auto\""};

static const cfg_enum_value v_codec[] = {
    {"zstd", FIRN_CODEC_ZSTD, NULL},
    {"snappy", FIRN_CODEC_SNAPPY, NULL},
    {"gzip", FIRN_CODEC_GZIP, NULL},
    {"uncompressed", FIRN_CODEC_UNCOMPRESSED, NULL},
    {NULL, 0, NULL},
};
static const cfg_node n_codec = {.type = CFG_ENUM, .values = v_codec, .def = "\"zstd\""};
static const cfg_node n_level = {.type = CFG_INT, .min = 0, .max = 22};

static const cfg_prop p_write[] = {
    {"compression", &n_codec, DST(compression), 0, NULL, "Parquet codec"},
    {"compression_level", &n_level, DST(compression_level), 0, NULL, "0 = codec default"},
    {"target_file_size", &n_size, DST(target_file_bytes), 0, NULL, "default 128MiB"},
    {"row_group_size", &n_size, DST(row_group_bytes), 0, NULL, "default 64MiB"},
    {"page_size", &n_size, DST(page_bytes), 0, NULL, "default 1MiB"},
    {NULL, NULL, 0, 0, NULL, NULL},
};
static const cfg_node n_write = {
    .type = CFG_OBJECT, .props = p_write, .desc = "Parquet file properties"};

static const cfg_prop p_dest_commit[] = {
    {"interval_seconds", &n_commit_interval, DST(commit.interval_ms), 0, NULL, "default 10"},
    {"max_bytes", &n_size, DST(commit.max_bytes), 0, NULL,
     "commit when a table buffers this much (default 64MiB)"},
    {"retry_timeout_seconds", &n_commit_retry, DST(commit_retry_timeout_ms), 0, NULL,
     "how long a commit the catalog refuses is retried (default 300 for a catch-up run, no "
     "limit with --follow; 0 = no limit)"},
    {"retry_max_wait_seconds", &n_commit_retry_wait, DST(commit_retry_max_wait_ms), 0, NULL,
     "longest wait between two commit attempts (default 60)"},
    {NULL, NULL, 0, 0, NULL, NULL},
};
static const cfg_node n_dest_commit = {
    .type = CFG_OBJECT,
    .props = p_dest_commit,
    .desc = "commit policy of every table: whichever limit comes first"};

static const cfg_node n_snapshot_age = {
    .type = CFG_SECONDS, .min = 0, .max = 31536000 * 10, .def = "86400"};
static const cfg_node n_min_snapshots = {.type = CFG_INT, .min = 1, .max = 1000000, .def = "10"};
static const cfg_enum_value v_maintenance_mode[] = {
    {"firn", 0, NULL},
    {"external", 1, NULL},
    {NULL, 0, NULL},
};
static const cfg_node n_maintenance_mode = {
    .type = CFG_ENUM, .values = v_maintenance_mode, .def = "\"firn\""};
static const cfg_prop p_maintenance[] = {
    {"mode", &n_maintenance_mode, DST(maintenance.external), 0, NULL,
     "\"external\": snapshot expiry and compaction are left to another tool (Spark procedures, "
     "BigLake table management); firn keeps only what it must (consolidating its position "
     "deletes)"},
    {"expire_snapshots", &n_bool, DST(maintenance.expire_snapshots), 0, NULL,
     "expire old snapshots and delete the files only they reference (default true)"},
    {"snapshot_max_age_seconds", &n_snapshot_age, DST(maintenance.snapshot_max_age_ms), 0, NULL,
     "keep snapshots younger than this (default 86400; the table property "
     "history.expire.max-snapshot-age-ms wins)"},
    {"min_snapshots_to_keep", &n_min_snapshots, DST(maintenance.min_snapshots_to_keep), 0, NULL,
     "keep at least this many snapshots of each branch (default 10; the table property "
     "history.expire.min-snapshots-to-keep wins)"},
    {"max_metadata_size", &n_size, DST(maintenance.max_metadata_bytes), 0, NULL,
     "budget of a table's metadata JSON: expiry keeps it below (default 900KiB on BigLake, "
     "else 4MiB)"},
    {NULL, NULL, 0, 0, NULL, NULL},
};
static const cfg_node n_maintenance = {
    .type = CFG_OBJECT,
    .props = p_maintenance,
    .desc = "table maintenance while ingesting: snapshot expiry and the metadata budget"};

static const cfg_enum_value v_log_format[] = {
    {"logfmt", 0, NULL},
    {"json", 1, NULL},
    {NULL, 0, NULL},
};
static const cfg_node n_log_format = {.type = CFG_ENUM, .values = v_log_format};
static const cfg_node n_not_bool = {.type = CFG_NOT_BOOL};

static firn_rc bind_sigv4_flag(cfg_ctx *ctx, const json_t *v, void *base, firn_err *err)
{
    if (json_is_null(v))
        return FIRN_OK;
    if (!json_is_boolean(v))
        return firn__cfg_fail(ctx, err, "\"%s\" must be true or false", firn__cfg_path(ctx));
    if (json_is_true(v))
        ((firn_destination_config *)base)->catalog.auth = FIRN_REST_AUTH_SIGV4;
    return FIRN_OK;
}
static const cfg_node n_sigv4_flag = {.type = CFG_CUSTOM,
                                      .bind = bind_sigv4_flag,
                                      .shape = CFG_SHAPE_SCHEMA,
                                      .schema_json = "{\"type\":\"boolean\"}",
                                      .desc = "OLake: true means catalog.auth \"sigv4\""};

static const cfg_prop p_writer[] = {
    {"catalog_type", &n_catalog_kind, DST(catalog.kind), CFG_OLAKE, "catalog.type", NULL},
    {"catalog_name", &n_string, DST(catalog.name), CFG_OLAKE, "catalog.name", NULL},
    {"jdbc_url", &n_string, DST(catalog.uri), CFG_OLAKE, "catalog.uri",
     "only jdbc:sqlite: URLs (the embedded SQL catalog)"},
    {"jdbc_username", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {"jdbc_password", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {"jdbc_pool_size", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {"rest_catalog_url", &n_string, DST(catalog.uri), CFG_OLAKE, "catalog.uri", NULL},
    {"token", &n_secret, DST(catalog.token), CFG_OLAKE, "catalog.token", NULL},
    {"credential", &n_secret, DST(catalog.credential), CFG_OLAKE, "catalog.credential", NULL},
    {"oauth2_uri", &n_string, DST(catalog.oauth2_server_uri), CFG_OLAKE,
     "catalog.oauth2_server_uri", NULL},
    {"scope", &n_string, DST(catalog.scope), CFG_OLAKE, "catalog.scope", NULL},
    {"rest_auth_type", &n_quiet, 0, CFG_OLAKE, "catalog.auth", NULL},
    {"rest_signing_v_4", &n_sigv4_flag, 0, CFG_OLAKE, "catalog.auth", NULL},
    {"rest_signing_name", &n_string, DST(catalog.sigv4_service), CFG_OLAKE, "catalog.sigv4_service",
     NULL},
    {"rest_signing_region", &n_string, DST(catalog.sigv4_region), CFG_OLAKE, "catalog.sigv4_region",
     NULL},
    {"iceberg_s3_path", &n_string, DST(catalog.warehouse), CFG_OLAKE, "catalog.warehouse", NULL},
    {"iceberg_db", &n_string, DST(namespace_pattern), CFG_OLAKE, "namespace", NULL},
    {"s3_endpoint", &n_string, DST(storage.endpoint), CFG_OLAKE, "storage.endpoint", NULL},
    {"aws_region", &n_string, DST(storage.region), CFG_OLAKE, "storage.region", NULL},
    {"aws_access_key", &n_string, DST(storage.access_key_id), CFG_OLAKE, "storage.access_key_id",
     NULL},
    {"aws_secret_key", &n_secret, DST(storage.secret_access_key), CFG_OLAKE,
     "storage.secret_access_key", NULL},
    {"aws_session_token", &n_secret, DST(storage.session_token), CFG_OLAKE, "storage.session_token",
     NULL},
    {"aws_profile", &n_ignored, 0, CFG_OLAKE, NULL, NULL},
    {"s3_use_ssl", &n_bool, DST(storage.use_ssl), CFG_OLAKE, "storage.use_ssl", NULL},
    {"s3_path_style", &n_bool, DST(storage.path_style), CFG_OLAKE, "storage.path_style", NULL},
    {"no_identifier_fields", &n_not_bool, DST(identifier_fields), CFG_OLAKE, "identifier_fields",
     "inverted"},
    {"normalization", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {"arrow_writes", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {"sink_jar_path", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {"sink_rpc_server_host", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {"glue_endpoint", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {"glue_access_key", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {"glue_secret_key", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {"glue_catalog_id", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {"hive_uri", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {"hive_clients", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {"hive_sasl_enabled", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL},
};
static const cfg_node n_writer = {
    .type = CFG_OBJECT, .props = p_writer, .desc = "OLake's Iceberg writer block"};

static const cfg_prop p_destination[] = {
    {"type", &n_dest_type, DST(type), 0, NULL, "destination kind (default iceberg)"},
    {"catalog", &n_catalog, 0, 0, NULL, "the Iceberg catalog"},
    {"storage", &n_storage, 0, 0, NULL, NULL},
    {"writer", &n_writer, 0, CFG_OLAKE, NULL, NULL},
    {"namespace", &n_string, DST(namespace_pattern), 0, NULL,
     "target namespace; {database} and {schema} are replaced (default \"{database}_{schema}\")"},
    {"readers", &n_readers, DST(readers), 0, NULL, NULL},
    {"format_version", &n_format_version, DST(format_version), 0, NULL,
     "Iceberg format version (default: from readers, else 2)"},
    {"delete_mode", &n_delete_mode, DST(delete_mode), 0, NULL, "encoding of row deletes"},
    {"write", &n_write, 0, 0, NULL, NULL},
    {"identifier_fields", &n_bool, DST(identifier_fields), 0, NULL,
     "primary keys become identifier-field-ids (default true)"},
    {"metadata_columns", &n_bool, DST(metadata_columns), 0, NULL,
     "add the _firn_ metadata columns (default true)"},
    {"commit", &n_dest_commit, 0, 0, NULL, NULL},
    {"maintenance", &n_maintenance, 0, 0, NULL, NULL},
    {"memory_limit", &n_size, DST(memory_limit_bytes), 0, NULL,
     "memory budget for buffered changes (default 1GiB)"},
    {"index_memory_limit", &n_size, DST(index_memory_limit_bytes), 0, NULL,
     "resident memory of the primary-key indexes of all tables (default 128MiB)"},
    {"index_dir", &n_string, DST(index_dir), 0, NULL,
     "local folder for key-index files (default $XDG_CACHE_HOME/firn)"},
    {"persist_key_index", &n_bool, DST(persist_key_index), 0, NULL,
     "upsert tables: keep the key index next to the table (metadata/firn-index/) so another "
     "host loads it instead of reading every key column (default true)"},
    {"persist_key_index_interval_seconds", &n_persist_interval, DST(persist_key_index_interval_ms),
     0, NULL,
     "least time between two uploads of a key index while running (default 600; a clean stop "
     "and the end of a backfill always upload)"},
    {"consolidate_deletes_after", &n_consolidate, DST(consolidate_deletes_after), 0, NULL,
     "format-2 upsert tables: position-delete files left before they are consolidated into one "
     "file per data file (default 8, 0: never)"},
    {"compact_small_files", &n_compact_files, DST(compact_small_files), 0, NULL,
     "format-2 upsert tables: rewrite a partition's data files once this many are smaller than "
     "3/4 of target_file_size (default 8, 0: never)"},
    {"compact_delete_percent", &n_compact_pct, DST(compact_delete_percent), 0, NULL,
     "format-2 upsert tables: also rewrite a data file with this percentage of its rows deleted "
     "(default 20, 0: never)"},
    {"log", &n_string, DST(log), 0, NULL, "log levels, e.g. \"info,pg=debug\""},
    {"log_format", &n_log_format, DST(log_format), 0, NULL, NULL},
    {"metrics_listen", &n_string, DST(metrics_listen), 0, NULL,
     "HOST:PORT where firn sync serves /metrics, /healthz and /readyz, e.g. \"127.0.0.1:9187\" "
     "(--metrics-listen wins)"},
    {"table_properties", &n_kvmap, DST(table_properties), 0, NULL,
     "Iceberg properties of new tables"},
    {NULL, NULL, 0, 0, NULL, NULL},
};

const cfg_node firn__cfg_destination_root = {
    .type = CFG_OBJECT,
    .props = p_destination,
    .desc = "firn destination.json: the Iceberg catalog and how tables are written (OLake's "
            "destination.json with its \"writer\" block is accepted as is)"};

/* ------------------------------------------------------------------------------------------------
 * streams.json
 * ----------------------------------------------------------------------------------------------*/

static const cfg_node n_partition = {
    .type = CFG_CUSTOM,
    .bind = firn__cfg_bind_partition,
    .shape = CFG_SHAPE_SCHEMA,
    .schema_json = "{\"anyOf\":[{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
                   "{\"type\":\"string\"}]}",
    .desc = "partition spec: [\"day(created_at)\", \"bucket(16, id)\", \"region\"]"};
static const cfg_node n_partition_regex = {.type = CFG_CUSTOM,
                                           .bind = firn__cfg_bind_partition,
                                           .shape = CFG_SHAPE_SCHEMA,
                                           .schema_json = "{\"type\":\"string\"}",
                                           .desc =
                                               "OLake: \"/{created_at, day}/{id, bucket[16]}\""};

static const cfg_prop p_selected_columns[] = {
    {"columns", &n_strlist, STR(columns), CFG_OLAKE, "columns", NULL},
    {"sync_new_columns", &n_bool, STR(sync_new_columns), CFG_OLAKE, "sync_new_columns", NULL},
    {NULL, NULL, 0, 0, NULL, NULL},
};
static const cfg_node n_selected_columns = {.type = CFG_OBJECT, .props = p_selected_columns};

static const cfg_prop p_stream_commit[] = {
    {"interval_seconds", &n_commit_interval, STR(commit.interval_ms), 0, NULL, NULL},
    {"max_bytes", &n_size, STR(commit.max_bytes), 0, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL},
};
static const cfg_node n_stream_commit = {
    .type = CFG_OBJECT,
    .props = p_stream_commit,
    .desc = "this table's commit policy (default: the destination's)"};

static const cfg_prop p_selection[] = {
    {"stream_name", &n_string, STR(name), CFG_REQUIRED, NULL, "source table"},
    {"sync_mode", &n_sync_mode, STR(sync_mode), 0, NULL, NULL},
    {"cursor_field", &n_string, STR(cursor_field), 0, NULL,
     "incremental: cursor column (\"a:b\" falls back to b when a is NULL)"},
    {"primary_key", &n_strlist, STR(primary_key), 0, NULL, "override of the source's key"},
    {"append_mode", &n_bool, STR(append_mode), 0, NULL, "write changes as new rows (no upsert)"},
    {"append_only", &n_bool, STR(append_mode), CFG_OLAKE, "append_mode", NULL},
    {"soft_delete", &n_bool, STR(soft_delete), 0, NULL,
     "upsert tables: a deleted row is replaced by a tombstone row with _firn_op = \"d\" (the "
     "old row under REPLICA IDENTITY FULL, else the key with nulls) instead of removed"},
    {"columns", &n_strlist, STR(columns), 0, NULL, "columns to copy (default all)"},
    {"sync_new_columns", &n_bool, STR(sync_new_columns), 0, NULL,
     "copy columns added later too (default true)"},
    {"selected_columns", &n_selected_columns, 0, CFG_OLAKE, NULL, NULL},
    {"partition", &n_partition, 0, 0, NULL, NULL},
    {"partition_regex", &n_partition_regex, 0, CFG_OLAKE, "partition", NULL},
    {"target_namespace", &n_string, STR(target_namespace), 0, NULL, NULL},
    {"target_table", &n_string, STR(target_table), 0, NULL, NULL},
    {"destination_database", &n_string, STR(target_namespace), CFG_OLAKE, "target_namespace", NULL},
    {"destination_table", &n_string, STR(target_table), CFG_OLAKE, "target_table", NULL},
    {"filter", &n_string, STR(filter), 0, NULL, "SQL condition on backfilled rows"},
    {"commit", &n_stream_commit, 0, 0, NULL, NULL},
    {"normalization", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {"chunk_column", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {"split_column", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {"use_source_column_names", &n_quiet, 0, CFG_OLAKE, NULL, "firn always keeps source names"},
    {"update_type", &n_ignored, 0, CFG_OLAKE, "delete_mode", NULL},
    {"filter_config", &n_ignored, 0, CFG_OLAKE, "filter", NULL},
    {NULL, NULL, 0, 0, NULL, NULL},
};
static const cfg_node n_selection = {
    .type = CFG_OBJECT, .props = p_selection, .desc = "a selected stream and its options"};

static const cfg_prop p_stream_inner[] = {
    {"name", &n_string, STR(name), CFG_REQUIRED, NULL, NULL},
    {"namespace", &n_string, STR(namespace), CFG_REQUIRED, NULL, "source schema"},
    {"type_schema", &n_raw, STR(type_schema), 0, NULL, "discovered columns and types"},
    {"supported_sync_modes", &n_strlist, STR(supported_sync_modes), 0, NULL, NULL},
    {"source_defined_primary_key", &n_strlist, STR(source_primary_key), 0, NULL, NULL},
    {"available_cursor_fields", &n_strlist, STR(available_cursor_fields), 0, NULL, NULL},
    {"notes", &n_notes, 0, 0, NULL, "why a sync mode is not supported"},
    {"sync_mode", &n_sync_mode, STR(sync_mode), 0, NULL, NULL},
    {"cursor_field", &n_string, STR(cursor_field), 0, NULL, NULL},
    {"destination_database", &n_string, STR(target_namespace), CFG_OLAKE, "target_namespace", NULL},
    {"destination_table", &n_string, STR(target_table), CFG_OLAKE, "target_table", NULL},
    {"additional_properties", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {"additional_properties_schema", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {"default_stream_properties", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {"available_update_types", &n_quiet, 0, CFG_OLAKE, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL},
};
static const cfg_node n_stream_inner = {.type = CFG_OBJECT, .props = p_stream_inner};
static const cfg_prop p_stream_entry[] = {
    {"stream", &n_stream_inner, 0, CFG_REQUIRED, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL},
};
static const cfg_node n_stream_entry = {
    .type = CFG_OBJECT, .props = p_stream_entry, .desc = "a discovered stream"};

static const cfg_node n_selected_streams = {.type = CFG_CUSTOM,
                                            .bind = firn__cfg_bind_selected,
                                            .shape = CFG_SHAPE_MAP_OF_ARRAYS,
                                            .items = &n_selection,
                                            .desc =
                                                "the streams to sync, grouped by source schema"};
static const cfg_node n_catalog_streams = {.type = CFG_CUSTOM,
                                           .bind = firn__cfg_bind_catalog_streams,
                                           .shape = CFG_SHAPE_ARRAY,
                                           .items = &n_stream_entry,
                                           .desc = "every stream discover found"};

static const cfg_prop p_streams[] = {
    {"selected_streams", &n_selected_streams, 0, 0, NULL, NULL},
    {"streams", &n_catalog_streams, 0, 0, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL},
};

const cfg_node firn__cfg_streams_root = {
    .type = CFG_OBJECT,
    .props = p_streams,
    .desc = "firn streams.json: which tables to copy and how (OLake's streams.json)"};

/* ------------------------------------------------------------------------------------------------
 * state.json
 * ----------------------------------------------------------------------------------------------*/

static const cfg_node n_lsn = {
    .type = CFG_CUSTOM,
    .bind = firn__cfg_bind_lsn,
    .shape = CFG_SHAPE_SCHEMA,
    .schema_json = "{\"type\":\"string\",\"pattern\":\"^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$\"}",
    .desc = "PostgreSQL LSN \"X/Y\""};

static const cfg_prop p_global_state[] = {
    {"lsn", &n_lsn, STA(global_lsn), 0, NULL, "position acknowledged to the source"},
    {"snapshot_name", &n_string, STA(snapshot_name), 0, NULL,
     "exported snapshot of an unfinished backfill"},
    {NULL, NULL, 0, 0, NULL, NULL},
};
static const cfg_node n_global_state = {.type = CFG_OBJECT, .props = p_global_state};
static const cfg_prop p_global[] = {
    {"state", &n_global_state, 0, 0, NULL, NULL},
    {"streams", &n_strlist, STA(global_streams), 0, NULL, "\"schema.table\" covered by lsn"},
    {NULL, NULL, 0, 0, NULL, NULL},
};
static const cfg_node n_global = {.type = CFG_OBJECT, .props = p_global};

static const cfg_enum_value v_state_mode[] = {
    {"", FIRN_SYNC_UNSET, NULL},
    {"full_refresh", FIRN_SYNC_FULL_REFRESH, NULL},
    {"full_refresh_cdc", FIRN_SYNC_FULL_REFRESH_CDC, NULL},
    {"cdc", FIRN_SYNC_FULL_REFRESH_CDC, NULL},
    {"cdc_only", FIRN_SYNC_CDC_ONLY, NULL},
    {"strict_cdc", FIRN_SYNC_CDC_ONLY, NULL},
    {"incremental", FIRN_SYNC_INCREMENTAL, NULL},
    {NULL, 0, NULL},
};
static const cfg_node n_state_mode = {.type = CFG_ENUM, .values = v_state_mode};
static const cfg_node n_count = {.type = CFG_INT, .min = 0, .max = INT64_MAX};

static const cfg_prop p_stream_progress[] = {
    {"chunks", &n_raw, SST(chunks), 0, NULL, "OLake: backfill chunks still to copy"},
    {"backfill_done", &n_bool, SST(backfill_done), 0, NULL, NULL},
    {"chunks_done", &n_count, SST(chunks_done), 0, NULL, NULL},
    {"lsn", &n_lsn, SST(committed_lsn), 0, NULL, "last source position committed"},
    {"cursor_field", &n_string, SST(cursor_field), 0, NULL, NULL},
    {"cursor_value", &n_raw, SST(cursor_value), 0, NULL, NULL},
    {"last_commit_us", &n_count, SST(last_commit_us), 0, NULL, "microseconds since 1970"},
    {"snapshot_id", &n_count, SST(snapshot_id), 0, NULL, "Iceberg snapshot of the last commit"},
    {NULL, NULL, 0, 0, NULL, NULL},
};
static const cfg_node n_stream_progress = {
    .type = CFG_OBJECT,
    .props = p_stream_progress,
    .extra = firn__cfg_state_extra,
    .desc = "progress; OLake's incremental state {\"<cursor column>\": value} is accepted"};

static const cfg_prop p_stream_state[] = {
    {"stream", &n_string, SST(name), CFG_REQUIRED, NULL, NULL},
    {"namespace", &n_string, SST(namespace), 0, NULL, NULL},
    {"sync_mode", &n_state_mode, SST(sync_mode), 0, NULL, NULL},
    {"state", &n_stream_progress, 0, 0, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL},
};
static const cfg_node n_stream_state = {.type = CFG_OBJECT, .props = p_stream_state};
static const cfg_node n_state_streams = {.type = CFG_CUSTOM,
                                         .bind = firn__cfg_bind_state_streams,
                                         .shape = CFG_SHAPE_ARRAY,
                                         .items = &n_stream_state};

static const cfg_enum_value v_state_type[] = {
    {"GLOBAL", 0, NULL},
    {"STREAM", 0, NULL},
    {"MIXED", 0, NULL},
    {NULL, 0, NULL},
};

/* The state file's "type" is informational: checked, not stored. */
static firn_rc bind_state_type(cfg_ctx *ctx, const json_t *v, void *base, firn_err *err)
{
    (void)base;
    if (json_is_null(v))
        return FIRN_OK;
    if (json_is_string(v)) {
        for (const cfg_enum_value *e = v_state_type; e->name; e++) {
            if (strcmp(e->name, json_string_value(v)) == 0)
                return FIRN_OK;
        }
    }
    return firn__cfg_fail(ctx, err, "\"%s\" must be one of \"GLOBAL\", \"STREAM\", \"MIXED\"",
                          firn__cfg_path(ctx));
}
static const cfg_node n_state_type_custom = {.type = CFG_CUSTOM,
                                             .bind = bind_state_type,
                                             .shape = CFG_SHAPE_SCHEMA,
                                             .schema_json =
                                                 "{\"enum\":[\"GLOBAL\",\"STREAM\",\"MIXED\"]}"};

static const cfg_prop p_state[] = {
    {"type", &n_state_type_custom, 0, 0, NULL, "firn writes GLOBAL"},
    {"global", &n_global, 0, 0, NULL, NULL},
    {"streams", &n_state_streams, 0, 0, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL},
};

const cfg_node firn__cfg_state_root = {
    .type = CFG_OBJECT,
    .props = p_state,
    .desc = "firn state.json: how far each stream got (OLake's state.json layout)"};
