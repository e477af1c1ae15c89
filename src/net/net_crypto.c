/* SPDX-License-Identifier: Apache-2.0 */
/* Hashes, HMAC and the text encodings the signers need (hex, base64url, form and URL
 * encoding), over OpenSSL's EVP interface. */
#include "net_int.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>

void firn__net_sha256(const void *p, size_t len, uint8_t out[32])
{
    unsigned int n = 0;
    int ok = EVP_Digest(p, len, out, &n, EVP_sha256(), NULL);
    FIRN_ASSERT(ok == 1 && n == 32);
}

void firn__net_hmac_sha256(
    const void *key, size_t key_len, const void *msg, size_t msg_len, uint8_t out[32])
{
    unsigned int n = 0;
    FIRN_ASSERT(key_len <= 0x7fffffff);
    const uint8_t *r = HMAC(EVP_sha256(), key, (int)key_len, msg, msg_len, out, &n);
    FIRN_ASSERT(r != NULL && n == 32);
}

void firn__net_hex(const uint8_t *p, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = '\0';
}

void firn_sha256_hex(const void *p, size_t len, char out[65])
{
    uint8_t d[32];
    firn__net_sha256(p, len, d);
    firn__net_hex(d, sizeof(d), out);
}

firn_rc firn__net_b64url(firn_buf *out, const void *p, size_t len)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const uint8_t *s = p;
    FIRN_TRY(firn_buf_reserve(out, (len + 2) / 3 * 4));
    size_t i = 0;
    for (; i + 3 <= len; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        char q[4] = {alphabet[v >> 18], alphabet[(v >> 12) & 63], alphabet[(v >> 6) & 63],
                     alphabet[v & 63]};
        FIRN_TRY(firn_buf_append(out, q, 4));
    }
    if (len - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        char q[2] = {alphabet[v >> 18], alphabet[(v >> 12) & 63]};
        FIRN_TRY(firn_buf_append(out, q, 2));
    } else if (len - i == 2) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
        char q[3] = {alphabet[v >> 18], alphabet[(v >> 12) & 63], alphabet[(v >> 6) & 63]};
        FIRN_TRY(firn_buf_append(out, q, 3));
    }
    return FIRN_OK;
}

static int b64_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '-' || c == '+')
        return 62;
    if (c == '_' || c == '/')
        return 63;
    return -1;
}

firn_rc firn__net_b64url_decode(firn_buf *out, const char *s, size_t len, firn_err *err)
{
    while (len > 0 && s[len - 1] == '=')
        len--;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64_value(s[i]);
        if (v < 0)
            return firn_err_set(err, FIRN_ERR_PARSE, "invalid base64 character '%c'", s[i]);
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            uint8_t byte = (uint8_t)(acc >> bits);
            FIRN_TRY(firn_buf_append(out, &byte, 1));
        }
    }
    if (bits >= 6)
        return firn_err_set(err, FIRN_ERR_PARSE, "truncated base64 text");
    return FIRN_OK;
}

static bool unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == '~';
}

firn_rc firn_url_encode(firn_buf *out, const char *s, size_t len, bool keep_slash)
{
    static const char digits[] = "0123456789ABCDEF";
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (unreserved(c) || (keep_slash && c == '/')) {
            FIRN_TRY(firn_buf_append(out, &c, 1));
        } else {
            char e[3] = {'%', digits[c >> 4], digits[c & 15]};
            FIRN_TRY(firn_buf_append(out, e, 3));
        }
    }
    return FIRN_OK;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

firn_rc firn_url_decode(firn_buf *out, const char *s, size_t len, firn_err *err)
{
    for (size_t i = 0; i < len; i++) {
        uint8_t c = (uint8_t)s[i];
        if (c == '%') {
            int hi = i + 2 < len ? hex_value(s[i + 1]) : -1;
            int lo = hi >= 0 ? hex_value(s[i + 2]) : -1;
            if (lo < 0)
                return firn_err_set(err, FIRN_ERR_PARSE, "bad percent-escape in \"%.*s\"",
                                    (int)(len > 200 ? 200 : len), s);
            c = (uint8_t)(hi * 16 + lo);
            i += 2;
        }
        FIRN_TRY(firn_buf_append(out, &c, 1));
    }
    return FIRN_OK;
}

firn_rc firn__net_form_add(firn_buf *out, const char *name, const char *value)
{
    if (out->len > 0)
        FIRN_TRY(firn_buf_append(out, "&", 1));
    FIRN_TRY(firn_url_encode(out, name, strlen(name), false));
    FIRN_TRY(firn_buf_append(out, "=", 1));
    return firn_url_encode(out, value, strlen(value), false);
}

void firn__net_amz_date(time_t t, char out[17])
{
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t n = strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
    FIRN_ASSERT(n == 16);
}
