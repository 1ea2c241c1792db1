/* The rANS audit runner (fixtures.md, section rANS).
 *
 * normalize cases: the table, exact. encode cases: the container bytes, exact (and the same bytes twice);
 * decoders run them too (the container must decode to w_bytes). gemv cases: the fused product on the
 * container and the plain int8 GEMV on w_bytes + scales, float32 and fp16 outputs exact (a NaN matches
 * any NaN), guarded calls, then batch invariance. corrupt cases: every reader (decoder, fused product)
 * must return the named error. A corrupt container may hold any header, so the caller buffers of those
 * calls are sized from its M and K fields when they are readable and small, and are at least 1 element.
 */
#include "audit_formats.h"
#include "kinds.h"

#include "compare.h"
#include "fixture.h"
#include "guard.h"

#include "qgold/fp16.h"
#include "qgold/rans.h"

#include <stdlib.h>
#include <string.h>

/* Caller buffers for corrupt cases are capped at this many elements (a header may claim 2^32 rows). */
enum { CORRUPT_CAP = 1 << 24 };

typedef struct {
    const qg_kernel *k;
    const uint8_t *buf; /* container, or w_bytes for the int8 GEMV */
    size_t len;
    const float *scales;
    size_t M, K;
    const uint16_t *x;
    size_t batch;
    int f16;
} rans_ctx;

static int call_normalize(void *vc, void *out)
{
    rans_ctx *c = vc;
    return c->k->fn.rans_normalize((const uint64_t *)(const void *)c->buf, out);
}

static int call_decode(void *vc, void *out)
{
    rans_ctx *c = vc;
    return c->k->fn.rans_decode(c->buf, c->len, out, c->M * c->K);
}

static int call_gemv(void *vc, void *out)
{
    rans_ctx *c = vc;
    if (c->k->kind == QG_KIND_INT8_GEMV)
        return c->k->fn.int8_gemv(c->buf, c->scales, c->M, c->K, c->x, c->batch, c->f16 ? NULL : out, c->f16 ? out : NULL);
    return c->k->fn.rans_gemv(c->buf, c->len, c->x, c->batch, c->f16 ? NULL : out, c->f16 ? out : NULL);
}

static int call_gemv_column(void *vc, size_t b, void *out)
{
    rans_ctx one = *(const rans_ctx *)vc;
    one.x += b * one.K;
    one.batch = 1;
    one.f16 = 0;
    return call_gemv(&one, out);
}

/* A guarded call, or a plain one when the output is empty (nothing to poison). */
static int guarded(qg_guarded_fn fn, rans_ctx *c, void *out, size_t n, size_t size, qg_err *e)
{
    if (n > 0) return qg_call_guarded(fn, c, out, n, size, e);
    uint8_t dummy[8];
    const int rc = fn(c, dummy);
    return rc == QG_ERR_ok ? rc : qg_err_set(e, rc, "the kernel returned %s", qg_error_name(rc));
}

static int read_mk(qgh_file *f, const qgh_case_info *ci, int64_t *M, int64_t *K, qg_err *e)
{
    int rc = qga_attr_range(f, ci, "M", 0, (int64_t)1 << 20, M, e);
    return rc ? rc : qga_attr_range(f, ci, "K", 0, (int64_t)1 << 20, K, e);
}

static int run_normalize(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    qgh_array counts, ex;
    const size_t d[1] = {256};
    memset(&ex, 0, sizeof ex);
    int rc = qgh_read(f, ci->name, "counts", QGH_U64, NULL, 1, d, &counts, e);
    if (rc) return rc;
    if ((rc = qgh_read(f, ci->name, "expected_freq", QGH_U16, NULL, 1, d, &ex, e))) goto done;
    uint16_t got[256];
    rans_ctx c = {k, counts.data, 0, NULL, 0, 0, NULL, 0, 0};
    if ((rc = qg_call_guarded(call_normalize, &c, got, 256, 2, e))) {
        qga_guard_fail(f, ci, rc, e);
        goto done;
    }
    qg_exact_report rep;
    if ((rc = qg_compare_exact(QG_ELEM_U16, ex.data, got, 256, &rep)) != QG_ERR_ok)
        qg_err_set(e, rc, "%s: case %s (%s): freq[%zu]: %s", qgh_name(f), ci->case_id, ci->description, rep.index, rep.text);
    row->elements += 256;
done:
    qgh_array_free(&counts);
    qgh_array_free(&ex);
    return rc;
}

