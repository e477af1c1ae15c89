/* SPDX-License-Identifier: Apache-2.0 */
/* Loading the configuration files: read, parse with jansson (duplicate keys rejected), walk the
 * tables of cfg_schema.c, post-process, and resolve the streams against the source and the
 * destination. */
#include "cfg_int.h"
#include "firn/net.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CFG_FILE_MAX (64u << 20)

static firn_rc read_file(const char *path, char **out, size_t *out_len, firn_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return firn_err_set(err, FIRN_ERR_CONFIG, "cannot open \"%s\": %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        return firn_err_set(err, FIRN_ERR_CONFIG, "cannot read \"%s\": it is a directory", path);
    }
    firn_buf b;
    firn_buf_init(&b, CFG_FILE_MAX);
    firn_rc rc = FIRN_OK;
    for (;;) {
        char chunk[4096];
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            rc = firn_err_set(err, FIRN_ERR_CONFIG, "cannot read \"%s\": %s", path, strerror(e));
            break;
        }
        if (n == 0)
            break;
        if (firn_buf_append(&b, chunk, (size_t)n)) {
            rc = firn_err_set(err, FIRN_ERR_CONFIG, "\"%s\" is larger than 64 MiB", path);
            break;
        }
    }
    close(fd);
    if (rc) {
        firn_buf_deinit(&b);
        return rc;
    }
    *out = (char *)firn_buf_take(&b, out_len);
    return FIRN_OK;
}

static firn_rc
parse_json(const char *text, size_t len, const char *name, json_t **out, firn_err *err)
{
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) { /* a UTF-8 byte-order mark (Notepad) */
        text += 3;
        len -= 3;
    }
    size_t blank = 0; /* text need not end with a NUL (firn_config_parse) */
    while (blank < len && text[blank] && strchr(" \t\r\n", text[blank]))
        blank++;
    if (blank == len)
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "%s: the file is empty; it must hold a JSON object", name);
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    char brief[FIRN_JSON_ERROR_BRIEF_MAX];
    if (!root) /* never the text near the error: it may be inside a password */
        return firn_err_set(err, FIRN_ERR_CONFIG, "%s:%d:%d: invalid JSON: %s", name, jerr.line,
                            jerr.column,
                            firn_json_error_brief(brief, sizeof(brief), jerr.text, text, len,
                                                  (size_t)jerr.position));
    if (!json_is_object(root)) {
        json_decref(root);
        return firn_err_set(err, FIRN_ERR_CONFIG, "%s: the top level must be a JSON object", name);
    }
    *out = root;
    return FIRN_OK;
}

static firn_rc parse_source(cfg_ctx *ctx, json_t *root, firn_err *err)
{
    firn_source_config *s = &ctx->cfg->source;
    firn__cfg_source_free(s);
    firn__cfg_source_defaults(s);
    FIRN_TRY(firn__cfg_walk(ctx, &firn__cfg_source_root, root, s, err));
    FIRN_TRY(firn__cfg_source_post(ctx, s, err));
    ctx->cfg->has_source = true;
    return FIRN_OK;
}

static firn_rc parse_destination(cfg_ctx *ctx, json_t *root, firn_err *err)
{
    firn_destination_config *d = &ctx->cfg->destination;
    firn__cfg_destination_free(d);
    firn__cfg_destination_defaults(d);
    FIRN_TRY(firn__cfg_walk(ctx, &firn__cfg_destination_root, root, d, err));
    FIRN_TRY(firn__cfg_destination_post(ctx, d, err));
    ctx->cfg->has_destination = true;
    return FIRN_OK;
}

static void streams_free(firn_streams_config *s)
{
    for (size_t i = 0; i < s->count; i++)
        firn__cfg_stream_free(&s->items[i]);
    firn_free(s->items);
    s->items = NULL;
    s->count = 0;
}

