/* SPDX-License-Identifier: Apache-2.0 */
/* Temporary entry points so the CLI links before the sync engine exists; the engine replaces
 * this file. Each returns FIRN_ERR_UNSUPPORTED. */
#include "firn/engine.h"

static _Thread_local firn_fault last_fault;

firn_fault firn_engine_last_fault(void)
{
    return last_fault;
}

static firn_rc not_built(firn_err *err)
{
    last_fault = FIRN_FAULT_NONE;
    return firn_err_set(err, FIRN_ERR_UNSUPPORTED, "the sync engine is not built yet");
}

firn_rc firn_engine_check(const firn_config *cfg, firn_err *err)
{
    (void)cfg;
    return not_built(err);
}

firn_rc firn_engine_discover(const firn_config *cfg, const char *streams_out_path, firn_err *err)
{
    (void)cfg;
    (void)streams_out_path;
    return not_built(err);
}

firn_rc firn_engine_sync(const firn_config *cfg, const firn_sync_options *opts, firn_err *err)
{
    (void)cfg;
    (void)opts;
    return not_built(err);
}

firn_rc firn_engine_status(const firn_config *cfg, FILE *out, firn_err *err)
{
    (void)cfg;
    (void)out;
    return not_built(err);
}
