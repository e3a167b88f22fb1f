/* test_json_regex.c: JSON Schema patterns compiled to DFAs (engine/json_regex.h).
 *   - matching against PCRE2 (an independent engine, set to read the subset as ECMA-262 does:
 *     '.' stops at \r and \n, '$' only at the very end) on every string of a small alphabet of
 *     one- to four-byte characters up to a length, for patterns using each construct: literals,
 *     classes, negation, ranges across UTF-8 lengths, '.', \d \w \s, anchors anywhere, groups,
 *     alternation, every quantifier, and the search an unanchored pattern is;
 *   - the length bounds folded in: a string matches iff PCRE2 matches it and its length in
 *     characters is within minLength..maxLength;
 *   - escapes of the pattern (\uHHHH and a surrogate pair, \xHH, \cX, identity escapes);
 *   - every state of a DFA can still reach an accepting one (so a constraint never enters a
 *     string it cannot finish), and what no string matches is refused;
 *   - what the subset leaves out is refused with a message naming it. */
#include <stdlib.h>
#include <string.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include "test.h"
#include "engine/json_regex.h"

/* The alphabet: ASCII letters and digits, a space, a newline, a CR, a 2-, 3- and 4-byte one. */
static const char *const alpha[] = {"a", "b", "Z", "0", "7", " ", "\n", "\r", "_", "-", "\xC3\xA9", "\xE6\x97\xA5", "\xF0\x9F\x98\x80"};
enum { N_ALPHA = sizeof alpha / sizeof *alpha };

static pcre2_code *oracle(const char *pcre_pattern) {
    int err;
    PCRE2_SIZE off;
    pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
    pcre2_set_newline(cc, PCRE2_NEWLINE_ANYCRLF);
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pcre_pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_DOLLAR_ENDONLY, &err, &off, cc);
    pcre2_compile_context_free(cc);
    return re;
}

static int oracle_match(pcre2_code *re, const char *s, size_t n) {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int r = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    return r >= 0;
}

/* Every string of up to max_chars characters of the alphabet: the DFA against PCRE2. */
static void agree(const char *pattern, const char *pcre_pattern, uint32_t lo, uint32_t hi, int max_chars) {
    st_json_regex re;
    char err[256];
    if (st_json_regex_compile(pattern, strlen(pattern), lo, hi, &re, err, sizeof err)) {
        CHECKF(0, "%s: refused: %s", pattern, err);
        return;
    }
    pcre2_code *o = oracle(pcre_pattern ? pcre_pattern : pattern);
    CHECKF(o != NULL, "pcre2 refused %s", pcre_pattern ? pcre_pattern : pattern);
    if (!o) { st_json_regex_free(&re); return; }
    int idx[8] = {0}, bad = 0;
    long total = 0;
    for (int len = 0; len <= max_chars && !bad; len++) {
        memset(idx, 0, sizeof idx);
        for (;;) {
            char s[64];
            size_t n = 0;
            for (int i = 0; i < len; i++) { size_t k = strlen(alpha[idx[i]]); memcpy(s + n, alpha[idx[i]], k); n += k; }
            int want = oracle_match(o, s, n) && (uint32_t)len >= lo && (uint32_t)len <= hi;
            int got = st_json_regex_matches(&re, s, n);
            if (want != got) {
                char shown[256] = "";
                for (size_t k = 0, w = 0; k < n && w + 6 < sizeof shown; k++)
                    w += (size_t)snprintf(shown + w, sizeof shown - w, (unsigned char)s[k] < 0x20 || (unsigned char)s[k] > 0x7E ? "\\x%02x" : "%c", (unsigned char)s[k]);
                CHECKF(0, "/%s/ {%u,%u} on \"%s\": pcre2 %d, dfa %d", pattern, lo, hi, shown, want, got);
                bad = 1;
                break;
            }
            total++;
            int i = 0;
            while (i < len && ++idx[i] == N_ALPHA) idx[i++] = 0;
            if (i == len) break;
        }
    }
    if (!bad) CHECK(total > 0);
    pcre2_code_free(o);
    st_json_regex_free(&re);
}

/* From every state an accepting one is reachable. */
static void all_live(const char *pattern, uint32_t lo, uint32_t hi) {
    st_json_regex re;
    char err[256];
    CHECKF(!st_json_regex_compile(pattern, strlen(pattern), lo, hi, &re, err, sizeof err), "%s: %s", pattern, err);
    uint32_t n = re.n_states;
    uint8_t *live = calloc(n ? n : 1, 1);
    for (uint32_t q = 0; q < n; q++) live[q] = re.accept[q];
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t q = 0; q < n; q++) {
            if (live[q]) continue;
            for (unsigned b = 0; b < 256 && !live[q]; b++) {
                uint16_t t = st_json_regex_step(&re, (uint16_t)q, b);
                if (t != ST_JSON_RE_DEAD && live[t]) { live[q] = 1; changed = 1; }
            }
        }
    }
    int ok = 1;
    for (uint32_t q = 0; q < n; q++) ok &= live[q];
    CHECKF(ok && n > 0, "/%s/: a state that cannot reach an accepting one", pattern);
    free(live);
    st_json_regex_free(&re);
}

