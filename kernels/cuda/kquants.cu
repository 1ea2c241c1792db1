/* GGUF K-quants on the GPU: bit-exact dequantization and a fused dequant + GEMV with fp16 activations.
 *
 * Exactness. Every weight is decoded in registers exactly as the reference does: a = D*sc and b = Dm*m
 * (exact float32 products of an fp16 and a 6/8-bit integer), then w = a*q - b. a*q is exact too, so
 * fmaf(a, q, -b) rounds once, like the reference's subtraction: the same bits with or without FMA. Q8_K's
 * d*q is one rounding. The file is built with --fmad=false; where a fused multiply-add is wanted it is
 * written as __fmaf_rn.
 *
 * GEMV. Y[b][m] = sum_k W[m][k] X[b][k]: float32 products accumulated with fmaf. A warp owns R rows;
 * its lanes form 4 groups of 8, a group takes one super-block per step (4 consecutive super-blocks per
 * warp step: one contiguous, coalesced stretch of weights), and each lane decodes 32 weights of it.
 * Partial sums are combined by a fixed butterfly (xor 16, 8, 4, 2, 1). Every column of X goes through
 * exactly the same sequence of operations whatever the batch size: results are deterministic and
 * batch-invariant (no atomics). For Q5_K with at most 8192 rows and K >= 8192, two warps share each
 * row group, each taking every other step of 4 super-blocks, and their two sums are added in a
 * fixed order: more warps in flight on shapes that fill about one wave; the choice depends on the type
 * and shape only, never on the batch. Numerics declared in the registry: float32 accumulation, d = K (each
 * lane's chain is shorter), outputs rounded once.
 */
#include <cuda_fp16.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.cuh"
#include "kquants_host.cuh"
#include "qgold/cuda.h"
#include "qgold/kernels_kquants.h"
#include "qgold/kquants.h"
#include "qgold/kquants_layout.h"

namespace {

constexpr int QK = QG_QK_K;

__device__ __forceinline__ float f16f(uint16_t h) { return __half2float(__ushort_as_half(h)); }

__device__ __forceinline__ uint16_t f32_to_f16_bits(float v)
{
    uint32_t b = __float_as_uint(v);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)(((b >> 16) & 0x8000u) | 0x7E00u | ((b >> 13) & 0x3FFu));
    return __half_as_ushort(__float2half_rn(v));
}

