/* SPDX-License-Identifier: Apache-2.0 */
/* Private to the firn command line: parsed options, the command table and exit codes. */
#ifndef FIRN_CLI_INT_H
#define FIRN_CLI_INT_H

#include "firn/config.h"
#include "firn/engine.h"

#include <stdbool.h>
#include <stdio.h>

/** Exit codes (README "Exit codes", `firn help`). */
enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_RUNTIME = 1,       /* failure outside the classes below */
    CLI_EXIT_USAGE = 2,         /* bad command line or configuration file */
    CLI_EXIT_SOURCE = 3,        /* source database unreachable, refusing or misconfigured */
    CLI_EXIT_DESTINATION = 4,   /* catalog or storage unreachable, refusing or not writable */
    CLI_EXIT_INTERRUPTED = 130, /* stopped by SIGINT (Ctrl-C) after a clean shutdown */
};

/** Options a command accepts (bit set). */
enum {
    CLI_OPT_SOURCE = 1u << 0,
    CLI_OPT_DESTINATION = 1u << 1,
    CLI_OPT_STREAMS = 1u << 2,
    CLI_OPT_STATE = 1u << 3,
    CLI_OPT_FOLLOW = 1u << 4,
    CLI_OPT_OUTPUT = 1u << 5,
    CLI_OPT_LOG = 1u << 6, /* --log and --log-format */
    CLI_OPT_DRY_RUN = 1u << 7,
    CLI_OPT_ORPHANS = 1u << 8, /* --older-than and --delete */
    CLI_OPT_SERVE = 1u << 9,   /* --listen, --data, --key-file */
};

/** The parsed command line of one command. */
typedef struct cli_opts {
    const char *source;
    const char *destination;
    const char *streams;
    const char *state;
    const char *output;
    const char *log;
    const char *log_format;
    const char *metrics_listen;
    bool follow;
    bool dry_run;
    bool delete_orphans;
    const char *older_than;
    const char *listen;
    const char *data;
    const char *key_file;
    bool help;
    const char *args[16]; /* positional arguments */
    size_t n_args;
} cli_opts;

/** One command. */
typedef struct cli_cmd {
    const char *name;
    const char *summary;
    const char *help; /* usage and options, printed by --help */
    unsigned options; /* CLI_OPT_* accepted */
    size_t max_args;  /* positional arguments accepted */
    int (*run)(const struct cli_cmd *cmd, cli_opts *o);
} cli_cmd;

/** Parses argv (after the command name) into o. On error prints one line to stderr and returns
 * false. */
bool firn__cli_parse(const cli_cmd *cmd, int argc, char **argv, cli_opts *o);
/** Prints "firn: <cmd>: <message>" and returns CLI_EXIT_USAGE. */
int firn__cli_usage_error(const cli_cmd *cmd, const char *fmt, ...) FIRN_PRINTF(2, 3);
/** Prints "firn: <message>" to stderr. */
void firn__cli_error(const char *fmt, ...) FIRN_PRINTF(1, 2);
/** Sets up logging from --log/--log-format, then FIRN_LOG, else "info". */
int firn__cli_setup_log(const cli_cmd *cmd, const cli_opts *o);
/** Prints the exit-code table. */
void firn__cli_print_exit_codes(FILE *out);

/* Commands (cli_cmds.c). */
int firn__cli_spec(const cli_cmd *cmd, cli_opts *o);
int firn__cli_check(const cli_cmd *cmd, cli_opts *o);
int firn__cli_discover(const cli_cmd *cmd, cli_opts *o);
int firn__cli_sync(const cli_cmd *cmd, cli_opts *o);
int firn__cli_status(const cli_cmd *cmd, cli_opts *o);
int firn__cli_maintain(const cli_cmd *cmd, cli_opts *o);
int firn__cli_serve(const cli_cmd *cmd, cli_opts *o);

#endif
