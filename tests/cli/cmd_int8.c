/* qgold int8: users' own tensors through the INT8 kernels (spec: reference/spec/intq.md), raw
 * little-endian files in and out, every size checked before a kernel runs, every kernel error named,
 * every output written atomically (a temporary name renamed on success).
 *
 *   quantize     float32 / fp16 values -> int8 codes + scales (per tensor, row or group)
 *   dequantize   int8 codes + scales -> float32 / fp16 values
 *   gemm         W8A8: int8 A (M x K) x int8 B (N x K) -> int32 sums or the scaled float32 / fp16
 *                output with bias and ReLU; W8A16 with --x: fp16 activations X (M x K) x int8 B
 */
#include "cli.h"
#include "cmds.h"
#include "qgold/errors.h"
#include "qgold/intq.h"
#include "qgold/registry.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *k_usage_int8 =
    "usage: qgold int8 quantize --rows R --cols C --in X --out Q.i8 --scales-out S\n"
    "                  [--src f32|f16] [--scale f32|f16] [--granularity tensor|row|group] [--group G] [--backend B]\n"
    "       qgold int8 dequantize --rows R --cols C --in Q.i8 --scales S --out Y\n"
    "                  [--scale f32|f16] [--granularity tensor|row|group] [--group G] [--out-type f32|f16] [--backend B]\n"
    "       qgold int8 gemm --m M --n N --k K --a A.i8 --b B.i8 --out Y [--out-type i32|f32|f16]\n"
    "                  [--sa SA.f32] [--sb SB.f32] [--bias BIAS] [--bias-type f32|f16] [--relu] [--backend B]\n"
    "       qgold int8 gemm --m M --n N --k K --x X.f16 --b B.i8 --sb SB --out Y [--scale f32|f16]\n"
    "                  [--out-type f32|f16] [--backend B]\n"
    "\n"
    "INT8 symmetric quantization and integer products (reference/spec/intq.md); every file is raw\n"
    "little-endian, row-major, without a header.\n"
    "  quantize     X holds R x C values (--src, default f32). Per tensor (default), per row, or per group of\n"
    "               --group G in {32, 64, 128} consecutive values of a row: amax / 127 is the scale (an IEEE\n"
    "               division; --scale f16 stores RN16 of it and computes the codes with that value), codes\n"
    "               are rne(v / s) clamped to [-128, 127]. Writes Q.i8 (R x C int8) and S (1, R or R x C/G\n"
    "               scales of --scale, default f32). A NaN or infinite value is int_nonfinite_input.\n"
    "  dequantize   Q.i8 and S as quantize writes them -> Y = RN32(q s) as float32, or fp16 (RN16 of it).\n"
    "  gemm         W8A8: acc = sum_k A[m][k] B[n][k] (exact int32, K <= 131071). --out-type i32 (default\n"
    "               without scales) writes acc; f32 (default with scales) or f16 applies the pinned epilogue\n"
    "               RN32(RN32(acc * sb[n]) * sa[m]), + bias[n] (--bias-type, default f32), then ReLU (NaN\n"
    "               kept): SA holds 1 or M float32 values, SB 1 or N, BIAS N values.\n"
    "               W8A16 (--x): X holds M x K fp16 activations, SB N scales (--scale), Y the M x N float32\n"
    "               or fp16 sums of (sb[n] B[n][k]) X[m][k] (float32 accumulation).\n"
    "  --backend B  ref (default), avx2, neon or cuda: the kernel of that registry row; every backend's\n"
    "               quantize, dequantize and W8A8 output is bit-identical to the reference.\n"
    "A file of the wrong size is named with the size it must have; a kernel error prints its name and\n"
    "message (int_k_too_large, int_scale_invalid, ...). Outputs are written only on success.\n" QG_INT_OPTIONS QG_EXIT_STATUS;

/* The options of each subcommand; any other known option is refused rather than ignored. */
static const char *const k_all_options = "--rows --cols --group --m --n --k --in --out --scales-out --scales --a --b --x --sa "
                                         "--sb --bias --backend --src --scale --granularity --out-type --bias-type --relu";
