/* W4A16 group-wise GEMM on NVIDIA tensor cores (kernels/cuda/int4.cu), its repacked weight layout, and
 * the tensor-core accumulation probe. Present only in builds with CUDA (QG_HAVE_CUDA).
 *
 * Product: y[m][n] = sum_k w[n][k] x[m][k] over the canonical W4A16 layout of qgold/int4.h, x M x K
 * fp16 row-major, y M x N row-major (float32 and/or fp16), M >= 1. Same signature as
 * qg_w4a16_gemv_ref (registry kind QG_KIND_INT4_W4A16_GEMV) with the batch named M.
 *
 * Repacked layout ("tc16"). The weight matrix is the A operand of mma.m16n8k16 (16 output channels x 16
 * inputs per tile), the activations the B operand (16 inputs x 8 rows of x), D = 16 channels x 8 rows.
 *   - Column order: k' = 0..K-1 is the order the kernel walks K. Without g_idx k' = k. With g_idx
 *     (act-order) perm[k'] lists the columns group by group, ascending k within a group (a stable
 *     counting sort on g_idx), so every group is g consecutive k' and x is gathered as x[m][perm[k']].
 *   - N is padded to Np = 16 * ceil(N / 16), K to Kp = 64 * ceil(K / 64); padding codes are 0, padding
 *     rows have scale +0 and zero 8, padding columns meet x = 0.
 *   - Tiles: chunk c holds columns k' = 64 c .. 64 c + 63 as four k-tiles j = 0..3 of 16 (mma's k = 16);
 *     k-tile j takes its columns from the 32-column half h = j / 2 of the chunk: mma k-slot
 *     kappa = 2 t + 8 b + e (t = 0..3, b, e = 0..1; the fragment order of m16n8k16) is column
 *     k' = 64 c + 32 (j / 2) + 8 t + 4 (j % 2) + 2 b + e. So a group of 32 is one half, and the B fragments
 *     of lane t for both k-tiles of a half are the 8 consecutive columns 64 c + 32 h + 8 t .. + 7 of x.
 *   - qw: uint32 words, index ((nt * KC + c) * 32 + lane) * 4 + j for n-tile nt (rows 16 nt ..), chunk c
 *     (KC = Kp / 64), lane 0..31 of the warp, k-tile j. With gr = lane / 4 and t = lane % 4, nibble p
 *     (bits 4p..4p+3) of the word holds A fragment element e = 2 (p % 4) + p / 4: row gr + 8 ((e / 2) % 2),
 *     k-slot 2 t + e % 2 + 8 (e / 4) of the 16 x 16 tile. So (word >> 4r) & 0x000F000F is fragment register
 *     r with its two codes in the two halves, and OR 0x64006400 makes it the fp16 pair (1024 + q0, 1024 + q1)
 *     (the kernels shift only by 8: registers 1 and 3 are masked in place, (1024 + 16 q) pairs, and one
 *     fp16 fma by 2^-4 minus (64 + z) gives the same exact q - z).
 *   - sz: uint32 per (group, row), index grp * Np + n: bits 0..15 the fp16 scale, bits 16..31 the fp16
 *     value 1024 + z (exact: 0x6400 + z).
 *   - perm: K int32 (act-order only).
 *
 * Arithmetic (reference/spec/numerics.md, "W4A16 on tensor cores"): the tensor core gets (q - z) as an
 * exact fp16 integer (|q - z| <= 15) and fp16 x, so every product is exact (e_k = 0). Per group, the
 * mma blocks of the group accumulate into a fresh float32 partial p (started at 0); at the group's end
 * (or the split's) t = RN32(t + RN32(s * p)). Split-K: S = qg_w4a16_cuda_splits(N, K) contiguous ranges
 * of 64-column chunks; with S > 1 each split's t goes to a workspace and, through a turnstile (an integer
 * counter per tile), the warp that finishes the tile's last split adds them in split order 0, 1, .., S - 1
 * (float32, left to right), whichever split finished last (or, in the M > 16 kernel with a large grid, one CTA walks
 * the splits in order and adds each total as it ends: the same adds); never float atomics. S depends on N and K only, and each
 * output row's operations do not depend on M or on the other rows: batch-invariant and deterministic.
 */
