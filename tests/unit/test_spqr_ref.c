/* SpQR reference: validation (one hand-made layer per rule, outputs untouched), pack -> dequant on every
 * 3-bit code, partial column tiles, columns >= 32768, CSR == PTCSR, PTCSR padding against x[0] = inf,
 * the permutation as a gather, and the GEMV within its bound of the exact product (spqr_layers). */
#include "compare.h"
#include "qg_test.h"
#include "spqr_layers.h"

#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/registry.h"
#include "qgold/rng.h"
#include "qgold/spqr.h"

#include <math.h>
#include <string.h>

#define POISON16 0xA5A5u

static uint16_t rn16(float v) { return qg_f32_to_f16(v); }
static float f(uint16_t h) { return qg_f16_to_f32(h); }

/* ---- a small hand-made layer: m = 32, n = 20 (T = 2, a partial last tile) ---- */

enum { HM = 32, HN = 20, HT = 2 };

typedef struct {
    uint64_t dense[(HM / 16) * HT * 16];
    int32_t ro[HM + 1];
    uint32_t cv[128];
    int32_t pro[HM / 16 + 1];
    uint32_t pcv[128];
    uint16_t perm[HN];
    qg_spqr_layer L;
} hand_layer;

/* Codes (r + j) % 8, s_q = r % 8, z_q = (r + t) % 8, stats s_s = 0.5, z_s = 0.25, s_z = 1, z_z = -2;
 * rows 0, 3, 17 hold outliers; perm reversed. */
static void hand_make(hand_layer *h, qg_spqr_outlier_kind kind)
{
    static uint8_t q[HM * HN], sq[HM * HT], zq[HM * HT];
    static uint16_t st[(HM / 16) * HT * 4];
    for (int r = 0; r < HM; r++)
        for (int j = 0; j < HN; j++) q[r * HN + j] = (uint8_t)((r + j) % 8);
    for (int r = 0; r < HM; r++)
        for (int t = 0; t < HT; t++) {
            sq[r * HT + t] = (uint8_t)(r % 8);
            zq[r * HT + t] = (uint8_t)((r + t) % 8);
        }
    for (int i = 0; i < (HM / 16) * HT; i++) {
        st[4 * i] = rn16(0.5f);
        st[4 * i + 1] = rn16(0.25f);
        st[4 * i + 2] = rn16(1.0f);
        st[4 * i + 3] = rn16(-2.0f);
    }
    memset(h, 0, sizeof *h);
    int rc = qg_spqr_pack(HM, HN, q, sq, zq, st, h->dense, sizeof h->dense / 8);
    QG_CHECK(rc == 0, "pack: %s", qg_error_name(rc));
    /* CSR: row 0: cols 1, 19; row 3: col 0; row 17: cols 5, 6, 7. */
    const uint32_t one = rn16(1.0f), two = rn16(-2.0f);
    int nnz = 0;
    for (int r = 0; r < HM; r++) {
        h->ro[r] = nnz;
        if (r == 0) {
            h->cv[nnz++] = 1u | one << 16;
            h->cv[nnz++] = 19u | two << 16;
        } else if (r == 3) {
            h->cv[nnz++] = 0u | one << 16;
        } else if (r == 17) {
            for (uint32_t c = 5; c <= 7; c++) h->cv[nnz++] = c | two << 16;
        }
    }
    h->ro[HM] = nnz;
    for (int i = 0; i < HN; i++) h->perm[i] = (uint16_t)(HN - 1 - i);
    h->L = (qg_spqr_layer){HM, HN, h->dense, sizeof h->dense / 8, kind, NULL, 0, NULL, 0, h->perm, HN};
    if (kind == QG_SPQR_OUTLIERS_CSR) {
        h->L.row_offsets = h->ro;
        h->L.row_offsets_len = HM + 1;
        h->L.col_vals = h->cv;
        h->L.nnz = (size_t)nnz;
    } else if (kind == QG_SPQR_OUTLIERS_PTCSR) {
        size_t pn = 128;
        rc = qg_spqr_csr_to_ptcsr(HM, h->ro, h->cv, h->pro, h->pcv, &pn);
        QG_CHECK(rc == 0 && pn == 16 * 2 + 16 * 3, "csr_to_ptcsr: %s, %zu words", qg_error_name(rc), pn);
        h->L.row_offsets = h->pro;
        h->L.row_offsets_len = HM / 16 + 1;
        h->L.col_vals = h->pcv;
        h->L.nnz = pn;
    }
}

