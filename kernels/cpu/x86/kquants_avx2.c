/* GGUF K-quants Q4_K, Q5_K, Q6_K, Q8_K with AVX2 + F16C + FMA: the vector primitives of the K-quant
 * kernels (qgold/kernels_kquants.h); the argument checks, the drivers, the thread split, the float orders
 * of GEMV and dot and the output writes are shared with the NEON file (../kquants_rows.h). Compiled with
 * -mavx2 -mf16c -mfma and -ffp-contract=off (every float operation below is the one written); entered
 * only after dispatch confirmed the CPU has them.
 *
 * Blocks are bytes: every load is unaligned-safe (loadu, loadu_si64, memcpy), so Q6_K's 210-byte blocks
 * and buffers at any offset work.
 *
 * Decoding a block ("prep"). The per-group factors are computed: a = D*sc (Q4_K/Q5_K per 32 elements,
 * Q6_K per 16, Q8_K a = d) and for Q4_K/Q5_K b = Dm*m, each product exact (spec: an 11-bit d times a
 * 6- or 7-bit integer). Q5_K and Q6_K codes are laid out as 256 int8 in element order (Q5_K 0..31,
 * Q6_K q - 32 in -32..31); Q4_K nibbles are read straight from qs and Q8_K's qs in place. Then 8 codes
 * at a time are widened to int32 and converted to float (exact) and the weight is
 *   Q4_K/Q5_K  w = fmsub(q, a, b)   (q*a is exact, so this is the one rounding of a*q - b), or
 *              w = (a*q) - b        as two operations when d or dmin is inf/NaN: IEEE then decides
 *                                   which NaN comes out, and only the reference's own operation
 *                                   sequence reproduces it (sign included) on this ISA;
 *   Q6_K/Q8_K  w = a*q              (exact for Q6_K, one rounding for Q8_K).
 * So dequantization is bit-identical to the reference, inf/NaN included.
 *
 * GEMV: a vector of 8 lanes is one __m256, the fp16 output is VCVTPS2PH (round-to-nearest-even). Batch
 * 1 with Q4_K has its own path here (kq_q4_rows_b1): it reads its codes staged as fp16 subnormals
 * (q 2^-24 or q 2^-20, converted exactly straight from memory) against factors scaled by 2^24 or 2^20,
 * the same weight bits and the same float order as the shared path (see q4_stage).
 */
#include "../kquants_blocks.h"

#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Makes the compiler materialize v in a register here (an empty asm that may change it). */
#define QG_IN_REGISTER(v) __asm__("" : "+x"(v))

/* ---- block decoding ------------------------------------------------------------------------------ */

typedef struct {
    _Alignas(32) int8_t codes[QK];
    _Alignas(32) float a[16];
    _Alignas(32) float b[8];
    const int8_t *q; /* codes, or Q8_K's qs in the block itself */
    int special;     /* Q4_K/Q5_K: d or dmin is inf or NaN */
} kq_prep;

static float kq_f16(uint16_t h) { return _cvtsh_ss(h); }

static __m256 u8x8_to_f32(uint64_t v) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)v))); }

QG_INLINE void kq_prep_q45(const uint8_t *blk, kq_prep *p, const int q5)
{
    const uint16_t dh = kq_ld16(blk + QG_Q4K_D), mh = kq_ld16(blk + QG_Q4K_DMIN);
    p->special = (dh & 0x7C00) == 0x7C00 || (mh & 0x7C00) == 0x7C00;
    uint64_t sc, m;
    kq_unpack_scales(blk + QG_Q4K_SCALES, &sc, &m);
    _mm256_store_ps(p->a, _mm256_mul_ps(_mm256_set1_ps(kq_f16(dh)), u8x8_to_f32(sc)));
    _mm256_store_ps(p->b, _mm256_mul_ps(_mm256_set1_ps(kq_f16(mh)), u8x8_to_f32(m)));
    if (!q5) { /* Q4_K codes are unpacked straight from qs (see codes8) */
        p->q = (const int8_t *)(blk + QG_Q4K_QS);
        return;
    }
    const __m256i m4 = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
    const uint8_t *qs = blk + QG_Q5K_QS;
    __m256i hb = _mm256_loadu_si256((const __m256i *)(blk + QG_Q5K_QH));
    for (int c = 0; c < 4; c++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
        __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        /* bit 2c of qh[l] -> bit 4 of element 64c+l, bit 2c+1 -> bit 4 of element 64c+32+l */
        lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(hb, 4), b4));
        hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(hb, 3), b4));
        hb = _mm256_srli_epi16(hb, 2);
        _mm256_store_si256((__m256i *)(p->codes + 64 * c), lo);
        _mm256_store_si256((__m256i *)(p->codes + 64 * c + 32), hi);
    }
    p->q = p->codes;
}

QG_INLINE void kq_prep_q6(const uint8_t *blk, kq_prep *p)
{
    const __m256 d = _mm256_set1_ps(kq_f16(kq_ld16(blk + QG_Q6K_D)));
    for (int h = 0; h < 2; h++) {
        const __m256i s = _mm256_cvtepi8_epi32(_mm_loadu_si64(blk + QG_Q6K_SCALES + 8 * h));
        _mm256_store_ps(p->a + 8 * h, _mm256_mul_ps(d, _mm256_cvtepi32_ps(s)));
    }
    const __m256i m4 = _mm256_set1_epi8(0x0F), k32 = _mm256_set1_epi8(32);
    for (int h = 0; h < 2; h++) {
        const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(blk + QG_Q6K_QL + 64 * h));
        const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(blk + QG_Q6K_QL + 64 * h + 32));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + QG_Q6K_QH + 32 * h));
        /* quarter t of the half: low/high nibble of ql0/ql1 | bits 2t, 2t+1 of qh as bits 4-5 */
        __m256i t0 = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x03)), 4));
        __m256i t1 = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x0C)), 2));
        __m256i t2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, _mm256_set1_epi8(0x30)));
        __m256i t3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                     _mm256_srli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8((char)0xC0)), 2));
        int8_t *o = p->codes + 128 * h;
        _mm256_store_si256((__m256i *)o, _mm256_sub_epi8(t0, k32));
        _mm256_store_si256((__m256i *)(o + 32), _mm256_sub_epi8(t1, k32));
        _mm256_store_si256((__m256i *)(o + 64), _mm256_sub_epi8(t2, k32));
        _mm256_store_si256((__m256i *)(o + 96), _mm256_sub_epi8(t3, k32));
    }
    p->q = p->codes;
    p->special = 0;
}

QG_INLINE void kq_prep_q8(const uint8_t *blk, kq_prep *p)
{
    uint32_t bits = kq_ld32(blk + QG_Q8K_D);
    memcpy(&p->a[0], &bits, 4);
    p->q = (const int8_t *)(blk + QG_Q8K_QS);
    p->special = 0;
}

#ifdef QG_MUTATION_KQ_AVX2_NIBBLE
/* Deliberately wrong (Q4_K low and high nibbles swapped): the mutation check builds this to prove the
 * tests notice. */
#define QG_Q4_HIGH(v) (((v) & 4) == 0)
#else
#define QG_Q4_HIGH(v) (((v) & 4) != 0)
#endif

/* The 8 codes of vector v (elements 8v..8v+7) as int32. Q4_K: vector v lies in chunk v/8; its bytes are
 * qs[32(v/8) + 8(v%4) ..] and it takes their low nibbles for v%8 < 4, the high ones otherwise. */
