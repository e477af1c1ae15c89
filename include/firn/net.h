/* SPDX-License-Identifier: Apache-2.0 */
/* firn network layer: an HTTP client over libcurl (timeouts, TLS verification, retries with
 * backoff, error mapping, redacted tracing) and credential providers shared by object storage
 * and catalogs: static bearer tokens, OAuth2 client credentials, Google service accounts and
 * AWS Signature Version 4. */
#ifndef FIRN_NET_H
#define FIRN_NET_H

#include "firn/util.h"

#include <time.h>

/* ------------------------------------------------------------------------------------------------
 * Header lists
 * ----------------------------------------------------------------------------------------------*/

/** One header; name and value are owned by the list. */
typedef struct firn_http_header {
    char *name;
    char *value;
} firn_http_header;

/** An ordered list of headers (names compared case-insensitively). Embed it and call
 * firn_http_headers_init; fields are read-only for users. Not thread-safe. */
typedef struct firn_http_headers {
    firn_http_header *items;
    size_t count;
    size_t cap;
} firn_http_headers;

/** Initializes an empty list. */
void firn_http_headers_init(firn_http_headers *h);
/** Frees every entry; h may be reused after firn_http_headers_init. NULL accepted. */
void firn_http_headers_deinit(firn_http_headers *h);
/** Drops every entry and keeps the list usable. */
void firn_http_headers_clear(firn_http_headers *h);
/** Appends name: value (copied), keeping any earlier entry of the same name. */
void firn_http_headers_add(firn_http_headers *h, const char *name, const char *value);
/** Replaces every entry named name by one name: value (copied), or appends it. */
void firn_http_headers_set(firn_http_headers *h, const char *name, const char *value);
/** Removes every entry named name. */
void firn_http_headers_remove(firn_http_headers *h, const char *name);
/** Returns the value of the first entry named name (borrowed, valid until the list changes), or
 * NULL. */
const char *firn_http_headers_get(const firn_http_headers *h, const char *name);
/** Appends copies of every entry of src to dst. */
void firn_http_headers_copy(firn_http_headers *dst, const firn_http_headers *src);

/* ------------------------------------------------------------------------------------------------
 * HTTP client
 * ----------------------------------------------------------------------------------------------*/

typedef struct firn_http firn_http;
typedef struct firn_cred firn_cred;

/** Receives one trace line (request, response or header dump) with secrets already redacted. */
typedef void (*firn_http_trace_fn)(void *ctx, firn_log_level level, const char *line);

/** Client settings. Zero fields take the defaults named here; start from
 * firn_http_options_default(). Strings are copied by firn_http_new. */
typedef struct firn_http_options {
    long connect_timeout_ms;  /* TCP + TLS handshake per attempt; default 10000 */
    long timeout_ms;          /* whole attempt; default 120000 */
    long low_speed_time_s;    /* abort an attempt slower than 1 byte/s for this long; 0: off */
    const char *ca_bundle;    /* PEM file of trusted CAs; NULL: the system store */
    bool tls_skip_verify;     /* DANGEROUS: accept any certificate (tests only); default false */
    int max_retries;          /* retries after the first attempt; default 4; -1 means none */
    long backoff_base_ms;     /* first backoff; default 100 */
    long backoff_max_ms;      /* cap of one backoff; default 10000 */
    long retry_after_max_ms;  /* cap on an honoured Retry-After; default 60000 */
    long retry_budget_ms;     /* give up retrying after this long in total; default 300000 */
    const char *user_agent;   /* default "firn/<version>" */
    firn_http_trace_fn trace; /* NULL: lines go to the log (component "net") */
    void *trace_ctx;
} firn_http_options;

/** Returns the default options. */
firn_http_options firn_http_options_default(void);

/** Creates a client. The client is thread-safe: requests from several threads run in parallel
 * on pooled libcurl handles, each keeping its connections alive. opts NULL means the defaults.
 * Returns owned; free with firn_http_free. FIRN_ERR_CONFIG if libcurl cannot be set up or the
 * CA bundle is unreadable. */
FIRN_MUST_CHECK firn_rc firn_http_new(const firn_http_options *opts,
                                      firn_http **out,
                                      firn_err *err);
/** Frees http (NULL accepted). No request may be running. */
void firn_http_free(firn_http *http);

typedef enum firn_http_method {
    FIRN_HTTP_GET = 0,
    FIRN_HTTP_HEAD,
    FIRN_HTTP_PUT,
    FIRN_HTTP_POST,
    FIRN_HTTP_DELETE,
} firn_http_method;

/** Returns "GET", "PUT", ... (static). */
const char *firn_http_method_name(firn_http_method m);