/* Runs validate, dequant and gemv on an invalid layer: each must return `want` and write nothing. */
static void expect_invalid(const qg_spqr_layer *L, int want, const char *what)
{
    static uint16_t w[HM * 65537 / 64]; /* large enough for every hand layer's m * n below */
    static float y[16 * HM * 2];
    static uint16_t y16[16 * HM * 2];
    static uint16_t x[65537];
    memset(x, 0, sizeof x);
    int rc = qg_spqr_validate(L);
    QG_CHECK(rc == want, "%s: validate returned %s, expected %s", what, qg_error_name(rc), qg_error_name(want));
    for (size_t i = 0; i < sizeof w / 2; i++) w[i] = POISON16;
    memset(y, 0xA5, sizeof y);
    for (size_t i = 0; i < sizeof y16 / 2; i++) y16[i] = POISON16;
    rc = qg_spqr_dequant_ref(L, w);
    QG_CHECK(rc == want, "%s: dequant returned %s", what, qg_error_name(rc));
    rc = qg_spqr_gemv_ref(L, x, 1, y, y16);
    QG_CHECK(rc == want, "%s: gemv returned %s", what, qg_error_name(rc));
    int untouched = 1;
    for (size_t i = 0; i < sizeof w / 2; i++) untouched &= w[i] == POISON16;
    for (size_t i = 0; i < sizeof y16 / 2; i++) untouched &= y16[i] == POISON16;
    const unsigned char *yb = (const unsigned char *)y;
    for (size_t i = 0; i < sizeof y; i++) untouched &= yb[i] == 0xA5;
    QG_CHECK(untouched, "%s: an output was written on error", what);
}