QG_INLINE __m256i codes8(const kq_prep *p, const int v, const int q4)
{
    if (q4) {
        const __m256i b = _mm256_cvtepu8_epi32(_mm_loadu_si64((const uint8_t *)p->q + 32 * (v >> 3) + 8 * (v & 3)));
        return QG_Q4_HIGH(v) ? _mm256_srli_epi32(b, 4) : _mm256_and_si256(b, _mm256_set1_epi32(15));
    }
    return _mm256_cvtepi8_epi32(_mm_loadu_si64(p->q + 8 * v));
}

/* The 8 weights of vector v of a prepared block. */
QG_INLINE __m256 weights(const kq_prep *p, const int v, const int op, const int sh, const int q4)
{
    const __m256 q = _mm256_cvtepi32_ps(codes8(p, v, q4));
    const __m256 a = _mm256_broadcast_ss(&p->a[v >> sh]);
    if (op == OP_MUL) return _mm256_mul_ps(a, q);
    const __m256 b = _mm256_broadcast_ss(&p->b[v >> 2]);
    if (op == OP_FMS) return _mm256_fmsub_ps(q, a, b);
    return _mm256_sub_ps(_mm256_mul_ps(a, q), b);
}

/* ---- dequantization ------------------------------------------------------------------------------ */

QG_INLINE void kq_deq_block(const kq_prep *p, const int op, const int sh, const int q4, void *y, const int f16out)
{
#pragma GCC unroll 32
    for (int v = 0; v < 32; v++) {
        const __m256 w = weights(p, v, op, sh, q4);
        if (f16out)
            _mm_storeu_si128((__m128i *)((uint16_t *)y + 8 * v), _mm256_cvtps_ph(w, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        else
            _mm256_storeu_ps((float *)y + 8 * v, w);
    }
}

/* ---- dot with Q8_K ------------------------------------------------------------------------------- */

/* The dot's integer part works on the codes as unsigned bytes (Q4_K 0..15, Q5_K 0..31, Q6_K 0..63)
 * against the signed q8: VPMADDUBSW forms the int16 pair sums u0 y0 + u1 y1, |.| <= 2 * 63 * 128 =
 * 16128, so nothing saturates; VPMADDWD then multiplies them by the group's scale (broadcast as int16)
 * and adds pairs into int32, exact (|sc| <= 128). Every partial sum is an integer, so any order gives
 * the exact S and M. */

/* Q4_K/Q5_K: the 12 scale bytes unpacked (kq_unpack_scales, on the integer units, which the vector loop
 * leaves idle) to sc0..sc7, m0..m7 as bytes of a 128-bit vector, repeated in both lanes. */
QG_INLINE __m256i kq_scales_mins(const uint8_t *blk)
{
    uint64_t sc, m;
    kq_unpack_scales(blk + QG_Q4K_SCALES, &sc, &m);
    return _mm256_broadcastsi128_si256(_mm_insert_epi64(_mm_cvtsi64_si128((long long)sc), (long long)m, 1));
}

/* VPSHUFB control filling every word of each lane with bytes (lo, hi) of that lane; hi = -1 zeroes the
 * high byte (byte lo as an unsigned int16). */
#define KQ_WORD_OF(lo, hi) _mm256_set1_epi16((short)(uint16_t)((uint16_t)((hi) & 0xFF) << 8 | (lo)))

/* The lane sums of four vectors: (sum a, sum b, sum c, sum d), by interleaving and adding (VPHADDD
 * takes about 2 cycles each on the CPUs measured; these shuffles one). Exact: integer adds. */
QG_INLINE __m128i kq_hsum4_i32(__m256i a, __m256i b, __m256i c, __m256i d)
{
    const __m256i ab = _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b)); /* a02 b02 a13 b13 */
    const __m256i cd = _mm256_add_epi32(_mm256_unpacklo_epi32(c, d), _mm256_unpackhi_epi32(c, d));
    const __m256i s = _mm256_add_epi32(_mm256_unpacklo_epi64(ab, cd), _mm256_unpackhi_epi64(ab, cd)); /* a b c d, per lane */
    return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}

/* The lane sums of a and of b together: (sum a, sum b, sum a, sum b). */
QG_INLINE __m128i kq_hsum2_i32(__m256i a, __m256i b)
{
    const __m256i h = _mm256_hadd_epi32(a, b); /* per lane: a01 a23 b01 b23 */
    const __m128i t = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    return _mm_hadd_epi32(t, t);
}

/* Integer part of one Q4_K/Q5_K block: S = sum_s sc_s (q . q8)_s over the 8 sub-blocks of 32, M = sum_s
 * m_s (bsums[2s] + bsums[2s+1]). Chunk j (qs[32j ..]) holds sub-block 2j in its low nibbles and 2j+1
 * in its high ones; Q5_K's fifth bit of element 64j + l is bit 2j of qh[l], of 64j + 32 + l bit 2j+1. */
QG_INLINE __m256i kq_dot_ints_q45_vec(const uint8_t *wb, const uint8_t *yb, const int q5, __m256i *mins) /* lanes summing to S, M */
{
    const __m256i sm = kq_scales_mins(wb), m4 = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
    const uint8_t *qs = wb + (q5 ? QG_Q5K_QS : QG_Q4K_QS), *y8 = yb + QG_Q8K_QS;
    __m256i hb = q5 ? _mm256_loadu_si256((const __m256i *)(wb + QG_Q5K_QH)) : _mm256_setzero_si256();
    __m256i acc = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
        const __m256i nl = _mm256_and_si256(v, m4), nh = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        __m256i q0 = QG_Q4_HIGH(8 * j) ? nh : nl, q1 = QG_Q4_HIGH(8 * j + 4) ? nh : nl;
        if (q5) { /* bit 0 of hb's bytes -> bit 4 of q0's, bit 1 -> bit 4 of q1's (16-bit shifts: the masked bits never cross a byte) */
            q0 = _mm256_or_si256(q0, _mm256_and_si256(_mm256_slli_epi16(hb, 4), b4));
            q1 = _mm256_or_si256(q1, _mm256_and_si256(_mm256_slli_epi16(hb, 3), b4));
            hb = _mm256_srli_epi16(hb, 2);
        }
        const __m256i p0 = _mm256_maddubs_epi16(q0, _mm256_loadu_si256((const __m256i *)(y8 + 64 * j)));
        const __m256i p1 = _mm256_maddubs_epi16(q1, _mm256_loadu_si256((const __m256i *)(y8 + 64 * j + 32)));
        acc = _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(p0, _mm256_shuffle_epi8(sm, KQ_WORD_OF(2 * j, -1))),
                                                     _mm256_madd_epi16(p1, _mm256_shuffle_epi8(sm, KQ_WORD_OF(2 * j + 1, -1)))));
    }
    /* word k of the bsums (group k of 16) meets m_{k/2}: bytes 8 + k/2 of sm, lane 1 holding k = 8..15 */
    const __m256i mm = _mm256_shuffle_epi8(sm, _mm256_setr_epi8(8, -1, 8, -1, 9, -1, 9, -1, 10, -1, 10, -1, 11, -1, 11, -1, 12, -1, 12, -1,
                                                                13, -1, 13, -1, 14, -1, 14, -1, 15, -1, 15, -1));
    *mins = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(yb + QG_Q8K_BSUMS)), mm);
    return acc;
}

