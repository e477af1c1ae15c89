/* SPDX-License-Identifier: Apache-2.0 */
/* Configuration loading: OLake's files and firn's own, every class of mistake with its exact
 * one-line message, ${VAR} substitution, secrets kept out of messages, state and streams round
 * trips, and the JSON Schema. */
#include "firn/config.h"
#include "t.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DATA FIRN_SOURCE_DIR "/tests/data/config/"

static void set_test_env(void)
{
    setenv("FIRN_TEST_PG_PASSWORD", "pg-secret-123", 1);
    setenv("FIRN_TEST_S3_SECRET", "s3-secret-456", 1);
    setenv("FIRN_TEST_TOKEN", "token-secret-789", 1);
    unsetenv("FIRN_TEST_PG_PORT");
    unsetenv("FIRN_TEST_UNSET");
}

/* Parses text as file kind `which` named "<which>.json" and returns the rc; err gets the line. */
static firn_rc parse(firn_config *cfg, const char *which, const char *text, firn_err *err)
{
    char name[64];
    snprintf(name, sizeof(name), "%s.json", which);
    firn_err_clear(err);
    firn_rc rc = firn_config_parse(cfg, which, text, strlen(text), name, err);
    if (rc == FIRN_OK)
        rc = firn_config_resolve(cfg, err);
    return rc;
}

/* Expects parsing to fail with FIRN_ERR_CONFIG and exactly msg. */
#define T_CONFIG_ERROR(which, text, want)                                                          \
    do {                                                                                           \
        firn_config c_ = {0};                                                                      \
        firn_err e_ = {0};                                                                         \
        T_EQ_INT(parse(&c_, which, text, &e_), FIRN_ERR_CONFIG);                                   \
        T_EQ_STR(e_.msg, want);                                                                    \
        T_TRUE(strchr(e_.msg, '\n') == NULL);                                                      \
        firn_config_free(&c_);                                                                     \
    } while (0)

T_TEST(olake_files_load)
{
    set_test_env();
    firn_config cfg = {0};
    firn_err err = {0};
    firn_config_paths paths = {DATA "olake_source.json", DATA "olake_destination.json",
                               DATA "olake_streams.json", DATA "olake_state.json"};
    T_OK_ERR(firn_config_load(&paths, &cfg, &err), &err);
    const firn_source_config *s = &cfg.source;
    T_EQ_STR(s->host, "db.internal");
    T_EQ_INT(s->port, 5433);
    T_EQ_STR(s->database, "shop");
    T_EQ_STR(s->password, "pg-secret-123");
    T_EQ_INT(s->sslmode, FIRN_SSL_REQUIRE);
    T_EQ_INT(s->update_method, FIRN_UPDATE_CDC);
    T_EQ_STR(s->slot, "olake_slot");
    T_EQ_STR(s->publication, "olake_publication");
    T_TRUE(s->slot_given && !s->create_slot);
    T_EQ_INT(s->initial_wait_ms, 120000);
    T_EQ_INT(s->batch_rows, 100000);
    T_EQ_INT(s->parallelism, 8);
    T_EQ_INT(s->default_mode, FIRN_SYNC_FULL_REFRESH_CDC);
    T_EQ_STR(firn_kvlist_get(&s->params, "keepalives"), "1");
    /* retry_count is accepted and ignored with a warning */
    T_EQ_UINT(cfg.warnings.count, 1);
    T_TRUE(strstr(cfg.warnings.items[0], "\"retry_count\" is accepted") != NULL);

    const firn_destination_config *d = &cfg.destination;
    T_EQ_INT(d->catalog.kind, FIRN_CATALOG_REST);
    T_EQ_STR(d->catalog.uri, "http://localhost:8181/catalog");
    T_EQ_STR(d->catalog.warehouse, "s3://warehouse/olake");
    T_EQ_INT(d->catalog.auth, FIRN_REST_AUTH_BEARER);
    T_EQ_STR(d->catalog.token, "token-secret-789");
    T_EQ_STR(d->namespace_pattern, "olake_iceberg");
    T_EQ_STR(d->storage.endpoint, "http://localhost:9000");
    T_EQ_STR(d->storage.secret_access_key, "s3-secret-456");
    T_TRUE(d->storage.path_style && !d->storage.use_ssl);
    T_EQ_INT(d->format_version, 2);
    T_EQ_INT(d->delete_mode, FIRN_DELETE_POSITION);

    T_EQ_UINT(cfg.streams.count, 3);
    const firn_stream_config *o = firn_streams_find(&cfg.streams, "public", "orders");
    T_TRUE(o && o->selected);
    T_EQ_INT(o->sync_mode, FIRN_SYNC_FULL_REFRESH_CDC); /* OLake "cdc" */
    T_EQ_UINT(o->partition_count, 2);
    T_EQ_STR(o->partition[0].column, "created_at");
    T_EQ_INT(o->partition[0].transform, FIRN_CFG_TRANSFORM_DAY);
    T_EQ_INT(o->partition[1].transform, FIRN_CFG_TRANSFORM_BUCKET);
    T_EQ_INT(o->partition[1].param, 16);
    T_EQ_UINT(o->columns.count, 3);
    T_FALSE(o->sync_new_columns);
    T_EQ_STR(o->source_primary_key.items[0], "id");
    T_EQ_STR(o->target_namespace, "olake_iceberg");
    T_EQ_STR(o->target_table, "orders");
    T_TRUE(strstr(o->type_schema, "\"created_at\"") != NULL);
    const firn_stream_config *e = firn_streams_find(&cfg.streams, "public", "events");
    T_TRUE(e && e->selected && e->append_mode);
    T_EQ_INT(e->sync_mode, FIRN_SYNC_INCREMENTAL);
    T_EQ_STR(e->cursor_field, "seq");
    const firn_stream_config *a = firn_streams_find(&cfg.streams, "public", "audit");
    T_TRUE(a && !a->selected);

    T_EQ_UINT(cfg.state.global_lsn, 0x5F4A400B6D7ull);
    T_EQ_STR(cfg.state.global_streams.items[0], "public.orders");
    const firn_stream_state *ss = firn_state_stream(&cfg.state, "public", "events", false);
    T_TRUE(ss != NULL);
    T_EQ_STR(ss->cursor_field, "seq");
    T_EQ_STR(ss->cursor_value, "41");
    firn_config_free(&cfg);
}

/* OLake writes an "a:b" cursor as two keys; firn reads them as one cursor "a:b" with both
 * values, whichever order they come in. */
