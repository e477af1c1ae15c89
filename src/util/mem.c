/* SPDX-License-Identifier: Apache-2.0 */
/* The one place that calls the C allocator: counts bytes in use and aborts on exhaustion
 * (valkey zmalloc). Budgets give callers a soft limit for backpressure. */
#include "firn/util.h"

#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Atomic size_t mem_used;
static _Atomic size_t mem_peak;

FIRN_NORETURN static void out_of_memory(size_t size)
{
    fprintf(stderr, "firn: out of memory allocating %zu bytes (%zu in use)\n", size,
            atomic_load(&mem_used));
    fflush(stderr);
    abort();
}

static void count_alloc(void *p)
{
    size_t now = atomic_fetch_add(&mem_used, malloc_usable_size(p)) + malloc_usable_size(p);
    size_t peak = atomic_load(&mem_peak);
    while (now > peak && !atomic_compare_exchange_weak(&mem_peak, &peak, now)) {
    }
}

void *firn_malloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (!p)
        out_of_memory(size);
    count_alloc(p);
    return p;
}

void *firn_calloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        out_of_memory(SIZE_MAX);
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        out_of_memory(n * size);
    count_alloc(p);
    return p;
}

void *firn_realloc(void *p, size_t size)
{
    if (!p)
        return firn_malloc(size);
    size_t old = malloc_usable_size(p);
    void *q = realloc(p, size ? size : 1);
    if (!q)
        out_of_memory(size);
    atomic_fetch_sub(&mem_used, old);
    count_alloc(q);
    return q;
}

void *firn_reallocarray(void *p, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        out_of_memory(SIZE_MAX);
    return firn_realloc(p, n * size);
}

void firn_free(void *p)
{
    if (!p)
        return;
    atomic_fetch_sub(&mem_used, malloc_usable_size(p));
    free(p);
}

char *firn_strdup(const char *s)
{
    return firn_strndup(s, strlen(s));
}

char *firn_strndup(const char *s, size_t len)
{
    char *p = firn_malloc(len + 1);
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

void *firn_memdup(const void *p, size_t len)
{
    void *q = firn_malloc(len);
    if (len)
        memcpy(q, p, len);
    return q;
}

size_t firn_mem_used(void)
{
    return atomic_load(&mem_used);
}

size_t firn_mem_peak(void)
{
    return atomic_load(&mem_peak);
}

void firn_budget_init(firn_budget *b, const char *name, size_t limit_bytes)
{
    b->name = name;
    b->limit_bytes = limit_bytes;
    atomic_init(&b->used_bytes, 0);
}

firn_rc firn_budget_reserve(firn_budget *b, size_t bytes, firn_err *err)
{
    size_t cur = atomic_load(&b->used_bytes);
    for (;;) {
        if (b->limit_bytes && (bytes > b->limit_bytes || cur > b->limit_bytes - bytes))
            return firn_err_set(err, FIRN_ERR_TOO_LARGE,
                                "memory budget \"%s\" exceeded: %zu bytes in use, %zu requested, "
                                "limit %zu",
                                b->name, cur, bytes, b->limit_bytes);
        if (atomic_compare_exchange_weak(&b->used_bytes, &cur, cur + bytes))
            return FIRN_OK;
    }
}

void firn_budget_release(firn_budget *b, size_t bytes)
{
    size_t prev = atomic_fetch_sub(&b->used_bytes, bytes);
    FIRN_ASSERT(prev >= bytes);
}
