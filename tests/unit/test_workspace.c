/* test_workspace.c: the workspace's ownership rule, observed through glibc's own heap accounting
 * (mallinfo2), not through any counter of ours.
 *
 * Buffers 0 and 1 are large (>= 256 KiB at 64 rows), so glibc serves them with mmap: a live one
 * counts in `hblkhd`, and freeing it unmaps it and removes it from `hblkhd` at once. Buffer 2 is
 * small and comes from the brk heap: it counts in `uordblks`. The mmap threshold is pinned with
 * mallopt so glibc's dynamic threshold cannot move buffers between the two counters.
 *
 *  - growth 64 -> 96 -> 128 -> 192 rows: after each, hblkhd and uordblks above the baseline equal
 *    the new set alone (each mmap chunk costs its size plus at most one page of header and
 *    alignment; the brk chunk at most 128 bytes more); a workspace that kept an old buffer would exceed that by the old buffer's size;
 *  - same-size and smaller requests keep every buffer's address and contents, and move neither
 *    counter.
 * Built with -DSTRATA_WORKSPACE_SKIP_RELEASE (cmake/parts/engine.cmake: test_workspace_leak) the
 * release is skipped and this test must fail, in the heap accounting's checks alone
 * (tests/negative_control.sh checks that). Under ASan malloc is replaced, so the test skips. */
#include <malloc.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "base/workspace.h"
#include "test.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

enum { N_BUF = 4, MMAP_THRESHOLD = 128 * 1024 };

static size_t test_size(const void *ctx, int id, int64_t rows) {
    switch (id) {
    case 0: return (size_t)rows * 4096;        /* 256 KiB at 64 rows: mmap */
    case 1: return (size_t)rows * 8192 + 1000; /* mmap */
    case 2: return (size_t)rows * 16 + 100;    /* brk heap */
    default: return 0;                          /* never allocated */
    }
}

static size_t rounded(size_t n) { return (n + 63) / 64 * 64; }

typedef struct heap { size_t mapped, used; } heap;

static heap heap_now(void) {
    struct mallinfo2 mi = mallinfo2();
    return (heap){mi.hblkhd, mi.uordblks};
}

/* After reserving `rows`: the heap above `base` holds exactly the set for `rows`. */
static void check_set(const st_workspace *ws, heap base, int64_t rows) {
    heap now = heap_now();
    size_t big = rounded(test_size(NULL, 0, rows)) + rounded(test_size(NULL, 1, rows));
    size_t small = rounded(test_size(NULL, 2, rows));
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t mapped = now.mapped - base.mapped;
    size_t used = now.used - base.used;
    CHECKF(mapped >= big && mapped <= big + 2 * page,
           "rows %lld: mmapped bytes above baseline %zu, the new set alone is %zu..%zu", (long long)rows, mapped,
           big, big + 2 * page);
    CHECKF(used >= small && used <= small + 128,
           "rows %lld: brk bytes in use above baseline %zu, the new set alone is %zu..%zu", (long long)rows, used,
           small, small + 128);
    CHECK(ws->rows == rows);
    CHECK(ws->n_owned == 3);
    CHECK(ws->buf[3] == NULL);
    /* Every current buffer is in the ownership list exactly once, and nothing else is. */
    for (int id = 0; id < 3; id++) {
        int seen = 0;
        for (int i = 0; i < ws->n_owned; i++)
            seen += (char *)ws->buf[id] >= (char *)ws->owned[i].ptr && (char *)ws->buf[id] < (char *)ws->owned[i].ptr + 64;
        CHECKF(seen == 1, "buffer %d is in the ownership list %d times", id, seen);
    }
}

static void fill(const st_workspace *ws, int64_t rows, unsigned char seed) {
    for (int id = 0; id < 3; id++) memset(ws->buf[id], seed + id, test_size(NULL, id, rows));
}

static int same_contents(const st_workspace *ws, int64_t rows, unsigned char seed) {
    for (int id = 0; id < 3; id++) {
        const unsigned char *p = ws->buf[id];
        size_t n = test_size(NULL, id, rows);
        for (size_t i = 0; i < n; i++)
            if (p[i] != (unsigned char)(seed + id)) return 0;
    }
    return 1;
}

static void test_growth(void) {
    st_workspace ws;
    CHECK(st_workspace_init(&ws, N_BUF, test_size, NULL) == ST_OK);
    heap base = heap_now();
    const int64_t steps[] = {64, 96, 128, 192};
    for (int s = 0; s < 4; s++) {
        CHECK(st_workspace_reserve(&ws, steps[s]) == ST_OK);
        check_set(&ws, base, steps[s]);
    }
    CHECK(ws.n_growths == 4);
    st_workspace_free(&ws);
}

static void test_no_change(void) {
    st_workspace ws;
    CHECK(st_workspace_init(&ws, N_BUF, test_size, NULL) == ST_OK);
    CHECK(st_workspace_reserve(&ws, 192) == ST_OK);
    fill(&ws, 192, 0x40);
    void *before[N_BUF];
    memcpy(before, ws.buf, sizeof before);
    heap h0 = heap_now();
    const int64_t requests[] = {192, 100, 64, 1, 192};
    for (int r = 0; r < 5; r++) {
        CHECK(st_workspace_reserve(&ws, requests[r]) == ST_OK);
        CHECK(!memcmp(before, ws.buf, sizeof before));
        CHECKF(same_contents(&ws, 192, 0x40), "request for %lld rows changed a buffer's contents", (long long)requests[r]);
        heap h = heap_now();
        CHECK(h.mapped == h0.mapped && h.used == h0.used);
        CHECK(ws.rows == 192);
    }
    CHECK(ws.n_growths == 1);
    CHECK(st_workspace_reserve(&ws, 0) == ST_ERR_INVALID);
    st_workspace_free(&ws);
}

int main(void) {
#ifdef UNDER_ASAN
    SKIP("AddressSanitizer replaces malloc, so glibc's mallinfo2 does not see the workspace");
#endif
    if (!mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) SKIP("mallopt(M_MMAP_THRESHOLD) refused");
    test_growth();
    test_no_change();
    return test_report("test_workspace");
}
