/* SPDX-License-Identifier: Apache-2.0 */
/* Location splitting and small response helpers shared by the S3 and GCS FileIOs. */
#include "io_remote_int.h"

#include <stdio.h>
#include <string.h>

firn_rc firn_io_split_location(
    const char *location, char **scheme_out, char **bucket_out, char **key_out, firn_err *err)
{
    *bucket_out = NULL;
    *key_out = NULL;
    if (scheme_out)
        *scheme_out = NULL;
    const char *sep = strstr(location, "://");
    if (!sep || sep == location)
        return firn_err_set(err, FIRN_ERR_INVALID, "location \"%s\" has no scheme", location);
    const char *b = sep + 3;
    size_t blen = strcspn(b, "/");
    if (blen == 0 || b[blen] != '/' || b[blen + 1] == '\0')
        return firn_err_set(err, FIRN_ERR_INVALID,
                            "location \"%s\" does not name a bucket and an object", location);
    if (scheme_out)
        *scheme_out = firn_strndup(location, (size_t)(sep - location));
    *bucket_out = firn_strndup(b, blen);
    *key_out = firn_strdup(b + blen + 1);
    return FIRN_OK;
}

static size_t decode_entities(char *s)
{
    static const struct {
        const char *ent;
        char c;
    } map[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    size_t w = 0;
    for (size_t r = 0; s[r];) {
        bool done = false;
        for (size_t i = 0; i < sizeof(map) / sizeof(map[0]) && s[r] == '&'; i++) {
            size_t n = strlen(map[i].ent);
            if (strncmp(s + r, map[i].ent, n) == 0) {
                s[w++] = map[i].c;
                r += n;
                done = true;
                break;
            }
        }
        if (!done)
            s[w++] = s[r++];
    }
    s[w] = '\0';
    return w;
}

char *firn__io_xml_text(const char *xml, size_t len, const char *tag)
{
    char open[64], close[64];
    int on = snprintf(open, sizeof(open), "<%s>", tag);
    int cn = snprintf(close, sizeof(close), "</%s>", tag);
    FIRN_ASSERT(on > 0 && (size_t)on < sizeof(open) && cn > 0 && (size_t)cn < sizeof(close));
    const char *end = xml + len;
    for (const char *p = xml; p + on <= end; p++) {
        if (memcmp(p, open, (size_t)on) != 0)
            continue;
        const char *v = p + on;
        for (const char *q = v; q + cn <= end; q++) {
            if (memcmp(q, close, (size_t)cn) == 0) {
                char *s = firn_strndup(v, (size_t)(q - v));
                decode_entities(s);
                return s;
            }
        }
        return NULL;
    }
    return NULL;
}

firn_rc firn__io_take_range(
    const firn_buf *body, size_t len, const char *location, firn_buf *out, firn_err *err)
{
    if (body->len != len)
        return firn_err_set(err, FIRN_ERR_IO,
                            "object \"%s\" is shorter than the range asked for (%zu of %zu bytes)",
                            location, body->len, len);
    firn_rc rc = firn_buf_append(out, body->data, body->len);
    if (rc)
        return firn_err_set(err, rc, "object \"%s\" does not fit the read buffer", location);
    return FIRN_OK;
}
