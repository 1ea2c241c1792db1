/* INT8 on the GPU: quantize / dequantize (per tensor, row, group), W8A8 GEMM with the pinned epilogue
 * fused, W8A16 GEMV. Spec: reference/spec/intq.md and shared/specs/intq.md sections 1-2.
 *
 * Exactness. The file is built with --fmad=false and every float step of a pinned formula is written as
 * an explicit IEEE intrinsic: the scale is __fdiv_rn(amax, 127), a code is sat(__float2int_rn(
 * __fdiv_rn(v, s))) (ties to even, never v * (1/s)), dequantization __fmul_rn((float) q, s), the W8A8
 * epilogue __int2float_rn(acc) -> __fmul_rn(., sb) -> __fmul_rn(., sa) -> __fadd_rn(., bias) -> ReLU
 * (NaN kept, -0 -> +0) -> RN16. So quantize, dequant and W8A8 match the reference bit for bit.
 *
 * Quantize. amax is a max of |v| taken on the float bits as unsigned integers (for non-negative floats
 * the bit order is the value order, and NaN / inf sort above every finite value), so any reduction
 * order, and an integer atomicMax between CTAs, gives the same result: no float atomics. Blocks of at
 * most 512 elements: one warp per block; up to 65536: one CTA per block (the second pass re-reads the
 * block from L2); longer blocks (per tensor): amax per chunk combined with atomicMax, then a second
 * kernel quantizes. A block whose amax is not finite, or whose fp16 scale overflows, sets a bit of the
 * status word and writes nothing; the host wrapper then copies nothing back.
 *
 * W8A8, M <= 16: a GEMV-shaped kernel. A warp owns 4 rows of B and streams them once with 16-byte
 * loads; A (M rows, small) comes from L1; __dp4a accumulates 4 products per instruction in int32, and a
 * butterfly of integer shuffles adds the lanes (exact, so order is irrelevant). M > 16: int8 tensor
 * cores, mma.sync.m16n8k32.s8 with int32 accumulators; CTA tiles of 128x128 (4 warps of 64x64) or
 * 64x64 (4 warps of 32x32) for small grids, K in steps of 64 through a 3-stage cp.async pipeline into
 * shared memory padded to 80-byte rows (ldmatrix reads are then free of bank conflicts); unaligned
 * operands or K % 16 != 0 take a byte-wise load of the same tiles. Both finish with the epilogue in
 * registers. Integer sums are exact for K <= 131071 (checked first), so every path gives the same bits.
 *
 * W8A16. y[m][n] = sb[n] * sum_k B[n][k] X[m][k]. Each product of an int8 and an fp16 value is exact in
 * float32. Lane l of the warp owning row n takes the 16-element chunks c = l, l + 32, ... in order and
 * adds their products one by one (k ascending) into one float32; the 32 lane sums are combined by a
 * butterfly (xor 16, 8, 4, 2, 1); then one multiplication by sb[n]. That sequence depends on K only: not
 * on the batch, the rows per warp, nor the alignment (the vector and byte-wise loads visit the same
 * elements in the same order), so results are deterministic and batch-invariant. Chain length: at most
 * K - 1 inexact additions and the product by sb, within the registry's d = K.
 */
#include <cuda_fp16.h>
#include <stdint.h>
#include <string.h>

#include <atomic>

#include "common.cuh"
#include "qgold/errors.h"
#include "qgold/intq.h"
#include "qgold/kernels_int8.h"
#include "qgold/kernels_int8_cuda.h"

namespace {

/* ------------------------------------------------------------------------------------------------ */
/* scalar steps                                                                                      */

__device__ __forceinline__ uint16_t f32_to_f16(float v)
{
    const uint32_t b = __float_as_uint(v);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)(((b >> 16) & 0x8000u) | 0x7E00u | ((b >> 13) & 0x3FFu));
    return __half_as_ushort(__float2half_rn(v));
}

__device__ __forceinline__ float f16_to_f32(uint16_t h) { return __half2float(__ushort_as_half(h)); }

template <int SRC> __device__ __forceinline__ float load_src(const void *x, size_t i)
{
    if (SRC == QG_INT8_F16) return f16_to_f32(((const uint16_t *)x)[i]);
    return ((const float *)x)[i];
}

/* sat(rne(v / s)) for s > 0: one IEEE division, then round half to even; |v / s| stays far inside int. */
__device__ __forceinline__ int8_t quantize_value(float v, float s)
{
    int r = __float2int_rn(__fdiv_rn(v, s));
    r = r > 127 ? 127 : r < -128 ? -128 : r;
    return (int8_t)r;
}

/* The block scale from amax bits: 0 when amax is 0; fp16 scales are RN16(amax / 127), their value used.
 * Returns 0, or a status bit (non-finite amax; fp16 scale infinite). */
__device__ __forceinline__ uint32_t scale_of(uint32_t amax_bits, int scale_type, float *s, uint16_t *s16)
{
    if (amax_bits >= 0x7F800000u) return QG_INT8_CUDA_NONFINITE;
    const float amax = __uint_as_float(amax_bits);
    float sc = amax == 0.0f ? 0.0f : __fdiv_rn(amax, 127.0f);
    *s16 = 0;
    if (scale_type == QG_INT8_F16) {
        const __half h = __float2half_rn(sc);
        sc = __half2float(h);
        *s16 = __half_as_ushort(h);
        if (isinf(sc)) return QG_INT8_CUDA_SCALE_INF;
    }
    *s = sc;
    return 0;
}

__device__ __forceinline__ uint32_t abs_bits(float v) { return __float_as_uint(v) & 0x7FFFFFFFu; }

/* Elements i..i+V-1 of x as floats (V = 4 floats or 8 halves: one 16-byte load). */
template <int SRC, int V> __device__ __forceinline__ void load_vec(const void *x, size_t i, float *v)
{
    if (V == 1) {
        v[0] = load_src<SRC>(x, i);
    } else if (SRC == QG_INT8_F32) {
        const float4 f = *(const float4 *)((const float *)x + i);
        v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
    } else {
        const uint4 u = *(const uint4 *)((const uint16_t *)x + i);
        const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            v[2 * j] = f16_to_f32((uint16_t)(w[j] & 0xFFFFu));
            v[2 * j + 1] = f16_to_f32((uint16_t)(w[j] >> 16));
        }
    }
}

