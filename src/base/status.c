/* status.c: the per-thread error message behind st_last_error(). */
#include "base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char st_message[1024];

const char *st_last_error(void) { return st_message; }
void st_clear_error(void) { st_message[0] = 0; }
const char *st_version(void) { return STRATA_VERSION; }

st_status st_fail(st_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st_message, sizeof st_message, fmt, ap);
    va_end(ap);
    return s;
}

st_status st_fail_context(st_status s, const char *fmt, ...) {
    char prefix[512], old[sizeof st_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, st_message, sizeof old);
    size_t n = strlen(prefix);
    if (n >= sizeof st_message) n = sizeof st_message - 1;
    memcpy(st_message, prefix, n);
    size_t rest = strnlen(old, sizeof old - 1);
    if (rest > sizeof st_message - 1 - n) rest = sizeof st_message - 1 - n;
    memcpy(st_message + n, old, rest);
    st_message[n + rest] = 0;
    return s;
}

const char *st_status_name(st_status s) {
    switch (s) {
    case ST_OK: return "ok";
    case ST_ERR_IO: return "i/o error";
    case ST_ERR_FORMAT: return "format error";
    case ST_ERR_UNSUPPORTED: return "unsupported";
    case ST_ERR_INVALID: return "invalid argument";
    case ST_ERR_NOMEM: return "out of memory";
    case ST_ERR_RANGE: return "out of range";
    case ST_ERR_CANCELLED: return "cancelled";
    }
    return "unknown status";
}
