/* A qgold CUDA plugin as a user writes one: Q4_K dequantization (float32 and fp16 outputs) and the Q4_K
 * GEMV with fp16 activations, from the block layout alone. qgold hands each function device pointers
 * and the cudaStream_t to launch on; the function checks its arguments, enqueues, and returns.
 * Build: nvcc -O2 -arch=native -shared -Xcompiler -fPIC -I<prefix>/include example_cuda.cu -o example_cuda.so
 * Check: qgold verify --plugin ./example_cuda.so                                                     */
#include <qgold/plugin.h>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

/* Q4_K block, 144 bytes: fp16 d, fp16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of codes.
 * Weight e of sub-block s = e/32 is (d*sc[s])*q - dmin*m[s], each step rounded to float: __fmul_rn and
 * __fsub_rn keep nvcc from fusing the last two into one FMA, which would round once and differ. */
__device__ float q4k_weight(const uint8_t *b, int e)
{
    const float d = __half2float(__ushort_as_half((unsigned short)(b[0] | b[1] << 8)));
    const float dmin = __half2float(__ushort_as_half((unsigned short)(b[2] | b[3] << 8)));
    const uint8_t *sc = b + 4;
    const int s = e / 32;
    const int scale = s < 4 ? sc[s] & 63 : (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4;
    const int min = s < 4 ? sc[s + 4] & 63 : (sc[s + 4] >> 4) | (sc[s] >> 6) << 4;
    const uint8_t byte = b[16 + 32 * (s / 2) + e % 32];
    const int q = s % 2 == 0 ? byte & 15 : byte >> 4; /* low nibbles first, then high */
    return __fsub_rn(__fmul_rn(__fmul_rn(d, (float)scale), (float)q), __fmul_rn(dmin, (float)min));
}

__device__ void store(float *y, float v) { *y = v; }
__device__ void store(uint16_t *y, float v) { *y = __half_as_ushort(__float2half_rn(v)); } /* nearest even */

/* One thread per weight, one CUDA block per Q4_K block (grid-stride over blocks). */
template <typename T> __global__ void dequant_q4k(const uint8_t *blocks, size_t nblocks, T *y)
{
    for (size_t i = blockIdx.x; i < nblocks; i += gridDim.x) store(&y[256 * i + threadIdx.x], q4k_weight(blocks + 144 * i, threadIdx.x));
}

/* y[v][r] = sum_k W[r][k] x[v][k]: one warp per row, lane l takes the row's blocks l, l+32, ... and sums
 * in float32 in K order, then the 32 partial sums meet in a fixed butterfly. The order depends on nothing
 * but the shape, and every batch vector gets the same operations: deterministic and batch-invariant. */
__global__ void gemv_q4k(const uint8_t *w, size_t rows, size_t nb, const uint16_t *x, size_t batch, float *y32, uint16_t *y16)
{
    const size_t r = blockIdx.x * (size_t)(blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return; /* the whole warp leaves together */
    float acc[16] = {};
    for (size_t i = lane; i < nb; i += 32)
        for (int e = 0; e < 256; e++) {
            const float wv = q4k_weight(w + (r * nb + i) * 144, e);
            for (size_t v = 0; v < batch; v++) acc[v] += wv * __half2float(__ushort_as_half(x[v * nb * 256 + 256 * i + e]));
        }
    for (size_t v = 0; v < batch; v++) {
        float s = acc[v];
        for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) y32 ? store(&y32[v * rows + r], s) : store(&y16[v * rows + r], s);
    }
}

static bool bad_shape(size_t nbytes, size_t rows, size_t cols)
{
    return rows == 0 || cols == 0 || cols % 256 != 0 || nbytes / 144 / rows != cols / 256 || nbytes != rows * (cols / 256) * 144;
}

static int launched() { return cudaGetLastError() != cudaSuccess; } /* a launch error is a refusal */

template <typename T> static int dequant(const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, T *y, void *stream)
{
    if (blocks == nullptr || y == nullptr || bad_shape(nbytes, rows, cols)) return 1;
    const size_t nblocks = nbytes / 144;
    dequant_q4k<<<(unsigned)(nblocks < 65536 ? nblocks : 65536), 256, 0, (cudaStream_t)stream>>>(blocks, nblocks, y);
    return launched();
}

static int q4k_f32(void *, const uint8_t *b, size_t nbytes, size_t rows, size_t cols, float *y, void *, void *stream)
{
    return dequant(b, nbytes, rows, cols, y, stream);
}

static int q4k_f16(void *, const uint8_t *b, size_t nbytes, size_t rows, size_t cols, uint16_t *y, void *, void *stream)
{
    return dequant(b, nbytes, rows, cols, y, stream);
}

static int q4k_gemv(void *, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch, float *y32,
                    uint16_t *y16, void *, void *stream)
{
    if (w == nullptr || x == nullptr || bad_shape(nbytes, rows, cols) || batch < 1 || batch > 16 || (y32 == nullptr) == (y16 == nullptr)) return 1;
    const size_t warps = 4, grid = (rows + warps - 1) / warps;
    if (grid > 0x7FFFFFFF) return 1;
    gemv_q4k<<<(unsigned)grid, 32 * warps, 0, (cudaStream_t)stream>>>(w, rows, cols / 256, x, batch, y32, y16);
    return launched();
}

static qgold_plugin_kernel kernels[2];

QGOLD_PLUGIN_EXPORT int qgold_plugin_entry(uint32_t host_abi, qgold_plugin_info *out)
{
    if (host_abi < QGOLD_PLUGIN_ABI_VERSION) return 1; /* an older qgold: refuse */
    for (qgold_plugin_kernel &k : kernels) k = qgold_plugin_kernel{}, k.struct_size = sizeof k, k.backend = QGOLD_PLUGIN_CUDA, k.format = "q4_k";
    kernels[0].kind = QGOLD_PLUGIN_KQ_DEQUANT, kernels[0].name = "example_cuda_q4k_dequant", kernels[0].path = "dequant";
    kernels[0].fn.kq_dequant_f32 = q4k_f32, kernels[0].fn2.kq_dequant_f16 = q4k_f16; /* numerics: exact (zeroed) */
    kernels[1].kind = QGOLD_PLUGIN_KQ_GEMV, kernels[1].name = "example_cuda_q4k_gemv", kernels[1].path = "gemv";
    kernels[1].fn.kq_gemv = q4k_gemv; /* numerics zeroed: float32 accumulation, d = K, exact weights */
    *out = qgold_plugin_info{sizeof *out, QGOLD_PLUGIN_ABI_VERSION, "example_cuda", "1.0", 2, kernels};
    return 0;
}
