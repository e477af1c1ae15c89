/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: deletion-vector blobs, bare 64-bit portable Roaring bitmaps and Puffin footers
 * (foreign DVs are untrusted input: Spark's, Trino's, a damaged file). Must fail cleanly, never
 * crash or leak; a bitmap that decodes re-serializes to one that decodes to the same set. */
#include "firn/puffin.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void round_trip(const firn_bitmap64 *b)
{
    firn_buf out;
    firn_buf_init(&out, (size_t)1 << 28);
    firn_bitmap64 *again = NULL;
    firn_err err = {0};
    if (firn_dv_encode(b, &out) == FIRN_OK) {
        if (firn_dv_decode(out.data, out.len, &again, &err) != FIRN_OK ||
            firn_bitmap64_cardinality(again) != firn_bitmap64_cardinality(b))
            abort();
        firn_bitmap64_free(again);
    }
    firn_buf_deinit(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    firn_err err = {0};
    firn_bitmap64 *b = NULL;
    if (firn_dv_decode(data, size, &b, &err) == FIRN_OK) {
        round_trip(b);
        firn_bitmap64_free(b);
    }
    if (firn_bitmap64_deserialize(data, size, &b, &err) == FIRN_OK) {
        round_trip(b);
        firn_bitmap64_free(b);
    }
    firn_puffin_footer f;
    if (firn_puffin_footer_parse(data, size, &f, &err) == FIRN_OK) {
        for (size_t i = 0; i < f.n_blobs; i++) {
            if (firn_dv_decode(data + f.blobs[i].offset, (size_t)f.blobs[i].length, &b, &err) ==
                FIRN_OK)
                firn_bitmap64_free(b);
        }
        firn_puffin_footer_deinit(&f);
    }
    return 0;
}
