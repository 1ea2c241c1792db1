/* K-quant products for batch 1..64 on tensor cores (the `gemm` path).
 *
 * Spec: reference/spec/numerics.md, "K-quant products on tensor cores". Per 32-weight sub-block the
 * tensor core sees exact inputs: the integer codes q (|q| <= 255 after a bias, exact in fp16) and the
 * fp16 activations; mma.sync m16n8k16 (fp16 in, float32 accumulate) gives the partial sums sum_i q_i x_i
 * for 16 rows x 8 columns. The scales are applied in float32 on CUDA cores:
 *   Q4_K/Q5_K: part = fma(a, S, part); part = fma(-b, SX, part)  (a = D*sc, b = Dm*m, SX = sum x by an
 *              mma with an all-ones A), per sub-block of 32 (2 mma blocks for S, 2 for SX);
 *   Q6_K:      part = fma(a_g, S_g, part) per group of 16 (1 mma block each);
 *   Q8_K:      part = d * S with S one mma chain of 16 blocks over the super-block;
 * and acc = acc + part once per super-block. The 4 warps of a block share 16 rows: warp w takes the
 * super-blocks w, w + 4, ... in order, and the block adds the four totals in the order 0, 1, 2, 3 (a
 * split fixed by K alone). Every product, sum and scale product is a separate float32 rounding or one
 * mma block; with qgold's tensor-core model (u_acc = QG_MMA_U_ACC = 2^-21) the longest chain is at most
 * K/16 + K/256 + 5, which is <= K for every K >= 256: the registry row declares d = K.
 *
 * Fragments. A warp works on 16 rows (thread lane: rows g = lane/4 and g+8, k slots of t = lane%4). Inside a
 * 16-wide k chunk, mma slot 2t+i takes k = 4t+i and slot 2t+8+i takes k = 4t+2+i (i = 0, 1), for A
 * (codes) and B (activations) alike, so a thread reads 4 consecutive codes of each of its two rows and 4
 * consecutive activations of its column: the exact sum is unchanged by this fixed permutation. Both are
 * read straight from global memory (activations stay in L1/L2); the loop has no barrier.
 *
 * Batch invariance by construction: every batch size 1..64 runs this kernel; a column's mma result
 * depends only on that column of B and of C, the column's flags only on its activations, and the
 * sequence of operations per (row, column) does not depend on how many n8 tiles (columns) the block
 * carries. Deterministic: no atomics.
 *
 * Special values. Where a super-block's scales are not finite (Q8_K: |d| > 2^96, where d*q or d*S
 * may overflow) or a column's activations in it hold an inf or NaN, the sub-block decomposition would not
 * give IEEE's NaN/inf class of the exact sum, so those (row, column, super-block) contributions are
 * recomputed from the exactly decoded weights on CUDA cores (float32 fma chain of 256, within the same
 * bound). The decision depends on the row's bytes and the column's values only.
 */
#include <cuda_fp16.h>
#include <stdint.h>

#include "common.cuh"
#include "kquants_host.cuh"
#include "qgold/cuda.h"
#include "qgold/kernels_kquants_gemm.h"
#include "qgold/kquants_layout.h"

namespace {

constexpr int QK = QG_QK_K;
constexpr int WARPS = 4;          /* warps of a block: one row tile, super-blocks split 4 ways */
constexpr int ROWS_PER_BLOCK = 16;

__device__ __forceinline__ float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }

__device__ __forceinline__ uint16_t f32_to_f16_bits(float v)
{
    uint32_t b = __float_as_uint(v);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)(((b >> 16) & 0x8000u) | 0x7E00u | ((b >> 13) & 0x3FFu));
    return __half_as_ushort(__float2half_rn(v));
}

__device__ __forceinline__ bool f16_nonfinite(uint32_t h) { return (h & 0x7C00u) == 0x7C00u; }

/* Any of the 4 fp16 values inf or NaN. */
__device__ __forceinline__ bool any_nonfinite4(const uint2 v)
{
    return f16_nonfinite(v.x) || f16_nonfinite(v.x >> 16) || f16_nonfinite(v.y) || f16_nonfinite(v.y >> 16);
}

/* 4 bytes from a 2-byte aligned address (Q6_K rows). */
__device__ __forceinline__ uint32_t ld_u32_a2(const uint8_t *p)
{
    const uint16_t *q = reinterpret_cast<const uint16_t *>(p);
    return (uint32_t)__ldg(q) | ((uint32_t)__ldg(q + 1) << 16);
}

