/* SPDX-License-Identifier: Apache-2.0 */
/* `firn check`, `firn discover` and `firn status`: the engine entry points besides sync. */
#include "cfg_int.h"
#include "eng_mysql_int.h"
#include "engine_int.h"
#include "firn/net.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static _Thread_local firn_fault entry_fault;

static firn_rc fault(firn_fault where, firn_rc rc)
{
    if (rc)
        entry_fault = where;
    return rc;
}

/* The public entry points (eng_sync.c) copy this into the fault firn_engine_last_fault
 * reports. */
firn_fault firn__entry_fault(void)
{
    return entry_fault;
}

static firn_rc open_sql(const firn_config *cfg, char **conninfo, firn_pg_conn **out, firn_err *err)
{
    FIRN_TRY(fault(FIRN_FAULT_CONFIG, firn_source_conninfo(&cfg->source, false, conninfo, err)));
    firn_pg_conn_config cc = {0};
    cc.uri = *conninfo;
    cc.application_name = "firn";
    cc.connect_timeout_s = (int)(cfg->source.connect_timeout_ms / 1000);
    firn_rc rc = firn_pg_conn_open(&cc, FIRN_PG_CONN_SQL, out, err);
    if (rc && firn__conn_error_is_config(err))
        return fault(FIRN_FAULT_CONFIG, FIRN_ERR_CONFIG);
    return fault(FIRN_FAULT_SOURCE, rc);
}

static void free_conninfo(char *c)
{
    if (c) {
        memset(c, 0, strlen(c));
        firn_free(c);
    }
}

static bool wants_cdc(const firn_config *cfg)
{
    for (size_t i = 0; i < cfg->streams.count; i++) {
        const firn_stream_config *s = &cfg->streams.items[i];
        if (s->selected &&
            (s->sync_mode == FIRN_SYNC_FULL_REFRESH_CDC || s->sync_mode == FIRN_SYNC_CDC_ONLY))
            return true;
    }
    return !cfg->has_streams && cfg->source.update_method != FIRN_UPDATE_STANDALONE;
}

/* When firn is to create the publication: CREATE PUBLICATION ... FOR TABLE needs a superuser
 * or the owner of every table (the CREATE privilege is not enough); names the tables the
 * source user cannot publish. */
/* Appends s as a SQL literal (PQescapeLiteral: quotes and backslashes). */
static void append_literal(firn_buf *q, PGconn *pq, const char *s)
{
    char *lit = PQescapeLiteral(pq, s ? s : "", s ? strlen(s) : 0);
    firn_rc_ignore(firn_buf_append_cstr(q, lit ? lit : "NULL"));
    PQfreemem(lit);
}

static firn_rc check_publication_owner(const firn_config *cfg, firn_pg_conn *c, firn_err *err)
{
    const firn_source_config *src = &cfg->source;
    if (!src->create_publication || !cfg->has_streams)
        return FIRN_OK;
    PGconn *pq = firn_pg_conn_pq(c);
    firn_buf q;
    firn_buf_init(&q, 1 << 20);
    firn_rc_ignore(
        firn_buf_append_cstr(&q, "SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_publication WHERE "
                                 "pubname = "));
    append_literal(&q, pq, src->publication);
    firn_rc_ignore(firn_buf_append_cstr(
        &q, ") OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN '' ELSE "
            "coalesce((SELECT left(string_agg(format('%I.%I', n.nspname, c.relname), ', '), 150) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE NOT "
            "pg_has_role(c.relowner, 'USAGE') AND (n.nspname, c.relname) IN (('', '')"));
    for (size_t i = 0; i < cfg->streams.count; i++) {
        const firn_stream_config *s = &cfg->streams.items[i];
        if (!s->selected ||
            (s->sync_mode != FIRN_SYNC_FULL_REFRESH_CDC && s->sync_mode != FIRN_SYNC_CDC_ONLY))
            continue;
        firn_rc_ignore(firn_buf_append_cstr(&q, ", ("));
        append_literal(&q, pq, s->namespace);
        firn_rc_ignore(firn_buf_append_cstr(&q, ", "));
        append_literal(&q, pq, s->name);
        firn_rc_ignore(firn_buf_append_cstr(&q, ")"));
    }
    firn_rc_ignore(firn_buf_append_cstr(&q, ")), '') END"));
    char v[200];
    firn_rc rc = firn_pg_conn_query_value(c, (const char *)q.data, v, sizeof(v), err);
    firn_buf_deinit(&q);
    if (rc == FIRN_OK && v[0])
        rc = firn_err_set(err, FIRN_ERR_PERMISSION,
                          "publication \"%s\" does not exist and the source user cannot create "
                          "it: it does not own %s; have the owner or a superuser run CREATE "
                          "PUBLICATION, or set an existing \"publication\"",
                          src->publication, v);
    return rc;
}

