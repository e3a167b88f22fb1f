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

#endif
