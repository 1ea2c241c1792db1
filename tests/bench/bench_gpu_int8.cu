/* GPU half of qgold bench for INT8, every figure against a baseline timed interleaved in the same run:
 *
 *   w8a8        Y[M x N] = epilogue(A[M x K] int8 . B[N x K]^T int8): per-token sa, per-channel sb,
 *               float32 bias, ReLU, fp16 output (qg_int8_w8a8_cuda_async; dp4a at M <= 16, int8 tensor
 *               cores above). Baselines: cuBLAS fp16 GEMM (cublasGemmEx, fp16 in/out, float32 compute)
 *               at the same M x N x K (row path "w8a8", speedup = t_fp16 / t) and cuBLASLt int8
 *               (cublasLtMatmul, int8 inputs, int32 compute and output, no epilogue: row path
 *               "w8a8_vs_lt", speedup = t_lt / t). M = 1, 16, 128, 1024, 4096.
 *   w8a16       int8 weights with float32 per-channel scales x fp16 activations, batch 1..16 (or
 *               --batches), fp16 output; baseline cuBLAS fp16 at the same batch.
 *   quantize    per-row float32 -> int8 + float32 scales of an N x K matrix; eff = bytes / t / BW_copy
 *               with bytes = 4 N K read + N K codes + 4 N scales written.
 * Baseline rows cublas_fp16 and cublaslt_int8 carry their own times.
 *
 * Shapes: the standard six (out x in = N x K) or --shapes. Weights rotate through copies so that a pass
 * streams >= 12 x L2 (int8 and fp16 copies separately). Bytes counted for w8a8: B (N K) + A (M K) + sa,
 * sb, bias (4 M + 8 N) + y (2 M N); for w8a16: B + sb (4 N) + x (2 M K) + y (2 M N).
 *
 * A figure is never reported for a wrong result: w8a8's int32 sums must equal cuBLASLt's int32 output
 * bit for bit and its fused fp16 output the reference epilogue (qg_int8_epilogue) applied to those sums
 * (rows 0..63 and the last row); w8a16's first rows must lie within the registry bound of the exact
 * product and each batch's row 0 must equal the batch-1 result bitwise; quantize's first rows must equal
 * the reference and its status word be 0.
 */
#include "bench.h"
#include "bench_gpu.h"
#include "bench_int8.h"
extern "C" {
#include "compare.h" /* a C header without its own extern "C" */
}

#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/intq.h"
#include "qgold/kernels_int8_cuda.h"
#include "qgold/registry.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

namespace {

#define CK QG_BENCH_CK

uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ---- launch contexts ---- */

struct w8a8_ctx {
    std::vector<int8_t *> *B;
    qg_int8_w8a8_args p; /* device pointers; B replaced per call */
    int32_t *acc;
    uint16_t *y;
};

int w8a8_launch(void *vc, int call, cudaStream_t s)
{
    w8a8_ctx *c = (w8a8_ctx *)vc;
    qg_int8_w8a8_args p = c->p;
    p.B = (*c->B)[(size_t)call % c->B->size()];
    const int rc = qg_int8_w8a8_cuda_async(&p, c->acc, nullptr, c->y, s);
    if (rc != QG_ERR_ok) fprintf(stderr, "qgold bench: int8 w8a8: %s\n", qg_error_name(rc));
    return rc != QG_ERR_ok;
}

/* cuBLASLt int8: C[N x M, column-major] = B^T (B row-major N x K = column-major K x N, op T) . A^T (A
 * row-major M x K = column-major K x M, op N), int32 compute and output: the "TN" int8 layout. */
struct lt_ctx {
    cublasLtHandle_t h;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    void *ws;
    size_t ws_bytes;
    std::vector<int8_t *> *B;
    const int8_t *A;
    int32_t *C;
};

int lt_launch(void *vc, int call, cudaStream_t s)
{
    lt_ctx *c = (lt_ctx *)vc;
    const int32_t one = 1, zero = 0;
    const cublasStatus_t st = cublasLtMatmul(c->h, c->desc, &one, (*c->B)[(size_t)call % c->B->size()], c->la, c->A, c->lb, &zero, c->C,
                                             c->lc, c->C, c->lc, &c->algo, c->ws, c->ws_bytes, s);
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "qgold bench: cublasLtMatmul failed (%d)\n", (int)st);
        return 1;
    }
    return 0;
}

