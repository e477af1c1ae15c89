/* SPDX-License-Identifier: Apache-2.0 */
/* Option parsing ("--flag value" and "--flag=value", OLake's flag names as aliases) and logging
 * set-up. */
#include "cli_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct cli_flag {
    const char *name;
    unsigned option; /* CLI_OPT_* that must be accepted by the command */
    size_t off;      /* offset of the const char * (or bool) in cli_opts */
    bool takes_value;
} cli_flag;

static const cli_flag flags[] = {
    {"--source", CLI_OPT_SOURCE, offsetof(cli_opts, source), true},
    {"--config", CLI_OPT_SOURCE, offsetof(cli_opts, source), true},
    {"--destination", CLI_OPT_DESTINATION, offsetof(cli_opts, destination), true},
    {"--streams", CLI_OPT_STREAMS, offsetof(cli_opts, streams), true},
    {"--catalog", CLI_OPT_STREAMS, offsetof(cli_opts, streams), true},
    {"--state", CLI_OPT_STATE, offsetof(cli_opts, state), true},
    {"--output", CLI_OPT_OUTPUT, offsetof(cli_opts, output), true},
    {"--log", CLI_OPT_LOG, offsetof(cli_opts, log), true},
    {"--log-format", CLI_OPT_LOG, offsetof(cli_opts, log_format), true},
    {"--follow", CLI_OPT_FOLLOW, offsetof(cli_opts, follow), false},
    {"--dry-run", CLI_OPT_DRY_RUN, offsetof(cli_opts, dry_run), false},
    {"--delete", CLI_OPT_ORPHANS, offsetof(cli_opts, delete_orphans), false},
    {"--older-than", CLI_OPT_ORPHANS, offsetof(cli_opts, older_than), true},
    {"--metrics-listen", CLI_OPT_FOLLOW, offsetof(cli_opts, metrics_listen), true},
    {"--listen", CLI_OPT_SERVE, offsetof(cli_opts, listen), true},
    {"--data", CLI_OPT_SERVE, offsetof(cli_opts, data), true},
    {"--key-file", CLI_OPT_SERVE, offsetof(cli_opts, key_file), true},
};

static const cli_flag *find_flag(const char *arg, size_t len)
{
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
        if (strlen(flags[i].name) == len && strncmp(flags[i].name, arg, len) == 0)
            return &flags[i];
    }
    return NULL;
}

static bool parse_flag(const cli_cmd *cmd, int argc, char **argv, int *i, cli_opts *o)
{
    const char *arg = argv[*i];
    const char *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    const cli_flag *f = find_flag(arg, len);
    if (!f || !(cmd->options & f->option)) {
        firn__cli_usage_error(cmd, "unknown option \"%.*s\"", (int)len, arg);
        return false;
    }
    if (!f->takes_value) {
        if (eq) {
            firn__cli_usage_error(cmd, "option \"%s\" takes no value", f->name);
            return false;
        }
        *(bool *)((char *)o + f->off) = true;
        return true;
    }
    const char *value = eq ? eq + 1 : NULL;
    if (!value && *i + 1 < argc)
        value = argv[++*i];
    if (!value || value[0] == '\0') {
        firn__cli_usage_error(cmd, "option \"%s\" needs a value", f->name);
        return false;
    }
    const char **slot = (const char **)((char *)o + f->off);
    if (*slot) {
        firn__cli_usage_error(cmd, "option \"%s\" given twice", f->name);
        return false;
    }
    *slot = value;
    return true;
}

bool firn__cli_parse(const cli_cmd *cmd, int argc, char **argv, cli_opts *o)
{
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            o->help = true;
            continue;
        }
        if (arg[0] == '-' && arg[1] != '\0') {
            if (!parse_flag(cmd, argc, argv, &i, o))
                return false;
            continue;
        }
        if (o->n_args >= cmd->max_args || o->n_args >= sizeof(o->args) / sizeof(o->args[0])) {
            firn__cli_usage_error(cmd, "unexpected argument \"%s\"", arg);
            return false;
        }
        o->args[o->n_args++] = arg;
    }
    if (o->log_format && strcmp(o->log_format, "json") != 0 &&
        strcmp(o->log_format, "logfmt") != 0) {
        firn__cli_usage_error(cmd, "--log-format must be \"logfmt\" or \"json\", got \"%s\"",
                              o->log_format);
        return false;
    }
    return true;
}

int firn__cli_setup_log(const cli_cmd *cmd, const cli_opts *o)
{
    const char *spec = o->log ? o->log : getenv("FIRN_LOG");
    firn_err err = {0};
    if (spec && firn_log_configure(spec, &err)) {
        if (o->log)
            return firn__cli_usage_error(cmd, "--log: %s", err.msg);
        firn__cli_error("FIRN_LOG: %s", err.msg);
        return CLI_EXIT_USAGE;
    }
    if (o->log_format)
        firn_log_set_json(strcmp(o->log_format, "json") == 0);
    return CLI_EXIT_OK;
}