/* The published tables without a replica identity (the application's own UPDATEs and DELETEs
 * on them fail): a warning at check, a line at the given level at sync start. */
static void log_no_identity(const firn_pgo_report *rep, firn_log_level level)
{
    if (!rep || rep->n_no_identity == 0)
        return;
    firn_buf names;
    firn_buf_init(&names, 1024);
    for (size_t i = 0; i < rep->n_no_identity && i < 8; i++)
        firn_rc_ignore(firn_buf_appendf(&names, "%s%s", i ? ", " : "", rep->no_identity[i]));
    if (rep->n_no_identity > 8)
        firn_rc_ignore(firn_buf_appendf(&names, " and %zu more", rep->n_no_identity - 8));
    FIRN_LOG(level, "engine",
             "the publication publishes updates and deletes of %s%zu table%s without a primary "
             "key or replica identity: %s; PostgreSQL refuses every UPDATE and DELETE on them "
             "(also the application's) until each gets one (ALTER TABLE ... REPLICA IDENTITY "
             "FULL, or a primary key) or leaves the publication",
             rep->n_no_identity >= 50 ? "at least " : "", rep->n_no_identity,
             rep->n_no_identity == 1 ? "" : "s", names.data ? (const char *)names.data : "");
    firn_buf_deinit(&names);
}

void firn__engine_log_toast_risk(const firn_pgo_report *rep, firn_log_level level)
{
    log_no_identity(rep, level);
    if (!rep || rep->n_toast_risk == 0)
        return;
    firn_buf names;
    firn_buf_init(&names, 1024);
    for (size_t i = 0; i < rep->n_toast_risk; i++) {
        if (i == 8) {
            firn_rc_ignore(firn_buf_appendf(&names, " and %zu more", rep->n_toast_risk - 8));
            break;
        }
        firn_rc_ignore(firn_buf_appendf(&names, "%s%s", i ? ", " : "", rep->toast_risk[i]));
    }
    FIRN_LOG(
        level, "engine",
        "%zu table%s with large (TOAST) columns and REPLICA IDENTITY DEFAULT: %s; an update "
        "that leaves such a value untouched costs a fetch from the source and is eventually "
        "exact (docs/cdc.md \"Unchanged TOAST values\"); ALTER TABLE ... REPLICA IDENTITY FULL "
        "makes it exact",
        rep->n_toast_risk, rep->n_toast_risk == 1 ? "" : "s",
        names.data ? (const char *)names.data : "");
    firn_buf_deinit(&names);
}

/* The columns the CDC streams with a `columns` selection keep (as a sync applies it), for the
 * preflight's TOAST warning and column grants: tabs[i].columns point into the returned catalog
 * (free with firn_pg_catalog_free) through *out_flat (free with firn_free). A stream whose
 * selection does not apply (reported by the stream checks) keeps every column. */
static firn_pg_catalog *selected_columns(
    const firn_config *cfg, firn_pg_conn *c, firn_pgo_table *tabs, size_t n, const char ***out_flat)
{
    firn_pg_relname *names = firn_calloc(n ? n : 1, sizeof(*names));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const firn_stream_config *s =
            firn_streams_find(&cfg->streams, tabs[i].schema, tabs[i].name);
        if (s && s->columns.count)
            names[k++] = (firn_pg_relname){tabs[i].schema, tabs[i].name};
    }
    firn_pg_catalog *cat = NULL;
    firn_err ignored = {0};
    *out_flat = NULL;
    if (k > 0 && firn_pg_discover_named(c, names, k, &cat, &ignored) != FIRN_OK)
        cat = NULL;
    firn_free(names);
    size_t total = 0, used = 0;
    for (size_t i = 0; cat && i < firn_pg_catalog_tables(cat); i++)
        total += firn_pg_catalog_table(cat, i)->n_columns;
    const char **flat = firn_calloc(total ? total : 1, sizeof(*flat));
    for (size_t i = 0; cat && i < n; i++) {
        const firn_stream_config *s =
            firn_streams_find(&cfg->streams, tabs[i].schema, tabs[i].name);
        firn_pg_table *pg = firn_pg_catalog_find(cat, tabs[i].schema, tabs[i].name);
        firn_strlist left_out = {0};
        if (s && s->columns.count && pg &&
            firn__columns_apply(s, NULL, pg, &left_out, &ignored) == FIRN_OK) {
            tabs[i].columns = flat + used;
            tabs[i].n_columns = pg->n_columns;
            for (size_t j = 0; j < pg->n_columns; j++)
                flat[used++] = pg->columns[j].name;
        }
        firn_strlist_deinit(&left_out);
    }
    *out_flat = flat;
    return cat;
}

