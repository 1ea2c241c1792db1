/* The K-quant gemm path (batch 1..64): `test_kq_gemm ref` (label unit) and `test_kq_gemm cuda` (label
 * gpu; exit 77 without a device, 1 with QG_REQUIRE_GPU=1).
 *
 * For every type, over shapes drawn from the pinned PRNG (rows not a multiple of 16, some blocks with
 * non-finite scales and some activations inf/NaN in the "special" shapes, and a large ordinary shape):
 *   - every batch 1, 2, 3, 4, 8, 9, 12, 16, 17, 25, 31, 32, 33, 64 (each kernel's first and last batch,
 *     column groups whose last is partly or barely filled) through qg_call_guarded (full write, no
 *     overrun, two runs equal), float32 and fp16 outputs within the bound of the row's numerics, with y*
 *     and the path's terms computed in float64 here (kq_gemm_bound.h);
 *   - batch invariance: the first B columns of a batch B equal those of the batch of 64, and every column
 *     computed alone equals the same column inside the batch of 64;
 *   - a fixed shape of 3 super-blocks a row (Q6_K rows alternating between 4-byte-aligned and not), and on
 *     the GPU a large one of 15 (Q6_K and Q8_K rows at several offsets mod 16);
 *   - rejected arguments (batch 0 and 65, cols not a multiple of 256, short buffer) with their errors.
 */
#include "compare.h"
#include "guard.h"
#include "kq_gemm_bound.h"
#include "qg_test.h"

#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/kquants_gemm.h"
#include "qgold/rng.h"

#include <math.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static qg_rng g_rng;
static const char *g_be = "ref";

typedef struct {
    const qg_kernel *k;
    qg_ktype t;
    const uint8_t *w;
    size_t nbytes, rows, cols, batch;
    const uint16_t *x;
    int f16;
} call_ctx;

