/* SPDX-License-Identifier: Apache-2.0 */
/* RFC 3339 times ("2024-01-02T03:04:05.678Z") as milliseconds since the Unix epoch: object
 * listings (S3 LastModified, GCS updated) and vended-credential expiries. */
#include "firn/util.h"

#include <string.h>

/* The n-digit decimal number at p, -1 when one of them is not a digit. */
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

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

int64_t firn_time_parse_ms(const char *text)
{
    if (!text || strlen(text) < 19 || text[4] != '-' || text[7] != '-' ||
        (text[10] != 'T' && text[10] != 't' && text[10] != ' ') || text[13] != ':' ||
        text[16] != ':')
        return 0;
    int y = digits(text, 4), mo = digits(text + 5, 2), d = digits(text + 8, 2);
    int h = digits(text + 11, 2), mi = digits(text + 14, 2), sec = digits(text + 17, 2);
    if (y < 0 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 ||
        sec < 0 || sec > 60)
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
    int64_t offset_min = 0;
    if ((*p == '+' || *p == '-') && strlen(p) >= 6 && p[3] == ':') {
        int oh = digits(p + 1, 2), om = digits(p + 4, 2);
        if (oh < 0 || om < 0)
            return 0;
        offset_min = (*p == '-' ? -1 : 1) * (oh * 60 + om);
    }
    int64_t days = days_from_civil(y, mo, d);
    return ((days * 24 + h) * 60 + mi - offset_min) * 60000 + (int64_t)sec * 1000 + ms;
}
