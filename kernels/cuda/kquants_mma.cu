/* K-quant products for batch 1..64 on tensor cores (the `gemm` path).
 *
 * Spec: reference/spec/numerics.md, "K-quant products on tensor cores". The tensor core sees exact
 * inputs only: integer codes (|q| <= 255 after a bias), Q4_K/Q5_K codes times their 6-bit sub-block
 * scale (sc q <= 1953), all exact fp16 integers, and the fp16 activations; for the Q4_K/Q5_K min
 * term, 0/1 indicators against the activations and the 6-bit mins (exact bf16) against exact bf16 parts
 * of the activations' sub-block sums;
 * mma.sync m16n8k16 (fp16 in, float32 accumulate) gives sums for 16 rows x 8 columns. The super-block
 * scales are applied in float32 on CUDA cores:
 *   Q4_K/Q5_K: S1 = sum_256 (sc q) x, one mma chain of 16 blocks over the super-block, and
 *              S2 = sum_8 m_j X_j over the sub-block sums X_j of the activations (per n8 tile an mma
 *              chain of 8 blocks and one add, X_j split exactly into three bf16, then two bf16 mma
 *              blocks per row tile; see xsum_step); part = fma(-Dm, S2, D * S1);
 *   Q6_K:      part = fma(a_g, S_g, part) per group of 16 (1 mma block each; the int8 group scale times
 *              a code can need 13 bits, so it stays outside the tensor core);
 *   Q8_K:      part = d * S with S one mma chain of 16 blocks over the super-block;
 * and acc = acc + part once per super-block. 4 warps share each 16-row tile: warp w takes the
 * super-blocks w, w + 4, ... in order, and the block adds the four totals in the order 0, 1, 2, 3 (a
 * split fixed by K alone). Every product, sum and scale product is a separate float32 rounding or one
 * mma block; with qgold's tensor-core model (u_acc = QG_MMA_U_ACC = 2^-21) the longest chain a term
 * passes through is at most K/256 + 21, which is <= K for every K >= 256: the registry row declares d = K.
 *
 * Fragments. A warp works on 16 rows (thread lane: rows g = lane/4 and g+8, k slots of t = lane%4). Inside a
 * 16-wide k chunk, mma slot 2t+i takes k = 4t+i and slot 2t+8+i takes k = 4t+2+i (i = 0, 1), for A
 * (codes) and B (activations) alike, so a thread reads 4 consecutive codes of each of its two rows and 4
 * consecutive activations of its column: the exact sum is unchanged by this fixed permutation.
 *
 * Four kernels, one sequence of operations per output. Batch 1..16 (x 16-byte aligned): k_kq_gemm_staged,
 * a warp on 2 row tiles (32 rows a block; Q5_K at batch 1..8 one), the activations of its next one or
 * two super-blocks copied into warp-private shared memory by cp.async, the next super-block's weights
 * in registers, one activation fragment serving every row tile. Batch 17..32 (Q6_K 25..32; where the device has 204 KB of shared
 * memory for a block): the staged kernel in blocks of 4 column groups of 8 columns, 16 warps. Else:
 * k_kq_gemm, a warp on one row tile, weights and activations read straight from global memory. On sm_90,
 * batch 8 (Q4_K), 4 (Q5_K, Q6_K) or 1 (Q8_K) to 16 runs k_kq_gemm_ring instead where its grid fills the
 * GPU (a CTA's warps share each super-block's operands through a shared-memory ring; below). In sm_90a
 * builds on sm_90, every type at batch 17..64 (and 9..16 on some shapes, as one group of 16 columns:
 * first_batch) runs k_kq_gemm_wg (warpgroup MMA; below). QG_CUDA_KQ_MMA_TILES (0: k_kq_gemm everywhere, 1 or 2 row tiles a warp at batch 1..16) and
 * QG_CUDA_KQ_MMA_COLGROUPS (0: k_kq_gemm at 17..32) are tuning knobs; every value gives the same bits.
 *
 * Batch invariance by construction: a column's mma result depends only on that column of B and of C, the
 * column's flags only on its activations, and the sequence of operations per (row, column) depends on
 * neither the number of n8 column tiles nor the row tiles a warp carries nor which of the two kernels
 * runs (gpu.kq_gemm.cuda compares every batch with the batch of 64 bit for bit). Deterministic: no
 * atomics.
 *
 * Special values. Where a super-block's scales are not finite (Q8_K: |d| > 2^96, where d*q or d*S
 * may overflow) or a column's activations in it hold an inf or NaN, the sub-block decomposition would not
 * give IEEE's NaN/inf class of the exact sum, so those (row, column, super-block) contributions are
 * recomputed from the exactly decoded weights on CUDA cores (float32 fma chain of 256, within the same
 * bound). The decision depends on the row's bytes and the column's values only (k_kq_gemm tests the
 * activations; the staged kernel reads the same fact off the code sums, see superblock_staged).
 */
#include <cuda_fp16.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <mutex>
#include <type_traits>

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

/* The 8 six-bit scales and 8 mins of a Q4_K/Q5_K super-block (kquants spec) from the 12 packed scale
 * bytes held in (y, z, w) of its header, one byte each in four words: sub-block j < 4 takes the low 6
 * bits of bytes j (scale) and j + 4 (min); j >= 4 takes the low (scale) or high (min) nibble of byte
 * j + 4 as bits 0-3 and the top two bits of byte j - 4 (scale) or j (min) as bits 4-5. */
struct q45_sm {
    uint32_t sc_lo, m_lo, sc_hi, m_hi; /* byte i: scale / min of sub-block i (lo) or i + 4 (hi) */
};

__device__ __forceinline__ q45_sm q45_unpack(uint32_t y, uint32_t z, uint32_t w)
{
    q45_sm r;
    r.sc_lo = y & 0x3F3F3F3Fu;
    r.m_lo = z & 0x3F3F3F3Fu;
    r.sc_hi = (w & 0x0F0F0F0Fu) | ((y >> 2) & 0x30303030u);
    r.m_hi = ((w >> 4) & 0x0F0F0F0Fu) | ((z >> 2) & 0x30303030u);
    return r;
}

/* Four biased codes (bytes of v) of row g and four of row g+8 -> the A fragment: fp16 (1024 + u) built
 * by placing u in the mantissa of 1024 = 0x6400, then (1024 + bias) subtracted: exact, the result is the
 * signed integer code (|code| <= 128). */
__device__ __forceinline__ uint32_t hsub_bits(uint32_t a, uint32_t b)
{
    const __half2 r = __hsub2(*reinterpret_cast<const __half2 *>(&a), *reinterpret_cast<const __half2 *>(&b));
    return *reinterpret_cast<const uint32_t *>(&r);
}

__device__ __forceinline__ uint32_t hmul_bits(uint32_t a, uint32_t b)
{
    const __half2 r = __hmul2(*reinterpret_cast<const __half2 *>(&a), *reinterpret_cast<const __half2 *>(&b));
    return *reinterpret_cast<const uint32_t *>(&r);
}

__device__ __forceinline__ uint32_t hfma_bits(uint32_t a, uint32_t b, uint32_t c)
{
    const __half2 r = __hfma2(*reinterpret_cast<const __half2 *>(&a), *reinterpret_cast<const __half2 *>(&b),
                              *reinterpret_cast<const __half2 *>(&c));
    return *reinterpret_cast<const uint32_t *>(&r);
}

/* 0x64 in every byte, held in a register: the byte permutes below take their selector as an immediate
 * then (with both the selector and 0x64 as constants the compiler spends an extra move on each). */
__constant__ uint32_t c_k64 = 0x64646464u;
__device__ __forceinline__ uint32_t k64() { return c_k64; }

/* Byte i (0..3) of v, an integer u < 256, in both halves of an fp16 pair: the bits 0x64uu are the fp16
 * 1024 + u, and subtracting 1024 is exact. */
__device__ __forceinline__ uint32_t byte_pair_h2(uint32_t v, int i)
{
    return hsub_bits(__byte_perm(v, k64(), 0x4040u + 0x0101u * (uint32_t)i), 0x64006400u);
}

__device__ __forceinline__ void make_a(uint32_t v0, uint32_t v1, uint32_t bias2, uint32_t (&a)[4], uint32_t k = k64())
{
    a[0] = hsub_bits(__byte_perm(v0, k, 0x4140u), bias2); /* row g,   slots 2t, 2t+1   = k 4t, 4t+1 */
    a[1] = hsub_bits(__byte_perm(v1, k, 0x4140u), bias2); /* row g+8, slots 2t, 2t+1 */
    a[2] = hsub_bits(__byte_perm(v0, k, 0x4342u), bias2); /* row g,   slots 2t+8, 2t+9 = k 4t+2, 4t+3 */
    a[3] = hsub_bits(__byte_perm(v1, k, 0x4342u), bias2); /* row g+8 */
}

/* d = A * B + c, m16n8k16, fp16 inputs, float32 accumulation. */
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, const float (&c)[4])
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

/* The per-sub-block steps both gemm kernels share, so each output gets one sequence of operations.
 * Q4_K/Q5_K sub-block j: the A fragments of rows g and g+8 from their two code words per 16-wide half h
 * (low nibbles for even j, high for odd; Q5_K adds bit j of the qh words as bit 4), each code times the
 * sub-block's 6-bit scale: sc q <= 63 * 31 = 1953 < 2048, an exact fp16 integer. sa2/sb2 hold the scales
 * of rows g and g+8 in both halves. sc q comes from one fused fp16 op, fma(1024 + q, sc, -1024 sc): an
 * fma rounds its exact result once, and q sc is representable, so it is exact (the product alone may
 * pass fp16's largest finite value for Q5_K; an fma has no intermediate rounding or overflow). */
template <int T, bool HI16 = T == QG_Q4_K>
__device__ __forceinline__ void q45_frags(uint32_t qa0, uint32_t qa1, uint32_t qb0, uint32_t qb1, uint32_t qha0, uint32_t qha1,
                                          uint32_t qhb0, uint32_t qhb1, int j, uint32_t sa2, uint32_t sb2, uint32_t (&A)[2][4])
{
    const int hi = j & 1;
    const uint32_t qa[2] = {qa0, qa1}, qb[2] = {qb0, qb1}, qha[2] = {qha0, qha1}, qhb[2] = {qhb0, qhb1};
    /* -1024 times the scale pair, exact: -1024 sc, or -64 sc for high nibbles in place (scale sc / 16) */
    const uint32_t na2 = hmul_bits(sa2, 0xE400E400u), nb2 = hmul_bits(sb2, 0xE400E400u);
    /* HI16 (Q4_K only): the high nibbles stay in place, one shift a word fewer. Byte 16 q makes the fp16
     * 1024 + 16 q, and (1024 + 16 q) (sc / 16) - 64 sc = q sc, one fused rounding of an exact value, as
     * (1024 + q) sc - 1024 sc is for the low ones: the same A fragments either way. */
    static_assert(!HI16 || T == QG_Q4_K, "Q5_K's fifth bit does not fit above a nibble in place");
#pragma unroll
    for (int h = 0; h < 2; h++) {
        uint32_t va = hi ? (HI16 ? qa[h] & 0xF0F0F0F0u : (qa[h] >> 4) & 0x0F0F0F0Fu) : qa[h] & 0x0F0F0F0Fu;
        uint32_t vb = hi ? (HI16 ? qb[h] & 0xF0F0F0F0u : (qb[h] >> 4) & 0x0F0F0F0Fu) : qb[h] & 0x0F0F0F0Fu;
        if constexpr (T == QG_Q5_K) {
            va |= ((qha[h] >> j) & 0x01010101u) << 4;
            vb |= ((qhb[h] >> j) & 0x01010101u) << 4;
        }
        A[h][0] = hfma_bits(__byte_perm(va, k64(), 0x4140u), sa2, na2); /* row g,   k 4t, 4t+1 */
        A[h][1] = hfma_bits(__byte_perm(vb, k64(), 0x4140u), sb2, nb2); /* row g+8 */
        A[h][2] = hfma_bits(__byte_perm(va, k64(), 0x4342u), sa2, na2); /* row g,   k 4t+2, 4t+3 */
        A[h][3] = hfma_bits(__byte_perm(vb, k64(), 0x4342u), sb2, nb2); /* row g+8 */
    }
}

/* Byte i of v, u < 64, as the fp16 pair u / 16: (1024 + u) / 16 - 64 in one fused step, exact (u / 16 has
 * at most 6 significant bits). */
__device__ __forceinline__ uint32_t byte_pair_h2_16th(uint32_t v, int i)
{
    return hfma_bits(__byte_perm(v, k64(), 0x4040u + 0x0101u * (uint32_t)i), 0x2C002C00u, 0xD400D400u);
}

/* Q4_K/Q5_K sub-block j of rows a and b: the scales (sa2, sb2), fp16 pairs: sc, or sc / 16 for the odd
 * sub-blocks with HI16 (Q4_K's high nibbles, which q45_frags<T, true> takes in place as 16 q). */
template <int T, bool HI16 = T == QG_Q4_K>
__device__ __forceinline__ void q45_scales(const q45_sm &a, const q45_sm &b, int j, uint32_t &sa2, uint32_t &sb2)
{
    const uint32_t va = j < 4 ? a.sc_lo : a.sc_hi, vb = j < 4 ? b.sc_lo : b.sc_hi;
#ifdef QG_CUDA_MUTANT_KQ_Q4_HI_SCALE
    if (false) { /* a GPU-machine mutant: the high nibbles, taken in place as 16 q, keep the scale sc */
#else
    if (HI16 && (j & 1)) {
#endif
        sa2 = byte_pair_h2_16th(va, j & 3);
        sb2 = byte_pair_h2_16th(vb, j & 3);
    } else {
        sa2 = byte_pair_h2(va, j & 3);
        sb2 = byte_pair_h2(vb, j & 3);
    }
}

/* The min term, S2 = sum_k m_k x_k = sum_j m_j X_j with X_j = sum of the 32 activations of sub-block j.
 *
 * Sub-block sums on the tensor core: one mma per sub-block j and n8 column tile, A = the tile's activations
 * of the sub-block transposed (the thread's B fragments of the code chain, b0 and b1, as A's four
 * registers: row g of A holds 16 of column g's 32 activations, row g + 8 the other 16), B = an indicator
 * (B[k][j'] = 1 where j' = j, else 0). So D[g][j] and D[g + 8][j] gain the two half-sums of X_j of column
 * g, and the other seven columns of D exact zeros. Chained over the 8 sub-blocks from 0, a thread holds
 * the half-sums of sub-blocks 2t and 2t + 1 of column g (slots 0, 1: row g; 2, 3: row g + 8), and
 * X_j = D[g][j] + D[g + 8][j] (one float32 add) lands exactly where the next mma wants its B fragment
 * (k = 2t, 2t + 1 of column g): no data moves between lanes.
 *
 * Each float32 X is written exactly as hi + mid + lo, three bf16 (8 significant bits each; X is a float32
 * of 24 bits, each round-to-nearest step leaves a remainder of at most 8 bits below the previous one, and
 * the remainders are exact float32 subtractions), and S2 = m . hi + m . (mid, lo) is one bf16 m16n8k8
 * block from 0 (the hi parts of sub-blocks 0..7) and one m16n8k16 (k slots 0..7 the mid parts, 8..15 the
 * lo parts): every product of a 6-bit m and a bf16 part is exact in float32. */
__device__ __forceinline__ void xsum_step(float (&X)[4], const uint2 &b0, const uint2 &b1, int j, int g)
{
    const uint32_t ind = g == j ? 0x3C003C00u : 0u; /* fp16 1.0 in both halves where column g of B is sub-block j */
    const uint32_t A[4] = {b0.x, b0.y, b1.x, b1.y};
    mma16816(X, A, ind, ind, X);
}

__device__ __forceinline__ uint32_t bf16x2_rn(float lo, float hi)
{
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

/* (x0, x1) -> three bf16 pairs whose sums are x0 and x1 exactly (slot 0 the low half) */
__device__ __forceinline__ void bf16_split3(float x0, float x1, uint32_t (&p)[3])
{
    p[0] = bf16x2_rn(x0, x1);
    const float r0 = __fsub_rn(x0, __uint_as_float(p[0] << 16)), r1 = __fsub_rn(x1, __uint_as_float(p[0] & 0xFFFF0000u));
    p[1] = bf16x2_rn(r0, r1);
    const float s0 = __fsub_rn(r0, __uint_as_float(p[1] << 16)), s1 = __fsub_rn(r1, __uint_as_float(p[1] & 0xFFFF0000u));
    p[2] = bf16x2_rn(s0, s1);
#ifdef QG_CUDA_MUTANT_KQ_XSPLIT_TWO
    p[2] = 0u; /* a GPU-machine mutant: X as hi + mid only (inside the bound; gpu.tc_probe.cuda's split check fails) */
#endif
}

/* The mins of sub-blocks 2t and 2t+1 of a row as a bf16 pair: bf16 0x43uu is 128 + u (u < 128), and
 * fma(v, 1, -128) is exact. */
__device__ __forceinline__ uint32_t q45_min_pair(const q45_sm &a, int t)
{
    const uint32_t v = __byte_perm(t < 2 ? a.m_lo : a.m_hi, 0x43434343u, (t & 1) ? 0x4342u : 0x4140u);
    uint32_t r;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(r) : "r"(v), "r"(0x3F803F80u), "r"(0xC300C300u)); /* v * 1 - 128 */
    return r;
}

/* S2 of rows g (ma) and g + 8 (mb) and the column whose X parts are p: from 0, the m16n8k8 block of the hi
 * parts (it can start while mid and lo are formed), then the m16n8k16 block of (mid, lo). */
__device__ __forceinline__ void q45_min_mma(float (&S2)[4], uint32_t ma, uint32_t mb, const uint32_t (&p)[3])
{
#ifdef QG_CUDA_MUTANT_KQ_MIN_ROW
    mb = ma; /* a GPU-machine mutant: row g's mins also taken for row g + 8 */
#endif
    asm("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};\n"
        : "=f"(S2[0]), "=f"(S2[1]), "=f"(S2[2]), "=f"(S2[3])
        : "r"(ma), "r"(mb), "r"(p[0]), "f"(0.0f));
    mma16816_bf16(S2, ma, mb, ma, mb, p[1], p[2]);
}

/* After the 8 xsum_steps of every tile: the bf16 parts of X (once per warp, shared by its row tiles). */
template <int NT>
__device__ __forceinline__ void q45_xparts(const float (&X)[NT][4], uint32_t (&P)[NT][3])
{
#pragma unroll
    for (int n = 0; n < NT; n++) bf16_split3(__fadd_rn(X[n][0], X[n][2]), __fadd_rn(X[n][1], X[n][3]), P[n]);
}

/* S2 of every tile for one row tile (mins ma of row g, mb of row g + 8). */
template <int NT>
__device__ __forceinline__ void q45_min_tiles(float (&S2)[NT][4], const uint32_t (&P)[NT][3], uint32_t ma, uint32_t mb)
{
#pragma unroll
    for (int n = 0; n < NT; n++) q45_min_mma(S2[n], ma, mb, P[n]);
}

/* Q4_K/Q5_K, once per super-block: part = fma(-Dm, S2, D * S1) (D fragment: slots 0, 1 row g; 2, 3 row g+8). */
__device__ __forceinline__ void q45_finish(float (&part)[4], const float (&s1)[4], const float (&s2)[4], float Da, float Dma, float Db,
                                           float Dmb)
{
#pragma unroll
    for (int i = 0; i < 4; i++) part[i] = __fmaf_rn(-(i < 2 ? Dma : Dmb), s2[i], __fmul_rn(i < 2 ? Da : Db, s1[i]));
}

/* Q6_K step j (groups 2j, 2j+1): quarter q = j & 3 of half j >> 2; la/lb the ql words of the two 16-wide
 * halves (low nibbles for quarters 0, 1, high for 2, 3), ha/hb the qh words (bits 2q, 2q+1 as bits 4, 5). */
__device__ __forceinline__ void q6_frags(uint32_t la0, uint32_t la1, uint32_t lb0, uint32_t lb1, uint32_t ha0, uint32_t ha1, uint32_t hb0,
                                         uint32_t hb1, int quarter, uint32_t (&A)[2][4], uint32_t k = k64())
{
    const uint32_t la[2] = {la0, la1}, lb[2] = {lb0, lb1}, ha[2] = {ha0, ha1}, hb[2] = {hb0, hb1};
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        uint32_t va = quarter < 2 ? la[hh] & 0x0F0F0F0Fu : (la[hh] >> 4) & 0x0F0F0F0Fu;
        uint32_t vb = quarter < 2 ? lb[hh] & 0x0F0F0F0Fu : (lb[hh] >> 4) & 0x0F0F0F0Fu;
        va |= ((ha[hh] >> (2 * quarter)) & 0x03030303u) << 4;
        vb |= ((hb[hh] >> (2 * quarter)) & 0x03030303u) << 4;
        make_a(va, vb, 0x64206420u, A[hh], k); /* code - 32 */
    }
}

/* Signed byte k of w as a float, exactly, without a conversion instruction: the float with exponent
 * byte 0x4B and low byte b + 128 is 2^23 + b + 128 (b + 128 = b ^ 0x80 as a byte); subtracting
 * 2^23 + 128 = 8388736 is exact. */
__device__ __forceinline__ float s8_to_f32(uint32_t w, int k)
{
    return __fadd_rn(__uint_as_float(__byte_perm(w ^ 0x80808080u, 0x4B000000u, 0x7540u + (uint32_t)k)), -8388736.0f);
}

/* Q6_K: the int8 group scales 2j and 2j+1 of rows a and b (Sa, Sb: their 4 scale words) times D, exact. */
__device__ __forceinline__ void q6_scales(const uint32_t *Sa, const uint32_t *Sb, int j, float Da, float Db, float &a0a, float &a1a,
                                          float &a0b, float &a1b)
{
    a0a = __fmul_rn(Da, s8_to_f32(Sa[(2 * j) >> 2], (2 * j) & 3)), a1a = __fmul_rn(Da, s8_to_f32(Sa[(2 * j + 1) >> 2], (2 * j + 1) & 3));
    a0b = __fmul_rn(Db, s8_to_f32(Sb[(2 * j) >> 2], (2 * j) & 3)), a1b = __fmul_rn(Db, s8_to_f32(Sb[(2 * j + 1) >> 2], (2 * j + 1) & 3));
}

/* Q6_K: part = fma(a_2j, S_2j, part), then part = fma(a_2j+1, S_2j+1, part). */
__device__ __forceinline__ void q6_update(float (&part)[4], const float (&s0)[4], const float (&s1)[4], float a0a, float a0b, float a1a,
                                          float a1b)
{
#pragma unroll
    for (int i = 0; i < 4; i++) {
        part[i] = __fmaf_rn(i < 2 ? a0a : a0b, s0[i], part[i]);
        part[i] = __fmaf_rn(i < 2 ? a1a : a1b, s1[i], part[i]);
    }
}

