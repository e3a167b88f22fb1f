/* engine_port.h: the narrow interface the server needs from an engine, and nothing more.
 *
 * The server (HTTP, JSON, queue, SSE, the reasoning and tool-call parsing) is written against this
 * port so that it does not depend on how a model runs. Two implementations exist:
 *   engine_echo.c    a deterministic stand-in used by the server's own tests (`--engine echo`);
 *   engine_strata.c  the real engine on include/strata.h (the default), once that API exists.
 *
 * Threads. render(), tokenize() and info() are called from HTTP threads, possibly at the same
 * time as generate() runs on the engine threads: they may only read model data (template,
 * vocabulary, hyperparameters). generate() is called from info.parallel engine threads, at most
 * that many requests at once; the engine gives each its own sequence (a slot) and keeps its state
 * consistent between them (engine_strata.c batches their steps).
 *
 * Conversation reuse fits inside generate(): the engine keeps the ids it holds (the last prompt and
 * reply) and the states of other recent conversations, matches them against the new prompt, cuts
 * its state back to the longest prefix it can restore exactly (KV cut-back; recurrent state from a
 * checkpoint at or before the divergence) and reports that prefix as usage.cached_tokens. The server never sees the state, only the count.
 * Saved sessions go through state_save()/state_load(), also on the engine thread: the engine gives
 * and takes its state as one blob; the server wraps it in a versioned file with the model's
 * fingerprint and a checksum (sessions.c).
 *
 * Stop strings are not part of the port: the server applies them to the decoded text (it must hold
 * back partial matches anyway) and ends generation by returning nonzero from on_piece. */
#ifndef ST_SERVER_ENGINE_PORT_H
#define ST_SERVER_ENGINE_PORT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "strata.h"

/* One chat message, already normalised by the API layer (OpenAI and Anthropic both map here). */
typedef struct sv_tool_call {
    const char *id;        /* "call_..." / "toolu_..." (may be NULL) */
    const char *name;
    const char *arguments; /* a JSON object as text */
} sv_tool_call;

typedef struct sv_message {
    const char *role;      /* "system", "user", "assistant" or "tool" */
    const char *content;   /* text ("" when none) */
    const char *reasoning; /* assistant only: earlier thinking, or NULL */
    const sv_tool_call *tool_calls; /* assistant only */
    size_t n_tool_calls;
    const char *tool_call_id; /* tool only: which call this answers */
    const char *name;         /* tool only: the tool's name when known */
} sv_message;

typedef enum sv_tool_choice {
    SV_TOOLS_AUTO = 0, /* the model decides */
    SV_TOOLS_NONE,     /* tools are not shown to the model */
    SV_TOOLS_REQUIRED, /* the reply starts with a tool call */
    SV_TOOLS_NAMED,    /* the reply starts with a call of tool_name */
} sv_tool_choice;

typedef struct sv_chat {
    const sv_message *messages;
    size_t n_messages;
    const char *tools_json;   /* a JSON array of OpenAI-shaped {"type":"function","function":{..}} or NULL */
    sv_tool_choice tool_choice;
    const char *tool_name;    /* for SV_TOOLS_NAMED */
    int enable_thinking;      /* 1: the model thinks first (Qwen's <think>), 0: it answers directly */
    int json_object;          /* response_format json_object: the reply must be one JSON object */
} sv_chat;

/* What render() produced: the prompt text, and the tail of it that is logically the start of the
 * assistant's reply (e.g. "<think>\n" or "<tool_call>\n"); the server feeds that tail to its reply
 * parser before the first generated piece, so forced openings parse like generated ones. */
typedef struct sv_prompt {
    char *text;         /* malloc'd */
    char *reply_prefix; /* malloc'd, "" when none; a suffix of text */
} sv_prompt;

