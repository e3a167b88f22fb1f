/* prompt.h: the seam between prompt.c (the reuse policy) and prompt_cache.c (the held sequences
 * kept aside). Not public. */
#ifndef ST_ENGINE_PROMPT_H
#define ST_ENGINE_PROMPT_H

#include "engine/prompt_match.h"
#include "strata.h"

struct st_model;

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
