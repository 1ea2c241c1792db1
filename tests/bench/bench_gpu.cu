/* GPU half of qgold bench.
 *
 * BW_copy: cudaMemcpyAsync device-to-device of 1 GiB, bytes read + written, timed with events outside
 * any graph. Kernels: a CUDA graph of back-to-back calls is replayed and timed with events; the figure is
 * the median over repetitions of (graph time / calls), with min and max beside it. Each call streams far
 * more than the 50 MB L2 of an H100, so no figure measures the cache.
 */
#include "bench.h"
#include "bench_gpu.h"

#include "qgold/cuda.h"
#include "qgold/kernels_kquants.h"
#include "qgold/registry.h"

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

namespace {

#define CK(call)                                                                                     \
    do {                                                                                             \
        cudaError_t e_ = (call);                                                                     \
        if (e_ != cudaSuccess) {                                                                     \
            fprintf(stderr, "qgold bench: %s: %s\n", #call, cudaGetErrorString(e_));                 \
            return 1;                                                                                \
        }                                                                                            \
    } while (0)

int bw_copy(const qg_bench_opts *o, double *bw)
{
    size_t bytes = o->quick ? ((size_t)64 << 20) : ((size_t)1 << 30);
    void *a = nullptr, *b = nullptr;
    cudaStream_t s;
    cudaEvent_t e0, e1;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemset(a, 1, bytes));
    CK(cudaStreamCreate(&s));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    double t[64];
    CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
    for (int r = 0; r < o->reps; r++) {
        CK(cudaEventRecord(e0, s));
        CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t[r] = 1e-3 * ms;
    }
    double med = qg_bench_median(t, o->reps, nullptr, nullptr);
    *bw = 2.0 * (double)bytes / med;
    cudaFree(a);
    cudaFree(b);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaStreamDestroy(s);
    return 0;
}

} // namespace

/* Times `calls` launches captured in one graph; per-call median/min/max over o->reps replays. */
extern "C" int qg_bench_time_graph(const qg_bench_opts *o, int calls, int (*launch)(void *ctx, int call, cudaStream_t s), void *ctx,
                                   double *med, double *lo, double *hi)
{
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    cudaEvent_t e0, e1;
    CK(cudaStreamCreate(&s));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    int rc = 0;
    for (int c = 0; c < calls && rc == 0; c++) rc = launch(ctx, c, s);
    CK(cudaStreamEndCapture(s, &g));
    if (rc != 0) return rc;
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, s)); /* warm-up */
    CK(cudaStreamSynchronize(s));
    double t[64];
    for (int r = 0; r < o->reps; r++) {
        CK(cudaEventRecord(e0, s));
        CK(cudaGraphLaunch(ge, s));
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t[r] = 1e-3 * ms / calls;
    }
    *med = qg_bench_median(t, o->reps, lo, hi);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaStreamDestroy(s);
    return 0;
}

namespace {

struct conv_ctx {
    const char *path;
    const void *x;
    void *y;
    size_t n;
};

int conv_launch(void *vctx, int, cudaStream_t s)
{
    conv_ctx *c = (conv_ctx *)vctx;
    return qg_fp16_convert_cuda_async(c->path, c->x, c->y, c->n, s);
}

int bench_convert(const qg_bench_opts *o, double bw)
{
    size_t n = o->quick ? ((size_t)1 << 22) : ((size_t)1 << 28);
    void *x = nullptr, *y = nullptr;
    CK(cudaMalloc(&x, n * 4));
    CK(cudaMalloc(&y, n * 4));
    CK(cudaMemset(x, 0x3C, n * 4));
    for (size_t i = 0; i < qg_registry_count(); i++) {
        const qg_kernel *k = qg_registry_at(i);
        if (strcmp(k->format, o->format) != 0 || k->backend != QG_BACKEND_CUDA || k->kind != QG_KIND_CONVERT) continue;
        conv_ctx c = {k->path, x, y, n};
        qg_bench_row row = {k->format, k->path, "cuda", "", 1, 0, 0, 0, 0, 0, "BW_copy", 0, ""};
        snprintf(row.shape, sizeof row.shape, "%zu", n);
        if (qg_bench_time_graph(o, o->quick ? 2 : 5, conv_launch, &c, &row.t_med, &row.t_lo, &row.t_hi) != 0) return 1;
        row.bytes = (double)n * (double)(qg_elem_size(k->in_elem) + qg_elem_size(k->out_elem));
        row.eff = row.bytes / row.t_med / bw;
        qg_bench_emit(o, &row);
    }
    cudaFree(x);
    cudaFree(y);
    return 0;
}

} // namespace

