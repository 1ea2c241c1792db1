/* GPU half of qgold bench for SpQR: the fused CUDA GEMV (dense 3-bit tiles + outliers + permutation)
 * against cuBLAS fp16 at the same shape and batch, timed interleaved in the same run.
 *
 * Layers: dense words made on the device from a hash (random codes 0..7, finite second-order statistics,
 * both fragment copies equal, padded codes 0), outliers made on the host (CSR; PTCSR converted by the
 * reference), a random permutation; the first copy of every layer is checked with qg_spqr_validate.
 * Variants per shape: no outliers, CSR at 1% and 5%, PTCSR at 1%, and CSR at 1% plus one fully dense
 * outlier row (nnz = n in one row). Every copy of a layer has its own dense words, row offsets and
 * outliers; copies rotate so one pass streams >= 12 x L2. Bytes counted: dense words, outlier words
 * (the real outliers; PTCSR padding is not read past each row's first padding slot), row offsets, the
 * permutation, x and the fp16 y.
 */
#include "bench.h"
#include "bench_gpu.h"

#include "qgold/errors.h"
#include "qgold/kernels_spqr.h"
#include "qgold/spqr.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

namespace {

#define CK QG_BENCH_CK

__host__ __device__ inline uint32_t mix32(uint32_t z)
{
    z ^= z >> 16;
    z *= 0x7FEB352Du;
    z ^= z >> 15;
    z *= 0x846CA68Bu;
    z ^= z >> 16;
    return z;
}

/* One dense word per thread-step: word ((R * T) + t) * 16 + k. The tile's second-order word holds fp16
 * s_s in [1/16, 1/8), z_s in [1, 2), s_z and z_z in [2, 4); row k carries byte k/2 of it. */
__global__ void k_gen_dense(uint64_t *d, size_t words, size_t T, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x) {
        const size_t k = i % 16, tile = i / 16, t = tile % T;
        const uint32_t ht = mix32((uint32_t)tile * 2654435761u ^ seed);
        const uint32_t ht2 = mix32(ht ^ 0x9E3779B9u);
        const uint64_t so = (uint64_t)(0x2C00u | (ht & 0x3FFu)) | ((uint64_t)(0x3C00u | ((ht >> 10) & 0x3FFu)) << 16) |
                            ((uint64_t)(0x4000u | (ht2 & 0x3FFu)) << 32) | ((uint64_t)(0x4000u | ((ht2 >> 10) & 0x3FFu)) << 48);
        const uint32_t h0 = mix32((uint32_t)i ^ seed), h1 = mix32(h0 + 0x68E31DA4u);
        uint64_t w = (uint64_t)(h0 & 63u); /* s_q, z_q */
        const uint64_t codes = ((uint64_t)h1 << 16 | (h0 >> 16)) & 0xFFFFFFFFFFFFull; /* 48 random bits */
        for (int j = 0; j < 16; j++)
            if (16 * t + (size_t)j < n) w |= ((codes >> (3 * j)) & 7u) << (6 + 3 * j);
        w |= ((so >> (8 * (k / 2))) & 0xFFu) << 54;
        d[i] = w;
    }
}

struct layer_copy {
    uint64_t *dense = nullptr;
    int32_t *ro = nullptr;
    uint32_t *cv = nullptr;
};

struct variant {
    const char *path;
    qg_spqr_outlier_kind kind;
    double density;
    int dense_row;
};

const variant VARIANTS[] = {
    {"none", QG_SPQR_OUTLIERS_NONE, 0.0, 0},       {"csr-1%", QG_SPQR_OUTLIERS_CSR, 0.01, 0},
    {"csr-5%", QG_SPQR_OUTLIERS_CSR, 0.05, 0},     {"ptcsr-1%", QG_SPQR_OUTLIERS_PTCSR, 0.01, 0},
    {"csr-1%+drow", QG_SPQR_OUTLIERS_CSR, 0.01, 1},
};
constexpr int NV = sizeof VARIANTS / sizeof VARIANTS[0];

/* Host CSR: every row floor(density * n + 0.5) outliers at hashed columns (duplicates allowed: they
 * add), nonzero fp16 values in [1/8, 1) of either sign; with dense_row, row m/2 holds every column. */
