/* SPDX-License-Identifier: Apache-2.0 */
/* Committing to a table: a snapshot per flush with the source position and a commit id in its
 * summary (DESIGN.md "Exactly-once"), optimistic retries on conflict, resolution of unknown
 * outcomes by commit id; and the flush of a table's buffered changes (fold by key, data files,
 * position deletes through the key index). */
#include "engine_int.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define COMMIT_BACKOFF_MIN_MS          50
#define COMMIT_CATCHUP_RETRY_MS        300000  /* commit.retry_timeout_seconds unset, catch-up */
#define COMMIT_RETRY_AFTER_MAX_MS      3600000 /* a longer Retry-After is taken as an hour */
#define COMMIT_WAIT_SLICE_MS           250     /* a stop is noticed this soon during a wait */
#define COMMIT_CONFLICT_BUDGET_MS      120000  /* how long to keep retrying after conflicts */
#define COMMIT_CONFLICT_BACKOFF_MAX_MS 500
#define MERGE_MANIFESTS_AT             100
#define BUFFER_KEEP_MIN                ((size_t)4 << 20) /* a flushed buffer this small is kept */

/* True when a snapshot of the table's main lineage carries commit_id. */
static bool has_commit(const firn_table_metadata *md, const char *commit_id)
{
    for (size_t i = 0; i < md->n_snapshots; i++) {
        const char *v = firn_props_get(&md->snapshots[i]->summary, FIRN_SUMMARY_COMMIT_ID);
        if (v && strcmp(v, commit_id) == 0)
            return true;
    }
    return false;
}

static void summary_from_props(firn_summary *out, const firn_props *p)
{
    firn_summary_init(out);
    for (size_t i = 0; i < p->n; i++)
        firn_summary_set(out, p->keys[i], p->vals[i]);
}

typedef struct commit_req {
    const firn_data_file *data;
    size_t n_data;
    const firn_data_file *deletes;
    size_t n_deletes;
    bool truncate;
    const firn_summary *extra;
    const firn_dv_replace *replaces; /* v3: DVs the added DVs replace */
    size_t n_replaces;
    bool index_bound;           /* deletes and upserts computed from the key index at the parent */
    const char *const *removed; /* live files to remove (consolidation) */
    size_t n_removed;
    const char *const *required; /* data files the deletes refer to, checked live */
    size_t n_required;
    bool rewrite;     /* not bound to the key index: retried on any parent */
    bool replace;     /* compaction: operation "replace", not retried on another parent */
    int64_t data_seq; /* > 0: explicit data sequence number of the added data files */
} commit_req;

/* One attempt: manifests and list on the current metadata, then the catalog's
 * compare-and-swap. */
static firn_rc commit_once(firn__table *t, const commit_req *q, firn_err *err)
{
    const firn_table_metadata *md = t->cat.metadata;
    const firn_snapshot *parent = firn_table_metadata_current_snapshot(md);
    const firn_schema *schema = firn_table_metadata_schema(md);
    firn_summary parent_summary;
    if (parent)
        summary_from_props(&parent_summary, &parent->summary);
    firn_buf schema_json;
    firn_buf_init(&schema_json, 64u << 20);
    char meta_dir[4096];
    snprintf(meta_dir, sizeof(meta_dir), "%s/metadata", md->location);
    firn_snapshot_result res = {0};
    firn_snapshot *snap = NULL;
    firn_table_changes ch;
    firn_table_changes_init(&ch);
    firn_rc rc = firn_schema_to_json(schema, &schema_json, err);
    if (rc)
        goto out;
    firn_snapshot_input in = {0};
    in.format_version = md->format_version >= 3 ? 3 : 2;
    in.first_row_id = md->next_row_id > 0 ? md->next_row_id : 0;
    in.dv_replaces = q->replaces;
    in.n_dv_replaces = q->n_replaces;
    in.removed_paths = q->removed;
    in.n_removed_paths = q->n_removed;
    in.required_data_paths = q->required;
    in.n_required_data_paths = q->n_required;
    in.replace = q->replace;
    in.added_data_sequence_number = q->data_seq;
    in.snapshot_id = firn_snapshot_id_new();
    in.parent_snapshot_id = parent ? parent->snapshot_id : -1;
    in.sequence_number = md->last_sequence_number + 1;
    in.metadata_location = meta_dir;
    in.parent_manifest_list = parent ? parent->manifest_list : NULL;
    in.parent_summary = parent ? &parent_summary : NULL;
    in.spec = firn_table_metadata_spec(md);
    in.schema = schema->root;
    in.schema_json = (const char *)schema_json.data;
    in.schema_id = schema->schema_id;
    in.added_data = q->data;
    in.n_added_data = q->n_data;
    in.added_deletes = q->deletes;
    in.n_added_deletes = q->n_deletes;
    in.truncate = q->truncate && parent != NULL;
    in.merge_min_count = MERGE_MANIFESTS_AT;
    in.extra = q->extra;
    in.codec = FIRN_AVRO_CODEC_DEFLATE;
    rc = firn_snapshot_produce(t->eng->io, &in, &res, err);
    if (rc)
        goto out;
    snap = firn_snapshot_new(in.snapshot_id, in.sequence_number, firn_now_us() / 1000,
                             res.manifest_list);
    snap->parent_snapshot_id = in.parent_snapshot_id;
    snap->schema_id = schema->schema_id;
    if (in.format_version >= 3) {
        snap->first_row_id = res.first_row_id;
        snap->added_rows = res.added_rows;
    }
    for (size_t i = 0; i < res.summary.n; i++)
        firn_props_set(&snap->summary, res.summary.kv[i].key, res.summary.kv[i].value);
    firn_table_changes_require_uuid(&ch, md->table_uuid);
    firn_table_changes_require_ref(&ch, "main", parent ? parent->snapshot_id : -1);
    firn_table_changes_add_snapshot(&ch, snap);
    firn_table_changes_set_ref(&ch, "main", in.snapshot_id, false);
    firn_catalog_table next = {0};
    rc = firn_catalog_commit(t->eng->catalog, t->ns, t->name, &ch, &next, err);
    if (rc == FIRN_OK) {
        firn_catalog_table_deinit(&t->cat);
        t->cat = next;
    }
out:
    firn_table_changes_deinit(&ch);
    firn_snapshot_free(snap);
    firn_snapshot_result_deinit(&res);
    firn_buf_deinit(&schema_json);
    if (parent)
        firn_summary_deinit(&parent_summary);
    return rc;
}

