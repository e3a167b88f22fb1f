/* spec.h: speculative decoding, exact: a session fed through a decoder that drafts tokens ahead
 * (the model's MTP head, or an n-gram lookup in the tokens so far) and checks them with one chunk
 * of the trunk.
 *
 * The caller's loop is the plain one: sample a token from st_spec_logits(), accept it into the
 * sampler, feed it with st_spec_feed(). The decoder makes that loop cheaper without changing what
 * it computes: after feeding t it drafts d1..dN, feeds [t, d1..dN] as one chunk with every row's
 * logits (each row's logits are bit for bit those a one-row decode of the same prefix gives: the
 * kernels compute every row alone, tests/unit/test_spec.c), and keeps every row's recurrent state.
 * A later st_spec_feed of d1 costs nothing: the next logits are the chunk's next row. Feeding
 * anything else returns to the state after the last row fed ("RS rollback": the step planes of
 * the recurrent layers, st_state_keep_row; no checkpoint, no replay) and drafts again. The sampler
 * therefore draws the same random numbers in the same order for the same logits as without drafts,
 * so for any seed and any sampler settings the text is the same, token for token. */
#ifndef ST_ENGINE_SPEC_H
#define ST_ENGINE_SPEC_H

#include <stdint.h>
#include "strata.h"

#define ST_SPEC_MAX_DRAFT 16

enum { ST_SPEC_AUTO = -1, ST_SPEC_NONE = 0, ST_SPEC_MTP = 1, ST_SPEC_NGRAM = 2 };

typedef struct st_spec_params {
    int mode;       /* ST_SPEC_AUTO (the default): MTP when the model has a head (and the
                       session is on the CPU), else none */
    int n_draft;    /* drafts per chunk, 1 .. ST_SPEC_MAX_DRAFT; 0 (the default): 3 for mtp, 8
                       for ngram */
    float p_min;    /* MTP: stop drafting at a token the head gives less than this (default 0) */
    int adapt;      /* 1 (the default): draft position i only while the drafts accepted there
                       recently pay for it, and (mtp) while the head's own confidence in the
                       draft so far does (spec.c); 0: always n_draft */
} st_spec_params;

st_spec_params st_spec_default_params(void);
/* "mtp", "ngram", "none" or "auto" into *mode; 0 when it is none of them. */
int st_spec_parse_mode(const char *s, int *mode);
const char *st_spec_mode_name(int mode);

typedef struct st_spec_stats {
    int64_t fed;                 /* tokens the caller fed (st_spec_feed) */
    int64_t forwards;            /* trunk chunks run for them */
    int64_t drafted, accepted;   /* draft tokens proposed, and fed by the caller as proposed */
    int64_t drafted_at[ST_SPEC_MAX_DRAFT], accepted_at[ST_SPEC_MAX_DRAFT]; /* by draft position */
    int64_t head_forwards;       /* MTP head chunks (drafts and catch-up) */
} st_spec_stats;

typedef struct st_spec st_spec;

/* A decoder over session s (which it does not own). The mode resolves here: MTP on a model
 * without a head is an error. A session on a device verifies there (at most
 * ST_DEVICE_VERIFY_ROWS - 1 drafts per chunk, engine/device.h), its MTP head running on the CPU
 * from the hidden rows copied back; it decodes without drafts while the CPU computes a share of
 * its experts (memory tiers: a chunk's rows could not match its decode steps). */
st_status st_spec_new(st_session *s, const st_spec_params *p, st_spec **out);
void st_spec_free(st_spec *d);
int st_spec_mode(const st_spec *d);
/* Drafts per chunk at most, the mode's default resolved. */
int st_spec_n_draft(const st_spec *d);
/* Feeds prompt tokens after what the session holds, as st_session_feed does (chunks of its
 * n_prefill), keeping the MTP head's cache in step with them. */
st_status st_spec_prompt(st_spec *d, const int32_t *ids, int64_t n);
/* The logits after the last token fed: what st_session_logits() would hold without drafts. */
const float *st_spec_logits(const st_spec *d);
/* Feeds one token (a sampled one: after an end-of-generation token, do not feed). */
st_status st_spec_feed(st_spec *d, int32_t tok);
/* The same in halves, for a caller that runs the trunk's rows beside other sessions' in one
 * forward (st_session_feed_seqs, engine/session_spec.h: the server's parallel slots). _begin
 * fills *rows with what feeding tok needs (rows->n = 0: nothing, tok was a draft the last chunk
 * verified, and _end is not called); once they are fed, _end with how that went. Likewise a
 * prompt piece (at most the session's chunk): _begin gives its rows (with every row's hidden state
 * for the MTP head), _end keeps the head's cache in step. Between the halves nothing else feeds
 * the session. */
typedef struct st_feed_rows st_feed_rows;
st_status st_spec_feed_begin(st_spec *d, int32_t tok, st_feed_rows *rows);
st_status st_spec_feed_end(st_spec *d, st_status fed);
st_status st_spec_prompt_begin(st_spec *d, const int32_t *ids, int64_t n, st_feed_rows *rows);
st_status st_spec_prompt_end(st_spec *d, const st_feed_rows *rows, st_status fed);
/* Positions fed by the caller (draft rows beyond them are the decoder's). */
int64_t st_spec_n_past(const st_spec *d);
/* Drops the draft rows: the session then holds exactly what was fed, its logits those of
 * st_spec_logits(). Call it before using the session directly (save, cut, checkpoint, reuse). */
void st_spec_finish(st_spec *d);
const st_spec_stats *st_spec_stats_get(const st_spec *d);
void st_spec_stats_reset(st_spec *d);

/* ngram.c: prompt lookup. Up to n_max tokens that followed the latest earlier occurrence of the
 * longest suffix (of 1 .. ST_NGRAM_MAX tokens) of hist[0..n); returns how many. */
#define ST_NGRAM_MAX 4
int st_ngram_draft(const int32_t *hist, int64_t n, int n_max, int32_t *out);

#endif
