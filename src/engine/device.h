/* device.h: the engine's accelerator path. A session over a model loaded for a device
 * (model/device.h: its weights resident there) keeps the KV caches, the recurrent states and the
 * prompt workspace there too (st_device_session), and its forward runs there (model/cuda/).
 * Only the token ids go in and the logits come out.
 *
 * Built with -DSTRATA_CUDA=ON this is the CUDA backend (engine/cuda/session_cuda.c); otherwise
 * device_none.c answers that the build has no device. session.c and session_state.c dispatch
 * here when the model was loaded for a device. */
#ifndef ST_ENGINE_DEVICE_H
#define ST_ENGINE_DEVICE_H

#include <stdint.h>
#include "model/device.h"
#include "strata.h"

typedef struct st_device_session st_device_session;

/* A sequence's state on the device: KV caches of n_ctx cells (kv_type F16 or F32), recurrent
 * states, and the prompt workspace for up to n_prefill rows (grown between chunks). */
st_status st_device_session_new(st_device_model *dm, const struct st_model *m, int64_t n_ctx, uint32_t kv_type,
                                st_device_session **out);
void st_device_session_free(st_device_session *ds);
/* The ids of every position the session holds (host, the engine session's: written before each
 * feed), which qwen4exp's PLE hash reads. */
void st_device_session_set_ids(st_device_session *ds, const int32_t *ids);
/* Zero recurrent state, no positions. */
st_status st_device_session_reset(st_device_session *ds);
/* Feeds one chunk of n tokens at positions n_past .. n_past+n-1 (ids already checked). logits_all
 * (host, [n][n_vocab]) receives every row's logits when not NULL; the last row's are always kept
 * for st_device_session_logits. n == 1 replays a captured CUDA graph. */
st_status st_device_session_feed(st_device_session *ds, const int32_t *tokens, int64_t n, int64_t n_past,
                                 float *logits_all);
/* The speculative verify chunk (engine/spec.c), as st_session_feed_rows defines it on the CPU:
 * reserve_steps makes room for chunks of up to `rows` rows (at most ST_DEVICE_VERIFY_ROWS) that
 * keep every row's recurrent state; verify feeds n rows with every row's logits into logits_all
 * (each bit for bit the decode step's at its position), keeping the states when keep_steps (one
 * row without is a decode step, through its graph); keep_row(k) then returns the recurrent state
 * to the one after row k (the caller moves n_past; attention cells past it are never read).
 * h_all (NULL, or [n][d] host): every row's output-normed hidden state, the MTP head's input; a
 * prompt piece (logits_all NULL, keep_steps 0) gets them too, its logits those of a plain feed. */
#define ST_DEVICE_VERIFY_ROWS 8
st_status st_device_session_reserve_steps(st_device_session *ds, int rows);
st_status st_device_session_verify(st_device_session *ds, const int32_t *tokens, int64_t n, int64_t n_past,
                                   float *logits_all, float *h_all, int keep_steps);
void st_device_session_keep_row(st_device_session *ds, int64_t k);
/* The last fed row's logits become `row` (a verify chunk's kept row). */
void st_device_session_set_logits(st_device_session *ds, const float *row);
/* The last fed row's logits (n_vocab floats, zeros before the first feed; pinned host memory the
 * download writes straight into), valid until the next feed. */
const float *st_device_session_logits(const st_device_session *ds);
/* Grows the workspace to `rows` rows (between chunks only). */
st_status st_device_session_reserve(st_device_session *ds, int64_t rows);
uint64_t st_device_session_state_bytes(const st_device_session *ds);
uint64_t st_device_session_scratch_bytes(const st_device_session *ds);
/* The device's own free-memory accounting (cudaMemGetInfo), for the workspace tests. */
st_status st_device_mem_info(const st_device_session *ds, size_t *free_bytes, size_t *total_bytes);

/* One part of a layer's state, in the host st_state's layout (model/state.h), so that a state
 * copied out of a device is the CPU session's byte for byte (session_state.c saves, loads and
 * checkpoints through these). */
enum st_dstate_part {
    ST_DSTATE_CONV,  /* Gated DeltaNet layer: conv state [C][K-1] f32, all of it */
    ST_DSTATE_SSM,   /* Gated DeltaNet layer: delta-rule state [n_v][dv][dk] f32, all of it */
    ST_DSTATE_K,     /* attention layer: the first n_cells cells of the K cache, [n_cells][H_kv*hd] of kv_type */
    ST_DSTATE_V,     /* the same of the V cache */
    ST_DSTATE_IDX,   /* qwen4exp QSA layer: the first n_cells cells of the raw indexer keys, [n_cells][idx_dim] of kv_type */
    ST_DSTATE_PLE,   /* qwen4exp PLE layer: the conv history [hc*d][(K_ple-1)*N] f32, all of it */
};
/* Device -> host (read) or host -> device (write) of one part; both wait for the device, so the
 * host buffer is free again on return. ST_ERR_INVALID for a part the layer lacks, ST_ERR_RANGE
 * for cells past n_ctx. Only between feeds. */
st_status st_device_session_read_state(st_device_session *ds, int64_t il, int part, int64_t n_cells, void *host);
st_status st_device_session_write_state(st_device_session *ds, int64_t il, int part, int64_t n_cells, const void *host);

#endif