/* The replication side of `firn check`: a replication connection opens (pg_hba.conf may allow
 * only normal ones), and the preflight sync runs before streaming passes for the selected CDC
 * tables: the slot (may be missing when firn creates it), the publication (may be missing when
 * firn creates it), replica identity, SELECT (on the table or on its selected columns); tables
 * at risk of unchanged TOAST values among their selected columns are named in a warning. */
static firn_rc
check_replication(const firn_config *cfg, firn_pg_conn *c, const char *conninfo, firn_err *err)
{
    const firn_source_config *src = &cfg->source;
    const char *pubs[1] = {src->publication};
    firn_pgo_config pc = {0};
    pc.conninfo = conninfo;
    pc.slot_name = src->slot;
    pc.publications = pubs;
    pc.n_publications = 1;
    pc.publications_may_be_missing = src->create_publication;
    pc.slot_may_be_active = true;
    firn_pgo_stream *s = NULL;
    FIRN_TRY(firn_pgo_stream_open(&pc, &s, err));
    firn_pgo_table *tabs = firn_calloc(cfg->streams.count ? cfg->streams.count : 1, sizeof(*tabs));
    size_t n = 0;
    for (size_t i = 0; i < cfg->streams.count; i++) {
        const firn_stream_config *st = &cfg->streams.items[i];
        if (st->selected &&
            (st->sync_mode == FIRN_SYNC_FULL_REFRESH_CDC || st->sync_mode == FIRN_SYNC_CDC_ONLY)) {
            tabs[n].schema = st->namespace;
            tabs[n++].name = st->name;
        }
    }
    const char **flat = NULL;
    firn_pg_catalog *cat = selected_columns(cfg, c, tabs, n, &flat);
    firn_pgo_report rep = {0};
    firn_rc rc = firn_pgo_stream_preflight(s, tabs, n, src->create_slot, &rep, err);
    if (rc == FIRN_OK)
        firn__engine_log_toast_risk(&rep, FIRN_LOG_WARN);
    firn_pgo_report_deinit(&rep);
    firn_free(flat);
    firn_pg_catalog_free(cat);
    firn_free(tabs);
    firn_pgo_stream_free(s);
    return rc;
}

static firn_rc check_source(const firn_config *cfg, firn_err *err)
{
    char *conninfo = NULL;
    firn_pg_conn *c = NULL;
    char v[256];
    firn_rc rc = open_sql(cfg, &conninfo, &c, err);
    bool stream_fault = rc == FIRN_ERR_CONFIG; /* connection parameters */
    if (rc == FIRN_OK && cfg->has_streams)
        rc = firn__streams_check_source(cfg, c, &stream_fault, err);
    if (rc == FIRN_OK && wants_cdc(cfg)) {
        rc = firn_pg_conn_query_value(c, "SHOW wal_level", v, sizeof(v), err);
        if (rc == FIRN_OK && strcmp(v, "logical") != 0)
            rc = firn_err_set(err, FIRN_ERR_CONFIG,
                              "wal_level is \"%s\" on the source; CDC needs logical: run ALTER "
                              "SYSTEM SET wal_level = logical and restart PostgreSQL",
                              v);
        if (rc == FIRN_OK)
            rc = firn_pg_conn_query_value(
                c, "SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user",
                v, sizeof(v), err);
        if (rc == FIRN_OK && strcmp(v, "t") != 0) {
            char role[FIRN_PG_QUOTED_MAX];
            const char *user = PQuser(firn_pg_conn_pq(c));
            rc = firn_err_set(err, FIRN_ERR_PERMISSION,
                              "role \"%s\" lacks the REPLICATION attribute; have a superuser "
                              "run ALTER ROLE %s REPLICATION",
                              user, firn_pg_ident_text(role, sizeof(role), user));
        }
        if (rc == FIRN_OK)
            rc = check_publication_owner(cfg, c, err);
        if (rc == FIRN_OK)
            rc = check_replication(cfg, c, conninfo, err);
    }
    bool bad_selection = false; /* `columns` or `filter`: a configuration error (exit 2) */
    if (rc == FIRN_OK && cfg->has_streams) {
        rc = firn__columns_check(cfg, c, err);
        bad_selection = rc == FIRN_ERR_CONFIG;
    }
    if (rc == FIRN_OK)
        FIRN_LOG(FIRN_LOG_INFO, "engine", "source ok: %s", firn_pg_conn_describe(c));
    firn_pg_conn_close(c);
    free_conninfo(conninfo);
    return fault(bad_selection || stream_fault ? FIRN_FAULT_CONFIG : FIRN_FAULT_SOURCE, rc);
}

