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
 * most 512 elements: one warp per block; up to 2048 vectors of 16 bytes: one CTA per block holding the
 * block in registers between the two passes (the input is read once); up to 65536: one CTA of 1024
 * threads per block (the second pass re-reads the block, from L2 since at most two blocks per SM are in
 * flight); longer blocks (per tensor): amax per chunk combined with atomicMax, then a second kernel
 * quantizes. A block whose amax is not finite, or whose fp16 scale overflows, sets a bit of the
 * status word and writes nothing; the host wrapper then copies nothing back.
 *
 * W8A8, M <= 16: a GEMV-shaped kernel. A warp owns 4 rows of B and streams them once with 16-byte
 * loads; A (M rows, small) comes from L1; __dp4a accumulates 4 products per instruction in int32, and a
 * butterfly of integer shuffles adds the lanes (exact, so order is irrelevant). M > 16: int8 tensor
 * cores, mma.sync.m16n8k32.s8 with int32 accumulators; CTA tiles of 128x128 (4 warps of 64x64) or
 * 64x64 (4 warps of 32x32) for small grids, K in steps of 64 through a 3-stage cp.async pipeline into
 * shared memory padded to 80-byte rows (ldmatrix reads are then free of bank conflicts); unaligned
 * operands or K % 16 != 0 take a byte-wise load of the same tiles. Both finish with the epilogue in
 * registers. On sm_90a builds, grids with enough 128 x 256 (or 128 x 128) tiles to fill the GPU take
 * warpgroup MMA instead (wgmma.m64nNk32.s8 from 128-byte-swizzled shared memory, two warpgroups per
 * CTA, a 4-stage cp.async ring of 128-byte K steps, see k_w8a8_wgmma). Where 128 x 256 tiles fill at
 * least 7/8 of the SMs, a warp-specialized persistent kernel takes over (k_w8a8_tma: one producer
 * thread feeds a 4-stage ring by bulk tensor copies completing on mbarriers, two consumer warpgroups
 * run wgmma.m64n256k32.s8 and the same epilogue). Integer sums are exact for K <= 131071 (checked
 * first), so every path gives the same bits: the choice of kernel is a matter of speed alone.
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
#include <stdlib.h>
#include <string.h>

#include <atomic>

