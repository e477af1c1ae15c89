/* SPDX-License-Identifier: Apache-2.0 */
/* The table writer: rows of a batch become Parquet data files (split by partition, rolled by
 * size) and row positions become position-delete files, each described as an Iceberg data_file
 * with the metrics manifests need. */
#include "engine_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Field ids reserved by the spec for position-delete files (format/spec.md "Reserved Field
 * IDs"). */
#define FIELD_ID_FILE_PATH 2147483546
#define FIELD_ID_POS       2147483545
#define PATH_MAX_BYTES     4096

void firn__column_value(firn_column *c, size_t row, firn_value *out)
{
    const firn_field *f = firn_column_field(c);
    memset(out, 0, sizeof(*out));
    out->type = firn_ptype_of(f);
    if (!firn_column_is_valid(c, row)) {
        out->is_null = true;
        return;
    }
    const uint8_t *v = firn_column_values(c);
    size_t width = firn_type_value_size(f);
    switch (f->type) {
    case FIRN_TYPE_BOOLEAN:
        out->b = v[row] != 0;
        break;
    case FIRN_TYPE_INT:
    case FIRN_TYPE_DATE: {
        int32_t x;
        memcpy(&x, v + row * 4, 4);
        out->i = x;
        break;
    }
    case FIRN_TYPE_FLOAT: {
        float x;
        memcpy(&x, v + row * 4, 4);
        out->d = x;
        break;
    }
    case FIRN_TYPE_DOUBLE:
        memcpy(&out->d, v + row * 8, 8);
        break;
    case FIRN_TYPE_DECIMAL:
        if (width == 8) {
            memcpy(&out->i, v + row * 8, 8);
            out->dec_lo = (uint64_t)out->i;
            out->dec_hi = out->i < 0 ? -1 : 0;
        } else {
            uint64_t parts[2];
            memcpy(parts, v + row * 16, 16);
            out->dec_lo = parts[0];
            out->dec_hi = (int64_t)parts[1];
        }
        break;
    case FIRN_TYPE_UUID:
    case FIRN_TYPE_FIXED:
        out->bytes.ptr = v + row * width;
        out->bytes.len = width;
        break;
    case FIRN_TYPE_STRING:
    case FIRN_TYPE_BINARY: {
        const uint32_t *off = firn_column_offsets(c);
        out->bytes.ptr = firn_column_data(c) + off[row];
        out->bytes.len = off[row + 1] - off[row];
        break;
    }
    case FIRN_TYPE_STRUCT:
    case FIRN_TYPE_LIST:
    case FIRN_TYPE_MAP:
        FIRN_ASSERT(!"nested column has no primitive value");
        break;
    default:
        memcpy(&out->i, v + row * 8, 8);
        break;
    }
}

/* Finds the top-level column holding field id (partition sources are top-level primitives). */
static firn_column *column_by_id(firn_batch *b, int32_t id)
{
    for (size_t i = 0; i < firn_batch_columns(b); i++) {
        firn_column *c = firn_batch_column(b, i);
        if (firn_column_field(c)->id == id)
            return c;
    }
    return NULL;
}

firn_rc firn__partition_of_row(const firn__write_ctx *w,
                               firn_batch *b,
                               size_t row,
                               const firn_ptype *types,
                               firn_value *values,
                               firn_err *err)
{
    for (size_t k = 0; k < w->spec->n_fields; k++) {
        const firn_partition_field *pf = &w->spec->fields[k];
        firn_column *c = column_by_id(b, pf->source_id);
        if (!c)
            return firn_err_set(err, FIRN_ERR_SCHEMA,
                                "partition field \"%s\" has no top-level source column %d",
                                pf->name, pf->source_id);
        firn_value src;
        firn__column_value(c, row, &src);
        if (src.is_null) {
            values[k] = firn_value_null(types[k]);
            continue;
        }
        FIRN_TRY(firn_transform_apply(pf->transform, &src, &values[k], err));
    }
    return FIRN_OK;
}

/* ---- rolling files through FileIO --------------------------------------------------------- */

typedef struct roll_ctx {
    const firn__write_ctx *w;
    firn_buf dir; /* "<data_location>/<partition path>" */
    const firn_value *partition;
    size_t n_partition;
    int32_t spec_id;
    char file_id[37];
    firn_io_writer *out;
    char *path;
    firn_data_file **files;
    size_t *n_files;
} roll_ctx;

/* Storage refusing a data file is the destination's failure, whatever phase writes it (a copy
 * worker, a flush): firn__blame. */
