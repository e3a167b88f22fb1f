/* test_gguf_hostile.c: the GGUF reader against broken and hostile files. Nothing may crash (this
 * test runs under ASan/UBSan in CI, with every input in a buffer of exactly its size), every refusal
 * is ST_ERR_FORMAT (ST_ERR_UNSUPPORTED for old or byte-swapped versions) with a message naming the
 * file and the key or tensor at fault, and whatever opens is fully readable through the API.
 *
 * Three kinds of input: every truncation of a small valid file written by the writer; every
 * single-byte corruption of its header region; and one hand-built file per validation rule. */
#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "quant/types.h"
#include "gguf_walk.h"
#include "test.h"

#define NAME "hostile.gguf"

/* ---- opening a byte string from a buffer of exactly its size ---- */

static void walk(const st_gguf *g) {
    for (int64_t i = 0; i < st_gguf_n_kv(g); i++) {
        gguf_walk_sink += strlen(st_gguf_kv_key(g, i));
        CHECK(st_gguf_find(g, st_gguf_kv_key(g, i)) == st_gguf_kv_value(g, i));
        CHECK(gguf_walk_value(st_gguf_kv_value(g, i)));
    }
    for (int64_t i = 0; i < st_gguf_n_tensors(g); i++) {
        const st_gguf_tensor *t = st_gguf_tensor_at(g, i);
        CHECK(st_gguf_find_tensor(g, t->name) == t);
        const unsigned char *p = t->data;
        for (size_t k = 0; k < t->size; k += 7) gguf_walk_sink += p[k];
        if (t->size) gguf_walk_sink += p[t->size - 1];
    }
}

static st_status open_bytes(const unsigned char *bytes, size_t n, int *walked) {
    unsigned char *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, bytes, n);
    st_gguf *g = NULL;
    st_status s = st_gguf_open_memory(n ? copy : NULL, n, NAME, &g);
    if (s == ST_OK) {
        walk(g);
        st_gguf_close(g);
        if (walked) (*walked)++;
    } else {
        CHECK(g == NULL);
        CHECKF(!strncmp(st_last_error(), NAME ": ", strlen(NAME) + 2), "message does not name the file: %s", st_last_error());
    }
    free(copy);
    return s;
}

/* ---- a small valid file, from the writer ---- */

static unsigned char *valid;
static size_t valid_size, valid_data_offset, valid_data_end;

static void make_valid(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/strata-hostile-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0) SKIP("cannot create a temporary file");
    close(fd);
    st_gguf_writer *w;
    st_gguf_writer_new(&w);
    st_gguf_set_str(w, "general.architecture", "qwen3");
    st_gguf_set_u32(w, "qwen3.block_count", 2);
    st_gguf_set_bool(w, "b", 1);
    st_gguf_set_f32(w, "qwen3.rope.freq_base", 1e6f);
    const char *toks[] = {"a", "bc", ""};
    st_gguf_set_str_array(w, "tokenizer.ggml.tokens", toks, 3);
    int32_t types[] = {1, 3, 1};
    st_gguf_set_array(w, "tokenizer.ggml.token_type", ST_GGUF_INT32, types, 3);
    uint16_t one = 7;
    st_gguf_wvalue *inner[] = {st_gguf_wvalue_array(ST_GGUF_UINT16, &one, 1), st_gguf_wvalue_str_array(toks, 2)};
    st_gguf_set_value(w, "nested", st_gguf_wvalue_nested(inner, 2));
    int64_t ne_a[] = {8}, ne_b[] = {32, 2};
    st_gguf_add_tensor(w, "a", ST_TYPE_F32, 1, ne_a);
    st_gguf_add_tensor(w, "b", ST_TYPE_Q8_0, 2, ne_b);
    CHECK(st_gguf_writer_begin(w, path) == ST_OK);
    unsigned char data[68];
    for (int i = 0; i < 68; i++) data[i] = (unsigned char)(i * 37);
    st_gguf_writer_tensor_data(w, data, 32);
    st_gguf_writer_tensor_data(w, data, 68);
    CHECKF(st_gguf_writer_finish(w) == ST_OK, "%s", st_last_error());
    st_gguf_writer_free(w);

    st_gguf *g = NULL;
    CHECKF(st_gguf_open(path, &g) == ST_OK, "%s", st_last_error());
    /* Without the valid file nothing below can run: that is a failure (of the writer or the
     * reader), never a skip. */
    if (!g) {
        unlink(path);
        exit(test_report("test_gguf_hostile"));
    }
    valid_size = st_gguf_file_size(g);
    valid_data_offset = st_gguf_data_offset(g);
    const st_gguf_tensor *b = st_gguf_find_tensor(g, "b");
    valid_data_end = valid_data_offset + b->offset + b->size;
    st_gguf_close(g);
    FILE *f = fopen(path, "rb");
    valid = malloc(valid_size);
    CHECK(f && fread(valid, 1, valid_size, f) == valid_size);
    if (f) fclose(f);
    unlink(path);
}