static void test_validation(void)
{
    hand_layer h;
    for (int kind = 0; kind < 3; kind++) {
        hand_make(&h, (qg_spqr_outlier_kind)kind);
        QG_CHECK(qg_spqr_validate(&h.L) == 0, "hand layer kind %d is valid", kind);
    }
    qg_spqr_layer L;

    hand_make(&h, QG_SPQR_OUTLIERS_CSR);
    QG_CHECK(qg_spqr_validate(NULL) == QG_ERR_argument_invalid, "NULL layer");
    L = h.L;
    L.dense = NULL;
    expect_invalid(&L, QG_ERR_argument_invalid, "NULL dense");
    uint16_t w1[1], x1[HN] = {0};
    float y1[HM];
    QG_CHECK(qg_spqr_dequant_ref(&h.L, NULL) == QG_ERR_argument_invalid, "NULL w");
    QG_CHECK(qg_spqr_gemv_ref(&h.L, x1, 1, NULL, NULL) == QG_ERR_argument_invalid, "no output");
    QG_CHECK(qg_spqr_gemv_ref(&h.L, NULL, 1, y1, NULL) == QG_ERR_argument_invalid, "NULL x");
    (void)w1;

    L = h.L;
    L.m = 24;
    expect_invalid(&L, QG_ERR_spqr_rows_not_multiple, "m = 24");
    L.m = 0;
    expect_invalid(&L, QG_ERR_spqr_rows_not_multiple, "m = 0");

    L = h.L;
    L.n = 0;
    expect_invalid(&L, QG_ERR_spqr_cols_out_of_range, "n = 0");
    L.n = 65537;
    expect_invalid(&L, QG_ERR_spqr_cols_out_of_range, "n = 65537");

    L = h.L;
    L.dense_words--;
    expect_invalid(&L, QG_ERR_spqr_size_mismatch, "dense_words - 1");
    L = h.L;
    L.n = 33; /* T = 3: the dense buffer is too short */
    expect_invalid(&L, QG_ERR_spqr_size_mismatch, "n = 33 with T = 2 words");
    L = h.L;
    L.m = (size_t)1 << 60; /* dense_words overflows: never "matches" */
    L.dense_words = 0;
    L.dense = NULL;
    expect_invalid(&L, QG_ERR_spqr_size_mismatch, "m = 2^60");
    L = h.L;
    L.row_offsets_len = HM;
    expect_invalid(&L, QG_ERR_spqr_size_mismatch, "row_offsets_len = m");
    L = h.L;
    L.perm_len = HN - 1;
    expect_invalid(&L, QG_ERR_spqr_size_mismatch, "perm_len = n - 1");
    L = h.L;
    L.perm = NULL;
    expect_invalid(&L, QG_ERR_argument_invalid, "perm NULL with perm_len = n");

    hand_make(&h, QG_SPQR_OUTLIERS_CSR);
    h.dense[5] |= (uint64_t)1 << 63;
    expect_invalid(&h.L, QG_ERR_spqr_reserved_bits, "bit 63");
    hand_make(&h, QG_SPQR_OUTLIERS_CSR);
    h.dense[40] |= (uint64_t)1 << 62;
    expect_invalid(&h.L, QG_ERR_spqr_reserved_bits, "bit 62");

    hand_make(&h, QG_SPQR_OUTLIERS_CSR);
    h.dense[16 + 9] ^= (uint64_t)1 << 61; /* tile 1, row 9: byte 4's copy in row 8 differs */
    expect_invalid(&h.L, QG_ERR_spqr_fragment_mismatch, "fragment rows 8/9");

    hand_make(&h, QG_SPQR_OUTLIERS_CSR);
    for (int r = 0; r <= HM; r++) h.ro[r] += 1;
    h.L.nnz += 1; /* consistent apart from ro[0] */
    expect_invalid(&h.L, QG_ERR_spqr_offsets_not_zero, "ro[0] = 1");

    hand_make(&h, QG_SPQR_OUTLIERS_CSR);
    h.ro[2] = 3; /* ro[2] = 3 > ro[3] = 2 */
    expect_invalid(&h.L, QG_ERR_spqr_offsets_decreasing, "ro decreasing");

    hand_make(&h, QG_SPQR_OUTLIERS_CSR);
    h.L.nnz -= 1;
    expect_invalid(&h.L, QG_ERR_spqr_offsets_not_nnz, "ro[m] != nnz");

    hand_make(&h, QG_SPQR_OUTLIERS_CSR);
    h.cv[1] = (h.cv[1] & 0xFFFF0000u) | HN;
    expect_invalid(&h.L, QG_ERR_spqr_outlier_col_out_of_range, "column n");
    hand_make(&h, QG_SPQR_OUTLIERS_PTCSR);
    h.pcv[0] = (h.pcv[0] & 0xFFFF0000u) | 0xFFFFu;
    expect_invalid(&h.L, QG_ERR_spqr_outlier_col_out_of_range, "PTCSR column 65535");

    hand_make(&h, QG_SPQR_OUTLIERS_PTCSR);
    h.pro[1] -= 1; /* segments 31 and 49 words */
    expect_invalid(&h.L, QG_ERR_spqr_ptcsr_segment_not_multiple, "segment of 31 words");

    /* An all-padding last level: tile row 0 gets a third level of zeros. */
    {
        static uint32_t big[128];
        hand_layer g;
        hand_make(&g, QG_SPQR_OUTLIERS_PTCSR);
        memset(big, 0, sizeof big);
        memcpy(big, g.pcv, 32 * 4);       /* tile row 0, levels 0..1 */
        memcpy(big + 48, g.pcv + 32, 48 * 4); /* tile row 1 */
        g.pro[1] = 48;
        g.pro[2] = 96;
        g.L.col_vals = big;
        g.L.nnz = 96;
        expect_invalid(&g.L, QG_ERR_spqr_ptcsr_segment_mismatch, "all-padding last level");
        /* An outlier after a padding slot: row 1 of tile row 0 has padding at level 0 and a word at 1. */
        hand_make(&g, QG_SPQR_OUTLIERS_PTCSR);
        QG_CHECK(g.pcv[1] == 0 && g.pcv[16 + 1] == 0, "row 1 is all padding");
        g.pcv[16 + 1] = 2u | (uint32_t)rn16(1.0f) << 16;
        expect_invalid(&g.L, QG_ERR_spqr_ptcsr_segment_mismatch, "outlier after padding");
    }

    hand_make(&h, QG_SPQR_OUTLIERS_CSR);
    h.perm[3] = h.perm[4];
    expect_invalid(&h.L, QG_ERR_spqr_perm_invalid, "perm duplicate");
    hand_make(&h, QG_SPQR_OUTLIERS_CSR);
    h.perm[0] = HN;
    expect_invalid(&h.L, QG_ERR_spqr_perm_invalid, "perm value n");

    hand_make(&h, QG_SPQR_OUTLIERS_NONE);
    h.dense[16 + 7] |= (uint64_t)1 << (6 + 3 * 4); /* tile column 1, j = 4: column 20 = n */
    expect_invalid(&h.L, QG_ERR_spqr_padding_codes_nonzero, "padded column code");
    hand_make(&h, QG_SPQR_OUTLIERS_NONE);
    h.dense[16 + 7] |= (uint64_t)1 << 53; /* j = 15, top bit */
    expect_invalid(&h.L, QG_ERR_spqr_padding_codes_nonzero, "padded column 31 code");

    /* Batch, after validation. */
    hand_make(&h, QG_SPQR_OUTLIERS_CSR);
    static uint16_t x[17 * HN];
    static float y[17 * HM];
    memset(x, 0, sizeof x);
    memset(y, 0xA5, sizeof y);
    QG_CHECK(qg_spqr_gemv_ref(&h.L, x, 0, y, NULL) == QG_ERR_spqr_batch_out_of_range, "batch 0");
    QG_CHECK(qg_spqr_gemv_ref(&h.L, x, 17, y, NULL) == QG_ERR_spqr_batch_out_of_range, "batch 17");
    QG_CHECK(((unsigned char *)y)[0] == 0xA5 && ((unsigned char *)y)[sizeof y - 1] == 0xA5, "batch error wrote y");

    /* csr_to_ptcsr refuses a CSR word 0 and a short buffer. */
    hand_make(&h, QG_SPQR_OUTLIERS_CSR);
    h.cv[2] = 0;
    size_t pn = 128;
    QG_CHECK(qg_spqr_csr_to_ptcsr(HM, h.ro, h.cv, h.pro, h.pcv, &pn) == QG_ERR_argument_invalid, "word 0");
    hand_make(&h, QG_SPQR_OUTLIERS_CSR);
    pn = 10;
    QG_CHECK(qg_spqr_csr_to_ptcsr(HM, h.ro, h.cv, h.pro, h.pcv, &pn) == QG_ERR_size_mismatch, "short PTCSR buffer");
}

