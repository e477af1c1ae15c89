/* SPDX-License-Identifier: Apache-2.0 */
/* Discovery: which tables to copy, their columns, keys, partitions and size, and the Iceberg
 * schema firn creates for each (issue 5 "Discovery"). */
#include "pg_int.h"

#include <string.h>

struct firn_pg_catalog {
    size_t n_tables;
    firn_pg_table **tables;
};

/* Resolved types by (oid, typmod, ndims): tables share few distinct types. */
typedef struct type_cache {
    size_t n;
    size_t cap;
    struct cached_type {
        uint32_t oid;
        int32_t typmod;
        int32_t ndims;
        firn_pg_type *type;
    } * items;
} type_cache;

static void type_cache_free(type_cache *tc)
{
    for (size_t i = 0; i < tc->n; i++)
        firn_pg_type_free(tc->items[i].type);
    firn_free(tc->items);
}

static firn_rc type_cache_get(firn_pg_conn *c,
                              type_cache *tc,
                              const struct cached_type *key,
                              firn_pg_type **out,
                              firn_err *err)
{
    for (size_t i = 0; i < tc->n; i++) {
        if (tc->items[i].oid == key->oid && tc->items[i].typmod == key->typmod &&
            tc->items[i].ndims == key->ndims) {
            *out = firn_pg_type_clone(tc->items[i].type);
            return FIRN_OK;
        }
    }
    firn_pg_type *t = NULL;
    FIRN_TRY(firn_pg_type_resolve(c, key->oid, key->typmod, key->ndims, &t, err));
    if (tc->n == tc->cap) {
        tc->cap = tc->cap ? tc->cap * 2 : 16;
        tc->items = firn_reallocarray(tc->items, tc->cap, sizeof(*tc->items));
    }
    tc->items[tc->n] = *key;
    tc->items[tc->n].type = t;
    tc->n++;
    *out = firn_pg_type_clone(t);
    return FIRN_OK;
}

static void table_free(firn_pg_table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n_columns; i++) {
        firn_free(t->columns[i].name);
        firn_pg_type_free(t->columns[i].type);
    }
    for (size_t i = 0; i < t->n_leaves; i++)
        firn_free(t->leaves[i].qualified);
    firn_free(t->columns);
    firn_free(t->leaves);
    firn_free(t->key_columns);
    firn_free(t->schema_name);
    firn_free(t->name);
    firn_free(t->qualified);
    firn_field_free(t->schema);
    firn_free(t->filter);
    firn_free(t);
}

void firn_pg_catalog_free(firn_pg_catalog *cat)
{
    if (!cat)
        return;
    for (size_t i = 0; i < cat->n_tables; i++)
        table_free(cat->tables[i]);
    firn_free(cat->tables);
    firn_free(cat);
}

size_t firn_pg_catalog_tables(const firn_pg_catalog *cat)
{
    return cat->n_tables;
}

firn_pg_table *firn_pg_catalog_table(firn_pg_catalog *cat, size_t i)
{
    FIRN_ASSERT(i < cat->n_tables);
    return cat->tables[i];
}

firn_pg_table *firn_pg_catalog_find(firn_pg_catalog *cat, const char *schema, const char *name)
{
    for (size_t i = 0; i < cat->n_tables; i++) {
        firn_pg_table *t = cat->tables[i];
        if (strcmp(t->schema_name, schema) == 0 && strcmp(t->name, name) == 0)
            return t;
    }
    return NULL;
}

static char *quote_qualified(const char *schema, const char *name)
{
    firn_buf b;
    firn_buf_init(&b, FIRN_PG_SQL_MAX);
    firn_rc rc = firn__pg_quote_ident(&b, schema);
    if (!rc)
        rc = firn_buf_append(&b, ".", 1);
    if (!rc)
        rc = firn__pg_quote_ident(&b, name);
    FIRN_ASSERT(rc == FIRN_OK); /* identifiers are at most 63 bytes */
    return (char *)firn_buf_take(&b, NULL);
}

