/* unit.rans.ref: the rANS reference checked from the spec (reference/spec/rans.md).
 *
 * Expectations are derived independently of rans.c: normalization vectors worked out by hand, a
 * straightforward decoder written here from the spec's word-order rule (with a switch that reverses the
 * lane order, to prove the order is observable), a container layout walked field by field, a CRC-32
 * computed bit by bit from its definition, containers assembled and corrupted byte by byte here (every
 * bit of one of them), and the fused product as a naive loop in the pinned order. Random data comes from
 * the pinned stream. */
#include "qg_test.h"
#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/rans.h"
#include "qgold/rng.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { TT = 256, TB = 256 * 256 };

static qg_rng g_rng;

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xFF);
    p[1] = (uint8_t)(v >> 8);
}
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)((v >> (8 * i)) & 0xFF);
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)((v >> (8 * i)) & 0xFF);
}
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | ((uint64_t)get32(p + 4) << 32); }
static uint64_t up16(uint64_t n) { return (n + 15) / 16 * 16; }

/* ---- the container checksum, from the spec's definition ------------------------------------------- */

/* CRC-32 one bit at a time: register preset to all ones, each byte xored into the low end and shifted
 * out through the reflected polynomial 0xEDB88320, the result inverted. With `field_zero`, bytes 56-63
 * are fed as zero (the container checksum's rule). */
static uint32_t crc_bits(const uint8_t *p, size_t n, int field_zero)
{
    uint32_t r = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        r ^= (field_zero && i >= 56 && i < 64) ? 0u : p[i];
        for (int k = 0; k < 8; k++) r = (r & 1u) ? (r >> 1) ^ 0xEDB88320u : r >> 1;
    }
    return ~r;
}

/* Bytes 56-63 as the spec wants them after an edit: CRC-32 and complement with flag bit 0, else zero.
 * Edits meant to reach a rule behind the checksum go through this. */
static void seal(uint8_t *c, size_t len)
{
    if (len < 64) return;
    const uint32_t crc = (c[9] & 1u) ? crc_bits(c, len, 1) : 0u;
    put32(c + 56, crc);
    put32(c + 60, (c[9] & 1u) ? ~crc : 0u);
}

/* ---- normalization ------------------------------------------------------------------------------- */

static void test_normalize(void)
{
    uint64_t c[256];
    uint16_t f[256];
    /* 255 singletons + one dominant: every singleton 1, the dominant 4096 - 255, wherever it sits. */
    for (int dom = 0; dom < 256; dom += 255) {
        for (int s = 0; s < 256; s++) c[s] = 1;
        c[dom] = 1000000;
        QG_CHECK(qg_rans_normalize(c, f) == QG_ERR_ok, "normalize");
        int ok = f[dom] == 3841;
        for (int s = 0; s < 256; s++) ok &= s == dom || f[s] == 1;
        QG_CHECK(ok, "255 singletons + dominant at %d: got %u", dom, f[dom]);
    }
    /* Uniform: 16 each. */
    for (int s = 0; s < 256; s++) c[s] = 777;
    QG_CHECK(qg_rans_normalize(c, f) == QG_ERR_ok, "normalize");
    int ok = 1;
    for (int s = 0; s < 256; s++) ok &= f[s] == 16;
    QG_CHECK(ok, "uniform -> 16 each");
    /* One symbol: all of it. */
    memset(c, 0, sizeof c);
    c[0x80] = 5;
    QG_CHECK(qg_rans_normalize(c, f) == QG_ERR_ok && f[0x80] == 4096, "one symbol -> 4096");
    /* All tied, three present: 1365 each with remainder 1; the one missing unit goes to the lowest. */
    memset(c, 0, sizeof c);
    c[7] = c[9] = c[200] = 3;
    QG_CHECK(qg_rans_normalize(c, f) == QG_ERR_ok && f[7] == 1366 && f[9] == 1365 && f[200] == 1365 && f[8] == 0,
             "all tied: %u %u %u", f[7], f[9], f[200]);
    /* Empty histogram: the empty-container table. */
    memset(c, 0, sizeof c);
    QG_CHECK(qg_rans_normalize(c, f) == QG_ERR_ok && f[0] == 4096 && f[1] == 0, "all zero -> freq[0] = 4096");
    /* Counts near 2^64: floor(2^75 / (2^64 - 1)) = 2048 with remainder 2048; the other symbol 2047 with a
     * remainder just below N, so it takes the missing unit. */
    memset(c, 0, sizeof c);
    c[1] = (uint64_t)1 << 63;
    c[2] = ((uint64_t)1 << 63) - 1;
    QG_CHECK(qg_rans_normalize(c, f) == QG_ERR_ok && f[1] == 2048 && f[2] == 2048, "2^63 counts: %u %u", f[1], f[2]);
    /* Largest-remainder order, not symbol order: counts 1, 2 of 3 -> 1365.33, 2730.67 -> 1365, 2731. */
    memset(c, 0, sizeof c);
    c[0] = 1;
    c[1] = 2;
    QG_CHECK(qg_rans_normalize(c, f) == QG_ERR_ok && f[0] == 1365 && f[1] == 2731, "remainders: %u %u", f[0], f[1]);
    /* Over: 200 singletons floor to 0 -> 1 each; the dominant gives back the excess. */
    memset(c, 0, sizeof c);
    for (int s = 0; s < 200; s++) c[s] = 1;
    c[250] = 1000000;
    QG_CHECK(qg_rans_normalize(c, f) == QG_ERR_ok && f[250] == 3896 && f[0] == 1 && f[199] == 1, "over: %u", f[250]);
    /* Any histogram: sums to 4096, an entry is nonzero exactly when its count is. */
    for (int it = 0; it < 50; it++) {
        uint32_t sum = 0;
        int pres = 1;
        for (int s = 0; s < 256; s++) c[s] = qg_rng_int_range(&g_rng, 4) == 0 ? 1 + qg_rng_int_range(&g_rng, 100000) : 0;
        c[it] = 1; /* never all zero */
        QG_CHECK(qg_rans_normalize(c, f) == QG_ERR_ok, "normalize");
        for (int s = 0; s < 256; s++) {
            sum += f[s];
            pres &= (c[s] != 0) == (f[s] != 0);
        }
        QG_CHECK(sum == 4096 && pres, "random histogram %d", it);
    }
}

/* ---- an independent decoder, from the spec's rule; lane_order_reversed flips "lower l first" -------- */

