/* expert_mailbox.h: how a decode step on the GPU hands a tiered layer's CPU share of experts to a
 * CPU thread and takes the sum back, with no driver call in between (memory tiers v4:
 * model/cuda/host_experts.c, bench/cuda/NOTES.md). Plain C, so that the protocol is tested on a
 * CPU with a thread playing the device (tests/unit/test_expert_mailbox.c).
 *
 * Both sides share one block of pinned, mapped, cached host memory: a header of three 64-bit
 * words, each on its own cache line, then one slot per layer (the request: k expert ids, k
 * weights, the normed row h of d floats; the answer: y, d floats, on its own lines).
 *
 * The sequence rules:
 *  - The device keeps a counter in its own memory. A request takes the next number s (s >= 1),
 *    writes its payload into the layer's slot, fences at system scope, and stores
 *    req = s << ST_MBOX_LAYER_BITS | layer.
 *  - The server thread polls req (acquire loads). On a value it has not served it reads the
 *    payload, computes the layer's share into the slot's y, and stores done = s (release). It
 *    serves only the newest request: an older one it did not see was overwritten, and the device
 *    gave up on it before it published the next (a device waits for each request before the next).
 *  - The device's waiter accepts done == s and nothing else, so the answer to an earlier token, an
 *    earlier replay of the same captured graph or an earlier layer is never taken for this one. It
 *    gives up after a bounded time and then stores err = req's value (the first to give up in a
 *    step wins); while err is set, later waits give up at once, so a dead server costs a step one
 *    timeout, not one per layer.
 *  - After the step the host reads err (st_mbox_check), clears it, and reports the layer.
 *  - A step that may send requests is bracketed by st_mbox_step_begin (which wakes the server)
 *    and st_mbox_step_end. Within a step the server never sleeps, however long the step (a first
 *    eager step loads the kernels, and a prompt chunk sends its one request at the last layer);
 *    between steps it spins for an idle time after its last request or step, then sleeps. A
 *    request sent to a sleeping server is only seen at the next step_begin: its waiter gives up.
 *
 * backend/cuda/mailbox.cu runs the device's two steps as kernels inside the captured decode graph;
 * st_mbox_ref_publish and st_mbox_ref_wait below are their plain reference, and the tests' device. */
#ifndef ST_MODEL_EXPERT_MAILBOX_H
#define ST_MODEL_EXPERT_MAILBOX_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define ST_MBOX_LAYER_BITS 16
#define ST_MBOX_MAX_LAYERS (1 << ST_MBOX_LAYER_BITS)

/* The header at the start of the block (the device writes req and err, the server done). */
typedef struct st_mbox_header {
    uint64_t req;
    uint64_t pad0[7];
    uint64_t done;
    uint64_t pad1[7];
    uint64_t err;
    uint64_t pad2[7];
} st_mbox_header;

/* Where everything lies: offsets within a slot, and the block's size. */
typedef struct st_mbox_layout {
    int64_t n_layer, k, d;
    size_t off_ids, off_w, off_h, off_y;
    size_t slot_bytes;
    size_t bytes;                /* the header and n_layer slots */
} st_mbox_layout;

st_mbox_layout st_mbox_layout_of(int64_t n_layer, int64_t k, int64_t d);

/* Layer il's slot in a block whose start (host or device view) is base. */
static inline char *st_mbox_slot(void *base, const st_mbox_layout *l, int64_t il) {
    return (char *)base + sizeof(st_mbox_header) + (size_t)il * l->slot_bytes;
}

/* The server's work for one request: the slot's payload in, y (d floats) out. */
typedef void (*st_mbox_serve_fn)(void *ctx, int64_t layer, const int32_t *ids, const float *w, const float *h,
                                 float *y);

typedef struct st_mbox st_mbox;

/* Starts the server thread over the block at `shared` (host view, zeroed, laid out as l). It
 * spins idle_s seconds after its last request or wake, then sleeps. timeout_ns is the device's
 * wait bound, for st_mbox_check's message. */
st_status st_mbox_create(void *shared, const st_mbox_layout *l, st_mbox_serve_fn fn, void *ctx, double idle_s,
                         uint64_t timeout_ns, st_mbox **out);
/* Stops the thread (after the request it is serving, if any) and frees the server. */
void st_mbox_destroy(st_mbox *mb);
/* A step that may send requests begins: the server wakes if it sleeps, and spins until the end. */
void st_mbox_step_begin(st_mbox *mb);
/* The step is over and the device idle: the server's idle time starts; then st_mbox_check. */
st_status st_mbox_step_end(st_mbox *mb);
/* ST_OK, or (and err cleared) ST_ERR_IO naming the layer whose wait gave up. */
st_status st_mbox_check(st_mbox *mb);
/* For tests: whether the thread sleeps now, and how many requests it has served. */
int st_mbox_sleeping(const st_mbox *mb);
uint64_t st_mbox_served(const st_mbox *mb);

/* The device's steps as plain C. Publish: the payload (k ids and weights, d floats of h) into
 * layer's slot, then req with the next number of *counter; returns that number. Wait: 1 and
 * out[0..d) += the slot's y once done == seq; 0 (err set, unless an earlier wait set it) if err
 * is already set or timeout_ns passes first. */
uint64_t st_mbox_ref_publish(void *shared, const st_mbox_layout *l, uint64_t *counter, int64_t layer,
                             const int32_t *ids, const float *w, const float *h);
int st_mbox_ref_wait(void *shared, const st_mbox_layout *l, int64_t layer, uint64_t seq, uint64_t timeout_ns,
                     float *out);

#endif
