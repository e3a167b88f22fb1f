/* gguf_read.c: opening a GGUF v3 file: parsing and validating the header, every key/value (nested
 * arrays included) and every tensor info, then the alignment and the tensor data bounds.
 *
 * The file is untrusted. Every read is checked against the bytes left; every count is checked
 * against what the rest of the file could hold before anything is allocated for it, so memory
 * stays a small multiple of the file's header, whatever the counts claim. A failure names the file
 * and the key or tensor (its index and name) and both sides of the broken rule.
 *
 * Layout (little-endian): "GGUF", u32 version, u64 tensor count, u64 key count, the key/values
 * (string key, u32 type, value), the tensor infos (string name, u32 n_dims, n_dims x i64 ne,
 * u32 type, u64 offset), padding to the alignment, then the data section. A string is a u64
 * length and its bytes; an array is a u32 element type, a u64 count and the elements. */
#include "gguf/gguf_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "quant/types.h"

/* The smallest encodings, which bound how many entries the remaining bytes could hold. */
#define MIN_KV_BYTES 14     /* u64 key length, 1 byte of key, u32 type, a u8 value */
#define MIN_TENSOR_BYTES 33 /* u64 name length, 1 byte of name, u32 n_dims, one i64, u32 type, u64 offset */
#define MIN_ARRAY_BYTES 12  /* u32 element type, u64 count */

typedef struct reader {
    const unsigned char *base;
    size_t size, pos;
    int64_t n_arrays_budget; /* inner arrays still allowed, so nesting cannot multiply memory */
} reader;

static size_t left(const reader *r) { return r->size - r->pos; }

/* A name from the file, fit for a message: at most 80 bytes, non-printable bytes as '?'. */
static const char *shown(const unsigned char *p, uint64_t len, char buf[96]) {
    size_t n = len > 80 ? 80 : (size_t)len, o = 0;
    for (size_t i = 0; i < n; i++) buf[o++] = (p[i] >= 0x20 && p[i] < 0x7f) ? (char)p[i] : '?';
    if (len > n) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = 0;
    return buf;
}

static st_status truncated(const reader *r, size_t need, const char *what) {
    return st_fail(ST_ERR_FORMAT, "%s needs %zu bytes at offset %zu, but only %zu remain (the file is truncated)",
                   what, need, r->pos, left(r));
}

static st_status read_u32(reader *r, uint32_t *v, const char *what) {
    if (left(r) < 4) return truncated(r, 4, what);
    *v = st_gguf_le32(r->base + r->pos);
    r->pos += 4;
    return ST_OK;
}

static st_status read_u64(reader *r, uint64_t *v, const char *what) {
    if (left(r) < 8) return truncated(r, 8, what);
    *v = st_gguf_le64(r->base + r->pos);
    r->pos += 8;
    return ST_OK;
}

/* A string: its bytes stay in the file; *p and *len describe them. */
static st_status read_str(reader *r, const unsigned char **p, uint64_t *len, const char *what) {
    char lenwhat[64];
    snprintf(lenwhat, sizeof lenwhat, "%s length", what);
    ST_TRY(read_u64(r, len, lenwhat));
    if (*len > left(r))
        return st_fail(ST_ERR_FORMAT, "%s length %" PRIu64 " runs past the end of the file (%zu bytes left at offset %zu)",
                       what, *len, left(r), r->pos);
    *p = r->base + r->pos;
    r->pos += (size_t)*len;
    return ST_OK;
}

static st_status check_bools(const unsigned char *p, uint64_t n) {
    for (uint64_t i = 0; i < n; i++)
        if (p[i] > 1) return st_fail(ST_ERR_FORMAT, "bool %" PRIu64 " has value %u, not 0 or 1", i, p[i]);
    return ST_OK;
}

static st_status parse_value(reader *r, st_gguf_value *v, uint32_t type, int depth);

