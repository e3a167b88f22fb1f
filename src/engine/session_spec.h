/* session_spec.h: what speculative decoding (engine/spec.c) drives a session by (on a device:
 * engine/device.h's verify chunk, the MTP head on the CPU from the rows copied back): one chunk
 * with every row's logits and hidden state and every row's recurrent state kept, alone or beside
 * other sessions' rows in one forward (the server's parallel slots), the return to the state after
 * one of its rows, and the MTP head's chunks over its own KV cache. Not public API. */
#ifndef ST_ENGINE_SESSION_SPEC_H
#define ST_ENGINE_SESSION_SPEC_H

#include "model/mtp.h"
#include "strata.h"

/* Feeds n tokens as one chunk (n <= the step planes when keep_steps): logits_all [n][n_vocab] or
 * NULL (then only the last row's, for st_session_logits), h_all [n][d] or NULL. Ids are held as
 * st_session_feed holds them; a failure resets the session. */
st_status st_session_feed_rows(st_session *s, const int32_t *tokens, int64_t n, float *logits_all, float *h_all,
                               int keep_steps);
/* The rows of one session in a shared forward (st_session_feed_seqs): a decode row or a prompt
 * piece (logits_all and h_all NULL, keep_steps 0: the last row's logits, st_session_logits), or
 * a chunk as st_session_feed_rows feeds it (a verify chunk: every row's logits and hidden state,
 * every row's recurrent state kept). */
typedef struct st_feed_rows {
    st_session *s;
    const int32_t *tokens;
    int64_t n;
    float *logits_all;         /* NULL, or [n][n_vocab] */
    float *h_all;              /* NULL, or [n][d] */
    int keep_steps;
} st_feed_rows;
/* st_session_feed_batch with rows of any kind: one forward, on lead's threads and workspace, for
 * all of them (each session at most once); the session's logits are its last row's. A failure
 * resets every session of the batch. One session alone is fed as st_session_feed (its chunks) or
 * st_session_feed_rows feed it. */
st_status st_session_feed_seqs(st_session *lead, const st_feed_rows *rows, int n);
/* Step planes for keep_steps chunks of up to `rows` rows (state memory, kept until freed). */
st_status st_session_reserve_steps(st_session *s, int rows);
/* After a keep_steps chunk fed at pos0: back to the state after its row k (ids, KV, recurrent). */
void st_session_keep_row(st_session *s, int64_t pos0, int64_t k);
/* The session's logits (st_session_logits) become `row` (n_vocab floats). */
void st_session_set_logits(st_session *s, const float *row);
/* The MTP head (model/mtp.c) over the session's head cache. */
st_status st_session_mtp(st_session *s, const st_mtp_chunk *c);
int64_t st_session_mtp_n_past(const st_session *s);
void st_session_mtp_cut(st_session *s, int64_t n);
int st_session_on_device(const st_session *s);
int st_session_n_prefill(const st_session *s);

#endif
