/* SPDX-License-Identifier: Apache-2.0 */
/* Allocation accounting and memory budgets. */
#include "firn/util.h"
#include "t.h"

T_TEST(accounting_follows_allocations)
{
    size_t base = firn_mem_used();
    char *p = firn_malloc(1000);
    T_TRUE(firn_mem_used() >= base + 1000);
    p = firn_realloc(p, 100000);
    T_TRUE(firn_mem_used() >= base + 100000);
    T_TRUE(firn_mem_peak() >= base + 100000);
    firn_free(p);
    T_EQ_UINT(firn_mem_used(), base);
    int *z = firn_calloc(10, sizeof(int));
    for (int i = 0; i < 10; i++)
        T_EQ_INT(z[i], 0);
    firn_free(z);
    char *s = firn_strndup("hello world", 5);
    T_EQ_STR(s, "hello");
    firn_free(s);
    T_EQ_UINT(firn_mem_used(), base);
    firn_free(NULL);
}

T_TEST(budget_limits)
{
    firn_budget b;
    firn_budget_init(&b, "batch", 1000);
    firn_err err = {0};
    T_OK(firn_budget_reserve(&b, 600, &err));
    T_EQ_INT(firn_budget_reserve(&b, 500, &err), FIRN_ERR_TOO_LARGE);
    T_EQ_STR(err.msg,
             "memory budget \"batch\" exceeded: 600 bytes in use, 500 requested, limit 1000");
    T_OK(firn_budget_reserve(&b, 400, &err));
    firn_budget_release(&b, 1000);
    T_OK(firn_budget_reserve(&b, 1000, &err));
    firn_budget unlimited;
    firn_budget_init(&unlimited, "any", 0);
    T_OK(firn_budget_reserve(&unlimited, SIZE_MAX / 2, &err));
}

T_TEST(overflowing_calloc_aborts)
{
    pid_t pid = fork();
    if (pid == 0) {
        (void)firn_calloc(SIZE_MAX / 2, 4);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    T_TRUE(WIFSIGNALED(status));
}

T_MAIN(T_CASE(accounting_follows_allocations),
       T_CASE(budget_limits),
       T_CASE(overflowing_calloc_aborts))
