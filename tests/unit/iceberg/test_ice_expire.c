/* SPDX-License-Identifier: Apache-2.0 */
/* Snapshot expiry plans (ice_expire.c): fixed cases for the rules of Java's RemoveSnapshots
 * (min-snapshots-to-keep, max age, tags, refs past max-ref-age, unreferenced young snapshots,
 * table properties over defaults, the budget cap, the protected snapshot), then a seeded random
 * run over histories with branches, tags and side lineages that checks each plan against the
 * rules independently and applies it through firn_table_metadata_apply. */
#include "firn/iceberg.h"
#include "t.h"

#include <stdlib.h>
#include <string.h>

#define T0 1716000000000LL

static firn_table_metadata *new_table(void)
{
    firn_field *root = firn_field_new(0, "", FIRN_TYPE_STRUCT, true);
    firn_field_add(root, firn_field_new(1, "id", FIRN_TYPE_LONG, true));
    firn_schema *s = firn_schema_new(0, root);
    firn_table_create opts = {.schema = s, .location = "/w/t"};
    firn_table_metadata *md = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_table_metadata_new(&opts, &md, &err), &err);
    firn_schema_free(s);
    return md;
}

/* Adds snapshot id (parent, timestamp ts_ms) and points ref at it (NULL: no ref change). */
static void
add(firn_table_metadata **md, int64_t id, int64_t parent, int64_t ts_ms, const char *ref, bool tag)
{
    firn_table_changes c;
    firn_table_changes_init(&c);
    firn_snapshot *s = firn_snapshot_new(id, (*md)->last_sequence_number + 1, ts_ms, "/w/t/l.avro");
    s->parent_snapshot_id = parent;
    s->schema_id = 0;
    firn_props_set(&s->summary, "operation", "append");
    firn_table_changes_add_snapshot(&c, s);
    if (ref)
        firn_table_changes_set_ref(&c, ref, id, tag);
    firn_table_metadata *next = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_table_metadata_apply(*md, NULL, &c, ts_ms, &next, &err), &err);
    firn_snapshot_free(s);
    firn_table_changes_deinit(&c);
    firn_table_metadata_free(*md);
    *md = next;
}

static bool expired(const firn_expire_plan *p, int64_t id)
{
    for (size_t i = 0; i < p->n_expired; i++) {
        if (p->expired[i] == id)
            return true;
    }
    return false;
}

static firn_table_metadata *chain(int n)
{
    firn_table_metadata *md = new_table();
    for (int i = 1; i <= n; i++)
        add(&md, i, i == 1 ? -1 : i - 1, T0 + i * 1000, "main", false);
    return md;
}

T_TEST(min_keep_and_age)
{
    firn_table_metadata *md = chain(10);
    firn_expire_policy p;
    firn_expire_policy_from_table(md, 3500, 2, &p);
    firn_expire_plan plan;
    /* now = T0 + 10000: age 3500 keeps timestamps >= T0 + 6500: snapshots 7..10 */
    firn_expire_plan_make(md, &p, T0 + 10000, &plan);
    T_EQ_UINT(plan.n_retained, 4);
    for (int i = 1; i <= 10; i++)
        T_TRUE(expired(&plan, i) == (i < 7));
    firn_expire_plan_deinit(&plan);
    /* age 0: min-keep decides */
    firn_expire_policy_from_table(md, 1, 3, &p);
    firn_expire_plan_make(md, &p, T0 + 10000, &plan);
    T_EQ_UINT(plan.n_retained, 3);
    T_TRUE(!expired(&plan, 8) && expired(&plan, 7));
    firn_expire_plan_deinit(&plan);
    /* the protected snapshot keeps main's ancestry down to it */
    p.protect_snapshot_id = 4;
    firn_expire_plan_make(md, &p, T0 + 10000, &plan);
    T_EQ_UINT(plan.n_retained, 7);
    T_TRUE(!expired(&plan, 4) && expired(&plan, 3));
    firn_expire_plan_deinit(&plan);
    /* the budget cap overrides min-keep and age, not the protected snapshot */
    firn_expire_policy_from_table(md, 100000, 8, &p);
    p.max_main_snapshots = 2;
    firn_expire_plan_make(md, &p, T0 + 10000, &plan);
    T_EQ_UINT(plan.n_retained, 2);
    p.protect_snapshot_id = 6;
    firn_expire_plan_deinit(&plan);
    firn_expire_plan_make(md, &p, T0 + 10000, &plan);
    T_EQ_UINT(plan.n_retained, 5);
    firn_expire_plan_deinit(&plan);
    firn_table_metadata_free(md);
}

