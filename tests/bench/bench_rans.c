/* qgold bench --format rans, CPU half: for every available CPU backend, on containers encoded on the fly
 * (by the reference encoder, auto predictors) from low-entropy int8 weights (a discretized Laplacian, so
 * the container is about 0.85-0.95 of the raw bytes, as real int8 weights compress), all threads:
 *
 *   decode     the decoded-symbol rate: GB/s counts decoded int8 bytes (M x K); eff = that / BW_read,
 *              i.e. the raw-equivalent read rate the decoder sustains;
 *   int8_gemv  the plain W8A16 GEMV on the uncompressed matrix, same order and bits as the fused product:
 *              bytes = weights + scales + activations + outputs;
 *   gemv       the fused decode + dequant + GEMV: bytes = the container (compressed weights, tile headers,
 *              scales) + activations + outputs; speedup = t(int8 GEMV) / t(fused) in the same run.
 * The scalar reference (one thread) is timed on the first shape only, as a comparison row.
 */
#include "bench.h"

#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/threads.h"
#include "qgold/rans.h"
#include "qgold/registry.h"
#include "qgold/rng.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const qg_kernel *k;
    const uint8_t *buf, *w;
    size_t len;
    const float *scales;
    size_t M, K, batch;
    const uint16_t *x;
    uint8_t *wout;
    float *y;
} rans_call;

static int call_once(const rans_call *c)
{
    switch (c->k->kind) {
    case QG_KIND_RANS_DECODE: return c->k->fn.rans_decode(c->buf, c->len, c->wout, c->M * c->K);
    case QG_KIND_RANS_GEMV: return c->k->fn.rans_gemv(c->buf, c->len, c->x, c->batch, c->y, NULL);
    default: return c->k->fn.int8_gemv(c->w, c->scales, c->M, c->K, c->x, c->batch, c->y, NULL);
    }
}

/* Median time per call over o->reps repetitions after one warm-up; negative on a kernel error. */
static double time_call(const qg_bench_opts *o, const rans_call *c, double *lo, double *hi)
{
    double t[64];
    if (call_once(c) != QG_ERR_ok) return -1.0;
    for (int r = 0; r < o->reps; r++) {
        const double t0 = qg_now();
        call_once(c);
        t[r] = qg_now() - t0;
    }
    return qg_bench_median(t, o->reps, lo, hi);
}

/* A discretized Laplacian of scale b, clamped to int8 (entropy about log2(2 e b) bits). */
static uint8_t laplace_code(qg_rng *r, float b)
{
    const float u = qg_rng_uniform(r, -0.5f, 0.5f);
    const float a = fabsf(u) * 2.0f;
    float v = -b * logf(1.0f - (a < 0.999999f ? a : 0.999999f));
    v = u < 0 ? -v : v;
    long q = lroundf(v);
    q = q > 127 ? 127 : q < -128 ? -128 : q;
    return (uint8_t)(int8_t)q;
}

