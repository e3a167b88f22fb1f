/* status.h: errors as values. A failing function sets a message with st_fail() where it
 * understands the failure, and returns the status; callers pass it up unchanged. The message is
 * per thread, so the engine thread and HTTP threads never overwrite each other's. */
#ifndef ST_BASE_STATUS_H
#define ST_BASE_STATUS_H

#include "strata.h"

/* Sets this thread's message (printf-style) and returns s, so `return st_fail(...)` reads well. */
st_status st_fail(st_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefixes the current message with context ("model.gguf: " + message) and returns s. */
st_status st_fail_context(st_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void st_clear_error(void);

#define ST_TRY(expr) do { st_status st_try_s_ = (expr); if (st_try_s_ != ST_OK) return st_try_s_; } while (0)

#endif
