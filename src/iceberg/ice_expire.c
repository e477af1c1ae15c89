/* SPDX-License-Identifier: Apache-2.0 */
/* Which snapshots an expiry removes (spec "Snapshot Retention Policy", Iceberg Java
 * RemoveSnapshots.internalApply): refs past their age, each branch's retained ancestry, tags,
 * young unreferenced snapshots; and a cap on main's ancestry for the metadata budget. Pure
 * computation over the metadata: the engine commits the plan and deletes the files. */
#include "ice_meta_int.h"

#include <stdlib.h>
#include <string.h>

static int64_t prop_positive(const firn_table_metadata *md, const char *key, int64_t def)
{
    const char *v = firn_props_get(&md->properties, key);
    int64_t n = 0;
    if (!v || firn_parse_i64(v, strlen(v), &n, NULL) != FIRN_OK || n <= 0)
        return def;
    return n;
}

void firn_expire_policy_from_table(const firn_table_metadata *md,
                                   int64_t def_age_ms,
                                   int64_t def_min_keep,
                                   firn_expire_policy *p)
{
    memset(p, 0, sizeof(*p));
    p->max_snapshot_age_ms = prop_positive(md, "history.expire.max-snapshot-age-ms", def_age_ms);
    p->min_snapshots_to_keep =
        prop_positive(md, "history.expire.min-snapshots-to-keep", def_min_keep);
    if (p->min_snapshots_to_keep < 1)
        p->min_snapshots_to_keep = 1;
    p->max_ref_age_ms = prop_positive(md, "history.expire.max-ref-age-ms", -1);
    p->protect_snapshot_id = -1;
}

void firn_expire_plan_deinit(firn_expire_plan *plan)
{
    if (!plan)
        return;
    firn_free(plan->expired);
    for (size_t i = 0; i < plan->n_removed_refs; i++)
        firn_free(plan->removed_refs[i]);
    firn_free(plan->removed_refs);
    memset(plan, 0, sizeof(*plan));
}

/* Index of snapshot id in md->snapshots, or -1. Linear: metadata holds at most a few thousand
 * snapshots and a plan is made once per expiry. */
static ptrdiff_t snap_index(const firn_table_metadata *md, int64_t id)
{
    for (size_t i = 0; i < md->n_snapshots; i++) {
        if (md->snapshots[i]->snapshot_id == id)
            return (ptrdiff_t)i;
    }
    return -1;
}

static const firn_snapshot *parent_of(const firn_table_metadata *md, const firn_snapshot *s)
{
    return s->parent_snapshot_id >= 0 ? firn_table_metadata_snapshot(md, s->parent_snapshot_id)
                                      : NULL;
}

/* The head of main: its ref, else the current snapshot (v1 metadata without refs). */
static int64_t main_head(const firn_table_metadata *md)
{
    const firn_snapshot_ref *r = firn_table_metadata_ref(md, "main");
    return r ? r->snapshot_id : md->current_snapshot_id;
}

/* Marks the ancestors of head (head included) in mark[] with value v. */
static void mark_ancestry(const firn_table_metadata *md, int64_t head, uint8_t *mark, uint8_t v)
{
    size_t steps = 0;
    for (const firn_snapshot *s = firn_table_metadata_snapshot(md, head);
         s && steps <= md->n_snapshots; s = parent_of(md, s), steps++) {
        ptrdiff_t i = snap_index(md, s->snapshot_id);
        if (i >= 0)
            mark[i] |= v;
    }
}

/* Keeps head's ancestors while fewer than min_keep are kept or they are younger than cutoff
 * (Java computeBranchSnapshotsToRetain), capped at cap (0: none) and always down to protect. */
static void retain_branch(const firn_table_metadata *md,
                          int64_t head,
                          int64_t min_keep,
                          int64_t cutoff_ms,
                          size_t cap,
                          int64_t protect,
                          bool *keep)
{
    bool protect_below = false; /* protect is an ancestor not reached yet */
    if (protect >= 0) {
        size_t steps = 0;
        for (const firn_snapshot *s = firn_table_metadata_snapshot(md, head);
             s && steps <= md->n_snapshots && !protect_below; s = parent_of(md, s), steps++)
            protect_below = s->snapshot_id == protect;
    }
    size_t kept = 0;
    for (const firn_snapshot *s = firn_table_metadata_snapshot(md, head);
         s && kept <= md->n_snapshots; s = parent_of(md, s)) {
        bool by_rule = (int64_t)kept < min_keep || s->timestamp_ms >= cutoff_ms;
        if (cap > 0 && kept >= cap)
            by_rule = false;
        if (kept == 0)
            by_rule = true; /* the head itself */
        if (!by_rule && !protect_below)
            break;
        ptrdiff_t i = snap_index(md, s->snapshot_id);
        if (i >= 0)
            keep[i] = true;
        kept++;
        if (s->snapshot_id == protect)
            protect_below = false;
    }
}

