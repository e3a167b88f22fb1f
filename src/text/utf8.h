/* utf8.h: UTF-8 decoding and encoding for the text layer.
 *
 * Decoding is strict (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF). An
 * invalid byte is reported as such, with the length of the "maximal subpart" (the WHATWG rule),
 * so callers that replace bad input with U+FFFD replace each maximal subpart once. */
#ifndef ST_TEXT_UTF8_H
#define ST_TEXT_UTF8_H

#include <stddef.h>
#include <stdint.h>

#define ST_UTF8_REPLACEMENT 0xFFFDu

/* Decodes one code point from s[0..n). Returns the bytes consumed (1..4) and sets *cp; on an
 * invalid or truncated sequence returns the length of its maximal subpart (>= 1) and sets
 * *cp = UINT32_MAX. n must be >= 1. */
size_t st_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);
/* Writes cp (<= 0x10FFFF, not a surrogate) as UTF-8 into out[4]; returns its length (1..4), or 0
 * for a value that is not a scalar value. */
size_t st_utf8_encode(uint32_t cp, uint8_t out[4]);
/* Length of the sequence announced by a lead byte (1..4), or 0 if b cannot start one. */
size_t st_utf8_seq_len(uint8_t b);
/* 1 if s[0..n) is entirely valid UTF-8. */
int st_utf8_valid(const uint8_t *s, size_t n);
/* How many bytes at the end of s[0..n) form a proper prefix of a valid sequence that more bytes
 * could complete (0..3). Used by streaming decoders to hold back a split character. */
size_t st_utf8_incomplete_tail(const uint8_t *s, size_t n);

#endif
