/* cli.h: the `strata` command's subcommands. Each lives in its own cmd_*.c file and is listed
 * once in main.c's table. A subcommand returns the process exit status. */
#ifndef ST_CLI_H
#define ST_CLI_H

int cmd_info(int argc, char **argv);
int cmd_serve(int argc, char **argv);

/* Prints "strata: <msg>" from st_last_error() to stderr and returns 1. */
int cli_fail(const char *what);

#endif
