/* rANS-compressed int8 tiles with AVX2 + F16C + FMA: decoding, the fused decode + dequant + GEMV and the
 * plain int8 W8A16 GEMV (qgold/kernels_rans.h). Compiled with -mavx2 -mf16c -mfma -ffp-contract=off and
 * entered only after dispatch confirmed the CPU has them. Validation, the predictor undo, the checks,
 * the thread split and the error order are shared with the NEON file (../rans_lanes.h); every result is
 * bit-identical to the reference because the format pins every order this file follows.
 *
 * Decoding one warp (32 lanes) in four registers of 8 uint32 states, per step t:
 *   e = T[x & 4095] (one gather; T packs symbol | bias << 8 | (freq - 1) << 20),
 *   x = freq * (x >> 12) + bias  (< 2^31, so mullo and the signed compare below are exact),
 * the 32 symbols are packed to bytes and stored as column t of the warp block; then the lanes with
 * x < 2^15 take one 16-bit word each, lower lane first: with m the 32-bit mask of those lanes, lane l's
 * word is stream[ptr + popcount(m & (2^l - 1))]. Per register k the needed words are contiguous (they
 * start at ptr + popcount of the lower registers' masks), so 8 words are loaded there, widened, and
 * routed to the lanes by a permute whose indices are the in-register prefix counts (a 256-entry table);
 * x = needs ? (x << 16) | word : x. A step whose lanes need more words than the stream has left is
 * rans_truncated before anything is read. Two warps run in lockstep so that their gathers overlap; a
 * truncation in either sends the pair back to one-warp decoding, which reports errors in warp order.
 *
 * Product (both GEMVs): a 32-row x 256-column block of int8 codes in column-major order (the decoder's
 * output, or a transposed tile column of W) times fp16 activations converted once to float32. Vectors
 * run across 8 rows and across batch columns, never across c: for each (row, batch column) the float32
 * sum over c = 0..255 ascending from 0.0f is the reference's, and each product q * x is exact, so the
 * FMA adds exactly the rounding the reference's add does.
 */
#include "qgold/errors.h"
#include "qgold/kernels_rans.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define QG_INLINE static inline __attribute__((always_inline))

/* k_pfx[m][i]: the number of set bits of m below bit i (the in-register word index of lane i). */
#define PB(m, k) (((m) >> (k)) & 1)
#define PROW(m)                                                                                                             \
    {0, PB(m, 0), PB(m, 0) + PB(m, 1), PB(m, 0) + PB(m, 1) + PB(m, 2), PB(m, 0) + PB(m, 1) + PB(m, 2) + PB(m, 3),          \
     PB(m, 0) + PB(m, 1) + PB(m, 2) + PB(m, 3) + PB(m, 4), PB(m, 0) + PB(m, 1) + PB(m, 2) + PB(m, 3) + PB(m, 4) + PB(m, 5), \
     PB(m, 0) + PB(m, 1) + PB(m, 2) + PB(m, 3) + PB(m, 4) + PB(m, 5) + PB(m, 6)}
#define PR4(m) PROW(m), PROW((m) + 1), PROW((m) + 2), PROW((m) + 3)
#define PR16(m) PR4(m), PR4((m) + 4), PR4((m) + 8), PR4((m) + 12)
#define PR64(m) PR16(m), PR16((m) + 16), PR16((m) + 32), PR16((m) + 48)
static const uint8_t k_pfx[256][8] = {PR64(0), PR64(64), PR64(128), PR64(192)};

/* 8 little-endian words from p, zero past `limit` (only the last tile's last words come near it). */
QG_INLINE __m256i words8(const uint8_t *p, const uint8_t *limit)
{
    if (limit - p >= 16) return _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    uint8_t tmp[16] = {0};
    memcpy(tmp, p, (size_t)(limit - p));
    return _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)tmp));
}

/* Lanes of x flagged in need (mask bits mk of this register) take their words; `before` is the number
 * of needing lanes in the lower registers, cnt the step's total. */
