/* SPDX-License-Identifier: Apache-2.0 */
/* Change data capture: committed transactions from the pgoutput stream are decoded into each
 * table's buffer, flushed at transaction boundaries by the commit policy, and the source is
 * acknowledged only after every table holding the transaction's changes has committed
 * (DESIGN.md steps 2, 5 and 6). Changes at or below a table's committed position are skipped,
 * so a restart after a crash between commit and acknowledgement duplicates nothing. */
#include "engine_int.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NEXT_TIMEOUT_MS    200
#define CATCHUP_NEXT_MS    50
#define CATCHUP_PROBE_MS   300 /* idle time before asking the server how far it decoded */
#define CATCHUP_GIVE_UP_MS 60000
/* The server says it sent past the target but no keepalive past it came after the data: what
 * it sent may still be on the way (socket, the receiver thread's queue), so wait this long
 * without a message before believing it. */
#define CATCHUP_SENT_GRACE_MS 2000
#define STOP_TXN_GRACE_MS     2000 /* a stop waits this long for the transaction at hand to end */

/* A relation of the stream mapped onto a synced table. */
typedef struct rel_map {
    uint32_t relid;
    uint32_t version;
    firn__table *table; /* NULL: not synced (changes ignored) */
    bool stale;         /* describes changes made before a DEFAULT column the table was copied
                           for in this run was added: the copy holds them (skipped) */
    bool mismatch;      /* differs from the table, read in a transaction the table holds (or
                           stale): taken into the table at its first change that is not */
    bool noted;         /* what place_relation found was logged (once per relation and run) */
    int32_t *batch_col; /* per relation column: batch column, or -1 */
    uint16_t n_cols;
} rel_map;

typedef struct cdc {
    firn__engine *e;
    firn_pgo_stream *s;
    rel_map *rels;
    size_t n_rels;
    uint64_t last_end_lsn;    /* end of the last transaction fully read */
    uint64_t flushed_end_lsn; /* end of the last transaction committed everywhere */
    int64_t last_event_ns;    /* last message from the server (events and streamed chunks) */
    uint64_t messages_seen;   /* pgoutput messages received by then */
    bool sent_unknown;        /* the server does not show this role how far it has sent */
    uint64_t target_lsn;      /* catch-up run: WAL position at start */
    int64_t flush_asked_ns;   /* catch-up run: when flush_to_target last wrote a commit */
    bool in_txn;
    uint64_t done_commit_lsn; /* commit LSN of the last transaction fully read */
    uint64_t txn_commit_lsn;
    int64_t txn_commit_us;
    bool txn_in_copy; /* the transaction is visible in this run's copy (copy_snapshot) */
    /* e->copy_snapshot parsed: transactions below xmin or below xmax and not in xip are in the
     * copy of the tables copied in this run outside the slot's snapshot (have_copy). */
    bool have_copy;
    uint64_t copy_xmin, copy_xmax;
    uint64_t *copy_xip;
    size_t n_copy_xip;
    firn_buf scratch;
} cdc;

/* Parses e->copy_snapshot ("xmin:xmax:xip,xip,..."), if any, into c. */
static firn_rc parse_copy_snapshot(cdc *c, firn_err *err)
{
    const char *s = c->e->copy_snapshot;
    if (!s)
        return FIRN_OK;
    const char *a = strchr(s, ':');
    const char *b = a ? strchr(a + 1, ':') : NULL;
    if (!b)
        return firn_err_set(err, FIRN_ERR_PARSE, "invalid snapshot \"%s\"", s);
    FIRN_TRY(firn_parse_u64(s, (size_t)(a - s), &c->copy_xmin, err));
    FIRN_TRY(firn_parse_u64(a + 1, (size_t)(b - a - 1), &c->copy_xmax, err));
    for (const char *p = b + 1; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        uint64_t v = 0;
        FIRN_TRY(firn_parse_u64(p, len, &v, err));
        c->copy_xip = firn_reallocarray(c->copy_xip, c->n_copy_xip + 1, sizeof(uint64_t));
        c->copy_xip[c->n_copy_xip++] = v;
        p = end ? end + 1 : p + len;
    }
    c->have_copy = true;
    return FIRN_OK;
}

/* True when transaction xid (32 bits, as the stream gives it) is visible in this run's copy
 * outside the slot's snapshot: its changes are in the tables that copy took. The epoch is the
 * one that puts xid nearest the snapshot's xmax. */
static bool in_copy(const cdc *c, uint32_t xid)
{
    if (!c->have_copy)
        return false;
    uint64_t full = (c->copy_xmax & ~(uint64_t)0xffffffffu) | xid;
    if (full > c->copy_xmax + ((uint64_t)1 << 31) && full >= ((uint64_t)1 << 32))
        full -= (uint64_t)1 << 32;
    if (full < c->copy_xmin)
        return true;
    if (full >= c->copy_xmax)
        return false;
    for (size_t i = 0; i < c->n_copy_xip; i++) {
        if (c->copy_xip[i] == full)
            return false;
    }
    return true;
}

static firn__table *table_named(firn__engine *e, const char *ns, const char *name)
{
    for (size_t i = 0; i < e->n_tables; i++) {
        firn__table *t = e->tables[i];
        if (!t->cdc)
            continue;
        if (strcmp(t->pg->schema_name, ns) == 0 && strcmp(t->pg->name, name) == 0)
            return t;
        /* publish_via_partition_root off: leaves are routed to the root's table. */
        for (size_t l = 0; l < t->pg->n_leaves; l++) {
            firn_buf q;
            firn_buf_init(&q, 4 * FIRN_PG_QUOTED_MAX);
            firn_rc rc = firn_pg_ident_append(&q, ns);
            rc = rc ? rc : firn_buf_append_cstr(&q, ".");
            rc = rc ? rc : firn_pg_ident_append(&q, name);
            const bool same = !rc && strcmp(t->pg->leaves[l].qualified, (char *)q.data) == 0;
            firn_buf_deinit(&q);
            if (same)
                return t;
        }
    }
    return NULL;
}

/* How a Relation message found its table. */
typedef enum rel_how {
    REL_NONE = 0, /* no table: placed by the catalog (place_relation) */
    REL_ROOT,     /* the table's own oid */
    REL_LEAF,     /* the oid of a leaf partition of the table */
    REL_NAMED,    /* the table's name or a leaf's (a table dropped and created again) */
} rel_how;

/* The table of a Relation message: the one whose source table (or one of its leaves) has the
 * relid, whatever the message calls it (a rename while streaming; REL_ROOT: the table itself,
 * REL_LEAF: a leaf), else the one of that name (a table dropped and created again keeps its
 * stream). */
static firn__table *table_of_rel(cdc *c, const firn_pgo_rel *rel, rel_how *how)
{
    *how = REL_NONE;
    for (size_t i = 0; i < c->e->n_tables; i++) {
        firn__table *t = c->e->tables[i];
        if (!t->cdc)
            continue;
        if (t->pg->oid == rel->relid) {
            *how = REL_ROOT;
            return t;
        }
        for (size_t l = 0; l < t->pg->n_leaves; l++) {
            if (t->pg->leaves[l].oid == rel->relid) {
                *how = REL_LEAF;
                return t;
            }
        }
    }
    firn__table *t = table_named(c->e, rel->nspname, rel->relname);
    *how = t ? REL_NAMED : REL_NONE;
    return t;
}

static rel_map *rel_find(cdc *c, uint32_t relid)
{
    for (size_t i = 0; i < c->n_rels; i++) {
        if (c->rels[i].relid == relid)
            return &c->rels[i];
    }
    return NULL;
}

static int32_t pg_column_index(const firn_pg_table *pg, const char *name)
{
    for (size_t i = 0; i < pg->n_columns; i++) {
        if (strcmp(pg->columns[i].name, name) == 0)
            return (int32_t)i;
    }
    return -1;
}

/* True when the text values of source type `from` decode exactly as type `to`: a Relation
 * message describing changes made before ALTER COLUMN ... TYPE widened the column, whose table
 * schema this run already evolved (int2 -> int4 -> int8, varchar/bpchar -> text, text ->
 * varchar). Changes stream as text (pc.text_values), so the new type's decoder reads them. */
static bool text_decodes_as(uint32_t from, uint32_t to)
{
    enum { INT8 = 20, INT2 = 21, INT4 = 23, TEXT = 25, BPCHAR = 1042, VARCHAR = 1043 };
    if (from == to)
        return true;
    switch (to) {
    case INT4:
        return from == INT2;
    case INT8:
        return from == INT2 || from == INT4;
    case TEXT:
    case VARCHAR:
        return from == TEXT || from == VARCHAR || from == BPCHAR;
    default:
        return false;
    }
}

/* True when column col of a Relation message has a type the table's column (of source type
 * `have`) has not taken: another type whose text does not decode as `have`, or a numeric whose
 * values a decimal column of `have`'s precision and scale cannot hold (numeric(10,2) ->
 * numeric(14,2)). Other modifiers (varchar(n), timestamp(p)) change no stored type. */
static bool retyped(const firn_pgo_relcol *col, const firn_pg_type *have)
{
    enum { NUMERIC = 1700, VARHDRSZ = 4 };
    if (col->type_oid != have->oid)
        return !text_decodes_as(col->type_oid, have->oid);
    if (col->type_oid != NUMERIC || col->typmod == have->typmod ||
        have->kind != FIRN_PG_KIND_DECIMAL)
        return false;
    if (col->typmod < VARHDRSZ)
        return true; /* unbounded numeric */
    int32_t p = ((col->typmod - VARHDRSZ) >> 16) & 0xffff, s = (col->typmod - VARHDRSZ) & 0xffff;
    return p > have->precision || s != have->scale;
}

/* True when column col of a Relation message differs from the table's column idx: retyped, or
 * an integer narrower than the table's that the source column has now (ALTER ... TYPE int of a
 * bigint column: a narrowing, which the table cannot take). A narrower integer the source no
 * longer has describes changes made before the table was widened: they decode as the wider
 * type. One catalog query, only for those. */