__device__ __forceinline__ uint32_t ld_u32(const uint8_t *p) { return __ldg(reinterpret_cast<const uint32_t *>(p)); }

/* Byte i of the 12 packed scale bytes held in (y, z, w) of the Q4_K/Q5_K header. */
__device__ __forceinline__ uint32_t sbyte(const uint4 &h, int i)
{
    const uint32_t v = i < 4 ? h.y : (i < 8 ? h.z : h.w);
    return (v >> (8 * (i & 3))) & 0xFFu;
}

/* 6-bit scale and min of sub-block j (kquants spec). */
__device__ __forceinline__ void scale_min(const uint4 &h, int j, float *sc, float *m)
{
    uint32_t s, mm;
    if (j < 4) {
        s = sbyte(h, j) & 63u;
        mm = sbyte(h, j + 4) & 63u;
    } else {
        s = (sbyte(h, j + 4) & 15u) | ((sbyte(h, j - 4) >> 6) << 4);
        mm = (sbyte(h, j + 4) >> 4) | ((sbyte(h, j) >> 6) << 4);
    }
    *sc = (float)s;
    *m = (float)mm;
}

/* Four biased codes (bytes of v) of row g and four of row g+8 -> the A fragment: fp16 (1024 + u) built
 * by placing u in the mantissa of 1024 = 0x6400, then (1024 + bias) subtracted: exact, the result is the
 * signed integer code (|code| <= 128). */
__device__ __forceinline__ uint32_t hsub_bits(uint32_t a, uint32_t b)
{
    const __half2 r = __hsub2(*reinterpret_cast<const __half2 *>(&a), *reinterpret_cast<const __half2 *>(&b));
    return *reinterpret_cast<const uint32_t *>(&r);
}

__device__ __forceinline__ void make_a(uint32_t v0, uint32_t v1, uint32_t bias2, uint32_t (&a)[4])
{
    a[0] = hsub_bits(__byte_perm(v0, 0x64u, 0x4140u), bias2); /* row g,   slots 2t, 2t+1   = k 4t, 4t+1 */
    a[1] = hsub_bits(__byte_perm(v1, 0x64u, 0x4140u), bias2); /* row g+8, slots 2t, 2t+1 */
    a[2] = hsub_bits(__byte_perm(v0, 0x64u, 0x4342u), bias2); /* row g,   slots 2t+8, 2t+9 = k 4t+2, 4t+3 */
    a[3] = hsub_bits(__byte_perm(v1, 0x64u, 0x4342u), bias2); /* row g+8 */
}

/* d = A * B + c, m16n8k16, fp16 inputs, float32 accumulation. */
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, const float (&c)[4])
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

/* The exact float32 decode of element e of a block, as the reference (for the special-value path). */
template <int T>
__device__ float decode_one(const uint8_t *blk, int e)
{
    if (T == QG_Q4_K || T == QG_Q5_K) {
        const float D = h2f((uint16_t)(__ldg(blk + QG_Q4K_D) | (__ldg(blk + QG_Q4K_D + 1) << 8)));
        const float Dm = h2f((uint16_t)(__ldg(blk + QG_Q4K_DMIN) | (__ldg(blk + QG_Q4K_DMIN + 1) << 8)));
        const uint8_t *s = blk + QG_Q4K_SCALES;
        const uint8_t *qs = blk + (T == QG_Q4_K ? QG_Q4K_QS : QG_Q5K_QS);
        const int c = e / 64, l = e % 64, sub = e / 32;
        int q = l < 32 ? (__ldg(qs + 32 * c + l) & 15) : (__ldg(qs + 32 * c + l - 32) >> 4);
        if (T == QG_Q5_K) q |= ((__ldg(blk + QG_Q5K_QH + e % 32) >> sub) & 1) << 4;
        int sc, m;
        if (sub < 4) {
            sc = __ldg(s + sub) & 63;
            m = __ldg(s + sub + 4) & 63;
        } else {
            sc = (__ldg(s + sub + 4) & 15) | ((__ldg(s + sub - 4) >> 6) << 4);
            m = (__ldg(s + sub + 4) >> 4) | ((__ldg(s + sub) >> 6) << 4);
        }
        const float a = __fmul_rn(D, (float)sc), b = __fmul_rn(Dm, (float)m);
        return __fsub_rn(__fmul_rn(a, (float)q), b);
    } else if (T == QG_Q6_K) {
        const float D = h2f((uint16_t)(__ldg(blk + QG_Q6K_D) | (__ldg(blk + QG_Q6K_D + 1) << 8)));
        const int h = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
        const int lowb = __ldg(blk + QG_Q6K_QL + 64 * h + (quarter & 1) * 32 + l);
        const int lo = quarter < 2 ? (lowb & 15) : (lowb >> 4);
        const int hi = (__ldg(blk + QG_Q6K_QH + 32 * h + l) >> (2 * quarter)) & 3;
        const int q = (lo | (hi << 4)) - 32;
        const float a = __fmul_rn(D, (float)(int8_t)__ldg(blk + QG_Q6K_SCALES + e / 16));
        return __fmul_rn(a, (float)q);
    } else {
        const float d = __ldg(reinterpret_cast<const float *>(blk + QG_Q8K_D));
        return __fmul_rn(d, (float)(int8_t)__ldg(blk + QG_Q8K_QS + e));
    }
}