QG_INLINE __m256i refill(__m256i x, __m256i need, unsigned mk, const uint8_t *words, uint32_t ptr, uint32_t before, uint32_t cnt,
                         const uint8_t *limit)
{
    const __m256i pfx = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)k_pfx[mk]));
#ifdef QG_MUTATION_RANS_AVX2_LANE_ORDER
    /* Deliberately wrong (higher lane first): the mutation check builds this to prove the tests notice. */
    const uint32_t pc = (uint32_t)__builtin_popcount(mk);
    const __m256i w = words8(words + 2 * (size_t)(ptr + cnt - before - pc), limit);
    const __m256i idx = _mm256_sub_epi32(_mm256_set1_epi32((int)pc - 1), pfx);
#else
    (void)cnt;
    const __m256i w = words8(words + 2 * (size_t)(ptr + before), limit);
    const __m256i idx = pfx;
#endif
    const __m256i v = _mm256_or_si256(_mm256_slli_epi32(x, 16), _mm256_permutevar8x32_epi32(w, idx));
    return _mm256_blendv_epi8(x, v, need);
}

QG_INLINE __m256i step(const uint32_t *tab, __m256i x, __m256i *sym)
{
    const __m256i e = _mm256_i32gather_epi32((const int *)tab, _mm256_and_si256(x, _mm256_set1_epi32(QG_RANS_M_SCALE - 1)), 4);
    const __m256i f = _mm256_add_epi32(_mm256_srli_epi32(e, 20), _mm256_set1_epi32(1));
    const __m256i bias = _mm256_and_si256(_mm256_srli_epi32(e, 8), _mm256_set1_epi32(0xFFF));
    *sym = _mm256_and_si256(e, _mm256_set1_epi32(0xFF));
    return _mm256_add_epi32(_mm256_mullo_epi32(f, _mm256_srli_epi32(x, QG_RANS_SCALE_BITS)), bias);
}

/* One warp's decoder state: 32 lanes in four registers, and the read position in its stream. */
typedef struct {
    __m256i x0, x1, x2, x3;
    uint32_t ptr;
} warp_state;

QG_INLINE void warp_init(warp_state *s, const uint8_t *init)
{
    s->x0 = _mm256_loadu_si256((const __m256i *)init);
    s->x1 = _mm256_loadu_si256((const __m256i *)(init + 32));
    s->x2 = _mm256_loadu_si256((const __m256i *)(init + 64));
    s->x3 = _mm256_loadu_si256((const __m256i *)(init + 96));
    s->ptr = 0;
}

/* One step: 32 symbols into col[0..31], then the renormalization. Nonzero when the stream ran out. */
QG_INLINE int warp_step(const uint32_t *tab, warp_state *s, const uint8_t *words, uint32_t nwords, const uint8_t *limit, uint8_t *col)
{
    const __m256i L = _mm256_set1_epi32(QG_RANS_L), perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256i s0, s1, s2, s3;
    s->x0 = step(tab, s->x0, &s0);
    s->x1 = step(tab, s->x1, &s1);
    s->x2 = step(tab, s->x2, &s2);
    s->x3 = step(tab, s->x3, &s3);
    /* bytes: packs interleave the 128-bit halves; the permute restores lane order */
    const __m256i sym = _mm256_packus_epi16(_mm256_packus_epi32(s0, s1), _mm256_packus_epi32(s2, s3));
    _mm256_storeu_si256((__m256i *)col, _mm256_permutevar8x32_epi32(sym, perm));
    const __m256i n0 = _mm256_cmpgt_epi32(L, s->x0), n1 = _mm256_cmpgt_epi32(L, s->x1);
    const __m256i n2 = _mm256_cmpgt_epi32(L, s->x2), n3 = _mm256_cmpgt_epi32(L, s->x3);
    const unsigned m0 = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(n0)), m1 = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(n1));
    const unsigned m2 = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(n2)), m3 = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(n3));
    if ((m0 | m1 | m2 | m3) == 0) return 0;
    const uint32_t c0 = (uint32_t)__builtin_popcount(m0), c1 = (uint32_t)__builtin_popcount(m1);
    const uint32_t c2 = (uint32_t)__builtin_popcount(m2), c3 = (uint32_t)__builtin_popcount(m3);
    const uint32_t cnt = c0 + c1 + c2 + c3, ptr = s->ptr;
    if (cnt > nwords - ptr) return 1;
    if (m0) s->x0 = refill(s->x0, n0, m0, words, ptr, 0, cnt, limit);
    if (m1) s->x1 = refill(s->x1, n1, m1, words, ptr, c0, cnt, limit);
    if (m2) s->x2 = refill(s->x2, n2, m2, words, ptr, c0 + c1, cnt, limit);
    if (m3) s->x3 = refill(s->x3, n3, m3, words, ptr, c0 + c1 + c2, cnt, limit);
    s->ptr = ptr + cnt;
    return 0;
}