/** One request. Everything is borrowed for the duration of firn_http_do. */
typedef struct firn_http_request {
    firn_http_method method;
    const char *url;                  /* absolute, already percent-encoded */
    const firn_http_headers *headers; /* NULL: none */
    const void *body;                 /* NULL with body_len 0: no body */
    size_t body_len;
    firn_cred *cred; /* NULL: no authentication */
    /* The request changes state and must not be sent twice (catalog commits): no retry, and a
     * failure after the request may have reached the server is FIRN_ERR_UNKNOWN_OUTCOME. */
    bool not_idempotent;
    size_t max_response_bytes; /* 0: FIRN_HTTP_DEFAULT_MAX_RESPONSE */
} firn_http_request;

#define FIRN_HTTP_DEFAULT_MAX_RESPONSE ((size_t)64 << 20)

/** A response; embed it, firn_http_response_init it, and deinit when done. */
typedef struct firn_http_response {
    long status;               /* 0 when no response was received */
    firn_http_headers headers; /* of the final response, names as sent */
    firn_buf body;
    int attempts; /* attempts made (1 without retries) */
} firn_http_response;

/** Initializes an empty response. */
void firn_http_response_init(firn_http_response *resp);
/** Frees the headers and body (NULL accepted). */
void firn_http_response_deinit(firn_http_response *resp);

/** Sends req and stores the final response in resp (reset first). Authentication headers come
 * from req->cred for every attempt (so signatures and tokens are fresh). Retries connection
 * errors, timeouts, 429 and 5xx with exponential backoff and jitter, honouring Retry-After,
 * unless req->not_idempotent; a 401 makes the credential refresh once and retries, also for
 * non-idempotent requests. Status 2xx and 3xx return FIRN_OK; errors map to 400
 * FIRN_ERR_INVALID, 401/419 FIRN_ERR_AUTH, 403 FIRN_ERR_PERMISSION, 404 FIRN_ERR_NOT_FOUND, 409
 * FIRN_ERR_CONFLICT, 412 FIRN_ERR_EXISTS, 429 FIRN_ERR_THROTTLED, 5xx FIRN_ERR_UNAVAILABLE,
 * other 4xx FIRN_ERR_PROTOCOL, timeouts FIRN_ERR_TIMEOUT, other transport failures
 * FIRN_ERR_NETWORK; for a non-idempotent request a 5xx, timeout or broken connection after
 * sending is FIRN_ERR_UNKNOWN_OUTCOME. resp keeps the status and body of error responses too
 * (for REST error documents); an error response's Retry-After (seconds or an HTTP date) is
 * in err->retry_after_ms, for a caller that retries on its own. Thread-safe. */
FIRN_MUST_CHECK firn_rc firn_http_do(firn_http *http,
                                     const firn_http_request *req,
                                     firn_http_response *resp,
                                     firn_err *err);

/** Maps an HTTP status to a firn_rc as firn_http_do does (FIRN_OK below 400). */
firn_rc firn_http_status_rc(long status);

/** Percent-encodes len bytes of s into out as AWS and RFC 3986 want: A-Z a-z 0-9 - _ . ~ stay,
 * every other byte becomes %XX (upper case); '/' stays when keep_slash. */
FIRN_MUST_CHECK firn_rc firn_url_encode(firn_buf *out, const char *s, size_t len, bool keep_slash);
/** Decodes %XX escapes of len bytes at s into out ('+' stays '+'). FIRN_ERR_PARSE on a bad
 * escape. */
FIRN_MUST_CHECK firn_rc firn_url_decode(firn_buf *out, const char *s, size_t len, firn_err *err);

/** Room for a redacted configured URL in a message (longer ones are cut). */
#define FIRN_URL_REDACTED_MAX 512

/** url as every log line and error message prints a configured URL or location (a catalog uri,
 * a warehouse, an endpoint): its userinfo ("user:secret@") becomes "<redacted>@" and its whole
 * query "?<redacted>" (a token may ride there); a fragment is dropped. Text without "://" is
 * copied as is. Writes at most cap bytes (NUL included, cut to fit) to out and returns out; NULL
 * url gives "". Never fails; thread-safe. */
const char *firn_url_redact(char *out, size_t cap, const char *url);

/** Room for firn_json_error_brief's result. */
#define FIRN_JSON_ERROR_BRIEF_MAX 160

