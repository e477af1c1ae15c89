/* SPDX-License-Identifier: Apache-2.0 */
/* Equality-delete mode ("delete_mode": "equality", DELETES.md §5.1, ICEBERG.md §D): an upsert
 * table without a key index. Each flush folds the buffer by key (rows changed again in the same
 * flush never reach a file), writes the final images as data files and, for every key the flush
 * touched, one row of the key columns into an equality-delete file of the same snapshot. An
 * equality delete applies to data files with a strictly lower data sequence number
 * (format/spec.md "Scan Planning"), so it removes the key's earlier rows and never the row the
 * same commit writes: a key deleted and inserted again in one flush or across flushes survives.
 * Tables without a usable key and REPLICA IDENTITY FULL use every column that may be an equality
 * column as the key. */
#include "engine_int.h"

#include <stdio.h>
#include <string.h>

/* format/spec.md "Identifier Field IDs" (equality ids carry the same restrictions, except that
 * optional columns are allowed): primitive, not float or double. */
static bool equality_type_ok(const firn_field *f)
{
    return f->type != FIRN_TYPE_FLOAT && f->type != FIRN_TYPE_DOUBLE &&
           f->type != FIRN_TYPE_STRUCT && f->type != FIRN_TYPE_LIST && f->type != FIRN_TYPE_MAP;
}

static bool is_key_id(const firn__table *t, int32_t id)
{
    for (size_t k = 0; k < t->n_key; k++) {
        if (t->schema->children[t->key_cols[k]]->id == id)
            return true;
    }
    return false;
}

/* ", declared: a and b" of the declared readers that cannot read equality deletes, or "". */
static void declared_unreadable(uint32_t readers, char *out, size_t cap)
{
    static const struct {
        uint32_t bit;
        const char *name;
    } no[] = {{FIRN_READER_PYICEBERG, "pyiceberg"},
              {FIRN_READER_SNOWFLAKE, "snowflake"},
              {FIRN_READER_DATABRICKS, "databricks"}};
    size_t n = 0, total = 0, o = 0;
    for (size_t i = 0; i < 3; i++)
        total += (readers & no[i].bit) != 0;
    out[0] = 0;
    for (size_t i = 0; i < 3; i++) {
        if (!(readers & no[i].bit))
            continue;
        const char *sep = n == 0 ? " (declared: " : (n + 1 == total ? " and " : ", ");
        int w = snprintf(out + o, cap - o, "%s%s%s", sep, no[i].name, ++n == total ? ")" : "");
        if (w < 0 || (size_t)w >= cap - o)
            return;
        o += (size_t)w;
    }
}

firn_rc firn__eqdel_open(firn__table *t, firn_err *err)
{
    if (t->pg->n_key == 0) {
        /* No usable key: the whole row is the key; a column that cannot be an equality column
         * would make rows that differ only there one row. */
        t->n_key = 0;
        for (size_t i = 0; i < t->pg->n_columns; i++) {
            const firn_field *f = t->schema->children[i];
            if (!equality_type_ok(f) || t->n_key == 32)
                return firn_err_set(err, FIRN_ERR_CONFIG,
                                    "table \"%s\" has no primary key and column \"%s\" cannot "
                                    "be an equality-delete column (float, double, nested, or "
                                    "past 32 columns); set \"primary_key\" for the stream or "
                                    "\"append_mode\": true",
                                    t->display, f->name);
            t->key_cols[t->n_key++] = (uint32_t)i;
        }
    }
    if (t->n_key == 0)
        return firn_err_set(err, FIRN_ERR_CONFIG, "table \"%s\" has no columns", t->display);
    const firn_partition_spec *spec = firn_table_metadata_spec(t->cat.metadata);
    for (size_t i = 0; spec && i < spec->n_fields; i++) {
        if (!is_key_id(t, spec->fields[i].source_id))
            return firn_err_set(err, FIRN_ERR_CONFIG,
                                "table \"%s\": partition field \"%s\" is not computed from the "
                                "key, so equality deletes cannot find the partition of a "
                                "deleted row; partition by key columns or use \"delete_mode\" "
                                "\"%s\"",
                                t->display, spec->fields[i].name,
                                t->dv ? "deletion_vector" : "position");
    }
    const firn_destination_config *d = &t->eng->cfg->destination;
    char who[96];
    declared_unreadable(d->readers, who, sizeof(who));
    FIRN_LOG(FIRN_LOG_WARN, "engine",
             "table \"%s\" is written with equality deletes on %s%s: pyiceberg, snowflake and "
             "databricks cannot read them%s, bigquery does not document them",
             t->display, t->pg->n_key > 0 ? "its key" : "every column (no usable key)",
             t->pg->n_key > 0 ? "" : ", rows equal in every column count as one row", who);
    return FIRN_OK;
}