QG_INLINE int warp_final_ok(const warp_state *s)
{
    const __m256i L = _mm256_set1_epi32(QG_RANS_L);
    const __m256i eq = _mm256_and_si256(_mm256_and_si256(_mm256_cmpeq_epi32(s->x0, L), _mm256_cmpeq_epi32(s->x1, L)),
                                        _mm256_and_si256(_mm256_cmpeq_epi32(s->x2, L), _mm256_cmpeq_epi32(s->x3, L)));
    return _mm256_movemask_epi8(eq) == -1;
}

static int rl_decode_warp(const uint32_t *tab, const uint8_t *init, const uint8_t *words, uint32_t nwords, const uint8_t *limit,
                          uint8_t *S, uint32_t *used, int *final_ok)
{
    warp_state s;
    warp_init(&s, init);
    for (int t = 0; t < 256; t++)
        if (warp_step(tab, &s, words, nwords, limit, S + 32 * t)) return QG_ERR_rans_truncated;
    *final_ok = warp_final_ok(&s);
    *used = s.ptr;
    return QG_ERR_ok;
}

/* Two warps in lockstep (independent chains, so the gathers' latency overlaps). On a truncation in
 * either it returns rans_truncated and the caller decodes the two one by one, which finds the error in
 * the reference's order. */
#define RL_HAVE_WARP2 1
static int rl_decode_warp2(const uint32_t *tab, const uint8_t *init, const uint8_t *words_a, uint32_t nw_a, const uint8_t *words_b,
                           uint32_t nw_b, const uint8_t *limit, uint8_t *Sa, uint8_t *Sb, uint32_t *used, int *final_ok)
{
    warp_state a, b;
    warp_init(&a, init);
    warp_init(&b, init + 128);
    for (int t = 0; t < 256; t++) {
        const int ta = warp_step(tab, &a, words_a, nw_a, limit, Sa + 32 * t);
        const int tb = warp_step(tab, &b, words_b, nw_b, limit, Sb + 32 * t);
        if (ta | tb) return QG_ERR_rans_truncated;
    }
    final_ok[0] = warp_final_ok(&a);
    final_ok[1] = warp_final_ok(&b);
    used[0] = a.ptr;
    used[1] = b.ptr;
    return QG_ERR_ok;
}

/* col[l] = carry + col[0] + ... + col[l] (mod 256): log-step prefix inside each 128-bit half, then the
 * low half's total added to the high half. */
static void rl_prefix_col(uint8_t *col, uint8_t carry)
{
    __m256i v = _mm256_loadu_si256((const __m256i *)col);
    v = _mm256_add_epi8(v, _mm256_slli_si256(v, 1));
    v = _mm256_add_epi8(v, _mm256_slli_si256(v, 2));
    v = _mm256_add_epi8(v, _mm256_slli_si256(v, 4));
    v = _mm256_add_epi8(v, _mm256_slli_si256(v, 8));
    const __m256i last = _mm256_shuffle_epi8(v, _mm256_set1_epi8(15));
    v = _mm256_add_epi8(v, _mm256_permute2x128_si256(last, last, 0x08));
    _mm256_storeu_si256((__m256i *)col, _mm256_add_epi8(v, _mm256_set1_epi8((char)carry)));
}