static firn_rc sink_write(void *ctx, const void *p, size_t len, firn_err *err)
{
    return firn__blame(err, FIRN_FAULT_DESTINATION,
                       firn_io_write(((roll_ctx *)ctx)->out, p, len, err));
}

static firn_rc roll_open(void *ctx,
                         uint32_t file_index,
                         firn_pq_write_fn *out_write,
                         void **out_write_ctx,
                         firn_err *err)
{
    roll_ctx *r = ctx;
    char path[PATH_MAX_BYTES];
    int n = snprintf(path, sizeof(path), "%s/%s-%05u.parquet", (const char *)r->dir.data,
                     r->file_id, file_index);
    if (n < 0 || (size_t)n >= sizeof(path))
        return firn_err_set(err, FIRN_ERR_TOO_LARGE, "data file path under \"%s\" is too long",
                            (const char *)r->dir.data);
    FIRN_TRY(
        firn__blame(err, FIRN_FAULT_DESTINATION, firn_io_create(r->w->io, path, &r->out, err)));
    firn_free(r->path);
    r->path = firn_strdup(path);
    *out_write = sink_write;
    *out_write_ctx = r;
    return FIRN_OK;
}

/* Describes a closed Parquet file as an Iceberg data_file. */
static void describe_file(firn_data_file *f, const firn_pq_file_metrics *m)
{
    f->record_count = (int64_t)m->record_count;
    f->file_size_in_bytes = (int64_t)m->file_size_bytes;
    for (size_t k = 0; k < m->n_fields; k++) {
        const firn_pq_field_metrics *fm = &m->fields[k];
        firn_col_metrics *cm = firn_data_file_metrics(f, fm->field_id);
        cm->column_size = (int64_t)fm->column_size_bytes;
        cm->value_count = (int64_t)fm->value_count;
        cm->null_count = (int64_t)fm->null_count;
        cm->nan_count = fm->has_nan_count ? (int64_t)fm->nan_count : -1;
        if (fm->has_lower)
            firn_data_file_set_bound(f, fm->field_id, false, fm->lower, fm->lower_len);
        if (fm->has_upper)
            firn_data_file_set_bound(f, fm->field_id, true, fm->upper, fm->upper_len);
    }
    firn_data_file_set_split_offsets(f, m->split_offsets, m->n_split_offsets);
}

static firn_rc
roll_close(void *ctx, uint32_t file_index, firn_pq_file_metrics *metrics, firn_err *err)
{
    (void)file_index;
    roll_ctx *r = ctx;
    uint64_t size = 0;
    firn_io_writer *out = r->out;
    r->out = NULL;
    FIRN_TRY(firn__blame(err, FIRN_FAULT_DESTINATION, firn_io_close(out, &size, err)));
    FIRN_ASSERT(size == metrics->file_size_bytes);
    *r->files = firn_reallocarray(*r->files, *r->n_files + 1, sizeof(firn_data_file));
    firn_data_file *f = &(*r->files)[(*r->n_files)++];
    firn_data_file_init(f, FIRN_CONTENT_DATA, r->path, r->spec_id);
    if (r->n_partition)
        firn_data_file_set_partition(f, r->partition, r->n_partition);
    describe_file(f, metrics);
    return FIRN_OK;
}

/* Rows copied at a time out of a selection: the copy stays small beside the buffer it comes
 * from (a flush of a large transaction would otherwise hold every row twice). */
#define SELECTION_CHUNK_ROWS 8192

/* Writes the rows sel[0..n) of b (sel NULL: all) into files of one partition. */
static firn_rc write_group(roll_ctx *r, firn_batch *b, const uint32_t *sel, size_t n, firn_err *err)
{
    firn_pq_roll_callbacks cb = {r, roll_open, roll_close};
    firn_pq_roller *roller = NULL;
    uint8_t uuid[16];
    firn_uuid_v4(uuid);
    firn_uuid_format(uuid, r->file_id);
    FIRN_TRY(firn_pq_roller_new(r->w->schema, r->w->pq_opts, &cb, &roller, err));
    firn_rc rc = FIRN_OK;
    if (!sel) {
        rc = firn_pq_roller_write(roller, b, err);
    } else {
        firn_batch *tmp = firn_batch_new(r->w->schema);
        for (size_t at = 0; rc == FIRN_OK && at < n; at += SELECTION_CHUNK_ROWS) {
            size_t k = n - at < SELECTION_CHUNK_ROWS ? n - at : SELECTION_CHUNK_ROWS;
            firn_batch_reset(tmp);
            firn_batch_append_rows(tmp, b, sel + at, k);
            rc = firn_pq_roller_write(roller, tmp, err);
        }
        firn_batch_free(tmp);
    }
    if (rc == FIRN_OK)
        rc = firn_pq_roller_close(roller, err);
    firn_pq_roller_free(roller);
    if (r->out) {
        firn_io_abort(r->out);
        r->out = NULL;
    }
    return rc;
}

