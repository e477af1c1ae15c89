/* SPDX-License-Identifier: Apache-2.0 */
/* Manifest and manifest-list write -> read round trips through the local FileIO: every field
 * of data files and entries, partition summaries, exact lengths, sequence-number inheritance. */
#include "t.h"
#include "firn/manifest.h"

#include <stdlib.h>
#include <sys/stat.h>

static char g_dir[256];

static void make_dir(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/firn-ice-manifest-XXXXXX");
    T_TRUE(mkdtemp(g_dir) != NULL);
}

static void remove_dir(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    T_EQ_INT(system(cmd), 0);
}

static firn_field *make_schema(void)
{
    firn_field *s = firn_field_new(0, "table", FIRN_TYPE_STRUCT, true);
    firn_field_add(s, firn_field_new(1, "id", FIRN_TYPE_LONG, true));
    firn_field_add(s, firn_field_new(2, "name", FIRN_TYPE_STRING, false));
    firn_field_add(s, firn_field_new_decimal(3, "amount", 12, 2, false));
    firn_field_add(s, firn_field_new(4, "ts", FIRN_TYPE_TIMESTAMPTZ, false));
    firn_field_add(s, firn_field_new(5, "u", FIRN_TYPE_UUID, false));
    return s;
}

static firn_partition_spec *make_spec(void)
{
    firn_partition_spec *spec = firn_partition_spec_new(3);
    firn_transform t;
    T_OK(firn_transform_parse("day", &t, NULL));
    firn_partition_spec_add(spec, 4, 1000, "ts_day", t);
    T_OK(firn_transform_parse("bucket[16]", &t, NULL));
    firn_partition_spec_add(spec, 1, 1001, "id_bucket", t);
    T_OK(firn_transform_parse("identity", &t, NULL));
    firn_partition_spec_add(spec, 3, 1002, "amount", t);
    firn_partition_spec_add(spec, 2, 1003, "1 name", t);
    return spec;
}

static void make_file(firn_data_file *f, int i, firn_file_content content)
{
    char path[256];
    snprintf(path, sizeof path, "file:///w/t/data/f-%d.parquet", i);
    firn_data_file_init(f, content, path, 3);
    firn_value part[4];
    part[0] = firn_value_null((firn_ptype){FIRN_TYPE_DATE, 0, 0, 0});
    part[0].is_null = i == 2;
    part[0].i = 19000 + i;
    part[1] = firn_value_null((firn_ptype){FIRN_TYPE_INT, 0, 0, 0});
    part[1].is_null = false;
    part[1].i = i % 16;
    part[2] = firn_value_null((firn_ptype){FIRN_TYPE_DECIMAL, 12, 2, 0});
    part[2].is_null = false;
    part[2].dec_hi = -1;
    part[2].dec_lo = (uint64_t)(-1234 - i);
    part[3] = firn_value_null((firn_ptype){FIRN_TYPE_STRING, 0, 0, 0});
    part[3].is_null = false;
    part[3].bytes = firn_slice_cstr(i % 2 ? "x/y" : "\xc3\xa9t\xc3\xa9");
    firn_data_file_set_partition(f, part, 4);
    f->record_count = 100 + i;
    f->file_size_in_bytes = 4096 + i;
    for (int32_t id = 1; id <= 3; id++) {
        firn_col_metrics *m = firn_data_file_metrics(f, id);
        m->column_size = 10 * id + i;
        m->value_count = 100 + i;
        m->null_count = id - 1;
        if (id == 3)
            m->nan_count = 0;
    }
    int64_t lo = i, hi = 1000 + i;
    firn_data_file_set_bound(f, 1, false, &lo, 8);
    firn_data_file_set_bound(f, 1, true, &hi, 8);
    firn_data_file_set_bound(f, 2, false, "a", 1);
    int64_t offs[2] = {4, 2048};
    firn_data_file_set_split_offsets(f, offs, i % 2 ? 2 : 1);
    if (content == FIRN_CONTENT_EQUALITY_DELETES) {
        int32_t ids[1] = {1};
        firn_data_file_set_equality_ids(f, ids, 1);
    }
    if (content == FIRN_CONTENT_POSITION_DELETES)
        firn_data_file_set_referenced(f, "file:///w/t/data/f-0.parquet");
    if (i == 1) {
        f->has_sort_order_id = true;
        f->sort_order_id = 0;
    }
}

