/* unit.harness: the checkers themselves must catch what they claim to catch. Each comparator and
 * guard is fed a correct result (must pass) and a deliberately wrong one (must fail, naming where). */
#include "compare.h"
#include "guard.h"
#include "qg_test.h"
#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/rng.h"
#include "sha256.h"

#include <math.h>
#include <string.h>

/* ---- SHA-256: FIPS 180-4 example vectors ---- */
static void test_sha256(void)
{
    static const struct {
        const char *msg;
        const char *hex;
    } v[] = {
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        qg_sha256 s;
        unsigned char d[32];
        char hex[65];
        qg_sha256_init(&s);
        /* feed in odd pieces to exercise the buffering */
        const char *m = v[i].msg;
        size_t L = strlen(m), off = 0, step = 1;
        while (off < L) {
            size_t take = step < L - off ? step : L - off;
            qg_sha256_update(&s, m + off, take);
            off += take;
            step += 3;
        }
        qg_sha256_final(&s, d);
        qg_sha256_hex(d, hex);
        QG_CHECK(strcmp(hex, v[i].hex) == 0, "sha256(\"%s\") = %s", m, hex);
    }
}

/* ---- tier 1 ---- */
static void test_exact(void)
{
    uint16_t a[32], b[32];
    for (int i = 0; i < 32; i++) a[i] = b[i] = (uint16_t)(0x3C00 + i);
    qg_exact_report r;
    QG_CHECK(qg_compare_exact(QG_ELEM_F16, a, b, 32, &r) == QG_ERR_ok && r.mismatches == 0, "equal arrays");
    b[7] ^= 1;
    QG_CHECK(qg_compare_exact(QG_ELEM_F16, a, b, 32, &r) == QG_ERR_mismatch, "one flipped bit is a mismatch");
    QG_CHECK(r.index == 7 && r.mismatches == 1, "first mismatch index %zu count %zu", r.index, r.mismatches);
    QG_CHECK(strstr(r.text, "element 7") && strstr(r.text, "0x3c07") && strstr(r.text, "0x3c06"), "report text: %s", r.text);
    b[7] ^= 1;
    a[3] = 0x7E00; b[3] = 0x7C01; /* two positive NaNs with different payloads match */
    QG_CHECK(qg_compare_exact(QG_ELEM_F16, a, b, 32, &r) == QG_ERR_ok, "same-sign NaNs match");
    b[3] = 0xFE00; /* negative NaN */
    QG_CHECK(qg_compare_exact(QG_ELEM_F16, a, b, 32, &r) == QG_ERR_mismatch && r.index == 3, "NaN sign matters");
    QG_CHECK(qg_compare_exact_nan_any(QG_ELEM_F16, a, b, 32, &r) == QG_ERR_ok, "nan_any: NaN sign ignored");
    b[3] = 0x7C00; /* inf is not NaN */
    QG_CHECK(qg_compare_exact_nan_any(QG_ELEM_F16, a, b, 32, &r) == QG_ERR_mismatch, "nan_any: inf is still not NaN");
    QG_CHECK(qg_compare_exact(QG_ELEM_F16, a, b, 32, &r) == QG_ERR_mismatch, "NaN vs inf");
    a[3] = 0x0000; b[3] = 0x8000;
    QG_CHECK(qg_compare_exact(QG_ELEM_F16, a, b, 32, &r) == QG_ERR_mismatch, "+0 vs -0");
    uint32_t x = 0x7FC00000u, y = 0x7F800001u;
    QG_CHECK(qg_compare_exact(QG_ELEM_F32, &x, &y, 1, &r) == QG_ERR_ok, "float32 NaNs");
    QG_CHECK(qg_compare_exact(QG_ELEM_U32, &x, &y, 1, &r) == QG_ERR_mismatch, "uint32 has no NaN rule");
}

