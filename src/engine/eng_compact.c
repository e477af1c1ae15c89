/* SPDX-License-Identifier: Apache-2.0 */
/* Small-file compaction of format-2 upsert tables (DELETES.md §3, bench/README.md): CDC commits
 * add small data files and position deletes, and readers pay for both. After a commit, when a
 * partition has destination.compact_small_files data files of one size tier (under 3/4 of
 * target_file_size), or a data file with compact_delete_percent % of its rows deleted, those
 * files and the smaller ones are rewritten (rows
 * minus deletes, read with the Parquet reader) into target-size files in one "replace" snapshot
 * (Iceberg "rewrite": the data files and the position-delete files deleting only from them
 * removed, new files added with the data sequence number of the snapshot read, so equality
 * deletes another writer commits later still apply), and the moved keys of the key index point
 * at their new rows. */
#include "engine_int.h"

#include <stdlib.h>
#include <string.h>

/* Small files are rewritten by size tier, as a size-tiered LSM merges its runs: tier 0 holds
 * files under TIER0_BYTES, tier k those under TIER0_BYTES * 4^k. A tier is due when it holds
 * compact_small_files files; a rewrite takes the files of the highest due tier and of every
 * tier below it, and its output lands a tier or two higher. So each row is rewritten about
 * log4(target_file_size / TIER0_BYTES) times in all, and a commit of a few rows never rewrites
 * a partition's large files with it (merging every file under 3/4 of target_file_size would
 * rewrite a table of a few hundred MB each time compact_small_files commits had passed). */
#define TIER0_BYTES ((uint64_t)64 << 10)
#define N_TIERS     16

/* Live rows of a row group with deleted rows are copied this many at a time. */
#define LIVE_SLICE_ROWS 8192

/* One partition's files to rewrite. */
typedef struct cgroup {
    char *key; /* spec id and partition tuple, encoded */
    size_t key_len;
    uint32_t *ords;
    uint8_t *tier; /* per ords[i]: its size tier, or N_TIERS for a large file with many deletes */
    size_t n_ords;
    bool heavy; /* a file with compact_delete_percent of its rows deleted */
} cgroup;

typedef struct cplan {
    cgroup *groups;
    size_t n_groups;
} cplan;

static void plan_free(cplan *p)
{
    for (size_t i = 0; i < p->n_groups; i++) {
        firn_free(p->groups[i].key);
        firn_free(p->groups[i].ords);
        firn_free(p->groups[i].tier);
    }
    firn_free(p->groups);
    memset(p, 0, sizeof(*p));
}

/* Why compaction cannot read the table back exactly, NULL when it can. */
static const char *unsupported(const firn__table *t)
{
    const firn_table_metadata *md = t->cat.metadata;
    const firn_snapshot *s = firn_table_metadata_current_snapshot(md);
    if (!s)
        return "no snapshot";
    const char *eq = firn_props_get(&s->summary, "total-equality-deletes");
    if (eq && strcmp(eq, "0") != 0)
        return "live equality deletes (firn does not apply them when reading rows)";
    const firn_field *root = firn_table_metadata_schema(md)->root;
    for (size_t i = 0; i < root->n_children; i++) {
        firn_type ty = root->children[i]->type;
        if (ty == FIRN_TYPE_STRUCT || ty == FIRN_TYPE_LIST || ty == FIRN_TYPE_MAP)
            return "list, map or struct columns (the Parquet reader reads flat columns only)";
    }
    return NULL;
}

static firn_rc partition_key(const firn_data_file *f, firn_buf *out, firn_err *err)
{
    firn_buf_reset(out);
    FIRN_TRY(firn_wr_le32(out, (uint32_t)f->spec_id));
    for (size_t i = 0; i < f->n_partition; i++) {
        FIRN_TRY(firn_wr_u8(out, f->partition[i].is_null ? 0 : 1));
        size_t at = out->len;
        FIRN_TRY(firn_wr_le32(out, 0));
        FIRN_TRY(firn_value_to_bytes(&f->partition[i], out, err));
        uint32_t n = (uint32_t)(out->len - at - 4);
        memcpy(out->data + at, &n, 4);
    }
    return FIRN_OK;
}

