/* SPDX-License-Identifier: Apache-2.0 */
/* The commands: spec prints the JSON Schema; check, discover, sync and status load the
 * configuration and call the engine, whose result becomes the exit code. */
#include "cli_int.h"

#include "firn/serve.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_signal;

/* The first SIGINT/SIGTERM asks the engine for a clean stop; a second one exits at once.
 * Exiting mid-commit is safe: a catalog commit is one atomic swap, and files written before it
 * are only unreferenced (DESIGN.md "Exactly-once"). */
static void on_stop_signal(int signo)
{
    if (stop_signal)
        _exit(128 + signo);
    stop_signal = signo;
}

int firn__cli_spec(const cli_cmd *cmd, cli_opts *o)
{
    char *json = NULL;
    firn_err err = {0};
    if (firn_config_spec(o->n_args ? o->args[0] : NULL, &json, &err))
        return firn__cli_usage_error(cmd, "%s", err.msg);
    puts(json);
    firn_free(json);
    return CLI_EXIT_OK;
}

/* "<folder of path>/<name>": OLake keeps streams.json and state.json next to the config. */
static char *sibling(const char *path, const char *name)
{
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0;
    size_t len = dir_len + strlen(name) + 1;
    char *out = firn_malloc(len);
    memcpy(out, path, dir_len);
    memcpy(out + dir_len, name, strlen(name) + 1);
    return out;
}

/* Loads the files, sets up logging and reports warnings. Returns an exit code. */
static int
load(const cli_cmd *cmd, const cli_opts *o, const firn_config_paths *paths, firn_config *cfg)
{
    int code = firn__cli_setup_log(cmd, o);
    if (code)
        return code;
    firn_err err = {0};
    if (firn_config_load(paths, cfg, &err)) {
        firn__cli_error("%s", err.msg);
        return CLI_EXIT_USAGE;
    }
    if (cfg->has_destination && !o->log && !getenv("FIRN_LOG") && cfg->destination.log &&
        firn_log_configure(cfg->destination.log, &err)) {
        firn__cli_error("%s: \"log\": %s", cfg->destination_path, err.msg);
        firn_config_free(cfg);
        return CLI_EXIT_USAGE;
    }
    if (cfg->has_destination && !o->log_format)
        firn_log_set_json(cfg->destination.log_format == 1);
    for (size_t i = 0; i < cfg->warnings.count; i++)
        FIRN_LOG(FIRN_LOG_WARN, "cli", "%s", cfg->warnings.items[i]);
    return CLI_EXIT_OK;
}

/* Exit code of a failed engine call. */
static int engine_failure(firn_rc rc, const firn_err *err)
{
    /* A stream stopped at a schema change (FIRN_ERR_SCHEMA) keeps its exit code when a signal
     * then ends the run: the run did not do all it was asked. */
    if (rc == FIRN_ERR_CANCELLED || (stop_signal && rc != FIRN_ERR_SCHEMA)) {
        if (err->msg[0] && rc != FIRN_ERR_CANCELLED)
            firn__cli_error("%s", err->msg);
        return stop_signal == SIGINT ? CLI_EXIT_INTERRUPTED
                                     : (rc == FIRN_ERR_CANCELLED ? CLI_EXIT_OK : CLI_EXIT_RUNTIME);
    }
    firn__cli_error("%s", err->msg[0] ? err->msg : firn_rc_message(rc));
    /* A local disk that is full or read-only (the warehouse, a spill or index folder) is never
     * the source's fault, wherever the engine met it: a backfill worker or a CDC flush writing
     * a data file reports it as part of the source phase. */
    if (err->sys_errno == ENOSPC || err->sys_errno == EDQUOT || err->sys_errno == EROFS)
        return CLI_EXIT_DESTINATION;
    /* Where the engine failed decides; FIRN_ERR_CONFIG alone would send source setup errors
     * (wal_level, replica identity) to 2 instead of 3. */
    switch (firn_engine_last_fault()) {
    case FIRN_FAULT_CONFIG:
        return CLI_EXIT_USAGE;
    case FIRN_FAULT_SOURCE:
        return CLI_EXIT_SOURCE;
    case FIRN_FAULT_DESTINATION:
        return CLI_EXIT_DESTINATION;
    case FIRN_FAULT_NONE:
        break;
    }
    return rc == FIRN_ERR_CONFIG ? CLI_EXIT_USAGE : CLI_EXIT_RUNTIME;
}

