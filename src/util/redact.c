/* SPDX-License-Identifier: Apache-2.0 */
/* The one place that takes secrets out of the text firn relays (STYLE.md §7): every error
 * message (firn_err_set, firn_err_context) and every log line passes through firn_redact_text,
 * which replaces the secrets firn knows (configured ones and the tokens it obtains) and
 * whatever looks like a credential (a bearer token, "password=...", a JSON "client_secret")
 * with "<redacted>", wherever the text came from: an HTTP error body, libpq, a file. */
#include "firn/util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define REDACTED        "<redacted>"
#define SECRETS_MAX     64
#define SECRET_MIN_LEN  4
#define SECRET_MAX_LEN  (64 * 1024)
#define LOWER_TOKEN_MIN 20 /* "bearer <token>" in lower case: a token at least this long */

static pthread_mutex_t secrets_mu = PTHREAD_MUTEX_INITIALIZER;
/* Owned copies: [0, SECRETS_MAX) the lasting ones (configured keys: the first SECRETS_MAX
 * stay), [SECRETS_MAX, 2 * SECRETS_MAX) a ring of tokens (each refresh brings a new one; the
 * oldest, long expired, is dropped). */
static char *secrets[2 * SECRETS_MAX];
static size_t lasting_n, tokens_next;
static atomic_bool secrets_any;

static void remember(const char *s, size_t len, bool token)
{
    if (len < SECRET_MIN_LEN || len > SECRET_MAX_LEN)
        return;
    pthread_mutex_lock(&secrets_mu);
    bool known = false;
    for (size_t i = 0; i < 2 * SECRETS_MAX && !known; i++)
        known = secrets[i] && strlen(secrets[i]) == len && memcmp(secrets[i], s, len) == 0;
    if (!known && token) {
        size_t at = SECRETS_MAX + tokens_next;
        firn_free(secrets[at]);
        secrets[at] = firn_strndup(s, len);
        tokens_next = (tokens_next + 1) % SECRETS_MAX;
    } else if (!known && lasting_n < SECRETS_MAX) {
        secrets[lasting_n++] = firn_strndup(s, len);
    }
    atomic_store(&secrets_any, true);
    pthread_mutex_unlock(&secrets_mu);
}

/* The secret as a form or query string carries it (RFC 3986 unreserved bytes kept). */
static void remember_encoded(const char *s, size_t len, bool token)
{
    char enc[3 * 256 + 1];
    if (len > 256)
        return;
    size_t n = 0;
    bool differs = false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            strchr("-._~", c)) {
            enc[n++] = (char)c;
        } else {
            snprintf(enc + n, 4, "%%%02X", c);
            n += 3;
            differs = true;
        }
    }
    if (differs)
        remember(enc, n, token);
}

static void register_value(const char *secret, bool token)
{
    if (!secret)
        return;
    size_t len = strlen(secret);
    remember(secret, len, token);
    remember_encoded(secret, len, token);
}

void firn_secret_register(const char *secret)
{
    register_value(secret, false);
}

void firn_secret_register_token(const char *token)
{
    register_value(token, true);
}

/* The password of a URI's userinfo ("scheme://user:secret@host"). */
static void register_userinfo(const char *value)
{
    const char *sep = strstr(value, "://");
    if (!sep)
        return;
    const char *auth = sep + 3;
    size_t alen = strcspn(auth, "/?#");
    const char *at = NULL;
    for (const char *p = auth; p < auth + alen; p++) {
        if (*p == '@')
            at = p;
    }
    const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
    if (colon) {
        remember(colon + 1, (size_t)(at - colon - 1), false);
        remember_encoded(colon + 1, (size_t)(at - colon - 1), false);
    }
}

