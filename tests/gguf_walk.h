/* gguf_walk.h: reads a GGUF value through the whole accessor API, recursively (every scalar
 * conversion, every array element, every string byte, every nested array), so that a pointer the
 * reader handed out past its bounds trips AddressSanitizer. Shared by the hostile-input test and
 * the fuzzer. Returns 0 when an accessor breaks its own contract (an index past an array's end
 * that is not refused with ST_ERR_RANGE). */
#ifndef ST_TESTS_GGUF_WALK_H
#define ST_TESTS_GGUF_WALK_H

#include <stdint.h>

#include "gguf/gguf.h"

static volatile uint64_t gguf_walk_sink;

static int gguf_walk_value(const st_gguf_value *v) {
    int64_t i;
    uint64_t u;
    double d;
    int b, ok = 1;
    const char *s;
    size_t len;
    if (st_gguf_value_type(v) != ST_GGUF_ARRAY) {
        if (st_gguf_value_uint(v, &u) == ST_OK) gguf_walk_sink += u;
        if (st_gguf_value_int(v, &i) == ST_OK) gguf_walk_sink += (uint64_t)i;
        if (st_gguf_value_float(v, &d) == ST_OK) gguf_walk_sink += (uint64_t)(d == d);
        if (st_gguf_value_bool(v, &b) == ST_OK) gguf_walk_sink += (uint64_t)b;
        if (st_gguf_value_str(v, &s, &len) == ST_OK)
            for (size_t k = 0; k < len; k++) gguf_walk_sink += (unsigned char)s[k];
        return 1;
    }
    uint64_t n = st_gguf_array_len(v);
    const unsigned char *raw = st_gguf_array_data(v);
    for (uint64_t k = 0; k < n; k++) {
        if (st_gguf_array_uint(v, k, &u) == ST_OK) gguf_walk_sink += u;
        if (st_gguf_array_int(v, k, &i) == ST_OK) gguf_walk_sink += (uint64_t)i;
        if (st_gguf_array_float(v, k, &d) == ST_OK) gguf_walk_sink += (uint64_t)(d == d);
        if (st_gguf_array_str(v, k, &s, &len) == ST_OK)
            for (size_t c = 0; c < len; c++) gguf_walk_sink += (unsigned char)s[c];
        const st_gguf_value *inner = st_gguf_array_at(v, k);
        if (inner && !gguf_walk_value(inner)) ok = 0;
        if (raw) gguf_walk_sink += raw[k];
    }
    if (st_gguf_array_int(v, n, &i) != ST_ERR_RANGE && st_gguf_array_type(v) != ST_GGUF_VTYPE_COUNT) ok = 0;
    return ok;
}

#endif
