"""GGUF K-quants Q4_K, Q5_K, Q6_K, Q8_K, written from the kquants spec and its research notes.

Normative text: shared/specs/kquants.md (layouts, dequantization, paths); every quantizer step, its
order and its strict/non-strict comparisons: shared/research/kquants.md sections 1 and 2.

Arithmetic
  Everything the formats compute in float32 is computed here with numpy float32 element-wise
  operations (+, -, *, /, sqrt, abs), each of which is one IEEE rounding, never contracted into an
  FMA. Sums are explicit loops over the element index (an accumulator array updated once per index),
  so each sum is evaluated left to right, exactly as the reference loop does; no numpy reduction
  is ever applied to floats (integer sums, which are exact in any order, use .sum()).
  Vectorization runs *across* independent blocks or sub-blocks (row k of every array belongs to one
  group), and operations with no order to respect (one rounding per element: nearest_int, clamps,
  products, differences) act on whole [groups, n] matrices; every element still sees exactly the
  operation sequence of the scalar reference.

  nearest_int(f) is the reference's bit trick: the float32 sum f + 12582912 (1.5 * 2^23), whose low
  23 bits minus 2^22 are round-half-to-even(f) for |f| <= 4194303; outside that range the same bit
  formula applies (its result is then clamped). For a NaN argument the result would be the host's
  NaN payload, so this module raises QuantizerDomainError instead: no fixture depends on it.

NaN bit patterns
  Dequantization is total: inf and NaN in d/dmin are legal inputs and the outputs follow IEEE. IEEE
  leaves the sign and payload of a NaN *result* open, and real hardware differs (x86 SSE: a NaN
  operand propagates, the first one if both are NaN, and an invalid operation gives 0xFFC00000;
  AArch64: the same propagation, but 0x7FC00000 for an invalid operation; CUDA: always
  0x7FFFFFFF). numpy inherits the host's rule, so this module does not rely on it: every float32
  operation of a dequantization passes through _nan_rule, which writes the x86 SSE result
  explicitly. The fixtures are then the same on any host (regen --check stays portable) and match a
  C reference on x86-64 bit for bit. Comparators should still accept any NaN where the expected
  value is a NaN (fixture attribute nan_sign = "any").

Exact references
  ystar and sum_abs are the correctly rounded float64 values of the exact sums: every product is
  written as one or two float64 terms that hold it exactly, and math.fsum returns the correctly
  rounded sum of its float64 inputs. Non-finite products follow IEEE (any NaN, or +inf with -inf,
  gives NaN; otherwise the infinity).
"""

from __future__ import annotations

import math

import numpy as np

from . import fp16

QK_K = 256
TYPES = ("q4_k", "q5_k", "q6_k", "q8_k")
WEIGHT_TYPES = ("q4_k", "q5_k", "q6_k")
BLOCK_BYTES = {"q4_k": 144, "q5_k": 176, "q6_k": 210, "q8_k": 292}
Q8K_BYTES = BLOCK_BYTES["q8_k"]
GEMV_MAX_BATCH = 16

F32 = np.float32
MAGIC = F32(12582912.0)                 # 1.5 * 2^23
GROUP_MAX_EPS = F32(1e-15)              # the reference's 1e-15f
X86_DEFAULT_NAN = np.uint32(0xFFC00000)  # the "QNaN floating-point indefinite"
F32_QUIET_BIT = np.uint32(0x00400000)


class KQuantError(ValueError):
    """Invalid input to a K-quant path; `name` is the error name the fixtures record."""

    def __init__(self, name: str, message: str):
        super().__init__(f"{name}: {message}")
        self.name = name


class QuantizerDomainError(ArithmeticError):
    """The reference quantizer is undefined for this input (nearest_int out of its domain)."""


def _check_type(qtype: str) -> None:
    if qtype not in TYPES:
        raise ValueError(f"unknown K-quant type {qtype!r} (expected one of {', '.join(TYPES)})")