/* Every prefix shorter than the last tensor's end is refused; longer ones only lose padding. */
static void check_truncations(void) {
    int refused_right = 1, named_tensor = 1;
    for (size_t n = 0; n < valid_size; n++) {
        st_status s = open_bytes(valid, n, NULL);
        if (n < valid_data_end) {
            if (s != ST_ERR_FORMAT) {
                refused_right = 0;
                fprintf(stderr, "truncation to %zu bytes: status %d\n", n, s);
            }
            /* cut inside the data section: the message names the tensor whose bytes are missing */
            if (n >= valid_data_offset && !strstr(st_last_error(), "tensor")) named_tensor = 0;
        } else if (s != ST_OK) {
            refused_right = 0;
            fprintf(stderr, "truncation to %zu bytes (only padding lost): %s\n", n, st_last_error());
        }
    }
    CHECK(refused_right);
    CHECK(named_tensor);
    CHECK(open_bytes(valid, valid_size, NULL) == ST_OK);
}

/* Every byte of the header region, set to several values: no crash, a named refusal or a file
 * that reads cleanly end to end. */
static void check_corruptions(void) {
    unsigned char *buf = malloc(valid_size);
    int walked = 0, refused = 0, well_formed = 1;
    for (size_t pos = 0; pos < valid_data_offset; pos++) {
        const unsigned char orig = valid[pos];
        const unsigned char values[] = {(unsigned char)(orig ^ 0xff), (unsigned char)(orig + 1), (unsigned char)(orig - 1), 0, 0x80, 0x7f};
        for (size_t k = 0; k < sizeof values; k++) {
            if (values[k] == orig) continue;
            memcpy(buf, valid, valid_size);
            buf[pos] = values[k];
            st_status s = open_bytes(buf, valid_size, &walked);
            if (s != ST_OK) {
                refused++;
                if (s != ST_ERR_FORMAT && s != ST_ERR_UNSUPPORTED) well_formed = 0;
            }
        }
    }
    fprintf(stderr, "header corruptions: %d refused, %d opened and read cleanly\n", refused, walked);
    CHECK(well_formed);
    CHECK(refused > 0 && walked > 0);
    free(buf);
}

/* ---- hand-built files, one per rule ---- */

typedef struct bb { unsigned char p[4096]; size_t n; } bb;

static void raw(bb *b, const void *p, size_t n) {
    if (b->n + n > sizeof b->p) abort();
    memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void u32(bb *b, uint32_t v) { raw(b, &v, 4); }
static void u64(bb *b, uint64_t v) { raw(b, &v, 8); }
static void str(bb *b, const char *s) {
    u64(b, strlen(s));
    raw(b, s, strlen(s));
}
static void header(bb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    b->n = 0;
    raw(b, "GGUF", 4);
    u32(b, version);
    u64(b, n_tensors);
    u64(b, n_kv);
}
static void kv_u32(bb *b, const char *key, uint32_t v) {
    str(b, key);
    u32(b, ST_GGUF_UINT32);
    u32(b, v);
}
static void tensor(bb *b, const char *name, uint32_t n_dims, const int64_t *ne, uint32_t type, uint64_t offset) {
    str(b, name);
    u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) u64(b, (uint64_t)ne[d]);
    u32(b, type);
    u64(b, offset);
}
/* Pads to 32 and appends n bytes of tensor data. */
static void data(bb *b, size_t n) {
    while (b->n % 32) b->p[b->n++] = 0;
    for (size_t i = 0; i < n; i++) b->p[b->n++] = (unsigned char)i;
}

