/* test_utf8.c: strict UTF-8 decoding (maximal subparts), encoding, and the incomplete-tail rule
 * the streaming detokenizer relies on. */
#include <string.h>
#include "test.h"
#include "text/utf8.h"

static size_t dec(const char *s, size_t n, uint32_t *cp) { return st_utf8_decode((const uint8_t *)s, n, cp); }

int main(void) {
    uint32_t cp;
    CHECK(dec("A", 1, &cp) == 1 && cp == 'A');
    CHECK(dec("\xC3\xA9", 2, &cp) == 2 && cp == 0xE9);
    CHECK(dec("\xE4\xB8\xAD", 3, &cp) == 3 && cp == 0x4E2D);
    CHECK(dec("\xF0\x9F\x98\x80", 4, &cp) == 4 && cp == 0x1F600);
    /* invalid: lone continuation, bad lead, overlong, surrogate, above U+10FFFF, truncation */
    CHECK(dec("\x80", 1, &cp) == 1 && cp == UINT32_MAX);
    CHECK(dec("\xFF", 1, &cp) == 1 && cp == UINT32_MAX);
    CHECK(dec("\xC0\x80", 2, &cp) == 1 && cp == UINT32_MAX);
    CHECK(dec("\xE0\x80\x80", 3, &cp) == 1 && cp == UINT32_MAX);
    CHECK(dec("\xED\xA0\x80", 3, &cp) == 1 && cp == UINT32_MAX);
    CHECK(dec("\xF4\x90\x80\x80", 4, &cp) == 1 && cp == UINT32_MAX);
    CHECK(dec("\xE4\xB8" "a", 3, &cp) == 2 && cp == UINT32_MAX);   /* maximal subpart E4 B8 */
    CHECK(dec("\xF0\x9F\x98", 3, &cp) == 3 && cp == UINT32_MAX);
    CHECK(dec("\xE4", 1, &cp) == 1 && cp == UINT32_MAX);

    uint8_t b[4];
    CHECK(st_utf8_encode(0x41, b) == 1 && b[0] == 0x41);
    CHECK(st_utf8_encode(0x120, b) == 2 && memcmp(b, "\xC4\xA0", 2) == 0);
    CHECK(st_utf8_encode(0xFFFD, b) == 3 && memcmp(b, "\xEF\xBF\xBD", 3) == 0);
    CHECK(st_utf8_encode(0x10FFFF, b) == 4);
    CHECK(st_utf8_encode(0xD800, b) == 0);
    CHECK(st_utf8_encode(0x110000, b) == 0);
    /* every scalar value round-trips */
    int bad = 0;
    for (uint32_t c = 0; c <= 0x10FFFF; c++) {
        size_t k = st_utf8_encode(c, b);
        if (c >= 0xD800 && c <= 0xDFFF) { bad += k != 0; continue; }
        uint32_t back;
        bad += k == 0 || st_utf8_decode(b, k, &back) != k || back != c;
    }
    CHECK(bad == 0);

    CHECK(st_utf8_valid((const uint8_t *)"h\xC3\xA9llo", 6));
    CHECK(!st_utf8_valid((const uint8_t *)"h\xC3", 2));
    CHECK(st_utf8_incomplete_tail((const uint8_t *)"ab\xF0\x9F\x98", 5) == 3);
    CHECK(st_utf8_incomplete_tail((const uint8_t *)"ab\xF0\x9F", 4) == 2);
    CHECK(st_utf8_incomplete_tail((const uint8_t *)"ab\xF0", 3) == 1);
    CHECK(st_utf8_incomplete_tail((const uint8_t *)"ab\xF0\x9F\x98\x80", 6) == 0); /* complete */
    CHECK(st_utf8_incomplete_tail((const uint8_t *)"ab\xE0\x80", 4) == 0);         /* never valid */
    CHECK(st_utf8_incomplete_tail((const uint8_t *)"ab\x80", 3) == 0);
    CHECK(st_utf8_incomplete_tail((const uint8_t *)"", 0) == 0);
    return test_report("test_utf8");
}