static void same_file(const firn_data_file *a, const firn_data_file *b)
{
    T_EQ_INT(a->content, b->content);
    T_EQ_STR(a->file_path, b->file_path);
    T_EQ_STR(a->file_format, b->file_format);
    T_EQ_INT(a->spec_id, b->spec_id);
    T_EQ_UINT(a->n_partition, b->n_partition);
    for (size_t i = 0; i < a->n_partition; i++) {
        T_EQ_INT(a->partition[i].is_null, b->partition[i].is_null);
        T_EQ_INT(a->partition[i].type.type, b->partition[i].type.type);
        T_EQ_INT(a->partition[i].type.precision, b->partition[i].type.precision);
        if (!a->partition[i].is_null)
            T_EQ_INT(firn_value_compare(&a->partition[i], &b->partition[i]), 0);
    }
    T_EQ_INT(a->record_count, b->record_count);
    T_EQ_INT(a->file_size_in_bytes, b->file_size_in_bytes);
    T_EQ_UINT(a->n_metrics, b->n_metrics);
    for (size_t i = 0; i < a->n_metrics; i++) {
        const firn_col_metrics *x = &a->metrics[i], *y = &b->metrics[i];
        T_EQ_INT(x->field_id, y->field_id);
        T_EQ_INT(x->column_size, y->column_size);
        T_EQ_INT(x->value_count, y->value_count);
        T_EQ_INT(x->null_count, y->null_count);
        T_EQ_INT(x->nan_count, y->nan_count);
        T_EQ_INT(x->lower != NULL, y->lower != NULL);
        T_EQ_INT(x->upper != NULL, y->upper != NULL);
        T_EQ_UINT(x->lower_len, y->lower_len);
        T_EQ_UINT(x->upper_len, y->upper_len);
        if (x->lower)
            T_EQ_MEM(x->lower, y->lower, x->lower_len);
        if (x->upper)
            T_EQ_MEM(x->upper, y->upper, x->upper_len);
    }
    T_EQ_UINT(a->n_split_offsets, b->n_split_offsets);
    for (size_t i = 0; i < a->n_split_offsets; i++)
        T_EQ_INT(a->split_offsets[i], b->split_offsets[i]);
    T_EQ_INT(a->equality_ids != NULL, b->equality_ids != NULL);
    T_EQ_UINT(a->n_equality_ids, b->n_equality_ids);
    T_EQ_INT(a->has_sort_order_id, b->has_sort_order_id);
    T_EQ_INT(a->sort_order_id, b->sort_order_id);
    T_EQ_INT(a->referenced_data_file != NULL, b->referenced_data_file != NULL);
    if (a->referenced_data_file)
        T_EQ_STR(a->referenced_data_file, b->referenced_data_file);
}