template <int V> __device__ __forceinline__ void store_codes(int8_t *q, size_t i, const int8_t *c)
{
    if (V == 1) {
        q[i] = c[0];
    } else if (V == 4) {
        *(char4 *)(q + i) = make_char4(c[0], c[1], c[2], c[3]);
    } else {
        uint2 u;
        u.x = (uint32_t)(uint8_t)c[0] | ((uint32_t)(uint8_t)c[1] << 8) | ((uint32_t)(uint8_t)c[2] << 16) | ((uint32_t)(uint8_t)c[3] << 24);
        u.y = (uint32_t)(uint8_t)c[4] | ((uint32_t)(uint8_t)c[5] << 8) | ((uint32_t)(uint8_t)c[6] << 16) | ((uint32_t)(uint8_t)c[7] << 24);
        *(uint2 *)(q + i) = u;
    }
}

__device__ __forceinline__ void store_scale(void *scales, int scale_type, size_t b, float s, uint16_t s16)
{
    if (scale_type == QG_INT8_F16)
        ((uint16_t *)scales)[b] = s16;
    else
        ((float *)scales)[b] = s;
}

/* ------------------------------------------------------------------------------------------------ */
/* quantize                                                                                          */

constexpr int QTHREADS = 256;

/* G threads (32: a warp, or 256: the CTA) per block of `len` elements; V elements per load (the block
 * starts and lengths are multiples of V, the base 16-byte aligned, when V > 1). */
