/* forward_cuda.h: the forward pass of one chunk on the GPU, every architecture the device runs:
 * the forward every backend shares (model/stacks.h) on the GPU's op table
 * (backend/cuda/backend_cuda.h), reading the weights resident on the device (a view of the model
 * whose tensors hold device pointers) and the state resident there, with the GPU's MoE layer.
 *
 * Positions come from the device (WS_POS), so a decode step (n = 1) can be captured once as a
 * CUDA graph and replayed: attention then sees n_kv cells, a bound the caller rounds up, and the
 * causal mask from each row's position hides the cells past it. */
#ifndef ST_MODEL_CUDA_FORWARD_CUDA_H
#define ST_MODEL_CUDA_FORWARD_CUDA_H

#include "backend/cuda/backend_cuda.h"
#include "backend/cuda/cuda_backend.h"
#include "base/workspace.h"
#include "model/forward_ws.h"
#include "model/model.h"
#include "model/state.h"

/* The weights on the device: the model's tensor table with device pointers in data/f32. */
typedef struct st_dweights {
    st_tensor tok_embd, output, output_norm;
    st_tensor hc_head_norm, hc_head_down, hc_head_up; /* qwen4exp's head mixer (the PLE table stays
                                                         on the host: its rows are gathered there) */
    st_layer *layers;            /* n_layer entries */
    /* Optional f16 copies of each MoE layer's experts for prompt chunks (st_cuda_moe_dequant_f16),
     * per layer gate|up [E][2ff][d] and down [E][d][ff]; NULL when not made. */
    void **moe_gu_f16, **moe_down_f16;
    /* Memory tiers: per layer, 1 when its routed experts are in host memory (NULL: none are), and
     * the CPU's share of those layers' selected experts in a decode step (NULL: none). */
    const uint8_t *host_layer;
    struct st_host_moe *host_moe;
    /* qwen4exp: the PLE table in host memory as kernels read it (a pinned mapped copy), or NULL:
     * then the host gathers its rows, and a decode step cannot be a graph */
    const void *ple_dev;
} st_dweights;

static inline const st_layer *st_dlayer(const st_dweights *w, int64_t il) { return &w->layers[il]; }

/* Per-layer state on the device, as the session owns it; the forward reads it through an
 * st_state whose layers point at these buffers (st_forward_cuda_state). */
typedef struct st_dlayer_state {
    void *k_cache, *v_cache;     /* [n_ctx][H_kv*hd] of kv_type */
    float *conv;                 /* [C][K-1] */
    float *ssm;                  /* [n_v][dv][dk] */
    /* Step planes of a speculative verify chunk (st_dchunk.keep_steps), NULL until reserved: the
     * conv states after each row, [n_steps][C*(K-1)], and a device array of n_steps pointers to
     * the delta states after each row (st_gdn_args.state_steps), in one block at ssm_planes. */
    float *conv_steps;
    float **ssm_steps;
    float *ssm_planes;
    /* qwen4exp: a QSA layer's raw indexer keys [n_ctx][idx_dim] of kv_type and pooled block keys
     * [n_ctx/r + 1][idx_dim]; the PLE layer's conv history [hc*d][(K_ple-1)*N] */
    void *idx_cache;
    float *idx_blocks;
    float *ple_hist;
} st_dlayer_state;

/* Rows of logits the head computes per pass (logits for every row go out in blocks of these). */
#define ST_DEV_LOGIT_ROWS 64

/* The device workspace's size function over model/forward_ws.h's ids (ctx = an st_ws_plan: the
 * model and the session's cells). */
size_t st_forward_cuda_ws_size(const void *plan, int id, int64_t rows);
/* The model as the device forward reads it: m with w's tensors (device pointers). */
void st_forward_cuda_view(const struct st_model *m, const st_dweights *w, struct st_model *view);
/* The widest product input the GPU backend prepares in 8 bits (st_cuda_backend_init's max_k). */
int64_t st_forward_cuda_prep_width(const struct st_model *m);

/* Refuses, naming the tensor or the setting, what the device forward cannot run. */
st_status st_forward_cuda_check(const struct st_model *m);

/* Time per block kind, for STRATA_CUDA_PROFILE=1 (each block then waits for the GPU). */
enum { DPROF_EMBED, DPROF_ATTN, DPROF_GDN, DPROF_FFN, DPROF_NORM_ADD, DPROF_HEAD, DPROF_COUNT };
typedef struct st_dprofile {
    double ms[DPROF_COUNT];
    int64_t chunks, rows;
} st_dprofile;
extern const char *const st_dprofile_names[DPROF_COUNT];

typedef struct st_dchunk {
    int64_t n;                   /* rows; the token ids are in WS_TOK, the positions in WS_POS */
    int64_t pos0;                /* the first row's position (host copy, for sizes only) */
    int64_t n_kv;                /* cells attention may see: >= pos0 + n */
    int logits_all;              /* 1: rows' logits in blocks through `emit`; 0: the last row's in WS_LOGITS */
    const int32_t *tokens_host;  /* the ids on the host (eager chunks: embedding with a range check), or
                                    NULL: read WS_TOK on the device (graph capture) */
    st_dprofile *prof;           /* NULL, or time each block into it (eager chunks only) */
    int unfused;                 /* 1: the plain op sequence (no fused norms, no prepared activations) */
    int outs_unfused;            /* 1: decode-sized chunks without the fused block outputs: the GDN's
                                    and attention's output gates into 8 bits for their out products,
                                    the routed and shared experts' combines in one pass (A/B runs) */
    /* A speculative verify chunk (at most ST_DEV_VERIFY_ROWS rows, with logits_all): each GDN
     * layer writes the state after every row into its step planes and leaves its state as it was
     * (the conv state moves on; both are restored from the planes); attention runs each row t alone
     * over row_n_kv[t] cells (host), so that every row's logits are bit for bit those of a decode
     * step at its position. */
    int keep_steps;
    const int64_t *row_n_kv;
    /* A prompt chunk (more than one row, the last row's logits) for the MTP head: every row's
     * output-normed hidden state into h_host ([n][d], host; the chunk waits for it), from the last
     * layer's FFN run on all rows beside the one-row FFN that the logits come from (so the logits
     * stay those of the chunk without it). Every other chunk leaves its normed rows in WS_H. */
    float *h_host;
    /* qwen4exp: the PLE hash's window is in WS_PLE_IDS (the session uploaded it: a graph step) */
    int ple_win_given;
} st_dchunk;

/* The most rows of a verify chunk: the decode kernels' (prepared 8-bit rows, fused SwiGLU, side
 * stream) limit, so the chunk takes the same kernels as a step of one row. */
#define ST_DEV_VERIFY_ROWS 8 /* engine/device.h's ST_DEVICE_VERIFY_ROWS */

/* Called for each block of logits rows when logits_all: rows r0 .. r0+nr-1 are in WS_LOGITS. */
typedef st_status (*st_dlogits_fn)(void *ctx, int64_t r0, int64_t nr);

/* Enqueues one chunk on the backend be (one per session) for the model view m (st_forward_cuda_view)
 * with w its device weights (the MoE layer's expert copies and tiers). Nothing waits unless
 * tokens_host is given (the embedding's range check), emit is called or h_host is filled. */
st_status st_forward_cuda(st_cuda_backend *be, const struct st_model *m, const st_dweights *w, st_state *state,
                          st_workspace *ws, const st_dchunk *c, st_dlogits_fn emit, void *emit_ctx);

#endif
