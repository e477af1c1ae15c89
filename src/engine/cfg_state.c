/* SPDX-License-Identifier: Apache-2.0 */
/* state.json in OLake's layout: LSNs, per-stream progress, OLake's incremental cursors, and the
 * atomic save (temporary file, fsync, rename, fsync of the folder). */
#include "cfg_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void firn_lsn_format(uint64_t lsn, char out[18])
{
    snprintf(out, 18, "%X/%X", (unsigned)(lsn >> 32), (unsigned)(lsn & 0xffffffffu));
}

static bool parse_hex32(const char *p, size_t len, uint32_t *out)
{
    if (len == 0 || len > 8)
        return false;
    uint32_t v = 0;
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        uint32_t d;
        if (c >= '0' && c <= '9')
            d = (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            d = (uint32_t)(c - 'A' + 10);
        else
            return false;
        v = v << 4 | d;
    }
    *out = v;
    return true;
}

firn_rc firn_lsn_parse(const char *text, uint64_t *out_lsn, firn_err *err)
{
    const char *slash = strchr(text, '/');
    uint32_t hi = 0, lo = 0;
    if (!slash || !parse_hex32(text, (size_t)(slash - text), &hi) ||
        !parse_hex32(slash + 1, strlen(slash + 1), &lo))
        return firn_err_set(err, FIRN_ERR_PARSE, "invalid LSN \"%.40s\"", text);
    *out_lsn = (uint64_t)hi << 32 | lo;
    return FIRN_OK;
}

firn_rc firn__cfg_bind_lsn(cfg_ctx *ctx, const json_t *v, void *base, firn_err *err)
{
    if (json_is_null(v))
        return FIRN_OK;
    FIRN_TRY(firn__cfg_mark_seen(ctx, base, err));
    firn_err perr = {0};
    if (!json_is_string(v) || firn_lsn_parse(json_string_value(v), base, &perr))
        return firn__cfg_fail(ctx, err, "\"%s\" must be an LSN such as \"16/B374D848\"",
                              firn__cfg_path(ctx));
    return FIRN_OK;
}

firn_stream_state *
firn_state_stream(firn_state *st, const char *namespace, const char *name, bool create)
{
    for (size_t i = 0; i < st->count; i++) {
        firn_stream_state *s = &st->items[i];
        if (strcmp(s->name, name) == 0 &&
            strcmp(s->namespace ? s->namespace : "", namespace ? namespace : "") == 0)
            return s;
    }
    if (!create)
        return NULL;
    if (st->count == st->cap) {
        st->cap = st->cap ? st->cap * 2 : 8;
        st->items = firn_reallocarray(st->items, st->cap, sizeof(*st->items));
    }
    firn_stream_state *s = &st->items[st->count++];
    memset(s, 0, sizeof(*s));
    s->namespace = firn_strdup(namespace ? namespace : "");
    s->name = firn_strdup(name);
    return s;
}

static void stream_state_free(firn_stream_state *s)
{
    firn_free(s->namespace);
    firn_free(s->name);
    firn_free(s->chunks);
    firn_free(s->cursor_field);
    firn_free(s->cursor_value);
}