#if QG_CUDA_WGMMA /* k_kq_gemm_wg's */
/* Q6_K step j of rows a and b (their 17 words): the fragments of groups 2j and 2j+1 and their scales times
 * D (sc: a_2j and a_2j+1 of row a, then of row b), as superblock_staged takes them. */
__device__ __forceinline__ void q6_step(const uint32_t (&va)[17], const uint32_t (&vb)[17], int j, uint32_t (&A)[2][4], float (&sc)[4])
{
    const int h = j >> 2, quarter = j & 3, p = 4 * h + 2 * (quarter & 1), q = 8 + 2 * h;
    q6_frags(va[p], va[p + 1], vb[p], vb[p + 1], va[q], va[q + 1], vb[q], vb[q + 1], quarter, A);
    q6_scales(&va[12], &vb[12], j, h2f((uint16_t)va[16]), h2f((uint16_t)vb[16]), sc[0], sc[1], sc[2], sc[3]);
}
#endif

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

/* special_part as a real call: keeps the rarely taken special-value path out of the staged Q6_K loop,
 * whose unrolled body otherwise outgrows the instruction cache (Nsight Compute: "no instruction" the
 * largest stall after "selected" at batch 1). */
template <int T>
__device__ __noinline__ float special_part_call(const uint8_t *blk, const __half *xcol)
{
    return special_part<T>(blk, xcol);
}

/* The staged kernel's fallback: the call for Q6_K; inlined for the other types, whose loops were not
 * held back by the instruction cache and measured slower with the call (H200). */
template <int T>
__device__ __forceinline__ float special_part_staged(const uint8_t *blk, const __half *xcol)
{
    if constexpr (T == QG_Q6_K) return special_part_call<T>(blk, xcol);
    else return special_part<T>(blk, xcol);
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
        const q45_sm sma = q45_unpack(ha.y, ha.z, ha.w), smb = q45_unpack(hb.y, hb.z, hb.w);
        float S1[NT][4], S2[NT][4], X[NT][4];
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) S1[n][i] = X[n][i] = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int c = j >> 1;
            uint32_t A[2][4], sa2, sb2;
            q45_scales<T>(sma, smb, j, sa2, sb2);
            q45_frags<T>(qa[c][0], qa[c][1], qb[c][0], qb[c][1], qha[0], qha[1], qhb[0], qhb[1], j, sa2, sb2, A);
#pragma unroll
            for (int n = 0; n < NT; n++) {
                uint2 b0, b1;
                load_b(xsb, cols, batch, 8 * n + g, 32 * j + 4 * t, n, b0, b1, xm);
                mma16816(S1[n], A[0], b0.x, b0.y, S1[n]);
                mma16816(S1[n], A[1], b1.x, b1.y, S1[n]);
                xsum_step(X[n], b0, b1, j, g);
            }
        }
        uint32_t P[NT][3];
        q45_xparts<NT>(X, P);
        q45_min_tiles<NT>(S2, P, q45_min_pair(sma, t), q45_min_pair(smb, t));
#pragma unroll
        for (int n = 0; n < NT; n++) q45_finish(part[n], S1[n], S2[n], Da, Dma, Db, Dmb);
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
            /* element l = 16hh + 4t + i of quarter `quarter` of half h: ql byte 64h + 32(quarter&1) + l */
            const int p = 2 * (quarter & 1);
            uint32_t A[2][4];
            q6_frags(La[h][p], La[h][p + 1], Lb[h][p], Lb[h][p + 1], Ha[h][0], Ha[h][1], Hb[h][0], Hb[h][1], quarter, A);
            float a0a, a1a, a0b, a1b;
            q6_scales(Sa, Sb, j, Da, Db, a0a, a1a, a0b, a1b);
#pragma unroll
            for (int n = 0; n < NT; n++) {
                uint2 b0, b1;
                load_b(xsb, cols, batch, 8 * n + g, 32 * j + 4 * t, n, b0, b1, xm);
                float s0[4], s1[4];
                mma16816(s0, A[0], b0.x, b0.y, zero);
                mma16816(s1, A[1], b1.x, b1.y, zero);
                q6_update(part[n], s0, s1, a0a, a0b, a1a, a1b);
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

/* ---- The staged kernel (batch 1..16): the same operations per output as k_kq_gemm ----
 *
 * Each warp carries R row tiles of 16 rows (a block: 16 R rows, its 4 warps still the 4 phases of the
 * super-blocks w, w + 4, ...), so one activation B fragment serves R tiles. The
 * activations of the warp's next two super-blocks are copied into warp-private shared-memory stages by
 * 16-byte cp.async while it works on the current one (three stages; Q4_K at batch 9..16 two, one super-block
 * ahead), and the next super-block's weight words are
 * loaded into registers before the current one's mmas: no load waits inside the sub-block loop. (An L2
 * prefetch of the weights two and four super-blocks further ahead was measured slower on the H100.) Per
 * output the mma chains, fmas, special-value fallback, warp totals and the 0, 1, 2, 3 reduction are those
 * of k_kq_gemm, so both kernels give the same bits (gpu.kq_gemm.cuda compares batches <= 16 with the batch
 * of 64, which k_kq_gemm runs). */

constexpr int XS = QK + 16;   /* halves per staged column: 544 bytes, so the 8-byte fragment reads of a warp are conflict-free */
/* Activation stages per warp: with 3 the copy for two super-blocks ahead is in flight, with 2 one. Q4_K
 * at batch 9..16 takes 2 (70 KB a block instead of 104 KB; measured faster on an H100). */
template <int T, int NT> __host__ __device__ constexpr int xstages() { return T == QG_Q4_K && NT >= 2 ? 2 : 3; }

/* Weight words a thread keeps per row and super-block (the loads of superblock() above, in registers). */
template <int T> struct wwords { static constexpr int n = T == QG_Q4_K ? 12 : T == QG_Q5_K ? 14 : 17; };

/* A thread's words of a Q4_K, Q5_K or Q8_K block at p (Q4_K/Q5_K: d, dmin and the scales as one 16-byte
 * load, then the code words of each 32-byte chunk's two halves, Q5_K the qh words; Q8_K: d, then the
 * code words), loaded by L::u32 and L::u128 (global or shared memory). */
template <int T, class L>
__device__ __forceinline__ void gather_words(const uint8_t *p, int t, uint32_t (&v)[wwords<T>::n])
{
    if constexpr (T == QG_Q4_K || T == QG_Q5_K) {
        constexpr int QS = T == QG_Q4_K ? QG_Q4K_QS : QG_Q5K_QS;
        const uint4 h = L::u128(p);
        v[0] = h.x;
        v[1] = h.y;
        v[2] = h.z;
        v[3] = h.w;
#pragma unroll
        for (int c = 0; c < 4; c++)
#pragma unroll
            for (int hh = 0; hh < 2; hh++) v[4 + 2 * c + hh] = L::u32(p + QS + 32 * c + 16 * hh + 4 * t);
        if constexpr (T == QG_Q5_K) {
#pragma unroll
            for (int hh = 0; hh < 2; hh++) v[12 + hh] = L::u32(p + QG_Q5K_QH + 16 * hh + 4 * t);
        }
    } else if constexpr (T == QG_Q8_K) {
        v[0] = L::u32(p + QG_Q8K_D);
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int hh = 0; hh < 2; hh++) v[1 + 2 * j + hh] = L::u32(p + QG_Q8K_QS + 32 * j + 16 * hh + 4 * t);
    }
}
struct ld_global {
    static __device__ __forceinline__ uint32_t u32(const uint8_t *p) { return ld_u32(p); }
    static __device__ __forceinline__ uint4 u128(const uint8_t *p) { return __ldg(reinterpret_cast<const uint4 *>(p)); }
};

template <int T>
__device__ __forceinline__ void load_words(const uint8_t *p, int t, uint32_t (&v)[wwords<T>::n])
{
    if constexpr (T != QG_Q6_K) {
        gather_words<T, ld_global>(p, t, v);
    } else {
        /* Raw aligned words; q6_align_words() turns them into the words at the block's own offsets once
         * they have landed. A 210-byte block starts 2 bytes past a 4-byte boundary every other block
         * (odd = 1). Word s (0..11) is the 4-byte-aligned word at byte 16 s + 4 t + 2 odd of the block
         * (ql for s < 8, qh after: segment s covers bytes 16 s .. 16 s + 15); the scales likewise at
         * 192 + 4 i + 2 odd. Word 16 is d (even) or the block's first two bytes (odd; d is then the top
         * half of scale word 3). Every word read lies inside the block. */
        const uint32_t odd = ((uint32_t)(uintptr_t)p >> 1) & 1u;
        const uint8_t *pa = p + 2 * odd;
#pragma unroll
        for (int s = 0; s < 12; s++) v[s] = ld_u32(pa + 16 * s + 4 * t);
#pragma unroll
        for (int i = 0; i < 4; i++) v[12 + i] = ld_u32(pa + QG_Q6K_SCALES + 4 * i);
        v[16] = (uint32_t)__ldg(reinterpret_cast<const uint16_t *>(odd ? p : p + QG_Q6K_D));
    }
}

/* Q6_K: the raw words of load_words() (block at p) -> word s = bytes 16 s + 4 t .. + 3, scale word i =
 * bytes 192 + 4 i .. + 3, word 16 = d. In an odd block a lane's word is the top half of the aligned word
 * before its own (held by lane t - 1 of its row; for t = 0 by lane 3, one segment back) and the bottom
 * half of its own: one shuffle and one byte permute a word. Skipped when every lane's block is even. */
__device__ __forceinline__ void q6_align_words(const uint8_t *p, int lane, uint32_t (&v)[17])
{
    const uint32_t odd = ((uint32_t)(uintptr_t)p >> 1) & 1u;
    if (!__any_sync(0xFFFFFFFFu, odd)) return;
    const int t = lane & 3, src = (lane & ~3) | ((t + 3) & 3);
    const uint32_t sel = odd ? 0x5432u : 0x7654u; /* (top half of prev, bottom half of own) or own */
    /* scales first, from the top down: scale word 0's predecessor is lane 3's raw word 11 */
    const uint32_t w11 = __shfl_sync(0xFFFFFFFFu, v[11], lane | 3);
    const uint32_t d = odd ? v[15] >> 16 : v[16];
#pragma unroll
    for (int i = 3; i >= 0; i--) v[12 + i] = __byte_perm(i == 0 ? w11 : v[11 + i], v[12 + i], sel);
#pragma unroll
    for (int s = 11; s >= 0; s--) {
        const uint32_t before = s == 0 ? v[16] << 16 : v[s - 1]; /* lane 3's word one segment back */
#ifdef QG_CUDA_MUTANT_KQ_Q6_ALIGN
        const uint32_t prev = __shfl_sync(0xFFFFFFFFu, v[s], src); /* a GPU-machine mutant: lane 0 takes lane 3's word of its own segment */
#else
        const uint32_t prev = __shfl_sync(0xFFFFFFFFu, t == 3 ? before : v[s], src);
#endif
        v[s] = __byte_perm(prev, v[s], sel);
    }
    v[16] = d;
}

/* The words of the R row-tile pairs of a warp for the super-block at byte offset off (Q6_K only). */
template <int T, int R>
__device__ __forceinline__ void q6_align(const uint8_t *const (&wa)[R], const uint8_t *const (&wb)[R], size_t off, int lane,
                                         uint32_t (&va)[R][wwords<T>::n], uint32_t (&vb)[R][wwords<T>::n])
{
    if constexpr (T == QG_Q6_K) {
#pragma unroll
        for (int r = 0; r < R; r++) {
            q6_align_words(wa[r] + off, lane, va[r]);
            q6_align_words(wb[r] + off, lane, vb[r]);
        }
    }
}

/* The row's scales take the special path (the tests of superblock() above). */
template <int T>
__device__ __forceinline__ bool special_scales(const uint32_t (&v)[wwords<T>::n])
{
    if constexpr (T == QG_Q4_K || T == QG_Q5_K) return f16_nonfinite(v[0]) || f16_nonfinite(v[0] >> 16);
    else if constexpr (T == QG_Q6_K) return f16_nonfinite(v[16]);
    else return !(fabsf(__uint_as_float(v[0])) <= 0x1p96f);
}

/* How the staged kernel finds the columns with an inf or NaN and where the 0x64 byte of its A fragments
 * comes from. With sum_flags: from the code sums (below), and the byte from a register, so the byte
 * permutes take an immediate selector; else from the activations as superblock() does, and the byte as a
 * constant. Q4_K/Q5_K and the column groups measured faster with sum_flags, Q6_K/Q8_K at batch 1..16
 * without (H100). Either way every operation gets the same values. */
template <int T, int CG> __host__ __device__ constexpr bool sum_flags()
{
    return T == QG_Q4_K || T == QG_Q5_K || CG > 1;
}

/* Q4_K's high nibbles in place (q45_frags) in the staged and ring kernels: everywhere but the staged
 * kernel's two tiles a warp at batch 1..8 (NT = 1, R = 2), where the scale pairs it adds take the kernel
 * from 141 to 143 registers and measured 1.2% slower on 28672x8192 at batch 1 (H200, same call); at
 * batch 16 (the warpgroup kernel, which always takes them) 2-3% faster. Same bits either way. */
template <int T, int NT, int R> __host__ __device__ constexpr bool q4_hi16() { return T == QG_Q4_K && !(NT == 1 && R == 2); }

/* One super-block of the warp's R row tiles (words va/vb of rows g and g+8 of each tile) against the NT
 * column tiles staged at xs: the operations of superblock() above, per output in the same order.
 * Bit 4n + i of xsp[r] is set where output (r, n, i)'s column holds an inf or NaN in this super-block,
 * read off the output's own code sums: every A operand is a finite integer and no finite sum can
 * overflow (|S| < 2^36 for every type), so a sum is inf or NaN exactly when one of its activations is
 * (inf * 0 is NaN, NaN propagates). Q6_K reads it off part: with a finite d (else the row is special
 * anyway) every group scale is finite and |part| < 2^53. The same decision as any_nonfinite4 in
 * superblock(), per column, with no instruction in the sub-block loop. */
template <int T, int NT, int R, int CG, bool SF = sum_flags<T, CG>()>
__device__ __forceinline__ void superblock_staged(const uint32_t (&va)[R][wwords<T>::n], const uint32_t (&vb)[R][wwords<T>::n],
                                                  const __half *xs, int g, int t, float (&part)[R][NT][4], uint32_t (&xsp)[R])
{
    const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const uint32_t kb = SF ? k64() : 0x64u;
    /* without sum_flags: fl[n] = fma(v, 0, fl[n]) over the lane's activations of column tile n stays +-0
     * unless one of them is inf or NaN (inf * 0 and NaN propagate) */
    __half2 fl[NT];
    const __half2 hz = __float2half2_rn(0.0f);
#pragma unroll
    for (int n = 0; n < NT; n++) fl[n] = hz;
    /* Q8_K and Q4_K/Q5_K: S, the chain over the 16 blocks of (scaled) codes */
    float S[R][NT][4], X[NT][4]; /* X: Q4_K/Q5_K's sub-block sums, shared by the R row tiles */
    if constexpr (T != QG_Q6_K) {
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                X[n][i] = 0.0f;
#pragma unroll
                for (int r = 0; r < R; r++) S[r][n][i] = 0.0f;
            }
    }
    /* Q4_K/Q5_K: the scales and mins of each row, unpacked once per super-block */
    q45_sm sma[R], smb[R];
    if constexpr (T == QG_Q4_K || T == QG_Q5_K) {
#pragma unroll
        for (int r = 0; r < R; r++) {
            sma[r] = q45_unpack(va[r][1], va[r][2], va[r][3]);
            smb[r] = q45_unpack(vb[r][1], vb[r][2], vb[r][3]);
        }
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
        uint2 b0[NT], b1[NT];
#pragma unroll
        for (int n = 0; n < NT; n++) {
            const __half *p = xs + (8 * n + g) * XS + 32 * j + 4 * t;
            b0[n] = *reinterpret_cast<const uint2 *>(p);
            b1[n] = *reinterpret_cast<const uint2 *>(p + 16);
            if constexpr (!SF) {
                fl[n] = __hfma2(*reinterpret_cast<const __half2 *>(&b0[n].x), hz, fl[n]);
                fl[n] = __hfma2(*reinterpret_cast<const __half2 *>(&b0[n].y), hz, fl[n]);
                fl[n] = __hfma2(*reinterpret_cast<const __half2 *>(&b1[n].x), hz, fl[n]);
                fl[n] = __hfma2(*reinterpret_cast<const __half2 *>(&b1[n].y), hz, fl[n]);
            }
        }
        if constexpr (T == QG_Q4_K || T == QG_Q5_K) {
            const int c = j >> 1;
#pragma unroll
            for (int r = 0; r < R; r++) {
                uint32_t A[2][4], sa2, sb2;
                q45_scales<T, q4_hi16<T, NT, R>()>(sma[r], smb[r], j, sa2, sb2);
                /* Q4_K has no qh words: the last two arguments are unused there */
                q45_frags<T, q4_hi16<T, NT, R>()>(va[r][4 + 2 * c], va[r][5 + 2 * c], vb[r][4 + 2 * c], vb[r][5 + 2 * c], va[r][wwords<T>::n - 2],
                             va[r][wwords<T>::n - 1], vb[r][wwords<T>::n - 2], vb[r][wwords<T>::n - 1], j, sa2, sb2, A);
#pragma unroll
                for (int n = 0; n < NT; n++) {
                    mma16816(S[r][n], A[0], b0[n].x, b0[n].y, S[r][n]);
                    mma16816(S[r][n], A[1], b1[n].x, b1[n].y, S[r][n]);
                }
            }
#pragma unroll
            for (int n = 0; n < NT; n++) xsum_step(X[n], b0[n], b1[n], j, g);
        } else if constexpr (T == QG_Q6_K) {
            const int h = j >> 2, quarter = j & 3;
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float Da = h2f((uint16_t)va[r][16]), Db = h2f((uint16_t)vb[r][16]);
                const int p = 4 * h + 2 * (quarter & 1), q = 8 + 2 * h;
                uint32_t A[2][4];
                /* the 0x64 byte as a constant at NT = R = 2 (a register there costs spills) */
                q6_frags(va[r][p], va[r][p + 1], vb[r][p], vb[r][p + 1], va[r][q], va[r][q + 1], vb[r][q], vb[r][q + 1], quarter, A,
                         NT == 2 && R == 2 ? 0x64u : kb);
                float a0a, a1a, a0b, a1b;
                q6_scales(&va[r][12], &vb[r][12], j, Da, Db, a0a, a1a, a0b, a1b);
#pragma unroll
                for (int n = 0; n < NT; n++) {
                    float s0[4], s1[4];
                    mma16816(s0, A[0], b0[n].x, b0[n].y, zero);
                    mma16816(s1, A[1], b1[n].x, b1[n].y, zero);
                    q6_update(part[r][n], s0, s1, a0a, a0b, a1a, a1b);
                }
            }
        } else {
#pragma unroll
            for (int r = 0; r < R; r++) {
                uint32_t A[2][4];
#pragma unroll
                for (int hh = 0; hh < 2; hh++)
                    make_a(va[r][1 + 2 * j + hh] ^ 0x80808080u, vb[r][1 + 2 * j + hh] ^ 0x80808080u, 0x64806480u, A[hh], kb); /* (q + 128) - 128 */
#pragma unroll
                for (int n = 0; n < NT; n++) {
                    mma16816(S[r][n], A[0], b0[n].x, b0[n].y, S[r][n]);
                    mma16816(S[r][n], A[1], b1[n].x, b1[n].y, S[r][n]);
                }
            }
        }
    }
    if constexpr (SF) {
#pragma unroll
        for (int r = 0; r < R; r++) {
            xsp[r] = 0u;
#pragma unroll
            for (int n = 0; n < NT; n++)
#pragma unroll
                for (int i = 0; i < 4; i++)
                    if (!isfinite(T == QG_Q6_K ? part[r][n][i] : S[r][n][i])) xsp[r] |= 1u << (4 * n + i);
        }
    } else {
        /* column 8n + g is special if any of its 4 lanes saw an inf or NaN; this thread's outputs are
         * columns 8n + 2t and 8n + 2t + 1, whose flags lanes 8t and 8t + 4 hold */
        uint32_t xm = 0u;
#pragma unroll
        for (int n = 0; n < NT; n++)
            if ((*reinterpret_cast<const uint32_t *>(&fl[n]) & 0x7C007C00u) != 0u) xm |= 1u << n;
        xm |= __shfl_xor_sync(0xFFFFFFFFu, xm, 1);
        xm |= __shfl_xor_sync(0xFFFFFFFFu, xm, 2);
        const uint32_t xm0 = __shfl_sync(0xFFFFFFFFu, xm, 8 * t), xm1 = __shfl_sync(0xFFFFFFFFu, xm, 8 * t + 4);
        uint32_t bits = 0u;
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                if ((((i & 1) ? xm1 : xm0) >> n) & 1u) bits |= 1u << (4 * n + i);
#pragma unroll
        for (int r = 0; r < R; r++) xsp[r] = bits;
    }
    if constexpr (T == QG_Q4_K || T == QG_Q5_K) {
        uint32_t P[NT][3];
        q45_xparts<NT>(X, P);
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float Da = h2f((uint16_t)va[r][0]), Dma = h2f((uint16_t)(va[r][0] >> 16));
            const float Db = h2f((uint16_t)vb[r][0]), Dmb = h2f((uint16_t)(vb[r][0] >> 16));
            float S2[NT][4];
            q45_min_tiles<NT>(S2, P, q45_min_pair(sma[r], t), q45_min_pair(smb[r], t));
#pragma unroll
            for (int n = 0; n < NT; n++) q45_finish(part[r][n], S[r][n], S2[n], Da, Dma, Db, Dmb);
        }
    }
    if constexpr (T == QG_Q8_K) {
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float da = __uint_as_float(va[r][0]), db = __uint_as_float(vb[r][0]);
#pragma unroll
            for (int n = 0; n < NT; n++)
#pragma unroll
                for (int i = 0; i < 4; i++) part[r][n][i] = __fmul_rn(i < 2 ? da : db, S[r][n][i]);
        }
    }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 /* used by the ring kernel only (sm_90) */
/* the same to a shared-memory address */
__device__ __forceinline__ void cp_async16_s(uint32_t dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(__cvta_generic_to_global(src)) : "memory");
}
#endif


/* The activations of super-block sb (columns 0..batch-1) into a stage: lane l copies 16 bytes (k = 8l..8l+7)
 * of each column. The caller checked that x is 16-byte aligned (cols is a multiple of 256). */
