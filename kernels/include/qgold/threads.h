/* CPU threads of the multi-threaded CPU kernels (K-quants, SpQR, rANS): QG_THREADS from the environment,
 * else all online CPUs, unless qg_set_threads() chose a number (0 restores the default). Results never
 * depend on it. The range splitter that uses the count is internal (kernels/cpu/threads.h). */
#ifndef QGOLD_THREADS_H
#define QGOLD_THREADS_H

#ifdef __cplusplus
extern "C" {
#endif

void qg_set_threads(int n);
int qg_threads(void);

#ifdef __cplusplus
}
#endif
#endif
