/* gguf.h: GGUF v3 files, read and written.
 *
 * The reader maps the file read-only and validates everything before it answers: header, every
 * key/value (nested arrays included), every tensor info, alignment and data bounds. After a
 * successful open, every pointer it hands out lies inside the mapping and every size is exact, so
 * no caller re-checks bounds. On failure the message names the file and what is wrong ("key 17
 * 'general.name': string length 4294967295 runs past the end of the file").
 *
 * The writer builds a file for tools and tests (`strata synth`, test fixtures). Tensor data is
 * streamed: declare the tensors, then write each one's bytes in declaration order, so a file far
 * larger than memory can be written. */
#ifndef ST_GGUF_H
#define ST_GGUF_H

#include <stddef.h>
#include <stdint.h>
#include "base/status.h"

#define ST_GGUF_MAX_DIMS 4

typedef enum st_gguf_vtype {
    ST_GGUF_UINT8 = 0, ST_GGUF_INT8 = 1, ST_GGUF_UINT16 = 2, ST_GGUF_INT16 = 3,
    ST_GGUF_UINT32 = 4, ST_GGUF_INT32 = 5, ST_GGUF_FLOAT32 = 6, ST_GGUF_BOOL = 7,
    ST_GGUF_STRING = 8, ST_GGUF_ARRAY = 9, ST_GGUF_UINT64 = 10, ST_GGUF_INT64 = 11,
    ST_GGUF_FLOAT64 = 12, ST_GGUF_VTYPE_COUNT
} st_gguf_vtype;

typedef struct st_gguf st_gguf;
typedef struct st_gguf_value st_gguf_value; /* opaque; valid while the file is open */

typedef struct st_gguf_tensor {
    const char *name;                  /* NUL-terminated copy */
    uint32_t type;                     /* an st_type id (quant/types.h) */
    int n_dims;
    int64_t ne[ST_GGUF_MAX_DIMS];      /* ne[0] fastest; unused dims are 1 */
    int64_t n_elements;
    uint64_t offset;                   /* from the start of the data section */
    const void *data;                  /* inside the mapping */
    size_t size;                       /* bytes */
} st_gguf_tensor;

/* ---- reading ---- */
st_status st_gguf_open(const char *path, st_gguf **out);
/* Parses a buffer the caller keeps alive (fuzzing, tests). `name` is used in messages. */
st_status st_gguf_open_memory(const void *data, size_t size, const char *name, st_gguf **out);
void st_gguf_close(st_gguf *g);

const char *st_gguf_path(const st_gguf *g);
uint32_t st_gguf_version(const st_gguf *g);
size_t st_gguf_alignment(const st_gguf *g);
size_t st_gguf_data_offset(const st_gguf *g);
size_t st_gguf_file_size(const st_gguf *g);

int64_t st_gguf_n_kv(const st_gguf *g);
const char *st_gguf_kv_key(const st_gguf *g, int64_t i);
const st_gguf_value *st_gguf_kv_value(const st_gguf *g, int64_t i);
/* NULL if the key is absent. */
const st_gguf_value *st_gguf_find(const st_gguf *g, const char *key);

st_gguf_vtype st_gguf_value_type(const st_gguf_value *v);
/* Scalars. Each fails with ST_ERR_FORMAT naming the key if the stored type does not convert:
 * integers accept any integer type whose value fits; floats accept f32/f64 and integers;
 * bools accept bool only. */
st_status st_gguf_value_int(const st_gguf_value *v, int64_t *out);
st_status st_gguf_value_uint(const st_gguf_value *v, uint64_t *out);
st_status st_gguf_value_float(const st_gguf_value *v, double *out);
st_status st_gguf_value_bool(const st_gguf_value *v, int *out);
/* Strings are not NUL-terminated in the file: pointer and length. */
st_status st_gguf_value_str(const st_gguf_value *v, const char **s, size_t *len);
/* Arrays: element type and count; element access by index, O(1) (string arrays are indexed at
 * open time). Nested arrays: st_gguf_array_at returns the inner array's value. */
