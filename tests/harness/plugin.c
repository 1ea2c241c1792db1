/* Plugin loader and trampolines (plugin_load.h). */
#include "plugin_load.h"

#include "qgold/kquants.h"
#include "sha256.h"
#if QG_HAVE_CUDA
#include "qgold/cuda.h"
#endif

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The ABI's kind numbers are qgold's own (qgold/registry.h), so a descriptor's kind is a qg_kind. */
_Static_assert(QGOLD_PLUGIN_CONVERT == (int)QG_KIND_CONVERT, "kind numbers");
_Static_assert(QGOLD_PLUGIN_KQ_DEQUANT == (int)QG_KIND_KQ_DEQUANT, "kind numbers");
_Static_assert(QGOLD_PLUGIN_KQ_QUANTIZE == (int)QG_KIND_KQ_QUANTIZE, "kind numbers");
_Static_assert(QGOLD_PLUGIN_KQ_DOT == (int)QG_KIND_KQ_DOT, "kind numbers");
_Static_assert(QGOLD_PLUGIN_KQ_GEMV == (int)QG_KIND_KQ_GEMV, "kind numbers");

/* Struct sizes of ABI version 1: a plugin that states less is malformed. */
#define QGP_V1_KERNEL_SIZE ((uint32_t)sizeof(qgold_plugin_kernel))
#define QGP_V1_INFO_SIZE ((uint32_t)sizeof(qgold_plugin_info))
/* Numerics declarations beyond these are not a kernel's arithmetic but a mistake: a bound with unit
 * roundoff above 1/16 says nothing, and d above 2^40 exceeds any reduction qgold can run. */
#define QGP_MAX_U 0x1p-4
#define QGP_MAX_ETA 0x1p-10
#define QGP_MAX_D ((int64_t)1 << 40)

static const qgp_kernel *g_active;
static qg_sha256 g_hash;
static uint64_t g_calls;

void qgp_activate(const qgp_kernel *k) { g_active = k; }

void qgp_hash_reset(void)
{
    qg_sha256_init(&g_hash);
    g_calls = 0;
}

void qgp_hash_final(unsigned char out[32], uint64_t *calls)
{
    qg_sha256_final(&g_hash, out);
    if (calls) *calls = g_calls;
    qgp_hash_reset();
}

static void hash_out(const void *p, size_t n)
{
    if (p == NULL) return;
    qg_sha256_update(&g_hash, p, n);
    g_calls++;
}

/* ---- one call of a plugin function --------------------------------------------------------------
 * A trampoline gathers its call's arguments and buffers into a qgp_call, and invoke() runs it on the
 * kernel's backend: a CPU kernel gets the host buffers; a CUDA kernel gets device copies made by
 * qg_cuda_run (inputs uploaded, outputs allocated through the output hooks holding the host buffer's
 * bytes and copied back, the workspace zeroed) and the stream, and qgold synchronizes. Everything else
 * (the reference's argument checks, the mapping of a rejection, the output hash) is the trampoline's and
 * the same for both backends. */

typedef enum { OP_CONVERT, OP_DEQUANT_F32, OP_DEQUANT_F16, OP_QUANTIZE, OP_DOT, OP_GEMV } qgp_op;
typedef enum { QGP_IN, QGP_OUT } qgp_role;
enum { QGP_MAX_BUFS = 6 };

typedef struct {
    const qgold_plugin_kernel *d;
    qgp_op op;
    size_t n, rows, cols, batch, nbytes; /* the call's sizes, passed as given */
    size_t nbuf;                        /* buffers, in the order of the function's pointer arguments */
    qgp_role role[QGP_MAX_BUFS];
    void *host[QGP_MAX_BUFS];
    size_t bytes[QGP_MAX_BUFS];
    int status;                         /* the plugin function's return value */
} qgp_call;

/* The workspace is capped at 1 GiB (a larger request is a mistake, not a need). */
#define QGP_MAX_WORKSPACE ((size_t)1 << 30)

static void add_buf(qgp_call *c, qgp_role role, const void *host, size_t bytes)
{
    c->role[c->nbuf] = role;
    c->host[c->nbuf] = (void *)host; /* an input is only read: by the plugin on the CPU, by the upload on CUDA */
    c->bytes[c->nbuf] = host != NULL ? bytes : 0;
    c->nbuf++;
}

