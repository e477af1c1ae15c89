/* SPDX-License-Identifier: Apache-2.0 */
/* Converting a table's equality deletes into position deletes (format v2) or deletion vectors
 * (format v3) in one commit (DELETES.md §5.3, issue #8): each live equality-delete file is
 * resolved against the data files it applies to (data sequence number strictly lower, same
 * partition, or every partition for a delete file of an unpartitioned spec: format/spec.md
 * "Scan Planning") by reading only their equality columns; the rows found become position
 * deletes or bits of each data file's merged DV, and the same snapshot removes the equality
 * files. Runs when a table written in equality-delete mode is opened in position or DV mode. */
#include "engine_int.h"

#include <stdio.h>
#include <string.h>

/* The newest sequence number of an equality delete holding a key: per partition (the key
 * prefixed with the partition's encoding) and for global delete files. */
typedef struct eq_group {
    int32_t ids[32];
    size_t n_ids;
    firn__keymap *scoped;
    firn__keymap *global;
    int64_t max_seq;
} eq_group;

/* spec id and partition tuple, as a key prefix. */
static firn_rc part_prefix(const firn_data_file *f, firn_buf *out, firn_err *err)
{
    firn_buf_reset(out);
    FIRN_TRY(firn_wr_le32(out, (uint32_t)f->spec_id));
    for (size_t i = 0; i < f->n_partition; i++) {
        firn_buf v;
        firn_buf_init(&v, 1 << 16);
        firn_rc rc = firn_wr_u8(out, f->partition[i].is_null ? 0 : 1);
        if (rc == FIRN_OK)
            rc = firn_value_to_bytes(&f->partition[i], &v, err);
        if (rc == FIRN_OK)
            rc = firn_wr_le32(out, (uint32_t)v.len);
        if (rc == FIRN_OK)
            rc = firn_buf_append(out, v.data, v.len);
        firn_buf_deinit(&v);
        FIRN_TRY(rc);
    }
    return FIRN_OK;
}

static bool same_ids(const eq_group *g, const firn_data_file *f)
{
    if (g->n_ids != f->n_equality_ids)
        return false;
    return memcmp(g->ids, f->equality_ids, f->n_equality_ids * sizeof(int32_t)) == 0;
}

/* The top-level table columns of the group's equality ids, as a reader selection. */
static firn_rc group_select(firn__table *t, const eq_group *g, firn_field **out, firn_err *err)
{
    firn_field *sel = firn_field_new(0, "", FIRN_TYPE_STRUCT, true);
    for (size_t k = 0; k < g->n_ids; k++) {
        const firn_field *f = NULL;
        for (size_t i = 0; i < t->schema->n_children && !f; i++) {
            if (t->schema->children[i]->id == g->ids[k])
                f = t->schema->children[i];
        }
        if (!f) {
            firn_field_free(sel);
            return firn_err_set(err, FIRN_ERR_UNSUPPORTED,
                                "table \"%s\": equality field id %d is not a top-level column",
                                t->display, g->ids[k]);
        }
        firn_field *c = firn_field_clone(f);
        c->meta = 0;
        firn_field_add(sel, c);
    }
    *out = sel;
    return FIRN_OK;
}

typedef void (*row_fn)(void *ctx, const uint8_t *key, size_t len, int64_t pos);

/* Calls fn with the equality key of every row of a Parquet file. */
static firn_rc scan_keys(firn__table *t,
                         const firn_data_file *f,
                         const firn_field *sel,
                         row_fn fn,
                         void *ctx,
                         firn_err *err)
{
    uint32_t cols[32];
    for (size_t k = 0; k < sel->n_children; k++)
        cols[k] = (uint32_t)k;
    firn__file_range rc_ctx = {t->eng->io, f->file_path};
    firn_pq_reader *r = NULL;
    firn_batch *b = firn_batch_new(sel);
    firn_buf key;
    firn_buf_init(&key, 1 << 20);
    firn_rc rc = firn_pq_reader_open(firn__file_range_read, &rc_ctx,
                                     (uint64_t)f->file_size_in_bytes, &r, err);
    if (rc == FIRN_OK)
        rc = firn_pq_reader_select(r, sel, err);
    for (size_t g = 0; rc == FIRN_OK && g < firn_pq_reader_row_groups(r); g++) {
        rc = firn_pq_reader_read_row_group(r, g, b, err);
        uint64_t first = firn_pq_reader_row_group_first_row(r, g);
        for (size_t i = 0; rc == FIRN_OK && i < firn_batch_rows(b); i++) {
            firn_buf_reset(&key);
            rc = firn_batch_key_encode(b, i, cols, sel->n_children, &key);
            if (rc == FIRN_OK)
                fn(ctx, key.data, key.len, (int64_t)(first + i));
        }
    }
    if (rc)
        firn_err_context(err, "while reading \"%s\"", f->file_path);
    firn_buf_deinit(&key);
    firn_pq_reader_free(r);
    firn_batch_free(b);
    return rc;
}