static int spec_decode_tile(const uint8_t *payload, size_t size, const uint16_t *freq, int pred, int lane_order_reversed,
                            uint8_t *tile, int *max_same_step)
{
    uint32_t cum[257];
    cum[0] = 0;
    for (int s = 0; s < 256; s++) cum[s + 1] = cum[s] + freq[s];
    *max_same_step = 0;
    for (int w = 0; w < 8; w++) {
        uint32_t pos = w ? get32(payload + 1024 + 4 * (w - 1)) : 0, end = get32(payload + 1024 + 4 * w);
        uint32_t x[32];
        for (int l = 0; l < 32; l++) x[l] = get32(payload + 4 * (32 * w + l));
        for (int t = 0; t < 256; t++) {
            for (int l = 0; l < 32; l++) {
                uint32_t slot = x[l] % 4096;
                int s = 0;
                while (!(cum[s] <= slot && slot < cum[s + 1])) s++;
                tile[(32 * w + l) * 256 + t] = (uint8_t)s;
                x[l] = freq[s] * (x[l] / 4096) + slot - cum[s];
            }
            int need = 0;
            for (int k = 0; k < 32; k++) {
                int l = lane_order_reversed ? 31 - k : k;
                if (x[l] < 32768) {
                    need++;
                    if (pos >= end || 1056 + 2 * (size_t)pos + 2 > size) return -1;
                    x[l] = x[l] * 65536 + get16(payload + 1056 + 2 * pos);
                    pos++;
                }
            }
            if (need > *max_same_step) *max_same_step = need;
        }
        if (pos != end) return -2;
        for (int l = 0; l < 32; l++)
            if (x[l] != 32768) return -3;
    }
    /* undo the predictor, straight from the table (mod 256) */
    for (int r = 0; r < 256; r++)
        for (int c = 0; c < 256; c++) {
            int left = c ? tile[r * 256 + c - 1] : 0, up = r ? tile[(r - 1) * 256 + c] : 0;
            int diag = r && c ? tile[(r - 1) * 256 + c - 1] : 0;
            int e = tile[r * 256 + c], b = e;
            if (pred == 1) b = e + left;
            if (pred == 2) b = e + up;
            if (pred == 3) b = e + left + up - diag;
            tile[r * 256 + c] = (uint8_t)(((b % 256) + 256) % 256);
        }
    return 0;
}

/* ---- round trips with the writer layout walked field by field -------------------------------------- */

static uint8_t g_tile[TB], g_tile2[TB];

/* Encodes, checks the pinned layout, decodes with the reference and with the spec decoder, re-encodes.
 * Returns the container (caller frees) and its length. */
static uint8_t *roundtrip(const char *what, const uint8_t *w, uint32_t M, uint32_t K, const uint8_t *modes, int cs,
                          size_t *len_out, int *max_same_step)
{
    float *sc = malloc(sizeof(float) * (M ? M : 1));
    for (uint32_t r = 0; r < M; r++) sc[r] = 0.25f + (float)r;
    uint8_t *c = NULL, *c2 = NULL;
    size_t len = 0, len2 = 0;
    int rc = qg_rans_encode(w, sc, M, K, modes, cs, &c, &len);
    QG_CHECK(rc == QG_ERR_ok, "%s: encode -> %s", what, qg_error_name(rc));
    if (rc != QG_ERR_ok) {
        free(sc);
        return NULL;
    }
    rc = qg_rans_encode(w, sc, M, K, modes, cs, &c2, &len2);
    QG_CHECK(rc == QG_ERR_ok && len2 == len && memcmp(c, c2, len) == 0, "%s: encoding twice differs", what);
    free(c2);

    const uint32_t tr = (M + 255) / 256, tc = (K + 255) / 256, n = tr * tc;
    int lay = memcmp(c, "RANS", 4) == 0 && get16(c + 4) == 2 && get16(c + 6) == 64 && c[8] == 12 && c[9] == cs &&
              get16(c + 10) == 256 && get16(c + 12) == 256 && get16(c + 14) == 256 && get32(c + 16) == M &&
              get32(c + 20) == K && get32(c + 24) == tr && get32(c + 28) == tc && get64(c + 40) == 576 &&
              get64(c + 32) == 576 + 32 * (uint64_t)n && get64(c + 48) == len;
    /* the container checksum: CRC-32 of the file (bytes 56-63 as zero) and its complement, or 8 zeros */
    const uint32_t crc = crc_bits(c, len, 1);
    QG_CHECK(cs ? get32(c + 56) == crc && get32(c + 60) == ~crc : get64(c + 56) == 0, "%s: checksum field", what);
    uint32_t fsum = 0;
    uint16_t freq[256];
    for (int s = 0; s < 256; s++) fsum += freq[s] = get16(c + 64 + 2 * s);
    lay &= fsum == 4096;
    if (n == 0) lay &= freq[0] == 4096 && len == up16(576 + 4 * (uint64_t)M);
    for (uint32_t r = 0; r < M; r++) lay &= get32(c + 576 + 32 * n + 4 * r) == qg_f32_bits(sc[r]);
    uint64_t at = up16(576 + 32 * (uint64_t)n + 4 * (uint64_t)M);
    QG_CHECK(lay, "%s: header/table/scales layout", what);
    *max_same_step = 0;
    for (uint32_t k = 0; k < n; k++) {
        const uint8_t *m = c + 576 + 32 * k;
        uint64_t off = get64(m), size = get64(m + 8);
        int res = 1;
        for (int i = 21; i < 32; i++) res &= m[i] == 0;
        QG_CHECK(off == at && size >= 1056 && off + size <= len && res && m[20] <= 3 &&
                     size == up16(1056 + 2 * (uint64_t)get32(c + off + 1024 + 28)),
                 "%s: tile %u meta", what, k);
        if (modes != NULL && modes[k] != QG_RANS_AUTO) QG_CHECK(m[20] == modes[k], "%s: tile %u mode", what, k);
        for (uint64_t i = 1056 + 2 * (uint64_t)get32(c + off + 1024 + 28); i < size; i++)
            QG_CHECK(c[off + i] == 0, "%s: payload padding", what);
        /* The spec decoder gives the tile bytes: compare with W (0 outside). */
        int same = 0;
        int d = spec_decode_tile(c + off, size, freq, m[20], 0, g_tile, &same);
        QG_CHECK(d == 0, "%s: spec decoder on tile %u -> %d", what, k, d);
        if (same > *max_same_step) *max_same_step = same;
        uint32_t i0 = k / tc * 256, j0 = k % tc * 256;
        int eq = 1;
        for (uint32_t r = 0; r < 256; r++)
            for (uint32_t cc = 0; cc < 256; cc++) {
                uint8_t want = (i0 + r < M && j0 + cc < K) ? w[(size_t)(i0 + r) * K + j0 + cc] : 0;
                eq &= g_tile[r * 256 + cc] == want;
            }
        QG_CHECK(eq, "%s: spec-decoded tile %u differs from W", what, k);
        QG_CHECK(get32(m + 16) == (cs ? qg_rans_adler32(g_tile, TB) : 0u), "%s: tile %u checksum field", what, k);
        at = off + size;
    }
    QG_CHECK(at == len, "%s: file_size is the end of the last payload", what);

    qg_rans_header h;
    QG_CHECK(qg_rans_check(c, len, &h) == QG_ERR_ok && h.M == M && h.K == K, "%s: check", what);
    uint8_t *back = malloc((size_t)M * K + 1);
    rc = qg_rans_decode_ref(c, len, back, (size_t)M * K);
    QG_CHECK(rc == QG_ERR_ok && ((size_t)M * K == 0 || memcmp(back, w, (size_t)M * K) == 0), "%s: decode -> %s", what,
             qg_error_name(rc));
    float *sb = malloc(sizeof(float) * (M ? M : 1));
    QG_CHECK(qg_rans_scales(c, len, sb, M) == QG_ERR_ok && (M == 0 || memcmp(sb, sc, sizeof(float) * M) == 0),
             "%s: scales", what);
    free(sb);
    free(back);
    free(sc);
    *len_out = len;
    return c;
}

