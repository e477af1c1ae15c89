/* SPDX-License-Identifier: Apache-2.0 */
/* firn_process_stats_get against what the test process does: memory it touches, descriptors it
 * opens and closes, CPU it burns (by its own CPU clock), and a start time before now. */
#include "firn/util.h"
#include "t.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

T_TEST(process_fds_follow_open_and_close)
{
    firn_process_stats a, b, c;
    firn_process_stats_get(&a);
    T_TRUE(a.open_fds >= 3); /* stdin, stdout, stderr */
    T_TRUE(a.max_fds == -1 || a.max_fds >= a.open_fds);
    int fds[5];
    for (int i = 0; i < 5; i++)
        fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    firn_process_stats_get(&b);
    for (int i = 0; i < 5; i++)
        close(fds[i]);
    firn_process_stats_get(&c);
    T_EQ_INT(b.open_fds, a.open_fds + 5);
    T_EQ_INT(c.open_fds, a.open_fds);
}

T_TEST(process_memory_grows_with_touched_pages)
{
    firn_process_stats a, b;
    firn_process_stats_get(&a);
    T_TRUE(a.resident_bytes > 0 && a.virtual_bytes >= a.resident_bytes);
    const size_t n = (size_t)64 << 20;
    char *p = firn_malloc(n);
    memset(p, 1, n);
    firn_process_stats_get(&b);
    T_TRUE(b.resident_bytes >= a.resident_bytes + (int64_t)(n / 2));
    firn_free(p);
}

T_TEST(process_cpu_and_start_time)
{
    firn_process_stats a, b;
    firn_process_stats_get(&a);
    /* 30 ms of this process's CPU by the kernel's own clock for it, however busy the machine. */
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    volatile uint64_t x = 0;
    do {
        for (int i = 0; i < 100000; i++)
            x += (uint64_t)i;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    } while ((c1.tv_sec - c0.tv_sec) * 1000000000LL + (c1.tv_nsec - c0.tv_nsec) < 30000000LL);
    firn_process_stats_get(&b);
    T_TRUE(a.cpu_seconds >= 0 && b.cpu_seconds >= a.cpu_seconds + 0.025);
    const double now = (double)firn_now_us() / 1e6;
    T_TRUE(b.start_time_secs > now - 3600 && b.start_time_secs <= now + 1);
}

T_MAIN(T_CASE(process_fds_follow_open_and_close),
       T_CASE(process_memory_grows_with_touched_pages),
       T_CASE(process_cpu_and_start_time))
