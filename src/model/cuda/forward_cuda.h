/* forward_cuda.h: the forward pass of one chunk on the GPU, every architecture, reading the
 * weights resident on the device (a mirror of the model's st_tensor table whose pointers are
 * device pointers) and the state resident there. The same layer structure as the CPU forward
 * (model/forward.h, qwen35.c, qwen3.c, attn.c, gdn.c, ffn.c), op for op, through the CUDA op set
 * (backend/cuda/cuda_backend.h).
 *
 * Positions come from the device (WSD_POS), so a decode step (n = 1) can be captured once as a
 * CUDA graph and replayed: attention then sees n_kv cells, a bound the caller rounds up, and the
 * causal mask from each row's position hides the cells past it. */
#ifndef ST_MODEL_CUDA_FORWARD_CUDA_H
#define ST_MODEL_CUDA_FORWARD_CUDA_H

#include "backend/cuda/cuda_backend.h"
#include "base/workspace.h"
#include "model/model.h"

/* The weights on the device: the model's tensor table with device pointers in data/f32. */
typedef struct st_dweights {
    st_tensor tok_embd, output, output_norm;
    st_layer *layers;            /* n_layer entries */
    /* Optional f16 copies of each MoE layer's experts for prompt chunks (st_cuda_moe_dequant_f16),
     * per layer gate|up [E][2ff][d] and down [E][d][ff]; NULL when not made. */
    void **moe_gu_f16, **moe_down_f16;
    /* Memory tiers: per layer, 1 when its routed experts are in host memory (NULL: none are), and
     * the CPU's share of those layers' selected experts in a decode step (NULL: none). */
    const uint8_t *host_layer;
    struct st_host_moe *host_moe;
} st_dweights;

static inline const st_layer *st_dlayer(const st_dweights *w, int64_t il) { return &w->layers[il]; }

/* Per-layer state on the device. */
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
} st_dlayer_state;

/* Device workspace buffer ids. */
enum st_dws_id {
    WSD_X, WSD_H, WSD_T, WSD_POS, WSD_TOK,
    WSD_Q, WSD_QN, WSD_K, WSD_V, WSD_ATT, WSD_QKV,
    WSD_CONV, WSD_Z, WSD_BA, WSD_A, WSD_B, WSD_G, WSD_BETA, WSD_GDN_OUT,
    WSD_FF_A, WSD_FF_B,
    WSD_ROUTER, WSD_IDS, WSD_W, WSD_GE, WSD_YE, WSD_SH, WSD_SH_Y, WSD_SH_G,
    WSD_LOGITS, WSD_Q8, WSD_GEQ, WSD_SHQ, WSD_X2, WSD_OQ,
    WSD_N_BUFFERS /* the number of ids, not a buffer */
};

/* Rows of logits the head computes per pass (logits for every row go out in blocks of these). */
#define ST_DEV_LOGIT_ROWS 64

/* The device workspace's size function (ctx = the model). */
size_t st_forward_cuda_ws_size(const void *model, int id, int64_t rows);

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
    int64_t n;                   /* rows; the token ids are in WSD_TOK, the positions in WSD_POS */
    int64_t pos0;                /* the first row's position (host copy, for sizes only) */
    int64_t n_kv;                /* cells attention may see: >= pos0 + n */
    int logits_all;              /* 1: rows' logits in blocks through `emit`; 0: the last row's in WSD_LOGITS */
    const int32_t *tokens_host;  /* the ids on the host (eager chunks: embedding with a range check), or
                                    NULL: read WSD_TOK on the device (graph capture) */
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
     * stay those of the chunk without it). Every other chunk leaves its normed rows in WSD_H. */
    float *h_host;
} st_dchunk;

/* The most rows of a verify chunk: the decode kernels' (prepared 8-bit rows, fused SwiGLU, side
 * stream) limit, so the chunk takes the same kernels as a step of one row. */
#define ST_DEV_VERIFY_ROWS 8 /* engine/device.h's ST_DEVICE_VERIFY_ROWS */

/* Called for each block of logits rows when logits_all: rows r0 .. r0+nr-1 are in WSD_LOGITS. */
typedef st_status (*st_dlogits_fn)(void *ctx, int64_t r0, int64_t nr);

/* Enqueues one chunk. Nothing waits unless tokens_host is given (the embedding's range check) or
 * emit is called. */
st_status st_forward_cuda(st_cuda *cu, const struct st_model *m, const st_dweights *w, st_dlayer_state *state,
                          uint32_t kv_type, st_workspace *ws, const st_dchunk *c, st_dlogits_fn emit, void *emit_ctx);

#endif
