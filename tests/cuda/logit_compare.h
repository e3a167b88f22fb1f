/* logit_compare.h: what the GPU tests (model_check.c, state_check.c) share: loading a model on a
 * given device straight from the mapping, and comparing two rows of logits within the noise of
 * different 8-bit activation grids (KL and a top-1 that counts near ties as agreement). */
#ifndef ST_TESTS_CUDA_LOGIT_COMPARE_H
#define ST_TESTS_CUDA_LOGIT_COMPARE_H

#include <math.h>
#include <stdint.h>

#include "strata.h"

/* Two reference logits this close are a tie that rounding may break either way. */
#define LC_TIE 0.1

static inline st_status lc_load(const char *path, int device, st_model **m) {
    st_model_params p = st_model_default_params();
    p.progress = 0;
    p.prefault = 0;
    p.copy_weights = 0;
    p.device = device;
    return st_model_load(path, &p, m);
}

static inline int64_t lc_argmax(const float *x, int64_t n) {
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* KL(softmax(ref) || softmax(got)) over n logits. */
static inline double lc_kl(const float *ref, const float *got, int64_t n) {
    double mr = -INFINITY, mg = -INFINITY, zr = 0, zg = 0, kl = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ref[i] > mr) mr = ref[i];
        if (got[i] > mg) mg = got[i];
    }
    for (int64_t i = 0; i < n; i++) {
        zr += exp(ref[i] - mr);
        zg += exp(got[i] - mg);
    }
    for (int64_t i = 0; i < n; i++) {
        double lp = ref[i] - mr - log(zr), lq = got[i] - mg - log(zg);
        kl += exp(lp) * (lp - lq);
    }
    return kl;
}

/* 1 when got's argmax is ref's, or ref's two candidates are within LC_TIE; *exact = argmaxes equal. */
static inline int lc_top1(const float *ref, const float *got, int64_t n, int *exact) {
    int64_t a = lc_argmax(ref, n), b = lc_argmax(got, n);
    *exact = a == b;
    return a == b || ref[a] - ref[b] <= LC_TIE;
}

#endif