int lt_setup(lt_ctx *c, size_t M, size_t N, size_t K)
{
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    if (cublasLtMatmulDescCreate(&c->desc, CUBLAS_COMPUTE_32I, CUDA_R_32I) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(c->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(c->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&c->la, CUDA_R_8I, K, N, K) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&c->lb, CUDA_R_8I, K, M, K) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&c->lc, CUDA_R_32I, N, M, N) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "qgold bench: cuBLASLt descriptors for int8 %zux%zux%zu failed\n", M, N, K);
        return 1;
    }
    cublasLtMatmulPreference_t pref;
    if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS) return 1;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &c->ws_bytes, sizeof c->ws_bytes);
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(c->h, c->desc, c->la, c->lb, c->lc, c->lc, pref, 1, &res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
        fprintf(stderr, "qgold bench: cuBLASLt has no int8 algorithm for %zux%zux%zu (status %d)\n", M, N, K, (int)st);
        return 1;
    }
    c->algo = res.algo;
    return 0;
}

void lt_teardown(lt_ctx *c)
{
    cublasLtMatrixLayoutDestroy(c->la);
    cublasLtMatrixLayoutDestroy(c->lb);
    cublasLtMatrixLayoutDestroy(c->lc);
    cublasLtMatmulDescDestroy(c->desc);
}

struct w8a16_ctx {
    std::vector<int8_t *> *B;
    const float *sb;
    size_t N, K, M;
    const uint16_t *x;
    uint16_t *y;
};

int w8a16_launch(void *vc, int call, cudaStream_t s)
{
    w8a16_ctx *c = (w8a16_ctx *)vc;
    const int rc =
        qg_int8_w8a16_cuda_async((*c->B)[(size_t)call % c->B->size()], c->sb, QG_INT8_F32, c->N, c->K, c->x, c->M, nullptr, c->y, s);
    if (rc != QG_ERR_ok) fprintf(stderr, "qgold bench: int8 w8a16: %s\n", qg_error_name(rc));
    return rc != QG_ERR_ok;
}

struct quant_ctx {
    std::vector<float *> *x;
    qg_int8_qshape s;
    int8_t *q;
    float *scales;
    void *work;
};

int quant_launch(void *vc, int call, cudaStream_t s)
{
    quant_ctx *c = (quant_ctx *)vc;
    const int rc = qg_int8_quantize_cuda_async(&c->s, (*c->x)[(size_t)call % c->x->size()], QG_INT8_F32, c->q, c->scales, c->work, s);
    if (rc != QG_ERR_ok) fprintf(stderr, "qgold bench: int8 quantize: %s\n", qg_error_name(rc));
    return rc != QG_ERR_ok;
}

/* ---- checks ---- */

/* Our int32 sums and fused fp16 output against the reference (qg_int8_w8a8_ref on the host) for rows 0
 * and M - 1, and our int32 sums == cuBLASLt's on rows 0..min(M,64)-1 and M - 1 (lc NULL: cuBLASLt has
 * no algorithm for the shape). */
