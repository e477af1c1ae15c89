/* SPDX-License-Identifier: Apache-2.0 */
/* The key index kept next to the table, engine side (docs/internals/pkindex.md
 * "Persistence"): when to upload it (destination.persist_key_index), where it lives
 * (<table location>/metadata/firn-index/), how a start finds it (the manifest of the newest firn
 * snapshot, else the firn.key-index summary key of that snapshot) and downloads it instead of
 * reading every key column; the rebuild then catches it up to the current snapshot. */
#include "eng_pkindex_int.h"

#include <stdio.h>
#include <string.h>

/* Bound on the snapshots walked back from the current one (a loop guard: the walk is over the
 * metadata in memory). */
#define SHARE_WALK_MAX 1000000

static int64_t current_snapshot_id(const firn__table *t)
{
    const firn_snapshot *s = firn_table_metadata_current_snapshot(t->cat.metadata);
    return s ? s->snapshot_id : -1;
}

static bool share_on(const firn__table *t)
{
    return t->eng->cfg->destination.persist_key_index && t->upsert && !t->eqdel;
}

/* "<table location>/metadata/firn-index", owned. */
static char *share_folder(const firn__table *t)
{
    const char *loc = t->cat.metadata->location;
    size_t n = strlen(loc);
    while (n > 0 && loc[n - 1] == '/')
        n--;
    firn_buf b;
    firn_buf_init(&b, 16384);
    firn_rc_ignore(firn_buf_appendf(&b, "%.*s/metadata/firn-index", (int)n, loc));
    return (char *)firn_buf_take(&b, NULL);
}

/* The manifest location of snapshot id: "<folder>/index-<id>.pkm", owned. */
static char *manifest_location(const char *folder, int64_t snapshot_id)
{
    firn_buf b;
    firn_buf_init(&b, 16384);
    firn_rc_ignore(firn_buf_appendf(&b, "%s/index-%lld.pkm", folder, (long long)snapshot_id));
    return (char *)firn_buf_take(&b, NULL);
}

/* The folder part of a manifest location, owned. */
static char *folder_of(const char *location)
{
    const char *slash = strrchr(location, '/');
    return firn_strndup(location, slash ? (size_t)(slash - location) : 0);
}

void firn__table_share_free(firn__table *t)
{
    firn__pkxman_free(t->index_remote);
    firn_free(t->index_remote);
    t->index_remote = NULL;
    firn_free(t->index_ref);
    t->index_ref = NULL;
}

/* Reads the manifest at loc for table t into *m: it must describe an ancestor of the current
 * snapshot (or the current one) of this table. why says what is wrong. */
static firn_rc read_candidate(firn__table *t, const char *loc, firn__pkxman *m, firn_err *err)
{
    FIRN_TRY(firn__pkxman_read(t->eng->io, loc, m, err));
    const firn_table_metadata *md = t->cat.metadata;
    bool ancestor = false;
    const firn_snapshot *s = firn_table_metadata_current_snapshot(md);
    for (size_t i = 0; s && i < SHARE_WALK_MAX && !ancestor; i++) {
        /* The parent may be expired: its child still proves it an ancestor (the catch-up needs
         * only the current snapshot's files). */
        ancestor = s->snapshot_id == m->snapshot_id || s->parent_snapshot_id == m->snapshot_id;
        s = s->parent_snapshot_id >= 0 ? firn_table_metadata_snapshot(md, s->parent_snapshot_id)
                                       : NULL;
    }
    firn_rc rc = FIRN_OK;
    if (strcmp(m->table_uuid, md->table_uuid) != 0)
        rc = firn_err_set(err, FIRN_ERR_PARSE, "\"%s\" is the key index of table %s", loc,
                          m->table_uuid);
    else if (!ancestor)
        rc = firn_err_set(err, FIRN_ERR_NOT_FOUND,
                          "\"%s\" holds snapshot %lld, not an ancestor of the current one", loc,
                          (long long)m->snapshot_id);
    if (rc)
        firn__pkxman_free(m);
    return rc;
}

/* Finds the newest persisted index: the manifest of firn's newest snapshot (saved after that
 * commit), else the one that snapshot's summary names. *out_loc NULL: none. */
