/* GPU benchmark of the K-quant gemm path (tensor cores, batch 1..64) against cuBLAS fp16 GEMM at the
 * same shape and batch, interleaved repetition by repetition. */
#include "bench.h"
#include "bench_gpu.h"
#include "bench_kquants_gemm.h"

#include "qgold/kernels_kquants_gemm.h"
#include "qgold/registry.h"

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#define CK QG_BENCH_CK

namespace {

/* Ordinary finite scales in every block (random bytes would give NaN/inf d now and then, which takes
 * the kernel's special-value path: not what a model looks like). */
__global__ void k_gemm_fix_scales(uint8_t *w, size_t nblocks, size_t bb, int type)
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

struct gemm_ctx {
    qg_ktype t;
    uint8_t **w;
    int ncopies;
    size_t rows, cols, batch;
    const uint16_t *x;
    uint16_t *y;
};

int gemm_launch(void *vctx, int call, cudaStream_t s)
{
    gemm_ctx *c = (gemm_ctx *)vctx;
    return qg_kq_gemm_cuda_async(c->t, c->w[call % c->ncopies], c->rows, c->cols, c->x, c->batch, nullptr, c->y, s);
}

int bench_kq_gemm(const qg_bench_opts *o, double bw)
{
    const qg_ktype t = (qg_ktype)qg_kq_from_name(o->format);
    const size_t bb = qg_kq_block_bytes(t), maxb = QG_KQ_GEMM_MAX_BATCH;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const size_t l2 = (size_t)prop.l2CacheSize;
    static const size_t shapes_full[][2] = {{4096, 4096}, {4096, 14336}, {14336, 4096}, {8192, 8192}, {28672, 8192}, {8192, 28672}};
    static const size_t shapes_quick[][2] = {{4096, 4096}};
    static const size_t batches_full[] = {1, 2, 4, 8, 16, 32, 64}, batches_quick[] = {1, 16, 64};
    const size_t (*shapes)[2] = o->quick ? shapes_quick : shapes_full;
    size_t nshapes = o->quick ? 1 : 6;
    const size_t *batches = o->quick ? batches_quick : batches_full;
    size_t nbatches = o->quick ? 3 : 7;
    static size_t custom[16][2], cbatches[16];
    const int ns = qg_bench_parse_shapes(o->shapes, custom, 16), nbt = qg_bench_parse_batches(o->batches, cbatches, 16);
    if (ns > 0) shapes = (const size_t(*)[2])custom, nshapes = (size_t)ns;
    if (nbt > 0) batches = cbatches, nbatches = (size_t)nbt;
    cublasHandle_t h;
    void *ws = nullptr;
    if (qg_bench_cublas_open(&h, &ws) != 0) return 1;
    qg_bench_note(o, "gemm_baseline", "cuBLAS cublasGemmEx fp16 in/out, fp32 compute, same shape and batch, interleaved");
    int rc = 0;
    for (size_t si = 0; si < nshapes && rc == 0; si++) {
        const size_t rows = shapes[si][0], cols = shapes[si][1];
        const size_t qbytes = rows * (cols / 256) * bb, hbytes = rows * cols * 2;
        const int nq = qg_bench_copies_for(qbytes, l2), nh = qg_bench_copies_for(hbytes, l2);
        char label[80];
        snprintf(label, sizeof label, "%s gemm %zux%zu", o->format, rows, cols);
        if (qg_bench_device_fits(label, (double)nq * qbytes + (double)nh * hbytes + (double)cols * maxb * 2 + (double)rows * maxb * 4)) {
            rc = 1;
            break;
        }
        uint8_t *wq[256] = {nullptr};
        __half *wh[256] = {nullptr};
        uint16_t *x = nullptr, *y = nullptr;
        for (int i = 0; i < nq; i++) {
            CK(cudaMalloc((void **)&wq[i], qbytes));
            qg_bench_fill_bytes(wq[i], qbytes, 177u + (uint32_t)i);
            k_gemm_fix_scales<<<1024, 256>>>(wq[i], qbytes / bb, bb, (int)t);
        }
        for (int i = 0; i < nh; i++) {
            CK(cudaMalloc((void **)&wh[i], hbytes));
            qg_bench_fill_half((uint16_t *)wh[i], hbytes / 2);
        }
        CK(cudaMalloc((void **)&x, cols * maxb * 2));
        CK(cudaMalloc((void **)&y, rows * maxb * 4));
        qg_bench_fill_half(x, cols * maxb);
        CK(cudaDeviceSynchronize());
        for (size_t bi = 0; bi < nbatches && rc == 0; bi++) {
            const size_t B = batches[bi];
            if (B < 1 || B > maxb) continue;
            gemm_ctx gc = {t, wq, nq, rows, cols, B, x, y};
            qg_bench_blas_ctx bc = {h, wh, nh, rows, cols, B, (const __half *)x, (__half *)y};
            double tq[64], tb[64], lo, hi, tmp_lo, tmp_hi;
            qg_bench_opts one = *o;
            one.reps = 1;
            for (int r = 0; r < o->reps && rc == 0; r++) {
                rc = qg_bench_time_graph(&one, nh * 2, qg_bench_blas_launch, &bc, &tb[r], &tmp_lo, &tmp_hi);
                if (rc == 0) rc = qg_bench_time_graph(&one, nq * 2, gemm_launch, &gc, &tq[r], &tmp_lo, &tmp_hi);
            }
            if (rc != 0) break;
            qg_bench_row row = {o->format, "gemm", "cuda", "", (int)B, 0, 0, 0, 0, 0, "BW_copy", 0, "cuBLAS fp16"};
            snprintf(row.shape, sizeof row.shape, "%zux%zu", rows, cols);
            row.t_med = qg_bench_median(tq, o->reps, &lo, &hi);
            row.t_lo = lo;
            row.t_hi = hi;
            const double tblas = qg_bench_median(tb, o->reps, nullptr, nullptr);
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

extern "C" int qg_bench_gpu_kquants_gemm(const qg_bench_opts *o, double bw) { return bench_kq_gemm(o, bw); }
