/* prompt.c: strata.h's "Prompts": the one reuse policy of the terminal chat and the server.
 *
 * A new prompt is matched against the live sequence and the kept ones (prompt_match.c says how a
 * prompt lands on a held sequence: the shared prefix, with the model's own earlier replies standing
 * in for their re-rendered text); the best is restored and the rest is fed.
 *
 * Feeding: pieces of at most a chunk; for a hybrid model a piece ends before each <|im_start|>
 * and a checkpoint is taken there, and one where the kept part ends (the end of the previous
 * reply, as a rule); an attention-only model can cut anywhere, so its pieces are whole chunks. Without a checkpoint (out of memory, a device copy failed) only reuse is lost.
 *
 * Nothing here touches the state directly: session_state.c cuts and checkpoints, prompt_cache.c
 * keeps other sequences. */
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "engine/prompt.h"
#include "engine/session_spec.h"
#include "engine/session_state.h"
#include "model/model.h"

/* The session as a held sequence; ckpt receives its checkpoint positions. */
static st_held held_of(const st_session *s, int64_t ckpt[ST_SESSION_CHECKPOINTS]) {
    st_held h = {.ids = st_session_ids(s), .n = st_session_n_past(s), .ckpt = ckpt, .recurrent = st_session_is_recurrent(s)};
    h.n_ckpt = st_session_checkpoints(s, ckpt, ST_SESSION_CHECKPOINTS);
    if (h.n_ckpt > ST_SESSION_CHECKPOINTS) h.n_ckpt = ST_SESSION_CHECKPOINTS;
    return h;
}

int64_t st_session_prompt_reach(const st_session *s, const int32_t *prompt, int64_t n) {
    int64_t ckpt[ST_SESSION_CHECKPOINTS], n_form, reach = 0;
    st_held live = held_of(s, ckpt);
    int32_t *form = NULL;
    if (n <= 0 || st_prompt_match(st_session_model(s), &live, prompt, n, &form, &n_form, &reach) != ST_OK) {
        st_clear_error();
        reach = 0;
    }
    free(form);
    return reach;
}

st_status st_session_prompt(st_session *s, st_prompt_cache *cache, const int32_t *prompt, int64_t n, st_prompt *p) {
    memset(p, 0, sizeof *p);
    if (n <= 0) return st_fail(ST_ERR_INVALID, "prompt: %lld tokens", (long long)n);
    const st_model *m = st_session_model(s);
    int64_t ckpt[ST_SESSION_CHECKPOINTS];
    st_held live = held_of(s, ckpt);
    int32_t *form = NULL, *other = NULL;
    int64_t n_form = 0, reach = 0, n_other = 0, reach_other = 0;
    ST_TRY(st_prompt_match(m, &live, prompt, n, &form, &n_form, &reach));
    /* The session's own sequence is kept aside before it loses positions: replaced by a cached
     * one that keeps more (which its storing never drops), or cut back. */
    int best = cache ? st_prompt_cache_best(cache, m, live.recurrent, prompt, n, reach, &other, &n_other, &reach_other) : -1;
    if (best >= 0) {
        const void *key = st_prompt_cache_key(cache, best);
        if (st_prompt_cache_store_keeping(cache, s, key) != ST_OK) st_clear_error();
        best = st_prompt_cache_find(cache, key);
        if (best >= 0 && st_prompt_cache_restore(cache, best, s) == ST_OK) {
            free(form);
            form = other;
            n_form = n_other;
        } else {
            /* The session is as it was, or reset: its own match (or none) stands. */
            st_clear_error();
            free(other);
        }
    } else if (cache && reach < live.n && st_prompt_cache_store(cache, s) != ST_OK) {
        st_clear_error();
    }
    int64_t kept = 0;
    st_status st = st_session_reuse(s, form, n_form, &kept);
    if (st != ST_OK) {
        free(form);
        return st;
    }
    /* Where the held sequence ends (a reply, as a rule) is a message boundary too: a later state of
     * this conversation returns here, so it stands for this one in the cache. */
    if (kept > 0 && st_session_checkpoint(s) != ST_OK) st_clear_error();
    *p = (st_prompt){.ids = form, .n = n_form, .cached = kept, .done = kept};
    return ST_OK;
}

int64_t st_session_prompt_piece(const st_session *s, const st_prompt *p, int64_t max_rows) {
    if (p->done >= p->n) return 0;
    if (max_rows <= 0) max_rows = st_session_n_prefill(s);
    int64_t end = p->n - p->done < max_rows ? p->n : p->done + max_rows;
    if (st_session_is_recurrent(s)) {
        int32_t im_start = st_prompt_im_start(st_session_model(s));
        if (im_start >= 0) end = st_prompt_next_id(p->ids, p->done + 1, end, im_start);
    }
    return end - p->done;
}

void st_session_prompt_advance(st_session *s, st_prompt *p, int64_t rows) {
    p->done += rows;
    if (p->done < p->n && st_session_is_recurrent(s) && p->ids[p->done] == st_prompt_im_start(st_session_model(s)) &&
        st_session_checkpoint(s) != ST_OK)
        st_clear_error();
}

st_status st_session_prompt_feed(st_session *s, st_prompt *p, int64_t max_rows) {
    int64_t rows = st_session_prompt_piece(s, p, max_rows);
    if (!rows) return ST_OK;
    ST_TRY(st_session_feed(s, p->ids + p->done, rows, NULL));
    st_session_prompt_advance(s, p, rows);
    return ST_OK;
}

void st_prompt_free(st_prompt *p) {
    if (!p) return;
    free(p->ids);
    memset(p, 0, sizeof *p);
}
