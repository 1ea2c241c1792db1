/* W4A16 group-wise GEMM on tensor cores (mma.sync m16n8k16, fp16 inputs, float32 accumulation), the repack
 * kernel into its layout, deterministic split-K, and the tensor-core accumulation probe.
 *
 * Layout and arithmetic: qgold/kernels_int4_cuda.h (the "tc16" layout) and reference/spec/numerics.md
 * ("W4A16 on tensor cores"). In short: per 64-column chunk and n-tile of 16 output channels, each lane
 * of a warp takes one uint4 of codes (its four A fragments of four k-tiles; 512 contiguous bytes per
 * n-tile) and, per m-tile of 8 rows, one uint4 of x per 32-column half (its B fragments of two k-tiles);
 * it turns each nibble pair into fp16 (1024 + q) with a mask and an OR, and subtracts the fp16
 * (1024 + z): the exact integer q - z (decode_ktile; the high nibbles of a byte by one exact fp16 fma
 * instead of a shift). The tensor core then sees exact inputs (e_k = 0). The mma blocks
 * of one group accumulate into a float32 partial started at 0; at the group's end t = RN32(t + RN32(s * p))
 * with the fp16 scale s of the row. The file is built with --fmad=false and writes __fmul_rn/__fadd_rn.
 *
 * Kernels: M <= 16, w4a16_tc_ring_kernel (a warp owns one n-tile and 1 or 2 m-tiles; operands through a
 * shared-memory ring filled by bulk copies (codes, sm_90) and cp.async; at M <= 8 on sm_90 the producer-warp
 * variant); M > 16, w4a16_tc_wg_kernel on sm_90a (wgmma, A from registers, B = x from shared memory; CTA
 * tiles of 128 or 256 channels x 32 or 64 rows), elsewhere w4a16_tc_gemm_kernel (mma.sync; CTA tiles of 128
 * or 256 channels x 64 or 32 rows, a warp owning 2 n-tiles x 4 m-tiles, weights and x staged once per CTA
 * tile).
 *
 * Determinism and batch invariance: each output (m, n) is one column of D in its tile; the mma computes
 * a column from that column of B only, the k-tile order, group flushes and split ranges are fixed by
 * (N, K, g), and the split count by (N, K). Which kernel runs, its tile sizes and how many m-tiles a warp
 * carries (picked from M) change how many independent columns run side by side, not any column's
 * operations. No float atomics: split partials go to a workspace [S][rows][Np] and the warp that finishes
 * a tile's last split (an integer turnstile counter per tile) adds them in split order 0..S-1
 * (tile_store); or, where the grid is large without split-K, one CTA walks all splits in order and adds
 * each split's total to the running sum (registers or shared memory): the same adds in the same order.
 *
 * Speed: at small M the product is bound by the weight stream (4.5 bits per weight at g = 128), so every
 * load of a chunk (codes, scale/zero words, x) is issued chunks ahead of its use, the m-blocks that share
 * weights run side by side, and the turnstile saves split-K's second kernel. At large M it is bound by
 * the tensor cores and the decode: a decoded A fragment feeds 4 mma, a B fragment 2, and each CTA reads
 * its weights and x from L2 once per tile.
 */
#include <cuda_fp16.h>
#include <atomic>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.cuh"
#include "qgold/cuda.h"
#include "qgold/int4.h"
#include "qgold/kernels_int4_cuda.h"

namespace {

constexpr int ROWS = QG_W4A16_TC_ROWS;
constexpr int CHUNK = QG_W4A16_TC_CHUNK;
constexpr int WARPS = 4; /* warps per CTA: 4 n-tiles, 64 output channels */
constexpr int MSLICE = QG_W4A16_TC_MSLICE;
/* the shared-memory ring of the M <= 16 kernel: RING_NB groups of RING_B chunks (12 stages: 43 KB per CTA
 * at M <= 8, 55 KB at M = 9..16). Measured on the H100 and not kept: 8 x 2 (4 KB runs of codes a warp) and
 * 4 x 4, 4 x 5 (deeper): at most 2% faster at M = 1 on 28672 x 8192, slower at M = 16 and on the other shapes. */
constexpr int RING_B = 4, RING_NB = 3;
/* CTAs of 4 warps the SMs of an H100 hold at once in the M <= 8 kernel (132 x 4): the split-K target */
constexpr size_t CTA_SLOTS = 132 * 4;

struct dev_shape {
    int N, K, Np, G, nt, kc; /* kc: chunks of 64 columns */
    int gshift;              /* group of k-tile kt: min(kt >> gshift, G - 1) (g = 16 << gshift; G = 1: 30) */
};

__device__ __forceinline__ uint16_t f32_to_f16_bits(float v)
{
    uint32_t b = __float_as_uint(v);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)(((b >> 16) & 0x8000u) | 0x7E00u | ((b >> 13) & 0x3FFu));
    return __half_as_ushort(__float2half_rn(v));
}

__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t hsub2_bits(uint32_t a, uint32_t b)
{
    __half2 r = __hsub2(*reinterpret_cast<__half2 *>(&a), *reinterpret_cast<__half2 *>(&b));
    return *reinterpret_cast<uint32_t *>(&r);
}

/* The end of a warp's tile (n-tile nt, split s, rows m0 .. m0 + 8 MT - 1). D fragment: tot[i][0..1] are rows
 * (m) 2t, 2t + 1 of m-tile i at channel gr of the tile, tot[i][2..3] the same rows at channel gr + 8.
 * S = 1 (part == NULL): y directly. S > 1: the split's float32 partial goes to part[(s * M + m) * Np + n];
 * then a turnstile: each lane fences its stores, and lane 0 counts the split in cnt[z * nt_total + nt]
 * (an integer atomic; z: the block of 8 MT rows within the launch); the warp that counts the S-th split (any split may be last) adds the S partials of
 * the tile in split order, y = ((p_0 + p_1) + p_2) + ... + p_{S-1} in float32, and sets the counter back
 * to 0 for the next launch. The order of the adds is fixed whichever warp arrives last; no float atomics.
 * QG_CUDA_MUTANT_INT4_SPLITK_REVERSED (a mutant for the GPU machine, named outside the QG_MUTATION_
 * scheme of ci/mutants.txt, whose runs have no GPU) adds them S-1..0. */
template <int MT>
__device__ __forceinline__ void tile_store(const float (&tot)[MT][4], int nt, int s, int m0, int M, const dev_shape &sh, int splits,
                                           float *__restrict__ part, unsigned *__restrict__ cnt, float *__restrict__ y32,
                                           uint16_t *__restrict__ y16, int lane, int z)
{
    const int gr = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < MT; i++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int m = m0 + i * 8 + 2 * t + (e & 1);
            const int n = nt * ROWS + gr + (e < 2 ? 0 : 8);
            if (m >= M || n >= sh.N) continue;
            if (part != nullptr) {
                part[((size_t)s * M + m) * sh.Np + n] = tot[i][e];
            } else {
                if (y32) y32[(size_t)m * sh.N + n] = tot[i][e];
                if (y16) y16[(size_t)m * sh.N + n] = f32_to_f16_bits(tot[i][e]);
            }
        }
    }
    if (part == nullptr) return;
    __threadfence();
    __syncwarp();
    unsigned *c = cnt + (size_t)z * sh.nt + nt;
    unsigned old = 0;
    if (lane == 0) old = atomicAdd(c, 1u);
    old = __shfl_sync(0xFFFFFFFFu, old, 0);
    if (old != (unsigned)splits - 1) return;
    __threadfence(); /* the other splits' partials (fenced before their counts) are visible from here */
    /* lane l adds the outputs (m0 + l / 16 + 2 i, nt ROWS + l % 16), i < 4 MT, up to 8 at a time with the
     * loads of a split issued together (S round trips to L2 a batch, not one a split and output), each
     * output's adds in split order */
    const size_t stride = (size_t)M * sh.Np;
    const int ml = m0 + (lane >> 4), nl = nt * ROWS + (lane & 15);
#ifdef QG_CUDA_MUTANT_INT4_SPLITK_REVERSED
    const int q0 = splits - 1, qs = -1;
#else
    const int q0 = 0, qs = 1;
#endif
    constexpr int NI = 4 * MT, UB = NI < 8 ? NI : 8;
    for (int i0 = 0; i0 < NI && nl < sh.N && ml + 2 * i0 < M; i0 += UB) {
        float v[UB];
        const float *pb = part + (size_t)(ml + 2 * i0) * sh.Np + nl;
#pragma unroll
        for (int i = 0; i < UB; i++) v[i] = ml + 2 * (i0 + i) < M ? __ldcg(pb + (size_t)q0 * stride + (size_t)(2 * i) * sh.Np) : 0.0f;
        for (int k = 1; k < splits; k++) {
            const float *pq = pb + (size_t)(q0 + k * qs) * stride;
#pragma unroll
            for (int i = 0; i < UB; i++)
                if (ml + 2 * (i0 + i) < M) v[i] = __fadd_rn(v[i], __ldcg(pq + (size_t)(2 * i) * sh.Np));
        }
#pragma unroll
        for (int i = 0; i < UB; i++) {
            const int m = ml + 2 * (i0 + i);
            if (m >= M) continue;
            if (y32) y32[(size_t)m * sh.N + nl] = v[i];
            if (y16) y16[(size_t)m * sh.N + nl] = f32_to_f16_bits(v[i]);
        }
    }
    if (lane == 0) *c = 0u;
}

/* The A fragments of one k-tile from the lane's code word: rows gr (a0, a2) and gr + 8 (a1, a3), nibbles
 * 0-3, 4-7, 8-11, 12-15 of each 16-bit half. Each is an exact integer q - z built from exact fp16 steps:
 * a0, a2: (1024 + q) - (1024 + z), q placed in the mantissa of 1024 by a mask and an OR;
 * a1, a3: (1024 + 16 q) * 2^-4 - (64 + z) in one fma, q placed at mantissa bits 4-7 (no shift); the
 * product 64 + q and the sum q - z are exact, so the single rounding changes nothing.
 * za: fp16 (1024 + z) pairs of row gr; zbn: fp16 -(64 + z) pairs of row gr + 8. */
__device__ __forceinline__ uint32_t hfma2_bits(uint32_t a, uint32_t b, uint32_t c)
{
    __half2 r = __hfma2(*reinterpret_cast<__half2 *>(&a), *reinterpret_cast<__half2 *>(&b), *reinterpret_cast<__half2 *>(&c));
    return *reinterpret_cast<uint32_t *>(&r);
}

/* The fp16 pair (1024, 1024) held in a register: with the mask as the one immediate, each (v & mask) | 1024
 * is a single three-input LOP3 (with both as immediates the compiler spends two instructions on it). */
__constant__ uint32_t c_f16x2_1024 = 0x64006400u;

__device__ __forceinline__ void decode_ktile(uint32_t word, uint32_t za, uint32_t zbn, uint32_t (&a)[4])
{
    const uint32_t w8 = word >> 8, k1024 = c_f16x2_1024;
    a[0] = hsub2_bits((word & 0x000F000Fu) | k1024, za);
    a[1] = hfma2_bits((word & 0x00F000F0u) | k1024, 0x2C002C00u, zbn);
    a[2] = hsub2_bits((w8 & 0x000F000Fu) | k1024, za);
    a[3] = hfma2_bits((w8 & 0x00F000F0u) | k1024, 0x2C002C00u, zbn);
}

/* A group's scale s (low half) and fp16 (1024 + z) (high half) of the sz words of rows gr (va) and gr + 8
 * (vb) -> the scales in float32, the pair (1024 + z, 1024 + z) of row gr and the pair -(64 + z) =
 * 960 - (1024 + z) (exact) of row gr + 8. QG_CUDA_MUTANT_INT4_DECODE_ZERO (a GPU-machine mutant) takes
 * row gr's zero for row gr + 8: gpu.int4_cuda.gemm fails on it. */
__device__ __forceinline__ void group_words(uint32_t va, uint32_t vb, float &sa, float &sb, uint32_t &za, uint32_t &zbn)
{
    sa = __half2float(__ushort_as_half((uint16_t)(va & 0xFFFFu)));
    sb = __half2float(__ushort_as_half((uint16_t)(vb & 0xFFFFu)));
    za = __byte_perm(va, 0u, 0x3232);
#ifdef QG_CUDA_MUTANT_INT4_DECODE_ZERO
    zbn = hsub2_bits(0x63806380u, __byte_perm(va, 0u, 0x3232));
#else
    zbn = hsub2_bits(0x63806380u, __byte_perm(vb, 0u, 0x3232));
#endif
}

/* d = A B + c and d = A B + 0 (a group's first mma block: the same value as adding to a partial of +0) */
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    mma16816(d, a[0], a[1], a[2], a[3], b0, b1);
}

__device__ __forceinline__ void mma16816_c0(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(0.0f));
}

/* The running state of one warp's split: per m-tile the split total tot and the open group's partial par
 * (D fragments), the open group cur and its scales (sa, sb: rows gr, gr + 8) and zero pairs (za, zbn). */
template <int MT>
struct w4a16_acc {
    float tot[MT][4], par[MT][4];
    int cur;
    float sa, sb;
    uint32_t za, zbn;
};

/* tot += RN32(s * par) for one group's partials par (scale sa for rows gr, sb for gr + 8) */
template <int MT>
__device__ __forceinline__ void group_flush(float (&tot)[MT][4], const float (&par)[MT][4], float sa, float sb)
{
#pragma unroll
    for (int i = 0; i < MT; i++) {
        tot[i][0] = __fadd_rn(tot[i][0], __fmul_rn(sa, par[i][0]));
        tot[i][1] = __fadd_rn(tot[i][1], __fmul_rn(sa, par[i][1]));
        tot[i][2] = __fadd_rn(tot[i][2], __fmul_rn(sb, par[i][2]));
        tot[i][3] = __fadd_rn(tot[i][3], __fmul_rn(sb, par[i][3]));
    }
}

/* the open group's flush (the next group's first mma block starts from +0) */
template <int MT>
__device__ __forceinline__ void acc_flush(w4a16_acc<MT> &a)
{
    group_flush<MT>(a.tot, a.par, a.sa, a.sb);
}

/* Half h of chunk c: its two k-tiles j = 2h, 2h + 1 in order. w: the lane's code words of the chunk, zw: the
 * sz words of rows gr, gr + 8 for the groups of k-tiles 0 (x, y) and 2 (z, w), xc: the lane's B fragments
 * of the half per m-tile. Both k-tiles of a half lie in one group (G > 1 means g >= 32, two k-tiles), so
 * the group is looked up once a half; a group change flushes the open group first and the new group's
 * first mma block starts from +0. Both kernels below run this sequence per output for the same (c, h)
 * sequence: the operations of an output do not depend on how its operands were loaded. */
template <int MT>
__device__ __forceinline__ void half_mma(w4a16_acc<MT> &a, int c, int h, const uint4 &w, const uint4 &zw, const uint4 (&xc)[MT],
                                         const dev_shape &sh)
{
    const int grp = min((c * 4 + 2 * h) >> sh.gshift, sh.G - 1);
    const bool fresh = grp != a.cur;
    if (fresh) {
        if (a.cur >= 0) acc_flush<MT>(a);
        a.cur = grp;
        group_words(h == 0 ? zw.x : zw.z, h == 0 ? zw.y : zw.w, a.sa, a.sb, a.za, a.zbn);
    }
#pragma unroll
    for (int jj = 0; jj < 2; jj++) {
        const int j = 2 * h + jj;
        const uint32_t word = j == 0 ? w.x : j == 1 ? w.y : j == 2 ? w.z : w.w;
        uint32_t A[4];
        decode_ktile(word, a.za, a.zbn, A);
#pragma unroll
        for (int i = 0; i < MT; i++) {
            const uint32_t b0 = jj ? xc[i].z : xc[i].x;
            const uint32_t b1 = jj ? xc[i].w : xc[i].y;
            if (jj == 0 && fresh) mma16816_c0(a.par[i], A[0], A[1], A[2], A[3], b0, b1);
            else mma16816(a.par[i], A, b0, b1);
        }
    }
}

template <int MT>
__device__ __forceinline__ void acc_init(w4a16_acc<MT> &a)
{
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) a.tot[i][j] = 0.0f, a.par[i][j] = 0.0f;
    a.cur = -1;
    a.sa = a.sb = 0.0f;
    a.za = a.zbn = 0u;
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}

__device__ __forceinline__ void cp_async4(uint32_t dst, const void *src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src) : "memory");
}


/* The CTA's shared-memory ring in uint4. First the code words [ring group][warp][chunk][lane]
 * (NB x W x RING_B x 32): a warp's chunks of one ring group are contiguous here as in global
 * memory (the tc16 layout: an n-tile's chunks follow each other), so on sm_90 one lane copies them with
 * one bulk copy (cp.async.bulk, completing on the ring group's mbarrier) instead of every lane issuing
 * one 16-byte copy a chunk. Then the stages (one chunk each): the sz slots [warp][gr] (32; word t of a slot
 * is copied by lane 4 gr + t: rows gr, gr + 8 of the groups of k-tiles 0 and 2), then x [half][row r <
 * 8 MT][t] (64 MT): rows below R (the CTA's rows of x) are copied every chunk, rows R .. 8 MT - 1 are
 * set to zero once, so every lane loads its B fragments unconditionally. Last the ring_nb(W) mbarriers. */
/* W warps a CTA (W n-tiles): WARPS, or 7 where that balances the SMs (ring_warps) */
constexpr int RING_SZ = 0;
__host__ __device__ constexpr int ring_x(int W) { return W * 8; }
/* ring groups of a W-warp CTA: 4 for 7 warps (104 KB, two CTAs an SM; H200, 28672 x 8192, g = 128, M = 9
 * .. 16: 1.2-1.7% less time than 3) */
__host__ __device__ constexpr int ring_nb(int W) { return W == WARPS ? RING_NB : 4; }
__host__ __device__ constexpr int ring_codes(int W) { return ring_nb(W) * W * RING_B * 32; }
__host__ __device__ constexpr int ring_stage_u4(int MT, int W) { return ring_x(W) + 64 * MT; }

