/* mmap.c: read-only file mappings, and copying out of them without holding both. */
#include "base/mmap.h"

#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

st_status st_map_file(const char *path, st_mapping *out) {
    out->data = NULL;
    out->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return st_fail(ST_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return st_fail(ST_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return st_fail(ST_ERR_IO, "%s: not a regular file", path);
    }
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return st_fail(ST_ERR_IO, "%s: cannot map: %s", path, strerror(e));
        }
        out->data = p;
        out->size = (size_t)st.st_size;
    }
    close(fd);
    return ST_OK;
}

void st_unmap_file(st_mapping *m) {
    if (m->data) munmap((void *)m->data, m->size);
    m->data = NULL;
    m->size = 0;
}

#define COPY_PIECE ((size_t)2 << 20)

void st_copy_from_mapping(void *dst, const void *src, size_t n, void (*progress)(void *ctx, size_t copied), void *ctx) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    size_t reported = 0;
    for (size_t done = 0, k = 0; done < n; done += COPY_PIECE, k++) {
        const size_t len = n - done < COPY_PIECE ? n - done : COPY_PIECE;
        memcpy((char *)dst + done, (const char *)src + done, len);
        /* whole pages only: the partial pages at either end may hold bytes someone else reads */
        const uintptr_t lo = ((uintptr_t)src + done + page - 1) & ~(page - 1);
        const uintptr_t hi = ((uintptr_t)src + done + len) & ~(page - 1);
        if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
        if (progress && k % 64 == 63) {
            progress(ctx, done + len - reported);
            reported = done + len;
        }
    }
}
