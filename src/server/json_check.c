/* json_check.c: the checks a request body passes before jansson parses it: valid UTF-8 everywhere
 * and nesting no deeper than a limit. It walks the structure just enough to know where it is, so
 * the error names the field ("messages[0].content") the way the APIs' errors do. Syntax errors are
 * left to the parser, which reports line and column. */
#include "server/json_check.h"

#include <stdio.h>
#include <string.h>

typedef struct frame {
    int is_array;
    int expect_key; /* object: the next string is a key */
    long index;     /* array: the current element */
    char key[64];
} frame;

static void path_of(const frame *st, int depth, char *out, size_t cap) {
    size_t n = 0;
    out[0] = 0;
    for (int i = 0; i < depth && n + 1 < cap; i++) {
        int w = st[i].is_array ? snprintf(out + n, cap - n, "[%ld]", st[i].index)
                               : snprintf(out + n, cap - n, "%s%s", n ? "." : "", st[i].key);
        if (w < 0) break;
        n += (size_t)w;
        if (n >= cap) { n = cap - 1; out[n] = 0; }
    }
}

/* The length of a valid UTF-8 character at s (at most n bytes), or 0. */
static size_t utf8_char(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    size_t need = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!need || need > n) return 0;
    if (need > 1) {
        unsigned char b = s[1];
        if ((b & 0xC0) != 0x80) return 0;
        if ((c == 0xE0 && b < 0xA0) || (c == 0xED && b >= 0xA0) || (c == 0xF0 && b < 0x90) || (c == 0xF4 && b >= 0x90))
            return 0;
    }
    for (size_t k = 2; k < need; k++)
        if ((s[k] & 0xC0) != 0x80) return 0;
    return need;
}

int sv_json_check(const char *body, size_t n, int max_depth, char *param, size_t param_cap, char *msg, size_t msg_cap) {
    frame st[SV_JSON_MAX_DEPTH_LIMIT];
    int depth = 0;
    if (max_depth > SV_JSON_MAX_DEPTH_LIMIT) max_depth = SV_JSON_MAX_DEPTH_LIMIT;
    const unsigned char *s = (const unsigned char *)body;
    param[0] = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (c == '"') {
            size_t start = ++i;
            while (i < n && s[i] != '"') {
                if (s[i] == '\\') { i += 2; continue; }
                size_t k = utf8_char(s + i, n - i);
                if (!k) {
                    path_of(st, depth, param, param_cap);
                    snprintf(msg, msg_cap, "invalid UTF-8 at byte %zu%s%s", i, *param ? " in " : "", param);
                    return -1;
                }
                i += k;
            }
            if (depth && !st[depth - 1].is_array && st[depth - 1].expect_key) {
                size_t len = (i > n ? n : i) - start;
                if (len >= sizeof st[0].key) len = sizeof st[0].key - 1;
                memcpy(st[depth - 1].key, body + start, len);
                st[depth - 1].key[len] = 0;
                st[depth - 1].expect_key = 0;
            }
            i++;
            continue;
        }
        if (c == '{' || c == '[') {
            if (depth >= max_depth) {
                path_of(st, depth, param, param_cap);
                snprintf(msg, msg_cap, "JSON nested deeper than %d levels%s%s", max_depth, *param ? " at " : "", param);
                return -1;
            }
            st[depth].is_array = c == '[';
            st[depth].expect_key = c == '{';
            st[depth].index = 0;
            st[depth].key[0] = 0;
            depth++;
        } else if ((c == '}' || c == ']') && depth) {
            depth--;
        } else if (c == ',' && depth) {
            if (st[depth - 1].is_array) st[depth - 1].index++;
            else st[depth - 1].expect_key = 1;
        } else if (c >= 0x80) {
            size_t k = utf8_char(s + i, n - i);
            if (!k) {
                path_of(st, depth, param, param_cap);
                snprintf(msg, msg_cap, "invalid UTF-8 at byte %zu", i);
                return -1;
            }
            i += k;
            continue;
        }
        i++;
    }
    return 0;
}