/* a * b, or 0 (no buffer) when it does not fit: such a size only comes with arguments qgold rejects. */
static size_t mul_or_0(size_t a, size_t b) { return b != 0 && a > SIZE_MAX / b ? 0 : a * b; }

/* The plugin's function of the call, with buffer pointers p (host or device) and the workspace. */
static int call_fn(qgp_call *c, void *const *p, void *ws, void *stream)
{
    const qgold_plugin_kernel *d = c->d;
    switch (c->op) {
    case OP_CONVERT: return d->fn.convert(d->user, p[0], p[1], c->n, ws, stream);
    case OP_DEQUANT_F32: return d->fn.kq_dequant_f32(d->user, p[0], c->nbytes, c->rows, c->cols, p[1], ws, stream);
    case OP_DEQUANT_F16: return d->fn2.kq_dequant_f16(d->user, p[0], c->nbytes, c->rows, c->cols, p[1], ws, stream);
    case OP_QUANTIZE: return d->fn.kq_quantize(d->user, p[0], c->rows, c->cols, p[1], c->nbytes, ws, stream);
    case OP_DOT: return d->fn.kq_dot(d->user, p[0], p[1], c->cols, p[2], p[3], p[4], ws, stream);
    default: return d->fn.kq_gemv(d->user, p[0], c->nbytes, c->rows, c->cols, p[1], c->batch, p[2], p[3], ws, stream);
    }
}

#if QG_HAVE_CUDA
/* qg_cuda_run's launcher: dev holds the call's buffers, then the workspace. A rejection stops the run. */
static int launch_plugin(const void *ctx, void *const *dev, void *stream)
{
    qgp_call *c = (qgp_call *)ctx;
    c->status = call_fn(c, dev, dev[c->nbuf], stream);
    return c->status != 0 ? QG_ERR_generic : QG_ERR_ok;
}
#endif

/* Runs the call on the active kernel's backend. Returns 0 with c->status the plugin's own status, or a
 * qgold error of the run itself (no workspace, a device error, a CUDA output written outside its bounds). */
static int invoke(qgp_call *c, int ref_rejects, size_t ws_rows, size_t ws_cols, size_t ws_batch)
{
    const qgold_plugin_kernel *d = c->d;
    const int no_device_buffers = g_active->cuda && ref_rejects;
    size_t wsb = d->workspace_bytes && !no_device_buffers ? d->workspace_bytes(d->user, ws_rows, ws_cols, ws_batch) : 0;
    if (wsb > QGP_MAX_WORKSPACE) return QG_ERR_alloc_failed;
    c->status = 0;
    if (!g_active->cuda) {
        void *ws = wsb ? calloc(1, wsb) : NULL;
        if (wsb && ws == NULL) return QG_ERR_alloc_failed;
        c->status = call_fn(c, c->host, ws, NULL);
        free(ws);
        return QG_ERR_ok;
    }
#if QG_HAVE_CUDA
    qg_cuda_buf b[QGP_MAX_BUFS + 1];
    for (size_t i = 0; i < c->nbuf; i++) {
        b[i].role = c->role[i] == QGP_IN ? QG_CUDA_IN : QG_CUDA_OUT;
        b[i].host = c->host[i];
        b[i].bytes = c->bytes[i];
    }
    b[c->nbuf] = (qg_cuda_buf){QG_CUDA_SCRATCH, NULL, wsb};
    int rc = qg_cuda_run(b, c->nbuf + 1, launch_plugin, c);
    return c->status != 0 ? QG_ERR_ok : rc;
#else
    return QG_ERR_unsupported; /* not reached: verify does not run CUDA kernels in a build without CUDA */
#endif
}

/* The active descriptor; NULL (and the call fails) when none is active or the type is not its format. */
static const qgold_plugin_kernel *active(int ktype)
{
    if (g_active == NULL) return NULL;
    if (ktype >= 0 && qg_kq_from_name(g_active->format) != ktype) return NULL;
    return g_active->desc;
}