template <int G, int SRC, int V>
__global__ void __launch_bounds__(QTHREADS) k_quant_block(const void *x, size_t len, size_t count, int scale_type, int8_t *q,
                                                          void *scales, uint32_t *status)
{
    __shared__ uint32_t red[QTHREADS / 32];
    const int t = (int)threadIdx.x % G;
    const size_t b = (size_t)blockIdx.x * (QTHREADS / G) + threadIdx.x / G;
    if (G == 32 && b >= count) return; /* whole warps leave; G == 256 grids have no excess */
    const size_t base = b * len;
    uint32_t m = 0;
#pragma unroll 4
    for (size_t i = (size_t)t * V; i < len; i += (size_t)G * V) {
        float v[V];
        load_vec<SRC, V>(x, base + i, v);
#pragma unroll
        for (int j = 0; j < V; j++) m = max(m, abs_bits(v[j]));
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
    if (G == QTHREADS) {
        if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
        __syncthreads();
        m = 0;
#pragma unroll
        for (int w = 0; w < QTHREADS / 32; w++) m = max(m, red[w]);
    }
    float s = 0.0f;
    uint16_t s16 = 0;
    const uint32_t st = scale_of(m, scale_type, &s, &s16);
    if (st != 0) {
        if (t == 0) atomicOr(status, st);
        return;
    }
    if (t == 0) store_scale(scales, scale_type, b, s, s16);
    /* second pass backwards: the end of the block is the part most likely still in L2 */
    const size_t step = (size_t)G * V, rounds = (len + step - 1) / step;
    for (size_t rd = rounds; rd-- > 0;) {
        const size_t i = rd * step + (size_t)t * V;
        if (i >= len) continue;
        float v[V];
        int8_t c[V];
        load_vec<SRC, V>(x, base + i, v);
#pragma unroll
        for (int j = 0; j < V; j++) c[j] = s == 0.0f ? (int8_t)0 : quantize_value(v[j], s);
        store_codes<V>(q, base + i, c);
    }
}

/* Long blocks: CTA (block b, chunk c) reduces CHUNK elements and atomically maxes the block's word. */
constexpr size_t QCHUNK = 16384;

template <int SRC, int V>
__global__ void __launch_bounds__(QTHREADS) k_amax_chunk(const void *x, size_t len, size_t chunks, uint32_t *amax)
{
    __shared__ uint32_t red[QTHREADS / 32];
    const size_t b = blockIdx.x / chunks, c = blockIdx.x % chunks;
    const size_t lo = c * QCHUNK, hi = min(len, lo + QCHUNK);
    uint32_t m = 0;
#pragma unroll 4
    for (size_t i = lo + threadIdx.x * V; i < hi; i += (size_t)QTHREADS * V) {
        float v[V];
        load_vec<SRC, V>(x, b * len + i, v);
#pragma unroll
        for (int j = 0; j < V; j++) m = max(m, abs_bits(v[j]));
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
#pragma unroll
        for (int w = 1; w < QTHREADS / 32; w++) m = max(m, red[w]);
        atomicMax(&amax[b], m); /* integer max: order-independent */
    }
}

template <int SRC, int V>
__global__ void __launch_bounds__(QTHREADS) k_quant_chunk(const void *x, size_t len, size_t chunks, int scale_type, const uint32_t *amax,
                                                          int8_t *q, void *scales, uint32_t *status)
{
    const size_t b = blockIdx.x / chunks, c = blockIdx.x % chunks;
    float s = 0.0f;
    uint16_t s16 = 0;
    const uint32_t st = scale_of(amax[b], scale_type, &s, &s16);
    if (st != 0) {
        if (threadIdx.x == 0 && c == 0) atomicOr(status, st);
        return;
    }
    if (threadIdx.x == 0 && c == 0) store_scale(scales, scale_type, b, s, s16);
    const size_t lo = c * QCHUNK, hi = min(len, lo + QCHUNK);
    for (size_t i = lo + threadIdx.x * V; i < hi; i += (size_t)QTHREADS * V) {
        float v[V];
        int8_t cd[V];
        load_vec<SRC, V>(x, b * len + i, v);
#pragma unroll
        for (int j = 0; j < V; j++) cd[j] = s == 0.0f ? (int8_t)0 : quantize_value(v[j], s);
        store_codes<V>(q, b * len + i, cd);
    }
}

void block_geometry(const qg_int8_qshape *s, size_t *len, size_t *count)
{
    switch (s->gran) {
    case QG_INT8_PER_TENSOR: *len = s->rows * s->cols, *count = 1; return;
    case QG_INT8_PER_ROW: *len = s->cols, *count = s->rows; return;
    case QG_INT8_PER_GROUP: *len = s->group, *count = s->rows * (s->cols / s->group); return;
    }
    *len = 0, *count = 0;
}

constexpr size_t QWARP_MAX = 512, QCTA_MAX = 65536;

int launch_err(const char *what)
{
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? QG_ERR_ok : qg_cuda_fail(what, e);
}

template <int SRC, int V>
int launch_quant_v(size_t len, size_t count, int scale_type, const void *x, int8_t *q, void *scales, uint32_t *work, cudaStream_t st)
{
    if (len <= QWARP_MAX) {
        const size_t grid = (count + QTHREADS / 32 - 1) / (QTHREADS / 32);
        k_quant_block<32, SRC, V><<<(unsigned)grid, QTHREADS, 0, st>>>(x, len, count, scale_type, q, scales, work);
    } else if (len <= QCTA_MAX) {
        k_quant_block<QTHREADS, SRC, V><<<(unsigned)count, QTHREADS, 0, st>>>(x, len, count, scale_type, q, scales, work);
    } else {
        const size_t chunks = (len + QCHUNK - 1) / QCHUNK;
        k_amax_chunk<SRC, V><<<(unsigned)(count * chunks), QTHREADS, 0, st>>>(x, len, chunks, work + 1);
        k_quant_chunk<SRC, V><<<(unsigned)(count * chunks), QTHREADS, 0, st>>>(x, len, chunks, scale_type, work + 1, q, scales, work);
    }
    return launch_err("int8 quantize launch");
}

/* ------------------------------------------------------------------------------------------------ */
/* dequantize: one thread per element, y = RN32((float) q * s), fp16 = RN16 of that                 */

template <int STYPE>
__global__ void k_dequant(const int8_t *q, const void *scales, size_t n, size_t len, float *y32, uint16_t *y16)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t b = i / len;
        const float s = STYPE == QG_INT8_F16 ? f16_to_f32(((const uint16_t *)scales)[b]) : ((const float *)scales)[b];
        const float y = __fmul_rn((float)q[i], s);
        if (y32 != nullptr) y32[i] = y;
        if (y16 != nullptr) y16[i] = f32_to_f16(y);
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* W8A8 epilogue                                                                                     */

struct epi_args {
    const float *sa, *sb;
    int sa_all, sb_all; /* 1: one value per row / column; 0: per tensor */
    const void *bias;
    int bias_f16;
    int relu;
    int32_t *acc;
    float *y32;
    uint16_t *y16;
    size_t M, N;
};

/* The pinned chain of intq.md section 2, one rounding per step. */
__device__ __forceinline__ void epilogue_store(const epi_args &e, size_t m, size_t n, int32_t acc)
{
    const size_t o = m * e.N + n;
    if (e.acc != nullptr) e.acc[o] = acc;
    if (e.y32 == nullptr && e.y16 == nullptr) return;
    float t = __int2float_rn(acc);
    t = __fmul_rn(t, e.sb[e.sb_all ? n : 0]);
    t = __fmul_rn(t, e.sa[e.sa_all ? m : 0]);
    if (e.bias != nullptr) {
        const float b = e.bias_f16 ? f16_to_f32(((const uint16_t *)e.bias)[n]) : ((const float *)e.bias)[n];
        t = __fadd_rn(t, b);
    }
    if (e.relu && !isnan(t)) t = t > 0.0f ? t : 0.0f;
    if (e.y32 != nullptr) e.y32[o] = t;
    if (e.y16 != nullptr) e.y16[o] = f32_to_f16(t);
}

/* ------------------------------------------------------------------------------------------------ */
/* W8A8, M <= 16: dp4a, a warp per R rows of B, B read once with 16-byte loads                       */

constexpr int SM_WARPS = 8, SM_R = 4;

__device__ __forceinline__ int dp4a16(const int4 a, const int4 b, int c)
{
    c = __dp4a(a.x, b.x, c);
    c = __dp4a(a.y, b.y, c);
    c = __dp4a(a.z, b.z, c);
    return __dp4a(a.w, b.w, c);
}

template <int MT, bool VEC>
__global__ void __launch_bounds__(SM_WARPS * 32) k_w8a8_small(const int8_t *A, const int8_t *B, size_t K, epi_args e)
{
    const int lane = threadIdx.x & 31;
    const size_t n0 = ((size_t)blockIdx.x * SM_WARPS + (threadIdx.x >> 5)) * SM_R;
    if (n0 >= e.N) return;
    const int M = (int)e.M;
    int acc[MT][SM_R];
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int r = 0; r < SM_R; r++) acc[m][r] = 0;
    const int8_t *brow[SM_R];
#pragma unroll
    for (int r = 0; r < SM_R; r++) brow[r] = B + min(n0 + r, e.N - 1) * K; /* rows past N: computed, not stored */
    if (VEC) {
        const size_t nch = K / 16;
        /* several chunks of every row in flight per lane: the kernel is bound by memory latency */
        constexpr int U = MT <= 2 ? 4 : 2;
#pragma unroll U
        for (size_t c = lane; c < nch; c += 32) {
            int4 b[SM_R];
#pragma unroll
            for (int r = 0; r < SM_R; r++) b[r] = __ldg((const int4 *)(brow[r] + c * 16));
#pragma unroll
            for (int m = 0; m < MT; m++) {
                if (m < M) {
                    const int4 a = __ldg((const int4 *)(A + (size_t)m * K + c * 16));
#pragma unroll
                    for (int r = 0; r < SM_R; r++) acc[m][r] = dp4a16(a, b[r], acc[m][r]);
                }
            }
        }
    } else {
        for (size_t k = lane; k < K; k += 32) {
            int b[SM_R];
#pragma unroll
            for (int r = 0; r < SM_R; r++) b[r] = brow[r][k];
#pragma unroll
            for (int m = 0; m < MT; m++) {
                if (m < M) {
                    const int a = A[(size_t)m * K + k];
#pragma unroll
                    for (int r = 0; r < SM_R; r++) acc[m][r] += a * b[r];
                }
            }
        }
    }
    /* integer butterfly: exact, every lane ends with the full sums */
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int r = 0; r < SM_R; r++)
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) acc[m][r] += __shfl_xor_sync(0xFFFFFFFFu, acc[m][r], o);
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int r = 0; r < SM_R; r++)
            if (lane == ((m * SM_R + r) & 31) && m < M && n0 + r < e.N) epilogue_store(e, (size_t)m, n0 + r, acc[m][r]);
}