static firn_rc find_manifest(firn__table *t, char **out_loc, firn__pkxman *m, firn_err *err)
{
    *out_loc = NULL;
    const firn_table_metadata *md = t->cat.metadata;
    const firn_snapshot *s = firn_table_metadata_current_snapshot(md);
    for (size_t i = 0; s && i < SHARE_WALK_MAX; i++) {
        if (firn_props_get(&s->summary, FIRN_SUMMARY_COMMIT_ID))
            break; /* firn's newest commit */
        s = s->parent_snapshot_id >= 0 ? firn_table_metadata_snapshot(md, s->parent_snapshot_id)
                                       : NULL;
    }
    if (!s || !firn_props_get(&s->summary, FIRN_SUMMARY_COMMIT_ID))
        return FIRN_OK;
    char *folder = share_folder(t);
    char *loc = manifest_location(folder, s->snapshot_id);
    firn_free(folder);
    firn_rc rc = read_candidate(t, loc, m, err);
    if (rc == FIRN_ERR_NOT_FOUND) {
        const char *ref = firn_props_get(&s->summary, FIRN_SUMMARY_KEY_INDEX);
        firn_free(loc);
        loc = NULL;
        firn_err_clear(err);
        if (!ref)
            return FIRN_OK; /* never persisted */
        loc = firn_strdup(ref);
        rc = read_candidate(t, loc, m, err);
    }
    if (rc)
        firn_free(loc);
    else
        *out_loc = loc;
    return rc;
}

static void keep_remote(firn__table *t, char *loc, firn__pkxman *m)
{
    firn__table_share_free(t);
    t->index_ref = loc;
    t->index_remote = firn_malloc(sizeof(*t->index_remote));
    *t->index_remote = *m;
    memset(m, 0, sizeof(*m));
}

void firn__table_share_adopt(firn__table *t)
{
    if (!share_on(t))
        return;
    char *loc = NULL;
    firn__pkxman m = {0};
    firn_err err = {0};
    if (find_manifest(t, &loc, &m, &err) != FIRN_OK || !loc) {
        t->index_persist_ns = 0; /* nothing usable next to the table: upload soon */
        return;
    }
    /* Runs of that manifest that are this index's runs are not uploaded again. */
    keep_remote(t, loc, &m);
    t->index_persist_ns = firn_monotonic_ns();
}

bool firn__table_share_fetch(firn__table *t)
{
    if (!share_on(t) || !t->index_dir)
        return false;
    char *loc = NULL;
    firn__pkxman m = {0};
    firn_err err = {0};
    int64_t t0 = firn_monotonic_ns();
    firn_rc rc = find_manifest(t, &loc, &m, &err);
    if (rc == FIRN_OK && !loc)
        return false; /* never persisted */
    firn__pkxfer x = {0};
    if (rc == FIRN_OK) {
        char *folder = folder_of(loc);
        rc = firn__pkindex_download(t->index, t->eng->io, folder, &m, &x, &err);
        firn_free(folder);
    }
    if (rc) {
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "table \"%s\": key index next to the table not usable, rebuilding it: %s",
                 t->display, err.msg[0] ? err.msg : firn_rc_message(rc));
        firn__pkindex_free(t->index);
        t->index = firn__table_new_index(t);
        if (loc) {
            /* Kept only so that the next upload (right after the rebuild) replaces it and
             * removes its runs: it holds no snapshot this index could reuse. */
            m.snapshot_id = -1;
            memset(m.seed, 0, sizeof(m.seed));
            keep_remote(t, loc, &m);
        }
        firn__pkxman_free(&m);
        t->index_persist_ns = 0;
        return false;
    }
    int64_t cur = current_snapshot_id(t);
    t->index_catchup = m.snapshot_id != cur;
    FIRN_LOG(FIRN_LOG_INFO, "engine",
             "table \"%s\": key index downloaded from the table: snapshot %lld%s, %llu keys, %llu "
             "runs, %.1f MiB, %.1f s",
             t->display, (long long)m.snapshot_id, t->index_catchup ? " (caught up next)" : "",
             (unsigned long long)m.keys, (unsigned long long)x.runs, (double)x.bytes / 1048576.0,
             (double)(firn_monotonic_ns() - t0) / 1e9);
    keep_remote(t, loc, &m);
    t->index_persist_ns = firn_monotonic_ns();
    return true;
}

