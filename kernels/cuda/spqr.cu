/* SpQR on the GPU: one fused kernel for dense 3-bit tiles + fp16 outliers (CSR or PTCSR) + the column
 * permutation, batch 1..16, float32 accumulation, float32 and/or fp16 outputs.
 *
 * Work split. A block of 8 warps owns RB tile rows (16 output rows each); the WC = 8 / RB warps of a
 * tile row split its columns. A warp's lanes form 4 groups of 8: lane p of a group reads one 16-byte
 * slice of a tile (dense words 2p and 2p+1 = rows 2p and 2p+1, all 16 columns), so a group covers one
 * tile and a warp 4 consecutive tiles per step (512 contiguous bytes). Slot s = 4 * (warp in row) +
 * group takes the tiles t = s, s + S, s + 2S, ... (S = 4 * WC) in ascending order, then the outliers
 * l = s, s + S, ... of its two rows (the l-th outlier of a row is the same word in CSR and PTCSR, so both
 * layouts add the same terms in the same order). The S slot sums of a row are combined by a fixed
 * butterfly (xor 8, xor 16) and then warp by warp in ascending order. RB (hence WC and S) depends on
 * (m, n) only, never on the batch: every batch column goes through the same operations whatever the
 * batch size, so results are deterministic and batch-invariant (no atomics).
 *
 * Long outlier rows. A row with more than LONG_ROW outliers (one dense outlier row: n of them) would make
 * its slots' chains, one lane each, the block's critical path. Such a row leaves its slots: after the
 * dense part all 256 threads of the block take its outliers l = tid, tid + 256, ..., combine their sums
 * by a fixed butterfly and then warp by warp in ascending order (shared memory, two barriers), and the
 * row's output adds that sum last. Whether a row is long depends on its own outlier count only (PTCSR:
 * its leading nonzero words), so the batch size and the layout (CSR or PTCSR) never change a row's order.
 *
 * Activations. x'[i] = x[perm[i]] is staged in shared memory as float32 (exact), one chunk of columns at
 * a time for all batch columns; the chunk size only changes when the barriers happen, not the order of
 * any sum. When x fits (RAW_MAX) it is first copied to shared memory as it is (coalesced) and the gather
 * reads that copy. Else (large batches, long rows) a first kernel, k_xprime, gathers x' once into a
 * device work area, and every block copies its chunks from there with coalesced 16-byte loads instead of
 * gathering the whole of x through the permutation (at batch 16 on 8192 columns that gather was 131072
 * scattered 2-byte loads a block). Outlier columns (unsigned 16-bit) read x' from the staged chunk when
 * it holds all n columns, else from the work area, or x[perm[c]] from the copy.
 *
 * Dequantization is the spec's fp16 sequence with correctly rounded half2 operations, never fused where
 * a product could round (the file is built with --fmad=false and uses the _rn forms): (s, z) =
 * RN16((s_s, z_s) * RN16((s_q, z_q) - (s_z, z_z))), w = RN16(s * RN16(q - z)). A 3-bit code becomes an
 * exact half by an AND (a subnormal) and one exact scaling, and q - z is one fused step whose product is
 * exactly q (code_pair_minus), so every rounding is the spec's. Products of two fp16 values are exact in
 * float32, so each term is added by one correctly rounded __fmaf_rn. The padded columns of a partial last
 * tile are skipped (their weight may be inf or NaN; the format says they contribute nothing).
 *
 * Numerics as registered: float32 accumulation, every output a sum of n + (its row's outliers) terms,
 * rounded once to fp16 for the fp16 output; no term passes through more additions than that (the slot
 * chains and the long rows' trees are shorter), so the registered chain length still bounds every order.
 * The GPU never traps: all shapes are validated on the host.
 */
#include <cuda_fp16.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.cuh"
#include "qgold/cuda.h"
#include "qgold/kernels_spqr.h"
#include "qgold/spqr.h"

namespace {

constexpr int WARPS = 8, THREADS = 32 * WARPS;
/* Dynamic shared memory per block (at most; two blocks fit an SM): the staged activations x' (float32,
 * batch x chunk columns) and, when x fits in RAW_MAX bytes, a plain copy of x from which x' is gathered. */
constexpr int SMEM_BYTES = 100 * 1024, RAW_MAX = 64 * 1024;
/* When the staged chunk cannot hold all n columns, outliers look up perm[c] in global memory at random:
 * a block then takes at most SMEM_L1 bytes (two blocks an SM still), which leaves about 90 KiB of L1 an SM
 * to keep the permutation (n <= 32768 here: <= 64 KiB) cached. Only the chunk size changes. */
constexpr int SMEM_L1 = 80 * 1024;
/* Tile rows per block: the largest power of two <= 8 that still leaves min_blocks(n) blocks, enough to
 * fill 132 SMs at batch 1 (four blocks an SM while the staged activations are small, two for wide layers).
 * Fixed numbers, so the split, hence the result, depends on (m, n) only, never on the batch or device. */
inline size_t min_blocks(size_t n) { return n > 12288 ? 132 : 264; }
/* Outlier rows with more than this many outliers are long: the whole block sums them (see long_rows), the
 * other rows stay with their slots. The count is the row's own in both layouts (PTCSR: its leading nonzero
 * words, found by a search in the segment when the segment is that long), so a row takes the same path
 * with the same terms in CSR and PTCSR; a fixed number, so the split depends on the layer only, never on
 * the batch. 1024 is far above SpQR's ~1% outliers (82 per 8192-wide row) and 5% (410), and below the
 * cost where one lane's chain dominates the block's time. */
constexpr int LONG_ROW = 1024;
/* Outlier words in flight per thread in a long row. */
constexpr int UL = 8;

__device__ __forceinline__ uint16_t f32_to_f16_bits(float v)
{
    uint32_t b = __float_as_uint(v);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)(((b >> 16) & 0x8000u) | 0x7E00u | ((b >> 13) & 0x3FFu));
    return __half_as_ushort(__float2half_rn(v));
}