static st_status parse_string_array(reader *r, st_gguf_value *v) {
    if (v->n > left(r) / 8)
        return st_fail(ST_ERR_FORMAT, "array of %" PRIu64 " strings runs past the end of the file (%zu bytes left hold at most %zu)",
                       v->n, left(r), left(r) / 8);
    if (v->n == 0) return ST_OK;
    const unsigned char **at = malloc((size_t)v->n * sizeof *at);
    if (!at) return st_fail(ST_ERR_NOMEM, "array of %" PRIu64 " strings: out of memory", v->n);
    v->index = at;
    for (uint64_t i = 0; i < v->n; i++) {
        if (left(r) < 8) return truncated(r, 8, "string length");
        uint64_t len = st_gguf_le64(r->base + r->pos);
        if (len > left(r) - 8)
            return st_fail(ST_ERR_FORMAT, "string %" PRIu64 ": length %" PRIu64 " runs past the end of the file (%zu bytes left at offset %zu)",
                           i, len, left(r) - 8, r->pos + 8);
        at[i] = r->base + r->pos;
        r->pos += 8 + (size_t)len;
    }
    return ST_OK;
}

static st_status parse_nested_array(reader *r, st_gguf_value *v, int depth) {
    if (v->n > left(r) / MIN_ARRAY_BYTES)
        return st_fail(ST_ERR_FORMAT, "array of %" PRIu64 " arrays runs past the end of the file (%zu bytes left hold at most %zu)",
                       v->n, left(r), left(r) / MIN_ARRAY_BYTES);
    /* Each inner array costs a value struct (about 3x its 12-byte minimum); the budget keeps the
     * total of all of them proportional to the file. */
    if ((int64_t)v->n > r->n_arrays_budget)
        return st_fail(ST_ERR_FORMAT, "array of %" PRIu64 " arrays: more inner arrays than the file could hold", v->n);
    r->n_arrays_budget -= (int64_t)v->n;
    if (v->n == 0) return ST_OK;
    st_gguf_value *items = calloc((size_t)v->n, sizeof *items);
    if (!items) return st_fail(ST_ERR_NOMEM, "array of %" PRIu64 " arrays: out of memory", v->n);
    v->index = items;
    for (uint64_t i = 0; i < v->n; i++) {
        items[i].kv = v->kv;
        st_status s = parse_value(r, &items[i], ST_GGUF_ARRAY, depth + 1);
        if (s != ST_OK) return st_fail_context(s, "element %" PRIu64 ": ", i);
    }
    return ST_OK;
}

static st_status parse_array(reader *r, st_gguf_value *v, int depth) {
    if (depth >= ST_GGUF_MAX_DEPTH)
        return st_fail(ST_ERR_FORMAT, "arrays nested deeper than %d levels", ST_GGUF_MAX_DEPTH);
    uint32_t elem = 0;
    ST_TRY(read_u32(r, &elem, "array element type"));
    if (elem >= ST_GGUF_VTYPE_COUNT)
        return st_fail(ST_ERR_FORMAT, "array element type %" PRIu32 " is not a GGUF value type (0..%d)", elem, ST_GGUF_VTYPE_COUNT - 1);
    v->elem = (uint8_t)elem;
    ST_TRY(read_u64(r, &v->n, "array length"));
    if (elem == ST_GGUF_STRING) return parse_string_array(r, v);
    if (elem == ST_GGUF_ARRAY) return parse_nested_array(r, v, depth);
    size_t es = st_gguf_vtype_size(elem);
    if (v->n > left(r) / es)
        return st_fail(ST_ERR_FORMAT, "array of %" PRIu64 " %s runs past the end of the file (%zu bytes left at offset %zu)",
                       v->n, st_gguf_vtype_name(elem), left(r), r->pos);
    v->p = r->base + r->pos;
    if (elem == ST_GGUF_BOOL) ST_TRY(check_bools(v->p, v->n));
    r->pos += (size_t)v->n * es;
    return ST_OK;
}

static st_status parse_value(reader *r, st_gguf_value *v, uint32_t type, int depth) {
    v->type = (uint8_t)type;
    if (type == ST_GGUF_ARRAY) return parse_array(r, v, depth);
    if (type == ST_GGUF_STRING) return read_str(r, &v->p, &v->n, "string");
    size_t sz = st_gguf_vtype_size(type);
    if (left(r) < sz) return truncated(r, sz, st_gguf_vtype_name(type));
    v->p = r->base + r->pos;
    if (type == ST_GGUF_BOOL) ST_TRY(check_bools(v->p, 1));
    r->pos += sz;
    return ST_OK;
}

