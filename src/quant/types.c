/* types.c: the table of GGUF tensor types (block sizes and bytes per block are the format's). */
#include "quant/types.h"

static const st_type_info type_table[ST_TYPE_COUNT] = {
    [ST_TYPE_F32] = {"f32", 1, 4, 1},
    [ST_TYPE_F16] = {"f16", 1, 2, 1},
    [ST_TYPE_Q4_0] = {"q4_0", 32, 18, 1},
    [ST_TYPE_Q4_1] = {"q4_1", 32, 20, 1},
    [ST_TYPE_Q5_0] = {"q5_0", 32, 22, 1},
    [ST_TYPE_Q5_1] = {"q5_1", 32, 24, 1},
    [ST_TYPE_Q8_0] = {"q8_0", 32, 34, 1},
    [ST_TYPE_Q8_1] = {"q8_1", 32, 36, 0},
    [ST_TYPE_Q2_K] = {"q2_K", 256, 84, 1},
    [ST_TYPE_Q3_K] = {"q3_K", 256, 110, 1},
    [ST_TYPE_Q4_K] = {"q4_K", 256, 144, 1},
    [ST_TYPE_Q5_K] = {"q5_K", 256, 176, 1},
    [ST_TYPE_Q6_K] = {"q6_K", 256, 210, 1},
    [ST_TYPE_Q8_K] = {"q8_K", 256, 292, 0},
    [ST_TYPE_IQ2_XXS] = {"iq2_xxs", 256, 66, 1},
    [ST_TYPE_IQ2_XS] = {"iq2_xs", 256, 74, 1},
    [ST_TYPE_IQ3_XXS] = {"iq3_xxs", 256, 98, 1},
    [ST_TYPE_IQ1_S] = {"iq1_s", 256, 50, 1},
    [ST_TYPE_IQ4_NL] = {"iq4_nl", 32, 18, 1},
    [ST_TYPE_IQ3_S] = {"iq3_s", 256, 110, 1},
    [ST_TYPE_IQ2_S] = {"iq2_s", 256, 82, 1},
    [ST_TYPE_IQ4_XS] = {"iq4_xs", 256, 136, 1},
    [ST_TYPE_I8] = {"i8", 1, 1, 0},
    [ST_TYPE_I16] = {"i16", 1, 2, 0},
    [ST_TYPE_I32] = {"i32", 1, 4, 0},
    [ST_TYPE_I64] = {"i64", 1, 8, 0},
    [ST_TYPE_F64] = {"f64", 1, 8, 0},
    [ST_TYPE_IQ1_M] = {"iq1_m", 256, 56, 1},
    [ST_TYPE_BF16] = {"bf16", 1, 2, 1},
    [ST_TYPE_TQ1_0] = {"tq1_0", 256, 54, 1},
    [ST_TYPE_TQ2_0] = {"tq2_0", 256, 66, 1},
    [ST_TYPE_MXFP4] = {"mxfp4", 32, 17, 1},
    [ST_TYPE_NVFP4] = {"nvfp4", 64, 36, 1},
    [ST_TYPE_Q1_0] = {"q1_0", 128, 18, 1},
    [ST_TYPE_Q2_0] = {"q2_0", 64, 18, 1},
};

const st_type_info *st_type_get(uint32_t type) {
    if (type >= ST_TYPE_COUNT || !type_table[type].name) return 0;
    return &type_table[type];
}