__device__ __forceinline__ __half2 u32_as_half2(uint32_t v)
{
    __half2 h;
    memcpy(&h, &v, 4);
    return h;
}

struct kargs {
    const uint4 *dense; /* word pairs */
    const int32_t *ro;
    const uint32_t *cv;
    const uint16_t *perm; /* NULL: identity */
    const uint16_t *x;
    float *y32;
    uint16_t *y16;
    int m, n, T, Tf, RT; /* tiles per row, full tiles, tile rows */
    int rb, wc, ct;      /* tile rows per block, warps per tile row, tiles per staged chunk */
    int kind;            /* qg_spqr_outlier_kind */
    int raw;             /* x (batch x n fp16) is copied to shared memory first, x' gathered from there */
    const uint16_t *xp;  /* else x' gathered once by k_xprime: batch rows of xps fp16 values */
    int xps;
};

/* x'_b[c] = x_b[perm[c]] for c < n, +0 up to xps (a multiple of 16): the work area the GEMV's blocks copy
 * their chunks from when x does not fit in shared memory. Exact (fp16 copies). */
__global__ void k_xprime(const uint16_t *x, const uint16_t *perm, int n, int batch, int xps, uint16_t *xp)
{
    const int total = xps * batch;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        const int b = i / xps, c = i % xps;
        xp[i] = c < n ? __ldg(x + (size_t)b * (size_t)n + (perm ? __ldg(perm + c) : c)) : (uint16_t)0;
    }
}

/* A 3-bit code q at bit offset O <= 7 of a 16-bit half with a zero exponent field is the subnormal
 * q 2^(O-24) exactly; times 2^(15-O) (an fp16, exact) it is q 2^-9. Codes i (bits 6+3i) and i+8 (24 bits
 * higher) sit at the same offset of bytes k, k+1 and k+3, k+4, which one byte permute puts in the low and
 * the high half of a word:
 *   window bytes (0,1 | 3,4): pair 0 at offset 6;   (1,2 | 4,5): pairs 1, 2, 3 at 1, 4, 7;
 *   (2,3 | 5,6): pairs 4, 5 at 2, 5;                 (3,4 | 6,7): pairs 6, 7 at 0, 3.
 * RN16(q - z) is then one fused step q 2^-9 * 2^9 - z: its product is exactly q, so the single rounding
 * is the spec's. */
template <int O>
__device__ __forceinline__ __half2 code_pair_minus(uint32_t window, __half2 nz2)
{
    constexpr uint32_t MASK = (7u << O) | (7u << (16 + O));
    constexpr uint32_t SCALE = ((uint32_t)(30 - O) << 10) | ((uint32_t)(30 - O) << 26); /* (2^(15-O), 2^(15-O)) */
    const __half2 q9 = __hmul2_rn(u32_as_half2(window & MASK), u32_as_half2(SCALE));       /* exact: q 2^-9 */
    return __hfma2(q9, u32_as_half2(0x60006000u), nz2);                                     /* RN16(q - z) */
}

/* w[j] (j = 0..15) of one row as float: the dequantization of the spec on half2 pairs (i, i+8);
 * nz2 = (-z, -z). */
__device__ __forceinline__ void row_weights(uint32_t lo, uint32_t hi, __half2 s2, __half2 nz2, float *w)
{
    const uint32_t w0 = __byte_perm(lo, hi, 0x4310), w1 = __byte_perm(lo, hi, 0x5421);
    const uint32_t w2 = __byte_perm(lo, hi, 0x6532), w3 = __byte_perm(lo, hi, 0x7643);
#define QG_PAIR(I, WIN, O)                                                                          \
    {                                                                                               \
        const __half2 wv = __hmul2_rn(s2, code_pair_minus<O>(WIN, nz2));                            \
        const float2 f = __half22float2(wv);                                                        \
        w[I] = f.x;                                                                                 \
        w[I + 8] = f.y;                                                                             \
    }
    QG_PAIR(0, w0, 6) QG_PAIR(1, w1, 1) QG_PAIR(2, w1, 4) QG_PAIR(3, w1, 7)
    QG_PAIR(4, w2, 2) QG_PAIR(5, w2, 5) QG_PAIR(6, w3, 0) QG_PAIR(7, w3, 3)
#undef QG_PAIR
}

