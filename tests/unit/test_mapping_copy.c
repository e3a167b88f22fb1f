/* test_mapping_copy.c: st_copy_from_mapping (base/mmap.h), the weight copy's loop.
 *  - the copy is exact, from an offset that is not page-aligned and for a length that is not a
 *    multiple of the piece or the page;
 *  - the process's resident peak while copying 64 MiB out of a file mapping stays within 5% (plus
 *    4 MiB) of the copy alone, and the mapping's pages are gone from the process afterwards,
 *    measured with the kernel's own accounting (VmHWM after resetting it through
 *    /proc/self/clear_refs);
 *  - the negative control: a plain memcpy of the same mapping peaks at nearly twice, which shows
 *    the measurement sees what the test is about. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/mmap.h"
#include "test.h"

#define MIB ((size_t)1 << 20)

/* A /proc/self/status field in bytes, -1 if absent. */
static long long status_bytes(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long long kib = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl)) {
            kib = atoll(line + kl);
            break;
        }
    fclose(f);
    return kib < 0 ? -1 : kib * 1024;
}

/* Sets the peak (VmHWM) back to the current resident size. */
static int reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return 0;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

static uint8_t byte_at(size_t i) { return (uint8_t)(i * 2654435761u >> 13); }

int main(void) {
    char path[] = "/tmp/strata-mapping-copy-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) SKIP("no temporary file");
    const size_t size = 64 * MIB + 12345 + 100;
    uint8_t *chunk = malloc(MIB);
    for (size_t off = 0; off < size; off += MIB) {
        size_t len = size - off < MIB ? size - off : MIB;
        for (size_t i = 0; i < len; i++) chunk[i] = byte_at(off + i);
        if (write(fd, chunk, len) != (ssize_t)len) SKIP("cannot write %s", path);
    }
    free(chunk);
    close(fd);
    st_mapping map;
    CHECK(st_map_file(path, &map) == ST_OK && map.size == size);
    if (!reset_peak() || status_bytes("VmHWM:") < 0) {
        remove(path);
        SKIP("the kernel does not reset the resident peak (/proc/self/clear_refs)");
    }
    const size_t n = size - 100;   /* from byte 100: not page-aligned */

    /* negative control: memcpy keeps the mapping's pages beside the copy */
    long long rss0 = status_bytes("VmRSS:");
    reset_peak();
    uint8_t *a = malloc(n);
    memcpy(a, map.data + 100, n);
    long long plain = status_bytes("VmHWM:") - rss0;
    CHECKF(plain >= (long long)(n * 18 / 10), "a plain copy peaks at %.1f MiB over %.1f MiB", plain / 1048576.0,
           n / 1048576.0);
    free(a);
    st_unmap_file(&map);
    CHECK(st_map_file(path, &map) == ST_OK);

    rss0 = status_bytes("VmRSS:");
    reset_peak();
    uint8_t *b = malloc(n);
    st_copy_from_mapping(b, map.data + 100, n, NULL, NULL);
    long long peak = status_bytes("VmHWM:") - rss0, after = status_bytes("VmRSS:") - rss0;
    CHECKF(peak <= (long long)(n + n / 20 + 4 * MIB), "copying %.1f MiB peaked %.1f MiB above the start",
           n / 1048576.0, peak / 1048576.0);
    CHECKF(after <= (long long)(n + 4 * MIB), "%.1f MiB resident after the copy", after / 1048576.0);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += b[i] != byte_at(i + 100);
    CHECKF(bad == 0, "%zu bytes differ", bad);
    /* the mapping still reads (its pages come back from the page cache) */
    CHECK(map.data[100] == byte_at(100) && map.data[size - 1] == byte_at(size - 1));
    free(b);
    st_unmap_file(&map);
    remove(path);
    return test_report("test_mapping_copy");
}
