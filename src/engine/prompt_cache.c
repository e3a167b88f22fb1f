/* prompt_cache.c: strata.h's prompt cache: the states of recent conversations kept aside in host
 * memory, so that a request that extends any of them starts where it ended.
 *
 * An entry is a whole session state as st_session_state_save writes it (held ids, the KV rows of
 * the held positions, every recurrent state and the checkpoints; qwen4exp's indexer keys and PLE
 * history included), with no checksum (session_state.c's copy/paste: the bytes never leave the
 * process), beside a copy of its ids and checkpoint positions for matching. The entries' bytes stay
 * within max_bytes: a new entry drops the least recently used ones first; an entry larger than
 * the whole cache is not kept. A stored state that extends an entry and can return to its end
 * replaces it; one that an entry extends so is not stored again.
 *
 * Matching goes through prompt.c's policy (st_prompt_match), the same one the session's own
 * sequence is matched with, so an entry is chosen by exactly what restoring it would keep. */
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "engine/prompt.h"
#include "engine/session_state.h"
#include "model/model.h"

typedef struct entry {
    void *state;
    size_t bytes;
    int32_t *ids;
    int64_t n;
    int64_t ckpt[ST_SESSION_CHECKPOINTS];
    int n_ckpt;
    uint64_t used;   /* the cache's clock at the last store or restore */
} entry;

struct st_prompt_cache {
    uint64_t max_bytes, bytes, clock;
    entry *e;
    int n, cap;
};

st_status st_prompt_cache_new(uint64_t max_bytes, st_prompt_cache **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return st_fail(ST_ERR_NOMEM, "prompt cache: out of memory");
    (*out)->max_bytes = max_bytes;
    return ST_OK;
}

uint64_t st_prompt_cache_default_bytes(void) {
    uint64_t avail = st_host_available_bytes(), cap = 8ull << 30;
    if (!avail) return 256ull << 20;
    return avail / 4 < cap ? avail / 4 : cap;
}

static void drop(st_prompt_cache *c, int i) {
    free(c->e[i].state);
    free(c->e[i].ids);
    c->bytes -= c->e[i].bytes;
    c->e[i] = c->e[--c->n];
}

void st_prompt_cache_free(st_prompt_cache *c) {
    if (!c) return;
    while (c->n) drop(c, c->n - 1);
    free(c->e);
    free(c);
}

int st_prompt_cache_count(const st_prompt_cache *c) { return c ? c->n : 0; }
uint64_t st_prompt_cache_bytes(const st_prompt_cache *c) { return c ? c->bytes : 0; }

static int is_prefix(const int32_t *a, int64_t na, const int32_t *b, int64_t nb) {
    return na <= nb && !memcmp(a, b, (size_t)na * sizeof *a);
}

/* Whether a state that can return to the positions ckpt[0..n_ckpt) and n returns to the end of
 * entry e: then, holding all its ids, it stands for e (older checkpoints of e may be gone: a prompt
 * that parts that early is rare). */
static int covers(const int64_t *ckpt, int n_ckpt, int64_t n, int recurrent, const entry *e) {
    int found = !recurrent || e->n == n;
    for (int q = 0; q < n_ckpt && !found; q++) found = ckpt[q] == e->n;
    return found;
}

st_status st_prompt_cache_store(st_prompt_cache *c, const st_session *s) { return st_prompt_cache_store_keeping(c, s, NULL); }

st_status st_prompt_cache_store_keeping(st_prompt_cache *c, const st_session *s, const void *keep) {
    int64_t n = st_session_n_past(s);
    const int32_t *ids = st_session_ids(s);
    if (!n) return ST_OK;
    entry e = {.n = n, .used = ++c->clock};
    e.n_ckpt = st_session_checkpoints(s, e.ckpt, ST_SESSION_CHECKPOINTS);
    if (e.n_ckpt > ST_SESSION_CHECKPOINTS) e.n_ckpt = ST_SESSION_CHECKPOINTS;
    int recurrent = st_session_is_recurrent(s);
    for (int i = c->n - 1; i >= 0; i--) {
        if (is_prefix(ids, n, c->e[i].ids, c->e[i].n) && covers(c->e[i].ckpt, c->e[i].n_ckpt, c->e[i].n, recurrent, &e)) {
            c->e[i].used = e.used;
            return ST_OK;
        }
        if (is_prefix(c->e[i].ids, c->e[i].n, ids, n) && covers(e.ckpt, e.n_ckpt, n, recurrent, &c->e[i])) drop(c, i);
    }
    ST_TRY(st_session_state_copy(s, &e.state, &e.bytes));
    if (e.bytes > c->max_bytes) {
        free(e.state);
        return ST_OK;
    }
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 8;
        entry *g = realloc(c->e, (size_t)cap * sizeof *g);
        if (!g) {
            free(e.state);
            return st_fail(ST_ERR_NOMEM, "prompt cache: out of memory");
        }
        c->e = g;
        c->cap = cap;
    }
    if (!(e.ids = malloc((size_t)n * sizeof *e.ids))) {
        free(e.state);
        return st_fail(ST_ERR_NOMEM, "prompt cache: out of memory for %lld ids", (long long)n);
    }
    memcpy(e.ids, ids, (size_t)n * sizeof *e.ids);
    while (c->bytes + e.bytes > c->max_bytes) {
        int lru = -1;
        for (int i = 0; i < c->n; i++)
            if (c->e[i].ids != keep && (lru < 0 || c->e[i].used < c->e[lru].used)) lru = i;
        if (lru < 0) {
            /* Only the entry kept is left: the new state does not fit beside it. */
            free(e.ids);
            free(e.state);
            return ST_OK;
        }
        drop(c, lru);
    }
    c->e[c->n++] = e;
    c->bytes += e.bytes;
    return ST_OK;
}

int st_prompt_cache_best(st_prompt_cache *c, const struct st_model *m, int recurrent, const int32_t *prompt, int64_t n,
                         int64_t better_than, int32_t **form, int64_t *n_form, int64_t *reach) {
    int best = -1;
    *form = NULL;
    *reach = better_than;
    for (int i = 0; i < c->n; i++) {
        const entry *e = &c->e[i];
        st_held h = {.ids = e->ids, .n = e->n, .ckpt = e->ckpt, .n_ckpt = e->n_ckpt, .recurrent = recurrent};
        int32_t *f;
        int64_t nf, r;
        if (st_prompt_match(m, &h, prompt, n, &f, &nf, &r) != ST_OK) {
            st_clear_error(); /* out of memory: this entry is not taken */
            continue;
        }
        if (r > *reach) {
            free(*form);
            *form = f;
            *n_form = nf;
            *reach = r;
            best = i;
        } else {
            free(f);
        }
    }
    return best;
}

const void *st_prompt_cache_key(st_prompt_cache *c, int i) {
    c->e[i].used = ++c->clock;
    return c->e[i].ids;
}

int st_prompt_cache_find(const st_prompt_cache *c, const void *key) {
    for (int i = 0; i < c->n; i++)
        if (c->e[i].ids == key) return i;
    return -1;
}

st_status st_prompt_cache_restore(st_prompt_cache *c, int i, st_session *s) {
    c->e[i].used = ++c->clock;
    return st_session_state_paste(s, c->e[i].state, c->e[i].bytes);
}
