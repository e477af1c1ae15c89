/* SPDX-License-Identifier: Apache-2.0 */
/* Cron schedules in UTC (docs/serve.md "Schedules"): the five fields of Vixie cron (minute,
 * hour, day of month, month, day of week) with `*`, lists, ranges, steps and names, and the
 * @hourly/@daily/@midnight/@weekly/@monthly/@yearly/@annually shorthands. When both day fields
 * are restricted a day matches either (Vixie's rule). The next fire time is found field by
 * field: a month, day or hour that cannot match is skipped whole. */
#include "srv_int.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static const char *const month_names[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                          "jul", "aug", "sep", "oct", "nov", "dec"};
static const char *const day_names[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

typedef struct field_def {
    const char *what;
    int lo, hi;
    const char *const *names; /* names[i] is lo + i */
    int n_names;
} field_def;

static const field_def fields[5] = {
    {"minute", 0, 59, NULL, 0},          {"hour", 0, 23, NULL, 0},
    {"day of month", 1, 31, NULL, 0},    {"month", 1, 12, month_names, 12},
    {"day of week", 0, 7, day_names, 7},
};

/* A number or name at *p (advanced past it); -1 when there is none. */
static int value_at(const char **p, const field_def *f)
{
    const char *s = *p;
    if (isdigit((unsigned char)*s)) {
        int v = 0;
        while (isdigit((unsigned char)*s) && v < 1000)
            v = v * 10 + (*s++ - '0');
        *p = s;
        return v;
    }
    for (int i = 0; i < f->n_names; i++) {
        if (strncasecmp(s, f->names[i], 3) == 0) {
            *p = s + 3;
            return f->lo + i;
        }
    }
    return -1;
}

/* Parses one field (text of len bytes) into the bit set *bits. */
static bool
parse_field(const char *text, size_t len, const field_def *f, uint64_t *bits, char *why, size_t cap)
{
    char buf[128];
    if (len == 0 || len >= sizeof(buf)) {
        snprintf(why, cap, "the %s field is empty or too long", f->what);
        return false;
    }
    memcpy(buf, text, len);
    buf[len] = '\0';
    *bits = 0;
    for (char *item = buf; item;) {
        char *comma = strchr(item, ',');
        if (comma)
            *comma = '\0';
        const char *p = item;
        int a, b, step = 1;
        if (*p == '*') {
            a = f->lo;
            b = f->hi;
            p++;
        } else {
            a = value_at(&p, f);
            b = a;
            if (*p == '-') {
                p++;
                b = value_at(&p, f);
            }
        }
        if (*p == '/') {
            p++;
            step = value_at(&p, f);
            if (step < 1) {
                snprintf(why, cap, "the %s field \"%s\": a step must be 1 or more", f->what, item);
                return false;
            }
        }
        if (*p || a < f->lo || b > f->hi || a < 0 || b < a) {
            snprintf(why, cap,
                     "the %s field \"%s\" is not valid: use *, a number %d-%d%s, a "
                     "range a-b, a list a,b or a step */n",
                     f->what, item, f->lo, f->hi, f->names ? " or a name" : "");
            return false;
        }
        for (int v = a; v <= b; v += step)
            *bits |= (uint64_t)1 << v;
        item = comma ? comma + 1 : NULL;
    }
    return true;
}

bool firn__srv_cron_parse(const char *text, srv_cron *out, char *why, size_t cap)
{
    static const struct {
        const char *name, *expansion;
    } macros[] = {{"@hourly", "0 * * * *"},  {"@daily", "0 0 * * *"},   {"@midnight", "0 0 * * *"},
                  {"@weekly", "0 0 * * 0"},  {"@monthly", "0 0 1 * *"}, {"@yearly", "0 0 1 1 *"},
                  {"@annually", "0 0 1 1 *"}};
    memset(out, 0, sizeof(*out));
    while (*text == ' ')
        text++;
    if (*text == '@') {
        for (size_t i = 0; i < sizeof(macros) / sizeof(macros[0]); i++) {
            if (strcmp(text, macros[i].name) == 0)
                return firn__srv_cron_parse(macros[i].expansion, out, why, cap);
        }
        snprintf(why, cap,
                 "unknown shorthand \"%s\" (@hourly, @daily, @weekly, @monthly or "
                 "@yearly)",
                 text);
        return false;
    }
    const char *p = text;
    uint64_t bits[5];
    const char *starts[5];
    for (int i = 0; i < 5; i++) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p) {
            snprintf(why, cap,
                     "a cron expression has 5 fields (minute hour day-of-month month "
                     "day-of-week), such as \"*/15 * * * *\"; this one has %d",
                     i);
            return false;
        }
        const char *start = p;
        while (*p && *p != ' ' && *p != '\t')
            p++;
        starts[i] = start;
        if (!parse_field(start, (size_t)(p - start), &fields[i], &bits[i], why, cap))
            return false;
    }
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p) {
        snprintf(why, cap, "a cron expression has 5 fields; \"%s\" is one too many", p);
        return false;
    }
    out->minute = bits[0];
    out->hour = (uint32_t)bits[1];
    out->dom = (uint32_t)bits[2];
    out->month = (uint16_t)bits[3];
    out->dow = (uint8_t)((bits[4] | (bits[4] >> 7)) & 0x7f); /* 7 is Sunday too */
    out->dom_any = starts[2][0] == '*';
    out->dow_any = starts[4][0] == '*';
    return true;
}

static bool day_matches(const srv_cron *c, const struct tm *t)
{
    bool dom = (c->dom >> t->tm_mday) & 1, dow = (c->dow >> t->tm_wday) & 1;
    if (!c->dom_any && !c->dow_any)
        return dom || dow;
    return dom && dow;
}

int64_t firn__srv_cron_next(const srv_cron *c, int64_t after)
{
    time_t t = (time_t)(after - after % 60 + 60); /* the next whole minute */
    time_t limit = t + (time_t)5 * 366 * 86400;
    struct tm tm;
    while (t < limit) {
        gmtime_r(&t, &tm);
        if (!((c->month >> (tm.tm_mon + 1)) & 1)) {
            tm.tm_mon++;
            tm.tm_mday = 1;
            tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
        } else if (!day_matches(c, &tm)) {
            tm.tm_mday++;
            tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
        } else if (!((c->hour >> tm.tm_hour) & 1)) {
            tm.tm_hour++;
            tm.tm_min = tm.tm_sec = 0;
        } else if (!((c->minute >> tm.tm_min) & 1)) {
            tm.tm_min++;
            tm.tm_sec = 0;
        } else {
            return (int64_t)t;
        }
        t = timegm(&tm); /* normalizes the field carried past its end */
    }
    return -1; /* such as "0 0 30 2 *": no 30th of February */
}
