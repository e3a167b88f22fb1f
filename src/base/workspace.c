/* workspace.c: the scratch workspace and its growth rule (see workspace.h). Buffers are 64-byte
 * aligned for the SIMD kernels by over-allocating with plain malloc (posix_memalign may keep a
 * larger free chunk whole, which blurs the heap accounting the tests rely on); every allocation
 * goes into the ownership list at once, and the release before a growth is one walk over it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/workspace.h"

enum { WS_ALIGN = 64 };

st_status st_workspace_init(st_workspace *ws, int n_buffers, st_ws_size_fn size_fn, const void *ctx) {
    memset(ws, 0, sizeof *ws);
    if (n_buffers <= 0 || !size_fn) return st_fail(ST_ERR_INVALID, "workspace: %d buffers, size function %p", n_buffers, (void *)size_fn);
    ws->buf = calloc((size_t)n_buffers, sizeof *ws->buf);
    ws->owned = calloc((size_t)n_buffers, sizeof *ws->owned);
    if (!ws->buf || !ws->owned) {
        free(ws->buf);
        free(ws->owned);
        memset(ws, 0, sizeof *ws);
        return st_fail(ST_ERR_NOMEM, "workspace: out of memory for %d buffer slots", n_buffers);
    }
    ws->n_buffers = n_buffers;
    ws->size_fn = size_fn;
    ws->ctx = ctx;
    return ST_OK;
}

void st_workspace_set_allocator(st_workspace *ws, const st_ws_allocator *al) { ws->al = *al; }

static void *ws_alloc(st_workspace *ws, size_t bytes) {
    return ws->al.alloc ? ws->al.alloc(ws->al.ctx, bytes) : malloc(bytes);
}

static void ws_free(st_workspace *ws, void *p) {
    if (ws->al.free) ws->al.free(ws->al.ctx, p);
    else free(p);
}

/* One walk over the ownership list; afterwards no scratch buffer is alive. */
static void release_all(st_workspace *ws) {
#ifndef STRATA_WORKSPACE_SKIP_RELEASE
    for (int i = 0; i < ws->n_owned; i++) ws_free(ws, ws->owned[i].ptr);
#endif
    ws->n_owned = 0;
    ws->bytes = 0;
    memset(ws->buf, 0, (size_t)ws->n_buffers * sizeof *ws->buf);
}

static st_status allocate_all(st_workspace *ws, int64_t rows) {
    for (int id = 0; id < ws->n_buffers; id++) {
        size_t size = ws->size_fn(ws->ctx, id, rows);
        if (size == 0) continue;
        size = (size + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN;
        void *p = ws_alloc(ws, size + WS_ALIGN);
        if (!p) {
            release_all(ws);
            ws->rows = 0;
            return st_fail(ST_ERR_NOMEM, "workspace: out of memory for buffer %d (%zu bytes, %lld rows)", id, size, (long long)rows);
        }
        ws->owned[ws->n_owned++] = (st_ws_owned){p, size};
        ws->buf[id] = (void *)(((uintptr_t)p + WS_ALIGN - 1) & ~(uintptr_t)(WS_ALIGN - 1));
        ws->bytes += size;
    }
    ws->rows = rows;
    return ST_OK;
}

st_status st_workspace_reserve(st_workspace *ws, int64_t rows) {
    if (rows <= 0) return st_fail(ST_ERR_INVALID, "workspace: request for %lld rows", (long long)rows);
    if (rows <= ws->rows) return ST_OK;
    release_all(ws);
    ws->n_growths++;
    return allocate_all(ws, rows);
}

void st_workspace_free(st_workspace *ws) {
    if (!ws->buf) return;
    for (int i = 0; i < ws->n_owned; i++) ws_free(ws, ws->owned[i].ptr);
    free(ws->buf);
    free(ws->owned);
    memset(ws, 0, sizeof *ws);
}