/* Names the container region of a byte offset, for mismatch messages. */
static const char *region_of(const uint8_t *c, size_t len, size_t off)
{
    if (off < 64) return "header";
    if (off < 576) return "frequency table";
    qg_rans_header h;
    if (qg_rans_check(c, len, &h) != QG_ERR_ok) return "container (fails validation)";
    const size_t n = (size_t)h.tiles_r * h.tiles_c;
    if (off >= h.meta_offset && off < h.meta_offset + 32 * (uint64_t)n) return "tile metadata";
    if (off >= h.scales_offset && off < h.scales_offset + 4 * (uint64_t)h.M) return "scales";
    return "a tile payload";
}

static int run_encode(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    int64_t M, K, cs;
    qgh_array w, sc, modes, cont;
    memset(&w, 0, sizeof w);
    memset(&sc, 0, sizeof sc);
    memset(&modes, 0, sizeof modes);
    memset(&cont, 0, sizeof cont);
    int rc = read_mk(f, ci, &M, &K, e);
    if (rc || (rc = qga_attr_range(f, ci, "checksums", 0, 1, &cs, e))) return rc;
    const size_t dw[2] = {(size_t)M, (size_t)K}, ds[1] = {(size_t)M};
    const size_t nt = (size_t)((M + 255) / 256) * (size_t)((K + 255) / 256), dm[1] = {nt};
    if ((rc = qgh_read(f, ci->name, "w_bytes", QGH_U8, NULL, 2, NULL, &w, e)) ||
        (rc = qgh_read(f, ci->name, "scales", QGH_U32, NULL, 1, NULL, &sc, e)) ||
        (rc = qgh_read(f, ci->name, "modes", QGH_U8, NULL, 1, NULL, &modes, e)))
        goto done;
    if (w.dims[0] != dw[0] || w.dims[1] != dw[1] || sc.count != ds[0] || modes.count != dm[0]) {
        rc = qg_err_set(e, QG_ERR_fixture_shape_mismatch, "%s: /%s: w_bytes, scales or modes do not match M = %lld, K = %lld",
                        qgh_name(f), ci->name, (long long)M, (long long)K);
        goto done;
    }
    static const float one_scale[1] = {0.0f};
    const float *scales = sc.count ? sc.data : one_scale;
    const uint8_t *wb = w.count ? w.data : (const uint8_t *)one_scale, *mb = modes.count ? modes.data : (const uint8_t *)one_scale;
    uint8_t *out = NULL, *out2 = NULL;
    size_t len = 0, len2 = 0;
    const int got = k->fn.rans_encode(wb, scales, (uint32_t)M, (uint32_t)K, mb, (int)cs, &out, &len);
    if (strcmp(ci->expect, "invalid") == 0) {
        rc = qga_expect_error(f, ci, got, e);
        free(out);
        goto done;
    }
    if (got != QG_ERR_ok) {
        rc = qg_err_set(e, got, "%s: case %s (%s): the encoder returned %s", qgh_name(f), ci->case_id, ci->description, qg_error_name(got));
        goto done;
    }
    if ((rc = qgh_read(f, ci->name, "container", QGH_U8, NULL, 1, NULL, &cont, e))) {
        free(out);
        goto done;
    }
    const int again = k->fn.rans_encode(wb, scales, (uint32_t)M, (uint32_t)K, mb, (int)cs, &out2, &len2);
    if (again != QG_ERR_ok || len2 != len || memcmp(out, out2, len) != 0) {
        rc = qg_err_set(e, QG_ERR_nondeterministic, "%s: case %s: encoding twice gave different containers", qgh_name(f), ci->case_id);
    } else if (len != cont.count || memcmp(out, cont.data, len) != 0) {
        size_t i = 0;
        const uint8_t *x = cont.data;
        while (i < len && i < cont.count && out[i] == x[i]) i++;
        rc = qg_err_set(e, QG_ERR_mismatch, "%s: case %s (%s): container of %zu bytes, expected %zu; first difference at byte %zu (%s)%s",
                        qgh_name(f), ci->case_id, ci->description, len, cont.count, i, qg_rans_check(x, cont.count, NULL) == QG_ERR_ok ? region_of(x, cont.count, i) : region_of(out, len, i),
                        i < len && i < cont.count ? "" : " (one is a prefix of the other)");
    }
    row->elements += len;
    free(out);
    free(out2);
done:
    qgh_array_free(&w);
    qgh_array_free(&sc);
    qgh_array_free(&modes);
    qgh_array_free(&cont);
    return rc;
}

