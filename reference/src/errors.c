/* One table of error names and messages, generated from QG_ERROR_LIST so the two cannot drift. */
#include "qgold/errors.h"

#include <string.h>

const char *qg_error_name(int code)
{
    switch (code) {
#define QG_X_NAME(name, num, msg) case num: return #name;
        QG_ERROR_LIST(QG_X_NAME)
#undef QG_X_NAME
    default: return "unknown_error";
    }
}

const char *qg_error_message(int code)
{
    switch (code) {
#define QG_X_MSG(name, num, msg) case num: return msg;
        QG_ERROR_LIST(QG_X_MSG)
#undef QG_X_MSG
    default: return "unknown error code";
    }
}

int qg_error_from_name(const char *name)
{
    if (name == NULL) return -1;
#define QG_X_FROM(n, num, msg) if (strcmp(name, #n) == 0) return num;
    QG_ERROR_LIST(QG_X_FROM)
#undef QG_X_FROM
    return -1;
}