T_TEST(table_properties_win)
{
    firn_table_metadata *md = chain(6);
    firn_props_set(&md->properties, "history.expire.min-snapshots-to-keep", "5");
    firn_props_set(&md->properties, "history.expire.max-snapshot-age-ms", "bogus");
    firn_expire_policy p;
    firn_expire_policy_from_table(md, 1, 2, &p);
    T_EQ_INT(p.min_snapshots_to_keep, 5);
    T_EQ_INT(p.max_snapshot_age_ms, 1); /* not a positive integer: the default */
    T_EQ_INT(p.max_ref_age_ms, -1);
    firn_expire_plan plan;
    firn_expire_plan_make(md, &p, T0 + 100000, &plan);
    T_EQ_UINT(plan.n_expired, 1);
    T_TRUE(expired(&plan, 1));
    firn_expire_plan_deinit(&plan);
    firn_table_metadata_free(md);
}

T_TEST(tags_branches_refs_and_unreferenced)
{
    firn_table_metadata *md = chain(6);
    add(&md, 20, 2, T0 + 2500, "audit", false); /* a branch off snapshot 2 */
    add(&md, 21, 20, T0 + 2600, "audit", false);
    add(&md, 30, 3, T0 + 100000, NULL, false); /* unreferenced and young */
    add(&md, 31, 3, T0 + 3100, NULL, false);   /* unreferenced and old */
    firn_table_changes c;
    firn_table_changes_init(&c);
    firn_table_changes_set_ref(&c, "v1", 1, true); /* a tag on the oldest snapshot */
    firn_table_metadata *next = NULL;
    firn_err err = {0};
    T_OK_ERR(firn_table_metadata_apply(md, NULL, &c, T0 + 7000, &next, &err), &err);
    firn_table_changes_deinit(&c);
    firn_table_metadata_free(md);
    md = next;
    T_TRUE(!firn_table_metadata_single_lineage(md));

    firn_expire_policy p;
    firn_expire_policy_from_table(md, 1, 1, &p);
    firn_expire_plan plan;
    firn_expire_plan_make(md, &p, T0 + 100000, &plan);
    /* main keeps 6, the branch its head 21, the tag 1, the young unreferenced 30 */
    T_TRUE(!expired(&plan, 6) && !expired(&plan, 21) && !expired(&plan, 1) && !expired(&plan, 30));
    T_TRUE(expired(&plan, 5) && expired(&plan, 20) && expired(&plan, 31) && expired(&plan, 2));
    T_EQ_UINT(plan.n_removed_refs, 0);
    firn_expire_plan_deinit(&plan);

    /* max-ref-age removes the tag and the branch (never main); the cap expires 30 too */
    p.max_ref_age_ms = 50000;
    p.max_main_snapshots = 1;
    firn_expire_plan_make(md, &p, T0 + 100000, &plan);
    T_EQ_UINT(plan.n_removed_refs, 2);
    T_EQ_UINT(plan.n_retained, 1);
    T_TRUE(!expired(&plan, 6));
    firn_expire_plan_deinit(&plan);
    firn_table_metadata_free(md);
}

/* ---- seeded random histories ------------------------------------------------------------- */

static uint64_t rng_state;
static uint32_t rnd(uint32_t n)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 33) % n;
}

/* Ancestors of head, newest first, into out (at most cap); returns the count. */
static size_t ancestors(const firn_table_metadata *md, int64_t head, int64_t *out, size_t cap)
{
    size_t n = 0;
    for (const firn_snapshot *s = firn_table_metadata_snapshot(md, head); s && n < cap;
         s = s->parent_snapshot_id >= 0 ? firn_table_metadata_snapshot(md, s->parent_snapshot_id)
                                        : NULL)
        out[n++] = s->snapshot_id;
    return n;
}

