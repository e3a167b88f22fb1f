/* cpu.c: CPUID and XGETBV feature detection, the AMX permission request, and the caps that tests
 * and benchmarks put on it (STRATA_CPU_LEVEL, STRATA_CPU_OFF, st_cpu_limit). */
#include "base/cpu.h"

#include <cpuid.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static st_cpu_features cpu_detected, cpu_effective;
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

static unsigned long long xgetbv0(void) {
    unsigned eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}

/* The flags by the names st_cpu_describe prints (and STRATA_CPU_OFF takes). */
static const struct { const char *name; size_t off; } feature_names[] = {
    {"avx2", offsetof(st_cpu_features, avx2)},         {"fma", offsetof(st_cpu_features, fma)},
    {"f16c", offsetof(st_cpu_features, f16c)},         {"avx512f", offsetof(st_cpu_features, avx512f)},
    {"avx512bw", offsetof(st_cpu_features, avx512bw)}, {"avx512vl", offsetof(st_cpu_features, avx512vl)},
    {"avx512dq", offsetof(st_cpu_features, avx512dq)}, {"avx512vnni", offsetof(st_cpu_features, avx512vnni)},
    {"avx512bf16", offsetof(st_cpu_features, avx512bf16)}, {"avxvnni", offsetof(st_cpu_features, avx_vnni)},
    {"amx-tile", offsetof(st_cpu_features, amx_tile)}, {"amx-int8", offsetof(st_cpu_features, amx_int8)},
    {"amx-bf16", offsetof(st_cpu_features, amx_bf16)},
};
#define N_FEATURES (sizeof feature_names / sizeof feature_names[0])
static int *flag_of(st_cpu_features *f, size_t i) { return (int *)((char *)f + feature_names[i].off); }

static void apply_level(st_cpu_features *f, int level) {
    if (level < 3) f->amx_tile = f->amx_int8 = f->amx_bf16 = 0;
    if (level < 2) f->avx512f = f->avx512bw = f->avx512vl = f->avx512dq = f->avx512vnni = f->avx512bf16 = 0;
    if (level < 1) f->avx2 = f->fma = f->f16c = f->avx_vnni = 0;
}

/* STRATA_CPU_OFF="avxvnni,f16c": the named flags off too (an AVX2 CPU without AVX-VNNI, say). */
static void apply_off(st_cpu_features *f) {
    const char *e = getenv("STRATA_CPU_OFF");
    if (!e) return;
    for (size_t i = 0; i < N_FEATURES; i++) {
        size_t n = strlen(feature_names[i].name);
        for (const char *p = e; (p = strstr(p, feature_names[i].name)) != NULL; p += n)
            if ((p == e || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) *flag_of(f, i) = 0;
    }
}

static void cpu_detect(void) {
    st_cpu_features f;
    memset(&f, 0, sizeof f);
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        int osxsave = (c >> 27) & 1;
        unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
        int ymm = (xcr0 & 6) == 6, zmm = (xcr0 & 0xe6) == 0xe6;
        f.fma = ymm && ((c >> 12) & 1);
        f.f16c = ymm && ((c >> 29) & 1);
        if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
            f.avx2 = ymm && ((b >> 5) & 1);
            f.avx512f = zmm && ((b >> 16) & 1);
            f.avx512dq = zmm && ((b >> 17) & 1);
            f.avx512bw = zmm && ((b >> 30) & 1);
            f.avx512vl = zmm && ((b >> 31) & 1);
            f.avx512vnni = zmm && ((c >> 11) & 1);
            int amx_bf16 = (d >> 22) & 1, amx_tile = (d >> 24) & 1, amx_int8 = (d >> 25) & 1;
            if (amx_tile && syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0) {
                f.amx_tile = 1;
                f.amx_int8 = amx_int8;
                f.amx_bf16 = amx_bf16;
            }
        }
        if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
            f.avx_vnni = ymm && ((a >> 4) & 1);
            f.avx512bf16 = zmm && ((a >> 5) & 1);
        }
    }
    cpu_detected = f;
    cpu_effective = f;
    const char *lvl = getenv("STRATA_CPU_LEVEL");
    if (lvl && *lvl) apply_level(&cpu_effective, atoi(lvl));
    apply_off(&cpu_effective);
}

const st_cpu_features *st_cpu(void) {
    pthread_once(&cpu_once, cpu_detect);
    return &cpu_effective;
}

void st_cpu_limit(int level) {
    pthread_once(&cpu_once, cpu_detect);
    cpu_effective = cpu_detected;
    apply_level(&cpu_effective, level);
    apply_off(&cpu_effective);
}

void st_cpu_describe(char *buf, int size) {
    st_cpu_features f = *st_cpu();
    int n = 0;
    buf[0] = 0;
    for (size_t i = 0; i < N_FEATURES && n < size; i++)
        if (*flag_of(&f, i)) n += snprintf(buf + n, (size_t)(size - n), "%s%s", n ? " " : "", feature_names[i].name);
    if (n == 0) snprintf(buf, (size_t)size, "scalar");
}
