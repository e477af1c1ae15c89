/* SPDX-License-Identifier: Apache-2.0 */
/* Position deletes of format-v2 upsert tables (DELETES.md §5.1): each commit writes one delete
 * file per partition; once destination.consolidate_deletes_after of them are not the single
 * file-scoped delete file of their data file, a commit consolidates: every data file they (or
 * the commit's own deletes) touch gets one file-scoped delete file with all its deleted
 * positions (referenced_data_file set, so readers skip it for other files), or is dropped when
 * every row is deleted, and the old delete files go in the same commit. */
#include "engine_int.h"

#include <stdlib.h>
#include <string.h>

void firn__delfiles_reset(firn__table *t)
{
    for (size_t i = 0; i < t->n_delfiles; i++) {
        firn_free(t->delfiles[i].path);
        firn_free(t->delfiles[i].ords);
    }
    firn_free(t->delfiles);
    t->delfiles = NULL;
    t->n_delfiles = 0;
}

void firn__delfiles_add(firn__table *t, const char *path, const uint32_t *ords, size_t n)
{
    t->delfiles = firn_reallocarray(t->delfiles, t->n_delfiles + 1, sizeof(*t->delfiles));
    firn__delfile *d = &t->delfiles[t->n_delfiles++];
    d->path = firn_strdup(path);
    d->ords = firn_memdup(ords, (n ? n : 1) * sizeof(uint32_t));
    d->n_ords = n;
}

static void delfile_remove(firn__table *t, size_t i)
{
    firn_free(t->delfiles[i].path);
    firn_free(t->delfiles[i].ords);
    memmove(&t->delfiles[i], &t->delfiles[i + 1], (t->n_delfiles - i - 1) * sizeof(*t->delfiles));
    t->n_delfiles--;
}

void firn__delfiles_forget(firn__table *t, const char *path)
{
    for (size_t i = 0; i < t->n_delfiles; i++) {
        if (strcmp(t->delfiles[i].path, path) == 0) {
            delfile_remove(t, i);
            return;
        }
    }
}

/* Tracked delete files that delete from one data file only, per data file ordinal. */
static uint32_t *count_refs(const firn__table *t)
{
    uint32_t *refs = firn_calloc(t->n_files ? t->n_files : 1, sizeof(uint32_t));
    for (size_t i = 0; i < t->n_delfiles; i++) {
        if (t->delfiles[i].n_ords == 1)
            refs[t->delfiles[i].ords[0]]++;
    }
    return refs;
}

/* A delete file is consolidated when it deletes from one live data file and is the only such
 * file of it (a file of rows of data files no longer live is dangling: the next consolidation
 * drops it). Files deleting from several data files never are. */
static bool consolidated(const firn__table *t, const firn__delfile *d, const uint32_t *refs)
{
    return d->n_ords == 1 && refs[d->ords[0]] == 1 && !t->dv_files[d->ords[0]].gone;
}

static int cmp_posdel_group(const void *a, const void *b)
{
    const firn__posdel *x = a, *y = b;
    if (x->group != y->group)
        return x->group < y->group ? -1 : 1;
    return (x->ord > y->ord) - (x->ord < y->ord);
}

bool firn__consolidate_due(const firn__table *t, const firn__posdel *dels, size_t n_dels)
{
    int64_t after = t->eng->cfg->destination.consolidate_deletes_after;
    if (t->dv || after <= 0 || n_dels == 0)
        return false;
    /* The table as it would be after this commit: tracked files plus one per group. */
    firn__posdel *d = firn_memdup(dels, n_dels * sizeof(*dels));
    qsort(d, n_dels, sizeof(*d), cmp_posdel_group);
    uint32_t *refs = count_refs(t);
    int64_t loose = 0;
    size_t n_groups = 0;
    uint32_t *single = firn_calloc(n_dels, sizeof(uint32_t)); /* ordinal of one-file groups */
    for (size_t i = 0; i < n_dels;) {
        size_t j = i, n_ords = 0;
        for (; j < n_dels && d[j].group == d[i].group; j++)
            n_ords += j == i || d[j].ord != d[j - 1].ord;
        if (n_ords == 1) {
            refs[d[i].ord]++;
            single[n_groups++] = d[i].ord;
        } else {
            loose++;
        }
        i = j;
    }
    for (size_t i = 0; i < n_groups; i++)
        loose += refs[single[i]] != 1;
    for (size_t i = 0; i < t->n_delfiles; i++)
        loose += !consolidated(t, &t->delfiles[i], refs);
    firn_free(single);
    firn_free(refs);
    firn_free(d);
    return loose >= after;
}