/* ------------------------------------------------------------------------------------------------ */
/* W8A8, M > 16: int8 tensor cores                                                                   */

constexpr int TC_BK = 64, TC_LDS = 80, TC_STAGES = 3, TC_THREADS = 128;

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void cp_async16(void *dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3, const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(smem_u32(p)));
}

__device__ __forceinline__ void mma_s8(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Loads rows [r0, r0 + ROWS) x bytes [k0, k0 + 64) of a row-major R x K int8 matrix into a stage (rows
 * of TC_LDS bytes); out-of-range bytes are zero. ALIGNED: K % 16 == 0 and a 16-byte aligned base, so a
 * 16-byte chunk is wholly inside or wholly outside (cp.async zero-fills the latter). */
template <int ROWS, bool ALIGNED>
__device__ __forceinline__ void load_tile(int8_t *dst, const int8_t *src, size_t R, size_t K, size_t r0, size_t k0)
{
    constexpr int CHUNKS = ROWS * (TC_BK / 16);
#pragma unroll
    for (int i = 0; i < CHUNKS / TC_THREADS; i++) {
        const int c = (int)threadIdx.x + i * TC_THREADS;
        const int row = c >> 2, kc = (c & 3) * 16;
        const size_t gr = r0 + row, gk = k0 + kc;
        int8_t *d = dst + row * TC_LDS + kc;
        if (ALIGNED) {
            const bool ok = gr < R && gk < K;
            cp_async16(d, ok ? (const void *)(src + gr * K + gk) : (const void *)src, ok ? 16 : 0);
        } else {
            uint32_t w[4] = {0, 0, 0, 0};
            if (gr < R) {
                const int8_t *s = src + gr * K;
#pragma unroll
                for (int j = 0; j < 16; j++)
                    if (gk + j < K) w[j >> 2] |= (uint32_t)(uint8_t)s[gk + j] << (8 * (j & 3));
            }
            *(uint4 *)d = make_uint4(w[0], w[1], w[2], w[3]);
        }
    }
}

/* CTA tile BM x BN, 4 warps as 2 x 2, warp tile (BM/2) x (BN/2): MT m16 tiles by NT n8 tiles. */
template <int BM, int BN, bool ALIGNED>
__global__ void __launch_bounds__(TC_THREADS) k_w8a8_mma(const int8_t *A, const int8_t *B, size_t K, epi_args e)
{
    constexpr int WM = BM / 2, WN = BN / 2, MT = WM / 16, NT = WN / 8;
    extern __shared__ __align__(16) int8_t smem[];
    int8_t *As = smem, *Bs = smem + TC_STAGES * BM * TC_LDS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wm0 = (warp >> 1) * WM, wn0 = (warp & 1) * WN;
    const size_t m0 = (size_t)blockIdx.y * BM, n0 = (size_t)blockIdx.x * BN;
    const int ktiles = (int)((K + TC_BK - 1) / TC_BK);

    int acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) acc[i][j][r] = 0;

#pragma unroll
    for (int s = 0; s < TC_STAGES - 1; s++) {
        if (s < ktiles) {
            load_tile<BM, ALIGNED>(As + s * BM * TC_LDS, A, e.M, K, m0, (size_t)s * TC_BK);
            load_tile<BN, ALIGNED>(Bs + s * BN * TC_LDS, B, e.N, K, n0, (size_t)s * TC_BK);
        }
        cp_async_commit();
    }
    for (int kt = 0; kt < ktiles; kt++) {
        cp_async_wait<TC_STAGES - 2>();
        __syncthreads();
        {
            /* refill the stage every warp finished with in the previous iteration */
            const int nk = kt + TC_STAGES - 1;
            if (nk < ktiles) {
                const int s = nk % TC_STAGES;
                load_tile<BM, ALIGNED>(As + s * BM * TC_LDS, A, e.M, K, m0, (size_t)nk * TC_BK);
                load_tile<BN, ALIGNED>(Bs + s * BN * TC_LDS, B, e.N, K, n0, (size_t)nk * TC_BK);
            }
            cp_async_commit();
        }
        const int8_t *as = As + (kt % TC_STAGES) * BM * TC_LDS, *bs = Bs + (kt % TC_STAGES) * BN * TC_LDS;
#pragma unroll
        for (int kk = 0; kk < TC_BK; kk += 32) {
            uint32_t af[MT][4], bf[NT][2];
#pragma unroll
            for (int i = 0; i < MT; i++) /* rows 0-7 / 8-15 at bytes 0-15, then at bytes 16-31 */
                ldmatrix_x4(af[i][0], af[i][1], af[i][2], af[i][3],
                            as + (wm0 + i * 16 + (lane & 15)) * TC_LDS + kk + (lane >> 4) * 16);
#pragma unroll
            for (int j = 0; j < NT; j += 2) /* n-tiles j and j+1, each at bytes 0-15 and 16-31 */
                ldmatrix_x4(bf[j][0], bf[j][1], bf[j + 1][0], bf[j + 1][1],
                            bs + (wn0 + j * 8 + ((lane >> 4) << 3) + (lane & 7)) * TC_LDS + kk + ((lane >> 3) & 1) * 16);
#pragma unroll
            for (int i = 0; i < MT; i++)
#pragma unroll
                for (int j = 0; j < NT; j++) mma_s8(acc[i][j], af[i], bf[j][0], bf[j][1]);
        }
    }
    cp_async_wait<0>();

    /* accumulator layout: c0, c1 at row g, columns 2t, 2t+1; c2, c3 at row g + 8 */
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const size_t m = m0 + wm0 + i * 16 + g + (r >> 1) * 8, n = n0 + wn0 + j * 8 + 2 * t + (r & 1);
                if (m < e.M && n < e.N) epilogue_store(e, m, n, acc[i][j][r]);
            }
}