typedef struct load_ctx {
    firn__keymap *map;
    firn_buf *prefix; /* NULL: global */
    firn_buf scratch;
    int64_t seq;
} load_ctx;

static void put_seq(firn__keymap *m, const uint8_t *k, size_t len, int64_t seq)
{
    firn__pkloc cur;
    if (firn__keymap_get(m, k, len, &cur) && (((int64_t)cur.file << 32) | cur.pos) >= seq)
        return;
    firn__pkloc v = {(uint32_t)((uint64_t)seq >> 32), (uint32_t)seq};
    firn__keymap_put(m, k, len, v);
}

static void load_row(void *ctx, const uint8_t *key, size_t len, int64_t pos)
{
    (void)pos;
    load_ctx *c = ctx;
    if (!c->prefix) {
        put_seq(c->map, key, len, c->seq);
        return;
    }
    firn_buf_reset(&c->scratch);
    if (firn_buf_append(&c->scratch, c->prefix->data, c->prefix->len) == FIRN_OK &&
        firn_buf_append(&c->scratch, key, len) == FIRN_OK)
        put_seq(c->map, c->scratch.data, c->scratch.len, c->seq);
}

/* Reads one equality-delete file into its group's maps. */
static firn_rc
load_eq_file(firn__table *t, eq_group *g, const firn_manifest_entry *en, firn_err *err)
{
    firn_field *sel = NULL;
    FIRN_TRY(group_select(t, g, &sel, err));
    firn_buf prefix;
    firn_buf_init(&prefix, 1 << 20);
    load_ctx c = {NULL, NULL, {0}, en->sequence_number};
    firn_buf_init(&c.scratch, (size_t)1 << 32);
    bool global = en->file.n_partition == 0;
    c.map = global ? g->global : g->scoped;
    firn_rc rc = global ? FIRN_OK : part_prefix(&en->file, &prefix, err);
    c.prefix = global ? NULL : &prefix;
    if (rc == FIRN_OK)
        rc = scan_keys(t, &en->file, sel, load_row, &c, err);
    if (en->sequence_number > g->max_seq)
        g->max_seq = en->sequence_number;
    firn_buf_deinit(&c.scratch);
    firn_buf_deinit(&prefix);
    firn_field_free(sel);
    return rc;
}

typedef struct match_ctx {
    const eq_group *g;
    firn_buf *prefix;
    firn_buf scratch;
    int64_t seq;
    firn_bitmap64 *rows;
} match_ctx;

static bool newer(const firn__keymap *m, const uint8_t *k, size_t len, int64_t seq)
{
    firn__pkloc v;
    return firn__keymap_get(m, k, len, &v) && (int64_t)(((uint64_t)v.file << 32) | v.pos) > seq;
}

static void match_row(void *ctx, const uint8_t *key, size_t len, int64_t pos)
{
    match_ctx *c = ctx;
    bool hit = newer(c->g->global, key, len, c->seq);
    if (!hit && firn__keymap_count(c->g->scoped) > 0) {
        firn_buf_reset(&c->scratch);
        if (firn_buf_append(&c->scratch, c->prefix->data, c->prefix->len) == FIRN_OK &&
            firn_buf_append(&c->scratch, key, len) == FIRN_OK)
            hit = newer(c->g->scoped, c->scratch.data, c->scratch.len, c->seq);
    }
    if (hit)
        firn_bitmap64_add(c->rows, (uint64_t)pos);
}

/* Rows of data file en that the group's equality deletes delete, added to rows. */
static firn_rc match_data_file(firn__table *t,
                               const eq_group *g,
                               const firn_manifest_entry *en,
                               firn_bitmap64 *rows,
                               firn_err *err)
{
    if (en->sequence_number >= g->max_seq)
        return FIRN_OK; /* no equality delete is newer */
    firn_field *sel = NULL;
    FIRN_TRY(group_select(t, g, &sel, err));
    firn_buf prefix;
    firn_buf_init(&prefix, 1 << 20);
    match_ctx c = {g, &prefix, {0}, en->sequence_number, rows};
    firn_buf_init(&c.scratch, (size_t)1 << 32);
    firn_rc rc = part_prefix(&en->file, &prefix, err);
    if (rc == FIRN_OK)
        rc = scan_keys(t, &en->file, sel, match_row, &c, err);
    firn_buf_deinit(&c.scratch);
    firn_buf_deinit(&prefix);
    firn_field_free(sel);
    return rc;
}

