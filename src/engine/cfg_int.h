/* SPDX-License-Identifier: Apache-2.0 */
/* Private to the configuration loader: the tables that describe each file (keys, types, ranges,
 * OLake aliases and where each value lands in the C struct) and the walker that validates a JSON
 * document against them and binds it. `firn spec` prints the same tables as JSON Schema. */
#ifndef FIRN_CFG_INT_H
#define FIRN_CFG_INT_H

#include "firn/config.h"

#include <jansson.h>
#include <stddef.h>

/** What a key holds and how it is stored (at base + offset). */
typedef enum cfg_type {
    CFG_OBJECT,   /* nested keys (props); stores nothing itself */
    CFG_STRING,   /* char * */
    CFG_SECRET,   /* char *; its value never appears in a message */
    CFG_INT,      /* int64_t within [min, max] */
    CFG_BOOL,     /* bool */
    CFG_NOT_BOOL, /* bool stored inverted (OLake no_identifier_fields) */
    CFG_ENUM,     /* int from values[] */
    CFG_FLAGS,    /* uint32_t: array of values[] names, OR'ed */
    CFG_SIZE,     /* uint64_t bytes: integer or "64MiB" */
    CFG_SECONDS,  /* int64_t milliseconds from a number of seconds within [min, max] */
    CFG_STRLIST,  /* firn_strlist from an array of strings */
    CFG_KVMAP,    /* firn_kvlist from an object of scalars */
    CFG_RAW,      /* char *: any JSON kept as compact text */
    CFG_IGNORED,  /* any JSON: an OLake key firn has no use for; warns */
    CFG_CUSTOM,   /* bound by node->bind */
} cfg_type;

/** One accepted spelling of an enum. unsupported, when set, rejects it with that reason. */
typedef struct cfg_enum_value {
    const char *name;
    int value;
    const char *unsupported;
} cfg_enum_value;

/** Property flags. */
enum {
    CFG_REQUIRED = 1u << 0, /* must be present */
    CFG_OLAKE = 1u << 1,    /* OLake's spelling (documented as an alias) */
};

typedef struct cfg_node cfg_node;
typedef struct cfg_ctx cfg_ctx;

/** One key of an object. */
typedef struct cfg_prop {
    const char *name;
    const cfg_node *node;
    size_t off;            /* offset of the stored value from the binding base */
    unsigned flags;        /* CFG_REQUIRED, CFG_OLAKE */
    const char *canonical; /* for an alias: the firn key it stands for, for the docs */
    const char *desc;      /* overrides node->desc in the schema */
} cfg_prop;

/** Shapes of custom nodes, for the JSON Schema. */
typedef enum cfg_shape {
    CFG_SHAPE_ARRAY,         /* array of items */
    CFG_SHAPE_MAP_OF_ARRAYS, /* object: any key -> array of items */
    CFG_SHAPE_SCHEMA,        /* schema_json gives the JSON Schema */
} cfg_shape;

typedef firn_rc (*cfg_bind_fn)(cfg_ctx *ctx, const json_t *v, void *base, firn_err *err);
typedef firn_rc (*cfg_extra_fn)(
    cfg_ctx *ctx, const char *key, const json_t *v, void *base, firn_err *err);

/** Description of one value. Unused fields are zero. */
struct cfg_node {
    cfg_type type;
    const char *desc;
    const cfg_prop *props;        /* CFG_OBJECT, terminated by a NULL name */
    cfg_extra_fn extra;           /* CFG_OBJECT: takes keys not in props (open object) */
    const cfg_enum_value *values; /* CFG_ENUM, CFG_FLAGS, terminated by a NULL name */
    int64_t min, max;             /* CFG_INT, CFG_SECONDS (seconds) */
    cfg_bind_fn bind;             /* CFG_CUSTOM */
    cfg_shape shape;              /* CFG_CUSTOM */
    const cfg_node *items;        /* CFG_CUSTOM array shapes */
    const char *schema_json;      /* CFG_CUSTOM, CFG_SHAPE_SCHEMA */
    const char *def;              /* default as JSON text, for the schema; NULL = none */
    bool quiet;                   /* CFG_IGNORED without a warning (keys OLake always writes) */
};

#define CFG_PATH_MAX 384

/** State of one file's walk. */
struct cfg_ctx {
    const char *file; /* display name for messages */
    firn_config *cfg; /* for warnings */
    char path[CFG_PATH_MAX];
    size_t path_len;
    struct {
        const void *addr;
        char *path;
    } * seen; /* stored values and the key that set them (alias conflicts) */
    size_t n_seen, cap_seen;
    bool secret; /* expanding a secret's value: messages quote none of its text */
};

/* The root node of each file (cfg_schema.c). */
extern const cfg_node firn__cfg_source_root;
extern const cfg_node firn__cfg_destination_root;
extern const cfg_node firn__cfg_streams_root;
extern const cfg_node firn__cfg_state_root;

/* Walker (cfg_walk.c). */

/** Validates v against node and stores it at base (+ the props' offsets). Errors name ctx->file
 * and the key path. */
FIRN_MUST_CHECK firn_rc
firn__cfg_walk(cfg_ctx *ctx, const cfg_node *node, const json_t *v, void *base, firn_err *err);
/* Longest Iceberg namespace level or table name firn writes (bytes): a folder name in a local
 * warehouse holds at most 255 bytes. */
#define FIRN_CFG_NAME_MAX 255
/** Why name cannot be an Iceberg table name (dotted false) or namespace (dotted true, levels
 * joined by dots), as the end of an error line ("is longer than 255 bytes", ...); NULL when it
 * can. Names are checked before anything is written: the catalog refuses them later. */
