/* SPDX-License-Identifier: Apache-2.0 */
/* Private helpers of the net module: hashing and encodings over OpenSSL, retry arithmetic,
 * redaction, the token cache behind the bearer-style providers, and JWT building. Tests include
 * this header to reach the pure functions. */
#ifndef FIRN_NET_INT_H
#define FIRN_NET_INT_H

#include "firn/net.h"

#include <pthread.h>

/* ---- crypto and encodings (net_crypto.c) ---- */

void firn__net_sha256(const void *p, size_t len, uint8_t out[32]);
void firn__net_hmac_sha256(
    const void *key, size_t key_len, const void *msg, size_t msg_len, uint8_t out[32]);
/** Lower-case hex of n bytes into out (2n + 1 bytes, NUL-terminated). */
void firn__net_hex(const uint8_t *p, size_t n, char *out);
/** base64url without padding (RFC 7515 §2) of len bytes appended to out. */
FIRN_MUST_CHECK firn_rc firn__net_b64url(firn_buf *out, const void *p, size_t len);
/** Decodes unpadded or padded base64url (or standard base64) appending to out. */
FIRN_MUST_CHECK firn_rc firn__net_b64url_decode(firn_buf *out,
                                                const char *s,
                                                size_t len,
                                                firn_err *err);
/** Appends application/x-www-form-urlencoded "name=value" (with a leading '&' unless out is
 * empty). */
FIRN_MUST_CHECK firn_rc firn__net_form_add(firn_buf *out, const char *name, const char *value);
/** Formats t (seconds since the epoch, UTC) as "YYYYMMDDTHHMMSSZ" into out[17]. */
void firn__net_amz_date(time_t t, char out[17]);

/* ---- HTTP client internals (net_http.c) ---- */

/** Backoff before retry number attempt (0-based) without Retry-After: min(max, base * 2^attempt)
 * with "equal jitter" (half fixed, half drawn from rnd). */
long firn__http_backoff_ms(const firn_http_options *o, int attempt, uint64_t rnd);
/** Parses a Retry-After value (delta seconds or an HTTP date) into milliseconds from now_s;
 * returns -1 when absent or unparsable, 0 for a date in the past. */
long firn__http_retry_after_ms(const char *value, time_t now_s);
/** True when a response with this status is worth retrying (429, 5xx other than 501, 408). */
bool firn__http_status_retryable(long status);
/** Appends value with secrets replaced by "<redacted>" when name is a secret-bearing header
 * (Authorization, Proxy-Authorization, X-Amz-Security-Token, Cookie, Set-Cookie, ...). */
FIRN_MUST_CHECK firn_rc firn__http_redact_header(firn_buf *out,
                                                 const char *name,
                                                 const char *value);
/** Appends url with user info and the values of secret-looking query parameters (signature,
 * credential, token, key, assertion) replaced by "<redacted>". */
FIRN_MUST_CHECK firn_rc firn__http_redact_url(firn_buf *out, const char *url);

/* ---- token cache shared by bearer-style providers (net_token.c) ---- */

typedef struct firn__token_cache {
    pthread_mutex_t mu;
    char *token;           /* NULL: none yet */
    int64_t expires_at_ms; /* 0: unknown */
    int64_t refresh_at_ms; /* re-fetch at or after this wall-clock time; 0: never */
    long margin_ms;
    int fetches; /* tokens fetched so far (tests and logs) */
} firn__token_cache;

void firn__token_cache_init(firn__token_cache *tc, long margin_ms);
void firn__token_cache_deinit(firn__token_cache *tc);
/** Stores a freshly fetched token (takes ownership) with its expiry (0 unknown) at now_ms. */
void firn__token_cache_store(firn__token_cache *tc,
                             char *token,
                             int64_t expires_at_ms,
                             int64_t now_ms);
/** True when the cache holds a token that needs no refresh at now_ms. Caller holds mu. */
bool firn__token_cache_fresh(const firn__token_cache *tc, int64_t now_ms);

/** Providers whose state starts with a token cache (bearer-style: oauth2, google, token-fn). */
typedef struct firn__token_cred {
    firn_cred base;
    firn__token_cache tc;
} firn__token_cred;

typedef firn_rc (*firn__token_fetch_fn)(firn__token_cred *t,
                                        char **out_token,
                                        int64_t *out_exp_ms,
                                        firn_err *err);
/** Adds "Authorization: Bearer <token>", fetching a new token with fetch (under the cache lock)
 * when the cached one is missing, due for refresh or invalidated. */
FIRN_MUST_CHECK firn_rc firn__bearer_apply(firn__token_cred *t,
                                           firn__token_fetch_fn fetch,
                                           firn_http_headers *hdrs,
                                           firn_err *err);
/** Marks the cached token stale (vtable invalidate of bearer-style providers). */
void firn__token_invalidate(firn_cred *c);
/** Frees the token cache and c itself (for providers with nothing else to free). */
void firn__token_destroy(firn_cred *c);

/** Parses an OAuth2 token response ({"access_token","expires_in",...}): stores an owned token
 * and its expiry (now_ms + expires_in, or 0 without expires_in). FIRN_ERR_AUTH when the body is
 * an OAuth2 error document or lacks access_token. */
FIRN_MUST_CHECK firn_rc firn__oauth2_parse_token(const char *body,
                                                 size_t len,
                                                 int64_t now_ms,
                                                 char **out_token,
                                                 int64_t *out_expires_at_ms,
                                                 firn_err *err);

/** POSTs form (application/x-www-form-urlencoded) to the token endpoint uri and parses the
 * OAuth2 reply. FIRN_ERR_AUTH with the server's error text when it refuses. */
FIRN_MUST_CHECK firn_rc firn__oauth2_post(firn_http *http,
                                          const char *uri,
                                          const char *form,
                                          char **out_token,
                                          int64_t *out_exp,
                                          firn_err *err);

/* ---- Google service-account JWT (net_google.c) ---- */

/** Builds the signed JWT assertion (RS256) for a service account into out: header
 * {"alg":"RS256","typ":"JWT","kid"}, claims {iss, scope, aud, iat, exp}. pem is the PKCS#8
 * private key. */
FIRN_MUST_CHECK firn_rc firn__google_jwt(firn_buf *out,
                                         const char *pem,
                                         const char *key_id,
                                         const char *client_email,
                                         const char *scope,
                                         const char *audience,
                                         int64_t iat_s,
                                         long lifetime_s,
                                         firn_err *err);

/** Number of tokens a bearer-style provider (oauth2, google, token-fn) has fetched; -1 for other
 * kinds. For tests. */
int firn__cred_token_fetches(firn_cred *c);

#endif
