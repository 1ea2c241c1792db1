/* GPU half of qgold bench for rANS int8 tiles: the decode-only kernel, the fused decode + dequant + GEMV
 * and the plain int8 W8A16 GEMV with the same pinned summation order, timed interleaved in the same run.
 *
 * Weights: int8 codes drawn on the host from a rounded near-Gaussian (sum of four uniforms, sigma 30
 * codes, clipped to [-127, 127]): entropy about 6.9 bits, so the container is about 0.88 of the raw
 * bytes, which is where real int8 weights land. Encoded once per shape by the reference encoder
 * (qg_rans_encode, predictor 0, no checksums); the container and the raw int8 matrix are then copied
 * on the device so that one pass over the copies streams >= 12 x L2.
 *
 * Rows (seconds per call, median over repetitions):
 *   decode     container -> int8 matrix; bytes = container + decoded bytes; the decoded-int8 rate is
 *              printed as a note per shape;
 *   gemv       fused product (activation conversion, tile kernel, ordered partial sums); bytes =
 *              container + x + fp16 y; speedup = t(int8 GEMV) / t(fused), both timed in each repetition;
 *   int8_gemv  the baseline on the uncompressed matrix; bytes = weights + scales + x + fp16 y; eff vs
 *              BW_copy.
 * After timing, one fused and one int8 call are compared bit for bit (fp16 outputs) and every tile's
 * status word is checked: a figure is never reported for wrong results.
 */
#include "bench.h"
#include "bench_gpu.h"

#include "qgold/errors.h"
#include "qgold/kernels_rans.h"
#include "qgold/rans.h"

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

/* Four 16-bit uniforms summed: mean 131070, sigma 65536 * sqrt(4 / 12); scaled to sigma 30 codes. */
void make_weights(uint8_t *w, size_t n, uint64_t seed)
{
    const double k = 30.0 / (65536.0 * sqrt(4.0 / 12.0));
    for (size_t i = 0; i < n; i++) {
        const uint64_t r = splitmix(&seed);
        const double s = (double)(r & 0xFFFF) + (double)((r >> 16) & 0xFFFF) + (double)((r >> 32) & 0xFFFF) + (double)(r >> 48);
        long q = lround((s - 131070.0) * k);
        q = q < -127 ? -127 : q > 127 ? 127 : q;
        w[i] = (uint8_t)(int8_t)q;
    }
}

struct dec_ctx {
    const qg_rans_cuda_plan *p;
    uint8_t **buf;
    int ncopies;
    uint8_t *w;
    uint32_t *status;
};

int dec_launch(void *vc, int call, cudaStream_t s)
{
    dec_ctx *c = (dec_ctx *)vc;
    return qg_rans_decode_cuda_async(c->p, c->buf[call % c->ncopies], c->w, c->status, s) != QG_ERR_ok;
}

struct fused_ctx {
    const qg_rans_cuda_plan *p;
    uint8_t **buf;
    int ncopies;
    const uint16_t *x;
    size_t batch;
    void *scratch;
    uint32_t *status;
    uint16_t *y;
};

int fused_launch(void *vc, int call, cudaStream_t s)
{
    fused_ctx *c = (fused_ctx *)vc;
    return qg_rans_gemv_cuda_async(c->p, c->buf[call % c->ncopies], c->x, c->batch, c->scratch, c->status, nullptr, c->y, s) !=
           QG_ERR_ok;
}

struct i8_ctx {
    uint8_t **w;
    int ncopies;
    const float *scales;
    size_t M, K;
    const uint16_t *x;
    size_t batch;
    void *scratch;
    uint16_t *y;
};

int i8_launch(void *vc, int call, cudaStream_t s)
{
    i8_ctx *c = (i8_ctx *)vc;
    return qg_int8_gemv_cuda_async(c->w[call % c->ncopies], c->scales, c->M, c->K, c->x, c->batch, c->scratch, nullptr, c->y, s) !=
           QG_ERR_ok;
}

int all_ok(const uint32_t *dstatus, size_t n)
{
    std::vector<uint32_t> h(n > 0 ? n : 1);
    if (n > 0 && cudaMemcpy(h.data(), dstatus, n * 4, cudaMemcpyDeviceToHost) != cudaSuccess) return 0;
    for (size_t i = 0; i < n; i++)
        if (h[i] != 0) return 0;
    return 1;
}

} // namespace