/* 6-bit scale and min of sub-block j from the 12 packed bytes (kquants spec). */
__device__ __forceinline__ void scale_min(const uint8_t *q, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

__device__ __forceinline__ uint16_t ld_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

__device__ __forceinline__ float ld_f32(const uint8_t *p)
{
    uint32_t v = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
    return __uint_as_float(v);
}

/* ---- dequantization: one block of 256 threads per super-block, thread t decodes element t ---- */

template <int T>
__device__ __forceinline__ float dequant_one(const uint8_t *blk, int e)
{
    if (T == QG_Q4_K || T == QG_Q5_K) {
        const float D = f16f(ld_u16(blk + QG_Q4K_D)), Dm = f16f(ld_u16(blk + QG_Q4K_DMIN)); /* Q5_K: same header */
        const uint8_t *scales = blk + QG_Q4K_SCALES;
        const uint8_t *qs = blk + (T == QG_Q4_K ? QG_Q4K_QS : QG_Q5K_QS);
        const int c = e / 64, l = e % 64, sub = e / 32;
        int q = l < 32 ? (qs[32 * c + l] & 15) : (qs[32 * c + l - 32] >> 4);
        if (T == QG_Q5_K) q |= ((blk[QG_Q5K_QH + e % 32] >> sub) & 1) << 4;
        int sc, m;
        scale_min(scales, sub, &sc, &m);
        const float a = D * (float)sc, b = Dm * (float)m;
        return a * (float)q - b;
    } else if (T == QG_Q6_K) {
        const uint8_t *ql = blk + QG_Q6K_QL, *qh = blk + QG_Q6K_QH;
        const int8_t *scales = (const int8_t *)(blk + QG_Q6K_SCALES);
        const float D = f16f(ld_u16(blk + QG_Q6K_D));
        const int h = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
        const uint8_t lowb = ql[64 * h + (quarter & 1) * 32 + l];
        const int lo = quarter < 2 ? (lowb & 15) : (lowb >> 4);
        const int hi = (qh[32 * h + l] >> (2 * quarter)) & 3;
        const int q = (lo | (hi << 4)) - 32;
        const float a = D * (float)scales[e / 16];
        return a * (float)q;
    } else {
        const float d = ld_f32(blk + QG_Q8K_D);
        return d * (float)(int8_t)blk[QG_Q8K_QS + e];
    }
}

template <int T>
__global__ void k_dequant(const uint8_t *w, size_t nblocks, size_t bbytes, float *y32, uint16_t *y16)
{
    for (size_t blk = blockIdx.x; blk < nblocks; blk += gridDim.x) {
        const float v = dequant_one<T>(w + blk * bbytes, threadIdx.x);
        const size_t i = blk * QK + threadIdx.x;
        if (y32) y32[i] = v;
        if (y16) y16[i] = f32_to_f16_bits(v);
    }
}

/* ---- GEMV ---- */

/* Exact small integers to float without the slow integer-to-float path: the byte permute builds the
 * float 2^23 + q (q in the low mantissa byte) and one subtraction of 2^23 (+ an offset) is exact. The
 * selector takes byte k of `v` and the bytes 0x00, 0x00, 0x4B above it. */
template <int K>
__device__ __forceinline__ float byte_as_float(uint32_t v, float bias)
{
    return __uint_as_float(__byte_perm(v, 0x4B000000u, 0x7440u | K)) - bias;
}

/* An integer 0..255 as float without the slow integer-conversion unit (exact). */
__device__ __forceinline__ float small_as_float(int v) { return __uint_as_float(0x4B000000u | (uint32_t)v) - 8388608.0f; }

/* The scales and mins of sub-blocks 2c and 2c+1, as byte pairs (byte t = sub-block 2c+t), from the
 * packed scale bytes s[0..11] = header bytes 4..15 held in registers (y = s[0..3], z = s[4..7],
 * w = s[8..11]). The kquants spec's rule, two sub-blocks at a time and without branches or shuffles:
 *   j < 4:  sc = s[j] & 63,                         m = s[j+4] & 63
 *   j >= 4: sc = (s[j+4] & 15) | (s[j-4] >> 6) << 4, m = (s[j+4] >> 4) | (s[j] >> 6) << 4
 * For c < 2 the pair s[2c], s[2c+1] is y >> 16c; for c >= 2 (j = 4 + 2(c-2) + t) s[j+4], s[j-4] and
 * s[j] are the bytes of w, y and z shifted by 16(c-2). (s >> 6) << 4 is (s & 0xC0) >> 2. */
__device__ __forceinline__ void scale_min_pair(const uint4 &h, int c, uint32_t *sc, uint32_t *m)
{
    const int sh = 16 * (c & 1);
    const uint32_t y = h.y >> sh, z = h.z >> sh, w = h.w >> sh;
    const uint32_t sc_lo = y & 0x3F3Fu, m_lo = z & 0x3F3Fu;
    const uint32_t sc_hi = (w & 0x0F0Fu) | ((y >> 2) & 0x3030u), m_hi = ((w >> 4) & 0x0F0Fu) | ((z >> 2) & 0x3030u);
    *sc = c < 2 ? sc_lo : sc_hi;
    *m = c < 2 ? m_lo : m_hi;
}

/* One lane's share of one super-block of one row, as loaded from memory, and its 32 weights decoded in
 * four runs of 8 consecutive k. run_offset() gives where each run starts inside the super-block. */
template <int T>
struct lane_blk;

/* Q4_K / Q5_K: lane j reads qs bytes [16j, 16j+16) = chunk c = j/2, half h = j%2. Runs: low nibbles of
 * bytes 0-7 and 8-15 (k = 64c + 16h + 0..15, sub-block 2c), then the high nibbles (k = 64c + 32 + 16h +
 * 0..15, sub-block 2c+1). Q5_K's fifth bit of element e is bit e/32 of qh[e%32]: bytes 16h..16h+15. */
/* hdr: one uint4 holds the Q4_K/Q5_K header, x = d | dmin << 16, y, z, w = the 12 scale bytes. */
static_assert(QG_Q4K_D == 0 && QG_Q4K_DMIN == 2 && QG_Q4K_SCALES == 4 && QG_Q4K_SCALES + QG_Q4K_SCALES_BYTES == 16,
              "the Q4_K/Q5_K header is one 16-byte load");

template <int T>
struct lane_blk45 {
    uint4 hdr, qs, qh;
    float a0, b0, a1, b1;
    /* Issues the loads only; prep() turns the header into factors later, so a warp does not wait for
     * the next step's header before working on the current step. */
    __device__ __forceinline__ void load(const uint8_t *blk, int j)
    {
        hdr = __ldg(reinterpret_cast<const uint4 *>(blk + QG_Q4K_D));
        qs = __ldcs(reinterpret_cast<const uint4 *>(blk + (T == QG_Q4_K ? QG_Q4K_QS : QG_Q5K_QS) + 16 * j));
        if (T == QG_Q5_K) qh = __ldcs(reinterpret_cast<const uint4 *>(blk + QG_Q5K_QH + 16 * (j & 1)));
    }
    __device__ __forceinline__ void prep(int j)
    {
        const float D = __half2float(__ushort_as_half((uint16_t)(hdr.x & 0xFFFFu)));
        const float Dm = __half2float(__ushort_as_half((uint16_t)(hdr.x >> 16)));
        /* Lane j decodes sub-blocks 2c (low nibbles) and 2c+1 (high nibbles), c = j / 2. */
        uint32_t sc, m;
        scale_min_pair(hdr, j >> 1, &sc, &m);
        /* exact products (kquants spec): an fp16 times a 6-bit integer */
        a0 = D * byte_as_float<0>(sc, 8388608.0f);
        a1 = D * byte_as_float<1>(sc, 8388608.0f);
        b0 = Dm * byte_as_float<0>(m, 8388608.0f);
        b1 = Dm * byte_as_float<1>(m, 8388608.0f);
    }
    __device__ __forceinline__ void decode(int run, int j, float *w) const
    {
        const int hi = run >= 2, c = j >> 1;
        const uint32_t v0 = (run & 1) ? qs.z : qs.x, v1 = (run & 1) ? qs.w : qs.y;
        uint32_t n0 = hi ? (v0 >> 4) & 0x0F0F0F0Fu : v0 & 0x0F0F0F0Fu;
        uint32_t n1 = hi ? (v1 >> 4) & 0x0F0F0F0Fu : v1 & 0x0F0F0F0Fu;
        if (T == QG_Q5_K) {
            const uint32_t h0 = (run & 1) ? qh.z : qh.x, h1 = (run & 1) ? qh.w : qh.y;
            const int sh = 2 * c + hi;
            n0 |= ((h0 >> sh) & 0x01010101u) << 4;
            n1 |= ((h1 >> sh) & 0x01010101u) << 4;
        }
        const float a = hi ? a1 : a0, nb = hi ? -b1 : -b0;
        /* w = a*q - b: a*q is exact, so the fused form rounds once, like the reference. */
        w[0] = __fmaf_rn(a, byte_as_float<0>(n0, 8388608.0f), nb);
        w[1] = __fmaf_rn(a, byte_as_float<1>(n0, 8388608.0f), nb);
        w[2] = __fmaf_rn(a, byte_as_float<2>(n0, 8388608.0f), nb);
        w[3] = __fmaf_rn(a, byte_as_float<3>(n0, 8388608.0f), nb);
        w[4] = __fmaf_rn(a, byte_as_float<0>(n1, 8388608.0f), nb);
        w[5] = __fmaf_rn(a, byte_as_float<1>(n1, 8388608.0f), nb);
        w[6] = __fmaf_rn(a, byte_as_float<2>(n1, 8388608.0f), nb);
        w[7] = __fmaf_rn(a, byte_as_float<3>(n1, 8388608.0f), nb);
    }
    static __device__ __forceinline__ int run_offset(int run, int j) { return 64 * (j >> 1) + 16 * (j & 1) + 8 * (run & 1) + 32 * (run >> 1); }
};

template <>
struct lane_blk<QG_Q4_K> : lane_blk45<QG_Q4_K> {};
template <>
struct lane_blk<QG_Q5_K> : lane_blk45<QG_Q5_K> {};

/* Q6_K: rows are only 2-byte aligned, so 16-bit loads. Lane j: half hh = j/4, l in [l0, l0+8) with
 * l0 = 8(j%4), of each quarter; run = quarter: k = 128hh + 32 quarter + l0 + 0..7. Low nibbles from
 * ql[64hh + l] (quarters 0, 2: low / high nibble) and ql[64hh + 32 + l] (quarters 1, 3), two high bits
 * from qh[32hh + l] (bits 2 quarter, 2 quarter + 1). One int8 scale per run. */
template <>
struct lane_blk<QG_Q6_K> {
    uint32_t L0[2], L1[2], H[2], dbits, sbits[4];
    float a[4];
    static __device__ __forceinline__ uint32_t ld2x16(const uint8_t *p)
    {
        const uint16_t *q = reinterpret_cast<const uint16_t *>(p);
        return (uint32_t)__ldcs(q) | ((uint32_t)__ldcs(q + 1) << 16);
    }
    __device__ __forceinline__ void load(const uint8_t *blk, int j)
    {
        const int hh = j >> 2, l0 = 8 * (j & 3);
        const uint8_t *ql = blk + QG_Q6K_QL + 64 * hh + l0, *qh = blk + QG_Q6K_QH + 32 * hh + l0;
        L0[0] = ld2x16(ql);
        L0[1] = ld2x16(ql + 4);
        L1[0] = ld2x16(ql + 32);
        L1[1] = ld2x16(ql + 36);
        H[0] = ld2x16(qh);
        H[1] = ld2x16(qh + 4);
        dbits = __ldg(reinterpret_cast<const uint16_t *>(blk + QG_Q6K_D));
        const uint8_t *scales = blk + QG_Q6K_SCALES;
#pragma unroll
        for (int q = 0; q < 4; q++) sbits[q] = __ldg(scales + 8 * hh + 2 * q + (l0 >> 4));
    }
    __device__ __forceinline__ void prep(int)
    {
        const float D = __half2float(__ushort_as_half((uint16_t)dbits));
#pragma unroll
        for (int q = 0; q < 4; q++) a[q] = D * (small_as_float((int)((sbits[q] & 0xFFu) ^ 0x80u)) - 128.0f); /* exact: D times an int8 */
    }
    __device__ __forceinline__ void decode(int run, int, float *w) const
    {
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const uint32_t L = (run & 1) ? L1[half] : L0[half];
            const uint32_t lo = run >= 2 ? (L >> 4) & 0x0F0F0F0Fu : L & 0x0F0F0F0Fu;
            const uint32_t v = lo | (((H[half] >> (2 * run)) & 0x03030303u) << 4);
            /* q = v - 32 exactly; a*q is exact (kquants spec), so this product does not round. */
            w[4 * half + 0] = a[run] * byte_as_float<0>(v, 8388640.0f);
            w[4 * half + 1] = a[run] * byte_as_float<1>(v, 8388640.0f);
            w[4 * half + 2] = a[run] * byte_as_float<2>(v, 8388640.0f);
            w[4 * half + 3] = a[run] * byte_as_float<3>(v, 8388640.0f);
        }
    }
    static __device__ __forceinline__ int run_offset(int run, int j) { return 128 * (j >> 2) + 32 * run + 8 * (j & 3); }
};