#include "common.cuh"
#include "qgold/cuda.h"
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
__global__ void __launch_bounds__(G == 32 ? QTHREADS : G) k_quant_block(const void *x, size_t len, size_t count, int scale_type, int8_t *q,
                                                                        void *scales, uint32_t *status)
{
    constexpr int TPB = G == 32 ? QTHREADS : G;
    __shared__ uint32_t red[TPB / 32];
    const int t = (int)threadIdx.x % G;
    const size_t b = (size_t)blockIdx.x * (TPB / G) + threadIdx.x / G;
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
    if (G > 32) {
        if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
        __syncthreads();
        m = 0;
#pragma unroll
        for (int w = 0; w < TPB / 32; w++) m = max(m, red[w]);
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

/* Blocks of at most QR_THREADS * R * V elements (V-aligned): each thread keeps its R vectors (elements
 * (j * QR_THREADS + t) * V + 0..V-1) in registers between the amax and the quantization, so the input is
 * read from memory once. One CTA per block. */
constexpr int QR_THREADS = 256;

template <int R, int SRC, int V>
__global__ void __launch_bounds__(QR_THREADS) k_quant_reg(const void *x, size_t len, int scale_type, int8_t *q, void *scales,
                                                          uint32_t *status)
{
    __shared__ uint32_t red[QR_THREADS / 32];
    const size_t b = blockIdx.x, base = b * len;
    float v[R][V];
    uint32_t m = 0;
#pragma unroll
    for (int j = 0; j < R; j++) {
        const size_t i = ((size_t)j * QR_THREADS + threadIdx.x) * V;
        if (i < len) {
            load_vec<SRC, V>(x, base + i, v[j]);
#pragma unroll
            for (int u = 0; u < V; u++) m = max(m, abs_bits(v[j][u]));
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    m = 0;
#pragma unroll
    for (int w = 0; w < QR_THREADS / 32; w++) m = max(m, red[w]);
    float s = 0.0f;
    uint16_t s16 = 0;
    const uint32_t st = scale_of(m, scale_type, &s, &s16);
    if (st != 0) {
        if (threadIdx.x == 0) atomicOr(status, st);
        return;
    }
    if (threadIdx.x == 0) store_scale(scales, scale_type, b, s, s16);
#pragma unroll
    for (int j = 0; j < R; j++) {
        const size_t i = ((size_t)j * QR_THREADS + threadIdx.x) * V;
        if (i < len) {
            int8_t c[V];
#pragma unroll
            for (int u = 0; u < V; u++) c[u] = s == 0.0f ? (int8_t)0 : quantize_value(v[j][u], s);
            store_codes<V>(q, base + i, c);
        }
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
    } else if (V > 1 && len <= (size_t)QR_THREADS * 8 * V) {
        if constexpr (V > 1) {
            if (len <= (size_t)QR_THREADS * 2 * V)
                k_quant_reg<2, SRC, V><<<(unsigned)count, QR_THREADS, 0, st>>>(x, len, scale_type, q, scales, work);
            else if (len <= (size_t)QR_THREADS * 4 * V)
                k_quant_reg<4, SRC, V><<<(unsigned)count, QR_THREADS, 0, st>>>(x, len, scale_type, q, scales, work);
            else
                k_quant_reg<8, SRC, V><<<(unsigned)count, QR_THREADS, 0, st>>>(x, len, scale_type, q, scales, work);
        }
    } else if (len <= QCTA_MAX) {
        /* 1024 threads: at most two blocks per SM in flight, so the second pass finds its block in L2 */
        k_quant_block<1024, SRC, V><<<(unsigned)count, 1024, 0, st>>>(x, len, count, scale_type, q, scales, work);
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
    int pairs; /* N even and the outputs aligned for 2-element stores (8 bytes acc / y32, 4 bytes y16) */
};

/* The pinned chain of intq.md section 2, one rounding per step. */
__device__ __forceinline__ float epilogue_value(const epi_args &e, size_t m, size_t n, int32_t acc)
{
    float t = __int2float_rn(acc);
    t = __fmul_rn(t, e.sb[e.sb_all ? n : 0]);
    t = __fmul_rn(t, e.sa[e.sa_all ? m : 0]);
    if (e.bias != nullptr) {
        const float b = e.bias_f16 ? f16_to_f32(((const uint16_t *)e.bias)[n]) : ((const float *)e.bias)[n];
        t = __fadd_rn(t, b);
    }
    if (e.relu && !isnan(t)) t = t > 0.0f ? t : 0.0f;
    return t;
}

__device__ __forceinline__ void epilogue_store(const epi_args &e, size_t m, size_t n, int32_t acc)
{
    const size_t o = m * e.N + n;
    if (e.acc != nullptr) e.acc[o] = acc;
    if (e.y32 == nullptr && e.y16 == nullptr) return;
    const float t = epilogue_value(e, m, n, acc);
    if (e.y32 != nullptr) e.y32[o] = t;
    if (e.y16 != nullptr) e.y16[o] = f32_to_f16(t);
}

/* Tile epilogues: the scales and bias of the tile's columns and rows are staged in shared memory
 * first (one coalesced pass, before any output is stored), so the per-element chain reads them from
 * shared memory: read from global memory between the output stores, each load would wait for the
 * previous stores (the compiler cannot prove they do not alias) and the epilogue would be latency-bound.
 * The values and the order of the steps are those of epilogue_value. */
struct epi_tile {
    const float *sb, *bias, *sa; /* shared: BN, BN, BM values (bias 0 when absent) */
};

template <int BM, int BN, int THREADS>
__device__ __forceinline__ epi_tile epi_stage(const epi_args &e, size_t m0, size_t n0, float *sh)
{
    epi_tile t = {sh, sh + BN, sh + 2 * BN};
    if (e.y32 != nullptr || e.y16 != nullptr) {
        for (int i = (int)threadIdx.x; i < BN; i += THREADS) {
            const size_t n = n0 + i < e.N ? n0 + i : e.N - 1;
            sh[i] = e.sb[e.sb_all ? n : 0];
            sh[BN + i] = e.bias == nullptr ? 0.0f : e.bias_f16 ? f16_to_f32(((const uint16_t *)e.bias)[n]) : ((const float *)e.bias)[n];
        }
        for (int i = (int)threadIdx.x; i < BM; i += THREADS) {
            const size_t m = m0 + i < e.M ? m0 + i : e.M - 1;
            sh[2 * BN + i] = e.sa[e.sa_all ? m : 0];
        }
    }
    __syncthreads();
    return t;
}

__device__ __forceinline__ float epi_chain(const epi_args &e, int32_t acc, float sb, float sa, float bias)
{
    float t = __fmul_rn(__fmul_rn(__int2float_rn(acc), sb), sa);
    if (e.bias != nullptr) t = __fadd_rn(t, bias);
    if (e.relu && !isnan(t)) t = t > 0.0f ? t : 0.0f;
    return t;
}

/* Element (m, n) and (m, n + 1) of the tile at (m0, n0), local row i = m - m0, column j = n - n0 (even). */
__device__ __forceinline__ void epi_tile_pair(const epi_args &e, const epi_tile &tp, size_t m0, size_t n0, int i, int j, int32_t a0,
                                              int32_t a1)
{
    const size_t m = m0 + i, n = n0 + j;
    if (m >= e.M || n >= e.N) return;
    const size_t o = m * e.N + n;
    const bool two = n + 1 < e.N;
    if (e.acc != nullptr) {
        if (two && e.pairs) *(int2 *)(e.acc + o) = make_int2(a0, a1);
        else {
            e.acc[o] = a0;
            if (two) e.acc[o + 1] = a1;
        }
    }
    if (e.y32 == nullptr && e.y16 == nullptr) return;
    const float sa = tp.sa[i];
    const float t0 = epi_chain(e, a0, tp.sb[j], sa, tp.bias[j]), t1 = epi_chain(e, a1, tp.sb[j + 1], sa, tp.bias[j + 1]);
    if (e.y32 != nullptr) {
        if (two && e.pairs) *(float2 *)(e.y32 + o) = make_float2(t0, t1);
        else {
            e.y32[o] = t0;
            if (two) e.y32[o + 1] = t1;
        }
    }
    if (e.y16 != nullptr) {
        if (two && e.pairs) *(uint32_t *)(e.y16 + o) = (uint32_t)f32_to_f16(t0) | ((uint32_t)f32_to_f16(t1) << 16);
        else {
            e.y16[o] = f32_to_f16(t0);
            if (two) e.y16[o + 1] = f32_to_f16(t1);
        }
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* W8A8, M <= 16: dp4a, a warp per R rows of B, B read once with 16-byte loads                       */

constexpr int SM_WARPS_DEF = 8, SM_R_DEF = 4;

__device__ __forceinline__ int dp4a16(const int4 a, const int4 b, int c)
{
    c = __dp4a(a.x, b.x, c);
    c = __dp4a(a.y, b.y, c);
    c = __dp4a(a.z, b.z, c);
    return __dp4a(a.w, b.w, c);
}

template <int MT, bool VEC, int SM_R = SM_R_DEF, int SM_WARPS = SM_WARPS_DEF>
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
    __syncthreads(); /* the stages are free: the epilogue parameters go there */
    const epi_tile tp = epi_stage<BM, BN, TC_THREADS>(e, m0, n0, (float *)smem);

    /* accumulator layout: c0, c1 at row g, columns 2t, 2t+1; c2, c3 at row g + 8 */
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int h = 0; h < 2; h++)
                epi_tile_pair(e, tp, m0, n0, wm0 + i * 16 + g + h * 8, wn0 + j * 8 + 2 * t, acc[i][j][2 * h], acc[i][j][2 * h + 1]);
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

/* ------------------------------------------------------------------------------------------------ */
/* W8A8, large grids on sm_90a: warpgroup MMA (wgmma.m64nNk32.s8, int32 accumulators)               */
/*                                                                                                  */
/* CTA tile 128 x BN (BN = 256 or 128), two warpgroups of 64 x BN, K in steps of 128 bytes through a  */
/* WG_STAGES-deep ring of cp.async stages. Shared layout of one operand stage: K-major rows of 128     */
/* bytes, the 128-byte swizzle of the tensor cores (16-byte chunk c of row r stored at chunk c ^ (r % 8), */
/* so the 8 rows of a core matrix fall in different banks); 8-row groups 1024 bytes apart (SBO), each */
/* stage 1024-byte aligned; the k32 steps of a stage start 32 bytes apart. Stage kt + S - 2 is loaded  */
/* at iteration kt into the slot of tile kt - 2, whose wgmma every warpgroup has retired (wait_group  */
/* 1 at the end of iteration kt - 1, then the barrier). Built only for sm_90a; elsewhere the kernel   */
/* is empty and the host never launches it (g_int8_wgmma_built reads 0).                            */

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define QG_INT8_WGMMA_BUILT 1
#else
#define QG_INT8_WGMMA_BUILT 0
#endif

__device__ int g_int8_wgmma_built = QG_INT8_WGMMA_BUILT;

constexpr int WG_BM = 128, WG_BK = 128, WG_STAGES = 4, WG_THREADS = 256;

#if QG_INT8_WGMMA_BUILT
constexpr unsigned WG_GROUP = 16; /* row blocks per group of the CTA order (k_w8a8_wgmma) */

__device__ __forceinline__ uint64_t wg_desc(uint32_t addr)
{
    /* start address, LBO 0 (unused with a swizzle), SBO 1024 bytes, layout 1 = 128-byte swizzle */
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }

__device__ __forceinline__ void wgmma_n256(int (&d)[128], uint64_t da, uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p;\n}\n"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]), "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]), "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]), "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
                 : "l"(da), "l"(db), "r"(1));
}
__device__ __forceinline__ void wgmma_n128(int (&d)[64], uint64_t da, uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p;\n}\n"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63])
                 : "l"(da), "l"(db), "r"(1));
}