/** A JSON parse error for a message without any text of the document: the error of jansson's
 * json_error_t.text up to the first quote or byte value (it quotes the input near the error,
 * which may be inside a password), then, when one was completed before the error position, the
 * name of the last object key (' at key "password"'); text after the document and a \u0000
 * get plain words instead of jansson's. text is the document (len bytes),
 * position jansson's json_error_t.position. Writes to out (cap bytes) and returns it. Never
 * fails; thread-safe. */
const char *firn_json_error_brief(
    char *out, size_t cap, const char *error_text, const char *text, size_t len, size_t position);

/* ------------------------------------------------------------------------------------------------
 * Credential providers: "give me the headers for this request, refresh if needed"
 * ----------------------------------------------------------------------------------------------*/

/** Operations of a credential provider. */
typedef struct firn_cred_vtable {
    const char *kind; /* "none", "bearer", "oauth2", "google", "sigv4", "token-fn" */
    /* Adds authentication headers for req to hdrs, which already holds req's own headers (a
     * signer signs them). May fetch or refresh a token. Thread-safe. */
    firn_rc (*apply)(firn_cred *c,
                     const firn_http_request *req,
                     firn_http_headers *hdrs,
                     firn_err *err);
    /* The server rejected the credential (401): drop cached tokens. NULL when meaningless. */
    void (*invalidate)(firn_cred *c);
    void (*destroy)(firn_cred *c);
} firn_cred_vtable;

/** Base of every provider; implementations embed it first. Reference-counted (atomic), so one
 * Google token source can serve a GCS FileIO and a BigLake catalog. */
struct firn_cred {
    const firn_cred_vtable *vt;
    _Atomic int refs;
};

/** Takes another reference to c (NULL accepted); returns c. Thread-safe. */
firn_cred *firn_cred_ref(firn_cred *c);
/** Drops a reference, freeing c with the last one (NULL accepted). Thread-safe. */
void firn_cred_unref(firn_cred *c);
/** Adds c's headers for req to hdrs (see firn_cred_vtable.apply). c NULL adds nothing. */
FIRN_MUST_CHECK firn_rc firn_cred_apply(firn_cred *c,
                                        const firn_http_request *req,
                                        firn_http_headers *hdrs,
                                        firn_err *err);
/** Drops cached tokens of c (NULL accepted). */
void firn_cred_invalidate(firn_cred *c);

/** Provider that adds nothing. Returns owned (one reference). */
firn_cred *firn_cred_none_new(void);
/** Static bearer token: "Authorization: Bearer <token>" (token copied). Returns owned. */
firn_cred *firn_cred_bearer_new(const char *token);

/** Supplies a bearer token with its expiry (vended credentials: `gcs.oauth2.token` from a
 * catalog). Stores an owned token (firn_malloc'd) in *out_token and its expiry in
 * *out_expires_at_ms (ms since the epoch; 0 = unknown, never refreshed by time). Called
 * under the provider's lock. */
typedef firn_rc (*firn_token_fn)(void *ctx,
                                 char **out_token,
                                 int64_t *out_expires_at_ms,
                                 firn_err *err);
/** Bearer provider over a callback, cached and refreshed refresh_margin_ms before expiry (0:
 * 60000) and after a 401. ctx is borrowed and must outlive the provider. Returns owned. */
firn_cred *firn_cred_token_fn_new(firn_token_fn fn, void *ctx, long refresh_margin_ms);

/** OAuth2 client-credentials grant (RFC 6749 §4.4; ICEBERG.md §G "Auth options"). */
typedef struct firn_oauth2_options {
    const char *token_uri;         /* token endpoint; NULL: <catalog_uri>/v1/oauth/tokens */
    const char *catalog_uri;       /* used only when token_uri is NULL */
    const char *client_id;         /* required */
    const char *client_secret;     /* required */
    const char *scope;             /* NULL: "catalog"; "" sends none */
    const char *audience;          /* optional */
    const char *resource;          /* optional */
    long refresh_margin_ms;        /* refresh this long before expiry; 0: 60000 (capped at 1/5 of
                                      the token's lifetime) */
    const firn_http_options *http; /* for the token endpoint; NULL: defaults */
} firn_oauth2_options;

/** Creates an OAuth2 client-credentials provider. The first token is fetched lazily on the first
 * request. Strings are copied. FIRN_ERR_CONFIG when a required field is missing. */
FIRN_MUST_CHECK firn_rc firn_cred_oauth2_new(const firn_oauth2_options *opts,
                                             firn_cred **out,
                                             firn_err *err);