static void free_value(st_gguf_value *v) {
    if (v->type == ST_GGUF_ARRAY && v->elem == ST_GGUF_ARRAY && v->index) {
        st_gguf_value *items = v->index;
        for (uint64_t i = 0; i < v->n; i++) free_value(&items[i]);
    }
    free(v->index);
    v->index = NULL;
}

/* ---- the file, part by part ---- */

static st_status parse_header(reader *r, st_gguf *g) {
    if (r->size < 4) return st_fail(ST_ERR_FORMAT, "not a GGUF file: %zu bytes, too short for the magic 'GGUF'", r->size);
    if (memcmp(r->base, "GGUF", 4) != 0) {
        char buf[96];
        return st_fail(ST_ERR_FORMAT, "not a GGUF file: the magic is '%s', expected 'GGUF'",
                       shown(r->base, 4, buf));
    }
    r->pos = 4;
    ST_TRY(read_u32(r, &g->version, "header version"));
    if (g->version != 3) {
        if ((g->version & 0xffff) == 0 && g->version)
            return st_fail(ST_ERR_UNSUPPORTED, "GGUF version %" PRIu32 " (0x%08" PRIx32 ") looks byte-swapped: big-endian files are not supported",
                           g->version, g->version);
        if (g->version == 1 || g->version == 2)
            return st_fail(ST_ERR_UNSUPPORTED, "GGUF version %" PRIu32 " is not supported: only version 3 is (convert the file with a current llama.cpp)",
                           g->version);
        return st_fail(ST_ERR_FORMAT, "GGUF version %" PRIu32 " is not a known version (expected 3)", g->version);
    }
    uint64_t nt = 0, nk = 0;
    ST_TRY(read_u64(r, &nt, "header tensor count"));
    ST_TRY(read_u64(r, &nk, "header key count"));
    if (nk > left(r) / MIN_KV_BYTES)
        return st_fail(ST_ERR_FORMAT, "header claims %" PRIu64 " keys, but the %zu bytes after the header hold at most %zu",
                       nk, left(r), left(r) / MIN_KV_BYTES);
    size_t after_keys = left(r) - (size_t)nk * MIN_KV_BYTES;
    if (nt > after_keys / MIN_TENSOR_BYTES)
        return st_fail(ST_ERR_FORMAT, "header claims %" PRIu64 " tensors, but the %zu bytes left after %" PRIu64 " keys hold at most %zu",
                       nt, after_keys, nk, after_keys / MIN_TENSOR_BYTES);
    g->n_kv = (int64_t)nk;
    g->n_tensors = (int64_t)nt;
    return ST_OK;
}

static st_status parse_kvs(reader *r, st_gguf *g, st_gguf_name *names) {
    ST_TRY(st_gguf_table_new(g->n_kv, &g->kv_slots, &g->kv_mask));
    for (int64_t i = 0; i < g->n_kv; i++) {
        char buf[96];
        st_gguf_kv *kv = &g->kv[i];
        kv->g = g;
        kv->value.kv = kv;
        st_status s = read_str(r, &names[i].p, &names[i].len, "key");
        if (s != ST_OK) return st_fail_context(s, "key %" PRId64 ": ", i);
        if (names[i].len == 0) return st_fail(ST_ERR_FORMAT, "key %" PRId64 ": the key is empty", i);
        if (memchr(names[i].p, 0, (size_t)names[i].len))
            return st_fail(ST_ERR_FORMAT, "key %" PRId64 " '%s': the key contains a NUL byte", i, shown(names[i].p, names[i].len, buf));
        int64_t dup = st_gguf_table_insert(g->kv_slots, g->kv_mask, names, i);
        if (dup >= 0)
            return st_fail(ST_ERR_FORMAT, "key %" PRId64 " '%s': duplicate of key %" PRId64, i, shown(names[i].p, names[i].len, buf), dup);
        uint32_t type = 0;
        s = read_u32(r, &type, "value type");
        if (s == ST_OK && type >= ST_GGUF_VTYPE_COUNT)
            s = st_fail(ST_ERR_FORMAT, "value type %" PRIu32 " is not a GGUF value type (0..%d)", type, ST_GGUF_VTYPE_COUNT - 1);
        if (s == ST_OK) s = parse_value(r, &kv->value, type, 0);
        if (s != ST_OK) return st_fail_context(s, "key %" PRId64 " '%s': ", i, shown(names[i].p, names[i].len, buf));
    }
    return ST_OK;
}

