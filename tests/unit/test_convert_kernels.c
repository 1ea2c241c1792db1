/* simd.<format>.<backend> / gpu.<format>.cuda: every conversion kernel of a backend against the
 * reference on made-on-the-fly inputs (pinned stream): lengths 0..300 around every vector width, start
 * offsets 0..3 (unaligned), special values, and a long random run. Every call is guarded (poison,
 * canaries, two runs). A slice converted alone must equal the same slice converted inside a longer
 * call: tails take the same path as bodies. */
#include "compare.h"
#include "guard.h"
#include "qg_test.h"
#include "qgold/registry.h"
#include "qgold/fp16.h"
#include "qgold/rng.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const qg_kernel *k;
    const void *x;
    size_t n;
} ctx_t;

static int call(void *vc, void *out)
{
    ctx_t *c = vc;
    return c->k->fn.convert(c->x, out, c->n);
}

static const uint32_t k_special32[] = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u,
                                       0x7F800001u, 0xFF800001u, 0x7FBFFFFFu, 0x477FF000u, 0x477FEFFFu, 0x477FF001u,
                                       0xC77FF000u, 0x33000000u, 0x33000001u, 0x00000001u, 0x807FFFFFu, 0x7F7F8000u,
                                       0x7F7F7FFFu, 0x3F808000u, 0x3F818000u, 0x38800000u, 0x387FC000u, 0x7F7FFFFFu};

static void fill(const qg_kernel *k, void *buf, size_t n, qg_rng *r)
{
    if (qg_elem_size(k->in_elem) == 4) {
        uint32_t *x = buf;
        for (size_t i = 0; i < n; i++) {
            uint32_t pick = qg_rng_int_range(r, 4);
            if (pick == 0) x[i] = k_special32[qg_rng_int_range(r, sizeof k_special32 / sizeof k_special32[0])];
            else if (pick == 1) x[i] = qg_f32_bits(qg_rng_uniform(r, -70000.0f, 70000.0f));
            else if (pick == 2) x[i] = qg_f32_bits(qg_rng_uniform(r, -0x1p-13f, 0x1p-13f));
            else x[i] = qg_rng_bits32(r);
        }
    } else {
        uint16_t *x = buf;
        for (size_t i = 0; i < n; i++) x[i] = (uint16_t)qg_rng_bits32(r);
    }
}

static void check_kernel(const qg_kernel *k, const qg_kernel *ref)
{
    const size_t in_sz = qg_elem_size(k->in_elem), out_sz = qg_elem_size(k->out_elem);
    enum { MAXN = 1 << 20 };
    unsigned char *x = malloc((MAXN + 8) * in_sz), *want = malloc(MAXN * out_sz), *got = malloc(MAXN * out_sz);
    unsigned char *whole = malloc(MAXN * out_sz);
    qg_rng r;
    qg_err e;
    qg_exact_report rep;
    qg_rng_init(&r, 0x51D);
    QG_CHECK(x && want && got && whole, "allocation");
    if (!(x && want && got && whole)) return;

    /* Lengths 0..300 at offsets 0..3. */
    fill(k, x, 400, &r);
    for (size_t off = 0; off < 4; off++)
        for (size_t n = 0; n <= 300; n++) {
            ctx_t cr = {ref, x + off * in_sz, n}, ck = {k, x + off * in_sz, n};
            int rc1 = qg_call_guarded(call, &cr, want, n, out_sz, &e);
            int rc2 = qg_call_guarded(call, &ck, got, n, out_sz, &e);
            QG_CHECK(rc1 == QG_ERR_ok && rc2 == QG_ERR_ok, "%s n=%zu off=%zu: %s", k->name, n, off, e.msg);
            if (rc2 == QG_ERR_ok)
                QG_CHECK(qg_compare_exact(k->out_elem, want, got, n, &rep) == QG_ERR_ok, "%s n=%zu off=%zu: %s", k->name, n, off, rep.text);
        }

    /* A long run, then slices of it converted alone. */
    size_t n = MAXN;
    fill(k, x, n, &r);
    ctx_t cr = {ref, x, n}, ck = {k, x, n};
    QG_CHECK(qg_call_guarded(call, &cr, want, n, out_sz, &e) == QG_ERR_ok, "ref: %s", e.msg);
    QG_CHECK(qg_call_guarded(call, &ck, whole, n, out_sz, &e) == QG_ERR_ok, "%s: %s", k->name, e.msg);
    QG_CHECK(qg_compare_exact(k->out_elem, want, whole, n, &rep) == QG_ERR_ok, "%s long run: %s", k->name, rep.text);
    for (int t = 0; t < 50; t++) {
        size_t a = qg_rng_int_range(&r, n), len = qg_rng_int_range(&r, 100);
        if (a + len > n) len = n - a;
        ctx_t cs = {k, x + a * in_sz, len};
        QG_CHECK(qg_call_guarded(call, &cs, got, len, out_sz, &e) == QG_ERR_ok, "%s slice: %s", k->name, e.msg);
        QG_CHECK(memcmp(got, whole + a * out_sz, len * out_sz) == 0, "%s: slice [%zu,+%zu) differs from the long call", k->name, a, len);
    }
    free(x);
    free(want);
    free(got);
    free(whole);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_convert_kernels FORMAT BACKEND\n");
        return 2;
    }
    int b = qg_backend_from_name(argv[2]);
    char why[200];
    if (b < 0) return 2;
    if (!qg_backend_available((qg_backend)b, why, sizeof why)) {
        if (b == QG_BACKEND_CUDA) return qg_test_no_gpu(why);
        printf("skipped: %s\n", why);
        return QG_TEST_SKIP;
    }
    for (size_t i = 0; i < qg_registry_count(); i++) {
        const qg_kernel *k = qg_registry_at(i);
        if ((int)k->backend != b || strcmp(k->format, argv[1]) != 0 || k->kind != QG_KIND_CONVERT) continue;
        QG_CHECK(qg_kernel_available(k, why, sizeof why), "%s: %s", k->name, why);
        if (qg_kernel_available(k, NULL, 0)) check_kernel(k, qg_registry_find(k->format, k->path, QG_BACKEND_REF));
    }
    return qg_test_end(argv[2]);
}