typedef struct sv_sampling {
    float temperature; /* 0 = greedy */
    float top_p;       /* 1 = off */
    int top_k;         /* 0 = off */
    float min_p;       /* 0 = off */
    float presence_penalty;
    float frequency_penalty;
    float repeat_penalty; /* 0 or 1 = off */
    uint64_t seed;
    int has_seed;      /* 0: the engine picks a seed */
} sv_sampling;

typedef enum sv_finish {
    SV_FINISH_EOS = 0,   /* the model ended its turn */
    SV_FINISH_LENGTH,    /* max_tokens or the context ran out */
    SV_FINISH_STOP,      /* on_piece asked to stop (a stop string, a closed tool call) */
    SV_FINISH_CANCELLED, /* the cancel flag was set */
} sv_finish;

typedef struct sv_usage {
    int prompt_tokens;     /* the whole prompt, reused part included */
    int cached_tokens;     /* the prefix reused from the held state, not recomputed */
    int completion_tokens; /* tokens generated (a stop token is not counted) */
    double prompt_seconds; /* time spent reading the new part of the prompt */
    double decode_seconds; /* time spent generating */
    int draft_tokens;      /* speculative decoding: tokens drafted ahead, and how many of them */
    int draft_accepted;    /* the target's own samples confirmed (engine/spec.h) */
} sv_usage;

/* A token's log-probability under the model's distribution (the logits' log-softmax, before any
 * sampling filter), and the most likely alternatives, best first. */
#define SV_TOP_LOGPROBS 20
typedef struct sv_logprob {
    float logprob;
    int n_top;
    int32_t top[SV_TOP_LOGPROBS];
    float top_logprob[SV_TOP_LOGPROBS];
} sv_logprob;

typedef struct sv_generate {
    const int32_t *prompt;
    size_t n_prompt;
    sv_sampling sampling;
    int max_tokens;           /* > 0 */
    int json_object;          /* constrain the reply to one JSON object where the engine can */
    int spec_mode;            /* speculative decoding for this request: 0, the server's setting, or
                                 1 + ST_SPEC_NONE / ST_SPEC_MTP / ST_SPEC_NGRAM (engine/spec.h) */
    int spec_draft;           /* drafts per step, 0: the server's setting */
    int ignore_eos;           /* llama.cpp's ignore_eos: end-of-generation tokens are never sampled,
                                 so the reply runs to max_tokens (benchmarks of a fixed length) */
    /* A schema the reply must meet (engine/json_schema.h): response_format json_schema, or a forced
     * tool call (tool-call mode). NULL: none. Owned by the server; valid during generate(). */
    const struct st_json_schema *schema;
    const atomic_int *cancel; /* checked between prompt chunks and between tokens */
    int logprobs;             /* report each token's log-probability (and top_logprobs alternatives) */
    int top_logprobs;         /* 0..SV_TOP_LOGPROBS */
    /* One generated token: its text piece (bytes; a UTF-8 character may be split across pieces),
     * its id, and with logprobs its log-probability under the model (NULL otherwise). Return
     * nonzero to stop generating (finish = SV_FINISH_STOP). */
    int (*on_piece)(void *ctx, const char *text, size_t len, int32_t token, const struct sv_logprob *lp);
    /* Prompt reading: `done` of `total` prompt tokens are in the state, `cached` of them reused
     * (known from the first call on, which comes before any prompt token is computed). */
    void (*on_progress)(void *ctx, size_t cached, size_t done, size_t total);
    void *ctx;
} sv_generate;

#define SV_MAX_SLOTS 64

/* Which sampling fields a set of defaults gives (the others come from elsewhere). */
enum { SV_SET_TEMPERATURE = 1, SV_SET_TOP_P = 2, SV_SET_TOP_K = 4, SV_SET_MIN_P = 8, SV_SET_SEED = 16, SV_SET_REPEAT_PENALTY = 32 };

