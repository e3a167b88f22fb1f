/* log.h: diagnostics to stderr (never stdout, which belongs to the program's output), and a
 * progress line for long work that redraws itself only on a terminal. */
#ifndef ST_BASE_LOG_H
#define ST_BASE_LOG_H

/* "strata: warning: <message>" on stderr (a finished progress line is closed first). */
void st_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A progress line "label: done/total (pct%)" on stderr, redrawn in place when stderr is a
 * terminal and silent otherwise. st_progress_end() finishes the line. */
void st_progress(const char *label, double done, double total);
void st_progress_end(void);

#endif