#ifndef QGOLD_KERNELS_INT4_CUDA_H
#define QGOLD_KERNELS_INT4_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "qgold/int4.h"
#include "qgold/registry.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    QG_W4A16_TC_ROWS = 16,    /* rows of an n-tile */
    QG_W4A16_TC_CHUNK = 64,   /* columns of a chunk: 4 k-tiles of 16 */
    QG_W4A16_TC_MSLICE = 256, /* rows of x per launch when S > 1 (bounds the workspace) */
    QG_W4A16_TC_MAX_SPLITS = 16,
    QG_W4A16_TC_MAX_M = 1 << 21, /* rows of x per call (grid limits); more: shape_invalid */
};

/* Sizes of the repacked layout of an N x K matrix with group size g. */
typedef struct {
    size_t N, K, g, G;
    size_t Np, Kp;     /* padded to 16 and 64 */
    size_t qw_words;   /* Np / 16 * Kp / 64 * 128 */
    size_t sz_words;   /* G * Np */
    int splits;        /* qg_w4a16_cuda_splits(N, K) */
} qg_w4a16_tc_shape;

/* Number of K splits: a function of N and K only (never of M or of the device). */
int qg_w4a16_cuda_splits(size_t N, size_t K);
/* 0, or shape_invalid / int_group_invalid (the shape rules of qg_w4a16_validate). */
int qg_w4a16_tc_shape_of(size_t N, size_t K, size_t g, qg_w4a16_tc_shape *s);
/* Longest rounding chain of one output (numerics.md "W4A16 on tensor cores"):
 * ceil(min(g, K) / 16) mma blocks of a group partial, 1 scale product, G group adds, S - 1 split adds. */
long qg_w4a16_cuda_chain(size_t N, size_t K, size_t g);
/* The bound declaration of the CUDA W4A16 GEMM for this shape: u_acc = QG_MMA_U_ACC (the tensor-core block
 * model of numerics section 5), d = qg_w4a16_cuda_chain, float32 (f16_out = 0) or fp16 output. */
qg_numerics qg_w4a16_cuda_numerics(size_t N, size_t K, size_t g, int f16_out);

/* The repack kernel on the GPU, results copied back: qw (qw_words), sz (sz_words), perm (K, or NULL
 * when L has no g_idx). Validates L first (qg_w4a16_validate's errors). */
int qg_w4a16_repack_cuda(const qg_w4a16 *L, uint32_t *qw, uint32_t *sz, int32_t *perm);

/* y = x W^T on the GPU: x M x K fp16 bits (x_len must be M * K: size_mismatch otherwise), y_f32 and/or
 * y_f16 M x N (either may be NULL, not both). Errors of qg_w4a16_validate first; outputs untouched on any
 * error. */
int qg_w4a16_gemm_cuda(const qg_w4a16 *L, const uint16_t *x, size_t x_len, size_t M, float *y_f32, uint16_t *y_f16);
/* The same function under the name of the registry path w4a16_gemv (batch = M). */
int qg_w4a16_gemv_cuda(const qg_w4a16 *L, const uint16_t *x, size_t x_len, size_t batch, float *y_f32, uint16_t *y_f16);
/* As qg_w4a16_gemm_cuda with y_f32, and the split partials the turnstile reduced: partials S x M x N
 * float32 (S = qg_w4a16_cuda_splits; with S = 1 the single partial is y). M <= QG_W4A16_TC_MSLICE. */
int qg_w4a16_gemm_cuda_partials(const qg_w4a16 *L, const uint16_t *x, size_t x_len, size_t M, float *y_f32, float *partials);

