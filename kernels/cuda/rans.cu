/* rANS-compressed int8 tiles on the GPU: tile decoder, fused decode + dequant + GEMV, and the plain int8
 * W8A16 GEMV baseline with the same pinned summation order (spec: reference/spec/rans.md).
 *
 * Decoder. A tile is decoded by 8 warps of 32 lanes (the format's warps); lane r owns tile row r and its
 * rANS state. Per column step every lane decodes one symbol through a 4096-entry slot table in shared
 * memory, entry (f - 1) | bias << 12 | (s ^ 0x80) << 24 (bias = slot - cum(s)), x' = f * (x >> 12) + bias
 * = (f - 1) * (x >> 12) + (x >> 12) + bias (one 32-bit shared load per symbol); lanes
 * whose state fell below L = 2^15 take one 16-bit word each from their warp's stream, lower lane first
 * (ballot + popcount of the lanes below). The stream is staged through a 1024-word ring per warp in
 * shared memory, filled 256 words at a time one quarter ahead (register prefetch), so the renormalization
 * read is a shared-memory load. The read pointer only grows: reads past the warp's end land in the ring
 * (never outside memory) and are reported as TRUNCATED from the final pointer, exactly when the
 * reference's first read past the end would have stopped it.
 *
 * Error order (as the reference): warps ascending, each truncated > trailing_data > final state != L
 * (corrupt); then nonzero payload padding or nonzero bytes outside the matrix (corrupt); then the
 * Adler-32 checksum. Each tile writes one status word; the host reports the lowest failing tile and
 * never presents a failing call's outputs (they stay as the caller had them). No device asserts or traps.
 *
 * Predictors (mod 256): mode 1 is a running sum along the lane's own row; modes 2 and 3 need the row
 * above, so their tiles go through the staged path (tile bytes in shared memory, column prefix sums).
 * Mode 3 = mode 1 along rows, then mode 2 down columns.
 *
 * Fused product, bit-exact: p_j[r][b] = sum over c ascending of float(q) * float(x[c][b]) from 0.0f.
 * Each lane owns its row, so the sum is a sequential per-lane chain; int8 x fp16 products are exact in
 * float32, so __fmaf_rn(q, x, acc) rounds exactly like acc + q * x. Columns past K see x = 0 and q = 0
 * (checked), and acc is never -0 (it starts at +0 and RN sums that cancel give +0), so they change
 * nothing. Partials go to a global buffer; a second kernel sums t = p_0 + p_1 + ... in ascending j from
 * 0.0f and stores t * scale[r] (float32 and/or RN fp16). No atomics: deterministic and batch-invariant
 * (every batch column runs the same operations whatever the batch size; the batch is padded to 1, 2, 4,
 * 8 or 16 columns of zeros that are computed and never stored).
 *
 * float(q) without I2F: 0x4B000000 | (s ^ 0x80) is the float 2^23 + (s ^ 0x80), exactly; minus
 * (2^23 + 128) it is the signed value of the byte s.
 */
#include <cuda_fp16.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.cuh"
#include "qgold/cuda.h"
#include "qgold/fp16.h"
#include "qgold/kernels_rans.h"
#include "qgold/rans.h"

namespace {

constexpr int TS = 256;                  /* tile side = lanes per tile */
constexpr int NW = 8;                    /* warps per tile */
constexpr uint32_t LST = 1u << 15;       /* L */
constexpr int RING = 1024;               /* words per warp ring (4 quarters of 256) */
constexpr int SROW = TS + 4;             /* staged tile row stride in bytes: lane r's words hit bank (r + c/4) % 32 */
constexpr float MAGIC = 8388736.0f;      /* 2^23 + 128 */
constexpr uint32_t FBITS = 0x4B000000u;  /* bits of 2^23 */

__device__ __forceinline__ float byte_to_float(uint32_t flipped, uint32_t sel)
{
    /* flipped: a word whose selected byte holds s ^ 0x80; sel picks that byte into byte 0 over 0x4B0000. */
    return __uint_as_float(__byte_perm(flipped, FBITS, sel)) - MAGIC;
}

/* The flipped byte of one decode step in a word: mode 1 (running sum along the row), b' = s' + b'_prev +
 * 0x80 (mod 256) in byte 0 of acc1; mode 0, the table entry itself, s ^ 0x80 in byte 3. */
template <bool MODE1>
__device__ __forceinline__ uint32_t step_byte(uint32_t e, uint32_t &acc1)
{
    if (!MODE1) return e;
    acc1 = (e >> 24) + acc1 + 0x80u;
    return acc1;
}

/* The signed byte of a step_byte word as a float: 2^23 + (s ^ 0x80) built without a byte-select operand
 * (an OR in mode 1, a shifted add in mode 0), minus 2^23 + 128: exact. */
template <bool MODE1>
__device__ __forceinline__ float step_float(uint32_t v)
{
    const uint32_t bits = MODE1 ? (v & 0xFFu) | FBITS : FBITS + (v >> 24);
    return __uint_as_float(bits) - MAGIC;
}

/* Four consecutive steps' bytes (step_byte words) as one little-endian word of true bytes. */
template <bool MODE1>
__device__ __forceinline__ uint32_t pack4(const uint32_t v[4])
{
    const uint32_t sel = MODE1 ? 0x0040u : 0x0073u;
    return __byte_perm(__byte_perm(v[0], v[1], sel), __byte_perm(v[2], v[3], sel), 0x5410u) ^ 0x80808080u;
}

/* Activations x[c .. c+3][0 .. BP) of a [c][b] block: 4 BP consecutive floats, BP 16-byte loads. */
template <int BP>
__device__ __forceinline__ void load_x4(const float *xc, float *xv)
{
    const float4 *x4 = reinterpret_cast<const float4 *>(xc);
#pragma unroll
    for (int k4 = 0; k4 < BP; k4++) {
        const float4 f = x4[k4];
        xv[4 * k4] = f.x;
        xv[4 * k4 + 1] = f.y;
        xv[4 * k4 + 2] = f.z;
        xv[4 * k4 + 3] = f.w;
    }
}

__device__ __forceinline__ uint64_t ld64(const uint8_t *p) { return *reinterpret_cast<const uint64_t *>(p); }
__device__ __forceinline__ uint32_t ld32(const uint8_t *p) { return *reinterpret_cast<const uint32_t *>(p); }

__device__ __forceinline__ uint16_t f32_to_f16_bits(float v)
{
    uint32_t b = __float_as_uint(v);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)(((b >> 16) & 0x8000u) | 0x7E00u | ((b >> 13) & 0x3FFu));
    return __half_as_ushort(__float2half_rn(v));
}

/* One tile as the kernels see it (all fields from the checked container in device memory). */
struct TileRef {
    const uint8_t *pay; /* payload */
    uint64_t size;      /* data_size */
    uint32_t checksum, mode, nr, nc, ti, tj;
};

