/* SPDX-License-Identifier: Apache-2.0 */
/* Test tool for tests/interop/test_manifest_*.py.
 *   manifest_tool write <dir>   commits three snapshots (append, row delta, delete) with the
 *                               snapshot producer into <dir>/metadata and prints, one line per
 *                               snapshot, "<manifest-list> <summary as k=v,...>"
 *   manifest_tool dump <list>   prints firn's reading of a manifest list and its manifests as
 *                               JSON lines (one per manifest, then one per entry) */
#include "firn/manifest.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static firn_field *make_schema(void)
{
    firn_field *s = firn_field_new(0, "table", FIRN_TYPE_STRUCT, true);
    firn_field_add(s, firn_field_new(1, "id", FIRN_TYPE_LONG, true));
    firn_field_add(s, firn_field_new(2, "name", FIRN_TYPE_STRING, false));
    firn_field_add(s, firn_field_new(3, "ts", FIRN_TYPE_TIMESTAMPTZ, false));
    firn_field_add(s, firn_field_new_decimal(4, "amount", 12, 2, false));
    return s;
}

static const char *SCHEMA_JSON =
    "{\"type\":\"struct\",\"schema-id\":0,\"identifier-field-ids\":[1],\"fields\":["
    "{\"id\":1,\"name\":\"id\",\"required\":true,\"type\":\"long\"},"
    "{\"id\":2,\"name\":\"name\",\"required\":false,\"type\":\"string\"},"
    "{\"id\":3,\"name\":\"ts\",\"required\":false,\"type\":\"timestamptz\"},"
    "{\"id\":4,\"name\":\"amount\",\"required\":false,\"type\":\"decimal(12,2)\"}]}";

/* File i: day(ts) = 19800 + i % 2 (null for i == 3), bucket[4](id) = i % 4, identity amount. */
static void make_file(firn_data_file *f, int i, firn_file_content content)
{
    char path[128];
    snprintf(path, sizeof path, "file:///warehouse/t/data/f%d.parquet", i);
    firn_data_file_init(f, content, path, 0);
    firn_value p[3];
    p[0] = firn_value_null((firn_ptype){FIRN_TYPE_DATE, 0, 0, 0});
    p[0].is_null = i == 3;
    p[0].i = 19800 + i % 2;
    p[1] = firn_value_null((firn_ptype){FIRN_TYPE_INT, 0, 0, 0});
    p[1].is_null = false;
    p[1].i = i % 4;
    p[2] = firn_value_null((firn_ptype){FIRN_TYPE_DECIMAL, 12, 2, 0});
    p[2].is_null = false;
    p[2].dec_hi = i % 2 ? -1 : 0;
    p[2].dec_lo = (uint64_t)(i % 2 ? -(1999 + i) : 1999 + i);
    firn_data_file_set_partition(f, p, 3);
    f->record_count = 1000 + i;
    f->file_size_in_bytes = 65536 + i;
    for (int32_t id = 1; id <= 4; id++) {
        firn_col_metrics *m = firn_data_file_metrics(f, id);
        m->column_size = 100 * id + i;
        m->value_count = 1000 + i;
        m->null_count = id == 1 ? 0 : i;
    }
    int64_t lo = -i, hi = 5000 + i;
    firn_data_file_set_bound(f, 1, false, &lo, 8);
    firn_data_file_set_bound(f, 1, true, &hi, 8);
    firn_data_file_set_bound(f, 2, false, "Ann\xc3\xa9", 5);
    firn_data_file_set_bound(f, 2, true, "Zoe", 3);
    int64_t offs[2] = {4, 1 << 20};
    firn_data_file_set_split_offsets(f, offs, 1 + i % 2);
    if (content == FIRN_CONTENT_EQUALITY_DELETES) {
        int32_t ids[1] = {1};
        firn_data_file_set_equality_ids(f, ids, 1);
    }
    if (content == FIRN_CONTENT_POSITION_DELETES)
        firn_data_file_set_referenced(f, "file:///warehouse/t/data/f0.parquet");
}

