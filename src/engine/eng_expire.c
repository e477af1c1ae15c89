/* SPDX-License-Identifier: Apache-2.0 */
/* Snapshot expiry inside the committer (docs/maintenance.md): after a table's commits, the
 * snapshots its retention (Iceberg's history.expire.* table properties, else the destination's
 * "maintenance" block) and its metadata budget no longer keep are removed in one metadata
 * commit, then the files only they referenced are deleted by path: manifest lists, manifests,
 * data, delete and Puffin files. Never a file a retained snapshot references: the reachable set
 * is read from the metadata after the commit. */
#include "engine_int.h"

#include <stdlib.h>
#include <string.h>

#define EXPIRE_BATCH         16 /* commits between two plans, and expired snapshots worth one */
#define BUDGET_WARN_PERCENT  70 /* warn and keep fewer snapshots above this share of the budget */
#define BUDGET_GOAL_PERCENT  50 /* ... until the metadata is back under this share */
#define BIGLAKE_BUDGET_BYTES ((uint64_t)900 << 10) /* BigLake refuses metadata over 1 MB */
#define DEFAULT_BUDGET_BYTES ((uint64_t)4 << 20)

/* ---- the budget and the plan -------------------------------------------------------------- */

uint64_t firn__metadata_budget(const firn_destination_config *d)
{
    if (d->maintenance.max_metadata_bytes > 0)
        return d->maintenance.max_metadata_bytes;
    if (firn_destination_is_biglake(d))
        return BIGLAKE_BUDGET_BYTES;
    return DEFAULT_BUDGET_BYTES;
}

/* Size in bytes of md's metadata JSON as firn writes it (a REST server writes about the same). */
static size_t metadata_bytes(const firn_table_metadata *md)
{
    firn_buf b;
    firn_buf_init(&b, (size_t)1 << 30);
    size_t n = firn_table_metadata_to_json(md, &b, NULL) == FIRN_OK ? b.len : 0;
    firn_buf_deinit(&b);
    return n;
}

/* The newest snapshot firn committed on main: it carries the resume position (firn.lsn, the
 * backfill state), so main keeps its ancestry down to it whatever other writers added. */
static int64_t newest_firn_snapshot(const firn_table_metadata *md)
{
    size_t steps = 0;
    for (const firn_snapshot *s = firn_table_metadata_current_snapshot(md);
         s && steps <= md->n_snapshots; steps++) {
        if (firn_props_get(&s->summary, FIRN_SUMMARY_COMMIT_ID))
            return s->snapshot_id;
        s = s->parent_snapshot_id >= 0 ? firn_table_metadata_snapshot(md, s->parent_snapshot_id)
                                       : NULL;
    }
    return -1;
}

static void base_policy(const firn__table *t, const firn_table_metadata *md, firn_expire_policy *p)
{
    const firn_maintenance_config *m = &t->eng->cfg->destination.maintenance;
    firn_expire_policy_from_table(md, m->snapshot_max_age_ms, m->min_snapshots_to_keep, p);
    p->protect_snapshot_id = newest_firn_snapshot(md);
}

/* The metadata md would be after plan (applied locally, as the catalog will). */
static firn_rc apply_plan(const firn_table_metadata *md,
                          const firn_expire_plan *plan,
                          firn_table_changes *ch,
                          firn_table_metadata **out,
                          firn_err *err)
{
    firn_table_changes_require_uuid(ch, md->table_uuid);
    for (size_t i = 0; i < md->n_refs; i++) /* a ref another writer moves: plan again */
        firn_table_changes_require_ref(ch, md->refs[i].name, md->refs[i].snapshot_id);
    for (size_t i = 0; i < plan->n_removed_refs; i++)
        firn_table_changes_remove_ref(ch, plan->removed_refs[i]);
    if (plan->n_expired)
        firn_table_changes_remove_snapshots(ch, plan->expired, plan->n_expired);
    if (!out)
        return FIRN_OK;
    return firn_table_metadata_apply(md, NULL, ch, firn_now_us() / 1000, out, err);
}

typedef struct expire_ctx {
    size_t cap;                  /* max_main_snapshots of the plan (0: rules only) */
    firn_table_metadata *before; /* the metadata the first attempt expired from (owned) */
    size_t n_expired;            /* snapshots the committed plan removed */
    size_t n_refs_removed;
    bool committed;
} expire_ctx;