/* Q8_K: 4-byte aligned; lane j takes qs[32j, 32j+32), run r is k = 32j + 8r + 0..7. int8 is biased
 * to 0..255 (x ^ 0x80) so the byte permute applies; d*q is one rounding, as in the reference. */
template <>
struct lane_blk<QG_Q8_K> {
    uint32_t q[8];
    float d;
    __device__ __forceinline__ void load(const uint8_t *blk, int j)
    {
        d = __ldg(reinterpret_cast<const float *>(blk + QG_Q8K_D));
        const uint32_t *p = reinterpret_cast<const uint32_t *>(blk + QG_Q8K_QS + 32 * j);
#pragma unroll
        for (int i = 0; i < 8; i++) q[i] = __ldcs(p + i) ^ 0x80808080u;
    }
    __device__ __forceinline__ void prep(int) {}
    __device__ __forceinline__ void decode(int run, int, float *w) const
    {
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const uint32_t v = q[2 * run + half];
            w[4 * half + 0] = d * byte_as_float<0>(v, 8388736.0f);
            w[4 * half + 1] = d * byte_as_float<1>(v, 8388736.0f);
            w[4 * half + 2] = d * byte_as_float<2>(v, 8388736.0f);
            w[4 * half + 3] = d * byte_as_float<3>(v, 8388736.0f);
        }
    }
    static __device__ __forceinline__ int run_offset(int run, int j) { return 32 * j + 8 * run; }
};

