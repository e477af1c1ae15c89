/* SPDX-License-Identifier: Apache-2.0 */
/* The MySQL/MariaDB backfill: one consistent snapshot (START TRANSACTION WITH CONSISTENT
 * SNAPSHOT) whose binlog position is recorded, tables split by ranges of an integer primary key,
 * every chunk's SELECT streamed (mysql_use_result) and decoded into batches. */
#include "my_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_CHUNK_BYTES ((size_t)64 << 20)
#define DEFAULT_BATCH_ROWS  65536
#define DEFAULT_BATCH_BYTES ((size_t)32 << 20)
#define MAX_CHUNKS_TABLE    100000
#define SQL_MAX             ((size_t)1 << 20)

struct firn_my_plan {
    firn_my_chunk *chunks;
    size_t n, cap;
};

typedef __int128 i128;

static firn_rc status_value(firn_my_conn *c, const char *name, char *out, size_t cap, firn_err *err)
{
    char sql[128];
    snprintf(sql, sizeof(sql), "SHOW SESSION STATUS LIKE '%s'", name);
    MYSQL_RES *res = NULL;
    FIRN_TRY(firn__my_query(c, sql, &res, err));
    MYSQL_ROW row = mysql_fetch_row(res);
    snprintf(out, cap, "%s", row && row[1] ? row[1] : "");
    mysql_free_result(res);
    return FIRN_OK;
}

static firn_rc mariadb_position(firn_my_conn *c, firn_my_position *pos, firn_err *err)
{
    char off[32];
    FIRN_TRY(status_value(c, "Binlog_snapshot_file", pos->file, sizeof(pos->file), err));
    FIRN_TRY(status_value(c, "Binlog_snapshot_position", off, sizeof(off), err));
    pos->offset = strtoull(off, NULL, 10);
    if (!pos->file[0])
        return FIRN_OK; /* binlog off: no position to hand over */
    firn_buf sql;
    firn_buf_init(&sql, 1024);
    firn_rc rc = firn_buf_append_cstr(&sql, "SELECT BINLOG_GTID_POS(");
    if (rc == FIRN_OK)
        rc = firn_my_literal_append(&sql, pos->file);
    if (rc == FIRN_OK)
        rc = firn_buf_appendf(&sql, ", %llu)", (unsigned long long)pos->offset);
    if (rc == FIRN_OK)
        rc = firn_my_conn_query_value(c, (const char *)sql.data, pos->gtid, sizeof(pos->gtid), NULL,
                                      err);
    firn_buf_deinit(&sql);
    return rc;
}

static firn_rc mysql_position(firn_my_conn *c, firn_my_position *pos, firn_err *err)
{
    firn_err ignored = {0};
    if (firn_my_conn_query_value(c, "SELECT @@GLOBAL.gtid_executed", pos->gtid, sizeof(pos->gtid),
                                 NULL, &ignored))
        pos->gtid[0] = '\0';
    MYSQL_RES *res = NULL;
    /* MySQL 8.4 removed SHOW MASTER STATUS for SHOW BINARY LOG STATUS (8.2+). */
    firn_rc rc = firn__my_query(c, "SHOW BINARY LOG STATUS", &res, &ignored);
    if (rc)
        rc = firn__my_query(c, "SHOW MASTER STATUS", &res, err);
    if (rc)
        return rc;
    MYSQL_ROW row = mysql_fetch_row(res);
    if (row) {
        snprintf(pos->file, sizeof(pos->file), "%s", row[0] ? row[0] : "");
        pos->offset = row[1] ? strtoull(row[1], NULL, 10) : 0;
    }
    mysql_free_result(res);
    return FIRN_OK;
}