template <int MT, int W>
size_t ring_smem_bytes() { return (size_t)(ring_codes(W) + RING_B * ring_nb(W) * ring_stage_u4(MT, W)) * 16 + ring_nb(W) * sizeof(uint64_t); }

/* sm_90 bulk copies of the ring's code words, completing on mbarriers (common.cuh). */
#define QG_INT4_BULK QG_CUDA_MBAR

/* the same, announced by the calling lane's own arrival (sm_90; the ring kernel calls it only there) */
__device__ __forceinline__ void bulk_copy_arrive(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar)
{
#if QG_INT4_BULK
    mbar_expect_tx(bar, bytes);
    bulk_copy(dst, src, bytes, bar);
#endif
}

/* Two whole groups qa, qa + 1 of CPG chunks each (g = 64 CPG = 1, g = 128 CPG = 2; group qa in the ring
 * stages st .. st + (CPG - 1) STG, qa + 1 in the CPG stages after, the lane's code words of the first chunk
 * at cw and of the others 32 uint4 apart): the operations of half_mma per
 * output, as two independent mma chains. Each group's chain is its own k-tiles in order from +0, exactly as half_mma
 * runs it; the chains meet only in the flushes, which keep the order: the group open before (if any),
 * then qa, and qa + 1 is left open as half_mma leaves a group (flushed by the next group or at the
 * split's end). Same operations, same bits; the two chains' mma latencies overlap where one chain
 * (MT at M <= 16) had them add up. QG_CUDA_MUTANT_INT4_PAIR_ORDER (a GPU-machine mutant) flushes
 * qa + 1 before qa: gpu.int4_cuda.gemm fails on it (its rows alone against the M > 16 kernel). */
template <int MT, int CPG, int STG, int XOFF, int XH = 32 * MT, int XRW = 4>
__device__ __forceinline__ void pair_mma_x(w4a16_acc<MT> &a, int qa, const uint4 *xs, const uint4 *cw, uint32_t zAa, uint32_t zAb, uint32_t zBa,
                                           uint32_t zBb, int gr, int t)
{
    /* the open group was flushed by the caller; x of half h, row r at XOFF + h XH + r XRW (+ t) */
    float saA, sbA, saB, sbB;
    uint32_t zaA, zbnA, zaB, zbnB;
    group_words(zAa, zAb, saA, sbA, zaA, zbnA);
    group_words(zBa, zBb, saB, sbB, zaB, zbnB);
    float pb[MT][4];
#pragma unroll
    for (int kk = 0; kk < CPG; kk++) {
        const uint4 *sA = xs + kk * STG, *sB = xs + (kk + CPG) * STG;
        const uint4 wA = cw[32 * kk], wB = cw[32 * (kk + CPG)];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int h = j >> 1;
            uint32_t A[4], B[4];
            decode_ktile(j == 0 ? wA.x : j == 1 ? wA.y : j == 2 ? wA.z : wA.w, zaA, zbnA, A);
            decode_ktile(j == 0 ? wB.x : j == 1 ? wB.y : j == 2 ? wB.z : wB.w, zaB, zbnB, B);
#pragma unroll
            for (int i = 0; i < MT; i++) {
                const uint4 xa = sA[XOFF + h * XH + (8 * i + gr) * XRW + t], xb = sB[XOFF + h * XH + (8 * i + gr) * XRW + t];
                const uint32_t xa0 = (j & 1) ? xa.z : xa.x, xa1 = (j & 1) ? xa.w : xa.y;
                const uint32_t xb0 = (j & 1) ? xb.z : xb.x, xb1 = (j & 1) ? xb.w : xb.y;
                if (kk == 0 && j == 0) {
                    mma16816_c0(a.par[i], A[0], A[1], A[2], A[3], xa0, xa1);
                    mma16816_c0(pb[i], B[0], B[1], B[2], B[3], xb0, xb1);
                } else {
                    mma16816(a.par[i], A, xa0, xa1);
                    mma16816(pb[i], B, xb0, xb1);
                }
            }
        }
    }
#ifdef QG_CUDA_MUTANT_INT4_PAIR_ORDER
    /* qa + 1 flushed first; qa is left open (flushed after it) */
    group_flush<MT>(a.tot, pb, saB, sbB);
    a.cur = qa;
    a.sa = saA, a.sb = sbA, a.za = zaA, a.zbn = zbnA;
#else
    group_flush<MT>(a.tot, a.par, saA, sbA);
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) a.par[i][e] = pb[i][e];
    a.cur = qa + 1;
    a.sa = saB, a.sb = sbB, a.za = zaB, a.zbn = zbnB;
#endif
}

/* The ring kernel's pair, stages STG apart: zs the thread's sz slot (rows gr, gr + 8) and xs its x piece
 * (half 0, row gr, t) in the pair's first stage. */
template <int MT, int CPG, int W>
__device__ __forceinline__ void pair_mma(w4a16_acc<MT> &a, int qa, const uint4 *zs, const uint4 *xs, const uint4 *cw)
{
    constexpr int STG = ring_stage_u4(MT, W);
    if (a.cur >= 0) acc_flush<MT>(a);
    const uint4 zA = zs[0], zB = zs[CPG * STG];
    pair_mma_x<MT, CPG, STG, 0>(a, qa, xs, cw, zA.x, zA.y, zB.x, zB.y, 0, 0);
}

/* Warp tiles of one n-tile and MT <= 2 m-tiles, for M <= 16. At small M the time is the
 * weight stream, and what it needs is many bytes in flight in long contiguous runs and few instructions
 * per byte: the CTA copies every operand of its chunks into a shared-memory ring of NB = ring_nb(W) groups of
 * RING_B chunks; (NB - 1) groups are in flight while one is computed. Each warp requests its codes
 * a ring group at a time (RING_B x 512 contiguous bytes: one bulk copy on sm_90, waited for on the ring
 * group's mbarrier; cp.async a lane and chunk elsewhere), the sz words and x with cp.async. x is copied
 * once per CTA (its W warps share the m-block and the split) and read by each warp as its B fragments.
 * One barrier per group: after it, the group's copies by every thread have landed (each thread waited
 * for its own cp.async and for the mbarrier) and every warp has finished the previous group, whose slots
 * the copies issued next refill. All warps of a CTA walk the same chunks;
 * a warp past the last n-tile copies the last n-tile's codes and stores nothing. W warps a CTA: 4 CTAs of
 * 4 an SM, or 2 of 7 (register bound 144). */
template <int MT, int PAIR, int W>
__global__ void __launch_bounds__(W * 32, W == WARPS ? 4 : 2) w4a16_tc_ring_kernel(const uint4 *__restrict__ qw, const uint32_t *__restrict__ sz,
                                                                     const uint16_t *__restrict__ x, int M, dev_shape sh, int splits,
                                                                     float *__restrict__ part, unsigned *__restrict__ cnt,
                                                                     float *__restrict__ y32, uint16_t *__restrict__ y16, int R)
{
    constexpr int B = RING_B, NB = ring_nb(W);
    extern __shared__ uint4 ring_smem[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, tid = threadIdx.x;
#ifdef QG_CUDA_MUTANT_INT4_RING_W
    const int nt = blockIdx.y * WARPS + warp; /* the n-tiles of a 4-warp CTA whatever W */
#else
    const int nt = blockIdx.y * W + warp;
#endif
    const bool live = nt < sh.nt;
    const int ntc = live ? nt : sh.nt - 1;
    const int s = blockIdx.z;
    const int m0 = blockIdx.x * 8 * MT;
    const int c0 = (int)((long long)sh.kc * s / splits), c1 = (int)((long long)sh.kc * (s + 1) / splits);
    const int gr = lane >> 2, t = lane & 3;
    constexpr int STG = ring_stage_u4(MT, W), XR = 8 * MT, RING_X = ring_x(W), RING_CODES = ring_codes(W);

    w4a16_acc<MT> acc;
    acc_init<MT>(acc);

    /* the warp's code words of chunk c0 (bulk copy) or the lane's (cp.async) */
    const uint4 *wp = qw + ((size_t)ntc * sh.kc + c0) * 32 + (QG_INT4_BULK ? 0 : lane);
    /* this thread's sz word: row gr (t even) or gr + 8 (t odd), group of k-tile 0 (t < 2) or 2 */
    const uint32_t *szp = sz + ntc * ROWS + gr + 8 * (t & 1);
    /* this thread's x copy (tid < 8 R): half xh, row xrow of the CTA, the lanes' columns 8 xt .. + 7 */
    const int xq = tid, xh = xq / (4 * R), xrow = (xq % (4 * R)) >> 2, xt = xq & 3;
    const bool xissue = xq < 8 * R;
    const int xm = m0 + xrow;
    const bool xrow_ok = xissue && xm < M;
    const uint16_t *xp = x + (size_t)(xrow_ok ? xm : 0) * sh.K + 32 * xh + 8 * xt;
    uint4 *const stg = ring_smem + RING_CODES; /* the stages */
    const uint32_t codes = (uint32_t)__cvta_generic_to_shared(ring_smem), base = codes + 16u * RING_CODES;
    const uint32_t bars = base + 16u * (B * NB * STG); /* mbarrier of ring group i: bars + 8 i */
    const uint32_t off_z = 16u * (RING_SZ + warp * 8 + gr) + 4u * t;
    const uint32_t off_x = 16u * (RING_X + (xh * XR + xrow) * 4 + xt);
    const int zk = 2 * (t >> 1);
    /* x rows R .. XR - 1 of every stage: zero (never copied; ordered before any read by the first barrier) */
    if (R < XR)
        for (int i = tid; i < B * NB * 2 * XR * 4; i += W * 32) {
            const int u = i % (2 * XR * 4);
            if ((u >> 2) % XR >= R) stg[(i / (2 * XR * 4)) * STG + RING_X + u] = make_uint4(0, 0, 0, 0);
        }
    /* one arrival a warp per ring group (its bulk copy's lane), visible to the copies before any is issued */
    if (QG_INT4_BULK && tid == 0) {
        for (int i = 0; i < NB; i++) mbar_init(bars + 8u * i, W);
        mbar_init_fence();
    }
    if (QG_INT4_BULK) __syncthreads();

    /* the ring groups are issued in order (0, 1, 2, ...), so every copy takes a running source pointer:
     * one add a chunk (the codes a group), the sz pointer moved only when the thread's group changes */
    const uint4 *wnext = wp;
    /* rows past M walk row 0's chunks (in bounds; their copies read nothing), so every copy of a ring
     * group is the group's pointer plus a constant */
    const uint16_t *xnext = xp + (size_t)c0 * CHUNK;
    int zg = min((4 * c0 + zk) >> sh.gshift, sh.G - 1);
    const uint32_t *znext = szp + (size_t)zg * sh.Np;
    const size_t np = (size_t)sh.Np; /* words from one group's sz row to the next */
    /* from one chunk's sz word to the next's inside K where g <= 64: 1 group (g = 64), 2 (g = 32), 0 (G = 1) */
    const size_t zst = sh.G == 1 ? 0 : np << (2 - min(sh.gshift, 2));
    auto next_sz = [&](int c) { /* the thread's sz word of chunk c (c never decreases) */
        const int g = min((4 * c + zk) >> sh.gshift, sh.G - 1);
        znext += (size_t)(unsigned)(g - zg) * (unsigned)sh.Np;
        zg = g;
        return znext;
    };
    int islot = 0; /* the ring group the next issue fills: gi % NB, counted (groups are issued in order) */
    auto issue_group = [&](int gi) { /* chunks c0 + B gi .. + B - 1 into ring group gi % NB */
        const int sl = islot, slot0 = sl * B, cb = c0 + gi * B;
        islot = sl == NB - 1 ? 0 : sl + 1;
        /* the warp's codes of the ring group, [warp][chunk][lane] */
        const uint32_t cdst = codes + 16u * (uint32_t)((sl * W + warp) * B * 32);
        const uint4 *const wg = wnext;
        wnext += B * 32;
        if (QG_INT4_BULK && lane == 0) {
            const int n = min(B, c1 - cb);
            bulk_copy_arrive(cdst, wg, 512u * (uint32_t)n, bars + 8u * (uint32_t)sl);
        }
        const uint32_t b0 = base + (uint32_t)(slot0 * STG) * 16u;
        if (cb + B <= c1 && (cb + B) * CHUNK <= sh.K) { /* a whole ring group inside K: no bound per chunk */
            /* the thread's sz words of the B chunks: inside K no group is clamped, so chunk cb + k is
             * group g(cb) + k / 2 with g = 128 (PAIR 2; from an even cb), g(cb) + k with g = 64, g(cb) +
             * 2 k with g = 32 and g(cb) with g = K (one group): one lookup and constant steps of Np words */
            if (PAIR != 2 || (cb & 1) == 0) {
                /* g = 128 after a whole ring group (every ring group but the first follows one; its last
                 * chunk is in group g(cb) - 1): the next group's words, Np on, without the lookup */
                const bool step = PAIR == 2 && gi > 0;
#ifdef QG_CUDA_MUTANT_INT4_SZ_STEP
                const uint32_t *const z0 = step ? znext + 2 * np : next_sz(cb); /* a GPU-machine mutant: one group too far */
#else
                const uint32_t *const z0 = step ? znext + np : next_sz(cb);
#endif
                const uint32_t *zp[B];
#pragma unroll
                for (int k = 0; k < B; k++) zp[k] = k == 0 ? z0 : PAIR == 2 ? (k & 1 ? zp[k - 1] : zp[k - 1] + np) : zp[k - 1] + zst;
                znext = zp[B - 1];
                zg = step ? zg + 2 : min((4 * (cb + B - 1) + zk) >> sh.gshift, sh.G - 1);
#pragma unroll
                for (int k = 0; k < B; k++) {
                    const uint32_t b = b0 + (uint32_t)(k * STG) * 16u;
                    if (!QG_INT4_BULK) cp_async16(cdst + 16u * (32 * k + lane), wg + 32 * k, 16);
                    /* g = 128 from an even cb: this ring group runs pair_mma, which reads the sz words of
                     * chunks 0 and 2 only (chunk 2q + 1's are chunk 2q's) */
#ifdef QG_CUDA_MUTANT_INT4_SZ_SKIP
                    if (PAIR != 2 || k == 0) cp_async4(b + off_z, zp[k]); /* a GPU-machine mutant: chunk 2's sz words too */
#else
                    if (PAIR != 2 || (k & 1) == 0) cp_async4(b + off_z, zp[k]);
#endif
                    if (xissue) cp_async16(b + off_x, xnext + k * CHUNK, xrow_ok ? 16 : 0);
                }
                xnext += B * CHUNK;
                return;
            }
            if constexpr (PAIR == 2) { /* g = 128 from an odd chunk */
#pragma unroll
                for (int k = 0; k < B; k++) {
                    const uint32_t b = b0 + (uint32_t)(k * STG) * 16u;
                    if (!QG_INT4_BULK) cp_async16(cdst + 16u * (32 * k + lane), wg + 32 * k, 16);
                    cp_async4(b + off_z, next_sz(cb + k));
                    if (xissue) cp_async16(b + off_x, xnext + k * CHUNK, xrow_ok ? 16 : 0);
                }
                xnext += B * CHUNK;
            }
            return;
        }
#pragma unroll
        for (int k = 0; k < B; k++) {
            const int c = cb + k;
            if (c >= c1) break;
            const uint32_t b = b0 + (uint32_t)(k * STG) * 16u;
            if (!QG_INT4_BULK) cp_async16(cdst + 16u * (32 * k + lane), wg + 32 * k, 16);
            cp_async4(b + off_z, next_sz(c));
            if (xissue) {
                const bool ok = xrow_ok && c * CHUNK + 32 * xh + 8 * xt < sh.K; /* else zero-filled */
                cp_async16(b + off_x, ok ? (const void *)xnext : (const void *)xp, ok ? 16 : 0);
            }
            xnext += CHUNK;
        }
    };

    const int ng = (c1 - c0 + B - 1) / B;
#pragma unroll
    for (int gi = 0; gi < NB - 1; gi++) {
        if (gi < ng) issue_group(gi);
        cp_async_commit();
    }
    int cslot = 0;       /* gi % NB, counted */
    uint32_t cphase = 0; /* (gi / NB) & 1, the parity of the slot's mbarrier phase */
    /* in uint4 of the ring, for ring group cslot: the lane's codes of its first chunk (co), the thread's sz
     * slot (zo) and x piece (xo: half 0, row gr, t) of its first stage; each moves one ring group on a
     * group and back at the wrap (not recomputed from the slot and the thread's index every group) */
    constexpr int CSTEP = W * B * 32, SSTEP = B * STG;
    int co = warp * B * 32 + lane, zo = RING_CODES + RING_SZ + warp * 8 + gr, xo = RING_CODES + RING_X + gr * 4 + t;
    for (int gi = 0; gi < ng; gi++) {
        cp_async_wait<NB - 2>(); /* this thread's copies of group gi have landed */
        if (QG_INT4_BULK) mbar_wait(bars + 8u * (uint32_t)cslot, cphase); /* and its codes */
        __syncthreads(); /* everyone's have; and group gi - 1 is consumed by every warp */
        if (gi + NB - 1 < ng) issue_group(gi + NB - 1);
        cp_async_commit();
        const int cf = c0 + gi * B;
        const uint4 *const cw = ring_smem + co, *const zs = ring_smem + zo, *const xs = ring_smem + xo;
        if (++cslot == NB) {
            cslot = 0, cphase ^= 1u;
            co -= (NB - 1) * CSTEP, zo -= (NB - 1) * SSTEP, xo -= (NB - 1) * SSTEP;
        } else {
            co += CSTEP, zo += SSTEP, xo += SSTEP;
        }
        /* PAIR: chunks a group, set on the host (0: g is not 64 or 128, and the kernel keeps its code).
         * g = 128 (gshift 3: chunks 2q, 2q + 1 form group q) where the ring group's four chunks are two
         * whole groups; g = 64 (chunk c is group c) as two pairs of groups */
        if (PAIR == 2 && B == 4 && (cf & 1) == 0 && cf + 3 < c1 && (cf >> 1) + 1 <= sh.G - 1) {
            pair_mma<MT, 2, W>(acc, cf >> 1, zs, xs, cw);
            continue;
        }
        if (PAIR == 1 && B == 4 && cf + 3 < c1 && cf + 3 <= sh.G - 1) {
            pair_mma<MT, 1, W>(acc, cf, zs, xs, cw);
            pair_mma<MT, 1, W>(acc, cf + 2, zs + 2 * STG, xs + 2 * STG, cw + 64);
            continue;
        }
#pragma unroll
        for (int k = 0; k < B; k++) {
            const int c = c0 + gi * B + k;
            if (c >= c1) break;
            const uint4 w = cw[32 * k];
            const uint4 zw = zs[k * STG];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                uint4 xc[MT];
#pragma unroll
                for (int i = 0; i < MT; i++) xc[i] = xs[k * STG + (h * XR + 8 * i) * 4];
                half_mma<MT>(acc, c, h, w, zw, xc, sh);
            }
        }
    }
    cp_async_wait<0>();
    if (!live) return;
    if (acc.cur >= 0) acc_flush<MT>(acc);
    tile_store<MT>(acc.tot, nt, s, m0, M, sh, splits, part, cnt, y32, y16, lane, blockIdx.x);
}

