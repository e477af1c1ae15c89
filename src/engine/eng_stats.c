/* SPDX-License-Identifier: Apache-2.0 */
/* The stats file (issue 7 "Progress"): `stats.json` next to the state file, replaced atomically
 * every few seconds while a sync runs and once at its end: per stream rows written, changes
 * read, commits, buffered changes, committed position and backfill progress; for the run its
 * phase, rows, rate, memory and CDC lag. Monitoring reads it; firn never does. */
#include "cfg_int.h"
#include "engine_int.h"

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STATS_EVERY_NS (5 * 1000000000LL)

static pthread_mutex_t stats_mu = PTHREAD_MUTEX_INITIALIZER;
static const char *last_phase; /* of the last firn__stats_write (static strings), under stats_mu */

/* An LSN as PostgreSQL prints it (X/X); null for 0, "nothing yet". */
static json_t *lsn_json(uint64_t lsn)
{
    if (!lsn)
        return json_null();
    char text[18];
    firn_lsn_format(lsn, text);
    return json_string(text);
}

static json_t *time_json(int64_t us)
{
    if (us <= 0)
        return json_null();
    time_t secs = (time_t)(us / 1000000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char text[64];
    snprintf(text, sizeof(text), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (int)(us % 1000000 / 1000));
    return json_string(text);
}

/* The fallback rules of firn_pg_decode_stats (docs/type-mapping.md): the stats.json key, what
 * the WARN line says, the counter. */
static const struct {
    const char *key;
    const char *rule;
    size_t off;
} REPLACED[] = {
    {"numeric_nan_as_null", "a numeric NaN has no decimal value and is stored as null",
     offsetof(firn_pg_decode_stats, nan_to_null)},
    {"timestamps_clamped",
     "a timestamp beyond the int64 microseconds since 1970 is stored as the largest one, "
     "INT64_MAX-1 (294247-01-10T04:00:54.775806)",
     offsetof(firn_pg_decode_stats, clamped)},
    {"arrays_flattened",
     "a multi-dimensional array in a one-level list column is stored flattened (row-major)",
     offsetof(firn_pg_decode_stats, array_flattened)},
    {"array_lower_bounds_dropped", "an array lower bound other than 1 is dropped",
     offsetof(firn_pg_decode_stats, array_lbound_lost)},
};
#define N_REPLACED (sizeof(REPLACED) / sizeof(REPLACED[0]))

static uint64_t replaced_of(const firn_pg_decode_stats *s, size_t kind)
{
    uint64_t v;
    memcpy(&v, (const char *)s + REPLACED[kind].off, sizeof(v));
    return v;
}

static void replaced_add(firn_pg_decode_stats *into, const firn_pg_decode_stats *s)
{
    into->nan_to_null += s->nan_to_null;
    into->clamped += s->clamped;
    into->array_flattened += s->array_flattened;
    into->array_lbound_lost += s->array_lbound_lost;
}

void firn__stats_add_copied(firn__table *t, const firn_pg_chunk *chunk)
{
    pthread_mutex_lock(&t->mu);
    replaced_add(&t->copy_stats, &chunk->replaced);
    pthread_mutex_unlock(&t->mu);
}

void firn__stats_note_replaced(firn__table *t,
                               const firn_pg_decode_stats *before,
                               const char *column)
{
    for (size_t k = 0; k < N_REPLACED; k++) {
        if (replaced_of(&t->stats, k) == replaced_of(before, k) || (t->replaced_warned & (1u << k)))
            continue;
        t->replaced_warned |= 1u << k;
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "table %s column \"%s\": a streamed value is stored by the documented fallback "
                 "rule: %s; later ones of this table are counted in stats.json "
                 "(values_replaced.%s) and totalled at the end of the run",
                 t->display, column, REPLACED[k].rule, REPLACED[k].key);
    }
}

void firn__stats_log_replaced(firn__engine *e)
{
    for (size_t i = 0; i < e->n_tables; i++) {
        const firn_pg_decode_stats *s = &e->tables[i]->stats;
        if (s->nan_to_null || s->clamped || s->array_flattened || s->array_lbound_lost)
            FIRN_LOG(FIRN_LOG_WARN, "engine",
                     "table %s: streamed values stored by the documented fallback rules: "
                     "%llu numeric NaN as null, %llu timestamps clamped, %llu arrays flattened, "
                     "%llu array lower bounds dropped",
                     e->tables[i]->display, (unsigned long long)s->nan_to_null,
                     (unsigned long long)s->clamped, (unsigned long long)s->array_flattened,
                     (unsigned long long)s->array_lbound_lost);
    }
}

/* Values of this run stored by the fallback rules, copied and streamed, per kind; copied is
 * read under t->mu by the caller. */
