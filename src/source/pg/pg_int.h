/* SPDX-License-Identifier: Apache-2.0 */
/* Private declarations shared by the files of the PostgreSQL source (pg_*.c). */
#ifndef FIRN_PG_INT_H
#define FIRN_PG_INT_H

#include "firn/source_pg.h"

#include <libpq-fe.h>

#define FIRN_PG_LOG_COMP "pg"

/* Big-endian integers of the binary COPY and value formats (network byte order). */
static inline uint16_t firn__pg_be16(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

static inline uint32_t firn__pg_be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t firn__pg_be64(const uint8_t *p)
{
    return ((uint64_t)firn__pg_be32(p) << 32) | firn__pg_be32(p + 4);
}

/* PostgreSQL's epoch (2000-01-01) minus the Unix epoch, in days and microseconds. */
#define FIRN_PG_EPOCH_DAYS 10957
#define FIRN_PG_EPOCH_US   INT64_C(946684800000000)

/* Most dimensions an array value has (PostgreSQL's MAXDIM). */
#define FIRN_PG_ARRAY_DIMS_MAX 6

/* int2vector and oidvector: arrays of int2 / oid whose text form is the elements separated by
 * spaces ("1 2 3", "" when empty) and whose binary form is array_send's with lower bound 0. */
#define FIRN_PG_INT2VECTOR_OID 22
#define FIRN_PG_OIDVECTOR_OID  30

/** True for int2vector and oidvector (and domains over them): t->kind is FIRN_PG_KIND_ARRAY. */
static inline bool firn__pg_is_vector(const firn_pg_type *t)
{
    return t->kind == FIRN_PG_KIND_ARRAY &&
           (t->base_oid == FIRN_PG_INT2VECTOR_OID || t->base_oid == FIRN_PG_OIDVECTOR_OID);
}

/* Largest SQL text firn builds (COPY queries of 1600-column tables stay far below). */
#define FIRN_PG_SQL_MAX ((size_t)1 << 20)

/** Records the error of a failed result (or of the connection when res is NULL) in err as one
 * line "<context>: <server message> (SQLSTATE xxxxx)"; returns the code (FIRN_ERR_SOURCE;
 * FIRN_ERR_PERMISSION for SQLSTATE 42501 insufficient_privilege; FIRN_ERR_NETWORK when the
 * connection is gone). */
firn_rc firn__pg_result_error(PGconn *pq, const PGresult *res, firn_err *err, const char *context);
/** Runs a query expected to return rows (PGRES_TUPLES_OK); owned result in *out (PQclear). */
FIRN_MUST_CHECK firn_rc firn__pg_query(firn_pg_conn *c,
                                       const char *sql,
                                       int n_params,
                                       const char *const *params,
                                       PGresult **out,
                                       firn_err *err);
/** Appends s as a quoted SQL identifier ("a""b"). */
FIRN_MUST_CHECK firn_rc firn__pg_quote_ident(firn_buf *b, const char *s);
/** Copies a libpq message into out as one line: newlines become "; ", trailing space dropped. */
void firn__pg_one_line(const char *msg, char *out, size_t out_cap);
/** Sends the server's notices and warnings on pq to the log (one warn line each, comp=pg)
 * instead of libpq's default of printing them raw on stderr. */
void firn__pg_route_notices(PGconn *pq);

/* libpq TCP keepalive settings every connection to the source gets unless its conninfo sets
 * them (they go before the conninfo, which overrides them): keys and values. */
#define FIRN_PG_KEEPALIVE_N 4
extern const char *const firn__pg_keepalive_keys[FIRN_PG_KEEPALIVE_N];
extern const char *const firn__pg_keepalive_values[FIRN_PG_KEEPALIVE_N];
/** Fractional digits of money under the server's lc_monetary (2 in C and most locales). */
int firn__pg_conn_money_scale(firn_pg_conn *c);

/** Maps the dimensions dims[0..ndim) of an array value onto the list nesting of the column
 * (t->ndims levels) into eff[0..t->ndims): extra inner dimensions are flattened row-major into
 * the innermost list (counted in stats->array_flattened), missing outer ones become single-item
 * lists; ndim 0 (empty array) gives eff[0] = 0. Shared by the binary and the text decoders so
 * both shape values alike. Returns false when the flattened innermost level exceeds INT32_MAX
 * elements. */
bool firn__pg_array_shape(const firn_pg_type *t,
                          const int32_t *dims,
                          int32_t ndim,
                          int32_t *eff,
                          firn_pg_decode_stats *stats);

/** Sets err to "invalid binary value of type ... (len bytes): why" (FIRN_ERR_PARSE) and returns
 * FIRN_ERR_PARSE: the message of every binary value decoder. */
firn_rc firn__pg_bad_value(const firn_pg_type *t, size_t len, firn_err *err, const char *why);

/** Rows of a binary COPY staged column by column before they reach the batch (pg_stage.c). */
typedef struct firn__pg_stage firn__pg_stage;
/** Returns the stage for the columns of t (borrowed; must outlive the stage). */
firn__pg_stage *firn__pg_stage_new(const firn_pg_table *t);
/** Frees the stage (NULL accepted). */
void firn__pg_stage_free(firn__pg_stage *s);
/** Rows staged since the last flush. */
size_t firn__pg_stage_rows(const firn__pg_stage *s);
/** True when no more rows fit: flush before staging the next. */
bool firn__pg_stage_full(const firn__pg_stage *s);
/** Drops the staged rows. */
void firn__pg_stage_clear(firn__pg_stage *s);
/** Bytes of memory the stage's buffers of kept fields (text, bytea, side-decoded) hold. */
size_t firn__pg_stage_held(const firn__pg_stage *s);
/** Stages the tuple at p (len >= 2 bytes available; its field count first, already checked
 * against the table's columns): its fields are decoded into the stage's typed arrays now (text,
 * bytea and side-decoded fields are kept as sent). *used is its length, or 0 when it is not
 * complete yet (nothing staged then). A negative field length or a bad value (FIRN_ERR_PARSE, a
 * bad value's message naming the column as firn_pg_value_decode words it) drops every staged
 * row; more than 4 GiB of kept fields (impossible while the caller flushes when
 * firn__pg_stage_full) is FIRN_ERR_TOO_LARGE. p is only read during the call. */
FIRN_MUST_CHECK firn_rc
firn__pg_stage_row(firn__pg_stage *s, const uint8_t *p, size_t len, size_t *used, firn_err *err);
/** Appends the staged rows to b column by column (cols[i]: the batch column of table column i)
 * as rows of operation FIRN_OP_READ at position lsn, decoding the side-decoded columns now, and
 * adds their fallbacks (NaN as null, clamped timestamps, flattened arrays) to stats; empties the
 * stage. A bad side-decoded value is FIRN_ERR_PARSE naming the column, with b and stats as they
 * were and every staged row dropped; else errors as firn_batch_end_rows. */
FIRN_MUST_CHECK firn_rc firn__pg_stage_flush(firn__pg_stage *s,
                                             firn_batch *b,
                                             firn_column *const *cols,
                                             uint64_t lsn,
                                             firn_pg_decode_stats *stats,
                                             firn_err *err);

#endif
