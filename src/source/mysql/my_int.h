/* SPDX-License-Identifier: Apache-2.0 */
/* Private to the MySQL/MariaDB source module. */
#ifndef FIRN_MY_INT_H
#define FIRN_MY_INT_H

#include "firn/source_mysql.h"

#include <mysql.h>

/** Copies msg to out (out_cap bytes) as one line: newlines and tabs become spaces. */
void firn__my_one_line(const char *msg, char *out, size_t out_cap);
/** firn's code for a libmariadb client or server error number. */
firn_rc firn__my_classify(unsigned int errnum);
/** Sets err from c's last error: "<what>: <server message> (error N) on host:port user u". */
firn_rc firn__my_fail(firn_my_conn *c, const char *what, firn_err *err);
/** Runs sql and stores its whole result in *out (free with mysql_free_result). For small
 * catalog queries; chunk reads stream instead. */
FIRN_MUST_CHECK firn_rc firn__my_query(firn_my_conn *c,
                                       const char *sql,
                                       MYSQL_RES **out,
                                       firn_err *err);

#endif
