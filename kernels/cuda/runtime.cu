/* CUDA backend runtime helpers: device discovery, error capture, device output buffers (through the
 * output hooks of qgold/cuda.h). */
#include "common.cuh"
#include "qgold/cuda.h"

#include <stdio.h>
#include <string.h>

#include <atomic>

static thread_local char g_last_error[256];

extern "C" const char *qg_cuda_last_error(void) { return g_last_error; }

int qg_cuda_fail(const char *what, cudaError_t e)
{
    snprintf(g_last_error, sizeof g_last_error, "%s: %s", what, cudaGetErrorString(e));
    return QG_ERR_device_failed;
}

int qg_cuda_sm_count()
{
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

qg_tm_encode_fn qg_cuda_tm_encoder()
{
    static std::atomic<int> state(-1);
    static std::atomic<qg_tm_encode_fn> fn(nullptr);
    if (state.load() < 0) {
        void *p = nullptr;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess) {
            cudaGetLastError();
            p = nullptr;
        }
        fn.store((qg_tm_encode_fn)p);
        state.store(1);
    }
    return fn.load();
}

extern "C" int qg_cuda_device_count(char *why, size_t why_len)
{
    static int cached = -1;
    static char reason[200];
    if (cached < 0) {
        int n = 0;
        cudaError_t e = cudaGetDeviceCount(&n);
        if (e != cudaSuccess) {
            snprintf(reason, sizeof reason, "no CUDA device (%s)", cudaGetErrorString(e));
            n = 0;
        } else if (n == 0) {
            snprintf(reason, sizeof reason, "no CUDA device");
        }
        cached = n;
    }
    if (cached == 0 && why != NULL && why_len > 0) snprintf(why, why_len, "%s", reason);
    return cached;
}

extern "C" void qg_cuda_describe(char *buf, size_t len)
{
    cudaDeviceProp p;
    int drv = 0, rt = 0;
    cudaError_t e = cudaGetDeviceProperties(&p, 0);
    if (e != cudaSuccess) {
        snprintf(buf, len, "no device (%s)", cudaGetErrorString(e));
        return;
    }
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    snprintf(buf, len, "%s, sm_%d%d, %d SMs, driver %d.%d, runtime %d.%d", p.name, p.major, p.minor,
             p.multiProcessorCount, drv / 1000, (drv % 1000) / 10, rt / 1000, (rt % 1000) / 10);
}

extern "C" int qg_cuda_alloc(void **p, size_t bytes)
{
    int rc = QG_ERR_ok;
    *p = NULL;
    QG_CUDA_TRY(cudaMalloc(p, bytes > 0 ? bytes : 1));
done:
    return rc;
}

extern "C" void qg_cuda_free(void *p)
{
    if (p != NULL) cudaFree(p);
}

extern "C" int qg_cuda_fill(void *dev, int byte, size_t bytes)
{
    int rc = QG_ERR_ok;
    if (bytes > 0) QG_CUDA_TRY(cudaMemset(dev, byte, bytes));
done:
    return rc;
}