/* Where `firn check` writes its probe object: the warehouse when it is a location, else the
 * probe namespace's location; NULL when neither is known (a REST warehouse name). */
static char *probe_root(const firn_catalog_config *cc, firn_catalog *cat, const char *ns)
{
    const char *wh = cc->warehouse;
    if (wh && (strstr(wh, "://") || wh[0] == '/'))
        return firn_strdup(wh);
    firn_props props;
    firn_err ignored = {0};
    char *out = NULL;
    if (firn_catalog_load_namespace(cat, ns, &props, &ignored) == FIRN_OK) {
        const char *loc = firn_props_get(&props, "location");
        out = loc ? firn_strdup(loc) : NULL;
    }
    firn_props_deinit(&props);
    return out;
}

/* Writes and deletes a small object under root. */
static firn_rc probe_storage(firn_io *io, const char *root, const char *id, firn_err *err)
{
    size_t n = strlen(root);
    while (n > 0 && root[n - 1] == '/')
        n--;
    char probe[4200];
    snprintf(probe, sizeof(probe), "%.*s/.firn-check-%s", (int)n, root, id);
    firn_rc rc = firn_io_write_all(io, probe, "firn", 4, err);
    if (rc == FIRN_OK)
        rc = firn_io_remove(io, probe, err);
    if (rc)
        firn_err_context(err, "while writing a probe object at \"%s\"", probe);
    return rc;
}

/* REST catalogs: the storage probe goes where a table of this catalog is written, with the
 * credentials the catalog gives for it (vended ones included: BigLake's service account often
 * has no role on the bucket itself, and a bl:// warehouse is no location): a scratch table is
 * created in the scratch namespace ns, a probe object written and removed under its data
 * folder, then the table, its metadata file and the object are removed again. *out_root: the
 * table location (owned) for the log line. */
static firn_rc probe_table(
    firn_catalog *cat, firn_io *io, const char *ns, const char *id, char **out_root, firn_err *err)
{
    *out_root = NULL;
    firn_field *root = firn_field_new(0, "", FIRN_TYPE_STRUCT, true);
    firn_field_add(root, firn_field_new(1, "id", FIRN_TYPE_LONG, false));
    firn_schema *schema = firn_schema_new(0, root);
    firn_table_create opts = {.schema = schema};
    firn_catalog_table t = {0};
    firn_rc rc = firn_catalog_create_table(cat, ns, "probe", &opts, &t, err);
    firn_schema_free(schema);
    if (rc) {
        firn_err_context(err, "while creating a scratch table %s.probe", ns);
        return rc;
    }
    char data[4200];
    snprintf(data, sizeof(data), "%s/data", t.metadata->location);
    rc = probe_storage(io, data, id, err);
    firn_err derr = {0};
    firn_rc drc = firn_catalog_drop_table(cat, ns, "probe", &derr);
    if (t.metadata_location) /* a drop without purge leaves it; a purge may have removed it */
        firn_rc_ignore(firn_io_remove(io, t.metadata_location, NULL));
    if (rc == FIRN_OK && drc) {
        *err = derr;
        rc = drc;
    }
    *out_root = firn_strdup(t.metadata->location);
    firn_catalog_table_deinit(&t);
    return rc;
}

