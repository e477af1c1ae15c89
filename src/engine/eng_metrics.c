/* SPDX-License-Identifier: Apache-2.0 */
/* The metrics of a sync (issue 29, docs/operations.md "Metrics and health"): copies of the engine's
 * counters that the server thread (eng_serve.c) renders as Prometheus text. The engine stays
 * single-threaded in what it counts: changes are counted in the tables (eng_cdc.c) and copied
 * here at most once a second; commits are counted here as they end. */
#include "cfg_int.h"
#include "engine_int.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define PUBLISH_EVERY_NS 1000000000LL

enum { RESULT_OK, RESULT_CONFLICT, RESULT_FAILED, RESULT_UNKNOWN, N_RESULTS };
static const char *const result_names[N_RESULTS] = {"ok", "conflict", "failed", "unknown"};
static const char *const op_names[3] = {"insert", "update", "delete"};
enum { LOSSY_NAN, LOSSY_CLAMPED, LOSSY_FLATTENED, LOSSY_LBOUND, N_LOSSY };
/* The keys of stats.json's values_replaced (eng_stats.c). */
static const char *const lossy_names[N_LOSSY] = {"numeric_nan_as_null", "timestamps_clamped",
                                                 "arrays_flattened", "array_lower_bounds_dropped"};

/* Upper bounds of the commit-duration histogram's buckets, in seconds (+Inf follows). */
static const double buckets[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
#define N_BUCKETS (sizeof(buckets) / sizeof(buckets[0]))

typedef struct metrics_table {
    char *stream; /* source "schema.table" */
    char *table;  /* Iceberg "namespace.table" */
    uint64_t changes[3];
    uint64_t rows_written;
    uint64_t buffered;
    uint64_t commits[N_RESULTS];
    uint64_t retries;
    uint64_t data_bytes, delete_bytes;
    uint64_t lossy[N_LOSSY];
    int64_t last_commit_us; /* 0: never */
    bool cdc, halted, missing, backfill_pending;
    bool commit_failing;     /* the last commit attempt failed and nothing landed since */
    uint64_t outages;        /* catalog outages its commits met (eng_commit.c outage_wait) */
    int64_t outage_ns;       /* time in the outages that ended */
    int64_t outage_since_ns; /* monotonic start of the ongoing one, 0: none */
} metrics_table;

struct firn__metrics {
    pthread_mutex_t mu;
    int64_t start_us;
    const char *phase; /* static text */
    uint64_t wal_lsn;  /* 0: unknown */
    uint64_t ack_lsn;
    uint64_t reconnects;
    uint64_t memory_bytes;
    uint64_t hist[N_BUCKETS + 1]; /* per bucket (not cumulative); the last is +Inf */
    double hist_sum;
    metrics_table *tables;
    size_t n_tables;
    _Atomic int64_t publish_ns; /* the engine's last publish (monotonic): backfill workers
                                 * publish too, under the copy's commit lock */
};

firn__metrics *firn__metrics_new(int64_t start_us)
{
    firn__metrics *m = firn_calloc(1, sizeof(*m));
    pthread_mutex_init(&m->mu, NULL);
    m->start_us = start_us;
    m->phase = "starting";
    return m;
}

void firn__metrics_free(firn__metrics *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_tables; i++) {
        firn_free(m->tables[i].stream);
        firn_free(m->tables[i].table);
    }
    firn_free(m->tables);
    pthread_mutex_destroy(&m->mu);
    firn_free(m);
}

/* t's entry, made on first use (with the time of its last commit of an earlier run, from the
 * state). Caller holds m->mu. */
static metrics_table *slot_of(firn__metrics *m, firn__table *t)
{
    if (t->metrics_slot)
        return &m->tables[t->metrics_slot - 1];
    m->tables = firn_reallocarray(m->tables, m->n_tables + 1, sizeof(*m->tables));
    metrics_table *mt = &m->tables[m->n_tables++];
    memset(mt, 0, sizeof(*mt));
    char name[1024];
    snprintf(name, sizeof(name), "%s.%s", t->stream->namespace, t->stream->name);
    mt->stream = firn_strdup(name);
    mt->table = firn_strdup(t->display ? t->display : name);
    const firn_stream_state *st =
        firn_state_stream(&t->eng->state, t->stream->namespace, t->stream->name, false);
    mt->last_commit_us = st ? st->last_commit_us : 0;
    t->metrics_slot = m->n_tables;
    return mt;
}

