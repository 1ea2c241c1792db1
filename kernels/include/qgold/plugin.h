/* qgold plugin ABI: how a shared library hands its kernels to `qgold verify --plugin`.
 *
 * This header is the whole contract; a plugin includes it alone (plain C, usable from C++). The plugin
 * exports one function,
 *
 *     int qgold_plugin_entry(uint32_t host_abi, qgold_plugin_info *out);
 *
 * qgold passes its ABI version (QGOLD_PLUGIN_ABI_VERSION of the qgold that loads it). The plugin fills
 * `out` (its name, the ABI version it was built against, its kernels) and returns 0; any other value
 * refuses the load. The arrays it points to (name strings, the kernel table) must stay valid until the
 * library is unloaded: static storage is the simple way. qgold refuses a plugin built against a newer
 * ABI than its own, and validates every field before it calls anything (reference/spec/plugin.md).
 *
 * Ownership: qgold allocates every input, output and workspace buffer; a kernel writes only its outputs
 * (and its workspace) and never frees or keeps a pointer after it returns. A kernel returns 0 on success
 * and a nonzero status for an input it rejects (a shape the format does not allow, a size that does not
 * match, a corrupt block it refuses); the invalid-input corpus expects a nonzero status, never a crash.
 *
 * Backends: QGOLD_PLUGIN_CPU kernels get host pointers and stream == NULL. QGOLD_PLUGIN_CUDA kernels get
 * device pointers and the cudaStream_t to launch on, passed as void*; the kernel checks its arguments on
 * the host, enqueues its work on that stream (nothing that synchronizes or allocates: qgold bench
 * captures the calls in a CUDA graph) and returns; qgold synchronizes it. A call with arguments qgold
 * rejects (a size that does not match) gets NULL for every pointer and must return nonzero unlaunched.
 */
#ifndef QGOLD_PLUGIN_H
#define QGOLD_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version 1: the structs and function types below. A later version only appends fields at the ends of
 * structs (struct_size tells qgold which ones a plugin knows) or adds kinds. */
#define QGOLD_PLUGIN_ABI_VERSION 1u
#define QGOLD_PLUGIN_ENTRY_SYMBOL "qgold_plugin_entry"

typedef enum {
    QGOLD_PLUGIN_CPU = 1,  /* host pointers; stream is NULL */
    QGOLD_PLUGIN_CUDA = 2, /* device pointers; stream is a cudaStream_t */
} qgold_plugin_backend;

/* Kinds, each with one function type. The format and path strings name the data (qgold list shows them):
 *   CONVERT     format "fp16", path f32_to_f16 | f16_to_f32 | f32_to_bf16 | bf16_to_f32
 *   KQ_DEQUANT  format q4_k | q5_k | q6_k | q8_k, path "dequant"
 *   KQ_QUANTIZE format q4_k | q5_k | q6_k | q8_k, path "quantize"
 *   KQ_DOT      format q4_k | q5_k | q6_k,        path "dot_q8k"
 *   KQ_GEMV     format q4_k | q5_k | q6_k | q8_k, path "gemv"                                          */
typedef enum {
    QGOLD_PLUGIN_CONVERT = 1,
    QGOLD_PLUGIN_KQ_DEQUANT = 2,
    QGOLD_PLUGIN_KQ_QUANTIZE = 3,
    QGOLD_PLUGIN_KQ_DOT = 4,
    QGOLD_PLUGIN_KQ_GEMV = 5,
} qgold_plugin_kind;

/* Every function gets `user` (the descriptor's user pointer, e.g. to tell formats apart when one
 * function serves several), and last `workspace` (NULL unless workspace_bytes asked for bytes) and
 * `stream`. Element layouts:
 *   convert:  x and y of n elements; float32 as its 32 bits, fp16 and bf16 as their 16 bits.
 *   dequant:  blocks of nbytes bytes, rows x cols weights row-major, cols a multiple of 256;
 *             y is rows x cols float32 (dequant_f32) or fp16 bits (dequant_f16).
 *   quantize: x is rows x cols float32 row-major, blocks receives nbytes = rows * cols/256 * block bytes
 *             (bit-exact against the format's reference quantizer).
 *   dot:      one weight row and one Q8_K row of cols values; S[i] and M[i] are the exact integer sums of
 *             block i (qgold spec kquants.md), *result the float dot product. A kernel flagged
 *             QGOLD_PLUGIN_DOT_RESULT_ONLY computes only *result and gets S = M = NULL (a library whose
 *             dot does not expose its integer sums); it is then judged by the bound on *result alone.
 *   gemv:     w is rows x cols weights; x holds batch activation vectors of cols fp16 values each, one
 *             after the other; exactly one of y_f32 / y_f16 is non-NULL, batch x rows outputs, vector b
 *             at y + b*rows. batch is 1..16. */
typedef int (*qgold_plugin_convert_fn)(void *user, const void *x, void *y, size_t n, void *workspace, void *stream);
typedef int (*qgold_plugin_kq_dequant_f32_fn)(void *user, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols,
                                              float *y, void *workspace, void *stream);
typedef int (*qgold_plugin_kq_dequant_f16_fn)(void *user, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols,
                                              uint16_t *y, void *workspace, void *stream);
