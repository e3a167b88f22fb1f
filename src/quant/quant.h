/* quant.h: reference conversions between f32 and every computable tensor type.
 *
 * These are the plain, obviously-right definitions: dequantization equals ggml's bit for bit
 * (tests/unit/test_quant_ggml.c checks it against the peer's libggml-base.so), and quantization
 * follows ggml's reference quantizers, so a file we write reads the same in llama.cpp. They are
 * used by tests, by `strata synth`, and as the reference every fast kernel is tested against.
 * Fast kernels live in dot.h; nothing here is on a hot path. */
#ifndef ST_QUANT_QUANT_H
#define ST_QUANT_QUANT_H

#include <stdint.h>
#include "quant/types.h"

float st_fp16_to_fp32(uint16_t h);    /* exact; a table lookup, fine on hot paths */
uint16_t st_fp32_to_fp16(float f);     /* round to nearest even, as ggml; NaN -> 0x7E00 | sign */
float st_bf16_to_fp32(uint16_t h);
uint16_t st_fp32_to_bf16(float f);     /* round to nearest even, NaN kept quiet, as ggml */

/* The half -> f32 table behind st_fp16_to_fp32, for kernels that want the lookup inlined, and
 * the arithmetic definition it is filled from. The table is filled by a constructor when the
 * library loads, so it is ready before main (not inside other constructors). */
extern float st_fp16_lut[65536];
static inline float st_fp16_to_fp32_inline(uint16_t h) { return st_fp16_lut[h]; }
float st_fp16_widen(uint16_t h);

/* n must be a multiple of the type's block size. Types that are not computable are a no-op
 * returning 0; computable ones return 1, except that st_quantize_row has no quantizer for the
 * grid i-quants (iq1_s .. iq3_s: their files come from llama-quantize; quant/random_iq.h
 * draws synthetic ones) and returns 0 for them. Quantizer input must be finite and its block scales
 * must fit a half (a block's largest |x| below 65504 times the type's largest level, e.g.
 * 5e5 for q4_0); ggml's quantizers assume the same and nothing here checks. Byte-exact with ggml's from_float_ref for every
 * type, except an all-zero iq4_nl block, whose levels ggml leaves unset (we store zeros; both
 * decode to zeros). */
int st_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n);
int st_quantize_row(uint32_t type, const float *src, void *dst, int64_t n);

/* Activation forms used by the dot products (reference versions). q8_0 and q8_1 scale each block
 * of 32 by amax/127 (q8_1 also stores s = d * sum(qs)); q8_K scales each 256 by -max/127 (d is an
 * f32) and stores bsums[g] = the sum of qs over the g-th 16 (a zero block is all zeros). */
void st_quantize_row_q8_0_ref(const float *x, block_q8_0 *y, int64_t n);
void st_quantize_row_q8_1_ref(const float *x, block_q8_1 *y, int64_t n);
void st_quantize_row_q8_K_ref(const float *x, block_q8_K *y, int64_t n);

#endif
