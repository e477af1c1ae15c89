/* SPDX-License-Identifier: Apache-2.0 */
/* Catalog interface: argument checks and dispatch to the implementation's vtable. */
#include "cat_int.h"

#include <string.h>

void firn_catalog_table_deinit(firn_catalog_table *t)
{
    if (!t)
        return;
    firn_table_metadata_free(t->metadata);
    firn_free(t->metadata_location);
    t->metadata = NULL;
    t->metadata_location = NULL;
}

void firn_catalog_free(firn_catalog *c)
{
    if (c)
        c->vt->destroy(c);
}

/* Namespace levels and table names must be non-empty; namespaces are dot-joined levels. */
static firn_rc check_ns(const char *ns, firn_err *err)
{
    if (!ns || ns[0] == '\0' || ns[0] == '.' || ns[strlen(ns) - 1] == '.' || strstr(ns, ".."))
        return firn_err_set(err, FIRN_ERR_INVALID, "invalid namespace \"%s\"", ns ? ns : "");
    return FIRN_OK;
}

static firn_rc check_table(const char *ns, const char *name, firn_err *err)
{
    FIRN_TRY(check_ns(ns, err));
    if (!name || name[0] == '\0')
        return firn_err_set(err, FIRN_ERR_INVALID, "invalid table name in namespace \"%s\"", ns);
    return FIRN_OK;
}

firn_rc firn_catalog_create_namespace(firn_catalog *c,
                                      const char *ns,
                                      const firn_props *props,
                                      firn_err *err)
{
    FIRN_TRY(check_ns(ns, err));
    return c->vt->create_namespace(c, ns, props, err);
}

firn_rc
firn_catalog_list_namespaces(firn_catalog *c, const char *parent, firn_strlist *out, firn_err *err)
{
    memset(out, 0, sizeof(*out));
    if (parent && parent[0] != '\0')
        FIRN_TRY(check_ns(parent, err));
    return c->vt->list_namespaces(c, parent && parent[0] ? parent : NULL, out, err);
}

firn_rc firn_catalog_namespace_exists(firn_catalog *c, const char *ns, bool *out, firn_err *err)
{
    *out = false;
    FIRN_TRY(check_ns(ns, err));
    return c->vt->namespace_exists(c, ns, out, err);
}

firn_rc firn_catalog_load_namespace(firn_catalog *c, const char *ns, firn_props *out, firn_err *err)
{
    firn_props_init(out);
    FIRN_TRY(check_ns(ns, err));
    return c->vt->load_namespace(c, ns, out, err);
}

firn_rc firn_catalog_update_namespace(firn_catalog *c,
                                      const char *ns,
                                      const firn_props *updates,
                                      const char *const *removals,
                                      size_t n_removals,
                                      firn_err *err)
{
    FIRN_TRY(check_ns(ns, err));
    return c->vt->update_namespace(c, ns, updates, removals, n_removals, err);
}

firn_rc firn_catalog_drop_namespace(firn_catalog *c, const char *ns, firn_err *err)
{
    FIRN_TRY(check_ns(ns, err));
    return c->vt->drop_namespace(c, ns, err);
}

firn_rc firn_catalog_create_table(firn_catalog *c,
                                  const char *ns,
                                  const char *name,
                                  const firn_table_create *opts,
                                  firn_catalog_table *out,
                                  firn_err *err)
{
    memset(out, 0, sizeof(*out));
    FIRN_TRY(check_table(ns, name, err));
    if (!opts || !opts->schema)
        return firn_err_set(err, FIRN_ERR_INVALID, "table \"%s.%s\" needs a schema", ns, name);
    return c->vt->create_table(c, ns, name, opts, out, err);
}

firn_rc firn_catalog_load_table(
    firn_catalog *c, const char *ns, const char *name, firn_catalog_table *out, firn_err *err)
{
    memset(out, 0, sizeof(*out));
    FIRN_TRY(check_table(ns, name, err));
    return c->vt->load_table(c, ns, name, out, err);
}

firn_rc firn_catalog_table_exists(
    firn_catalog *c, const char *ns, const char *name, bool *out, firn_err *err)
{
    *out = false;
    FIRN_TRY(check_table(ns, name, err));
    return c->vt->table_exists(c, ns, name, out, err);
}

firn_rc firn_catalog_list_tables(firn_catalog *c, const char *ns, firn_strlist *out, firn_err *err)
{
    memset(out, 0, sizeof(*out));
    FIRN_TRY(check_ns(ns, err));
    return c->vt->list_tables(c, ns, out, err);
}

firn_rc firn_catalog_drop_table(firn_catalog *c, const char *ns, const char *name, firn_err *err)
{
    FIRN_TRY(check_table(ns, name, err));
    return c->vt->drop_table(c, ns, name, err);
}

firn_rc firn_catalog_commit(firn_catalog *c,
                            const char *ns,
                            const char *name,
                            const firn_table_changes *changes,
                            firn_catalog_table *out,
                            firn_err *err)
{
    memset(out, 0, sizeof(*out));
    FIRN_TRY(check_table(ns, name, err));
    return c->vt->commit(c, ns, name, changes, out, err);
}

const char *firn_catalog_kind_name(const firn_catalog *c)
{
    return c->vt->kind;
}

firn_rc firn_catalog_commit_transaction(firn_catalog *c,
                                        const firn_catalog_table_commit *commits,
                                        size_t n,
                                        firn_err *err)
{
    if (n == 0)
        return FIRN_OK;
    for (size_t i = 0; i < n; i++) {
        FIRN_TRY(check_table(commits[i].ns, commits[i].name, err));
        if (!commits[i].changes)
            return firn_err_set(err, FIRN_ERR_INVALID, "no changes for table \"%s.%s\"",
                                commits[i].ns, commits[i].name);
    }
    if (!c->vt->commit_transaction)
        return firn_err_set(err, FIRN_ERR_UNSUPPORTED,
                            "the %s catalog cannot commit several tables at once", c->vt->kind);
    return c->vt->commit_transaction(c, commits, n, err);
}

static bool segment_byte_encoded(unsigned char ch, bool dots)
{
    return ch < 0x20 || ch == 0x7f || ch == '/' || ch == '\\' || ch == '%' || ch == '~' ||
           (dots && ch == '.');
}

/* Iceberg Java's and pyiceberg's SQL catalogs append the name as it is (so "../x" leaves the
 * warehouse). Not percent-encoding either, which partition folders use: '~' and two hex digits
 * ('%' and '~' are escaped to keep the encoding one-to-one). */
firn_rc firn__cat_append_segment(firn_buf *b, const char *name)
{
    const bool dots = strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        if (segment_byte_encoded(*p, dots))
            FIRN_TRY(firn_buf_appendf(b, "~%02X", *p));
        else
            FIRN_TRY(firn_buf_append(b, p, 1));
    }
    return FIRN_OK;
}

bool firn__cat_segment_needs_encoding(const char *name)
{
    const bool dots = strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        if (segment_byte_encoded(*p, dots))
            return true;
    }
    return false;
}
