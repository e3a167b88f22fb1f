/* reply.h: turns the pieces an engine generates into what an API returns: whole UTF-8 characters,
 * cut at the first stop string, split into reasoning (Qwen's <think>...</think>), content, and tool
 * calls (<tool_call> with a JSON object, or Qwen 3.5's <function=NAME><parameter=K>V</parameter>).
 * Text that may be the start of a tag or of a stop string is held back until it is decided, so a
 * stream never shows half a tag. Runs on the engine thread inside the on_piece callback. */
#ifndef ST_SERVER_REPLY_H
#define ST_SERVER_REPLY_H

#include <stddef.h>

#include "server/engine_port.h"

typedef enum sv_event {
    SV_EVENT_REASONING,
    SV_EVENT_CONTENT,
    SV_EVENT_TOOL_CALL,
} sv_event;

/* text/len for reasoning and content; call for a tool call (valid during the call only; its
 * arguments are compact JSON text of an object). */
typedef void (*sv_reply_emit)(void *ctx, sv_event kind, const char *text, size_t len, const sv_tool_call *call);

typedef struct sv_reply sv_reply;

enum {
    SV_REPLY_REASONING = 1, /* split off a leading <think>...</think> (chat endpoints) */
    SV_REPLY_TOOLS = 2,     /* recognise <tool_call> (only when the request has tools) */
};
/* stops: NULL-terminated stop strings (copied). flags: SV_REPLY_*; with none, everything is content
 * (raw completions). */
sv_reply *sv_reply_new(const char *const *stops, int flags, sv_reply_emit emit, void *ctx);
/* The reply's forced opening from the template (sv_prompt.reply_prefix): parsed, not stop-checked. */
void sv_reply_prefix(sv_reply *r, const char *text);
/* One generated piece. Returns 1 when a stop string has matched (stop generating). */
int sv_reply_feed(sv_reply *r, const char *piece, size_t len);
/* The end of generation: emits what was held back (an unclosed tool call becomes content). */
void sv_reply_finish(sv_reply *r);
/* The stop string that matched, or NULL; the tool calls emitted so far (parallel_tool_calls false
 * stops generation after the first). */
const char *sv_reply_stop_matched(const sv_reply *r);
int sv_reply_tool_calls(const sv_reply *r);
void sv_reply_free(sv_reply *r);

#endif
