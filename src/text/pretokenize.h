/* pretokenize.h (internal to src/text): the pre-tokenizer regexes of MODELS.md §9.2, compiled
 * once with PCRE2 (UTF + UCP, JIT when available), splitting valid UTF-8 into pieces. */
#ifndef ST_TEXT_PRETOKENIZE_H
#define ST_TEXT_PRETOKENIZE_H

#include <stddef.h>
#include "base/status.h"
#include "text/tokenizer.h"

typedef struct st_pretokenizer st_pretokenizer;

st_status st_pretokenizer_new(st_pretok pre, st_pretokenizer **out);
void st_pretokenizer_free(st_pretokenizer *p);

/* Called for each piece in order; the pieces tile the text exactly. A non-OK return stops. */
typedef st_status (*st_piece_fn)(void *ctx, const char *piece, size_t len);
/* text must be valid UTF-8 (the caller sanitizes it); safe to call from several threads. */
st_status st_pretokenize(const st_pretokenizer *p, const char *text, size_t len, st_piece_fn fn, void *ctx);

#endif
