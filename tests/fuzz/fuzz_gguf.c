/* fuzz_gguf.c: libFuzzer target for the GGUF reader. Each input is parsed from a buffer of exactly
 * its size (so ASan sees any read past it); an input that opens is then read end to end through
 * the API (every key, every array element, every nested array, every tensor's bytes), because the
 * reader promises that everything it hands out after a successful open is in bounds.
 * Built only with -DSTRATA_FUZZ=ON and clang; tools/fuzz.sh runs it. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gguf/gguf.h"

static volatile uint64_t sink;

static void walk_value(const st_gguf_value *v) {
    int64_t i;
    uint64_t u;
    double d;
    int b;
    const char *s;
    size_t len;
    if (st_gguf_value_type(v) != ST_GGUF_ARRAY) {
        if (st_gguf_value_int(v, &i) == ST_OK) sink += (uint64_t)i;
        if (st_gguf_value_uint(v, &u) == ST_OK) sink += u;
        if (st_gguf_value_float(v, &d) == ST_OK) sink += d > 0;
        if (st_gguf_value_bool(v, &b) == ST_OK) sink += (uint64_t)b;
        if (st_gguf_value_str(v, &s, &len) == ST_OK && len) sink += (unsigned char)s[0] + (unsigned char)s[len - 1];
        return;
    }
    const unsigned char *raw = st_gguf_array_data(v);
    uint64_t n = st_gguf_array_len(v);
    for (uint64_t k = 0; k < n; k++) {
        if (st_gguf_array_int(v, k, &i) == ST_OK) sink += (uint64_t)i;
        if (st_gguf_array_uint(v, k, &u) == ST_OK) sink += u;
        if (st_gguf_array_float(v, k, &d) == ST_OK) sink += d > 0;
        if (st_gguf_array_str(v, k, &s, &len) == ST_OK && len) sink += (unsigned char)s[0] + (unsigned char)s[len - 1];
        const st_gguf_value *inner = st_gguf_array_at(v, k);
        if (inner) walk_value(inner);
        if (raw) sink += raw[k];
    }
    if (st_gguf_array_int(v, n, &i) != ST_ERR_RANGE && st_gguf_array_type(v) != ST_GGUF_VTYPE_COUNT) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    st_gguf *g = NULL;
    if (st_gguf_open_memory(data, size, "fuzz.gguf", &g) != ST_OK) {
        if (g || strncmp(st_last_error(), "fuzz.gguf: ", 11)) __builtin_trap();
        return 0;
    }
    for (int64_t i = 0; i < st_gguf_n_kv(g); i++) {
        if (st_gguf_find(g, st_gguf_kv_key(g, i)) != st_gguf_kv_value(g, i)) __builtin_trap();
        walk_value(st_gguf_kv_value(g, i));
    }
    for (int64_t i = 0; i < st_gguf_n_tensors(g); i++) {
        const st_gguf_tensor *t = st_gguf_tensor_at(g, i);
        if (st_gguf_find_tensor(g, t->name) != t) __builtin_trap();
        const unsigned char *p = t->data;
        if (p < data || p + t->size > data + size) __builtin_trap();
        if (t->size) sink += p[0] + p[t->size - 1];
    }
    st_gguf_close(g);
    return 0;
}
