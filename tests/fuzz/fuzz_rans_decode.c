/* Fuzz target: rANS readers on arbitrary bytes taken as a container. Oracle: never crash, never read
 * outside the input; every result is a named rANS error or success, the decoder and the fused product
 * agree on it, and on success the fused product equals the plain int8 GEMV of the decoded weights bit
 * for bit. An input with flag bit 0 almost never matches its container checksum, so it is also run
 * resealed (checksum recomputed), which lets the mutations reach the rules behind the checksum. A
 * violated oracle aborts (libFuzzer and the replay test both report it). */
#include "qgold/errors.h"
#include "qgold/rans.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_ELEMS = 1 << 22 };

static void require(int cond)
{
    if (!cond) abort();
}

/* What qg_rans_check may return. */
static int is_check_error(int rc)
{
    return rc == QG_ERR_ok || (rc >= QG_ERR_rans_bad_magic && rc <= QG_ERR_rans_bad_state) || rc == QG_ERR_rans_container_checksum ||
           rc == QG_ERR_rans_container_truncated || rc == QG_ERR_alloc_failed;
}

/* What a decoder may return: the above or a decode-time error. */
static int is_reader_error(int rc)
{
    return is_check_error(rc) || (rc >= QG_ERR_rans_truncated && rc <= QG_ERR_rans_checksum);
}

static void readers(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    readers(data, size);
    if (size >= QG_RANS_HEADER && (data[9] & 1u) != 0) {
        uint8_t *sealed = malloc(size);
        if (sealed != NULL) {
            memcpy(sealed, data, size);
            require(qg_rans_seal(sealed, size) == QG_ERR_ok);
            readers(sealed, size);
        }
        free(sealed);
    }
    return 0;
}

static void readers(const uint8_t *data, size_t size)
{
    qg_rans_header h;
    const int rc = qg_rans_check(data, size, &h);
    require(is_check_error(rc));
    if (rc != QG_ERR_ok) {
        /* Readers report the structural error before looking at their buffers. */
        uint8_t w[1];
        uint16_t x[1] = {0};
        float y[1];
        require(qg_rans_decode_ref(data, size, w, 0) == rc);
        require(qg_rans_gemv_ref(data, size, x, 1, y, NULL) == rc);
        return;
    }
    const size_t M = h.M, K = h.K;
    if (M * K > MAX_ELEMS || M > MAX_ELEMS || K > MAX_ELEMS) return;
    const size_t B = 1 + (size > 0 ? data[size - 1] % 3 : 0);
    uint8_t *w = malloc(M * K + 1);
    float *sc = malloc(4 * M + 4), *y = malloc(4 * M * B + 4), *yi = malloc(4 * M * B + 4);
    uint16_t *x = malloc(2 * K * B + 2), *h16 = malloc(2 * M * B + 2), *hi = malloc(2 * M * B + 2);
    if (w && sc && y && yi && x && h16 && hi) {
        for (size_t i = 0; i < K * B; i++) x[i] = (uint16_t)(0x3000u + (i * 2654435761u >> 7) % 0x1400u) ^ (i % 5 == 0 ? 0x8000u : 0u);
        const int d = qg_rans_decode_ref(data, size, w, M * K);
        require(is_reader_error(d));
        const int g = qg_rans_gemv_ref(data, size, x, B, y, h16);
        require(g == d);
        require(qg_rans_scales(data, size, sc, M) == QG_ERR_ok);
        if (d == QG_ERR_ok) {
            require(qg_int8_gemv_ref(w, sc, M, K, x, B, yi, hi) == QG_ERR_ok);
            require(memcmp(y, yi, 4 * M * B) == 0 || M * B == 0);
            require(memcmp(h16, hi, 2 * M * B) == 0 || M * B == 0);
        }
    }
    free(w);
    free(sc);
    free(y);
    free(yi);
    free(x);
    free(h16);
    free(hi);
}
