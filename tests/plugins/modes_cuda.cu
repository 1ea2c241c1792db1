/* Broken CUDA plugins: a Q4_K dequantizer and GEMV on the device, built once per defect; each
 * -DQGP_CUDA_BREAK_<X> build carries exactly one defect that `qgold verify` must name
 * (tests/suites/plugin_cuda.cmake pairs each build with the error it expects). Written from the block
 * layout (kquants spec) only, as an outside author would.
 *   OVERRUN    dequant writes one element past the end of its output       -> canary_clobbered
 *   UNWRITTEN  dequant never writes the last element of its output         -> output_unwritten
 *   FAULT      dequant stores through a NULL device pointer                -> device_failed (illegal address)
 *   NONDET     GEMV sums with float atomicAdd across blocks, declared deterministic -> nondeterministic
 * Built without a defect it is a correct plugin of four kinds (dequant, GEMV, dot with Q8_K, fp32 -> fp16
 * conversion), so every CUDA trampoline of qgold is exercised on the device. */
#include <qgold/plugin.h>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

__device__ float q4k_weight(const uint8_t *b, int e)
{
    const float d = __half2float(__ushort_as_half((unsigned short)(b[0] | b[1] << 8)));
    const float dmin = __half2float(__ushort_as_half((unsigned short)(b[2] | b[3] << 8)));
    const uint8_t *sc = b + 4;
    const int s = e / 32;
    const int scale = s < 4 ? sc[s] & 63 : (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4;
    const int min = s < 4 ? sc[s + 4] & 63 : (sc[s + 4] >> 4) | (sc[s] >> 6) << 4;
    const uint8_t byte = b[16 + 32 * (s / 2) + e % 32];
    const int q = s % 2 == 0 ? byte & 15 : byte >> 4;
    return __fsub_rn(__fmul_rn(__fmul_rn(d, (float)scale), (float)q), __fmul_rn(dmin, (float)min));
}

__device__ void store(float *y, float v) { *y = v; }
__device__ void store(uint16_t *y, float v) { *y = __half_as_ushort(__float2half_rn(v)); }

/* One thread per weight, one CUDA block per Q4_K block. */
template <typename T> __global__ void dequant_q4k(const uint8_t *blocks, size_t nblocks, T *y, int broken)
{
    for (size_t i = blockIdx.x; i < nblocks; i += gridDim.x) {
        const size_t at = 256 * i + threadIdx.x, n = 256 * nblocks;
        (void)n;
#if defined(QGP_CUDA_BREAK_UNWRITTEN)
        if (broken && at == n - 1) continue; /* defect: the last element is never written */
#endif
        store(&y[at], q4k_weight(blocks + 144 * i, threadIdx.x));
#if defined(QGP_CUDA_BREAK_OVERRUN)
        if (broken && at == n - 1) store(&y[n], 0.0f); /* defect: one past the end */
#endif
#if defined(QGP_CUDA_BREAK_FAULT)
        if (broken && at == 0) { /* defect: a store through a NULL device pointer, which the compiler cannot
                                    see is NULL (a plain nullptr store is undefined and may be dropped) */
            T *bad;
            asm volatile("mov.u64 %0, 0;" : "=l"(bad));
            store(bad + threadIdx.x, 0.0f);
        }
#endif
    }
}

/* The correct GEMV: one thread per output, float32 in K order. */
__global__ void gemv_q4k(const uint8_t *w, size_t rows, size_t nb, const uint16_t *x, size_t batch, float *y32, uint16_t *y16)
{
    const size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (r >= rows) return;
    for (size_t v = 0; v < batch; v++) {
        float acc = 0.0f;
        for (size_t k = 0; k < nb * 256; k++) acc += q4k_weight(w + (r * nb + k / 256) * 144, (int)(k % 256)) * __half2float(__ushort_as_half(x[v * nb * 256 + k]));
        y32 ? store(&y32[v * rows + r], acc) : store(&y16[v * rows + r], acc);
    }
}

/* The defect of NONDET: every product goes straight into the row's float accumulator with atomicAdd,
 * from every warp and block of the row at once, so the order of arrival decides the rounding. So that the
 * order changes from call to call on an otherwise idle GPU too, each warp first waits a number of cycles
 * (0..4095, the same for its 32 lanes) hashed from the global nanosecond timer and its own index. */
__global__ void gemv_atomic(const uint8_t *w, size_t rows, size_t nb, const uint16_t *x, size_t batch, float *acc)
{
    const size_t blk = blockIdx.x, r = blk / nb, i = blk % nb, k = 256 * i + threadIdx.x;
    if (r >= rows) return;
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    t = __shfl_sync(0xffffffffu, t, 0);
    unsigned long long z = t ^ ((blk * 8 + threadIdx.x / 32) * 0x9E3779B97F4A7C15ull); /* splitmix64 finalizer */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    const long long wait = (long long)((z ^ (z >> 31)) % 4096);
    for (const long long c0 = clock64(); clock64() - c0 < wait;) {}
    const float wv = q4k_weight(w + (r * nb + i) * 144, threadIdx.x);
    for (size_t v = 0; v < batch; v++) atomicAdd(&acc[v * rows + r], wv * __half2float(__ushort_as_half(x[v * nb * 256 + k])));
}

__global__ void finish(const float *acc, size_t n, float *y32, uint16_t *y16)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y32 ? store(&y32[i], acc[i]) : store(&y16[i], acc[i]);
}

