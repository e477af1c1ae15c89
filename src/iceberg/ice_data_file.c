/* SPDX-License-Identifier: Apache-2.0 */
/* Plain data structures of manifests: data files with metrics, manifest-list records and the
 * snapshot summary string map (memory management only; encoding lives elsewhere). */
#include "ice_manifest_int.h"

#include "firn/parquet.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static void *dup_or_null(const void *p, size_t len)
{
    if (!p)
        return NULL;
    return len ? firn_memdup(p, len) : firn_malloc(0);
}

void firn_data_file_init(firn_data_file *f,
                         firn_file_content content,
                         const char *file_path,
                         int32_t spec_id)
{
    memset(f, 0, sizeof *f);
    f->content = content;
    f->file_path = firn_strdup(file_path);
    f->file_format = firn_strdup("parquet");
    f->spec_id = spec_id;
}

void firn_data_file_deinit(firn_data_file *f)
{
    if (!f)
        return;
    firn_free(f->file_path);
    firn_free(f->file_format);
    firn_free(f->partition);
    firn_free(f->partition_bytes);
    for (size_t i = 0; i < f->n_metrics; i++) {
        firn_free(f->metrics[i].lower);
        firn_free(f->metrics[i].upper);
    }
    firn_free(f->metrics);
    firn_free(f->key_metadata);
    firn_free(f->split_offsets);
    firn_free(f->equality_ids);
    firn_free(f->referenced_data_file);
    memset(f, 0, sizeof *f);
}

void firn_data_file_set_partition(firn_data_file *f, const firn_value *values, size_t n)
{
    firn_free(f->partition);
    firn_free(f->partition_bytes);
    f->partition = NULL;
    f->partition_bytes = NULL;
    f->n_partition = n;
    if (n == 0)
        return;
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += values[i].is_null ? 0 : values[i].bytes.len;
    f->partition = firn_calloc(n, sizeof *f->partition);
    f->partition_bytes = firn_malloc(total ? total : 1);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        f->partition[i] = values[i];
        if (values[i].is_null || values[i].bytes.len == 0) {
            f->partition[i].bytes = (firn_slice){f->partition_bytes, 0};
            continue;
        }
        memcpy(f->partition_bytes + off, values[i].bytes.ptr, values[i].bytes.len);
        f->partition[i].bytes = (firn_slice){f->partition_bytes + off, values[i].bytes.len};
        off += values[i].bytes.len;
    }
}

void firn_data_file_copy(firn_data_file *dst, const firn_data_file *src)
{
    *dst = *src;
    dst->file_path = firn_strdup(src->file_path);
    dst->file_format = firn_strdup(src->file_format ? src->file_format : "parquet");
    dst->partition = NULL;
    dst->partition_bytes = NULL;
    firn_data_file_set_partition(dst, src->partition, src->n_partition);
    dst->metrics = NULL;
    if (src->n_metrics > 0) {
        dst->metrics = firn_memdup(src->metrics, src->n_metrics * sizeof *src->metrics);
        for (size_t i = 0; i < src->n_metrics; i++) {
            dst->metrics[i].lower = dup_or_null(src->metrics[i].lower, src->metrics[i].lower_len);
            dst->metrics[i].upper = dup_or_null(src->metrics[i].upper, src->metrics[i].upper_len);
        }
    }
    dst->key_metadata = dup_or_null(src->key_metadata, src->key_metadata_len);
    dst->split_offsets =
        dup_or_null(src->split_offsets, src->n_split_offsets * sizeof *src->split_offsets);
    dst->equality_ids =
        dup_or_null(src->equality_ids, src->n_equality_ids * sizeof *src->equality_ids);
    dst->referenced_data_file =
        src->referenced_data_file ? firn_strdup(src->referenced_data_file) : NULL;
}

firn_col_metrics *firn_data_file_metrics(firn_data_file *f, int32_t field_id)
{
    size_t i = 0;
    while (i < f->n_metrics && f->metrics[i].field_id < field_id)
        i++;
    if (i < f->n_metrics && f->metrics[i].field_id == field_id)
        return &f->metrics[i];
    f->metrics = firn_reallocarray(f->metrics, f->n_metrics + 1, sizeof *f->metrics);
    memmove(&f->metrics[i + 1], &f->metrics[i], (f->n_metrics - i) * sizeof *f->metrics);
    f->n_metrics++;
    firn_col_metrics *m = &f->metrics[i];
    memset(m, 0, sizeof *m);
    m->field_id = field_id;
    m->column_size = m->value_count = m->null_count = m->nan_count = -1;
    return m;
}

void firn_data_file_set_bound(
    firn_data_file *f, int32_t field_id, bool upper, const void *p, size_t len)
{
    firn_col_metrics *m = firn_data_file_metrics(f, field_id);
    uint8_t **slot = upper ? &m->upper : &m->lower;
    size_t *slot_len = upper ? &m->upper_len : &m->lower_len;
    firn_free(*slot);
    *slot = len ? firn_memdup(p, len) : firn_malloc(0);
    *slot_len = len;
}

void firn_data_file_set_split_offsets(firn_data_file *f, const int64_t *offsets, size_t n)
{
    firn_free(f->split_offsets);
    f->split_offsets = n ? firn_memdup(offsets, n * sizeof *offsets) : firn_malloc(0);
    f->n_split_offsets = n;
}

