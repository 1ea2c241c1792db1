/* SpQR on the GPU: one fused kernel for dense 3-bit tiles + fp16 outliers (CSR or PTCSR) + the column
 * permutation, batch 1..16, dense part on tensor cores, float32 accumulation, float32 and/or fp16 outputs.
 *
 * Work split. A block of 8 warps owns RB tile rows (16 output rows each); the WC = 8 / RB warps of a
 * tile row split its columns: warp w of a tile row takes the tiles t = w, w + WC, w + 2 WC, ... in
 * ascending order, one mma.sync.m16n8k16 per tile and 8 batch columns, all chained into one float32
 * accumulator. Then the warp's outliers of each row, l = w, w + WC, ... (the l-th outlier of a row is
 * the same word in CSR and PTCSR, so both layouts add the same terms in the same order): the lane with
 * t = ((l - w) / WC) mod 4 takes it, for every batch column, into its own float32 fma chain from +0; the four
 * chains are combined by a fixed butterfly (s0 + s1) + (s2 + s3) and added to the accumulator once.
 * The WC warp sums of a row are then added warp by warp in ascending order. RB (hence WC) depends
 * on (m, n) only, never on the batch, and every batch size runs the same kernel: a column of the mma's
 * B operand and of its result is computed independently of the other columns, so every batch column
 * goes through the same operations whatever the batch size. Results are deterministic and
 * batch-invariant (no atomics).
 *
 * Fragments straight from the dense words. Lane (g, t) = (lane / 4, lane % 4) loads the dense words of
 * tile rows 2g and 2g+1 (one 16-byte load; its four lanes read the same bytes) and decodes only what its
 * mma fragments hold: mma row g is tile row 2g, mma row g+8 is tile row 2g+1, and the lane's four mma
 * columns 2t, 2t+1, 2t+8, 2t+9 are tile columns t, t+4, t+8, t+12 (a fixed permutation of each tile's
 * 16 products, the same for A and B), whose codes two funnel shifts of the word line up in the two halves
 * of a word. The staged x' holds each group of 16 columns in that order, so the lane's B fragment is one
 * 8-byte load. Lane t decodes the second-order word and (s, z) of its two rows for the t-th of four
 * consecutive tiles and passes them to the other lanes of its row group by shuffles. No weight moves
 * between lanes and no barrier sits in the dense loop.
 *
 * Long outlier rows. A row with more than LONG_ROW outliers (one dense outlier row: n of them) would make
 * its warp's chain the block's critical path. Such a row leaves the warps: after the dense part all 256
 * threads of the block take its outliers l = tid, tid + 256, ..., combine their sums by a fixed
 * butterfly and then warp by warp in ascending order (shared memory, two barriers for up to 16 long
 * rows), and the row's output adds that sum last. Whether a row is long depends on its own outlier count
 * only (PTCSR: its leading nonzero words), so the batch size and the layout (CSR or PTCSR) never change a
 * row's order.
 *
 * Activations. x'[i] = x[perm[i]] is staged in shared memory as fp16 (the values themselves, the mma's B
 * operand) in the fragment order of each 16-column group (xpos), batch column b at b * xstride, one
 * chunk of columns at a time for all batch columns; the row stride (xrow) makes the B fragment loads of
 * a half-warp hit distinct banks.
 * The chunk size only changes when the barriers happen, not the order of any sum. At batch 1, when the
 * whole staged x' fits beside it (x_is_raw), x is first copied to shared memory as it is (coalesced) and
 * the gather reads that copy. Else (batch 2..16, wide layers) a first kernel, k_xprime, gathers x' once
 * into a device work area, and every block copies its chunks from there: on sm_90 by bulk copies counted
 * on an mbarrier, else by 16-byte cp.async. The work area also holds x' transposed, so an outlier reads
 * x'[c] of 8 batch columns with one 16-byte load. Outlier columns (unsigned 16-bit) read x' from the
 * staged chunk when it holds all n columns, else from the work area, or x[perm[c]] from the copy.
 *
 * Dequantization is the spec's fp16 sequence with correctly rounded half2 operations, never fused where
 * a product could round (the file is built with --fmad=false and uses the _rn forms): (s, z) =
 * RN16((s_s, z_s) * RN16((s_q, z_q) - (s_z, z_z))), w = RN16(s * RN16(q - z)). A 3-bit code becomes an
 * exact half by an AND (a subnormal) and one exact scaling, and q - z is one fused step whose product is
 * exactly q, so every rounding is the spec's. The decoded weights are exact fp16 values, fed to the
 * tensor core as they are (e_k = 0); their products with the fp16 activations are exact. The padded
 * columns of a partial last tile get weight +0 and activation +0 (their decoded weight may be inf or
 * NaN; the format says they contribute nothing).
 *
 * Numerics as registered: u_acc = QG_MMA_U_ACC (one mma block of 16 exact products is within 2^-21
 * (|c| + sum |p|), reference/spec/numerics.md; a float32 fma or add is within 2^-24), every output a sum
 * of n + (its row's outliers) terms, rounded once to fp16 for the fp16 output. A dense term passes
 * through at most ceil(T / WC) mma blocks (T = ceil(n / 16)), one add of the outlier sum, WC - 1 warp
 * adds and the long row's sum; an outlier term through at most ceil(c / 4 WC) fmas, 2 butterfly adds,
 * the add into the accumulator and the same warp adds. Counting only additions whose operands can both
 * be nonzero (adding an exact zero is exact), neither exceeds the registered n + (longest outlier row)
 * (reference/spec/numerics.md, "SpQR on tensor cores").
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
/* Dynamic shared memory per block (at most; two blocks fit an SM): the staged activations x' (fp16,
 * batch x chunk columns) and, at batch 1 (x_is_raw), a plain copy of x from which x' is gathered. */
constexpr int SMEM_BYTES = 100 * 1024;
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
/* Outlier words in flight per thread in a long row (16 measured slower: spills at batch 1). */
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
    const uint16_t *xp;  /* else x' gathered once by k_xprime: batch rows of xps fp16 values (staged order) */
    const uint16_t *xt;  /* and transposed: x'[c] of all batch columns at c * bp */
    int xps, bp;
    int rloff, ralias; /* batch > 1: red and lsum at byte rloff of the dynamic area, over the staged x' (ralias) */
    int l2pf; /* long rows' outlier words prefetched into L2 at the block's start (QG_CUDA_SPQR_L2PF=0: not) */
};

