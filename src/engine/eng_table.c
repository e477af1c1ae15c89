/* SPDX-License-Identifier: Apache-2.0 */
/* A synced table: creating or opening its Iceberg table, keeping the table's schema in step with
 * the source's, reading the committed source position back from snapshot summaries
 * (DESIGN.md "Exactly-once") and loading the primary-key index from the live files. */
#include "engine_int.h"

#include <libpq-fe.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Largest metadata-related file read back (manifests, delete files). */
#define READ_MAX_BYTES ((size_t)1 << 31)

void firn__table_deinit(firn__table *t)
{
    firn_free(t->stop_reason);
    t->stop_reason = NULL;
    firn_free(t->ns);
    firn_free(t->name);
    firn_free(t->display);
    firn_catalog_table_deinit(&t->cat);
    firn__pkindex_free(t->index);
    firn__keymap_free(t->index_paths);
    firn_free(t->index_dir);
    firn__table_share_free(t);
    firn__dv_files_free(t->dv_files, t->n_files);
    firn__delfiles_reset(t);
    for (size_t i = 0; i < t->n_files; i++)
        firn_data_file_deinit(&t->files[i]);
    firn_free(t->files);
    for (size_t i = 0; i < t->n_pending; i++)
        firn_data_file_deinit(&t->pending[i]);
    firn_free(t->pending);
    firn_batch_free(t->buf);
    firn_free(t->backfill_chunks);
    firn_strlist_deinit(&t->default_added);
    firn_strlist_deinit(&t->rename_from);
    firn_strlist_deinit(&t->rename_to);
    firn_strlist_deinit(&t->left_out);
    if (t->missing && t->pg) { /* the stub firn__engine made for a missing source table */
        firn_free(t->pg->schema_name);
        firn_free(t->pg->name);
        firn_free(t->pg->qualified);
        firn_field_free(t->pg->schema);
        firn_free(t->pg);
        t->pg = NULL;
    }
    pthread_mutex_destroy(&t->mu);
}

void firn__table_reset_index(firn__table *t)
{
    firn__pkindex_free(t->index);
    t->index = firn__table_new_index(t);
    firn__dv_files_free(t->dv_files, t->n_files);
    t->dv_files = NULL;
    firn__delfiles_reset(t);
    for (size_t i = 0; i < t->n_files; i++)
        firn_data_file_deinit(&t->files[i]);
    t->n_files = 0;
}

uint32_t firn__table_add_file(firn__table *t, const firn_data_file *f)
{
    t->dv_files = firn_reallocarray(t->dv_files, t->n_files + 1, sizeof(*t->dv_files));
    memset(&t->dv_files[t->n_files], 0, sizeof(*t->dv_files));
    t->files = firn_reallocarray(t->files, t->n_files + 1, sizeof(*t->files));
    firn_data_file *dst = &t->files[t->n_files];
    firn_data_file_init(dst, FIRN_CONTENT_DATA, f->file_path, f->spec_id);
    dst->record_count = f->record_count;
    dst->file_size_in_bytes = f->file_size_in_bytes;
    if (f->n_partition)
        firn_data_file_set_partition(dst, f->partition, f->n_partition);
    uint32_t ord = firn__pkindex_add_file(t->index, f->file_path);
    FIRN_ASSERT(ord == t->n_files);
    t->n_files++;
    return ord;
}

/* ---- schema ------------------------------------------------------------------------------- */

/* The manifest transform of a streams-file partition transform. */
firn_transform_kind firn__transform_kind(firn_cfg_transform t)
{
    static const firn_transform_kind kinds[] = {
        [FIRN_CFG_TRANSFORM_IDENTITY] = FIRN_TRANSFORM_IDENTITY,
        [FIRN_CFG_TRANSFORM_YEAR] = FIRN_TRANSFORM_YEAR,
        [FIRN_CFG_TRANSFORM_MONTH] = FIRN_TRANSFORM_MONTH,
        [FIRN_CFG_TRANSFORM_DAY] = FIRN_TRANSFORM_DAY,
        [FIRN_CFG_TRANSFORM_HOUR] = FIRN_TRANSFORM_HOUR,
        [FIRN_CFG_TRANSFORM_BUCKET] = FIRN_TRANSFORM_BUCKET,
        [FIRN_CFG_TRANSFORM_TRUNCATE] = FIRN_TRANSFORM_TRUNCATE,
        [FIRN_CFG_TRANSFORM_VOID] = FIRN_TRANSFORM_VOID,
    };
    return kinds[t];
}

static const firn_field *child_named(const firn_field *f, const char *name)
{
    for (size_t i = 0; i < f->n_children; i++) {
        if (strcmp(f->children[i]->name, name) == 0)
            return f->children[i];
    }
    return NULL;
}

/* Copies Iceberg field ids from src onto dst, matching struct fields by name and list/map
 * children by position (the table is the authority on ids: ICEBERG.md §0 item 11). */
static void align_ids(firn_field *dst, const firn_field *src)
{
    dst->id = src->id;
    if (dst->type != src->type)
        return;
    for (size_t i = 0; i < dst->n_children; i++) {
        const firn_field *s = NULL;
        if (dst->type == FIRN_TYPE_STRUCT)
            s = child_named(src, dst->children[i]->name);
        else if (i < src->n_children)
            s = src->children[i];
        if (s)
            align_ids(dst->children[i], s);
    }
}

static const struct {
    const char *name;
    firn_type type;
    firn_meta_kind kind;
} meta[] = {
    {"_firn_op", FIRN_TYPE_STRING, FIRN_META_OP},
    {"_firn_lsn", FIRN_TYPE_LONG, FIRN_META_LSN},
    {"_firn_commit_ts", FIRN_TYPE_TIMESTAMPTZ, FIRN_META_COMMIT_TS},
    {"_firn_ingest_ts", FIRN_TYPE_TIMESTAMPTZ, FIRN_META_INGEST_TS},
};

/* A source column named like a metadata column would take its place in the table, and the
 * change log (append mode) or the tombstones (soft_delete) would lose what firn writes there. */
static firn_rc check_meta_names(const firn__table *t, firn_err *err)
{
    for (size_t i = 0; i < sizeof(meta) / sizeof(meta[0]); i++) {
        if (child_named(t->schema, meta[i].name))
            return firn_err_set(err, FIRN_ERR_CONFIG,
                                "source table %s has a column \"%s\", the name of a firn "
                                "metadata column; rename it, leave it out with \"columns\", or "
                                "set \"metadata_columns\": false in the destination",
                                t->pg->qualified, meta[i].name);
    }
    return FIRN_OK;
}

/* Adds the _firn_ metadata columns to the source schema (ids after the source's). */
static void add_meta_fields(firn_field *root, int32_t *next_id)
{
    for (size_t i = 0; i < sizeof(meta) / sizeof(meta[0]); i++) {
        if (child_named(root, meta[i].name))
            continue;
        firn_field *f = firn_field_new(++*next_id, meta[i].name, meta[i].type, false);
        f->meta = (uint8_t)meta[i].kind;
        firn_field_add(root, f);
    }
}

/* Append-mode tables hold deletes as rows with only the key: every column is optional; so are
 * the non-key columns of soft-delete tables (a tombstone may hold only the key). */
static void make_optional(firn_field *f)
{
    f->required = false;
}

/* True when top-level column i is part of t's key. */
static bool is_key_column(const firn__table *t, size_t i)
{
    for (size_t k = 0; k < t->n_key; k++) {
        if (t->key_cols[k] == i)
            return true;
    }
    return false;
}

static firn_rc
build_spec(const firn__table *t, const firn_field *root, firn_partition_spec **out, firn_err *err)
{
    const firn_stream_config *s = t->stream;
    *out = NULL;
    if (!s || s->partition_count == 0)
        return FIRN_OK;
    firn_partition_spec *spec = firn_partition_spec_new(0);
    for (size_t i = 0; i < s->partition_count; i++) {
        const firn_cfg_partition *p = &s->partition[i];
        const firn_field *src = child_named(root, p->column);
        if (!src) {
            firn_partition_spec_free(spec);
            return firn_err_set(err, FIRN_ERR_CONFIG,
                                "partition column \"%s\" does not exist in table \"%s\"", p->column,
                                t->display);
        }
        firn_transform tr = {firn__transform_kind(p->transform), (int32_t)p->param};
        char name[256], tname[64];
        firn_transform_format(tr, tname, sizeof(tname));
        if (tr.kind == FIRN_TRANSFORM_IDENTITY)
            snprintf(name, sizeof(name), "%s", p->column);
        else
            snprintf(name, sizeof(name), "%s_%s", p->column,
                     tr.kind == FIRN_TRANSFORM_BUCKET     ? "bucket"
                     : tr.kind == FIRN_TRANSFORM_TRUNCATE ? "trunc"
                                                          : tname);
        firn_partition_spec_add(spec, src->id, FIRN_PARTITION_FIELD_ID_START + (int32_t)i, name,
                                tr);
    }
    *out = spec;
    return FIRN_OK;
}