static firn_rc parse_u32(const char *s, uint32_t *out, firn_err *err)
{
    uint64_t v = 0;
    FIRN_TRY(firn_parse_u64(s, strlen(s), &v, err));
    if (v > UINT32_MAX)
        return firn_err_set(err, FIRN_ERR_PARSE, "oid \"%s\" out of range", s);
    *out = (uint32_t)v;
    return FIRN_OK;
}

static firn_rc load_columns(firn_pg_conn *c, type_cache *tc, firn_pg_table *t, firn_err *err)
{
    static const char SQL[] =
        "SELECT a.attnum, a.attname, a.atttypid, a.atttypmod, a.attnotnull, a.attndims,"
        " a.attgenerated <> '' FROM pg_attribute a"
        " WHERE a.attrelid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum";
    char oid_s[16];
    snprintf(oid_s, sizeof(oid_s), "%u", t->oid);
    const char *params[1] = {oid_s};
    PGresult *res = NULL;
    FIRN_TRY(firn__pg_query(c, SQL, 1, params, &res, err));
    firn_rc rc = FIRN_OK;
    int rows = PQntuples(res);
    t->columns = firn_calloc(rows ? (size_t)rows : 1, sizeof(*t->columns));
    for (int r = 0; r < rows && !rc; r++) {
        if (PQgetvalue(res, r, 6)[0] == 't') {
            FIRN_LOG(FIRN_LOG_INFO, FIRN_PG_LOG_COMP,
                     "generated column \"%s\" of table %s is not copied (logical replication "
                     "does not send generated columns)",
                     PQgetvalue(res, r, 1), t->qualified);
            continue;
        }
        int32_t attnum = 0;
        struct cached_type key = {0};
        rc = firn_parse_i32(PQgetvalue(res, r, 0), strlen(PQgetvalue(res, r, 0)), &attnum, err);
        if (!rc)
            rc = parse_u32(PQgetvalue(res, r, 2), &key.oid, err);
        if (!rc)
            rc = firn_parse_i32(PQgetvalue(res, r, 3), strlen(PQgetvalue(res, r, 3)), &key.typmod,
                                err);
        if (!rc)
            rc = firn_parse_i32(PQgetvalue(res, r, 5), strlen(PQgetvalue(res, r, 5)), &key.ndims,
                                err);
        firn_pg_column *col = &t->columns[t->n_columns];
        if (!rc)
            rc = type_cache_get(c, tc, &key, &col->type, err);
        if (rc)
            break;
        col->name = firn_strdup(PQgetvalue(res, r, 1));
        col->attnum = (int16_t)attnum;
        col->not_null = PQgetvalue(res, r, 4)[0] == 't';
        t->n_columns++;
        if (col->type->unknown)
            FIRN_LOG(FIRN_LOG_WARN, FIRN_PG_LOG_COMP,
                     "column \"%s\" of table %s has type \"%s\" unknown to firn: stored as its "
                     "text form",
                     col->name, t->qualified, col->type->name);
    }
    PQclear(res);
    if (!rc && t->n_columns == 0)
        rc = firn_err_set(err, FIRN_ERR_UNSUPPORTED, "table %s has no columns to copy",
                          t->qualified);
    return rc;
}

static bool identifier_type_ok(const firn_pg_type *ty)
{
    switch (ty->kind) {
    case FIRN_PG_KIND_FLOAT4:
    case FIRN_PG_KIND_FLOAT8:
    case FIRN_PG_KIND_INTERVAL:
    case FIRN_PG_KIND_ARRAY:
        return false;
    default:
        return true;
    }
}

