/* SPDX-License-Identifier: Apache-2.0 */
/* Avro object container reader: header, blocks with codecs null and deflate, and a generic
 * decoder of records into value trees driven by the writer schema (Avro spec "Object Container
 * Files", "Binary Encoding"). Input is untrusted: every length is checked. */
#include "avro_int.h"

#include <stdalign.h>
#include <string.h>

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used;
    size_t cap;
    alignas(16) uint8_t data[];
} arena_chunk;

typedef struct meta_kv {
    firn_slice key;
    firn_slice value;
} meta_kv;

struct firn_avro_reader {
    firn_rd file;
    meta_kv *meta;
    size_t n_meta;
    firn_avro_schema_set *schema;
    bool deflate;
    uint8_t sync[16];
    firn_buf block;
    firn_rd cur;
    int64_t block_left;
    arena_chunk *chunks;
    size_t n_values;
    firn_avro_value *record;
    firn_err *err;
};

#define ARENA_CHUNK_BYTES ((size_t)64 << 10)

static void *arena_alloc(firn_avro_reader *r, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    for (arena_chunk *c = r->chunks; c; c = c->next) {
        if (c->cap - c->used >= size) {
            void *p = c->data + c->used;
            c->used += size;
            return p;
        }
    }
    size_t cap = size > ARENA_CHUNK_BYTES ? size : ARENA_CHUNK_BYTES;
    arena_chunk *c = firn_malloc(sizeof *c + cap);
    c->cap = cap;
    c->used = size;
    c->next = r->chunks;
    r->chunks = c;
    return c->data;
}

static void arena_reset(firn_avro_reader *r)
{
    for (arena_chunk *c = r->chunks; c; c = c->next)
        c->used = 0;
    r->n_values = 0;
}

static firn_rc bad(firn_avro_reader *r, const char *what)
{
    return firn_err_set(r->err, FIRN_ERR_PARSE, "malformed avro data: %s", what);
}

static int64_t rd_long(firn_rd *rd)
{
    return firn_unzigzag64(firn_rd_uvarint(rd));
}

/* Reads a length-prefixed bytes/string value as a slice into the input. */
static bool rd_slice(firn_rd *rd, firn_slice *out)
{
    int64_t n = rd_long(rd);
    if (!firn_rd_ok(rd) || n < 0 || (uint64_t)n > firn_rd_remaining(rd)) {
        firn_rd_fail(rd);
        return false;
    }
    out->len = (size_t)n;
    out->ptr = firn_rd_bytes(rd, (size_t)n);
    if (!out->ptr)
        out->ptr = (const uint8_t *)"";
    return true;
}

/* True when a value of schema s always takes at least one byte. */
static bool takes_bytes(const firn_avro_schema *s)
{
    switch (s->type) {
    case FIRN_AVRO_NULL:
        return false;
    case FIRN_AVRO_FIXED:
        return s->fixed_size > 0;
    case FIRN_AVRO_RECORD:
        for (size_t i = 0; i < s->n_fields; i++) {
            if (s->fields[i].type->type != FIRN_AVRO_RECORD && takes_bytes(s->fields[i].type))
                return true;
        }
        return false;
    default:
        return true;
    }
}

static firn_rc
decode(firn_avro_reader *r, const firn_avro_schema *s, int depth, firn_avro_value *v);

static firn_rc count_values(firn_avro_reader *r, uint64_t n)
{
    if (n > FIRN__AVRO_MAX_VALUES - r->n_values)
        return firn_err_set(r->err, FIRN_ERR_TOO_LARGE, "avro record has more than %zu values",
                            FIRN__AVRO_MAX_VALUES);
    r->n_values += (size_t)n;
    return FIRN_OK;
}

