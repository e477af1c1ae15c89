/* SPDX-License-Identifier: Apache-2.0 */
/* Redaction of secrets in URLs and headers before anything is logged or put in an error
 * message (STYLE.md §7: secrets are redacted). */
#include "net_int.h"

#include <string.h>
#include <strings.h>

#define REDACTED "<redacted>"

static const char *const secret_headers[] = {
    "authorization",
    "proxy-authorization",
    "x-amz-security-token",
    "cookie",
    "set-cookie",
    "x-goog-iam-authorization-token",
    "x-api-key",
    "x-amz-server-side-encryption-customer-key",
};

firn_rc firn__http_redact_header(firn_buf *out, const char *name, const char *value)
{
    for (size_t i = 0; i < sizeof(secret_headers) / sizeof(secret_headers[0]); i++) {
        if (strcasecmp(name, secret_headers[i]) != 0)
            continue;
        if (i < 2) {
            /* Keep the scheme word ("Bearer", "AWS4-HMAC-SHA256"): it helps debugging. */
            size_t w = strcspn(value, " ");
            if (w > 0 && value[w] == ' ' && w < 32) {
                FIRN_TRY(firn_buf_append(out, value, w));
                return firn_buf_append_cstr(out, " " REDACTED);
            }
        }
        return firn_buf_append_cstr(out, REDACTED);
    }
    return firn_buf_append_cstr(out, value);
}

static bool contains_ci(const char *s, size_t len, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= len; i++) {
        if (strncasecmp(s + i, needle, n) == 0)
            return true;
    }
    return false;
}

static bool secret_param(const char *key, size_t len)
{
    static const char *const words[] = {"signature", "credential", "token",    "key",
                                        "assertion", "secret",     "password", "upload_id"};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (contains_ci(key, len, words[i]))
            return true;
    }
    return false;
}

static firn_rc redact_query(firn_buf *out, const char *q)
{
    while (*q) {
        size_t plen = strcspn(q, "&#");
        const char *eq = memchr(q, '=', plen);
        size_t klen = eq ? (size_t)(eq - q) : plen;
        if (eq && secret_param(q, klen)) {
            FIRN_TRY(firn_buf_append(out, q, klen + 1));
            FIRN_TRY(firn_buf_append_cstr(out, REDACTED));
        } else {
            FIRN_TRY(firn_buf_append(out, q, plen));
        }
        q += plen;
        if (*q == '#')
            return FIRN_OK; /* fragments are never sent */
        if (*q == '&') {
            FIRN_TRY(firn_buf_append(out, "&", 1));
            q++;
        }
    }
    return FIRN_OK;
}

firn_rc firn__http_redact_url(firn_buf *out, const char *url)
{
    const char *p = url;
    const char *sep = strstr(p, "://");
    if (sep) {
        size_t slen = (size_t)(sep - p) + 3;
        FIRN_TRY(firn_buf_append(out, p, slen));
        p += slen;
        size_t alen = strcspn(p, "/?#");
        const char *at = memchr(p, '@', alen);
        if (at) {
            FIRN_TRY(firn_buf_append_cstr(out, REDACTED "@"));
            alen -= (size_t)(at + 1 - p);
            p = at + 1;
        }
        FIRN_TRY(firn_buf_append(out, p, alen));
        p += alen;
    }
    size_t plen = strcspn(p, "?#");
    FIRN_TRY(firn_buf_append(out, p, plen));
    p += plen;
    if (*p == '?') {
        FIRN_TRY(firn_buf_append(out, "?", 1));
        return redact_query(out, p + 1);
    }
    return FIRN_OK;
}