template <int T>
__device__ float special_part(const uint8_t *blk, const __half *xcol)
{
    float s = 0.0f;
    for (int k = 0; k < QK; k++) s = __fmaf_rn(decode_one<T>(blk, k), __half2float(__ldg(xcol + k)), s);
    return s;
}

/* The B fragment of column col (zeros past the batch) for the 16-wide chunks at k = off and off + 16 of
 * the super-block starting at xsb; bit n of xm is set where one of the values is inf or NaN. */
__device__ __forceinline__ void load_b(const __half *xsb, size_t cols, int batch, int col, int off, int n, uint2 &b0, uint2 &b1,
                                       uint32_t &xm)
{
    b0 = make_uint2(0u, 0u);
    b1 = make_uint2(0u, 0u);
    if (col < batch) {
        const __half *p = xsb + (size_t)col * cols + off;
        b0 = __ldg(reinterpret_cast<const uint2 *>(p));
        b1 = __ldg(reinterpret_cast<const uint2 *>(p + 16));
    }
    if (any_nonfinite4(b0) || any_nonfinite4(b1)) xm |= 1u << n;
}

/* One super-block of the thread's two rows (blocks pa, pb) against NT n8 column tiles of the activations
 * (xsb: column 0 at this super-block's first k): adds the super-block's contribution to part (zero on
 * entry), says whether each row's scales are special, and sets bit n of xm where the thread's
 * activations of column 8n + g are. */
template <int T, int NT>
__device__ __forceinline__ void superblock(const uint8_t *pa, const uint8_t *pb, const __half *xsb, size_t cols, int batch, int g,
                                           int t, float (&part)[NT][4], bool *spa, bool *spb, uint32_t &xm)
{
    const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if constexpr (T == QG_Q4_K || T == QG_Q5_K) {
        constexpr int QS = T == QG_Q4_K ? QG_Q4K_QS : QG_Q5K_QS;
        const uint4 ha = __ldg(reinterpret_cast<const uint4 *>(pa)), hb = __ldg(reinterpret_cast<const uint4 *>(pb));
        *spa = f16_nonfinite(ha.x) || f16_nonfinite(ha.x >> 16);
        *spb = f16_nonfinite(hb.x) || f16_nonfinite(hb.x >> 16);
        const float Da = h2f((uint16_t)ha.x), Dma = h2f((uint16_t)(ha.x >> 16));
        const float Db = h2f((uint16_t)hb.x), Dmb = h2f((uint16_t)(hb.x >> 16));
        uint32_t qa[4][2], qb[4][2], qha[2] = {0, 0}, qhb[2] = {0, 0};
#pragma unroll
        for (int c = 0; c < 4; c++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                qa[c][h] = ld_u32(pa + QS + 32 * c + 16 * h + 4 * t);
                qb[c][h] = ld_u32(pb + QS + 32 * c + 16 * h + 4 * t);
            }
        if constexpr (T == QG_Q5_K) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                qha[h] = ld_u32(pa + QG_Q5K_QH + 16 * h + 4 * t);
                qhb[h] = ld_u32(pb + QG_Q5K_QH + 16 * h + 4 * t);
            }
        }
        const uint32_t ones[4] = {0x3C003C00u, 0x3C003C00u, 0x3C003C00u, 0x3C003C00u};
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int c = j >> 1, hi = j & 1;
            uint32_t A[2][4];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                uint32_t va = hi ? (qa[c][h] >> 4) & 0x0F0F0F0Fu : qa[c][h] & 0x0F0F0F0Fu;
                uint32_t vb = hi ? (qb[c][h] >> 4) & 0x0F0F0F0Fu : qb[c][h] & 0x0F0F0F0Fu;
                if constexpr (T == QG_Q5_K) {
                    va |= ((qha[h] >> j) & 0x01010101u) << 4;
                    vb |= ((qhb[h] >> j) & 0x01010101u) << 4;
                }
                make_a(va, vb, 0x64006400u, A[h]);
            }
            float sca, ma, scb, mb;
            scale_min(ha, j, &sca, &ma);
            scale_min(hb, j, &scb, &mb);
            /* exact products (kquants spec): an fp16 times a 6-bit integer */
            const float aa = __fmul_rn(Da, sca), ba = __fmul_rn(Dma, ma), ab = __fmul_rn(Db, scb), bbv = __fmul_rn(Dmb, mb);