static firn_rc
col_differs(const firn__table *t, const firn_pgo_relcol *col, int32_t idx, bool *out, firn_err *err)
{
    enum { INT8 = 20, INT2 = 21, INT4 = 23 };
    const firn_pg_type *have = t->pg->columns[idx].type;
    *out = retyped(col, have);
    bool narrower = col->type_oid != have->oid && (have->oid == INT8 || have->oid == INT4) &&
                    (col->type_oid == INT2 || col->type_oid == INT4);
    if (*out || !narrower)
        return FIRN_OK;
    char cond[64];
    snprintf(cond, sizeof(cond), "atttypid = %u", (unsigned)col->type_oid);
    return firn__table_column_matches(t, col->name, cond, out, err);
}

/* True when the table keeps a column the source no longer has (dropped since; DESIGN.md
 * "Schema evolution"): its values in changes from before the drop are not written. */
static bool dropped_column(const firn__table *t, const char *name)
{
    for (size_t i = t->pg->n_columns; i < t->schema->n_children; i++) {
        const firn_field *f = t->schema->children[i];
        if (f->meta == FIRN_META_NULL && strcmp(f->name, name) == 0)
            return true;
    }
    return false;
}

/* A required column of the table a Relation message lacks (dropped from the source while
 * streaming: null from then on, so it becomes optional), or -1. */
static int32_t dropped_required(const rel_map *m, const firn_pgo_rel *rel)
{
    const firn__table *t = m->table;
    for (size_t k = 0; k < t->pg->n_columns; k++) {
        if (!t->schema->children[k]->required)
            continue;
        bool has = false;
        for (uint16_t i = 0; i < rel->n_cols && !has; i++)
            has = m->batch_col[i] == (int32_t)k;
        if (!has)
            return (int32_t)k;
    }
    return -1;
}

/* Maps the columns of a Relation message onto the table's source description. *changed: a
 * column the table does not know, or a type it has not taken (an ALTER made while streaming). A
 * column the table kept after the source dropped it before this run is skipped; one added and
 * dropped again is too (never part of the table). */
static firn_rc map_columns(rel_map *m, const firn_pgo_rel *rel, bool *changed, firn_err *err)
{
    *changed = false;
    bool gone = false;
    for (uint16_t i = 0; i < rel->n_cols; i++) {
        int32_t idx = pg_column_index(m->table->pg, rel->cols[i].name);
        if (idx < 0) /* changes from before a rename the table took: the column's old name */
            idx = firn__rename_historic(m->table, rel, rel->cols[i].name);
        m->batch_col[i] = idx;
        if (idx < 0 && (dropped_column(m->table, rel->cols[i].name) ||
                        firn__columns_left_out(m->table, rel->cols[i].name)))
            continue;
        bool exists = true;
        if (idx < 0)
            FIRN_TRY(firn__table_column_matches(m->table, rel->cols[i].name, "NOT attisdropped",
                                                &exists, err));
        if (idx < 0 && !exists) {
            FIRN_LOG(FIRN_LOG_DEBUG, "engine",
                     "column \"%s\" of \"%s.%s\" no longer exists: skipped", rel->cols[i].name,
                     rel->nspname, rel->relname);
            gone = true;
            continue;
        }
        bool differs = idx < 0;
        if (idx >= 0)
            FIRN_TRY(col_differs(m->table, &rel->cols[i], idx, &differs, err));
        *changed |= differs;
    }
    *changed |= dropped_required(m, rel) >= 0;
    /* Gone, or a column of the table renamed twice since (firn__rename_plan tells). */
    bool unplaced = false;
    if (gone && !*changed)
        FIRN_TRY(firn__rename_unplaced(m->table, rel, m->batch_col, &unplaced, err));
    *changed |= unplaced;
    /* Names moved between known columns (a swap) look like no change by name. */
    bool permuted = false;
    if (!*changed)
        FIRN_TRY(firn__rename_permuted(m->table, rel, m->batch_col, &permuted, err));
    *changed |= permuted;
    return FIRN_OK;
}

/* The whole run stops at a schema change firn takes only at the start of a run. */
static firn_rc
stop_run(const firn_pgo_rel *rel, const char *col, const char *why, firn__table *t, firn_err *err)
{
    return firn_err_set(err, FIRN_ERR_SCHEMA,
                        "column \"%s\" of source table \"%s.%s\" %s while streaming; run firn "
                        "sync again to evolve table \"%s\"",
                        col, rel->nspname, rel->relname, why, t->display);
}

/* One column change of a Relation message the table takes in-stream. */
typedef struct col_change {
    int32_t idx;    /* source column retyped, or -1: added */
    int16_t attnum; /* added: its attnum (renames are told by it), 0: unknown */
    const char *name;
    firn_pg_type *type;
    firn_field *field; /* retyped: the new field */
} col_change;

static void changes_free(col_change *ch, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        firn_pg_type_free(ch[i].type);
        firn_field_free(ch[i].field);
    }
    firn_free(ch);
}

static firn_rc flush_table(cdc *c, firn__table *t, firn_err *err);

/* Stops t's stream at an incompatible type change: what it buffered from before is committed,
 * its later changes are skipped, and the slot is not confirmed past the transaction before
 * this one, so the next run reads the change again (DESIGN.md "Schema evolution"). */
static firn_rc halt_table(cdc *c, firn__table *t, firn_err *why, firn_err *err)
{
    if (firn_batch_rows(t->buf) > 0)
        FIRN_TRY(flush_table(c, t, err));
    t->halted = true;
    t->halt_lsn = c->last_end_lsn;
    FIRN_LOG(FIRN_LOG_ERROR, "engine", "%s", why->msg);
    if (!c->e->halt.code)
        c->e->halt = *why;
    return FIRN_OK;
}

/* Resolves the new type of a column a Relation message retypes and checks the table can take
 * it: *out is the change, or NULL after halting the table's stream. */
static firn_rc plan_retype(cdc *c,
                           firn__table *t,
                           const firn_pgo_rel *rel,
                           const firn_pgo_relcol *rc,
                           int32_t idx,
                           col_change *out,
                           bool *halted,
                           firn_err *err)
{
    firn_pg_type *type = NULL;
    FIRN_TRY(firn_pg_type_resolve(c->e->sql, rc->type_oid, rc->typmod, 0, &type, err));
    int32_t next = 1 << 30;
    firn_field *f = firn_pg_type_field(type, 0, rc->name, false, &next);
    const firn_field *old = t->schema->children[idx];
    bool nest = f->type == FIRN_TYPE_STRUCT || f->type == FIRN_TYPE_LIST ||
                f->type == FIRN_TYPE_MAP || old->n_children > 0;
    if (nest || !firn_type_can_promote(old, f)) {
        firn_err why = {0};
        (void)firn__table_incompatible(t, rc->name, old, type->name, f, &why);
        firn_pg_type_free(type);
        firn_field_free(f);
        *halted = true;
        return halt_table(c, t, &why, err);
    }
    for (size_t k = 0; (t->eqdel || t->multiset) && k < t->n_key; k++) {
        /* equality deletes, or a multiset's row encoding: taken at the next start */
        if (t->key_cols[k] == (uint32_t)idx) {
            firn_pg_type_free(type);
            firn_field_free(f);
            return stop_run(rel, rc->name, "changed type", t, err);
        }
    }
    *out = (col_change){idx, 0, rc->name, type, f};
    return FIRN_OK;
}

/* pg_attribute.attndims of source column `name` of t, 0 when unknown. */
static firn_rc
column_ndims(cdc *c, const firn__table *t, const char *name, int32_t *out, firn_err *err)
{
    *out = 0;
    PGconn *pq = firn_pg_conn_pq(c->e->sql);
    char oid[16];
    snprintf(oid, sizeof(oid), "%u", (unsigned)t->pg->oid);
    const char *params[2] = {oid, name};
    PGresult *r = PQexecParams(pq,
                               "SELECT attndims FROM pg_attribute WHERE attrelid = $1::oid "
                               "AND attname = $2 AND attnum > 0 AND NOT attisdropped",
                               2, NULL, params, NULL, NULL, 0);
    firn_rc rc = FIRN_OK;
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        rc = firn_err_set(err, FIRN_ERR_SOURCE, "could not look up column \"%s\" of %s: %s", name,
                          t->pg->qualified, PQerrorMessage(pq));
    else if (PQntuples(r) > 0)
        rc = firn_parse_i32(PQgetvalue(r, 0, 0), (size_t)PQgetlength(r, 0, 0), out, err);
    PQclear(r);
    return rc;
}

/* A column a Relation message adds: taken in-stream, except one with a DEFAULT of a table
 * with rows that can be copied again (full_refresh_cdc): PostgreSQL gave the rows already there
 * the default without a change in the WAL, so the run stops and the next one copies the table
 * (docs/cdc.md "Schema changes"); and a column of a table keyed by every column. */
static firn_rc plan_add(cdc *c,
                        firn__table *t,
                        const firn_pgo_rel *rel,
                        const firn_pgo_relcol *rc,
                        col_change *out,
                        firn_err *err)
{
    bool has_default = false;
    FIRN_TRY(
        firn__table_column_matches(t, rc->name, "atthasdef OR atthasmissing", &has_default, err));
    if (has_default && firn_table_metadata_current_snapshot(t->cat.metadata) &&
        t->stream->sync_mode == FIRN_SYNC_FULL_REFRESH_CDC)
        return firn_err_set(err, FIRN_ERR_SCHEMA,
                            "column \"%s\" was added to source table \"%s.%s\" with a DEFAULT "
                            "while streaming, which PostgreSQL gives the existing rows without a "
                            "change in the WAL; run firn sync again: it copies table \"%s\" "
                            "again with the column",
                            rc->name, rel->nspname, rel->relname, t->display);
    if (t->upsert && t->pg->n_key == 0)
        return stop_run(rel, rc->name, "was added", t, err);
    if (has_default)
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "column \"%s\" was added to source table %s with a DEFAULT: rows of table \"%s\" "
                 "from before stay null there until they change (sync mode %s cannot copy the "
                 "table again)",
                 rc->name, t->pg->qualified, t->display, firn_sync_mode_name(t->stream->sync_mode));
    int32_t ndims = 0;
    FIRN_TRY(column_ndims(c, t, rc->name, &ndims, err));
    firn_pg_type *type = NULL;
    FIRN_TRY(firn_pg_type_resolve(c->e->sql, rc->type_oid, rc->typmod, ndims, &type, err));
    int16_t attnum = 0;
    firn_rc r = firn__rename_attnum(t, rc->name, &attnum, err);
    *out = (col_change){-1, attnum, rc->name, type, NULL};
    return r;
}