__device__ __forceinline__ void stage_x(const __half *x, size_t cols, int batch, size_t sb, __half *dst, int lane)
{
    const __half *src = x + sb * QK + 8 * lane;
    for (int c = 0; c < batch; c++) cp_async16(dst + c * XS + 8 * lane, src + (size_t)c * cols);
}

/* Blocks an SM the register allocation must leave room for (0: the compiler's choice; sm_90a, no spills
 * in any of these): Q4_K at batch 1..8 3 blocks (140 registers; its own choice is 128 with spills); Q4_K
 * at 9..16 and Q5_K at 9..16 1 (191 and 201 registers, 2 blocks). Q4_K at 9..16 with the compiler's own
 * 164 registers (3 blocks) measured 1.27-1.45x cuBLAS fp16 at batch 16 on an H100, with 191 (2 blocks)
 * 1.53-1.76x in the same run. QG_KQ_Q4_B16_MINB overrides the Q4_K 9..16 figure (device experiments). */
#ifndef QG_KQ_Q4_B16_MINB
#define QG_KQ_Q4_B16_MINB 1
#endif
__host__ __device__ constexpr int staged_minb(int t, int nt, int r, int cg)
{
    return cg != 1 ? 0 : t == QG_Q4_K ? (nt == 1 ? 3 : QG_KQ_Q4_B16_MINB) : t == QG_Q5_K ? 1 : 0;
}
/* Blocks of CG column groups (batch 17..32: CG = 4, one column tile and one row tile a warp): 4 CG warps,
 * warp 4c + p the super-block phase p of columns NC c .. NC c + NC - 1, computed exactly as a block of
 * CG = 1 on x and y shifted by NC c columns. The CG warps of one phase load the same weight words at
 * about the same time (the weights still come from DRAM once); each warp stages and multiplies only its
 * own columns, so its registers and shared memory are those of a batch of NC, and 16 warps fit on an SM
 * where k_kq_gemm's one warp per 16 x 32 tile of outputs re-reads the activations from L2 at every
 * sub-block. */
template <int T, int NT, int R, int CG>
__global__ void __launch_bounds__(WARPS * 32 * CG, staged_minb(T, NT, R, CG))
    k_kq_gemm_staged(const uint8_t *__restrict__ w, size_t rows, size_t nb, size_t bbytes, const __half *__restrict__ x, size_t cols,
                     int batch, float *y32, uint16_t *y16)
{
    constexpr int W = wwords<T>::n, NC = NT * 8, STAGE = NC * XS, XSTAGES = xstages<T, NT>();
    extern __shared__ __align__(16) unsigned char dyn_smem[];
    const int wid = threadIdx.x >> 5, warp = wid & (WARPS - 1), grp = wid / WARPS, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    /* this warp's column group: columns col0 .. col0 + gbatch - 1 of the call, as columns 0 .. gbatch - 1 */
    /* (a group past the batch has none: 0, so it zero-fills only its own stages and stores nothing) */
    const int col0 = grp * NC, gbatch = batch - col0 < NC ? (batch - col0 > 0 ? batch - col0 : 0) : NC;
    x += (size_t)col0 * cols;
    if (y32) y32 += (size_t)col0 * rows;
    if (y16) y16 += (size_t)col0 * rows;
    batch = gbatch;
    __half *xs = reinterpret_cast<__half *>(dyn_smem) + (size_t)wid * XSTAGES * STAGE;
    /* columns past the batch stay zero in both stages (no copy writes them) */
    for (int c = batch; c < NC; c++)
#pragma unroll
        for (int s = 0; s < XSTAGES; s++) reinterpret_cast<uint4 *>(xs + s * STAGE + c * XS)[lane] = make_uint4(0u, 0u, 0u, 0u);
    size_t ra[R], rb[R];
    const uint8_t *wa[R], *wb[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        ra[r] = (size_t)blockIdx.x * (16 * R) + 16 * (size_t)r + (size_t)g;
        rb[r] = ra[r] + 8;
        /* rows past the end load the last row (valid memory) and are not stored */
        wa[r] = w + (ra[r] < rows ? ra[r] : rows - 1) * nb * bbytes;
        wb[r] = w + (rb[r] < rows ? rb[r] : rows - 1) * nb * bbytes;
    }
    float acc[R][NT][4];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[r][n][i] = 0.0f;
    uint32_t cva[R][W], cvb[R][W];
    size_t sb = (size_t)warp;
    if (sb < nb) {
        stage_x(x, cols, batch, sb, xs, lane);
#pragma unroll
        for (int r = 0; r < R; r++) {
            load_words<T>(wa[r] + sb * bbytes, t, cva[r]);
            load_words<T>(wb[r] + sb * bbytes, t, cvb[r]);
        }
    }
    if (sb < nb) q6_align<T, R>(wa, wb, sb * bbytes, lane, cva, cvb);
    cp_async_commit();
    if (XSTAGES == 3) {
        if (sb + WARPS < nb) stage_x(x, cols, batch, sb + WARPS, xs + STAGE, lane);
        cp_async_commit();
    }
    int cur = 0; /* stage of super-block sb; the next XSTAGES - 2 are in the following ones */
    for (; sb < nb; sb += WARPS) {
        const size_t nx = sb + WARPS, ln = nx < nb ? nx : sb;
        /* the stage after the last one in flight gets super-block sb + (XSTAGES - 1) WARPS */
        const int far = cur == 0 ? XSTAGES - 1 : cur - 1;
        if (sb + (XSTAGES - 1) * WARPS < nb) stage_x(x, cols, batch, sb + (XSTAGES - 1) * WARPS, xs + far * STAGE, lane);
        cp_async_commit();
        uint32_t nva[R][W], nvb[R][W];
#pragma unroll
        for (int r = 0; r < R; r++) {
            load_words<T>(wa[r] + ln * bbytes, t, nva[r]);
            load_words<T>(wb[r] + ln * bbytes, t, nvb[r]);
        }
        cp_async_wait<XSTAGES - 1>(); /* this super-block's stage has landed (those issued after it may still fly) */
        __syncwarp();
        float part[R][NT][4];
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int n = 0; n < NT; n++)
#pragma unroll
                for (int i = 0; i < 4; i++) part[r][n][i] = 0.0f;
        uint32_t xsp[R];
        superblock_staged<T, NT, R, CG>(cva, cvb, xs + cur * STAGE, g, t, part, xsp);
        cur = cur == XSTAGES - 1 ? 0 : cur + 1;
        const __half *xsb = x + sb * QK;
#pragma unroll
        for (int r = 0; r < R; r++) {
            const bool spa = special_scales<T>(cva[r]), spb = special_scales<T>(cvb[r]);
#pragma unroll
            for (int n = 0; n < NT; n++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int col = 8 * n + 2 * t + (i & 1);
                    const bool xs_special = (xsp[r] >> (4 * n + i)) & 1u;
                    if (((i < 2 ? spa : spb) || xs_special) && col < batch)
                        part[r][n][i] = special_part_staged<T>((i < 2 ? wa[r] : wb[r]) + sb * bbytes, xsb + (size_t)col * cols);
                    acc[r][n][i] = __fadd_rn(acc[r][n][i], part[r][n][i]);
                }
        }
        __syncwarp(); /* every lane is done with this stage before the next iteration's copy overwrites it */
        q6_align<T, R>(wa, wb, ln * bbytes, lane, nva, nvb);
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int e = 0; e < W; e++) {
                cva[r][e] = nva[r][e];
                cvb[r][e] = nvb[r][e];
            }
    }
    /* the warps' totals meet in the (now idle) stage memory: every cp.async has landed (the last wait
     * before the last super-block left none in flight that writes a stage still read) */
    asm volatile("cp.async.wait_all;\n" ::: "memory");
    __syncthreads();
    float(*red)[R * NT * 4][32] = reinterpret_cast<float(*)[R * NT * 4][32]>(dyn_smem) + (size_t)grp * (WARPS - 1);
    if (warp > 0) {
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int n = 0; n < NT; n++)
#pragma unroll
                for (int i = 0; i < 4; i++) red[warp - 1][(r * NT + n) * 4 + i][lane] = acc[r][n][i];
    }
    __syncthreads();
    if (warp != 0) return;
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                float v = acc[r][n][i];
#pragma unroll
                for (int p = 0; p < WARPS - 1; p++) v = __fadd_rn(v, red[p][(r * NT + n) * 4 + i][lane]);
#ifdef QG_CUDA_MUTANT_KQ_COLGROUP_ORDER
                /* a GPU-machine mutant: the column groups add the phase totals as ((t0 + t2) + t1) + t3 (same
                 * terms, another order: inside the bound, so only the bitwise comparisons can see it) */
                if (CG > 1) v = __fadd_rn(__fadd_rn(__fadd_rn(acc[r][n][i], red[1][(r * NT + n) * 4 + i][lane]), red[0][(r * NT + n) * 4 + i][lane]),
                                          red[2][(r * NT + n) * 4 + i][lane]);
#endif
                const int col = 8 * n + 2 * t + (i & 1);
                const size_t row = i < 2 ? ra[r] : rb[r];
                if (col < batch && row < rows) {
                    if (y32) y32[(size_t)col * rows + row] = v;
                    if (y16) y16[(size_t)col * rows + row] = f32_to_f16_bits(v);
                }
            }
}

/* ---- The ring kernel (sm_90; batch 1..16, every type): the staged kernel's operations per output ----
 *
 * In the staged kernel the 4 warps of a block are the 4 super-block phases, so no two warps share a
 * super-block: every warp stages its own activations (8 KB a super-block at batch 16, for 32 rows), and
 * at 191 registers an SM holds 8 warps (Nsight Compute on an H200, Q4_K batch 16: 2 warps a scheduler,
 * 0.57 of them eligible a cycle, DRAM 19% busy). Here a ring is RW warps of one row tile each (16 RW
 * rows) walking the same super-blocks: a super-block's activations are copied once per ring, and every
 * operand (the ring's blocks of that super-block and its activations) goes through a shared-memory ring
 * of RING_ST super-blocks filled by 16-byte cp.async, RING_ST - 1 ahead, one barrier a super-block. Q4_K
 * and Q5_K blocks (144, 176 bytes) are 16-byte aligned and copied as they are; a Q6_K block (210 bytes, at
 * a 2-byte offset) or Q8_K block (292, 4-byte) as the 16-byte segments that cover it, read from its offset
 * in them. Where the weights start 16-aligned and a row is a multiple of 16 bytes (Q4_K and Q5_K always,
 * Q6_K with nb a multiple of 8, Q8_K of 4), the TM instances take the rows by a tensor map instead: one
 * thread of the ring issues one bulk tensor copy a super-block (the ring's rows, ring_tm_pitch bytes of
 * each from the 16-byte boundary at or below its block, zero-filled past the weights), completing on the
 * stage's mbarrier, so no other thread spends an instruction on the rows; each block lies in its slot as
 * the cp.async copies put it, and the same bytes are read either way. 16 warps an SM either way:
 *   PH = 4: a CTA is one ring of 8 warps (128 rows; 7 warps, or 8 of which fewer compute, where that
 *           balances the SMs: ring_tiles) walking all 4 phases: the super-blocks in order, each into its
 *           phase's running sum (ring_inorder; else phase after phase, super-blocks p, p + 4, ...), the
 *           phase sums then added: two CTAs an SM, used where the row blocks alone fill the SMs;
 *   PH = 1: a CTA is 4 rings of 4 warps (64 rows), ring p the phase p with its own named barrier, and
 *           ring 0 adds the others' sums from shared memory at the end: one CTA an SM, 4 times the CTAs
 *           of PH = 4 for the same rows (8192 rows: 128 CTAs). (Clusters of 4 one-phase CTAs were
 *           measured first: an H200 keeps at most 62 clusters of two-per-SM CTAs resident, so 8192 rows,
 *           64 clusters, took two waves, 1.4x the time.)
 * Per output, superblock_staged, the special-value fallback, the phase sums and the final
 * ((p0 + p1) + p2) + p3 are the staged kernel's: the same bits. */
template <int T> __host__ __device__ constexpr int ring_bb()
{
    return T == QG_Q4_K ? QG_Q4K_BYTES : T == QG_Q5_K ? QG_Q5K_BYTES : T == QG_Q6_K ? QG_Q6K_BYTES : QG_Q8K_BYTES;
}
/* A row's slot in a stage: the block itself where blocks are 16-byte aligned (Q4_K, Q5_K); else the
 * 16-byte segments that cover it (Q6_K 210 bytes at a 2-byte offset: 14 segments; Q8_K 292 at a 4-byte
 * offset: 19), the block starting (its offset mod 16) bytes in. */
template <int T> __host__ __device__ constexpr int ring_slot() { return T == QG_Q6_K ? 224 : T == QG_Q8_K ? 304 : ring_bb<T>(); }
/* How load_words_shared reads a Q6_K block's words (the same words every way, so a choice of speed
 * alone): Q6_READ_A2 two 2-byte reads a word (a block at any even address), Q6_READ_BRANCH one 4-byte read
 * where the block is 4-byte aligned and two elsewhere (a branch a block), Q6_READ_A4 one 4-byte read (the
 * caller knows the block is 4-byte aligned). The ring kernel walks each phase with the reads it needs
 * (k_kq_gemm_ring: on rows that start 4-byte aligned, a phase's blocks are all aligned or all 2 bytes
 * off); ring_q6_read is its choice where the rows' alignment is mixed: the branch for the instances of
 * one column tile and four phase groups (8192 rows, batch 4..8: H200, same call, 4-6% less time than
 * two 2-byte reads a word), else A2 (the branch measured 1.5-8.6% slower in the 7-warp CTAs of 28672
 * rows at batch 4..8). The warpgroup kernel walks its phases the same way and takes the branch where
 * the rows' alignment is mixed (wg_q6_read; the branch measured 5-7% less time than A2 for every block on
 * 28672x8192 at batch 16..64). */
enum { Q6_READ_A2 = 0, Q6_READ_BRANCH = 1, Q6_READ_A4 = 2 };
template <int T, int NT, int PH> __host__ __device__ constexpr int ring_q6_read() { return T == QG_Q6_K && PH == 1 && NT == 1 ? Q6_READ_BRANCH : Q6_READ_A2; }
template <int T> __host__ __device__ constexpr int wg_q6_read() { return T == QG_Q6_K ? Q6_READ_BRANCH : Q6_READ_A2; }
/* Whether every Q6_K row of nb blocks starts 4-byte aligned (nb even, w 4-byte aligned): then the
 * blocks of even phases are 4-byte aligned and those of odd phases 2 bytes off (210 sb = 2 sb mod 4).
 * Shared by the ring and warpgroup kernels (a macro: as an inline function it changed the code ptxas
 * emits for one ring instance). QG_CUDA_MUTANT_KQ_Q6_ROWS4 (a GPU-machine mutant) drops the nb test, so
 * rows of odd nb take the aligned reads: test_kq_gemm fails on it through both kernels. */
#ifdef QG_CUDA_MUTANT_KQ_Q6_ROWS4
#define QG_Q6_ROWS4(nb, w) (((uintptr_t)(w) & 3u) == 0)
#else
#define QG_Q6_ROWS4(nb, w) ((((nb) & 1) == 0) && (((uintptr_t)(w) & 3u) == 0))
#endif
/* Which instances take the grid copies (row_copies_grid) instead of the flat ones, likewise a choice of
 * speed alone: H200, same call, the ring kernel's one-column-tile instances of four phase groups (8192
 * rows: Q4_K batch 8 4-6% less time, Q5_K batch 4 on 8192x28672 4%, Q8_K batch 8 on 8192x8192 3%) and
 * its Q6_K 7-warp CTAs (28672 rows, batch 4..8: 5%); the warpgroup kernel's Q4_K, Q6_K and Q8_K instances
 * (Q6_K batch 32..64 2-8%, Q8_K batch 64 2-5%, Q4_K batch 32 on 28672x8192 3%). Not taken: two column
 * tiles in the ring kernel (8192x8192 batch 16: Q8_K 12% more, Q5_K 6%), the ring kernel's 7- and 8-warp
 * CTAs of the other types (28672 rows: Q8_K 1-1.4% more at batch 1..8, Q5_K 1%, Q4_K 1%), the warpgroup
 * kernel's Q5_K instances (batch 32: 3-4% more). The flat Q8_K instances copy 16-aligned rows by copy16
 * (ring_copy16: 4-6% less time at batch 1..8 on 28672x8192 than the general flat copy). */
/* The ring kernel's choice of sum_flags (superblock_staged's SF), a choice of speed alone: the staged
 * kernel's, and also for Q6_K, whose flags read off part let the byte permutes take an immediate
 * selector (with the 0x64 byte as a constant each one needed a move of its selector) and drop the
 * activations' fma tests: H200, same call, Q6_K batch 1..8 on 28672x8192, 8192x28672 and 8192x8192
 * 4.5-6.5% less time. Q8_K keeps the activations' test (same call: from 2% less time on 28672x8192 to
 * 2.4% more on 8192x28672). */
template <int T> __host__ __device__ constexpr bool ring_sf() { return sum_flags<T, 1>() || T == QG_Q6_K; }
template <int T, int NT, int PH> __host__ __device__ constexpr bool ring_grid() { return NT == 1 && (PH == 1 || T == QG_Q6_K); }
template <int T> __host__ __device__ constexpr bool wg_grid() { return T != QG_Q5_K; }
template <int T> __host__ __device__ constexpr bool ring_copy16() { return T == QG_Q8_K; }
/* Whether a PH = 4 CTA walks its super-blocks in order, 0, 1, 2, ..., with a running sum a phase (sb's
 * in the sum of phase sb mod 4), instead of phase after phase: the same sums in the same order, so a
 * choice of speed alone. Blocks of 144, 176 and 292 bytes share the 32-byte sectors at their edges with
 * their neighbours, which belong to the other phases; walked phase after phase, such a sector has left L2
 * before the neighbour's phase reads it (Nsight Compute, H200, batch 8 on 28672x8192: Q4_K 170.8 MB of
 * DRAM reads for 132.1 MB of blocks, Q8_K 293.8 for 268.4; in order 132.4 and 268.1). Q6_K's two column
 * tiles keep the phase walk (its four sums of two tiles would cost 16 more registers a thread). */
template <int T, int NT, int PH> __host__ __device__ constexpr bool ring_inorder() { return PH == 4 && (T != QG_Q6_K || NT == 1); }
/* The L2 promotion of the ring's tensor-map copies (a choice of speed, same bits either way): 128-byte
 * lines for Q8_K; else 256 bytes for the phase-group CTAs (PH = 1, whose four phases read neighbouring
 * blocks together), none for the four-phase ones. H200, one call, two runs each: Q8_K's in-order four-phase
 * CTAs (the line past a block's box holds the head of the block read next) against none, 28672x8192 at
 * batch 1..8, 3.7-4.3% less time (2.3-2.7% on 25344x5120; Q4_K 0.7-1.4%, Q5_K and Q6_K within 1.2% either
 * way); Q8_K's phase-group CTAs against 256 bytes, batch 1..8, 2.2-8% less time on 8192x28672, 8192x8192,
 * 12288x8192, 13824x5120 and 14336x4096. */
template <int T, int PH> constexpr int ring_l2_bytes() { return T == QG_Q8_K ? 128 : PH == 1 ? 256 : 0; }
/* The walk in order of a four-phase CTA (ring_inorder, wg_inorder): super-block sb's product into the
 * running sum acc4[sb mod 4] (step(sb, sum, rd); each sum from +0), the words of even super-blocks read
 * as re says, of odd ones as ro. The caller adds the sums, ((p0 + p1) + p2) + p3. */
template <int NT, class Step, class RE, class RO>
__device__ __forceinline__ void walk_in_order(size_t nb, Step &step, float (&acc4)[4][NT][4], RE re, RO ro)
{
#pragma unroll
    for (int q = 0; q < 4; q++)
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int j = 0; j < 4; j++) acc4[q][n][j] = 0.0f;
#pragma unroll 1
    for (size_t s0 = 0; s0 < nb; s0 += 4) {
        step(s0, acc4[0], re);
        if (s0 + 1 < nb) step(s0 + 1, acc4[1], ro);
        if (s0 + 2 < nb) step(s0 + 2, acc4[2], re);
        if (s0 + 3 < nb) step(s0 + 3, acc4[3], ro);
    }
}
/* warps of a ring: PH = 4, 8 (a CTA, two CTAs an SM); PH = 1, 4 (a phase group; 4 groups a CTA, one CTA an SM) */
__host__ __device__ constexpr int ring_rw(int ph) { return ph == 4 ? 8 : 4; }
/* a stage: the ring's 16 RW row slots of one super-block, then its activations (NT 8 columns of XS halves) */
/* A row's pitch in a stage where a tensor map copies the rows (TM): the box's row, from the 16-byte
 * boundary at or below the block's first byte (a box must start 16-aligned along a row), so the block lies
 * at its offset mod 16 as in the cp.async slots (ring_slot): the same pitch, but Q8_K's box ends with its
 * codes (at most 12 + 260 bytes: its bsums are never read). */
template <int T> __host__ __device__ constexpr int ring_tm_pitch() { return T == QG_Q8_K ? 272 : (ring_bb<T>() + 15) / 16 * 16; }
template <int T, bool TM> __host__ __device__ constexpr int ring_pitch() { return TM ? ring_tm_pitch<T>() : ring_slot<T>(); }
template <int T, int NT, int PH, int RW = ring_rw(PH), bool TM = false> __host__ __device__ constexpr int ring_stage_bytes()
{
    return 16 * RW * ring_pitch<T, TM>() + NT * 8 * XS * 2;
}
/* stages a ring: as many as 227 KB an SM hold (PH = 4, two CTAs: Q4_K 4 of 26.5 KB, Q5_K 3 of 30.5 KB,
 * Q6_K 3 of 36.5 KB, Q8_K 2 of 46.5 KB; PH = 1, four rings: Q4_K 3 of 17.5 KB, the others 2 of 19.5 to
 * 27.5 KB) */
template <int T, int PH> __host__ __device__ constexpr int ring_st()
{
    return PH == 4 ? (T == QG_Q4_K ? 4 : T == QG_Q8_K ? 2 : 3) : (T == QG_Q4_K ? 3 : 2);
}
/* TM: an mbarrier a stage after the rings */
template <int T, int NT, int PH, int RW = ring_rw(PH), bool TM = false> constexpr int ring_smem()
{
    return (PH == 4 ? 1 : 4) * ring_st<T, PH>() * (ring_stage_bytes<T, NT, PH, RW, TM>() + (TM ? 8 : 0));
}