/* ---- pack -> dequant on every code, against a direct recomputation from codes and statistics ---- */

static void test_roundtrip(size_t n)
{
    const size_t m = 64, T = qg_spqr_tiles_c(n);
    static uint8_t q[64 * 128], sq[64 * 8], zq[64 * 8];
    static uint16_t st[4 * 8 * 4], w[64 * 128];
    static uint64_t dense[64 * 8];
    qg_rng r;
    qg_rng_init(&r, 1000 + n);
    for (size_t i = 0; i < m * n; i++) q[i] = (uint8_t)((i / n + i % n) % 8);
    /* (s_q, z_q) over all 64 pairs: pair index = (r * T + t) % 64. */
    for (size_t i = 0; i < m * T; i++) {
        sq[i] = (uint8_t)(i % 8);
        zq[i] = (uint8_t)((i / 8) % 8);
    }
    /* Statistics: negative, subnormal, near 65504, zero, ordinary. */
    static const uint16_t pool[] = {0x3800, 0xB400, 0x0001, 0x83FF, 0x7BFF, 0xFBFF, 0x0000, 0x8000, 0x3C00, 0x4500, 0xC200, 0x2E66};
    for (size_t i = 0; i < (m / 16) * T * 4; i++) st[i] = pool[qg_rng_int_range(&r, sizeof pool / sizeof pool[0])];
    const size_t words = qg_spqr_dense_words(m, n);
    int rc = qg_spqr_pack(m, n, q, sq, zq, st, dense, words);
    QG_CHECK(rc == 0, "pack n=%zu: %s", n, qg_error_name(rc));
    qg_spqr_layer L = {m, n, dense, words, QG_SPQR_OUTLIERS_NONE, NULL, 0, NULL, 0, NULL, 0};
    rc = qg_spqr_dequant_ref(&L, w);
    QG_CHECK(rc == 0, "dequant n=%zu: %s", n, qg_error_name(rc));
    size_t bad = 0, nan_seen = 0, inf_seen = 0;
    for (size_t row = 0; row < m; row++)
        for (size_t j = 0; j < n; j++) {
            const size_t t = j / 16, tile = (row / 16) * T + t;
            const float s_s = f(st[tile * 4]), z_s = f(st[tile * 4 + 1]), s_z = f(st[tile * 4 + 2]), z_z = f(st[tile * 4 + 3]);
            const float s = f(rn16(s_s * f(rn16((float)sq[row * T + t] - s_z))));
            const float z = f(rn16(z_s * f(rn16((float)zq[row * T + t] - z_z))));
            const uint16_t want = rn16(s * f(rn16((float)q[row * n + j] - z)));
            const uint16_t got = w[row * n + j];
            const int same = got == want || (qg_f16_isnan(got) && qg_f16_isnan(want));
            if (!same && bad++ < 5) QG_CHECK(0, "n=%zu w[%zu][%zu] = 0x%04x, expected 0x%04x", n, row, j, got, want);
            nan_seen += qg_f16_isnan(want);
            inf_seen += (want & 0x7FFF) == 0x7C00;
        }
    QG_CHECK(bad == 0, "n=%zu: %zu dequantized weights differ", n, bad);
    (void)nan_seen;
    (void)inf_seen;
    /* Every code appeared: q covers 0..7 in every row, (s_q, z_q) all 64 pairs when m * T >= 64. */
    QG_CHECK(m * T >= 64, "all (s_q, z_q) pairs present");
}

