/* Poisoned outputs and canary guards around every kernel call (numerics.md section 4).
 *
 * qg_call_guarded runs a kernel twice into fresh buffers laid out as [canary | payload | canary]. The
 * payload is poisoned with 0xA5 bytes in the first run and 0x5A in the second. Then:
 *   - an element equal to the poison in *both* runs was never written (a written element of a
 *     deterministic kernel has the same value in both runs, and cannot equal both poisons);
 *   - any other difference between the runs is nondeterminism;
 *   - a changed canary byte is a write outside the output.
 * So every guarded call also proves full write, no overrun and run-to-run determinism.
 */
#ifndef QGOLD_GUARD_H
#define QGOLD_GUARD_H

#include "qg_err.h"

#include <stddef.h>

enum { QG_GUARD_CANARY_BYTES = 64 };

typedef int (*qg_guarded_fn)(void *ctx, void *out);

/* Runs fn(ctx, out') twice as above and copies the first run's payload into `out` (n elements of
 * elem_size bytes). Returns the kernel's own error if it failed, else QG_ERR_canary_clobbered,
 * QG_ERR_output_unwritten or QG_ERR_nondeterministic with e->msg naming the element, else 0. */
int qg_call_guarded(qg_guarded_fn fn, void *ctx, void *out, size_t n, size_t elem_size, qg_err *e);

/* Makes every CUDA host wrapper's device output canary-guarded (guard_cuda.c); qg_call_guarded does
 * it on its first call. Nothing without CUDA. */
void qg_guard_cuda_install(void);

#endif
