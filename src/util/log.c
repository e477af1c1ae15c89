/* SPDX-License-Identifier: Apache-2.0 */
/* Levelled, per-component logging as logfmt or JSON lines (valkey serverLog, curl trace). */
#include "firn/util.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LOG_COMPS_MAX     16
#define LOG_COMP_NAME_MAX 16
#define LOG_LINE_MAX      4096

typedef struct log_comp {
    char name[LOG_COMP_NAME_MAX];
    firn_log_level level;
} log_comp;

static struct {
    firn_log_level level;
    log_comp comps[LOG_COMPS_MAX];
    size_t n_comps;
    bool json;
    int fd;
} log_cfg = {FIRN_LOG_INFO, {{"", FIRN_LOG_OFF}}, 0, false, 2};

static const char *level_names[] = {"off", "error", "warn", "info", "debug", "trace"};

static bool parse_level(const char *s, size_t len, firn_log_level *out)
{
    for (int i = 0; i <= FIRN_LOG_TRACE; i++) {
        if (strlen(level_names[i]) == len && memcmp(level_names[i], s, len) == 0) {
            *out = (firn_log_level)i;
            return true;
        }
    }
    return false;
}

static firn_rc apply_item(const char *item,
                          size_t len,
                          firn_log_level *level,
                          log_comp *comps,
                          size_t *n_comps,
                          firn_err *err)
{
    const char *eq = memchr(item, '=', len);
    log_comp c = {{0}, FIRN_LOG_OFF};
    const char *name = item;
    size_t name_len = 0;
    if (item[0] == '-') {
        name = item + 1;
        name_len = len - 1;
    } else if (eq) {
        name_len = (size_t)(eq - item);
        if (!parse_level(eq + 1, len - name_len - 1, &c.level))
            return firn_err_set(err, FIRN_ERR_CONFIG, "unknown log level in \"%.*s\"", (int)len,
                                item);
    } else {
        if (!parse_level(item, len, level))
            return firn_err_set(err, FIRN_ERR_CONFIG, "unknown log level \"%.*s\"", (int)len, item);
        return FIRN_OK;
    }
    if (name_len == 0 || name_len >= LOG_COMP_NAME_MAX || *n_comps == LOG_COMPS_MAX)
        return firn_err_set(err, FIRN_ERR_CONFIG, "invalid log component in \"%.*s\"", (int)len,
                            item);
    memcpy(c.name, name, name_len);
    comps[(*n_comps)++] = c;
    return FIRN_OK;
}

firn_rc firn_log_configure(const char *spec, firn_err *err)
{
    firn_log_level level = FIRN_LOG_INFO;
    log_comp comps[LOG_COMPS_MAX];
    size_t n_comps = 0;
    const char *p = spec;
    while (*p) {
        size_t len = strcspn(p, ",");
        if (len > 0)
            FIRN_TRY(apply_item(p, len, &level, comps, &n_comps, err));
        p += len;
        if (*p == ',')
            p++;
    }
    log_cfg.level = level;
    memcpy(log_cfg.comps, comps, sizeof(comps[0]) * n_comps);
    log_cfg.n_comps = n_comps;
    return FIRN_OK;
}

void firn_log_set_json(bool json)
{
    log_cfg.json = json;
}

void firn_log_set_fd(int fd)
{
    log_cfg.fd = fd;
}

bool firn_log_enabled(firn_log_level level, const char *comp)
{
    for (size_t i = 0; i < log_cfg.n_comps; i++) {
        if (strcmp(log_cfg.comps[i].name, comp) == 0)
            return level <= log_cfg.comps[i].level;
    }
    return level <= log_cfg.level;
}

/* Appends s as a logfmt value (bare when safe, else quoted) or a JSON string. */
static void put_value(firn_buf *b, const char *s, bool json)
{
    bool bare = !json && *s && strcspn(s, " =\"\\\n\r\t") == strlen(s);
    if (bare) {
        firn_rc_ignore(firn_buf_append_cstr(b, s));
        return;
    }
    firn_rc_ignore(firn_wr_u8(b, '"'));
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            firn_rc_ignore(firn_buf_appendf(b, "\\%c", *p));
        else if (*p == '\n')
            firn_rc_ignore(firn_buf_append_cstr(b, "\\n"));
        else if (*p < 0x20)
            firn_rc_ignore(firn_buf_appendf(b, "\\u%04x", *p));
        else
            firn_rc_ignore(firn_wr_u8(b, *p));
    }
    firn_rc_ignore(firn_wr_u8(b, '"'));
}

static void put_field(firn_buf *b, const char *key, const char *value, bool first)
{
    if (log_cfg.json) {
        firn_rc_ignore(firn_buf_appendf(b, "%s\"%s\":", first ? "{" : ",", key));
        put_value(b, value, true);
    } else {
        firn_rc_ignore(firn_buf_appendf(b, "%s%s=", first ? "" : " ", key));
        put_value(b, value, false);
    }
}