static firn_rc load_key(firn_pg_conn *c, firn_pg_table *t, firn_err *err)
{
    static const char SQL[] = "SELECT k.attnum FROM pg_index i CROSS JOIN LATERAL"
                              " unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)"
                              " WHERE i.indrelid = $1::oid AND i.indisprimary ORDER BY k.ord";
    char oid_s[16];
    snprintf(oid_s, sizeof(oid_s), "%u", t->oid);
    const char *params[1] = {oid_s};
    PGresult *res = NULL;
    FIRN_TRY(firn__pg_query(c, SQL, 1, params, &res, err));
    int rows = PQntuples(res);
    t->key_columns = firn_calloc(rows ? (size_t)rows : 1, sizeof(size_t));
    t->has_primary_key = rows > 0;
    firn_rc rc = FIRN_OK;
    for (int r = 0; r < rows && !rc; r++) {
        int32_t attnum = 0;
        rc = firn_parse_i32(PQgetvalue(res, r, 0), strlen(PQgetvalue(res, r, 0)), &attnum, err);
        size_t i = 0;
        while (!rc && i < t->n_columns && t->columns[i].attnum != attnum)
            i++;
        if (!rc && i == t->n_columns)
            rc = firn_err_set(err, FIRN_ERR_UNSUPPORTED,
                              "primary key of table %s uses a column firn does not copy",
                              t->qualified);
        if (!rc && !identifier_type_ok(t->columns[i].type)) {
            FIRN_LOG(FIRN_LOG_WARN, FIRN_PG_LOG_COMP,
                     "primary key column \"%s\" of table %s has type \"%s\", which cannot be an "
                     "Iceberg identifier: the table has no identifier (append mode)",
                     t->columns[i].name, t->qualified, t->columns[i].type->name);
            t->n_key = 0;
            break;
        }
        if (!rc)
            t->key_columns[t->n_key++] = i;
    }
    PQclear(res);
    return rc;
}

static firn_rc load_leaves(firn_pg_conn *c, firn_pg_table *t, firn_err *err)
{
    static const char SQL[] =
        "SELECT c.oid, n.nspname, c.relname, c.reltuples, pg_relation_size(c.oid)"
        " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE c.relkind = 'r' AND (c.oid = $1::oid OR c.oid IN"
        " (SELECT relid FROM pg_partition_tree($1::oid) WHERE isleaf))"
        " ORDER BY n.nspname, c.relname";
    char oid_s[16];
    snprintf(oid_s, sizeof(oid_s), "%u", t->oid);
    const char *params[1] = {oid_s};
    PGresult *res = NULL;
    FIRN_TRY(firn__pg_query(c, SQL, 1, params, &res, err));
    int rows = PQntuples(res);
    t->leaves = firn_calloc(rows ? (size_t)rows : 1, sizeof(*t->leaves));
    firn_rc rc = FIRN_OK;
    t->estimated_rows = 0;
    for (int r = 0; r < rows && !rc; r++) {
        firn_pg_leaf *leaf = &t->leaves[t->n_leaves];
        rc = parse_u32(PQgetvalue(res, r, 0), &leaf->oid, err);
        double tuples = 0;
        int64_t size = 0;
        if (!rc)
            rc = firn_parse_double(PQgetvalue(res, r, 3), strlen(PQgetvalue(res, r, 3)), &tuples,
                                   err);
        if (!rc)
            rc = firn_parse_i64(PQgetvalue(res, r, 4), strlen(PQgetvalue(res, r, 4)), &size, err);
        if (rc)
            break;
        leaf->qualified = quote_qualified(PQgetvalue(res, r, 1), PQgetvalue(res, r, 2));
        t->n_leaves++;
        t->estimated_rows += tuples > 0 ? tuples : 0;
        t->size_bytes += size;
    }
    PQclear(res);
    return rc;
}

