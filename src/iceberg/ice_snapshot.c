/* SPDX-License-Identifier: Apache-2.0 */
/* Snapshot producer: the manifest work of one commit (Java SnapshotProducer, MergingSnapshot
 * Producer and SnapshotSummary, reduced to plain inputs): new manifests for added files,
 * rewritten manifests for removed files, carried-over (optionally merged) parent manifests,
 * the manifest list and the snapshot summary (ICEBERG.md §A "Snapshot summary", §B, §D). */
#include "ice_manifest_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct counters {
    int64_t files[3]; /* per content: data, position deletes (DVs included), equality deletes */
    int64_t records[3];
    int64_t dvs;
    int64_t size_bytes;
} counters;

/* A data file receiving a DV in this commit and the DV it must replace. */
typedef struct dv_slot {
    const char *data_file;
    const char *dv_path; /* NULL: the data file must have no live DV */
    int64_t dv_offset;
    bool found;
} dv_slot;

typedef struct producer {
    firn_io *io;
    const firn_snapshot_input *in;
    firn_err *err;
    counters added, dropped;
    firn_manifest_file *out; /* manifests of the new list */
    size_t n_out, cap_out;
    size_t created, kept, replaced;
    char **removed; /* sorted copy of in->removed_paths (borrowed strings) */
    bool *found;
    char **parts; /* changed partition keys, owned */
    size_t n_parts, cap_parts;
    int manifest_seq;
    dv_slot *dvs; /* sorted by data_file */
    size_t n_dvs;
    char **required; /* sorted copy of in->required_data_paths (borrowed strings) */
    bool *required_found;
} producer;

static void push_out(producer *p, firn_manifest_file *mf)
{
    if (p->n_out == p->cap_out) {
        p->cap_out = p->cap_out ? p->cap_out * 2 : 8;
        p->out = firn_reallocarray(p->out, p->cap_out, sizeof *p->out);
    }
    p->out[p->n_out++] = *mf;
    memset(mf, 0, sizeof *mf);
}

static void count_file(counters *c, const firn_data_file *f)
{
    c->files[f->content]++;
    c->records[f->content] += f->record_count;
    if (firn_data_file_is_dv(f)) {
        c->dvs++;
        c->size_bytes += f->content_size_in_bytes; /* a DV counts its blob, not the Puffin */
    } else {
        c->size_bytes += f->file_size_in_bytes;
    }
}