/* A Relation message that adds columns or widens types while streaming: the table commits
 * what it buffered (rows of the old description, in parts when inside a transaction), evolves
 * its schema through the catalog and rebuilds its buffer; the map is built again. A type the
 * table cannot take stops this table's stream only (halt_table). */
/* Required columns the message lacks (dropped from the source) become optional; true when
 * there was one. */
static bool relax_dropped(rel_map *m, const firn_pgo_rel *rel)
{
    firn__table *t = m->table;
    bool relaxed = false;
    for (int32_t k = dropped_required(m, rel); k >= 0; k = dropped_required(m, rel)) {
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "table \"%s\": column \"%s\" dropped from the source while streaming: null "
                 "from now on",
                 t->display, t->pg->columns[k].name);
        t->schema->children[k]->required = false;
        relaxed = true;
    }
    return relaxed;
}

/* Renamed source columns take their new names in the table's description and are queued for
 * the schema commit, which renames the Iceberg fields (same ids: the rows from before read
 * under the new name). */
static void
apply_renames(firn__table *t, const firn_pgo_rel *rel, const firn__colrename *ren, size_t n)
{
    for (size_t r = 0; r < n; r++) {
        firn_pg_column *pc = &t->pg->columns[ren[r].idx];
        firn_field *f = t->schema->children[ren[r].idx];
        const char *to = rel->cols[ren[r].rel_col].name;
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "table \"%s\": column \"%s\" renamed to \"%s\" on the source while streaming: "
                 "renamed in the table (field id %d)",
                 t->display, pc->name, to, (int)f->id);
        firn_strlist_push(&t->rename_from, pc->name);
        firn_strlist_push(&t->rename_to, to);
        firn_free(pc->name);
        pc->name = firn_strdup(to);
        if (strcmp(f->name, to) != 0) { /* a retype gave the field the new name already */
            firn_free(f->name);
            f->name = firn_strdup(to);
        }
    }
}

static firn_rc evolve_live(cdc *c, rel_map *m, const firn_pgo_rel *rel, firn_err *err)
{
    firn__table *t = m->table;
    col_change *ch = firn_calloc(rel->n_cols ? rel->n_cols : 1, sizeof(*ch));
    firn__colrename *ren = firn_calloc(rel->n_cols ? rel->n_cols : 1, sizeof(*ren));
    size_t n = 0, n_ren = 0;
    bool halted = false;
    firn_err why = {0};
    firn_rc rc = firn__rename_plan(t, rel, m->batch_col, ren, &n_ren, &why, &halted, err);
    if (rc == FIRN_OK && halted && t->copied) {
        /* The table was copied in this run with a schema read after the column took its
         * current name: the message describes changes from before, which the copy holds. */
        m->stale = true;
        FIRN_LOG(FIRN_LOG_DEBUG, "engine", "table \"%s\": %s: changes older than its copy, skipped",
                 t->display, why.msg);
        n_ren = 0;
    } else if (rc == FIRN_OK && halted) {
        rc = halt_table(c, t, &why, err);
    }
    for (uint16_t i = 0; rc == FIRN_OK && !halted && i < rel->n_cols; i++) {
        const firn_pgo_relcol *col = &rel->cols[i];
        int32_t idx = m->batch_col[i];
        if (idx < 0 && !dropped_column(t, col->name) && !firn__columns_left_out(t, col->name)) {
            bool exists = true;
            rc = firn__table_column_matches(t, col->name, "NOT attisdropped", &exists, err);
            if (rc == FIRN_OK && exists)
                rc = plan_add(c, t, rel, col, &ch[n++], err);
            continue;
        }
        bool differs = false;
        if (idx >= 0)
            rc = col_differs(t, col, idx, &differs, err);
        if (rc == FIRN_OK && differs) {
            rc = plan_retype(c, t, rel, col, idx, &ch[n], &halted, err);
            n += rc == FIRN_OK && !halted;
        }
    }
    int32_t relax = rc == FIRN_OK && !halted ? dropped_required(m, rel) : -1;
    bool relaxed = false;
    if (relax >= 0 && t->upsert && t->pg->n_key == 0)
        rc = stop_run(rel, t->pg->columns[relax].name, "was dropped", t, err);
    if (rc == FIRN_OK && !halted && firn_batch_rows(t->buf) > 0)
        rc = flush_table(c, t, err); /* rows of the old description */
    if (rc == FIRN_OK && relax >= 0)
        relaxed = relax_dropped(m, rel);
    for (size_t k = 0; rc == FIRN_OK && !halted && k < n; k++) {
        FIRN_LOG(FIRN_LOG_INFO, "engine", "table \"%s\": column \"%s\" %s %s while streaming",
                 t->display, ch[k].name, ch[k].idx < 0 ? "added as" : "now", ch[k].type->name);
        if (ch[k].idx < 0) {
            firn__table_column_add(t, ch[k].name, ch[k].type);
            t->pg->columns[t->pg->n_columns - 1].attnum = ch[k].attnum;
        } else
            firn__table_column_retype(t, (size_t)ch[k].idx, ch[k].type, ch[k].field);
        ch[k].type = NULL;
        ch[k].field = NULL;
    }
    if (rc == FIRN_OK && !halted)
        apply_renames(t, rel, ren, n_ren);
    if (rc == FIRN_OK && !halted && (n > 0 || relaxed || n_ren > 0))
        rc = firn__table_schema_apply(t, err);
    changes_free(ch, n);
    firn_free(ren);
    return rc;
}

/* Takes the differences of a Relation message from the table into the table (evolve_live)
 * and maps its columns again. */
static firn_rc settle_relation(cdc *c, rel_map *m, const firn_pgo_rel *rel, firn_err *err)
{
    firn__table *t = m->table;
    m->mismatch = false;
    FIRN_TRY(evolve_live(c, m, rel, err));
    if (t->halted || m->stale)
        return FIRN_OK;
    bool changed = false;
    FIRN_TRY(map_columns(m, rel, &changed, err));
    if (changed)
        return firn_err_set(err, FIRN_ERR_INTERNAL,
                            "relation \"%s.%s\" still differs from table \"%s\" after evolution",
                            rel->nspname, rel->relname, t->display);
    return FIRN_OK;
}

/* The line of a stream stopped at a partition whose rows PostgreSQL never sent as changes. */
static void preattached_why(const firn__table *t, const char *leaf, firn_err *why)
{
    firn_err_set(why, FIRN_ERR_SCHEMA,
                 "partition %s was attached to table %s with rows it already held, which "
                 "PostgreSQL does not send as changes: stream stopped, the slot keeps its "
                 "changes; drop table \"%s\" and run firn sync to copy it again",
                 leaf, t->pg->qualified, t->display);
}

/* A Relation message of a relation that is not one of the streams' tables (REL_NONE) or a leaf
 * partition of one (REL_LEAF, m->table): where the catalog places it now. A partition created
 * or attached while streaming (at any level under a streamed partitioned table) becomes a leaf
 * of that table, so its changes go to the table's Iceberg table, unless it held rows when it
 * was attached (PostgreSQL sends no change for those): then the table's stream stops. A known
 * leaf that is no longer under its table (detached) takes no more changes, with a warning.
 * Anything else is skipped with one line saying why (docs/cdc.md "Partitioned tables"). */
static firn_rc place_relation(cdc *c, rel_map *m, const firn_pgo_rel *rel, firn_err *err)
{
    firn__engine *e = c->e;
    firn__table *had = m->table;
    uint32_t *roots = firn_calloc(e->n_tables ? e->n_tables : 1, sizeof(*roots));
    firn__table **of = firn_calloc(e->n_tables ? e->n_tables : 1, sizeof(*of));
    size_t n = 0;
    for (size_t i = 0; i < e->n_tables; i++) {
        firn__table *t = e->tables[i];
        if (t->cdc && !t->missing && t->pg->relkind == 'p') {
            roots[n] = t->pg->oid;
            of[n++] = t;
        }
    }
    firn_pg_place pl;
    firn_rc rc =
        firn_pg_leaf_place(e->sql, rel->relid, roots, n, e->cfg->source.publication, &pl, err);
    firn__table *t = rc == FIRN_OK && pl.root != SIZE_MAX ? of[pl.root] : NULL;
    firn_free(roots);
    firn_free(of);
    if (rc)
        return rc;
    m->table = t;
    if (t && t == had) {
        firn_free(pl.qualified);
        return FIRN_OK;
    }
    char name[2 * FIRN_PG_QUOTED_MAX + 2];
    snprintf(name, sizeof(name), "%s", pl.qualified ? pl.qualified : "");
    if (!pl.exists) {
        char ns[FIRN_PG_QUOTED_MAX], rn[FIRN_PG_QUOTED_MAX];
        snprintf(name, sizeof(name), "%s.%s", firn_pg_ident_text(ns, sizeof(ns), rel->nspname),
                 firn_pg_ident_text(rn, sizeof(rn), rel->relname));
    }
    firn_free(pl.qualified);
    if (had && !m->noted)
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "partition %s is no longer a partition of table %s (detached or dropped): its "
                 "changes from now on are not written to table \"%s\", and the rows it held "
                 "stay there; to remove them, drop table \"%s\" and run firn sync to copy it "
                 "again",
                 name, had->pg->qualified, had->display, had->display);
    if (t && !t->halted) {
        bool pre = false;
        FIRN_TRY(firn_pg_leaf_preattached(e->sql, rel->relid, name, t->pg->oid, &pre, err));
        if (pre) {
            firn_err why = {0};
            preattached_why(t, name, &why);
            m->noted = true;
            return halt_table(c, t, &why, err);
        }
        firn_pg_table_add_leaf(t->pg, rel->relid, name);
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "partition %s of table %s is new since the start of the run: its changes go to "
                 "table \"%s\"",
                 name, t->pg->qualified, t->display);
        m->noted = false;
        return FIRN_OK;
    }
    if (t || m->noted || had) {
        m->noted = true;
        return FIRN_OK;
    }
    m->noted = true;
    const char *pub = e->cfg->source.publication;
    if (!pl.exists)
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "changes of relation %s (oid %u), which no longer exists, are skipped: firn "
                 "cannot tell which table they belong to (a partition dropped since: its rows "
                 "left its table with it)",
                 name, (unsigned)rel->relid);
    else if (pl.published)
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "changes of table %s are skipped: publication \"%s\" carries it but no stream "
                 "takes it",
                 name, pub ? pub : "");
    else
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "changes of table %s, which publication \"%s\" no longer carries, are skipped "
                 "(a partition detached or a table taken out of the publication since)",
                 name, pub ? pub : "");
    return FIRN_OK;
}