#pragma unroll
            for (int n = 0; n < NT; n++) {
                uint2 b0, b1;
                load_b(xsb, cols, batch, 8 * n + g, 32 * j + 4 * t, n, b0, b1, xm);
                float s[4], sx[4];
                mma16816(s, A[0], b0.x, b0.y, zero);
                mma16816(s, A[1], b1.x, b1.y, s);
                mma16816(sx, ones, b0.x, b0.y, zero);
                mma16816(sx, ones, b1.x, b1.y, sx);
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const float a = i < 2 ? aa : ab, b = i < 2 ? ba : bbv;
                    part[n][i] = __fmaf_rn(a, s[i], part[n][i]);
                    part[n][i] = __fmaf_rn(-b, sx[i], part[n][i]);
                }
            }
        }
    } else if constexpr (T == QG_Q6_K) {
        const uint32_t da = (uint32_t)__ldg(reinterpret_cast<const uint16_t *>(pa + QG_Q6K_D));
        const uint32_t db = (uint32_t)__ldg(reinterpret_cast<const uint16_t *>(pb + QG_Q6K_D));
        *spa = f16_nonfinite(da);
        *spb = f16_nonfinite(db);
        const float Da = h2f((uint16_t)da), Db = h2f((uint16_t)db);
        uint32_t La[2][4], Lb[2][4], Ha[2][2], Hb[2][2], Sa[4], Sb[4];
#pragma unroll
        for (int h = 0; h < 2; h++) {
#pragma unroll
            for (int p = 0; p < 4; p++) {
                La[h][p] = ld_u32_a2(pa + QG_Q6K_QL + 64 * h + 16 * p + 4 * t);
                Lb[h][p] = ld_u32_a2(pb + QG_Q6K_QL + 64 * h + 16 * p + 4 * t);
            }
#pragma unroll
            for (int p = 0; p < 2; p++) {
                Ha[h][p] = ld_u32_a2(pa + QG_Q6K_QH + 32 * h + 16 * p + 4 * t);
                Hb[h][p] = ld_u32_a2(pb + QG_Q6K_QH + 32 * h + 16 * p + 4 * t);
            }
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            Sa[i] = ld_u32_a2(pa + QG_Q6K_SCALES + 4 * i);
            Sb[i] = ld_u32_a2(pb + QG_Q6K_SCALES + 4 * i);
        }
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int h = j >> 2, quarter = j & 3;
            uint32_t A[2][4];
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                /* element l = 16hh + 4t + i of quarter `quarter` of half h: ql byte 64h + 32(quarter&1) + l */
                const uint32_t la = La[h][2 * (quarter & 1) + hh], lb = Lb[h][2 * (quarter & 1) + hh];
                uint32_t va = quarter < 2 ? la & 0x0F0F0F0Fu : (la >> 4) & 0x0F0F0F0Fu;
                uint32_t vb = quarter < 2 ? lb & 0x0F0F0F0Fu : (lb >> 4) & 0x0F0F0F0Fu;
                va |= ((Ha[h][hh] >> (2 * quarter)) & 0x03030303u) << 4;
                vb |= ((Hb[h][hh] >> (2 * quarter)) & 0x03030303u) << 4;
                make_a(va, vb, 0x64206420u, A[hh]); /* code - 32 */
            }
            /* group scales 2j and 2j+1 (int8), exact products D * scale */
            const int ga = (int)(int8_t)((Sa[(2 * j) >> 2] >> (8 * ((2 * j) & 3))) & 0xFFu);
            const int ga1 = (int)(int8_t)((Sa[(2 * j + 1) >> 2] >> (8 * ((2 * j + 1) & 3))) & 0xFFu);
            const int gb = (int)(int8_t)((Sb[(2 * j) >> 2] >> (8 * ((2 * j) & 3))) & 0xFFu);
            const int gb1 = (int)(int8_t)((Sb[(2 * j + 1) >> 2] >> (8 * ((2 * j + 1) & 3))) & 0xFFu);
            const float a0a = __fmul_rn(Da, (float)ga), a1a = __fmul_rn(Da, (float)ga1);
            const float a0b = __fmul_rn(Db, (float)gb), a1b = __fmul_rn(Db, (float)gb1);