static void table_properties(const firn__table *t, firn_props *props)
{
    const firn_destination_config *d = &t->eng->cfg->destination;
    static const char *codecs[] = {"zstd", "snappy", "gzip", "uncompressed"};
    firn_props_init(props);
    firn_props_set(props, "write.parquet.compression-codec", codecs[d->compression]);
    firn_props_set(props, "write.delete.mode", "merge-on-read");
    firn_props_set(props, "write.update.mode", "merge-on-read");
    firn_props_set(props, "write.merge.mode", "merge-on-read");
    /* Old metadata files beyond write.metadata.previous-versions-max (100) are deleted: a
     * stream commits often, and each file holds the whole table history (docs/maintenance.md). */
    firn_props_set(props, "write.metadata.delete-after-commit.enabled", "true");
    firn_props_set(props, "firn.source", t->pg->qualified);
    firn_props_set(props, "firn.mode", t->upsert ? "upsert" : "append");
    if (t->eqdel)
        firn_props_set(props, "firn.delete-mode", "equality");
    for (size_t i = 0; i < d->table_properties.count; i++)
        firn_props_set(props, d->table_properties.items[i].key, d->table_properties.items[i].value);
    firn_buf attnums;
    firn_buf_init(&attnums, 1 << 16);
    if (firn__rename_attnums_text(t, t->schema, &attnums) == FIRN_OK && attnums.len > 0)
        firn_props_set(props, FIRN_PROP_ATTNUMS, (const char *)attnums.data);
    firn_buf_deinit(&attnums);
    char oid[16];
    snprintf(oid, sizeof(oid), "%u", (unsigned)t->pg->oid);
    if (t->pg->oid != 0) /* a rename between runs is found by it (eng_rename.c) */
        firn_props_set(props, FIRN_PROP_SOURCE_OID, oid);
}

/* Every file of a table goes under its location: a "." or ".." segment there (a REST catalog
 * that builds the location from a name such as "../x") would put them elsewhere. */
static firn_rc check_location(const firn__table *t, firn_err *err)
{
    const char *loc = t->cat.metadata->location;
    char local[4096];
    firn_err ignored = {0};
    /* A file: location: check the path that is opened. */
    const bool is_local = strncmp(loc, "file:", 5) == 0 &&
                          firn_io_local_path(loc, local, sizeof(local), &ignored) == FIRN_OK;
    const char *p = is_local ? local : strstr(loc, "://");
    p = is_local ? p : p ? p + 3 : loc;
    while (*p) {
        const size_t n = strcspn(p, "/\\");
        if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return firn_err_set(err, FIRN_ERR_CONFIG,
                                "cannot write table \"%s\": its location \"%s\" has a \"%.*s\" "
                                "segment and would lead out of the warehouse",
                                t->display, loc, (int)n, p);
        p += n;
        p += *p ? 1 : 0;
    }
    return FIRN_OK;
}

static firn_rc create_table(firn__table *t, firn_err *err)
{
    firn_catalog *cat = t->eng->catalog;
    bool exists = false;
    FIRN_TRY(firn_catalog_namespace_exists(cat, t->ns, &exists, err));
    if (!exists) {
        firn_rc rc = firn_catalog_create_namespace(cat, t->ns, NULL, err);
        if (rc && rc != FIRN_ERR_EXISTS)
            return rc;
        t->created_ns = rc == FIRN_OK;
    }
    firn_schema *schema = firn_schema_new(0, firn_field_clone(t->schema));
    if (t->upsert && !t->multiset && t->eng->cfg->destination.identifier_fields) {
        int32_t ids[32];
        for (size_t i = 0; i < t->n_key; i++)
            ids[i] = t->schema->children[t->key_cols[i]]->id;
        firn_schema_set_identifier_ids(schema, ids, t->n_key);
    }
    firn_partition_spec *spec = NULL;
    firn_props props;
    table_properties(t, &props);
    firn_rc rc = build_spec(t, t->schema, &spec, err);
    const firn_destination_config *d = &t->eng->cfg->destination;
    int fv = d->format_version == 3 ? 3 : 2;
    if (rc == FIRN_OK) {
        firn_table_create opts = {schema, spec, NULL, NULL, &props, fv};
        rc = firn_catalog_create_table(cat, t->ns, t->name, &opts, &t->cat, err);
        t->created = rc == FIRN_OK;
        if (rc == FIRN_OK)
            FIRN_LOG(FIRN_LOG_INFO, "engine",
                     "table \"%s\": created with format version %d and %s: %s", t->display, fv,
                     t->eqdel  ? "equality deletes"
                     : fv == 3 ? "deletion vectors"
                               : "position deletes",
                     d->format_reason ? d->format_reason : "configured");
        else if (rc == FIRN_ERR_EXISTS)
            rc = firn_catalog_load_table(cat, t->ns, t->name, &t->cat, err);
    }
    firn_props_deinit(&props);
    firn_partition_spec_free(spec);
    firn_schema_free(schema);
    return rc;
}

firn_rc firn__table_column_matches(
    const firn__table *t, const char *name, const char *cond, bool *out, firn_err *err)
{
    PGconn *pq = firn_pg_conn_pq(t->eng->sql);
    char oid[16];
    snprintf(oid, sizeof(oid), "%u", (unsigned)t->pg->oid); /* the name may be another's now */
    const char *params[2] = {oid, name};
    char sql[512];
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM pg_attribute WHERE attrelid = $1::oid AND attname = $2 "
             "AND attnum > 0 AND (%s)",
             cond);
    PGresult *r = PQexecParams(pq, sql, 2, NULL, params, NULL, NULL, 0);
    firn_rc rc = FIRN_OK;
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        rc = firn_err_set(err, FIRN_ERR_SOURCE, "could not look up column \"%s\" of %s: %s", name,
                          t->pg->qualified, PQerrorMessage(pq));
    else
        *out = strcmp(PQgetvalue(r, 0, 0), "0") != 0;
    PQclear(r);
    return rc;
}

/* Columns of the source the table lacks that have a DEFAULT: ALTER TABLE ADD COLUMN ... DEFAULT
 * gives the rows already there a value without any change in the WAL (PostgreSQL 11+ keeps a
 * constant as attmissingval, a volatile default rewrites the table), so the table's copy of
 * those rows cannot learn it from the stream. Recorded in t->default_added. */
static firn_rc note_defaults_added(firn__table *t, const firn_field *cur, firn_err *err)
{
    if (!firn_table_metadata_current_snapshot(t->cat.metadata))
        return FIRN_OK; /* no rows yet */
    for (size_t i = 0; i < t->schema->n_children; i++) {
        const firn_field *f = t->schema->children[i];
        if (f->meta || child_named(cur, f->name) || firn_strlist_contains(&t->rename_to, f->name))
            continue; /* a renamed column is no new one */
        bool has = false;
        FIRN_TRY(firn__table_column_matches(t, f->name, "atthasdef OR atthasmissing", &has, err));
        if (has)
            firn_strlist_push(&t->default_added, f->name);
    }
    return FIRN_OK;
}

firn_rc firn__table_incompatible(const firn__table *t,
                                 const char *column,
                                 const firn_field *from,
                                 const char *to_name,
                                 const firn_field *to,
                                 firn_err *err)
{
    char a[48], b[48];
    firn_type_format(from, a, sizeof(a));
    firn_type_format(to, b, sizeof(b));
    /* FIRN_ERR_MSG_MAX (1024) keeps the remedy whole for the longest names. */
    return firn_err_set(err, FIRN_ERR_SCHEMA,
                        "column \"%s\" of \"%s.%s\" changed type to %s (Iceberg %s -> %s is not a "
                        "promotion): stream stopped, the slot keeps its changes; drop table \"%s\" "
                        "and run firn sync to copy it again",
                        column, t->pg->schema_name, t->pg->name, to_name, a, b, t->display);
}

