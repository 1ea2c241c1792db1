/* unit.kquants.ref: the K-quant reference checked from first principles.
 *
 * Blocks are built here byte by byte from the layout tables of reference/spec/kquants.md (the setters
 * below are written from the spec, not from kquants.c), and every expectation is derived: the value of
 * a dequantized element from the formula evaluated exactly in double, the dot integers from dequantized
 * integer codes, the quantizer's accuracy from its stored step size, GEMV from a naive loop. Random data
 * comes from the pinned stream. */
#include "qg_test.h"
#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/kquants.h"
#include "qgold/rng.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

enum { QK = 256, MAXB = 292 };

static qg_rng g_rng;

static const qg_ktype k_types[4] = {QG_Q4_K, QG_Q5_K, QG_Q6_K, QG_Q8_K};

/* ---- spec-side field setters and getters --------------------------------------------------------- */

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xFF);
    p[1] = (uint8_t)(v >> 8);
}

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static void put_f32(uint8_t *p, float f)
{
    uint32_t b = qg_f32_bits(f);
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)((b >> (8 * i)) & 0xFF);
}

static float get_f32(const uint8_t *p)
{
    uint32_t b = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
    return qg_f32_from_bits(b);
}

static int i8(uint8_t b) { return b < 128 ? b : b - 256; }
static int i16(uint16_t h) { return h < 32768 ? h : h - 65536; }

/* Q4_K/Q5_K: d at 0, dmin at 2 (fp16), scales[12] at 4. Q6_K: d at 208. Q8_K: d float32 at 0. */
static void set_d(qg_ktype t, uint8_t *blk, float d)
{
    if (t == QG_Q8_K)
        put_f32(blk, d);
    else
        put16(blk + (t == QG_Q6_K ? 208 : 0), qg_f32_to_f16(d));
}

static float get_d(qg_ktype t, const uint8_t *blk)
{
    if (t == QG_Q8_K) return get_f32(blk);
    return qg_f16_to_f32(get16(blk + (t == QG_Q6_K ? 208 : 0)));
}

/* The packing as the spec's byte table states it: bytes 0-3 hold sc[0..3] in bits 0-5 and bits 4-5 of
 * sc[4..7] in bits 6-7; bytes 4-7 the same for the mins; bytes 8-11 hold the low 4 bits of sc[4+i]
 * (low nibble) and m[4+i] (high nibble). */
static void pack_scales(uint8_t *q, const int sc[8], const int m[8])
{
    for (int i = 0; i < 4; i++) {
        q[i] = (uint8_t)((sc[i] & 63) | ((sc[i + 4] >> 4) << 6));
        q[i + 4] = (uint8_t)((m[i] & 63) | ((m[i + 4] >> 4) << 6));
        q[i + 8] = (uint8_t)((sc[i + 4] & 15) | ((m[i + 4] & 15) << 4));
    }
}

/* The unpacking formula of the spec, j < 4 and j >= 4. */
static void unpack_formula(const uint8_t *q, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q4_K codes at 16: chunk c = e/64, element 64c+l low nibble of qs[32c+l], 64c+32+l its high nibble. */
static uint8_t *nibble_byte(uint8_t *qs, int e, int *high)
{
    *high = (e % 64) >= 32;
    return &qs[32 * (e / 64) + e % 32];
}

static void set_q4(uint8_t *qs, int e, int code)
{
    int high;
    uint8_t *b = nibble_byte(qs, e, &high);
    *b = high ? (uint8_t)((*b & 0x0F) | (code << 4)) : (uint8_t)((*b & 0xF0) | code);
}

static int get_q4(const uint8_t *qs, int e)
{
    int high;
    const uint8_t *b = nibble_byte((uint8_t *)qs, e, &high);
    return high ? *b >> 4 : *b & 15;
}

/* Q5_K: low 4 bits as Q4_K over qs at 48; bit 4 of element e is bit e/32 of qh[e%32] (qh at 16). */
static void set_q5(uint8_t *blk, int e, int code)
{
    set_q4(blk + 48, e, code & 15);
    uint8_t bit = (uint8_t)(1u << (e / 32));
    if (code & 16)
        blk[16 + e % 32] |= bit;
    else
        blk[16 + e % 32] &= (uint8_t)~bit;
}

static int get_q5(const uint8_t *blk, int e) { return get_q4(blk + 48, e) | (((blk[16 + e % 32] >> (e / 32)) & 1) << 4); }

/* Q6_K (ql at 0, qh at 128, scales at 192): half h, row r = (e%128)/32 of the spec's table, l = e%32. */
static void q6_loc(int e, int *qlo, int *high_nibble, int *qho, int *shift)
{
    int h = e / 128, r = (e % 128) / 32, l = e % 32;
    static const int ql_off[4] = {0, 32, 0, 32};
    *qlo = 64 * h + ql_off[r] + l;
    *high_nibble = r >= 2;
    *qho = 128 + 32 * h + l;
    *shift = 2 * r;
}

static void set_q6(uint8_t *blk, int e, int code)
{
    int qlo, hn, qho, sh;
    q6_loc(e, &qlo, &hn, &qho, &sh);
    blk[qlo] = hn ? (uint8_t)((blk[qlo] & 0x0F) | ((code & 15) << 4)) : (uint8_t)((blk[qlo] & 0xF0) | (code & 15));
    blk[qho] = (uint8_t)((blk[qho] & ~(3 << sh)) | ((code >> 4) << sh));
}

static int get_q6(const uint8_t *blk, int e)
{
    int qlo, hn, qho, sh;
    q6_loc(e, &qlo, &hn, &qho, &sh);
    int low = hn ? blk[qlo] >> 4 : blk[qlo] & 15;
    return low | (((blk[qho] >> sh) & 3) << 4);
}

/* ---- helpers --------------------------------------------------------------------------------------- */

static int same_float(float a, float b)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return qg_f32_bits(a) == qg_f32_bits(b);
}

static void random_bytes(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(qg_rng_bits32(&g_rng) >> 24);
}

/* A finite, moderate fp16 value for d/dmin in random blocks. */
static float rand_half(float lo, float hi) { return qg_f16_to_f32(qg_f32_to_f16(qg_rng_uniform(&g_rng, lo, hi))); }

/* Random block bytes with finite d (and dmin). */
static void random_block(qg_ktype t, uint8_t *blk)
{
    random_bytes(blk, qg_kq_block_bytes(t));
    if (t == QG_Q8_K) {
        put_f32(blk, qg_rng_uniform(&g_rng, -0.1f, 0.1f));
    } else {
        set_d(t, blk, rand_half(-2.0f, 2.0f));
        if (t != QG_Q6_K) put16(blk + 2, qg_f32_to_f16(rand_half(0.0f, 1.0f)));
    }
}

static float dq1(qg_ktype t, const uint8_t *blk, int e)
{
    float y[QK];
    int rc = qg_kq_dequant_f32_ref(t, blk, qg_kq_block_bytes(t), 1, QK, y);
    QG_CHECK(rc == 0, "dequant rc %d", rc);
    return y[e];
}

/* ---- names, sizes ---------------------------------------------------------------------------------- */

static void test_names(void)
{
    static const size_t bytes[4] = {144, 176, 210, 292};
    static const char *names[4] = {"q4_k", "q5_k", "q6_k", "q8_k"};
    for (int i = 0; i < 4; i++) {
        QG_CHECK(qg_kq_block_bytes(k_types[i]) == bytes[i], "block bytes of %d", i);
        QG_CHECK(strcmp(qg_kq_name(k_types[i]), names[i]) == 0, "name of %d", i);
        QG_CHECK(qg_kq_from_name(names[i]) == (int)k_types[i], "from name %s", names[i]);
    }
    QG_CHECK(qg_kq_from_name("Q6_K") == QG_Q6_K && qg_kq_from_name("q4_K") == QG_Q4_K, "case-insensitive names");
    QG_CHECK(qg_kq_from_name("q4_0") == -1 && qg_kq_from_name("q4_k ") == -1 && qg_kq_from_name("") == -1 &&
                 qg_kq_from_name(NULL) == -1,
             "non-names");
    QG_CHECK(qg_kq_block_bytes((qg_ktype)4) == 0 && qg_kq_block_bytes((qg_ktype)-1) == 0, "unknown type size");
    QG_CHECK(strcmp(qg_kq_name((qg_ktype)9), "unknown") == 0, "unknown type name");
    QG_CHECK(strcmp(qg_error_name(QG_ERR_kq_cols_not_multiple), "kq_cols_not_multiple") == 0 &&
                 QG_ERR_kq_type_unknown == 200 && QG_ERR_kq_batch_out_of_range == 203,
             "error codes");
    QG_CHECK(strstr(qg_error_message(QG_ERR_kq_cols_not_multiple), "256") != NULL &&
                 strstr(qg_error_message(QG_ERR_kq_cols_not_multiple), "4544") != NULL &&
                 strstr(qg_error_message(QG_ERR_kq_cols_not_multiple), "896") != NULL,
             "cols message names 256, 4544 and 896");
}

