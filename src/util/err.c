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
    err->msg[0] = '\0';
}

static void err_vset(firn_err *err, firn_rc rc, int sys_errno, const char *fmt, va_list ap)
    FIRN_PRINTF(4, 0);

static void err_vset(firn_err *err, firn_rc rc, int sys_errno, const char *fmt, va_list ap)
{
    err->code = rc;
    err->sys_errno = sys_errno;
    int n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    if (n < 0)
        snprintf(err->msg, sizeof(err->msg), "%s", firn_rc_message(rc));
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
    if (used < sizeof(err->msg) - 1)
        snprintf(err->msg + used, sizeof(err->msg) - used, ": %s", strerror(sys_errno));
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
    }
    firn_buf_deinit(&b);
}

void firn_assert_fail(const char *cond, const char *file, int line)
{
    fprintf(stderr, "firn: assertion failed: %s at %s:%d\n", cond, file, line);
    fflush(stderr);
    abort();
}
