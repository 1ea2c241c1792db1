/* qgold: the command-line front of the suite.
 *
 *   qgold list                      what is registered and whether it can run here
 *   qgold audit [options]           every registered kernel over every shipped fixture
 *
 * Exit status: 0 success, 1 a check failed or a fixture could not be read, 2 wrong arguments.
 */
#include "audit.h"
#include "bench.h"
#include "qgold/kquants.h"
#include "qgold/rans.h"
#include "qgold/registry.h"
#if QG_HAVE_CUDA
#include "qgold/cuda.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef QG_DEFAULT_GOLDEN
#define QG_DEFAULT_GOLDEN "golden"
#endif

static const char *k_usage_main =
    "usage: qgold <command> [options]\n"
    "\n"
    "commands:\n"
    "  list     one line per format/path/backend: available on this machine or not, and why\n"
    "  audit    run every registered kernel over every fixture and print a verdict table\n"
    "  bench    measure kernels against bandwidth (and baselines) measured in the same run\n"
    "  quantize float32 values -> K-quant blocks (reference quantizer), raw little-endian files\n"
    "  dequant  K-quant blocks -> float32 values on any backend, raw little-endian files\n"
    "  rans     encode, decode or check rANS-compressed int8 tile containers\n"
    "\n"
    "qgold <command> --help shows the options of a command.\n";

static const char *k_usage_list =
    "usage: qgold list [--format F]\n"
    "\n"
    "Lists every registered kernel: format, path, backend, tier, availability here (and why not).\n"
    "  --format F   only format F\n";

static const char *k_usage_audit =
    "usage: qgold audit [--format F] [--backend B] [--golden DIR] [--no-manifest] [--json FILE]\n"
    "\n"
    "Runs every registered kernel over every fixture of its format at the kernel's tier and prints one\n"
    "row per kernel and fixture file: cases, elements compared, tier, worst bound ratio, verdict.\n"
    "Every dataset read is checked against its hash in DIR/MANIFEST; a missing MANIFEST is a failure.\n"
    "  --format F     only format F (see qgold list)\n"
    "  --backend B    only backend B: ref, avx2, neon, cuda (one not built here: SKIP rows, exit 1)\n"
    "  --no-manifest  read the fixtures without checking them against DIR/MANIFEST (not even loaded), for\n"
    "                 a directory without one; the table and the JSON then say \"manifest: not checked\"\n"
    "  --golden DIR   fixture directory (default: the shipped golden/, " QG_DEFAULT_GOLDEN ")\n"
    "  --json FILE    also write the rows as JSON to FILE\n"
    "Exit status: 0 all pass (skips allowed), 1 any failure, unreadable fixture, no fixture directory, no\n"
    "MANIFEST (without --no-manifest) or nothing audited, 2 wrong arguments.\n";

static const char *k_usage_bench =
    "usage: qgold bench --format F [--backend B] [--reps N] [--threads N] [--shapes RxK,...] [--batches B,...]\n"
    "                   [--quick] [--json FILE]\n"
    "\n"
    "Times every available kernel of format F. Each figure is the median of N repetitions (default 7) with\n"
    "its min and max; efficiency is relative to a bandwidth measured in the same run (CPU: multi-threaded\n"
    "streaming read, BW_read; GPU: device-to-device copy, BW_copy, bytes read + written).\n"
    "  --format F     format to measure (see qgold list)\n"
    "  --backend B    only backend B: ref, avx2, neon, cuda\n"
    "  --reps N       repetitions per figure (7 to 63)\n"
    "  --threads N    CPU threads (default: all online CPUs)\n"
    "  --shapes L     GEMV shapes RxK (R out, K in) instead of the standard ones, e.g. 8192x8192,28672x8192:\n"
    "                 at most 16, R and K in 1..2147483647, and per format (else exit 2)\n"
    "                   q4_k q5_k q6_k q8_k  K a multiple of 256\n"
    "                   spqr                 R a multiple of 16, at most 16777216; K at most 65536\n"
    "                   rans                 no further rule\n"
    "                   fp16                 none accepted (nor --batches): fixed-size conversions\n"
    "  --batches L    batches instead of 1,2,4,8,16, e.g. 1,16: at most 16, each 1..16\n"
    "  --quick        small sizes and 3 repetitions: checks the harness runs, measures nothing\n"
    "  --json FILE    also write the rows and the machine notes as JSON, only after a run that measured\n"
    "                 something and failed nowhere (a failed run leaves FILE unchanged)\n"
    "A --backend not built into this binary, or with no kernel for F, is a usage error (exit 2); one built\n"
    "but unable to run here (no GPU, CPU feature missing, QG_FORCE_ISA) is a failure (exit 1).\n";

