/* sampler.h: choosing the next token from a row of logits.
 *
 * The chain is llama.cpp's default order: penalties (repetition, frequency, presence over the
 * last N accepted tokens) -> top-k -> top-p -> min-p -> temperature -> a seeded draw. A
 * temperature <= 0 is greedy: the argmax of the penalized logits. The random generator is our
 * own xoshiro256** seeded through splitmix64, so a seed gives the same choices on every machine.
 *
 * Nothing sorts the whole vocabulary: top-k uses a k-element heap; top-p looks for the nucleus
 * among the best 1024 candidates first and, when the distribution is flatter than that, bins the
 * logits by value and sorts only the bin where the nucleus ends.
 *
 * A JSON constraint (response_format json_object, engine/json_grammar.h) may be set: the chain then
 * runs on the plain logits and its pick is checked by a walk of that token's bytes; only a refused
 * pick costs a mask of the vocabulary and a second run of the chain on the masked logits. */
#ifndef ST_ENGINE_SAMPLER_H
#define ST_ENGINE_SAMPLER_H

#include <stddef.h>
#include <stdint.h>
#include "base/status.h"

typedef struct st_json_vocab st_json_vocab;

typedef struct st_sampler_params {
    float temperature;       /* <= 0: greedy */
    int32_t top_k;           /* <= 0: off */
    float top_p;             /* >= 1: off */
    float min_p;             /* <= 0: off */
    float repeat_penalty;    /* 1: off. A seen token's logit l becomes l/r if l > 0, else l*r */
    float frequency_penalty; /* 0: off. Subtracts count * f */
    float presence_penalty;  /* 0: off. Subtracts p once if the token was seen */
    int32_t penalty_last_n;  /* the window of accepted tokens the penalties look at; 0: off */
    uint64_t seed;
} st_sampler_params;

/* temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, no penalties (window 64), seed 0:
 * llama.cpp's common defaults. */
st_sampler_params st_sampler_default_params(void);

typedef struct st_sampler st_sampler;

st_status st_sampler_new(const st_sampler_params *p, int32_t n_vocab, st_sampler **out);
void st_sampler_free(st_sampler *s);
/* Forgets the accepted tokens, drops a JSON constraint and restarts the random sequence from the seed. */
void st_sampler_reset(st_sampler *s);
/* Records a token (prompt or generated) in the penalty window, and with a JSON constraint advances
 * it (ST_ERR_INVALID, nothing recorded, for a token it refuses). */
st_status st_sampler_accept(st_sampler *s, int32_t token);
/* Picks a token from logits[0..n_vocab). The logits are not modified. Does not accept the token:
 * the caller does, so prompt tokens and generated ones go through the same door. */
st_status st_sampler_sample(st_sampler *s, const float *logits, int32_t *token);

/* response_format json_object: from now on st_sampler_sample picks only tokens that continue one
 * JSON object (engine/json_grammar.h), and end of generation only once it is closed. v is the
 * model's token table (built once per model, kept by the caller while the sampler lives); the
 * reply's forced opening is read from the prompt (the text after its last <|im_start|> role line).
 * max_tokens > 0: the reply's token limit; the object is kept closable within it, so a reply cut
 * by the limit is still one complete object (when the limit leaves room to close it at all).
 * Call it after accepting the prompt's tokens: from here on accept advances the constraint. */
st_status st_sampler_constrain_json(st_sampler *s, const st_json_vocab *v, const int32_t *prompt, size_t n_prompt, int64_t max_tokens);
/* The same with a schema (engine/json_schema.h): the reply is the schema's object, or a tool call
 * (tool-call mode); max_tokens does not bind it (a reply cut short is unfinished). The schema
 * must outlive the sampler's use of it. */
typedef struct st_json_schema st_json_schema;
st_status st_sampler_constrain_schema(st_sampler *s, const st_json_vocab *v, const st_json_schema *schema, const int32_t *prompt,
                                      size_t n_prompt, int64_t max_tokens);
/* Whether the constrained reply is a complete object; how many picks the constraint refused (each
 * cost one mask of the vocabulary). */
int st_sampler_json_complete(const st_sampler *s);
int64_t st_sampler_json_masks(const st_sampler *s);

/* The raw generator, exposed for tests: uniform in [0, 1). */
double st_sampler_uniform(st_sampler *s);

/* The candidates the last st_sampler_sample kept (after every filter), with their final
 * probabilities; the best first, then best-first order too unless neither top-k nor top-p is on
 * (then id order after the first). For tests and reporting; valid until the next sample. */
int32_t st_sampler_last_candidates(const st_sampler *s, const int32_t **ids, const float **probs);

#endif
