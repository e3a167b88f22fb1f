/* dot_row_avx512.h: the AVX-512 level's one-activation-row kernels in 256-bit registers
 * (dot_row_avx512.c), which dot_avx512.c's kernels run for nx = 1: one weight row of k elements
 * against one activation row x of the type st_dot_act_type gives, into *out. Include only from
 * files compiled for AVX-512. */
#ifndef ST_QUANT_DOT_ROW_AVX512_H
#define ST_QUANT_DOT_ROW_AVX512_H

#include <stdint.h>

void st_dot_row_q8_0_avx512(int64_t k, const void *w, const void *x, float *out);
void st_dot_row_q4_0_avx512(int64_t k, const void *w, const void *x, float *out);
void st_dot_row_q4_1_avx512(int64_t k, const void *w, const void *x, float *out);
void st_dot_row_q5_0_avx512(int64_t k, const void *w, const void *x, float *out);
void st_dot_row_q5_1_avx512(int64_t k, const void *w, const void *x, float *out);
void st_dot_row_iq4_nl_avx512(int64_t k, const void *w, const void *x, float *out);
void st_dot_row_mxfp4_avx512(int64_t k, const void *w, const void *x, float *out);
void st_dot_row_nvfp4_avx512(int64_t k, const void *w, const void *x, float *out);

#endif