static firn_rc check_destination(const firn_config *cfg, firn_err *err)
{
    const firn_catalog_config *cc = &cfg->destination.catalog;
    firn_io *io = NULL;
    bool io_owned = false;
    firn_catalog *cat = NULL;
    FIRN_TRY(fault(FIRN_FAULT_CONFIG, firn__engine_check_index_dir(&cfg->destination, err)));
    firn_rc rc = firn__engine_open_destination(&cfg->destination, &cat, &io, &io_owned, err);
    if (rc)
        return fault(rc == FIRN_ERR_CONFIG ? FIRN_FAULT_CONFIG : FIRN_FAULT_DESTINATION, rc);
    uint8_t raw[16];
    char id[37];
    firn_uuid_v4(raw);
    firn_uuid_format(raw, id);
    char ns[64];
    snprintf(ns, sizeof(ns), "firn_check_%.8s", id);
    rc = firn_catalog_create_namespace(cat, ns, NULL, err);
    char *root = NULL;
    /* a local warehouse has no credentials to vend, and a scratch table would leave its
     * folders behind */
    const char *wh = cc->warehouse ? cc->warehouse : "";
    bool local = strncmp(wh, "file:", 5) == 0 || wh[0] == '/';
    bool rest = cc->kind == FIRN_CATALOG_REST && !local;
    if (rc == FIRN_OK && rest) {
        rc = probe_table(cat, io, ns, id, &root, err);
        firn_err nerr = {0};
        firn_rc nrc = firn_catalog_drop_namespace(cat, ns, &nerr);
        if (rc == FIRN_OK && nrc) {
            *err = nerr;
            rc = nrc;
        }
    } else if (rc == FIRN_OK) {
        root = probe_root(cc, cat, ns);
        rc = firn_catalog_drop_namespace(cat, ns, err);
    }
    if (rc == FIRN_OK && root && !rest)
        rc = probe_storage(io, root, id, err);
    else if (rc == FIRN_OK && !root)
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "warehouse \"%s\" is not a location: storage is checked when tables load",
                 firn_url_redact((char[FIRN_URL_REDACTED_MAX]){0}, FIRN_URL_REDACTED_MAX,
                                 cc->warehouse));
    char safe[FIRN_URL_REDACTED_MAX], safe_wh[FIRN_URL_REDACTED_MAX];
    firn_url_redact(safe, sizeof(safe), cc->uri);
    if (rc)
        firn_err_context(err, "while checking catalog \"%s\" and warehouse \"%s\"", safe,
                         firn_url_redact(safe_wh, sizeof(safe_wh), cc->warehouse));
    else
        FIRN_LOG(FIRN_LOG_INFO, "engine", "destination ok: %s catalog %s, warehouse %s",
                 firn_catalog_kind_name(cat), safe,
                 firn_url_redact(safe_wh, sizeof(safe_wh), root ? root : "-"));
    firn_free(root);
    if (io_owned)
        firn_io_free(io);
    firn_catalog_free(cat);
    return fault(FIRN_FAULT_DESTINATION, rc);
}

firn_rc firn__engine_check(const firn_config *cfg, firn_err *err)
{
    entry_fault = FIRN_FAULT_NONE;
    if (cfg->has_source && firn_source_is_mysql(&cfg->source))
        FIRN_TRY(firn__mysql_check_source(cfg, &entry_fault, err));
    else if (cfg->has_source)
        FIRN_TRY(check_source(cfg, err));
    if (cfg->has_destination)
        FIRN_TRY(check_destination(cfg, err));
    return FIRN_OK;
}

/* ---- discover ----------------------------------------------------------------------------- */

/* The Iceberg schema firn creates for t (its source columns; the engine adds _firn_op and
 * _firn_lsn), as JSON text (owned), or NULL if it cannot be encoded. */
static char *discovered_schema_json(const firn_pg_table *t)
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

/* The sync modes t can have (CDC needs a replica identity, and the table in the publication
 * when one exists: missing_pub names it when it does not carry t, else NULL), with a note saying
 * why a mode is missing; a new stream offered a CDC mode it cannot have gets full_refresh
 * instead, and one outside the publication is also left unselected (the user chose what to
 * publish). An old selection that cannot work is kept, with a warning: firn sync refuses it.
 * Returns true for a new stream offered without the CDC modes for want of the publication. */
