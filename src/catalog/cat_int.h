/* SPDX-License-Identifier: Apache-2.0 */
/* Private helpers shared by the catalog implementations (cat_sql.c, cat_rest.c). */
#ifndef FIRN_CAT_INT_H
#define FIRN_CAT_INT_H

#include "firn/catalog.h"

/** Appends name to b as one path segment that cannot leave its folder and needs no escaping in
 * a URI: '/', '\\', '%', '~', control characters and the dots of the names "." and ".." become
 * '~' and two hex digits ("../x" is "..~2Fx", ".." is "~2E~2E"); every other byte, UTF-8
 * included, is kept. FIRN_ERR_TOO_LARGE past b's maximum. */
FIRN_MUST_CHECK firn_rc firn__cat_append_segment(firn_buf *b, const char *name);

/** True when firn__cat_append_segment changes name (the name as it is would not be one safe
 * path segment). */
bool firn__cat_segment_needs_encoding(const char *name);

#endif
