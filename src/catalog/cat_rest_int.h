/* SPDX-License-Identifier: Apache-2.0 */
/* Private interface between the REST catalog (cat_rest.c) and its FileIO for vended storage
 * credentials (cat_rest_io.c). */
#ifndef FIRN_CAT_REST_INT_H
#define FIRN_CAT_REST_INT_H

#include "firn/catalog.h"

typedef struct firn__rest_io firn__rest_io;

/** Fetches fresh storage credentials of table ns.name at location into out (initialized by the
 * callee): the flattened config of the best `storage-credentials` entry over the table's
 * `config`. Called by the FileIO when vended credentials are about to expire. */
typedef firn_rc (*firn__rest_refresh_fn)(void *ctx,
                                         const char *ns,
                                         const char *name,
                                         const char *location,
                                         firn_props *out,
                                         firn_err *err);

/** Creates the routing FileIO from the S3/GCS templates of opts (copied); refresh/ctx borrowed
 * and must outlive it. */
firn__rest_io *
firn__rest_io_new(const firn_catalog_rest_opts *opts, firn__rest_refresh_fn refresh, void *ctx);
/** Frees io (NULL accepted). */
void firn__rest_io_free(firn__rest_io *io);
/** The firn_io face of io (borrowed). */
firn_io *firn__rest_io_base(firn__rest_io *io);
/** Records the storage credentials a load/create returned for table ns.name at location (creds
 * as firn__rest_refresh_fn gives them). Credentials without S3 keys or a GCS token are ignored.
 * A known table gets the new credentials (used from its next refresh on). Thread-safe. */
void firn__rest_io_set_table(firn__rest_io *io,
                             const char *ns,
                             const char *name,
                             const char *location,
                             const firn_props *creds);
/** Parses a credential expiry: milliseconds since the epoch, or an ISO-8601 UTC timestamp
 * ("2026-01-02T03:04:05Z", fractions ignored). 0 when absent or unparsable. */
int64_t firn__rest_parse_expiry(const char *text);

#endif