void firn__eqconv_free(firn__eqconv *c)
{
    for (size_t i = 0; i < c->n_files; i++)
        firn_bitmap64_free(c->rows[i]);
    firn_free(c->rows);
    firn_free(c->files);
    firn_free(c->eq_files);
    memset(c, 0, sizeof(*c));
}

/* Equality groups (distinct equality id lists) of the live equality-delete files, loaded. */
static firn_rc load_groups(firn__table *t,
                           firn_manifest **ms,
                           size_t n,
                           firn__eqconv *out,
                           eq_group **groups,
                           size_t *n_groups,
                           firn_err *err)
{
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; i < n && rc == FIRN_OK; i++) {
        for (size_t e = 0; e < ms[i]->n_entries && rc == FIRN_OK; e++) {
            const firn_manifest_entry *en = &ms[i]->entries[e];
            if (en->status == FIRN_ENTRY_DELETED ||
                en->file.content != FIRN_CONTENT_EQUALITY_DELETES)
                continue;
            if (en->file.n_equality_ids == 0 || en->file.n_equality_ids > 32)
                return firn_err_set(err, FIRN_ERR_UNSUPPORTED,
                                    "equality-delete file \"%s\" has %zu equality ids",
                                    en->file.file_path, en->file.n_equality_ids);
            size_t g = 0;
            while (g < *n_groups && !same_ids(&(*groups)[g], &en->file))
                g++;
            if (g == *n_groups) {
                *groups = firn_reallocarray(*groups, g + 1, sizeof(**groups));
                eq_group *ng = &(*groups)[g];
                memset(ng, 0, sizeof(*ng));
                memcpy(ng->ids, en->file.equality_ids, en->file.n_equality_ids * sizeof(int32_t));
                ng->n_ids = en->file.n_equality_ids;
                ng->scoped = firn__keymap_new();
                ng->global = firn__keymap_new();
                ng->max_seq = -1;
                (*n_groups)++;
            }
            out->eq_files =
                firn_reallocarray(out->eq_files, out->n_eq_files + 1, sizeof(*out->eq_files));
            out->eq_files[out->n_eq_files++] = &en->file;
            out->eq_records += en->file.record_count;
            rc = load_eq_file(t, &(*groups)[g], en, err);
        }
    }
    return rc;
}

firn_rc
firn__eqconv_resolve(firn__table *t, firn_manifest **ms, size_t n, firn__eqconv *out, firn_err *err)
{
    memset(out, 0, sizeof(*out));
    eq_group *groups = NULL;
    size_t n_groups = 0;
    firn_rc rc = load_groups(t, ms, n, out, &groups, &n_groups, err);
    for (size_t i = 0; i < n && rc == FIRN_OK; i++) {
        for (size_t e = 0; e < ms[i]->n_entries && rc == FIRN_OK; e++) {
            const firn_manifest_entry *en = &ms[i]->entries[e];
            if (en->status == FIRN_ENTRY_DELETED || en->file.content != FIRN_CONTENT_DATA)
                continue;
            firn_bitmap64 *rows = firn_bitmap64_new();
            for (size_t g = 0; g < n_groups && rc == FIRN_OK; g++)
                rc = match_data_file(t, &groups[g], en, rows, err);
            if (rc || firn_bitmap64_cardinality(rows) == 0) {
                firn_bitmap64_free(rows);
                continue;
            }
            out->files = firn_reallocarray(out->files, out->n_files + 1, sizeof(*out->files));
            out->rows = firn_reallocarray(out->rows, out->n_files + 1, sizeof(*out->rows));
            out->files[out->n_files] = &en->file;
            out->rows[out->n_files++] = rows;
        }
    }
    for (size_t g = 0; g < n_groups; g++) {
        firn__keymap_free(groups[g].scoped);
        firn__keymap_free(groups[g].global);
    }
    firn_free(groups);
    if (rc)
        firn__eqconv_free(out);
    return rc;
}

typedef struct collect_ctx {
    firn__posdel *dels;
    size_t n, cap;
    const char *path;
    uint32_t group;
    const firn_bitmap64 *dead;
} collect_ctx;