/* Q4_K . Q8_K, one thread in block order: S and M per block exactly (integers), the float result as
 * sum_i dy_i (D_i S_i - Dm_i M_i). Q8_K block, 292 bytes: float d, 256 int8 codes, 16 int16 bsums. */
__global__ void dot_q4k(const uint8_t *w, const uint8_t *q8, size_t nb, int32_t *S, int32_t *M, float *result)
{
    float sum = 0.0f;
    for (size_t i = 0; i < nb; i++) {
        const uint8_t *b = w + 144 * i, *q = q8 + 292 * i, *sc = b + 4;
        int32_t s32 = 0, m32 = 0;
        for (int s = 0; s < 8; s++) {
            const int scale = s < 4 ? sc[s] & 63 : (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4;
            const int min = s < 4 ? sc[s + 4] & 63 : (sc[s + 4] >> 4) | (sc[s] >> 6) << 4;
            int acc = 0;
            for (int l = 0; l < 32; l++) {
                const uint8_t byte = b[16 + 32 * (s / 2) + l];
                acc += (s % 2 == 0 ? byte & 15 : byte >> 4) * (int)(int8_t)q[4 + 32 * s + l];
            }
            const int16_t bs0 = (int16_t)(q[260 + 4 * s] | q[261 + 4 * s] << 8), bs1 = (int16_t)(q[262 + 4 * s] | q[263 + 4 * s] << 8);
            s32 += scale * acc;
            m32 += min * (bs0 + bs1);
        }
        S[i] = s32;
        M[i] = m32;
        const float dy = __int_as_float((int)(q[0] | q[1] << 8 | q[2] << 16 | (uint32_t)q[3] << 24));
        const float D = __half2float(__ushort_as_half((unsigned short)(b[0] | b[1] << 8)));
        const float Dm = __half2float(__ushort_as_half((unsigned short)(b[2] | b[3] << 8)));
        sum += D * dy * (float)s32 - Dm * dy * (float)m32;
    }
    *result = sum;
}

/* float32 -> fp16 bits, round to nearest even, NaN payloads kept (numerics spec section 1). */
__global__ void f32_to_f16(const uint32_t *x, uint16_t *y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint32_t s = (x[i] >> 16) & 0x8000u, a = x[i] & 0x7FFFFFFFu;
        uint32_t h;
        if (a > 0x7F800000u) h = s | 0x7E00u | (a >> 13 & 0x3FFu);
        else if (a >= 0x477FF000u) h = s | 0x7C00u;
        else if (a < 0x38800000u) {
            if (a < 0x33000000u) h = s;
            else {
                const uint32_t m = (a & 0x7FFFFFu) | 0x800000u, sh = 126 - (a >> 23), r = m >> sh, rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
                h = s | (r + (rem > half || (rem == half && (r & 1))));
            }
        } else {
            const uint32_t r = (a - 0x38000000u) >> 13, lo = (a - 0x38000000u) & 0x1FFFu;
            h = s | (r + (lo > 0x1000u || (lo == 0x1000u && (r & 1))));
        }
        y[i] = (uint16_t)h;
    }
}

static bool bad_shape(size_t nbytes, size_t rows, size_t cols)
{
    return rows == 0 || cols == 0 || cols % 256 != 0 || nbytes / 144 / rows != cols / 256 || nbytes != rows * (cols / 256) * 144;
}

static int launched() { return cudaGetLastError() != cudaSuccess; }

