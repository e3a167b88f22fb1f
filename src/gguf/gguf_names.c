/* gguf_names.c: the reader's name tables, one for the keys and one for the tensors: open
 * addressing over FNV-1a hashes of the names, linear probing. The parser (gguf_read.c) builds them
 * from the names as they stand in the file, refusing duplicates; the lookups by name
 * (gguf_value.c) read them. Slots hold index + 1, 0 marks an empty one. */
#include "gguf/gguf_internal.h"

#include <stdlib.h>

uint64_t st_gguf_name_hash(const void *p, size_t len) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

st_status st_gguf_table_new(int64_t n, size_t **slots, size_t *mask) {
    size_t cap = 16;
    while (cap < 2 * (size_t)n) cap *= 2;
    *slots = calloc(cap, sizeof **slots);
    if (!*slots) return st_fail(ST_ERR_NOMEM, "name table of %zu slots: out of memory", cap);
    *mask = cap - 1;
    return ST_OK;
}

int64_t st_gguf_table_insert(size_t *slots, size_t mask, const st_gguf_name *names, int64_t i) {
    size_t h = (size_t)st_gguf_name_hash(names[i].p, (size_t)names[i].len) & mask;
    for (;; h = (h + 1) & mask) {
        if (!slots[h]) {
            slots[h] = (size_t)i + 1;
            return -1;
        }
        const st_gguf_name *o = &names[slots[h] - 1];
        if (o->len == names[i].len && !memcmp(o->p, names[i].p, (size_t)o->len)) return (int64_t)slots[h] - 1;
    }
}

int64_t st_gguf_table_find(const size_t *slots, size_t mask, const char *name,
                           const char *(*name_of)(const st_gguf *, int64_t), const st_gguf *g) {
    if (!slots) return -1;
    size_t len = strlen(name);
    for (size_t h = (size_t)st_gguf_name_hash(name, len) & mask; slots[h]; h = (h + 1) & mask)
        if (!strcmp(name_of(g, (int64_t)slots[h] - 1), name)) return (int64_t)slots[h] - 1;
    return -1;
}
