/* The benchmark table: which --format values each entry serves, the shapes it accepts, the registry
 * rows it times, and its CPU and GPU halves. A new format is one entry here plus its halves. */
#include "bench.h"

#include "qgold/kquants.h"
#include "qgold/spqr.h"

#include <string.h>

#if QG_HAVE_CUDA
#define QG_BENCH_GPU(fn) fn
#else
#define QG_BENCH_GPU(fn) NULL
#endif

static int is_fp16(const char *f) { return strcmp(f, "fp16") == 0; }
static int is_kquant(const char *f) { return qg_kq_from_name(f) >= 0; }
static int is_spqr(const char *f) { return strcmp(f, "spqr") == 0; }
static int is_rans(const char *f) { return strcmp(f, "rans") == 0; }

static int measures_convert(const qg_kernel *k) { return k->kind == QG_KIND_CONVERT; }
/* The GEMV everywhere; the Q8_K dot (one core, in cache) on CPU backends only. */
static int measures_kquants(const qg_kernel *k)
{
    return k->kind == QG_KIND_KQ_GEMV || (k->kind == QG_KIND_KQ_DOT && k->backend != QG_BACKEND_CUDA);
}
static int measures_spqr(const qg_kernel *k) { return k->kind == QG_KIND_SPQR_GEMV; }
static int measures_rans(const qg_kernel *k)
{
    return k->kind == QG_KIND_RANS_DECODE || k->kind == QG_KIND_RANS_GEMV || k->kind == QG_KIND_INT8_GEMV;
}

static const char *rule_kquants(const char *format, size_t r, size_t k)
{
    (void)format;
    (void)r;
    return k % QG_QK_K != 0 ? "K (columns) must be a multiple of 256 (whole K-quant blocks)" : NULL;
}
static const char *rule_spqr(const char *format, size_t r, size_t k)
{
    (void)format;
    /* 2^24 rows: the limit of the layer generator the CPU half uses */
    if (r % QG_SPQR_TILE != 0 || r > ((size_t)1 << 24)) return "R (rows) must be a multiple of 16, at most 16777216";
    if (k > QG_SPQR_MAX_N) return "K (columns) must be at most 65536";
    return NULL;
}

static const qg_bench_format k_formats[] = {
    {is_fp16, 0, NULL, measures_convert, qg_bench_cpu_fp16, QG_BENCH_GPU(qg_bench_gpu_fp16)},
    {is_kquant, 1, rule_kquants, measures_kquants, qg_bench_cpu_kquants, QG_BENCH_GPU(qg_bench_gpu_kquants)},
    {is_spqr, 1, rule_spqr, measures_spqr, qg_bench_cpu_spqr, QG_BENCH_GPU(qg_bench_gpu_spqr)},
    {is_rans, 1, NULL, measures_rans, qg_bench_cpu_rans, QG_BENCH_GPU(qg_bench_gpu_rans)},
};

const qg_bench_format *qg_bench_format_find(const char *format)
{
    for (size_t i = 0; format != NULL && i < sizeof k_formats / sizeof k_formats[0]; i++)
        if (k_formats[i].matches(format)) return &k_formats[i];
    return NULL;
}