#pragma unroll
            for (int n = 0; n < NT; n++) {
                uint2 b0, b1;
                load_b(xsb, cols, batch, 8 * n + g, 32 * j + 4 * t, n, b0, b1, xm);
                float s0[4], s1[4];
                mma16816(s0, A[0], b0.x, b0.y, zero);
                mma16816(s1, A[1], b1.x, b1.y, zero);
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    part[n][i] = __fmaf_rn(i < 2 ? a0a : a0b, s0[i], part[n][i]);
                    part[n][i] = __fmaf_rn(i < 2 ? a1a : a1b, s1[i], part[n][i]);
                }
            }
        }
    } else {
        const float da = __ldg(reinterpret_cast<const float *>(pa + QG_Q8K_D));
        const float db = __ldg(reinterpret_cast<const float *>(pb + QG_Q8K_D));
        /* |d| > 2^96 (and NaN/inf d): the special path. Below it d*S cannot overflow (|S| < 2^31). */
        *spa = !(fabsf(da) <= 0x1p96f);
        *spb = !(fabsf(db) <= 0x1p96f);
        float S[NT][4];
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) S[n][i] = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            uint32_t A[2][4];
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                const uint32_t va = ld_u32(pa + QG_Q8K_QS + 32 * j + 16 * hh + 4 * t) ^ 0x80808080u;
                const uint32_t vb = ld_u32(pb + QG_Q8K_QS + 32 * j + 16 * hh + 4 * t) ^ 0x80808080u;
                make_a(va, vb, 0x64806480u, A[hh]); /* (q + 128) - 128 */
            }
#pragma unroll
            for (int n = 0; n < NT; n++) {
                uint2 b0, b1;
                load_b(xsb, cols, batch, 8 * n + g, 32 * j + 4 * t, n, b0, b1, xm);
                mma16816(S[n], A[0], b0.x, b0.y, S[n]);
                mma16816(S[n], A[1], b1.x, b1.y, S[n]);
            }
        }
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) part[n][i] = __fmul_rn(i < 2 ? da : db, S[n][i]);
    }
}

/* A block covers 16 rows and all `batch` columns (NT n8 tiles, zero-padded); warp w takes the
 * super-blocks w, w + WARPS, ... in order, and the warps' totals are added in the order 0, 1, 2, 3. */
