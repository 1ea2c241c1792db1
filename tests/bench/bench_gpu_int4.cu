/* GPU half of qgold bench for INT4 W4A16: the tensor-core GEMM (qg_w4a16_gemm_cuda_async, the tc16 layout)
 * against cuBLAS fp16 (cublasGemmEx, float32 compute) at the same N x K and M, interleaved in the same run.
 *
 * Shapes: the standard six (out x in = N x K), or --shapes; M = 1, 2, 4, 8, 16, 32, 64, 256, 1024, or
 * --batches; group sizes 128 and 32, symmetric (no zeros: z = 8, as uint4b8 checkpoints). On N = 4096,
 * K = 14336 the product is also timed with split-K off (one split) beside the pinned split, and every
 * shape's pinned split count is a note.
 *
 * Weights: random codes and fp16 scales built on the host, repacked on the device once, then copied so
 * that one pass over the copies streams >= 12 x L2. Bytes counted per call: the repacked codes (N K / 2),
 * the scale-and-zero words the kernel reads (4 bytes per row and group), x (M K fp16), y (M N fp16).
 * Rows: path w4a16_g128 / w4a16_g32 (w4a16_g128_nosplit), batch = M, speedup = t(cuBLAS fp16) / t.
 *
 * A figure is never reported for a wrong result: before timing, M = 1 is checked against the exact
 * product on the host (the kernel's declared bound), and after timing each M its row 0 must equal, bit
 * for bit, the M = 1 result (batch invariance).
 */
#include "bench.h"
#include "bench_gpu.h"
#include "bench_int4.h"
extern "C" {
#include "compare.h" /* a C header without its own extern "C" */
}

#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/int4.h"
#include "qgold/kernels_int4_cuda.h"

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

struct q_ctx {
    std::vector<qg_w4a16_cuda_weights> w;
    const uint16_t *x;
    size_t M;
    int splits;
    void *ws;
    uint16_t *y;
};

int q_launch(void *vc, int call, cudaStream_t s)
{
    q_ctx *c = (q_ctx *)vc;
    return qg_w4a16_gemm_cuda_async(&c->w[(size_t)call % c->w.size()], c->x, c->M, c->splits, c->ws, nullptr, c->y, s) != QG_ERR_ok;
}

/* The M = 1 product of the first weight copy against the exact sum on the host, within the declared bound. */
int check_m1(const qg_w4a16 *L, const qg_w4a16_cuda_weights *w, const uint16_t *dx, void *ws, float *dy32, const char *label)
{
    const size_t N = L->N, K = L->K;
    std::vector<uint16_t> hx(K);
    std::vector<float> y(N);
    std::vector<double> ys(N), sa(N);
    CK(cudaMemcpy(hx.data(), dx, K * 2, cudaMemcpyDeviceToHost));
    if (qg_w4a16_gemm_cuda_async(w, dx, 1, 0, ws, dy32, nullptr, 0) != QG_ERR_ok) return 1;
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(y.data(), dy32, N * 4, cudaMemcpyDeviceToHost));
    std::vector<double> xd(K);
    for (size_t k = 0; k < K; k++) xd[k] = qg_f16_to_f32(hx[k]);
    for (size_t n = 0; n < N; n++) {
        double a = 0, b = 0;
        for (size_t k = 0; k < K; k++) {
            const size_t grp = qg_w4a16_group(L, k);
            const int zq = L->zeros ? (int)L->zeros[n * (K / L->g) + grp] : (int)QG_INT4_SYM_ZERO;
            const double wv = (double)((int)qg_w4a16_code(L, n, k) - zq) * (double)qg_f16_to_f32(L->scales[n * (K / L->g) + grp]);
            a += wv * xd[k];
            b += fabs(wv * xd[k]);
        }
        ys[n] = a;
        sa[n] = b;
    }
    const qg_numerics nm = qg_w4a16_cuda_numerics(N, K, L->g, 0);
    qg_bound_report br;
    if (qg_compare_bounded(&nm, (long)K, ys.data(), sa.data(), nullptr, y.data(), N, &br) != QG_ERR_ok) {
        fprintf(stderr, "qgold bench: %s: M = 1 result outside the bound: %s\n", label, br.text);
        return 1;
    }
    return 0;
}

