/* kqdot_vs_ggml: qgold's AVX2 K-quant x Q8_K dot (qg_kq_dot_q8k_avx2) and ggml's own vec_dot side by
 * side, in one process, on one core, with the data in cache. Not a test: a measurement tool.
 *
 *   kqdot_vs_ggml [REPS] [GGML_LIB_DIR]
 *
 * ggml is reached through its public API only, as tests/plugins/ggml_plugin.c does: libggml-base.so and
 * libggml-cpu.so are opened at run time ($QGOLD_GGML_LIB_DIR, the argument, or the directory given at
 * build time) and the dot is ggml_get_type_traits_cpu(type)->vec_dot, the kernel ggml's matrix products
 * run. The data is the one-core set of `qgold bench` (64 rows x 4096, random codes and scales with fixed
 * d = dmin-scale; a Q8_K row quantized by the reference from uniform(-1, 1)): about 150 KB of Q4_K,
 * which stays in L2.
 *
 * Each repetition times one pass over the 64 rows with qgold's dot, one with ggml's and one with qgold's
 * GEMV with Q8_K activations (qg_kq_gemv_q8k_avx2, one thread, batch 1: the 4096 fp16 activations
 * quantized once, then the 64 row dots; Q6_K there takes its correction from the bsums), the order
 * rotating every repetition, so all see the same machine load; the report gives, per kernel, the
 * median, the minimum and the 10th/90th percentiles in ns per 32 weights, and the ratios to ggml of the
 * medians and of the minima (below 1: qgold faster). The dot results are also compared (ggml's float
 * order differs: the relative gap is printed, not judged). */
#include <ggml-cpu.h>
#include <ggml.h>

#include "qgold/cpu_features.h"
#include "qgold/fp16.h"
#include "qgold/kernels_kq_q8k.h"
#include "qgold/threads.h"
#include "qgold/kernels_kquants.h"
#include "qgold/kquants.h"
#include "qgold/kquants_layout.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef QGP_GGML_LIB_DIR
#define QGP_GGML_LIB_DIR ""
#endif

enum { ROWS = 64, COLS = 4096, MAXREPS = 4001 };

typedef const struct ggml_type_traits_cpu *(*traits_cpu_fn)(enum ggml_type);

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* xorshift64*, seeded: the codes and scales are arbitrary, only their spread matters */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}

/* Random blocks with small finite d (and dmin): 2^-8 and 2^-9 as fp16. */
static void fill_blocks(qg_ktype t, uint8_t *w, size_t nbytes)
{
    const size_t bb = qg_kq_block_bytes(t);
    for (size_t i = 0; i < nbytes; i++) w[i] = (uint8_t)rnd();
    for (size_t b = 0; b < nbytes / bb; b++) {
        uint8_t *blk = w + b * bb;
        if (t == QG_Q6_K) blk[QG_Q6K_D] = 0x00, blk[QG_Q6K_D + 1] = 0x1C;
        else blk[QG_Q4K_D] = 0x00, blk[QG_Q4K_D + 1] = 0x1C, blk[QG_Q4K_DMIN] = 0x00, blk[QG_Q4K_DMIN + 1] = 0x18;
    }
}

typedef struct {
    double med, lo, p10, p90;
} stats;

static stats summarize(double *v, int n, double scale)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return (stats){v[n / 2] * scale, v[0] * scale, v[n / 10] * scale, v[(n * 9) / 10] * scale};
}