/* Position of column c in a staged row of x': inside each group of 16 columns, column 4q + t sits at
 * 4t + q, so the four columns t, t+4, t+8, t+12 of mma lane t are one 8-byte load (see tile_mma). */
__host__ __device__ __forceinline__ int xpos(int c) { return (c & ~15) | ((c & 3) << 2) | ((c >> 2) & 3); }

/* Halves per staged batch row for a chunk of ct tiles: 16 ct rounded up to 16 mod 64, so the 8-byte B
 * fragment loads of a half-warp (batch rows g..g+3, lanes t = 0..3) hit distinct banks. */
__host__ __device__ __forceinline__ int xrow(int ct) { return 16 * ct + ((16 - 16 * (ct & 3)) & 63); }

/* The work area the GEMV's blocks use when x does not fit in shared memory: x'_b[c] = x_b[perm[c]] for
 * c < n, +0 up to xps (a multiple of 16), batch row b at b * xps in staged order (xpos), then the same
 * values transposed, column c at xps * batch + c * bp (bp = 8 or 16 >= batch, +0 past the batch), for the
 * outliers: all batch columns of one x'[c] in one or two 16-byte loads. Exact (fp16 copies). */
__global__ void k_xprime(const uint16_t *x, const uint16_t *perm, int n, int batch, int xps, int bp, uint16_t *xp)
{
    const int stride = gridDim.x * blockDim.x, rows = xps * batch, cols = n * bp;
    uint16_t *xt = xp + rows;
    /* both loops write consecutive halves (coalesced); xpos is its own inverse */
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < rows; i += stride) {
        const int b = i / xps, c = xpos(i % xps);
        xp[i] = c < n ? __ldg(x + (size_t)b * (size_t)n + (perm ? __ldg(perm + c) : c)) : (uint16_t)0;
    }
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < cols; i += stride) {
        const int c = i / bp, b = i % bp;
        xt[i] = b < batch ? __ldg(x + (size_t)b * (size_t)n + (perm ? __ldg(perm + c) : c)) : (uint16_t)0;
    }
}

/* d = A * B + c, m16n8k16, fp16 inputs, float32 accumulation (in place). */
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Two 3-bit codes at offset O0 of the low half and O1 of the high half of a word whose exponent fields
 * are 0 (MASK selects them; O <= 7 keeps a code in the mantissa) are the subnormals q 2^(O0-24) and
 * q' 2^(O1-24) exactly; times SCALE = (2^(15-O0), 2^(15-O1)) (fp16 values, exact) they are (q, q') 2^-9.
 * RN16(q - z) is then one fused step q 2^-9 * 2^9 - z: its product is exactly q, so the single rounding
 * is the spec's; w = RN16(s * RN16(q - z)). */
template <uint32_t MASK, uint32_t SCALE>
__device__ __forceinline__ uint32_t pair_weights(uint32_t codes, __half2 s2, __half2 nz2)
{
    const __half2 q9 = __hmul2_rn(u32_as_half2(codes & MASK), u32_as_half2(SCALE)); /* exact */
    const __half2 w = __hmul2_rn(s2, __hfma2(q9, u32_as_half2(0x60006000u), nz2));
    uint32_t r;
    memcpy(&r, &w, 4);
    return r;
}

/* The A fragment words of one row for lane t: mma columns (2t, 2t+1) hold tile columns (t, t+4), mma
 * columns (2t+8, 2t+9) hold (t+8, t+12) (a fixed permutation of the 16 products; B uses the same).
 * Code j sits at bit 6 + 3j of the row's word: a right shift by sh = 2 + 3t puts codes t, t+4 at bits 4
 * and 16 (offsets 4 and 0), one by sh + 21 puts codes t+8, t+12 at bits 7 and 19 (offsets 7 and 3; t = 3
 * shifts by 32, the clamped funnel shift's high word). sz = (s, z) of the row. */
__device__ __forceinline__ void row_frag(uint32_t lo, uint32_t hi, uint32_t sh, uint32_t sz, uint32_t &w0, uint32_t &w1)
{
    const __half2 s2 = __low2half2(u32_as_half2(sz)), nz2 = __hneg2(__high2half2(u32_as_half2(sz)));
    w0 = pair_weights<0x00070070u, 0x78006800u>(__funnelshift_r(lo, hi, sh), s2, nz2);
    w1 = pair_weights<0x00380380u, 0x6C005C00u>(__funnelshift_rc(lo, hi, sh + 21u), s2, nz2);
#ifdef QG_CUDA_MUTANT_SPQR_PAIR_SWAP
    w1 = __byte_perm(w1, 0u, 0x1032); /* a GPU-machine mutant: columns t+8 and t+12 exchanged */
#endif
}

constexpr int NT_MAX = 2; /* mma column tiles: batch columns 8 nt .. 8 nt + 7 */

/* (s, z) of one row as a half2: the first-order scale and zero from its word's low half and the tile's
 * second-order statistics ss = (s_s, z_s), zz = (s_z, z_z). (s_q, z_q): bits 0-2 at offset 0 of the low
 * half, bits 3-5 at offset 3 of the high half; OR-ed with the exponent field 25 - offset each is the half
 * 2^(10-offset) + code, and subtracting (1024, 128) leaves the code exactly. */
__device__ __forceinline__ uint32_t row_sz(uint32_t lo, __half2 ss, __half2 zz)
{
    const uint32_t f = __byte_perm(lo, 0u, 0x1010);
    const __half2 sqzq = __hsub2_rn(u32_as_half2((f & (7u | (7u << 19))) | 0x58006400u), u32_as_half2(0x58006400u)); /* exact */
    const __half2 sz = __hmul2_rn(ss, __hsub2_rn(sqzq, zz));
    uint32_t r;
    memcpy(&r, &sz, 4);
    return r;
}

