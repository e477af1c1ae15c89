/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the object-store FileIOs (S3, GCS). */
#ifndef FIRN_IO_REMOTE_INT_H
#define FIRN_IO_REMOTE_INT_H

#include "firn/io_remote.h"

/** Copies the text inside the first <tag>...</tag> of xml into an owned string (entities
 * &amp; &lt; &gt; &quot; &apos; decoded), or returns NULL. */
char *firn__io_xml_text(const char *xml, size_t len, const char *tag);

/** Appends bytes [offset, offset + len) of a fetched object to out, checking the server sent
 * exactly len bytes; FIRN_ERR_IO naming location otherwise. */
FIRN_MUST_CHECK firn_rc firn__io_take_range(
    const firn_buf *body, size_t len, const char *location, firn_buf *out, firn_err *err);

#endif
