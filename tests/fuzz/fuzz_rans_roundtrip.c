/* Fuzz target: rANS encode -> decode on small matrices made from the input. Layout of the input:
 * bytes 0-1 and 2-3 give M and K (little-endian, mod 301), byte 4 the options (bits 0-2: predictor
 * 0..3 for every tile, 4..6 auto, 7 one request per tile from the following bytes; bit 3: checksums;
 * bits 4-7: batch - 1), then the weight bytes, repeated to fill M x K (zeros when there are none).
 * Oracle: encoding succeeds and is deterministic, the container validates and decodes to W, and the
 * fused product equals the plain int8 GEMV bit for bit. */
#include "qgold/errors.h"
#include "qgold/rans.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int cond)
{
    if (!cond) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5) return 0;
    const uint32_t M = (uint32_t)(data[0] | (data[1] << 8)) % 301, K = (uint32_t)(data[2] | (data[3] << 8)) % 301;
    const unsigned opt = data[4], sel = opt & 7u;
    const int cs = (opt >> 3) & 1;
    const size_t B = 1 + (opt >> 4), n = (size_t)M * K, nt = (size_t)((M + 255) / 256) * ((K + 255) / 256);
    const uint8_t *rest = data + 5;
    const size_t nrest = size - 5;
    uint8_t modes[4];
    for (size_t t = 0; t < nt; t++) {
        const unsigned r = sel == 7 ? (nrest > t ? rest[t] % 5u : 4u) : sel;
        modes[t] = (uint8_t)(r >= 4 ? QG_RANS_AUTO : r);
    }
    uint8_t *w = malloc(n + 1), *back = malloc(n + 1), *c1 = NULL, *c2 = NULL;
    float *sc = malloc(4 * (size_t)M + 4), *y = malloc(4 * M * B + 4), *yi = malloc(4 * M * B + 4);
    uint16_t *x = malloc(2 * K * B + 2);
    require(w && back && sc && y && yi && x);
    for (size_t i = 0; i < n; i++) w[i] = nrest ? rest[i % nrest] : 0;
    for (uint32_t r = 0; r < M; r++) sc[r] = 0.01f * (float)(r + 1);
    for (size_t i = 0; i < K * B; i++) x[i] = (uint16_t)(nrest ? (0x2C00u + rest[(i * 7) % nrest] * 37u) : 0x3C00u);
    size_t l1 = 0, l2 = 0;
    require(qg_rans_encode(w, sc, M, K, modes, cs, &c1, &l1) == QG_ERR_ok);
    require(qg_rans_encode(w, sc, M, K, modes, cs, &c2, &l2) == QG_ERR_ok);
    require(l1 == l2 && memcmp(c1, c2, l1) == 0);
    qg_rans_header h;
    require(qg_rans_check(c1, l1, &h) == QG_ERR_ok && h.M == M && h.K == K && h.flags == (uint8_t)cs);
    require(qg_rans_decode_ref(c1, l1, back, n) == QG_ERR_ok);
    require(n == 0 || memcmp(back, w, n) == 0);
    require(qg_rans_gemv_ref(c1, l1, x, B, y, NULL) == QG_ERR_ok);
    require(qg_int8_gemv_ref(w, sc, M, K, x, B, yi, NULL) == QG_ERR_ok);
    require(M == 0 || memcmp(y, yi, 4 * (size_t)M * B) == 0);
    free(w);
    free(back);
    free(c1);
    free(c2);
    free(sc);
    free(y);
    free(yi);
    free(x);
    return 0;
}