static cgroup *group_for(cplan *p, const firn_buf *key)
{
    for (size_t i = 0; i < p->n_groups; i++) {
        if (p->groups[i].key_len == key->len && memcmp(p->groups[i].key, key->data, key->len) == 0)
            return &p->groups[i];
    }
    p->groups = firn_reallocarray(p->groups, p->n_groups + 1, sizeof(*p->groups));
    cgroup *g = &p->groups[p->n_groups++];
    memset(g, 0, sizeof(*g));
    g->key = firn_memdup(key->data, key->len ? key->len : 1);
    g->key_len = key->len;
    return g;
}

static uint8_t size_tier(uint64_t bytes)
{
    uint8_t k = 0;
    for (uint64_t below = TIER0_BYTES; bytes >= below && k < N_TIERS - 1; below *= 4)
        k++;
    return k;
}

/* Keeps of g the files to rewrite: every file with many deletes, and the small files of the
 * highest tier holding min_files of them and of the tiers below it. False when none is due. */
static bool select_tiers(cgroup *g, int64_t min_files)
{
    size_t count[N_TIERS] = {0};
    for (size_t i = 0; i < g->n_ords; i++)
        if (g->tier[i] < N_TIERS)
            count[g->tier[i]]++;
    int due = -1;
    for (int k = 0; k < N_TIERS && min_files > 0; k++)
        if ((int64_t)count[k] >= min_files)
            due = k;
    size_t n = 0;
    for (size_t i = 0; i < g->n_ords; i++) {
        bool heavy_large = g->tier[i] == N_TIERS;
        if (heavy_large || (int)g->tier[i] <= due || (due < 0 && g->heavy && g->tier[i] == 0)) {
            g->ords[n] = g->ords[i];
            g->tier[n++] = g->tier[i];
        }
    }
    g->n_ords = n;
    return due >= 0 || (g->heavy && n > 0);
}

/* Candidates per partition: small files and files with many deleted rows, of the current spec. */
static firn_rc plan_groups(firn__table *t, cplan *p, firn_err *err)
{
    const firn_destination_config *d = &t->eng->cfg->destination;
    uint64_t small_below = d->target_file_bytes / 4 * 3;
    int32_t spec_id = firn_table_metadata_spec(t->cat.metadata)->spec_id;
    firn_buf key;
    firn_buf_init(&key, 1 << 20);
    firn_rc rc = FIRN_OK;
    for (uint32_t o = 0; o < t->n_files && rc == FIRN_OK; o++) {
        const firn_data_file *f = &t->files[o];
        const firn__dvfile *dv = &t->dv_files[o];
        if (dv->gone || f->spec_id != spec_id || f->record_count <= 0 || f->file_size_in_bytes <= 0)
            continue;
        uint64_t dead = dv->dead ? firn_bitmap64_cardinality(dv->dead) : 0;
        bool small = (uint64_t)f->file_size_in_bytes < small_below;
        bool heavy = d->compact_delete_percent > 0 &&
                     dead * 100 >= (uint64_t)d->compact_delete_percent * (uint64_t)f->record_count;
        if (!small && !heavy)
            continue;
        rc = partition_key(f, &key, err);
        if (rc)
            break;
        cgroup *g = group_for(p, &key);
        g->ords = firn_reallocarray(g->ords, g->n_ords + 1, sizeof(uint32_t));
        g->tier = firn_reallocarray(g->tier, g->n_ords + 1, 1);
        g->tier[g->n_ords] =
            small ? (heavy ? 0 : size_tier((uint64_t)f->file_size_in_bytes)) : N_TIERS;
        g->ords[g->n_ords++] = o;
        g->heavy |= heavy;
    }
    firn_buf_deinit(&key);
    /* keep the groups due: a tier with enough small files, or a file with many deletes */
    size_t k = 0;
    for (size_t i = 0; i < p->n_groups; i++) {
        cgroup *g = &p->groups[i];
        if (select_tiers(g, d->compact_small_files)) {
            p->groups[k++] = *g;
        } else {
            firn_free(g->key);
            firn_free(g->ords);
            firn_free(g->tier);
        }
    }
    p->n_groups = k;
    return rc;
}

