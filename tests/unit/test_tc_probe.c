/* gpu.tc_probe.cuda: the tensor-core accumulation probe of numerics.md section 5.
 *
 * Single mma.m16n8k16 f32.f16.f16.f32 blocks (qg_cuda_mma_f16_probe) on crafted inputs, each output
 * D[i][j] = C[i][j] + sum_k A[i][k] B[k][j] compared with its exact value (every fp16 product is exact in
 * double; the double sum's own error gamma_17(2^-53) S is allowed for). Per output the error is measured in
 * units of S 2^-23 with S = |c| + sum |p_k|; the declared model (qg_cuda_mma_model_u: QG_MMA_U_ACC = 2^-21, four units)
 * must hold for every output. Input families, in the style of the published tensor-core studies:
 *   below_ulp   c = +-2^e (1 + m 2^-10) and sixteen products each below ulp(c), same or opposite sign;
 *   big_product one large product, c = 0 or tiny, fifteen products below its ulp, random signs;
 *   cancel      c = -p_0 exactly (a large product cancelled), fifteen small products of mixed sign;
 *   random      random signs and exponents (2^-6 .. 2^6) everywhere.
 * The same families through the bf16 form of the instruction (qg_cuda_mma_bf16_probe; values with 7-bit
 * mantissas), the Q4_K/Q5_K min term's, must hold the same model, and that term's three-way bf16 split of
 * a sub-block sum must be exact.
 * Prints the worst measured figure per family and overall. Where the process's device code has wgmma
 * (sm_90a), the same blocks through wgmma.m64n8k16 must give mma.sync's bits exactly (the M > 16 W4A16
 * kernel's batch invariance rests on it). Exit 77 without a GPU.
 */
#include "compare.h"
#include "qg_test.h"
#include "qgold/cuda.h"
#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/kernels_int4_cuda.h"
#include "qgold/kernels_kquants_gemm.h"
#include "qgold/rng.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BLOCKS_PER_FAMILY = 128, FAMILIES = 4 };
static const char *family_name[FAMILIES] = {"below_ulp", "big_product", "cancel", "random"};

/* The input type of the blocks being built and read: fp16 (10 stored mantissa bits) or bf16 (7). Every
 * value is made with at most that many mantissa bits and in the type's range, so the conversions below
 * are exact (bf16: the top half of the float32). */
static int g_bf16;

static uint16_t h(float v)
{
    if (!g_bf16) return qg_f32_to_f16(v);
    uint32_t u;
    memcpy(&u, &v, 4);
    return (uint16_t)(u >> 16);
}

static float hf(uint16_t b)
{
    if (!g_bf16) return qg_f16_to_f32(b);
    const uint32_t u = (uint32_t)b << 16;
    float v;
    memcpy(&v, &u, 4);
    return v;
}

/* in [1, 2) with a random mantissa of the type's width */
static float mant(qg_rng *r)
{
    const uint32_t n = g_bf16 ? 128u : 1024u;
    return 1.0f + (float)qg_rng_int_range(r, n) / (float)n;
}
static float sgn(qg_rng *r) { return qg_rng_int_range(r, 2) ? -1.0f : 1.0f; }

static void make_block(int fam, qg_rng *r, uint16_t *A, uint16_t *B, float *C)
{
    const int e = 6 + (int)qg_rng_int_range(r, 7); /* 2^6 .. 2^12: small terms stay fp16-representable */
    for (int i = 0; i < 16; i++)
        for (int k = 0; k < 16; k++) {
            float a;
            if (fam == 3)
                a = sgn(r) * ldexpf(mant(r), (int)qg_rng_int_range(r, 13) - 6);
            else if ((fam == 1 || fam == 2) && k == 0)
                a = sgn(r) * ldexpf(mant(r), e);
            else
                a = (fam == 0 ? 1.0f : sgn(r)) * mant(r);
            A[i * 16 + k] = h(a);
        }
    for (int k = 0; k < 16; k++)
        for (int j = 0; j < 8; j++) {
            float b;
            if (fam == 3)
                b = sgn(r) * ldexpf(mant(r), (int)qg_rng_int_range(r, 13) - 6);
            else if ((fam == 1 || fam == 2) && k == 0)
                b = mant(r);
            else /* |a b| < 2^(e - 23 - s) * 4 with s = 1 + j % 6: below the ulp of the large term */
                b = (fam == 0 ? (j < 4 ? 1.0f : -1.0f) : 1.0f) * ldexpf(mant(r), e - 23 - 1 - (j % 6) - (fam != 0 ? 1 : 0));
            B[k * 8 + j] = h(b);
        }
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 8; j++) {
            float c;
            if (fam == 0)
                c = sgn(r) * ldexpf(mant(r), e);
            else if (fam == 1)
                c = qg_rng_int_range(r, 2) ? 0.0f : ldexpf(mant(r), e - 40);
            else if (fam == 2)
                c = -(hf(A[i * 16]) * hf(B[j])); /* exact: a 22-bit product */
            else
                c = sgn(r) * ldexpf(mant(r), (int)qg_rng_int_range(r, 25) - 12);
            C[i * 8 + j] = c;
        }
}

