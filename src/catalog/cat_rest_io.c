/* SPDX-License-Identifier: Apache-2.0 */
/* The REST catalog's FileIO: routes each location to a local FileIO, to the S3 or GCS FileIO of
 * the table it lies in when the catalog vended storage credentials for that table (refreshed
 * through the catalog before they expire), or to a shared S3/GCS FileIO made from the
 * configured templates (ICEBERG.md §G "Credential vending", §H "Vended credentials"). */
#include "cat_rest_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Refresh vended credentials this long before they expire. */
#define REFRESH_MARGIN_MS 120000

typedef struct vended {
    struct firn__rest_io *owner;
    char *ns;
    char *name;
    char *prefix; /* table location without trailing '/' */
    bool gcs;
    pthread_mutex_t mu; /* guards creds and io creation */
    firn_props creds;
    firn_io *io; /* created on first use */
} vended;

struct firn__rest_io {
    firn_io base;
    pthread_mutex_t mu; /* guards tables and the default FileIOs */
    firn__rest_refresh_fn refresh;
    void *refresh_ctx;
    firn_io *local;
    firn_io *s3;  /* default S3 FileIO, NULL until first use */
    firn_io *gcs; /* default GCS FileIO, NULL until first use */
    firn_s3_options s3o;
    firn_gcs_options gcso;
    vended **tables;
    size_t n_tables;
};

/* ------------------------------------------------------------------------------------------------
 * Credential values
 * ----------------------------------------------------------------------------------------------*/

static const char *const S3_EXPIRY_KEYS[] = {"s3.session-token-expires-at-ms", "expiration",
                                             "expiration-time", NULL};
static const char *const GCS_EXPIRY_KEYS[] = {"gcs.oauth2.token-expires-at",
                                              "gcs.oauth2.token_expires_at", "expiration-time",
                                              "expiration", NULL};

int64_t firn__rest_parse_expiry(const char *text)
{
    if (!text || !*text)
        return 0;
    int64_t v = 0;
    if (firn_parse_i64(text, strlen(text), &v, NULL) == FIRN_OK)
        return v > 0 && v < 100000000000LL ? v * 1000 : (v > 0 ? v : 0); /* seconds or ms */
    return firn_time_parse_ms(text);                                     /* RFC 3339 */
}

static int64_t creds_expiry(const firn_props *creds, const char *const *keys)
{
    for (size_t i = 0; keys[i]; i++) {
        int64_t v = firn__rest_parse_expiry(firn_props_get(creds, keys[i]));
        if (v > 0)
            return v;
    }
    return 0;
}

static bool has_s3_keys(const firn_props *p)
{
    return firn_props_get(p, "s3.access-key-id") && firn_props_get(p, "s3.secret-access-key");
}

static bool has_gcs_token(const firn_props *p)
{
    return firn_props_get(p, "gcs.oauth2.token") != NULL;
}

/* Refreshes v's credentials when they expire within the margin. Called with v->mu held. */
static firn_rc refresh_if_due(vended *v, const char *const *expiry_keys, firn_err *err)
{
    int64_t exp = creds_expiry(&v->creds, expiry_keys);
    if (exp == 0 || firn_now_us() / 1000 + REFRESH_MARGIN_MS < exp)
        return FIRN_OK;
    firn_props fresh;
    firn_props_init(&fresh);
    firn_rc rc = v->owner->refresh(v->owner->refresh_ctx, v->ns, v->name, v->prefix, &fresh, err);
    if (!rc && (v->gcs ? has_gcs_token(&fresh) : has_s3_keys(&fresh))) {
        firn_props_deinit(&v->creds);
        v->creds = fresh;
        return FIRN_OK;
    }
    firn_props_deinit(&fresh);
    if (!rc)
        rc = firn_err_set(err, FIRN_ERR_AUTH,
                          "catalog returned no storage credentials for table \"%s.%s\"", v->ns,
                          v->name);
    /* Keys that still work for a few seconds beat failing now. */
    return exp > firn_now_us() / 1000 + 5000 ? FIRN_OK : rc;
}