static bool nested(const firn_field *f)
{
    return f->type == FIRN_TYPE_STRUCT || f->type == FIRN_TYPE_LIST || f->type == FIRN_TYPE_MAP;
}

/* A source column whose type the table cannot take: the same line as in-stream (eng_cdc.c),
 * instead of firn_schema_evolve's bare one. */
static firn_rc check_promotions(firn__table *t, const firn_field *cur, firn_err *err)
{
    for (size_t i = 0; i < t->pg->n_columns && i < t->schema->n_children; i++) {
        const firn_field *f = t->schema->children[i];
        const firn_field *c = child_named(cur, f->name);
        if (!c || c->meta || nested(c) || nested(f) || firn_type_can_promote(c, f))
            continue;
        t->incompatible = true;
        return firn__table_incompatible(t, f->name, c, t->pg->columns[i].type->name, f, err);
    }
    return FIRN_OK;
}

/* True when a promotion changes how key values are encoded (firn_batch_key_encode writes the
 * stored width): a key index built before must be built again. One integer key column is the
 * exception: the index reads int and long keys alike (firn__pkindex_key). */
static bool key_encoding_changes(const firn__table *t, const firn_field *cur)
{
    for (size_t k = 0; k < t->n_key; k++) {
        const firn_field *f = t->schema->children[t->key_cols[k]];
        const firn_field *c = child_named(cur, f->name);
        if (!c || (c->type == f->type && c->precision == f->precision))
            continue;
        bool ints = (c->type == FIRN_TYPE_INT || c->type == FIRN_TYPE_LONG) &&
                    (f->type == FIRN_TYPE_INT || f->type == FIRN_TYPE_LONG);
        if (!(ints && t->n_key == 1))
            return true;
    }
    return false;
}

/* The copy of an empty source table has no snapshot to carry its marker: a table property
 * does (eng_backfill.c). */
static bool empty_backfill_marked(const firn_table_metadata *md)
{
    const char *bf = firn_props_get(&md->properties, FIRN_SUMMARY_BACKFILL);
    return bf && strcmp(bf, "done") == 0;
}

bool firn__table_written(const firn_table_metadata *md)
{
    return firn_table_metadata_current_snapshot(md) || empty_backfill_marked(md);
}

/* A commit made after the initial copy was complete (FIRN_SUMMARY_COPY): it stands for the
 * "done" marker, which may belong to an expired snapshot. */
static bool copy_marked(const firn_snapshot *s)
{
    const char *v = firn_props_get(&s->summary, FIRN_SUMMARY_COPY);
    return v && strcmp(v, "done") == 0;
}

/* The newest backfill marker of the main branch is "done" (read_progress's rule). */
static bool copy_done(const firn_table_metadata *md)
{
    if (empty_backfill_marked(md))
        return true;
    for (const firn_snapshot *s = firn_table_metadata_current_snapshot(md); s;
         s = s->parent_snapshot_id >= 0 ? firn_table_metadata_snapshot(md, s->parent_snapshot_id)
                                        : NULL) {
        const char *bf = firn_props_get(&s->summary, FIRN_SUMMARY_BACKFILL);
        if (bf)
            return strcmp(bf, "done") == 0;
        if (copy_marked(s))
            return true;
    }
    return false;
}

bool firn__table_settled(const firn_table_metadata *md, firn_sync_mode mode)
{
    return mode == FIRN_SYNC_FULL_REFRESH_CDC ? copy_done(md) : firn__table_written(md);
}

/* True when top-level field id is the source of a field of md's partition spec or one of s's
 * identifier fields: Iceberg keeps such a column. */
static bool field_pinned(const firn_table_metadata *md, const firn_schema *s, int32_t id)
{
    const firn_partition_spec *spec = firn_table_metadata_spec(md);
    for (size_t i = 0; spec && i < spec->n_fields; i++) {
        if (spec->fields[i].source_id == id)
            return true;
    }
    for (size_t i = 0; i < s->n_identifier_field_ids; i++) {
        if (s->identifier_field_ids[i] == id)
            return true;
    }
    return false;
}

/* A table not settled yet (firn__table_settled: nothing committed, or a first copy not finished)
 * has no rows a reader may rely on: its columns that t->schema lacks (left out with `columns`
 * since, or dropped at the source) are dropped from a copy of base, so that the copy matches
 * the streams file (rows an unfinished copy committed keep them in their files, where no reader
 * sees them). NULL when there is none to drop. */
static firn_schema *narrow_unsettled(const firn__table *t, const firn_schema *base)
{
    const firn_table_metadata *md = t->cat.metadata;
    if (firn__table_settled(md, t->stream->sync_mode))
        return NULL;
    firn_schema *s = NULL;
    for (size_t i = base->root->n_children; i-- > 0;) {
        const firn_field *f = base->root->children[i];
        if (child_named(t->schema, f->name) || field_pinned(md, base, f->id))
            continue;
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "table \"%s\": %s: column \"%s\", no longer copied, is dropped from its schema",
                 t->display,
                 firn__table_written(md) ? "its first copy is not finished"
                                         : "nothing committed yet",
                 f->name);
        s = s ? s : firn_schema_clone(base);
        firn_field **ch = s->root->children;
        firn_field_free(ch[i]);
        memmove(&ch[i], &ch[i + 1], (s->root->n_children - 1 - i) * sizeof(*ch));
        s->root->n_children--;
    }
    return s;
}

/* The schema update of ch: next (last column id last), renames included, with the source
 * columns' attnums (FIRN_PROP_ATTNUMS). */
static firn_rc schema_changes(firn__table *t,
                              const firn_schema *cur,
                              const firn_schema *next,
                              int32_t last,
                              firn_table_changes *ch,
                              firn_err *err)
{
    const firn_table_metadata *md = t->cat.metadata;
    firn_table_changes_require_uuid(ch, md->table_uuid);
    firn_table_changes_require(ch, FIRN_REQ_ASSERT_CURRENT_SCHEMA_ID, cur->schema_id);
    firn_table_changes_require(ch, FIRN_REQ_ASSERT_LAST_ASSIGNED_FIELD_ID, md->last_column_id);
    firn_table_changes_add_schema(ch, next, last);
    firn_table_changes_set_current_schema(ch, -1);
    firn_buf text;
    firn_buf_init(&text, 1 << 16);
    firn_rc rc = firn__rename_attnums_text(t, next->root, &text);
    if (rc == FIRN_OK && text.len > 0)
        firn_table_changes_set_property(ch, FIRN_PROP_ATTNUMS, (const char *)text.data);
    firn_buf_deinit(&text);
    if (rc)
        return firn_err_set(err, rc, "could not record the column attnums of table \"%s\"",
                            t->display);
    return FIRN_OK;
}

/* What commit_schema is asked (narrow: narrow_unsettled) and found (added: the new schema has
 * columns its base lacked). */
typedef struct schema_ctx {
    bool narrow;
    bool added;
} schema_ctx;

/* One attempt of commit_schema, from the metadata t holds (firn__table_meta_commit runs it again
 * after a transient error, a lost reply or a conflict, on the reloaded metadata): nothing is
 * committed when that schema already is what the source needs (the change landed, or another
 * writer made it). ctx: a schema_ctx. */
static firn_rc commit_schema_once(firn__table *t, void *ctx, firn_err *err)
{
    schema_ctx *sc = ctx;
    const bool narrow = sc->narrow;
    const firn_table_metadata *md = t->cat.metadata;
    const firn_schema *cur = firn_table_metadata_schema(md);
    /* Renamed source columns keep their fields (ids): the base is renamed first. */
    firn_schema *renamed = firn__rename_apply(t, cur);
    firn_schema *narrowed = narrow ? narrow_unsettled(t, renamed ? renamed : cur) : NULL;
    if (narrowed) {
        firn_schema_free(renamed);
        renamed = narrowed;
    }
    const firn_schema *base = renamed ? renamed : cur;
    int32_t last = md->last_column_id;
    firn_schema *next = NULL;
    bool changed = false;
    firn_table_changes ch;
    firn_table_changes_init(&ch);
    firn_rc rc = check_promotions(t, base->root, err);
    if (rc == FIRN_OK) {
        t->key_retyped |= key_encoding_changes(t, base->root);
        rc = firn_schema_evolve(base, t->schema, &last, &next, &changed, err);
    }
    changed = rc == FIRN_OK && (changed || renamed != NULL) && !firn_schema_same(cur, next);
    sc->added |= changed && next->root->n_children > base->root->n_children;
    if (changed)
        rc = schema_changes(t, cur, next, last, &ch, err);
    firn_catalog_table out = {0};
    if (rc == FIRN_OK && changed)
        rc = firn_catalog_commit(t->eng->catalog, t->ns, t->name, &ch, &out, err);
    if (rc == FIRN_OK && changed) {
        firn_catalog_table_deinit(&t->cat);
        t->cat = out;
        FIRN_LOG(FIRN_LOG_INFO, "engine", "table \"%s\": schema evolved to id %d", t->display,
                 firn_table_metadata_schema(t->cat.metadata)->schema_id);
    }
    if (rc == FIRN_OK) {
        firn_strlist_clear(&t->rename_from);
        firn_strlist_clear(&t->rename_to);
    }
    firn_table_changes_deinit(&ch);
    firn_schema_free(next);
    firn_schema_free(renamed);
    return rc;
}