/* ---- scale/min unpacking ------------------------------------------------------------------------------ */

/* Recover sc[j], m[j] of a Q4_K block through dequantization: with d = 1, dmin = 1 every code 0 gives
 * y = -m and every code 1 gives y = sc - m, both exact small integers. */
static void recover_scales(const uint8_t *scales12, int sc[8], int m[8])
{
    uint8_t blk[144];
    memset(blk, 0, sizeof blk);
    set_d(QG_Q4_K, blk, 1.0f);
    put16(blk + 2, qg_f32_to_f16(1.0f));
    memcpy(blk + 4, scales12, 12);
    float y0[QK], y1[QK];
    qg_kq_dequant_f32_ref(QG_Q4_K, blk, 144, 1, QK, y0);
    memset(blk + 16, 0x11, 128);
    qg_kq_dequant_f32_ref(QG_Q4_K, blk, 144, 1, QK, y1);
    for (int j = 0; j < 8; j++) {
        m[j] = (int)-y0[32 * j];
        sc[j] = (int)(y1[32 * j] - y0[32 * j]);
        for (int l = 1; l < 32; l++)
            QG_CHECK(y0[32 * j + l] == y0[32 * j] && y1[32 * j + l] == y1[32 * j], "sub-block %d is uniform", j);
    }
}

static void test_scale_unpack(void)
{
    /* Every single bit of the 12 bytes, for every j: exactly the fields the formula names change. */
    for (int bit = 0; bit < 96; bit++) {
        uint8_t q[12] = {0};
        q[bit / 8] = (uint8_t)(1u << (bit % 8));
        int sc[8], m[8];
        recover_scales(q, sc, m);
        for (int j = 0; j < 8; j++) {
            int fs, fm;
            unpack_formula(q, j, &fs, &fm);
            QG_CHECK(sc[j] == fs && m[j] == fm, "bit %d j %d: got sc %d m %d, formula %d %d", bit, j, sc[j], m[j], fs, fm);
        }
    }
    /* Random packings and random bytes: pack -> unpack is the identity on 6-bit values, and any 12 bytes
     * decode per the formula. */
    for (int it = 0; it < 300; it++) {
        int sc_in[8], m_in[8], sc[8], m[8];
        for (int j = 0; j < 8; j++) {
            sc_in[j] = (int)qg_rng_int_range(&g_rng, 64);
            m_in[j] = (int)qg_rng_int_range(&g_rng, 64);
        }
        uint8_t q[12];
        pack_scales(q, sc_in, m_in);
        recover_scales(q, sc, m);
        for (int j = 0; j < 8; j++) QG_CHECK(sc[j] == sc_in[j] && m[j] == m_in[j], "pack/unpack j %d", j);
        random_bytes(q, 12);
        recover_scales(q, sc, m);
        for (int j = 0; j < 8; j++) {
            int fs, fm;
            unpack_formula(q, j, &fs, &fm);
            QG_CHECK(sc[j] == fs && m[j] == fm, "random bytes j %d", j);
        }
    }
}

/* ---- element mapping and the dequant formula --------------------------------------------------------- */

/* The exact value of (D*sc)*q - Dm*m rounded once to float32 (chosen so that double holds it exactly). */
static float exact_q45(float D, int sc, int q, float Dm, int m) { return (float)((double)D * sc * q - (double)Dm * m); }

static void test_q45_elements(qg_ktype t)
{
    const int nmax = t == QG_Q4_K ? 15 : 31;
    const size_t bsz = qg_kq_block_bytes(t);
    const float D = 0.0302734375f, Dm = -1.5f; /* fp16-exact; a negative dmin is legal bytes */
    for (int e = 0; e < QK; e++) {
        const int s = e / 32;
        const int S = 1 + (e * 7) % 63, Mv = (e * 13) % 64;
        for (int code = 1; code <= nmax; code++) {
            uint8_t blk[MAXB];
            memset(blk, 0, sizeof blk);
            set_d(t, blk, D);
            put16(blk + 2, qg_f32_to_f16(Dm));
            int sc[8] = {0}, m[8] = {0};
            sc[s] = S;
            m[s] = Mv;
            pack_scales(blk + 4, sc, m);
            if (t == QG_Q4_K)
                set_q4(blk + 16, e, code);
            else
                set_q5(blk, e, code);
            float y[QK];
            int rc = qg_kq_dequant_f32_ref(t, blk, bsz, 1, QK, y);
            QG_CHECK(rc == 0, "rc");
            const float min_term = exact_q45(D, S, 0, Dm, Mv);
            for (int k = 0; k < QK; k++) {
                float want = k == e ? exact_q45(D, S, code, Dm, Mv) : (k / 32 == s ? min_term : 0.0f);
                QG_CHECK(qg_f32_bits(y[k]) == qg_f32_bits(want), "%s e %d code %d: y[%d] = %a, want %a", qg_kq_name(t), e,
                         code, k, y[k], want);
            }
        }
    }
    /* The subtraction is the one rounding, to nearest even. D = 1, sc = 32, q = 8 give 256; floats just
     * below 256 are 2^-16 apart. Dm = 2^-17 (an fp16 subnormal): m = 1 makes 256 - 2^-17 a tie between
     * 256 - 2^-16 (odd significand) and 256 (even): 256 wins; m = 3 makes 256 - 1.5 * 2^-16 a tie whose
     * even neighbour is 256 - 2^-15. */
    for (int m3 = 1; m3 <= 3; m3 += 2) {
        uint8_t blk[MAXB];
        memset(blk, 0, sizeof blk);
        set_d(t, blk, 1.0f);
        put16(blk + 2, qg_f32_to_f16(0x1p-17f));
        int sc[8] = {0}, m[8] = {0};
        sc[0] = 32;
        m[0] = m3;
        pack_scales(blk + 4, sc, m);
        if (t == QG_Q4_K)
            set_q4(blk + 16, 0, 8);
        else
            set_q5(blk, 0, 8);
        const float want = m3 == 1 ? 256.0f : 256.0f - 0x1p-15f;
        QG_CHECK(want == (float)(256.0 - m3 * 0x1p-17), "tie arithmetic");
        QG_CHECK(dq1(t, blk, 0) == want, "%s tie m = %d: %a", qg_kq_name(t), m3, dq1(t, blk, 0));
    }
    /* Extremes: d = 65504 (max finite fp16) and dmin = 2^-14 - 2^-24 (largest fp16 subnormal); the exact
     * value needs at most 51 bits, so double holds it and the cast rounds once. */
    uint8_t blk[MAXB];
    memset(blk, 0, sizeof blk);
    int sc[8] = {0}, m[8] = {0};
    sc[0] = 63;
    m[0] = 1;
    pack_scales(blk + 4, sc, m);
    put16(blk, 0x7BFF);
    put16(blk + 2, 0x03FF);
    for (int code = 0; code <= nmax; code++) {
        if (t == QG_Q4_K)
            set_q4(blk + 16, 0, code);
        else
            set_q5(blk, 0, code);
        float got = dq1(t, blk, 0);
        float want = (float)(65504.0 * 63 * code - (0x1p-14 - 0x1p-24));
        QG_CHECK(qg_f32_bits(got) == qg_f32_bits(want), "large d, subnormal dmin, code %d: %a vs %a", code, got, want);
    }
}

static void test_q6_elements(void)
{
    /* d = 0.5, scales g -> a distinct int8 per group including -128 and 127; background code 32 (q = 0). */
    int8_t scl[16];
    for (int g = 0; g < 16; g++) scl[g] = (int8_t)(g == 3 ? -128 : (g == 9 ? 127 : (g * 37) % 200 - 100));
    const float D = 0.5f;
    for (int e = 0; e < QK; e++) {
        for (int code = 0; code < 64; code++) {
            uint8_t blk[MAXB];
            memset(blk, 0, sizeof blk);
            set_d(QG_Q6_K, blk, D);
            for (int g = 0; g < 16; g++) blk[192 + g] = (uint8_t)scl[g];
            for (int k = 0; k < QK; k++) set_q6(blk, k, 32);
            set_q6(blk, e, code);
            float y[QK];
            qg_kq_dequant_f32_ref(QG_Q6_K, blk, 210, 1, QK, y);
            for (int k = 0; k < QK; k++) {
                float want = k == e ? (float)((double)D * scl[k / 16] * (code - 32)) : 0.0f;
                QG_CHECK(y[k] == want && (k != e || qg_f32_bits(y[k]) == qg_f32_bits(want)),
                         "q6_k e %d code %d: y[%d] = %a, want %a", e, code, k, y[k], want);
            }
        }
    }
    /* The mapping is a bijection between (element, bit) and (byte, bit): setting all codes to 63 sets every
     * ql/qh bit, and each element's bits land in distinct places (checked by single-element sweeps above). */
    uint8_t blk[MAXB];
    memset(blk, 0, sizeof blk);
    for (int k = 0; k < QK; k++) set_q6(blk, k, 63);
    int all = 1;
    for (int i = 0; i < 192; i++) all &= blk[i] == 0xFF;
    QG_CHECK(all, "all-63 codes fill ql and qh");
}