/* A plugin's status means only "rejected" (any nonzero value): qgold does not ask plugins for its own
 * error numbers. A rejection is reported under the reason the reference's argument checks give for the
 * same call (so the invalid-input corpus, which names that reason, applies to plugins unchanged); a
 * rejection of arguments the reference accepts is QG_ERR_generic. A call the reference rejects reaches a
 * CUDA kernel with its sizes as given and no device buffers (NULL pointers): nothing is allocated for a
 * shape that does not exist (nor a workspace), and the kernel must return nonzero without launching. */
static int rejected(int ref_check) { return ref_check != QG_ERR_ok ? ref_check : QG_ERR_generic; }

/* Runs c (buffers sized only when ref_check accepts the call); returns the trampoline's status. */
static int run_call(qgp_call *c, int ref_check, size_t ws_rows, size_t ws_cols, size_t ws_batch)
{
    if (ref_check != QG_ERR_ok)
        for (size_t i = 0; i < c->nbuf; i++) c->bytes[i] = 0;
    int rc = invoke(c, ref_check != QG_ERR_ok, ws_rows, ws_cols, ws_batch);
    if (rc != QG_ERR_ok) return rc;
    return c->status != 0 ? rejected(ref_check) : QG_ERR_ok;
}

static int tr_convert(const void *x, void *y, size_t n)
{
    const qgold_plugin_kernel *d = active(-1);
    if (d == NULL) return QG_ERR_generic;
    const size_t ybytes = mul_or_0(n, qg_elem_size(g_active->row.out_elem)), xbytes = mul_or_0(n, qg_elem_size(g_active->row.in_elem));
    qgp_call c = {.d = d, .op = OP_CONVERT, .n = n};
    add_buf(&c, QGP_IN, x, xbytes);
    add_buf(&c, QGP_OUT, y, ybytes);
    const int check = x == NULL || y == NULL || (n > 0 && (xbytes == 0 || ybytes == 0)) ? QG_ERR_argument_invalid : QG_ERR_ok;
    int rc = run_call(&c, check, n, 1, 1);
    if (rc == QG_ERR_ok) hash_out(y, ybytes);
    return rc;
}

/* Dequantization to float32 (esz 4) or fp16 bits (esz 2). */
static int dequant(qgp_op op, qg_ktype t, const uint8_t *b, size_t nbytes, size_t rows, size_t cols, void *y, size_t esz)
{
    const qgold_plugin_kernel *d = active((int)t);
    if (d == NULL) return QG_ERR_argument_invalid;
    const int check = b == NULL || y == NULL ? QG_ERR_argument_invalid : qg_kq_check_shape(t, rows, cols, nbytes);
    qgp_call c = {.d = d, .op = op, .nbytes = nbytes, .rows = rows, .cols = cols};
    add_buf(&c, QGP_IN, b, nbytes);
    add_buf(&c, QGP_OUT, y, mul_or_0(mul_or_0(rows, cols), esz));
    int rc = run_call(&c, check, rows, cols, 1);
    if (rc == QG_ERR_ok) hash_out(y, rows * cols * esz);
    return rc;
}

static int tr_dequant_f32(qg_ktype t, const uint8_t *b, size_t nbytes, size_t rows, size_t cols, float *y)
{
    return dequant(OP_DEQUANT_F32, t, b, nbytes, rows, cols, y, 4);
}

static int tr_dequant_f16(qg_ktype t, const uint8_t *b, size_t nbytes, size_t rows, size_t cols, uint16_t *y)
{
    return dequant(OP_DEQUANT_F16, t, b, nbytes, rows, cols, y, 2);
}

static int tr_quantize(qg_ktype t, const float *x, size_t rows, size_t cols, uint8_t *blocks, size_t nbytes)
{
    const qgold_plugin_kernel *d = active((int)t);
    if (d == NULL) return QG_ERR_argument_invalid;
    const int check = x == NULL || blocks == NULL ? QG_ERR_argument_invalid : qg_kq_check_shape(t, rows, cols, nbytes);
    qgp_call c = {.d = d, .op = OP_QUANTIZE, .nbytes = nbytes, .rows = rows, .cols = cols};
    add_buf(&c, QGP_IN, x, mul_or_0(mul_or_0(rows, cols), 4));
    add_buf(&c, QGP_OUT, blocks, nbytes);
    int rc = run_call(&c, check, rows, cols, 1);
    if (rc == QG_ERR_ok) hash_out(blocks, nbytes);
    return rc;
}

