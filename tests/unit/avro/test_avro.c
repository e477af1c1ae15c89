/* SPDX-License-Identifier: Apache-2.0 */
/* Avro encoders, container writer and reader: byte-exact encodings, round trips with codecs
 * null and deflate over several blocks, header metadata, schema parsing and malformed input. */
#include "firn/avro.h"
#include "t.h"

static const char *SCHEMA =
    "{\"type\":\"record\",\"name\":\"rec\",\"namespace\":\"t\",\"fields\":["
    "{\"name\":\"id\",\"type\":\"long\",\"field-id\":1},"
    "{\"name\":\"name\",\"type\":[\"null\",\"string\"],\"default\":null,\"field-id\":2},"
    "{\"name\":\"ok\",\"type\":\"boolean\",\"field-id\":3},"
    "{\"name\":\"f\",\"type\":\"float\"},"
    "{\"name\":\"d\",\"type\":\"double\"},"
    "{\"name\":\"i\",\"type\":{\"type\":\"int\",\"logicalType\":\"date\"}},"
    "{\"name\":\"u\",\"type\":{\"type\":\"fixed\",\"name\":\"uuid_fixed\",\"size\":16}},"
    "{\"name\":\"u2\",\"type\":[\"null\",\"uuid_fixed\"]},"
    "{\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"color\",\"symbols\":[\"R\",\"G\"]}},"
    "{\"name\":\"tags\",\"type\":{\"type\":\"array\",\"items\":\"long\",\"element-id\":7}},"
    "{\"name\":\"m\",\"type\":{\"type\":\"map\",\"values\":\"bytes\",\"key-id\":8,\"value-id\":9}},"
    "{\"name\":\"kv\",\"type\":[\"null\",{\"type\":\"array\",\"logicalType\":\"map\",\"items\":"
    "{\"type\":\"record\",\"name\":\"k10_v11\",\"fields\":[{\"name\":\"key\",\"type\":\"int\","
    "\"field-id\":10},{\"name\":\"value\",\"type\":\"long\",\"field-id\":11}]}}]}]}";

static void encode_row(firn_buf *b, int64_t i)
{
    uint8_t uuid[16];
    for (int k = 0; k < 16; k++)
        uuid[k] = (uint8_t)(i + k);
    T_OK(firn_avro_put_long(b, i * 1000003 - 77));
    if (i % 3 == 0) {
        T_OK(firn_avro_put_long(b, 0));
    } else {
        char name[32];
        snprintf(name, sizeof name, "row-%lld-\xc3\xa9", (long long)i);
        T_OK(firn_avro_put_long(b, 1));
        T_OK(firn_avro_put_string(b, name));
    }
    T_OK(firn_avro_put_bool(b, i % 2 == 0));
    T_OK(firn_avro_put_float(b, (float)i / 4.0f));
    T_OK(firn_avro_put_double(b, -(double)i / 8.0));
    T_OK(firn_avro_put_long(b, (int64_t)(int32_t)(i * 7 - 19000)));
    T_OK(firn_avro_put_fixed(b, uuid, 16));
    T_OK(firn_avro_put_long(b, 1));
    T_OK(firn_avro_put_fixed(b, uuid, 16));
    T_OK(firn_avro_put_long(b, i % 2));
    /* tags: i elements split in two blocks */
    if (i > 0) {
        T_OK(firn_avro_put_long(b, 1));
        T_OK(firn_avro_put_long(b, i));
        if (i > 1) {
            T_OK(firn_avro_put_long(b, i - 1));
            for (int64_t k = 1; k < i; k++)
                T_OK(firn_avro_put_long(b, i + k));
        }
    }
    T_OK(firn_avro_put_long(b, 0));
    T_OK(firn_avro_put_long(b, 1));
    T_OK(firn_avro_put_string(b, "k"));
    T_OK(firn_avro_put_bytes(b, "\x00\x01", 2));
    T_OK(firn_avro_put_long(b, 0));
    T_OK(firn_avro_put_long(b, 1));
    T_OK(firn_avro_put_long(b, 2));
    T_OK(firn_avro_put_long(b, 10));
    T_OK(firn_avro_put_long(b, i));
    T_OK(firn_avro_put_long(b, -20));
    T_OK(firn_avro_put_long(b, INT64_MIN + i));
    T_OK(firn_avro_put_long(b, 0));
}