int bench_shape(const qg_bench_opts *o, double bw, size_t l2, cublasHandle_t h, size_t N, size_t K, size_t g, const size_t *Ms,
                size_t nM, int nosplit_too)
{
    char shape[48], label[96];
    snprintf(shape, sizeof shape, "%zux%zu", N, K);
    snprintf(label, sizeof label, "int4 w4a16 %s g%zu", shape, g);
    size_t Mmax = 1;
    for (size_t i = 0; i < nM; i++) Mmax = Ms[i] > Mmax ? Ms[i] : Mmax;
    const size_t G = K / g;
    /* host layout: random codes, fp16 scales 2^-7 .. 2^-5 with random mantissas, symmetric */
    std::vector<uint32_t> q(N * (K / 8));
    std::vector<uint16_t> sc(N * G);
    uint64_t seed = 0x1234 + N * 31 + K * 7 + g;
    for (auto &v : q) v = (uint32_t)splitmix(&seed);
    for (auto &v : sc) {
        const uint64_t r = splitmix(&seed);
        v = qg_f32_to_f16(ldexpf(1.0f + (float)(r & 1023) / 1024.0f, -7 + (int)((r >> 10) % 3)));
    }
    const qg_w4a16 L = {N, K, g, q.data(), q.size(), sc.data(), sc.size(), nullptr, 0, nullptr, 0};
    qg_w4a16_cuda_weights w0;
    int rc = qg_w4a16_cuda_upload(&L, &w0);
    if (rc != QG_ERR_ok) {
        fprintf(stderr, "qgold bench: %s: upload: %s\n", label, qg_error_name(rc));
        return 1;
    }
    const size_t qb = w0.s.qw_words * 4, szb = w0.s.sz_words * 4, wbytes = qb + szb, hbytes = N * K * 2;
    const int nq = qg_bench_copies_for(wbytes, l2), nh = qg_bench_copies_for(hbytes, l2);
    if (qg_bench_device_fits(label, (double)nq * wbytes + (double)nh * hbytes + (double)Mmax * (K + N) * 2)) {
        qg_w4a16_cuda_free(&w0);
        return 1;
    }
    q_ctx qc;
    qc.w.push_back(w0);
    for (int i = 1; i < nq; i++) {
        qg_w4a16_cuda_weights c = w0;
        c.qw = nullptr;
        c.sz = nullptr;
        CK(cudaMalloc((void **)&c.qw, qb));
        CK(cudaMalloc((void **)&c.sz, szb));
        CK(cudaMemcpy(c.qw, w0.qw, qb, cudaMemcpyDeviceToDevice));
        CK(cudaMemcpy(c.sz, w0.sz, szb, cudaMemcpyDeviceToDevice));
        qc.w.push_back(c);
    }
    std::vector<__half *> wh(nh, nullptr);
    for (int i = 0; i < nh; i++) {
        CK(cudaMalloc((void **)&wh[i], hbytes));
        qg_bench_fill_half((uint16_t *)wh[i], N * K);
    }
    uint16_t *dx = nullptr, *dy = nullptr, *dy1 = nullptr;
    float *dy32 = nullptr;
    void *ws = nullptr;
    const size_t wsb = qg_w4a16_cuda_workspace_bytes(&w0, Mmax, 0);
    CK(cudaMalloc((void **)&dx, Mmax * K * 2));
    CK(cudaMalloc((void **)&dy, Mmax * N * 2));
    CK(cudaMalloc((void **)&dy1, N * 2));
    CK(cudaMalloc((void **)&dy32, N * 4));
    if (wsb > 0) {
        CK(cudaMalloc(&ws, wsb));
        CK(cudaMemset(ws, 0, wsb)); /* the split-K turnstile counters start at 0 (each call leaves them so) */
    }
    qg_bench_fill_half(dx, Mmax * K);
    CK(cudaDeviceSynchronize());
    rc = check_m1(&L, &w0, dx, ws, dy32, label);
    if (rc == 0 && qg_w4a16_gemm_cuda_async(&w0, dx, 1, 0, ws, nullptr, dy1, 0) != QG_ERR_ok) rc = 1;
    qg_bench_note(o, "int4_split", "%s: %d splits (pinned: a function of N and K)", shape, w0.s.splits);

    qg_bench_opts one = *o;
    one.reps = 1;
    double lo, hi, tmp_lo, tmp_hi;
    char path[40];
    for (size_t mi = 0; mi < nM && rc == 0; mi++) {
        const size_t M = Ms[mi];
        qc.x = dx;
        qc.M = M;
        qc.ws = ws;
        qc.y = dy;
        qg_bench_blas_ctx bc = {h, wh.data(), nh, N, K, M, (const __half *)dx, (__half *)dy};
        const int variants = nosplit_too && w0.s.splits > 1 ? 2 : 1;
        std::vector<double> tb(o->reps), tq[2] = {std::vector<double>(o->reps), std::vector<double>(o->reps)};
        for (int r = 0; r < o->reps && rc == 0; r++) {
            rc = qg_bench_time_graph(&one, nh * 2, qg_bench_blas_launch, &bc, &tb[r], &tmp_lo, &tmp_hi);
            for (int v = 0; v < variants && rc == 0; v++) {
                qc.splits = v == 0 ? 0 : 1;
                rc = qg_bench_time_graph(&one, nq * 2, q_launch, &qc, &tq[v][r], &tmp_lo, &tmp_hi);
            }
        }
        if (rc != 0) break;
        const double tblas = qg_bench_median(tb.data(), o->reps, nullptr, nullptr);
        for (int v = 0; v < variants; v++) {
            snprintf(path, sizeof path, "w4a16_g%zu%s", g, v == 0 ? "" : "_nosplit");
            qg_bench_row row = {"int4", path, "cuda", "", (int)M, 0, 0, 0, 0, 0, "BW_copy", 0, "cuBLAS fp16"};
            snprintf(row.shape, sizeof row.shape, "%s", shape);
            row.t_med = qg_bench_median(tq[v].data(), o->reps, &lo, &hi);
            row.t_lo = lo;
            row.t_hi = hi;
            row.bytes = (double)N * (double)K / 2.0 + (double)szb + 2.0 * (double)(M * K) + 2.0 * (double)(M * N);
            row.eff = row.bytes / row.t_med / bw;
            row.speedup = tblas / row.t_med;
            qg_bench_emit(o, &row);
        }
        {
            /* batch invariance of what was timed: row 0 of this M equals the M = 1 result */
            qc.splits = 0;
            if (q_launch(&qc, 0, 0) != 0) rc = 1;
            CK(cudaDeviceSynchronize());
            std::vector<uint16_t> a(N), b(N);
            CK(cudaMemcpy(a.data(), dy, N * 2, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(b.data(), dy1, N * 2, cudaMemcpyDeviceToHost));
            if (rc == 0 && memcmp(a.data(), b.data(), N * 2) != 0) {
                fprintf(stderr, "qgold bench: %s: row 0 at M = %zu differs from M = 1\n", label, M);
                rc = 1;
            }
        }
    }
    for (size_t i = 1; i < qc.w.size(); i++) {
        cudaFree(qc.w[i].qw);
        cudaFree(qc.w[i].sz);
    }
    qg_w4a16_cuda_free(&w0);
    for (int i = 0; i < nh; i++) cudaFree(wh[i]);
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dy1);
    cudaFree(dy32);
    if (ws) cudaFree(ws);
    return rc;
}

} // namespace

