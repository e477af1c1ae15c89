/* SPDX-License-Identifier: Apache-2.0 */
/* Defaults, cross-key checks and normalisation after a file is bound (OLake's jdbc:sqlite: URL
 * becomes the SQL catalog path, slot names default from the database, the readers choose the
 * format version), small container helpers, and the libpq conninfo builder. */
#include "cfg_int.h"
#include "engine_int.h"

#include <ctype.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------------
 * Containers and names
 * ----------------------------------------------------------------------------------------------*/

const char *firn_kvlist_get(const firn_kvlist *l, const char *key)
{
    for (size_t i = 0; i < l->count; i++) {
        if (strcmp(l->items[i].key, key) == 0)
            return l->items[i].value;
    }
    return NULL;
}

void firn__cfg_kvlist_push(firn_kvlist *l, const char *key, const char *value)
{
    l->items = firn_reallocarray(l->items, l->count + 1, sizeof(*l->items));
    l->items[l->count].key = firn_strdup(key);
    l->items[l->count].value = firn_strdup(value);
    l->count++;
}

void firn__cfg_kvlist_clear(firn_kvlist *l)
{
    for (size_t i = 0; i < l->count; i++) {
        firn_free(l->items[i].key);
        firn_free(l->items[i].value);
    }
    firn_free(l->items);
    l->items = NULL;
    l->count = 0;
}

const char *firn_sync_mode_name(firn_sync_mode m)
{
    switch (m) {
    case FIRN_SYNC_FULL_REFRESH:
        return "full_refresh";
    case FIRN_SYNC_FULL_REFRESH_CDC:
        return "full_refresh_cdc";
    case FIRN_SYNC_CDC_ONLY:
        return "cdc_only";
    case FIRN_SYNC_INCREMENTAL:
        return "incremental";
    case FIRN_SYNC_UNSET:
        break;
    }
    return "";
}

const char *firn_sync_mode_olake_name(firn_sync_mode m)
{
    switch (m) {
    case FIRN_SYNC_FULL_REFRESH_CDC:
        return "cdc";
    case FIRN_SYNC_CDC_ONLY:
        return "strict_cdc";
    default:
        return firn_sync_mode_name(m);
    }
}

const char *firn_sslmode_name(firn_sslmode m)
{
    static const char *const names[] = {"disable", "allow",     "prefer",
                                        "require", "verify-ca", "verify-full"};
    return (size_t)m < sizeof(names) / sizeof(names[0]) ? names[m] : "prefer";
}

firn_rc firn_size_parse(const char *text, uint64_t *out_bytes, firn_err *err)
{
    static const struct {
        const char *suffix;
        uint64_t mult;
    } units[] = {{"", 1},
                 {"B", 1},
                 {"KB", 1000},
                 {"KiB", 1024},
                 {"MB", 1000 * 1000},
                 {"MiB", 1024 * 1024},
                 {"GB", 1000ull * 1000 * 1000},
                 {"GiB", 1024ull * 1024 * 1024},
                 {"TB", 1000ull * 1000 * 1000 * 1000},
                 {"TiB", 1024ull * 1024 * 1024 * 1024}};
    size_t digits = 0;
    while (isdigit((unsigned char)text[digits]))
        digits++;
    const char *suffix = text + digits;
    while (*suffix == ' ')
        suffix++;
    uint64_t n = 0;
    firn_err perr = {0};
    if (digits == 0 || firn_parse_u64(text, digits, &n, &perr))
        return firn_err_set(err, FIRN_ERR_PARSE, "invalid size \"%.40s\"", text);
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(suffix, units[i].suffix) != 0)
            continue;
        if (n > UINT64_MAX / units[i].mult)
            break;
        *out_bytes = n * units[i].mult;
        return FIRN_OK;
    }
    return firn_err_set(err, FIRN_ERR_PARSE, "invalid size \"%.40s\"", text);
}

void firn_size_format(uint64_t bytes, char out[FIRN_SIZE_TEXT_MAX])
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    const size_t n_units = sizeof(units) / sizeof(units[0]);
    if (bytes < 1024) {
        snprintf(out, FIRN_SIZE_TEXT_MAX, "%u byte%s", (unsigned)bytes, bytes == 1 ? "" : "s");
        return;
    }
    size_t u = 0;
    uint64_t unit = 1024;
    while (u + 1 < n_units && bytes / unit >= 1024) {
        unit <<= 10;
        u++;
    }
    uint64_t whole = bytes / unit;
    /* The remainder is below 2^60, so ten of it and a half unit stay within 64 bits. */
    uint64_t tenths = ((bytes % unit) * 10 + unit / 2) / unit;
    if (tenths == 10) {
        whole++;
        tenths = 0;
    }
    if (whole == 1024 && u + 1 < n_units) { /* 1023.95 KiB rounds to 1.0 MiB, not 1024.0 KiB */
        whole = 1;
        u++;
    }
    snprintf(out, FIRN_SIZE_TEXT_MAX, "%u.%u %s", (unsigned)whole, (unsigned)tenths, units[u]);
}