QG_INLINE __m128i kq_dot_ints_q45(const uint8_t *wb, const uint8_t *yb, const int q5) /* (S, M, S, M) */
{
    __m256i mn;
    const __m256i acc = kq_dot_ints_q45_vec(wb, yb, q5, &mn);
    return kq_hsum2_i32(acc, mn);
}

/* Integer part of one Q6_K block with u = q + 32 in 0..63: S = sum_g sc_g ((u . q8)_g - 32 (sum q8)_g)
 * over the 16 groups of 16. The spec's S is the sum over qs itself, so the correction is formed from the
 * q8 codes (VPMADDUBSW with 32), not from the block's bsums. Chunk c (elements 32c ..) holds group 2c in
 * its low lane and 2c+1 in its high one. */
QG_INLINE __m256i kq_dot_ints_q6_vec(const uint8_t *wb, const uint8_t *yb) /* 8 int32 lanes summing to S */
{
    const __m128i sc = _mm_loadu_si128((const __m128i *)(wb + QG_Q6K_SCALES));
    /* words: lane 0 sc0 sc2 .. sc14, lane 1 sc1 sc3 .. sc15, so word c of each lane is chunk c's scale */
    const __m256i eo = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15)));
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30), k32 = _mm256_set1_epi8(32);
    const uint8_t *y8 = yb + QG_Q8K_QS;
    __m256i acc = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(wb + QG_Q6K_QL + 64 * h));
        const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(wb + QG_Q6K_QL + 64 * h + 32));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(wb + QG_Q6K_QH + 32 * h));
        /* quarter t of the half: low/high nibble of ql0/ql1 | bits 2t, 2t+1 of qh as bits 4-5 */
        __m256i u[4];
        u[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m2));
        u[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m2));
        u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m2));
        u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2));
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) {
            const int c = 4 * h + t;
            __m256i y = _mm256_loadu_si256((const __m256i *)(y8 + 32 * c));
            QG_IN_REGISTER(y); /* one load for both multiplies (measured 1-2% faster than a memory operand in each) */
            /* (u0-32) y0 + (u1-32) y1 = (u0 y0 + u1 y1) - 32 (y0 + y1), |.| <= 8192: exact in int16 */
            const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(u[t], y), _mm256_maddubs_epi16(k32, y));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_shuffle_epi8(eo, KQ_WORD_OF(2 * c, 2 * c + 1))));
        }
    }
    return acc;
}

QG_INLINE __m128i kq_dot_ints_q6(const uint8_t *wb, const uint8_t *yb) /* S in lane 0 */
{
    const __m256i acc = kq_dot_ints_q6_vec(wb, yb);
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
    return _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
}

/* Q6_K's S with the -32 correction from the Q8_K block's bsums: S = sum_g sc_g (u . q8)_g - 32 sum_g sc_g
 * bsums_g. Equal to kq_dot_ints_q6 exactly when bsums_g is the sum of group g's codes, which holds for
 * the activations the Q8_K GEMV quantizes itself (not for an arbitrary Q8_K row given to the dot).
 * |sc_g bsums_g| <= 128 * 2048, so the int16 pair products of VPMADDWD are exact. */
QG_INLINE __m256i kq_dot_ints_q6_bsums_vec(const uint8_t *wb, const uint8_t *yb) /* 8 int32 lanes summing to S */
{
    const __m128i sc = _mm_loadu_si128((const __m128i *)(wb + QG_Q6K_SCALES));
    const __m256i eo = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15)));
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
    const uint8_t *y8 = yb + QG_Q8K_QS;
    /* the correction, words of bsums (group g) times sc_g (group order) */
    const __m256i corr = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(yb + QG_Q8K_BSUMS)), _mm256_cvtepi8_epi16(sc));
    __m256i acc = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, 5));
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(wb + QG_Q6K_QL + 64 * h));
        const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(wb + QG_Q6K_QL + 64 * h + 32));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(wb + QG_Q6K_QH + 32 * h));
        __m256i u[4];
        u[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m2));
        u[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m2));
        u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m2));
        u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2));
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) {
            const int c = 4 * h + t;
            /* u0 y0 + u1 y1 with u <= 63: |.| <= 16128, exact in int16 */
            const __m256i p = _mm256_maddubs_epi16(u[t], _mm256_loadu_si256((const __m256i *)(y8 + 32 * c)));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_shuffle_epi8(eo, KQ_WORD_OF(2 * c, 2 * c + 1))));
        }
    }
    return acc;
}

QG_INLINE __m128i kq_dot_ints_q6_bsums(const uint8_t *wb, const uint8_t *yb) /* S in lane 0 */
{
    const __m256i acc = kq_dot_ints_q6_bsums_vec(wb, yb);
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
    return _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
}

/* The dot's float sums (kquants_rows.h, "Dot float order"): the four partial pairs (sumS_p, sumM_p),
 * p = block index mod 4, as lo = (sumS_0, sumM_0, sumS_1, sumM_1) and hi = (sumS_2, sumM_2, sumS_3,
 * sumM_3); n counts the blocks taken. Q6_K has no M: its M lanes take fma(+0, +0, +0) = +0 and stay +0. */
#define KQ_HAVE_DOT_SUMS 1
typedef struct {
    __m128 lo, hi;
    size_t n;
} kq_dsum;

QG_INLINE kq_dsum kq_dsum_zero(void) { return (kq_dsum){_mm_setzero_ps(), _mm_setzero_ps(), 0}; }

/* ((sumS_0 + sumS_1) + (sumS_2 + sumS_3)) - ((sumM_0 + sumM_1) + (sumM_2 + sumM_3)); a NaN as the quiet
 * NaN 0x7FC00000 (kq_canon_nan) */
QG_INLINE float kq_dsum_result(kq_dsum a)
{
    const __m128 v = _mm_add_ps(_mm_add_ps(a.lo, _mm_movehl_ps(a.lo, a.lo)), _mm_add_ps(a.hi, _mm_movehl_ps(a.hi, a.hi)));
    return kq_canon_nan(_mm_cvtss_f32(_mm_sub_ss(v, _mm_movehdup_ps(v))));
}

/* One block's step: f = (D dy, Dm dy, ., .), sm = (S, M, ., .) into partial pair n mod 4 (the other
 * lanes kept by a blend, so a -0 there stays -0). */
QG_INLINE kq_dsum kq_dsum_step(kq_dsum a, __m128 f, __m128 sm)
{
    const __m128 f2 = _mm_movelh_ps(f, f), s2 = _mm_movelh_ps(sm, sm);
    switch (a.n & 3) {
    case 0: a.lo = _mm_blend_ps(a.lo, _mm_fmadd_ps(f2, s2, a.lo), 0x3); break;
    case 1: a.lo = _mm_blend_ps(a.lo, _mm_fmadd_ps(f2, s2, a.lo), 0xC); break;
    case 2: a.hi = _mm_blend_ps(a.hi, _mm_fmadd_ps(f2, s2, a.hi), 0x3); break;
    default: a.hi = _mm_blend_ps(a.hi, _mm_fmadd_ps(f2, s2, a.hi), 0xC); break;
    }
    a.n++;
    return a;
}