static firn_rc reload(firn__table *t, firn_err *err)
{
    firn_catalog_table next = {0};
    FIRN_TRY(firn_catalog_load_table(t->eng->catalog, t->ns, t->name, &next, err));
    firn_catalog_table_deinit(&t->cat);
    t->cat = next;
    return FIRN_OK;
}

/* A random wait in [max_ms / 2, max_ms]: writers that lost a race must not retry in step. */
static int64_t jitter_ms(int64_t max_ms)
{
    uint8_t r[16];
    uint64_t v;
    firn_uuid_v4(r);
    memcpy(&v, r, sizeof(v));
    return max_ms / 2 + (int64_t)(v % (uint64_t)(max_ms / 2 + 1));
}

/* ---- catalog outages ---------------------------------------------------------------------- */

/* Guards the outage counters of every table: the committing thread (a backfill worker, the CDC
 * loop) writes them, the stats file reads them. */
static pthread_mutex_t outage_mu = PTHREAD_MUTEX_INITIALIZER;

void firn__table_outage(const firn__table *t, firn__outage_stats *out)
{
    pthread_mutex_lock(&outage_mu);
    out->outages = t->catalog_outages;
    int64_t ns = t->outage_ns;
    if (t->outage_since_ns)
        ns += firn_monotonic_ns() - t->outage_since_ns;
    out->seconds = (double)ns / 1e9;
    out->since_us = t->outage_since_ns ? t->outage_since_us : 0;
    snprintf(out->last_error, sizeof(out->last_error), "%s", t->last_catalog_error);
    pthread_mutex_unlock(&outage_mu);
}

/* The retries of one commit while the catalog refuses it (HTTP 429/5xx, unreachable, a reply
 * lost): an outage from its first failure to the attempt that lands or the last one. */
typedef struct outage {
    firn__table *t;
    int64_t start_ns; /* first failure, 0: none yet */
    int64_t limit_ms; /* how long to keep trying, 0: no limit */
    int64_t cap_ms;   /* longest wait between two attempts */
    int64_t backoff_ms;
    int failures;
} outage;

static void outage_init(outage *o, firn__table *t)
{
    const firn__engine *e = t->eng;
    /* no configuration (a tool driving the committer alone): the defaults of a catch-up run */
    const firn_destination_config *d = e->cfg ? &e->cfg->destination : NULL;
    bool follow = e->opts && e->opts->follow;
    memset(o, 0, sizeof(*o));
    o->t = t;
    int64_t limit = d ? d->commit_retry_timeout_ms : -1;
    o->limit_ms = limit >= 0 ? limit : follow ? 0 : COMMIT_CATCHUP_RETRY_MS;
    o->cap_ms = d && d->commit_retry_max_wait_ms > 0 ? d->commit_retry_max_wait_ms : 60000;
    o->backoff_ms = COMMIT_BACKOFF_MIN_MS;
}

static bool stop_requested(const firn__table *t)
{
    const firn_sync_options *opts = t->eng->opts;
    return opts && opts->stop && *opts->stop;
}

/* Sleeps ms in slices, ending early on a stop; the stats file stays fresh meanwhile. */
static bool wait_or_stop(firn__table *t, int64_t ms)
{
    int64_t end = firn_monotonic_ns() + ms * 1000000;
    for (;;) {
        if (stop_requested(t))
            return false;
        int64_t left = (end - firn_monotonic_ns()) / 1000000;
        if (left <= 0)
            return true;
        firn_sleep_ms((long)(left < COMMIT_WAIT_SLICE_MS ? left : COMMIT_WAIT_SLICE_MS));
        firn__stats_refresh(t->eng);
    }
}

static void note_error(firn__table *t, const firn_err *err, firn_rc rc)
{
    snprintf(t->last_catalog_error, sizeof(t->last_catalog_error), "%s",
             err && err->msg[0] ? err->msg : firn_rc_message(rc));
}

/* After failure rc (err says more) of attempt `attempt`: logs the start of the outage once,
 * then waits before the next attempt (capped exponential backoff with jitter, no sooner than the
 * server's Retry-After, no later than the limit). FIRN_OK: try again; rc when the limit passed
 * (err says how long firn tried); FIRN_ERR_CANCELLED when a stop was requested. */
