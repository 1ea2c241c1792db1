/* golden.rng: the C stream rebuilds every case of golden/rng/splitmix64.h5 from its seed, distribution
 * and parameters alone, and must match the Python generator's bytes exactly. */
#include "qg_test.h"
#include "compare.h"
#include "fixture.h"
#include "qgold/fp16.h"
#include "qgold/rng.h"

#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_rng_golden GOLDEN_DIR\n");
        return 2;
    }
    qg_err e;
    qgh_manifest *m = NULL;
    qgh_file *f = NULL;
    if (qgh_manifest_load(argv[1], &m, &e) || qgh_open(argv[1], "rng/splitmix64.h5", m, &f, &e) || qgh_lint(f, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    for (size_t c = 0; c < qgh_case_count(f); c++) {
        const char *cn = qgh_case_name(f, c);
        qgh_case_info ci;
        int64_t count = 0, n = 0;
        double a = 0, b = 0;
        int rc = qgh_read_case_info(f, cn, &ci, &e);
        if (!rc) rc = qgh_attr_i64(f, cn, "count", &count, &e);
        QG_CHECK(rc == 0 && count > 0, "%s", e.msg);
        if (rc || count <= 0) continue;
        int is64 = strcmp(ci.distribution, "u64") == 0;
        int isf = strcmp(ci.distribution, "uniform01") == 0 || strcmp(ci.distribution, "uniform") == 0;
        qgh_array arr;
        rc = qgh_read(f, cn, "values", is64 ? QGH_U64 : QGH_U32, isf ? "float32" : NULL, 1, NULL, &arr, &e);
        QG_CHECK(rc == 0 && arr.count == (size_t)count, "%s", e.msg);
        if (rc) continue;
        if (!strcmp(ci.distribution, "int_range") || !strcmp(ci.distribution, "permutation")) rc = qgh_attr_i64(f, cn, "n", &n, &e);
        if (!strcmp(ci.distribution, "uniform") && !rc) rc = qgh_attr_f64(f, cn, "a", &a, &e) || qgh_attr_f64(f, cn, "b", &b, &e);
        QG_CHECK(rc == 0, "%s", e.msg);
        size_t N = arr.count;
        void *mine = calloc(N, is64 ? 8 : 4);
        qg_rng r;
        qg_rng_init(&r, ci.seed);
        int known = 1;
        for (size_t i = 0; i < N && known; i++) {
            if (is64) ((uint64_t *)mine)[i] = qg_rng_u64(&r);
            else if (!strcmp(ci.distribution, "bits32")) ((uint32_t *)mine)[i] = qg_rng_bits32(&r);
            else if (!strcmp(ci.distribution, "uniform01")) ((uint32_t *)mine)[i] = qg_f32_bits(qg_rng_uniform01(&r));
            else if (!strcmp(ci.distribution, "uniform")) ((uint32_t *)mine)[i] = qg_f32_bits(qg_rng_uniform(&r, (float)a, (float)b));
            else if (!strcmp(ci.distribution, "int_range")) ((uint32_t *)mine)[i] = qg_rng_int_range(&r, (uint64_t)n);
            else if (!strcmp(ci.distribution, "permutation")) {
                QG_CHECK((size_t)n == N, "%s: permutation of n=%lld has %zu values", ci.case_id, (long long)n, N);
                qg_rng_permutation(&r, mine, N);
                break;
            } else known = 0;
        }
        QG_CHECK(known, "%s: unknown distribution %s", ci.case_id, ci.distribution);
        qg_exact_report rep;
        QG_CHECK(qg_compare_exact(is64 ? QG_ELEM_U64 : QG_ELEM_U32, arr.data, mine, N, &rep) == QG_ERR_ok,
                 "%s (%s, seed %llu): %s", ci.case_id, ci.distribution, (unsigned long long)ci.seed, rep.text);
        printf("%s: %zu values agree\n", ci.case_id, N);
        free(mine);
        qgh_array_free(&arr);
    }
    qgh_close(f);
    qgh_manifest_free(m);
    return qg_test_end("golden.rng");
}
