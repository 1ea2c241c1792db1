/* full.fp16: all 2^32 float32 bit patterns through the reference and the dispatched SIMD kernel, for
 * float32 -> fp16 and float32 -> bf16, compared bit for bit (NaNs: same sign). Label `full`: it takes
 * tens of seconds natively and is left out of sanitizer and emulated runs. */
#include "compare.h"
#include "qg_test.h"
#include "qgold/errors.h"
#include "qgold/registry.h"

#include <stdlib.h>
#include <string.h>

int main(void)
{
    const char *paths[2] = {"f32_to_f16", "f32_to_bf16"};
    enum { CHUNK = 1 << 22 };
    uint32_t *x = malloc(CHUNK * sizeof *x);
    uint16_t *a = malloc(CHUNK * sizeof *a), *b = malloc(CHUNK * sizeof *b);
    if (!x || !a || !b) return 1;
    int ran = 0;
    for (int p = 0; p < 2; p++) {
        int fell_back;
        const qg_kernel *simd = qg_select_cpu("fp16", paths[p], &fell_back);
        const qg_kernel *ref = qg_registry_find("fp16", paths[p], QG_BACKEND_REF);
        if (simd == NULL || simd->backend == QG_BACKEND_REF) continue;
        ran = 1;
        size_t bad = 0;
        for (uint64_t base = 0; base < UINT64_C(0x100000000); base += CHUNK) {
            for (uint32_t i = 0; i < CHUNK; i++) x[i] = (uint32_t)(base + i);
            ref->fn.convert(x, a, CHUNK);
            simd->fn.convert(x, b, CHUNK);
            qg_exact_report rep;
            if (qg_compare_exact(simd->out_elem, a, b, CHUNK, &rep) != QG_ERR_ok) {
                bad += rep.mismatches;
                QG_CHECK(0, "%s vs reference, chunk at 0x%08llx: %s", simd->name, (unsigned long long)base, rep.text);
            } else {
                qg_test_checks++;
            }
        }
        printf("%s: 2^32 inputs, %zu mismatches\n", simd->name, bad);
    }
    free(x);
    free(a);
    free(b);
    if (!ran) {
        printf("skipped: no SIMD conversion kernel can run here\n");
        return QG_TEST_SKIP;
    }
    return qg_test_end("full.fp16");
}