static firn_rc vended_keys(void *ctx, firn_aws_keys *out, firn_err *err)
{
    vended *v = ctx;
    pthread_mutex_lock(&v->mu);
    firn_rc rc = refresh_if_due(v, S3_EXPIRY_KEYS, err);
    if (!rc) {
        const char *st = firn_props_get(&v->creds, "s3.session-token");
        out->access_key_id = firn_strdup(firn_props_get(&v->creds, "s3.access-key-id"));
        out->secret_access_key = firn_strdup(firn_props_get(&v->creds, "s3.secret-access-key"));
        out->session_token = st && *st ? firn_strdup(st) : NULL;
        out->expires_at_ms = creds_expiry(&v->creds, S3_EXPIRY_KEYS);
    }
    pthread_mutex_unlock(&v->mu);
    return rc;
}

static firn_rc vended_token(void *ctx, char **out_token, int64_t *out_expires_at_ms, firn_err *err)
{
    vended *v = ctx;
    pthread_mutex_lock(&v->mu);
    firn_rc rc = refresh_if_due(v, GCS_EXPIRY_KEYS, err);
    if (!rc) {
        *out_token = firn_strdup(firn_props_get(&v->creds, "gcs.oauth2.token"));
        *out_expires_at_ms = creds_expiry(&v->creds, GCS_EXPIRY_KEYS);
    }
    pthread_mutex_unlock(&v->mu);
    return rc;
}

/* ------------------------------------------------------------------------------------------------
 * Choosing and creating FileIOs
 * ----------------------------------------------------------------------------------------------*/

static bool is_local(const char *location)
{
    return location[0] == '/' || strncmp(location, "file:", 5) == 0;
}

static bool is_scheme(const char *location, const char *scheme)
{
    size_t n = strlen(scheme);
    return strncmp(location, scheme, n) == 0 && strncmp(location + n, "://", 3) == 0;
}

static bool is_s3(const char *location)
{
    return is_scheme(location, "s3") || is_scheme(location, "s3a") || is_scheme(location, "s3n");
}

/* Creates v's FileIO from the templates and its credentials. Called with v->mu held. */
static firn_rc vended_open(vended *v, firn_err *err)
{
    firn__rest_io *r = v->owner;
    firn_rc rc;
    if (v->gcs) {
        firn_gcs_options o = r->gcso;
        const char *host = firn_props_get(&v->creds, "gcs.service.host");
        if (host)
            o.endpoint = host;
        o.cred = firn_cred_token_fn_new(vended_token, v, 0);
        rc = firn_io_gcs_new(&o, &v->io, err);
        firn_cred_unref(o.cred);
    } else {
        firn_s3_options o = r->s3o;
        o.cred = NULL;
        o.access_key_id = o.secret_access_key = o.session_token = NULL;
        o.keys_fn = vended_keys;
        o.keys_ctx = v;
        const char *ep = firn_props_get(&v->creds, "s3.endpoint");
        const char *region = firn_props_get(&v->creds, "client.region");
        const char *path_style = firn_props_get(&v->creds, "s3.path-style-access");
        if (ep && *ep)
            o.endpoint = ep;
        if (!region)
            region = firn_props_get(&v->creds, "s3.region");
        if (region && *region)
            o.region = region;
        if (path_style)
            o.addressing = strcmp(path_style, "true") == 0 ? FIRN_S3_ADDRESSING_PATH
                                                           : FIRN_S3_ADDRESSING_VIRTUAL;
        rc = firn_io_s3_new(&o, &v->io, err);
    }
    if (rc)
        firn_err_context(err, "while opening storage of table \"%s.%s\" with vended credentials",
                         v->ns, v->name);
    return rc;
}