/* fp16 -> float of 8 packed halves. */
__device__ __forceinline__ void halves8(const uint4 v, float *f)
{
    const __half2 *h = reinterpret_cast<const __half2 *>(&v);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 p = __half22float2(h[i]);
        f[2 * i] = p.x;
        f[2 * i + 1] = p.y;
    }
}

/* A warp owns R consecutive rows; its lanes form 4 groups of 8 and a group takes one super-block per
 * step (4 consecutive super-blocks per warp step). Each activation run is loaded and converted once and
 * used for all R rows. For every (row, column) the chain of fused multiply-adds runs over the lane's
 * super-blocks in order, runs 0..3, elements 0..7, then the butterfly: the same sequence whatever R and
 * B are, hence deterministic and batch-invariant. The next super-block's weights are loaded before the
 * current one is used, so two steps of loads are in flight; the next step's header is turned into
 * factors only after the current step is done, so the warp never waits on it mid-step. Lanes of a
 * group never exchange data in the loop, so groups may run different numbers of steps (K not a
 * multiple of 1024) without any warp-level synchronization. */
/* Blocks per SM the register allocation must allow (measured on an H100, qgold bench). Q4_K at batch 1
 * with two rows per warp fits in 64 registers: 8 blocks, one wave on 8192 rows. At batch 2-4 the
 * compiler would hoist a whole step's activation loads into registers (up to 2x the registers, far
 * fewer warps); 5 blocks (4 for Q5_K, which needs more) keep the earlier register counts, no spills. */