/* ---- the GEMV against the exact product at the registry's bound ---- */

static const qg_kernel *g_gemv;

static void check_bounded(const qg_spqr_layer *L, const uint16_t *x, size_t batch, const char *what)
{
    const size_t m = L->m, ny = batch * m;
    float *y = malloc(ny * 4), *y1 = malloc(m * 4), *yh = malloc(ny * 4);
    uint16_t *y16 = malloc(ny * 2), *y16b = malloc(ny * 2);
    double *ys = malloc(ny * 8), *sa = malloc(ny * 8);
    if (!y || !y1 || !yh || !y16 || !y16b || !ys || !sa) {
        QG_CHECK(0, "out of memory");
        goto done;
    }
    int rc = qg_spqr_exact_product(L, x, batch, ys, sa);
    QG_CHECK(rc == 0, "%s: exact product: %s", what, qg_error_name(rc));
    rc = qg_spqr_gemv_ref(L, x, batch, y, y16);
    QG_CHECK(rc == 0, "%s: gemv: %s", what, qg_error_name(rc));
    const long K = (long)qg_spqr_max_terms(L);
    qg_bound_report br;
    rc = qg_compare_bounded(&g_gemv->numerics, K, ys, sa, NULL, y, ny, &br);
    QG_CHECK(rc == 0, "%s: float32 output: %s", what, br.text);
    for (size_t i = 0; i < ny; i++) yh[i] = f(y16[i]);
    rc = qg_compare_bounded(&g_gemv->numerics_f16, K, ys, sa, NULL, yh, ny, &br);
    QG_CHECK(rc == 0, "%s: fp16 output: %s", what, br.text);
    /* fp16 output = the float32 sum rounded once; y_f16 alone gives the same bits. */
    size_t bad = 0;
    for (size_t i = 0; i < ny; i++) bad += y16[i] != qg_f32_to_f16(y[i]);
    QG_CHECK(bad == 0, "%s: %zu fp16 outputs are not RN16(float32 output)", what, bad);
    rc = qg_spqr_gemv_ref(L, x, batch, NULL, y16b);
    QG_CHECK(rc == 0 && memcmp(y16, y16b, ny * 2) == 0, "%s: fp16 alone differs", what);
    /* Batch invariance. */
    for (size_t b = 0; b < batch && batch > 1; b++) {
        rc = qg_spqr_gemv_ref(L, x + b * L->n, 1, y1, NULL);
        QG_CHECK(rc == 0 && memcmp(y1, y + b * m, m * 4) == 0, "%s: column %zu alone differs from the batch", what, b);
    }
done:
    free(y);
    free(y1);
    free(yh);
    free(y16);
    free(y16b);
    free(ys);
    free(sa);
}

static void test_bounded(void)
{
    static const struct {
        size_t m, n;
        double density;
        qg_spqr_outlier_kind kind;
        qg_spqr_perm_kind perm;
        long dense_row;
        int high;
        size_t batch;
    } cs[] = {
        {16, 16, 0.0, QG_SPQR_OUTLIERS_NONE, QG_SPQR_PERM_IDENTITY, -1, 0, 1},
        {32, 17, 0.2, QG_SPQR_OUTLIERS_CSR, QG_SPQR_PERM_REVERSED, -1, 0, 3},
        {32, 4100, 0.01, QG_SPQR_OUTLIERS_PTCSR, QG_SPQR_PERM_RANDOM, 5, 0, 2},
        {16, 33000, 0.001, QG_SPQR_OUTLIERS_CSR, QG_SPQR_PERM_RANDOM, -1, 1, 1},
        {16, 40000, 0.0005, QG_SPQR_OUTLIERS_PTCSR, QG_SPQR_PERM_IDENTITY, 15, 1, 2},
        {48, 96, 0.9, QG_SPQR_OUTLIERS_CSR, QG_SPQR_PERM_RANDOM, -1, 0, 16},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        qg_spqr_layer_opts o = {cs[i].m, cs[i].n, cs[i].density, cs[i].kind, cs[i].perm, 77 + i, cs[i].dense_row, cs[i].high};
        qg_spqr_test_layer t;
        int rc = qg_spqr_layer_make(&o, &t);
        QG_CHECK(rc == 0, "case %zu: layer_make: %s", i, qg_error_name(rc));
        if (rc) continue;
        if (cs[i].dense_row >= 0)
            QG_CHECK(qg_spqr_max_terms(&t.L) >= 2 * cs[i].n, "case %zu: dense row gives d >= 2n", i);
        uint16_t *x = malloc(cs[i].batch * cs[i].n * 2);
        qg_spqr_random_x(500 + i, cs[i].batch, cs[i].n, x);
        char what[64];
        snprintf(what, sizeof what, "bounded case %zu", i);
        check_bounded(&t.L, x, cs[i].batch, what);
        free(x);
        qg_spqr_layer_free(&t);
    }
}