/* Two blocks' step, the first at an even index: f = (D dy, Dm dy) of both, sm = (S, M) of both. */
QG_INLINE kq_dsum kq_dsum_step2(kq_dsum a, __m128 f, __m128 sm)
{
    if (a.n & 2) a.hi = _mm_fmadd_ps(f, sm, a.hi);
    else a.lo = _mm_fmadd_ps(f, sm, a.lo);
    a.n += 2;
    return a;
}

QG_INLINE kq_dsum kq_dot_q45(kq_dsum a, const uint8_t *wb, const uint8_t *yb, const int q5, int32_t *S, int32_t *M)
{
    const __m128i sm = kq_dot_ints_q45(wb, yb, q5);
    if (S != NULL) *S = _mm_cvtsi128_si32(sm);
    if (M != NULL) *M = _mm_extract_epi32(sm, 1);
    const __m128 f = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)kq_ld32(wb + QG_Q4K_D))), _mm_broadcast_ss((const float *)(yb + QG_Q8K_D))); /* D dy, Dm dy (d, dmin adjacent) */
    return kq_dsum_step(a, f, _mm_cvtepi32_ps(sm));
}

/* Q6_K: f = (D dy, 0, ...), sm = (S, 0, ...) (lane 1 of the fp16 pair is +0, so D dy's neighbour is +0). */
QG_INLINE kq_dsum kq_dot_q6_step(kq_dsum a, const uint8_t *wb, const uint8_t *yb, __m128i s)
{
    const __m128 f = _mm_mul_ss(_mm_cvtph_ps(_mm_cvtsi32_si128(kq_ld16(wb + QG_Q6K_D))), _mm_castsi128_ps(_mm_cvtsi32_si128((int)kq_ld32(yb + QG_Q8K_D))));
    return kq_dsum_step(a, f, _mm_cvtepi32_ps(_mm_and_si128(s, _mm_setr_epi32(-1, 0, 0, 0))));
}

QG_INLINE kq_dsum kq_dot_q6(kq_dsum a, const uint8_t *wb, const uint8_t *yb, int32_t *S)
{
    const __m128i s = kq_dot_ints_q6(wb, yb);
    if (S != NULL) *S = _mm_cvtsi128_si32(s);
    return kq_dot_q6_step(a, wb, yb, s);
}

/* The Q8_K GEMV's Q6_K step (kquants_rows.h): the same float step as kq_dot_q6, S from the bsums. */
#define KQ_HAVE_DOT_Q6_BSUMS 1
QG_INLINE kq_dsum kq_dot_q6_bsums(kq_dsum a, const uint8_t *wb, const uint8_t *yb) { return kq_dot_q6_step(a, wb, yb, kq_dot_ints_q6_bsums(wb, yb)); }

/* ---- GEMV ---------------------------------------------------------------------------------------- */

typedef __m256 kq_v8; /* lane l: element 8v + l */

QG_INLINE kq_v8 kq_v8_zero(void) { return _mm256_setzero_ps(); }

/* One block of R rows against G columns: acc[r][g][k] per the order of kquants_rows.h. */
QG_INLINE void kq_gemv_block(const kq_prep *p, const int R, const int G, const int op, const int sh, const int q4,
                             const float *const *xb, __m256 acc[2][MAXG][2])
{
#pragma GCC unroll 32
    for (int v = 0; v < 32; v++) {
        const int k = (v >> 2) & 1;
        __m256 xv[MAXG];
#pragma GCC unroll 4
        for (int g = 0; g < G; g++) xv[g] = _mm256_load_ps(xb[g] + 8 * v);
#pragma GCC unroll 2
        for (int r = 0; r < R; r++) {
            const __m256 w = weights(p + r, v, op, sh, q4);
#pragma GCC unroll 4
            for (int g = 0; g < G; g++) acc[r][g][k] = _mm256_fmadd_ps(w, xv[g], acc[r][g][k]);
        }
    }
}

static float kq_hsum(__m256 a0, __m256 a1)
{
    const __m256 s = _mm256_add_ps(a0, a1);
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1)); /* t_l = s_l + s_{l+4} */
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));                                       /* (t0 + t2, t1 + t3) */
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

QG_INLINE uint16_t kq_to_f16(float y) { return (uint16_t)_cvtss_sh(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

/* The 32 weight vectors of a prepared block, stored in element order. */
QG_INLINE void kq_weights_to(const kq_prep *p, const int op, const int sh, const int q4, float *wv)
{
#pragma GCC unroll 32
    for (int v = 0; v < 32; v++) _mm256_store_ps(wv + 8 * v, weights(p, v, op, sh, q4));
}

/* One block of R rows (weights already dequantized in wv[r]) against columns b0 .. b0+G-1, whose
 * accumulators are loaded from accm and stored back (constant R and G, so they live in registers). */
QG_INLINE void kq_gemv_block_buf(const float *const *wv, const int R, const int G, const float *xf, size_t cols, size_t b0,
                                 __m256 accm[2][QG_KQ_MAX_BATCH][2])
{
    __m256 acc[2][MAXG][2];
    const float *xb[MAXG];
#pragma GCC unroll 4
    for (int g = 0; g < G; g++) {
        xb[g] = xf + (b0 + (size_t)g) * cols;
#pragma GCC unroll 2
        for (int r = 0; r < R; r++) {
            acc[r][g][0] = accm[r][b0 + (size_t)g][0];
            acc[r][g][1] = accm[r][b0 + (size_t)g][1];
        }
    }
    /* 64 elements per trip with the loop kept rolled (a fully unrolled block lets the compiler hoist
     * loads far ahead and spill them); A0 and A1 vectors alternate, each accumulator still sees its
     * vectors in increasing v. */
#pragma GCC unroll 1
    for (int c = 0; c < 4; c++) {
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const int k = j & 1, v = 8 * c + (j >> 1) + 4 * k;
            __m256 w[2];
#pragma GCC unroll 2
            for (int r = 0; r < R; r++) w[r] = _mm256_load_ps(wv[r] + 8 * v);
#pragma GCC unroll 4
            for (int g = 0; g < G; g++) {
                __m256 xv = _mm256_load_ps(xb[g] + 8 * v);
                QG_IN_REGISTER(xv); /* one load for both rows, not a memory operand in each FMA */
#pragma GCC unroll 2
                for (int r = 0; r < R; r++) acc[r][g][k] = _mm256_fmadd_ps(w[r], xv, acc[r][g][k]);
            }
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < G; g++) {
#pragma GCC unroll 2
        for (int r = 0; r < R; r++) {
            accm[r][b0 + (size_t)g][0] = acc[r][g][0];
            accm[r][b0 + (size_t)g][1] = acc[r][g][1];
        }
    }
}

/* Q4_K at batch 1. The blocks of two rows r0, r1 at the same position are staged for the loop below:
 *   codes: each row's 256 codes in element order as fp16 bit patterns, the low-nibble ones as q
 *          (bits 0-3) and the high-nibble ones as 16q (bits 4-7, the byte masked with 0xF0, not
 *          shifted): fp16 subnormals, whose conversion (VCVTPH2PS, exact, straight from memory)
 *          gives q 2^-24 and q 2^-20;
 *   fac:   per chunk j (64 elements, groups 2j and 2j+1), (a_2j, b_2j, a_2j+1, b_2j+1) of r0 then of
 *          r1, a scaled to match its codes: a 2^24 or a 2^20, computed as (D 2^k) * sc. D 2^k is
 *          exact (a power of two; |D| <= 65504, so no overflow; inf and NaN pass unchanged) and
 *          (D 2^k) sc = (D sc) 2^k exactly, inf*0 and NaN products included.
 * Then (q 2^-k)(a 2^k) = qa exactly, so fmsub(q 2^-k, a 2^k, b) is the same single rounding of a*q - b
 * as fmsub(q, a, b), and ((a 2^k) * (q 2^-k)) - b the same two operations as (a*q) - b: the weights
 * are the reference's bits. */
typedef struct {
    _Alignas(32) float fac[4][8];
    _Alignas(32) uint16_t codes[2][QK];
} q4_stage;

/* The codes of chunk j of one block (qs[32j ..], elements 64j ..): elements 64j + l (low nibbles of its
 * 32 bytes, l < 32) and 64j + 32 + l (high nibbles), into h[64j ..]. */
QG_INLINE void q4_stage_chunk(const uint8_t *qs, uint16_t *h, const int j)
{
#pragma GCC unroll 2
    for (int k = 0; k < 2; k++) {
        const __m256i c = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(qs + 32 * j + 16 * k)));
        _mm256_store_si256((__m256i *)(h + 64 * j + 16 * k), _mm256_and_si256(c, _mm256_set1_epi16(QG_Q4_HIGH(8 * j) ? 0xF0 : 0x0F)));
        _mm256_store_si256((__m256i *)(h + 64 * j + 32 + 16 * k), _mm256_and_si256(c, _mm256_set1_epi16(QG_Q4_HIGH(8 * j + 4) ? 0xF0 : 0x0F)));
    }
}

