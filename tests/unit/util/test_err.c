/* SPDX-License-Identifier: Apache-2.0 */
/* Error codes, classes, messages and context. */
#include "firn/util.h"
#include "t.h"

#include <errno.h>

T_TEST(codes_have_names_and_classes)
{
    T_EQ_INT(FIRN_OK, 0);
    T_EQ_STR(firn_rc_name(FIRN_ERR_PARSE), "FIRN_ERR_PARSE");
    T_EQ_STR(firn_rc_message(FIRN_ERR_CONFLICT), "commit conflict");
    T_TRUE(firn_rc_is_transient(FIRN_ERR_CONFLICT));
    T_TRUE(firn_rc_is_transient(FIRN_ERR_UNAVAILABLE));
    T_FALSE(firn_rc_is_transient(FIRN_ERR_CONFIG));
    T_FALSE(firn_rc_is_transient(FIRN_ERR_UNKNOWN_OUTCOME));
    T_EQ_INT(firn_rc_classify(FIRN_ERR_UNKNOWN_OUTCOME), FIRN_RC_CLASS_UNKNOWN);
    T_EQ_STR(firn_rc_name((firn_rc)9999), "FIRN_ERR_UNKNOWN_CODE");
    for (int rc = 0; rc < FIRN_RC_COUNT; rc++) {
        T_TRUE(firn_rc_name((firn_rc)rc)[0] != '\0');
        T_TRUE(firn_rc_message((firn_rc)rc)[0] != '\0');
    }
}

static firn_rc inner(firn_err *err)
{
    return firn_err_set(err, FIRN_ERR_NOT_FOUND, "table \"%s\" does not exist", "orders");
}

static firn_rc outer(firn_err *err)
{
    FIRN_TRY(inner(err));
    return FIRN_OK;
}

T_TEST(set_try_and_context)
{
    firn_err err = {0};
    T_EQ_INT(outer(&err), FIRN_ERR_NOT_FOUND);
    T_EQ_INT(err.code, FIRN_ERR_NOT_FOUND);
    firn_err_context(&err, "while committing table \"%s\"", "orders");
    T_EQ_STR(err.msg, "table \"orders\" does not exist (while committing table \"orders\")");
    firn_err_clear(&err);
    T_EQ_INT(err.code, FIRN_OK);
    T_EQ_STR(err.msg, "");
    /* Context on a cleared error is ignored; NULL err accepted everywhere. */
    firn_err_context(&err, "ignored");
    T_EQ_STR(err.msg, "");
    T_EQ_INT(firn_err_set(NULL, FIRN_ERR_IO, "x"), FIRN_ERR_IO);
}

T_TEST(errno_message_and_truncation)
{
    firn_err err = {0};
    firn_err_set_errno(&err, FIRN_ERR_IO, ENOENT, "could not open file \"%s\"", "/x");
    T_EQ_STR(err.msg, "could not open file \"/x\": No such file or directory");
    T_EQ_INT(err.sys_errno, ENOENT);
    char big[2 * FIRN_ERR_MSG_MAX];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    firn_err_set(&err, FIRN_ERR_PARSE, "%s", big);
    T_EQ_UINT(strlen(err.msg), FIRN_ERR_MSG_MAX - 1);
    firn_err_context(&err, "more");
    T_EQ_UINT(strlen(err.msg), FIRN_ERR_MSG_MAX - 1);
}

/* A line of n ASCII bytes, then tail. */
static void set_padded(firn_err *err, size_t n, const char *tail)
{
    char pad[FIRN_ERR_MSG_MAX + 8];
    memset(pad, 'a', n);
    pad[n] = '\0';
    firn_err_set(err, FIRN_ERR_CONFIG, "%s%s", pad, tail);
}