T_TEST(olake_two_cursor_keys)
{
    firn_config cfg = {0};
    firn_err err = {0};
    T_OK_ERR(parse(&cfg, "state",
                   "{\"type\": \"STREAM\", \"streams\": [{\"stream\": \"t\", \"namespace\": "
                   "\"public\", \"state\": {\"chunks\": [], \"updated_at\": "
                   "\"2024-01-02T03:04:05Z\", \"created_at\": 17}}]}",
                   &err),
             &err);
    const firn_stream_state *ss = firn_state_stream(&cfg.state, "public", "t", false);
    T_TRUE(ss != NULL);
    T_EQ_STR(ss->cursor_field, "updated_at:created_at");
    T_EQ_STR(ss->cursor_value, "[\"2024-01-02T03:04:05Z\",17]");
    firn_config_free(&cfg);
}

T_TEST(firn_files_load)
{
    set_test_env();
    setenv("FIRN_TEST_PG_PORT", "6543", 1);
    firn_config cfg = {0};
    firn_err err = {0};
    firn_config_paths paths = {DATA "firn_source.json", DATA "firn_destination.json",
                               DATA "firn_streams.json", DATA "firn_state.json"};
    T_OK_ERR(firn_config_load(&paths, &cfg, &err), &err);
    T_EQ_INT(cfg.source.port, 6543);
    T_EQ_INT(cfg.source.sslmode, FIRN_SSL_DISABLE);
    T_EQ_STR(cfg.source.slot, "firn_app");
    T_TRUE(!cfg.source.slot_given && cfg.source.create_slot && cfg.source.create_publication);
    T_EQ_UINT(cfg.source.chunk_bytes, 32u << 20);
    T_EQ_UINT(cfg.source.schemas.count, 2);
    T_EQ_UINT(cfg.warnings.count, 0);

    const firn_destination_config *d = &cfg.destination;
    T_EQ_INT(d->catalog.kind, FIRN_CATALOG_SQL);
    T_EQ_STR(d->catalog.uri, "/var/lib/firn/catalog.db");
    T_EQ_STR(d->catalog.warehouse, "file:///var/lib/firn/warehouse");
    T_EQ_STR(d->catalog.name, "firn");
    T_EQ_UINT(d->readers, FIRN_READER_DUCKDB | FIRN_READER_PYICEBERG);
    T_EQ_INT(d->format_version, 3); /* both read v3 deletion vectors */
    T_EQ_INT(d->delete_mode, FIRN_DELETE_DELETION_VECTOR);
    T_EQ_UINT(d->target_file_bytes, 256u << 20);
    T_EQ_INT(d->commit.interval_ms, 5000);
    T_EQ_UINT(d->commit.max_bytes, 32u << 20);
    T_EQ_INT(d->commit_retry_timeout_ms, -1); /* unset: 300 s catch-up, no limit --follow */
    T_EQ_INT(d->commit_retry_max_wait_ms, 60000);
    T_EQ_UINT(d->memory_limit_bytes, 512u << 20);
    T_EQ_INT(d->log_format, 1);
    T_FALSE(d->storage.path_style);

    T_EQ_UINT(cfg.streams.count, 3);
    const firn_stream_config *o = firn_streams_find(&cfg.streams, "public", "orders");
    T_EQ_STR(o->target_namespace, "app_public");
    T_EQ_INT(o->commit.interval_ms, 2500);
    T_EQ_UINT(o->commit.max_bytes, 32u << 20);
    T_EQ_INT(o->partition[1].param, 16);
    T_EQ_STR(o->partition[1].column, "id");
    const firn_stream_config *e = firn_streams_find(&cfg.streams, "public", "events");
    T_EQ_STR(e->cursor_field, "updated_at");
    T_EQ_STR(e->cursor_fallback, "created_at");
    T_EQ_STR(e->primary_key.items[0], "event_id");
    T_EQ_STR(e->target_namespace, "raw");
    T_EQ_STR(e->target_table, "app_events");
    const firn_stream_config *r = firn_streams_find(&cfg.streams, "sales", "refunds");
    T_EQ_INT(r->sync_mode, FIRN_SYNC_CDC_ONLY);
    T_TRUE(r->append_mode);
    T_EQ_STR(r->target_namespace, "app_sales");

    const firn_stream_state *ss = firn_state_stream(&cfg.state, "public", "orders", false);
    T_TRUE(ss->backfill_done);
    T_EQ_INT(ss->chunks_done, 12);
    T_EQ_UINT(ss->committed_lsn, 0x16B3748);
    T_EQ_INT(ss->snapshot_id, 42);
    firn_config_free(&cfg);
}

T_TEST(unknown_keys_name_the_path)
{
    T_CONFIG_ERROR("destination", "{\"writer\": {\"catlog_type\": \"rest\"}}",
                   "destination.json: unknown key \"writer.catlog_type\" (did you mean "
                   "\"catalog_type\"?)");
    T_CONFIG_ERROR("source", "{\"host\": \"h\", \"ssl\": {\"mdoe\": \"require\"}}",
                   "source.json: unknown key \"ssl.mdoe\" (did you mean \"mode\"?)");
    T_CONFIG_ERROR("source", "{\"host\": \"h\", \"flux_capacitor\": 1}",
                   "source.json: unknown key \"flux_capacitor\"");
    T_CONFIG_ERROR("streams",
                   "{\"selected_streams\": {\"public\": [{\"stream_name\": \"t\", "
                   "\"partiton\": []}]}}",
                   "streams.json: unknown key \"selected_streams.public[0].partiton\" (did you "
                   "mean \"partition\"?)");
    T_CONFIG_ERROR("state",
                   "{\"streams\": [{\"stream\": \"t\", \"state\": {\"lsn\": \"0/1\", "
                   "\"a\": 1, \"b\": 2, \"c\": 3}}]}",
                   "state.json: unknown key \"streams[0].state.c\" (a stream has one cursor, "
                   "\"a:b\", and at most one fallback column)");
}