/* Opens b, expects status s and every given fragment in the message. */
static void expect_(int line, const bb *b, st_status want, const char *frag1, const char *frag2) {
    st_status s = open_bytes(b->p, b->n, NULL);
    const char *m = st_last_error();
    if (getenv("GGUF_VERBOSE")) fprintf(stderr, "%d: %s\n", line, s == ST_OK ? "ok" : m);
    int ok = s == want && (want == ST_OK || ((!frag1 || strstr(m, frag1)) && (!frag2 || strstr(m, frag2))));
    if (!ok) test_failed++, fprintf(stderr, "line %d: status %d (want %d), message: %s\n", line, s, want, want == ST_OK && s == ST_OK ? "" : m);
    else test_passed++;
}
#define expect(b, s, f1, f2) expect_(__LINE__, b, s, f1, f2)

static void check_header_rules(void) {
    bb b;
    b.n = 0;
    expect(&b, ST_ERR_FORMAT, "magic", NULL);
    raw(&b, "GGU", 3);
    expect(&b, ST_ERR_FORMAT, "magic", NULL);
    header(&b, 3, 0, 0);
    b.p[3] = 'G';
    expect(&b, ST_ERR_FORMAT, "magic", "GGUG");
    header(&b, 3, 0, 0);
    expect(&b, ST_OK, NULL, NULL);
    b.n = 10;
    expect(&b, ST_ERR_FORMAT, "tensor count", NULL);
    header(&b, 2, 0, 0);
    expect(&b, ST_ERR_UNSUPPORTED, "version 2", "only version 3");
    header(&b, 1, 0, 0);
    expect(&b, ST_ERR_UNSUPPORTED, "version 1", NULL);
    header(&b, 0x03000000u, 0, 0);
    expect(&b, ST_ERR_UNSUPPORTED, "big-endian", NULL);
    header(&b, 4, 0, 0);
    expect(&b, ST_ERR_FORMAT, "version 4", NULL);
    header(&b, 0, 0, 0);
    expect(&b, ST_ERR_FORMAT, "version 0", NULL);
    header(&b, 3, 0, UINT64_MAX);
    expect(&b, ST_ERR_FORMAT, "18446744073709551615 keys", NULL);
    header(&b, 3, 1ull << 60, 0);
    expect(&b, ST_ERR_FORMAT, "tensors", NULL);
    header(&b, 3, 0, 1);
    expect(&b, ST_ERR_FORMAT, "keys", NULL); /* one key claimed, no bytes for it */
    header(&b, 3, 1, 1);
    raw(&b, "0123456789012345678901234567890123456789", 40);
    expect(&b, ST_ERR_FORMAT, "1 tensors", "after 1 keys"); /* room for either, not for both */
}

