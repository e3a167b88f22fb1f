/* types.h: the tensor types of GGUF files, by their ggml type ids, with each type's block size
 * and bytes per block (the file format's own facts, needed to size and validate tensor data),
 * and the block layouts of the types Strata computes with.
 *
 * Every type the format defines is listed, so the GGUF reader can size any tensor; `computable`
 * marks the ones with dequantizers and kernels here. */
#ifndef ST_QUANT_TYPES_H
#define ST_QUANT_TYPES_H

#include <stddef.h>
#include <stdint.h>

typedef enum st_type {
    ST_TYPE_F32 = 0, ST_TYPE_F16 = 1, ST_TYPE_Q4_0 = 2, ST_TYPE_Q4_1 = 3,
    ST_TYPE_Q5_0 = 6, ST_TYPE_Q5_1 = 7, ST_TYPE_Q8_0 = 8, ST_TYPE_Q8_1 = 9,
    ST_TYPE_Q2_K = 10, ST_TYPE_Q3_K = 11, ST_TYPE_Q4_K = 12, ST_TYPE_Q5_K = 13,
    ST_TYPE_Q6_K = 14, ST_TYPE_Q8_K = 15, ST_TYPE_IQ2_XXS = 16, ST_TYPE_IQ2_XS = 17,
    ST_TYPE_IQ3_XXS = 18, ST_TYPE_IQ1_S = 19, ST_TYPE_IQ4_NL = 20, ST_TYPE_IQ3_S = 21,
    ST_TYPE_IQ2_S = 22, ST_TYPE_IQ4_XS = 23, ST_TYPE_I8 = 24, ST_TYPE_I16 = 25,
    ST_TYPE_I32 = 26, ST_TYPE_I64 = 27, ST_TYPE_F64 = 28, ST_TYPE_IQ1_M = 29,
    ST_TYPE_BF16 = 30, ST_TYPE_TQ1_0 = 34, ST_TYPE_TQ2_0 = 35, ST_TYPE_MXFP4 = 39,
    ST_TYPE_NVFP4 = 40, ST_TYPE_Q1_0 = 41, ST_TYPE_Q2_0 = 42,
    ST_TYPE_COUNT = 43
} st_type;

typedef struct st_type_info {
    const char *name;    /* "q4_K", as ggml names it; NULL for an id the format does not define */
    int block_size;      /* elements per block */
    int type_size;       /* bytes per block */
    int computable;      /* Strata has a dequantizer and kernels for it */
} st_type_info;

/* NULL for an id that is not a defined type. */
const st_type_info *st_type_get(uint32_t type);
/* Bytes of a row of n elements (n must be a multiple of the block size). */
static inline size_t st_row_size(const st_type_info *t, int64_t n) {
    return (size_t)(n / t->block_size) * (size_t)t->type_size;
}

/* Block layouts. `d`, `dmin`, `m` are IEEE half precision stored as uint16_t. */
#define QK_K 256
#define K_SCALE_SIZE 12