static firn_rc parse_streams(cfg_ctx *ctx, json_t *root, firn_err *err)
{
    firn_streams_config *s = &ctx->cfg->streams;
    streams_free(s);
    FIRN_TRY(firn__cfg_walk(ctx, &firn__cfg_streams_root, root, s, err));
    FIRN_TRY(firn__cfg_streams_post(ctx, s, err));
    ctx->cfg->has_streams = true;
    return FIRN_OK;
}

static firn_rc parse_state(cfg_ctx *ctx, json_t *root, firn_err *err)
{
    firn_state_free(&ctx->cfg->state);
    return firn__cfg_walk(ctx, &firn__cfg_state_root, root, &ctx->cfg->state, err);
}

firn_rc firn_config_parse(firn_config *cfg,
                          const char *which,
                          const char *text,
                          size_t len,
                          const char *display_name,
                          firn_err *err)
{
    static const struct {
        const char *name;
        firn_rc (*parse)(cfg_ctx *, json_t *, firn_err *);
    } kinds[] = {{"source", parse_source},
                 {"destination", parse_destination},
                 {"streams", parse_streams},
                 {"state", parse_state}};
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (strcmp(kinds[i].name, which) != 0)
            continue;
        json_t *root = NULL;
        FIRN_TRY(parse_json(text, len, display_name, &root, err));
        cfg_ctx ctx = {.file = display_name, .cfg = cfg};
        firn_rc rc = kinds[i].parse(&ctx, root, err);
        firn__cfg_ctx_deinit(&ctx);
        json_decref(root);
        return rc;
    }
    return firn_err_set(err, FIRN_ERR_INVALID, "unknown configuration file kind \"%s\"", which);
}

static firn_rc
load_one(firn_config *cfg, const char *which, const char *path, char **out_path, firn_err *err)
{
    char *text = NULL;
    size_t len = 0;
    FIRN_TRY(read_file(path, &text, &len, err));
    firn_rc rc = firn_config_parse(cfg, which, text, len, path, err);
    firn_free(text);
    if (rc == FIRN_OK)
        *out_path = firn_strdup(path);
    return rc;
}

/* Replaces {database} and {schema} in pattern; OLake's "prefix:schema" becomes "prefix_schema". */
static char *expand_namespace(const char *pattern, const char *database, const char *schema)
{
    firn_buf b;
    firn_buf_init(&b, 4096);
    for (const char *p = pattern; *p;) {
        if (strncmp(p, "{database}", 10) == 0) {
            firn_rc_ignore(firn_buf_append_cstr(&b, database ? database : "firn"));
            p += 10;
        } else if (strncmp(p, "{schema}", 8) == 0) {
            firn_rc_ignore(firn_buf_append_cstr(&b, schema ? schema : "public"));
            p += 8;
        } else {
            firn_rc_ignore(firn_buf_append(&b, *p == ':' ? "_" : p, 1));
            p++;
        }
    }
    return (char *)firn_buf_take(&b, NULL);
}