__device__ __forceinline__ TileRef tile_ref(const uint8_t *buf, uint64_t meta_off, uint32_t tiles_c, uint32_t M, uint32_t K,
                                            uint32_t k)
{
    const uint8_t *m = buf + meta_off + 32ull * k;
    TileRef t;
    t.pay = buf + ld64(m);
    t.size = ld64(m + 8);
    t.checksum = ld32(m + 16);
    t.mode = m[20];
    t.ti = k / tiles_c;
    t.tj = k % tiles_c;
    const uint32_t rr = M - t.ti * TS, cc = K - t.tj * TS;
    t.nr = rr < TS ? rr : TS;
    t.nc = cc < TS ? cc : TS;
    return t;
}

/* Per-warp stream reader: absolute word indices are relative to a = (warp start) & ~7, so every 8-word
 * chunk is 16-byte aligned in global memory (the words array starts 1056 = 16 * 66 bytes into a 16-byte
 * aligned payload). Quarter k = words [256k, 256k + 256) (one chunk per lane) lives in ring slot k & 3.
 * Invariant while the read pointer is in quarter q: quarters q, q+1, q+2 are in the ring and `pf` holds
 * this lane's chunk of quarter q+3, loaded about 18 steps before it is stored, which covers the memory
 * latency. A group of at most 8 steps reads at most 256 words (one quarter) past the pointer and moves
 * it by at most one quarter, so checking for a quarter crossing once per group suffices. Chunks at or
 * past the warp's end are never loaded; the last one loaded ends inside the payload's 16-byte rounding. */
struct Stream {
    const uint4 *src; /* global, at word a */
    uint4 *ring;      /* shared, 128 chunks */
    uint32_t p;       /* read pointer relative to a, in bytes (warp-uniform) */
    uint32_t end;     /* warp end relative to a */
    uint32_t q;       /* quarter of p */
    uint4 pf;
};

__device__ __forceinline__ uint4 chunk_load(const Stream &s, uint32_t quarter, int lane)
{
    const uint32_t w = 256u * quarter + 8u * (uint32_t)lane;
    return w < s.end ? __ldg(s.src + w / 8) : make_uint4(0u, 0u, 0u, 0u);
}

__device__ __forceinline__ void stream_init(Stream &s, const uint8_t *pay, int warp, int lane, uint4 *ring)
{
    const uint32_t *we = reinterpret_cast<const uint32_t *>(pay + 1024);
    const uint32_t start = warp > 0 ? we[warp - 1] : 0u, end = we[warp];
    const uint32_t a = start & ~7u;
    s.src = reinterpret_cast<const uint4 *>(pay + 1056) + a / 8;
    s.ring = ring;
    s.p = 2u * (start - a);
    s.end = end - a;
    s.q = 0;
    uint4 c[3];
    for (uint32_t k = 0; k < 3; k++) c[k] = chunk_load(s, k, lane);
    s.pf = chunk_load(s, 3, lane);
    for (uint32_t k = 0; k < 3; k++) s.ring[(32u * k + (uint32_t)lane) & 127u] = c[k];
    __syncwarp();
}

__device__ __forceinline__ void stream_advance(Stream &s, int lane)
{
    if ((s.p >> 9) != s.q) { /* warp-uniform; crossed exactly one quarter */
        s.ring[(32u * (s.q + 3) + (uint32_t)lane) & 127u] = s.pf;
        s.q++;
        s.pf = chunk_load(s, s.q + 3, lane);
        __syncwarp();
    }
}

/* 32-bit shared-window loads: the addresses below are built with one or two integer operations, and no
 * generic-to-shared conversion is redone per symbol. The "memory" clobber keeps them after the ring
 * refills (stores plus __syncwarp) that precede them in program order. */
__device__ __forceinline__ uint32_t lds_u32(uint32_t addr)
{
    uint32_t v;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
    return v;
}

__device__ __forceinline__ uint32_t lds_u16(uint32_t addr)
{
    unsigned short v;
    asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(addr) : "memory");
    return v;
}

__device__ __forceinline__ uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* One decode step of every lane; returns the table entry (s ^ 0x80 in its top byte). tab32: the slot
 * table's shared address; ring32: this warp's ring. Every lane reads its would-be renormalization word
 * (the ring is always readable) and keeps it only if its state fell below L. */
__device__ __forceinline__ uint32_t dstep(uint32_t &x, Stream &s, uint32_t tab32, uint32_t ring32, uint32_t lt)
{
    /* the table address as (x & 4095) then one shift-and-add (written in PTX: the compiler would
     * otherwise shift first and need a separate mask and add) */
    uint32_t ta;
    asm("{ .reg .b32 t; and.b32 t, %1, 4095; shl.b32 t, t, 2; add.u32 %0, t, %2; }" : "=r"(ta) : "r"(x), "r"(tab32));
    const uint32_t e = lds_u32(ta);
    const uint32_t hi = x >> 12;
    x = hi * (e & 0xFFFu) + (hi + ((e >> 12) & 0xFFFu));
    const bool need = x < LST;
    const uint32_t m = __ballot_sync(0xFFFFFFFFu, need);
    const uint32_t word = lds_u16(((s.p + 2u * __popc(m & lt)) & (2u * RING - 2u)) | ring32); /* ring32 % (2 RING) == 0 */
    x = need ? __byte_perm(word, x, 0x5410) : x; /* (x << 16) | word */
    s.p += 2u * __popc(m);
    return e;
}

/* Shared pieces of every decoding block: the slot table and the warp rings, with one spare ring's worth
 * of space so that the rings can start at a multiple of their size (see warp_ring). */
struct DecShared {
    __align__(16) uint32_t tab[4096];
    uint4 ring[NW + 1][RING / 8];
    uint32_t wcode[NW];
    uint32_t red[NW][3];
};

/* Warp w's ring (2 RING bytes) at a shared address that is a multiple of 2 RING, so a ring offset is ORed
 * into it: one instruction per renormalization read. The alignment is made at run time, since a static
 * shared variable's window address is not known at compile time. */
__device__ __forceinline__ uint4 *warp_ring(DecShared &sh, int w)
{
    const uint32_t a = smem_addr(sh.ring);
    const uint32_t pad = ((a + (2u * RING - 1u)) & ~(2u * RING - 1u)) - a;
    return reinterpret_cast<uint4 *>(reinterpret_cast<unsigned char *>(sh.ring) + pad) + (size_t)w * (RING / 8);
}

/* The 16 KB slot table into shared memory: blocks have 256 threads, so four independent 16-byte loads
 * per thread, all in flight at once (gtab comes from cudaMalloc: 16-byte aligned). */
__device__ __forceinline__ void load_table(DecShared &sh, const uint32_t *gtab)
{
    const uint4 *g = reinterpret_cast<const uint4 *>(gtab);
    uint4 *d = reinterpret_cast<uint4 *>(sh.tab);
    uint4 v[4];
#pragma unroll
    for (int j = 0; j < 4; j++) v[j] = __ldg(g + threadIdx.x + 256 * j);
#pragma unroll
    for (int j = 0; j < 4; j++) d[threadIdx.x + 256 * j] = v[j];
}

/* Per-warp verdict after 256 steps (reference order inside a warp). */
__device__ __forceinline__ uint32_t warp_verdict(const Stream &s, uint32_t x)
{
    const uint32_t bad = __ballot_sync(0xFFFFFFFFu, x != LST);
    if (s.p > 2u * s.end) return QG_ERR_rans_truncated;
    if (s.p < 2u * s.end) return QG_ERR_rans_trailing_data;
    return bad ? (uint32_t)QG_ERR_rans_corrupt : 0u;
}