firn_rc firn__cfg_bind_state_streams(cfg_ctx *ctx, const json_t *v, void *base, firn_err *err)
{
    firn_state *st = base;
    const cfg_node *item_node = NULL;
    for (const cfg_prop *p = firn__cfg_state_root.props; p->name; p++) {
        if (strcmp(p->name, "streams") == 0)
            item_node = p->node->items;
    }
    if (json_is_null(v))
        return FIRN_OK;
    if (!json_is_array(v))
        return firn__cfg_fail(ctx, err, "\"%s\" must be an array", firn__cfg_path(ctx));
    size_t i;
    const json_t *entry;
    json_array_foreach(v, i, entry)
    {
        size_t old = firn__cfg_path_index(ctx, i);
        firn_stream_state tmp = {0};
        size_t seen = ctx->n_seen;
        firn_rc rc = firn__cfg_walk(ctx, item_node, entry, &tmp, err);
        firn__cfg_seen_truncate(ctx, seen);
        if (rc == FIRN_OK && firn_state_stream(st, tmp.namespace, tmp.name, false))
            rc = firn__cfg_fail(ctx, err, "\"%s\": stream \"%s.%s\" appears twice",
                                firn__cfg_path(ctx), tmp.namespace ? tmp.namespace : "", tmp.name);
        firn__cfg_path_pop(ctx, old);
        if (rc == FIRN_OK) {
            firn_stream_state *s = firn_state_stream(st, tmp.namespace, tmp.name, true);
            firn_free(s->namespace);
            firn_free(s->name);
            *s = tmp;
            if (!s->namespace)
                s->namespace = firn_strdup("");
            continue;
        }
        stream_state_free(&tmp);
        return rc;
    }
    return FIRN_OK;
}

/* OLake keeps an incremental stream's cursor as {"<cursor column>": value}, and a cursor
 * "a:b" as {"a": value, "b": value}: read as cursor_field "a:b" with cursor_value [a, b]. */
firn_rc
firn__cfg_state_extra(cfg_ctx *ctx, const char *key, const json_t *v, void *base, firn_err *err)
{
    firn_stream_state *s = base;
    if (json_is_object(v) || json_is_array(v))
        return firn__cfg_fail(ctx, err, "unknown key \"%s\"", firn__cfg_path(ctx));
    if (s->cursor_field && (strchr(s->cursor_field, ':') || strcmp(s->cursor_field, key) == 0))
        return firn__cfg_fail(ctx, err,
                              "unknown key \"%s\" (a stream has one cursor, \"%s\", and at most "
                              "one fallback column)",
                              firn__cfg_path(ctx), s->cursor_field);
    char *text = firn__cfg_json_text(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text)
        text = firn_strdup("null");
    if (s->cursor_field) {
        firn_buf f, val;
        firn_buf_init(&f, 1 << 16);
        firn_buf_init(&val, 1 << 20);
        firn_rc_ignore(firn_buf_appendf(&f, "%s:%s", s->cursor_field, key));
        firn_rc_ignore(firn_buf_appendf(&val, "[%s,%s]", s->cursor_value, text));
        firn_free(s->cursor_field);
        firn_free(s->cursor_value);
        firn_free(text);
        s->cursor_field = (char *)firn_buf_take(&f, NULL);
        s->cursor_value = (char *)firn_buf_take(&val, NULL);
        return FIRN_OK;
    }
    s->cursor_field = firn_strdup(key);
    s->cursor_value = text;
    return FIRN_OK;
}

void firn_state_free(firn_state *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->count; i++)
        stream_state_free(&st->items[i]);
    firn_free(st->items);
    firn_free(st->snapshot_name);
    firn_strlist_clear(&st->global_streams);
    memset(st, 0, sizeof(*st));
}

static json_t *raw_json(const char *text)
{
    json_error_t jerr;
    json_t *v = text ? json_loads(text, JSON_DECODE_ANY, &jerr) : NULL;
    return v ? v : json_null();
}

static json_t *stream_state_json(const firn_stream_state *s)
{
    json_t *o = json_object();
    json_object_set_new(o, "stream", json_string(s->name));
    json_object_set_new(o, "namespace", json_string(s->namespace ? s->namespace : ""));
    json_object_set_new(o, "sync_mode",
                        json_string(s->sync_mode ? firn_sync_mode_olake_name(s->sync_mode) : ""));
    json_t *p = json_object();
    json_object_set_new(p, "chunks", s->chunks ? raw_json(s->chunks) : json_array());
    json_object_set_new(p, "backfill_done", json_boolean(s->backfill_done));
    json_object_set_new(p, "chunks_done", json_integer(s->chunks_done));
    if (s->committed_lsn) {
        char lsn[18];
        firn_lsn_format(s->committed_lsn, lsn);
        json_object_set_new(p, "lsn", json_string(lsn));
    }
    if (s->cursor_field) {
        json_object_set_new(p, "cursor_field", json_string(s->cursor_field));
        json_object_set_new(p, "cursor_value", raw_json(s->cursor_value));
    }
    if (s->last_commit_us)
        json_object_set_new(p, "last_commit_us", json_integer(s->last_commit_us));
    if (s->snapshot_id)
        json_object_set_new(p, "snapshot_id", json_integer(s->snapshot_id));
    json_object_set_new(o, "state", p);
    return o;
}