/* ---- rewriting one group -------------------------------------------------------------------- */

typedef struct crun {
    firn__table *t;
    const firn_field *schema; /* the table's current schema (read and written) */
    uint32_t key_cols[32];    /* key columns in schema */
    firn__pkkey *keys;        /* fingerprint of every row written, in order */
    size_t n_keys, cap_keys;
    uint64_t rows_in, rows_dead;
} crun;

static firn_rc key_columns(crun *c, firn_err *err)
{
    const firn__table *t = c->t;
    for (size_t k = 0; k < t->n_key; k++) {
        int32_t id = t->schema->children[t->key_cols[k]]->id;
        size_t i = 0;
        while (i < c->schema->n_children && c->schema->children[i]->id != id)
            i++;
        if (i == c->schema->n_children)
            return firn_err_set(err, FIRN_ERR_SCHEMA,
                                "key column \"%s\" is not in the schema of table \"%s\"",
                                t->schema->children[t->key_cols[k]]->name, t->display);
        c->key_cols[k] = (uint32_t)i;
    }
    return FIRN_OK;
}

/* Sizes the key list for every row of the plan's files at once (doubling it as rows came
 * would hold up to twice their count, 16 bytes each, beside the row group being read). */
static void reserve_keys(crun *c, const cplan *p)
{
    size_t rows = 0;
    for (size_t i = 0; i < p->n_groups; i++)
        for (size_t j = 0; j < p->groups[i].n_ords; j++)
            rows += (size_t)c->t->files[p->groups[i].ords[j]].record_count;
    c->cap_keys = rows ? rows : 1;
    c->keys = firn_reallocarray(c->keys, c->cap_keys, sizeof(*c->keys));
}

static firn_rc note_keys(crun *c, firn_batch *b, firn_buf *key, firn_err *err)
{
    size_t n = firn_batch_rows(b);
    if (c->n_keys + n > c->cap_keys) {
        c->cap_keys = (c->n_keys + n) * 2; /* past the rows counted by reserve_keys */
        c->keys = firn_reallocarray(c->keys, c->cap_keys, sizeof(*c->keys));
    }
    for (size_t i = 0; i < n; i++) {
        firn_buf_reset(key);
        if (firn_batch_key_encode(b, i, c->key_cols, c->t->n_key, key))
            return firn_err_set(err, FIRN_ERR_TOO_LARGE, "a key of table \"%s\" is too long",
                                c->t->display);
        c->keys[c->n_keys++] = firn__pkindex_key(c->t->index, key->data, key->len);
    }
    return FIRN_OK;
}

/* Writes the rows of b to the stream, noting their keys. */
static firn_rc write_rows(crun *c, firn_batch *b, firn__stream *s, firn_buf *key, firn_err *err)
{
    if (firn_batch_rows(b) == 0)
        return FIRN_OK;
    FIRN_TRY(note_keys(c, b, key, err));
    return firn__stream_write(s, b, err);
}