firn_rc firn_my_snapshot_begin(firn_my_conn *c, firn_my_position *out, firn_err *err)
{
    memset(out, 0, sizeof(*out));
    FIRN_TRY(firn_my_conn_exec(c, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ", err));
    FIRN_TRY(firn_my_conn_exec(c, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY", err));
    if (firn_my_conn_is_mariadb(c))
        return mariadb_position(c, out, err);
    return mysql_position(c, out, err);
}

static bool key_is_integer(const firn_my_table *t)
{
    if (t->n_key == 0)
        return false;
    const firn_my_kind k = t->columns[t->key[0]].type.kind;
    return k == FIRN_MY_KIND_INT || k == FIRN_MY_KIND_LONG || k == FIRN_MY_KIND_ULONG;
}

static firn_my_chunk *chunk_add(firn_my_plan *p, firn_my_table *t)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 16;
        p->chunks = firn_reallocarray(p->chunks, p->cap, sizeof(*p->chunks));
    }
    firn_my_chunk *ch = &p->chunks[p->n];
    memset(ch, 0, sizeof(*ch));
    ch->id = (uint32_t)p->n++;
    ch->table = t;
    return ch;
}

static void i128_text(i128 v, char *out, size_t cap)
{
    char tmp[48];
    size_t n = 0;
    const bool neg = v < 0;
    unsigned __int128 m = neg ? (unsigned __int128)(-(v + 1)) + 1 : (unsigned __int128)v;
    do {
        tmp[n++] = (char)('0' + (int)(m % 10));
        m /= 10;
    } while (m);
    size_t o = 0;
    if (neg && o + 1 < cap)
        out[o++] = '-';
    while (n && o + 1 < cap)
        out[o++] = tmp[--n];
    out[o] = '\0';
}

static bool text_i128(const char *s, i128 *out)
{
    const bool neg = *s == '-';
    if (neg)
        s++;
    if (!*s)
        return false;
    i128 v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        v = v * 10 + (*s - '0');
    }
    *out = neg ? -v : v;
    return true;
}

static firn_rc
key_bounds(firn_my_conn *c, const firn_my_table *t, i128 *lo, i128 *hi, bool *empty, firn_err *err)
{
    firn_buf sql, key;
    firn_buf_init(&sql, 4096);
    firn_buf_init(&key, 1024);
    firn_rc rc = firn_my_ident_append(&key, t->columns[t->key[0]].name);
    if (rc == FIRN_OK)
        rc = firn_buf_appendf(&sql, "SELECT MIN(%s), MAX(%s) FROM ", (const char *)key.data,
                              (const char *)key.data);
    if (rc == FIRN_OK)
        rc = firn_my_ident_append(&sql, t->database);
    if (rc == FIRN_OK)
        rc = firn_buf_append_cstr(&sql, ".");
    if (rc == FIRN_OK)
        rc = firn_my_ident_append(&sql, t->name);
    MYSQL_RES *res = NULL;
    if (rc == FIRN_OK)
        rc = firn__my_query(c, (const char *)sql.data, &res, err);
    firn_buf_deinit(&sql);
    firn_buf_deinit(&key);
    if (rc)
        return rc;
    MYSQL_ROW row = mysql_fetch_row(res);
    *empty = !row || !row[0] || !row[1];
    if (!*empty && (!text_i128(row[0], lo) || !text_i128(row[1], hi)))
        rc = firn_err_set(err, FIRN_ERR_PARSE, "unexpected key bounds of table \"%s\".\"%s\"",
                          t->database, t->name);
    mysql_free_result(res);
    return rc;
}

static firn_rc
plan_table(firn_my_conn *c, firn_my_plan *p, firn_my_table *t, size_t chunk_bytes, firn_err *err)
{
    size_t n = t->data_bytes > 0 ? (size_t)t->data_bytes / chunk_bytes + 1 : 1;
    if (n > MAX_CHUNKS_TABLE)
        n = MAX_CHUNKS_TABLE;
    if (n <= 1 || !key_is_integer(t)) {
        chunk_add(p, t);
        return FIRN_OK;
    }
    i128 lo = 0, hi = 0;
    bool empty = false;
    FIRN_TRY(key_bounds(c, t, &lo, &hi, &empty, err));
    if (empty || hi - lo + 1 < (i128)n) {
        chunk_add(p, t);
        return FIRN_OK;
    }
    const i128 step = (hi - lo + 1) / (i128)n;
    for (size_t i = 0; i < n; i++) {
        firn_my_chunk *ch = chunk_add(p, t);
        ch->ranged = true;
        ch->has_lo = i > 0;
        ch->has_hi = i + 1 < n;
        i128_text(lo + step * (i128)i, ch->lo, sizeof(ch->lo));
        i128_text(lo + step * (i128)(i + 1), ch->hi, sizeof(ch->hi));
    }
    return FIRN_OK;
}

firn_rc firn_my_backfill_plan(firn_my_conn *c,
                              firn_my_table *const *tables,
                              size_t n_tables,
                              size_t chunk_bytes,
                              firn_my_plan **out,
                              firn_err *err)
{
    *out = NULL;
    firn_my_plan *p = firn_calloc(1, sizeof(*p));
    if (chunk_bytes == 0)
        chunk_bytes = DEFAULT_CHUNK_BYTES;
    for (size_t i = 0; i < n_tables; i++) {
        firn_rc rc = plan_table(c, p, tables[i], chunk_bytes, err);
        if (rc) {
            firn_my_plan_free(p);
            return rc;
        }
    }
    *out = p;
    return FIRN_OK;
}

void firn_my_plan_free(firn_my_plan *p)
{
    if (!p)
        return;
    firn_free(p->chunks);
    firn_free(p);
}

size_t firn_my_plan_chunks(const firn_my_plan *p)
{
    return p->n;
}

firn_my_chunk *firn_my_plan_chunk(firn_my_plan *p, size_t i)
{
    FIRN_ASSERT(i < p->n);
    return &p->chunks[i];
}

static firn_rc chunk_sql(const firn_my_chunk *ch, firn_buf *sql)
{
    const firn_my_table *t = ch->table;
    FIRN_TRY(firn_buf_append_cstr(sql, "SELECT "));
    FIRN_TRY(firn_my_select_list(t, sql));
    FIRN_TRY(firn_buf_append_cstr(sql, " FROM "));
    FIRN_TRY(firn_my_ident_append(sql, t->database));
    FIRN_TRY(firn_buf_append_cstr(sql, "."));
    FIRN_TRY(firn_my_ident_append(sql, t->name));
    if (!ch->ranged || (!ch->has_lo && !ch->has_hi))
        return FIRN_OK;
    const char *key = t->columns[t->key[0]].name;
    FIRN_TRY(firn_buf_append_cstr(sql, " WHERE "));
    if (ch->has_lo) {
        FIRN_TRY(firn_my_ident_append(sql, key));
        FIRN_TRY(firn_buf_appendf(sql, " >= %s", ch->lo));
    }
    if (ch->has_hi) {
        FIRN_TRY(firn_buf_append_cstr(sql, ch->has_lo ? " AND " : ""));
        FIRN_TRY(firn_my_ident_append(sql, key));
        FIRN_TRY(firn_buf_appendf(sql, " < %s", ch->hi));
    }
    return FIRN_OK;
}

static firn_rc decode_row(const firn_my_table *t,
                          MYSQL_ROW row,
                          const unsigned long *lens,
                          firn_batch *b,
                          firn_my_decode_stats *stats,
                          firn_err *err)
{
    for (size_t i = 0; i < t->n_columns; i++) {
        firn_column *col = firn_batch_column(b, i);
        if (!row[i]) {
            firn_column_append_null(col);
            continue;
        }
        firn_rc rc = firn_my_value_decode(&t->columns[i].type, (const uint8_t *)row[i], lens[i],
                                          col, stats, err);
        if (rc) {
            firn_err_context(err, "column \"%s\" of table \"%s\".\"%s\"", t->columns[i].name,
                             t->database, t->name);
            return rc;
        }
    }
    return firn_batch_end_row(b, FIRN_OP_READ, 0, err);
}

static firn_rc
deliver(const firn_my_backfill_opts *o, const firn_my_chunk *ch, firn_batch *b, firn_err *err)
{
    if (firn_batch_rows(b) == 0)
        return FIRN_OK;
    firn_rc rc = o->on_batch(o->ctx, ch, b, err);
    firn_batch_reset(b);
    return rc;
}

static firn_rc stream_rows(firn_my_conn *c,
                           firn_my_chunk *ch,
                           const firn_my_backfill_opts *o,
                           firn_batch *b,
                           firn_err *err)
{
    MYSQL *my = firn_my_conn_handle(c);
    MYSQL_RES *res = mysql_use_result(my);
    if (!res)
        return firn__my_fail(c, "could not read a chunk", err);
    const size_t max_rows = o->batch_rows ? o->batch_rows : DEFAULT_BATCH_ROWS;
    const size_t max_bytes = o->batch_bytes ? o->batch_bytes : DEFAULT_BATCH_BYTES;
    firn_rc rc = FIRN_OK;
    MYSQL_ROW row;
    while (rc == FIRN_OK && (row = mysql_fetch_row(res)) != NULL) {
        rc = decode_row(ch->table, row, mysql_fetch_lengths(res), b, &ch->replaced, err);
        if (rc == FIRN_OK && (firn_batch_rows(b) >= max_rows || firn_batch_bytes(b) >= max_bytes))
            rc = deliver(o, ch, b, err);
        if (rc == FIRN_OK && o->cancel && *o->cancel)
            rc = firn_err_set(err, FIRN_ERR_CANCELLED, "backfill cancelled");
    }
    if (rc == FIRN_OK && mysql_errno(my))
        rc = firn__my_fail(c, "reading a chunk failed", err);
    /* Draining what is left keeps the connection usable after an early stop. */
    while (rc && mysql_fetch_row(res) != NULL)
        ;
    mysql_free_result(res);
    if (rc == FIRN_OK)
        rc = deliver(o, ch, b, err);
    return rc;
}

static firn_rc
read_chunk(firn_my_conn *c, firn_my_chunk *ch, const firn_my_backfill_opts *o, firn_err *err)
{
    firn_buf sql;
    firn_buf_init(&sql, SQL_MAX);
    firn_rc rc = chunk_sql(ch, &sql);
    if (rc) {
        firn_buf_deinit(&sql);
        return firn_err_set(err, rc, "the SELECT of table \"%s\".\"%s\" is longer than 1 MiB",
                            ch->table->database, ch->table->name);
    }
    MYSQL *my = firn_my_conn_handle(c);
    if (mysql_real_query(my, (const char *)sql.data, sql.len))
        rc = firn__my_fail(c, "could not read a chunk", err);
    firn_buf_deinit(&sql);
    if (rc)
        return rc;
    firn_batch *b = firn_batch_new(ch->table->schema);
    memset(&ch->replaced, 0, sizeof(ch->replaced));
    rc = stream_rows(c, ch, o, b, err);
    firn_batch_free(b);
    if (rc == FIRN_OK && ch->replaced.zero_dates)
        FIRN_LOG(FIRN_LOG_INFO, "mysql", "table=%s.%s chunk=%u zero dates stored as null: %llu",
                 ch->table->database, ch->table->name, ch->id,
                 (unsigned long long)ch->replaced.zero_dates);
    return rc;
}

firn_rc firn_my_backfill_run(firn_my_conn *c,
                             firn_my_plan *plan,
                             const firn_my_backfill_opts *opts,
                             firn_err *err)
{
    FIRN_ASSERT(opts->on_batch);
    for (size_t i = 0; i < plan->n; i++) {
        firn_my_chunk *ch = &plan->chunks[i];
        if (ch->done)
            continue;
        firn_rc rc = read_chunk(c, ch, opts, err);
        if (rc == FIRN_OK && opts->on_chunk_done)
            rc = opts->on_chunk_done(opts->ctx, ch, err);
        if (rc)
            return rc;
        ch->done = true;
    }
    return FIRN_OK;
}