T_TEST(bad_values_name_path_and_type)
{
    T_CONFIG_ERROR("source",
                   "{\"host\": \"h\", \"database\": \"d\", \"username\": \"u\", "
                   "\"port\": \"5432\"}",
                   "source.json: \"port\" must be an integer, got a string");
    T_CONFIG_ERROR("source", "{\"host\": \"h\", \"port\": 70000}",
                   "source.json: \"port\" must be between 1 and 65535, got 70000");
    T_CONFIG_ERROR("source", "{\"host\": \"h\", \"ssl\": {\"mode\": \"requir\"}}",
                   "source.json: \"ssl.mode\" must be one of \"disable\", \"allow\", \"prefer\", "
                   "\"require\", \"verify-ca\", \"verify-full\"; got \"requir\"");
    T_CONFIG_ERROR("destination", "{\"commit\": {\"max_bytes\": \"lots\"}}",
                   "destination.json: \"commit.max_bytes\" must be a size such as 1048576 or "
                   "\"64MiB\"");
    T_CONFIG_ERROR("destination", "{\"commit\": {\"retry_timeout_seconds\": -1}}",
                   "destination.json: \"commit.retry_timeout_seconds\" must be between 0 and "
                   "604800 seconds");
    T_CONFIG_ERROR("destination",
                   "{\"catalog\": {\"type\": \"sql\", \"uri\": \"sqlite:///c.db\", "
                   "\"warehouse\": \"/w\"}, \"commit\": {\"retry_max_wait_seconds\": 0.05}}",
                   "destination.json: \"commit.retry_max_wait_seconds\" must be at least 0.1");
    T_CONFIG_ERROR("destination", "{\"readers\": [\"duckdb\", 3]}",
                   "destination.json: \"readers[1]\" must be a string, got an integer");
    T_CONFIG_ERROR("destination", "{\"identifier_fields\": \"yes\"}",
                   "destination.json: \"identifier_fields\" must be true or false, got a string");
    T_CONFIG_ERROR("source", "[1, 2]", "source.json: the top level must be a JSON object");
}

/* Names the catalog would refuse at the first write fail at load, with what is wrong. */
T_TEST(iceberg_names_checked_at_load)
{
    T_CONFIG_ERROR("destination",
                   "{\"catalog\": {\"warehouse\": \"/w\"}, \"namespace\": \"../../etc\"}",
                   "destination.json: \"namespace\" \"../../etc\" is no Iceberg namespace: "
                   "levels are joined by single dots and none may be empty");
    T_CONFIG_ERROR("streams",
                   "{\"selected_streams\": {\"public\": [{\"stream_name\": \"t\", "
                   "\"target_namespace\": \"a..b\"}]}}",
                   "streams.json: stream \"t\": \"target_namespace\" \"a..b\" is no Iceberg "
                   "namespace: levels are joined by single dots and none may be empty");
    T_CONFIG_ERROR("destination", "{\"catalog\": {\"warehouse\": \"http://x/wh\"}}",
                   "destination.json: \"catalog.warehouse\" \"http://x/wh\": the SQL catalog's "
                   "warehouse is a local folder (a path or file://), s3://, s3a:// or gs://");
    char doc[1024], want[512], name[301];
    memset(name, 'x', 300);
    name[300] = '\0';
    snprintf(doc, sizeof(doc),
             "{\"selected_streams\": {\"public\": [{\"stream_name\": \"t\", "
             "\"target_table\": \"%s\"}]}}",
             name);
    snprintf(want, sizeof(want),
             "streams.json: stream \"t\": \"target_table\" \"%.64s...\" is longer than 255 "
             "bytes",
             name);
    T_CONFIG_ERROR("streams", doc, want);
    snprintf(doc, sizeof(doc), "{\"selected_streams\": {\"public\": [{\"stream_name\": \"%s\"}]}}",
             name);
    snprintf(want, sizeof(want),
             "streams.json: stream \"%.64s\": \"stream_name\" \"%.64s...\" is longer than 255 "
             "bytes",
             name, name);
    T_CONFIG_ERROR("streams", doc, want);
}

T_TEST(required_keys)
{
    T_CONFIG_ERROR("source", "{\"port\": 5432}",
                   "source.json: missing required key \"host\" (or \"uri\")");
    T_CONFIG_ERROR("source", "{\"host\": \"h\", \"username\": \"u\"}",
                   "source.json: missing required key \"database\"");
    T_CONFIG_ERROR("source",
                   "{\"host\": \"h\", \"database\": \"d\", \"username\": \"u\", "
                   "\"update_method\": {\"type\": \"CDC\"}}",
                   "source.json: missing required key \"update_method.replication_slot\"");
    T_CONFIG_ERROR("streams", "{\"selected_streams\": {\"public\": [{\"sync_mode\": \"cdc\"}]}}",
                   "streams.json: missing required key \"selected_streams.public[0].stream_name\"");
    T_CONFIG_ERROR("streams", "{\"streams\": [{\"stream\": {}}]}",
                   "streams.json: missing required keys \"streams[0].stream.name\", "
                   "\"streams[0].stream.namespace\"");
    T_CONFIG_ERROR("destination", "{\"catalog\": {\"type\": \"rest\"}}",
                   "destination.json: missing required key \"catalog.uri\" (the REST catalog's "
                   "URL)");
    T_CONFIG_ERROR("destination", "{}",
                   "destination.json: missing required key \"catalog.warehouse\" (or OLake's "
                   "\"writer.iceberg_s3_path\")");
}

T_TEST(bad_json_and_missing_file)
{
    firn_config cfg = {0};
    firn_err err = {0};
    T_EQ_INT(parse(&cfg, "source", "{\"host\": \"h\",}", &err), FIRN_ERR_CONFIG);
    T_TRUE(strncmp(err.msg, "source.json:1:", 14) == 0);
    T_TRUE(strstr(err.msg, "invalid JSON") != NULL);
    T_EQ_INT(parse(&cfg, "source", "{\"host\": \"a\", \"host\": \"b\"}", &err), FIRN_ERR_CONFIG);
    T_TRUE(strstr(err.msg, "duplicate object key") != NULL);
    firn_config_free(&cfg);

    firn_config_paths paths = {.source = DATA "no_such_file.json"};
    T_EQ_INT(firn_config_load(&paths, &cfg, &err), FIRN_ERR_CONFIG);
    T_EQ_STR(err.msg, "cannot open \"" DATA "no_such_file.json\": No such file or directory");
    firn_config_paths dir = {.destination = DATA};
    T_EQ_INT(firn_config_load(&dir, &cfg, &err), FIRN_ERR_CONFIG);
    T_EQ_STR(err.msg, "cannot read \"" DATA "\": it is a directory");
    /* a missing state file is a first run, not an error */
    firn_config_paths state = {.state = DATA "no_such_state.json"};
    T_OK_ERR(firn_config_load(&state, &cfg, &err), &err);
    T_EQ_UINT(cfg.state.count, 0);
    firn_config_free(&cfg);
}