/* The other INT4 kernels of the registry on the GPU, same contracts as the reference: exact decode of the
 * canonical layout, and the packed int4 x int4 product on the int8 tensor cores after unpacking
 * (mma.m16n8k32 s8: exact int32 sums; the reference's epilogue operation by operation, so float32 / fp16
 * outputs are bit-exact too). M <= 1048560. */
int qg_w4a16_decode_cuda(const qg_w4a16 *L, float *w);
int qg_int4_gemm_packed_cuda(const qg_int4_gemm_args *p, int32_t *acc, float *y_f32, uint16_t *y_f16);

/* Device-resident repacked weights for repeated launches (benchmarks). */
typedef struct {
    qg_w4a16_tc_shape s;
    uint32_t *qw;   /* device */
    uint32_t *sz;   /* device */
    int32_t *perm;  /* device, or NULL */
} qg_w4a16_cuda_weights;

/* Validates L, allocates the device arrays and repacks on the GPU (synchronous). */
int qg_w4a16_cuda_upload(const qg_w4a16 *L, qg_w4a16_cuda_weights *w);
void qg_w4a16_cuda_free(qg_w4a16_cuda_weights *w);
/* Workspace bytes one launch with M rows needs (the split-K turnstile counters, x gathered for act-order
 * or, at M > 16 unless QG_CUDA_INT4_WG_XQ=0, laid out as the sm_90a kernel's shared-memory image, the split
 * partials). splits: 0 for the pinned qg_w4a16_cuda_splits, else a forced count (benchmarks only: other
 * bits). The workspace must be zeroed before its first use; every completed call leaves the counters
 * (first in the workspace, where no call writes anything else) at 0 again, so one zeroing serves any
 * number of calls of any M and split count up to those it was sized for, in stream order (not
 * concurrent calls). */
size_t qg_w4a16_cuda_workspace_bytes(const qg_w4a16_cuda_weights *w, size_t M, int splits);
/* Asynchronous launch on device pointers: dx M x K fp16 (16-byte aligned, as the workspace), dy32 / dy16
 * M x N (either NULL). */
int qg_w4a16_gemm_cuda_async(const qg_w4a16_cuda_weights *w, const void *dx, size_t M, int splits, void *workspace, float *dy32,
                             uint16_t *dy16, void *stream);

/* The model of one mma block qgold declares (reference/spec/numerics.md, "Tensor-core accumulation"):
 * |fl(c + sum p) - (c + sum p)| <= u (|c| + sum |p|) with u = QG_MMA_U_ACC = 2^-21 (4 units of 2^-23);
 * the u_acc of every tensor-core declaration here. */
double qg_cuda_mma_model_u(void);

/* Tensor-core probe: `count` independent mma.m16n8k16 f32.f16.f16.f32 blocks. A: count x 16 x 16 fp16
 * (row-major, [i][k]), B: count x 16 x 8 fp16 ([k][j]), C and D: count x 16 x 8 float32 ([i][j]);
 * D = C + A B as the tensor core computes it, one mma per block. */
int qg_cuda_mma_f16_probe(const uint16_t *A, const uint16_t *B, const float *C, float *D, size_t count);

/* The same through mma.m16n8k16 f32.bf16.bf16.f32 (A and B as bf16 bits): the instruction of the Q4_K/Q5_K
 * min term (kernels/cuda/kquants_mma.cu), whose operands are exact too. */
int qg_cuda_mma_bf16_probe(const uint16_t *A, const uint16_t *B, const float *C, float *D, size_t count);

/* The same blocks through wgmma.m64n8k16 (sm_90a; the instruction of the M > 16 W4A16 kernel).
 * QG_ERR_unsupported where this process's device code has no wgmma (not an sm_90a build on an sm_90
 * device) or QG_CUDA_INT4_WGMMA=0. */
int qg_cuda_wgmma_f16_probe(const uint16_t *A, const uint16_t *B, const float *C, float *D, size_t count);

#ifdef __cplusplus
}
#endif
#endif