void firn__metrics_publish(firn__engine *e, const char *phase)
{
    firn__metrics *m = e->metrics;
    if (!m)
        return;
    atomic_store_explicit(&m->publish_ns, firn_monotonic_ns(), memory_order_relaxed);
    pthread_mutex_lock(&m->mu);
    if (phase)
        m->phase = phase;
    if (e->wal_lsn)
        m->wal_lsn = e->wal_lsn;
    m->ack_lsn = e->state.global_lsn;
    m->memory_bytes = firn_mem_used();
    pthread_mutex_unlock(&m->mu);
    for (size_t i = 0; i < e->n_tables; i++) {
        firn__table *t = e->tables[i];
        pthread_mutex_lock(&t->mu);
        const uint64_t rows = t->rows_written;
        const firn_pg_decode_stats copied = t->copy_stats;
        pthread_mutex_unlock(&t->mu);
        pthread_mutex_lock(&m->mu);
        metrics_table *mt = slot_of(m, t);
        memcpy(mt->changes, t->changes_read, sizeof(mt->changes));
        mt->rows_written = rows;
        mt->buffered = t->cdc && !t->needs_backfill && t->buf ? firn_batch_rows(t->buf) : 0;
        mt->cdc = t->cdc;
        mt->halted = t->halted;
        mt->missing = t->missing;
        mt->backfill_pending = t->needs_backfill;
        mt->lossy[LOSSY_NAN] = copied.nan_to_null + t->stats.nan_to_null;
        mt->lossy[LOSSY_CLAMPED] = copied.clamped + t->stats.clamped;
        mt->lossy[LOSSY_FLATTENED] = copied.array_flattened + t->stats.array_flattened;
        mt->lossy[LOSSY_LBOUND] = copied.array_lbound_lost + t->stats.array_lbound_lost;
        pthread_mutex_unlock(&m->mu);
    }
}

void firn__metrics_tick(firn__engine *e)
{
    if (!e->metrics)
        return;
    const int64_t last = atomic_load_explicit(&e->metrics->publish_ns, memory_order_relaxed);
    if (firn_monotonic_ns() - last >= PUBLISH_EVERY_NS)
        firn__metrics_publish(e, "cdc");
}

void firn__metrics_reconnected(firn__engine *e)
{
    firn__metrics *m = e->metrics;
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->reconnects++;
    m->phase = "cdc";
    pthread_mutex_unlock(&m->mu);
}

static uint64_t file_bytes(const firn_data_file *f, size_t n)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += f[i].file_size_in_bytes > 0 ? (uint64_t)f[i].file_size_in_bytes : 0;
    return sum;
}

void firn__metrics_commit(firn__table *t,
                          firn_rc rc,
                          int64_t duration_ns,
                          const firn_data_file *data,
                          size_t n_data,
                          const firn_data_file *deletes,
                          size_t n_deletes)
{
    firn__metrics *m = t->eng->metrics;
    if (!m)
        return;
    const int result = rc == FIRN_OK                    ? RESULT_OK
                       : rc == FIRN_ERR_CONFLICT        ? RESULT_CONFLICT
                       : rc == FIRN_ERR_UNKNOWN_OUTCOME ? RESULT_UNKNOWN
                                                        : RESULT_FAILED;
    const double secs = (double)(duration_ns > 0 ? duration_ns : 0) / 1e9;
    size_t b = 0;
    while (b < N_BUCKETS && secs > buckets[b])
        b++;
    pthread_mutex_lock(&m->mu);
    metrics_table *mt = slot_of(m, t);
    mt->commits[result]++;
    m->hist[b]++;
    m->hist_sum += secs;
    if (rc == FIRN_OK) {
        mt->data_bytes += file_bytes(data, n_data);
        mt->delete_bytes += file_bytes(deletes, n_deletes);
        mt->last_commit_us = firn_now_us();
        mt->commit_failing = false;
    } else if (rc != FIRN_ERR_CONFLICT) {
        mt->commit_failing = true; /* a conflict is computed again on the new parent */
    }
    pthread_mutex_unlock(&m->mu);
}

