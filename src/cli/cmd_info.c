/* cmd_info.c: `strata info FILE`. */
#include <stdio.h>
#include "cli/cli.h"

int cmd_info(int argc, char **argv) {
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(argc == 2 ? stdout : stderr, "usage: strata info FILE.gguf\n");
        return argc == 2 ? 0 : 2;
    }
    fprintf(stderr, "strata: info: not implemented yet\n");
    return 1;
}
