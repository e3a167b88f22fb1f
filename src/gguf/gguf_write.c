/* gguf_write.c: writing a GGUF v3 file, for tools and tests.
 *
 * Keys and tensor declarations are collected in memory (keys already serialized, in the order they
 * were set); st_gguf_writer_begin writes the header and tensor infos to a temporary file beside the
 * target, each tensor's bytes are then streamed in declaration order with zero padding to the
 * alignment, and st_gguf_writer_finish fsyncs and renames the file into place, so a reader never
 * sees a half-written file under the target name. The writer refuses what the reader would refuse
 * (empty or duplicate names, bad shapes, a non-power-of-two alignment), so what it writes opens. */
#include "gguf/gguf_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "quant/types.h"

typedef struct bytes {
    unsigned char *p;
    size_t len, cap;
    int oom;
} bytes;

static void put(bytes *b, const void *p, size_t n) {
    if (b->oom) return;
    if (n > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n) {
            if (cap > SIZE_MAX / 2) {
                b->oom = 1;
                return;
            }
            cap *= 2;
        }
        unsigned char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void put_u32(bytes *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(bytes *b, uint64_t v) { put(b, &v, 8); }
static void put_str(bytes *b, const char *s, size_t len) {
    put_u64(b, len);
    put(b, s, len);
}

/* A string-keyed set, to refuse duplicate keys and tensor names. */
typedef struct name_set {
    char **names;
    size_t n, cap; /* cap: power of two, or 0 */
} name_set;

static uint64_t fnv(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int set_has(const name_set *set, const char *s) {
    if (!set->cap) return 0;
    for (size_t h = fnv(s) & (set->cap - 1); set->names[h]; h = (h + 1) & (set->cap - 1))
        if (!strcmp(set->names[h], s)) return 1;
    return 0;
}

static void set_put_slot(char **names, size_t cap, char *s) {
    size_t h = fnv(s) & (cap - 1);
    while (names[h]) h = (h + 1) & (cap - 1);
    names[h] = s;
}

/* Adds a copy of s, which the set owns; *copy (if asked) points at it. */
static st_status set_add(name_set *set, const char *s, const char **copy_out) {
    if (2 * (set->n + 1) > set->cap) {
        size_t cap = set->cap ? 2 * set->cap : 64;
        char **names = calloc(cap, sizeof *names);
        if (!names) return st_fail(ST_ERR_NOMEM, "gguf writer: out of memory");
        for (size_t i = 0; i < set->cap; i++)
            if (set->names[i]) set_put_slot(names, cap, set->names[i]);
        free(set->names);
        set->names = names;
        set->cap = cap;
    }
    char *copy = strdup(s);
    if (!copy) return st_fail(ST_ERR_NOMEM, "gguf writer: out of memory");
    set_put_slot(set->names, set->cap, copy);
    set->n++;
    if (copy_out) *copy_out = copy;
    return ST_OK;
}

static void set_free(name_set *set) {
    for (size_t i = 0; i < set->cap; i++) free(set->names[i]);
    free(set->names);
}

typedef struct wtensor {
    const char *name; /* owned by the writer's tensor name set */
    uint32_t type;
    int n_dims;
    int64_t ne[ST_GGUF_MAX_DIMS];
    size_t size;
    uint64_t offset;
} wtensor;

struct st_gguf_wvalue {
    bytes body; /* u32 element type, u64 count, the elements */
    int depth;  /* levels of arrays, this one included */
};

struct st_gguf_writer {
    bytes kv;
    uint64_t n_kv;
    name_set keys, tensor_names;
    uint32_t alignment;
    wtensor *tensors;
    size_t n_tensors, cap_tensors;
    FILE *f;
    char *path, *tmp;
    size_t next;      /* the next tensor whose data is due */
    int done;         /* begun once; no more declarations */
};

st_status st_gguf_writer_new(st_gguf_writer **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return st_fail(ST_ERR_NOMEM, "gguf writer: out of memory");
    (*out)->alignment = ST_GGUF_DEFAULT_ALIGNMENT;
    return ST_OK;
}

static void discard_file(st_gguf_writer *w) {
    if (w->f) fclose(w->f);
    w->f = NULL;
    if (w->tmp) unlink(w->tmp);
}

void st_gguf_writer_free(st_gguf_writer *w) {
    if (!w) return;
    discard_file(w);
    free(w->kv.p);
    set_free(&w->keys);
    set_free(&w->tensor_names);
    free(w->tensors);
    free(w->path);
    free(w->tmp);
    free(w);
}

/* ---- keys ---- */

static st_status check_key(st_gguf_writer *w, const char *key) {
    if (w->done) return st_fail(ST_ERR_INVALID, "gguf writer: key '%s' set after the file was begun", key ? key : "");
    if (!key || !*key) return st_fail(ST_ERR_INVALID, "gguf writer: a key is empty");
    if (set_has(&w->keys, key)) return st_fail(ST_ERR_INVALID, "gguf writer: key '%s' is set twice", key);
    return ST_OK;
}

/* Appends key, type and the value's serialized bytes. */
static st_status add_kv(st_gguf_writer *w, const char *key, uint32_t type, const void *payload, size_t len) {
    ST_TRY(check_key(w, key));
    if (!strcmp(key, "general.alignment") && type != ST_GGUF_UINT32)
        return st_fail(ST_ERR_INVALID, "gguf writer: key 'general.alignment' must be a u32, not a %s", st_gguf_vtype_name(type));
    ST_TRY(set_add(&w->keys, key, NULL));
    put_str(&w->kv, key, strlen(key));
    put_u32(&w->kv, type);
    put(&w->kv, payload, len);
    if (w->kv.oom) return st_fail(ST_ERR_NOMEM, "gguf writer: key '%s': out of memory", key);
    w->n_kv++;
    return ST_OK;
}

st_status st_gguf_set_u8(st_gguf_writer *w, const char *key, uint8_t v) { return add_kv(w, key, ST_GGUF_UINT8, &v, 1); }
st_status st_gguf_set_i8(st_gguf_writer *w, const char *key, int8_t v) { return add_kv(w, key, ST_GGUF_INT8, &v, 1); }
st_status st_gguf_set_u16(st_gguf_writer *w, const char *key, uint16_t v) { return add_kv(w, key, ST_GGUF_UINT16, &v, 2); }
st_status st_gguf_set_i16(st_gguf_writer *w, const char *key, int16_t v) { return add_kv(w, key, ST_GGUF_INT16, &v, 2); }
st_status st_gguf_set_i32(st_gguf_writer *w, const char *key, int32_t v) { return add_kv(w, key, ST_GGUF_INT32, &v, 4); }
st_status st_gguf_set_u64(st_gguf_writer *w, const char *key, uint64_t v) { return add_kv(w, key, ST_GGUF_UINT64, &v, 8); }
st_status st_gguf_set_i64(st_gguf_writer *w, const char *key, int64_t v) { return add_kv(w, key, ST_GGUF_INT64, &v, 8); }
st_status st_gguf_set_f32(st_gguf_writer *w, const char *key, float v) { return add_kv(w, key, ST_GGUF_FLOAT32, &v, 4); }
st_status st_gguf_set_f64(st_gguf_writer *w, const char *key, double v) { return add_kv(w, key, ST_GGUF_FLOAT64, &v, 8); }

st_status st_gguf_set_u32(st_gguf_writer *w, const char *key, uint32_t v) {
    int is_alignment = key && !strcmp(key, "general.alignment");
    if (is_alignment && (v == 0 || (v & (v - 1))))
        return st_fail(ST_ERR_INVALID, "gguf writer: general.alignment %" PRIu32 " is not a non-zero power of two", v);
    ST_TRY(add_kv(w, key, ST_GGUF_UINT32, &v, 4));
    if (is_alignment) w->alignment = v;
    return ST_OK;
}

st_status st_gguf_set_bool(st_gguf_writer *w, const char *key, int v) {
    uint8_t b = v ? 1 : 0;
    return add_kv(w, key, ST_GGUF_BOOL, &b, 1);
}

st_status st_gguf_set_str(st_gguf_writer *w, const char *key, const char *s) {
    if (!s) return st_fail(ST_ERR_INVALID, "gguf writer: key '%s': NULL string", key ? key : "");
    size_t len = strlen(s);
    bytes b = {0};
    put_str(&b, s, len);
    st_status st = b.oom ? st_fail(ST_ERR_NOMEM, "gguf writer: out of memory") : add_kv(w, key, ST_GGUF_STRING, b.p, b.len);
    free(b.p);
    return st;
}

/* ---- arrays ---- */

static int is_fixed(st_gguf_vtype t) { return t < ST_GGUF_VTYPE_COUNT && st_gguf_vtype_size(t) > 0; }

/* Serializes an array of fixed-size scalars; NULL if the arguments are not one. */
static st_gguf_wvalue *fixed_array(st_gguf_vtype elem, const void *data, uint64_t n) {
    if (!is_fixed(elem) || (n && !data)) return NULL;
    size_t es = st_gguf_vtype_size(elem);
    if (n > SIZE_MAX / es) return NULL;
    if (elem == ST_GGUF_BOOL)
        for (uint64_t i = 0; i < n; i++)
            if (((const uint8_t *)data)[i] > 1) return NULL;
    st_gguf_wvalue *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->depth = 1;
    put_u32(&v->body, elem);
    put_u64(&v->body, n);
    put(&v->body, data, (size_t)n * es);
    if (v->body.oom) {
        free(v->body.p);
        free(v);
        return NULL;
    }
    return v;
}

static void wvalue_free(st_gguf_wvalue *v) {
    if (!v) return;
    free(v->body.p);
    free(v);
}

st_gguf_wvalue *st_gguf_wvalue_array(st_gguf_vtype elem, const void *data, uint64_t n) {
    return fixed_array(elem, data, n);
}

st_gguf_wvalue *st_gguf_wvalue_str_array(const char *const *strs, uint64_t n) {
    if (n && !strs) return NULL;
    st_gguf_wvalue *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->depth = 1;
    put_u32(&v->body, ST_GGUF_STRING);
    put_u64(&v->body, n);
    for (uint64_t i = 0; i < n && !v->body.oom; i++) {
        if (!strs[i]) v->body.oom = 1;
        else put_str(&v->body, strs[i], strlen(strs[i]));
    }
    if (v->body.oom) {
        wvalue_free(v);
        return NULL;
    }
    return v;
}

st_gguf_wvalue *st_gguf_wvalue_nested(st_gguf_wvalue **inner, uint64_t n) {
    int ok = !(n && !inner);
    int depth = 0;
    for (uint64_t i = 0; ok && i < n; i++) {
        if (!inner[i]) ok = 0;
        else if (inner[i]->depth > depth) depth = inner[i]->depth;
    }
    st_gguf_wvalue *v = ok && depth + 1 <= ST_GGUF_MAX_DEPTH ? calloc(1, sizeof *v) : NULL;
    if (v) {
        v->depth = depth + 1;
        put_u32(&v->body, ST_GGUF_ARRAY);
        put_u64(&v->body, n);
        for (uint64_t i = 0; i < n; i++) put(&v->body, inner[i]->body.p, inner[i]->body.len);
        if (v->body.oom) {
            wvalue_free(v);
            v = NULL;
        }
    }
    for (uint64_t i = 0; inner && i < n; i++) wvalue_free(inner[i]);
    return v;
}

st_status st_gguf_set_value(st_gguf_writer *w, const char *key, st_gguf_wvalue *v) {
    if (!v) return st_fail(ST_ERR_INVALID, "gguf writer: key '%s': the array value could not be built (bad arguments, too deep or out of memory)",
                           key ? key : "");
    st_status s = add_kv(w, key, ST_GGUF_ARRAY, v->body.p, v->body.len);
    wvalue_free(v);
    return s;
}

st_status st_gguf_set_array(st_gguf_writer *w, const char *key, st_gguf_vtype elem, const void *data, uint64_t n) {
    if (!is_fixed(elem))
        return st_fail(ST_ERR_INVALID, "gguf writer: key '%s': %s is not a fixed-size element type", key ? key : "", st_gguf_vtype_name(elem));
    st_gguf_wvalue *v = fixed_array(elem, data, n);
    if (!v) return st_fail(ST_ERR_INVALID, "gguf writer: key '%s': bad array (NULL data, a bool not 0 or 1, or out of memory)", key ? key : "");
    return st_gguf_set_value(w, key, v);
}

st_status st_gguf_set_str_array(st_gguf_writer *w, const char *key, const char *const *strs, uint64_t n) {
    st_gguf_wvalue *v = st_gguf_wvalue_str_array(strs, n);
    if (!v) return st_fail(ST_ERR_INVALID, "gguf writer: key '%s': bad string array (a NULL string, or out of memory)", key ? key : "");
    return st_gguf_set_value(w, key, v);
}

/* ---- tensors ---- */

st_status st_gguf_add_tensor(st_gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne) {
    if (w->done) return st_fail(ST_ERR_INVALID, "gguf writer: tensor '%s' declared after the file was begun", name ? name : "");
    if (!name || !*name) return st_fail(ST_ERR_INVALID, "gguf writer: a tensor name is empty");
    if (set_has(&w->tensor_names, name)) return st_fail(ST_ERR_INVALID, "gguf writer: tensor '%s' is declared twice", name);
    if (n_dims < 1 || n_dims > ST_GGUF_MAX_DIMS)
        return st_fail(ST_ERR_INVALID, "gguf writer: tensor '%s': %d dimensions, expected 1 to %d", name, n_dims, ST_GGUF_MAX_DIMS);
    const st_type_info *ti = st_type_get(type);
    if (!ti) return st_fail(ST_ERR_INVALID, "gguf writer: tensor '%s': type id %" PRIu32 " is not a known type", name, type);
    wtensor t = {.type = type, .n_dims = n_dims};
    int64_t n = 1;
    for (int d = 0; d < ST_GGUF_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] <= 0 || n > INT64_MAX / t.ne[d])
            return st_fail(ST_ERR_INVALID, "gguf writer: tensor '%s': dimension %d is %" PRId64 " (must be positive, product within 64 bits)",
                           name, d, t.ne[d]);
        n *= t.ne[d];
    }
    if (t.ne[0] % ti->block_size)
        return st_fail(ST_ERR_INVALID, "gguf writer: tensor '%s': row of %" PRId64 " elements is not a multiple of the %s block size %d",
                       name, t.ne[0], ti->name, ti->block_size);
    uint64_t blocks = (uint64_t)(n / ti->block_size);
    if (blocks > (SIZE_MAX / 2) / (uint64_t)ti->type_size)
        return st_fail(ST_ERR_INVALID, "gguf writer: tensor '%s': byte size overflows", name);
    t.size = (size_t)blocks * (size_t)ti->type_size;
    if (w->n_tensors == w->cap_tensors) {
        size_t cap = w->cap_tensors ? 2 * w->cap_tensors : 16;
        wtensor *ts = realloc(w->tensors, cap * sizeof *ts);
        if (!ts) return st_fail(ST_ERR_NOMEM, "gguf writer: out of memory");
        w->tensors = ts;
        w->cap_tensors = cap;
    }
    ST_TRY(set_add(&w->tensor_names, name, &t.name));
    w->tensors[w->n_tensors++] = t;
    return ST_OK;
}

/* ---- the file ---- */

static size_t padding(uint64_t pos, size_t alignment) { return (size_t)((alignment - pos % alignment) % alignment); }

static st_status write_bytes(st_gguf_writer *w, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, w->f) != n) {
        int e = errno;
        discard_file(w);
        return st_fail(ST_ERR_IO, "%s: write failed: %s", w->path, strerror(e));
    }
    return ST_OK;
}

