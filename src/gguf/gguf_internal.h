/* gguf_internal.h: the reader's in-memory form of a GGUF file, shared by the parser
 * (gguf_read.c), the name tables (gguf_names.c) and the value accessors and lookups
 * (gguf_value.c). Nothing outside src/gguf/ includes it.
 *
 * Every pointer here points into the file's bytes (the mapping or the caller's buffer) or into
 * memory the st_gguf owns; all of it was bounds-checked at open, so accessors only decode. */
#ifndef ST_GGUF_INTERNAL_H
#define ST_GGUF_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "base/mmap.h"
#include "gguf/gguf.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader decodes little-endian values in place; this host is not little-endian"
#endif

/* Arrays nest no deeper than this; a real file uses depth 1 (no file ggml writes nests at all). */
#define ST_GGUF_MAX_DEPTH 8
#define ST_GGUF_DEFAULT_ALIGNMENT 32

typedef struct st_gguf_kv st_gguf_kv;

struct st_gguf_value {
    const unsigned char *p;  /* scalar: its bytes; string: its characters; array: first element */
    uint64_t n;              /* string: length in bytes; array: element count */
    /* string arrays: n pointers, each at an element's 8-byte length (its characters follow);
     * arrays of arrays: n inner values. NULL otherwise. */
    void *index;
    const st_gguf_kv *kv;    /* the key this value belongs to, for messages */
    uint8_t type;            /* st_gguf_vtype */
    uint8_t elem;            /* arrays: the element type */
};

struct st_gguf_kv {
    const char *key;         /* NUL-terminated copy */
    const st_gguf *g;
    st_gguf_value value;
};

struct st_gguf {
    char *path;
    st_mapping map;          /* empty when opened from memory */
    const unsigned char *base;
    size_t size;
    uint32_t version;
    size_t alignment;
    size_t data_offset;
    int64_t n_kv, n_tensors;
    st_gguf_kv *kv;
    st_gguf_tensor *tensors;
    char *names;             /* every key and tensor name, NUL-terminated, one after another */
    /* open-addressing tables of index + 1 (0 = empty slot); sizes are powers of two */
    size_t *kv_slots, *tensor_slots;
    size_t kv_mask, tensor_mask;
};

/* Byte sizes of the fixed-size value types; 0 for strings and arrays. */
size_t st_gguf_vtype_size(uint32_t type);
/* "u32", "string", ...; "invalid" for an id outside the enum. */
const char *st_gguf_vtype_name(uint32_t type);

/* The name tables (gguf_names.c). A parse-time name lies in the file (pointer, length). */
typedef struct st_gguf_name { const unsigned char *p; uint64_t len; } st_gguf_name;
uint64_t st_gguf_name_hash(const void *p, size_t len);
/* An empty table with room for n names (at most half full). */
st_status st_gguf_table_new(int64_t n, size_t **slots, size_t *mask);
/* Inserts entry i (names[i]); returns the index of an equal name already present (then nothing is
 * inserted), or -1. */
int64_t st_gguf_table_insert(size_t *slots, size_t mask, const st_gguf_name *names, int64_t i);
/* The index of the entry called `name` (name_of gives an entry's NUL-terminated name), or -1. */
int64_t st_gguf_table_find(const size_t *slots, size_t mask, const char *name,
                           const char *(*name_of)(const st_gguf *, int64_t), const st_gguf *g);

static inline uint64_t st_gguf_le64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint32_t st_gguf_le32(const unsigned char *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

#endif