constexpr int gemv_min_blocks(int T, int B, int R)
{
    return R != 2 ? 1 : B == 1 ? (T == QG_Q4_K ? 8 : 1) : (T == QG_Q5_K ? 4 : 5);
}

template <int T, int B, int R>
__global__ void __launch_bounds__(128, gemv_min_blocks(T, B, R)) k_gemv(const uint8_t *w, size_t rows, size_t nb, size_t bbytes, const __half *x, size_t ldx,
                                              float *y32, uint16_t *y16)
{
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t row0 = ((size_t)blockIdx.x * (blockDim.x >> 5) + warp) * R;
    if (row0 >= rows) return; /* whole warp leaves together: no partial-warp shuffles */
    const int group = lane >> 3, j = lane & 7;
    const size_t row_bytes = nb * bbytes;
    /* Pointers advance by one step (4 super-blocks) at a time: no 64-bit index products in the loop. */
    const uint8_t *wp[R];
#pragma unroll
    for (int r = 0; r < R; r++) wp[r] = w + (row0 + r < rows ? row0 + r : rows - 1) * row_bytes + (size_t)group * bbytes; /* tail rows: computed, not stored */
    const size_t stepb = 4 * bbytes;
    float acc[R][B];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < B; b++) acc[r][b] = 0.0f;
    lane_blk<T> cur[R], nxt[R];
    const unsigned nbu = (unsigned)nb;
    unsigned sb = (unsigned)group, stepu = 4;
    /* The step is opaque to the compiler: with a known constant it hoists the next step's activation
     * loads and holds them in registers, which costs occupancy (measured: registers up to 2.5x). */
    asm("" : "+r"(stepu));
    if (sb < nbu)
#pragma unroll
        for (int r = 0; r < R; r++) {
            cur[r].load(wp[r], j);
            cur[r].prep(j);
        }
#pragma unroll 1
    for (; sb < nbu; sb += stepu) {
        if (sb + stepu < nbu)
#pragma unroll
            for (int r = 0; r < R; r++) nxt[r].load(wp[r] + stepb, j);
#pragma unroll
        for (int run = 0; run < 4; run++) {
            float wv[R][8];
#pragma unroll
            for (int r = 0; r < R; r++) cur[r].decode(run, j, wv[r]);
            const __half *xr = x + (sb * (unsigned)QK + (unsigned)lane_blk<T>::run_offset(run, j));
#pragma unroll
            for (int b = 0; b < B; b++) {
                float xf[8];
                halves8(__ldg(reinterpret_cast<const uint4 *>(xr + (unsigned)b * (unsigned)ldx)), xf);
#pragma unroll
                for (int r = 0; r < R; r++)
#pragma unroll
                    for (int i = 0; i < 8; i++) acc[r][b] = __fmaf_rn(wv[r][i], xf[i], acc[r][b]);
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            cur[r] = nxt[r];
            cur[r].prep(j); /* the next step's header arrived while this step was computed */
            wp[r] += stepb;
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < B; b++) {
            float v = acc[r][b];
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, off);
            if (lane == 0 && row0 + r < rows) {
                if (y32) y32[(size_t)b * rows + row0 + r] = v;
                if (y16) y16[(size_t)b * rows + row0 + r] = f32_to_f16_bits(v);
            }
        }
}