/* ---- M <= 16 on sm_90: one producer warp, W consumer warps (4, or 7 where ring_warps says so) ----
 * The ring kernel's work per output, with the copies taken off the warps that multiply: warp W of
 * the CTA issues every copy of a ring group (the W warps' codes and the groups' sz words by bulk copies,
 * one lane each; x a row a lane by bulk copy, or by cp.async zero-filled past K in a group that K ends
 * inside) into slot gi % WS_NB, and the consumer warps
 * wait on the slot's `full` mbarrier (33 arrivals: the bulk bytes' arrival and each producer lane's
 * cp.async completion) and free it on `empty` (every consumer thread arrives after its last read of the
 * slot, so each read is ordered before the producer's refill by its own release); no CTA barrier in the
 * loop. Per slot (uint4): codes [warp][chunk][lane], sz [group j][16 W rows] words (groups qf + j of the
 * CTA's 16 W channels, qf the ring group's first; g >= 32: at most 8), x [row][chunk][half][t] (rows past
 * the CTA's are zero from the start). Same operations per output as the ring kernel. Used at M <= 8
 * (ws_max_m): at M = 16 (two m-tiles, 3 CTAs an SM by shared memory) the 4-warp ring kernel is faster; with
 * 7 warps at g <= 32 also at M = 9..16. */
#ifndef QG_INT4_WS_NB
#define QG_INT4_WS_NB 3
#endif
/* x of a slot is [row][chunk][half][t], rows WS_XRS uint4 apart: 32 + 4, so the 8 lanes of a quarter-warp
 * load (rows gr, gr + 1, t = 0..3) hit 8 distinct 16-byte bank groups */
constexpr int WS_NB = QG_INT4_WS_NB, WS_XRS = RING_B * 8 + 4;
/* the sz words of a slot: 8 groups of the CTA's 16 W channels */
__host__ __device__ constexpr int ws_sz_u4(int W) { return 8 * W * ROWS / 4; }
template <int MT, int W>
__host__ __device__ constexpr int ws_slot_u4()
{
    return W * RING_B * 32 + ws_sz_u4(W) + 8 * MT * WS_XRS;
}
template <int MT, int W>
size_t ws_smem_bytes()
{
    return (size_t)WS_NB * ws_slot_u4<MT, W>() * 16 + 2 * WS_NB * sizeof(uint64_t);
}

#if QG_INT4_BULK
/* an arrival on bar once this thread's earlier cp.async copies have landed (counted in the init count) */
__device__ __forceinline__ void cp_async_mbar_arrive(uint32_t bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
#endif

template <int MT, int PAIR, int W>
__global__ void __launch_bounds__((W + 1) * 32, W == WARPS ? 4 : 2) w4a16_tc_ws_kernel(const uint4 *__restrict__ qw, const uint32_t *__restrict__ sz,
                                                                         const uint16_t *__restrict__ x, int M, dev_shape sh, int splits,
                                                                         float *__restrict__ part, unsigned *__restrict__ cnt,
                                                                         float *__restrict__ y32, uint16_t *__restrict__ y16, int R)
{
#if QG_INT4_BULK
    constexpr int B = RING_B, NB = WS_NB, XR = 8 * MT, SLOT = ws_slot_u4<MT, W>();
    constexpr int O_SZ = W * B * 32, O_X = O_SZ + ws_sz_u4(W);
    extern __shared__ uint4 ws_smem[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#ifdef QG_CUDA_MUTANT_INT4_RING_W
    const int s = blockIdx.z, m0 = blockIdx.x * 8 * MT, nt0 = blockIdx.y * WARPS; /* the n-tiles of a 4-warp CTA whatever W */
#else
    const int s = blockIdx.z, m0 = blockIdx.x * 8 * MT, nt0 = blockIdx.y * W;
#endif
    const int c0 = (int)((long long)sh.kc * s / splits), c1 = (int)((long long)sh.kc * (s + 1) / splits);
    const int ng = (c1 - c0 + B - 1) / B;
    const int Rc = min(R, M - m0); /* rows of x this CTA copies; the others stay zero */
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(ws_smem);
    const uint32_t bars = sbase + 16u * (uint32_t)(NB * SLOT); /* full i: bars + 8 i, empty i: bars + 8 (NB + i) */
    auto grp_of = [&](int c, int j) { return min((4 * c + j) >> sh.gshift, sh.G - 1); };
    for (int i = threadIdx.x; i < NB * XR * WS_XRS; i += (W + 1) * 32) {
        const int u = i % (XR * WS_XRS);
        if (u / WS_XRS >= Rc) ws_smem[(i / (XR * WS_XRS)) * SLOT + O_X + u] = make_uint4(0, 0, 0, 0);
    }
    if (threadIdx.x == 0) {
        for (int i = 0; i < NB; i++) {
            mbar_init(bars + 8u * i, 33);
            mbar_init(bars + 8u * (NB + i), W * 32);
        }
        mbar_init_fence();
    }
    __syncthreads();

    if (warp == W) { /* the producer */
        const uint32_t sz_bytes = 4u * (uint32_t)min(W * ROWS, sh.Np - nt0 * ROWS);
        const int ntl = min(nt0 + min(lane, W - 1), sh.nt - 1); /* lanes < W: warp lane's n-tile (clamped) */
        for (int gi = 0; gi < ng; gi++) {
            const int slot = gi % NB, cb = c0 + gi * B, n = min(B, c1 - cb);
            if (gi >= NB) mbar_wait(bars + 8u * (uint32_t)(NB + slot), (uint32_t)(gi / NB - 1) & 1u);
            const uint32_t full = bars + 8u * (uint32_t)slot, sb = sbase + 16u * (uint32_t)(slot * SLOT);
            const int qf = grp_of(cb, 0), nq = grp_of(cb + n - 1, 3) - qf + 1;
            /* x rows by bulk copies (one lane a row: n chunks, 128 n contiguous bytes) where the group's
             * columns are inside K; else cp.async with the columns past K zero-filled */
            const bool xbulk = (cb + n) * CHUNK <= sh.K;
            if (lane == 0)
                mbar_expect_tx(full, (uint32_t)(W * n * 512) + (uint32_t)nq * sz_bytes + (xbulk ? (uint32_t)(Rc * n * 128) : 0u));
            __syncwarp();
            if (lane < W)
                bulk_copy(sb + 16u * (uint32_t)(lane * B * 32), qw + ((size_t)ntl * sh.kc + cb) * 32, 512u * (uint32_t)n, full);
            else if (lane >= 8 && lane < 16) {
                if (lane - 8 < nq)
                    bulk_copy(sb + 16u * (uint32_t)O_SZ + 4u * (uint32_t)((lane - 8) * W * ROWS),
                                  sz + (size_t)(qf + lane - 8) * sh.Np + (size_t)nt0 * ROWS, sz_bytes, full);
            } else if (lane >= 16 && xbulk && lane - 16 < Rc)
                bulk_copy(sb + 16u * (uint32_t)(O_X + (lane - 16) * WS_XRS), x + (size_t)(m0 + lane - 16) * sh.K + (size_t)cb * CHUNK,
                              128u * (uint32_t)n, full);
            if (!xbulk) /* lane = (chunk k, 8 columns u) of every row */
                for (int xrow = 0; xrow < Rc; xrow++) {
                    const int k = lane >> 3, col = (cb + k) * CHUNK + 8 * (lane & 7);
                    const bool ok = k < n && col < sh.K;
                    cp_async16(sb + 16u * (uint32_t)(O_X + xrow * WS_XRS + lane), ok ? (const void *)(x + (size_t)(m0 + xrow) * sh.K + col) : (const void *)x,
                               ok ? 16 : 0);
                }
            cp_async_mbar_arrive(full);
        }
        asm volatile("cp.async.wait_all;\n" ::: "memory");
        return;
    }

    const int nt = nt0 + warp, gr = lane >> 2, t = lane & 3;
    w4a16_acc<MT> acc;
    acc_init<MT>(acc);
    for (int gi = 0; gi < ng; gi++) {
        const int slot = gi % NB, cf = c0 + gi * B;
        mbar_wait(bars + 8u * (uint32_t)slot, (uint32_t)(gi / NB) & 1u);
        const uint4 *sl = ws_smem + (size_t)slot * SLOT;
        const uint4 *cw = sl + warp * B * 32 + lane; /* the lane's codes of chunk cf */
        const int qf = grp_of(cf, 0);
        const uint32_t *zs = reinterpret_cast<const uint32_t *>(sl + O_SZ) + warp * ROWS + gr; /* row gr, group qf */
        const uint4 *xs = sl + O_X;
        constexpr int GW = W * ROWS; /* words a group */
        if (PAIR != 0 && acc.cur >= 0 && ((PAIR == 2 && (cf & 1) == 0 && cf + 3 < c1 && (cf >> 1) + 1 <= sh.G - 1) ||
                                          (PAIR == 1 && cf + 3 < c1 && cf + 3 <= sh.G - 1)))
            acc_flush<MT>(acc); /* the pairs below start with the open group flushed */
        if (PAIR == 2 && B == 4 && (cf & 1) == 0 && cf + 3 < c1 && (cf >> 1) + 1 <= sh.G - 1) {
            pair_mma_x<MT, 2, 8, 0, 4, WS_XRS>(acc, cf >> 1, xs, cw, zs[0], zs[8], zs[GW], zs[GW + 8], gr, t);
        } else if (PAIR == 1 && B == 4 && cf + 3 < c1 && cf + 3 <= sh.G - 1) {
            pair_mma_x<MT, 1, 8, 0, 4, WS_XRS>(acc, cf, xs, cw, zs[0], zs[8], zs[GW], zs[GW + 8], gr, t);
            acc_flush<MT>(acc);
            pair_mma_x<MT, 1, 8, 0, 4, WS_XRS>(acc, cf + 2, xs + 16, cw + 64, zs[2 * GW], zs[2 * GW + 8], zs[3 * GW], zs[3 * GW + 8], gr, t);
        } else {
#pragma unroll
            for (int k = 0; k < B; k++) {
                const int c = cf + k;
                if (c >= c1) break;
                const uint4 *st = xs + k * 8;
                const uint4 w = cw[32 * k];
                const uint32_t *z0 = zs + (grp_of(c, 0) - qf) * GW, *z2 = zs + (grp_of(c, 2) - qf) * GW;
                const uint4 zw = make_uint4(z0[0], z0[8], z2[0], z2[8]);
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    uint4 xc[MT];
#pragma unroll
                    for (int i = 0; i < MT; i++) xc[i] = st[h * 4 + (8 * i + gr) * WS_XRS + t];
                    half_mma<MT>(acc, c, h, w, zw, xc, sh);
                }
            }
        }
        mbar_arrive(bars + 8u * (uint32_t)(NB + slot)); /* this thread is done with the slot (every consumer thread arrives) */
    }
    if (nt >= sh.nt) return;
    if (acc.cur >= 0) acc_flush<MT>(acc);
    tile_store<MT>(acc.tot, nt, s, m0, M, sh, splits, part, cnt, y32, y16, lane, blockIdx.x);
#endif
}

/* ---- M > 16: CTA tiles with every operand staged in shared memory ----
 * A CTA owns NT = 2 WN n-tiles (32 WN output channels) and 32 WM rows of x; its WN x WM warps each own
 * 2 n-tiles x 4 m-tiles (32 channels x 32 rows), so a decoded A fragment feeds 4 mma and a B fragment 2.
 * Per 64-column chunk the CTA copies with cp.async, into a ring of gm_cfg::STAGES stages: the NT n-tiles' code
 * words (the tc16 layout: per n-tile 512 contiguous bytes, the lanes' A fragments), their sz slots (as in
 * the ring kernel) and the chunk's x [half][row][t] (16 bytes: the 8 columns 32 half + 8t .. + 7 of a row,
 * which is a lane's B fragments of both k-tiles of the half). Each warp then runs exactly the operation
 * sequence of half_mma per output: the same k-tiles in the same order, the same fragment slots, the same
 * group flushes t = RN32(t + RN32(s p)); a group's first mma takes C = +0 instead of a partial set to +0
 * (same value). Weights and x are read from L2 once per CTA tile instead of once per warp.
 *
 * Split-K: SEQ = false: the CTA does split blockIdx.z and ends through tile_store's workspace and
 * turnstile. SEQ = true (enough CTAs without splitting): the CTA walks the splits of splits_of(N, K) one
 * after the other over all of K; at a split's end its total p_s joins y = ((p_0 + p_1) + p_2) + ... in
 * registers (256 x 32 tiles, one CTA an SM) or in shared memory (128 x 64 tiles, two CTAs an SM), the
 * order of tile_store, with no workspace. Both give the same bits for every output.
 * QG_CUDA_MUTANT_INT4_GEMM_STALE (a GPU-machine mutant like the one in tile_store) starts every group after
 * the first from the previous group's partial instead of +0: gpu.int4_cuda.gemm fails on it. */
constexpr int GM_TN = 2, GM_TM = 4;

template <int WN, int WM, int OCC = 1>
struct gm_cfg {
    static constexpr int NT = GM_TN * WN, ROWS_X = 8 * GM_TM * WM, THREADS = 32 * WN * WM;
    static constexpr int W = 0, SZ = NT * 32, X = SZ + NT * 8, STG = X + 2 * ROWS_X * 4; /* in uint4 */
    /* OCC = 1: 8 stages, 104 to 112 KB, one CTA per SM at 156 to 192 registers; OCC = 2 (the workspace
     * path's 128 x 64 tiles): 6 stages, 78 KB and at most 128 registers, two CTAs per SM */
    static constexpr int STAGES = OCC == 2 ? 6 : 8;
    static constexpr size_t SMEM = (size_t)STAGES * STG * 16;
    /* SEQ at two CTAs an SM keeps its running sum over splits in shared memory after the ring (each
     * thread its own 4 TN TM floats, thread-minor: no bank conflicts), so that the kernel fits 128
     * registers; a split's end reads, adds and writes them once */
    static constexpr bool YS_SMEM = OCC == 2;
    static constexpr size_t SMEM_SEQ = SMEM + (YS_SMEM ? (size_t)GM_TN * GM_TM * 4 * THREADS * 4 : 0);
};


/* CTAs per SM: 2 for the 128 x 64 tiles (M > 32; workspace path 0.65 -> 0.73x cuBLAS at M = 64 on
 * 8192 x 8192, H100; the SEQ kernel with its running sum in shared memory), 1 for the 256 x 32 tiles (two
 * CTAs measured 3-7% slower at M = 17..32). Same operations per output either way. */
constexpr int gm_occ(int WN, int WM) { return WN == 4 && WM == 2 ? 2 : 1; }

template <int WN, int WM, bool SEQ, int OCC = 1>
__global__ void __launch_bounds__(gm_cfg<WN, WM, OCC>::THREADS, OCC)
    w4a16_tc_gemm_kernel(const uint4 *__restrict__ qw, const uint32_t *__restrict__ sz, const uint16_t *__restrict__ x, int M, dev_shape sh,
                         int splits, float *__restrict__ part, unsigned *__restrict__ cnt, float *__restrict__ y32,
                         uint16_t *__restrict__ y16)
{
    using C = gm_cfg<WN, WM, OCC>;
    constexpr int TN = GM_TN, TM = GM_TM, ST = C::STAGES;
    extern __shared__ uint4 gm_smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gr = lane >> 2, t = lane & 3;
    const int wn = warp % WN, wm = warp / WN;
    const int nb0 = blockIdx.y * C::NT, m0 = blockIdx.x * C::ROWS_X;
    const int s0 = SEQ ? 0 : (int)blockIdx.z;
    const int c_beg = (int)((long long)sh.kc * s0 / splits);
    const int c_fin = SEQ ? sh.kc : (int)((long long)sh.kc * (s0 + 1) / splits);
    const uint32_t base = (uint32_t)__cvta_generic_to_shared(gm_smem);

    /* The copies of a chunk: thread tid makes copies u = tid + k THREADS (static trip counts; the
     * per-thread source pointers are set once, a chunk adds c to them). Code word u: n-tile u >> 5, lane
     * u & 31. sz word u: slot (n-tile u >> 5, gr (u >> 2) & 7), word u & 3: row gr + 8 (u & 1), group of
     * k-tile 2 ((u >> 1) & 1). x unit u: half u / (4 ROWS_X), row (u >> 2) % ROWS_X, 8 columns at 8 (u & 3).
     * n-tiles past the last copy the last one's words (never stored); rows past M and columns past K are
     * zero-filled. */
    constexpr int KW = (C::NT * 32 + C::THREADS - 1) / C::THREADS, KX = 2 * C::ROWS_X * 4 / C::THREADS;
    static_assert(2 * C::ROWS_X * 4 % C::THREADS == 0, "x copies: whole rounds");
    const uint4 *wsrc[KW];
    const uint32_t *zsrc[KW];
    const uint16_t *xsrc[KX];
    int xcol[KX];
    bool xrow[KX];
#pragma unroll
    for (int k = 0; k < KW; k++) {
        const int u = tid + k * C::THREADS;
        const int ntc = min(nb0 + (u >> 5), sh.nt - 1);
        wsrc[k] = qw + (size_t)ntc * sh.kc * 32 + (u & 31);
        zsrc[k] = sz + ntc * ROWS + ((u >> 2) & 7) + 8 * (u & 1);
    }
#pragma unroll
    for (int k = 0; k < KX; k++) {
        const int u = tid + k * C::THREADS;
        const int m = m0 + (u >> 2) % C::ROWS_X;
        xrow[k] = m < M;
        xcol[k] = 32 * (u / (C::ROWS_X * 4)) + 8 * (u & 3);
        xsrc[k] = x + (size_t)(m < M ? m : 0) * sh.K + xcol[k];
    }
    const int zk = 2 * ((tid >> 1) & 1); /* the same for every k: THREADS is a multiple of 4 */
    auto issue = [&](int c, int slot) {
        const uint32_t b = base + (uint32_t)(slot * C::STG) * 16u;
        const size_t zoff = (size_t)min((4 * c + zk) >> sh.gshift, sh.G - 1) * sh.Np;
#pragma unroll
        for (int k = 0; k < KW; k++) {
            const int u = tid + k * C::THREADS;
            if (C::NT * 32 % C::THREADS != 0 && u >= C::NT * 32) break;
            cp_async16(b + 16u * (C::W + u), wsrc[k] + (size_t)c * 32, 16);
            cp_async4(b + 16u * C::SZ + 4u * u, zsrc[k] + zoff);
        }
#pragma unroll
        for (int k = 0; k < KX; k++) {
            const int u = tid + k * C::THREADS;
            const bool ok = xrow[k] && c * CHUNK + xcol[k] < sh.K;
            cp_async16(b + 16u * (C::X + u), ok ? (const void *)(xsrc[k] + c * CHUNK) : (const void *)x, ok ? 16 : 0);
        }
    };

    constexpr bool YS = SEQ && C::YS_SMEM;
    float *const ysm = reinterpret_cast<float *>(gm_smem + (size_t)ST * C::STG) + tid; /* [(j TM + i) 4 + e] x THREADS */
    float yv[TN][TM][4], tot[TN][TM][4], par[TN][TM][4];
    float sa[TN], sb[TN];
    uint32_t za[TN], zbn[TN];
#pragma unroll
    for (int j = 0; j < TN; j++) {
        sa[j] = sb[j] = 0.0f;
        za[j] = zbn[j] = 0u;
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
            for (int e = 0; e < 4; e++) yv[j][i][e] = tot[j][i][e] = par[j][i][e] = 0.0f;
    }
    int cur = -1, sp = s0;
    int nxt = SEQ ? (int)((long long)sh.kc / splits) : c_fin; /* the next split boundary (SEQ) */

    auto flush = [&]() {
#pragma unroll
        for (int j = 0; j < TN; j++)
#pragma unroll
            for (int i = 0; i < TM; i++) {
                tot[j][i][0] = __fadd_rn(tot[j][i][0], __fmul_rn(sa[j], par[j][i][0]));
                tot[j][i][1] = __fadd_rn(tot[j][i][1], __fmul_rn(sa[j], par[j][i][1]));
                tot[j][i][2] = __fadd_rn(tot[j][i][2], __fmul_rn(sb[j], par[j][i][2]));
                tot[j][i][3] = __fadd_rn(tot[j][i][3], __fmul_rn(sb[j], par[j][i][3]));
            }
    };
    /* the end of split sp: y = p_0, then y = y + p_s (tile_store's order) */
    auto join = [&]() {
#pragma unroll
        for (int j = 0; j < TN; j++)
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    if constexpr (YS) {
                        float *q = ysm + (size_t)((j * TM + i) * 4 + e) * C::THREADS;
                        *q = sp == 0 ? tot[j][i][e] : __fadd_rn(*q, tot[j][i][e]);
                    } else {
                        yv[j][i][e] = sp == 0 ? tot[j][i][e] : __fadd_rn(yv[j][i][e], tot[j][i][e]);
                    }
                    tot[j][i][e] = 0.0f;
                }
    };

    const int nk = c_fin - c_beg;
#pragma unroll 1
    for (int p = 0; p < ST - 1; p++) {
        if (p < nk) issue(c_beg + p, p);
        cp_async_commit();
    }
    for (int it = 0; it < nk; it++) {
        const int c = c_beg + it;
        cp_async_wait<ST - 2>(); /* this thread's copies of chunk c have landed */
        __syncthreads();         /* everyone's have; the slot refilled next was consumed by every warp */
        if (it + ST - 1 < nk) issue(c + ST - 1, (it + ST - 1) % ST);
        cp_async_commit();
        if (SEQ && c == nxt) {
            if (cur >= 0) flush();
            cur = -1;
            join();
            sp++;
            nxt = (int)((long long)sh.kc * (sp + 1) / splits);
        }
        const uint4 *st = gm_smem + (size_t)(it % ST) * C::STG;
        uint4 w[TN], zw[TN];
#pragma unroll
        for (int j = 0; j < TN; j++) {
            w[j] = st[C::W + (wn * TN + j) * 32 + lane];
            zw[j] = st[C::SZ + (wn * TN + j) * 8 + gr];
        }
#pragma unroll
        for (int h = 0; h < 2; h++) {
            uint4 xc[TM];
#pragma unroll
            for (int i = 0; i < TM; i++) xc[i] = st[C::X + (h * C::ROWS_X + wm * 8 * TM + 8 * i + gr) * 4 + t];
            /* one group lookup a half, as in half_mma */
            const int grp = min((c * 4 + 2 * h) >> sh.gshift, sh.G - 1);
            const bool fresh = grp != cur;
            if (fresh) {
                if (cur >= 0) flush();
                cur = grp;
#pragma unroll
                for (int j = 0; j < TN; j++) group_words(h == 0 ? zw[j].x : zw[j].z, h == 0 ? zw[j].y : zw[j].w, sa[j], sb[j], za[j], zbn[j]);
            }
#pragma unroll
            for (int jj = 0; jj < 2; jj++) {
                const int kj = 2 * h + jj;
#pragma unroll
                for (int j = 0; j < TN; j++) {
                    const uint32_t word = kj == 0 ? w[j].x : kj == 1 ? w[j].y : kj == 2 ? w[j].z : w[j].w;
                    uint32_t A[4];
                    decode_ktile(word, za[j], zbn[j], A);
#pragma unroll
                    for (int i = 0; i < TM; i++) {
                        const uint32_t b0 = jj ? xc[i].z : xc[i].x, b1 = jj ? xc[i].w : xc[i].y;
#ifdef QG_CUDA_MUTANT_INT4_GEMM_STALE
                        if (jj == 0 && fresh && cur < 0) mma16816_c0(par[j][i], A[0], A[1], A[2], A[3], b0, b1);
#else
                        if (jj == 0 && fresh) mma16816_c0(par[j][i], A[0], A[1], A[2], A[3], b0, b1);
#endif
                        else mma16816(par[j][i], A, b0, b1);
                    }
                }
            }
        }
    }
    cp_async_wait<0>();
    if (cur >= 0) flush();
    if (SEQ) join();
    if constexpr (YS) {
#pragma unroll
        for (int j = 0; j < TN; j++)
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int e = 0; e < 4; e++) yv[j][i][e] = ysm[(size_t)((j * TM + i) * 4 + e) * C::THREADS];
    }
