/* unit.errors: the error list is a stable, one-to-one map between numbers, names and messages. */
#include "qg_test.h"
#include "qgold/errors.h"

#include <string.h>

static const struct {
    int num;
    const char *name;
} k_list[] = {
#define X(name, num, msg) {num, #name},
    QG_ERROR_LIST(X)
#undef X
};

int main(void)
{
    size_t n = sizeof k_list / sizeof k_list[0];
    QG_CHECK(k_list[0].num == 0 && strcmp(k_list[0].name, "ok") == 0, "code 0 is ok");
    for (size_t i = 0; i < n; i++) {
        QG_CHECK(k_list[i].num >= 0 && k_list[i].num < QG_ERR_max_code, "%s has number %d", k_list[i].name, k_list[i].num);
        QG_CHECK(strcmp(qg_error_name(k_list[i].num), k_list[i].name) == 0, "name of %d", k_list[i].num);
        QG_CHECK(qg_error_from_name(k_list[i].name) == k_list[i].num, "number of %s", k_list[i].name);
        QG_CHECK(strlen(qg_error_message(k_list[i].num)) > 0, "message of %s", k_list[i].name);
        for (size_t j = 0; j < i; j++) {
            QG_CHECK(k_list[i].num != k_list[j].num, "%s and %s share number %d", k_list[i].name, k_list[j].name, k_list[i].num);
            QG_CHECK(strcmp(k_list[i].name, k_list[j].name) != 0, "name %s repeats", k_list[i].name);
        }
    }
    QG_CHECK(strcmp(qg_error_name(998), "unknown_error") == 0, "unknown number");
    QG_CHECK(qg_error_from_name("no_such_error") == -1, "unknown name");
    QG_CHECK(qg_error_from_name(NULL) == -1, "NULL name");
    return qg_test_end("unit.errors");
}