/* Commits t->schema's columns the table lacks, its promotions and renames as a new current
 * schema, retried like a metadata commit (firn__table_meta_commit); with narrow, a table not
 * settled also loses the columns t->schema lacks (narrow_unsettled). *out_added (may be NULL):
 * columns were added. */
static firn_rc commit_schema(firn__table *t, bool narrow, bool *out_added, firn_err *err)
{
    schema_ctx sc = {narrow, false};
    firn_rc rc = firn__table_meta_commit(t, commit_schema_once, &sc, err);
    if (out_added)
        *out_added = rc == FIRN_OK && sc.added;
    return rc;
}

/* Brings the table schema in step with the source: new columns, promotions (DESIGN.md
 * "Schema evolution"). */
static firn_rc evolve_schema(firn__table *t, bool *out_added, firn_err *err)
{
    const firn_field *root = firn_table_metadata_schema(t->cat.metadata)->root;
    firn__rename_between_runs(t, root);
    FIRN_TRY(note_defaults_added(t, root, err));
    return commit_schema(t, true, out_added, err);
}

/* Gives the batch schema the table's ids; table columns the source lacks become always-null
 * columns of the batch. */
static firn_rc align_schema(firn__table *t, firn_err *err)
{
    const firn_field *root = firn_table_metadata_schema(t->cat.metadata)->root;
    for (size_t i = 0; i < t->schema->n_children; i++) {
        firn_field *f = t->schema->children[i];
        const firn_field *s = child_named(root, f->name);
        if (!s)
            return firn_err_set(err, FIRN_ERR_INTERNAL,
                                "column \"%s\" missing from table \"%s\" after evolution", f->name,
                                t->display);
        align_ids(f, s);
    }
    for (size_t i = 0; i < root->n_children; i++) {
        if (child_named(t->schema, root->children[i]->name))
            continue;
        firn_field *c = firn_field_clone(root->children[i]);
        c->required = false;
        c->meta = FIRN_META_NULL;
        firn_field_add(t->schema, c);
    }
    return FIRN_OK;
}

void firn__table_column_add(firn__table *t, const char *name, firn_pg_type *type)
{
    firn_pg_table *pg = t->pg;
    size_t n = pg->n_columns;
    pg->columns = firn_reallocarray(pg->columns, n + 1, sizeof(*pg->columns));
    firn_pg_column *pc = &pg->columns[n];
    memset(pc, 0, sizeof(*pc));
    pc->name = firn_strdup(name);
    pc->type = type;
    pg->n_columns = n + 1;
    /* Provisional ids past every one in use: firn_schema_evolve gives the column its table
     * ids (matching by name) and align_ids copies them back. */
    int32_t id = pg->last_field_id + 1000;
    int32_t next = id + 1;
    firn_field *f = firn_pg_type_field(type, id, name, false, &next);
    pg->last_field_id = next;
    /* The source's columns come first in the batch schema (batch column i is source column i),
     * then the metadata columns and the ones the source dropped. */
    firn_field_add(t->schema, f);
    firn_field **ch = t->schema->children;
    memmove(&ch[n + 1], &ch[n], (t->schema->n_children - 1 - n) * sizeof(*ch));
    ch[n] = f;
}

void firn__table_column_retype(firn__table *t, size_t idx, firn_pg_type *type, firn_field *field)
{
    firn_pg_column *pc = &t->pg->columns[idx];
    firn_pg_type_free(pc->type);
    pc->type = type;
    firn_field *old = t->schema->children[idx];
    field->id = old->id;
    field->required = old->required;
    t->schema->children[idx] = field;
    firn_field_free(old);
}

firn_rc firn__table_schema_apply(firn__table *t, firn_err *err)
{
    FIRN_ASSERT(firn_batch_rows(t->buf) == 0);
    FIRN_TRY(commit_schema(t, false, NULL, err));
    FIRN_TRY(align_schema(t, err));
    for (size_t i = 0; i < t->pg->n_columns; i++)
        t->pg->columns[i].field_id = t->schema->children[i]->id;
    firn_batch_free(t->buf);
    t->buf = firn_batch_new(t->schema);
    if (!t->key_retyped || !t->index)
        return FIRN_OK;
    FIRN_LOG(FIRN_LOG_INFO, "engine",
             "table \"%s\": a key column was widened: building the key index again", t->display);
    firn__table_reset_index(t);
    FIRN_TRY(firn__table_rebuild_index(t, err));
    firn__table_share_persist(t, false);
    t->key_retyped = false;
    return FIRN_OK;
}

bool firn__table_backfill_is_last(const firn__table *t)
{
    const firn_table_metadata *md = t->cat.metadata;
    const firn_snapshot *s = firn_table_metadata_current_snapshot(md);
    if (!s)
        return empty_backfill_marked(md);
    const char *bf = firn_props_get(&s->summary, FIRN_SUMMARY_BACKFILL);
    return bf && strcmp(bf, "done") == 0;
}

void firn__table_restart_backfill(firn__table *t)
{
    if (t->halted)
        return; /* not copied into a schema it cannot take: its remedy copies it */
    t->needs_backfill = true;
    firn_free(t->backfill_chunks);
    t->backfill_chunks = NULL;
    if (t->index)
        firn__table_reset_index(t);
}

/* The marker of a transaction committed in parts (FIRN_SUMMARY_PART_LSN), from the snapshot
 * holding the newest firn.lsn: kept when it is past that position. */
static void read_part(firn__table *t, const firn_props *summary)
{
    const char *lsn = firn_props_get(summary, FIRN_SUMMARY_PART_LSN);
    const char *n = firn_props_get(summary, FIRN_SUMMARY_PART_CHANGES);
    uint64_t v = 0, count = 0;
    t->part_lsn = 0;
    t->part_changes = 0;
    if (!lsn || !n || firn_parse_u64(lsn, strlen(lsn), &v, NULL) ||
        firn_parse_u64(n, strlen(n), &count, NULL) || v <= t->committed_lsn)
        return;
    t->part_lsn = v;
    t->part_changes = count;
    FIRN_LOG(FIRN_LOG_INFO, "engine",
             "table \"%s\" holds the first %llu changes of the transaction committed at %X/%X: "
             "they are skipped when it is read again",
             t->display, (unsigned long long)count, (unsigned)(v >> 32), (unsigned)v);
}

/* Walks the main branch back from the current snapshot: the newest firn.lsn and whether the
 * initial copy was committed (by a snapshot, or for an empty source table by the table
 * property). */
static void read_progress(firn__table *t, bool *backfill_done)
{
    const firn_table_metadata *md = t->cat.metadata;
    const firn_snapshot *s = firn_table_metadata_current_snapshot(md);
    bool have_lsn = false, partial = false;
    *backfill_done = empty_backfill_marked(md);
    t->committed_lsn = 0;
    t->part_lsn = 0;
    t->part_changes = 0;
    while (s) {
        const char *lsn = firn_props_get(&s->summary, FIRN_SUMMARY_LSN);
        if (lsn && !have_lsn) {
            uint64_t v = 0;
            if (firn_parse_u64(lsn, strlen(lsn), &v, NULL) == FIRN_OK)
                t->committed_lsn = v;
            read_part(t, &s->summary);
            have_lsn = true;
        }
        const char *bf = firn_props_get(&s->summary, FIRN_SUMMARY_BACKFILL);
        if (!bf && copy_marked(s))
            bf = "done";
        if (bf && strcmp(bf, "done") == 0 && !partial) {
            *backfill_done = true;
            break;
        }
        if (bf && strcmp(bf, "partial") == 0 && !partial && !*backfill_done) {
            /* The newest marker is an unfinished copy: it is pending again. */
            const char *chunks = firn_props_get(&s->summary, FIRN_SUMMARY_BACKFILL_CHUNKS);
            partial = true;
            firn_free(t->backfill_chunks);
            t->backfill_chunks = firn_strdup(chunks ? chunks : "");
        }
        if ((*backfill_done || partial) && have_lsn)
            break;
        s = s->parent_snapshot_id >= 0 ? firn_table_metadata_snapshot(md, s->parent_snapshot_id)
                                       : NULL;
    }
}

