/* prompt.h: the seam between prompt.c (the reuse policy: how a new prompt matches a held sequence)
 * and prompt_cache.c (the held sequences kept aside). Not public. */
#ifndef ST_ENGINE_PROMPT_H
#define ST_ENGINE_PROMPT_H

#include "strata.h"

struct st_model;

/* A held sequence: its ids and the positions it can return to exactly besides its end (the
 * checkpoints of a hybrid model; an attention-only one returns anywhere). */
typedef struct st_held {
    const int32_t *ids;
    int64_t n;
    const int64_t *ckpt;
    int n_ckpt;
    int recurrent;
} st_held;

/* How prompt[0..n) lands on a held sequence: the prompt as it will be held (*form, malloc'd,
 * *n_form ids: the held assistant messages standing in for the rendered ones that agree with them)
 * and the positions of it that a session holding h keeps (*reach: the shared prefix, less the last
 * prompt token, at the end of h or at a position it can return to). */
st_status st_prompt_match(const struct st_model *m, const st_held *h, const int32_t *prompt, int64_t n, int32_t **form,
                          int64_t *n_form, int64_t *reach);

/* prompt_cache.c: the entry that keeps the most of prompt beyond `better_than` positions: its
 * index (or -1), its form of the prompt (*form, malloc'd) and reach. An index holds until the next
 * store; across one, an entry is found again by its key (NULL once it was dropped), marked used
 * so that it is the last to go. Restoring puts the entry's state into s (st_session_state_paste). */
int st_prompt_cache_best(st_prompt_cache *c, const struct st_model *m, int recurrent, const int32_t *prompt, int64_t n,
                         int64_t better_than, int32_t **form, int64_t *n_form, int64_t *reach);
const void *st_prompt_cache_key(st_prompt_cache *c, int entry);
/* st_prompt_cache_store that never drops the entry of `keep` to make room (the new state is then
 * not stored). */
st_status st_prompt_cache_store_keeping(st_prompt_cache *c, const st_session *s, const void *keep);
int st_prompt_cache_find(const st_prompt_cache *c, const void *key);
st_status st_prompt_cache_restore(st_prompt_cache *c, int entry, st_session *s);

#endif