void firn_duration_format(int64_t seconds, char out[FIRN_DURATION_TEXT_MAX])
{
    const int64_t s = seconds > 0 ? seconds : 0;
    if (s < 60)
        snprintf(out, FIRN_DURATION_TEXT_MAX, "%ds", (int)s);
    else if (s < 3600)
        snprintf(out, FIRN_DURATION_TEXT_MAX, "%dm %ds", (int)(s / 60), (int)(s % 60));
    else if (s < 86400)
        snprintf(out, FIRN_DURATION_TEXT_MAX, "%dh %dm", (int)(s / 3600), (int)(s % 3600 / 60));
    else
        snprintf(out, FIRN_DURATION_TEXT_MAX, "%lldd %dh", (long long)(s / 86400),
                 (int)(s % 86400 / 3600));
}

/* ------------------------------------------------------------------------------------------------
 * Freeing
 * ----------------------------------------------------------------------------------------------*/

void firn__cfg_source_free(firn_source_config *s)
{
    char **strs[] = {&s->host,        &s->database, &s->username, &s->password, &s->uri,
                     &s->sslrootcert, &s->sslcert,  &s->sslkey,   &s->slot,     &s->publication};
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
        firn_free(*strs[i]);
    firn__cfg_kvlist_clear(&s->params);
    firn_strlist_clear(&s->schemas);
    memset(s, 0, sizeof(*s));
}

void firn__cfg_destination_free(firn_destination_config *d)
{
    firn_catalog_config *c = &d->catalog;
    firn_storage_config *st = &d->storage;
    char **strs[] = {&c->name,
                     &c->uri,
                     &c->warehouse,
                     &c->prefix,
                     &c->token,
                     &c->credential,
                     &c->oauth2_server_uri,
                     &c->scope,
                     &c->google_credentials_file,
                     &c->project_id,
                     &c->sigv4_region,
                     &c->sigv4_service,
                     &st->endpoint,
                     &st->region,
                     &st->access_key_id,
                     &st->secret_access_key,
                     &st->session_token,
                     &d->namespace_pattern,
                     &d->log,
                     &d->metrics_listen,
                     &d->index_dir,
                     &d->format_reason};
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
        firn_free(*strs[i]);
    firn__cfg_kvlist_clear(&c->headers);
    firn__cfg_kvlist_clear(&c->properties);
    firn__cfg_kvlist_clear(&d->table_properties);
    memset(d, 0, sizeof(*d));
}

void firn__cfg_stream_free(firn_stream_config *s)
{
    char **strs[] = {&s->namespace,        &s->name,         &s->cursor_field, &s->cursor_fallback,
                     &s->target_namespace, &s->target_table, &s->filter,       &s->type_schema,
                     &s->selection};
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
        firn_free(*strs[i]);
    firn_strlist *lists[] = {&s->primary_key,          &s->source_primary_key,      &s->columns,
                             &s->supported_sync_modes, &s->available_cursor_fields, &s->notes};
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
        firn_strlist_clear(lists[i]);
    for (size_t i = 0; i < s->partition_count; i++)
        firn_free(s->partition[i].column);
    firn_free(s->partition);
    memset(s, 0, sizeof(*s));
}

/* ------------------------------------------------------------------------------------------------
 * source.json
 * ----------------------------------------------------------------------------------------------*/

void firn__cfg_source_defaults(firn_source_config *s)
{
    s->port = 5432;
    s->sslmode = FIRN_SSL_PREFER;
    s->initial_wait_ms = 10 * 1000;
    s->replication_timeout_ms = 60 * 1000;
    s->reconnect_timeout_ms = 300 * 1000;
    s->parallelism = 4;
    s->chunk_bytes = 64u << 20;
    s->batch_rows = 65536;
    s->connect_timeout_ms = 10 * 1000;
    s->default_mode = FIRN_SYNC_FULL_REFRESH_CDC;
}

static const char *seen_path(const cfg_ctx *ctx, const void *addr, const char *fallback)
{
    for (size_t i = 0; i < ctx->n_seen; i++) {
        if (ctx->seen[i].addr == addr)
            return ctx->seen[i].path;
    }
    return fallback;
}

/* An empty string given for a key (NULL: not given) is an error naming the key. */
static firn_rc not_empty(cfg_ctx *ctx, char *const *value, const char *key, firn_err *err)
{
    if (!*value || **value)
        return FIRN_OK;
    return firn__cfg_fail(ctx, err, "\"%s\" must not be empty", seen_path(ctx, value, key));
}

