/* SPDX-License-Identifier: Apache-2.0 */
/* Schema evolution rules: new optional columns get last-column-id + 1, allowed promotions,
 * dropped columns kept, required -> optional, and clear errors for incompatible changes. */
#include "firn/iceberg.h"
#include "t.h"

#include <string.h>

static firn_schema *base_schema(void)
{
    firn_field *root = firn_field_new(0, "", FIRN_TYPE_STRUCT, true);
    firn_field_add(root, firn_field_new(1, "id", FIRN_TYPE_INT, true));
    firn_field_add(root, firn_field_new(2, "score", FIRN_TYPE_FLOAT, true));
    firn_field_add(root, firn_field_new_decimal(3, "amount", 10, 2, false));
    firn_field_add(root, firn_field_new(4, "gone", FIRN_TYPE_STRING, false));
    firn_field *l = firn_field_new(5, "tags", FIRN_TYPE_LIST, false);
    firn_field_add(l, firn_field_new(6, "element", FIRN_TYPE_INT, true));
    firn_field_add(root, l);
    return firn_schema_new(0, root);
}

static firn_field *target_schema(void)
{
    firn_field *root = firn_field_new(0, "", FIRN_TYPE_STRUCT, true);
    firn_field_add(root, firn_field_new(0, "id", FIRN_TYPE_LONG, true));
    firn_field_add(root, firn_field_new(0, "score", FIRN_TYPE_DOUBLE, false));
    firn_field_add(root, firn_field_new_decimal(0, "amount", 20, 2, false));
    firn_field *l = firn_field_new(0, "tags", FIRN_TYPE_LIST, false);
    firn_field_add(l, firn_field_new(0, "element", FIRN_TYPE_LONG, false));
    firn_field_add(root, l);
    firn_field *m = firn_field_new(0, "labels", FIRN_TYPE_MAP, true);
    firn_field_add(m, firn_field_new(0, "key", FIRN_TYPE_STRING, true));
    firn_field_add(m, firn_field_new(0, "value", FIRN_TYPE_STRING, false));
    firn_field_add(root, m);
    firn_field_add(root, firn_field_new(0, "note", FIRN_TYPE_STRING, false));
    return root;
}

T_TEST(evolve_to_target)
{
    firn_err err = {0};
    firn_schema *base = base_schema(), *out = NULL;
    firn_field *target = target_schema();
    int32_t last = 6;
    bool changed = false;
    T_OK_ERR(firn_schema_evolve(base, target, &last, &out, &changed, &err), &err);
    T_TRUE(changed);
    T_EQ_INT(out->schema_id, 1);
    T_EQ_INT(firn_schema_find_name(out, "id")->type, FIRN_TYPE_LONG);
    T_TRUE(firn_schema_find_name(out, "id")->required);
    T_EQ_INT(firn_schema_find_name(out, "score")->type, FIRN_TYPE_DOUBLE);
    T_FALSE(firn_schema_find_name(out, "score")->required);
    T_EQ_INT(firn_schema_find_name(out, "amount")->precision, 20);
    T_EQ_INT(firn_schema_find_name(out, "gone")->id, 4); /* kept */
    const firn_field *tags = firn_schema_find_name(out, "tags");
    T_EQ_INT(tags->children[0]->type, FIRN_TYPE_LONG);
    T_EQ_INT(tags->children[0]->id, 6);
    T_FALSE(tags->children[0]->required);
    const firn_field *labels = firn_schema_find_name(out, "labels");
    T_EQ_INT(labels->id, 7);
    T_FALSE(labels->required); /* added columns are optional */
    T_EQ_INT(labels->children[0]->id, 8);
    T_EQ_INT(labels->children[1]->id, 9);
    T_EQ_INT(firn_schema_find_name(out, "note")->id, 10);
    T_EQ_INT(last, 10);

    /* evolving again to the same target changes nothing */
    firn_schema *again = NULL;
    T_OK_ERR(firn_schema_evolve(out, target, &last, &again, &changed, &err), &err);
    T_FALSE(changed);
    T_EQ_INT(last, 10);
    firn_schema_free(again);
    firn_schema_free(out);
    firn_field_free(target);
    firn_schema_free(base);
}

static firn_rc evolve_one(firn_field *changed_field, firn_err *err)
{
    firn_schema *base = base_schema(), *out = NULL;
    firn_field *root = firn_field_new(0, "", FIRN_TYPE_STRUCT, true);
    firn_field_add(root, changed_field);
    int32_t last = 6;
    bool changed;
    firn_rc rc = firn_schema_evolve(base, root, &last, &out, &changed, err);
    firn_schema_free(out);
    firn_schema_free(base);
    firn_field_free(root);
    return rc;
}