static st_status read_alignment(st_gguf *g, const st_gguf_name *names) {
    g->alignment = ST_GGUF_DEFAULT_ALIGNMENT;
    static const char key[] = "general.alignment";
    for (size_t h = (size_t)st_gguf_name_hash(key, sizeof key - 1) & g->kv_mask; g->kv_slots[h]; h = (h + 1) & g->kv_mask) {
        const st_gguf_name *n = &names[g->kv_slots[h] - 1];
        if (n->len != sizeof key - 1 || memcmp(n->p, key, sizeof key - 1)) continue;
        const st_gguf_value *v = &g->kv[g->kv_slots[h] - 1].value;
        if (v->type != ST_GGUF_UINT32)
            return st_fail(ST_ERR_FORMAT, "key 'general.alignment': must be a u32, is a %s", st_gguf_vtype_name(v->type));
        uint32_t a = st_gguf_le32(v->p);
        if (a == 0 || (a & (a - 1)))
            return st_fail(ST_ERR_FORMAT, "key 'general.alignment': %" PRIu32 " is not a non-zero power of two", a);
        g->alignment = a;
    }
    return ST_OK;
}

/* Shape, type and byte size of one tensor info; names the tensor on failure. */
static st_status parse_tensor_shape(reader *r, st_gguf_tensor *t) {
    uint32_t n_dims = 0;
    ST_TRY(read_u32(r, &n_dims, "n_dims"));
    if (n_dims < 1 || n_dims > ST_GGUF_MAX_DIMS)
        return st_fail(ST_ERR_FORMAT, "%" PRIu32 " dimensions, expected 1 to %d", n_dims, ST_GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    int64_t n = 1;
    for (int d = 0; d < ST_GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d >= t->n_dims) continue;
        uint64_t u = 0;
        ST_TRY(read_u64(r, &u, "dimension"));
        t->ne[d] = (int64_t)u;
        if (t->ne[d] <= 0) return st_fail(ST_ERR_FORMAT, "dimension %d is %" PRId64 ", must be positive", d, t->ne[d]);
        if (n > INT64_MAX / t->ne[d])
            return st_fail(ST_ERR_FORMAT, "the element count overflows 64 bits at dimension %d (%" PRId64 " x %" PRId64 ")", d, n, t->ne[d]);
        n *= t->ne[d];
    }
    t->n_elements = n;
    ST_TRY(read_u32(r, &t->type, "tensor type"));
    const st_type_info *ti = st_type_get(t->type);
    if (!ti) return st_fail(ST_ERR_FORMAT, "type id %" PRIu32 " is not a known tensor type", t->type);
    if (t->ne[0] % ti->block_size)
        return st_fail(ST_ERR_FORMAT, "row of %" PRId64 " elements is not a multiple of the %s block size %d", t->ne[0], ti->name, ti->block_size);
    uint64_t blocks = (uint64_t)(n / ti->block_size);
    if (blocks > SIZE_MAX / (uint64_t)ti->type_size)
        return st_fail(ST_ERR_FORMAT, "byte size (%" PRIu64 " blocks of %d) overflows", blocks, ti->type_size);
    t->size = (size_t)(blocks * (uint64_t)ti->type_size);
    ST_TRY(read_u64(r, &t->offset, "data offset"));
    return ST_OK;
}