/* Runs the blocks through `probe` and checks every output against the model; prints the figures. */
static double measure(const char *what, int (*probe)(const uint16_t *, const uint16_t *, const float *, float *, size_t),
                      const uint16_t *A, const uint16_t *B, const float *C, float *D, size_t count, int *rc_out)
{
    const int rc = probe(A, B, C, D, count);
    *rc_out = rc;
    QG_CHECK(rc == QG_ERR_ok, "%s probe: %s %s", what, qg_error_name(rc), qg_cuda_last_error());
    const double model = qg_cuda_mma_model_u(), unit = 0x1p-23;
    double worst[FAMILIES] = {0}, worst_all = 0;
    size_t nonzero[FAMILIES] = {0}, fails = 0;
    for (size_t b = 0; b < count && rc == QG_ERR_ok; b++) {
        const int fam = (int)(b / BLOCKS_PER_FAMILY);
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 8; j++) {
                const double c = C[b * 128 + i * 8 + j];
                double y = c, S = fabs(c);
                for (int k = 0; k < 16; k++) {
                    const double p = (double)hf(A[b * 256 + i * 16 + k]) * (double)hf(B[b * 128 + k * 8 + j]);
                    y += p;
                    S += fabs(p);
                }
                const double d = D[b * 128 + i * 8 + j], err = fabs(d - y);
                const double ratio = S > 0 ? err / (S * unit) : (err > 0 ? INFINITY : 0.0);
                if (err > 0) nonzero[fam]++;
                if (ratio > worst[fam]) worst[fam] = ratio;
                if (ratio > worst_all) worst_all = ratio;
                if (!(err <= model * S + qg_gamma(17, 0x1p-53) * S)) {
                    if (fails++ < 10)
                        fprintf(stderr, "tc_probe %s %s block %zu (%d, %d): got %a, exact %a, error %.3g units of S 2^-23 (model %.3g)\n", what,
                                family_name[fam], b, i, j, d, y, ratio, model / unit);
                }
            }
    }
    QG_CHECK(fails == 0, "%s: %zu outputs outside the declared model of %.3g units", what, fails, model / unit);
    if (rc == QG_ERR_ok) {
        printf("tc_probe %s, %zu blocks\n", what, count);
        for (int f = 0; f < FAMILIES; f++)
            printf("  %-12s worst error %.4f units of (|c| + sum|p|) 2^-23; %zu of %d outputs inexact\n", family_name[f], worst[f], nonzero[f],
                   BLOCKS_PER_FAMILY * 128);
    }
    return worst_all;
}

/* The Q4_K/Q5_K min term's three-way bf16 split of a sub-block sum X (a float32 multiple of 2^-24 below
 * 2^22 in magnitude: a tensor-core sum of fp16 activations) must be exact: hi + mid + lo == X. Random
 * such values over the whole range, every 24-bit pattern's extremes, values whose splits round up at
 * each step, zeros of both signs; checked on the device code itself. */
static void check_xsplit(void)
{
    enum { N = 1 << 16 };
    float *x = malloc(N * sizeof(float));
    uint32_t *parts = malloc(N / 2 * 3 * sizeof(uint32_t));
    QG_CHECK(x && parts, "allocation");
    if (!(x && parts)) {
        free(x), free(parts);
        return;
    }
    qg_rng r;
    qg_rng_init(&r, 0x5B17u);
    size_t n = 0;
    x[n++] = 0.0f;
    x[n++] = -0.0f;
    for (int e = -24; e <= 21 && n + 8 <= N; e++) { /* per exponent: the extremes of a 24-bit significand */
        const float full = ldexpf((float)0xFFFFFF, e - 23), one = ldexpf(1.0f, e);
        const float up = ldexpf((float)(0x808080u | 0x800000u), e - 23); /* each 8-bit step rounds up */
        x[n++] = full, x[n++] = -full, x[n++] = one, x[n++] = -one, x[n++] = up, x[n++] = -up;
        x[n++] = ldexpf((float)0x80FF7F, e - 23), x[n++] = ldexpf((float)0xFF7F81, e - 23);
    }
    while (n < N) { /* random multiples of 2^-24 of any magnitude below 2^22 */
        const int e = (int)qg_rng_int_range(&r, 46) - 24;
        const uint32_t m = 0x800000u | (uint32_t)qg_rng_int_range(&r, 0x800000u);
        /* bit i of the significand weighs 2^(i + e - 23): bits below 2^-24 (i < -1 - e) cleared */
        const int keep = e < -1 ? 25 + e : 24;
        const uint32_t mm = keep >= 24 ? m : m & ~((1u << (24 - keep)) - 1u);
        x[n++] = (qg_rng_int_range(&r, 2) ? -1.0f : 1.0f) * ldexpf((float)mm, e - 23);
    }
    const int rc = qg_cuda_kq_xsplit_probe(x, parts, N);
    QG_CHECK(rc == QG_ERR_ok, "xsplit probe: %s %s", qg_error_name(rc), qg_cuda_last_error());
    size_t bad = 0;
    for (size_t i = 0; i < N && rc == QG_ERR_ok; i++) {
        double sum = 0;
        for (int p = 0; p < 3; p++) {
            const uint32_t w = parts[3 * (i / 2) + p];
            const uint32_t b = (i & 1) ? (w & 0xFFFF0000u) : (w << 16);
            float v;
            memcpy(&v, &b, 4);
            sum += (double)v;
        }
        if (sum != (double)x[i] && bad++ < 10) fprintf(stderr, "xsplit: %a -> parts summing to %a\n", x[i], sum);
    }
    QG_CHECK(bad == 0, "%zu of %d sub-block sums not split exactly into three bf16", bad, N);
    if (rc == QG_ERR_ok) printf("tc_probe: the min term's bf16 split is exact on all %d values: %s\n", N, bad ? "NO" : "yes");
    free(x), free(parts);
}

