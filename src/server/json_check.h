/* json_check.h: UTF-8 and nesting checks of a request body before it is parsed (json_check.c). */
#ifndef ST_SERVER_JSON_CHECK_H
#define ST_SERVER_JSON_CHECK_H

#include <stddef.h>

#define SV_JSON_MAX_DEPTH_LIMIT 256

/* 0 when the body is valid UTF-8 nested at most max_depth deep; otherwise -1, with the field's
 * path (e.g. "messages[0].content", "" at the top) in param and a message in msg. */
int sv_json_check(const char *body, size_t n, int max_depth, char *param, size_t param_cap, char *msg, size_t msg_cap);

#endif