/* M and K of a container's header when at least 24 bytes are there, each capped. */
static void header_dims(const qgh_array *cont, size_t *M, size_t *K)
{
    const uint8_t *p = cont->data;
    *M = *K = 0;
    if (cont->count < 24) return;
    const uint32_t m = (uint32_t)p[16] | ((uint32_t)p[17] << 8) | ((uint32_t)p[18] << 16) | ((uint32_t)p[19] << 24);
    const uint32_t k = (uint32_t)p[20] | ((uint32_t)p[21] << 8) | ((uint32_t)p[22] << 16) | ((uint32_t)p[23] << 24);
    *M = m < CORRUPT_CAP ? m : CORRUPT_CAP;
    *K = k < CORRUPT_CAP ? k : CORRUPT_CAP;
    if (*M * *K > CORRUPT_CAP) *K = CORRUPT_CAP / (*M ? *M : 1);
}

/* Every reader must name the fixture's error. */
static int run_corrupt(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_err *e)
{
    qgh_array cont;
    int rc = qgh_read(f, ci->name, "container", QGH_U8, NULL, 1, NULL, &cont, e);
    if (rc) return rc;
    static const uint8_t empty[1] = {0};
    size_t M, K;
    header_dims(&cont, &M, &K);
    rans_ctx c = {k, cont.count ? cont.data : empty, cont.count, NULL, M, K, NULL, 1, 0};
    void *out = malloc((k->kind == QG_KIND_RANS_DECODE ? M * K : 4 * M) + 4);
    uint16_t *x = calloc(K + 1, 2);
    c.x = x;
    if (out == NULL || x == NULL) rc = qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
    else rc = qga_expect_error(f, ci, k->kind == QG_KIND_RANS_DECODE ? call_decode(&c, out) : call_gemv(&c, out), e);
    free(out);
    free(x);
    qgh_array_free(&cont);
    return rc;
}