static void test_q8_elements(void)
{
    for (int it = 0; it < 20; it++) {
        uint8_t blk[MAXB];
        random_bytes(blk, sizeof blk);
        float d = it == 0 ? 1.0f : qg_rng_uniform(&g_rng, -3.0f, 3.0f);
        if (it == 1) d = 1e-40f; /* float32 subnormal d */
        put_f32(blk, d);
        for (int e = 0; e < QK; e++) blk[4 + e] = (uint8_t)(e ^ it); /* every code -128..127 */
        float y[QK];
        qg_kq_dequant_f32_ref(QG_Q8_K, blk, 292, 1, QK, y);
        for (int e = 0; e < QK; e++) {
            float want = (float)((double)d * i8(blk[4 + e])); /* exact in double, rounded once */
            QG_CHECK(qg_f32_bits(y[e]) == qg_f32_bits(want), "q8_k e %d: %a vs %a", e, y[e], want);
        }
    }
}

/* fp16 output is the float32 output rounded once; random bytes (any d, inf/NaN included) decode totally. */
static void test_f16_output_and_random_bytes(void)
{
    for (int ti = 0; ti < 4; ti++) {
        qg_ktype t = k_types[ti];
        const size_t bsz = qg_kq_block_bytes(t), rows = 3, cols = 768, n = rows * cols;
        static uint8_t w[3 * 3 * 292];
        static float y[3 * 768];
        static uint16_t h[3 * 768];
        random_bytes(w, rows * 3 * bsz);
        QG_CHECK(qg_kq_dequant_f32_ref(t, w, rows * 3 * bsz, rows, cols, y) == 0, "f32");
        QG_CHECK(qg_kq_dequant_f16_ref(t, w, rows * 3 * bsz, rows, cols, h) == 0, "f16");
        int bad = 0;
        for (size_t k = 0; k < n; k++) {
            uint16_t want = qg_f32_to_f16(y[k]);
            if (qg_f16_isnan(want) ? !qg_f16_isnan(h[k]) : h[k] != want) bad++;
        }
        QG_CHECK(bad == 0, "%s: %d fp16 outputs differ from rounding the float32 output", qg_kq_name(t), bad);
        /* Row r is blocks r*3 .. r*3+2: dequantizing one row alone gives the same values. */
        float yr[768];
        QG_CHECK(qg_kq_dequant_f32_ref(t, w + 2 * 3 * bsz, 3 * bsz, 1, cols, yr) == 0, "row");
        QG_CHECK(memcmp(yr, y + 2 * cols, sizeof yr) == 0, "%s: row 2 alone", qg_kq_name(t));
    }
}

/* Q6_K rows are 2-byte aligned in a file and Q8_K's float is at any offset: decode from odd addresses. */
static void test_unaligned(void)
{
    for (int ti = 0; ti < 4; ti++) {
        qg_ktype t = k_types[ti];
        const size_t bsz = qg_kq_block_bytes(t);
        static uint8_t buf[2 * 292 + 8];
        uint8_t aligned[2 * 292];
        random_block(t, aligned);
        random_block(t, aligned + bsz);
        float y0[512], y1[512];
        qg_kq_dequant_f32_ref(t, aligned, 2 * bsz, 1, 512, y0);
        for (int off = 1; off < 4; off++) {
            memcpy(buf + off, aligned, 2 * bsz);
            QG_CHECK(qg_kq_dequant_f32_ref(t, buf + off, 2 * bsz, 1, 512, y1) == 0, "rc");
            QG_CHECK(memcmp(y0, y1, sizeof y0) == 0, "%s at offset %d", qg_kq_name(t), off);
        }
    }
}

/* ---- special values ---------------------------------------------------------------------------------------- */

static void check_ieee(float got, double want, const char *what, int e)
{
    if (isnan(want))
        QG_CHECK(isnan(got), "%s e %d: want NaN, got %a", what, e, got);
    else
        QG_CHECK(got == (float)want && signbit(got) == signbit((float)want), "%s e %d: want %a, got %a", what, e, (float)want, got);
}

static void test_special_values(void)
{
    static const uint16_t specials[] = {0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7BFF, 0x0001, 0x0000, 0x8000};
    for (size_t si = 0; si < sizeof specials / sizeof specials[0]; si++) {
        for (int which = 0; which < 2; which++) { /* special in d, or in dmin */
            for (int ti = 0; ti < 3; ti++) {
                qg_ktype t = k_types[ti];
                if (t == QG_Q6_K && which == 1) continue;
                uint8_t blk[MAXB];
                random_block(t, blk);
                if (ti < 2) { /* include sc = 0 / m = 0 sub-blocks and code 0 */
                    blk[4] &= 0xC0;
                    blk[8] &= 0xC0;
                    blk[16] = 0;
                    blk[48] = 0;
                }
                if (t == QG_Q6_K) blk[192] = 0;
                put16(blk + (t == QG_Q6_K ? 208 : 2 * which), specials[si]);
                float y[QK];
                qg_kq_dequant_f32_ref(t, blk, qg_kq_block_bytes(t), 1, QK, y);
                for (int e = 0; e < QK; e++) {
                    double want;
                    if (t == QG_Q6_K) {
                        double ds = (double)get_d(t, blk) * i8(blk[192 + e / 16]);
                        want = ds * (get_q6(blk, e) - 32);
                    } else {
                        int sc, m;
                        unpack_formula(blk + 4, e / 32, &sc, &m);
                        int q = t == QG_Q4_K ? get_q4(blk + 16, e) : get_q5(blk, e);
                        double ds = (double)get_d(t, blk) * sc;
                        double dm = (double)qg_f16_to_f32(get16(blk + 2)) * m;
                        want = ds * q - dm;
                    }
                    check_ieee(y[e], want, qg_kq_name(t), e);
                }
            }
        }
    }
    /* Q8_K: d = +inf, -inf, NaN */
    static const float fspecial[] = {INFINITY, -INFINITY, NAN};
    for (int i = 0; i < 3; i++) {
        uint8_t blk[MAXB];
        random_bytes(blk, sizeof blk);
        blk[4] = 0;
        put_f32(blk, fspecial[i]);
        float y[QK];
        qg_kq_dequant_f32_ref(QG_Q8_K, blk, 292, 1, QK, y);
        for (int e = 0; e < QK; e++) check_ieee(y[e], (double)fspecial[i] * i8(blk[4 + e]), "q8_k", e);
    }
}

/* ---- dot with Q8_K -------------------------------------------------------------------------------------- */

/* Integer view of a weight block through the public dequant: with d = 1, dmin = 0 each element is
 * sc*q (Q6_K: sc*(q-32)) exactly; with d = 0, dmin = 1 it is -m. */
static void integer_view(qg_ktype t, const uint8_t *blk, int32_t sq[QK], int32_t mins[8])
{
    uint8_t b[MAXB];
    float y[QK];
    memcpy(b, blk, qg_kq_block_bytes(t));
    set_d(t, b, 1.0f);
    if (t != QG_Q6_K) put16(b + 2, 0);
    qg_kq_dequant_f32_ref(t, b, qg_kq_block_bytes(t), 1, QK, y);
    for (int e = 0; e < QK; e++) sq[e] = (int32_t)y[e];
    if (t == QG_Q6_K) return;
    set_d(t, b, 0.0f);
    put16(b + 2, qg_f32_to_f16(1.0f));
    qg_kq_dequant_f32_ref(t, b, qg_kq_block_bytes(t), 1, QK, y);
    for (int s = 0; s < 8; s++) mins[s] = (int32_t)-y[32 * s];
}

static double gamma_n(int n, double u) { return n * u / (1.0 - n * u); }