/* The words load_words() (and, for Q6_K, q6_align_words()) give, from a block at p in shared memory
 * (Q6_K: p even, possibly 2 bytes past a 4-byte boundary: each word from two 2-byte reads). */
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900 /* the ring kernel's (sm_90) */
struct ld_shared {
    static __device__ __forceinline__ uint32_t u32(const uint8_t *p) { return *reinterpret_cast<const uint32_t *>(p); }
    static __device__ __forceinline__ uint4 u128(const uint8_t *p) { return *reinterpret_cast<const uint4 *>(p); }
};
__device__ __forceinline__ uint32_t lds_u32_a2(const unsigned char *p)
{
    const uint16_t *q = reinterpret_cast<const uint16_t *>(p);
    return (uint32_t)q[0] | ((uint32_t)q[1] << 16);
}
template <int T, int RD>
__device__ __forceinline__ void load_words_shared(const unsigned char *p, int t, uint32_t (&v)[wwords<T>::n])
{
    if constexpr (T != QG_Q6_K) gather_words<T, ld_shared>(p, t, v);
    else if (RD == Q6_READ_A4 || (RD == Q6_READ_BRANCH && ((uintptr_t)p & 2u) == 0)) { /* a block 4 bytes aligned: one read a word */
#pragma unroll
        for (int s = 0; s < 12; s++) v[s] = *reinterpret_cast<const uint32_t *>(p + 16 * s + 4 * t);
#pragma unroll
        for (int i = 0; i < 4; i++) v[12 + i] = *reinterpret_cast<const uint32_t *>(p + QG_Q6K_SCALES + 4 * i);
        v[16] = *reinterpret_cast<const uint16_t *>(p + QG_Q6K_D);
    } else {
#pragma unroll
        for (int s = 0; s < 12; s++) v[s] = lds_u32_a2(p + 16 * s + 4 * t);
#pragma unroll
        for (int i = 0; i < 4; i++) v[12 + i] = lds_u32_a2(p + QG_Q6K_SCALES + 4 * i);
        v[16] = *reinterpret_cast<const uint16_t *>(p + QG_Q6K_D);
    }
}
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/* One 16-byte segment of a row whose start is not known to be 16-aligned: o the block's byte offset from
 * the first row (at first, first_lo its offset mod 2^32), segoff the segment's place in the slot. The
 * covering segment starts at the block's offset rounded down to 16; one past the end of the weights
 * (only ever the last block's) is copied byte by byte up to the end. */
__device__ __forceinline__ void copy_segment(uint32_t dst, const uint8_t *first, uint32_t first_lo, const uint8_t *end, uint32_t o,
                                             uint32_t segoff)
{
    const uint8_t *p = first + (o - ((first_lo + o) & 15u)) + segoff;
    if (p + 16 <= end) cp_async16_s(dst, p);
    else
        for (int i = 0; p + i < end; i++) asm volatile("st.shared.u8 [%0], %1;\n" ::"r"(dst + i), "r"((uint32_t)p[i]) : "memory");
}

/* Which types zero a partial CTA's dead rows (zero_dead_rows): Q6_K only. Its stale rows measured slow
 * (27648x5120 at batch 8 3.9x the time a row of 28672x5120), Q4_K, Q5_K and Q8_K on the same partial
 * CTAs not (within 4% a row), and the zeroing code cost the Q4_K ring 5% on 8192x28672 at batch 8 and its
 * warpgroup kernel 1.5-2% at batch 16..32 (H200, same call), where no CTA is partial. */
template <int T> __host__ __device__ constexpr bool zero_dead() { return T == QG_Q6_K; }

/* Stage rows lim .. rows_end - 1 of every stage (row r at r SLOT) set to zero, once, before the first
 * copy: the grid copies never write the rows of a partial CTA past the weights, and their warps still
 * compute them (outputs never stored). Stale words there looked special often enough that those warps
 * took the exact scalar path at every super-block: H200, Q6_K 27648x5120 at batch 4..8 (247 CTAs of 112
 * rows, the last one 6 tiles) 273-283 us, 3.7x the time of 28672x5120. Zero words are no special value;
 * a zero code times an inf or NaN activation still is, as in any row. */
template <int SLOT, int NST, int STB, int NTH>
__device__ __forceinline__ void zero_dead_rows(unsigned char *stages, int lim, int rows_end, int tid)
{
    static_assert(SLOT % 16 == 0 && STB % 16 == 0, "whole 16-byte pieces");
    constexpr int PIECES = SLOT / 16;
    const int per = (rows_end - lim) * PIECES; /* <= 0 but in a partial CTA */
    for (int e = tid; e < NST * per; e += NTH) {
        const int st = e / per, r = lim + (e % per) / PIECES, q = e % PIECES;
        *reinterpret_cast<uint4 *>(stages + st * STB + r * SLOT + 16 * q) = make_uint4(0u, 0u, 0u, 0u);
    }
}

/* A CTA's copies of its rows' blocks of one super-block into a stage (the ring kernel and k_kq_gemm_wg),
 * two ways that land the same bytes; which one an instance compiles is a choice of speed alone
 * (ring_grid, wg_grid).
 *
 * Flat copies (row_copies_flat): weight segment e = tid + NTH k (row e / SEG of the RR rows from row0;
 * rows past the end copy the last row, never stored) lands at 16 e of the stage: 16 bytes at 16 (e % SEG)
 * of the row's block (aligned types), else of the 16-byte segments that cover it (the row's first at its
 * block's offset rounded down to 16; a segment past the end of the weights, only ever the last block's, is
 * copied byte by byte up to the end). rows16 (Q6_K, Q8_K; the USE16 instances): the weights start
 * 16-aligned and a row is a multiple of 16 bytes (Q6_K: nb a multiple of 8, Q8_K of 4), so every row starts
 * 16-aligned, a block's offset mod 16 is its offset in its row mod 16, and its segments end at most at its
 * row's end (SEG = ceil(BB / 16): the last block of a row ends exactly at 16 SEG - BB past a 16-byte
 * boundary): copy16 runs the copy as the aligned types do, one address add, no end test. Byte offsets
 * from the first row stay below 2^32 (checked by the launches). */
template <int T, int NTH, int RR, bool USE16>
struct row_copies_flat {
    static constexpr int BB = ring_bb<T>(), SEG = ring_slot<T>() / 16, KW = (RR * SEG + NTH - 1) / NTH;
    static constexpr bool ALIGNED = BB % 16 == 0;
    const uint8_t *src[KW]; /* aligned types: the copy's source at super-block 0 */
    uint32_t rel[KW], seg[KW]; /* else: its row's first byte from the first row's, 16 (e % SEG) */
    const uint8_t *first, *end; /* the first row; the end of the weights */
    uint32_t first_lo;          /* the first row's offset mod 2^32 (for the offsets mod 16) */
    bool last;                  /* the last copy runs (the others always do) */
    bool rows16;                /* unaligned types: every row starts 16-aligned (copy16) */
    static_assert(ALIGNED || SEG == (BB + 15) / 16, "a block's segments end at its row's end");
    __device__ __forceinline__ row_copies_flat(const uint8_t *w, size_t rows, size_t nb, size_t row0, int tid)
        : first(w + row0 * nb * BB), end(w + rows * nb * BB), first_lo((uint32_t)(row0 * nb * BB)), last(tid + NTH * (KW - 1) < RR * SEG),
          rows16(USE16 && !ALIGNED && ((nb * BB) & 15) == 0 && ((uintptr_t)w & 15) == 0)
    {
#pragma unroll
        for (int k = 0; k < KW; k++) {
            const int e = tid + NTH * k, r = e < RR * SEG ? e / SEG : 0;
            const size_t row = row0 + (size_t)r < rows ? row0 + (size_t)r : rows - 1;
            src[k] = w + row * nb * BB + 16 * (e % SEG);
            rel[k] = (uint32_t)((row - row0) * nb * BB);
            seg[k] = 16u * (uint32_t)(e % SEG);
        }
    }
    /* copy k of the super-block at byte offset off of a row to shared address dst */
    __device__ __forceinline__ void copy(int k, uint32_t dst, size_t off) const
    {
        if constexpr (ALIGNED) cp_async16_s(dst, src[k] + off);
        else copy_segment(dst, first, first_lo, end, rel[k] + (uint32_t)off, seg[k]);
    }
    /* copy k where rows16 holds: the block's offset off rounded down to 16 (off16) */
    __device__ __forceinline__ void copy16(int k, uint32_t dst, uint32_t off16) const
    {
#ifdef QG_CUDA_MUTANT_KQ_ROWS16
        cp_async16_s(dst, first + (rel[k] + seg[k] + off16 + 16u)); /* a GPU-machine mutant: one segment late */
#else
        cp_async16_s(dst, first + (rel[k] + seg[k] + off16));
#endif
    }
    /* the thread's copies of the block at offset off of each row into stage address st (copy k at st
     * + 16 NTH k) where run(k) */
    template <typename RUN>
    __device__ __forceinline__ void copy_all(uint32_t st, size_t off, RUN run) const
    {
        if (USE16 && !ALIGNED && rows16) {
            const uint32_t off16 = (uint32_t)off & ~15u;
#pragma unroll
            for (int k = 0; k < KW; k++)
                if (run(k)) copy16(k, st + 16u * NTH * k, off16);
        } else {
#pragma unroll
            for (int k = 0; k < KW; k++)
                if (run(k)) copy(k, st + 16u * NTH * k, off);
        }
    }
};

/* Grid copies (row_copies_grid): row r's block, as SC 16-byte segments, lands at 16 (r SEG + s) of the
 * stage (s < SC): for the aligned types the block itself, else the 16-byte segments that cover it (the
 * row's first at its block's offset rounded down to 16). SC = SEG, or fewer where the kernel reads no byte
 * of the segments after (Q8_K's bsums). Rows at or past lim (the CTA's rows inside the weights, fewer for a
 * partial CTA) are not copied: their stage rows hold zeros (zero_dead_rows) and their outputs are never
 * stored. Byte offsets from the first row stay below
 * 2^32 (checked by the launches). Thread tid < R SC takes segment tid % SC of rows tid / SC + R k, R rows
 * a round, so its copy k is one per-thread base plus k times a fixed step, in global and shared memory
 * alike: one 64-bit add a copy.
 * - Every row 16-aligned (the aligned types: always; Q6_K and Q8_K where the weights start 16-aligned and
 *   a row is a multiple of 16 bytes, rows16: Q6_K nb a multiple of 8, Q8_K of 4): R = RPR = NTH / SC. A
 *   block's offset mod 16 is then its offset in its row mod 16, and its segments end at most at its row's
 *   end (SEG = ceil(BB / 16): the last block of a row ends exactly at 16 SEG - BB past a 16-byte boundary).
 * - Q6_K rows not 16-aligned (U6, an instance of its own, so the aligned instance keeps its registers):
 *   R = RPRU, RPR rounded down to a multiple of 8. A Q6_K row (210 nb bytes) is even, so 8 rows are a
 *   multiple of 16 bytes for every nb: all rows a thread copies put the block at one offset mod 16, and the
 *   thread rounds its base down once a super-block. Only the last block of the weights can have a
 *   covering segment past their end; such a segment is copied byte by byte up to the end, in a loop over
 *   the thread's rows that runs only where the thread's last possible segment would end past the weights
 *   (elsewhere the copies are unrolled as in the aligned instances).
 * - Q8_K rows not 16-aligned: copy e = tid + NTH k of the flat order (row e / SC, segment e % SC)
 *   computes its row's segment from the row's own offset mod 16 (copy_segment). (The grid of Q6_K's kind,
 *   4 rows a round for Q8_K's 19 segments, measured 7-10% slower there: H200, 8192x11008, batch 1..8.)
 * The same bytes land either way, and as the flat copies land them. */
template <int T, int NTH, int RR, int SC = ring_slot<T>() / 16, bool U6 = false>
struct row_copies_grid {
    static constexpr int BB = ring_bb<T>(), SEG = ring_slot<T>() / 16;
    static constexpr bool ALIGNED = BB % 16 == 0;
    static constexpr int MU = T == QG_Q6_K ? 8 : 1;
    static constexpr int RPR = NTH / SC, KG = (RR + RPR - 1) / RPR, RPRU = RPR / MU * MU;
    static_assert(SC <= SEG && RPRU >= 1, "segments of a slot, one round of MU rows at least");
    static_assert(!U6 || (T == QG_Q6_K && MU * BB % 16 == 0), "U6: Q6_K, whose 8 blocks are a multiple of 16 bytes");
    const uint8_t *first, *end; /* the first row; the end of the weights */
    size_t rb;                  /* bytes a row */
    uint32_t first_lo;          /* the first row's offset mod 2^32 (for the offsets mod 16) */
    uint32_t gofs, gdst;        /* copy 0's offset from the first row's block and from the stage */
    int grow, tid;              /* copy 0's row (RR for the threads past R SC: none); the thread */
    bool grid;                  /* every row starts 16-aligned (Q6_K: !U6, which the launches ensure) */
    const uint8_t *gbase;       /* (grid) copy 0's source at super-block 0: first + gofs */
    size_t gstep;               /* (grid) the source step from a copy to the next: RPR rows */
    __device__ __forceinline__ row_copies_grid(const uint8_t *w, size_t rows, size_t nb, size_t row0, int tid_)
        : first(w + row0 * nb * BB), end(w + rows * nb * BB), rb(nb * BB), first_lo((uint32_t)(row0 * nb * BB)), tid(tid_),
          grid(ALIGNED || (T == QG_Q6_K && !U6) || (((nb * BB) & 15) == 0 && ((uintptr_t)w & 15) == 0))
    {
        const int r = tid_ / SC, s = tid_ % SC;
        grow = tid_ < (U6 ? RPRU : RPR) * SC ? r : RR;
        gofs = (uint32_t)((size_t)r * rb) + 16u * (uint32_t)s;
        gdst = 16u * (uint32_t)(r * SEG + s);
#ifdef QG_CUDA_MUTANT_KQ_GRID_STEP
        uint64_t b = (uint64_t)(first + gofs), step = (uint64_t)(RPR - 1) * rb; /* a GPU-machine mutant: each round one row short */
#else
        uint64_t b = (uint64_t)(first + gofs), step = (uint64_t)RPR * rb;
#endif
        /* opaque to the compiler, which otherwise rebuilds every copy's address from the kernel's
         * parameters (nb, w) at every super-block: about 7 instructions a copy instead of 2 */
        asm volatile("mov.b64 %0, %0;\n" : "+l"(b));
        asm volatile("mov.b64 %0, %0;\n" : "+l"(step));
        gbase = reinterpret_cast<const uint8_t *>(b), gstep = (size_t)step;
    }
    /* the thread's copies of the block at byte offset off of each row below lim into the stage at st */
    __device__ __forceinline__ void copy_all(uint32_t st, size_t off, int lim) const
    {
        if constexpr (U6) {
            /* the covering segments of the thread's rows' blocks start (first_lo + gofs + off) mod 16 bytes
             * before the blocks' own offsets (gofs - 16 s is the row's offset from the first row) */
            const uint32_t down = (first_lo + gofs + (uint32_t)off) & 15u;
            const uint8_t *q = first + off + gofs - down;
            const size_t step = (size_t)RPRU * rb;
            uint32_t dst = st + gdst;
            if (grow >= lim) return;
            /* every covering segment of the thread's rows inside the weights (all but the last CTA's last
             * super-block): the aligned instances' unrolled copies, one base and one step (row grow < lim
             * is inside the weights, so end - q is a true distance) */
            constexpr int KGU = (RR + RPRU - 1) / RPRU;
            if ((size_t)(end - q) >= (size_t)(KGU - 1) * step + 16) {
#pragma unroll
                for (int k = 0; k < KGU; k++)
#ifdef QG_CUDA_MUTANT_KQ_U6_STEP
                    if (grow + RPRU * k < lim) cp_async16_s(dst + 16u * (uint32_t)(RPRU * SEG * k), q + (size_t)k * (step - 16)); /* a GPU-machine mutant: each round one segment early */
#else
                    if (grow + RPRU * k < lim) cp_async16_s(dst + 16u * (uint32_t)(RPRU * SEG * k), q + (size_t)k * step);
#endif
                return;
            }
#pragma unroll 1
            for (int r = grow; r < lim; r += RPRU, q += step, dst += 16u * RPRU * SEG) {
                if (q + 16 <= end) cp_async16_s(dst, q);
#ifndef QG_CUDA_MUTANT_KQ_GRID_TAIL /* a GPU-machine mutant: the segment past the end of the weights not copied */
                else
                    for (int i = 0; q + i < end; i++) asm volatile("st.shared.u8 [%0], %1;\n" ::"r"(dst + i), "r"((uint32_t)q[i]) : "memory");
#endif
            }
            return;
        }
        if (grid) {
            /* copy k from gbase + the block's covering offset + k gstep: one 64-bit add a copy */
            const uint8_t *p = gbase + (ALIGNED ? off : off & ~(size_t)15);
#pragma unroll
            for (int k = 0; k < KG; k++) {
                if (grow + RPR * k < lim) cp_async16_s(st + gdst + 16u * (uint32_t)(RPR * SEG * k), p);
                p += gstep;
            }
            return;
        }
        if constexpr (!ALIGNED && T != QG_Q6_K) {
            constexpr int KF = (RR * SC + NTH - 1) / NTH;
#pragma unroll 1
            for (int k = 0; k < KF; k++) {
                const int e = tid + NTH * k, r = e / SC, s = e % SC;
                if (r >= lim) break;
                copy_segment(st + 16u * (uint32_t)(r * SEG + s), first, first_lo, end, (uint32_t)((size_t)r * rb) + (uint32_t)off, 16u * (uint32_t)s);
            }
        }
    }
};
#endif

/* TM instances (ring and warpgroup kernels): n stage mbarriers at bars, one arrival each a phase (the
 * copying thread's), initialised by thread tid 0 of the ring; the caller's barrier follows. */
__device__ __forceinline__ void tm_bars_init(uint32_t bars, int n, int tid)
{
    if (tid == 0) {
        for (int j = 0; j < n; j++) mbar_init(bars + 8u * (uint32_t)j, 1);
        mbar_init_fence();
    }
}

/* One box of the CTA's rows (from row0, the block at byte offset off of each) into the stage at st,
 * completing on bar, issued by one thread: the box starts at the 16-byte boundary at or below the block
 * (a box starts 16-aligned along a row; rows past the weights and bytes past a row's end zero-filled);
 * the fence orders the CTA's reads of the slot's previous super-block (before the last CTA barrier) with
 * the copy's writes. */
__device__ __forceinline__ void tm_rows_copy(uint32_t st, uint32_t bar, const CUtensorMap *tmap, size_t off, size_t row0, uint32_t bytes)
{
    fence_proxy_async();
    mbar_expect_tx(bar, bytes);
#ifdef QG_CUDA_MUTANT_KQ_TMA_ROW
    tma_load_2d(st, tmap, (int)((off & ~(size_t)15) / 2), (int)row0 + 1, bar); /* a GPU-machine mutant: the box one row late */
#else
    tma_load_2d(st, tmap, (int)((off & ~(size_t)15) / 2), (int)row0, bar);
#endif
}

/* TM instances copy no rows themselves */
struct ring_no_copies {
    __device__ __forceinline__ ring_no_copies(const uint8_t *, size_t, size_t, size_t, int) {}
};

template <int T, int NT, int PH, bool PART = false, int RWX = ring_rw(PH), bool U6 = false, bool TM = false>
__global__ void __launch_bounds__(PH == 4 ? 32 * RWX : 512, PH == 4 ? 2 : 1) k_kq_gemm_ring(const uint8_t *__restrict__ w, size_t rows, size_t nb,
                                                                                    const __half *__restrict__ x, size_t cols, int batch,
                                                                                    float *y32, uint16_t *y16, int lt,
                                                                                    const __grid_constant__ CUtensorMap tmap)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int RW = RWX, BB = ring_bb<T>(), SLOT = ring_pitch<T, TM>(), SEG = ring_slot<T>() / 16, W = wwords<T>::n, NC = NT * 8;
    constexpr int NTH = RW * 32, RING_ROWS = 16 * RW, WB = RING_ROWS * SLOT, STB = ring_stage_bytes<T, NT, PH, RW, TM>();
    constexpr bool ALIGNED = BB % 16 == 0;
    constexpr int KX = (NC * 32 + NTH - 1) / NTH; /* x copies a thread and stage */
    constexpr int RING_ST = ring_st<T, PH>();
    extern __shared__ __align__(16) unsigned char dyn_smem[];
    /* PH = 1: the CTA's 4 phase groups, each its own ring; tid, wid: the thread's and warp's place in its group */
    const int grp = PH == 4 ? 0 : (int)threadIdx.x / NTH, tid = (int)threadIdx.x - grp * NTH, wid = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, t = lane & 3;
    const int p0 = grp; /* first phase */
    /* PART (PH = 4 only): the CTA computes lt < RW row tiles (ring_tiles); warps wid >= lt copy their
     * share of x and keep the barriers, but no row of theirs is copied, computed or stored. Else lt = RW. */
    static_assert(!PART || PH == 4, "partial CTAs are PH = 4 CTAs");
    if constexpr (!PART) lt = RW;
    const size_t row0 = (size_t)blockIdx.x * 16 * lt;
    const bool live = !PART || wid < lt;
    unsigned char *const gsm = dyn_smem + grp * RING_ST * STB; /* the group's ring */
    /* the ring's barrier: the CTA's (PH = 4) or the group's named barrier 1 + grp of its NTH threads (an
     * immediate id: the branch is uniform in a warp) */
    auto ring_sync = [&]() {
        if constexpr (PH == 4) __syncthreads();
        else if (grp == 0) asm volatile("bar.sync 1, %0;\n" ::"n"(NTH) : "memory");
        else if (grp == 1) asm volatile("bar.sync 2, %0;\n" ::"n"(NTH) : "memory");
        else if (grp == 2) asm volatile("bar.sync 3, %0;\n" ::"n"(NTH) : "memory");
        else asm volatile("bar.sync 4, %0;\n" ::"n"(NTH) : "memory");
    };
    /* super-blocks of phase p: p, p + 4, ... < nb */
    auto count = [&](int p) { return (size_t)p < nb ? (int)((nb - (size_t)p + 3) / 4) : 0; };
    /* the CTA's phases in the order they are walked and summed: p0 .. p0 + PH - 1 */
#ifdef QG_CUDA_MUTANT_KQ_RING_PHASE_ORDER
    /* a GPU-machine mutant: the phases walked (and so summed) as 0, 2, 1, 3, inside the bound */
    auto phase = [&](int pi) { return p0 + (PH == 4 && (pi == 1 || pi == 2) ? 3 - pi : pi); };
#else
    auto phase = [&](int pi) { return p0 + pi; };
