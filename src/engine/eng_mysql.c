/* SPDX-License-Identifier: Apache-2.0 */
/* `firn check` and `firn discover` for MySQL and MariaDB sources (issue 27): the connection
 * from source.json, the preflight of firn/source_mysql.h, and the streams file of a database's
 * tables (namespace = database). */
#include "cfg_int.h"
#include "eng_mysql_int.h"
#include "firn/iceberg.h"
#include "firn/source_mysql.h"

#include <stdio.h>
#include <string.h>

static firn_my_ssl_mode ssl_mode_of(firn_sslmode m)
{
    switch (m) {
    case FIRN_SSL_DISABLE:
        return FIRN_MY_SSL_DISABLED;
    case FIRN_SSL_ALLOW:
    case FIRN_SSL_PREFER:
        return FIRN_MY_SSL_PREFERRED;
    case FIRN_SSL_REQUIRE:
        return FIRN_MY_SSL_REQUIRED;
    case FIRN_SSL_VERIFY_CA:
        return FIRN_MY_SSL_VERIFY_CA;
    case FIRN_SSL_VERIFY_FULL:
        return FIRN_MY_SSL_VERIFY_IDENTITY;
    }
    return FIRN_MY_SSL_PREFERRED;
}

void firn__mysql_conn_config(const firn_source_config *src, firn_my_conn_config *out)
{
    memset(out, 0, sizeof(*out));
    out->host = src->host;
    out->port = (int)src->port;
    out->database = src->database;
    out->user = src->username;
    out->password = src->password;
    out->ssl_mode = ssl_mode_of(src->sslmode);
    out->ssl_ca = src->sslrootcert;
    out->ssl_cert = src->sslcert;
    out->ssl_key = src->sslkey;
    out->connect_timeout_s = (int)((src->connect_timeout_ms + 999) / 1000);
}

firn_rc
firn__mysql_open(const firn_config *cfg, firn_my_conn **out, firn_fault *fault, firn_err *err)
{
    firn_my_conn_config cc;
    firn__mysql_conn_config(&cfg->source, &cc);
    firn_rc rc = firn_my_conn_open(&cc, out, err);
    if (rc)
        *fault = rc == FIRN_ERR_CONFIG ? FIRN_FAULT_CONFIG : FIRN_FAULT_SOURCE;
    return rc;
}

/* The databases discovery reads: "schemas" when given, else "database". */
static size_t databases_of(const firn_config *cfg, const char ***out)
{
    const firn_source_config *s = &cfg->source;
    const size_t n = s->schemas.count ? s->schemas.count : 1;
    *out = firn_calloc(n, sizeof(char *));
    for (size_t i = 0; i < s->schemas.count; i++)
        (*out)[i] = s->schemas.items[i];
    if (!s->schemas.count)
        (*out)[0] = s->database;
    return n;
}

firn_rc firn__mysql_discover_catalog(const firn_config *cfg,
                                     firn_my_conn *c,
                                     firn_my_catalog **out,
                                     firn_err *err)
{
    const char **dbs = NULL;
    const size_t n = databases_of(cfg, &dbs);
    firn_rc rc = firn_my_discover(c, dbs, n, out, err);
    firn_free(dbs);
    return rc;
}

static bool wants_cdc(const firn_config *cfg)
{
    for (size_t i = 0; i < cfg->streams.count; i++) {
        const firn_stream_config *s = &cfg->streams.items[i];
        if (s->selected &&
            (s->sync_mode == FIRN_SYNC_FULL_REFRESH_CDC || s->sync_mode == FIRN_SYNC_CDC_ONLY))
            return true;
    }
    return false;
}

/* The selected streams' tables; a selected stream the source has no table of is an error. */
static firn_rc selected_tables(const firn_config *cfg,
                               firn_my_catalog *cat,
                               firn_my_table ***out,
                               size_t *n_out,
                               bool *keyless_ok,
                               firn_err *err)
{
    *out = firn_calloc(cfg->streams.count + 1, sizeof(**out));
    *n_out = 0;
    *keyless_ok = true;
    for (size_t i = 0; i < cfg->streams.count; i++) {
        const firn_stream_config *s = &cfg->streams.items[i];
        if (!s->selected)
            continue;
        firn_my_table *t = firn_my_catalog_find(cat, s->namespace, s->name);
        if (!t)
            return firn_err_set(err, FIRN_ERR_NOT_FOUND,
                                "stream %s.%s: the source has no table `%s`.`%s` that firn's "
                                "user can see; deselect the stream, or if the table exists run "
                                "GRANT SELECT ON `%s`.`%s` TO <firn's user>",
                                s->namespace, s->name, s->namespace, s->name, s->namespace,
                                s->name);
        if (t->n_key == 0 && !s->append_mode && s->primary_key.count == 0)
            *keyless_ok = false;
        (*out)[(*n_out)++] = t;
    }
    return FIRN_OK;
}