static void check_dot(qg_ktype t, const uint8_t *w, const uint8_t *q8, size_t cols, int want_exact)
{
    const size_t nb = cols / QK, bsz = qg_kq_block_bytes(t);
    int32_t S[64], M[64];
    float got;
    int rc = qg_kq_dot_q8k_ref(t, w, q8, cols, S, M, &got);
    QG_CHECK(rc == 0, "dot rc %d", rc);
    double ref = 0.0, abs_sum = 0.0;
    float sums[8] = {0};
    float sumf = 0.0f;
    for (size_t i = 0; i < nb; i++) {
        const uint8_t *wb = w + i * bsz, *yb = q8 + i * 292;
        int32_t sq[QK], mins[8] = {0};
        integer_view(t, wb, sq, mins);
        int64_t s64 = 0, m64 = 0, lanes[8] = {0};
        double abs_s = 0.0;
        for (int e = 0; e < QK; e++) {
            int64_t term = (int64_t)sq[e] * i8(yb[4 + e]);
            s64 += term;
            lanes[e % 8] += term;
            abs_s += fabs((double)term);
        }
        if (t != QG_Q6_K)
            for (int s = 0; s < 8; s++)
                m64 += (int64_t)mins[s] * (i16(get16(yb + 260 + 4 * s)) + i16(get16(yb + 262 + 4 * s)));
        QG_CHECK(S[i] == s64 && M[i] == m64, "%s block %zu: S %d vs %lld, M %d vs %lld", qg_kq_name(t), i, S[i],
                 (long long)s64, M[i], (long long)m64);
        const double Dx = get_d(t, wb), Dm = t == QG_Q6_K ? 0.0 : qg_f16_to_f32(get16(wb + 2)), dy = get_f32(yb);
        ref += Dx * dy * (double)s64 - Dm * dy * (double)m64;
        abs_sum += fabs(Dx * dy) * abs_s + fabs(Dm * dy * (double)m64);
        /* The order the header pins, evaluated from these integers. */
        const float d = (float)Dx * (float)dy;
        for (int l = 0; l < 8; l++) {
            const float p = d * (float)lanes[l];
            sums[l] = sums[l] + p;
        }
        if (t != QG_Q6_K) {
            const float dmin = (float)Dm * (float)dy;
            const float p = dmin * (float)m64;
            sumf = sumf - p;
        }
    }
    for (int l = 0; l < 8; l++) sumf = sumf + sums[l];
    QG_CHECK(same_float(got, sumf), "%s: dot %a, the pinned order gives %a", qg_kq_name(t), got, sumf);
    /* Each term passes through 2 products, nb accumulations and 8 final additions (float32); the double
     * reference rounds each term once and each of its 2*nb additions. */
    const int chain = (int)nb + 10;
    const double bound = gamma_n(chain, 0x1p-24) * abs_sum + gamma_n(2 * (int)nb + 2, 0x1p-53) * abs_sum;
    QG_CHECK(fabs((double)got - ref) <= bound, "%s: |%a - %a| > %g", qg_kq_name(t), got, ref, bound);
    if (want_exact) QG_CHECK((double)got == ref, "%s: exact case %a vs %a", qg_kq_name(t), got, ref);
    /* NULL S and M are allowed and give the same result. */
    float again;
    QG_CHECK(qg_kq_dot_q8k_ref(t, w, q8, cols, NULL, NULL, &again) == 0 && same_float(again, got), "NULL S/M");
}

static void test_dot(void)
{
    static uint8_t w[56 * 210], q8[56 * 292];
    static float xa[56 * 256];
    static const size_t colss[] = {256, 768, 14336};
    for (int ti = 0; ti < 3; ti++) {
        qg_ktype t = k_types[ti];
        const size_t bsz = qg_kq_block_bytes(t);
        for (size_t ci = 0; ci < 3; ci++) {
            const size_t cols = colss[ci], nb = cols / QK;
            for (int rep = 0; rep < 3; rep++) {
                for (size_t i = 0; i < nb; i++) random_block(t, w + i * bsz);
                for (size_t k = 0; k < cols; k++) xa[k] = qg_rng_uniform(&g_rng, -4.0f, 4.0f);
                if (rep == 1) /* quantized activations from smooth data */
                    for (size_t k = 0; k < cols; k++) xa[k] = 3.0f * sinf(0.01f * (float)k) + 0.1f;
                QG_CHECK(qg_kq_quantize_ref(QG_Q8_K, xa, 1, cols, q8, nb * 292) == 0, "q8 quantize");
                if (rep == 2) { /* raw Q8_K bytes, -128 codes included; bsums recomputed from the codes */
                    for (size_t i = 0; i < nb; i++) {
                        uint8_t *yb = q8 + i * 292;
                        random_bytes(yb + 4, 256);
                        for (int g = 0; g < 16; g++) {
                            int s = 0;
                            for (int l = 0; l < 16; l++) s += i8(yb[4 + 16 * g + l]);
                            put16(yb + 260 + 2 * g, (uint16_t)s);
                        }
                    }
                }
                check_dot(t, w, q8, cols, 0);
            }
        }
        /* An exact case: d = dmin = dy = 1 and small q8, so every partial is an integer below 2^24. */
        for (int i = 0; i < 2; i++) {
            random_block(t, w + i * bsz);
            set_d(t, w + i * bsz, 1.0f);
            if (t != QG_Q6_K) put16(w + i * bsz + 2, qg_f32_to_f16(1.0f));
            uint8_t *yb = q8 + i * 292;
            put_f32(yb, 1.0f);
            for (int e = 0; e < QK; e++) yb[4 + e] = (uint8_t)((int)qg_rng_int_range(&g_rng, 9) - 4);
            for (int g = 0; g < 16; g++) {
                int s = 0;
                for (int l = 0; l < 16; l++) s += i8(yb[4 + 16 * g + l]);
                put16(yb + 260 + 2 * g, (uint16_t)s);
            }
        }
        check_dot(t, w, q8, 512, 1);
        /* M follows the stored bsums (as ggml does): bump bsums[3] (sub-block 1) by 7. */
        if (t != QG_Q6_K) {
            int32_t S0[2], M0[2], S1[2], M1[2], mins[8], sq[QK];
            float r;
            qg_kq_dot_q8k_ref(t, w, q8, 512, S0, M0, &r);
            put16(q8 + 260 + 6, (uint16_t)(get16(q8 + 260 + 6) + 7));
            qg_kq_dot_q8k_ref(t, w, q8, 512, S1, M1, &r);
            integer_view(t, w, sq, mins);
            QG_CHECK(S1[0] == S0[0] && M1[0] == M0[0] + 7 * mins[1] && M1[1] == M0[1], "%s: M uses stored bsums", qg_kq_name(t));
        }
    }
}

/* ---- quantization ---------------------------------------------------------------------------------------- */

static void smooth_rows(float *x, size_t rows, size_t cols, int variant)
{
    for (size_t r = 0; r < rows; r++) {
        const float a1 = qg_rng_uniform(&g_rng, 0.5f, 2.0f), a2 = qg_rng_uniform(&g_rng, 0.0f, 0.5f);
        const float f1 = qg_rng_uniform(&g_rng, 0.002f, 0.02f), f2 = qg_rng_uniform(&g_rng, 0.05f, 0.2f);
        const float off = qg_rng_uniform(&g_rng, -0.5f, 0.5f), ph = qg_rng_uniform(&g_rng, 0.0f, 6.0f);
        for (size_t k = 0; k < cols; k++) {
            float v = a1 * sinf(f1 * (float)k + ph) + a2 * cosf(f2 * (float)k) + off;
            if (variant == 1) v = qg_rng_uniform(&g_rng, -1.0f, 1.0f);
            if (variant == 2) v = v * 1000.0f;
            x[r * cols + k] = v;
        }
    }
}

/* Requantization rounds each element to the nearest step of the *stored* scale: an element whose code is
 * not at an end of the range is within half a step, up to the float32 rounding of (x + dm)/dd and of the
 * dequantized value. */