static firn_rc resolve_stream(firn_config *cfg, firn_stream_config *st, firn_err *err)
{
    const firn_source_config *src = &cfg->source;
    const firn_destination_config *dst = &cfg->destination;
    if (st->sync_mode == FIRN_SYNC_UNSET)
        st->sync_mode = cfg->has_source ? src->default_mode : FIRN_SYNC_FULL_REFRESH_CDC;
    const char *pattern = st->target_namespace ? st->target_namespace
                                               : (cfg->has_destination ? dst->namespace_pattern
                                                                       : "{database}_{schema}");
    /* A MySQL database is both {database} and {schema}: the default pattern names it once. */
    const bool mysql = cfg->has_source && firn_source_is_mysql(src);
    if (mysql && !st->target_namespace && strcmp(pattern, "{database}_{schema}") == 0)
        pattern = "{schema}";
    char *ns = expand_namespace(pattern,
                                mysql             ? st->namespace
                                : cfg->has_source ? src->database
                                                  : NULL,
                                st->namespace);
    firn_free(st->target_namespace);
    st->target_namespace = ns;
    if (cfg->has_destination && firn_destination_is_biglake(dst) && strchr(ns, '.'))
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "stream \"%s.%s\": target namespace \"%s\" has a dot, and BigLake "
                            "takes single-level namespaces only: set the stream's "
                            "\"target_namespace\" (or the destination's \"namespace\") to a "
                            "name without dots",
                            st->namespace, st->name, ns);
    if (!st->target_table)
        st->target_table = firn_strdup(st->name);
    if (st->commit.interval_ms == 0)
        st->commit.interval_ms = cfg->has_destination ? dst->commit.interval_ms : 10000;
    if (st->commit.max_bytes == 0)
        st->commit.max_bytes = cfg->has_destination ? dst->commit.max_bytes : 64u << 20;
    if (st->soft_delete && cfg->has_destination && !dst->metadata_columns)
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "%s: stream \"%s.%s\" sets soft_delete, which marks tombstones in "
                            "_firn_op, but the destination sets metadata_columns to false",
                            cfg->streams_path ? cfg->streams_path : "streams", st->namespace,
                            st->name);
    bool wants_wal =
        st->sync_mode == FIRN_SYNC_FULL_REFRESH_CDC || st->sync_mode == FIRN_SYNC_CDC_ONLY;
    if (st->selected && wants_wal && cfg->has_source &&
        src->update_method == FIRN_UPDATE_STANDALONE)
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "%s: stream \"%s.%s\" uses sync mode \"%s\" but the source's "
                            "update_method is \"Standalone\" (no WAL)",
                            cfg->streams_path ? cfg->streams_path : "streams", st->namespace,
                            st->name, firn_sync_mode_name(st->sync_mode));
    return FIRN_OK;
}

firn_rc firn_config_resolve(firn_config *cfg, firn_err *err)
{
    for (size_t i = 0; i < cfg->streams.count; i++)
        FIRN_TRY(resolve_stream(cfg, &cfg->streams.items[i], err));
    return FIRN_OK;
}

/* A state file that does not exist yet is written at the first commit: its folder must exist
 * and be writable now, not only when the run ends with the rows already committed. */
static firn_rc check_new_state_path(const char *path, firn_err *err)
{
    char dir[4096];
    firn__cfg_dir_of(path, dir, sizeof(dir));
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "state file \"%s\": folder \"%s\" does not exist; create it or pass "
                            "another --state",
                            path, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "state file \"%s\": cannot write in folder \"%s\": %s", path, dir,
                            strerror(errno));
    return FIRN_OK;
}

firn_rc firn_config_load(const firn_config_paths *paths, firn_config *cfg, firn_err *err)
{
    firn_rc rc = FIRN_OK;
    if (paths->source)
        rc = load_one(cfg, "source", paths->source, &cfg->source_path, err);
    if (rc == FIRN_OK && paths->destination)
        rc = load_one(cfg, "destination", paths->destination, &cfg->destination_path, err);
    if (rc == FIRN_OK && paths->streams)
        rc = load_one(cfg, "streams", paths->streams, &cfg->streams_path, err);
    if (rc == FIRN_OK && paths->state) {
        if (access(paths->state, F_OK) == 0)
            rc = load_one(cfg, "state", paths->state, &cfg->state_path, err);
        else if ((rc = check_new_state_path(paths->state, err)) == FIRN_OK)
            cfg->state_path = firn_strdup(paths->state); /* a first run starts empty */
    }
    if (rc == FIRN_OK)
        rc = firn_config_resolve(cfg, err);
    if (rc)
        firn_config_free(cfg);
    return rc;
}

void firn_config_free(firn_config *cfg)
{
    if (!cfg)
        return;
    firn_free(cfg->source_path);
    firn_free(cfg->destination_path);
    firn_free(cfg->streams_path);
    firn_free(cfg->state_path);
    firn__cfg_source_free(&cfg->source);
    firn__cfg_destination_free(&cfg->destination);
    streams_free(&cfg->streams);
    firn_state_free(&cfg->state);
    firn_strlist_clear(&cfg->warnings);
    memset(cfg, 0, sizeof(*cfg));
}