void firn__metrics_commit_retry(firn__table *t, firn_rc rc)
{
    firn__metrics *m = t->eng->metrics;
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    metrics_table *mt = slot_of(m, t);
    mt->retries++;
    if (rc != FIRN_ERR_CONFLICT)
        mt->commit_failing = true;
    pthread_mutex_unlock(&m->mu);
}

void firn__metrics_outage(firn__table *t, int64_t start_ns, int64_t end_ns)
{
    firn__metrics *m = t->eng->metrics;
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    metrics_table *mt = slot_of(m, t);
    if (!end_ns) {
        mt->outages++;
        mt->outage_since_ns = start_ns;
    } else {
        mt->outage_ns += end_ns - start_ns;
        mt->outage_since_ns = 0;
    }
    pthread_mutex_unlock(&m->mu);
}

/* ---- rendering ------------------------------------------------------------------------------ */

/* A label value with \, " and newline escaped (text format 0.0.4). */
static firn_rc append_label(firn_buf *out, const char *v)
{
    for (const char *p = v; *p; p++) {
        const char *esc = *p == '\\' ? "\\\\" : *p == '"' ? "\\\"" : *p == '\n' ? "\\n" : NULL;
        FIRN_TRY(esc ? firn_buf_append_cstr(out, esc) : firn_buf_append(out, p, 1));
    }
    return FIRN_OK;
}