template <int BN> __device__ __forceinline__ void wgmma_step(int (&d)[BN / 2], uint64_t da, uint64_t db);
template <> __device__ __forceinline__ void wgmma_step<256>(int (&d)[128], uint64_t da, uint64_t db) { wgmma_n256(d, da, db); }
template <> __device__ __forceinline__ void wgmma_step<128>(int (&d)[64], uint64_t da, uint64_t db) { wgmma_n128(d, da, db); }

/* Rows [r0, r0 + ROWS) x bytes [k0, k0 + 128) of a row-major R x K int8 matrix (K % 16 == 0, 16-byte
 * aligned base) into the swizzled layout above; chunks outside the matrix are zero-filled. */
template <int ROWS>
__device__ __forceinline__ void wg_load(int8_t *dst, const int8_t *src, size_t R, size_t K, size_t r0, size_t k0)
{
#pragma unroll
    for (int i = 0; i < ROWS * 8 / WG_THREADS; i++) {
        const int c = (int)threadIdx.x + i * WG_THREADS;
        const int row = c >> 3, kc = c & 7;
        const size_t gr = r0 + row, gk = k0 + (size_t)kc * 16;
        const bool ok = gr < R && gk < K;
        cp_async16(dst + row * 128 + ((kc ^ (row & 7)) << 4), ok ? (const void *)(src + gr * K + gk) : (const void *)src, ok ? 16 : 0);
    }
}
#endif

template <int BN>
__global__ void __launch_bounds__(WG_THREADS, 1) k_w8a8_wgmma(const int8_t *A, const int8_t *B, size_t K, epi_args e)
{
#if QG_INT8_WGMMA_BUILT
    constexpr int ASZ = WG_BM * WG_BK, SSZ = (WG_BM + BN) * WG_BK, S = WG_STAGES;
    extern __shared__ __align__(16) int8_t smem_raw[];
    /* the swizzle pattern is anchored at 1024-byte boundaries: align the ring (1024 bytes of slack) */
    int8_t *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023u)) & 1023u);
    const int wg = (int)threadIdx.x >> 7;
    /* grouped order: CTAs that run together cover WG_GROUP row blocks x a few column blocks (both
     * operands' k-slices are then read by several CTAs of a wave, mostly from L2), instead of one row
     * block x every column block (each slice of B read once per wave, from memory) */
    const unsigned pid = blockIdx.y * gridDim.x + blockIdx.x, per_group = WG_GROUP * gridDim.x;
    const unsigned first = pid / per_group * WG_GROUP, rows = min(gridDim.y - first, WG_GROUP);
    const size_t m0 = (size_t)(first + pid % per_group % rows) * WG_BM, n0 = (size_t)(pid % per_group / rows) * BN;
    const int ktiles = (int)((K + WG_BK - 1) / WG_BK);
    int acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; i++) acc[i] = 0;
#pragma unroll
    for (int s = 0; s < S - 2; s++) {
        if (s < ktiles) {
            wg_load<WG_BM>(smem + s * SSZ, A, e.M, K, m0, (size_t)s * WG_BK);
            wg_load<BN>(smem + s * SSZ + ASZ, B, e.N, K, n0, (size_t)s * WG_BK);
        }
        cp_async_commit();
    }
    for (int kt = 0; kt < ktiles; kt++) {
        cp_async_wait<S - 3>(); /* this thread's chunks of tile kt have landed */
        fence_proxy_async();    /* ... and are visible to the tensor cores' (async) reads */
        __syncthreads();
        {
            const int nk = kt + S - 2;
            if (nk < ktiles) {
                int8_t *st = smem + (nk % S) * SSZ;
                wg_load<WG_BM>(st, A, e.M, K, m0, (size_t)nk * WG_BK);
                wg_load<BN>(st + ASZ, B, e.N, K, n0, (size_t)nk * WG_BK);
            }
            cp_async_commit();
        }
        const uint32_t sa = smem_u32(smem + (kt % S) * SSZ) + (uint32_t)wg * 64 * WG_BK, sb = smem_u32(smem + (kt % S) * SSZ + ASZ);
        wg_fence();
#pragma unroll
        for (int ks = 0; ks < WG_BK / 32; ks++) wgmma_step<BN>(acc, wg_desc(sa + 32 * ks), wg_desc(sb + 32 * ks));
        wg_commit();
        wg_wait<1>();
    }
    wg_wait<0>();
    cp_async_wait<0>();
    __syncthreads(); /* every warpgroup is done with the ring: the epilogue parameters go there */
    const epi_tile tp = epi_stage<WG_BM, BN, WG_THREADS>(e, m0, n0, (float *)smem);

    /* accumulator layout (per warpgroup, m64nN): warp w of the group owns rows 16w..16w+15; acc[4j + r]
     * is row g + 8 (r >> 1), column 8j + 2t + (r & 1), with g = lane / 4, t = lane % 4 */
    const int lane = (int)threadIdx.x & 31, w = ((int)threadIdx.x >> 5) & 3, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < BN / 8; j++)
#pragma unroll
        for (int h = 0; h < 2; h++)
            epi_tile_pair(e, tp, m0, n0, wg * 64 + w * 16 + g + h * 8, j * 8 + 2 * t, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
#endif
}

/* 1 when this process's device code for the GPU holds the wgmma kernels (an sm_90a build on an sm_90
 * device), read once from the device; during a stream capture, before that first read, 0. */
bool wgmma_available(cudaStream_t st)
{
    static std::atomic<int> state(-1);
    int s = state.load();
    if (s >= 0) return s == 1;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(st, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone) {
        cudaGetLastError();
        return false;
    }
    int v = 0;
    if (cudaMemcpyFromSymbol(&v, g_int8_wgmma_built, sizeof v) != cudaSuccess) {
        cudaGetLastError();
        v = 0;
    }
    state.store(v == 1 ? 1 : 0);
    return v == 1;
}