typedef struct sv_model_info {
    char name[128];      /* the id shown in /v1/models */
    int context_length;  /* tokens (of each slot) */
    int parallel;        /* requests generate() runs at once, from as many engine threads (>= 1) */
    char fingerprint[65];/* identifies the weights (saved sessions carry it) */
    const char *chat_template; /* the template's text (NUL-terminated, lives as the engine), or NULL */
    sv_sampling sampling;  /* the model's recommended sampling (GGUF general.sampling.*) */
    unsigned sampling_set; /* SV_SET_*: which of them the model gives */
    int tool_xml;          /* the model writes tool calls in Qwen 3.5's XML form (else Qwen's JSON form) */
} sv_model_info;

typedef struct sv_engine sv_engine;
typedef struct sv_engine_ops {
    const char *kind; /* "echo", "strata" */
    void (*info)(sv_engine *e, sv_model_info *out);
    st_status (*render)(sv_engine *e, const sv_chat *chat, sv_prompt *out);
    /* Text to ids. special=1 parses special tokens (<|im_start|>) in the text (rendered chats);
     * special=0 treats everything as plain text (raw /v1/completions prompts). */
    st_status (*tokenize)(sv_engine *e, const char *text, size_t len, int special, int32_t **ids, size_t *n);
    /* Ids to their bytes (control tokens included), malloc'd and NUL-terminated; ST_ERR_RANGE for
     * an id outside the vocabulary. Called from HTTP threads (it reads the vocabulary only). */
    st_status (*detokenize)(sv_engine *e, const int32_t *ids, size_t n, char **text, size_t *len);
    /* Runs one request on the session. Returns ST_OK also when cancelled (finish says so); an error
     * leaves the session as it was or cleanly reset. */
    st_status (*generate)(sv_engine *e, const sv_generate *req, sv_usage *usage, sv_finish *finish);
    /* Saved sessions (NULL where the engine has none). state_save: the whole session state (held
     * ids, KV, recurrent state) as a malloc'd blob, and how many ids it holds. state_load checks
     * the whole blob before it changes anything, and refuses (session untouched) when it does not
     * fit this model and context. */
    st_status (*state_save)(sv_engine *e, void **blob, size_t *n, size_t *tokens);
    st_status (*state_load)(sv_engine *e, const void *blob, size_t n, size_t *tokens);
    /* An embedding of ids into out (at most cap floats; *dim says how many): the pooled final hidden
     * state, unit length. Engine threads only (it uses a free slot, whose conversation goes into
     * the prompt cache first).
     * NULL where the engine has none. */
    st_status (*embed)(sv_engine *e, const int32_t *ids, size_t n, float *out, size_t cap, size_t *dim);
    /* Resident memory the engine accounts for (weights mapped + state + scratch), for the monitor. */
    size_t (*memory_bytes)(sv_engine *e);
    void (*close)(sv_engine *e);
} sv_engine_ops;

struct sv_engine {
    const sv_engine_ops *ops;
};

/* The stand-in engine of the server's tests (engine_echo.c). */
st_status sv_engine_echo_open(int context_length, sv_engine **out);
/* The real engine (engine_strata.c): the model file loaded with mp (device, weight copy), its
 * session with sp (threads, prefill, KV type; n_ctx 0 = the model's context_length, lowered to
 * what the memory free holds, shared among the slots, with a warning on stderr when it is) and
 * the server's options: */
struct st_spec_params;
typedef struct sv_strata_options {
    /* speculative decoding (engine/spec.h; NULL: the default, MTP when the file has a head), which
     * a request may override; it runs with one slot (several decode together without drafts) */
    const struct st_spec_params *spec;
    uint64_t cache_bytes;   /* the prompt cache for the states of other conversations (0: none) */
    int parallel;           /* slots: requests run at once (at most SV_MAX_SLOTS; one on a GPU) */
    const char *chat_template; /* a --chat-template-file's text, or NULL for the file's own */
} sv_strata_options;
st_status sv_engine_strata_open(const char *model_path, const st_model_params *mp, const st_session_params *sp,
                                const sv_strata_options *o, sv_engine **out);

void sv_prompt_free(sv_prompt *p);

#endif