static firn_rc family(firn_buf *out, const char *name, const char *type, const char *help)
{
    return firn_buf_appendf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One sample of a per-table family: name{stream="...",table="..."[,key="value"]} value. */
static firn_rc table_sample(firn_buf *out,
                            const char *name,
                            const metrics_table *mt,
                            const char *key,
                            const char *value,
                            double v)
{
    FIRN_TRY(firn_buf_appendf(out, "%s{stream=\"", name));
    FIRN_TRY(append_label(out, mt->stream));
    FIRN_TRY(firn_buf_append_cstr(out, "\",table=\""));
    FIRN_TRY(append_label(out, mt->table));
    if (key)
        FIRN_TRY(firn_buf_appendf(out, "\",%s=\"%s", key, value));
    if (v > -9e15 && v < 9e15 && (double)(int64_t)v == v) /* counts: exact, no exponent */
        return firn_buf_appendf(out, "\"} %lld\n", (long long)v);
    return firn_buf_appendf(out, "\"} %.15g\n", v);
}

typedef double (*table_value_fn)(const metrics_table *mt, size_t k);

/* A per-table family with n_keys values of label key per table (key NULL: one value). */
static firn_rc table_family(firn_buf *out,
                            const firn__metrics *m,
                            const char *name,
                            const char *type,
                            const char *help,
                            const char *key,
                            const char *const *keys,
                            size_t n_keys,
                            table_value_fn value)
{
    FIRN_TRY(family(out, name, type, help));
    for (size_t i = 0; i < m->n_tables; i++) {
        for (size_t k = 0; k < n_keys; k++)
            FIRN_TRY(table_sample(out, name, &m->tables[i], key, key ? keys[k] : NULL,
                                  value(&m->tables[i], k)));
    }
    return FIRN_OK;
}

static double v_changes(const metrics_table *mt, size_t k)
{
    return (double)mt->changes[k];
}
static double v_rows(const metrics_table *mt, size_t k)
{
    (void)k;
    return (double)mt->rows_written;
}
static double v_buffered(const metrics_table *mt, size_t k)
{
    (void)k;
    return (double)mt->buffered;
}
static double v_commits(const metrics_table *mt, size_t k)
{
    return (double)mt->commits[k];
}
static double v_retries(const metrics_table *mt, size_t k)
{
    (void)k;
    return (double)mt->retries;
}
static double v_outages(const metrics_table *mt, size_t k)
{
    (void)k;
    return (double)mt->outages;
}
static double v_outage_seconds(const metrics_table *mt, size_t k)
{
    (void)k;
    int64_t ns = mt->outage_ns;
    if (mt->outage_since_ns)
        ns += firn_monotonic_ns() - mt->outage_since_ns;
    return (double)ns / 1e9;
}
static double v_in_outage(const metrics_table *mt, size_t k)
{
    (void)k;
    return mt->outage_since_ns ? 1 : 0;
}
static double v_bytes(const metrics_table *mt, size_t k)
{
    return (double)(k == 0 ? mt->data_bytes : mt->delete_bytes);
}
static double v_lossy(const metrics_table *mt, size_t k)
{
    return (double)mt->lossy[k];
}
static double v_halted(const metrics_table *mt, size_t k)
{
    (void)k;
    return mt->halted || mt->missing ? 1 : 0;
}
static double v_backfill(const metrics_table *mt, size_t k)
{
    (void)k;
    return mt->backfill_pending ? 1 : 0;
}

static bool connected(const firn__metrics *m)
{
    return strcmp(m->phase, "backfill") == 0 || strcmp(m->phase, "cdc") == 0;
}

/* Caller holds m->mu. */
static bool ready_locked(const firn__metrics *m, char *why, size_t cap)
{
    size_t n = 0;
    why[0] = '\0';
#define WHY(...)                                                                                   \
    do {                                                                                           \
        if (n < cap) {                                                                             \
            int k = snprintf(why + n, cap - n, __VA_ARGS__);                                       \
            n += k > 0 ? (size_t)k : 0;                                                            \
        }                                                                                          \
    } while (0)
    if (!connected(m))
        WHY("not reading the source (phase %s)\n", m->phase);
    for (size_t i = 0; i < m->n_tables; i++) {
        const metrics_table *mt = &m->tables[i];
        if (mt->halted || mt->missing)
            WHY("stream %s stopped (%s); see the log and `firn status`\n", mt->stream,
                mt->missing ? "its source table is missing" : "at a schema change");
        if (mt->commit_failing)
            WHY("table %s: the last commit attempt failed\n", mt->table);
    }
#undef WHY
    return why[0] == '\0';
}

bool firn__metrics_ready(firn__metrics *m, char *why, size_t cap)
{
    pthread_mutex_lock(&m->mu);
    bool ready = ready_locked(m, why, cap);
    pthread_mutex_unlock(&m->mu);
    return ready;
}

/* Prometheus' standard process metrics (names and meanings of the client libraries). */
static firn_rc render_os(firn_buf *out)
{
    firn_process_stats p;
    firn_process_stats_get(&p);
    if (p.cpu_seconds >= 0) {
        FIRN_TRY(family(out, "process_cpu_seconds_total", "counter",
                        "Total user and system CPU time spent in seconds"));
        FIRN_TRY(firn_buf_appendf(out, "process_cpu_seconds_total %.6f\n", p.cpu_seconds));
    }
    const struct {
        const char *name, *help;
        int64_t v;
    } gauges[] = {
        {"process_resident_memory_bytes", "Resident memory size in bytes", p.resident_bytes},
        {"process_virtual_memory_bytes", "Virtual memory size in bytes", p.virtual_bytes},
        {"process_open_fds", "Number of open file descriptors", p.open_fds},
        {"process_max_fds", "Maximum number of open file descriptors", p.max_fds},
    };
    for (size_t i = 0; i < sizeof(gauges) / sizeof(gauges[0]); i++) {
        if (gauges[i].v < 0)
            continue;
        FIRN_TRY(family(out, gauges[i].name, "gauge", gauges[i].help));
        FIRN_TRY(firn_buf_appendf(out, "%s %lld\n", gauges[i].name, (long long)gauges[i].v));
    }
    if (p.start_time_secs >= 0) {
        FIRN_TRY(family(out, "process_start_time_seconds", "gauge",
                        "Start time of the process since unix epoch in seconds"));
        FIRN_TRY(firn_buf_appendf(out, "process_start_time_seconds %.2f\n", p.start_time_secs));
    }
    return FIRN_OK;
}

static firn_rc render_process(firn_buf *out, const firn__metrics *m)
{
    char why[256];
    const bool ready = ready_locked(m, why, sizeof(why));
    FIRN_TRY(family(out, "firn_build_info", "gauge", "firn's version; the value is always 1"));
    FIRN_TRY(firn_buf_appendf(out, "firn_build_info{version=\"%s\"} 1\n", FIRN_VERSION));
    FIRN_TRY(family(out, "firn_start_time_seconds", "gauge",
                    "When this sync started, in seconds since the Unix epoch"));
    FIRN_TRY(firn_buf_appendf(out, "firn_start_time_seconds %.6f\n", (double)m->start_us / 1e6));
    FIRN_TRY(render_os(out));
    FIRN_TRY(family(out, "firn_memory_bytes", "gauge",
                    "Bytes firn's allocator holds (buffers, indexes; stats.json memory_bytes)"));
    FIRN_TRY(
        firn_buf_appendf(out, "firn_memory_bytes %llu\n", (unsigned long long)m->memory_bytes));
    FIRN_TRY(family(out, "firn_ready", "gauge", "1 when /readyz answers 200, else 0"));
    FIRN_TRY(firn_buf_appendf(out, "firn_ready %d\n", ready ? 1 : 0));
    static const char *const phases[] = {"starting", "backfill", "cdc",   "reconnecting",
                                         "finished", "stopped",  "failed"};
    FIRN_TRY(family(out, "firn_phase", "gauge",
                    "1 for what the run does now (stats.json phase), 0 for the others"));
    for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++)
        FIRN_TRY(firn_buf_appendf(out, "firn_phase{phase=\"%s\"} %d\n", phases[i],
                                  strcmp(m->phase, phases[i]) == 0));
    FIRN_TRY(family(out, "firn_source_connected", "gauge",
                    "1 while the run reads the source (copying or streaming), 0 while it starts, "
                    "reconnects or has ended"));
    FIRN_TRY(firn_buf_appendf(out, "firn_source_connected %d\n", connected(m) ? 1 : 0));
    FIRN_TRY(family(out, "firn_source_reconnects_total", "counter",
                    "Reconnects to the source after a lost connection (--follow)"));
    FIRN_TRY(firn_buf_appendf(out, "firn_source_reconnects_total %llu\n",
                              (unsigned long long)m->reconnects));
    if (m->wal_lsn) {
        FIRN_TRY(family(out, "firn_replication_lag_bytes", "gauge",
                        "WAL bytes between the source's current position and the position firn "
                        "confirmed to the replication slot (asked every 5 s)"));
        const uint64_t lag = m->wal_lsn > m->ack_lsn && m->ack_lsn ? m->wal_lsn - m->ack_lsn : 0;
        FIRN_TRY(
            firn_buf_appendf(out, "firn_replication_lag_bytes %llu\n", (unsigned long long)lag));
    }
    return FIRN_OK;
}

