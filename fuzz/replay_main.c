/* SPDX-License-Identifier: Apache-2.0 */
/* Replay driver for fuzz targets without libFuzzer (zstd tests/fuzz/regression_driver.c): runs
 * every file named on the command line, or every file in a named directory, through
 * LLVMFuzzerTestOneInput once. Exit 0 when all ran; a crash or sanitizer report fails. */
#include "firn/util.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 1;
    }
    static uint8_t buf[1 << 22];
    size_t n = fread(buf, 1, sizeof(buf), fp);
    fclose(fp);
    /* a private copy of exactly n bytes, so ASan sees reads past the input */
    uint8_t *copy = firn_memdup(buf, n);
    LLVMFuzzerTestOneInput(copy, n);
    firn_free(copy);
    return 0;
}

int main(int argc, char **argv)
{
    int failed = 0, ran = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: cannot stat %s\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            failed |= run_file(argv[i]);
            ran++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
            failed |= run_file(path);
            ran++;
        }
        if (d)
            closedir(d);
    }
    printf("replay: %d inputs\n", ran);
    return failed || ran == 0;
}