extern "C" int qg_bench_gpu_rans(const qg_bench_opts *o, double bw)
{
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const size_t l2 = (size_t)prop.l2CacheSize;
    static const size_t shapes_full[][2] = {{4096, 4096}, {8192, 8192}, {28672, 8192}, {8192, 28672}};
    static const size_t shapes_quick[][2] = {{1024, 1024}};
    static const size_t batches_std[] = {1, 16};
    const size_t(*shapes)[2] = o->quick ? shapes_quick : shapes_full;
    size_t nshapes = o->quick ? 1 : 4;
    const size_t *batches = batches_std;
    size_t nbatches = 2;
    static size_t custom[16][2], cbatches[16];
    const int ns = qg_bench_parse_shapes(o->shapes, custom, 16), nbt = qg_bench_parse_batches(o->batches, cbatches, 16);
    if (ns < 0 || nbt < 0) return 1;
    if (ns > 0) shapes = (const size_t(*)[2])custom, nshapes = (size_t)ns;
    if (nbt > 0) batches = cbatches, nbatches = (size_t)nbt;
    qg_bench_note(o, "L2_bytes", "%zu", l2);
    qg_bench_note(o, "rans_weights", "rounded near-Gaussian int8 codes, sigma 30, clipped to +-127; predictor 0, no checksums");
    qg_bench_note(o, "rans_baseline", "plain int8 W8A16 GEMV (qg_int8_gemv_cuda_async), same order and bits, interleaved");
    int rc = 0;
    for (size_t si = 0; si < nshapes && rc == 0; si++) {
        const size_t M = shapes[si][0], K = shapes[si][1], MK = M * K;
        if (M == 0 || K == 0 || M > UINT32_MAX || K > UINT32_MAX) continue;
        char shape[48], label[64];
        snprintf(shape, sizeof shape, "%zux%zu", M, K);
        snprintf(label, sizeof label, "rans %s", shape);
        /* the int8 weight copies and the decode output, before the host encodes anything */
        if (qg_bench_device_fits(label, (double)(qg_bench_copies_for(MK, l2) + 1) * (double)MK)) return 1;
        /* host: weights, scales, container */
        uint8_t *hw = (uint8_t *)malloc(MK);
        float *hs = (float *)malloc(M * 4);
        uint8_t *modes = (uint8_t *)calloc(((M + 255) / 256) * ((K + 255) / 256), 1);
        if (hw == nullptr || hs == nullptr || modes == nullptr) {
            free(hw), free(hs), free(modes);
            return qg_bench_alloc_error(label, "host weights and scales", (double)MK + 4.0 * (double)M);
        }
        make_weights(hw, MK, 1234u + si);
        for (size_t r = 0; r < M; r++) hs[r] = 1.0f / 64.0f + (float)(r % 7) / 1024.0f;
        uint8_t *cont = nullptr;
        size_t clen = 0;
        const double t0 = qg_now();
        int erc = qg_rans_encode(hw, hs, (uint32_t)M, (uint32_t)K, modes, 0, &cont, &clen);
        const double tenc = qg_now() - t0;
        free(modes);
        qg_rans_cuda_plan plan;
        if (erc != QG_ERR_ok || (erc = qg_rans_cuda_plan_make(cont, clen, &plan)) != QG_ERR_ok) {
            fprintf(stderr, "qgold bench: rans encode/plan %s: %s\n", shape, qg_error_name(erc));
            free(hw), free(hs), free(cont);
            return 1;
        }
        qg_bench_note(o, "rans_ratio", "%s: container %zu bytes = %.4f of raw (host encode %.1f s)", shape, clen, (double)clen / (double)MK,
                      tenc);
        /* device copies */
        const int nc = qg_bench_copies_for(clen, l2), nw = qg_bench_copies_for(MK, l2);
        std::vector<uint8_t *> dc(nc, nullptr), dw(nw, nullptr);
        uint8_t *dout = nullptr;
        float *dscales = nullptr;
        uint16_t *dx = nullptr, *dy = nullptr, *dy2 = nullptr;
        uint32_t *dstatus = nullptr;
        void *scratch = nullptr;
        const size_t ntiles = (size_t)plan.tiles_r * plan.tiles_c;
        for (int i = 0; i < nc; i++) CK(cudaMalloc((void **)&dc[i], clen));
        for (int i = 0; i < nw; i++) CK(cudaMalloc((void **)&dw[i], MK));
        CK(cudaMemcpy(dc[0], cont, clen, cudaMemcpyHostToDevice));
        for (int i = 1; i < nc; i++) CK(cudaMemcpy(dc[i], dc[0], clen, cudaMemcpyDeviceToDevice));
        CK(cudaMemcpy(dw[0], hw, MK, cudaMemcpyHostToDevice));
        for (int i = 1; i < nw; i++) CK(cudaMemcpy(dw[i], dw[0], MK, cudaMemcpyDeviceToDevice));
        CK(cudaMalloc((void **)&dout, MK));
        CK(cudaMalloc((void **)&dscales, M * 4));
        CK(cudaMemcpy(dscales, hs, M * 4, cudaMemcpyHostToDevice));
        CK(cudaMalloc((void **)&dx, K * 16 * 2));
        CK(cudaMalloc((void **)&dy, M * 16 * 2));
        CK(cudaMalloc((void **)&dy2, M * 16 * 2));
        CK(cudaMalloc((void **)&dstatus, ntiles * 4));
        CK(cudaMalloc(&scratch, qg_rans_cuda_scratch_bytes((uint32_t)M, (uint32_t)K)));
        qg_bench_fill_half(dx, K * 16);
        CK(cudaDeviceSynchronize());

        qg_bench_opts one = *o;
        one.reps = 1;
        double tmp_lo, tmp_hi, lo, hi;
        /* decode only */
        {
            dec_ctx dcx = {&plan, dc.data(), nc, dout, dstatus};
            qg_bench_row row = {"rans", "decode", "cuda", "", 0, 0, 0, 0, 0, 0, "BW_copy", 0, ""};
            snprintf(row.shape, sizeof row.shape, "%s", shape);
            rc = qg_bench_time_graph(o, nc * 2, dec_launch, &dcx, &row.t_med, &row.t_lo, &row.t_hi);
            if (rc == 0) {
                std::vector<uint8_t> back(MK);
                CK(cudaMemcpy(back.data(), dout, MK, cudaMemcpyDeviceToHost));
                if (!all_ok(dstatus, ntiles) || memcmp(back.data(), hw, MK) != 0) {
                    fprintf(stderr, "qgold bench: rans decode %s: wrong result\n", shape);
                    rc = 1;
                }
            }
            if (rc == 0) {
                row.bytes = (double)clen + (double)MK;
                row.eff = row.bytes / row.t_med / bw;
                qg_bench_emit(o, &row);
                int clk = 0;
                cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
                qg_bench_note(o, "rans_decoded_GBps", "%s: %.1f GB/s of decoded int8 (%.2f symbols per SM-clock at %d MHz)", shape,
                              (double)MK / row.t_med / 1e9, (double)MK / row.t_med / ((double)prop.multiProcessorCount * clk * 1e3),
                              clk / 1000);
            }
        }
        for (size_t bi = 0; bi < nbatches && rc == 0; bi++) {
            const size_t B = batches[bi];
            if (B < 1 || B > QG_RANS_MAX_BATCH) continue;
            fused_ctx fc = {&plan, dc.data(), nc, dx, B, scratch, dstatus, dy};
            i8_ctx ic = {dw.data(), nw, dscales, M, K, dx, B, scratch, dy2};
            double tf[64], ti[64];
            for (int r = 0; r < o->reps && rc == 0; r++) {
                rc = qg_bench_time_graph(&one, nw * 2, i8_launch, &ic, &ti[r], &tmp_lo, &tmp_hi);
                if (rc == 0) rc = qg_bench_time_graph(&one, nc * 2, fused_launch, &fc, &tf[r], &tmp_lo, &tmp_hi);
            }
            if (rc != 0) break;
            /* one more of each, compared bit for bit */
            CK(cudaMemset(dy, 0, M * B * 2));
            CK(cudaMemset(dy2, 0xFF, M * B * 2));
            if (fused_launch(&fc, 0, 0) != 0 || i8_launch(&ic, 0, 0) != 0) rc = 1;
            CK(cudaDeviceSynchronize());
            std::vector<uint16_t> a(M * B), b(M * B);
            CK(cudaMemcpy(a.data(), dy, M * B * 2, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(b.data(), dy2, M * B * 2, cudaMemcpyDeviceToHost));
            if (rc != 0 || !all_ok(dstatus, ntiles) || memcmp(a.data(), b.data(), M * B * 2) != 0) {
                fprintf(stderr, "qgold bench: rans gemv %s batch %zu: fused and int8 results differ\n", shape, B);
                rc = 1;
                break;
            }
            const double t8 = qg_bench_median(ti, o->reps, &lo, &hi);
            qg_bench_row r8 = {"rans", "int8_gemv", "cuda", "", (int)B, 0, 0, 0, 0, 0, "BW_copy", 0, ""};
            snprintf(r8.shape, sizeof r8.shape, "%s", shape);
            r8.t_med = t8;
            r8.t_lo = lo;
            r8.t_hi = hi;
            r8.bytes = (double)MK + 4.0 * (double)M + 2.0 * (double)(K * B) + 2.0 * (double)(M * B);
            r8.eff = r8.bytes / r8.t_med / bw;
            qg_bench_emit(o, &r8);
            qg_bench_row rf = {"rans", "gemv", "cuda", "", (int)B, 0, 0, 0, 0, 0, "BW_copy", 0, "int8 GEMV (same run)"};
            snprintf(rf.shape, sizeof rf.shape, "%s", shape);
            rf.t_med = qg_bench_median(tf, o->reps, &lo, &hi);
            rf.t_lo = lo;
            rf.t_hi = hi;
            rf.bytes = (double)clen + 2.0 * (double)(K * B) + 2.0 * (double)(M * B);
            rf.eff = rf.bytes / rf.t_med / bw;
            rf.speedup = t8 / rf.t_med;
            qg_bench_emit(o, &rf);
        }
        for (int i = 0; i < nc; i++) cudaFree(dc[i]);
        for (int i = 0; i < nw; i++) cudaFree(dw[i]);
        cudaFree(dout);
        cudaFree(dscales);
        cudaFree(dx);
        cudaFree(dy);
        cudaFree(dy2);
        cudaFree(dstatus);
        cudaFree(scratch);
        qg_rans_cuda_plan_free(&plan);
        free(hw);
        free(hs);
        free(cont);
    }
    return rc;
}
