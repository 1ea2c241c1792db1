/* qgold: the command-line front of the suite.
 *
 *   qgold list                      what is registered and whether it can run here
 *   qgold audit [options]           every registered kernel over every shipped fixture
 *   qgold bench, quantize, dequant, rans   see k_usage_main
 *
 * Exit status, every command: 0 success; 1 a failure (a check failed, a file could not be read or
 * written or has the wrong size, invalid data); 2 wrong arguments (unknown or malformed option, a shape
 * the format does not allow, input and output the same file, an invalid QG_FORCE_ISA).
 * Outputs are replaced atomically (atomic_write.h): after a failure the previous file is unchanged.
 */
#include "atomic_write.h"
#include "audit.h"
#include "bench.h"
#include "cli.h"
#include "cmds.h"
#include "qgold/cpu_features.h"
#include "qgold/errors.h"
#include "qgold/kquants.h"
#include "qgold/rans.h"
#include "qgold/registry.h"
#if QG_HAVE_CUDA
#include "qgold/cuda.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The install layout's golden/ relative to the binary's directory (set by CMake from GNUInstallDirs). */
#ifndef QG_GOLDEN_REL
#define QG_GOLDEN_REL "../share/qgold/golden"
#endif

/* Under AddressSanitizer a failed allocation returns NULL as in other builds, so that the CLI reports
 * alloc_failed instead of aborting. */
#if defined(__SANITIZE_ADDRESS__)
#define QG_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QG_ASAN 1
#endif
#endif
#ifdef QG_ASAN
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
#endif


static const char *k_usage_head = "usage: qgold <command> [options]\n\ncommands:\n";
static const char *k_usage_tail =
    "\n"
    "qgold <command> --help shows the options of a command. Output files are replaced only when complete\n"
    "(written to a temporary file in the same directory, then renamed): a failed run leaves them unchanged.\n"
    "Environment: QG_FORCE_ISA=scalar|avx2|neon limits the CPU kernels; QGOLD_GOLDEN names the fixture\n"
    "directory (see qgold audit --help).\n"
    QG_EXIT_STATUS;

static const char *k_usage_list =
    "usage: qgold list [--format F]\n"
    "\n"
    "Lists every registered kernel: format, path, backend, tier, availability here (and why not).\n"
    "  --format F   only format F\n"
    QG_EXIT_STATUS;

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
    "  --golden DIR   fixture directory. Default: $QGOLD_GOLDEN if set, else found from the executable's\n"
    "                 directory BIN: the directory named in BIN/qgold-golden.path (a build tree: the\n"
    "                 source tree's golden/), BIN/" QG_GOLDEN_REL " (installed), BIN/../golden\n"
    "  --json FILE    also write the rows as JSON to FILE\n"
    "Exit status: 0 all pass (skips allowed), 1 any failure, unreadable fixture, no fixture directory, no\n"
    "MANIFEST (without --no-manifest) or nothing audited, 2 wrong arguments.\n";

static const char *k_usage_bench =
    "usage: qgold bench --format F [--backend B] [--reps N] [--threads N] [--shapes RxK,...] [--batches B,...]\n"
    "                   [--quick] [--json FILE]\n"
    "       qgold bench --plugin PATH.so [--format F] [--reps N] [--quick] [--json FILE]\n"
    "\n"
    "Times every available kernel of format F. Each figure is the median of N repetitions (default 7) with\n"
    "its min and max; efficiency is relative to a bandwidth measured in the same run (CPU: multi-threaded\n"
    "streaming read, BW_read; GPU: device-to-device copy, BW_copy, bytes read + written).\n"
    "  --format F     format to measure (see qgold list)\n"
    "  --backend B    only backend B: ref, avx2, neon, cuda\n"
    "  --reps N       repetitions per figure (7 to 63)\n"
    "  --threads N    CPU threads, 1 to 256 (default: all online CPUs)\n"
    "  --shapes L     GEMV shapes RxK (R out, K in) instead of the standard ones, e.g. 8192x8192,28672x8192:\n"
    "                 at most 16, R and K in 1..2147483647, and per format (else exit 2)\n"
    "                   q4_k q5_k q6_k q8_k  K a multiple of 256\n"
    "                   spqr                 R a multiple of 16, at most 16777216; K at most 65536\n"
    "                   rans                 no further rule\n"
    "                   fp16                 none accepted (nor --batches): fixed-size conversions\n"
    "  --batches L    batches instead of the format's standard ones, e.g. 1,16: at most 16 values, each at\n"
    "                 most the format's largest (spqr, rans, int8 W8A16: 16; K-quants: 64, the CUDA gemm\n"
    "                 path; int4: 4096, the CUDA W4A16); a path that takes fewer prints '# skip' for the rest\n"
    "  --quick        small sizes and 3 repetitions: checks the harness runs, measures nothing\n"
    "  --json FILE    also write the rows and the machine notes as JSON, only after a run that measured\n"
    "                 something and failed nowhere (a failed run leaves FILE unchanged)\n"
    "  --plugin PATH  a kernel plugin (qgold/plugin.h): verified first exactly as by qgold verify --plugin (its\n"
    "                 table is printed; a plugin that fails is not timed, exit 1), then each verified dequant,\n"
    "                 dot and GEMV kernel (of format F only, with --format) is timed beside qgold's own kernel\n"
    "                 of its format and path, same data, same run: CPU kernels on 1 and all threads against\n"
    "                 BW_read; CUDA kernels on device pointers beside qgold's CUDA kernel and cuBLAS fp16,\n"
    "                 against BW_copy. Not with --backend, --threads, --shapes, --batches\n"
    "A --backend not built into this binary, or with no kernel for F, is a usage error (exit 2); one built\n"
    "but unable to run here (no GPU, CPU feature missing, QG_FORCE_ISA) is a failure (exit 1).\n"
    QG_INT_OPTIONS QG_EXIT_STATUS;