T_TEST(env_substitution)
{
    set_test_env();
    setenv("FIRN_TEST_PG_PORT", "6000", 1);
    firn_config cfg = {0};
    firn_err err = {0};
    T_OK_ERR(parse(&cfg, "source",
                   "{\"host\": \"${FIRN_TEST_UNSET:-db.example}\", \"database\": \"d$$x\", "
                   "\"username\": \"u\", \"port\": \"${FIRN_TEST_PG_PORT}\", "
                   "\"password\": \"a${FIRN_TEST_PG_PASSWORD}b\", "
                   "\"create_slot\": \"${FIRN_TEST_UNSET:-true}\"}",
                   &err),
             &err);
    T_EQ_STR(cfg.source.host, "db.example");
    T_EQ_STR(cfg.source.database, "d$x");
    T_EQ_INT(cfg.source.port, 6000);
    T_EQ_STR(cfg.source.password, "apg-secret-123b");
    T_TRUE(cfg.source.create_slot);
    firn_config_free(&cfg);
    T_CONFIG_ERROR("source", "{\"host\": \"h\", \"password\": \"${FIRN_TEST_UNSET}\"}",
                   "source.json: \"password\": environment variable \"FIRN_TEST_UNSET\" is not "
                   "set");
    T_CONFIG_ERROR("destination", "{\"writer\": {\"token\": \"${FIRN_TEST_TOKEN\"}}",
                   "destination.json: \"writer.token\": unterminated \"${\" in value");
    /* A default may hold references itself, expanded only when it is used. */
    T_OK_ERR(parse(&cfg, "source",
                   "{\"host\": \"${FIRN_TEST_UNSET:-x${FIRN_TEST_UNSET2:-y$$}z}\", "
                   "\"database\": \"${FIRN_TEST_PG_PORT:-${FIRN_TEST_UNSET}}\", "
                   "\"username\": \"u\", \"port\": \"${FIRN_TEST_UNSET:-${FIRN_TEST_PG_PORT}}\"}",
                   &err),
             &err);
    T_EQ_STR(cfg.source.host, "xy$z");
    T_EQ_STR(cfg.source.database, "6000");
    T_EQ_INT(cfg.source.port, 6000);
    firn_config_free(&cfg);
    T_CONFIG_ERROR("source",
                   "{\"host\": \"h\", \"password\": \"${FIRN_TEST_UNSET:-${FIRN_TEST_UNSET2}}\"}",
                   "source.json: \"password\": environment variable \"FIRN_TEST_UNSET2\" is not "
                   "set");
    T_CONFIG_ERROR("source", "{\"host\": \"${FIRN_TEST_UNSET:-a${FIRN_TEST_PG_PORT}\"}",
                   "source.json: \"host\": unterminated \"${\" in value");
    T_CONFIG_ERROR("source", "{\"host\": \"${A B}\"}",
                   "source.json: \"host\": bad variable name \"A B\" in \"${...}\" (write "
                   "${NAME} or ${NAME:-default}; a name has letters, digits and \"_\")");
    T_CONFIG_ERROR("source", "{\"host\": \"h\", \"password\": \"${:-hunter2}\"}",
                   "source.json: \"password\": bad variable name in \"${...}\" (not shown: the "
                   "value is a secret; write ${NAME} or ${NAME:-default}, and $$ for a literal "
                   "\"$\")");
    setenv("FIRN_TEST_PG_PORT", "not-a-port", 1);
    T_CONFIG_ERROR("source", "{\"host\": \"h\", \"port\": \"${FIRN_TEST_PG_PORT}\"}",
                   "source.json: \"port\" must be an integer (from the environment)");
}

T_TEST(secrets_stay_out_of_messages)
{
    set_test_env();
    static const char *const bad[] = {
        "{\"host\": \"h\", \"password\": \"hunter2-plain\", \"port\": 0}",
        "{\"host\": \"h\", \"password\": 12345, \"uri\": \"postgresql://u:hunter2-plain@h/d\"}",
        "{\"uri\": \"postgresql://u:hunter2-plain@h/d\", \"uri2\": \"hunter2-plain\"}",
        "{\"host\": \"h\", \"password\": \"hunter2-plain\", \"ssl\": {\"mode\": \"x\"}}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        firn_config cfg = {0};
        firn_err err = {0};
        T_EQ_INT(parse(&cfg, "source", bad[i], &err), FIRN_ERR_CONFIG);
        T_TRUE(strstr(err.msg, "hunter2") == NULL);
        T_TRUE(strstr(err.msg, "12345") == NULL);
        firn_config_free(&cfg);
    }
    /* a secret from the environment in a file with a mistake */
    firn_config cfg = {0};
    firn_err err = {0};
    T_EQ_INT(parse(&cfg, "destination",
                   "{\"writer\": {\"aws_secret_key\": \"${FIRN_TEST_S3_SECRET}\", "
                   "\"jdbc_password\": \"x\", \"catalog_type\": \"rest\"}}",
                   &err),
             FIRN_ERR_CONFIG);
    T_TRUE(strstr(err.msg, "s3-secret") == NULL);
    for (size_t i = 0; i < cfg.warnings.count; i++)
        T_TRUE(strstr(cfg.warnings.items[i], "secret") == NULL);
    firn_config_free(&cfg);
}

T_TEST(aliases_conflict)
{
    T_CONFIG_ERROR("source", "{\"host\": \"h\", \"max_threads\": 4, \"parallelism\": 8}",
                   "source.json: \"max_threads\" and \"parallelism\" set the same option; keep "
                   "one");
    T_CONFIG_ERROR("source",
                   "{\"host\": \"h\", \"slot\": \"a\", \"update_method\": {\"replication_slot\": "
                   "\"b\"}}",
                   "source.json: \"slot\" and \"update_method.replication_slot\" set the same "
                   "option; keep one");
    T_CONFIG_ERROR(
        "streams",
        "{\"selected_streams\": {\"s\": [{\"stream_name\": \"t\", \"partition\": [\"a\"],"
        " \"partition_regex\": \"/{a, identity}\"}]}}",
        "streams.json: \"selected_streams.s[0].partition\" and "
        "\"selected_streams.s[0].partition_regex\" set the same option; keep one");
}