static void build_schema(firn_pg_table *t)
{
    t->schema = firn_field_new(0, "schema", FIRN_TYPE_STRUCT, true);
    int32_t next_id = (int32_t)t->n_columns + 1;
    for (size_t i = 0; i < t->n_columns; i++) {
        firn_pg_column *col = &t->columns[i];
        col->field_id = (int32_t)i + 1;
        /* A NaN in a decimal column becomes null, so those stay optional. */
        bool required = col->not_null && col->type->kind != FIRN_PG_KIND_DECIMAL;
        for (size_t k = 0; k < t->n_key; k++) {
            if (t->key_columns[k] == i)
                required = true;
        }
        firn_field_add(t->schema,
                       firn_pg_type_field(col->type, col->field_id, col->name, required, &next_id));
    }
    t->last_field_id = next_id - 1;
}

typedef struct rel_row {
    uint32_t oid;
    const char *nspname;
    const char *relname;
    char relkind;
    char replident;
} rel_row;

static firn_rc
load_table(firn_pg_conn *c, type_cache *tc, const rel_row *rel, firn_pg_table **out, firn_err *err)
{
    firn_pg_table *t = firn_calloc(1, sizeof(*t));
    t->oid = rel->oid;
    t->schema_name = firn_strdup(rel->nspname);
    t->name = firn_strdup(rel->relname);
    t->qualified = quote_qualified(rel->nspname, rel->relname);
    t->relkind = rel->relkind;
    t->replica_identity = rel->replident;
    firn_rc rc = load_columns(c, tc, t, err);
    if (!rc)
        rc = load_key(c, t, err);
    if (!rc)
        rc = load_leaves(c, t, err);
    if (rc) {
        firn_err_context(err, "while discovering table %s", t->qualified);
        table_free(t);
        return rc;
    }
    build_schema(t);
    *out = t;
    return FIRN_OK;
}

/* Matches one pattern: "schema.table", "schema.*", "*", or "table" (schema public). Schema and
 * table names may hold dots themselves ("my.sch.t"): the pattern matches when it is the schema,
 * a dot and the table (or "*"), wherever the dot falls. */
static bool pattern_match(const char *pattern, const char *nsp, const char *rel, bool *explicit)
{
    *explicit = strchr(pattern, '*') == NULL;
    if (strcmp(pattern, "*") == 0)
        return true;
    if (!strchr(pattern, '.'))
        return strcmp(nsp, "public") == 0 && strcmp(pattern, rel) == 0;
    const size_t nsp_len = strlen(nsp);
    if (strncmp(pattern, nsp, nsp_len) != 0 || pattern[nsp_len] != '.')
        return false;
    const char *want_rel = pattern + nsp_len + 1;
    return strcmp(want_rel, "*") == 0 || strcmp(want_rel, rel) == 0;
}

/* What a discovery takes: patterns (firn discover, tests) or names taken literally (the
 * streams of a sync or check). */
typedef struct match_spec {
    const char *const *patterns;
    size_t n_patterns;
    const firn_pg_relname *names; /* used when named */
    size_t n_names;
    bool named;
} match_spec;

/* Decides whether a relation is a stream; counts pattern hits in hits[]. */
static bool selected(const match_spec *m, const rel_row *rel, bool is_partition, size_t *hits)
{
    if (m->named) {
        for (size_t i = 0; i < m->n_names; i++) {
            if (strcmp(m->names[i].schema, rel->nspname) == 0 &&
                strcmp(m->names[i].name, rel->relname) == 0)
                return true; /* a partition named is its own stream */
        }
        return false;
    }
    if (m->n_patterns == 0)
        return !is_partition;
    bool take = false;
    for (size_t i = 0; i < m->n_patterns; i++) {
        bool explicit = false;
        if (!pattern_match(m->patterns[i], rel->nspname, rel->relname, &explicit))
            continue;
        if (is_partition && !explicit)
            continue; /* partitions come through their root */
        hits[i]++;
        take = true;
    }
    return take;
}

