/* Loading a kernel plugin (the public ABI is qgold/plugin.h; spec: reference/spec/plugin.md).
 *
 * qgp_load dlopens the library, calls its entry point with this qgold's ABI version, validates every
 * field of every kernel descriptor, and turns each descriptor into an ordinary qg_kernel row, so the
 * audit runners of kinds.h judge it exactly as they judge a built-in kernel. The row's functions are
 * trampolines with the registry's signatures: they allocate the plugin's workspace, pass its user
 * pointer, give a CUDA kernel device copies of every buffer and a stream (qg_cuda_run, in builds with
 * CUDA), and fold every output they return into the output hash (qgp_hash_*), which the verify driver
 * compares across processes.
 */
#ifndef QGOLD_PLUGIN_LOAD_H
#define QGOLD_PLUGIN_LOAD_H

#include "qg_err.h"
#include "qgold/plugin.h"
#include "qgold/registry.h"

#include <stddef.h>
#include <stdint.h>

enum { QGP_MAX_KERNELS = 256 };

typedef struct {
    qg_kernel row;                    /* what the runners see; fn holds trampolines */
    const qgold_plugin_kernel *desc;  /* the plugin's descriptor (its storage) */
    char name[160];                   /* the descriptor's name, copied */
    char format[32], path[32];
    int cuda;                         /* backend is QGOLD_PLUGIN_CUDA */
} qgp_kernel;

typedef struct {
    void *handle;
    char file[1024];
    char name[128];
    char version[128];
    uint32_t abi;
    size_t n;
    qgp_kernel *k;
} qgp_plugin;

/* Loads and validates; 0 or a plugin_* error whose message names the file and, for a descriptor, its
 * index and name and the offending field. */
int qgp_load(const char *file, qgp_plugin **out, qg_err *e);
void qgp_unload(qgp_plugin *p);

/* The kernel the trampolines call (one at a time: the verify driver runs one kernel per process).
 * A trampoline called with no kernel active returns QG_ERR_generic. */
void qgp_activate(const qgp_kernel *k);

/* The output hash: SHA-256 over every output buffer of every successful call since qgp_hash_reset. */
void qgp_hash_reset(void);
void qgp_hash_final(unsigned char out[32], uint64_t *calls);

#endif