/* k_gemv with the K range of each row group split across S warps of the block (S = 2 or 4): part p
 * takes super-blocks 4p + group, 4p + group + 4S, ... (the S warps together cover 4S consecutive
 * super-blocks per step). For every (row, column) each lane's chain runs over its super-blocks in order,
 * runs 0..3, elements 0..7, then the butterfly, then the S partial sums are added in the order
 * p = 0, 1, .., S-1 through shared memory. Nothing depends on R or B: batch-invariant as k_gemv. S is a
 * kernel argument rather than a template constant: measured on an H100, the constant form unrolls the
 * step loop and more than doubles the registers for small batches. */
template <int T, int B, int R>
__global__ void __launch_bounds__(128) k_gemv_split(const uint8_t *w, size_t rows, size_t nb, size_t bbytes, const __half *x,
                                                    size_t ldx, float *y32, uint16_t *y16, int S)
{
    __shared__ float part_sum[4 * R * B];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int part = warp & (S - 1);
    const size_t row0 = ((size_t)blockIdx.x * (unsigned)(4 / S) + (unsigned)(warp / S)) * R;
    const size_t nbw = row0 < rows ? nb : 0; /* idle warps still reach the barrier */
    const int group = lane >> 3, j = lane & 7;
    const size_t row_bytes = nb * bbytes;
    const unsigned first = (unsigned)group + 4u * (unsigned)part, stepu = 4u * (unsigned)S;
    const uint8_t *wp[R];
#pragma unroll
    for (int r = 0; r < R; r++) wp[r] = w + (row0 + r < rows ? row0 + r : rows - 1) * row_bytes + (size_t)first * bbytes; /* tail rows: computed, not stored */
    const size_t stepb = stepu * bbytes;
    float acc[R][B];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < B; b++) acc[r][b] = 0.0f;
    lane_blk<T> cur[R], nxt[R];
    const unsigned nbu = (unsigned)nbw;
    unsigned sb = first;
    if (sb < nbu)
#pragma unroll
        for (int r = 0; r < R; r++) {
            cur[r].load(wp[r], j);
            cur[r].prep(j);
        }
#pragma unroll 1
    for (; sb < nbu; sb += stepu) {
        if (sb + stepu < nbu)
#pragma unroll
            for (int r = 0; r < R; r++) nxt[r].load(wp[r] + stepb, j);
#pragma unroll
        for (int run = 0; run < 4; run++) {
            float wv[R][8];
#pragma unroll
            for (int r = 0; r < R; r++) cur[r].decode(run, j, wv[r]);
            const __half *xr = x + (sb * (unsigned)QK + (unsigned)lane_blk<T>::run_offset(run, j));
#pragma unroll
            for (int b = 0; b < B; b++) {
                float xf[8];
                halves8(__ldg(reinterpret_cast<const uint4 *>(xr + (unsigned)b * (unsigned)ldx)), xf);
#pragma unroll
                for (int r = 0; r < R; r++)
#pragma unroll
                    for (int i = 0; i < 8; i++) acc[r][b] = __fmaf_rn(wv[r][i], xf[i], acc[r][b]);
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            cur[r] = nxt[r];
            cur[r].prep(j); /* the next step's header arrived while this step was computed */
            wp[r] += stepb;
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < B; b++) {
            float v = acc[r][b];
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, off);
            if (lane == 0) part_sum[(warp * R + r) * B + b] = v;
        }
    __syncthreads();
    if (part != 0) return;
    for (int i = lane; i < R * B; i += 32) {
        const int r = i / B, b = i % B;
        float v = part_sum[(warp * R + r) * B + b];
        for (int p = 1; p < S; p++) v += part_sum[((warp + p) * R + r) * B + b];
        if (row0 + r < rows) {
            if (y32) y32[(size_t)b * rows + row0 + r] = v;
            if (y16) y16[(size_t)b * rows + row0 + r] = f32_to_f16_bits(v);
        }
    }
}

/* Rows per warp: more rows reuse each activation load more, fewer keep more warps in flight on small
 * matrices and fewer registers for large batches. Results do not depend on it. */