/* ---- the product of a 32 x 256 column-major block ------------------------------------------------- */

QG_INLINE __m256 codes8(const uint8_t *p) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p))); }

/* Batch 1..3: all 32 rows and every batch column in registers (4 * B chains). */
QG_INLINE void product_small(const uint8_t *S, const float *xf, const int B, float *p, size_t ps)
{
    __m256 acc[3][4];
    for (int b = 0; b < 3; b++)
        for (int k = 0; k < 4; k++) acc[b][k] = _mm256_setzero_ps();
    for (int c = 0; c < 256; c++) {
        const __m256 q0 = codes8(S + 32 * c), q1 = codes8(S + 32 * c + 8), q2 = codes8(S + 32 * c + 16), q3 = codes8(S + 32 * c + 24);
        for (int b = 0; b < B; b++) {
            const __m256 xb = _mm256_broadcast_ss(xf + (size_t)c * (size_t)B + (size_t)b);
            acc[b][0] = _mm256_fmadd_ps(q0, xb, acc[b][0]);
            acc[b][1] = _mm256_fmadd_ps(q1, xb, acc[b][1]);
            acc[b][2] = _mm256_fmadd_ps(q2, xb, acc[b][2]);
            acc[b][3] = _mm256_fmadd_ps(q3, xb, acc[b][3]);
        }
    }
    for (int b = 0; b < B; b++)
        for (int k = 0; k < 4; k++) _mm256_storeu_ps(p + (size_t)b * ps + 8 * k, acc[b][k]);
}

/* Batch 4..16: per 8-row slab the codes are converted once; then G batch columns at a time (G chains). */
QG_INLINE void product_group(const float *F, const float *xf, size_t B, size_t b0, const int G, float *p, size_t ps)
{
    __m256 acc[8];
    for (int g = 0; g < G; g++) acc[g] = _mm256_setzero_ps();
    for (int c = 0; c < 256; c++) {
        const __m256 q = _mm256_load_ps(F + 8 * c);
        const float *xc = xf + (size_t)c * B + b0;
        for (int g = 0; g < G; g++) acc[g] = _mm256_fmadd_ps(q, _mm256_broadcast_ss(xc + g), acc[g]);
    }
    for (int g = 0; g < G; g++) _mm256_storeu_ps(p + (b0 + (size_t)g) * ps, acc[g]);
}

static void rl_block_product(const uint8_t *S, const float *xf, size_t batch, float *p, size_t ps)
{
    switch (batch) {
    case 1: product_small(S, xf, 1, p, ps); return;
    case 2: product_small(S, xf, 2, p, ps); return;
    case 3: product_small(S, xf, 3, p, ps); return;
    default: break;
    }
    _Alignas(32) float F[256 * 8];
    const size_t groups = (batch + 7) / 8;
    for (int k = 0; k < 4; k++) {
        for (int c = 0; c < 256; c++) _mm256_store_ps(F + 8 * c, codes8(S + 32 * c + 8 * k));
        size_t b0 = 0;
        for (size_t gi = 0; gi < groups; gi++) {
            const size_t G = (batch - b0) / (groups - gi); /* balanced: 4..8 columns per group */
            switch (G) {
            case 4: product_group(F, xf, batch, b0, 4, p + 8 * k, ps); break;
            case 5: product_group(F, xf, batch, b0, 5, p + 8 * k, ps); break;
            case 6: product_group(F, xf, batch, b0, 6, p + 8 * k, ps); break;
            case 7: product_group(F, xf, batch, b0, 7, p + 8 * k, ps); break;
            default: product_group(F, xf, batch, b0, 8, p + 8 * k, ps); break;
            }
            b0 += G;
        }
    }
}

/* ---- transposes between the column-major warp block and row-major W ------------------------------ */

/* 16 x 16 bytes: four rounds of the byte perfect shuffle out[2i + h] = unpack{lo,hi}(in[i], in[i + 8]);
 * each round rotates the 8-bit (row, column) index left by one, so four transpose it. */