int main(void)
{
    char why[200];
    if (qg_cuda_device_count(why, sizeof why) <= 0) return qg_test_no_gpu(why);
    char dev[256];
    qg_cuda_describe(dev, sizeof dev);
    const size_t count = (size_t)FAMILIES * BLOCKS_PER_FAMILY;
    uint16_t *A = malloc(count * 256 * 2), *B = malloc(count * 128 * 2);
    float *C = malloc(count * 128 * 4), *D = malloc(count * 128 * 4);
    QG_CHECK(A && B && C && D, "allocation");
    if (!(A && B && C && D)) return qg_test_end("tc_probe");
    const double model = qg_cuda_mma_model_u(), unit = 0x1p-23;
    qg_rng r;
    /* bf16 blocks first (the K-quant min term's instruction), then the fp16 ones, which the wgmma
     * comparison below reuses */
    g_bf16 = 1;
    qg_rng_init(&r, 0xB0F16);
    for (size_t b = 0; b < count; b++) make_block((int)(b / BLOCKS_PER_FAMILY), &r, A + b * 256, B + b * 128, C + b * 128);
    int rcb;
    const double worst_bf16 = measure("mma.m16n8k16 f32.bf16.bf16.f32", qg_cuda_mma_bf16_probe, A, B, C, D, count, &rcb);
    (void)rcb; /* measure checked it */
    g_bf16 = 0;
    qg_rng_init(&r, 0x7C0BE);
    for (size_t b = 0; b < count; b++) make_block((int)(b / BLOCKS_PER_FAMILY), &r, A + b * 256, B + b * 128, C + b * 128);
    int rc;
    const double worst_all = measure("mma.m16n8k16 f32.f16.f16.f32", qg_cuda_mma_f16_probe, A, B, C, D, count, &rc);

    /* wgmma (the M > 16 W4A16 kernel's instruction on sm_90a): every output of the same blocks must equal
     * mma.sync's bit for bit, or that kernel would give a row other bits than the M <= 16 kernels do */
    check_xsplit();

    float *Dw = malloc(count * 128 * 4);
    QG_CHECK(Dw != NULL, "allocation");
    const int rw = Dw && rc == QG_ERR_ok ? qg_cuda_wgmma_f16_probe(A, B, C, Dw, count) : QG_ERR_alloc_failed;
    if (rw == QG_ERR_unsupported) {
        printf("tc_probe: no wgmma in this process's device code (not an sm_90a build on an sm_90 device, or QG_CUDA_INT4_WGMMA=0)\n");
    } else {
        QG_CHECK(rw == QG_ERR_ok, "wgmma probe: %s %s", qg_error_name(rw), qg_cuda_last_error());
        size_t differ = 0;
        for (size_t i = 0; i < count * 128 && rw == QG_ERR_ok; i++) {
            uint32_t bm, bw;
            memcpy(&bm, &D[i], 4);
            memcpy(&bw, &Dw[i], 4);
            if (bm != bw && differ++ < 10)
                fprintf(stderr, "tc_probe %s block %zu output %zu: mma.sync %08x, wgmma %08x\n", family_name[i / 128 / BLOCKS_PER_FAMILY],
                        i / 128, i % 128, bm, bw);
        }
        QG_CHECK(differ == 0, "%zu of %zu outputs differ between wgmma.m64n8k16 and mma.m16n8k16", differ, count * 128);
        if (rw == QG_ERR_ok) printf("tc_probe: wgmma.m64n8k16 equals mma.m16n8k16 bit for bit on all %zu outputs: %s\n", count * 128, differ ? "NO" : "yes");
    }
    free(Dw);
    printf("tc_probe on %s: measured worst %.4f units (f16), %.4f units (bf16); declared model %.4f units (u_acc = %a)\n", dev, worst_all,
           worst_bf16, model / unit, model);
    free(A), free(B), free(C), free(D);
    return qg_test_end("tc_probe");
}
