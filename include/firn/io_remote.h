/* SPDX-License-Identifier: Apache-2.0 */
/* FileIO over object stores: S3 and S3-compatible servers (SigV4, multipart uploads, path-style
 * or virtual-host addressing, custom endpoints such as SeaweedFS, versitygw or R2) and Google
 * Cloud Storage (JSON API with resumable uploads and Google OAuth tokens). Both implement the
 * firn_io vtable of firn/io.h; tables always record the caller's s3:// or gs:// locations. */
#ifndef FIRN_IO_REMOTE_H
#define FIRN_IO_REMOTE_H

#include "firn/io.h"
#include "firn/net.h"

/** How S3 object URLs are formed. */
typedef enum firn_s3_addressing {
    FIRN_S3_ADDRESSING_AUTO = 0, /* virtual-host on AWS, path-style on a custom endpoint */
    FIRN_S3_ADDRESSING_PATH,     /* <endpoint>/<bucket>/<key> */
    FIRN_S3_ADDRESSING_VIRTUAL,  /* <scheme>://<bucket>.<endpoint host>/<key> */
} firn_s3_addressing;

/** S3 FileIO settings; zero fields take the defaults named here. Strings are copied. */
typedef struct firn_s3_options {
    /* "http://127.0.0.1:7070" (no trailing path). NULL: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL,
     * else https://s3.<region>.amazonaws.com. */
    const char *endpoint;
    const char *region; /* NULL: AWS_REGION, AWS_DEFAULT_REGION, else "us-east-1" */
    firn_s3_addressing addressing;
    /* Credentials, first match wins: cred (a provider, a reference is taken), keys_fn (vended
     * credentials, refreshed before expiry), the static keys, the environment
     * (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN). */
    firn_cred *cred;
    firn_aws_keys_fn keys_fn;
    void *keys_ctx; /* borrowed; must outlive the FileIO */
    const char *access_key_id;
    const char *secret_access_key;
    const char *session_token;
    size_t multipart_threshold; /* objects at least this large use multipart; default 16 MiB */
    size_t part_size;           /* default 8 MiB; at least 5 MiB (S3's minimum) */
    bool unsigned_payload;      /* sign UNSIGNED-PAYLOAD (HTTPS only) instead of hashing */
    bool conditional_put;       /* send If-None-Match: * so an existing object is never replaced
                                   (close then fails with FIRN_ERR_EXISTS); needs server support */
    firn_http_options http;     /* timeouts, retries, TLS; zero: defaults */
} firn_s3_options;

/** Creates an S3 FileIO for s3://, s3a://, s3n:// and gs:// locations (gs:// for GCS's XML API
 * with HMAC keys: endpoint https://storage.googleapis.com, region "auto"). Small objects are one
 * PUT; from multipart_threshold on, the writer uploads parts of part_size while it is written and
 * completes on close, aborting the upload on failure. remove checks existence first
 * (FIRN_ERR_NOT_FOUND). FIRN_ERR_CONFIG for missing credentials or a bad endpoint. Thread-safe
 * for distinct locations. Free with firn_io_free. */
FIRN_MUST_CHECK firn_rc firn_io_s3_new(const firn_s3_options *opts, firn_io **out, firn_err *err);

/** Appends the HTTP URL of location (s3://bucket/key) as io (an S3 FileIO) addresses it, with
 * the key percent-encoded. FIRN_ERR_INVALID for a malformed location. */
FIRN_MUST_CHECK firn_rc firn_io_s3_url(firn_io *io,
                                       const char *location,
                                       firn_buf *out,
                                       firn_err *err);

/** GCS FileIO settings; zero fields take the defaults named here. */
typedef struct firn_gcs_options {
    /* NULL: STORAGE_EMULATOR_HOST when set (fake-gcs-server), else https://storage.googleapis.com
     */
    const char *endpoint;
    firn_cred *cred;            /* Google token provider (a reference is taken); NULL: none */
    size_t resumable_threshold; /* objects at least this large use a resumable upload;
                                   default 8 MiB */
    size_t chunk_size;          /* resumable chunk, rounded down to 256 KiB; default 8 MiB */
    bool allow_overwrite;       /* default false: uploads send ifGenerationMatch=0 and close
                                   fails with FIRN_ERR_EXISTS when the object exists */
    firn_http_options http;
} firn_gcs_options;

/** Creates a GCS FileIO for gs://bucket/object locations over the JSON API: simple media
 * uploads for small objects, resumable uploads in chunks from resumable_threshold on (cancelled
 * on failure), ranged media downloads, object metadata for sizes, deletes. Thread-safe for
 * distinct locations. Free with firn_io_free. */
FIRN_MUST_CHECK firn_rc firn_io_gcs_new(const firn_gcs_options *opts, firn_io **out, firn_err *err);

/** Splits "<scheme>://<bucket>/<key>" into owned copies (free with firn_free); scheme_out may be
 * NULL. FIRN_ERR_INVALID when the bucket or the key is empty. */
FIRN_MUST_CHECK firn_rc firn_io_split_location(
    const char *location, char **scheme_out, char **bucket_out, char **key_out, firn_err *err);

#endif
