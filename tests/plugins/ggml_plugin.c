/* llama.cpp's ggml as a qgold plugin: ggml's own CPU kernels, reached through ggml's public API only.
 *
 * The plugin is compiled against the public headers ggml.h and ggml-cpu.h of an installed ggml (the
 * llama-cpp-python package's copy: ci/setup.sh --ggml) and opens libggml-base.so and libggml-cpu.so at
 * load time from $QGOLD_GGML_LIB_DIR (default: the directory given at build time). It exposes
 *   - dequantization of Q4_K, Q5_K, Q6_K (and Q8_K where ggml exports it): ggml_get_type_traits(type)->to_float
 *     (float32 output);
 *   - ggml's reference quantizers (quantize_row_*_ref): ggml_get_type_traits(type)->from_float_ref;
 *     the fp16 output is that float32 rounded by ggml_fp32_to_fp16;
 *   - the dot of a Q4_K/Q5_K/Q6_K row with a Q8_K row: ggml_get_type_traits_cpu(type)->vec_dot, the
 *     kernel ggml's matrix products run (AVX2 on x86-64 when the library was built with it). ggml's dot
 *     does not expose its per-block integer sums, so these kernels are QGOLD_PLUGIN_DOT_RESULT_ONLY.
 * Numerics declared as ggml has them: dequantization is bit-exact by the format; the dot accumulates in
 * float32 (qgold's default declaration, u_acc = 2^-24, d = K).
 * ggml validates nothing (its callers do); the shape checks below are the plugin's, so the invalid-input
 * corpus is rejected before ggml is called. */
#include <qgold/plugin.h>

#include <ggml-cpu.h>
#include <ggml.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef QGP_GGML_LIB_DIR
#define QGP_GGML_LIB_DIR ""
#endif

typedef const struct ggml_type_traits *(*traits_fn)(enum ggml_type);
typedef const struct ggml_type_traits_cpu *(*traits_cpu_fn)(enum ggml_type);
typedef ggml_fp16_t (*to_fp16_fn)(float);
typedef void (*init_fn)(void);

static struct {
    traits_fn traits;
    traits_cpu_fn traits_cpu;
    to_fp16_fn to_fp16;
} g;

/* user pointers: the ggml type of each kernel */
static enum ggml_type k_types[4] = {GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_Q8_K};

static int shape_ok(enum ggml_type t, size_t nbytes, size_t rows, size_t cols)
{
    const struct ggml_type_traits *tr = g.traits(t);
    if (rows == 0 || cols == 0 || cols % (size_t)tr->blck_size != 0 || cols > (1u << 30) || rows > (1u << 30)) return 0;
    return nbytes == rows * (cols / (size_t)tr->blck_size) * tr->type_size;
}

static int dequant_f32(void *user, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, float *y, void *ws, void *stream)
{
    (void)ws, (void)stream;
    const enum ggml_type t = *(const enum ggml_type *)user;
    if (!shape_ok(t, nbytes, rows, cols)) return 1;
    g.traits(t)->to_float(blocks, y, (int64_t)(rows * cols));
    return 0;
}

static int dequant_f16(void *user, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, uint16_t *y, void *ws, void *stream)
{
    (void)stream;
    const enum ggml_type t = *(const enum ggml_type *)user;
    if (!shape_ok(t, nbytes, rows, cols)) return 1;
    float *tmp = ws; /* workspace: one row of float32 */
    const size_t rb = nbytes / rows;
    for (size_t r = 0; r < rows; r++) {
        g.traits(t)->to_float(blocks + r * rb, tmp, (int64_t)cols);
        for (size_t c = 0; c < cols; c++) y[r * cols + c] = g.to_fp16(tmp[c]);
    }
    return 0;
}

static size_t dequant_ws(void *user, size_t rows, size_t cols, size_t batch)
{
    (void)user, (void)rows, (void)batch;
    return cols * sizeof(float);
}

static int dot(void *user, const uint8_t *w, const uint8_t *q8, size_t cols, int32_t *S, int32_t *M, float *result, void *ws, void *stream)
{
    (void)S, (void)M, (void)ws, (void)stream;
    const enum ggml_type t = *(const enum ggml_type *)user;
    if (cols == 0 || cols % 256 != 0 || cols > (1u << 30) || w == NULL || q8 == NULL || result == NULL) return 1;
    float s = 0.0f;
    g.traits_cpu(t)->vec_dot((int)cols, &s, 0, w, 0, q8, 0, 1);
    *result = s;
    return 0;
}

/* ggml's reference quantizer (quantize_row_*_ref, reached as from_float_ref): rows are contiguous, so the
 * whole matrix is one call. */
static int quantize(void *user, const float *x, size_t rows, size_t cols, uint8_t *blocks, size_t nbytes, void *ws, void *stream)
{
    (void)ws, (void)stream;
    const enum ggml_type t = *(const enum ggml_type *)user;
    if (x == NULL || blocks == NULL || !shape_ok(t, nbytes, rows, cols)) return 1;
    g.traits(t)->from_float_ref(x, blocks, (int64_t)(rows * cols));
    return 0;
}