/* The tile's second-order word from its 8 row groups: lane group g holds byte g in bits 22-29 of hi (row
 * 2g's word; the host checked that row 2g+1's copy is equal); groups 0..3 gather the low 32 bits
 * ss = (s_s, z_s), groups 4..7 the high ones zz = (s_z, z_z), and swap. */
__device__ __forceinline__ void second_order(uint32_t hi, int g, __half2 &ss, __half2 &zz)
{
    uint32_t part = ((hi >> 22) & 0xFFu) << (8 * (g & 3));
    part |= __shfl_xor_sync(0xFFFFFFFFu, part, 4);
    part |= __shfl_xor_sync(0xFFFFFFFFu, part, 8);
    const uint32_t other = __shfl_xor_sync(0xFFFFFFFFu, part, 16);
    ss = u32_as_half2(g < 4 ? part : other);
    zz = u32_as_half2(g < 4 ? other : part);
}

/* acc[nt] += A * B_nt for the tile's A fragment a and B_nt column j = x' of batch column 8 nt + j over
 * its 16 columns (xt: the tile's first column of batch column 0 in the staged chunk, staged order; one
 * 8-byte load). Lanes whose batch column does not exist read batch column B-1 again (their results are
 * never stored; a column of the product depends on its own B column only). */
template <int B>
__device__ __forceinline__ void tile_product(float (&acc)[NT_MAX][4], const uint32_t (&a)[4], const __half *xt, int xstride, int g, int t4)
{
#pragma unroll
    for (int nt = 0; nt < (B + 7) / 8; nt++) {
        const int bc = min(8 * nt + g, B - 1);
        const uint2 bb = *reinterpret_cast<const uint2 *>(xt + bc * xstride + 4 * t4);
        mma16816(acc[nt], a, bb.x, bb.y);
    }
}

/* One tile into the warp's accumulators: its decoded weights (mma row g = tile row 2g, row g+8 = tile
 * row 2g+1, columns as in row_frag) times x' (tile_product). wd: dense words of rows 2g and 2g+1;
 * sh = 2 + 3t (row_frag). PARTIAL: columns >= nv get weight +0 (x' is +0 there). */
template <int B, bool PARTIAL>
__device__ __forceinline__ void tile_mma(const uint4 wd, const __half *xt, int xstride, int g, int t4, uint32_t sh, int nv,
                                         float (&acc)[NT_MAX][4])
{
    __half2 ss, zz;
    second_order(wd.y, g, ss, zz);
    uint32_t a[4];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const uint32_t lo = r ? wd.z : wd.x, hi = r ? wd.w : wd.y;
        uint32_t w0, w1;
        row_frag(lo, hi, sh, row_sz(lo, ss, zz), w0, w1); /* columns (t, t+4), (t+8, t+12) */
        if (PARTIAL) {
            w0 &= (t4 < nv ? 0xFFFFu : 0u) | (t4 + 4 < nv ? 0xFFFF0000u : 0u);
            w1 &= (t4 + 8 < nv ? 0xFFFFu : 0u) | (t4 + 12 < nv ? 0xFFFF0000u : 0u);
        }
        a[r] = w0;
        a[2 + r] = w1;
    }
    tile_product<B>(acc, a, xt, xstride, g, t4);
}

/* Four tiles of the warp's chain (words cu[0..3], x' at xt[u]) with the per-row work shared: lane
 * (g, t4) rebuilds the second-order word of tile t4 and decodes (s, z) of its rows 2g, 2g+1 there, and
 * the four lanes of a row group pass them on by shuffles; then each tile's weights and mma as in
 * tile_mma. The same values and the same mma sequence as four tile_mma calls. */
template <int B>
__device__ __forceinline__ void tiles4_mma(const uint4 *cu, const __half *const *xt, int xstride, int g, int t4, uint32_t sh,
                                           float (&acc)[NT_MAX][4])
{
    const int lane = 4 * g + t4;
    uint32_t hiA = cu[0].y, loA = cu[0].x, loB = cu[0].z;
#pragma unroll
    for (int u = 1; u < 4; u++)
        if (t4 == u) {
            hiA = cu[u].y;
            loA = cu[u].x;
            loB = cu[u].z;
        }
    __half2 ss, zz;
    second_order(hiA, g, ss, zz);
    const uint32_t szA = row_sz(loA, ss, zz), szB = row_sz(loB, ss, zz);
#pragma unroll
    for (int u = 0; u < 4; u++) {
        const int src = (lane & ~3) | u;
        const uint32_t sz2[2] = {__shfl_sync(0xFFFFFFFFu, szA, src), __shfl_sync(0xFFFFFFFFu, szB, src)};
        uint32_t a[4];
#pragma unroll
        for (int r = 0; r < 2; r++) row_frag(r ? cu[u].z : cu[u].x, r ? cu[u].w : cu[u].y, sh, sz2[r], a[r], a[2 + r]);
        tile_product<B>(acc, a, xt[u], xstride, g, t4);
    }
}

/* D consecutive tiles of the warp's chain (x' of the u-th at xt0 + u xstep), in order. */
template <int B, int D>
__device__ __forceinline__ void tiles_mma(const uint4 (&cu)[D], const __half *xt0, int xstep, int xstride, int g, int t4, uint32_t sh,
                                          float (&acc)[NT_MAX][4])
{
#pragma unroll
    for (int q = 0; q < D; q += 4) {
        const __half *xt[4];
#pragma unroll
        for (int u = 0; u < 4; u++) xt[u] = xt0 + (q + u) * xstep;
        tiles4_mma<B>(cu + q, xt, xstride, g, t4, sh, acc);
    }
}

/* Whether local row u = 16 rl + k of the block is long. */
__device__ __forceinline__ bool is_long(const unsigned *lmask, int u)
{
    return (lmask[u >> 5] >> (u & 31)) & 1u;
}

/* Where x' is read from: the staged chunk when it holds all n columns (XS_STAGED), else the transposed work
 * area (XS_WORK: one 16-byte load per 8 batch columns), else x itself (XS_X: its shared-memory copy, or
 * global memory; pc is then perm[c]). */
enum { XS_STAGED = 0, XS_WORK = 1, XS_X = 2 };