static int tr_dot(qg_ktype t, const uint8_t *w, const uint8_t *q8, size_t cols, int32_t *S, int32_t *M, float *r)
{
    const qgold_plugin_kernel *d = active((int)t);
    if (d == NULL) return QG_ERR_argument_invalid;
    const int result_only = (d->flags & QGOLD_PLUGIN_DOT_RESULT_ONLY) != 0;
    const size_t nb = cols / 256;
    const int check = !w || !q8 || !S || !M || !r ? QG_ERR_argument_invalid : qg_kq_check_shape(t, 1, cols, nb * qg_kq_block_bytes(t));
    qgp_call c = {.d = d, .op = OP_DOT, .cols = cols};
    add_buf(&c, QGP_IN, w, nb * qg_kq_block_bytes(t));
    add_buf(&c, QGP_IN, q8, nb * qg_kq_block_bytes(QG_Q8_K));
    add_buf(&c, QGP_OUT, result_only ? NULL : S, nb * 4);
    add_buf(&c, QGP_OUT, result_only ? NULL : M, nb * 4);
    add_buf(&c, QGP_OUT, r, 4);
    int rc = run_call(&c, check, 1, cols, 1);
    /* A result-only kernel's integer sums are the reference's: only *result is the kernel's to judge. */
    float unused;
    if (rc == QG_ERR_ok && result_only && qg_kq_dot_q8k_ref(t, w, q8, cols, S, M, &unused) != QG_ERR_ok) rc = rejected(check);
    if (rc != QG_ERR_ok) return rc;
    hash_out(S, nb * 4);
    hash_out(M, nb * 4);
    hash_out(r, 4);
    return 0;
}

static int tr_gemv(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                   float *y32, uint16_t *y16)
{
    const qgold_plugin_kernel *d = active((int)t);
    if (d == NULL) return QG_ERR_argument_invalid;
    const int check = qg_kq_check_gemv(t, w, nbytes, rows, cols, x, batch, y32, y16);
    qgp_call c = {.d = d, .op = OP_GEMV, .nbytes = nbytes, .rows = rows, .cols = cols, .batch = batch};
    add_buf(&c, QGP_IN, w, nbytes);
    add_buf(&c, QGP_IN, x, mul_or_0(mul_or_0(cols, batch), 2));
    add_buf(&c, QGP_OUT, y32, mul_or_0(mul_or_0(rows, batch), 4));
    add_buf(&c, QGP_OUT, y16, mul_or_0(mul_or_0(rows, batch), 2));
    int rc = run_call(&c, check, rows, cols, batch);
    if (rc != QG_ERR_ok) return rc;
    hash_out(y32, rows * batch * 4);
    hash_out(y16, rows * batch * 2);
    return 0;
}

/* A finite value in [0, max]. */
static int in_range(double v, double max) { return isfinite(v) && v >= 0 && v <= max; }

/* The row's numerics from the declaration, against the tier the path prescribes (the reference row's).
 * A weight representation error u_w is folded into the accumulator's unit roundoff: for d >= 1,
 * gamma_d(u_acc + u_w) >= gamma_d(u_acc) + u_w, so the bound with u_acc + u_w and e_k = 0 contains the
 * bound with e_k = u_w |w_k| (sum_k e_k |x_k| = u_w sum|w x|). */