#endif
    /* columns past the batch stay zero in every stage (no copy writes them) */
    for (int e = tid; e < RING_ST * (NC - batch) * 32; e += NTH) {
        const int s = e / ((NC - batch) * 32), c = batch + (e / 32) % (NC - batch);
        *reinterpret_cast<uint4 *>(gsm + s * STB + WB + c * XS * 2 + 16 * (e & 31)) = make_uint4(0u, 0u, 0u, 0u);
    }
    /* the thread's copies: the ring's rows (row_copies), and x segment e (column e / 32, halves 8 (e % 32) ..)
     * at WB + column XS + 8 (e % 32) halves */
    /* Q8_K: the block's d and codes end 260 bytes past its start, which lies at most 12 bytes into its
     * first 16-byte segment, so segments 17 and 18 (its bsums, which no product reads, and the next
     * block's head) need no copy. Skipped in the partial CTAs at batch 1..8 only: H200, same run,
     * 28672x8192 3-4% less time there, but batch 16 (both kernels) 9-15% more and 8192x28672 batch 1
     * (PH = 1) 1.5% more */
    constexpr int SC = T == QG_Q8_K && PART && NT == 1 ? (12 + QG_Q8K_QS + QG_Q8K_QS_BYTES + 15) / 16 : SEG;
    using copies_t = std::conditional_t<TM, ring_no_copies,
                                        std::conditional_t<ring_grid<T, NT, PH>(), row_copies_grid<T, NTH, RING_ROWS, SC, U6>,
                                                           row_copies_flat<T, NTH, RING_ROWS, ring_copy16<T>()>>>;
    const copies_t wc(w, rows, nb, row0, tid);
    /* grid: the CTA's rows inside the weights (PART: of its 16 lt rows); flat (PART): the copies of its
     * 16 lt rows, e < wlim */
    const int wlim = ring_grid<T, NT, PH>() ? (int)min((size_t)(16 * lt), rows - row0) : 16 * lt * SEG;
    if constexpr (zero_dead<T>() && ring_grid<T, NT, PH>() && !TM) zero_dead_rows<SLOT, RING_ST, STB, NTH>(gsm, wlim, 16 * lt, tid);
    const __half *xsrc[KX];
#pragma unroll
    for (int k = 0; k < KX; k++) {
        const int e = tid + NTH * k, c = e >> 5;
        xsrc[k] = x + (size_t)(c < batch ? c : 0) * cols + 8 * (e & 31);
    }
    const uint32_t ring = (uint32_t)__cvta_generic_to_shared(gsm);
    /* TM: the mbarrier of each stage of the group's ring, after all rings; one arrival (the copying thread's,
     * with the box's bytes) and the copy complete a phase */
    const uint32_t bars = (uint32_t)__cvta_generic_to_shared(dyn_smem + (PH == 4 ? 1 : 4) * RING_ST * STB) + 8u * (uint32_t)(grp * RING_ST);
    if constexpr (TM) {
        tm_bars_init(bars, RING_ST, tid);
        ring_sync();
    }
    const uint32_t xdst = WB + (uint32_t)((tid >> 5) * XS * 2 + 16 * (tid & 31)); /* x segment tid; + k NTH / 32 columns */
    /* the copies run RING_ST - 1 super-blocks ahead through the CTA's sequence: its phases in order, each
     * phase's super-blocks in order (ipi, ik: the next one's phase and place in it, icnt its phase's count) */
    constexpr bool INORDER = ring_inorder<T, NT, PH>();
    int islot = 0, ipi = 0, ik = 0, total = 0, icnt = count(phase(0));
    for (int pi = 0; pi < PH; pi++) total += count(phase(pi));
    auto issue = [&]() { /* the next super-block of the sequence into ring slot islot */
        size_t sb; /* the super-block */
        if constexpr (INORDER) sb = (size_t)ik++;
        else {
            while (ik == icnt) ik = 0, icnt = count(phase(++ipi));
            sb = (size_t)phase(ipi) + 4 * (size_t)ik++;
        }
        const size_t off = sb * BB; /* its byte offset in a row */
        const int sl = islot;
        const uint32_t st = ring + (uint32_t)(sl * STB) + 16u * (uint32_t)tid;
        islot = islot == RING_ST - 1 ? 0 : islot + 1;
        if constexpr (TM) {
            /* one box: the 16 lt rows from row0, SLOT bytes of each */
            if (tid == 0) tm_rows_copy(st, bars + 8u * (uint32_t)sl, &tmap, off, row0, (uint32_t)(16 * lt * SLOT));
        } else if constexpr (ring_grid<T, NT, PH>()) wc.copy_all(st - 16u * (uint32_t)tid, off, wlim);
        else
            wc.copy_all(st, off, [&](int k) {
                if (T == QG_Q8_K && SC < SEG && (int)wc.seg[k] >= 16 * SC) return false; /* Q8_K's bsums: above */
                return PART ? tid + NTH * k < wlim : k < copies_t::KW - 1 || wc.last;
            });
        const size_t xo = sb * QK; /* its first activation */
#pragma unroll
        for (int k = 0; k < KX; k++)
            if (((tid + NTH * k) >> 5) < batch) cp_async16_s(st - 16u * (uint32_t)tid + xdst + (uint32_t)(k * (NTH / 32) * XS * 2), xsrc[k] + xo);
    };
#pragma unroll
    for (int i = 0; i < RING_ST - 1; i++) {
        if (i < total) issue();
        cp_async_commit();
    }
    const size_t ra = row0 + 16 * (size_t)wid + (size_t)g, rb = ra + 8;
    const uint8_t *wa = w + (ra < rows ? ra : rows - 1) * nb * BB, *wb = w + (rb < rows ? rb : rows - 1) * nb * BB;
    float tot[NT][4];
    int cslot = 0, i = 0;
    uint32_t tpar = 0; /* TM: the parity of slot cslot's mbarrier phase that super-block i completes */
    /* super-block sb of the sequence (the i-th): its product added to the running sum acc of its phase,
     * Q6_K words read as rd says */
    auto step = [&](size_t sb, auto &acc, auto rd) { /* acc: float[NT][4] (an array type spelt out here crashes cicc 13.0) */
        cp_async_wait<RING_ST - 2>(); /* this thread's copies of super-block i of the sequence have landed */
        if constexpr (TM) mbar_wait(bars + 8u * (uint32_t)cslot, tpar); /* and the box of its rows */
        ring_sync();                  /* everyone's have, and every warp is done with the slot refilled next */
        if (i + RING_ST - 1 < total) issue();
        cp_async_commit();
        i++;
        const unsigned char *st = gsm + cslot * STB;
        cslot = cslot == RING_ST - 1 ? 0 : cslot + 1;
        if (TM && cslot == 0) tpar ^= 1u;
        if (PART && !live) return;
        uint32_t va[1][W], vb[1][W];
        /* the block's place in its slot: its offset mod 16 (0 for the aligned types) */
        const int oa = ALIGNED ? 0 : (int)((wa - w + sb * BB) & 15), ob = ALIGNED ? 0 : (int)((wb - w + sb * BB) & 15);
        load_words_shared<T, decltype(rd)::value>(st + (16 * wid + g) * SLOT + oa, t, va[0]);
        load_words_shared<T, decltype(rd)::value>(st + (16 * wid + g + 8) * SLOT + ob, t, vb[0]);
        float part[1][NT][4];
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int j = 0; j < 4; j++) part[0][n][j] = 0.0f;
        uint32_t xsp[1];
        superblock_staged<T, NT, 1, 1, ring_sf<T>()>(va, vb, reinterpret_cast<const __half *>(st + WB), g, t, part, xsp);
        const bool spa = special_scales<T>(va[0]), spb = special_scales<T>(vb[0]);
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int col = 8 * n + 2 * t + (j & 1);
                if (((j < 2 ? spa : spb) || ((xsp[0] >> (4 * n + j)) & 1u)) && col < batch)
                    part[0][n][j] = special_part_staged<T>((j < 2 ? wa : wb) + sb * BB, x + sb * QK + (size_t)col * cols);
                acc[n][j] = __fadd_rn(acc[n][j], part[0][n][j]);
            }
    };
    if constexpr (INORDER) {
        /* every super-block in order, four running sums (sb's in acc4[sb mod 4]): each phase's sum takes
         * its products in the phase walk's order, so the same bits, and a block's edge sectors, which
         * its neighbours share, are read while they are still in L2 */
        float acc4[4][NT][4];
        auto walk_inorder = [&](auto re, auto ro) { walk_in_order(nb, step, acc4, re, ro); };
        if constexpr (T == QG_Q6_K) {
            /* the Q6_K reads of the phase walk below: on rows4 rows the even super-blocks' blocks are
             * 4-byte aligned and the odd ones' 2 bytes off */
            const bool rows4 = QG_Q6_ROWS4(nb, w);
            if (rows4) walk_inorder(std::integral_constant<int, Q6_READ_A4>{}, std::integral_constant<int, Q6_READ_A2>{});
            else walk_inorder(std::integral_constant<int, Q6_READ_A2>{}, std::integral_constant<int, Q6_READ_A2>{});
        } else {
            walk_inorder(std::integral_constant<int, Q6_READ_A2>{}, std::integral_constant<int, Q6_READ_A2>{});
        }
        /* ((p0 + p1) + p2) + p3, as the phase walk adds them */
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int j = 0; j < 4; j++)
#ifdef QG_CUDA_MUTANT_KQ_RING_PHASE_ORDER
                tot[n][j] = __fadd_rn(__fadd_rn(__fadd_rn(acc4[0][n][j], acc4[2][n][j]), acc4[1][n][j]), acc4[3][n][j]); /* the mutant, as above */
#else
                tot[n][j] = __fadd_rn(__fadd_rn(__fadd_rn(acc4[0][n][j], acc4[1][n][j]), acc4[2][n][j]), acc4[3][n][j]);
#endif
    } else {
        for (int pi = 0; pi < PH; pi++) {
            const int p = phase(pi);
            /* the phase's running sum, as one staged warp's */
            float acc[NT][4];
#pragma unroll
            for (int n = 0; n < NT; n++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[n][j] = 0.0f;
            const int np = count(p);
            auto walk = [&](auto rd) { /* the phase's super-blocks */
                for (int k = 0; k < np; k++) step((size_t)p + 4 * (size_t)k, acc, rd);
            };
            if constexpr (T == QG_Q6_K) {
                /* Q6_K blocks (210 bytes): with nb even and 4-aligned weights every row starts 4-byte aligned
                 * and block sb lies 210 sb = 2 sb (mod 4) bytes into it, so the blocks of an even phase (sb = p +
                 * 4k) are all 4-byte aligned and those of an odd one all 2 bytes off: one 4-byte read a word, or
                 * two 2-byte reads, with no test a block. H200, same call, the 7-warp CTAs of 28672x8192 at
                 * batch 1..8: 6-7% less time than two 2-byte reads for every block. */
                const bool rows4 = QG_Q6_ROWS4(nb, w);
                if (rows4 && (p & 1) == 0) walk(std::integral_constant<int, Q6_READ_A4>{});
                else if (ring_q6_read<T, NT, PH>() == Q6_READ_BRANCH && !rows4) walk(std::integral_constant<int, Q6_READ_BRANCH>{});
                else walk(std::integral_constant<int, Q6_READ_A2>{});
            } else {
                walk(std::integral_constant<int, Q6_READ_A2>{});
            }
            /* the phase sums meet in the staged kernel's order, ((p0 + p1) + p2) + p3 */
#pragma unroll
            for (int n = 0; n < NT; n++)
#pragma unroll
                for (int j = 0; j < 4; j++) tot[n][j] = pi == 0 ? acc[n][j] : __fadd_rn(tot[n][j], acc[n][j]);
        }
    }
    if constexpr (PH == 1) {
        /* the phase sums meet in group 0: groups 1..3 leave theirs in their own (now idle) rings */
        asm volatile("cp.async.wait_all;\n" ::: "memory");
        __syncthreads();
        if (grp > 0)
#pragma unroll
            for (int n = 0; n < NT; n++)
#pragma unroll
                for (int j = 0; j < 4; j++) reinterpret_cast<float *>(gsm)[(4 * n + j) * NTH + tid] = tot[n][j];
        __syncthreads();
        if (grp != 0) return;
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int o = (4 * n + j) * NTH + tid;
                const float *r1 = reinterpret_cast<const float *>(dyn_smem + RING_ST * STB) + o;
                const float *r2 = reinterpret_cast<const float *>(dyn_smem + 2 * RING_ST * STB) + o;
                const float *r3 = reinterpret_cast<const float *>(dyn_smem + 3 * RING_ST * STB) + o;
#ifdef QG_CUDA_MUTANT_KQ_RING_PHASE_ORDER
                tot[n][j] = __fadd_rn(__fadd_rn(__fadd_rn(tot[n][j], *r2), *r1), *r3); /* the mutant, as above */
#else
                tot[n][j] = __fadd_rn(__fadd_rn(__fadd_rn(tot[n][j], *r1), *r2), *r3);
#endif
            }
    }
#ifndef QG_CUDA_MUTANT_KQ_RING_DEAD_STORE /* a GPU-machine mutant: the idle warps store their (zero) rows */
    if (PART && !live) return;
#endif
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int col = 8 * n + 2 * t + (j & 1);
            const size_t row = j < 2 ? ra : rb;
            if (col < batch && row < rows) {
                if (y32) y32[(size_t)col * rows + row] = tot[n][j];
                if (y16) y16[(size_t)col * rows + row] = f32_to_f16_bits(tot[n][j]);
            }
        }
#endif
}

/* ---- Batch 17..64 (9..64 on some shapes) on sm_90a: warpgroup MMA (k_kq_gemm_wg) ----
 * The operations of superblock_staged per output, in the same order, with the code chain S (Q6_K: each
 * group's block, from nothing) on wgmma.m64nNk16 (A, the codes or scaled codes, decoded into registers exactly as the mma.sync fragments
 * of each warp's 16 rows; B, the activations, read by the tensor cores from shared memory). A wgmma k16
 * block rounds as an mma.sync block (gpu.tc_probe.cuda requires its bits on every crafted block; the
 * chain starts from nothing, scale-d 0, the mma.sync chain's C = +0), so every output keeps its bits, and
 * gpu.kq_gemm.cuda compares every column of batches 17..64 with the same column computed alone.
 *
 * A prepass (k_kq_wg_image) writes, per column group of N columns and super-block, one piece of
 * wg_xbytes bytes: the activations in the tensor cores' no-swizzle K-major layout, in the k order of the
 * mma.sync fragments (k16 block c at 256 c; in it core matrix 0 holds k 0, 1, 4, 5, 8, 9, 12, 13 and core
 * matrix 1 k 2, 3, 6, 7, 10, 11, 14, 15 of each column, 8 columns a core matrix, column tiles 4 KB apart),
 * columns past the batch zero, then for Q4_K/Q5_K the bf16 parts of the sub-block sums X_j, computed by
 * the very xsum_step chain and split of superblock_staged, in the B fragment order q45_min_mma takes
 * (tile n, part p, lane l: word 96 n + 32 p + l). The image lives in the library's own stream-ordered
 * pool (kq_ws_alloc), freed in stream order after the kernel.
 *
 * A CTA is WG warpgroups of 64 rows each and one column group; it walks the super-blocks as the PH = 4
 * ring does (phase p: p, p + 4, ... in order, or every super-block in order into its phase's sum where
 * wg_inorder says; each phase's sum from +0, then ((p0 + p1) + p2) + p3), its
 * rows' blocks and the super-block's image piece copied by cp.async ST - 1 super-blocks ahead (the rows
 * by one tensor-map copy where they allow it, the TM instances, as the ring kernel's). The columns'
 * inf/NaN flags are read off the code sums, as superblock_staged reads them. */
/* the image carries the sub-block sums' bf16 parts: Q4_K and Q5_K (their min terms) */
template <int T> __host__ __device__ constexpr bool wg_xparts() { return T == QG_Q4_K || T == QG_Q5_K; }
template <int T, int N> __host__ __device__ constexpr int wg_xbytes() { return N * QK * 2 + (wg_xparts<T>() ? N / 8 * 3 * 128 : 0); }
template <int T, int N, int WG, bool TM = false> __host__ __device__ constexpr int wg_stage_bytes()
{
    return 64 * WG * ring_pitch<T, TM>() + wg_xbytes<T, N>();
}
/* CTAs an SM: N = 16 two (WG = 2) or four (Q6_K three), N = 32 two or three, N = 64 one or two; the
 * registers a thread may take follow */
template <int T, int N, int WG> __host__ __device__ constexpr int wg_ctas()
{
    return N == 16 ? (WG == 2 ? 2 : T == QG_Q6_K ? 3 : 4) : N == 32 ? (WG == 2 ? 2 : 3) : (WG == 2 ? 1 : 2);
}
/* stages: as many as the CTA's share of 227 KB holds, 2 to 4 */
template <int T, int N, int WG> __host__ __device__ constexpr int wg_stages()
{
    return (232448 / wg_ctas<T, N, WG>() - 1024) / wg_stage_bytes<T, N, WG>() > 4 ? 4 : (232448 / wg_ctas<T, N, WG>() - 1024) / wg_stage_bytes<T, N, WG>();
}

/* One warp a column tile n of column group blockIdx.y and super-block blockIdx.x: its image words (lane
 * (g, t): column 8 n + g, k 4t .. 4t + 3 of each 16-wide half of each sub-block, the B fragment words of
 * superblock_staged) and, for Q4_K/Q5_K, the parts of its sub-block sums. */
template <int T, int N>
__global__ void __launch_bounds__(4 * N) k_kq_wg_image(const __half *__restrict__ x, size_t cols, int batch, size_t nb, uint8_t *__restrict__ xi)
{
    const int n = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const size_t sb = blockIdx.x;
    const int col = (int)blockIdx.y * N + 8 * n + g;
    uint8_t *const piece = xi + ((size_t)blockIdx.y * nb + sb) * wg_xbytes<T, N>();
    uint32_t *const img = reinterpret_cast<uint32_t *>(piece + 4096 * n) + 4 * g + t; /* + 64 c (k16 block) + 32 (core matrix 1) */
    float X[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    uint32_t xm = 0u;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        uint2 b0, b1;
        load_b(x + sb * QK, cols, batch, col, 32 * j + 4 * t, 0, b0, b1, xm);
#ifdef QG_CUDA_MUTANT_KQ_WG_IMAGE_ORDER
        /* a GPU-machine mutant: the two core matrices of each k16 block swapped (wrong products) */
        img[128 * j + 32] = b0.x, img[128 * j] = b0.y, img[128 * j + 96] = b1.x, img[128 * j + 64] = b1.y;
#else
        img[128 * j] = b0.x, img[128 * j + 32] = b0.y, img[128 * j + 64] = b1.x, img[128 * j + 96] = b1.y;
#endif
        if constexpr (wg_xparts<T>()) xsum_step(X, b0, b1, j, g);
    }
    if constexpr (wg_xparts<T>()) {
        uint32_t P[3];
        bf16_split3(__fadd_rn(X[0], X[2]), __fadd_rn(X[1], X[3]), P);
        uint32_t *const pp = reinterpret_cast<uint32_t *>(piece + N * QK * 2) + 96 * n + lane;
        pp[0] = P[0], pp[32] = P[1], pp[64] = P[2];
    }
}

__device__ int g_kq_wgmma_built = QG_CUDA_WGMMA;

/* PS = 4: a CTA walks all four phases and stores y. PS = 1: a CTA walks one phase only and stores its sum
 * in part[phase][column][row]; k_kq_wg_join then adds them in the same order. The phase is blockIdx.x mod 4
 * (blockIdx.x / 4 the column group) where wg_phase_x says, else blockIdx.z: in x, a row block's four phase
 * CTAs launch together and read their rows' neighbouring blocks at about the same time (neighbours share
 * the 32-byte sectors at their edges; a phase apart, such a sector has left L2 before the other phase
 * reads it). H200, one call, one binary against the previous one, two runs each: Q4_K and Q5_K at batch
 * 9..16 on 28672x8192 8-9% less time (Q4_K batch 16 70.9 -> 64.7 us), 2-4% on 14336x4096 and 4096x14336;
 * Q8_K at batch 48..64 on 28672x8192 4-5% less, 1-2% at batch 9..32 on 14336x4096, 4096x14336 and
 * 8192x28672; 1.5-2.3% more for Q8_K at batch 48..64 on 4096x14336; Q6_K 3% less at batch 9..16 on
 * 28672x8192 but 4% more there on 4096x14336 and 3-12% more at batch 24..64 on every shape: it keeps z. */
template <int T, int PS> __host__ __device__ constexpr bool wg_phase_x() { return PS == 1 && T != QG_Q6_K; }
/* PS = 4: whether a CTA walks its super-blocks in order with a running sum a phase (ring_inorder's choice,
 * for the same reason): in one group of 16 columns. H200, one call, against the phase walk: Q8_K at batch
 * 9..16 on 28672x8192 6.5-7% less time (84.3 -> 78.7 us at 16), 2% on 25344x5120; in groups of 32 its four
 * sums take the whole 128 registers and took 11-13% more time (Q4_K, batch 24..32, 25344 and 28672 rows).
 * Q6_K's CTAs (one warpgroup, three an SM) have no registers to spare. */
template <int T, int N, int PS> __host__ __device__ constexpr bool wg_inorder() { return PS == 4 && N == 16 && T != QG_Q6_K; }
/* The shared memory of an instance: its stages (as many as wg_stages gives the cp.async slots) and, TM, an
 * mbarrier a stage. */
template <int T, int N, int WG, bool TM = false> __host__ __device__ constexpr int wg_smem()
{
    return wg_stages<T, N, WG>() * (wg_stage_bytes<T, N, WG, TM>() + (TM ? 8 : 0));
}

/* TM: the CTA's rows by a tensor map, as the ring kernel's TM instances take them (one box of its RR rows a
 * super-block, issued by thread 0, completing on the stage's mbarrier). */
