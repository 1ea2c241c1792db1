/* Runtime CPU dispatch. Compiled with the baseline flags of the target only (no -mavx2): this file must
 * run on every CPU the binary may meet, and decides which ISA-specific files may be entered.
 *
 * x86-64: AVX2 kernels need AVX2 (CPUID.7.0:EBX[5]), F16C (CPUID.1:ECX[29]), FMA (CPUID.1:ECX[12]) and
 * an OS that saves YMM state: OSXSAVE (CPUID.1:ECX[27]) and XCR0 bits 1 and 2 (XGETBV). aarch64:
 * Advanced SIMD is reported by HWCAP_ASIMD. QG_FORCE_ISA=scalar|avx2|neon narrows the choice so one
 * test binary can exercise every path.
 */
#include "qgold/cpu_features.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
static unsigned detect(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int osxsave = (c >> 27) & 1, f16c = (c >> 29) & 1, fma = (c >> 12) & 1, avx = (c >> 28) & 1;
    if (!(osxsave && avx && f16c && fma)) return 0;
    unsigned xlo, xhi;
    __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    if ((xlo & 6u) != 6u) return 0; /* XMM and YMM state enabled by the OS */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return ((b >> 5) & 1) ? QG_CPU_AVX2 : 0;
}
#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
static unsigned detect(void) { return (getauxval(AT_HWCAP) & HWCAP_ASIMD) ? QG_CPU_NEON : 0; }
#else
static unsigned detect(void) { return 0; }
#endif

unsigned qg_cpu_features(void)
{
    static int done;
    static unsigned feats;
    if (!done) { /* benign race: every thread computes the same value */
        feats = detect();
        done = 1;
    }
    return feats;
}

const char *qg_forced_isa(void)
{
    const char *v = getenv("QG_FORCE_ISA");
    if (v == NULL || v[0] == '\0') return "";
    if (strcmp(v, "scalar") == 0 || strcmp(v, "avx2") == 0 || strcmp(v, "neon") == 0) return v;
    return "invalid";
}

const char *qg_forced_isa_error(char *buf, size_t len)
{
    if (strcmp(qg_forced_isa(), "invalid") != 0) return NULL;
    if (buf == NULL || len == 0) return "QG_FORCE_ISA is not one of scalar, avx2, neon";
    snprintf(buf, len, "QG_FORCE_ISA='%.40s' is not one of scalar, avx2, neon", getenv("QG_FORCE_ISA"));
    return buf;
}
