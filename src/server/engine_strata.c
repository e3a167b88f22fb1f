/* engine_strata.c: the engine port (engine_port.h) on the real engine of include/strata.h.
 *
 * The model, tokenizer and session API of include/strata.h are being written; until they exist
 * this file only says so, and `strata serve -m MODEL` refuses with that message (the echo engine,
 * `--engine echo`, serves the tests). What the port needs from the engine, one call each:
 *   info:      model name, context length, a fingerprint of the weights;
 *   render:    the GGUF's chat template applied to messages, tools and enable_thinking;
 *   tokenize:  text -> ids, with special tokens parsed or not;
 *   generate:  feed the prompt (reusing the held prefix: KV cut-back, recurrent state from a
 *              checkpoint at a message boundary), then sample token by token with the sampling
 *              parameters, calling back per token with its text piece; cancel checked between
 *              chunks and tokens;
 *   save/restore of the session state, for saved sessions. */
#include "base/status.h"
#include "server/engine_port.h"

st_status sv_engine_strata_open(const char *model_path, int context_length, sv_engine **out) {
    *out = NULL;
    return st_fail(ST_ERR_UNSUPPORTED, "%s: the model engine is not in this build yet; `--engine echo` runs the "
                   "server with its deterministic test engine", model_path);
}