/* "firn_" + the database name folded to [a-z0-9_] (slot names allow nothing else). */
static char *default_object_name(const char *database)
{
    char buf[64];
    int n = snprintf(buf, sizeof(buf), "firn_%s", database ? database : "");
    if (!database || n < 0)
        return firn_strdup("firn");
    for (char *p = buf; *p; p++) {
        *p = (char)tolower((unsigned char)*p);
        if (!isalnum((unsigned char)*p) && *p != '_')
            *p = '_';
    }
    return firn_strdup(buf);
}

/* Below this chunk_size the backfill's files get small: each chunk writes its own (at least
 * one per chunk that has rows, eng_backfill.c), so readers open many. */
#define CHUNK_WARN_BYTES ((uint64_t)8 << 20)

bool firn_source_is_mysql(const firn_source_config *src)
{
    return src->type == FIRN_SOURCE_MYSQL || src->type == FIRN_SOURCE_MARIADB;
}

/* MySQL/MariaDB: no URI, no PostgreSQL-only keys, port 3306 unless given. */
static firn_rc mysql_source_post(cfg_ctx *ctx, firn_source_config *s, firn_err *err)
{
    if (!firn__cfg_was_set(ctx, &s->port))
        s->port = 3306;
    if (!firn__cfg_was_set(ctx, &s->default_mode))
        s->default_mode = FIRN_SYNC_FULL_REFRESH; /* binlog CDC is not built yet */
    if (s->uri)
        return firn__cfg_fail(ctx, err,
                              "\"uri\" is for PostgreSQL sources; give a MySQL source \"host\", "
                              "\"port\", \"database\" and \"username\"");
    if (s->slot || s->publication)
        return firn__cfg_fail(ctx, err,
                              "\"%s\" is a PostgreSQL setting; a MySQL source reads the binlog "
                              "(set \"server_id\" instead)",
                              s->slot ? seen_path(ctx, &s->slot, "slot")
                                      : seen_path(ctx, &s->publication, "publication"));
    if (!s->host)
        return firn__cfg_fail(ctx, err, "missing required key \"host\"");
    if (!s->database)
        return firn__cfg_fail(ctx, err, "missing required key \"database\"");
    if (!s->username)
        return firn__cfg_fail(ctx, err, "missing required key \"username\"");
    if (strstr(s->host, "://") || strchr(s->host, '/'))
        return firn__cfg_fail(ctx, err, "\"host\" must be a host name or address, not a URL");
    FIRN_TRY(not_empty(ctx, &s->host, "host", err));
    FIRN_TRY(not_empty(ctx, &s->database, "database", err));
    FIRN_TRY(not_empty(ctx, &s->username, "username", err));
    if (s->sslmode == FIRN_SSL_ALLOW)
        s->sslmode = FIRN_SSL_PREFER; /* MySQL has no "allow": it is "preferred" */
    if (s->params.count)
        firn__cfg_warn(ctx,
                       "\"%s\" is not used by MySQL sources (libmariadb takes no such "
                       "parameters); it is ignored",
                       seen_path(ctx, &s->params, "params"));
    s->slot = firn_strdup("firn");
    s->publication = firn_strdup("firn");
    return FIRN_OK;
}

