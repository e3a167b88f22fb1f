/* ngram.c: the n-gram drafter of speculative decoding (--spec ngram): prompt lookup.
 *
 * The last m tokens of the history (the prompt and the reply so far), for m from ST_NGRAM_MAX
 * down to 1, are looked for earlier in the history, latest occurrence first; the tokens that
 * followed the first match found are the draft. A reply that repeats or edits its prompt (code,
 * a quoted text) then drafts long runs that are right. A short match says little about what
 * follows it, so a match of m tokens drafts at most 2^(m-1) (1, 2, 4, 8): every row of the verify
 * chunk costs, and a long draft after a one-token match is rarely right past its first token.
 * No state: the history is the session's held ids. The scan is linear in the history per draft,
 * negligible beside a forward. */
#include <string.h>

#include "engine/spec.h"

int st_ngram_draft(const int32_t *hist, int64_t n, int n_max, int32_t *out) {
    for (int m = ST_NGRAM_MAX; m >= 1; m--) {
        if (n < m + 1) continue;
        const int32_t *suffix = hist + n - m;
        /* Occurrences that end before the suffix starts... and have a token after them. */
        for (int64_t s = n - m - 1; s >= 0; s--) {
            if (memcmp(hist + s, suffix, (size_t)m * sizeof *hist)) continue;
            int k = 0, lim = n_max < 1 << (m - 1) ? n_max : 1 << (m - 1);
            while (k < lim && s + m + k < n) {
                out[k] = hist[s + m + k];
                k++;
            }
            return k;
        }
    }
    return 0;
}
