/* strata.h: the public C API of Strata.
 *
 * Strata runs hybrid Mixture-of-Experts language models (qwen35moe, qwen35, qwen3next, qwen4exp,
 * qwen3moe, qwen3) from llama.cpp's GGUF files. Every function returns an st_status; on failure a message
 * naming what is wrong is kept per thread and returned by st_last_error(). Nothing here prints or
 * exits. */
#ifndef STRATA_H
#define STRATA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h> /* FILE, for saving a session state */

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_VERSION "0.1.0"

typedef enum st_status {
    ST_OK = 0,
    ST_ERR_IO,          /* a file could not be opened, mapped, read or written */
    ST_ERR_FORMAT,      /* a file is malformed: the message names the field */
    ST_ERR_UNSUPPORTED, /* well-formed, but not something Strata runs */
    ST_ERR_INVALID,     /* a bad argument from the caller */
    ST_ERR_NOMEM,       /* an allocation failed */
    ST_ERR_RANGE,       /* an index, token id or length out of range */
    ST_ERR_CANCELLED,   /* the caller asked to stop */
} st_status;

/* The message of the last failure on this thread ("" if none). */
const char *st_last_error(void);
/* A short name for a status ("format error", ...). */
const char *st_status_name(st_status s);
const char *st_version(void);

/* ---- Models ---------------------------------------------------------------------------------- */

typedef struct st_model st_model;
typedef struct st_session st_session;

typedef struct st_model_params {
    int progress;            /* show a progress line while loading (only drawn on a terminal) */
    int prefault;            /* read every weight page once at load, so the first tokens are not slow */
    int copy_weights;        /* 1: copy the tensor data out of the file mapping into anonymous
                                (huge-page) memory; 0: use it in place from the mapping; -1 (the
                                default): copy when it takes at most half of the available memory.
                                Why: bench/results/2026-11-29-cpu-qwen35moe-small.md. */
    int device;              /* ST_DEVICE_AUTO (the default): the GPU when this build has CUDA and a
                                GPU is present and the model runs there, else the CPU;
                                ST_DEVICE_CPU; ST_DEVICE_CUDA (an error if it cannot) */
    double gpu_mem_gib;      /* on a GPU: the device memory in use may reach this many GiB (the
                                weights, a session, the context); 0 (the default): all of it less
                                1 GiB. When the weights do not fit, the routed experts of the MoE
                                layers past it stay in pinned host memory, read over the bus
                                (st_model_device_plan says what sits where) */
} st_model_params;

enum { ST_DEVICE_AUTO = -1, ST_DEVICE_CPU = 0, ST_DEVICE_CUDA = 1 };
/* GPUs this build can use (0 without CUDA support, a driver or a GPU). */
int st_device_count(void);

st_model_params st_model_default_params(void);
/* Opens a GGUF file, reads its hyperparameters and binds every weight (used in place from the
 * mapping). A file whose tokenizer Strata does not support still loads: st_model_has_tokenizer()
 * is then 0 and the message of st_model_tokenizer_error() says why. */
st_status st_model_load(const char *path, const st_model_params *params, st_model **out);
void st_model_free(st_model *m);

const char *st_model_arch(const st_model *m);        /* "qwen35moe", ... */
int32_t st_model_n_vocab(const st_model *m);
int64_t st_model_n_ctx_train(const st_model *m);
int64_t st_model_n_layer(const st_model *m);
/* Where the model runs: "cpu", or the GPU ("NVIDIA H200, 132 SMs, 139.8 GiB, cc 9.0"). */
const char *st_model_device(const st_model *m);
/* On a GPU: its memory's read bandwidth in GB/s, measured now (a read of 2 GiB); 0 on the CPU. */
double st_model_device_bandwidth(const st_model *m);
/* On a GPU: where the weights sit ("all 18.0 GiB of weights on the GPU", or the split between the
 * GPU and pinned host memory under the budget, with the share of expert reads the GPU serves); ""
 * on the CPU. */
