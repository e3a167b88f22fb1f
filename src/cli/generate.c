/* generate.c: cli_generate, the sample-detokenize-feed loop of `strata run` and `strata chat`.
 *
 * From the logits of the last fed position it samples a token, stops at an end-of-generation
 * token, hands the token's text to the caller (whole UTF-8 characters only: st_detok holds back a
 * split one), and feeds the token back for the next logits. The last token of a full context is
 * not fed, nor that of a full budget unless asked (feed_last: the session then holds the whole
 * reply, as a chat that continues or saves it needs; otherwise nothing would read its logits).
 * With a speculative decoder (engine/spec.h) the logits and the feed go through it: the same
 * tokens, fewer trunk forwards; at the end its draft rows are dropped, so the session holds what
 * plain decoding would have left. */
#include <stdio.h>

#include "cli/cli.h"
#include "engine/sampler.h"
#include "engine/spec.h"
#include "model/model.h"
#include "strata.h"
#include "text/tokenizer.h"

static const float *logits_of(const cli_generation *g) {
    return g->spec ? st_spec_logits(g->spec) : st_session_logits(g->session);
}

static int64_t n_past_of(const cli_generation *g) {
    return g->spec ? st_spec_n_past(g->spec) : st_session_n_past(g->session);
}

int cli_generate(const cli_generation *g, int max_tokens, int *generated) {
    int n = 0, rc = 0;
    const char *text;
    size_t len;
    st_detok_reset(g->detok);
    while (n < max_tokens) {
        int32_t tok;
        if (st_sampler_sample(g->sampler, logits_of(g), &tok) != ST_OK) {
            rc = cli_fail(g->what);
            break;
        }
        if (st_model_is_eog(g->model, tok)) break;
        st_sampler_accept(g->sampler, tok);
        n++;
        if (st_detok_push(g->detok, tok, &text, &len) == ST_OK && len) g->on_text(g->ctx, text, len);
        if (n_past_of(g) >= st_session_n_ctx(g->session) || (n == max_tokens && !g->feed_last)) break;
        if ((g->spec ? st_spec_feed(g->spec, tok) : st_session_feed(g->session, &tok, 1, NULL)) != ST_OK) {
            rc = cli_fail(g->what);
            break;
        }
    }
    if (g->spec) st_spec_finish(g->spec);
    *generated = n;
    if (rc) return rc;
    st_detok_flush(g->detok, &text, &len);
    if (len) g->on_text(g->ctx, text, len);
    return 0;
}

void cli_spec_report(const st_spec *d) {
    const st_spec_stats *s = st_spec_stats_get(d);
    if (st_spec_mode(d) == ST_SPEC_NONE || s->forwards == 0) return;
    fprintf(stderr, "strata: spec %s: %lld of %lld drafts accepted (%.1f%%), %.2f tokens per trunk forward\n",
            st_spec_mode_name(st_spec_mode(d)), (long long)s->accepted, (long long)s->drafted,
            s->drafted ? 100.0 * (double)s->accepted / (double)s->drafted : 0.0, (double)s->fed / (double)s->forwards);
}