/* ---- K-quant fused GEMV against cuBLAS fp16 GEMM at the same shape and batch ---------------------- */

namespace {

/* Random weight bytes, then every block's scale fields set to small finite fp16 values so the numbers
 * are ordinary (random d/dmin would be NaN or inf now and then; speed does not depend on it, realism
 * does). */
__global__ void k_fix_scales(uint8_t *w, size_t nblocks, size_t bb, int type)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < nblocks; i += (size_t)gridDim.x * blockDim.x) {
        uint8_t *b = w + i * bb;
        const uint16_t d = (uint16_t)(0x1C00 + (i & 0xFF)), dm = (uint16_t)(0x1800 + (i & 0x7F));
        if (type == QG_Q6_K) {
            b[208] = (uint8_t)d;
            b[209] = (uint8_t)(d >> 8);
        } else if (type == QG_Q8_K) {
            const float f = 1.0f / 127.0f;
            memcpy(b, &f, 4);
        } else {
            b[0] = (uint8_t)d;
            b[1] = (uint8_t)(d >> 8);
            b[2] = (uint8_t)dm;
            b[3] = (uint8_t)(dm >> 8);
        }
    }
}

__global__ void k_fill_bytes(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t z = (uint32_t)i * 2654435761u ^ seed;
        z ^= z >> 15;
        z *= 2246822519u;
        z ^= z >> 13;
        p[i] = (uint8_t)z;
    }
}

/* fp16 values in [-1, 1): sign, exponent 0x0C..0x0E (2^-3..2^-1), random fraction. */
__global__ void k_fill_half(uint16_t *p, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t z = (uint32_t)i * 2654435761u;
        z ^= z >> 16;
        p[i] = (uint16_t)(((z & 1u) << 15) | ((12u + (z >> 1) % 3u) << 10) | ((z >> 4) & 0x3FFu));
    }
}

} // namespace

void qg_bench_fill_bytes(uint8_t *p, size_t n, uint32_t seed) { k_fill_bytes<<<1024, 256>>>(p, n, seed); }
void qg_bench_fill_half(uint16_t *p, size_t n) { k_fill_half<<<1024, 256>>>(p, n); }

namespace {

struct gemv_ctx {
    qg_ktype t;
    uint8_t **w;
    int ncopies;
    size_t rows, cols, batch;
    const uint16_t *x;
    uint16_t *y;
};

int gemv_launch(void *vctx, int call, cudaStream_t s)
{
    gemv_ctx *c = (gemv_ctx *)vctx;
    return qg_kq_gemv_cuda_async(c->t, c->w[call % c->ncopies], c->rows, c->cols, c->x, c->batch, nullptr, c->y, s);
}

} // namespace

/* Y (rows x batch, column-major) = W (rows x cols, row-major = cols x rows column-major)^T X. */
int qg_bench_blas_launch(void *vctx, int call, cudaStream_t s)
{
    qg_bench_blas_ctx *c = (qg_bench_blas_ctx *)vctx;
    const float one = 1.0f, zero = 0.0f;
    cublasSetStream(c->h, s);
    cublasStatus_t st = cublasGemmEx(c->h, CUBLAS_OP_T, CUBLAS_OP_N, (int)c->rows, (int)c->batch, (int)c->cols, &one,
                                     c->w[call % c->ncopies], CUDA_R_16F, (int)c->cols, c->x, CUDA_R_16F, (int)c->cols, &zero,
                                     c->y, CUDA_R_16F, (int)c->rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "qgold bench: cublasGemmEx failed (%d)\n", (int)st);
        return 1;
    }
    return 0;
}