/* A Relation message: (re)build the column map, taking an added column or a widened type into
 * the table first (evolve_live). Relation messages of changes made before the schema this run
 * started with are mapped too: a dropped column is skipped, a widened one decodes as its new
 * type; those of changes the table already holds (a table copied again after an incompatible
 * change) are not evolved: the changes are skipped (m->mismatch). */
static firn_rc on_relation(cdc *c, const firn_pgo_event *ev, firn_err *err)
{
    const firn_pgo_rel *rel = ev->rel;
    rel_map *m = rel_find(c, rel->relid);
    if (!m) {
        c->rels = firn_reallocarray(c->rels, c->n_rels + 1, sizeof(*c->rels));
        m = &c->rels[c->n_rels++];
        memset(m, 0, sizeof(*m));
        m->relid = rel->relid;
    }
    firn_free(m->batch_col);
    m->version = rel->version;
    rel_how how = REL_NONE;
    m->table = table_of_rel(c, rel, &how);
    m->n_cols = rel->n_cols;
    m->batch_col = firn_calloc(rel->n_cols ? rel->n_cols : 1, sizeof(int32_t));
    m->mismatch = false;
    if (how == REL_NONE || how == REL_LEAF)
        FIRN_TRY(place_relation(c, m, rel, err));
    if (!m->table || m->table->halted)
        return FIRN_OK;
    firn__table *t = m->table;
    if (how == REL_ROOT) {
        /* Its changes stop here, before any is read under a name the stream no longer has: the
         * next run takes them under the name the remedy gives (docs/cdc.md). Also in a
         * transaction the table holds: no other Relation message may come before its next
         * change. */
        bool renamed = false;
        firn_err why = {0};
        FIRN_TRY(firn__rename_check_table(t, rel->nspname, rel->relname, &renamed, &why, err));
        if (renamed)
            return halt_table(c, t, &why, err);
    }
    m->stale = false;
    for (size_t k = 0; t->copied && k < t->default_added.count; k++) {
        bool has = false;
        for (uint16_t i = 0; i < rel->n_cols && !has; i++)
            has = strcmp(rel->cols[i].name, t->default_added.items[k]) == 0;
        m->stale |= !has;
    }
    bool changed = false;
    FIRN_TRY(map_columns(m, rel, &changed, err));
    /* Described changes the table holds (a copy of this run, a transaction at or below its
     * position): evolved, if ever, at the first change it does not hold (on_change). */
    m->mismatch = changed && !t->halted;
    if (m->mismatch && !m->stale && !(c->in_txn && c->txn_commit_lsn <= t->committed_lsn))
        return settle_relation(c, m, rel, err);
    return FIRN_OK;
}
static firn_rc decode_value(firn__table *t,
                            const firn_pg_column *pc,
                            const firn_pgo_col *col,
                            firn_column *out,
                            firn_err *err)
{
    const firn_pg_decode_stats before = t->stats;
    firn_rc rc;
    switch (col->kind) {
    case FIRN_PGO_COL_NULL:
        firn_column_append_null(out);
        return FIRN_OK;
    case FIRN_PGO_COL_BINARY:
        rc = firn_pg_value_decode(pc->type, col->value.ptr, col->value.len, out, &t->stats, err);
        break;
    case FIRN_PGO_COL_TEXT:
        rc = firn_pg_value_decode_text(pc->type, col->value.ptr, col->value.len, out, &t->stats,
                                       err);
        break;
    default:
        return firn_err_set(err, FIRN_ERR_INTERNAL, "unresolved unchanged value of column \"%s\"",
                            pc->name);
    }
    if (rc == FIRN_OK)
        firn__stats_note_replaced(t, &before, pc->name);
    return rc;
}

/* Appends the key of the row being built (slot `row` of the key columns, appended but not ended)
 * to out in firn_batch_key_encode's encoding, which reads complete rows only. */
static firn_rc pending_key(firn__table *t, size_t row, firn_buf *out)
{
    for (size_t k = 0; k < t->n_key; k++) {
        const firn_column *c = firn_batch_column(t->buf, t->key_cols[k]);
        if (!firn_column_is_valid(c, row)) {
            FIRN_TRY(firn_wr_u8(out, 0));
            continue;
        }
        FIRN_TRY(firn_wr_u8(out, 1));
        const uint32_t *off = firn_column_offsets(c);
        if (off) {
            uint32_t len = off[row + 1] - off[row];
            FIRN_TRY(firn_wr_le32(out, len));
            FIRN_TRY(firn_buf_append(out, firn_column_data(c) + off[row], len));
        } else {
            size_t width = firn_type_value_size(firn_column_field(c));
            const uint8_t *values = firn_column_values(c);
            FIRN_TRY(firn_buf_append(out, values + row * width, width));
        }
    }
    return FIRN_OK;
}

/* Index of the last buffered row with the key of the row being built (row `row`), or -1 when
 * there is none or its last change is a delete. */
static long prev_image(firn__table *t, size_t row, firn_buf *key)
{
    firn_buf_reset(key);
    if (pending_key(t, row, key))
        return -1;
    firn_buf other;
    firn_buf_init(&other, 1 << 20);
    long found = -1;
    for (size_t r = row; r-- > 0;) {
        firn_buf_reset(&other);
        if (firn_batch_key_encode(t->buf, r, t->key_cols, t->n_key, &other) == FIRN_OK &&
            firn_slice_eq((firn_slice){key->data, key->len}, (firn_slice){other.data, other.len})) {
            if (firn_batch_op(t->buf, r) != FIRN_OP_DELETE)
                found = (long)r;
            break;
        }
    }
    firn_buf_deinit(&other);
    return found;
}

/* Fetches the current values of unchanged TOAST columns by key (docs/cdc.md): the row as it is
 * now, which a later change in the stream may still replace. *gone: the key no longer exists
 * (nulls appended); a later change in the stream deletes or re-keys the row. */
static firn_rc fetch_unchanged(cdc *c,
                               rel_map *m,
                               const firn_pgo_rel *rel,
                               const firn_pgo_tuple *tup,
                               firn_column **cols,
                               bool *gone,
                               firn_err *err)
{
    firn__table *t = m->table;
    firn_buf sql;
    firn_buf_init(&sql, 1 << 20);
    uint16_t key_idx[32];
    size_t n_keys = 0;
    firn_rc rc = firn_pgo_toast_fetch_sql(&sql, rel, tup, key_idx, 32, &n_keys, err);
    /* libpq reads text parameters up to their NUL (lengths count for binary ones only), and the
     * values in the message are not terminated: copy them. */
    char *copies[32] = {NULL};
    const char *values[32];
    int lengths[32], formats[32];
    for (size_t k = 0; rc == FIRN_OK && k < n_keys; k++) {
        const firn_pgo_col *kc = &tup->cols[key_idx[k]];
        copies[k] = firn_strndup((const char *)kc->value.ptr, kc->value.len);
        values[k] = kc->kind == FIRN_PGO_COL_BINARY ? (const char *)kc->value.ptr : copies[k];
        lengths[k] = (int)kc->value.len;
        formats[k] = kc->kind == FIRN_PGO_COL_BINARY ? 1 : 0;
    }
    PGresult *res = NULL;
    if (rc == FIRN_OK) {
        PGconn *pq = firn_pg_conn_pq(c->e->sql);
        res = PQexecParams(pq, (const char *)sql.data, (int)n_keys, NULL, values, lengths, formats,
                           0);
        if (PQresultStatus(res) != PGRES_TUPLES_OK)
            rc = firn_err_set(err, FIRN_ERR_SOURCE,
                              "could not fetch unchanged values of table %s: %s", t->pg->qualified,
                              PQerrorMessage(pq));
    }
    for (size_t k = 0; k < n_keys; k++)
        firn_free(copies[k]);
    *gone = rc == FIRN_OK && PQntuples(res) == 0;
    int field = 0;
    for (uint16_t i = 0; rc == FIRN_OK && i < tup->n_cols; i++) {
        if (tup->cols[i].kind != FIRN_PGO_COL_UNCHANGED)
            continue;
        if (m->batch_col[i] < 0) { /* dropped from the source since */
            field++;
            continue;
        }
        const firn_pg_column *pc = &t->pg->columns[m->batch_col[i]];
        if (PQntuples(res) == 0 || PQgetisnull(res, 0, field)) {
            firn_column_append_null(cols[i]);
        } else {
            const char *v = PQgetvalue(res, 0, field);
            const firn_pg_decode_stats before = t->stats;
            rc = firn_pg_value_decode_text(pc->type, (const uint8_t *)v,
                                           (size_t)PQgetlength(res, 0, field), cols[i], &t->stats,
                                           err);
            if (rc == FIRN_OK)
                firn__stats_note_replaced(t, &before, pc->name);
        }
        field++;
    }
    PQclear(res);
    firn_buf_deinit(&sql);
    return rc;
}