void make_csr(size_t m, size_t n, double density, int dense_row, uint32_t seed, std::vector<int32_t> &ro, std::vector<uint32_t> &cv)
{
    const size_t per = (size_t)(density * (double)n + 0.5);
    ro.assign(m + 1, 0);
    cv.clear();
    for (size_t r = 0; r < m; r++) {
        const bool full = dense_row && r == m / 2;
        const size_t cnt = full ? n : per;
        for (size_t l = 0; l < cnt; l++) {
            const uint32_t h = mix32((uint32_t)(r * 1000003u + l) ^ seed);
            const uint32_t col = full ? (uint32_t)l : (uint32_t)(h % (uint32_t)n);
            const uint32_t val = ((h >> 16) & 0x8000u) | ((12u + (h >> 8) % 3u) << 10) | ((h >> 20) & 0x3FFu); /* [1/8, 1) */
            cv.push_back(col | (val << 16));
        }
        ro[r + 1] = (int32_t)cv.size();
    }
}

struct spqr_ctx {
    qg_spqr_dev_layer L;
    layer_copy *copies;
    int ncopies;
    const uint16_t *x;
    size_t batch;
    uint16_t *y;
    void *work; /* qg_spqr_cuda_work_bytes(n, batch) bytes */
};

int spqr_launch(void *vctx, int call, cudaStream_t s)
{
    spqr_ctx *c = (spqr_ctx *)vctx;
    qg_spqr_dev_layer L = c->L;
    const layer_copy &lc = c->copies[call % c->ncopies];
    L.dense = lc.dense;
    L.row_offsets = lc.ro;
    L.col_vals = lc.cv;
    int rc = qg_spqr_gemv_cuda_async(&L, c->x, c->batch, nullptr, c->y, c->work, s);
    if (rc != QG_ERR_ok) fprintf(stderr, "qgold bench: qg_spqr_gemv_cuda_async: error %d\n", rc);
    return rc != QG_ERR_ok;
}

struct built {
    std::vector<layer_copy> copies;
    qg_spqr_dev_layer L;
    double bytes_layer; /* dense + outliers + row offsets + perm */
};

int build_variant(const variant &v, size_t m, size_t n, size_t l2, const uint16_t *dperm, const std::vector<uint16_t> &perm, built *out)
{
    const size_t words = qg_spqr_dense_words(m, n), T = qg_spqr_tiles_c(n);
    std::vector<int32_t> ro, pro;
    std::vector<uint32_t> cv, pcv;
    size_t nnz = 0;
    if (v.kind != QG_SPQR_OUTLIERS_NONE) {
        make_csr(m, n, v.density, v.dense_row, 0xC0FFEEu, ro, cv);
        nnz = cv.size();
        if (v.kind == QG_SPQR_OUTLIERS_PTCSR) {
            size_t pn = 0;
            pro.resize(m / 16 + 1);
            if (qg_spqr_csr_to_ptcsr(m, ro.data(), cv.data(), pro.data(), nullptr, &pn) != QG_ERR_ok) return 1;
            pcv.resize(pn ? pn : 1);
            if (qg_spqr_csr_to_ptcsr(m, ro.data(), cv.data(), pro.data(), pcv.data(), &pn) != QG_ERR_ok) return 1;
            pcv.resize(pn);
            ro.swap(pro);
            cv.swap(pcv);
        }
    }
    const double ro_bytes = (double)ro.size() * 4;
    out->bytes_layer = (double)words * 8 + (double)nnz * 4 + ro_bytes + (double)n * 2;
    const int nc = qg_bench_copies_for((size_t)out->bytes_layer, l2);
    out->copies.assign((size_t)nc, layer_copy());
    for (int i = 0; i < nc; i++) {
        layer_copy &c = out->copies[(size_t)i];
        CK(cudaMalloc((void **)&c.dense, words * 8));
        k_gen_dense<<<2048, 256>>>(c.dense, words, T, n, 0x5EEDu + 7919u * (uint32_t)i);
        if (!ro.empty()) {
            CK(cudaMalloc((void **)&c.ro, ro.size() * 4));
            CK(cudaMemcpy(c.ro, ro.data(), ro.size() * 4, cudaMemcpyHostToDevice));
        }
        if (!cv.empty()) {
            CK(cudaMalloc((void **)&c.cv, cv.size() * 4));
            CK(cudaMemcpy(c.cv, cv.data(), cv.size() * 4, cudaMemcpyHostToDevice));
        }
    }
    CK(cudaDeviceSynchronize());
    /* The layer as the kernel sees it must be valid: check copy 0 on the host. */
    std::vector<uint64_t> hd(words);
    CK(cudaMemcpy(hd.data(), out->copies[0].dense, words * 8, cudaMemcpyDeviceToHost));
    qg_spqr_layer hl = {m, n, hd.data(), words, v.kind, ro.empty() ? nullptr : ro.data(), ro.size(),
                        cv.empty() ? nullptr : cv.data(), cv.size(), perm.data(), n};
    const int rc = qg_spqr_validate(&hl);
    if (rc != QG_ERR_ok) {
        fprintf(stderr, "qgold bench: generated SpQR layer %zux%zu %s is invalid (%d)\n", m, n, v.path, rc);
        return 1;
    }
    out->L = {m, n, nullptr, v.kind, nullptr, nullptr, dperm};
    return 0;
}

