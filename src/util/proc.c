/* SPDX-License-Identifier: Apache-2.0 */
/* The process figures of Prometheus' standard process_* metrics, read from Linux /proc and
 * getrusage/getrlimit (what the Go and Python clients read). */
#include "firn/util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Reads up to cap - 1 bytes of path into buf (NUL-terminated); false when it cannot. */
static bool read_small(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n > 0;
}

/* The n-th (0-based) space-separated field of s, as a number; -1 when missing. */
static long long field_of(const char *s, int n)
{
    for (int i = 0; i < n && s; i++) {
        s = strchr(s, ' ');
        if (s)
            s++;
    }
    if (!s || *s < '0' || *s > '9')
        return -1;
    return strtoll(s, NULL, 10);
}

static void memory_of(firn_process_stats *out)
{
    char buf[256];
    const long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || !read_small("/proc/self/statm", buf, sizeof(buf)))
        return;
    long long size = field_of(buf, 0), resident = field_of(buf, 1);
    out->virtual_bytes = size >= 0 ? size * page : -1;
    out->resident_bytes = resident >= 0 ? resident * page : -1;
}

static void fds_of(firn_process_stats *out)
{
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        int64_t n = 0;
        for (struct dirent *de = readdir(d); de; de = readdir(d))
            n += de->d_name[0] != '.';
        closedir(d);
        out->open_fds = n > 0 ? n - 1 : 0; /* not the folder's own descriptor */
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        out->max_fds = (int64_t)rl.rlim_cur;
}

/* Field 22 of /proc/self/stat (clock ticks after boot) plus /proc/stat's btime. */
static void start_of(firn_process_stats *out)
{
    char stat[1024], all[8192];
    const long hz = sysconf(_SC_CLK_TCK);
    if (hz <= 0 || !read_small("/proc/self/stat", stat, sizeof(stat)) ||
        !read_small("/proc/stat", all, sizeof(all)))
        return;
    const char *paren = strrchr(stat, ')'); /* the command name may hold spaces */
    const char *bt = strstr(all, "\nbtime ");
    if (!paren || paren[1] != ' ' || !bt)
        return;
    long long ticks = field_of(paren + 2, 19); /* field 3 is the state */
    long long boot = field_of(bt + 1, 1);
    if (ticks >= 0 && boot >= 0)
        out->start_time_secs = (double)boot + (double)ticks / (double)hz;
}

void firn_process_stats_get(firn_process_stats *out)
{
    out->cpu_seconds = -1;
    out->resident_bytes = out->virtual_bytes = out->open_fds = out->max_fds = -1;
    out->start_time_secs = -1;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        out->cpu_seconds = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    memory_of(out);
    fds_of(out);
    start_of(out);
}