/** Google service account (ICEBERG.md §H "Auth from a service-account JSON key"). */
typedef struct firn_google_options {
    const char *key_json;          /* the key file's contents, or NULL to read key_file */
    const char *key_file;          /* path of the JSON key */
    const char *scope;             /* NULL: https://www.googleapis.com/auth/cloud-platform */
    const char *token_uri;         /* NULL: the key's token_uri */
    const char *user_project;      /* x-goog-user-project on every request; NULL: none */
    long refresh_margin_ms;        /* 0: 300000 (capped at 1/5 of the token's lifetime) */
    long jwt_lifetime_s;           /* 0: 3600 (Google's maximum) */
    const firn_http_options *http; /* for the token endpoint; NULL: defaults */
} firn_google_options;

/** Creates a Google service-account provider: signs an RS256 JWT with the key's private key,
 * exchanges it at token_uri for an access token (jwt-bearer grant), caches it and re-mints it
 * before expiry and after a 401. Adds "Authorization: Bearer" and, when set,
 * "x-goog-user-project". FIRN_ERR_CONFIG for an unreadable or malformed key. Returns owned. */
FIRN_MUST_CHECK firn_rc firn_cred_google_new(const firn_google_options *opts,
                                             firn_cred **out,
                                             firn_err *err);

/* ------------------------------------------------------------------------------------------------
 * AWS Signature Version 4
 * ----------------------------------------------------------------------------------------------*/

/** AWS credentials; strings owned by whoever fills the struct. */
typedef struct firn_aws_keys {
    char *access_key_id;
    char *secret_access_key;
    char *session_token;   /* NULL: none */
    int64_t expires_at_ms; /* 0: never */
} firn_aws_keys;

/** Frees the strings of k (firn_free) and zeroes it. */
void firn_aws_keys_clear(firn_aws_keys *k);

/** Supplies AWS credentials (vended by a catalog, or a refreshing source); fills *out with
 * firn_malloc'd strings. Called under the provider's lock. */
typedef firn_rc (*firn_aws_keys_fn)(void *ctx, firn_aws_keys *out, firn_err *err);

/** Inputs of one signature. */
typedef struct firn_sigv4_params {
    const char *access_key_id;
    const char *secret_access_key;
    const char *session_token;  /* NULL: none; else signed as x-amz-security-token */
    const char *region;         /* "us-east-1" */
    const char *service;        /* "s3", "glue", "s3tables", ... */
    const char *amz_date;       /* "20150830T123600Z"; NULL: now */
    const char *payload_hash;   /* hex SHA-256 of the body or "UNSIGNED-PAYLOAD"; NULL: hash
                                   req body */
    bool content_sha256_header; /* add x-amz-content-sha256 (S3 requires it) */
    bool single_encode_path;    /* canonical URI = the path as sent (S3); else each segment is
                                   encoded again (every other service) */
} firn_sigv4_params;

/** Signs method + url + hdrs + payload: adds Host (when absent), X-Amz-Date,
 * X-Amz-Security-Token (with a session token), X-Amz-Content-Sha256 (when asked) and
 * Authorization to hdrs, signing every header in hdrs. Returns FIRN_ERR_INVALID for a URL it
 * cannot parse. Thread-safe. */
FIRN_MUST_CHECK firn_rc firn_sigv4_sign(const firn_sigv4_params *p,
                                        firn_http_method method,
                                        const char *url,
                                        const void *body,
                                        size_t body_len,
                                        firn_http_headers *hdrs,
                                        firn_err *err);

/** SigV4 provider settings. Credentials come from, in order: fn, the static keys, the
 * environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN). */
typedef struct firn_sigv4_options {
    const char *service; /* required: "s3", "glue", "s3tables" */
    const char *region;  /* NULL: AWS_REGION, AWS_DEFAULT_REGION, else "us-east-1" */
    const char *access_key_id;
    const char *secret_access_key;
    const char *session_token;
    firn_aws_keys_fn fn;    /* vended credentials; refreshed refresh_margin_ms before expiry */
    void *fn_ctx;           /* borrowed; must outlive the provider */
    long refresh_margin_ms; /* 0: 60000 */
    bool unsigned_payload;  /* sign "UNSIGNED-PAYLOAD" instead of hashing bodies */
} firn_sigv4_options;

/** Creates a SigV4 signing provider (S3 FileIO, AWS Glue and S3 Tables REST catalogs). For
 * service "s3" it adds x-amz-content-sha256 and signs the path as sent. FIRN_ERR_CONFIG when no
 * credentials are found. Returns owned. */
FIRN_MUST_CHECK firn_rc firn_cred_sigv4_new(const firn_sigv4_options *opts,
                                            firn_cred **out,
                                            firn_err *err);

/** Hex-encoded SHA-256 of len bytes at p into out[65]. */
void firn_sha256_hex(const void *p, size_t len, char out[65]);

#endif
