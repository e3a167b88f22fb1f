/* dot.c: picks the dot-product kernel and the activation converter for a type at run time,
 * from st_cpu()'s flags, falling back level by level where a faster file has no kernel. */
#include "quant/dot.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/cpu.h"
#include "quant/quant.h"
#include "quant/repack.h"

uint32_t st_dot_act_type(uint32_t type) {
    switch (type) {
    case ST_TYPE_IQ2_XXS: case ST_TYPE_IQ2_XS: case ST_TYPE_IQ2_S: case ST_TYPE_IQ3_XXS: case ST_TYPE_IQ3_S:
    case ST_TYPE_IQ1_S: case ST_TYPE_IQ1_M: return ST_TYPE_Q8_K; /* the grid i-quants (dot_iq.h) */
    case ST_TYPE_F32: return ST_TYPE_F32;
    case ST_TYPE_F16: return ST_ACT_F16X;
    case ST_TYPE_BF16: return ST_TYPE_BF16;
    case ST_TYPE_Q4_0: case ST_TYPE_Q5_0: case ST_TYPE_Q8_0: case ST_TYPE_IQ4_NL:
    case ST_TYPE_Q1_0: case ST_TYPE_Q2_0: case ST_TYPE_MXFP4: case ST_TYPE_NVFP4: return ST_TYPE_Q8_0;
    case ST_TYPE_Q4_1: case ST_TYPE_Q5_1: return ST_TYPE_Q8_1;
    case ST_TYPE_Q2_K: case ST_TYPE_Q3_K: case ST_TYPE_Q4_K: case ST_TYPE_Q5_K: case ST_TYPE_Q6_K:
    case ST_TYPE_IQ4_XS: case ST_TYPE_Q4_K_R: case ST_TYPE_TQ1_0: case ST_TYPE_TQ2_0: return ST_TYPE_Q8_K;
    default: return ST_TYPE_COUNT;
    }
}

size_t st_dot_act_row_size(uint32_t act_type, int64_t k) {
    switch (act_type) {
    case ST_TYPE_F32: case ST_ACT_F16X: return (size_t)k * 4;
    case ST_TYPE_F16: case ST_TYPE_BF16: return (size_t)k * 2;
    case ST_TYPE_Q8_0: return (size_t)(k / 32) * sizeof(block_q8_0);
    case ST_TYPE_Q8_1: return (size_t)(k / 32) * sizeof(block_q8_1);
    case ST_TYPE_Q8_K: return (size_t)(k / QK_K) * sizeof(block_q8_K);
    default: return 0;
    }
}

/* AVX-512 kernels use F, BW, VL, DQ and VNNI together (the set every AVX-512 CPU with VNNI has). */
static int have_avx512(const st_cpu_features *f) {
    return f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->avx512vnni && f->f16c && f->fma;
}
static int have_avx2(const st_cpu_features *f) { return f->avx2 && f->fma && f->f16c; }

int st_dot_prefetch = 4096;
static pthread_once_t prefetch_once = PTHREAD_ONCE_INIT;
static void read_prefetch_env(void) {
    const char *e = getenv("STRATA_PREFETCH");
    if (e && *e) st_dot_prefetch = atoi(e) > 0 ? atoi(e) / 64 * 64 : 0;
}

int st_dot_level(uint32_t type) {
    pthread_once(&prefetch_once, read_prefetch_env);
    const st_cpu_features *f = st_cpu();
    /* the repacked layouts (repack.h) have an AVX-512 kernel, else the plain type's via conversion */
    if (type == ST_TYPE_Q4_K_R) return have_avx512(f) ? 2 : st_dot_level(ST_TYPE_Q4_K);
    if (type >= ST_TYPE_COUNT) return 0;
    if (have_avx512(f) && st_dot_avx512[type]) return 2;
    if (have_avx2(f) && st_dot_avx2[type]) return 1;
    return 0;
}

st_dot_fn st_dot_kernel(uint32_t type) {
    if (type == ST_TYPE_Q4_K_R) return st_dot_level(type) == 2 ? st_dot_q4_K_r_avx512 : st_dot_q4_K_r_plain;
    if (type >= ST_TYPE_COUNT) return 0;
    switch (st_dot_level(type)) {
    case 2: return type == ST_TYPE_BF16 && st_cpu()->avx512bf16 ? st_dot_bf16_avx512bf16 : st_dot_avx512[type];
    case 1: return st_dot_avx2[type];
    default: return st_dot_ref[type];
    }
}

static void act_q8_K_ref(const float *x, void *y, int64_t k) { st_quantize_row_q8_K_ref(x, y, k); }

st_act_fn st_act_converter(uint32_t act_type) {
    const st_cpu_features *f = st_cpu();
    int level = have_avx512(f) ? 2 : have_avx2(f) ? 1 : 0;
    switch (act_type) {
    case ST_TYPE_F32: return st_act_f32_ref;
    case ST_TYPE_F16: return level >= 1 ? st_act_f16_avx2 : st_act_f16_ref;
    case ST_ACT_F16X: return level >= 1 ? st_act_f16x_avx2 : st_act_f16x_ref;
    case ST_TYPE_BF16: return level >= 2 && f->avx512bf16 ? st_act_bf16_avx512 : st_act_bf16_ref;
    case ST_TYPE_Q8_0: return level == 2 ? st_act_q8_0_avx512 : level == 1 ? st_act_q8_0_avx2 : st_act_q8_0_ref;
    case ST_TYPE_Q8_1: return level == 2 ? st_act_q8_1_avx512 : st_act_q8_1_ref;
    case ST_TYPE_Q8_K: return level == 2 ? st_act_q8_K_avx512 : level == 1 ? st_act_q8_K_avx2 : act_q8_K_ref;
    default: return 0;
    }
}
