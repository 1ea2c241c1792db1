/* Canaries around device outputs: the output hooks (qgold/cuda.h) this harness installs, so every
 * CUDA host wrapper's output is laid out as [margin | payload | margin] with the margins filled with
 * QG_GUARD_CUDA_CANARY and checked after the kernel. The payload starts as the caller's (poisoned)
 * host bytes, so "wrote outside" and "left unwritten" are both visible. Without CUDA: nothing. */
#include "guard.h"

#include "qgold/errors.h"

#if QG_HAVE_CUDA
#include "qgold/cuda.h"

#include <stdlib.h>

enum { QG_GUARD_CUDA_MARGIN = 256, QG_GUARD_CUDA_CANARY = 0xC3 };

static int canary_alloc(void **base, void **payload, const void *host_initial, size_t bytes)
{
    *payload = NULL;
    int rc = qg_cuda_alloc(base, bytes + 2 * QG_GUARD_CUDA_MARGIN);
    if (rc != QG_ERR_ok) return rc;
    *payload = (unsigned char *)*base + QG_GUARD_CUDA_MARGIN;
    if ((rc = qg_cuda_fill(*base, QG_GUARD_CUDA_CANARY, bytes + 2 * QG_GUARD_CUDA_MARGIN)) != QG_ERR_ok) return rc;
    return qg_cuda_to_device(*payload, host_initial, bytes);
}

static int canary_finish(void *base, void *payload, void *host, size_t bytes)
{
    unsigned char margin[2][QG_GUARD_CUDA_MARGIN];
    int rc = qg_cuda_to_host(host, payload, bytes);
    if (rc == QG_ERR_ok) rc = qg_cuda_to_host(margin[0], base, QG_GUARD_CUDA_MARGIN);
    if (rc == QG_ERR_ok) rc = qg_cuda_to_host(margin[1], (unsigned char *)payload + bytes, QG_GUARD_CUDA_MARGIN);
    for (int s = 0; rc == QG_ERR_ok && s < 2; s++)
        for (int i = 0; i < QG_GUARD_CUDA_MARGIN; i++)
            if (margin[s][i] != QG_GUARD_CUDA_CANARY) return QG_ERR_canary_clobbered;
    return rc;
}

void qg_guard_cuda_install(void)
{
    static const qg_cuda_output_hooks hooks = {canary_alloc, canary_finish, qg_cuda_free};
    qg_cuda_set_output_hooks(&hooks);
}
#else
void qg_guard_cuda_install(void) {}
#endif