firn_rc firn__cfg_source_post(cfg_ctx *ctx, firn_source_config *s, firn_err *err)
{
    if (firn_source_is_mysql(s))
        return mysql_source_post(ctx, s, err);
    if (firn__cfg_was_set(ctx, &s->chunk_bytes) && s->chunk_bytes > 0 &&
        s->chunk_bytes < CHUNK_WARN_BYTES)
        firn__cfg_warn(ctx,
                       "\"%s\" is %llu bytes: the backfill writes at least one data file per "
                       "chunk (a 1 GiB table: about %llu files, each opened by every reader); "
                       "8MiB or more keeps the files few (default 64MiB)",
                       seen_path(ctx, &s->chunk_bytes, "chunk_size"),
                       (unsigned long long)s->chunk_bytes,
                       (unsigned long long)((1ull << 30) / s->chunk_bytes));
    if (!s->host && !s->uri)
        return firn__cfg_fail(ctx, err, "missing required key \"host\" (or \"uri\")");
    if (!s->database && !s->uri)
        return firn__cfg_fail(ctx, err, "missing required key \"database\"");
    if (!s->username && !s->uri)
        return firn__cfg_fail(ctx, err, "missing required key \"username\"");
    if (s->uri && !(strncmp(s->uri, "postgres://", 11) == 0 ||
                    strncmp(s->uri, "postgresql://", 13) == 0 || strchr(s->uri, '=')))
        return firn__cfg_fail(ctx, err,
                              "\"uri\" must be a postgresql:// URI or a key=value conninfo");
    if (s->host && (strstr(s->host, "://") || strchr(s->host, '/')))
        return firn__cfg_fail(ctx, err, "\"host\" must be a host name or address, not a URL");
    /* libpq reads an empty value as "not given": a socket in /var/run/postgresql, the OS user's
     * name as role and database. */
    FIRN_TRY(not_empty(ctx, &s->host, "host", err));
    FIRN_TRY(not_empty(ctx, &s->database, "database", err));
    FIRN_TRY(not_empty(ctx, &s->username, "username", err));
    s->slot_given = s->slot != NULL;
    s->publication_given = s->publication != NULL;
    if (!s->slot)
        s->slot = default_object_name(s->database);
    if (!s->publication)
        s->publication = default_object_name(s->database);
    if (!firn__cfg_was_set(ctx, &s->create_slot))
        s->create_slot = !s->slot_given;
    if (!firn__cfg_was_set(ctx, &s->create_publication))
        s->create_publication = !s->publication_given;
    if (s->update_method == FIRN_UPDATE_CDC && !s->slot_given)
        return firn__cfg_fail(ctx, err, "missing required key \"update_method.replication_slot\"");
    /* PostgreSQL cuts longer names to 63 bytes: the publication firn would look for is not the
     * one the server creates. */
    if (!s->publication[0] || strlen(s->publication) > 63)
        return firn__cfg_fail(ctx, err, "\"%s\": a publication name has 1 to 63 bytes",
                              seen_path(ctx, &s->publication, "publication"));
    /* PostgreSQL's rule for slot names; it also keeps them out of harm in SQL text. */
    const size_t n = strlen(s->slot);
    if (n == 0 || n > 63 || strspn(s->slot, "abcdefghijklmnopqrstuvwxyz0123456789_") != n)
        return firn__cfg_fail(ctx, err,
                              "\"%s\": a replication slot name has 1 to 63 characters, each a "
                              "lower-case letter, a digit or '_'",
                              seen_path(ctx, &s->slot, "slot"));
    return FIRN_OK;
}

static firn_rc append_conninfo(firn_buf *b, const char *key, const char *value)
{
    if (!value)
        return FIRN_OK;
    FIRN_TRY(firn_buf_appendf(b, "%s%s='", b->len ? " " : "", key));
    for (const char *p = value; *p; p++) {
        if (*p == '\'' || *p == '\\')
            FIRN_TRY(firn_buf_append(b, "\\", 1));
        FIRN_TRY(firn_buf_append(b, p, 1));
    }
    return firn_buf_append(b, "'", 1);
}

static firn_rc append_uri_options(firn_buf *b, const char *uri, firn_err *err)
{
    char *errmsg = NULL;
    PQconninfoOption *opts = PQconninfoParse(uri, &errmsg);
    if (!opts) {
        if (errmsg)
            PQfreemem(errmsg);
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "source \"uri\" is not a valid connection "
                            "string");
    }
    firn_rc rc = FIRN_OK;
    for (PQconninfoOption *o = opts; o->keyword && rc == FIRN_OK; o++) {
        if (o->val && o->val[0])
            rc = append_conninfo(b, o->keyword, o->val);
    }
    PQconninfoFree(opts);
    return rc;
}

static firn_rc
build_conninfo(firn_buf *b, const firn_source_config *src, bool replication, firn_err *err)
{
    char num[32];
    if (src->uri)
        FIRN_TRY(append_uri_options(b, src->uri, err));
    FIRN_TRY(append_conninfo(b, "host", src->host));
    snprintf(num, sizeof(num), "%lld", (long long)src->port);
    FIRN_TRY(append_conninfo(b, "port", src->uri && src->port == 5432 ? NULL : num));
    FIRN_TRY(append_conninfo(b, "dbname", src->database));
    FIRN_TRY(append_conninfo(b, "user", src->username));
    FIRN_TRY(append_conninfo(b, "password", src->password));
    FIRN_TRY(append_conninfo(b, "sslmode", firn_sslmode_name(src->sslmode)));
    FIRN_TRY(append_conninfo(b, "sslrootcert", src->sslrootcert));
    FIRN_TRY(append_conninfo(b, "sslcert", src->sslcert));
    FIRN_TRY(append_conninfo(b, "sslkey", src->sslkey));
    snprintf(num, sizeof(num), "%lld", (long long)((src->connect_timeout_ms + 999) / 1000));
    FIRN_TRY(append_conninfo(b, "connect_timeout", src->connect_timeout_ms ? num : NULL));
    if (!firn_kvlist_get(&src->params, "application_name"))
        FIRN_TRY(append_conninfo(b, "application_name", "firn"));
    for (size_t i = 0; i < src->params.count; i++)
        FIRN_TRY(append_conninfo(b, src->params.items[i].key, src->params.items[i].value));
    if (replication)
        FIRN_TRY(append_conninfo(b, "replication", "database"));
    return FIRN_OK;
}