template <int T, int NT>
__global__ void __launch_bounds__(WARPS * 32) k_kq_gemm(const uint8_t *__restrict__ w, size_t rows, size_t nb, size_t bbytes,
                                                         const __half *__restrict__ x, size_t cols, int batch, float *y32,
                                                         uint16_t *y16)
{
    __shared__ float red[WARPS - 1][NT * 4][32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const size_t ra = (size_t)blockIdx.x * ROWS_PER_BLOCK + (size_t)g, rb = ra + 8;
    /* rows past the end load the last row (valid memory) and are not stored */
    const uint8_t *wa = w + (ra < rows ? ra : rows - 1) * nb * bbytes;
    const uint8_t *wb = w + (rb < rows ? rb : rows - 1) * nb * bbytes;
    float acc[NT][4];
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) acc[n][i] = 0.0f;
    for (size_t sb = (size_t)warp; sb < nb; sb += WARPS) {
        const uint8_t *pa = wa + sb * bbytes, *pb = wb + sb * bbytes;
        const __half *xsb = x + sb * QK;
        float part[NT][4];
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) part[n][i] = 0.0f;
        bool spa, spb;
        uint32_t xm = 0;
        superblock<T, NT>(pa, pb, xsb, cols, batch, g, t, part, &spa, &spb, xm);
        /* column 8n + g is special in this super-block if any of its 4 lanes saw an inf or NaN; the
         * outputs of this thread are columns 8n + 2t and 8n + 2t + 1, whose flags lanes 8t and 8t + 4 hold */
        xm |= __shfl_xor_sync(0xFFFFFFFFu, xm, 1);
        xm |= __shfl_xor_sync(0xFFFFFFFFu, xm, 2);
        const uint32_t xm0 = __shfl_sync(0xFFFFFFFFu, xm, 8 * t), xm1 = __shfl_sync(0xFFFFFFFFu, xm, 8 * t + 4);
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int col = 8 * n + 2 * t + (i & 1);
                const bool xs_special = (((i & 1) ? xm1 : xm0) >> n) & 1u;
                if (((i < 2 ? spa : spb) || xs_special) && col < batch)
                    part[n][i] = special_part<T>(i < 2 ? pa : pb, xsb + (size_t)col * cols);
                acc[n][i] = __fadd_rn(acc[n][i], part[n][i]);
            }
    }
    if (warp > 0) {
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) red[warp - 1][4 * n + i][lane] = acc[n][i];
    }
    __syncthreads();
    if (warp != 0) return;
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float v = acc[n][i];
#pragma unroll
            for (int p = 0; p < WARPS - 1; p++) v = __fadd_rn(v, red[p][4 * n + i][lane]);
            const int col = 8 * n + 2 * t + (i & 1);
            const size_t r = i < 2 ? ra : rb;
            if (col < batch && r < rows) {
                if (y32) y32[(size_t)col * rows + r] = v;
                if (y16) y16[(size_t)col * rows + r] = f32_to_f16_bits(v);
            }
        }
}

template <int T>
int launch_t(const uint8_t *w, size_t rows, size_t cols, const __half *x, size_t batch, float *y32, uint16_t *y16, cudaStream_t s)
{
    const size_t nb = cols / QK, bb = qg_kq_block_bytes((qg_ktype)T);
    const unsigned grid = (unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    const int B = (int)batch;
    switch ((batch + 7) / 8) {
#define QG_CASE(NT) \
    case NT: k_kq_gemm<T, NT><<<grid, WARPS * 32, 0, s>>>(w, rows, nb, bb, x, cols, B, y32, y16); break;
        QG_CASE(1) QG_CASE(2) QG_CASE(3) QG_CASE(4) QG_CASE(5) QG_CASE(6) QG_CASE(7) QG_CASE(8)
#undef QG_CASE
    default: return QG_ERR_batch_invalid;
    }
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? QG_ERR_ok : qg_cuda_fail("k_kq_gemm launch", e);
}

int launch_gemm(qg_ktype t, const uint8_t *w, size_t rows, size_t cols, const uint16_t *x, size_t batch, float *y32, uint16_t *y16,
                cudaStream_t s)
{
    if (batch < 1 || batch > QG_KQ_GEMM_MAX_BATCH) return QG_ERR_batch_invalid;
    const __half *xh = reinterpret_cast<const __half *>(x);
    switch (t) {
    case QG_Q4_K: return launch_t<QG_Q4_K>(w, rows, cols, xh, batch, y32, y16, s);
    case QG_Q5_K: return launch_t<QG_Q5_K>(w, rows, cols, xh, batch, y32, y16, s);
    case QG_Q6_K: return launch_t<QG_Q6_K>(w, rows, cols, xh, batch, y32, y16, s);
    case QG_Q8_K: return launch_t<QG_Q8_K>(w, rows, cols, xh, batch, y32, y16, s);
    }
    return QG_ERR_kq_type_unknown;
}

} // namespace

/* Validated with the reference's checks, then launched through qg_kq_gemm_cuda_async (kquants_host.cuh). */
extern "C" int qg_kq_gemm_cuda(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                               float *y_f32, uint16_t *y_f16)
{
    const int rc = qg_kq_check_gemm(t, w, nbytes, rows, cols, x, batch, y_f32, y_f16);
    if (rc != QG_ERR_ok) return rc;
    return qg_kq_host::run_product(qg_kq_gemm_cuda_async, t, w, nbytes, rows, cols, x, batch, y_f32, y_f16);
}

extern "C" int qg_kq_gemm_cuda_async(qg_ktype t, const void *dw, size_t rows, size_t cols, const void *dx, size_t batch, float *dy32,
                                     uint16_t *dy16, void *stream)
{
    return launch_gemm(t, (const uint8_t *)dw, rows, cols, (const uint16_t *)dx, batch, dy32, dy16, (cudaStream_t)stream);
}
