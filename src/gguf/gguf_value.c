/* gguf_value.c: reading typed values out of an open GGUF file: scalars with their conversions,
 * strings, arrays (by index, O(1), strings included), and the lookups of a key or a tensor by
 * name (through the name tables of gguf_names.c).
 *
 * The parser checked every byte these functions touch, so they only decode. Conversions are
 * exact or refused: an integer accessor takes any integer type whose value fits, a float accessor
 * takes floats and integers, a bool accessor takes bools only. A refusal names the file and key. */
#include "gguf/gguf_internal.h"

#include <inttypes.h>
#include <stdio.h>

static const struct { const char *name; size_t size; } vtypes[ST_GGUF_VTYPE_COUNT] = {
    [ST_GGUF_UINT8] = {"u8", 1},     [ST_GGUF_INT8] = {"i8", 1},       [ST_GGUF_UINT16] = {"u16", 2},
    [ST_GGUF_INT16] = {"i16", 2},    [ST_GGUF_UINT32] = {"u32", 4},    [ST_GGUF_INT32] = {"i32", 4},
    [ST_GGUF_FLOAT32] = {"f32", 4},  [ST_GGUF_BOOL] = {"bool", 1},     [ST_GGUF_STRING] = {"string", 0},
    [ST_GGUF_ARRAY] = {"array", 0},  [ST_GGUF_UINT64] = {"u64", 8},    [ST_GGUF_INT64] = {"i64", 8},
    [ST_GGUF_FLOAT64] = {"f64", 8},
};

size_t st_gguf_vtype_size(uint32_t type) { return type < ST_GGUF_VTYPE_COUNT ? vtypes[type].size : 0; }
const char *st_gguf_vtype_name(uint32_t type) { return type < ST_GGUF_VTYPE_COUNT ? vtypes[type].name : "invalid"; }

static int is_integer(uint32_t t) {
    return t <= ST_GGUF_INT32 || t == ST_GGUF_UINT64 || t == ST_GGUF_INT64;
}

/* "u32" or "array of string". */
static const char *kind(const st_gguf_value *v, char buf[32]) {
    if (v->type != ST_GGUF_ARRAY) return st_gguf_vtype_name(v->type);
    snprintf(buf, 32, "array of %s", st_gguf_vtype_name(v->elem));
    return buf;
}

static st_status refuse(const st_gguf_value *v, const char *what, uint64_t elem, int is_elem, const char *fmt_why, const char *arg) {
    char why[160];
    snprintf(why, sizeof why, fmt_why, arg);
    if (is_elem)
        return st_fail(ST_ERR_FORMAT, "%s: key '%s': element %" PRIu64 ": %s, expected %s", v->kv->g->path, v->kv->key, elem, why, what);
    return st_fail(ST_ERR_FORMAT, "%s: key '%s': %s, expected %s", v->kv->g->path, v->kv->key, why, what);
}

static st_status wrong_type(const st_gguf_value *v, const char *expected) {
    char buf[32];
    return refuse(v, expected, 0, 0, "is a %s", kind(v, buf));
}

/* An integer of any width as sign and magnitude: negative values in *s, others in *u. */
static void decode_int(uint32_t t, const unsigned char *p, int *neg, int64_t *s, uint64_t *u) {
    int8_t i8; int16_t i16; int32_t i32; int64_t i64;
    uint16_t u16; uint32_t u32; uint64_t u64;
    *neg = 0;
    *s = 0;
    *u = 0;
    switch (t) {
    case ST_GGUF_UINT8: *u = p[0]; return;
    case ST_GGUF_UINT16: memcpy(&u16, p, 2); *u = u16; return;
    case ST_GGUF_UINT32: memcpy(&u32, p, 4); *u = u32; return;
    case ST_GGUF_UINT64: memcpy(&u64, p, 8); *u = u64; return;
    case ST_GGUF_INT8: memcpy(&i8, p, 1); *s = i8; break;
    case ST_GGUF_INT16: memcpy(&i16, p, 2); *s = i16; break;
    case ST_GGUF_INT32: memcpy(&i32, p, 4); *s = i32; break;
    case ST_GGUF_INT64: memcpy(&i64, p, 8); *s = i64; break;
    default: return;
    }
    if (*s < 0) *neg = 1;
    else *u = (uint64_t)*s;
}