static void fill_random(uint8_t *w, size_t n)
{
    for (size_t i = 0; i < n; i++) w[i] = (uint8_t)qg_rng_int_range(&g_rng, 256);
}

/* Bytes with a skewed distribution so that every predictor has something to do. */
static void fill_smooth(uint8_t *w, uint32_t M, uint32_t K)
{
    for (uint32_t r = 0; r < M; r++)
        for (uint32_t c = 0; c < K; c++)
            w[(size_t)r * K + c] = (uint8_t)((r + 2 * c) / 7 + qg_rng_int_range(&g_rng, 3));
}

static void test_edge_tiles(void)
{
    uint8_t *w = malloc(TB);
    uint8_t modes[1];
    size_t len;
    int same;
    static const uint8_t bytes[4] = {0x00, 0x7F, 0x80, 0xFF};
    for (int i = 0; i < 4; i++)
        for (int mode = 0; mode <= 4; mode++) {
            char what[64];
            snprintf(what, sizeof what, "all 0x%02X mode %d", bytes[i], mode);
            memset(w, bytes[i], TB);
            modes[0] = mode == 4 ? QG_RANS_AUTO : (uint8_t)mode;
            uint8_t *c = roundtrip(what, w, 256, 256, modes, 1, &len, &same);
            if (c == NULL) continue;
            /* One symbol in the table (mode 0/auto, or any mode on 0x00): no words, states L. */
            if (mode == 0 || mode == 4 || bytes[i] == 0) {
                const uint64_t off = get64(c + 576);
                int zero = get64(c + 576 + 8) == 1056 && c[576 + 20] == (mode == 4 ? 0 : mode);
                for (int l = 0; l < 256; l++) zero &= get32(c + off + 4 * l) == 32768;
                for (int w8 = 0; w8 < 8; w8++) zero &= get32(c + off + 1024 + 4 * w8) == 0;
                QG_CHECK(zero, "%s: zero words, states 2^15, data_size 1056", what);
            }
            free(c);
        }
    /* Two symbols, one of them seen once: frequency 1. */
    memset(w, 0x05, TB);
    w[123 * 256 + 45] = 0x80;
    modes[0] = 0;
    uint8_t *c = roundtrip("two symbols", w, 256, 256, modes, 0, &len, &same);
    if (c != NULL) QG_CHECK(get16(c + 64 + 2 * 0x80) == 1 && get16(c + 64 + 2 * 5) == 4095, "frequency-1 symbol");
    free(c);
    /* Uniform random bytes: 16 each, the payload expands. Several lanes renormalize in one step. */
    fill_random(w, TB);
    modes[0] = 0;
    c = roundtrip("uniform random", w, 256, 256, modes, 1, &len, &same);
    if (c != NULL) QG_CHECK(len > TB && get16(c + 64) == 16, "uniform random expands (%zu)", len);
    QG_CHECK(same >= 2, "uniform random: two lanes of a warp renormalize in one step (max %d)", same);
    free(c);
    /* Adversarial: many symbols of frequency 1 next to a dominant one. */
    memset(w, 0, TB);
    for (int s = 1; s < 256; s++) w[(size_t)qg_rng_int_range(&g_rng, TB)] = (uint8_t)s;
    for (int mode = 0; mode <= 3; mode++) {
        modes[0] = (uint8_t)mode;
        c = roundtrip("frequency-1 symbols", w, 256, 256, modes, 1, &len, &same);
        free(c);
    }
    free(w);
    /* -128 and 127 at the warp and tile edges of a 257 x 257 matrix, every predictor. */
    const uint32_t M = 257, K = 257;
    w = malloc((size_t)M * K);
    fill_smooth(w, M, K);
    static const uint32_t rows[] = {0, 31, 32, 63, 64, 255, 256}, cols[] = {0, 1, 254, 255, 256};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        for (size_t j = 0; j < sizeof cols / sizeof cols[0]; j++)
            w[(size_t)rows[i] * K + cols[j]] = (i + j) % 2 ? 0x80 : 0x7F;
    uint8_t m4[4];
    for (int mode = 0; mode <= 4; mode++) {
        memset(m4, mode == 4 ? QG_RANS_AUTO : mode, 4);
        c = roundtrip("-128/127 at edges", w, M, K, m4, mode & 1, &len, &same);
        free(c);
    }
    free(w);
}

static void test_shapes(void)
{
    static const uint32_t dims[] = {0, 1, 255, 256, 257};
    for (size_t a = 0; a < 5; a++)
        for (size_t b = 0; b < 5; b++) {
            const uint32_t M = dims[a], K = dims[b];
            uint8_t *w = malloc((size_t)M * K + 1);
            fill_smooth(w, M, K);
            const uint32_t n = ((M + 255) / 256) * ((K + 255) / 256);
            uint8_t modes[4];
            for (uint32_t k = 0; k < n; k++) modes[k] = (uint8_t)((k + a + b) % 5 == 4 ? QG_RANS_AUTO : (k + a + b) % 5);
            char what[64];
            size_t len;
            int same;
            snprintf(what, sizeof what, "M=%u K=%u", M, K);
            free(roundtrip(what, w, M, K, modes, (int)((a + b) % 2), &len, &same));
            snprintf(what, sizeof what, "M=%u K=%u auto", M, K);
            free(roundtrip(what, w, M, K, NULL, 1, &len, &same));
            free(w);
        }
}

