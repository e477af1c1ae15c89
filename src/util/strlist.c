/* SPDX-License-Identifier: Apache-2.0 */
/* Lists of owned strings. */
#include "firn/util.h"

#include <string.h>

void firn_strlist_push(firn_strlist *l, const char *s)
{
    l->items = firn_reallocarray(l->items, l->count + 1, sizeof(*l->items));
    l->items[l->count++] = firn_strdup(s);
}

bool firn_strlist_contains(const firn_strlist *l, const char *s)
{
    for (size_t i = 0; i < l->count; i++) {
        if (strcmp(l->items[i], s) == 0)
            return true;
    }
    return false;
}

void firn_strlist_clear(firn_strlist *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->count; i++)
        firn_free(l->items[i]);
    firn_free(l->items);
    l->items = NULL;
    l->count = 0;
}

void firn_strlist_deinit(firn_strlist *l)
{
    firn_strlist_clear(l);
}
