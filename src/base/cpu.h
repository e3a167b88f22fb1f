/* cpu.h: the instruction sets this processor offers, detected once at run time. Kernels pick
 * their variant from these flags; nothing is assumed from the build machine. */
#ifndef ST_BASE_CPU_H
#define ST_BASE_CPU_H

typedef struct st_cpu_features {
    int avx2, fma, f16c;
    int avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16;
    int avx_vnni;
    int amx_tile, amx_int8, amx_bf16; /* usable: the CPU has it and the kernel granted it */
} st_cpu_features;

/* Detected on first call (thread-safe); asks the kernel for AMX tile state once. */
const st_cpu_features *st_cpu(void);
/* "avx2 fma avx512f ..." for logs and `strata info`. */
void st_cpu_describe(char *buf, int size);
/* For tests and benchmarks: pretend the CPU lacks everything above `level`
 * (0 = scalar, 1 = AVX2, 2 = AVX-512, 3 = everything). Environment STRATA_CPU_LEVEL does the same;
 * STRATA_CPU_OFF, a comma-separated list of st_cpu_describe's names ("avxvnni"), turns those
 * flags off as well, at every level. */
void st_cpu_limit(int level);

#endif