template <int BM, int BN, bool ALIGNED> int launch_mma(const int8_t *A, const int8_t *B, size_t K, const epi_args &e, cudaStream_t st)
{
    const int smem = TC_STAGES * (BM + BN) * TC_LDS;
    /* once per kernel, so that calls captured in a CUDA graph after a first plain call make no such call
     * (setting it twice is harmless, so a race between threads is too) */
    static std::atomic<bool> smem_set(false);
    if (!smem_set.load()) {
        const cudaError_t ce = cudaFuncSetAttribute(k_w8a8_mma<BM, BN, ALIGNED>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (ce != cudaSuccess) return qg_cuda_fail("cudaFuncSetAttribute(k_w8a8_mma)", ce);
        smem_set.store(true);
    }
    const dim3 grid((unsigned)((e.N + BN - 1) / BN), (unsigned)((e.M + BM - 1) / BM));
    k_w8a8_mma<BM, BN, ALIGNED><<<grid, TC_THREADS, smem, st>>>(A, B, K, e);
    return launch_err("k_w8a8_mma launch");
}

template <int MT> int launch_small(const int8_t *A, const int8_t *B, size_t K, bool vec, const epi_args &e, cudaStream_t st)
{
    const size_t warps = (e.N + SM_R - 1) / SM_R, grid = (warps + SM_WARPS - 1) / SM_WARPS;
    if (vec)
        k_w8a8_small<MT, true><<<(unsigned)grid, SM_WARPS * 32, 0, st>>>(A, B, K, e);
    else
        k_w8a8_small<MT, false><<<(unsigned)grid, SM_WARPS * 32, 0, st>>>(A, B, K, e);
    return launch_err("k_w8a8_small launch");
}

constexpr unsigned GRID_MAX = 2147483647u, GRID_YZ_MAX = 65535u;

/* ------------------------------------------------------------------------------------------------ */
/* W8A16 GEMV: a warp per 4 rows of B, batch MT (<= 16) in registers                                 */

constexpr int WV_WARPS = 8, WV_R = 4, WV_CHUNK = 16;

template <int MT, bool VEC>
__global__ void __launch_bounds__(WV_WARPS * 32) k_w8a16(const int8_t *B, const void *sb, int sb_f16, size_t N, size_t K, const uint16_t *X,
                                                         int M, float *y32, uint16_t *y16)
{
    const int lane = threadIdx.x & 31;
    const size_t n0 = ((size_t)blockIdx.x * WV_WARPS + (threadIdx.x >> 5)) * WV_R;
    if (n0 >= N) return;
    float s[MT][WV_R];
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int r = 0; r < WV_R; r++) s[m][r] = 0.0f;
    const int8_t *brow[WV_R];
#pragma unroll
    for (int r = 0; r < WV_R; r++) brow[r] = B + min(n0 + r, N - 1) * K;
    const size_t nch = (K + WV_CHUNK - 1) / WV_CHUNK, nfull = VEC ? K / WV_CHUNK : 0;
    /* whole chunks, 16-byte loads (small batches: several chunks in flight per lane) */
    constexpr int U = MT <= 2 ? 4 : MT <= 4 ? 2 : 1;
#pragma unroll U
    for (size_t c = lane; VEC && c < nfull; c += 32) {
        int4 braw[WV_R];
#pragma unroll
        for (int r = 0; r < WV_R; r++) braw[r] = __ldg((const int4 *)(brow[r] + c * WV_CHUNK));
#pragma unroll
        for (int m = 0; m < MT; m++) {
            if (m < M) {
                const uint4 *xp = (const uint4 *)(X + (size_t)m * K + c * WV_CHUNK);
                const uint4 x0 = __ldg(xp), x1 = __ldg(xp + 1);
                const uint32_t xw[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
                for (int j = 0; j < WV_CHUNK; j++) {
                    const float xv = f16_to_f32((uint16_t)(xw[j >> 1] >> (16 * (j & 1))));
#pragma unroll
                    for (int r = 0; r < WV_R; r++) {
                        const uint32_t bw = j < 4 ? braw[r].x : j < 8 ? braw[r].y : j < 12 ? braw[r].z : braw[r].w;
                        const float bv = (float)(int8_t)(bw >> (8 * (j & 3)));
                        s[m][r] = __fmaf_rn(bv, xv, s[m][r]); /* the product is exact: one rounding, the add */
                    }
                }
            }
        }
    }
    /* the rest (the last partial chunk, or everything when unaligned): same chunks, same order */
    for (size_t c = nfull + (size_t)((lane - (int)(nfull % 32) + 32) % 32); c < nch; c += 32) {
        for (int j = 0; j < WV_CHUNK; j++) {
            const size_t k = c * WV_CHUNK + j;
            if (k >= K) break;
#pragma unroll
            for (int m = 0; m < MT; m++) {
                if (m < M) {
                    const float xv = f16_to_f32(X[(size_t)m * K + k]);
#pragma unroll
                    for (int r = 0; r < WV_R; r++) s[m][r] = __fmaf_rn((float)brow[r][k], xv, s[m][r]);
                }
            }
        }
    }
    /* butterfly: lane sums combined in a fixed pattern (a + b == b + a bitwise, so every lane agrees) */
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int r = 0; r < WV_R; r++)
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) s[m][r] = __fadd_rn(s[m][r], __shfl_xor_sync(0xFFFFFFFFu, s[m][r], o));
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int r = 0; r < WV_R; r++) {
            const size_t n = n0 + r;
            if (lane == ((m * WV_R + r) & 31) && m < M && n < N) {
                const float scale = sb_f16 ? f16_to_f32(((const uint16_t *)sb)[n]) : ((const float *)sb)[n];
                const float y = __fmul_rn(scale, s[m][r]);
                if (y32 != nullptr) y32[(size_t)m * N + n] = y;
                if (y16 != nullptr) y16[(size_t)m * N + n] = f32_to_f16(y);
            }
        }
}

template <int MT>
int launch_w8a16_t(const int8_t *B, const void *sb, int sb_f16, size_t N, size_t K, const uint16_t *X, int M, float *y32, uint16_t *y16,
                   bool vec, cudaStream_t st)
{
    const size_t warps = (N + WV_R - 1) / WV_R, grid = (warps + WV_WARPS - 1) / WV_WARPS;
    if (vec)
        k_w8a16<MT, true><<<(unsigned)grid, WV_WARPS * 32, 0, st>>>(B, sb, sb_f16, N, K, X, M, y32, y16);
    else
        k_w8a16<MT, false><<<(unsigned)grid, WV_WARPS * 32, 0, st>>>(B, sb, sb_f16, N, K, X, M, y32, y16);
    return launch_err("k_w8a16 launch");
}

bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* Host-side buffers of the wrappers: plain device copies of inputs. */
template <typename T> int to_device(T **d, const void *h, size_t bytes)
{
    *d = nullptr;
    cudaError_t e = cudaMalloc((void **)d, bytes > 0 ? bytes : 1);
    if (e != cudaSuccess) return qg_cuda_fail("cudaMalloc", e);
    if (bytes > 0 && (e = cudaMemcpy(*d, h, bytes, cudaMemcpyHostToDevice)) != cudaSuccess) return qg_cuda_fail("cudaMemcpy", e);
    return QG_ERR_ok;
}

size_t ftype_size(qg_int8_ftype t) { return t == QG_INT8_F16 ? 2 : 4; }

} // namespace

/* ================================================================================================ */
/* launchers on device pointers                                                                     */

extern "C" size_t qg_int8_quantize_cuda_workspace(const qg_int8_qshape *s)
{
    size_t len = 0, count = 0;
    if (qg_int8_qshape_check(s) != QG_ERR_ok) return 4;
    block_geometry(s, &len, &count);
    return len > QCTA_MAX ? 4 * (count + 1) : 4;
}

extern "C" int qg_int8_quantize_cuda_status(uint32_t status)
{
    if (status & QG_INT8_CUDA_NONFINITE) return QG_ERR_int_nonfinite_input;
    if (status & QG_INT8_CUDA_SCALE_INF) return QG_ERR_int_scale_invalid;
    return QG_ERR_ok;
}

extern "C" int qg_int8_quantize_cuda_async(const qg_int8_qshape *s, const void *dx, qg_int8_ftype src_type, int8_t *dq, void *dscales,
                                           void *dwork, void *stream)
{
    int rc = qg_int8_quantize_check(s, dx, src_type, dq, dscales);
    if (rc != QG_ERR_ok) return rc;
    if (dwork == nullptr) return QG_ERR_argument_invalid;
    size_t len, count;
    block_geometry(s, &len, &count);
    const size_t chunks = (len + QCHUNK - 1) / QCHUNK;
    if ((len <= QWARP_MAX && (count + 7) / 8 > GRID_MAX) || (len > QWARP_MAX && len <= QCTA_MAX && count > GRID_MAX) ||
        (len > QCTA_MAX && count > GRID_MAX / chunks))
        return QG_ERR_shape_invalid;
    cudaStream_t st = (cudaStream_t)stream;
    uint32_t *work = (uint32_t *)dwork;
    const cudaError_t e = cudaMemsetAsync(work, 0, qg_int8_quantize_cuda_workspace(s), st);
    if (e != cudaSuccess) return qg_cuda_fail("cudaMemsetAsync(int8 quantize workspace)", e);
    /* 16-byte loads (and 4- or 8-byte code stores) when every block starts on such a boundary */
    const int st_type = (int)s->scale_type;
    const bool vq = aligned16(dx) && ((uintptr_t)dq & 7u) == 0;
    if (src_type == QG_INT8_F32) {
        if (vq && len % 4 == 0) return launch_quant_v<QG_INT8_F32, 4>(len, count, st_type, dx, dq, dscales, work, st);
        return launch_quant_v<QG_INT8_F32, 1>(len, count, st_type, dx, dq, dscales, work, st);
    }
    if (vq && len % 8 == 0) return launch_quant_v<QG_INT8_F16, 8>(len, count, st_type, dx, dq, dscales, work, st);
    return launch_quant_v<QG_INT8_F16, 1>(len, count, st_type, dx, dq, dscales, work, st);
}

extern "C" int qg_int8_dequant_cuda_async(const qg_int8_qshape *s, const int8_t *dq, const void *dscales, float *dy32, uint16_t *dy16,
                                          void *stream)
{
    if (s == nullptr || dq == nullptr || dscales == nullptr || (dy32 == nullptr && dy16 == nullptr)) return QG_ERR_argument_invalid;
    const int rc = qg_int8_qshape_check(s);
    if (rc != QG_ERR_ok) return rc;
    size_t len, count;
    block_geometry(s, &len, &count);
    const size_t n = s->rows * s->cols, want = (n + 255) / 256;
    const unsigned grid = (unsigned)(want < 65536 ? want : 65536);
    cudaStream_t st = (cudaStream_t)stream;
    if (s->scale_type == QG_INT8_F16)
        k_dequant<QG_INT8_F16><<<grid, 256, 0, st>>>(dq, dscales, n, len, dy32, dy16);
    else
        k_dequant<QG_INT8_F32><<<grid, 256, 0, st>>>(dq, dscales, n, len, dy32, dy16);
    return launch_err("k_dequant launch");
}