/* A column added with a DEFAULT holds, in the rows that existed then, a value no WAL change
 * carries: a full_refresh_cdc table is copied again in this run (after its schema was read, so
 * the copy holds every such value); other sync modes cannot copy and say so. */
static void recopy_for_defaults(firn__table *t)
{
    if (t->default_added.count == 0 || t->needs_backfill ||
        t->stream->sync_mode == FIRN_SYNC_FULL_REFRESH)
        return;
    if (t->stream->sync_mode != FIRN_SYNC_FULL_REFRESH_CDC) {
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "column \"%s\" was added to source table %s with a DEFAULT: rows of table \"%s\" "
                 "from before stay null there until they change (sync mode %s cannot copy the "
                 "table again)",
                 t->default_added.items[0], t->pg->qualified, t->display,
                 firn_sync_mode_name(t->stream->sync_mode));
        return;
    }
    FIRN_LOG(FIRN_LOG_WARN, "engine",
             "column \"%s\" was added to source table %s with a DEFAULT, which PostgreSQL gives "
             "the existing rows without a change in the WAL: copying table \"%s\" again",
             t->default_added.items[0], t->pg->qualified, t->display);
    firn__table_restart_backfill(t);
}

/* An unfinished first copy that gained a column (selected since, or added at the source) would
 * resume with it while the chunks it committed hold null there: it copies again from the start
 * (its first commit replaces those rows), so that the copy matches the streams file. */
static void recopy_unfinished(firn__table *t, bool added)
{
    if (!added || !t->needs_backfill || !t->backfill_chunks ||
        t->stream->sync_mode != FIRN_SYNC_FULL_REFRESH_CDC)
        return;
    FIRN_LOG(FIRN_LOG_WARN, "engine",
             "table \"%s\": its first copy is not finished and it has a new column: copying it "
             "again from the start",
             t->display);
    firn__table_restart_backfill(t);
}

/* A CDC stream whose source has a type its table cannot take: stopped, not the whole run; its
 * changes stay in the slot (eng_cdc.c halt_table) and the run ends with the error. */
static firn_rc halt_at_open(firn__table *t, firn_err *err)
{
    const firn_sync_mode mode = t->stream->sync_mode;
    if (mode != FIRN_SYNC_FULL_REFRESH_CDC && mode != FIRN_SYNC_CDC_ONLY)
        return FIRN_ERR_SCHEMA;
    FIRN_LOG(FIRN_LOG_ERROR, "engine", "%s", err->msg);
    if (!t->eng->halt.code)
        t->eng->halt = *err;
    firn_err_clear(err);
    t->halted = true;
    return FIRN_OK;
}

/* The names of the key columns, ", "-separated, into out. */
static void key_names(const firn_field *root, const int32_t *ids, size_t n, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && len < cap; i++) {
        const char *name = "?";
        for (size_t c = 0; c < root->n_children; c++) {
            if (root->children[c]->id == ids[i])
                name = root->children[c]->name;
        }
        int w = snprintf(out + len, cap - len, "%s\"%s\"", i ? ", " : "", name);
        if (w < 0)
            break;
        len += (size_t)w;
    }
}

/* An existing upsert table records its key as identifier fields: a stream whose key differs (a
 * primary_key added or changed in the streams file, a new primary key at the source) would look
 * rows up by the new key in an index and table keyed by the old one, leaving duplicates and
 * missing deletes. */
static firn_rc check_key_unchanged(const firn__table *t, firn_err *err)
{
    const firn_schema *cur = firn_table_metadata_schema(t->cat.metadata);
    if (!t->upsert || t->eqdel || t->multiset || !t->eng->cfg->destination.identifier_fields ||
        cur->n_identifier_field_ids == 0)
        return FIRN_OK;
    int32_t want[32];
    for (size_t i = 0; i < t->n_key; i++)
        want[i] = t->schema->children[t->key_cols[i]]->id;
    bool same = cur->n_identifier_field_ids == t->n_key;
    for (size_t i = 0; same && i < t->n_key; i++) {
        bool found = false;
        for (size_t j = 0; j < cur->n_identifier_field_ids; j++)
            found |= cur->identifier_field_ids[j] == want[i];
        same = found;
    }
    if (same)
        return FIRN_OK;
    char have_s[160], want_s[160];
    key_names(cur->root, cur->identifier_field_ids, cur->n_identifier_field_ids, have_s,
              sizeof(have_s));
    key_names(t->schema, want, t->n_key, want_s, sizeof(want_s));
    return firn_err_set(err, FIRN_ERR_CONFIG,
                        "table \"%s\" is keyed by %s but the stream's key is %s; set "
                        "primary_key back, or drop the table and sync again to copy it with the "
                        "new key",
                        t->display, have_s, want_s);
}

/* The streams file's partition is read when firn creates a table; an existing table keeps its
 * own spec, so a partition added or changed later would otherwise be ignored without a word. */
static void warn_spec_change(const firn__table *t)
{
    firn_partition_spec *want = NULL;
    firn_err e = {0};
    if (build_spec(t, t->schema, &want, &e))
        return; /* the stream checks name the mistake */
    const firn_partition_spec *have = firn_table_metadata_spec(t->cat.metadata);
    size_t n_have = have ? have->n_fields : 0, n_want = want ? want->n_fields : 0;
    bool same = n_have == n_want;
    for (size_t i = 0; same && i < n_want; i++) {
        const firn_partition_field *a = &have->fields[i], *b = &want->fields[i];
        same = a->source_id == b->source_id && a->transform.kind == b->transform.kind &&
               a->transform.param == b->transform.param;
    }
    if (!same)
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "table \"%s\": its partition spec (%zu fields) is not the stream's \"partition\" "
                 "(%zu fields); firn keeps the table's spec: drop the table and sync again to "
                 "partition it as the streams file says",
                 t->display, n_have, n_want);
    firn_partition_spec_free(want);
}