static const char *k_usage_quantize =
    "usage: qgold quantize --format F --rows R --cols K --in values.f32 --out blocks.bin [--strict]\n"
    "\n"
    "Quantizes R x K float32 values (raw little-endian, row-major) into GGUF blocks of format F\n"
    "(q4_k, q5_k, q6_k, q8_k) with the reference quantizer (bit-exact with ggml's quantize_row_*_ref).\n"
    "R and K are 1..2^40, K a multiple of 256 (else exit 2); the input must hold exactly R*K*4 bytes.\n"
    "Blocks the quantizer cannot represent (NaN or inf; magnitudes or spreads beyond its float32 fit, its\n"
    "exact rounding (|v| <= 4194303) or its fp16 scales) are still written as ggml writes them, with a\n"
    "warning (kq_input_out_of_domain) naming the first such row and block and their count.\n"
    "  --strict       make such blocks an error instead (kq_input_out_of_domain, exit 1, no output)\n"
    QG_INT_OPTIONS QG_EXIT_STATUS;

static const char *k_usage_dequant =
    "usage: qgold dequant --format F --rows R --cols K --in blocks.bin --out values.f32 [--backend B]\n"
    "\n"
    "Dequantizes R rows of K elements of GGUF blocks of format F (q4_k, q5_k, q6_k, q8_k) to float32\n"
    "(raw little-endian, row-major). R and K are 1..2^40, K a multiple of 256 (else exit 2). The input\n"
    "must hold exactly R*(K/256)*block-bytes bytes.\n"
    "  --backend B    ref (default), avx2, neon or cuda: every backend gives the same bits\n"
    QG_INT_OPTIONS QG_EXIT_STATUS;

int qgc_usage_error(const char *usage, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "qgold: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n\n%s", usage);
    return 2;
}

/* The one parser of numeric options: decimal digits only (no sign, space, prefix or suffix), the value
 * in lo..hi; 64-bit overflow is detected, never wrapped. */
