/* INT8 on the GPU: launchers on device pointers (benchmarks, pipelines). The host-pointer wrappers
 * qg_int8_{quantize,dequant,w8a8,w8a16}_cuda are declared in qgold/kernels_int8.h; they validate with
 * the shared qg_int8_*_check functions, then run these same launchers on device copies through
 * qg_cuda_run (qgold/cuda.h), which uploads, guards and copies back the outputs.
 *
 * The launchers are asynchronous on `stream` (a cudaStream_t), allocate nothing and may be captured in
 * a CUDA graph. They check the shape arguments they need (QG_ERR_shape_invalid, int_k_too_large, ...)
 * but never read data values on the host: value errors of quantize (a NaN or infinite input, an fp16
 * scale overflowing to inf) are reported in a device status word. Results are bit-exact with the
 * reference (quantize, dequant, w8a8) or deterministic and batch-invariant within the registry bound
 * (w8a16) whatever the alignment of the pointers. */
#ifndef QGOLD_KERNELS_INT8_CUDA_H
#define QGOLD_KERNELS_INT8_CUDA_H

#include "qgold/intq.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status bits of quantize (0: success). A block with either condition writes neither its scale nor its
 * codes; the other blocks are written. */
enum { QG_INT8_CUDA_NONFINITE = 1u, QG_INT8_CUDA_SCALE_INF = 2u };

/* Device workspace of quantize (bytes): the status word and, for blocks longer than 65536 elements, one
 * word per block (the amax of the two-pass path). */
size_t qg_int8_quantize_cuda_workspace(const qg_int8_qshape *s);
/* dx rows * cols of src_type; dq codes; dscales the shape's scale count of s->scale_type; dwork the
 * workspace, whose first uint32 is the status word after the call (zeroed by the launcher). */
int qg_int8_quantize_cuda_async(const qg_int8_qshape *s, const void *dx, qg_int8_ftype src_type, int8_t *dq, void *dscales,
                                void *dwork, void *stream);
/* Status word -> error: int_nonfinite_input before int_scale_invalid (the reference's order). */
int qg_int8_quantize_cuda_status(uint32_t status);

int qg_int8_dequant_cuda_async(const qg_int8_qshape *s, const int8_t *dq, const void *dscales, float *dy32, uint16_t *dy16,
                               void *stream);

/* p's pointers (A, B, sa, sb, bias) are device pointers; dacc / dy32 / dy16 device outputs (any may be
 * NULL, not all). M <= 16: dp4a kernel (weights streamed once); M > 16: int8 tensor cores: where the
 * build has sm_90a code and the device runs it, the persistent warp-specialized kernel (bulk tensor
 * copies into a 4-stage ring, wgmma m64n256k32 on 128 x 256 tiles) when K % 16 == 0, A and B are 16-byte
 * aligned and its tiles fill at least 7/8 of the SMs, else warpgroup MMA with cp.async (128 x 256 or
 * 128 x 128 tiles) where the operands allow 16-byte loads and the tiles fill the GPU, else mma.sync
 * m16n8k32. The epilogue is fused in all; every kernel gives the same bits. The environment variable
 * QG_INT8_CUDA_GEMM (read once per process) pins the kernel for tests: "mma" (never wgmma),
 * "wgmma128" / "wgmma256" (that tile at every M where 16-byte loads are possible), "wgmma" (the cp.async
 * kernels' own choice, never the bulk-copy kernel), "tma" / "tma_plain" (the bulk-copy kernel wherever
 * it can run; tma_plain takes the bounds-checked epilogue on every tile); QG_ERR_unsupported where the
 * pinned kernel is not available. */
int qg_int8_w8a8_cuda_async(const qg_int8_w8a8_args *p, int32_t *dacc, float *dy32, uint16_t *dy16, void *stream);

/* Batch M = 1..16 (QG_ERR_shape_invalid above). */
enum { QG_INT8_W8A16_CUDA_MAX_BATCH = 16 };
int qg_int8_w8a16_cuda_async(const int8_t *dB, const void *dsb, qg_int8_ftype sb_type, size_t N, size_t K, const uint16_t *dX,
                             size_t M, float *dy32, uint16_t *dy16, void *stream);

#ifdef __cplusplus
}
#endif
#endif
