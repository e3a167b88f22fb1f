/* test_gguf.c: the GGUF writer and reader agree. A file with every value type (nested arrays,
 * empty arrays and strings, extreme values) and tensors of several types and ranks is written,
 * read back and compared field by field and byte by byte; the accessors' conversions and
 * refusals; the writer's refusals; and a 151936-string vocabulary opens and indexes in O(1). */
#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "gguf/gguf.h"
#include "quant/types.h"
#include "test.h"

static char dir[256];

static const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int k;
    char *p = buf[k++ & 3];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint8_t rnd8(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint8_t)(rng >> 24);
}

typedef struct tdecl { const char *name; uint32_t type; int n_dims; int64_t ne[4]; } tdecl;
static const tdecl decls[] = {
    {"token_embd.weight", ST_TYPE_F32, 2, {7, 3, 1, 1}},
    {"blk.0.attn_norm.weight", ST_TYPE_F16, 1, {5, 1, 1, 1}},
    {"blk.0.ffn_up.weight", ST_TYPE_Q8_0, 2, {64, 2, 1, 1}},
    {"blk.0.ffn_down_exps.weight", ST_TYPE_Q4_K, 3, {256, 1, 2, 1}},
    {"blk.0.ssm_conv1d.weight", ST_TYPE_BF16, 4, {3, 2, 2, 2}},
    {"output.weight", ST_TYPE_Q6_K, 2, {512, 3, 1, 1}},
};
#define N_DECLS (int)(sizeof decls / sizeof decls[0])

static size_t decl_size(const tdecl *d) {
    int64_t n = d->ne[0] * d->ne[1] * d->ne[2] * d->ne[3];
    return st_row_size(st_type_get(d->type), n);
}

static unsigned char *tensor_bytes[N_DECLS];

static const char *const words[] = {"", "hello", "Ġworld", "\xe4\xbd\xa0\xe5\xa5\xbd", "a\nb"};