static firn_rc expire_once(firn__table *t, void *vctx, firn_err *err)
{
    expire_ctx *x = vctx;
    const firn_table_metadata *md = t->cat.metadata;
    firn_expire_policy p;
    base_policy(t, md, &p);
    p.max_main_snapshots = x->cap;
    firn_expire_plan plan;
    firn_expire_plan_make(md, &p, firn_now_us() / 1000, &plan);
    if (plan.n_expired == 0 && plan.n_removed_refs == 0) {
        firn_expire_plan_deinit(&plan); /* an earlier attempt whose reply was lost did it */
        return FIRN_OK;
    }
    if (!x->before)
        x->before = firn_table_metadata_clone(md);
    firn_table_changes ch;
    firn_table_changes_init(&ch);
    firn_rc_ignore(apply_plan(md, &plan, &ch, NULL, NULL));
    firn_catalog_table next = {0};
    firn_rc rc = firn_catalog_commit(t->eng->catalog, t->ns, t->name, &ch, &next, err);
    if (rc == FIRN_OK) {
        firn_catalog_table_deinit(&t->cat);
        t->cat = next;
        x->n_expired += plan.n_expired;
        x->n_refs_removed += plan.n_removed_refs;
        x->committed = true;
    }
    firn_table_changes_deinit(&ch);
    firn_expire_plan_deinit(&plan);
    return rc;
}

/* ---- deleting what only expired snapshots referenced -------------------------------------- */

typedef struct cleanup {
    firn_io *io;
    size_t lists, manifests, files, failed;
} cleanup;

static void remove_file(cleanup *c, const char *path, size_t *count)
{
    firn__fault_point("expire-deleting");
    firn_err err = {0};
    firn_rc rc = firn_io_remove(c->io, path, &err);
    if (rc == FIRN_OK || rc == FIRN_ERR_NOT_FOUND) {
        (*count)++;
        return;
    }
    c->failed++;
    FIRN_LOG(FIRN_LOG_DEBUG, "engine", "expired file %s not deleted: %s", path, err.msg);
}

/* The records of an expired snapshot's manifest list into *out_files; a list that is gone
 * already (an earlier cleanup was interrupted after deleting it) reads as empty. */
static firn_rc read_expired_list(
    firn_io *io, const char *location, firn_manifest_file **out_files, size_t *out_n, firn_err *err)
{
    *out_files = NULL;
    *out_n = 0;
    firn_rc rc = firn_manifest_list_read(io, location, out_files, out_n, err);
    if (rc == FIRN_ERR_NOT_FOUND) {
        firn_err_clear(err);
        return FIRN_OK;
    }
    return rc;
}

firn_rc firn__snapshot_files(firn_io *io,
                             const firn_snapshot *const *snaps,
                             size_t n_snaps,
                             bool deleted_too,
                             firn__strset *manifests,
                             firn__strset *files,
                             firn_err *err)
{
    firn__strset seen = {0}; /* manifests whose entries are read */
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; i < n_snaps && rc == FIRN_OK; i++) {
        firn_manifest_file *mfs = NULL;
        size_t n = 0;
        firn__strset_add(manifests, snaps[i]->manifest_list);
        rc = firn_manifest_list_read(io, snaps[i]->manifest_list, &mfs, &n, err);
        for (size_t k = 0; k < n && rc == FIRN_OK; k++) {
            firn__strset_add(manifests, mfs[k].manifest_path);
            if (firn__strset_has(&seen, mfs[k].manifest_path))
                continue;
            firn__strset_add(&seen, mfs[k].manifest_path);
            firn_manifest *m = NULL;
            rc = firn_manifest_read(io, &mfs[k], &m, err);
            for (size_t e = 0; rc == FIRN_OK && e < m->n_entries; e++) {
                if (deleted_too || m->entries[e].status != FIRN_ENTRY_DELETED)
                    firn__strset_add(files, m->entries[e].file.file_path);
            }
            firn_manifest_free(m);
        }
        firn_manifest_files_free(mfs, n);
    }
    firn__strset_free(&seen);
    return rc;
}

/* The manifests and live files the snapshots of after reference. With a single lineage only
 * the oldest retained ancestor of main needs reading (firn_table_metadata_single_lineage). A
 * list or manifest that cannot be read fails the cleanup: what it references cannot be told
 * apart from what expired. */