static const char *k_usage_quantize =
    "usage: qgold quantize --format F --rows R --cols K --in values.f32 --out blocks.bin\n"
    "\n"
    "Quantizes R x K float32 values (raw little-endian, row-major) into GGUF blocks of format F\n"
    "(q4_k, q5_k, q6_k, q8_k) with the reference quantizer (bit-exact with ggml's quantize_row_*_ref).\n"
    "K must be a multiple of 256; the input must hold exactly R*K*4 bytes.\n";

static const char *k_usage_dequant =
    "usage: qgold dequant --format F --rows R --cols K --in blocks.bin --out values.f32 [--backend B]\n"
    "\n"
    "Dequantizes R rows of K elements of GGUF blocks of format F (q4_k, q5_k, q6_k, q8_k) to float32\n"
    "(raw little-endian, row-major). The input must hold exactly R*(K/256)*block-bytes bytes.\n"
    "  --backend B    ref (default), avx2, neon or cuda: every backend gives the same bits\n";

static int usage_error(const char *usage, const char *fmt, const char *arg)
{
    fprintf(stderr, "qgold: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n\n%s", usage);
    return 2;
}

static int format_known(const char *f)
{
    for (size_t i = 0; i < qg_registry_count(); i++)
        if (strcmp(qg_registry_at(i)->format, f) == 0) return 1;
    return 0;
}

static const char *tier_name(qg_tier t) { return t == QG_TIER_EXACT ? "exact" : "bounded"; }

static int cmd_list(int argc, char **argv)
{
    const char *format = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("%s", k_usage_list);
            return 0;
        } else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc) {
            format = argv[++i];
            if (!format_known(format)) return usage_error(k_usage_list, "unknown format '%s'", format);
        } else {
            return usage_error(k_usage_list, "unexpected argument '%s'", argv[i]);
        }
    }
    if (strcmp(qg_forced_isa(), "invalid") == 0) fprintf(stderr, "qgold: warning: QG_FORCE_ISA is not one of scalar, avx2, neon\n");
    printf("%-8s %-14s %-6s %-8s %-11s %s\n", "format", "path", "backend", "tier", "status", "kernel / reason");
    for (size_t i = 0; i < qg_registry_count(); i++) {
        const qg_kernel *k = qg_registry_at(i);
        if (format != NULL && strcmp(k->format, format) != 0) continue;
        char why[200] = "";
        int ok = qg_kernel_available(k, why, sizeof why);
        printf("%-8s %-14s %-6s  %-8s %-11s %s\n", k->format, k->path, qg_backend_name(k->backend), tier_name(k->numerics.tier),
               ok ? "available" : "unavailable", ok ? k->name : why);
    }
    return 0;
}

typedef struct {
    FILE *json;
    int first;
} sink_ctx;

static void json_str(FILE *fp, const char *s)
{
    fputc('"', fp);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(fp, "\\%c", c);
        else if (c < 0x20) fprintf(fp, "\\u%04x", c);
        else fputc(c, fp);
    }
    fputc('"', fp);
}

static const char *verdict_name(qg_audit_verdict v) { return v == QG_AUDIT_PASS ? "PASS" : v == QG_AUDIT_FAIL ? "FAIL" : "SKIP"; }

