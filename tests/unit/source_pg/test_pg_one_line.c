/* SPDX-License-Identifier: Apache-2.0 */
/* libpq's multi-line messages as one line for an error: line breaks become "; ", the indent of
 * a continuation line is dropped, a final line break is cut, and a message too long for the
 * buffer is cut at a character boundary. */
#include "source/pg/pg_int.h"
#include "t.h"

#include <string.h>

T_TEST(connection_lost)
{
    char out[256];
    firn__pg_one_line("server closed the connection unexpectedly\n\tThis probably means the "
                      "server terminated abnormally\n\tbefore or while processing the request.\n",
                      out, sizeof(out));
    T_EQ_STR(out, "server closed the connection unexpectedly; This probably means the server "
                  "terminated abnormally; before or while processing the request.");
    firn__pg_one_line("Connection refused\n\tIs the server running on that host?\n", out,
                      sizeof(out));
    T_EQ_STR(out, "Connection refused; Is the server running on that host?");
    firn__pg_one_line("FATAL:  x\nserver closed\r\n", out, sizeof(out));
    T_EQ_STR(out, "FATAL:  x; server closed");
}

T_TEST(cut_to_fit)
{
    char out[8];
    firn__pg_one_line("ab\xc3\xa9\xc3\xa9xyz", out, sizeof(out));
    T_EQ_STR(out, "ab\xc3\xa9");
}

T_MAIN(T_CASE(connection_lost), T_CASE(cut_to_fit))