static json_t *replaced_json(const firn__table *t, const firn_pg_decode_stats *copied)
{
    json_t *o = json_object();
    for (size_t k = 0; k < N_REPLACED; k++)
        json_object_set_new(
            o, REPLACED[k].key,
            json_integer((json_int_t)(replaced_of(copied, k) + replaced_of(&t->stats, k))));
    return o;
}

/* Backfill progress of t: rows copied, the estimate, share and time left. */
static json_t *backfill_json(const firn__table *t, uint64_t rows, double secs)
{
    json_t *o = json_object();
    json_object_set_new(o, "done", json_boolean(!t->needs_backfill));
    if (!t->needs_backfill)
        return o;
    double est = t->pg->estimated_rows;
    json_object_set_new(o, "rows", json_integer((json_int_t)rows));
    json_object_set_new(o, "estimated_rows", json_integer(est > 0 ? (json_int_t)est : 0));
    if (est > 0)
        json_object_set_new(o, "percent", json_real(100.0 * (double)rows / est));
    double rate = secs > 0 ? (double)rows / secs : 0;
    if (est > (double)rows && rate > 0)
        json_object_set_new(o, "eta_seconds", json_real((est - (double)rows) / rate));
    return o;
}

static json_t *table_json(firn__engine *e, firn__table *t, double secs, uint64_t *rows_out)
{
    pthread_mutex_lock(&t->mu);
    uint64_t rows = t->rows_written;
    firn_pg_decode_stats copied = t->copy_stats;
    pthread_mutex_unlock(&t->mu);
    *rows_out = rows;
    json_t *o = json_object();
    char name[1024];
    snprintf(name, sizeof(name), "%s.%s", t->stream->namespace, t->stream->name);
    json_object_set_new(o, "stream", json_string(name));
    json_object_set_new(o, "table", json_string(t->display));
    json_object_set_new(o, "sync_mode", json_string(firn_sync_mode_name(t->stream->sync_mode)));
    json_object_set_new(o, "rows_written", json_integer((json_int_t)rows));
    const uint64_t changes = t->changes_read[FIRN__OP_INSERT] + t->changes_read[FIRN__OP_UPDATE] +
                             t->changes_read[FIRN__OP_DELETE];
    json_object_set_new(o, "changes_read", json_integer((json_int_t)changes));
    json_object_set_new(o, "commits", json_integer((json_int_t)t->commits));
    json_object_set_new(o, "values_replaced", replaced_json(t, &copied));
    json_object_set_new(o, "snapshots_expired", json_integer((json_int_t)t->snapshots_expired));
    if (t->metadata_bytes) /* as expiry last measured it */
        json_object_set_new(o, "metadata_bytes", json_integer((json_int_t)t->metadata_bytes));
    if (t->cdc && !t->needs_backfill && t->buf) {
        json_object_set_new(o, "buffered_changes",
                            json_integer((json_int_t)firn_batch_rows(t->buf)));
        json_object_set_new(o, "buffered_bytes",
                            json_integer((json_int_t)firn_batch_bytes(t->buf)));
        /* the acknowledgement cannot pass the first transaction this table still buffers */
        if (firn_batch_rows(t->buf))
            json_object_set_new(o, "holds_acknowledgement_at", lsn_json(t->hold_lsn));
    }
    json_object_set_new(o, "committed_lsn", lsn_json(t->committed_lsn));
    /* stopped at a schema change the table cannot take: the slot keeps the changes from here */
    if (t->halted) { /* where the slot is held: the table's position, else the run's; true
                      * when neither is known (nothing acknowledged yet) */
        uint64_t at = t->halt_lsn ? t->halt_lsn : e->state.global_lsn;
        json_object_set_new(o, "stopped_at_schema_change", at ? lsn_json(at) : json_true());
        if (t->stop_reason) /* quarantined: a change it could not take, not a schema change */
            json_object_set_new(o, "stopped_because", json_string(t->stop_reason));
    }
    if (t->missing) /* stopped because the source has no table of the stream's name */
        json_object_set_new(o, "source_table_missing", json_true());
    const firn_stream_state *st =
        firn_state_stream(&e->state, t->stream->namespace, t->stream->name, false);
    json_object_set_new(o, "last_commit_at", time_json(st ? st->last_commit_us : 0));
    /* commits the catalog refused for a while (retried until they landed or firn gave up) */
    firn__outage_stats out;
    firn__table_outage(t, &out);
    json_object_set_new(o, "catalog_outages", json_integer((json_int_t)out.outages));
    json_object_set_new(o, "catalog_outage_seconds", json_real(out.seconds));
    if (out.since_us)
        json_object_set_new(o, "catalog_outage_since", time_json(out.since_us));
    json_object_set_new(o, "last_catalog_error",
                        out.last_error[0] ? json_string(out.last_error) : json_null());
    json_object_set_new(o, "backfill", backfill_json(t, rows, secs));
    return o;
}