/* The auto policy against a count^2 computed here; ties go to the lower mode. */
static void test_auto_policy(void)
{
    uint8_t *t = malloc(TB), *e = malloc(TB);
    for (int it = 0; it < 6; it++) {
        for (int r = 0; r < 256; r++)
            for (int c = 0; c < 256; c++)
                t[r * 256 + c] = (uint8_t)(it % 3 == 0 ? c * 3 : it % 3 == 1 ? r * 5 + c : r * 3 + c * 2) +
                                 (uint8_t)(it >= 3 ? qg_rng_int_range(&g_rng, 2) : 0);
        int best = -1;
        uint64_t bs = 0;
        for (int mode = 0; mode < 4; mode++) {
            QG_CHECK(qg_rans_predict(t, mode, e) == QG_ERR_ok, "predict");
            uint64_t h[256] = {0}, s = 0;
            for (int i = 0; i < TB; i++) h[e[i]]++;
            for (int i = 0; i < 256; i++) s += h[i] * h[i];
            if (best < 0 || s > bs) {
                best = mode;
                bs = s;
            }
            memcpy(g_tile2, e, TB);
            QG_CHECK(qg_rans_unpredict(g_tile2, mode) == QG_ERR_ok && memcmp(g_tile2, t, TB) == 0, "unpredict %d", mode);
        }
        QG_CHECK(qg_rans_auto_predictor(t) == best, "auto policy case %d: %d vs %d", it, qg_rans_auto_predictor(t), best);
    }
    /* All zero: every mode gives one symbol, a four-way tie -> mode 0. */
    memset(t, 0, TB);
    QG_CHECK(qg_rans_auto_predictor(t) == 0, "tie -> mode 0");
    /* Predictor values from the table, at a corner and in the interior. */
    fill_random(t, TB);
    QG_CHECK(qg_rans_predict(t, 3, e) == QG_ERR_ok && e[0] == t[0] && e[1] == (uint8_t)(t[1] - t[0]) &&
                 e[256] == (uint8_t)(t[256] - t[0]) && e[257] == (uint8_t)(t[257] - t[256] - t[1] + t[0]),
             "gradient predictor");
    QG_CHECK(qg_rans_predict(t, 4, e) == QG_ERR_rans_predictor_invalid && qg_rans_predict(t, -1, e) == QG_ERR_rans_predictor_invalid,
             "bad predictor");
    free(t);
    free(e);
}

/* ---- the word order is observable ---------------------------------------------------------------- */

static void test_word_order(void)
{
    fill_random(g_tile, TB);
    uint16_t freq[256];
    for (int s = 0; s < 256; s++) freq[s] = 16;
    uint8_t *p = malloc(QG_RANS_PAYLOAD_MAX), *back = malloc(TB);
    size_t plen = 0;
    QG_CHECK(qg_rans_encode_tile(g_tile, freq, p, &plen) == QG_ERR_ok, "encode_tile");
    int same = 0;
    QG_CHECK(spec_decode_tile(p, plen, freq, 0, 0, back, &same) == 0 && memcmp(back, g_tile, TB) == 0,
             "lower lane first decodes the tile");
    QG_CHECK(same >= 2, "a step where two lanes take words (%d)", same);
    int rc = spec_decode_tile(p, plen, freq, 0, 1, back, &same);
    QG_CHECK(rc != 0 || memcmp(back, g_tile, TB) != 0, "higher lane first must fail or differ");
    /* The encoder emits at most one word per symbol: uniform data stays under the payload bound. */
    QG_CHECK(plen <= QG_RANS_PAYLOAD_MAX && plen % 16 == 0, "payload size %zu", plen);
    /* A symbol absent from the table is an error value. */
    freq[0] += freq[1];
    freq[1] = 0;
    g_tile[77] = 1;
    QG_CHECK(qg_rans_encode_tile(g_tile, freq, p, &plen) == QG_ERR_rans_symbol_not_in_table, "symbol not in table");
    free(p);
    free(back);
}

/* ---- corrupt containers, one rule at a time ------------------------------------------------------- */

static int decode_all(const uint8_t *c, size_t len)
{
    qg_rans_header h;
    int rc = qg_rans_check(c, len, &h);
    if (rc != QG_ERR_ok) return rc;
    uint8_t *w = malloc((size_t)h.M * h.K + 1);
    rc = qg_rans_decode_ref(c, len, w, (size_t)h.M * h.K);
    free(w);
    if (h.M > 0) { /* the fused product reports the same error */
        uint16_t *x = calloc((size_t)h.K + 1, 2);
        float *y = malloc(sizeof(float) * h.M);
        int g = qg_rans_gemv_ref(c, len, x, 1, y, NULL);
        QG_CHECK(g == rc, "gemv error %s differs from decode %s", qg_error_name(g), qg_error_name(rc));
        free(x);
        free(y);
    }
    return rc;
}

