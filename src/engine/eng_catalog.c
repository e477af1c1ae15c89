/* SPDX-License-Identifier: Apache-2.0 */
/* Opening the destination: the catalog named by destination.json (the embedded SQL catalog or
 * an Iceberg REST catalog with its authentication) and the FileIO for table files, chosen by the
 * warehouse's scheme (file:// local, s3:// S3, gs:// GCS) or, for REST, the catalog's own FileIO
 * that also uses vended credentials. */
#include "cfg_int.h"
#include "engine_int.h"
#include "firn/net.h"

#include <stdlib.h>
#include <string.h>

static const char *env_nonempty(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* The service-account key file: the configured one, else GOOGLE_APPLICATION_CREDENTIALS. */
static const char *google_key_file(const firn_catalog_config *cc)
{
    return cc->google_credentials_file ? cc->google_credentials_file
                                       : env_nonempty("GOOGLE_APPLICATION_CREDENTIALS");
}

static firn_rc google_cred(const firn_catalog_config *cc, firn_cred **out, firn_err *err)
{
    const char *key = google_key_file(cc);
    if (!key)
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "catalog auth \"google\" needs \"catalog.google_credentials_file\" "
                            "or GOOGLE_APPLICATION_CREDENTIALS (a service-account JSON key)");
    firn_google_options o = {0};
    o.key_file = key;
    o.scope = cc->scope; /* NULL: cloud-platform */
    return firn_cred_google_new(&o, out, err);
}

static firn_rc oauth2_cred(const firn_catalog_config *cc, firn_cred **out, firn_err *err)
{
    const char *colon = strchr(cc->credential, ':');
    char *id =
        colon ? firn_strndup(cc->credential, (size_t)(colon - cc->credential)) : firn_strdup("");
    firn_oauth2_options o = {0};
    o.token_uri = cc->oauth2_server_uri;
    o.catalog_uri = cc->uri;
    o.client_id = id;
    o.client_secret = colon ? colon + 1 : cc->credential;
    o.scope = cc->scope;
    firn_rc rc = firn_cred_oauth2_new(&o, out, err);
    firn_free(id);
    return rc;
}

/* The catalog's credential provider (NULL for none). */
static firn_rc catalog_cred(const firn_destination_config *d, firn_cred **out, firn_err *err)
{
    const firn_catalog_config *cc = &d->catalog;
    *out = NULL;
    switch (cc->auth) {
    case FIRN_REST_AUTH_NONE:
        return FIRN_OK;
    case FIRN_REST_AUTH_BEARER:
        *out = firn_cred_bearer_new(cc->token);
        return FIRN_OK;
    case FIRN_REST_AUTH_OAUTH2:
        return oauth2_cred(cc, out, err);
    case FIRN_REST_AUTH_GOOGLE:
        return google_cred(cc, out, err);
    case FIRN_REST_AUTH_SIGV4: {
        firn_sigv4_options o = {0};
        o.service = cc->sigv4_service;
        o.region = cc->sigv4_region;
        o.access_key_id = d->storage.access_key_id;
        o.secret_access_key = d->storage.secret_access_key;
        o.session_token = d->storage.session_token;
        return firn_cred_sigv4_new(&o, out, err);
    }
    }
    return firn_err_set(err, FIRN_ERR_CONFIG, "unknown catalog auth %d", (int)cc->auth);
}

/* S3 settings from destination.storage (the environment fills what is missing). endpoint_buf
 * holds an endpoint given without a scheme. */
static firn_s3_options s3_template(const firn_storage_config *st, char *endpoint_buf, size_t cap)
{
    firn_s3_options o = {0};
    o.endpoint = st->endpoint;
    if (st->endpoint && !strstr(st->endpoint, "://")) {
        snprintf(endpoint_buf, cap, "%s://%s", st->use_ssl ? "https" : "http", st->endpoint);
        o.endpoint = endpoint_buf;
    }
    o.region = st->region;
    o.addressing = st->path_style ? FIRN_S3_ADDRESSING_PATH : FIRN_S3_ADDRESSING_AUTO;
    o.access_key_id = st->access_key_id;
    o.secret_access_key = st->secret_access_key;
    o.session_token = st->session_token;
    return o;
}

/* Token provider for GCS when the catalog vends none: the Google key of the configuration or
 * the environment; NULL without one (fake-gcs-server needs none). */