/* Adler-32 of the tile from per-row sums: A = 1 + sum b, B = 65536 + sum_i (65536 - i) b_i with
 * i = 256 r + c, so row r contributes (65536 - 256 r) S0 - S1 (S0 = sum b, S1 = sum c b; both fit). */
__device__ __forceinline__ uint32_t block_adler(DecShared &sh, int r, uint32_t s0, uint32_t s1)
{
    uint64_t bsum = (uint64_t)(65536u - 256u * (uint32_t)r) * s0 - s1;
    uint32_t asum = s0;
    for (int o = 16; o > 0; o >>= 1) {
        asum += __shfl_xor_sync(0xFFFFFFFFu, asum, o);
        bsum += __shfl_xor_sync(0xFFFFFFFFu, bsum, o);
    }
    const int w = threadIdx.x >> 5;
    if ((threadIdx.x & 31) == 0) {
        sh.red[w][0] = asum;
        sh.red[w][1] = (uint32_t)bsum;
        sh.red[w][2] = (uint32_t)(bsum >> 32);
    }
    __syncthreads();
    uint64_t A = 1, B = 65536;
    for (int i = 0; i < NW; i++) {
        A += sh.red[i][0];
        B += (uint64_t)sh.red[i][1] | ((uint64_t)sh.red[i][2] << 32);
    }
    return (uint32_t)((B % 65521u) << 16 | (A % 65521u));
}

/* Nonzero bytes between the end of the words and data_size (at most 15). */
__device__ __forceinline__ bool pad_nonzero(const TileRef &t)
{
    const uint32_t we7 = ld32(t.pay + 1024 + 28);
    bool bad = false;
    for (uint64_t i = 1056ull + 2ull * we7; i < t.size; i++) bad |= t.pay[i] != 0;
    return bad;
}

/* Combines the verdicts (thread 0 writes the status word). `extra_bad`: the block-wide OR of
 * "nonzero outside the matrix"; adler: the computed checksum when checksums are on. */
__device__ __forceinline__ void finish_status(DecShared &sh, const TileRef &t, bool extra_bad, bool chk, uint32_t adler,
                                              uint32_t *status, uint32_t k)
{
    if (threadIdx.x == 0) {
        uint32_t code = 0;
        for (int w = 0; w < NW && code == 0; w++) code = sh.wcode[w];
        if (code == 0 && (extra_bad || pad_nonzero(t))) code = QG_ERR_rans_corrupt;
        if (code == 0 && chk && adler != t.checksum) code = QG_ERR_rans_checksum;
        status[k] = code;
    }
}

/* ---- fast path: predictor modes 0 and 1, the tile streamed through registers -------------------------- */

/* OUT < 0: decode to w (row stride K, K % 16 == 0); OUT = BP > 0: fused GEMV with BP padded batch
 * columns of xf (float [tiles_c * 256][BP]), partials to part[(j * batch + b) * M + row]. */
template <int OUT, bool MODE1>
__device__ __forceinline__ void fast_tile(DecShared &sh, const TileRef &t, bool chk, uint32_t M, uint32_t K, uint8_t *w,
                                          const float *xf, size_t batch, float *part, uint32_t *status, uint32_t k)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, r = threadIdx.x;
    const uint32_t lt = (1u << lane) - 1u;
    Stream s;
    uint32_t x = reinterpret_cast<const uint32_t *>(t.pay)[r]; /* issued before the stream's loads wait */
    uint4 *ring = warp_ring(sh, warp);
    stream_init(s, t.pay, warp, lane, ring);
    const uint32_t tab32 = smem_addr(sh.tab), ring32 = smem_addr(ring);
    const bool edge = t.nr < TS || t.nc < TS, slow = edge || chk;
    const bool rowout = (uint32_t)r >= t.nr;
    uint32_t acc1 = 0x80u; /* mode 1: previous byte, flipped (b ^ 0x80); b[-1] = 0 */
    uint32_t outside = 0, s0 = 0, s1 = 0;
    constexpr int BP = OUT > 0 ? OUT : 1;
    float acc[BP];
#pragma unroll
    for (int b = 0; b < BP; b++) acc[b] = 0.0f;
    uint32_t pk0 = 0, pk1 = 0, pk2 = 0; /* decode: the previous three words of the current 16 bytes */
    const float *xt = xf; /* shared: this tile's columns */
    uint8_t *wrow = OUT < 0 ? w + ((size_t)t.ti * TS + (size_t)r) * K + (size_t)t.tj * TS : nullptr;
    if (OUT > 0 && OUT <= 4 && !slow) {
        /* GEMV of up to 4 columns over an interior tile without checksums: groups of 8 steps (one
         * crossing check each, see Stream), each symbol multiplied in as it is decoded; the order of
         * every lane's sum is unchanged */
#pragma unroll 1
        for (int c0 = 0; c0 < TS; c0 += 8) {
#pragma unroll
            for (int h = 0; h < 8; h += 4) {
                float xv[4 * BP];
                load_x4<BP>(xt + (size_t)(c0 + h) * BP, xv);
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const float qf = step_float<MODE1>(step_byte<MODE1>(dstep(x, s, tab32, ring32, lt), acc1));
#pragma unroll
                    for (int b = 0; b < BP; b++) acc[b] = __fmaf_rn(qf, xv[i * BP + b], acc[b]);
                }
            }
            stream_advance(s, lane);
        }
    } else
#pragma unroll 1
    for (int c0 = 0; c0 < TS; c0 += 4) {
        uint32_t v[4]; /* flipped byte values in byte 0 (mode 1) or byte 3 (mode 0) */
#pragma unroll
        for (int i = 0; i < 4; i++) v[i] = step_byte<MODE1>(dstep(x, s, tab32, ring32, lt), acc1);
        stream_advance(s, lane);
        /* four flipped bytes in one word, then the true bytes: only the decoder, edge tiles and
         * checksums need them (slow is tile-uniform) */
        uint32_t four = 0;
        if (OUT < 0 || slow) {
            four = pack4<MODE1>(v);
            if (edge) {
                if (rowout || (uint32_t)c0 + 4 > t.nc) {
                    for (int i = 0; i < 4; i++)
                        if (rowout || (uint32_t)(c0 + i) >= t.nc) outside |= (four >> (8 * i)) & 0xFFu;
                }
            }
            if (chk) {
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const uint32_t b = (four >> (8 * i)) & 0xFFu;
                    s0 += b;
                    s1 += (uint32_t)(c0 + i) * b;
                }
            }
        }
        if (OUT < 0) {
            if ((c0 & 15) == 12 && !rowout && (uint32_t)c0 < t.nc)
                *reinterpret_cast<uint4 *>(wrow + (c0 - 12)) = make_uint4(pk0, pk1, pk2, four);
            pk0 = pk1;
            pk1 = pk2;
            pk2 = four;
        } else {
            float xv[4 * BP];
            load_x4<BP>(xt + (size_t)c0 * BP, xv); /* warp-uniform */
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float qf = step_float<MODE1>(v[i]);
#pragma unroll
                for (int b = 0; b < BP; b++) acc[b] = __fmaf_rn(qf, xv[i * BP + b], acc[b]);
            }
        }
    }
    const uint32_t code = warp_verdict(s, x);
    if (lane == 0) sh.wcode[warp] = code;
    const bool anyout = __syncthreads_or(outside != 0) != 0;
    const uint32_t adler = chk ? block_adler(sh, r, s0, s1) : 0u;
    finish_status(sh, t, anyout, chk, adler, status, k);
    if (OUT > 0 && !rowout) {
        const size_t row = (size_t)t.ti * TS + (size_t)r;
#pragma unroll
        for (int b = 0; b < BP; b++)
            if ((size_t)b < batch) part[((size_t)t.tj * batch + b) * M + row] = acc[b];
    }
}