static bool collect_pos(void *ctx, uint64_t pos)
{
    collect_ctx *c = ctx;
    if (c->dead && firn_bitmap64_contains(c->dead, pos))
        return true;
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 256;
        c->dels = firn_reallocarray(c->dels, c->cap, sizeof(*c->dels));
    }
    c->dels[c->n++] = (firn__posdel){c->path, (int64_t)pos, c->group, 0};
    return true;
}

static bool same_partition(const firn_data_file *a, const firn_data_file *b)
{
    bool same = a->n_partition == b->n_partition && a->spec_id == b->spec_id;
    for (size_t k = 0; same && k < a->n_partition; k++)
        same = (a->partition[k].is_null && b->partition[k].is_null) ||
               (!a->partition[k].is_null && !b->partition[k].is_null &&
                firn_value_compare(&a->partition[k], &b->partition[k]) == 0);
    return same;
}

/* Format v2: one position-delete file per partition of the rows found (already deleted rows
 * left out). */
static firn_rc write_posdels(firn__table *t,
                             const firn__write_ctx *w,
                             const firn__eqconv *c,
                             firn__eqconv_dead_fn dead_of,
                             void *dctx,
                             firn_data_file **files,
                             size_t *n_files,
                             firn_err *err)
{
    const firn_partition_spec *spec = firn_table_metadata_spec(t->cat.metadata);
    const firn_value **parts = firn_calloc(c->n_files ? c->n_files : 1, sizeof(*parts));
    const firn_data_file **owners = firn_calloc(c->n_files ? c->n_files : 1, sizeof(*owners));
    size_t n_parts = 0;
    collect_ctx cc = {0};
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; i < c->n_files && rc == FIRN_OK; i++) {
        const firn_data_file *f = c->files[i];
        if (f->spec_id != spec->spec_id) {
            rc = firn_err_set(err, FIRN_ERR_UNSUPPORTED,
                              "data file \"%s\" has partition spec %d, not the current %d",
                              f->file_path, (int)f->spec_id, (int)spec->spec_id);
            break;
        }
        size_t g = 0;
        while (g < n_parts && !same_partition(owners[g], f))
            g++;
        if (g == n_parts) {
            owners[n_parts] = f;
            parts[n_parts++] = f->partition;
        }
        firn__eqconv_dead d = {0};
        dead_of(dctx, f->file_path, &d);
        cc.path = f->file_path;
        cc.group = (uint32_t)g;
        cc.dead = d.rows;
        firn_bitmap64_foreach(c->rows[i], collect_pos, &cc);
    }
    if (rc == FIRN_OK && cc.n > 0)
        rc = firn__write_position_deletes(w, cc.dels, cc.n, parts, spec->n_fields, spec->spec_id,
                                          files, n_files, err);
    firn_free(cc.dels);
    firn_free(owners);
    firn_free(parts);
    return rc;
}

/* One Puffin file with a DV for each data file c->files[from..to), each merging its current
 * DV (replaced). */
