/* SPDX-License-Identifier: Apache-2.0 */
/* firn utilities: error codes and details, allocation accounting, bounded buffers, wire-format
 * read cursors and writers, number parsing, hashing, time and logging. */
#ifndef FIRN_UTIL_H
#define FIRN_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define FIRN_MUST_CHECK   __attribute__((warn_unused_result))
#define FIRN_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define FIRN_NORETURN     __attribute__((noreturn))

/* ------------------------------------------------------------------------------------------------
 * Errors (STYLE.md §4)
 * ----------------------------------------------------------------------------------------------*/

/* X(name, class, message). class: P permanent, T transient (retry), U unknown outcome. */
#define FIRN_RC_MAP(X)                                                                             \
    X(OK, P, "success")                                                                            \
    X(ERR_INVALID, P, "invalid argument")                                                          \
    X(ERR_PARSE, P, "malformed input")                                                             \
    X(ERR_TOO_LARGE, P, "size limit exceeded")                                                     \
    X(ERR_UNSUPPORTED, P, "unsupported feature or type")                                           \
    X(ERR_NOT_FOUND, P, "object not found")                                                        \
    X(ERR_EXISTS, P, "object already exists")                                                      \
    X(ERR_CONFIG, P, "invalid configuration")                                                      \
    X(ERR_AUTH, P, "authentication failed")                                                        \
    X(ERR_PERMISSION, P, "permission denied")                                                      \
    X(ERR_PROTOCOL, P, "protocol violation")                                                       \
    X(ERR_SCHEMA, P, "incompatible schema change")                                                 \
    X(ERR_IO, P, "input/output error")                                                             \
    X(ERR_SOURCE, P, "source database error")                                                      \
    X(ERR_INTERNAL, P, "internal error")                                                           \
    X(ERR_CANCELLED, P, "operation cancelled")                                                     \
    X(ERR_NETWORK, T, "network error")                                                             \
    X(ERR_TIMEOUT, T, "operation timed out")                                                       \
    X(ERR_UNAVAILABLE, T, "service unavailable")                                                   \
    X(ERR_CONFLICT, T, "commit conflict")                                                          \
    X(ERR_THROTTLED, T, "request throttled")                                                       \
    X(ERR_UNKNOWN_OUTCOME, U, "commit outcome unknown")

/** Return codes of every fallible firn function. FIRN_OK is 0; everything else is an error. */
typedef enum firn_rc {
#define FIRN_RC_ENUM(name, cls, msg) FIRN_##name,
    FIRN_RC_MAP(FIRN_RC_ENUM)
#undef FIRN_RC_ENUM
        FIRN_RC_COUNT
} firn_rc;

/** How a caller should react to an error code. */
typedef enum firn_rc_class {
    FIRN_RC_CLASS_PERMANENT = 0, /* retrying cannot help: bad input, config, protocol */
    FIRN_RC_CLASS_TRANSIENT,     /* retry with backoff: network, 5xx, 429, conflict */
    FIRN_RC_CLASS_UNKNOWN,       /* a commit may or may not have landed: resolve by commit id */
} firn_rc_class;

/** Returns the symbolic name of rc ("FIRN_ERR_PARSE"); static storage, never NULL. */
const char *firn_rc_name(firn_rc rc);
/** Returns the generic message of rc ("malformed input"); static storage, never NULL. */
const char *firn_rc_message(firn_rc rc);
/** Classifies rc (see firn_rc_class). FIRN_OK is reported as permanent. */
firn_rc_class firn_rc_classify(firn_rc rc);
/** True when rc is worth retrying with backoff (class TRANSIENT). */
bool firn_rc_is_transient(firn_rc rc);

/* Room for a remedy naming long schema and table names (1 KiB: firn_err lives on stacks and in
 * a few per-connection structs, never in large arrays). */
#define FIRN_ERR_MSG_MAX 1024

/** Details of the last error: code, saved errno (0 if none) and a one-line message. Embedded by
 * the caller; a zeroed struct is "no error". A message cut at FIRN_ERR_MSG_MAX - 1 bytes is cut
 * before a UTF-8 sequence it would split. firn_err_set, firn_err_set_errno and firn_err_clear
 * reset every field; firn_err_context keeps them. */