extern "C" int qg_int8_w8a8_cuda_async(const qg_int8_w8a8_args *p, int32_t *dacc, float *dy32, uint16_t *dy16, void *stream)
{
    if (p == nullptr || p->A == nullptr || p->B == nullptr || (dacc == nullptr && dy32 == nullptr && dy16 == nullptr))
        return QG_ERR_argument_invalid;
    const size_t M = p->M, N = p->N, K = p->K;
    if (M == 0 || N == 0 || K == 0) return QG_ERR_shape_invalid;
    const bool scaled = dy32 != nullptr || dy16 != nullptr;
    if (scaled && ((p->sa_len != 1 && p->sa_len != M) || (p->sb_len != 1 && p->sb_len != N))) return QG_ERR_shape_invalid;
    if (K > QG_INT8_MAX_K) return QG_ERR_int_k_too_large;
    if (scaled && (p->sa == nullptr || p->sb == nullptr)) return QG_ERR_int_scale_invalid;
    if ((N + SM_R * SM_WARPS - 1) / (SM_R * SM_WARPS) > GRID_MAX || (M + 63) / 64 > GRID_YZ_MAX) return QG_ERR_shape_invalid;
    epi_args e;
    e.sa = p->sa, e.sb = p->sb;
    e.sa_all = p->sa_len != 1;
    e.sb_all = p->sb_len != 1;
    e.bias = p->bias;
    e.bias_f16 = p->bias_type == QG_INT8_F16;
    e.relu = p->relu;
    e.acc = dacc, e.y32 = dy32, e.y16 = dy16;
    e.M = M, e.N = N;
    cudaStream_t st = (cudaStream_t)stream;
    const bool vec = K % 16 == 0 && aligned16(p->A) && aligned16(p->B);
    if (M <= 16) {
        if (M == 1) return launch_small<1>(p->A, p->B, K, vec, e, st);
        if (M <= 2) return launch_small<2>(p->A, p->B, K, vec, e, st);
        if (M <= 4) return launch_small<4>(p->A, p->B, K, vec, e, st);
        if (M <= 8) return launch_small<8>(p->A, p->B, K, vec, e, st);
        return launch_small<16>(p->A, p->B, K, vec, e, st);
    }
    /* big tiles when they alone fill the GPU about once (132 SMs on an H100), else 64 x 64 tiles */
    const bool big = ((M + 127) / 128) * ((N + 127) / 128) >= 132;
    if (big) return vec ? launch_mma<128, 128, true>(p->A, p->B, K, e, st) : launch_mma<128, 128, false>(p->A, p->B, K, e, st);
    return vec ? launch_mma<64, 64, true>(p->A, p->B, K, e, st) : launch_mma<64, 64, false>(p->A, p->B, K, e, st);
}

extern "C" int qg_int8_w8a16_cuda_async(const int8_t *dB, const void *dsb, qg_int8_ftype sb_type, size_t N, size_t K, const uint16_t *dX,
                                        size_t M, float *dy32, uint16_t *dy16, void *stream)
{
    if (dB == nullptr || dX == nullptr || dsb == nullptr || (dy32 == nullptr && dy16 == nullptr)) return QG_ERR_argument_invalid;
    if (sb_type != QG_INT8_F32 && sb_type != QG_INT8_F16) return QG_ERR_argument_invalid;
    if (M == 0 || N == 0 || K == 0 || (N + WV_R * WV_WARPS - 1) / (WV_R * WV_WARPS) > GRID_MAX) return QG_ERR_shape_invalid;
    cudaStream_t st = (cudaStream_t)stream;
    const bool vec = K % WV_CHUNK == 0 && aligned16(dB) && aligned16(dX);
    const int f16 = sb_type == QG_INT8_F16;
    /* batches of at most 16 rows of X; each output's order does not depend on the batch */
    const size_t maxb = QG_INT8_W8A16_CUDA_MAX_BATCH;
    for (size_t m0 = 0; m0 < M; m0 += maxb) {
        const int mb = (int)(M - m0 < maxb ? M - m0 : maxb);
        const uint16_t *x = dX + m0 * K;
        float *y32 = dy32 ? dy32 + m0 * N : nullptr;
        uint16_t *y16 = dy16 ? dy16 + m0 * N : nullptr;
        int rc;
        if (mb == 1)
            rc = launch_w8a16_t<1>(dB, dsb, f16, N, K, x, mb, y32, y16, vec, st);
        else if (mb <= 2)
            rc = launch_w8a16_t<2>(dB, dsb, f16, N, K, x, mb, y32, y16, vec, st);
        else if (mb <= 4)
            rc = launch_w8a16_t<4>(dB, dsb, f16, N, K, x, mb, y32, y16, vec, st);
        else if (mb <= 8)
            rc = launch_w8a16_t<8>(dB, dsb, f16, N, K, x, mb, y32, y16, vec, st);
        else
            rc = launch_w8a16_t<16>(dB, dsb, f16, N, K, x, mb, y32, y16, vec, st);
        if (rc != QG_ERR_ok) return rc;
    }
    return QG_ERR_ok;
}

/* ================================================================================================ */
/* host wrappers: validate (the reference's checks, same errors), copy in, run on guarded outputs,  */
/* copy out only on success                                                                         */

extern "C" int qg_int8_quantize_cuda(const qg_int8_qshape *s, const void *x, qg_int8_ftype src_type, int8_t *q, void *scales)
{
    int rc = qg_int8_quantize_check(s, x, src_type, q, scales);
    if (rc != QG_ERR_ok) return rc;
    const size_t n = s->rows * s->cols, ns = qg_int8_num_scales(s), ssz = ftype_size(s->scale_type);
    void *dx = nullptr, *dwork = nullptr;
    qg_guarded_dev gq = {}, gs = {};
    uint32_t status = 0;
    if ((rc = to_device(&dx, x, n * ftype_size(src_type))) != QG_ERR_ok) goto done;
    QG_CUDA_TRY(cudaMalloc(&dwork, qg_int8_quantize_cuda_workspace(s)));
    if ((rc = qg_guarded_dev_alloc(&gq, q, n)) != QG_ERR_ok) goto done;
    if ((rc = qg_guarded_dev_alloc(&gs, scales, ns * ssz)) != QG_ERR_ok) goto done;
    if ((rc = qg_int8_quantize_cuda_async(s, dx, src_type, (int8_t *)gq.payload, gs.payload, dwork, 0)) != QG_ERR_ok) goto done;
    QG_CUDA_TRY(cudaMemcpy(&status, dwork, 4, cudaMemcpyDeviceToHost));
    if ((rc = qg_int8_quantize_cuda_status(status)) != QG_ERR_ok) goto done; /* outputs untouched */
    if ((rc = qg_guarded_dev_finish(&gq, q)) != QG_ERR_ok) goto done;
    rc = qg_guarded_dev_finish(&gs, scales);
done:
    cudaFree(dx);
    cudaFree(dwork);
    qg_guarded_dev_free(&gq);
    qg_guarded_dev_free(&gs);
    return rc;
}

