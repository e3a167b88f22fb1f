/* clock.c: CLOCK_MONOTONIC. */
#include "base/clock.h"
#include <time.h>
uint64_t st_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
double st_now(void) { return (double)st_now_ns() * 1e-9; }