/* The vended entry whose prefix is the longest one of location, or NULL. */
static vended *find_table(firn__rest_io *r, const char *location)
{
    vended *best = NULL;
    size_t best_len = 0;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->n_tables; i++) {
        vended *v = r->tables[i];
        size_t n = strlen(v->prefix);
        if (n >= best_len && strncmp(location, v->prefix, n) == 0 &&
            (location[n] == '/' || location[n] == '\0')) {
            best = v;
            best_len = n;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return best;
}

static firn_rc default_io(firn__rest_io *r, const char *location, firn_io **out, firn_err *err)
{
    firn_rc rc = FIRN_OK;
    pthread_mutex_lock(&r->mu);
    if (is_s3(location)) {
        if (!r->s3)
            rc = firn_io_s3_new(&r->s3o, &r->s3, err);
        *out = r->s3;
    } else if (is_scheme(location, "gs")) {
        if (!r->gcs)
            rc = firn_io_gcs_new(&r->gcso, &r->gcs, err);
        *out = r->gcs;
    } else {
        rc = firn_err_set(err, FIRN_ERR_UNSUPPORTED, "no FileIO for location \"%s\"", location);
    }
    pthread_mutex_unlock(&r->mu);
    if (rc)
        firn_err_context(err, "while opening storage for \"%s\"", location);
    return rc;
}

static firn_rc pick(firn__rest_io *r, const char *location, firn_io **out, firn_err *err)
{
    *out = NULL;
    if (is_local(location)) {
        *out = r->local;
        return FIRN_OK;
    }
    vended *v = find_table(r, location);
    if (!v)
        return default_io(r, location, out, err);
    pthread_mutex_lock(&v->mu);
    firn_rc rc = v->io ? FIRN_OK : vended_open(v, err);
    *out = v->io;
    pthread_mutex_unlock(&v->mu);
    return rc;
}

/* ------------------------------------------------------------------------------------------------
 * The firn_io vtable: every operation goes to the chosen FileIO
 * ----------------------------------------------------------------------------------------------*/

static firn_rc rio_create(firn_io *io, const char *location, firn_io_writer **out, firn_err *err)
{
    firn_io *target;
    *out = NULL;
    FIRN_TRY(pick((firn__rest_io *)io, location, &target, err));
    return firn_io_create(target, location, out, err);
}

static firn_rc rio_write(firn_io_writer *w, const void *p, size_t len, firn_err *err)
{
    (void)w;
    (void)p;
    (void)len;
    /* Writers belong to the chosen FileIO; this one never hands out its own. */
    return firn_err_set(err, FIRN_ERR_INTERNAL, "write on a routing FileIO writer");
}

static firn_rc rio_close(firn_io_writer *w, uint64_t *out_size_bytes, firn_err *err)
{
    (void)w;
    (void)out_size_bytes;
    return firn_err_set(err, FIRN_ERR_INTERNAL, "close on a routing FileIO writer");
}

static void rio_abort(firn_io_writer *w)
{
    (void)w;
}

static firn_rc rio_read(firn_io *io, const char *location, firn_buf *out, firn_err *err)
{
    firn_io *target;
    FIRN_TRY(pick((firn__rest_io *)io, location, &target, err));
    return firn_io_read(target, location, out, err);
}

static firn_rc rio_read_range(
    firn_io *io, const char *location, uint64_t offset, size_t len, firn_buf *out, firn_err *err)
{
    firn_io *target;
    FIRN_TRY(pick((firn__rest_io *)io, location, &target, err));
    return firn_io_read_range(target, location, offset, len, out, err);
}

static firn_rc rio_size(firn_io *io, const char *location, uint64_t *out_size_bytes, firn_err *err)
{
    firn_io *target;
    FIRN_TRY(pick((firn__rest_io *)io, location, &target, err));
    return firn_io_size(target, location, out_size_bytes, err);
}

static firn_rc rio_remove(firn_io *io, const char *location, firn_err *err)
{
    firn_io *target;
    FIRN_TRY(pick((firn__rest_io *)io, location, &target, err));
    return firn_io_remove(target, location, err);
}

static firn_rc
rio_list(firn_io *io, const char *prefix, firn_io_list_fn fn, void *ctx, firn_err *err)
{
    firn_io *target;
    FIRN_TRY(pick((firn__rest_io *)io, prefix, &target, err));
    return firn_io_list(target, prefix, fn, ctx, err);
}

static void rio_destroy(firn_io *io)
{
    (void)io; /* owned by the catalog: firn__rest_io_free */
}

static const firn_io_vtable REST_IO_VT = {
    .scheme = "rest",
    .create = rio_create,
    .write = rio_write,
    .close = rio_close,
    .abort = rio_abort,
    .read = rio_read,
    .read_range = rio_read_range,
    .size = rio_size,
    .remove = rio_remove,
    .destroy = rio_destroy,
    .list = rio_list,
};

/* ------------------------------------------------------------------------------------------------
 * Lifecycle
 * ----------------------------------------------------------------------------------------------*/

static char *dup_or_null(const char *s)
{
    return s ? firn_strdup(s) : NULL;
}

firn__rest_io *
firn__rest_io_new(const firn_catalog_rest_opts *opts, firn__rest_refresh_fn refresh, void *ctx)
{
    firn__rest_io *r = firn_calloc(1, sizeof(*r));
    r->base.vt = &REST_IO_VT;
    pthread_mutex_init(&r->mu, NULL);
    r->refresh = refresh;
    r->refresh_ctx = ctx;
    r->local = firn_io_local_new();
    if (opts->s3)
        r->s3o = *opts->s3;
    r->s3o.endpoint = dup_or_null(r->s3o.endpoint);
    r->s3o.region = dup_or_null(r->s3o.region);
    r->s3o.access_key_id = dup_or_null(r->s3o.access_key_id);
    r->s3o.secret_access_key = dup_or_null(r->s3o.secret_access_key);
    r->s3o.session_token = dup_or_null(r->s3o.session_token);
    r->s3o.cred = firn_cred_ref(r->s3o.cred);
    r->s3o.http.ca_bundle = dup_or_null(r->s3o.http.ca_bundle);
    r->s3o.http.user_agent = dup_or_null(r->s3o.http.user_agent);
    if (opts->gcs)
        r->gcso = *opts->gcs;
    r->gcso.endpoint = dup_or_null(r->gcso.endpoint);
    r->gcso.cred = firn_cred_ref(r->gcso.cred);
    r->gcso.http.ca_bundle = dup_or_null(r->gcso.http.ca_bundle);
    r->gcso.http.user_agent = dup_or_null(r->gcso.http.user_agent);
    return r;
}

static void free_const(const char *s)
{
    firn_free((char *)s);
}

void firn__rest_io_free(firn__rest_io *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_tables; i++) {
        vended *v = r->tables[i];
        firn_io_free(v->io);
        firn_props_deinit(&v->creds);
        pthread_mutex_destroy(&v->mu);
        firn_free(v->ns);
        firn_free(v->name);
        firn_free(v->prefix);
        firn_free(v);
    }
    firn_free(r->tables);
    firn_io_free(r->s3);
    firn_io_free(r->gcs);
    firn_io_free(r->local);
    free_const(r->s3o.endpoint);
    free_const(r->s3o.region);
    free_const(r->s3o.access_key_id);
    free_const(r->s3o.secret_access_key);
    free_const(r->s3o.session_token);
    free_const(r->s3o.http.ca_bundle);
    free_const(r->s3o.http.user_agent);
    firn_cred_unref(r->s3o.cred);
    free_const(r->gcso.endpoint);
    free_const(r->gcso.http.ca_bundle);
    free_const(r->gcso.http.user_agent);
    firn_cred_unref(r->gcso.cred);
    pthread_mutex_destroy(&r->mu);
    firn_free(r);
}