static void check_kv_rules(void) {
    bb b;
    header(&b, 3, 0, 1);
    u64(&b, 0xffffffffull);
    raw(&b, "general.name", 12);
    u32(&b, 0);
    expect(&b, ST_ERR_FORMAT, "key 0", "4294967295 runs past the end");

    header(&b, 3, 0, 1);
    str(&b, "general.name");
    u32(&b, ST_GGUF_STRING);
    u64(&b, 0xffffffffull);
    raw(&b, "abcd", 4);
    expect(&b, ST_ERR_FORMAT, "key 0 'general.name'", "string length 4294967295 runs past the end");

    header(&b, 3, 0, 1);
    str(&b, "");
    u32(&b, ST_GGUF_UINT8);
    raw(&b, "x", 1);
    raw(&b, "xxxxxxxxxx", 10);
    expect(&b, ST_ERR_FORMAT, "key 0", "empty");

    header(&b, 3, 0, 1);
    u64(&b, 3);
    raw(&b, "a\0b", 3);
    u32(&b, ST_GGUF_UINT8);
    raw(&b, "x", 1);
    expect(&b, ST_ERR_FORMAT, "key 0", "NUL");

    header(&b, 3, 0, 2);
    kv_u32(&b, "dup.key", 1);
    kv_u32(&b, "dup.key", 2);
    expect(&b, ST_ERR_FORMAT, "key 1 'dup.key'", "duplicate of key 0");

    header(&b, 3, 0, 1);
    str(&b, "bad.type");
    u32(&b, 13);
    u64(&b, 0);
    expect(&b, ST_ERR_FORMAT, "'bad.type'", "value type 13");
    header(&b, 3, 0, 1);
    str(&b, "bad.type");
    u32(&b, 0xffffffffu);
    u64(&b, 0);
    expect(&b, ST_ERR_FORMAT, "'bad.type'", "value type 4294967295");

    header(&b, 3, 0, 1);
    str(&b, "b");
    u32(&b, ST_GGUF_BOOL);
    raw(&b, "\x02", 1);
    raw(&b, "padding.....", 12);
    expect(&b, ST_ERR_FORMAT, "'b'", "not 0 or 1");

    header(&b, 3, 0, 1);
    str(&b, "arr");
    u32(&b, ST_GGUF_ARRAY);
    u32(&b, 77);
    u64(&b, 0);
    expect(&b, ST_ERR_FORMAT, "'arr'", "element type 77");

    /* element counts whose byte size overflows, or that the file cannot hold */
    header(&b, 3, 0, 1);
    str(&b, "arr.u64");
    u32(&b, ST_GGUF_ARRAY);
    u32(&b, ST_GGUF_UINT64);
    u64(&b, 1ull << 61);
    u64(&b, 1);
    expect(&b, ST_ERR_FORMAT, "'arr.u64'", "runs past the end");
    header(&b, 3, 0, 1);
    str(&b, "arr.str");
    u32(&b, ST_GGUF_ARRAY);
    u32(&b, ST_GGUF_STRING);
    u64(&b, UINT64_MAX);
    str(&b, "x");
    expect(&b, ST_ERR_FORMAT, "'arr.str'", "strings runs past the end");
    header(&b, 3, 0, 1);
    str(&b, "arr.str");
    u32(&b, ST_GGUF_ARRAY);
    u32(&b, ST_GGUF_STRING);
    u64(&b, 2);
    str(&b, "x");
    u64(&b, 1000);
    raw(&b, "yy", 2);
    expect(&b, ST_ERR_FORMAT, "'arr.str'", "string 1: length 1000");
    header(&b, 3, 0, 1);
    str(&b, "arr.arr");
    u32(&b, ST_GGUF_ARRAY);
    u32(&b, ST_GGUF_ARRAY);
    u64(&b, 1ull << 40);
    u64(&b, 0);
    expect(&b, ST_ERR_FORMAT, "'arr.arr'", "arrays runs past the end");
    /* an inner array's own count, too */
    header(&b, 3, 0, 1);
    str(&b, "arr.arr");
    u32(&b, ST_GGUF_ARRAY);
    u32(&b, ST_GGUF_ARRAY);
    u64(&b, 1);
    u32(&b, ST_GGUF_FLOAT32);
    u64(&b, 1ull << 62);
    expect(&b, ST_ERR_FORMAT, "'arr.arr'", "element 0");

    /* nesting: 8 levels open, 9 do not */
    for (int levels = 8; levels <= 9; levels++) {
        header(&b, 3, 0, 1);
        str(&b, "deep");
        u32(&b, ST_GGUF_ARRAY);
        for (int l = 1; l < levels; l++) {
            u32(&b, ST_GGUF_ARRAY);
            u64(&b, 1);
        }
        u32(&b, ST_GGUF_UINT8);
        u64(&b, 0);
        if (levels == 8) expect(&b, ST_OK, NULL, NULL);
        else expect(&b, ST_ERR_FORMAT, "'deep'", "nested deeper");
    }

    /* general.alignment: a u32, non-zero, a power of two */
    header(&b, 3, 0, 1);
    str(&b, "general.alignment");
    u32(&b, ST_GGUF_UINT64);
    u64(&b, 32);
    expect(&b, ST_ERR_FORMAT, "general.alignment", "must be a u32, is a u64");
    header(&b, 3, 0, 1);
    kv_u32(&b, "general.alignment", 0);
    expect(&b, ST_ERR_FORMAT, "general.alignment", "power of two");
    header(&b, 3, 0, 1);
    kv_u32(&b, "general.alignment", 48);
    expect(&b, ST_ERR_FORMAT, "general.alignment", "48");
    header(&b, 3, 0, 1);
    kv_u32(&b, "general.alignment", 1);
    expect(&b, ST_OK, NULL, NULL);
}

