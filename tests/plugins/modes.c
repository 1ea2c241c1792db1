/* A Q4_K plugin (fp16 conversion, dequantization, dot with Q8_K, GEMV) built once correct and once per
 * defect: each -DQGP_BREAK_<X> build carries exactly one defect that `qgold verify` must name
 * (tests/suites/plugin.cmake pairs each build with the error it expects). Written from the block layout
 * (kquants spec) only, as an outside author would. */
#include <qgold/plugin.h>

#include <stdlib.h>
#include <string.h>
#if defined(QGP_BREAK_PROCESS)
#include <unistd.h>
#endif

static float f16_to_f32(uint16_t h)
{
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 31, m = h & 0x3FFu, b;
    if (e == 31) b = s | 0x7F800000u | m << 13;
    else if (e != 0) b = s | (e + 112) << 23 | m << 13;
    else if (m == 0) b = s;
    else {
        e = 113;
        while (!(m & 0x400u)) m <<= 1, e--;
        b = s | e << 23 | (m & 0x3FFu) << 13;
    }
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* float32 -> fp16, round to nearest even (numerics spec section 1). */
static uint16_t f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t s = (x >> 16) & 0x8000u, a = x & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint16_t)(s | 0x7E00u | (a >> 13 & 0x3FFu));
    if (a >= 0x477FF000u) return (uint16_t)(s | 0x7C00u);
    if (a < 0x38800000u) {
        if (a < 0x33000000u) return (uint16_t)s;
        uint32_t m = (a & 0x7FFFFFu) | 0x800000u, sh = 126 - (a >> 23), r = m >> sh, rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
        return (uint16_t)(s | (r + (rem > half || (rem == half && (r & 1)))));
    }
    uint32_t r = a - 0x38000000u, lo = r & 0x1FFFu;
    r >>= 13;
    return (uint16_t)(s | (r + (lo > 0x1000u || (lo == 0x1000u && (r & 1)))));
}