static firn_rc outage_wait(outage *o, int attempt, firn_rc rc, firn_err *err)
{
    firn__table *t = o->t;
    int64_t now = firn_monotonic_ns();
    o->failures++;
    pthread_mutex_lock(&outage_mu);
    if (!o->start_ns) {
        o->start_ns = now;
        t->catalog_outages++;
        t->outage_since_ns = now;
        t->outage_since_us = firn_now_us();
    }
    note_error(t, err, rc);
    pthread_mutex_unlock(&outage_mu);
    if (o->failures == 1)
        firn__metrics_outage(t, o->start_ns, 0);
    char limit[96];
    if (o->limit_ms)
        snprintf(limit, sizeof(limit), "for up to %.0f s (commit.retry_timeout_seconds)",
                 (double)o->limit_ms / 1000);
    else
        snprintf(limit, sizeof(limit), "until it accepts them");
    if (o->failures == 1)
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "table \"%s\": catalog outage: the commit failed (%s); retrying %s, waiting up "
                 "to %.0f s between attempts (or what Retry-After says); nothing uncommitted is "
                 "acknowledged meanwhile",
                 t->display, err && err->msg[0] ? err->msg : firn_rc_message(rc), limit,
                 (double)o->cap_ms / 1000);
    int64_t spent_ms = (now - o->start_ns) / 1000000;
    if (o->limit_ms && spent_ms >= o->limit_ms) {
        firn_err_context(err,
                         "the catalog refused %d commit attempts over %.0f s "
                         "(commit.retry_timeout_seconds); nothing uncommitted was acknowledged: "
                         "run firn sync again once it accepts commits",
                         o->failures, (double)spent_ms / 1000);
        return rc;
    }
    int64_t wait = jitter_ms(o->backoff_ms);
    int64_t hint = err ? err->retry_after_ms : 0;
    if (hint > COMMIT_RETRY_AFTER_MAX_MS)
        hint = COMMIT_RETRY_AFTER_MAX_MS;
    if (hint > wait)
        wait = hint;
    if (o->limit_ms && spent_ms + wait > o->limit_ms)
        wait = o->limit_ms - spent_ms; /* one last attempt at the limit */
    FIRN_LOG(FIRN_LOG_DEBUG, "engine",
             "table \"%s\": commit attempt %d failed (%s), retrying in %lld ms%s", t->display,
             attempt, err && err->msg[0] ? err->msg : firn_rc_message(rc), (long long)wait,
             hint > 0 ? " (Retry-After)" : "");
    o->backoff_ms = o->backoff_ms * 2 > o->cap_ms ? o->cap_ms : o->backoff_ms * 2;
    if (!wait_or_stop(t, wait))
        return firn_err_set(err, FIRN_ERR_CANCELLED,
                            "stopped while the catalog refused commits to table \"%s\"; nothing "
                            "uncommitted was acknowledged",
                            t->display);
    return FIRN_OK;
}

/* The commit's outcome: ends the outage it met, if any (one line with its duration). */
static void outage_end(outage *o, bool landed)
{
    if (!o->start_ns)
        return;
    firn__table *t = o->t;
    int64_t now = firn_monotonic_ns();
    pthread_mutex_lock(&outage_mu);
    t->outage_ns += now - o->start_ns;
    t->outage_since_ns = 0;
    pthread_mutex_unlock(&outage_mu);
    firn__metrics_outage(t, o->start_ns, now);
    if (landed)
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "table \"%s\": catalog outage over after %.1f s: the commit landed after %d "
                 "failed attempt%s",
                 t->display, (double)(now - o->start_ns) / 1e9, o->failures,
                 o->failures == 1 ? "" : "s");
    else
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "table \"%s\": catalog outage: gave up after %.1f s and %d failed attempt%s",
                 t->display, (double)(now - o->start_ns) / 1e9, o->failures,
                 o->failures == 1 ? "" : "s");
    o->start_ns = 0;
}

/* A failure a commit is retried after while the catalog refuses commits. */
static bool outage_error(firn_rc rc)
{
    return rc == FIRN_ERR_UNKNOWN_OUTCOME || (firn_rc_is_transient(rc) && rc != FIRN_ERR_CONFLICT);
}

/* Commits q, retrying on the new parent after a conflict (another writer committed: keep going
 * for up to COMMIT_CONFLICT_BUDGET_MS, so a busy table cannot starve this writer) and while the
 * catalog refuses commits (transient errors, unknown outcomes: outage_wait). Never retries
 * blindly: reloads and looks for commit_id first. */
static firn_rc
commit_retry(firn__table *t, const commit_req *q, const char *commit_id, firn_err *err)
{
    int64_t conflict0 = 0; /* first conflict: their budget does not count an outage before */
    int64_t conflict_backoff_ms = COMMIT_BACKOFF_MIN_MS;
    outage o;
    outage_init(&o, t);
    firn_rc rc;
    for (int attempt = 1;; attempt++) {
        rc = commit_once(t, q, err);
        if (rc == FIRN_OK)
            break;
        if (rc != FIRN_ERR_UNKNOWN_OUTCOME && !firn_rc_is_transient(rc))
            break;
        firn_err lerr = {0};
        if (reload(t, &lerr) == FIRN_OK && has_commit(t->cat.metadata, commit_id)) {
            rc = FIRN_OK;
            break;
        }
        bool conflict = rc == FIRN_ERR_CONFLICT;
        if (conflict && q->replace) {
            rc = firn_err_set(err, FIRN_ERR_CONFLICT,
                              "table \"%s\" was changed by another writer during a rewrite",
                              t->display);
            break;
        }
        if (conflict && q->index_bound) {
            /* The deletes were computed from the key index at the old parent: the caller
             * rebuilds it and computes them again (flush_upsert). */
            FIRN_LOG(FIRN_LOG_INFO, "engine",
                     "table \"%s\": commit attempt %d failed (%s), computing deletes again",
                     t->display, attempt, err ? err->msg : firn_rc_message(rc));
            rc = firn_err_set(err, FIRN_ERR_CONFLICT, "table \"%s\" was changed by another writer",
                              t->display);
            break;
        }
        firn__metrics_commit_retry(t, rc);
        if (!conflict) {
            firn_rc wrc = outage_wait(&o, attempt, rc, err);
            if (wrc) {
                rc = wrc;
                break;
            }
            continue;
        }
        if (!conflict0)
            conflict0 = firn_monotonic_ns();
        if ((firn_monotonic_ns() - conflict0) / 1000000 >= COMMIT_CONFLICT_BUDGET_MS)
            break;
        FIRN_LOG(FIRN_LOG_INFO, "engine", "table \"%s\": commit attempt %d failed (%s), retrying",
                 t->display, attempt, err ? err->msg : firn_rc_message(rc));
        firn_sleep_ms((long)jitter_ms(conflict_backoff_ms));
        conflict_backoff_ms = conflict_backoff_ms * 2 > COMMIT_CONFLICT_BACKOFF_MAX_MS
                                  ? COMMIT_CONFLICT_BACKOFF_MAX_MS
                                  : conflict_backoff_ms * 2;
    }
    outage_end(&o, rc == FIRN_OK);
    return rc;
}

