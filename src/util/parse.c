/* SPDX-License-Identifier: Apache-2.0 */
/* Strict number parsing: the whole text must be the number, with range checks. */
#include "firn/util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Largest text we quote back in an error message. */
#define QUOTE_MAX 64

static firn_rc bad_number(firn_err *err, const char *s, size_t len, const char *what)
{
    int shown = (int)(len > QUOTE_MAX ? QUOTE_MAX : len);
    return firn_err_set(err, FIRN_ERR_PARSE, "invalid %s \"%.*s%s\"", what, shown, s,
                        len > QUOTE_MAX ? "..." : "");
}

firn_rc firn_parse_u64(const char *s, size_t len, uint64_t *out, firn_err *err)
{
    if (len == 0)
        return bad_number(err, s, len, "unsigned integer");
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return bad_number(err, s, len, "unsigned integer");
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return bad_number(err, s, len, "unsigned integer (out of range)");
        v = v * 10 + d;
    }
    *out = v;
    return FIRN_OK;
}

firn_rc firn_parse_i64(const char *s, size_t len, int64_t *out, firn_err *err)
{
    bool neg = len > 0 && s[0] == '-';
    uint64_t mag;
    if (neg && len == 1)
        return bad_number(err, s, len, "integer");
    if (firn_parse_u64(s + neg, len - neg, &mag, NULL))
        return bad_number(err, s, len, "integer");
    if (neg) {
        if (mag > (uint64_t)INT64_MAX + 1)
            return bad_number(err, s, len, "integer (out of range)");
        *out = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    } else {
        if (mag > (uint64_t)INT64_MAX)
            return bad_number(err, s, len, "integer (out of range)");
        *out = (int64_t)mag;
    }
    return FIRN_OK;
}

firn_rc firn_parse_i32(const char *s, size_t len, int32_t *out, firn_err *err)
{
    int64_t v = 0;
    if (firn_parse_i64(s, len, &v, NULL) || v < INT32_MIN || v > INT32_MAX)
        return bad_number(err, s, len, "32-bit integer");
    *out = (int32_t)v;
    return FIRN_OK;
}

firn_rc firn_parse_double(const char *s, size_t len, double *out, firn_err *err)
{
    char tmp[QUOTE_MAX * 2];
    if (len == 0 || len >= sizeof(tmp) || memchr(s, ' ', len) || s[0] == '+')
        return bad_number(err, s, len, "floating-point number");
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    if (strcmp(tmp, "NaN") == 0) {
        *out = NAN;
        return FIRN_OK;
    }
    errno = 0;
    char *end = NULL;
    double v = strtod(tmp, &end);
    if (end != tmp + len)
        return bad_number(err, s, len, "floating-point number");
    if (errno == ERANGE && isinf(v))
        return bad_number(err, s, len, "floating-point number (out of range)");
    *out = v;
    return FIRN_OK;
}
