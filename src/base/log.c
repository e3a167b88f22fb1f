/* log.c: stderr diagnostics and the terminal progress line. */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static st_log_level log_level = ST_LOG_WARN;
static int progress_open;

void st_log_set_level(st_log_level level) { log_level = level; }

void st_log(st_log_level level, const char *fmt, ...) {
    static const char *names[] = {"error", "warning", "info", "debug"};
    if (level > log_level) return;
    if (progress_open) st_progress_end();
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "strata: %s: ", names[level]);
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