static int numerics_of(const qgold_plugin_kernel *d, const qg_kernel *ref, qg_kernel *row, char *why, size_t len)
{
    const qgold_plugin_numerics *n = &d->numerics;
    if (n->tier > 2) return snprintf(why, len, "tier %u (0 default, 1 exact, 2 bounded)", n->tier), 1;
    if (n->flags & ~QGOLD_PLUGIN_NONDETERMINISTIC) return snprintf(why, len, "unknown flags 0x%x", n->flags), 1;
    if (n->flags & QGOLD_PLUGIN_NONDETERMINISTIC)
        return snprintf(why, len, "flag NONDETERMINISTIC: this qgold checks determinism on every call and judges no kernel by the bound alone"), 1;
    if (!in_range(n->u_acc, QGP_MAX_U) || !in_range(n->u_out, QGP_MAX_U) || !in_range(n->u_w, QGP_MAX_U) || !in_range(n->eta, QGP_MAX_ETA))
        return snprintf(why, len, "u_acc %g, u_out %g, u_w %g must lie in [0, 2^-4] and eta %g in [0, 2^-10]", n->u_acc, n->u_out, n->u_w,
                        n->eta), 1;
    if (n->d < 0 || n->d > QGP_MAX_D) return snprintf(why, len, "d %lld outside 0..2^40", (long long)n->d), 1;
    if (ref->numerics.tier == QG_TIER_EXACT) {
        if (n->tier == 2 || n->u_acc != 0 || n->u_out != 0 || n->u_w != 0 || n->eta != 0 || n->d != 0)
            return snprintf(why, len, "path %s of %s is bit-exact by the format's spec: it takes no rounding declaration", ref->path,
                            ref->format), 1;
        row->numerics = ref->numerics;
        row->numerics_f16 = ref->numerics_f16;
        return 0;
    }
    if (n->tier == 1)
        return snprintf(why, len, "path %s of %s is judged by the bound (tier 2); an exact declaration does not apply", ref->path,
                        ref->format), 1;
    qg_numerics f32 = QG_NUMERICS_F32ACC_F32OUT, f16 = QG_NUMERICS_F32ACC_F16OUT;
    const double u_acc = (n->u_acc > 0 ? n->u_acc : 0x1p-24) + n->u_w;
    f32.u_acc = f16.u_acc = u_acc;
    f32.d_fixed = f16.d_fixed = (long)n->d;
    if (n->u_out > 0) f32.u_out = n->u_out;
    if (n->eta > 0) f32.eta = n->eta;
    if (f32.u_out > f16.u_out) f16.u_out = f32.u_out;
    if (f32.eta > f16.eta) f16.eta = f32.eta;
    row->numerics = f32;
    row->numerics_f16 = f16;
    return 0;
}

static int bad_kernel(qg_err *e, int code, const char *file, size_t i, const qgold_plugin_kernel *d, const char *fmt, const char *why)
{
    char nm[80] = "?";
    if (d->name != NULL) snprintf(nm, sizeof nm, "%s", d->name);
    return qg_err_set(e, code, "%s: kernel %zu (%s): %s%s", file, i, nm, fmt, why);
}

static int str_ok(const char *s, size_t max) { return s != NULL && s[0] != '\0' && strnlen(s, max) < max; }

