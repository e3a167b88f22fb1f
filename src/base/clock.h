/* clock.h: a monotonic clock for timings. */
#ifndef ST_BASE_CLOCK_H
#define ST_BASE_CLOCK_H
#include <stdint.h>
double st_now(void);          /* seconds, monotonic */
uint64_t st_now_ns(void);     /* nanoseconds, monotonic */
#endif
