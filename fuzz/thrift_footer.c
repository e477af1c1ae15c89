/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the Parquet footer (FileMetaData, Thrift compact) decoder and the tail locator.
 * Any input must be rejected or decoded without reading out of bounds, leaking or crashing. */
#include "firn/parquet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    firn_pq_file_meta *m = NULL;
    firn_err err = {0};
    if (firn_pq_footer_parse(data, size, &m, &err) == FIRN_OK)
        firn_pq_file_meta_free(m);
    if (size >= 8) {
        uint32_t len;
        firn_rc_ignore(firn_pq_footer_locate(data + size - 8, size, &len, &err));
    }
    return 0;
}