static void check_row(const firn_avro_value *v, int64_t i)
{
    T_EQ_INT(v->type, FIRN_AVRO_RECORD);
    T_EQ_UINT(v->n, 12);
    T_EQ_INT(firn_avro_value_field(v, "id")->l, i * 1000003 - 77);
    T_EQ_INT(firn_avro_value_field_id(v, 1)->l, i * 1000003 - 77);
    const firn_avro_value *name = firn_avro_value_field_id(v, 2);
    if (i % 3 == 0) {
        T_EQ_INT(name->type, FIRN_AVRO_NULL);
        T_EQ_INT(name->branch, 0);
    } else {
        char want[32];
        snprintf(want, sizeof want, "row-%lld-\xc3\xa9", (long long)i);
        T_EQ_INT(name->type, FIRN_AVRO_STRING);
        T_EQ_INT(name->branch, 1);
        T_EQ_UINT(name->bytes.len, strlen(want));
        T_EQ_MEM(name->bytes.ptr, want, strlen(want));
    }
    T_EQ_INT(firn_avro_value_field(v, "ok")->b, i % 2 == 0);
    T_EQ_DBL(firn_avro_value_field(v, "f")->d, (double)((float)i / 4.0f));
    T_EQ_DBL(firn_avro_value_field(v, "d")->d, -(double)i / 8.0);
    const firn_avro_value *date = firn_avro_value_field(v, "i");
    T_EQ_INT(date->l, (int32_t)(i * 7 - 19000));
    T_EQ_STR(date->schema->logical_type, "date");
    const firn_avro_value *u = firn_avro_value_field(v, "u");
    const firn_avro_value *u2 = firn_avro_value_field(v, "u2");
    T_EQ_UINT(u->bytes.len, 16);
    T_EQ_INT(u->bytes.ptr[15], (uint8_t)(i + 15));
    T_EQ_INT(u2->type, FIRN_AVRO_FIXED);
    T_TRUE(u2->schema == u->schema);
    T_EQ_MEM(u2->bytes.ptr, u->bytes.ptr, 16);
    T_EQ_INT(firn_avro_value_field(v, "e")->l, i % 2);
    const firn_avro_value *tags = firn_avro_value_field(v, "tags");
    T_EQ_UINT(tags->n, (size_t)i);
    for (int64_t k = 0; k < i; k++)
        T_EQ_INT(tags->items[k].l, i + k);
    T_EQ_INT(tags->schema->element_id, 7);
    const firn_avro_value *m = firn_avro_value_field(v, "m");
    T_EQ_UINT(m->n, 1);
    T_EQ_MEM(m->keys[0].ptr, "k", 1);
    T_EQ_MEM(m->items[0].bytes.ptr, "\x00\x01", 2);
    T_EQ_INT(m->schema->key_id, 8);
    T_EQ_INT(m->schema->value_id, 9);
    const firn_avro_value *kv = firn_avro_value_field(v, "kv");
    T_EQ_INT(kv->type, FIRN_AVRO_ARRAY);
    T_EQ_UINT(kv->n, 2);
    T_EQ_INT(firn_avro_value_field_id(&kv->items[0], 10)->l, 10);
    T_EQ_INT(firn_avro_value_field_id(&kv->items[0], 11)->l, i);
    T_EQ_INT(firn_avro_value_field_id(&kv->items[1], 10)->l, -20);
    T_EQ_INT(firn_avro_value_field_id(&kv->items[1], 11)->l, INT64_MIN + i);
    T_EQ_STR(kv->schema->logical_type, "map");
}

static void write_file(firn_avro_codec codec, size_t block_bytes, int rows, firn_buf *out)
{
    firn_err err = {0};
    firn_avro_writer *w = firn_avro_writer_new(SCHEMA, codec, 64 << 20);
    firn_avro_writer_set_block_bytes(w, block_bytes);
    T_OK_ERR(firn_avro_writer_set_meta(w, "schema-id", "3", 1, &err), &err);
    T_OK_ERR(firn_avro_writer_set_meta(w, "bin", "\x00\xff", 2, &err), &err);
    T_EQ_INT(firn_avro_writer_set_meta(w, "avro.x", "1", 1, &err), FIRN_ERR_INVALID);
    for (int i = 0; i < rows; i++) {
        encode_row(firn_avro_writer_record(w), i);
        T_OK_ERR(firn_avro_writer_end_record(w, &err), &err);
    }
    if (rows > 0)
        T_EQ_INT(firn_avro_writer_set_meta(w, "late", "1", 1, &err), FIRN_ERR_INVALID);
    T_EQ_UINT(firn_avro_writer_count(w), (uint64_t)rows);
    firn_buf_init(out, 64 << 20);
    T_OK_ERR(firn_avro_writer_finish(w, out, &err), &err);
    firn_avro_writer_free(w);
}

