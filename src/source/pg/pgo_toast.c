/* SPDX-License-Identifier: Apache-2.0 */
/* Unchanged TOAST values: an UPDATE that leaves a TOASTed column untouched sends it as 'u'
 * (no value). Resolution order and guarantees are in docs/cdc.md "Unchanged TOAST values":
 * the old row (REPLICA IDENTITY FULL), an earlier image of the same row in the batch, else a
 * fetch by key that the engine runs. Never NULL, a default or a placeholder. */
#include "firn/pgoutput.h"

bool firn_pgo_tuple_has_unchanged(const firn_pgo_tuple *tuple)
{
    for (uint16_t i = 0; i < tuple->n_cols; i++) {
        if (tuple->cols[i].kind == FIRN_PGO_COL_UNCHANGED)
            return true;
    }
    return false;
}

static firn_pgo_toast_state state_of(const firn_pgo_tuple *t)
{
    return firn_pgo_tuple_has_unchanged(t) ? FIRN_PGO_TOAST_NEEDS_FETCH : FIRN_PGO_TOAST_COMPLETE;
}

firn_pgo_toast_state firn_pgo_toast_from_prev(firn_pgo_tuple *tuple, const firn_pgo_tuple *prev)
{
    if (!prev || prev->n_cols != tuple->n_cols)
        return state_of(tuple);
    for (uint16_t i = 0; i < tuple->n_cols; i++) {
        if (tuple->cols[i].kind == FIRN_PGO_COL_UNCHANGED &&
            prev->cols[i].kind != FIRN_PGO_COL_UNCHANGED)
            tuple->cols[i] = prev->cols[i];
    }
    return state_of(tuple);
}

firn_pgo_toast_state firn_pgo_toast_from_old(firn_pgo_msg *msg)
{
    if (msg->type != FIRN_PGO_UPDATE)
        return FIRN_PGO_TOAST_COMPLETE;
    if (msg->change.old_kind != 'O')
        return state_of(&msg->change.new_tuple);
    return firn_pgo_toast_from_prev(&msg->change.new_tuple, &msg->change.old_tuple);
}

static firn_rc append_ident(firn_buf *b, const char *name)
{
    FIRN_TRY(firn_buf_append_cstr(b, "\""));
    for (const char *p = name; *p; p++) {
        if (*p == '"')
            FIRN_TRY(firn_buf_append_cstr(b, "\""));
        FIRN_TRY(firn_buf_append(b, p, 1));
    }
    return firn_buf_append_cstr(b, "\"");
}

static firn_rc build_fetch(firn_buf *out,
                           const firn_pgo_rel *rel,
                           const firn_pgo_tuple *tuple,
                           uint16_t *key_idx,
                           size_t key_cap,
                           size_t *out_n_keys)
{
    FIRN_TRY(firn_buf_append_cstr(out, "SELECT "));
    bool first = true;
    for (uint16_t i = 0; i < tuple->n_cols && i < rel->n_cols; i++) {
        if (tuple->cols[i].kind != FIRN_PGO_COL_UNCHANGED)
            continue;
        FIRN_TRY(firn_buf_append_cstr(out, first ? "" : ", "));
        FIRN_TRY(append_ident(out, rel->cols[i].name));
        first = false;
    }
    FIRN_TRY(firn_buf_append_cstr(out, " FROM "));
    FIRN_TRY(append_ident(out, rel->nspname));
    FIRN_TRY(firn_buf_append_cstr(out, "."));
    FIRN_TRY(append_ident(out, rel->relname));
    size_t n = 0;
    for (uint16_t i = 0; i < rel->n_cols; i++) {
        if (!(rel->cols[i].flags & 1))
            continue;
        if (n == key_cap)
            return FIRN_ERR_TOO_LARGE;
        key_idx[n++] = i;
        FIRN_TRY(firn_buf_append_cstr(out, n == 1 ? " WHERE " : " AND "));
        FIRN_TRY(append_ident(out, rel->cols[i].name));
        FIRN_TRY(firn_buf_appendf(out, " = $%zu", n));
    }
    *out_n_keys = n;
    return FIRN_OK;
}

firn_rc firn_pgo_toast_fetch_sql(firn_buf *out,
                                 const firn_pgo_rel *rel,
                                 const firn_pgo_tuple *tuple,
                                 uint16_t *key_idx,
                                 size_t key_cap,
                                 size_t *out_n_keys,
                                 firn_err *err)
{
    *out_n_keys = 0;
    bool has_key = false;
    for (uint16_t i = 0; i < rel->n_cols; i++)
        has_key = has_key || (rel->cols[i].flags & 1);
    if (!has_key)
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED,
                            "cannot fetch unchanged values of table \"%s.%s\": it has no "
                            "replica identity key; set REPLICA IDENTITY FULL",
                            rel->nspname, rel->relname);
    const size_t before = out->len;
    firn_rc rc = build_fetch(out, rel, tuple, key_idx, key_cap, out_n_keys);
    if (rc) {
        firn_buf_truncate(out, before);
        return firn_err_set(err, rc, "fetch query for table \"%s.%s\" does not fit", rel->nspname,
                            rel->relname);
    }
    return FIRN_OK;
}
