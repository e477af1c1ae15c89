/* SPDX-License-Identifier: Apache-2.0 */
/* MySQL/MariaDB connections over libmariadb: password authentication (the plugins libmariadb
 * ships: mysql_native_password, caching_sha2_password, ed25519), TLS by ssl_mode, the session
 * settings values depend on, and one-line errors that never show the password. */
#include "my_int.h"

#include <errmsg.h>
#include <mysqld_error.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define DESCRIBE_MAX 320

struct firn_my_conn {
    MYSQL *my;
    bool mariadb;
    unsigned long version;
    char describe[DESCRIBE_MAX];
};

/* Values depend on these: text columns arrive as UTF-8 whatever their charset (the server
 * converts by the column's collation), TIMESTAMP in UTC, zero dates readable (a strict sql_mode
 * would refuse none on SELECT, but NO_ZERO_DATE must not turn reads of them into warnings that
 * some servers escalate), and no statement limit (a chunk read may take long). */
static const char *const SESSION_SQL[] = {
    "SET NAMES utf8mb4",
    "SET time_zone = '+00:00'",
    "SET SESSION sql_mode = REPLACE(REPLACE(REPLACE(@@SESSION.sql_mode, 'NO_ZERO_DATE', ''), "
    "'NO_ZERO_IN_DATE', ''), 'NO_BACKSLASH_ESCAPES', '')",
};

const char *firn_my_ssl_mode_name(firn_my_ssl_mode m)
{
    switch (m) {
    case FIRN_MY_SSL_DISABLED:
        return "disabled";
    case FIRN_MY_SSL_PREFERRED:
        return "preferred";
    case FIRN_MY_SSL_REQUIRED:
        return "required";
    case FIRN_MY_SSL_VERIFY_CA:
        return "verify_ca";
    case FIRN_MY_SSL_VERIFY_IDENTITY:
        return "verify_identity";
    }
    return "?";
}

static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

static void lib_init(void)
{
    /* mysql_library_init is not thread-safe; every connection goes through here first. */
    FIRN_ASSERT(mysql_library_init(0, NULL, NULL) == 0);
}

void firn__my_one_line(const char *msg, char *out, size_t out_cap)
{
    size_t o = 0;
    for (const char *s = msg; *s && o + 2 < out_cap; s++)
        out[o++] = (*s == '\n' || *s == '\r' || *s == '\t') ? ' ' : *s;
    o = firn_utf8_whole_len(out, o);
    while (o > 0 && out[o - 1] == ' ')
        o--;
    out[o] = '\0';
}

/* Sorts a client or server error number into firn's codes. */
firn_rc firn__my_classify(unsigned int errnum)
{
    switch (errnum) {
    case ER_ACCESS_DENIED_ERROR:
    case ER_DBACCESS_DENIED_ERROR:
    case ER_ACCESS_DENIED_NO_PASSWORD_ERROR:
    case ER_NOT_SUPPORTED_AUTH_MODE:
    case CR_AUTH_PLUGIN_CANNOT_LOAD:
        return FIRN_ERR_AUTH;
    case ER_BAD_DB_ERROR:
    case ER_NO_SUCH_TABLE:
    case ER_BAD_TABLE_ERROR:
    case ER_BAD_FIELD_ERROR:
        return FIRN_ERR_NOT_FOUND;
    case ER_TABLEACCESS_DENIED_ERROR:
    case ER_COLUMNACCESS_DENIED_ERROR:
    case ER_SPECIFIC_ACCESS_DENIED_ERROR:
    case ER_PROCACCESS_DENIED_ERROR:
        return FIRN_ERR_PERMISSION;
    case CR_CONNECTION_ERROR:
    case CR_CONN_HOST_ERROR:
    case CR_UNKNOWN_HOST:
    case CR_SERVER_GONE_ERROR:
    case CR_SERVER_LOST:
    case CR_SSL_CONNECTION_ERROR:
    case CR_SERVER_LOST_EXTENDED:
    case ER_CON_COUNT_ERROR:
    case ER_SERVER_SHUTDOWN:
        return FIRN_ERR_NETWORK;
    default:
        return FIRN_ERR_SOURCE;
    }
}