template <int T, int N, int WG, int PS, bool U6 = false, bool TM = false>
__global__ void __launch_bounds__(128 * WG, wg_ctas<T, N, WG>()) k_kq_gemm_wg(const uint8_t *__restrict__ w, size_t rows, size_t nb,
                                                                         const __half *__restrict__ x, size_t cols, int batch,
                                                                         const uint8_t *__restrict__ xi, float *y32, uint16_t *y16,
                                                                         float *part, const __grid_constant__ CUtensorMap tmap)
{
#if QG_CUDA_WGMMA
    constexpr int BB = ring_bb<T>(), SLOT = ring_pitch<T, TM>(), W = wwords<T>::n, MT = N / 8;
    constexpr int NTH = 128 * WG, RR = 64 * WG, WB = RR * SLOT, XB = wg_xbytes<T, N>(), STB = WB + XB;
    static_assert(STB == wg_stage_bytes<T, N, WG, TM>(), "the host's stage");
    constexpr bool ALIGNED = BB % 16 == 0;
    constexpr int KX = (XB / 16 + NTH - 1) / NTH, ST = wg_stages<T, N, WG>();
    static_assert(ST >= 2 && STB % 16 == 0, "two stages of whole 16-byte pieces");
    extern __shared__ __align__(16) unsigned char dyn_smem[];
    const int tid = (int)threadIdx.x, wid = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    constexpr bool PX = wg_phase_x<T, PS>();
    const int grp = PX ? (int)(blockIdx.x >> 2) : (int)blockIdx.x;
    const size_t row0 = (size_t)blockIdx.y * RR;
    const int col0 = grp * N;
    const uint8_t *const xig = xi + (size_t)grp * nb * XB; /* the column group's pieces, super-block after super-block */
    auto count = [&](int p) { return (size_t)p < nb ? (int)((nb - (size_t)p + 3) / 4) : 0; };
    using copies_t = std::conditional_t<TM, ring_no_copies,
                                        std::conditional_t<wg_grid<T>(), row_copies_grid<T, NTH, RR, ring_slot<T>() / 16, U6>,
                                                           row_copies_flat<T, NTH, RR, false>>>;
    const copies_t wc(w, rows, nb, row0, tid);          /* the thread's copies of the CTA's rows */
    const int wlim = (int)min((size_t)RR, rows - row0); /* grid: those inside the weights */
    if constexpr (zero_dead<T>() && wg_grid<T>() && !TM) zero_dead_rows<SLOT, ST, STB, NTH>(dyn_smem, wlim, RR, tid);
    const uint32_t ring = (uint32_t)__cvta_generic_to_shared(dyn_smem);
    const uint32_t bars = ring + (uint32_t)(ST * STB); /* TM: the stages' mbarriers */
    if constexpr (TM) {
        tm_bars_init(bars, ST, tid);
        __syncthreads();
    }
    const int pb = PS == 4 ? 0 : PX ? (int)(blockIdx.x & 3u) : (int)blockIdx.z, pe = pb + PS; /* the CTA's phases */
    constexpr bool INORDER = wg_inorder<T, N, PS>();
    int islot = 0, ipi = pb, ik = 0, total = 0, icnt = count(pb);
    for (int pi = pb; pi < pe; pi++) total += count(pi);
    auto issue = [&]() { /* the next super-block of the walk into slot islot */
        size_t sb;
        if constexpr (INORDER) sb = (size_t)ik++;
        else {
            while (ik == icnt) ik = 0, icnt = count(++ipi);
            sb = (size_t)ipi + 4 * (size_t)ik++;
        }
        const size_t off = sb * BB;
        const int sl = islot;
        const uint32_t st = ring + (uint32_t)(sl * STB) + 16u * (uint32_t)tid;
        islot = islot == ST - 1 ? 0 : islot + 1;
        if constexpr (TM) {
            if (tid == 0) tm_rows_copy(st, bars + 8u * (uint32_t)sl, &tmap, off, row0, (uint32_t)(RR * SLOT));
        } else if constexpr (wg_grid<T>()) wc.copy_all(st - 16u * (uint32_t)tid, off, wlim);
        else wc.copy_all(st, off, [&](int k) { return k < copies_t::KW - 1 || wc.last; });
        const uint8_t *xs = xig + sb * XB + 16 * tid;
#pragma unroll
        for (int k = 0; k < KX; k++)
            if (k < KX - 1 || tid + NTH * k < XB / 16) cp_async16_s(st + (uint32_t)WB + 16u * NTH * k, xs + 16 * NTH * k);
    };
#pragma unroll 1
    for (int i = 0; i < ST - 1; i++) {
        if (i < total) issue();
        cp_async_commit();
    }
    const int wr = 16 * wid + g; /* the thread's rows wr and wr + 8 of the CTA's: warp wid of warpgroup wid / 4 */
    const size_t ra = row0 + (size_t)wr, rb = ra + 8;
    const uint8_t *wa = w + (ra < rows ? ra : rows - 1) * nb * BB, *wb = w + (rb < rows ? rb : rows - 1) * nb * BB;
    /* descriptor of k16 block 0 of slot 0: start >> 4, LBO (core matrix 1) 128 >> 4, SBO (next 8 columns)
     * 4096 >> 4, no swizzle; slot s and block c add (s STB + 256 c) >> 4 (shared addresses below 2^18) */
    const uint64_t desc0 = (uint64_t)(((ring + (uint32_t)WB) & 0x3FFFFu) >> 4) | ((uint64_t)(128 >> 4) << 16) | ((uint64_t)(4096 >> 4) << 32);
    float S[MT][4], S6[MT][4], tot[MT][4]; /* S6: Q6_K only */
#pragma unroll
    for (int n = 0; n < MT; n++)
#pragma unroll
        for (int j = 0; j < 4; j++) S[n][j] = S6[n][j] = tot[n][j] = 0.0f;
    int cslot = 0, i = 0;
    uint32_t tpar = 0; /* TM: the parity of slot cslot's mbarrier phase that super-block i completes */
    /* super-block sb, the walk's i-th: its product added to its phase's running sum, Q6_K words read as
     * rd says (as the ring kernel) */
    auto step = [&](size_t sb, auto &sum, auto rd) { /* sum: float[MT][4] */
        cp_async_wait<ST - 2>(); /* this thread's copies of the walk's super-block i have landed */
        if constexpr (TM) mbar_wait(bars + 8u * (uint32_t)cslot, tpar); /* and the box of the CTA's rows */
        fence_proxy_async();     /* ... are visible to the tensor cores' reads */
        __syncthreads();         /* everyone's have; the slot refilled next is no longer read */
        if (i + ST - 1 < total) issue();
        cp_async_commit();
        i++;
        const unsigned char *st = dyn_smem + cslot * STB;
        const uint64_t dsc = desc0 + (uint64_t)((cslot * STB) >> 4);
        cslot = cslot == ST - 1 ? 0 : cslot + 1;
        if (TM && cslot == 0) tpar ^= 1u;
        const int oa = ALIGNED ? 0 : (int)((wa - w + sb * BB) & 15), ob = ALIGNED ? 0 : (int)((wb - w + sb * BB) & 15);
        uint32_t va[W], vb[W];
        load_words_shared<T, decltype(rd)::value>(st + wr * SLOT + oa, t, va);
        load_words_shared<T, decltype(rd)::value>(st + (wr + 8) * SLOT + ob, t, vb);
        q45_sm sma, smb;
        if constexpr (wg_xparts<T>()) sma = q45_unpack(va[1], va[2], va[3]), smb = q45_unpack(vb[1], vb[2], vb[3]);
        (void)sma, (void)smb; /* Q4_K/Q5_K only */
        /* Q6_K: each group of 16 weights (one int8 scale) is one k16 block whose product starts from
         * nothing, as superblock_staged's mma16816 from zero: step j's groups 2j (into S) and 2j + 1
         * (into S6) are folded into P6 in its order, fma(a_2j, S, P6) then fma(a_2j+1, S6, P6),
         * while step j + 1's fragments decode into the other A buffer */
        float P6[MT][4];
        if constexpr (T == QG_Q6_K) {
            uint32_t A[2][2][4];
            float sc[2][4];
            q6_step(va, vb, 0, A[0], sc[0]);
#pragma unroll
            for (int n = 0; n < MT; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) P6[n][e] = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++) {
#pragma unroll
                for (int n = 0; n < MT; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) qg_wg_pin(S[n][e]), qg_wg_pin(S6[n][e]);
                qg_wg_fence();
#ifdef QG_CUDA_MUTANT_KQ_WG_STALE
                const int sd = 1; /* a GPU-machine mutant: each group's product continues from the previous one's */
#else
                const int sd = 0;
#endif
                qg_wgmma_f16<N>(reinterpret_cast<float(&)[N / 2]>(S), A[j & 1][0], dsc + (uint64_t)((512 * j) >> 4), sd);
                qg_wgmma_f16<N>(reinterpret_cast<float(&)[N / 2]>(S6), A[j & 1][1], dsc + (uint64_t)((512 * j + 256) >> 4), sd);
                qg_wg_commit();
                if (j < 7) q6_step(va, vb, j + 1, A[(j + 1) & 1], sc[(j + 1) & 1]);
                qg_wg_wait0();
#pragma unroll
                for (int n = 0; n < MT; n++) {
#pragma unroll
                    for (int e = 0; e < 4; e++) qg_wg_pin(S[n][e]), qg_wg_pin(S6[n][e]);
                    q6_update(P6[n], S[n], S6[n], sc[j & 1][0], sc[j & 1][2], sc[j & 1][1], sc[j & 1][3]);
                }
            }
        } else {
            /* S: the chain of 16 k16 blocks, one commit group a sub-block; waiting for all but the latest
             * frees the previous sub-block's A registers */
#pragma unroll
            for (int j = 0; j < 8; j++) {
                uint32_t A[2][4];
                if constexpr (wg_xparts<T>()) {
                    const int c = j >> 1;
                    uint32_t sa2, sb2;
                    q45_scales<T>(sma, smb, j, sa2, sb2);
                    q45_frags<T>(va[4 + 2 * c], va[5 + 2 * c], vb[4 + 2 * c], vb[5 + 2 * c], va[W - 2], va[W - 1], vb[W - 2], vb[W - 1], j, sa2,
                                 sb2, A);
                } else if constexpr (T == QG_Q8_K) {
#pragma unroll
                    for (int hh = 0; hh < 2; hh++)
                        make_a(va[1 + 2 * j + hh] ^ 0x80808080u, vb[1 + 2 * j + hh] ^ 0x80808080u, 0x64806480u, A[hh]); /* (q + 128) - 128 */
                }
#pragma unroll
                for (int n = 0; n < MT; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) qg_wg_pin(S[n][e]);
                qg_wg_fence();
#ifdef QG_CUDA_MUTANT_KQ_WG_STALE
                const int sd = 1; /* a GPU-machine mutant: the chain continues from the previous super-block's S */
#else
                const int sd = j == 0 ? 0 : 1;
#endif
                qg_wgmma_f16<N>(reinterpret_cast<float(&)[N / 2]>(S), A[0], dsc + (uint64_t)((512 * j) >> 4), sd);
                qg_wgmma_f16<N>(reinterpret_cast<float(&)[N / 2]>(S), A[1], dsc + (uint64_t)((512 * j + 256) >> 4), 1);
                qg_wg_commit();
                if (j < 7) qg_wg_wait1();
            }
            qg_wg_wait0();
#pragma unroll
            for (int n = 0; n < MT; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) qg_wg_pin(S[n][e]);
        }
        const bool spa = special_scales<T>(va), spb = special_scales<T>(vb);
        /* the special-value path, per output below, only where a lane of the warp needs it */
        bool sp = spa || spb;
#pragma unroll
        for (int n = 0; n < MT; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) sp = sp || !isfinite(T == QG_Q6_K ? P6[n][e] : S[n][e]);
        const bool warp_sp = __any_sync(0xFFFFFFFFu, sp);
        uint32_t ma = 0u, mb = 0u;
        if constexpr (wg_xparts<T>()) ma = q45_min_pair(sma, t), mb = q45_min_pair(smb, t);
        const uint32_t *const pw = reinterpret_cast<const uint32_t *>(st + WB + N * QK * 2) + lane;
        (void)ma, (void)mb, (void)pw; /* Q4_K/Q5_K only */
#pragma unroll
        for (int n = 0; n < MT; n++) {
            float part[4];
            if constexpr (T == QG_Q6_K) {
#pragma unroll
                for (int e = 0; e < 4; e++) part[e] = P6[n][e];
            } else if constexpr (wg_xparts<T>()) {
                const uint32_t P[3] = {pw[96 * n], pw[96 * n + 32], pw[96 * n + 64]};
                float S2[4];
                q45_min_mma(S2, ma, mb, P);
                q45_finish(part, S[n], S2, h2f((uint16_t)va[0]), h2f((uint16_t)(va[0] >> 16)), h2f((uint16_t)vb[0]),
                           h2f((uint16_t)(vb[0] >> 16)));
            } else {
                const float da = __uint_as_float(va[0]), db = __uint_as_float(vb[0]);
#pragma unroll
                for (int e = 0; e < 4; e++) part[e] = __fmul_rn(e < 2 ? da : db, S[n][e]);
            }
            if (warp_sp) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int col = col0 + 8 * n + 2 * t + (e & 1);
                    if (((e < 2 ? spa : spb) || !isfinite(T == QG_Q6_K ? P6[n][e] : S[n][e])) && col < batch)
                        part[e] = special_part_staged<T>((e < 2 ? wa : wb) + sb * BB, x + sb * QK + (size_t)col * cols);
                }
            }
#pragma unroll
            for (int e = 0; e < 4; e++) sum[n][e] = __fadd_rn(sum[n][e], part[e]);
        }
    };
    if constexpr (INORDER) {
        /* every super-block in order, a running sum a phase (as the ring kernel's ring_inorder): the same
         * sums in the same order */
        float acc4[4][MT][4];
        walk_in_order(nb, step, acc4, std::integral_constant<int, Q6_READ_A2>{}, std::integral_constant<int, Q6_READ_A2>{});
#pragma unroll
        for (int n = 0; n < MT; n++)
#pragma unroll
            for (int j = 0; j < 4; j++) tot[n][j] = __fadd_rn(__fadd_rn(__fadd_rn(acc4[0][n][j], acc4[1][n][j]), acc4[2][n][j]), acc4[3][n][j]);
    } else {
        for (int p = pb; p < pe; p++) {
            float acc[MT][4]; /* the phase's running sum */
#pragma unroll
            for (int n = 0; n < MT; n++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[n][j] = 0.0f;
            const int np = count(p);
            auto walk = [&](auto rd) { /* the phase's super-blocks */
                for (int k = 0; k < np; k++) step((size_t)p + 4 * (size_t)k, acc, rd);
            };
            if constexpr (T == QG_Q6_K) {
                const bool rows4 = QG_Q6_ROWS4(nb, w);
                if (rows4 && (p & 1) == 0) walk(std::integral_constant<int, Q6_READ_A4>{});
                else if (!rows4) walk(std::integral_constant<int, wg_q6_read<T>()>{});
                else walk(std::integral_constant<int, Q6_READ_A2>{});
            } else {
                walk(std::integral_constant<int, Q6_READ_A2>{});
            }
            /* the phase sums meet in the staged kernel's order, ((p0 + p1) + p2) + p3 */
#pragma unroll
            for (int n = 0; n < MT; n++)
#pragma unroll
                for (int j = 0; j < 4; j++) tot[n][j] = p == pb ? acc[n][j] : __fadd_rn(tot[n][j], acc[n][j]);
        }
    }
#pragma unroll
    for (int n = 0; n < MT; n++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int col = col0 + 8 * n + 2 * t + (j & 1);
            const size_t row = j < 2 ? ra : rb;
            if (col < batch && row < rows) {
                if (PS == 1) part[((size_t)pb * (size_t)batch + (size_t)col) * rows + row] = tot[n][j];
                else {
                    if (y32) y32[(size_t)col * rows + row] = tot[n][j];
                    if (y16) y16[(size_t)col * rows + row] = f32_to_f16_bits(tot[n][j]);
                }
            }
        }
#endif
}

/* The four phase sums of k_kq_gemm_wg<..., PS = 1> in the staged kernel's order, ((p0 + p1) + p2) + p3. */
__global__ void k_kq_wg_join(const float *__restrict__ part, size_t n, float *y32, uint16_t *y16)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
#ifdef QG_CUDA_MUTANT_KQ_WG_JOIN_ORDER
    const float v = __fadd_rn(__fadd_rn(__fadd_rn(part[i], part[2 * n + i]), part[n + i]), part[3 * n + i]); /* a GPU-machine mutant: 0, 2, 1, 3 */
#else
    const float v = __fadd_rn(__fadd_rn(__fadd_rn(part[i], part[n + i]), part[2 * n + i]), part[3 * n + i]);
#endif
    if (y32) y32[i] = v;
    if (y16) y16[i] = f32_to_f16_bits(v);
}

/* Whether the staged kernel's blocks of two row tiles a warp (32 rows) number at least the SMs. */
bool two_tiles_fill(size_t rows, int sms) { return (rows + 31) / 32 >= (size_t)sms; }

/* K below 8192: a warp's phase of the staged kernel holds at most 3 super-blocks, and the block's fixed
 * costs weigh more (staged_tiles, ring_first_batch). */
bool short_k(size_t nb) { return nb < 32; }

/* Whether the staged kernel's two-tile blocks (32 rows) take more than one wave of three an SM and fill
 * less than two thirds of the waves they take: there the last wave leaves most SMs one block or none. */
bool two_tiles_waves_short(size_t rows, int sms)
{
    const size_t blocks = (rows + 31) / 32, slots = 3 * (size_t)sms, waves = sms > 0 ? (blocks + slots - 1) / slots : 0;
    return blocks > slots && 3 * blocks < 2 * waves * slots;
}

/* Row tiles per warp of the staged kernel: 2, except Q6_K at batch 9..16 (one tile: 8-12% faster on an
 * H200; with two it needs more than 255 registers and spills), every type on fewer rows than 32 a block
 * fill the SMs with (4096 rows make 128 blocks of two tiles a warp for 132 SMs, leaving SMs idle; one tile
 * a warp makes 256: H200, same call, 4096x14336 at batch 1 Q4_K 25.2 -> 20.8 us, Q6_K 38.4 -> 29.1 us; from
 * 8192 rows on two tiles stay ahead for Q4_K, 28672x8192 61 against 65 us), and every type with K below
 * 8192 where the two-tile blocks take more than one wave of three an SM (what the batch 1..8 instances of
 * every type fit: 141-167 registers) and fill less than two thirds of their waves (two_tiles_waves_short:
 * a warp's phase then holds at most 3 super-blocks and the block's fixed costs weigh more: H200, one
 * call, 14336x4096 at batch 1 Q4_K 24.2 -> 21.1 us, Q6_K 32.1 -> 28.3 us; within one wave two tiles are
 * ahead: 10240x4096, 11264x4096 and 12288x4096 at batch 1..8 every type 4-22% less time with two, e.g.
 * 12288x4096 Q4_K batch 4 22.4 -> 17.7 us; and so they are where the waves fill: H200, one call, batch
 * 1..8, 17920x5120, 18432x4096, 18944x3584 and 24576x3072, 0.71-0.97 of two or three waves, two tiles
 * against one 3-16% less time for Q4_K and Q5_K, e.g. 24576x3072 Q4_K batch 4 28.6 -> 24.1 us, while
 * 13824x5120, 14336x4096 and 14336x3584, 0.55-0.57 of two waves, keep one, 2-14% faster there). Q5_K at batch 1..8 took one
 * tile everywhere after an H100 measurement of an earlier kernel (168-179 registers, 1.28-1.44x cuBLAS
 * fp16 at batch 1 against 1.65-1.81x with one); its kernel now takes 166, three blocks an SM, and two tiles
 * measured faster on the H200 (8192x28672 batch 1 74.9 -> 65.5 us, 28672x8192 74.5 -> 70.1). QG_CUDA_KQ_MMA_TILES
 * = 0 runs k_kq_gemm at every batch, 1 or 2 pins the tiles (a tuning knob: every value gives the same bits).
 * sms: the device's SM count (ring_config's). */
int staged_tiles(qg_ktype t, size_t batch, size_t rows, size_t nb, int sms)
{
    const char *env = getenv("QG_CUDA_KQ_MMA_TILES");
    if (env != nullptr && (env[0] == '0' || env[0] == '1' || env[0] == '2') && env[1] == '\0') return env[0] - '0';
    /* Q6_K below the ring's batch 4 keeps one tile a warp beyond one wave: H200, one call, 17920x5120,
     * 22016x4096 and 28672x4096 at batch 1..2 1.5-5% faster with one (22016x4096 batch 1 40.4 against 42.4
     * us), 18432x4096, 18944x3584 and 24576x3072 within 1% either way */
    if (!two_tiles_fill(rows, sms) ||
        (short_k(nb) && (t == QG_Q6_K && batch < 4 ? (rows + 31) / 32 > 3 * (size_t)sms : two_tiles_waves_short(rows, sms))))
        return 1;
    /* batch 1..8 (Q8_K: 1): fewer than 1.5 two-tile blocks an SM leave most SMs one block; one tile a
     * warp gives each two or three. H200, same call, 5120x13824, 5120x5120 and 6144x4096: Q4_K, Q5_K and
     * Q6_K 7-23% less time at batch 1..4 and up to 14% at 8 (5120x13824 batch 1 Q4_K 29.0 -> 24.0 us, Q6_K
     * 46.9 -> 36.0), Q8_K 3-11% less at batch 1 but 3-11% more at 4..8; on 8192 rows (1.94 blocks an SM)
     * two tiles stay 2% ahead */
    if (batch <= (t == QG_Q8_K ? 1u : 8u) && 2 * ((rows + 31) / 32) < 3 * (size_t)sms) return 1;
    return t == QG_Q6_K && batch > 8 ? 1 : 2;
}

/* Column groups for batch 17..32 (QG_CUDA_KQ_MMA_COLGROUPS = 0: k_kq_gemm there, as before the groups
 * existed; same bits either way). */
bool staged_colgroups()
{
    const char *env = getenv("QG_CUDA_KQ_MMA_COLGROUPS");
    return !(env != nullptr && env[0] == '0' && env[1] == '\0');
}

/* The shared memory a block may opt in to on the current device (163 KB on sm_80, 227 KB on sm_90). */
int smem_optin()
{
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 48 * 1024;
    }
    return v;
}

template <int T, int NT, int CG> constexpr int staged_smem() { return WARPS * CG * xstages<T, NT>() * NT * 8 * XS * (int)sizeof(__half); }

template <int T, int NT, int R, int CG>
int launch_staged(const uint8_t *w, size_t rows, size_t nb, size_t bb, const __half *x, size_t cols, int batch, float *y32, uint16_t *y16,
                  cudaStream_t s)
{
    static bool attr_set = false;
    constexpr int smem = staged_smem<T, NT, CG>();
    if (!attr_set) {
        const cudaError_t e = cudaFuncSetAttribute(k_kq_gemm_staged<T, NT, R, CG>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess) return qg_cuda_fail("cudaFuncSetAttribute(k_kq_gemm_staged)", e);
        attr_set = true;
    }
    const unsigned grid = (unsigned)((rows + 16 * R - 1) / (16 * R));
    k_kq_gemm_staged<T, NT, R, CG><<<grid, WARPS * 32 * CG, smem, s>>>(w, rows, nb, bb, x, cols, batch, y32, y16);
    return QG_ERR_ok;
}

/* Where the ring kernel runs: an sm_90 device (the rings take 160-210 KB of shared memory an SM; measured
 * on the H200 only), batch ring_config().min_batch[type] .. 16 (QG_CUDA_KQ_RING_MIN sets it for all types)
 * where its grid fills the GPU (ring_fills), unless QG_CUDA_KQ_MMA_TILES pins the staged kernel or QG_CUDA_KQ_MMA_RING=0. QG_CUDA_KQ_RING_PH = 1 or
 * 4 pins the phases a ring. QG_CUDA_KQ_TMA=0 keeps the cp.async copies of the rows where the tensor-map
 * instances (of this kernel and of k_kq_gemm_wg) could run (ring_tm_map). Tuning knobs: every value gives
 * the same bits. */
