/* repack.h: weight layouts rearranged at load time for the CPU kernels ("repacked"), which hold
 * the same numbers as the file's blocks in the same number of bytes, but cost less to unpack.
 *
 * Q4_K -> Q4_K_R (ST_TYPE_Q4_K_R, an internal id that no file uses): each 144-byte super-block
 * of 256 elements becomes
 *
 *   bytes   0..7    sm[j] = scale_j | (min_j & 3) << 6        (j < 8 sub-blocks of 32)
 *   bytes   8..11   mh[i] = (min_2i >> 2) | (min_2i+1 >> 2) << 4
 *   bytes  12..15   d, dmin (f16, as in the file)
 *   bytes  16..79   q[i] = e[i] | e[64 + i] << 4               (i < 64)
 *   bytes  80..143  q[i] = e[128 + i] | e[192 + i] << 4
 *
 * so one 64-byte load and a mask / shift give 64 consecutive elements each (the file's order
 * needs two more lane shuffles per 64), and the scales come out of one 16-byte load with a mask
 * and byte shuffles instead of the file's 6-bit packing. Rows stay rows (a row of K elements is
 * K/256 blocks of 144 bytes, as in the file), so every offset computed from the file's row size
 * still holds. A repacked tensor's st_tensor.type is ST_TYPE_Q4_K_R and its `repacked` flag is
 * set (model.h); only the CPU matrix products read it (st_matmul, st_matmul_batch, the MoE job,
 * anything that takes st_dot_kernel(type)). The AVX-512 kernel gives bit-identical results to
 * the plain AVX-512 Q4_K kernel (same integer lanes, same float order). On a CPU without AVX-512
 * the weights are never repacked; should a lower level be forced afterwards (st_cpu_limit), the
 * kernel converts chunks back to the file's layout and uses the plain kernel. */
#ifndef ST_QUANT_REPACK_H
#define ST_QUANT_REPACK_H

#include <stdint.h>
#include "quant/dot.h"
#include "quant/types.h"

/* Internal type ids, far from ggml's (st_type_get() does not know them; a file cannot name them). */
#define ST_TYPE_Q4_K_R 0x100Cu

/* The repacked id of a file type when the CPU's best kernels have a repacked form of it and
 * repacking is not turned off (environment STRATA_REPACK=0); else the type itself. */
uint32_t st_repack_target(uint32_t type);
/* The file type a (possibly internal) type id holds the numbers of. */
uint32_t st_repack_file_type(uint32_t type);
/* st_type_get() that also knows the internal ids (same block and byte sizes as the file type). */
const st_type_info *st_layout_get(uint32_t type);

/* Rewrites n_blocks consecutive blocks of `file_type` into the layout of `to` (dst may equal src),
 * and back. Return 0 when the pair is not a known repacking. */
int st_repack_blocks(uint32_t to, void *dst, const void *src, int64_t n_blocks);
int st_unrepack_blocks(uint32_t from, void *dst, const void *src, int64_t n_blocks);

/* Kernels (dot.h's form) for the repacked types: AVX-512 (dot_repack_avx512.c, only after
 * dot.c's CPU check) and the portable one that converts back to the plain kernel. */
void st_dot_q4_K_r_avx512(int64_t k, const void *w, const void *x, size_t x_stride, int nx, float *out);
void st_dot_q4_K_r_plain(int64_t k, const void *w, const void *x, size_t x_stride, int nx, float *out);

#endif
