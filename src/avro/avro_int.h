/* SPDX-License-Identifier: Apache-2.0 */
/* Private declarations shared by the files of the avro module. */
#ifndef FIRN_AVRO_INT_H
#define FIRN_AVRO_INT_H

#include "firn/avro.h"

/* The four magic bytes of a container file. */
#define FIRN__AVRO_MAGIC "Obj\x01"
/* Nesting allowed in schemas and values (recursive named types stop here). */
#define FIRN__AVRO_MAX_DEPTH 64
/* Largest decompressed block the reader accepts. */
#define FIRN__AVRO_MAX_BLOCK_BYTES ((size_t)256 << 20)
/* Most values one record may decode to. */
#define FIRN__AVRO_MAX_VALUES ((size_t)1 << 20)

/* Raw deflate (RFC 1951) of len bytes at p appended to out. */
firn_rc firn__avro_deflate(firn_buf *out, const uint8_t *p, size_t len, firn_err *err);
/* Raw inflate of len bytes at p appended to out (bounded by out's maximum). */
firn_rc firn__avro_inflate(firn_buf *out, const uint8_t *p, size_t len, firn_err *err);

#endif