static void print_result(const firn_snapshot_result *r)
{
    printf("%s ", r->manifest_list);
    for (size_t i = 0; i < r->summary.n; i++)
        printf("%s%s=%s", i ? "," : "", r->summary.kv[i].key, r->summary.kv[i].value);
    printf("\n");
}

static int do_write(const char *dir)
{
    firn_err err = {0};
    firn_io *io = firn_io_local_new();
    firn_field *schema = make_schema();
    firn_partition_spec *spec = firn_partition_spec_new(0);
    firn_partition_spec_add(spec, 3, 1000, "ts_day", (firn_transform){FIRN_TRANSFORM_DAY, 0});
    firn_partition_spec_add(spec, 1, 1001, "id_bucket", (firn_transform){FIRN_TRANSFORM_BUCKET, 4});
    firn_partition_spec_add(spec, 4, 1002, "amount", (firn_transform){FIRN_TRANSFORM_IDENTITY, 0});
    char meta[512];
    snprintf(meta, sizeof meta, "%s/metadata", dir);
    firn_data_file data[4], dels[2];
    for (int i = 0; i < 4; i++)
        make_file(&data[i], i, FIRN_CONTENT_DATA);
    make_file(&dels[0], 10, FIRN_CONTENT_POSITION_DELETES);
    make_file(&dels[1], 11, FIRN_CONTENT_EQUALITY_DELETES);
    firn_snapshot_input in = {
        .format_version = 2,
        .snapshot_id = 101,
        .parent_snapshot_id = -1,
        .sequence_number = 1,
        .metadata_location = meta,
        .spec = spec,
        .schema = schema,
        .schema_json = SCHEMA_JSON,
        .added_data = data,
        .n_added_data = 3,
        .codec = FIRN_AVRO_CODEC_DEFLATE,
    };
    firn_snapshot_result r1 = {0}, r2 = {0}, r3 = {0};
    int status = 1;
    if (firn_snapshot_produce(io, &in, &r1, &err))
        goto out;
    print_result(&r1);
    in.snapshot_id = 102;
    in.parent_snapshot_id = 101;
    in.sequence_number = 2;
    in.parent_manifest_list = r1.manifest_list;
    in.parent_summary = &r1.summary;
    in.added_data = &data[3];
    in.n_added_data = 1;
    in.added_deletes = dels;
    in.n_added_deletes = 2;
    if (firn_snapshot_produce(io, &in, &r2, &err))
        goto out;
    print_result(&r2);
    const char *gone[] = {"file:///warehouse/t/data/f1.parquet"};
    in.snapshot_id = 103;
    in.parent_snapshot_id = 102;
    in.sequence_number = 3;
    in.parent_manifest_list = r2.manifest_list;
    in.parent_summary = &r2.summary;
    in.n_added_data = 0;
    in.n_added_deletes = 0;
    in.removed_paths = gone;
    in.n_removed_paths = 1;
    if (firn_snapshot_produce(io, &in, &r3, &err))
        goto out;
    print_result(&r3);
    status = 0;
out:
    if (status)
        fprintf(stderr, "manifest_tool: %s\n", err.msg);
    firn_snapshot_result_deinit(&r1);
    firn_snapshot_result_deinit(&r2);
    firn_snapshot_result_deinit(&r3);
    for (int i = 0; i < 4; i++)
        firn_data_file_deinit(&data[i]);
    firn_data_file_deinit(&dels[0]);
    firn_data_file_deinit(&dels[1]);
    firn_partition_spec_free(spec);
    firn_field_free(schema);
    firn_io_free(io);
    return status;
}

static void print_hex(const uint8_t *p, size_t n)
{
    printf("\"");
    for (size_t i = 0; i < n; i++)
        printf("%02x", p[i]);
    printf("\"");
}