/* Appends one tuple as a row of the table's buffer. Columns the tuple lacks are null. */
static firn_rc append_tuple(
    cdc *c, rel_map *m, const firn_pgo_rel *rel, firn_pgo_tuple *tup, firn_op op, firn_err *err)
{
    firn__table *t = m->table;
    /* PostgreSQL's own limit (MaxTupleAttributeNumber): every table it can hold fits. */
    enum { MAX_TUPLE_COLUMNS = 1664 };
    firn_column *cols[MAX_TUPLE_COLUMNS];
    size_t n = tup->n_cols < m->n_cols ? tup->n_cols : m->n_cols;
    if (n > MAX_TUPLE_COLUMNS || t->pg->n_columns > MAX_TUPLE_COLUMNS)
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "table \"%s\" has more than %d columns",
                            t->display, MAX_TUPLE_COLUMNS);
    bool seen[MAX_TUPLE_COLUMNS];
    memset(seen, 0, t->pg->n_columns); /* only the columns read below, not 1664 per row */
    bool unchanged = false;
    for (size_t i = 0; i < n; i++) {
        if (m->batch_col[i] < 0) { /* dropped from the source since: not written */
            cols[i] = NULL;
            tup->cols[i].kind = FIRN_PGO_COL_NULL; /* nor fetched when unchanged */
            continue;
        }
        cols[i] = firn_batch_column(t->buf, (size_t)m->batch_col[i]);
        seen[m->batch_col[i]] = true;
        if (tup->cols[i].kind == FIRN_PGO_COL_UNCHANGED) {
            unchanged = true;
            continue;
        }
        const firn_pg_column *pc = &t->pg->columns[m->batch_col[i]];
        FIRN_TRY(decode_value(t, pc, &tup->cols[i], cols[i], err));
    }
    for (size_t k = 0; k < t->pg->n_columns; k++) {
        if (!seen[k])
            firn_column_append_null(firn_batch_column(t->buf, k));
    }
    if (unchanged) {
        /* Key columns are decoded by now: look for an earlier image in this buffer. */
        long prev = t->upsert ? prev_image(t, firn_batch_rows(t->buf), &c->scratch) : -1;
        if (prev >= 0) {
            for (size_t i = 0; i < n; i++) {
                if (cols[i] && tup->cols[i].kind == FIRN_PGO_COL_UNCHANGED)
                    firn_column_append_from(cols[i], cols[i], (size_t)prev);
            }
        } else {
            bool gone = false;
            FIRN_TRY(fetch_unchanged(c, m, rel, tup, cols, &gone, err));
            /* The row was deleted or re-keyed since: a later change in the stream says so.
             * Until then it counts as deleted, never as a row with nulls for its values (a
             * NOT NULL column would stop every run at this change). */
            if (gone && t->upsert)
                op = FIRN_OP_DELETE;
        }
    }
    return firn_batch_end_row(t->buf, op, c->txn_commit_lsn, err);
}

static size_t buffered_bytes(const firn__engine *e)
{
    size_t bytes = 0;
    for (size_t i = 0; i < e->n_tables; i++)
        bytes += firn_batch_bytes(e->tables[i]->buf);
    return bytes;
}

static firn_rc flush_all(cdc *c, firn_err *err);

/* Backpressure: a transaction larger than the memory budget is committed in parts (its rows
 * become visible before its end; the position stays at the last whole transaction, and each
 * part records how many of the transaction's changes of the table it holds, so a replay after a
 * crash skips exactly those, in append-mode tables too). A part is a quarter of the limit: its
 * flush holds the buffer, a row group of encoded data and the key work beside it, and the
 * process stays within the limit (tests/interop/test_cdc_big_txn.py). */
static firn_rc check_memory(cdc *c, firn_err *err)
{
    uint64_t limit = c->e->cfg->destination.memory_limit_bytes;
    if (!limit || buffered_bytes(c->e) < limit / 4)
        return FIRN_OK;
    FIRN_LOG(FIRN_LOG_WARN, "engine",
             "transaction at %X/%X exceeds a quarter of the memory limit (%llu bytes): committing "
             "it in parts",
             (unsigned)(c->txn_commit_lsn >> 32), (unsigned)c->txn_commit_lsn,
             (unsigned long long)limit);
    return flush_all(c, err);
}

/* Counts a change of t in the transaction being read; true when an earlier run committed it
 * in a part of this transaction (FIRN_SUMMARY_PART_CHANGES): the stream replays a transaction's
 * changes in the same order, so the first part_changes of them are exactly those. */
static bool part_committed(cdc *c, firn__table *t)
{
    uint64_t nth = t->txn_changes++;
    return c->txn_commit_lsn == t->part_lsn && nth < t->part_changes;
}

/* Failures of one table's data, not of the stream or the process: the table is quarantined
 * and the others go on. */
static bool table_failure(firn_rc rc)
{
    return rc == FIRN_ERR_PARSE || rc == FIRN_ERR_INVALID || rc == FIRN_ERR_UNSUPPORTED ||
           rc == FIRN_ERR_SCHEMA;
}

/* Stops t's stream alone after a change it cannot take (issue 24 item 5): what it buffered is
 * dropped, not committed (the change that failed may be half in the buffer), the slot is held
 * at the end of the last transaction before its first buffered change, so the next run reads
 * them all again, and the run ends with the error after the other tables (exit 3; --follow
 * streams the others on). */
static firn_rc quarantine_table(cdc *c, firn__table *t, firn_err *why)
{
    uint64_t at = firn_batch_rows(t->buf) ? t->hold_lsn : c->last_end_lsn;
    firn_batch_reset(t->buf);
    t->halted = true;
    t->halt_lsn = at;
    firn_free(t->stop_reason);
    t->stop_reason = firn_strdup(why->msg);
    FIRN_LOG(FIRN_LOG_ERROR, "engine",
             "table \"%s\" stopped: %s; the other tables stream on, and the slot is held at %X/%X "
             "for this one, so PostgreSQL keeps its WAL from there until a run can take the "
             "change (fix the cause, or drop the stream and its table)",
             t->display, why->msg, (unsigned)(at >> 32), (unsigned)at);
    if (!c->e->halt.code)
        c->e->halt = *why;
    return FIRN_OK;
}

static firn_rc on_change(cdc *c, const firn_pgo_event *ev, firn_err *err)
{
    firn_pgo_msg *msg = ev->msg;
    rel_map *m = rel_find(c, msg->change.relid);
    if (!m || !m->table)
        return FIRN_OK;
    firn__table *t = m->table;
    if (c->txn_commit_lsn <= t->committed_lsn || (t->copied && c->txn_in_copy))
        return FIRN_OK; /* already in the table (exactly-once on restart; this run's copy) */
    /* The first change the table lacks of a relation described in a transaction it holds:
     * evolved now, before this change is counted (a flush of the rows before is a part). */
    if (m->mismatch && !m->stale && !t->halted)
        FIRN_TRY(settle_relation(c, m, ev->rel, err));
    if (part_committed(c, t))
        return FIRN_OK; /* committed by an earlier part of this transaction */
    if (m->stale || t->halted)
        return FIRN_OK; /* older than this run's copy of the table, which holds it; or its
                           stream stopped at a schema change (read again by the next run) */
    firn__fault_point("mid-txn");
    if (firn_batch_rows(t->buf) == 0)
        t->hold_lsn = c->last_end_lsn; /* this table now holds back the acknowledgement */
    t->changes_read[ev->type == FIRN_PGO_INSERT   ? FIRN__OP_INSERT
                    : ev->type == FIRN_PGO_UPDATE ? FIRN__OP_UPDATE
                                                  : FIRN__OP_DELETE]++;
    firn_batch_set_times(t->buf, c->txn_commit_us, INT64_MIN);
    firn_rc rc = FIRN_OK;
    if (firn__fault_decode(t->stream->namespace, t->stream->name))
        rc = firn_err_set(err, FIRN_ERR_PARSE, "test-only decode failure (FIRN_TEST_DECODE_FAIL)");
    switch (rc ? FIRN_PGO_BEGIN : ev->type) {
    case FIRN_PGO_INSERT:
        rc = append_tuple(c, m, ev->rel, &msg->change.new_tuple, FIRN_OP_INSERT, err);
        break;
    case FIRN_PGO_UPDATE:
        if (msg->change.old_kind == 'O')
            (void)firn_pgo_toast_from_old(msg);
        /* A key change arrives with the old key: delete it, then write the new row. */
        if (t->upsert && msg->change.old_kind != 0)
            rc = append_tuple(c, m, ev->rel, &msg->change.old_tuple, FIRN_OP_DELETE, err);
        if (rc == FIRN_OK)
            rc = append_tuple(c, m, ev->rel, &msg->change.new_tuple, FIRN_OP_UPDATE, err);
        break;
    case FIRN_PGO_DELETE:
        rc = append_tuple(c, m, ev->rel, &msg->change.old_tuple, FIRN_OP_DELETE, err);
        break;
    default:
        break;
    }
    if (rc == FIRN_OK && firn_batch_rows(t->buf) % 4096 == 0)
        rc = check_memory(c, err);
    else if (rc)
        firn_err_context(err, "while decoding a change of table %s at LSN %X/%X", t->pg->qualified,
                         (unsigned)(c->txn_commit_lsn >> 32), (unsigned)c->txn_commit_lsn);
    if (rc && table_failure(rc)) {
        firn_err why = *err;
        why.code = rc;
        firn_err_clear(err);
        return quarantine_table(c, t, &why);
    }
    return rc;
}

/* Acknowledges what every table has committed: the end of the last transaction read, held
 * back to the first transaction some table still buffers (tables commit at their own
 * cadence), and saves the state. */
static firn_rc acknowledge(cdc *c, firn_err *err)
{
    firn__engine *e = c->e;
    uint64_t ack = c->last_end_lsn;
    for (size_t i = 0; i < e->n_tables; i++) {
        const firn__table *t = e->tables[i];
        if (t->cdc && firn_batch_rows(t->buf) && t->hold_lsn < ack)
            ack = t->hold_lsn;
        if (t->cdc && t->halted && t->halt_lsn < ack)
            ack = t->halt_lsn;
    }
    firn__fault_point("before-ack");
    if (ack > c->flushed_end_lsn) {
        c->flushed_end_lsn = ack;
        firn_pgo_stream_confirm(c->s, ack);
        e->state.global_lsn = ack;
    }
    return firn__engine_save_state(e, err);
}

static int64_t table_interval_ms(const cdc *c, const firn__table *t)
{
    const firn_sync_options *o = c->e->opts;
    return o && o->commit_interval_ms ? o->commit_interval_ms : t->stream->commit.interval_ms;
}