static int64_t or_default(int64_t own, int64_t def)
{
    return own > 0 ? own : def;
}

void firn_expire_plan_make(const firn_table_metadata *md,
                           const firn_expire_policy *p,
                           int64_t now_ms,
                           firn_expire_plan *out)
{
    memset(out, 0, sizeof(*out));
    size_t n = md->n_snapshots;
    if (n == 0)
        return;
    bool *keep = firn_calloc(n, sizeof(*keep));
    uint8_t *reached = firn_calloc(n, 1); /* ancestry of a retained ref */
    int64_t head = main_head(md);
    int64_t min_keep = p->min_snapshots_to_keep < 1 ? 1 : p->min_snapshots_to_keep;
    bool has_main_ref = firn_table_metadata_ref(md, "main") != NULL;
    for (size_t r = 0; r < md->n_refs; r++) {
        const firn_snapshot_ref *ref = &md->refs[r];
        bool is_main = strcmp(ref->name, "main") == 0;
        const firn_snapshot *s = firn_table_metadata_snapshot(md, ref->snapshot_id);
        int64_t max_ref_age = or_default(ref->max_ref_age_ms, p->max_ref_age_ms);
        if (!is_main && (!s || (max_ref_age > 0 && now_ms - s->timestamp_ms > max_ref_age))) {
            out->removed_refs = firn_reallocarray(out->removed_refs, out->n_removed_refs + 1,
                                                  sizeof(*out->removed_refs));
            out->removed_refs[out->n_removed_refs++] = firn_strdup(ref->name);
            continue;
        }
        if (!s)
            continue;
        if (ref->is_tag) {
            keep[snap_index(md, s->snapshot_id)] = true;
            mark_ancestry(md, s->snapshot_id, reached, 1);
            continue;
        }
        int64_t age = or_default(ref->max_snapshot_age_ms, p->max_snapshot_age_ms);
        int64_t own_min = or_default(ref->min_snapshots_to_keep, min_keep);
        retain_branch(md, s->snapshot_id, own_min, now_ms - age,
                      is_main ? p->max_main_snapshots : 0, is_main ? p->protect_snapshot_id : -1,
                      keep);
        mark_ancestry(md, s->snapshot_id, reached, 1);
    }
    if (!has_main_ref && head >= 0) { /* v1 metadata without refs: the current lineage */
        retain_branch(md, head, min_keep, now_ms - p->max_snapshot_age_ms, p->max_main_snapshots,
                      p->protect_snapshot_id, keep);
        mark_ancestry(md, head, reached, 1);
    }
    int64_t cutoff = now_ms - p->max_snapshot_age_ms;
    for (size_t i = 0; i < n; i++) {
        const firn_snapshot *s = md->snapshots[i];
        if (s->snapshot_id == md->current_snapshot_id)
            keep[i] = true;
        else if (!reached[i] && p->max_main_snapshots == 0 && s->timestamp_ms >= cutoff)
            keep[i] = true; /* unreferenced but young: perhaps a staged commit */
    }
    out->expired = firn_calloc(n, sizeof(*out->expired));
    for (size_t i = 0; i < n; i++) {
        if (keep[i])
            out->n_retained++;
        else
            out->expired[out->n_expired++] = md->snapshots[i]->snapshot_id;
    }
    firn_free(keep);
    firn_free(reached);
}

bool firn_table_metadata_single_lineage(const firn_table_metadata *md)
{
    if (md->n_refs > 1 || (md->n_refs == 1 && strcmp(md->refs[0].name, "main") != 0))
        return false;
    if (md->n_snapshots == 0)
        return true;
    uint8_t *reached = firn_calloc(md->n_snapshots, 1);
    mark_ancestry(md, main_head(md), reached, 1);
    bool all = true;
    for (size_t i = 0; i < md->n_snapshots && all; i++)
        all = reached[i] != 0;
    firn_free(reached);
    return all;
}
