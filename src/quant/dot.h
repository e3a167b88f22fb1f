/* dot.h: dot products of weight rows against activation rows, the inner loop of every matrix
 * product on the CPU.
 *
 * Each weight type is multiplied against the activation in that type's "vec_dot form" (ggml's
 * choice, so results match the peer's): Q8_0 blocks for Q4_0, Q5_0, Q8_0, IQ4_NL, Q1_0, Q2_0,
 * MXFP4 and NVFP4; Q8_1 blocks (which carry the block sum) for Q4_1 and Q5_1; Q8_K blocks for the
 * K-quants, IQ4_XS, TQ1_0 and TQ2_0; bf16 for BF16 and plain f32 for F32. F16's form is ggml's
 * f16 held widened back to f32 (ST_ACT_F16X): the same numbers, converted once per activation row
 * instead of once per weight row that meets it.
 *
 * One kernel call takes ONE weight row and up to ST_DOT_MAX_NX activation rows, so a matrix
 * product over a prompt chunk reads each weight block once per group of rows, not once per row:
 *
 *   out[j] = sum_i w[i] * x_j[i]      j < nx,  x_j = (char *)x + j * x_stride
 *
 * Variants: a scalar reference (dot_ref.c, integer sums exactly as the block formats define them),
 * AVX2 (dot_avx2.c; Q4_K in dot_tile_avx2.c beside its tile kernel) and AVX-512 with
 * VNNI (dot_avx512.c). st_dot_kernel() picks the best one for st_cpu() at the moment of the call
 * (st_cpu_limit() in tests forces a lower one). The functions below also take the internal ids of
 * the load-time repacked layouts (repack.h: ST_TYPE_Q4_K_R).
 * The grid i-quants (IQ1_S .. IQ3_S) go against Q8_K too; their kernels are in dot_iq*.c
 * (dot_iq.h), entered in the same tables. */
#ifndef ST_QUANT_DOT_H
#define ST_QUANT_DOT_H

#include <stddef.h>
#include <stdint.h>
#include "quant/types.h"

#define ST_DOT_MAX_NX 8

/* The vec_dot form of F16 weights: each activation rounded to f16 (to nearest even, as ggml's
 * form for F16) and stored widened back to f32, 4 bytes an element. The kernels then widen only
 * the weights; the products are the ones of f16 x f16. An internal id, far from ggml's and
 * repack.h's: no file names it, and st_type_get() does not know it. */
#define ST_ACT_F16X 0x2001u

/* k: elements in the row (a multiple of the weight type's block size). */
typedef void (*st_dot_fn)(int64_t k, const void *w, const void *x, size_t x_stride, int nx, float *out);
/* Converts k activations (a multiple of the form's block size) to the vec_dot form. */
typedef void (*st_act_fn)(const float *x, void *y, int64_t k);

/* The vec_dot form of a computable weight type (ST_TYPE_F32, ST_ACT_F16X, BF16, Q8_0, Q8_1 or Q8_K);
 * ST_TYPE_COUNT for a type without kernels. */
uint32_t st_dot_act_type(uint32_t type);
/* Bytes of one activation row of k elements in `act_type` (also for Q8_K, not a weight type). */
size_t st_dot_act_row_size(uint32_t act_type, int64_t k);

/* The kernel for `type` at the best level st_cpu() allows now; NULL if the type has none. */
st_dot_fn st_dot_kernel(uint32_t type);
/* The activation converter into `act_type` at the best level st_cpu() allows; it writes the same
 * bytes as the reference quantizers of quant.h. NULL for an unknown form. */
st_act_fn st_act_converter(uint32_t act_type);

/* Which variant st_dot_kernel() returns now: 0 scalar, 1 AVX2, 2 AVX-512 (for tests and logs). */
int st_dot_level(uint32_t type);

/* How far ahead (bytes) the SIMD kernels software-prefetch the weight row they stream; 0 turns it
 * off. Hardware prefetchers alone leave a core short of the memory bandwidth on machines with
 * long memory latency (measured in bench/results); the default is 4096, the environment variable
 * STRATA_PREFETCH overrides it at the first kernel lookup. */
extern int st_dot_prefetch;

/* Variant tables, one per file; an entry is NULL where that file has no kernel for the type
 * (the dispatcher then falls back to the next lower level). Internal to src/quant/dot*.c. */
extern const st_dot_fn st_dot_ref[ST_TYPE_COUNT];
extern const st_dot_fn st_dot_avx2[ST_TYPE_COUNT];
extern const st_dot_fn st_dot_avx512[ST_TYPE_COUNT];
/* BF16 at the AVX-512 level where the CPU also has AVX512_BF16 (vdpbf16ps); the table's entry
 * widens to f32 on the others */
void st_dot_bf16_avx512bf16(int64_t k, const void *w, const void *x, size_t x_stride, int nx, float *out);
void st_act_f16_ref(const float *x, void *y, int64_t k);
void st_act_f16x_ref(const float *x, void *y, int64_t k);
void st_act_bf16_ref(const float *x, void *y, int64_t k);
void st_act_f32_ref(const float *x, void *y, int64_t k);
/* Q8_0 / Q8_1 activations by the rule llama.cpp's x86 CPU backend uses for activations
 * (id = 127/amax, round half to even), which differs from the weight quantizer's (id = 1/d,
 * round half away) on ties and on the last bit of id: matching it keeps our logits on llama.cpp's
 * for the same file. d is stored as amax/127 either way. */
void st_act_q8_0_ref(const float *x, void *y, int64_t k);
void st_act_q8_1_ref(const float *x, void *y, int64_t k);
void st_act_q8_0_avx2(const float *x, void *y, int64_t k);
void st_act_q8_K_avx2(const float *x, void *y, int64_t k);
void st_act_f16_avx2(const float *x, void *y, int64_t k);
void st_act_f16x_avx2(const float *x, void *y, int64_t k);
void st_act_q8_0_avx512(const float *x, void *y, int64_t k);
void st_act_q8_1_avx512(const float *x, void *y, int64_t k);
void st_act_q8_K_avx512(const float *x, void *y, int64_t k);
void st_act_bf16_avx512(const float *x, void *y, int64_t k);

#endif