static firn_rc
group_dir(const firn__write_ctx *w, const firn_value *tuple, firn_buf *dir, firn_err *err)
{
    firn_buf_reset(dir);
    if (firn_buf_append_cstr(dir, w->data_location))
        return firn_err_set(err, FIRN_ERR_TOO_LARGE, "data location is too long");
    if (w->spec && w->spec->n_fields) {
        if (firn_wr_u8(dir, '/'))
            return firn_err_set(err, FIRN_ERR_TOO_LARGE, "data location is too long");
        FIRN_TRY(firn_partition_path(w->spec, tuple, dir, err));
    }
    return FIRN_OK;
}

/* Assigns (file, position) to the rows of one group written into files [first, *n_files). */
static void assign_locations(const firn_data_file *files,
                             size_t first,
                             size_t end,
                             const size_t *group_rows,
                             size_t n,
                             firn__rowloc *locs)
{
    size_t f = first;
    int64_t pos = 0;
    for (size_t k = 0; k < n; k++) {
        while (f < end && pos >= files[f].record_count) {
            f++;
            pos = 0;
        }
        FIRN_ASSERT(f < end);
        locs[group_rows[k]].file = (uint32_t)f;
        locs[group_rows[k]].pos = (uint32_t)pos++;
    }
}

/* Encodes a partition tuple as a grouping key. */
static firn_rc tuple_key(const firn_value *values, size_t n, firn_buf *key, firn_err *err)
{
    firn_buf_reset(key);
    for (size_t k = 0; k < n; k++) {
        size_t at = key->len;
        if (firn_wr_u8(key, values[k].is_null ? 0 : 1) || firn_wr_le32(key, 0))
            return firn_err_set(err, FIRN_ERR_TOO_LARGE, "partition key is too long");
        if (values[k].is_null)
            continue;
        FIRN_TRY(firn_value_to_bytes(&values[k], key, err));
        uint32_t len = (uint32_t)(key->len - at - 5);
        memcpy(key->data + at + 1, &len, 4);
    }
    return FIRN_OK;
}

/* Writes the rows in sel[0..n) of b (sel NULL: all) as one group with partition tuple. */
static firn_rc write_selection(roll_ctx *r,
                               firn_batch *b,
                               const uint32_t *sel,
                               size_t n,
                               const size_t *global,
                               firn__rowloc *out_locs,
                               firn_err *err)
{
    size_t first = *r->n_files;
    firn_rc rc = group_dir(r->w, r->partition, &r->dir, err);
    if (rc == FIRN_OK)
        rc = write_group(r, b, sel, n, err);
    if (rc == FIRN_OK && out_locs)
        assign_locations(*r->files, first, *r->n_files, global, n, out_locs);
    return rc;
}

typedef struct groups {
    size_t n_groups;
    uint32_t *group_of; /* per selected row */
    size_t *first_row;  /* per group: index k of its first selected row */
} groups;

static firn_rc group_rows(const firn__write_ctx *w,
                          firn_batch *b,
                          const uint32_t *rows,
                          size_t total,
                          const firn_ptype *types,
                          groups *g,
                          firn_err *err)
{
    size_t nf = w->spec->n_fields;
    firn_value *tuple = firn_calloc(nf, sizeof(firn_value));
    firn__keymap *map = firn__keymap_new();
    firn_buf key;
    firn_buf_init(&key, 1 << 20);
    g->group_of = firn_calloc(total, sizeof(uint32_t));
    g->first_row = firn_calloc(total, sizeof(size_t));
    g->n_groups = 0;
    firn_rc rc = FIRN_OK;
    for (size_t k = 0; k < total && rc == FIRN_OK; k++) {
        size_t row = rows ? rows[k] : k;
        rc = firn__partition_of_row(w, b, row, types, tuple, err);
        if (rc == FIRN_OK)
            rc = tuple_key(tuple, nf, &key, err);
        if (rc)
            break;
        firn__pkloc loc;
        if (!firn__keymap_get(map, key.data, key.len, &loc)) {
            loc.file = (uint32_t)g->n_groups;
            loc.pos = 0;
            g->first_row[g->n_groups++] = k;
            firn__keymap_put(map, key.data, key.len, loc);
        }
        g->group_of[k] = loc.file;
    }
    firn_buf_deinit(&key);
    firn__keymap_free(map);
    firn_free(tuple);
    return rc;
}