/* Remembers the partition of a changed file as "<spec>:<hex of each value>". */
static void note_partition(producer *p, const firn_data_file *f)
{
    firn_buf b;
    firn_buf_init(&b, 1 << 20);
    firn_rc rc = firn_buf_appendf(&b, "%d", (int)f->spec_id);
    for (size_t i = 0; !rc && i < f->n_partition; i++) {
        rc = firn_buf_append_cstr(&b, f->partition[i].is_null ? "|n" : "|v");
        firn_buf v;
        firn_buf_init(&v, 1 << 20);
        if (!rc)
            rc = firn_value_to_bytes(&f->partition[i], &v, NULL);
        for (size_t k = 0; !rc && k < v.len; k++)
            rc = firn_buf_appendf(&b, "%02x", v.data[k]);
        firn_buf_deinit(&v);
    }
    if (p->n_parts == p->cap_parts) {
        p->cap_parts = p->cap_parts ? p->cap_parts * 2 : 16;
        p->parts = firn_reallocarray(p->parts, p->cap_parts, sizeof *p->parts);
    }
    p->parts[p->n_parts++] = (char *)firn_buf_take(&b, NULL);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static size_t count_unique_parts(producer *p)
{
    if (p->n_parts == 0)
        return 0;
    qsort(p->parts, p->n_parts, sizeof *p->parts, cmp_str);
    size_t n = 1;
    for (size_t i = 1; i < p->n_parts; i++)
        n += strcmp(p->parts[i], p->parts[i - 1]) != 0;
    return n;
}

/* Index of path in the sorted removal list, or -1. */
static ptrdiff_t removed_index(const producer *p, const char *path)
{
    size_t lo = 0, hi = p->in->n_removed_paths;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(p->removed[mid], path);
        if (c == 0)
            return (ptrdiff_t)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* Marks the required data paths that are live data files of manifest m. */
static void note_required(producer *p, const firn_manifest *m)
{
    size_t nr = p->in->n_required_data_paths;
    for (size_t i = 0; nr > 0 && i < m->n_entries; i++) {
        const firn_manifest_entry *e = &m->entries[i];
        if (e->status == FIRN_ENTRY_DELETED || e->file.content != FIRN_CONTENT_DATA)
            continue;
        const char *key = e->file.file_path;
        char **hit = bsearch(&key, p->required, nr, sizeof *p->required, cmp_str);
        if (hit)
            p->required_found[hit - p->required] = true;
    }
}

static int cmp_slot(const void *a, const void *b)
{
    return strcmp(((const dv_slot *)a)->data_file, ((const dv_slot *)b)->data_file);
}

/* The DV slot of a data file, or NULL. */
static dv_slot *slot_of(const producer *p, const char *data_file)
{
    if (!data_file || p->n_dvs == 0)
        return NULL;
    dv_slot key = {data_file, NULL, 0, false};
    return bsearch(&key, p->dvs, p->n_dvs, sizeof(dv_slot), cmp_slot);
}

/* One slot per added DV, with the expectation from dv_replaces. */
static firn_rc build_slots(producer *p)
{
    const firn_snapshot_input *in = p->in;
    p->dvs = firn_calloc(in->n_added_deletes ? in->n_added_deletes : 1, sizeof(dv_slot));
    for (size_t i = 0; i < in->n_added_deletes; i++) {
        const firn_data_file *f = &in->added_deletes[i];
        if (firn_data_file_is_dv(f))
            p->dvs[p->n_dvs++] = (dv_slot){f->referenced_data_file, NULL, 0, false};
    }
    qsort(p->dvs, p->n_dvs, sizeof(dv_slot), cmp_slot);
    for (size_t i = 1; i < p->n_dvs; i++) {
        if (strcmp(p->dvs[i].data_file, p->dvs[i - 1].data_file) == 0)
            return firn_err_set(p->err, FIRN_ERR_INVALID,
                                "two deletion vectors for data file \"%s\" in one commit",
                                p->dvs[i].data_file);
    }
    for (size_t i = 0; i < in->n_dv_replaces; i++) {
        const firn_dv_replace *r = &in->dv_replaces[i];
        dv_slot *slot = slot_of(p, r->data_file);
        if (!slot)
            return firn_err_set(p->err, FIRN_ERR_INVALID,
                                "deletion vector of \"%s\" is replaced but no new one is added",
                                r->data_file);
        slot->dv_path = r->dv_path;
        slot->dv_offset = r->dv_offset;
    }
    return FIRN_OK;
}

/* Whether a live delete entry goes away because its data file gets a new DV. A DV other than
 * the one the caller merged is a conflict: its positions would be lost. */
static firn_rc replaced_by_dv(producer *p, const firn_data_file *f, bool *out)
{
    *out = false;
    dv_slot *slot =
        f->content == FIRN_CONTENT_POSITION_DELETES ? slot_of(p, f->referenced_data_file) : NULL;
    if (!slot)
        return FIRN_OK;
    if (firn_data_file_is_dv(f)) {
        bool same = slot->dv_path && strcmp(slot->dv_path, f->file_path) == 0 &&
                    f->has_content_offset && f->content_offset == slot->dv_offset;
        if (!same)
            return firn_err_set(p->err, FIRN_ERR_EXISTS,
                                "data file \"%s\" has a deletion vector in \"%s\" that this "
                                "commit did not merge",
                                slot->data_file, f->file_path);
        slot->found = true;
    }
    *out = true; /* the DV, or a file-scoped position-delete file merged into it */
    return FIRN_OK;
}

static firn_rc new_location(producer *p, firn_buf *loc)
{
    uint8_t u[16];
    char s[37];
    firn_uuid_v4(u);
    firn_uuid_format(u, s);
    firn_buf_reset(loc);
    if (firn_buf_appendf(loc, "%s/%s-m%d.avro", p->in->metadata_location, s, p->manifest_seq++))
        return firn_err_set(p->err, FIRN_ERR_TOO_LARGE, "metadata location too long");
    return FIRN_OK;
}

/* Opens a writer for content/spec; for an older spec the partition types come from entries. */
static firn_rc open_writer(producer *p,
                           firn_manifest_content content,
                           const firn_partition_spec *spec,
                           firn_manifest_writer **out)
{
    const firn_snapshot_input *in = p->in;
    firn_manifest_opts o = {in->format_version, content,         spec,
                            in->schema,         in->schema_json, in->schema_id,
                            in->snapshot_id,    in->codec};
    return firn_manifest_writer_new(&o, out, p->err);
}

static firn_rc finish_writer(producer *p, firn_manifest_writer *w, firn_manifest_file *mf)
{
    firn_buf loc;
    firn_buf_init(&loc, 4096);
    firn_rc rc = new_location(p, &loc);
    if (!rc)
        rc = firn_manifest_writer_finish(w, p->io, (const char *)loc.data, mf, p->err);
    firn_buf_deinit(&loc);
    return rc;
}

static firn_rc
write_new(producer *p, firn_manifest_content content, const firn_data_file *files, size_t n)
{
    if (n == 0)
        return FIRN_OK;
    firn_manifest_writer *w = NULL;
    firn_manifest_file mf;
    FIRN_TRY(open_writer(p, content, p->in->spec, &w));
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; !rc && i < n; i++) {
        if ((files[i].content == FIRN_CONTENT_DATA) != (content == FIRN_MANIFEST_DATA)) {
            rc = firn_err_set(p->err, FIRN_ERR_INVALID,
                              "file \"%s\" is listed with the wrong content", files[i].file_path);
            break;
        }
        if (content == FIRN_MANIFEST_DATA && p->in->added_data_sequence_number > 0) {
            firn_manifest_entry e = {FIRN_ENTRY_ADDED, p->in->snapshot_id,
                                     p->in->added_data_sequence_number, FIRN_SEQ_NULL, files[i]};
            rc = firn_manifest_writer_add(w, &e, p->err);
        } else {
            rc = firn_manifest_writer_add_file(w, &files[i], p->err);
        }
        if (!rc) {
            count_file(&p->added, &files[i]);
            note_partition(p, &files[i]);
        }
    }
    if (!rc)
        rc = finish_writer(p, w, &mf);
    firn_manifest_writer_free(w);
    if (!rc) {
        push_out(p, &mf);
        p->created++;
    }
    return rc;
}

/* Parses the "partition-spec" header of an older manifest into a spec. */
static firn_rc spec_from_manifest(producer *p, const firn_manifest *m, firn_partition_spec **out)
{
    if (m->spec_id == p->in->spec->spec_id) {
        *out = NULL;
        return FIRN_OK;
    }
    firn_rc rc = firn__partition_spec_parse_fields(m->partition_spec_json, m->spec_id, out, p->err);
    if (rc)
        firn_err_context(p->err, "while reading partition spec %d", (int)m->spec_id);
    return rc;
}

static firn_rc
rewrite_entries(producer *p, const firn_manifest *m, firn_manifest_writer *w, bool drop_removed)
{
    for (size_t i = 0; i < m->n_entries; i++) {
        firn_manifest_entry e = m->entries[i];
        if (e.status == FIRN_ENTRY_DELETED)
            continue;
        ptrdiff_t r = removed_index(p, e.file.file_path);
        bool by_dv = false;
        if (drop_removed)
            FIRN_TRY(replaced_by_dv(p, &e.file, &by_dv));
        bool remove = drop_removed && (p->in->truncate || r >= 0 || by_dv);
        if (remove) {
            if (r >= 0)
                p->found[r] = true;
            e.status = FIRN_ENTRY_DELETED;
            e.snapshot_id = p->in->snapshot_id;
            count_file(&p->dropped, &e.file);
            note_partition(p, &e.file);
        } else {
            e.status = FIRN_ENTRY_EXISTING;
        }
        FIRN_TRY(firn_manifest_writer_add(w, &e, p->err));
    }
    return FIRN_OK;
}

/* Rewrites manifests (one, or several merged) of one content and spec into a new manifest. */
static firn_rc rewrite(producer *p, firn_manifest **ms, size_t n, bool drop_removed)
{
    firn_partition_spec *own = NULL;
    firn_manifest_writer *w = NULL;
    firn_manifest_file mf;
    firn_rc rc = spec_from_manifest(p, ms[0], &own);
    if (!rc)
        rc = open_writer(p, ms[0]->content, own ? own : p->in->spec, &w);
    for (size_t i = 0; !rc && i < n; i++)
        rc = rewrite_entries(p, ms[i], w, drop_removed);
    if (!rc && firn_manifest_writer_count(w) == 0) {
        firn_manifest_writer_free(w);
        firn_partition_spec_free(own);
        p->replaced += n;
        return FIRN_OK; /* every entry was an old DELETED one: drop the manifest */
    }
    if (!rc)
        rc = finish_writer(p, w, &mf);
    firn_manifest_writer_free(w);
    firn_partition_spec_free(own);
    if (!rc) {
        push_out(p, &mf);
        p->created++;
        p->replaced += n;
    }
    return rc;
}

static bool holds_removed(const producer *p, const firn_manifest *m)
{
    for (size_t i = 0; i < m->n_entries; i++) {
        const firn_manifest_entry *e = &m->entries[i];
        if (e->status == FIRN_ENTRY_DELETED)
            continue;
        if (p->in->truncate || removed_index(p, e->file.file_path) >= 0)
            return true;
        if (e->file.content == FIRN_CONTENT_POSITION_DELETES &&
            slot_of(p, e->file.referenced_data_file))
            return true;
    }
    return false;
}

/* Kept parent manifests: copied verbatim, or merged per (content, spec) past merge_min_count. */
static firn_rc
merge_kept(producer *p, const firn_manifest_file *parents, size_t n, const bool *keep)
{
    bool *done = firn_calloc(n ? n : 1, sizeof *done);
    firn_manifest **ms = firn_calloc(n ? n : 1, sizeof *ms);
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; !rc && i < n; i++) {
        if (!keep[i] || done[i])
            continue;
        size_t group = 0;
        for (size_t k = i; k < n; k++) {
            group += keep[k] && !done[k] && parents[k].content == parents[i].content &&
                     parents[k].partition_spec_id == parents[i].partition_spec_id;
        }
        if (p->in->merge_min_count == 0 || group < p->in->merge_min_count || group < 2) {
            firn_manifest_file copy;
            firn_manifest_file_copy(&copy, &parents[i]);
            push_out(p, &copy);
            p->kept++;
            done[i] = true;
            continue;
        }
        size_t nm = 0;
        for (size_t k = i; !rc && k < n; k++) {
            if (!keep[k] || done[k] || parents[k].content != parents[i].content ||
                parents[k].partition_spec_id != parents[i].partition_spec_id)
                continue;
            done[k] = true;
            rc = firn_manifest_read(p->io, &parents[k], &ms[nm], p->err);
            if (!rc)
                nm++;
        }
        if (!rc)
            rc = rewrite(p, ms, nm, false);
        for (size_t k = 0; k < nm; k++)
            firn_manifest_free(ms[k]);
    }
    firn_free(ms);
    firn_free(done);
    return rc;
}