#define EXPECT(buf, len, err, what)                                                                              \
    do {                                                                                                         \
        int rc_ = decode_all(buf, len);                                                                          \
        QG_CHECK(rc_ == QG_ERR_##err, "%s: got %s, want %s", what, qg_error_name(rc_), #err);                    \
    } while (0)
/* An edit of a checksummed container with its checksum recomputed: the edited rule, not the checksum,
 * must fire (the rules behind the checksum stay tested with checksums on). */
#define EXPECT_SEALED(buf, len, err, what)                                                                       \
    do {                                                                                                         \
        seal(buf, len);                                                                                          \
        EXPECT(buf, len, err, what);                                                                             \
    } while (0)

/* A one-tile container assembled here around a payload (writer layout), M x K <= 256 x 256. */
static uint8_t *assemble(const uint8_t *payload, size_t plen, const uint16_t *freq, uint32_t M, uint32_t K, int pred,
                         int cs, uint32_t checksum, size_t *len)
{
    const uint64_t so = 576 + 32, po = up16(so + 4 * (uint64_t)M);
    *len = (size_t)(po + plen);
    uint8_t *c = calloc(*len, 1);
    memcpy(c, "RANS", 4);
    put16(c + 4, 2);
    put16(c + 6, 64);
    c[8] = 12;
    c[9] = (uint8_t)cs;
    put16(c + 10, 256);
    put16(c + 12, 256);
    put16(c + 14, 256);
    put32(c + 16, M);
    put32(c + 20, K);
    put32(c + 24, 1);
    put32(c + 28, 1);
    put64(c + 32, so);
    put64(c + 40, 576);
    put64(c + 48, *len);
    for (int s = 0; s < 256; s++) put16(c + 64 + 2 * s, freq[s]);
    put64(c + 576, po);
    put64(c + 584, plen);
    put32(c + 592, checksum);
    c[596] = (uint8_t)pred;
    for (uint32_t r = 0; r < M; r++) put32(c + so + 4 * r, 0x3F800000u);
    memcpy(c + po, payload, plen);
    seal(c, *len);
    return c;
}

static void test_corrupt(void)
{
    /* A valid 300 x 300 container with checksums: 4 tiles. */
    const uint32_t M = 300, K = 300;
    uint8_t *w = malloc((size_t)M * K);
    fill_smooth(w, M, K);
    size_t len;
    int same;
    uint8_t *base = roundtrip("corrupt base", w, M, K, NULL, 1, &len, &same);
    uint8_t *c = malloc(len + 64);
    EXPECT(base, len, ok, "base");
#define FRESH() memcpy(c, base, len)
    const uint64_t p0 = get64(base + 576), p1 = get64(base + 576 + 32);

    EXPECT(c, 0, rans_container_truncated, "empty");
    FRESH();
    memcpy(c, "SNAR", 4);
    EXPECT(c, len, rans_bad_magic, "byte-swapped magic SNAR");
    FRESH();
    c[3] = 'X';
    EXPECT(c, len, rans_bad_magic, "magic RANX");
    EXPECT(c, 3, rans_container_truncated, "3 bytes RAN");
    EXPECT((const uint8_t *)"RAX", 3, rans_bad_magic, "3 bytes RAX");
    EXPECT(base, 63, rans_container_truncated, "63 bytes");
    EXPECT(base, len - 16, rans_container_truncated, "file cut 16 bytes short");
    FRESH();
    put64(c + 48, len + 1);
    EXPECT(c, len, rans_container_truncated, "file_size one above the length");
    FRESH();
    c[9] = 0;
    EXPECT(c, len, rans_bad_header, "flag bit 0 cleared: the checksum field is then nonzero");
    FRESH();
    put32(c + 60, get32(c + 56));
    EXPECT(c, len, rans_container_checksum, "complement field equal to the CRC");
    FRESH();
    put32(c + 20, K + 1);
    EXPECT(c, len, rans_container_checksum, "K + 1 (same tile count)");
    FRESH();
    put16(c + 4, 1);
    seal(c, len);
    EXPECT(c, len, rans_bad_header, "version 1 (the container without a checksum field)");
    const struct { /* not static: the file_size entry depends on len */
        int off, width;
        uint64_t val;
        const char *what;
    } hdr[] = {{4, 2, 3, "version 3"},       {6, 2, 65, "header_size"},     {8, 1, 11, "scale_bits"},
               {9, 1, 3, "flags bit 1"},     {10, 2, 128, "lanes_per_tile"}, {12, 2, 255, "tile_rows"},
               {14, 2, 512, "tile_cols"},    {24, 4, 1, "tiles_r"},          {28, 4, 3, "tiles_c"},
               {16, 4, 600, "M vs tiles_r"}, {48, 8, len - 16, "file_size below the length"}};
    for (size_t i = 0; i < sizeof hdr / sizeof hdr[0]; i++) {
        FRESH();
        if (hdr[i].width == 1) c[hdr[i].off] = (uint8_t)hdr[i].val;
        if (hdr[i].width == 2) put16(c + hdr[i].off, (uint16_t)hdr[i].val);
        if (hdr[i].width == 4) put32(c + hdr[i].off, (uint32_t)hdr[i].val);
        if (hdr[i].width == 8) put64(c + hdr[i].off, hdr[i].val);
        EXPECT_SEALED(c, len, rans_bad_header, hdr[i].what);
    }
    FRESH();
    c[9] = 0;
    seal(c, len);
    put64(c + 56, 1);
    EXPECT(c, len, rans_bad_header, "reserved bytes 56-63 nonzero without checksums");
    /* table */
    FRESH();
    put16(c + 64, (uint16_t)(get16(c + 64) + 1));
    EXPECT_SEALED(c, len, rans_bad_table, "sum 4097");
    FRESH();
    memset(c + 64, 0, 512);
    EXPECT_SEALED(c, len, rans_bad_table, "all zero");
    FRESH();
    memset(c + 64, 0, 512);
    put16(c + 64, 65535);
    put16(c + 66, 4097); /* 69632 = 4096 mod 2^16: a 16-bit sum would pass */
    EXPECT_SEALED(c, len, rans_bad_table, "entry above 4096, 16-bit wrap");
    /* metadata and regions */
    static const struct {
        int off;
        uint64_t val;
        const char *what;
    } meta[] = {{40, 580, "meta_offset misaligned"},
                {40, 1ull << 62, "meta_offset outside"},
                {40, 0, "meta over the header"},
                {32, 578, "scales_offset misaligned"},
                {32, 576, "scales overlap metadata"},
                {32, ~0ull - 3, "scales_offset near 2^64"},
                {576, 0, "data_offset 0"},
                {576 + 0, ~0ull - 15, "data_offset near 2^64"},
                {576 + 8, ~0ull, "data_size 2^64-1"},
                {576 + 8, 1040, "data_size below 1056"},
                {576 + 32, 0, "tile 1 over the header"}};
    for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++) {
        FRESH();
        put64(c + meta[i].off, meta[i].val);
        EXPECT_SEALED(c, len, rans_bad_tile_meta, meta[i].what);
    }
    FRESH();
    put64(c + 576, p0 + 8);
    EXPECT_SEALED(c, len, rans_bad_tile_meta, "data_offset not 16-aligned");
    FRESH();
    put64(c + 576 + 32, p0);
    put64(c + 576 + 40, get64(c + 576 + 8));
    EXPECT_SEALED(c, len, rans_bad_tile_meta, "two tiles at one offset (overlap)");
    FRESH();
    put64(c + 576 + 32, p1 - 16);
    EXPECT_SEALED(c, len, rans_bad_tile_meta, "tile 1 overlaps tile 0's end");
    FRESH();
    c[576 + 20] = 4;
    EXPECT_SEALED(c, len, rans_bad_tile_meta, "predictor 4");
    FRESH();
    c[576 + 31] = 1;
    EXPECT_SEALED(c, len, rans_bad_tile_meta, "reserved meta byte");
    FRESH();
    c[9] = 0; /* sealing then zeroes bytes 56-63: only the tile checksums remain nonzero */
    EXPECT_SEALED(c, len, rans_bad_tile_meta, "checksum nonzero with the flag clear");
    FRESH();
    put32(c + p0 + 1024, get32(c + p0 + 1028) + 1);
    EXPECT_SEALED(c, len, rans_bad_tile_meta, "warp_end decreasing");
    FRESH();
    put32(c + p0 + 1024 + 28, get32(c + p0 + 1024 + 28) + 8);
    EXPECT_SEALED(c, len, rans_bad_tile_meta, "warp_end[7] vs data_size");
    /* states */
    FRESH();
    put32(c + p1 + 4 * 37, 32767);
    EXPECT_SEALED(c, len, rans_bad_state, "state 2^15 - 1");
    FRESH();
    put32(c + p0 + 4 * 255, 0x80000000u);
    EXPECT_SEALED(c, len, rans_bad_state, "state 2^31");
    /* checksum: the field, then every payload word bit of tile 0 in turn (some flips only the checksum sees) */
    FRESH();
    put32(c + 576 + 16, get32(c + 576 + 16) ^ 1);
    EXPECT_SEALED(c, len, rans_checksum, "checksum field");
    {
        const uint32_t nw = get32(base + p0 + 1024 + 28);
        int all_caught = 1;
        for (uint32_t k = 0; k < nw && k < 64; k++) {
            FRESH();
            c[p0 + 1056 + 2 * k] ^= (uint8_t)(1u << (k % 8));
            seal(c, len); /* past the container checksum: the tile's Adler-32 alone */
            all_caught &= decode_all(c, len) != QG_ERR_ok;
        }
        QG_CHECK(nw > 0 && all_caught, "with checksums every flipped word bit is an error");
    }
    free(c);
    free(base);
    free(w);

    /* Decode-time errors on containers assembled here. */
    uint16_t freq[256];
    uint8_t *p = malloc(QG_RANS_PAYLOAD_MAX + 64);
    size_t plen;
    /* a two-level table (uniform 16 would give exactly 8 bits a symbol and never any padding); random
     * tiles until the payload has padding bytes */
    for (int s = 0; s < 256; s++) freq[s] = s < 128 ? 24 : 8;
    do {
        fill_random(g_tile, TB);
        QG_CHECK(qg_rans_encode_tile(g_tile, freq, p, &plen) == QG_ERR_ok, "encode_tile");
    } while ((1056 + 2 * (size_t)get32(p + 1024 + 28)) % 16 == 0);
    const uint32_t a = qg_rans_adler32(g_tile, TB);
    c = assemble(p, plen, freq, 256, 256, 0, 1, a, &len);
    EXPECT(c, len, ok, "assembled");
    c[len - 1] = 1;
    EXPECT_SEALED(c, len, rans_corrupt, "nonzero payload padding");
    free(c);
    /* truncated: drop warp 0's last word */
    {
        uint8_t *q = malloc(QG_RANS_PAYLOAD_MAX + 64);
        const uint32_t e0 = get32(p + 1024), e7 = get32(p + 1024 + 28);
        memcpy(q, p, 1056 + 2 * (size_t)(e0 - 1));
        memcpy(q + 1056 + 2 * (size_t)(e0 - 1), p + 1056 + 2 * (size_t)e0, 2 * (size_t)(e7 - e0));
        for (int w8 = 0; w8 < 8; w8++) put32(q + 1024 + 4 * w8, get32(p + 1024 + 4 * w8) - 1);
        size_t ql = (size_t)up16(1056 + 2 * (uint64_t)(e7 - 1));
        memset(q + 1056 + 2 * (size_t)(e7 - 1), 0, ql - (1056 + 2 * (size_t)(e7 - 1)));
        c = assemble(q, ql, freq, 256, 256, 0, 1, a, &len);
        EXPECT(c, len, rans_truncated, "warp 0 short by a word");
        free(c);
        /* trailing: one extra word at the end of warp 3 */
        const uint32_t e3 = get32(p + 1024 + 12);
        memcpy(q, p, 1056 + 2 * (size_t)e3);
        put16(q + 1056 + 2 * (size_t)e3, 0xBEEF);
        memcpy(q + 1056 + 2 * (size_t)(e3 + 1), p + 1056 + 2 * (size_t)e3, 2 * (size_t)(e7 - e3));
        for (int w8 = 3; w8 < 8; w8++) put32(q + 1024 + 4 * w8, get32(p + 1024 + 4 * w8) + 1);
        ql = (size_t)up16(1056 + 2 * (uint64_t)(e7 + 1));
        memset(q + 1056 + 2 * (size_t)(e7 + 1), 0, ql - (1056 + 2 * (size_t)(e7 + 1)));
        c = assemble(q, ql, freq, 256, 256, 0, 1, a, &len);
        EXPECT(c, len, rans_trailing_data, "warp 3 with an extra word");
        free(c);
        free(q);
    }
    /* final state: a one-symbol table makes decoding the identity, so a start state L + 1 ends at L + 1 */
    memset(freq, 0, sizeof freq);
    freq[0] = 4096;
    memset(g_tile, 0, TB);
    QG_CHECK(qg_rans_encode_tile(g_tile, freq, p, &plen) == QG_ERR_ok && plen == 1056, "zero tile");
    put32(p + 4 * 200, 32769);
    c = assemble(p, plen, freq, 256, 256, 0, 0, 0, &len);
    EXPECT(c, len, rans_corrupt, "final state L + 1");
    free(c);
    /* nonzero bytes outside the matrix: a full tile stored as a 1 x 1 matrix */
    for (int s = 0; s < 256; s++) freq[s] = 16;
    fill_random(g_tile, TB);
    QG_CHECK(qg_rans_encode_tile(g_tile, freq, p, &plen) == QG_ERR_ok, "encode_tile");
    c = assemble(p, plen, freq, 1, 1, 0, 1, qg_rans_adler32(g_tile, TB), &len);
    EXPECT(c, len, rans_corrupt, "bytes outside a 1 x 1 matrix");
    free(c);
    free(p);
}