/* x'[c] of every batch column (pc: the column, or perm[c] for XS_X), read as MODE says. */
template <int B, int MODE>
__device__ __forceinline__ void xprime_at(const kargs &a, const __half *xs, int xstride, const uint16_t *xraw, uint32_t pc, float (&xv)[B])
{
    if constexpr (MODE == XS_STAGED) {
        const int p = xpos((int)pc);
#pragma unroll
        for (int b = 0; b < B; b++) xv[b] = __half2float(xs[b * xstride + p]);
    } else if constexpr (MODE == XS_WORK) {
        const uint4 *q = reinterpret_cast<const uint4 *>(a.xt + (size_t)pc * (size_t)a.bp);
#pragma unroll
        for (int v = 0; v < (B + 7) / 8; v++) {
            const uint4 h = __ldg(q + v);
            const uint32_t hw[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
            for (int i = 0; i < 8; i++)
                if (8 * v + i < B) xv[8 * v + i] = __half2float(__ushort_as_half((uint16_t)(hw[i / 2] >> (16 * (i % 2)))));
        }
    } else {
#pragma unroll
        for (int b = 0; b < B; b++) {
            const uint16_t h = a.raw ? xraw[(uint32_t)b * (uint32_t)a.n + pc] : __ldg(a.x + (size_t)b * (size_t)a.n + pc);
            xv[b] = __half2float(__ushort_as_half(h));
        }
    }
}

template <int B>
__device__ __forceinline__ void xprime_col(const kargs &a, bool whole, const __half *xs, int xstride, const uint16_t *xraw, uint32_t pc,
                                           float (&xv)[B])
{
    if (whole) xprime_at<B, XS_STAGED>(a, xs, xstride, xraw, pc, xv);
    else if (a.xp) xprime_at<B, XS_WORK>(a, xs, xstride, xraw, pc, xv);
    else xprime_at<B, XS_X>(a, xs, xstride, xraw, pc, xv);
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

/* One thread's part of a long row's outlier sum: its outliers l = tid, tid + THREADS, ... in ascending
 * order, one fma each (CSR word first + l, PTCSR word first + 16 l; a PTCSR pad word, 0, adds nothing).
 * Two rounds of UL words are in flight: round j + UL THREADS loads while round j is summed. At batch
 * <= 4 nothing inside a round branches: an out-of-range slot holds word 0 (column 0, read and not
 * added), so every x' read of the round issues before its fmas, and the fmas are predicated; wider
 * batches skip the slot. */
template <int B, int MODE>
__device__ __forceinline__ void long_row_part(const kargs &a, int first, int cnt, int RP, bool ptcsr, const __half *xs, int xstride,
                                              const uint16_t *xraw, float (&part)[B])
{
    const int tid = threadIdx.x, stride = THREADS;
    /* round j: slot v holds word first + (j + v THREADS) RP, or 0 past the row's cnt outliers */
    auto round = [&](int j, uint32_t(&w)[UL]) {
#pragma unroll
        for (int v = 0; v < UL; v++) {
            const int l = j + v * stride;
            w[v] = l < cnt ? __ldg(a.cv + first + l * RP) : 0u;
        }
    };
    uint32_t w[UL];
    round(tid, w);
    for (int j = tid; j < cnt; j += UL * stride) {
        uint32_t wn[UL];
        round(j + UL * stride, wn);
#pragma unroll
        for (int v = 0; v < UL; v++) {
            const bool add = j + v * stride < cnt && !(ptcsr && w[v] == 0u);
            if (B > 4 && !add) continue; /* wide batches: an empty slot's B reads and fmas cost more than the branch */
            const uint32_t c = w[v] & 0xFFFFu;
            const uint32_t pc = (MODE == XS_X && a.perm) ? (uint32_t)__ldg(a.perm + c) : c;
            float xv[B];
            xprime_at<B, MODE>(a, xs, xstride, xraw, pc, xv);
            const float val = __half2float(__ushort_as_half((uint16_t)(w[v] >> 16)));
#pragma unroll
            for (int b = 0; b < B; b++)
                if (add) part[b] = __fmaf_rn(val, xv[b], part[b]);
        }
#pragma unroll
        for (int v = 0; v < UL; v++) w[v] = wn[v];
    }
}

/* The long rows of the block, one after another (ascending), each by all THREADS threads: the row's l-th
 * outlier (CSR word ro[row] + l, PTCSR word ro[R] + 16 l + k, the same term) goes to thread l % 256, whose
 * chain takes l = tid, tid + 256, ... in ascending order (long_row_part). The thread sums are combined by
 * a fixed butterfly inside the warp (xor 1, 2, 4, 8, 16), then warp by warp in ascending order through
 * shared memory: lsum[row][b]. The warp sums of up to 16 long rows wait in red (16 x WARPS x B floats, its
 * size) for one pair of barriers. No atomics; the same operations for every batch column and in both
 * layouts, so the order depends on the layer's values only. A term passes through at most
 * ceil(cnt / 256) - 1 + 5 + 7 additions before lsum and one more into the output (cnt > LONG_ROW): fewer
 * than the registered n + (longest outlier row).
 * Called by every thread of the block (it has barriers); xs holds x' when one chunk covers all n columns
 * (it then still holds it), else x'[c] is read from the work area, or as x[perm[c]] from the copy or
 * from memory. */
template <int B>
__device__ __forceinline__ void long_rows(const kargs &a, const unsigned *lmask, const int *plen, float *red, float *lsum,
                                          const __half *xs, const uint16_t *xraw, int xstride)
{
    constexpr int GROUP = 16; /* long rows a pair of barriers: red holds WARPS x 16 x B floats */
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const bool ptcsr = a.kind == QG_SPQR_OUTLIERS_PTCSR;
    const int RP = ptcsr ? 16 : 1;
    const int mode = a.ct >= a.T ? XS_STAGED : a.xp ? XS_WORK : XS_X;
    int left = 0; /* long rows in the block */
#pragma unroll
    for (int w4 = 0; w4 < 4; w4++) left += __popc(lmask[w4]);
    int nl = 0, gfirst = 0; /* rows waiting in red, and the first one's local index */
    for (int u = 0; left > 0; u++) {
        if (!is_long(lmask, u)) continue;
        left--;
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
        if (mode == XS_STAGED) long_row_part<B, XS_STAGED>(a, first, cnt, RP, ptcsr, xs, xstride, xraw, part);
        else if (mode == XS_WORK) long_row_part<B, XS_WORK>(a, first, cnt, RP, ptcsr, xs, xstride, xraw, part);
        else long_row_part<B, XS_X>(a, first, cnt, RP, ptcsr, xs, xstride, xraw, part);
#pragma unroll
        for (int b = 0; b < B; b++) {
            float v = part[b];
#pragma unroll
            for (int m = 1; m < 32; m <<= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, m);
            part[b] = v;
        }
        if (nl == 0) gfirst = u;
        if (lane == 0)
#pragma unroll
            for (int b = 0; b < B; b++) red[(nl * WARPS + warp) * B + b] = part[b];
        if (++nl == GROUP || left == 0) {
            __syncthreads();
            if (tid < nl * B) {
                /* thread (r, b): the r-th long row of the group */
                const int r = tid / B, b = tid % B;
                int ur = gfirst;
                for (int i = 0; i < r; i++)
                    do ur++;
                    while (!is_long(lmask, ur));
#ifdef QG_CUDA_MUTANT_SPQR_LONG_GROUP
                ur = gfirst; /* a GPU-machine mutant: every row of a group reduced into its first row's slot */
#endif
                float s = red[(r * WARPS) * B + b];
                for (int w = 1; w < WARPS; w++) s += red[(r * WARPS + w) * B + b];
                lsum[ur * B + b] = s;
            }
            __syncthreads();
            nl = 0;
        }
    }
}

/* Dense tiles a warp has in flight (one 16-byte load a lane each), and the group its chain is decoded in. */
__host__ __device__ constexpr int dense_ahead(int B) { return B >= 2 && B <= 4 ? 8 : 4; }

/* WC: warps per tile row as a constant (batch 1, where index arithmetic counts), 0: a.wc. */
template <int B, int WC>
__global__ void __launch_bounds__(THREADS, B == 1 ? 4 : 2) k_spqr(const kargs a)
{
    constexpr int NT = (B + 7) / 8;
    extern __shared__ uint4 smem[];
    __half *xs = reinterpret_cast<__half *>(smem);
    const int xstride = xrow(a.ct);
    uint16_t *xraw = reinterpret_cast<uint16_t *>(xs + (size_t)B * (size_t)xstride);
    /* red: the warps' partial sums; lsum: the long rows' outlier sums, (local row, batch column). At
     * batch 1 static; at batch > 1 in the dynamic area at byte rloff (ralias: over the staged x', which
     * nothing reads after the dense part when it took more than one chunk), so that they do not cut the
     * chunk budget by 16.5 KiB at batch 16 */
    __shared__ float red_s[B == 1 ? WARPS * 16 : 1], lsum_s[B == 1 ? WARPS * 16 : 1];
    float *red = B == 1 ? red_s : reinterpret_cast<float *>(reinterpret_cast<char *>(smem) + a.rloff);
    float *lsum = B == 1 ? lsum_s : red + WARPS * 16 * B;
    __shared__ unsigned lmask[4];          /* bit u: local row u = 16 rl + k of this block is long */
    __shared__ int plen[WARPS * 16];       /* PTCSR: a row's own outlier count, where its segment is long */
#if QG_CUDA_MBAR
    __shared__ uint64_t xbar; /* x' from the work area: the bulk copies of a chunk */
#endif
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
    const int S = WC > 0 ? WC : a.wc; /* warps per tile row = the stride of a warp's tiles */
    const int rloc = warp / S, wcol = warp % S;
    const int R = blockIdx.x * a.rb + rloc;
    const bool valid = R < a.RT;
    const uint32_t sh = 2u + 3u * (uint32_t)t4; /* see row_frag */
    /* Dense loads in flight per lane: D tiles ahead (one 16-byte load each). */
    constexpr int D = dense_ahead(B);
    const uint4 *wbase = a.dense + (size_t)(valid ? R : 0) * (size_t)a.T * 8 + g;

    float acc[NT_MAX][4];
#pragma unroll
    for (int nt = 0; nt < NT_MAX; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++) acc[nt][i] = 0.0f;

#if QG_CUDA_MBAR
    uint32_t xphase = 0; /* the parity of xbar's phase the next chunk completes */
    if (a.xp && tid == 0) {
        mbar_init((uint32_t)__cvta_generic_to_shared(&xbar), 1);
        mbar_init_fence(); /* published to the other threads by the first chunk's barrier */
    }
#endif
    for (int c0 = 0; c0 < a.T; c0 += a.ct) {
        const int c1 = min(c0 + a.ct, a.T), cend = min(c1, a.Tf);
        /* This warp's tiles of the chunk: t = c0 + wcol + i S < cend; the first D in flight before the
         * activations are staged. wp/rem: the next tile's words and how many tile indices are left. */
        const size_t wstep = (size_t)S * 8;
        int rem = cend - (c0 + wcol);
        const uint4 *wp = wbase + (size_t)(c0 + wcol) * 8;
        uint4 bufA[D], bufB[D];
#pragma unroll
        for (int u = 0; u < D; u++)
            if (valid && u * S < rem) bufA[u] = __ldcs(wp + u * wstep);
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
#if QG_CUDA_MBAR
            /* A row of many rounds of long-row loads (more than PF_ROUNDS x UL x THREADS outliers: a dense
             * row of 28672 takes 14 rounds): its outlier words into L2 now, in the background of the dense
             * part, so that each round of the long-row pass after it waits on L2, not DRAM. Only when the
             * data arrives changes. (Rows of one or two rounds, as at 5% outliers, measured 2% slower
             * with it on 8192 x 28672.) */
            if (lng && a.l2pf) { /* lng: a valid row of this block (and PTCSR: plen[u] set) */
                const bool csr = a.kind == QG_SPQR_OUTLIERS_CSR;
                const int first = csr ? a.ro[16 * Ru + k] : a.ro[Ru], last = csr ? a.ro[16 * Ru + k + 1] : a.ro[Ru + 1];
                /* the row's words (PTCSR: its tile row's segment, every 16th word the row's), 16-byte aligned */
                const size_t b0 = __cvta_generic_to_global(a.cv + first) & ~(size_t)15;
                const size_t b1 = (__cvta_generic_to_global(a.cv + last) + 15) & ~(size_t)15;
                constexpr int PF_ROUNDS = 2; /* rows of more rounds of UL words a thread are prefetched */
                if ((csr ? last - first : plen[u]) > PF_ROUNDS * UL * THREADS)
                    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(b0), "r"((uint32_t)(b1 - b0)) : "memory");
            }
#endif
            const unsigned bal = __ballot_sync(0xFFFFFFFFu, lng);
            if (lane == 0) lmask[warp] = bal;
        }
#if QG_CUDA_MBAR
        if (B > 1 && c0 == 0 && warp == 4 && lane < a.rb && a.kind != QG_SPQR_OUTLIERS_NONE && blockIdx.x * a.rb + lane < a.RT) {
            /* The outlier words of tile row `lane` of this block (CSR: its 16 rows' words, contiguous; PTCSR:
             * its segment) into L2 now, so that the outlier pass after the dense part waits on L2, not DRAM.
             * Only when the data arrives changes. Batch 1 measured no faster with it (csr-5% 1-2% slower). */
            const int Rl = blockIdx.x * a.rb + lane, csr = a.kind == QG_SPQR_OUTLIERS_CSR;
            const int first = csr ? a.ro[16 * Rl] : a.ro[Rl], last = csr ? a.ro[16 * Rl + 16] : a.ro[Rl + 1];
            const size_t b0 = __cvta_generic_to_global(a.cv + first) & ~(size_t)15;
            const size_t b1 = (__cvta_generic_to_global(a.cv + last) + 15) & ~(size_t)15;
            if (last > first)
                asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(b0), "r"((uint32_t)(b1 - b0)) : "memory");
        }
#endif
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
        /* x'_b[c0*16 + i] for the chunk as fp16, 8 columns (one 16-byte store) per thread step; columns
         * past n are +0. */
        const int len = (c1 - c0) * 16, col0 = c0 * 16;
        const bool pvec = a.perm != nullptr && (reinterpret_cast<uintptr_t>(a.perm) & 15) == 0;
        if (a.xp) {
            /* copied from the gathered x' (xps and col0 are multiples of 16 and the work area is 16-byte
             * aligned): on sm_90 one bulk copy a batch row, issued by thread 0 and counted on xbar (the
             * barrier above ordered every earlier read of xs before them), else 16-byte cp.async through
             * L1 (the other block on the SM copies the same chunk at about the same time) */
#if QG_CUDA_MBAR
            const uint32_t bar = (uint32_t)__cvta_generic_to_shared(&xbar);
            if (tid == 0) {
                const uint32_t bytes = (uint32_t)len * 2u, dst = (uint32_t)__cvta_generic_to_shared(xs);
                fence_proxy_async();
                mbar_expect_tx(bar, bytes * (uint32_t)B);
                for (int b = 0; b < B; b++)
                    bulk_copy(dst + 2u * (uint32_t)(b * xstride), a.xp + (size_t)b * (size_t)a.xps + (size_t)col0, bytes, bar);
            }
            mbar_wait(bar, xphase);
            xphase ^= 1u;
#else
            const int units = len / 8, drow = xstride / 8; /* 16-byte units of a chunk's batch row, of a staged row */
            const size_t srow = (size_t)a.xps / 8;           /* and of a work-area row */
            const uint4 *src = reinterpret_cast<const uint4 *>(a.xp + col0);
            uint4 *dst = reinterpret_cast<uint4 *>(xs);
#pragma unroll
            for (int b = 0; b < B; b++)
                for (int e = tid; e < units; e += THREADS) cp_async16_ca(dst + b * drow + e, src + b * srow + e);
            cp_async_commit();
            cp_async_wait<0>();
#endif
        }
#pragma unroll(B <= 2 ? 2 : 1)
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
                uint32_t h[8];
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    const uint16_t hv = a.raw ? xraw[(uint32_t)b * (uint32_t)a.n + pc[e]] : __ldg(a.x + (size_t)b * (size_t)a.n + pc[e]);
                    h[e] = col0 + i0 + e < a.n ? (uint32_t)hv : 0u;
                }
                /* columns i0 + e and i0 + e + 4 sit side by side in staged order (xpos) */