static firn_rc discover_rows(
    firn_pg_conn *c, PGresult *res, const match_spec *m, firn_pg_catalog *cat, firn_err *err)
{
    type_cache tc = {0};
    size_t *hits = firn_calloc(m->n_patterns ? m->n_patterns : 1, sizeof(size_t));
    firn_rc rc = FIRN_OK;
    int rows = PQntuples(res);
    cat->tables = firn_calloc(rows ? (size_t)rows : 1, sizeof(*cat->tables));
    for (int r = 0; r < rows && !rc; r++) {
        rel_row rel = {.nspname = PQgetvalue(res, r, 1),
                       .relname = PQgetvalue(res, r, 2),
                       .relkind = PQgetvalue(res, r, 3)[0],
                       .replident = PQgetvalue(res, r, 4)[0]};
        rc = parse_u32(PQgetvalue(res, r, 0), &rel.oid, err);
        bool is_partition = PQgetvalue(res, r, 5)[0] == 't';
        if (rc || !selected(m, &rel, is_partition, hits))
            continue;
        rc = load_table(c, &tc, &rel, &cat->tables[cat->n_tables], err);
        if (!rc)
            cat->n_tables++;
    }
    for (size_t i = 0; i < m->n_patterns && !rc; i++) {
        if (hits[i] == 0 && !strchr(m->patterns[i], '*'))
            rc = firn_err_set(err, FIRN_ERR_NOT_FOUND, "table \"%s\" does not exist",
                              m->patterns[i]);
    }
    firn_free(hits);
    type_cache_free(&tc);
    return rc;
}

static firn_rc discover(firn_pg_conn *c, const match_spec *m, firn_pg_catalog **out, firn_err *err)
{
    static const char SQL[] =
        "SELECT c.oid, n.nspname, c.relname, c.relkind, c.relreplident, c.relispartition"
        " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
        " AND n.nspname !~ '^pg_toast' AND n.nspname !~ '^pg_temp_'"
        " ORDER BY n.nspname, c.relname";
    *out = NULL;
    PGresult *res = NULL;
    FIRN_TRY(firn__pg_query(c, SQL, 0, NULL, &res, err));
    firn_pg_catalog *cat = firn_calloc(1, sizeof(*cat));
    firn_rc rc = discover_rows(c, res, m, cat, err);
    PQclear(res);
    if (rc) {
        firn_pg_catalog_free(cat);
        return rc;
    }
    *out = cat;
    return FIRN_OK;
}

firn_rc firn_pg_discover(firn_pg_conn *c,
                         const char *const *patterns,
                         size_t n_patterns,
                         firn_pg_catalog **out,
                         firn_err *err)
{
    const match_spec m = {.patterns = patterns, .n_patterns = n_patterns};
    return discover(c, &m, out, err);
}

firn_rc firn_pg_discover_named(firn_pg_conn *c,
                               const firn_pg_relname *names,
                               size_t n_names,
                               firn_pg_catalog **out,
                               firn_err *err)
{
    const match_spec m = {.names = names, .n_names = n_names, .named = true};
    return discover(c, &m, out, err);
}

