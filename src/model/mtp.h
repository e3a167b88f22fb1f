/* mtp.h: the MTP (NextN) head's forward (mtp.c): a chunk of draft rows through the one layer of the
 * head over its own KV cache, beside the trunk's forward (forward.h) and driven by speculative
 * decoding (engine/spec.c). */
#ifndef ST_MODEL_MTP_H
#define ST_MODEL_MTP_H

#include <stdint.h>
#include "base/pool.h"
#include "base/workspace.h"
#include "model/model.h"
#include "model/state.h"

/* One chunk through the MTP head (MODELS.md §7, MODELS-ERRATA F10): row i is token
 * tokens[i] at position s->mtp_n_past + i with the hidden state h_in row i (the trunk's output-
 * normed state at the position before, zeros before position 0, or the head's own for a chained
 * draft). The rows go into the head's KV cache and mtp_n_past advances by n. kv_only: nothing
 * else (catch-up rows whose logits nobody reads need only their K and V); otherwise the last
 * row's logits go to `logits` (n_vocab) and its output-normed state to h_out (d). */
typedef struct st_mtp_chunk {
    const int32_t *tokens;
    const float *h_in;         /* [n][d] */
    int64_t n;
    int kv_only;
    float *logits, *h_out;
} st_mtp_chunk;
st_status st_forward_mtp(const struct st_model *m, st_state *s, st_workspace *ws, st_pool *pool, const st_mtp_chunk *c);

#endif
