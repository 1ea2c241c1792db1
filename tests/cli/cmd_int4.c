/* qgold int4: users' own W4A16 tensors through the INT4 reference and kernels (spec:
 * reference/spec/intq.md), raw little-endian files in and out, every size checked before anything runs,
 * every error named, every output written atomically (a temporary name renamed on success).
 *
 *   import    GPTQ (v1 / v2 zeros, optional g_idx) or AWQ checkpoint tensors -> the canonical layout
 *   dequant   canonical layout -> the exact float32 weights (or fp16, RN16 of them), any backend
 *   gemv      canonical layout x fp16 activations -> float32 / fp16 outputs, any backend
 */
#include "cli.h"
#include "cmds.h"
#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/int4.h"
#include "qgold/registry.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *k_usage_int4 =
    "usage: qgold int4 import --from gptq|awq --n N --k K --g G --qweight QW.i32 --qzeros QZ.i32 --scales S.f16\n"
    "                  [--version 1|2] [--g-idx GI.i32] --out PREFIX\n"
    "       qgold int4 dequant --n N --k K --g G --qweight QW.u32 --scales S.f16 [--zeros Z.u8] [--g-idx GI.i32]\n"
    "                  --out W [--out-type f32|f16] [--backend B]\n"
    "       qgold int4 gemv --n N --k K --g G --qweight QW.u32 --scales S.f16 [--zeros Z.u8] [--g-idx GI.i32]\n"
    "                  --x X.f16 --batch B --out Y [--out-type f32|f16] [--backend B]\n"
    "\n"
    "W4A16 group-wise int4 weights (reference/spec/intq.md). Every file is raw little-endian, row-major,\n"
    "without a header. N output channels, K inputs (a multiple of 8), group size G in {32, 64, 128, K}\n"
    "dividing K; the canonical layout is\n"
    "  qweight  N x K/8 uint32, nibble j (bits 4j..4j+3) of word w of row n = code q[n][8w + j], 0..15\n"
    "  scales   N x K/G fp16;  zeros N x K/G uint8 0..15 (absent: 8);  g_idx K int32 (absent: k / G)\n"
    "and the weight is w[n][k] = (q - z) * s of the group of column k, exact in float32.\n"
    "  import   GPTQ: QW K/8 x N int32 packed along K, QZ K/G x N/8 int32 packed along N, S K/G x N fp16,\n"
    "           optional GI; --version 1 (default; stored zero + 1 is the zero) or 2 (the zero itself).\n"
    "           AWQ: QW K x N/8 int32 packed along N with each 8 columns interleaved [0,2,4,6,1,3,5,7], QZ\n"
    "           the same way, S K/G x N. N a multiple of 8. Writes PREFIX.qweight, PREFIX.scales,\n"
    "           PREFIX.zeros and (GPTQ with --g-idx) PREFIX.g_idx, bit-exact.\n"
    "  dequant  W: N x K float32 (default) or fp16 (RN16 of the float32 weight).\n"
    "  gemv     X: B x K fp16 activations; Y: B x N float32 (default) or fp16, float32 accumulation.\n"
    "  --backend B  ref (default), avx2, neon or cuda: the kernel of that registry row; dequant is\n"
    "           bit-identical on every backend, gemv within the row's declared bound.\n"
    "A file of the wrong size is named with the size it must have; invalid data prints the error name and\n"
    "message (int4_zero_out_of_range, int4_g_idx_invalid, int_scale_invalid, ...). Outputs are written\n"
    "only on success.\n" QG_INT_OPTIONS QG_EXIT_STATUS;

typedef struct {
    uint64_t n, k, g, batch, version;
    const char *from, *qweight, *qzeros, *scales, *zeros, *g_idx, *x, *out, *out_type, *backend;
} int4_args;

static const char *const k_import_opts = " --from --n --k --g --qweight --qzeros --scales --version --g-idx --out ";
static const char *const k_dequant_opts = " --n --k --g --qweight --scales --zeros --g-idx --out --out-type --backend ";
static const char *const k_gemv_opts = " --n --k --g --qweight --scales --zeros --g-idx --x --batch --out --out-type --backend ";

static int opt_allowed(const char *o, const char *list)
{
    char key[40];
    if (strlen(o) > 30) return 0;
    snprintf(key, sizeof key, " %s ", o);
    return strstr(list, key) != NULL;
}