static st_status write_zeros(st_gguf_writer *w, size_t n) {
    static const unsigned char zeros[256];
    while (n) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        ST_TRY(write_bytes(w, zeros, k));
        n -= k;
    }
    return ST_OK;
}

st_status st_gguf_writer_begin(st_gguf_writer *w, const char *path) {
    if (w->done) return st_fail(ST_ERR_INVALID, "gguf writer: begun twice");
    w->done = 1;
    w->path = strdup(path);
    size_t plen = strlen(path);
    w->tmp = malloc(plen + 8);
    if (!w->path || !w->tmp) return st_fail(ST_ERR_NOMEM, "%s: out of memory", path);
    memcpy(w->tmp, path, plen);
    memcpy(w->tmp + plen, ".XXXXXX", 8);
    int fd = mkstemp(w->tmp);
    if (fd < 0) {
        int e = errno;
        free(w->tmp);
        w->tmp = NULL;
        return st_fail(ST_ERR_IO, "%s: cannot create a temporary file beside it: %s", path, strerror(e));
    }
    fchmod(fd, 0644);
    w->f = fdopen(fd, "wb");
    if (!w->f) {
        int e = errno;
        close(fd);
        unlink(w->tmp);
        return st_fail(ST_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }

    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        w->tensors[i].offset = offset;
        offset += w->tensors[i].size + padding(w->tensors[i].size, w->alignment);
    }
    bytes h = {0};
    put(&h, "GGUF", 4);
    put_u32(&h, 3);
    put_u64(&h, w->n_tensors);
    put_u64(&h, w->n_kv);
    put(&h, w->kv.p, w->kv.len);
    for (size_t i = 0; i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        put_str(&h, t->name, strlen(t->name));
        put_u32(&h, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) put_u64(&h, (uint64_t)t->ne[d]);
        put_u32(&h, t->type);
        put_u64(&h, t->offset);
    }
    st_status s = h.oom ? st_fail(ST_ERR_NOMEM, "%s: header: out of memory", path) : write_bytes(w, h.p, h.len);
    if (s == ST_OK) s = write_zeros(w, padding(h.len, w->alignment));
    free(h.p);
    if (s != ST_OK) discard_file(w);
    return s;
}