/* Arrays and maps: blocks of items until a zero count; a negative count has a byte size. */
static firn_rc decode_items(
    firn_avro_reader *r, const firn_avro_schema *s, int depth, bool with_keys, firn_avro_value *v)
{
    firn_avro_value *items = NULL;
    firn_slice *keys = NULL;
    size_t n = 0, cap = 0;
    firn_rc rc = FIRN_OK;
    for (;;) {
        int64_t count = rd_long(&r->cur);
        if (!firn_rd_ok(&r->cur) || count == INT64_MIN) {
            rc = bad(r, "truncated array block");
            goto out;
        }
        if (count == 0)
            break;
        if (count < 0) {
            count = -count;
            (void)rd_long(&r->cur);
        }
        if ((takes_bytes(s->items) || with_keys) && (uint64_t)count > firn_rd_remaining(&r->cur)) {
            rc = bad(r, "array count larger than the data");
            goto out;
        }
        rc = count_values(r, (uint64_t)count);
        if (rc)
            goto out;
        if (n + (size_t)count > cap) {
            cap = n + (size_t)count;
            items = firn_reallocarray(items, cap, sizeof *items);
            if (with_keys)
                keys = firn_reallocarray(keys, cap, sizeof *keys);
        }
        for (int64_t i = 0; i < count; i++, n++) {
            if (with_keys && !rd_slice(&r->cur, &keys[n])) {
                rc = bad(r, "truncated map key");
                goto out;
            }
            rc = decode(r, s->items, depth + 1, &items[n]);
            if (rc)
                goto out;
        }
    }
    v->n = n;
    if (n > 0) {
        v->items = arena_alloc(r, n * sizeof *items);
        memcpy(v->items, items, n * sizeof *items);
        if (with_keys) {
            v->keys = arena_alloc(r, n * sizeof *keys);
            memcpy(v->keys, keys, n * sizeof *keys);
        }
    }
out:
    firn_free(items);
    firn_free(keys);
    return rc;
}

static firn_rc
decode_record(firn_avro_reader *r, const firn_avro_schema *s, int depth, firn_avro_value *v)
{
    FIRN_TRY(count_values(r, s->n_fields));
    v->n = s->n_fields;
    if (s->n_fields == 0)
        return FIRN_OK;
    v->items = arena_alloc(r, s->n_fields * sizeof *v->items);
    for (size_t i = 0; i < s->n_fields; i++)
        FIRN_TRY(decode(r, s->fields[i].type, depth + 1, &v->items[i]));
    return FIRN_OK;
}

static firn_rc decode_scalar(firn_avro_reader *r, const firn_avro_schema *s, firn_avro_value *v)
{
    firn_rd *rd = &r->cur;
    switch (s->type) {
    case FIRN_AVRO_NULL:
        return FIRN_OK;
    case FIRN_AVRO_BOOLEAN: {
        uint8_t b = firn_rd_u8(rd);
        if (b > 1)
            return bad(r, "boolean byte not 0 or 1");
        v->b = b == 1;
        break;
    }
    case FIRN_AVRO_INT:
        v->l = rd_long(rd);
        if (v->l < INT32_MIN || v->l > INT32_MAX)
            return bad(r, "int out of range");
        break;
    case FIRN_AVRO_LONG:
        v->l = rd_long(rd);
        break;
    case FIRN_AVRO_FLOAT: {
        uint32_t bits = firn_rd_le32(rd);
        float f;
        memcpy(&f, &bits, sizeof f);
        v->d = f;
        break;
    }
    case FIRN_AVRO_DOUBLE: {
        uint64_t bits = firn_rd_le64(rd);
        memcpy(&v->d, &bits, sizeof v->d);
        break;
    }
    case FIRN_AVRO_BYTES:
    case FIRN_AVRO_STRING:
        if (!rd_slice(rd, &v->bytes))
            return bad(r, "truncated bytes");
        break;
    case FIRN_AVRO_FIXED:
        v->bytes.len = s->fixed_size;
        v->bytes.ptr = firn_rd_bytes(rd, s->fixed_size);
        if (!v->bytes.ptr)
            v->bytes.ptr = (const uint8_t *)"";
        break;
    case FIRN_AVRO_ENUM:
        v->l = rd_long(rd);
        if (v->l < 0 || (uint64_t)v->l >= s->n_symbols)
            return bad(r, "enum index out of range");
        break;
    default:
        return bad(r, "unexpected type");
    }
    if (!firn_rd_ok(rd))
        return bad(r, "truncated value");
    return FIRN_OK;
}