static void test_roundtrip(qg_ktype t, int variant)
{
    enum { R = 3, C = 768 };
    static float x[R * C], y[R * C];
    static uint8_t blk[R * 3 * 292];
    const size_t bsz = qg_kq_block_bytes(t), nbytes = R * (C / QK) * bsz;
    smooth_rows(x, R, C, variant);
    memset(blk, 0xA5, sizeof blk);
    QG_CHECK(qg_kq_quantize_ref(t, x, R, C, blk, nbytes) == 0, "quantize");
    QG_CHECK(qg_kq_dequant_f32_ref(t, blk, nbytes, R, C, y) == 0, "dequant");
    const double u = 0x1p-24;
    double sum_rel2 = 0.0;
    int n_inner = 0, worst_e = -1;
    double worst = 0.0;
    for (size_t i = 0; i < (size_t)R * (C / QK); i++) {
        const uint8_t *b = blk + i * bsz;
        int has63 = 0, has63m = 0, has_m128 = 0, any_sc = 0, any_m = 0;
        for (int e = 0; e < QK; e++) {
            const size_t k = i * QK + (size_t)e;
            double step, dm = 0.0;
            int code, lo, hi;
            if (t == QG_Q8_K) {
                step = fabs(get_d(t, b));
                code = i8(b[4 + e]);
                lo = -128;
                hi = 127;
            } else if (t == QG_Q6_K) {
                step = fabs((double)get_d(t, b) * i8(b[192 + e / 16]));
                code = get_q6(b, e);
                lo = 0;
                hi = 63;
                has_m128 |= b[192 + e / 16] == 0x80;
            } else {
                int sc, m;
                unpack_formula(b + 4, e / 32, &sc, &m);
                step = (double)get_d(t, b) * sc;
                dm = (double)qg_f16_to_f32(get16(b + 2)) * m;
                code = t == QG_Q4_K ? get_q4(b + 16, e) : get_q5(b, e);
                lo = 0;
                hi = t == QG_Q4_K ? 15 : 31;
                has63 |= sc == 63;
                has63m |= m == 63;
                any_sc |= sc != 0;
                any_m |= m != 0;
            }
            const double err = fabs((double)y[k] - x[k]);
            if (step > 0 && code > lo && code < hi) {
                const double slop = 3 * u * (fabs(x[k]) + fabs(dm)) + u * fabs(y[k]) + 0x1p-149;
                n_inner++;
                sum_rel2 += (err / step) * (err / step);
                if (err > step / 2 + slop) {
                    if (err - step / 2 > worst) {
                        worst = err - step / 2;
                        worst_e = (int)k;
                    }
                }
            }
        }
        /* Derived invariants: the largest sub-block scale and the largest min map to 63 (63/max * max
         * rounds to 63), the dominant Q6_K group to -128. */
        if (t == QG_Q4_K || t == QG_Q5_K) {
            QG_CHECK(!any_sc || has63, "%s block %zu: no sc == 63", qg_kq_name(t), i);
            QG_CHECK(!any_m || has63m, "%s block %zu: no m == 63", qg_kq_name(t), i);
        }
        if (t == QG_Q6_K) QG_CHECK(has_m128, "%s block %zu: no scale -128", qg_kq_name(t), i);
        if (t == QG_Q8_K) { /* bsums are the group sums of the codes; some code is -127 */
            int has127 = 0;
            for (int g = 0; g < 16; g++) {
                int s = 0;
                for (int l = 0; l < 16; l++) s += i8(b[4 + 16 * g + l]);
                QG_CHECK(i16(get16(b + 260 + 2 * g)) == s, "q8_k bsums[%d]", g);
            }
            for (int e = 0; e < QK; e++) has127 |= i8(b[4 + e]) == -127;
            QG_CHECK(has127, "q8_k: the max-magnitude element maps to -127");
        }
    }
    QG_CHECK(worst_e < 0, "%s variant %d: element %d exceeds half a step by %g", qg_kq_name(t), variant, worst_e, worst);
    /* Rounding to nearest leaves at most half a step; on smooth or random data the position inside a step
     * is close to uniform, whose rms is 1/sqrt(12) of a step. With over a thousand samples the estimate
     * sits within a few percent of that; a 20% excess means a systematic bias (e.g. truncation, which
     * gives 1/sqrt(3), or a wrong stored scale). */
    QG_CHECK(n_inner > R * C / 2, "%s: most codes are interior (%d)", qg_kq_name(t), n_inner);
    QG_CHECK(sqrt(sum_rel2 / n_inner) < 1.2 / sqrt(12.0), "%s variant %d: rms error %.3f steps", qg_kq_name(t), variant,
             sqrt(sum_rel2 / n_inner));
    /* Deterministic: same input, same bytes. Rows are independent: row 1 alone gives the same bytes. */
    static uint8_t again[R * 3 * 292];
    qg_kq_quantize_ref(t, x, R, C, again, nbytes);
    QG_CHECK(memcmp(again, blk, nbytes) == 0, "%s: deterministic", qg_kq_name(t));
    qg_kq_quantize_ref(t, x + C, 1, C, again, nbytes / R);
    QG_CHECK(memcmp(again, blk + nbytes / R, nbytes / R) == 0, "%s: row independence", qg_kq_name(t));
}

static void test_q8_quantize_rules(void)
{
    float x[QK];
    uint8_t b[292], b2[292];
    /* All zeros (both signs): every byte zero, bsums included. */
    for (int e = 0; e < QK; e++) x[e] = (e & 1) ? -0.0f : 0.0f;
    memset(b, 0xEE, sizeof b);
    QG_CHECK(qg_kq_quantize_ref(QG_Q8_K, x, 1, QK, b, 292) == 0, "rc");
    int nz = 0;
    for (int i = 0; i < 292; i++) nz += b[i] != 0;
    QG_CHECK(nz == 0, "all-zero q8_k block has %d non-zero bytes", nz);
    /* +max then -max: the first wins, maps to -127, so d < 0; swapped, d > 0. */
    for (int order = 0; order < 2; order++) {
        for (int e = 0; e < QK; e++) x[e] = qg_rng_uniform(&g_rng, -1.0f, 1.0f);
        const int i1 = 17, i2 = 200;
        x[i1] = order == 0 ? 3.0f : -3.0f;
        x[i2] = -x[i1];
        qg_kq_quantize_ref(QG_Q8_K, x, 1, QK, b, 292);
        float d = get_f32(b);
        QG_CHECK(i8(b[4 + i1]) == -127 && i8(b[4 + i2]) == 127, "tie order %d: codes %d %d", order, i8(b[4 + i1]),
                 i8(b[4 + i2]));
        QG_CHECK(order == 0 ? d < 0 : d > 0, "tie order %d: d = %a", order, d);
        /* The dequantized tie values reproduce +-3 to within half a step. */
        QG_CHECK(fabs((double)d * -127 - x[i1]) <= fabs(d) / 2, "tie value");
    }
    /* nearest_int rounds half to even: with the first max-magnitude element -127, iscale = -127/-127 = 1
     * exactly, so each code is the RNE integer of x itself. */
    static const float halves[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.5f, 126.5f, -126.5f, 125.5f, 0.49999997f, 2.5000002f};
    for (int e = 0; e < QK; e++) x[e] = 0.0f;
    x[0] = -127.0f;
    for (size_t i = 0; i < sizeof halves / sizeof halves[0]; i++) x[1 + i] = halves[i];
    qg_kq_quantize_ref(QG_Q8_K, x, 1, QK, b, 292);
    QG_CHECK(get_f32(b) == 1.0f, "d = 1/iscale = 1, got %a", get_f32(b));
    for (size_t i = 0; i < sizeof halves / sizeof halves[0]; i++) {
        const double want = rint((double)halves[i]); /* default mode: ties to even */
        QG_CHECK(i8(b[5 + i]) == (int)want, "RNE(%a): got %d want %d", halves[i], i8(b[5 + i]), (int)want);
    }
    QG_CHECK(i8(b[4]) == -127, "max element");
    /* Requantizing Q8_K's own dequantization d*q: the first element of largest |d*q| is the first code of
     * magnitude 127, iscale' * d = +-1 to a few ulp, so the codes come back up to one global sign: kept when
     * that first code is -127 (as the quantizer's own max element), negated when it is +127. */
    for (int it = 0; it < 8; it++) {
        for (int e = 0; e < QK; e++) x[e] = qg_rng_uniform(&g_rng, -2.0f, 2.0f);
        qg_kq_quantize_ref(QG_Q8_K, x, 1, QK, b, 292);
        qg_kq_dequant_f32_ref(QG_Q8_K, b, 292, 1, QK, x);
        qg_kq_quantize_ref(QG_Q8_K, x, 1, QK, b2, 292);
        int first = 0;
        for (int e = 0; e < QK && first == 0; e++)
            if (i8(b[4 + e]) == 127 || i8(b[4 + e]) == -127) first = i8(b[4 + e]);
        const int sign = first == -127 ? 1 : -1;
        int bad = 0;
        for (int e = 0; e < QK; e++) bad += i8(b2[4 + e]) != sign * i8(b[4 + e]);
        QG_CHECK(bad == 0, "q8_k requantize(dequantize): %d codes differ (sign %d)", bad, sign);
    }
}