st_status st_gguf_writer_tensor_data(st_gguf_writer *w, const void *data, size_t size) {
    if (!w->f) return st_fail(ST_ERR_INVALID, "gguf writer: tensor data written while no file is open (begin it first; or a write failed)");
    if (w->next >= w->n_tensors)
        return st_fail(ST_ERR_INVALID, "%s: tensor data written past the %zu declared tensors", w->path, w->n_tensors);
    const wtensor *t = &w->tensors[w->next];
    if (size != t->size)
        return st_fail(ST_ERR_INVALID, "%s: tensor '%s' has %zu bytes, got %zu", w->path, t->name, t->size, size);
    if (size && !data) return st_fail(ST_ERR_INVALID, "%s: tensor '%s': NULL data", w->path, t->name);
    ST_TRY(write_bytes(w, data, size));
    ST_TRY(write_zeros(w, padding(size, w->alignment)));
    w->next++;
    return ST_OK;
}

/* Makes the rename itself durable. */
static void sync_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash) memcpy(dir, ".", 2);
    else if (slash == path) memcpy(dir, "/", 2);
    else if ((size_t)(slash - path) < sizeof dir) {
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = 0;
    } else return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

st_status st_gguf_writer_finish(st_gguf_writer *w) {
    if (!w->f) return st_fail(ST_ERR_INVALID, "gguf writer: finish without an open file (begin it first; or a write failed)");
    if (w->next < w->n_tensors)
        return st_fail(ST_ERR_INVALID, "%s: tensor '%s' (%zu of %zu) has no data yet", w->path, w->tensors[w->next].name, w->next + 1,
                       w->n_tensors);
    FILE *f = w->f;
    w->f = NULL;
    int bad = fflush(f) != 0 || fsync(fileno(f)) != 0;
    int e = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (!bad && rename(w->tmp, w->path) != 0) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        unlink(w->tmp);
        return st_fail(ST_ERR_IO, "%s: cannot complete the file: %s", w->path, strerror(e));
    }
    free(w->tmp);
    w->tmp = NULL;
    sync_dir(w->path);
    return ST_OK;
}