firn_rc firn_pg_publication_coverage(firn_pg_conn *c,
                                     const char *publication,
                                     const firn_pg_catalog *cat,
                                     bool *out_exists,
                                     bool *out_covered,
                                     firn_err *err)
{
    /* As the CDC preflight counts it (pgo_check.c read_table): the table, one of its partitions
     * (published without publish_via_partition_root) or an ancestor. */
    static const char SQL[] =
        "SELECT c.oid FROM pg_class c WHERE c.oid = ANY ($2::oid[]) AND EXISTS (SELECT 1 FROM "
        "pg_publication_tables p JOIN pg_namespace pn ON pn.nspname = p.schemaname JOIN pg_class "
        "pc ON pc.relnamespace = pn.oid AND pc.relname = p.tablename WHERE p.pubname = $1 AND "
        "(pc.oid = c.oid OR pc.oid IN (SELECT relid FROM pg_partition_tree(c.oid)) OR pc.oid IN "
        "(SELECT pg_partition_ancestors(c.oid))))";
    *out_exists = false;
    for (size_t i = 0; i < cat->n_tables; i++)
        out_covered[i] = false;
    PGresult *res = NULL;
    const char *params[2] = {publication, NULL};
    FIRN_TRY(
        firn__pg_query(c, "SELECT 1 FROM pg_publication WHERE pubname = $1", 1, params, &res, err));
    *out_exists = PQntuples(res) > 0;
    PQclear(res);
    if (!*out_exists || cat->n_tables == 0)
        return FIRN_OK;
    firn_buf oids;
    firn_buf_init(&oids, (size_t)16 * cat->n_tables + 16);
    firn_rc_ignore(firn_buf_append_cstr(&oids, "{"));
    for (size_t i = 0; i < cat->n_tables; i++)
        firn_rc_ignore(firn_buf_appendf(&oids, "%s%u", i ? "," : "", cat->tables[i]->oid));
    firn_rc_ignore(firn_buf_append_cstr(&oids, "}"));
    params[1] = (const char *)oids.data;
    firn_rc rc = firn__pg_query(c, SQL, 2, params, &res, err);
    firn_buf_deinit(&oids);
    for (int r = 0; rc == FIRN_OK && r < PQntuples(res); r++) {
        uint32_t oid = 0;
        rc = parse_u32(PQgetvalue(res, r, 0), &oid, err);
        for (size_t i = 0; rc == FIRN_OK && i < cat->n_tables; i++)
            out_covered[i] |= cat->tables[i]->oid == oid;
    }
    PQclear(res);
    return rc;
}

firn_rc
firn_pg_table_set_key(firn_pg_table *t, const char *const *names, size_t n_names, firn_err *err)
{
    size_t *keys = firn_calloc(n_names ? n_names : 1, sizeof(size_t));
    for (size_t k = 0; k < n_names; k++) {
        size_t i = 0;
        while (i < t->n_columns && strcmp(t->columns[i].name, names[k]) != 0)
            i++;
        if (i == t->n_columns) {
            firn_free(keys);
            return firn_err_set(err, FIRN_ERR_NOT_FOUND, "column \"%s\" of table %s does not exist",
                                names[k], t->qualified);
        }
        if (!identifier_type_ok(t->columns[i].type)) {
            firn_free(keys);
            return firn_err_set(err, FIRN_ERR_CONFIG,
                                "column \"%s\" of table %s has type \"%s\", which cannot be a key",
                                names[k], t->qualified, t->columns[i].type->name);
        }
        keys[k] = i;
    }
    firn_free(t->key_columns);
    t->key_columns = keys;
    t->n_key = n_names;
    for (size_t k = 0; k < n_names; k++)
        t->schema->children[keys[k]]->required = true;
    return FIRN_OK;
}

size_t firn_pg_table_identifier_ids(const firn_pg_table *t, int32_t *out, size_t out_cap)
{
    size_t n = 0;
    for (size_t k = 0; k < t->n_key && n < out_cap; k++)
        out[n++] = t->columns[t->key_columns[k]].field_id;
    return n;
}

void firn_pg_table_keep_columns(firn_pg_table *t, const bool *keep)
{
    size_t *new_index = firn_calloc(t->n_columns ? t->n_columns : 1, sizeof(size_t));
    size_t n = 0;
    for (size_t i = 0; i < t->n_columns; i++) {
        if (!keep[i]) {
            firn_free(t->columns[i].name);
            firn_pg_type_free(t->columns[i].type);
            new_index[i] = SIZE_MAX;
            continue;
        }
        new_index[i] = n;
        t->columns[n++] = t->columns[i];
    }
    FIRN_ASSERT(n > 0);
    for (size_t k = 0; k < t->n_key; k++) {
        FIRN_ASSERT(new_index[t->key_columns[k]] != SIZE_MAX);
        t->key_columns[k] = new_index[t->key_columns[k]];
    }
    t->n_columns = n;
    firn_free(new_index);
    firn_field_free(t->schema);
    build_schema(t);
}