void firn_data_file_set_equality_ids(firn_data_file *f, const int32_t *ids, size_t n)
{
    firn_free(f->equality_ids);
    f->equality_ids = n ? firn_memdup(ids, n * sizeof *ids) : firn_malloc(0);
    f->n_equality_ids = n;
}

void firn_data_file_set_referenced(firn_data_file *f, const char *path)
{
    firn_free(f->referenced_data_file);
    f->referenced_data_file = path ? firn_strdup(path) : NULL;
}

bool firn_data_file_is_dv(const firn_data_file *f)
{
    return f->content == FIRN_CONTENT_POSITION_DELETES && f->file_format &&
           strcasecmp(f->file_format, "puffin") == 0;
}

void firn_data_file_init_dv(firn_data_file *f,
                            const char *puffin_path,
                            int64_t puffin_size_bytes,
                            int32_t spec_id,
                            const char *referenced_data_file,
                            int64_t content_offset,
                            int64_t content_size_bytes,
                            int64_t cardinality)
{
    firn_data_file_init(f, FIRN_CONTENT_POSITION_DELETES, puffin_path, spec_id);
    firn_free(f->file_format);
    f->file_format = firn_strdup("PUFFIN"); /* Java writes the enum name */
    f->file_size_in_bytes = puffin_size_bytes;
    f->record_count = cardinality;
    firn_data_file_set_referenced(f, referenced_data_file);
    f->has_content_offset = true;
    f->content_offset = content_offset;
    f->content_size_in_bytes = content_size_bytes;
}

void firn_manifest_file_deinit(firn_manifest_file *mf)
{
    if (!mf)
        return;
    firn_free(mf->manifest_path);
    for (size_t i = 0; i < mf->n_partitions; i++) {
        firn_free(mf->partitions[i].lower);
        firn_free(mf->partitions[i].upper);
    }
    firn_free(mf->partitions);
    firn_free(mf->key_metadata);
    memset(mf, 0, sizeof *mf);
}

void firn_manifest_file_copy(firn_manifest_file *dst, const firn_manifest_file *src)
{
    *dst = *src;
    dst->manifest_path = firn_strdup(src->manifest_path);
    dst->partitions = NULL;
    if (src->n_partitions > 0) {
        dst->partitions = firn_memdup(src->partitions, src->n_partitions * sizeof *src->partitions);
        for (size_t i = 0; i < src->n_partitions; i++) {
            const firn_partition_summary *s = &src->partitions[i];
            dst->partitions[i].lower = dup_or_null(s->lower, s->lower_len);
            dst->partitions[i].upper = dup_or_null(s->upper, s->upper_len);
        }
    }
    dst->key_metadata = dup_or_null(src->key_metadata, src->key_metadata_len);
}

void firn_manifest_files_free(firn_manifest_file *files, size_t n)
{
    if (!files)
        return;
    for (size_t i = 0; i < n; i++)
        firn_manifest_file_deinit(&files[i]);
    firn_free(files);
}

void firn_summary_init(firn_summary *s)
{
    memset(s, 0, sizeof *s);
}

void firn_summary_deinit(firn_summary *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        firn_free(s->kv[i].key);
        firn_free(s->kv[i].value);
    }
    firn_free(s->kv);
    memset(s, 0, sizeof *s);
}

void firn_summary_set(firn_summary *s, const char *key, const char *value)
{
    for (size_t i = 0; i < s->n; i++) {
        if (strcmp(s->kv[i].key, key) == 0) {
            firn_free(s->kv[i].value);
            s->kv[i].value = firn_strdup(value);
            return;
        }
    }
    s->kv = firn_reallocarray(s->kv, s->n + 1, sizeof *s->kv);
    s->kv[s->n].key = firn_strdup(key);
    s->kv[s->n].value = firn_strdup(value);
    s->n++;
}

void firn_summary_set_i64(firn_summary *s, const char *key, int64_t value)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRId64, value);
    firn_summary_set(s, key, buf);
}

const char *firn_summary_get(const firn_summary *s, const char *key)
{
    for (size_t i = 0; s && i < s->n; i++) {
        if (strcmp(s->kv[i].key, key) == 0)
            return s->kv[i].value;
    }
    return NULL;
}

void firn_data_file_set_pq_metrics(firn_data_file *f, const struct firn_pq_file_metrics *m)
{
    f->record_count = (int64_t)m->record_count;
    f->file_size_in_bytes = (int64_t)m->file_size_bytes;
    for (size_t i = 0; i < m->n_fields; i++) {
        const firn_pq_field_metrics *pm = &m->fields[i];
        firn_col_metrics *cm = firn_data_file_metrics(f, pm->field_id);
        cm->column_size = (int64_t)pm->column_size_bytes;
        cm->value_count = (int64_t)pm->value_count;
        cm->null_count = (int64_t)pm->null_count;
        cm->nan_count = pm->has_nan_count ? (int64_t)pm->nan_count : -1;
        if (pm->has_lower)
            firn_data_file_set_bound(f, pm->field_id, false, pm->lower, pm->lower_len);
        if (pm->has_upper)
            firn_data_file_set_bound(f, pm->field_id, true, pm->upper, pm->upper_len);
    }
    if (m->split_offsets)
        firn_data_file_set_split_offsets(f, m->split_offsets, m->n_split_offsets);
}