static firn_rc write_puffin(firn__table *t,
                            const firn__write_ctx *w,
                            const firn__eqconv *c,
                            firn__eqconv_dead_fn dead_of,
                            void *dctx,
                            firn_data_file **files,
                            size_t *n_files,
                            firn_dv_replace *replaces,
                            size_t *n_replaces,
                            size_t from,
                            size_t to,
                            firn_err *err)
{
    (void)t;
    char path[4096], created_by[64], id[37];
    uint8_t u[16];
    firn_uuid_v4(u);
    firn_uuid_format(u, id);
    snprintf(path, sizeof(path), "%s/%s-dvs.puffin", w->data_location, id);
    snprintf(created_by, sizeof(created_by), "firn %s", FIRN_VERSION);
    firn_puffin_writer *pw = firn_puffin_writer_new(created_by);
    size_t n = to - from;
    int64_t *offsets = firn_calloc(n ? n : 1, sizeof(int64_t));
    int64_t *lengths = firn_calloc(n ? n : 1, sizeof(int64_t));
    uint64_t *cards = firn_calloc(n ? n : 1, sizeof(uint64_t));
    firn_buf bytes;
    firn_buf_init(&bytes, FIRN_PUFFIN_MAX_BYTES);
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; i < n && rc == FIRN_OK; i++) {
        firn__eqconv_dead d = {0};
        dead_of(dctx, c->files[from + i]->file_path, &d);
        firn_bitmap64 *merged = firn_bitmap64_new();
        firn_bitmap64_or(merged, c->rows[from + i]);
        if (d.rows)
            firn_bitmap64_or(merged, d.rows);
        cards[i] = firn_bitmap64_cardinality(merged);
        rc = firn_puffin_writer_add_dv(pw, c->files[from + i]->file_path, merged, &offsets[i],
                                       &lengths[i], err);
        firn_bitmap64_free(merged);
        if (d.dv_path)
            replaces[(*n_replaces)++] =
                (firn_dv_replace){c->files[from + i]->file_path, d.dv_path, d.dv_offset};
    }
    if (rc == FIRN_OK && n > 0)
        rc = firn_puffin_writer_finish(pw, &bytes, err);
    if (rc == FIRN_OK && n > 0)
        rc = firn_io_write_all(w->io, path, bytes.data, bytes.len, err);
    for (size_t i = 0; i < n && rc == FIRN_OK; i++) {
        const firn_data_file *df = c->files[from + i];
        *files = firn_reallocarray(*files, *n_files + 1, sizeof(firn_data_file));
        firn_data_file *f = &(*files)[(*n_files)++];
        firn_data_file_init_dv(f, path, (int64_t)bytes.len, df->spec_id, df->file_path, offsets[i],
                               lengths[i], (int64_t)cards[i]);
        if (df->n_partition)
            firn_data_file_set_partition(f, df->partition, df->n_partition);
    }
    firn_buf_deinit(&bytes);
    firn_free(cards);
    firn_free(lengths);
    firn_free(offsets);
    firn_puffin_writer_free(pw);
    return rc;
}

/* Format v3: the DVs in one Puffin file, or one Puffin file each when DuckDB reads the table
 * (firn__dv_puffin_per_vector). */
static firn_rc write_dvs(firn__table *t,
                         const firn__write_ctx *w,
                         const firn__eqconv *c,
                         firn__eqconv_dead_fn dead_of,
                         void *dctx,
                         firn_data_file **files,
                         size_t *n_files,
                         firn_dv_replace *replaces,
                         size_t *n_replaces,
                         firn_err *err)
{
    if (!firn__dv_puffin_per_vector(t))
        return write_puffin(t, w, c, dead_of, dctx, files, n_files, replaces, n_replaces, 0,
                            c->n_files, err);
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; i < c->n_files && rc == FIRN_OK; i++)
        rc = write_puffin(t, w, c, dead_of, dctx, files, n_files, replaces, n_replaces, i, i + 1,
                          err);
    return rc;
}

firn_rc firn__eqconv_commit(
    firn__table *t, const firn__eqconv *c, firn__eqconv_dead_fn dead_of, void *dctx, firn_err *err)
{
    char data_dir[4096];
    snprintf(data_dir, sizeof(data_dir), "%s/data", t->cat.metadata->location);
    firn__write_ctx w = {t->eng->io, data_dir, t->schema, firn_table_metadata_spec(t->cat.metadata),
                         &t->eng->pq};
    firn_data_file *files = NULL;
    size_t n_files = 0, n_replaces = 0;
    firn_dv_replace *replaces = firn_calloc(c->n_files ? c->n_files : 1, sizeof(*replaces));
    const char **removed = firn_calloc(c->n_eq_files ? c->n_eq_files : 1, sizeof(*removed));
    for (size_t i = 0; i < c->n_eq_files; i++)
        removed[i] = c->eq_files[i]->file_path;
    uint64_t rows = 0;
    for (size_t i = 0; i < c->n_files; i++)
        rows += firn_bitmap64_cardinality(c->rows[i]);
    firn_rc rc =
        t->dv ? write_dvs(t, &w, c, dead_of, dctx, &files, &n_files, replaces, &n_replaces, err)
              : write_posdels(t, &w, c, dead_of, dctx, &files, &n_files, err);
    if (rc == FIRN_OK)
        rc = firn__table_commit_rewrite(t, files, n_files, replaces, n_replaces, removed,
                                        c->n_eq_files, err);
    if (rc == FIRN_OK)
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "table \"%s\": converted %zu equality-delete files (%lld deletes) into %s of "
                 "%llu rows in %zu data files",
                 t->display, c->n_eq_files, (long long)c->eq_records,
                 t->dv ? "deletion vectors" : "position deletes", (unsigned long long)rows,
                 c->n_files);
    for (size_t i = 0; i < n_files; i++)
        firn_data_file_deinit(&files[i]);
    firn_free(files);
    firn_free(removed);
    firn_free(replaces);
    return rc;
}