firn_rc firn__table_open(firn__table *t, firn_err *err)
{
    pthread_mutex_init(&t->mu, NULL);
    int32_t next_id = t->pg->last_field_id;
    t->schema = t->pg->schema;
    if (t->eng->cfg->destination.metadata_columns) {
        FIRN_TRY(check_meta_names(t, err));
        add_meta_fields(t->schema, &next_id);
    }
    t->n_key = t->pg->n_key < 32 ? t->pg->n_key : 32;
    for (size_t i = 0; i < t->n_key; i++)
        t->key_cols[i] = (uint32_t)t->pg->key_columns[i];
    bool exists = false;
    FIRN_TRY(firn_catalog_table_exists(t->eng->catalog, t->ns, t->name, &exists, err));
    if (exists)
        FIRN_TRY(firn_catalog_load_table(t->eng->catalog, t->ns, t->name, &t->cat, err));
    if (t->multiset)
        firn__multiset_open(t, exists);
    for (size_t i = 0; i < t->schema->n_children; i++) {
        if (!t->upsert || (t->soft_delete && !is_key_column(t, i)))
            make_optional(t->schema->children[i]);
    }
    if (!exists)
        FIRN_TRY(create_table(t, err));
    FIRN_TRY(check_location(t, err));
    int fv = t->cat.metadata->format_version;
    t->dv = fv >= 3;
    const int want_fv = (int)t->eng->cfg->destination.format_version;
    if (exists && fv > want_fv) /* a declared reader may not read it: say so */
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "table \"%s\": exists with format version %d, but the destination asks for %d "
                 "(%s); firn keeps writing version %d (format versions only go up): drop the "
                 "table and sync again to have version %d",
                 t->display, fv, want_fv, t->eng->cfg->destination.format_reason, fv, want_fv);
    else if (exists && fv != want_fv)
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "table \"%s\": exists with format version %d, kept (%s); deletes are %s",
                 t->display, fv, t->eng->cfg->destination.format_reason,
                 t->eqdel ? "equality deletes"
                 : t->dv  ? "deletion vectors"
                          : "position deletes");
    bool added = false;
    firn_rc rc = evolve_schema(t, &added, err);
    if (rc == FIRN_ERR_SCHEMA && t->incompatible)
        rc = halt_at_open(t, err);
    FIRN_TRY(rc);
    /* A stream stopped here writes nothing: its schema stays the source's, as that of a stopped
     * stream whose source table is missing (the evolution stopped part way, so columns the
     * source added later are not in the table, and aligning would fail on them). */
    if (!t->halted)
        FIRN_TRY(align_schema(t, err));
    if (exists) {
        FIRN_TRY(check_key_unchanged(t, err));
        warn_spec_change(t);
    }
    bool backfill_done = false;
    read_progress(t, &backfill_done);
    if (t->halted) {
        t->halt_lsn = t->committed_lsn;
        t->cdc = true;
        t->buf = firn_batch_new(t->schema);
        return FIRN_OK;
    }
    if (t->stream->sync_mode == FIRN_SYNC_FULL_REFRESH_CDC ||
        t->stream->sync_mode == FIRN_SYNC_CDC_ONLY)
        FIRN_TRY(firn__rename_save_attnums(t, err)); /* renames between runs are found by it */
    bool wants_backfill = t->stream->sync_mode == FIRN_SYNC_FULL_REFRESH ||
                          (t->stream->sync_mode == FIRN_SYNC_FULL_REFRESH_CDC && !backfill_done);
    t->needs_backfill = wants_backfill;
    t->cdc = t->stream->sync_mode == FIRN_SYNC_FULL_REFRESH_CDC ||
             t->stream->sync_mode == FIRN_SYNC_CDC_ONLY;
    t->buf = firn_batch_new(t->schema);
    if (t->eqdel)
        return firn__eqdel_open(t, err);
    if (t->upsert) {
        bool rebuild = !t->needs_backfill || t->stream->sync_mode != FIRN_SYNC_FULL_REFRESH;
        /* A saved index holds keys in the encoding of the old key types. */
        FIRN_TRY(firn__table_open_index(t, rebuild && !t->key_retyped, err));
        if (rebuild)
            FIRN_TRY(firn__table_rebuild_index(t, err));
        if (rebuild)
            firn__table_share_persist(t, false); /* a rebuilt index, nothing next to the table */
        t->key_retyped = false;
    }
    recopy_for_defaults(t);
    recopy_unfinished(t, added);
    return FIRN_OK;
}

firn_rc firn__table_open_stopped(firn__table *t, firn_err *err)
{
    pthread_mutex_init(&t->mu, NULL);
    t->schema = t->pg->schema;
    bool exists = false, backfill_done = false;
    FIRN_TRY(firn_catalog_table_exists(t->eng->catalog, t->ns, t->name, &exists, err));
    if (exists) {
        FIRN_TRY(firn_catalog_load_table(t->eng->catalog, t->ns, t->name, &t->cat, err));
        read_progress(t, &backfill_done);
    } else {
        const firn_stream_state *st =
            firn_state_stream(&t->eng->state, t->stream->namespace, t->stream->name, false);
        t->committed_lsn = st ? st->committed_lsn : 0;
    }
    const firn_sync_mode mode = t->stream->sync_mode;
    t->halted = true;
    t->halt_lsn = t->committed_lsn;
    t->cdc = mode == FIRN_SYNC_FULL_REFRESH_CDC || mode == FIRN_SYNC_CDC_ONLY;
    t->buf = firn_batch_new(t->schema);
    return FIRN_OK;
}

/* ---- index rebuild ------------------------------------------------------------------------ */

firn_rc firn__file_range_read(void *ctx, uint64_t offset, size_t len, firn_buf *out, firn_err *err)
{
    const firn__file_range *r = ctx;
    return firn_io_read_range(r->io, r->path, offset, len, out, err);
}

/* Deleted rows of one data file (its DV and position deletes) and where its DV lives. */
typedef struct dead_rows {
    char *path;
    firn_bitmap64 *rows;
    char *dv_path; /* NULL: no DV */
    int64_t dv_offset, dv_size;
} dead_rows;

/* A position-delete file read while loading and the data files it deletes from. */
typedef struct seen_delfile {
    char *path;
    char **data; /* distinct data file locations */
    size_t n_data;
} seen_delfile;

typedef struct dead_set {
    dead_rows *files;
    size_t n;
    seen_delfile *dels;
    size_t n_dels;
    size_t last; /* the entry found last (position-delete rows come sorted by path) */
    bool sorted;
} dead_set;

static int cmp_dead(const void *a, const void *b)
{
    return strcmp(((const dead_rows *)a)->path, ((const dead_rows *)b)->path);
}

/* The entry of path: created when missing while loading, looked up by bisection after
 * dead_sort. */
static dead_rows *dead_for(dead_set *d, const char *path, bool create)
{
    if (d->sorted) {
        if (d->n == 0)
            return NULL;
        dead_rows key = {(char *)path, NULL, NULL, 0, 0};
        return bsearch(&key, d->files, d->n, sizeof(*d->files), cmp_dead);
    }
    if (d->last < d->n && strcmp(d->files[d->last].path, path) == 0)
        return &d->files[d->last];
    for (size_t i = 0; i < d->n; i++) {
        if (strcmp(d->files[i].path, path) == 0) {
            d->last = i;
            return &d->files[i];
        }
    }
    if (!create)
        return NULL;
    d->files = firn_reallocarray(d->files, d->n + 1, sizeof(*d->files));
    dead_rows *r = &d->files[d->n];
    memset(r, 0, sizeof(*r));
    r->path = firn_strdup(path);
    r->rows = firn_bitmap64_new();
    d->last = d->n++;
    return r;
}

static void dead_sort(dead_set *d)
{
    if (d->n > 1)
        qsort(d->files, d->n, sizeof(*d->files), cmp_dead);
    d->sorted = true;
}

static void dead_free(dead_set *d)
{
    for (size_t i = 0; i < d->n; i++) {
        firn_free(d->files[i].path);
        firn_bitmap64_free(d->files[i].rows);
        firn_free(d->files[i].dv_path);
    }
    firn_free(d->files);
    for (size_t i = 0; i < d->n_dels; i++) {
        for (size_t k = 0; k < d->dels[i].n_data; k++)
            firn_free(d->dels[i].data[k]);
        firn_free(d->dels[i].data);
        firn_free(d->dels[i].path);
    }
    firn_free(d->dels);
}

/* Tracks (v2) every position-delete file read with the live data files it deletes from: a
 * consolidation may replace it (rows of data files no longer live need no delete, so a file
 * of only such rows, a dangling delete, simply goes). */
static void track_delfiles(firn__table *t, const dead_set *d)
{
    if (t->dv || d->n_dels == 0)
        return;
    firn__keymap *live = firn__keymap_new();
    for (uint32_t o = 0; o < t->n_files; o++) {
        if (t->dv_files[o].gone)
            continue;
        firn__pkloc v = {o, 0};
        const char *p = t->files[o].file_path;
        firn__keymap_put(live, (const uint8_t *)p, strlen(p), v);
    }
    for (size_t i = 0; i < d->n_dels; i++) {
        const seen_delfile *s = &d->dels[i];
        uint32_t *ords = firn_calloc(s->n_data ? s->n_data : 1, sizeof(uint32_t));
        size_t n = 0;
        for (size_t k = 0; k < s->n_data; k++) {
            firn__pkloc v;
            if (firn__keymap_get(live, (const uint8_t *)s->data[k], strlen(s->data[k]), &v))
                ords[n++] = v.file;
        }
        firn__delfiles_add(t, s->path, ords, n);
        firn_free(ords);
    }
    firn__keymap_free(live);
}

/* Opens a Parquet file through FileIO with a field selection. */
static firn_rc open_reader(firn__table *t,
                           const char *path,
                           uint64_t size,
                           const firn_field *select,
                           firn__file_range *rc_ctx,
                           firn_pq_reader **out,
                           firn_err *err)
{
    rc_ctx->io = t->eng->io;
    rc_ctx->path = path;
    FIRN_TRY(firn_pq_reader_open(firn__file_range_read, rc_ctx, size, out, err));
    firn_rc rc = firn_pq_reader_select(*out, select, err);
    if (rc) {
        firn_pq_reader_free(*out);
        *out = NULL;
        firn_err_context(err, "while reading \"%s\"", path);
    }
    return rc;
}

