/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: metadata.json and CommitTableRequest bodies. Whatever parses must serialize,
 * parse again and serialize to the same text (round-trip stability), and never crash. */
#include "firn/iceberg.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_metadata(const char *text, size_t size)
{
    firn_table_metadata *md = NULL, *md2 = NULL;
    if (firn_table_metadata_from_json(text, size, &md, NULL))
        return;
    firn_buf a, b;
    firn_buf_init(&a, 1u << 26);
    firn_buf_init(&b, 1u << 26);
    FIRN_ASSERT(firn_table_metadata_to_json(md, &a, NULL) == FIRN_OK);
    FIRN_ASSERT(firn_table_metadata_from_json((const char *)a.data, a.len, &md2, NULL) == FIRN_OK);
    FIRN_ASSERT(firn_table_metadata_to_json(md2, &b, NULL) == FIRN_OK);
    FIRN_ASSERT(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
    firn_table_changes c;
    firn_table_changes_init(&c);
    firn_table_changes_set_property(&c, "k", "v");
    firn_table_metadata *md3 = NULL;
    if (firn_table_metadata_apply(md, "/m/0.json", &c, 1, &md3, NULL) == FIRN_OK)
        firn_table_metadata_free(md3);
    firn_table_changes_deinit(&c);
    firn_buf_deinit(&a);
    firn_buf_deinit(&b);
    firn_table_metadata_free(md2);
    firn_table_metadata_free(md);
}

static void check_changes(const char *text, size_t size)
{
    firn_table_changes c;
    firn_table_changes_init(&c);
    if (firn_table_changes_from_json(text, size, &c, NULL) == FIRN_OK) {
        firn_buf a;
        firn_buf_init(&a, 1u << 26);
        FIRN_ASSERT(firn_table_changes_to_json(&c, &a, NULL) == FIRN_OK);
        firn_table_changes d;
        firn_table_changes_init(&d);
        FIRN_ASSERT(firn_table_changes_from_json((const char *)a.data, a.len, &d, NULL) == FIRN_OK);
        FIRN_ASSERT(d.n_updates == c.n_updates && d.n_requirements == c.n_requirements);
        firn_table_changes_deinit(&d);
        firn_buf_deinit(&a);
    }
    firn_table_changes_deinit(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    check_metadata(text, size);
    check_changes(text, size);
    firn_schema *s = NULL;
    if (firn_schema_from_json(text, size, &s, NULL) == FIRN_OK)
        firn_schema_free(s);
    return 0;
}