int firn__cli_check(const cli_cmd *cmd, cli_opts *o)
{
    if (!o->source && !o->destination)
        return firn__cli_usage_error(cmd, "give --source FILE, --destination FILE or both");
    /* The state file, when there is one, tells a stream synced before (its table renamed or
     * dropped since) from a misspelt one. */
    char *state = o->state     ? firn_strdup(o->state)
                  : o->streams ? sibling(o->streams, "state.json")
                               : NULL;
    if (state && !o->state && access(state, F_OK) != 0) {
        firn_free(state);
        state = NULL;
    }
    firn_config_paths paths = {o->source, o->destination, o->streams, state};
    firn_config cfg = {0};
    int code = load(cmd, o, &paths, &cfg);
    firn_free(state);
    if (code)
        return code;
    firn_err err = {0};
    firn_rc rc = firn_engine_check(&cfg, &err);
    if (rc == FIRN_OK) {
        printf("check: ok (%s%s%s)\n", cfg.has_source ? "source" : "",
               cfg.has_source && cfg.has_destination ? ", " : "",
               cfg.has_destination ? "destination" : "");
        code = CLI_EXIT_OK;
    } else {
        code = engine_failure(rc, &err);
    }
    firn_config_free(&cfg);
    return code;
}

int firn__cli_discover(const cli_cmd *cmd, cli_opts *o)
{
    if (!o->source)
        return firn__cli_usage_error(cmd, "missing --source FILE");
    char *out = o->output
                    ? firn_strdup(o->output)
                    : (o->streams ? firn_strdup(o->streams) : sibling(o->source, "streams.json"));
    /* An existing streams file at the output keeps its selections and options: a second
     * discover never throws away what the user edited. */
    const char *keep = o->streams;
    if (!keep && access(out, F_OK) == 0) {
        keep = out;
        fprintf(stderr, "discover: keeping the selections and options of %s\n", out);
    }
    firn_config_paths paths = {o->source, o->destination, keep, NULL};
    firn_config cfg = {0};
    int code = load(cmd, o, &paths, &cfg);
    if (code) {
        firn_free(out);
        return code;
    }
    firn_err err = {0};
    firn_rc rc = firn_engine_discover(&cfg, out, &err);
    if (rc == FIRN_OK) {
        printf("discover: wrote %s\n", out);
        code = CLI_EXIT_OK;
    } else {
        code = engine_failure(rc, &err);
    }
    firn_free(out);
    firn_config_free(&cfg);
    return code;
}

static void install_stop_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int firn__cli_sync(const cli_cmd *cmd, cli_opts *o)
{
    const char *missing = !o->source        ? "--source FILE"
                          : !o->destination ? "--destination FILE"
                          : !o->streams     ? "--streams FILE"
                                            : NULL;
    if (missing)
        return firn__cli_usage_error(cmd, "missing %s", missing);
    char *state = o->state ? firn_strdup(o->state) : sibling(o->streams, "state.json");
    firn_config_paths paths = {o->source, o->destination, o->streams, state};
    firn_config cfg = {0};
    int code = load(cmd, o, &paths, &cfg);
    firn_free(state);
    if (code)
        return code;
    install_stop_handlers();
    firn_sync_options opts = {
        .follow = o->follow, .stop = &stop_signal, .metrics_listen = o->metrics_listen};
    firn_err err = {0};
    firn_rc rc = firn_engine_sync(&cfg, &opts, &err);
    code = rc == FIRN_OK ? (stop_signal == SIGINT ? CLI_EXIT_INTERRUPTED : CLI_EXIT_OK)
                         : engine_failure(rc, &err);
    firn_config_free(&cfg);
    return code;
}