int check_w8a8(const w8a8_ctx *wc, lt_ctx *lc, size_t M, size_t N, size_t K, const char *label)
{
    qg_int8_w8a8_args p = wc->p;
    p.B = (*wc->B)[0];
    CK(cudaMemset(wc->acc, 0x55, M * N * 4));
    CK(cudaMemset(wc->y, 0x55, M * N * 2));
    if (qg_int8_w8a8_cuda_async(&p, wc->acc, nullptr, wc->y, 0) != QG_ERR_ok) return 1;
    lt_ctx l = {};
    std::vector<int8_t *> first(1, (*wc->B)[0]);
    if (lc != nullptr) {
        l = *lc;
        l.B = &first;
        CK(cudaMemset(l.C, 0xAA, M * N * 4));
        if (lt_launch(&l, 0, 0) != 0) return 1;
    }
    CK(cudaDeviceSynchronize());
    std::vector<int8_t> hB(N * K), hA(K);
    std::vector<float> sa(M), sb(N), bias(N), yr(N);
    std::vector<int32_t> a(N), b(N), ar(N);
    std::vector<uint16_t> y(N), y16r(N);
    CK(cudaMemcpy(hB.data(), p.B, N * K, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(sa.data(), p.sa, M * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(sb.data(), p.sb, N * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(bias.data(), p.bias, N * 4, cudaMemcpyDeviceToHost));
    std::vector<size_t> rows;
    for (size_t m = 0; m < M && m < 64; m++) rows.push_back(m);
    if (M > 64) rows.push_back(M - 1);
    for (size_t m : rows) {
        CK(cudaMemcpy(a.data(), wc->acc + m * N, N * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(y.data(), wc->y + m * N, N * 2, cudaMemcpyDeviceToHost));
        if (lc != nullptr) {
            CK(cudaMemcpy(b.data(), l.C + m * N, N * 4, cudaMemcpyDeviceToHost));
            if (memcmp(a.data(), b.data(), N * 4) != 0) {
                fprintf(stderr, "qgold bench: %s M %zu: int32 sums differ from cuBLASLt int8 in row %zu\n", label, M, m);
                return 1;
            }
        }
        if (m != 0 && m != M - 1) continue;
        CK(cudaMemcpy(hA.data(), p.A + m * K, K, cudaMemcpyDeviceToHost));
        const qg_int8_w8a8_args r = {1, N, K, hA.data(), hB.data(), &sa[m], 1, sb.data(), N, bias.data(), QG_INT8_F32, p.relu};
        if (qg_int8_w8a8_ref(&r, ar.data(), nullptr, y16r.data()) != QG_ERR_ok || memcmp(ar.data(), a.data(), N * 4) != 0 ||
            memcmp(y16r.data(), y.data(), N * 2) != 0) {
            fprintf(stderr, "qgold bench: %s M %zu: row %zu differs from the reference (int32 sums or fp16 output)\n", label, M, m);
            return 1;
        }
    }
    return 0;
}

/* Rows 0..15 of the batch-1 product within the registry bound of the exact sum. */
int check_w8a16(const int8_t *dB, const float *dsb, const uint16_t *dx, size_t N, size_t K, uint16_t *dy, const char *label)
{
    const qg_kernel *k = qg_registry_find("int8", "w8a16", QG_BACKEND_CUDA);
    if (k == nullptr) {
        fprintf(stderr, "qgold bench: %s: no registry row int8/w8a16/cuda\n", label);
        return 1;
    }
    const size_t R = N < 16 ? N : 16;
    std::vector<int8_t> B(R * K);
    std::vector<float> sb(R), y(R);
    std::vector<uint16_t> x(K), y16(R);
    std::vector<double> ys(R), sa(R);
    if (qg_int8_w8a16_cuda_async(dB, dsb, QG_INT8_F32, N, K, dx, 1, nullptr, dy, 0) != QG_ERR_ok) return 1;
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(B.data(), dB, R * K, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(sb.data(), dsb, R * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(x.data(), dx, K * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(y16.data(), dy, R * 2, cudaMemcpyDeviceToHost));
    for (size_t n = 0; n < R; n++) {
        double a = 0, b = 0;
        for (size_t k = 0; k < K; k++) {
            const double t = (double)sb[n] * (double)B[n * K + k] * (double)qg_f16_to_f32(x[k]);
            a += t;
            b += fabs(t);
        }
        ys[n] = a, sa[n] = b;
        y[n] = qg_f16_to_f32(y16[n]);
    }
    qg_bound_report br;
    if (qg_compare_bounded(&k->numerics_f16, (long)K, ys.data(), sa.data(), nullptr, y.data(), R, &br) != QG_ERR_ok) {
        fprintf(stderr, "qgold bench: %s: w8a16 batch 1 outside the bound: %s\n", label, br.text);
        return 1;
    }
    return 0;
}

void emit(const qg_bench_opts *o, const char *path, const char *shape, size_t batch, const double *t, double bytes, double bw,
          double t_base, const char *vs)
{
    qg_bench_row row = {"int8", path, "cuda", "", (int)batch, 0, 0, 0, 0, 0, "BW_copy", 0, vs};
    snprintf(row.shape, sizeof row.shape, "%s", shape);
    std::vector<double> v(t, t + o->reps);
    row.t_med = qg_bench_median(v.data(), o->reps, &row.t_lo, &row.t_hi);
    row.bytes = bytes;
    row.eff = bytes / row.t_med / bw;
    row.speedup = t_base > 0 ? t_base / row.t_med : 0;
    qg_bench_emit(o, &row);
}

int bench_shape(const qg_bench_opts *o, double bw, size_t l2, cublasHandle_t h, cublasLtHandle_t lth, void *ws, size_t ws_bytes, size_t N,
                size_t K, const size_t *Ms, size_t nM, const size_t *batches, size_t nb)
{
    char shape[48], label[96];
    snprintf(shape, sizeof shape, "%zux%zu", N, K);
    snprintf(label, sizeof label, "int8 %s", shape);
    size_t Mmax = 16;
    for (size_t i = 0; i < nM; i++) Mmax = Ms[i] > Mmax ? Ms[i] : Mmax;
    const size_t wb = N * K, hb = 2 * N * K;
    const int n8 = qg_bench_copies_for(wb, l2), nh = qg_bench_copies_for(hb, l2), nx = qg_bench_copies_for(4 * wb, l2);
    const double need = (double)n8 * wb + (double)nh * hb + (double)Mmax * K * 3 + (double)Mmax * N * 8 + 5.0 * wb;
    if (qg_bench_device_fits(label, need)) return 1;
    int rc = 0;
    /* weights: int8 codes (random bytes, -128 included), fp16 weights for cuBLAS */
    std::vector<int8_t *> B8(n8, nullptr);
    std::vector<__half *> Bh(nh, nullptr);
    for (int i = 0; i < n8; i++) {
        CK(cudaMalloc((void **)&B8[i], wb));
        if (i == 0)
            qg_bench_fill_bytes((uint8_t *)B8[0], wb, 0x5EEDu + (uint32_t)N);
        else
            CK(cudaMemcpy(B8[i], B8[0], wb, cudaMemcpyDeviceToDevice));
    }
    for (int i = 0; i < nh; i++) {
        CK(cudaMalloc((void **)&Bh[i], hb));
        qg_bench_fill_half((uint16_t *)Bh[i], N * K);
    }
    /* activations and outputs, sized for the largest M */
    int8_t *A8 = nullptr;
    uint16_t *Xh = nullptr, *Y16 = nullptr, *Y1 = nullptr;
    int32_t *acc = nullptr, *C = nullptr;
    float *sa = nullptr, *sb = nullptr, *bias = nullptr;
    CK(cudaMalloc((void **)&A8, Mmax * K));
    CK(cudaMalloc((void **)&Xh, Mmax * K * 2));
    CK(cudaMalloc((void **)&Y16, Mmax * N * 2));
    CK(cudaMalloc((void **)&Y1, N * 2));
    CK(cudaMalloc((void **)&acc, Mmax * N * 4));
    CK(cudaMalloc((void **)&C, Mmax * N * 4));
    CK(cudaMalloc((void **)&sa, Mmax * 4));
    CK(cudaMalloc((void **)&sb, N * 4));
    CK(cudaMalloc((void **)&bias, N * 4));
    qg_bench_fill_bytes((uint8_t *)A8, Mmax * K, 0xA11CEu);
    qg_bench_fill_half(Xh, Mmax * K);
    {
        /* scales near 2^-12 and a bias of a few units: outputs in fp16 range, ReLU active on about half */
        uint64_t seed = 0x5CA1E + N + K;
        std::vector<float> hs(Mmax > N ? Mmax : N);
        for (size_t i = 0; i < Mmax; i++) hs[i] = ldexpf(1.0f + (float)(splitmix(&seed) & 1023) / 1024.0f, -13);
        CK(cudaMemcpy(sa, hs.data(), Mmax * 4, cudaMemcpyHostToDevice));
        for (size_t i = 0; i < N; i++) hs[i] = ldexpf(1.0f + (float)(splitmix(&seed) & 1023) / 1024.0f, -13);
        CK(cudaMemcpy(sb, hs.data(), N * 4, cudaMemcpyHostToDevice));
        for (size_t i = 0; i < N; i++) hs[i] = (float)((int)(splitmix(&seed) % 2001) - 1000) / 256.0f;
        CK(cudaMemcpy(bias, hs.data(), N * 4, cudaMemcpyHostToDevice));
    }
    CK(cudaDeviceSynchronize());

    qg_bench_opts one = *o;
    one.reps = 1;
    double tmp_lo, tmp_hi;
    std::vector<double> tb(o->reps), tl(o->reps), tq(o->reps);

    /* ---- W8A8 ---- */
    for (size_t mi = 0; mi < nM && rc == 0; mi++) {
        const size_t M = Ms[mi];
        w8a8_ctx wc;
        wc.B = &B8;
        wc.p = {M, N, K, A8, B8[0], sa, M, sb, N, bias, QG_INT8_F32, 1};
        wc.acc = acc;
        wc.y = Y16;
        lt_ctx lc = {};
        lc.h = lth;
        lc.ws = ws;
        lc.ws_bytes = ws_bytes;
        lc.B = &B8;
        lc.A = A8;
        lc.C = C;
        const int have_lt = lt_setup(&lc, M, N, K) == 0;
        if (!have_lt) qg_bench_note(o, "int8_cublaslt", "%s M %zu: no cuBLASLt int8 algorithm; its rows are left out", shape, M);
        rc = check_w8a8(&wc, have_lt ? &lc : nullptr, M, N, K, label);
        qg_bench_blas_ctx bc = {h, Bh.data(), nh, N, K, M, (const __half *)Xh, (__half *)Y16};
        for (int r = 0; r < o->reps && rc == 0; r++) {
            rc = qg_bench_time_graph(&one, nh * 2, qg_bench_blas_launch, &bc, &tb[r], &tmp_lo, &tmp_hi);
            if (rc == 0 && have_lt) rc = qg_bench_time_graph(&one, n8 * 2, lt_launch, &lc, &tl[r], &tmp_lo, &tmp_hi);
            if (rc == 0) rc = qg_bench_time_graph(&one, n8 * 2, w8a8_launch, &wc, &tq[r], &tmp_lo, &tmp_hi);
        }
        lt_teardown(&lc); /* a no-op on descriptors never created */
        if (rc != 0) break;
        std::vector<double> v;
        double lo, hi;
        v.assign(tb.begin(), tb.end());
        const double tfp16 = qg_bench_median(v.data(), o->reps, &lo, &hi);
        v.assign(tl.begin(), tl.end());
        const double tlt = have_lt ? qg_bench_median(v.data(), o->reps, &lo, &hi) : 0.0;
        const double bytes8 = (double)wb + (double)(M * K) + 4.0 * M + 8.0 * N + 2.0 * (double)(M * N);
        emit(o, "cublas_fp16", shape, M, tb.data(), (double)hb + 2.0 * (double)(M * K) + 2.0 * (double)(M * N), bw, 0, "");
        if (have_lt) emit(o, "cublaslt_int8", shape, M, tl.data(), (double)wb + (double)(M * K) + 4.0 * (double)(M * N), bw, 0, "");
        emit(o, "w8a8", shape, M, tq.data(), bytes8, bw, tfp16, "cuBLAS fp16 (same run)");
        if (have_lt) emit(o, "w8a8_vs_lt", shape, M, tq.data(), bytes8, bw, tlt, "cuBLASLt int8, no epilogue (same run)");
        v.assign(tq.begin(), tq.end());
        const double tw = qg_bench_median(v.data(), o->reps, &lo, &hi);
        qg_bench_note(o, "int8_w8a8_tops", "%s M %zu: w8a8 %.1f TOPS, cuBLASLt int8 %.1f TOPS, cuBLAS fp16 %.1f TFLOPS", shape, M,
                      2.0 * M * N * K / tw / 1e12, have_lt ? 2.0 * M * N * K / tlt / 1e12 : 0.0, 2.0 * M * N * K / tfp16 / 1e12);
    }

    /* ---- W8A16 ---- */
    if (rc == 0) rc = check_w8a16(B8[0], sb, Xh, N, K, Y1, label);
    for (size_t bi = 0; bi < nb && rc == 0; bi++) {
        const size_t M = batches[bi];
        w8a16_ctx wc = {&B8, sb, N, K, M, Xh, Y16};
        qg_bench_blas_ctx bc = {h, Bh.data(), nh, N, K, M, (const __half *)Xh, (__half *)Y16};
        for (int r = 0; r < o->reps && rc == 0; r++) {
            rc = qg_bench_time_graph(&one, nh * 2, qg_bench_blas_launch, &bc, &tb[r], &tmp_lo, &tmp_hi);
            if (rc == 0) rc = qg_bench_time_graph(&one, n8 * 2, w8a16_launch, &wc, &tq[r], &tmp_lo, &tmp_hi);
        }
        if (rc != 0) break;
        /* batch invariance of what was timed: row 0 equals the batch-1 result */
        std::vector<int8_t *> first(1, B8[0]);
        wc.B = &first;
        if (w8a16_launch(&wc, 0, 0) != 0) {
            rc = 1;
            break;
        }
        CK(cudaDeviceSynchronize());
        std::vector<uint16_t> a(N), b(N);
        CK(cudaMemcpy(a.data(), Y16, N * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(b.data(), Y1, N * 2, cudaMemcpyDeviceToHost));
        if (memcmp(a.data(), b.data(), N * 2) != 0) {
            fprintf(stderr, "qgold bench: %s: w8a16 batch %zu row 0 differs from batch 1\n", label, M);
            rc = 1;
            break;
        }
        std::vector<double> v(tb.begin(), tb.end());
        const double tfp16 = qg_bench_median(v.data(), o->reps, nullptr, nullptr);
        emit(o, "w8a16", shape, M, tq.data(), (double)wb + 4.0 * N + 2.0 * (double)(M * K) + 2.0 * (double)(M * N), bw, tfp16,
             "cuBLAS fp16 (same run)");
    }

    /* ---- quantize per row: N x K float32 ---- */
    if (rc == 0) {
        std::vector<float *> X(nx, nullptr);
        int8_t *q = nullptr;
        float *sc = nullptr;
        void *work = nullptr;
        quant_ctx qc;
        qc.x = &X;
        qc.s = {N, K, QG_INT8_PER_ROW, 0, QG_INT8_F32};
        const size_t wsz = qg_int8_quantize_cuda_workspace(&qc.s);
        for (int i = 0; i < nx; i++) {
            CK(cudaMalloc((void **)&X[i], 4 * wb));
            /* float32 values from the fp16 fill: finite, varied magnitudes */
            qg_bench_fill_half((uint16_t *)X[i], 2 * wb);
        }
        CK(cudaMalloc((void **)&q, wb));
        CK(cudaMalloc((void **)&sc, 4 * N));
        CK(cudaMalloc(&work, wsz));
        qc.q = q;
        qc.scales = sc;
        qc.work = work;
        for (int r = 0; r < o->reps && rc == 0; r++) rc = qg_bench_time_graph(&one, nx * 2, quant_launch, &qc, &tq[r], &tmp_lo, &tmp_hi);
        if (rc == 0) {
            /* the last call wrote copy (2 nx - 1) % nx; rows 0..3 against the reference */
            const size_t R = N < 4 ? N : 4;
            uint32_t status = 1;
            std::vector<float> hx(R * K), hs(R), rs(R);
            std::vector<int8_t> hq(R * K), rq(R * K);
            CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(&status, work, 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(hx.data(), X[(size_t)(2 * nx - 1) % nx], R * K * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(hq.data(), q, R * K, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(hs.data(), sc, R * 4, cudaMemcpyDeviceToHost));
            const qg_int8_qshape rsh = {R, K, QG_INT8_PER_ROW, 0, QG_INT8_F32};
            if (status != 0 || qg_int8_quantize_ref(&rsh, hx.data(), QG_INT8_F32, rq.data(), rs.data()) != QG_ERR_ok ||
                memcmp(rq.data(), hq.data(), R * K) != 0 || memcmp(rs.data(), hs.data(), R * 4) != 0) {
                fprintf(stderr, "qgold bench: %s: quantize differs from the reference (status %u)\n", label, status);
                rc = 1;
            }
        }
        if (rc == 0) emit(o, "quantize_row", shape, 0, tq.data(), 5.0 * (double)wb + 4.0 * N, bw, 0, "");
        for (int i = 0; i < nx; i++) cudaFree(X[i]);
        cudaFree(q);
        cudaFree(sc);
        cudaFree(work);
    }

    for (int i = 0; i < n8; i++) cudaFree(B8[i]);
    for (int i = 0; i < nh; i++) cudaFree(Bh[i]);
    cudaFree(A8);
    cudaFree(Xh);
    cudaFree(Y16);
    cudaFree(Y1);
    cudaFree(acc);
    cudaFree(C);
    cudaFree(sa);
    cudaFree(sb);
    cudaFree(bias);
    return rc;
}

} // namespace

extern "C" int qg_bench_gpu_int8(const qg_bench_opts *o, double bw)
{
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const size_t l2 = (size_t)prop.l2CacheSize;
    static const size_t shapes_full[][2] = {{4096, 4096}, {4096, 14336}, {14336, 4096}, {8192, 8192}, {28672, 8192}, {8192, 28672}};
    static const size_t shapes_quick[][2] = {{1024, 1024}};
    static const size_t Ms_full[] = {1, 16, 128, 1024, 4096}, Ms_quick[] = {1, 16, 128};
    static const size_t batches_std[] = {1, 2, 4, 8, 16};
    const size_t(*shapes)[2] = o->quick ? shapes_quick : shapes_full;
    size_t nshapes = o->quick ? 1 : 6;
    const size_t *Ms = o->quick ? Ms_quick : Ms_full;
    const size_t nM = o->quick ? 3 : 5;
    const size_t *batches = batches_std;
    size_t nb = 5;
    static size_t custom[16][2], cbatches[16];
    const int ns = qg_bench_parse_shapes(o->shapes, custom, 16), nbt = qg_bench_parse_batches(o->batches, cbatches, 16);
    if (ns < 0 || nbt < 0) return 1;
    if (ns > 0) shapes = (const size_t(*)[2])custom, nshapes = (size_t)ns;
    if (nbt > 0) batches = cbatches, nb = (size_t)nbt;
    for (size_t i = 0; i < nshapes; i++)
        if (shapes[i][1] > QG_INT8_MAX_K || shapes[i][1] % 4 != 0) {
            fprintf(stderr, "qgold bench: int8: K = %zu must be a multiple of 4 (cuBLASLt int8) and at most %d\n", shapes[i][1],
                    (int)QG_INT8_MAX_K);
            return 2;
        }
    qg_bench_note(o, "L2_bytes", "%zu", l2);
    qg_bench_note(o, "int8_w8a8", "A, B random int8 bytes; sa, sb in [2^-13, 2^-12); float32 bias; ReLU; fp16 output. "
                                  "cuBLASLt int8: TN, int32 compute and output, no epilogue");
    cublasHandle_t h;
    void *ws = nullptr;
    if (qg_bench_cublas_open(&h, &ws) != 0) return 1;
    cublasLtHandle_t lth;
    if (cublasLtCreate(&lth) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "qgold bench: cublasLtCreate failed\n");
        return 1;
    }
    const size_t lt_ws_bytes = (size_t)32 << 20;
    void *lt_ws = nullptr;
    CK(cudaMalloc(&lt_ws, lt_ws_bytes));
    int rc = 0;
    for (size_t si = 0; si < nshapes && rc == 0; si++)
        rc = bench_shape(o, bw, l2, h, lth, lt_ws, lt_ws_bytes, shapes[si][0], shapes[si][1], Ms, nM, batches, nb);
    cudaFree(lt_ws);
    cublasLtDestroy(lth);
    cublasDestroy(h);
    cudaFree(ws);
    return rc;
}