/* The key columns of the fold's keys (final images first, then deleted keys), in a batch of
 * schema sel. */
static firn_rc key_batch(firn__table *t, const firn__fold *f, firn_batch *out, firn_err *err)
{
    for (size_t k = 0; k < f->n_keys; k++) {
        uint32_t row = k < f->n_upserts ? f->upsert_rows[k] : f->delete_rows[k - f->n_upserts];
        for (size_t c = 0; c < t->n_key; c++)
            firn_column_append_from(firn_batch_column(out, c),
                                    firn_batch_column(t->buf, t->key_cols[c]), row);
    }
    return firn_batch_end_rows(out, f->n_keys, FIRN_OP_DELETE, 0, err);
}

/* Writes the equality-delete files of the fold's keys (one or more per partition) and appends
 * them to *files. */
static firn_rc write_eq_deletes(firn__table *t,
                                const firn__write_ctx *w,
                                const firn__fold *f,
                                firn_data_file **files,
                                size_t *n_files,
                                firn_err *err)
{
    if (f->n_keys == 0)
        return FIRN_OK;
    firn_field *sel = firn_field_new(0, "", FIRN_TYPE_STRUCT, true);
    int32_t ids[32];
    for (size_t c = 0; c < t->n_key; c++) {
        firn_field *kf = firn_field_clone(t->schema->children[t->key_cols[c]]);
        kf->meta = 0;
        ids[c] = kf->id;
        firn_field_add(sel, kf);
    }
    firn_batch *b = firn_batch_new(sel);
    firn__write_ctx ew = *w;
    ew.schema = sel;
    size_t first = *n_files;
    firn_rc rc = key_batch(t, f, b, err);
    if (rc == FIRN_OK)
        rc = firn__write_data_files(&ew, b, NULL, 0, files, n_files, NULL, err);
    for (size_t i = first; i < *n_files; i++) {
        (*files)[i].content = FIRN_CONTENT_EQUALITY_DELETES;
        firn_data_file_set_equality_ids(&(*files)[i], ids, t->n_key);
    }
    firn_batch_free(b);
    firn_field_free(sel);
    return rc;
}

firn_rc firn__eqdel_flush(firn__table *t,
                          const firn__write_ctx *w,
                          uint64_t lsn,
                          const firn_summary *extra,
                          firn_err *err)
{
    firn__fold f;
    FIRN_TRY(firn__fold_run_keep(t->buf, t->key_cols, t->n_key, t->soft_delete, &f, err));
    firn_data_file *files = NULL;
    size_t n_files = 0;
    firn_rc rc =
        firn__write_data_files(w, t->buf, f.upsert_rows, f.n_upserts, &files, &n_files, NULL, err);
    size_t n_data = n_files;
    if (rc == FIRN_OK)
        rc = write_eq_deletes(t, w, &f, &files, &n_files, err);
    if (rc == FIRN_OK && n_files > 0)
        rc = firn__table_commit(t, files, n_data, files + n_data, n_files - n_data, false, lsn,
                                extra, err);
    else if (rc == FIRN_OK && lsn > t->committed_lsn)
        t->committed_lsn = lsn;
    if (rc == FIRN_OK) {
        t->rows_written += f.n_upserts;
        FIRN_LOG(FIRN_LOG_INFO, "engine",
                 "table \"%s\": committed %zu rows, %zu equality deletes, %zu files, lsn %X/%X",
                 t->display, f.n_upserts, f.n_keys, n_files, (unsigned)(lsn >> 32), (unsigned)lsn);
    }
    for (size_t i = 0; i < n_files; i++)
        firn_data_file_deinit(&files[i]);
    firn_free(files);
    firn__fold_free(&f);
    return rc;
}