/* The interval counts from the start of a flush, so commits come every interval (not every
 * interval plus the time a flush takes) while flushes are short; a flush longer than half the
 * interval still leaves half an interval of reading before the next one (reading_time, once
 * every due table has flushed), so slow flushes cannot shrink each commit to a transaction or
 * two. */
static firn_rc flush_table(cdc *c, firn__table *t, firn_err *err)
{
    const int64_t started = firn_monotonic_ns();
    if (c->in_txn && t->txn_changes > 0 && firn_batch_rows(t->buf) > 0) {
        /* A part of the transaction being read: its commit says how much of it is in. */
        t->part_lsn = c->txn_commit_lsn;
        t->part_changes = t->txn_changes;
    }
    t->buf_free = true;
    firn_rc rc = firn__table_flush(t, c->done_commit_lsn, err);
    t->buf_free = false;
    if (rc)
        return rc;
    t->flush_ns = started;
    t->txn_rows0 = 0;
    return FIRN_OK;
}

/* After the tables flushed since round_ns (one call of flush_due or flush_all): each gets at
 * least half its interval of reading from now on. Counted per table at the end of its own
 * flush, the tables flushed before a slow one would be overdue again after one transaction. */
static void reading_time(cdc *c, int64_t round_ns)
{
    const int64_t now = firn_monotonic_ns();
    for (size_t i = 0; i < c->e->n_tables; i++) {
        firn__table *t = c->e->tables[i];
        if (!t->cdc || t->flush_ns < round_ns)
            continue;
        const int64_t floor = now - table_interval_ms(c, t) * 1000000 / 2;
        if (t->flush_ns < floor)
            t->flush_ns = floor;
    }
}

/* Commits every table's buffer at the current transaction boundary, then acknowledges. */
static firn_rc flush_all(cdc *c, firn_err *err)
{
    firn__engine *e = c->e;
    const int64_t round_ns = firn_monotonic_ns();
    for (size_t i = 0; i < e->n_tables; i++) {
        firn__table *t = e->tables[i];
        if (t->cdc)
            FIRN_TRY(flush_table(c, t, err));
    }
    firn_rc rc = acknowledge(c, err);
    reading_time(c, round_ns);
    return rc;
}

/* t's commit policy (its stream's, which defaults to the destination's; the command line's
 * overrides win): due when it buffers max_bytes or holds rows older than the interval. */
static bool table_due(const cdc *c, const firn__table *t, int64_t now_ns)
{
    const firn_sync_options *o = c->e->opts;
    const firn_commit_policy *p = &t->stream->commit;
    int64_t interval_ms = table_interval_ms(c, t);
    uint64_t max_bytes = o && o->commit_max_bytes ? o->commit_max_bytes : p->max_bytes;
    if (!t->cdc || firn_batch_rows(t->buf) == 0)
        return false;
    if (firn_batch_bytes(t->buf) >= max_bytes)
        return true;
    return (now_ns - t->flush_ns) / 1000000 >= interval_ms;
}

/* At a transaction boundary: commits each table whose policy is due at now (monotonic ns), then
 * acknowledges what that allows. */
static firn_rc flush_due(cdc *c, int64_t now, firn_err *err)
{
    firn__engine *e = c->e;
    bool any = false;
    for (size_t i = 0; i < e->n_tables; i++) {
        firn__table *t = e->tables[i];
        if (table_due(c, t, now)) {
            FIRN_TRY(flush_table(c, t, err));
            any = true;
        }
    }
    if (!any)
        return FIRN_OK;
    firn_rc rc = acknowledge(c, err);
    reading_time(c, now);
    return rc;
}

/* For a TRUNCATE naming leaves of partitioned table t (relids, n): *out_leaf gets the quoted
 * name of a leaf it left out that was part of t before transaction xid began (so it kept its
 * rows: a TRUNCATE of some partitions only), "" when it truncated all of t. Leaves that joined
 * t in that transaction or later count as truncated (a false alarm at worst, never a miss). */
static firn_rc truncate_left_out(cdc *c,
                                 const firn__table *t,
                                 const uint32_t *relids,
                                 uint32_t n,
                                 uint32_t xid,
                                 char *out_leaf,
                                 size_t cap,
                                 firn_err *err)
{
    out_leaf[0] = '\0';
    for (uint32_t i = 0; i < n; i++) {
        if (relids[i] == t->pg->oid)
            return FIRN_OK; /* the table itself (publish_via_partition_root) */
    }
    char xid_s[16];
    snprintf(xid_s, sizeof(xid_s), "%u", (unsigned)xid);
    firn_pg_leaf_link *links = NULL;
    size_t n_links = 0;
    int64_t xid_age = -1;
    FIRN_TRY(firn_pg_leaf_links(c->e->sql, t->pg->oid, xid_s, &links, &n_links, &xid_age, err));
    for (size_t l = 0; l < n_links && !out_leaf[0]; l++) {
        bool named = false;
        for (uint32_t i = 0; i < n && !named; i++)
            named = relids[i] == links[l].oid;
        if (!named && (xid_age < 0 || links[l].age >= xid_age))
            snprintf(out_leaf, cap, "%s", links[l].qualified);
    }
    firn_pg_leaf_links_free(links, n_links);
    return FIRN_OK;
}

/* Truncate: replace each table's files by nothing. Its buffered rows (of this and earlier
 * transactions) are gone with it, so they are dropped, and nothing else is flushed: committing
 * other tables' rows of this unfinished transaction at the previous position would write them
 * twice when a crash replays the transaction. A partitioned table is named by its leaves (all
 * of them for TRUNCATE of the table); a TRUNCATE of some of its partitions only stops its
 * stream, since firn cannot tell which rows of the Iceberg table those held. */
static firn_rc on_truncate(cdc *c, const firn_pgo_event *ev, firn_err *err)
{
    const uint32_t *relids = ev->msg->truncate.relids;
    const uint32_t n = ev->msg->truncate.n_relids;
    for (uint32_t i = 0; i < n; i++) {
        rel_map *m = rel_find(c, relids[i]);
        if (!m || !m->table || c->txn_commit_lsn <= m->table->committed_lsn || m->table->halted)
            continue;
        firn__table *t = m->table;
        bool seen = false; /* one truncate per table, however many of its leaves it names */
        for (uint32_t j = 0; j < i && !seen; j++) {
            const rel_map *o = rel_find(c, relids[j]);
            seen = o && o->table == t;
        }
        if (seen)
            continue;
        if (t->copied && c->txn_in_copy)
            continue; /* in this run's copy: replayed, it would empty the copy */
        /* Checked before the change is counted: a part the stop commits holds the changes
         * before it, so a replay stops here again. */
        char left[2 * FIRN_PG_QUOTED_MAX + 2] = "";
        if (t->pg->relkind == 'p')
            FIRN_TRY(truncate_left_out(c, t, relids, n, ev->xid, left, sizeof(left), err));
        if (left[0]) {
            firn_err why = {0};
            firn_err_set(&why, FIRN_ERR_SCHEMA,
                         "some partitions of table %s were truncated while partition %s was not "
                         "(TRUNCATE of partitions, at %X/%X): firn cannot tell which rows of "
                         "table \"%s\" they held: stream stopped, the slot keeps its changes; "
                         "drop table \"%s\" and run firn sync to copy it again",
                         t->pg->qualified, left, (unsigned)(c->txn_commit_lsn >> 32),
                         (unsigned)c->txn_commit_lsn, t->display, t->display);
            FIRN_TRY(halt_table(c, t, &why, err));
            continue;
        }
        if (part_committed(c, t))
            continue; /* before a part committed after it: replayed, it would empty that part */
        firn_batch_reset(t->buf);
        t->txn_rows0 = 0;
        /* The position stays where it was: this transaction and the earlier ones whose rows
         * were just dropped are read again after a restart, the TRUNCATE included. */
        if (firn_table_metadata_current_snapshot(t->cat.metadata))
            FIRN_TRY(firn__table_commit(t, NULL, 0, NULL, 0, true, 0, NULL, err));
        if (t->index) {
            firn__table_reset_index(t);
            firn__table_index_synced(t); /* empty, as the table now is */
        }
        firn__engine_note_commit(c->e, t);
        FIRN_LOG(FIRN_LOG_INFO, "engine", "table \"%s\": truncated", t->display);
    }
    return FIRN_OK;
}

/* The clock is read at commits and at messages outside changes only (last_event_ns matters
 * between transactions; caught_up counts streamed chunks): a read per change cost 4 % of a
 * catch-up's CPU time. */
static firn_rc on_event(cdc *c, const firn_pgo_event *ev, firn_err *err)
{
    int64_t now;
    switch (ev->type) {
    case FIRN_PGO_BEGIN:
        c->in_txn = true;
        for (size_t i = 0; i < c->e->n_tables; i++) {
            c->e->tables[i]->txn_rows0 = firn_batch_rows(c->e->tables[i]->buf);
            c->e->tables[i]->txn_changes = 0;
        }
        c->txn_commit_lsn = ev->commit_lsn;
        c->txn_commit_us = ev->commit_time_us;
        c->txn_in_copy = ev->commit_lsn <= c->e->copy_lsn && in_copy(c, ev->xid);
        return FIRN_OK;
    case FIRN_PGO_RELATION:
        c->last_event_ns = firn_monotonic_ns();
        return on_relation(c, ev, err);
    case FIRN_PGO_INSERT:
    case FIRN_PGO_UPDATE:
    case FIRN_PGO_DELETE:
        return on_change(c, ev, err);
    case FIRN_PGO_TRUNCATE:
        c->last_event_ns = firn_monotonic_ns();
        return on_truncate(c, ev, err);
    case FIRN_PGO_COMMIT:
        now = firn_monotonic_ns();
        c->last_event_ns = now;
        c->in_txn = false;
        c->last_end_lsn = ev->end_lsn;
        c->done_commit_lsn = ev->commit_lsn;
        return flush_due(c, now, err);
    default:
        c->last_event_ns = firn_monotonic_ns();
        return FIRN_OK; /* Type, Origin, Message: nothing to store */
    }
}