/* One tile, this lane's rows 2p and 2p+1: acc[row][b] += w[row][j] * x'_b[16t + j] for j < nv, in
 * order j = 0, 8, 1, 9, ..., 7, 15 (the same for every batch column). The second-order word is rebuilt
 * from the 8 lanes of the group (byte p comes from row 2p; the host checked that row 2p+1's copy is
 * equal). gmask: this group's lanes, which all hold the same tile; FULL: the whole warp is here (each
 * group on its own tile), so the shuffles take the full mask (xor 1, 2, 4 stay inside a group). */
template <int B, bool PARTIAL, bool FULL>
__device__ __forceinline__ void tile(const uint4 wd, const float *xt, int xstride, int p, unsigned gmask, int nv, float (&acc)[2][B])
{
    const unsigned mask = FULL ? 0xFFFFFFFFu : gmask;
    /* second-order word: lanes 0-3 of the group hold its low 32 bits, lanes 4-7 the high 32 bits */
    uint32_t part = ((wd.y >> 22) & 0xFFu) << (8 * (p & 3));
    part |= __shfl_xor_sync(mask, part, 1);
    part |= __shfl_xor_sync(mask, part, 2);
    const uint32_t other = __shfl_xor_sync(mask, part, 4);
    const uint32_t so_lo = p < 4 ? part : other, so_hi = p < 4 ? other : part;
    const __half2 ss = u32_as_half2(so_lo); /* (s_s, z_s) */
    const __half2 zz = u32_as_half2(so_hi); /* (s_z, z_z) */
    float w[2][16];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const uint32_t lo = r ? wd.z : wd.x, hi = r ? wd.w : wd.y;
        /* (s_q, z_q): bits 0-2 at offset 0 of the low half, bits 3-5 at offset 3 of the high half; OR-ed
         * with the exponent field 25 - offset each is the half 2^(10-offset) + code, and subtracting
         * (1024, 128) leaves the code exactly; then the first-order scale and zero */
        const uint32_t f = __byte_perm(lo, 0u, 0x1010);
        const __half2 sqzq = __hsub2_rn(u32_as_half2((f & (7u | (7u << 19))) | 0x58006400u), u32_as_half2(0x58006400u)); /* exact */
        const __half2 sz = __hmul2_rn(ss, __hsub2_rn(sqzq, zz)); /* (s, z) */
        row_weights(lo, hi, __low2half2(sz), __hneg2(__high2half2(sz)), w[r]);
    }
#pragma unroll
    for (int b = 0; b < B; b++) {
        const float4 *xv = reinterpret_cast<const float4 *>(xt + b * xstride);
        float xf[16];
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const float4 v = xv[q];
            xf[4 * q] = v.x;
            xf[4 * q + 1] = v.y;
            xf[4 * q + 2] = v.z;
            xf[4 * q + 3] = v.w;
        }
#pragma unroll
        for (int r = 0; r < 2; r++)
#pragma unroll
            for (int i = 0; i < 8; i++) {
                if (!PARTIAL || i < nv) acc[r][b] = __fmaf_rn(w[r][i], xf[i], acc[r][b]);
                if (!PARTIAL || i + 8 < nv) acc[r][b] = __fmaf_rn(w[r][i + 8], xf[i + 8], acc[r][b]);
            }
    }
}

/* Whether local row u = 16 rl + k of the block is long. */
__device__ __forceinline__ bool is_long(const unsigned *lmask, int u)
{
    return (lmask[u >> 5] >> (u & 31)) & 1u;
}

/* Outlier count of row k of tile row R in a PTCSR layer whose segment holds M words per row: the leading
 * nonzero words (a valid layer pads each row with zero words at its end only), by binary search; every
 * probe lies inside the segment whatever the words are. */
