/* Fuzz target: the fixture loader on arbitrary bytes. Oracle: never crash, never read out of bounds;
 * every input is either a file that lints and reads, or a named error. */
#include "fixture.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    qgh_file *f = NULL;
    qg_err e;
    if (qgh_open_image(data, size, "fuzz-input.h5", &f, &e) != QG_ERR_ok) return 0;
    (void)qgh_lint(f, &e);
    static const char *names[] = {"x", "expected", "values"};
    for (size_t c = 0; c < qgh_case_count(f); c++) {
        qgh_case_info ci;
        (void)qgh_read_case_info(f, qgh_case_name(f, c), &ci, &e);
        for (int k = 0; k < 3; k++) {
            qgh_array a;
            if (qgh_read(f, qgh_case_name(f, c), names[k], QGH_U16, "float16", 1, NULL, &a, &e) == QG_ERR_ok) qgh_array_free(&a);
            if (qgh_read(f, qgh_case_name(f, c), names[k], QGH_U32, NULL, 1, NULL, &a, &e) == QG_ERR_ok) qgh_array_free(&a);
        }
    }
    qgh_close(f);
    return 0;
}
