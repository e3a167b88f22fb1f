/* pretokenize.c: splits text into pieces with the Qwen pre-tokenizer regexes (MODELS.md §9.2).
 *
 * The alternatives of the regex are tried in order at each position (PCRE2 semantics, the same
 * as HF's Rust regex for these patterns). Text that no alternative matches (impossible for these
 * patterns, which cover every character, but cheap to handle) becomes a piece of its own, as HF's
 * "Isolated" split behaviour does. The compiled pattern is read-only after creation; each call
 * makes its own match data, so one pre-tokenizer serves any number of threads. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>
#include "text/pretokenize.h"

struct st_pretokenizer {
    pcre2_code *code;
};

static const char *pattern_of(st_pretok pre) {
    switch (pre) {
    case ST_PRETOK_QWEN2:
        return "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
               "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
               "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    case ST_PRETOK_QWEN35:
        return "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
               "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*"
               "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    }
    return NULL;
}

st_status st_pretokenizer_new(st_pretok pre, st_pretokenizer **out) {
    *out = NULL;
    const char *pat = pattern_of(pre);
    if (!pat) return st_fail(ST_ERR_INVALID, "pretokenize: unknown pre-tokenizer %d", (int)pre);
    int err = 0;
    PCRE2_SIZE erroff = 0;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                                     &err, &erroff, NULL);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return st_fail(ST_ERR_UNSUPPORTED, "pretokenize: PCRE2 cannot compile the pattern at %zu: %s",
                       (size_t)erroff, (const char *)msg);
    }
    /* JIT is an optimisation only: without it (no JIT support built in) matching still works. */
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    st_pretokenizer *p = calloc(1, sizeof *p);
    if (!p) { pcre2_code_free(code); return st_fail(ST_ERR_NOMEM, "pretokenize: out of memory"); }
    p->code = code;
    *out = p;
    return ST_OK;
}

void st_pretokenizer_free(st_pretokenizer *p) {
    if (!p) return;
    pcre2_code_free(p->code);
    free(p);
}

static int match_at(const st_pretokenizer *p, const char *text, size_t len, size_t pos,
                    pcre2_match_data *md) {
    int rc = pcre2_match(p->code, (PCRE2_SPTR)text, len, pos, PCRE2_NO_UTF_CHECK, md, NULL);
    /* The JIT's default stack is small; a pathological input falls back to the interpreter,
     * which has its own (heap) limits. */
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(p->code, (PCRE2_SPTR)text, len, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, NULL);
    return rc;
}

st_status st_pretokenize(const st_pretokenizer *p, const char *text, size_t len, st_piece_fn fn, void *ctx) {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(p->code, NULL);
    if (!md) return st_fail(ST_ERR_NOMEM, "pretokenize: out of memory");
    st_status s = ST_OK;
    size_t pos = 0;
    while (pos < len && s == ST_OK) {
        int rc = match_at(p, text, len, pos, md);
        if (rc == PCRE2_ERROR_NOMATCH) {
            s = fn(ctx, text + pos, len - pos);
            break;
        }
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            s = st_fail(ST_ERR_INVALID, "pretokenize: PCRE2 match failed at byte %zu: %s", pos, (const char *)msg);
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t start = ov[0], end = ov[1];
        if (start > pos) s = fn(ctx, text + pos, start - pos);
        if (s != ST_OK) break;
        if (end == start) {
            /* An empty match cannot come from these patterns; step one character to be safe. */
            size_t step = 1;
            while (start + step < len && ((unsigned char)text[start + step] & 0xC0) == 0x80) step++;
            s = fn(ctx, text + start, step);
            pos = start + step;
            continue;
        }
        s = fn(ctx, text + start, end - start);
        pos = end;
    }
    pcre2_match_data_free(md);
    return s;
}
