/* log.h: diagnostics to stderr (never stdout, which belongs to the program's output), and a
 * progress line for long work that redraws itself only on a terminal. */
#ifndef ST_BASE_LOG_H
#define ST_BASE_LOG_H

typedef enum { ST_LOG_ERROR, ST_LOG_WARN, ST_LOG_INFO, ST_LOG_DEBUG } st_log_level;

void st_log_set_level(st_log_level level);
void st_log(st_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define st_warn(...) st_log(ST_LOG_WARN, __VA_ARGS__)
#define st_info(...) st_log(ST_LOG_INFO, __VA_ARGS__)
#define st_debug(...) st_log(ST_LOG_DEBUG, __VA_ARGS__)

/* A progress line "label: done/total (pct%)" on stderr, redrawn in place when stderr is a
 * terminal and silent otherwise. st_progress_end() finishes the line. */
void st_progress(const char *label, double done, double total);
void st_progress_end(void);

#endif
