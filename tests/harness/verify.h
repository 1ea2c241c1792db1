/* `qgold verify --plugin`: every kernel of a plugin over every golden fixture of its format, through the
 * audit runners of kinds.h, each case in a forked child with a time limit (spec: reference/spec/plugin.md).
 *
 * Per case: a child runs the kind's runner (poison, canaries, two in-process runs: full write, no
 * overrun, determinism) and sends back its verdict and the SHA-256 of every output the kernel produced;
 * for a passing case a second child runs it again and the two hashes must agree (determinism across
 * processes). A child killed by a signal, exiting without a report or running past the limit fails the
 * case with the signal or the limit named, and the next case runs. K-quant kinds also get random bytes
 * as blocks against the reference and, with `full`, large shapes made from the pinned stream.
 */
#ifndef QGOLD_VERIFY_H
#define QGOLD_VERIFY_H

#include "audit.h"
#include "plugin_load.h"

typedef struct {
    const char *golden_dir;
    const char *format;  /* NULL: every format */
    const char *path;    /* NULL: every path */
    int backend;         /* 0: both; QGOLD_PLUGIN_CPU or QGOLD_PLUGIN_CUDA */
    int full;            /* large on-the-fly shapes */
    int no_manifest;
    double timeout_s;    /* per case; large shapes get 20 times as long */
} qgv_opts;

/* Runs every selected kernel of a loaded plugin, one row per kernel x fixture (and per extra check),
 * through sink. Returns 0 when nothing failed. */
int qgv_verify(const qgv_opts *o, const qgp_plugin *p, qg_audit_sink sink, void *ctx, qg_audit_summary *sum);

/* Loads a plugin first in a child (an entry point that crashes or hangs is reported, not fatal), then
 * here. 0, or the plugin_* error with its message. */
int qgv_load_isolated(const char *file, double timeout_s, qgp_plugin **out, qg_err *e);

#endif
