/* response_store.c: the finished /v1/responses the server keeps, so a follow-up request naming one
 * in previous_response_id continues its conversation (and GET / DELETE /v1/responses/ID reach it).
 *
 * Each entry holds two JSON texts: the response object as it was answered, and the conversation up
 * to and including its output (the input items, those of the responses before it first, then the
 * output items), which is what a follow-up prepends to its own input. Texts, not jansson values,
 * so the bytes are counted exactly and no value is shared between threads. Bounded by count and by
 * bytes; the least recently used entry goes first (a lookup counts as a use). All under one mutex:
 * HTTP threads look up and delete, engine threads put. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "server/response_store.h"

typedef struct entry {
    char *id;
    char *response;      /* the response object's JSON text */
    char *conversation;  /* the items array's JSON text */
    size_t bytes;
    struct entry *prev, *next; /* most recently used first */
} entry;

struct sv_rstore {
    pthread_mutex_t mu;
    size_t max_count, max_bytes;
    size_t count, bytes;
    entry *head, *tail;
};

sv_rstore *sv_rstore_new(size_t max_count, size_t max_bytes) {
    sv_rstore *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    pthread_mutex_init(&r->mu, NULL);
    r->max_count = max_count;
    r->max_bytes = max_bytes;
    return r;
}

static void entry_free(entry *e) {
    free(e->id);
    free(e->response);
    free(e->conversation);
    free(e);
}

static void unlink_entry(sv_rstore *r, entry *e) {
    if (e->prev) e->prev->next = e->next; else r->head = e->next;
    if (e->next) e->next->prev = e->prev; else r->tail = e->prev;
    e->prev = e->next = NULL;
    r->count--;
    r->bytes -= e->bytes;
}

static void push_front(sv_rstore *r, entry *e) {
    e->prev = NULL;
    e->next = r->head;
    if (r->head) r->head->prev = e; else r->tail = e;
    r->head = e;
    r->count++;
    r->bytes += e->bytes;
}

static entry *find(sv_rstore *r, const char *id) {
    for (entry *e = r->head; e; e = e->next)
        if (!strcmp(e->id, id)) return e;
    return NULL;
}

void sv_rstore_free(sv_rstore *r) {
    if (!r) return;
    for (entry *e = r->head, *next; e; e = next) {
        next = e->next;
        entry_free(e);
    }
    pthread_mutex_destroy(&r->mu);
    free(r);
}

int sv_rstore_put(sv_rstore *r, const char *id, json_t *response, json_t *conversation) {
    if (!r || !r->max_count) return 0;
    entry *e = calloc(1, sizeof *e);
    if (!e) return -1;
    e->id = strdup(id);
    e->response = json_dumps(response, JSON_COMPACT);
    e->conversation = json_dumps(conversation, JSON_COMPACT);
    if (!e->id || !e->response || !e->conversation) {
        entry_free(e);
        return -1;
    }
    e->bytes = strlen(e->id) + strlen(e->response) + strlen(e->conversation) + sizeof *e;
    if (e->bytes > r->max_bytes) { /* larger than the whole store: not kept */
        entry_free(e);
        return 0;
    }
    pthread_mutex_lock(&r->mu);
    entry *old = find(r, id);
    if (old) {
        unlink_entry(r, old);
        entry_free(old);
    }
    while (r->tail && (r->count + 1 > r->max_count || r->bytes + e->bytes > r->max_bytes)) {
        entry *victim = r->tail;
        unlink_entry(r, victim);
        entry_free(victim);
    }
    push_front(r, e);
    pthread_mutex_unlock(&r->mu);
    return 0;
}

/* The entry's text (parsed) under id, refreshed as the most recent; NULL when not kept. */
static json_t *get_text(sv_rstore *r, const char *id, int conversation) {
    if (!r) return NULL;
    json_t *v = NULL;
    pthread_mutex_lock(&r->mu);
    entry *e = find(r, id);
    if (e) {
        unlink_entry(r, e);
        push_front(r, e);
        v = json_loads(conversation ? e->conversation : e->response, 0, NULL);
    }
    pthread_mutex_unlock(&r->mu);
    return v;
}

json_t *sv_rstore_conversation(sv_rstore *r, const char *id) { return get_text(r, id, 1); }
json_t *sv_rstore_response(sv_rstore *r, const char *id) { return get_text(r, id, 0); }

int sv_rstore_delete(sv_rstore *r, const char *id) {
    if (!r) return 0;
    pthread_mutex_lock(&r->mu);
    entry *e = find(r, id);
    if (e) unlink_entry(r, e);
    pthread_mutex_unlock(&r->mu);
    if (e) entry_free(e);
    return e != NULL;
}

void sv_rstore_usage(sv_rstore *r, size_t *count, size_t *bytes) {
    *count = *bytes = 0;
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    *count = r->count;
    *bytes = r->bytes;
    pthread_mutex_unlock(&r->mu);
}