void firn__consolidation_free(firn__consolidation *c)
{
    if (!c)
        return;
    firn_free(c->dels);
    firn_free(c->removed);
    firn_free(c->retired);
    firn_free(c->dropped);
    memset(c, 0, sizeof(*c));
}

typedef struct collect_ctx {
    firn__consolidation *c;
    const char *path;
    uint32_t ord, group;
} collect_ctx;

static bool collect_pos(void *ctx, uint64_t pos)
{
    collect_ctx *x = ctx;
    x->c->dels[x->c->n_dels++] = (firn__posdel){x->path, (int64_t)pos, x->group, x->ord};
    return true;
}

/* The data files to rewrite: those of this commit's deletes and of every tracked delete file
 * that is not consolidated (marked in want[]); the delete files to retire: all tracked ones of
 * those data files or of data files no longer live. */
static void plan_files(
    firn__table *t, const firn__posdel *dels, size_t n_dels, bool *want, firn__consolidation *c)
{
    uint32_t *refs = count_refs(t);
    for (size_t i = 0; i < n_dels; i++)
        want[dels[i].ord] = true;
    for (size_t i = 0; i < t->n_delfiles; i++) {
        const firn__delfile *d = &t->delfiles[i];
        for (size_t k = 0; !consolidated(t, d, refs) && k < d->n_ords; k++)
            want[d->ords[k]] = true;
    }
    firn_free(refs);
    c->retired = firn_calloc(t->n_delfiles ? t->n_delfiles : 1, sizeof(size_t));
    for (size_t i = 0; i < t->n_delfiles; i++) {
        const firn__delfile *d = &t->delfiles[i];
        bool hit = d->n_ords == 0; /* dangling: its data files are gone */
        for (size_t k = 0; !hit && k < d->n_ords; k++)
            hit = want[d->ords[k]];
        if (hit)
            c->retired[c->n_retired++] = i;
    }
}

/* Every deleted position (old ones from the dead rows, new ones from dels) of the wanted data
 * files, one group each; data files with every row deleted are dropped instead. */
static void plan_rows(firn__table *t,
                      const firn__posdel *dels,
                      size_t n_dels,
                      const bool *want,
                      firn__consolidation *c,
                      uint32_t **out_group_ords,
                      size_t *out_n_groups)
{
    firn_bitmap64 **dead = firn_calloc(t->n_files ? t->n_files : 1, sizeof(*dead));
    size_t total = 0, n_groups = 0;
    for (size_t i = 0; i < n_dels; i++) {
        uint32_t o = dels[i].ord;
        if (!dead[o]) {
            dead[o] = firn_bitmap64_new();
            if (t->dv_files[o].dead)
                firn_bitmap64_or(dead[o], t->dv_files[o].dead);
        }
        firn_bitmap64_add(dead[o], (uint64_t)dels[i].pos);
    }
    for (uint32_t o = 0; o < t->n_files; o++) {
        if (!want[o] || t->dv_files[o].gone)
            continue;
        if (!dead[o] && t->dv_files[o].dead)
            total += firn_bitmap64_cardinality(t->dv_files[o].dead);
        else if (dead[o])
            total += firn_bitmap64_cardinality(dead[o]);
    }
    c->dels = firn_calloc(total ? total : 1, sizeof(*c->dels));
    c->dropped = firn_calloc(t->n_files ? t->n_files : 1, sizeof(uint32_t));
    uint32_t *group_ords = firn_calloc(t->n_files ? t->n_files : 1, sizeof(uint32_t));
    for (uint32_t o = 0; o < t->n_files; o++) {
        const firn_bitmap64 *rows = dead[o] ? dead[o] : t->dv_files[o].dead;
        if (!want[o] || t->dv_files[o].gone || !rows)
            continue;
        uint64_t n = firn_bitmap64_cardinality(rows);
        if (n == 0)
            continue;
        if (t->files[o].record_count > 0 && n >= (uint64_t)t->files[o].record_count) {
            c->dropped[c->n_dropped++] = o;
            continue;
        }
        collect_ctx x = {c, t->files[o].file_path, o, (uint32_t)n_groups};
        group_ords[n_groups++] = o;
        firn_bitmap64_foreach(rows, collect_pos, &x);
    }
    for (uint32_t o = 0; o < t->n_files; o++)
        firn_bitmap64_free(dead[o]);
    firn_free(dead);
    *out_group_ords = group_ords;
    *out_n_groups = n_groups;
}