firn_rc firn__table_meta_commit(firn__table *t,
                                firn_rc (*apply)(firn__table *t, void *ctx, firn_err *err),
                                void *ctx,
                                firn_err *err)
{
    int64_t conflict0 = 0; /* first conflict: their budget does not count an outage before */
    int64_t conflict_backoff_ms = COMMIT_BACKOFF_MIN_MS;
    outage o;
    outage_init(&o, t);
    firn_rc rc;
    for (int attempt = 1;; attempt++) {
        rc = apply(t, ctx, err);
        if (rc == FIRN_OK || (rc != FIRN_ERR_CONFLICT && !outage_error(rc)))
            break;
        if (rc == FIRN_ERR_CONFLICT) {
            if (!conflict0)
                conflict0 = firn_monotonic_ns();
            if ((firn_monotonic_ns() - conflict0) / 1000000 >= COMMIT_CONFLICT_BUDGET_MS)
                break;
            FIRN_LOG(FIRN_LOG_INFO, "engine",
                     "table \"%s\": commit attempt %d failed (%s), retrying", t->display, attempt,
                     err ? err->msg : firn_rc_message(rc));
            firn_sleep_ms((long)jitter_ms(conflict_backoff_ms));
            conflict_backoff_ms = conflict_backoff_ms * 2 > COMMIT_CONFLICT_BACKOFF_MAX_MS
                                      ? COMMIT_CONFLICT_BACKOFF_MAX_MS
                                      : conflict_backoff_ms * 2;
        } else {
            firn_rc wrc = outage_wait(&o, attempt, rc, err);
            if (wrc) {
                rc = wrc;
                break;
            }
        }
        firn_err lerr = {0};
        firn_rc_ignore(reload(t, &lerr)); /* failed: apply works from the metadata it has */
    }
    outage_end(&o, rc == FIRN_OK);
    return firn__blame(err, FIRN_FAULT_DESTINATION, rc);
}

static firn_rc commit_req_run(firn__table *t, commit_req q, uint64_t lsn, firn_err *err);

firn_rc firn__table_commit(firn__table *t,
                           const firn_data_file *data,
                           size_t n_data,
                           const firn_data_file *deletes,
                           size_t n_deletes,
                           bool truncate,
                           uint64_t lsn,
                           const firn_summary *extra,
                           firn_err *err)
{
    commit_req q = {.data = data,
                    .n_data = n_data,
                    .deletes = deletes,
                    .n_deletes = n_deletes,
                    .truncate = truncate,
                    .extra = extra};
    return commit_req_run(t, q, lsn, err);
}

firn_rc firn__table_commit_dvs(firn__table *t,
                               const firn_data_file *data,
                               size_t n_data,
                               const firn_data_file *dvs,
                               size_t n_dvs,
                               const firn_dv_replace *replaces,
                               size_t n_replaces,
                               uint64_t lsn,
                               const firn_summary *extra,
                               firn_err *err)
{
    commit_req q = {.data = data,
                    .n_data = n_data,
                    .deletes = dvs,
                    .n_deletes = n_dvs,
                    .extra = extra,
                    .replaces = replaces,
                    .n_replaces = n_replaces};
    return commit_req_run(t, q, lsn, err);
}

/* An upsert flush's commit: data files, deletes (position-delete files or DVs with the DVs they
 * replace), files a consolidation removes and the data files the deletes must find live. */
static firn_rc commit_upsert_req(firn__table *t, commit_req q, uint64_t lsn, firn_err *err)
{
    return commit_req_run(t, q, lsn, err);
}

firn_rc firn__table_commit_rewrite(firn__table *t,
                                   const firn_data_file *deletes,
                                   size_t n_deletes,
                                   const firn_dv_replace *replaces,
                                   size_t n_replaces,
                                   const char *const *removed,
                                   size_t n_removed,
                                   firn_err *err)
{
    commit_req q = {.deletes = deletes,
                    .n_deletes = n_deletes,
                    .replaces = replaces,
                    .n_replaces = n_replaces,
                    .removed = removed,
                    .n_removed = n_removed,
                    .rewrite = true};
    return commit_req_run(t, q, 0, err);
}

firn_rc firn__table_commit_replace(firn__table *t,
                                   const firn_data_file *data,
                                   size_t n_data,
                                   const char *const *removed,
                                   size_t n_removed,
                                   int64_t data_seq,
                                   firn_err *err)
{
    commit_req q = {.data = data,
                    .n_data = n_data,
                    .removed = removed,
                    .n_removed = n_removed,
                    .rewrite = true,
                    .replace = true,
                    .data_seq = data_seq};
    return commit_req_run(t, q, 0, err);
}