struct ring_cfg {
    bool sm90, pinned; /* pinned: QG_CUDA_KQ_RING_MIN or _PH set, the ring wherever it can run (tests) */
    bool tma;          /* the tensor-map instances (ring and warpgroup kernels) where the rows allow them */
    int min_batch[4], ph, sms;
};
ring_cfg ring_config()
{
    static const ring_cfg c = [] {
        /* from batch 8 (Q4_K), 4 (Q5_K), 1 (Q6_K, Q8_K): where it measured faster than the staged kernel on
         * the standard shapes (H200; Q4_K at 1..4 and Q5_K at 1..2 were up to 7% slower on 28672x8192; Q6_K
         * at 1..2 6-12% faster on 8192x8192 and 8192x28672, 2% on 28672x8192, but with K below 8192 it
         * keeps batch 4: ring_first_batch) */
        ring_cfg r = {false, false, true, {8, 4, 1, 1}, 0, 0};
        int dev = 0, major = 0;
        if (cudaGetDevice(&dev) == cudaSuccess && cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess)
            r.sm90 = major == 9;
        (void)cudaGetLastError();
        r.sms = qg_cuda_sm_count();
        const char *env = getenv("QG_CUDA_KQ_MMA_RING");
        if (env != nullptr && env[0] == '0' && env[1] == '\0') r.sm90 = false;
        env = getenv("QG_CUDA_KQ_RING_MIN");
        if (env != nullptr && atoi(env) >= 1 && atoi(env) <= 16) {
            r.min_batch[0] = r.min_batch[1] = r.min_batch[2] = r.min_batch[3] = atoi(env);
            r.pinned = true;
        }
        env = getenv("QG_CUDA_KQ_RING_PH");
        if (env != nullptr && (env[0] == '1' || env[0] == '4') && env[1] == '\0') r.ph = env[0] - '0', r.pinned = true;
        env = getenv("QG_CUDA_KQ_TMA");
        if (env != nullptr && env[0] == '0' && env[1] == '\0') r.tma = false;
        return r;
    }();
    return c;
}

int ring_tiles(size_t rows, int sms);

/* The phases a ring kernel CTA walks: PH = 4 where its CTAs of 128 rows alone fill three quarters of the
 * slots of two CTAs an SM, else PH = 1. Q8_K, whose 8-warp PH = 4 CTAs compute ring_tiles' lt row tiles,
 * also takes PH = 4 where those CTAs fill three quarters of the slots and leave the busiest SM fewer row
 * tiles than the PH = 1 CTAs' waves of 4 do: 17920..18944 rows make 224..237 CTAs of 5 tiles, at most 10
 * tiles an SM against three waves of 4. H200, one call, batch 1..8, 17920x5120, 18432x4096, 18944x3584 and
 * 18432x8192: 3-15% less time (18944x3584 batch 4 38.1-38.3 -> 32.7 us). Where the loads tie (22016 and
 * 24576 rows: 12 tiles either way) it measured from 5% less time (24576x3072) to 9% more (24576x8192), so
 * PH = 1 stays there; 13824 and 14336 rows (at most one such CTA an SM) too, 13-19% faster with PH = 1. */
int ring_phases(qg_ktype t, size_t rows, int sms)
{
    if (sms <= 0) return 1;
    const size_t S = (size_t)sms, tiles = (rows + 15) / 16;
    if (4 * ((rows + 127) / 128) >= 6 * S) return 4;
    if (t != QG_Q8_K) return 1;
    const size_t lt = (size_t)ring_tiles(rows, sms), ctas = (tiles + lt - 1) / lt, ctas1 = (rows + 63) / 64;
    return 4 * ctas >= 6 * S && (ctas + S - 1) / S * lt < 4 * ((ctas1 + S - 1) / S) ? 4 : 1;
}

/* The first batch the ring kernel takes for type t: ring_config's, but Q6_K with K below 8192 keeps batch
 * 4, where the staged kernel's one tile a warp (staged_tiles) measured faster at batch 1..2 (H200,
 * 14336x4096 batch 1 28.3 against 30.8 us), unless the ring's CTAs walk all four phases (ring_phases) on
 * 16-aligned rows (q6_unaligned_rows false): H200, one call, batch 1..2, 27648x4096 and 28672x4096 (fused
 * gate and up of an 8B model) 5-9% less time (28672x4096 batch 2 52.2 -> 47.8 us), but K = 5120 (rows 8
 * bytes off 16) 8-15% more on 26624..28672 rows and 28% on 35840; ring_config's wherever the ring is
 * pinned. */
int ring_first_batch(const ring_cfg &c, qg_ktype t, size_t rows, size_t nb, bool unaligned)
{
    return !c.pinned && t == QG_Q6_K && short_k(nb) && (unaligned || ring_phases(t, rows, c.sms) == 1) ? 4 : c.min_batch[t];
}

/* Row tiles a CTA of PH = 4 computes. Two CTAs an SM share its issue slots, so the SM holding the most
 * row tiles sets the time: 28672 rows as 224 CTAs of 8 tiles leave 92 SMs with 16 tiles and 40 with 8.
 * With lt tiles a CTA the busiest SM holds ceil(CTAs / SMs) lt of them whatever the placement (at most two
 * CTAs each); the least such load over lt = 5..8 (ties: more tiles a CTA, fewer copies of x) is taken:
 * 28672 rows 7 (256 CTAs, 14 tiles), 25344 rows 6. Q8_K runs it as 8-warp CTAs of which lt compute
 * (PART); Q4_K, Q5_K and Q6_K take 7-warp CTAs where lt = 7 and keep 8 otherwise: with an idle eighth
 * warp they measured 2-5% slower (H200, 28672x8192), with 7 warps 1-3.5% faster; Q8_K the other way round
 * (4-5% faster idle-warp CTAs, 7-warp CTAs 3% slower and spilling at batch 16). The rows a CTA computes
 * change, never a row's operations: the same bits. QG_CUDA_KQ_RING_LT = 1..8 pins it (tests). */
int ring_tiles(size_t rows, int sms)
{
    static const int pinned = [] {
        const char *env = getenv("QG_CUDA_KQ_RING_LT");
        return env != nullptr && env[0] >= '1' && env[0] <= '8' && env[1] == '\0' ? env[0] - '0' : 0;
    }();
    if (pinned != 0) return pinned;
    const size_t tiles = (rows + 15) / 16;
    int best = 8;
    size_t best_load = SIZE_MAX;
    for (int lt = 8; lt >= 5 && sms > 0; lt--) {
        const size_t ctas = (tiles + lt - 1) / lt, load = (ctas + sms - 1) / sms * lt;
        if (load < best_load) best = lt, best_load = load;
    }
    return best;
}

/* Whether a Q6_K instance with grid copies takes its U6 instance (row_copies_grid): rows not all 16-aligned */
template <int T> bool q6_unaligned_rows(const uint8_t *w, size_t nb)
{
    return T == QG_Q6_K && (((nb * (size_t)ring_bb<T>()) & 15) != 0 || ((uintptr_t)w & 15) != 0);
}

/* One ring kernel instance over all rows, lt row tiles a CTA: its shared memory raised once, then the launch
 * (TM: tm, the rows' tensor map). */
template <int T, int NT, int PH, bool PART, int RW, bool U6, bool TM = false>
int launch_ring_inst(const uint8_t *w, size_t rows, size_t nb, const __half *x, size_t cols, int batch, float *y32, uint16_t *y16,
                     int lt, cudaStream_t s, const CUtensorMap *tm = nullptr)
{
    static bool attr_set = false;
    constexpr int smem = ring_smem<T, NT, PH, RW, TM>();
    if (!attr_set) {
        const cudaError_t e = cudaFuncSetAttribute(k_kq_gemm_ring<T, NT, PH, PART, RW, U6, TM>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess) return qg_cuda_fail("cudaFuncSetAttribute(k_kq_gemm_ring)", e);
        attr_set = true;
    }
    CUtensorMap none;
    if (tm == nullptr) memset(&none, 0, sizeof none);
    const size_t rows_per_cta = 16 * (size_t)lt;
    const unsigned blocks = (unsigned)((rows + rows_per_cta - 1) / rows_per_cta);
    k_kq_gemm_ring<T, NT, PH, PART, RW, U6, TM>
        <<<blocks, PH == 4 ? 32 * RW : 512, smem, s>>>(w, rows, nb, x, cols, batch, y32, y16, lt, tm != nullptr ? *tm : none);
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? QG_ERR_ok : qg_cuda_fail("k_kq_gemm_ring launch", e);
}

/* The rows of type T as a tensor map for the TM instances: rows x (nb BB / 2) 16-bit elements, boxes of
 * box_rows rows x ring_tm_pitch bytes (a box starts on a 16-byte boundary), zero fill outside. Needs the
 * weights 16-byte aligned and a row a multiple of 16 bytes (Q4_K, Q5_K: always; Q6_K nb a multiple of 8;
 * Q8_K of 4) and the driver's encoder; false where any is missing (the cp.async instances run). */