static firn_rc
load_position_deletes(firn__table *t, const firn_data_file *f, dead_set *dead, firn_err *err)
{
    firn_field *sel = firn_field_new(0, "", FIRN_TYPE_STRUCT, true);
    firn_field_add(sel, firn_field_new(2147483546, "file_path", FIRN_TYPE_STRING, true));
    firn_field_add(sel, firn_field_new(2147483545, "pos", FIRN_TYPE_LONG, true));
    firn_batch *b = firn_batch_new(sel);
    firn__file_range ctx;
    firn_pq_reader *r = NULL;
    dead->dels = firn_reallocarray(dead->dels, dead->n_dels + 1, sizeof(*dead->dels));
    seen_delfile *seen = &dead->dels[dead->n_dels++];
    memset(seen, 0, sizeof(*seen));
    seen->path = firn_strdup(f->file_path);
    firn_rc rc = open_reader(t, f->file_path, (uint64_t)f->file_size_in_bytes, sel, &ctx, &r, err);
    for (size_t g = 0; rc == FIRN_OK && g < firn_pq_reader_row_groups(r); g++) {
        rc = firn_pq_reader_read_row_group(r, g, b, err);
        if (rc)
            break;
        firn_column *paths = firn_batch_column(b, 0);
        const uint32_t *off = firn_column_offsets(paths);
        const int64_t *pos = firn_column_values(firn_batch_column(b, 1));
        for (size_t i = 0; i < firn_batch_rows(b); i++) {
            char *p =
                firn_strndup((const char *)firn_column_data(paths) + off[i], off[i + 1] - off[i]);
            dead_rows *d = dead_for(dead, p, true);
            firn_bitmap64_add(d->rows, (uint64_t)pos[i]);
            bool known = false; /* rows come sorted by path: mostly the last one */
            for (size_t k = seen->n_data; !known && k-- > 0;)
                known = strcmp(seen->data[k], p) == 0;
            if (!known) {
                seen->data = firn_reallocarray(seen->data, seen->n_data + 1, sizeof(char *));
                seen->data[seen->n_data++] = p;
            } else {
                firn_free(p);
            }
        }
    }
    firn_pq_reader_free(r);
    firn_batch_free(b);
    firn_field_free(sel);
    return rc;
}

/* A live DV: its rows join the data file's deleted rows, its location is remembered. */
static firn_rc load_dv(firn__table *t, const firn_data_file *f, dead_set *dead, firn_err *err)
{
    firn_bitmap64 *rows = NULL;
    FIRN_TRY(firn__dv_load(t, f, &rows, err));
    dead_rows *d = dead_for(dead, f->referenced_data_file, true);
    firn_bitmap64_or(d->rows, rows);
    firn_bitmap64_free(rows);
    if (d->dv_path)
        return firn_err_set(err, FIRN_ERR_PARSE,
                            "table \"%s\": data file \"%s\" has two deletion vectors (\"%s\", "
                            "\"%s\")",
                            t->display, d->path, d->dv_path, f->file_path);
    d->dv_path = firn_strdup(f->file_path);
    d->dv_offset = f->content_offset;
    d->dv_size = f->content_size_in_bytes;
    return FIRN_OK;
}

/* The table keeps the deleted rows (and for v3 the DV) of each data file. */
static void take_dead(firn__table *t, uint32_t ord, dead_rows *dead)
{
    if (!dead)
        return;
    firn__dvfile *dv = &t->dv_files[ord];
    dv->dead = dead->rows;
    dead->rows = NULL;
    dv->dv_path = dead->dv_path;
    dead->dv_path = NULL;
    dv->dv_offset = dead->dv_offset;
    dv->dv_size = dead->dv_size;
}

/* A loaded index already holds the keys of the data file: it only takes its ordinal. */
static firn_rc
place_data_file(firn__table *t, const firn_data_file *f, dead_rows *dead, firn_err *err)
{
    uint32_t ord;
    FIRN_TRY(firn__table_index_place(t, f, &ord, err));
    take_dead(t, ord, dead);
    return FIRN_OK;
}

/* Adds every live row of one data file to the index; a v3 table keeps its deleted rows and DV.
 * With lookup (catching a loaded index up), a key the index has is moved, keeping the count. */
static firn_rc index_data_file(
    firn__table *t, const firn_data_file *f, dead_rows *dead, bool lookup, firn_err *err)
{
    firn_field *sel = firn_field_new(0, "", FIRN_TYPE_STRUCT, true);
    for (size_t k = 0; k < t->n_key; k++)
        firn_field_add(sel, firn_field_clone(t->schema->children[t->key_cols[k]]));
    uint32_t cols[32];
    for (size_t k = 0; k < t->n_key; k++)
        cols[k] = (uint32_t)k;
    firn_batch *b = firn_batch_new(sel);
    firn__file_range ctx;
    firn_pq_reader *r = NULL;
    firn_buf key;
    firn_buf_init(&key, 1 << 20);
    uint32_t ord = firn__table_add_file(t, f);
    take_dead(t, ord, dead);
    const firn_bitmap64 *gone = dead ? (dead->rows ? dead->rows : t->dv_files[ord].dead) : NULL;
    firn_rc rc = open_reader(t, f->file_path, (uint64_t)f->file_size_in_bytes, sel, &ctx, &r, err);
    for (size_t g = 0; rc == FIRN_OK && g < firn_pq_reader_row_groups(r); g++) {
        rc = firn_pq_reader_read_row_group(r, g, b, err);
        uint64_t first = firn_pq_reader_row_group_first_row(r, g);
        for (size_t i = 0; rc == FIRN_OK && i < firn_batch_rows(b); i++) {
            int64_t pos = (int64_t)(first + i);
            if (gone && firn_bitmap64_contains(gone, (uint64_t)pos))
                continue;
            firn_buf_reset(&key);
            rc = firn_batch_key_encode(b, i, cols, t->n_key, &key);
            firn__pkloc loc = {ord, (uint32_t)pos};
            if (rc == FIRN_OK && t->multiset) /* one more copy of the row */
                rc = firn__multiset_add(t, key.data, key.len, loc, err);
            else if (rc == FIRN_OK && lookup)
                rc = firn__pkindex_put(t->index, key.data, key.len, loc, err);
            else if (rc == FIRN_OK) /* keys of a consistent table are unique: no lookup */
                rc = firn__pkindex_set(t->index, firn__pkindex_key(t->index, key.data, key.len),
                                       loc, false, err);
        }
    }
    firn_buf_deinit(&key);
    firn_pq_reader_free(r);
    firn_batch_free(b);
    firn_field_free(sel);
    return rc;
}

/* Collects the live entries of every manifest of the current snapshot. */
static firn_rc live_files(firn__table *t, firn_manifest ***out, size_t *out_n, firn_err *err)
{
    *out = NULL;
    *out_n = 0;
    const firn_snapshot *s = firn_table_metadata_current_snapshot(t->cat.metadata);
    if (!s)
        return FIRN_OK;
    firn_manifest_file *mfs = NULL;
    size_t n = 0;
    FIRN_TRY(firn_manifest_list_read(t->eng->io, s->manifest_list, &mfs, &n, err));
    firn_manifest **ms = firn_calloc(n ? n : 1, sizeof(*ms));
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; i < n && rc == FIRN_OK; i++)
        rc = firn_manifest_read(t->eng->io, &mfs[i], &ms[i], err);
    firn_manifest_files_free(mfs, n);
    if (rc) {
        for (size_t i = 0; i < n; i++)
            firn_manifest_free(ms[i]);
        firn_free(ms);
        return rc;
    }
    *out = ms;
    *out_n = n;
    return FIRN_OK;
}

static void dead_of(void *ctx, const char *path, firn__eqconv_dead *out)
{
    dead_rows *d = dead_for(ctx, path, false);
    out->rows = d ? d->rows : NULL;
    out->dv_path = d ? d->dv_path : NULL;
    out->dv_offset = d ? d->dv_offset : 0;
}

/* A table written in equality-delete mode, now opened with the key index: its equality deletes
 * become position deletes or DVs in one commit (the index cannot take equality deletes). */
static firn_rc convert_equality_deletes(
    firn__table *t, firn_manifest **ms, size_t n, dead_set *dead, firn_err *err)
{
    FIRN_LOG(FIRN_LOG_INFO, "engine", "table \"%s\" has equality deletes: converting them into %s",
             t->display, t->dv ? "deletion vectors" : "position deletes");
    firn__eqconv c;
    FIRN_TRY(firn__eqconv_resolve(t, ms, n, &c, err));
    firn_rc rc = firn__eqconv_commit(t, &c, dead_of, dead, err);
    firn__eqconv_free(&c);
    if (rc)
        firn_err_context(err, "while converting the equality deletes of table \"%s\"", t->display);
    return rc;
}