firn_rc firn_source_conninfo(const firn_source_config *src,
                             bool replication,
                             char **out_conninfo,
                             firn_err *err)
{
    firn_buf b;
    firn_buf_init(&b, 8192);
    firn_rc rc = build_conninfo(&b, src, replication, err);
    if (rc) {
        firn_buf_deinit(&b);
        if (rc == FIRN_ERR_TOO_LARGE)
            return firn_err_set(err, rc, "source connection string is longer than 8 KiB");
        return rc;
    }
    *out_conninfo = (char *)firn_buf_take(&b, NULL);
    return FIRN_OK;
}

/* ------------------------------------------------------------------------------------------------
 * destination.json
 * ----------------------------------------------------------------------------------------------*/

void firn__cfg_destination_defaults(firn_destination_config *d)
{
    d->catalog.kind = FIRN_CATALOG_SQL;
    d->storage.use_ssl = true;
    d->compression = FIRN_CODEC_ZSTD;
    d->target_file_bytes = 128u << 20;
    d->row_group_bytes = 64u << 20;
    d->page_bytes = 1u << 20;
    d->identifier_fields = true;
    d->metadata_columns = true;
    d->commit.interval_ms = 10 * 1000;
    d->commit.max_bytes = 64u << 20;
    d->commit_retry_timeout_ms = -1;
    d->commit_retry_max_wait_ms = 60 * 1000;
    d->memory_limit_bytes = 1ull << 30;
    d->index_memory_limit_bytes = 128u << 20;
    d->consolidate_deletes_after = 8;
    d->persist_key_index = true;
    d->persist_key_index_interval_ms = 600 * 1000;
    d->compact_small_files = 8;
    d->compact_delete_percent = 20;
    d->maintenance.expire_snapshots = true;
    d->maintenance.snapshot_max_age_ms = 86400 * 1000;
    d->maintenance.min_snapshots_to_keep = 10;
}

/* Drops the empty and "." segments of absolute path p and resolves its ".." segments, in place
 * (lexically: a table location must have neither, eng_table.c check_location). */
static void clean_path(char *p)
{
    size_t o = 0, i = 0;
    while (p[i]) {
        while (p[i] == '/')
            i++;
        size_t n = strcspn(p + i, "/");
        if (n == 0 || (n == 1 && p[i] == '.')) {
            i += n;
            continue;
        }
        if (n == 2 && p[i] == '.' && p[i + 1] == '.') {
            while (o > 0 && p[o - 1] != '/')
                o--;
            o -= o > 0; /* the '/' before the dropped segment */
            i += n;
            continue;
        }
        p[o++] = '/';
        memmove(p + o, p + i, n);
        o += n;
        i += n;
    }
    if (o == 0)
        p[o++] = '/';
    p[o] = '\0';
}

/* A local path or file:// URL as an absolute file:// URL; NULL for other schemes. A relative
 * path is taken from the working folder, "." and ".." segments resolved. */
static char *file_url(const char *loc)
{
    char cwd[4096];
    char path[8300], buf[8320];
    if (strncmp(loc, "file://", 7) == 0)
        return firn_strdup(loc);
    if (strstr(loc, "://"))
        return NULL;
    if (loc[0] == '/')
        snprintf(path, sizeof(path), "%s", loc);
    else if (getcwd(cwd, sizeof(cwd)))
        snprintf(path, sizeof(path), "%s/%s", cwd, loc);
    else
        return NULL;
    clean_path(path);
    snprintf(buf, sizeof(buf), "file://%s", path);
    return firn_strdup(buf);
}

/* The SQL catalog's SQLite file from "path", "sqlite:///path" or OLake's "jdbc:sqlite:path". */
static firn_rc normalize_sql_uri(cfg_ctx *ctx, firn_destination_config *d, firn_err *err)
{
    firn_catalog_config *c = &d->catalog;
    const char *key = seen_path(ctx, &c->uri, "catalog.uri");
    if (!c->uri) {
        if (strncmp(c->warehouse, "file://", 7) != 0)
            return firn__cfg_fail(ctx, err,
                                  "missing required key \"catalog.uri\" (the SQLite "
                                  "file of the catalog)");
        char buf[8300];
        snprintf(buf, sizeof(buf), "%s/firn_catalog.db", c->warehouse + 7);
        c->uri = firn_strdup(buf);
        return FIRN_OK;
    }
    const char *p = c->uri;
    if (strncmp(p, "jdbc:", 5) == 0)
        p += 5;
    if (strncmp(p, "sqlite:", 7) == 0) {
        p += 7;
        if (strncmp(p, "//", 2) == 0)
            p += 2;
        while (p[0] == '/' && p[1] == '/') /* SQLAlchemy's "sqlite:////abs" (pyiceberg) */
            p++;
    } else if (strstr(p, "://") || strncmp(c->uri, "jdbc:", 5) == 0) {
        return firn__cfg_fail(ctx, err,
                              "\"%s\": only SQLite catalogs are supported (jdbc:sqlite:PATH); "
                              "use an Iceberg REST catalog for others",
                              key);
    }
    if (*p == '\0')
        return firn__cfg_fail(ctx, err, "\"%s\": empty SQLite path", key);
    char *path = firn_strdup(p);
    firn_free(c->uri);
    c->uri = path;
    return FIRN_OK;
}