/* Values of "password=" in a URI query or a key=value conninfo (quotes dropped). */
static void register_password_params(const char *value)
{
    for (const char *p = value; (p = strstr(p, "password")) != NULL;) {
        const char *v = p + 8;
        while (*v == ' ')
            v++;
        p = v;
        if (*v != '=')
            continue;
        v++;
        while (*v == ' ')
            v++;
        if (*v == '\'') {
            const char *end = strchr(v + 1, '\'');
            size_t n = end ? (size_t)(end - v - 1) : strlen(v + 1);
            remember(v + 1, n, false);
        } else {
            remember(v, strcspn(v, " &"), false);
        }
    }
}

void firn_secret_register_config(const char *value)
{
    if (!value)
        return;
    firn_secret_register(value);
    if (strstr(value, "://")) {
        register_userinfo(value);
        register_password_params(value);
        return;
    }
    register_password_params(value);
    const char *colon = strchr(value, ':');
    if (colon && !strchr(value, '=')) /* "client_id:client_secret" */
        firn_secret_register(colon + 1);
}

/* ---- the text rules ---- */

static bool is_token_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           (c && strchr("-._~+/=%", c));
}

static bool is_name_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

/* A key whose value is a credential: a part of its name says so. */
static bool secret_key(const char *k, size_t len)
{
    static const char *const words[] = {"password",   "passwd",    "secret",    "token",
                                        "credential", "assertion", "signature", "private_key",
                                        "privatekey", "api_key",   "apikey",    "authorization"};
    for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++) {
        size_t n = strlen(words[w]);
        for (size_t i = 0; i + n <= len; i++) {
            if (strncasecmp(k + i, words[w], n) == 0)
                return true;
        }
    }
    return false;
}

/* At p, a value: a quoted one (its quote q) runs to the closing quote, skipping backslash
 * escapes; a bare one to a delimiter. Returns its length (the quotes not counted). */
static size_t value_len(const char *p, char q)
{
    size_t i = 0;
    if (q) {
        while (p[i] && p[i] != q)
            i += p[i] == '\\' && p[i + 1] ? 2 : 1;
        return i;
    }
    while (p[i] && !strchr(" \t\r\n&,;}]\"'", p[i]))
        i++;
    return i;
}

/* Matches a credential at text[i]; on a match, *keep bytes stay as they are and the next *cut
 * bytes are the secret. */