firn_io *firn__rest_io_base(firn__rest_io *r)
{
    return &r->base;
}

void firn__rest_io_set_table(firn__rest_io *r,
                             const char *ns,
                             const char *name,
                             const char *location,
                             const firn_props *creds)
{
    if (!location || is_local(location))
        return;
    bool gcs = is_scheme(location, "gs");
    if (gcs ? !has_gcs_token(creds) : !(is_s3(location) && has_s3_keys(creds)))
        return;
    size_t n = strlen(location);
    while (n > 0 && location[n - 1] == '/')
        n--;
    pthread_mutex_lock(&r->mu);
    vended *v = NULL;
    for (size_t i = 0; i < r->n_tables && !v; i++) {
        if (strlen(r->tables[i]->prefix) == n && strncmp(r->tables[i]->prefix, location, n) == 0)
            v = r->tables[i];
    }
    if (!v) {
        v = firn_calloc(1, sizeof(*v));
        v->owner = r;
        v->ns = firn_strdup(ns);
        v->name = firn_strdup(name);
        v->prefix = firn_strndup(location, n);
        v->gcs = gcs;
        pthread_mutex_init(&v->mu, NULL);
        firn_props_init(&v->creds);
        r->tables = firn_reallocarray(r->tables, r->n_tables + 1, sizeof(*r->tables));
        r->tables[r->n_tables++] = v;
        FIRN_LOG(FIRN_LOG_INFO, "catalog", "table %s.%s: using vended %s credentials", ns, name,
                 gcs ? "GCS" : "S3");
    }
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_lock(&v->mu);
    firn_props_deinit(&v->creds);
    firn_props_copy(&v->creds, creds);
    pthread_mutex_unlock(&v->mu);
}
