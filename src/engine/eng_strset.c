/* SPDX-License-Identifier: Apache-2.0 */
/* A set of strings for the file sets of expiry and orphan cleanup (eng_expire.c,
 * eng_maintain.c): appended unsorted, sorted and deduplicated on the first lookup. */
#include "engine_int.h"

#include <stdlib.h>
#include <string.h>

void firn__strset_add(firn__strset *s, const char *p)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->v = firn_reallocarray(s->v, s->cap, sizeof(*s->v));
    }
    s->v[s->n++] = firn_strdup(p);
    s->sorted = false;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void firn__strset_seal(firn__strset *s)
{
    if (s->sorted)
        return;
    if (s->n > 1)
        qsort(s->v, s->n, sizeof(*s->v), cmp_str);
    size_t o = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (o > 0 && strcmp(s->v[o - 1], s->v[i]) == 0)
            firn_free(s->v[i]);
        else
            s->v[o++] = s->v[i];
    }
    s->n = o;
    s->sorted = true;
}

bool firn__strset_has(firn__strset *s, const char *p)
{
    firn__strset_seal(s);
    return s->n > 0 && bsearch(&p, s->v, s->n, sizeof(*s->v), cmp_str) != NULL;
}

void firn__strset_free(firn__strset *s)
{
    for (size_t i = 0; i < s->n; i++)
        firn_free(s->v[i]);
    firn_free(s->v);
    memset(s, 0, sizeof(*s));
}
