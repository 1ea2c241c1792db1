/* Minimal test helpers: checks count failures and print where and why; main returns qg_test_end().
 * Exit status 77 means "skipped" to ctest (SKIP_RETURN_CODE). */
#ifndef QGOLD_QG_TEST_H
#define QGOLD_QG_TEST_H

#include <stdio.h>
#include <stdlib.h>

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

#endif
