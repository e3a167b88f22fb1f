/* rope.c: the rotary position embedding of q and k rows as the CPU forward applies it (MODELS.md
 * §2.5), shared by full attention (attn.c) and qwen4exp's QSA indexer (qsa.c): the settings from
 * the hyperparameters (fwd_rope_params: base, scale, YaRN), and the rotation (fwd_rope).
 *
 * IMRoPE (qwen35, qwen35moe) for text: llama.cpp gives a text token the positions (p, p, p, 0)
 * (llm_graph_input_pos::set_input: "the 4th dim is 0"), so a rotary pair whose sector takes the
 * 4th position is not rotated, only scaled by the cos/sin magnitude. Every other pair rotates
 * exactly as NeoX. With the sections Qwen ships ([11, 11, 10, 0] over 32 pairs) no pair takes the
 * 4th position and IMRoPE equals NeoX; other sections do not (MODELS.md §2.5 misses this). */
#include <math.h>

#include "backend/backend.h"
#include "model/forward_ws.h"
#include "model/rope.h"
#include "model/rows.h"

/* The pairs i < n_rot/2 whose IMRoPE sector takes the 4th position (ggml_mrope_cache_init). */
int fwd_imrope_fixed_pairs(const st_hparams *hp, int64_t *pairs) {
    if (hp->rope_kind != ST_ROPE_IMROPE) return 0;
    const int32_t *sec = hp->rope_sections;
    int64_t sum = sec[0] + sec[1] + sec[2] + sec[3];
    int n = 0;
    for (int64_t i = 0; i < hp->n_rot / 2 && sum > 0; i++) {
        int64_t s = i % sum;
        int h = s % 3 == 1 && s < 3 * sec[1], w = s % 3 == 2 && s < 3 * sec[2], t = s % 3 == 0 && s < 3 * sec[0];
        if (!h && !w && !t) pairs[n++] = i;
    }
    return n;
}

/* RoPE on n rows of heads, leaving the IMRoPE pairs of position 0 unrotated (times mscale). */
void fwd_rope(st_fwd *f, float *x, int64_t ld_tok, int64_t ld_head, int64_t n_head, const st_rope_params *rp) {
    const st_hparams *hp = f->hp;
    int64_t fixed[256];
    int n_fixed = hp->n_rot / 2 <= 256 ? fwd_imrope_fixed_pairs(hp, fixed) : 0;
    if (n_fixed == 0) {
        FWD_OP(f, rope, x, ld_tok, ld_head, f->n, n_head, f->pos, rp);
        return;
    }
    /* The rotation of angle 0: cos = mscale, sin = 0 (rope_yarn). Keep those pairs and restore them
     * (on the host: only the CPU runs such sections, model/cuda refuses them). */
    float mscale = rp->attn_factor * (rp->ext_factor != 0.0f ? 1.0f + 0.1f * logf(1.0f / rp->freq_scale) : 1.0f);
    int64_t half = hp->n_rot / 2;
    float *keep = st_workspace_f32(f->ws, WS_ROPE_KEEP);
    int64_t c = 0;
    for (int64_t t = 0; t < f->n; t++)
        for (int64_t h = 0; h < n_head; h++)
            for (int j = 0; j < n_fixed; j++) {
                const float *r = x + t * ld_tok + h * ld_head;
                keep[c++] = r[fixed[j]];
                keep[c++] = r[fixed[j] + half];
            }
    FWD_OP(f, rope, x, ld_tok, ld_head, f->n, n_head, f->pos, rp);
    c = 0;
    for (int64_t t = 0; t < f->n; t++)
        for (int64_t h = 0; h < n_head; h++)
            for (int j = 0; j < n_fixed; j++) {
                float *r = x + t * ld_tok + h * ld_head;
                r[fixed[j]] = keep[c++] * mscale;
                r[fixed[j] + half] = keep[c++] * mscale;
            }
}

st_rope_params fwd_rope_params(const st_hparams *hp) {
    st_rope_params p = st_rope_plain(hp->n_rot, hp->rope_freq_base);
    p.freq_scale = hp->rope_freq_scale;
    p.attn_factor = hp->rope_attn_factor;
    if (hp->rope_yarn) {
        p.ext_factor = hp->rope_ext_factor;
        st_rope_yarn_corr_dims(hp->n_rot, hp->rope_n_ctx_orig, hp->rope_freq_base, 32.0f, 1.0f, p.corr_dims);
    }
    return p;
}