static firn_rc gcs_cred(const firn_catalog_config *cc, firn_cred **out, firn_err *err)
{
    *out = NULL;
    if (!google_key_file(cc))
        return FIRN_OK;
    return google_cred(cc, out, err);
}

static bool has_scheme(const char *location, const char *scheme)
{
    size_t n = strlen(scheme);
    return location && strncmp(location, scheme, n) == 0 && strncmp(location + n, "://", 3) == 0;
}

/* FileIO for the SQL catalog's warehouse. */
static firn_rc open_sql_io(const firn_destination_config *d, firn_io **out, firn_err *err)
{
    const char *wh = d->catalog.warehouse;
    *out = NULL;
    if (has_scheme(wh, "s3") || has_scheme(wh, "s3a")) {
        char ep[1024];
        firn_s3_options o = s3_template(&d->storage, ep, sizeof(ep));
        return firn_io_s3_new(&o, out, err);
    }
    if (has_scheme(wh, "gs")) {
        firn_gcs_options o = {0};
        FIRN_TRY(gcs_cred(&d->catalog, &o.cred, err));
        firn_rc rc = firn_io_gcs_new(&o, out, err);
        firn_cred_unref(o.cred);
        return rc;
    }
    *out = firn_io_local_new();
    return FIRN_OK;
}

static firn_rc open_rest(const firn_destination_config *d, firn_catalog **out, firn_err *err)
{
    const firn_catalog_config *cc = &d->catalog;
    firn_http_headers headers;
    firn_http_headers_init(&headers);
    for (size_t i = 0; i < cc->headers.count; i++)
        firn_http_headers_set(&headers, cc->headers.items[i].key, cc->headers.items[i].value);
    if (cc->project_id)
        firn_http_headers_set(&headers, "x-goog-user-project", cc->project_id);
    firn_props props;
    firn_props_init(&props);
    for (size_t i = 0; i < cc->properties.count; i++)
        firn_props_set(&props, cc->properties.items[i].key, cc->properties.items[i].value);
    char ep[1024];
    firn_s3_options s3 = s3_template(&d->storage, ep, sizeof(ep));
    firn_gcs_options gcs = {0};
    firn_cred *cred = NULL;
    firn_rc rc = catalog_cred(d, &cred, err);
    if (!rc)
        rc = gcs_cred(cc, &gcs.cred, err);
    if (!rc) {
        firn_catalog_rest_opts o = {0};
        o.name = cc->name;
        o.uri = cc->uri;
        o.warehouse = cc->warehouse;
        o.prefix = cc->prefix;
        o.properties = &props;
        o.headers = &headers;
        o.cred = cred;
        o.s3 = &s3;
        o.gcs = &gcs;
        rc = firn_catalog_rest_open(&o, out, err);
    }
    firn_cred_unref(gcs.cred);
    firn_cred_unref(cred);
    firn_props_deinit(&props);
    firn_http_headers_deinit(&headers);
    return rc;
}

firn_rc firn__engine_open_destination(const firn_destination_config *d,
                                      firn_catalog **out_catalog,
                                      firn_io **out_io,
                                      bool *out_io_owned,
                                      firn_err *err)
{
    const firn_catalog_config *cc = &d->catalog;
    *out_catalog = NULL;
    *out_io = NULL;
    *out_io_owned = false;
    firn_rc rc;
    if (cc->kind == FIRN_CATALOG_REST) {
        rc = open_rest(d, out_catalog, err);
        if (!rc)
            *out_io = firn_catalog_rest_io(*out_catalog);
    } else {
        rc = open_sql_io(d, out_io, err);
        *out_io_owned = *out_io != NULL;
        firn_catalog_sql_opts o = {cc->name, cc->uri, cc->warehouse, *out_io, 0};
        if (!rc)
            rc = firn_catalog_sql_open(&o, out_catalog, err);
    }
    if (rc) {
        firn_catalog_free(*out_catalog);
        if (*out_io_owned)
            firn_io_free(*out_io);
        *out_catalog = NULL;
        *out_io = NULL;
        *out_io_owned = false;
        char safe[FIRN_URL_REDACTED_MAX];
        firn_url_redact(safe, sizeof(safe), cc->uri);
        if (!err || !strstr(err->msg, safe)) /* the SQL catalog's messages name its file */
            firn_err_context(err, "while opening catalog \"%s\"", safe);
    }
    return rc;
}
