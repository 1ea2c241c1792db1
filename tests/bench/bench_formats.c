/* The benchmark table: which --format values each entry serves, the shapes it accepts, the registry
 * rows it times, and its CPU and GPU halves. A new format is one entry here plus its halves. */
#include "bench.h"

#include "bench_int4.h"
#include "bench_int8.h"
#include "bench_kq_q8k.h"
#include "qgold/kernels_int8_cuda.h"
#include "qgold/kquants.h"
#include "qgold/kquants_gemm.h"
#include "qgold/rans.h"
#include "qgold/spqr.h"

#include <string.h>

#if QG_HAVE_CUDA
#include "bench_kquants_gemm.h"
#define QG_BENCH_GPU(fn) fn
#else
#define QG_BENCH_GPU(fn) NULL
#endif

#if QG_HAVE_CUDA
/* The K-quant GPU half: the fused GEMV (batch 1..16), then the tensor-core gemm path (batch 1..64). */
static int gpu_kquants_gemv_gemm(const qg_bench_opts *o, double bw_copy)
{
    const int rc = qg_bench_gpu_kquants(o, bw_copy);
    return rc != 0 ? rc : qg_bench_gpu_kquants_gemm(o, bw_copy);
}
#endif

/* The K-quant CPU half: the fused GEMV and the dot, then the GEMV with Q8_K activations. */
static int cpu_kquants_q8k(const qg_bench_opts *o, int threads, double bw_read)
{
    const int rc = qg_bench_cpu_kquants(o, threads, bw_read);
    return rc != 0 ? rc : qg_bench_cpu_kq_q8k(o, threads, bw_read);
}

static int is_fp16(const char *f) { return strcmp(f, "fp16") == 0; }
static int is_kquant(const char *f) { return qg_kq_from_name(f) >= 0; }
static int is_spqr(const char *f) { return strcmp(f, "spqr") == 0; }
static int is_rans(const char *f) { return strcmp(f, "rans") == 0; }
static int is_int8(const char *f) { return strcmp(f, "int8") == 0; }
static int is_int4(const char *f) { return strcmp(f, "int4") == 0; }

static int measures_convert(const qg_kernel *k) { return k->kind == QG_KIND_CONVERT; }
/* The GEMV everywhere; the Q8_K dot (one core, in cache) on CPU backends only. */
static int measures_kquants(const qg_kernel *k)
{
    return k->kind == QG_KIND_KQ_GEMV || (k->kind == QG_KIND_KQ_DOT && k->backend != QG_BACKEND_CUDA) ||
           (k->kind == QG_KIND_KQ_GEMV_Q8K && k->backend != QG_BACKEND_REF);
}
static int measures_spqr(const qg_kernel *k) { return k->kind == QG_KIND_SPQR_GEMV; }
static int measures_rans(const qg_kernel *k)
{
    return k->kind == QG_KIND_RANS_DECODE || k->kind == QG_KIND_RANS_GEMV || k->kind == QG_KIND_INT8_GEMV;
}

/* INT8: W8A8, W8A16 and the quantizer on every backend. INT4: the W4A16 GEMV everywhere, the decode and
 * the packed GEMM on CPU backends (the GPU half times the GEMV only). */
static int measures_int8(const qg_kernel *k)
{
    return k->kind == QG_KIND_INT8_W8A8 || k->kind == QG_KIND_INT8_W8A16 || k->kind == QG_KIND_INT8_QUANTIZE;
}
static int measures_int4(const qg_kernel *k)
{
    return k->kind == QG_KIND_INT4_W4A16_GEMV ||
           (k->backend != QG_BACKEND_CUDA && (k->kind == QG_KIND_INT4_W4A16_DECODE || k->kind == QG_KIND_INT4_GEMM_PACKED));
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
    {is_fp16, 0, NULL, measures_convert, qg_bench_cpu_fp16, QG_BENCH_GPU(qg_bench_gpu_fp16), 0},
    /* K-quants: the CUDA gemm path to 64, the GEMVs to QG_KQ_MAX_BATCH */
    {is_kquant, 1, rule_kquants, measures_kquants, cpu_kquants_q8k, QG_BENCH_GPU(gpu_kquants_gemv_gemm), QG_KQ_GEMM_MAX_BATCH},
    {is_spqr, 1, rule_spqr, measures_spqr, qg_bench_cpu_spqr, QG_BENCH_GPU(qg_bench_gpu_spqr), QG_SPQR_MAX_BATCH},
    {is_rans, 1, NULL, measures_rans, qg_bench_cpu_rans, QG_BENCH_GPU(qg_bench_gpu_rans), QG_RANS_MAX_BATCH},
    /* INT8: --batches sets the W8A16 batches (the W8A8 M list is fixed) */
    {is_int8, 1, NULL, measures_int8, qg_bench_cpu_int8, QG_BENCH_GPU(qg_bench_gpu_int8), QG_INT8_W8A16_CUDA_MAX_BATCH},
    /* INT4: the CUDA W4A16 at any M the benchmark allocates; the CPU half to 16 */
    {is_int4, 1, NULL, measures_int4, qg_bench_cpu_int4, QG_BENCH_GPU(qg_bench_gpu_int4), QG_BENCH_MAX_BATCH},
    /* qgold:bench-formats-end */
};

const qg_bench_format *qg_bench_format_find(const char *format)
{
    for (size_t i = 0; format != NULL && i < sizeof k_formats / sizeof k_formats[0]; i++)
        if (k_formats[i].matches(format)) return &k_formats[i];
    return NULL;
}