static int parse_args(const char *sub, const char *allowed, int argc, char **argv, int4_args *a)
{
    memset(a, 0, sizeof *a);
    a->n = a->k = a->g = a->batch = UINT64_MAX;
    a->version = 1;
    static const struct {
        const char *opt;
        size_t off;
    } strs[] = {
#define S(o, f) {o, offsetof(int4_args, f)}
        S("--from", from), S("--qweight", qweight), S("--qzeros", qzeros), S("--scales", scales), S("--zeros", zeros),
        S("--g-idx", g_idx), S("--x", x), S("--out", out), S("--out-type", out_type), S("--backend", backend),
#undef S
    };
    static const struct {
        const char *opt;
        size_t off;
        uint64_t lo, hi;
    } nums[] = {{"--n", offsetof(int4_args, n), 1, 1u << 30},    {"--k", offsetof(int4_args, k), 8, INT32_MAX},
                {"--g", offsetof(int4_args, g), 1, INT32_MAX},   {"--batch", offsetof(int4_args, batch), 1, 1u << 20},
                {"--version", offsetof(int4_args, version), 1, 2}};
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        if (!opt_allowed(o, allowed)) {
            if (opt_allowed(o, k_gemv_opts) || opt_allowed(o, k_import_opts))
                return qgc_usage_error(k_usage_int4, "%s does not apply to int4 %s", o, sub);
            return qgc_usage_error(k_usage_int4, "unknown option '%s'", o);
        }
        if (i + 1 >= argc) return qgc_usage_error(k_usage_int4, "%s needs a value", o);
        const char *v = argv[++i];
        int done = 0;
        for (size_t j = 0; j < sizeof strs / sizeof strs[0] && !done; j++)
            if (strcmp(o, strs[j].opt) == 0) *(const char **)(void *)((char *)a + strs[j].off) = v, done = 1;
        for (size_t j = 0; j < sizeof nums / sizeof nums[0] && !done; j++) {
            if (strcmp(o, nums[j].opt) != 0) continue;
            if (qgc_parse_uint(v, nums[j].lo, nums[j].hi, (uint64_t *)(void *)((char *)a + nums[j].off)) != 0)
                return qgc_bad_number(k_usage_int4, o, v, nums[j].lo, nums[j].hi);
            done = 1;
        }
    }
    return 0;
}

static int need(const char *v, const char *opt) { return v ? 0 : qgc_usage_error(k_usage_int4, "%s is required", opt); }

/* Shape rules of the layout, checked before any file is read: exit 2 with the error name. */
static int check_shape(const int4_args *a, int import)
{
    if (a->n == UINT64_MAX) return qgc_usage_error(k_usage_int4, "--n is required");
    if (a->k == UINT64_MAX) return qgc_usage_error(k_usage_int4, "--k is required");
    if (a->g == UINT64_MAX) return qgc_usage_error(k_usage_int4, "--g is required");
    if (a->k % 8 != 0) return qgc_usage_error(k_usage_int4, "shape_invalid: --k %llu is not a multiple of 8", (unsigned long long)a->k);
    if (!(a->g == 32 || a->g == 64 || a->g == 128 || a->g == a->k) || a->k % a->g != 0)
        return qgc_usage_error(k_usage_int4, "int_group_invalid: --g %llu is not 32, 64, 128 or K, or does not divide K = %llu",
                               (unsigned long long)a->g, (unsigned long long)a->k);
    if (import && a->n % 8 != 0)
        return qgc_usage_error(k_usage_int4, "shape_invalid: --n %llu is not a multiple of 8 (the zeros are packed 8 to a word)",
                               (unsigned long long)a->n);
    size_t nk;
    if (qgc_mul_size((size_t)a->n, (size_t)a->k, &nk) != 0 || nk > ((size_t)1 << 34))
        return qgc_usage_error(k_usage_int4, "shape_invalid: N x K = %llu x %llu is too large", (unsigned long long)a->n,
                               (unsigned long long)a->k);
    return 0;
}

static int kernel_error(const char *what, int rc)
{
    fprintf(stderr, "qgold: int4 %s: %s: %s\n", what, qg_error_name(rc), qg_error_message(rc));
    return 1;
}

/* Writes n bytes to PREFIX + suffix atomically. */
static int write_prefixed(const char *prefix, const char *suffix, const void *buf, size_t n)
{
    const size_t len = strlen(prefix) + strlen(suffix) + 1;
    char *p = malloc(len);
    if (!p) {
        fprintf(stderr, "qgold: out of memory\n");
        return 1;
    }
    snprintf(p, len, "%s%s", prefix, suffix);
    const int rc = qgc_write_output(p, buf, n);
    free(p);
    return rc;
}