int qgc_parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    uint64_t v = 0;
    if (s == NULL || *s == '\0') return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        const uint64_t d = (uint64_t)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    if (v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int qgc_bad_number(const char *usage, const char *opt, const char *v, uint64_t lo, uint64_t hi)
{
    return qgc_usage_error(usage, "%s must be an integer in %llu..%llu, got '%s'", opt, (unsigned long long)lo, (unsigned long long)hi, v);
}

/* Whether option a is one of the NULL-terminated list (the options that take a value). */
int qgc_takes_value(const char *a, const char *const *list)
{
    for (; *list != NULL; list++)
        if (strcmp(a, *list) == 0) return 1;
    return 0;
}

static const char *const k_bench_value_opts[] = {"--format", "--backend", "--reps", "--threads", "--json", "--shapes", "--batches", "--plugin", NULL};

/* a * b into *out; -1 (and *out untouched) when the product does not fit in size_t. */
int qgc_mul_size(size_t a, size_t b, size_t *out)
{
    size_t r;
    if (__builtin_mul_overflow(a, b, &r)) return -1;
    *out = r;
    return 0;
}

/* An invalid QG_FORCE_ISA is a usage error of every command, with the registry's one message. */
int qgc_forced_isa_error(void)
{
    char msg[160];
    if (qg_forced_isa_error(msg, sizeof msg) == NULL) return 0;
    fprintf(stderr, "qgold: %s\n", msg);
    return 2;
}

/* Writes buf to path atomically; 1 with the reason on failure. */
int qgc_write_output(const char *path, const void *buf, size_t n)
{
    int e = qg_atomic_write(path, buf, n);
    if (e == 0) return 0;
    fprintf(stderr, "qgold: %s: cannot write %s: %s\n", qg_error_name(QG_ERR_io_failed), path, strerror(e));
    return 1;
}

/* Whether two paths name one existing file (hard links and other spellings included). */
int qgc_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (a == NULL || b == NULL || stat(a, &sa) != 0 || stat(b, &sb) != 0) return 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int qgc_refuse_same_file(const char *usage, const char *in_opt, const char *in, const char *out)
{
    return qgc_usage_error(usage, "%s %s and --out %s are the same file (the output would destroy the input)", in_opt, in, out);
}

/* Reads a whole input. want: the exact byte count required, or SIZE_MAX for any (*got receives the
 * count; may be NULL). Regular files are sized first, so nothing is allocated for a file of the wrong
 * size; pipes and devices are read to their end. NULL, with a named error, on any failure. */
void *qgc_read_input(const char *path, size_t want, const char *what, size_t *got)
{
    const char *io = qg_error_name(QG_ERR_io_failed);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "qgold: %s: cannot open %s: %s\n", io, path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        fprintf(stderr, "qgold: %s: cannot read %s: %s\n", io, path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (S_ISDIR(st.st_mode)) {
        fprintf(stderr, "qgold: %s: %s is a directory, not a file\n", io, path);
        close(fd);
        return NULL;
    }
    const int regular = S_ISREG(st.st_mode);
    size_t cap = 1 << 16, n = 0;
    if (regular) {
        if ((uintmax_t)st.st_size >= (uintmax_t)SIZE_MAX) {
            fprintf(stderr, "qgold: %s: %s is too large to read (%jd bytes)\n", qg_error_name(QG_ERR_alloc_failed), path, (intmax_t)st.st_size);
            close(fd);
            return NULL;
        }
        cap = (size_t)st.st_size;
        if (want != SIZE_MAX && cap != want) {
            fprintf(stderr, "qgold: %s: %s has %zu bytes, expected %zu (%s)\n", qg_error_name(QG_ERR_size_mismatch), path, cap, want, what);
            close(fd);
            return NULL;
        }
    } else if (want != SIZE_MAX) {
        cap = want;
    }
    uint8_t *buf = malloc(cap + 1); /* + 1: a non-empty buffer, and room to see a pipe run past want */
    if (buf == NULL) {
        fprintf(stderr, "qgold: %s: memory allocation failed (%zu bytes for %s)\n", qg_error_name(QG_ERR_alloc_failed), cap + 1, path);
        close(fd);
        return NULL;
    }
    for (;;) {
        if (n == cap + 1 || (regular && n == cap)) break;
        ssize_t r = read(fd, buf + n, cap + 1 - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            fprintf(stderr, "qgold: %s: cannot read %s: %s\n", io, path, strerror(errno));
            free(buf);
            close(fd);
            return NULL;
        }
        if (r == 0) break;
        n += (size_t)r;
        if (n == cap + 1 && !regular && want == SIZE_MAX) { /* a stream of unknown length: grow */
            uint8_t *nb = cap <= SIZE_MAX / 2 - 1 ? realloc(buf, 2 * cap + 1) : NULL;
            if (nb == NULL) {
                fprintf(stderr, "qgold: %s: memory allocation failed reading %s\n", qg_error_name(QG_ERR_alloc_failed), path);
                free(buf);
                close(fd);
                return NULL;
            }
            buf = nb;
            cap = 2 * cap;
        }
    }
    close(fd);
    if (regular && n != cap) {
        fprintf(stderr, "qgold: %s: cannot read %s: it shrank to %zu bytes while being read\n", io, path, n);
        free(buf);
        return NULL;
    }
    if (want != SIZE_MAX && n != want) {
        if (n > want)
            fprintf(stderr, "qgold: %s: %s has more than %zu bytes, expected %zu (%s)\n", qg_error_name(QG_ERR_size_mismatch), path, want, want, what);
        else
            fprintf(stderr, "qgold: %s: %s has %zu bytes, expected %zu (%s)\n", qg_error_name(QG_ERR_size_mismatch), path, n, want, what);
        free(buf);
        return NULL;
    }
    if (got != NULL) *got = n;
    return buf;
}

/* ---- the fixture directory ------------------------------------------------------------------------ */

static const char *g_argv0;

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The executable's directory (from /proc/self/exe, else argv[0]) into buf; 0 on success. */
static int exe_dir(char *buf, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", buf, len - 1);
    if (n > 0 && (size_t)n < len - 1) {
        buf[n] = '\0';
    } else {
        char *r = g_argv0 != NULL && strchr(g_argv0, '/') != NULL ? realpath(g_argv0, NULL) : NULL;
        if (r == NULL || strlen(r) >= len) {
            free(r);
            return -1;
        }
        strcpy(buf, r);
        free(r);
    }
    char *slash = strrchr(buf, '/');
    if (slash == NULL) return -1;
    slash[slash == buf ? 1 : 0] = '\0';
    return 0;
}

/* The default of --golden (see k_usage_audit) into buf; 0, or 1 with a message naming every place tried. */
int qgc_find_golden(char *buf, size_t len)
{
    const char *env = getenv("QGOLD_GOLDEN");
    if (env != NULL && env[0] != '\0') {
        if (is_dir(env) && strlen(env) < len) {
            strcpy(buf, env);
            return 0;
        }
        fprintf(stderr, "qgold: QGOLD_GOLDEN=%s is not a directory\n", env);
        return 1;
    }
    char dir[4096], tried[3 * 4200] = "", cand[4200];
    if (exe_dir(dir, sizeof dir) != 0) {
        fprintf(stderr, "qgold: no fixture directory: QGOLD_GOLDEN is unset and the executable's directory is unknown; "
                        "pass --golden DIR\n");
        return 1;
    }
    /* 1: the build tree's marker, one line naming the directory */
    snprintf(cand, sizeof cand, "%s/qgold-golden.path", dir);
    FILE *fp = fopen(cand, "r");
    if (fp != NULL) {
        char line[4096] = "";
        if (fgets(line, sizeof line, fp) != NULL) line[strcspn(line, "\r\n")] = '\0';
        fclose(fp);
        if (line[0] != '\0' && is_dir(line) && strlen(line) < len) {
            strcpy(buf, line);
            return 0;
        }
        snprintf(tried + strlen(tried), sizeof tried - strlen(tried), "%s (names '%s', not a directory)", cand, line);
    } else {
        snprintf(tried + strlen(tried), sizeof tried - strlen(tried), "%s (absent)", cand);
    }
    /* 2, 3: installed, then a golden/ beside bin/ */
    const char *rel[2] = {QG_GOLDEN_REL, "../golden"};
    for (int i = 0; i < 2; i++) {
        snprintf(cand, sizeof cand, "%s/%s", dir, rel[i]);
        if (is_dir(cand) && strlen(cand) < len) {
            strcpy(buf, cand);
            return 0;
        }
        snprintf(tried + strlen(tried), sizeof tried - strlen(tried), ", %s", cand);
    }
    fprintf(stderr, "qgold: no fixture directory found: QGOLD_GOLDEN is unset; tried %s; pass --golden DIR or set QGOLD_GOLDEN\n",
            tried);
    return 1;
}

int qgc_format_known(const char *f)
{
    for (size_t i = 0; i < qg_registry_count(); i++)
        if (strcmp(qg_registry_at(i)->format, f) == 0) return 1;
    return 0;
}

const char *qgc_tier_name(qg_tier t) { return t == QG_TIER_EXACT ? "exact" : "bounded"; }

static int cmd_list(int argc, char **argv)
{
    const char *format = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("%s", k_usage_list);
            return 0;
        } else if (strcmp(argv[i], "--format") == 0) {
            if (i + 1 >= argc) return qgc_usage_error(k_usage_list, "option %s needs a value", argv[i]);
            format = argv[++i];
            if (!qgc_format_known(format)) return qgc_usage_error(k_usage_list, "unknown format '%s'", format);
        } else {
            return qgc_usage_error(k_usage_list, "unexpected argument '%s'", argv[i]);
        }
    }
    printf("%-8s %-14s %-6s %-8s %-11s %s\n", "format", "path", "backend", "tier", "status", "kernel / reason");
    for (size_t i = 0; i < qg_registry_count(); i++) {
        const qg_kernel *k = qg_registry_at(i);
        if (format != NULL && strcmp(k->format, format) != 0) continue;
        char why[200] = "";
        int ok = qg_kernel_available(k, why, sizeof why);
        printf("%-8s %-14s %-6s  %-8s %-11s %s\n", k->format, k->path, qg_backend_name(k->backend), qgc_tier_name(k->numerics.tier),
               ok ? "available" : "unavailable", ok ? k->name : why);
    }
    return 0;
}