static void print_row(const qg_audit_row *r, void *vctx)
{
    sink_ctx *c = vctx;
    char ratio[32] = "-";
    if (r->verdict != QG_AUDIT_SKIP && r->tier == QG_TIER_BOUNDED) snprintf(ratio, sizeof ratio, "%.3f", r->worst_ratio);
    printf("%-7s %-12s %-7s %-24s %6zu %10zu  %-7s %-7s %s\n", r->format, r->path, r->backend, r->file, r->cases, r->elements,
           r->verdict == QG_AUDIT_SKIP ? "-" : tier_name(r->tier), ratio, verdict_name(r->verdict));
    if (r->verdict != QG_AUDIT_PASS) printf("        %s\n", r->detail);
    fflush(stdout);
    if (c->json != NULL) {
        fprintf(c->json, "%s\n    {\"format\": ", c->first ? "" : ",");
        json_str(c->json, r->format);
        fprintf(c->json, ", \"path\": ");
        json_str(c->json, r->path);
        fprintf(c->json, ", \"backend\": ");
        json_str(c->json, r->backend);
        fprintf(c->json, ", \"kernel\": ");
        json_str(c->json, r->kernel);
        fprintf(c->json, ", \"file\": ");
        json_str(c->json, r->file);
        fprintf(c->json, ", \"cases\": %zu, \"elements\": %zu, \"tier\": \"%s\", \"worst_ratio\": %.17g, \"verdict\": \"%s\", \"detail\": ",
                r->cases, r->elements, tier_name(r->tier), r->worst_ratio, verdict_name(r->verdict));
        json_str(c->json, r->detail);
        fprintf(c->json, "}");
        c->first = 0;
    }
}

static int cmd_audit(int argc, char **argv)
{
    qg_audit_opts o = {QG_DEFAULT_GOLDEN, NULL, -1, 0};
    const char *json_path = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("%s", k_usage_audit);
            return 0;
        }
        if (i + 1 >= argc && (strcmp(a, "--format") == 0 || strcmp(a, "--backend") == 0 || strcmp(a, "--golden") == 0 ||
                              strcmp(a, "--json") == 0))
            return usage_error(k_usage_audit, "option %s needs a value", a);
        if (strcmp(a, "--format") == 0) {
            o.format = argv[++i];
            if (!format_known(o.format)) return usage_error(k_usage_audit, "unknown format '%s' (see qgold list)", o.format);
        } else if (strcmp(a, "--backend") == 0) {
            o.backend = qg_backend_from_name(argv[++i]);
            if (o.backend < 0) return usage_error(k_usage_audit, "unknown backend '%s' (ref, avx2, neon, cuda)", argv[i]);
        } else if (strcmp(a, "--golden") == 0) {
            o.golden_dir = argv[++i];
        } else if (strcmp(a, "--json") == 0) {
            json_path = argv[++i];
        } else if (strcmp(a, "--no-manifest") == 0) {
            o.no_manifest = 1;
        } else {
            return usage_error(k_usage_audit, "unexpected argument '%s'", a);
        }
    }
    if (strcmp(qg_forced_isa(), "invalid") == 0) {
        fprintf(stderr, "qgold: QG_FORCE_ISA must be scalar, avx2 or neon\n");
        return 2;
    }
    qg_err ge;
    if (qg_audit_check_golden(&o, &ge) != QG_ERR_ok) {
        fprintf(stderr, "qgold: %s%s\n", ge.msg, ge.code == QG_ERR_fixture_manifest_missing ? "; --no-manifest audits without it" : "");
        return 1;
    }
    sink_ctx c = {NULL, 1};
    if (json_path != NULL && (c.json = fopen(json_path, "w")) == NULL) {
        fprintf(stderr, "qgold: cannot write %s\n", json_path);
        return 1;
    }
    char gpu[256] = "none";
#if QG_HAVE_CUDA
    if (qg_cuda_device_count(NULL, 0) > 0) qg_cuda_describe(gpu, sizeof gpu);