int main(int argc, char **argv)
{
    const int reps = argc > 1 ? atoi(argv[1]) : 801;
    if (reps < 11 || reps > MAXREPS) {
        fprintf(stderr, "kqdot_vs_ggml: REPS must be 11..%d\n", MAXREPS);
        return 2;
    }
    if (!(qg_cpu_features() & QG_CPU_AVX2)) { /* AVX2 with F16C and FMA, as dispatch decides */
        fprintf(stderr, "kqdot_vs_ggml: this CPU lacks AVX2/FMA/F16C\n");
        return 77;
    }
    const char *dir = argc > 2 ? argv[2] : getenv("QGOLD_GGML_LIB_DIR");
    if (dir == NULL || dir[0] == '\0') dir = QGP_GGML_LIB_DIR;
    char path[4096];
    snprintf(path, sizeof path, "%s%slibggml-base.so", dir, dir[0] ? "/" : "");
    void *base = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    snprintf(path, sizeof path, "%s%slibggml-cpu.so", dir, dir[0] ? "/" : "");
    void *cpu = base ? dlopen(path, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (cpu == NULL) {
        fprintf(stderr, "kqdot_vs_ggml: %s (ggml not installed: ci/setup.sh --ggml)\n", dlerror());
        return 77;
    }
    void *p_tc = dlsym(cpu, "ggml_get_type_traits_cpu"), *p_init = dlsym(cpu, "ggml_cpu_init");
    if (!p_tc || !p_init) {
        fprintf(stderr, "kqdot_vs_ggml: this ggml lacks ggml_get_type_traits_cpu or ggml_cpu_init\n");
        return 77;
    }
    traits_cpu_fn traits_cpu;
    void (*init)(void);
    memcpy(&traits_cpu, &p_tc, sizeof p_tc);
    memcpy(&init, &p_init, sizeof p_init);
    init();

    static const qg_ktype types[3] = {QG_Q4_K, QG_Q5_K, QG_Q6_K};
    static const enum ggml_type gtypes[3] = {GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
    static const char *names[3] = {"q4_k", "q5_k", "q6_k"};
    static double tq[MAXREPS], tg[MAXREPS], tv[MAXREPS];
    const double per32 = 1.0 / ((double)ROWS * COLS / 32.0);

    const size_t q8_bytes = COLS / QG_QK_K * QG_Q8K_BYTES;
    uint8_t *q8 = malloc(q8_bytes);
    float *x = malloc(COLS * sizeof *x);
    uint16_t *x16 = malloc(COLS * sizeof *x16);
    if (!q8 || !x || !x16) return 1;
    for (size_t i = 0; i < COLS; i++) x[i] = (float)rnd() / 4294967296.0f * 2.0f - 1.0f;
    for (size_t i = 0; i < COLS; i++) x16[i] = qg_f32_to_f16(x[i]);
    qg_set_threads(1);
    if (qg_kq_quantize_ref(QG_Q8_K, x, 1, COLS, q8, q8_bytes) != 0) return 1;

    printf("%-5s %-8s %8s %8s %8s %8s\n", "type", "kernel", "median", "min", "p10", "p90");
    for (int ti = 0; ti < 3; ti++) {
        const qg_ktype t = types[ti];
        const struct ggml_type_traits_cpu *tc = traits_cpu(gtypes[ti]);
        if (tc->vec_dot == NULL || tc->vec_dot_type != GGML_TYPE_Q8_K) {
            printf("%-5s ggml has no Q8_K vec_dot\n", names[ti]);
            continue;
        }
        const size_t rb = COLS / QG_QK_K * qg_kq_block_bytes(t);
        uint8_t *w = malloc(ROWS * rb);
        if (!w) return 1;
        fill_blocks(t, w, ROWS * rb);
        float yq[ROWS], yg[ROWS];
        double maxrel = 0.0;
        float yv[ROWS];
        for (int rep = -20; rep < reps; rep++) { /* 20 warm-up passes */
            for (int slot = 0; slot < 3; slot++) {
                const int which = (slot + rep + 60) % 3; /* 0 qgold dot, 1 ggml, 2 qgold gemv_q8k */
                const double t0 = now_ns();
                if (which == 1) {
                    for (int r = 0; r < ROWS; r++) tc->vec_dot(COLS, &yg[r], 0, w + r * rb, 0, q8, 0, 1);
                } else if (which == 0) {
                    for (int r = 0; r < ROWS; r++) qg_kq_dot_q8k_avx2(t, w + r * rb, q8, COLS, NULL, NULL, &yq[r]);
                } else {
                    qg_kq_gemv_q8k_avx2(t, w, ROWS * rb, ROWS, COLS, x16, 1, yv, NULL);
                }
                const double dt = now_ns() - t0;
                if (rep >= 0) (which == 1 ? tg : which == 0 ? tq : tv)[rep] = dt;
            }
        }
        for (int r = 0; r < ROWS; r++) {
            const double d = fabs((double)yq[r] - (double)yg[r]) / fmax(fabs((double)yg[r]), 1e-30);
            if (d > maxrel) maxrel = d;
        }
        const stats sq = summarize(tq, reps, per32), sg = summarize(tg, reps, per32), sv = summarize(tv, reps, per32);
        printf("%-5s %-8s %8.3f %8.3f %8.3f %8.3f\n", names[ti], "qgold", sq.med, sq.lo, sq.p10, sq.p90);
        printf("%-5s %-8s %8.3f %8.3f %8.3f %8.3f\n", names[ti], "ggml", sg.med, sg.lo, sg.p10, sg.p90);
        printf("%-5s %-8s %8.3f %8.3f %8.3f %8.3f\n", names[ti], "gemv_q8k", sv.med, sv.lo, sv.p10, sv.p90);
        printf("%-5s qgold/ggml: median %.3f, min %.3f; gemv_q8k/ggml: median %.3f, min %.3f; max relative gap of results %.2e\n",
               names[ti], sq.med / sg.med, sq.lo / sg.lo, sv.med / sg.med, sv.lo / sg.lo, maxrel);
        free(w);
    }
    printf("ns per 32 weights, one core, %d x %d in cache, %d interleaved repetitions\n", ROWS, COLS, reps);
    free(q8);
    free(x);
    free(x16);
    return 0;
}