static firn_rc check_rest(cfg_ctx *ctx, firn_destination_config *d, firn_err *err)
{
    firn_catalog_config *c = &d->catalog;
    if (!c->uri)
        return firn__cfg_fail(ctx, err,
                              "missing required key \"catalog.uri\" (the REST "
                              "catalog's URL)");
    if (strncmp(c->uri, "http://", 7) != 0 && strncmp(c->uri, "https://", 8) != 0)
        return firn__cfg_fail(ctx, err, "\"%s\" must be an http:// or https:// URL",
                              seen_path(ctx, &c->uri, "catalog.uri"));
    if (!firn__cfg_was_set(ctx, &c->auth) && c->auth == FIRN_REST_AUTH_NONE)
        c->auth = c->credential ? FIRN_REST_AUTH_OAUTH2
                                : (c->token ? FIRN_REST_AUTH_BEARER : FIRN_REST_AUTH_NONE);
    if (c->auth == FIRN_REST_AUTH_BEARER && !c->token)
        return firn__cfg_fail(ctx, err, "catalog auth \"bearer\" needs \"catalog.token\"");
    if (c->auth == FIRN_REST_AUTH_OAUTH2 && !c->credential)
        return firn__cfg_fail(ctx, err, "catalog auth \"oauth2\" needs \"catalog.credential\"");
    if (c->auth == FIRN_REST_AUTH_SIGV4) {
        if (!c->sigv4_region && d->storage.region)
            c->sigv4_region = firn_strdup(d->storage.region);
        if (!c->sigv4_region)
            return firn__cfg_fail(ctx, err,
                                  "catalog auth \"sigv4\" needs "
                                  "\"catalog.sigv4_region\"");
        if (!c->sigv4_service)
            c->sigv4_service = firn_strdup("execute-api");
    }
    return FIRN_OK;
}

const char *firn__cfg_iceberg_name_problem(const char *name, bool dotted)
{
    size_t n = strlen(name);
    if (n > FIRN_CFG_NAME_MAX)
        return "is longer than 255 bytes";
    if (dotted && (name[0] == '.' || name[n - 1] == '.' || strstr(name, "..")))
        return "is no Iceberg namespace: levels are joined by single dots and none may be empty";
    return NULL;
}

bool firn_destination_is_biglake(const firn_destination_config *d)
{
    const char *uri = d->catalog.uri ? d->catalog.uri : "";
    const char *wh = d->catalog.warehouse ? d->catalog.warehouse : "";
    return d->catalog.kind == FIRN_CATALOG_REST &&
           (strstr(uri, "biglake.googleapis.com") != NULL || strncmp(wh, "bl://", 5) == 0);
}

static bool namespace_pattern_ok(const char *p)
{
    while ((p = strchr(p, '{'))) {
        if (strncmp(p, "{database}", 10) == 0)
            p += 10;
        else if (strncmp(p, "{schema}", 8) == 0)
            p += 8;
        else
            return false;
    }
    return true;
}

/* DELETES.md §5.1: engines with GA support for format v3 and deletion vectors (Spark with the
 * Iceberg 1.8+ runtime, Trino 480+, DuckDB 1.5+, Snowflake, Databricks, pyiceberg 0.10+), and
 * the reader set assumed when none is declared. docs/configuration.md keeps both lists. */
#define GA_V3_READERS                                                                              \
    (FIRN_READER_SPARK | FIRN_READER_TRINO | FIRN_READER_DUCKDB | FIRN_READER_SNOWFLAKE |          \
     FIRN_READER_DATABRICKS | FIRN_READER_PYICEBERG)
#define DEFAULT_READERS                                                                            \
    (FIRN_READER_BIGQUERY | FIRN_READER_SPARK | FIRN_READER_TRINO | FIRN_READER_DUCKDB |           \
     FIRN_READER_PYICEBERG)

static const char *const READER_NAMES[] = {"bigquery",  "spark",     "trino",      "duckdb",
                                           "pyiceberg", "snowflake", "databricks", "athena",
                                           "flink",     "starrocks", "clickhouse", "dremio"};