typedef struct firn_err {
    firn_rc code;
    int sys_errno;
    /* The side of a sync that failed, a firn_fault of firn/engine.h (0: not said), set by the
     * engine where it knows (a catalog commit, a flush to the destination): the exit code
     * follows it rather than the phase the run was in. */
    int fault;
    /* How long the server asked to wait before trying again (HTTP Retry-After on a 429 or 503),
     * milliseconds; 0: it did not say. */
    int64_t retry_after_ms;
    char msg[FIRN_ERR_MSG_MAX];
} firn_err;

/** Length of the first len bytes of s without a UTF-8 sequence that they end in the middle of
 * (a text cut to fit a buffer): len itself when s[len - 1] ends a whole sequence or plain ASCII.
 * Bytes only: never reads past s[len - 1]. */
size_t firn_utf8_whole_len(const char *s, size_t len);
/** Clears err (NULL accepted). */
void firn_err_clear(firn_err *err);
/** Records rc with a printf-style message in err (NULL accepted: nothing recorded) and returns
 * rc, so `return firn_err_set(err, FIRN_ERR_PARSE, "...")` reads naturally. Messages follow the
 * postgres guide: lower case, no final period, quote names. Truncated to FIRN_ERR_MSG_MAX - 1
 * bytes at most, never inside a UTF-8 sequence. */
firn_rc firn_err_set(firn_err *err, firn_rc rc, const char *fmt, ...) FIRN_PRINTF(3, 4);
/** Like firn_err_set and also saves sys_errno and appends ": <strerror>" to the message. */
firn_rc firn_err_set_errno(firn_err *err, firn_rc rc, int sys_errno, const char *fmt, ...)
    FIRN_PRINTF(4, 5);
/** Appends context to the message of an error already set: "<msg> (while <context>)" style,
 * the caller writes the full phrase ("while committing table \"t\""). NULL accepted. */
void firn_err_context(firn_err *err, const char *fmt, ...) FIRN_PRINTF(2, 3);

/** Explicitly drops a return code where failure is harmless (a log line cut short). */
static inline void firn_rc_ignore(firn_rc rc)
{
    (void)rc;
}

/** Returns early with the code when expr fails; for functions with nothing to clean up. */
#define FIRN_TRY(expr)                                                                             \
    do {                                                                                           \
        firn_rc firn_try_rc_ = (expr);                                                             \
        if (firn_try_rc_)                                                                          \
            return firn_try_rc_;                                                                   \
    } while (0)

/** Aborts with file and line (never compiled out). Guards invariants that protect data; bad
 * input is an error, never an assert. */