static firn_rc render_histogram(firn_buf *out, const firn__metrics *m)
{
    const char *name = "firn_commit_duration_seconds";
    FIRN_TRY(family(out, name, "histogram",
                    "Time a commit took, retries included (every outcome), in seconds"));
    uint64_t cum = 0;
    for (size_t b = 0; b < N_BUCKETS; b++) {
        cum += m->hist[b];
        FIRN_TRY(firn_buf_appendf(out, "%s_bucket{le=\"%g\"} %llu\n", name, buckets[b],
                                  (unsigned long long)cum));
    }
    cum += m->hist[N_BUCKETS];
    FIRN_TRY(firn_buf_appendf(out, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum));
    FIRN_TRY(firn_buf_appendf(out, "%s_sum %.9g\n", name, m->hist_sum));
    return firn_buf_appendf(out, "%s_count %llu\n", name, (unsigned long long)cum);
}

static firn_rc render_commit_times(firn_buf *out, const firn__metrics *m)
{
    const int64_t now_us = firn_now_us();
    FIRN_TRY(family(out, "firn_last_commit_timestamp_seconds", "gauge",
                    "When the table's last commit landed (this run or the state file's), in "
                    "seconds since the Unix epoch; absent before the first"));
    for (size_t i = 0; i < m->n_tables; i++) {
        const metrics_table *mt = &m->tables[i];
        if (mt->last_commit_us > 0)
            FIRN_TRY(table_sample(out, "firn_last_commit_timestamp_seconds", mt, NULL, NULL,
                                  (double)mt->last_commit_us / 1e6));
    }
    FIRN_TRY(family(out, "firn_last_commit_age_seconds", "gauge",
                    "Seconds since the table's last commit landed; absent before the first"));
    for (size_t i = 0; i < m->n_tables; i++) {
        const metrics_table *mt = &m->tables[i];
        const int64_t age = now_us - mt->last_commit_us;
        if (mt->last_commit_us > 0)
            FIRN_TRY(table_sample(out, "firn_last_commit_age_seconds", mt, NULL, NULL,
                                  age > 0 ? (double)age / 1e6 : 0));
    }
    return FIRN_OK;
}