template <int T, int B>
int launch_gemv_b(const uint8_t *w, size_t rows, size_t cols, const __half *x, float *y32, uint16_t *y16, cudaStream_t s, int R, int S)
{
    const size_t nb = cols / QK, bbytes = qg_kq_block_bytes((qg_ktype)T);
    if constexpr (T == QG_Q5_K) /* the only type k_split() splits */
        if (S > 1) {
            const unsigned groups = 4 / (unsigned)S, grid = (unsigned)((rows + (size_t)groups * R - 1) / ((size_t)groups * R));
            if (R == 1) k_gemv_split<T, B, 1><<<grid, 128, 0, s>>>(w, rows, nb, bbytes, x, cols, y32, y16, S);
            else if (R == 2) k_gemv_split<T, B, 2><<<grid, 128, 0, s>>>(w, rows, nb, bbytes, x, cols, y32, y16, S);
            else k_gemv_split<T, B, 4><<<grid, 128, 0, s>>>(w, rows, nb, bbytes, x, cols, y32, y16, S);
            return QG_ERR_ok;
        }
    const unsigned threads = 128, warps = threads / 32;
    const unsigned grid = (unsigned)((rows + (size_t)warps * R - 1) / ((size_t)warps * R));
    if (R == 1) k_gemv<T, B, 1><<<grid, threads, 0, s>>>(w, rows, nb, bbytes, x, cols, y32, y16);
    else if (R == 2) k_gemv<T, B, 2><<<grid, threads, 0, s>>>(w, rows, nb, bbytes, x, cols, y32, y16);
    else k_gemv<T, B, 4><<<grid, threads, 0, s>>>(w, rows, nb, bbytes, x, cols, y32, y16);
    return QG_ERR_ok;
}

int rows_per_warp(size_t rows, size_t batch)
{
    const char *env = getenv("QG_CUDA_KQ_ROWS"); /* tuning knob; results are identical for every value */
    if (env != nullptr && (env[0] == '1' || env[0] == '2' || env[0] == '4') && env[1] == '\0') return env[0] - '0';
    /* Measured on an H100 (qgold bench): one row per warp keeps small matrices busy at batch 1; larger
     * batches are bound by the multiply-adds and reuse each activation load across more rows. */
    if (batch == 1) return rows >= 8192 ? 2 : 1;
    return batch <= 4 ? 2 : 4;
}

/* Warps per row group (K split): a function of the type and shape only, never of the batch, because it
 * fixes the summation order. Measured on an H100 (qgold bench) at rows <= 8192, K >= 8192: two warps per
 * row group make Q5_K 10-13% faster at batch 1; Q4_K at batch 1 is not faster, and Q6_K at batch 8 is
 * much slower. */
int k_split(qg_ktype t, size_t rows, size_t cols)
{
    return t == QG_Q5_K && rows <= 8192 && cols / QK >= 32 ? 2 : 1;
}

template <int T>
int launch_gemv_t(const uint8_t *w, size_t rows, size_t cols, const uint16_t *x, size_t batch, float *y32, uint16_t *y16,
                  cudaStream_t s)
{
    const __half *xh = reinterpret_cast<const __half *>(x);
    const int R = rows_per_warp(rows, batch), S = k_split((qg_ktype)T, rows, cols);
    switch (batch) {
#define QG_CASE(BB) \
    case BB: launch_gemv_b<T, BB>(w, rows, cols, xh, y32, y16, s, R, S); break;
        QG_CASE(1) QG_CASE(2) QG_CASE(3) QG_CASE(4) QG_CASE(5) QG_CASE(6) QG_CASE(7) QG_CASE(8)
        QG_CASE(9) QG_CASE(10) QG_CASE(11) QG_CASE(12) QG_CASE(13) QG_CASE(14) QG_CASE(15) QG_CASE(16)
#undef QG_CASE
    default: return QG_ERR_kq_batch_out_of_range;
    }
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? QG_ERR_ok : qg_cuda_fail("k_gemv launch", e);
}

int launch_gemv(qg_ktype t, const uint8_t *w, size_t rows, size_t cols, const uint16_t *x, size_t batch, float *y32, uint16_t *y16,
                cudaStream_t s)
{
    switch (t) {
    case QG_Q4_K: return launch_gemv_t<QG_Q4_K>(w, rows, cols, x, batch, y32, y16, s);
    case QG_Q5_K: return launch_gemv_t<QG_Q5_K>(w, rows, cols, x, batch, y32, y16, s);
    case QG_Q6_K: return launch_gemv_t<QG_Q6_K>(w, rows, cols, x, batch, y32, y16, s);
    case QG_Q8_K: return launch_gemv_t<QG_Q8_K>(w, rows, cols, x, batch, y32, y16, s);
    }
    return QG_ERR_kq_type_unknown;
}