/* ---- API errors ---------------------------------------------------------------------------------- */

static void test_api(void)
{
    uint8_t w[4] = {1, 2, 3, 4}, *c = NULL, modes[1] = {4};
    float s[2] = {1, 1};
    size_t len = 0;
    QG_CHECK(qg_rans_encode(w, s, 2, 2, modes, 0, &c, &len) == QG_ERR_rans_predictor_invalid && c == NULL, "mode 4");
    modes[0] = 254;
    QG_CHECK(qg_rans_encode(w, s, 2, 2, modes, 0, &c, &len) == QG_ERR_rans_predictor_invalid, "mode 254");
    QG_CHECK(qg_rans_encode(w, s, 2, 2, NULL, 2, &c, &len) == QG_ERR_argument_invalid, "checksums 2");
    QG_CHECK(qg_rans_encode(w, s, 2, 2, NULL, 0, &c, &len) == QG_ERR_ok, "encode");
    uint8_t back[5];
    QG_CHECK(qg_rans_decode_ref(c, len, back, 3) == QG_ERR_rans_size_mismatch, "w_len 3");
    QG_CHECK(qg_rans_decode_ref(c, len, back, 5) == QG_ERR_rans_size_mismatch, "w_len 5");
    float sc[3];
    QG_CHECK(qg_rans_scales(c, len, sc, 3) == QG_ERR_rans_size_mismatch, "scales n 3");
    uint16_t x[2 * 17] = {0};
    float y[2 * 17];
    QG_CHECK(qg_rans_gemv_ref(c, len, x, 0, y, NULL) == QG_ERR_rans_batch_out_of_range, "batch 0");
    QG_CHECK(qg_rans_gemv_ref(c, len, x, 17, y, NULL) == QG_ERR_rans_batch_out_of_range, "batch 17");
    QG_CHECK(qg_int8_gemv_ref(w, s, 2, 2, x, 17, y, NULL) == QG_ERR_rans_batch_out_of_range, "int8 batch 17");
    QG_CHECK(qg_rans_gemv_ref(c, len, x, 1, NULL, NULL) == QG_ERR_argument_invalid, "no outputs");
    QG_CHECK(qg_rans_gemv_ref(c, len, x, 16, y, NULL) == QG_ERR_ok, "batch 16");
    free(c);
    /* Adler-32 check values (zlib): "a" -> 0x00620062, "Wikipedia" -> 0x11E60398. */
    QG_CHECK(qg_rans_adler32((const uint8_t *)"a", 1) == 0x00620062u, "adler a");
    QG_CHECK(qg_rans_adler32((const uint8_t *)"Wikipedia", 9) == 0x11E60398u, "adler Wikipedia");
    QG_CHECK(qg_rans_adler32(NULL, 0) == 1u, "adler empty");
    static uint8_t ff[TB];
    memset(ff, 0xFF, TB);
    uint32_t aa = 1, bb = 0;
    for (int i = 0; i < TB; i++) {
        aa = (aa + 255) % 65521;
        bb = (bb + aa) % 65521;
    }
    QG_CHECK(qg_rans_adler32(ff, TB) == ((bb << 16) | aa), "adler of 65536 x 0xFF");
    /* CRC-32 check value (zlib, IEEE): "123456789" -> 0xCBF43926; the bitwise definition agrees; the
     * running form continues a CRC over a split buffer. */
    const uint8_t *nine = (const uint8_t *)"123456789";
    QG_CHECK(crc_bits(nine, 9, 0) == 0xCBF43926u, "bitwise crc check value");
    QG_CHECK(qg_rans_crc32(0, nine, 9) == 0xCBF43926u, "crc32 check value: 0x%08x", qg_rans_crc32(0, nine, 9));
    QG_CHECK(qg_rans_crc32(qg_rans_crc32(0, nine, 4), nine + 4, 5) == 0xCBF43926u, "crc32 continued");
    QG_CHECK(qg_rans_crc32(0, NULL, 0) == 0u, "crc32 of nothing");
    fill_random(ff, 4099);
    QG_CHECK(qg_rans_crc32(0, ff, 4099) == crc_bits(ff, 4099, 0), "crc32 of random bytes");
    /* seal: the spec's field from a bitwise CRC, zeros without flag bit 0, and no header no seal */
    uint8_t *sc2 = NULL;
    size_t sl = 0;
    QG_CHECK(qg_rans_encode(w, s, 2, 2, NULL, 1, &sc2, &sl) == QG_ERR_ok, "encode");
    if (sc2 != NULL) {
        put64(sc2 + 56, 0x0123456789ABCDEFull);
        QG_CHECK(qg_rans_seal(sc2, sl) == QG_ERR_ok && get32(sc2 + 56) == crc_bits(sc2, sl, 1) &&
                     get32(sc2 + 60) == ~crc_bits(sc2, sl, 1) && qg_rans_check(sc2, sl, NULL) == QG_ERR_ok,
                 "seal with flag bit 0");
        sc2[9] = 0;
        QG_CHECK(qg_rans_seal(sc2, sl) == QG_ERR_ok && get64(sc2 + 56) == 0, "seal without flag bit 0");
        QG_CHECK(qg_rans_seal(sc2, 63) == QG_ERR_argument_invalid && qg_rans_seal(NULL, 64) == QG_ERR_argument_invalid,
                 "seal needs a header");
    }
    free(sc2);
}