const char *st_model_device_plan(const st_model *m);
/* On a GPU: the bus's bandwidth in GB/s, measured now over `bytes` of pinned host memory: kernels
 * reading it in place (*mapped), and a host-to-device copy (*copy). Zeros on the CPU. */
void st_model_device_bus_bandwidth(const st_model *m, size_t bytes, double *mapped, double *copy);
/* Bytes of all bound weights, and the bytes one decoded token reads (every dense weight, the
 * routed experts' share k/E of the expert weights, one embedding row). */
uint64_t st_model_weight_bytes(const st_model *m);
uint64_t st_model_decode_bytes(const st_model *m);
/* Bytes of qwen4exp's PLE n-gram table (0 for other models), not among the weight bytes: it stays
 * in the file mapping, a few rows read per token, so the machine needs no memory for it. */
uint64_t st_model_ple_table_bytes(const st_model *m);

/* The context a session of this model can take here: the model's context_length, lowered when
 * its KV cache (and held ids) would take more than half of the memory free now, the GPU's for a
 * model on a GPU, else the host's available memory. Lowered counts are multiples of 256. */
typedef struct st_ctx_fit {
    int64_t n_ctx;           /* the cells to take */
    int64_t n_ctx_train;     /* the model's context_length */
    uint64_t cell_bytes;     /* bytes per cell: the KV rows of every attention layer, and its id */
    uint64_t free_bytes;     /* the memory free now, 0 if unknown (then nothing is lowered) */
    int capped;              /* 1: n_ctx < n_ctx_train because of the memory */
} st_ctx_fit;
st_ctx_fit st_model_ctx_fit(const st_model *m, int kv_f32);

/* Bytes of the session's caches one decoded token reads after n_past held positions: the K and V
 * rows of every position a full-attention layer attends to (n_past + 1; for qwen4exp's QSA layers
 * only the W cells the indexer selects, with the pooled block keys it scores and the raw indexer
 * keys it pools). A recurrent layer's state is not counted. */
uint64_t st_model_decode_kv_bytes(const st_model *m, int kv_f32, int64_t n_past);

/* ---- Text (through the model's tokenizer) ---------------------------------------------------- */

int st_model_has_tokenizer(const st_model *m);
const char *st_model_tokenizer_error(const st_model *m);
/* Tokenizes text into *ids (malloc'd, caller frees). parse_special: match control tokens. */
st_status st_model_tokenize(const st_model *m, const char *text, size_t len, int add_special,
                            int parse_special, int32_t **ids, size_t *n);
/* End-of-generation token (eos, eot, <|im_end|>, ...). */
int st_model_is_eog(const st_model *m, int32_t id);

/* ---- Sessions -------------------------------------------------------------------------------- */

typedef struct st_session_params {
    int64_t n_ctx;           /* KV cells; 0 = min(context_length, 4096) (the CLI's default is
                                st_model_ctx_fit's) */
    int n_prefill;           /* rows per prompt chunk (--prefill), default 512 */
    int n_threads;           /* 0 = one per core */
    int kv_f32;              /* 1: f32 KV cache; default f16 as llama.cpp */
} st_session_params;

st_session_params st_session_default_params(void);
st_status st_session_new(st_model *m, const st_session_params *params, st_session **out);
void st_session_free(st_session *s);
/* Back to an empty sequence: no positions, zero recurrent state. */
void st_session_reset(st_session *s);
int64_t st_session_n_past(const st_session *s);
int64_t st_session_n_ctx(const st_session *s);
/* Bytes of the session's state (KV caches, recurrent states) and of its scratch workspace. */
uint64_t st_session_state_bytes(const st_session *s);
uint64_t st_session_scratch_bytes(const st_session *s);

/* Feeds n tokens (prompt chunks of up to n_prefill rows; decode is n = 1). Token ids are checked
 * first: an id outside the vocabulary is ST_ERR_RANGE and nothing is fed. If logits_all is not
 * NULL it receives the logits of every fed position, [n][n_vocab]. The last position's logits are
 * always kept for st_session_logits(). */