/* Six blocks (48 warps) per SM where the registers allow: the decode chain is latency-bound. */
template <int OUT>
__global__ void __launch_bounds__(256, OUT >= 8 ? 3 : 6) k_fast(const uint8_t *buf, uint64_t meta_off, uint32_t M, uint32_t K, uint32_t tiles_c,
                                              uint32_t ntiles, uint32_t flags, const uint32_t *gtab, uint8_t *w, const float *xf,
                                              size_t batch, float *part, uint32_t *status)
{
    __shared__ DecShared sh;
    /* this tile's activations, [c][b]: static below 16 columns, dynamic (16 KB, past the static limit) at 16 */
    constexpr int XN = OUT > 0 ? TS * OUT / 4 : 0;
    __shared__ __align__(16) float4 xst[OUT > 0 && OUT < 16 ? XN : 1];
    extern __shared__ float4 xdyn[];
    float4 *xs = OUT >= 16 ? xdyn : xst;
    load_table(sh, gtab);
    const bool chk = (flags & 1u) != 0;
    for (uint32_t k = blockIdx.x; k < ntiles; k += gridDim.x) {
        const TileRef t = tile_ref(buf, meta_off, tiles_c, M, K, k);
        if (XN > 0) {
            const float4 *src = reinterpret_cast<const float4 *>(xf) + (size_t)t.tj * XN;
            for (int i = threadIdx.x; i < XN; i += blockDim.x) xs[i] = __ldg(src + i);
        }
        __syncthreads();
        const float *xp = XN > 0 ? reinterpret_cast<const float *>(xs) : xf;
        if (t.mode == 1) fast_tile<OUT, true>(sh, t, chk, M, K, w, xp, batch, part, status, k);
        else fast_tile<OUT, false>(sh, t, chk, M, K, w, xp, batch, part, status, k);
        __syncthreads(); /* rings, wcode and red are reused by the next tile */
    }
}

/* ---- staged path: any predictor; the tile's bytes in shared memory ------------------------------------ */

struct StageShared {
    DecShared d;
    uint32_t st[TS * SROW / 4];
};

template <bool MODE1>
__device__ __forceinline__ uint32_t staged_decode(StageShared &sh, const TileRef &t, Stream &s, int r, uint32_t lt)
{
    const uint32_t tab32 = smem_addr(sh.d.tab), ring32 = smem_addr(warp_ring(sh.d, r >> 5));
    uint32_t x = reinterpret_cast<const uint32_t *>(t.pay)[r];
    uint32_t acc1 = 0x80u;
    const int lane = r & 31;
#pragma unroll 1
    for (int c0 = 0; c0 < TS; c0 += 4) {
        uint32_t v[4];
#pragma unroll
        for (int i = 0; i < 4; i++) v[i] = step_byte<MODE1>(dstep(x, s, tab32, ring32, lt), acc1);
        stream_advance(s, lane);
        sh.st[r * (SROW / 4) + c0 / 4] = pack4<MODE1>(v);
    }
    return x;
}

/* OUT < 0: decode to w (any K); OUT = BP > 0: fused GEMV as in fast_tile. */
template <int OUT>
__global__ void __launch_bounds__(256) k_staged(const uint8_t *buf, uint64_t meta_off, uint32_t M, uint32_t K, uint32_t tiles_c,
                                                uint32_t ntiles, uint32_t flags, const uint32_t *gtab, uint8_t *w, const float *xf,
                                                size_t batch, float *part, uint32_t *status)
{
    extern __shared__ __align__(16) unsigned char smem[];
    StageShared &sh = *reinterpret_cast<StageShared *>(smem);
    load_table(sh.d, gtab);
    __syncthreads();
    const bool chk = (flags & 1u) != 0;
    const int r = threadIdx.x, lane = r & 31, warp = r >> 5;
    const uint32_t lt = (1u << lane) - 1u;
    uint8_t *st8 = reinterpret_cast<uint8_t *>(sh.st);
    for (uint32_t k = blockIdx.x; k < ntiles; k += gridDim.x) {
        const TileRef t = tile_ref(buf, meta_off, tiles_c, M, K, k);
        Stream s;
        stream_init(s, t.pay, warp, lane, warp_ring(sh.d, warp));
        const uint32_t x = (t.mode & 1u) ? staged_decode<true>(sh, t, s, r, lt) : staged_decode<false>(sh, t, s, r, lt);
        const uint32_t code = warp_verdict(s, x);
        if (lane == 0) sh.d.wcode[warp] = code;
        __syncthreads();
        if (t.mode >= 2) { /* column prefix sums mod 256: thread c walks down column c */
            uint32_t a = 0;
            for (int rr = 0; rr < TS; rr++) {
                a += st8[rr * SROW + r];
                st8[rr * SROW + r] = (uint8_t)a;
            }
            __syncthreads();
        }
        /* checks on row r */
        const bool rowout = (uint32_t)r >= t.nr;
        uint32_t outside = 0, s0 = 0, s1 = 0;
        for (int c = 0; c < TS; c++) {
            const uint32_t b = st8[r * SROW + ((c + r) & 255)]; /* rotated start: lanes hit different banks */
            const uint32_t cc = (uint32_t)((c + r) & 255);
            if (rowout || cc >= t.nc) outside |= b;
            s0 += b;
            s1 += cc * b;
        }
        const bool anyout = __syncthreads_or(outside != 0) != 0;
        const uint32_t adler = chk ? block_adler(sh.d, r, s0, s1) : 0u;
        finish_status(sh.d, t, anyout, chk, adler, status, k);
        if (OUT < 0) { /* coalesced: 256 threads write one row of the tile at a time */
            for (uint32_t rr = 0; rr < t.nr; rr++)
                if ((uint32_t)r < t.nc) w[((size_t)t.ti * TS + rr) * K + (size_t)t.tj * TS + r] = st8[rr * SROW + r];
        } else if (!rowout) {
            constexpr int BP = OUT > 0 ? OUT : 1;
            float acc[BP];
#pragma unroll
            for (int b = 0; b < BP; b++) acc[b] = 0.0f;
            const float *xt = xf + (size_t)t.tj * TS * BP;
#pragma unroll 1
            for (int c0 = 0; c0 < TS; c0 += 4) {
                const uint32_t four = sh.st[r * (SROW / 4) + c0 / 4] ^ 0x80808080u;
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const float qf = byte_to_float(four, 0x7440u + (uint32_t)i);
#pragma unroll
                    for (int b = 0; b < BP; b++) acc[b] = __fmaf_rn(qf, __ldg(xt + (size_t)(c0 + i) * BP + b), acc[b]);
                }
            }
            const size_t row = (size_t)t.ti * TS + (size_t)r;
#pragma unroll
            for (int b = 0; b < BP; b++)
                if ((size_t)b < batch) part[((size_t)t.tj * batch + b) * M + row] = acc[b];
        }
        __syncthreads();
    }
}

