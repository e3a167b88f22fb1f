/* cmd_info.c: `strata info FILE`: what a GGUF file holds, without loading it. The path and GGUF
 * version, the architecture and name, the architecture's hyperparameters (the ones the Qwen
 * models use first, in a fixed order, then any others under the same prefix), the vocabulary, and
 * the tensors: count, parameters, bytes and a histogram by type. A qwen4exp PLE table
 * (per_layer_token_embd) is shown apart, with the weights' size without it: the engine gathers
 * its rows from the file mapping and never copies it, so it costs file space, not memory.
 *
 * Opening validates the whole file, so a bad file ends here with the reader's message on stderr
 * and exit status 1. Per-layer arrays are printed compactly ("[0, 0, 0, 1] x 12"). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "gguf/gguf.h"
#include "quant/types.h"

/* The hyperparameters that matter for the Qwen families, after the "<arch>." prefix. */
static const char *const key_hparams[] = {
    "block_count", "context_length", "embedding_length", "feed_forward_length",
    "attention.head_count", "attention.head_count_kv", "attention.key_length", "attention.value_length",
    "attention.layer_norm_rms_epsilon", "rope.dimension_count", "rope.dimension_sections", "rope.freq_base",
    "expert_count", "expert_used_count", "expert_feed_forward_length", "expert_shared_feed_forward_length",
    "full_attention_interval", "ssm.conv_kernel", "ssm.state_size", "ssm.group_count", "ssm.time_step_rank",
    "ssm.inner_size",
};
#define N_KEY_HPARAMS (sizeof key_hparams / sizeof key_hparams[0])

typedef struct text { char s[640]; size_t n; } text;

static void add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(text *t, const char *fmt, ...) {
    if (t->n >= sizeof t->s - 1) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(t->s + t->n, sizeof t->s - t->n, fmt, ap);
    va_end(ap);
    if (k > 0) t->n += (size_t)k;
    if (t->n > sizeof t->s - 1) t->n = sizeof t->s - 1;
}

static void add_str(text *t, const char *s, size_t len) {
    size_t n = len > 60 ? 60 : len;
    add(t, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') add(t, "\\%c", c);
        else if (c < 0x20 || c == 0x7f) add(t, "\\x%02x", c);
        else add(t, "%c", c);
    }
    add(t, len > n ? "\"..." : "\"");
}

/* One numeric element; integers exactly, floats in %g. */
static void add_elem(text *t, const st_gguf_value *v, uint64_t i) {
    int64_t s;
    uint64_t u;
    double d;
    st_gguf_vtype e = st_gguf_array_type(v);
    if (e == ST_GGUF_FLOAT32 || e == ST_GGUF_FLOAT64) {
        if (st_gguf_array_float(v, i, &d) == ST_OK) add(t, "%g", d);
    } else if (e == ST_GGUF_BOOL) {
        add(t, "%s", ((const uint8_t *)st_gguf_array_data(v))[i] ? "true" : "false");
    } else if (st_gguf_array_int(v, i, &s) == ST_OK) {
        add(t, "%" PRId64, s);
    } else if (st_gguf_array_uint(v, i, &u) == ST_OK) {
        add(t, "%" PRIu64, u);
    }
}

static int same_elem(const st_gguf_value *v, uint64_t i, uint64_t j) {
    size_t es;
    switch (st_gguf_array_type(v)) {
    case ST_GGUF_UINT8: case ST_GGUF_INT8: case ST_GGUF_BOOL: es = 1; break;
    case ST_GGUF_UINT16: case ST_GGUF_INT16: es = 2; break;
    case ST_GGUF_UINT32: case ST_GGUF_INT32: case ST_GGUF_FLOAT32: es = 4; break;
    default: es = 8;
    }
    const unsigned char *p = st_gguf_array_data(v);
    return !memcmp(p + i * es, p + j * es, es);
}

static void add_list(text *t, const st_gguf_value *v, uint64_t n) {
    add(t, "[");
    for (uint64_t i = 0; i < n; i++) {
        if (i) add(t, ", ");
        add_elem(t, v, i);
    }
    add(t, "]");
}

/* Per-layer arrays: the shortest repeating pattern ("[0, 0, 0, 1] x 12"), else runs. */
static void add_numeric_array(text *t, const st_gguf_value *v) {
    uint64_t n = st_gguf_array_len(v);
    uint64_t period = n;
    for (uint64_t p = 1; p <= 16 && p < n; p++) {
        if (n % p) continue;
        uint64_t i = p;
        while (i < n && same_elem(v, i, i % p)) i++;
        if (i == n) {
            period = p;
            break;
        }
    }
    if (period < n) {
        add_list(t, v, period);
        add(t, " x %" PRIu64, n / period);
        return;
    }
    if (n <= 16) {
        add_list(t, v, n);
        return;
    }
    add(t, "[");
    uint64_t shown = 0;
    for (uint64_t i = 0; i < n && shown < 24; shown++) {
        uint64_t j = i + 1;
        while (j < n && same_elem(v, i, j)) j++;
        if (shown) add(t, ", ");
        add_elem(t, v, i);
        if (j - i > 1) add(t, " x%" PRIu64, j - i);
        i = j;
        if (shown == 23 && i < n) add(t, ", ...");
    }
    add(t, "] (%" PRIu64 " values)", n);
}