st_status st_session_feed(st_session *s, const int32_t *tokens, int64_t n, float *logits_all);
/* Feeds several sessions of one model in one forward (parallel slots): session k takes
 * tokens[k][0..n[k]), at most 256 sessions, each once. The weights (projections, FFN, experts,
 * head) are read once for all rows; attention over a sequence's KV cache and its recurrent steps
 * run on its own rows. Each session's logits are those of its sequence fed
 * alone in the same pieces, bit for bit (its rows' arithmetic does not depend on the others).
 * The forward runs on lead's threads and workspace (lead, a session of the same model, may be one
 * of s or not; its state changes only if it is). Every check (ids, room) comes first; a failed
 * forward resets every session of the batch. Sessions on a device are fed one after the other. */
st_status st_session_feed_batch(st_session *lead, st_session *const *s, int n_sessions, const int32_t *const *tokens,
                                const int64_t *n);
/* The last fed position's logits (n_vocab floats), valid until the next feed. */
const float *st_session_logits(const st_session *s);
/* An embedding of tokens: the session is reset, fed them, and out receives the last position's
 * final hidden state (after the output norm: what the LM head reads), st_session_n_embd floats.
 * The session then holds tokens. ST_ERR_UNSUPPORTED on a GPU session. */
st_status st_session_embed(st_session *s, const int32_t *tokens, int64_t n, float *out);
int32_t st_session_n_embd(const st_session *s);

/* ---- Session state ------------------------------------------------------------------------- */
/* A session remembers the ids it was fed, and its state stands for exactly those ids. It can go
 * back to a prefix of them: attention layers simply forget the later positions, but a recurrent
 * (Gated DeltaNet) layer cannot run backwards, so a hybrid model returns only to a checkpoint, a
 * copy of its recurrent state taken with st_session_checkpoint() (take them where a later prompt
 * may diverge, such as before each message). Nothing here leaves a state that does not match the
 * ids. After a cut or a load the logits are stale: feed at least one token before sampling.
 * A session whose state lives on a device (a GPU) copies it across: checkpoints are kept in host
 * memory, and a state saved on a device is byte for byte the CPU's, so it loads on either (with
 * the same KV type). */

#define ST_SESSION_CHECKPOINTS 4 /* checkpoints kept; taking one more drops the oldest */

/* The ids the session holds, st_session_n_past() of them; valid until the next feed, cut,
 * reset or load. */
const int32_t *st_session_ids(const st_session *s);
/* 1 when the model has recurrent layers (a cut goes back to a checkpoint), 0 for attention only. */
int st_session_is_recurrent(const st_session *s);
/* Goes back to the first n held positions, or for a recurrent model to the latest checkpoint at
 * or before n (n = 0 is always exact); *kept (may be NULL) receives where it went. Checkpoints
 * past it are dropped. ST_ERR_RANGE, the session untouched, when n is not within the held ids or
 * no checkpoint is at or before it. */
st_status st_session_cut(st_session *s, int64_t n, int64_t *kept);
/* Reuse for a new prompt: keeps the longest prefix of prompt[0..n) that the session holds and can
 * return to exactly, leaving at least the last prompt token to feed; a fresh sequence when none.
 * *kept receives the kept count: feed prompt + *kept next. */
st_status st_session_reuse(st_session *s, const int32_t *prompt, int64_t n, int64_t *kept);
/* Checkpoints the recurrent state at the current position (nothing to do for attention only; one
 * already there is kept). */
st_status st_session_checkpoint(st_session *s);
/* The positions of the checkpoints held, oldest first (up to cap of them); returns how many. */
int st_session_checkpoints(const st_session *s, int64_t *pos, int cap);