static firn_rc decode(firn_avro_reader *r, const firn_avro_schema *s, int depth, firn_avro_value *v)
{
    if (depth > FIRN__AVRO_MAX_DEPTH)
        return bad(r, "values nested too deeply");
    memset(v, 0, sizeof *v);
    v->branch = -1;
    if (s->type == FIRN_AVRO_UNION) {
        int64_t b = rd_long(&r->cur);
        if (!firn_rd_ok(&r->cur) || b < 0 || (uint64_t)b >= s->n_branches)
            return bad(r, "union branch out of range");
        FIRN_TRY(decode(r, s->branches[b], depth + 1, v));
        v->branch = (int32_t)b;
        return FIRN_OK;
    }
    v->type = s->type;
    v->schema = s;
    switch (s->type) {
    case FIRN_AVRO_RECORD:
        return decode_record(r, s, depth, v);
    case FIRN_AVRO_ARRAY:
        return decode_items(r, s, depth, false, v);
    case FIRN_AVRO_MAP:
        return decode_items(r, s, depth, true, v);
    default:
        return decode_scalar(r, s, v);
    }
}

static firn_rc read_header(firn_avro_reader *r)
{
    const uint8_t *magic = firn_rd_bytes(&r->file, 4);
    if (!magic || memcmp(magic, FIRN__AVRO_MAGIC, 4) != 0)
        return firn_err_set(r->err, FIRN_ERR_PARSE, "not an avro container file (bad magic)");
    size_t cap = 0;
    for (;;) {
        int64_t count = rd_long(&r->file);
        if (!firn_rd_ok(&r->file) || count == INT64_MIN)
            return bad(r, "truncated header");
        if (count == 0)
            break;
        if (count < 0) {
            count = -count;
            (void)rd_long(&r->file);
        }
        if ((uint64_t)count > firn_rd_remaining(&r->file))
            return bad(r, "header metadata count larger than the file");
        for (int64_t i = 0; i < count; i++) {
            if (r->n_meta == cap) {
                cap = cap ? cap * 2 : 8;
                r->meta = firn_reallocarray(r->meta, cap, sizeof *r->meta);
            }
            meta_kv *kv = &r->meta[r->n_meta];
            if (!rd_slice(&r->file, &kv->key) || !rd_slice(&r->file, &kv->value))
                return bad(r, "truncated header metadata");
            r->n_meta++;
        }
    }
    const uint8_t *sync = firn_rd_bytes(&r->file, 16);
    if (!sync)
        return bad(r, "truncated header sync marker");
    memcpy(r->sync, sync, 16);
    return FIRN_OK;
}

static firn_rc check_codec_and_schema(firn_avro_reader *r)
{
    size_t len = 0;
    const uint8_t *codec = firn_avro_reader_meta(r, "avro.codec", &len);
    if (codec && !(len == 4 && memcmp(codec, "null", 4) == 0)) {
        if (len == 7 && memcmp(codec, "deflate", 7) == 0)
            r->deflate = true;
        else
            return firn_err_set(r->err, FIRN_ERR_UNSUPPORTED, "unsupported avro codec \"%.*s\"",
                                (int)(len > 32 ? 32 : len), (const char *)codec);
    }
    const uint8_t *schema = firn_avro_reader_meta(r, "avro.schema", &len);
    if (!schema)
        return firn_err_set(r->err, FIRN_ERR_PARSE, "avro file has no \"avro.schema\"");
    return firn_avro_schema_parse((const char *)schema, len, &r->schema, r->err);
}