static void add_value(text *t, const st_gguf_value *v, int depth) {
    int64_t s;
    uint64_t u;
    double d;
    int b;
    const char *str;
    size_t len;
    switch (st_gguf_value_type(v)) {
    case ST_GGUF_STRING:
        if (st_gguf_value_str(v, &str, &len) == ST_OK) add_str(t, str, len);
        return;
    case ST_GGUF_BOOL:
        if (st_gguf_value_bool(v, &b) == ST_OK) add(t, "%s", b ? "true" : "false");
        return;
    case ST_GGUF_FLOAT32:
    case ST_GGUF_FLOAT64:
        if (st_gguf_value_float(v, &d) == ST_OK) add(t, "%g", d);
        return;
    case ST_GGUF_ARRAY:
        break;
    default:
        if (st_gguf_value_int(v, &s) == ST_OK) add(t, "%" PRId64, s);
        else if (st_gguf_value_uint(v, &u) == ST_OK) add(t, "%" PRIu64, u);
        return;
    }
    uint64_t n = st_gguf_array_len(v);
    if (st_gguf_array_type(v) == ST_GGUF_STRING) {
        add(t, "[%" PRIu64 " strings", n);
        for (uint64_t i = 0; i < n && i < 3; i++) {
            add(t, i ? ", " : ": ");
            if (st_gguf_array_str(v, i, &str, &len) == ST_OK) add_str(t, str, len);
        }
        add(t, n > 3 ? ", ...]" : "]");
    } else if (st_gguf_array_type(v) == ST_GGUF_ARRAY) {
        add(t, "[");
        for (uint64_t i = 0; i < n && i < 4; i++) {
            if (i) add(t, ", ");
            if (depth < 2) add_value(t, st_gguf_array_at(v, i), depth + 1);
            else add(t, "[...]");
        }
        if (n > 4) add(t, ", ...] (%" PRIu64 " arrays)", n);
        else add(t, "]");
    } else {
        add_numeric_array(t, v);
    }
}

static void print_kv(const char *label, const st_gguf_value *v) {
    text t = {.n = 0};
    add_value(&t, v, 0);
    printf("  %-36s %s\n", label, t.s);
}

static void print_hparams(const st_gguf *g, const char *arch, size_t arch_len) {
    char key[256];
    printf("hyperparameters:\n");
    int any = 0;
    for (size_t i = 0; i < N_KEY_HPARAMS; i++) {
        snprintf(key, sizeof key, "%.*s.%s", (int)arch_len, arch, key_hparams[i]);
        const st_gguf_value *v = st_gguf_find(g, key);
        if (v) {
            print_kv(key_hparams[i], v);
            any = 1;
        }
    }
    /* the rest of the architecture's keys, in file order */
    for (int64_t i = 0; i < st_gguf_n_kv(g); i++) {
        const char *k = st_gguf_kv_key(g, i);
        if (strncmp(k, arch, arch_len) || k[arch_len] != '.') continue;
        int known = 0;
        for (size_t j = 0; j < N_KEY_HPARAMS && !known; j++) known = !strcmp(k + arch_len + 1, key_hparams[j]);
        if (known) continue;
        print_kv(k + arch_len + 1, st_gguf_kv_value(g, i));
        any = 1;
    }
    if (!any) printf("  (none)\n");
}

static void print_vocab(const st_gguf *g) {
    const st_gguf_value *tokens = st_gguf_find(g, "tokenizer.ggml.tokens");
    const char *s;
    size_t len;
    printf("vocabulary:\n");
    if (tokens && st_gguf_array_type(tokens) == ST_GGUF_STRING) printf("  %-36s %" PRIu64 "\n", "tokens", st_gguf_array_len(tokens));
    else printf("  %-36s (none)\n", "tokens");
    static const char *const keys[] = {"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.bos_token_id",
                                       "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const st_gguf_value *v = st_gguf_find(g, keys[i]);
        if (v) print_kv(keys[i] + strlen("tokenizer.ggml."), v);
    }
    const st_gguf_value *merges = st_gguf_find(g, "tokenizer.ggml.merges");
    if (merges) printf("  %-36s %" PRIu64 "\n", "merges", st_gguf_array_len(merges));
    if (st_gguf_get_str(g, "tokenizer.chat_template", &s, &len) == ST_OK) printf("  %-36s %zu bytes\n", "chat_template", len);
}

static void human_bytes(char *buf, size_t n, double b) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024;
        u++;
    }
    snprintf(buf, n, u ? "%.2f %s" : "%.0f %s", b, units[u]);
}

