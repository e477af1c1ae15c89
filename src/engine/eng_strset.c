/* SPDX-License-Identifier: Apache-2.0 */
/* A set of strings for the file sets of expiry and orphan cleanup (eng_expire.c,
 * eng_maintain.c): the key map for membership (adds and lookups interleave: a lazily sorted
 * array would sort again at every lookup after an add), an array for iteration. */
#include "engine_int.h"

#include <string.h>

void firn__strset_add(firn__strset *s, const char *p)
{
    size_t len = strlen(p);
    if (!s->map)
        s->map = firn__keymap_new();
    else if (firn__keymap_get(s->map, (const uint8_t *)p, len, &(firn__pkloc){0}))
        return;
    firn__keymap_put(s->map, (const uint8_t *)p, len, (firn__pkloc){0});
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->v = firn_reallocarray(s->v, s->cap, sizeof(*s->v));
    }
    s->v[s->n++] = firn_strdup(p);
}

bool firn__strset_has(const firn__strset *s, const char *p)
{
    return s->map && firn__keymap_get(s->map, (const uint8_t *)p, strlen(p), &(firn__pkloc){0});
}

void firn__strset_free(firn__strset *s)
{
    for (size_t i = 0; i < s->n; i++)
        firn_free(s->v[i]);
    firn_free(s->v);
    firn__keymap_free(s->map);
    memset(s, 0, sizeof(*s));
}