/* ---- every bit of a checksummed container, and every cut ------------------------------------------ */

/* The error the spec's order predicts for flipping bit b of byte i of a valid checksummed container. */
static int flip_error(const uint8_t *valid, size_t i, int b)
{
    if (i < 4) return QG_ERR_rans_bad_magic;
    if (i == 4 || i == 5) return QG_ERR_rans_bad_header;                    /* the version */
    if (i == 9 && b == 0) return QG_ERR_rans_bad_header;                    /* bytes 56-63 must then be 0 */
    if (i >= 48 && i < 56 && !(valid[i] & (1u << b))) return QG_ERR_rans_container_truncated; /* file_size grew */
    return QG_ERR_rans_container_checksum;
}

static void test_every_bit(void)
{
    /* 2 x 260: two tiles (the second 4 columns wide), 8 bytes of scales, an 8-byte gap before the payloads,
     * small enough to flip every bit under sanitizers and emulation. */
    const uint32_t M = 2, K = 260;
    uint8_t w[2 * 260];
    fill_smooth(w, M, K);
    size_t len;
    int same;
    uint8_t *base = roundtrip("every-bit base", w, M, K, NULL, 1, &len, &same);
    if (base == NULL) return;
    /* every region kind is present: header, table, metadata, scales, a zero gap, payloads with padding */
    const uint64_t so = get64(base + 32), p0 = get64(base + 576), p1 = get64(base + 576 + 32);
    const uint64_t e0 = p0 + 1056 + 2 * (uint64_t)get32(base + p0 + 1024 + 28);
    const uint64_t e1 = p1 + 1056 + 2 * (uint64_t)get32(base + p1 + 1024 + 28);
    QG_CHECK(so + 4 * M < p0 && (e0 < p1 || e1 < len), "the container has a gap and payload padding");

    uint8_t *c = malloc(len), *out = malloc((size_t)M * K);
    uint16_t x[512] = {0}; /* room for any K of two tiles, should a flip get past validation */
    float y[256];
    size_t flips = 0, wrong = 0, passed = 0, decoded = 0;
    memcpy(c, base, len);
    for (size_t i = 0; i < len; i++)
        for (int b = 0; b < 8; b++) {
            c[i] ^= (uint8_t)(1u << b);
            const int want = flip_error(base, i, b);
            const int rc = qg_rans_check(c, len, NULL), rd = qg_rans_decode_ref(c, len, out, (size_t)M * K),
                      rg = qg_rans_gemv_ref(c, len, x, 1, y, NULL);
            passed += rc == QG_ERR_ok;
            decoded += rd == QG_ERR_ok || rg == QG_ERR_ok;
            if (rc != want || rd != want || rg != want) {
                if (wrong < 8)
                    QG_CHECK(0, "byte %zu bit %d: check %s, decode %s, gemv %s; want %s", i, b, qg_error_name(rc),
                             qg_error_name(rd), qg_error_name(rg), qg_error_name(want));
                wrong++;
            }
            flips++;
            c[i] ^= (uint8_t)(1u << b);
        }
    QG_CHECK(passed == 0 && decoded == 0, "of %zu single-bit flips, %zu pass qg_rans_check and %zu decode (or multiply) without error",
             flips, passed, decoded);
    QG_CHECK(wrong == 0 && flips == 8 * len, "%zu of %zu single-bit flips not rejected as the spec orders", wrong, flips);
    /* every proper prefix is a cut file, whatever it ends in */
    size_t cuts_wrong = 0;
    for (size_t n = 0; n < len; n++) {
        const int rc = qg_rans_check(base, n, NULL), rd = qg_rans_decode_ref(base, n, out, (size_t)M * K),
                  rg = qg_rans_gemv_ref(base, n, x, 1, y, NULL);
        if (rc != QG_ERR_rans_container_truncated || rd != rc || rg != rc) {
            if (cuts_wrong < 8)
                QG_CHECK(0, "cut to %zu of %zu bytes: check %s, decode %s, gemv %s", n, len, qg_error_name(rc), qg_error_name(rd),
                         qg_error_name(rg));
            cuts_wrong++;
        }
    }
    QG_CHECK(cuts_wrong == 0, "%zu of %zu cuts not reported as rans_container_truncated", cuts_wrong, len);
    free(c);
    free(out);
    free(base);
}

