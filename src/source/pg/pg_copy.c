/* SPDX-License-Identifier: Apache-2.0 */
/* Binary COPY decoder: the `COPY ... TO STDOUT (FORMAT binary)` stream (header, tuples, trailer;
 * PostgreSQL docs "COPY", "Binary Format") decoded straight into a column batch. */
#include "pg_int.h"

#include <string.h>

#define COPY_SIGNATURE     "PGCOPY\n\377\r\n\0"
#define COPY_SIGNATURE_LEN 11
#define COPY_HEADER_LEN    (COPY_SIGNATURE_LEN + 8)
#define COPY_FLAG_OIDS     (1u << 16)
/* A tuple may carry up to 1600 fields of up to 1 GiB each; pending bytes beyond this are bad. */
#define COPY_PENDING_MAX ((size_t)1 << 31)

typedef enum copy_state {
    COPY_HEADER = 0,
    COPY_HEADER_EXT, /* skipping the header extension area */
    COPY_TUPLES,
    COPY_DONE, /* trailer seen */
} copy_state;

struct firn_pg_copy {
    const firn_pg_table *table;
    firn_batch *batch;
    copy_state state;
    uint32_t ext_left;
    firn_buf pending;
    firn_pg_decode_stats stats;
    firn_column **cols;    /* the batch's column of each table column */
    firn__pg_stage *stage; /* decoded rows not yet in the batch */
    uint64_t stage_lsn;    /* their position */
};

static void bind_columns(firn_pg_copy *d)
{
    for (size_t i = 0; d->batch && i < d->table->n_columns; i++)
        d->cols[i] = firn_batch_column(d->batch, i);
}

static inline uint32_t rd_be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

firn_pg_copy *firn_pg_copy_new(const firn_pg_table *t, firn_batch *batch)
{
    firn_pg_copy *d = firn_calloc(1, sizeof(*d));
    d->table = t;
    d->batch = batch;
    d->cols = firn_calloc(t->n_columns ? t->n_columns : 1, sizeof(*d->cols));
    bind_columns(d);
    d->stage = firn__pg_stage_new(t);
    firn_buf_init(&d->pending, COPY_PENDING_MAX);
    return d;
}

void firn_pg_copy_free(firn_pg_copy *d)
{
    if (!d)
        return;
    firn_buf_deinit(&d->pending);
    firn__pg_stage_free(d->stage);
    firn_free(d->cols);
    firn_free(d);
}

firn_rc firn_pg_copy_flush(firn_pg_copy *d, firn_err *err)
{
    return firn__pg_stage_flush(d->stage, d->batch, d->cols, d->stage_lsn, &d->stats, err);
}

void firn_pg_copy_set_batch(firn_pg_copy *d, firn_batch *batch)
{
    FIRN_ASSERT(firn__pg_stage_rows(d->stage) == 0);
    d->batch = batch;
    bind_columns(d);
}

const firn_pg_decode_stats *firn_pg_copy_stats(const firn_pg_copy *d)
{
    return &d->stats;
}

static firn_rc
parse_header(firn_pg_copy *d, const uint8_t *p, size_t len, size_t *used, firn_err *err)
{
    *used = 0;
    if (len < COPY_HEADER_LEN)
        return FIRN_OK;
    if (memcmp(p, COPY_SIGNATURE, COPY_SIGNATURE_LEN) != 0)
        return firn_err_set(err, FIRN_ERR_PARSE, "invalid COPY binary signature");
    uint32_t flags = rd_be32(p + COPY_SIGNATURE_LEN);
    if (flags & COPY_FLAG_OIDS)
        return firn_err_set(err, FIRN_ERR_PARSE, "COPY binary stream with OIDs is not supported");
    if (flags & 0xffff0000u)
        return firn_err_set(err, FIRN_ERR_PARSE, "unknown critical COPY binary flags 0x%08x",
                            flags);
    d->ext_left = rd_be32(p + COPY_SIGNATURE_LEN + 4);
    d->state = d->ext_left ? COPY_HEADER_EXT : COPY_TUPLES;
    *used = COPY_HEADER_LEN;
    return FIRN_OK;
}

/* Stages the tuple (or finds the trailer) at p; *used is 0 when it is not complete yet. The
 * stage goes to the batch when it is full or the position changes. */
static firn_rc stage_tuple(
    firn_pg_copy *d, const uint8_t *p, size_t len, uint64_t lsn, size_t *used, firn_err *err)
{
    *used = 0;
    if (len < 2)
        return FIRN_OK;
    int16_t nfields = (int16_t)((p[0] << 8) | p[1]);
    if (nfields == -1) {
        d->state = COPY_DONE;
        *used = 2;
        return FIRN_OK;
    }
    if (nfields < 0 || (size_t)nfields != d->table->n_columns)
        return firn_err_set(err, FIRN_ERR_PARSE, "COPY tuple has %d fields, expected %zu", nfields,
                            d->table->n_columns);
    size_t staged = firn__pg_stage_rows(d->stage);
    if (staged > 0 && (lsn != d->stage_lsn || firn__pg_stage_full(d->stage)))
        FIRN_TRY(firn_pg_copy_flush(d, err));
    d->stage_lsn = lsn;
    return firn__pg_stage_row(d->stage, p, len, used, err);
}