template <int BN> int launch_wgmma(const int8_t *A, const int8_t *B, size_t K, const epi_args &e, cudaStream_t st)
{
    const int smem = WG_STAGES * (WG_BM + BN) * WG_BK + 1024;
    static std::atomic<bool> smem_set(false);
    if (!smem_set.load()) {
        const cudaError_t ce = cudaFuncSetAttribute(k_w8a8_wgmma<BN>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (ce != cudaSuccess) return qg_cuda_fail("cudaFuncSetAttribute(k_w8a8_wgmma)", ce);
        smem_set.store(true);
    }
    const dim3 grid((unsigned)((e.N + BN - 1) / BN), (unsigned)((e.M + WG_BM - 1) / WG_BM));
    k_w8a8_wgmma<BN><<<grid, WG_THREADS, smem, st>>>(A, B, K, e);
    return launch_err("k_w8a8_wgmma launch");
}

/* ------------------------------------------------------------------------------------------------ */
/* W8A8, large M on sm_90a: bulk tensor copies (TMA), warp specialization, persistent CTAs           */
/*                                                                                                  */
/* CTA tile 128 x 256, K in steps of 128 bytes through a TM_STAGES-deep ring of shared stages (A 128  */
/* rows then B 256 rows of 128 bytes, the same 128-byte swizzle as k_w8a8_wgmma, written by the copy  */
/* engine from two tensor maps). Three warpgroups: warpgroup 0 is the producer (one thread issues the */
/* two copies of a stage once its `empty` barrier says every consumer warp has retired the wgmma that */
/* read it; the copy completes on the stage's `full` barrier with its byte count), warpgroups 1 and 2 */
/* are the consumers (rows 0-63 and 64-127 of the tile: wgmma.m64n256k32.s8 into 128 int32 registers */
/* per thread, then the pinned epilogue of epi_tile_pair from registers). setmaxnreg moves registers */
/* from the producer (40) to the consumers (232). The grid holds at most one CTA per SM; CTA c takes  */
/* tiles c, c + grid, ... of a fixed grouped order (tile_of), so the producer fetches the next tile's */
/* stages while the consumers run the epilogue of the current one. Out-of-range rows of A and B and  */
/* bytes past K are zero-filled by the copy engine (the box always counts in full toward the bytes), */
/* so partial tiles add zeros to exact integer sums; the epilogue stores only elements inside M x N.  */
/* The integer sums are exact, so the result is that of every other path, bit for bit.              */

constexpr int TM_BM = 128, TM_BN = 256, TM_BK = 128, TM_STAGES = 4, TM_THREADS = 384;
constexpr int TM_STAGE_BYTES = (TM_BM + TM_BN) * TM_BK;
constexpr int TM_EPI_FLOATS = 2 * TM_BN + 64; /* per consumer warpgroup: sb and bias of the columns, sa of its rows */
constexpr int TM_SMEM = 1024 + TM_STAGES * TM_STAGE_BYTES + 2 * TM_EPI_FLOATS * 4 + 2 * TM_STAGES * 8;

#if QG_INT8_WGMMA_BUILT
constexpr int TM_A_BYTES = TM_BM * TM_BK;
constexpr int TM_CONSUMER_WARPS = 8; /* arrivals that free a stage */

/* Tile t of the grouped order: groups of WG_GROUP row blocks; inside a group, column block by column
 * block, each running down the group's rows (the CTAs in flight together share A and B slices in L2). */
__device__ __forceinline__ void tm_tile_of(unsigned t, unsigned mt, unsigned nt, unsigned *mb, unsigned *nb)
{
    const unsigned per_group = 16u * nt, first = t / per_group * 16u, rows = min(mt - first, 16u), r = t % per_group;
    *mb = first + r % rows;
    *nb = r / rows;
}

/* An arrival on `bar` when `on` (predicated, so the warp does not diverge between wgmma instructions). */
__device__ __forceinline__ void mbar_arrive_if(uint32_t bar, bool on)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %1, 0;\n@p mbarrier.arrive.shared::cta.b64 _, [%0];\n}\n" ::"r"(bar), "r"((int)on) : "memory");
}
/* Two floats from shared memory (8-byte aligned); volatile keeps it after the barrier before it. */
__device__ __forceinline__ float2 lds_f2(uint32_t addr)
{
    float2 v;
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(addr));
    return v;
}
__device__ __forceinline__ void named_sync(int id, int threads) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory"); }
#endif

/* LEAN: whole tiles take the straight-line epilogue (the same chain per element), partial tiles and
 * !LEAN every tile epi_tile_pair. */