static void read_file(const firn_buf *file, int rows)
{
    firn_err err = {0};
    firn_avro_reader *r = NULL;
    T_OK_ERR(firn_avro_reader_open(file->data, file->len, &r, &err), &err);
    size_t len = 0;
    const uint8_t *sid = firn_avro_reader_meta(r, "schema-id", &len);
    T_TRUE(sid && len == 1 && sid[0] == '3');
    const uint8_t *bin = firn_avro_reader_meta(r, "bin", &len);
    T_TRUE(bin && len == 2 && bin[1] == 0xff);
    T_TRUE(firn_avro_reader_meta(r, "nope", NULL) == NULL);
    T_EQ_STR(firn_avro_reader_schema(r)->name, "t.rec");
    const firn_avro_value *v = NULL;
    for (int i = 0; i < rows; i++) {
        T_OK_ERR(firn_avro_reader_next(r, &v, &err), &err);
        T_TRUE(v != NULL);
        check_row(v, i);
    }
    T_OK_ERR(firn_avro_reader_next(r, &v, &err), &err);
    T_TRUE(v == NULL);
    firn_avro_reader_free(r);
}

T_TEST(encodings_are_exact)
{
    firn_buf b;
    firn_buf_init(&b, 1024);
    T_OK(firn_avro_put_long(&b, 0));
    T_OK(firn_avro_put_long(&b, -1));
    T_OK(firn_avro_put_long(&b, 1));
    T_OK(firn_avro_put_long(&b, -64));
    T_OK(firn_avro_put_long(&b, 64));
    T_OK(firn_avro_put_string(&b, "foo"));
    T_OK(firn_avro_put_bool(&b, true));
    T_OK(firn_avro_put_double(&b, 1.0));
    static const uint8_t want[] = {0x00, 0x01, 0x02, 0x7f, 0x80, 0x01, 0x06, 'f',  'o', 'o',
                                   0x01, 0,    0,    0,    0,    0,    0,    0xf0, 0x3f};
    T_EQ_UINT(b.len, sizeof want);
    T_EQ_MEM(b.data, want, sizeof want);
    firn_buf_deinit(&b);
}

T_TEST(round_trip_null_codec_many_blocks)
{
    firn_buf file;
    write_file(FIRN_AVRO_CODEC_NULL, 100, 50, &file);
    T_EQ_MEM(file.data, "Obj\x01", 4);
    read_file(&file, 50);
    firn_buf_deinit(&file);
}

T_TEST(round_trip_deflate)
{
    firn_buf file, plain;
    write_file(FIRN_AVRO_CODEC_DEFLATE, 1 << 20, 300, &file);
    write_file(FIRN_AVRO_CODEC_NULL, 1 << 20, 300, &plain);
    T_TRUE(file.len < plain.len);
    read_file(&file, 300);
    firn_buf_deinit(&file);
    firn_buf_deinit(&plain);
    write_file(FIRN_AVRO_CODEC_DEFLATE, 333, 120, &file);
    read_file(&file, 120);
    firn_buf_deinit(&file);
}

T_TEST(empty_file_reads_no_records)
{
    firn_buf file;
    write_file(FIRN_AVRO_CODEC_DEFLATE, 100, 0, &file);
    read_file(&file, 0);
    firn_buf_deinit(&file);
}

T_TEST(fixed_sync_marker)
{
    firn_err err = {0};
    uint8_t sync[16];
    memset(sync, 0xab, sizeof sync);
    firn_avro_writer *w = firn_avro_writer_new("\"long\"", FIRN_AVRO_CODEC_NULL, 1024);
    firn_avro_writer_set_sync(w, sync);
    T_OK(firn_avro_put_long(firn_avro_writer_record(w), 5));
    T_OK_ERR(firn_avro_writer_end_record(w, &err), &err);
    firn_buf out;
    firn_buf_init(&out, 1024);
    T_OK_ERR(firn_avro_writer_finish(w, &out, &err), &err);
    firn_avro_writer_free(w);
    /* ... sync, block count 1, size 1, payload 0x0a, sync */
    T_EQ_MEM(out.data + out.len - 35, sync, 16);
    T_EQ_MEM(out.data + out.len - 19, "\x02\x02\x0a", 3);
    T_EQ_MEM(out.data + out.len - 16, sync, 16);
    firn_buf_deinit(&out);
}

