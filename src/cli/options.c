/* options.c: the shared flags' table and the one parser of the engine commands (options.h).
 * Each row is a flag: its names, its argument, where its value goes, its range and its help
 * line; cli_parse reads the rows, cli_usage prints them. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"

#define OPT(field) offsetof(cli_options, field)

static const int device_values[] = {ST_DEVICE_CPU, ST_DEVICE_CUDA, ST_DEVICE_AUTO};
static const int spec_values[] = {ST_SPEC_MTP, ST_SPEC_NGRAM, ST_SPEC_NONE, ST_SPEC_AUTO};

static const cli_flag shared_flags[] = {
    {"--model", "-m", "MODEL", CLI_STRING, OPT(model), 0, 0, NULL, NULL,
     "a GGUF file (default: the demo model, models/strata-demo-q8_0.gguf)", CLI_MODEL},
    {"--device", NULL, "D", CLI_CHOICE, OPT(device), 0, 0, "cpu|cuda|auto", device_values,
     "cpu, cuda or auto (default auto: cuda when this build has it and a GPU\n"
     "is present, else cpu)", CLI_MODEL},
    {"--gpu-mem", NULL, "GiB", CLI_FLOAT, OPT(gpu_mem), 0, 1e6, NULL, NULL,
     "on a GPU, the device memory in use may reach GiB (default: all of it\n"
     "less 1 GiB); the routed experts that do not fit stay in host memory,\n"
     "read over the bus (the plan is printed at load)", CLI_MODEL},
    {"--copy-weights", NULL, NULL, CLI_SWITCH, OPT(copy_weights), 1, 0, NULL, NULL,
     "copy the weights out of the file mapping into RAM (about twice the\n"
     "decode speed per core); default: copy when the model takes at most\n"
     "half of the available memory", CLI_MODEL},
    {"--no-copy-weights", NULL, NULL, CLI_SWITCH, OPT(copy_weights), 0, 0, NULL, NULL,
     "read the weights in place from the file mapping", CLI_MODEL},

    {"--threads", "-t", "N", CLI_INT, OPT(session.n_threads), 0, 4096, NULL, NULL,
     "threads (default: one per core)", CLI_SESSION},
    {"--ctx", "-c", "N", CLI_INT64, OPT(session.n_ctx), 0, 1 << 30, NULL, NULL,
     "context size in tokens (default: the model's context_length, lowered\n"
     "to what the memory free holds, saying so on stderr)", CLI_SESSION},
    {"--prefill", NULL, "N", CLI_INT, OPT(session.n_prefill), 1, 1 << 20, NULL, NULL,
     "rows per prompt chunk (default 512)", CLI_SESSION},
    {"--kv-type", NULL, "T", CLI_CHOICE, OPT(session.kv_f32), 0, 0, "f16|f32", NULL,
     "the KV cache's type (default f16)", CLI_SESSION},
    {"--kv-f32", NULL, NULL, CLI_SWITCH, OPT(session.kv_f32), 1, 0, NULL, NULL, "the same as --kv-type f32", CLI_SESSION},

    {"--temp", NULL, "T", CLI_FLOAT, OPT(sampling.temperature), 0, 1e6, NULL, NULL,
     "temperature (default 0.8; 0 = greedy)", CLI_SAMPLING},
    {"--top-k", NULL, "K", CLI_INT, OPT(sampling.top_k), 0, INT32_MAX, NULL, NULL,
     "keep the K most likely tokens (default 40; 0 = off)", CLI_SAMPLING},
    {"--top-p", NULL, "P", CLI_FLOAT, OPT(sampling.top_p), 0, 1, NULL, NULL,
     "nucleus sampling (default 0.95; 1 = off)", CLI_SAMPLING},
    {"--min-p", NULL, "P", CLI_FLOAT, OPT(sampling.min_p), 0, 1, NULL, NULL,
     "drop tokens below P x the best probability (default 0.05; 0 = off)", CLI_SAMPLING},
    {"--seed", NULL, "S", CLI_UINT64, OPT(sampling.seed), 0, 0, NULL, NULL,
     "random seed (default 0): the same seed gives the same text", CLI_SAMPLING},
    {"--repeat-penalty", NULL, "R", CLI_FLOAT, OPT(sampling.repeat_penalty), 0, 1e6, NULL, NULL,
     "penalise the last 64 tokens (default 1 = off)", CLI_SAMPLING},

    {"--spec", NULL, "S", CLI_CHOICE, OPT(spec.mode), 0, 0, "mtp|ngram|none|auto", spec_values,
     "draft tokens ahead and check them in one forward: mtp (the model's MTP\n"
     "head), ngram (prompt lookup) or none; default auto: mtp when the file\n"
     "has a head and the model runs on the CPU, else none. The text is the\n"
     "same token for token either way", CLI_SPEC},
    {"--spec-draft", NULL, "N", CLI_INT, OPT(spec.n_draft), 1, ST_SPEC_MAX_DRAFT, NULL, NULL,
     "tokens drafted per trunk forward at most (default 3 for mtp, 8 for ngram)", CLI_SPEC},
    {"--spec-p-min", NULL, "P", CLI_FLOAT, OPT(spec.p_min), 0, 1, NULL, NULL,
     "mtp: end a draft at a token the head gives less than P (default 0)", CLI_SPEC},
};
#define N_SHARED (sizeof shared_flags / sizeof shared_flags[0])

static const struct {
    unsigned group;
    const char *title;
} group_titles[] = {{CLI_MODEL, "model"}, {CLI_SESSION, "session"}, {CLI_SAMPLING, "sampling"},
                    {CLI_SPEC, "speculative decoding"}};

void cli_options_default(cli_options *o) {
    memset(o, 0, sizeof *o);
    o->device = ST_DEVICE_AUTO;
    o->copy_weights = -1;
    o->session = st_session_default_params();
    o->sampling = st_sampler_default_params();
    o->spec = st_spec_default_params();
}

/* "-c, --ctx N" */
static int flag_label(const cli_flag *f, char *buf, size_t size) {
    return snprintf(buf, size, "%s%s%s%s%s", f->alias ? f->alias : "", f->alias ? ", " : "", f->name, f->arg ? " " : "",
                    f->arg ? f->arg : "");
}