T_TEST(unsupported_olake_choices)
{
    T_CONFIG_ERROR("destination",
                   "{\"type\": \"ICEBERG\", \"writer\": {\"catalog_type\": \"jdbc\", "
                   "\"jdbc_url\": \"jdbc:postgresql://h/iceberg\", \"iceberg_s3_path\": "
                   "\"s3a://w\"}}",
                   "destination.json: \"writer.jdbc_url\": only SQLite catalogs are supported "
                   "(jdbc:sqlite:PATH); use an Iceberg REST catalog for others");
    T_CONFIG_ERROR("destination", "{\"writer\": {\"catalog_type\": \"glue\"}}",
                   "destination.json: \"writer.catalog_type\": \"glue\" is not supported: use the "
                   "Glue Iceberg REST endpoint with catalog type \"rest\" and sigv4 auth");
    T_CONFIG_ERROR("source",
                   "{\"host\": \"h\", \"ssh_config\": {\"type\": \"ssh_key_authentication\"}}",
                   "source.json: \"ssh_config.type\": SSH tunnels are not supported; use "
                   "\"no_tunnel\" and open the tunnel outside firn");
    /* OLake's jdbc catalog on SQLite is firn's SQL catalog */
    firn_config cfg = {0};
    firn_err err = {0};
    T_OK_ERR(parse(&cfg, "destination",
                   "{\"type\": \"ICEBERG\", \"writer\": {\"catalog_type\": \"jdbc\", \"jdbc_url\": "
                   "\"jdbc:sqlite:/tmp/cat.db\", \"iceberg_s3_path\": \"/tmp/wh\", "
                   "\"no_identifier_fields\": true}}",
                   &err),
             &err);
    T_EQ_INT(cfg.destination.catalog.kind, FIRN_CATALOG_SQL);
    T_EQ_STR(cfg.destination.catalog.uri, "/tmp/cat.db");
    T_EQ_STR(cfg.destination.catalog.warehouse, "file:///tmp/wh");
    T_FALSE(cfg.destination.identifier_fields);
    firn_config_free(&cfg);
}

T_TEST(streams_checks)
{
    T_CONFIG_ERROR("streams",
                   "{\"selected_streams\": {\"s\": [{\"stream_name\": \"t\", \"sync_mode\": "
                   "\"incremental\"}]}}",
                   "streams.json: stream \"s.t\": sync mode \"incremental\" needs "
                   "\"cursor_field\"");
    T_CONFIG_ERROR("streams",
                   "{\"selected_streams\": {\"s\": [{\"stream_name\": \"t\"}, {\"stream_name\": "
                   "\"t\"}]}}",
                   "streams.json: stream \"s.t\" is selected twice");
    T_CONFIG_ERROR("streams",
                   "{\"selected_streams\": {\"s\": [{\"stream_name\": \"t\", \"partition\": "
                   "[\"bucket(id)\"]}]}}",
                   "streams.json: \"selected_streams.s[0].partition[0]\": bucket needs a width: "
                   "bucket(N, column)");
    T_CONFIG_ERROR("streams",
                   "{\"selected_streams\": {\"s\": [{\"stream_name\": \"t\", \"partition\": "
                   "[\"week(ts)\"]}]}}",
                   "streams.json: \"selected_streams.s[0].partition[0]\": unknown transform "
                   "\"week\"");
    T_CONFIG_ERROR("streams",
                   "{\"selected_streams\": {\"s\": [{\"stream_name\": \"t\", \"partition_regex\": "
                   "\"/{id, bucket}\"}]}}",
                   "streams.json: \"selected_streams.s[0].partition_regex\": bucket and truncate "
                   "need a width: bucket[16]");
    T_CONFIG_ERROR("streams",
                   "{\"selected_streams\": {\"s\": [{\"stream_name\": \"t\", \"sync_mode\": "
                   "\"cdc_plus\"}]}}",
                   "streams.json: \"selected_streams.s[0].sync_mode\" must be one of "
                   "\"full_refresh\", \"full_refresh_cdc\", \"cdc\", \"cdc_only\", \"strict_cdc\", "
                   "\"incremental\"; got \"cdc_plus\"");
}

T_TEST(standalone_source_rejects_cdc_streams)
{
    firn_config cfg = {0};
    firn_err err = {0};
    T_OK(parse(&cfg, "source",
               "{\"host\": \"h\", \"database\": \"d\", \"username\": \"u\", \"update_method\": "
               "{\"type\": \"Standalone\"}, \"default_mode\": \"full_refresh\"}",
               &err));
    T_EQ_INT(parse(&cfg, "streams",
                   "{\"selected_streams\": {\"s\": [{\"stream_name\": \"t\", \"sync_mode\": "
                   "\"cdc\"}]}}",
                   &err),
             FIRN_ERR_CONFIG);
    T_EQ_STR(err.msg, "streams: stream \"s.t\" uses sync mode \"full_refresh_cdc\" but the "
                      "source's update_method is \"Standalone\" (no WAL)");
    firn_config_free(&cfg);
}

static char *temp_dir(void)
{
    char tmpl[] = "/tmp/firn-test-config.XXXXXX";
    T_TRUE(mkdtemp(tmpl) != NULL);
    return firn_strdup(tmpl);
}

T_TEST(state_round_trip_atomic)
{
    char *dir = temp_dir();
    char path[256];
    snprintf(path, sizeof(path), "%s/state.json", dir);
    firn_state st = {0};
    st.global_lsn = 0x16B3748;
    st.snapshot_name = firn_strdup("00000003-00000002-1");
    firn_strlist_push(&st.global_streams, "public.orders");
    firn_stream_state *s = firn_state_stream(&st, "public", "orders", true);
    s->sync_mode = FIRN_SYNC_FULL_REFRESH_CDC;
    s->backfill_done = true;
    s->chunks_done = 7;
    s->committed_lsn = 0xAB00000001ull;
    s->last_commit_us = 1700000000123456;
    firn_stream_state *inc = firn_state_stream(&st, "public", "events", true);
    inc->cursor_field = firn_strdup("updated_at");
    inc->cursor_value = firn_strdup("\"2024-01-02T03:04:05Z\"");
    T_TRUE(firn_state_stream(&st, "public", "orders", true) == s);
    firn_err err = {0};
    T_OK_ERR(firn_state_save(&st, path, &err), &err);
    char tmp[300];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    T_TRUE(access(tmp, F_OK) != 0);

    firn_config cfg = {0};
    firn_config_paths paths = {.state = path};
    T_OK_ERR(firn_config_load(&paths, &cfg, &err), &err);
    T_EQ_UINT(cfg.state.global_lsn, 0x16B3748);
    T_EQ_STR(cfg.state.snapshot_name, "00000003-00000002-1");
    const firn_stream_state *o = firn_state_stream(&cfg.state, "public", "orders", false);
    T_EQ_INT(o->sync_mode, FIRN_SYNC_FULL_REFRESH_CDC);
    T_TRUE(o->backfill_done);
    T_EQ_INT(o->chunks_done, 7);
    T_EQ_UINT(o->committed_lsn, 0xAB00000001ull);
    T_EQ_INT(o->last_commit_us, 1700000000123456);
    const firn_stream_state *e = firn_state_stream(&cfg.state, "public", "events", false);
    T_EQ_STR(e->cursor_value, "\"2024-01-02T03:04:05Z\"");
    /* saving over an existing file replaces it */
    s->chunks_done = 8;
    T_OK_ERR(firn_state_save(&st, path, &err), &err);
    firn_config_free(&cfg);
    T_OK_ERR(firn_config_load(&paths, &cfg, &err), &err);
    T_EQ_INT(firn_state_stream(&cfg.state, "public", "orders", false)->chunks_done, 8);
    firn_config_free(&cfg);
    firn_state_free(&st);
    /* a folder that does not exist: an error naming the temporary file */
    T_EQ_INT(firn_state_save(&st, "/nonexistent-dir/state.json", &err), FIRN_ERR_IO);
    T_TRUE(strstr(err.msg, "/nonexistent-dir/state.json.tmp") != NULL);
    unlink(path);
    rmdir(dir);
    firn_free(dir);
}