static void check_plan(const firn_table_metadata *md,
                       const firn_expire_policy *p,
                       int64_t now,
                       const firn_expire_plan *plan)
{
    int64_t anc[512];
    T_TRUE(!expired(plan, md->current_snapshot_id));
    T_EQ_UINT(plan->n_expired + plan->n_retained, md->n_snapshots);
    for (size_t r = 0; r < md->n_refs; r++) {
        const firn_snapshot_ref *ref = &md->refs[r];
        bool removed = false;
        for (size_t k = 0; k < plan->n_removed_refs; k++)
            removed |= strcmp(plan->removed_refs[k], ref->name) == 0;
        if (strcmp(ref->name, "main") == 0)
            T_TRUE(!removed);
        if (removed)
            continue;
        T_TRUE(!expired(plan, ref->snapshot_id));
        if (ref->is_tag)
            continue;
        bool is_main = strcmp(ref->name, "main") == 0;
        size_t n = ancestors(md, ref->snapshot_id, anc, 512);
        size_t protect_at = SIZE_MAX;
        for (size_t i = 0; is_main && i < n; i++) {
            if (anc[i] == p->protect_snapshot_id)
                protect_at = i;
        }
        bool run = true; /* every ancestor before i satisfied the rules */
        for (size_t i = 0; i < n; i++) {
            const firn_snapshot *s = firn_table_metadata_snapshot(md, anc[i]);
            bool rule = (int64_t)i < p->min_snapshots_to_keep ||
                        s->timestamp_ms >= now - p->max_snapshot_age_ms;
            if (is_main && p->max_main_snapshots && i >= p->max_main_snapshots)
                rule = false;
            run = run && (rule || i == 0);
            if (run || (protect_at != SIZE_MAX && i <= protect_at))
                T_TRUE(!expired(plan, anc[i]));
        }
    }
}

T_TEST(random_histories)
{
    rng_state = 0x5eed1234u;
    for (int round = 0; round < 300; round++) {
        firn_table_metadata *md = new_table();
        int n = 2 + (int)rnd(60);
        int64_t ids[64];
        for (int i = 0; i < n; i++) {
            int64_t id = 100 + i;
            int64_t parent = -1;
            const char *ref = "main";
            bool tag = false;
            uint32_t kind = i == 0 ? 0 : rnd(10);
            if (kind == 0 || kind > 3) { /* on main */
                parent = md->current_snapshot_id;
            } else if (kind == 1) { /* a branch off an older snapshot */
                parent = ids[rnd((uint32_t)i)];
                ref = rnd(2) ? "dev" : "etl";
            } else if (kind == 2) { /* unreferenced */
                parent = ids[rnd((uint32_t)i)];
                ref = NULL;
            } else { /* a tag on a new snapshot off main */
                parent = md->current_snapshot_id;
                ref = rnd(2) ? "t1" : "t2";
                tag = true;
            }
            add(&md, id, parent, T0 + i * 1000 + rnd(500), ref, tag);
            ids[i] = id;
        }
        firn_expire_policy p;
        firn_expire_policy_from_table(md, 1 + rnd(70) * 1000, 1 + rnd(8), &p);
        if (rnd(3) == 0)
            p.max_ref_age_ms = 1 + rnd(70) * 1000;
        if (rnd(3) == 0)
            p.max_main_snapshots = 1 + rnd(10);
        if (rnd(2) == 0)
            p.protect_snapshot_id = ids[rnd((uint32_t)n)];
        int64_t now = T0 + n * 1000 + rnd(5000);
        firn_expire_plan plan;
        firn_expire_plan_make(md, &p, now, &plan);
        check_plan(md, &p, now, &plan);

        /* the plan applies: the refs left point at retained snapshots */
        firn_table_changes c;
        firn_table_changes_init(&c);
        for (size_t i = 0; i < plan.n_removed_refs; i++)
            firn_table_changes_remove_ref(&c, plan.removed_refs[i]);
        if (plan.n_expired)
            firn_table_changes_remove_snapshots(&c, plan.expired, plan.n_expired);
        firn_table_metadata *after = NULL;
        firn_err err = {0};
        T_OK_ERR(firn_table_metadata_apply(md, NULL, &c, now, &after, &err), &err);
        T_EQ_UINT(after->n_snapshots, plan.n_retained);
        T_TRUE(firn_table_metadata_current_snapshot(after) != NULL);
        for (size_t r = 0; r < after->n_refs; r++)
            T_TRUE(firn_table_metadata_snapshot(after, after->refs[r].snapshot_id) != NULL);
        for (size_t i = 0; i < after->n_snapshot_log; i++)
            T_TRUE(firn_table_metadata_snapshot(after, after->snapshot_log[i].snapshot_id));
        /* expiring again with the same rules finds nothing more */
        firn_expire_plan again;
        firn_expire_plan_make(after, &p, now, &again);
        T_EQ_UINT(again.n_removed_refs, 0);
        T_TRUE(again.n_expired == 0 || p.max_main_snapshots == 0);
        firn_expire_plan_deinit(&again);
        firn_table_changes_deinit(&c);
        firn_table_metadata_free(after);
        firn_expire_plan_deinit(&plan);
        firn_table_metadata_free(md);
    }
}

T_MAIN(T_CASE(min_keep_and_age),
       T_CASE(table_properties_win),
       T_CASE(tags_branches_refs_and_unreferenced),
       T_CASE(random_histories))