/* Appends the live rows of data file ord to the stream. */
static firn_rc copy_file(crun *c, uint32_t ord, firn__stream *s, firn_err *err)
{
    firn__table *t = c->t;
    const firn_data_file *f = &t->files[ord];
    const firn_bitmap64 *dead = t->dv_files[ord].dead;
    firn__file_range ctx = {t->eng->io, f->file_path};
    firn_pq_reader *r = NULL;
    firn_batch *b = firn_batch_new(c->schema);
    firn_batch *live = firn_batch_new(c->schema);
    uint32_t *sel = NULL;
    firn_buf key;
    firn_buf_init(&key, 1 << 20);
    firn_rc rc =
        firn_pq_reader_open(firn__file_range_read, &ctx, (uint64_t)f->file_size_in_bytes, &r, err);
    if (rc == FIRN_OK)
        rc = firn_pq_reader_select(r, c->schema, err);
    if (rc == FIRN_OK && firn_pq_reader_rows(r) != (uint64_t)f->record_count)
        rc = firn_err_set(err, FIRN_ERR_PARSE, "file has %llu rows, its manifest says %lld",
                          (unsigned long long)firn_pq_reader_rows(r), (long long)f->record_count);
    for (size_t g = 0; rc == FIRN_OK && g < firn_pq_reader_row_groups(r); g++) {
        rc = firn_pq_reader_read_row_group(r, g, b, err);
        if (rc)
            break;
        uint64_t first = firn_pq_reader_row_group_first_row(r, g);
        size_t n = firn_batch_rows(b), k = 0;
        sel = firn_reallocarray(sel, n ? n : 1, sizeof(uint32_t));
        for (size_t i = 0; i < n; i++) {
            if (!dead || !firn_bitmap64_contains(dead, first + i))
                sel[k++] = (uint32_t)i;
        }
        c->rows_in += n;
        c->rows_dead += n - k;
        if (k == n)
            rc = write_rows(c, b, s, &key, err);
        /* The live rows are copied a slice at a time: a row group can be as large as a whole
         * part of a large transaction (its rows compress well), and a copy of it beside it
         * doubled the compaction's memory. */
        for (size_t at = 0; k < n && at < k && rc == FIRN_OK; at += LIVE_SLICE_ROWS) {
            firn_batch_reset(live);
            firn_batch_append_rows(live, b, sel + at,
                                   k - at < LIVE_SLICE_ROWS ? k - at : LIVE_SLICE_ROWS);
            rc = write_rows(c, live, s, &key, err);
        }
    }
    if (rc)
        firn_err_context(err, "while reading \"%s\" for compaction", f->file_path);
    firn_buf_deinit(&key);
    firn_free(sel);
    firn_batch_free(live);
    firn_batch_free(b);
    firn_pq_reader_free(r);
    return rc;
}

/* Writes the live rows of the group's files as new files with the group's partition, in its
 * partition folder (data/<partition path>, as the files it replaces; the group's files are of
 * the current spec). */
static firn_rc
write_group(crun *c, const cgroup *g, firn_data_file **files, size_t *n_files, firn_err *err)
{
    firn__table *t = c->t;
    const firn_data_file *first_in = &t->files[g->ords[0]];
    firn_buf dir;
    firn_buf_init(&dir, 1 << 16);
    firn_rc rc = firn_buf_appendf(&dir, "%s/data", t->cat.metadata->location);
    if (!rc && first_in->n_partition)
        rc = firn_wr_u8(&dir, '/');
    if (rc) {
        firn_buf_deinit(&dir);
        return firn_err_set(err, FIRN_ERR_TOO_LARGE, "data location is too long");
    }
    if (first_in->n_partition)
        rc = firn_partition_path(firn_table_metadata_spec(t->cat.metadata), first_in->partition,
                                 &dir, err);
    firn__write_ctx w = {t->eng->io, (const char *)dir.data, c->schema, NULL, &t->eng->pq_buffered};
    firn__stream *s = NULL;
    if (!rc)
        rc = firn__stream_open(&w, &s, err);
    if (rc) {
        firn_buf_deinit(&dir);
        return rc;
    }
    for (size_t i = 0; i < g->n_ords && rc == FIRN_OK; i++)
        rc = copy_file(c, g->ords[i], s, err);
    if (rc) {
        firn__stream_abort(s);
        firn_buf_deinit(&dir);
        return rc;
    }
    size_t first = *n_files;
    rc = firn__stream_close(s, files, n_files, err);
    firn_buf_deinit(&dir);
    FIRN_TRY(rc);
    const firn_data_file *in = &t->files[g->ords[0]];
    for (size_t i = first; i < *n_files; i++) {
        (*files)[i].spec_id = in->spec_id;
        if (in->n_partition)
            firn_data_file_set_partition(&(*files)[i], in->partition, in->n_partition);
    }
    return FIRN_OK;
}

