/* Tier-1 and tier-2 comparators. */
#include "compare.h"

#include "qgold/errors.h"
#include "qgold/fp16.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static uint64_t load_bits(qg_elem t, const void *p, size_t i)
{
    switch (t) {
    case QG_ELEM_U8: return ((const uint8_t *)p)[i];
    case QG_ELEM_U16: case QG_ELEM_F16: case QG_ELEM_BF16: return ((const uint16_t *)p)[i];
    case QG_ELEM_U32: case QG_ELEM_F32: case QG_ELEM_I32: return ((const uint32_t *)p)[i];
    case QG_ELEM_F64: case QG_ELEM_U64: { uint64_t b; memcpy(&b, (const unsigned char *)p + 8 * i, 8); return b; }
    }
    return 0;
}

/* NaN test and sign on raw bits, per type. */
static int bits_isnan(qg_elem t, uint64_t b)
{
    switch (t) {
    case QG_ELEM_F16: return qg_f16_isnan((qg_f16)b);
    case QG_ELEM_BF16: return qg_bf16_isnan((qg_bf16)b);
    case QG_ELEM_F32: return (b & 0x7FFFFFFFu) > 0x7F800000u;
    case QG_ELEM_F64: return (b & UINT64_C(0x7FFFFFFFFFFFFFFF)) > UINT64_C(0x7FF0000000000000);
    default: return 0;
    }
}

static int bits_sign(qg_elem t, uint64_t b)
{
    switch (t) {
    case QG_ELEM_F16: case QG_ELEM_BF16: return (int)(b >> 15) & 1;
    case QG_ELEM_F32: return (int)(b >> 31) & 1;
    case QG_ELEM_F64: return (int)(b >> 63) & 1;
    default: return 0;
    }
}

int qg_elem_equal(qg_elem t, const void *a, const void *b, size_t i, int nan_any)
{
    uint64_t x = load_bits(t, a, i), y = load_bits(t, b, i);
    if (x == y) return 1;
    return bits_isnan(t, x) && bits_isnan(t, y) && (nan_any || bits_sign(t, x) == bits_sign(t, y));
}

void qg_elem_format(qg_elem t, const void *p, size_t i, char *buf, size_t len)
{
    uint64_t b = load_bits(t, p, i);
    switch (t) {
    case QG_ELEM_F16: snprintf(buf, len, "0x%04llx (%.9g)", (unsigned long long)b, (double)qg_f16_to_f32((qg_f16)b)); break;
    case QG_ELEM_BF16: snprintf(buf, len, "0x%04llx (%.9g)", (unsigned long long)b, (double)qg_bf16_to_f32((qg_bf16)b)); break;
    case QG_ELEM_F32: snprintf(buf, len, "0x%08llx (%.9g)", (unsigned long long)b, (double)qg_f32_from_bits((uint32_t)b)); break;
    case QG_ELEM_F64: { double d; memcpy(&d, &b, 8); snprintf(buf, len, "0x%016llx (%.17g)", (unsigned long long)b, d); break; }
    case QG_ELEM_I32: snprintf(buf, len, "0x%08llx (%d)", (unsigned long long)b, (int32_t)(uint32_t)b); break;
    default: snprintf(buf, len, "0x%llx (%llu)", (unsigned long long)b, (unsigned long long)b); break;
    }
}

static int compare_exact(qg_elem type, const void *expected, const void *got, size_t n, int nan_any, qg_exact_report *r)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        if (!qg_elem_equal(type, expected, got, i, nan_any)) {
            if (bad == 0) first = i;
            bad++;
        }
    }
    if (r != NULL) {
        memset(r, 0, sizeof *r);
        r->mismatches = bad;
        r->index = first;
    }
    if (bad == 0) return QG_ERR_ok;
    if (r != NULL) {
        char a[64], b[64];
        qg_elem_format(type, expected, first, a, sizeof a);
        qg_elem_format(type, got, first, b, sizeof b);
        snprintf(r->text, sizeof r->text, "element %zu: expected %s got %s (%zu of %zu elements differ)", first, a, b, bad, n);
    }
    return QG_ERR_mismatch;
}

int qg_compare_exact(qg_elem type, const void *expected, const void *got, size_t n, qg_exact_report *r)
{
    return compare_exact(type, expected, got, n, 0, r);
}

