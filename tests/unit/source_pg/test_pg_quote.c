/* SPDX-License-Identifier: Apache-2.0 */
/* Quoting of names in the SQL firn runs and the remedies it prints: identifiers and literals
 * with their quote characters doubled, and a name too long for the buffer cut at a character
 * boundary but still closed. */
#include "firn/source_pg.h"
#include "t.h"

#include <string.h>

T_TEST(identifiers)
{
    char out[FIRN_PG_QUOTED_MAX];
    T_EQ_STR(firn_pg_ident_text(out, sizeof(out), "plain"), "\"plain\"");
    T_EQ_STR(firn_pg_ident_text(out, sizeof(out), "a\"; DROP TABLE t; --"),
             "\"a\"\"; DROP TABLE t; --\"");
    T_EQ_STR(firn_pg_ident_text(out, sizeof(out), ""), "\"\"");
    T_EQ_STR(firn_pg_ident_text(out, sizeof(out), "it's"), "\"it's\"");
    firn_buf b;
    firn_buf_init(&b, 64);
    T_OK(firn_pg_ident_append(&b, "x\"\"y"));
    T_EQ_STR((const char *)b.data, "\"x\"\"\"\"y\"");
    firn_buf_deinit(&b);
}

T_TEST(literals)
{
    char out[FIRN_PG_QUOTED_MAX];
    T_EQ_STR(firn_pg_literal_text(out, sizeof(out), "it's"), "'it''s'");
    T_EQ_STR(firn_pg_literal_text(out, sizeof(out), "a\"b"), "'a\"b'");
}

T_TEST(cut_to_fit)
{
    char out[8];
    /* room for 5 bytes between the quotes: a doubled quote is never split */
    T_EQ_STR(firn_pg_ident_text(out, sizeof(out), "abcd\"efgh"), "\"abcd\"");
    T_EQ_STR(firn_pg_ident_text(out, sizeof(out), "ab\"cdefgh"), "\"ab\"\"c\"");
    /* a UTF-8 character is kept whole or left out */
    T_EQ_STR(firn_pg_ident_text(out, sizeof(out), "abcd\xc3\xa9"), "\"abcd\"");
    T_EQ_STR(firn_pg_ident_text(out, sizeof(out), "abc\xc3\xa9z"), "\"abc\xc3\xa9\"");
    /* the longest PostgreSQL name, all quotes, fits the documented size */
    char name[64], big[FIRN_PG_QUOTED_MAX];
    memset(name, '"', 63);
    name[63] = '\0';
    T_EQ_INT(strlen(firn_pg_ident_text(big, sizeof(big), name)), 128);
}

T_MAIN(T_CASE(identifiers), T_CASE(literals), T_CASE(cut_to_fit))