__device__ __forceinline__ int ptcsr_row_count(const kargs &a, int R, int k, int M)
{
    const uint32_t *w = a.cv + a.ro[R] + k;
    int lo = 0, hi = M; /* the count lies in [lo, hi] */
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (__ldg(w + 16 * mid) != 0u) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The long rows of the block, one after another (ascending), each by all THREADS threads: the row's l-th
 * outlier (CSR word ro[row] + l, PTCSR word ro[R] + 16 l + k, the same term) goes to thread l % 256, whose
 * chain takes l = tid, tid + 256, ... in ascending order. The thread sums are combined by a fixed
 * butterfly inside the warp (xor 1, 2, 4, 8, 16), then warp by warp in ascending order through shared
 * memory: lsum[row][b]. No atomics; the same operations for every batch column and in both layouts, so
 * the order depends on the layer's values only. A term passes through at most ceil(cnt / 256) - 1 + 5 + 7
 * additions before lsum and one more into the output (cnt > LONG_ROW): fewer than the registered
 * n + (longest outlier row).
 * Called by every thread of the block (it has barriers); xs holds x' when one chunk covers all n columns
 * (it then still holds it), else x'[c] is read as x[perm[c]] from the raw copy or from memory. */
template <int B>
__device__ __forceinline__ void long_rows(const kargs &a, const unsigned *lmask, const int *plen, float *red, float *lsum,
                                          const float *xs, const uint16_t *xraw, int xstride)
{
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const bool ptcsr = a.kind == QG_SPQR_OUTLIERS_PTCSR;
    const int RP = ptcsr ? 16 : 1, stride = THREADS;
    const bool whole = a.ct >= a.T;
    for (int w4 = 0; w4 < 4; w4++) {
        unsigned mk = lmask[w4];
        while (mk != 0u) {
            const int u = 32 * w4 + __ffs((int)mk) - 1;
            mk &= mk - 1u;
            const int rl = u >> 4, k = u & 15, R = blockIdx.x * a.rb + rl;
            int first, cnt;
            if (ptcsr) {
                first = a.ro[R] + k;
                cnt = plen[u];
            } else {
                first = a.ro[16 * R + k];
                cnt = a.ro[16 * R + k + 1] - first;
            }
            float part[B];
#pragma unroll
            for (int b = 0; b < B; b++) part[b] = 0.0f;
            for (int j = tid; j < cnt; j += UL * stride) {
                uint32_t w[UL], pc[UL];
#pragma unroll
                for (int v = 0; v < UL; v++) {
                    const int l = j + v * stride;
                    w[v] = l < cnt ? __ldg(a.cv + first + l * RP) : 0u;
                }
#pragma unroll
                for (int v = 0; v < UL; v++) pc[v] = (a.perm && !whole && !a.xp) ? (uint32_t)__ldg(a.perm + (w[v] & 0xFFFFu)) : (w[v] & 0xFFFFu);
#pragma unroll
                for (int v = 0; v < UL; v++) {
                    if (j + v * stride >= cnt || (ptcsr && w[v] == 0)) continue;
                    const float val = __half2float(__ushort_as_half((uint16_t)(w[v] >> 16)));
#pragma unroll
                    for (int b = 0; b < B; b++) {
                        float xv;
                        if (whole) {
                            xv = xs[b * xstride + (int)pc[v]];
                        } else if (a.xp) {
                            xv = __half2float(__ushort_as_half(__ldg(a.xp + (size_t)b * (size_t)a.xps + pc[v])));
                        } else {
                            const uint16_t h = a.raw ? xraw[(uint32_t)b * (uint32_t)a.n + pc[v]] : __ldg(a.x + (size_t)b * (size_t)a.n + pc[v]);
                            xv = __half2float(__ushort_as_half(h));
                        }
                        part[b] = __fmaf_rn(val, xv, part[b]);
                    }
                }
            }
#pragma unroll
            for (int b = 0; b < B; b++) {
                float v = part[b];
#pragma unroll
                for (int m = 1; m < 32; m <<= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, m);
                part[b] = v;
            }
            if (lane == 0)
#pragma unroll
                for (int b = 0; b < B; b++) red[warp * B + b] = part[b];
            __syncthreads();
            if (tid < B) {
                float s = red[tid];
                for (int w = 1; w < WARPS; w++) s += red[w * B + tid];
                lsum[u * B + tid] = s;
            }
            __syncthreads();
        }
    }
}

template <int B>
__global__ void __launch_bounds__(THREADS, B == 1 ? 4 : B <= 8 ? 2 : 1) k_spqr(const kargs a)
{
    extern __shared__ float4 smem[];
    float *xs = reinterpret_cast<float *>(smem);
    uint16_t *xraw = reinterpret_cast<uint16_t *>(xs + (size_t)B * (size_t)a.ct * 16);
    __shared__ float red[WARPS * 16 * B];
    __shared__ float lsum[WARPS * 16 * B]; /* sums of the long rows' outliers, (local row, batch column) */
    __shared__ unsigned lmask[4];          /* bit u: local row u = 16 rl + k of this block is long */
    __shared__ int plen[WARPS * 16];       /* PTCSR: a row's own outlier count, where its segment is long */
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 3, p = lane & 7;
    const int rloc = warp / a.wc, wcol = warp % a.wc;
    const int R = blockIdx.x * a.rb + rloc;
    const bool valid = R < a.RT;
    const int S = 4 * a.wc, slot = 4 * wcol + g;
    const unsigned gmask = 0xFFu << (lane & ~7);
    const int xstride = a.ct * 16;
    /* Weight loads in flight per lane: D tiles ahead (batch 1 runs more warps an SM instead; large
     * batches need the registers for their accumulators, and their arithmetic hides the latency). */
    constexpr int D = (B >= 3 && B <= 8) ? 4 : 2;
    const uint4 *wbase = a.dense + (size_t)(valid ? R : 0) * (size_t)a.T * 8 + p;

    float acc[2][B];
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
        for (int b = 0; b < B; b++) acc[r][b] = 0.0f;

    for (int c0 = 0; c0 < a.T; c0 += a.ct) {
        const int c1 = min(c0 + a.ct, a.T), cend = min(c1, a.Tf);
        /* First group of this chunk's weights in flight before the activations are staged. */
        int t = c0 + slot;
        uint4 nx[D];
#pragma unroll
        for (int u = 0; u < D; u++)
            nx[u] = (valid && t + u * S < cend) ? __ldcs(wbase + (size_t)(t + u * S) * 8) : make_uint4(0, 0, 0, 0);
        if (c0 == 0 && warp < 4) {
            /* The long rows of this block (thread u = local row 16 rl + k), while the first weights load;
             * published by the barrier below. A PTCSR row's own count is searched for only when its
             * segment (16 x the tile row's longest row) is longer than LONG_ROW. */
            bool lng = false;
            const int u = tid, rl = u >> 4, k = u & 15, Ru = blockIdx.x * a.rb + rl;
            if (rl < a.rb && Ru < a.RT) {
                if (a.kind == QG_SPQR_OUTLIERS_CSR) {
                    lng = a.ro[16 * Ru + k + 1] - a.ro[16 * Ru + k] > LONG_ROW;
                } else if (a.kind == QG_SPQR_OUTLIERS_PTCSR) {
                    const int M = (a.ro[Ru + 1] - a.ro[Ru]) / 16;
                    if (M > LONG_ROW) {
                        const int c = ptcsr_row_count(a, Ru, k, M);
                        plen[u] = c;
                        lng = c > LONG_ROW;
                    }
                }
            }
            const unsigned bal = __ballot_sync(0xFFFFFFFFu, lng);
            if (lane == 0) lmask[warp] = bal;
        }
        __syncthreads(); /* the previous chunk is no longer read */
        if (a.raw && c0 == 0) {
            /* x as it is (contiguous batch x n halves): coalesced 16-byte loads when aligned */
            const int count = a.n * B;
            if ((reinterpret_cast<uintptr_t>(a.x) & 15) == 0) {
                const uint4 *src = reinterpret_cast<const uint4 *>(a.x);
                uint4 *dst = reinterpret_cast<uint4 *>(xraw);
#pragma unroll 4
                for (int v = tid; v < count / 8; v += THREADS) dst[v] = __ldg(src + v);
                for (int v = count / 8 * 8 + tid; v < count; v += THREADS) xraw[v] = __ldg(a.x + v);
            } else {
                for (int v = tid; v < count; v += THREADS) xraw[v] = __ldg(a.x + v);
            }
            __syncthreads();
        }
        /* x'_b[c0*16 + i] for the chunk, 8 columns per thread step: the 8 permutation entries are read
         * at once, then the 8 x values of each batch column (independent loads, many in flight). */
        const int len = (c1 - c0) * 16, col0 = c0 * 16;
        const bool pvec = a.perm != nullptr && (reinterpret_cast<uintptr_t>(a.perm) & 15) == 0;
        if (a.xp) {
            /* copied from the gathered x' (8 values a 16-byte load, coalesced; xps and col0 are multiples
             * of 16, and the work area is 16-byte aligned) */
            const int units = len / 8;
            for (int v = tid; v < units * B; v += THREADS) {
                const int b = v / units, e = v % units;
                const uint4 h = __ldg(reinterpret_cast<const uint4 *>(a.xp + (size_t)b * (size_t)a.xps + (size_t)col0) + e);
                const uint32_t hv[4] = {h.x, h.y, h.z, h.w};
                float f[8];
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    f[2 * q] = __half2float(__ushort_as_half((uint16_t)(hv[q] & 0xFFFFu)));
                    f[2 * q + 1] = __half2float(__ushort_as_half((uint16_t)(hv[q] >> 16)));
                }
                float4 *dst = reinterpret_cast<float4 *>(xs + b * xstride + 8 * e);
                dst[0] = make_float4(f[0], f[1], f[2], f[3]);
                dst[1] = make_float4(f[4], f[5], f[6], f[7]);
            }
        }
#pragma unroll 2
        for (int i0 = tid * 8; !a.xp && i0 < len; i0 += THREADS * 8) {
            uint32_t pc[8];
            if (pvec && col0 + i0 + 8 <= a.n) {
                const uint4 v = __ldg(reinterpret_cast<const uint4 *>(a.perm + col0 + i0));
                const uint32_t vv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    pc[2 * e] = vv[e] & 0xFFFFu;
                    pc[2 * e + 1] = vv[e] >> 16;
                }
            } else {
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    const int col = col0 + i0 + e;
                    pc[e] = col < a.n ? (a.perm ? (uint32_t)__ldg(a.perm + col) : (uint32_t)col) : 0u;
                }
            }
#pragma unroll
            for (int b = 0; b < B; b++) {
                float f[8];
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    const uint16_t h = a.raw ? xraw[(uint32_t)b * (uint32_t)a.n + pc[e]] : __ldg(a.x + (size_t)b * (size_t)a.n + pc[e]);
                    f[e] = col0 + i0 + e < a.n ? __half2float(__ushort_as_half(h)) : 0.0f;
                }
                float4 *dst = reinterpret_cast<float4 *>(xs + b * xstride + i0);
                dst[0] = make_float4(f[0], f[1], f[2], f[3]);
                dst[1] = make_float4(f[4], f[5], f[6], f[7]);
            }
        }
        __syncthreads();
        if (valid) {
            /* Steps where all D tiles of every group of the warp exist (warp-uniform test: the warp's
             * last group is slot + 3 - g), then the guarded remainder. */
            for (; t - g + (D - 1) * S + 3 < cend; t += D * S) {
                uint4 cu[D];
#pragma unroll
                for (int u = 0; u < D; u++) cu[u] = nx[u];
#pragma unroll
                for (int u = 0; u < D; u++)
                    nx[u] = t + (D + u) * S < cend ? __ldcs(wbase + (size_t)(t + (D + u) * S) * 8) : make_uint4(0, 0, 0, 0);
#pragma unroll
                for (int u = 0; u < D; u++) tile<B, false, true>(cu[u], xs + (t + u * S - c0) * 16, xstride, p, gmask, 16, acc);
            }
            for (; t < cend; t += D * S) {
                uint4 cu[D];
#pragma unroll
                for (int u = 0; u < D; u++) cu[u] = nx[u];
#pragma unroll
                for (int u = 0; u < D; u++)
                    nx[u] = t + (D + u) * S < cend ? __ldcs(wbase + (size_t)(t + (D + u) * S) * 8) : make_uint4(0, 0, 0, 0);
#pragma unroll
                for (int u = 0; u < D; u++)
                    if (t + u * S < cend) tile<B, false, false>(cu[u], xs + (t + u * S - c0) * 16, xstride, p, gmask, 16, acc);
            }
            /* The partial last tile (n % 16 columns) is the last of its slot's chain; it sits in the last chunk. */
            if (c1 == a.T && a.Tf < a.T && (a.T - 1) % S == slot) {
                const uint4 wd = __ldcs(wbase + (size_t)(a.T - 1) * 8);
                tile<B, true, false>(wd, xs + (a.T - 1 - c0) * 16, xstride, p, gmask, a.n - 16 * (a.T - 1), acc);
            }
        }
    }

    if (valid) {
        /* Outliers of rows 2p and 2p+1: this slot takes l = slot, slot + S, ... in ascending order, U at
         * a time per row (the words, then their permuted columns, then the products: loads in flight
         * together). The l-th outlier of row 16R + k is word ro[row] + l (CSR) or ro[R] + 16 l + k
         * (PTCSR, where 0 words are padding: they only end a row, and contribute nothing). */
        constexpr int U = B <= 4 ? 8 : 4;
        int first[2] = {0, 0}, cnt[2] = {0, 0}, step = 1;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int k = 2 * p + r;
            if (a.kind == QG_SPQR_OUTLIERS_CSR) {
                first[r] = a.ro[16 * R + k];
                cnt[r] = a.ro[16 * R + k + 1] - first[r];
            } else if (a.kind == QG_SPQR_OUTLIERS_PTCSR) {
                first[r] = a.ro[R] + k;
                cnt[r] = (a.ro[R + 1] - a.ro[R]) / 16;
                step = 16;
                if (cnt[r] > LONG_ROW) cnt[r] = plen[16 * rloc + k]; /* the row's own count (see above) */
            }
            if (is_long(lmask, 16 * rloc + k)) cnt[r] = 0; /* summed by the whole block below */
        }
        const int most = max(cnt[0], cnt[1]);
        /* When the only chunk covers all n columns, x' is read from it by column (no permutation lookup). */
        const bool whole = a.ct >= a.T;
        for (int j = slot; j < most; j += U * S) {
            uint32_t w[2][U], pc[2][U];
#pragma unroll
            for (int r = 0; r < 2; r++)
#pragma unroll
                for (int u = 0; u < U; u++) {
                    const int l = j + u * S;
                    w[r][u] = l < cnt[r] ? __ldg(a.cv + first[r] + l * step) : 0u;
                }
#pragma unroll
            for (int r = 0; r < 2; r++)
#pragma unroll
                for (int u = 0; u < U; u++)
                    pc[r][u] = (a.perm && !whole && !a.xp) ? (uint32_t)__ldg(a.perm + (w[r][u] & 0xFFFFu)) : (w[r][u] & 0xFFFFu);
#pragma unroll
            for (int r = 0; r < 2; r++)
#pragma unroll
                for (int u = 0; u < U; u++) {
                    if (j + u * S >= cnt[r] || (a.kind == QG_SPQR_OUTLIERS_PTCSR && w[r][u] == 0)) continue;
                    const float v = __half2float(__ushort_as_half((uint16_t)(w[r][u] >> 16)));
#pragma unroll
                    for (int b = 0; b < B; b++) {
                        float xv;
                        if (whole) {
                            xv = xs[b * xstride + (int)pc[r][u]];
                        } else if (a.xp) {
                            xv = __half2float(__ushort_as_half(__ldg(a.xp + (size_t)b * (size_t)a.xps + pc[r][u])));
                        } else {
                            const uint16_t h = a.raw ? xraw[(uint32_t)b * (uint32_t)a.n + pc[r][u]] : __ldg(a.x + (size_t)b * (size_t)a.n + pc[r][u]);
                            xv = __half2float(__ushort_as_half(h));
                        }
                        acc[r][b] = __fmaf_rn(v, xv, acc[r][b]);
                    }
                }
        }
    }

    long_rows<B>(a, lmask, plen, red, lsum, xs, xraw, xstride);

    /* Fixed-order reduction: groups by butterfly (every lane ends with the same sum), then warps of the
     * tile row in ascending order; a long row's outlier sum (lsum) is added last. */
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
        for (int b = 0; b < B; b++) {
            float v = acc[r][b];
            v += __shfl_xor_sync(0xFFFFFFFFu, v, 8);
            v += __shfl_xor_sync(0xFFFFFFFFu, v, 16);
            acc[r][b] = v;
        }
    if (a.wc == 1) {
        if (valid && g == 0)
#pragma unroll
            for (int r = 0; r < 2; r++)
#pragma unroll
                for (int b = 0; b < B; b++) {
                    const size_t o = (size_t)b * (size_t)a.m + (size_t)(16 * R + 2 * p + r);
                    float s = acc[r][b];
                    if (is_long(lmask, 16 * rloc + 2 * p + r)) s += lsum[(16 * rloc + 2 * p + r) * B + b];
                    if (a.y32) a.y32[o] = s;
                    if (a.y16) a.y16[o] = f32_to_f16_bits(s);
                }
        return;
    }
    if (g == 0)
