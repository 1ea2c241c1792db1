/* The audit: every registered kernel over every fixture of its format, at the kernel's tier.
 * Used by `qgold audit` and by the golden ctest driver, so both check exactly the same thing. */
#ifndef QGOLD_AUDIT_H
#define QGOLD_AUDIT_H

#include "qg_err.h"
#include "qgold/registry.h"

#include <stddef.h>

typedef enum { QG_AUDIT_PASS = 0, QG_AUDIT_FAIL, QG_AUDIT_SKIP } qg_audit_verdict;

typedef struct {
    const char *format;
    const char *path;      /* "-" for a file-level failure */
    const char *backend;   /* "-" for a file-level failure */
    const char *kernel;    /* symbol, or "-" */
    char file[512];        /* relative to the golden dir, or "-" */
    size_t cases;          /* cases run (valid + invalid) */
    size_t elements;       /* output elements compared */
    qg_tier tier;
    double worst_ratio;    /* tier 2: worst |err|/bound; tier 1: 0 */
    qg_audit_verdict verdict;
    char detail[1200];     /* failure message (file, case, element, regeneration command) or skip reason */
} qg_audit_row;

typedef void (*qg_audit_sink)(const qg_audit_row *row, void *ctx);

typedef struct {
    const char *golden_dir; /* directory holding <format>/<family>.h5 and MANIFEST */
    const char *format;     /* NULL: every format of the registry */
    int backend;            /* -1: every backend */
    int no_manifest;        /* 1: read the datasets without checking them against MANIFEST (not even loaded);
                             * 0: a missing MANIFEST is a failure */
} qg_audit_opts;

typedef struct {
    size_t pass, fail, skip;
} qg_audit_summary;

/* What must hold before anything is read: golden_dir is a readable directory and, unless no_manifest,
 * holds MANIFEST. 0, or an error whose message says which and why. */
int qg_audit_check_golden(const qg_audit_opts *o, qg_err *e);

/* Runs the audit, calling `sink` once per row. Returns 0 when nothing failed. A failed
 * qg_audit_check_golden is one failed row. */
int qg_audit(const qg_audit_opts *o, qg_audit_sink sink, void *ctx, qg_audit_summary *sum);

/* The .h5 files of golden_dir/format, sorted; returns the count (0 when the directory is missing). */
size_t qg_list_fixture_files(const char *golden_dir, const char *format, char names[][256], size_t max);

#endif
