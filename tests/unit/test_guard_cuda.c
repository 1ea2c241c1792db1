/* The harness's device-output canaries (tests/harness/guard_cuda.c) on a GPU: a write inside the
 * payload passes through, one byte written just before or just after it is canary_clobbered. */
#include "guard.h"
#include "qg_test.h"

#include "qgold/cuda.h"
#include "qgold/errors.h"

#include <stdint.h>

/* Allocates a guarded output of `bytes`, writes `len` bytes of 0x5A at payload offset `at` (may be
 * negative or past the end), and returns what finish reports. */
static int write_at(const qg_cuda_output_hooks *h, size_t bytes, long at, size_t len)
{
    uint8_t host[64] = {0}, junk[8] = {0x5A, 0x5A, 0x5A, 0x5A, 0x5A, 0x5A, 0x5A, 0x5A};
    void *base = NULL, *payload = NULL;
    int rc = h->alloc(&base, &payload, host, bytes);
    if (rc == QG_ERR_ok) rc = qg_cuda_to_device((uint8_t *)payload + at, junk, len);
    if (rc == QG_ERR_ok) rc = h->finish(base, payload, host, bytes);
    if (base) h->release(base);
    return rc;
}

int main(void)
{
    char why[256];
    if (qg_cuda_device_count(why, sizeof why) == 0) return qg_test_no_gpu(why);
    qg_guard_cuda_install();
    const qg_cuda_output_hooks *h = qg_cuda_output_hooks_in_force();
    QG_CHECK(write_at(h, 64, 0, 8) == QG_ERR_ok, "a write inside the payload");
    QG_CHECK(write_at(h, 64, 56, 8) == QG_ERR_ok, "a write ending at the payload's end");
    QG_CHECK(write_at(h, 64, 57, 8) == QG_ERR_canary_clobbered, "one byte past the end");
    QG_CHECK(write_at(h, 64, -1, 1) == QG_ERR_canary_clobbered, "one byte before the start");
    QG_CHECK(write_at(h, 0, 0, 1) == QG_ERR_canary_clobbered, "an empty output written to");
    qg_cuda_set_output_hooks(NULL);
    QG_CHECK(qg_cuda_output_hooks_in_force() != h, "NULL restores the default hooks");
    return qg_test_end("gpu.harness.canaries");
}