/* Writes m's encoding at loc, replacing an older object there (a manifest of the same snapshot
 * written by an earlier run: the index was rebuilt since, say because it was damaged). */
static firn_rc write_manifest(firn_io *io, const char *loc, const firn__pkxman *m, firn_err *err)
{
    firn_buf b;
    firn_buf_init(&b, (size_t)1 << 30);
    firn_rc rc = firn__pkxman_encode(m, &b);
    if (rc)
        rc = firn_err_set(err, rc, "key index manifest \"%s\" is too large", loc);
    if (rc == FIRN_OK) {
        rc = firn_io_write_all(io, loc, b.data, b.len, err);
        if (rc == FIRN_ERR_EXISTS) {
            firn_err_clear(err);
            rc = firn_io_remove(io, loc, err);
            if (rc == FIRN_OK)
                rc = firn_io_write_all(io, loc, b.data, b.len, err);
        }
    }
    firn_buf_deinit(&b);
    return rc;
}

/* Uploads the index of snapshot id (runs the last manifest lacks, then the manifest) and drops
 * what the last one named and the new one does not. */
static firn_rc persist_now(firn__table *t, int64_t id, firn__pkxfer *x, firn_err *err)
{
    char *folder = share_folder(t);
    char *loc = manifest_location(folder, id);
    firn__pkxman m = {0};
    firn_rc rc = firn__pkindex_upload(t->index, t->eng->io, folder, t->cat.metadata->table_uuid, id,
                                      t->index_remote, &m, x, err);
    if (rc == FIRN_OK) {
        rc = write_manifest(t->eng->io, loc, &m, err);
        if (rc)
            firn__pkxman_remove_unused(t->eng->io, folder, &m, t->index_remote);
    }
    if (rc == FIRN_OK && t->index_remote) {
        /* The last manifest and its runs the new one does not name are garbage now: commits
         * after this one name the new manifest, and a start looks at this snapshot's first. */
        char *old_folder = folder_of(t->index_ref);
        firn__pkxman_remove_unused(t->eng->io, old_folder, t->index_remote, &m);
        firn_free(old_folder);
        if (strcmp(t->index_ref, loc) != 0) {
            firn_err e = {0};
            firn_rc_ignore(firn_io_remove(t->eng->io, t->index_ref, &e));
        }
    }
    if (rc == FIRN_OK) {
        keep_remote(t, loc, &m);
        loc = NULL;
    }
    firn__pkxman_free(&m);
    firn_free(loc);
    firn_free(folder);
    return rc;
}

void firn__table_share_persist(firn__table *t, bool force)
{
    if (!share_on(t) || !t->index)
        return;
    int64_t id = current_snapshot_id(t);
    if (id < 0 || !t->index_synced || t->index_snapshot != id)
        return; /* only an index that holds a snapshot exactly */
    if (t->index_remote && t->index_remote->snapshot_id == id)
        return; /* already there */
    int64_t now = firn_monotonic_ns();
    int64_t every_ns = t->eng->cfg->destination.persist_key_index_interval_ms * 1000000;
    if (!force && t->index_persist_ns != 0 && now - t->index_persist_ns < every_ns)
        return;
    t->index_persist_ns = now;
    firn__pkxfer x = {0};
    firn_err err = {0};
    if (persist_now(t, id, &x, &err) != FIRN_OK) {
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "table \"%s\": could not upload the key index next to the table (a new host "
                 "rebuilds it): %s",
                 t->display, err.msg);
        return;
    }
    FIRN_LOG(FIRN_LOG_INFO, "engine",
             "table \"%s\": key index uploaded next to the table: snapshot %lld, %zu keys, %llu "
             "new runs of %zu, %.1f MiB, %.1f s",
             t->display, (long long)id, firn__pkindex_count(t->index), (unsigned long long)x.runs,
             t->index_remote->n_runs, (double)x.bytes / 1048576.0,
             (double)(firn_monotonic_ns() - now) / 1e9);
}