#pragma unroll
        for (int r = 0; r < 2; r++)
#pragma unroll
            for (int b = 0; b < B; b++) red[(warp * 16 + 2 * p + r) * B + b] = acc[r][b];
    __syncthreads();
    for (int idx = tid; idx < a.rb * 16 * B; idx += THREADS) {
        const int rl = idx / (16 * B), k = (idx / B) % 16, b = idx % B, Rr = blockIdx.x * a.rb + rl;
        if (Rr >= a.RT) continue;
        float s = red[((rl * a.wc) * 16 + k) * B + b];
        for (int w = 1; w < a.wc; w++) s += red[((rl * a.wc + w) * 16 + k) * B + b];
        if (is_long(lmask, 16 * rl + k)) s += lsum[(16 * rl + k) * B + b];
        const size_t o = (size_t)b * (size_t)a.m + (size_t)(16 * Rr + k);
        if (a.y32) a.y32[o] = s;
        if (a.y16) a.y16[o] = f32_to_f16_bits(s);
    }
}

/* Whether x (batch x n fp16) fits the shared-memory copy the blocks gather x' from; else x' is gathered
 * once into the work area by k_xprime. */
inline bool x_is_raw(size_t n, size_t batch) { return (n * batch * 2 + 15) / 16 * 16 <= (size_t)RAW_MAX; }

