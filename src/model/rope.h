/* rope.h: the rotary position embedding of q and k rows as the CPU forward applies it (rope.c):
 * the settings from the hyperparameters, the IMRoPE pairs that text leaves unrotated, and the
 * rotation itself. The settings and the pairs serve model/cuda/ too. */
#ifndef ST_MODEL_ROPE_H
#define ST_MODEL_ROPE_H

#include <stdint.h>
#include "backend/backend.h"
#include "model/model.h"
#include "model/rows.h"

/* The RoPE settings (base, scale, YaRN), and the IMRoPE pairs that stay unrotated for text, written
 * into pairs[n_rot/2]; returns how many. */
st_rope_params fwd_rope_params(const st_hparams *hp);
int fwd_imrope_fixed_pairs(const st_hparams *hp, int64_t *pairs);

/* RoPE on f->n rows of n_head heads at f->pos, as attention rotates q and k (IMRoPE pairs of the
 * text's zero 4th position left unrotated). */
void fwd_rope(st_fwd *f, float *x, int64_t ld_tok, int64_t ld_head, int64_t n_head, const st_rope_params *rp);

#endif
