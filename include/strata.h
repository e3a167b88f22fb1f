/* strata.h: the public C API of Strata.
 *
 * Strata runs hybrid Mixture-of-Experts language models (qwen35moe, qwen35, qwen3next, qwen3moe,
 * qwen3) from llama.cpp's GGUF files. Every function returns an st_status; on failure a message
 * naming what is wrong is kept per thread and returned by st_last_error(). Nothing here prints or
 * exits. */
#ifndef STRATA_H
#define STRATA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_VERSION "0.1.0"

typedef enum st_status {
    ST_OK = 0,
    ST_ERR_IO,          /* a file could not be opened, mapped, read or written */
    ST_ERR_FORMAT,      /* a file is malformed: the message names the field */
    ST_ERR_UNSUPPORTED, /* well-formed, but not something Strata runs */
    ST_ERR_INVALID,     /* a bad argument from the caller */
    ST_ERR_NOMEM,       /* an allocation failed */
    ST_ERR_RANGE,       /* an index, token id or length out of range */
    ST_ERR_CANCELLED,   /* the caller asked to stop */
} st_status;

/* The message of the last failure on this thread ("" if none). */
const char *st_last_error(void);
/* A short name for a status ("format error", ...). */
const char *st_status_name(st_status s);
const char *st_version(void);

#ifdef __cplusplus
}
#endif
#endif