static int validate_kernel(const char *file, size_t i, const qgold_plugin_kernel *d, qgp_kernel *out, qg_err *e)
{
    char why[300];
    if (d->struct_size < QGP_V1_KERNEL_SIZE) {
        snprintf(why, sizeof why, "struct_size %u, version 1's is %u", d->struct_size, QGP_V1_KERNEL_SIZE);
        return bad_kernel(e, QG_ERR_plugin_abi_invalid, file, i, d, "", why);
    }
    if (!str_ok(d->name, sizeof out->name)) return bad_kernel(e, QG_ERR_plugin_kernel_invalid, file, i, d, "", "name is NULL, empty or too long");
    if (!str_ok(d->format, sizeof out->format) || !str_ok(d->path, sizeof out->path))
        return bad_kernel(e, QG_ERR_plugin_kernel_invalid, file, i, d, "", "format or path is NULL, empty or too long");
    if (d->kind < QGOLD_PLUGIN_CONVERT || d->kind > QGOLD_PLUGIN_KQ_GEMV) {
        snprintf(why, sizeof why, "unknown kind %u (convert 1, kq_dequant 2, kq_quantize 3, kq_dot 4, kq_gemv 5)", d->kind);
        return bad_kernel(e, QG_ERR_plugin_kernel_invalid, file, i, d, "", why);
    }
    if (d->backend != QGOLD_PLUGIN_CPU && d->backend != QGOLD_PLUGIN_CUDA) {
        snprintf(why, sizeof why, "unknown backend %u (cpu 1, cuda 2)", d->backend);
        return bad_kernel(e, QG_ERR_plugin_kernel_invalid, file, i, d, "", why);
    }
    if ((d->flags & ~QGOLD_PLUGIN_DOT_RESULT_ONLY) != 0 || (d->flags != 0 && d->kind != QGOLD_PLUGIN_KQ_DOT)) {
        snprintf(why, sizeof why, "flags 0x%x (only QGOLD_PLUGIN_DOT_RESULT_ONLY, and only on a kq_dot kernel)", d->flags);
        return bad_kernel(e, QG_ERR_plugin_kernel_invalid, file, i, d, "", why);
    }
    const qg_kernel *ref = qg_registry_find(d->format, d->path, QG_BACKEND_REF);
    if (ref == NULL) {
        snprintf(why, sizeof why, "no format/path %s/%s in qgold (qgold list shows them)", d->format, d->path);
        return bad_kernel(e, QG_ERR_plugin_kernel_invalid, file, i, d, "", why);
    }
    if ((int)ref->kind != (int)d->kind) {
        snprintf(why, sizeof why, "kind %u, but %s/%s is of kind %d", d->kind, d->format, d->path, (int)ref->kind);
        return bad_kernel(e, QG_ERR_plugin_kernel_invalid, file, i, d, "", why);
    }
    if (d->fn.any == NULL || (d->kind == QGOLD_PLUGIN_KQ_DEQUANT && d->fn2.any == NULL))
        return bad_kernel(e, QG_ERR_plugin_kernel_invalid, file, i, d, "",
                          d->kind == QGOLD_PLUGIN_KQ_DEQUANT ? "fn (float32 output) or fn2 (fp16 output) is NULL" : "fn is NULL");
    memset(out, 0, sizeof *out);
    out->row = *ref;
    if (numerics_of(d, ref, &out->row, why, sizeof why) != 0)
        return bad_kernel(e, QG_ERR_plugin_numerics_invalid, file, i, d, "numerics: ", why);
    out->desc = d;
    snprintf(out->name, sizeof out->name, "%s", d->name);
    snprintf(out->format, sizeof out->format, "%s", d->format);
    snprintf(out->path, sizeof out->path, "%s", d->path);
    out->cuda = d->backend == QGOLD_PLUGIN_CUDA;
    out->row.format = out->format;
    out->row.path = out->path;
    out->row.name = out->name;
    /* The backend field only labels: every row is called with host pointers; the trampolines give a CUDA
     * kernel (marked by `cuda`) device copies of the buffers (invoke). */
    out->row.backend = out->cuda ? QG_BACKEND_CUDA : QG_BACKEND_REF;
    memset(&out->row.fn, 0, sizeof out->row.fn);
    switch (d->kind) {
    case QGOLD_PLUGIN_CONVERT: out->row.fn.convert = tr_convert; break;
    case QGOLD_PLUGIN_KQ_DEQUANT:
        out->row.fn.kq_dequant.f32 = tr_dequant_f32;
        out->row.fn.kq_dequant.f16 = tr_dequant_f16;
        break;
    case QGOLD_PLUGIN_KQ_QUANTIZE: out->row.fn.kq_quantize = tr_quantize; break;
    case QGOLD_PLUGIN_KQ_DOT: out->row.fn.kq_dot = tr_dot; break;
    default: out->row.fn.kq_gemv = tr_gemv; break;
    }
    return QG_ERR_ok;
}

