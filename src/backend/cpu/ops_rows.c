/* ops_rows.c: token embedding rows. A row of the (usually quantized) token_embd table is
 * dequantized with the reference st_dequantize_row: a handful of rows per chunk, so no fast path
 * is needed. Kept apart from the other ops so that only users of it link the quant library. */
#include "backend/backend.h"
#include "quant/quant.h"

int st_op_get_rows(uint32_t type, const void *table, int64_t n_rows, int64_t n_embd,
                   const int32_t *ids, int64_t n_tok, float *out, int64_t ld_out) {
    const st_type_info *ti = st_type_get(type);
    if (!ti || !ti->computable || n_embd % ti->block_size) return 0;
    const size_t row_bytes = st_row_size(ti, n_embd);
    for (int64_t t = 0; t < n_tok; t++) {
        if (ids[t] < 0 || ids[t] >= n_rows) return 0;
        const char *row = (const char *)table + (size_t)ids[t] * row_bytes;
        if (!st_dequantize_row(type, row, out + t * ld_out, n_embd)) return 0;
    }
    return 1;
}