firn_rc firn__mysql_check_source(const firn_config *cfg, firn_fault *fault, firn_err *err)
{
    firn_my_conn *c = NULL;
    FIRN_TRY(firn__mysql_open(cfg, &c, fault, err));
    firn_my_catalog *cat = NULL;
    firn_my_table **tabs = NULL;
    size_t n = 0;
    bool keyless_ok = true;
    firn_strlist warnings = {0};
    firn_rc rc = firn__mysql_discover_catalog(cfg, c, &cat, err);
    if (rc == FIRN_OK && cfg->has_streams)
        rc = selected_tables(cfg, cat, &tabs, &n, &keyless_ok, err);
    if (rc == FIRN_OK) {
        firn_my_check_opts o = {0};
        o.cdc = wants_cdc(cfg);
        o.server_id = cfg->source.server_id;
        o.backfill_hours = cfg->source.backfill_hours;
        o.tables = tabs;
        o.n_tables = n;
        o.keyless_ok = keyless_ok;
        rc = firn_my_check(c, &o, &warnings, err);
    }
    for (size_t i = 0; rc == FIRN_OK && i < warnings.count; i++)
        FIRN_LOG(FIRN_LOG_WARN, "mysql", "%s", warnings.items[i]);
    if (rc == FIRN_OK)
        FIRN_LOG(FIRN_LOG_INFO, "engine", "source ok: %s %s (%s, TLS %s)",
                 firn_my_conn_is_mariadb(c) ? "MariaDB" : "MySQL", firn_my_conn_version_text(c),
                 firn_my_conn_describe(c), firn_my_conn_tls(c) ? "on" : "off");
    if (rc)
        *fault = FIRN_FAULT_SOURCE;
    firn_strlist_deinit(&warnings);
    firn_free(tabs);
    firn_my_catalog_free(cat);
    firn_my_conn_close(c);
    return rc;
}

static char *schema_json(const firn_my_table *t)
{
    firn_schema *s = firn_schema_new(0, firn_field_clone(t->schema));
    firn_buf b;
    firn_buf_init(&b, (size_t)64 << 20);
    char *out = NULL;
    if (firn_schema_to_json(s, &b, NULL) == FIRN_OK && b.data)
        out = firn_strdup((const char *)b.data);
    firn_buf_deinit(&b);
    firn_schema_free(s);
    return out;
}

/* Until binlog CDC lands (issue 28) a MySQL stream is copied by full refresh only. */
static void describe_stream(firn_stream_config *st,
                            const firn_my_table *t,
                            const firn_stream_config *old,
                            const firn_config *cfg)
{
    memset(st, 0, sizeof(*st));
    st->namespace = firn_strdup(t->database);
    st->name = firn_strdup(t->name);
    st->selected = old ? old->selected : !cfg->has_streams;
    st->sync_mode = FIRN_SYNC_FULL_REFRESH;
    st->append_mode = old ? old->append_mode : t->n_key == 0;
    st->sync_new_columns = old ? old->sync_new_columns : true;
    st->type_schema = schema_json(t);
    for (size_t k = 0; k < t->n_key; k++)
        firn_strlist_push(&st->source_primary_key, t->columns[t->key[k]].name);
    if (old && old->selection)
        st->selection = firn_strdup(old->selection);
    for (size_t k = 0; old && k < old->primary_key.count; k++)
        firn_strlist_push(&st->primary_key, old->primary_key.items[k]);
    for (size_t k = 0; old && k < old->columns.count; k++)
        firn_strlist_push(&st->columns, old->columns.items[k]);
    firn_strlist_push(&st->supported_sync_modes, "full_refresh");
    firn_strlist_push(&st->notes, "full_refresh_cdc and cdc_only: binlog CDC for MySQL and "
                                  "MariaDB sources is not built yet");
    for (size_t k = 0; k < t->n_columns; k++)
        firn_strlist_push(&st->available_cursor_fields, t->columns[k].name);
}

firn_rc
firn__mysql_discover(const firn_config *cfg, const char *path, firn_fault *fault, firn_err *err)
{
    firn_my_conn *c = NULL;
    FIRN_TRY(firn__mysql_open(cfg, &c, fault, err));
    firn_my_catalog *cat = NULL;
    firn_rc rc = firn__mysql_discover_catalog(cfg, c, &cat, err);
    if (rc)
        *fault = FIRN_FAULT_SOURCE;
    firn_streams_config out = {0};
    if (rc == FIRN_OK) {
        const size_t n = firn_my_catalog_tables(cat);
        out.items = firn_calloc(n ? n : 1, sizeof(*out.items));
        for (size_t i = 0; i < n; i++) {
            const firn_my_table *t = firn_my_catalog_table(cat, i);
            const firn_stream_config *old =
                cfg->has_streams ? firn_streams_find(&cfg->streams, t->database, t->name) : NULL;
            describe_stream(&out.items[out.count++], t, old, cfg);
        }
        rc = firn_streams_save(&out, path, err);
        if (rc)
            *fault = FIRN_FAULT_CONFIG;
        else
            FIRN_LOG(FIRN_LOG_INFO, "engine", "discovered %zu table%s into %s", out.count,
                     out.count == 1 ? "" : "s", path);
    }
    for (size_t i = 0; i < out.count; i++)
        firn__cfg_stream_free(&out.items[i]);
    firn_free(out.items);
    firn_my_catalog_free(cat);
    firn_my_conn_close(c);
    return rc;
}