firn_rc firn_avro_reader_open(const void *data, size_t len, firn_avro_reader **out, firn_err *err)
{
    firn_avro_reader *r = firn_calloc(1, sizeof *r);
    r->err = err;
    firn_rd_init(&r->file, data, len);
    firn_buf_init(&r->block, FIRN__AVRO_MAX_BLOCK_BYTES);
    firn_rc rc = read_header(r);
    if (!rc)
        rc = check_codec_and_schema(r);
    if (rc) {
        firn_avro_reader_free(r);
        return rc;
    }
    *out = r;
    return FIRN_OK;
}

void firn_avro_reader_free(firn_avro_reader *r)
{
    if (!r)
        return;
    firn_free(r->meta);
    firn_avro_schema_set_free(r->schema);
    firn_buf_deinit(&r->block);
    arena_chunk *c = r->chunks;
    while (c) {
        arena_chunk *next = c->next;
        firn_free(c);
        c = next;
    }
    firn_free(r);
}

const uint8_t *firn_avro_reader_meta(const firn_avro_reader *r, const char *key, size_t *out_len)
{
    size_t klen = strlen(key);
    for (size_t i = 0; i < r->n_meta; i++) {
        if (r->meta[i].key.len == klen && memcmp(r->meta[i].key.ptr, key, klen) == 0) {
            if (out_len)
                *out_len = r->meta[i].value.len;
            return r->meta[i].value.ptr;
        }
    }
    return NULL;
}

const firn_avro_schema *firn_avro_reader_schema(const firn_avro_reader *r)
{
    return firn_avro_schema_root(r->schema);
}

/* Loads the next block into r->cur; *out_end when the file has no more blocks. */
static firn_rc load_block(firn_avro_reader *r, bool *out_end)
{
    *out_end = false;
    while (r->block_left == 0) {
        if (firn_rd_remaining(&r->file) == 0) {
            *out_end = true;
            return FIRN_OK;
        }
        int64_t count = rd_long(&r->file);
        int64_t size = rd_long(&r->file);
        if (!firn_rd_ok(&r->file) || count < 0 || size < 0 ||
            (uint64_t)size > firn_rd_remaining(&r->file))
            return bad(r, "truncated block header");
        const uint8_t *payload = firn_rd_bytes(&r->file, (size_t)size);
        const uint8_t *sync = firn_rd_bytes(&r->file, 16);
        if (!sync || memcmp(sync, r->sync, 16) != 0)
            return bad(r, "block sync marker does not match the header");
        firn_buf_reset(&r->block);
        if (size > 0) {
            if (r->deflate)
                FIRN_TRY(firn__avro_inflate(&r->block, payload, (size_t)size, r->err));
            else
                FIRN_TRY(firn_buf_append(&r->block, payload, (size_t)size));
        }
        firn_rd_init(&r->cur, r->block.data ? r->block.data : (const uint8_t *)"", r->block.len);
        r->block_left = count;
    }
    return FIRN_OK;
}

firn_rc firn_avro_reader_next(firn_avro_reader *r, const firn_avro_value **out, firn_err *err)
{
    r->err = err;
    *out = NULL;
    bool end = false;
    FIRN_TRY(load_block(r, &end));
    if (end)
        return FIRN_OK;
    arena_reset(r);
    firn_avro_value *v = arena_alloc(r, sizeof *v);
    FIRN_TRY(decode(r, firn_avro_schema_root(r->schema), 0, v));
    r->block_left--;
    *out = v;
    return FIRN_OK;
}

const firn_avro_value *firn_avro_value_field(const firn_avro_value *record, const char *name)
{
    if (!record || record->type != FIRN_AVRO_RECORD)
        return NULL;
    int i = firn_avro_schema_field_index(record->schema, name);
    return i < 0 ? NULL : &record->items[i];
}

const firn_avro_value *firn_avro_value_field_id(const firn_avro_value *record, int32_t id)
{
    if (!record || record->type != FIRN_AVRO_RECORD)
        return NULL;
    for (size_t i = 0; i < record->schema->n_fields; i++) {
        if (record->schema->fields[i].field_id == id)
            return &record->items[i];
    }
    return NULL;
}