st_gguf_vtype st_gguf_array_type(const st_gguf_value *v);
uint64_t st_gguf_array_len(const st_gguf_value *v);
st_status st_gguf_array_int(const st_gguf_value *v, uint64_t i, int64_t *out);
st_status st_gguf_array_uint(const st_gguf_value *v, uint64_t i, uint64_t *out);
st_status st_gguf_array_float(const st_gguf_value *v, uint64_t i, double *out);
st_status st_gguf_array_str(const st_gguf_value *v, uint64_t i, const char **s, size_t *len);
const st_gguf_value *st_gguf_array_at(const st_gguf_value *v, uint64_t i);
/* Raw little-endian payload of an array of fixed-size scalars (NULL for strings and arrays). */
const void *st_gguf_array_data(const st_gguf_value *v);

/* Convenience by key: ST_ERR_FORMAT with the key's name if absent or of the wrong type. */
st_status st_gguf_get_int(const st_gguf *g, const char *key, int64_t *out);
st_status st_gguf_get_float(const st_gguf *g, const char *key, double *out);
st_status st_gguf_get_str(const st_gguf *g, const char *key, const char **s, size_t *len);

int64_t st_gguf_n_tensors(const st_gguf *g);
const st_gguf_tensor *st_gguf_tensor_at(const st_gguf *g, int64_t i);
/* NULL if absent. */
const st_gguf_tensor *st_gguf_find_tensor(const st_gguf *g, const char *name);

/* ---- writing ---- */
typedef struct st_gguf_writer st_gguf_writer;

st_status st_gguf_writer_new(st_gguf_writer **out);
void st_gguf_writer_free(st_gguf_writer *w);
/* Keys are written in the order they are set; setting a key twice is ST_ERR_INVALID. */
st_status st_gguf_set_u8(st_gguf_writer *w, const char *key, uint8_t v);
st_status st_gguf_set_i8(st_gguf_writer *w, const char *key, int8_t v);
st_status st_gguf_set_u16(st_gguf_writer *w, const char *key, uint16_t v);
st_status st_gguf_set_i16(st_gguf_writer *w, const char *key, int16_t v);
st_status st_gguf_set_u32(st_gguf_writer *w, const char *key, uint32_t v);
st_status st_gguf_set_i32(st_gguf_writer *w, const char *key, int32_t v);
st_status st_gguf_set_u64(st_gguf_writer *w, const char *key, uint64_t v);
st_status st_gguf_set_i64(st_gguf_writer *w, const char *key, int64_t v);
st_status st_gguf_set_f32(st_gguf_writer *w, const char *key, float v);
st_status st_gguf_set_f64(st_gguf_writer *w, const char *key, double v);
st_status st_gguf_set_bool(st_gguf_writer *w, const char *key, int v);
st_status st_gguf_set_str(st_gguf_writer *w, const char *key, const char *s);
/* An array of n fixed-size scalars of type `elem` (raw little-endian values, copied). */
st_status st_gguf_set_array(st_gguf_writer *w, const char *key, st_gguf_vtype elem, const void *data, uint64_t n);
st_status st_gguf_set_str_array(st_gguf_writer *w, const char *key, const char *const *strs, uint64_t n);
/* An array of arrays: `inner` values built with the st_gguf_value_* builders below. */
typedef struct st_gguf_wvalue st_gguf_wvalue;
st_gguf_wvalue *st_gguf_wvalue_array(st_gguf_vtype elem, const void *data, uint64_t n);
st_gguf_wvalue *st_gguf_wvalue_str_array(const char *const *strs, uint64_t n);
st_gguf_wvalue *st_gguf_wvalue_nested(st_gguf_wvalue **inner, uint64_t n); /* takes ownership */
st_status st_gguf_set_value(st_gguf_writer *w, const char *key, st_gguf_wvalue *v); /* takes ownership */

/* Declares a tensor; data is written later, in declaration order. Checks the shape against the
 * type's block size. The alignment is general.alignment if set (u32), else 32. */
st_status st_gguf_add_tensor(st_gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne);
/* Opens `path` (a temporary beside it, renamed into place by st_gguf_writer_finish) and writes
 * the header and all tensor infos. */
st_status st_gguf_writer_begin(st_gguf_writer *w, const char *path);
/* Writes the next declared tensor's bytes (exactly its size), with alignment padding. */
st_status st_gguf_writer_tensor_data(st_gguf_writer *w, const void *data, size_t size);
/* Checks every tensor was written, flushes, fsyncs and renames into place. */
st_status st_gguf_writer_finish(st_gguf_writer *w);

#endif
