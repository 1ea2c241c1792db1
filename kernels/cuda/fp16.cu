/* fp16 / bf16 conversions on the GPU, bit-exact with the reference (NaNs: same sign).
 *
 * __float2half_rn / __float2bfloat16_rn round to nearest even on the exact value, keep subnormals
 * (conversions are not subject to flush-to-zero unless built with -ftz=true, which qgold never uses) and
 * overflow to inf. They (and __half2float) return a canonical NaN whose sign is not the input's, so
 * NaNs are handled explicitly with the reference's bit rules. No float arithmetic
 * happens here, so the --fmad setting is irrelevant to exactness.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common.cuh"

#include <string.h>
#include "qgold/cuda.h"
#include "qgold/kernels_fp16.h"

namespace {

__device__ __forceinline__ uint16_t f32_to_f16(uint32_t b)
{
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)(((b >> 16) & 0x8000u) | 0x7E00u | ((b >> 13) & 0x3FFu));
    return __half_as_ushort(__float2half_rn(__uint_as_float(b)));
}

__device__ __forceinline__ uint16_t f32_to_bf16(uint32_t b)
{
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((b >> 16) | 0x0040u);
    return __bfloat16_as_ushort(__float2bfloat16_rn(__uint_as_float(b)));
}

__global__ void k_f32_to_f16(const uint32_t *x, uint16_t *y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = f32_to_f16(x[i]);
}

/* __half2float also canonicalizes NaNs to +NaN, so NaNs are widened by hand (sign and payload kept). */
__device__ __forceinline__ uint32_t f16_to_f32(uint16_t h)
{
    if ((h & 0x7C00u) == 0x7C00u && (h & 0x03FFu) != 0) return ((uint32_t)(h & 0x8000u) << 16) | 0x7F800000u | ((uint32_t)(h & 0x3FFu) << 13);
    return __float_as_uint(__half2float(__ushort_as_half(h)));
}

__global__ void k_f16_to_f32(const uint16_t *x, uint32_t *y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = f16_to_f32(x[i]);
}

__global__ void k_f32_to_bf16(const uint32_t *x, uint16_t *y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = f32_to_bf16(x[i]);
}

__global__ void k_bf16_to_f32(const uint16_t *x, uint32_t *y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = (uint32_t)x[i] << 16;
}

/* Host side: the kernel and its sizes; qg_cuda_run uploads, guards the output and copies back. */
template <typename In, typename Out>
struct convert_call {
    void (*kernel)(const In *, Out *, size_t);
    size_t n;
};

template <typename In, typename Out>
int launch_convert(const void *ctx, void *const *dev, void *stream)
{
    const convert_call<In, Out> *c = (const convert_call<In, Out> *)ctx;
    const unsigned threads = 256;
    size_t blocks = (c->n + threads - 1) / threads;
    if (blocks > 65535u * 16u) blocks = 65535u * 16u; /* grid-stride loop covers the rest */
    c->kernel<<<(unsigned)blocks, threads, 0, (cudaStream_t)stream>>>((const In *)dev[0], (Out *)dev[1], c->n);
    return QG_ERR_ok;
}

template <typename In, typename Out>
int run_convert(void (*kernel)(const In *, Out *, size_t), const In *x, Out *y, size_t n)
{
    if (n > 0 && (x == nullptr || y == nullptr)) return QG_ERR_argument_invalid;
    if (n == 0) return QG_ERR_ok;
    const convert_call<In, Out> c = {kernel, n};
    const qg_cuda_buf bufs[2] = {{QG_CUDA_IN, (void *)x, n * sizeof(In)}, {QG_CUDA_OUT, y, n * sizeof(Out)}};
    return qg_cuda_run(bufs, 2, launch_convert<In, Out>, &c);
}

} // namespace

/* The conversions by path name, for the device-pointer launcher of the benchmarks. */
typedef void (*convert_launch_fn)(const void *dx, void *dy, size_t n, unsigned blocks, cudaStream_t s);
template <typename In, typename Out, void (*K)(const In *, Out *, size_t)>
void launch_typed(const void *dx, void *dy, size_t n, unsigned blocks, cudaStream_t s)
{
    K<<<blocks, 256, 0, s>>>((const In *)dx, (Out *)dy, n);
}
static const struct {
    const char *path;
    convert_launch_fn launch;
} k_convert_paths[] = {
    {"f32_to_f16", launch_typed<uint32_t, uint16_t, k_f32_to_f16>},
    {"f16_to_f32", launch_typed<uint16_t, uint32_t, k_f16_to_f32>},
    {"f32_to_bf16", launch_typed<uint32_t, uint16_t, k_f32_to_bf16>},
    {"bf16_to_f32", launch_typed<uint16_t, uint32_t, k_bf16_to_f32>},
};

/* Device-pointer launch for benchmarks: no copies, no checks beyond the path name. */
extern "C" int qg_fp16_convert_cuda_async(const char *path, const void *dx, void *dy, size_t n, void *stream)
{
    const unsigned threads = 256;
    size_t blocks = (n + threads - 1) / threads;
    if (blocks > 65535u * 16u) blocks = 65535u * 16u;
    if (blocks == 0) return QG_ERR_ok;
    for (const auto &p : k_convert_paths)
        if (strcmp(path, p.path) == 0) {
            p.launch(dx, dy, n, (unsigned)blocks, (cudaStream_t)stream);
            cudaError_t e = cudaGetLastError();
            return e == cudaSuccess ? QG_ERR_ok : qg_cuda_fail("fp16 convert launch", e);
        }
    return QG_ERR_unsupported;
}

extern "C" int qg_fp16_f32_to_f16_cuda(const uint32_t *x, qg_f16 *y, size_t n) { return run_convert(k_f32_to_f16, x, y, n); }
extern "C" int qg_fp16_f16_to_f32_cuda(const qg_f16 *x, uint32_t *y, size_t n) { return run_convert(k_f16_to_f32, x, y, n); }
extern "C" int qg_fp16_f32_to_bf16_cuda(const uint32_t *x, qg_bf16 *y, size_t n) { return run_convert(k_f32_to_bf16, x, y, n); }
extern "C" int qg_fp16_bf16_to_f32_cuda(const qg_bf16 *x, uint32_t *y, size_t n) { return run_convert(k_bf16_to_f32, x, y, n); }