/* Parent manifests: rewrite those with removed files, keep the rest (merged if many). */
static firn_rc carry_parents(producer *p, firn_manifest_file *parents, size_t n_parents)
{
    bool need_read = p->in->truncate || p->in->n_removed_paths > 0;
    bool *keep = firn_calloc(n_parents ? n_parents : 1, sizeof *keep);
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; !rc && i < n_parents; i++) {
        const firn_manifest_file *mf = &parents[i];
        /* Manifests left with only DELETED entries by an earlier commit are dropped (Java). */
        keep[i] = mf->added_files_count + mf->existing_files_count > 0;
        bool read = need_read || (mf->content == FIRN_MANIFEST_DELETES && p->n_dvs > 0) ||
                    (mf->content == FIRN_MANIFEST_DATA && p->in->n_required_data_paths > 0);
        if (!read || !keep[i])
            continue;
        firn_manifest *m = NULL;
        rc = firn_manifest_read(p->io, mf, &m, p->err);
        if (!rc)
            note_required(p, m);
        if (!rc && holds_removed(p, m)) {
            keep[i] = false;
            rc = rewrite(p, &m, 1, true);
        }
        firn_manifest_free(m);
    }
    if (!rc)
        rc = merge_kept(p, parents, n_parents, keep);
    firn_free(keep);
    return rc;
}