extern "C" int qg_bench_gpu_int4(const qg_bench_opts *o, double bw)
{
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const size_t l2 = (size_t)prop.l2CacheSize;
    static const size_t shapes_full[][2] = {{4096, 4096}, {4096, 14336}, {14336, 4096}, {8192, 8192}, {28672, 8192}, {8192, 28672}};
    static const size_t shapes_quick[][2] = {{1024, 1024}};
    static const size_t Ms_full[] = {1, 2, 4, 8, 16, 32, 64, 256, 1024};
    static const size_t Ms_quick[] = {1, 16};
    const size_t(*shapes)[2] = o->quick ? shapes_quick : shapes_full;
    size_t nshapes = o->quick ? 1 : 6;
    const size_t *Ms = o->quick ? Ms_quick : Ms_full;
    size_t nM = o->quick ? 2 : 9;
    static size_t custom[16][2], cM[16];
    const int ns = qg_bench_parse_shapes(o->shapes, custom, 16), nb = qg_bench_parse_batches(o->batches, cM, 16);
    if (ns < 0 || nb < 0) return 1;
    if (ns > 0) shapes = (const size_t(*)[2])custom, nshapes = (size_t)ns;
    if (nb > 0) Ms = cM, nM = (size_t)nb;
    cublasHandle_t h;
    void *bws = nullptr;
    if (qg_bench_cublas_open(&h, &bws) != 0) return 1;
    qg_bench_note(o, "int4_layout", "tc16: mma.m16n8k16 A fragments, 4 bits per weight + 4 bytes (fp16 scale, fp16 1024+z) per row and group");
    qg_bench_note(o, "int4_weights", "random codes 0..15, fp16 scales 2^-7..2^-5, symmetric (z = 8); activations fp16 in [-1, 1)");
    int rc = 0;
    static const size_t gs[] = {128, 32};
    for (size_t si = 0; si < nshapes && rc == 0; si++) {
        const size_t N = shapes[si][0], K = shapes[si][1];
        for (size_t gi = 0; gi < 2 && rc == 0; gi++) {
            if (K % gs[gi] != 0 || K % 8 != 0) {
                qg_bench_note(o, "int4_skip", "%zux%zu g%zu: K is not a multiple of the group size", N, K, gs[gi]);
                continue;
            }
            const int skinny = N == 4096 && K == 14336 && gs[gi] == 128;
            rc = bench_shape(o, bw, l2, h, N, K, gs[gi], Ms, nM, skinny);
        }
    }
    cublasDestroy(h);
    cudaFree(bws);
    return rc;
}
