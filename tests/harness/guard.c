#include "guard.h"

#include <stdlib.h>
#include <string.h>

/* Canary bytes follow a position-dependent pattern, so a kernel that smears one value (or the
 * poison) past the end is caught. */
static unsigned char canary_byte(size_t i) { return (unsigned char)(0xC3u ^ (i * 37u + 11u)); }

static void fill(unsigned char *buf, size_t payload, unsigned char poison)
{
    for (size_t i = 0; i < QG_GUARD_CANARY_BYTES; i++) {
        buf[i] = canary_byte(i);
        buf[QG_GUARD_CANARY_BYTES + payload + i] = canary_byte(i + QG_GUARD_CANARY_BYTES);
    }
    memset(buf + QG_GUARD_CANARY_BYTES, poison, payload);
}

static int canaries_ok(const unsigned char *buf, size_t payload, size_t *where)
{
    for (size_t i = 0; i < QG_GUARD_CANARY_BYTES; i++) {
        if (buf[i] != canary_byte(i)) {
            *where = i;
            return 0;
        }
        if (buf[QG_GUARD_CANARY_BYTES + payload + i] != canary_byte(i + QG_GUARD_CANARY_BYTES)) {
            *where = QG_GUARD_CANARY_BYTES + payload + i;
            return 0;
        }
    }
    return 1;
}

static int all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v) return 0;
    return 1;
}

int qg_call_guarded(qg_guarded_fn fn, void *ctx, void *out, size_t n, size_t elem_size, qg_err *e)
{
    static int cuda_guarded;
    if (!cuda_guarded) {
        qg_guard_cuda_install();
        cuda_guarded = 1;
    }
    const size_t payload = n * elem_size, total = payload + 2 * QG_GUARD_CANARY_BYTES;
    const unsigned char poison[2] = {0xA5, 0x5A};
    unsigned char *buf[2] = {malloc(total), malloc(total)};
    int rc = QG_ERR_ok;
    if (buf[0] == NULL || buf[1] == NULL) {
        rc = qg_err_set(e, QG_ERR_alloc_failed, "guarded call: cannot allocate %zu bytes", total);
        goto done;
    }
    for (int run = 0; run < 2; run++) {
        fill(buf[run], payload, poison[run]);
        rc = fn(ctx, buf[run] + QG_GUARD_CANARY_BYTES);
        if (rc != QG_ERR_ok) {
            qg_err_set(e, rc, "kernel returned %s (%s)", qg_error_name(rc), qg_error_message(rc));
            goto done;
        }
        size_t where;
        if (!canaries_ok(buf[run], payload, &where)) {
            long off = (long)where - QG_GUARD_CANARY_BYTES;
            rc = qg_err_set(e, QG_ERR_canary_clobbered, "kernel wrote outside its output: byte offset %ld relative to an output of %zu bytes",
                            off, payload);
            goto done;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const unsigned char *a = buf[0] + QG_GUARD_CANARY_BYTES + i * elem_size;
        const unsigned char *b = buf[1] + QG_GUARD_CANARY_BYTES + i * elem_size;
        if (all_bytes(a, elem_size, poison[0]) && all_bytes(b, elem_size, poison[1])) {
            rc = qg_err_set(e, QG_ERR_output_unwritten, "kernel left output element %zu of %zu unwritten (poison survived both runs)", i, n);
            goto done;
        }
        if (memcmp(a, b, elem_size) != 0) {
            rc = qg_err_set(e, QG_ERR_nondeterministic, "output element %zu of %zu differs between two identical calls", i, n);
            goto done;
        }
    }
    if (payload > 0) memcpy(out, buf[0] + QG_GUARD_CANARY_BYTES, payload);
done:
    free(buf[0]);
    free(buf[1]);
    return rc;
}