#pragma unroll
                for (int e = 0; e < 4; e++) *reinterpret_cast<uint32_t *>(xs + b * xstride + xpos(i0 + e)) = h[e] | (h[e + 4] << 16);
            }
        }
        __syncthreads();
        if (valid) {
            const __half *xcur = xs + wcol * 16;
            const int xstep = S * 16;
            /* Steps where all D tiles exist (warp-uniform), loading the next D into the other buffer
             * (two buffers, so no register copies), then the pending buffer's remaining tiles. */
            bool pendB = false;
            for (;;) {
                if ((D - 1) * S >= rem) break;
                wp += D * wstep;
                rem -= D * S;
#pragma unroll
                for (int u = 0; u < D; u++)
                    if (u * S < rem) bufB[u] = __ldcs(wp + u * wstep);
                tiles_mma<B, D>(bufA, xcur, xstep, xstride, g, t4, sh, acc);
                xcur += D * xstep;
                if ((D - 1) * S >= rem) {
                    pendB = true;
                    break;
                }
                wp += D * wstep;
                rem -= D * S;
#pragma unroll
                for (int u = 0; u < D; u++)
                    if (u * S < rem) bufA[u] = __ldcs(wp + u * wstep);
                tiles_mma<B, D>(bufB, xcur, xstep, xstride, g, t4, sh, acc);
                xcur += D * xstep;
            }
            if (pendB)
#pragma unroll
                for (int u = 0; u < D; u++) bufA[u] = bufB[u];
#pragma unroll
            for (int u = 0; u < D; u++)
                if (u * S < rem) tile_mma<B, false>(bufA[u], xcur + u * xstep, xstride, g, t4, sh, 16, acc);
            /* The partial last tile (n % 16 columns) is the last of its warp's chain; it sits in the last chunk. */
            if (c1 == a.T && a.Tf < a.T && (a.T - 1) % S == wcol) {
                const uint4 wd = __ldcs(wbase + (size_t)(a.T - 1) * 8);
                tile_mma<B, true>(wd, xs + (a.T - 1 - c0) * 16, xstride, g, t4, sh, a.n - 16 * (a.T - 1), acc);
            }
        }
    }

    if (valid) {
        /* Outliers of rows 2g and 2g+1, batch columns 8 nt + 2 t4 + e: this warp takes l = wcol, wcol + S,
         * ..., split into four ascending sub-chains (below), U at a time per row (the words, then their
         * permuted columns, then the products: loads in flight together). The l-th outlier of row 16R + k is word ro[row] + l (CSR)
         * or ro[R] + 16 l + k (PTCSR, where 0 words are padding: they only end a row, and contribute
         * nothing). */
        constexpr int U = B <= 4 ? 8 : 4;
        int first[2] = {0, 0}, cnt[2] = {0, 0}, step = 1;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int k = 2 * g + r;
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
        /* Lane t4 takes the sub-chain l = wcol + S (4 i + t4), i = 0, 1, ... (ascending) of both rows for
         * every batch column, from +0; the four sub-chains of a row are combined by a fixed butterfly
         * (xor 1, xor 2: every lane gets (s0 + s1) + (s2 + s3)) and the total is added to the row's
         * accumulator once. The split depends on the row's outliers only, never on the batch. */
        float part[2][B];
#pragma unroll
        for (int r = 0; r < 2; r++)
#pragma unroll
            for (int b = 0; b < B; b++) part[r][b] = 0.0f;
        const int S4 = 4 * S;
        for (int j = wcol + S * t4; j < most; j += U * S4) {
            uint32_t w[2][U], pc[2][U];
#pragma unroll
            for (int r = 0; r < 2; r++)
#pragma unroll
                for (int u = 0; u < U; u++) {
                    const int l = j + u * S4;
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
                    if (j + u * S4 >= cnt[r] || (a.kind == QG_SPQR_OUTLIERS_PTCSR && w[r][u] == 0)) continue;
                    const float v = __half2float(__ushort_as_half((uint16_t)(w[r][u] >> 16)));
                    float xv[B];
                    xprime_col<B>(a, whole, xs, xstride, xraw, pc[r][u], xv);
#pragma unroll
                    for (int b = 0; b < B; b++) part[r][b] = __fmaf_rn(v, xv[b], part[r][b]);
                }
        }
#pragma unroll
        for (int r = 0; r < 2; r++) {
            if (cnt[r] <= wcol) continue; /* this warp has none of the row's outliers (the same for the row's 4 lanes) */
#pragma unroll
            for (int b = 0; b < B; b++) {
                float v = part[r][b];
                v += __shfl_xor_sync(0xFFFFFFFFu & (0xFu << (lane & ~3)), v, 1);
                v += __shfl_xor_sync(0xFFFFFFFFu & (0xFu << (lane & ~3)), v, 2);
                part[r][b] = v;
            }
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float tot = 0.0f;
#pragma unroll
                    for (int tt = 0; tt < 4; tt++)
                        if (t4 == tt && 8 * nt + 2 * tt + e < B) tot = part[r][8 * nt + 2 * tt + e];
                    acc[nt][2 * r + e] += tot;
                }
        }
    }

    if (B > 1 && a.ralias) __syncthreads(); /* every warp is done with the staged x' that red and lsum overlay */
    long_rows<B>(a, lmask, plen, red, lsum, xs, xraw, xstride);

    /* Fixed-order reduction: warps of the tile row in ascending order; a long row's outlier sum (lsum)
     * is added last. Lane (g, t4) holds rows 2g + r, batch columns 8 nt + 2 t4 + e in acc[nt][2r + e]. */
    if (S == 1) {
        if (valid)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int r = 0; r < 2; r++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const int b = 8 * nt + 2 * t4 + e, k = 2 * g + r;
                        if (b >= B) continue;
                        const size_t o = (size_t)b * (size_t)a.m + (size_t)(16 * R + k);
                        float s = acc[nt][2 * r + e];
                        if (is_long(lmask, 16 * rloc + k)) s += lsum[(16 * rloc + k) * B + b];
                        if (a.y32) a.y32[o] = s;
                        if (a.y16) a.y16[o] = f32_to_f16_bits(s);
                    }
    } else {
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int r = 0; r < 2; r++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int b = 8 * nt + 2 * t4 + e;
                    if (b < B) red[(warp * 16 + 2 * g + r) * B + b] = acc[nt][2 * r + e];
                }
        __syncthreads();
        for (int idx = tid; idx < a.rb * 16 * B; idx += THREADS) {
            const int rl = idx / (16 * B), k = (idx / B) % 16, b = idx % B, Rr = blockIdx.x * a.rb + rl;
            if (Rr >= a.RT) continue;
            float s = red[((rl * S) * 16 + k) * B + b];
            for (int w = 1; w < S; w++) s += red[((rl * S + w) * 16 + k) * B + b];
            if (is_long(lmask, 16 * rl + k)) s += lsum[(16 * rl + k) * B + b];
            const size_t o = (size_t)b * (size_t)a.m + (size_t)(16 * Rr + k);
            if (a.y32) a.y32[o] = s;
            if (a.y16) a.y16[o] = f32_to_f16_bits(s);
        }
    }
}