/* Stages blocks b0 and b1 (the same block for a single row); returns whether d or dmin of either is
 * inf/NaN. */
QG_INLINE int q4_stage2(const uint8_t *b0, const uint8_t *b1, q4_stage *f, const int stage_codes)
{
    /* Each 128-bit half holds one row. Its 16 bytes d, dmin, s0..s11 as dwords V0..V3; unpack_scales
     * in dwords: (sc0..3, m0..3, sc4..7, m4..7) = (V1 & lo6, V2 & lo6, (V3 & nib) | ((V1 >> 2) & top2),
     * ((V3 >> 4) & nib) | ((V2 >> 2) & top2)). */
    const __m256i v = _mm256_loadu2_m128i((const __m128i *)b1, (const __m128i *)b0);
    const __m256i A = _mm256_shuffle_epi32(v, 0xF9), B = _mm256_shuffle_epi32(v, 0x99); /* (V1 V2 V3 V3), (V1 V2 V1 V2) */
    const __m256i lo = _mm256_setr_epi32(0x3F3F3F3F, 0x3F3F3F3F, 0x0F0F0F0F, 0x0F0F0F0F, 0x3F3F3F3F, 0x3F3F3F3F, 0x0F0F0F0F, 0x0F0F0F0F);
    const __m256i hi = _mm256_setr_epi32(0, 0, 0x30303030, 0x30303030, 0, 0, 0x30303030, 0x30303030);
    const __m256i sh = _mm256_setr_epi32(0, 0, 0, 4, 0, 0, 0, 4);
    const __m256i s = _mm256_or_si256(_mm256_and_si256(_mm256_srlv_epi32(A, sh), lo), _mm256_and_si256(_mm256_srli_epi32(B, 2), hi));
    /* per half (D 2^k0, Dm, D 2^k1, Dm) of its row, k0 and k1 the scales of a chunk's two groups */
    const __m128i dm = _mm_cvtsi64_si128((long long)(kq_ld32(b0 + QG_Q4K_D) | (uint64_t)kq_ld32(b1 + QG_Q4K_D) << 32)); /* dh0 mh0 dh1 mh1: dmin follows d */
    const __m256 d = _mm256_cvtph_ps(_mm_shuffle_epi8(dm, _mm_setr_epi8(0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7)));
#define QG_Q4_K(v) (QG_Q4_HIGH(v) ? 1048576.0f : 16777216.0f) /* 2^20, 2^24 */
    const __m256 dk = _mm256_mul_ps(d, _mm256_setr_ps(QG_Q4_K(0), 1.0f, QG_Q4_K(4), 1.0f, QG_Q4_K(0), 1.0f, QG_Q4_K(4), 1.0f));
#undef QG_Q4_K
    /* chunk j: the dwords (sc_2j, m_2j, sc_2j+1, m_2j+1) of each half; s holds sc_g at byte g (g < 4)
     * or 8 + g - 4, m_g four bytes further */
#define QG_Q4_SC(g) ((g) < 4 ? (g) : 4 + (g))
#define QG_Q4_FAC(j)                                                                                                                 \
    _mm256_mul_ps(dk, _mm256_cvtepi32_ps(_mm256_shuffle_epi8(                                                                         \
                          s, _mm256_setr_epi8(QG_Q4_SC(2 * (j)), -1, -1, -1, QG_Q4_SC(2 * (j)) + 4, -1, -1, -1, QG_Q4_SC(2 * (j) + 1), -1, \
                                              -1, -1, QG_Q4_SC(2 * (j) + 1) + 4, -1, -1, -1, QG_Q4_SC(2 * (j)), -1, -1, -1,                \
                                              QG_Q4_SC(2 * (j)) + 4, -1, -1, -1, QG_Q4_SC(2 * (j) + 1), -1, -1, -1,                       \
                                              QG_Q4_SC(2 * (j) + 1) + 4, -1, -1, -1))))
    _mm256_store_ps(f->fac[0], QG_Q4_FAC(0));
    _mm256_store_ps(f->fac[1], QG_Q4_FAC(1));
    _mm256_store_ps(f->fac[2], QG_Q4_FAC(2));
    _mm256_store_ps(f->fac[3], QG_Q4_FAC(3));
#undef QG_Q4_FAC
#undef QG_Q4_SC
#pragma GCC unroll 4
    for (int j = 0; j < 4 && stage_codes; j++) {
        q4_stage_chunk(b0 + QG_Q4K_QS, f->codes[0], j);
        q4_stage_chunk(b1 + QG_Q4K_QS, f->codes[1], j);
    }
    return (kq_ld16(b0 + QG_Q4K_D) & 0x7C00) == 0x7C00 || (kq_ld16(b0 + QG_Q4K_DMIN) & 0x7C00) == 0x7C00 ||
           (kq_ld16(b1 + QG_Q4K_D) & 0x7C00) == 0x7C00 || (kq_ld16(b1 + QG_Q4K_DMIN) & 0x7C00) == 0x7C00;
}

/* The weight vector of codes h (8 staged halves) with factors a, b (see above). */
QG_INLINE __m256 q4_w(const uint16_t *h, const __m256 a, const __m256 b, const int ms)
{
    const __m256 q = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)h));
    return ms ? _mm256_sub_ps(_mm256_mul_ps(a, q), b) : _mm256_fmsub_ps(q, a, b);
}

/* One staged Q4_K block of R = 1 or 2 rows at batch 1: vector v = 8j + u (u < 4) of chunk j goes to A0
 * and v + 4 to A1, so each accumulator sees its vectors in increasing v. Loops: chunk, half (A0's
 * vectors, then A1's), u, row: each activation vector is loaded once for both rows, and the
 * accumulators, the half's factors and the activation stay in registers. The next block's codes (nq0,
 * nq1) are staged into nf chunk by chunk, so their stores spread over the block. */