def _check_shape(qtype: str, rows: int, cols: int, nbytes: int) -> None:
    """Validation in the order of reference/spec/kquants.md: K, then rows, then the buffer length."""
    if cols <= 0 or cols % QK_K:
        raise KQuantError("kq_cols_not_multiple", f"cols = {cols} is not a positive multiple of 256")
    if rows <= 0:
        raise KQuantError("shape_invalid", f"rows = {rows}")
    want = rows * (cols // QK_K) * BLOCK_BYTES[qtype]
    if nbytes != want:
        raise KQuantError("kq_size_mismatch",
                          f"{nbytes} bytes given, rows * cols/256 * {BLOCK_BYTES[qtype]} = {want}")


def _as_bytes(blocks) -> np.ndarray:
    if isinstance(blocks, (bytes, bytearray, memoryview)):
        return np.frombuffer(bytes(blocks), dtype=np.uint8)
    a = np.asarray(blocks)
    if a.dtype != np.uint8:
        raise TypeError(f"blocks must be bytes or a uint8 array, not {a.dtype}")
    return np.ascontiguousarray(a).reshape(-1)


# ---------------------------------------------------------------------------------------------
# float32 primitives
# ---------------------------------------------------------------------------------------------

def nearest_int(f) -> np.ndarray:
    """The low 23 bits of the float32 sum f + 1.5*2^23, minus 2^22, as int64.

    Round half to even for |f| <= 4194303; outside that range (inf included) the same bit formula,
    which the quantizers then clamp. A NaN argument is refused: the bits of NaN + 1.5*2^23 are the
    NaN's payload, which depends on the host (module docstring).
    """
    f = np.asarray(f, dtype=F32)
    if np.isnan(f).any():
        raise QuantizerDomainError("nearest_int of a NaN: the reference's result depends on the "
                                   "host's NaN payload")
    with np.errstate(over="ignore"):
        bits = np.ascontiguousarray(f + MAGIC).view(np.int32).astype(np.int64)
    return (bits & 0x7FFFFF) - 0x400000


def _nan_rule(r: np.ndarray, a, b) -> np.ndarray:
    """r = a (op) b in float32; rewrite NaN results with the x86 SSE rule (module docstring)."""
    r = np.asarray(r, dtype=F32)
    nan = np.isnan(r)
    if not nan.any():
        return r
    a = np.broadcast_to(np.asarray(a, dtype=F32), r.shape)
    b = np.broadcast_to(np.asarray(b, dtype=F32), r.shape)
    a_bits = np.ascontiguousarray(a).view(np.uint32) | F32_QUIET_BIT
    b_bits = np.ascontiguousarray(b).view(np.uint32) | F32_QUIET_BIT
    fix = np.where(np.isnan(a), a_bits, np.where(np.isnan(b), b_bits, X86_DEFAULT_NAN))
    out = np.ascontiguousarray(r).view(np.uint32).copy()
    out[nan] = fix[nan]
    return out.view(F32)


def _mul(a, b) -> np.ndarray:
    with np.errstate(all="ignore"):
        return _nan_rule(np.multiply(a, b, dtype=F32), a, b)


def _sub(a, b) -> np.ndarray:
    with np.errstate(all="ignore"):
        return _nan_rule(np.subtract(a, b, dtype=F32), a, b)


def _f16_values(bits) -> np.ndarray:
    """fp16 bit patterns -> float32 values (exact; NaNs quieted, sign and payload kept)."""
    return fp16.f16_to_f32(np.asarray(bits, dtype=np.uint16)).view(F32)


def _f16_bits(values) -> np.ndarray:
    """float32 values -> fp16 bit patterns, round to nearest even."""
    return fp16.f32_to_f16(np.ascontiguousarray(values, dtype=F32).view(np.uint32))


# ---------------------------------------------------------------------------------------------
# Block layouts: unpacking and packing, byte by byte, little-endian
# ---------------------------------------------------------------------------------------------

def _le16(b: np.ndarray, off: int) -> np.ndarray:
    return b[:, off].astype(np.uint32) | (b[:, off + 1].astype(np.uint32) << 8)


def _le32(b: np.ndarray, off: int) -> np.ndarray:
    return (b[:, off].astype(np.uint32) | (b[:, off + 1].astype(np.uint32) << 8)
            | (b[:, off + 2].astype(np.uint32) << 16) | (b[:, off + 3].astype(np.uint32) << 24))


def _put16(out: np.ndarray, off: int, v) -> None:
    v = np.asarray(v).astype(np.int64) & 0xFFFF
    out[:, off] = v & 0xFF
    out[:, off + 1] = v >> 8


def _blocks2d(qtype: str, blocks) -> np.ndarray:
    b = _as_bytes(blocks)
    bb = BLOCK_BYTES[qtype]
    if b.size % bb:
        raise KQuantError("kq_size_mismatch", f"{b.size} bytes is not a whole number of "
                          f"{bb}-byte {qtype} blocks")
    return b.reshape(-1, bb)


def unpack_scales_k4(sb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """scales[12] of Q4_K/Q5_K -> (sc, m), each [nblocks, 8] int64 in 0..63."""
    q = sb.astype(np.int64)
    sc = np.empty((q.shape[0], 8), np.int64)
    m = np.empty((q.shape[0], 8), np.int64)
    for j in range(4):
        sc[:, j] = q[:, j] & 63
        m[:, j] = q[:, j + 4] & 63
    for j in range(4, 8):
        sc[:, j] = (q[:, j + 4] & 0xF) | ((q[:, j - 4] >> 6) << 4)
        m[:, j] = (q[:, j + 4] >> 4) | ((q[:, j] >> 6) << 4)
    return sc, m


def pack_scales_k4(sc, m) -> np.ndarray:
    """Inverse of unpack_scales_k4: (sc, m) [nblocks, 8] in 0..63 -> [nblocks, 12] uint8."""
    sc = np.asarray(sc, np.int64)
    m = np.asarray(m, np.int64)
    if sc.min(initial=0) < 0 or sc.max(initial=0) > 63 or m.min(initial=0) < 0 or \
            m.max(initial=0) > 63:
        raise ValueError("6-bit scales and mins must lie in 0..63")
    out = np.zeros((sc.shape[0], 12), np.int64)
    for i in range(4):
        out[:, i] = (sc[:, i] & 63) | ((sc[:, i + 4] >> 4) << 6)
        out[:, i + 4] = (m[:, i] & 63) | ((m[:, i + 4] >> 4) << 6)
        out[:, i + 8] = (sc[:, i + 4] & 0xF) | ((m[:, i + 4] & 0xF) << 4)
    return out.astype(np.uint8)


def _nibble_codes(qs: np.ndarray) -> np.ndarray:
    """qs[128] -> 256 4-bit codes: chunk c, l: element 64c+l low nibble, 64c+32+l high nibble."""
    q = qs.astype(np.int64).reshape(-1, 4, 32)
    return np.stack([q & 0xF, q >> 4], axis=2).reshape(-1, QK_K)


def _pack_nibbles(codes: np.ndarray) -> np.ndarray:
    c = np.asarray(codes, np.int64).reshape(-1, 4, 2, 32)
    return ((c[:, :, 0, :] & 0xF) | ((c[:, :, 1, :] & 0xF) << 4)).reshape(-1, 128)


def unpack(qtype: str, blocks) -> dict:
    """Every field of every block, as integer arrays (codes per element, in element order).

    q4_k: d, dmin (fp16 bits), sc, m [n, 8], q [n, 256] in 0..15
    q5_k: the same with q in 0..31
    q6_k: d (fp16 bits), scales [n, 16] int8 values, q [n, 256] in 0..63 (the stored code;
          the signed quant is q - 32)
    q8_k: d (float32 bits), qs [n, 256] in -128..127, bsums [n, 16] in -32768..32767
    """
    _check_type(qtype)
    b = _blocks2d(qtype, blocks)
    if qtype in ("q4_k", "q5_k"):
        sc, m = unpack_scales_k4(b[:, 4:16])
        f = {"d": _le16(b, 0).astype(np.uint16), "dmin": _le16(b, 2).astype(np.uint16),
             "sc": sc, "m": m}
        if qtype == "q4_k":
            f["q"] = _nibble_codes(b[:, 16:144])
        else:
            qh = b[:, 16:48].astype(np.int64)
            high = np.stack([(qh >> s) & 1 for s in range(8)], axis=1).reshape(-1, QK_K)
            f["q"] = _nibble_codes(b[:, 48:176]) | (high << 4)
        return f
    if qtype == "q6_k":
        ql = b[:, 0:128].astype(np.int64)
        qh = b[:, 128:192].astype(np.int64)
        parts = []
        for h in range(2):
            lo = ql[:, 64 * h: 64 * h + 64]
            hi = qh[:, 32 * h: 32 * h + 32]
            parts += [(lo[:, :32] & 0xF) | (((hi >> 0) & 3) << 4),
                      (lo[:, 32:] & 0xF) | (((hi >> 2) & 3) << 4),
                      (lo[:, :32] >> 4) | (((hi >> 4) & 3) << 4),
                      (lo[:, 32:] >> 4) | (((hi >> 6) & 3) << 4)]
        scales = b[:, 192:208].astype(np.int64)
        return {"q": np.concatenate(parts, axis=1),
                "scales": np.where(scales >= 128, scales - 256, scales),
                "d": _le16(b, 208).astype(np.uint16)}
    qs = b[:, 4:260].astype(np.int64)
    bsums = np.stack([_le16(b, 260 + 2 * g).astype(np.int64) for g in range(16)], axis=1)
    return {"d": _le32(b, 0), "qs": np.where(qs >= 128, qs - 256, qs),
            "bsums": np.where(bsums >= 32768, bsums - 65536, bsums)}


def pack(qtype: str, fields: dict) -> np.ndarray:
    """Inverse of unpack: fields (same names, ranges checked) -> [n, block_bytes] uint8."""
    _check_type(qtype)
    if qtype in ("q4_k", "q5_k"):
        q = np.asarray(fields["q"], np.int64).reshape(-1, QK_K)
        nmax = 15 if qtype == "q4_k" else 31
        if q.min(initial=0) < 0 or q.max(initial=0) > nmax:
            raise ValueError(f"{qtype} codes must lie in 0..{nmax}")
        out = np.zeros((q.shape[0], BLOCK_BYTES[qtype]), np.int64)
        _put16(out, 0, fields["d"])
        _put16(out, 2, fields["dmin"])
        out[:, 4:16] = pack_scales_k4(np.asarray(fields["sc"]).reshape(-1, 8),
                                      np.asarray(fields["m"]).reshape(-1, 8))
        if qtype == "q4_k":
            out[:, 16:144] = _pack_nibbles(q)
        else:
            q5 = q.reshape(-1, 8, 32)
            qh = np.zeros((q.shape[0], 32), np.int64)
            for s in range(8):
                qh |= ((q5[:, s, :] >> 4) & 1) << s
            out[:, 16:48] = qh
            out[:, 48:176] = _pack_nibbles(q & 0xF)
        return out.astype(np.uint8)
    if qtype == "q6_k":
        q = np.asarray(fields["q"], np.int64).reshape(-1, QK_K)
        sc = np.asarray(fields["scales"], np.int64).reshape(-1, 16)
        if q.min(initial=0) < 0 or q.max(initial=0) > 63:
            raise ValueError("q6_k codes must lie in 0..63")
        if sc.min(initial=0) < -128 or sc.max(initial=0) > 127:
            raise ValueError("q6_k scales must lie in -128..127")
        out = np.zeros((q.shape[0], 210), np.int64)
        for h in range(2):
            e = q[:, 128 * h: 128 * h + 128]
            q1, q2, q3, q4 = e[:, 0:32], e[:, 32:64], e[:, 64:96], e[:, 96:128]
            out[:, 64 * h: 64 * h + 32] = (q1 & 0xF) | ((q3 & 0xF) << 4)
            out[:, 64 * h + 32: 64 * h + 64] = (q2 & 0xF) | ((q4 & 0xF) << 4)
            out[:, 128 + 32 * h: 128 + 32 * h + 32] = ((q1 >> 4) | ((q2 >> 4) << 2)
                                                        | ((q3 >> 4) << 4) | ((q4 >> 4) << 6))
        out[:, 192:208] = sc & 0xFF
        _put16(out, 208, fields["d"])
        return out.astype(np.uint8)
    qs = np.asarray(fields["qs"], np.int64).reshape(-1, QK_K)
    bsums = np.asarray(fields["bsums"], np.int64).reshape(-1, 16)
    if qs.min(initial=0) < -128 or qs.max(initial=0) > 127:
        raise ValueError("q8_k quants must lie in -128..127")
    if bsums.min(initial=0) < -32768 or bsums.max(initial=0) > 32767:
        raise ValueError("q8_k bsums must fit int16")
    out = np.zeros((qs.shape[0], Q8K_BYTES), np.int64)
    d = np.asarray(fields["d"]).astype(np.int64).reshape(-1) & 0xFFFFFFFF
    for k in range(4):
        out[:, k] = (d >> (8 * k)) & 0xFF
    out[:, 4:260] = qs & 0xFF
    for g in range(16):
        _put16(out, 260 + 2 * g, bsums[:, g])
    return out.astype(np.uint8)


# ---------------------------------------------------------------------------------------------
# Dequantization (kquants.md "Dequantize")
# ---------------------------------------------------------------------------------------------

def dequantize_values(qtype: str, blocks) -> np.ndarray:
    """All elements of the given blocks in order, as float32 values (shape [n * 256])."""
    f = unpack(qtype, blocks)
    if qtype in ("q4_k", "q5_k"):
        D = _f16_values(f["d"])[:, None]
        Dm = _f16_values(f["dmin"])[:, None]
        # y = (D*sc)*q - (Dm*m): per sub-block of 32, the scale and min of that sub-block.
        d_sc = _mul(D, f["sc"].astype(F32))             # [n, 8]
        m_m = _mul(Dm, f["m"].astype(F32))              # [n, 8]
        q = f["q"].astype(F32).reshape(-1, 8, 32)
        y = _sub(_mul(d_sc[:, :, None], q), m_m[:, :, None])
        return y.reshape(-1)
    if qtype == "q6_k":
        D = _f16_values(f["d"])[:, None]
        d_sc = _mul(D, f["scales"].astype(F32))         # [n, 16], scale per 16 elements
        q = (f["q"] - 32).astype(F32).reshape(-1, 16, 16)
        return _mul(d_sc[:, :, None], q).reshape(-1)
    d = np.ascontiguousarray(f["d"].astype(np.uint32)).view(F32)[:, None]
    return _mul(d, f["qs"].astype(F32)).reshape(-1)


def dequantize(qtype: str, blocks, rows: int, cols: int) -> np.ndarray:
    """Blocks of a rows x cols matrix -> float32 bit patterns, uint32 [rows, cols]."""
    _check_type(qtype)
    b = _as_bytes(blocks)
    _check_shape(qtype, rows, cols, b.size)
    y = dequantize_values(qtype, b)
    return np.ascontiguousarray(y, dtype=F32).view(np.uint32).reshape(rows, cols)


# ---------------------------------------------------------------------------------------------
# Quantization (research section 2)
# ---------------------------------------------------------------------------------------------

def _f32(v) -> np.ndarray:
    return np.asarray(v, dtype=F32)


def _sum_in_order(terms: np.ndarray) -> np.ndarray:
    """Row sums of a float32 [G, n] matrix, each evaluated as the reference loop does:
    s = 0; s += t[0]; s += t[1]; ... (n separate float32 additions, in index order)."""
    acc = np.zeros(terms.shape[0], F32)
    for i in range(terms.shape[1]):
        acc = acc + terms[:, i]
    return acc


def make_qkx2_quants(x: np.ndarray, w: np.ndarray, nmax: int, rmin: float, rdelta: float,
                     nstep: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Research 2.2 for many groups at once (use_mad false).

    x, w: float32 [G, n] (one group per row). Returns (scale [G], the_min [G], L [G, n] int64).
    Element-wise steps (nearest_int, clamps, products, differences) act on whole matrices; every
    sum is a loop in index order (_sum_in_order), every min/max a loop with the strict compare.
    """
    x = _f32(x)
    w = _f32(w)
    G, n = x.shape
    mn = x[:, 0].copy()
    mx = x[:, 0].copy()
    sum_w = w[:, 0].copy()
    sum_x = sum_w * x[:, 0]
    for i in range(1, n):
        xi = x[:, i]
        mn = np.where(xi < mn, xi, mn)
        mx = np.where(xi > mx, xi, mx)
        sum_w = sum_w + w[:, i]
        sum_x = sum_x + w[:, i] * xi
    mn = np.where(mn > 0, F32(0.0), mn)

    scale = np.zeros(G, F32)
    the_min = -mn                      # also the result of the early return (max == min)
    L = np.zeros((G, n), np.int64)
    act = np.flatnonzero(mx != mn)
    if act.size == 0:
        return scale, the_min, L

    xa, wa, mxa = x[act], w[act], mx[act]
    sw, sx = sum_w[act], sum_x[act]
    # `cur_min` is the reference's single variable `min`: the first fit uses min(x) (clamped to
    # <= 0), and every accepted candidate overwrites it, so later candidates compute both
    # (max - min) and (x - min) with the min of the best fit so far.
    cur_min = mn[act].copy()
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        iscale = F32(nmax) / (mxa - cur_min)
        sc = F32(1.0) / iscale
        La = np.clip(nearest_int(iscale[:, None] * (xa - cur_min[:, None])), 0, nmax)
        diff = sc[:, None] * La.astype(F32) + cur_min[:, None] - xa
        best = _sum_in_order(wa * (diff * diff))

        for step in range(nstep + 1):
            iscale = (F32(rmin) + F32(rdelta) * F32(step) + F32(nmax)) / (mxa - cur_min)
            Laux = np.clip(nearest_int(iscale[:, None] * (xa - cur_min[:, None])), 0, nmax)
            lf = Laux.astype(F32)
            wl = wa * lf
            sum_l = _sum_in_order(wl)
            sum_l2 = _sum_in_order(wl * lf)             # w*l*l = (w*l)*l
            sum_xl = _sum_in_order(wl * xa)             # w*l*x = (w*l)*x
            D = sw * sum_l2 - sum_l * sum_l
            ok = D > 0
            this_scale = (sw * sum_xl - sx * sum_l) / D
            this_min = (sum_l2 * sx - sum_l * sum_xl) / D
            pos = this_min > 0
            this_min = np.where(pos, F32(0.0), this_min)
            this_scale = np.where(pos, sum_xl / sum_l2, this_scale)
            diff = this_scale[:, None] * lf + this_min[:, None] - xa
            cur = _sum_in_order(wa * (diff * diff))
            take = ok & (cur < best)
            La[take] = Laux[take]
            best = np.where(take, cur, best)
            sc = np.where(take, this_scale, sc)
            cur_min = np.where(take, this_min, cur_min)

    scale[act] = sc
    the_min[act] = -cur_min
    L[act] = La
    return scale, the_min, L


def make_qx_quants(x: np.ndarray, nmax: int) -> tuple[np.ndarray, np.ndarray]:
    """Research 2.4, rmse_type 1 without quant weights (w = x^2), for many groups at once.

    x: float32 [G, n]. Returns (scale [G] float32, L [G, n] int64, the stored value l + nmax).
    """
    x = _f32(x)
    G, n = x.shape
    amax = np.zeros(G, F32)
    mx = np.zeros(G, F32)
    for i in range(n):
        ax = np.abs(x[:, i])
        upd = ax > amax
        amax = np.where(upd, ax, amax)
        mx = np.where(upd, x[:, i], mx)
    scale = np.zeros(G, F32)
    L = np.zeros((G, n), np.int64)     # the early return (amax < 1e-15) stores 0, not nmax
    act = np.flatnonzero(~(amax < GROUP_MAX_EPS))
    if act.size == 0:
        return scale, L
    xa, mxa = x[act], mx[act]
    wa = xa * xa
    wx = wa * xa

    def trial(iscale):
        ls = np.clip(nearest_int(iscale[:, None] * xa), -nmax, nmax - 1)
        lf = ls.astype(F32)
        return ls, _sum_in_order(wx * lf), _sum_in_order(wa * lf * lf)  # (w*x)*l, (w*l)*l

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ls, sumlx, suml2 = trial(F32(-nmax) / mxa)
        La = ls + nmax
        sc = np.where(suml2 != 0, sumlx / suml2, F32(0.0))
        best = sc * sumlx
        for step in range(-9, 10):
            if step == 0:
                continue
            iscale = -(F32(nmax) + F32(0.1) * F32(step)) / mxa
            ls, sumlx, suml2 = trial(iscale)
            take = (suml2 > 0) & (sumlx * sumlx > best * suml2)
            La[take] = ls[take] + nmax
            sc = np.where(take, sumlx / suml2, sc)
            best = np.where(take, sc * sumlx, best)
    scale[act] = sc
    L[act] = La
    return scale, L


def _quantize_q45(x: np.ndarray, qtype: str) -> np.ndarray:
    """Research 2.3 for blocks x [nb, 256] float32 -> [nb, bytes] uint8."""
    nb = x.shape[0]
    nmax, rmin, nstep = (15, -1.0, 20) if qtype == "q4_k" else (31, -0.5, 15)
    xs = x.reshape(nb * 8, 32)
    sum_x2 = _sum_in_order(xs * xs)
    av_x = np.sqrt(sum_x2 / F32(32.0))
    w = av_x[:, None] + np.abs(xs)
    scales, mins, L = make_qkx2_quants(xs, w, nmax, rmin, 0.1, nstep)
    scales = scales.reshape(nb, 8)
    mins = mins.reshape(nb, 8)
    L = L.reshape(nb, 8, 32)

    max_scale = np.zeros(nb, F32)
    max_min = np.zeros(nb, F32)
    for j in range(8):
        max_scale = np.where(scales[:, j] > max_scale, scales[:, j], max_scale)
        max_min = np.where(mins[:, j] > max_min, mins[:, j], max_min)
    with np.errstate(divide="ignore", over="ignore"):
        inv_scale = np.where(max_scale > 0, F32(63.0) / max_scale, F32(0.0))
        inv_min = np.where(max_min > 0, F32(63.0) / max_min, F32(0.0))
    # uint8 ls = nearest_int(...); ls = MIN(63, ls): the int is truncated to 8 bits first.
    ls = np.minimum(63, nearest_int(inv_scale[:, None] * scales) & 0xFF)
    lm = np.minimum(63, nearest_int(inv_min[:, None] * mins) & 0xFF)
    d16 = _f16_bits(max_scale / F32(63.0))
    dmin16 = _f16_bits(max_min / F32(63.0))

    # Requantize against the stored scales and mins, decoded back from the packed bytes.
    sc, m = unpack_scales_k4(pack_scales_k4(ls, lm))
    dd = _f16_values(d16)[:, None] * sc.astype(F32)     # [nb, 8]
    dm = _f16_values(dmin16)[:, None] * m.astype(F32)
    live = dd != 0                                       # `if (!d) continue;` (NaN stays live)
    if live.any():
        xl = x.reshape(nb, 8, 32)[live]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            v = (xl + dm[live][:, None]) / dd[live][:, None]
        L[live] = np.clip(nearest_int(v), 0, nmax)
    return pack(qtype, {"d": d16, "dmin": dmin16, "sc": sc, "m": m, "q": L.reshape(nb, QK_K)})


def _quantize_q6(x: np.ndarray) -> np.ndarray:
    """Research 2.4 for blocks x [nb, 256] float32 -> [nb, 210] uint8."""
    nb = x.shape[0]
    scales, L = make_qx_quants(x.reshape(nb * 16, 16), 32)
    scales = scales.reshape(nb, 16)
    L = L.reshape(nb, 16, 16)
    max_scale = np.zeros(nb, F32)
    max_abs = np.zeros(nb, F32)
    for g in range(16):
        a = np.abs(scales[:, g])
        upd = a > max_abs
        max_abs = np.where(upd, a, max_abs)
        max_scale = np.where(upd, scales[:, g], max_scale)
    zero = max_abs < GROUP_MAX_EPS
    out = np.zeros((nb, 210), np.uint8)
    live_blocks = np.flatnonzero(~zero)
    if live_blocks.size == 0:
        return out
    xs = x[live_blocks]
    Ls = L[live_blocks]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        iscale = F32(-128.0) / max_scale[live_blocks]
        d16 = _f16_bits(F32(1.0) / iscale)
        scaled = iscale[:, None] * scales[live_blocks]
    # int8 scales[ib] = MIN(127, nearest_int(...)): stored as the low 8 bits, read back signed.
    sq = np.minimum(127, nearest_int(scaled))
    sq = ((sq + 128) & 0xFF) - 128
    dd = _f16_values(d16)[:, None] * sq.astype(F32)     # [nl, 16]
    live = dd != 0
    if live.any():
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            v = xs.reshape(-1, 16, 16)[live] / dd[live][:, None]
        Ls[live] = np.clip(nearest_int(v), -32, 31) + 32
    out[live_blocks] = pack("q6_k", {"q": Ls.reshape(-1, QK_K), "scales": sq, "d": d16})
    return out


def _quantize_q8(x: np.ndarray) -> np.ndarray:
    """Research 2.5 for blocks x [nb, 256] float32 -> [nb, 292] uint8."""
    nb = x.shape[0]
    amax = np.zeros(nb, F32)
    mx = np.zeros(nb, F32)
    for j in range(QK_K):
        ax = np.abs(x[:, j])
        upd = ax > amax
        amax = np.where(upd, ax, amax)
        mx = np.where(upd, x[:, j], mx)
    qs = np.zeros((nb, QK_K), np.int64)
    d = np.zeros(nb, F32)
    live = amax != 0
    if live.any():
        with np.errstate(over="ignore", invalid="ignore"):
            iscale = F32(-127.0) / mx[live]
            v = iscale[:, None] * x[live]
        # int8 qs[j] = MIN(127, v): stored as the low 8 bits (matters only outside nearest_int's
        # rounding range, e.g. iscale = -inf for a subnormal max).
        qs[live] = ((np.minimum(127, nearest_int(v)) + 128) & 0xFF) - 128
        d[live] = F32(1.0) / iscale
    bsums = qs.reshape(nb, 16, 16).sum(axis=2)       # integers: exact in any order
    return pack("q8_k", {"d": d.view(np.uint32), "qs": qs, "bsums": bsums})


def quantize_blocks(qtype: str, x) -> np.ndarray:
    """Quantize super-blocks x (float32, any shape with a multiple of 256 elements) -> [nb, bytes].

    Every super-block is quantized on its own, so the blocks of several matrices can be
    quantized in one call.
    """
    _check_type(qtype)
    x = np.ascontiguousarray(x, dtype=F32).reshape(-1)
    if x.size % QK_K:
        raise KQuantError("kq_cols_not_multiple", f"{x.size} values are not whole super-blocks")
    x = x.reshape(-1, QK_K)
    if x.shape[0] == 0:
        return np.zeros((0, BLOCK_BYTES[qtype]), np.uint8)
    if not np.all(np.isfinite(x)):
        raise QuantizerDomainError("the reference quantizers are defined for finite inputs only")
    with np.errstate(all="ignore"):  # IEEE results (inf, overflow) are intended; NaN is caught
        if qtype in ("q4_k", "q5_k"):
            return _quantize_q45(x, qtype)
        if qtype == "q6_k":
            return _quantize_q6(x)
        return _quantize_q8(x)


def quantize(qtype: str, x_f32, rows: int, cols: int) -> bytes:
    """A rows x cols float32 matrix (values) -> its blocks, row-major, as bytes."""
    _check_type(qtype)
    x = np.ascontiguousarray(x_f32, dtype=F32)
    if cols <= 0 or cols % QK_K:
        raise KQuantError("kq_cols_not_multiple", f"cols = {cols} is not a positive multiple of 256")
    if x.size != rows * cols:
        raise KQuantError("kq_size_mismatch", f"{x.size} values for a {rows} x {cols} matrix")
    return quantize_blocks(qtype, x).tobytes()


# ---------------------------------------------------------------------------------------------
# Dot with Q8_K activations: the exact per-block integers
# ---------------------------------------------------------------------------------------------

def dot_integers(qtype: str, blocks, q8k, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """(S, M) per super-block of one row, int32 [cols/256] each (kquants.md, research 4.1).

    Q4_K/Q5_K: S = sum_s sc_s * sum_l q[32s+l] * q8[32s+l], M = sum_s m_s * (bsums[2s] +
    bsums[2s+1]) with the bsums stored in the Q8_K block. Q6_K: S = sum_g sc_g * sum_l
    (q[16g+l] - 32) * q8[16g+l], M = 0. Integer arithmetic, exact.
    """
    if qtype not in WEIGHT_TYPES:
        raise ValueError(f"dot_integers needs a weight type, not {qtype!r}")
    wb = _as_bytes(blocks)
    ab = _as_bytes(q8k)
    _check_shape(qtype, 1, cols, wb.size)
    _check_shape("q8_k", 1, cols, ab.size)
    w = unpack(qtype, wb)
    a = unpack("q8_k", ab)
    nb = cols // QK_K
    if qtype == "q6_k":
        prod = ((w["q"] - 32) * a["qs"]).reshape(nb, 16, 16).sum(axis=2)
        S = (w["scales"] * prod).sum(axis=1)
        M = np.zeros(nb, np.int64)
    else:
        prod = (w["q"] * a["qs"]).reshape(nb, 8, 32).sum(axis=2)
        S = (w["sc"] * prod).sum(axis=1)
        pair = a["bsums"].reshape(nb, 8, 2).sum(axis=2)
        M = (w["m"] * pair).sum(axis=1)
    for v in (S, M):
        assert np.all(np.abs(v) < 2**31), "dot integers exceed int32"
    return S.astype(np.int32), M.astype(np.int32)


# ---------------------------------------------------------------------------------------------
# Exact references (float64)
# ---------------------------------------------------------------------------------------------

def ieee_exact_sum(terms: np.ndarray) -> tuple[float, float]:
    """(sum, sum of |.|) of float64 terms that are exact, correctly rounded; IEEE for inf/NaN."""
    t = np.asarray(terms, dtype=np.float64).reshape(-1)
    if np.all(np.isfinite(t)):
        return math.fsum(t.tolist()), math.fsum(np.abs(t).tolist())
    nan = bool(np.isnan(t).any())
    pos, neg = bool(np.isposinf(t).any()), bool(np.isneginf(t).any())
    total = math.nan if nan or (pos and neg) else (math.inf if pos else -math.inf)
    return total, (math.nan if nan else math.inf)


def q8k_values(q8k) -> tuple[np.ndarray, np.ndarray]:
    """(d float32 per block, qs int64 [n, 256]) of Q8_K blocks."""
    a = unpack("q8_k", q8k)
    return np.ascontiguousarray(a["d"].astype(np.uint32)).view(F32), a["qs"]


def dot_reference(qtype: str, blocks, q8k, cols: int) -> tuple[float, float]:
    """ystar = sum_k w_k * x_k and sum_abs = sum_k |w_k x_k| for one row, x_k = d_q8 * q8_k.

    w_k is the float32 dequantized weight. The product w * d * q is split exactly: w * q has at
    most 24 + 8 bits, d = d_hi + d_lo with 12 significant bits each (d_hi: d truncated toward zero
    to 12 bits, so d_lo has the sign of d_hi), and each of (w q) d_hi, (w q) d_lo has at most 44 bits.
    Weights must be finite (the split would turn an infinite product into inf * 0).
    """
    w = dequantize(qtype, blocks, 1, cols).view(F32).reshape(-1).astype(np.float64)
    if not np.all(np.isfinite(w)):
        raise ValueError("dot_reference needs finite weights")
    d, qs = q8k_values(q8k)
    d_bits = np.ascontiguousarray(d).view(np.uint32)
    d_hi = (d_bits & np.uint32(0xFFFFF000)).view(F32).astype(np.float64)
    d_lo = d.astype(np.float64) - d_hi                  # exact: both are float32 values
    wq = w * qs.reshape(-1).astype(np.float64)          # exact
    terms = np.concatenate([wq * np.repeat(d_hi, QK_K), wq * np.repeat(d_lo, QK_K)])
    return ieee_exact_sum(terms)


def gemv_reference(qtype: str, blocks, rows: int, cols: int,
                   x_f16: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ystar[b][m] = sum_k W[m][k] * x[b][k] and sum_abs, float64 [batch, rows] each.

    W is the float32 dequantized matrix, x fp16 bit patterns [batch, cols]. A float32 times an
    fp16 value has at most 24 + 11 significant bits and cannot underflow, so each product is
    exact in float64.
    """
    x_f16 = np.asarray(x_f16, dtype=np.uint16)
    w = dequantize(qtype, blocks, rows, cols).view(F32).astype(np.float64)  # cols, rows, size
    batch = x_f16.shape[0] if x_f16.ndim == 2 else -1
    if not 1 <= batch <= GEMV_MAX_BATCH:
        raise KQuantError("kq_batch_out_of_range", f"batch = {batch} is outside 1..16")
    if x_f16.shape[1] != cols:
        raise ValueError(f"x has shape {x_f16.shape}, expected [batch, {cols}]")
    xv = _f16_values(x_f16).astype(np.float64)
    ystar = np.empty((batch, rows), np.float64)
    sabs = np.empty((batch, rows), np.float64)
    with np.errstate(invalid="ignore"):
        for b in range(batch):
            prods = w * xv[b][None, :]
            for m in range(rows):
                ystar[b, m], sabs[b, m] = ieee_exact_sum(prods[m])
    return ystar, sabs