/* ---- GEMV plumbing shared by the fused kernel and the int8 baseline ------------------------------------ */

/* xf[c][b] = float(x[b][c]) for c < K, b < batch; 0 elsewhere (c < ncols, b < BP). */
__global__ void k_xprep(const __half *x, uint32_t K, size_t batch, int BP, uint32_t ncols, float *xf)
{
    const size_t n = (size_t)ncols * BP;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t c = i / BP, b = i % BP;
        xf[i] = (c < K && b < batch) ? __half2float(x[b * K + c]) : 0.0f;
    }
}

/* y[b][r] = (((0 + p_0) + p_1) + ...) * scale[r]. */
__global__ void k_reduce(const float *part, uint32_t tiles_c, uint32_t M, size_t batch, const float *scale, float *y32,
                         uint16_t *y16)
{
    const size_t n = (size_t)M * batch;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t b = i / M, r = i % M;
        float t = 0.0f;
        for (uint32_t j = 0; j < tiles_c; j++) t = t + part[((size_t)j * batch + b) * M + r];
        const float y = t * scale[r];
        if (y32) y32[i] = y;
        if (y16) y16[i] = f32_to_f16_bits(y);
    }
}

/* ---- the plain int8 GEMV -------------------------------------------------------------------------------
 * One warp per (group of 32 R rows, tile column j): lane l owns rows 32 i + l of the group (i < R) and
 * runs, for each, the same sequential chain over the tile's columns as the fused kernel; the partials
 * go to the same buffer and the same k_reduce sums them in ascending j. R rows per lane reuse each
 * activation load R times (large batches are bound by those loads and the FMAs). Weights stream as
 * 16-byte loads per row, one 16-column chunk ahead. VEC: K % 16 == 0 (aligned rows); else bytes. */
template <int BP, int R, bool VEC>
__global__ void __launch_bounds__(256) k_int8(const uint8_t *w, uint32_t M, uint32_t K, uint32_t groups, uint32_t tiles_c,
                                              const float *xf, size_t batch, float *part)
{
    const int lane = threadIdx.x & 31;
    const uint64_t task = (uint64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (task >= (uint64_t)groups * tiles_c) return;
    const uint32_t g = (uint32_t)(task % groups), j = (uint32_t)(task / groups);
    const uint32_t c0 = j * TS, nc = K - c0 < (uint32_t)TS ? K - c0 : (uint32_t)TS;
    const float *xt = xf + (size_t)c0 * BP;
    uint32_t row[R];
    const uint8_t *wr[R];
#pragma unroll
    for (int i = 0; i < R; i++) {
        row[i] = g * 32u * R + 32u * i + (uint32_t)lane;
        wr[i] = w + (size_t)(row[i] < M ? row[i] : M - 1) * K + c0; /* rows past M: computed, not stored */
    }
    float acc[R][BP];
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int b = 0; b < BP; b++) acc[i][b] = 0.0f;
    if (VEC && R == 1 && nc == TS) {
        /* Coalesced through shared memory: 4 lanes read 64 contiguous bytes of a row, so a load
         * instruction touches 8 rows instead of 32; each lane then reads its own row back (row stride
         * 80 bytes: the 8 lanes of a quarter-warp hit distinct bank quads). Two 64-column buffers. */
        __shared__ __align__(16) uint4 stage[8][2][32 * 5];
        uint4(*sb)[32 * 5] = stage[threadIdx.x >> 5];
        const int lr = lane >> 2, lq = lane & 3;
        const uint8_t *src[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t rr = g * 32u + 8u * i + (uint32_t)lr;
            src[i] = w + (size_t)(rr < M ? rr : M - 1) * K + c0 + 16 * lq;
        }
        uint4 ld[4];
#pragma unroll
        for (int i = 0; i < 4; i++) ld[i] = __ldg(reinterpret_cast<const uint4 *>(src[i]));
#pragma unroll
        for (int i = 0; i < 4; i++) sb[0][(8 * i + lr) * 5 + lq] = ld[i];
        __syncwarp();
#pragma unroll 1
        for (int ch = 0; ch < 4; ch++) {
            if (ch < 3)
#pragma unroll
                for (int i = 0; i < 4; i++) ld[i] = __ldg(reinterpret_cast<const uint4 *>(src[i] + 64 * (ch + 1)));
#pragma unroll
            for (int q16 = 0; q16 < 4; q16++) {
                const uint4 wv = sb[ch & 1][lane * 5 + q16];
#pragma unroll
                for (int q4 = 0; q4 < 4; q4++) {
                    float xv[4 * BP];
                    const float4 *x4 = reinterpret_cast<const float4 *>(xt + (size_t)(64 * ch + 16 * q16 + 4 * q4) * BP);
#pragma unroll
                    for (int k4 = 0; k4 < BP; k4++) {
                        const float4 f = __ldg(x4 + k4);
                        xv[4 * k4] = f.x;
                        xv[4 * k4 + 1] = f.y;
                        xv[4 * k4 + 2] = f.z;
                        xv[4 * k4 + 3] = f.w;
                    }
                    const uint32_t wd = (q4 == 0 ? wv.x : q4 == 1 ? wv.y : q4 == 2 ? wv.z : wv.w) ^ 0x80808080u;
#pragma unroll
                    for (int q = 0; q < 4; q++) {
                        const float qf = byte_to_float(wd, 0x7440u + (uint32_t)q);
#pragma unroll
                        for (int b = 0; b < BP; b++) acc[0][b] = __fmaf_rn(qf, xv[q * BP + b], acc[0][b]);
                    }
                }
            }
            if (ch < 3) {
#pragma unroll
                for (int i = 0; i < 4; i++) sb[(ch + 1) & 1][(8 * i + lr) * 5 + lq] = ld[i];
                __syncwarp();
            }
        }
    } else if (VEC && nc == TS) {
        uint4 cur[R], nxt[R];
#pragma unroll
        for (int i = 0; i < R; i++) cur[i] = __ldg(reinterpret_cast<const uint4 *>(wr[i]));
#pragma unroll 1
        for (int ch = 0; ch < 16; ch++) {
            if (ch < 15)
#pragma unroll
                for (int i = 0; i < R; i++) nxt[i] = __ldg(reinterpret_cast<const uint4 *>(wr[i]) + ch + 1);
#pragma unroll
            for (int q4 = 0; q4 < 4; q4++) {
                float xv[4 * BP]; /* columns 16 ch + 4 q4 .. + 3 */
                const float4 *x4 = reinterpret_cast<const float4 *>(xt + (size_t)(16 * ch + 4 * q4) * BP);
#pragma unroll
                for (int k4 = 0; k4 < BP; k4++) {
                    const float4 f = __ldg(x4 + k4);
                    xv[4 * k4] = f.x;
                    xv[4 * k4 + 1] = f.y;
                    xv[4 * k4 + 2] = f.z;
                    xv[4 * k4 + 3] = f.w;
                }
#pragma unroll
                for (int i = 0; i < R; i++) {
                    const uint32_t wd = (q4 == 0 ? cur[i].x : q4 == 1 ? cur[i].y : q4 == 2 ? cur[i].z : cur[i].w) ^ 0x80808080u;
#pragma unroll
                    for (int q = 0; q < 4; q++) {
                        const float qf = byte_to_float(wd, 0x7440u + (uint32_t)q);
#pragma unroll
                        for (int b = 0; b < BP; b++) acc[i][b] = __fmaf_rn(qf, xv[q * BP + b], acc[i][b]);
                    }
                }
            }
#pragma unroll
            for (int i = 0; i < R; i++) cur[i] = nxt[i];
        }
    } else {
        for (uint32_t c = 0; c < nc; c++) {
#pragma unroll
            for (int i = 0; i < R; i++) {
                const float qf = byte_to_float((uint32_t)wr[i][c] ^ 0x80u, 0x7440u);
#pragma unroll
                for (int b = 0; b < BP; b++) acc[i][b] = __fmaf_rn(qf, __ldg(xt + (size_t)c * BP + b), acc[i][b]);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < R; i++)
        if (row[i] < M)
#pragma unroll
            for (int b = 0; b < BP; b++)
                if ((size_t)b < batch) part[((size_t)j * batch + b) * M + row[i]] = acc[i][b];
}

int pad_batch(size_t batch) { return batch <= 1 ? 1 : batch <= 2 ? 2 : batch <= 4 ? 4 : batch <= 8 ? 8 : 16; }

int launch_err(const char *what)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? QG_ERR_ok : qg_cuda_fail(what, e);
}

/* One block per tile (the hardware balances the tiles over the SMs; the kernels also loop, so a
 * smaller grid would be correct too). QG_CUDA_RANS_PERSIST=1: as many blocks as fit at once. */
template <typename F>
unsigned grid_for(F kernel, int threads, size_t smem, uint32_t ntiles)
{
    const char *env = getenv("QG_CUDA_RANS_PERSIST");
    if (env == nullptr || env[0] != '1') return ntiles < 0x7FFFFFFFu ? ntiles : 0x7FFFFFFFu;
    int dev = 0, sms = 1, per = 1;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kernel, threads, smem) != cudaSuccess || per < 1) per = 1;
    const uint64_t g = (uint64_t)sms * (uint64_t)per;
    return (unsigned)(g < ntiles ? g : ntiles);
}