#endif
    printf("qgold audit: golden %s; manifest: %s; cpu features:%s%s; gpu: %s\n", o.golden_dir,
           o.no_manifest ? "not checked (--no-manifest)" : "checked", (qg_cpu_features() & QG_CPU_AVX2) ? " avx2" : "",
           (qg_cpu_features() & QG_CPU_NEON) ? " neon" : "", gpu);
    printf("%-7s %-12s %-7s %-24s %6s %10s  %-7s %-7s %s\n", "format", "path", "backend", "file", "cases", "elements", "tier", "worst",
           "verdict");
    if (c.json != NULL) {
        fprintf(c.json, "{\n  \"golden\": ");
        json_str(c.json, o.golden_dir);
        fprintf(c.json, ",\n  \"manifest\": \"%s\"", o.no_manifest ? "not checked" : "checked");
        fprintf(c.json, ",\n  \"gpu\": ");
        json_str(c.json, gpu);
        fprintf(c.json, ",\n  \"rows\": [");
    }
    qg_audit_summary s;
    int rc = qg_audit(&o, print_row, &c, &s);
    printf("\n%zu passed, %zu failed, %zu skipped%s\n", s.pass, s.fail, s.skip, o.no_manifest ? " (manifest: not checked)" : "");
    if (c.json != NULL) {
        fprintf(c.json, "\n  ],\n  \"passed\": %zu, \"failed\": %zu, \"skipped\": %zu\n}\n", s.pass, s.fail, s.skip);
        fclose(c.json);
    }
    if (s.pass == 0 && s.fail == 0) {
        fprintf(stderr, "qgold: nothing was audited (every selected kernel is unavailable here)\n");
        return 1;
    }
    return rc ? 1 : 0;
}

static int cmd_bench(int argc, char **argv)
{
    qg_bench_opts o = {NULL, -1, 0, 7, 0, NULL, NULL, NULL};
    const char *json_path = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("%s", k_usage_bench);
            return 0;
        }
        if (strcmp(a, "--quick") == 0) {
            o.quick = 1;
            continue;
        }
        if (i + 1 >= argc) return usage_error(k_usage_bench, "unexpected or incomplete argument '%s'", a);
        const char *v = argv[++i];
        if (strcmp(a, "--format") == 0) {
            if (!format_known(v)) return usage_error(k_usage_bench, "unknown format '%s' (see qgold list)", v);
            o.format = v;
        } else if (strcmp(a, "--backend") == 0) {
            if ((o.backend = qg_backend_from_name(v)) < 0) return usage_error(k_usage_bench, "unknown backend '%s'", v);
        } else if (strcmp(a, "--reps") == 0) {
            o.reps = atoi(v);
            if (o.reps < 7 || o.reps > 63) return usage_error(k_usage_bench, "--reps must be 7..63, got '%s'", v);
        } else if (strcmp(a, "--threads") == 0) {
            o.threads = atoi(v);
            if (o.threads < 1 || o.threads > 256) return usage_error(k_usage_bench, "--threads must be 1..256, got '%s'", v);
        } else if (strcmp(a, "--json") == 0) {
            json_path = v;
        } else if (strcmp(a, "--shapes") == 0) {
            o.shapes = v;
        } else if (strcmp(a, "--batches") == 0) {
            o.batches = v;
        } else {
            return usage_error(k_usage_bench, "unexpected argument '%s'", a);
        }
    }
    if (o.format == NULL) return usage_error(k_usage_bench, "%s", "--format is required");
    char why[300];
    const int bad = qg_bench_check(&o, why, sizeof why);
    if (bad == 2) return usage_error(k_usage_bench, "%s", why);
    if (bad) {
        fprintf(stderr, "qgold: %s\n", why);
        return 1;
    }
    if (o.quick) o.reps = 3;
    o.json = json_path;
    return qg_bench_run(&o) ? 1 : 0;
}