/* Runs q with the summary keys of every firn commit, retrying as firn__table_commit says. */
static firn_rc commit_req_run(firn__table *t, commit_req q, uint64_t lsn, firn_err *err)
{
    const firn_summary *extra = q.extra;
    firn_summary keys;
    firn_summary_init(&keys);
    if (extra) {
        for (size_t i = 0; i < extra->n; i++)
            firn_summary_set(&keys, extra->kv[i].key, extra->kv[i].value);
    }
    uint8_t raw[16];
    char commit_id[37];
    firn_uuid_v4(raw);
    firn_uuid_format(raw, commit_id);
    firn_summary_set(&keys, FIRN_SUMMARY_COMMIT_ID, commit_id);
    uint64_t keep = lsn > t->committed_lsn ? lsn : t->committed_lsn; /* never backwards */
    if (keep)
        firn_summary_set_i64(&keys, FIRN_SUMMARY_LSN, (int64_t)keep);
    if (t->part_lsn > keep) { /* also on rewrites: they must not drop the marker */
        firn_summary_set_i64(&keys, FIRN_SUMMARY_PART_LSN, (int64_t)t->part_lsn);
        firn_summary_set_i64(&keys, FIRN_SUMMARY_PART_CHANGES, (int64_t)t->part_changes);
    }
    if (t->index_ref && t->upsert)
        firn_summary_set(&keys, FIRN_SUMMARY_KEY_INDEX, t->index_ref);
    if (t->cdc && !t->needs_backfill)
        firn_summary_set(&keys, FIRN_SUMMARY_COPY, "done");
    firn_summary_set(&keys, "engine-name", "firn");
    firn_summary_set(&keys, "engine-version", FIRN_VERSION);
    q.extra = &keys;
    q.index_bound = t->upsert && !t->eqdel && !q.truncate && !q.rewrite;
    firn__fault_point("after-upload");
    const int64_t t0 = firn_monotonic_ns();
    firn_rc rc = commit_retry(t, &q, commit_id, err);
    firn__metrics_commit(t, rc, firn_monotonic_ns() - t0, q.data, q.n_data, q.deletes, q.n_deletes);
    if (rc == FIRN_OK)
        firn__fault_point("after-commit");
    if (rc == FIRN_OK && keep)
        t->committed_lsn = keep;
    if (rc)
        firn_err_context(err, "while committing to table \"%s\"", t->display);
    firn_summary_deinit(&keys);
    return firn__blame(err, FIRN_FAULT_DESTINATION, rc);
}

/* ---- flushing buffered changes ------------------------------------------------------------ */

static firn__write_ctx write_ctx(firn__table *t, char *data_dir, size_t cap)
{
    snprintf(data_dir, cap, "%s/data", t->cat.metadata->location);
    firn__write_ctx w = {t->eng->io, data_dir, t->schema, firn_table_metadata_spec(t->cat.metadata),
                         &t->eng->pq_buffered};
    return w;
}

/* Groups position deletes by the partition of their data file (Iceberg Java rejects a delete
 * file whose partition differs from its data files'). */
static void group_deletes(firn__table *t,
                          firn__posdel *dels,
                          size_t n,
                          const firn_value ***out_parts,
                          size_t *out_n_parts)
{
    const firn_value **parts = firn_calloc(n ? n : 1, sizeof(*parts));
    uint32_t *owner = firn_calloc(n ? n : 1, sizeof(uint32_t));
    size_t n_parts = 0;
    for (size_t i = 0; i < n; i++) {
        const firn_data_file *f = &t->files[dels[i].ord];
        size_t g = 0;
        for (; g < n_parts; g++) {
            const firn_data_file *o = &t->files[owner[g]];
            bool same = o->n_partition == f->n_partition;
            for (size_t k = 0; same && k < f->n_partition; k++)
                same = (o->partition[k].is_null && f->partition[k].is_null) ||
                       (!o->partition[k].is_null && !f->partition[k].is_null &&
                        firn_value_compare(&o->partition[k], &f->partition[k]) == 0);
            if (same)
                break;
        }
        if (g == n_parts) {
            owner[n_parts] = dels[i].ord;
            parts[n_parts++] = f->partition;
        }
        dels[i].group = (uint32_t)g;
    }
    firn_free(owner);
    *out_parts = parts;
    *out_n_parts = n_parts;
}

typedef struct flush_out {
    firn_data_file *files;
    size_t n_files;
    firn__rowloc *locs;
    firn__posdel *dels;
    size_t n_dels;
    firn__pkkey *keys; /* fingerprint of each folded key */
    firn__pkloc *old;  /* its live row before the flush, when present */
    bool *present;
    firn__msdel ms;           /* multiset tables: the copies the deletes remove */
    firn__consolidation cons; /* v2: this commit consolidates the position deletes */
    int64_t lookup_ns, deletes_ns, commit_ns; /* time spent, for the debug log */
} flush_out;

static void flush_out_free(flush_out *o)
{
    for (size_t i = 0; i < o->n_files; i++)
        firn_data_file_deinit(&o->files[i]);
    firn_free(o->files);
    firn_free(o->locs);
    firn_free(o->dels);
    firn_free(o->keys);
    firn_free(o->old);
    firn_free(o->present);
    firn__msdel_free(&o->ms);
    firn__consolidation_free(&o->cons);
}