QG_INLINE void q4_block_b1(const q4_stage *f, const int R, const int ms, const float *xb, __m256 acc[2][2], const uint8_t *nq0,
                           const uint8_t *nq1, q4_stage *nf)
{
    __m256 s00 = acc[0][0], s01 = acc[0][1], s10 = acc[1][0], s11 = acc[1][1];
    const float *fac = f->fac[0];
    const uint16_t *h0 = f->codes[0], *h1 = f->codes[1];
#pragma GCC unroll 1
    for (int j = 0; j < 4; j++, fac += 8, h0 += 64, h1 += 64, xb += 64) {
        q4_stage_chunk(nq0, nf->codes[0], j);
        if (R == 2) q4_stage_chunk(nq1, nf->codes[1], j);
        {
            const __m256 a0 = _mm256_broadcast_ss(fac), b0 = _mm256_broadcast_ss(fac + 1);
            const __m256 a1 = _mm256_broadcast_ss(fac + 4), b1 = _mm256_broadcast_ss(fac + 5);
#pragma GCC unroll 4
            for (int u = 0; u < 4; u++) {
                __m256 x = _mm256_load_ps(xb + 8 * u);
                QG_IN_REGISTER(x); /* one load for both rows */
                s00 = _mm256_fmadd_ps(q4_w(h0 + 8 * u, a0, b0, ms), x, s00);
                if (R == 2) s10 = _mm256_fmadd_ps(q4_w(h1 + 8 * u, a1, b1, ms), x, s10);
            }
        }
        {
            const __m256 a0 = _mm256_broadcast_ss(fac + 2), b0 = _mm256_broadcast_ss(fac + 3);
            const __m256 a1 = _mm256_broadcast_ss(fac + 6), b1 = _mm256_broadcast_ss(fac + 7);
#pragma GCC unroll 4
            for (int u = 0; u < 4; u++) {
                __m256 x = _mm256_load_ps(xb + 32 + 8 * u);
                QG_IN_REGISTER(x);
                s01 = _mm256_fmadd_ps(q4_w(h0 + 32 + 8 * u, a0, b0, ms), x, s01);
                if (R == 2) s11 = _mm256_fmadd_ps(q4_w(h1 + 32 + 8 * u, a1, b1, ms), x, s11);
            }
        }
    }
    acc[0][0] = s00, acc[0][1] = s01, acc[1][0] = s10, acc[1][1] = s11;
}

/* Q4_K, batch 1, the rows at w0 and w0 + rb (R = 2) or w0 alone, nb blocks each, into y[0..R-1]. Each
 * block is staged one block ahead (its factors before the block before it, its codes inside that
 * block's loop), so the staged codes are in the cache, not still in the store queue, when the vector
 * loop reads them; the last block stages itself again into the unused buffer. */
#define KQ_HAVE_Q4_ROWS_B1 1
QG_INLINE void kq_q4_rows_b1(const uint8_t *w0, size_t rb, size_t nb, const float *xf, const int R, float *y)
{
    const size_t bsz = qg_kq_block_bytes(QG_Q4_K);
    q4_stage f[2];
    int sp[2];
    __m256 acc[2][2] = {{_mm256_setzero_ps(), _mm256_setzero_ps()}, {_mm256_setzero_ps(), _mm256_setzero_ps()}};
    const uint8_t *w1 = w0 + (size_t)(R - 1) * rb; /* a single row is staged twice */
    sp[0] = q4_stage2(w0, w1, &f[0], 1);
    for (size_t i = 0; i < nb; i++) {
        const size_t o = (i + 1 < nb ? i + 1 : i) * bsz;
        q4_stage *nf = &f[(i + 1) & 1];
        const int nsp = q4_stage2(w0 + o, w1 + o, nf, 0);
        const float *xb = xf + i * QK;
        if (sp[i & 1]) q4_block_b1(&f[i & 1], R, 1, xb, acc, w0 + o + QG_Q4K_QS, w1 + o + QG_Q4K_QS, nf);
        else q4_block_b1(&f[i & 1], R, 0, xb, acc, w0 + o + QG_Q4K_QS, w1 + o + QG_Q4K_QS, nf);
        sp[(i + 1) & 1] = nsp;
    }
    for (int r = 0; r < R; r++) y[r] = kq_hsum(acc[r][0], acc[r][1]);
}


/* The Q8_K GEMV's activations (kquants_rows.h): 256 fp16 values to one Q8_K block with the bytes of the
 * reference quantizer (qg_kq_quantize_ref), the same float operations in vector form: amax = max |x|;
 * max = the first x with |x| = amax (its sign); iscale = -127 / max; q = nearest_int(iscale * x) as
 * the reference forms it (the bits of iscale*x + 1.5*2^23, RNE, |iscale*x| <= 127 here), min(q, 127);
 * bsums the code sums (VPSADBW of q + 128, minus 16*128); d = 1 / iscale. A block with an inf or NaN
 * value, or all zeros, goes to the reference quantizer itself (xf receives the float32 values). */
#define KQ_HAVE_Q8K_QUANTIZE 1
static void kq_q8k_quantize_block(const uint16_t *x, float *xf, uint8_t *blk)
{
    const __m256 sgn = _mm256_set1_ps(-0.0f), inf = _mm256_set1_ps(__builtin_inff());
    __m256 mx = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    for (int v = 0; v < 32; v++) {
        const __m256 f = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + 8 * v)));
        _mm256_storeu_ps(xf + 8 * v, f);
        const __m256 a = _mm256_andnot_ps(sgn, f);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, inf, _CMP_NLT_UQ)); /* inf or NaN */
        mx = _mm256_max_ps(mx, a);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    if (_mm256_movemask_ps(bad) != 0 || amax == 0.0f) {
        (void)qg_kq_quantize_ref(QG_Q8_K, xf, 1, QK, blk, QG_Q8K_BYTES);
        return;
    }
    float max = 0.0f;
    const __m256 am = _mm256_set1_ps(amax);
    for (int v = 0; v < 32; v++) {
        const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sgn, _mm256_loadu_ps(xf + 8 * v)), am, _CMP_EQ_OQ));
        if (hit != 0) {
            max = xf[8 * v + __builtin_ctz((unsigned)hit)];
            break;
        }
    }
    const float iscale = -127.0f / max;
    const __m256 is = _mm256_set1_ps(iscale), magic = _mm256_set1_ps(12582912.0f);
    const __m256i low23 = _mm256_set1_epi32(0x7FFFFF), off = _mm256_set1_epi32(0x400000), k127 = _mm256_set1_epi32(127);
    for (int v = 0; v < 32; v += 4) {
        __m256i q[4];
        for (int u = 0; u < 4; u++) {
            const __m256 s = _mm256_add_ps(_mm256_mul_ps(is, _mm256_loadu_ps(xf + 8 * (v + u))), magic);
            q[u] = _mm256_min_epi32(_mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(s), low23), off), k127);
        }
        /* int32 -> int8 (|q| <= 127: no saturation); the packs interleave lanes, the permute restores order */
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256((__m256i *)(blk + QG_Q8K_QS + 8 * v), _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    }
    for (int g = 0; g < 16; g += 2) { /* groups g, g+1: sums of (q + 128) per 8 bytes, minus 8 * 128 each */
        const __m256i b = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(blk + QG_Q8K_QS + 16 * g)), _mm256_set1_epi8((char)0x80));
        const __m256i s = _mm256_sad_epu8(b, _mm256_setzero_si256());
        const int s0 = _mm256_extract_epi16(s, 0) + _mm256_extract_epi16(s, 4) - 2048, s1 = _mm256_extract_epi16(s, 8) + _mm256_extract_epi16(s, 12) - 2048;
        blk[QG_Q8K_BSUMS + 2 * g] = (uint8_t)s0, blk[QG_Q8K_BSUMS + 2 * g + 1] = (uint8_t)((unsigned)s0 >> 8);
        blk[QG_Q8K_BSUMS + 2 * g + 2] = (uint8_t)s1, blk[QG_Q8K_BSUMS + 2 * g + 3] = (uint8_t)((unsigned)s1 >> 8);
    }
    const float d = 1.0f / iscale;
    memcpy(blk + QG_Q8K_D, &d, 4);
}