/* Reads a whole file; NULL (with a message) when it cannot, or when its size is not `want`. */
static void *read_exact(const char *path, size_t want, const char *what)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL) {
        fprintf(stderr, "qgold: cannot open %s\n", path);
        return NULL;
    }
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    if (size < 0 || (size_t)size != want) {
        fprintf(stderr, "qgold: %s has %ld bytes, expected %zu (%s)\n", path, size, want, what);
        fclose(fp);
        return NULL;
    }
    void *buf = malloc(want ? want : 1);
    if (buf == NULL || fread(buf, 1, want, fp) != want) {
        fprintf(stderr, "qgold: cannot read %s\n", path);
        free(buf);
        buf = NULL;
    }
    fclose(fp);
    return buf;
}

static int write_all(const char *path, const void *buf, size_t n)
{
    FILE *fp = fopen(path, "wb");
    if (fp == NULL || fwrite(buf, 1, n, fp) != n || fclose(fp) != 0) {
        fprintf(stderr, "qgold: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

typedef struct {
    const char *format, *in, *out, *backend;
    long long rows, cols;
} kq_io_args;

static int parse_kq_io(int argc, char **argv, const char *usage, int allow_backend, kq_io_args *a, int *help)
{
    memset(a, 0, sizeof *a);
    *help = 0;
    for (int i = 0; i < argc; i++) {
        const char *k = argv[i];
        if (strcmp(k, "--help") == 0 || strcmp(k, "-h") == 0) {
            printf("%s", usage);
            *help = 1;
            return 0;
        }
        if (i + 1 >= argc) return usage_error(usage, "option %s needs a value", k);
        const char *v = argv[++i];
        char *end = NULL;
        if (strcmp(k, "--format") == 0) a->format = v;
        else if (strcmp(k, "--in") == 0) a->in = v;
        else if (strcmp(k, "--out") == 0) a->out = v;
        else if (strcmp(k, "--backend") == 0 && allow_backend) a->backend = v;
        else if (strcmp(k, "--rows") == 0 || strcmp(k, "--cols") == 0) {
            long long n = strtoll(v, &end, 10);
            if (end == v || *end != '\0' || n <= 0 || n > (1LL << 40)) return usage_error(usage, "%s must be a positive integer", k);
            if (k[2] == 'r') a->rows = n;
            else a->cols = n;
        } else return usage_error(usage, "unexpected argument '%s'", k);
    }
    if (!a->format || !a->in || !a->out || !a->rows || !a->cols)
        return usage_error(usage, "%s", "--format, --rows, --cols, --in and --out are required");
    if (qg_kq_from_name(a->format) < 0) return usage_error(usage, "unknown K-quant format '%s' (q4_k, q5_k, q6_k, q8_k)", a->format);
    return 0;
}

/* Shape errors get the reference's named error and a sentence about this invocation. */
static int kq_shape_error(int rc, const kq_io_args *a)
{
    fprintf(stderr, "qgold: %s: %s (rows %lld, cols %lld)\n", qg_error_name(rc), qg_error_message(rc), a->rows, a->cols);
    return 1;
}

static int cmd_quantize(int argc, char **argv)
{
    kq_io_args a;
    int help, rc = parse_kq_io(argc, argv, k_usage_quantize, 0, &a, &help);
    if (rc || help) return rc;
    qg_ktype t = (qg_ktype)qg_kq_from_name(a.format);
    size_t rows = (size_t)a.rows, cols = (size_t)a.cols;
    if (cols % QG_QK_K != 0) return kq_shape_error(QG_ERR_kq_cols_not_multiple, &a);
    size_t nbytes = rows * (cols / QG_QK_K) * qg_kq_block_bytes(t);
    float *x = read_exact(a.in, rows * cols * 4, "rows * cols float32 values");
    if (x == NULL) return 1;
    uint8_t *blocks = malloc(nbytes);
    rc = blocks ? qg_kq_quantize_ref(t, x, rows, cols, blocks, nbytes) : QG_ERR_alloc_failed;
    if (rc != QG_ERR_ok) {
        free(x);
        free(blocks);
        return kq_shape_error(rc, &a);
    }
    rc = write_all(a.out, blocks, nbytes);
    if (!rc) printf("qgold: %zu x %zu float32 -> %zu bytes of %s (%zu blocks)\n", rows, cols, nbytes, a.format, nbytes / qg_kq_block_bytes(t));
    free(x);
    free(blocks);
    return rc;
}

static int cmd_dequant(int argc, char **argv)
{
    kq_io_args a;
    int help, rc = parse_kq_io(argc, argv, k_usage_dequant, 1, &a, &help);
    if (rc || help) return rc;
    qg_ktype t = (qg_ktype)qg_kq_from_name(a.format);
    int be = a.backend ? qg_backend_from_name(a.backend) : QG_BACKEND_REF;
    if (be < 0) return usage_error(k_usage_dequant, "unknown backend '%s' (ref, avx2, neon, cuda)", a.backend);
    const qg_kernel *k = qg_registry_find(qg_kq_name(t), "dequant", (qg_backend)be);
    char why[200];
    if (!qg_kernel_available(k, why, sizeof why)) {
        fprintf(stderr, "qgold: backend %s cannot dequantize %s here: %s\n", qg_backend_name((qg_backend)be), a.format, why);
        return 1;
    }
    size_t rows = (size_t)a.rows, cols = (size_t)a.cols;
    if (cols % QG_QK_K != 0) return kq_shape_error(QG_ERR_kq_cols_not_multiple, &a);
    size_t nbytes = rows * (cols / QG_QK_K) * qg_kq_block_bytes(t);
    uint8_t *blocks = read_exact(a.in, nbytes, "rows * cols/256 * block bytes");
    if (blocks == NULL) return 1;
    float *y = malloc(rows * cols * 4);
    rc = y ? k->fn.kq_dequant.f32(t, blocks, nbytes, rows, cols, y) : QG_ERR_alloc_failed;
    if (rc != QG_ERR_ok) {
        free(blocks);
        free(y);
        return kq_shape_error(rc, &a);
    }
    rc = write_all(a.out, y, rows * cols * 4);
    if (!rc) printf("qgold: %zu bytes of %s -> %zu x %zu float32 (%s)\n", nbytes, a.format, rows, cols, k->name);
    free(blocks);
    free(y);
    return rc;
}

static const char *k_usage_rans =
    "usage: qgold rans encode --rows M --cols K --in W.i8 --scales S.f32 --out F.rans [--predictor auto|0|1|2|3] [--checksums]\n"
    "       qgold rans decode --in F.rans --out W.i8\n"
    "       qgold rans check F.rans\n"
    "\n"
    "rANS-compressed int8 tiles (reference/spec/rans.md), reference coder. W.i8 holds M x K int8 codes\n"
    "row-major, S.f32 M float32 row scales, both raw little-endian. encode writes the pinned container\n"
    "(--predictor: one mode for every tile, default auto; --checksums: per-tile Adler-32). decode writes\n"
    "the M x K bytes back. check validates the structure and decodes every tile: prints OK and the\n"
    "compression ratio, or the error name and where it was found (exit 1).\n";

/* A whole file of any size; NULL (with a message) when it cannot be read. */
static uint8_t *read_any(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL) {
        fprintf(stderr, "qgold: cannot open %s\n", path);
        return NULL;
    }
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *buf = size >= 0 ? malloc((size_t)size + 1) : NULL;
    if (buf == NULL || fread(buf, 1, (size_t)size, fp) != (size_t)size) {
        fprintf(stderr, "qgold: cannot read %s\n", path);
        free(buf);
        buf = NULL;
    } else {
        *n = (size_t)size;
    }
    fclose(fp);
    return buf;
}

static int rans_fail(const char *path, int rc, const char *where)
{
    fprintf(stderr, "qgold: %s: %s in %s: %s\n", path, qg_error_name(rc), where, qg_error_message(rc));
    return 1;
}

/* Where a structural error sits, by its kind. */
static const char *rans_where(int rc)
{
    switch (rc) {
    case QG_ERR_rans_bad_magic: return "the magic (bytes 0-3)";
    case QG_ERR_rans_bad_header: return "the header (bytes 0-63)";
    case QG_ERR_rans_bad_table: return "the frequency table (bytes 64-575)";
    case QG_ERR_rans_bad_tile_meta: return "the tile metadata or region layout";
    case QG_ERR_rans_bad_state: return "a tile's initial states";
    default: return "the container";
    }
}

static int rans_check_file(const char *path)
{
    size_t len = 0;
    uint8_t *buf = read_any(path, &len);
    if (buf == NULL) return 1;
    qg_rans_header h;
    int rc = qg_rans_check(buf, len, &h);
    if (rc != QG_ERR_ok) {
        free(buf);
        return rans_fail(path, rc, rans_where(rc));
    }
    uint8_t *tile = malloc((size_t)QG_RANS_TILE * QG_RANS_TILE);
    const size_t n = (size_t)h.tiles_r * h.tiles_c;
    for (size_t k = 0; k < n && tile != NULL && rc == QG_ERR_ok; k++) {
        rc = qg_rans_decode_tile_ref(buf, len, &h, k, tile);
        if (rc != QG_ERR_ok) {
            char where[96];
            snprintf(where, sizeof where, "tile %zu (row %zu, column %zu of %u x %u tiles)", k, k / h.tiles_c, k % h.tiles_c,
                     h.tiles_r, h.tiles_c);
            rans_fail(path, rc, where);
        }
    }
    if (tile == NULL) rc = QG_ERR_alloc_failed;
    if (rc == QG_ERR_ok) {
        const double raw = (double)h.M * (double)h.K;
        printf("OK %s: %u x %u int8, %zu tiles, %zu bytes, ratio %.4f (container / raw int8)\n", path, h.M, h.K, n, len,
               raw > 0 ? (double)len / raw : 0.0);
    }
    free(tile);
    free(buf);
    return rc == QG_ERR_ok ? 0 : 1;
}

static int cmd_rans(int argc, char **argv)
{
    if (argc < 1) return usage_error(k_usage_rans, "%s", "rans needs a subcommand (encode, decode, check)");
    const char *sub = argv[0];
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
        printf("%s", k_usage_rans);
        return 0;
    }
    if (strcmp(sub, "encode") != 0 && strcmp(sub, "decode") != 0 && strcmp(sub, "check") != 0)
        return usage_error(k_usage_rans, "unknown rans subcommand '%s'", sub);
    const char *in = NULL, *out = NULL, *scales = NULL, *pred = NULL, *file = NULL;
    long long rows = -1, cols = -1;
    int checksums = 0;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (strcmp(k, "--help") == 0 || strcmp(k, "-h") == 0) {
            printf("%s", k_usage_rans);
            return 0;
        }
        if (strcmp(sub, "check") == 0 && k[0] != '-' && file == NULL) {
            file = k;
            continue;
        }
        if (strcmp(sub, "encode") == 0 && strcmp(k, "--checksums") == 0) {
            checksums = 1;
            continue;
        }
        if (k[0] != '-' || (strcmp(sub, "check") == 0)) return usage_error(k_usage_rans, "unexpected argument '%s'", k);
        if (i + 1 >= argc) return usage_error(k_usage_rans, "option %s needs a value", k);
        const char *v = argv[++i];
        const int enc = strcmp(sub, "encode") == 0;
        if (strcmp(k, "--in") == 0) in = v;
        else if (strcmp(k, "--out") == 0) out = v;
        else if (enc && strcmp(k, "--scales") == 0) scales = v;
        else if (enc && strcmp(k, "--predictor") == 0) pred = v;
        else if (enc && (strcmp(k, "--rows") == 0 || strcmp(k, "--cols") == 0)) {
            char *end = NULL;
            long long n = strtoll(v, &end, 10);
            if (end == v || *end != '\0' || n < 0 || n > 0xFFFFFFFFLL)
                return usage_error(k_usage_rans, "%s must be an integer in 0..2^32-1", k);
            if (k[2] == 'r') rows = n;
            else cols = n;
        } else return usage_error(k_usage_rans, "unexpected argument '%s'", k);
    }
    if (strcmp(sub, "check") == 0) {
        if (file == NULL) return usage_error(k_usage_rans, "%s", "rans check needs a file");
        return rans_check_file(file);
    }
    if (strcmp(sub, "decode") == 0) {
        if (in == NULL || out == NULL) return usage_error(k_usage_rans, "%s", "rans decode needs --in and --out");
        size_t len = 0;
        uint8_t *buf = read_any(in, &len);
        if (buf == NULL) return 1;
        qg_rans_header h;
        int rc = qg_rans_check(buf, len, &h);
        if (rc != QG_ERR_ok) {
            free(buf);
            return rans_fail(in, rc, rans_where(rc));
        }
        const size_t n = (size_t)h.M * h.K;
        uint8_t *w = malloc(n ? n : 1);
        rc = w ? qg_rans_decode_ref(buf, len, w, n) : QG_ERR_alloc_failed;
        if (rc != QG_ERR_ok) rans_fail(in, rc, "decoding (qgold rans check names the tile)");
        else if ((rc = write_all(out, w, n)) == 0) printf("qgold: %zu bytes of rans -> %u x %u int8\n", len, h.M, h.K);
        free(buf);
        free(w);
        return rc ? 1 : 0;
    }
    if (in == NULL || out == NULL || scales == NULL || rows < 0 || cols < 0)
        return usage_error(k_usage_rans, "%s", "rans encode needs --rows, --cols, --in, --scales and --out");
    int mode = QG_RANS_AUTO;
    if (pred != NULL && strcmp(pred, "auto") != 0) {
        if (strlen(pred) != 1 || pred[0] < '0' || pred[0] > '3')
            return usage_error(k_usage_rans, "--predictor takes auto, 0, 1, 2 or 3, got '%s'", pred);
        mode = pred[0] - '0';
    }
    const uint32_t M = (uint32_t)rows, K = (uint32_t)cols;
    const size_t n = (size_t)M * K, ntiles = (size_t)((M + 255ull) / 256) * (size_t)((K + 255ull) / 256);
    uint8_t *w = read_exact(in, n, "rows * cols int8 codes");
    float *sc = w ? read_exact(scales, (size_t)M * 4, "rows float32 scales") : NULL;
    uint8_t *modes = malloc(ntiles ? ntiles : 1), *c = NULL;
    size_t len = 0;
    int rc = 1;
    if (w != NULL && sc != NULL && modes != NULL) {
        memset(modes, mode, ntiles);
        rc = qg_rans_encode(w, sc, M, K, modes, checksums, &c, &len);
        if (rc != QG_ERR_ok) rc = rans_fail(in, rc, "encoding");
        else if ((rc = write_all(out, c, len)) == 0)
            printf("qgold: %u x %u int8 -> %zu bytes of rans, ratio %.4f\n", M, K, len, n ? (double)len / (double)n : 0.0);
    }
    free(w);
    free(sc);
    free(modes);
    free(c);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "%s", k_usage_main);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        printf("%s", k_usage_main);
        return 0;
    }
    if (strcmp(cmd, "list") == 0) return cmd_list(argc - 2, argv + 2);
    if (strcmp(cmd, "audit") == 0) return cmd_audit(argc - 2, argv + 2);
    if (strcmp(cmd, "bench") == 0) return cmd_bench(argc - 2, argv + 2);
    if (strcmp(cmd, "quantize") == 0) return cmd_quantize(argc - 2, argv + 2);
    if (strcmp(cmd, "dequant") == 0) return cmd_dequant(argc - 2, argv + 2);
    if (strcmp(cmd, "rans") == 0) return cmd_rans(argc - 2, argv + 2);
    return usage_error(k_usage_main, "unknown command '%s'", cmd);
}