/* Position deletes for every folded key that has a live row in the table (one batch lookup). */
static firn_rc collect_deletes(firn__table *t, const firn__fold *f, flush_out *o, firn_err *err)
{
    if (t->multiset) {
        FIRN_TRY(firn__multiset_deletes(t, f, &o->ms, err));
        o->dels = o->ms.dels; /* owned by o from here */
        o->n_dels = o->ms.n_dels;
        o->ms.dels = NULL;
        return FIRN_OK;
    }
    size_t n = f->n_keys ? f->n_keys : 1;
    o->dels = firn_calloc(n, sizeof(*o->dels));
    o->keys = firn_calloc(n, sizeof(*o->keys));
    o->old = firn_calloc(n, sizeof(*o->old));
    o->present = firn_calloc(n, sizeof(*o->present));
    for (size_t k = 0; k < f->n_keys; k++) {
        const uint8_t *key = f->keys.data + f->key_offsets[k];
        size_t len = f->key_offsets[k + 1] - f->key_offsets[k];
        o->keys[k] = firn__pkindex_key(t->index, key, len);
    }
    FIRN_TRY(firn__pkindex_lookup(t->index, o->keys, f->n_keys, o->old, o->present, err));
    for (size_t k = 0; k < f->n_keys; k++) {
        /* A row in a file another writer removed went with it: nothing to delete. A row already
         * deleted needs no delete either (an index caught up from an older snapshot still
         * points deleted keys at their rows: docs/internals/pkindex.md "Persistence"). */
        const firn__dvfile *dv = o->present[k] ? &t->dv_files[o->old[k].file] : NULL;
        if (!dv || dv->gone || (dv->dead && firn_bitmap64_contains(dv->dead, o->old[k].pos)))
            continue;
        firn__posdel *d = &o->dels[o->n_dels++];
        d->path = firn__pkindex_file(t->index, o->old[k].file);
        d->pos = o->old[k].pos;
        d->group = o->old[k].file;
        d->ord = o->old[k].file;
    }
    return FIRN_OK;
}

/* After the commit: deleted keys leave the index, upserted keys point at their new rows. A
 * failure here leaves the index behind the table: the caller stops, and the next start
 * rebuilds it. */
static firn_rc update_index(firn__table *t, const firn__fold *f, const flush_out *o, firn_err *err)
{
    uint32_t *ords = firn_calloc(o->n_files ? o->n_files : 1, sizeof(uint32_t));
    for (size_t i = 0; i < o->n_files; i++) {
        if (o->files[i].content == FIRN_CONTENT_DATA)
            ords[i] = firn__table_add_file(t, &o->files[i]);
    }
    firn_rc rc = FIRN_OK;
    if (t->multiset) {
        firn__pkloc *locs = firn_calloc(f->n_upserts ? f->n_upserts : 1, sizeof(*locs));
        for (size_t i = 0; i < f->n_upserts; i++)
            locs[i] = (firn__pkloc){ords[o->locs[i].file], o->locs[i].pos};
        rc = firn__multiset_update(t, f, &o->ms, locs, err);
        firn_free(locs);
    }
    for (size_t k = 0; !t->multiset && k < f->n_keys && rc == FIRN_OK; k++) {
        if (k >= f->n_upserts) {
            rc = firn__pkindex_unset(t->index, o->keys[k], o->present[k], err);
            continue;
        }
        firn__pkloc loc = {ords[o->locs[k].file], o->locs[k].pos};
        rc = firn__pkindex_set(t->index, o->keys[k], loc, o->present[k], err);
    }
    firn_free(ords);
    if (rc)
        firn_err_context(err, "while updating the key index of table \"%s\"", t->display);
    return rc;
}

/* Deletes of rows that live in committed files: position-delete files (v2) or one Puffin file
 * of merged DVs (v3). Appended after the data files in o->files. */
static firn_rc write_deletes(
    firn__table *t, const firn__write_ctx *w, flush_out *o, firn__dv_batch *dvs, firn_err *err)
{
    if (o->n_dels == 0)
        return FIRN_OK;
    if (t->dv)
        return firn__dv_write(t, w, o->dels, o->n_dels, &o->files, &o->n_files, dvs, err);
    const firn_value **parts = NULL;
    size_t n_parts = 0;
    group_deletes(t, o->dels, o->n_dels, &parts, &n_parts);
    if (firn__consolidate_due(t, o->dels, o->n_dels)) {
        firn_free(parts);
        return firn__consolidate_write(t, w, o->dels, o->n_dels, &o->files, &o->n_files, &o->cons,
                                       err);
    }
    const firn_partition_spec *spec = firn_table_metadata_spec(t->cat.metadata);
    firn_rc rc = firn__write_position_deletes(w, o->dels, o->n_dels, parts, spec->n_fields,
                                              spec->spec_id, &o->files, &o->n_files, err);
    firn_free(parts);
    return rc;
}

/* The distinct data files the deletes written refer to, when the key index may not hold the
 * parent exactly (another writer committed since it was built): the producer checks them live. */
static const char **required_files(firn__table *t, const flush_out *o, size_t *out_n)
{
    const firn_snapshot *parent = firn_table_metadata_current_snapshot(t->cat.metadata);
    const firn__posdel *dels = o->cons.on ? o->cons.dels : o->dels;
    size_t n = o->cons.on ? o->cons.n_dels : o->n_dels;
    *out_n = 0;
    if (!parent || n == 0 || (t->index_synced && t->index_snapshot == parent->snapshot_id))
        return NULL;
    const char **paths = firn_calloc(n, sizeof(char *));
    bool *seen = firn_calloc(t->n_files ? t->n_files : 1, sizeof(bool));
    for (size_t i = 0; i < n; i++) {
        if (!seen[dels[i].ord])
            paths[(*out_n)++] = t->files[dels[i].ord].file_path;
        seen[dels[i].ord] = true;
    }
    firn_free(seen);
    return paths;
}

/* Deletes the fold's keys where the key index has them and commits that with the data files
 * o->files[0..n_data). */
