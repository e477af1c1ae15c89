/* SPDX-License-Identifier: Apache-2.0 */
/* TEST-ONLY crash points for the kill -9 tests (tests/interop/test_engine_restart.py,
 * scripts/torture.sh). With FIRN_TEST_CRASH="<point>:<n>" in the environment the process kills
 * itself with SIGKILL the n-th time it reaches <point>; docs/operations.md lists the points.
 * Never set it in production. Unset, a point costs one pthread_once and a load.
 * FIRN_TEST_PAUSE="<point>:<path>" makes firn__fault_pause(<point>) create "<path>.ready" and
 * wait (up to 60 s) until <path> exists: a test commits as another writer meanwhile. */
#include "engine_int.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const points[] = {
    "backfill-batch",   /* a backfill batch's data files are written, nothing committed */
    "backfill-chunk",   /* finished chunks of an initial copy are committed, the copy is not */
    "after-upload",     /* a table's files are uploaded, its catalog commit not yet made */
    "after-commit",     /* a table's catalog commit is made, its index and the state not updated */
    "before-ack",       /* every table of a flush committed, the slot not acknowledged */
    "mid-txn",          /* a change inside a source transaction is decoded into a buffer */
    "expire-committed", /* an expiry's catalog commit is made, no file of it deleted */
    "expire-deleting",  /* before each file an expiry deletes */
};

static pthread_once_t parse_once = PTHREAD_ONCE_INIT;
static const char *armed_point; /* NULL: no crash point */
static uint64_t armed_count;
static atomic_uint_fast64_t hits;

static void parse_setting(void)
{
    const char *v = getenv("FIRN_TEST_CRASH");
    if (!v || !*v)
        return;
    const char *colon = strrchr(v, ':');
    uint64_t n = 0;
    if (!colon || firn_parse_u64(colon + 1, strlen(colon + 1), &n, NULL) || n == 0) {
        FIRN_LOG(FIRN_LOG_ERROR, "engine",
                 "ignoring FIRN_TEST_CRASH=\"%s\": expected \"<point>:<count>\"", v);
        return;
    }
    for (size_t i = 0; i < sizeof(points) / sizeof(points[0]); i++) {
        if (strlen(points[i]) == (size_t)(colon - v) &&
            strncmp(points[i], v, strlen(points[i])) == 0)
            armed_point = points[i];
    }
    if (!armed_point) {
        FIRN_LOG(FIRN_LOG_ERROR, "engine", "ignoring FIRN_TEST_CRASH=\"%s\": unknown point", v);
        return;
    }
    armed_count = n;
    FIRN_LOG(FIRN_LOG_WARN, "engine",
             "test-only FIRN_TEST_CRASH is set: firn kills itself at \"%s\" number %llu",
             armed_point, (unsigned long long)n);
}

void firn__fault_point(const char *name)
{
    pthread_once(&parse_once, parse_setting);
    if (!armed_point || strcmp(name, armed_point) != 0)
        return;
    if (atomic_fetch_add(&hits, 1) + 1 != armed_count)
        return;
    FIRN_LOG(FIRN_LOG_WARN, "engine", "FIRN_TEST_CRASH: killing firn at \"%s\" number %llu", name,
             (unsigned long long)armed_count);
    raise(SIGKILL);
}

void firn__fault_pause(const char *name)
{
    const char *v = getenv("FIRN_TEST_PAUSE");
    size_t n = strlen(name);
    if (!v || strncmp(v, name, n) != 0 || v[n] != ':' || !v[n + 1])
        return;
    const char *go = v + n + 1;
    char ready[4096];
    snprintf(ready, sizeof(ready), "%s.ready", go);
    FILE *f = fopen(ready, "w");
    if (f)
        fclose(f);
    FIRN_LOG(FIRN_LOG_WARN, "engine", "FIRN_TEST_PAUSE: waiting at \"%s\" for \"%s\"", name, go);
    for (int i = 0; i < 600 && access(go, F_OK) != 0; i++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

bool firn__fault_decode(const char *schema, const char *table)
{
    char qualified[1024];
    snprintf(qualified, sizeof(qualified), "%s.%s", schema, table);
    static _Atomic uint64_t seen;
    const char *v = getenv("FIRN_TEST_DECODE_FAIL");
    if (!v || !*v)
        return false;
    const char *colon = strrchr(v, ':');
    uint64_t n = 0;
    if (!colon || firn_parse_u64(colon + 1, strlen(colon + 1), &n, NULL) || n == 0)
        return false;
    if (strlen(qualified) != (size_t)(colon - v) || strncmp(qualified, v, strlen(qualified)) != 0)
        return false;
    return atomic_fetch_add(&seen, 1) + 1 >= n;
}