static json_t *stats_json(firn__engine *e, const char *phase, int64_t now_ns)
{
    double secs = (double)(now_ns - e->start_ns) / 1e9;
    json_t *root = json_object();
    json_object_set_new(root, "updated_at", time_json(firn_now_us()));
    json_object_set_new(root, "started_at", time_json(e->start_us));
    json_object_set_new(root, "pid", json_integer((json_int_t)getpid()));
    json_object_set_new(root, "mode",
                        json_string(e->opts && e->opts->follow ? "follow" : "catch-up"));
    json_object_set_new(root, "phase", json_string(phase));
    json_object_set_new(root, "seconds_elapsed", json_real(secs));
    json_t *streams = json_array();
    uint64_t total = 0;
    for (size_t i = 0; i < e->n_tables; i++) {
        uint64_t rows = 0;
        json_array_append_new(streams, table_json(e, e->tables[i], secs, &rows));
        total += rows;
    }
    json_object_set_new(root, "rows_written", json_integer((json_int_t)total));
    json_object_set_new(root, "rows_per_second", json_real(secs > 0 ? (double)total / secs : 0));
    json_object_set_new(root, "memory_bytes", json_integer((json_int_t)firn_mem_used()));
    json_object_set_new(root, "acknowledged_lsn", lsn_json(e->state.global_lsn));
    if (e->wal_lsn) {
        json_object_set_new(root, "source_wal_lsn", lsn_json(e->wal_lsn));
        uint64_t lag = e->wal_lsn > e->state.global_lsn && e->state.global_lsn
                           ? e->wal_lsn - e->state.global_lsn
                           : 0;
        json_object_set_new(root, "lag_bytes", json_integer((json_int_t)lag));
    }
    json_object_set_new(root, "streams", streams);
    return root;
}

/* The stats file's path: "stats.json" in the state file's folder; false without a state file. */
static bool path_for(const char *state, char *out, size_t cap)
{
    if (!state)
        return false;
    const char *slash = strrchr(state, '/');
    int n = slash ? snprintf(out, cap, "%.*s/stats.json", (int)(slash - state), state)
                  : snprintf(out, cap, "stats.json");
    return n > 0 && (size_t)n < cap;
}

static bool stats_path(const firn__engine *e, char *out, size_t cap)
{
    return path_for(e->cfg->state_path, out, cap);
}

bool firn__stats_stopped(
    const char *state_path, const char *stream, char *lsn, size_t cap, bool *out_missing)
{
    *out_missing = false;
    char path[4200];
    if (!path_for(state_path, path, sizeof(path)))
        return false;
    json_t *root = json_load_file(path, 0, NULL);
    bool found = false;
    json_t *streams = json_object_get(root, "streams");
    for (size_t i = 0; !found && i < json_array_size(streams); i++) {
        json_t *s = json_array_get(streams, i);
        const char *name = json_string_value(json_object_get(s, "stream"));
        json_t *stop = json_object_get(s, "stopped_at_schema_change");
        const char *at = json_string_value(stop);
        /* "0/1" is what runs before 0.2 wrote for "no position" */
        if (at && strcmp(at, "0/1") == 0)
            at = "";
        if (name && (at || json_is_true(stop)) && strcmp(name, stream) == 0) {
            snprintf(lsn, cap, "%s", at ? at : "");
            *out_missing = json_is_true(json_object_get(s, "source_table_missing"));
            found = true;
        }
    }
    json_decref(root);
    return found;
}

void firn__stats_write(firn__engine *e, const char *phase, bool force)
{
    int64_t now = firn_monotonic_ns();
    firn__metrics_publish(e, phase);
    char path[4200];
    if (!stats_path(e, path, sizeof(path)))
        return;
    pthread_mutex_lock(&stats_mu);
    bool due = force || now - e->stats_ns >= STATS_EVERY_NS;
    if (due)
        e->stats_ns = now;
    last_phase = phase;
    pthread_mutex_unlock(&stats_mu);
    if (!due)
        return;
    json_t *root = stats_json(e, phase, now);
    size_t flags = JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10);
    size_t n = json_dumpb(root, NULL, 0, flags);
    char *text = firn_malloc(n + 1);
    n = json_dumpb(root, text, n, flags);
    json_decref(root);
    firn_err err = {0};
    pthread_mutex_lock(&stats_mu);
    if (firn__cfg_write_atomic(path, text, n, &err))
        FIRN_LOG(FIRN_LOG_WARN, "engine", "could not write the stats file: %s", err.msg);
    pthread_mutex_unlock(&stats_mu);
    firn_free(text);
}

void firn__stats_refresh(firn__engine *e)
{
    pthread_mutex_lock(&stats_mu);
    const char *phase = last_phase;
    pthread_mutex_unlock(&stats_mu);
    if (phase && e->cfg)
        firn__stats_write(e, phase, false);
}