/* n fp16 activations (n a multiple of 256) to float32, exact; xf 32-byte aligned. */
static void kq_convert_x(const uint16_t *x, size_t n, float *xf)
{
    for (size_t i = 0; i < n; i += 8) _mm256_store_ps(xf + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
}

/* Q6_K row dot without S/M outputs, four blocks per step (then two, then one): each block's S_i is exact
 * (kq_dot_ints_q6_vec; with bsums, kq_dot_ints_q6_bsums_vec, for the GEMV's own activations), the four
 * blocks' lane sums are reduced together, and one fma takes the four blocks' float steps (block i into
 * sumS_(i mod 4), the dot float order; M is +0); the result as kq_dsum_result. pf: the
 * next step's Q8_K blocks are prefetched (the GEMV, whose long Q8_K rows leave L1). */
#define KQ_Q6_INTS(w, y) (bsums ? kq_dot_ints_q6_bsums_vec(w, y) : kq_dot_ints_q6_vec(w, y))
QG_INLINE void kq_prefetch_q8(const uint8_t *yb, size_t nblocks)
{
    for (size_t l = 0; l < nblocks * QG_Q8K_BYTES; l += 64) _mm_prefetch((const char *)yb + l, _MM_HINT_T0);
}
QG_INLINE float kq_dot_row_q6_quads(const uint8_t *wrow, const uint8_t *q8row, size_t nb, const int bsums, const int pf)
{
    __m128 s4 = _mm_setzero_ps(); /* the four sumS_p of the quads, one lane each (no shuffles per step) */
    size_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        const uint8_t *w0 = wrow + i * QG_Q6K_BYTES, *y0 = q8row + i * QG_Q8K_BYTES;
        if (pf && i + 8 <= nb) kq_prefetch_q8(y0 + 4 * QG_Q8K_BYTES, 4);
        __m256i s0 = KQ_Q6_INTS(w0, y0);
        __asm__ volatile("" : "+x"(s0) : : "memory");
        __m256i s1 = KQ_Q6_INTS(w0 + QG_Q6K_BYTES, y0 + QG_Q8K_BYTES);
        __asm__ volatile("" : "+x"(s1) : : "memory");
        __m256i s2 = KQ_Q6_INTS(w0 + 2 * QG_Q6K_BYTES, y0 + 2 * QG_Q8K_BYTES);
        __asm__ volatile("" : "+x"(s2) : : "memory");
        const __m256i s3 = KQ_Q6_INTS(w0 + 3 * QG_Q6K_BYTES, y0 + 3 * QG_Q8K_BYTES);
        const __m128 s = _mm_cvtepi32_ps(kq_hsum4_i32(s0, s1, s2, s3)); /* S of blocks i .. i + 3, exact, then rounded */
        const uint64_t dd = (uint64_t)kq_ld16(w0 + QG_Q6K_D) | (uint64_t)kq_ld16(w0 + QG_Q6K_BYTES + QG_Q6K_D) << 16 |
                            (uint64_t)kq_ld16(w0 + 2 * QG_Q6K_BYTES + QG_Q6K_D) << 32 | (uint64_t)kq_ld16(w0 + 3 * QG_Q6K_BYTES + QG_Q6K_D) << 48;
        const __m128 d = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)dd));
        const __m128 dy = _mm_castsi128_ps(_mm_setr_epi32((int)kq_ld32(y0 + QG_Q8K_D), (int)kq_ld32(y0 + QG_Q8K_BYTES + QG_Q8K_D),
                                                          (int)kq_ld32(y0 + 2 * QG_Q8K_BYTES + QG_Q8K_D), (int)kq_ld32(y0 + 3 * QG_Q8K_BYTES + QG_Q8K_D)));
        s4 = _mm_fmadd_ps(_mm_mul_ps(d, dy), s, s4); /* lane p: sumS_p, blocks i .. i + 3 */
    }
    /* into the kq_dsum layout (sumS_p, sumM_p = +0) for the tail steps and the result */
    kq_dsum a = {_mm_unpacklo_ps(s4, _mm_setzero_ps()), _mm_unpackhi_ps(s4, _mm_setzero_ps()), i};
    for (; i + 2 <= nb; i += 2) {
        const uint8_t *w0 = wrow + i * QG_Q6K_BYTES, *y0 = q8row + i * QG_Q8K_BYTES;
        const uint8_t *w1 = w0 + QG_Q6K_BYTES, *y1 = y0 + QG_Q8K_BYTES;
        __m256i s0 = KQ_Q6_INTS(w0, y0);
        __asm__ volatile("" : "+x"(s0) : : "memory"); /* block i finished before block i + 1 starts: no spills */
        const __m256i s1 = KQ_Q6_INTS(w1, y1);
        const __m128 s = _mm_cvtepi32_ps(kq_hsum2_i32(s0, s1)); /* (S_i, S_i+1, S_i, S_i+1): exact int32, then rounded as the scalar order rounds */
        const __m128 d = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)kq_ld16(w0 + QG_Q6K_D) | (uint32_t)kq_ld16(w1 + QG_Q6K_D) << 16)));
        const __m128 dy = _mm_castsi128_ps(_mm_insert_epi32(_mm_cvtsi32_si128((int)kq_ld32(y0 + QG_Q8K_D)), (int)kq_ld32(y1 + QG_Q8K_D), 1));
        const __m128 f = _mm_mul_ps(d, dy), z = _mm_setzero_ps(); /* (D_i dy_i, D_i+1 dy_i+1, 0, 0) */
        a = kq_dsum_step2(a, _mm_unpacklo_ps(f, z), _mm_unpacklo_ps(s, z));
    }
    if (i < nb) {
        if (bsums) a = kq_dot_q6_bsums(a, wrow + i * QG_Q6K_BYTES, q8row + i * QG_Q8K_BYTES);
        else a = kq_dot_q6(a, wrow + i * QG_Q6K_BYTES, q8row + i * QG_Q8K_BYTES, NULL);
    }
    return kq_dsum_result(a);
}

/* Q4_K/Q5_K row dot without S/M outputs, two blocks per step: the lane sums of both blocks' S and M
 * in one reduction, then both blocks' float steps in one fma (partial pairs i mod 4, i + 1 mod 4). */