int qg_compare_exact_nan_any(qg_elem type, const void *expected, const void *got, size_t n, qg_exact_report *r)
{
    return compare_exact(type, expected, got, n, 1, r);
}

double qg_gamma(double d, double u)
{
    double du = d * u;
    return du >= 1.0 ? INFINITY : du / (1.0 - du);
}

/* Gradual underflow: a product that lands below the accumulator's smallest normal is rounded with an
 * absolute error of up to u_acc * min_normal (half a subnormal ulp: 2^-150 for float32, 2^-25 for fp16)
 * instead of a relative one; sums of subnormals are exact. So each of the d operations of a chain adds at
 * most that much, a term the relative model of numerics.md leaves out (its eta covers the output
 * only). It is 2^-150 d for float32, negligible unless the outputs themselves are tiny. */
static double underflow_per_op(double u_acc) { return u_acc == 0x1p-11 ? 0x1p-25 : u_acc * 0x1p-126; }

double qg_bound(const qg_numerics *nm, long K, double ystar, double sum_abs_wx, double sum_e_abs_x)
{
    double d = nm->d_fixed > 0 ? (double)nm->d_fixed : (double)K;
    double own = qg_gamma((double)K, 0x1p-53) * sum_abs_wx; /* y* itself was summed in double */
    return nm->u_out * fabs(ystar) + (1.0 + nm->u_out) * (qg_gamma(d, nm->u_acc) * sum_abs_wx + sum_e_abs_x + d * underflow_per_op(nm->u_acc)) +
           nm->eta + own;
}

int qg_compare_bounded(const qg_numerics *nm, long K, const double *ystar, const double *sum_abs_wx,
                       const double *sum_e_abs_x, const float *yhat, size_t n, qg_bound_report *r)
{
    qg_bound_report rep;
    memset(&rep, 0, sizeof rep);
    for (size_t i = 0; i < n; i++) {
        double ys = ystar[i], yh = (double)yhat[i];
        int fail = 0;
        double ratio = 0.0;
        if (isnan(ys) || isinf(ys)) {
            fail = isnan(ys) ? !isnan(yh) : !(isinf(yh) && signbit(yh) == signbit(ys));
        } else if (isnan(yh)) {
            fail = 1;
        } else if (isinf(yh)) {
            /* Overflow of the output format is the right answer when the accumulated value may reach its
             * rounding threshold: |y*| plus the accumulation part of the bound. */
            double acc_bound = qg_bound(nm, K, ys, sum_abs_wx[i], sum_e_abs_x ? sum_e_abs_x[i] : 0.0) - nm->u_out * fabs(ys);
            fail = !(nm->out_overflow > 0 && fabs(ys) + acc_bound >= nm->out_overflow && signbit(yh) == signbit(ys));
        } else {
            double b = qg_bound(nm, K, ys, sum_abs_wx[i], sum_e_abs_x ? sum_e_abs_x[i] : 0.0);
            double err = fabs(yh - ys);
            if (yh != ys) rep.rounded++;
            ratio = err / b;
            if (ratio > rep.worst_ratio || (i == 0 && rep.worst_ratio == 0.0)) {
                rep.worst_ratio = ratio;
                rep.worst_index = i;
            }
            fail = !(err <= b);
        }
        if (fail) {
            if (rep.failures == 0) {
                rep.first_failure = i;
                snprintf(rep.text, sizeof rep.text, "output %zu: got %.9g, y* = %.17g, |err| = %.3g, bound = %.3g (ratio %.3g)", i, yh,
                         ys, fabs(yh - ys), qg_bound(nm, K, ys, sum_abs_wx[i], sum_e_abs_x ? sum_e_abs_x[i] : 0.0), ratio);
            }
            rep.failures++;
        }
    }
    if (rep.failures == 0 && n > 0) {
        size_t i = rep.worst_index;
        snprintf(rep.text, sizeof rep.text, "worst output %zu: got %.9g, y* = %.17g, ratio %.3g", i, (double)yhat[i], ystar[i],
                 rep.worst_ratio);
    }
    if (r != NULL) *r = rep;
    return rep.failures ? QG_ERR_bound_exceeded : QG_ERR_ok;
}