typedef int (*qgold_plugin_kq_quantize_fn)(void *user, const float *x, size_t rows, size_t cols, uint8_t *blocks,
                                           size_t nbytes, void *workspace, void *stream);
typedef int (*qgold_plugin_kq_dot_fn)(void *user, const uint8_t *wrow, const uint8_t *q8row, size_t cols, int32_t *S,
                                      int32_t *M, float *result, void *workspace, void *stream);
typedef int (*qgold_plugin_kq_gemv_fn)(void *user, const uint8_t *w, size_t nbytes, size_t rows, size_t cols,
                                       const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16, void *workspace,
                                       void *stream);
/* Optional: bytes of workspace one call needs for this shape (convert: rows = n, cols = batch = 1; dot:
 * rows = batch = 1). NULL or a return of 0: no workspace. */
typedef size_t (*qgold_plugin_workspace_fn)(void *user, size_t rows, size_t cols, size_t batch);

/* Numerics declaration (qgold spec numerics.md section 3). A zeroed struct means "the defaults of the
 * path's tier": exact for convert and dequant; for dot and gemv float32 accumulation in K steps
 * (u_acc 2^-24, d = K), output rounding of the output type (2^-24 float32, 2^-11 fp16), eta of the
 * output type (2^-149, 2^-24). The bounded check is
 *   |y - y*| <= u_out|y*| + (1 + u_out)(gamma_d(u_acc) sum|w x| + sum e_k |x_k|) + eta,
 * with e_k = u_w |w_k| (the weight is fed to the arithmetic rounded with relative error u_w). */
typedef struct {
    uint32_t tier;  /* 0: the path's tier; 1 exact; 2 bounded. A path the format pins (convert, dequant) is exact */
    uint32_t flags; /* QGOLD_PLUGIN_NONDETERMINISTIC: float atomics; judged by the bound only */
    double u_acc;   /* accumulator unit roundoff; 0: 2^-24 */
    int64_t d;      /* longest rounding chain of a product; 0: K */
    double u_out;   /* output rounding of the float32 output; 0: 2^-24 (the fp16 output always rounds at 2^-11) */
    double eta;     /* absolute underflow floor of the float32 output; 0: 2^-149 */
    double u_w;     /* relative weight representation error (e_k = u_w |w_k|); 0: exact decode */
} qgold_plugin_numerics;

#define QGOLD_PLUGIN_NONDETERMINISTIC 1u
/* qgold_plugin_kernel.flags */
#define QGOLD_PLUGIN_DOT_RESULT_ONLY 1u

typedef struct {
    uint32_t struct_size;     /* sizeof(qgold_plugin_kernel) as the plugin was compiled */
    uint32_t kind;            /* qgold_plugin_kind */
    uint32_t backend;         /* qgold_plugin_backend */
    uint32_t flags;           /* 0, or QGOLD_PLUGIN_DOT_RESULT_ONLY for a KQ_DOT kernel */
    const char *name;         /* the kernel's name in reports, e.g. "mylib_q4k_dequant_avx2" */
    const char *format;       /* "q4_k" */
    const char *path;         /* "dequant" */
    qgold_plugin_numerics numerics;
    void *user;               /* passed back as the first argument */
    qgold_plugin_workspace_fn workspace_bytes; /* optional */
    /* The function of the kind; for KQ_DEQUANT both fn and fn2 are set (f32 and fp16 outputs). */
    union {
        void (*any)(void);
        qgold_plugin_convert_fn convert;
        qgold_plugin_kq_dequant_f32_fn kq_dequant_f32;
        qgold_plugin_kq_quantize_fn kq_quantize;
        qgold_plugin_kq_dot_fn kq_dot;
        qgold_plugin_kq_gemv_fn kq_gemv;
    } fn;
    union {
        void (*any)(void);
        qgold_plugin_kq_dequant_f16_fn kq_dequant_f16;
    } fn2;
} qgold_plugin_kernel;

typedef struct {
    uint32_t struct_size;  /* sizeof(qgold_plugin_info) as the plugin was compiled */
    uint32_t abi_version;  /* QGOLD_PLUGIN_ABI_VERSION as the plugin was compiled */
    const char *name;      /* the plugin's name in reports */
    const char *version;   /* free text, e.g. the wrapped library's version; may be NULL */
    uint32_t n_kernels;    /* 1..256 */
    const qgold_plugin_kernel *kernels;
} qgold_plugin_info;

typedef int (*qgold_plugin_entry_fn)(uint32_t host_abi, qgold_plugin_info *out);

/* Declares the entry point with the visibility it needs: QGOLD_PLUGIN_EXPORT int qgold_plugin_entry(...). */
#if defined(_WIN32)
#define QGOLD_PLUGIN_EXPORT __declspec(dllexport)
#elif defined(__GNUC__)
#define QGOLD_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define QGOLD_PLUGIN_EXPORT
#endif

/* The entry point every plugin defines (C linkage also from C++). */
QGOLD_PLUGIN_EXPORT int qgold_plugin_entry(uint32_t host_abi, qgold_plugin_info *out);

#ifdef __cplusplus
}
#endif
#endif