static int call_gemm(void *vc, void *out)
{
    const call_ctx *c = vc;
    return c->k->fn.kq_gemm(c->t, c->w, c->nbytes, c->rows, c->cols, c->x, c->batch, c->f16 ? NULL : out, c->f16 ? out : NULL);
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put_f32(uint8_t *p, float f)
{
    const uint32_t b = qg_f32_bits(f);
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(b >> (8 * i));
}

/* Random codes and scale bytes with ordinary d/dmin; with `special`, one block in 16 gets a non-finite
 * (or, for Q8_K, huge) d or dmin. */
static void make_weights(qg_ktype t, size_t rows, size_t cols, int special, uint8_t *w)
{
    static const uint16_t sp16[] = {0x7C00, 0xFC00, 0x7E00, 0x0000, 0x8000, 0x0001, 0x7BFF};
    static const uint32_t sp32[] = {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F7FFFFFu, 0x00000001u, 0x80000000u};
    const size_t bsz = qg_kq_block_bytes(t), nb = rows * (cols / QG_QK_K);
    for (size_t i = 0; i < nb * bsz; i++) w[i] = (uint8_t)(qg_rng_bits32(&g_rng) >> 24);
    for (size_t i = 0; i < nb; i++) {
        uint8_t *blk = w + i * bsz;
        const int sp = special && qg_rng_int_range(&g_rng, 16) == 0;
        if (t == QG_Q8_K) {
            put_f32(blk, sp ? qg_f32_from_bits(sp32[qg_rng_int_range(&g_rng, COUNT(sp32))]) : qg_rng_uniform(&g_rng, -0.01f, 0.01f));
            continue;
        }
        put16(blk + (t == QG_Q6_K ? 208 : 0), qg_f32_to_f16(qg_rng_uniform(&g_rng, 0.0001f, 0.002f)));
        if (t == QG_Q4_K || t == QG_Q5_K) put16(blk + 2, qg_f32_to_f16(qg_rng_uniform(&g_rng, 0.0001f, 0.002f)));
        if (sp) put16(blk + (t == QG_Q6_K ? 208 : 2 * qg_rng_int_range(&g_rng, 2)), sp16[qg_rng_int_range(&g_rng, COUNT(sp16))]);
    }
}

static void make_x(uint16_t *x, size_t n, int special)
{
    static const uint16_t sp[] = {0x7C00, 0xFC00, 0x7E00, 0x0001, 0x8000, 0x7BFF};
    for (size_t i = 0; i < n; i++) {
        x[i] = qg_f32_to_f16(qg_rng_uniform(&g_rng, -1.0f, 1.0f));
        if (special && qg_rng_int_range(&g_rng, 700) == 0) x[i] = sp[qg_rng_int_range(&g_rng, COUNT(sp))];
    }
}

static const size_t k_batches[] = {1, 2, 3, 4, 8, 9, 12, 16, 17, 25, 31, 32, 33, 64};

/* One shape: every batch, the bound, batch invariance. */
static void check_shape(const qg_kernel *k, qg_ktype t, size_t rows, size_t cols, int special, int alone)
{
    const size_t B = QG_KQ_GEMM_MAX_BATCH, nbytes = rows * (cols / QG_QK_K) * qg_kq_block_bytes(t), n = rows * B;
    uint8_t *w = malloc(nbytes);
    uint16_t *x = malloc(B * cols * 2), *y16 = malloc(n * 2);
    float *y64 = malloc(n * 4), *y = malloc(n * 4), *yf = malloc(n * 4), *y1 = malloc(rows * 4);
    double *ys = malloc(n * 8), *sa = malloc(n * 8), *se = malloc(n * 8);
    qg_err e;
    QG_CHECK(w && x && y16 && y64 && y && yf && y1 && ys && sa && se, "allocation");
    if (!(w && x && y16 && y64 && y && yf && y1 && ys && sa && se)) goto done;
    make_weights(t, rows, cols, special, w);
    make_x(x, B * cols, special);
    if (qg_kq_gemm_bound_terms(t, w, rows, cols, x, B, ys, sa, se) != QG_ERR_ok) {
        QG_CHECK(0, "bound terms");
        goto done;
    }
    call_ctx c = {k, t, w, nbytes, rows, cols, B, x, 0};
    int rc = qg_call_guarded(call_gemm, &c, y64, n, 4, &e);
    QG_CHECK(rc == QG_ERR_ok, "%s %s %zux%zu batch 64: %s", qg_kq_name(t), g_be, rows, cols, e.msg);
    if (rc != QG_ERR_ok) goto done;
    for (size_t bi = 0; bi < COUNT(k_batches); bi++) {
        const size_t nb = k_batches[bi], ny = rows * nb;
        c.batch = nb;
        qg_bound_report br;
        for (int v = 0; v < 2; v++) {
            c.f16 = v;
            rc = qg_call_guarded(call_gemm, &c, v ? (void *)y16 : (void *)y, ny, v ? 2 : 4, &e);
            QG_CHECK(rc == QG_ERR_ok, "%s %s %zux%zu batch %zu %s: %s", qg_kq_name(t), g_be, rows, cols, nb, v ? "fp16" : "f32", e.msg);
            if (rc != QG_ERR_ok) continue;
            if (v)
                for (size_t i = 0; i < ny; i++) yf[i] = qg_f16_to_f32(y16[i]);
            rc = qg_compare_bounded(v ? &k->numerics_f16 : &k->numerics, (long)cols, ys, sa, se, v ? yf : y, ny, &br);
            QG_CHECK(rc == QG_ERR_ok, "%s %s %zux%zu batch %zu %s output: %s", qg_kq_name(t), g_be, rows, cols, nb, v ? "fp16" : "f32",
                     br.text);
            QG_CHECK(special || br.rounded > 0, "%s %s %zux%zu batch %zu: no output rounded (rounding not exercised)", qg_kq_name(t),
                     g_be, rows, cols, nb);
            if (!v && !special) printf("%s %s %zux%zu batch %2zu: worst ratio %.3g\n", qg_kq_name(t), g_be, rows, cols, nb, br.worst_ratio);
            if (!v) /* the columns of batch nb are the first nb columns of the batch of 64, bit for bit */
                QG_CHECK(memcmp(y, y64, ny * 4) == 0, "%s %s %zux%zu: batch %zu differs from the same columns in the batch of 64",
                         qg_kq_name(t), g_be, rows, cols, nb);
        }
    }
    /* each column alone equals the same column inside the batch of 64 */
    for (size_t b = 0; alone && b < B; b++) {
        call_ctx one = {k, t, w, nbytes, rows, cols, 1, x + b * cols, 0};
        rc = qg_call_guarded(call_gemm, &one, y1, rows, 4, &e);
        QG_CHECK(rc == QG_ERR_ok && memcmp(y1, y64 + b * rows, rows * 4) == 0,
                 "%s %s %zux%zu: column %zu alone differs from column %zu of the batch of 64 (%s)", qg_kq_name(t), g_be, rows, cols, b, b,
                 rc ? e.msg : "bits differ");
    }
done:
    free(w);
    free(x);
    free(y16);
    free(y64);
    free(y);
    free(yf);
    free(y1);
    free(ys);
    free(sa);
    free(se);
}

static void check_errors(const qg_kernel *k, qg_ktype t)
{
    const size_t bb = qg_kq_block_bytes(t);
    uint8_t *w = calloc(2 * bb, 1);
    uint16_t *x = calloc(65 * 512, 2);
    float *y = calloc(65 * 2, 4);
    QG_CHECK(w && x && y, "allocation");
    if (w && x && y) {
        QG_CHECK(k->fn.kq_gemm(t, w, 2 * bb, 2, 256, x, 0, y, NULL) == QG_ERR_batch_invalid, "batch 0 accepted");
        QG_CHECK(k->fn.kq_gemm(t, w, 2 * bb, 2, 256, x, 65, y, NULL) == QG_ERR_batch_invalid, "batch 65 accepted");
        QG_CHECK(k->fn.kq_gemm(t, w, 2 * bb, 1, 300, x, 4, y, NULL) == QG_ERR_kq_cols_not_multiple, "cols 300 accepted");
        QG_CHECK(k->fn.kq_gemm(t, w, 2 * bb - 1, 2, 256, x, 4, y, NULL) == QG_ERR_kq_size_mismatch, "short buffer accepted");
        QG_CHECK(k->fn.kq_gemm(t, w, 2 * bb, 2, 256, x, 4, NULL, NULL) == QG_ERR_argument_invalid, "no output accepted");
        QG_CHECK(k->fn.kq_gemm((qg_ktype)7, w, 2 * bb, 2, 256, x, 4, y, NULL) == QG_ERR_kq_type_unknown, "type 7 accepted");
    }
    free(w);
    free(x);
    free(y);
}

int main(int argc, char **argv)
{
    /* an optional type runs that type only (for sanitizer runs; the pinned stream then draws other shapes) */
    if ((argc != 2 && argc != 3) || (strcmp(argv[1], "ref") != 0 && strcmp(argv[1], "cuda") != 0) ||
        (argc == 3 && qg_kq_from_name(argv[2]) < 0)) {
        fprintf(stderr, "usage: test_kq_gemm ref|cuda [q4_k|q5_k|q6_k|q8_k]\n");
        return 2;
    }
    g_be = argv[1];
    const char *only = argc == 3 ? argv[2] : NULL;
    const qg_backend be = strcmp(g_be, "cuda") == 0 ? QG_BACKEND_CUDA : QG_BACKEND_REF;
    static const char *const fmts[] = {"q4_k", "q5_k", "q6_k", "q8_k"};
    char why[256];
    for (size_t i = 0; i < COUNT(fmts); i++) {
        const qg_kernel *k = qg_registry_find(fmts[i], "gemm", be);
        if (k == NULL) {
            fprintf(stderr, "no %s gemm row for %s\n", fmts[i], g_be);
            return 1;
        }
        if (!qg_kernel_available(k, why, sizeof why)) return be == QG_BACKEND_CUDA ? qg_test_no_gpu(why) : 1;
    }
    qg_rng_init(&g_rng, 0x4B51C0DEu);
    for (size_t i = 0; i < COUNT(fmts); i++) {
        if (only != NULL && qg_kq_from_name(only) != qg_kq_from_name(fmts[i])) continue;
        const qg_kernel *k = qg_registry_find(fmts[i], "gemm", be);
        const qg_ktype t = (qg_ktype)qg_kq_from_name(fmts[i]);
        check_errors(k, t);
        for (int s = 0; s < 3; s++) { /* small random shapes, rows not a multiple of 16 */
            const size_t rows = 16 * (size_t)qg_rng_int_range(&g_rng, 6) + 1 + (size_t)qg_rng_int_range(&g_rng, 15);
            const size_t cols = 256 * (1 + (size_t)qg_rng_int_range(&g_rng, 6));
            check_shape(k, t, rows, cols, s == 2, s == 0);
        }
        /* a larger ordinary shape (on the GPU; the reference's column loop would take seconds) */
        const size_t big_rows = 1000 + (size_t)qg_rng_int_range(&g_rng, 15);
        if (be == QG_BACKEND_CUDA) check_shape(k, t, big_rows, 4096, 0, 0);
        /* and one of 15 super-blocks a row: Q6_K and Q8_K rows (3150 and 4380 bytes) then start at several
         * offsets mod 16, so the GPU kernels' copies of a CTA's rows take their unaligned grid (rows a round
         * a multiple of 8 or 4, each thread's rows at one offset mod 16) over many rounds */
        if (be == QG_BACKEND_CUDA) check_shape(k, t, big_rows, 3840, 0, 0);
        /* 3 super-blocks a row: a Q6_K row (630 bytes) starts 2 bytes past a 4-byte boundary every other
         * row, so the warps of the GPU kernels meet both block alignments inside one row tile */
        check_shape(k, t, 75, 768, 0, 1);
    }
    return qg_test_end(be == QG_BACKEND_CUDA ? "test_kq_gemm cuda" : "test_kq_gemm ref");
}