static st_status to_int(const st_gguf_value *v, uint32_t t, const unsigned char *p, uint64_t elem, int is_elem, int64_t *out) {
    if (!is_integer(t)) return refuse(v, "an integer", elem, is_elem, "is a %s", st_gguf_vtype_name(t));
    int neg;
    int64_t s;
    uint64_t u;
    decode_int(t, p, &neg, &s, &u);
    if (neg) {
        *out = s;
        return ST_OK;
    }
    if (u > INT64_MAX) {
        char num[32];
        snprintf(num, sizeof num, "%" PRIu64, u);
        return refuse(v, "a signed 64-bit integer", elem, is_elem, "value %s does not fit", num);
    }
    *out = (int64_t)u;
    return ST_OK;
}

static st_status to_uint(const st_gguf_value *v, uint32_t t, const unsigned char *p, uint64_t elem, int is_elem, uint64_t *out) {
    if (!is_integer(t)) return refuse(v, "an unsigned integer", elem, is_elem, "is a %s", st_gguf_vtype_name(t));
    int neg;
    int64_t s;
    uint64_t u;
    decode_int(t, p, &neg, &s, &u);
    if (neg) {
        char num[32];
        snprintf(num, sizeof num, "%" PRId64, s);
        return refuse(v, "an unsigned integer", elem, is_elem, "value %s is negative", num);
    }
    *out = u;
    return ST_OK;
}

static st_status to_float(const st_gguf_value *v, uint32_t t, const unsigned char *p, uint64_t elem, int is_elem, double *out) {
    if (t == ST_GGUF_FLOAT32) {
        float f;
        memcpy(&f, p, 4);
        *out = f;
        return ST_OK;
    }
    if (t == ST_GGUF_FLOAT64) {
        memcpy(out, p, 8);
        return ST_OK;
    }
    if (!is_integer(t)) return refuse(v, "a number", elem, is_elem, "is a %s", st_gguf_vtype_name(t));
    int neg;
    int64_t s;
    uint64_t u;
    decode_int(t, p, &neg, &s, &u);
    *out = neg ? (double)s : (double)u;
    return ST_OK;
}

st_gguf_vtype st_gguf_value_type(const st_gguf_value *v) { return (st_gguf_vtype)v->type; }

st_status st_gguf_value_int(const st_gguf_value *v, int64_t *out) {
    if (v->type == ST_GGUF_ARRAY || v->type == ST_GGUF_STRING) return wrong_type(v, "an integer");
    return to_int(v, v->type, v->p, 0, 0, out);
}

st_status st_gguf_value_uint(const st_gguf_value *v, uint64_t *out) {
    if (v->type == ST_GGUF_ARRAY || v->type == ST_GGUF_STRING) return wrong_type(v, "an unsigned integer");
    return to_uint(v, v->type, v->p, 0, 0, out);
}

st_status st_gguf_value_float(const st_gguf_value *v, double *out) {
    if (v->type == ST_GGUF_ARRAY || v->type == ST_GGUF_STRING) return wrong_type(v, "a number");
    return to_float(v, v->type, v->p, 0, 0, out);
}

st_status st_gguf_value_bool(const st_gguf_value *v, int *out) {
    if (v->type != ST_GGUF_BOOL) return wrong_type(v, "a bool");
    *out = v->p[0];
    return ST_OK;
}

st_status st_gguf_value_str(const st_gguf_value *v, const char **s, size_t *len) {
    if (v->type != ST_GGUF_STRING) return wrong_type(v, "a string");
    *s = (const char *)v->p;
    *len = (size_t)v->n;
    return ST_OK;
}

/* ---- arrays ---- */

st_gguf_vtype st_gguf_array_type(const st_gguf_value *v) {
    return v->type == ST_GGUF_ARRAY ? (st_gguf_vtype)v->elem : ST_GGUF_VTYPE_COUNT;
}

uint64_t st_gguf_array_len(const st_gguf_value *v) { return v->type == ST_GGUF_ARRAY ? v->n : 0; }