static firn_rc commit_upsert(firn__table *t,
                             const firn__fold *f,
                             const firn__write_ctx *w,
                             flush_out *o,
                             size_t n_data,
                             firn__dv_batch *dvs,
                             uint64_t lsn,
                             const firn_summary *extra,
                             firn_err *err)
{
    int64_t t0 = firn_monotonic_ns();
    firn_rc rc = collect_deletes(t, f, o, err);
    int64_t t1 = firn_monotonic_ns();
    if (rc == FIRN_OK)
        rc = write_deletes(t, w, o, dvs, err);
    o->lookup_ns += t1 - t0;
    o->deletes_ns += firn_monotonic_ns() - t1;
    bool changes = o->n_files > 0 || o->cons.n_removed > 0;
    if (rc || (!changes && lsn <= t->committed_lsn))
        return rc;
    if (!changes) {
        t->committed_lsn = lsn; /* only no-op changes (deletes of unknown keys) */
        return FIRN_OK;
    }
    commit_req q = {.data = o->files,
                    .n_data = n_data,
                    .deletes = o->files + n_data,
                    .n_deletes = o->n_files - n_data,
                    .extra = extra};
    if (t->dv) {
        q.replaces = dvs->replaces;
        q.n_replaces = dvs->n_replaces;
    }
    q.removed = o->cons.removed;
    q.n_removed = o->cons.n_removed;
    const char **req = required_files(t, o, &q.n_required);
    q.required = req;
    t1 = firn_monotonic_ns();
    rc = commit_upsert_req(t, q, lsn, err);
    o->commit_ns += firn_monotonic_ns() - t1;
    firn_free(req);
    return rc;
}

/* Forgets the delete files and DVs of a commit that did not land (they stay unreferenced). */
static void drop_deletes(flush_out *o, size_t n_data, firn__dv_batch *dvs)
{
    for (size_t i = n_data; i < o->n_files; i++)
        firn_data_file_deinit(&o->files[i]);
    o->n_files = n_data;
    firn_free(o->dels);
    firn_free(o->keys);
    firn_free(o->old);
    firn_free(o->present);
    o->dels = NULL;
    o->keys = NULL;
    o->old = NULL;
    o->present = NULL;
    o->n_dels = 0;
    firn__msdel_free(&o->ms);
    firn__consolidation_free(&o->cons);
    firn__dv_batch_free(dvs);
    memset(dvs, 0, sizeof(*dvs));
}

static firn_rc flush_upsert(firn__table *t, uint64_t lsn, const firn_summary *extra, firn_err *err)
{
    const int64_t start = firn_monotonic_ns();
    firn__fold f;
    FIRN_TRY(t->multiset
                 ? firn__multiset_fold(t, &f, err)
                 : firn__fold_run_keep(t->buf, t->key_cols, t->n_key, t->soft_delete, &f, err));
    const int64_t folded = firn_monotonic_ns();
    flush_out o = {0};
    firn__dv_batch dvs = {0};
    char data_dir[4096];
    firn__write_ctx w = write_ctx(t, data_dir, sizeof(data_dir));
    o.locs = firn_calloc(f.n_upserts ? f.n_upserts : 1, sizeof(*o.locs));
    firn_rc rc = firn__write_data_files(&w, t->buf, f.upsert_rows, f.n_upserts, &o.files,
                                        &o.n_files, o.locs, err);
    size_t n_data = o.n_files;
    int backoff_ms = COMMIT_BACKOFF_MIN_MS / 2;
    int64_t t0 = firn_monotonic_ns(), conflict0 = 0;
    const int64_t data_ns = t0 - folded;
    while (rc == FIRN_OK) {
        const firn_snapshot *parent = firn_table_metadata_current_snapshot(t->cat.metadata);
        int64_t base = parent ? parent->snapshot_id : -1;
        rc = commit_upsert(t, &f, &w, &o, n_data, &dvs, lsn, extra, err);
        /* Same budget as commit_retry: a busy table cannot starve this writer for long, and a
         * writer that always wins ends the run with the conflict rather than spinning. */
        if (rc != FIRN_ERR_CONFLICT)
            break;
        /* counted from the first conflict: a catalog outage waited out before is no conflict */
        if (!conflict0)
            conflict0 = firn_monotonic_ns();
        else if ((firn_monotonic_ns() - conflict0) / 1000000 >= COMMIT_CONFLICT_BUDGET_MS) {
            rc = firn_err_set(err, FIRN_ERR_CONFLICT,
                              "table \"%s\" was changed by another writer before every commit "
                              "attempt for %d s; nothing was acknowledged, run again when the "
                              "other writer commits less often",
                              t->display, COMMIT_CONFLICT_BUDGET_MS / 1000);
            break;
        }
        /* Another writer committed (Spark, maintenance): rows of our keys may now live in the
         * files it added, so the index takes them in and the deletes are computed again.
         * Deletion-vector tables rebuild it whole. */
        drop_deletes(&o, n_data, &dvs);
        firn_sleep_ms((long)jitter_ms(backoff_ms));
        backoff_ms = backoff_ms * 2 > COMMIT_CONFLICT_BACKOFF_MAX_MS
                         ? COMMIT_CONFLICT_BACKOFF_MAX_MS
                         : backoff_ms * 2;
        bool caught_up = false;
        rc = reload(t, err); /* after the wait: the next attempt starts from the newest state */
        if (rc == FIRN_OK && !t->dv && base >= 0)
            rc = firn__table_index_since(t, base, &caught_up, err);
        if (rc == FIRN_OK && !caught_up) {
            FIRN_LOG(FIRN_LOG_INFO, "engine",
                     "table \"%s\" was changed by another writer; rebuilding the key index",
                     t->display);
            firn__table_reset_index(t);
            rc = firn__table_rebuild_index(t, err);
        }
        w = write_ctx(t, data_dir, sizeof(data_dir)); /* the reload freed the old spec */
    }
    if (rc == FIRN_OK && t->dv)
        firn__dv_commit_done(t, o.files + n_data, &dvs);
    else if (rc == FIRN_OK)
        firn__delfiles_commit_done(t, o.cons.on ? o.cons.dels : o.dels,
                                   o.cons.on ? o.cons.n_dels : o.n_dels, o.files + n_data,
                                   o.n_files - n_data, &o.cons);
    const int64_t indexed = firn_monotonic_ns();
    if (rc == FIRN_OK)
        rc = update_index(t, &f, &o, err);
    if (rc == FIRN_OK)
        FIRN_LOG(FIRN_LOG_DEBUG, "engine",
                 "table \"%s\": flush of %zu keys took %.0f ms: fold %.0f, data files %.0f, key "
                 "lookups %.0f, delete files %.0f, commit %.0f, index update %.0f",
                 t->display, f.n_keys, (double)(firn_monotonic_ns() - start) / 1e6,
                 (double)(folded - start) / 1e6, (double)data_ns / 1e6, (double)o.lookup_ns / 1e6,
                 (double)o.deletes_ns / 1e6, (double)o.commit_ns / 1e6,
                 (double)(firn_monotonic_ns() - indexed) / 1e6);
    if (rc == FIRN_OK) {
        firn__table_index_advanced(t);
        firn__table_share_persist(t, false); /* every persist_key_index_interval */
    }
    if (rc == FIRN_OK) {
        t->rows_written += f.n_upserts;
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "table \"%s\": committed %zu rows, %zu deletes, %zu files, lsn %X/%X", t->display,
                 f.n_upserts, o.n_dels, o.n_files, (unsigned)(lsn >> 32), (unsigned)lsn);
    }
    firn__dv_batch_free(&dvs);
    flush_out_free(&o);
    firn__fold_free(&f);
    return rc;
}

