/* SPDX-License-Identifier: Apache-2.0 */
/* The engine side of the key index: where each table's index lives (destination.index_dir),
 * its share of destination.index_memory_limit, loading the copy a clean stop saved instead of
 * reading every key column again, and knowing when the index holds exactly the table's current
 * snapshot, the only state worth saving (docs/internals/pkindex.md "Persistence"). */
#include "engine_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INDEX_MEMORY_MIN ((size_t)4 << 20)

/* The folder under which table indexes live: the configured one, the user's cache folder, or
 * the state file's folder; NULL when none (indexes then use private temporary folders). */
static char *base_dir(const firn__engine *e)
{
    firn_buf b;
    firn_buf_init(&b, 8192);
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    const char *state = e->cfg->state_path;
    firn_rc rc = FIRN_OK;
    if (e->cfg->destination.index_dir)
        rc = firn_buf_append_cstr(&b, e->cfg->destination.index_dir);
    else if (xdg && xdg[0] == '/')
        rc = firn_buf_appendf(&b, "%s/firn", xdg);
    else if (home && home[0] == '/')
        rc = firn_buf_appendf(&b, "%s/.cache/firn", home);
    else if (state && strrchr(state, '/'))
        rc = firn_buf_appendf(&b, "%.*s", (int)(strrchr(state, '/') - state), state);
    if (rc || b.len == 0) {
        firn_buf_deinit(&b);
        return NULL;
    }
    return (char *)firn_buf_take(&b, NULL);
}

/* Each table gets an equal share of the budget, counting every selected stream. */
static size_t memory_share(const firn__engine *e)
{
    size_t n = 0;
    for (size_t i = 0; i < e->cfg->streams.count; i++)
        n += e->cfg->streams.items[i].selected ? 1 : 0;
    size_t limit = (size_t)e->cfg->destination.index_memory_limit_bytes;
    if (limit == 0)
        limit = FIRN_PKINDEX_MEMORY_DEFAULT;
    size_t share = limit / (n ? n : 1);
    return share < INDEX_MEMORY_MIN ? INDEX_MEMORY_MIN : share;
}

static int64_t current_snapshot_id(const firn__table *t)
{
    const firn_snapshot *s = firn_table_metadata_current_snapshot(t->cat.metadata);
    return s ? s->snapshot_id : -1;
}

/* "<table uuid>@<snapshot id>": what a saved index holds. */
static void tag_of(const firn__table *t, int64_t snapshot_id, char *out, size_t cap)
{
    snprintf(out, cap, "%s@%lld", t->cat.metadata->table_uuid, (long long)snapshot_id);
}

static void index_opts(firn__table *t, firn__pkindex_opts *o)
{
    memset(o, 0, sizeof(*o));
    if (!t->index_dir && !t->index_private) {
        char *base = base_dir(t->eng);
        if (base) {
            firn_buf b;
            firn_buf_init(&b, 8192);
            firn_rc_ignore(
                firn_buf_appendf(&b, "%s/pkindex/%s", base, t->cat.metadata->table_uuid));
            t->index_dir = (char *)firn_buf_take(&b, NULL);
            firn_free(base);
        }
    }
    o->dir = t->index_dir;
    o->memory_limit = memory_share(t->eng);
}

firn__pkindex *firn__table_new_index(firn__table *t)
{
    firn__pkindex_opts o;
    index_opts(t, &o);
    t->index_loaded = false;
    t->index_synced = false;
    t->index_catchup = false;
    firn__keymap_free(t->index_paths);
    t->index_paths = NULL;
    return firn__pkindex_new_opts(&o);
}