#pragma unroll
    for (int j = 0; j < TN; j++) {
        const int nt = nb0 + wn * TN + j;
        if (nt >= sh.nt) continue;
        const int mw = m0 + wm * 8 * TM;
        if (SEQ) tile_store<TM>(yv[j], nt, 0, mw, M, sh, 1, nullptr, nullptr, y32, y16, lane, 0);
        else tile_store<TM>(tot[j], nt, s0, mw, M, sh, splits, part, cnt, y32, y16, lane, (int)blockIdx.x * WM + wm);
    }
}

/* M > 16 on sm_90a: warpgroup MMA. wgmma.m64nBNk16 (fp16 in, float32 accumulate) with A, the weights, from
 * registers and B, the BN rows of x, from shared memory. The register A fragment of a warp of the warpgroup
 * is the mma.sync m16n8k16 A fragment of its 16 channels (the tc16 layout and decode_ktile unchanged) and
 * its D fragment is MT = BN / 8 mma.sync D fragments side by side (tile_store unchanged). An output's
 * operations are those of half_mma: the same k-tiles in the same order, each one k16 block D = A B + D
 * from the exact fp16 integers q - z and x, the group partial started at +0 and flushed as
 * t = RN32(t + RN32(s p)), the splits joined in order. That wgmma's k16 block rounds exactly as
 * mma.sync's (same inputs, same accumulator, same float32 result) is measured by gpu.tc_probe.cuda on
 * the GPU that runs it (its crafted blocks through wgmma.m64n8k16 must give mma.sync's bits on every
 * output); the batch-invariance tests compare rows of this kernel with the same rows from the M <= 16
 * kernels.
 *
 * CTA: WG warpgroups, warp w owns n-tile w of the CTA's 4 WG (channels 16 w .. 16 w + 15) and all BN rows;
 * a cp.async ring of STAGES chunks as in w4a16_tc_gemm_kernel (codes, sz words, x). x of a chunk is kept
 * in the no-swizzle K-major layout of the tensor cores, in the k order of the tc16 layout: there the
 * 16 k of k-tile kt = 2 h + jj are, for k = 8 kh + 2 t + e (kh, e in {0, 1}, t < 4), the columns
 * 32 h + 8 t + 4 jj + 2 kh + e (the x fragments the mma.sync kernels load whole as 16-byte pieces).
 * Core matrix q' = 2 kt + kh (8 rows x 16 bytes, its 4-byte slot t holding k = 8 kh + 2 t, + 1) thus
 * takes word j2 = 2 jj + kh of the pieces (columns 8 p .. 8 p + 7) p = 4 h + t: a 4 x 4 transpose of
 * 4-byte words within each half, done by the copies (4 bytes each). Core matrix q' of rows 8 g .. 8 g + 7
 * is at byte (8 g + q') 128, so those of k-tile kt start at 256 kt, 128 bytes apart along K (LBO) and
 * 1024 bytes apart along the rows (SBO). With XQ, x comes as that image (w4a16_order_x: 1 KB a chunk and
 * 8 rows), so one 16-byte copy a piece, consecutive lanes on consecutive bytes. Each thread's copies land
 * (cp.async.wait_group), then a proxy fence makes them visible to the tensor cores' async reads, then the
 * CTA barrier. A warpgroup waits for all its wgmmas (wait_group 0) before it reads a group's partials; a
 * group's first block starts from nothing (scale-d 0), so no partial is ever zeroed. DEFER (the
 * default): at the end of a chunk it waits only for the chunks before (wait_group 2: this chunk's two
 * commit groups may still run), so the next chunk's barrier, copies and decode overlap with them, and the
 * ring refills the slot read two chunks back (ST - 2 chunks in flight). Else it waits for all at the end of
 * every chunk and the slot read one chunk back is refilled. ptxas keeps the A registers of in-flight
 * wgmmas live (it reports a serialization where it cannot; this kernel has none).
 * Built only for sm_90a; elsewhere the kernel is empty and the host never launches it
 * (g_int4_wgmma_built reads 0). */
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define QG_INT4_WGMMA_BUILT 1
#else
#define QG_INT4_WGMMA_BUILT 0
#endif

__device__ int g_int4_wgmma_built = QG_INT4_WGMMA_BUILT;

template <int WG, int BN, int OCC>
struct wg_cfg {
    static constexpr int NT = 4 * WG, THREADS = 128 * WG, MT = BN / 8;
    static constexpr int W = 0, SZ = W + NT * 32, X = SZ + NT * 8, STG = X + BN * 8; /* in uint4 */
    /* 128 rows: 21 KB a stage, 7 stages and the 64 KB running sum within the 227 KB an SM gives a CTA */
    static constexpr int STAGES = OCC == 2 ? 6 : BN == 128 ? 7 : 8;
    static constexpr size_t SMEM = (size_t)STAGES * STG * 16;
    /* SEQ: the running sum over splits after the ring, thread-minor (4 MT floats a thread) */
    static constexpr size_t SMEM_SEQ = SMEM + (size_t)MT * 4 * THREADS * 4;
};

#if QG_INT4_WGMMA_BUILT
/* 4 bytes, the bytes past `bytes` (0 or 4) zero-filled */
__device__ __forceinline__ void cp_async4z(uint32_t dst, const void *src, int bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
#endif

template <int WG, int BN, bool SEQ, int OCC, bool DEFER, bool XQ>
__global__ void __launch_bounds__(128 * WG, OCC)
    w4a16_tc_wg_kernel(const uint4 *__restrict__ qw, const uint32_t *__restrict__ sz, const uint16_t *__restrict__ x, int M, dev_shape sh,
                       int splits, float *__restrict__ part, unsigned *__restrict__ cnt, float *__restrict__ y32,
                       uint16_t *__restrict__ y16)
{
#if QG_INT4_WGMMA_BUILT
    using C = wg_cfg<WG, BN, OCC>;
    constexpr int MT = C::MT, ST = C::STAGES;
    /* chunks copied ahead: DEFER refills the slot read two chunks back (its wgmmas are complete after the
     * previous chunk's wait_group 2), else the slot read one chunk back (complete after its wait_group 0) */
    constexpr int AHEAD = DEFER ? ST - 2 : ST - 1;
    extern __shared__ __align__(128) uint4 wg4_smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gr = lane >> 2;
    const int nb0 = blockIdx.y * C::NT, m0 = blockIdx.x * BN;
    const int s0 = SEQ ? 0 : (int)blockIdx.z;
    const int c_beg = (int)((long long)sh.kc * s0 / splits);
    const int c_fin = SEQ ? sh.kc : (int)((long long)sh.kc * (s0 + 1) / splits);
    const uint32_t base = (uint32_t)__cvta_generic_to_shared(wg4_smem);

    /* copies of a chunk: code word and sz word tid (n-tile tid >> 5, as in w4a16_tc_gemm_kernel), x pieces
     * u = tid + k THREADS (row r = u >> 3, columns 8 q .. 8 q + 7, q = u & 7) as four 4-byte copies (see
     * the layout above); past the last n-tile the last one's words (never stored), rows past M and columns
     * past K zero-filled */
    constexpr int KX = BN * 8 / C::THREADS;
    static_assert(C::NT * 32 == C::THREADS && BN * 8 % C::THREADS == 0, "whole rounds of copies");
    const int ntc = min(nb0 + warp, sh.nt - 1);
    const uint4 *wsrc = qw + (size_t)ntc * sh.kc * 32 + lane;
    const uint32_t *zsrc = sz + ntc * ROWS + ((tid >> 2) & 7) + 8 * (tid & 1);
    const int zk = 2 * ((tid >> 1) & 1);
    const uint16_t *xsrc[KX];
    int xcol[KX];
    bool xrow[KX];
    uint32_t xdst[KX];
#pragma unroll
    for (int k = 0; k < KX; k++) {
        /* XQ: piece u of the chunk's shared-memory image (row r = (u & 7) + 8 (u >> 6) of core matrix
         * (u >> 3) & 7) from piece u of its BN / 8 contiguous 1 KB blocks in x' (w4a16_order_x): in order on
         * both sides; else 8 lanes copy one row's 8 pieces (one 4-byte slot each a copy) */
        const int u = tid + k * C::THREADS;
        const int r = XQ ? (u & 7) + 8 * (u >> 6) : u >> 3, q = XQ ? (u >> 3) & 7 : u & 7, m = m0 + r;
        xrow[k] = m < M;
        xcol[k] = 8 * q;
        if (XQ) {
            xsrc[k] = x + ((size_t)((m0 >> 3) + (u >> 6)) * sh.kc * 64 + (u & 63)) * 8;
            xdst[k] = 16u * (uint32_t)(C::X + u);
        } else {
            xsrc[k] = x + (size_t)(m < M ? m : 0) * sh.K + xcol[k];
            xdst[k] = 16u * (uint32_t)(C::X + ((r >> 3) * 8 + 4 * (q >> 2)) * 8 + (r & 7)) + 4u * (uint32_t)(q & 3);
        }
    }
    /* the copies go chunk after chunk (c_beg, c_beg + 1, ...): running source pointers, one add a chunk */
    const uint4 *wnext = wsrc + (size_t)c_beg * 32;
    const uint16_t *xnext[KX];
#pragma unroll
    for (int k = 0; k < KX; k++) xnext[k] = xrow[k] ? xsrc[k] + (size_t)c_beg * (XQ ? 512 : CHUNK) : x; /* rows past M: x, never read */
    int cnext = c_beg, zg = min((4 * c_beg + zk) >> sh.gshift, sh.G - 1);
    const uint32_t *znext = zsrc + (size_t)zg * sh.Np;
    auto issue = [&](int slot) {
        const int c = cnext++;
        const uint32_t b = base + (uint32_t)(slot * C::STG) * 16u;
        cp_async16(b + 16u * (C::W + tid), wnext, 16);
        wnext += 32;
        const int g = min((4 * c + zk) >> sh.gshift, sh.G - 1); /* the group of this thread's sz word */
        znext += (size_t)(unsigned)(g - zg) * (unsigned)sh.Np; /* g never decreases */
        zg = g;
        cp_async4(b + 16u * C::SZ + 4u * tid, znext);
#pragma unroll
        for (int k = 0; k < KX; k++) {
            const uint16_t *xs = xnext[k];
            xnext[k] += xrow[k] ? (XQ ? 512 : CHUNK) : 0;
            if (XQ) { /* x' holds zeros past K: one 16-byte copy a piece, 1 KB a chunk and 8 rows */
                cp_async16(b + xdst[k], xs, xrow[k] ? 16 : 0);
                continue;
            }
            /* K is a multiple of 8, so a piece is in or out whole; an empty copy reads nothing and names
             * x[0 .. 7] (K >= 8) */
            const bool ok = xrow[k] && c * CHUNK + xcol[k] < sh.K;
            const uint16_t *src = ok ? xs : x;
            const int nb = ok ? 4 : 0;
#pragma unroll
            for (int j2 = 0; j2 < 4; j2++) cp_async4z(b + xdst[k] + 128u * j2, src + 2 * j2, nb);
        }
    };
    /* descriptor of k-tile 0 of slot 0: start >> 4, LBO 128 >> 4, SBO 1024 >> 4, no swizzle; slot s and
     * k-tile kt add (s STG 16 + 256 kt) >> 4 to the start field (shared addresses stay below 2^18) */
    const uint64_t desc0 = (uint64_t)(((base + 16u * C::X) & 0x3FFFFu) >> 4) | ((uint64_t)(128 >> 4) << 16) | ((uint64_t)(1024 >> 4) << 32);

    float *const ysm = reinterpret_cast<float *>(wg4_smem + (size_t)ST * C::STG) + tid; /* [(i 4 + e)] x THREADS */
    float tot[MT][4], par[MT][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) tot[i][e] = par[i][e] = 0.0f;
    float sa = 0.0f, sb = 0.0f;
    uint32_t za = 0u, zbn = 0u;
    int cur = -1, sp = s0;
    int nxt = SEQ ? (int)((long long)sh.kc / splits) : c_fin;
    /* every wgmma of this warpgroup complete, and the partials read only after that */
    auto wait_par = [&]() {
        qg_wg_wait0();
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int e = 0; e < 4; e++) qg_wg_pin(par[i][e]);
    };
    auto join = [&]() {
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float *q = ysm + (size_t)(i * 4 + e) * C::THREADS;
                *q = sp == 0 ? tot[i][e] : __fadd_rn(*q, tot[i][e]);
                tot[i][e] = 0.0f;
            }
    };

    const int nk = c_fin - c_beg;