/* One tensor info with the given fields, then its data (n bytes of it). */
static void one_tensor(bb *b, const char *name, uint32_t n_dims, const int64_t *ne, uint32_t type, uint64_t offset, size_t n) {
    header(b, 3, 1, 0);
    tensor(b, name, n_dims, ne, type, offset);
    data(b, n);
}

static void check_tensor_rules(void) {
    bb b;
    int64_t ne[4] = {8, 1, 1, 1};
    one_tensor(&b, "t.ok", 1, ne, ST_TYPE_F32, 0, 32);
    expect(&b, ST_OK, NULL, NULL);
    one_tensor(&b, "t.dims0", 0, ne, ST_TYPE_F32, 0, 32);
    expect(&b, ST_ERR_FORMAT, "'t.dims0'", "0 dimensions");
    one_tensor(&b, "t.dims5", 5, (int64_t[]){8, 1, 1, 1, 1}, ST_TYPE_F32, 0, 32);
    expect(&b, ST_ERR_FORMAT, "'t.dims5'", "5 dimensions");
    one_tensor(&b, "t.zero", 2, (int64_t[]){8, 0}, ST_TYPE_F32, 0, 32);
    expect(&b, ST_ERR_FORMAT, "'t.zero'", "dimension 1 is 0");
    one_tensor(&b, "t.neg", 2, (int64_t[]){8, -3}, ST_TYPE_F32, 0, 32);
    expect(&b, ST_ERR_FORMAT, "'t.neg'", "dimension 1 is -3");
    one_tensor(&b, "t.overflow", 3, (int64_t[]){1ll << 32, 1ll << 32, 2}, ST_TYPE_F32, 0, 32);
    expect(&b, ST_ERR_FORMAT, "'t.overflow'", "overflows");
    one_tensor(&b, "t.bytes", 2, (int64_t[]){1ll << 31, 1ll << 31}, ST_TYPE_F64, 0, 32);
    expect(&b, ST_ERR_FORMAT, "'t.bytes'", NULL); /* 2^62 elements of 8 bytes */
    one_tensor(&b, "t.type", 1, ne, 99, 0, 32);
    expect(&b, ST_ERR_FORMAT, "'t.type'", "type id 99");
    one_tensor(&b, "t.type4", 1, ne, 4, 0, 32); /* a hole in the type ids (the removed q4_2) */
    expect(&b, ST_ERR_FORMAT, "'t.type4'", "type id 4");
    one_tensor(&b, "t.block", 2, (int64_t[]){33, 2}, ST_TYPE_Q8_0, 0, 128);
    expect(&b, ST_ERR_FORMAT, "'t.block'", "block size 32");
    one_tensor(&b, "t.misaligned", 1, ne, ST_TYPE_F32, 4, 64);
    expect(&b, ST_ERR_FORMAT, "'t.misaligned'", "not a multiple of the alignment 32");
    one_tensor(&b, "t.past", 1, ne, ST_TYPE_F32, 1ull << 40, 32);
    expect(&b, ST_ERR_FORMAT, "'t.past'", "run past the end");
    one_tensor(&b, "t.wrap", 1, ne, ST_TYPE_F32, UINT64_MAX - 31, 32);
    expect(&b, ST_ERR_FORMAT, "'t.wrap'", "run past the end");
    one_tensor(&b, "t.short", 1, ne, ST_TYPE_F32, 0, 31);
    expect(&b, ST_ERR_FORMAT, "'t.short'", "run past the end");
    one_tensor(&b, "", 1, ne, ST_TYPE_F32, 0, 32);
    expect(&b, ST_ERR_FORMAT, "tensor 0", "empty");

    header(&b, 3, 1, 0);
    u64(&b, 1ull << 50);
    raw(&b, "name", 4);
    data(&b, 64);
    expect(&b, ST_ERR_FORMAT, "tensor 0", "name length");

    /* the data section starts past the end of the file */
    header(&b, 3, 1, 1);
    kv_u32(&b, "general.alignment", 1024);
    tensor(&b, "t.far", 1, ne, ST_TYPE_F32, 0);
    expect(&b, ST_ERR_FORMAT, "data section starts at offset 1024", NULL);

    header(&b, 3, 2, 0);
    tensor(&b, "same", 1, ne, ST_TYPE_F32, 0);
    tensor(&b, "same", 1, ne, ST_TYPE_F32, 32);
    data(&b, 64);
    expect(&b, ST_ERR_FORMAT, "tensor 1 'same'", "duplicate of tensor 0");

    /* overlaps, declared in either order */
    header(&b, 3, 2, 0);
    tensor(&b, "first", 1, (int64_t[]){16}, ST_TYPE_F32, 0);
    tensor(&b, "second", 1, ne, ST_TYPE_F32, 32);
    data(&b, 96);
    expect(&b, ST_ERR_FORMAT, "'first'", "overlaps tensor 'second'");
    header(&b, 3, 2, 0);
    tensor(&b, "late", 1, ne, ST_TYPE_F32, 32);
    tensor(&b, "early", 1, (int64_t[]){16}, ST_TYPE_F32, 0);
    data(&b, 96);
    expect(&b, ST_ERR_FORMAT, "'early'", "overlaps tensor 'late'");
    /* adjacent is fine, and so is out of order */
    header(&b, 3, 2, 0);
    tensor(&b, "late", 1, ne, ST_TYPE_F32, 32);
    tensor(&b, "early", 1, ne, ST_TYPE_F32, 0);
    data(&b, 64);
    expect(&b, ST_OK, NULL, NULL);

    /* a non-printable name is shown safely */
    one_tensor(&b, "bad\x01name", 0, ne, ST_TYPE_F32, 0, 32);
    expect(&b, ST_ERR_FORMAT, "'bad?name'", NULL);
}

/* A file full of tiny keys and a huge string array count cannot make the reader allocate more than
 * the file could describe: the counts are refused before any allocation. (Under ASan an attempt to
 * allocate terabytes would abort the test.) */
static void check_allocation_bounds(void) {
    bb b;
    header(&b, 3, 0, 1);
    str(&b, "v");
    u32(&b, ST_GGUF_ARRAY);
    u32(&b, ST_GGUF_STRING);
    u64(&b, 1ull << 59);
    for (int i = 0; i < 10; i++) str(&b, "s");
    expect(&b, ST_ERR_FORMAT, "'v'", NULL);
    header(&b, 3, 1ull << 40, 1ull << 40);
    expect(&b, ST_ERR_FORMAT, NULL, NULL);
}

int main(void) {
    make_valid();
    check_truncations();
    check_corruptions();
    check_header_rules();
    check_kv_rules();
    check_tensor_rules();
    check_allocation_bounds();
    free(valid);
    return test_report("test_gguf_hostile");
}