static void write_everything(const char *path) {
    st_gguf_writer *w;
    CHECK(st_gguf_writer_new(&w) == ST_OK);
    CHECK(st_gguf_set_str(w, "general.architecture", "qwen35moe") == ST_OK);
    CHECK(st_gguf_set_u8(w, "t.u8", 255) == ST_OK);
    CHECK(st_gguf_set_i8(w, "t.i8", -128) == ST_OK);
    CHECK(st_gguf_set_u16(w, "t.u16", 65535) == ST_OK);
    CHECK(st_gguf_set_i16(w, "t.i16", -32768) == ST_OK);
    CHECK(st_gguf_set_u32(w, "t.u32", 4294967295u) == ST_OK);
    CHECK(st_gguf_set_i32(w, "t.i32", INT32_MIN) == ST_OK);
    CHECK(st_gguf_set_u64(w, "t.u64", UINT64_MAX) == ST_OK);
    CHECK(st_gguf_set_i64(w, "t.i64", INT64_MIN) == ST_OK);
    CHECK(st_gguf_set_f32(w, "t.f32", 1e-6f) == ST_OK);
    CHECK(st_gguf_set_f64(w, "t.f64", 1e300) == ST_OK);
    CHECK(st_gguf_set_bool(w, "t.bool", 1) == ST_OK);
    CHECK(st_gguf_set_str(w, "t.str", "Ġtext with ünïcode") == ST_OK);
    CHECK(st_gguf_set_str(w, "t.empty_str", "") == ST_OK);
    CHECK(st_gguf_set_u32(w, "general.alignment", 64) == ST_OK);

    uint8_t a_u8[] = {0, 1, 255};
    int8_t a_i8[] = {-128, 0, 127};
    uint16_t a_u16[] = {1, 65535};
    int16_t a_i16[] = {-32768, 32767};
    uint32_t a_u32[] = {0, 0, 0, 2, 0, 0, 0, 2};
    int32_t a_i32[] = {-1, 1 << 30};
    float a_f32[] = {1.5f, -2.25f};
    uint8_t a_bool[] = {1, 0, 1};
    uint64_t a_u64[] = {UINT64_MAX, 7};
    int64_t a_i64[] = {INT64_MIN, INT64_MAX};
    double a_f64[] = {3.25, -0.0};
    CHECK(st_gguf_set_array(w, "a.u8", ST_GGUF_UINT8, a_u8, 3) == ST_OK);
    CHECK(st_gguf_set_array(w, "a.i8", ST_GGUF_INT8, a_i8, 3) == ST_OK);
    CHECK(st_gguf_set_array(w, "a.u16", ST_GGUF_UINT16, a_u16, 2) == ST_OK);
    CHECK(st_gguf_set_array(w, "a.i16", ST_GGUF_INT16, a_i16, 2) == ST_OK);
    CHECK(st_gguf_set_array(w, "a.u32", ST_GGUF_UINT32, a_u32, 8) == ST_OK);
    CHECK(st_gguf_set_array(w, "a.i32", ST_GGUF_INT32, a_i32, 2) == ST_OK);
    CHECK(st_gguf_set_array(w, "a.f32", ST_GGUF_FLOAT32, a_f32, 2) == ST_OK);
    CHECK(st_gguf_set_array(w, "a.bool", ST_GGUF_BOOL, a_bool, 3) == ST_OK);
    CHECK(st_gguf_set_array(w, "a.u64", ST_GGUF_UINT64, a_u64, 2) == ST_OK);
    CHECK(st_gguf_set_array(w, "a.i64", ST_GGUF_INT64, a_i64, 2) == ST_OK);
    CHECK(st_gguf_set_array(w, "a.f64", ST_GGUF_FLOAT64, a_f64, 2) == ST_OK);
    CHECK(st_gguf_set_array(w, "a.empty", ST_GGUF_INT32, NULL, 0) == ST_OK);
    CHECK(st_gguf_set_str_array(w, "a.str", words, 5) == ST_OK);

    /* [[1, 2, 3], ["x", "yz"], [[], [-5]], []] */
    uint32_t in1[] = {1, 2, 3};
    const char *in2[] = {"x", "yz"};
    int64_t in3[] = {-5};
    st_gguf_wvalue *deep[] = {st_gguf_wvalue_array(ST_GGUF_UINT8, NULL, 0), st_gguf_wvalue_array(ST_GGUF_INT64, in3, 1)};
    st_gguf_wvalue *outer[] = {st_gguf_wvalue_array(ST_GGUF_UINT32, in1, 3), st_gguf_wvalue_str_array(in2, 2),
                               st_gguf_wvalue_nested(deep, 2), st_gguf_wvalue_nested(NULL, 0)};
    CHECK(st_gguf_set_value(w, "a.nested", st_gguf_wvalue_nested(outer, 4)) == ST_OK);

    for (int i = 0; i < N_DECLS; i++) CHECK(st_gguf_add_tensor(w, decls[i].name, decls[i].type, decls[i].n_dims, decls[i].ne) == ST_OK);
    CHECK(st_gguf_writer_begin(w, path) == ST_OK);
    for (int i = 0; i < N_DECLS; i++) {
        size_t n = decl_size(&decls[i]);
        tensor_bytes[i] = malloc(n);
        for (size_t k = 0; k < n; k++) tensor_bytes[i][k] = rnd8();
        CHECK(st_gguf_writer_tensor_data(w, tensor_bytes[i], n) == ST_OK);
    }
    CHECK(access(path, F_OK) != 0); /* nothing under the target name until finish */
    CHECKF(st_gguf_writer_finish(w) == ST_OK, "%s", st_last_error());
    st_gguf_writer_free(w);
}

static int64_t get_i(const st_gguf *g, const char *key) {
    int64_t v = 0;
    CHECKF(st_gguf_get_int(g, key, &v) == ST_OK, "%s", st_last_error());
    return v;
}

static uint64_t get_u(const st_gguf *g, const char *key) {
    uint64_t v = 0;
    const st_gguf_value *val = st_gguf_find(g, key);
    CHECKF(val && st_gguf_value_uint(val, &v) == ST_OK, "%s", key);
    return v;
}