#pragma unroll 1
    for (int p = 0; p < AHEAD; p++) {
        if (p < nk) issue(p);
        cp_async_commit();
    }
    for (int it = 0; it < nk; it++) {
        const int c = c_beg + it, slot = it % ST;
        cp_async_wait<AHEAD - 1>(); /* this thread's copies of chunk c have landed */
        fence_proxy_async();          /* ... and are visible to the tensor cores' reads */
        __syncthreads();            /* everyone's have; the slot refilled next is no longer read */
        if (it + AHEAD < nk) issue((it + AHEAD) % ST);
        cp_async_commit();
        if (SEQ && c == nxt) {
            if (DEFER) wait_par();
            if (cur >= 0) group_flush<MT>(tot, par, sa, sb);
            cur = -1;
            join();
            sp++;
            nxt = (int)((long long)sh.kc * (sp + 1) / splits);
        }
        const uint4 *stg = wg4_smem + (size_t)slot * C::STG;
        const uint4 w = stg[C::W + warp * 32 + lane];
        const uint4 zw = stg[C::SZ + warp * 8 + gr];
        const uint64_t dsc = desc0 + (uint64_t)((slot * C::STG * 16) >> 4);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int grp = min((c * 4 + 2 * h) >> sh.gshift, sh.G - 1);
            const bool fresh = grp != cur;
            if (fresh) {
                /* par is read only when no wgmma writes it: the open group's blocks of this chunk's first
                 * half (h = 1), and with DEFER also those of the previous chunk */
                if (DEFER || h == 1) wait_par();
                if (cur >= 0) group_flush<MT>(tot, par, sa, sb);
                cur = grp;
                group_words(h == 0 ? zw.x : zw.z, h == 0 ? zw.y : zw.w, sa, sb, za, zbn);
            }
            /* a new group's first block does not add the old partial (scale-d 0): no zeroing of par */
#ifdef QG_CUDA_MUTANT_INT4_GEMM_STALE
            const int sd = 1; /* every group after the first starts from the previous group's partial */
#else
            const int sd = fresh ? 0 : 1;
#endif
            uint32_t A0[4], A1[4];
            decode_ktile(h == 0 ? w.x : w.z, za, zbn, A0);
            decode_ktile(h == 0 ? w.y : w.w, za, zbn, A1);
#pragma unroll
            for (int i = 0; i < MT; i++)
#pragma unroll
                for (int e = 0; e < 4; e++) qg_wg_pin(par[i][e]);
            qg_wg_fence();
            qg_wgmma_f16<BN>(reinterpret_cast<float(&)[BN / 2]>(par), A0, dsc + (uint64_t)((512 * h) >> 4), sd);
            qg_wgmma_f16<BN>(reinterpret_cast<float(&)[BN / 2]>(par), A1, dsc + (uint64_t)((512 * h + 256) >> 4), 1);
            qg_wg_commit();
        }
        /* DEFER: this chunk's two commit groups may still run; every earlier one is complete */
        if (DEFER) qg_wg_wait2();
        else wait_par();
    }
    cp_async_wait<0>();
    if (DEFER) wait_par();
    if (cur >= 0) group_flush<MT>(tot, par, sa, sb);
    if (SEQ) {
        join();
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int e = 0; e < 4; e++) tot[i][e] = ysm[(size_t)(i * 4 + e) * C::THREADS];
    }
    const int nt = nb0 + warp;
    if (nt >= sh.nt) return;
    if (SEQ) tile_store<MT>(tot, nt, 0, m0, M, sh, 1, nullptr, nullptr, y32, y16, lane, 0);
    else tile_store<MT>(tot, nt, s0, m0, M, sh, splits, part, cnt, y32, y16, lane, (int)blockIdx.x);
#endif
}

/* x (through the act-order permutation where there is one) as the wgmma kernel's shared-memory image
 * of x (XQ): blocks of 8 rows, each block kc chunks of 1 KB, and in chunk c of block b the 16 bytes
 * (q, r) at 16 (8 q + r) are row 8 b + r of core matrix q of the layout above: the columns
 * 64 c + 32 h + 8 t + 4 jj + 2 kh + e (q = 4 h + 2 jj + kh; t < 4 the 4-byte slot, e < 2 its half); zero
 * past K and in the rows past M of the last block. A CTA's chunk of x is thus BN / 8 contiguous 1 KB
 * pieces, copied whole and in order. One thread a 16-byte piece; q runs fastest, so the 8 threads of a
 * row and chunk read its 128 contiguous bytes. */
__global__ void w4a16_order_x(const uint16_t *__restrict__ x, const int32_t *__restrict__ perm, int M, int K, int kc,
                              uint4 *__restrict__ xq)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, per_block = (size_t)kc * 64;
    const size_t b = i / per_block;
    if (b * 8 >= (size_t)M) return;
    const int c = (int)((i % per_block) >> 6), r = (int)((i >> 3) & 7), q = (int)(i & 7);
    const size_t m = b * 8 + (size_t)r;
    const int col0 = c * CHUNK + 32 * (q >> 2) + 4 * ((q >> 1) & 1) + 2 * (q & 1);
    uint32_t v[4];
#pragma unroll
    for (int t = 0; t < 4; t++) {
        uint32_t pr = 0u;
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int col = col0 + 8 * t + e;
            const uint32_t h = m < (size_t)M && col < K ? x[m * (size_t)K + (size_t)(perm != nullptr ? perm[col] : col)] : 0u;
            pr |= h << (16 * e);
        }
        v[t] = pr;
    }
    xq[(b * kc + (size_t)c) * 64 + (size_t)q * 8 + (size_t)r] = make_uint4(v[0], v[1], v[2], v[3]);
}

/* x'[m][k'] = x[m][perm[k']] (act-order). */
__global__ void w4a16_gather_x(const uint16_t *__restrict__ x, const int32_t *__restrict__ perm, int M, int K, uint16_t *xp)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * K) return;
    const size_t m = i / (size_t)K, k = i % (size_t)K;
    xp[i] = x[m * K + (size_t)perm[k]];
}

/* Repack: one thread per qw word (layout in kernels_int4_cuda.h). */
__global__ void w4a16_repack_qw(const uint32_t *__restrict__ q, const int32_t *__restrict__ perm, int N, int K, int kc, size_t words,
                                uint32_t *qw)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= words) return;
    const int j = (int)(i & 3), lane = (int)((i >> 2) & 31);
    const size_t tile = i >> 7;
    const int c = (int)(tile % (size_t)kc), nt = (int)(tile / (size_t)kc);
    const int gr = lane >> 2, t = lane & 3;
    uint32_t word = 0;
    for (int p = 0; p < 8; p++) {
        const int e = 2 * (p & 3) + (p >> 2);
        const int n = nt * ROWS + gr + 8 * ((e >> 1) & 1);
        const int kp = c * CHUNK + 32 * (j >> 1) + 8 * t + 4 * (j & 1) + 2 * (e >> 2) + (e & 1);
        if (n >= N || kp >= K) continue;
        const int k = perm ? perm[kp] : kp;
        const uint32_t code = (q[(size_t)n * (K / 8) + k / 8] >> (4 * (k % 8))) & 0xFu;
        word |= code << (4 * p);
    }
    qw[i] = word;
}

/* Repack of scales and zeros: sz[grp * Np + n] = s16 | (0x6400 + z) << 16; padding rows s = +0, z = 8. */
__global__ void w4a16_repack_sz(const uint16_t *__restrict__ scales, const uint8_t *__restrict__ zeros, int N, int G, int Np,
                                uint32_t *sz)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)G * Np) return;
    const int grp = (int)(i / (size_t)Np), n = (int)(i % (size_t)Np);
    uint32_t s = 0, z = QG_INT4_SYM_ZERO;
    if (n < N) {
        s = scales[(size_t)n * G + grp];
        if (zeros) z = zeros[(size_t)n * G + grp];
    }
    sz[i] = s | ((0x6400u + z) << 16);
}

/* Exact decode in the canonical layout: w[n][k] = (float)(q - z) * s (5-bit x 11-bit: exact). */
__global__ void w4a16_decode_kernel(const uint32_t *__restrict__ q, const uint16_t *__restrict__ scales, const uint8_t *__restrict__ zeros,
                                    const int32_t *__restrict__ g_idx, int N, int K, int g, float *w)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)N * K) return;
    const size_t n = i / (size_t)K, k = i % (size_t)K;
    const int G = K / g;
    const int grp = g_idx ? g_idx[k] : (int)(k / (size_t)g);
    const int code = (int)((q[n * (size_t)(K / 8) + k / 8] >> (4 * (k % 8))) & 0xFu);
    const int z = zeros ? zeros[n * (size_t)G + grp] : QG_INT4_SYM_ZERO;
    w[i] = __fmul_rn(__int2float_rn(code - z), __half2float(__ushort_as_half(scales[n * (size_t)G + grp])));
}

/* Four consecutive codes k .. k + 3 (k a multiple of 4) of a packed int4 row as four s8 bytes: byte i of
 * the row holds codes 2i (low nibble) and 2i + 1; sign extension (n ^ 8) - 8 done in 8 bits; bytes past
 * the row (rb) read as 0, as does the odd-K padding nibble (validated to be 0). */
__device__ __forceinline__ uint32_t int4x4_to_s8x4(const uint8_t *__restrict__ row, int k, int rb)
{
    const int i = k >> 1;
    const uint32_t b0 = i < rb ? row[i] : 0u, b1 = i + 1 < rb ? row[i + 1] : 0u;
    const uint32_t n = b0 | (b1 << 8); /* nibbles k .. k + 3 at bits 0, 4, 8, 12 */
    uint32_t r = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) r |= (((((n >> (4 * j)) & 0xFu) ^ 8u) + 0xF8u) & 0xFFu) << (8 * j);
    return r;
}

__device__ __forceinline__ void mma16832_s8(int32_t (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* Packed int4 x int4 on the int8 tensor cores after unpacking (mma.m16n8k32 s8 x s8 -> s32): integer
 * sums are exact in any order (|term| <= 64, K <= 131071, so |acc| < 2^23), then the reference's epilogue
 * operation by operation. One warp per 16 x 8 tile of outputs (A rows m, B rows n); the fragments of
 * m16n8k32: A register r holds row gr + 8 (r % 2), columns 4 t + 16 (r / 2) .. + 3; B register r holds
 * rows (k) 4 t + 16 r .. + 3 of column gr; D as for m16n8k16. */
__global__ void int4_gemm_packed_kernel(const uint8_t *__restrict__ A, const uint8_t *__restrict__ B, int M, int N, int K, int rb,
                                        const float *__restrict__ sa, int sa_all, const float *__restrict__ sb, int sb_all,
                                        const void *__restrict__ bias, int bias_f16, int relu, int32_t *acc, float *y32,
                                        uint16_t *y16)
{
    const int lane = threadIdx.x & 31, gr = lane >> 2, t = lane & 3;
    const int nt = blockIdx.x * 4 + (threadIdx.x >> 5), mt = blockIdx.y;
    if (nt * 8 >= N) return; /* whole warp */
    const int ma = mt * 16 + gr, mb = ma + 8, nr = nt * 8 + gr;
    const uint8_t *ra = A + (size_t)(ma < M ? ma : 0) * rb, *rbm = A + (size_t)(mb < M ? mb : 0) * rb;
    const uint8_t *rn = B + (size_t)(nr < N ? nr : 0) * rb;
    int32_t d[4] = {0, 0, 0, 0};
    for (int k0 = 0; k0 < K; k0 += 32) {
        const int k1 = k0 + 4 * t, k2 = k1 + 16;
        const uint32_t a0 = ma < M ? int4x4_to_s8x4(ra, k1, rb) : 0u, a1 = mb < M ? int4x4_to_s8x4(rbm, k1, rb) : 0u;
        const uint32_t a2 = ma < M ? int4x4_to_s8x4(ra, k2, rb) : 0u, a3 = mb < M ? int4x4_to_s8x4(rbm, k2, rb) : 0u;
        const uint32_t b0 = nr < N ? int4x4_to_s8x4(rn, k1, rb) : 0u, b1 = nr < N ? int4x4_to_s8x4(rn, k2, rb) : 0u;
        mma16832_s8(d, a0, a1, a2, a3, b0, b1);
    }
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const int m = mt * 16 + gr + 8 * (e >> 1), n = nt * 8 + 2 * t + (e & 1);
        if (m >= M || n >= N) continue;
        const size_t o = (size_t)m * N + n;
        const int32_t s = d[e];
        if (acc) acc[o] = s;
        if (y32 || y16) {
            float v = __fmul_rn(__int2float_rn(s), sb[sb_all ? n : 0]);
            v = __fmul_rn(v, sa[sa_all ? m : 0]);
            if (bias) v = __fadd_rn(v, bias_f16 ? __half2float(__ushort_as_half(((const uint16_t *)bias)[n])) : ((const float *)bias)[n]);
            if (relu && !isnan(v)) v = v > 0.0f ? v : 0.0f;
            if (y32) y32[o] = v;
            if (y16) y16[o] = f32_to_f16_bits(v);
        }
    }
}

/* Probe: one warp per block, fragments loaded by the m16n8k16 layout; BF16: the bf16 form of the
 * instruction (the K-quant min term's), same layout. */
template <bool BF16>
__global__ void mma_probe_kernel(const uint16_t *A, const uint16_t *B, const float *C, float *D, size_t count)
{
    const size_t blk = (size_t)blockIdx.x;
    if (blk >= count) return;
    const int lane = threadIdx.x & 31, gr = lane >> 2, t = lane & 3;
    const uint16_t *a = A + blk * 256, *b = B + blk * 128;
    const float *cc = C + blk * 128;
    float *dd = D + blk * 128;
    uint32_t ar[4], br[2];
    for (int r = 0; r < 4; r++) {
        const int row = gr + 8 * (r & 1), col = 2 * t + 8 * (r >> 1);
        ar[r] = (uint32_t)a[row * 16 + col] | ((uint32_t)a[row * 16 + col + 1] << 16);
    }
    for (int r = 0; r < 2; r++) {
        const int k = 2 * t + 8 * r;
        br[r] = (uint32_t)b[k * 8 + gr] | ((uint32_t)b[(k + 1) * 8 + gr] << 16);
    }
    float d[4];
    for (int e = 0; e < 4; e++) d[e] = cc[(gr + 8 * (e >> 1)) * 8 + 2 * t + (e & 1)];
    if constexpr (BF16)
        mma16816_bf16(d, ar[0], ar[1], ar[2], ar[3], br[0], br[1]);
    else
        mma16816(d, ar[0], ar[1], ar[2], ar[3], br[0], br[1]);
    for (int e = 0; e < 4; e++) dd[(gr + 8 * (e >> 1)) * 8 + 2 * t + (e & 1)] = d[e];
}

/* The same blocks through wgmma.m64n8k16 (A from registers, B from shared memory): one warpgroup a block,
 * each of its 4 warps giving the block's A fragment as its 16 rows, so all four compute the block; warp 0
 * writes it. gpu.tc_probe.cuda compares D with mma_probe_kernel's bit for bit: the M > 16 kernel relies on
 * the two rounding alike. B's 16 x 8 block goes to shared memory as two core matrices (k 0..7, 8..15),
 * 8 rows (j) of 16 bytes each, 128 bytes apart (LBO); SBO unused with one row group. */
__global__ void wgmma_probe_kernel(const uint16_t *A, const uint16_t *B, const float *C, float *D, size_t count)
{
#if QG_INT4_WGMMA_BUILT
    __shared__ __align__(128) uint16_t bs[128];
    const size_t blk = (size_t)blockIdx.x;
    if (blk >= count) return;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gr = lane >> 2, t = lane & 3;
    const uint16_t *a = A + blk * 256, *b = B + blk * 128;
    const float *cc = C + blk * 128;
    /* element (k, j) at core matrix k / 8, row j, position k % 8 */
    { /* tid = 8 k + j */
        const int k = tid >> 3, j = tid & 7;
        bs[(k >> 3) * 64 + j * 8 + (k & 7)] = b[k * 8 + j];
    }
    fence_proxy_async();
    __syncthreads();
    uint32_t ar[4];
    for (int r = 0; r < 4; r++) {
        const int row = gr + 8 * (r & 1), col = 2 * t + 8 * (r >> 1);
        ar[r] = (uint32_t)a[row * 16 + col] | ((uint32_t)a[row * 16 + col + 1] << 16);
    }
    float d[4];
    for (int e = 0; e < 4; e++) d[e] = cc[(gr + 8 * (e >> 1)) * 8 + 2 * t + (e & 1)];
    const uint32_t addr = (uint32_t)__cvta_generic_to_shared(bs);
    const uint64_t desc = (uint64_t)((addr & 0x3FFFFu) >> 4) | ((uint64_t)(128 >> 4) << 16) | ((uint64_t)(128 >> 4) << 32);
    qg_wg_fence();
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(ar[0]), "r"(ar[1]), "r"(ar[2]), "r"(ar[3]), "l"(desc));
    qg_wg_commit();
    qg_wg_wait0();
    if (warp == 0)
        for (int e = 0; e < 4; e++) D[blk * 128 + (gr + 8 * (e >> 1)) * 8 + 2 * t + (e & 1)] = d[e];
#endif
}

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