/* CSR and PTCSR of the same outliers: equal bits for finite x (same per-row order). */
static void test_csr_ptcsr(void)
{
    for (int s = 0; s < 3; s++) {
        const size_t n = s == 2 ? 40000 : 100 + 37 * (size_t)s;
        qg_spqr_layer_opts o = {64, n, s == 2 ? 0.001 : 0.15, QG_SPQR_OUTLIERS_CSR, QG_SPQR_PERM_RANDOM, 900 + (uint64_t)s, s == 1 ? 20 : -1, s == 2};
        qg_spqr_test_layer a, b;
        int rc = qg_spqr_layer_make(&o, &a);
        o.outliers = QG_SPQR_OUTLIERS_PTCSR;
        rc |= qg_spqr_layer_make(&o, &b);
        QG_CHECK(rc == 0, "csr/ptcsr layers");
        if (rc) continue;
        QG_CHECK(a.csr_nnz == b.csr_nnz && memcmp(a.csr_col_vals, b.csr_col_vals, a.csr_nnz * 4) == 0, "same outliers");
        QG_CHECK(b.L.nnz > b.csr_nnz, "PTCSR has padding (%zu > %zu)", b.L.nnz, b.csr_nnz);
        QG_CHECK(qg_spqr_max_terms(&a.L) == qg_spqr_max_terms(&b.L), "same d");
        uint16_t *x = malloc(4 * n * 2);
        float *ya = malloc(4 * 64 * 4), *yb = malloc(4 * 64 * 4);
        qg_spqr_random_x(901, 4, n, x);
        QG_CHECK(qg_spqr_gemv_ref(&a.L, x, 4, ya, NULL) == 0 && qg_spqr_gemv_ref(&b.L, x, 4, yb, NULL) == 0, "gemv");
        QG_CHECK(memcmp(ya, yb, 4 * 64 * 4) == 0, "seed %d: CSR and PTCSR outputs differ", s);
        free(x);
        free(ya);
        free(yb);
        qg_spqr_layer_free(&a);
        qg_spqr_layer_free(&b);
    }
}

/* A layer whose dense weights are all +1 (s_s = 1, s_z = 0, s_q = 1; z_s = 0; q = 1) or all 0
 * (s_s = 0), with the outliers given. */
typedef struct {
    uint64_t *dense;
    qg_spqr_layer L;
} const_layer;

static void const_make(const_layer *c, size_t m, size_t n, int ones)
{
    const size_t T = qg_spqr_tiles_c(n), words = qg_spqr_dense_words(m, n);
    uint8_t *q = calloc(m * n, 1), *sq = malloc(m * T), *zq = calloc(m * T, 1);
    uint16_t *st = malloc((m / 16) * T * 4 * 2);
    c->dense = malloc(words * 8);
    for (size_t i = 0; i < m * n; i++) q[i] = 1;
    for (size_t i = 0; i < m * T; i++) sq[i] = 1;
    for (size_t i = 0; i < (m / 16) * T; i++) {
        st[4 * i] = ones ? 0x3C00 : 0x0000;
        st[4 * i + 1] = 0;
        st[4 * i + 2] = 0;
        st[4 * i + 3] = 0;
    }
    int rc = qg_spqr_pack(m, n, q, sq, zq, st, c->dense, words);
    QG_CHECK(rc == 0, "const pack");
    c->L = (qg_spqr_layer){m, n, c->dense, words, QG_SPQR_OUTLIERS_NONE, NULL, 0, NULL, 0, NULL, 0};
    free(q);
    free(sq);
    free(zq);
    free(st);
}

