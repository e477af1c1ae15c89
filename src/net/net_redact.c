/* SPDX-License-Identifier: Apache-2.0 */
/* Redaction of secrets in URLs and headers before anything is logged or put in an error
 * message (STYLE.md §7: secrets are redacted). */
#include "net_int.h"

#include <stdio.h>
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

const char *firn_url_redact(char *out, size_t cap, const char *url)
{
    FIRN_ASSERT(cap > 0);
    out[0] = '\0';
    if (!url)
        return out;
    const char *sep = strstr(url, "://");
    if (!sep) {
        snprintf(out, cap, "%s", url);
        return out;
    }
    const char *host = sep + 3;
    const size_t alen = strcspn(host, "/?#");
    const char *at = NULL;
    for (const char *p = host; p < host + alen; p++) {
        if (*p == '@')
            at = p; /* the last '@' ends the userinfo */
    }
    const char *rest = at ? at + 1 : host;
    const size_t plen = strcspn(rest, "?#");
    snprintf(out, cap, "%.*s%s%.*s%s", (int)(host - url), url, at ? REDACTED "@" : "", (int)plen,
             rest, rest[plen] == '?' ? "?" REDACTED : "");
    return out;
}

/* The last object key completed before len: a string followed by ':'. */
static void last_key(const char *text, size_t len, const char **key, size_t *key_len)
{
    *key = NULL;
    *key_len = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] != '"')
            continue;
        const size_t start = ++i;
        while (i < len && text[i] != '"')
            i += text[i] == '\\' ? 2 : 1;
        if (i >= len)
            return;
        size_t j = i + 1;
        while (j < len && strchr(" \t\r\n", text[j]))
            j++;
        if (j < len && text[j] == ':') {
            *key = text + start;
            *key_len = i - start;
        }
    }
}

const char *firn_json_error_brief(
    char *out, size_t cap, const char *error_text, const char *text, size_t len, size_t position)
{
    FIRN_ASSERT(cap > 0);
    /* Keep jansson's words and its quoted punctuation ("'}' expected"); stop at the text it
     * quotes from the input (" near '...'", "'\\u12'") or a byte value (" 0x..."). */
    size_t n = 0;
    for (const char *p = error_text; *p; p++, n++) {
        if (*p == '\'' && p[1] && strchr("[]{}:,", p[1]) && p[2] == '\'') {
            p += 2;
            n += 2;
            continue;
        }
        if (*p == '\'' || *p == '"' || strncmp(p, " near", 5) == 0 || strncmp(p, " 0x", 3) == 0)
            break;
    }
    while (n > 0 && error_text[n - 1] == ' ')
        n--;
    if (strstr(error_text, "JSON_ALLOW_NUL")) { /* jansson names its own flag */
        error_text = "\\u0000 (a NUL character) is not allowed";
        n = strlen(error_text);
    }
    if (strncmp(error_text, "end of file expected", 20) == 0) { /* not the last key's fault */
        snprintf(out, cap, "unexpected text after the end of the document");
        return out;
    }
    if (n == 0) {
        error_text = "syntax error";
        n = strlen(error_text);
    }
    const char *key = NULL;
    size_t key_len = 0;
    if (text)
        last_key(text, position < len ? position : len, &key, &key_len);
    bool printable = key && key_len > 0 && key_len <= 64;
    for (size_t i = 0; printable && i < key_len; i++)
        printable = key[i] >= 0x20 && key[i] < 0x7f && key[i] != '\\';
    if (printable)
        snprintf(out, cap, "%.*s at key \"%.*s\"", (int)n, error_text, (int)key_len, key);
    else
        snprintf(out, cap, "%.*s", (int)n, error_text);
    return out;
}
