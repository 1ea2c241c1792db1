/* Minimal test helpers: checks count failures and print where and why; main returns qg_test_end().
 * Exit status 77 means "skipped" to ctest (SKIP_RETURN_CODE). */
#ifndef QGOLD_QG_TEST_H
#define QGOLD_QG_TEST_H

#include "qgold/registry.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int qg_test_checks, qg_test_failures;

#define QG_CHECK(cond, ...)                                                           \
    do {                                                                              \
        qg_test_checks++;                                                             \
        if (!(cond)) {                                                                \
            qg_test_failures++;                                                       \
            if (qg_test_failures <= 20) {                                             \
                fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
                fprintf(stderr, __VA_ARGS__);                                         \
                fprintf(stderr, "\n");                                                \
            }                                                                         \
        }                                                                             \
    } while (0)

enum { QG_TEST_SKIP = 77 };

/* A GPU test without a device: skip, unless QG_REQUIRE_GPU=1 makes the absence a failure. */
static inline int qg_test_no_gpu(const char *why)
{
    const char *req = getenv("QG_REQUIRE_GPU");
    if (req != NULL && req[0] == '1') {
        fprintf(stderr, "QG_REQUIRE_GPU=1 but no usable GPU: %s\n", why);
        return 1;
    }
    printf("skipped: %s\n", why);
    return QG_TEST_SKIP;
}

static inline int qg_test_end(const char *name)
{
    printf("%s: %d checks, %d failed\n", name, qg_test_checks, qg_test_failures);
    if (qg_test_checks == 0) {
        fprintf(stderr, "%s: no checks ran\n", name);
        return 1;
    }
    return qg_test_failures ? 1 : 0;
}

/* Whether the first `bytes` bytes at p all still hold the poison byte v (an output left untouched). */
static inline int qg_test_untouched(const void *p, size_t bytes, unsigned char v)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < bytes; i++)
        if (c[i] != v) return 0;
    return 1;
}

/* A GEMV test call's output buffer `out`: n float32 results, then n fp16 results. `outs` asks for float32
 * (bit 0) and/or fp16 (bit 1); a part not asked for is zeroed and comes back as NULL. */
static inline void qg_test_gemv_outs(void *out, size_t n, int outs, float **y32, uint16_t **y16)
{
    *y32 = out;
    *y16 = (uint16_t *)out + 2 * n;
    if (!(outs & 1)) {
        memset(*y32, 0, n * 4);
        *y32 = NULL;
    }
    if (!(outs & 2)) {
        memset(*y16, 0, n * 2);
        *y16 = NULL;
    }
}

/* main() of a backend-generic kernel test, `NAME BACKEND [full]`: the optimized backend named by argv[1]
 * (never the reference), or -1 with *exit_code set: 2 on a usage error, 77 (or 1 under QG_REQUIRE_GPU=1
 * for CUDA) when the backend cannot run here. *full: whether "full" was given. */
static inline int qg_test_backend_arg(int argc, char **argv, const char *name, int *full, int *exit_code)
{
    if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "full") != 0)) {
        fprintf(stderr, "usage: %s BACKEND [full]\n", name);
        *exit_code = 2;
        return -1;
    }
    *full = argc == 3;
    const int b = qg_backend_from_name(argv[1]);
    char why[200];
    if (b < 0 || b == QG_BACKEND_REF) {
        fprintf(stderr, "%s: %s is not an optimized backend\n", name, argv[1]);
        *exit_code = 2;
        return -1;
    }
    if (!qg_backend_available((qg_backend)b, why, sizeof why)) {
        if (b == QG_BACKEND_CUDA) {
            *exit_code = qg_test_no_gpu(why);
        } else {
            printf("skipped: %s\n", why);
            *exit_code = QG_TEST_SKIP;
        }
        return -1;
    }
    return b;
}

#endif
