/* chat_internal.h (internal to src/text): the growing string and the Python-style JSON writer
 * shared by the chat renderer (chat.c) and the generated-text parser (chat_parse.c). */
#ifndef ST_TEXT_CHAT_INTERNAL_H
#define ST_TEXT_CHAT_INTERNAL_H

#include <jansson.h>
#include <stddef.h>

typedef struct st_sbuf { char *p; size_t n, cap; int oom; } st_sbuf;

void st_sb_add(st_sbuf *b, const char *s, size_t n);
void st_sb_str(st_sbuf *b, const char *s);
/* v as Python's json.dumps(ensure_ascii=False) writes it; compact: "," and ":" separators */
void st_chat_json_out(st_sbuf *b, const json_t *v, int compact);
/* any JSON value (NULL if the text is not JSON) */
json_t *st_chat_parse_json(const char *text);

#endif