const char *firn__cfg_iceberg_name_problem(const char *name, bool dotted);

/** Sets err to "<file>: <message>" (FIRN_ERR_CONFIG) and returns FIRN_ERR_CONFIG. */
firn_rc firn__cfg_fail(cfg_ctx *ctx, firn_err *err, const char *fmt, ...) FIRN_PRINTF(3, 4);
/** Appends ".key" (or "key" at the top) to the path; returns the previous length. */
size_t firn__cfg_path_push(cfg_ctx *ctx, const char *key);
/** Appends "[i]" to the path; returns the previous length. */
size_t firn__cfg_path_index(cfg_ctx *ctx, size_t i);
/** Restores the path to len. */
void firn__cfg_path_pop(cfg_ctx *ctx, size_t len);
/** The current path, or "(top level)" when empty. */
const char *firn__cfg_path(const cfg_ctx *ctx);
/** Records that the value at addr was set by the current path; FIRN_ERR_CONFIG when another
 * key (an alias) set it already. */
FIRN_MUST_CHECK firn_rc firn__cfg_mark_seen(cfg_ctx *ctx, const void *addr, firn_err *err);
/** True when a key of the file set the value at addr. */
bool firn__cfg_was_set(const cfg_ctx *ctx, const void *addr);
/** Forgets the values recorded after the first n (scopes conflict checks to one entry). */
void firn__cfg_seen_truncate(cfg_ctx *ctx, size_t n);
/** Frees the walk's bookkeeping. */
void firn__cfg_ctx_deinit(cfg_ctx *ctx);
/** Reads a string value with ${VAR} / ${VAR:-default} substituted into an owned copy.
 * FIRN_ERR_CONFIG naming the path and variable when it is unset without default. */
FIRN_MUST_CHECK firn_rc firn__cfg_expand(cfg_ctx *ctx, const char *text, char **out, firn_err *err);
/** Encodes v (jansson dump flags) into an owned string (firn_free); NULL only if v cannot be
 * encoded. */
char *firn__cfg_json_text(const json_t *v, size_t flags);
/** Adds a warning line "<file>: <message>". */
void firn__cfg_warn(cfg_ctx *ctx, const char *fmt, ...) FIRN_PRINTF(2, 3);
/** Levenshtein distance of a and b, capped at 16. */
size_t firn__cfg_edit_distance(const char *a, const char *b);

/* Custom binders and post-processing (cfg_streams.c, cfg_state.c, cfg_post.c). */
FIRN_MUST_CHECK firn_rc firn__cfg_bind_selected(cfg_ctx *ctx,
                                                const json_t *v,
                                                void *base,
                                                firn_err *err);
FIRN_MUST_CHECK firn_rc firn__cfg_bind_catalog_streams(cfg_ctx *ctx,
                                                       const json_t *v,
                                                       void *base,
                                                       firn_err *err);
FIRN_MUST_CHECK firn_rc firn__cfg_bind_partition(cfg_ctx *ctx,
                                                 const json_t *v,
                                                 void *base,
                                                 firn_err *err);
FIRN_MUST_CHECK firn_rc firn__cfg_bind_state_streams(cfg_ctx *ctx,
                                                     const json_t *v,
                                                     void *base,
                                                     firn_err *err);
FIRN_MUST_CHECK firn_rc firn__cfg_bind_lsn(cfg_ctx *ctx,
                                           const json_t *v,
                                           void *base,
                                           firn_err *err);
FIRN_MUST_CHECK firn_rc
firn__cfg_state_extra(cfg_ctx *ctx, const char *key, const json_t *v, void *base, firn_err *err);

/** Parses one partition expression ("day(created_at)", "bucket(16, id)", "region") into f. */
FIRN_MUST_CHECK firn_rc firn__cfg_parse_partition_expr(const char *text,
                                                       firn_cfg_partition *f,
                                                       char *why,
                                                       size_t why_cap);

/* Defaults and checks after binding (cfg_post.c). */
void firn__cfg_source_defaults(firn_source_config *s);
void firn__cfg_destination_defaults(firn_destination_config *d);
FIRN_MUST_CHECK firn_rc firn__cfg_source_post(cfg_ctx *ctx, firn_source_config *s, firn_err *err);
FIRN_MUST_CHECK firn_rc firn__cfg_destination_post(cfg_ctx *ctx,
                                                   firn_destination_config *d,
                                                   firn_err *err);
FIRN_MUST_CHECK firn_rc firn__cfg_streams_post(cfg_ctx *ctx, firn_streams_config *s, firn_err *err);
void firn__cfg_source_free(firn_source_config *s);
void firn__cfg_destination_free(firn_destination_config *d);
void firn__cfg_stream_free(firn_stream_config *s);
void firn__cfg_kvlist_clear(firn_kvlist *l);
/** Appends an owned copy of key and value to l. */
void firn__cfg_kvlist_push(firn_kvlist *l, const char *key, const char *value);

/* The folder of path into out (cap bytes): "." without a slash, "/" for a file at the root. */
void firn__cfg_dir_of(const char *path, char *out, size_t cap);
/** Writes text to path atomically (temporary file in the same folder, fsync, rename, fsync of
 * the folder). FIRN_ERR_IO naming the path. */
FIRN_MUST_CHECK firn_rc firn__cfg_write_atomic(const char *path,
                                               const char *text,
                                               size_t len,
                                               firn_err *err);

#endif