static void set_if(firn_summary *s, const char *key, int64_t v)
{
    if (v != 0)
        firn_summary_set_i64(s, key, v);
}

/* total = previous total + added - removed; omitted when the previous total is unknown. */
static void set_total(const producer *p, firn_summary *s, const char *key, int64_t delta)
{
    const firn_snapshot_input *in = p->in;
    const char *prev_s = firn_summary_get(in->parent_summary, key);
    int64_t prev = 0;
    if (prev_s) {
        if (firn_parse_i64(prev_s, strlen(prev_s), &prev, NULL))
            return;
    } else if (in->parent_manifest_list) {
        return;
    }
    firn_summary_set_i64(s, key, prev + delta);
}

static const char *operation(const producer *p)
{
    const counters *a = &p->added, *r = &p->dropped;
    int64_t added_deletes = a->files[1] + a->files[2];
    int64_t removed_any = r->files[0] + r->files[1] + r->files[2];
    if (p->in->replace)
        return "replace";
    if (added_deletes == 0 && removed_any == 0)
        return "append";
    if (a->files[0] == 0)
        return "delete";
    return "overwrite";
}

static void build_summary(producer *p, firn_snapshot_result *res)
{
    firn_summary *s = &res->summary;
    const counters *a = &p->added, *r = &p->dropped;
    firn_summary_set(s, "operation", res->operation);
    set_if(s, "added-data-files", a->files[0]);
    set_if(s, "deleted-data-files", r->files[0]);
    set_if(s, "added-delete-files", a->files[1] + a->files[2]);
    set_if(s, "added-equality-delete-files", a->files[2]);
    set_if(s, "removed-equality-delete-files", r->files[2]);
    set_if(s, "added-position-delete-files", a->files[1] - a->dvs);
    set_if(s, "removed-position-delete-files", r->files[1] - r->dvs);
    set_if(s, "added-dvs", a->dvs);
    set_if(s, "removed-dvs", r->dvs);
    set_if(s, "removed-delete-files", r->files[1] + r->files[2]);
    set_if(s, "added-records", a->records[0]);
    set_if(s, "deleted-records", r->records[0]);
    set_if(s, "added-files-size", a->size_bytes);
    set_if(s, "removed-files-size", r->size_bytes);
    set_if(s, "added-position-deletes", a->records[1]);
    set_if(s, "removed-position-deletes", r->records[1]);
    set_if(s, "added-equality-deletes", a->records[2]);
    set_if(s, "removed-equality-deletes", r->records[2]);
    firn_summary_set_i64(s, "changed-partition-count", (int64_t)count_unique_parts(p));
    set_total(p, s, "total-records", a->records[0] - r->records[0]);
    set_total(p, s, "total-files-size", a->size_bytes - r->size_bytes);
    set_total(p, s, "total-data-files", a->files[0] - r->files[0]);
    set_total(p, s, "total-delete-files", a->files[1] + a->files[2] - r->files[1] - r->files[2]);
    set_total(p, s, "total-position-deletes", a->records[1] - r->records[1]);
    set_total(p, s, "total-equality-deletes", a->records[2] - r->records[2]);
    firn_summary_set_i64(s, "manifests-created", (int64_t)p->created);
    firn_summary_set_i64(s, "manifests-kept", (int64_t)p->kept);
    firn_summary_set_i64(s, "manifests-replaced", (int64_t)p->replaced);
    for (size_t i = 0; p->in->extra && i < p->in->extra->n; i++)
        firn_summary_set(s, p->in->extra->kv[i].key, p->in->extra->kv[i].value);
}