static int cmd_import(int argc, char **argv)
{
    int4_args a;
    int rc = parse_args("import", k_import_opts, argc, argv, &a);
    if (rc || (rc = need(a.from, "--from")) || (rc = need(a.qweight, "--qweight")) || (rc = need(a.qzeros, "--qzeros")) ||
        (rc = need(a.scales, "--scales")) || (rc = need(a.out, "--out")))
        return rc;
    const int gptq = strcmp(a.from, "gptq") == 0;
    if (!gptq && strcmp(a.from, "awq") != 0) return qgc_usage_error(k_usage_int4, "--from must be gptq or awq, not '%s'", a.from);
    if (!gptq && a.g_idx) return qgc_usage_error(k_usage_int4, "--g-idx applies to --from gptq only");
    if ((rc = check_shape(&a, 1))) return rc;
    const size_t N = a.n, K = a.k, G = K / a.g, nq = N * (K / 8), ng = N * G;
    int32_t *qw = qgc_read_input(a.qweight, 4 * nq, "--qweight", NULL), *qz = NULL, *gi = NULL;
    uint16_t *sc = NULL;
    uint32_t *oq = NULL;
    uint16_t *os = NULL;
    uint8_t *oz = NULL;
    int32_t *og = NULL;
    rc = 1;
    if (!qw || !(qz = qgc_read_input(a.qzeros, 4 * G * (N / 8), "--qzeros", NULL)) ||
        !(sc = qgc_read_input(a.scales, 2 * ng, "--scales", NULL)) || (a.g_idx && !(gi = qgc_read_input(a.g_idx, 4 * K, "--g-idx", NULL))))
        goto done;
    oq = malloc(4 * nq), os = malloc(2 * ng), oz = malloc(ng), og = malloc(4 * K);
    if (!oq || !os || !oz || !og) {
        fprintf(stderr, "qgold: int4 import: out of memory (%zu bytes)\n", 4 * nq + 3 * ng + 4 * K);
        goto done;
    }
    qg_w4a16_out out = {oq, os, oz, gi ? og : NULL};
    int krc;
    if (gptq) {
        qg_gptq_src s = {N, K, (size_t)a.g, (int)a.version, qw, nq, qz, G * (N / 8), sc, ng, gi, gi ? K : 0};
        krc = qg_int4_import_gptq_ref(&s, &out);
    } else {
        qg_awq_src s = {N, K, (size_t)a.g, qw, nq, qz, G * (N / 8), sc, ng};
        krc = qg_int4_import_awq_ref(&s, &out);
    }
    if (krc) {
        rc = kernel_error("import", krc);
        goto done;
    }
    rc = write_prefixed(a.out, ".qweight", oq, 4 * nq) || write_prefixed(a.out, ".scales", os, 2 * ng) ||
         write_prefixed(a.out, ".zeros", oz, ng) || (gi && write_prefixed(a.out, ".g_idx", og, 4 * K));
done:
    free(qw), free(qz), free(sc), free(gi), free(oq), free(os), free(oz), free(og);
    return rc;
}

/* The canonical layout from its files, the kernel row of (path, backend). */
typedef struct {
    qg_w4a16 L;
    void *qw, *sc, *z, *gi;
    const qg_kernel *k;
} loaded;

static void loaded_free(loaded *l) { free(l->qw), free(l->sc), free(l->z), free(l->gi); }

