/* chat_json.c: JSON written the way the chat templates' tojson filter writes it (Python's
 * json.dumps with ensure_ascii=False: keys in order, ", " and ": ", the shortest float repr), and
 * the small growing string the chat code builds its text in. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "text/chat.h"
#include "text/chat_internal.h"

/* ---- a growing string ---- */
void st_sb_add(st_sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) { b->oom = 1; return; }
        b->p = q;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
void st_sb_str(st_sbuf *b, const char *s) { st_sb_add(b, s, strlen(s)); }

/* ---- tojson: Python's json.dumps(ensure_ascii=False) ---- */
static void json_string_out(st_sbuf *b, const char *s, size_t n) {
    st_sb_add(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        switch (c) {
        case '"': st_sb_add(b, "\\\"", 2); break;
        case '\\': st_sb_add(b, "\\\\", 2); break;
        case '\n': st_sb_add(b, "\\n", 2); break;
        case '\r': st_sb_add(b, "\\r", 2); break;
        case '\t': st_sb_add(b, "\\t", 2); break;
        case '\b': st_sb_add(b, "\\b", 2); break;
        case '\f': st_sb_add(b, "\\f", 2); break;
        default:
            if (c < 0x20) { snprintf(esc, sizeof esc, "\\u%04x", c); st_sb_add(b, esc, 6); }
            else st_sb_add(b, (const char *)&c, 1);
        }
    }
    st_sb_add(b, "\"", 1);
}

/* Python's float repr: the shortest digits that read back; fixed notation for decimal exponents
 * -4..15 (where %g would switch to an exponent as soon as it runs out of digits), an exponent
 * otherwise; ".0" on integral values. */
static void json_real_out(st_sbuf *b, double v) {
    char s[400];
    if (isnan(v)) { st_sb_str(b, "NaN"); return; }
    if (isinf(v)) { st_sb_str(b, v > 0 ? "Infinity" : "-Infinity"); return; }
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(s, sizeof s, "%.*e", prec - 1, v);
        if (strtod(s, NULL) == v) break;
    }
    int x = atoi(strchr(s, 'e') + 1);
    if (x >= -4 && x < 16) {
        int decimals = prec - 1 - x;
        snprintf(s, sizeof s, "%.*f", decimals > 0 ? decimals : 0, v);
    }
    st_sb_str(b, s);
    if (!strpbrk(s, ".eEn")) st_sb_str(b, ".0");
}

void st_chat_json_out(st_sbuf *b, const json_t *v, int compact) {
    const char *comma = compact ? "," : ", ", *colon = compact ? ":" : ": ";
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        st_sb_add(b, "{", 1);
        const char *key;
        json_t *val;
        int first = 1;
        json_object_foreach((json_t *)v, key, val) {
            if (!first) st_sb_str(b, comma);
            first = 0;
            json_string_out(b, key, strlen(key));
            st_sb_str(b, colon);
            st_chat_json_out(b, val, compact);
        }
        st_sb_add(b, "}", 1);
        break;
    }
    case JSON_ARRAY: {
        st_sb_add(b, "[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) st_sb_str(b, comma);
            st_chat_json_out(b, json_array_get(v, i), compact);
        }
        st_sb_add(b, "]", 1);
        break;
    }
    case JSON_STRING: json_string_out(b, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER: {
        char s[32];
        snprintf(s, sizeof s, "%lld", (long long)json_integer_value(v));
        st_sb_str(b, s);
        break;
    }
    case JSON_REAL: json_real_out(b, json_real_value(v)); break;
    case JSON_TRUE: st_sb_str(b, "true"); break;
    case JSON_FALSE: st_sb_str(b, "false"); break;
    case JSON_NULL: st_sb_str(b, "null"); break;
    }
}

json_t *st_chat_parse_json(const char *text) {
    return json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
}

st_status st_chat_tojson(const char *json_text, char **out) {
    *out = NULL;
    json_t *v = st_chat_parse_json(json_text);
    if (!v) return st_fail(ST_ERR_INVALID, "chat: not JSON: %.60s", json_text);
    st_sbuf b = {0};
    st_chat_json_out(&b, v, 0);
    json_decref(v);
    if (b.oom || !b.p) { free(b.p); return st_fail(ST_ERR_NOMEM, "chat: out of memory"); }
    *out = b.p;
    return ST_OK;
}

