/* SPDX-License-Identifier: Apache-2.0 */
/* Data-driven cases: pgoutput byte streams captured from PostgreSQL 15 by the integration tests
 * (tests/data/pgoutput/<case>.stream, records "u8 flags, u32 length, message") replayed through
 * the session and compared with <case>.expected; and the fuzz corpus replayed through the fuzz
 * target (fuzz/corpus/pgoutput). FIRN_PGO_BLESS=1 rewrites the .expected files. */
#include "../../../fuzz/pgoutput.c"
#include "../../integration/pgo_itest.h"

#include <dirent.h>

static uint8_t *slurp(const char *path, size_t *out_len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        T_FAIL("cannot open %s", path);
    firn_buf b;
    firn_buf_init(&b, 64 << 20);
    uint8_t chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        T_OK(firn_buf_append(&b, chunk, n));
    fclose(f);
    return firn_buf_take(&b, out_len);
}

static void replay_case(const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/tests/data/pgoutput/%s.stream", FIRN_SOURCE_DIR, name);
    size_t len;
    uint8_t *data = slurp(path, &len);
    firn__pgo_sess s;
    firn__pgo_sess_init(&s, (uint32_t)(data[0] & 3) + 1, 4096, NULL);
    firn_buf out;
    firn_buf_init(&out, 64 << 20);
    firn_err err = {0};
    for (size_t off = 0; off + 5 <= len;) {
        const size_t n = (size_t)data[off + 1] << 24 | (size_t)data[off + 2] << 16 |
                         (size_t)data[off + 3] << 8 | data[off + 4];
        T_TRUE(n <= len - off - 5);
        T_EQ_INT(s.opts.in_stream, (data[off] & 4) != 0);
        T_OK_ERR(firn__pgo_sess_feed(&s, data + off + 5, n, &err), &err);
        off += 5 + n;
        for (;;) {
            firn_pgo_event ev;
            T_OK_ERR(firn__pgo_sess_next(&s, &ev, &err), &err);
            if (ev.type == 0)
                break;
            it_render(&out, NULL, &ev);
        }
    }
    snprintf(path, sizeof(path), "%s/tests/data/pgoutput/%s.expected", FIRN_SOURCE_DIR, name);
    if (getenv("FIRN_PGO_BLESS")) {
        FILE *f = fopen(path, "wb");
        T_TRUE(f != NULL);
        fwrite(out.data, 1, out.len, f);
        fclose(f);
    }
    size_t want_len;
    uint8_t *want = slurp(path, &want_len);
    T_EQ_STR(it_text(&out), (const char *)want);
    firn_free(want);
    firn_free(data);
    firn_buf_deinit(&out);
    firn__pgo_sess_deinit(&s);
}

T_TEST(captured_dml)
{
    replay_case("dml");
}

T_TEST(captured_binary)
{
    replay_case("bin");
}

T_TEST(captured_schema_changes)
{
    replay_case("sc");
}

T_TEST(captured_toast)
{
    replay_case("toast");
}

T_TEST(captured_snapshot)
{
    replay_case("snap");
}

T_TEST(fuzz_corpus)
{
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/fuzz/corpus/pgoutput", FIRN_SOURCE_DIR);
    DIR *d = opendir(dir);
    T_TRUE(d != NULL);
    int n = 0;
    for (struct dirent *e = readdir(d); e; e = readdir(d)) {
        if (e->d_name[0] == '.')
            continue;
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        size_t len;
        uint8_t *data = slurp(path, &len);
        T_EQ_INT(LLVMFuzzerTestOneInput(data, len), 0);
        firn_free(data);
        n++;
    }
    closedir(d);
    T_TRUE(n >= 20);
}

T_MAIN(T_CASE(captured_dml),
       T_CASE(captured_binary),
       T_CASE(captured_schema_changes),
       T_CASE(captured_toast),
       T_CASE(captured_snapshot),
       T_CASE(fuzz_corpus))
