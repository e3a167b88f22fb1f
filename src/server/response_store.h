/* response_store.h: finished /v1/responses kept in memory for previous_response_id, bounded by
 * count and bytes, least recently used first out (response_store.c). Thread-safe. */
#ifndef ST_SERVER_RESPONSE_STORE_H
#define ST_SERVER_RESPONSE_STORE_H

#include <stddef.h>

#include <jansson.h>

typedef struct sv_rstore sv_rstore;

/* max_count 0: nothing is kept. */
sv_rstore *sv_rstore_new(size_t max_count, size_t max_bytes);
void sv_rstore_free(sv_rstore *r);
/* Keeps copies of the response object and of the conversation through it (an items array) under
 * id, dropping the least recently used entries to make room; one larger than max_bytes is not
 * kept. 0, or -1 when out of memory. */
int sv_rstore_put(sv_rstore *r, const char *id, json_t *response, json_t *conversation);
/* New references (the caller releases them), NULL when id is not kept; a lookup makes the entry
 * the most recently used. */
json_t *sv_rstore_conversation(sv_rstore *r, const char *id);
json_t *sv_rstore_response(sv_rstore *r, const char *id);
/* 1 when id was kept (and is now gone), 0 when not. */
int sv_rstore_delete(sv_rstore *r, const char *id);
void sv_rstore_usage(sv_rstore *r, size_t *count, size_t *bytes);

#endif
