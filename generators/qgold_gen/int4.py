"""INT4 formats of shared/specs/intq.md (sections 1 and 3), written from the spec.

What is here, each on bit patterns or exact integers:

* ``quantize`` / ``dequant``: symmetric int4 codes (qmax = 7, saturation to [-8, 7]) per tensor, per
  row or per group, with a float32 or an fp16 scale. Every float32 step is one IEEE operation on numpy
  float32 scalars or element-wise arrays (no reduction whose order could matter, no 1/s).
* packed int4 (two codes a byte, element 2i in the low nibble of byte i, two's complement, the
  padding nibble of an odd K zero) and the int4 x int4 GEMM: an exact integer accumulator and the
  epilogue of intq.md section 2, evaluated element by element in the pinned order.
* the W4A16 canonical layout (``qweight`` N x K/8 uint32, nibble j of word w = code 8w + j;
  ``scales`` N x G fp16; ``zeros`` N x G or absent = 8; ``g_idx`` or k / g): validation with the
  error names of reference/spec/intq.md, decode ``(q - z) * s`` (exact in float32) and the exact GEMV
  value ``ystar`` and ``sum_abs`` (float64, correctly rounded; products proven exact, else Fractions).
* packers of the two checkpoint layouts, written from the layout descriptions: GPTQ (``qweight``
  K/8 x N packed along K, ``qzeros`` G x N/8 packed along N, v1 storing zero - 1, v2 the zero) and
  AWQ (``qweight`` K x N/8 packed along N with each word's nibble j holding column 8w + [0, 2, 4, 6,
  1, 3, 5, 7][j]). Packing and unpacking are explicit loops in index order.

Errors are raised as ``Int4Error(name, message)`` with the names of reference/spec/intq.md.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from . import fp16

F32 = np.float32
QMAX = 7
QMIN = -8
K_MAX = 131071                     # int32-accumulating products: K above this is int_k_too_large
GROUP_SIZES = (32, 64, 128)        # and g = K
SYMMETRIC_ZERO = 8                 # "uint4b8": no zeros tensor means z = 8
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)


class Int4Error(Exception):
    """A rule of the format is broken; ``name`` is the error name of errors.h."""

    def __init__(self, name: str, message: str):
        super().__init__(f"{name}: {message}")
        self.name = name


# ---------------------------------------------------------------------------------------------
# fp16 / float32 views
# ---------------------------------------------------------------------------------------------

def f16_values(bits) -> np.ndarray:
    """fp16 bit patterns -> float32 values (exact)."""
    return fp16.f32_values(fp16.f16_to_f32(np.asarray(bits, np.uint16)))


def f16_bits(values) -> np.ndarray:
    """float32 values -> fp16 bit patterns, RN16 (one rounding)."""
    return fp16.f32_to_f16(fp16.f32_bits(np.asarray(values, F32)))


# ---------------------------------------------------------------------------------------------
# Quantize / dequantize (intq.md section 1)
# ---------------------------------------------------------------------------------------------

def segments(rows: int, cols: int, granularity: str, group: int) -> list[tuple[int, int, int]]:
    """(row, start, end) of each scale in storage order; "tensor" is the single segment (-1, 0, 0)."""
    if granularity == "tensor":
        return [(-1, 0, 0)]
    if granularity == "row":
        return [(r, 0, cols) for r in range(rows)]
    if granularity == "group":
        if group < 1 or cols % group != 0:
            raise Int4Error("int_group_invalid", f"group {group} does not divide cols = {cols}")
        return [(r, s, s + group) for r in range(rows) for s in range(0, cols, group)]
    raise ValueError(f"granularity {granularity!r}")


def _slice(a: np.ndarray, seg) -> np.ndarray:
    r, s, e = seg
    return a.reshape(-1) if r < 0 else a[r, s:e]


def quantize(x, granularity: str, group: int, scale_type: str) -> tuple[np.ndarray, np.ndarray, dict]:
    """x float32 values [rows, cols] -> (codes int8 [rows, cols], scale bits [S], info).

    scale bits are uint32 (float32) or uint16 (fp16: s16 = RN16(s), codes computed with s16).
    info["presat"] holds rne(v / s) before saturation (int64; 0 where s == 0), for edge checks.
    """
    x = np.asarray(x, F32)
    if x.ndim != 2:
        raise ValueError("x must be 2-D")
    if not np.all(np.isfinite(x)):
        raise Int4Error("int_nonfinite_input", "a value to quantize is NaN or infinite")
    rows, cols = x.shape
    if rows < 1 or cols < 1:
        raise Int4Error("shape_invalid", f"rows = {rows}, cols = {cols}")
    segs = segments(rows, cols, granularity, group)
    q = np.zeros((rows, cols), np.int8)
    presat = np.zeros((rows, cols), np.int64)
    sbits = []
    with np.errstate(all="ignore"):
        for seg in segs:
            v = _slice(x, seg)
            amax = F32(np.max(np.abs(v)))           # a max: order-independent
            s = F32(0.0) if amax == 0 else F32(amax / F32(QMAX))   # one float32 division
            if scale_type == "float16":
                b = int(f16_bits([s])[0])
                s = f16_values([b])[0]
                if not np.isfinite(s):
                    raise Int4Error("int_scale_invalid", f"RN16(amax / 7) overflows fp16 (amax {amax})")
                sbits.append(b)
            elif scale_type == "float32":
                sbits.append(int(fp16.f32_bits([s])[0]))
            else:
                raise ValueError(scale_type)
            if s == 0:
                r = np.zeros(v.shape, np.int64)
            else:
                t = (v / s).astype(F32)              # element-wise IEEE division, never v * (1/s)
                assert t.dtype == F32
                r = np.rint(t).astype(np.int64)     # round half to even (exact on float32)
            codes = np.clip(r, QMIN, QMAX)
            row, st, en = seg
            if row < 0:
                q[:, :] = codes.reshape(rows, cols)
                presat[:, :] = r.reshape(rows, cols)
            else:
                q[row, st:en] = codes
                presat[row, st:en] = r
    dtype = np.uint16 if scale_type == "float16" else np.uint32
    return q, np.array(sbits, dtype), {"presat": presat}


def scale_values(scale_bits, scale_type: str) -> np.ndarray:
    if scale_type == "float16":
        return f16_values(scale_bits)
    if scale_type == "float32":
        return fp16.f32_values(np.asarray(scale_bits, np.uint32))
    raise ValueError(scale_type)


def check_scales(s: np.ndarray, what: str = "scale") -> None:
    """NaN, infinite or negative scales are int_scale_invalid (-0.0 is not negative)."""
    bad = np.isnan(s) | np.isinf(s) | (s < 0)
    if bad.any():
        i = int(np.flatnonzero(bad.reshape(-1))[0])
        raise Int4Error("int_scale_invalid", f"{what} {i} is {s.reshape(-1)[i]!r}")


def dequant(q, scale_bits, scale_type: str, granularity: str, group: int
            ) -> tuple[np.ndarray, np.ndarray]:
    """codes int8 [rows, cols] -> (float32 bits, fp16 bits): RN32((float) q * s), then RN16 of it."""
    q = np.asarray(q, np.int8)
    rows, cols = q.shape
    if rows < 1 or cols < 1:
        raise Int4Error("shape_invalid", f"rows = {rows}, cols = {cols}")
    if q.min() < QMIN or q.max() > QMAX:
        raise ValueError("int4 codes must lie in [-8, 7]")
    segs = segments(rows, cols, granularity, group)
    s = scale_values(scale_bits, scale_type)
    if s.shape != (len(segs),):
        raise Int4Error("size_mismatch", f"{s.size} scales for {len(segs)} segments")
    check_scales(s)
    out = np.zeros((rows, cols), F32)
    with np.errstate(all="ignore"):
        for i, seg in enumerate(segs):
            prod = (_slice(q, seg).astype(F32) * s[i]).astype(F32)  # one float32 rounding each
            r, st, en = seg
            if r < 0:
                out[:, :] = prod.reshape(rows, cols)
            else:
                out[r, st:en] = prod
    b32 = fp16.f32_bits(out)
    return b32, fp16.f32_to_f16(b32)


# ---------------------------------------------------------------------------------------------
# Packed int4 and the int4 x int4 GEMM (intq.md section 3, epilogue of section 2)
# ---------------------------------------------------------------------------------------------

def pack_nibbles(codes) -> np.ndarray:
    """codes [R, K] in [-8, 7] -> uint8 [R, ceil(K/2)]: element 2i low nibble, 2i+1 high nibble."""
    codes = np.asarray(codes, np.int64)
    R, K = codes.shape
    if codes.size and (codes.min() < QMIN or codes.max() > QMAX):
        raise ValueError("int4 codes must lie in [-8, 7]")
    out = np.zeros((R, (K + 1) // 2), np.uint8)
    for r in range(R):
        for k in range(K):
            nib = int(codes[r, k]) & 0xF            # two's complement in 4 bits
            if k % 2 == 0:
                out[r, k // 2] |= nib
            else:
                out[r, k // 2] |= nib << 4
    return out


def unpack_nibbles(packed, K: int, what: str = "packed") -> np.ndarray:
    """uint8 [R, ceil(K/2)] -> codes int64 [R, K]; an odd K's high padding nibble must be 0."""
    packed = np.asarray(packed, np.uint8)
    R = packed.shape[0]
    if packed.shape != (R, (K + 1) // 2):
        raise Int4Error("size_mismatch", f"{what} has shape {packed.shape}, expected "
                                         f"[{R}, {(K + 1) // 2}]")
    out = np.zeros((R, K), np.int64)
    for r in range(R):
        for k in range(K):
            byte = int(packed[r, k // 2])
            nib = byte & 0xF if k % 2 == 0 else byte >> 4
            out[r, k] = nib - 16 if nib >= 8 else nib
        if K % 2 == 1 and packed[r, K // 2] >> 4 != 0:
            raise Int4Error("int4_bad_padding", f"{what} row {r}: padding nibble is "
                                                f"{int(packed[r, K // 2]) >> 4}")
    return out


def epilogue(acc, sa, sb, bias, relu: bool) -> np.ndarray:
    """acc int [M, N]; sa [1 or M], sb [1 or N] float32 values; bias float32 values [N] or None.

    t = RN32(RN32((float) acc * sb[n]) * sa[m]); t = RN32(t + bias[n]); relu: t > 0 ? t : +0.0
    (NaN stays NaN). Returns float32 values [M, N]. Each step is one float32 operation on scalars.
    """
    acc = np.asarray(acc, np.int64)
    M, N = acc.shape
    out = np.zeros((M, N), F32)
    with np.errstate(all="ignore"):
        for m in range(M):
            for n in range(N):
                a = F32(float(int(acc[m, n])))      # exact int -> float64, then one RN32
                t = F32(a * sb[n if sb.size > 1 else 0])
                t = F32(t * sa[m if sa.size > 1 else 0])
                if bias is not None:
                    t = F32(t + bias[n])
                if relu and not np.isnan(t):
                    t = t if t > 0 else F32(0.0)
                out[m, n] = t
    return out


def gemm_packed(A_packed, B_packed, M: int, N: int, K: int, sa_bits, sb_bits,
                bias_bits=None, bias_type: str = "none", relu: bool = False):
    """The int4 x int4 GEMM: -> (acc int32 [M, N], float32 bits [M, N], fp16 bits [M, N])."""
    if M < 1 or N < 1 or K < 1:
        raise Int4Error("shape_invalid", f"M = {M}, N = {N}, K = {K}")
    if K > K_MAX:
        raise Int4Error("int_k_too_large", f"K = {K} > {K_MAX}")
    sa = fp16.f32_values(np.asarray(sa_bits, np.uint32))
    sb = fp16.f32_values(np.asarray(sb_bits, np.uint32))
    if sa.ndim != 1 or sa.size not in (1, M) or sb.ndim != 1 or sb.size not in (1, N):
        raise Int4Error("size_mismatch", f"sa has {sa.size}, sb {sb.size} entries")
    bias = None
    if bias_type != "none":
        bias = (f16_values(bias_bits) if bias_type == "float16"
                else fp16.f32_values(np.asarray(bias_bits, np.uint32)))
        if bias.shape != (N,):
            raise Int4Error("size_mismatch", f"bias has shape {bias.shape}, expected [{N}]")
    for name, arr, rows in (("A_packed", A_packed, M), ("B_packed", B_packed, N)):
        if np.shape(arr) != (rows, (K + 1) // 2):
            raise Int4Error("size_mismatch", f"{name} has shape {np.shape(arr)}, expected "
                                             f"[{rows}, {(K + 1) // 2}]")
    A = unpack_nibbles(A_packed, K, "A_packed")
    B = unpack_nibbles(B_packed, K, "B_packed")
    if not (np.all(np.isfinite(sa)) and np.all(np.isfinite(sb))):
        raise Int4Error("int_nonfinite_input", "a scale of the product is NaN or infinite")
    acc = A @ B.T                                  # exact int64 sums: order cannot matter
    assert np.abs(acc).max() <= 2**31 - 1
    y = epilogue(acc, sa, sb, bias, relu)
    b32 = fp16.f32_bits(y)
    return acc.astype(np.int32), b32, fp16.f32_to_f16(b32)


# ---------------------------------------------------------------------------------------------
# W4A16 canonical layout (intq.md section 3)
# ---------------------------------------------------------------------------------------------

def check_group(K: int, g: int) -> int:
    """G = K / g for a group size in {32, 64, 128, K} dividing K; else int_group_invalid."""
    if g <= 0 or (g not in GROUP_SIZES and g != K) or K % g != 0:
        raise Int4Error("int_group_invalid", f"group size {g} with K = {K} (allowed: 32, 64, "
                                             "128 or K, dividing K)")
    return K // g


def check_g_idx(g_idx, K: int, g: int) -> None:
    """Every entry in [0, G) and every group holding exactly g columns (k / g permuted)."""
    G = K // g
    gi = np.asarray(g_idx, np.int64)
    bad = (gi < 0) | (gi >= G)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise Int4Error("int4_g_idx_invalid", f"g_idx[{k}] = {int(gi[k])} outside 0..{G - 1}")
    counts = np.bincount(gi, minlength=G)
    if np.any(counts != g):
        grp = int(np.flatnonzero(counts != g)[0])
        raise Int4Error("int4_g_idx_invalid", f"group {grp} holds {int(counts[grp])} columns, "
                                              f"not g = {g}")


def pack_canonical(q) -> np.ndarray:
    """codes [N, K] in 0..15 -> qweight uint32 [N, K/8]: nibble j of word w is code 8w + j."""
    q = np.asarray(q, np.int64)
    N, K = q.shape
    assert K % 8 == 0 and (q.size == 0 or (q.min() >= 0 and q.max() <= 15))
    out = np.zeros((N, K // 8), np.uint32)
    for n in range(N):
        for w in range(K // 8):
            word = 0
            for j in range(8):
                word |= int(q[n, 8 * w + j]) << (4 * j)
            out[n, w] = word
    return out


def unpack_canonical(qweight, K: int) -> np.ndarray:
    qweight = np.asarray(qweight, np.uint32)
    N = qweight.shape[0]
    out = np.zeros((N, K), np.int64)
    for n in range(N):
        for w in range(K // 8):
            word = int(qweight[n, w])
            for j in range(8):
                out[n, 8 * w + j] = (word >> (4 * j)) & 0xF
    return out


def validate_w4a16(N: int, K: int, g: int, qweight, scales, zeros=None, g_idx=None) -> None:
    """The rules of the canonical layout, in this order: shape, group, sizes, scales, zeros, g_idx."""
    if N < 1 or K < 1 or K % 8 != 0:
        raise Int4Error("shape_invalid", f"N = {N}, K = {K} (K must be a positive multiple of 8)")
    G = check_group(K, g)
    want = {"qweight": (N, K // 8), "scales": (N, G), "zeros": (N, G), "g_idx": (K,)}
    for name, arr in (("qweight", qweight), ("scales", scales), ("zeros", zeros), ("g_idx", g_idx)):
        if arr is not None and np.shape(arr) != want[name]:
            raise Int4Error("size_mismatch", f"{name} has shape {np.shape(arr)}, expected "
                                             f"{list(want[name])}")
    check_scales(f16_values(scales), "scale")
    if zeros is not None and np.asarray(zeros).size and np.asarray(zeros).max() > 15:
        raise Int4Error("int4_zero_out_of_range", f"zero {int(np.asarray(zeros).max())} > 15")
    if g_idx is not None:
        check_g_idx(g_idx, K, g)


def group_of_column(K: int, g: int, g_idx=None) -> np.ndarray:
    return np.arange(K, dtype=np.int64) // g if g_idx is None else np.asarray(g_idx, np.int64)


def decode_w4a16(N: int, K: int, g: int, qweight, scales, zeros=None, g_idx=None) -> np.ndarray:
    """w[n][k] = (float)(q - z) * s (float32 values [N, K]); exact, asserted."""
    validate_w4a16(N, K, g, qweight, scales, zeros, g_idx)
    q = unpack_canonical(qweight, K)
    s = f16_values(scales)
    z = (np.full(np.shape(scales), SYMMETRIC_ZERO, np.int64) if zeros is None
         else np.asarray(zeros, np.int64))
    Gk = group_of_column(K, g, g_idx)
    d = q - z[:, Gk]                                   # integers in [-15, 15]
    sk = s[:, Gk]
    w = (d.astype(F32) * sk).astype(F32)
    # exactness: the float64 product of the same operands has no rounding (4 + 11 bits) either
    assert np.array_equal(w.astype(np.float64), d.astype(np.float64) * sk.astype(np.float64))
    return w


# ---------------------------------------------------------------------------------------------
# Exact GEMV value
# ---------------------------------------------------------------------------------------------

def significant_bits(v: np.ndarray) -> np.ndarray:
    """Number of significant bits of each finite float64 (0 for zero)."""
    m, _ = np.frexp(np.abs(v))
    ints = (m * 2.0**53).astype(np.int64)              # exact: m in [0.5, 1) has 53 bits
    bits = np.zeros(v.shape, np.int64)
    nz = ints != 0
    t = ints[nz]
    tz = np.zeros(t.shape, np.int64)
    for _ in range(53):                                # trailing zeros, one bit at a time
        zero = (t & 1) == 0
        tz += zero
        t = np.where(zero, t >> 1, t)
    bits[nz] = 53 - tz
    return bits


def products_exact(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Mask: is the float64 product a*b exact? (finite operands; significands add up to <= 53 bits
    and the product is zero only with a zero operand and above the float64 normal range's bottom)."""
    p = a * b
    ok = significant_bits(a) + significant_bits(b) <= 53
    zero_ok = (a == 0) | (b == 0)
    ok &= zero_ok | (np.abs(p) >= 2.0**-1022)
    return ok


def exact_dot(w: np.ndarray, x: np.ndarray) -> tuple[float, float]:
    """(sum_k w_k x_k, sum_k |w_k x_k|) correctly rounded to float64; IEEE rules with inf/NaN."""
    w = np.asarray(w, np.float64)
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        p = w * x
    if not (np.all(np.isfinite(w)) and np.all(np.isfinite(x))):
        nan = bool(np.isnan(p).any())
        pos, neg = bool(np.isposinf(p).any()), bool(np.isneginf(p).any())
        total = math.nan if nan or (pos and neg) else (math.inf if pos else
                                                       (-math.inf if neg else None))
        if total is not None:
            return total, (math.nan if nan else math.inf)
    if np.all(products_exact(w, x)):
        return math.fsum(p.tolist()), math.fsum(np.abs(p).tolist())
    s = sum((Fraction(float(a)) * Fraction(float(b)) for a, b in zip(w, x)), Fraction(0))
    sa = sum((abs(Fraction(float(a)) * Fraction(float(b))) for a, b in zip(w, x)), Fraction(0))
    return float(s), float(sa)                         # Fraction -> float rounds correctly


def gemv_w4a16(N: int, K: int, g: int, qweight, scales, zeros, g_idx, x16
               ) -> tuple[np.ndarray, np.ndarray]:
    """Validate the layout and x fp16 [batch, K] (batch >= 1), then the exact ystar, sum_abs."""
    w = decode_w4a16(N, K, g, qweight, scales, zeros, g_idx)
    if np.ndim(x16) != 2 or np.shape(x16)[0] < 1 or np.shape(x16)[1] != K:
        raise Int4Error("size_mismatch", f"x has shape {np.shape(x16)}, expected [batch, {K}]")
    return gemv_exact(w, x16)


def gemv_exact(w: np.ndarray, x16) -> tuple[np.ndarray, np.ndarray]:
    """ystar, sum_abs float64 [batch, N] of decoded weights w [N, K] and fp16 x [batch, K]."""
    x = f16_values(x16).astype(np.float64)
    wd = np.asarray(w, F32).astype(np.float64)
    B, N = x.shape[0], wd.shape[0]
    ys = np.zeros((B, N), np.float64)
    sa = np.zeros((B, N), np.float64)
    for b in range(B):
        for n in range(N):
            ys[b, n], sa[b, n] = exact_dot(wd[n], x[b])
    return ys, sa


# ---------------------------------------------------------------------------------------------
# Checkpoint layouts: GPTQ and AWQ packers (and readers for the generator's own round trip)
# ---------------------------------------------------------------------------------------------

def _as_int32(words_u32: np.ndarray) -> np.ndarray:
    """uint32 words -> the int32 the checkpoint stores (same bits, two's complement)."""
    return np.ascontiguousarray(words_u32, np.uint32).view(np.int32)


def gptq_stored_zeros(z_eff, version: int) -> np.ndarray:
    """Effective zeros -> the values a GPTQ checkpoint stores: v1 zero - 1, v2 the zero."""
    z = np.asarray(z_eff, np.int64)
    if version == 1:
        assert z.min() >= 1, "a v1 checkpoint cannot store an effective zero of 0"
        return z - 1
    if version == 2:
        return z
    raise ValueError(version)


def gptq_pack(q, stored_zeros, scales16) -> dict:
    """GPTQ layout from codes q [N, K] (0..15), stored zeros [N, G] (0..15), fp16 scales [N, G]:
    qweight int32 [K/8, N], row i holding k = 8i..8i+7 at bits 4j; qzeros int32 [G, N/8], word w
    of group row holding column 8w + j at bits 4j; scales uint16 [G, N]."""
    q = np.asarray(q, np.int64)
    zs = np.asarray(stored_zeros, np.int64)
    N, K = q.shape
    G = zs.shape[1]
    assert K % 8 == 0 and N % 8 == 0 and zs.min() >= 0 and zs.max() <= 15
    qweight = np.zeros((K // 8, N), np.uint32)
    for i in range(K // 8):
        for n in range(N):
            word = 0
            for j in range(8):
                word |= int(q[n, 8 * i + j]) << (4 * j)
            qweight[i, n] = word
    qzeros = np.zeros((G, N // 8), np.uint32)
    for gr in range(G):
        for w in range(N // 8):
            word = 0
            for j in range(8):
                word |= int(zs[8 * w + j, gr]) << (4 * j)
            qzeros[gr, w] = word
    scales = np.zeros((G, N), np.uint16)
    for gr in range(G):
        for n in range(N):
            scales[gr, n] = scales16[n][gr]
    return {"src_qweight": _as_int32(qweight), "src_qzeros": _as_int32(qzeros),
            "src_scales": scales}


def gptq_read(src: dict, version: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Generator-side reader of the GPTQ layout (for the round trip): (q [N,K], z_eff [N,G], s)."""
    qw = src["src_qweight"].view(np.uint32)
    qz = src["src_qzeros"].view(np.uint32)
    K8, N = qw.shape
    G = qz.shape[0]
    q = np.zeros((N, 8 * K8), np.int64)
    for i in range(K8):
        for n in range(N):
            for j in range(8):
                q[n, 8 * i + j] = (int(qw[i, n]) >> (4 * j)) & 0xF
    z = np.zeros((N, G), np.int64)
    for gr in range(G):
        for w in range(N // 8):
            for j in range(8):
                z[8 * w + j, gr] = ((int(qz[gr, w]) >> (4 * j)) & 0xF) + (1 if version == 1 else 0)
    if z.size and z.max() > 15:
        raise Int4Error("int4_zero_out_of_range", f"effective zero {int(z.max())} > 15")
    return q, z, src["src_scales"].T.copy()


def awq_pack(q, zeros, scales16) -> dict:
    """AWQ layout from codes q [N, K], zeros [N, G] (stored as is), fp16 scales [N, G]:
    qweight int32 [K, N/8] with nibble j of word w holding column 8w + AWQ_ORDER[j]; qzeros int32
    [G, N/8] interleaved the same way; scales uint16 [G, N]."""
    q = np.asarray(q, np.int64)
    z = np.asarray(zeros, np.int64)
    N, K = q.shape
    G = z.shape[1]
    assert N % 8 == 0 and z.min() >= 0 and z.max() <= 15
    qweight = np.zeros((K, N // 8), np.uint32)
    for k in range(K):
        for w in range(N // 8):
            word = 0
            for j in range(8):
                word |= int(q[8 * w + AWQ_ORDER[j], k]) << (4 * j)
            qweight[k, w] = word
    qzeros = np.zeros((G, N // 8), np.uint32)
    for gr in range(G):
        for w in range(N // 8):
            word = 0
            for j in range(8):
                word |= int(z[8 * w + AWQ_ORDER[j], gr]) << (4 * j)
            qzeros[gr, w] = word
    scales = np.zeros((G, N), np.uint16)
    for gr in range(G):
        for n in range(N):
            scales[gr, n] = scales16[n][gr]
    return {"src_qweight": _as_int32(qweight), "src_qzeros": _as_int32(qzeros),
            "src_scales": scales}


def awq_read(src: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Generator-side reader of the AWQ layout (for the round trip)."""
    qw = src["src_qweight"].view(np.uint32)
    qz = src["src_qzeros"].view(np.uint32)
    K, N8 = qw.shape
    G = qz.shape[0]
    q = np.zeros((8 * N8, K), np.int64)
    for k in range(K):
        for w in range(N8):
            for j in range(8):
                q[8 * w + AWQ_ORDER[j], k] = (int(qw[k, w]) >> (4 * j)) & 0xF
    z = np.zeros((8 * N8, G), np.int64)
    for gr in range(G):
        for w in range(N8):
            for j in range(8):
                z[8 * w + AWQ_ORDER[j], gr] = (int(qz[gr, w]) >> (4 * j)) & 0xF
    return q, z, src["src_scales"].T.copy()


def check_import(kind: str, N: int, K: int, g: int, src: dict, g_idx=None, version: int = 2) -> None:
    """The rules an importer checks, in this order: version, shape, group, sizes, scales, zeros,
    g_idx (kind "gptq" or "awq"; src holds src_qweight, src_qzeros, src_scales)."""
    if kind == "gptq" and version not in (1, 2):
        raise Int4Error("argument_invalid", f"GPTQ version {version} (1 or 2)")
    if N < 1 or K < 1 or K % 8 != 0 or N % 8 != 0:
        raise Int4Error("shape_invalid", f"N = {N}, K = {K} (both positive multiples of 8)")
    G = check_group(K, g)
    want = {"src_qweight": (K // 8, N) if kind == "gptq" else (K, N // 8),
            "src_qzeros": (G, N // 8), "src_scales": (G, N)}
    for name, shape in want.items():
        if np.shape(src[name]) != shape:
            raise Int4Error("size_mismatch", f"{name} has shape {np.shape(src[name])}, expected "
                                             f"{list(shape)}")
    if g_idx is not None and np.shape(g_idx) != (K,):
        raise Int4Error("size_mismatch", f"g_idx has shape {np.shape(g_idx)}, expected [{K}]")
    check_scales(f16_values(src["src_scales"]), "scale")
    if kind == "gptq":
        _, z, _ = gptq_read(src, version)           # raises int4_zero_out_of_range (v1 15 + 1)
    if g_idx is not None:
        check_g_idx(g_idx, K, g)