firn_rc firn__table_open_index(firn__table *t, bool load, firn_err *err)
{
    firn__pkindex_opts o;
    index_opts(t, &o);
    if (!load || !o.dir) {
        t->index = firn__table_new_index(t);
        return FIRN_OK;
    }
    char tag[128], why[256] = "";
    tag_of(t, current_snapshot_id(t), tag, sizeof(tag));
    bool loaded = false;
    firn_rc rc = firn__pkindex_open(&o, tag, &t->index, &loaded, why, sizeof(why), err);
    if (rc == FIRN_ERR_UNAVAILABLE) {
        /* Another firn uses the folder (say, on the same tables by mistake): it keeps it; this
         * run keeps its index to itself and rebuilds it. */
        FIRN_LOG(FIRN_LOG_WARN, "engine", "table \"%s\": %s; the key index of this run is not kept",
                 t->display, err ? err->msg : "key index folder in use");
        firn_err_clear(err);
        firn_free(t->index_dir);
        t->index_dir = NULL;
        t->index_private = true;
        t->index = firn__table_new_index(t);
        return FIRN_OK;
    }
    if (rc) {
        firn_err_context(err, "while opening the key index of table \"%s\"", t->display);
        return rc;
    }
    t->index_synced = false;
    t->index_catchup = false;
    if (!loaded) {
        FIRN_LOG(FIRN_LOG_INFO, "engine", "table \"%s\": no usable local key index (%s)",
                 t->display, why);
        loaded = firn__table_share_fetch(t); /* the copy next to the table, if any */
    } else {
        firn__table_share_adopt(t);
    }
    t->index_loaded = loaded;
    if (!loaded)
        return FIRN_OK;
    /* Data files of the snapshot find their ordinals by path; until placed, every ordinal has
     * a placeholder (files no longer live keep it: no entry points at them). */
    uint32_t n = firn__pkindex_files(t->index);
    FIRN_ASSERT(t->n_files == 0);
    t->index_paths = firn__keymap_new();
    t->files = firn_reallocarray(t->files, n ? n : 1, sizeof(*t->files));
    t->dv_files = firn_reallocarray(t->dv_files, n ? n : 1, sizeof(*t->dv_files));
    for (uint32_t i = 0; i < n; i++) {
        const char *p = firn__pkindex_file(t->index, i);
        firn__pkloc v = {i, 0};
        firn__keymap_put(t->index_paths, (const uint8_t *)p, strlen(p), v);
        firn_data_file_init(&t->files[i], FIRN_CONTENT_DATA, p, 0);
        memset(&t->dv_files[i], 0, sizeof(t->dv_files[i]));
        t->dv_files[i].gone = true; /* until placed */
    }
    t->n_files = n;
    return FIRN_OK;
}

firn_rc
firn__table_index_place(firn__table *t, const firn_data_file *f, uint32_t *out_ord, firn_err *err)
{
    firn__pkloc v;
    if (!t->index_paths ||
        !firn__keymap_get(t->index_paths, (const uint8_t *)f->file_path, strlen(f->file_path), &v))
        return firn_err_set(err, FIRN_ERR_NOT_FOUND,
                            "data file \"%s\" is missing from the saved key index", f->file_path);
    FIRN_ASSERT(v.file < t->n_files);
    firn_data_file *dst = &t->files[v.file];
    firn_data_file_deinit(dst);
    firn_data_file_init(dst, FIRN_CONTENT_DATA, f->file_path, f->spec_id);
    dst->record_count = f->record_count;
    dst->file_size_in_bytes = f->file_size_in_bytes;
    if (f->n_partition)
        firn_data_file_set_partition(dst, f->partition, f->n_partition);
    t->dv_files[v.file].gone = false;
    *out_ord = v.file;
    return FIRN_OK;
}

void firn__table_index_loaded_done(firn__table *t)
{
    firn__keymap_free(t->index_paths);
    t->index_paths = NULL;
    t->index_loaded = false;
    t->index_catchup = false;
}

void firn__table_index_synced(firn__table *t)
{
    t->index_synced = true;
    t->index_snapshot = current_snapshot_id(t);
}

void firn__table_index_advanced(firn__table *t)
{
    const firn_snapshot *s = firn_table_metadata_current_snapshot(t->cat.metadata);
    if (t->index_synced && s && s->snapshot_id == t->index_snapshot)
        return; /* nothing was committed */
    /* Another writer's commit in between (a conflict retry): the index no longer holds a
     * snapshot exactly, and the next start must rebuild it. */
    if (!t->index_synced || !s || s->parent_snapshot_id != t->index_snapshot) {
        t->index_synced = false;
        return;
    }
    t->index_snapshot = s->snapshot_id;
}

void firn__table_save_index(firn__table *t)
{
    if (!t->index || !t->index_dir) {
        firn__table_share_persist(t, true);
        return;
    }
    if (!t->index_synced || t->index_snapshot != current_snapshot_id(t)) {
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "table \"%s\": key index not saved (it does not hold the current snapshot)",
                 t->display);
        return;
    }
    char tag[128];
    tag_of(t, t->index_snapshot, tag, sizeof(tag));
    firn_err err = {0};
    int64_t t0 = firn_monotonic_ns();
    if (firn__pkindex_checkpoint(t->index, tag, &err) != FIRN_OK) {
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "table \"%s\": could not save the key index (the next start rebuilds it): %s",
                 t->display, err.msg);
        return;
    }
    FIRN_LOG(FIRN_LOG_INFO, "engine", "table \"%s\": key index saved in \"%s\" (%.1f s)",
             t->display, t->index_dir, (double)(firn_monotonic_ns() - t0) / 1e9);
    firn__table_share_persist(t, true);
}