/* A state without an acknowledged position (incremental-only runs) says null, not "0/0", and
 * reads back as none. */
T_TEST(state_without_lsn_is_null)
{
    char *dir = temp_dir();
    char path[256];
    snprintf(path, sizeof(path), "%s/state.json", dir);
    firn_state st = {0};
    firn_stream_state *inc = firn_state_stream(&st, "public", "events", true);
    inc->sync_mode = FIRN_SYNC_INCREMENTAL;
    inc->cursor_field = firn_strdup("n");
    inc->cursor_value = firn_strdup("7");
    firn_err err = {0};
    T_OK_ERR(firn_state_save(&st, path, &err), &err);
    json_t *root = json_load_file(path, 0, NULL);
    json_t *g = json_object_get(json_object_get(json_object_get(root, "global"), "state"), "lsn");
    T_TRUE(g != NULL && json_is_null(g));
    json_t *s0 = json_object_get(json_array_get(json_object_get(root, "streams"), 0), "state");
    T_TRUE(json_is_object(s0) && json_object_get(s0, "lsn") == NULL);
    json_decref(root);
    firn_config cfg = {0};
    firn_config_paths paths = {.state = path};
    T_OK_ERR(firn_config_load(&paths, &cfg, &err), &err);
    T_EQ_UINT(cfg.state.global_lsn, 0);
    T_EQ_STR(firn_state_stream(&cfg.state, "public", "events", false)->cursor_value, "7");
    firn_config_free(&cfg);
    firn_state_free(&st);
    unlink(path);
    rmdir(dir);
    firn_free(dir);
}

/* Relative paths in the configuration files are taken from the working folder, never from the
 * file's folder: the SQL catalog's warehouse is made an absolute file:// URL at load (and the
 * default catalog file lies in it); a relative catalog file is kept as written (opened from the
 * working folder, like index_dir and sslrootcert). docs/configuration.md "Relative paths". */
T_TEST(relative_paths_resolve_against_working_folder)
{
    char cwd[4096], want[4200];
    T_TRUE(getcwd(cwd, sizeof(cwd)) != NULL);
    firn_config cfg = {0};
    firn_err err = {0};
    T_OK_ERR(parse(&cfg, "destination", "{\"catalog\": {\"warehouse\": \"lake/wh\"}}", &err), &err);
    snprintf(want, sizeof(want), "file://%s/lake/wh", cwd);
    T_EQ_STR(cfg.destination.catalog.warehouse, want);
    snprintf(want, sizeof(want), "%s/lake/wh/firn_catalog.db", cwd);
    T_EQ_STR(cfg.destination.catalog.uri, want);
    firn_config_free(&cfg);
    T_OK_ERR(parse(&cfg, "destination",
                   "{\"catalog\": {\"warehouse\": \"./wh\", \"uri\": \"cat.db\"}}", &err),
             &err);
    snprintf(want, sizeof(want), "file://%s/wh", cwd); /* no "." segment: check_location */
    T_EQ_STR(cfg.destination.catalog.warehouse, want);
    T_EQ_STR(cfg.destination.catalog.uri, "cat.db");
    firn_config_free(&cfg);
    /* ".." resolved lexically (getcwd has no symbolic links), extra slashes dropped */
    char *slash = strrchr(cwd, '/');
    T_TRUE(slash != NULL);
    T_OK_ERR(
        parse(&cfg, "destination", "{\"catalog\": {\"warehouse\": \"../up//wh/./x/..\"}}", &err),
        &err);
    snprintf(want, sizeof(want), "file://%.*s/up/wh", (int)(slash - cwd), cwd);
    T_EQ_STR(cfg.destination.catalog.warehouse, want);
    firn_config_free(&cfg);
    T_OK_ERR(parse(&cfg, "destination", "{\"catalog\": {\"warehouse\": \"/a/../../b/\"}}", &err),
             &err);
    T_EQ_STR(cfg.destination.catalog.warehouse, "file:///b");
    firn_config_free(&cfg);
}

/* A chunk_size under 8 MiB is taken, with a warning that the backfill then writes many small
 * files; the default and larger sizes say nothing. */
T_TEST(small_chunk_size_warns)
{
    static const char *base = "{\"host\": \"h\", \"database\": \"d\", \"username\": \"u\"";
    char text[256];
    firn_config cfg = {0};
    firn_err err = {0};
    snprintf(text, sizeof(text), "%s, \"chunk_size\": \"1MiB\"}", base);
    T_OK_ERR(parse(&cfg, "source", text, &err), &err);
    T_EQ_UINT(cfg.source.chunk_bytes, 1u << 20);
    T_EQ_UINT(cfg.warnings.count, 1);
    T_EQ_STR(cfg.warnings.items[0],
             "source.json: \"chunk_size\" is 1048576 bytes: the backfill writes at least one data "
             "file per chunk (a 1 GiB table: about 1024 files, each opened by every reader); 8MiB "
             "or more keeps the files few (default 64MiB)");
    firn_config_free(&cfg);
    const char *quiet[] = {"}", ", \"chunk_size\": \"8MiB\"}", ", \"chunk_size\": \"1GiB\"}"};
    for (size_t i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++) {
        snprintf(text, sizeof(text), "%s%s", base, quiet[i]);
        T_OK_ERR(parse(&cfg, "source", text, &err), &err);
        T_EQ_UINT(cfg.warnings.count, 0);
        firn_config_free(&cfg);
    }
}