int firn__cli_status(const cli_cmd *cmd, cli_opts *o)
{
    if (!o->streams)
        return firn__cli_usage_error(cmd, "missing --streams FILE");
    char *state = o->state ? firn_strdup(o->state) : sibling(o->streams, "state.json");
    firn_config_paths paths = {o->source, o->destination, o->streams, state};
    firn_config cfg = {0};
    int code = load(cmd, o, &paths, &cfg);
    firn_free(state);
    if (code)
        return code;
    firn_err err = {0};
    firn_rc rc = firn_engine_status(&cfg, stdout, &err);
    code = rc == FIRN_OK ? CLI_EXIT_OK : engine_failure(rc, &err);
    firn_config_free(&cfg);
    return code;
}

int firn__cli_maintain(const cli_cmd *cmd, cli_opts *o)
{
    if (o->n_args == 0)
        return firn__cli_usage_error(cmd, "missing the action: status, expire or orphans");
    firn_maintain_options mo = {0};
    if (strcmp(o->args[0], "status") == 0)
        mo.action = FIRN_MAINTAIN_STATUS;
    else if (strcmp(o->args[0], "expire") == 0)
        mo.action = FIRN_MAINTAIN_EXPIRE;
    else if (strcmp(o->args[0], "orphans") == 0)
        mo.action = FIRN_MAINTAIN_ORPHANS;
    else
        return firn__cli_usage_error(cmd, "unknown action \"%s\" (status, expire or orphans)",
                                     o->args[0]);
    if ((o->delete_orphans || o->older_than) && mo.action != FIRN_MAINTAIN_ORPHANS)
        return firn__cli_usage_error(cmd, "--delete and --older-than go with orphans");
    if (o->older_than) {
        double secs = 0;
        if (firn_parse_double(o->older_than, strlen(o->older_than), &secs, NULL) != FIRN_OK ||
            !(secs >= 0 && secs <= 10.0 * 365 * 86400))
            return firn__cli_usage_error(
                cmd,
                "--older-than must be a number of seconds from 0 to 315360000 (ten years), "
                "got \"%s\"",
                o->older_than);
        mo.older_than_ms = (int64_t)(secs * 1000.0);
        if (mo.older_than_ms == 0)
            mo.older_than_ms = 1; /* 0 s: every unreferenced file */
    }
    mo.delete_orphans = o->delete_orphans;
    if (!o->destination)
        return firn__cli_usage_error(cmd, "missing --destination FILE");
    if (o->dry_run && mo.action != FIRN_MAINTAIN_EXPIRE)
        return firn__cli_usage_error(cmd, "--dry-run goes with expire");
    mo.tables = o->args + 1;
    mo.n_tables = o->n_args - 1;
    mo.dry_run = o->dry_run;
    firn_config_paths paths = {NULL, o->destination, NULL, NULL};
    firn_config cfg = {0};
    int code = load(cmd, o, &paths, &cfg);
    if (code)
        return code;
    firn_err err = {0};
    firn_rc rc = firn_engine_maintain(&cfg, &mo, stdout, &err);
    code = rc == FIRN_OK ? CLI_EXIT_OK : engine_failure(rc, &err);
    firn_config_free(&cfg);
    return code;
}

int firn__cli_serve(const cli_cmd *cmd, cli_opts *o)
{
    if (!o->data)
        return firn__cli_usage_error(cmd, "missing --data DIR (the server's state folder)");
    int code = firn__cli_setup_log(cmd, o);
    if (code)
        return code;
    install_stop_handlers();
    firn_serve_options so = {.listen = o->listen ? o->listen : "127.0.0.1:8000",
                             .data_dir = o->data,
                             .key_file = o->key_file,
                             .stop = &stop_signal};
    firn_err err = {0};
    firn_rc rc = firn_serve(&so, &err);
    if (rc) {
        firn__cli_error("%s", err.msg);
        return rc == FIRN_ERR_CONFIG ? CLI_EXIT_USAGE : CLI_EXIT_RUNTIME;
    }
    return stop_signal == SIGINT ? CLI_EXIT_INTERRUPTED : CLI_EXIT_OK;
}
