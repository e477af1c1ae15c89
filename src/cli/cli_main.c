/* SPDX-License-Identifier: Apache-2.0 */
/* The firn command line: the command table, help texts, option parsing and exit codes. */
#include "cli_int.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define FILE_OPTS                                                                                  \
    "  --source FILE        source.json: the PostgreSQL database (OLake: --config)\n"              \
    "  --destination FILE   destination.json: the Iceberg catalog and writer settings\n"           \
    "  --streams FILE       streams.json: the tables to sync (OLake: --catalog)\n"
#define LOG_OPTS                                                                                   \
    "  --log SPEC           log levels, e.g. \"info\" or \"info,pg=debug,-io\" (env FIRN_LOG)\n"   \
    "  --log-format FORMAT  logfmt (default) or json\n"                                            \
    "  -h, --help           show this help\n"

static const cli_cmd commands[] = {
    {"spec", "print the JSON Schema of the configuration files",
     "usage: firn spec [source|destination|streams|state]\n"
     "\n"
     "Prints the JSON Schema (draft 2020-12) of one configuration file, or of all four as one\n"
     "object. The schema is generated from the tables firn validates with.\n"
     "\n"
     "options:\n"
     "  -h, --help           show this help\n",
     0, 1, firn__cli_spec},
    {"check", "test the connection to the source and the destination",
     "usage: firn check [--source FILE] [--destination FILE] [--streams FILE] [--state FILE]\n"
     "\n"
     "Validates the files, then connects: to PostgreSQL (login, wal_level, a replication\n"
     "connection, the replication slot and publication; with --streams also what sync checks\n"
     "for each CDC table: publication coverage, replica identity, SELECT, and a warning naming\n"
     "the tables at risk of unchanged TOAST values) and to the catalog (a test namespace and\n"
     "file are written and removed; with a REST catalog on object storage the file goes into\n"
     "a scratch table's location, with the credentials the catalog vends for it, as sync\n"
     "writes). Creates nothing on the source. A selected table the source\n"
     "lacks is an error naming them all (exit 2 when one of them was never synced, as the state\n"
     "file, default state.json next to --streams, tells).\n"
     "At least one of --source and --destination is needed.\n"
     "\n"
     "options:\n" FILE_OPTS
     "  --state FILE         state.json (default: state.json next to the streams file)\n" LOG_OPTS,
     CLI_OPT_SOURCE | CLI_OPT_DESTINATION | CLI_OPT_STREAMS | CLI_OPT_STATE | CLI_OPT_LOG, 0,
     firn__cli_check},
    {"discover", "list the source's tables and write the streams file",
     "usage: firn discover --source FILE [--destination FILE] [--streams FILE] [--output FILE]\n"
     "\n"
     "Writes a streams file listing every table with its columns, key and cursor candidates.\n"
     "A table CDC cannot stream (no replica identity, or outside the existing publication) is\n"
     "offered without the CDC modes, and its notes say why and what to run.\n"
     "With --streams, the selections and options of that file are kept. The file is written to\n"
     "--output, else over --streams, else streams.json next to the source file.\n"
     "\n"
     "options:\n" FILE_OPTS "  --output FILE        where to write the streams file\n" LOG_OPTS,
     CLI_OPT_SOURCE | CLI_OPT_DESTINATION | CLI_OPT_STREAMS | CLI_OPT_OUTPUT | CLI_OPT_LOG, 0,
     firn__cli_discover},
    {"sync", "copy the selected tables into Iceberg",
     "usage: firn sync --source FILE --destination FILE --streams FILE [--state FILE] [--follow]\n"
     "                 [--metrics-listen HOST:PORT]\n"
     "\n"
     "Without --follow: a catch-up run. Backfills what is pending, reads the WAL up to the\n"
     "position current at start, commits and exits. With --follow: keeps streaming and commits\n"
     "each table per its commit policy until SIGINT or SIGTERM, which stop it cleanly; it\n"
     "reconnects after losing the source (source reconnect_timeout_seconds, default 300 s).\n"
     "\n"
     "options:\n" FILE_OPTS
     "  --state FILE         state.json (default: state.json next to the streams file)\n"
     "  --follow             keep streaming changes\n"
     "  --metrics-listen HOST:PORT\n"
     "                       serve /metrics (Prometheus), /healthz and /readyz there while the\n"
     "                       run lasts, e.g. 127.0.0.1:9187 (destination key "
     "metrics_listen)\n" LOG_OPTS,
     CLI_OPT_SOURCE | CLI_OPT_DESTINATION | CLI_OPT_STREAMS | CLI_OPT_STATE | CLI_OPT_FOLLOW |
         CLI_OPT_LOG,
     0, firn__cli_sync},
    {"status", "show each stream's committed position, last commit and lag",
     "usage: firn status --streams FILE [--state FILE] [--source FILE] [--destination FILE]\n"
     "\n"
     "Prints one line per selected stream: committed source position, time of the last\n"
     "commit and lag (time since that commit, as \"5m 3s\"). With --source, the lag also gives\n"
     "the WAL between the committed and the source's current position (\"3.2 MiB\"; the exact\n"
     "bytes are lag_bytes in stats.json).\n"
     "\n"
     "options:\n" FILE_OPTS
     "  --state FILE         state.json (default: state.json next to the streams file)\n" LOG_OPTS,
     CLI_OPT_SOURCE | CLI_OPT_DESTINATION | CLI_OPT_STREAMS | CLI_OPT_STATE | CLI_OPT_LOG, 0,
     firn__cli_status},
    {"maintain", "show the health of tables, expire snapshots, remove orphan files, by hand",
     "usage: firn maintain status|expire|orphans --destination FILE [--dry-run]\n"
     "                     [--older-than SECONDS] [--delete] [TABLE...]\n"
     "\n"
     "Runs table maintenance on the destination's catalog, on the tables named\n"
     "(NAMESPACE.TABLE) or on every table of the catalog, also tables no stream writes now.\n"
     "No source is read. One line per table (orphans: also one per orphan file).\n"
     "  status   snapshots, refs, metadata size against maintenance.max_metadata_size,\n"
     "           data and delete files, records\n"
     "  expire   expire snapshots now, with the destination's maintenance settings and the\n"
     "           tables' history.expire.* properties (what firn sync does every 16 commits),\n"
     "           and delete the files only expired snapshots referenced\n"
     "  orphans  list the files under each table's location that no metadata references\n"
     "           and that are older than --older-than (default 3 days); --delete removes\n"
     "           them. Refuses a table whose metadata names files under another scheme or\n"
     "           authority (s3a:// against s3://). Never touches metadata/firn-index/\n"
     "\n"
     "options:\n"
     "  --destination FILE   destination.json: the Iceberg catalog and writer settings\n"
     "  --dry-run            expire: print what would expire, change nothing\n"
     "  --older-than SECONDS orphans: only files older than this (default 259200, 3 days)\n"
     "  --delete             orphans: delete them (without it: a dry run that lists "
     "them)\n" LOG_OPTS,
     CLI_OPT_DESTINATION | CLI_OPT_DRY_RUN | CLI_OPT_ORPHANS | CLI_OPT_LOG, 16, firn__cli_maintain},
    {"serve", "run the web UI, the HTTP API and the job scheduler",
     "usage: firn serve --data DIR [--listen HOST:PORT] [--key-file FILE]\n"
     "\n"
     "Serves the web UI and the JSON API (/api/v1) and runs the jobs made there, each run a\n"
     "firn sync of this binary on the job's own files under DIR/jobs/<id> (the CLI reads\n"
     "them too). State in DIR/firn-serve.db (SQLite). On the first start, with no user yet,\n"
     "a one-time setup token is printed and kept in DIR/setup-token: the page asks for it\n"
     "to create the administrator. SIGINT or SIGTERM stop the runs cleanly, then the server.\n"
     "See docs/serve.md.\n"
     "\n"
     "options:\n"
     "  --data DIR           state folder (created when missing)\n"
     "  --listen HOST:PORT   where to serve (default 127.0.0.1:8000; port 0: any free port,\n"
     "                       printed as \"firn serve: listening on http://HOST:PORT/\")\n"
     "  --key-file FILE      32-byte key that encrypts the stored passwords and keys\n"
     "                       (default DIR/secret.key, created when missing; keep it apart\n"
     "                       from backups of DIR)\n" LOG_OPTS,
     CLI_OPT_SERVE | CLI_OPT_LOG, 0, firn__cli_serve},
    {"version", "print the version and build", "usage: firn version\n", 0, 0, NULL},
    {"help", "show help for firn or a command", "usage: firn help [COMMAND]\n", 0, 1, NULL},
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

/* Writes the formatted message to stderr with control characters escaped (\n, \t, \x1b ...):
 * names from the configuration files may hold any of them, and an error stays one line that
 * cannot move the terminal's cursor or change its colours. */
static void put_escaped(const char *fmt, va_list ap) FIRN_PRINTF(1, 0);
static void put_escaped(const char *fmt, va_list ap)
{
    char stack[1024];
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(stack, sizeof(stack), fmt, copy);
    va_end(copy);
    if (n < 0)
        return;
    char *text = stack;
    if ((size_t)n >= sizeof(stack)) {
        text = firn_malloc((size_t)n + 1);
        vsnprintf(text, (size_t)n + 1, fmt, ap);
    }
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p == '\n')
            fputs("\\n", stderr);
        else if (*p == '\t')
            fputs("\\t", stderr);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(stderr, "\\x%02x", *p);
        else
            fputc(*p, stderr);
    }
    if (text != stack)
        firn_free(text);
}

