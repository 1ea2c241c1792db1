"""float32 <-> fp16 and float32 <-> bf16 on bit patterns, per reference/spec/fp16.md.

All four conversions work on integer bit patterns (numpy uint32 / uint16 arrays in, the other width
out) with exact integer arithmetic: a float32 is split into an integer significand and a power of
two, and rounding to nearest-even is decided by comparing the discarded bits with exactly one half.
No floating-point conversion of numpy (astype(float16)) is used here; the tests compare against it
as an independent cross-check.

NaN outputs (any NaN of the input's sign satisfies the contract; these are the ones produced):
  f32 -> f16:  sign | 0x7E00 | (frac32 >> 13)    (quiet bit set, top 9 payload bits kept)
  f32 -> bf16: (bits >> 16) | 0x0040              (quiet bit set, high payload kept)
  f16 -> f32:  sign | 0x7FC00000 | (frac16 << 13) (quiet bit set, payload kept)
  bf16 -> f32: bits << 16                          (exact, as the spec says for this path)
Setting the quiet bit is what keeps a NaN whose payload sits only in dropped low bits a NaN.
"""

from __future__ import annotations

import numpy as np

F16_INF = 0x7C00
F16_QNAN = 0x7E00
F32_EXP_MASK = 0x7F800000
F32_FRAC_MASK = 0x007FFFFF


def _i64(bits, dtype) -> np.ndarray:
    """Bit patterns as int64 (wide enough that no step below can wrap)."""
    return np.asarray(bits, dtype=dtype).astype(np.int64)


def _round_shift_rne(m: np.ndarray, s: np.ndarray) -> np.ndarray:
    """round(m / 2^s) to nearest, ties to even, for integers m >= 0 and 1 <= s <= 62.

    q = floor(m / 2^s); the discarded part is rem / 2^s with rem = m mod 2^s. The exact quotient
    lies above the midpoint q + 1/2 iff rem > 2^(s-1), exactly on it iff rem == 2^(s-1): then
    round to the even one of q, q + 1.
    """
    q = m >> s
    rem = m & ((np.int64(1) << s) - 1)
    half = np.int64(1) << (s - 1)
    up = (rem > half) | ((rem == half) & ((q & 1) == 1))
    return q + up.astype(np.int64)


def f32_to_f16(bits) -> np.ndarray:
    """float32 bit patterns -> fp16 bit patterns, round to nearest even (path f32_to_f16)."""
    b = _i64(bits, np.uint32)
    sign = (b >> 31) << 15
    e = (b >> 23) & 0xFF
    f = b & F32_FRAC_MASK

    # |x| = m * 2^E with an integer significand m < 2^24 (float32 subnormals: e = 0, no hidden bit).
    m = np.where(e == 0, f, f | 0x800000)
    E = np.where(e == 0, -149, e - 150)
    # p: exponent of the leading bit of a normal float32 (|x| in [2^p, 2^(p+1))). Float32 subnormals
    # are far below 2^-14, where only pc (below) matters, so p = -127 stands in for them.
    p = np.where(e == 0, -127, e - 127)
    # fp16 values in [2^pc, 2^(pc+1)) are the multiples of 2^(pc-10); fp16 subnormals, below 2^-14,
    # are the multiples of 2^-24, the same quantum as binade -14, hence the clamp at -14.
    pc = np.maximum(p, -14)
    # |x| / 2^(pc-10) = m / 2^s with s = (pc - 10) - E >= 13. Shifts beyond 40 are capped: m < 2^24,
    # so m / 2^s < 1/4 for every s >= 26 and the result is 0 either way.
    s = np.minimum(pc - 10 - E, 40)
    q = _round_shift_rne(m, s)  # in [0, 2048]: the rounded value is q * 2^(pc-10)
    # Encoding of q * 2^(pc-10): for q in [1024, 2047] the exponent field is pc + 15 and the
    # fraction q - 1024. q == 2048 (rounded up out of the binade) carries into the exponent
    # through the same sum. For pc == -14 and q < 1024 the sum is q itself: the subnormal
    # encoding, and a subnormal rounding up to q == 1024 lands on the smallest normal 0x0400.
    h = ((pc + 15) << 10) + q - 1024
    # At or past the encoding of 2^16 is infinity: the exact value was >= 65520 (or p >= 16).
    h = np.minimum(h, F16_INF)

    nan = (e == 0xFF) & (f != 0)
    inf = (e == 0xFF) & (f == 0)
    h = np.where(inf, F16_INF, h)
    h = np.where(nan, F16_QNAN | (f >> 13), h)
    return (sign | h).astype(np.uint16)


