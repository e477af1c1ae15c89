/* SPDX-License-Identifier: Apache-2.0 */
/* The firn command line: dispatches to one handler per command. */
#include "firn/util.h"

#include <stdio.h>
#include <string.h>

static void print_usage(FILE *out)
{
    fprintf(out, "usage: firn <command> [options]\n"
                 "\n"
                 "commands:\n"
                 "  version    print the version and build\n"
                 "  help       show this help\n"
                 "\n"
                 "exit codes: 0 success, 1 error, 2 usage error\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        print_usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("firn version %s (build %s)\n", FIRN_VERSION, FIRN_BUILD_ID);
        return 0;
    }
    fprintf(stderr, "firn: unknown command \"%s\"; run \"firn help\" for the list\n", cmd);
    return 2;
}
