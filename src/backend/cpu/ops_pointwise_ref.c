/* ops_pointwise_ref.c: the reference of every elementwise activation and gate (MODELS.md §2.4),
 * ggml's scalar formulas: silu(x) = x/(1+expf(-x)), sigmoid(x) = 1/(1+expf(-x)),
 * softplus(x) = x > 20 ? x : logf(1+expf(x)). ops_pointwise.c runs it where no vector kernel
 * serves, and the vector kernels (ops_pointwise_avx2.c, _avx512.c) for their row tails; the tests
 * hold the vector kernels against it. */
#include <math.h>

#include "backend/cpu/ops_cpu.h"

static inline float silu_ref(float x) { return x / (1.0f + expf(-x)); }
static inline float sigmoid_ref(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline float softplus_ref(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }

void ops_pw_ref(int op, const float *a, const float *b, float *y, int64_t n) {
    switch (op) {
    case OPS_PW_SILU:     for (int64_t i = 0; i < n; i++) y[i] = silu_ref(a[i]); break;
    case OPS_PW_SIGMOID:  for (int64_t i = 0; i < n; i++) y[i] = sigmoid_ref(a[i]); break;
    case OPS_PW_SOFTPLUS: for (int64_t i = 0; i < n; i++) y[i] = softplus_ref(a[i]); break;
    case OPS_PW_SWIGLU:   for (int64_t i = 0; i < n; i++) y[i] = silu_ref(a[i]) * b[i]; break;
    case OPS_PW_MUL_SIGMOID: for (int64_t i = 0; i < n; i++) y[i] = a[i] * sigmoid_ref(b[i]); break;
    case OPS_PW_MUL_SILU: for (int64_t i = 0; i < n; i++) y[i] = a[i] * silu_ref(b[i]); break;
    case OPS_PW_MUL:      for (int64_t i = 0; i < n; i++) y[i] = a[i] * b[i]; break;
    case OPS_PW_ADD:      for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i]; break;
    default: break;
    }
}