def f16_to_f32(bits) -> np.ndarray:
    """fp16 bit patterns -> float32 bit patterns, exact (fp16.md, path f16_to_f32)."""
    h = _i64(bits, np.uint16)
    sign = (h >> 15) << 31
    k = (h >> 10) & 0x1F
    fr = h & 0x3FF

    # Normal: value (1024 + fr) * 2^(k-25); float32 exponent field k - 15 + 127, fraction fr << 13.
    normal = ((k + 112) << 23) | (fr << 13)
    # Subnormal: value fr * 2^-24 with 1 <= fr < 1024. With L the bit length of fr, the leading bit
    # has weight 2^(L-1-24): float32 exponent field L - 25 + 127 = L + 102, and shifting fr left by
    # 24 - L puts that leading bit at position 23, the hidden bit, which the mask removes.
    L = sum(((fr >> j) != 0).astype(np.int64) for j in range(10))
    sub = ((L + 102) << 23) | ((fr << np.maximum(24 - L, 0)) & F32_FRAC_MASK)
    out = np.where(k == 0, np.where(fr == 0, 0, sub), normal)
    out = np.where(k == 0x1F, np.where(fr == 0, F32_EXP_MASK, 0x7FC00000 | (fr << 13)), out)
    return (sign | out).astype(np.uint32)


def f32_to_bf16(bits) -> np.ndarray:
    """float32 bit patterns -> bf16 bit patterns, round to nearest even (fp16.md, path f32_to_bf16).

    The bf16 values are exactly the float32 values whose low 16 bits are zero. Within one sign,
    float32 order is bit-pattern order, and the patterns hi<<16 .. (hi<<16)|0xFFFF share one
    exponent, so they are evenly spaced: the candidates are hi and hi + 1, and their exact
    midpoint is the pattern (hi<<16)|0x8000. Comparing the low half with 0x8000 is therefore the
    exact RNE decision. hi + 1 carries into the exponent where it should (0x7F7F + 1 = 0x7F80,
    infinity) and never into the sign, since the largest finite magnitude is 0x7F7FFFFF.
    """
    b = _i64(bits, np.uint32)
    hi = b >> 16
    lo = b & 0xFFFF
    up = (lo > 0x8000) | ((lo == 0x8000) & ((hi & 1) == 1))
    r = hi + up.astype(np.int64)
    nan = ((b & F32_EXP_MASK) == F32_EXP_MASK) & ((b & F32_FRAC_MASK) != 0)
    r = np.where(nan, hi | 0x0040, r)
    return r.astype(np.uint16)


def bf16_to_f32(bits) -> np.ndarray:
    """bf16 bit patterns -> float32 bit patterns: the high half, low half zero (exact)."""
    return (_i64(bits, np.uint16) << 16).astype(np.uint32)


# ---- classification and views, for generators and tests ----

def f32_is_nan(bits) -> np.ndarray:
    b = np.asarray(bits, dtype=np.uint32)
    return ((b & F32_EXP_MASK) == F32_EXP_MASK) & ((b & F32_FRAC_MASK) != 0)


def f16_is_nan(bits) -> np.ndarray:
    h = np.asarray(bits, dtype=np.uint16)
    return ((h & 0x7C00) == 0x7C00) & ((h & 0x03FF) != 0)


def bf16_is_nan(bits) -> np.ndarray:
    h = np.asarray(bits, dtype=np.uint16)
    return ((h & 0x7F80) == 0x7F80) & ((h & 0x007F) != 0)


def f32_bits(values) -> np.ndarray:
    """float32 values (anything numpy turns into float32 exactly) -> uint32 bit patterns."""
    return np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)


def f32_values(bits) -> np.ndarray:
    return np.ascontiguousarray(bits, dtype=np.uint32).view(np.float32)