static st_status parse_tensors(reader *r, st_gguf *g, st_gguf_name *names) {
    ST_TRY(st_gguf_table_new(g->n_tensors, &g->tensor_slots, &g->tensor_mask));
    for (int64_t i = 0; i < g->n_tensors; i++) {
        char buf[96];
        st_status s = read_str(r, &names[i].p, &names[i].len, "name");
        if (s != ST_OK) return st_fail_context(s, "tensor %" PRId64 ": ", i);
        const char *nm = shown(names[i].p, names[i].len, buf);
        if (names[i].len == 0) return st_fail(ST_ERR_FORMAT, "tensor %" PRId64 ": the name is empty", i);
        if (memchr(names[i].p, 0, (size_t)names[i].len))
            return st_fail(ST_ERR_FORMAT, "tensor %" PRId64 " '%s': the name contains a NUL byte", i, nm);
        int64_t dup = st_gguf_table_insert(g->tensor_slots, g->tensor_mask, names, i);
        if (dup >= 0) return st_fail(ST_ERR_FORMAT, "tensor %" PRId64 " '%s': duplicate of tensor %" PRId64, i, nm, dup);
        st_gguf_tensor *t = &g->tensors[i];
        s = parse_tensor_shape(r, t);
        if (s == ST_OK && t->offset % g->alignment)
            s = st_fail(ST_ERR_FORMAT, "data offset %" PRIu64 " is not a multiple of the alignment %zu", t->offset, g->alignment);
        if (s != ST_OK) return st_fail_context(s, "tensor %" PRId64 " '%s': ", i, nm);
    }
    return ST_OK;
}

typedef struct extent { uint64_t start; int64_t i; } extent;

static int extent_cmp(const void *a, const void *b) {
    const extent *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Every tensor's bytes lie inside the file, and no two tensors share a byte. */
static st_status place_tensors(st_gguf *g, size_t header_end, const st_gguf_name *names) {
    size_t pad = (g->alignment - header_end % g->alignment) % g->alignment;
    g->data_offset = header_end + pad;
    if (g->n_tensors == 0) return ST_OK;
    if (g->data_offset > g->size)
        return st_fail(ST_ERR_FORMAT, "the data section starts at offset %zu, past the end of the file (%zu bytes)", g->data_offset, g->size);
    uint64_t room = g->size - g->data_offset;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        st_gguf_tensor *t = &g->tensors[i];
        if (t->offset > room || t->size > room - t->offset) {
            char buf[96];
            return st_fail(ST_ERR_FORMAT, "tensor %" PRId64 " '%s': %zu bytes at data offset %" PRIu64 " run past the end of the data section (%" PRIu64 " bytes from file offset %zu; the file is %zu bytes)",
                           i, shown(names[i].p, names[i].len, buf), t->size, t->offset, room, g->data_offset, g->size);
        }
        t->data = g->base + g->data_offset + t->offset;
    }
    extent *ex = malloc((size_t)g->n_tensors * sizeof *ex);
    if (!ex) return st_fail(ST_ERR_NOMEM, "tensor extents: out of memory");
    int sorted = 1;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        ex[i] = (extent){g->tensors[i].offset, i};
        if (i && ex[i].start < ex[i - 1].start) sorted = 0;
    }
    if (!sorted) qsort(ex, (size_t)g->n_tensors, sizeof *ex, extent_cmp);
    st_status s = ST_OK;
    for (int64_t k = 1; k < g->n_tensors && s == ST_OK; k++) {
        const st_gguf_tensor *a = &g->tensors[ex[k - 1].i], *b = &g->tensors[ex[k].i];
        if (a->offset + a->size > b->offset) {
            char ba[96], bb[96];
            s = st_fail(ST_ERR_FORMAT, "tensor '%s' at [%" PRIu64 ", %" PRIu64 ") overlaps tensor '%s' at [%" PRIu64 ", %" PRIu64 ")",
                        shown(names[ex[k - 1].i].p, names[ex[k - 1].i].len, ba), a->offset, a->offset + (uint64_t)a->size,
                        shown(names[ex[k].i].p, names[ex[k].i].len, bb), b->offset, b->offset + (uint64_t)b->size);
        }
    }
    free(ex);
    return s;
}

/* Copies every key and tensor name, NUL-terminated, into one block. */
static st_status copy_names(st_gguf *g, const st_gguf_name *keys, const st_gguf_name *tnames) {
    size_t total = 0;
    for (int64_t i = 0; i < g->n_kv; i++) total += (size_t)keys[i].len + 1;
    for (int64_t i = 0; i < g->n_tensors; i++) total += (size_t)tnames[i].len + 1;
    g->names = malloc(total ? total : 1);
    if (!g->names) return st_fail(ST_ERR_NOMEM, "names: out of memory");
    char *o = g->names;
    for (int64_t i = 0; i < g->n_kv; i++) {
        memcpy(o, keys[i].p, (size_t)keys[i].len);
        g->kv[i].key = o;
        o += keys[i].len;
        *o++ = 0;
    }
    for (int64_t i = 0; i < g->n_tensors; i++) {
        memcpy(o, tnames[i].p, (size_t)tnames[i].len);
        g->tensors[i].name = o;
        o += tnames[i].len;
        *o++ = 0;
    }
    return ST_OK;
}