static void scale_min(const uint8_t *sc, int s, int *scale, int *min)
{
    *scale = s < 4 ? sc[s] & 63 : (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4;
    *min = s < 4 ? sc[s + 4] & 63 : (sc[s + 4] >> 4) | (sc[s] >> 6) << 4;
}

static int code(const uint8_t *qs, int e)
{
    uint8_t byte = qs[32 * (e / 64) + e % 32];
#if defined(QGP_BREAK_NIBBLE)
    return e % 64 < 32 ? byte >> 4 : byte & 15; /* defect: high nibble first */
#else
    return e % 64 < 32 ? byte & 15 : byte >> 4;
#endif
}

static void dequant_block(const uint8_t *b, float *y)
{
#if defined(QGP_BREAK_SEGV)
    /* defect: a "corrupt" block (d is inf or NaN) sends the kernel through a NULL table */
    static const float *table = NULL;
    if ((b[1] & 0x7C) == 0x7C) y[0] = table[b[0]];
#endif
    const float d = f16_to_f32((uint16_t)(b[0] | b[1] << 8)), dmin = f16_to_f32((uint16_t)(b[2] | b[3] << 8));
    for (int s = 0; s < 8; s++) {
        int scale, min;
        scale_min(b + 4, s, &scale, &min);
        const float ds = d * (float)scale, dm = dmin * (float)min;
        for (int l = 0; l < 32; l++) y[32 * s + l] = ds * (float)code(b + 16, 32 * s + l) - dm;
    }
}

static int bad_shape(size_t nbytes, size_t rows, size_t cols)
{
    return cols == 0 || rows == 0 || cols % 256 != 0 || nbytes != rows * (cols / 256) * 144;
}

static int dq_f32(void *user, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, float *y, void *ws, void *stream)
{
    (void)user, (void)ws, (void)stream;
#if defined(QGP_BREAK_HANG)
    for (volatile int spin = 1; spin;) {} /* defect: never returns */
#endif
#if defined(QGP_BREAK_ABORT)
    if (bad_shape(nbytes, rows, cols)) abort(); /* defect: an assertion instead of a status */
#endif
    if (bad_shape(nbytes, rows, cols)) return 1;
    size_t n = rows * cols;
#if defined(QGP_BREAK_UNWRITTEN)
    float last = 0;
    for (size_t i = 0; i < nbytes / 144; i++) {
        float tmp[256];
        dequant_block(blocks + 144 * i, tmp);
        memcpy(y + 256 * i, tmp, (i + 1 == nbytes / 144 ? 255 : 256) * sizeof(float)); /* defect: the last element is never written */
        last = tmp[255];
    }
    (void)last;
#else
    for (size_t i = 0; i < nbytes / 144; i++) dequant_block(blocks + 144 * i, y + 256 * i);
#endif
#if defined(QGP_BREAK_OVERRUN)
    y[n] = 0.0f; /* defect: one past the end */
#endif
#if defined(QGP_BREAK_HEAP)
    { /* defect: a scratch buffer freed twice: the allocator's lists are corrupt */
        float *volatile scratch = malloc(16 * sizeof(float));
        free(scratch);
        free(scratch);
    }
#endif
    (void)n;
    return 0;
}

static int dq_f16(void *user, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, uint16_t *y, void *ws, void *stream)
{
    (void)user, (void)ws, (void)stream;
    if (bad_shape(nbytes, rows, cols)) return 1;
    float tmp[256];
    for (size_t i = 0; i < nbytes / 144; i++) {
        dequant_block(blocks + 144 * i, tmp);
        for (int e = 0; e < 256; e++) y[256 * i + e] = f32_to_f16(tmp[e]);
    }
    return 0;
}

/* y = W x with W dequantized row by row; float32 accumulation in index order (deterministic, and each
 * column independent of the batch). */
static int gemv(void *user, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch, float *y32,
                uint16_t *y16, void *ws, void *stream)
{
    (void)user, (void)stream;
    if (bad_shape(nbytes, rows, cols) || batch < 1 || batch > 16 || (y32 == NULL) == (y16 == NULL) || x == NULL) return 1;
    float *row = ws; /* workspace: one dequantized row (workspace_bytes) */
#if defined(QGP_BREAK_NONDET)
    static unsigned calls; /* defect: the reduction order changes from call to call, as with float atomics */
    const size_t rot = (calls++ % 3) * 256 % cols;
#elif defined(QGP_BREAK_PROCESS)
    const size_t rot = ((size_t)getpid() * 256) % cols; /* defect: the order depends on the process */
#else
    const size_t rot = 0;
#endif
    (void)rot;
    for (size_t r = 0; r < rows; r++) {
        for (size_t i = 0; i < cols / 256; i++) dequant_block(w + (r * (cols / 256) + i) * 144, row + 256 * i);
        for (size_t b = 0; b < batch; b++) {
            float acc = 0.0f;
#if defined(QGP_BREAK_BATCH)
            for (size_t k = 0; k < cols; k++) {
                size_t kk = batch > 1 ? (k + 256 * (b % 2)) % cols : k; /* defect: odd columns of a batch take another order */
                acc += row[kk] * f16_to_f32(x[b * cols + kk]);
            }
#else
            for (size_t j = 0; j < cols; j++) {
                size_t k = (j + rot) % cols;
#if defined(QGP_BREAK_F16ACC)
                acc = f16_to_f32(f32_to_f16(acc + row[k] * f16_to_f32(x[b * cols + k]))); /* defect: fp16 accumulator */
#else
                acc += row[k] * f16_to_f32(x[b * cols + k]);
#endif
            }
#endif
            if (y32) y32[b * rows + r] = acc;
            else y16[b * rows + r] = f32_to_f16(acc);
        }
    }
    return 0;
}

static size_t gemv_ws(void *user, size_t rows, size_t cols, size_t batch)
{
    (void)user, (void)rows, (void)batch;
    return cols * sizeof(float);
}

/* Q4_K . Q8_K: S and M per block exactly (integers), the float result as sum_i dy_i (D_i S_i - Dm_i M_i). */
static int dot(void *user, const uint8_t *w, const uint8_t *q8, size_t cols, int32_t *S, int32_t *M, float *result, void *ws, void *stream)
{
    (void)user, (void)ws, (void)stream;
    if (cols == 0 || cols % 256 != 0) return 1;
    float sum = 0.0f;
    for (size_t i = 0; i < cols / 256; i++) {
        const uint8_t *b = w + 144 * i, *q = q8 + 292 * i;
        float dy;
        memcpy(&dy, q, 4);
        int32_t s32 = 0, m32 = 0;
        for (int s = 0; s < 8; s++) {
            int scale, min, acc = 0;
            scale_min(b + 4, s, &scale, &min);
            for (int l = 0; l < 32; l++) acc += code(b + 16, 32 * s + l) * (int8_t)q[4 + 32 * s + l];
            int16_t bs0, bs1;
            memcpy(&bs0, q + 260 + 4 * s, 2);
            memcpy(&bs1, q + 262 + 4 * s, 2);
            s32 += scale * acc;
            m32 += min * (bs0 + bs1);
        }
        S[i] = s32;
        M[i] = m32;
        const float D = f16_to_f32((uint16_t)(b[0] | b[1] << 8)), Dm = f16_to_f32((uint16_t)(b[2] | b[3] << 8));
        sum += D * dy * (float)s32 - Dm * dy * (float)m32;
    }
    *result = sum;
    return 0;
}

static int f32_to_f16_convert(void *user, const void *x, void *y, size_t n, void *ws, void *stream)
{
    (void)user, (void)ws, (void)stream;
    const uint32_t *in = x;
    uint16_t *out = y;
    for (size_t i = 0; i < n; i++) {
        float f;
        memcpy(&f, &in[i], 4);
        out[i] = f32_to_f16(f);
    }
    return 0;
}

#if defined(QGP_BREAK_QUANTIZE)
/* defect: a quantizer that writes all-zero blocks (the runner must call it and compare its bytes) */
static int quantize_zero(void *user, const float *x, size_t rows, size_t cols, uint8_t *blocks, size_t nbytes, void *ws, void *stream)
{
    (void)user, (void)x, (void)rows, (void)cols, (void)ws, (void)stream;
    memset(blocks, 0, nbytes);
    return 0;
}
#endif

#define K(kind_, name_, fmt_, path_, f_, f2_, ws_) \
    {sizeof(qgold_plugin_kernel), kind_, QGOLD_PLUGIN_CPU, 0, name_, fmt_, path_, {0, 0, 0, 0, 0, 0, 0}, NULL, ws_, {.any = (void (*)(void))(f_)}, {.any = (void (*)(void))(f2_)}}

static qgold_plugin_kernel kernels[] = {
    K(QGOLD_PLUGIN_KQ_DEQUANT, "modes_q4k_dequant", "q4_k", "dequant", dq_f32, dq_f16, NULL),
    K(QGOLD_PLUGIN_KQ_GEMV, "modes_q4k_gemv", "q4_k", "gemv", gemv, NULL, gemv_ws),
    K(QGOLD_PLUGIN_KQ_DOT, "modes_q4k_dot", "q4_k", "dot_q8k", dot, NULL, NULL),
    K(QGOLD_PLUGIN_CONVERT, "modes_f32_to_f16", "fp16", "f32_to_f16", f32_to_f16_convert, NULL, NULL),
#if defined(QGP_BREAK_QUANTIZE)
    K(QGOLD_PLUGIN_KQ_QUANTIZE, "modes_q4k_quantize", "q4_k", "quantize", quantize_zero, NULL, NULL),
#endif
};

#if defined(QGP_BREAK_NOENTRY)
/* defect: the table is exported under another name, and there is no entry point */
QGOLD_PLUGIN_EXPORT const qgold_plugin_kernel *modes_kernels(void) { return kernels; }
#else
QGOLD_PLUGIN_EXPORT int qgold_plugin_entry(uint32_t host_abi, qgold_plugin_info *out)
{
    (void)host_abi;
#if defined(QGP_BREAK_KIND)
    kernels[1].kind = 99; /* defect: no such kind */
#elif defined(QGP_BREAK_NULLFN)
    kernels[0].fn2.any = NULL; /* defect: dequant without its fp16 output */
#elif defined(QGP_BREAK_NUMERICS)
    kernels[1].numerics.u_acc = 0.5; /* defect: a unit roundoff that bounds nothing */
#elif defined(QGP_BREAK_TIER)
    kernels[0].numerics.tier = 2; /* defect: a bounded declaration for a bit-exact path */
#elif defined(QGP_AS_CUDA)
    kernels[0].backend = QGOLD_PLUGIN_CUDA; /* not a defect: a CUDA descriptor, for a qgold without CUDA to skip */
#endif
    *out = (qgold_plugin_info){sizeof *out, QGOLD_PLUGIN_ABI_VERSION, "modes", "test", sizeof kernels / sizeof kernels[0], kernels};
#if defined(QGP_BREAK_ABI)
    out->abi_version = QGOLD_PLUGIN_ABI_VERSION + 1; /* defect: built against a newer ABI */
#endif
#if defined(QGP_BREAK_ABIZERO)
    out->abi_version = 0; /* defect: no ABI version stated */
#endif
#if defined(QGP_BREAK_EMPTY)
    out->n_kernels = 0; /* defect: a plugin without kernels */
#endif
#if defined(QGP_BREAK_ENTRYCRASH)
    {
        volatile int *volatile nowhere = NULL; /* defect: the entry point itself crashes */
        *nowhere = 1;
    }
#endif
    return 0;
}
#endif