static const char *const k_fmt[4] = {"q4_k", "q5_k", "q6_k", "q8_k"};
static const char *const k_ggml[4] = {"q4_K", "q5_K", "q6_K", "q8_K"};
static char k_names[3][4][40];
static qgold_plugin_kernel kernels[12];

/* The kernel table from what this ggml exports: dequantizers, reference quantizers, dots against Q8_K. */
static uint32_t make_table(void)
{
    uint32_t n = 0;
    for (int i = 0; i < 4; i++) {
        const struct ggml_type_traits *tr = g.traits(k_types[i]);
        qgold_plugin_kernel base = {sizeof(qgold_plugin_kernel), 0, QGOLD_PLUGIN_CPU, 0, NULL, k_fmt[i], NULL, {0, 0, 0, 0, 0, 0, 0},
                                    &k_types[i], NULL, {.any = NULL}, {.any = NULL}};
        if (tr->blck_size != 256) continue;
        if (tr->to_float != NULL) {
            kernels[n] = base;
            snprintf(k_names[0][i], sizeof k_names[0][i], "ggml_dequantize_row_%s", k_ggml[i]);
            kernels[n].kind = QGOLD_PLUGIN_KQ_DEQUANT, kernels[n].name = k_names[0][i], kernels[n].path = "dequant";
            kernels[n].workspace_bytes = dequant_ws, kernels[n].fn.kq_dequant_f32 = dequant_f32, kernels[n].fn2.kq_dequant_f16 = dequant_f16;
            n++;
        } else {
            fprintf(stderr, "ggml plugin: this ggml exports no %s dequantizer (type traits to_float is NULL)\n", k_ggml[i]);
        }
        if (tr->from_float_ref != NULL) {
            kernels[n] = base;
            snprintf(k_names[1][i], sizeof k_names[1][i], "ggml_quantize_row_%s_ref", k_ggml[i]);
            kernels[n].kind = QGOLD_PLUGIN_KQ_QUANTIZE, kernels[n].name = k_names[1][i], kernels[n].path = "quantize";
            kernels[n].fn.kq_quantize = quantize;
            n++;
        }
        const struct ggml_type_traits_cpu *tc = g.traits_cpu(k_types[i]);
        if (i < 3 && tc->vec_dot != NULL && tc->vec_dot_type == GGML_TYPE_Q8_K) {
            kernels[n] = base;
            snprintf(k_names[2][i], sizeof k_names[2][i], "ggml_vec_dot_%s_q8_K", k_ggml[i]);
            kernels[n].kind = QGOLD_PLUGIN_KQ_DOT, kernels[n].name = k_names[2][i], kernels[n].path = "dot_q8k";
            kernels[n].flags = QGOLD_PLUGIN_DOT_RESULT_ONLY, kernels[n].fn.kq_dot = dot;
            n++;
        }
    }
    return n;
}

static void *open_lib(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s%s%s", dir, dir[0] ? "/" : "", name);
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL) fprintf(stderr, "ggml plugin: %s\n", dlerror());
    return h;
}

QGOLD_PLUGIN_EXPORT int qgold_plugin_entry(uint32_t host_abi, qgold_plugin_info *out)
{
    if (host_abi < QGOLD_PLUGIN_ABI_VERSION) return 1;
    const char *dir = getenv("QGOLD_GGML_LIB_DIR");
    if (dir == NULL || dir[0] == '\0') dir = QGP_GGML_LIB_DIR;
    /* libggml-base first: libggml-cpu needs its symbols. */
    void *base = open_lib(dir, "libggml-base.so"), *cpu = base ? open_lib(dir, "libggml-cpu.so") : NULL;
    if (cpu == NULL) {
        fprintf(stderr, "ggml plugin: set QGOLD_GGML_LIB_DIR to the directory of libggml-base.so and libggml-cpu.so (ci/setup.sh --ggml)\n");
        return 2;
    }
    void *p1 = dlsym(base, "ggml_get_type_traits"), *p2 = dlsym(cpu, "ggml_get_type_traits_cpu"), *p3 = dlsym(base, "ggml_fp32_to_fp16"),
         *p4 = dlsym(cpu, "ggml_cpu_init");
    if (!p1 || !p2 || !p3 || !p4) {
        fprintf(stderr, "ggml plugin: this ggml lacks ggml_get_type_traits, ggml_get_type_traits_cpu, ggml_fp32_to_fp16 or ggml_cpu_init\n");
        return 3;
    }
    init_fn init;
    memcpy(&g.traits, &p1, sizeof p1);
    memcpy(&g.traits_cpu, &p2, sizeof p2);
    memcpy(&g.to_fp16, &p3, sizeof p3);
    memcpy(&init, &p4, sizeof p4);
    init(); /* ggml's CPU tables (fp16 conversion) */
    static char version[96];
    const char *(*ver)(void);
    void *p5 = dlsym(base, "ggml_version");
    memcpy(&ver, &p5, sizeof p5);
    snprintf(version, sizeof version, "%s", p5 ? ver() : "(version unknown)");
    *out = (qgold_plugin_info){sizeof *out, QGOLD_PLUGIN_ABI_VERSION, "ggml", version, make_table(), kernels};
    return 0;
}