/* ---- tier 2: a naive float32 dot product must sit inside the bound its numerics declare ---- */
static void test_bound(void)
{
    const qg_numerics f32 = QG_NUMERICS_F32ACC_F32OUT;
    const qg_numerics f16out = QG_NUMERICS_F32ACC_F16OUT;
    const long Ks[] = {1, 7, 256, 4096};
    qg_rng r;
    qg_rng_init(&r, 7);
    enum { N = 64 };
    for (size_t t = 0; t < sizeof Ks / sizeof Ks[0]; t++) {
        long K = Ks[t];
        double ystar[N], sabs[N];
        float y32[N], y16[N];
        for (int o = 0; o < N; o++) {
            double exact = 0, s = 0;
            float acc = 0.0f;
            for (long k = 0; k < K; k++) {
                float w = qg_rng_uniform(&r, -1.0f, 1.0f), xk = qg_rng_uniform(&r, -4.0f, 4.0f);
                float p = w * xk;
                acc = acc + p;
                exact += (double)w * (double)xk; /* exact product; the sum's own error is in the bound */
                s += fabs((double)w * (double)xk);
            }
            ystar[o] = exact;
            sabs[o] = s;
            y32[o] = acc;
            y16[o] = qg_f16_to_f32(qg_f32_to_f16(acc));
        }
        qg_bound_report rep;
        QG_CHECK(qg_compare_bounded(&f32, K, ystar, sabs, NULL, y32, N, &rep) == QG_ERR_ok, "K=%ld naive float32: %s", K, rep.text);
        QG_CHECK(rep.worst_ratio <= 1.0, "K=%ld ratio %g", K, rep.worst_ratio);
        if (K > 1) QG_CHECK(rep.rounded > 0 && rep.worst_ratio > 0, "K=%ld: rounding was exercised", K);
        QG_CHECK(qg_compare_bounded(&f16out, K, ystar, sabs, NULL, y16, N, &rep) == QG_ERR_ok, "K=%ld fp16 output: %s", K, rep.text);
        /* For a short sum the float32 bound is tight enough that fp16-rounded outputs must fail it (for
         * long sums the worst-case gamma_K term rightly dominates). */
        if (K == 7)
            QG_CHECK(qg_compare_bounded(&f32, K, ystar, sabs, NULL, y16, N, &rep) == QG_ERR_bound_exceeded,
                     "K=%ld: fp16 rounding passed a float32 bound", K);
        /* Push one output just past its bound. */
        float saved = y32[5];
        double b = qg_bound(&f32, K, ystar[5], sabs[5], 0.0);
        y32[5] = (float)(ystar[5] + 2.0 * b + fabs(ystar[5]) * 0x1p-22);
        QG_CHECK(qg_compare_bounded(&f32, K, ystar, sabs, NULL, y32, N, &rep) == QG_ERR_bound_exceeded && rep.first_failure == 5,
                 "K=%ld: perturbed output 5 not caught (%s)", K, rep.text);
        y32[5] = saved;
        /* NaN / inf policy. */
        double keep = ystar[9];
        ystar[9] = NAN;
        QG_CHECK(qg_compare_bounded(&f32, K, ystar, sabs, NULL, y32, N, &rep) == QG_ERR_bound_exceeded, "y* NaN needs NaN");
        y32[9] = NAN;
        QG_CHECK(qg_compare_bounded(&f32, K, ystar, sabs, NULL, y32, N, &rep) == QG_ERR_ok, "NaN matches NaN");
        ystar[9] = -INFINITY;
        y32[9] = INFINITY;
        QG_CHECK(qg_compare_bounded(&f32, K, ystar, sabs, NULL, y32, N, &rep) == QG_ERR_bound_exceeded, "inf sign");
        ystar[9] = keep;
        y32[9] = INFINITY;
        QG_CHECK(qg_compare_bounded(&f32, K, ystar, sabs, NULL, y32, N, &rep) == QG_ERR_bound_exceeded, "inf where y* finite");
    }
    /* fp16 overflow: inf is right for y* beyond 65520, wrong well below it, and its sign must match. */
    {
        double ys[3] = {70000.0, 1000.0, -70000.0}, sa[3] = {70000.0, 1000.0, 70000.0};
        float yh[3] = {INFINITY, INFINITY, INFINITY};
        qg_bound_report rep;
        QG_CHECK(qg_compare_bounded(&f16out, 4, ys, sa, NULL, yh, 1, &rep) == QG_ERR_ok, "fp16 overflow to inf accepted");
        QG_CHECK(qg_compare_bounded(&f16out, 4, ys + 1, sa + 1, NULL, yh + 1, 1, &rep) == QG_ERR_bound_exceeded, "inf for 1000");
        QG_CHECK(qg_compare_bounded(&f16out, 4, ys + 2, sa + 2, NULL, yh + 2, 1, &rep) == QG_ERR_bound_exceeded, "inf sign");
        QG_CHECK(qg_compare_bounded(&f32, 4, ys, sa, NULL, yh, 1, &rep) == QG_ERR_bound_exceeded, "float32 output cannot overflow at 7e4");
    }
    /* Gradual underflow: 256 products of subnormal size, each rounded to a multiple of 2^-149. */
    {
        double exact = 0, sabs = 0;
        float acc = 0.0f;
        qg_rng_init(&r, 11);
        for (int k = 0; k < 256; k++) {
            float w = qg_rng_uniform(&r, 0x1p-80f, 0x1p-79f), xk = qg_rng_uniform(&r, 0x1p-70f, 0x1p-69f);
            acc = acc + w * xk;
            exact += (double)w * (double)xk;
            sabs += (double)w * (double)xk;
        }
        qg_bound_report rep;
        QG_CHECK(acc != (float)exact, "subnormal products were rounded");
        QG_CHECK(qg_compare_bounded(&f32, 256, &exact, &sabs, NULL, &acc, 1, &rep) == QG_ERR_ok, "underflow term: %s", rep.text);
    }
    QG_CHECK(isinf(qg_gamma(1 << 24, 0x1p-24)), "gamma is infinite when d u >= 1");
    QG_CHECK(qg_gamma(2, 0x1p-24) > 2 * 0x1p-24, "gamma_d(u) > d u");
}