static int str_is(const char *s, size_t len, const char *want) { return len == strlen(want) && !memcmp(s, want, len); }

static void check_scalars(const st_gguf *g) {
    CHECK(st_gguf_version(g) == 3);
    CHECK(st_gguf_alignment(g) == 64);
    CHECK(st_gguf_data_offset(g) % 64 == 0);
    CHECK(get_u(g, "t.u8") == 255);
    CHECK(get_i(g, "t.i8") == -128);
    CHECK(get_u(g, "t.u16") == 65535);
    CHECK(get_i(g, "t.i16") == -32768);
    CHECK(get_u(g, "t.u32") == 4294967295u);
    CHECK(get_i(g, "t.i32") == INT32_MIN);
    CHECK(get_u(g, "t.u64") == UINT64_MAX);
    CHECK(get_i(g, "t.i64") == INT64_MIN);
    double d;
    CHECK(st_gguf_get_float(g, "t.f32", &d) == ST_OK && d == (double)1e-6f);
    CHECK(st_gguf_get_float(g, "t.f64", &d) == ST_OK && d == 1e300);
    CHECK(st_gguf_get_float(g, "t.i32", &d) == ST_OK && d == (double)INT32_MIN);
    int b = 0;
    CHECK(st_gguf_value_bool(st_gguf_find(g, "t.bool"), &b) == ST_OK && b == 1);
    const char *s;
    size_t len;
    CHECK(st_gguf_get_str(g, "t.str", &s, &len) == ST_OK && str_is(s, len, "Ġtext with ünïcode"));
    CHECK(st_gguf_get_str(g, "t.empty_str", &s, &len) == ST_OK && len == 0);
    CHECK(st_gguf_get_str(g, "general.architecture", &s, &len) == ST_OK && str_is(s, len, "qwen35moe"));
    CHECK(st_gguf_value_type(st_gguf_find(g, "t.f64")) == ST_GGUF_FLOAT64);

    /* keys in the order they were set */
    CHECK(st_gguf_n_kv(g) == 29);
    CHECK(!strcmp(st_gguf_kv_key(g, 0), "general.architecture"));
    CHECK(!strcmp(st_gguf_kv_key(g, 1), "t.u8"));
    CHECK(st_gguf_kv_value(g, 1) == st_gguf_find(g, "t.u8"));
    CHECK(st_gguf_kv_key(g, 29) == NULL && st_gguf_kv_key(g, -1) == NULL);
    CHECK(st_gguf_find(g, "t.missing") == NULL);

    /* refusals name the key */
    int64_t i;
    uint64_t u;
    CHECK(st_gguf_get_int(g, "t.u64", &i) == ST_ERR_FORMAT && strstr(st_last_error(), "t.u64"));
    CHECK(st_gguf_value_uint(st_gguf_find(g, "t.i8"), &u) == ST_ERR_FORMAT && strstr(st_last_error(), "negative"));
    CHECK(st_gguf_get_int(g, "t.str", &i) == ST_ERR_FORMAT && strstr(st_last_error(), "t.str"));
    CHECK(st_gguf_get_int(g, "t.f32", &i) == ST_ERR_FORMAT);
    CHECK(st_gguf_get_int(g, "t.bool", &i) == ST_ERR_FORMAT);
    CHECK(st_gguf_value_bool(st_gguf_find(g, "t.u8"), &b) == ST_ERR_FORMAT);
    CHECK(st_gguf_get_str(g, "t.u8", &s, &len) == ST_ERR_FORMAT);
    CHECK(st_gguf_get_float(g, "t.str", &d) == ST_ERR_FORMAT);
    CHECKF(st_gguf_get_int(g, "no.such.key", &i) == ST_ERR_FORMAT && strstr(st_last_error(), "no.such.key") &&
               strstr(st_last_error(), "roundtrip.gguf"), "%s", st_last_error());
}