template <int B>
int launch_b(const kargs &a0, uint16_t *work, cudaStream_t s)
{
    static int attr_set = 0; /* the opt-in above 48 KiB, once per instantiation */
    kargs a = a0;
    const int S = 4 * a.wc;
    const size_t raw_bytes = ((size_t)a.n * B * 2 + 15) / 16 * 16;
    a.raw = x_is_raw((size_t)a.n, B);
    a.xp = nullptr;
    a.xps = a.T * 16;
    if (!a.raw) {
        const int threads = 256, blocks = min((a.xps * B + threads - 1) / threads, 8 * 132);
        k_xprime<<<blocks, threads, 0, s>>>(a.x, a.perm, a.n, B, a.xps, work);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return qg_cuda_fail("k_xprime launch", e);
        a.xp = work;
    }
    int ct = (int)(((size_t)SMEM_BYTES - (a.raw ? raw_bytes : 0)) / (64 * B));
    ct -= ct % S; /* >= S: 36 KiB / (64 * 16) >= 32 >= S */
    const int tmax = (a.T + S - 1) / S * S;
    if (ct > tmax) ct = tmax;
    if (ct < tmax && a.raw && a.perm != nullptr && a.kind != QG_SPQR_OUTLIERS_NONE) {
        int cl = (int)(((size_t)SMEM_L1 - raw_bytes) / (64 * B)); /* raw_bytes <= 64 KiB < SMEM_L1 */
        cl -= cl % S;
        if (cl >= S && cl < ct) ct = cl;
    }
    a.ct = ct;
    const size_t smem = (size_t)B * (size_t)ct * 64 + (a.raw ? raw_bytes : 0);
    if (!attr_set) {
        cudaError_t e = cudaFuncSetAttribute(k_spqr<B>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
        if (e != cudaSuccess) return qg_cuda_fail("cudaFuncSetAttribute(k_spqr)", e);
        attr_set = 1;
    }
    const unsigned grid = (unsigned)((a.RT + a.rb - 1) / a.rb);
    k_spqr<B><<<grid, THREADS, smem, s>>>(a);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? QG_ERR_ok : qg_cuda_fail("k_spqr launch", e);
}

int launch(const qg_spqr_dev_layer *L, const uint16_t *x, size_t batch, float *y32, uint16_t *y16, uint16_t *work, cudaStream_t s)
{
    kargs a;
    a.dense = reinterpret_cast<const uint4 *>(L->dense);
    a.kind = (int)L->outliers;
    a.ro = L->row_offsets;
    a.cv = L->col_vals;
    a.perm = L->perm;
    a.x = x;
    a.y32 = y32;
    a.y16 = y16;
    a.m = (int)L->m;
    a.n = (int)L->n;
    a.T = (int)((L->n + 15) / 16);
    a.Tf = (int)(L->n / 16);
    a.RT = (int)(L->m / 16);
    int rb = 1;
    while (rb < WARPS && (size_t)a.RT / (size_t)(2 * rb) >= min_blocks(L->n)) rb *= 2;
    a.rb = rb;
    a.wc = WARPS / rb;
    a.ct = 0;
    a.raw = 0;
    switch (batch) {
#define QG_CASE(BB) \
    case BB: return launch_b<BB>(a, work, s);
        QG_CASE(1) QG_CASE(2) QG_CASE(3) QG_CASE(4) QG_CASE(5) QG_CASE(6) QG_CASE(7) QG_CASE(8)
        QG_CASE(9) QG_CASE(10) QG_CASE(11) QG_CASE(12) QG_CASE(13) QG_CASE(14) QG_CASE(15) QG_CASE(16)
#undef QG_CASE
    default: return QG_ERR_spqr_batch_out_of_range;
    }
}

/* Bytes of one of the layer's host arrays for qg_cuda_run: 0 where the layer has none (NULL), so the
 * launcher gets NULL for it (identity permutation, no outliers). */
template <typename E>
size_t host_bytes(const E *h, size_t count)
{
    return h != nullptr ? count * sizeof(E) : 0;
}

/* Host side of the GEMV: the layer's shape and the batch; dev[] = dense, row_offsets, col_vals, perm, x,
 * y_f32, y_f16, work (in the order of qg_spqr_gemv_cuda's buffers; an absent one is NULL). */
struct gemv_call {
    size_t m, n, batch;
    qg_spqr_outlier_kind outliers;
};

int launch_gemv_dev(const void *ctx, void *const *dev, void *stream)
{
    const gemv_call *c = (const gemv_call *)ctx;
    qg_spqr_dev_layer D;
    D.m = c->m;
    D.n = c->n;
    D.dense = (const uint64_t *)dev[0];
    D.outliers = c->outliers;
    D.row_offsets = (const int32_t *)dev[1];
    D.col_vals = (const uint32_t *)dev[2];
    D.perm = (const uint16_t *)dev[3];
    return qg_spqr_gemv_cuda_async(&D, dev[4], c->batch, (float *)dev[5], (uint16_t *)dev[6], dev[7], stream);
}

} // namespace

