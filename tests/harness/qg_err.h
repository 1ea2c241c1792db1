/* A harness error: a stable code from qgold/errors.h plus a message that names the file, the object
 * and what was expected. */
#ifndef QGOLD_HARNESS_ERR_H
#define QGOLD_HARNESS_ERR_H

#include "qgold/errors.h"

typedef struct {
    int code;
    char msg[1024];
} qg_err;

/* Sets code and a printf-formatted message; returns the code. */
int qg_err_set(qg_err *e, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void qg_err_clear(qg_err *e);

#endif