static firn_rc render_tables(firn_buf *out, const firn__metrics *m)
{
    static const char *const content[2] = {"data", "delete"};
    uint64_t halted = 0;
    for (size_t i = 0; i < m->n_tables; i++)
        halted += m->tables[i].halted || m->tables[i].missing;
    FIRN_TRY(table_family(out, m, "firn_source_changes_total", "counter",
                          "Changes read from the replication stream, by operation (read again "
                          "after a reconnect when they were not committed)",
                          "op", op_names, 3, v_changes));
    FIRN_TRY(table_family(out, m, "firn_rows_written_total", "counter",
                          "Rows written to data files: copied rows and upserted or appended "
                          "changes",
                          NULL, NULL, 1, v_rows));
    FIRN_TRY(table_family(out, m, "firn_buffered_changes", "gauge",
                          "Changes read and not yet committed", NULL, NULL, 1, v_buffered));
    FIRN_TRY(table_family(out, m, "firn_commits_total", "counter",
                          "Commits by outcome: ok, conflict (another writer committed first; "
                          "computed again), failed, unknown (outcome not known)",
                          "result", result_names, N_RESULTS, v_commits));
    FIRN_TRY(table_family(out, m, "firn_commit_retries_total", "counter",
                          "Commit attempts that failed and were retried", NULL, NULL, 1,
                          v_retries));
    FIRN_TRY(table_family(out, m, "firn_catalog_outages_total", "counter",
                          "Commits the catalog refused at least once (HTTP 429/5xx, unreachable, "
                          "lost replies) and firn retried until they landed or it gave up",
                          NULL, NULL, 1, v_outages));
    FIRN_TRY(table_family(out, m, "firn_catalog_outage_seconds_total", "counter",
                          "Time commits spent waiting for a refusing catalog, the ongoing "
                          "outage included, in seconds",
                          NULL, NULL, 1, v_outage_seconds));
    FIRN_TRY(table_family(out, m, "firn_catalog_outage", "gauge",
                          "1 while a commit of the table waits for a refusing catalog", NULL, NULL,
                          1, v_in_outage));
    FIRN_TRY(table_family(out, m, "firn_written_bytes_total", "counter",
                          "Bytes of the data and delete files that landed commits added", "content",
                          content, 2, v_bytes));
    FIRN_TRY(table_family(out, m, "firn_values_replaced_total", "counter",
                          "Values copied or streamed that were stored by a documented fallback "
                          "rule (docs/type-mapping.md; stats.json values_replaced)",
                          "kind", lossy_names, N_LOSSY, v_lossy));
    FIRN_TRY(table_family(out, m, "firn_backfill_pending", "gauge",
                          "1 while the table's initial copy is unfinished", NULL, NULL, 1,
                          v_backfill));
    FIRN_TRY(table_family(out, m, "firn_table_halted", "gauge",
                          "1 when the stream stopped (a schema change the table cannot take, or "
                          "its source table is missing)",
                          NULL, NULL, 1, v_halted));
    FIRN_TRY(family(out, "firn_tables_halted", "gauge", "Streams stopped (firn_table_halted)"));
    FIRN_TRY(firn_buf_appendf(out, "firn_tables_halted %llu\n", (unsigned long long)halted));
    return render_commit_times(out, m);
}

firn_rc firn__metrics_render(firn__metrics *m, firn_buf *out)
{
    pthread_mutex_lock(&m->mu);
    firn_rc rc = render_process(out, m);
    if (rc == FIRN_OK)
        rc = render_histogram(out, m);
    if (rc == FIRN_OK)
        rc = render_tables(out, m);
    pthread_mutex_unlock(&m->mu);
    return rc;
}