static void human_count(char *buf, size_t n, double c) {
    if (c >= 1e9) snprintf(buf, n, "%.2f B", c / 1e9);
    else if (c >= 1e6) snprintf(buf, n, "%.2f M", c / 1e6);
    else if (c >= 1e3) snprintf(buf, n, "%.2f K", c / 1e3);
    else snprintf(buf, n, "%.0f", c);
}

typedef struct type_row { uint32_t type; int64_t count; double params, bytes; } type_row;

static int by_bytes(const void *a, const void *b) {
    const type_row *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : (x->type > y->type) - (x->type < y->type);
}

static void print_tensors(const st_gguf *g) {
    type_row rows[ST_TYPE_COUNT] = {{0}};
    double params = 0, bytes = 0;
    for (int64_t i = 0; i < st_gguf_n_tensors(g); i++) {
        const st_gguf_tensor *t = st_gguf_tensor_at(g, i);
        rows[t->type].type = t->type;
        rows[t->type].count++;
        rows[t->type].params += (double)t->n_elements;
        rows[t->type].bytes += (double)t->size;
        params += (double)t->n_elements;
        bytes += (double)t->size;
    }
    char pb[32], bb[32];
    human_count(pb, sizeof pb, params);
    human_bytes(bb, sizeof bb, bytes);
    printf("tensors:\n  %-36s %" PRId64 "\n  %-36s %.0f (%s)\n  %-36s %.0f (%s)\n", "count", st_gguf_n_tensors(g), "parameters", params, pb,
           "bytes", bytes, bb);
    if (!st_gguf_n_tensors(g)) return;
    const st_gguf_tensor *ple = st_gguf_find_tensor(g, "per_layer_token_embd.weight");
    if (ple) {
        human_count(pb, sizeof pb, (double)ple->n_elements);
        human_bytes(bb, sizeof bb, (double)ple->size);
        printf("  %-36s %" PRId64 " rows x %" PRId64 ", %s, %s parameters, %zu bytes (%s)\n",
               "PLE table", ple->ne[1], ple->ne[0], st_type_get(ple->type)->name, pb, ple->size, bb);
        human_count(pb, sizeof pb, params - (double)ple->n_elements);
        human_bytes(bb, sizeof bb, bytes - (double)ple->size);
        printf("  %-36s %.0f bytes (%s), %s parameters\n", "weights without the PLE table", bytes - (double)ple->size, bb, pb);
    }
    qsort(rows, ST_TYPE_COUNT, sizeof rows[0], by_bytes);
    printf("  %-8s %8s %14s %12s %8s\n", "type", "tensors", "parameters", "bytes", "bits/w");
    for (int i = 0; i < ST_TYPE_COUNT && rows[i].count; i++) {
        human_count(pb, sizeof pb, rows[i].params);
        human_bytes(bb, sizeof bb, rows[i].bytes);
        printf("  %-8s %8" PRId64 " %14s %12s %8.2f\n", st_type_get(rows[i].type)->name, rows[i].count, pb, bb,
               rows[i].params > 0 ? rows[i].bytes * 8 / rows[i].params : 0.0);
    }
}

static void usage(FILE *f) {
    fprintf(f, "usage: strata info FILE.gguf\n\n"
               "Validates a GGUF file and prints its architecture, hyperparameters, vocabulary,\n"
               "tensor count, parameter count and a histogram of tensor types.\n"
               "Exit status 1 (with the reason on stderr) if the file is not a valid GGUF v3 file.\n");
}

int cmd_info(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc != 2 || (argv[1][0] == '-' && argv[1][1])) {
        usage(stderr);
        return 2;
    }
    st_gguf *g = NULL;
    if (st_gguf_open(argv[1], &g) != ST_OK) return cli_fail(NULL);

    const char *arch = "", *name;
    size_t arch_len = 0, name_len;
    printf("file:                                  %s\n", st_gguf_path(g));
    printf("gguf:                                  version %" PRIu32 ", %" PRId64 " keys, alignment %zu, %zu bytes",
           st_gguf_version(g), st_gguf_n_kv(g), st_gguf_alignment(g), st_gguf_file_size(g));
    if (st_gguf_n_tensors(g)) printf(", tensor data from offset %zu\n", st_gguf_data_offset(g));
    else printf(", no tensor data\n");
    if (st_gguf_get_str(g, "general.architecture", &arch, &arch_len) == ST_OK)
        printf("architecture:                          %.*s\n", (int)arch_len, arch);
    else
        printf("architecture:                          (missing)\n");
    if (st_gguf_get_str(g, "general.name", &name, &name_len) == ST_OK)
        printf("name:                                  %.*s\n", (int)name_len, name);
    if (arch_len) print_hparams(g, arch, arch_len);
    print_vocab(g);
    print_tensors(g);
    st_gguf_close(g);
    return 0;
}