int launch_dequant(qg_ktype t, const uint8_t *w, size_t nblocks, float *y32, uint16_t *y16, cudaStream_t s)
{
    const size_t bb = qg_kq_block_bytes(t);
    const unsigned grid = (unsigned)(nblocks < 65535u * 8u ? nblocks : 65535u * 8u);
    if (nblocks == 0) return QG_ERR_ok;
    switch (t) {
    case QG_Q4_K: k_dequant<QG_Q4_K><<<grid, QK, 0, s>>>(w, nblocks, bb, y32, y16); break;
    case QG_Q5_K: k_dequant<QG_Q5_K><<<grid, QK, 0, s>>>(w, nblocks, bb, y32, y16); break;
    case QG_Q6_K: k_dequant<QG_Q6_K><<<grid, QK, 0, s>>>(w, nblocks, bb, y32, y16); break;
    case QG_Q8_K: k_dequant<QG_Q8_K><<<grid, QK, 0, s>>>(w, nblocks, bb, y32, y16); break;
    default: return QG_ERR_kq_type_unknown;
    }
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? QG_ERR_ok : qg_cuda_fail("k_dequant launch", e);
}

/* Host side of dequantization: the kernel's sizes; qg_cuda_run uploads the blocks, guards the output
 * and copies it back. dev[] = blocks, y_f32, y_f16 (the absent output is NULL). */
struct dequant_call {
    qg_ktype t;
    size_t nblocks;
};

int launch_dequant_dev(const void *ctx, void *const *dev, void *stream)
{
    const dequant_call *c = (const dequant_call *)ctx;
    return launch_dequant(c->t, (const uint8_t *)dev[0], c->nblocks, (float *)dev[1], (uint16_t *)dev[2], (cudaStream_t)stream);
}

/* Exactly one of y32 / y16 is given (the two exports below). */
int dequant_host(qg_ktype t, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, float *y32, uint16_t *y16)
{
    int rc = qg_kq_check_shape(t, rows, cols, nbytes);
    if (rc != QG_ERR_ok) return rc;
    if (blocks == nullptr || (y32 == nullptr && y16 == nullptr)) return QG_ERR_argument_invalid;
    const size_t n = rows * cols; /* n * 4 cannot overflow: checked by qg_kq_check_shape */
    const dequant_call c = {t, nbytes / qg_kq_block_bytes(t)};
    const qg_cuda_buf bufs[3] = {
        {QG_CUDA_IN, (void *)blocks, nbytes},
        {QG_CUDA_OUT, y32, y32 != nullptr ? n * sizeof(float) : 0},
        {QG_CUDA_OUT, y16, y16 != nullptr ? n * sizeof(uint16_t) : 0},
    };
    return qg_cuda_run(bufs, 3, launch_dequant_dev, &c);
}

} // namespace

extern "C" int qg_kq_dequant_cuda_async(qg_ktype t, const void *dblocks, size_t rows, size_t cols, float *dy_f32, uint16_t *dy_f16,
                                        void *stream)
{
    return launch_dequant(t, (const uint8_t *)dblocks, rows * (cols / QK), dy_f32, dy_f16, (cudaStream_t)stream);
}

extern "C" int qg_kq_dequant_f32_cuda(qg_ktype t, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, float *y)
{
    return dequant_host(t, blocks, nbytes, rows, cols, y, nullptr);
}

extern "C" int qg_kq_dequant_f16_cuda(qg_ktype t, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, uint16_t *y)
{
    return dequant_host(t, blocks, nbytes, rows, cols, nullptr, y);
}

/* Validated with the reference's checks, then launched through qg_kq_gemv_cuda_async (kquants_host.cuh). */
extern "C" int qg_kq_gemv_cuda(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                               float *y_f32, uint16_t *y_f16)
{
    const int rc = qg_kq_check_gemv(t, w, nbytes, rows, cols, x, batch, y_f32, y_f16);
    if (rc != QG_ERR_ok) return rc;
    return qg_kq_host::run_product(qg_kq_gemv_cuda_async, t, w, nbytes, rows, cols, x, batch, y_f32, y_f16);
}

extern "C" int qg_kq_gemv_cuda_async(qg_ktype t, const void *dw, size_t rows, size_t cols, const void *dx, size_t batch, float *dy32,
                                     uint16_t *dy16, void *stream)
{
    return launch_gemv(t, (const uint8_t *)dw, rows, cols, (const uint16_t *)dx, batch, dy32, dy16, (cudaStream_t)stream);
}
