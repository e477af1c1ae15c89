/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the Avro container reader and, on the same bytes, the manifest and manifest-list
 * readers built on it. Untrusted input must fail cleanly, never crash or leak. */
#include "firn/avro.h"
#include "firn/manifest.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    firn_err err = {0};
    firn_avro_reader *r = NULL;
    if (firn_avro_reader_open(data, size, &r, &err) == FIRN_OK) {
        const firn_avro_value *v = NULL;
        for (int i = 0; i < 100000; i++) {
            if (firn_avro_reader_next(r, &v, &err) != FIRN_OK || !v)
                break;
        }
        firn_avro_reader_free(r);
    }
    firn_manifest *m = NULL;
    firn_manifest_file inherit = {0};
    inherit.sequence_number = 3;
    inherit.added_snapshot_id = 7;
    if (firn_manifest_parse(data, size, &inherit, &m, &err) == FIRN_OK)
        firn_manifest_free(m);
    firn_manifest_file *files = NULL;
    size_t n = 0;
    if (firn_manifest_list_parse(data, size, &files, &n, &err) == FIRN_OK)
        firn_manifest_files_free(files, n);
    return 0;
}