/* flush_upsert, and when the producer refused the commit because the table is not what the key
 * index says (v3: a DV the commit did not merge, another writer deleted rows of a file since the
 * index was loaded; any table: a data file the deletes refer to, or a delete file a
 * consolidation replaces, is no longer live): reload the table, rebuild the index and deleted
 * rows from the files now live, and flush the same buffer once more. */
static firn_rc
flush_upsert_dv(firn__table *t, uint64_t lsn, const firn_summary *extra, firn_err *err)
{
    firn_rc rc = flush_upsert(t, lsn, extra, err);
    if (rc != FIRN_ERR_NOT_FOUND && (!t->dv || rc != FIRN_ERR_EXISTS))
        return rc;
    FIRN_LOG(FIRN_LOG_WARN, "engine", "table \"%s\": %s; rebuilding the key index", t->display,
             err ? err->msg : firn_rc_message(rc));
    firn_err_clear(err);
    FIRN_TRY(reload(t, err));
    firn__table_reset_index(t);
    FIRN_TRY(firn__table_rebuild_index(t, err));
    return flush_upsert(t, lsn, extra, err);
}

static firn_rc flush_append(firn__table *t, uint64_t lsn, const firn_summary *extra, firn_err *err)
{
    flush_out o = {0};
    char data_dir[4096];
    firn__write_ctx w = write_ctx(t, data_dir, sizeof(data_dir));
    firn_rc rc = firn__write_data_files(&w, t->buf, NULL, 0, &o.files, &o.n_files, NULL, err);
    if (rc == FIRN_OK && o.n_files)
        rc = firn__table_commit(t, o.files, o.n_files, NULL, 0, false, lsn, extra, err);
    if (rc == FIRN_OK) {
        t->rows_written += firn_batch_rows(t->buf);
        if (lsn) /* an incremental or full_refresh run has no source position */
            FIRN_LOG(FIRN_LOG_INFO, "engine", "table \"%s\": committed %zu change rows, lsn %X/%X",
                     t->display, firn_batch_rows(t->buf), (unsigned)(lsn >> 32), (unsigned)lsn);
        else
            FIRN_LOG(FIRN_LOG_INFO, "engine", "table \"%s\": committed %zu rows", t->display,
                     firn_batch_rows(t->buf));
    }
    flush_out_free(&o);
    return rc;
}

/* Empties t's buffer after a flush. A reset keeps the buffer's memory for the next rows; a
 * CDC buffer (t->buf_free) that held a sixteenth of memory_limit or more (a part of a large
 * transaction, a burst) is freed instead, so the compaction that may follow, and the idle process
 * after it, do not keep that memory beside their own (a 2 GB transaction's compaction peaked at 731
 * MiB with it). */
static void release_buffer(firn__table *t, size_t held)
{
    uint64_t limit = t->eng->cfg->destination.memory_limit_bytes;
    if (!t->buf_free || held < BUFFER_KEEP_MIN || (limit && held < limit / 16)) {
        firn_batch_reset(t->buf);
        return;
    }
    firn_batch_free(t->buf);
    t->buf = firn_batch_new(t->schema);
}

firn_rc firn__table_flush(firn__table *t, uint64_t lsn, firn_err *err)
{
    return firn__table_flush_extra(t, lsn, NULL, err);
}

firn_rc
firn__table_flush_extra(firn__table *t, uint64_t lsn, const firn_summary *extra, firn_err *err)
{
    if (firn_batch_rows(t->buf) == 0)
        return FIRN_OK;
    const size_t held = firn_batch_bytes(t->buf);
    firn_rc rc;
    if (t->eqdel) {
        char data_dir[4096];
        firn__write_ctx w = write_ctx(t, data_dir, sizeof(data_dir));
        rc = firn__eqdel_flush(t, &w, lsn, extra, err);
    } else {
        rc = t->upsert ? flush_upsert_dv(t, lsn, extra, err) : flush_append(t, lsn, extra, err);
    }
    if (rc == FIRN_OK) {
        release_buffer(t, held);
        firn__engine_note_commit(t->eng, t);
    }
    if (rc == FIRN_OK && t->upsert && !t->eqdel)
        rc = firn__compact_maybe(t, err);
    if (rc == FIRN_OK)
        rc = firn__expire_maybe(t, err);
    return firn__blame(err, FIRN_FAULT_DESTINATION, rc);
}
