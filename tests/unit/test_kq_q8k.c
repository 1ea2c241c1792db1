/* The K-quant GEMV with Q8_K activations (qgold/kquants_q8k_gemv.h), every built row of the path:
 *   - the reference: each output the bits of qg_kq_dot_q8k_ref on the reference-quantized activations;
 *   - the CPU kernels: each output the bits of the pinned dot float order (kernels/cpu/kquants_rows.h,
 *     "Dot float order") formed here from the reference's exact integers S_i, M_i: four partial pairs,
 *     block i into pair i mod 4, sumS_p = fma(D dy, S_i, sumS_p), sumM_p = fma(Dm dy, M_i, sumM_p), y =
 *     ((sumS_0 + sumS_1) + (sumS_2 + sumS_3)) - (the same of sumM); the fp16 output that value rounded;
 *     (activations include the quantizer's special cases: zeros, sign ties of the max, subnormals, rounding
 *     ties, inf, NaN, the largest fp16 values);
 *   - thread-count invariance (1, 2 and 3 threads bitwise) and batch invariance (each column alone);
 *   - the path's activation quantizer against the reference quantizer's bytes;
 *   - the named errors (Q8_K weights unsupported, the GEMV's argument checks);
 *   - the kind's on-the-fly audit checks (random codes, random bytes with inf/NaN scales);
 *   - the CPU dot rows (dot_q8k, which the path's kernels share) against the same pinned order bitwise,
 *     with even and odd block counts (blocks are taken in pairs, then one).
 * Usage: test_kq_q8k [ref|avx2|neon] (default: every backend that can run here). */
#include "kinds.h"
#include "qg_test.h"
#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/kquants_layout.h"
#include "qgold/kernels_kq_q8k.h"
#include "qgold/kquants_q8k_gemv.h"
#include "qgold/rng.h"
#include "qgold/threads.h"

#include <math.h>

static qg_rng g_rng;

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static float ld_f16(const uint8_t *p) { return qg_f16_to_f32((qg_f16)(p[0] | p[1] << 8)); }

static void make_inputs(qg_ktype t, size_t rows, size_t cols, size_t batch, uint8_t *w, uint16_t *x)
{
    const size_t bb = qg_kq_block_bytes(t), nblk = rows * (cols / QG_QK_K);
    for (size_t i = 0; i < nblk * bb; i++) w[i] = (uint8_t)(qg_rng_u64(&g_rng) >> 56);
    for (size_t i = 0; i < nblk; i++) {
        uint8_t *blk = w + i * bb;
        put16(blk + (t == QG_Q6_K ? QG_Q6K_D : QG_Q4K_D), qg_f32_to_f16(qg_rng_uniform(&g_rng, 0.0001f, 0.002f)));
        if (t != QG_Q6_K) put16(blk + QG_Q4K_DMIN, qg_f32_to_f16(qg_rng_uniform(&g_rng, 0.0001f, 0.002f)));
    }
    for (size_t i = 0; i < batch * cols; i++) x[i] = qg_f32_to_f16(qg_rng_uniform(&g_rng, -1.0f, 1.0f)); /* below 3.5 */
}

/* Activations the Q8_K quantizer treats specially, one block each (cols >= 512 x batch 5): an all-zero
 * block; -a before +a (the first sets the sign of max); fp16 subnormals only; values on rounding ties
 * (k + 1/2 after scaling); an inf; a NaN; +a before -a; the largest fp16 values. */
static void special_activations(uint16_t *x, size_t cols, size_t batch)
{
    const size_t nblk = batch * cols / QG_QK_K;
    for (size_t g = 0; g < nblk && g < 8; g++) {
        uint16_t *b = x + g * QG_QK_K;
        switch (g) {
        case 0: memset(b, 0, QG_QK_K * 2); break;
        case 1: b[3] = qg_f32_to_f16(-3.5f), b[200] = qg_f32_to_f16(3.5f); break; /* above the random values */
        case 2:
            for (int i = 0; i < QG_QK_K; i++) b[i] = (uint16_t)((i * 37) & 0x3FF) | (uint16_t)(i & 1) << 15;
            break;
        case 3: /* max 127/64 scaled to 127: code of k/64 is k, ties at (2k+1)/128 */
            for (int i = 0; i < QG_QK_K; i++) b[i] = qg_f32_to_f16((float)((i % 255) - 127) / 64.0f + (i % 3 == 0 ? 1.0f / 128 : 0.0f));
            b[0] = qg_f32_to_f16(127.0f / 64.0f);
            break;
        case 4: b[17] = 0x7C00; break;
        case 5: b[99] = 0x7E00; break;
        case 6: b[5] = qg_f32_to_f16(4.0f), b[6] = qg_f32_to_f16(-4.0f); break;
        case 7: b[0] = 0x7BFF, b[1] = 0xFBFF, b[2] = 0x7BFE; break;
        }
    }
}

