/* cpu.c: CPUID and XGETBV feature detection, and the AMX permission request. */
#include "base/cpu.h"

#include <cpuid.h>
#include <pthread.h>
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

static void apply_level(st_cpu_features *f, int level) {
    if (level < 3) f->amx_tile = f->amx_int8 = f->amx_bf16 = 0;
    if (level < 2) f->avx512f = f->avx512bw = f->avx512vl = f->avx512dq = f->avx512vnni = f->avx512bf16 = 0;
    if (level < 1) f->avx2 = f->fma = f->f16c = f->avx_vnni = 0;
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
}

const st_cpu_features *st_cpu(void) {
    pthread_once(&cpu_once, cpu_detect);
    return &cpu_effective;
}

void st_cpu_limit(int level) {
    pthread_once(&cpu_once, cpu_detect);
    cpu_effective = cpu_detected;
    apply_level(&cpu_effective, level);
}

void st_cpu_describe(char *buf, int size) {
    const st_cpu_features *f = st_cpu();
    struct { int on; const char *name; } list[] = {
        {f->avx2, "avx2"}, {f->fma, "fma"}, {f->f16c, "f16c"}, {f->avx512f, "avx512f"},
        {f->avx512bw, "avx512bw"}, {f->avx512vl, "avx512vl"}, {f->avx512dq, "avx512dq"},
        {f->avx512vnni, "avx512vnni"}, {f->avx512bf16, "avx512bf16"}, {f->avx_vnni, "avxvnni"},
        {f->amx_tile, "amx-tile"}, {f->amx_int8, "amx-int8"}, {f->amx_bf16, "amx-bf16"},
    };
    int n = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof list / sizeof list[0] && n < size; i++)
        if (list[i].on) n += snprintf(buf + n, (size_t)(size - n), "%s%s", n ? " " : "", list[i].name);
    if (n == 0) snprintf(buf, (size_t)size, "scalar");
}