static int load(const char *sub, const char *path, const int4_args *a, loaded *l)
{
    memset(l, 0, sizeof *l);
    int rc;
    if ((rc = need(a->qweight, "--qweight")) || (rc = need(a->scales, "--scales")) || (rc = need(a->out, "--out"))) return rc;
    if ((rc = check_shape(a, 0))) return rc;
    if (a->out_type && strcmp(a->out_type, "f32") != 0 && strcmp(a->out_type, "f16") != 0)
        return qgc_usage_error(k_usage_int4, "--out-type must be f32 or f16, not '%s'", a->out_type);
    const char *be = a->backend ? a->backend : "ref";
    const int b = qg_backend_from_name(be);
    if (b < 0) return qgc_usage_error(k_usage_int4, "unknown backend '%s' (ref, avx2, neon, cuda)", be);
    l->k = qg_registry_find("int4", path, (qg_backend)b);
    char why[200];
    if (!l->k || !qg_kernel_built(l->k)) return qgc_usage_error(k_usage_int4, "int4 %s has no %s kernel in this build", sub, be);
    if (!qg_kernel_available(l->k, why, sizeof why)) {
        fprintf(stderr, "qgold: int4 %s: backend %s cannot run here: %s\n", sub, be, why);
        return 1;
    }
    const char *ins[] = {a->qweight, a->scales, a->zeros, a->g_idx, a->x};
    for (size_t i = 0; i < sizeof ins / sizeof ins[0]; i++)
        if (ins[i] && qgc_same_file(ins[i], a->out)) return qgc_refuse_same_file(k_usage_int4, "an input", ins[i], a->out);
    const size_t N = a->n, K = a->k, G = K / a->g, nq = N * (K / 8), ng = N * G;
    if (!(l->qw = qgc_read_input(a->qweight, 4 * nq, "--qweight", NULL)) || !(l->sc = qgc_read_input(a->scales, 2 * ng, "--scales", NULL)) ||
        (a->zeros && !(l->z = qgc_read_input(a->zeros, ng, "--zeros", NULL))) ||
        (a->g_idx && !(l->gi = qgc_read_input(a->g_idx, 4 * K, "--g-idx", NULL)))) {
        loaded_free(l);
        return 1;
    }
    qg_w4a16 L = {N, K, (size_t)a->g, l->qw, nq, l->sc, ng, l->z, l->z ? ng : 0, l->gi, l->gi ? K : 0};
    l->L = L;
    return 0;
}

static int cmd_dequant(int argc, char **argv)
{
    int4_args a;
    loaded l;
    int rc = parse_args("dequant", k_dequant_opts, argc, argv, &a);
    if (rc || (rc = load("dequant", "w4a16_decode", &a, &l))) return rc;
    const size_t n = l.L.N * l.L.K;
    const int f16 = a.out_type && strcmp(a.out_type, "f16") == 0;
    float *w = malloc(4 * n);
    uint16_t *h = f16 ? malloc(2 * n) : NULL;
    if (!w || (f16 && !h)) {
        fprintf(stderr, "qgold: int4 dequant: out of memory (%zu bytes)\n", 6 * n);
        rc = 1;
    } else if ((rc = l.k->fn.int4_w4a16_decode(&l.L, w)) != 0) {
        rc = kernel_error("dequant", rc);
    } else if (f16) {
        for (size_t i = 0; i < n; i++) h[i] = qg_f32_to_f16(w[i]);
        rc = qgc_write_output(a.out, h, 2 * n);
    } else {
        rc = qgc_write_output(a.out, w, 4 * n);
    }
    free(w), free(h);
    loaded_free(&l);
    return rc;
}

static int cmd_gemv(int argc, char **argv)
{
    int4_args a;
    loaded l;
    int rc = parse_args("gemv", k_gemv_opts, argc, argv, &a);
    if (rc || (rc = need(a.x, "--x"))) return rc;
    if (a.batch == UINT64_MAX) return qgc_usage_error(k_usage_int4, "--batch is required");
    if ((rc = load("gemv", "w4a16_gemv", &a, &l))) return rc;
    const size_t B = a.batch, nx = B * l.L.K, ny = B * l.L.N;
    const int f16 = a.out_type && strcmp(a.out_type, "f16") == 0;
    uint16_t *x = qgc_read_input(a.x, 2 * nx, "--x", NULL);
    void *y = malloc(f16 ? 2 * ny : 4 * ny);
    if (!x) {
        rc = 1;
    } else if (!y) {
        fprintf(stderr, "qgold: int4 gemv: out of memory (%zu bytes)\n", 4 * ny);
        rc = 1;
    } else if ((rc = l.k->fn.int4_w4a16_gemv(&l.L, x, nx, B, f16 ? NULL : y, f16 ? y : NULL)) != 0) {
        rc = kernel_error("gemv", rc);
    } else {
        rc = qgc_write_output(a.out, y, f16 ? 2 * ny : 4 * ny);
    }
    free(x), free(y);
    loaded_free(&l);
    return rc;
}

int qgc_cmd_int4(int argc, char **argv)
{
    if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        fputs(k_usage_int4, argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(k_usage_int4, stdout);
            return 0;
        }
    if (strcmp(argv[0], "import") == 0) return cmd_import(argc - 1, argv + 1);
    if (strcmp(argv[0], "dequant") == 0) return cmd_dequant(argc - 1, argv + 1);
    if (strcmp(argv[0], "gemv") == 0) return cmd_gemv(argc - 1, argv + 1);
    return qgc_usage_error(k_usage_int4, "unknown int4 command '%s' (import, dequant, gemv)", argv[0]);
}