/* The tracked position-delete files that delete only from rewritten files (in[ord]). */
static void removed_deletes(const firn__table *t, const bool *in, firn_strlist *out)
{
    for (size_t i = 0; i < t->n_delfiles; i++) {
        const firn__delfile *d = &t->delfiles[i];
        bool all = d->n_ords > 0;
        for (size_t k = 0; all && k < d->n_ords; k++)
            all = in[d->ords[k]];
        if (all)
            firn_strlist_push(out, d->path);
    }
}

/* After the commit: new files get ordinals, moved keys their new rows, old files are gone. */
static firn_rc after_commit(crun *c,
                            const cplan *p,
                            const firn_data_file *files,
                            size_t n_files,
                            const firn_strlist *removed_dels,
                            firn_err *err)
{
    firn__table *t = c->t;
    size_t k = 0;
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; i < n_files && rc == FIRN_OK; i++) {
        uint32_t ord = firn__table_add_file(t, &files[i]);
        for (int64_t pos = 0; pos < files[i].record_count && rc == FIRN_OK; pos++, k++) {
            FIRN_ASSERT(k < c->n_keys);
            rc = firn__pkindex_set(t->index, c->keys[k], (firn__pkloc){ord, (uint32_t)pos}, true,
                                   err);
        }
    }
    if (rc == FIRN_OK && k != c->n_keys)
        rc = firn_err_set(err, FIRN_ERR_INTERNAL, "compaction wrote %zu rows of %zu", k, c->n_keys);
    for (size_t i = 0; i < removed_dels->count; i++)
        firn__delfiles_forget(t, removed_dels->items[i]);
    for (size_t i = 0; i < p->n_groups; i++) {
        for (size_t j = 0; j < p->groups[i].n_ords; j++) {
            firn__dvfile *d = &t->dv_files[p->groups[i].ords[j]];
            d->gone = true;
            firn_bitmap64_free(d->dead);
            d->dead = NULL;
        }
    }
    if (rc)
        firn_err_context(err, "while updating the key index of table \"%s\"", t->display);
    return rc;
}

/* Plans, writes and commits one compaction from the current snapshot. *conflict: another
 * writer committed first (t reloaded; nothing changed). */