static void put_header(firn_buf *b, firn_log_level level, const char *comp)
{
    char ts[40];
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    size_t n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + n, sizeof(ts) - n, ".%03ldZ", now.tv_nsec / 1000000);
    put_field(b, "ts", ts, true);
    put_field(b, "level", level_names[level], false);
    put_field(b, "comp", comp, false);
}

static void emit(firn_buf *b)
{
    if (log_cfg.json)
        firn_rc_ignore(firn_wr_u8(b, '}'));
    if (b->len >= LOG_LINE_MAX - 1)
        firn_buf_truncate(b, LOG_LINE_MAX - 2);
    firn_rc_ignore(firn_wr_u8(b, '\n'));
    ssize_t w = write(log_cfg.fd, b->data, b->len);
    (void)w;
}

void firn_log_write(firn_log_level level, const char *comp, const char *fmt, ...)
{
    char msg[LOG_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    firn_redact_text(msg, sizeof(msg));
    firn_buf b;
    firn_buf_init(&b, LOG_LINE_MAX * 2);
    put_header(&b, level, comp);
    put_field(&b, "msg", msg, false);
    emit(&b);
    firn_buf_deinit(&b);
}

void firn_log_event(firn_log_level level, const char *comp, const char *msg, ...)
{
    if (!firn_log_enabled(level, comp))
        return;
    firn_buf b;
    firn_buf_init(&b, LOG_LINE_MAX * 2);
    put_header(&b, level, comp);
    char text[LOG_LINE_MAX];
    snprintf(text, sizeof(text), "%s", msg);
    firn_redact_text(text, sizeof(text));
    put_field(&b, "msg", text, false);
    va_list ap;
    va_start(ap, msg);
    for (;;) {
        const char *key = va_arg(ap, const char *);
        if (!key)
            break;
        const char *value = va_arg(ap, const char *);
        snprintf(text, sizeof(text), "%s", value ? value : "");
        firn_redact_text(text, sizeof(text));
        put_field(&b, key, text, false);
    }
    va_end(ap);
    emit(&b);
    firn_buf_deinit(&b);
}

/* Copies conninfo into out, masking what follows "password=" (key=value form) or the part
 * between ':' and '@' in the authority of a URI. */
void firn_redact_conninfo(const char *conninfo, char *out, size_t out_cap)
{
    static const char mask[] = "********";
    firn_buf b;
    firn_buf_init(&b, strlen(conninfo) * 2 + 64);
    const char *p = conninfo;
    const char *scheme = strstr(p, "://");
    if (scheme && (strncmp(p, "postgres", 8) == 0)) {
        const char *auth = scheme + 3;
        const char *at = strchr(auth, '@');
        const char *slash = strchr(auth, '/');
        const char *colon = strchr(auth, ':');
        if (at && (!slash || at < slash) && colon && colon < at) {
            firn_rc_ignore(firn_buf_append(&b, p, (size_t)(colon + 1 - p)));
            firn_rc_ignore(firn_buf_append_cstr(&b, mask));
            p = at;
        }
        const char *q = strstr(p, "password=");
        if (q) {
            firn_rc_ignore(firn_buf_append(&b, p, (size_t)(q + 9 - p)));
            firn_rc_ignore(firn_buf_append_cstr(&b, mask));
            p = q + 9 + strcspn(q + 9, "&");
        }
        firn_rc_ignore(firn_buf_append_cstr(&b, p));
    } else {
        for (;;) {
            const char *q = strstr(p, "password");
            if (!q) {
                firn_rc_ignore(firn_buf_append_cstr(&b, p));
                break;
            }
            const char *v = q + 8;
            while (*v == ' ')
                v++;
            if (*v != '=') {
                firn_rc_ignore(firn_buf_append(&b, p, (size_t)(v - p)));
                p = v;
                continue;
            }
            v++;
            while (*v == ' ')
                v++;
            firn_rc_ignore(firn_buf_append(&b, p, (size_t)(v - p)));
            firn_rc_ignore(firn_buf_append_cstr(&b, mask));
            if (*v == '\'') {
                v++;
                while (*v && *v != '\'')
                    v += (*v == '\\' && v[1]) ? 2 : 1;
                if (*v)
                    v++;
            } else {
                v += strcspn(v, " ");
            }
            p = v;
        }
    }
    if (out_cap) {
        size_t n = b.len < out_cap - 1 ? b.len : out_cap - 1;
        memcpy(out, b.data ? (const char *)b.data : "", n);
        out[n] = '\0';
    }
    firn_buf_deinit(&b);
}