/* "a, b and c" of the reader bits in set. */
static void reader_list(uint32_t set, char *out, size_t cap)
{
    size_t n = 0, total = (size_t)__builtin_popcount(set), o = 0;
    out[0] = 0;
    for (size_t i = 0; i < sizeof(READER_NAMES) / sizeof(READER_NAMES[0]); i++) {
        if (!(set & (1u << i)))
            continue;
        const char *sep = n == 0 ? "" : (n + 1 == total ? " and " : ", ");
        int w = snprintf(out + o, cap - o, "%s%s", sep, READER_NAMES[i]);
        if (w < 0 || (size_t)w >= cap - o)
            return;
        o += (size_t)w;
        n++;
    }
}

/* Sets format_version from the readers (explicit values win) and format_reason. */
static void derive_version(cfg_ctx *ctx, firn_destination_config *d, bool explicit_version)
{
    uint32_t readers = d->readers ? d->readers : DEFAULT_READERS;
    uint32_t not_v3 = readers & ~(uint32_t)GA_V3_READERS;
    char all[160], older[160];
    reader_list(readers, all, sizeof(all));
    reader_list(not_v3, older, sizeof(older));
    const char *whose = d->readers ? "declared" : "default";
    char why[512];
    if (explicit_version) {
        snprintf(why, sizeof(why), "\"format_version\" %d is set", (int)d->format_version);
    } else if (d->delete_mode == FIRN_DELETE_DELETION_VECTOR) {
        d->format_version = 3;
        snprintf(why, sizeof(why), "\"delete_mode\" \"deletion_vector\" is set");
    } else if (d->delete_mode == FIRN_DELETE_POSITION) {
        d->format_version = 2;
        snprintf(why, sizeof(why), "\"delete_mode\" \"position\" is set");
    } else if (not_v3 == 0) {
        d->format_version = 3;
        snprintf(why, sizeof(why), "every %s reader (%s) reads v3 deletion vectors", whose, all);
    } else {
        d->format_version = 2;
        snprintf(why, sizeof(why), "%s reader%s %s lack%s GA v3 support", whose,
                 __builtin_popcount(not_v3) > 1 ? "s" : "", older,
                 __builtin_popcount(not_v3) > 1 ? "" : "s");
    }
    if (d->format_version == 3 && not_v3)
        firn__cfg_warn(ctx,
                       "format version 3: %s %s not read v3 deletion vectors (or only in "
                       "preview)",
                       older, __builtin_popcount(not_v3) > 1 ? "do" : "does");
    if (d->format_version == 2 && (readers & FIRN_READER_DATABRICKS))
        firn__cfg_warn(ctx, "databricks does not apply format v2 position deletes: deleted and "
                            "updated rows reappear there; declare only v3 readers, or use two "
                            "tables");
    firn_free(d->format_reason);
    d->format_reason = firn_strdup(why);
}

static firn_rc choose_format(cfg_ctx *ctx, firn_destination_config *d, firn_err *err)
{
    derive_version(ctx, d, d->format_version != 0);
    if (d->delete_mode == FIRN_DELETE_AUTO)
        d->delete_mode =
            d->format_version == 3 ? FIRN_DELETE_DELETION_VECTOR : FIRN_DELETE_POSITION;
    if (d->delete_mode == FIRN_DELETE_DELETION_VECTOR && d->format_version < 3)
        return firn__cfg_fail(ctx, err,
                              "\"delete_mode\" \"deletion_vector\" needs "
                              "\"format_version\" 3");
    if (d->delete_mode == FIRN_DELETE_POSITION && d->format_version >= 3)
        return firn__cfg_fail(ctx, err,
                              "format version 3 writes deletion vectors, not position "
                              "delete files; use \"delete_mode\" \"deletion_vector\"");
    return FIRN_OK;
}