template <bool LEAN>
__global__ void __launch_bounds__(TM_THREADS, 1)
    k_w8a8_tma(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB, size_t K, epi_args e)
{
#if QG_INT8_WGMMA_BUILT
    extern __shared__ __align__(16) int8_t smem_raw[];
    int8_t *ring = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023u)) & 1023u);
    float *epi = (float *)(ring + TM_STAGES * TM_STAGE_BYTES);
    uint64_t *bars = (uint64_t *)(epi + 2 * TM_EPI_FLOATS);
    const uint32_t full0 = smem_u32(bars), empty0 = smem_u32(bars + TM_STAGES), ring0 = smem_u32(ring);
    const unsigned mt = (unsigned)((e.M + TM_BM - 1) / TM_BM), nt = (unsigned)((e.N + TM_BN - 1) / TM_BN), tiles = mt * nt;
    const int ktiles = (int)((K + TM_BK - 1) / TM_BK);
    const int wg = (int)threadIdx.x >> 7;
    if (threadIdx.x == 0) {
        for (int s = 0; s < TM_STAGES; s++) {
            mbar_init(full0 + 8 * s, 1);
            mbar_init(empty0 + 8 * s, TM_CONSUMER_WARPS);
        }
        mbar_init_fence();
    }
    __syncthreads();
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        if (threadIdx.x == 0) {
            asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&tmA) : "memory");
            asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&tmB) : "memory");
            int s = 0;
            uint32_t ph = 0;
            for (unsigned t = blockIdx.x; t < tiles; t += gridDim.x) {
                unsigned mb, nb;
                tm_tile_of(t, mt, nt, &mb, &nb);
                for (int kt = 0; kt < ktiles; kt++) {
                    mbar_wait(empty0 + 8 * s, ph ^ 1u); /* every consumer warp has retired the stage's last use */
                    const uint32_t st = ring0 + (uint32_t)(s * TM_STAGE_BYTES), fb = full0 + 8 * s;
                    mbar_expect_tx(fb, TM_STAGE_BYTES);
                    tma_load_2d(st, &tmA, kt * TM_BK, (int)(mb * TM_BM), fb);
                    tma_load_2d(st + TM_A_BYTES, &tmB, kt * TM_BK, (int)(nb * TM_BN), fb);
                    if (++s == TM_STAGES) s = 0, ph ^= 1u;
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
        const int cw = wg - 1, ct = (int)threadIdx.x & 127, lane = ct & 31, w = ct >> 5, g = lane >> 2, tq = lane & 3;
        float *sh = epi + cw * TM_EPI_FLOATS;
        const epi_tile tp = {sh, sh + TM_BN, sh + 2 * TM_BN};
        const bool scaled = e.y32 != nullptr || e.y16 != nullptr;
        const uint32_t aoff = (uint32_t)(cw * 64 * TM_BK);
        int s = 0;
        uint32_t ph = 0;
        int acc[TM_BN / 2];
        for (unsigned t = blockIdx.x; t < tiles; t += gridDim.x) {
            unsigned mb, nb;
            tm_tile_of(t, mt, nt, &mb, &nb);
            const size_t m0 = (size_t)mb * TM_BM + (size_t)cw * 64, n0 = (size_t)nb * TM_BN;
            /* the previous tile's epilogue has read the staged values; this tile's are loaded into
             * registers now (their latency hides behind the main loop) and staged after it */
            named_sync(1 + cw, 128);
            float pre[5] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f}; /* sb, bias of columns ct and ct + 128; sa of row ct */
            if (scaled) {
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const size_t i = (size_t)(ct + 128 * r), n = n0 + i < e.N ? n0 + i : e.N - 1;
                    pre[2 * r] = e.sb[e.sb_all ? n : 0];
                    pre[2 * r + 1] = e.bias == nullptr ? 0.0f
                                     : e.bias_f16      ? f16_to_f32(((const uint16_t *)e.bias)[n])
                                                       : ((const float *)e.bias)[n];
                }
                const size_t m = m0 + ct < e.M ? m0 + ct : e.M - 1;
                if (ct < 64) pre[4] = e.sa[e.sa_all ? m : 0];
            }
#pragma unroll
            for (int i = 0; i < TM_BN / 2; i++) acc[i] = 0;
            int prev = 0;
            for (int kt = 0; kt < ktiles; kt++) {
                mbar_wait(full0 + 8 * s, ph); /* the stage's bytes have landed */
                const uint32_t st = ring0 + (uint32_t)(s * TM_STAGE_BYTES);
                wg_fence();
#pragma unroll
                for (int ks = 0; ks < TM_BK / 32; ks++) wgmma_n256(acc, wg_desc(st + aoff + 32 * ks), wg_desc(st + TM_A_BYTES + 32 * ks));
                wg_commit();
                wg_wait<1>(); /* the previous stage's wgmma have completed: free it */
                mbar_arrive_if(empty0 + 8 * prev, kt > 0 && lane == 0);
                prev = s;
                if (++s == TM_STAGES) s = 0, ph ^= 1u;
            }
            wg_wait<0>();
            mbar_arrive_if(empty0 + 8 * prev, lane == 0);
            if (scaled) {
                sh[ct] = pre[0], sh[TM_BN + ct] = pre[1], sh[ct + 128] = pre[2], sh[TM_BN + ct + 128] = pre[3];
                if (ct < 64) sh[2 * TM_BN + ct] = pre[4];
            }
            named_sync(1 + cw, 128); /* the staged epilogue values are visible */
            /* accumulator layout (m64n256): warp w owns rows 16w..16w+15; acc[4j + r] is row g + 8 (r >> 1),
             * column 8j + 2t + (r & 1), g = lane / 4, t = lane % 4 */
            if (LEAN && e.pairs && e.N % 4 == 0 && ((uintptr_t)e.y16 & 7u) == 0 && m0 + 64 <= e.M && n0 + TM_BN <= e.N) {
                /* a whole tile: no bounds tests, one row offset per row, the two columns' sb and bias by
                 * one 8-byte shared load each, epi_chain as in epi_tile_pair. Column groups ja = 2 jp and
                 * jb = ja + 1 together: a lane holds fp16 pairs at columns 8 ja + 2t and 8 jb + 2t; one
                 * exchange with lane t ^ 1 gives each lane 4 consecutive fp16 values (8 bytes: even t at
                 * column 8 ja + 2t, odd t at 8 ja + 2t + 6), so a quad writes whole 32-byte sectors (two
                 * 16-byte halves of a sector from two instructions were measured at a third of the
                 * int32 output's bandwidth) */
                const int i0 = w * 16 + g, odd = tq & 1;
                const float sa0 = tp.sa[i0], sa1 = tp.sa[i0 + 8];
                const size_t o0 = (m0 + (size_t)i0) * e.N + n0 + 2 * tq, o1 = o0 + 8 * e.N;
#pragma unroll
                for (int jp = 0; jp < TM_BN / 16; jp++) {
                    const int ja = 2 * jp, jb = ja + 1;
                    const float2 sba = lds_f2(smem_u32(sh + ja * 8 + 2 * tq)), ba = lds_f2(smem_u32(sh + TM_BN + ja * 8 + 2 * tq));
                    const float2 sbb = lds_f2(smem_u32(sh + jb * 8 + 2 * tq)), bb = lds_f2(smem_u32(sh + TM_BN + jb * 8 + 2 * tq));
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int32_t a0 = acc[4 * ja + 2 * h], a1 = acc[4 * ja + 2 * h + 1];
                        const int32_t b0 = acc[4 * jb + 2 * h], b1 = acc[4 * jb + 2 * h + 1];
                        const size_t o = (h ? o1 : o0) + 8 * ja;
                        if (e.acc != nullptr) {
                            *(int2 *)(e.acc + o) = make_int2(a0, a1);
                            *(int2 *)(e.acc + o + 8) = make_int2(b0, b1);
                        }
                        if (scaled) {
                            const float sav = h ? sa1 : sa0;
                            const float ta0 = epi_chain(e, a0, sba.x, sav, ba.x), ta1 = epi_chain(e, a1, sba.y, sav, ba.y);
                            const float tb0 = epi_chain(e, b0, sbb.x, sav, bb.x), tb1 = epi_chain(e, b1, sbb.y, sav, bb.y);
                            if (e.y32 != nullptr) {
                                *(float2 *)(e.y32 + o) = make_float2(ta0, ta1);
                                *(float2 *)(e.y32 + o + 8) = make_float2(tb0, tb1);
                            }
                            if (e.y16 != nullptr) {
                                const uint32_t wa = (uint32_t)f32_to_f16(ta0) | ((uint32_t)f32_to_f16(ta1) << 16);
                                const uint32_t wb = (uint32_t)f32_to_f16(tb0) | ((uint32_t)f32_to_f16(tb1) << 16);
                                /* even t keeps wa and takes its partner's wa; odd t keeps wb and takes its partner's wb */
                                const uint32_t x = __shfl_xor_sync(0xFFFFFFFFu, odd ? wa : wb, 1);
                                *(uint2 *)(e.y16 + o + (odd ? 6 : 0)) = odd ? make_uint2(x, wb) : make_uint2(wa, x);
                            }
                        }
                    }
                }
            } else {
#pragma unroll
                for (int j = 0; j < TM_BN / 8; j++)
#pragma unroll
                    for (int h = 0; h < 2; h++)
                        epi_tile_pair(e, tp, m0, n0, w * 16 + g + h * 8, j * 8 + 2 * tq, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
            }
        }
    }