int splits_of(size_t N, size_t K)
{
    /* As many splits as one round of CTAs of the M <= 8 kernel holds (floor(528 / CTAs per split), so all
     * CTAs are resident at once and none waits for a second round), at most 16 and with at least 4
     * chunks (256 columns) per split; a function of N and K only, never of M or of the device. Up to two
     * rounds where each split keeps at least 32 chunks was measured on the H100: M = 1 gained up to 2% on
     * 28672 x 8192, M = 16 to 64 lost up to 20% (more splits through the workspace at M > 16). */
    const size_t ctas_n = ceil_div(ceil_div(N, ROWS), WARPS), kc = ceil_div(K, CHUNK);
    size_t s = CTA_SLOTS / ctas_n;
    if (s > QG_W4A16_TC_MAX_SPLITS) s = QG_W4A16_TC_MAX_SPLITS;
    if (s > kc / 4) s = kc / 4;
    return s < 1 ? 1 : (int)s;
}

dev_shape dev_shape_of(const qg_w4a16_tc_shape &s)
{
    dev_shape d;
    d.N = (int)s.N;
    d.K = (int)s.K;
    d.Np = (int)s.Np;
    d.G = (int)s.G;
    d.nt = (int)(s.Np / ROWS);
    d.kc = (int)(s.Kp / CHUNK);
    d.gshift = 30;
    if (s.G > 1)
        for (int b = 0; b < 30; b++)
            if (((size_t)16 << b) == s.g) d.gshift = b;
    return d;
}

/* Act-order column order: columns group by group, ascending k within a group (stable counting sort).
 * g_idx is valid (qg_w4a16_validate): every group holds exactly g columns, so group j is k' in
 * [j g, (j + 1) g). */
int perm_of(const qg_w4a16 *L, int32_t *perm)
{
    const size_t G = L->K / L->g;
    size_t *next = (size_t *)malloc(G * sizeof(size_t));
    if (next == nullptr) return QG_ERR_alloc_failed;
    for (size_t j = 0; j < G; j++) next[j] = j * L->g;
    for (size_t k = 0; k < L->K; k++) perm[next[L->g_idx[k]]++] = (int32_t)k;
    free(next);
    return QG_ERR_ok;
}

/* The M <= 16 kernels of MT m-tiles and W warps (the ring kernel's, or the producer-warp kernel's consumer
 * warps), each with its three PAIR instances: 2 (g = 128), 1 (g = 64), else 0 */
template <int MT, int W>
struct ring_family {
    template <int PAIR> static constexpr auto kernel = w4a16_tc_ring_kernel<MT, PAIR, W>;
    static size_t smem() { return ring_smem_bytes<MT, W>(); }
};
template <int MT, int W>
struct ws_family {
    template <int PAIR> static constexpr auto kernel = w4a16_tc_ws_kernel<MT, PAIR, W>;
    static size_t smem() { return ws_smem_bytes<MT, W>(); }
};
/* a family's instance for group shift gshift */
template <typename F>
auto kernel_of(int gshift)
{
    return gshift == 3 ? F::template kernel<2> : gshift == 2 ? F::template kernel<1> : F::template kernel<0>;
}
/* the shared memory of a family's three instances */
template <typename F>
cudaError_t family_attrs()
{
    cudaError_t r = cudaSuccess;
    for (int gshift : {3, 2, 0})
        if (r == cudaSuccess) r = cudaFuncSetAttribute(kernel_of<F>(gshift), cudaFuncAttributeMaxDynamicSharedMemorySize, (int)F::smem());
    return r;
}
/* The ring kernel's dynamic shared memory (above the default 48 KB): raised once per process, before the
 * first launch (not inside a stream capture). */
int ring_attrs_once()
{
    static const cudaError_t e = [] {
        cudaError_t r = family_attrs<ring_family<1, WARPS>>();
        if (r == cudaSuccess) r = family_attrs<ring_family<2, WARPS>>();
        return r;
    }();
    return e == cudaSuccess ? QG_ERR_ok : qg_cuda_fail("w4a16_tc_ring_kernel shared memory", e);
}
/* 1 where two 7-warp CTAs fit an SM's shared memory (104 KB each and the 1 KB the runtime keeps a CTA:
 * sm_90 yes, sm_80 (164 KB) and sm_86/89 (100 KB) no) and their shared memory could be raised; read
 * once. Elsewhere the ring kernel keeps 4 warps, forced or not. */
bool ring7_fits()
{
    static const bool ok = [] {
        int dev = 0, smem = 0;
        if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) != cudaSuccess) {
            (void)cudaGetLastError();
            return false;
        }
        if ((size_t)smem < 2 * (ring_smem_bytes<2, 7>() + 1024)) return false;
        if (family_attrs<ring_family<1, 7>>() != cudaSuccess || family_attrs<ring_family<2, 7>>() != cudaSuccess) {
            (void)cudaGetLastError();
            return false;
        }
        return true;
    }();
    return ok;
}

/* The producer-warp kernel runs at M <= ws_max_m(d, splits) where its sm_90 code is what runs (binary
 * version >= 90); its shared memory raised once. The bound is 8, and 5 where a split is at least 64
 * chunks long and g is 64 or 128 (the paired chains): there the ring kernel is the faster one from M = 6
 * (H200, g = 128, same run: M = 6 / 8 on 28672 x 8192 42.2 / 43.6 -> 40.7 / 40.5 us, 8192 x 28672 38.8 /
 * 40.2 -> 38.3 / 38.6 us), not on shorter splits (8192 x 8192, 4096 x 14336: within -1% to +2%) nor at g
 * = 32 (2-8% slower). With 7 warps a CTA (W, ring_warps) and g = 16 or 32 it is 16: there the producer
 * warp's CTAs (80 KB at two m-tiles, two an SM like the ring's 104 KB) are the faster ones at M = 9..16
 * too (H200, g = 32, 28672 x 8192, same call: M = 12 / 16 68.9 / 68.8 -> 60.7 / 61.2 us; at g = 128
 * 48.5 / 48.0 -> 48.6 / 52.2). QG_CUDA_INT4_WS=m (0 .. 16) sets the bound (0: never), so one binary tests
 * and times both kernels; same operations per output either way. */
#ifndef QG_INT4_WS_MAX_M
#define QG_INT4_WS_MAX_M 8
#endif
int ws_max_m(const dev_shape &d, int splits, int W)
{
    static const int m = [] {
        const char *env = getenv("QG_CUDA_INT4_WS");
        if (env == nullptr || env[0] < '0' || env[0] > '9') return -1;
        const long v = strtol(env, nullptr, 10);
        return v < 0 ? 0 : v > 16 ? 16 : (int)v;
    }();
    if (m >= 0) return m;
    if (W == 7 && d.gshift <= 1) return 16;
    return (d.gshift == 2 || d.gshift == 3) && d.kc / splits >= 64 ? 5 : QG_INT4_WS_MAX_M;
}
bool ws_use()
{
    static const bool use = [] {
        cudaFuncAttributes a;
        if (cudaFuncGetAttributes(&a, w4a16_tc_ws_kernel<1, 0, WARPS>) != cudaSuccess || a.binaryVersion < 90) {
            (void)cudaGetLastError();
            return false;
        }
        cudaError_t r = family_attrs<ws_family<1, WARPS>>();
        if (r == cudaSuccess) r = family_attrs<ws_family<2, WARPS>>();
        if (r == cudaSuccess) r = family_attrs<ws_family<1, 7>>();
        if (r == cudaSuccess) r = family_attrs<ws_family<2, 7>>();
        if (r != cudaSuccess) (void)cudaGetLastError();
        return r == cudaSuccess;
    }();
    return use;
}

/* Warps (n-tiles) a CTA of the ring kernel and consumer warps of the producer-warp kernel: 7 (two CTAs an SM) where that lowers the busiest SM's warps,
 * ceil(CTAs / SMs) x W, below 4 x ceil(CTAs / SMs) with 4-warp CTAs (four an SM), e.g. 28672 rows: 448
 * CTAs of 4 put 16 warps on some SMs and 12 on others, 256 of 7 at most 14 on any. ms: the grid's
 * m-blocks x splits. QG_CUDA_INT4_RING_W=4 or 7 forces one (tests and timing; 7 only where ring7_fits);
 * same operations per output either way: W only decides which CTA computes an n-tile. */
int env_one_of(const char *name, int a, int b);
int ring_warps(int nt, int ms)
{
    if (!ring7_fits()) return WARPS;
    static const int forced = env_one_of("QG_CUDA_INT4_RING_W", 4, 7);
    if (forced != 0) return forced;
    const size_t sms = (size_t)qg_cuda_sm_count();
    const size_t c4 = ceil_div((size_t)nt, (size_t)WARPS) * (size_t)ms, c7 = ceil_div((size_t)nt, (size_t)7) * (size_t)ms;
    return c7 <= 2 * sms && 7 * ceil_div(c7, sms) < (size_t)WARPS * ceil_div(c4, sms) ? 7 : WARPS;
}

template <int MT>
int launch_ring(const qg_w4a16_cuda_weights *w, const uint16_t *x, int M, int splits, float *part, unsigned *cnt, float *y32,
                uint16_t *y16, cudaStream_t st)
{
    int rc = ring_attrs_once();
    if (rc != QG_ERR_ok) return rc;
    (void)ring7_fits(); /* settled at the first launch, as the attributes above */
    const dev_shape d = dev_shape_of(w->s);
    const int R = M < 8 * MT ? M : 8 * MT; /* rows of x of the fullest CTA */
    dim3 grid((unsigned)ceil_div((size_t)M, (size_t)8 * MT), (unsigned)ceil_div((size_t)d.nt, WARPS), (unsigned)splits);
    /* W consumer warps (n-tiles) a CTA, as the ring kernel's: only which CTA computes an n-tile */
    const int W = ring_warps(d.nt, (int)grid.x * splits);
    grid.y = (unsigned)ceil_div((size_t)d.nt, (size_t)W);
    const uint4 *qw = reinterpret_cast<const uint4 *>(w->qw);
    if (M <= ws_max_m(d, splits, W) && ws_use()) {
        const auto kw = W == 7 ? kernel_of<ws_family<MT, 7>>(d.gshift) : kernel_of<ws_family<MT, WARPS>>(d.gshift);
        kw<<<grid, (W + 1) * 32, W == 7 ? ws_smem_bytes<MT, 7>() : ws_smem_bytes<MT, WARPS>(), st>>>(qw, w->sz, x, M, d, splits, part, cnt,
                                                                                                  y32, y16, R);
        cudaError_t e = cudaGetLastError();
        return e == cudaSuccess ? QG_ERR_ok : qg_cuda_fail("w4a16_tc_ws_kernel launch", e);
    }
    /* g = 64, 128: the paired-chain kernels (pair_mma); same operations per output as the other */
    const auto kern = W == 7 ? kernel_of<ring_family<MT, 7>>(d.gshift) : kernel_of<ring_family<MT, WARPS>>(d.gshift);
    kern<<<grid, W * 32, W == 7 ? ring_smem_bytes<MT, 7>() : ring_smem_bytes<MT, WARPS>(), st>>>(qw, w->sz, x, M, d, splits, part, cnt, y32,
                                                                                               y16, R);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? QG_ERR_ok : qg_cuda_fail("w4a16_tc_ring_kernel launch", e);
}

/* The M > 16 kernel's shared memory (above 48 KB), raised once per process and configuration like
 * ring_attrs_once. */
template <int WN, int WM, int OCC>
int gemm_attrs_once()
{
    static const cudaError_t e = [] {
        cudaError_t r = cudaFuncSetAttribute(w4a16_tc_gemm_kernel<WN, WM, false, OCC>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)gm_cfg<WN, WM, OCC>::SMEM);
        if (r == cudaSuccess)
            r = cudaFuncSetAttribute(w4a16_tc_gemm_kernel<WN, WM, true, OCC>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)gm_cfg<WN, WM, OCC>::SMEM_SEQ);
        return r;
    }();
    return e == cudaSuccess ? QG_ERR_ok : qg_cuda_fail("w4a16_tc_gemm_kernel shared memory", e);
}

template <int WN, int WM, int OCC>
int launch_gemm_tc(const qg_w4a16_cuda_weights *w, const uint16_t *x, int M, bool seq, int splits, float *part, unsigned *cnt, float *y32,
                   uint16_t *y16, cudaStream_t st)
{
    using C = gm_cfg<WN, WM, OCC>;
    int rc = gemm_attrs_once<WN, WM, OCC>();
    if (rc != QG_ERR_ok) return rc;
    const dev_shape d = dev_shape_of(w->s);
    dim3 grid((unsigned)ceil_div((size_t)M, (size_t)C::ROWS_X), (unsigned)ceil_div((size_t)d.nt, (size_t)C::NT), seq ? 1u : (unsigned)splits);
    const uint4 *qw = reinterpret_cast<const uint4 *>(w->qw);
    if (seq)
        w4a16_tc_gemm_kernel<WN, WM, true, OCC><<<grid, C::THREADS, C::SMEM_SEQ, st>>>(qw, w->sz, x, M, d, splits, nullptr,
                                                                                                  nullptr, y32, y16);
    else
        w4a16_tc_gemm_kernel<WN, WM, false, OCC><<<grid, C::THREADS, C::SMEM, st>>>(qw, w->sz, x, M, d, splits, part, cnt, y32, y16);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? QG_ERR_ok : qg_cuda_fail("w4a16_tc_gemm_kernel launch", e);
}

/* 1 when the M > 16 calls take the wgmma kernel: this process's device code holds it (an sm_90a build on
 * an sm_90 device; read once from the device, never during a stream capture, where the answer is 0 until
 * then) and QG_CUDA_INT4_WGMMA is not 0 (0: the mma.sync kernel below, so one binary tests and times
 * both; same operations per output either way). */
bool wg_use(cudaStream_t st)
{
    static std::atomic<int> state(-1);
    int s = state.load();
    if (s >= 0) return s == 1;
    const char *env = getenv("QG_CUDA_INT4_WGMMA");
    if (env != nullptr && env[0] == '0') {
        state.store(0);
        return false;
    }
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(st, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone) {
        (void)cudaGetLastError();
        return false;
    }
    int v = 0;
    if (cudaMemcpyFromSymbol(&v, g_int4_wgmma_built, sizeof v) != cudaSuccess) {
        (void)cudaGetLastError();
        v = 0;
    }
    state.store(v == 1 ? 1 : 0);
    return v == 1;
}

/* At M > 32: CTA tiles of 256 channels x 64 rows (four warpgroups, one CTA an SM; x read from L2 half as
 * often) where their grid (splits included) fills at least 3/4 of the SMs, else 128 x 64 (two warpgroups,
 * two CTAs an SM). H200, g = 128: 28672 x 8192 at M = 64 128.8 -> 113.9 us, M = 1024 1749 -> 1556 us;
 * 4096 x 14336 at M = 256 (64 CTAs of 256) 150 -> 205 us, hence the bound. QG_CUDA_INT4_WG_N=128 or 256
 * forces one (tests and timing); same operations per output either way. */
/* The value of environment variable `name` where it is exactly a or b in decimal, else 0 (a tile size
 * forced for tests and timing). */
int env_one_of(const char *name, int a, int b)
{
    const char *env = getenv(name);
    if (env == nullptr) return 0;
    char *end = nullptr;
    const long v = strtol(env, &end, 10);
    return end != env && *end == '\0' && (v == a || v == b) ? (int)v : 0;
}
int wg_n_forced()
{
    static const int n = env_one_of("QG_CUDA_INT4_WG_N", 128, 256);
    return n;
}
bool wg_wide(const qg_w4a16_tc_shape &s, int rows, bool seq, int splits)
{
    if (wg_n_forced() != 0) return wg_n_forced() == 256;
    const size_t ctas = ceil_div((size_t)rows, (size_t)64) * ceil_div(s.Np / ROWS, (size_t)16) * (seq ? 1 : (size_t)splits);
    return ctas * 4 >= (size_t)qg_cuda_sm_count() * 3;
}

/* At M > 64 with x pre-ordered: CTA tiles of 128 channels x 128 rows (two warpgroups of m64n128k16, one
 * CTA an SM) where their grid (splits included) fills at least 3/4 of the SMs: a weight fragment decoded
 * once serves 128 rows instead of 64. H200, g = 128: 28672 x 8192 at M = 1024 1311 -> 1244-1278 us;
 * with the 4-byte x copies (twice the copies a row of the 256 x 64 tiles) 1432 -> 1570-1578 us, hence
 * only with XQ.
 * QG_CUDA_INT4_WG_BN=128 forces them at every M > 32, =64 never (tests and timing); same operations per
 * output either way. */
int wg_bn_forced()
{
    static const int n = env_one_of("QG_CUDA_INT4_WG_BN", 64, 128);
    return n;
}
bool wg_tall(const qg_w4a16_tc_shape &s, int rows, int mt_for, bool seq, int splits, bool xq)
{
    if (wg_bn_forced() != 0) return wg_bn_forced() == 128;
    if (mt_for <= 64 || !xq) return false;
    const size_t ctas = ceil_div((size_t)rows, (size_t)128) * ceil_div(s.Np / ROWS, (size_t)8) * (seq ? 1 : (size_t)splits);
    return ctas * 4 >= (size_t)qg_cuda_sm_count() * 3;
}