firn_rc firn__cfg_destination_post(cfg_ctx *ctx, firn_destination_config *d, firn_err *err)
{
    firn_catalog_config *c = &d->catalog;
    if (!c->warehouse && c->kind == FIRN_CATALOG_SQL)
        return firn__cfg_fail(ctx, err,
                              "missing required key \"catalog.warehouse\" (or OLake's "
                              "\"writer.iceberg_s3_path\")");
    /* An empty warehouse would put the tables in the working folder. */
    if (c->warehouse && (!c->warehouse[0] || strcmp(c->warehouse, "file://") == 0))
        return firn__cfg_fail(ctx, err, "\"%s\" must not be empty",
                              seen_path(ctx, &c->warehouse, "catalog.warehouse"));
    if (c->warehouse && c->kind == FIRN_CATALOG_SQL) {
        char *url = file_url(c->warehouse);
        if (url) {
            firn_free(c->warehouse);
            c->warehouse = url;
        }
        static const char *const SCHEMES[] = {"file://", "s3://", "s3a://", "gs://"};
        bool known = false;
        for (size_t i = 0; i < sizeof(SCHEMES) / sizeof(SCHEMES[0]); i++)
            known |= strncmp(c->warehouse, SCHEMES[i], strlen(SCHEMES[i])) == 0;
        if (!known)
            return firn__cfg_fail(ctx, err,
                                  "\"%s\" \"%.64s\": the SQL catalog's warehouse is a local "
                                  "folder (a path or file://), s3://, s3a:// or gs://",
                                  seen_path(ctx, &c->warehouse, "catalog.warehouse"), c->warehouse);
    }
    if (c->kind == FIRN_CATALOG_SQL)
        FIRN_TRY(normalize_sql_uri(ctx, d, err));
    else
        FIRN_TRY(check_rest(ctx, d, err));
    if (!c->name)
        c->name = firn_strdup("firn");
    if (d->namespace_pattern && !d->namespace_pattern[0])
        return firn__cfg_fail(ctx, err,
                              "\"%s\" must not be empty (leave it out for the default, "
                              "{database}_{schema})",
                              seen_path(ctx, &d->namespace_pattern, "namespace"));
    if (!d->namespace_pattern)
        d->namespace_pattern = firn_strdup("{database}_{schema}");
    if (!namespace_pattern_ok(d->namespace_pattern))
        return firn__cfg_fail(ctx, err,
                              "\"%s\": only {database} and {schema} may appear in "
                              "braces",
                              seen_path(ctx, &d->namespace_pattern, "namespace"));
    const char *why = firn__cfg_iceberg_name_problem(d->namespace_pattern, true);
    if (why)
        return firn__cfg_fail(
            ctx, err, "\"%s\" \"%.64s%s\" %s", seen_path(ctx, &d->namespace_pattern, "namespace"),
            d->namespace_pattern, strlen(d->namespace_pattern) > 64 ? "..." : "", why);
    if (d->maintenance.external) { /* another tool expires and compacts */
        d->maintenance.expire_snapshots = false;
        d->compact_small_files = 0;
        d->compact_delete_percent = 0;
    }
    if (firn_destination_is_biglake(d) && strchr(d->namespace_pattern, '.'))
        return firn__cfg_fail(ctx, err,
                              "\"%s\" \"%.64s\": BigLake takes single-level namespaces only (no "
                              "dots); join the parts with \"_\", e.g. \"{database}_{schema}\"",
                              seen_path(ctx, &d->namespace_pattern, "namespace"),
                              d->namespace_pattern);
    if (!firn__cfg_was_set(ctx, &d->storage.path_style))
        d->storage.path_style = d->storage.endpoint != NULL;
    if (d->index_dir && !d->index_dir[0])
        return firn__cfg_fail(ctx, err,
                              "\"index_dir\" must not be empty (leave it out for the default, "
                              "~/.cache/firn)");
    if (d->metrics_listen) {
        firn_err lerr = {0};
        if (firn__metrics_listen_check("\"metrics_listen\"", d->metrics_listen, &lerr))
            return firn__cfg_fail(ctx, err, "%s", lerr.msg);
    }
    if (d->commit.interval_ms <= 0)
        return firn__cfg_fail(ctx, err, "\"commit.interval_seconds\" must be greater than 0");
    if (d->commit_retry_max_wait_ms < 100)
        return firn__cfg_fail(ctx, err, "\"commit.retry_max_wait_seconds\" must be at least 0.1");
    if (d->commit.max_bytes < 1024)
        return firn__cfg_fail(ctx, err, "\"commit.max_bytes\" must be at least 1KiB");
    if (d->compression == FIRN_CODEC_GZIP && d->compression_level > 9)
        return firn__cfg_fail(ctx, err,
                              "\"write.compression_level\" must be between 0 and 9 for gzip, got "
                              "%lld (0: the codec's default)",
                              (long long)d->compression_level);
    if (d->target_file_bytes < (1u << 20))
        return firn__cfg_fail(ctx, err, "\"write.target_file_size\" must be at least 1MiB");
    if (d->memory_limit_bytes < (16u << 20))
        return firn__cfg_fail(ctx, err, "\"memory_limit\" must be at least 16MiB");
    if (d->index_memory_limit_bytes < (4u << 20))
        return firn__cfg_fail(ctx, err, "\"index_memory_limit\" must be at least 4MiB");
    /* Both budgets are memory firn may really use: more than the machine has is a typo. */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    uint64_t phys = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    if (phys && d->memory_limit_bytes > phys)
        return firn__cfg_fail(ctx, err,
                              "\"memory_limit\" is larger than this machine's memory (%llu MiB)",
                              (unsigned long long)(phys >> 20));
    if (phys && d->index_memory_limit_bytes > phys)
        return firn__cfg_fail(ctx, err,
                              "\"index_memory_limit\" is larger than this machine's memory (%llu "
                              "MiB)",
                              (unsigned long long)(phys >> 20));
    return choose_format(ctx, d, err);
}