void qgc_json_str(FILE *fp, const char *s)
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

const char *qgc_verdict_name(qg_audit_verdict v) { return v == QG_AUDIT_PASS ? "PASS" : v == QG_AUDIT_FAIL ? "FAIL" : "SKIP"; }

void qgc_table_header(void)
{
    printf("%-7s %-12s %-7s %-24s %6s %10s  %-7s %-7s %s\n", "format", "path", "backend", "file", "cases", "elements", "tier", "worst",
           "verdict");
}

void qgc_print_row(const qg_audit_row *r, void *vctx)
{
    sink_ctx *c = vctx;
    char ratio[32] = "-";
    if (r->verdict != QG_AUDIT_SKIP && r->tier == QG_TIER_BOUNDED) snprintf(ratio, sizeof ratio, "%.3f", r->worst_ratio);
    printf("%-7s %-12s %-7s %-24s %6zu %10zu  %-7s %-7s %s\n", r->format, r->path, r->backend, r->file, r->cases, r->elements,
           r->verdict == QG_AUDIT_SKIP ? "-" : qgc_tier_name(r->tier), ratio, qgc_verdict_name(r->verdict));
    if (r->verdict != QG_AUDIT_PASS) printf("        %s\n", r->detail);
    fflush(stdout);
    if (c->json != NULL) {
        fprintf(c->json, "%s\n    {\"format\": ", c->first ? "" : ",");
        qgc_json_str(c->json, r->format);
        fprintf(c->json, ", \"path\": ");
        qgc_json_str(c->json, r->path);
        fprintf(c->json, ", \"backend\": ");
        qgc_json_str(c->json, r->backend);
        fprintf(c->json, ", \"kernel\": ");
        qgc_json_str(c->json, r->kernel);
        fprintf(c->json, ", \"file\": ");
        qgc_json_str(c->json, r->file);
        fprintf(c->json, ", \"cases\": %zu, \"elements\": %zu, \"tier\": \"%s\", \"worst_ratio\": %.17g, \"verdict\": \"%s\", \"detail\": ",
                r->cases, r->elements, qgc_tier_name(r->tier), r->worst_ratio, qgc_verdict_name(r->verdict));
        qgc_json_str(c->json, r->detail);
        fprintf(c->json, "}");
        c->first = 0;
    }
}

static int cmd_audit(int argc, char **argv)
{
    qg_audit_opts o = {NULL, NULL, -1, 0};
    const char *json_path = NULL;
    char golden[4096];
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("%s", k_usage_audit);
            return 0;
        }
        if (i + 1 >= argc && (strcmp(a, "--format") == 0 || strcmp(a, "--backend") == 0 || strcmp(a, "--golden") == 0 ||
                              strcmp(a, "--json") == 0))
            return qgc_usage_error(k_usage_audit, "option %s needs a value", a);
        if (strcmp(a, "--format") == 0) {
            o.format = argv[++i];
            if (!qgc_format_known(o.format)) return qgc_usage_error(k_usage_audit, "unknown format '%s' (see qgold list)", o.format);
        } else if (strcmp(a, "--backend") == 0) {
            o.backend = qg_backend_from_name(argv[++i]);
            if (o.backend < 0) return qgc_usage_error(k_usage_audit, "unknown backend '%s' (ref, avx2, neon, cuda)", argv[i]);
        } else if (strcmp(a, "--golden") == 0) {
            o.golden_dir = argv[++i];
        } else if (strcmp(a, "--json") == 0) {
            json_path = argv[++i];
        } else if (strcmp(a, "--no-manifest") == 0) {
            o.no_manifest = 1;
        } else {
            return qgc_usage_error(k_usage_audit, "unexpected argument '%s'", a);
        }
    }
    if (o.golden_dir == NULL) {
        if (qgc_find_golden(golden, sizeof golden) != 0) return 1;
        o.golden_dir = golden;
    }
    qg_err ge;
    if (qg_audit_check_golden(&o, &ge) != QG_ERR_ok) {
        fprintf(stderr, "qgold: %s%s\n", ge.msg, ge.code == QG_ERR_fixture_manifest_missing ? "; --no-manifest audits without it" : "");
        return 1;
    }
    sink_ctx c = {NULL, 1};
    qg_atomic_file jf;
    int e;
    if (json_path != NULL) {
        if ((e = qg_atomic_open(&jf, json_path)) != 0) {
            fprintf(stderr, "qgold: %s: cannot write %s: %s\n", qg_error_name(QG_ERR_io_failed), json_path, strerror(e));
            return 1;
        }
        c.json = jf.fp;
    }
    char gpu[256] = "none";
