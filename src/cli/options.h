/* options.h: the flags of the engine commands (run, chat, serve, bench, eval), parsed by one
 * parser from tables of rows, and `--help` written from the same rows, so the help lists exactly
 * what is parsed.
 *
 * The shared flags are one table (options.c), in groups: the model (-m, --device,
 * --copy-weights), the session (-t, -c/--ctx, --prefill, --kv-type) and sampling (--temp ...).
 * A command names the groups it takes, and lists its own flags in a table of the same rows,
 * which write into a struct of its own. A new flag is one row: in options.c's table for a
 * shared one (its value a field of cli_options), or in the command's table for its own. */
#ifndef ST_CLI_OPTIONS_H
#define ST_CLI_OPTIONS_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>

#include "engine/sampler.h"
#include "engine/spec.h"
#include "strata.h"

/* What the shared flags set. cli_options_default gives every default. */
typedef struct cli_options {
    const char *model;            /* -m; NULL until the demo model is found (cli_load_model) */
    char model_found[PATH_MAX];   /* the demo model's path, when that is the one */
    int device;                   /* --device: ST_DEVICE_AUTO, _CPU, _CUDA */
    int copy_weights;             /* --copy-weights 1, --no-copy-weights 0, -1 automatic */
    float gpu_mem;                /* --gpu-mem GiB, 0: all of the GPU */
    st_session_params session;    /* -t, --ctx, --prefill, --kv-type */
    st_sampler_params sampling;   /* --temp, --top-k, --top-p, --min-p, --seed, --repeat-penalty */
    st_spec_params spec;          /* --spec, --spec-draft, --spec-p-min */
} cli_options;

void cli_options_default(cli_options *o);

/* The groups of shared flags a command takes. */
enum {
    CLI_MODEL = 1 << 0,     /* -m, --device, --gpu-mem, --copy-weights, --no-copy-weights */
    CLI_SESSION = 1 << 1,   /* -t, -c/--ctx, --prefill, --kv-type, --kv-f32 */
    CLI_SAMPLING = 1 << 2,  /* --temp, --top-k, --top-p, --min-p, --seed, --repeat-penalty */
    CLI_SPEC = 1 << 3,      /* --spec, --spec-draft, --spec-p-min (engine/spec.h) */
};

typedef enum cli_kind {
    CLI_INT,      /* int in [lo, hi] */
    CLI_INT64,    /* int64_t in [lo, hi] */
    CLI_UINT64,   /* uint64_t */
    CLI_FLOAT,    /* float in [lo, hi] */
    CLI_STRING,   /* const char *, the argument itself */
    CLI_SWITCH,   /* no argument: the int is set to lo */
    CLI_CHOICE,   /* one of `choices` ("f16|f32"): the int is set to values[i], or i without values */
} cli_kind;

/* One flag. The value lives at `offset` in cli_options (shared rows) or in the command's own
 * struct (the command's rows). */
typedef struct cli_flag {
    const char *name;       /* "--ctx" */
    const char *alias;      /* "-c", or NULL */
    const char *arg;        /* the argument's name in the help ("N"); NULL for a switch */
    cli_kind kind;
    size_t offset;
    double lo, hi;
    const char *choices;    /* CLI_CHOICE */
    const int *values;      /* CLI_CHOICE: the value of each choice; NULL: its index */
    const char *help;       /* may hold '\n' for more lines */
    unsigned group;         /* shared rows: their group; 0 for a command's own */
} cli_flag;

typedef struct cli_command {
    const char *name;       /* "run" */
    const char *synopsis;   /* after "usage: strata run " */
    const char *about;      /* what it does, lines of the help ('\n' between them) */
    unsigned groups;        /* the shared flags it takes */
    const cli_flag *flags;  /* its own, NULL-named row last (or n_flags rows) */
    size_t n_flags;
} cli_command;

/* Parses argv[1..argc) into o (shared flags) and own (the command's flags). Returns -1 when the
 * command should go on; otherwise the exit status: 0 after printing the help for -h/--help, 2
 * after saying on stderr what is wrong with an option (unknown, missing its argument, not a
 * number, out of range, not one of the choices). */
int cli_parse(const cli_command *cmd, int argc, char **argv, cli_options *o, void *own);

/* The help: usage, the command's about, its own flags, then each group it takes. */
void cli_usage(const cli_command *cmd, FILE *f);

#endif
