/* Comparators for the two gating tiers of numerics (reference/spec/numerics.md section 3).
 *
 * Tier 1 (exact): bit equality, except that two NaNs of the same sign match (the payload is not part of
 * the contract). The report names the first differing element with both values in hex and decimal.
 * Tier 2 (bounded): each output against y* (double) with the rigorous bound computed from the kernel's
 * registered numerics; the report gives the worst observed |y_hat - y*| / bound.
 */
#ifndef QGOLD_COMPARE_H
#define QGOLD_COMPARE_H

#include "qgold/registry.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    size_t index;       /* first mismatching element */
    size_t mismatches;  /* how many differ in total */
    char text[256];     /* "element 12: expected 0x3c00 (1) got 0x3bff (0.99951172)" */
} qg_exact_report;

/* 0 when equal (NaN rule applied per element type), else QG_ERR_mismatch with the report filled. */
int qg_compare_exact(qg_elem type, const void *expected, const void *got, size_t n, qg_exact_report *r);

/* As qg_compare_exact, but any NaN matches any NaN. For outputs whose NaNs are *made* by arithmetic
 * (inf*0, inf-inf in a dequantization): IEEE leaves the sign of such a NaN to the machine (x86 gives
 * -NaN, AArch64 and CUDA +NaN), so only NaN-ness is part of the contract. */
int qg_compare_exact_nan_any(qg_elem type, const void *expected, const void *got, size_t n, qg_exact_report *r);

/* Same-sign-NaN-aware equality of one element (any-sign when nan_any). */
int qg_elem_equal(qg_elem type, const void *a, const void *b, size_t i, int nan_any);
/* "0x3c00 (1)" style rendering of element i. */
void qg_elem_format(qg_elem type, const void *p, size_t i, char *buf, size_t len);

/* gamma_d(u) = d u / (1 - d u); +inf when d u >= 1 (no bound can be given). */
double qg_gamma(double d, double u);

/* The bound of numerics.md for one output of a K-term sum, including y*'s own error in double,
 * gamma_K(2^-53) sum|w x|. sum_e_abs_x is sum_k e_k |x_k| (0 for exact decode). */
double qg_bound(const qg_numerics *nm, long K, double ystar, double sum_abs_wx, double sum_e_abs_x);

typedef struct {
    double worst_ratio;  /* max |y_hat - y*| / bound over finite outputs */
    size_t worst_index;
    size_t failures;     /* outputs above their bound or violating the NaN/inf policy */
    size_t first_failure;
    size_t rounded;      /* outputs with y_hat != y* (a ratio always 0 means rounding was not exercised) */
    char text[320];      /* the first failure, or the worst element */
} qg_bound_report;

/* Tier 2 over n outputs given as float (y_hat) with y*, sum|w x| and optional sum e|x| per output.
 * NaN/inf policy: y* NaN requires y_hat NaN; y* +-inf requires the same inf; a NaN or inf y_hat where y*
 * is finite fails. Returns 0 or QG_ERR_bound_exceeded. */
int qg_compare_bounded(const qg_numerics *nm, long K, const double *ystar, const double *sum_abs_wx,
                       const double *sum_e_abs_x, const float *yhat, size_t n, qg_bound_report *r);

#endif