static void refused(const char *pattern, uint32_t lo, uint32_t hi, const char *says) {
    st_json_regex re;
    char err[256] = "";
    int r = st_json_regex_compile(pattern, strlen(pattern), lo, hi, &re, err, sizeof err);
    CHECKF(r == -1 && strstr(err, says), "/%s/: %d '%s' (want '%s')", pattern, r, err, says);
    if (!r) st_json_regex_free(&re);
}

static int matches(const char *pattern, const char *s) {
    st_json_regex re;
    char err[256];
    if (st_json_regex_compile(pattern, strlen(pattern), 0, UINT32_MAX, &re, err, sizeof err)) return -1;
    int m = st_json_regex_matches(&re, s, strlen(s));
    st_json_regex_free(&re);
    return m;
}

int main(void) {
    const uint32_t none = UINT32_MAX;
    /* constructs, against PCRE2 (second pattern: PCRE2's spelling where it differs) */
    agree("ab", NULL, 0, none, 4);
    agree("^ab$", NULL, 0, none, 4);
    agree("^a|b$", NULL, 0, none, 4);
    agree("(^a|b)7", NULL, 0, none, 4);
    agree("^[a-z0-9_]+$", NULL, 0, none, 4);
    agree("^[^a\\n]*$", NULL, 0, none, 3);
    agree("[\xC3\xA0-\xE6\x97\xA5]", NULL, 0, none, 3);
    agree("^[\\x00-\\x7f]{2}$", "^[\\x{0}-\\x{7f}]{2}$", 0, none, 3);
    agree("^.$", NULL, 0, none, 3);
    agree("a.b", NULL, 0, none, 4);
    agree("^\\d{1,2}-\\w?$", NULL, 0, none, 4);
    agree("^\\D\\W\\S$", "^[^0-9][^0-9A-Za-z_][^\\t-\\r \\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}\\x{feff}]$", 0, none, 3);
    agree("^\\s", "^[\\t-\\r \\x{a0}]", 0, none, 2);
    agree("^(ab|a)*$", NULL, 0, none, 4);
    agree("^(?:a|b){2,3}$", NULL, 0, none, 4);
    agree("^a{2,}$", NULL, 0, none, 4);
    agree("^(?<x>a)b+?$", NULL, 0, none, 4);
    agree("^$", NULL, 0, none, 2);
    agree("", NULL, 0, none, 2);
    agree("a$|^b", NULL, 0, none, 4);
    agree("^(a|)$", NULL, 0, none, 3);
    agree("\xF0\x9F\x98\x80|\xE6\x97\xA5", NULL, 0, none, 3);
    agree("^[a-]$", NULL, 0, none, 2);
    agree("^[\\d-z]$", "^[0-9\\-z]$", 0, none, 2);
    agree("a{,2}", "a\\{,2\\}", 0, none, 3); /* not a quantifier: the text itself */
    /* the length bounds, folded in */
    agree("^[ab]*$", NULL, 2, 3, 4);
    agree("a", NULL, 2, none, 4);
    agree("\xE6\x97\xA5", NULL, 0, 2, 4);
    agree("^(ab)+$", NULL, 3, 4, 5);
    /* the pattern's escapes */
    CHECK(matches("^\\u00e9\\x41\\cJ\\.\\/\\-$", "\xC3\xA9" "A\n./-") == 1);
    CHECK(matches("^\\ud83d\\ude00$", "\xF0\x9F\x98\x80") == 1);
    CHECK(matches("^\\u$", "u") == 1);
    CHECK(matches("^[\\b]$", "\b") == 1);
    CHECK(matches("^\\0$", "") == 0);
    CHECK(matches("^[^]$", "\n") == 1 && matches("^[]$", "") == -1);
    /* every state can reach an accepting one */
    all_live("^[a-z]{3}[0-9]+$", 0, none);
    all_live("(ab|cd)*e$", 0, 9);
    all_live("^a*$", 4, 6);
    all_live("x", 3, none);
    /* what nothing matches, what is too large, and what is outside the subset */
    refused("^a{3}$", 0, 2, "no string can match it");
    refused("[]", 0, none, "no string can match it");
    refused("a(?=b)", 0, none, "lookahead '(?='");
    refused("a(?!b)", 0, none, "lookahead '(?!'");
    refused("(?<=a)b", 0, none, "lookbehind '(?<='");
    refused("(a)\\1", 0, none, "backreference '\\1'");
    refused("\\bword", 0, none, "word boundary '\\b'");
    refused("\\p{L}", 0, none, "property escape");
    refused("\\u{41}", 0, none, "u flag");
    refused("(ab", 0, none, "'(' without its ')'");
    refused("ab)", 0, none, "')' without its '('");
    refused("[ab", 0, none, "'[' without its ']'");
    refused("*a", 0, none, "nothing to repeat");
    refused("a**", 0, none, "nothing to repeat");
    refused("^*", 0, none, "anchor");
    refused("[z-a]", 0, none, "out of order");
    refused("a{3,2}", 0, none, "out of order");
    refused("a{1001}", 0, none, "above 1000");
    refused("a\\", 0, none, "lone '\\'");
    refused("(?i)a", 0, none, "'(?i'");
    refused("a[ab]{20}", 0, none, "too large");
    refused("a.{40}", 0, none, "too large");
    return test_report("test_json_regex");
}