#if QG_HAVE_CUDA
    if (qg_cuda_device_count(NULL, 0) > 0) qg_cuda_describe(gpu, sizeof gpu);
#endif
    printf("qgold audit: golden %s; manifest: %s; cpu features:%s%s; gpu: %s\n", o.golden_dir,
           o.no_manifest ? "not checked (--no-manifest)" : "checked", (qg_cpu_features() & QG_CPU_AVX2) ? " avx2" : "",
           (qg_cpu_features() & QG_CPU_NEON) ? " neon" : "", gpu);
    qgc_table_header();
    if (c.json != NULL) {
        fprintf(c.json, "{\n  \"golden\": ");
        qgc_json_str(c.json, o.golden_dir);
        fprintf(c.json, ",\n  \"manifest\": \"%s\"", o.no_manifest ? "not checked" : "checked");
        fprintf(c.json, ",\n  \"gpu\": ");
        qgc_json_str(c.json, gpu);
        fprintf(c.json, ",\n  \"rows\": [");
    }
    qg_audit_summary s;
    int rc = qg_audit(&o, qgc_print_row, &c, &s);
    printf("\n%zu passed, %zu failed, %zu skipped%s\n", s.pass, s.fail, s.skip, o.no_manifest ? " (manifest: not checked)" : "");
    if (c.json != NULL) {
        fprintf(c.json, "\n  ],\n  \"passed\": %zu, \"failed\": %zu, \"skipped\": %zu\n}\n", s.pass, s.fail, s.skip);
        if ((e = qg_atomic_commit(&jf)) != 0) {
            fprintf(stderr, "qgold: %s: cannot write %s: %s\n", qg_error_name(QG_ERR_io_failed), json_path, strerror(e));
            rc = 1;
        }
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
    const char *json_path = NULL, *plugin = NULL;
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
        if (i + 1 >= argc) return qgc_usage_error(k_usage_bench, qgc_takes_value(a, k_bench_value_opts) ? "option %s needs a value" : "unexpected argument '%s'", a);
        const char *v = argv[++i];
        uint64_t num = 0;
        if (strcmp(a, "--format") == 0) {
            if (!qgc_format_known(v)) return qgc_usage_error(k_usage_bench, "unknown format '%s' (see qgold list)", v);
            o.format = v;
        } else if (strcmp(a, "--backend") == 0) {
            if ((o.backend = qg_backend_from_name(v)) < 0) return qgc_usage_error(k_usage_bench, "unknown backend '%s'", v);
        } else if (strcmp(a, "--reps") == 0) {
            if (qgc_parse_uint(v, 7, 63, &num) != 0) return qgc_bad_number(k_usage_bench, "--reps", v, 7, 63);
            o.reps = (int)num;
        } else if (strcmp(a, "--threads") == 0) {
            if (qgc_parse_uint(v, 1, 256, &num) != 0) return qgc_bad_number(k_usage_bench, "--threads", v, 1, 256);
            o.threads = (int)num;
        } else if (strcmp(a, "--json") == 0) {
            json_path = v;
        } else if (strcmp(a, "--shapes") == 0) {
            o.shapes = v;
        } else if (strcmp(a, "--batches") == 0) {
            o.batches = v;
        } else if (strcmp(a, "--plugin") == 0) {
            plugin = v;
        } else {
            return qgc_usage_error(k_usage_bench, "unexpected argument '%s'", a);
        }
    }
    if (plugin != NULL) {
        if (o.backend >= 0 || o.threads > 0 || o.shapes || o.batches)
            return qgc_usage_error(k_usage_bench, "%s", "--plugin takes only --format, --reps, --quick and --json");
        if (o.quick) o.reps = 3;
        o.json = json_path;
        return qgc_bench_plugin(plugin, &o);
    }
    if (o.format == NULL) return qgc_usage_error(k_usage_bench, "%s", "--format is required");
    char why[300];
    const int bad = qg_bench_check(&o, why, sizeof why);
    if (bad == 2) return qgc_usage_error(k_usage_bench, "%s", why);
    if (bad) {
        fprintf(stderr, "qgold: %s\n", why);
        return 1;
    }
    if (o.quick) o.reps = 3;
    o.json = json_path;
    return qg_bench_run(&o) ? 1 : 0;
}

typedef struct {
    const char *format, *in, *out, *backend;
    uint64_t rows, cols;
    int strict;
} kq_io_args;