T_TEST(streams_round_trip)
{
    set_test_env();
    firn_config cfg = {0};
    firn_err err = {0};
    firn_config_paths paths = {.streams = DATA "olake_streams.json"};
    T_OK_ERR(firn_config_load(&paths, &cfg, &err), &err);
    char *dir = temp_dir();
    char path[256];
    snprintf(path, sizeof(path), "%s/streams.json", dir);
    T_OK_ERR(firn_streams_save(&cfg.streams, path, &err), &err);
    firn_config again = {0};
    firn_config_paths p2 = {.streams = path};
    T_OK_ERR(firn_config_load(&p2, &again, &err), &err);
    T_EQ_UINT(again.streams.count, cfg.streams.count);
    for (size_t i = 0; i < cfg.streams.count; i++) {
        const firn_stream_config *a = &cfg.streams.items[i];
        const firn_stream_config *b = firn_streams_find(&again.streams, a->namespace, a->name);
        T_TRUE(b != NULL);
        T_EQ_INT(a->selected, b->selected);
        T_EQ_INT(a->sync_mode, b->sync_mode);
        T_EQ_INT(a->append_mode, b->append_mode);
        T_EQ_UINT(a->partition_count, b->partition_count);
        for (size_t j = 0; j < a->partition_count; j++) {
            T_EQ_STR(a->partition[j].column, b->partition[j].column);
            T_EQ_INT(a->partition[j].transform, b->partition[j].transform);
            T_EQ_INT(a->partition[j].param, b->partition[j].param);
        }
        T_EQ_UINT(a->columns.count, b->columns.count);
        T_EQ_STR(a->type_schema, b->type_schema);
    }
    firn_config_free(&again);
    firn_config_free(&cfg);
    unlink(path);
    rmdir(dir);
    firn_free(dir);
}

T_TEST(spec_covers_every_file)
{
    char *text = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_config_spec(NULL, &text, &err), &err);
    json_error_t jerr;
    json_t *all = json_loads(text, 0, &jerr);
    T_TRUE(all != NULL);
    static const char *const files[] = {"source", "destination", "streams", "state"};
    for (size_t i = 0; i < 4; i++) {
        json_t *s = json_object_get(all, files[i]);
        T_TRUE(json_is_object(s));
        T_EQ_STR(json_string_value(json_object_get(s, "$schema")),
                 "https://json-schema.org/draft/2020-12/schema");
        T_TRUE(json_is_false(json_object_get(s, "additionalProperties")));
    }
    json_t *writer = json_object_get(
        json_object_get(json_object_get(json_object_get(all, "destination"), "properties"),
                        "writer"),
        "properties");
    T_TRUE(json_object_get(writer, "catalog_type") != NULL);
    T_TRUE(json_is_true(json_object_get(json_object_get(writer, "aws_secret_key"), "writeOnly")));
    json_decref(all);
    firn_free(text);
    T_EQ_INT(firn_config_spec("nope", &text, &err), FIRN_ERR_INVALID);
}

T_TEST(conninfo_and_helpers)
{
    set_test_env();
    firn_config cfg = {0};
    firn_err err = {0};
    T_OK_ERR(parse(&cfg, "source",
                   "{\"host\": \"db\", \"database\": \"d b\", \"username\": \"u\", \"password\": "
                   "\"p'w\\\\x\", \"params\": {\"keepalives\": 1}}",
                   &err),
             &err);
    char *ci = NULL;
    T_OK_ERR(firn_source_conninfo(&cfg.source, true, &ci, &err), &err);
    T_EQ_STR(ci, "host='db' port='5432' dbname='d b' user='u' password='p\\'w\\\\x' "
                 "sslmode='prefer' connect_timeout='10' application_name='firn' "
                 "keepalives='1' replication='database'");
    firn_free(ci);
    firn_config_free(&cfg);
    T_OK_ERR(parse(&cfg, "source", "{\"uri\": \"postgresql://a@h2:7000/x?sslmode=require\"}", &err),
             &err);
    T_OK_ERR(firn_source_conninfo(&cfg.source, false, &ci, &err), &err);
    T_TRUE(strstr(ci, "host='h2'") && strstr(ci, "port='7000'") && strstr(ci, "dbname='x'"));
    firn_free(ci);
    firn_config_free(&cfg);

    uint64_t n = 0;
    T_OK(firn_size_parse("64MiB", &n, &err));
    T_EQ_UINT(n, 64u << 20);
    T_OK(firn_size_parse("2 GB", &n, &err));
    T_EQ_UINT(n, 2000000000u);
    T_EQ_INT(firn_size_parse("12 parsecs", &n, &err), FIRN_ERR_PARSE);
    uint64_t lsn = 0;
    T_OK(firn_lsn_parse("16/B374D848", &lsn, &err));
    char text[18];
    firn_lsn_format(lsn, text);
    T_EQ_STR(text, "16/B374D848");
    T_EQ_INT(firn_lsn_parse("16-B3", &lsn, &err), FIRN_ERR_PARSE);
    T_EQ_STR(firn_sync_mode_olake_name(FIRN_SYNC_CDC_ONLY), "strict_cdc");
    T_EQ_STR(firn_sync_mode_name(FIRN_SYNC_FULL_REFRESH_CDC), "full_refresh_cdc");
}

/* firn status: sizes and ages as people read them, at every magnitude and unit boundary. */
T_TEST(size_and_duration_text)
{
    static const struct {
        uint64_t bytes;
        const char *text;
    } sizes[] = {{0, "0 bytes"},
                 {1, "1 byte"},
                 {2, "2 bytes"},
                 {1023, "1023 bytes"},
                 {1024, "1.0 KiB"},
                 {1535, "1.5 KiB"},
                 {1536, "1.5 KiB"},
                 {1024 * 1024 - 52, "1023.9 KiB"},
                 {1024 * 1024 - 51, "1.0 MiB"}, /* rounds to 1024.0 KiB: the next unit */
                 {(uint64_t)(2.25 * 1024 * 1024), "2.3 MiB"},
                 {(64ull << 20) + 1, "64.0 MiB"},
                 {(1ull << 30) * 1023 + (1ull << 30) * 9 / 10, "1023.9 GiB"},
                 {5ull << 40, "5.0 TiB"},
                 {3ull << 50, "3.0 PiB"},
                 {UINT64_MAX, "16.0 EiB"}};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char size[FIRN_SIZE_TEXT_MAX];
        firn_size_format(sizes[i].bytes, size);
        T_EQ_STR(size, sizes[i].text);
    }
    static const struct {
        int64_t seconds;
        const char *text;
    } ages[] = {{-5, "0s"},
                {0, "0s"},
                {1, "1s"},
                {59, "59s"},
                {60, "1m 0s"},
                {65, "1m 5s"},
                {3599, "59m 59s"},
                {3600, "1h 0m"},
                {86399, "23h 59m"},
                {86400, "1d 0h"},
                {3 * 86400 + 4 * 3600 + 59, "3d 4h"},
                {INT64_MAX, "106751991167300d 15h"}};
    for (size_t i = 0; i < sizeof(ages) / sizeof(ages[0]); i++) {
        char age[FIRN_DURATION_TEXT_MAX];
        firn_duration_format(ages[i].seconds, age);
        T_EQ_STR(age, ages[i].text);
    }
}