/* Decoders on encode cases: the container decodes to w_bytes. */
static int run_decode(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    if (strcmp(ci->expect, "invalid") == 0) return QG_ERR_ok; /* an encoder-side error: no container to decode */
    int64_t M, K;
    qgh_array w, cont;
    memset(&cont, 0, sizeof cont);
    int rc = read_mk(f, ci, &M, &K, e);
    if (rc || (rc = qgh_read(f, ci->name, "w_bytes", QGH_U8, NULL, 2, NULL, &w, e))) return rc;
    if ((rc = qgh_read(f, ci->name, "container", QGH_U8, NULL, 1, NULL, &cont, e))) goto done;
    const size_t n = (size_t)M * (size_t)K;
    if (w.count != n) {
        rc = qg_err_set(e, QG_ERR_fixture_shape_mismatch, "%s: /%s/w_bytes: %zu bytes, M x K = %zu", qgh_name(f), ci->name, w.count, n);
        goto done;
    }
    uint8_t *got = malloc(n + 1);
    rans_ctx c = {k, cont.data, cont.count, NULL, (size_t)M, (size_t)K, NULL, 0, 0};
    if (got == NULL) rc = qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
    else if ((rc = guarded(call_decode, &c, got, n, 1, e)) != QG_ERR_ok) qga_guard_fail(f, ci, rc, e);
    else if (n > 0 && memcmp(got, w.data, n) != 0) {
        size_t i = 0;
        while (got[i] == ((const uint8_t *)w.data)[i]) i++;
        rc = qg_err_set(e, QG_ERR_mismatch, "%s: case %s (%s): decoded byte [%zu][%zu] is 0x%02X, expected 0x%02X", qgh_name(f),
                        ci->case_id, ci->description, i / (size_t)K, i % (size_t)K, got[i], ((const uint8_t *)w.data)[i]);
    }
    row->elements += n;
    free(got);
done:
    qgh_array_free(&w);
    qgh_array_free(&cont);
    return rc;
}

static int compare_out(qgh_file *f, const qgh_case_info *ci, qg_elem t, const void *ex, const void *got, size_t n, size_t M,
                       const char *what, qg_err *e)
{
    qg_exact_report rep;
    int rc = qg_compare_exact_nan_any(t, ex, got, n, &rep);
    if (rc != QG_ERR_ok)
        qg_err_set(e, rc, "%s: case %s (%s): %s output [batch][row] = [%zu][%zu]: %s", qgh_name(f), ci->case_id, ci->description, what,
                   rep.index / M, rep.index % M, rep.text);
    return rc;
}

/* The fused product and the int8 GEMV on gemv cases. */
static int run_gemv(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    int64_t M, K, batch;
    qgh_array cont, w, sc, x, e32, e16;
    memset(&cont, 0, sizeof cont);
    memset(&w, 0, sizeof w);
    memset(&sc, 0, sizeof sc);
    memset(&x, 0, sizeof x);
    memset(&e32, 0, sizeof e32);
    memset(&e16, 0, sizeof e16);
    int rc = read_mk(f, ci, &M, &K, e);
    if (rc || (rc = qga_attr_range(f, ci, "batch", 0, 64, &batch, e))) return rc;
    const size_t m = (size_t)M, kk = (size_t)K, B = (size_t)batch, ny = B * m;
    const size_t dx[2] = {B, kk}, dy[2] = {B, m}, dw[2] = {m, kk}, ds[1] = {m};
    if ((rc = qgh_read(f, ci->name, "container", QGH_U8, NULL, 1, NULL, &cont, e)) ||
        (rc = qgh_read(f, ci->name, "w_bytes", QGH_U8, NULL, 2, NULL, &w, e)) ||
        (rc = qgh_read(f, ci->name, "scales", QGH_U32, NULL, 1, NULL, &sc, e)) ||
        (rc = qgh_read(f, ci->name, "x", QGH_U16, "float16", 2, NULL, &x, e)))
        goto done;
    if (w.dims[0] != dw[0] || w.dims[1] != dw[1] || sc.count != ds[0] || x.dims[0] != dx[0] || x.dims[1] != dx[1]) {
        rc = qg_err_set(e, QG_ERR_fixture_shape_mismatch, "%s: /%s: w_bytes, scales or x do not match M, K, batch", qgh_name(f), ci->name);
        goto done;
    }
    static const uint16_t zero16[1] = {0};
    rans_ctx c = {k, cont.data, cont.count, sc.count ? sc.data : (const float *)(const void *)zero16, m, kk,
                  x.count ? x.data : zero16, B, 0};
    if (k->kind == QG_KIND_INT8_GEMV) {
        c.buf = w.count ? w.data : (const uint8_t *)zero16;
        c.len = w.count;
    }
    float *y = malloc(ny * 4 + 4), *yb = malloc(m * 4 + 4);
    uint16_t *y16 = malloc(ny * 2 + 2);
    if (!y || !yb || !y16) {
        rc = qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
        goto out;
    }
    if (strcmp(ci->expect, "invalid") == 0) {
        rc = qga_expect_error(f, ci, call_gemv(&c, y), e);
        goto out;
    }
    if ((rc = qgh_read(f, ci->name, "expected_f32", QGH_U32, NULL, 2, dy, &e32, e)) ||
        (rc = qgh_read(f, ci->name, "expected_f16", QGH_U16, NULL, 2, dy, &e16, e)))
        goto out;
    if ((rc = guarded(call_gemv, &c, y, ny, 4, e))) {
        qga_guard_fail(f, ci, rc, e);
        goto out;
    }
    if ((rc = compare_out(f, ci, QG_ELEM_F32, e32.data, y, ny, m, "float32", e))) goto out;
    c.f16 = 1;
    if ((rc = guarded(call_gemv, &c, y16, ny, 2, e))) {
        qga_guard_fail(f, ci, rc, e);
        goto out;
    }
    if ((rc = compare_out(f, ci, QG_ELEM_F16, e16.data, y16, ny, m, "fp16", e))) goto out;
    /* Batch invariance: each column alone gives the bits it had inside the batch. */
    if ((rc = qga_batch_invariance(f, ci, call_gemv_column, &c, y, B, m, yb, e))) goto out;
    row->elements += 2 * ny;
out:
    free(y);
    free(yb);
    free(y16);
done:
    qgh_array_free(&cont);
    qgh_array_free(&w);
    qgh_array_free(&sc);
    qgh_array_free(&x);
    qgh_array_free(&e32);
    qgh_array_free(&e16);
    return rc;
}

