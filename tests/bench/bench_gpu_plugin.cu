/* GPU half of `qgold bench --plugin`: a CUDA plugin's K-quant GEMV timed on device pointers beside qgold's
 * own CUDA GEMV of the same format (qg_kq_gemv_cuda_async) and cuBLAS fp16 at the same shape and batch,
 * interleaved in one run; a CUDA plugin's dequantizer beside qgold's (qg_kq_dequant_cuda_async), both
 * against BW_copy. As every GPU figure of qgold
 * bench: CUDA-graph replays of back-to-back calls timed with events, weights rotating through >= 12x the
 * L2 size, median of the repetitions with min and max (bench spec). The plugin's function is called
 * during graph capture, so it must only enqueue work on the stream it is given (the ABI's contract). */
#include "bench.h"
#include "bench_gpu.h"
#include "bench_plugin.h"

#include "qgold/kernels_kquants.h"
#include "qgold/kquants.h"
#include "qgold/registry.h"
#include "qgold/rng.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#include <vector>

#define CK QG_BENCH_CK

namespace {

struct plug_ctx {
    const qgold_plugin_kernel *d; /* NULL: qgold's own kernel of the path */
    bool gemv;                    /* the GEMV path, else dequant */
    qg_ktype t;
    uint8_t **w;
    int ncopies;
    size_t rows, cols, batch, nbytes;
    const uint16_t *x;
    uint16_t *y16; /* GEMV output (fp16, as cuBLAS's) */
    float *y32;    /* dequant output */
    void *ws;
};

int plug_launch(void *vctx, int call, cudaStream_t s)
{
    plug_ctx *c = (plug_ctx *)vctx;
    const uint8_t *w = c->w[call % c->ncopies];
    const qgold_plugin_kernel *d = c->d;
    int rc;
    if (d == nullptr && c->gemv) rc = qg_kq_gemv_cuda_async(c->t, w, c->rows, c->cols, c->x, c->batch, nullptr, c->y16, s);
    else if (d == nullptr) rc = qg_kq_dequant_cuda_async(c->t, w, c->rows, c->cols, c->y32, nullptr, s);
    else if (d->kind == QGOLD_PLUGIN_KQ_GEMV) rc = d->fn.kq_gemv(d->user, w, c->nbytes, c->rows, c->cols, c->x, c->batch, nullptr, c->y16, c->ws, s);
    else rc = d->fn.kq_dequant_f32(d->user, w, c->nbytes, c->rows, c->cols, c->y32, c->ws, s);
    if (rc != 0) fprintf(stderr, "qgold: bench %s: the call returned %d\n", d ? d->name : "qgold's own kernel", rc);
    return rc;
}

int bench_plugin(const qg_bench_opts *o, const qgold_plugin_kernel *d, double bw)
{
    const bool gemv = d->kind == QGOLD_PLUGIN_KQ_GEMV;
    if (!gemv && d->kind != QGOLD_PLUGIN_KQ_DEQUANT) return 0;
    const qg_ktype t = (qg_ktype)qg_kq_from_name(d->format);
    const qg_kernel *own = qg_registry_find(d->format, d->path, QG_BACKEND_CUDA);
    /* The shape of the CPU plugin rows (a 7B-class projection); --quick: a small one. */
    const size_t rows = o->quick ? 512 : 4096, cols = o->quick ? 4096 : 14336;
    const size_t rb = cols / 256 * qg_kq_block_bytes(t), qbytes = rows * rb, hbytes = rows * cols * 2;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const int nq = qg_bench_copies_for(qbytes, (size_t)prop.l2CacheSize), nh = gemv ? qg_bench_copies_for(hbytes, (size_t)prop.l2CacheSize) : 0;
    char label[200];
    snprintf(label, sizeof label, "%s %s %zux%zu", d->name, d->format, rows, cols);
    const double ybytes = gemv ? (double)rows * 16 * 2 : (double)rows * cols * 4;
    if (qg_bench_device_fits(label, (double)nq * qbytes + (double)nh * hbytes + ybytes + (double)cols * 16 * 2)) return 1;
    /* Ordinary blocks: quantized from uniform values by the reference quantizer (as the CPU rows). */
    std::vector<uint8_t> hw(qbytes);
    std::vector<float> row(cols);
    qg_rng g;
    qg_rng_init(&g, 0x62656E63u);
    for (size_t r = 0; r < rows; r++) {
        for (size_t c = 0; c < cols; c++) row[c] = qg_rng_uniform(&g, -1.0f, 1.0f);
        if (qg_kq_quantize_ref(t, row.data(), 1, cols, hw.data() + r * rb, rb) != 0) {
            fprintf(stderr, "qgold: bench %s: the reference quantizer refused row %zu\n", label, r);
            return 1;
        }
    }
    uint8_t *wq[256] = {nullptr};
    __half *wh[256] = {nullptr};
    uint16_t *x = nullptr, *y16 = nullptr;
    float *y32 = nullptr;
    for (int i = 0; i < nq; i++) {
        CK(cudaMalloc((void **)&wq[i], qbytes));
        CK(cudaMemcpy(wq[i], hw.data(), qbytes, cudaMemcpyHostToDevice));
    }
    for (int i = 0; i < nh; i++) {
        CK(cudaMalloc((void **)&wh[i], hbytes));
        qg_bench_fill_half((uint16_t *)wh[i], hbytes / 2);
    }
    CK(cudaMalloc((void **)&x, cols * 16 * 2));
    qg_bench_fill_half(x, cols * 16);
    if (gemv) CK(cudaMalloc((void **)&y16, rows * 16 * 2));
    else CK(cudaMalloc((void **)&y32, rows * cols * 4));
    CK(cudaDeviceSynchronize());
    cublasHandle_t h = nullptr;
    void *blas_ws = nullptr;
    if (gemv && qg_bench_cublas_open(&h, &blas_ws) != 0) return 1;
    static const size_t batches[] = {1, 16};
    const size_t nbatches = gemv && !o->quick ? 2 : 1;
    int rc = 0;
    for (size_t bi = 0; bi < nbatches && rc == 0; bi++) {
        const size_t B = batches[bi];
        void *ws = nullptr;
        const size_t wsb = d->workspace_bytes ? d->workspace_bytes(d->user, rows, cols, B) : 0;
        if (wsb > ((size_t)1 << 30)) {
            fprintf(stderr, "qgold: bench %s: workspace of %zu bytes (more than 1 GiB)\n", label, wsb);
            rc = 1;
            break;
        }
        if (wsb) {
            CK(cudaMalloc(&ws, wsb));
            CK(cudaMemset(ws, 0, wsb));
        }
        plug_ctx pc = {d, gemv, t, wq, nq, rows, cols, B, qbytes, x, y16, y32, ws}, oc = pc;
        oc.d = nullptr;
        qg_bench_blas_ctx bc = {h, wh, nh, rows, cols, B, (const __half *)x, (__half *)y16};
        /* One plain call first, outside any graph: the plugin's own CUDA runtime initialises itself here
         * (its first call in this process), not during a capture. */
        cudaStream_t s0;
        CK(cudaStreamCreate(&s0));
        rc = plug_launch(&pc, 0, s0);
        if (rc == 0 && cudaStreamSynchronize(s0) != cudaSuccess) rc = 1;
        cudaStreamDestroy(s0);
        /* Interleaved: each repetition times the baseline, qgold's own, then the plugin. */
        double tp[64], tq[64], tb[64], lo, hi;
        qg_bench_opts one = *o;
        one.reps = 1;
        for (int r = 0; r < o->reps && rc == 0; r++) {
            if (gemv) rc = qg_bench_time_graph(&one, nh * 2, qg_bench_blas_launch, &bc, &tb[r], &lo, &hi);
            if (rc == 0) rc = qg_bench_time_graph(&one, nq * 2, plug_launch, &oc, &tq[r], &lo, &hi);
            if (rc == 0) rc = qg_bench_time_graph(&one, nq * 2, plug_launch, &pc, &tp[r], &lo, &hi);
        }
        if (ws) cudaFree(ws);
        if (rc != 0) {
            fprintf(stderr, "qgold: bench %s: a timed call failed (the plugin's function must only enqueue work on the stream it gets)\n", label);
            break;
        }
        qg_bench_row out;
        memset(&out, 0, sizeof out);
        out.format = d->format, out.path = d->path, out.batch = (int)B, out.eff_vs = "BW_copy", out.speedup_vs = "";
        snprintf(out.shape, sizeof out.shape, "%zux%zu", rows, cols);
        /* bytes: packed weights with all their scales, plus the fp16 activations and outputs (GEMV) or the
         * float32 outputs written (dequant) */
        out.bytes = (double)qbytes + (gemv ? (double)(cols * B * 2) + (double)(rows * B * 2) : (double)rows * cols * 4);
        const double t_blas = gemv ? qg_bench_median(tb, o->reps, nullptr, nullptr) : 0;
        /* qgold's own row: speedup over cuBLAS fp16 (GEMV); a dequantizer has no baseline but BW_copy */
        out.backend = "cuda";
        const double t_own = out.t_med = qg_bench_median(tq, o->reps, &out.t_lo, &out.t_hi);
        out.eff = out.bytes / out.t_med / bw;
        out.speedup = gemv ? t_blas / out.t_med : 0, out.speedup_vs = gemv ? "cuBLAS fp16" : "";
        qg_bench_emit(o, &out);
        out.backend = "plugin";
        out.t_med = qg_bench_median(tp, o->reps, &out.t_lo, &out.t_hi);
        out.eff = out.bytes / out.t_med / bw;
        out.speedup = t_own / out.t_med;
        out.speedup_vs = own ? own->name : "qgold cuda";
        qg_bench_emit(o, &out);
    }
    if (h) cublasDestroy(h);
    cudaFree(blas_ws);
    for (int i = 0; i < nq; i++) cudaFree(wq[i]);
    for (int i = 0; i < nh; i++) cudaFree(wh[i]);
    cudaFree(x);
    cudaFree(y16);
    cudaFree(y32);
    return rc;
}

} // namespace

extern "C" int qg_bench_gpu_plugin(const qg_bench_opts *o, const qgold_plugin_kernel *d, double bw) { return bench_plugin(o, d, bw); }
