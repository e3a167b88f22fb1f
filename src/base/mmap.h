/* mmap.h: a read-only mapping of a whole file, the way GGUF weights are read. */
#ifndef ST_BASE_MMAP_H
#define ST_BASE_MMAP_H

#include <stddef.h>
#include "base/status.h"

typedef struct st_mapping {
    const unsigned char *data; /* NULL for an empty file */
    size_t size;
} st_mapping;

/* Maps `path` read-only. On failure names the path and the OS reason. */
st_status st_map_file(const char *path, st_mapping *out);
void st_unmap_file(st_mapping *m);

/* Copies n bytes out of a file mapping into dst in pieces, dropping each piece's pages from this
 * process once copied (madvise MADV_DONTNEED on the whole pages inside it), so that the mapping
 * and the copy never both hold the whole range: the resident peak is the copy plus one piece.
 * The mapping stays valid; a later read faults its pages back in from the page cache. progress,
 * if not NULL, is called with ctx after every 64 pieces with the bytes copied since its last call. */
void st_copy_from_mapping(void *dst, const void *src, size_t n, void (*progress)(void *ctx, size_t copied), void *ctx);

#endif