static firn_rc check_deletes(const firn_snapshot_input *in, firn_err *err)
{
    for (size_t i = 0; i < in->n_added_deletes; i++) {
        const firn_data_file *f = &in->added_deletes[i];
        bool dv = firn_data_file_is_dv(f);
        if (dv && (in->format_version < 3 || !f->referenced_data_file || !f->has_content_offset))
            return firn_err_set(err, FIRN_ERR_INVALID,
                                "deletion vector in \"%s\" needs format 3, a referenced data "
                                "file and a content offset",
                                f->file_path);
        if (!dv && f->content == FIRN_CONTENT_POSITION_DELETES && in->format_version >= 3)
            return firn_err_set(err, FIRN_ERR_INVALID,
                                "format 3 tables take deletion vectors, not position-delete "
                                "file \"%s\"",
                                f->file_path);
    }
    if (in->n_dv_replaces && in->format_version < 3)
        return firn_err_set(err, FIRN_ERR_INVALID, "deletion vectors need format 3");
    return FIRN_OK;
}

static firn_rc check_input(const firn_snapshot_input *in, firn_err *err)
{
    if (in->format_version != 2 && in->format_version != 3)
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "cannot produce snapshots of format %d",
                            in->format_version);
    if (in->format_version >= 3 && in->first_row_id < 0)
        return firn_err_set(err, FIRN_ERR_INVALID, "format 3 snapshots need a first row id");
    FIRN_TRY(check_deletes(in, err));
    bool changes = in->n_added_data || in->n_added_deletes || in->n_removed_paths || in->truncate;
    if (!changes)
        return firn_err_set(err, FIRN_ERR_INVALID, "snapshot %" PRId64 " changes nothing",
                            in->snapshot_id);
    if (!in->parent_manifest_list && (in->n_removed_paths || in->truncate) && !in->truncate)
        return firn_err_set(err, FIRN_ERR_NOT_FOUND, "cannot remove files from an empty table");
    return FIRN_OK;
}