T_TEST(long_remedies_fit_and_cuts_keep_utf8_whole)
{
    firn_err err = {0};
    /* A rename remedy with two 63-byte names four times over fits (the old cap was 255). */
    char name[64];
    memset(name, 'n', 63);
    name[63] = '\0';
    firn_err_set(&err, FIRN_ERR_SCHEMA,
                 "source table \"%s.%s\" was renamed to \"%s.%s\": stream stopped, the slot keeps "
                 "its changes; rename it back (ALTER TABLE \"%s\".\"%s\" RENAME TO \"%s\") or "
                 "stream \"%s.%s\" with \"target_table\": \"%s\"; then run firn sync",
                 name, name, name, name, name, name, name, name, name, name);
    T_TRUE(strstr(err.msg, "; then run firn sync") != NULL);
    const size_t max = FIRN_ERR_MSG_MAX - 1;
    /* Cuts inside a 2-, 3- and 4-byte sequence drop the partial sequence. */
    set_padded(&err, max - 1, "\xc3\xa9"); /* é */
    T_EQ_UINT(strlen(err.msg), max - 1);
    set_padded(&err, max - 2, "\xe2\x82\xac"); /* € */
    T_EQ_UINT(strlen(err.msg), max - 2);
    set_padded(&err, max - 1, "\xe2\x82\xac");
    T_EQ_UINT(strlen(err.msg), max - 1);
    set_padded(&err, max - 3, "\xf0\x9f\x98\x80"); /* U+1F600 */
    T_EQ_UINT(strlen(err.msg), max - 3);
    /* A sequence that fits exactly is kept. */
    set_padded(&err, max - 3, "\xe2\x82\xac");
    T_EQ_UINT(strlen(err.msg), max);
    T_EQ_MEM(err.msg + max - 3, "\xe2\x82\xac", 3);
    set_padded(&err, max - 2, "\xc3\xa9");
    T_EQ_UINT(strlen(err.msg), max);
    /* Context and strerror cut the same way. */
    set_padded(&err, max - 19, ""); /* the context's first euro sign falls on the cut */
    firn_err_context(&err, "while reading \"%s\"", "\xe2\x82\xac\xe2\x82\xac");
    T_EQ_UINT(strlen(err.msg), max - 2);
    T_EQ_INT(err.msg[max - 3], '"');
    char pad[FIRN_ERR_MSG_MAX];
    memset(pad, 'b', max - 3);
    pad[max - 3] = '\0';
    firn_err_set_errno(&err, FIRN_ERR_IO, ENOENT, "%s", pad);
    T_EQ_UINT(strlen(err.msg), max);
    T_EQ_STR(err.msg + max - 3, ": N");
}

/* The one UTF-8 trim every one-line helper uses: whole sequences kept, a cut one dropped. */
/* The side of a failure travels with the error through context, and a new error (or a clear)
 * starts without one, so a side recorded for an error that was handled never sticks to the
 * next. */
T_TEST(fault_kept_by_context_reset_by_set_and_clear)
{
    firn_err err = {0};
    firn_err_set(&err, FIRN_ERR_UNAVAILABLE, "catalog refused");
    err.fault = 3;
    firn_err_context(&err, "while committing");
    T_EQ_INT(err.fault, 3);
    firn_err copy = err;
    T_EQ_INT(copy.fault, 3);
    firn_err_set(&err, FIRN_ERR_NETWORK, "connection lost");
    T_EQ_INT(err.fault, 0);
    err.fault = 2;
    firn_err_set_errno(&err, FIRN_ERR_IO, ENOENT, "could not open");
    T_EQ_INT(err.fault, 0);
    err.fault = 2;
    firn_err_clear(&err);
    T_EQ_INT(err.fault, 0);
}

T_TEST(utf8_whole_len)
{
    const char *s = "a\xC3\xA9" /* é */ "\xE2\x82\xAC" /* € */ "\xF0\x9F\x98\x80"; /* 😀 */
    T_EQ_UINT(firn_utf8_whole_len(s, 0), 0);
    T_EQ_UINT(firn_utf8_whole_len(s, 1), 1);
    T_EQ_UINT(firn_utf8_whole_len(s, 2), 1); /* half of é */
    T_EQ_UINT(firn_utf8_whole_len(s, 3), 3);
    T_EQ_UINT(firn_utf8_whole_len(s, 4), 3); /* one byte of € */
    T_EQ_UINT(firn_utf8_whole_len(s, 5), 3); /* two bytes of € */
    T_EQ_UINT(firn_utf8_whole_len(s, 6), 6);
    T_EQ_UINT(firn_utf8_whole_len(s, 9), 6); /* three bytes of 😀 */
    T_EQ_UINT(firn_utf8_whole_len(s, 10), 10);
    T_EQ_UINT(firn_utf8_whole_len("\x80\x80", 2), 2); /* stray continuation bytes: kept */
}

T_MAIN(T_CASE(codes_have_names_and_classes),
       T_CASE(set_try_and_context),
       T_CASE(errno_message_and_truncation),
       T_CASE(long_remedies_fit_and_cuts_keep_utf8_whole),
       T_CASE(fault_kept_by_context_reset_by_set_and_clear),
       T_CASE(utf8_whole_len))