/* Validated with the reference's checks, then launched through qg_spqr_gemv_cuda_async, the benches'
 * entry point. */
extern "C" int qg_spqr_gemv_cuda(const qg_spqr_layer *L, const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16)
{
    if (x == nullptr || (y_f32 == nullptr && y_f16 == nullptr)) return QG_ERR_argument_invalid;
    const int rc = qg_spqr_validate(L);
    if (rc != QG_ERR_ok) return rc;
    if (batch < 1 || batch > QG_SPQR_MAX_BATCH) return QG_ERR_spqr_batch_out_of_range;
    const size_t m = L->m, n = L->n, ny = m * batch;
    const bool has_out = L->outliers != QG_SPQR_OUTLIERS_NONE;
    const gemv_call c = {m, n, batch, has_out ? L->outliers : QG_SPQR_OUTLIERS_NONE};
    const qg_cuda_buf bufs[8] = {
        {QG_CUDA_IN, (void *)L->dense, host_bytes(L->dense, L->dense_words)},
        {QG_CUDA_IN, (void *)L->row_offsets, has_out ? host_bytes(L->row_offsets, L->row_offsets_len) : 0},
        {QG_CUDA_IN, (void *)L->col_vals, has_out ? host_bytes(L->col_vals, L->nnz) : 0},
        {QG_CUDA_IN, (void *)L->perm, host_bytes(L->perm, n)},
        {QG_CUDA_IN, (void *)x, n * batch * sizeof(uint16_t)},
        {QG_CUDA_OUT, y_f32, y_f32 != nullptr ? ny * sizeof(float) : 0},
        {QG_CUDA_OUT, y_f16, y_f16 != nullptr ? ny * sizeof(uint16_t) : 0},
        {QG_CUDA_SCRATCH, nullptr, qg_spqr_cuda_work_bytes(n, batch)},
    };
    return qg_cuda_run(bufs, 8, launch_gemv_dev, &c);
}

