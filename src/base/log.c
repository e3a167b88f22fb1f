/* log.c: stderr diagnostics and the terminal progress line. */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static int progress_open; /* a progress line is on the terminal (stderr is one process-wide stream) */

void st_warn(const char *fmt, ...) {
    if (progress_open) st_progress_end();
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "strata: warning: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void st_progress(const char *label, double done, double total) {
    if (!isatty(STDERR_FILENO)) return;
    double pct = total > 0 ? 100.0 * done / total : 100.0;
    fprintf(stderr, "\r%s: %5.1f%%", label, pct);
    fflush(stderr);
    progress_open = 1;
}

void st_progress_end(void) {
    if (!progress_open) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    progress_open = 0;
}
