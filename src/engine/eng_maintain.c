/* SPDX-License-Identifier: Apache-2.0 */
/* `firn maintain status|expire` (docs/maintenance.md "By hand"): table maintenance run by hand
 * on any table of a destination's catalog, also on tables no stream writes now. Works on the
 * catalog alone (no source): the same expiry the committer runs (eng_expire.c), with the
 * destination's maintenance settings. */
#include "engine_int.h"

#include <stdio.h>
#include <string.h>

static _Thread_local firn_fault maintain_fault;

static firn_rc fault(firn_fault where, firn_rc rc)
{
    if (rc)
        maintain_fault = where;
    return rc;
}

firn_fault firn__maintain_fault(void)
{
    return maintain_fault;
}

/* Splits "ns.name" at its last dot (namespaces may be dotted) into owned parts. */
static firn_rc split_table(const char *arg, char **ns, char **name, firn_err *err)
{
    const char *dot = strrchr(arg, '.');
    if (!dot || dot == arg || dot[1] == '\0')
        return firn_err_set(
            err, FIRN_ERR_CONFIG,
            "table \"%s\" must be given as NAMESPACE.TABLE (e.g. shop_public.orders)", arg);
    *ns = firn_strndup(arg, (size_t)(dot - arg));
    *name = firn_strdup(dot + 1);
    return FIRN_OK;
}

/* Every table of the catalog, as "ns.name" (namespaces listed from the root, nested ones too). */
static firn_rc all_tables(firn_catalog *cat, firn_strlist *out, firn_err *err)
{
    firn_strlist todo = {0};
    firn_strlist_push(&todo, "");
    firn_rc rc = FIRN_OK;
    for (size_t i = 0; i < todo.count && rc == FIRN_OK; i++) {
        firn_strlist children = {0};
        const char *parent = todo.items[i][0] ? todo.items[i] : NULL;
        rc = firn_catalog_list_namespaces(cat, parent, &children, err);
        if (rc == FIRN_ERR_UNSUPPORTED && parent) { /* no nested namespaces */
            firn_err_clear(err);
            rc = FIRN_OK;
        }
        for (size_t k = 0; rc == FIRN_OK && k < children.count; k++) {
            bool seen = false;
            for (size_t j = 0; j < todo.count && !seen; j++)
                seen = strcmp(todo.items[j], children.items[k]) == 0;
            if (!seen)
                firn_strlist_push(&todo, children.items[k]);
        }
        firn_strlist_deinit(&children);
        if (rc || !parent)
            continue;
        firn_strlist tables = {0};
        rc = firn_catalog_list_tables(cat, parent, &tables, err);
        for (size_t k = 0; rc == FIRN_OK && k < tables.count; k++) {
            char full[2048];
            snprintf(full, sizeof(full), "%s.%s", parent, tables.items[k]);
            firn_strlist_push(out, full);
        }
        firn_strlist_deinit(&tables);
    }
    firn_strlist_deinit(&todo);
    return rc;
}

static const char *summary(const firn_snapshot *s, const char *key)
{
    const char *v = s ? firn_props_get(&s->summary, key) : NULL;
    return v ? v : "0";
}

/* One line per table: snapshots and refs, metadata size against the budget, files and
 * records from the current snapshot's summary totals. */
static void print_status(const firn_config *cfg, const firn__table *t, FILE *out)
{
    const firn_table_metadata *md = t->cat.metadata;
    const firn_snapshot *s = firn_table_metadata_current_snapshot(md);
    firn_buf b;
    firn_buf_init(&b, (size_t)1 << 30);
    size_t bytes = firn_table_metadata_to_json(md, &b, NULL) == FIRN_OK ? b.len : 0;
    firn_buf_deinit(&b);
    uint64_t budget = firn__metadata_budget(&cfg->destination);
    char size_text[FIRN_SIZE_TEXT_MAX], budget_text[FIRN_SIZE_TEXT_MAX];
    firn_size_format(bytes, size_text);
    firn_size_format(budget, budget_text);
    int64_t oldest = -1;
    for (size_t i = 0; i < md->n_snapshots; i++) {
        if (oldest < 0 || md->snapshots[i]->timestamp_ms < oldest)
            oldest = md->snapshots[i]->timestamp_ms;
    }
    char age[FIRN_DURATION_TEXT_MAX] = "-";
    if (oldest >= 0)
        firn_duration_format((firn_now_us() / 1000 - oldest) / 1000, age);
    fprintf(out,
            "%s: %zu snapshots (oldest %s ago), %zu refs, metadata %s (%.0f%% of %s); %s data "
            "files, %s delete files, %s records, %s position deletes, %s equality deletes\n",
            t->display, md->n_snapshots, age, md->n_refs, size_text,
            budget ? 100.0 * (double)bytes / (double)budget : 0.0, budget_text,
            summary(s, "total-data-files"), summary(s, "total-delete-files"),
            summary(s, "total-records"), summary(s, "total-position-deletes"),
            summary(s, "total-equality-deletes"));
}