static bool buffers_empty(const firn__engine *e)
{
    for (size_t i = 0; i < e->n_tables; i++) {
        if (firn_batch_rows(e->tables[i]->buf))
            return false;
    }
    return true;
}

/* How far the slot's walsender has decoded and sent (pg_stat_replication.sent_lsn); *known is
 * false when the server does not say (a role without pg_read_all_stats sees nulls there). */
static firn_rc sent_lsn(cdc *c, uint64_t *out, bool *known, firn_err *err)
{
    const char *slot = c->e->cfg->source.slot;
    if (strchr(slot, '\''))
        return firn_err_set(err, FIRN_ERR_CONFIG, "invalid slot name \"%s\"", slot);
    char sql[512], text[64];
    snprintf(sql, sizeof(sql),
             "SELECT coalesce(r.sent_lsn::text, '') FROM pg_replication_slots s "
             "LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid WHERE s.slot_name = '%s'",
             slot);
    FIRN_TRY(firn_pg_conn_query_value(c->e->sql, sql, text, sizeof(text), err));
    *known = text[0] != '\0';
    *out = 0;
    return *known ? firn_lsn_parse(text, out, err) : FIRN_OK;
}

/* How long to wait for the next message: until the first table's commit interval ends when it
 * buffers rows (a quiet stream then commits on time, not up to NEXT_TIMEOUT_MS late); a
 * catch-up run looks for its end more often. */
static int next_timeout_ms(const cdc *c, bool follow)
{
    int64_t ms = follow ? NEXT_TIMEOUT_MS : CATCHUP_NEXT_MS;
    if (c->in_txn)
        return (int)ms;
    const int64_t now = firn_monotonic_ns();
    for (size_t i = 0; i < c->e->n_tables; i++) {
        const firn__table *t = c->e->tables[i];
        if (!t->cdc || firn_batch_rows(t->buf) == 0)
            continue;
        int64_t left = table_interval_ms(c, t) - (now - t->flush_ns) / 1000000;
        if (left < ms)
            ms = left > 1 ? left : 1;
    }
    return (int)ms;
}

/* The walsender decodes flushed WAL only, and WAL that no commit follows (the page pruning of
 * a copy that read dead rows, a standby snapshot) is flushed only when something else flushes:
 * on an idle server that takes up to 15 s (the next standby snapshot) or never comes, and an
 * insert position at the start of a page lies past the end of the last record anyway. So when
 * the server has not flushed up to the target, a transaction that only takes an xid writes an
 * empty commit record after it, which the WAL writer flushes within wal_writer_delay; the
 * walsender then decodes past the target and says so in a keepalive. The end condition stays
 * what caught_up checks, so nothing committed before the target is skipped. Best effort (a
 * failure leaves the wait as it was), at most once per CATCHUP_SENT_GRACE_MS. */
static void flush_to_target(cdc *c)
{
    const int64_t now = firn_monotonic_ns();
    if (c->flush_asked_ns && now - c->flush_asked_ns < CATCHUP_SENT_GRACE_MS * 1000000LL)
        return;
    c->flush_asked_ns = now;
    firn_err err = {0};
    char text[64];
    uint64_t flushed = 0;
    firn_rc rc = firn_pg_conn_query_value(c->e->sql, "SELECT pg_current_wal_flush_lsn()::text",
                                          text, sizeof(text), &err);
    if (rc == FIRN_OK)
        rc = firn_lsn_parse(text, &flushed, &err);
    if (rc == FIRN_OK && flushed >= c->target_lsn)
        return; /* flushed: the walsender is still decoding up to it */
    if (rc == FIRN_OK)
        rc = firn_pg_conn_query_value(c->e->sql, "SELECT txid_current()::text", text, sizeof(text),
                                      &err);
    if (rc)
        FIRN_LOG(FIRN_LOG_DEBUG, "engine", "could not have the server flush its WAL: %s", err.msg);
    else
        FIRN_LOG(FIRN_LOG_DEBUG, "engine",
                 "WAL flushed up to %X/%X only: wrote the commit of transaction %s so that the "
                 "server flushes past %X/%X",
                 (unsigned)(flushed >> 32), (unsigned)flushed, text,
                 (unsigned)(c->target_lsn >> 32), (unsigned)c->target_lsn);
}

/* Catch-up run: is everything up to the WAL position at start read? True once a transaction
 * ending at or past it was read, or once the server has decoded and sent past it and a
 * keepalive past it came after the data (or nothing more arrived for CATCHUP_SENT_GRACE_MS:
 * sent is not received, and ending on the server's word alone lost a whole transaction
 * still in flight). When the server does not say how far it has sent, the run ends after
 * initial_wait_seconds without a change (OLake's initial_wait_time); when it says it has not
 * sent everything yet, the run waits (it is decoding), up to CATCHUP_GIVE_UP_MS. */
static firn_rc caught_up(cdc *c, bool *out, firn_err *err)
{
    *out = false;
    if (c->in_txn)
        return FIRN_OK;
    if (c->last_end_lsn >= c->target_lsn) {
        *out = true;
        return FIRN_OK;
    }
    /* Chunks of a streamed transaction count as arrivals although the session holds them until
     * its Stream Commit: the walsender's sent position runs ahead of what is still in flight,
     * so a run that took a long stream for idleness would end before its commit. */
    firn_pgo_stats st;
    firn_pgo_stream_stats(c->s, &st);
    if (st.messages != c->messages_seen) {
        c->messages_seen = st.messages;
        c->last_event_ns = firn_monotonic_ns();
        return FIRN_OK;
    }
    /* A keepalive past the target came after everything the walsender sent: no need to wait
     * CATCHUP_PROBE_MS before asking, for a role the server tells (the others keep waiting
     * initial_wait_seconds, as documented). */
    bool keepalive_past = st.idle_wal_end >= c->target_lsn && !c->sent_unknown;
    int64_t idle_ms = (firn_monotonic_ns() - c->last_event_ns) / 1000000;
    if (idle_ms < CATCHUP_PROBE_MS && !keepalive_past)
        return FIRN_OK;
    uint64_t sent = 0;
    bool known = false;
    FIRN_TRY(sent_lsn(c, &sent, &known, err));
    c->sent_unknown = !known;
    int64_t wait_ms = c->e->cfg->source.initial_wait_ms;
    if (known && sent >= c->target_lsn && (keepalive_past || idle_ms >= CATCHUP_SENT_GRACE_MS)) {
        *out = true;
    } else if (known && sent >= c->target_lsn) {
        return FIRN_OK; /* sent, maybe not received yet: a keepalive or the grace decides */
    } else if (!known && idle_ms >= wait_ms) {
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "no change for %.1f s (initial_wait_seconds) and the server does not say how far "
                 "it has sent (grant pg_read_all_stats to end sooner): ending the run",
                 (double)idle_ms / 1000.0);
        *out = true;
    } else if (idle_ms >= CATCHUP_GIVE_UP_MS) {
        FIRN_LOG(FIRN_LOG_WARN, "engine",
                 "the server has not sent WAL up to %X/%X after %d s idle; ending the run",
                 (unsigned)(c->target_lsn >> 32), (unsigned)c->target_lsn,
                 CATCHUP_GIVE_UP_MS / 1000);
        *out = true;
    } else if (known) {
        flush_to_target(c); /* not sent up to the target: maybe not flushed up to it */
    }
    return FIRN_OK;
}

/* The insert position, not the write position: with synchronous_commit off a committed
 * transaction can sit past the write position for a while. */
static firn_rc current_wal_lsn(firn__engine *e, uint64_t *out, firn_err *err)
{
    char text[64];
    FIRN_TRY(firn_pg_conn_query_value(e->sql, "SELECT pg_current_wal_insert_lsn()::text", text,
                                      sizeof(text), err));
    return firn_lsn_parse(text, out, err);
}

/* Every few seconds: the stats file, with the source's WAL position for the lag. Its query is
 * also what finds the SQL connection lost while the stream goes on (a server that ended idle
 * sessions): under --follow that ends the run so that the caller reconnects both. */
static firn_rc stats_tick(firn__engine *e, bool follow, firn_err *err)
{
    firn__metrics_tick(e);
    if (firn_monotonic_ns() - e->stats_ns < 5 * 1000000000LL)
        return FIRN_OK;
    firn_err qerr = {0};
    uint64_t lsn = 0;
    char text[64];
    firn_rc rc = firn_pg_conn_query_value(e->sql, "SELECT pg_current_wal_lsn()::text", text,
                                          sizeof(text), &qerr);
    if (rc == FIRN_OK && firn_lsn_parse(text, &lsn, &qerr) == FIRN_OK)
        e->wal_lsn = lsn;
    firn__stats_write(e, "cdc", false);
    if (rc && follow && PQstatus(firn_pg_conn_pq(e->sql)) == CONNECTION_BAD) {
        *err = qerr;
        return FIRN_ERR_NETWORK;
    }
    return FIRN_OK;
}

void firn__cdc_discard(firn__engine *e)
{
    for (size_t i = 0; i < e->n_tables; i++) {
        firn__table *t = e->tables[i];
        if (!t->cdc || !t->buf)
            continue;
        if (firn_batch_rows(t->buf) > 0)
            FIRN_LOG(FIRN_LOG_DEBUG, "engine",
                     "table \"%s\": %zu uncommitted changes dropped, read again from the slot",
                     t->display, firn_batch_rows(t->buf));
        firn_batch_reset(t->buf);
        t->txn_rows0 = 0;
        t->txn_changes = 0;
        t->hold_lsn = 0;
    }
}

/* A stop requested inside a transaction (a long one can take minutes to read): tables holding
 * none of its rows commit what they buffer; the others commit nothing, and the slot is
 * acknowledged only up to what is committed, so the transaction and the ones their buffers
 * held are read again on the next start. */
static firn_rc stop_mid_txn(cdc *c, firn_err *err)
{
    firn__engine *e = c->e;
    FIRN_LOG(FIRN_LOG_INFO, "engine",
             "stop requested inside the transaction committed at %X/%X: it is read again on the "
             "next start",
             (unsigned)(c->txn_commit_lsn >> 32), (unsigned)c->txn_commit_lsn);
    for (size_t i = 0; i < e->n_tables; i++) {
        firn__table *t = e->tables[i];
        if (t->cdc && firn_batch_rows(t->buf) == t->txn_rows0)
            FIRN_TRY(flush_table(c, t, err));
    }
    return acknowledge(c, err);
}