typedef struct { uint16_t d; uint8_t qs[16]; } block_q4_0;                       /* 18 */
typedef struct { uint16_t d, m; uint8_t qs[16]; } block_q4_1;                    /* 20 */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; } block_q5_0;        /* 22 */
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; } block_q5_1;     /* 24 */
typedef struct { uint16_t d; int8_t qs[32]; } block_q8_0;                        /* 34 */
typedef struct { uint16_t d, s; int8_t qs[32]; } block_q8_1;                     /* 36 */
typedef struct { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; uint16_t d, dmin; } block_q2_K; /* 84 */
typedef struct { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; uint16_t d; } block_q3_K; /* 110 */
typedef struct { uint16_t d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; } block_q4_K; /* 144 */
typedef struct { uint16_t d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; } block_q5_K; /* 176 */
typedef struct { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; uint16_t d; } block_q6_K; /* 210 */
/* The grid i-quants (quant/iq_grids.h has the grids; ref_iq.c says what each field means). */
typedef struct { uint16_t d; uint16_t qs[QK_K / 8]; } block_iq2_xxs;                                  /* 66 */
typedef struct { uint16_t d; uint16_t qs[QK_K / 8]; uint8_t scales[QK_K / 32]; } block_iq2_xs;        /* 74 */
typedef struct { uint16_t d; uint8_t qs[QK_K / 4]; uint8_t qh[QK_K / 32]; uint8_t scales[QK_K / 32]; } block_iq2_s; /* 82 */
typedef struct { uint16_t d; uint8_t qs[3 * QK_K / 8]; } block_iq3_xxs;                                /* 98 */
typedef struct { uint16_t d; uint8_t qs[QK_K / 4]; uint8_t qh[QK_K / 32]; uint8_t signs[QK_K / 8]; uint8_t scales[QK_K / 64]; } block_iq3_s; /* 110 */
typedef struct { uint16_t d; uint8_t qs[QK_K / 8]; uint16_t qh[QK_K / 32]; } block_iq1_s;              /* 50 */
typedef struct { uint8_t qs[QK_K / 8]; uint8_t qh[QK_K / 16]; uint8_t scales[QK_K / 32]; } block_iq1_m; /* 56: no d field */
typedef struct { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; } block_q8_K; /* 292: activations only */
typedef struct { uint16_t d; uint8_t qs[16]; } block_iq4_nl;                     /* 18 */
typedef struct { uint16_t d; uint16_t scales_h; uint8_t scales_l[QK_K / 64]; uint8_t qs[QK_K / 2]; } block_iq4_xs; /* 136 */
/* The low-bit and FP4 types (ref_lowbit.c, ref_fp4.c say how their bits map to values). */
typedef struct { uint16_t d; uint8_t qs[16]; } block_q1_0;                       /* 18: 128 signs */
typedef struct { uint16_t d; uint8_t qs[16]; } block_q2_0;                       /* 18: 64 x 2 bits */
typedef struct { uint8_t qs[48]; uint8_t qh[4]; uint16_t d; } block_tq1_0;      /* 54: 256 trits */
typedef struct { uint8_t qs[QK_K / 4]; uint16_t d; } block_tq2_0;               /* 66: 256 x 2 bits */
typedef struct { uint8_t e; uint8_t qs[16]; } block_mxfp4;                       /* 17: E8M0 + 32 E2M1 */
typedef struct { uint8_t d[4]; uint8_t qs[32]; } block_nvfp4;                    /* 36: 4 UE4M3 + 64 E2M1 */

_Static_assert(sizeof(block_q4_0) == 18, "q4_0");
_Static_assert(sizeof(block_q4_1) == 20, "q4_1");
_Static_assert(sizeof(block_q5_0) == 22, "q5_0");
_Static_assert(sizeof(block_q5_1) == 24, "q5_1");
_Static_assert(sizeof(block_q8_0) == 34, "q8_0");
_Static_assert(sizeof(block_q8_1) == 36, "q8_1");
_Static_assert(sizeof(block_q2_K) == 84, "q2_K");
_Static_assert(sizeof(block_q3_K) == 110, "q3_K");
_Static_assert(sizeof(block_q4_K) == 144, "q4_K");
_Static_assert(sizeof(block_q5_K) == 176, "q5_K");
_Static_assert(sizeof(block_q6_K) == 210, "q6_K");
_Static_assert(sizeof(block_iq2_xxs) == 66, "iq2_xxs");
_Static_assert(sizeof(block_iq2_xs) == 74, "iq2_xs");
_Static_assert(sizeof(block_iq2_s) == 82, "iq2_s");
_Static_assert(sizeof(block_iq3_xxs) == 98, "iq3_xxs");
_Static_assert(sizeof(block_iq3_s) == 110, "iq3_s");
_Static_assert(sizeof(block_iq1_s) == 50, "iq1_s");
_Static_assert(sizeof(block_iq1_m) == 56, "iq1_m");
_Static_assert(sizeof(block_q8_K) == 292, "q8_K");
_Static_assert(sizeof(block_iq4_nl) == 18, "iq4_nl");
_Static_assert(sizeof(block_iq4_xs) == 136, "iq4_xs");
_Static_assert(sizeof(block_q1_0) == 18, "q1_0");
_Static_assert(sizeof(block_q2_0) == 18, "q2_0");
_Static_assert(sizeof(block_tq1_0) == 54, "tq1_0");
_Static_assert(sizeof(block_tq2_0) == 66, "tq2_0");
_Static_assert(sizeof(block_mxfp4) == 17, "mxfp4");
_Static_assert(sizeof(block_nvfp4) == 36, "nvfp4");

#endif