firn_rc firn__my_fail(firn_my_conn *c, const char *what, firn_err *err)
{
    char line[FIRN_ERR_MSG_MAX];
    unsigned int errnum = mysql_errno(c->my);
    firn__my_one_line(mysql_error(c->my), line, sizeof(line));
    return firn_err_set(err, firn__my_classify(errnum), "%s: %s (error %u) on %s", what,
                        line[0] ? line : "unknown error", errnum, c->describe);
}

static firn_rc set_tls(MYSQL *my, const firn_my_conn_config *cfg, firn_err *err)
{
    const bool verify =
        cfg->ssl_mode == FIRN_MY_SSL_VERIFY_CA || cfg->ssl_mode == FIRN_MY_SSL_VERIFY_IDENTITY;
    if (verify && !(cfg->ssl_ca && cfg->ssl_ca[0]))
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "ssl_mode %s needs the CA certificate: set \"ssl_ca\" (OLake "
                            "\"ssl.server_ca\") to its file",
                            firn_my_ssl_mode_name(cfg->ssl_mode));
    my_bool on = 1;
    my_bool off = 0;
    if (cfg->ssl_mode == FIRN_MY_SSL_DISABLED) {
        mysql_optionsv(my, MYSQL_OPT_SSL_ENFORCE, &off);
        mysql_optionsv(my, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &off);
        return FIRN_OK;
    }
    /* Setting the key/cert/CA turns TLS on; with a CA libmariadb verifies the chain. Without
     * enforce, a server that offers no TLS gets a plain connection (preferred). */
    mysql_ssl_set(my, cfg->ssl_key, cfg->ssl_cert, verify ? cfg->ssl_ca : NULL, NULL, NULL);
    if (cfg->ssl_mode != FIRN_MY_SSL_PREFERRED)
        mysql_optionsv(my, MYSQL_OPT_SSL_ENFORCE, &on);
    my_bool identity = cfg->ssl_mode == FIRN_MY_SSL_VERIFY_IDENTITY;
    mysql_optionsv(my, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &identity);
    return FIRN_OK;
}

static void describe_conn(firn_my_conn *c, const firn_my_conn_config *cfg, int port)
{
    snprintf(c->describe, sizeof(c->describe), "%s:%d user %s", cfg->host ? cfg->host : "", port,
             cfg->user ? cfg->user : "");
}

static firn_rc session_setup(firn_my_conn *c, firn_err *err)
{
    for (size_t i = 0; i < sizeof(SESSION_SQL) / sizeof(SESSION_SQL[0]); i++)
        FIRN_TRY(firn_my_conn_exec(c, SESSION_SQL[i], err));
    const char *v = mysql_get_server_info(c->my);
    c->mariadb = v && strstr(v, "MariaDB") != NULL;
    c->version = mysql_get_server_version(c->my);
    return FIRN_OK;
}