static firn_rc compact_once(firn__table *t, bool *conflict, bool *committed, firn_err *err)
{
    *conflict = false;
    *committed = false;
    cplan p = {0};
    firn_rc prc = plan_groups(t, &p, err);
    if (prc || p.n_groups == 0) {
        plan_free(&p);
        return prc;
    }
    const firn_snapshot *snap = firn_table_metadata_current_snapshot(t->cat.metadata);
    int64_t data_seq = snap->sequence_number;
    crun c = {.t = t, .schema = firn_table_metadata_schema(t->cat.metadata)->root};
    firn_data_file *files = NULL;
    size_t n_files = 0, n_in = 0;
    bool *in = firn_calloc(t->n_files ? t->n_files : 1, sizeof(bool));
    firn_strlist removed = {0}, removed_dels = {0};
    int64_t t0 = firn_monotonic_ns();
    firn_rc rc = key_columns(&c, err);
    reserve_keys(&c, &p);
    for (size_t i = 0; i < p.n_groups && rc == FIRN_OK; i++) {
        rc = write_group(&c, &p.groups[i], &files, &n_files, err);
        for (size_t j = 0; j < p.groups[i].n_ords; j++) {
            in[p.groups[i].ords[j]] = true;
            firn_strlist_push(&removed, t->files[p.groups[i].ords[j]].file_path);
            n_in++;
        }
    }
    removed_deletes(t, in, &removed_dels);
    for (size_t i = 0; i < removed_dels.count; i++)
        firn_strlist_push(&removed, removed_dels.items[i]);
    if (rc == FIRN_OK)
        firn__fault_pause("compact-written");
    if (rc == FIRN_OK)
        rc = firn__table_commit_replace(t, files, n_files, (const char *const *)removed.items,
                                        removed.count, data_seq, err);
    if (rc == FIRN_ERR_CONFLICT) {
        *conflict = true;
    } else if (rc == FIRN_OK) {
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "table \"%s\": compacted %zu data files (%llu rows, %llu deleted) and %zu "
                 "delete files into %zu files in %.2f s",
                 t->display, n_in, (unsigned long long)c.rows_in, (unsigned long long)c.rows_dead,
                 removed_dels.count, n_files, (double)(firn_monotonic_ns() - t0) / 1e9);
        t->commits++;
        *committed = true;
        if (t->multiset) { /* copies are numbered by lookups: index the new snapshot */
            firn__table_reset_index(t);
            rc = firn__table_rebuild_index(t, err);
        } else {
            rc = after_commit(&c, &p, files, n_files, &removed_dels, err);
        }
        if (rc == FIRN_OK)
            firn__table_index_advanced(t);
    }
    for (size_t i = 0; i < n_files; i++)
        firn_data_file_deinit(&files[i]);
    firn_free(files);
    firn_free(in);
    firn_free(c.keys);
    firn_strlist_deinit(&removed);
    firn_strlist_deinit(&removed_dels);
    plan_free(&p);
    return rc;
}

/* After another writer's commit: the table is loaded again and the index and deleted rows are
 * rebuilt from it (the other writer may have deleted rows of the files to rewrite). */
static firn_rc catch_up(firn__table *t, firn_err *err)
{
    firn_catalog_table next = {0};
    FIRN_TRY(firn_catalog_load_table(t->eng->catalog, t->ns, t->name, &next, err));
    firn_catalog_table_deinit(&t->cat);
    t->cat = next;
    firn__table_reset_index(t);
    return firn__table_rebuild_index(t, err);
}

firn_rc firn__compact_maybe(firn__table *t, firn_err *err)
{
    const firn_destination_config *d = &t->eng->cfg->destination;
    if (!t->upsert || t->eqdel || t->dv || !t->index || !t->index_synced ||
        (d->compact_small_files <= 0 && d->compact_delete_percent <= 0))
        return FIRN_OK;
    const char *why = unsupported(t);
    if (why) {
        FIRN_LOG(FIRN_LOG_DEBUG, "engine", "table \"%s\": no compaction: %s", t->display, why);
        return FIRN_OK;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        bool conflict = false, committed = false;
        firn_err lerr = {0};
        firn_rc rc = compact_once(t, &conflict, &committed, &lerr);
        if (rc == FIRN_OK)
            return FIRN_OK;
        if (committed) /* the index no longer matches the table: stop, the next start rebuilds */
            return firn_err_set(err, rc, "%s", lerr.msg);
        if (!conflict && rc != FIRN_ERR_NOT_FOUND) {
            /* nothing committed: the table is as before; the next commit plans again */
            FIRN_LOG(FIRN_LOG_WARN, "engine", "table \"%s\": compaction skipped: %s", t->display,
                     lerr.msg);
            return FIRN_OK;
        }
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "table \"%s\": compaction not committed (%s); catching up and planning again",
                 t->display, lerr.msg);
        FIRN_TRY(catch_up(t, err));
    }
    return FIRN_OK;
}
