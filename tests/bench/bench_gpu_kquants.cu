/* GPU benchmark of the K-quant fused GEMV against cuBLAS fp16 GEMM at the same shape and batch. */
#include "bench.h"
#include "bench_gpu.h"

#include "qgold/cuda.h"
#include "qgold/kernels_kquants.h"
#include "qgold/kquants_layout.h"
#include "bench_kquants_gemm.h"
#include "qgold/registry.h"

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#define CK QG_BENCH_CK

namespace {

/* Random weight bytes, then every block's scale fields set to small finite fp16 values so the numbers
 * are ordinary (random d/dmin would be NaN or inf now and then, which takes the kernels' special-value
 * path; speed does not depend on it, realism does). */
__global__ void k_fix_scales(uint8_t *w, size_t nblocks, size_t bb, int type)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < nblocks; i += (size_t)gridDim.x * blockDim.x) {
        uint8_t *b = w + i * bb;
        const uint16_t d = (uint16_t)(0x1C00 + (i & 0xFF)), dm = (uint16_t)(0x1800 + (i & 0x7F));
        if (type == QG_Q6_K) {
            memcpy(b + QG_Q6K_D, &d, 2);
        } else if (type == QG_Q8_K) {
            const float f = 1.0f / 127.0f;
            memcpy(b + QG_Q8K_D, &f, 4);
        } else { /* Q4_K and Q5_K share the d, dmin offsets */
            memcpy(b + QG_Q4K_D, &d, 2);
            memcpy(b + QG_Q4K_DMIN, &dm, 2);
        }
    }
}

struct product_ctx {
    const qg_bench_kq_path *p;
    qg_ktype t;
    uint8_t **w;
    int ncopies;
    size_t rows, cols, batch;
    const uint16_t *x;
    uint16_t *y;
};

int product_launch(void *vctx, int call, cudaStream_t s)
{
    product_ctx *c = (product_ctx *)vctx;
    return c->p->launch(c->t, c->w[call % c->ncopies], c->rows, c->cols, c->x, c->batch, nullptr, c->y, s);
}

} // namespace

/* One K-quant product path (gemv, gemm) against cuBLAS fp16 at the same shape and batch; each repetition
 * times the baseline graph, then ours (interleaved). */
int qg_bench_gpu_kq_product(const qg_bench_opts *o, double bw, const qg_bench_kq_path *p)
{
    const qg_ktype t = (qg_ktype)qg_kq_from_name(o->format);
    const size_t bb = qg_kq_block_bytes(t), maxb = p->max_batch;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const size_t l2 = (size_t)prop.l2CacheSize;
    static const size_t shapes_full[][2] = {{4096, 4096}, {4096, 14336}, {14336, 4096}, {8192, 8192}, {28672, 8192}, {8192, 28672}};
    static const size_t shapes_quick[][2] = {{4096, 4096}};
    const size_t (*shapes)[2] = o->quick ? shapes_quick : shapes_full;
    size_t nshapes = o->quick ? 1 : 6;
    const size_t *batches = o->quick ? p->batches_quick : p->batches_full;
    size_t nbatches = o->quick ? p->nbatches_quick : p->nbatches_full;
    static size_t custom[16][2], cbatches[16];
    const int ns = qg_bench_parse_shapes(o->shapes, custom, 16), nbt = qg_bench_parse_batches(o->batches, cbatches, 16);
    if (ns > 0) shapes = (const size_t(*)[2])custom, nshapes = (size_t)ns;
    if (nbt > 0) batches = cbatches, nbatches = (size_t)nbt;
    cublasHandle_t h;
    void *ws = nullptr;
    if (qg_bench_cublas_open(&h, &ws) != 0) return 1;
    if (p->note_l2) qg_bench_note(o, "L2_bytes", "%zu", l2);
    qg_bench_note(o, p->baseline_note, "cuBLAS cublasGemmEx fp16 in/out, fp32 compute, same shape and batch, interleaved");
    int rc = 0;
    for (size_t si = 0; si < nshapes && rc == 0; si++) {
        const size_t rows = shapes[si][0], cols = shapes[si][1];
        const size_t qbytes = rows * (cols / 256) * bb, hbytes = rows * cols * 2;
        const int nq = qg_bench_copies_for(qbytes, l2), nh = qg_bench_copies_for(hbytes, l2);
        char label[80];
        snprintf(label, sizeof label, "%s %s %zux%zu", o->format, p->path, rows, cols);
        if (qg_bench_device_fits(label, (double)nq * qbytes + (double)nh * hbytes + (double)cols * maxb * 2 + (double)rows * maxb * 4)) {
            rc = 1;
            break;
        }
        uint8_t *wq[256] = {nullptr};
        __half *wh[256] = {nullptr};
        uint16_t *x = nullptr, *y = nullptr;
        for (int i = 0; i < nq; i++) {
            CK(cudaMalloc((void **)&wq[i], qbytes));
            qg_bench_fill_bytes(wq[i], qbytes, p->seed + (uint32_t)i);
            k_fix_scales<<<1024, 256>>>(wq[i], qbytes / bb, bb, (int)t);
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
            if (qg_bench_batch_skipped(label, nullptr, B, maxb)) continue;
            product_ctx gc = {p, t, wq, nq, rows, cols, B, x, y};
            qg_bench_blas_ctx bc = {h, wh, nh, rows, cols, B, (const __half *)x, (__half *)y};
            double tq[64], tb[64], lo, hi, tmp_lo, tmp_hi;
            qg_bench_opts one = *o;
            one.reps = 1;
            for (int r = 0; r < o->reps && rc == 0; r++) {
                rc = qg_bench_time_graph(&one, nh * 2, qg_bench_blas_launch, &bc, &tb[r], &tmp_lo, &tmp_hi);
                if (rc == 0) rc = qg_bench_time_graph(&one, nq * 2, product_launch, &gc, &tq[r], &tmp_lo, &tmp_hi);
            }
            if (rc != 0) break;
            qg_bench_row row = {o->format, p->path, "cuda", "", (int)B, 0, 0, 0, 0, 0, "BW_copy", 0, "cuBLAS fp16"};
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

extern "C" int qg_bench_gpu_kquants(const qg_bench_opts *o, double bw)
{
    static const size_t full[] = {1, 2, 4, 8, 16}, quick[] = {1, 16};
    static const qg_bench_kq_path gemv = {"gemv", full, 5, quick, 2, 16, 77u, "baseline", 1, qg_kq_gemv_cuda_async};
    return qg_bench_gpu_kq_product(o, bw, &gemv);
}