/* Reads deletes (position files, DVs) and then indexes (or, for a loaded index, places) every
 * live data file. */
static firn_rc rebuild_once(firn__table *t, bool *out_converted, firn_err *err)
{
    firn_manifest **ms = NULL;
    size_t n = 0;
    FIRN_TRY(live_files(t, &ms, &n, err));
    dead_set dead = {0};
    firn_rc rc = FIRN_OK;
    int64_t t0 = firn_monotonic_ns();
    bool loaded = t->index_loaded, has_eq = false;
    size_t n_index = n; /* manifests whose data files are indexed */
    size_t caught = 0;  /* data files a loaded index did not know (catching up) */
    *out_converted = false;
    /* Position deletes and DVs first, so dead rows are skipped while the data files are indexed. */
    for (size_t i = 0; i < n && rc == FIRN_OK; i++) {
        for (size_t e = 0; e < ms[i]->n_entries && rc == FIRN_OK; e++) {
            const firn_manifest_entry *en = &ms[i]->entries[e];
            if (en->status == FIRN_ENTRY_DELETED)
                continue;
            if (en->file.content == FIRN_CONTENT_EQUALITY_DELETES)
                has_eq = true;
            else if (firn_data_file_is_dv(&en->file))
                rc = load_dv(t, &en->file, &dead, err);
            else if (en->file.content == FIRN_CONTENT_POSITION_DELETES)
                rc = load_position_deletes(t, &en->file, &dead, err);
        }
    }
    dead_sort(&dead);
    if (rc == FIRN_OK && has_eq) {
        rc = convert_equality_deletes(t, ms, n, &dead, err);
        *out_converted = rc == FIRN_OK; /* the caller indexes the new snapshot */
        n_index = 0;
    }
    if (rc == FIRN_OK && !loaded && !t->multiset) /* a multiset looks each row up */
        rc = firn__pkindex_bulk(t->index, true, err);
    for (size_t i = 0; i < n_index && rc == FIRN_OK; i++) {
        for (size_t e = 0; e < ms[i]->n_entries && rc == FIRN_OK; e++) {
            const firn_manifest_entry *en = &ms[i]->entries[e];
            if (en->status == FIRN_ENTRY_DELETED || en->file.content != FIRN_CONTENT_DATA)
                continue;
            dead_rows *d = dead_for(&dead, en->file.file_path, false);
            rc = loaded ? place_data_file(t, &en->file, d, err)
                        : index_data_file(t, &en->file, d, false, err);
            if (rc == FIRN_ERR_NOT_FOUND && t->index_catchup) {
                /* Added after the snapshot the index holds: its live rows are the newest of
                 * their keys (older rows of a key are deleted, or in files no longer live). */
                firn_err_clear(err);
                rc = index_data_file(t, &en->file, d, true, err);
                caught++;
            }
        }
    }
    if (rc == FIRN_OK && !loaded && !t->multiset)
        rc = firn__pkindex_bulk(t->index, false, err);
    if (rc == FIRN_OK && !*out_converted)
        track_delfiles(t, &dead);
    if (rc == FIRN_OK && n_index > 0)
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "table \"%s\": key index %s: %zu keys, %zu files, %zu caught up, %.1f s",
                 t->display, loaded ? "read from local disk" : "loaded",
                 firn__pkindex_count(t->index), t->n_files, caught,
                 (double)(firn_monotonic_ns() - t0) / 1e9);
    dead_free(&dead);
    for (size_t i = 0; i < n; i++)
        firn_manifest_free(ms[i]);
    firn_free(ms);
    return rc;
}

firn_rc firn__table_rebuild_index(firn__table *t, firn_err *err)
{
    bool loaded = t->index_loaded, converted = false;
    firn_rc rc = rebuild_once(t, &converted, err);
    if (rc == FIRN_OK && converted) {
        /* Equality deletes became position deletes or DVs: index the new snapshot. */
        if (loaded)
            firn__table_index_loaded_done(t);
        firn__table_reset_index(t);
        loaded = false;
        rc = rebuild_once(t, &converted, err);
    }
    if (loaded) {
        firn__table_index_loaded_done(t);
        if (rc == FIRN_ERR_NOT_FOUND) {
            /* The saved index does not match the table after all: read the keys. */
            FIRN_LOG(FIRN_LOG_WARN, "engine", "table \"%s\": %s; rebuilding the key index",
                     t->display, err ? err->msg : firn_rc_message(rc));
            firn_err_clear(err);
            firn__table_reset_index(t);
            rc = rebuild_once(t, &converted, err);
        }
    }
    if (rc == FIRN_OK)
        firn__table_index_synced(t);
    return rc;
}

/* ---- catching the index up with other writers' commits ------------------------------------ */

static void map_path(firn__keymap *m, const char *path, uint32_t ord)
{
    firn__pkloc v = {ord, 0};
    firn__keymap_put(m, (const uint8_t *)path, strlen(path), v);
}

/* A file snapshot s removed: a data file's rows are gone (keys still pointing there need no
 * delete), a delete file can no longer be replaced. */
static void note_removed(firn__table *t, firn__keymap *paths, const firn_data_file *f)
{
    if (f->content != FIRN_CONTENT_DATA) {
        firn__delfiles_forget(t, f->file_path);
        return;
    }
    firn__pkloc v;
    if (!firn__keymap_get(paths, (const uint8_t *)f->file_path, strlen(f->file_path), &v))
        return;
    firn__dvfile *d = &t->dv_files[v.file];
    d->gone = true;
    firn_bitmap64_free(d->dead);
    d->dead = NULL;
}

/* Indexes the data files snapshot s added and notes the files it removed (entries ADDED or
 * DELETED by s in the manifests s wrote). */
static firn_rc
index_added_by(firn__table *t, const firn_snapshot *s, firn__keymap *paths, firn_err *err)
{
    firn_manifest_file *mfs = NULL;
    size_t n = 0;
    FIRN_TRY(firn_manifest_list_read(t->eng->io, s->manifest_list, &mfs, &n, err));
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; i < n && rc == FIRN_OK; i++) {
        if (mfs[i].added_snapshot_id != s->snapshot_id)
            continue;
        firn_manifest *m = NULL;
        rc = firn_manifest_read(t->eng->io, &mfs[i], &m, err);
        for (size_t e = 0; rc == FIRN_OK && e < m->n_entries; e++) {
            const firn_manifest_entry *en = &m->entries[e];
            if (en->snapshot_id != s->snapshot_id)
                continue;
            if (en->status == FIRN_ENTRY_DELETED) {
                note_removed(t, paths, &en->file);
            } else if (en->status == FIRN_ENTRY_ADDED && en->file.content == FIRN_CONTENT_DATA) {
                rc = index_data_file(t, &en->file, NULL, false, err);
                if (rc == FIRN_OK)
                    map_path(paths, en->file.file_path, (uint32_t)(t->n_files - 1));
            }
        }
        firn_manifest_free(m);
    }
    firn_manifest_files_free(mfs, n);
    return rc;
}

firn_rc
firn__table_index_since(firn__table *t, int64_t base_snapshot_id, bool *out_ok, firn_err *err)
{
    const firn_table_metadata *md = t->cat.metadata;
    const firn_snapshot *chain[256];
    size_t n = 0;
    *out_ok = false;
    for (const firn_snapshot *s = firn_table_metadata_current_snapshot(md);
         s && s->snapshot_id != base_snapshot_id;
         s = s->parent_snapshot_id >= 0 ? firn_table_metadata_snapshot(md, s->parent_snapshot_id)
                                        : NULL) {
        if (n == sizeof(chain) / sizeof(chain[0]) || s->parent_snapshot_id < 0)
            return FIRN_OK; /* too far, or base is not an ancestor: rebuild */
        chain[n++] = s;
    }
    firn__keymap *paths = firn__keymap_new();
    for (uint32_t o = 0; o < t->n_files; o++) {
        if (!t->dv_files[o].gone)
            map_path(paths, t->files[o].file_path, o);
    }
    /* Oldest first, so a key rewritten twice ends at its newest row. */
    firn_rc rc = FIRN_OK;
    while (n > 0 && rc == FIRN_OK)
        rc = index_added_by(t, chain[--n], paths, err);
    firn__keymap_free(paths);
    *out_ok = rc == FIRN_OK;
    return rc;
}
