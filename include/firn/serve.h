/* SPDX-License-Identifier: Apache-2.0 */
/* firn serve: the control plane (docs/serve.md). An HTTP server with a JSON API under /api/v1
 * and the embedded web UI, its state in SQLite under the data folder, running each job's runs
 * as `firn sync` child processes of the same binary. */
#ifndef FIRN_SERVE_H
#define FIRN_SERVE_H

#include "firn/util.h"

#include <signal.h>

/** Options of firn serve. */
typedef struct firn_serve_options {
    const char *listen;          /* "HOST:PORT" (port 0: any free port) */
    const char *data_dir;        /* state folder, created when missing */
    const char *key_file;        /* secrets key (32 bytes); NULL: DATA/secret.key */
    const char *exe;             /* the firn binary the runs use; NULL: /proc/self/exe */
    volatile sig_atomic_t *stop; /* set by a signal handler: the server stops */
} firn_serve_options;

/** Runs the server until *o->stop is set: opens and migrates DATA/firn-serve.db, loads or
 * creates the key file, marks runs a previous server left running `abandoned`, binds o->listen
 * and prints "firn serve: listening on http://HOST:PORT/" on stdout (and, while no user exists,
 * a one-time setup token on stderr and in DATA/setup-token), then serves and schedules. At the
 * stop, running `firn sync` children are stopped cleanly. FIRN_ERR_CONFIG (one line in err)
 * for a bad address, an unusable data folder or key file. */
FIRN_MUST_CHECK firn_rc firn_serve(const firn_serve_options *o, firn_err *err);

#endif