extern "C" size_t qg_spqr_cuda_work_bytes(size_t n, size_t batch)
{
    if (n == 0 || n > QG_SPQR_MAX_N || batch < 1 || batch > QG_SPQR_MAX_BATCH || x_is_raw(n, batch)) return 0;
    return (n + 15) / 16 * 16 * batch * sizeof(uint16_t);
}

extern "C" int qg_spqr_gemv_cuda_async(const qg_spqr_dev_layer *L, const void *dx, size_t batch, float *dy_f32, uint16_t *dy_f16,
                                       void *dwork, void *stream)
{
    if (L == nullptr || dx == nullptr || (dy_f32 == nullptr && dy_f16 == nullptr)) return QG_ERR_argument_invalid;
    if (L->m == 0 || L->m % 16 != 0) return QG_ERR_spqr_rows_not_multiple;
    if (L->n == 0 || L->n > QG_SPQR_MAX_N) return QG_ERR_spqr_cols_out_of_range;
    if (batch < 1 || batch > QG_SPQR_MAX_BATCH) return QG_ERR_spqr_batch_out_of_range;
    if ((dwork == nullptr || (reinterpret_cast<uintptr_t>(dwork) & 15) != 0) && qg_spqr_cuda_work_bytes(L->n, batch) != 0)
        return QG_ERR_argument_invalid;
    return launch(L, (const uint16_t *)dx, batch, dy_f32, dy_f16, (uint16_t *)dwork, (cudaStream_t)stream);
}
