/* SPDX-License-Identifier: Apache-2.0 */
/* Ordered header lists with case-insensitive names. */
#include "firn/net.h"

#include <string.h>
#include <strings.h>

void firn_http_headers_init(firn_http_headers *h)
{
    h->items = NULL;
    h->count = 0;
    h->cap = 0;
}

void firn_http_headers_clear(firn_http_headers *h)
{
    for (size_t i = 0; i < h->count; i++) {
        firn_free(h->items[i].name);
        firn_free(h->items[i].value);
    }
    h->count = 0;
}

void firn_http_headers_deinit(firn_http_headers *h)
{
    if (!h)
        return;
    firn_http_headers_clear(h);
    firn_free(h->items);
    firn_http_headers_init(h);
}

void firn_http_headers_add(firn_http_headers *h, const char *name, const char *value)
{
    if (h->count == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 8;
        h->items = firn_reallocarray(h->items, h->cap, sizeof(*h->items));
    }
    h->items[h->count].name = firn_strdup(name);
    h->items[h->count].value = firn_strdup(value);
    h->count++;
}

void firn_http_headers_remove(firn_http_headers *h, const char *name)
{
    size_t kept = 0;
    for (size_t i = 0; i < h->count; i++) {
        if (strcasecmp(h->items[i].name, name) == 0) {
            firn_free(h->items[i].name);
            firn_free(h->items[i].value);
            continue;
        }
        h->items[kept++] = h->items[i];
    }
    h->count = kept;
}

void firn_http_headers_set(firn_http_headers *h, const char *name, const char *value)
{
    firn_http_headers_remove(h, name);
    firn_http_headers_add(h, name, value);
}

const char *firn_http_headers_get(const firn_http_headers *h, const char *name)
{
    for (size_t i = 0; i < h->count; i++) {
        if (strcasecmp(h->items[i].name, name) == 0)
            return h->items[i].value;
    }
    return NULL;
}

void firn_http_headers_copy(firn_http_headers *dst, const firn_http_headers *src)
{
    for (size_t i = 0; src && i < src->count; i++)
        firn_http_headers_add(dst, src->items[i].name, src->items[i].value);
}