T_TEST(writer_limit)
{
    firn_err err = {0};
    firn_avro_writer *w = firn_avro_writer_new("\"string\"", FIRN_AVRO_CODEC_NULL, 200);
    firn_avro_writer_set_block_bytes(w, 10);
    firn_rc rc = FIRN_OK;
    for (int i = 0; i < 100 && !rc; i++) {
        rc = firn_avro_put_string(firn_avro_writer_record(w), "0123456789");
        if (!rc)
            rc = firn_avro_writer_end_record(w, &err);
    }
    T_EQ_INT(rc, FIRN_ERR_TOO_LARGE);
    firn_avro_writer_free(w);
}

T_TEST(malformed_input_is_rejected)
{
    firn_err err = {0};
    firn_avro_reader *r = NULL;
    T_EQ_INT(firn_avro_reader_open("Obj\x02", 4, &r, &err), FIRN_ERR_PARSE);
    T_EQ_INT(firn_avro_reader_open("Obj\x01\x02", 5, &r, &err), FIRN_ERR_PARSE);
    firn_buf file;
    write_file(FIRN_AVRO_CODEC_DEFLATE, 1 << 20, 10, &file);
    /* Every truncation fails cleanly: at open or at some record, never crashes. */
    for (size_t cut = 0; cut < file.len; cut += 7) {
        firn_rc rc = firn_avro_reader_open(file.data, cut, &r, &err);
        if (rc) {
            T_TRUE(rc == FIRN_ERR_PARSE);
            continue;
        }
        const firn_avro_value *v = NULL;
        int n = 0;
        do {
            rc = firn_avro_reader_next(r, &v, &err);
        } while (!rc && v && ++n < 100);
        T_TRUE(rc != FIRN_OK || n < 10);
        firn_avro_reader_free(r);
    }
    /* A wrong sync marker at the end of the block. */
    file.data[file.len - 1] ^= 1;
    T_OK_ERR(firn_avro_reader_open(file.data, file.len, &r, &err), &err);
    const firn_avro_value *v = NULL;
    T_EQ_INT(firn_avro_reader_next(r, &v, &err), FIRN_ERR_PARSE);
    firn_avro_reader_free(r);
    firn_buf_deinit(&file);
}

T_TEST(schema_errors)
{
    firn_err err = {0};
    firn_avro_schema_set *s = NULL;
    const char *bad[] = {
        "{\"type\":\"nope\"}",
        "[\"null\",[\"int\"]]",
        "{\"type\":\"record\",\"name\":\"a\",\"fields\":[{\"name\":\"x\",\"type\":\"b\"}]}",
        "{\"type\":\"record\",\"name\":\"a\",\"fields\":[{\"name\":\"x\",\"type\":{\"type\":"
        "\"fixed\",\"name\":\"a\",\"size\":1}}]}",
        "{",
        "[]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        T_EQ_INT(firn_avro_schema_parse(bad[i], strlen(bad[i]), &s, &err), FIRN_ERR_PARSE);
    const char *rec =
        "{\"type\":\"record\",\"name\":\"node\",\"fields\":[{\"name\":\"v\",\"type\":"
        "\"int\",\"field-id\":\"5\"},{\"name\":\"next\",\"type\":[\"null\",\"node\"]}]}";
    T_OK_ERR(firn_avro_schema_parse(rec, strlen(rec), &s, &err), &err);
    const firn_avro_schema *root = firn_avro_schema_root(s);
    T_EQ_INT(root->fields[0].field_id, 5);
    T_TRUE(root->fields[1].type->branches[1] == root);
    T_EQ_INT(firn_avro_schema_field_index(root, "next"), 1);
    T_EQ_INT(firn_avro_schema_field_index(root, "x"), -1);
    firn_avro_schema_set_free(s);
}

T_MAIN(T_CASE(encodings_are_exact),
       T_CASE(round_trip_null_codec_many_blocks),
       T_CASE(round_trip_deflate),
       T_CASE(empty_file_reads_no_records),
       T_CASE(fixed_sync_marker),
       T_CASE(writer_limit),
       T_CASE(malformed_input_is_rejected),
       T_CASE(schema_errors))