/* PTCSR padding is no term: with x[0] = +inf and dense weights +1, every row is +inf, never NaN (a
 * padding slot computed as +0 * x[0] would give NaN). */
static void test_padding_inf(void)
{
    const_layer c;
    const_make(&c, 32, 24, 1);
    /* Row 0: columns 1, 2 (values 1, -1); row 20: column 3. Every other row is padding. */
    int32_t ro[33];
    uint32_t cv[3] = {1u | 0x3C00u << 16, 2u | 0xBC00u << 16, 3u | 0x3C00u << 16};
    for (int r = 0; r <= 32; r++) ro[r] = r == 0 ? 0 : r <= 20 ? 2 : 3;
    int32_t pro[3];
    uint32_t pcv[64];
    size_t pn = 64;
    QG_CHECK(qg_spqr_csr_to_ptcsr(32, ro, cv, pro, pcv, &pn) == 0 && pn == 48, "ptcsr");
    c.L.outliers = QG_SPQR_OUTLIERS_PTCSR;
    c.L.row_offsets = pro;
    c.L.row_offsets_len = 3;
    c.L.col_vals = pcv;
    c.L.nnz = pn;
    uint16_t x[24];
    for (int i = 0; i < 24; i++) x[i] = 0x3C00;
    x[0] = 0x7C00;
    float y[32];
    uint16_t y16[32];
    double ys[32], sa[32];
    QG_CHECK(qg_spqr_gemv_ref(&c.L, x, 1, y, y16) == 0, "gemv");
    QG_CHECK(qg_spqr_exact_product(&c.L, x, 1, ys, sa) == 0, "exact");
    size_t bad = 0;
    for (int r = 0; r < 32; r++) bad += !(isinf(y[r]) && y[r] > 0 && y16[r] == 0x7C00 && isinf(ys[r]) && ys[r] > 0);
    QG_CHECK(bad == 0, "%zu rows are not +inf with x[0] = inf (padding must contribute nothing)", bad);
    /* Through a gather: x[perm[0]] = inf reaches column 0 the same way. */
    uint16_t perm[24];
    for (int i = 0; i < 24; i++) perm[i] = (uint16_t)((i + 5) % 24);
    c.L.perm = perm;
    c.L.perm_len = 24;
    x[0] = 0x3C00;
    x[5] = 0x7C00;
    QG_CHECK(qg_spqr_gemv_ref(&c.L, x, 1, y, NULL) == 0, "gemv perm");
    bad = 0;
    for (int r = 0; r < 32; r++) bad += !(isinf(y[r]) && y[r] > 0);
    QG_CHECK(bad == 0, "%zu rows are not +inf with x'[0] = inf", bad);
    free(c.dense);
}

/* The permutation is a gather: y = W x' with x'[i] = x[perm[i]], checked against the same layer without
 * perm applied to an x the test gathers itself, and on a 3-cycle where a scatter gives another value. */