template <int OUT>
int launch_dec(const qg_rans_cuda_plan *p, const uint8_t *buf, uint8_t *w, const float *xf, size_t batch, float *part,
               uint32_t *status, cudaStream_t s)
{
    const uint32_t n = p->tiles_r * p->tiles_c;
    if (n == 0) return QG_ERR_ok;
    const uint32_t *tab = (const uint32_t *)p->dtab;
    const bool fast = p->fast && (OUT > 0 || p->K % 16 == 0);
    if (fast) {
        const size_t dyn = OUT >= 16 ? (size_t)TS * OUT * 4 : 0;
        if (dyn > 0) cudaFuncSetAttribute(k_fast<OUT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn);
        cudaFuncSetAttribute(k_fast<OUT>, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
        const unsigned g = grid_for(k_fast<OUT>, 256, dyn, n);
        k_fast<OUT><<<g, 256, dyn, s>>>(buf, p->meta_offset, p->M, p->K, p->tiles_c, n, p->flags, tab, w, xf, batch, part, status);
        return launch_err("k_fast launch");
    }
    const size_t smem = sizeof(StageShared);
    cudaFuncSetAttribute(k_staged<OUT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    cudaFuncSetAttribute(k_staged<OUT>, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
    const unsigned g = grid_for(k_staged<OUT>, 256, smem, n);
    k_staged<OUT><<<g, 256, smem, s>>>(buf, p->meta_offset, p->M, p->K, p->tiles_c, n, p->flags, tab, w, xf, batch, part, status);
    return launch_err("k_staged launch");
}

int reduce_launch(const float *part, uint32_t tiles_c, uint32_t M, size_t batch, const float *scale, float *y32, uint16_t *y16,
                  cudaStream_t s)
{
    const size_t n = (size_t)M * batch;
    if (n == 0) return QG_ERR_ok;
    const unsigned g = (unsigned)((n + 255) / 256 < 65535 * 4 ? (n + 255) / 256 : 65535 * 4);
    k_reduce<<<g, 256, 0, s>>>(part, tiles_c, M, batch, scale, y32, y16);
    return launch_err("k_reduce launch");
}

int xprep_launch(const uint16_t *x, uint32_t K, size_t batch, uint32_t tiles_c, float *xf, cudaStream_t s)
{
    const int BP = pad_batch(batch);
    const size_t n = (size_t)tiles_c * TS * BP;
    if (n == 0) return QG_ERR_ok;
    const unsigned g = (unsigned)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
    k_xprep<<<g, 256, 0, s>>>(reinterpret_cast<const __half *>(x), K, batch, BP, tiles_c * TS, xf);
    return launch_err("k_xprep launch");
}

/* Scratch layout: xf (tiles_c * 256 * 16 floats), then partials (tiles_c * 16 * M floats). */
size_t xf_floats(uint32_t K) { return (size_t)((K + TS - 1) / TS) * TS * QG_RANS_MAX_BATCH; }

/* Slot table from a checked frequency table: entry (f - 1) | (slot - cum(s)) << 12 | (s ^ 0x80) << 24. */
void build_table(const uint16_t freq[256], uint32_t *tab)
{
    uint32_t slot = 0;
    for (uint32_t s = 0; s < 256; s++)
        for (uint32_t k = 0; k < freq[s] && slot < 4096; k++, slot++) {
            tab[slot] = (freq[s] - 1u) | (k << 12) | ((s ^ 0x80u) << 24);
        }
}

/* What the host learns from a container once, without device work: qg_rans_check's fields, whether every
 * tile is predictor mode 0 or 1, and the slot table (*tab: 4096 words, malloc'ed, for the caller to free).
 * p->dtab stays NULL. */
int plan_fill(const uint8_t *buf, size_t len, qg_rans_cuda_plan *p, uint32_t **tab)
{
    memset(p, 0, sizeof *p);
    *tab = nullptr;
    qg_rans_header h;
    int rc = qg_rans_check(buf, len, &h);
    if (rc != QG_ERR_ok) return rc;
    p->M = h.M;
    p->K = h.K;
    p->tiles_r = h.tiles_r;
    p->tiles_c = h.tiles_c;
    p->flags = h.flags;
    p->scales_offset = h.scales_offset;
    p->meta_offset = h.meta_offset;
    p->len = len;
    p->fast = 1;
    const uint64_t n = (uint64_t)h.tiles_r * h.tiles_c;
    for (uint64_t k = 0; k < n; k++) {
        qg_rans_tile_meta t;
        qg_rans_tile_meta_at(buf, &h, (size_t)k, &t);
        if (t.predictor >= 2) p->fast = 0;
    }
    *tab = (uint32_t *)malloc(4096 * 4);
    if (*tab == nullptr) return QG_ERR_alloc_failed;
    build_table(h.freq, *tab);
    return QG_ERR_ok;
}

} // namespace

/* ---- API ------------------------------------------------------------------------------------------------ */

/* The device-resident plan of the benchmarks: plan_fill, then the slot table in a device allocation that
 * lives until qg_rans_cuda_plan_free. */
extern "C" int qg_rans_cuda_plan_make(const uint8_t *buf, size_t len, qg_rans_cuda_plan *p)
{
    if (p == nullptr) return QG_ERR_argument_invalid;
    uint32_t *tab = nullptr;
    int rc = plan_fill(buf, len, p, &tab);
    if (rc != QG_ERR_ok) goto done;
    QG_CUDA_TRY(cudaMalloc(&p->dtab, 4096 * 4));
    QG_CUDA_TRY(cudaMemcpy(p->dtab, tab, 4096 * 4, cudaMemcpyHostToDevice));
done:
    free(tab);
    if (rc != QG_ERR_ok) qg_rans_cuda_plan_free(p);
    return rc;
}

extern "C" void qg_rans_cuda_plan_free(qg_rans_cuda_plan *p)
{
    if (p != nullptr && p->dtab != nullptr) cudaFree(p->dtab);
    if (p != nullptr) p->dtab = nullptr;
}

extern "C" size_t qg_rans_cuda_scratch_bytes(uint32_t M, uint32_t K)
{
    const size_t tc = (K + TS - 1) / TS;
    return 4 * (xf_floats(K) + tc * QG_RANS_MAX_BATCH * (size_t)M);
}

extern "C" int qg_rans_decode_cuda_async(const qg_rans_cuda_plan *p, const void *dbuf, uint8_t *dw, uint32_t *dstatus, void *stream)
{
    return launch_dec<-1>(p, (const uint8_t *)dbuf, dw, nullptr, 0, nullptr, dstatus, (cudaStream_t)stream);
}

extern "C" int qg_rans_gemv_cuda_async(const qg_rans_cuda_plan *p, const void *dbuf, const void *dx, size_t batch, void *dscratch,
                                       uint32_t *dstatus, float *dy32, uint16_t *dy16, void *stream)
{
    if (batch < 1 || batch > QG_RANS_MAX_BATCH) return QG_ERR_rans_batch_out_of_range;
    cudaStream_t s = (cudaStream_t)stream;
    float *xf = (float *)dscratch, *part = xf + xf_floats(p->K);
    int rc = xprep_launch((const uint16_t *)dx, p->K, batch, p->tiles_c, xf, s);
    if (rc != QG_ERR_ok) return rc;
    const uint8_t *buf = (const uint8_t *)dbuf;
    switch (pad_batch(batch)) {
    case 1: rc = launch_dec<1>(p, buf, nullptr, xf, batch, part, dstatus, s); break;
    case 2: rc = launch_dec<2>(p, buf, nullptr, xf, batch, part, dstatus, s); break;
    case 4: rc = launch_dec<4>(p, buf, nullptr, xf, batch, part, dstatus, s); break;
    case 8: rc = launch_dec<8>(p, buf, nullptr, xf, batch, part, dstatus, s); break;
    default: rc = launch_dec<16>(p, buf, nullptr, xf, batch, part, dstatus, s); break;
    }
    if (rc != QG_ERR_ok) return rc;
    return reduce_launch(part, p->tiles_c, p->M, batch, (const float *)(buf + p->scales_offset), dy32, dy16, s);
}

extern "C" int qg_int8_gemv_cuda_async(const void *dw, const float *dscales, size_t M, size_t K, const void *dx, size_t batch,
                                       void *dscratch, float *dy32, uint16_t *dy16, void *stream)
{
    if (batch < 1 || batch > QG_RANS_MAX_BATCH) return QG_ERR_rans_batch_out_of_range;
    if (M > UINT32_MAX || K > UINT32_MAX) return QG_ERR_argument_invalid;
    cudaStream_t s = (cudaStream_t)stream;
    const uint32_t tc = (uint32_t)((K + TS - 1) / TS);
    float *xf = (float *)dscratch, *part = xf + xf_floats((uint32_t)K);
    int rc = xprep_launch((const uint16_t *)dx, (uint32_t)K, batch, tc, xf, s);
    if (rc != QG_ERR_ok || M == 0) return rc;
    const uint8_t *w = (const uint8_t *)dw;
    const bool vec = K % 16 == 0;
    const int BPv = pad_batch(batch);
    int R = BPv >= 8 ? 4 : BPv == 4 ? 2 : 1;
    const char *env = getenv("QG_CUDA_RANS_I8_ROWS"); /* tuning knob; results are identical for every value */
    if (env != nullptr && (env[0] == '1' || env[0] == '2' || env[0] == '4') && env[1] == '\0') R = env[0] - '0';
    const uint32_t groups = (uint32_t)((M + 32u * (unsigned)R - 1) / (32u * (unsigned)R));
    const uint64_t tasks = (uint64_t)groups * tc;
    if (tasks > 0) {
        const unsigned grid = (unsigned)((tasks + 7) / 8);
#define QG_I8(BPV, RV)                                                                                                       \
    if (vec) k_int8<BPV, RV, true><<<grid, 256, 0, s>>>(w, (uint32_t)M, (uint32_t)K, groups, tc, xf, batch, part);          \
    else k_int8<BPV, RV, false><<<grid, 256, 0, s>>>(w, (uint32_t)M, (uint32_t)K, groups, tc, xf, batch, part)
#define QG_I8R(BPV)                 \
    if (R == 1) { QG_I8(BPV, 1); }   \
    else if (R == 2) { QG_I8(BPV, 2); } \
    else { QG_I8(BPV, 4); }
        switch (BPv) {
        case 1: QG_I8R(1) break;
        case 2: QG_I8R(2) break;
        case 4: QG_I8R(4) break;
        case 8: QG_I8R(8) break;
        default: QG_I8R(16) break;
        }
#undef QG_I8R
#undef QG_I8
        if ((rc = launch_err("k_int8 launch")) != QG_ERR_ok) return rc;
    }
    return reduce_launch(part, tc, (uint32_t)M, batch, dscales, dy32, dy16, s);
}

/* ---- host-pointer wrappers ------------------------------------------------------------------------------
 * Each validates with the reference's checks, then runs its asynchronous launcher above (the code the
 * benchmarks time) through qg_cuda_run. The container calls also pass the slot table as an input buffer
 * (no plan on the device) and the per-tile status words as an output. */

namespace {

/* A container call: the host-side plan (dtab unused: the slot table is buffer 1 of the call) and the batch. */
struct rans_call {
    qg_rans_cuda_plan plan;
    size_t batch;
};

/* The container calls' buffers: container, slot table, status words, then their own. */
enum { RB_BUF = 0, RB_TAB = 1, RB_STATUS = 2 };

/* decode: ..., w */
int launch_rans_decode(const void *ctx, void *const *dev, void *stream)
{
    qg_rans_cuda_plan p = ((const rans_call *)ctx)->plan;
    p.dtab = dev[RB_TAB];
    return qg_rans_decode_cuda_async(&p, dev[RB_BUF], (uint8_t *)dev[3], (uint32_t *)dev[RB_STATUS], stream);
}

/* gemv: ..., x, scratch, y32, y16 */
int launch_rans_gemv(const void *ctx, void *const *dev, void *stream)
{
    const rans_call *c = (const rans_call *)ctx;
    qg_rans_cuda_plan p = c->plan;
    p.dtab = dev[RB_TAB];
    return qg_rans_gemv_cuda_async(&p, dev[RB_BUF], dev[3], c->batch, dev[4], (uint32_t *)dev[RB_STATUS], (float *)dev[5],
                                   (uint16_t *)dev[6], stream);
}

/* Runs a container call whose status words (ntiles, poisoned with 0xFF bytes so that a word no tile
 * wrote is an error) are buffer RB_STATUS. The other outputs go to host copies of the caller's bytes and
 * reach the caller only when the run succeeded and every status word is 0; otherwise the lowest failing
 * tile's code is returned and the caller's outputs stay as they were (nothing of a failing call is
 * presented). */
int run_container(qg_cuda_buf *bufs, size_t n, size_t ntiles, qg_cuda_launch_fn launch, const rans_call *c)
{
    enum { MAXB = 8 };
    void *user[MAXB] = {};
    uint32_t *status = nullptr;
    int rc = n <= MAXB ? QG_ERR_ok : QG_ERR_argument_invalid;
    if (rc == QG_ERR_ok && ntiles > 0 && (status = (uint32_t *)malloc(ntiles * 4)) == nullptr) rc = QG_ERR_alloc_failed;
    if (status != nullptr) memset(status, 0xFF, ntiles * 4);
    bufs[RB_STATUS] = {QG_CUDA_OUT, status, ntiles * 4};
    for (size_t i = 0; i < n && rc == QG_ERR_ok; i++) {
        if (i == RB_STATUS || bufs[i].role != QG_CUDA_OUT || bufs[i].bytes == 0) continue;
        void *copy = malloc(bufs[i].bytes);
        if (copy == nullptr) {
            rc = QG_ERR_alloc_failed;
            break;
        }
        memcpy(copy, bufs[i].host, bufs[i].bytes);
        user[i] = bufs[i].host;
        bufs[i].host = copy;
    }
    if (rc == QG_ERR_ok) rc = qg_cuda_run(bufs, n, launch, c);
    for (size_t k = 0; k < ntiles && rc == QG_ERR_ok; k++)
        if (status[k] != 0) rc = (int)status[k];
    for (size_t i = 0; i < n; i++)
        if (user[i] != nullptr) {
            if (rc == QG_ERR_ok) memcpy(user[i], bufs[i].host, bufs[i].bytes);
            free(bufs[i].host);
        }
    free(status);
    return rc;
}

/* int8 baseline: w, scales, x, scratch, y32, y16 */
struct int8_call {
    size_t M, K, batch;
};

int launch_int8_gemv(const void *ctx, void *const *dev, void *stream)
{
    const int8_call *c = (const int8_call *)ctx;
    return qg_int8_gemv_cuda_async(dev[0], (const float *)dev[1], c->M, c->K, dev[2], c->batch, dev[3], (float *)dev[4],
                                   (uint16_t *)dev[5], stream);
}

} // namespace

extern "C" int qg_rans_decode_cuda(const uint8_t *buf, size_t len, uint8_t *w, size_t w_len)
{
    qg_rans_header h;
    int rc = qg_rans_check(buf, len, &h);
    if (rc != QG_ERR_ok) return rc;
    const uint64_t MK = (uint64_t)h.M * h.K;
    if ((uint64_t)w_len != MK) return QG_ERR_rans_size_mismatch;
    if (w == nullptr && MK > 0) return QG_ERR_argument_invalid;
    if (MK == 0) return QG_ERR_ok;
    rans_call c = {};
    uint32_t *tab = nullptr;
    if ((rc = plan_fill(buf, len, &c.plan, &tab)) == QG_ERR_ok) {
        qg_cuda_buf bufs[4] = {{QG_CUDA_IN, (void *)buf, len},
                               {QG_CUDA_IN, tab, 4096 * 4},
                               {},
                               {QG_CUDA_OUT, w, (size_t)MK}};
        rc = run_container(bufs, 4, (size_t)h.tiles_r * h.tiles_c, launch_rans_decode, &c);
    }
    free(tab);
    return rc;
}

extern "C" int qg_rans_gemv_cuda(const uint8_t *buf, size_t len, const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16)
{
    if (batch < 1 || batch > QG_RANS_MAX_BATCH) return QG_ERR_rans_batch_out_of_range;
    if (x == nullptr || (y_f32 == nullptr && y_f16 == nullptr)) return QG_ERR_argument_invalid;
    rans_call c = {};
    c.batch = batch;
    uint32_t *tab = nullptr;
    int rc = plan_fill(buf, len, &c.plan, &tab);
    const qg_rans_cuda_plan &p = c.plan;
    const size_t ny = (size_t)p.M * batch;
    if (rc == QG_ERR_ok && ny > 0) {
        qg_cuda_buf bufs[7] = {{QG_CUDA_IN, (void *)buf, len},
                               {QG_CUDA_IN, tab, 4096 * 4},
                               {},
                               {QG_CUDA_IN, (void *)x, (size_t)p.K * batch * 2},
                               {QG_CUDA_SCRATCH, nullptr, qg_rans_cuda_scratch_bytes(p.M, p.K) + 16},
                               {QG_CUDA_OUT, y_f32, y_f32 ? ny * 4 : 0},
                               {QG_CUDA_OUT, y_f16, y_f16 ? ny * 2 : 0}};
        rc = run_container(bufs, 7, (size_t)p.tiles_r * p.tiles_c, launch_rans_gemv, &c);
    }
    free(tab);
    return rc;
}

extern "C" int qg_int8_gemv_cuda(const uint8_t *w, const float *scales, size_t M, size_t K, const uint16_t *x, size_t batch,
                                 float *y_f32, uint16_t *y_f16)
{
    if (batch < 1 || batch > QG_RANS_MAX_BATCH) return QG_ERR_rans_batch_out_of_range;
    if (x == nullptr || (y_f32 == nullptr && y_f16 == nullptr)) return QG_ERR_argument_invalid;
    if ((M > 0 && K > 0 && w == nullptr) || (M > 0 && scales == nullptr)) return QG_ERR_argument_invalid;
    if (M > UINT32_MAX || K > UINT32_MAX) return QG_ERR_argument_invalid;
    const size_t ny = M * batch;
    if (ny == 0) return QG_ERR_ok;
    const int8_call c = {M, K, batch};
    const qg_cuda_buf bufs[6] = {{QG_CUDA_IN, (void *)w, M * K},
                                 {QG_CUDA_IN, (void *)scales, M * 4},
                                 {QG_CUDA_IN, (void *)x, K * batch * 2},
                                 {QG_CUDA_SCRATCH, nullptr, qg_rans_cuda_scratch_bytes((uint32_t)M, (uint32_t)K) + 16},
                                 {QG_CUDA_OUT, y_f32, y_f32 ? ny * 4 : 0},
                                 {QG_CUDA_OUT, y_f16, y_f16 ? ny * 2 : 0}};
    return qg_cuda_run(bufs, 6, launch_int8_gemv, &c);
}