template <int T> bool ring_tm_map(CUtensorMap *map, const uint8_t *w, size_t rows, size_t nb, int box_rows, int l2def)
{
    /* L2 promotion in bytes (a choice of speed, l2def: the caller's default, see its comment);
     * QG_CUDA_KQ_TMA_L2 = 0, 64, 128 or 256 pins it for every caller (tests, tuning). */
    static const int l2pin = [] {
        const char *env = getenv("QG_CUDA_KQ_TMA_L2");
        return env == nullptr ? -1 : atoi(env);
    }();
    const int l2 = l2pin >= 0 ? l2pin : l2def;
    const CUtensorMapL2promotion prom = l2 == 256 ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B
                                        : l2 == 128 ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B
                                        : l2 == 64  ? CU_TENSOR_MAP_L2_PROMOTION_L2_64B
                                                    : CU_TENSOR_MAP_L2_PROMOTION_NONE;
    const qg_tm_encode_fn enc = qg_cuda_tm_encoder();
    const size_t rb = nb * (size_t)ring_bb<T>();
    if (enc == nullptr || ((uintptr_t)w & 15) != 0 || (rb & 15) != 0 || rb / 2 > 0x7FFFFFFFu || rows > 0x7FFFFFFFu) return false;
    const cuuint64_t dim[2] = {(cuuint64_t)(rb / 2), (cuuint64_t)rows}, stride[1] = {(cuuint64_t)rb};
    const cuuint32_t box[2] = {(cuuint32_t)(ring_tm_pitch<T>() / 2), (cuuint32_t)box_rows}, es[2] = {1, 1};
    return enc(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, (void *)w, dim, stride, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_NONE, prom, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* The tensor-map instance where ring_config allows it and the rows make a map (ring_tm_map); else Q6_K's
 * grid-copy instances come in two: rows all 16-aligned, or not (U6) */
template <int T, int NT, int PH, bool PART, int RW>
int launch_ring_kernel(const uint8_t *w, size_t rows, size_t nb, const __half *x, size_t cols, int batch, float *y32, uint16_t *y16,
                       int lt, cudaStream_t s)
{
    CUtensorMap tm;
    if (ring_config().tma && ring_tm_map<T>(&tm, w, rows, nb, 16 * lt, ring_l2_bytes<T, PH>()))
        return launch_ring_inst<T, NT, PH, PART, RW, false, true>(w, rows, nb, x, cols, batch, y32, y16, lt, s, &tm);
    if constexpr (T == QG_Q6_K && ring_grid<T, NT, PH>())
        if (q6_unaligned_rows<T>(w, nb)) return launch_ring_inst<T, NT, PH, PART, RW, true>(w, rows, nb, x, cols, batch, y32, y16, lt, s);
    return launch_ring_inst<T, NT, PH, PART, RW, false>(w, rows, nb, x, cols, batch, y32, y16, lt, s);
}

/* Row tiles a PH = 4 CTA of type t computes: ring_tiles' lt for Q8_K (8-warp CTAs of which lt compute:
 * PART, built for Q8_K only); Q4_K, Q5_K and Q6_K 7 (7-warp CTAs) where lt = 7, else 8. */
int ring_ph4_tiles(qg_ktype t, size_t rows, int sms)
{
    const int lt = ring_tiles(rows, sms);
    return t == QG_Q8_K || lt == 7 ? lt : 8;
}

/* PH = 4 takes ring_ph4_tiles' CTAs; everything else CTAs of ring_rw(PH) warps. */
template <int T, int NT, int PH>
int launch_ring_ph(const uint8_t *w, size_t rows, size_t nb, const __half *x, size_t cols, int batch, float *y32, uint16_t *y16,
                   cudaStream_t s)
{
    if constexpr (PH == 4) {
        const int lt = ring_ph4_tiles((qg_ktype)T, rows, ring_config().sms);
        if constexpr (T == QG_Q8_K) {
            if (lt < 8) return launch_ring_kernel<T, NT, 4, true, 8>(w, rows, nb, x, cols, batch, y32, y16, lt, s);
        } else if (lt == 7) {
            return launch_ring_kernel<T, NT, 4, false, 7>(w, rows, nb, x, cols, batch, y32, y16, 7, s);
        }
    }
    return launch_ring_kernel<T, NT, PH, false, ring_rw(PH)>(w, rows, nb, x, cols, batch, y32, y16, ring_rw(PH), s);
}

/* Whether the ring kernel's PH = 1 CTAs (64 rows, one an SM) number at least three quarters of the SMs */
bool ring_ctas_fill(size_t rows, int sms) { return 4 * ((rows + 63) / 64) >= 3 * (size_t)sms; }

/* Whether the ring kernel's PH = 1 CTAs (64 rows, one an SM) fill at least three quarters of the waves
 * they take (as the one-wave rule of ring_fills asks). Just above 64 rows an SM they make two waves of
 * which the second is nearly empty: H200, one call, the staged kernel against the ring on 9216x8192 and
 * 10240x8192 (144 and 160 CTAs for 132 SMs, 0.55 and 0.61 of two waves): Q5_K at batch 4..8 20-28% less
 * time (9216x8192 batch 4 43.2 -> 31.4 us), Q6_K at batch 1..8 15-22% (50.5 -> 40.3 us at batch 1), Q4_K
 * at batch 8 21-23%; at 12288 rows (192 CTAs, 0.73) the staged kernel with two row tiles a warp (12288x8192
 * Q5_K batch 4 43.9 -> 33.4 us, Q6_K batch 1 51.1 -> 41.2, Q4_K batch 8 39.7 -> 34.0; 12288x4096 11-21%
 * less at batch 4..8); from 14336 rows (0.85) the ring is ahead. At 18432 rows (288 CTAs, 0.73 of three
 * waves) the staged kernel took 6-20% less time with K = 8192 (Q6_K batch 1 74.0 -> 66.4 us, Q5_K batch 4
 * 63.5 -> 51.0), and so it did with K below 8192 once its blocks there kept two row tiles a warp
 * (staged_tiles): 17920x5120, 18432x4096 and 18944x3584 (0.71-0.75 of three waves), batch 4..8, 6-24%
 * less time for Q4_K, Q5_K and Q6_K (17920x5120 Q5_K batch 4 42.8 -> 32.7 us, Q6_K 57.9 -> 45.4; with one
 * tile a warp it had measured mixed). Q8_K's ring measured as fast as the staged kernel or faster on these
 * shapes at batch 4..8 (and within 12% either way at 1..2), and keeps them (ring_phases). */
bool ring_waves_fill(size_t rows, int sms)
{
    const size_t ctas = (rows + 63) / 64, waves = sms > 0 ? (ctas + (size_t)sms - 1) / (size_t)sms : 0;
    return sms > 0 && 4 * ctas >= 3 * waves * (size_t)sms;
}

/* Whether the PH = 4 CTAs of type t keep their busiest SM more than three quarters busy on average
 * (asked for Q4_K, Q5_K and Q6_K). Those compute 7 row tiles where ring_tiles asks for 7 and 8 otherwise
 * (ring_ph4_tiles: only Q8_K has CTAs of 5 or 6), so where ring_tiles wants 5 or 6 the 8-tile CTAs can leave most SMs far
 * below the busiest: 35840 rows make 280 of them, two waves of two an SM of which the second holds 16,
 * so the busiest SM computes 24 tiles against an average of 17 (0.71). With 132 SMs that is 25344 rows
 * (0.75) and 34048..37888; there the staged kernel runs instead. H200, one call, two runs each, the ring
 * against the staged kernel: 35840x5120 Q4_K batch 8 71.5-71.9 -> 54.2-54.3 us, Q5_K batch 4 78.9-79.2 ->
 * 55.2-55.4, Q6_K batch 4 99.9-100.2 -> 77.8; 35840x8192 Q6_K batch 1 144.8-145.4 -> 113.6-114.0, Q5_K
 * batch 4 124.6-124.8 -> 85.4-85.6; 36864x4096, 25344x5120 and 25344x8192 5-22% less time wherever the
 * ring ran at batch 1..8; 30720x4096 (8-tile CTAs in one wave, 0.91) keeps the ring, 8-17% less time
 * than the staged kernel there (Q4_K batch 8 38.1-38.3 against 43.6). */
bool ring_ph4_fills(qg_ktype t, size_t rows, int sms)
{
    const size_t S = (size_t)sms, tiles = (rows + 15) / 16, lt = (size_t)ring_ph4_tiles(t, rows, sms), ctas = (tiles + lt - 1) / lt;
    return sms > 0 && 4 * tiles > 3 * S * ((ctas + S - 1) / S * lt);
}

/* Whether the ring kernel runs on this many rows. PH = 1 CTAs hold 64 rows at one CTA an SM, so 4096 rows
 * make 64 CTAs and leave half of an H200's 132 SMs idle: there the staged kernel (32 rows a block, several
 * blocks an SM) measured up to 45% faster (H200, same run: 2048x8192, 4096x4096 and 4096x14336 at batch
 * 4..16, every type), while 8192 rows (128 CTAs) and more keep the ring ahead. So the ring runs where its
 * PH = 1 CTAs number at least three quarters of the SMs (PH = 4 is only chosen where even its larger
 * CTAs fill more, so the test covers it) and, but for Q8_K, fill three quarters of their waves too (ring_waves_fill)
 * and, where they walk four phases, keep the busiest SM more than three quarters busy (ring_ph4_fills),
 * except Q8_K at batch 9..16, whose staged kernel of two row tiles a warp measured 5-10% slower than the
 * ring on those shapes (the ring still runs there where the staged kernel's two-tile blocks fill the SMs;
 * where they do not, staged_tiles gives it one tile a warp, and that measured 40-43% faster than the ring
 * on 2048x8192 and 3-20% on 4096x4096, H200, same call), or where QG_CUDA_KQ_RING_MIN or _PH pin it.
 * Which kernel runs never changes an output's bits. */
bool ring_fills(qg_ktype t, int batch, size_t rows, const ring_cfg &c)
{
    return c.pinned || (t == QG_Q8_K && batch > 8 && two_tiles_fill(rows, c.sms)) ||
           (ring_ctas_fill(rows, c.sms) &&
            (t == QG_Q8_K || (ring_waves_fill(rows, c.sms) && (ring_phases(t, rows, c.sms) == 1 || ring_ph4_fills(t, rows, c.sms)))));
}

template <int T, int NT>
int launch_ring(const uint8_t *w, size_t rows, size_t nb, const __half *x, size_t cols, int batch, float *y32, uint16_t *y16,
                cudaStream_t s)
{
    const ring_cfg c = ring_config();
    const int ph = c.ph != 0 ? c.ph : ring_phases((qg_ktype)T, rows, c.sms);
    return ph == 4 ? launch_ring_ph<T, NT, 4>(w, rows, nb, x, cols, batch, y32, y16, s)
                   : launch_ring_ph<T, NT, 1>(w, rows, nb, x, cols, batch, y32, y16, s);
}

/* The warpgroup kernel at batch 17..64 (k_kq_gemm_wg): an sm_90 device running this library's sm_90a
 * code (an sm_90a build), every type, unless QG_CUDA_KQ_WG=0 (the staged or k_kq_gemm kernels
 * there, as before it existed). QG_CUDA_KQ_WG_N=64 takes batch 33..64 as one column group of 64 instead
 * of two of 32 (H200, same run: 2-24% slower for Q4_K and Q5_K on 28672x8192, 8192x28672 and 8192x8192;
 * Q8_K 13% slower on 28672x8192, 4-5% faster on the others; Q6_K takes groups of 32 always);
 * QG_CUDA_KQ_WG_ROWS=64 or 128 pins the rows a CTA (one or two
 * warpgroups), QG_CUDA_KQ_WG_PS=1 or 4 the phases a CTA (launch_wg), QG_CUDA_KQ_WG_MIN=1..17 the
 * smallest batch it takes (first_batch; below 17, one column group of 16, zero-padded below 16). Tuning knobs:
 * every value gives the same bits. */
struct wg_knobs {
    bool on;
    int n, rows, ps, min_batch;
};
/* Lets this thread make calls a stream capture in progress (a benchmark's CUDA graph) would otherwise
 * refuse, such as a synchronous copy, for the lifetime of the object; the first launch may be captured. */
struct capture_relaxed {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    capture_relaxed() { (void)cudaThreadExchangeStreamCaptureMode(&mode); }
    ~capture_relaxed() { (void)cudaThreadExchangeStreamCaptureMode(&mode); }
};

/* g_kq_wgmma_built as this process's device code holds it, through a private non-blocking stream (no
 * ordering with any stream the caller may be capturing) */
bool wg_built()
{
    const capture_relaxed relaxed;
    int built = 0;
    cudaStream_t q;
    if (cudaStreamCreateWithFlags(&q, cudaStreamNonBlocking) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    const bool ok = cudaMemcpyFromSymbolAsync(&built, g_kq_wgmma_built, sizeof built, 0, cudaMemcpyDeviceToHost, q) == cudaSuccess &&
                    cudaStreamSynchronize(q) == cudaSuccess;
    (void)cudaStreamDestroy(q);
    (void)cudaGetLastError();
    return ok && built == 1;
}

wg_knobs wg_config()
{
    static const wg_knobs k = [] {
        wg_knobs r = {false, 0, 0, 0, 0};
        r.on = ring_config().sm90 && wg_built();
        const char *env = getenv("QG_CUDA_KQ_WG");
        if (env != nullptr && env[0] == '0' && env[1] == '\0') r.on = false;
        env = getenv("QG_CUDA_KQ_WG_N");
        if (env != nullptr && strcmp(env, "64") == 0) r.n = 64;
        env = getenv("QG_CUDA_KQ_WG_ROWS");
        if (env != nullptr && (strcmp(env, "64") == 0 || strcmp(env, "128") == 0)) r.rows = atoi(env);
        env = getenv("QG_CUDA_KQ_WG_MIN");
        if (env != nullptr && atoi(env) >= 1 && atoi(env) <= 17) r.min_batch = atoi(env);
        env = getenv("QG_CUDA_KQ_WG_PS");
        if (env != nullptr && (strcmp(env, "1") == 0 || strcmp(env, "4") == 0)) r.ps = atoi(env);
        return r;
    }();
    return k;
}

/* The smallest batch the warpgroup kernel takes: 9 (one group of 16 columns) on more rows than 64 an SM
 * (more than the ring kernel's 64-row CTAs of four phase groups, one an SM, finish in one wave) or with K
 * >= 12288 (Q6_K: on at most 4096 rows with K >= 10240, and not where the ring kernel walks four phases
 * a CTA), else 17; 17 wherever QG_CUDA_KQ_RING_MIN/_PH
 * pin the ring kernel. H200, same run, batch 12 and 16 against the previous choice (the ring or staged
 * kernel, or this one with a zero-padded group of 32): 28672x8192 10% less time (Q4_K, Q5_K), 14% (Q6_K),
 * within 1% (Q8_K); 8192x28672 11-12% less (Q4_K, Q5_K), 3% (Q8_K), 6% more (Q6_K, whose 64-row CTAs make
 * 1.3 waves there); 4096x14336 and 2048x14336 2-16% less; 8192x8192 2-17% more; at batch 8 more on most
 * shapes. Between 8448 and 16384 rows (132 SMs) the ring kernel's CTAs take two waves: H200, one call,
 * batch 9..16, this kernel against the ring, 9216x8192 Q4_K 49.3-51.0 -> 36.6-37.2 us, Q6_K 65.2-65.3 ->
 * 45.5-45.8, Q8_K 53.1-54.1 -> 44.4-44.9; 10240x4096, 10240x8192 and 11264x4096 12-30% less time for
 * every type; Q4_K and Q5_K (Q6_K and Q8_K took it there already) 12288x4096 and 12288x8192 12-25%,
 * 14336x8192 8-13%; 14336x4096 1% more (Q4_K,
 * Q5_K: 29.5 -> 29.9 us, 31.4 -> 31.7; Q6_K and Q8_K took it there before, 4-9% less time than the ring).
 * QG_CUDA_KQ_WG_MIN pins it. */
int first_batch(const wg_knobs &k, qg_ktype t, size_t rows, size_t nb)
{
    if (k.min_batch != 0) return k.min_batch;
    if (ring_config().pinned) return 17;
    const bool long_k = nb >= 48;
    const bool many_rows = (rows + 63) / 64 > (size_t)ring_config().sms;
    /* Q6_K on more than 4096 rows where the ring kernel does not run (its CTAs would fill less than three
     * quarters of the SMs), whose batch 9..16 the staged kernel then took: H200, same call, batch 16,
     * 5120x13824 76.6 -> 44.1 us, 6144x4096 28.4 -> 17.4, 5120x5120 32.9 -> 20.7 */
    const bool q6_mid = t == QG_Q6_K && rows > 4096 && !ring_ctas_fill(rows, ring_config().sms);
    /* Q6_K on at most 4096 rows from K = 10240: H200, one call, batch 9..16, 3072x10240 and 4096x10240
     * 15-23% less time than the staged kernel (4096x10240 batch 16 34.0 -> 26.3 us), 4096x11008 0-6%; the
     * other types there measured within 12% either way and keep K >= 12288 */
    /* Q6_K where the ring kernel's four-phase CTAs fill the GPU (ring_phases 4, ring_fills): the ring at
     * 9..16 too. One call on each GPU, two runs, batch 9..16, the ring against this kernel: H100 28672x8192
     * 8-10% less time, 28672x4096 12-14%, 28672x5120 5-6%, 32768x8192 7-9%; H200 28672x4096 7-9%,
     * 32768x8192 8-9%, 28672x8192 within 0.6%, 28672x5120 0.6-2.3% more. Where the ring runs 64-row CTAs
     * (PH = 1) it measured from 19% less time (H100, 16384x8192) to 15% more (H200, 22016x8192 and
     * 20480x5120), so those shapes stay here. */
    if (t == QG_Q6_K && ring_phases(t, rows, ring_config().sms) == 4 && ring_fills(t, 16, rows, ring_config())) return 17;
    return many_rows || q6_mid || (t == QG_Q6_K ? rows <= 4096 && nb >= 40 : long_k) ? 9 : 17;
}

/* Stream-ordered device memory from a pool of the library's own on the current device, whose release
 * threshold (64 MiB) keeps the memory between calls instead of returning it at every synchronization. */
cudaError_t kq_ws_alloc(void **p, size_t bytes, cudaStream_t s)
{
    static std::mutex mu;
    static cudaMemPool_t pools[64];
    static bool made[64];
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return e;
    if (dev < 0 || dev >= 64) return cudaErrorInvalidDevice;
    {
        std::lock_guard<std::mutex> lock(mu);
        if (!made[dev]) {
            const capture_relaxed relaxed;
            cudaMemPoolProps props = {};
            props.allocType = cudaMemAllocationTypePinned;
            props.location.type = cudaMemLocationTypeDevice;
            props.location.id = dev;
            e = cudaMemPoolCreate(&pools[dev], &props);
            if (e != cudaSuccess) return e;
            uint64_t keep = (uint64_t)64 << 20;
            e = cudaMemPoolSetAttribute(pools[dev], cudaMemPoolAttrReleaseThreshold, &keep);
            if (e != cudaSuccess) return e;
            made[dev] = true;
        }
    }
    return cudaMallocFromPoolAsync(p, bytes, pools[dev], s);
}

/* One warpgroup kernel instance: its shared memory raised once, then the launch. */
template <int T, int N, int WG, int PS, bool U6, bool TM = false>
int launch_wg_inst(dim3 grid, const uint8_t *w, size_t rows, size_t nb, const __half *x, size_t cols, int batch, const uint8_t *xi,
                   float *part, float *y32, uint16_t *y16, cudaStream_t s, const CUtensorMap *tm = nullptr)
{
    static bool attr_set = false;
    constexpr int smem = wg_smem<T, N, WG, TM>();
    if (!attr_set) {
        const cudaError_t e = cudaFuncSetAttribute(k_kq_gemm_wg<T, N, WG, PS, U6, TM>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess) return qg_cuda_fail("cudaFuncSetAttribute(k_kq_gemm_wg)", e);
        attr_set = true;
    }
    CUtensorMap none;
    if (tm == nullptr) memset(&none, 0, sizeof none);
    k_kq_gemm_wg<T, N, WG, PS, U6, TM><<<grid, 128 * WG, smem, s>>>(w, rows, nb, x, cols, batch, xi, y32, y16, part, tm != nullptr ? *tm : none);
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? QG_ERR_ok : qg_cuda_fail("k_kq_gemm_wg launch", e);
}

/* The warpgroup kernel's L2 promotion, bytes (a choice of speed; same bits either way): none, as a CTA
 * walking phase p reads blocks p, p + 4, ... (their neighbours belong to other phases), but 128-byte lines
 * for Q8_K's CTAs of one phase (PS = 1) on rows of at least 32 super-blocks. H200, one call, one binary,
 * two runs each, against none: Q8_K 3% less time at batch 48 and 64 on 8192x28672 and 4096x14336, 1.5% on
 * 8192x8192, 0-2.5% at batch 9..32 on 8192x28672; 0.3-1.4% more on 14336x4096 (16 super-blocks a row),
 * which keeps none; Q4_K, Q5_K and Q6_K within 1% (8192x8192, 4096x14336, batch 24..64) keep none. Q8_K's
 * CTAs walking their super-blocks in order (wg_inorder) take 128-byte lines too: the line past a block's
 * box is the next block's head, read next (H200, one call, two runs each, against none: batch 9..16 4%
 * less time on 28672x8192, 2.2-2.4% on 25344x5120; Q4_K 0.5% less, Q5_K the same). */
template <int T, int N, int PS> int wg_l2_bytes(size_t nb)
{
    return T == QG_Q8_K && ((PS == 1 && nb >= 32) || wg_inorder<T, N, PS>()) ? 128 : 0;
}

template <int T, int N, int WG, int PS>
int launch_wg_kernel(const uint8_t *w, size_t rows, size_t nb, const __half *x, size_t cols, int batch, const uint8_t *xi, float *part,
                     float *y32, uint16_t *y16, cudaStream_t s)
{
    const unsigned groups = (unsigned)((batch + N - 1) / N);
    k_kq_wg_image<T, N><<<dim3((unsigned)nb, groups), 4 * N, 0, s>>>(x, cols, batch, nb, const_cast<uint8_t *>(xi));
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return qg_cuda_fail("k_kq_wg_image launch", e);
    const unsigned rblocks = (unsigned)((rows + 64 * WG - 1) / (64 * WG));
    const dim3 grid = wg_phase_x<T, PS>() ? dim3(4 * groups, rblocks) : dim3(groups, rblocks, PS == 1 ? 4 : 1);
    /* the tensor-map instance where the rows make a map (ring_tm_map), else Q6_K's grid-copy instances come
     * in two: rows all 16-aligned, or not (U6) */
    int rc;
    CUtensorMap tm;
    if (ring_config().tma && ring_tm_map<T>(&tm, w, rows, nb, 64 * WG, wg_l2_bytes<T, N, PS>(nb)))
        rc = launch_wg_inst<T, N, WG, PS, false, true>(grid, w, rows, nb, x, cols, batch, xi, part, y32, y16, s, &tm);
    else if constexpr (T == QG_Q6_K && wg_grid<T>())
        rc = q6_unaligned_rows<T>(w, nb) ? launch_wg_inst<T, N, WG, PS, true>(grid, w, rows, nb, x, cols, batch, xi, part, y32, y16, s)
                                         : launch_wg_inst<T, N, WG, PS, false>(grid, w, rows, nb, x, cols, batch, xi, part, y32, y16, s);
    else
        rc = launch_wg_inst<T, N, WG, PS, false>(grid, w, rows, nb, x, cols, batch, xi, part, y32, y16, s);
    if (rc != QG_ERR_ok) return rc;
    if (PS == 1) {
        const size_t n = rows * (size_t)batch;
        k_kq_wg_join<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(part, n, y32, y16);
        e = cudaGetLastError();
        if (e != cudaSuccess) return qg_cuda_fail("k_kq_wg_join launch", e);
    }
    return QG_ERR_ok;
}

/* Batch 17..64 on the warpgroup kernel: columns in groups of 32 (or one group of 64 with
 * QG_CUDA_KQ_WG_N=64); batch 9..16 where first_batch allows, one group of 16. CTAs of two warpgroups (128
 * rows; Q6_K one). Where CTAs walking all four phases make one
 * wave that fills at least 3/4 of the CTA slots (two an SM: 28672 rows at batch <= 32), each does so
 * (but for Q5_K at batch 9..32, and Q4_K's at batch 9..16 also on fewer rows: below);
 * else every CTA walks one phase and k_kq_wg_join adds the four phase sums. H200, same run, Q4_K and
 * Q8_K, batch 32 and 64: one phase a CTA took 0.25-0.6x the time of all four on 8192 and 4096 rows and
 * 4-6% less on 28672 rows at batch 64, the same (Q4_K) or 10% more (Q8_K) on 28672 rows at batch 32; CTAs
 * of one warpgroup were slower everywhere but for a tie on 4096x14336 (Q8_K, batch 32).
 * QG_CUDA_KQ_WG_ROWS=64 and QG_CUDA_KQ_WG_PS=1 or 4 pin the other choices. Returns -1 (nothing launched)
 * where the kernel cannot run: the caller takes the other kernels, which give the same bits. */
template <int T>
int launch_wg(const uint8_t *w, size_t rows, size_t nb, const __half *x, size_t cols, int batch, float *y32, uint16_t *y16, cudaStream_t s)
{
    {
        constexpr int N64 = T == QG_Q6_K ? 32 : 64; /* no group of 64 is built for Q6_K */
        const wg_knobs k = wg_config();
        static const int optin = smem_optin();
        if (!k.on || batch < first_batch(k, (qg_ktype)T, rows, nb) || ((uintptr_t)x & 15u) != 0) return -1;
        /* batch <= 16: one group of 16 columns; Q6_K: groups of 32 above (its two product sets a step take
         * twice the registers) */
        const int n = batch <= 16 ? 16 : batch <= 32 || k.n != 64 || T == QG_Q6_K ? 32 : 64, groups = (batch + n - 1) / n;
        const size_t sms = (size_t)ring_config().sms;
        /* Q6_K: CTAs of one warpgroup, three an SM (168 registers; two warpgroups at two an SM spill); the
         * 16-column group runs the type's default only (QG_CUDA_KQ_WG_ROWS applies from batch 17) */
        constexpr int wg_def = T == QG_Q6_K ? 1 : 2;
        const int wg = k.rows != 0 && n != 16 ? k.rows / 64 : wg_def;
        const size_t ctas4 = (size_t)groups * ((rows + 64 * wg - 1) / (64 * wg)); /* CTAs walking all four phases */
        const size_t slots = sms * (size_t)(n == 16 ? wg_ctas<T, 16, wg_def>() : wg == 2 ? wg_ctas<T, 32, 2>() : wg_ctas<T, 32, 1>());
        /* Q5_K in one group of 16 takes one phase a CTA even there (H200, one call, against four phases a
         * CTA walked in order (wg_inorder), batch 9..16: 1-2.4% less time on 28672x8192, 5-7.5% on
         * 25344x5120); in one group of 32 too, since its phase CTAs run side by side (wg_phase_x; H200, one
         * call, two runs each, batch 24 and 32: 2-4% less time on 28672x8192, 5-8% on 25344x5120; at batch
         * 64, two groups, 6% more on 14336x4096: there the four-phase CTAs stay). Q4_K in one group of 16
         * takes four phases a CTA also where they make one CTA an SM on at least 3/4 of the SMs (same call:
         * 14336x4096 8.5-9.5% less time than one phase, 28672x8192 and 25344x5120 0-4.4%); Q8_K there
         * took 14-16% more (14336x4096), Q5_K 1-2% less */
        const bool one_phase = (n == 16 || (n == 32 && groups == 1)) && T == QG_Q5_K;
        const bool q4_fill = n == 16 && T == QG_Q4_K && 4 * ctas4 >= 3 * sms;
        const bool ps4 = (4 * ctas4 >= 3 * slots || q4_fill) && ctas4 <= slots && !one_phase;
        const int ps = k.ps != 0 ? k.ps : ps4 ? 4 : 1;
        /* the copies keep a CTA's byte offsets in 32 bits; the grid's y dimension holds the row blocks */
        if (128 * nb * (size_t)ring_bb<T>() >= ((size_t)1 << 32) || (rows + 63) / 64 > 65535) return -1;
        if (wg_stages<T, N64, 2>() * wg_stage_bytes<T, N64, 2>() > optin) return -1;
        const size_t ibytes = (size_t)groups * nb * (size_t)(n == 16 ? wg_xbytes<T, 16>() : n == 32 ? wg_xbytes<T, 32>() : wg_xbytes<T, N64>());
        const size_t pbytes = ps == 1 ? 4 * rows * (size_t)batch * sizeof(float) : 0;
        void *ws = nullptr;
        if (kq_ws_alloc(&ws, ibytes + pbytes, s) != cudaSuccess) {
            (void)cudaGetLastError();
            return -1;
        }
        const uint8_t *xb = (const uint8_t *)ws;
        float *part = ps == 1 ? (float *)((uint8_t *)ws + ibytes) : nullptr; /* ibytes: a multiple of 16 */
        int rc;
        if (n == 16) rc = ps == 1 ? launch_wg_kernel<T, 16, wg_def, 1>(w, rows, nb, x, cols, batch, xb, part, y32, y16, s)
                                  : launch_wg_kernel<T, 16, wg_def, 4>(w, rows, nb, x, cols, batch, xb, part, y32, y16, s);
        else if (ps == 1 && wg == 2) rc = n == 32 ? launch_wg_kernel<T, 32, 2, 1>(w, rows, nb, x, cols, batch, xb, part, y32, y16, s)
                                             : launch_wg_kernel<T, N64, 2, 1>(w, rows, nb, x, cols, batch, xb, part, y32, y16, s);
        else if (ps == 1) rc = n == 32 ? launch_wg_kernel<T, 32, 1, 1>(w, rows, nb, x, cols, batch, xb, part, y32, y16, s)
                                       : launch_wg_kernel<T, N64, 1, 1>(w, rows, nb, x, cols, batch, xb, part, y32, y16, s);
        else if (n == 32) rc = wg == 2 ? launch_wg_kernel<T, 32, 2, 4>(w, rows, nb, x, cols, batch, xb, part, y32, y16, s)
                                       : launch_wg_kernel<T, 32, 1, 4>(w, rows, nb, x, cols, batch, xb, part, y32, y16, s);
        else rc = wg == 2 ? launch_wg_kernel<T, N64, 2, 4>(w, rows, nb, x, cols, batch, xb, part, y32, y16, s)
                          : launch_wg_kernel<T, N64, 1, 4>(w, rows, nb, x, cols, batch, xb, part, y32, y16, s);
        const cudaError_t e = cudaFreeAsync(ws, s);
        if (rc == QG_ERR_ok && e != cudaSuccess) rc = qg_cuda_fail("cudaFreeAsync (k_kq_gemm_wg workspace)", e);
        return rc;
    }
}

/* The staged kernel for this batch: column tiles per warp NT and column groups CG (0: none fits, run
 * k_kq_gemm). Batch 1..8 one tile, 9..16 two tiles a warp, 17..32 four groups of one tile where the
 * device has the shared memory for them (one row tile a warp there: with two, 128 registers a thread
 * spill and measured slower on an H200, as did two groups of one tile at batch 9..16). Q6_K, whose
 * group kernel spills at 128 registers, takes the groups from batch 25 only: at 17..24 k_kq_gemm's three
 * column tiles measured faster, at 25..32 its four slower. */
void staged_shape(qg_ktype t, size_t batch, bool groups, int optin, int *nt, int *cg)
{
    const size_t first_group_batch = t == QG_Q6_K ? 25 : 17;
    *nt = 0, *cg = 0;
    if (batch <= 8) *nt = 1, *cg = 1;
    else if (batch <= 16) *nt = 2, *cg = 1;
    else if (batch >= first_group_batch && batch <= 32 && groups && staged_smem<QG_Q8_K, 1, 4>() <= optin) *nt = 1, *cg = 4;
    /* every shape above needs at most this much (3 stages) */
    if (*nt != 0 && staged_smem<QG_Q8_K, 2, 1>() > optin) *nt = 0, *cg = 0;
}

template <int T>
int launch_t(const uint8_t *w, size_t rows, size_t cols, const __half *x, size_t batch, float *y32, uint16_t *y16, cudaStream_t s)
{
    static const int optin = smem_optin();
    const size_t nb = cols / QK, bb = qg_kq_block_bytes((qg_ktype)T);
    const unsigned grid = (unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    const ring_cfg ring = ring_config();
    const int B = (int)batch, tiles = staged_tiles((qg_ktype)T, batch, rows, nb, ring.sms);
    if (getenv("QG_CUDA_KQ_MMA_TILES") == nullptr) {
        const int rc = launch_wg<T>(w, rows, nb, x, cols, B, y32, y16, s);
        if (rc >= 0) return rc;
    }
    {
        /* the ring kernel keeps a ring's byte offsets (128 rows) in 32 bits */
        if (ring.sm90 && getenv("QG_CUDA_KQ_MMA_TILES") == nullptr &&
            B >= ring_first_batch(ring, (qg_ktype)T, rows, nb, q6_unaligned_rows<T>(w, nb)) && B <= 16 && ((uintptr_t)x & 15u) == 0 &&
            ring_fills((qg_ktype)T, B, rows, ring) &&
            128 * nb * bb < ((size_t)1 << 32) &&
            ring_smem<T, 2, 1>() <= optin && ring_smem<T, 2, 4>() <= optin && ring_smem<T, 2, 1, 4, true>() <= optin &&
            ring_smem<T, 2, 4, 8, true>() <= optin)
            return B <= 8 ? launch_ring<T, 1>(w, rows, nb, x, cols, B, y32, y16, s) : launch_ring<T, 2>(w, rows, nb, x, cols, B, y32, y16, s);
    }
    int nt = 0, cg = 0;
    if (tiles > 0 && ((uintptr_t)x & 15u) == 0) staged_shape((qg_ktype)T, batch, staged_colgroups(), optin, &nt, &cg);
    if (nt > 0) {
        int rc = QG_ERR_ok;
        switch (100 * nt + 10 * cg + tiles) {
        case 111: rc = launch_staged<T, 1, 1, 1>(w, rows, nb, bb, x, cols, B, y32, y16, s); break;
        case 112: rc = launch_staged<T, 1, 2, 1>(w, rows, nb, bb, x, cols, B, y32, y16, s); break;
        case 141:
        case 142: rc = launch_staged<T, 1, 1, 4>(w, rows, nb, bb, x, cols, B, y32, y16, s); break;
        case 211: rc = launch_staged<T, 2, 1, 1>(w, rows, nb, bb, x, cols, B, y32, y16, s); break;
        case 212:
        default: rc = launch_staged<T, 2, 2, 1>(w, rows, nb, bb, x, cols, B, y32, y16, s); break;
        }
        if (rc != QG_ERR_ok) return rc;
        const cudaError_t e = cudaGetLastError();
        return e == cudaSuccess ? QG_ERR_ok : qg_cuda_fail("k_kq_gemm_staged launch", e);
    }
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

namespace {
__global__ void kq_xsplit_probe_kernel(const float *x, uint32_t *parts, size_t pairs)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= pairs) return;
    uint32_t p[3];
    bf16_split3(x[2 * i], x[2 * i + 1], p);
    for (int k = 0; k < 3; k++) parts[3 * i + k] = p[k];
}

struct xsplit_ctx {
    size_t pairs;
};

int launch_xsplit(const void *ctx, void *const *dev, void *stream)
{
    const size_t pairs = ((const xsplit_ctx *)ctx)->pairs;
    kq_xsplit_probe_kernel<<<(unsigned)((pairs + 255) / 256), 256, 0, (cudaStream_t)stream>>>((const float *)dev[0], (uint32_t *)dev[1], pairs);
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? QG_ERR_ok : qg_cuda_fail("kq_xsplit_probe_kernel launch", e);
}
} // namespace

extern "C" int qg_cuda_kq_xsplit_probe(const float *x, uint32_t *parts, size_t n)
{
    if (x == nullptr || parts == nullptr || n == 0 || n % 2 != 0 || n > ((size_t)1 << 30)) return QG_ERR_argument_invalid;
    const qg_cuda_buf bufs[2] = {{QG_CUDA_IN, (void *)x, n * 4}, {QG_CUDA_OUT, parts, n / 2 * 12}};
    const xsplit_ctx c = {n / 2};
    return qg_cuda_run(bufs, 2, launch_xsplit, &c);
}

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