extern "C" int qg_cuda_to_device(void *dev, const void *host, size_t bytes)
{
    int rc = QG_ERR_ok;
    if (bytes > 0) QG_CUDA_TRY(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
done:
    return rc;
}

extern "C" int qg_cuda_to_host(void *host, const void *dev, size_t bytes)
{
    int rc = QG_ERR_ok;
    if (bytes > 0) QG_CUDA_TRY(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
done:
    return rc;
}

/* The default output: a plain allocation holding the caller's bytes. */
static int plain_alloc(void **base, void **payload, const void *host_initial, size_t bytes)
{
    int rc = qg_cuda_alloc(base, bytes);
    if (rc == QG_ERR_ok) rc = qg_cuda_to_device(*base, host_initial, bytes);
    *payload = *base;
    return rc;
}

static int plain_finish(void *base, void *payload, void *host, size_t bytes)
{
    (void)base;
    return qg_cuda_to_host(host, payload, bytes);
}

static const qg_cuda_output_hooks k_plain_hooks = {plain_alloc, plain_finish, qg_cuda_free};
static const qg_cuda_output_hooks *g_hooks = &k_plain_hooks;

extern "C" const qg_cuda_output_hooks *qg_cuda_output_hooks_in_force(void) { return g_hooks; }

extern "C" void qg_cuda_set_output_hooks(const qg_cuda_output_hooks *hooks) { g_hooks = hooks != NULL ? hooks : &k_plain_hooks; }

int qg_guarded_dev_alloc(qg_guarded_dev *g, const void *host_initial, size_t bytes)
{
    g->base = NULL;
    g->payload = NULL;
    g->bytes = bytes;
    return g_hooks->alloc(&g->base, &g->payload, host_initial, bytes);
}

int qg_guarded_dev_finish(qg_guarded_dev *g, void *host) { return g_hooks->finish(g->base, g->payload, host, g->bytes); }

void qg_guarded_dev_free(qg_guarded_dev *g)
{
    if (g->base != NULL) g_hooks->release(g->base);
    g->base = NULL;
}

extern "C" int qg_cuda_run(const qg_cuda_buf *bufs, size_t n, qg_cuda_launch_fn launch, const void *ctx)
{
    enum { MAX_BUFS = 16 };
    if (n > MAX_BUFS || (n > 0 && bufs == NULL) || launch == NULL) return QG_ERR_argument_invalid;
    void *dev[MAX_BUFS] = {};
    qg_guarded_dev out[MAX_BUFS] = {};
    /* The per-thread default stream: a real stream handle every CUDA runtime in the process understands,
     * so a launcher compiled elsewhere (a plugin) can enqueue on it. */
    cudaStream_t stream = cudaStreamPerThread;
    int rc = QG_ERR_ok;
    for (size_t i = 0; i < n && rc == QG_ERR_ok; i++) {
        const qg_cuda_buf *b = &bufs[i];
        if (b->bytes == 0) continue;
        switch (b->role) {
        case QG_CUDA_IN:
            if (b->host == NULL) rc = QG_ERR_argument_invalid;
            if (rc == QG_ERR_ok) rc = qg_cuda_alloc(&dev[i], b->bytes);
            if (rc == QG_ERR_ok) rc = qg_cuda_to_device(dev[i], b->host, b->bytes);
            break;
        case QG_CUDA_OUT:
            if (b->host == NULL) rc = QG_ERR_argument_invalid;
            if (rc == QG_ERR_ok) rc = qg_guarded_dev_alloc(&out[i], b->host, b->bytes);
            dev[i] = out[i].payload;
            break;
        case QG_CUDA_SCRATCH:
            rc = qg_cuda_alloc(&dev[i], b->bytes);
            if (rc == QG_ERR_ok) rc = qg_cuda_fill(dev[i], 0, b->bytes);
            break;
        default: rc = QG_ERR_argument_invalid;
        }
    }
    if (rc == QG_ERR_ok) rc = launch(ctx, dev, (void *)stream);
    if (rc == QG_ERR_ok) QG_CUDA_TRY(cudaGetLastError());
    if (rc == QG_ERR_ok) QG_CUDA_TRY(cudaStreamSynchronize(stream));
    /* OUT buffers are copied back in order; the first error (a device fault, a touched canary) stops. */
    for (size_t i = 0; i < n && rc == QG_ERR_ok; i++)
        if (bufs[i].role == QG_CUDA_OUT && bufs[i].bytes > 0) rc = qg_guarded_dev_finish(&out[i], bufs[i].host);
done:
    if (rc != QG_ERR_ok) cudaDeviceSynchronize(); /* nothing may still run on buffers about to be freed */
    for (size_t i = 0; i < n; i++) {
        if (bufs[i].role == QG_CUDA_OUT) qg_guarded_dev_free(&out[i]);
        else if (dev[i] != NULL) cudaFree(dev[i]);
    }
    return rc;
}