static void test_quantize_edges(void)
{
    float x[QK], y[QK];
    uint8_t b[292];
    /* Sub-block 0 tiny next to large ones: its 6-bit scale rounds to 0, so its codes are the fit's
     * (stale) and it dequantizes to -dmin*m for every element. */
    for (int ti = 0; ti < 2; ti++) {
        qg_ktype t = k_types[ti];
        for (int e = 0; e < QK; e++) x[e] = e < 32 ? 1e-4f * (float)(e % 7) - 2e-4f : 50.0f * sinf(0.3f * (float)e);
        QG_CHECK(qg_kq_quantize_ref(t, x, 1, QK, b, qg_kq_block_bytes(t)) == 0, "rc");
        int sc, m, stale = 0;
        unpack_formula(b + 4, 0, &sc, &m);
        QG_CHECK(sc == 0, "%s: sub-block 0 scale %d", qg_kq_name(t), sc);
        for (int e = 0; e < 32; e++) stale |= (t == QG_Q4_K ? get_q4(b + 16, e) : get_q5(b, e)) != 0;
        QG_CHECK(stale, "%s: sc = 0 sub-block keeps the fit's codes", qg_kq_name(t));
        qg_kq_dequant_f32_ref(t, b, qg_kq_block_bytes(t), 1, QK, y);
        const float want = (float)(0.0 - (double)qg_f16_to_f32(get16(b + 2)) * m);
        for (int e = 0; e < 32; e++) QG_CHECK(y[e] == want, "%s: stale element %d = %a, want %a", qg_kq_name(t), e, y[e], want);
    }
    /* d underflows fp16: everything dequantizes to zero. */
    for (int ti = 0; ti < 3; ti++) {
        qg_ktype t = k_types[ti];
        for (int e = 0; e < QK; e++) x[e] = 1e-9f * sinf((float)e);
        qg_kq_quantize_ref(t, x, 1, QK, b, qg_kq_block_bytes(t));
        qg_kq_dequant_f32_ref(t, b, qg_kq_block_bytes(t), 1, QK, y);
        int nz = 0;
        for (int e = 0; e < QK; e++) nz += y[e] != 0.0f;
        QG_CHECK(nz == 0 && get_d(t, b) == 0.0f, "%s: underflowed d, %d non-zero", qg_kq_name(t), nz);
    }
    /* All-zero and constant blocks. */
    for (int ti = 0; ti < 3; ti++) {
        qg_ktype t = k_types[ti];
        for (int e = 0; e < QK; e++) x[e] = 0.0f;
        memset(b, 0xEE, sizeof b);
        qg_kq_quantize_ref(t, x, 1, QK, b, qg_kq_block_bytes(t));
        int nz = 0;
        for (size_t i = 0; i < qg_kq_block_bytes(t); i++) nz += b[i] != 0;
        QG_CHECK(nz == 0, "%s: all-zero block has %d non-zero bytes", qg_kq_name(t), nz);
        for (int e = 0; e < QK; e++) x[e] = -0.75f;
        qg_kq_quantize_ref(t, x, 1, QK, b, qg_kq_block_bytes(t));
        qg_kq_dequant_f32_ref(t, b, qg_kq_block_bytes(t), 1, QK, y);
        for (int e = 0; e < QK; e++) {
            if (t == QG_Q6_K) { /* within half a step of the stored scale */
                const double step = fabs((double)get_d(t, b) * i8(b[192 + e / 16]));
                QG_CHECK(fabs((double)y[e] + 0.75) <= step / 2 + 1e-6, "%s: constant e %d: %a", qg_kq_name(t), e, y[e]);
            } else { /* max == min: scale 0, the min 0.75 stored as m = 63 of dmin = fp16(0.75/63) */
                int sc, m;
                unpack_formula(b + 4, e / 32, &sc, &m);
                QG_CHECK(sc == 0 && m == 63, "%s: constant block sc %d m %d", qg_kq_name(t), sc, m);
                QG_CHECK(fabs((double)y[e] + 0.75) <= 0.75 * 0x1p-11 + 0x1p-24, "%s: constant e %d: %a (fp16 rounding of dmin)",
                         qg_kq_name(t), e, y[e]);
            }
        }
    }
}

/* The domain report: ordinary data is inside; a non-finite input, values whose fitted scales or fp16 d
 * overflow, and ranges so small that an inverse scale overflows (the rounding then sees inf) are
 * outside, block by block; Q8_K's float32 d keeps every finite magnitude whose 127/max is finite. */
static void test_quantize_domain(void)
{
    enum { R = 2, C = 1024, NB = R * C / QK };
    static float x[R * C], y[R * C];
    static uint8_t blk[NB * 292], blk2[NB * 292];
    uint8_t in[NB];
    size_t outside = 99;
    for (int ti = 0; ti < 4; ti++) {
        const qg_ktype t = k_types[ti];
        const size_t bb = qg_kq_block_bytes(t);
        smooth_rows(x, R, C, 0);
        QG_CHECK(qg_kq_quantize_domain_ref(t, x, R, C, NULL, in, &outside) == 0 && outside == 0, "%s: smooth rows: %zu outside",
                 qg_kq_name(t), outside);
        /* block 1: one NaN; block 2: one +inf; block 6: one -inf; the others stay inside */
        x[1 * QK + 17] = NAN;
        x[2 * QK + 255] = INFINITY;
        x[6 * QK] = -INFINITY;
        QG_CHECK(qg_kq_quantize_ref(t, x, R, C, blk, NB * bb) == 0, "rc");
        memset(in, 0xAA, sizeof in);
        QG_CHECK(qg_kq_quantize_domain_ref(t, x, R, C, NULL, in, &outside) == 0 && outside == 3, "%s: %zu outside, want 3",
                 qg_kq_name(t), outside);
        for (int b = 0; b < NB; b++)
            QG_CHECK(in[b] == (b == 1 || b == 2 || b == 6 ? 0 : 1), "%s: block %d in_domain %d", qg_kq_name(t), b, in[b]);
        QG_CHECK(qg_kq_quantize_domain_ref(t, x, R, C, NULL, in, NULL) == 0, "%s: NULL count", qg_kq_name(t));
        /* the report's own blocks are the quantizer's output, byte for byte */
        memset(blk2, 0x5A, sizeof blk2);
        QG_CHECK(qg_kq_quantize_domain_ref(t, x, R, C, blk2, in, NULL) == 0 && memcmp(blk, blk2, NB * bb) == 0,
                 "%s: bytes differ", qg_kq_name(t));
        /* magnitudes: outside exactly where the formats cannot represent the block */
        const struct {
            float mag;
            int want[4]; /* q4_k, q5_k, q6_k, q8_k */
        } k_mag[] = {
            {3.4e38f, {0, 0, 0, 1}}, {1e30f, {0, 0, 0, 1}}, {1e9f, {0, 0, 0, 1}}, {1e8f, {0, 0, 1, 1}},
            {1e3f, {1, 1, 1, 1}},    {1.0f, {1, 1, 1, 1}},  {1e-3f, {1, 1, 1, 1}}, {1e-9f, {1, 1, 1, 1}},
            {1e-36f, {0, 0, 1, 1}},  {1e-40f, {0, 0, 1, 0}},
        };
        for (size_t m = 0; m < sizeof k_mag / sizeof k_mag[0]; m++) {
            for (int e = 0; e < QK; e++) x[e] = k_mag[m].mag * sinf(0.37f * (float)e + 0.1f);
            QG_CHECK(qg_kq_quantize_domain_ref(t, x, 1, QK, NULL, in, &outside) == 0, "rc");
            QG_CHECK(in[0] == k_mag[m].want[ti] && outside == (size_t)!in[0], "%s: magnitude %g: in_domain %d, want %d",
                     qg_kq_name(t), (double)k_mag[m].mag, in[0], k_mag[m].want[ti]);
            if (in[0] && k_mag[m].mag >= 1e-3f) { /* inside: the block approximates x (5% relative RMS) */
                qg_kq_quantize_ref(t, x, 1, QK, blk, bb);
                qg_kq_dequant_f32_ref(t, blk, bb, 1, QK, y);
                double se = 0, sx = 0;
                for (int e = 0; e < QK; e++) {
                    se += ((double)y[e] - x[e]) * ((double)y[e] - x[e]);
                    sx += (double)x[e] * x[e];
                }
                QG_CHECK(se <= 0.0025 * sx, "%s: magnitude %g inside but relative RMS error %g", qg_kq_name(t),
                         (double)k_mag[m].mag, sqrt(se / sx));
            }
        }
        /* the argument checks of qg_kq_quantize_ref */
        QG_CHECK(qg_kq_quantize_domain_ref(t, NULL, 1, QK, NULL, in, NULL) == QG_ERR_argument_invalid, "NULL x");
        QG_CHECK(qg_kq_quantize_domain_ref(t, x, 1, QK, NULL, NULL, NULL) == QG_ERR_argument_invalid, "NULL in_domain");
        QG_CHECK(qg_kq_quantize_domain_ref(t, x, 1, 300, NULL, in, NULL) == QG_ERR_kq_cols_not_multiple, "cols 300");
        QG_CHECK(qg_kq_quantize_domain_ref(t, x, 0, QK, NULL, in, NULL) == QG_ERR_shape_invalid, "rows 0");
        QG_CHECK(qg_kq_quantize_domain_ref(t, x, SIZE_MAX / 2, QK, NULL, in, NULL) == QG_ERR_shape_invalid, "rows overflow");
    }
    QG_CHECK(qg_kq_quantize_domain_ref((qg_ktype)9, x, 1, QK, NULL, in, NULL) == QG_ERR_kq_type_unknown, "type 9");
}

/* ---- validation -------------------------------------------------------------------------------------------- */