/* Consumes one unit (header, some extension bytes, a tuple, the trailer) at p; *used is 0 when
 * the unit is not complete yet. */
static firn_rc consume_one(
    firn_pg_copy *d, const uint8_t *p, size_t len, uint64_t lsn, size_t *used, firn_err *err)
{
    *used = 0;
    switch (d->state) {
    case COPY_HEADER:
        return parse_header(d, p, len, used, err);
    case COPY_HEADER_EXT: {
        size_t n = len < d->ext_left ? len : d->ext_left;
        d->ext_left -= (uint32_t)n;
        if (d->ext_left == 0)
            d->state = COPY_TUPLES;
        *used = n;
        return FIRN_OK;
    }
    case COPY_TUPLES:
        return stage_tuple(d, p, len, lsn, used, err);
    case COPY_DONE:
        if (len > 0)
            return firn_err_set(err, FIRN_ERR_PROTOCOL, "%zu bytes after the COPY trailer", len);
        return FIRN_OK;
    }
    return firn_err_set(err, FIRN_ERR_INTERNAL, "bad COPY decoder state");
}

static firn_rc
consume(firn_pg_copy *d, const uint8_t *p, size_t len, uint64_t lsn, size_t *used, firn_err *err)
{
    size_t pos = 0;
    while (pos < len) {
        size_t n = 0;
        firn_rc rc = consume_one(d, p + pos, len - pos, lsn, &n, err);
        if (rc) {
            *used = pos;
            return rc;
        }
        if (n == 0)
            break;
        pos += n;
    }
    *used = pos;
    return FIRN_OK;
}

/* Consumes the complete units in d->pending and keeps what is left (the start of the next
 * tuple, or nothing) at its front. */
static firn_rc consume_pending(firn_pg_copy *d, uint64_t lsn, firn_err *err)
{
    firn_buf *b = &d->pending;
    size_t used = 0;
    firn_rc rc = consume(d, b->data, b->len, lsn, &used, err);
    size_t left = b->len - used;
    if (used > 0 && left > 0)
        memmove(b->data, b->data + used, left);
    firn_buf_truncate(b, left);
    return rc;
}

firn_rc
firn_pg_copy_feed(firn_pg_copy *d, const uint8_t *p, size_t len, uint64_t lsn, firn_err *err)
{
    size_t used = 0;
    if (d->pending.len == 0) {
        FIRN_TRY(consume(d, p, len, lsn, &used, err));
        if (used < len && firn_buf_append(&d->pending, p + used, len - used))
            return firn_err_set(err, FIRN_ERR_TOO_LARGE, "COPY tuple larger than %zu bytes",
                                COPY_PENDING_MAX);
        return FIRN_OK;
    }
    if (firn_buf_append(&d->pending, p, len))
        return firn_err_set(err, FIRN_ERR_TOO_LARGE, "COPY tuple larger than %zu bytes",
                            COPY_PENDING_MAX);
    return consume_pending(d, lsn, err);
}

uint8_t *firn_pg_copy_room(firn_pg_copy *d, size_t *room)
{
    return firn_buf_room(&d->pending, FIRN_PG_COPY_ROOM, room);
}

firn_rc firn_pg_copy_feed_room(firn_pg_copy *d, size_t n, uint64_t lsn, firn_err *err)
{
    firn_buf_commit(&d->pending, n);
    return consume_pending(d, lsn, err);
}

firn_rc firn_pg_copy_finish(firn_pg_copy *d, firn_err *err)
{
    FIRN_TRY(firn_pg_copy_flush(d, err));
    if (d->state != COPY_DONE)
        return firn_err_set(err, FIRN_ERR_PARSE, "COPY binary stream ended without its trailer");
    if (d->pending.len > 0)
        return firn_err_set(err, FIRN_ERR_PARSE, "%zu bytes of an incomplete COPY tuple",
                            d->pending.len);
    return FIRN_OK;
}

#define INET_OID 869

/* Appends the expression that reads column i: as is, or as the text of its output function
 * (what pgoutput sends in text mode). ::text is that text for every text_cast type except inet,
 * whose cast to text (network_show) adds the /32 or /128 that inet_out leaves out of host
 * addresses; inet goes through inet_out, inet[] through array_out re-read as text[]. */
static firn_rc select_column(const firn_pg_table *t, size_t i, firn_buf *out)
{
    const firn_pg_type *ty = t->columns[i].type;
    bool array = ty->kind == FIRN_PG_KIND_ARRAY;
    bool inet = (array ? ty->elem->base_oid : ty->base_oid) == INET_OID;
    if (ty->text_cast && inet && !array)
        FIRN_TRY(firn_buf_append_cstr(out, "pg_catalog.textin(pg_catalog.inet_out("));
    FIRN_TRY(firn__pg_quote_ident(out, t->columns[i].name));
    if (!ty->text_cast)
        return FIRN_OK;
    if (inet)
        return firn_buf_append_cstr(out, array ? "::text::text[]" : "))");
    return firn_buf_append_cstr(out, array ? "::text[]" : "::text");
}

firn_rc firn_pg_copy_select_list(const firn_pg_table *t, firn_buf *out)
{
    for (size_t i = 0; i < t->n_columns; i++) {
        if (i > 0)
            FIRN_TRY(firn_buf_append_cstr(out, ", "));
        FIRN_TRY(select_column(t, i, out));
    }
    return FIRN_OK;
}
