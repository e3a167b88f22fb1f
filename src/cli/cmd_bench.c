/* cmd_bench.c: `strata bench` (being written). */
#include <stdio.h>
#include "cli/cli.h"
int cmd_bench(int argc, char **argv) { fprintf(stderr, "strata: bench: not implemented yet\n"); return 1; }