static void test_validation(void)
{
    static uint8_t w[4 * 292];
    static float y[1024], xf[1024];
    static uint16_t x16[16 * 512], h[1024];
    int32_t S[4], M[4];
    float r;
    memset(w, 0, sizeof w);
    memset(xf, 0, sizeof xf);
    memset(x16, 0, sizeof x16);
    static const size_t bad_cols[] = {4544, 896, 0, 255, 257, 128};
    for (int ti = 0; ti < 4; ti++) {
        qg_ktype t = k_types[ti];
        const size_t bsz = qg_kq_block_bytes(t);
        for (size_t i = 0; i < sizeof bad_cols / sizeof bad_cols[0]; i++) {
            const size_t c = bad_cols[i];
            QG_CHECK(qg_kq_check_shape(t, 1, c, bsz) == QG_ERR_kq_cols_not_multiple, "check_shape cols %zu", c);
            QG_CHECK(qg_kq_dequant_f32_ref(t, w, bsz, 1, c, y) == QG_ERR_kq_cols_not_multiple, "dequant cols %zu", c);
            QG_CHECK(qg_kq_dequant_f16_ref(t, w, bsz, 1, c, h) == QG_ERR_kq_cols_not_multiple, "dequant16 cols %zu", c);
            QG_CHECK(qg_kq_quantize_ref(t, xf, 1, c, w, bsz) == QG_ERR_kq_cols_not_multiple, "quantize cols %zu", c);
            QG_CHECK(qg_kq_gemv_ref(t, w, bsz, 1, c, x16, 1, y, NULL) == QG_ERR_kq_cols_not_multiple, "gemv cols %zu", c);
            if (t != QG_Q8_K)
                QG_CHECK(qg_kq_dot_q8k_ref(t, w, w, c, S, M, &r) == QG_ERR_kq_cols_not_multiple, "dot cols %zu", c);
        }
        QG_CHECK(qg_kq_check_shape(t, 2, 512, 4 * bsz) == 0, "good shape");
        QG_CHECK(qg_kq_check_shape(t, 2, 512, 4 * bsz - 1) == QG_ERR_kq_size_mismatch, "nbytes - 1");
        QG_CHECK(qg_kq_check_shape(t, 2, 512, 4 * bsz + 1) == QG_ERR_kq_size_mismatch, "nbytes + 1");
        QG_CHECK(qg_kq_check_shape(t, 2, 512, 4 * qg_kq_block_bytes(k_types[(ti + 1) % 4])) == QG_ERR_kq_size_mismatch,
                 "another type's size");
        QG_CHECK(qg_kq_check_shape(t, 0, 512, 0) == QG_ERR_shape_invalid, "rows 0");
        QG_CHECK(qg_kq_check_shape(t, SIZE_MAX / 256, 512, 0) == QG_ERR_shape_invalid, "rows*cols overflow");
        QG_CHECK(qg_kq_check_shape(t, SIZE_MAX / 1024 + 1, 256, 0) == QG_ERR_shape_invalid, "rows*cols*4 overflow");
        QG_CHECK(qg_kq_dequant_f32_ref(t, w, 4 * bsz, 2, 512, NULL) == QG_ERR_argument_invalid, "NULL y");
        QG_CHECK(qg_kq_dequant_f32_ref(t, NULL, 4 * bsz, 2, 512, y) == QG_ERR_argument_invalid, "NULL blocks");
        QG_CHECK(qg_kq_dequant_f16_ref(t, w, 4 * bsz, 2, 512, NULL) == QG_ERR_argument_invalid, "NULL y16");
        QG_CHECK(qg_kq_quantize_ref(t, NULL, 2, 512, w, 4 * bsz) == QG_ERR_argument_invalid, "NULL x");
        QG_CHECK(qg_kq_quantize_ref(t, xf, 2, 512, NULL, 4 * bsz) == QG_ERR_argument_invalid, "NULL blocks out");
        QG_CHECK(qg_kq_quantize_ref(t, xf, 2, 512, w, 4 * bsz + 2) == QG_ERR_kq_size_mismatch, "quantize nbytes");
        QG_CHECK(qg_kq_dequant_f32_ref(t, w, 4 * bsz - 2, 2, 512, y) == QG_ERR_kq_size_mismatch, "dequant nbytes");
        QG_CHECK(qg_kq_gemv_ref(t, w, 4 * bsz, 2, 512, x16, 0, y, h) == QG_ERR_kq_batch_out_of_range, "batch 0");
        QG_CHECK(qg_kq_gemv_ref(t, w, 4 * bsz, 2, 512, x16, 17, y, h) == QG_ERR_kq_batch_out_of_range, "batch 17");
        QG_CHECK(qg_kq_gemv_ref(t, w, 4 * bsz, 2, 512, x16, 16, y, h) == 0, "batch 16");
        QG_CHECK(qg_kq_gemv_ref(t, w, 4 * bsz, 2, 512, x16, 1, NULL, NULL) == QG_ERR_argument_invalid, "no output");
        QG_CHECK(qg_kq_gemv_ref(t, NULL, 4 * bsz, 2, 512, x16, 1, y, NULL) == QG_ERR_argument_invalid, "NULL w");
        QG_CHECK(qg_kq_gemv_ref(t, w, 4 * bsz, 2, 512, NULL, 1, y, NULL) == QG_ERR_argument_invalid, "NULL x16");
        QG_CHECK(qg_kq_gemv_ref(t, w, 4 * bsz + 1, 2, 512, x16, 1, y, NULL) == QG_ERR_kq_size_mismatch, "gemv nbytes");
        QG_CHECK(qg_kq_gemv_ref(t, w, 0, 0, 512, x16, 1, y, NULL) == QG_ERR_shape_invalid, "gemv rows 0");
        if (t != QG_Q8_K) {
            QG_CHECK(qg_kq_dot_q8k_ref(t, NULL, w, 256, S, M, &r) == QG_ERR_argument_invalid, "dot NULL w");
            QG_CHECK(qg_kq_dot_q8k_ref(t, w, NULL, 256, S, M, &r) == QG_ERR_argument_invalid, "dot NULL q8");
            QG_CHECK(qg_kq_dot_q8k_ref(t, w, w, 256, S, M, NULL) == QG_ERR_argument_invalid, "dot NULL result");
        }
    }
    QG_CHECK(qg_kq_dot_q8k_ref(QG_Q8_K, w, w, 256, S, M, &r) == QG_ERR_unsupported, "dot with q8_k weights");
    const qg_ktype bad = (qg_ktype)7;
    QG_CHECK(qg_kq_check_shape(bad, 1, 256, 144) == QG_ERR_kq_type_unknown, "unknown type shape");
    QG_CHECK(qg_kq_dequant_f32_ref(bad, w, 144, 1, 256, y) == QG_ERR_kq_type_unknown, "unknown type dequant");
    QG_CHECK(qg_kq_dequant_f16_ref(bad, w, 144, 1, 256, h) == QG_ERR_kq_type_unknown, "unknown type dequant16");
    QG_CHECK(qg_kq_quantize_ref(bad, xf, 1, 256, w, 144) == QG_ERR_kq_type_unknown, "unknown type quantize");
    QG_CHECK(qg_kq_dot_q8k_ref(bad, w, w, 256, S, M, &r) == QG_ERR_kq_type_unknown, "unknown type dot");
    QG_CHECK(qg_kq_gemv_ref(bad, w, 144, 1, 256, x16, 1, y, NULL) == QG_ERR_kq_type_unknown, "unknown type gemv");
    QG_CHECK(qg_kq_gemv_ref((qg_ktype)-1, w, 144, 1, 256, x16, 1, y, NULL) == QG_ERR_kq_type_unknown, "negative type");
    /* A rejected call writes nothing. */
    for (int i = 0; i < 1024; i++) y[i] = -7.0f;
    qg_kq_gemv_ref(QG_Q4_K, w, 144, 1, 256, x16, 17, y, NULL);
    qg_kq_dequant_f32_ref(QG_Q4_K, w, 143, 1, 256, y);
    int touched = 0;
    for (int i = 0; i < 1024; i++) touched += y[i] != -7.0f;
    QG_CHECK(touched == 0, "rejected calls wrote %d outputs", touched);
}

/* ---- GEMV ---------------------------------------------------------------------------------------------------- */

/* The naive loop the contract describes, over the dequantized matrix. */
static void naive_gemv(const float *W, size_t rows, size_t cols, const uint16_t *x, size_t batch, float *y)
{
    for (size_t b = 0; b < batch; b++) {
        for (size_t m = 0; m < rows; m++) {
            float acc = 0.0f;
            for (size_t k = 0; k < cols; k++) {
                const float p = W[m * cols + k] * qg_f16_to_f32(x[b * cols + k]);
                acc = acc + p;
            }
            y[b * rows + m] = acc;
        }
    }
}

