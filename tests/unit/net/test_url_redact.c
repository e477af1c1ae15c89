/* SPDX-License-Identifier: Apache-2.0 */
/* What messages print of configured URLs and of JSON documents that do not parse: no userinfo,
 * no query, and no text of the document near a parse error (it may be a password). */
#include "t.h"
#include "firn/net.h"

#include <jansson.h>
#include <string.h>

static const char *red(const char *url)
{
    static char out[FIRN_URL_REDACTED_MAX];
    return firn_url_redact(out, sizeof(out), url);
}

T_TEST(urls)
{
    T_EQ_STR(red("https://user:pa55@host:8181/api/catalog?token=s3cret#frag"),
             "https://<redacted>@host:8181/api/catalog?<redacted>");
    T_EQ_STR(red("https://a@b:c@host/x"), "https://<redacted>@host/x");
    T_EQ_STR(red("http://host/v1?warehouse=wh"), "http://host/v1?<redacted>");
    T_EQ_STR(red("http://host:8181"), "http://host:8181");
    T_EQ_STR(red("https://host/p@th"), "https://host/p@th");
    T_EQ_STR(red("/var/lib/firn/catalog.db"), "/var/lib/firn/catalog.db");
    T_EQ_STR(red(NULL), "");
    char small[16];
    T_EQ_STR(firn_url_redact(small, sizeof(small), "https://u:p@host/long/path"),
             "https://<redact");
}

static const char *brief(const char *doc, char *out, size_t cap)
{
    json_error_t jerr;
    json_t *v = json_loads(doc, 0, &jerr);
    T_TRUE(v == NULL);
    return firn_json_error_brief(out, cap, jerr.text, doc, strlen(doc), (size_t)jerr.position);
}

T_TEST(json_errors)
{
    char out[FIRN_JSON_ERROR_BRIEF_MAX];
    T_EQ_STR(brief("{\"host\": \"h\",\n \"password\": \"hunter2\\q-tail\"}", out, sizeof(out)),
             "invalid escape at key \"password\"");
    T_EQ_STR(brief("{\"password\": \"abc\ndef\"}", out, sizeof(out)),
             "unexpected newline at key \"password\"");
    T_EQ_STR(brief("{\"password\": \"x\\\"y:\" \"z\": 1}", out, sizeof(out)),
             "'}' expected at key \"password\"");
    T_EQ_STR(brief("{\"token\": \"\\uZZZZsecret\"}", out, sizeof(out)),
             "invalid escape at key \"token\"");
    T_TRUE(strstr(brief("{\"k\": \"\\ud800\\u0041secret\"}", out, sizeof(out)), "secret") == NULL);
    T_EQ_STR(brief("{\"a\": 1,,}", out, sizeof(out)), "string or '}' expected at key \"a\"");
    T_EQ_STR(brief("nope", out, sizeof(out)), "'[' or '{' expected");
    T_EQ_STR(brief("{\"username\": \"u\"} trailing", out, sizeof(out)),
             "unexpected text after the end of the document");
    T_EQ_STR(brief("{\"host\": \"h\", \"password\": \"a\\u0000b\"}", out, sizeof(out)),
             "\\u0000 (a NUL character) is not allowed at key \"password\"");
    T_EQ_STR(firn_json_error_brief(out, sizeof(out), "control character 0x7 near 'pw'", NULL, 0, 0),
             "control character");
}

T_MAIN(T_CASE(urls), T_CASE(json_errors))
