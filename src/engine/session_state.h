/* session_state.h: the seam between session.c (which owns the session struct) and
 * session_state.c (which implements strata.h's "Session state" section on it). Not public.
 *
 * session.c records every fed id in a buffer of n_ctx ids and holds a slot for the checkpoint set
 * that session_state.c fills; it clears the set on reset (a new sequence) and frees it with the
 * session. Only session_state.c calls across: session.c needs nothing of it. */
#ifndef ST_ENGINE_SESSION_STATE_H
#define ST_ENGINE_SESSION_STATE_H

#include "strata.h"

#include <stdint.h>

struct st_model;

/* A session's checkpoints of its recurrent state (st_session_checkpoint). */
struct st_checkpoints {
    int n;                                /* held, positions ascending */
    int64_t pos[ST_SESSION_CHECKPOINTS];
    float *data[ST_SESSION_CHECKPOINTS];  /* every linear layer's conv then delta state, layer order */
};

/* session.c: forgets the checkpoints (reset), and frees them (with the session). */
void st_checkpoints_clear(struct st_checkpoints *c);
void st_checkpoints_free(struct st_checkpoints *c);

/* The prompt cache's copies of a whole state (prompt_cache.c): the byte string of
 * st_session_state_save with no checksum computed, and its load with none checked (the copy never
 * leaves the process; everything else is checked as for a saved state). */
st_status st_session_state_copy(const st_session *s, void **buf, size_t *n);
st_status st_session_state_paste(st_session *s, const void *buf, size_t n);

/* session.c: the session's model, its id buffer ([n_ctx]; the first n_past are held) and the
 * slot of its checkpoint set (NULL until the first checkpoint). */
const struct st_model *st_session_model(const st_session *s);
int32_t *st_session_id_buffer(st_session *s);
struct st_checkpoints **st_session_checkpoint_slot(st_session *s);

#endif