static firn_rc write_partitioned(roll_ctx *r,
                                 firn_batch *b,
                                 const uint32_t *rows,
                                 size_t total,
                                 firn__rowloc *out_locs,
                                 firn_err *err)
{
    const firn__write_ctx *w = r->w;
    size_t nf = w->spec->n_fields;
    firn_ptype *types = firn_calloc(nf, sizeof(firn_ptype));
    firn_value *tuple = firn_calloc(nf, sizeof(firn_value));
    groups g = {0};
    uint32_t *sel = firn_calloc(total, sizeof(uint32_t));
    size_t *global = firn_calloc(total, sizeof(size_t));
    firn_rc rc = firn_partition_spec_types(w->spec, w->schema, types, err);
    if (rc == FIRN_OK)
        rc = group_rows(w, b, rows, total, types, &g, err);
    for (size_t gi = 0; rc == FIRN_OK && gi < g.n_groups; gi++) {
        size_t n = 0;
        for (size_t k = g.first_row[gi]; k < total; k++) {
            if (g.group_of[k] != gi)
                continue;
            sel[n] = rows ? rows[k] : (uint32_t)k;
            global[n++] = k;
        }
        size_t first = rows ? rows[g.first_row[gi]] : g.first_row[gi];
        rc = firn__partition_of_row(w, b, first, types, tuple, err);
        r->partition = tuple;
        r->n_partition = nf;
        if (rc == FIRN_OK)
            rc = write_selection(r, b, sel, n, global, out_locs, err);
    }
    firn_free(global);
    firn_free(sel);
    firn_free(g.group_of);
    firn_free(g.first_row);
    firn_free(tuple);
    firn_free(types);
    return rc;
}

firn_rc firn__write_data_files(const firn__write_ctx *w,
                               firn_batch *b,
                               const uint32_t *rows,
                               size_t n,
                               firn_data_file **files,
                               size_t *n_files,
                               firn__rowloc *out_locs,
                               firn_err *err)
{
    size_t total = rows ? n : firn_batch_rows(b);
    if (total == 0)
        return FIRN_OK;
    roll_ctx r = {0};
    r.w = w;
    r.files = files;
    r.n_files = n_files;
    r.spec_id = w->spec ? w->spec->spec_id : 0;
    firn_buf_init(&r.dir, PATH_MAX_BYTES);
    firn_rc rc;
    if (w->spec && w->spec->n_fields) {
        rc = write_partitioned(&r, b, rows, total, out_locs, err);
    } else {
        size_t *global = firn_calloc(total, sizeof(size_t));
        for (size_t k = 0; k < total; k++)
            global[k] = k;
        rc = write_selection(&r, b, rows, total, global, out_locs, err);
        firn_free(global);
    }
    firn_free(r.path);
    firn_buf_deinit(&r.dir);
    return rc;
}

/* ---- streams of data files ---------------------------------------------------------------- */

struct firn__stream {
    firn__write_ctx w;
    roll_ctx r;
    firn_pq_roller *roller;
    firn_data_file *files;
    size_t n_files;
};

firn_rc firn__stream_open(const firn__write_ctx *w, firn__stream **out, firn_err *err)
{
    if (w->spec && w->spec->n_fields)
        return firn_err_set(err, FIRN_ERR_INVALID,
                            "a data file stream needs an unpartitioned table");
    firn__stream *s = firn_calloc(1, sizeof(*s));
    s->w = *w;
    s->r.w = &s->w;
    s->r.files = &s->files;
    s->r.n_files = &s->n_files;
    s->r.spec_id = w->spec ? w->spec->spec_id : 0;
    firn_buf_init(&s->r.dir, PATH_MAX_BYTES);
    uint8_t uuid[16];
    firn_uuid_v4(uuid);
    firn_uuid_format(uuid, s->r.file_id);
    firn_pq_roll_callbacks cb = {&s->r, roll_open, roll_close};
    firn_rc rc = group_dir(&s->w, NULL, &s->r.dir, err);
    if (rc == FIRN_OK)
        rc = firn_pq_roller_new(s->w.schema, s->w.pq_opts, &cb, &s->roller, err);
    if (rc) {
        firn__stream_abort(s);
        return rc;
    }
    *out = s;
    return FIRN_OK;
}

firn_rc firn__stream_write(firn__stream *s, firn_batch *b, firn_err *err)
{
    return firn_pq_roller_write(s->roller, b, err);
}

