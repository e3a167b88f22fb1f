/* cmd_chat.c: `strata chat` (being written). */
#include <stdio.h>
#include "cli/cli.h"
int cmd_chat(int argc, char **argv) { fprintf(stderr, "strata: chat: not implemented yet\n"); return 1; }
