/* CPU features of this machine and the QG_FORCE_ISA override, as the registry's backend choice sees them. */
#ifndef QGOLD_CPU_FEATURES_H
#define QGOLD_CPU_FEATURES_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CPU feature bits detected once (CPUID + XGETBV on x86-64, HWCAP on aarch64). */
enum { QG_CPU_AVX2 = 1u << 0, QG_CPU_NEON = 1u << 1 };
unsigned qg_cpu_features(void);
/* QG_FORCE_ISA as parsed: "" when unset; "scalar", "avx2" or "neon"; "invalid" otherwise. */
const char *qg_forced_isa(void);
/* The one message for an invalid QG_FORCE_ISA ("QG_FORCE_ISA='sse9' is not one of scalar, avx2, neon"),
 * written to buf; returns buf (a fixed text when buf is NULL), or NULL when the variable is unset or valid. */
const char *qg_forced_isa_error(char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