static bool match_rule(const char *text, size_t i, size_t *keep, size_t *cut)
{
    const char *p = text + i;
    bool word_start = i == 0 || !is_name_char((unsigned char)text[i - 1]);
    /* "Bearer <token>", "Basic <base64>" (an echoed Authorization header, however quoted) */
    bool header_case = strncmp(p, "Bearer", 6) == 0 || strncmp(p, "Basic", 5) == 0 ||
                       strncmp(p, "BEARER", 6) == 0 || strncmp(p, "BASIC", 5) == 0;
    if (word_start &&
        (header_case || strncmp(p, "bearer", 6) == 0 || strncmp(p, "basic", 5) == 0)) {
        size_t w = (p[1] == 'e' || p[1] == 'E') ? 6 : 5;
        size_t s = w;
        if (p[s] == ' ')
            s++;
        else if (strncmp(p + s, "%20", 3) == 0 || strncmp(p + s, "+", 1) == 0)
            s += p[s] == '+' ? 1 : 3;
        else
            return false;
        size_t n = 0;
        while (is_token_char((unsigned char)p[s + n]))
            n++;
        /* in lower case, prose ("a bearer token") unless it is as long as a token is */
        if (n < (header_case ? SECRET_MIN_LEN : LOWER_TOKEN_MIN) ||
            strncmp(p + s, REDACTED, strlen(REDACTED)) == 0)
            return false;
        *keep = s;
        *cut = n;
        return true;
    }
    /* key=value and "key": "value" where the key names a credential */
    if (word_start && is_name_char((unsigned char)*p)) {
        size_t k = 0;
        while (is_name_char((unsigned char)p[k]))
            k++;
        if (!secret_key(p, k))
            return false;
        bool quoted_key = i > 0 && (text[i - 1] == '"' || text[i - 1] == '\'');
        size_t s = k;
        if (quoted_key && p[s] == text[i - 1])
            s++;
        while (p[s] == ' ')
            s++;
        /* a header ("X-Amz-Security-Token: v") has a dash; prose ("access token: x") none */
        bool header = s == k && p[s + 1] == ' ' && memchr(p, '-', k) != NULL;
        char sep = p[s];
        if (sep == '=' || (sep == ':' && (quoted_key || header))) {
            /* "Authorization: Bearer x" is the bearer rule's */
            s++;
            while (p[s] == ' ')
                s++;
            char q = p[s] == '"' || p[s] == '\'' ? p[s] : 0;
            if (!q && sep == ':' && !header)
                return false; /* a JSON secret is a string; "password": <prose> is a message */
            if (q)
                s++;
            if (strncasecmp(p + s, "bearer ", 7) == 0 || strncasecmp(p + s, "basic ", 6) == 0 ||
                strncmp(p + s, REDACTED, strlen(REDACTED)) == 0)
                return false;
            size_t n = value_len(p + s, q);
            if (n == 0)
                return false;
            *keep = s;
            *cut = n;
            return true;
        }
        return false;
    }
    /* the password of a URI's userinfo: "://user:secret@" */
    if (strncmp(p, "://", 3) == 0) {
        size_t a = 3;
        while (p[a] && !strchr("/?#@ \t\r\n\"'", p[a]))
            a++;
        if (p[a] != '@')
            return false;
        const char *colon = memchr(p + 3, ':', a - 3);
        if (!colon || (size_t)(p + a - colon - 1) == 0)
            return false;
        *keep = (size_t)(colon + 1 - p);
        *cut = (size_t)(p + a - colon - 1);
        return strncmp(colon + 1, REDACTED, strlen(REDACTED)) != 0;
    }
    return false;
}

/* The longest known secret that starts at p (0: none). Caller holds secrets_mu. */
static size_t known_at(const char *p)
{
    size_t best = 0;
    for (size_t s = 0; s < 2 * SECRETS_MAX; s++) {
        const char *v = secrets[s];
        if (!v || v[0] != p[0])
            continue;
        size_t n = strlen(v);
        if (n > best && strncmp(p, v, n) == 0)
            best = n;
    }
    return best;
}

static void cut_whole_utf8(char *text, size_t len)
{
    text[firn_utf8_whole_len(text, len)] = '\0';
}

void firn_redact_text(char *text, size_t cap)
{
    if (!text || cap == 0 || !text[0])
        return;
    bool any = atomic_load(&secrets_any);
    size_t len = strlen(text);
    firn_buf out;
    firn_buf_init(&out, 2 * len + 64 + cap);
    bool changed = false;
    if (any)
        pthread_mutex_lock(&secrets_mu);
    for (size_t i = 0; i < len;) {
        size_t known = any ? known_at(text + i) : 0, keep = 0, cut = 0;
        if (known) {
            firn_rc_ignore(firn_buf_append_cstr(&out, REDACTED));
            i += known;
            changed = true;
        } else if (match_rule(text, i, &keep, &cut)) {
            firn_rc_ignore(firn_buf_append(&out, text + i, keep));
            firn_rc_ignore(firn_buf_append_cstr(&out, REDACTED));
            i += keep + cut;
            changed = true;
        } else {
            firn_rc_ignore(firn_buf_append(&out, text + i, 1));
            i++;
        }
    }
    if (any)
        pthread_mutex_unlock(&secrets_mu);
    if (changed) {
        size_t n = out.len < cap - 1 ? out.len : cap - 1;
        memcpy(text, out.data, n);
        text[n] = '\0';
        if (n < out.len)
            cut_whole_utf8(text, n);
    }
    firn_buf_deinit(&out);
}
