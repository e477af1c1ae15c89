/* SPDX-License-Identifier: Apache-2.0 */
/* A small test harness after libuv test/task.h: a table of T_TEST functions per file, typed
 * asserts that print both sides, T_SKIP, and a closing "N passed, N failed" line. Each test runs
 * in its own process (fork) so a crash costs one test. */
#ifndef FIRN_T_H
#define FIRN_T_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define T_EXIT_SKIP 77

typedef void (*t_fn)(void);
typedef struct t_case {
    const char *name;
    t_fn fn;
} t_case;

#define T_TEST(name) static void name(void)

#define T_FAIL_AT(file, line, ...)                                                                 \
    do {                                                                                           \
        fprintf(stderr, "  %s:%d: ", file, line);                                                  \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        exit(1);                                                                                   \
    } while (0)
#define T_FAIL(...) T_FAIL_AT(__FILE__, __LINE__, __VA_ARGS__)

#define T_TRUE(c)                                                                                  \
    do {                                                                                           \
        if (!(c))                                                                                  \
            T_FAIL("expected true: %s", #c);                                                       \
    } while (0)
#define T_FALSE(c) T_TRUE(!(c))

#define T_EQ_INT(a, b)                                                                             \
    do {                                                                                           \
        long long t_a_ = (long long)(a), t_b_ = (long long)(b);                                    \
        if (t_a_ != t_b_)                                                                          \
            T_FAIL("%s == %s: %lld != %lld", #a, #b, t_a_, t_b_);                                  \
    } while (0)
#define T_EQ_UINT(a, b)                                                                            \
    do {                                                                                           \
        unsigned long long t_a_ = (unsigned long long)(a), t_b_ = (unsigned long long)(b);         \
        if (t_a_ != t_b_)                                                                          \
            T_FAIL("%s == %s: %llu != %llu", #a, #b, t_a_, t_b_);                                  \
    } while (0)
#define T_EQ_DBL(a, b)                                                                             \
    do {                                                                                           \
        double t_a_ = (a), t_b_ = (b);                                                             \
        if (!(t_a_ == t_b_))                                                                       \
            T_FAIL("%s == %s: %.17g != %.17g", #a, #b, t_a_, t_b_);                                \
    } while (0)
#define T_EQ_STR(a, b)                                                                             \
    do {                                                                                           \
        const char *t_a_ = (a), *t_b_ = (b);                                                       \
        if (!t_a_ || !t_b_ || strcmp(t_a_, t_b_) != 0)                                             \
            T_FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b, t_a_ ? t_a_ : "(null)",                   \
                   t_b_ ? t_b_ : "(null)");                                                        \
    } while (0)
#define T_EQ_MEM(a, b, n)                                                                          \
    do {                                                                                           \
        const unsigned char *t_a_ = (const unsigned char *)(a);                                    \
        const unsigned char *t_b_ = (const unsigned char *)(b);                                    \
        size_t t_n_ = (n);                                                                         \
        for (size_t t_i_ = 0; t_i_ < t_n_; t_i_++) {                                               \
            if (t_a_[t_i_] != t_b_[t_i_])                                                          \
                T_FAIL("%s == %s: differ at byte %zu (0x%02x != 0x%02x)", #a, #b, t_i_,            \
                       t_a_[t_i_], t_b_[t_i_]);                                                    \
        }                                                                                          \
    } while (0)
/* Asserts a firn_rc-returning expression succeeds; prints the code and, when given, err. */
#define T_OK(expr)                                                                                 \
    do {                                                                                           \
        int t_rc_ = (int)(expr);                                                                   \
        if (t_rc_ != 0)                                                                            \
            T_FAIL("%s failed with code %d", #expr, t_rc_);                                        \
    } while (0)
#define T_OK_ERR(expr, errp)                                                                       \
    do {                                                                                           \
        int t_rc_ = (int)(expr);                                                                   \
        if (t_rc_ != 0)                                                                            \
            T_FAIL("%s failed with code %d: %s", #expr, t_rc_, (errp)->msg);                       \
    } while (0)
#define T_SKIP(...)                                                                                \
    do {                                                                                           \
        fprintf(stderr, "  skipped: ");                                                            \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        exit(T_EXIT_SKIP);                                                                         \
    } while (0)

/* Runs every case of the table in a child process; prints one line per test and the totals.
 * With an argument, runs only the case of that name. Exit 0 when none failed. */
static inline int t_run(const t_case *cases, size_t n, int argc, char **argv)
{
    int passed = 0, failed = 0, skipped = 0;
    for (size_t i = 0; i < n; i++) {
        if (argc > 1 && strcmp(argv[1], cases[i].name) != 0)
            continue;
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
            cases[i].fn();
            exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            printf("ok   %s\n", cases[i].name);
            passed++;
        } else if (WIFEXITED(status) && WEXITSTATUS(status) == T_EXIT_SKIP) {
            printf("skip %s\n", cases[i].name);
            skipped++;
        } else {
            if (WIFSIGNALED(status))
                printf("FAIL %s (signal %d)\n", cases[i].name, WTERMSIG(status));
            else
                printf("FAIL %s (exit %d)\n", cases[i].name, WEXITSTATUS(status));
            failed++;
        }
    }
    printf("%d passed, %d failed", passed, failed);
    if (skipped)
        printf(", %d skipped", skipped);
    printf("\n");
    if (passed + failed == 0)
        return skipped ? T_EXIT_SKIP : 1;
    return failed ? 1 : 0;
}

#define T_CASE(name)                                                                               \
    {                                                                                              \
#name, name                                                                                \
    }
#define T_MAIN(...)                                                                                \
    int main(int argc, char **argv)                                                                \
    {                                                                                              \
        static const t_case t_cases_[] = {__VA_ARGS__};                                            \
        return t_run(t_cases_, sizeof(t_cases_) / sizeof(t_cases_[0]), argc, argv);                \
    }

#endif
