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

/* The n-digit decimal number at p (-1 when p holds fewer digits). */
static int digits(const char *p, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

int64_t firn__io_time_ms(const char *text)
{
    /* YYYY-MM-DDTHH:MM:SS[.fff...](Z|+00:00) */
    if (!text || strlen(text) < 19 || text[4] != '-' || text[7] != '-' ||
        (text[10] != 'T' && text[10] != 't' && text[10] != ' ') || text[13] != ':' ||
        text[16] != ':')
        return 0;
    int y = digits(text, 4), mo = digits(text + 5, 2), d = digits(text + 8, 2);
    int h = digits(text + 11, 2), mi = digits(text + 14, 2), sec = digits(text + 17, 2);
    if (y < 0 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || mi < 0 || sec < 0)
        return 0;
    int64_t ms = 0;
    const char *p = text + 19;
    if (*p == '.') {
        int scale = 100;
        for (p++; *p >= '0' && *p <= '9'; p++) {
            ms += (*p - '0') * scale;
            scale /= 10;
        }
    }
    /* days from civil (Howard Hinnant's algorithm), proleptic Gregorian */
    int yy = y - (mo <= 2);
    int era = (yy >= 0 ? yy : yy - 399) / 400;
    int yoe = yy - era * 400;
    int doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    int64_t days = (int64_t)era * 146097 + doe - 719468;
    return ((days * 24 + h) * 60 + mi) * 60000 + (int64_t)sec * 1000 + ms;
}