/* DELETES.md §5.1: the declared readers choose the format; explicit settings win. */
static void expect_format(
    const char *dest_json, int version, firn_delete_mode mode, const char *why, const char *warning)
{
    char text[512];
    snprintf(text, sizeof(text), "{\"catalog\": {\"warehouse\": \"/w\"}%s}", dest_json);
    firn_config cfg = {0};
    firn_err err = {0};
    T_OK_ERR(parse(&cfg, "destination", text, &err), &err);
    T_EQ_INT(cfg.destination.format_version, version);
    T_EQ_INT(cfg.destination.delete_mode, mode);
    T_EQ_STR(cfg.destination.format_reason, why);
    if (warning) {
        T_EQ_UINT(cfg.warnings.count, 1);
        T_TRUE(strstr(cfg.warnings.items[0], warning) != NULL);
    } else {
        T_EQ_UINT(cfg.warnings.count, 0);
    }
    firn_config_free(&cfg);
}

T_TEST(readers_choose_format)
{
    expect_format("", 2, FIRN_DELETE_POSITION, "default reader bigquery lacks GA v3 support", NULL);
    expect_format(
        ", \"readers\": [\"spark\", \"duckdb\", \"pyiceberg\"]", 3, FIRN_DELETE_DELETION_VECTOR,
        "every declared reader (spark, duckdb and pyiceberg) reads v3 deletion vectors", NULL);
    expect_format(", \"readers\": [\"trino\", \"snowflake\", \"databricks\"]", 3,
                  FIRN_DELETE_DELETION_VECTOR,
                  "every declared reader (trino, snowflake and databricks) reads v3 deletion "
                  "vectors",
                  NULL);
    expect_format(", \"readers\": [\"spark\", \"athena\", \"bigquery\"]", 2, FIRN_DELETE_POSITION,
                  "declared readers bigquery and athena lack GA v3 support", NULL);
    expect_format(", \"readers\": [\"databricks\", \"athena\"]", 2, FIRN_DELETE_POSITION,
                  "declared reader athena lacks GA v3 support",
                  "databricks does not apply format v2 position deletes");
    expect_format(", \"readers\": [\"bigquery\", \"spark\"], \"format_version\": 3", 3,
                  FIRN_DELETE_DELETION_VECTOR, "\"format_version\" 3 is set",
                  "format version 3: bigquery does not read v3 deletion vectors (or only in "
                  "preview)");
    expect_format(", \"readers\": [\"spark\"], \"format_version\": 2", 2, FIRN_DELETE_POSITION,
                  "\"format_version\" 2 is set", NULL);
    expect_format(", \"readers\": [\"spark\"], \"delete_mode\": \"position\"", 2,
                  FIRN_DELETE_POSITION, "\"delete_mode\" \"position\" is set", NULL);
    expect_format(", \"delete_mode\": \"deletion_vector\"", 3, FIRN_DELETE_DELETION_VECTOR,
                  "\"delete_mode\" \"deletion_vector\" is set", "bigquery does not read v3");
    T_CONFIG_ERROR("destination",
                   "{\"catalog\": {\"warehouse\": \"/w\"}, \"format_version\": 2, "
                   "\"delete_mode\": \"deletion_vector\"}",
                   "destination.json: \"delete_mode\" \"deletion_vector\" needs "
                   "\"format_version\" 3");
    T_CONFIG_ERROR("destination",
                   "{\"catalog\": {\"warehouse\": \"/w\"}, \"format_version\": 3, "
                   "\"delete_mode\": \"position\"}",
                   "destination.json: format version 3 writes deletion vectors, not position "
                   "delete files; use \"delete_mode\" \"deletion_vector\"");
}

/* "sqlite:///abs" (firn's README) and SQLAlchemy's "sqlite:////abs" (pyiceberg's SqlCatalog)
 * are the same file, named with one leading slash (it printed "//tmp/..."). */
T_TEST(sqlite_uri_slashes)
{
    const char *uris[] = {"sqlite:///tmp/cat.db", "sqlite:////tmp/cat.db", "/tmp/cat.db"};
    for (size_t i = 0; i < sizeof(uris) / sizeof(uris[0]); i++) {
        char doc[256];
        snprintf(doc, sizeof(doc),
                 "{\"catalog\": {\"type\": \"sql\", \"uri\": \"%s\", \"warehouse\": "
                 "\"/tmp/wh\"}}",
                 uris[i]);
        firn_config cfg = {0};
        firn_err err = {0};
        T_OK_ERR(parse(&cfg, "destination", doc, &err), &err);
        T_EQ_STR(cfg.destination.catalog.uri, "/tmp/cat.db");
        firn_config_free(&cfg);
    }
}

T_MAIN(T_CASE(olake_files_load),
       T_CASE(readers_choose_format),
       T_CASE(olake_two_cursor_keys),
       T_CASE(firn_files_load),
       T_CASE(unknown_keys_name_the_path),
       T_CASE(bad_values_name_path_and_type),
       T_CASE(iceberg_names_checked_at_load),
       T_CASE(required_keys),
       T_CASE(bad_json_and_missing_file),
       T_CASE(env_substitution),
       T_CASE(secrets_stay_out_of_messages),
       T_CASE(aliases_conflict),
       T_CASE(unsupported_olake_choices),
       T_CASE(streams_checks),
       T_CASE(standalone_source_rejects_cdc_streams),
       T_CASE(state_round_trip_atomic),
       T_CASE(state_without_lsn_is_null),
       T_CASE(relative_paths_resolve_against_working_folder),
       T_CASE(small_chunk_size_warns),
       T_CASE(streams_round_trip),
       T_CASE(spec_covers_every_file),
       T_CASE(conninfo_and_helpers),
       T_CASE(size_and_duration_text),
       T_CASE(sqlite_uri_slashes))