static st_status check_index(const st_gguf_value *v, uint64_t i, const char *expected) {
    if (v->type != ST_GGUF_ARRAY) return wrong_type(v, expected);
    if (i >= v->n)
        return st_fail(ST_ERR_RANGE, "%s: key '%s': index %" PRIu64 " is past the end of the array (%" PRIu64 " elements)",
                       v->kv->g->path, v->kv->key, i, v->n);
    return ST_OK;
}

/* The bytes of fixed-size element i (the caller checked the index). */
static const unsigned char *element(const st_gguf_value *v, uint64_t i) {
    size_t es = st_gguf_vtype_size(v->elem);
    return es ? v->p + (size_t)i * es : v->p;
}

st_status st_gguf_array_int(const st_gguf_value *v, uint64_t i, int64_t *out) {
    ST_TRY(check_index(v, i, "an array of integers"));
    return to_int(v, v->elem, element(v, i), i, 1, out);
}

st_status st_gguf_array_uint(const st_gguf_value *v, uint64_t i, uint64_t *out) {
    ST_TRY(check_index(v, i, "an array of unsigned integers"));
    return to_uint(v, v->elem, element(v, i), i, 1, out);
}

st_status st_gguf_array_float(const st_gguf_value *v, uint64_t i, double *out) {
    ST_TRY(check_index(v, i, "an array of numbers"));
    return to_float(v, v->elem, element(v, i), i, 1, out);
}

st_status st_gguf_array_str(const st_gguf_value *v, uint64_t i, const char **s, size_t *len) {
    ST_TRY(check_index(v, i, "an array of strings"));
    if (v->elem != ST_GGUF_STRING) return refuse(v, "a string", i, 1, "is a %s", st_gguf_vtype_name(v->elem));
    const unsigned char *at = ((const unsigned char *const *)v->index)[i];
    *len = (size_t)st_gguf_le64(at);
    *s = (const char *)at + 8;
    return ST_OK;
}

const st_gguf_value *st_gguf_array_at(const st_gguf_value *v, uint64_t i) {
    if (v->type != ST_GGUF_ARRAY || v->elem != ST_GGUF_ARRAY || i >= v->n) return NULL;
    return &((const st_gguf_value *)v->index)[i];
}

const void *st_gguf_array_data(const st_gguf_value *v) {
    if (v->type != ST_GGUF_ARRAY || v->elem == ST_GGUF_STRING || v->elem == ST_GGUF_ARRAY) return NULL;
    return v->p;
}

/* ---- by key ---- */

static st_status find_or_fail(const st_gguf *g, const char *key, const st_gguf_value **v) {
    *v = st_gguf_find(g, key);
    if (!*v) return st_fail(ST_ERR_FORMAT, "%s: key '%s' is missing", g->path, key);
    return ST_OK;
}

st_status st_gguf_get_int(const st_gguf *g, const char *key, int64_t *out) {
    const st_gguf_value *v;
    ST_TRY(find_or_fail(g, key, &v));
    return st_gguf_value_int(v, out);
}

st_status st_gguf_get_float(const st_gguf *g, const char *key, double *out) {
    const st_gguf_value *v;
    ST_TRY(find_or_fail(g, key, &v));
    return st_gguf_value_float(v, out);
}

st_status st_gguf_get_str(const st_gguf *g, const char *key, const char **s, size_t *len) {
    const st_gguf_value *v;
    ST_TRY(find_or_fail(g, key, &v));
    return st_gguf_value_str(v, s, len);
}

/* ---- lookups by name ---- */

static const char *kv_name(const st_gguf *g, int64_t i) { return g->kv[i].key; }
static const char *tensor_name(const st_gguf *g, int64_t i) { return g->tensors[i].name; }

const st_gguf_value *st_gguf_find(const st_gguf *g, const char *key) {
    int64_t i = st_gguf_table_find(g->kv_slots, g->kv_mask, key, kv_name, g);
    return i >= 0 ? &g->kv[i].value : NULL;
}

const st_gguf_tensor *st_gguf_find_tensor(const st_gguf *g, const char *name) {
    int64_t i = st_gguf_table_find(g->tensor_slots, g->tensor_mask, name, tensor_name, g);
    return i >= 0 ? &g->tensors[i] : NULL;
}