template <typename T> static int dequant(const uint8_t *b, size_t nbytes, size_t rows, size_t cols, T *y, void *stream, int broken)
{
    if (b == nullptr || y == nullptr || bad_shape(nbytes, rows, cols)) return 1;
    const size_t nblocks = nbytes / 144;
    dequant_q4k<<<(unsigned)(nblocks < 65536 ? nblocks : 65536), 256, 0, (cudaStream_t)stream>>>(b, nblocks, y, broken);
    return launched();
}

static int dq_f32(void *, const uint8_t *b, size_t nbytes, size_t rows, size_t cols, float *y, void *, void *stream)
{
    return dequant(b, nbytes, rows, cols, y, stream, 1);
}

static int dq_f16(void *, const uint8_t *b, size_t nbytes, size_t rows, size_t cols, uint16_t *y, void *, void *stream)
{
    return dequant(b, nbytes, rows, cols, y, stream, 0);
}

static int gemv(void *, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch, float *y32,
                uint16_t *y16, void *ws, void *stream)
{
    if (w == nullptr || x == nullptr || bad_shape(nbytes, rows, cols) || batch < 1 || batch > 16 || (y32 == nullptr) == (y16 == nullptr)) return 1;
    cudaStream_t s = (cudaStream_t)stream;
    const size_t nb = cols / 256;
#if defined(QGP_CUDA_BREAK_NONDET)
    float *acc = (float *)ws; /* workspace: rows x batch accumulators */
    if (acc == nullptr || rows * nb > 0x7FFFFFFF || cudaMemsetAsync(acc, 0, rows * batch * sizeof(float), s) != cudaSuccess) return 1;
    gemv_atomic<<<(unsigned)(rows * nb), 256, 0, s>>>(w, rows, nb, x, batch, acc);
    finish<<<256, 256, 0, s>>>(acc, rows * batch, y32, y16);
#else
    (void)ws;
    gemv_q4k<<<(unsigned)((rows + 127) / 128), 128, 0, s>>>(w, rows, nb, x, batch, y32, y16);
#endif
    return launched();
}

static size_t gemv_ws(void *, size_t rows, size_t, size_t batch) { return rows * batch * sizeof(float); }

static int dot(void *, const uint8_t *w, const uint8_t *q8, size_t cols, int32_t *S, int32_t *M, float *result, void *, void *stream)
{
    if (w == nullptr || q8 == nullptr || S == nullptr || M == nullptr || result == nullptr || cols == 0 || cols % 256 != 0) return 1;
    dot_q4k<<<1, 1, 0, (cudaStream_t)stream>>>(w, q8, cols / 256, S, M, result);
    return launched();
}

static int convert(void *, const void *x, void *y, size_t n, void *, void *stream)
{
    if (n == 0) return 0;
    if (x == nullptr || y == nullptr) return 1;
    f32_to_f16<<<256, 256, 0, (cudaStream_t)stream>>>((const uint32_t *)x, (uint16_t *)y, n);
    return launched();
}

static qgold_plugin_kernel kernels[4];

QGOLD_PLUGIN_EXPORT int qgold_plugin_entry(uint32_t, qgold_plugin_info *out)
{
    for (qgold_plugin_kernel &k : kernels) k = qgold_plugin_kernel{}, k.struct_size = sizeof k, k.backend = QGOLD_PLUGIN_CUDA, k.format = "q4_k";
    kernels[0].kind = QGOLD_PLUGIN_KQ_DEQUANT, kernels[0].name = "modes_cuda_q4k_dequant", kernels[0].path = "dequant";
    kernels[0].fn.kq_dequant_f32 = dq_f32, kernels[0].fn2.kq_dequant_f16 = dq_f16;
    kernels[1].kind = QGOLD_PLUGIN_KQ_GEMV, kernels[1].name = "modes_cuda_q4k_gemv", kernels[1].path = "gemv";
    kernels[1].fn.kq_gemv = gemv, kernels[1].workspace_bytes = gemv_ws;
    kernels[2].kind = QGOLD_PLUGIN_KQ_DOT, kernels[2].name = "modes_cuda_q4k_dot", kernels[2].path = "dot_q8k";
    kernels[2].fn.kq_dot = dot;
    kernels[3].kind = QGOLD_PLUGIN_CONVERT, kernels[3].name = "modes_cuda_f32_to_f16", kernels[3].format = "fp16", kernels[3].path = "f32_to_f16";
    kernels[3].fn.convert = convert;
    *out = qgold_plugin_info{sizeof *out, QGOLD_PLUGIN_ABI_VERSION, "modes_cuda", "test", 4, kernels};
    return 0;
}
