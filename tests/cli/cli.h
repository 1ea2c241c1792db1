/* Shared pieces of the qgold CLI: argument parsing, file input/output with named errors, the audit
 * table. Each command lives in its own file (qgold.c for the first ones, cmd_<name>.c for the others)
 * and is listed in cmds.h; qgold.c dispatches by name. */
#ifndef QGOLD_CLI_H
#define QGOLD_CLI_H

#include "audit.h"
#include "qgold/registry.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define QG_EXIT_STATUS                                                                                        \
    "Exit status: 0 success; 1 a failure (check failed, file unreadable, unwritable or of the wrong size,\n" \
    "invalid data); 2 wrong arguments (unknown or malformed option, shape the format does not allow, input\n" \
    "and output the same file, QG_FORCE_ISA not one of scalar, avx2, neon).\n"

#define QG_INT_OPTIONS "Numbers are plain decimal digits: no sign, spaces or suffix.\n"

/* "qgold: " + message + the usage on stderr; returns 2 (the exit status of wrong arguments). */
int qgc_usage_error(const char *usage, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Decimal digits only, value in lo..hi, overflow detected: 0, else -1. */
int qgc_parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
/* The usage error of a malformed number option; returns 2. */
int qgc_bad_number(const char *usage, const char *opt, const char *v, uint64_t lo, uint64_t hi);
/* Whether option a is in the NULL-terminated list. */
int qgc_takes_value(const char *a, const char *const *list);
/* a * b into *out; -1 on size_t overflow. */
int qgc_mul_size(size_t a, size_t b, size_t *out);
/* An invalid QG_FORCE_ISA: message on stderr, returns 2; else 0. */
int qgc_forced_isa_error(void);
/* Writes buf to path atomically (temporary name, rename); 0, or 1 with the reason on stderr. */
int qgc_write_output(const char *path, const void *buf, size_t n);
/* Whether two paths name one existing file. */
int qgc_same_file(const char *a, const char *b);
/* The usage error for an output that would overwrite its input; returns 2. */
int qgc_refuse_same_file(const char *usage, const char *in_opt, const char *in, const char *out);
/* Reads a whole file: want = exact byte count or SIZE_MAX for any (*got gets the count). NULL with a
 * named error on stderr on any failure (missing, directory, wrong size, out of memory). */
void *qgc_read_input(const char *path, size_t want, const char *what, size_t *got);
/* The golden directory (QGOLD_GOLDEN, the build tree's pointer file, the install layout); 0 or 1. */
int qgc_find_golden(char *buf, size_t len);
/* Whether some registry row has this format. */
int qgc_format_known(const char *f);
const char *qgc_tier_name(qg_tier t);
/* A JSON string literal of s. */
void qgc_json_str(FILE *fp, const char *s);
const char *qgc_verdict_name(qg_audit_verdict v);

/* The audit table: qgc_print_row is a qg_audit_sink printing one row (and its JSON object when json
 * is set). qgc_table_header prints the column titles. */
typedef struct {
    FILE *json;
    int first;
} sink_ctx;
void qgc_table_header(void);
void qgc_print_row(const qg_audit_row *r, void *vctx);

#endif
