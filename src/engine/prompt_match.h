/* prompt_match.h: how a new prompt lands on a held sequence (prompt_match.c). Not public. */
#ifndef ST_ENGINE_PROMPT_MATCH_H
#define ST_ENGINE_PROMPT_MATCH_H

#include <stdint.h>

#include "base/status.h"

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

/* The id of <|im_start|> in m's vocabulary, or -1; where the next `id` is in ids[from..n) (n if
 * none). The piece rule of prompt.c uses both. */
int32_t st_prompt_im_start(const struct st_model *m);
int64_t st_prompt_next_id(const int32_t *ids, int64_t from, int64_t n, int32_t id);

#endif