template <int WG, int BN, int OCC, bool DEFER, bool XQ>
int launch_wg_k(const qg_w4a16_cuda_weights *w, const uint16_t *x, int M, bool seq, int splits, float *part, unsigned *cnt, float *y32,
              uint16_t *y16, cudaStream_t st)
{
    using C = wg_cfg<WG, BN, OCC>;
    static const cudaError_t attr = [] {
        cudaError_t r =
            cudaFuncSetAttribute(w4a16_tc_wg_kernel<WG, BN, false, OCC, DEFER, XQ>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM);
        if (r == cudaSuccess)
            r = cudaFuncSetAttribute(w4a16_tc_wg_kernel<WG, BN, true, OCC, DEFER, XQ>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)C::SMEM_SEQ);
        return r;
    }();
    if (attr != cudaSuccess) return qg_cuda_fail("w4a16_tc_wg_kernel shared memory", attr);
    const dev_shape d = dev_shape_of(w->s);
    dim3 grid((unsigned)ceil_div((size_t)M, (size_t)BN), (unsigned)ceil_div((size_t)d.nt, (size_t)C::NT), seq ? 1u : (unsigned)splits);
    const uint4 *qw = reinterpret_cast<const uint4 *>(w->qw);
    if (seq)
        w4a16_tc_wg_kernel<WG, BN, true, OCC, DEFER, XQ>
            <<<grid, C::THREADS, C::SMEM_SEQ, st>>>(qw, w->sz, x, M, d, splits, nullptr, nullptr, y32, y16);
    else
        w4a16_tc_wg_kernel<WG, BN, false, OCC, DEFER, XQ><<<grid, C::THREADS, C::SMEM, st>>>(qw, w->sz, x, M, d, splits, part, cnt, y32, y16);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? QG_ERR_ok : qg_cuda_fail("w4a16_tc_wg_kernel launch", e);
}

/* The wgmma kernel waits for its tensor-core work once a group (DEFER, the default) or once a chunk
 * (QG_CUDA_INT4_WG_DEFER=0); same operations per output either way. */
bool wg_defer()
{
    static const bool d = [] {
        const char *env = getenv("QG_CUDA_INT4_WG_DEFER");
        return !(env != nullptr && env[0] == '0');
    }();
    return d;
}
/* The activations go to the wgmma kernel as its shared-memory image (w4a16_order_x: one more pass over x,
 * into the workspace; coalesced 16-byte copies in the kernel) at M > 16 unless QG_CUDA_INT4_WG_XQ=0 (the
 * 4-byte copies of the row-major x; also with QG_CUDA_INT4_WG_DEFER=0). H200, g = 128, the two large
 * shapes: M = 32 to 1024 take 0.80-0.95x the time of the 4-byte copies; at M = 64 on the smaller shapes the
 * pass costs up to 5% (README). Same operations per output either way. */
bool wg_xq(size_t M)
{
    static const bool f = [] {
        const char *env = getenv("QG_CUDA_INT4_WG_XQ");
        return !(env != nullptr && env[0] == '0');
    }();
    return M > 16 && f && wg_defer();
}
template <int WG, int BN, int OCC>
int launch_wg(const qg_w4a16_cuda_weights *w, const uint16_t *x, int M, bool seq, int splits, float *part, unsigned *cnt, float *y32,
              uint16_t *y16, cudaStream_t st, bool xq)
{
    if (xq) return launch_wg_k<WG, BN, OCC, true, true>(w, x, M, seq, splits, part, cnt, y32, y16, st);
    if (wg_defer()) return launch_wg_k<WG, BN, OCC, true, false>(w, x, M, seq, splits, part, cnt, y32, y16, st);
    return launch_wg_k<WG, BN, OCC, false, false>(w, x, M, seq, splits, part, cnt, y32, y16, st);
}

/* M > 16: 8 warps of 2 x 4 mma tiles, as 8 x 1 (256 channels x 32 rows) up to M = 32, else 4 x 2 (128 x 64).
 * The 128 x 64 SEQ grid with no more CTAs than SMs gains nothing from two CTAs an SM, so it runs the
 * one-CTA configuration (8 ring stages, running sum in registers; same adds in the same order, same
 * bits): 4096 x 14336 at M = 256 (128 CTAs) 186 -> 173 us on the H200. */
int launch_gemm_rows(const qg_w4a16_cuda_weights *w, const uint16_t *x, int rows, int mt_for, bool seq, int splits, float *part,
                     unsigned *cnt, float *y32, uint16_t *y16, cudaStream_t st, bool xq)
{
    if (wg_use(st)) {
        if (mt_for <= 32) return launch_wg<2, 32, 2>(w, x, rows, seq, splits, part, cnt, y32, y16, st, xq);
        if (wg_tall(w->s, rows, mt_for, seq, splits, xq)) return launch_wg<2, 128, 1>(w, x, rows, seq, splits, part, cnt, y32, y16, st, xq);
        if (wg_wide(w->s, rows, seq, splits)) return launch_wg<4, 64, 1>(w, x, rows, seq, splits, part, cnt, y32, y16, st, xq);
        return launch_wg<2, 64, 2>(w, x, rows, seq, splits, part, cnt, y32, y16, st, xq);
    }
    if (mt_for <= 32) return launch_gemm_tc<8, 1, gm_occ(8, 1)>(w, x, rows, seq, splits, part, cnt, y32, y16, st);
    using C = gm_cfg<4, 2, gm_occ(4, 2)>;
    const size_t ctas = ceil_div((size_t)rows, (size_t)C::ROWS_X) * ceil_div((size_t)dev_shape_of(w->s).nt, (size_t)C::NT);
    if (seq && ctas <= (size_t)qg_cuda_sm_count()) return launch_gemm_tc<4, 2, 1>(w, x, rows, seq, splits, part, cnt, y32, y16, st);
    return launch_gemm_tc<4, 2, gm_occ(4, 2)>(w, x, rows, seq, splits, part, cnt, y32, y16, st);
}

/* SEQ (splits walked in order inside each CTA, no workspace) where the grid without split-K already has
 * about a CTA per SM (128 tiles), or M needs more than one slice; never when the caller reads the
 * partials back. Measured on the H100: at M = 256 on 4096 x 14336 (128 tiles, S = 8) SEQ takes 0.68x the
 * time of the workspace path; at M = 64 (32 tiles) the workspace path wins. */
bool gemm_seq(const qg_w4a16_tc_shape &s, size_t M, int S)
{
    if (M <= 16) return false;
    if (S == 1 || M > (size_t)MSLICE) return true;
    const size_t rows = M <= 32 ? 32 : 64, nts = M <= 32 ? 16 : 8;
    return ceil_div(M, rows) * ceil_div(s.Np / ROWS, nts) >= 128;
}

int launch_rows(const qg_w4a16_cuda_weights *w, const uint16_t *x, int rows, int mt_for, int splits, float *part, unsigned *cnt,
                float *y32, uint16_t *y16, cudaStream_t st, bool xq)
{
    /* m-tiles per warp from the whole call's M (register use only; no row's operations depend on it) */
    if (mt_for <= 8) return launch_ring<1>(w, x, rows, splits, part, cnt, y32, y16, st);
    if (mt_for <= 16) return launch_ring<2>(w, x, rows, splits, part, cnt, y32, y16, st);
    return launch_gemm_rows(w, x, rows, mt_for, false, splits, part, cnt, y32, y16, st, xq);
}

size_t align256(size_t b) { return (b + 255) & ~(size_t)255; }

/* The workspace of a call, written once for gemm_async and the size query: the turnstile counters first
 * (one per n-tile and block of >= 8 rows of a slice, reserved whenever there is a workspace, so at a place
 * no call of any M or split count writes anything else, and one zeroing serves them all), then x' (act-order
 * or the wgmma kernel's pre-ordered image), then the S x min(M, MSLICE) x Np split partials. */
struct ws_layout {
    size_t cnt, x, part, bytes; /* byte offsets of the three regions and the total */
};

ws_layout ws_layout_of(const qg_w4a16_tc_shape &s, bool act_order, size_t M, int splits)
{
    const int S = splits > 0 ? splits : s.splits;
    const bool xprime = act_order || wg_xq(M);
    const size_t cntb = S > 1 || xprime ? align256(s.Np / ROWS * (MSLICE / 8) * 4) : 0;
    const size_t xb = xprime ? align256(ceil_div(M, 8) * 8 * s.Kp * 2) : 0;
    const size_t pb = S > 1 ? (size_t)S * (M < (size_t)MSLICE ? M : (size_t)MSLICE) * s.Np * 4 : 0;
    ws_layout L{0, cntb, cntb + xb, cntb + xb + pb};
#ifdef QG_CUDA_MUTANT_INT4_WS_XPRIME_OVER_COUNTERS /* an S = 1 call's x' where S > 1 calls count: gpu.int4_cuda.workspace fails */
    if (S == 1) L.x = 0, L.part = xb;
#endif
#ifdef QG_CUDA_MUTANT_INT4_WS_COUNTERS_LAST /* after the partials, where a larger M writes partials: gpu.int4_cuda.workspace fails */
    L.x = 0, L.part = xb, L.cnt = xb + align256(pb);
#endif
    return L;
}

int gemm_async(const qg_w4a16_cuda_weights *w, const uint16_t *dx, size_t M, int splits, void *ws, float *dy32, uint16_t *dy16,
               cudaStream_t st, float **part_out, bool want_partials = false)
{
    if (w == nullptr || w->qw == nullptr || dx == nullptr || (dy32 == nullptr && dy16 == nullptr) || M == 0)
        return QG_ERR_argument_invalid;
    if (((uintptr_t)dx & 15) != 0 || ((uintptr_t)ws & 15) != 0) return QG_ERR_argument_invalid; /* 16-byte loads of x */
    if (M > (size_t)QG_W4A16_TC_MAX_M) return QG_ERR_shape_invalid;
    if (ceil_div(w->s.Np / ROWS, WARPS) > 65535) return QG_ERR_shape_invalid; /* grid.y: groups of 4 n-tiles */
    const qg_w4a16_tc_shape &s = w->s;
    const int S = splits > 0 ? splits : s.splits;
    if (S > QG_W4A16_TC_MAX_SPLITS) return QG_ERR_argument_invalid;
    const ws_layout L = ws_layout_of(s, w->perm != nullptr, M, splits);
    if (L.bytes > 0 && ws == nullptr) return QG_ERR_argument_invalid;
    unsigned char *const base = (unsigned char *)ws;
    unsigned *const cnt = (unsigned *)(base + L.cnt);
    const uint16_t *x = dx;
    /* the wgmma kernel runs (M > 16) and takes x as its shared-memory image: x' (blocks of 8 rows, 8 Kp
     * elements a block, so a slice of rows r0.. starts r0 Kp elements in) replaces x */
    const bool xq = wg_xq(M) && wg_use(st);
    size_t xld = s.K;
    uint16_t *const xbuf = (uint16_t *)(base + L.x);
    if (xq) {
        const size_t n = ceil_div(M, 8) * 8 * (s.Kp / 8);
        w4a16_order_x<<<(unsigned)ceil_div(n, 256), 256, 0, st>>>(dx, w->perm, (int)M, (int)s.K, (int)(s.Kp / CHUNK), (uint4 *)xbuf);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return qg_cuda_fail("w4a16_order_x launch", e);
        x = xbuf;
        xld = s.Kp;
    } else if (w->perm != nullptr) {
        const size_t n = M * s.K;
        w4a16_gather_x<<<(unsigned)ceil_div(n, 256), 256, 0, st>>>(dx, w->perm, (int)M, (int)s.K, xbuf);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return qg_cuda_fail("w4a16_gather_x launch", e);
        x = xbuf;
    }
    float *const part = (float *)(base + L.part);
    if (part_out) *part_out = S > 1 ? part : nullptr;
    if (!want_partials && gemm_seq(s, M, S)) {
        if (part_out) *part_out = nullptr;
        return launch_gemm_rows(w, x, (int)M, (int)M, true, S, nullptr, nullptr, dy32, dy16, st, xq);
    }
    if (S == 1) return launch_rows(w, x, (int)M, (int)M, 1, nullptr, nullptr, dy32, dy16, st, xq);
    /* slices of MSLICE rows through one workspace of S x MSLICE x Np partials and the turnstile counters */
    for (size_t r0 = 0; r0 < M; r0 += MSLICE) {
        const size_t rows = M - r0 < (size_t)MSLICE ? M - r0 : (size_t)MSLICE;
        int rc = launch_rows(w, x + r0 * xld, (int)rows, (int)M, S, part, cnt, dy32 ? dy32 + r0 * s.N : nullptr,
                             dy16 ? dy16 + r0 * s.N : nullptr, st, xq);
        if (rc != QG_ERR_ok) return rc;
    }
    return QG_ERR_ok;
}

int check_gemm_args(const qg_w4a16 *L, const uint16_t *x, size_t x_len, size_t M, const float *y32, const uint16_t *y16)
{
    if (L == nullptr || x == nullptr || (y32 == nullptr && y16 == nullptr)) return QG_ERR_argument_invalid;
    int rc = qg_w4a16_validate(L);
    if (rc != QG_ERR_ok) return rc;
    /* the reference's error for a batch of 0; above the kernel's largest M the same name */
    if (M == 0 || M > (size_t)QG_W4A16_TC_MAX_M) return QG_ERR_batch_invalid;
    if (x_len != M * L->K) return QG_ERR_size_mismatch;
    return QG_ERR_ok;
}

/* Host side of the repack: validates L, its tc16 shape, and the act-order permutation (*perm: K int32,
 * malloc'ed, for the caller to free; NULL without g_idx). */
int repack_prep(const qg_w4a16 *L, qg_w4a16_tc_shape *s, int32_t **perm)
{
    *perm = nullptr;
    int rc = qg_w4a16_validate(L);
    if (rc != QG_ERR_ok) return rc;
    if ((rc = qg_w4a16_tc_shape_of(L->N, L->K, L->g, s)) != QG_ERR_ok) return rc;
    if (L->g_idx != nullptr) {
        *perm = (int32_t *)malloc(s->K * sizeof(int32_t));
        if (*perm == nullptr || perm_of(L, *perm) != QG_ERR_ok) {
            free(*perm);
            *perm = nullptr;
            return QG_ERR_alloc_failed;
        }
    }
    return QG_ERR_ok;
}

/* The repack kernels on `st`: canonical qweight, scales, zeros (or NULL) and the device perm (or NULL)
 * into the tc16 arrays qw and sz (qgold/kernels_int4_cuda.h). */
int repack_launch(const qg_w4a16_tc_shape &s, const uint32_t *dq, const int32_t *dperm, const uint16_t *dsc, const uint8_t *dz,
                  uint32_t *qw, uint32_t *sz, cudaStream_t st)
{
    w4a16_repack_qw<<<(unsigned)ceil_div(s.qw_words, 256), 256, 0, st>>>(dq, dperm, (int)s.N, (int)s.K, (int)(s.Kp / CHUNK),
                                                                         s.qw_words, qw);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return qg_cuda_fail("w4a16_repack_qw launch", e);
    w4a16_repack_sz<<<(unsigned)ceil_div(s.sz_words, 256), 256, 0, st>>>(dsc, dz, (int)s.N, (int)s.G, (int)s.Np, sz);
    e = cudaGetLastError();
    return e == cudaSuccess ? QG_ERR_ok : qg_cuda_fail("w4a16_repack_sz launch", e);
}

size_t workspace_bytes_of(const qg_w4a16_tc_shape &s, bool act_order, size_t M, int splits)
{
    return ws_layout_of(s, act_order, M, splits).bytes;
}

/* The canonical layout's buffers, first in every W4A16 call through qg_cuda_run: qweight, scales, zeros
 * (absent when symmetric), and the act-order permutation (repack calls) or g_idx (decode), or absent. */
enum { WB_Q = 0, WB_SC = 1, WB_Z = 2, WB_PERM = 3, WB_N = 4 };

void canonical_bufs(const qg_w4a16 *L, const int32_t *perm_or_gidx, qg_cuda_buf *b)
{
    const size_t G = L->K / L->g;
    b[WB_Q] = {QG_CUDA_IN, (void *)L->qweight, L->N * (L->K / 8) * 4};
    b[WB_SC] = {QG_CUDA_IN, (void *)L->scales, L->N * G * 2};
    b[WB_Z] = {QG_CUDA_IN, (void *)L->zeros, L->zeros != nullptr ? L->N * G : 0};
    b[WB_PERM] = {QG_CUDA_IN, (void *)perm_or_gidx, perm_or_gidx != nullptr ? L->K * 4 : 0};
}

/* repack: canonical buffers, then qw, sz (outputs) */
int launch_repack(const void *ctx, void *const *dev, void *stream)
{
    const qg_w4a16_tc_shape &s = *(const qg_w4a16_tc_shape *)ctx;
    return repack_launch(s, (const uint32_t *)dev[WB_Q], (const int32_t *)dev[WB_PERM], (const uint16_t *)dev[WB_SC],
                         (const uint8_t *)dev[WB_Z], (uint32_t *)dev[WB_N], (uint32_t *)dev[WB_N + 1], (cudaStream_t)stream);
}

/* gemm: canonical buffers, then x, qw, sz (scratch), workspace, y32, y16 */
struct gemm_call {
    qg_w4a16_tc_shape s;
    size_t M;
    ptrdiff_t *part_at; /* out: byte offset of the split partials in the workspace, -1 when S = 1 */
    bool partials;      /* the caller reads the split partials back: the workspace path at every M */
};