static void check_arrays(const st_gguf *g) {
    const st_gguf_value *v;
    int64_t i;
    uint64_t u;
    double d;
    v = st_gguf_find(g, "a.u8");
    CHECK(st_gguf_value_type(v) == ST_GGUF_ARRAY && st_gguf_array_type(v) == ST_GGUF_UINT8 && st_gguf_array_len(v) == 3);
    CHECK(st_gguf_array_uint(v, 2, &u) == ST_OK && u == 255);
    CHECK(st_gguf_array_uint(v, 3, &u) == ST_ERR_RANGE);
    v = st_gguf_find(g, "a.i8");
    CHECK(st_gguf_array_int(v, 0, &i) == ST_OK && i == -128);
    CHECK(st_gguf_array_uint(v, 0, &u) == ST_ERR_FORMAT && strstr(st_last_error(), "a.i8"));
    v = st_gguf_find(g, "a.u16");
    CHECK(st_gguf_array_int(v, 1, &i) == ST_OK && i == 65535);
    v = st_gguf_find(g, "a.i16");
    CHECK(st_gguf_array_int(v, 0, &i) == ST_OK && i == -32768);
    v = st_gguf_find(g, "a.u32");
    CHECK(st_gguf_array_len(v) == 8 && st_gguf_array_int(v, 3, &i) == ST_OK && i == 2);
    uint32_t raw[8];
    memcpy(raw, st_gguf_array_data(v), sizeof raw);
    CHECK(raw[7] == 2 && raw[6] == 0);
    v = st_gguf_find(g, "a.i32");
    CHECK(st_gguf_array_int(v, 1, &i) == ST_OK && i == 1 << 30);
    v = st_gguf_find(g, "a.f32");
    CHECK(st_gguf_array_float(v, 1, &d) == ST_OK && d == -2.25);
    CHECK(st_gguf_array_int(v, 1, &i) == ST_ERR_FORMAT);
    v = st_gguf_find(g, "a.bool");
    CHECK(st_gguf_array_type(v) == ST_GGUF_BOOL && ((const uint8_t *)st_gguf_array_data(v))[2] == 1);
    v = st_gguf_find(g, "a.u64");
    CHECK(st_gguf_array_uint(v, 0, &u) == ST_OK && u == UINT64_MAX);
    CHECK(st_gguf_array_int(v, 0, &i) == ST_ERR_FORMAT);
    CHECK(st_gguf_array_int(v, 1, &i) == ST_OK && i == 7);
    v = st_gguf_find(g, "a.i64");
    CHECK(st_gguf_array_int(v, 0, &i) == ST_OK && i == INT64_MIN);
    CHECK(st_gguf_array_int(v, 1, &i) == ST_OK && i == INT64_MAX);
    v = st_gguf_find(g, "a.f64");
    CHECK(st_gguf_array_float(v, 0, &d) == ST_OK && d == 3.25);
    v = st_gguf_find(g, "a.empty");
    CHECK(st_gguf_array_type(v) == ST_GGUF_INT32 && st_gguf_array_len(v) == 0);
    CHECK(st_gguf_array_int(v, 0, &i) == ST_ERR_RANGE);

    v = st_gguf_find(g, "a.str");
    CHECK(st_gguf_array_type(v) == ST_GGUF_STRING && st_gguf_array_len(v) == 5 && st_gguf_array_data(v) == NULL);
    for (int k = 0; k < 5; k++) {
        const char *s;
        size_t len;
        CHECK(st_gguf_array_str(v, (uint64_t)k, &s, &len) == ST_OK && str_is(s, len, words[k]));
    }
    CHECK(st_gguf_array_int(v, 0, &i) == ST_ERR_FORMAT);
    CHECK(st_gguf_value_int(v, &i) == ST_ERR_FORMAT && strstr(st_last_error(), "array of string"));

    v = st_gguf_find(g, "a.nested");
    CHECK(st_gguf_array_type(v) == ST_GGUF_ARRAY && st_gguf_array_len(v) == 4 && st_gguf_array_data(v) == NULL);
    const st_gguf_value *a0 = st_gguf_array_at(v, 0), *a1 = st_gguf_array_at(v, 1), *a2 = st_gguf_array_at(v, 2),
                        *a3 = st_gguf_array_at(v, 3);
    CHECK(a0 && a1 && a2 && a3 && st_gguf_array_at(v, 4) == NULL);
    if (a0 && a1 && a2 && a3) {
        CHECK(st_gguf_array_type(a0) == ST_GGUF_UINT32 && st_gguf_array_len(a0) == 3);
        CHECK(st_gguf_array_uint(a0, 2, &u) == ST_OK && u == 3);
        const char *s;
        size_t len;
        CHECK(st_gguf_array_type(a1) == ST_GGUF_STRING && st_gguf_array_str(a1, 1, &s, &len) == ST_OK && str_is(s, len, "yz"));
        CHECK(st_gguf_array_type(a2) == ST_GGUF_ARRAY && st_gguf_array_len(a2) == 2);
        const st_gguf_value *d0 = st_gguf_array_at(a2, 0), *d1 = st_gguf_array_at(a2, 1);
        CHECK(d0 && st_gguf_array_type(d0) == ST_GGUF_UINT8 && st_gguf_array_len(d0) == 0);
        CHECK(d1 && st_gguf_array_int(d1, 0, &i) == ST_OK && i == -5);
        CHECK(st_gguf_array_type(a3) == ST_GGUF_ARRAY && st_gguf_array_len(a3) == 0);
        CHECK(st_gguf_array_int(a0, 0, &i) == ST_OK && i == 1);
        /* an inner array's refusal still names the key */
        CHECK(st_gguf_array_str(a0, 0, &s, &len) == ST_ERR_FORMAT && strstr(st_last_error(), "a.nested"));
    }
    CHECK(st_gguf_array_at(st_gguf_find(g, "a.u8"), 0) == NULL);
    CHECK(st_gguf_array_len(st_gguf_find(g, "t.u8")) == 0);
}

