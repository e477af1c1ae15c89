/* SPDX-License-Identifier: Apache-2.0 */
/* Listing a local folder with firn_io_list (nested folders, file:// and plain prefixes, a
 * missing folder, a callback that stops the walk) and the RFC 3339 times of S3 and GCS
 * listings and credential expiries (firn_time_parse_ms). */
#include "t.h"
#include "firn/io.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>

typedef struct seen {
    char names[8][512];
    uint64_t sizes[8];
    int64_t mtimes[8];
    int n;
    int stop_after;
} seen;

static firn_rc collect(void *ctx, const char *loc, uint64_t size, int64_t ms, firn_err *err)
{
    seen *s = ctx;
    if (s->n >= 8)
        return firn_err_set(err, FIRN_ERR_INTERNAL, "too many");
    snprintf(s->names[s->n], sizeof(s->names[0]), "%s", loc);
    s->sizes[s->n] = size;
    s->mtimes[s->n] = ms;
    s->n++;
    if (s->stop_after && s->n == s->stop_after)
        return firn_err_set(err, FIRN_ERR_CANCELLED, "stop");
    return FIRN_OK;
}

static bool has(const seen *s, const char *name, uint64_t size)
{
    for (int i = 0; i < s->n; i++) {
        if (strcmp(s->names[i], name) == 0 && s->sizes[i] == size)
            return true;
    }
    return false;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    T_TRUE(f != NULL);
    fputs(text, f);
    fclose(f);
}

T_TEST(local_walk)
{
    char root[] = "/tmp/firn-io-list-XXXXXX";
    T_TRUE(mkdtemp(root) != NULL);
    char p[1024];
    snprintf(p, sizeof(p), "%s/t", root);
    mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/t/data", root);
    mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/t/data/region=z%%C3%%BCrich", root);
    mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/t/data/region=z%%C3%%BCrich/a.parquet", root);
    put(p, "abc");
    snprintf(p, sizeof(p), "%s/t/m.json", root);
    put(p, "{}");
    struct timeval tv[2] = {{1700000000, 0}, {1700000000, 0}};
    utimes(p, tv);
    snprintf(p, sizeof(p), "%s/tother", root); /* a sibling with the same prefix text */
    put(p, "no");

    firn_io *io = firn_io_local_new();
    firn_err err = {0};
    seen s = {0};
    char prefix[1024], want[1024];
    snprintf(prefix, sizeof(prefix), "file://%s/t", root);
    T_OK_ERR(firn_io_list(io, prefix, collect, &s, &err), &err);
    T_EQ_INT(s.n, 2);
    snprintf(want, sizeof(want), "file://%s/t/data/region=z%%C3%%BCrich/a.parquet", root);
    T_TRUE(has(&s, want, 3));
    snprintf(want, sizeof(want), "file://%s/t/m.json", root);
    T_TRUE(has(&s, want, 2));
    for (int i = 0; i < s.n; i++) {
        if (strcmp(s.names[i], want) == 0)
            T_EQ_INT(s.mtimes[i], 1700000000000LL);
    }
    /* a plain path prefix with a trailing slash lists the same, spelled as given */
    memset(&s, 0, sizeof(s));
    snprintf(prefix, sizeof(prefix), "%s/t/", root);
    T_OK_ERR(firn_io_list(io, prefix, collect, &s, &err), &err);
    T_EQ_INT(s.n, 2);
    snprintf(want, sizeof(want), "%s/t/m.json", root);
    T_TRUE(has(&s, want, 2));
    /* a missing folder lists nothing; a callback error stops the walk and is returned */
    memset(&s, 0, sizeof(s));
    snprintf(prefix, sizeof(prefix), "%s/none", root);
    T_OK_ERR(firn_io_list(io, prefix, collect, &s, &err), &err);
    T_EQ_INT(s.n, 0);
    memset(&s, 0, sizeof(s));
    s.stop_after = 1;
    snprintf(prefix, sizeof(prefix), "%s/t", root);
    T_EQ_INT(firn_io_list(io, prefix, collect, &s, &err), FIRN_ERR_CANCELLED);
    T_EQ_INT(s.n, 1);
    firn_io_free(io);
    char cmd[1100];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    T_EQ_INT(system(cmd), 0);
}

T_TEST(rfc3339_times)
{
    T_EQ_INT(firn_time_parse_ms("1970-01-01T00:00:00Z"), 0);
    T_EQ_INT(firn_time_parse_ms("2023-11-14T22:13:20.000Z"), 1700000000000LL);
    T_EQ_INT(firn_time_parse_ms("2023-11-14T22:13:20.5Z"), 1700000000500LL);
    T_EQ_INT(firn_time_parse_ms("2024-02-29T12:00:00.123456Z"), 1709208000123LL);
    T_EQ_INT(firn_time_parse_ms("2000-03-01T00:00:01+00:00"), 951868801000LL);
    T_EQ_INT(firn_time_parse_ms("yesterday"), 0);
    T_EQ_INT(firn_time_parse_ms("2024-13-01T00:00:00Z"), 0);
    T_EQ_INT(firn_time_parse_ms(NULL), 0);
    T_EQ_INT(firn_time_parse_ms("2023-11-14T23:13:20+01:00"), 1700000000000LL);
    T_EQ_INT(firn_time_parse_ms("2023-11-14 17:13:20.25-05:00"), 1700000000250LL);
    T_EQ_INT(firn_time_parse_ms("2023-11-14T25:13:20Z"), 0);
}

T_MAIN(T_CASE(local_walk), T_CASE(rfc3339_times))