static void print_entry(const firn_manifest_entry *e)
{
    const firn_data_file *f = &e->file;
    printf("{\"kind\":\"entry\",\"status\":%d,\"snapshot_id\":%" PRId64
           ",\"sequence_number\":%" PRId64 ",\"file_sequence_number\":%" PRId64
           ",\"content\":%d,\"file_path\":\"%s\","
           "\"file_format\":\"%s\",\"record_count\":%" PRId64 ",\"file_size_in_bytes\":%" PRId64
           ",\"partition\":[",
           (int)e->status, e->snapshot_id, e->sequence_number, e->file_sequence_number,
           (int)f->content, f->file_path, f->file_format, f->record_count, f->file_size_in_bytes);
    for (size_t i = 0; i < f->n_partition; i++) {
        firn_buf b;
        firn_buf_init(&b, 1 << 16);
        if (i)
            printf(",");
        if (f->partition[i].is_null || firn_value_to_bytes(&f->partition[i], &b, NULL))
            printf("null");
        else
            print_hex(b.data, b.len);
        firn_buf_deinit(&b);
    }
    printf("],\"metrics\":[");
    for (size_t i = 0; i < f->n_metrics; i++) {
        const firn_col_metrics *m = &f->metrics[i];
        printf("%s[%d,%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",", i ? "," : "",
               (int)m->field_id, m->column_size, m->value_count, m->null_count, m->nan_count);
        if (m->lower)
            print_hex(m->lower, m->lower_len);
        else
            printf("null");
        printf(",");
        if (m->upper)
            print_hex(m->upper, m->upper_len);
        else
            printf("null");
        printf("]");
    }
    printf("],\"split_offsets\":[");
    for (size_t i = 0; i < f->n_split_offsets; i++)
        printf("%s%" PRId64, i ? "," : "", f->split_offsets[i]);
    printf("],\"equality_ids\":[");
    for (size_t i = 0; i < f->n_equality_ids; i++)
        printf("%s%d", i ? "," : "", (int)f->equality_ids[i]);
    printf("]}\n");
}

static int do_dump(const char *list)
{
    firn_err err = {0};
    firn_io *io = firn_io_local_new();
    firn_manifest_file *mfs = NULL;
    size_t n = 0;
    int status = 1;
    if (firn_manifest_list_read(io, list, &mfs, &n, &err))
        goto out;
    for (size_t i = 0; i < n; i++) {
        const firn_manifest_file *mf = &mfs[i];
        printf("{\"kind\":\"manifest\",\"path\":\"%s\",\"length\":%" PRId64 ",\"spec_id\":%d,"
               "\"content\":%d,\"sequence_number\":%" PRId64 ",\"min_sequence_number\":%" PRId64
               ",\"added_snapshot_id\":%" PRId64 ",\"counts\":[%d,%d,%d,%" PRId64 ",%" PRId64
               ",%" PRId64 "]}\n",
               mf->manifest_path, mf->manifest_length, (int)mf->partition_spec_id, (int)mf->content,
               mf->sequence_number, mf->min_sequence_number, mf->added_snapshot_id,
               (int)mf->added_files_count, (int)mf->existing_files_count,
               (int)mf->deleted_files_count, mf->added_rows_count, mf->existing_rows_count,
               mf->deleted_rows_count);
        firn_manifest *m = NULL;
        if (firn_manifest_read(io, mf, &m, &err))
            goto out;
        for (size_t k = 0; k < m->n_entries; k++)
            print_entry(&m->entries[k]);
        firn_manifest_free(m);
    }
    status = 0;
out:
    if (status)
        fprintf(stderr, "manifest_tool: %s\n", err.msg);
    firn_manifest_files_free(mfs, n);
    firn_io_free(io);
    return status;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "write") == 0)
        return do_write(argv[2]);
    if (argc == 3 && strcmp(argv[1], "dump") == 0)
        return do_dump(argv[2]);
    fprintf(stderr, "usage: manifest_tool write <dir> | dump <manifest-list>\n");
    return 2;
}
