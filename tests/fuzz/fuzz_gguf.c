/* fuzz_gguf.c: libFuzzer target for the GGUF reader. Each input is parsed from a buffer of exactly
 * its size (so ASan sees any read past it); an input that opens is then read end to end through
 * the API (every key, every array element, every nested array, every tensor's bytes), because the
 * reader promises that everything it hands out after a successful open is in bounds.
 * Built only with -DSTRATA_FUZZ=ON and clang; tools/fuzz.sh runs it. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../gguf_walk.h"
#include "gguf/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    st_gguf *g = NULL;
    if (st_gguf_open_memory(data, size, "fuzz.gguf", &g) != ST_OK) {
        if (g || strncmp(st_last_error(), "fuzz.gguf: ", 11)) __builtin_trap();
        return 0;
    }
    for (int64_t i = 0; i < st_gguf_n_kv(g); i++) {
        if (st_gguf_find(g, st_gguf_kv_key(g, i)) != st_gguf_kv_value(g, i)) __builtin_trap();
        if (!gguf_walk_value(st_gguf_kv_value(g, i))) __builtin_trap();
    }
    for (int64_t i = 0; i < st_gguf_n_tensors(g); i++) {
        const st_gguf_tensor *t = st_gguf_tensor_at(g, i);
        if (st_gguf_find_tensor(g, t->name) != t) __builtin_trap();
        const unsigned char *p = t->data;
        if (p < data || p + t->size > data + size) __builtin_trap();
        if (t->size) gguf_walk_sink += p[0] + p[t->size - 1];
    }
    st_gguf_close(g);
    return 0;
}