void firn__stream_abort(firn__stream *s)
{
    if (!s)
        return;
    firn_pq_roller_free(s->roller);
    if (s->r.out)
        firn_io_abort(s->r.out);
    for (size_t i = 0; i < s->n_files; i++)
        firn_data_file_deinit(&s->files[i]);
    firn_free(s->files);
    firn_free(s->r.path);
    firn_buf_deinit(&s->r.dir);
    firn_free(s);
}

firn_rc firn__stream_close(firn__stream *s, firn_data_file **files, size_t *n_files, firn_err *err)
{
    firn_rc rc = firn_pq_roller_close(s->roller, err);
    if (rc == FIRN_OK && s->n_files) {
        *files = firn_reallocarray(*files, *n_files + s->n_files, sizeof(**files));
        memcpy(*files + *n_files, s->files, s->n_files * sizeof(**files));
        *n_files += s->n_files;
        s->n_files = 0;
    }
    firn__stream_abort(s);
    return rc;
}

/* ---- position deletes --------------------------------------------------------------------- */

static int posdel_cmp(const void *a, const void *b)
{
    const firn__posdel *x = a, *y = b;
    if (x->group != y->group)
        return x->group < y->group ? -1 : 1;
    int c = strcmp(x->path, y->path);
    if (c)
        return c;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static firn_field *posdel_schema(void)
{
    firn_field *root = firn_field_new(0, "", FIRN_TYPE_STRUCT, true);
    firn_field_add(root, firn_field_new(FIELD_ID_FILE_PATH, "file_path", FIRN_TYPE_STRING, true));
    firn_field_add(root, firn_field_new(FIELD_ID_POS, "pos", FIRN_TYPE_LONG, true));
    return root;
}

/* Full (untruncated) bounds on file_path, and referenced_data_file when only one file. */
static void posdel_bounds(firn_data_file *f, const firn__posdel *first, const firn__posdel *last)
{
    firn_data_file_set_bound(f, FIELD_ID_FILE_PATH, false, first->path, strlen(first->path));
    firn_data_file_set_bound(f, FIELD_ID_FILE_PATH, true, last->path, strlen(last->path));
    if (strcmp(first->path, last->path) == 0)
        firn_data_file_set_referenced(f, first->path);
}

firn_rc firn__write_position_deletes(const firn__write_ctx *w,
                                     firn__posdel *dels,
                                     size_t n_dels,
                                     const firn_value *const *partitions,
                                     size_t n_partition,
                                     int32_t spec_id,
                                     firn_data_file **files,
                                     size_t *n_files,
                                     firn_err *err)
{
    if (n_dels == 0)
        return FIRN_OK;
    qsort(dels, n_dels, sizeof(*dels), posdel_cmp);
    firn_field *schema = posdel_schema();
    firn_batch *batch = firn_batch_new(schema);
    firn__write_ctx dw = *w;
    dw.schema = schema;
    roll_ctx r = {0};
    r.w = &dw;
    r.files = files;
    r.n_files = n_files;
    r.spec_id = spec_id;
    firn_buf_init(&r.dir, PATH_MAX_BYTES);
    firn_pq_options opts;
    firn_pq_options_init(&opts);
    if (w->pq_opts)
        opts = *w->pq_opts;
    opts.file_bytes = SIZE_MAX; /* one file per group */
    opts.kv = NULL;
    opts.n_kv = 0;
    dw.pq_opts = &opts;
    firn_rc rc = FIRN_OK;
    for (size_t start = 0; start < n_dels && rc == FIRN_OK;) {
        size_t end = start;
        firn_batch_reset(batch);
        while (end < n_dels && dels[end].group == dels[start].group) {
            firn_column_append_bytes(firn_batch_column(batch, 0), dels[end].path,
                                     strlen(dels[end].path));
            firn_column_append_i64(firn_batch_column(batch, 1), dels[end].pos);
            rc = firn_batch_end_row(batch, FIRN_OP_DELETE, 0, err);
            FIRN_ASSERT(rc == FIRN_OK);
            end++;
        }
        r.partition = n_partition ? partitions[dels[start].group] : NULL;
        r.n_partition = n_partition;
        size_t first = *n_files;
        rc = group_dir(&dw, r.partition, &r.dir, err);
        if (rc == FIRN_OK)
            rc = write_group(&r, batch, NULL, 0, err);
        if (rc == FIRN_OK) {
            FIRN_ASSERT(*n_files == first + 1);
            firn_data_file *f = &(*files)[first];
            f->content = FIRN_CONTENT_POSITION_DELETES;
            posdel_bounds(f, &dels[start], &dels[end - 1]);
        }
        start = end;
    }
    firn_free(r.path);
    firn_buf_deinit(&r.dir);
    firn_batch_free(batch);
    firn_field_free(schema);
    return rc;
}