/* ---- Prompts: what the next turn of a conversation reuses ------------------------------------ */
/* The one reuse policy of the terminal chat and the server. A new prompt is matched against the
 * ids a session holds (and, given a prompt cache, against the states it keeps): where the two part
 * inside an assistant message that the prompt renders otherwise than the session holds it (chat
 * templates drop earlier reasoning, and may space tool calls or trim the text differently) and the
 * texts agree once the <think>...</think> block and all white space are left out, the held message
 * stands in for the rendered one, as the model wrote it. So turn N+1 reuses all of turn N: its
 * prompt, its reply with the reasoning, up to the <|im_end|> the prompt adds. Then the session
 * keeps the longest prefix it can return to exactly (st_session_reuse).
 * The prompt is fed in pieces of at most a chunk that, for a hybrid model, end before each message
 * (<|im_start|>) with a checkpoint there, so a later prompt that parts at a message returns to it. */

typedef struct st_prompt_cache st_prompt_cache;

typedef struct st_prompt {
    int32_t *ids;        /* the prompt as the session will hold it (malloc'd; st_prompt_free) */
    int64_t n;
    int64_t cached;      /* the positions reused, not computed again */
    int64_t done;        /* the positions in the state: feed ids + done next */
} st_prompt;

/* Prepares s for prompt[0..n): keeps what it can of its own state, or, with a cache (may be NULL),
 * of the cached state that keeps most; s's own state goes into the cache first whenever it would
 * lose positions. p->done = p->cached afterwards. */
st_status st_session_prompt(st_session *s, st_prompt_cache *cache, const int32_t *prompt, int64_t n, st_prompt *p);
/* How many positions of prompt s would keep (of its own state, without a cache): for choosing
 * among the sessions of parallel slots. */
int64_t st_session_prompt_reach(const st_session *s, const int32_t *prompt, int64_t n);
/* Feeds the next piece of p (at most max_rows rows, 0: the session's chunk); p->done advances. A
 * failed feed resets the session, as st_session_feed does. */
st_status st_session_prompt_feed(st_session *s, st_prompt *p, int64_t max_rows);
/* The same in two halves, for a piece fed with others (st_session_feed_batch): the rows of the next
 * piece (0 when p is in), then, once they are fed, p advanced past them (the checkpoint taken). */
int64_t st_session_prompt_piece(const st_session *s, const st_prompt *p, int64_t max_rows);
void st_session_prompt_advance(st_session *s, st_prompt *p, int64_t rows);
void st_prompt_free(st_prompt *p);

/* A prompt cache: the states of recent conversations (held ids, KV rows, recurrent state and
 * checkpoints) in host memory, at most max_bytes of them, the least recently used dropped first. */
st_status st_prompt_cache_new(uint64_t max_bytes, st_prompt_cache **out);
/* The default size: a quarter of the host memory available now, at most 8 GiB (256 MiB when the
 * memory is unknown). */
uint64_t st_prompt_cache_default_bytes(void);
void st_prompt_cache_free(st_prompt_cache *c);
/* Puts s's state in (a held state that extends an entry replaces it; one that an entry already
 * extends is not stored again). */
st_status st_prompt_cache_store(st_prompt_cache *c, const st_session *s);
int st_prompt_cache_count(const st_prompt_cache *c);
uint64_t st_prompt_cache_bytes(const st_prompt_cache *c);

/* The identity a saved state carries: 16 hex digits of a hash of the architecture, the layer
 * count, the vocabulary size, the weight bytes and general.name. */
void st_model_fingerprint(const st_model *m, char out[65]);
/* The whole state (the held ids, the KV rows of the held positions, the recurrent state and the
 * checkpoints) as one versioned byte string with the model's fingerprint and a checksum: into a
 * malloc'd buffer, or written to f. */
st_status st_session_state_save(const st_session *s, void **buf, size_t *n);
st_status st_session_state_write(const st_session *s, FILE *f);
/* Restores a saved state. All of it is checked before anything changes: a string for another
 * model or another KV type, a truncated, padded or altered one, or one longer than the context is
 * refused with a message naming which (ST_ERR_FORMAT, ST_ERR_RANGE) and the session is untouched.
 * st_session_state_read reads exactly one state from f. */
st_status st_session_state_load(st_session *s, const void *buf, size_t n);
st_status st_session_state_read(st_session *s, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