static firn_rc check_found(const producer *p)
{
    for (size_t i = 0; i < p->in->n_removed_paths; i++) {
        if (!p->found[i])
            return firn_err_set(p->err, FIRN_ERR_NOT_FOUND,
                                "file \"%s\" to remove is not live in the parent snapshot",
                                p->removed[i]);
    }
    for (size_t i = 0; i < p->in->n_required_data_paths; i++) {
        if (!p->required_found[i])
            return firn_err_set(p->err, FIRN_ERR_NOT_FOUND,
                                "data file \"%s\" that new deletes refer to is not live in the "
                                "parent snapshot",
                                p->required[i]);
    }
    for (size_t i = 0; i < p->n_dvs; i++) {
        if (p->dvs[i].dv_path && !p->dvs[i].found)
            return firn_err_set(p->err, FIRN_ERR_NOT_FOUND,
                                "deletion vector of data file \"%s\" in \"%s\" is no longer "
                                "live",
                                p->dvs[i].data_file, p->dvs[i].dv_path);
    }
    return FIRN_OK;
}

/* v3 row lineage: new data manifests (first_row_id null) get consecutive ranges in list order,
 * each as wide as its added and existing rows; delete manifests stay null. */
static int64_t assign_row_ids(producer *p)
{
    int64_t next = p->in->first_row_id;
    for (size_t i = 0; i < p->n_out; i++) {
        firn_manifest_file *mf = &p->out[i];
        if (mf->content != FIRN_MANIFEST_DATA) {
            mf->has_first_row_id = false;
            continue;
        }
        if (mf->has_first_row_id)
            continue;
        mf->has_first_row_id = true;
        mf->first_row_id = next;
        next += mf->added_rows_count + mf->existing_rows_count;
    }
    return next - p->in->first_row_id;
}