T_TEST(incompatible_changes)
{
    firn_err err = {0};
    T_EQ_INT(evolve_one(firn_field_new(0, "id", FIRN_TYPE_STRING, true), &err), FIRN_ERR_SCHEMA);
    T_TRUE(strstr(err.msg, "\"id\" from int to string") != NULL);
    T_EQ_INT(evolve_one(firn_field_new(0, "score", FIRN_TYPE_INT, true), &err), FIRN_ERR_SCHEMA);
    T_EQ_INT(evolve_one(firn_field_new_decimal(0, "amount", 12, 3, false), &err), FIRN_ERR_SCHEMA);
    T_TRUE(strstr(err.msg, "decimal(10, 2) to decimal(12, 3)") != NULL);
    T_EQ_INT(evolve_one(firn_field_new_decimal(0, "amount", 9, 2, false), &err), FIRN_ERR_SCHEMA);
    T_EQ_INT(evolve_one(firn_field_new(0, "gone", FIRN_TYPE_LONG, false), &err), FIRN_ERR_SCHEMA);
    firn_field *l = firn_field_new(0, "tags", FIRN_TYPE_LIST, false);
    firn_field_add(l, firn_field_new(0, "element", FIRN_TYPE_STRING, false));
    T_EQ_INT(evolve_one(l, &err), FIRN_ERR_SCHEMA);
    T_TRUE(strstr(err.msg, "tags") != NULL);
    T_EQ_INT(evolve_one(firn_field_new(0, "tags", FIRN_TYPE_STRING, false), &err), FIRN_ERR_SCHEMA);
    /* an identifier column turned optional breaks the identifier rules */
    firn_schema *base = base_schema(), *out = NULL;
    int32_t ident = 1, last = 6;
    firn_schema_set_identifier_ids(base, &ident, 1);
    firn_field *root = firn_field_new(0, "", FIRN_TYPE_STRUCT, true);
    firn_field_add(root, firn_field_new(0, "id", FIRN_TYPE_INT, false));
    bool changed;
    T_EQ_INT(firn_schema_evolve(base, root, &last, &out, &changed, &err), FIRN_ERR_SCHEMA);
    firn_field_free(root);
    firn_schema_free(base);
}

T_TEST(add_and_promote_helpers)
{
    firn_err err = {0};
    firn_schema *base = base_schema(), *out = NULL;
    int32_t last = 6;
    firn_field *req = firn_field_new(0, "x", FIRN_TYPE_INT, true);
    T_EQ_INT(firn_schema_add_column(base, req, &last, &out, &err), FIRN_ERR_SCHEMA);
    T_TRUE(strstr(err.msg, "required") != NULL);
    firn_field_free(req);
    firn_field *dup = firn_field_new(0, "id", FIRN_TYPE_INT, false);
    T_EQ_INT(firn_schema_add_column(base, dup, &last, &out, &err), FIRN_ERR_SCHEMA);
    firn_field_free(dup);
    T_EQ_INT(last, 6);
    firn_field *lng = firn_field_new(0, "x", FIRN_TYPE_LONG, false);
    T_OK_ERR(firn_schema_promote(base, 1, lng, &out, &err), &err);
    T_EQ_INT(firn_schema_find_id(out, 1)->type, FIRN_TYPE_LONG);
    firn_schema_free(out);
    T_EQ_INT(firn_schema_promote(base, 3, lng, &out, &err), FIRN_ERR_SCHEMA);
    T_EQ_INT(firn_schema_promote(base, 77, lng, &out, &err), FIRN_ERR_NOT_FOUND);
    firn_field_free(lng);
    firn_schema_free(base);
}

/* A required column the target no longer has is kept as optional (nulls from then on), except
 * an identifier field; evolving again changes nothing. */
T_TEST(dropped_required_becomes_optional)
{
    firn_err err = {0};
    firn_schema *base = base_schema(), *out = NULL, *again = NULL;
    int32_t ident = 1, last = 6;
    firn_schema_set_identifier_ids(base, &ident, 1);
    firn_field *root = firn_field_new(0, "", FIRN_TYPE_STRUCT, true);
    firn_field_add(root, firn_field_new_decimal(0, "amount", 10, 2, false));
    bool changed = false;
    T_OK_ERR(firn_schema_evolve(base, root, &last, &out, &changed, &err), &err);
    T_TRUE(changed);
    T_TRUE(firn_schema_find_name(out, "id")->required);     /* identifier: stays */
    T_FALSE(firn_schema_find_name(out, "score")->required); /* dropped: optional */
    T_EQ_INT(firn_schema_find_name(out, "score")->id, 2);
    T_EQ_INT(firn_schema_find_name(out, "tags")->children[0]->id, 6);
    T_OK_ERR(firn_schema_evolve(out, root, &last, &again, &changed, &err), &err);
    T_FALSE(changed);
    firn_schema_free(again);
    firn_schema_free(out);
    firn_field_free(root);
    firn_schema_free(base);
}

T_MAIN(T_CASE(evolve_to_target),
       T_CASE(incompatible_changes),
       T_CASE(add_and_promote_helpers),
       T_CASE(dropped_required_becomes_optional))