static bool offer_modes(firn_stream_config *st,
                        const firn_pg_table *t,
                        const firn_stream_config *old,
                        const char *missing_pub)
{
    const bool cdc_mode =
        st->sync_mode == FIRN_SYNC_FULL_REFRESH_CDC || st->sync_mode == FIRN_SYNC_CDC_ONLY;
    /* firn sync refuses CDC for such a table (eng_sync.c check_replica_identity). */
    const bool identity_ok =
        !(t->replica_identity == 'n' || (t->replica_identity == 'd' && !t->has_primary_key));
    const bool cdc_ok = identity_ok && !missing_pub;
    firn_buf add; /* the statement that puts t into the publication */
    firn_buf_init(&add, 4096);
    if (missing_pub) {
        firn_rc_ignore(firn_buf_append_cstr(&add, "ALTER PUBLICATION "));
        firn_rc_ignore(firn_pg_ident_append(&add, missing_pub));
        firn_rc_ignore(firn_buf_appendf(&add, " ADD TABLE %s", t->qualified));
    }
    if (!old && cdc_mode && !cdc_ok) {
        st->sync_mode = FIRN_SYNC_FULL_REFRESH;
        st->selected &= !missing_pub; /* log_unpublished names these, in one line */
        if (!missing_pub)
            FIRN_LOG(FIRN_LOG_WARN, "engine",
                     "table %s has no primary key or replica identity: listed as full_refresh "
                     "(add one, or REPLICA IDENTITY FULL, for CDC)",
                     t->qualified);
    } else if (old && old->selected && cdc_mode && !identity_ok) {
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "stream \"%s.%s\": sync mode %s needs a primary key or replica identity, which "
                 "table %s lacks: firn sync will refuse it (add one, or REPLICA IDENTITY FULL, or "
                 "choose full_refresh or incremental)",
                 t->schema_name, t->name, firn_sync_mode_name(st->sync_mode), t->qualified);
    } else if (old && old->selected && cdc_mode && missing_pub) {
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "stream \"%s.%s\": sync mode %s needs table %s in publication \"%s\", which "
                 "does not carry it: firn sync will refuse it (run %s, or choose full_refresh or "
                 "incremental)",
                 t->schema_name, t->name, firn_sync_mode_name(st->sync_mode), t->qualified,
                 missing_pub, (const char *)add.data);
    }
    static const char *modes[] = {"full_refresh", "full_refresh_cdc", "cdc_only", "incremental"};
    for (size_t k = 0; k < sizeof(modes) / sizeof(modes[0]); k++) {
        if (cdc_ok || (k != 1 && k != 2))
            firn_strlist_push(&st->supported_sync_modes, modes[k]);
    }
    if (!identity_ok)
        firn_strlist_push(&st->notes,
                          "full_refresh_cdc and cdc_only are not supported: the table has no "
                          "primary key or replica identity, so CDC cannot carry its updates and "
                          "deletes (add a primary key, or ALTER TABLE ... REPLICA IDENTITY FULL, "
                          "and run firn discover again)");
    if (missing_pub) {
        firn_buf note;
        firn_buf_init(&note, 8192);
        firn_rc_ignore(firn_buf_appendf(
            &note,
            "full_refresh_cdc and cdc_only are not supported: the table is not in publication "
            "\"%s\", so the WAL stream does not carry its changes (add it with %s and run firn "
            "discover again)",
            missing_pub, (const char *)add.data));
        firn_strlist_push(&st->notes, (const char *)note.data);
        firn_buf_deinit(&note);
    }
    firn_buf_deinit(&add);
    return !old && cdc_mode && missing_pub;
}

/* Fills st for table t (see offer_modes for missing_pub and the result). */
static bool describe_stream(firn_stream_config *st,
                            const firn_pg_table *t,
                            const firn_stream_config *old,
                            const firn_config *cfg,
                            const char *missing_pub)
{
    memset(st, 0, sizeof(*st));
    st->namespace = firn_strdup(t->schema_name);
    st->name = firn_strdup(t->name);
    st->selected = old ? old->selected : !cfg->has_streams;
    st->sync_mode = old ? old->sync_mode : cfg->source.default_mode;
    st->append_mode = old ? old->append_mode : t->n_key == 0;
    st->soft_delete = old && old->soft_delete;
    st->sync_new_columns = old ? old->sync_new_columns : true;
    st->type_schema = discovered_schema_json(t);
    for (size_t k = 0; k < t->n_key; k++)
        firn_strlist_push(&st->source_primary_key, t->columns[t->key_columns[k]].name);
    if (old && old->selection)
        st->selection = firn_strdup(old->selection);
    if (old) {
        for (size_t k = 0; k < old->primary_key.count; k++)
            firn_strlist_push(&st->primary_key, old->primary_key.items[k]);
        for (size_t k = 0; k < old->columns.count; k++)
            firn_strlist_push(&st->columns, old->columns.items[k]);
        if (old->cursor_field)
            st->cursor_field = firn_strdup(old->cursor_field);
        if (old->partition_count) {
            st->partition = firn_calloc(old->partition_count, sizeof(*st->partition));
            for (size_t k = 0; k < old->partition_count; k++) {
                st->partition[k] = old->partition[k];
                st->partition[k].column = firn_strdup(old->partition[k].column);
            }
            st->partition_count = old->partition_count;
        }
    }
    firn__columns_rediscover(st, t, old);
    const bool left_out = offer_modes(st, t, old, missing_pub);
    for (size_t k = 0; k < t->n_columns; k++)
        firn_strlist_push(&st->available_cursor_fields, t->columns[k].name);
    return left_out;
}