QG_INLINE void tr16(__m128i *r)
{
    for (int round = 0; round < 4; round++) {
        __m128i o[16];
        for (int i = 0; i < 8; i++) {
            o[2 * i] = _mm_unpacklo_epi8(r[i], r[i + 8]);
            o[2 * i + 1] = _mm_unpackhi_epi8(r[i], r[i + 8]);
        }
        for (int i = 0; i < 16; i++) r[i] = o[i];
    }
}

/* dst[l * ds + c] = src[c * ss + l] for l, c < 16 on a full 16 x 16 block. */
QG_INLINE void tr16_copy(const uint8_t *src, size_t ss, uint8_t *dst, size_t ds)
{
    __m128i r[16];
    for (int i = 0; i < 16; i++) r[i] = _mm_loadu_si128((const __m128i *)(src + (size_t)i * ss));
    tr16(r);
    for (int i = 0; i < 16; i++) _mm_storeu_si128((__m128i *)(dst + (size_t)i * ds), r[i]);
}

static void rl_transpose_out(const uint8_t *S, uint8_t *dst, size_t stride, size_t rows, size_t cols)
{
    if (rows == 32 && cols == 256) {
        for (int cb = 0; cb < 16; cb++)
            for (int lb = 0; lb < 32; lb += 16) tr16_copy(S + 32 * 16 * cb + lb, 32, dst + (size_t)lb * stride + 16 * cb, stride);
        return;
    }
    _Alignas(32) uint8_t tmp[32 * 256];
    for (int cb = 0; cb < 16; cb++)
        for (int lb = 0; lb < 32; lb += 16) tr16_copy(S + 32 * 16 * cb + lb, 32, tmp + 256 * lb + 16 * cb, 256);
    for (size_t l = 0; l < rows; l++) memcpy(dst + l * stride, tmp + 256 * l, cols);
}

static void rl_transpose_in(const uint8_t *src, size_t stride, size_t rows, size_t cols, uint8_t *S)
{
    if (rows == 32 && cols == 256) {
        for (int cb = 0; cb < 16; cb++)
            for (int lb = 0; lb < 32; lb += 16) tr16_copy(src + (size_t)lb * stride + 16 * cb, stride, S + 32 * 16 * cb + lb, 32);
        return;
    }
    _Alignas(32) uint8_t tmp[32 * 256];
    memset(tmp, 0, sizeof tmp);
    for (size_t l = 0; l < rows; l++) memcpy(tmp + 256 * l, src + l * stride, cols);
    for (int cb = 0; cb < 16; cb++)
        for (int lb = 0; lb < 32; lb += 16) tr16_copy(tmp + 256 * lb + 16 * cb, 256, S + 32 * 16 * cb + lb, 32);
}

/* ---- conversions ---------------------------------------------------------------------------------- */

static void rl_convert_x(const uint16_t *x, size_t K, size_t batch, size_t ncols, float *xf)
{
    for (size_t c = 0; c < ncols; c++)
        for (size_t b = 0; b < batch; b++) xf[c * batch + b] = c < K ? _cvtsh_ss(x[b * K + c]) : 0.0f;
}

/* Round to nearest even (VCVTPS2PH), as the reference's qg_f32_to_f16. */
static uint16_t rl_f16(float y) { return (uint16_t)_cvtss_sh(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

#include "../rans_lanes.h"

int qg_rans_decode_avx2(const uint8_t *buf, size_t len, uint8_t *w, size_t w_len) { return rl_decode(buf, len, w, w_len); }

int qg_rans_gemv_avx2(const uint8_t *buf, size_t len, const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16)
{
    return rl_gemv(buf, len, x, batch, y_f32, y_f16);
}

int qg_int8_gemv_avx2(const uint8_t *w, const float *scales, size_t M, size_t K, const uint16_t *x, size_t batch, float *y_f32,
                      uint16_t *y_f16)
{
    return rl_int8_gemv(w, scales, M, K, x, batch, y_f32, y_f16);
}
