/* SPDX-License-Identifier: Apache-2.0 */
/* The sync engine's entry points, one per CLI command that touches a database or a catalog.
 * Each takes a loaded configuration (firn/config.h) and reports failure through firn_err; the
 * CLI turns the result into an exit code with firn_engine_last_fault. */
#ifndef FIRN_ENGINE_H
#define FIRN_ENGINE_H

#include "firn/config.h"
#include "firn/util.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

/** Options of one sync run. Zero-initialise, then set what differs. */
typedef struct firn_sync_options {
    /** false: catch-up run (backfill what is pending, stream the WAL up to the position current
     * at start, commit, exit). true: keep streaming, committing per the commit policy, until
     * *stop becomes non-zero. */
    bool follow;
    /** Set asynchronously (signal handler) to ask for a clean stop: finish the transaction at
     * hand, commit, save the state, return FIRN_ERR_CANCELLED (or FIRN_OK when nothing was left
     * to do). NULL: never stops early. */
    const volatile sig_atomic_t *stop;
    /** Overrides of the destination's commit policy for every table (0 = keep). */
    int64_t commit_interval_ms;
    uint64_t commit_max_bytes;
    /** "HOST:PORT" to serve GET /metrics (Prometheus text), /healthz and /readyz on while the
     * run lasts (docs/operations.md "Metrics and health"); NULL: the destination's metrics_listen,
     * if any. A bad or unbindable address fails the run before anything is opened (FIRN_ERR_CONFIG,
     * FIRN_FAULT_CONFIG). Borrowed. */
    const char *metrics_listen;
} firn_sync_options;

/** Where a failed entry point failed; decides the CLI's exit code (see README "Exit codes"). */
typedef enum firn_fault {
    FIRN_FAULT_NONE = 0,    /* success, or a failure that fits no class below (exit 1) */
    FIRN_FAULT_CONFIG,      /* the configuration contradicts itself or the source (exit 2) */
    FIRN_FAULT_SOURCE,      /* unreachable host, bad password, missing slot or publication,
                               wal_level not logical, missing privileges (exit 3) */
    FIRN_FAULT_DESTINATION, /* catalog unreachable or refusing, catalog path or warehouse not
                               writable, storage credentials (exit 4) */
} firn_fault;

/** Returns where the last firn_engine_* call of the calling thread failed (FIRN_FAULT_NONE
 * after a success). Thread-safe (thread-local). */
firn_fault firn_engine_last_fault(void);

/** `firn check`: connects to the source (server version, wal_level = logical, REPLICATION or
 * superuser role, the slot and publication when named and CDC is used, SELECT on the selected
 * tables) and to the destination (catalog reachable and writable: creates and drops a probe
 * namespace, writes and deletes a probe file in the warehouse, leaving nothing behind). Checks
 * only the parts whose file is loaded (cfg->has_source, cfg->has_destination). Borrows cfg.
 * Returns FIRN_OK, or the first failure with a one-line message in err and the fault recorded
 * for firn_engine_last_fault. Not thread-safe with other calls on the same cfg. */
FIRN_MUST_CHECK firn_rc firn_engine_check(const firn_config *cfg, firn_err *err);

/** `firn discover`: lists the source's tables (schemas in cfg->source.schemas, or all
 * non-system ones) with columns, types, primary keys and cursor candidates, and writes the
 * streams file to streams_out_path with firn_streams_save (atomically). When cfg->has_streams,
 * the existing selections and options are kept for tables that still exist; new tables are
 * listed but not selected. Borrows cfg and the path. Errors as firn_engine_check. */
FIRN_MUST_CHECK firn_rc firn_engine_discover(const firn_config *cfg,
                                             const char *streams_out_path,
                                             firn_err *err);

/** `firn sync`: copies the selected streams per their sync mode into their Iceberg tables,
 * exactly once (DESIGN.md), saving cfg->state to cfg->state_path after each commit
 * (firn_state_save; the engine works on its own copy of cfg->state). opts as documented above
 * (NULL = catch-up run with defaults). Borrows cfg. Returns FIRN_OK at the end of a catch-up run,
 * FIRN_ERR_CANCELLED after a requested stop, otherwise the failure (message in err, fault
 * recorded). Call from one thread; the engine starts its own workers. */
FIRN_MUST_CHECK firn_rc firn_engine_sync(const firn_config *cfg,
                                         const firn_sync_options *opts,
                                         firn_err *err);

/** `firn status`: prints one line per selected stream to out: source table, target table, sync
 * mode, backfill progress, committed source position, time of the last commit and lag (WAL
 * behind the source's current position as firn_size_format writes it, and the time since the
 * last commit as firn_duration_format writes it), read from
 * cfg->state and, when reachable, the source and the tables' snapshot summaries. Borrows cfg
 * and out. Errors as firn_engine_check. */
FIRN_MUST_CHECK firn_rc firn_engine_status(const firn_config *cfg, FILE *out, firn_err *err);

/** What `firn maintain` does. */
typedef enum firn_maintain_action {
    FIRN_MAINTAIN_STATUS = 1, /* one line per table: snapshots, refs, metadata size, files */
    FIRN_MAINTAIN_EXPIRE,     /* snapshot expiry now (docs/maintenance.md) */
    FIRN_MAINTAIN_ORPHANS,    /* files under the table location no metadata references */
} firn_maintain_action;

typedef struct firn_maintain_options {
    firn_maintain_action action;
    const char *const *tables; /* "namespace.table" (split at the last dot); none: every table
                                * of the catalog */
    size_t n_tables;
    bool dry_run;          /* expire: print what would expire, change nothing */
    bool delete_orphans;   /* orphans: delete them (else only list them) */
    int64_t older_than_ms; /* orphans: only files last modified longer ago than this; 0: the
                            * default, 3 days */
} firn_maintain_options;

/** `firn maintain`: runs o->action on the tables of cfg's destination catalog (no source is
 * read; tables no stream writes are included), printing one line per table to out. Expiry uses
 * the destination's maintenance block and the tables' history.expire.* properties, as the
 * committer does, but without its batch threshold. A failing table does not stop the others:
 * the first failure is returned (message in err, fault recorded: FIRN_FAULT_CONFIG for a
 * malformed table name, FIRN_FAULT_DESTINATION for catalog and storage errors, including a
 * table that does not exist). Borrows cfg and out. */
FIRN_MUST_CHECK firn_rc firn_engine_maintain(const firn_config *cfg,
                                             const firn_maintain_options *o,
                                             FILE *out,
                                             firn_err *err);

/** Binds a listening TCP socket (SOCK_CLOEXEC, SO_REUSEADDR, backlog 64) on text, "HOST:PORT"
 * (an IPv6 host in brackets, port 0 for any free port), for an HTTP server such as firn serve's
 * or --metrics-listen's. origin names the option in errors ("--listen"). On success *fd_out is
 * the socket, owned by the caller. FIRN_ERR_CONFIG with one line naming origin and text for a
 * malformed address, an unresolvable host or one that cannot be bound (in use, not local). */
FIRN_MUST_CHECK firn_rc firn_http_listen(const char *origin,
                                         const char *text,
                                         int *fd_out,
                                         firn_err *err);

#endif
