/* Kernel kinds as data: one descriptor per kind, in one table (kinds.c). The audit, `qgold verify`
 * and the tests find a kernel's runner here by its kind; no driver names a format or switches on a
 * kind. A new kind is a runner file (audit_<format>.c) exporting its descriptor plus one line in the
 * table. */
#ifndef QGOLD_KINDS_H
#define QGOLD_KINDS_H

#include "audit.h"
#include "fixture.h"

/* A check made on the fly from the pinned stream (random bytes as blocks, large shapes), judged like a
 * fixture case: `run` compares the kernel with the reference at its tier through guarded calls. */
typedef struct {
    const qg_kernel *k;
    size_t rows, cols, batch;
    int random_scales; /* 1: every byte random (scales may be inf/NaN); 0: ordinary scales */
    int rounds;        /* independent inputs drawn */
} qga_gen_params;

typedef struct {
    const char *label; /* "random blocks", "full 4096x14336 b4" */
    int large;         /* a --full shape: callers allow it more time */
    int (*run)(const qga_gen_params *g, qg_audit_row *row, qg_err *e);
    qga_gen_params params;
} qga_generated;

typedef struct qga_kind {
    qg_kind kind;
    const char *name; /* "kq_gemv": the kind's name in messages */
    /* Checks one fixture case (valid or invalid) with kernel k at its tier through guarded calls
     * (guard.h: poison, canaries, twice for determinism), adding what it compared to `row`
     * (cases are counted by the caller; elements and worst_ratio by the runner). 0 or an error whose
     * message names the file, the case and the first bad element. */
    int (*run_case)(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e);
    /* Whether the kernel also runs a case of another path (a decoder runs the encoder's cases, every
     * reader the corrupt corpus); NULL: only cases whose path is the kernel's own. */
    int (*shares)(const qg_kernel *k, const qgh_case_info *ci);
    /* The on-the-fly checks of kernel k (with `full`, the large shapes too) into out[0..max); returns
     * how many. NULL: the kind has none. */
    size_t (*generated)(const qg_kernel *k, int full, qga_generated *out, size_t max);
} qga_kind;

/* The descriptor of a kind; NULL when none is registered. */
const qga_kind *qga_kind_find(qg_kind kind);
/* Whether kernel k runs fixture case ci: its own path, or one its kind shares. */
int qga_case_applies(const qg_kernel *k, const qgh_case_info *ci);

#endif