static firn_rc reachable(firn_io *io,
                         const firn_table_metadata *after,
                         firn__strset *manifests,
                         firn__strset *files,
                         firn_err *err)
{
    const firn_snapshot **read = firn_calloc(after->n_snapshots + 1, sizeof(*read));
    size_t n_read = 0;
    if (firn_table_metadata_single_lineage(after)) {
        const firn_snapshot *s = firn_table_metadata_current_snapshot(after);
        size_t steps = 0;
        while (s && steps++ <= after->n_snapshots) {
            read[0] = s;
            n_read = 1;
            s = s->parent_snapshot_id >= 0
                    ? firn_table_metadata_snapshot(after, s->parent_snapshot_id)
                    : NULL;
        }
    } else {
        for (size_t i = 0; i < after->n_snapshots; i++)
            read[n_read++] = after->snapshots[i];
    }
    firn_rc rc = firn__snapshot_files(io, read, n_read, false, manifests, files, err);
    for (size_t i = 0; i < after->n_snapshots; i++)
        firn__strset_add(manifests, after->snapshots[i]->manifest_list); /* lists count too */
    firn_free(read);
    return rc;
}

/* Deletes the files of before's snapshots that after no longer has and no snapshot of after
 * references: data and delete files first, then manifests, then manifest lists, so an
 * interrupted cleanup leaves no reference to a deleted file. */
static firn_rc delete_expired_files(const firn_table_metadata *before,
                                    const firn_table_metadata *after,
                                    cleanup *c,
                                    firn_err *err)
{
    firn__strset keep_manifests = {0}, keep_files = {0}, lists = {0}, gone_manifests = {0};
    firn__strset gone_files = {0};
    firn_rc rc = reachable(c->io, after, &keep_manifests, &keep_files, err);
    for (size_t i = 0; rc == FIRN_OK && i < before->n_snapshots; i++) {
        const firn_snapshot *s = before->snapshots[i];
        if (firn_table_metadata_snapshot(after, s->snapshot_id))
            continue;
        if (!firn__strset_has(&keep_manifests, s->manifest_list))
            firn__strset_add(&lists, s->manifest_list);
        firn_manifest_file *mfs = NULL;
        size_t n = 0;
        rc = read_expired_list(c->io, s->manifest_list, &mfs, &n, err);
        for (size_t k = 0; rc == FIRN_OK && k < n; k++) {
            const char *mp = mfs[k].manifest_path;
            if (firn__strset_has(&keep_manifests, mp) || firn__strset_has(&gone_manifests, mp))
                continue;
            firn__strset_add(&gone_manifests, mp);
            firn_manifest *m = NULL;
            rc = firn_manifest_read(c->io, &mfs[k], &m, err);
            if (rc == FIRN_ERR_NOT_FOUND) {
                firn_err_clear(err);
                rc = FIRN_OK;
                continue;
            }
            for (size_t e = 0; rc == FIRN_OK && e < m->n_entries; e++) {
                const char *fp = m->entries[e].file.file_path;
                if (!firn__strset_has(&keep_files, fp))
                    firn__strset_add(&gone_files, fp);
            }
            firn_manifest_free(m);
        }
        firn_manifest_files_free(mfs, n);
    }
    if (rc == FIRN_OK) {
        for (size_t i = 0; i < gone_files.n; i++)
            remove_file(c, gone_files.v[i], &c->files);
        for (size_t i = 0; i < gone_manifests.n; i++)
            remove_file(c, gone_manifests.v[i], &c->manifests);
        for (size_t i = 0; i < lists.n; i++)
            remove_file(c, lists.v[i], &c->lists);
    }
    firn__strset_free(&keep_manifests);
    firn__strset_free(&keep_files);
    firn__strset_free(&lists);
    firn__strset_free(&gone_manifests);
    firn__strset_free(&gone_files);
    return rc;
}

/* ---- driver ------------------------------------------------------------------------------- */

/* The cap on main's ancestry that brings md under the budget's goal share (0: no cap needed).
 * Warns once per run when md is past the warning share. */
static size_t
budget_cap(firn__table *t, const firn_table_metadata *md, const firn_expire_plan *plan)
{
    uint64_t budget = firn__metadata_budget(&t->eng->cfg->destination);
    firn_table_changes ch;
    firn_table_changes_init(&ch);
    firn_table_metadata *next = NULL;
    size_t size = 0;
    if (apply_plan(md, plan, &ch, &next, NULL) == FIRN_OK)
        size = metadata_bytes(next);
    firn_table_changes_deinit(&ch);
    firn_table_metadata_free(next);
    t->metadata_bytes = size;
    if (size * 100 <= budget * BUDGET_WARN_PERCENT || plan->n_retained <= 1)
        return 0;
    if (!t->metadata_warned) {
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "table \"%s\": its metadata is %zu bytes, over %d%% of maintenance."
                 "max_metadata_size (%llu bytes): keeping fewer snapshots than the retention "
                 "asks (raise max_metadata_size or shorten snapshot_max_age_seconds)",
                 t->display, size, BUDGET_WARN_PERCENT, (unsigned long long)budget);
        t->metadata_warned = true;
    }
    double share = (double)budget * BUDGET_GOAL_PERCENT / 100.0 / (double)size;
    size_t cap = (size_t)((double)plan->n_retained * share);
    return cap < 1 ? 1 : cap;
}