static const char *const k_quantize_options = "--rows --cols --in --out --scales-out --src --scale --granularity --group --backend";
static const char *const k_dequantize_options = "--rows --cols --in --scales --out --scale --granularity --group --out-type --backend";
static const char *const k_gemm_options = "--m --n --k --a --b --x --sa --sb --bias --bias-type --relu --out --out-type --scale --backend";

typedef struct {
    uint64_t rows, cols, group, m, n, k;
    const char *in, *out, *scales_out, *scales, *a, *b, *x, *sa, *sb, *bias, *backend;
    const char *src, *scale, *gran, *out_type, *bias_type;
    int relu, has_group;
} int8_args;

static int parse_ftype(const char *v, const char *opt, qg_int8_ftype *t)
{
    if (v == NULL || strcmp(v, "f32") == 0) *t = QG_INT8_F32;
    else if (strcmp(v, "f16") == 0) *t = QG_INT8_F16;
    else return qgc_usage_error(k_usage_int8, "%s must be f32 or f16, not '%s'", opt, v);
    return 0;
}

/* Whether option o is one of the space-separated words of list. */
static int in_list(const char *o, const char *list)
{
    const size_t n = strlen(o);
    for (const char *p = list; (p = strstr(p, o)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return 1;
    return 0;
}

static int parse_args(const char *sub, const char *allowed, int argc, char **argv, int8_args *a)
{
    memset(a, 0, sizeof *a);
    a->rows = a->cols = a->m = a->n = a->k = UINT64_MAX;
    static const struct {
        const char *opt;
        size_t off;
    } strs[] = {
#define S(o, f) {o, offsetof(int8_args, f)}
        S("--in", in), S("--out", out), S("--scales-out", scales_out), S("--scales", scales), S("--a", a), S("--b", b),
        S("--x", x), S("--sa", sa), S("--sb", sb), S("--bias", bias), S("--backend", backend), S("--src", src),
        S("--scale", scale), S("--granularity", gran), S("--out-type", out_type), S("--bias-type", bias_type),
#undef S
    };
    static const struct {
        const char *opt;
        size_t off;
    } nums[] = {{"--rows", offsetof(int8_args, rows)}, {"--cols", offsetof(int8_args, cols)}, {"--group", offsetof(int8_args, group)},
                {"--m", offsetof(int8_args, m)},       {"--n", offsetof(int8_args, n)},       {"--k", offsetof(int8_args, k)}};
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        if (strncmp(o, "--", 2) == 0 && !in_list(o, allowed) && in_list(o, k_all_options))
            return qgc_usage_error(k_usage_int8, "%s does not apply to int8 %s", o, sub);
        if (strcmp(o, "--relu") == 0) {
            a->relu = 1;
            continue;
        }
        int done = 0;
        for (size_t j = 0; j < sizeof strs / sizeof strs[0] && !done; j++) {
            if (strcmp(o, strs[j].opt) != 0) continue;
            if (i + 1 >= argc) return qgc_usage_error(k_usage_int8, "%s needs a value", o);
            *(const char **)(void *)((char *)a + strs[j].off) = argv[++i];
            done = 1;
        }
        for (size_t j = 0; j < sizeof nums / sizeof nums[0] && !done; j++) {
            if (strcmp(o, nums[j].opt) != 0) continue;
            if (i + 1 >= argc) return qgc_usage_error(k_usage_int8, "%s needs a value", o);
            uint64_t *v = (uint64_t *)(void *)((char *)a + nums[j].off);
            if (qgc_parse_uint(argv[++i], 0, UINT32_MAX, v) != 0) return qgc_bad_number(k_usage_int8, o, argv[i], 0, UINT32_MAX);
            if (strcmp(o, "--group") == 0) a->has_group = 1;
            done = 1;
        }
        if (!done) return qgc_usage_error(k_usage_int8, "unknown option '%s'", o);
    }
    return 0;
}

/* 2 with a usage error when input `in` and output `out` are one file. */
static int refuse_same(const char *opt, const char *in, const char *out)
{
    return in != NULL && qgc_same_file(in, out) ? qgc_refuse_same_file(k_usage_int8, opt, in, out) : 0;
}

static int need(const char *v, const char *opt)
{
    return v != NULL ? 0 : qgc_usage_error(k_usage_int8, "%s is required", opt);
}
static int need_num(uint64_t v, const char *opt)
{
    return v != UINT64_MAX ? 0 : qgc_usage_error(k_usage_int8, "%s is required", opt);
}

static const qg_kernel *find_kernel(const char *path, const char *backend, int *rc)
{
    const int be = backend ? qg_backend_from_name(backend) : QG_BACKEND_REF;
    if (be < 0) {
        *rc = qgc_usage_error(k_usage_int8, "unknown backend '%s' (ref, avx2, neon, cuda)", backend);
        return NULL;
    }
    const qg_kernel *k = qg_registry_find("int8", path, (qg_backend)be);
    char why[200] = "no registry row";
    if (k == NULL || !qg_kernel_available(k, why, sizeof why)) {
        fprintf(stderr, "qgold: %s: backend %s cannot run int8 %s here: %s\n", qg_error_name(QG_ERR_backend_unavailable),
                qg_backend_name((qg_backend)be), path, why);
        *rc = 1;
        return NULL;
    }
    *rc = 0;
    return k;
}

static int kernel_fail(int rc, const char *what)
{
    fprintf(stderr, "qgold: %s: %s: %s\n", qg_error_name(rc), what, qg_error_message(rc));
    return 1;
}

/* The quantized shape of the options; 2 with a usage error when it is not one the format allows. */
static int qshape_of(const int8_args *a, qg_int8_qshape *s)
{
    int rc;
    qg_int8_ftype st = QG_INT8_F32;
    if ((rc = need_num(a->rows, "--rows")) || (rc = need_num(a->cols, "--cols")) || (rc = parse_ftype(a->scale, "--scale", &st)))
        return rc;
    memset(s, 0, sizeof *s);
    s->rows = (size_t)a->rows;
    s->cols = (size_t)a->cols;
    s->scale_type = st;
    if (a->gran == NULL || strcmp(a->gran, "tensor") == 0) s->gran = QG_INT8_PER_TENSOR;
    else if (strcmp(a->gran, "row") == 0) s->gran = QG_INT8_PER_ROW;
    else if (strcmp(a->gran, "group") == 0) s->gran = QG_INT8_PER_GROUP;
    else return qgc_usage_error(k_usage_int8, "--granularity must be tensor, row or group, not '%s'", a->gran);
    if ((s->gran == QG_INT8_PER_GROUP) != (a->has_group != 0))
        return qgc_usage_error(k_usage_int8, "--group is given exactly with --granularity group");
    s->group = (size_t)a->group;
    if ((rc = qg_int8_qshape_check(s)) != QG_ERR_ok)
        return qgc_usage_error(k_usage_int8, "%s: %llu x %llu%s", qg_error_name(rc), (unsigned long long)a->rows,
                               (unsigned long long)a->cols,
                               rc == QG_ERR_int_group_invalid ? ": the group must be 32, 64 or 128 and divide --cols" : "");
    return 0;
}

static int cmd_quantize(const int8_args *a)
{
    qg_int8_qshape s;
    qg_int8_ftype src = QG_INT8_F32;
    int rc;
    if ((rc = qshape_of(a, &s)) || (rc = parse_ftype(a->src, "--src", &src)) || (rc = need(a->in, "--in")) ||
        (rc = need(a->out, "--out")) || (rc = need(a->scales_out, "--scales-out")) ||
        (rc = refuse_same("--in", a->in, a->out)) ||
        (rc = refuse_same("--in", a->in, a->scales_out)))
        return rc;
    if (strcmp(a->out, a->scales_out) == 0) return qgc_usage_error(k_usage_int8, "--out and --scales-out name the same file");
    const qg_kernel *k = find_kernel("quantize", a->backend, &rc);
    if (k == NULL) return rc;
    const size_t n = s.rows * s.cols, ns = qg_int8_num_scales(&s), ssz = s.scale_type == QG_INT8_F16 ? 2 : 4;
    size_t in_bytes;
    if (qgc_mul_size(n, src == QG_INT8_F16 ? 2 : 4, &in_bytes)) return qgc_usage_error(k_usage_int8, "rows x cols is too large");
    void *x = qgc_read_input(a->in, in_bytes, src == QG_INT8_F16 ? "rows * cols fp16 values" : "rows * cols float32 values", NULL);
    if (x == NULL) return 1;
    int8_t *q = malloc(n);
    void *sc = malloc(ns * ssz);
    rc = q && sc ? k->fn.int8_quantize(&s, x, src, q, sc) : QG_ERR_alloc_failed;
    if (rc != QG_ERR_ok) rc = kernel_fail(rc, a->in);
    else if ((rc = qgc_write_output(a->out, q, n)) == 0 && (rc = qgc_write_output(a->scales_out, sc, ns * ssz)) == 0)
        printf("qgold: %zu x %zu %s -> %zu int8 codes, %zu %s scales (%s)\n", s.rows, s.cols, src == QG_INT8_F16 ? "fp16" : "float32",
               n, ns, ssz == 2 ? "fp16" : "float32", k->name);
    free(x);
    free(q);
    free(sc);
    return rc;
}

static int cmd_dequantize(const int8_args *a)
{
    qg_int8_qshape s;
    qg_int8_ftype ot = QG_INT8_F32;
    int rc;
    if ((rc = qshape_of(a, &s)) || (rc = parse_ftype(a->out_type, "--out-type", &ot)) || (rc = need(a->in, "--in")) ||
        (rc = need(a->scales, "--scales")) || (rc = need(a->out, "--out")) ||
        (rc = refuse_same("--in", a->in, a->out)) ||
        (rc = refuse_same("--scales", a->scales, a->out)))
        return rc;
    const qg_kernel *k = find_kernel("dequant", a->backend, &rc);
    if (k == NULL) return rc;
    const size_t n = s.rows * s.cols, ns = qg_int8_num_scales(&s), ssz = s.scale_type == QG_INT8_F16 ? 2 : 4;
    int8_t *q = qgc_read_input(a->in, n, "rows * cols int8 codes", NULL);
    if (q == NULL) return 1;
    void *sc = qgc_read_input(a->scales, ns * ssz, "the shape's scale count x the scale size", NULL);
    void *y = malloc(n * (ot == QG_INT8_F16 ? 2 : 4));
    if (sc == NULL) rc = 1;
    else if (y == NULL) rc = kernel_fail(QG_ERR_alloc_failed, a->in);
    else if ((rc = k->fn.int8_dequant(&s, q, sc, ot == QG_INT8_F32 ? y : NULL, ot == QG_INT8_F16 ? y : NULL)) != QG_ERR_ok)
        rc = kernel_fail(rc, a->scales);
    else if ((rc = qgc_write_output(a->out, y, n * (ot == QG_INT8_F16 ? 2 : 4))) == 0)
        printf("qgold: %zu x %zu int8 -> %s (%s)\n", s.rows, s.cols, ot == QG_INT8_F16 ? "fp16" : "float32", k->name);
    free(q);
    free(sc);
    free(y);
    return rc;
}

/* A scale file of 1 or `many` float32 values (raw): its count in *len, or NULL with the error printed. */
static float *read_scales(const char *path, size_t many, const char *what, size_t *len)
{
    size_t got = 0;
    float *v = qgc_read_input(path, SIZE_MAX, "", &got);
    if (v == NULL) return NULL;
    if (got != 4 && got != 4 * many) {
        fprintf(stderr, "qgold: %s: %s: %zu bytes, expected 4 (one float32) or %zu (%s)\n", qg_error_name(QG_ERR_size_mismatch), path, got,
                4 * many, what);
        free(v);
        return NULL;
    }
    *len = got / 4;
    return v;
}

static int cmd_w8a16(const int8_args *a, size_t M, size_t N, size_t K)
{
    qg_int8_ftype st = QG_INT8_F32, ot = QG_INT8_F32;
    int rc;
    if ((rc = parse_ftype(a->scale, "--scale", &st)) || (rc = parse_ftype(a->out_type, "--out-type", &ot)) ||
        (rc = need(a->sb, "--sb")))
        return rc;
    if (a->a || a->sa || a->bias || a->relu)
        return qgc_usage_error(k_usage_int8, "--a, --sa, --bias and --relu belong to W8A8 (without --x)");
    const qg_kernel *k = find_kernel("w8a16", a->backend, &rc);
    if (k == NULL) return rc;
    size_t xb, bb, yb;
    if (qgc_mul_size(M, K, &xb) || qgc_mul_size(xb, 2, &xb) || qgc_mul_size(N, K, &bb) || qgc_mul_size(M, N, &yb) ||
        qgc_mul_size(yb, ot == QG_INT8_F16 ? 2 : 4, &yb))
        return qgc_usage_error(k_usage_int8, "the shape is too large");
    uint16_t *x = qgc_read_input(a->x, xb, "M * K fp16 values", NULL);
    int8_t *b = x ? qgc_read_input(a->b, bb, "N * K int8 codes", NULL) : NULL;
    void *sb = b ? qgc_read_input(a->sb, N * (st == QG_INT8_F16 ? 2 : 4), "N scales of --scale", NULL) : NULL;
    void *y = malloc(yb ? yb : 1);
    if (sb == NULL) rc = 1;
    else if (y == NULL) rc = kernel_fail(QG_ERR_alloc_failed, a->out);
    else if ((rc = k->fn.int8_w8a16(b, sb, st, N, K, x, M, ot == QG_INT8_F32 ? y : NULL, ot == QG_INT8_F16 ? y : NULL)) != QG_ERR_ok)
        rc = kernel_fail(rc, a->b);
    else if ((rc = qgc_write_output(a->out, y, yb)) == 0)
        printf("qgold: W8A16 %zu x %zu x %zu -> %s (%s)\n", M, N, K, ot == QG_INT8_F16 ? "fp16" : "float32", k->name);
    free(x);
    free(b);
    free(sb);
    free(y);
    return rc;
}

static int cmd_gemm(const int8_args *a)
{
    int rc;
    if ((rc = need_num(a->m, "--m")) || (rc = need_num(a->n, "--n")) || (rc = need_num(a->k, "--k")) || (rc = need(a->b, "--b")) ||
        (rc = need(a->out, "--out")))
        return rc;
    const char *ins[] = {a->a, a->b, a->x, a->sa, a->sb, a->bias};
    for (size_t i = 0; i < sizeof ins / sizeof ins[0]; i++)
        if ((rc = refuse_same("an input", ins[i], a->out))) return rc;
    const size_t M = (size_t)a->m, N = (size_t)a->n, K = (size_t)a->k;
    if (M == 0 || N == 0 || K == 0) return qgc_usage_error(k_usage_int8, "%s: M, N and K must be at least 1", qg_error_name(QG_ERR_shape_invalid));
    if (a->x) return cmd_w8a16(a, M, N, K);
    if ((rc = need(a->a, "--a"))) return rc;
    if (K > QG_INT8_MAX_K)
        return qgc_usage_error(k_usage_int8, "%s: K = %zu, the exact int32 sum allows at most %d", qg_error_name(QG_ERR_int_k_too_large), K,
                               QG_INT8_MAX_K);
    const int scaled = a->sa != NULL || a->sb != NULL;
    const char *ot_name = a->out_type ? a->out_type : scaled ? "f32" : "i32";
    const int want_i32 = strcmp(ot_name, "i32") == 0;
    qg_int8_ftype ot = QG_INT8_F32, bt = QG_INT8_F32;
    if (!want_i32 && (rc = parse_ftype(ot_name, "--out-type", &ot))) return rc;
    if ((rc = parse_ftype(a->bias_type, "--bias-type", &bt))) return rc;
    if (want_i32 && (scaled || a->bias || a->relu)) return qgc_usage_error(k_usage_int8, "--out-type i32 writes the raw sums: no --sa, --sb, --bias or --relu");
    if (!want_i32 && (a->sa == NULL || a->sb == NULL)) return qgc_usage_error(k_usage_int8, "a scaled output needs --sa and --sb");
    const qg_kernel *k = find_kernel("w8a8", a->backend, &rc);
    if (k == NULL) return rc;
    size_t ab, bb, mn;
    if (qgc_mul_size(M, K, &ab) || qgc_mul_size(N, K, &bb) || qgc_mul_size(M, N, &mn) || mn > SIZE_MAX / 4)
        return qgc_usage_error(k_usage_int8, "the shape is too large");
    int8_t *A = qgc_read_input(a->a, ab, "M * K int8 codes", NULL);
    int8_t *B = A ? qgc_read_input(a->b, bb, "N * K int8 codes", NULL) : NULL;
    float *sa = NULL, *sb = NULL;
    void *bias = NULL;
    size_t sal = 0, sbl = 0;
    rc = B ? 0 : 1;
    if (rc == 0 && a->sa && (sa = read_scales(a->sa, M, "M per-token scales", &sal)) == NULL) rc = 1;
    if (rc == 0 && a->sb && (sb = read_scales(a->sb, N, "N per-channel scales", &sbl)) == NULL) rc = 1;
    if (rc == 0 && a->bias && (bias = qgc_read_input(a->bias, N * (bt == QG_INT8_F16 ? 2 : 4), "N bias values of --bias-type", NULL)) == NULL)
        rc = 1;
    const size_t ysz = want_i32 || ot == QG_INT8_F32 ? 4 : 2;
    void *y = rc == 0 ? malloc(mn * ysz) : NULL;
    if (rc == 0 && y == NULL) rc = kernel_fail(QG_ERR_alloc_failed, a->out);
    if (rc == 0) {
        const qg_int8_w8a8_args p = {M, N, K, A, B, sa, sal, sb, sbl, bias, bt, a->relu};
        rc = k->fn.int8_w8a8(&p, want_i32 ? y : NULL, !want_i32 && ot == QG_INT8_F32 ? y : NULL, !want_i32 && ot == QG_INT8_F16 ? y : NULL);
        if (rc != QG_ERR_ok) rc = kernel_fail(rc, scaled ? "the scales" : a->a);
        else if ((rc = qgc_write_output(a->out, y, mn * ysz)) == 0)
            printf("qgold: W8A8 %zu x %zu x %zu -> %s (%s)\n", M, N, K, ot_name, k->name);
    }
    free(A);
    free(B);
    free(sa);
    free(sb);
    free(bias);
    free(y);
    return rc;
}

int qgc_cmd_int8(int argc, char **argv)
{
    if (argc < 1) return qgc_usage_error(k_usage_int8, "a subcommand is required (quantize, dequantize, gemm)");
    const char *sub = argv[0];
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
        fputs(k_usage_int8, stdout);
        return 0;
    }
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(k_usage_int8, stdout);
            return 0;
        }
    const char *allowed = strcmp(sub, "quantize") == 0     ? k_quantize_options
                          : strcmp(sub, "dequantize") == 0 ? k_dequantize_options
                          : strcmp(sub, "gemm") == 0       ? k_gemm_options
                                                           : NULL;
    if (allowed == NULL) return qgc_usage_error(k_usage_int8, "unknown subcommand '%s' (quantize, dequantize, gemm)", sub);
    int8_args a;
    int rc = parse_args(sub, allowed, argc - 1, argv + 1, &a);
    if (rc) return rc;
    if (strcmp(sub, "quantize") == 0) return cmd_quantize(&a);
    if (strcmp(sub, "dequantize") == 0) return cmd_dequantize(&a);
    return cmd_gemm(&a);
}