firn_rc firn_state_save(const firn_state *st, const char *path, firn_err *err)
{
    json_t *root = json_object();
    json_object_set_new(root, "type", json_string("GLOBAL"));
    json_t *global = json_object();
    json_t *gstate = json_object();
    char lsn[18];
    firn_lsn_format(st->global_lsn, lsn);
    /* No slot position acknowledged yet (incremental or full refresh only, or before the
     * first CDC acknowledgement): null, not a meaningless "0/0" (read back as none). */
    json_object_set_new(gstate, "lsn", st->global_lsn ? json_string(lsn) : json_null());
    if (st->snapshot_name)
        json_object_set_new(gstate, "snapshot_name", json_string(st->snapshot_name));
    json_object_set_new(global, "state", gstate);
    json_t *gstreams = json_array();
    for (size_t i = 0; i < st->global_streams.count; i++)
        json_array_append_new(gstreams, json_string(st->global_streams.items[i]));
    json_object_set_new(global, "streams", gstreams);
    json_object_set_new(root, "global", global);
    json_t *streams = json_array();
    for (size_t i = 0; i < st->count; i++)
        json_array_append_new(streams, stream_state_json(&st->items[i]));
    json_object_set_new(root, "streams", streams);
    char *text = firn__cfg_json_text(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text)
        return firn_err_set(err, FIRN_ERR_INTERNAL, "could not encode state file \"%s\"", path);
    firn_rc rc = firn__cfg_write_atomic(path, text, strlen(text), err);
    firn_free(text);
    return rc;
}

static firn_rc write_all(int fd, const char *p, size_t len, const char *tmp, firn_err *err)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not write \"%s\"", tmp);
        p += n;
        len -= (size_t)n;
    }
    return FIRN_OK;
}

void firn__cfg_dir_of(const char *path, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, cap, ".");
    else if (slash == path)
        snprintf(out, cap, "/");
    else
        snprintf(out, cap, "%.*s", (int)(slash - path), path);
}

static void fsync_dir_of(const char *path)
{
    char dir[4096];
    firn__cfg_dir_of(path, dir, sizeof(dir));
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd); /* best effort: some file systems refuse fsync on folders */
        close(fd);
    }
}

firn_rc firn__cfg_write_atomic(const char *path, const char *text, size_t len, firn_err *err)
{
    char tmp[4200];
    int n = snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof(tmp))
        return firn_err_set(err, FIRN_ERR_INVALID, "path too long: \"%.100s\"", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not create \"%s\"", tmp);
    firn_rc rc = write_all(fd, text, len, tmp, err);
    if (rc == FIRN_OK && write_all(fd, "\n", 1, tmp, err))
        rc = FIRN_ERR_IO;
    if (rc == FIRN_OK && fsync(fd) != 0)
        rc = firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not fsync \"%s\"", tmp);
    if (close(fd) != 0 && rc == FIRN_OK)
        rc = firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not close \"%s\"", tmp);
    if (rc == FIRN_OK && rename(tmp, path) != 0)
        rc = firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not rename \"%s\" to \"%s\"", tmp,
                                path);
    if (rc) {
        unlink(tmp);
        return rc;
    }
    fsync_dir_of(path);
    return FIRN_OK;
}
