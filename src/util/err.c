/* SPDX-License-Identifier: Apache-2.0 */
/* Error codes, their names, classes and messages, and the firn_err detail record. */
#include "firn/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLASS_P FIRN_RC_CLASS_PERMANENT
#define CLASS_T FIRN_RC_CLASS_TRANSIENT
#define CLASS_U FIRN_RC_CLASS_UNKNOWN

static const struct {
    const char *name;
    const char *message;
    firn_rc_class cls;
} rc_table[FIRN_RC_COUNT] = {
#define FIRN_RC_ROW(name, cls, msg) {"FIRN_" #name, msg, CLASS_##cls},
    FIRN_RC_MAP(FIRN_RC_ROW)
#undef FIRN_RC_ROW
};

const char *firn_rc_name(firn_rc rc)
{
    if ((unsigned)rc >= FIRN_RC_COUNT)
        return "FIRN_ERR_UNKNOWN_CODE";
    return rc_table[rc].name;
}

const char *firn_rc_message(firn_rc rc)
{
    if ((unsigned)rc >= FIRN_RC_COUNT)
        return "unknown error code";
    return rc_table[rc].message;
}

firn_rc_class firn_rc_classify(firn_rc rc)
{
    if ((unsigned)rc >= FIRN_RC_COUNT)
        return FIRN_RC_CLASS_PERMANENT;
    return rc_table[rc].cls;
}

bool firn_rc_is_transient(firn_rc rc)
{
    return firn_rc_classify(rc) == FIRN_RC_CLASS_TRANSIENT;
}

void firn_err_clear(firn_err *err)
{
    if (!err)
        return;
    err->code = FIRN_OK;
    err->sys_errno = 0;
    err->fault = 0;
    err->retry_after_ms = 0;
    err->msg[0] = '\0';
}

size_t firn_utf8_whole_len(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t cont = 0; /* continuation bytes (10xxxxxx) at the end, at most three */
    while (cont < 3 && cont < len && (u[len - 1 - cont] & 0xC0) == 0x80)
        cont++;
    if (cont < len) {
        const unsigned char lead = u[len - 1 - cont];
        const size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
        if (lead >= 0xC0 && cont + 1 < want)
            return len - (cont + 1);
    }
    return len;
}

/* A message cut at the end of msg (len bytes now) may end inside a UTF-8 sequence: drops the
 * bytes of that incomplete sequence. */
static void cut_utf8(char *msg, size_t len)
{
    msg[firn_utf8_whole_len(msg, len)] = '\0';
}

/* After a write of n bytes (as vsnprintf counts) into err->msg: a cut message ends whole. */
static void after_cut(firn_err *err, int n)
{
    if (n >= (int)sizeof(err->msg))
        cut_utf8(err->msg, sizeof(err->msg) - 1);
}

static void err_vset(firn_err *err, firn_rc rc, int sys_errno, const char *fmt, va_list ap)
    FIRN_PRINTF(4, 0);

static void err_vset(firn_err *err, firn_rc rc, int sys_errno, const char *fmt, va_list ap)
{
    err->code = rc;
    err->sys_errno = sys_errno;
    err->fault = 0;
    err->retry_after_ms = 0;
    int n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    if (n < 0)
        snprintf(err->msg, sizeof(err->msg), "%s", firn_rc_message(rc));
    else
        after_cut(err, n);
    firn_redact_text(err->msg, sizeof(err->msg));
}

firn_rc firn_err_set(firn_err *err, firn_rc rc, const char *fmt, ...)
{
    if (!err)
        return rc;
    va_list ap;
    va_start(ap, fmt);
    err_vset(err, rc, 0, fmt, ap);
    va_end(ap);
    return rc;
}

firn_rc firn_err_set_errno(firn_err *err, firn_rc rc, int sys_errno, const char *fmt, ...)
{
    if (!err)
        return rc;
    va_list ap;
    va_start(ap, fmt);
    err_vset(err, rc, sys_errno, fmt, ap);
    va_end(ap);
    size_t used = strlen(err->msg);
    if (used < sizeof(err->msg) - 1) {
        int n = snprintf(err->msg + used, sizeof(err->msg) - used, ": %s", strerror(sys_errno));
        if (n > 0 && used + (size_t)n >= sizeof(err->msg))
            cut_utf8(err->msg, sizeof(err->msg) - 1);
    }
    return rc;
}

void firn_err_context(firn_err *err, const char *fmt, ...)
{
    if (!err || err->code == FIRN_OK)
        return;
    char ctx[FIRN_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(ctx, sizeof(ctx), fmt, ap);
    va_end(ap);
    if (n <= 0)
        return;
    firn_buf b;
    firn_buf_init(&b, sizeof(err->msg) * 2 + 4);
    if (firn_buf_appendf(&b, "%s (%s)", err->msg, ctx) == FIRN_OK) {
        size_t keep = b.len < sizeof(err->msg) - 1 ? b.len : sizeof(err->msg) - 1;
        memcpy(err->msg, b.data, keep);
        err->msg[keep] = '\0';
        if (keep < b.len)
            cut_utf8(err->msg, keep);
    }
    firn_buf_deinit(&b);
    firn_redact_text(err->msg, sizeof(err->msg));
}

void firn_assert_fail(const char *cond, const char *file, int line)
{
    fprintf(stderr, "firn: assertion failed: %s at %s:%d\n", cond, file, line);
    fflush(stderr);
    abort();
}