int qg_bench_cpu_rans(const qg_bench_opts *o, int threads, double bw_read)
{
    static const size_t std_shapes[][2] = {{4096, 4096}, {4096, 14336}, {14336, 4096}, {8192, 8192}, {28672, 8192}, {8192, 28672}};
    static const size_t quick_shapes[][2] = {{512, 2048}};
    size_t custom[16][2], cbatches[16], batches[16] = {1, 16};
    const size_t(*shapes)[2] = o->quick ? quick_shapes : std_shapes;
    size_t nshapes = o->quick ? 1 : 6, nbatches = o->quick ? 1 : 2;
    const int ns = qg_bench_parse_shapes(o->shapes, custom, 16), nbt = qg_bench_parse_batches(o->batches, cbatches, 16);
    if (ns < 0 || nbt < 0) return 1;
    if (ns > 0) shapes = (const size_t(*)[2])custom, nshapes = (size_t)ns;
    if (nbt > 0) memcpy(batches, cbatches, sizeof cbatches), nbatches = (size_t)nbt;
    qg_bench_note(o, "rans_weights", "discretized Laplacian int8, scale 24; container from the reference encoder, auto predictors");
    int rc = 0;
    for (size_t si = 0; si < nshapes && rc == 0; si++) {
        const size_t M = shapes[si][0], K = shapes[si][1];
        char label[80];
        snprintf(label, sizeof label, "rans %zux%zu", M, K);
        /* M, K <= 2^31 - 1 (qg_bench_check): no size below overflows */
        uint8_t *w = malloc(M * K), *wout = malloc(M * K), *buf = NULL;
        float *scales = malloc(M * sizeof(float)), *y = malloc(M * 16 * sizeof(float));
        uint16_t *x = malloc(K * 16 * sizeof(uint16_t));
        size_t len = 0;
        if (!w || !wout || !scales || !y || !x)
            rc = qg_bench_alloc_error(label, "weights and vectors", 2.0 * (double)M * (double)K + 68.0 * (double)M + 32.0 * (double)K);
        if (rc == 0) {
            qg_rng r;
            qg_rng_init(&r, 2026);
            for (size_t i = 0; i < M * K; i++) w[i] = laplace_code(&r, 24.0f);
            for (size_t i = 0; i < M; i++) scales[i] = qg_rng_uniform(&r, 0.001f, 0.01f);
            for (size_t i = 0; i < K * 16; i++) x[i] = qg_f32_to_f16(qg_rng_uniform(&r, -1.0f, 1.0f));
            const int erc = qg_rans_encode(w, scales, (uint32_t)M, (uint32_t)K, NULL, 0, &buf, &len);
            if (erc != QG_ERR_ok) {
                fprintf(stderr, "qgold: bench %s: the reference encoder failed: %s: %s\n", label, qg_error_name(erc),
                        qg_error_message(erc));
                rc = 1;
            }
        }
        if (rc == 0) {
            char key[64];
            snprintf(key, sizeof key, "rans_ratio_%zux%zu", M, K);
            qg_bench_note(o, key, "%.4f (container bytes / int8 bytes)", (double)len / ((double)M * (double)K));
        }
        for (int be = 0; be < QG_BACKEND_COUNT && rc == 0; be++) {
            if (be == QG_BACKEND_CUDA || (o->backend >= 0 && be != o->backend)) continue;
            if (be == QG_BACKEND_REF && si > 0) continue; /* one comparison row set for the reference */
            const qg_kernel *kd = qg_registry_find("rans", "decode", (qg_backend)be);
            const qg_kernel *kg = qg_registry_find("rans", "gemv", (qg_backend)be);
            const qg_kernel *ki = qg_registry_find("rans", "int8_gemv", (qg_backend)be);
            if (!kd || !kg || !ki || !qg_kernel_available(kd, NULL, 0) || !qg_kernel_available(kg, NULL, 0) ||
                !qg_kernel_available(ki, NULL, 0))
                continue;
            qg_set_threads(be == QG_BACKEND_REF ? 1 : threads);
            char shape[48];
            snprintf(shape, sizeof shape, "%zux%zu", M, K);
            rans_call c = {kd, buf, w, len, scales, M, K, 1, x, wout, y};
            qg_bench_row row = {"rans", "decode", qg_backend_name((qg_backend)be), "", 1, 0, 0, 0, 0, 0, "BW_read", 0, ""};
            memcpy(row.shape, shape, sizeof shape);
            row.t_med = time_call(o, &c, &row.t_lo, &row.t_hi);
            if (row.t_med < 0 || memcmp(w, wout, M * K) != 0) {
                qg_bench_note(o, "error", "%s failed on %s", kd->name, shape);
                rc = 1;
                break;
            }
            row.bytes = (double)M * (double)K;
            row.eff = row.bytes / row.t_med / bw_read;
            qg_bench_emit(o, &row);
            for (size_t bi = 0; bi < nbatches; bi++) {
                const size_t B = batches[bi];
                const double xy = (double)K * (double)B * 2.0 + (double)M * (double)B * 4.0;
                rans_call ci = {ki, buf, w, len, scales, M, K, B, x, wout, y};
                qg_bench_row ri = {"rans", "int8_gemv", qg_backend_name((qg_backend)be), "", (int)B, 0, 0, 0, 0, 0, "BW_read", 0, ""};
                memcpy(ri.shape, shape, sizeof shape);
                ri.t_med = time_call(o, &ci, &ri.t_lo, &ri.t_hi);
                rans_call cg = {kg, buf, w, len, scales, M, K, B, x, wout, y};
                qg_bench_row rg = {"rans", "gemv", qg_backend_name((qg_backend)be), "", (int)B, 0, 0, 0, 0, 0, "BW_read", 0, "int8 GEMV"};
                memcpy(rg.shape, shape, sizeof shape);
                rg.t_med = time_call(o, &cg, &rg.t_lo, &rg.t_hi);
                if (ri.t_med < 0 || rg.t_med < 0) {
                    qg_bench_note(o, "error", "%s or %s failed on %s", ki->name, kg->name, shape);
                    rc = 1;
                    break;
                }
                ri.bytes = (double)M * (double)K + 4.0 * (double)M + xy;
                ri.eff = ri.bytes / ri.t_med / bw_read;
                qg_bench_emit(o, &ri);
                rg.bytes = (double)len + xy;
                rg.eff = rg.bytes / rg.t_med / bw_read;
                rg.speedup = ri.t_med / rg.t_med;
                qg_bench_emit(o, &rg);
            }
        }
        free(w);
        free(wout);
        free(buf);
        free(scales);
        free(y);
        free(x);
    }
    qg_set_threads(0);
    return rc;
}
