/* request_log.c: the request log, one line per request through cfg.log (serve --log-format
 * text|json): id, endpoint, status, prompt, cached and generated tokens, time to first token and
 * total time. Written by the engine thread when a job ends (queue.c) and by the HTTP threads for
 * requests refused before they reach the queue (http.c). */
#include <stdio.h>
#include <stdlib.h>

#include "server/internal.h"

void sv_log_request(sv_server *s, unsigned long long id, const char *url, int status, const sv_usage *u, double ttft, double total) {
    if (!s->cfg.log) return;
    char line[512];
    if (s->cfg.log_json) {
        json_t *r = json_pack("{s:I,s:s,s:i,s:i,s:i,s:i,s:o,s:f}", "id", (json_int_t)id, "endpoint", url ? url : "", "status", status,
                              "prompt_tokens", u->prompt_tokens, "cached_tokens", u->cached_tokens, "generated_tokens",
                              u->completion_tokens, "ttft_ms", ttft >= 0 ? json_real(ttft * 1e3) : json_null(), "total_ms", total * 1e3);
        char *t = json_dumps(r, JSON_COMPACT | JSON_REAL_PRECISION(6));
        json_decref(r);
        if (!t) return;
        snprintf(line, sizeof line, "%s", t);
        free(t);
    } else {
        char first[32] = "-";
        if (ttft >= 0) snprintf(first, sizeof first, "%.3fs", ttft);
        snprintf(line, sizeof line, "request %llu %s %d prompt=%d cached=%d generated=%d ttft=%s total=%.3fs", id, url ? url : "",
                 status, u->prompt_tokens, u->cached_tokens, u->completion_tokens, first, total);
    }
    s->cfg.log(s->cfg.log_ctx, line);
}
