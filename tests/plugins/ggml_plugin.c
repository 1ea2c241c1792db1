/* llama.cpp's ggml as a qgold plugin: ggml's own CPU kernels, reached through ggml's public API only.
 *
 * The plugin is compiled against the public headers ggml.h and ggml-cpu.h of an installed ggml (the
 * llama-cpp-python package's copy: ci/setup.sh --ggml) and opens libggml-base.so and libggml-cpu.so at
 * load time from $QGOLD_GGML_LIB_DIR (default: the directory given at build time). It exposes
 *   - dequantization of Q4_K, Q5_K, Q6_K (and Q8_K where ggml exports it): ggml_get_type_traits(type)->to_float
 *     (float32 output);
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

#define DEQ(i, nm, fmt)                                                                                            \
    {sizeof(qgold_plugin_kernel), QGOLD_PLUGIN_KQ_DEQUANT, QGOLD_PLUGIN_CPU, 0, nm, fmt, "dequant", {0, 0, 0, 0, 0, 0, 0}, \
     &k_types[i], dequant_ws, {.kq_dequant_f32 = dequant_f32}, {.kq_dequant_f16 = dequant_f16}}
#define DOT(i, nm, fmt)                                                                                            \
    {sizeof(qgold_plugin_kernel), QGOLD_PLUGIN_KQ_DOT, QGOLD_PLUGIN_CPU, QGOLD_PLUGIN_DOT_RESULT_ONLY, nm, fmt, "dot_q8k", \
     {0, 0, 0, 0, 0, 0, 0}, &k_types[i], NULL, {.kq_dot = dot}, {.any = NULL}}

/* Q8_K's dequantizer last: ggml exports it only in some versions (the table is cut before it when not). */
static const qgold_plugin_kernel kernels[] = {
    DEQ(0, "ggml_dequantize_q4_K", "q4_k"), DEQ(1, "ggml_dequantize_q5_K", "q5_k"), DEQ(2, "ggml_dequantize_q6_K", "q6_k"),
    DOT(0, "ggml_vec_dot_q4_K_q8_K", "q4_k"), DOT(1, "ggml_vec_dot_q5_K_q8_K", "q5_k"), DOT(2, "ggml_vec_dot_q6_K_q8_K", "q6_k"),
    DEQ(3, "ggml_dequantize_q8_K", "q8_k"),
};

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
    for (int i = 0; i < 3; i++)
        if (g.traits_cpu(k_types[i])->vec_dot == NULL || g.traits_cpu(k_types[i])->vec_dot_type != GGML_TYPE_Q8_K) {
            fprintf(stderr, "ggml plugin: ggml's %s dot is not against Q8_K\n", g.traits(k_types[i])->type_name);
            return 4;
        }
    for (int i = 0; i < 3; i++)
        if (g.traits(k_types[i])->to_float == NULL || g.traits(k_types[i])->blck_size != 256) {
            fprintf(stderr, "ggml plugin: ggml's %s has no dequantizer or another block size\n", g.traits(k_types[i])->type_name);
            return 5;
        }
    static char version[96];
    const char *(*ver)(void);
    void *p5 = dlsym(base, "ggml_version");
    memcpy(&ver, &p5, sizeof p5);
    snprintf(version, sizeof version, "%s", p5 ? ver() : "(version unknown)");
    const int q8k = g.traits(GGML_TYPE_Q8_K)->to_float != NULL && g.traits(GGML_TYPE_Q8_K)->blck_size == 256;
    if (!q8k) fprintf(stderr, "ggml plugin: this ggml exports no Q8_K dequantizer (type traits to_float is NULL); Q8_K dequant not offered\n");
    *out = (qgold_plugin_info){sizeof *out, QGOLD_PLUGIN_ABI_VERSION, "ggml", version, sizeof kernels / sizeof kernels[0] - (q8k ? 0 : 1), kernels};
    return 0;
}
