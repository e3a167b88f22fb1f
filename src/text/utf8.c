/* utf8.c: strict UTF-8 decoding with maximal-subpart error lengths (see utf8.h). */
#include "text/utf8.h"

size_t st_utf8_seq_len(uint8_t b) {
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 0;
}

/* The valid range of the second byte depends on the lead (Unicode Table 3-7); later bytes are
 * always 80..BF. */
static int second_ok(uint8_t lead, uint8_t b) {
    switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default:   return b >= 0x80 && b <= 0xBF;
    }
}

size_t st_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t b0 = s[0];
    size_t len = st_utf8_seq_len(b0);
    if (len == 1) { *cp = b0; return 1; }
    *cp = UINT32_MAX;
    if (len == 0) return 1;
    if (n < 2 || !second_ok(b0, s[1])) return 1;
    for (size_t i = 2; i < len; i++)
        if (i >= n || (s[i] & 0xC0) != 0x80) return i;
    uint32_t v = b0 & (0xFF >> (len + 1));
    for (size_t i = 1; i < len; i++) v = (v << 6) | (s[i] & 0x3F);
    *cp = v;
    return len;
}

size_t st_utf8_encode(uint32_t cp, uint8_t out[4]) {
    if (cp < 0x80) { out[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp <= 0x10FFFF) {
        out[0] = (uint8_t)(0xF0 | (cp >> 18));
        out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (uint8_t)(0x80 | (cp & 0x3F));
        return 4;
    }
    return 0;
}

int st_utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) { i++; continue; }
        uint32_t cp;
        size_t k = st_utf8_decode(s + i, n - i, &cp);
        if (cp == UINT32_MAX) return 0;
        i += k;
    }
    return 1;
}

size_t st_utf8_incomplete_tail(const uint8_t *s, size_t n) {
    /* A split character has its lead within the last 3 bytes; it is incomplete when it announces
     * more bytes than remain and every byte present is valid so far. */
    size_t back = n < 3 ? n : 3;
    for (size_t k = 1; k <= back; k++) {
        uint8_t b = s[n - k];
        if ((b & 0xC0) == 0x80) continue;
        size_t len = st_utf8_seq_len(b);
        if (len <= k) return 0;
        if (k >= 2 && !second_ok(b, s[n - k + 1])) return 0;
        for (size_t i = 2; i < k; i++)
            if ((s[n - k + i] & 0xC0) != 0x80) return 0;
        return k;
    }
    return 0;
}