/* The expected float32 outputs [b][m]: the reference dot (ref row) or the pinned SIMD order. */
static int expected(qg_ktype t, int simd, const uint8_t *w, size_t rows, size_t cols, const uint16_t *x, size_t batch, float *y)
{
    const size_t nb = cols / QG_QK_K, qb = nb * QG_Q8K_BYTES, bb = qg_kq_block_bytes(t);
    float *xf = malloc(cols * sizeof *xf);
    uint8_t *q8 = malloc(batch * qb);
    int32_t *S = malloc(2 * nb * sizeof *S);
    if (!xf || !q8 || !S || qg_kq_q8k_activations(x, batch, cols, xf, q8) != QG_ERR_ok) return 1;
    for (size_t b = 0; b < batch; b++) {
        for (size_t m = 0; m < rows; m++) {
            const uint8_t *wr = w + m * nb * bb, *yr = q8 + b * qb;
            float r;
            if (qg_kq_dot_q8k_ref(t, wr, yr, cols, S, S + nb, &r) != QG_ERR_ok) return 1;
            if (simd) {
                float sS[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sM[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                for (size_t i = 0; i < nb; i++) {
                    float dy;
                    memcpy(&dy, yr + i * QG_Q8K_BYTES + QG_Q8K_D, 4);
                    const uint8_t *blk = wr + i * bb;
                    sS[i % 4] = fmaf(ld_f16(blk + (t == QG_Q6_K ? QG_Q6K_D : QG_Q4K_D)) * dy, (float)S[i], sS[i % 4]);
                    if (t != QG_Q6_K) sM[i % 4] = fmaf(ld_f16(blk + QG_Q4K_DMIN) * dy, (float)S[nb + i], sM[i % 4]);
                }
                r = ((sS[0] + sS[1]) + (sS[2] + sS[3])) - ((sM[0] + sM[1]) + (sM[2] + sM[3]));
            }
            y[b * rows + m] = r;
        }
    }
    free(xf);
    free(q8);
    free(S);
    return 0;
}

static void check_row(const qg_kernel *k)
{
    const qg_ktype t = (qg_ktype)qg_kq_from_name(k->format);
    const int simd = k->backend != QG_BACKEND_REF;
    /* the last shape carries special_activations; 9472 = 37 blocks is a long row (the CPU rows' prefetching
     * variant, 32 blocks and more) with a 4-, 2- and 1-block tail */
    static const size_t shapes[][3] = {{1, 256, 1}, {33, 1024, 3}, {70, 2048, 16}, {300, 4096, 2}, {19, 9472, 2}, {129, 512, 5}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const size_t rows = shapes[si][0], cols = shapes[si][1], batch = shapes[si][2], ny = rows * batch;
        const size_t nbytes = rows * (cols / QG_QK_K) * qg_kq_block_bytes(t);
        uint8_t *w = malloc(nbytes);
        uint16_t *x = malloc(batch * cols * 2), *y16 = malloc(ny * 2);
        float *ex = malloc(ny * 4), *y = malloc(ny * 4), *y2 = malloc(ny * 4);
        if (!w || !x || !y16 || !ex || !y || !y2) {
            QG_CHECK(0, "allocation");
            return;
        }
        make_inputs(t, rows, cols, batch, w, x);
        if (si == sizeof shapes / sizeof shapes[0] - 1) special_activations(x, cols, batch);
        QG_CHECK(expected(t, simd, w, rows, cols, x, batch, ex) == 0, "expected outputs");
        for (size_t i = 0; i < ny; i++)
            if (simd && ex[i] != ex[i]) ex[i] = qg_f32_from_bits(0x7FC00000u); /* the canonical NaN the CPU kernels write */
        qg_set_threads(1);
        QG_CHECK(k->fn.kq_gemv(t, w, nbytes, rows, cols, x, batch, y, y16) == QG_ERR_ok, "%s call", k->name);
        size_t bad = ny;
        for (size_t i = 0; i < ny && bad == ny; i++)
            if (memcmp(&y[i], &ex[i], 4) != 0 || y16[i] != qg_f32_to_f16(ex[i])) bad = i;
        QG_CHECK(bad == ny, "%s %zux%zu b%zu: output [%zu][%zu] = %a (fp16 %04x), expected %a", k->name, rows, cols, batch,
                 bad / rows, bad % rows, bad < ny ? (double)y[bad] : 0.0, bad < ny ? y16[bad] : 0, bad < ny ? (double)ex[bad] : 0.0);
        for (int th = 2; th <= 3; th++) { /* thread-count invariance */
            qg_set_threads(th);
            QG_CHECK(k->fn.kq_gemv(t, w, nbytes, rows, cols, x, batch, y2, NULL) == QG_ERR_ok, "%s call", k->name);
            QG_CHECK(memcmp(y, y2, ny * 4) == 0, "%s %zux%zu b%zu: %d threads differ from 1 thread", k->name, rows, cols, batch, th);
        }
        for (size_t b = 0; b < batch && batch > 1; b++) { /* batch invariance */
            QG_CHECK(k->fn.kq_gemv(t, w, nbytes, rows, cols, x + b * cols, 1, y2, NULL) == QG_ERR_ok, "%s call", k->name);
            QG_CHECK(memcmp(y + b * rows, y2, rows * 4) == 0, "%s %zux%zu: column %zu alone differs from it in a batch of %zu", k->name,
                     rows, cols, b, batch);
        }
        qg_set_threads(0);
        /* named errors */
        /* Q8_K weights have no Q8_K dot: rejected after the shape checks, before any weight is read */
        QG_CHECK(k->fn.kq_gemv(QG_Q8_K, w, rows * (cols / QG_QK_K) * QG_Q8K_BYTES, rows, cols, x, 1, y, NULL) == QG_ERR_unsupported,
                 "%s: Q8_K weights", k->name);
        QG_CHECK(k->fn.kq_gemv(t, w, nbytes, rows, cols, x, 0, y, NULL) == QG_ERR_kq_batch_out_of_range, "%s: batch 0", k->name);
        QG_CHECK(k->fn.kq_gemv(t, w, nbytes, rows, cols, x, QG_KQ_MAX_BATCH + 1, y, NULL) == QG_ERR_kq_batch_out_of_range,
                 "%s: batch 17", k->name);
        QG_CHECK(k->fn.kq_gemv(t, NULL, nbytes, rows, cols, x, 1, y, NULL) == QG_ERR_argument_invalid, "%s: NULL weights", k->name);
        QG_CHECK(k->fn.kq_gemv(t, w, nbytes - 1, rows, cols, x, 1, y, NULL) != QG_ERR_ok, "%s: short buffer", k->name);
        QG_CHECK(k->fn.kq_gemv(t, w, nbytes, rows, cols, x, 1, NULL, NULL) == QG_ERR_argument_invalid, "%s: no output", k->name);
        free(w);
        free(x);
        free(y16);
        free(ex);
        free(y);
        free(y2);
    }
    /* The kind's on-the-fly audit checks. */
    const qga_kind *d = qga_kind_find(QG_KIND_KQ_GEMV_Q8K);
    QG_CHECK(d != NULL && d->generated != NULL, "kind kq_gemv_q8k registered with on-the-fly checks");
    if (d == NULL || d->generated == NULL) return;
    qga_generated gen[8];
    const size_t n = d->generated(k, 0, gen, 8);
    QG_CHECK(n >= 3, "%s: %zu on-the-fly checks", k->name, n);
    for (size_t i = 0; i < n; i++) {
        qg_audit_row row;
        memset(&row, 0, sizeof row);
        qg_err e;
        const int rc = gen[i].run(&gen[i].params, &row, &e);
        QG_CHECK(rc == QG_ERR_ok, "%s %s: %s", k->name, gen[i].label, e.msg);
        QG_CHECK(row.elements > 0, "%s %s compared nothing", k->name, gen[i].label);
    }
}

/* The SIMD dot rows of the backend: the pinned order's bits and the reference's exact S, M. */
static void check_dot_rows(int only)
{
    /* 1..7 and 13 blocks: every tail of the kernels' 4-, 2- and 1-block steps */
    static const size_t colss[] = {256, 512, 768, 1024, 1280, 1536, 1792, 3328};
    for (size_t i = 0; i < qg_registry_count(); i++) {
        const qg_kernel *k = qg_registry_at(i);
        if (k->kind != QG_KIND_KQ_DOT || k->backend == QG_BACKEND_REF || (only >= 0 && (int)k->backend != only)) continue;
        if (!qg_kernel_available(k, NULL, 0)) continue;
        const qg_ktype t = (qg_ktype)qg_kq_from_name(k->format);
        for (size_t ci = 0; ci < sizeof colss / sizeof colss[0]; ci++) {
            const size_t cols = colss[ci], nb = cols / QG_QK_K, rows = 3;
            uint8_t *w = malloc(rows * nb * qg_kq_block_bytes(t)), *q8 = malloc(nb * QG_Q8K_BYTES);
            uint16_t *x = malloc(cols * 2);
            float *ex = malloc(rows * 4), *xf = malloc(cols * 4);
            int32_t *S = malloc(4 * nb * 4);
            if (!w || !q8 || !x || !ex || !xf || !S) {
                QG_CHECK(0, "allocation");
                return;
            }
            make_inputs(t, rows, cols, 1, w, x);
            QG_CHECK(expected(t, 1, w, rows, cols, x, 1, ex) == 0, "expected outputs");
            QG_CHECK(qg_kq_q8k_activations(x, 1, cols, xf, q8) == QG_ERR_ok, "activations");
            for (size_t m = 0; m < rows; m++) {
                const uint8_t *wr = w + m * nb * qg_kq_block_bytes(t);
                float r = 0, rr = 0;
                QG_CHECK(k->fn.kq_dot(t, wr, q8, cols, S, S + nb, &r) == QG_ERR_ok, "%s call", k->name);
                QG_CHECK(qg_kq_dot_q8k_ref(t, wr, q8, cols, S + 2 * nb, S + 3 * nb, &rr) == QG_ERR_ok, "reference dot");
                QG_CHECK(memcmp(&r, &ex[m], 4) == 0, "%s cols=%zu row %zu: %a, pinned order %a", k->name, cols, m, (double)r, (double)ex[m]);
                QG_CHECK(memcmp(S, S + 2 * nb, 2 * nb * 4) == 0, "%s cols=%zu row %zu: S/M differ from the reference", k->name, cols, m);
                /* without S/M (a separate loop in the kernels) the same bits */
                float r0 = 0;
                QG_CHECK(k->fn.kq_dot(t, wr, q8, cols, NULL, NULL, &r0) == QG_ERR_ok, "%s call without S/M", k->name);
                QG_CHECK(memcmp(&r0, &ex[m], 4) == 0, "%s cols=%zu row %zu, no S/M: %a, pinned order %a", k->name, cols, m, (double)r0,
                         (double)ex[m]);
            }
            /* The dot is defined over the Q8_K codes, not its bsums: with every bsum overwritten, Q6_K
             * (whose -32 offset meets the code sums) gives the same bits; Q4_K/Q5_K's M takes the bsums
             * by definition, so only Q6_K is checked here. */
            if (t == QG_Q6_K) {
                for (size_t b = 0; b < nb; b++)
                    for (int g = 0; g < 32; g++) q8[b * QG_Q8K_BYTES + QG_Q8K_BSUMS + g] = (uint8_t)(qg_rng_u64(&g_rng) >> 56);
                for (size_t m = 0; m < rows; m++) {
                    const uint8_t *wr = w + m * nb * qg_kq_block_bytes(t);
                    float r0 = 0, r1 = 0;
                    QG_CHECK(k->fn.kq_dot(t, wr, q8, cols, NULL, NULL, &r0) == QG_ERR_ok, "%s call", k->name);
                    QG_CHECK(k->fn.kq_dot(t, wr, q8, cols, S, S + nb, &r1) == QG_ERR_ok, "%s call", k->name);
                    QG_CHECK(memcmp(&r0, &ex[m], 4) == 0 && memcmp(&r1, &ex[m], 4) == 0, "%s cols=%zu row %zu, bsums overwritten: %a %a, pinned order %a",
                             k->name, cols, m, (double)r0, (double)r1, (double)ex[m]);
                }
            }
            free(w);
            free(q8);
            free(x);
            free(ex);
            free(xf);
            free(S);
        }
    }
}

/* The backend's activation quantizer against the reference quantizer's bytes, on the special
 * activations and on random ones. */
static void check_quantizer(int only)
{
    typedef int (*qfn)(const uint16_t *, size_t, uint8_t *);
    qfn fn = NULL;
    const char *name = NULL;
#if defined(__x86_64__)
    if ((only < 0 || only == QG_BACKEND_AVX2) && qg_backend_available(QG_BACKEND_AVX2, NULL, 0)) fn = qg_kq_q8k_quantize_avx2, name = "avx2";
#endif
#if defined(__aarch64__)
    if ((only < 0 || only == QG_BACKEND_NEON) && qg_backend_available(QG_BACKEND_NEON, NULL, 0)) fn = qg_kq_q8k_quantize_neon, name = "neon";
#endif
    if (fn == NULL) return;
    enum { COLS = 512, BATCH = 5, N = COLS * BATCH, NB = N / QG_QK_K };
    static uint16_t x[N];
    static float xf[COLS];
    static uint8_t a[NB * QG_Q8K_BYTES], b[NB * QG_Q8K_BYTES];
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < N; i++) x[i] = qg_f32_to_f16(qg_rng_uniform(&g_rng, -3.0f, 3.0f));
        if (round == 0) special_activations(x, COLS, BATCH);
        QG_CHECK(qg_kq_q8k_activations(x, BATCH, COLS, xf, a) == QG_ERR_ok, "reference activations");
        memset(b, 0xA5, sizeof b);
        QG_CHECK(fn(x, N, b) == QG_ERR_ok, "%s quantizer", name);
        size_t bad = sizeof a;
        for (size_t i = 0; i < sizeof a && bad == sizeof a; i++)
            if (a[i] != b[i]) bad = i;
        QG_CHECK(bad == sizeof a, "%s quantizer round %d: block %zu byte %zu: %02x, the reference %02x", name, round, bad / QG_Q8K_BYTES,
                 bad % QG_Q8K_BYTES, bad < sizeof a ? b[bad] : 0, bad < sizeof a ? a[bad] : 0);
    }
    QG_CHECK(fn(x, 300, b) == QG_ERR_kq_cols_not_multiple, "%s quantizer: 300 values", name);
    QG_CHECK(fn(x, 0, b) == QG_ERR_kq_cols_not_multiple, "%s quantizer: 0 values", name);
    QG_CHECK(fn(NULL, N, b) == QG_ERR_argument_invalid, "%s quantizer: NULL input", name);
}

int main(int argc, char **argv)
{
    const int only = argc > 1 ? qg_backend_from_name(argv[1]) : -1;
    if (argc > 1 && only < 0) {
        fprintf(stderr, "unknown backend %s\n", argv[1]);
        return 2;
    }
    qg_rng_init(&g_rng, 0x71386B01u);
    int ran = 0;
    for (size_t i = 0; i < qg_registry_count(); i++) {
        const qg_kernel *k = qg_registry_at(i);
        if (k->kind != QG_KIND_KQ_GEMV_Q8K || (only >= 0 && (int)k->backend != only)) continue;
        char why[160];
        if (!qg_kernel_available(k, why, sizeof why)) {
            if (only >= 0) {
                printf("skipped: %s: %s\n", k->name, why);
                return QG_TEST_SKIP;
            }
            continue;
        }
        check_row(k);
        ran++;
    }
    QG_CHECK(ran >= 3, "%d rows of kq_gemv_q8k ran", ran);
    check_dot_rows(only);
    check_quantizer(only);
    printf("%d rows, %d checks, %d failures\n", ran, qg_test_checks, qg_test_failures);
    return qg_test_failures != 0;
}