T_TEST(manifest_round_trip)
{
    make_dir();
    firn_err err = {0};
    firn_io *io = firn_io_local_new();
    firn_field *schema = make_schema();
    firn_partition_spec *spec = make_spec();
    firn_manifest_opts o = {2,  FIRN_MANIFEST_DATA,     spec, schema, "{\"type\":\"struct\"}", 7,
                            42, FIRN_AVRO_CODEC_DEFLATE};
    firn_manifest_writer *w = NULL;
    T_OK_ERR(firn_manifest_writer_new(&o, &w, &err), &err);
    firn_data_file files[4];
    for (int i = 0; i < 4; i++) {
        make_file(&files[i], i, FIRN_CONTENT_DATA);
        if (i < 3) {
            T_OK_ERR(firn_manifest_writer_add_file(w, &files[i], &err), &err);
        } else {
            firn_manifest_entry e = {FIRN_ENTRY_EXISTING, 11, 5, 6, files[i]};
            T_OK_ERR(firn_manifest_writer_add(w, &e, &err), &err);
        }
    }
    firn_data_file bad;
    make_file(&bad, 9, FIRN_CONTENT_POSITION_DELETES);
    T_EQ_INT(firn_manifest_writer_add_file(w, &bad, &err), FIRN_ERR_INVALID);
    char loc[512];
    snprintf(loc, sizeof loc, "%s/metadata/m0.avro", g_dir);
    firn_manifest_file mf;
    T_OK_ERR(firn_manifest_writer_finish(w, io, loc, &mf, &err), &err);
    firn_manifest_writer_free(w);
    uint64_t size = 0;
    T_OK_ERR(firn_io_size(io, loc, &size, &err), &err);
    T_EQ_INT(mf.manifest_length, (int64_t)size);
    T_EQ_INT(mf.added_files_count, 3);
    T_EQ_INT(mf.existing_files_count, 1);
    T_EQ_INT(mf.added_rows_count, 100 + 101 + 102);
    T_EQ_INT(mf.existing_rows_count, 103);
    T_EQ_INT(mf.sequence_number, FIRN_SEQ_NULL);
    T_EQ_INT(mf.min_sequence_number, FIRN_SEQ_NULL);
    T_EQ_INT(mf.partition_spec_id, 3);
    T_EQ_UINT(mf.n_partitions, 4);
    T_TRUE(mf.partitions[0].contains_null);
    T_FALSE(mf.partitions[1].contains_null);
    T_EQ_INT(mf.partitions[0].contains_nan, -1);
    T_EQ_UINT(mf.partitions[0].lower_len, 4);
    int32_t lo = 0, hi = 0;
    memcpy(&lo, mf.partitions[0].lower, 4);
    memcpy(&hi, mf.partitions[0].upper, 4);
    T_EQ_INT(lo, 19000);
    T_EQ_INT(hi, 19003);
    T_EQ_MEM(mf.partitions[3].lower, "x/y", 3);

    /* Read it back with inheritance from a list record carrying sequence number 9. */
    mf.sequence_number = 9;
    mf.min_sequence_number = 5;
    firn_manifest *m = NULL;
    T_OK_ERR(firn_manifest_read(io, &mf, &m, &err), &err);
    T_EQ_UINT(m->n_entries, 4);
    T_EQ_INT(m->format_version, 2);
    T_EQ_INT(m->spec_id, 3);
    T_EQ_INT(m->content, FIRN_MANIFEST_DATA);
    T_EQ_STR(m->schema_json, "{\"type\":\"struct\"}");
    T_TRUE(strstr(m->partition_spec_json, "\"bucket[16]\"") != NULL);
    for (int i = 0; i < 4; i++) {
        same_file(&files[i], &m->entries[i].file);
        T_EQ_INT(m->entries[i].status, i < 3 ? FIRN_ENTRY_ADDED : FIRN_ENTRY_EXISTING);
        T_EQ_INT(m->entries[i].snapshot_id, i < 3 ? 42 : 11);
        T_EQ_INT(m->entries[i].sequence_number, i < 3 ? 9 : 5);
        T_EQ_INT(m->entries[i].file_sequence_number, i < 3 ? 9 : 6);
    }
    firn_manifest_free(m);
    /* Without inheritance the nulls stay. */
    firn_buf raw;
    firn_buf_init(&raw, 1 << 20);
    T_OK_ERR(firn_io_read(io, loc, &raw, &err), &err);
    T_OK_ERR(firn_manifest_parse(raw.data, raw.len, NULL, &m, &err), &err);
    T_EQ_INT(m->entries[0].sequence_number, FIRN_SEQ_NULL);
    firn_manifest_free(m);
    firn_buf_deinit(&raw);

    /* Manifest list: the unassigned numbers become the commit's. */
    mf.sequence_number = FIRN_SEQ_NULL;
    mf.min_sequence_number = FIRN_SEQ_NULL;
    firn_manifest_file two[2];
    firn_manifest_file_copy(&two[0], &mf);
    firn_manifest_file_copy(&two[1], &mf);
    firn_free(two[1].manifest_path);
    two[1].manifest_path = firn_strdup("file:///old.avro");
    two[1].sequence_number = 2;
    two[1].min_sequence_number = 1;
    two[1].content = FIRN_MANIFEST_DELETES;
    two[1].has_partitions = false;
    snprintf(loc, sizeof loc, "%s/metadata/snap-1.avro", g_dir);
    uint64_t list_len = 0;
    T_OK_ERR(firn_manifest_list_write(io, loc, 43, 41, 9, two, 2, &list_len, &err), &err);
    T_OK_ERR(firn_io_size(io, loc, &size, &err), &err);
    T_EQ_UINT(list_len, size);
    firn_manifest_file *back = NULL;
    size_t n = 0;
    T_OK_ERR(firn_manifest_list_read(io, loc, &back, &n, &err), &err);
    T_EQ_UINT(n, 2);
    T_EQ_STR(back[0].manifest_path, mf.manifest_path);
    T_EQ_INT(back[0].manifest_length, mf.manifest_length);
    T_EQ_INT(back[0].sequence_number, 9);
    T_EQ_INT(back[0].min_sequence_number, 9);
    T_EQ_INT(back[0].added_snapshot_id, 42);
    T_EQ_INT(back[0].added_files_count, 3);
    T_EQ_INT(back[0].existing_rows_count, 103);
    T_EQ_UINT(back[0].n_partitions, 4);
    T_EQ_INT(back[0].partitions[0].contains_null, 1);
    T_EQ_MEM(back[0].partitions[0].lower, mf.partitions[0].lower, 4);
    T_EQ_INT(back[1].sequence_number, 2);
    T_EQ_INT(back[1].min_sequence_number, 1);
    T_EQ_INT(back[1].content, FIRN_MANIFEST_DELETES);
    T_FALSE(back[1].has_partitions);
    firn_manifest_files_free(back, n);
    firn_manifest_file_deinit(&two[0]);
    firn_manifest_file_deinit(&two[1]);
    firn_manifest_file_deinit(&mf);
    for (int i = 0; i < 4; i++)
        firn_data_file_deinit(&files[i]);
    firn_data_file_deinit(&bad);
    firn_partition_spec_free(spec);
    firn_field_free(schema);
    firn_io_free(io);
    remove_dir();
}