void firn_pg_table_set_filter(firn_pg_table *t, const char *filter)
{
    firn_free(t->filter);
    t->filter = filter && filter[0] ? firn_strdup(filter) : NULL;
}

firn_rc firn_pg_leaf_place(firn_pg_conn *c,
                           uint32_t relid,
                           const uint32_t *roots,
                           size_t n_roots,
                           const char *publication,
                           firn_pg_place *out,
                           firn_err *err)
{
    /* One row: the relation now, its ancestors from the parent up, and whether the publication
     * lists it or one of them. */
    static const char SQL[] =
        "SELECT n.nspname, c.relname, c.relispartition,"
        " coalesce((SELECT array_agg(a.relid::oid ORDER BY a.ord)::text FROM"
        " pg_partition_ancestors(c.oid) WITH ORDINALITY AS a(relid, ord) WHERE a.ord > 1), '{}'),"
        " EXISTS (SELECT 1 FROM pg_publication_tables p JOIN pg_namespace pn ON pn.nspname ="
        " p.schemaname JOIN pg_class pc ON pc.relnamespace = pn.oid AND pc.relname = p.tablename"
        " WHERE p.pubname = $2 AND (pc.oid = c.oid OR pc.oid IN (SELECT"
        " pg_partition_ancestors(c.oid))))"
        " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1::oid";
    *out = (firn_pg_place){.root = SIZE_MAX};
    char oid_s[16];
    snprintf(oid_s, sizeof(oid_s), "%u", relid);
    const char *params[2] = {oid_s, publication ? publication : ""};
    PGresult *res = NULL;
    FIRN_TRY(firn__pg_query(c, SQL, 2, params, &res, err));
    firn_rc rc = FIRN_OK;
    if (PQntuples(res) == 1) {
        out->exists = true;
        out->partition = PQgetvalue(res, 0, 2)[0] == 't';
        out->published = PQgetvalue(res, 0, 4)[0] == 't';
        /* "{16385,16390}": ancestors nearest first */
        const char *p = PQgetvalue(res, 0, 3);
        while (*p && out->root == SIZE_MAX && rc == FIRN_OK) {
            while (*p == '{' || *p == ',')
                p++;
            size_t len = strspn(p, "0123456789");
            if (len == 0)
                break;
            uint64_t v = 0;
            rc = firn_parse_u64(p, len, &v, err);
            for (size_t i = 0; rc == FIRN_OK && i < n_roots; i++) {
                if (roots[i] == v) {
                    out->root = i;
                    break;
                }
            }
            p += len;
        }
        if (rc == FIRN_OK)
            out->qualified = quote_qualified(PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1));
    }
    PQclear(res);
    return rc;
}

/* The newest pg_inherits link on the way from leaf $1 up to root $2: when the leaf became part
 * of the root (links above the root do not count). */
#define NEWEST_LINK                                                                                \
    "SELECT i.xmin AS x, age(i.xmin) AS a, i.cmin::text::int8 AS c FROM pg_inherits i"             \
    " WHERE i.inhrelid IN (SELECT pg_partition_ancestors($1::oid))"                                \
    " AND i.inhrelid NOT IN (SELECT pg_partition_ancestors($2::oid))"                              \
    " ORDER BY age(i.xmin), i.cmin::text::int8 DESC LIMIT 1"