static st_status parse(st_gguf *g) {
    reader r = {g->base, g->size, 0, (int64_t)(g->size / MIN_ARRAY_BYTES)};
    ST_TRY(parse_header(&r, g));
    g->kv = calloc((size_t)g->n_kv + 1, sizeof *g->kv);
    g->tensors = calloc((size_t)g->n_tensors + 1, sizeof *g->tensors);
    st_gguf_name *keys = calloc((size_t)g->n_kv + 1, sizeof *keys);
    st_gguf_name *tnames = calloc((size_t)g->n_tensors + 1, sizeof *tnames);
    st_status s = ST_OK;
    if (!g->kv || !g->tensors || !keys || !tnames)
        s = st_fail(ST_ERR_NOMEM, "%" PRId64 " keys and %" PRId64 " tensors: out of memory", g->n_kv, g->n_tensors);
    if (s == ST_OK) s = parse_kvs(&r, g, keys);
    if (s == ST_OK) s = read_alignment(g, keys);
    if (s == ST_OK) s = parse_tensors(&r, g, tnames);
    if (s == ST_OK) s = place_tensors(g, r.pos, tnames);
    if (s == ST_OK) s = copy_names(g, keys, tnames);
    free(keys);
    free(tnames);
    return s;
}

static st_status open_parsed(st_gguf *g, st_gguf **out) {
    st_status s = parse(g);
    if (s != ST_OK) {
        st_fail_context(s, "%s: ", g->path);
        st_gguf_close(g);
        return s;
    }
    *out = g;
    return ST_OK;
}

st_status st_gguf_open_memory(const void *data, size_t size, const char *name, st_gguf **out) {
    *out = NULL;
    st_gguf *g = calloc(1, sizeof *g);
    if (g) g->path = strdup(name ? name : "<memory>");
    if (!g || !g->path) {
        if (g) free(g);
        return st_fail(ST_ERR_NOMEM, "%s: out of memory", name ? name : "<memory>");
    }
    g->base = data ? data : (const unsigned char *)"";
    g->size = data ? size : 0;
    return open_parsed(g, out);
}

st_status st_gguf_open(const char *path, st_gguf **out) {
    *out = NULL;
    st_gguf *g = calloc(1, sizeof *g);
    if (g) g->path = strdup(path);
    if (!g || !g->path) {
        if (g) free(g);
        return st_fail(ST_ERR_NOMEM, "%s: out of memory", path);
    }
    st_status s = st_map_file(path, &g->map);
    if (s != ST_OK) {
        st_gguf_close(g);
        return s;
    }
    g->base = g->map.data ? g->map.data : (const unsigned char *)"";
    g->size = g->map.size;
    return open_parsed(g, out);
}

void st_gguf_close(st_gguf *g) {
    if (!g) return;
    if (g->kv)
        for (int64_t i = 0; i < g->n_kv; i++) free_value(&g->kv[i].value);
    free(g->kv);
    free(g->tensors);
    free(g->names);
    free(g->kv_slots);
    free(g->tensor_slots);
    st_unmap_file(&g->map);
    free(g->path);
    free(g);
}

/* ---- lookups ---- */

const char *st_gguf_path(const st_gguf *g) { return g->path; }
uint32_t st_gguf_version(const st_gguf *g) { return g->version; }
size_t st_gguf_alignment(const st_gguf *g) { return g->alignment; }
size_t st_gguf_data_offset(const st_gguf *g) { return g->data_offset; }
size_t st_gguf_file_size(const st_gguf *g) { return g->size; }
int64_t st_gguf_n_kv(const st_gguf *g) { return g->n_kv; }
int64_t st_gguf_n_tensors(const st_gguf *g) { return g->n_tensors; }

const char *st_gguf_kv_key(const st_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? g->kv[i].key : NULL;
}

const st_gguf_value *st_gguf_kv_value(const st_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? &g->kv[i].value : NULL;
}

const st_gguf_tensor *st_gguf_tensor_at(const st_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}