static bool all_halted(const firn__engine *e)
{
    for (size_t i = 0; i < e->n_tables; i++) {
        if (e->tables[i]->cdc && !e->tables[i]->halted)
            return false;
    }
    return true;
}

static bool stop_requested(const firn__engine *e)
{
    return e->opts && e->opts->stop && *e->opts->stop;
}

firn_rc firn__cdc_run(firn__engine *e, firn_pgo_stream *s, firn_err *err)
{
    int64_t stop_ns = 0;
    bool idle = true;
    unsigned events = 0;
    cdc c = {0};
    c.e = e;
    c.s = s;
    c.last_event_ns = firn_monotonic_ns();
    for (size_t i = 0; i < e->n_tables; i++)
        e->tables[i]->flush_ns = c.last_event_ns;
    firn_buf_init(&c.scratch, 1 << 20);
    bool follow = e->opts && e->opts->follow;
    firn_rc rc = parse_copy_snapshot(&c, err);
    if (rc == FIRN_OK && !follow)
        rc = current_wal_lsn(e, &c.target_lsn, err);
    if (rc == FIRN_OK && !follow)
        FIRN_LOG(FIRN_LOG_DEBUG, "engine", "catch-up run: streaming up to WAL position %X/%X",
                 (unsigned)(c.target_lsn >> 32), (unsigned)c.target_lsn);
    while (rc == FIRN_OK && !all_halted(e)) {
        if (stop_requested(e) && !stop_ns)
            stop_ns = firn_monotonic_ns();
        /* A stop finishes the transaction at hand unless that takes longer than
         * STOP_TXN_GRACE_MS (a long transaction): then it is abandoned. */
        if (stop_ns &&
            (!c.in_txn || firn_monotonic_ns() - stop_ns >= STOP_TXN_GRACE_MS * 1000000LL)) {
            rc = c.in_txn ? stop_mid_txn(&c, err) : flush_all(&c, err);
            if (rc == FIRN_OK)
                rc = FIRN_ERR_CANCELLED;
            break;
        }
        if (idle || (++events & 63) == 0)
            rc = stats_tick(e, follow, err); /* reads the clock: not at every event */
        if (rc)
            break;
        firn_pgo_event ev;
        rc = firn_pgo_stream_next(s, next_timeout_ms(&c, follow), &ev, err);
        if (rc)
            break;
        idle = ev.type == 0;
        if (ev.type != 0) {
            FIRN_LOG(FIRN_LOG_TRACE, "engine", "event %s commit %X/%X end %X/%X",
                     firn_pgo_msg_type_name(ev.type), (unsigned)(ev.commit_lsn >> 32),
                     (unsigned)ev.commit_lsn, (unsigned)(ev.end_lsn >> 32), (unsigned)ev.end_lsn);
            rc = on_event(&c, &ev, err);
            if (rc == FIRN_OK && !follow && ev.type == FIRN_PGO_COMMIT &&
                c.last_end_lsn >= c.target_lsn)
                break;
            continue;
        }
        /* Idle: commit what waits when the interval passed, or at once when the server asks
         * for the position (a shutdown waits for it: firn_pgo_stream_take_reply_request); a
         * catch-up run ends here. */
        if (firn_pgo_stream_take_reply_request(s) && !c.in_txn && !buffers_empty(e)) {
            FIRN_LOG(FIRN_LOG_INFO, "engine",
                     "the server asked for the confirmed position (a shutdown waits for it): "
                     "committing what is buffered now");
            rc = flush_all(&c, err);
        } else if (!c.in_txn && !buffers_empty(e)) {
            rc = flush_due(&c, firn_monotonic_ns(), err);
        }
        bool done = false;
        if (rc == FIRN_OK && !follow)
            rc = caught_up(&c, &done, err);
        if (rc == FIRN_OK && done)
            break;
    }
    if (rc == FIRN_OK)
        rc = flush_all(&c, err);
    if ((rc == FIRN_OK || rc == FIRN_ERR_CANCELLED) && e->halt.code) {
        *err = e->halt; /* the run reports the stream it stopped (exit code 3) */
        rc = e->halt.code;
    }
    for (size_t i = 0; i < c.n_rels; i++)
        firn_free(c.rels[i].batch_col);
    firn_free(c.rels);
    firn_free(c.copy_xip);
    firn_buf_deinit(&c.scratch);
    return rc;
}

/* Whether oid is in the comma-separated list text. */
static bool oid_listed(const char *text, uint32_t oid)
{
    char want[16];
    int n = snprintf(want, sizeof(want), "%u", (unsigned)oid);
    for (const char *p = text; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == (size_t)n && memcmp(p, want, len) == 0)
            return true;
        p = end ? end + 1 : NULL;
    }
    return false;
}

/* firn__table_meta_commit's step for FIRN_PROP_LEAVES: the text in ctx, when it differs. */
static firn_rc save_leaves_once(firn__table *t, void *ctx, firn_err *err)
{
    const char *text = ctx;
    const firn_table_metadata *md = t->cat.metadata;
    const char *have = firn_props_get(&md->properties, FIRN_PROP_LEAVES);
    if (have && strcmp(have, text) == 0)
        return FIRN_OK;
    firn_table_changes ch;
    firn_table_changes_init(&ch);
    firn_table_changes_require_uuid(&ch, md->table_uuid);
    firn_table_changes_set_property(&ch, FIRN_PROP_LEAVES, text);
    firn_catalog_table out = {0};
    firn_rc rc = firn_catalog_commit(t->eng->catalog, t->ns, t->name, &ch, &out, err);
    if (rc == FIRN_OK) {
        firn_catalog_table_deinit(&t->cat);
        t->cat = out;
    }
    firn_table_changes_deinit(&ch);
    return rc;
}

/* The leaves of one partitioned table at the start of a run: a leaf the table did not have at
 * the last start (FIRN_PROP_LEAVES; without it, one attached since the slot's catalog_xmin)
 * that held rows when it was attached stops the stream; else the leaves are recorded. */
static firn_rc check_table_leaves(firn__engine *e, firn__table *t, const char *xmin, firn_err *err)
{
    const char *known = firn_props_get(&t->cat.metadata->properties, FIRN_PROP_LEAVES);
    firn_pg_leaf_link *links = NULL;
    size_t n = 0;
    int64_t xmin_age = -1;
    FIRN_TRY(
        firn_pg_leaf_links(e->sql, t->pg->oid, xmin[0] ? xmin : NULL, &links, &n, &xmin_age, err));
    firn_rc rc = FIRN_OK;
    firn_buf text;
    firn_buf_init(&text, 1 << 20);
    for (size_t l = 0; l < n && rc == FIRN_OK && !t->halted; l++) {
        rc = firn_buf_appendf(&text, "%s%u", l ? "," : "", (unsigned)links[l].oid);
        /* A table copied in this run holds every leaf's rows; one the table had is streamed. */
        bool fresh =
            known ? !oid_listed(known, links[l].oid) : xmin_age >= 0 && links[l].age <= xmin_age;
        if (rc || t->needs_backfill || !fresh)
            continue;
        bool pre = false;
        rc = firn_pg_leaf_preattached(e->sql, links[l].oid, links[l].qualified, t->pg->oid, &pre,
                                      err);
        if (rc || !pre)
            continue;
        firn_err why = {0};
        preattached_why(t, links[l].qualified, &why);
        FIRN_LOG(FIRN_LOG_ERROR, "engine", "%s", why.msg);
        if (!e->halt.code)
            e->halt = why;
        t->halted = true;
        t->halt_lsn = t->committed_lsn;
    }
    /* A leaf of the last start that is not one now was detached or dropped: PostgreSQL writes
     * no change for that, so the rows it held stay in the table. */
    for (const char *p = known; rc == FIRN_OK && p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        uint64_t oid = 0;
        bool now = false;
        if (firn_parse_u64(p, len, &oid, NULL) == FIRN_OK) {
            for (size_t l = 0; l < n && !now; l++)
                now = links[l].oid == oid;
            if (!now)
                FIRN_LOG(FIRN_LOG_WARN, "engine",
                         "the partition of oid %llu, a leaf of table %s at the last start, is "
                         "no longer one (detached or dropped since): any rows it held stay in "
                         "table \"%s\"; to remove them, drop table \"%s\" and run firn sync to "
                         "copy it again",
                         (unsigned long long)oid, t->pg->qualified, t->display, t->display);
        }
        p = end ? end + 1 : p + len;
    }
    firn_pg_leaf_links_free(links, n);
    if (rc == FIRN_OK && !t->halted && (text.len > 0 || (known && known[0])))
        rc = firn__table_meta_commit(t, save_leaves_once, text.len ? (char *)text.data : "", err);
    firn_buf_deinit(&text);
    return rc;
}

firn_rc firn__cdc_check_leaves(firn__engine *e, firn_err *err)
{
    PGconn *pq = firn_pg_conn_pq(e->sql);
    const char *slot = e->cfg->source.slot;
    char *lit = PQescapeLiteral(pq, slot, strlen(slot));
    if (!lit)
        return firn_err_set(err, FIRN_ERR_SOURCE, "could not quote slot name \"%s\"", slot);
    char sql[512], xmin[32] = "";
    snprintf(sql, sizeof(sql),
             "SELECT coalesce((SELECT catalog_xmin::text FROM pg_replication_slots WHERE "
             "slot_name = %s), '')",
             lit);
    PQfreemem(lit);
    FIRN_TRY(firn_pg_conn_query_value(e->sql, sql, xmin, sizeof(xmin), err));
    for (size_t i = 0; i < e->n_tables; i++) {
        firn__table *t = e->tables[i];
        if (t->cdc && !t->missing && !t->halted && t->pg->relkind == 'p' && t->cat.metadata)
            FIRN_TRY(check_table_leaves(e, t, xmin, err));
    }
    return FIRN_OK;
}
