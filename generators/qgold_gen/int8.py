"""INT8 quantize, dequantize, W8A8 GEMM with its pinned epilogue, and the exact W8A16 product.

Written from shared/specs/intq.md sections 1 and 2 and reference/spec/intq.md (schema, errors), one
IEEE operation per line, elements visited in index order:

Quantize (per tensor, per row, or per group of g consecutive elements of a row; qmax = 127)
  amax = max |v| over the block                  NaN or inf anywhere: int_nonfinite_input
  s    = amax == 0 ? 0 : RN32(amax / 127)         float32 division
  fp16 scale: s = RN16(s), and the codes use that value (an s that rounds to fp16 inf cannot be
              stored: int_scale_invalid)
  q    = s == 0 ? 0 : sat(rne(RN32(v / s)))       a true division, never v * RN32(1 / s)
  sat clamps to [-128, 127]; rne rounds half to even.
Dequantize
  y32 = RN32((float) q * s), y16 = RN16(y32)       two roundings for fp16 output, pinned
W8A8 (A [M, K], B [N, K] int8, sa [1 or M], sb [1 or N] float32, bias float32 / fp16 / none)
  acc = sum_k A[m][k] B[n][k]                      exact: |acc| <= 131071 * 2^14 < 2^31
  t   = RN32(RN32(RN32_from_int(acc) * sb[n]) * sa[m])
  t   = RN32(t + bias[n])                          when a bias is given (fp16 bias: its exact value)
  t   = relu ? (t > 0 ? t : +0.0) : t              NaN stays NaN
  y16 = RN16(t)
W8A16 (B [N, K] int8, sb [N] float32 or fp16, X [M, K] fp16)
  ystar[m][n] = sum_k (sb[n] B[n][k]) X[m][k], the exact sum correctly rounded to float64;
  sum_abs the same over |term|. Each term is computed exactly (checked: its significand must fit
  53 bits, else the term is kept as a Fraction), and the sum of exact float64 terms is math.fsum,
  which is correctly rounded; with Fraction terms the whole sum is a Fraction rounded once.

Float32 steps use numpy float32 scalars (each operation on two float32 operands is rounded once to
float32); fp16 rounding is numpy's float32 -> float16 conversion (round to nearest even, subnormals
kept, overflow to inf). Integer sums use numpy int64, whose result does not depend on the order.

Validation names the error of reference/spec/intq.md: non-finite values to quantize and non-finite
scales of a product (sa, sb) are int_nonfinite_input; a negative scale anywhere, and a
dequantization scale that is NaN or infinite, int_scale_invalid; K > 131071 int_k_too_large; a
group size that is not one of 32, 64, 128 or does not divide cols int_group_invalid; a zero
dimension shape_invalid; arrays whose lengths disagree with the shape size_mismatch.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

QMAX = 127
QMIN = -128
K_MAX = 131071                 # 131071 * 128 * 128 = 2^31 - 2^14 <= INT32_MAX
GROUP_SIZES = (32, 64, 128)
GRANULARITIES = ("tensor", "row", "group")
F32 = np.float32
F16 = np.float16


class Int8Error(Exception):
    """A rejected input; `name` is the error name of errors.h."""

    def __init__(self, name: str, message: str):
        super().__init__(f"{name}: {message}")
        self.name = name


# ---------------------------------------------------------------------------------------------
# Scalar primitives
# ---------------------------------------------------------------------------------------------

def rn16(x) -> np.float16:
    """float32 -> fp16, round to nearest even (numpy's conversion)."""
    with np.errstate(over="ignore"):
        return F16(F32(x))


def f16_value(x) -> F32:
    """An fp16 value as the float32 holding it exactly."""
    return F32(F16(x))


def rne(x: float) -> int:
    """Round a finite float to the nearest integer, halves to even. x - floor(x) is exact."""
    f = math.floor(x)
    d = x - f
    if d > 0.5:
        return f + 1
    if d < 0.5:
        return f
    return f + (f & 1)


def sat8(n: int) -> int:
    return QMIN if n < QMIN else QMAX if n > QMAX else n


def f32_of_int(n: int) -> F32:
    """(float) n for an int32 n, round to nearest even: n is exact in float64, then one rounding."""
    return F32(float(n))


# ---------------------------------------------------------------------------------------------
# Quantize / dequantize
# ---------------------------------------------------------------------------------------------

def scale_count(rows: int, cols: int, granularity: str, group: int) -> int:
    return {"tensor": 1, "row": rows, "group": rows * (cols // group) if group else 0}[granularity]


def check_layout(rows: int, cols: int, granularity: str, group: int) -> None:
    if granularity not in GRANULARITIES:
        raise Int8Error("argument_invalid", f"granularity {granularity!r}")
    if rows <= 0 or cols <= 0:
        raise Int8Error("shape_invalid", f"rows = {rows}, cols = {cols}: a dimension is zero")
    if granularity == "group":
        if group not in GROUP_SIZES or cols % group:
            raise Int8Error("int_group_invalid", f"group {group} with cols {cols}")
    elif group != 0:
        raise Int8Error("int_group_invalid", f"group {group} given with granularity {granularity}")


def blocks(rows: int, cols: int, granularity: str, group: int):
    """(scale index, [(r, c), ...]) for every scale, in scale order; elements in index order."""
    if granularity == "tensor":
        yield 0, [(r, c) for r in range(rows) for c in range(cols)]
    elif granularity == "row":
        for r in range(rows):
            yield r, [(r, c) for c in range(cols)]
    else:
        per_row = cols // group
        for r in range(rows):
            for j in range(per_row):
                yield r * per_row + j, [(r, c) for c in range(j * group, (j + 1) * group)]


def quantize(x, granularity: str, group: int, scale_type: str):
    """x: float32 values [rows, cols] (fp16 sources already widened exactly).

    Returns (q int8 [rows, cols], scales float32 [S]); with scale_type "float16" the scales are
    fp16 values (held exactly in float32).
    """
    x = np.asarray(x, dtype=F32)
    rows, cols = x.shape
    check_layout(rows, cols, granularity, group)
    if scale_type not in ("float32", "float16"):
        raise Int8Error("argument_invalid", f"scale_type {scale_type!r}")
    for r in range(rows):
        for c in range(cols):
            if not math.isfinite(float(x[r, c])):
                raise Int8Error("int_nonfinite_input", f"x[{r}][{c}] = {x[r, c]}")
    q = np.zeros((rows, cols), np.int8)
    scales = np.zeros(scale_count(rows, cols, granularity, group), F32)
    with np.errstate(all="ignore"):
        for i, elems in blocks(rows, cols, granularity, group):
            amax = F32(0.0)
            for r, c in elems:
                a = abs(x[r, c])
                if a > amax:
                    amax = a
            s = F32(0.0) if amax == 0 else F32(amax / F32(QMAX))
            if scale_type == "float16":
                s = f16_value(rn16(s))
                if math.isinf(float(s)):
                    raise Int8Error("int_scale_invalid",
                                    f"scale {i}: amax / 127 = {float(amax) / 127:g} overflows fp16")
            scales[i] = s
            for r, c in elems:
                q[r, c] = 0 if s == 0 else sat8(rne(float(F32(x[r, c] / s))))
    return q, scales


def check_scales_dequant(scales) -> None:
    for i, s in enumerate(np.asarray(scales, F32)):
        if math.isnan(float(s)) or math.isinf(float(s)) or float(s) < 0:
            raise Int8Error("int_scale_invalid", f"scale {i} = {s}")


def dequant(q, scales, granularity: str, group: int):
    """(y32 float32 [rows, cols], y16 float16 [rows, cols]) from codes and float32-held scales."""
    q = np.asarray(q, dtype=np.int8)
    scales = np.asarray(scales, dtype=F32)
    rows, cols = q.shape
    check_layout(rows, cols, granularity, group)
    if scales.shape != (scale_count(rows, cols, granularity, group),):
        raise Int8Error("size_mismatch", f"{scales.shape[0]} scales for {granularity}")
    check_scales_dequant(scales)
    y32 = np.zeros((rows, cols), F32)
    y16 = np.zeros((rows, cols), F16)
    with np.errstate(all="ignore"):
        for i, elems in blocks(rows, cols, granularity, group):
            s = scales[i]
            for r, c in elems:
                y32[r, c] = F32(F32(int(q[r, c])) * s)
                y16[r, c] = rn16(y32[r, c])
    return y32, y16


# ---------------------------------------------------------------------------------------------
# W8A8
# ---------------------------------------------------------------------------------------------

def accumulate(A, B) -> np.ndarray:
    """acc [M, N] int32 = A @ B^T, exact (int64 sums, checked to fit int32)."""
    A = np.asarray(A, np.int8).astype(np.int64)
    B = np.asarray(B, np.int8).astype(np.int64)
    acc = A @ B.T
    assert acc.size == 0 or (int(acc.max()) <= 2**31 - 1 and int(acc.min()) >= -2**31)
    return acc.astype(np.int32)


def epilogue(acc: int, sb, sa, bias, relu: bool) -> F32:
    """One output of section 2's pinned epilogue; bias None or the bias value as a float32."""
    with np.errstate(all="ignore"):
        t = F32(F32(f32_of_int(acc) * F32(sb)) * F32(sa))
        if bias is not None:
            t = F32(t + F32(bias))
        if relu and not math.isnan(float(t)) and not t > 0:
            t = F32(0.0)
    return t


def check_w8a8(A, B, sa, sb, bias) -> tuple[int, int, int]:
    A = np.asarray(A)
    B = np.asarray(B)
    M, K = A.shape
    N, KB = B.shape
    if M <= 0 or N <= 0 or K <= 0:
        raise Int8Error("shape_invalid", f"M = {M}, N = {N}, K = {K}")
    if KB != K:
        raise Int8Error("size_mismatch", f"A has K = {K}, B has K = {KB}")
    if K > K_MAX:
        raise Int8Error("int_k_too_large", f"K = {K} > {K_MAX}")
    if len(sa) not in (1, M) or len(sb) not in (1, N):
        raise Int8Error("size_mismatch", f"{len(sa)} sa for M = {M}, {len(sb)} sb for N = {N}")
    if bias is not None and len(bias) != N:
        raise Int8Error("size_mismatch", f"{len(bias)} bias values for N = {N}")
    for what, v in (("sa", sa), ("sb", sb)):
        for i, s in enumerate(np.asarray(v, F32)):
            if not math.isfinite(float(s)):
                raise Int8Error("int_nonfinite_input", f"{what}[{i}] = {s}")
            if float(s) < 0:
                raise Int8Error("int_scale_invalid", f"{what}[{i}] = {s} is negative")
    return M, N, K


def w8a8(A, B, sa, sb, bias=None, relu: bool = False):
    """(acc int32 [M, N], y32 float32 [M, N], y16 float16 [M, N]); bias as float32 values."""
    M, N, K = check_w8a8(A, B, sa, sb, bias)
    sa = np.asarray(sa, F32)
    sb = np.asarray(sb, F32)
    acc = accumulate(A, B)
    y32 = np.zeros((M, N), F32)
    y16 = np.zeros((M, N), F16)
    for m in range(M):
        for n in range(N):
            t = epilogue(int(acc[m, n]), sb[n if len(sb) > 1 else 0], sa[m if len(sa) > 1 else 0],
                         None if bias is None else bias[n], relu)
            y32[m, n] = t
            y16[m, n] = rn16(t)
    return acc, y32, y16


# ---------------------------------------------------------------------------------------------
# W8A16: exact products and sums
# ---------------------------------------------------------------------------------------------

def _mant_exp(v: float) -> tuple[int, int]:
    """v = m * 2^e with an odd (or zero) integer m; v finite."""
    if v == 0:
        return 0, 0
    fr = Fraction(v)
    num, den = fr.numerator, fr.denominator
    e = 0
    while num % 2 == 0:
        num //= 2
        e += 1
    e -= den.bit_length() - 1      # den is a power of two
    return num, e


def exact_term(a: float, b: float, c: float):
    """a * b * c exactly: a float64 when the product fits 53 bits and float64's exponent range,
    else a Fraction. Non-finite operands follow IEEE (a float inf or NaN)."""
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return a * b * c
    (ma, ea), (mb, eb), (mc, ec) = _mant_exp(a), _mant_exp(b), _mant_exp(c)
    m = ma * mb * mc
    e = ea + eb + ec
    if m == 0:
        return 0.0           # the sign of an exact zero term does not change the exact sum
    if abs(m) < 2**53 and -1074 <= e and e + abs(m).bit_length() <= 1024:
        v = math.ldexp(float(m), e)
        assert Fraction(v) == Fraction(m) * Fraction(2) ** e
        return v
    return Fraction(m) * Fraction(2) ** e


def exact_sum(terms) -> tuple[float, float]:
    """(sum, sum of |.|) of exact terms, each correctly rounded once to float64; IEEE specials."""
    floats = [t for t in terms if isinstance(t, float)]
    if any(not math.isfinite(t) for t in floats):
        nan = any(math.isnan(t) for t in floats)
        pos = any(t == math.inf for t in floats)
        neg = any(t == -math.inf for t in floats)
        total = math.nan if nan or (pos and neg) else (math.inf if pos else -math.inf)
        return total, (math.nan if nan else math.inf)
    if all(isinstance(t, float) for t in terms):
        return math.fsum(terms), math.fsum(abs(t) for t in terms)
    total = sum((Fraction(t) for t in terms), Fraction(0))
    absolute = sum((abs(Fraction(t)) for t in terms), Fraction(0))
    return float(total), float(absolute)   # Fraction -> float rounds to nearest even, once


def check_w8a16(B, sb, X) -> tuple[int, int, int]:
    B = np.asarray(B)
    X = np.asarray(X)
    N, K = B.shape
    M, KX = X.shape
    if M <= 0 or N <= 0 or K <= 0:
        raise Int8Error("shape_invalid", f"M = {M}, N = {N}, K = {K}")
    if KX != K:
        raise Int8Error("size_mismatch", f"X has K = {KX}, B has K = {K}")
    if len(sb) != N:
        raise Int8Error("size_mismatch", f"{len(sb)} sb for N = {N}")
    for i, s in enumerate(np.asarray(sb, F32)):
        if not math.isfinite(float(s)):
            raise Int8Error("int_nonfinite_input", f"sb[{i}] = {s}")
        if float(s) < 0:
            raise Int8Error("int_scale_invalid", f"sb[{i}] = {s} is negative")
    return M, N, K


def w8a16_exact(B, sb, X):
    """(ystar, sum_abs) float64 [M, N]; sb float32-held values, X fp16 values [M, K]."""
    M, N, K = check_w8a16(B, sb, X)
    B = np.asarray(B, np.int8)
    sb = np.asarray(sb, F32)
    X = np.asarray(X, F16)
    ystar = np.zeros((M, N), np.float64)
    sabs = np.zeros((M, N), np.float64)
    for m in range(M):
        xs = [float(X[m, k]) for k in range(K)]
        for n in range(N):
            s = float(sb[n])
            terms = [exact_term(s, float(int(B[n, k])), xs[k]) for k in range(K)]
            ystar[m, n], sabs[m, n] = exact_sum(terms)
    return ystar, sabs