QG_INLINE float kq_dot_row_q45_pairs(const uint8_t *wrow, const uint8_t *q8row, size_t nb, const int q5, const int pf)
{
    const size_t bsz = q5 ? QG_Q5K_BYTES : QG_Q4K_BYTES;
    kq_dsum a = kq_dsum_zero();
    size_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const uint8_t *w0 = wrow + i * bsz, *y0 = q8row + i * QG_Q8K_BYTES;
        if (pf && i + 4 <= nb) kq_prefetch_q8(y0 + 2 * QG_Q8K_BYTES, 2);
        __m256i m0, m1;
        __m256i s0 = kq_dot_ints_q45_vec(w0, y0, q5, &m0);
        __asm__ volatile("" : "+x"(s0), "+x"(m0) : : "memory");
        const __m256i s1 = kq_dot_ints_q45_vec(w0 + bsz, y0 + QG_Q8K_BYTES, q5, &m1);
        const __m128 sm = _mm_cvtepi32_ps(kq_hsum4_i32(s0, m0, s1, m1)); /* S_i, M_i, S_i+1, M_i+1 */
        const __m128 d = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)((uint64_t)kq_ld32(w0 + QG_Q4K_D) | (uint64_t)kq_ld32(w0 + bsz + QG_Q4K_D) << 32)));
        const __m128 dy = _mm_shuffle_ps(_mm_castsi128_ps(_mm_loadu_si32(y0 + QG_Q8K_D)), _mm_castsi128_ps(_mm_loadu_si32(y0 + QG_Q8K_BYTES + QG_Q8K_D)),
                                         0); /* Q8_K's d may be unaligned */
        const __m128 f = _mm_mul_ps(d, dy); /* D dy, Dm dy of block i, then of block i + 1 */
        a = kq_dsum_step2(a, f, sm);
    }
    if (i < nb) a = kq_dot_q45(a, wrow + i * bsz, q8row + i * QG_Q8K_BYTES, q5, NULL, NULL);
    return kq_dsum_result(a);
}

/* The row dots again, compiled for AVX-512VL/BW (EVEX encodings): the same intrinsics and the same
 * operations, but with 32 vector registers and the nibble and bit assembly's and/or pairs fused into
 * VPTERNLOG by the compiler. Every step is an integer operation or a float intrinsic written out (no
 * contraction), so the results are the same bits; on an AMD EPYC (Zen 4) the Q4_K/Q5_K/Q6_K dots took
 * about 6%, 9% and 12% less time. Used where the CPU has AVX-512F, VL and BW unless QG_KQ_EVEX=0 (the
 * tests run both). */
#define KQ_EVEX __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw")))

/* One row's dot of type t (Q4_K, Q5_K, Q6_K) with the row loops' constant arguments fixed per call
 * (bsums: Q6_K's -32 correction from the Q8_K bsums, the GEMV's own activations; pf: prefetch the next
 * Q8_K blocks), defined once and built twice: for AVX2 (inlined where it is called, as before) and, out of
 * line, for the EVEX extensions. */
#define KQ_DEFINE_ROW_DOT(NAME, ATTR)                                                                                         \
    ATTR float NAME(const qg_ktype t, const uint8_t *wrow, const uint8_t *q8row, size_t nb, const int bsums, const int pf) \
    {                                                                                                                        \
        if (t == QG_Q6_K) {                                                                                                  \
            if (!bsums) return kq_dot_row_q6_quads(wrow, q8row, nb, 0, 0);                                                   \
            return pf ? kq_dot_row_q6_quads(wrow, q8row, nb, 1, 1) : kq_dot_row_q6_quads(wrow, q8row, nb, 1, 0);             \
        }                                                                                                                    \
        if (t == QG_Q5_K) return pf ? kq_dot_row_q45_pairs(wrow, q8row, nb, 1, 1) : kq_dot_row_q45_pairs(wrow, q8row, nb, 1, 0); \
        return pf ? kq_dot_row_q45_pairs(wrow, q8row, nb, 0, 1) : kq_dot_row_q45_pairs(wrow, q8row, nb, 0, 0);               \
    }
KQ_DEFINE_ROW_DOT(kq_row_dot_avx2, QG_INLINE)
KQ_DEFINE_ROW_DOT(kq_row_dot_evex, KQ_EVEX static)

/* 1: the EVEX row dots. Decided once (CPU support and QG_KQ_EVEX); racing first calls agree. */
static int kq_use_evex(void)
{
    static int state = -1;
    int s = __atomic_load_n(&state, __ATOMIC_RELAXED);
    if (s < 0) {
        const char *env = getenv("QG_KQ_EVEX");
        s = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
            !(env && strcmp(env, "0") == 0);
        __atomic_store_n(&state, s, __ATOMIC_RELAXED);
    }
    return s;
}

QG_INLINE float kq_row_dot(const qg_ktype t, const uint8_t *wrow, const uint8_t *q8row, size_t nb, const int bsums, const int pf)
{
    return kq_use_evex() ? kq_row_dot_evex(t, wrow, q8row, nb, bsums, pf) : kq_row_dot_avx2(t, wrow, q8row, nb, bsums, pf);
}

/* The Q8_K GEMV's row (kquants_rows.h): the same steps, Q6_K with the bsums; on rows of 32 blocks and
 * more (a Q8_K row of 9 KB or more, which the streaming weights push out of L1) the next Q8_K blocks
 * are prefetched, shorter rows skip the hint (their Q8_K row stays in L1, and the prefetch instructions
 * alone cost 4-5% there). */
#define KQ_HAVE_Q8G_ROW 1
QG_INLINE float kq_q8g_row(const qg_ktype t, const uint8_t *wrow, const uint8_t *q8row, size_t nb)
{
    return kq_row_dot(t, wrow, q8row, nb, t == QG_Q6_K, nb >= 32);
}

#include "../kquants_rows.h"

int qg_kq_dequant_f32_avx2(qg_ktype t, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, float *y)
{
    return kq_dequant(t, blocks, nbytes, rows, cols, y, 0);
}

int qg_kq_dequant_f16_avx2(qg_ktype t, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, uint16_t *y)
{
    return kq_dequant(t, blocks, nbytes, rows, cols, y, 1);
}

int qg_kq_dot_q8k_avx2(qg_ktype t, const uint8_t *wrow, const uint8_t *q8row, size_t cols, int32_t *S, int32_t *M, float *result)
{
    if (S == NULL && M == NULL) { /* the common call, its loop compiled without the per-block stores */
        if ((t == QG_Q4_K || t == QG_Q5_K || t == QG_Q6_K) && wrow != NULL && q8row != NULL && result != NULL &&
            qg_kq_check_shape(t, 1, cols, cols / QK * qg_kq_block_bytes(t)) == QG_ERR_ok) {
            *result = kq_row_dot(t, wrow, q8row, cols / QK, 0, 0);
            return QG_ERR_ok;
        }
        return kq_dot_q8k(t, wrow, q8row, cols, NULL, NULL, result);
    }
    return kq_dot_q8k(t, wrow, q8row, cols, S, M, result);
}

int qg_kq_gemv_avx2(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                    float *y_f32, uint16_t *y_f16)
{
    return kq_gemv(t, w, nbytes, rows, cols, x, batch, y_f32, y_f16);
}

int qg_kq_gemv_q8k_avx2(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                        float *y_f32, uint16_t *y_f16)
{
    return kq_gemv_q8k(t, w, nbytes, rows, cols, x, batch, y_f32, y_f16);
}

int qg_kq_q8k_quantize_avx2(const uint16_t *x, size_t n, uint8_t *q8) { return kq_q8k_quantize(x, n, q8); }