/* Decoders and the fused product also meet the corrupt corpus: every reader must name the error. */
static int run_decode_any(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    return strcmp(ci->path, "corrupt") == 0 ? run_corrupt(k, f, ci, e) : run_decode(k, f, ci, row, e);
}

static int run_gemv_any(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    return strcmp(ci->path, "corrupt") == 0 ? run_corrupt(k, f, ci, e) : run_gemv(k, f, ci, row, e);
}

/* Which other paths' cases a kind runs (reference/spec/fixtures.md): decoders decode the containers
 * of the encode cases and meet the corrupt corpus; the fused product meets the corrupt corpus; the
 * plain int8 GEMV checks the rANS gemv cases. */
static int shares_decode(const qg_kernel *k, const qgh_case_info *ci)
{
    (void)k;
    return strcmp(ci->path, "encode") == 0 || strcmp(ci->path, "corrupt") == 0;
}
static int shares_gemv(const qg_kernel *k, const qgh_case_info *ci)
{
    (void)k;
    return strcmp(ci->path, "corrupt") == 0;
}
static int shares_int8_gemv(const qg_kernel *k, const qgh_case_info *ci)
{
    (void)k;
    return strcmp(ci->path, "gemv") == 0;
}

const qga_kind qga_kind_rans_normalize = {QG_KIND_RANS_NORMALIZE, "rans_normalize", run_normalize, NULL, NULL};
const qga_kind qga_kind_rans_encode = {QG_KIND_RANS_ENCODE, "rans_encode", run_encode, NULL, NULL};
const qga_kind qga_kind_rans_decode = {QG_KIND_RANS_DECODE, "rans_decode", run_decode_any, shares_decode, NULL};
const qga_kind qga_kind_rans_gemv = {QG_KIND_RANS_GEMV, "rans_gemv", run_gemv_any, shares_gemv, NULL};
const qga_kind qga_kind_int8_gemv = {QG_KIND_INT8_GEMV, "rans_int8_gemv", run_gemv, shares_int8_gemv, NULL};
