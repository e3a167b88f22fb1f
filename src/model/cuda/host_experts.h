/* host_experts.h: the host CPU's share of a tiered layer's selected experts in a decode step
 * (host_experts.c). Internal to the CUDA build. */
#ifndef ST_MODEL_CUDA_HOST_EXPERTS_H
#define ST_MODEL_CUDA_HOST_EXPERTS_H

#include "backend/cuda/cuda_backend.h"
#include "model/model.h"

typedef struct st_host_moe st_host_moe;

/* For the layers with host_layer[il] set, whose experts (in `layers`, the device table) point into
 * the mapped block whose kernel-side address is dev_base and host-side address host_base: a CPU
 * pool, the pinned buffers of one step, and the split. Off (ST_OK, *out NULL) unless
 * STRATA_CUDA_CPU_EXPERTS is N > 0 (the share) or auto (chosen from the bus rate and the CPU's
 * rate measured here): measured, it slows decode (host_experts.c). `note` gets a line for the load
 * plan. */
st_status st_host_moe_create(st_cuda *cu, const struct st_model *m, const st_layer *layers, const uint8_t *host_layer,
                             const char *dev_base, char *host_base, char *note, size_t note_len, st_host_moe **out);
void st_host_moe_free(st_cuda *cu, st_host_moe *hm);

/* How many of a token's k selected experts layer il leaves to the CPU in a decode step (the last
 * ones in selection order); 0 for a layer on the device. */
int st_host_moe_k_cpu(const st_host_moe *hm, int64_t il);

/* Enqueues the CPU's part of layer il for one token on cu's current stream: the selection (ids,
 * w: k each) and the normed row h (d floats) to the host, the pool's work as a host node, and its
 * partial sum back to the device; returns that device vector (d floats) in *y. Graph-safe. */
st_status st_host_moe_enqueue(st_cuda *cu, st_host_moe *hm, int64_t il, const int32_t *ids, const float *w,
                              const float *h, const float **y);

#endif