static void test_gemv(void)
{
    static const size_t rowss[] = {1, 2, 3, 7, 8, 9, 17};
    static const size_t colss[] = {256, 768};
    static const size_t batches[] = {1, 2, 3, 5, 8, 9, 16};
    enum { MAXR = 17, MAXC = 768 };
    static float xs[MAXC * 16], W[MAXR * MAXC], y[16 * MAXR], yn[16 * MAXR], y1[MAXR];
    static uint16_t x[16 * MAXC], h[16 * MAXR], h1[MAXR];
    static uint8_t w[MAXR * 3 * 292];
    for (int ti = 0; ti < 4; ti++) {
        qg_ktype t = k_types[ti];
        for (size_t ri = 0; ri < sizeof rowss / sizeof rowss[0]; ri++) {
            for (size_t ci = 0; ci < 2; ci++) {
                const size_t rows = rowss[ri], cols = colss[ci], bi = (ri + ci) % 7, batch = batches[bi];
                const size_t nbytes = rows * (cols / QK) * qg_kq_block_bytes(t);
                static float wx[MAXR * MAXC];
                smooth_rows(wx, rows, cols, (int)(ri % 2));
                QG_CHECK(qg_kq_quantize_ref(t, wx, rows, cols, w, nbytes) == 0, "quantize");
                for (size_t k = 0; k < batch * cols; k++) xs[k] = qg_rng_uniform(&g_rng, -2.0f, 2.0f);
                for (size_t k = 0; k < batch * cols; k++) x[k] = qg_f32_to_f16(xs[k]);
                /* a few special activations: +-0 and fp16 subnormals */
                x[0] = 0x8000;
                x[1] = 0x0001;
                x[cols - 1] = 0x83FF;
                QG_CHECK(qg_kq_dequant_f32_ref(t, w, nbytes, rows, cols, W) == 0, "dequant");
                naive_gemv(W, rows, cols, x, batch, yn);
                for (size_t i = 0; i < batch * rows; i++) {
                    y[i] = -1.0f;
                    h[i] = 0xFFFF;
                }
                QG_CHECK(qg_kq_gemv_ref(t, w, nbytes, rows, cols, x, batch, y, h) == 0, "gemv");
                QG_CHECK(memcmp(y, yn, batch * rows * sizeof(float)) == 0, "%s %zux%zu batch %zu: gemv != naive loop",
                         qg_kq_name(t), rows, cols, batch);
                int bad16 = 0;
                for (size_t i = 0; i < batch * rows; i++) bad16 += h[i] != qg_f32_to_f16(y[i]);
                QG_CHECK(bad16 == 0, "fp16 output is the float32 output rounded once (%d differ)", bad16);
                /* only-f16 and only-f32 calls agree with the combined one */
                static uint16_t h2[16 * MAXR];
                static float y2[16 * MAXR];
                qg_kq_gemv_ref(t, w, nbytes, rows, cols, x, batch, NULL, h2);
                qg_kq_gemv_ref(t, w, nbytes, rows, cols, x, batch, y2, NULL);
                QG_CHECK(memcmp(h2, h, batch * rows * 2) == 0 && memcmp(y2, y, batch * rows * 4) == 0, "partial outputs");
            }
        }
        /* Batch invariance: column b of a batch-9 call equals a batch-1 call on that column, bitwise. */
        const size_t rows = 9, cols = 768, batch = 9, nbytes = rows * 3 * qg_kq_block_bytes(t);
        static float wx[MAXR * MAXC];
        smooth_rows(wx, rows, cols, 1);
        qg_kq_quantize_ref(t, wx, rows, cols, w, nbytes);
        for (size_t k = 0; k < batch * cols; k++) x[k] = qg_f32_to_f16(qg_rng_uniform(&g_rng, -3.0f, 3.0f));
        qg_kq_gemv_ref(t, w, nbytes, rows, cols, x, batch, y, h);
        for (size_t b = 0; b < batch; b++) {
            qg_kq_gemv_ref(t, w, nbytes, rows, cols, x + b * cols, 1, y1, h1);
            QG_CHECK(memcmp(y1, y + b * rows, rows * sizeof(float)) == 0 && memcmp(h1, h + b * rows, rows * 2) == 0,
                     "%s: batch invariance, column %zu", qg_kq_name(t), b);
        }
    }
    /* K = 14336 once (56 blocks per row). */
    {
        enum { C = 14336, R = 2 };
        static float wx[R * C], Wb[R * C], yb[2 * R], ybn[2 * R];
        static uint8_t wb[R * 56 * 176];
        static uint16_t xb[2 * C];
        smooth_rows(wx, R, C, 0);
        const size_t nbytes = R * 56 * 176;
        qg_kq_quantize_ref(QG_Q5_K, wx, R, C, wb, nbytes);
        qg_kq_dequant_f32_ref(QG_Q5_K, wb, nbytes, R, C, Wb);
        for (size_t k = 0; k < 2 * C; k++) xb[k] = qg_f32_to_f16(qg_rng_uniform(&g_rng, -1.0f, 1.0f));
        naive_gemv(Wb, R, C, xb, 2, ybn);
        qg_kq_gemv_ref(QG_Q5_K, wb, nbytes, R, C, xb, 2, yb, NULL);
        QG_CHECK(memcmp(yb, ybn, sizeof yb) == 0, "q5_k K = 14336");
    }
}

/* NaN and inf in weights' d and in activations propagate per IEEE. */
static void test_gemv_special(void)
{
    /* Q6_K weights, one row, d = 1, every scale 1, every code 33 (W = 1) except element 7 (code 32, W = 0). */
    uint8_t blk[210];
    memset(blk, 0, sizeof blk);
    set_d(QG_Q6_K, blk, 1.0f);
    for (int g = 0; g < 16; g++) blk[192 + g] = 1;
    for (int e = 0; e < QK; e++) set_q6(blk, e, e == 7 ? 32 : 33);
    uint16_t x[5 * QK];
    for (int b = 0; b < 5; b++)
        for (int k = 0; k < QK; k++) x[b * QK + k] = qg_f32_to_f16(0.25f);
    x[0 * QK + 5] = 0x7C00;                          /* +inf against W = 1: +inf */
    x[1 * QK + 9] = 0x7E00;                          /* NaN: NaN */
    x[2 * QK + 3] = 0x7C00, x[2 * QK + 4] = 0xFC00; /* +inf and -inf: NaN */
    x[3 * QK + 7] = 0x7C00;                          /* inf * 0: NaN */
    float y[5];
    uint16_t h[5];
    QG_CHECK(qg_kq_gemv_ref(QG_Q6_K, blk, 210, 1, QK, x, 5, y, h) == 0, "rc");
    QG_CHECK(isinf(y[0]) && y[0] > 0 && h[0] == 0x7C00, "+inf activation: %a", y[0]);
    QG_CHECK(isnan(y[1]) && qg_f16_isnan(h[1]), "NaN activation");
    QG_CHECK(isnan(y[2]) && qg_f16_isnan(h[2]), "+inf + -inf");
    QG_CHECK(isnan(y[3]) && qg_f16_isnan(h[3]), "inf * 0");
    QG_CHECK(y[4] == 0.25f * 255, "finite column unaffected: %a", y[4]);
    /* d = +inf in the weights: every non-zero weight is +-inf, zero weights NaN, so the sum is NaN. */
    set_d(QG_Q6_K, blk, INFINITY);
    qg_kq_gemv_ref(QG_Q6_K, blk, 210, 1, QK, x + 4 * QK, 1, y, h);
    QG_CHECK(isnan(y[0]), "inf d with a zero code");
    set_q6(blk, 7, 33);
    qg_kq_gemv_ref(QG_Q6_K, blk, 210, 1, QK, x + 4 * QK, 1, y, h);
    QG_CHECK(isinf(y[0]) && y[0] > 0 && h[0] == 0x7C00, "inf d, all codes positive: %a", y[0]);
    /* A large finite result overflows only the fp16 output. */
    set_d(QG_Q6_K, blk, 60000.0f);
    for (int k = 0; k < QK; k++) x[k] = qg_f32_to_f16(1.0f);
    qg_kq_gemv_ref(QG_Q6_K, blk, 210, 1, QK, x, 1, y, h);
    QG_CHECK(y[0] == 60000.0f * 256 && h[0] == 0x7C00, "fp16 output overflow: %a %04x", y[0], h[0]);
}

int main(void)
{
    qg_rng_init(&g_rng, 0x4B5155414E54ull); /* "KQUANT" */
    test_names();
    test_scale_unpack();
    test_q45_elements(QG_Q4_K);
    test_q45_elements(QG_Q5_K);
    test_q6_elements();
    test_q8_elements();
    test_f16_output_and_random_bytes();
    test_unaligned();
    test_special_values();
    test_dot();
    for (int ti = 0; ti < 4; ti++)
        for (int v = 0; v < 3; v++) test_roundtrip(k_types[ti], v);
    test_q8_quantize_rules();
    test_quantize_edges();
    test_quantize_domain();
    test_validation();
    test_gemv();
    test_gemv_special();
    return qg_test_end("unit.kquants.ref");
}
