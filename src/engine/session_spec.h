/* session_spec.h: what speculative decoding (engine/spec.c) drives a CPU session by: one chunk
 * with every row's logits and hidden state and every row's recurrent state kept, the return to the
 * state after one of its rows, and the MTP head's chunks over its own KV cache. Not public API. */
#ifndef ST_ENGINE_SESSION_SPEC_H
#define ST_ENGINE_SESSION_SPEC_H

#include "model/forward.h"
#include "strata.h"

/* Feeds n tokens as one chunk (n <= the step planes when keep_steps): logits_all [n][n_vocab] or
 * NULL (then only the last row's, for st_session_logits), h_all [n][d] or NULL. Ids are held as
 * st_session_feed holds them; a failure resets the session. */
st_status st_session_feed_rows(st_session *s, const int32_t *tokens, int64_t n, float *logits_all, float *h_all,
                               int keep_steps);
/* Step planes for keep_steps chunks of up to `rows` rows (state memory, kept until freed). */
st_status st_session_reserve_steps(st_session *s, int rows);
/* After a keep_steps chunk fed at pos0: back to the state after its row k (ids, KV, recurrent). */
void st_session_keep_row(st_session *s, int64_t pos0, int64_t k);
/* The MTP head (model/mtp.c) over the session's head cache. */
st_status st_session_mtp(st_session *s, const st_mtp_chunk *c);
int64_t st_session_mtp_n_past(const st_session *s);
void st_session_mtp_cut(st_session *s, int64_t n);
int st_session_on_device(const st_session *s);
int st_session_n_prefill(const st_session *s);

#endif