/* One warning for the new tables discover lists unselected because the publication does not
 * carry them (a database may have hundreds), naming the first few. */
static void log_unpublished(const firn_streams_config *out, const char *pub, const bool *left_out)
{
    firn_buf names;
    firn_buf_init(&names, 4096);
    size_t n = 0;
    for (size_t i = 0; i < out->count; i++) {
        const firn_stream_config *st = &out->items[i];
        if (!left_out[i])
            continue;
        if (n < 5)
            firn_rc_ignore(
                firn_buf_appendf(&names, "%s%s.%s", n ? ", " : "", st->namespace, st->name));
        n++;
    }
    if (n > 5)
        firn_rc_ignore(firn_buf_appendf(&names, " and %zu more", n - 5));
    if (n)
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "%zu table%s not in publication \"%s\" listed unselected, without the CDC "
                 "modes: %s (for CDC run ALTER PUBLICATION ... ADD TABLE, then firn discover "
                 "again)",
                 n, n == 1 ? "" : "s", pub, (const char *)names.data);
    firn_buf_deinit(&names);
}

firn_rc firn__engine_discover(const firn_config *cfg, const char *path, firn_err *err)
{
    entry_fault = FIRN_FAULT_NONE;
    if (firn_source_is_mysql(&cfg->source))
        return firn__mysql_discover(cfg, path, &entry_fault, err);
    char *conninfo = NULL;
    firn_pg_conn *c = NULL;
    firn_pg_catalog *pgcat = NULL;
    char **patterns = firn_calloc(cfg->source.schemas.count + 1, sizeof(char *));
    for (size_t i = 0; i < cfg->source.schemas.count; i++) {
        size_t len = strlen(cfg->source.schemas.items[i]) + 3;
        patterns[i] = firn_malloc(len);
        snprintf(patterns[i], len, "%s.*", cfg->source.schemas.items[i]);
    }
    firn_rc rc = open_sql(cfg, &conninfo, &c, err);
    if (rc == FIRN_OK)
        rc = fault(FIRN_FAULT_SOURCE, firn_pg_discover(c, (const char *const *)patterns,
                                                       cfg->source.schemas.count, &pgcat, err));
    firn_streams_config out = {0};
    const size_t n = rc == FIRN_OK ? firn_pg_catalog_tables(pgcat) : 0;
    bool *covered = firn_calloc(n ? n : 1, sizeof(bool));
    bool *left_out = firn_calloc(n ? n : 1, sizeof(bool));
    bool pub_exists = false;
    /* A publication that exists decides which tables CDC can stream (sync does not add tables
     * to it); a missing one is created for the selected tables. */
    if (rc == FIRN_OK && cfg->source.update_method != FIRN_UPDATE_STANDALONE)
        rc =
            fault(FIRN_FAULT_SOURCE, firn_pg_publication_coverage(c, cfg->source.publication, pgcat,
                                                                  &pub_exists, covered, err));
    for (size_t i = 0; i < n && !pub_exists; i++)
        covered[i] = true;
    if (rc == FIRN_OK) {
        out.items = firn_calloc(n ? n : 1, sizeof(*out.items));
        for (size_t i = 0; i < n; i++) {
            const firn_pg_table *t = firn_pg_catalog_table(pgcat, i);
            const firn_stream_config *old =
                cfg->has_streams ? firn_streams_find(&cfg->streams, t->schema_name, t->name) : NULL;
            left_out[i] = describe_stream(&out.items[out.count++], t, old, cfg,
                                          covered[i] ? NULL : cfg->source.publication);
        }
        log_unpublished(&out, cfg->source.publication, left_out);
        rc = fault(FIRN_FAULT_CONFIG, firn_streams_save(&out, path, err));
        if (rc == FIRN_OK)
            FIRN_LOG(FIRN_LOG_INFO, "engine", "discovered %zu table%s into %s", out.count,
                     out.count == 1 ? "" : "s", path);
    }
    for (size_t i = 0; i < out.count; i++)
        firn__cfg_stream_free(&out.items[i]);
    firn_free(out.items);
    firn_free(covered);
    firn_free(left_out);
    for (size_t i = 0; i < cfg->source.schemas.count; i++)
        firn_free(patterns[i]);
    firn_free(patterns);
    firn_pg_catalog_free(pgcat);
    firn_pg_conn_close(c);
    free_conninfo(conninfo);
    return rc;
}