void firn__cli_error(const char *fmt, ...)
{
    va_list ap;
    fputs("firn: ", stderr);
    va_start(ap, fmt);
    put_escaped(fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int firn__cli_usage_error(const cli_cmd *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "firn: %s: ", cmd->name);
    va_start(ap, fmt);
    put_escaped(fmt, ap);
    va_end(ap);
    fprintf(stderr, "; run \"firn %s --help\"\n", cmd->name);
    return CLI_EXIT_USAGE;
}

void firn__cli_print_exit_codes(FILE *out)
{
    fprintf(out, "exit codes:\n"
                 "  0    success\n"
                 "  1    runtime error (none of the classes below)\n"
                 "  2    usage or configuration error: bad option, missing or unreadable file,\n"
                 "       invalid JSON, unknown key, bad value, unset environment variable\n"
                 "  3    source error: host unreachable, authentication failed, missing slot or\n"
                 "       publication, wal_level not logical, missing privileges; a stream\n"
                 "       stopped at a schema change its table cannot take (the others go on)\n"
                 "  4    destination error: catalog unreachable or refusing (also a commit it\n"
                 "       refuses during a copy or while streaming), catalog path or warehouse\n"
                 "       not writable, storage credentials, a full or read-only local disk\n"
                 "  130  interrupted by SIGINT (after a clean stop; SIGTERM exits 0)\n");
}

static void print_usage(FILE *out)
{
    fprintf(out, "usage: firn <command> [options]\n"
                 "\n"
                 "firn copies PostgreSQL tables into Apache Iceberg and keeps them current from\n"
                 "the WAL.\n"
                 "\n"
                 "commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n"
                 "Run \"firn <command> --help\" for its options. The configuration files are\n"
                 "described by \"firn spec\" and in docs/configuration.md.\n"
                 "\n");
    firn__cli_print_exit_codes(out);
}

static const cli_cmd *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    }
    return NULL;
}

