/* The harness error (qg_err.h): a code and its message, written only through these two functions. */
#include "qg_err.h"

#include <stdarg.h>
#include <stdio.h>

int qg_err_set(qg_err *e, int code, const char *fmt, ...)
{
    if (e != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        e->code = code;
    }
    return code;
}

void qg_err_clear(qg_err *e)
{
    if (e != NULL) {
        e->code = 0;
        e->msg[0] = '\0';
    }
}