static void check_tensors(const st_gguf *g) {
    CHECK(st_gguf_n_tensors(g) == N_DECLS);
    uint64_t expect_offset = 0;
    for (int i = 0; i < N_DECLS; i++) {
        const st_gguf_tensor *t = st_gguf_tensor_at(g, i);
        CHECK(t && !strcmp(t->name, decls[i].name));
        if (!t) continue;
        CHECK(st_gguf_find_tensor(g, decls[i].name) == t);
        CHECK(t->type == decls[i].type && t->n_dims == decls[i].n_dims);
        int64_t n = 1;
        for (int d = 0; d < 4; d++) {
            CHECK(t->ne[d] == decls[i].ne[d]);
            n *= decls[i].ne[d];
        }
        CHECK(t->n_elements == n);
        CHECK(t->size == decl_size(&decls[i]));
        CHECK(t->offset == expect_offset && t->offset % 64 == 0);
        expect_offset += (t->size + 63) / 64 * 64;
        CHECK((const unsigned char *)t->data - (const unsigned char *)st_gguf_tensor_at(g, 0)->data == (ptrdiff_t)t->offset);
        CHECKF(!memcmp(t->data, tensor_bytes[i], t->size), "tensor %s data differs", t->name);
    }
    CHECK(st_gguf_tensor_at(g, N_DECLS) == NULL);
    CHECK(st_gguf_find_tensor(g, "nope") == NULL);
    CHECK(st_gguf_file_size(g) == st_gguf_data_offset(g) + expect_offset);
}