/* quantize and dequant share their options; only quantize takes --strict, only dequant --backend. */
static int parse_kq_io(int argc, char **argv, const char *usage, int quantize, kq_io_args *a, int *help)
{
    static const char *const value_opts[] = {"--format", "--in", "--out", "--rows", "--cols", "--backend", NULL};
    memset(a, 0, sizeof *a);
    *help = 0;
    for (int i = 0; i < argc; i++) {
        const char *k = argv[i];
        if (strcmp(k, "--help") == 0 || strcmp(k, "-h") == 0) {
            printf("%s", usage);
            *help = 1;
            return 0;
        }
        if (quantize && strcmp(k, "--strict") == 0) {
            a->strict = 1;
            continue;
        }
        if (!qgc_takes_value(k, value_opts) || (quantize && strcmp(k, "--backend") == 0))
            return qgc_usage_error(usage, "unexpected argument '%s'", k);
        if (i + 1 >= argc) return qgc_usage_error(usage, "option %s needs a value", k);
        const char *v = argv[++i];
        if (strcmp(k, "--format") == 0) a->format = v;
        else if (strcmp(k, "--in") == 0) a->in = v;
        else if (strcmp(k, "--out") == 0) a->out = v;
        else if (strcmp(k, "--backend") == 0) a->backend = v;
        else if (qgc_parse_uint(v, 1, (uint64_t)1 << 40, strcmp(k, "--rows") == 0 ? &a->rows : &a->cols) != 0)
            return qgc_bad_number(usage, k, v, 1, (uint64_t)1 << 40);
    }
    if (!a->format || !a->in || !a->out || !a->rows || !a->cols)
        return qgc_usage_error(usage, "%s", "--format, --rows, --cols, --in and --out are required");
    if (qg_kq_from_name(a->format) < 0) return qgc_usage_error(usage, "unknown K-quant format '%s' (q4_k, q5_k, q6_k, q8_k)", a->format);
    if (qgc_same_file(a->in, a->out)) return qgc_refuse_same_file(usage, "--in", a->in, a->out);
    return 0;
}

/* A named error about this invocation's shape: exit 2 for a shape the format does not allow, else 1. */
static int kq_fail(int rc, const kq_io_args *a, const char *detail)
{
    fprintf(stderr, "qgold: %s: %s (rows %llu, cols %llu%s%s)\n", qg_error_name(rc), qg_error_message(rc), (unsigned long long)a->rows,
            (unsigned long long)a->cols, detail ? ": " : "", detail ? detail : "");
    return rc == QG_ERR_kq_cols_not_multiple || rc == QG_ERR_shape_invalid ? 2 : 1;
}

/* The sizes of a K-quant matrix: *values = rows * cols float32 bytes, *blocks = its block bytes. */
static int kq_sizes(qg_ktype t, const kq_io_args *a, size_t *values, size_t *blocks)
{
    size_t n;
    if (a->cols % QG_QK_K != 0) return kq_fail(QG_ERR_kq_cols_not_multiple, a, NULL);
    if (a->rows > SIZE_MAX || a->cols > SIZE_MAX || qgc_mul_size((size_t)a->rows, (size_t)a->cols, &n) != 0 ||
        qgc_mul_size(n, sizeof(float), values) != 0)
        return kq_fail(QG_ERR_shape_invalid, a, "rows * cols * 4 bytes do not fit in this machine's size_t");
    /* blocks <= values: a block is at most 292 bytes for 256 values of 4 bytes */
    if (qgc_mul_size((size_t)a->rows, (size_t)a->cols / QG_QK_K * qg_kq_block_bytes(t), blocks) != 0)
        return kq_fail(QG_ERR_shape_invalid, a, "the block bytes do not fit in this machine's size_t");
    return 0;
}

static int cmd_quantize(int argc, char **argv)
{
    kq_io_args a;
    int help, rc = parse_kq_io(argc, argv, k_usage_quantize, 1, &a, &help);
    if (rc || help) return rc;
    const qg_ktype t = (qg_ktype)qg_kq_from_name(a.format);
    size_t nvalues, nbytes;
    if ((rc = kq_sizes(t, &a, &nvalues, &nbytes)) != 0) return rc;
    const size_t rows = (size_t)a.rows, cols = (size_t)a.cols, per_row = cols / QG_QK_K;
    float *x = qgc_read_input(a.in, nvalues, "rows * cols float32 values", NULL);
    if (x == NULL) return 1;
    uint8_t *blocks = malloc(nbytes), *in_domain = malloc(rows * per_row);
    size_t outside = 0;
    rc = blocks && in_domain ? qg_kq_quantize_domain_ref(t, x, rows, cols, blocks, in_domain, &outside) : QG_ERR_alloc_failed;
    if (rc != QG_ERR_ok) {
        rc = kq_fail(rc, &a, NULL);
    } else if (outside > 0) {
        size_t first = 0;
        while (in_domain[first]) first++;
        char where[200];
        snprintf(where, sizeof where, "row %zu, block %zu (columns %zu..%zu); %zu of %zu blocks", first / per_row, first % per_row,
                 first % per_row * QG_QK_K, first % per_row * QG_QK_K + QG_QK_K - 1, outside, rows * per_row);
        if (a.strict) {
            fprintf(stderr, "qgold: %s: %s: first at %s; nothing written (--strict)\n", qg_error_name(QG_ERR_kq_input_out_of_domain),
                    qg_error_message(QG_ERR_kq_input_out_of_domain), where);
            rc = 1;
        } else {
            fprintf(stderr, "qgold: warning: %s: %s: first at %s (--strict makes this an error)\n",
                    qg_error_name(QG_ERR_kq_input_out_of_domain), qg_error_message(QG_ERR_kq_input_out_of_domain), where);
        }
    }
    if (rc == 0 && (rc = qgc_write_output(a.out, blocks, nbytes)) == 0)
        printf("qgold: %zu x %zu float32 -> %zu bytes of %s (%zu blocks)\n", rows, cols, nbytes, a.format, rows * per_row);
    free(x);
    free(blocks);
    free(in_domain);
    return rc;
}

