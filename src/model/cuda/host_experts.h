/* host_experts.h: the host CPU's share of a tiered layer's selected experts in a decode step
 * (host_experts.c). Internal to the CUDA build. */
#ifndef ST_MODEL_CUDA_HOST_EXPERTS_H
#define ST_MODEL_CUDA_HOST_EXPERTS_H

#include "backend/cuda/cuda_backend.h"
#include "model/model.h"

typedef struct st_host_moe st_host_moe;

/* For the layers with host_layer[il] set, whose experts (in `layers`, the device table) point into
 * the mapped block whose kernel-side address is dev_base and host-side address host_base: a CPU
 * pool, the buffers of a step, the split per layer, and in poll mode the mailbox and its server.
 * The share is chosen per layer from the bus rate and the CPU's rate measured here (or forced:
 * STRATA_CUDA_CPU_EXPERTS=N); off (ST_OK, *out NULL) with STRATA_CUDA_CPU_EXPERTS=0, on a host of
 * fewer than 4 cores, or where no share pays. STRATA_CUDA_CPU_EXPERTS_MODE is poll (v4, the
 * default) or host-node (v3). `note` gets a line for the load plan. */
st_status st_host_moe_create(st_cuda *cu, const struct st_model *m, const st_layer *layers, const uint8_t *host_layer,
                             const char *dev_base, char *host_base, char *note, size_t note_len, st_host_moe **out);
void st_host_moe_free(st_cuda *cu, st_host_moe *hm);

/* How many of a token's k selected experts layer il leaves to the CPU in a decode step (the last
 * ones in selection order); 0 for a layer on the device, or with hm NULL. */
int st_host_moe_k_cpu(const st_host_moe *hm, int64_t il);

/* Whether the request goes on the side stream before the shared expert (poll: it only posts) or
 * after it (host node: the branch waits for the CPU). */
int st_host_moe_posts_first(const st_host_moe *hm);

/* The CPU's part of layer il for one token, graph-safe, in two halves. enqueue, on a side stream
 * after the routing: hands over the selection (ids, w: k each) and the normed row h (d floats).
 * finish, on the main stream after the GPU's experts: out[0..d) += the CPU's sum (poll: waits
 * for it there, bounded; host node: the copy back was on the side stream, joined before). */
st_status st_host_moe_enqueue(st_cuda *cu, st_host_moe *hm, int64_t il, const int32_t *ids, const float *w,
                              const float *h);
st_status st_host_moe_finish(st_cuda *cu, st_host_moe *hm, int64_t il, float *out);

/* Around every forward of a session (hm may be NULL): begin wakes the poll server, which then
 * spins until end; end, once the step's results are downloaded, turns a wait that gave up into
 * an error naming the layer. */
void st_host_moe_step_begin(st_host_moe *hm);
st_status st_host_moe_step_end(st_host_moe *hm);

#endif
