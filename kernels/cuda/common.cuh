/* Shared pieces of the CUDA backend: error capture (never a device assert; host calls return codes)
 * and device output buffers (guarded by a harness through the output hooks). */
#ifndef QGOLD_CUDA_COMMON_CUH
#define QGOLD_CUDA_COMMON_CUH

#include <cuda.h> /* CUtensorMap and its enums only: the encoder comes through the runtime */
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "qgold/errors.h"

/* Records "<what>: <cudaGetErrorString>" for qg_cuda_last_error() and returns QG_ERR_device_failed. */
int qg_cuda_fail(const char *what, cudaError_t e);

/* Number of multiprocessors of the current device (0 when it cannot be read). */
int qg_cuda_sm_count();

/* cuTensorMapEncodeTiled from the driver through the runtime (no link against libcuda); NULL when the
 * driver has none. */
typedef CUresult (*qg_tm_encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *, const cuuint64_t *,
                                    const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                    CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
qg_tm_encode_fn qg_cuda_tm_encoder();

#define QG_CUDA_TRY(call)                                                                           \
    do {                                                                                            \
        cudaError_t qg_e_ = (call);                                                                 \
        if (qg_e_ != cudaSuccess) { rc = qg_cuda_fail(#call, qg_e_); goto done; }                  \
    } while (0)

/* A device output of a host wrapper: allocated, finished (copied back) and released through the
 * output hooks of qgold/cuda.h, so a test harness can surround the payload with canaries. */
typedef struct {
    void *base;    /* device allocation */
    void *payload; /* what the kernel writes: base, or inside it */
    size_t bytes;
} qg_guarded_dev;

int qg_guarded_dev_alloc(qg_guarded_dev *g, const void *host_initial, size_t bytes);
/* Copies the payload back to `host`; the hooks may report an error (a touched canary). */
int qg_guarded_dev_finish(qg_guarded_dev *g, void *host);
void qg_guarded_dev_free(qg_guarded_dev *g);

/* 16-byte asynchronous copy global -> shared (cp.async.cg, sm_80+), its commit and its wait for all but
 * the N most recent groups. */
__device__ __forceinline__ void cp_async16(void *dst, const void *src)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(__cvta_generic_to_global(src)) : "memory");
}
/* the same through L1 (cp.async.ca): for data other blocks of the SM read too */
__device__ __forceinline__ void cp_async16_ca(void *dst, const void *src)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(__cvta_generic_to_global(src)) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

/* mbarriers (sm_90; compiled to nothing for earlier architectures, whose kernels do not reach them).
 * bar: a shared-memory address (8-byte aligned). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define QG_CUDA_MBAR 1
#else
#define QG_CUDA_MBAR 0
#endif

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count)
{
#if QG_CUDA_MBAR
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}

/* After the barriers' initialisation, before any copy or other thread uses them. */
__device__ __forceinline__ void mbar_init_fence()
{
#if QG_CUDA_MBAR
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

/* An arrival on bar that also expects `bytes` more of asynchronous copies in the current phase. */
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes)
{
#if QG_CUDA_MBAR
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#endif
}

/* This thread's arrival on bar (release: its earlier shared-memory reads are ordered before a waiter's
 * later writes, asynchronous copies included). */
__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
#if QG_CUDA_MBAR
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}

/* Returns once the phase of parity `parity` has completed (a fresh barrier counts parity 1 as done). */
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
#if QG_CUDA_MBAR
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (done == 0);
#endif
}

/* bytes from global src to shared dst (both 16-byte aligned, a multiple of 16) by the bulk copy engine,
 * counted on mbarrier bar (announced by an arrival with expected bytes; sm_90) */
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar)
{
#if QG_CUDA_MBAR
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst), "l"(src),
                 "r"(bytes), "r"(bar)
                 : "memory");
#endif
}

/* Box (c0, c1) of a 2-D tensor map (c0 the inner coordinate, in elements) into shared memory at dst,
 * completing on mbarrier bar (sm_90). */
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap *map, int c0, int c1, uint32_t bar)
{
#if QG_CUDA_MBAR
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
#endif
}

/* Orders this thread's generic-proxy shared-memory accesses with later async-proxy ones (bulk copies,
 * the tensor cores' shared-memory reads). */
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/* d += A B, mma.sync m16n8k16 with bf16 A and B, float32 accumulation: the Q4_K/Q5_K min term's
 * instruction (kquants_mma.cu), which gpu.tc_probe.cuda measures through this same helper (int4.cu). */
__device__ __forceinline__ void mma16816_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* Warpgroup MMA (sm_90a builds only: QG_CUDA_WGMMA): the fence before a wgmma reads registers written by
 * other instructions, the commit of the wgmmas issued so far as one group, the waits for all groups or all
 * but the 1 or 2 most recent. */
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define QG_CUDA_WGMMA 1
#else
#define QG_CUDA_WGMMA 0
#endif
#if QG_CUDA_WGMMA
__device__ __forceinline__ void qg_wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void qg_wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void qg_wg_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
__device__ __forceinline__ void qg_wg_wait1() { asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); }
__device__ __forceinline__ void qg_wg_wait2() { asm volatile("wgmma.wait_group.sync.aligned 2;\n" ::: "memory"); }
/* Pins a register to this point of the instruction stream: the compiler sees the wgmma's accumulators as
 * written when it is issued, so without this it may read them before the wait_group that completes it. */
__device__ __forceinline__ void qg_wg_pin(float &r) { asm volatile("" : "+f"(r)::"memory"); }

#define QG_WG_F8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
/* D = A B + D (sd = 1) or D = A B (sd = 0: a chain's first block, the block added to +0, as an mma.sync
 * block from C = +0; the INT4 and K-quant tests compare the results with the mma.sync kernels' bit for
 * bit), one k16 block of 64 rows of A (registers) x BN columns of B (shared memory, descriptor desc) */
template <int BN> __device__ __forceinline__ void qg_wgmma_f16(float (&d)[BN / 2], const uint32_t (&a)[4], uint64_t desc, int sd);
template <> __device__ __forceinline__ void qg_wgmma_f16<128>(float (&d)[64], const uint32_t (&a)[4], uint64_t desc, int sd)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,"
                 "%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63},"
                 " {%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
                 : QG_WG_F8(0), QG_WG_F8(8), QG_WG_F8(16), QG_WG_F8(24), QG_WG_F8(32), QG_WG_F8(40), QG_WG_F8(48), QG_WG_F8(56)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(sd));
}
template <> __device__ __forceinline__ void qg_wgmma_f16<64>(float (&d)[32], const uint32_t (&a)[4], uint64_t desc, int sd)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
                 : QG_WG_F8(0), QG_WG_F8(8), QG_WG_F8(16), QG_WG_F8(24)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(sd));
}
template <> __device__ __forceinline__ void qg_wgmma_f16<32>(float (&d)[16], const uint32_t (&a)[4], uint64_t desc, int sd)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15},"
                 " {%16,%17,%18,%19}, %20, p, 1, 1, 0;\n}\n"
                 : QG_WG_F8(0), QG_WG_F8(8)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(sd));
}
template <> __device__ __forceinline__ void qg_wgmma_f16<16>(float (&d)[8], const uint32_t (&a)[4], uint64_t desc, int sd)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7},"
                 " {%8,%9,%10,%11}, %12, p, 1, 1, 0;\n}\n"
                 : QG_WG_F8(0)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(sd));
}
#undef QG_WG_F8
#endif

#endif