static void test_perm_gather(void)
{
    const_layer c;
    const_make(&c, 16, 24, 0); /* dense weights 0 */
    int32_t ro[17];
    uint32_t cv[1] = {0u | 0x3C00u << 16}; /* row 0: 1.0 * x'[0] */
    for (int r = 0; r <= 16; r++) ro[r] = r == 0 ? 0 : 1;
    uint16_t perm[24];
    for (int i = 0; i < 24; i++) perm[i] = (uint16_t)i;
    perm[0] = 1;
    perm[1] = 2;
    perm[2] = 0; /* gather: x'[0] = x[1]; scatter would give x'[0] = x[2] */
    c.L.outliers = QG_SPQR_OUTLIERS_CSR;
    c.L.row_offsets = ro;
    c.L.row_offsets_len = 17;
    c.L.col_vals = cv;
    c.L.nnz = 1;
    c.L.perm = perm;
    c.L.perm_len = 24;
    uint16_t x[24];
    for (int i = 0; i < 24; i++) x[i] = rn16((float)(10 * (i + 1)));
    float y[16];
    QG_CHECK(qg_spqr_gemv_ref(&c.L, x, 1, y, NULL) == 0, "gemv");
    QG_CHECK(y[0] == 20.0f, "y[0] = %g, expected x[perm[0]] = x[1] = 20 (a scatter gives 30)", (double)y[0]);
    free(c.dense);

    /* Random layer, random perm: gemv(L, x) == gemv(L without perm, gathered x), bit for bit. */
    qg_spqr_layer_opts o = {32, 200, 0.05, QG_SPQR_OUTLIERS_PTCSR, QG_SPQR_PERM_RANDOM, 4242, -1, 0};
    qg_spqr_test_layer t;
    if (qg_spqr_layer_make(&o, &t) != 0) {
        QG_CHECK(0, "layer");
        return;
    }
    int cycle = 0;
    for (size_t i = 0; i < 200; i++) cycle |= t.perm[t.perm[i]] != i;
    QG_CHECK(cycle, "the random perm is not an involution");
    uint16_t xs[2 * 200], xg[2 * 200];
    float ya[64], yb[64];
    qg_spqr_random_x(4243, 2, 200, xs);
    for (size_t b = 0; b < 2; b++)
        for (size_t i = 0; i < 200; i++) xg[b * 200 + i] = xs[b * 200 + t.perm[i]];
    qg_spqr_layer Lp = t.L;
    Lp.perm = NULL;
    Lp.perm_len = 0;
    QG_CHECK(qg_spqr_gemv_ref(&t.L, xs, 2, ya, NULL) == 0 && qg_spqr_gemv_ref(&Lp, xg, 2, yb, NULL) == 0, "gemv");
    QG_CHECK(memcmp(ya, yb, sizeof ya) == 0, "perm is not applied as x'[i] = x[perm[i]]");
    qg_spqr_layer_free(&t);
}

/* Columns >= 32768: a single outlier at column 40000 (a sign-extending reader would index -25536). */
static void test_high_columns(void)
{
    const size_t n = 40017;
    const_layer c;
    const_make(&c, 16, n, 0);
    int32_t ro[17];
    uint32_t cv[2] = {40000u | 0x4200u << 16, 65535u % n | 0x3C00u << 16}; /* row 3: 3 x'[40000]; row 9: x'[25518] */
    for (int r = 0; r <= 16; r++) ro[r] = r <= 3 ? 0 : r <= 9 ? 1 : 2;
    c.L.outliers = QG_SPQR_OUTLIERS_CSR;
    c.L.row_offsets = ro;
    c.L.row_offsets_len = 17;
    c.L.col_vals = cv;
    c.L.nnz = 2;
    uint16_t *x = calloc(n, 2);
    x[40000] = rn16(2.0f);
    x[40000 - 32768] = rn16(100.0f);
    x[65535 % n] = rn16(-0.5f);
    float y[16];
    QG_CHECK(qg_spqr_gemv_ref(&c.L, x, 1, y, NULL) == 0, "gemv");
    QG_CHECK(y[3] == 6.0f && y[9] == -0.5f && y[0] == 0.0f, "column 40000: y[3] = %g (want 6), y[9] = %g", (double)y[3], (double)y[9]);
    /* The same as PTCSR. */
    int32_t pro[2];
    uint32_t pcv[16];
    size_t pn = 16;
    QG_CHECK(qg_spqr_csr_to_ptcsr(16, ro, cv, pro, pcv, &pn) == 0 && pn == 16, "ptcsr");
    c.L.outliers = QG_SPQR_OUTLIERS_PTCSR;
    c.L.row_offsets = pro;
    c.L.row_offsets_len = 2;
    c.L.col_vals = pcv;
    c.L.nnz = pn;
    float y2[16];
    QG_CHECK(qg_spqr_gemv_ref(&c.L, x, 1, y2, NULL) == 0 && memcmp(y, y2, sizeof y) == 0, "PTCSR column 40000");
    free(x);
    free(c.dense);
}

int main(void)
{
    g_gemv = qg_registry_find("spqr", "gemv", QG_BACKEND_REF);
    QG_CHECK(g_gemv != NULL && g_gemv->fn.spqr_gemv == qg_spqr_gemv_ref, "registry row spqr/gemv/ref is linked");
    if (g_gemv == NULL) return qg_test_end("test_spqr_ref");
    QG_CHECK(qg_spqr_tiles_c(17) == 2 && qg_spqr_dense_words(32, 17) == 64 && qg_spqr_dense_words(SIZE_MAX - 15, 65536) == 0, "sizes");
    test_validation();
    test_roundtrip(64);
    test_roundtrip(17);
    test_roundtrip(41);
    test_roundtrip(128);
    test_bounded();
    test_csr_ptcsr();
    test_padding_inf();
    test_perm_gather();
    test_high_columns();
    return qg_test_end("test_spqr_ref");
}