static firn_rc dry_run(const firn__table *t, FILE *out)
{
    const firn_maintenance_config *m = &t->eng->cfg->destination.maintenance;
    firn_expire_policy p;
    firn_expire_policy_from_table(t->cat.metadata, m->snapshot_max_age_ms, m->min_snapshots_to_keep,
                                  &p);
    firn_expire_plan plan;
    firn_expire_plan_make(t->cat.metadata, &p, firn_now_us() / 1000, &plan);
    fprintf(out, "%s: would expire %zu of %zu snapshots and remove %zu refs (dry run)\n",
            t->display, plan.n_expired, t->cat.metadata->n_snapshots, plan.n_removed_refs);
    firn_expire_plan_deinit(&plan);
    return FIRN_OK;
}

static firn_rc one_table(
    firn__engine *e, const firn_maintain_options *o, const char *full, FILE *out, firn_err *err)
{
    firn__table t;
    memset(&t, 0, sizeof(t));
    t.eng = e;
    FIRN_TRY(fault(FIRN_FAULT_CONFIG, split_table(full, &t.ns, &t.name, err)));
    t.display = firn_strdup(full);
    firn_rc rc = firn_catalog_load_table(e->catalog, t.ns, t.name, &t.cat, err);
    if (rc == FIRN_ERR_NOT_FOUND)
        rc = firn_err_set(err, FIRN_ERR_NOT_FOUND,
                          "table \"%s\" does not exist in the catalog (firn maintain status lists "
                          "the tables)",
                          full);
    if (rc == FIRN_OK) {
        if (o->action == FIRN_MAINTAIN_STATUS) {
            print_status(e->cfg, &t, out);
        } else if (o->dry_run) {
            rc = dry_run(&t, out);
        } else {
            firn__expire_result res;
            rc = firn__expire_run(&t, true, &res, err);
            if (rc == FIRN_OK)
                fprintf(out,
                        "%s: expired %zu snapshots (%zu kept), removed %zu refs; deleted %zu "
                        "manifest lists, %zu manifests, %zu data and delete files%s\n",
                        t.display, res.expired, t.cat.metadata->n_snapshots, res.refs_removed,
                        res.lists_deleted, res.manifests_deleted, res.files_deleted,
                        res.delete_failures ? " (some files could not be deleted: see the log)"
                                            : "");
        }
    }
    if (rc)
        firn_err_context(err, "while maintaining table \"%s\"", full);
    firn_catalog_table_deinit(&t.cat);
    firn_free(t.ns);
    firn_free(t.name);
    firn_free(t.display);
    return fault(rc == FIRN_ERR_CONFIG ? FIRN_FAULT_CONFIG : FIRN_FAULT_DESTINATION, rc);
}

firn_rc firn__engine_maintain(const firn_config *cfg,
                              const firn_maintain_options *o,
                              FILE *out,
                              firn_err *err)
{
    maintain_fault = FIRN_FAULT_NONE;
    firn__engine e;
    memset(&e, 0, sizeof(e));
    e.cfg = cfg;
    firn_rc rc =
        firn__engine_open_destination(&cfg->destination, &e.catalog, &e.io, &e.io_owned, err);
    if (rc)
        return fault(rc == FIRN_ERR_CONFIG ? FIRN_FAULT_CONFIG : FIRN_FAULT_DESTINATION, rc);
    firn_strlist tables = {0};
    for (size_t i = 0; i < o->n_tables; i++)
        firn_strlist_push(&tables, o->tables[i]);
    if (o->n_tables == 0)
        rc = fault(FIRN_FAULT_DESTINATION, all_tables(e.catalog, &tables, err));
    if (rc == FIRN_OK && tables.count == 0)
        fprintf(out, "the catalog has no tables\n");
    firn_rc first = rc;
    firn_err first_err = *err;
    firn_fault first_fault = maintain_fault;
    for (size_t i = 0; rc == FIRN_OK && i < tables.count; i++) {
        firn_err terr = {0};
        firn_rc trc = one_table(&e, o, tables.items[i], out, &terr);
        if (trc && first != FIRN_OK) /* the first failure ends the command's output */
            FIRN_LOG(FIRN_LOG_ERROR, "engine", "%s", terr.msg);
        if (trc && first == FIRN_OK) { /* the other tables still get their turn */
            first = trc;
            first_err = terr;
            first_fault = maintain_fault;
        }
    }
    maintain_fault = first_fault;
    firn_strlist_deinit(&tables);
    if (e.io_owned)
        firn_io_free(e.io);
    firn_catalog_free(e.catalog);
    if (first)
        *err = first_err;
    return first;
}
