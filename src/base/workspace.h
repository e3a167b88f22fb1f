/* workspace.h: a set of scratch buffers sized in rows, with one growth rule (DESIGN.md "Memory:
 * who owns what"). Generic: it knows ids and sizes, not what the buffers hold.
 *
 * The owner (a session: model/forward_ws.h's st_ws_id on the CPU, model/cuda/forward_cuda.h's
 * st_dws_id on a device) gives the number of buffer ids and a size function. Its rule:
 *   - st_workspace_reserve(rows <= capacity) changes nothing: same buffers, same contents;
 *   - a larger request releases every buffer (each recorded once in the ownership list, so the
 *     release is one walk over that list), then allocates the whole set at the new high-water mark.
 * The caller grows it only between completed chunks. Weights, KV cache and recurrent state are
 * never in it.
 *
 * Negative control: built with -DSTRATA_WORKSPACE_SKIP_RELEASE the release is skipped (a leak),
 * which tests/unit/test_workspace.c must detect (ctest runs that build expecting failure). */
#ifndef ST_BASE_WORKSPACE_H
#define ST_BASE_WORKSPACE_H

#include <stddef.h>
#include <stdint.h>
#include "base/status.h"

/* Bytes of buffer `id` for `rows` rows (may be 0: the buffer is then not allocated). */
typedef size_t (*st_ws_size_fn)(const void *ctx, int id, int64_t rows);

typedef struct st_ws_owned {
    void *ptr;
    size_t size;
} st_ws_owned;

/* Where the buffers come from: malloc/free when alloc is NULL, else these (a device's memory:
 * the device session gives cudaMalloc/cudaFree). */
typedef struct st_ws_allocator {
    void *(*alloc)(void *ctx, size_t bytes);
    void (*free)(void *ctx, void *p);
    void *ctx;
} st_ws_allocator;

typedef struct st_workspace {
    int n_buffers;
    st_ws_allocator al;
    st_ws_size_fn size_fn;
    const void *ctx;
    int64_t rows;            /* capacity in rows; 0 before the first reserve */
    void **buf;              /* buf[id]: the current buffer of each id (NULL if size 0) */
    st_ws_owned *owned;      /* the ownership list: every live allocation, once */
    int n_owned;
    size_t bytes;            /* sum of the live allocations */
    int64_t n_growths;
} st_workspace;

/* Prepares an empty workspace of n_buffers ids. Allocates only the bookkeeping. */
st_status st_workspace_init(st_workspace *ws, int n_buffers, st_ws_size_fn size_fn, const void *ctx);
/* Takes the buffers from `al` instead of malloc (before the first reserve). */
void st_workspace_set_allocator(st_workspace *ws, const st_ws_allocator *al);
/* Makes room for `rows` rows under the rule above. */
st_status st_workspace_reserve(st_workspace *ws, int64_t rows);
/* Releases every buffer and the bookkeeping. */
void st_workspace_free(st_workspace *ws);

static inline void *st_workspace_get(const st_workspace *ws, int id) { return ws->buf[id]; }
static inline float *st_workspace_f32(const st_workspace *ws, int id) { return (float *)ws->buf[id]; }

#endif