firn_rc firn__consolidate_write(firn__table *t,
                                const firn__write_ctx *w,
                                const firn__posdel *dels,
                                size_t n_dels,
                                firn_data_file **files,
                                size_t *n_files,
                                firn__consolidation *c,
                                firn_err *err)
{
    memset(c, 0, sizeof(*c));
    c->on = true;
    bool *want = firn_calloc(t->n_files ? t->n_files : 1, sizeof(bool));
    plan_files(t, dels, n_dels, want, c);
    uint32_t *group_ords = NULL;
    size_t n_groups = 0;
    plan_rows(t, dels, n_dels, want, c, &group_ords, &n_groups);
    firn_free(want);
    c->removed = firn_calloc(c->n_retired + c->n_dropped + 1, sizeof(char *));
    for (size_t i = 0; i < c->n_retired; i++)
        c->removed[c->n_removed++] = t->delfiles[c->retired[i]].path;
    for (size_t i = 0; i < c->n_dropped; i++)
        c->removed[c->n_removed++] = t->files[c->dropped[i]].file_path;
    const firn_value **parts = firn_calloc(n_groups ? n_groups : 1, sizeof(*parts));
    for (size_t g = 0; g < n_groups; g++)
        parts[g] = t->files[group_ords[g]].partition;
    const firn_partition_spec *spec = firn_table_metadata_spec(t->cat.metadata);
    firn_rc rc = firn__write_position_deletes(w, c->dels, c->n_dels, parts, spec->n_fields,
                                              spec->spec_id, files, n_files, err);
    FIRN_LOG(FIRN_LOG_INFO, "engine",
             "table \"%s\": consolidating position deletes: %zu data files get one delete file "
             "each (%zu positions), %zu dropped whole, %zu delete files replaced",
             t->display, n_groups, c->n_dels, c->n_dropped, c->n_retired);
    firn_free(parts);
    firn_free(group_ords);
    return rc;
}

void firn__delfiles_commit_done(firn__table *t,
                                const firn__posdel *dels,
                                size_t n_dels,
                                const firn_data_file *added,
                                size_t n_added,
                                const firn__consolidation *c)
{
    for (size_t i = 0; i < n_dels; i++) {
        firn__dvfile *d = &t->dv_files[dels[i].ord];
        if (!d->dead)
            d->dead = firn_bitmap64_new();
        firn_bitmap64_add(d->dead, (uint64_t)dels[i].pos);
    }
    if (c && c->on) {
        for (size_t i = c->n_retired; i-- > 0;)
            delfile_remove(t, c->retired[i]);
        for (size_t i = 0; i < c->n_dropped; i++) {
            firn__dvfile *d = &t->dv_files[c->dropped[i]];
            d->gone = true;
            firn_bitmap64_free(d->dead);
            d->dead = NULL;
        }
    }
    uint32_t *ords = firn_calloc(n_dels ? n_dels : 1, sizeof(uint32_t));
    size_t i = 0;
    for (size_t k = 0; k < n_added; k++) {
        size_t n = 0;
        for (; i < n_dels && dels[i].group == k; i++) {
            if (n == 0 || ords[n - 1] != dels[i].ord)
                ords[n++] = dels[i].ord;
        }
        firn__delfiles_add(t, added[k].file_path, ords, n);
    }
    firn_free(ords);
}
