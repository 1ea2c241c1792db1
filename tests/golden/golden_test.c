/* ctest driver for golden.<format>.<backend>: the audit restricted to one format and backend.
 * Exit 0 pass, 1 fail, 77 backend unavailable here (for cuda: a failure when QG_REQUIRE_GPU=1). */
#include "qg_test.h"
#include "audit.h"

#include <string.h>

static void print_row(const qg_audit_row *r, void *ctx)
{
    (void)ctx;
    const char *v = r->verdict == QG_AUDIT_PASS ? "PASS" : r->verdict == QG_AUDIT_FAIL ? "FAIL" : "SKIP";
    printf("%s %s %s %s: %zu cases, %zu elements, worst ratio %.3g: %s\n", r->format, r->path, r->backend, r->file, r->cases,
           r->elements, r->worst_ratio, v);
    if (r->verdict != QG_AUDIT_PASS) printf("  %s\n", r->detail);
}

int main(int argc, char **argv)
{
    const char *format = NULL, *backend = NULL, *golden = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--format") == 0) format = argv[i + 1];
        else if (strcmp(argv[i], "--backend") == 0) backend = argv[i + 1];
        else if (strcmp(argv[i], "--golden") == 0) golden = argv[i + 1];
    }
    int b = backend ? qg_backend_from_name(backend) : -1;
    if (format == NULL || golden == NULL || b < 0) {
        fprintf(stderr, "usage: golden_test --format F --backend B --golden DIR\n");
        return 2;
    }
    char why[200];
    if (!qg_backend_available((qg_backend)b, why, sizeof why)) {
        if (b == QG_BACKEND_CUDA) return qg_test_no_gpu(why);
        printf("skipped: %s\n", why);
        return QG_TEST_SKIP;
    }
    qg_audit_opts o = {golden, format, b, 0}; /* shipped fixtures always carry MANIFEST */
    qg_audit_summary s;
    int rc = qg_audit(&o, print_row, NULL, &s);
    printf("%zu passed, %zu failed, %zu skipped\n", s.pass, s.fail, s.skip);
    if (s.pass == 0 && s.fail == 0) {
        fprintf(stderr, "nothing ran\n");
        return 1;
    }
    return rc ? 1 : 0;
}