static void check_roundtrip(void) {
    const char *path = tmp_path("roundtrip.gguf");
    write_everything(path);
    st_gguf *g = NULL;
    st_status s = st_gguf_open(path, &g);
    CHECKF(s == ST_OK, "%s", st_last_error());
    if (s != ST_OK) return;
    CHECK(!strcmp(st_gguf_path(g), path));
    check_scalars(g);
    check_arrays(g);
    check_tensors(g);
    st_gguf_close(g);

    /* the same bytes parse the same from memory */
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n);
    CHECK(fread(buf, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    CHECK(st_gguf_open_memory(buf, (size_t)n, "mem.gguf", &g) == ST_OK);
    if (g) {
        CHECK(!strcmp(st_gguf_path(g), "mem.gguf") && st_gguf_n_tensors(g) == N_DECLS);
        check_tensors(g);
        st_gguf_close(g);
    }
    free(buf);
    unlink(path);
}

static void check_writer_refusals(void) {
    st_gguf_writer *w;
    CHECK(st_gguf_writer_new(&w) == ST_OK);
    CHECK(st_gguf_set_u32(w, "k", 1) == ST_OK);
    CHECK(st_gguf_set_u32(w, "k", 2) == ST_ERR_INVALID && strstr(st_last_error(), "'k'"));
    CHECK(st_gguf_set_str(w, "k", "x") == ST_ERR_INVALID);
    CHECK(st_gguf_set_u8(w, "", 1) == ST_ERR_INVALID);
    CHECK(st_gguf_set_u32(w, "general.alignment", 3) == ST_ERR_INVALID);
    CHECK(st_gguf_set_u32(w, "general.alignment", 0) == ST_ERR_INVALID);
    CHECK(st_gguf_set_u64(w, "general.alignment", 32) == ST_ERR_INVALID);
    uint8_t bad_bool = 2;
    CHECK(st_gguf_set_array(w, "b", ST_GGUF_BOOL, &bad_bool, 1) == ST_ERR_INVALID);
    CHECK(st_gguf_set_array(w, "b", ST_GGUF_STRING, "x", 1) == ST_ERR_INVALID);
    const char *with_null[] = {"a", NULL};
    CHECK(st_gguf_set_str_array(w, "b", with_null, 2) == ST_ERR_INVALID);
    CHECK(st_gguf_set_value(w, "b", NULL) == ST_ERR_INVALID);
    /* nesting past the reader's depth limit is refused when built */
    st_gguf_wvalue *v = st_gguf_wvalue_array(ST_GGUF_UINT8, NULL, 0);
    for (int d = 0; d < 10 && v; d++) v = st_gguf_wvalue_nested(&v, 1);
    CHECK(v == NULL);
    st_gguf_wvalue *with_bad[] = {st_gguf_wvalue_array(ST_GGUF_UINT8, NULL, 0), NULL};
    CHECK(st_gguf_wvalue_nested(with_bad, 2) == NULL);

    int64_t ne[4] = {33, 2, 1, 1};
    CHECK(st_gguf_add_tensor(w, "q", ST_TYPE_Q8_0, 2, ne) == ST_ERR_INVALID && strstr(st_last_error(), "'q'"));
    CHECK(st_gguf_add_tensor(w, "q", 99, 2, ne) == ST_ERR_INVALID);
    CHECK(st_gguf_add_tensor(w, "q", ST_TYPE_F32, 0, ne) == ST_ERR_INVALID);
    CHECK(st_gguf_add_tensor(w, "q", ST_TYPE_F32, 5, ne) == ST_ERR_INVALID);
    CHECK(st_gguf_add_tensor(w, "", ST_TYPE_F32, 1, ne) == ST_ERR_INVALID);
    int64_t neg[1] = {-4};
    CHECK(st_gguf_add_tensor(w, "q", ST_TYPE_F32, 1, neg) == ST_ERR_INVALID);
    CHECK(st_gguf_add_tensor(w, "a", ST_TYPE_F32, 2, ne) == ST_OK);
    CHECK(st_gguf_add_tensor(w, "a", ST_TYPE_F32, 2, ne) == ST_ERR_INVALID);
    CHECK(st_gguf_add_tensor(w, "b", ST_TYPE_F32, 1, ne) == ST_OK);

    const char *path = tmp_path("refused.gguf");
    CHECK(st_gguf_writer_tensor_data(w, "x", 1) == ST_ERR_INVALID); /* not begun */
    CHECK(st_gguf_writer_begin(w, path) == ST_OK);
    CHECK(st_gguf_set_u8(w, "late", 1) == ST_ERR_INVALID);
    CHECK(st_gguf_add_tensor(w, "late", ST_TYPE_F32, 1, ne) == ST_ERR_INVALID);
    float data[66] = {0};
    CHECK(st_gguf_writer_tensor_data(w, data, 4) == ST_ERR_INVALID && strstr(st_last_error(), "'a'"));
    CHECK(st_gguf_writer_tensor_data(w, data, sizeof data) == ST_OK);
    CHECK(st_gguf_writer_finish(w) == ST_ERR_INVALID && strstr(st_last_error(), "'b'"));
    st_gguf_writer_free(w); /* abandons the file: nothing appears under the target name */
    CHECK(access(path, F_OK) != 0);

    CHECK(st_gguf_writer_new(&w) == ST_OK);
    CHECK(st_gguf_writer_begin(w, "/nonexistent-dir/x.gguf") == ST_ERR_IO && strstr(st_last_error(), "/nonexistent-dir/x.gguf"));
    st_gguf_writer_free(w);

    /* an empty file (no keys, no tensors) round-trips */
    CHECK(st_gguf_writer_new(&w) == ST_OK);
    CHECK(st_gguf_writer_begin(w, path) == ST_OK);
    CHECK(st_gguf_writer_finish(w) == ST_OK);
    st_gguf_writer_free(w);
    st_gguf *g = NULL;
    CHECKF(st_gguf_open(path, &g) == ST_OK, "%s", st_last_error());
    CHECK(g && st_gguf_n_kv(g) == 0 && st_gguf_n_tensors(g) == 0 && st_gguf_alignment(g) == 32);
    st_gguf_close(g);
    unlink(path);
}

/* A tokenizer-sized vocabulary: open must index it in milliseconds, and lookups are O(1). */
static void check_big_vocab(void) {
    enum { N = 151936 };
    char (*text)[16] = malloc((size_t)N * 16);
    const char **strs = malloc(N * sizeof *strs);
    for (int i = 0; i < N; i++) {
        snprintf(text[i], 16, "tok%d", i);
        strs[i] = text[i];
    }
    const char *path = tmp_path("vocab.gguf");
    st_gguf_writer *w;
    CHECK(st_gguf_writer_new(&w) == ST_OK);
    CHECK(st_gguf_set_str(w, "tokenizer.ggml.model", "gpt2") == ST_OK);
    CHECK(st_gguf_set_str_array(w, "tokenizer.ggml.tokens", strs, N) == ST_OK);
    CHECK(st_gguf_writer_begin(w, path) == ST_OK && st_gguf_writer_finish(w) == ST_OK);
    st_gguf_writer_free(w);

    double t0 = st_now();
    st_gguf *g = NULL;
    CHECKF(st_gguf_open(path, &g) == ST_OK, "%s", st_last_error());
    double t1 = st_now();
    fprintf(stderr, "opened a %d-string vocabulary in %.2f ms\n", N, (t1 - t0) * 1e3);
    if (g) {
        const st_gguf_value *v = st_gguf_find(g, "tokenizer.ggml.tokens");
        CHECK(v && st_gguf_array_len(v) == N);
        int ok = 1;
        for (int i = N - 1; i >= 0 && v; i -= 997) {
            const char *s;
            size_t len;
            ok &= st_gguf_array_str(v, (uint64_t)i, &s, &len) == ST_OK && str_is(s, len, text[i]);
        }
        CHECK(ok);
        st_gguf_close(g);
    }
    unlink(path);
    free(text);
    free(strs);
}

int main(void) {
    snprintf(dir, sizeof dir, "%s/strata-gguf-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) SKIP("cannot create a temporary directory");
    check_roundtrip();
    check_writer_refusals();
    check_big_vocab();
    for (int i = 0; i < N_DECLS; i++) free(tensor_bytes[i]);
    rmdir(dir);
    return test_report("test_gguf");
}