int launch_gemm(const void *ctx, void *const *dev, void *stream)
{
    const gemm_call *c = (const gemm_call *)ctx;
    cudaStream_t st = (cudaStream_t)stream;
    qg_w4a16_cuda_weights w = {c->s, (uint32_t *)dev[WB_N + 1], (uint32_t *)dev[WB_N + 2], (int32_t *)dev[WB_PERM]};
    int rc = repack_launch(c->s, (const uint32_t *)dev[WB_Q], w.perm, (const uint16_t *)dev[WB_SC], (const uint8_t *)dev[WB_Z], w.qw,
                           w.sz, st);
    if (rc != QG_ERR_ok) return rc;
    float *part = nullptr;
    void *ws = dev[WB_N + 3];
    rc = gemm_async(&w, (const uint16_t *)dev[WB_N], c->M, 0, ws, (float *)dev[WB_N + 4], (uint16_t *)dev[WB_N + 5], st, &part, c->partials);
    *c->part_at = part != nullptr ? (const unsigned char *)part - (const unsigned char *)ws : -1;
    return rc;
}

/* One call: repack and product in one run (the repacked arrays are scratch of the call). With `partials`
 * and S > 1 the workspace is an output too, staged on the host, and its [S][M][Np] partials are copied
 * to partials [S][M][N]; with S = 1 the single partial is y. */
int gemm_host(const qg_w4a16 *L, const uint16_t *x, size_t x_len, size_t M, float *y_f32, uint16_t *y_f16, float *partials)
{
    int rc = check_gemm_args(L, x, x_len, M, y_f32, y_f16);
    if (rc != QG_ERR_ok) return rc;
    gemm_call c = {};
    int32_t *hperm = nullptr;
    void *wsh = nullptr;
    ptrdiff_t part_at = -1;
    const size_t ny = M * L->N;
    if ((rc = repack_prep(L, &c.s, &hperm)) != QG_ERR_ok) return rc;
    c.M = M;
    c.part_at = &part_at;
    c.partials = partials != nullptr;
    const size_t wsb = workspace_bytes_of(c.s, hperm != nullptr, M, 0);
    const bool ws_out = partials != nullptr && c.s.splits > 1;
    qg_cuda_buf bufs[WB_N + 6];
    if (partials != nullptr && M > (size_t)MSLICE) {
        rc = QG_ERR_shape_invalid;
        goto done;
    }
    if (ws_out && (wsh = calloc(wsb, 1)) == nullptr) {
        rc = QG_ERR_alloc_failed;
        goto done;
    }
    canonical_bufs(L, hperm, bufs);
    bufs[WB_N] = {QG_CUDA_IN, (void *)x, M * L->K * 2};
    bufs[WB_N + 1] = {QG_CUDA_SCRATCH, nullptr, c.s.qw_words * 4};
    bufs[WB_N + 2] = {QG_CUDA_SCRATCH, nullptr, c.s.sz_words * 4};
    bufs[WB_N + 3] = {ws_out ? QG_CUDA_OUT : QG_CUDA_SCRATCH, wsh, wsb};
    bufs[WB_N + 4] = {QG_CUDA_OUT, y_f32, y_f32 != nullptr ? ny * 4 : 0};
    bufs[WB_N + 5] = {QG_CUDA_OUT, y_f16, y_f16 != nullptr ? ny * 2 : 0};
    if ((rc = qg_cuda_run(bufs, WB_N + 6, launch_gemm, &c)) != QG_ERR_ok) goto done;
    if (partials != nullptr) {
        if (part_at < 0) {
            memcpy(partials, y_f32, ny * 4);
        } else {
            /* workspace [S][M][Np] -> partials [S][M][N] */
            const float *part = (const float *)((const unsigned char *)wsh + part_at);
            for (int sp = 0; sp < c.s.splits; sp++)
                for (size_t m = 0; m < M; m++)
                    memcpy(partials + (size_t)sp * ny + m * L->N, part + ((size_t)sp * M + m) * c.s.Np, L->N * 4);
        }
    }
done:
    free(hperm);
    free(wsh);
    return rc;
}

/* decode: canonical buffers (g_idx in the WB_PERM slot), then w */
struct decode_call {
    size_t N, K, g, n;
};

int launch_decode(const void *ctx, void *const *dev, void *stream)
{
    const decode_call *c = (const decode_call *)ctx;
    w4a16_decode_kernel<<<(unsigned)ceil_div(c->n, 256), 256, 0, (cudaStream_t)stream>>>(
        (const uint32_t *)dev[WB_Q], (const uint16_t *)dev[WB_SC], (const uint8_t *)dev[WB_Z], (const int32_t *)dev[WB_PERM], (int)c->N,
        (int)c->K, (int)c->g, (float *)dev[WB_N]);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? QG_ERR_ok : qg_cuda_fail("w4a16_decode_kernel launch", e);
}

/* probe: A, B, C, D */
/* the probes' launch: ctx is a probe_ctx; wgmma where asked (QG_ERR_unsupported without it), else mma.sync
 * (f16 or bf16) */
struct probe_ctx {
    size_t count;
    bool wg, bf16;
};

int launch_probe(const void *ctx, void *const *dev, void *stream)
{
    const probe_ctx &c = *(const probe_ctx *)ctx;
    const cudaStream_t st = (cudaStream_t)stream;
    const uint16_t *A = (const uint16_t *)dev[0], *B = (const uint16_t *)dev[1];
    const float *C = (const float *)dev[2];
    float *D = (float *)dev[3];
    if (c.wg && !wg_use(st)) return QG_ERR_unsupported;
    if (c.wg) wgmma_probe_kernel<<<(unsigned)c.count, 128, 0, st>>>(A, B, C, D, c.count);
    else if (c.bf16) mma_probe_kernel<true><<<(unsigned)c.count, 32, 0, st>>>(A, B, C, D, c.count);
    else mma_probe_kernel<false><<<(unsigned)c.count, 32, 0, st>>>(A, B, C, D, c.count);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? QG_ERR_ok : qg_cuda_fail(c.wg ? "wgmma_probe_kernel launch" : "mma_probe_kernel launch", e);
}

/* packed int4 x int4: A, B, sa, sb, bias, acc, y32, y16 */
struct packed_call {
    size_t M, N, K, rb;
    int sa_all, sb_all, bias_f16, relu;
};

int launch_packed(const void *ctx, void *const *dev, void *stream)
{
    const packed_call *c = (const packed_call *)ctx;
    dim3 grid((unsigned)ceil_div(c->N, 32), (unsigned)ceil_div(c->M, 16));
    int4_gemm_packed_kernel<<<grid, 128, 0, (cudaStream_t)stream>>>(
        (const uint8_t *)dev[0], (const uint8_t *)dev[1], (int)c->M, (int)c->N, (int)c->K, (int)c->rb, (const float *)dev[2], c->sa_all,
        (const float *)dev[3], c->sb_all, dev[4], c->bias_f16, c->relu, (int32_t *)dev[5], (float *)dev[6], (uint16_t *)dev[7]);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? QG_ERR_ok : qg_cuda_fail("int4_gemm_packed_kernel launch", e);
}

} // namespace

extern "C" int qg_w4a16_cuda_splits(size_t N, size_t K) { return splits_of(N, K); }

extern "C" int qg_w4a16_tc_shape_of(size_t N, size_t K, size_t g, qg_w4a16_tc_shape *s)
{
    if (s == nullptr) return QG_ERR_argument_invalid;
    if (N == 0 || K < 8 || K % 8 != 0 || K > (size_t)INT_MAX / 2 || N > (size_t)INT_MAX / 2) return QG_ERR_shape_invalid;
    if (!(g == 32 || g == 64 || g == 128 || g == K) || K % g != 0) return QG_ERR_int_group_invalid;
    s->N = N;
    s->K = K;
    s->g = g;
    s->G = K / g;
    s->Np = ceil_div(N, ROWS) * ROWS;
    s->Kp = ceil_div(K, CHUNK) * CHUNK;
    s->qw_words = s->Np / ROWS * (s->Kp / CHUNK) * 128;
    s->sz_words = s->G * s->Np;
    s->splits = splits_of(N, K);
    return QG_ERR_ok;
}

extern "C" double qg_cuda_mma_model_u(void) { return QG_MMA_U_ACC; }

extern "C" long qg_w4a16_cuda_chain(size_t N, size_t K, size_t g)
{
    const size_t ge = g < K ? g : K;
    return (long)(ceil_div(ge, 16) + 1 + K / g + (size_t)splits_of(N, K) - 1);
}

extern "C" qg_numerics qg_w4a16_cuda_numerics(size_t N, size_t K, size_t g, int f16_out)
{
    qg_numerics nm = f16_out ? (qg_numerics)QG_NUMERICS_F32ACC_F16OUT : (qg_numerics)QG_NUMERICS_F32ACC_F32OUT;
    nm.u_acc = qg_cuda_mma_model_u(); /* the mma block model; the fp32 roundings (2^-24) are below it */
    nm.d_fixed = qg_w4a16_cuda_chain(N, K, g);
    return nm;
}

/* The device-resident weights of the benchmarks: repack_prep, the canonical arrays uploaded, the repack
 * kernels (repack_launch, as in every call through qg_cuda_run) on the default stream; qw, sz and perm stay
 * on the device until qg_w4a16_cuda_free. */
extern "C" int qg_w4a16_cuda_upload(const qg_w4a16 *L, qg_w4a16_cuda_weights *w)
{
    if (L == nullptr || w == nullptr) return QG_ERR_argument_invalid;
    memset(w, 0, sizeof *w);
    int32_t *hperm = nullptr;
    int rc = repack_prep(L, &w->s, &hperm);
    if (rc != QG_ERR_ok) return rc;
    const qg_w4a16_tc_shape &s = w->s;
    uint32_t *dq = nullptr;
    uint16_t *dsc = nullptr;
    uint8_t *dz = nullptr;
    QG_CUDA_TRY(cudaMalloc((void **)&w->qw, s.qw_words * 4));
    QG_CUDA_TRY(cudaMalloc((void **)&w->sz, s.sz_words * 4));
    QG_CUDA_TRY(cudaMalloc((void **)&dq, s.N * (s.K / 8) * 4));
    QG_CUDA_TRY(cudaMalloc((void **)&dsc, s.N * s.G * 2));
    QG_CUDA_TRY(cudaMemcpy(dq, L->qweight, s.N * (s.K / 8) * 4, cudaMemcpyHostToDevice));
    QG_CUDA_TRY(cudaMemcpy(dsc, L->scales, s.N * s.G * 2, cudaMemcpyHostToDevice));
    if (L->zeros != nullptr) {
        QG_CUDA_TRY(cudaMalloc((void **)&dz, s.N * s.G));
        QG_CUDA_TRY(cudaMemcpy(dz, L->zeros, s.N * s.G, cudaMemcpyHostToDevice));
    }
    if (hperm != nullptr) {
        QG_CUDA_TRY(cudaMalloc((void **)&w->perm, s.K * 4));
        QG_CUDA_TRY(cudaMemcpy(w->perm, hperm, s.K * 4, cudaMemcpyHostToDevice));
    }
    if ((rc = repack_launch(s, dq, w->perm, dsc, dz, w->qw, w->sz, 0)) != QG_ERR_ok) goto done;
    QG_CUDA_TRY(cudaDeviceSynchronize());
    /* settle the M > 16 kernel here, outside any stream capture (the first call may be captured) */
    (void)wg_use(0);
done:
    if (dq) cudaFree(dq);
    if (dsc) cudaFree(dsc);
    if (dz) cudaFree(dz);
    free(hperm);
    if (rc != QG_ERR_ok) qg_w4a16_cuda_free(w);
    return rc;
}

extern "C" void qg_w4a16_cuda_free(qg_w4a16_cuda_weights *w)
{
    if (w == nullptr) return;
    if (w->qw) cudaFree(w->qw);
    if (w->sz) cudaFree(w->sz);
    if (w->perm) cudaFree(w->perm);
    w->qw = nullptr;
    w->sz = nullptr;
    w->perm = nullptr;
}

extern "C" size_t qg_w4a16_cuda_workspace_bytes(const qg_w4a16_cuda_weights *w, size_t M, int splits)
{
    if (w == nullptr) return 0;
    return workspace_bytes_of(w->s, w->perm != nullptr, M, splits);
}

extern "C" int qg_w4a16_gemm_cuda_async(const qg_w4a16_cuda_weights *w, const void *dx, size_t M, int splits, void *workspace,
                                        float *dy32, uint16_t *dy16, void *stream)
{
    return gemm_async(w, (const uint16_t *)dx, M, splits, workspace, dy32, dy16, (cudaStream_t)stream, nullptr);
}

extern "C" int qg_w4a16_repack_cuda(const qg_w4a16 *L, uint32_t *qw, uint32_t *sz, int32_t *perm)
{
    if (L == nullptr || qw == nullptr || sz == nullptr) return QG_ERR_argument_invalid;
    qg_w4a16_tc_shape s;
    int32_t *hperm = nullptr;
    int rc = repack_prep(L, &s, &hperm);
    if (rc != QG_ERR_ok) return rc;
    qg_cuda_buf bufs[WB_N + 2];
    canonical_bufs(L, hperm, bufs);
    bufs[WB_N] = {QG_CUDA_OUT, qw, s.qw_words * 4};
    bufs[WB_N + 1] = {QG_CUDA_OUT, sz, s.sz_words * 4};
    rc = qg_cuda_run(bufs, WB_N + 2, launch_repack, &s);
    /* the permutation the repack read is the host's own (uploaded as is, never written on the device) */
    if (rc == QG_ERR_ok && perm != nullptr && hperm != nullptr) memcpy(perm, hperm, s.K * 4);
    free(hperm);
    return rc;
}

extern "C" int qg_w4a16_gemm_cuda(const qg_w4a16 *L, const uint16_t *x, size_t x_len, size_t M, float *y_f32, uint16_t *y_f16)
{
    return gemm_host(L, x, x_len, M, y_f32, y_f16, nullptr);
}

extern "C" int qg_w4a16_gemv_cuda(const qg_w4a16 *L, const uint16_t *x, size_t x_len, size_t batch, float *y_f32, uint16_t *y_f16)
{
    return gemm_host(L, x, x_len, batch, y_f32, y_f16, nullptr);
}

extern "C" int qg_w4a16_gemm_cuda_partials(const qg_w4a16 *L, const uint16_t *x, size_t x_len, size_t M, float *y_f32, float *partials)
{
    if (y_f32 == nullptr || partials == nullptr) return QG_ERR_argument_invalid;
    return gemm_host(L, x, x_len, M, y_f32, nullptr, partials);
}

static int probe_host(const uint16_t *A, const uint16_t *B, const float *C, float *D, size_t count, bool wg, bool bf16 = false)
{
    if (A == nullptr || B == nullptr || C == nullptr || D == nullptr || count == 0 || count > 65535) return QG_ERR_argument_invalid;
    const qg_cuda_buf bufs[4] = {{QG_CUDA_IN, (void *)A, count * 512},
                                 {QG_CUDA_IN, (void *)B, count * 256},
                                 {QG_CUDA_IN, (void *)C, count * 512},
                                 {QG_CUDA_OUT, D, count * 512}};
    const probe_ctx c = {count, wg, bf16};
    return qg_cuda_run(bufs, 4, launch_probe, &c);
}

extern "C" int qg_cuda_wgmma_f16_probe(const uint16_t *A, const uint16_t *B, const float *C, float *D, size_t count)
{
    return probe_host(A, B, C, D, count, true);
}

extern "C" int qg_cuda_mma_f16_probe(const uint16_t *A, const uint16_t *B, const float *C, float *D, size_t count)
{
    return probe_host(A, B, C, D, count, false);
}

extern "C" int qg_cuda_mma_bf16_probe(const uint16_t *A, const uint16_t *B, const float *C, float *D, size_t count)
{
    return probe_host(A, B, C, D, count, false, true);
}

extern "C" int qg_w4a16_decode_cuda(const qg_w4a16 *L, float *w)
{
    if (w == nullptr) return QG_ERR_argument_invalid;
    int rc = qg_w4a16_validate(L);
    if (rc != QG_ERR_ok) return rc;
    const size_t N = L->N, K = L->K, n = N * K;
    if (K > (size_t)INT_MAX / 2 || N > (size_t)INT_MAX / 2) return QG_ERR_shape_invalid;
    const decode_call c = {N, K, L->g, n};
    qg_cuda_buf bufs[WB_N + 1];
    canonical_bufs(L, L->g_idx, bufs);
    bufs[WB_N] = {QG_CUDA_OUT, w, n * 4};
    return qg_cuda_run(bufs, WB_N + 1, launch_decode, &c);
}

extern "C" int qg_int4_gemm_packed_cuda(const qg_int4_gemm_args *p, int32_t *acc, float *y_f32, uint16_t *y_f16)
{
    int rc = qg_int4_gemm_check(p, acc, y_f32, y_f16);
    if (rc != QG_ERR_ok) return rc;
    if (p->M > (size_t)65535 * 16 || p->N > (size_t)INT_MAX / 16) return QG_ERR_shape_invalid; /* grid.y = M / 16 */
    const size_t rb = qg_int4_packed_row_bytes(p->K), M = p->M, N = p->N, no = M * N;
    const int scaled = y_f32 != nullptr || y_f16 != nullptr;
    const size_t bias_bytes = p->bias ? N * (p->bias_type == QG_INT4_F16 ? 2 : 4) : 0;
    const packed_call c = {M, N, p->K, rb, p->sa_len != 1, p->sb_len != 1, p->bias_type == QG_INT4_F16, p->relu};
    /* scales and bias only for the scaled outputs (with only acc requested they may be NULL) */
    const qg_cuda_buf bufs[8] = {{QG_CUDA_IN, (void *)p->A, M * rb},
                                 {QG_CUDA_IN, (void *)p->B, N * rb},
                                 {QG_CUDA_IN, (void *)p->sa, scaled ? p->sa_len * 4 : 0},
                                 {QG_CUDA_IN, (void *)p->sb, scaled ? p->sb_len * 4 : 0},
                                 {QG_CUDA_IN, (void *)p->bias, scaled ? bias_bytes : 0},
                                 {QG_CUDA_OUT, acc, acc != nullptr ? no * 4 : 0},
                                 {QG_CUDA_OUT, y_f32, y_f32 != nullptr ? no * 4 : 0},
                                 {QG_CUDA_OUT, y_f16, y_f16 != nullptr ? no * 2 : 0}};
    return qg_cuda_run(bufs, 8, launch_packed, &c);
}