/* Whether x (batch x n fp16) is copied to shared memory as it is and x' gathered from that copy by every
 * block; else x' is gathered once into the work area by k_xprime and the blocks copy their chunks from
 * there. Only at batch 1, and only where the whole staged x' fits beside the copy: a wide layer (n > about
 * 25000) reads x' from the work area instead, so it is staged in one chunk (no barrier inside the dense
 * loop, outliers read it from shared memory, not through perm) and a block needs half the shared memory.
 * At batch 2..4 the gather once measured 1.1-1.6x faster on the H200 than each block gathering x' from its
 * copy, where x fitted. Only where x' comes from changes, never a sum's order. */
inline bool x_is_raw(size_t n, size_t batch)
{
    if (batch > 1) return false;
    const size_t raw = (n * 2 + 15) / 16 * 16;
    return raw + (size_t)xrow((int)((n + 15) / 16)) * 2 <= (size_t)SMEM_BYTES;
}

template <int B>
int launch_b(const kargs &a0, uint16_t *work, cudaStream_t s)
{
    static int attr_set = 0;     /* the opt-in above 48 KiB set, per instantiation (bit wc) */
    static size_t attr_max = 0;  /* and its largest value (batch > 1: one kernel) */
    kargs a = a0;
    const int S = a.wc;
    const size_t raw_bytes = ((size_t)a.n * B * 2 + 15) / 16 * 16;
    a.raw = x_is_raw((size_t)a.n, B);
    a.xp = nullptr;
    a.xt = nullptr;
    a.xps = a.T * 16;
    a.bp = B <= 8 ? 8 : 16;
    if (!a.raw) {
        const int threads = 256, blocks = min((a.xps * a.bp + threads - 1) / threads, 8 * 132);
        k_xprime<<<blocks, threads, 0, s>>>(a.x, a.perm, a.n, B, a.xps, a.bp, work);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return qg_cuda_fail("k_xprime launch", e);
        a.xp = work;
        a.xt = work + (size_t)a.xps * B;
    }
    /* ct tiles a chunk: B rows of xrow(ct) <= 16 ct + 48 halves in `bytes` */
    auto tiles_in = [](long bytes) { return bytes < 96 * B ? 0 : (int)((bytes / (2 * B) - 48) / 16); };
    void (*kern)(kargs);
    if constexpr (B == 1) kern = a.wc == 1 ? k_spqr<1, 1> : a.wc == 2 ? k_spqr<1, 2> : a.wc == 4 ? k_spqr<1, 4> : k_spqr<1, 8>;
    else kern = k_spqr<B, 0>;
    /* Dynamic shared memory a block may take so that two blocks (B > 1) share an SM beside their static
     * arrays; read once from the device (at batch 1 SMEM_BYTES, four blocks an SM where x' is small). Only
     * the chunk size follows from it, never a sum's order. */
    static long budget = 0;
    if (budget == 0) {
        budget = SMEM_BYTES;
        cudaFuncAttributes fa;
        int dev = 0, per_sm = 0, reserved = 0;
        if (B > 1 && cudaGetDevice(&dev) == cudaSuccess && cudaFuncGetAttributes(&fa, kern) == cudaSuccess &&
            cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, dev) == cudaSuccess) {
            const long two = (long)per_sm / 2 - (long)reserved - (long)fa.sharedSizeBytes;
            if (two >= 32 * 1024) budget = two;
        }
    }
    const long rawb = a.raw ? (long)raw_bytes : 0;
    const int tmax = (a.T + S - 1) / S * S;
    /* batch > 1: red and lsum (rl bytes) beside a whole x', or over a chunked one */
    const long rl = B > 1 ? 2L * WARPS * 16 * B * (long)sizeof(float) : 0;
    int ct = tiles_in(budget - rawb);
    if (ct < S) ct = tiles_in((long)SMEM_BYTES - rawb); /* a smaller SM: two blocks leave no room beside the copy of x */
    ct -= ct % S; /* >= S: with the copy of x (batch 1) the whole staged x' fits beside it */
    if (ct < tmax && a.raw && a.perm != nullptr && a.kind != QG_SPQR_OUTLIERS_NONE) {
        int cl = tiles_in((long)SMEM_L1 - rawb);
        cl -= cl % S;
        if (cl >= S && cl < ct) ct = cl;
    }
    if (B > 1 && ct >= tmax && tmax > S && tiles_in(budget - rl) < tmax) ct = tmax - S; /* x' fits, but not beside red and lsum: chunked */
    if (ct >= tmax) {
        ct = tmax;
    } else {
        /* as few chunks as fit, of even size: a multiple of D S where that does not add a chunk (each
         * warp's share is then whole groups of D tiles, none decoded one by one), else of S */
        const int nch = (tmax + ct - 1) / ct, even = (tmax + nch - 1) / nch;
        const int ds = dense_ahead(B) * S, up_ds = (even + ds - 1) / ds * ds, up_s = (even + S - 1) / S * S;
        ct = up_ds <= ct ? up_ds : up_s;
    }
    a.ct = ct;
    size_t smem = (size_t)B * (size_t)xrow(ct) * 2 + (a.raw ? raw_bytes : 0);
    a.rloff = 0;
    a.ralias = 0;
    if constexpr (B > 1) {
        if (ct < tmax && smem >= (size_t)rl) {
            a.ralias = 1; /* nothing reads a chunked x' after the dense part */
        } else {
            a.rloff = (int)((smem + 15) / 16 * 16);
            smem = (size_t)a.rloff + (size_t)rl;
        }
    }
    /* the opt-in above 48 KiB, raised as needed (bit wc: the batch-1 kernels by warp split) */
    if (!(attr_set & (1 << a.wc)) || smem > attr_max) {
        const size_t want = smem > (size_t)SMEM_BYTES ? smem : (size_t)SMEM_BYTES;
        cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)want);
        if (e != cudaSuccess) return qg_cuda_fail("cudaFuncSetAttribute(k_spqr)", e);
        attr_set |= 1 << a.wc;
        if (want > attr_max) attr_max = want;
    }
    const unsigned grid = (unsigned)((a.RT + a.rb - 1) / a.rb);
    kern<<<grid, THREADS, smem, s>>>(a);
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
    const char *pf = getenv("QG_CUDA_SPQR_L2PF"); /* a timing knob: the same operations either way */
    a.l2pf = !(pf != nullptr && pf[0] == '0' && pf[1] == '\0');
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
    /* staged-order rows (batch x xps), then the transposed copy (n x bp); xps * batch halves keep 16-byte
     * alignment since xps is a multiple of 16 */
    return ((n + 15) / 16 * 16 * batch + n * (batch <= 8 ? 8 : 16)) * sizeof(uint16_t);
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