firn_rc firn_my_conn_open(const firn_my_conn_config *cfg, firn_my_conn **out, firn_err *err)
{
    *out = NULL;
    pthread_once(&lib_once, lib_init);
    if (!cfg->host || !cfg->host[0] || !cfg->user || !cfg->user[0])
        return firn_err_set(err, FIRN_ERR_CONFIG, "a MySQL source needs \"host\" and \"username\"");
    MYSQL *my = mysql_init(NULL);
    if (!my)
        return firn_err_set(err, FIRN_ERR_INTERNAL, "could not allocate a libmariadb connection");
    firn_my_conn *c = firn_calloc(1, sizeof(*c));
    c->my = my;
    const int port = cfg->port > 0 ? cfg->port : 3306;
    describe_conn(c, cfg, port);
    unsigned int timeout_s = cfg->connect_timeout_s > 0 ? (unsigned)cfg->connect_timeout_s : 10;
    mysql_optionsv(my, MYSQL_OPT_CONNECT_TIMEOUT, &timeout_s);
    if (cfg->read_timeout_s > 0) {
        unsigned int rt = (unsigned)cfg->read_timeout_s;
        mysql_optionsv(my, MYSQL_OPT_READ_TIMEOUT, &rt);
    }
    unsigned int proto = MYSQL_PROTOCOL_TCP; /* a host of "localhost" must not mean a socket */
    mysql_optionsv(my, MYSQL_OPT_PROTOCOL, &proto);
    mysql_optionsv(my, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    mysql_optionsv(my, MYSQL_READ_DEFAULT_GROUP, NULL);
    firn_rc rc = set_tls(my, cfg, err);
    if (rc)
        goto fail;
    if (!mysql_real_connect(my, cfg->host, cfg->user, cfg->password ? cfg->password : "",
                            cfg->database && cfg->database[0] ? cfg->database : NULL,
                            (unsigned)port, NULL, CLIENT_MULTI_RESULTS)) {
        rc = firn__my_fail(c, "could not connect to MySQL", err);
        goto fail;
    }
    rc = session_setup(c, err);
    if (rc) {
        firn_err_context(err, "while setting up the session");
        goto fail;
    }
    *out = c;
    return FIRN_OK;
fail:
    firn_my_conn_close(c);
    return rc;
}

void firn_my_conn_close(firn_my_conn *c)
{
    if (!c)
        return;
    mysql_close(c->my);
    firn_free(c);
}

struct st_mysql *firn_my_conn_handle(firn_my_conn *c)
{
    return c->my;
}

bool firn_my_conn_is_mariadb(const firn_my_conn *c)
{
    return c->mariadb;
}

unsigned long firn_my_conn_server_version(const firn_my_conn *c)
{
    return c->version;
}

const char *firn_my_conn_version_text(const firn_my_conn *c)
{
    const char *v = mysql_get_server_info(c->my);
    return v ? v : "";
}

bool firn_my_conn_tls(const firn_my_conn *c)
{
    return mysql_get_ssl_cipher(c->my) != NULL;
}

const char *firn_my_conn_describe(const firn_my_conn *c)
{
    return c->describe;
}

firn_rc firn_my_conn_exec(firn_my_conn *c, const char *sql, firn_err *err)
{
    if (mysql_real_query(c->my, sql, strlen(sql)))
        return firn__my_fail(c, "query failed", err);
    for (;;) {
        MYSQL_RES *res = mysql_store_result(c->my);
        if (res)
            mysql_free_result(res);
        else if (mysql_field_count(c->my) != 0)
            return firn__my_fail(c, "could not read a result", err);
        int more = mysql_next_result(c->my);
        if (more > 0)
            return firn__my_fail(c, "query failed", err);
        if (more < 0)
            return FIRN_OK;
    }
}

firn_rc firn__my_query(firn_my_conn *c, const char *sql, MYSQL_RES **out, firn_err *err)
{
    *out = NULL;
    if (mysql_real_query(c->my, sql, strlen(sql)))
        return firn__my_fail(c, "query failed", err);
    MYSQL_RES *res = mysql_store_result(c->my);
    if (!res) {
        if (mysql_field_count(c->my) == 0)
            return firn_err_set(err, FIRN_ERR_INTERNAL, "query returned no result set");
        return firn__my_fail(c, "could not read a result", err);
    }
    *out = res;
    return FIRN_OK;
}

firn_rc firn_my_conn_query_value(
    firn_my_conn *c, const char *sql, char *out, size_t out_cap, bool *out_null, firn_err *err)
{
    MYSQL_RES *res = NULL;
    FIRN_TRY(firn__my_query(c, sql, &res, err));
    MYSQL_ROW row = mysql_fetch_row(res);
    if (!row || mysql_num_fields(res) == 0) {
        mysql_free_result(res);
        return firn_err_set(err, FIRN_ERR_NOT_FOUND, "query returned no row");
    }
    const unsigned long *lens = mysql_fetch_lengths(res);
    if (out_null)
        *out_null = row[0] == NULL;
    size_t n = row[0] ? lens[0] : 0;
    if (out_cap > 0) {
        if (n >= out_cap)
            n = out_cap - 1;
        if (n)
            memcpy(out, row[0], n);
        out[n] = '\0';
    }
    mysql_free_result(res);
    return FIRN_OK;
}

static firn_rc quote_append(firn_buf *b, const char *s, char q, bool backslash)
{
    FIRN_TRY(firn_buf_append(b, &q, 1));
    for (const char *p = s; *p; p++) {
        if (*p == q || (backslash && *p == '\\'))
            FIRN_TRY(firn_buf_append(b, p, 1));
        FIRN_TRY(firn_buf_append(b, p, 1));
    }
    return firn_buf_append(b, &q, 1);
}

firn_rc firn_my_ident_append(firn_buf *b, const char *s)
{
    return quote_append(b, s, '`', false);
}

firn_rc firn_my_literal_append(firn_buf *b, const char *s)
{
    return quote_append(b, s, '\'', true);
}