void free_variant(built *b)
{
    for (layer_copy &c : b->copies) {
        cudaFree(c.dense);
        cudaFree(c.ro);
        cudaFree(c.cv);
    }
    b->copies.clear();
}

} // namespace

int qg_bench_gpu_spqr(const qg_bench_opts *o, double bw)
{
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const size_t l2 = (size_t)prop.l2CacheSize;
    static const size_t shapes_full[][2] = {{4096, 4096}, {4096, 14336}, {14336, 4096}, {8192, 8192}, {28672, 8192}, {8192, 28672}};
    static const size_t shapes_quick[][2] = {{4096, 4096}};
    static const size_t batches_full[] = {1, 2, 4, 8, 16}, batches_quick[] = {1, 16};
    const size_t (*shapes)[2] = o->quick ? shapes_quick : shapes_full;
    size_t nshapes = o->quick ? 1 : 6;
    const size_t *batches = o->quick ? batches_quick : batches_full;
    size_t nbatches = o->quick ? 2 : 5;
    static size_t custom[16][2], cbatches[16];
    const int ns = qg_bench_parse_shapes(o->shapes, custom, 16), nbt = qg_bench_parse_batches(o->batches, cbatches, 16);
    if (ns < 0 || nbt < 0) {
        fprintf(stderr, "qgold bench: malformed --shapes or --batches\n");
        return 1;
    }
    if (ns > 0) shapes = (const size_t(*)[2])custom, nshapes = (size_t)ns;
    if (nbt > 0) batches = cbatches, nbatches = (size_t)nbt;
    cublasHandle_t h;
    void *ws = nullptr;
    if (qg_bench_cublas_open(&h, &ws) != 0) return 1;
    qg_bench_note(o, "L2_bytes", "%zu", l2);
    qg_bench_note(o, "baseline", "cuBLAS cublasGemmEx fp16 in/out, fp32 compute, same shape and batch, interleaved");
    qg_bench_note(o, "spqr_layers", "3-bit 16x16 tiles, random permutation, fp16 y; paths: outlier layout-density (+drow: one row with nnz = n)");
    int rc = 0;
    for (size_t si = 0; si < nshapes && rc == 0; si++) {
        const size_t rows = shapes[si][0], cols = shapes[si][1];
        if (rows % 16 != 0 || cols > QG_SPQR_MAX_N) {
            fprintf(stderr, "qgold bench: spqr shape %zux%zu not allowed (m %% 16 == 0, n <= 65536)\n", rows, cols);
            rc = 1;
            break;
        }
        char label[80];
        snprintf(label, sizeof label, "spqr %zux%zu", rows, cols);
        /* the fp16 baseline's weight copies alone (the SpQR layers come on top) */
        const double hmin = (double)qg_bench_copies_for(rows * cols * 2, l2) * (double)(rows * cols * 2);
        if (qg_bench_device_fits(label, hmin + (double)cols * 34 + (double)rows * 64)) {
            rc = 1;
            break;
        }
        /* Random permutation (Fisher-Yates on a hash stream), shared by every variant. */
        std::vector<uint16_t> perm(cols);
        for (size_t i = 0; i < cols; i++) perm[i] = (uint16_t)i;
        for (size_t i = cols - 1; i > 0; i--) {
            const size_t j = mix32((uint32_t)i * 0x9E3779B1u) % (i + 1);
            const uint16_t tmp = perm[i];
            perm[i] = perm[j];
            perm[j] = tmp;
        }
        uint16_t *dperm = nullptr, *x = nullptr, *y = nullptr, *work = nullptr;
        CK(cudaMalloc((void **)&dperm, cols * 2));
        CK(cudaMemcpy(dperm, perm.data(), cols * 2, cudaMemcpyHostToDevice));
        CK(cudaMalloc((void **)&x, cols * 16 * 2));
        CK(cudaMalloc((void **)&y, rows * 16 * 4));
        CK(cudaMalloc((void **)&work, qg_spqr_cuda_work_bytes(cols, QG_SPQR_MAX_BATCH) + 16));
        qg_bench_fill_half(x, cols * 16);
        const size_t hbytes = rows * cols * 2;
        const int nh = qg_bench_copies_for(hbytes, l2);
        std::vector<__half *> wh((size_t)nh, nullptr);
        for (int i = 0; i < nh; i++) {
            CK(cudaMalloc((void **)&wh[(size_t)i], hbytes));
            qg_bench_fill_half((uint16_t *)wh[(size_t)i], hbytes / 2);
        }
        built vb[NV];
        for (int v = 0; v < NV && rc == 0; v++) rc = build_variant(VARIANTS[v], rows, cols, l2, dperm, perm, &vb[v]);
        for (size_t bi = 0; bi < nbatches && rc == 0; bi++) {
            const size_t B = batches[bi];
            if (B < 1 || B > QG_SPQR_MAX_BATCH) continue;
            qg_bench_blas_ctx bc = {h, wh.data(), nh, rows, cols, B, (const __half *)x, (__half *)y};
            spqr_ctx sc[NV];
            for (int v = 0; v < NV; v++) sc[v] = {vb[v].L, vb[v].copies.data(), (int)vb[v].copies.size(), x, B, y, work};
            /* One plain call each first: launch settings are made outside any graph capture. */
            for (int v = 0; v < NV && rc == 0; v++) rc = spqr_launch(&sc[v], 0, 0);
            if (rc != 0) break;
            CK(cudaDeviceSynchronize());
            /* Interleaved: each repetition times the baseline graph, then every variant. */
            double tb[64], tq[NV][64], lo, hi;
            qg_bench_opts one = *o;
            one.reps = 1;
            for (int r = 0; r < o->reps && rc == 0; r++) {
                rc = qg_bench_time_graph(&one, nh * 2, qg_bench_blas_launch, &bc, &tb[r], &lo, &hi);
                for (int v = 0; v < NV && rc == 0; v++)
                    rc = qg_bench_time_graph(&one, sc[v].ncopies * 2, spqr_launch, &sc[v], &tq[v][r], &lo, &hi);
            }
            if (rc != 0) break;
            const double tblas = qg_bench_median(tb, o->reps, nullptr, nullptr);
            for (int v = 0; v < NV; v++) {
                qg_bench_row row = {"spqr", VARIANTS[v].path, "cuda", "", (int)B, 0, 0, 0, 0, 0, "BW_copy", 0, "cuBLAS fp16"};
                snprintf(row.shape, sizeof row.shape, "%zux%zu", rows, cols);
                row.t_med = qg_bench_median(tq[v], o->reps, &row.t_lo, &row.t_hi);
                row.bytes = vb[v].bytes_layer + (double)(cols * B * 2) + (double)(rows * B * 2);
                row.eff = row.bytes / row.t_med / bw;
                row.speedup = tblas / row.t_med;
                qg_bench_emit(o, &row);
            }
        }
        for (int v = 0; v < NV; v++) free_variant(&vb[v]);
        for (__half *p : wh) cudaFree(p);
        cudaFree(dperm);
        cudaFree(x);
        cudaFree(y);
        cudaFree(work);
    }
    cublasDestroy(h);
    cudaFree(ws);
    return rc;
}