/* ---- guards: kernels that misbehave in each way the guard claims to detect ---- */
typedef struct {
    size_t n;
    int mode;
    int calls;
} gctx;

static int misbehave(void *vctx, void *out)
{
    gctx *c = vctx;
    uint32_t *y = out;
    c->calls++;
    for (size_t i = 0; i < c->n; i++)
        if (!(c->mode == 3 && i == 3)) y[i] = (uint32_t)i * 2654435761u; /* mode 3: element 3 never written */
    switch (c->mode) {
    case 1: y[c->n] = 0; break;                       /* one past the end */
    case 2: ((unsigned char *)out)[-1] = 0; break;    /* one byte before the start */
    case 4: y[c->n / 2] += (uint32_t)c->calls; break; /* differs between runs */
    case 5: return QG_ERR_shape_invalid;              /* kernel reports an error */
    }
    return QG_ERR_ok;
}

static void test_guard(void)
{
    uint32_t out[100];
    qg_err e;
    const int expect[] = {QG_ERR_ok, QG_ERR_canary_clobbered, QG_ERR_canary_clobbered, QG_ERR_output_unwritten,
                          QG_ERR_nondeterministic, QG_ERR_shape_invalid};
    for (int mode = 0; mode < 6; mode++) {
        gctx c = {100, mode, 0};
        qg_err_clear(&e);
        int rc = qg_call_guarded(misbehave, &c, out, 100, sizeof(uint32_t), &e);
        QG_CHECK(rc == expect[mode], "mode %d: got %s (%s)", mode, qg_error_name(rc), e.msg);
        if (mode == 3) QG_CHECK(strstr(e.msg, "element 3 ") != NULL, "unwritten element named: %s", e.msg);
        if (mode == 0) QG_CHECK(out[99] == 99u * 2654435761u && c.calls == 2, "result copied out, two runs");
    }
}

int main(void)
{
    test_sha256();
    test_exact();
    test_bound();
    test_guard();
    return qg_test_end("unit.harness");
}
