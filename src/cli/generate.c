/* generate.c: cli_generate, the sample-detokenize-feed loop of `strata run` and `strata chat`.
 *
 * From the logits of the last fed position it samples a token, stops at an end-of-generation
 * token, hands the token's text to the caller (whole UTF-8 characters only: st_detok holds back a
 * split one), and feeds the token back for the next logits. The last token of a full context is
 * not fed, nor that of a full budget unless asked (feed_last: the session then holds the whole
 * reply, as a chat that continues or saves it needs; otherwise nothing would read its logits). */
#include "cli/cli.h"
#include "engine/sampler.h"
#include "model/model.h"
#include "strata.h"
#include "text/tokenizer.h"

int cli_generate(const cli_generation *g, int max_tokens, int *generated) {
    int n = 0;
    const char *text;
    size_t len;
    st_detok_reset(g->detok);
    while (n < max_tokens) {
        int32_t tok;
        if (st_sampler_sample(g->sampler, st_session_logits(g->session), &tok) != ST_OK) {
            *generated = n;
            return cli_fail(g->what);
        }
        if (st_model_is_eog(g->model, tok)) break;
        st_sampler_accept(g->sampler, tok);
        n++;
        if (st_detok_push(g->detok, tok, &text, &len) == ST_OK && len) g->on_text(g->ctx, text, len);
        if (st_session_n_past(g->session) >= st_session_n_ctx(g->session) || (n == max_tokens && !g->feed_last)) break;
        if (st_session_feed(g->session, &tok, 1, NULL) != ST_OK) {
            *generated = n;
            return cli_fail(g->what);
        }
    }
    st_detok_flush(g->detok, &text, &len);
    if (len) g->on_text(g->ctx, text, len);
    *generated = n;
    return 0;
}
