/* Host side of the K-quant products on the GPU (kquants.cu's GEMV, kquants_mma.cu's tensor-core gemm):
 * both take the same arguments, so one qg_cuda_run call serves both. The caller has validated the call
 * with the reference's checks (qg_kq_check_gemv / qg_kq_check_gemm); the launcher is the benchmarks'
 * device-pointer entry point itself, so the verified launch and the measured one are the same code. */
#ifndef QGOLD_CUDA_KQUANTS_HOST_CUH
#define QGOLD_CUDA_KQUANTS_HOST_CUH

#include <stddef.h>
#include <stdint.h>

#include "qgold/cuda.h"
#include "qgold/kquants.h"

namespace qg_kq_host {

/* qg_kq_gemv_cuda_async / qg_kq_gemm_cuda_async: W (rows x cols of type t) times the batch columns of
 * dx (cols fp16 each) into dy_f32 / dy_f16 (batch x rows; NULL: not written), enqueued on `stream`. */
typedef int (*product_async_fn)(qg_ktype t, const void *dw, size_t rows, size_t cols, const void *dx, size_t batch, float *dy_f32,
                                uint16_t *dy_f16, void *stream);

struct product_call {
    product_async_fn launch;
    qg_ktype t;
    size_t rows, cols, batch;
};

/* dev[] in the order of run_product's buffers: w, x, y_f32, y_f16 (an absent output is NULL). */
inline int launch_product(const void *ctx, void *const *dev, void *stream)
{
    const product_call *c = (const product_call *)ctx;
    return c->launch(c->t, dev[0], c->rows, c->cols, dev[1], c->batch, (float *)dev[2], (uint16_t *)dev[3], stream);
}

/* Y = W X on the GPU for host buffers: w (nbytes) and x (batch x cols fp16) uploaded, y_f32 (batch x rows
 * float32) and y_f16 (batch x rows fp16) the outputs, either may be NULL (not both: checked by the
 * caller). Sizes cannot overflow: the checks bound cols * batch * 2 and rows * batch * 4. */
inline int run_product(product_async_fn launch, qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x,
                       size_t batch, float *y_f32, uint16_t *y_f16)
{
    const product_call c = {launch, t, rows, cols, batch};
    const size_t ny = rows * batch;
    const qg_cuda_buf bufs[4] = {
        {QG_CUDA_IN, (void *)w, nbytes},
        {QG_CUDA_IN, (void *)x, cols * batch * sizeof(uint16_t)},
        {QG_CUDA_OUT, y_f32, y_f32 != nullptr ? ny * sizeof(float) : 0},
        {QG_CUDA_OUT, y_f16, y_f16 != nullptr ? ny * sizeof(uint16_t) : 0},
    };
    return qg_cuda_run(bufs, 4, launch_product, &c);
}

} // namespace qg_kq_host

#endif