#endif
}

/* Row-major rows x K int8 (K % 16 == 0, 16-byte aligned base) as a 2-D tensor map of boxes of 128 bytes
 * x box_rows rows, 128-byte swizzle, zero fill outside. */
bool tm_map(qg_tm_encode_fn enc, CUtensorMap *map, const int8_t *base, size_t rows, size_t K, unsigned box_rows)
{
    const cuuint64_t dim[2] = {(cuuint64_t)K, (cuuint64_t)rows}, stride[1] = {(cuuint64_t)K};
    const cuuint32_t box[2] = {(cuuint32_t)TM_BK, (cuuint32_t)box_rows}, es[2] = {1, 1};
    return enc(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)base, dim, stride, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* Tiles of the TMA kernel for M x N (it takes at most 2^31 - 1). */
size_t tma_tiles(size_t M, size_t N) { return ((M + TM_BM - 1) / TM_BM) * ((N + TM_BN - 1) / TM_BN); }

/* Caller: wgmma_available, K % 16 == 0, A and B 16-byte aligned. QG_ERR_unsupported when the driver
 * cannot encode the tensor maps (the caller then takes another kernel). */
template <bool LEAN> int launch_tma(const int8_t *A, const int8_t *B, size_t K, const epi_args &e, cudaStream_t st)
{
    const size_t tiles = tma_tiles(e.M, e.N);
    const int sms = qg_cuda_sm_count();
    const qg_tm_encode_fn enc = qg_cuda_tm_encoder();
    if (enc == nullptr || sms <= 0 || tiles > 2147483647u) return QG_ERR_unsupported;
    CUtensorMap ma, mb;
    if (!tm_map(enc, &ma, A, e.M, K, TM_BM) || !tm_map(enc, &mb, B, e.N, K, TM_BN)) return QG_ERR_unsupported;
    static std::atomic<bool> smem_set(false);
    if (!smem_set.load()) {
        const cudaError_t ce = cudaFuncSetAttribute(k_w8a8_tma<LEAN>, cudaFuncAttributeMaxDynamicSharedMemorySize, TM_SMEM);
        if (ce != cudaSuccess) return qg_cuda_fail("cudaFuncSetAttribute(k_w8a8_tma)", ce);
        smem_set.store(true);
    }
    const unsigned grid = (unsigned)(tiles < (size_t)sms ? tiles : (size_t)sms);
    k_w8a8_tma<LEAN><<<grid, TM_THREADS, TM_SMEM, st>>>(ma, mb, K, e);
    return launch_err("k_w8a8_tma launch");
}

template <int MT, bool VEC, int R, int W> void small_go(const int8_t *A, const int8_t *B, size_t K, const epi_args &e, cudaStream_t st)
{
    const size_t warps = (e.N + R - 1) / R, grid = (warps + W - 1) / W;
    k_w8a8_small<MT, VEC, R, W><<<(unsigned)grid, W * 32, 0, st>>>(A, B, K, e);
}

template <int MT> int launch_small(const int8_t *A, const int8_t *B, size_t K, bool vec, const epi_args &e, cudaStream_t st)
{
    /* M = 1: one row of B per warp (measured on the H100: 8192-row matrices stream at about 0.9 of
     * BW_copy against 0.78 with 4 rows per warp, the shorter per-warp tail); larger M share each
     * loaded chunk of B across 4 rows */
    if (MT == 1 && vec) small_go<MT, true, 1, 8>(A, B, K, e, st);
    else if (vec) small_go<MT, true, SM_R_DEF, SM_WARPS_DEF>(A, B, K, e, st);
    else small_go<MT, false, SM_R_DEF, SM_WARPS_DEF>(A, B, K, e, st);
    return launch_err("k_w8a8_small launch");
}

constexpr unsigned GRID_MAX = 2147483647u, GRID_YZ_MAX = 65535u;

/* ------------------------------------------------------------------------------------------------ */
/* W8A16 GEMV: a warp per 4 rows of B, batch MT (<= 16) in registers                                 */

constexpr int WV_WARPS_DEF = 8, WV_R_DEF = 4, WV_CHUNK = 16;

template <int MT, bool VEC, int WV_R = WV_R_DEF, int WV_WARPS = WV_WARPS_DEF>
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

template <int MT, bool VEC, int R, int W>
void w8a16_go(const int8_t *B, const void *sb, int sb_f16, size_t N, size_t K, const uint16_t *X, int M, float *y32, uint16_t *y16,
              cudaStream_t st)
{
    const size_t warps = (N + R - 1) / R, grid = (warps + W - 1) / W;
    k_w8a16<MT, VEC, R, W><<<(unsigned)grid, W * 32, 0, st>>>(B, sb, sb_f16, N, K, X, M, y32, y16);
}

template <int MT>
int launch_w8a16_t(const int8_t *B, const void *sb, int sb_f16, size_t N, size_t K, const uint16_t *X, int M, float *y32, uint16_t *y16,
                   bool vec, cudaStream_t st)
{
    /* batch 1: one row of B per warp, as the W8A8 vector kernel (the order of each sum depends on K only) */
    if (MT == 1 && vec) w8a16_go<MT, true, 1, 8>(B, sb, sb_f16, N, K, X, M, y32, y16, st);
    else if (vec) w8a16_go<MT, true, WV_R_DEF, WV_WARPS_DEF>(B, sb, sb_f16, N, K, X, M, y32, y16, st);
    else w8a16_go<MT, false, WV_R_DEF, WV_WARPS_DEF>(B, sb, sb_f16, N, K, X, M, y32, y16, st);
    return launch_err("k_w8a16 launch");
}

bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* QG_INT8_CUDA_GEMM (read once) pins the W8A8 kernel for tests: "mma" (dp4a / mma.sync as without
 * wgmma), "wgmma128", "wgmma256", "tma" or "tma_plain" (that kernel at every M, where the operands
 * allow 16-byte loads; unsupported where not built; tma_plain: the TMA kernel with the general
 * epilogue on every tile), "wgmma" (the automatic choice without the TMA kernel: the cp.async kernels
 * alone, for same-run comparisons). Unset or anything else: the automatic choice. */
enum { GEMM_AUTO = 0, GEMM_MMA = 1, GEMM_WGMMA128 = 2, GEMM_WGMMA256 = 3, GEMM_TMA = 4, GEMM_TMA_PLAIN = 5, GEMM_NO_TMA = 6 };
int gemm_forced()
{
    static std::atomic<int> v(-1);
    int f = v.load();
    if (f < 0) {
        const char *s = getenv("QG_INT8_CUDA_GEMM");
        f = s == nullptr                    ? GEMM_AUTO
            : strcmp(s, "mma") == 0         ? GEMM_MMA
            : strcmp(s, "wgmma128") == 0    ? GEMM_WGMMA128
            : strcmp(s, "wgmma256") == 0    ? GEMM_WGMMA256
            : strcmp(s, "tma") == 0         ? GEMM_TMA
            : strcmp(s, "tma_plain") == 0   ? GEMM_TMA_PLAIN
            : strcmp(s, "wgmma") == 0       ? GEMM_NO_TMA
                                            : GEMM_AUTO;
        v.store(f);
    }
    return f;
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
    if (N > GRID_MAX || (M + 63) / 64 > GRID_YZ_MAX) return QG_ERR_shape_invalid;
    epi_args e;
    e.sa = p->sa, e.sb = p->sb;
    e.sa_all = p->sa_len != 1;
    e.sb_all = p->sb_len != 1;
    e.bias = p->bias;
    e.bias_f16 = p->bias_type == QG_INT8_F16;
    e.relu = p->relu;
    e.acc = dacc, e.y32 = dy32, e.y16 = dy16;
    e.M = M, e.N = N;
    e.pairs = N % 2 == 0 && ((uintptr_t)dacc & 7u) == 0 && ((uintptr_t)dy32 & 7u) == 0 && ((uintptr_t)dy16 & 3u) == 0;
    cudaStream_t st = (cudaStream_t)stream;
    const bool vec = K % 16 == 0 && aligned16(p->A) && aligned16(p->B);
    /* every path gives the same bits (exact integer sums, one epilogue), so the choice is speed alone */
    const int forced = gemm_forced();
    if (forced == GEMM_WGMMA128 || forced == GEMM_WGMMA256) {
        if (!wgmma_available(st)) return QG_ERR_unsupported;
        if (vec) return forced == GEMM_WGMMA256 ? launch_wgmma<256>(p->A, p->B, K, e, st) : launch_wgmma<128>(p->A, p->B, K, e, st);
    }
    if (forced == GEMM_TMA || forced == GEMM_TMA_PLAIN) {
        if (!wgmma_available(st)) return QG_ERR_unsupported;
        if (vec) return forced == GEMM_TMA ? launch_tma<true>(p->A, p->B, K, e, st) : launch_tma<false>(p->A, p->B, K, e, st);
    }
    if (M <= 16 && forced != GEMM_MMA) {
        if (M == 1) return launch_small<1>(p->A, p->B, K, vec, e, st);
        if (M <= 2) return launch_small<2>(p->A, p->B, K, vec, e, st);
        if (M <= 4) return launch_small<4>(p->A, p->B, K, vec, e, st);
        if (M <= 8) return launch_small<8>(p->A, p->B, K, vec, e, st);
        return launch_small<16>(p->A, p->B, K, vec, e, st);
    }
    /* TMA + warp-specialized warpgroup MMA where built and its 128 x 256 tiles fill at least 7/8 of the
     * SMs (a driver without the tensor-map encoder: the cp.async kernels below) */
    if (vec && forced == GEMM_AUTO && wgmma_available(st) && tma_tiles(M, N) * 8 >= (size_t)qg_cuda_sm_count() * 7) {
        const int rc = launch_tma<true>(p->A, p->B, K, e, st);
        if (rc != QG_ERR_unsupported) return rc;
    }
    /* warpgroup MMA where built and its tiles fill the GPU about once (132 SMs on an H100) */
    const size_t mt = (M + WG_BM - 1) / WG_BM;
    if (vec && (forced == GEMM_AUTO || forced == GEMM_NO_TMA) && wgmma_available(st)) {
        if (mt * ((N + 255) / 256) >= 132) return launch_wgmma<256>(p->A, p->B, K, e, st);
        if (mt * ((N + 127) / 128) >= 132) return launch_wgmma<128>(p->A, p->B, K, e, st);
    }
    /* big tiles when they alone fill the GPU about once, else 64 x 64 tiles */
    const bool big = ((M + 127) / 128) * ((N + 127) / 128) >= 132;
    if (big) return vec ? launch_mma<128, 128, true>(p->A, p->B, K, e, st) : launch_mma<128, 128, false>(p->A, p->B, K, e, st);
    return vec ? launch_mma<64, 64, true>(p->A, p->B, K, e, st) : launch_mma<64, 64, false>(p->A, p->B, K, e, st);
}

extern "C" int qg_int8_w8a16_cuda_async(const int8_t *dB, const void *dsb, qg_int8_ftype sb_type, size_t N, size_t K, const uint16_t *dX,
                                        size_t M, float *dy32, uint16_t *dy16, void *stream)
{
    if (dB == nullptr || dX == nullptr || dsb == nullptr || (dy32 == nullptr && dy16 == nullptr)) return QG_ERR_argument_invalid;
    if (sb_type != QG_INT8_F32 && sb_type != QG_INT8_F16) return QG_ERR_argument_invalid;
    if (M == 0 || N == 0 || K == 0 || N > GRID_MAX) return QG_ERR_shape_invalid;
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
/* host wrappers: validate (the reference's checks, same errors) before anything touches the device,  */
/* then one qg_cuda_run over a launcher that calls the launchers above on the device copies; outputs  */
/* are copied back only when everything succeeded                                                   */

namespace {

struct quant_call {
    qg_int8_qshape s;
    qg_int8_ftype src;
};

/* dev: x, q, scales, workspace. A value error in the status word fails the call, so qg_cuda_run copies
 * no output back (the caller's buffers stay untouched, as with the reference). */
int quant_run(const void *ctx, void *const *dev, void *stream)
{
    const quant_call *c = (const quant_call *)ctx;
    int rc = qg_int8_quantize_cuda_async(&c->s, dev[0], c->src, (int8_t *)dev[1], dev[2], dev[3], stream);
    if (rc != QG_ERR_ok) return rc;
    uint32_t status = 0;
    cudaError_t e = cudaMemcpyAsync(&status, dev[3], 4, cudaMemcpyDeviceToHost, (cudaStream_t)stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize((cudaStream_t)stream);
    if (e != cudaSuccess) return qg_cuda_fail("int8 quantize status word", e);
    return qg_int8_quantize_cuda_status(status);
}

struct dequant_call {
    qg_int8_qshape s;
};

int dequant_run(const void *ctx, void *const *dev, void *stream)
{
    const dequant_call *c = (const dequant_call *)ctx;
    return qg_int8_dequant_cuda_async(&c->s, (const int8_t *)dev[0], dev[1], (float *)dev[2], (uint16_t *)dev[3], stream);
}

struct w8a8_call {
    qg_int8_w8a8_args p; /* host pointers replaced by the device copies in w8a8_run */
};

/* dev: A, B, sa, sb, bias, acc, y32, y16 (absent ones NULL) */
int w8a8_run(const void *ctx, void *const *dev, void *stream)
{
    qg_int8_w8a8_args d = ((const w8a8_call *)ctx)->p;
    d.A = (const int8_t *)dev[0], d.B = (const int8_t *)dev[1];
    d.sa = (const float *)dev[2], d.sb = (const float *)dev[3], d.bias = dev[4];
    return qg_int8_w8a8_cuda_async(&d, (int32_t *)dev[5], (float *)dev[6], (uint16_t *)dev[7], stream);
}

struct w8a16_call {
    qg_int8_ftype sb_type;
    size_t N, K, M;
};

/* dev: B, sb, X, y32, y16 */
int w8a16_run(const void *ctx, void *const *dev, void *stream)
{
    const w8a16_call *c = (const w8a16_call *)ctx;
    return qg_int8_w8a16_cuda_async((const int8_t *)dev[0], dev[1], c->sb_type, c->N, c->K, (const uint16_t *)dev[2], c->M,
                                    (float *)dev[3], (uint16_t *)dev[4], stream);
}

} // namespace

extern "C" int qg_int8_quantize_cuda(const qg_int8_qshape *s, const void *x, qg_int8_ftype src_type, int8_t *q, void *scales)
{
    const int rc = qg_int8_quantize_check(s, x, src_type, q, scales);
    if (rc != QG_ERR_ok) return rc;
    const size_t n = s->rows * s->cols;
    const quant_call c = {*s, src_type};
    const qg_cuda_buf bufs[4] = {{QG_CUDA_IN, (void *)x, n * ftype_size(src_type)},
                                 {QG_CUDA_OUT, q, n},
                                 {QG_CUDA_OUT, scales, qg_int8_num_scales(s) * ftype_size(s->scale_type)},
                                 {QG_CUDA_SCRATCH, nullptr, qg_int8_quantize_cuda_workspace(s)}};
    return qg_cuda_run(bufs, 4, quant_run, &c);
}

extern "C" int qg_int8_dequant_cuda(const qg_int8_qshape *s, const int8_t *q, const void *scales, float *y_f32, uint16_t *y_f16)
{
    const int rc = qg_int8_dequant_check(s, q, scales, y_f32, y_f16);
    if (rc != QG_ERR_ok) return rc;
    const size_t n = s->rows * s->cols;
    const dequant_call c = {*s};
    const qg_cuda_buf bufs[4] = {{QG_CUDA_IN, (void *)q, n},
                                 {QG_CUDA_IN, (void *)scales, qg_int8_num_scales(s) * ftype_size(s->scale_type)},
                                 {QG_CUDA_OUT, y_f32, y_f32 != nullptr ? n * 4 : 0},
                                 {QG_CUDA_OUT, y_f16, y_f16 != nullptr ? n * 2 : 0}};
    return qg_cuda_run(bufs, 4, dequant_run, &c);
}

extern "C" int qg_int8_w8a8_cuda(const qg_int8_w8a8_args *p, int32_t *acc, float *y_f32, uint16_t *y_f16)
{
    const int rc = qg_int8_w8a8_check(p, acc, y_f32, y_f16);
    if (rc != QG_ERR_ok) return rc;
    const size_t M = p->M, N = p->N, K = p->K;
    const bool scaled = y_f32 != nullptr || y_f16 != nullptr;
    w8a8_call c = {*p};
    if (!scaled) c.p.sa_len = c.p.sb_len = 1; /* sa / sb unused (and absent) */
    const qg_cuda_buf bufs[8] = {{QG_CUDA_IN, (void *)p->A, M * K},
                                 {QG_CUDA_IN, (void *)p->B, N * K},
                                 {QG_CUDA_IN, (void *)p->sa, scaled ? p->sa_len * 4 : 0},
                                 {QG_CUDA_IN, (void *)p->sb, scaled ? p->sb_len * 4 : 0},
                                 {QG_CUDA_IN, (void *)p->bias, scaled && p->bias != nullptr ? N * ftype_size(p->bias_type) : 0},
                                 {QG_CUDA_OUT, acc, acc != nullptr ? M * N * 4 : 0},
                                 {QG_CUDA_OUT, y_f32, y_f32 != nullptr ? M * N * 4 : 0},
                                 {QG_CUDA_OUT, y_f16, y_f16 != nullptr ? M * N * 2 : 0}};
    return qg_cuda_run(bufs, 8, w8a8_run, &c);
}

extern "C" int qg_int8_w8a16_cuda(const int8_t *B, const void *sb, qg_int8_ftype sb_type, size_t N, size_t K, const uint16_t *X, size_t M,
                                  float *y_f32, uint16_t *y_f16)
{
    const int rc = qg_int8_w8a16_check(B, sb, sb_type, N, K, X, M, y_f32, y_f16);
    if (rc != QG_ERR_ok) return rc;
    const w8a16_call c = {sb_type, N, K, M};
    const qg_cuda_buf bufs[5] = {{QG_CUDA_IN, (void *)B, N * K},
                                 {QG_CUDA_IN, (void *)sb, N * ftype_size(sb_type)},
                                 {QG_CUDA_IN, (void *)X, M * K * 2},
                                 {QG_CUDA_OUT, y_f32, y_f32 != nullptr ? M * N * 4 : 0},
                                 {QG_CUDA_OUT, y_f16, y_f16 != nullptr ? M * N * 2 : 0}};
    return qg_cuda_run(bufs, 5, w8a16_run, &c);
}