static void print_flag(FILE *out, const cli_flag *f) {
    char label[64];
    flag_label(f, label, sizeof label);
    fprintf(out, "  %-22s", label);
    if (strlen(label) > 22) fprintf(out, "\n  %-22s", "");
    for (const char *p = f->help; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        fprintf(out, " %.*s\n", (int)len, p);
        if (!nl) break;
        p = nl + 1;
        fprintf(out, "  %-22s", "");
    }
}

static size_t n_own(const cli_command *cmd) {
    if (cmd->n_flags) return cmd->n_flags;
    size_t n = 0;
    while (cmd->flags && cmd->flags[n].name) n++;
    return n;
}

void cli_usage(const cli_command *cmd, FILE *out) {
    fprintf(out, "usage: strata %s %s\n", cmd->name, cmd->synopsis);
    for (const char *p = cmd->about; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        fprintf(out, "  %.*s\n", (int)len, p);
        if (!nl) break;
        p = nl + 1;
    }
    size_t n = n_own(cmd);
    if (n) fprintf(out, "options:\n");
    for (size_t i = 0; i < n; i++) print_flag(out, &cmd->flags[i]);
    for (size_t g = 0; g < sizeof group_titles / sizeof group_titles[0]; g++) {
        if (!(cmd->groups & group_titles[g].group)) continue;
        fprintf(out, "%s:\n", group_titles[g].title);
        for (size_t i = 0; i < N_SHARED; i++)
            if (shared_flags[i].group == group_titles[g].group) print_flag(out, &shared_flags[i]);
    }
    fprintf(out, "  %-22s this help\n", "-h, --help");
}

static int is_flag(const cli_flag *f, const char *a) { return !strcmp(a, f->name) || (f->alias && !strcmp(a, f->alias)); }

static int bad_value(const cli_command *cmd, const cli_flag *f, const char *v, const char *why) {
    fprintf(stderr, "strata %s: %s '%s': %s\n", cmd->name, f->name, v, why);
    return 2;
}

/* Stores v into the row's field; 0, or the exit status after saying what is wrong. */
static int set_value(const cli_command *cmd, const cli_flag *f, const char *v, char *base) {
    void *dst = base + f->offset;
    char *end = NULL, range[96];
    snprintf(range, sizeof range, "expected a number from %.10g to %.10g", f->lo, f->hi);
    errno = 0;
    switch (f->kind) {
    case CLI_STRING:
        *(const char **)dst = v;
        return 0;
    case CLI_SWITCH:
        *(int *)dst = (int)f->lo;
        return 0;
    case CLI_CHOICE: {
        int i = 0;
        for (const char *p = f->choices; *p; i++) {
            const char *bar = strchr(p, '|');
            size_t len = bar ? (size_t)(bar - p) : strlen(p);
            if (strlen(v) == len && !strncmp(p, v, len)) {
                *(int *)dst = f->values ? f->values[i] : i;
                return 0;
            }
            if (!bar) break;
            p = bar + 1;
        }
        char want[96];
        snprintf(want, sizeof want, "expected one of %s", f->choices);
        return bad_value(cmd, f, v, want);
    }
    case CLI_UINT64: {
        if (*v == '-') return bad_value(cmd, f, v, "expected a number >= 0");
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || end == v || *end) return bad_value(cmd, f, v, "expected a number >= 0");
        *(uint64_t *)dst = x;
        return 0;
    }
    case CLI_INT:
    case CLI_INT64: {
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end || x < f->lo || x > f->hi) return bad_value(cmd, f, v, range);
        if (f->kind == CLI_INT) *(int *)dst = (int)x;
        else *(int64_t *)dst = x;
        return 0;
    }
    case CLI_FLOAT: {
        double x = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(x) || x < f->lo || x > f->hi) return bad_value(cmd, f, v, range);
        *(float *)dst = (float)x;
        return 0;
    }
    }
    return 2;
}

int cli_parse(const cli_command *cmd, int argc, char **argv, cli_options *o, void *own) {
    size_t n = n_own(cmd);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            cli_usage(cmd, stdout);
            return 0;
        }
        const cli_flag *f = NULL;
        char *base = NULL;
        for (size_t j = 0; j < n && !f; j++)
            if (is_flag(&cmd->flags[j], a)) f = &cmd->flags[j], base = own;
        for (size_t j = 0; j < N_SHARED && !f; j++)
            if ((shared_flags[j].group & cmd->groups) && is_flag(&shared_flags[j], a)) f = &shared_flags[j], base = (char *)o;
        if (!f) {
            fprintf(stderr, "strata %s: unknown option '%s' (strata %s --help lists them)\n", cmd->name, a, cmd->name);
            return 2;
        }
        const char *v = NULL;
        if (f->arg) {
            if (i + 1 >= argc) {
                fprintf(stderr, "strata %s: %s needs a value (%s)\n", cmd->name, a, f->arg);
                return 2;
            }
            v = argv[++i];
        }
        int rc = set_value(cmd, f, v, base);
        if (rc) return rc;
    }
    return -1;
}