/* Enough copies that one pass streams >= 12 x the L2 size (bench spec), at least 2. */
int qg_bench_copies_for(size_t bytes, size_t l2)
{
    size_t want = 12 * l2;
    size_t n = (want + bytes - 1) / bytes;
    return (int)(n < 2 ? 2 : n > 256 ? 256 : n);
}

int qg_bench_device_fits(const char *label, double bytes)
{
    size_t fr = 0, total = 0;
    if (cudaMemGetInfo(&fr, &total) != cudaSuccess || bytes <= (double)fr) return 0; /* else cudaMalloc reports */
    fprintf(stderr, "qgold: bench %s: cannot allocate the device buffers: at least %.0f bytes (%zu free of %zu)\n", label, bytes, fr,
            total);
    return 1;
}

int qg_bench_cublas_open(cublasHandle_t *h, void **ws)
{
    if (cublasCreate(h) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "qgold bench: cublasCreate failed\n");
        return 1;
    }
    CK(cudaMalloc(ws, (size_t)32 << 20));
    cublasSetWorkspace(*h, *ws, (size_t)32 << 20); /* no allocation inside graph capture */
    return 0;
}

namespace {

int bench_kq(const qg_bench_opts *o, double bw)
{
    const qg_ktype t = (qg_ktype)qg_kq_from_name(o->format);
    const size_t bb = qg_kq_block_bytes(t);
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const size_t l2 = (size_t)prop.l2CacheSize;
    static const size_t shapes_full[][2] = {{4096, 4096}, {4096, 14336}, {14336, 4096}, {8192, 8192}, {28672, 8192}, {8192, 28672}};
    static const size_t shapes_quick[][2] = {{4096, 4096}};
    static const size_t batches_full[] = {1, 2, 4, 8, 16}, batches_quick[] = {1, 16};
    const size_t (*shapes)[2] = o->quick ? shapes_quick : shapes_full;
    size_t nshapes = o->quick ? 1 : 6;
    const size_t *batches = o->quick ? batches_quick : batches_full;
    size_t nbatches = o->quick ? 2 : 5;
    static size_t custom[16][2], cbatches[16];
    const int ns = qg_bench_parse_shapes(o->shapes, custom, 16), nbt = qg_bench_parse_batches(o->batches, cbatches, 16);
    if (ns > 0) shapes = (const size_t(*)[2])custom, nshapes = (size_t)ns;
    if (nbt > 0) batches = cbatches, nbatches = (size_t)nbt;
    cublasHandle_t h;
    void *ws = nullptr;
    if (qg_bench_cublas_open(&h, &ws) != 0) return 1;
    qg_bench_note(o, "L2_bytes", "%zu", l2);
    qg_bench_note(o, "baseline", "cuBLAS cublasGemmEx fp16 in/out, fp32 compute, same shape and batch, interleaved");
    int rc = 0;
    for (size_t si = 0; si < nshapes && rc == 0; si++) {
        const size_t rows = shapes[si][0], cols = shapes[si][1];
        const size_t qbytes = rows * (cols / 256) * bb, hbytes = rows * cols * 2;
        const int nq = qg_bench_copies_for(qbytes, l2), nh = qg_bench_copies_for(hbytes, l2);
        char label[80];
        snprintf(label, sizeof label, "%s %zux%zu", o->format, rows, cols);
        if (qg_bench_device_fits(label, (double)nq * qbytes + (double)nh * hbytes + (double)cols * 32 + (double)rows * 64)) {
            rc = 1;
            break;
        }
        uint8_t *wq[256] = {nullptr};
        __half *wh[256] = {nullptr};
        uint16_t *x = nullptr, *y = nullptr;
        for (int i = 0; i < nq; i++) {
            CK(cudaMalloc((void **)&wq[i], qbytes));
            k_fill_bytes<<<1024, 256>>>(wq[i], qbytes, 77u + (uint32_t)i);
            k_fix_scales<<<1024, 256>>>(wq[i], qbytes / bb, bb, (int)t);
        }
        for (int i = 0; i < nh; i++) {
            CK(cudaMalloc((void **)&wh[i], hbytes));
            k_fill_half<<<1024, 256>>>((uint16_t *)wh[i], hbytes / 2);
        }
        CK(cudaMalloc((void **)&x, cols * 16 * 2));
        CK(cudaMalloc((void **)&y, rows * 16 * 4));
        k_fill_half<<<256, 256>>>(x, cols * 16);
        CK(cudaDeviceSynchronize());
        for (size_t bi = 0; bi < nbatches && rc == 0; bi++) {
            const size_t B = batches[bi];
            gemv_ctx gc = {t, wq, nq, rows, cols, B, x, y};
            qg_bench_blas_ctx bc = {h, wh, nh, rows, cols, B, (const __half *)x, (__half *)y};
            /* Interleaved: each repetition times the baseline graph, then ours. */
            double tq[64], tb[64], lo, hi, tmp_lo, tmp_hi;
            qg_bench_opts one = *o;
            one.reps = 1;
            for (int r = 0; r < o->reps && rc == 0; r++) {
                rc = qg_bench_time_graph(&one, nh * 2, qg_bench_blas_launch, &bc, &tb[r], &tmp_lo, &tmp_hi);
                if (rc == 0) rc = qg_bench_time_graph(&one, nq * 2, gemv_launch, &gc, &tq[r], &tmp_lo, &tmp_hi);
            }
            if (rc != 0) break;
            qg_bench_row row = {o->format, "gemv", "cuda", "", (int)B, 0, 0, 0, 0, 0, "BW_copy", 0, "cuBLAS fp16"};
            snprintf(row.shape, sizeof row.shape, "%zux%zu", rows, cols);
            row.t_med = qg_bench_median(tq, o->reps, &lo, &hi);
            row.t_lo = lo;
            row.t_hi = hi;
            double tblas = qg_bench_median(tb, o->reps, nullptr, nullptr);
            /* bytes: packed weights with all their scales, the fp16 activations, the fp16 outputs */
            row.bytes = (double)qbytes + (double)(cols * B * 2) + (double)(rows * B * 2);
            row.eff = row.bytes / row.t_med / bw;
            row.speedup = tblas / row.t_med;
            qg_bench_emit(o, &row);
        }
        for (int i = 0; i < nq; i++) cudaFree(wq[i]);
        for (int i = 0; i < nh; i++) cudaFree(wh[i]);
        cudaFree(x);
        cudaFree(y);
    }
    cublasDestroy(h);
    cudaFree(ws);
    return rc;
}

} // namespace

extern "C" int qg_bench_gpu(const qg_bench_opts *o)
{
    char dev[256];
    qg_cuda_describe(dev, sizeof dev);
    qg_bench_note(o, "gpu", "%s", dev);
    int clk = 0, memclk = 0;
    cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
    cudaDeviceGetAttribute(&memclk, cudaDevAttrMemoryClockRate, 0);
    qg_bench_note(o, "gpu_clocks", "sm max %d MHz, memory %d MHz (from device attributes)", clk / 1000, memclk / 1000);
    double bw = 0;
    if (bw_copy(o, &bw) != 0) return 1;
    qg_bench_note(o, "BW_copy_GBps", "%.1f", bw / 1e9);
    if (!strcmp(o->format, "fp16")) return bench_convert(o, bw);
    if (qg_kq_from_name(o->format) >= 0) return bench_kq(o, bw);
    if (!strcmp(o->format, "spqr")) return qg_bench_gpu_spqr(o, bw);
    if (!strcmp(o->format, "rans")) return qg_bench_gpu_rans(o, bw);
    return 0;
}