firn_rc firn__expire_run(firn__table *t, bool force, firn__expire_result *res, firn_err *err)
{
    memset(res, 0, sizeof(*res));
    const firn_table_metadata *md = t->cat.metadata;
    if (!md || md->n_snapshots <= 1)
        return FIRN_OK;
    firn_expire_policy p;
    base_policy(t, md, &p);
    firn_expire_plan plan;
    int64_t now_ms = firn_now_us() / 1000;
    firn_expire_plan_make(md, &p, now_ms, &plan);
    size_t cap = budget_cap(t, md, &plan);
    for (int round = 0; cap > 0 && round < 4; round++) {
        p.max_main_snapshots = cap;
        firn_expire_plan_deinit(&plan);
        firn_expire_plan_make(md, &p, now_ms, &plan);
        size_t again = budget_cap(t, md, &plan);
        if (again == 0 || again >= cap)
            break;
        cap = again;
    }
    if (!force && plan.n_expired < EXPIRE_BATCH && cap == 0 && plan.n_removed_refs == 0) {
        firn_expire_plan_deinit(&plan);
        return FIRN_OK;
    }
    bool none = plan.n_expired == 0 && plan.n_removed_refs == 0;
    firn_expire_plan_deinit(&plan);
    if (none)
        return FIRN_OK;
    expire_ctx x = {.cap = p.max_main_snapshots};
    int64_t t0 = firn_monotonic_ns();
    firn_rc rc = firn__table_meta_commit(t, expire_once, &x, err);
    if (rc == FIRN_OK && x.committed)
        firn__fault_point("expire-committed");
    if (rc == FIRN_OK && x.committed && x.before) {
        cleanup c = {.io = t->eng->io};
        firn_err cerr = {0};
        firn_rc crc = delete_expired_files(x.before, t->cat.metadata, &c, &cerr);
        if (crc)
            FIRN_LOG(FIRN_LOG_WARN, "engine",
                     "table \"%s\": files of expired snapshots not deleted: %s (firn maintain "
                     "orphans removes them later)",
                     t->display, cerr.msg);
        res->lists_deleted = c.lists;
        res->manifests_deleted = c.manifests;
        res->files_deleted = c.files;
        res->delete_failures = c.failed;
    }
    if (rc == FIRN_OK && x.committed) {
        res->expired = x.n_expired;
        res->refs_removed = x.n_refs_removed;
        res->retained = t->cat.metadata->n_snapshots;
        res->metadata_bytes = metadata_bytes(t->cat.metadata);
        t->metadata_bytes = res->metadata_bytes;
        t->snapshots_expired += x.n_expired;
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "table \"%s\": expired %zu snapshots (%zu kept%s), deleted %zu manifest lists, "
                 "%zu manifests, %zu data and delete files; metadata %zu bytes, %.0f ms",
                 t->display, res->expired, res->retained,
                 res->refs_removed ? ", expired refs removed" : "", res->lists_deleted,
                 res->manifests_deleted, res->files_deleted, res->metadata_bytes,
                 (double)(firn_monotonic_ns() - t0) / 1e6);
    }
    firn_table_metadata_free(x.before);
    return rc;
}

firn_rc firn__expire_maybe(firn__table *t, firn_err *err)
{
    const firn_maintenance_config *m = &t->eng->cfg->destination.maintenance;
    if (!m->expire_snapshots || t->needs_backfill || t->halted)
        return FIRN_OK;
    ++t->expire_commits;
    /* Between plans, the metadata grows by about one snapshot's share per commit: a table
     * near its budget plans at once. */
    const firn_table_metadata *md = t->cat.metadata;
    size_t per = md && md->n_snapshots ? t->metadata_bytes / md->n_snapshots : 0;
    size_t est = t->metadata_bytes + per * t->expire_commits;
    uint64_t budget = firn__metadata_budget(&t->eng->cfg->destination);
    bool near = t->metadata_bytes && est * 100 > budget * BUDGET_WARN_PERCENT;
    if (t->expire_commits < EXPIRE_BATCH && !near)
        return FIRN_OK;
    t->expire_commits = 0;
    firn__expire_result res;
    firn_err lerr = {0};
    firn_rc rc = firn__expire_run(t, false, &res, &lerr);
    (void)err;
    if (rc)
        FIRN_LOG(FIRN_LOG_WARN, "engine", "table \"%s\": snapshot expiry skipped: %s", t->display,
                 lerr.msg);
    return FIRN_OK;
}