firn_rc firn_pg_leaf_preattached(firn_pg_conn *c,
                                 uint32_t leaf_oid,
                                 const char *qualified,
                                 uint32_t root_oid,
                                 bool *out,
                                 firn_err *err)
{
    *out = false;
    firn_buf sql;
    firn_buf_init(&sql, FIRN_PG_SQL_MAX);
    firn_rc rc = firn_buf_appendf(&sql,
                                  "WITH link AS (" NEWEST_LINK ") SELECT EXISTS (SELECT 1 FROM "
                                  "ONLY %s r, link WHERE age(r.xmin) > link.a OR (r.xmin = link.x "
                                  "AND r.cmin::text::int8 < link.c))",
                                  qualified);
    char leaf_s[16], root_s[16];
    snprintf(leaf_s, sizeof(leaf_s), "%u", leaf_oid);
    snprintf(root_s, sizeof(root_s), "%u", root_oid);
    const char *params[2] = {leaf_s, root_s};
    PGresult *res = NULL;
    if (rc == FIRN_OK)
        rc = firn__pg_query(c, (const char *)sql.data, 2, params, &res, err);
    if (rc == FIRN_OK)
        *out = PQntuples(res) == 1 && PQgetvalue(res, 0, 0)[0] == 't';
    PQclear(res);
    firn_buf_deinit(&sql);
    if (rc)
        firn_err_context(err, "while reading partition %s", qualified);
    return rc;
}

firn_rc firn_pg_leaf_links(firn_pg_conn *c,
                           uint32_t root_oid,
                           const char *xid,
                           firn_pg_leaf_link **out,
                           size_t *n,
                           int64_t *out_xid_age,
                           firn_err *err)
{
    static const char SQL[] =
        "SELECT t.relid::oid, n.nspname, c.relname, (SELECT min(age(i.xmin)) FROM pg_inherits i"
        " WHERE i.inhrelid IN (SELECT pg_partition_ancestors(t.relid))"
        " AND i.inhrelid NOT IN (SELECT pg_partition_ancestors($1::oid))),"
        " coalesce(age($2::xid), -1)"
        " FROM pg_partition_tree($1::oid) t JOIN pg_class c ON c.oid = t.relid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE t.isleaf AND c.relkind = 'r' AND t.relid <> $1::oid ORDER BY n.nspname, c.relname";
    *out = NULL;
    *n = 0;
    *out_xid_age = -1;
    char oid_s[16];
    snprintf(oid_s, sizeof(oid_s), "%u", root_oid);
    const char *params[2] = {oid_s, xid};
    PGresult *res = NULL;
    FIRN_TRY(firn__pg_query(c, SQL, 2, params, &res, err));
    int rows = PQntuples(res);
    firn_pg_leaf_link *links = firn_calloc(rows ? (size_t)rows : 1, sizeof(*links));
    firn_rc rc = FIRN_OK;
    for (int r = 0; r < rows && rc == FIRN_OK; r++) {
        firn_pg_leaf_link *l = &links[*n];
        rc = parse_u32(PQgetvalue(res, r, 0), &l->oid, err);
        const char *age = PQgetvalue(res, r, 3);
        if (rc == FIRN_OK && age[0])
            rc = firn_parse_i64(age, strlen(age), &l->age, err);
        if (rc == FIRN_OK && r == 0)
            rc = firn_parse_i64(PQgetvalue(res, r, 4), strlen(PQgetvalue(res, r, 4)), out_xid_age,
                                err);
        if (rc)
            break;
        l->qualified = quote_qualified(PQgetvalue(res, r, 1), PQgetvalue(res, r, 2));
        (*n)++;
    }
    PQclear(res);
    if (rc || *n == 0) {
        firn_pg_leaf_links_free(links, *n);
        *n = 0;
        return rc;
    }
    *out = links;
    return FIRN_OK;
}

void firn_pg_leaf_links_free(firn_pg_leaf_link *links, size_t n)
{
    for (size_t i = 0; links && i < n; i++)
        firn_free(links[i].qualified);
    firn_free(links);
}

void firn_pg_table_add_leaf(firn_pg_table *t, uint32_t oid, const char *qualified)
{
    for (size_t i = 0; i < t->n_leaves; i++) {
        if (t->leaves[i].oid == oid)
            return;
    }
    t->leaves = firn_reallocarray(t->leaves, t->n_leaves + 1, sizeof(*t->leaves));
    t->leaves[t->n_leaves].oid = oid;
    t->leaves[t->n_leaves].qualified = firn_strdup(qualified);
    t->n_leaves++;
}