/* ---- the fused product --------------------------------------------------------------------------- */

static uint16_t rand_x(void)
{
    static const uint16_t special[] = {0x0000, 0x8000, 0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00};
    uint32_t k = qg_rng_int_range(&g_rng, 16);
    if (k < 2) return special[qg_rng_int_range(&g_rng, sizeof special / sizeof special[0])];
    return qg_f32_to_f16(qg_rng_uniform(&g_rng, -2.0f, 2.0f));
}

static void naive(const uint8_t *w, const float *sc, size_t M, size_t K, const uint16_t *x, size_t B, float *y)
{
    for (size_t b = 0; b < B; b++)
        for (size_t r = 0; r < M; r++) {
            float t = 0.0f;
            for (size_t j0 = 0; j0 < K; j0 += 256) {
                float p = 0.0f;
                for (size_t cc = j0; cc < K && cc < j0 + 256; cc++) {
                    int8_t q;
                    memcpy(&q, &w[r * K + cc], 1);
                    p += (float)q * qg_f16_to_f32(x[b * K + cc]);
                }
                t += p;
            }
            y[b * M + r] = t * sc[r];
        }
}

static void test_gemv(void)
{
    static const uint32_t shapes[][2] = {{1, 1}, {3, 257}, {257, 513}, {256, 256}, {5, 0}, {0, 7}, {40, 1000}};
    static const size_t batches[] = {1, 3, 16};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const uint32_t M = shapes[si][0], K = shapes[si][1];
        uint8_t *w = malloc((size_t)M * K + 1);
        float *sc = malloc(sizeof(float) * (M + 1));
        fill_random(w, (size_t)M * K);
        for (uint32_t r = 0; r < M; r++) sc[r] = r == 1 ? 65504.0f : qg_rng_uniform(&g_rng, 0.001f, 0.1f);
        if (M > 2) sc[2] = 1e30f; /* overflow to inf in float32 and fp16 */
        uint8_t *c = NULL;
        size_t len = 0;
        QG_CHECK(qg_rans_encode(w, sc, M, K, NULL, 1, &c, &len) == QG_ERR_ok, "encode %ux%u", M, K);
        for (size_t bi = 0; bi < 3; bi++) {
            const size_t B = batches[bi];
            uint16_t *x = malloc(2 * (B * K + 1));
            for (size_t i = 0; i < B * K; i++) x[i] = rand_x();
            if (B * K > 3) x[3] = 0x7C00; /* inf x 0 somewhere may make NaN: compared as bits all the same */
            float *yn = malloc(sizeof(float) * (B * M + 1)), *yr = malloc(sizeof(float) * (B * M + 1)),
                  *yi = malloc(sizeof(float) * (B * M + 1)), *y1 = malloc(sizeof(float) * (M + 1));
            uint16_t *hr = malloc(2 * (B * M + 1)), *hi = malloc(2 * (B * M + 1));
            naive(w, sc, M, K, x, B, yn);
            QG_CHECK(qg_rans_gemv_ref(c, len, x, B, yr, hr) == QG_ERR_ok, "rans gemv");
            QG_CHECK(qg_int8_gemv_ref(w, sc, M, K, x, B, yi, hi) == QG_ERR_ok, "int8 gemv");
            int eq = 1, eqh = 1;
            for (size_t i = 0; i < B * M; i++) {
                eq &= qg_f32_bits(yr[i]) == qg_f32_bits(yn[i]) && qg_f32_bits(yi[i]) == qg_f32_bits(yn[i]);
                eqh &= hr[i] == qg_f32_to_f16(yn[i]) && hi[i] == hr[i];
            }
            QG_CHECK(eq, "%ux%u batch %zu: fused / int8 / naive float32 bits", M, K, B);
            QG_CHECK(eqh, "%ux%u batch %zu: fp16 outputs", M, K, B);
            /* Batch invariance: each column alone gives the same bits. */
            int inv = 1;
            for (size_t b = 0; b < B; b++) {
                QG_CHECK(qg_rans_gemv_ref(c, len, x + b * K, 1, y1, NULL) == QG_ERR_ok, "gemv column");
                for (size_t r = 0; r < M; r++) inv &= qg_f32_bits(y1[r]) == qg_f32_bits(yr[b * M + r]);
            }
            QG_CHECK(inv, "%ux%u batch %zu: batch invariance", M, K, B);
            free(x);
            free(yn);
            free(yr);
            free(yi);
            free(y1);
            free(hr);
            free(hi);
        }
        free(c);
        free(w);
        free(sc);
    }
    /* The pinned order is observable: large and small terms across a tile boundary. Row [a, b] with
     * x = 1: ((0 + 2^24) + 1) in one tile vs per-tile partials. */
    {
        const uint32_t M = 1, K = 257;
        uint8_t w[257];
        uint16_t x[257];
        float sc = 1.0f, y;
        memset(w, 0, sizeof w);
        for (int i = 0; i < 257; i++) x[i] = 0x3C00; /* 1.0 */
        w[0] = 127;
        x[0] = 0x7BFF; /* 65504 */
        w[1] = 1;
        w[256] = 1;
        QG_CHECK(qg_int8_gemv_ref(w, &sc, M, K, x, 1, &y, NULL) == QG_ERR_ok, "int8 gemv");
        const float p0 = 127.0f * 65504.0f + 1.0f, want = p0 + 1.0f; /* two roundings, in order */
        QG_CHECK(qg_f32_bits(y) == qg_f32_bits(want), "tile partial order: %.9g vs %.9g", y, want);
    }
}

int main(void)
{
    qg_rng_init(&g_rng, 0x7241u);
    test_normalize();
    test_auto_policy();
    test_word_order();
    test_edge_tiles();
    test_shapes();
    test_corrupt();
    test_every_bit();
    test_api();
    test_gemv();
    return qg_test_end("unit.rans.ref");
}
