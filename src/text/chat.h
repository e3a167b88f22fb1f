/* chat.h: Qwen's ChatML prompts, and the parser that splits generated text back into
 * reasoning, content and tool calls.
 *
 * st_chat_render reproduces Qwen3's chat template (the one shipped in its tokenizer_config.json,
 * rendered as transformers does) byte for byte: system prompt, tool definitions, <think> blocks of
 * the turns after the last user query, tool calls and grouped tool responses, the generation
 * prompt and enable_thinking=false's empty think block. tests/data/tokenizer/qwen3_chat_cases.json
 * holds the template's own output for the cases tested.
 *
 * st_chat_parser reads generated text in pieces of any size (a tag may be split across pieces)
 * and reports reasoning and content as they come, and each tool call once complete: Qwen3's
 * <tool_call>{json}</tool_call> and Qwen3.5's <tool_call><function=f><parameter=p>v</parameter>
 * </function></tool_call> alike. It is the one parser of replies: `strata serve` streams its
 * events as deltas (src/server/reply.c adds UTF-8 joining and stop strings in front of it). */
#ifndef ST_TEXT_CHAT_H
#define ST_TEXT_CHAT_H

#include <stddef.h>
#include "base/status.h"

typedef enum st_chat_role { ST_ROLE_SYSTEM, ST_ROLE_USER, ST_ROLE_ASSISTANT, ST_ROLE_TOOL } st_chat_role;

typedef struct st_chat_tool_call {
    const char *name;
    const char *arguments;  /* JSON text of the arguments object */
    int raw_arguments;      /* 0: arguments is an object, written as the template's tojson does
                               (keys in order, ", " and ": "; written as is if it is not JSON);
                               1: a string, written as is (the template's `is string` case) */
} st_chat_tool_call;

typedef struct st_chat_message {
    st_chat_role role;
    const char *content;            /* NULL = "" */
    const char *reasoning_content;  /* assistant: NULL = take it from <think>...</think> in content */
    const st_chat_tool_call *tool_calls;
    size_t n_tool_calls;
} st_chat_message;

/* Which template: Qwen3's (JSON tool calls) or Qwen3.5's (XML tool calls <function=...>
 * <parameter=...>, trimmed contents, a think block on every turn after the last query, and a
 * generation prompt that opens <think>). */
typedef enum st_chat_style { ST_CHAT_QWEN3 = 0, ST_CHAT_QWEN35 = 1 } st_chat_style;

typedef struct st_chat_options {
    const char *const *tools;  /* each one tool definition as JSON text */
    size_t n_tools;
    int add_generation_prompt;
    int enable_thinking;       /* 0: the generation prompt gets an empty <think></think> block */
    st_chat_style style;
} st_chat_options;

/* Guesses the style from a GGUF's tokenizer.chat_template: Qwen3.5's XML tool format, else
 * Qwen3's. *known is set to 0 when the text does not look like either (no <|im_start|>). */
st_chat_style st_chat_style_detect(const char *chat_template, int *known);

/* Renders into a malloc'd NUL-terminated string. ST_ERR_INVALID for a bad role, a tool
 * definition that is not JSON, or what the Qwen3.5 template refuses (no user query, a system
 * message after the first). */
st_status st_chat_render(const st_chat_message *msgs, size_t n, const st_chat_options *o, char **out, size_t *len);

/* Writes v as Python's json.dumps(v, ensure_ascii=False) would (the template's tojson): keys in
 * order, ", " and ": " separators, the shortest float repr. json_text in, malloc'd text out. */
st_status st_chat_tojson(const char *json_text, char **out);

/* ---- parsing generated text ---- */
typedef enum st_chat_part { ST_CHAT_CONTENT, ST_CHAT_REASONING, ST_CHAT_TOOL_CALL } st_chat_part;

typedef struct st_chat_event {
    st_chat_part part;
    const char *text;       /* content / reasoning delta; for a tool call, the raw JSON inside the tags */
    size_t len;
    const char *name;       /* tool call: the function name */
    const char *arguments;  /* tool call: the arguments object as compact JSON text */
} st_chat_event;

typedef st_status (*st_chat_event_fn)(void *ctx, const st_chat_event *e);
typedef struct st_chat_parser st_chat_parser;

/* Whether the prompt st_chat_render makes with these options ends inside an open <think> block
 * (Qwen3.5 with thinking on), so the parser must start in reasoning. */
int st_chat_opens_reasoning(const st_chat_options *o);

typedef struct st_chat_parser_options {
    int in_reasoning; /* the prompt already opened a <think> block: the first words are reasoning */
    int reasoning;    /* a <think>...</think> at the start of the reply is reasoning (else content) */
    int tools;        /* <tool_call> blocks are tool calls (else content) */
} st_chat_parser_options;

/* Events: reasoning (leading newlines and the whitespace before </think> dropped), content
 * (leading whitespace dropped, and with tools the whitespace before a tool call), and tool calls
 * with a name and an arguments object (written compact); a tool block that is not such a call is
 * content, tags included. A <think> is reasoning only at the start of the reply. */
st_status st_chat_parser_new_with(const st_chat_parser_options *o, st_chat_parser **out);
/* Reasoning and tools on; in_reasoning: the prompt already opened a <think> block (the model's
 * first words are reasoning); st_chat_opens_reasoning says when. */
st_status st_chat_parser_new(int in_reasoning, st_chat_parser **out);
void st_chat_parser_free(st_chat_parser *p);
st_status st_chat_parser_feed(st_chat_parser *p, const char *text, size_t len, st_chat_event_fn fn, void *ctx);
/* End of generation: releases text held back as a possible tag start; an unterminated tool call
 * is reported as a tool call if its body is a complete call, else as content. The parser is then
 * ready for a new reply. */
st_status st_chat_parser_finish(st_chat_parser *p, st_chat_event_fn fn, void *ctx);

#endif