int qgp_load(const char *file, qgp_plugin **out, qg_err *e)
{
    *out = NULL;
    qgp_plugin *p = calloc(1, sizeof *p);
    if (p == NULL) return qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
    snprintf(p->file, sizeof p->file, "%s", file);
    /* A bare name would be searched on the library path; a plugin is always a file the user named. */
    char local[1100];
    snprintf(local, sizeof local, "%s%s", strchr(file, '/') ? "" : "./", file);
    dlerror();
    p->handle = dlopen(local, RTLD_NOW | RTLD_LOCAL);
    if (p->handle == NULL) {
        const char *why = dlerror();
        qg_err_set(e, QG_ERR_plugin_open_failed, "%s: cannot load: %s", file, why ? why : "unknown reason");
        free(p);
        return e->code;
    }
    qgold_plugin_entry_fn entry;
    void *sym = dlsym(p->handle, QGOLD_PLUGIN_ENTRY_SYMBOL);
    memcpy(&entry, &sym, sizeof entry); /* POSIX: a function pointer has an object pointer's representation */
    int rc = QG_ERR_ok;
    qgold_plugin_info info;
    memset(&info, 0, sizeof info);
    if (sym == NULL) {
        rc = qg_err_set(e, QG_ERR_plugin_entry_missing, "%s: no symbol %s: not a qgold plugin (define it with QGOLD_PLUGIN_EXPORT from qgold/plugin.h)",
                        file, QGOLD_PLUGIN_ENTRY_SYMBOL);
    } else {
        int erc = entry(QGOLD_PLUGIN_ABI_VERSION, &info);
        if (info.abi_version > QGOLD_PLUGIN_ABI_VERSION)
            rc = qg_err_set(e, QG_ERR_plugin_abi_newer, "%s: built against plugin ABI %u; this qgold supports ABI %u: use a newer qgold, or rebuild the plugin against this qgold's qgold/plugin.h",
                            file, info.abi_version, QGOLD_PLUGIN_ABI_VERSION);
        else if (erc != 0)
            rc = qg_err_set(e, QG_ERR_plugin_entry_failed, "%s: %s returned %d for host ABI %u: the plugin refused to load (its own reason, if it gives one, is on stderr)",
                            file, QGOLD_PLUGIN_ENTRY_SYMBOL, erc, QGOLD_PLUGIN_ABI_VERSION);
        else if (info.abi_version == 0 || info.struct_size < QGP_V1_INFO_SIZE)
            rc = qg_err_set(e, QG_ERR_plugin_abi_invalid, "%s: abi_version %u, struct_size %u: set abi_version = QGOLD_PLUGIN_ABI_VERSION and struct_size = sizeof(qgold_plugin_info)",
                            file, info.abi_version, info.struct_size);
        else if (!str_ok(info.name, sizeof p->name))
            rc = qg_err_set(e, QG_ERR_plugin_entry_failed, "%s: the plugin name is NULL, empty or longer than %zu bytes", file, sizeof p->name - 1);
        else if (info.n_kernels == 0 || info.n_kernels > QGP_MAX_KERNELS || info.kernels == NULL)
            rc = qg_err_set(e, QG_ERR_plugin_entry_failed, "%s: n_kernels %u (must be 1..%d) with kernels %s", file, info.n_kernels, QGP_MAX_KERNELS,
                            info.kernels ? "set" : "NULL");
    }
    if (rc == QG_ERR_ok) {
        snprintf(p->name, sizeof p->name, "%s", info.name);
        snprintf(p->version, sizeof p->version, "%s", info.version ? info.version : "");
        p->abi = info.abi_version;
        p->n = info.n_kernels;
        p->k = calloc(p->n, sizeof *p->k);
        if (p->k == NULL) rc = qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
        for (size_t i = 0; i < p->n && rc == QG_ERR_ok; i++) rc = validate_kernel(file, i, &info.kernels[i], &p->k[i], e);
        for (size_t i = 0; i < p->n && rc == QG_ERR_ok; i++)
            for (size_t j = 0; j < i && rc == QG_ERR_ok; j++)
                if (strcmp(p->k[i].name, p->k[j].name) == 0)
                    rc = qg_err_set(e, QG_ERR_plugin_kernel_invalid, "%s: kernels %zu and %zu have the same name %s", file, j, i, p->k[i].name);
    }
    if (rc != QG_ERR_ok) {
        qgp_unload(p);
        return rc;
    }
    *out = p;
    return QG_ERR_ok;
}

void qgp_unload(qgp_plugin *p)
{
    if (p == NULL) return;
    if (g_active != NULL && p->k != NULL && g_active >= p->k && g_active < p->k + p->n) g_active = NULL;
    free(p->k);
    if (p->handle) dlclose(p->handle);
    free(p);
}