T_TEST(delete_manifest_and_empty)
{
    make_dir();
    firn_err err = {0};
    firn_io *io = firn_io_local_new();
    firn_field *schema = make_schema();
    firn_partition_spec *spec = make_spec();
    firn_manifest_opts o = {2,  FIRN_MANIFEST_DELETES, spec, schema, "{}", 0,
                            42, FIRN_AVRO_CODEC_NULL};
    firn_manifest_writer *w = NULL;
    T_OK_ERR(firn_manifest_writer_new(&o, &w, &err), &err);
    char loc[512];
    snprintf(loc, sizeof loc, "%s/metadata/d.avro", g_dir);
    firn_manifest_file mf;
    T_EQ_INT(firn_manifest_writer_finish(w, io, loc, &mf, &err), FIRN_ERR_INVALID);
    firn_data_file pos, eq, eq_bad;
    make_file(&pos, 0, FIRN_CONTENT_POSITION_DELETES);
    make_file(&eq, 1, FIRN_CONTENT_EQUALITY_DELETES);
    make_file(&eq_bad, 2, FIRN_CONTENT_EQUALITY_DELETES);
    firn_free(eq_bad.equality_ids);
    eq_bad.equality_ids = NULL;
    eq_bad.n_equality_ids = 0;
    T_OK_ERR(firn_manifest_writer_add_file(w, &pos, &err), &err);
    T_OK_ERR(firn_manifest_writer_add_file(w, &eq, &err), &err);
    T_EQ_INT(firn_manifest_writer_add_file(w, &eq_bad, &err), FIRN_ERR_INVALID);
    T_OK_ERR(firn_manifest_writer_finish(w, io, loc, &mf, &err), &err);
    firn_manifest_writer_free(w);
    mf.sequence_number = 4;
    firn_manifest *m = NULL;
    T_OK_ERR(firn_manifest_read(io, &mf, &m, &err), &err);
    T_EQ_INT(m->content, FIRN_MANIFEST_DELETES);
    T_EQ_UINT(m->n_entries, 2);
    same_file(&pos, &m->entries[0].file);
    same_file(&eq, &m->entries[1].file);
    T_EQ_INT(m->entries[1].file.equality_ids[0], 1);
    firn_manifest_free(m);
    firn_manifest_file_deinit(&mf);
    firn_data_file_deinit(&pos);
    firn_data_file_deinit(&eq);
    firn_data_file_deinit(&eq_bad);
    firn_partition_spec_free(spec);
    firn_field_free(schema);
    firn_io_free(io);
    remove_dir();
}

T_MAIN(T_CASE(manifest_round_trip), T_CASE(delete_manifest_and_empty))