static int cmd_dequant(int argc, char **argv)
{
    kq_io_args a;
    int help, rc = parse_kq_io(argc, argv, k_usage_dequant, 0, &a, &help);
    if (rc || help) return rc;
    const qg_ktype t = (qg_ktype)qg_kq_from_name(a.format);
    int be = a.backend ? qg_backend_from_name(a.backend) : QG_BACKEND_REF;
    if (be < 0) return qgc_usage_error(k_usage_dequant, "unknown backend '%s' (ref, avx2, neon, cuda)", a.backend);
    size_t nvalues, nbytes;
    if ((rc = kq_sizes(t, &a, &nvalues, &nbytes)) != 0) return rc;
    const qg_kernel *k = qg_registry_find(qg_kq_name(t), "dequant", (qg_backend)be);
    char why[200];
    if (!qg_kernel_available(k, why, sizeof why)) {
        fprintf(stderr, "qgold: %s: backend %s cannot dequantize %s here: %s\n", qg_error_name(QG_ERR_backend_unavailable),
                qg_backend_name((qg_backend)be), a.format, why);
        return 1;
    }
    const size_t rows = (size_t)a.rows, cols = (size_t)a.cols;
    uint8_t *blocks = qgc_read_input(a.in, nbytes, "rows * cols/256 * block bytes", NULL);
    if (blocks == NULL) return 1;
    float *y = malloc(nvalues);
    rc = y ? k->fn.kq_dequant.f32(t, blocks, nbytes, rows, cols, y) : QG_ERR_alloc_failed;
    if (rc != QG_ERR_ok) rc = kq_fail(rc, &a, NULL);
    else if ((rc = qgc_write_output(a.out, y, nvalues)) == 0)
        printf("qgold: %zu bytes of %s -> %zu x %zu float32 (%s)\n", nbytes, a.format, rows, cols, k->name);
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
    "(--predictor: one mode for every tile, default auto; --checksums: per-tile Adler-32 and a CRC-32\n"
    "of the whole file, so any changed byte is an error). decode writes the M x K bytes back. check\n"
    "validates the structure and decodes every tile: prints OK and the compression ratio (container\n"
    "bytes / M*K: tiles are 256 x 256 and each carries 1056 bytes of lane states, so a small matrix\n"
    "comes out larger than raw), or the error name and where it was found (exit 1). M and K are\n"
    "0..4294967295.\n"
    "--checksums applies to encode only: decode and check always verify the checksums a container\n"
    "carries, and refuse the option (exit 2).\n"
    QG_INT_OPTIONS QG_EXIT_STATUS;

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
    case QG_ERR_rans_container_checksum: return "the container checksum (bytes 56-63, over the whole file)";
    case QG_ERR_rans_container_truncated: return "the file length (shorter than its header says)";
    default: return "the container";
    }
}

static int rans_check_file(const char *path)
{
    size_t len = 0;
    uint8_t *buf = qgc_read_input(path, SIZE_MAX, "", &len);
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
    if (argc < 1) return qgc_usage_error(k_usage_rans, "%s", "rans needs a subcommand (encode, decode, check)");
    const char *sub = argv[0];
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
        printf("%s", k_usage_rans);
        return 0;
    }
    if (strcmp(sub, "encode") != 0 && strcmp(sub, "decode") != 0 && strcmp(sub, "check") != 0)
        return qgc_usage_error(k_usage_rans, "unknown rans subcommand '%s'", sub);
    const char *in = NULL, *out = NULL, *scales = NULL, *pred = NULL, *file = NULL;
    uint64_t rows = UINT64_MAX, cols = UINT64_MAX; /* UINT64_MAX: not given */
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
        if (strcmp(k, "--checksums") == 0) {
            if (strcmp(sub, "encode") != 0)
                return qgc_usage_error(k_usage_rans, "--checksums applies to encode; rans %s always verifies the checksums a container carries", sub);
            checksums = 1;
            continue;
        }
        if (k[0] != '-' || (strcmp(sub, "check") == 0)) return qgc_usage_error(k_usage_rans, "unexpected argument '%s'", k);
        if (i + 1 >= argc) return qgc_usage_error(k_usage_rans, "option %s needs a value", k);
        const char *v = argv[++i];
        const int enc = strcmp(sub, "encode") == 0;
        if (strcmp(k, "--in") == 0) in = v;
        else if (strcmp(k, "--out") == 0) out = v;
        else if (enc && strcmp(k, "--scales") == 0) scales = v;
        else if (enc && strcmp(k, "--predictor") == 0) pred = v;
        else if (enc && (strcmp(k, "--rows") == 0 || strcmp(k, "--cols") == 0)) {
            if (qgc_parse_uint(v, 0, UINT32_MAX, k[2] == 'r' ? &rows : &cols) != 0) return qgc_bad_number(k_usage_rans, k, v, 0, UINT32_MAX);
        } else return qgc_usage_error(k_usage_rans, "unexpected argument '%s'", k);
    }
    if (strcmp(sub, "check") == 0) {
        if (file == NULL) return qgc_usage_error(k_usage_rans, "%s", "rans check needs a file");
        return rans_check_file(file);
    }
    if (strcmp(sub, "decode") == 0) {
        if (in == NULL || out == NULL) return qgc_usage_error(k_usage_rans, "%s", "rans decode needs --in and --out");
        if (qgc_same_file(in, out)) return qgc_refuse_same_file(k_usage_rans, "--in", in, out);
        size_t len = 0;
        uint8_t *buf = qgc_read_input(in, SIZE_MAX, "", &len);
        if (buf == NULL) return 1;
        qg_rans_header h;
        int rc = qg_rans_check(buf, len, &h);
        if (rc != QG_ERR_ok) {
            free(buf);
            return rans_fail(in, rc, rans_where(rc));
        }
        size_t n = SIZE_MAX;
        uint8_t *w = qgc_mul_size(h.M, h.K, &n) == 0 ? malloc(n ? n : 1) : NULL;
        rc = w ? qg_rans_decode_ref(buf, len, w, n) : QG_ERR_alloc_failed;
        if (rc != QG_ERR_ok) rans_fail(in, rc, "decoding (qgold rans check names the tile)");
        else if ((rc = qgc_write_output(out, w, n)) == 0) printf("qgold: %zu bytes of rans -> %u x %u int8\n", len, h.M, h.K);
        free(buf);
        free(w);
        return rc ? 1 : 0;
    }
    if (in == NULL || out == NULL || scales == NULL || rows == UINT64_MAX || cols == UINT64_MAX)
        return qgc_usage_error(k_usage_rans, "%s", "rans encode needs --rows, --cols, --in, --scales and --out");
    if (qgc_same_file(in, out)) return qgc_refuse_same_file(k_usage_rans, "--in", in, out);
    if (qgc_same_file(scales, out)) return qgc_refuse_same_file(k_usage_rans, "--scales", scales, out);
    int mode = QG_RANS_AUTO;
    if (pred != NULL && strcmp(pred, "auto") != 0) {
        uint64_t m;
        if (qgc_parse_uint(pred, 0, 3, &m) != 0) return qgc_usage_error(k_usage_rans, "--predictor takes auto, 0, 1, 2 or 3, got '%s'", pred);
        mode = (int)m;
    }
    const uint32_t M = (uint32_t)rows, K = (uint32_t)cols;
    size_t n, nscale, ntiles;
    if (qgc_mul_size(M, K, &n) != 0 || qgc_mul_size(M, sizeof(float), &nscale) != 0 ||
        qgc_mul_size((M + 255ull) / 256, (K + 255ull) / 256, &ntiles) != 0) {
        fprintf(stderr, "qgold: %s: %s (rows %u, cols %u: the sizes do not fit in this machine's size_t)\n", qg_error_name(QG_ERR_shape_invalid),
                qg_error_message(QG_ERR_shape_invalid), M, K);
        return 2;
    }
    /* Inputs first: once they have their exact sizes, every allocation below is bounded by them. */
    uint8_t *w = qgc_read_input(in, n, "rows * cols int8 codes", NULL);
    float *sc = w ? qgc_read_input(scales, nscale, "rows float32 scales", NULL) : NULL;
    uint8_t *modes = sc ? malloc(ntiles ? ntiles : 1) : NULL, *c = NULL;
    size_t len = 0;
    int rc = 1;
    if (sc != NULL && modes == NULL) fprintf(stderr, "qgold: %s: %s\n", qg_error_name(QG_ERR_alloc_failed), qg_error_message(QG_ERR_alloc_failed));
    if (w != NULL && sc != NULL && modes != NULL) {
        memset(modes, mode, ntiles);
        rc = qg_rans_encode(w, sc, M, K, modes, checksums, &c, &len);
        if (rc != QG_ERR_ok) rc = rans_fail(in, rc, "encoding");
        else if ((rc = qgc_write_output(out, c, len)) == 0)
            printf("qgold: %u x %u int8 -> %zu bytes of rans, ratio %.4f\n", M, K, len, n ? (double)len / (double)n : 0.0);
    }
    free(w);
    free(sc);
    free(modes);
    free(c);
    return rc ? 1 : 0;
}