static firn_rc write_list(producer *p, firn_snapshot_result *res)
{
    const firn_snapshot_input *in = p->in;
    uint8_t u[16];
    char s[37];
    firn_uuid_v4(u);
    firn_uuid_format(u, s);
    firn_buf loc;
    firn_buf_init(&loc, 4096);
    firn_rc rc = firn_buf_appendf(&loc, "%s/snap-%" PRId64 "-1-%s.avro", in->metadata_location,
                                  in->snapshot_id, s);
    if (rc) {
        firn_buf_deinit(&loc);
        return firn_err_set(p->err, rc, "metadata location too long");
    }
    firn_manifest_list_header h = {in->format_version, in->snapshot_id, in->parent_snapshot_id,
                                   in->sequence_number, in->first_row_id};
    res->first_row_id = -1;
    res->added_rows = -1;
    if (in->format_version >= 3) {
        res->first_row_id = in->first_row_id;
        res->added_rows = assign_row_ids(p);
    }
    rc = firn_manifest_list_write_ex(p->io, (const char *)loc.data, &h, p->out, p->n_out, NULL,
                                     p->err);
    if (!rc)
        res->manifest_list = (char *)firn_buf_take(&loc, NULL);
    firn_buf_deinit(&loc);
    return rc;
}

static void producer_deinit(producer *p)
{
    firn_manifest_files_free(p->out, p->n_out);
    firn_free(p->removed);
    firn_free(p->found);
    for (size_t i = 0; i < p->n_parts; i++)
        firn_free(p->parts[i]);
    firn_free(p->parts);
    firn_free(p->dvs);
    firn_free(p->required);
    firn_free(p->required_found);
}

firn_rc firn_snapshot_produce(firn_io *io,
                              const firn_snapshot_input *in,
                              firn_snapshot_result *out,
                              firn_err *err)
{
    memset(out, 0, sizeof *out);
    FIRN_TRY(check_input(in, err));
    producer p = {.io = io, .in = in, .err = err};
    size_t nr = in->n_removed_paths;
    p.removed = firn_calloc(nr ? nr : 1, sizeof *p.removed);
    p.found = firn_calloc(nr ? nr : 1, sizeof *p.found);
    for (size_t i = 0; i < nr; i++)
        p.removed[i] = (char *)in->removed_paths[i];
    qsort(p.removed, nr, sizeof *p.removed, cmp_str);
    size_t nq = in->n_required_data_paths;
    p.required = firn_calloc(nq ? nq : 1, sizeof *p.required);
    p.required_found = firn_calloc(nq ? nq : 1, sizeof *p.required_found);
    for (size_t i = 0; i < nq; i++)
        p.required[i] = (char *)in->required_data_paths[i];
    qsort(p.required, nq, sizeof *p.required, cmp_str);
    firn_manifest_file *parents = NULL;
    size_t n_parents = 0;
    firn_rc rc = build_slots(&p);
    if (!rc)
        rc = write_new(&p, FIRN_MANIFEST_DATA, in->added_data, in->n_added_data);
    if (!rc)
        rc = write_new(&p, FIRN_MANIFEST_DELETES, in->added_deletes, in->n_added_deletes);
    if (!rc && in->parent_manifest_list)
        rc = firn_manifest_list_read(io, in->parent_manifest_list, &parents, &n_parents, err);
    if (!rc)
        rc = carry_parents(&p, parents, n_parents);
    if (!rc)
        rc = check_found(&p);
    if (!rc)
        rc = write_list(&p, out);
    if (!rc) {
        out->operation = operation(&p);
        build_summary(&p, out);
        out->n_manifests = p.n_out;
        out->manifests_created = p.created;
        out->manifests_kept = p.kept;
        out->manifests_replaced = p.replaced;
    }
    firn_manifest_files_free(parents, n_parents);
    producer_deinit(&p);
    if (rc)
        firn_snapshot_result_deinit(out);
    return rc;
}

void firn_snapshot_result_deinit(firn_snapshot_result *r)
{
    if (!r)
        return;
    firn_free(r->manifest_list);
    firn_summary_deinit(&r->summary);
    memset(r, 0, sizeof *r);
}
