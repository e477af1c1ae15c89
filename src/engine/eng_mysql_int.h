/* SPDX-License-Identifier: Apache-2.0 */
/* The engine's MySQL/MariaDB entry points (eng_mysql.c), private to the engine. */
#ifndef FIRN_ENG_MYSQL_INT_H
#define FIRN_ENG_MYSQL_INT_H

#include "firn/config.h"
#include "firn/engine.h"
#include "firn/source_mysql.h"

/** The connection settings of a MySQL source.json (strings borrowed from src). */
void firn__mysql_conn_config(const firn_source_config *src, firn_my_conn_config *out);
/** Opens the source connection; on failure *fault says which side (config or source). */
FIRN_MUST_CHECK firn_rc firn__mysql_open(const firn_config *cfg,
                                         firn_my_conn **out,
                                         firn_fault *fault,
                                         firn_err *err);
/** Discovers the databases of cfg ("schemas", else "database") on c. */
FIRN_MUST_CHECK firn_rc firn__mysql_discover_catalog(const firn_config *cfg,
                                                     firn_my_conn *c,
                                                     firn_my_catalog **out,
                                                     firn_err *err);
/** `firn check` of a MySQL/MariaDB source: connection, the selected streams' tables, the
 * preflight (CDC settings when a selected stream asks for CDC). Sets *fault on failure. */
FIRN_MUST_CHECK firn_rc firn__mysql_check_source(const firn_config *cfg,
                                                 firn_fault *fault,
                                                 firn_err *err);
/** `firn discover` of a MySQL/MariaDB source into the streams file at path. */
FIRN_MUST_CHECK firn_rc firn__mysql_discover(const firn_config *cfg,
                                             const char *path,
                                             firn_fault *fault,
                                             firn_err *err);

/** `firn sync` of a MySQL/MariaDB source (full refresh; eng_mysql_sync.c). Sets *fault on
 * failure. */
FIRN_MUST_CHECK firn_rc firn__mysql_sync(const firn_config *cfg,
                                         const firn_sync_options *opts,
                                         firn_fault *fault,
                                         firn_err *err);

#endif