static int cmd_list(int argc, char **argv);
static int cmd_audit(int argc, char **argv);
static int cmd_bench(int argc, char **argv);
static int cmd_quantize(int argc, char **argv);
static int cmd_dequant(int argc, char **argv);
static int cmd_rans(int argc, char **argv);

/* One row per command; a new command adds its row here and its declaration to cmds.h. */
const qgc_command qgc_commands[] = {
    {"list", cmd_list, "one line per format/path/backend: available on this machine or not, and why"},
    {"audit", cmd_audit, "run every registered kernel over every fixture and print a verdict table"},
    {"bench", cmd_bench, "measure kernels against bandwidth (and baselines) measured in the same run"},
    {"quantize", cmd_quantize, "float32 values -> K-quant blocks (reference quantizer), raw little-endian files"},
    {"dequant", cmd_dequant, "K-quant blocks -> float32 values on any backend, raw little-endian files"},
    {"rans", cmd_rans, "encode, decode or check rANS-compressed int8 tile containers"},
    {"verify", qgc_cmd_verify, "judge the kernels of a plugin (.so) like qgold's own, each case in its own process"},
    {"gguf", qgc_cmd_gguf, "GGUF model files: info, check every tensor on every backend, dequant or extract one"},
    {"int8", qgc_cmd_int8, "INT8 quantize, dequantize and W8A8 / W8A16 gemm on raw little-endian files, any backend"},
    {"int4", qgc_cmd_int4, "INT4 W4A16: import GPTQ/AWQ tensors, dequant and gemv on raw little-endian files, any backend"},
};
const unsigned qgc_command_count = sizeof qgc_commands / sizeof qgc_commands[0];

static void print_usage_main(FILE *fp)
{
    fputs(k_usage_head, fp);
    for (unsigned c = 0; c < qgc_command_count; c++) fprintf(fp, "  %-8s %s\n", qgc_commands[c].name, qgc_commands[c].summary);
    fputs(k_usage_tail, fp);
}

int main(int argc, char **argv)
{
    g_argv0 = argv[0];
    if (argc < 2) {
        print_usage_main(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        print_usage_main(stdout);
        return 0;
    }
    for (unsigned c = 0; c < qgc_command_count; c++) {
        if (strcmp(cmd, qgc_commands[c].name) != 0) continue;
        int help = 0;
        for (int i = 2; i < argc; i++) help |= strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0;
        const int rc = help ? 0 : qgc_forced_isa_error(); /* the same exit status and message for every command */
        return rc ? rc : qgc_commands[c].fn(argc - 2, argv + 2);
    }
    fprintf(stderr, "qgold: unknown command '%s'\n\n", cmd);
    print_usage_main(stderr);
    return 2;
}