#define FIRN_ASSERT(cond)                                                                          \
    do {                                                                                           \
        if (!(cond))                                                                               \
            firn_assert_fail(#cond, __FILE__, __LINE__);                                           \
    } while (0)
#ifndef NDEBUG
#define FIRN_DASSERT(cond) FIRN_ASSERT(cond)
#else
#define FIRN_DASSERT(cond) ((void)0)
#endif
FIRN_NORETURN void firn_assert_fail(const char *cond, const char *file, int line);

/* ------------------------------------------------------------------------------------------------
 * Memory (STYLE.md §5). Out of memory logs and aborts: callers never check for NULL.
 * ----------------------------------------------------------------------------------------------*/

/** Allocates size bytes (size 0 allowed, returns a unique pointer). Free with firn_free. */
void *firn_malloc(size_t size);
/** Allocates n * size zeroed bytes; aborts on multiplication overflow. */
void *firn_calloc(size_t n, size_t size);
/** Resizes p (NULL allowed) to size bytes; returns the new block. */
void *firn_realloc(void *p, size_t size);
/** Resizes p to n * size bytes, aborting on multiplication overflow. */
void *firn_reallocarray(void *p, size_t n, size_t size);
/** Frees p (NULL accepted). */
void firn_free(void *p);
/** Returns an owned NUL-terminated copy of s (not NULL). */
char *firn_strdup(const char *s);
/** Returns an owned NUL-terminated copy of the first len bytes of s. */
char *firn_strndup(const char *s, size_t len);
/** Returns an owned copy of len bytes at p. */
void *firn_memdup(const void *p, size_t len);
/** Bytes currently allocated through firn_malloc and siblings, process-wide (thread-safe). */
size_t firn_mem_used(void);
/** Highest value firn_mem_used has reached (thread-safe). */
size_t firn_mem_peak(void);

/** A named memory budget: reservations count against limit_bytes (0 = unlimited). Thread-safe.
 * Used for backpressure: exceeding the limit is FIRN_ERR_TOO_LARGE, not an abort. */
typedef struct firn_budget {
    const char *name;
    size_t limit_bytes;
    _Atomic size_t used_bytes;
} firn_budget;

/** Initializes b; name is borrowed and must outlive b. */
void firn_budget_init(firn_budget *b, const char *name, size_t limit_bytes);
/** Reserves bytes; FIRN_ERR_TOO_LARGE (nothing reserved) when that would pass the limit. */
FIRN_MUST_CHECK firn_rc firn_budget_reserve(firn_budget *b, size_t bytes, firn_err *err);
/** Returns bytes reserved earlier. */
void firn_budget_release(firn_budget *b, size_t bytes);

/* ------------------------------------------------------------------------------------------------
 * Slices and bounded growable buffers (STYLE.md §6, after curl dynbuf)
 * ----------------------------------------------------------------------------------------------*/

/** A borrowed view of bytes, never assumed NUL-terminated. */
typedef struct firn_slice {
    const uint8_t *ptr;
    size_t len;
} firn_slice;

/** Makes a slice of a NUL-terminated string (borrowed). */
firn_slice firn_slice_cstr(const char *s);
/** True when a and b hold the same bytes. */
bool firn_slice_eq(firn_slice a, firn_slice b);

/** Growable byte buffer with a required maximum size; always keeps a NUL after the data. Embed
 * it and call firn_buf_init; the struct fields are read-only for users. */
typedef struct firn_buf {
    uint8_t *data; /* NULL until the first append */
    size_t len;    /* bytes of data, excluding the trailing NUL */
    size_t cap;    /* allocated bytes */
    size_t max;    /* largest len allowed */
} firn_buf;

/** Initializes an empty buffer that may grow to max_bytes (> 0). */
void firn_buf_init(firn_buf *b, size_t max_bytes);
/** Frees the memory and leaves b empty (reusable after firn_buf_init). */
void firn_buf_deinit(firn_buf *b);
/** Empties b and keeps its memory. */
void firn_buf_reset(firn_buf *b);
/** Ensures room for extra more bytes; FIRN_ERR_TOO_LARGE past max (contents unchanged). */
FIRN_MUST_CHECK firn_rc firn_buf_reserve(firn_buf *b, size_t extra);
/** Appends len bytes from p. FIRN_ERR_TOO_LARGE past max, contents unchanged. */
FIRN_MUST_CHECK firn_rc firn_buf_append(firn_buf *b, const void *p, size_t len);
/** firn_buf_append with its common case inline, for per-value appends in inner loops: when b
 * already has room for len bytes and the trailing NUL (so len stays within max), one memcpy
 * and no call; otherwise firn_buf_append (growth, FIRN_ERR_TOO_LARGE). */
FIRN_MUST_CHECK static inline firn_rc firn_buf_append_fast(firn_buf *b, const void *p, size_t len)
{
    if (len >= b->cap - b->len)
        return firn_buf_append(b, p, len);
    memcpy(b->data + b->len, p, len);
    b->len += len;
    b->data[b->len] = '\0';
    return FIRN_OK;
}
/** Appends a NUL-terminated string (without its NUL). */
FIRN_MUST_CHECK firn_rc firn_buf_append_cstr(firn_buf *b, const char *s);
/** Appends printf-formatted text. */
FIRN_MUST_CHECK firn_rc firn_buf_appendf(firn_buf *b, const char *fmt, ...) FIRN_PRINTF(2, 3);
/** va_list form of firn_buf_appendf. */
FIRN_MUST_CHECK firn_rc firn_buf_vappendf(firn_buf *b, const char *fmt, va_list ap)
    FIRN_PRINTF(2, 0);
/** Appends n copies of byte c. */
FIRN_MUST_CHECK firn_rc firn_buf_fill(firn_buf *b, uint8_t c, size_t n);
/** Gives the memory away: returns an owned NUL-terminated block (free with firn_free) holding
 * len bytes, stores len in out_len (NULL accepted) and leaves b empty. Never NULL. */
uint8_t *firn_buf_take(firn_buf *b, size_t *out_len);
/** Drops bytes past new_len (new_len <= len). */
void firn_buf_truncate(firn_buf *b, size_t new_len);
/** Room after the data for a producer that writes in place (a read, a copy by another
 * library): ensures at least min bytes, stores the room's size in *room (>= min; the trailing
 * NUL's byte is not part of it) and returns where it starts, valid until the next call that
 * changes b. NULL and *room 0 when min more bytes would pass max. firn_buf_commit adds what
 * was written. */
uint8_t *firn_buf_room(firn_buf *b, size_t min, size_t *room);
/** Adds the n bytes written at firn_buf_room's pointer to the data (n <= the room given). */
void firn_buf_commit(firn_buf *b, size_t n);

/* Writers of fixed-width values into a buffer: big endian (wire protocols, "be") and little
 * endian (Parquet, Avro, Iceberg single values, "le"). Each fails only with FIRN_ERR_TOO_LARGE. */
FIRN_MUST_CHECK firn_rc firn_wr_u8(firn_buf *b, uint8_t v);
FIRN_MUST_CHECK firn_rc firn_wr_be16(firn_buf *b, uint16_t v);
FIRN_MUST_CHECK firn_rc firn_wr_be32(firn_buf *b, uint32_t v);
FIRN_MUST_CHECK firn_rc firn_wr_be64(firn_buf *b, uint64_t v);
FIRN_MUST_CHECK firn_rc firn_wr_le16(firn_buf *b, uint16_t v);
FIRN_MUST_CHECK firn_rc firn_wr_le32(firn_buf *b, uint32_t v);
FIRN_MUST_CHECK firn_rc firn_wr_le64(firn_buf *b, uint64_t v);
/** Writes v as an unsigned LEB128 varint (1-10 bytes; Thrift compact, Avro, protobuf). */
FIRN_MUST_CHECK firn_rc firn_wr_uvarint(firn_buf *b, uint64_t v);
/** Zig-zag encodes a signed value (0,-1,1,-2 -> 0,1,2,3). */
static inline uint64_t firn_zigzag64(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}
/** Inverse of firn_zigzag64. */
static inline int64_t firn_unzigzag64(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* ------------------------------------------------------------------------------------------------
 * Read cursor for wire formats (after postgres pq_getmsg*). A short read sets a sticky failure
 * and returns 0/NULL, so a decoder reads a whole message and checks firn_rd_ok() once.
 * ----------------------------------------------------------------------------------------------*/

typedef struct firn_rd {
    const uint8_t *ptr;
    size_t len;
    size_t pos;
    bool failed;
} firn_rd;

/** Starts reading len bytes at p (borrowed; must outlive the cursor). */
void firn_rd_init(firn_rd *r, const void *p, size_t len);
/** True while no read has run past the end or hit malformed data. */
static inline bool firn_rd_ok(const firn_rd *r)
{
    return !r->failed;
}
/** Bytes left to read (0 after a failure). */
size_t firn_rd_remaining(const firn_rd *r);
/** Marks the cursor failed (for decoders that find a bad value). */
void firn_rd_fail(firn_rd *r);
uint8_t firn_rd_u8(firn_rd *r);
uint16_t firn_rd_be16(firn_rd *r);
uint32_t firn_rd_be32(firn_rd *r);
uint64_t firn_rd_be64(firn_rd *r);
uint16_t firn_rd_le16(firn_rd *r);
uint32_t firn_rd_le32(firn_rd *r);
uint64_t firn_rd_le64(firn_rd *r);
/** Reads an unsigned LEB128 varint of at most 10 bytes; an overlong one fails the cursor. */
uint64_t firn_rd_uvarint(firn_rd *r);
/** Returns a borrowed pointer to the next n bytes and skips them, or NULL when fewer remain. */
const uint8_t *firn_rd_bytes(firn_rd *r, size_t n);
/** Reads a NUL-terminated string and skips past its NUL; returns a borrowed pointer (into the
 * input) and its length in out_len (NULL accepted), or NULL when no NUL remains. */
const char *firn_rd_cstr(firn_rd *r, size_t *out_len);

/* ------------------------------------------------------------------------------------------------
 * Parsing numbers from text (never atoi/strtol without checks): the whole slice must be the
 * number, optional leading '-' ('+' rejected), no spaces; FIRN_ERR_PARSE otherwise, also on
 * overflow. Messages name the offending text.
 * ----------------------------------------------------------------------------------------------*/
FIRN_MUST_CHECK firn_rc firn_parse_i64(const char *s, size_t len, int64_t *out, firn_err *err);
FIRN_MUST_CHECK firn_rc firn_parse_u64(const char *s, size_t len, uint64_t *out, firn_err *err);
FIRN_MUST_CHECK firn_rc firn_parse_i32(const char *s, size_t len, int32_t *out, firn_err *err);
/** Parses a finite or infinite double ("NaN", "Infinity", "-Infinity", "inf" accepted). */
FIRN_MUST_CHECK firn_rc firn_parse_double(const char *s, size_t len, double *out, firn_err *err);

/* ------------------------------------------------------------------------------------------------
 * Hashing and time
 * ----------------------------------------------------------------------------------------------*/

/** MurmurHash3 x86 32-bit of len bytes at p with seed (Austin Appleby's reference; the hash the
 * Iceberg spec's bucket transform uses with seed 0). */
uint32_t firn_murmur3_32(const void *p, size_t len, uint32_t seed);
/** Wall-clock time in microseconds since the Unix epoch. */
int64_t firn_now_us(void);
/** Parses an RFC 3339 time ("2024-01-02T03:04:05.678Z"; 'T', 't' or ' ' between date and time;
 * fraction optional, read to milliseconds; "Z", "+HH:MM" or "-HH:MM", none meaning UTC) into
 * milliseconds since the Unix epoch. 0 when text is NULL or malformed. Thread-safe. */
int64_t firn_time_parse_ms(const char *text);
/** Monotonic time in nanoseconds from an arbitrary origin (for durations and deadlines). */
int64_t firn_monotonic_ns(void);
/** Sleeps ms milliseconds (<= 0: returns at once), resuming after a signal interrupts it.
 * Thread-safe. */
void firn_sleep_ms(long ms);

/** What the operating system tells of this process (Linux /proc; a figure it cannot read is
 * -1). */
typedef struct firn_process_stats {
    double cpu_seconds;     /* user + system CPU time of every thread */
    int64_t resident_bytes; /* resident set size */
    int64_t virtual_bytes;  /* virtual memory size */
    int64_t open_fds;       /* open file descriptors */
    int64_t max_fds;        /* the soft limit of open file descriptors */
    double start_time_secs; /* when the process started, seconds since the Unix epoch */
} firn_process_stats;

/** Fills *out for the calling process. Never fails (see firn_process_stats). Thread-safe. */
void firn_process_stats_get(firn_process_stats *out);
/** Fills out[16] with a random (version 4) UUID from the OS random source. */
void firn_uuid_v4(uint8_t out[16]);
/** Formats a 16-byte UUID as 36 lower-case characters plus NUL into out[37]. */
void firn_uuid_format(const uint8_t uuid[16], char out[37]);

/* ------------------------------------------------------------------------------------------------
 * String lists
 * ----------------------------------------------------------------------------------------------*/

/** A growable list of owned NUL-terminated strings. Zero-initialize to get an empty list. */
typedef struct firn_strlist {
    char **items;
    size_t count;
} firn_strlist;

/** Appends an owned copy of s to l. */
void firn_strlist_push(firn_strlist *l, const char *s);
/** True when l holds a string equal to s. */
bool firn_strlist_contains(const firn_strlist *l, const char *s);
/** Frees the strings and the array; l is empty afterwards. NULL accepted. */
void firn_strlist_clear(firn_strlist *l);
/** Same as firn_strlist_clear (the embedded-object naming of STYLE.md §5). */
void firn_strlist_deinit(firn_strlist *l);

/* ------------------------------------------------------------------------------------------------
 * Logging (STYLE.md §7): one logfmt (or JSON) line per event on stderr. Codec modules never log.
 * ----------------------------------------------------------------------------------------------*/

typedef enum firn_log_level {
    FIRN_LOG_OFF = 0,
    FIRN_LOG_ERROR,
    FIRN_LOG_WARN,
    FIRN_LOG_INFO,
    FIRN_LOG_DEBUG,
    FIRN_LOG_TRACE,
} firn_log_level;

/** Sets levels from a spec such as "info,pg=debug,-io" (default level, per-component levels,
 * "-comp" silences one). FIRN_ERR_CONFIG naming the bad item on error, nothing changed then.
 * Not thread-safe: call at start-up. */
FIRN_MUST_CHECK firn_rc firn_log_configure(const char *spec, firn_err *err);
/** Chooses JSON lines (true) or logfmt (false, default). Call at start-up. */
void firn_log_set_json(bool json);
/** Redirects output to fd (default 2, stderr). Call at start-up. */
void firn_log_set_fd(int fd);
/** True when an event of level for component comp would be written. Thread-safe. */
bool firn_log_enabled(firn_log_level level, const char *comp);
/** Writes one event whose message is formatted from fmt; use FIRN_LOG, which skips formatting
 * when the level is off. Thread-safe (one write(2) per line). */
void firn_log_write(firn_log_level level, const char *comp, const char *fmt, ...) FIRN_PRINTF(3, 4);
/** Writes one event with a plain message and extra fields given as key, value strings ending
 * with NULL: firn_log_event(FIRN_LOG_INFO, "engine", "committed", "table", t, "rows", n, NULL).
 * Values are quoted as needed. Thread-safe (one write(2) per line). */
void firn_log_event(firn_log_level level, const char *comp, const char *msg, ...);

/** Logs when enabled, formatting only then (valkey serverLog). */
#define FIRN_LOG(level, comp, ...)                                                                 \
    do {                                                                                           \
        if (firn_log_enabled((level), (comp)))                                                     \
            firn_log_write((level), (comp), __VA_ARGS__);                                          \
    } while (0)

/** Remembers a secret (copied) so that firn_redact_text takes it out of every text firn relays:
 * error messages and log lines, wherever their words came from (an HTTP body, libpq). Its
 * percent-encoded form (as a form body carries it) is remembered too. Values shorter than 4
 * bytes are not (they would mangle ordinary words; the pattern rules still apply). For secrets
 * that last the process (configured keys): the first 64 are kept. NULL accepted. Thread-safe. */
void firn_secret_register(const char *secret);
/** firn_secret_register for a token that expires and is replaced (an OAuth access token, a
 * signed assertion, vended keys): the last 64 are kept, the oldest dropped. */
void firn_secret_register_token(const char *token);
/** firn_secret_register of a configured secret and of the parts that travel alone: the
 * password in a URI's userinfo, "password=" values of a URI query or key=value conninfo, the
 * secret after ':' of "client_id:client_secret". NULL accepted. Thread-safe. */
void firn_secret_register_config(const char *value);
/** Redacts the NUL-terminated text in place (cap bytes of room; a longer result is cut at a
 * whole UTF-8 character): every remembered secret becomes "<redacted>", and so do the values
 * of credential patterns: "Bearer <token>" / "Basic <base64>", key=value and JSON "key":
 * "value" whose key names a credential (password, secret, token, credential, assertion,
 * signature, private_key, api_key, authorization), "X-...-Token: value" headers and the
 * password in "scheme://user:password@". firn_err_set, firn_err_context and the log writers
 * call it: it is the one place relayed text is cleaned. NULL accepted. Thread-safe. */
void firn_redact_text(char *text, size_t cap);
/** Replaces the password in a libpq connection string or URI with "********" into out
 * (out_cap bytes, always NUL-terminated) so it can be logged. Handles key=value conninfo
 * ("password=..." quoted or not) and URIs (postgresql://user:secret@host). */
void firn_redact_conninfo(const char *conninfo, char *out, size_t out_cap);

#endif