/* ---- status ------------------------------------------------------------------------------- */

/* A stream the last run's stats show stopped: its lag column says so and where. */
static void stopped_lag(const firn_config *cfg, const char *stream, char *lag, size_t cap)
{
    char at[32];
    bool missing = false;
    if (firn__stats_stopped(cfg->state_path, stream, at, sizeof(at), &missing))
        snprintf(lag, cap, "stopped %s%s%s%s",
                 missing ? "(source table missing)" : "at a schema change", at[0] ? " (" : "", at,
                 at[0] ? ")" : "");
}

firn_rc firn__engine_status(const firn_config *cfg, FILE *out, firn_err *err)
{
    entry_fault = FIRN_FAULT_NONE;
    uint64_t wal = 0;
    /* A source that was given but cannot be read (wrong password, down) fails the command after
     * the table is printed (lag then without bytes): a monitor must not read exit 0 as healthy. */
    firn_rc src_rc = FIRN_OK;
    if (cfg->has_source && firn_source_is_mysql(&cfg->source)) {
        /* No binlog position to measure lag against yet (issue 28): the source is checked. */
        firn_my_conn *mc = NULL;
        src_rc = firn__mysql_open(cfg, &mc, &entry_fault, err);
        firn_my_conn_close(mc);
    } else if (cfg->has_source) {
        char *conninfo = NULL;
        firn_pg_conn *c = NULL;
        char v[64];
        src_rc = open_sql(cfg, &conninfo, &c, err);
        if (src_rc == FIRN_OK)
            src_rc = fault(FIRN_FAULT_SOURCE,
                           firn_pg_conn_query_value(c, "SELECT pg_current_wal_lsn()::text", v,
                                                    sizeof(v), err));
        if (src_rc == FIRN_OK)
            src_rc = fault(FIRN_FAULT_SOURCE, firn_lsn_parse(v, &wal, err));
        firn_pg_conn_close(c);
        free_conninfo(conninfo);
    }
    fprintf(out, "%-32s %-32s %-17s %-9s %-18s %-20s %s\n", "stream", "table", "mode", "backfill",
            "committed lsn", "last commit (UTC)", "lag");
    for (size_t i = 0; i < cfg->streams.count; i++) {
        const firn_stream_config *s = &cfg->streams.items[i];
        if (!s->selected)
            continue;
        const firn_stream_state *st =
            firn_state_stream((firn_state *)&cfg->state, s->namespace, s->name, false);
        char src[256], dst[256], lsn[18] = "-", when[32] = "never", lag[96] = "-";
        snprintf(src, sizeof(src), "%s.%s", s->namespace, s->name);
        /* Without the destination file the namespace pattern is unknown: no guess. */
        if (cfg->has_destination)
            snprintf(dst, sizeof(dst), "%s.%s", s->target_namespace, s->target_table);
        else
            snprintf(dst, sizeof(dst), "-");
        if (st && st->committed_lsn)
            firn_lsn_format(st->committed_lsn, lsn);
        if (st && st->last_commit_us) {
            time_t secs = (time_t)(st->last_commit_us / 1000000);
            struct tm tm;
            gmtime_r(&secs, &tm);
            strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
            char age[FIRN_DURATION_TEXT_MAX], size[FIRN_SIZE_TEXT_MAX];
            firn_duration_format((firn_now_us() - st->last_commit_us) / 1000000, age);
            if (wal && st->committed_lsn && wal >= st->committed_lsn) {
                firn_size_format(wal - st->committed_lsn, size);
                snprintf(lag, sizeof(lag), "%s, %s", size, age);
            } else {
                snprintf(lag, sizeof(lag), "%s since commit", age);
            }
        }
        stopped_lag(cfg, src, lag, sizeof(lag));
        fprintf(out, "%-32s %-32s %-17s %-9s %-18s %-20s %s\n", src, dst,
                firn_sync_mode_name(s->sync_mode), st && st->backfill_done ? "done" : "pending",
                lsn, when, lag);
    }
    if (src_rc)
        firn_err_context(err, "while reading the source's WAL position for the lag");
    return src_rc;
}