extern "C" int qg_int8_dequant_cuda(const qg_int8_qshape *s, const int8_t *q, const void *scales, float *y_f32, uint16_t *y_f16)
{
    int rc = qg_int8_dequant_check(s, q, scales, y_f32, y_f16);
    if (rc != QG_ERR_ok) return rc;
    const size_t n = s->rows * s->cols, ns = qg_int8_num_scales(s);
    int8_t *dq = nullptr;
    void *ds = nullptr;
    qg_guarded_dev g32 = {}, g16 = {};
    if ((rc = to_device(&dq, q, n)) != QG_ERR_ok) goto done;
    if ((rc = to_device(&ds, scales, ns * ftype_size(s->scale_type))) != QG_ERR_ok) goto done;
    if (y_f32 != nullptr && (rc = qg_guarded_dev_alloc(&g32, y_f32, n * 4)) != QG_ERR_ok) goto done;
    if (y_f16 != nullptr && (rc = qg_guarded_dev_alloc(&g16, y_f16, n * 2)) != QG_ERR_ok) goto done;
    if ((rc = qg_int8_dequant_cuda_async(s, dq, ds, (float *)g32.payload, (uint16_t *)g16.payload, 0)) != QG_ERR_ok) goto done;
    QG_CUDA_TRY(cudaDeviceSynchronize());
    if (y_f32 != nullptr && (rc = qg_guarded_dev_finish(&g32, y_f32)) != QG_ERR_ok) goto done;
    if (y_f16 != nullptr) rc = qg_guarded_dev_finish(&g16, y_f16);
done:
    cudaFree(dq);
    cudaFree(ds);
    qg_guarded_dev_free(&g32);
    qg_guarded_dev_free(&g16);
    return rc;
}

extern "C" int qg_int8_w8a8_cuda(const qg_int8_w8a8_args *p, int32_t *acc, float *y_f32, uint16_t *y_f16)
{
    int rc = qg_int8_w8a8_check(p, acc, y_f32, y_f16);
    if (rc != QG_ERR_ok) return rc;
    const size_t M = p->M, N = p->N, K = p->K;
    const bool scaled = y_f32 != nullptr || y_f16 != nullptr;
    qg_int8_w8a8_args d = *p;
    int8_t *dA = nullptr, *dB = nullptr;
    float *dsa = nullptr, *dsb = nullptr;
    void *dbias = nullptr;
    qg_guarded_dev ga = {}, g32 = {}, g16 = {};
    if ((rc = to_device(&dA, p->A, M * K)) != QG_ERR_ok) goto done;
    if ((rc = to_device(&dB, p->B, N * K)) != QG_ERR_ok) goto done;
    d.A = dA, d.B = dB, d.sa = nullptr, d.sb = nullptr, d.bias = nullptr;
    if (scaled) {
        if ((rc = to_device(&dsa, p->sa, p->sa_len * 4)) != QG_ERR_ok) goto done;
        if ((rc = to_device(&dsb, p->sb, p->sb_len * 4)) != QG_ERR_ok) goto done;
        if (p->bias != nullptr && (rc = to_device(&dbias, p->bias, N * ftype_size(p->bias_type))) != QG_ERR_ok) goto done;
        d.sa = dsa, d.sb = dsb, d.bias = dbias;
    } else {
        d.sa_len = d.sb_len = 1;
    }
    if (acc != nullptr && (rc = qg_guarded_dev_alloc(&ga, acc, M * N * 4)) != QG_ERR_ok) goto done;
    if (y_f32 != nullptr && (rc = qg_guarded_dev_alloc(&g32, y_f32, M * N * 4)) != QG_ERR_ok) goto done;
    if (y_f16 != nullptr && (rc = qg_guarded_dev_alloc(&g16, y_f16, M * N * 2)) != QG_ERR_ok) goto done;
    if ((rc = qg_int8_w8a8_cuda_async(&d, (int32_t *)ga.payload, (float *)g32.payload, (uint16_t *)g16.payload, 0)) != QG_ERR_ok) goto done;
    QG_CUDA_TRY(cudaDeviceSynchronize());
    if (acc != nullptr && (rc = qg_guarded_dev_finish(&ga, acc)) != QG_ERR_ok) goto done;
    if (y_f32 != nullptr && (rc = qg_guarded_dev_finish(&g32, y_f32)) != QG_ERR_ok) goto done;
    if (y_f16 != nullptr) rc = qg_guarded_dev_finish(&g16, y_f16);
done:
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dsa);
    cudaFree(dsb);
    cudaFree(dbias);
    qg_guarded_dev_free(&ga);
    qg_guarded_dev_free(&g32);
    qg_guarded_dev_free(&g16);
    return rc;
}

extern "C" int qg_int8_w8a16_cuda(const int8_t *B, const void *sb, qg_int8_ftype sb_type, size_t N, size_t K, const uint16_t *X, size_t M,
                                  float *y_f32, uint16_t *y_f16)
{
    int rc = qg_int8_w8a16_check(B, sb, sb_type, N, K, X, M, y_f32, y_f16);
    if (rc != QG_ERR_ok) return rc;
    int8_t *dB = nullptr;
    void *dsb = nullptr;
    uint16_t *dX = nullptr;
    qg_guarded_dev g32 = {}, g16 = {};
    if ((rc = to_device(&dB, B, N * K)) != QG_ERR_ok) goto done;
    if ((rc = to_device(&dsb, sb, N * ftype_size(sb_type))) != QG_ERR_ok) goto done;
    if ((rc = to_device(&dX, X, M * K * 2)) != QG_ERR_ok) goto done;
    if (y_f32 != nullptr && (rc = qg_guarded_dev_alloc(&g32, y_f32, M * N * 4)) != QG_ERR_ok) goto done;
    if (y_f16 != nullptr && (rc = qg_guarded_dev_alloc(&g16, y_f16, M * N * 2)) != QG_ERR_ok) goto done;
    if ((rc = qg_int8_w8a16_cuda_async(dB, dsb, sb_type, N, K, dX, M, (float *)g32.payload, (uint16_t *)g16.payload, 0)) != QG_ERR_ok)
        goto done;
    QG_CUDA_TRY(cudaDeviceSynchronize());
    if (y_f32 != nullptr && (rc = qg_guarded_dev_finish(&g32, y_f32)) != QG_ERR_ok) goto done;
    if (y_f16 != nullptr) rc = qg_guarded_dev_finish(&g16, y_f16);
done:
    cudaFree(dB);
    cudaFree(dsb);
    cudaFree(dX);
    qg_guarded_dev_free(&g32);
    qg_guarded_dev_free(&g16);
    return rc;
}