static int run_help(const cli_opts *o)
{
    if (o->n_args == 0) {
        print_usage(stdout);
        return CLI_EXIT_OK;
    }
    const cli_cmd *cmd = find_command(o->args[0]);
    if (!cmd) {
        firn__cli_error("unknown command \"%s\"; run \"firn help\" for the list", o->args[0]);
        return CLI_EXIT_USAGE;
    }
    fputs(cmd->help, stdout);
    return CLI_EXIT_OK;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        print_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0)
        name = "version";
    const cli_cmd *cmd = find_command(name);
    if (!cmd) {
        firn__cli_error("unknown command \"%s\"; run \"firn help\" for the list", name);
        return CLI_EXIT_USAGE;
    }
    cli_opts o = {0};
    if (!firn__cli_parse(cmd, argc - 2, argv + 2, &o))
        return CLI_EXIT_USAGE;
    if (o.help) {
        fputs(cmd->help, stdout);
        if (cmd->options)
            fputc('\n', stdout);
        if (cmd->options)
            firn__cli_print_exit_codes(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(cmd->name, "help") == 0)
        return run_help(&o);
    if (strcmp(cmd->name, "version") == 0) {
        printf("firn version %s (build %s)\n", FIRN_VERSION, FIRN_BUILD_ID);
        return CLI_EXIT_OK;
    }
    return cmd->run(cmd, &o);
}
