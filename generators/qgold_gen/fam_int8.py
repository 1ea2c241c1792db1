"""Families of the int8 format: golden/int8/<family>.h5 (schema: reference/spec/intq.md).

  quantize.h5  path quantize  x (float32 or fp16) -> expected_q int8, expected_scales
  dequant.h5   path dequant   q, scales -> expected_f32, expected_f16
  w8a8.h5      path w8a8      A, B, sa, sb, bias -> expected_acc, expected_f32, expected_f16
  w8a16.h5     path w8a16     B, sb, X -> ystar, sum_abs (exact, float64)
  invalid.h5   expect = invalid: one broken rule per case, inputs only, `error` names it

Random inputs come from one pinned stream per case (rng.md), distribution "u64": each derived draw
(int_range, uniform of rng.md) consumes the stream in the order that `transform` lists, `count` is
the total number of draws. fp16 values are uniform float32 draws rounded once (RN16).

The W8A8 accumulator-extreme cases (K = 131071, M = N = 1, and the K = 131072 invalid case) store A
and B as HDF5 datasets that are never written: their declared fill value (-128 or 127) is what a
read returns, so 256 KiB of constant codes cost a few hundred bytes of file.

Every builder checks at generation time that the edge it claims is in its data (a tie of each
sign rounded to even, a saturation of each sign, a scale that underflows to 0, epilogue orders
that would give other bits, each invalid case raising exactly its error).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from . import int8 as I
from .rng import Stream
from .schema import FixtureFile

FORMAT = "int8"
FORMAT_VERSION = 1
F32 = np.float32
F16 = np.float16
FLT_MAX = float(np.finfo(F32).max)
FLT_MIN = float(np.finfo(F32).tiny)


def f32b(values) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=F32).view(np.uint32)


def f16b(values) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.ascontiguousarray(np.asarray(values, dtype=F32).astype(F16)).view(np.uint16)


def is_f16_exact(values) -> bool:
    v = np.asarray(values, F32)
    with np.errstate(over="ignore"):
        back = v.astype(F16).astype(F32)
    return bool(np.array_equal(back, v, equal_nan=True))


def has_nan(*arrays) -> bool:
    return any(bool(np.isnan(np.asarray(a, np.float64)).any()) for a in arrays)


# ---------------------------------------------------------------------------------------------
# Draws from one stream
# ---------------------------------------------------------------------------------------------

class Draws:
    """One stream drawn in order; provenance() gives the attributes describing the draws."""

    def __init__(self, seed: int):
        self.seed = seed
        self.stream = Stream(seed)
        self.parts: list[str] = []

    def _note(self, what: str, dist: str, count: int) -> None:
        if count:
            self.parts.append(f"{what} {dist} x{count}")

    def codes(self, what: str, shape) -> np.ndarray:
        """int8 codes: int_range(256) - 128."""
        n = int(np.prod(shape))
        self._note(what, "int_range(256) - 128", n)
        return (self.stream.int_range_array(256, n).astype(np.int64) - 128).astype(
            np.int8).reshape(shape)

    def uniform(self, what: str, a: float, b: float, shape) -> np.ndarray:
        n = int(np.prod(shape))
        self._note(what, f"uniform({float(a)!r},{float(b)!r})", n)
        return self.stream.uniform_array(a, b, n).reshape(shape)

    def f16u(self, what: str, a: float, b: float, shape) -> np.ndarray:
        """fp16 values (as float32): RN16 of uniform draws."""
        n = int(np.prod(shape))
        self._note(what, f"RN16(uniform({float(a)!r},{float(b)!r}))", n)
        return self.stream.uniform_array(a, b, n).astype(F16).astype(F32).reshape(shape)

    def provenance(self) -> dict:
        return {"seed": self.seed, "distribution": "u64", "count": self.stream.counter,
                "transform": "; ".join(self.parts)}


def _case(ff: FixtureFile, name: str, path: str, description: str, prov: dict | None, **attrs):
    for key, value in (("description", description), *dict(prov or {}).items()):
        # the C fixture loader reads string attributes of fewer than 256 bytes
        assert not isinstance(value, str) or len(value.encode()) < 256, (name, key)
    return ff.add_case(name, format_version=FORMAT_VERSION, path=path, description=description,
                       **dict(prov or {}), **attrs)


# ---------------------------------------------------------------------------------------------
# Writers (valid cases)
# ---------------------------------------------------------------------------------------------

def add_quantize(ff, name, description, x, granularity, group, src_type, scale_type,
                 prov=None, check=None):
    x = np.asarray(x, F32)
    if x.ndim == 1:
        x = x.reshape(1, -1)
    if src_type == "float16":
        assert is_f16_exact(x), name
    q, s = I.quantize(x, granularity, group, scale_type)
    if check is not None:
        assert check(x, q, s), f"{name}: claimed edge not in the data"
    rows, cols = x.shape
    g = _case(ff, name, "quantize", description, prov, rows=rows, cols=cols,
              granularity=granularity, group=group, src_type=src_type, scale_type=scale_type)
    if src_type == "float16":
        ff.add_dataset(g, "x", f16b(x), bit_dtype="float16")
    else:
        ff.add_dataset(g, "x", f32b(x), bit_dtype="float32")
    ff.add_dataset(g, "expected_q", q)
    if scale_type == "float16":
        ff.add_dataset(g, "expected_scales", f16b(s), bit_dtype="float16")
    else:
        ff.add_dataset(g, "expected_scales", f32b(s), bit_dtype="float32")
    return q, s


def add_dequant(ff, name, description, q, scales, granularity, group, scale_type,
                prov=None, check=None):
    q = np.asarray(q, np.int8)
    scales = np.asarray(scales, F32)
    if scale_type == "float16":
        assert is_f16_exact(scales), name
    y32, y16 = I.dequant(q, scales, granularity, group)
    if check is not None:
        assert check(q, scales, y32, y16), f"{name}: claimed edge not in the data"
    rows, cols = q.shape
    extra = {"nan_sign": "any"} if has_nan(y32) else {}
    g = _case(ff, name, "dequant", description, prov, rows=rows, cols=cols,
              granularity=granularity, group=group, scale_type=scale_type, **extra)
    ff.add_dataset(g, "q", q)
    if scale_type == "float16":
        ff.add_dataset(g, "scales", f16b(scales), bit_dtype="float16")
    else:
        ff.add_dataset(g, "scales", f32b(scales), bit_dtype="float32")
    ff.add_dataset(g, "expected_f32", f32b(y32), bit_dtype="float32")
    ff.add_dataset(g, "expected_f16", y16.view(np.uint16), bit_dtype="float16")
    return y32, y16


def _fill_dataset(group, name: str, shape, value: int):
    """An int8 dataset never written: every read returns its fill value (no storage allocated)."""
    group.create_dataset(name, shape=shape, dtype=np.int8, fillvalue=np.int8(value),
                         track_times=False)


def add_w8a8(ff, name, description, A, B, sa, sb, bias=None, bias_type="none", relu=False,
             prov=None, check=None, fill=None):
    """bias: float32 values (fp16 values when bias_type is float16). fill = (M, N, K, a, b):
    A and B are constant (a, b) and stored as unwritten datasets with that fill value."""
    if fill is not None:
        M, N, K, a, b = fill
        A = np.full((M, K), a, np.int8)
        B = np.full((N, K), b, np.int8)
    A = np.asarray(A, np.int8)
    B = np.asarray(B, np.int8)
    sa = np.asarray(sa, F32)
    sb = np.asarray(sb, F32)
    if bias is not None:
        bias = np.asarray(bias, F32)
        if bias_type == "float16":
            assert is_f16_exact(bias), name
    assert (bias is None) == (bias_type == "none")
    acc, y32, y16 = I.w8a8(A, B, sa, sb, bias, relu)
    if check is not None:
        assert check(acc, y32, y16), f"{name}: claimed edge not in the data"
    M, K = A.shape
    N = B.shape[0]
    extra = {"nan_sign": "any"} if has_nan(y32) else {}
    g = _case(ff, name, "w8a8", description, prov, M=M, N=N, K=K, relu=int(relu), bias=bias_type,
              sa_len=len(sa), sb_len=len(sb), **extra)
    if fill is not None:
        _fill_dataset(g, "A", (M, K), fill[3])
        _fill_dataset(g, "B", (N, K), fill[4])
    else:
        ff.add_dataset(g, "A", A)
        ff.add_dataset(g, "B", B)
    ff.add_dataset(g, "sa", f32b(sa), bit_dtype="float32")
    ff.add_dataset(g, "sb", f32b(sb), bit_dtype="float32")
    if bias_type == "float32":
        ff.add_dataset(g, "bias", f32b(bias), bit_dtype="float32")
    elif bias_type == "float16":
        ff.add_dataset(g, "bias", f16b(bias), bit_dtype="float16")
    ff.add_dataset(g, "expected_acc", acc)
    ff.add_dataset(g, "expected_f32", f32b(y32), bit_dtype="float32")
    ff.add_dataset(g, "expected_f16", y16.view(np.uint16), bit_dtype="float16")
    return acc, y32, y16


def add_w8a16(ff, name, description, B, sb, scale_type, X, prov=None, check=None):
    B = np.asarray(B, np.int8)
    sb = np.asarray(sb, F32)
    X = np.asarray(X, F32)
    assert is_f16_exact(X), name
    if scale_type == "float16":
        assert is_f16_exact(sb), name
    ystar, sabs = I.w8a16_exact(B, sb, X.astype(F16))
    if check is not None:
        assert check(ystar, sabs), f"{name}: claimed edge not in the data"
    N, K = B.shape
    M = X.shape[0]
    extra = {"nan_sign": "any"} if has_nan(ystar) else {}
    g = _case(ff, name, "w8a16", description, prov, M=M, N=N, K=K, scale_type=scale_type, **extra)
    ff.add_dataset(g, "B", B)
    if scale_type == "float16":
        ff.add_dataset(g, "sb", f16b(sb), bit_dtype="float16")
    else:
        ff.add_dataset(g, "sb", f32b(sb), bit_dtype="float32")
    ff.add_dataset(g, "X", f16b(X), bit_dtype="float16")
    ff.add_dataset(g, "ystar", ystar)
    ff.add_dataset(g, "sum_abs", sabs)
    return ystar, sabs


# ---------------------------------------------------------------------------------------------
# Edge checks used by the builders
# ---------------------------------------------------------------------------------------------

def ratios(x, s, granularity, group):
    """RN32(v / s) for every element, with its scale (for claims about ties and saturation)."""
    rows, cols = x.shape
    out = np.zeros((rows, cols), np.float64)
    with np.errstate(all="ignore"):
        for i, elems in I.blocks(rows, cols, granularity, group):
            for r, c in elems:
                out[r, c] = float(F32(x[r, c] / s[i])) if s[i] != 0 else 0.0
    return out


def has_ties(x, q, s, granularity, group) -> bool:
    """A positive and a negative exact half-way ratio, each rounded to the even neighbour."""
    t = ratios(x, s, granularity, group)
    frac = t - np.floor(t)
    ties = frac == 0.5
    pos = ties & (t > 0) & (q.astype(np.int64) % 2 == 0)
    neg = ties & (t < 0) & (q.astype(np.int64) % 2 == 0)
    return bool(pos.any() and neg.any() and np.all(q[ties].astype(np.int64) % 2 == 0))


def has_saturation(x, q, s, granularity, group) -> bool:
    """Ratios rounding to >= 128 (stored 127) and to <= -129 (stored -128)."""
    t = ratios(x, s, granularity, group)
    hi = np.array([[I.rne(v) >= 128 for v in row] for row in t])
    lo = np.array([[I.rne(v) <= -129 for v in row] for row in t])
    return bool(hi.any() and lo.any() and np.all(q[hi] == 127) and np.all(q[lo] == -128))


# ---------------------------------------------------------------------------------------------
# quantize.h5
# ---------------------------------------------------------------------------------------------

def build_quantize(ff: FixtureFile) -> None:
    halves = [0.5, 1.5, 2.5, 3.5, 64.5, 125.5, 126.5]
    row = [127.0] + [v for h in halves for v in (h, -h)] + [0.0]
    x = np.array([row, [2 * v for v in row]], F32)
    add_quantize(ff, "ties_scale1", "v / s exactly k + 0.5 (both signs, 0.5 .. 126.5) with s = 1 "
                 "and s = 2: each rounds half to even", x, "row", 0, "float32", "float32",
                 check=lambda x, q, s: has_ties(x, q, s, "row", 0) and list(s) == [1.0, 2.0])

    x = np.array([[381.0] + [h * 3 for h in (0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 7.5, -7.5, 100.5,
                                              -100.5, 41.0, -126.5)]], F32)
    add_quantize(ff, "ties_scale3_f16", "fp16 source, fp16 scale 3: (k + 0.5) * 3 divides back to "
                 "an exact tie, both signs", x, "row", 0, "float16", "float16",
                 check=lambda x, q, s: has_ties(x, q, s, "row", 0) and list(s) == [3.0])

    g0 = [127.0] + [h * (1 if k % 2 else -1) for k, h in enumerate(
        [0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5, 11.5, 12.5, 13.5, 14.5, 15.5,
         16.5, 17.5, 18.5, 19.5, 20.5, 21.5, 22.5, 23.5, 24.5, 25.5, 26.5, 27.5, 28.5, 29.5, 30.5])]
    x = np.array([g0 + [v * 0.25 for v in g0]], F32)
    add_quantize(ff, "ties_group32", "per group of 32: group scales 1 and 0.25, every ratio "
                 "0.5 .. 30.5 a tie of alternating sign", x, "group", 32, "float32", "float32",
                 check=lambda x, q, s: has_ties(x, q, s, "group", 32) and list(s) == [1.0, 0.25])

    x = np.array([[15.875, 0.0625, -0.0625, 0.1875], [-0.1875, 0.3125, -0.3125, 5.0],
                  [-15.8125, 15.8125, 1.0, -1.0]], F32)
    add_quantize(ff, "ties_tensor", "per tensor, s = 0.125: ratios 0.5, 1.5, 2.5, 126.5 of both "
                 "signs", x, "tensor", 0, "float32", "float32",
                 check=lambda x, q, s: has_ties(x, q, s, "tensor", 0) and list(s) == [0.125])

    # Near-ties where v / s and v * RN32(1 / s) round to different integers: the IEEE division
    # is required.
    with np.errstate(all="ignore"):
        s = F32(F32(1.0) / F32(127))
        inv = F32(F32(1.0) / s)
        found = []
        for k in range(0, 126):
            c = F32(F32(k + 0.5) * s)
            for d in range(-4, 5):
                v = F32(c)
                for _ in range(abs(d)):
                    v = np.nextafter(v, F32(np.inf if d > 0 else -np.inf), dtype=F32)
                a = I.rne(float(F32(v / s)))
                b = I.rne(float(F32(v * inv)))
                if a != b and v < 1:
                    found.append(float(v))
        assert len(found) >= 4
    pick = found[:6]
    x = np.array([[1.0] + [v for p in pick for v in (p, -p)]], F32)

    def differs(x, q, s):
        with np.errstate(all="ignore"):
            inv = F32(F32(1.0) / s[0])
            other = [I.sat8(I.rne(float(F32(v * inv)))) for v in x[0]]
        return other != q[0].tolist()
    add_quantize(ff, "division_not_reciprocal", "near-ties where v / s and v * RN32(1 / s) round "
                 "to different codes (amax 1): the IEEE division decides", x, "row", 0, "float32",
                 "float32", check=differs)

    u = 2.0**-24
    x = np.array([[129 * 10 * u, 128 * 10 * u, -128 * 10 * u, 127.5 * 10 * u, -128.5 * 10 * u,
                   -129 * 10 * u, 3.5 * 10 * u, 0.0],
                  [190 * u, -190 * u, 150 * u, -129 * u, 100.5 * u, -0.5 * u, 0.5 * u, 0.0],
                  [2.0**-20, -2.0**-21, 2.0**-22, 0.0, 0.0, 0.0, 0.0, 0.0],
                  [127 * u, -127 * u, 63.5 * u, u, 0.0, 0.0, 0.0, 0.0]], F32)
    add_quantize(ff, "f16_subnormal_scales", "fp16 scales 10 * 2^-24 and 2^-24 (rounded down): "
                 "ratios 128 .. 190 saturate to 127, -129 .. -190 to -128, ties 127.5, -128.5; "
                 "amax 2^-20: s16 underflows to 0, codes 0; amax 127 * 2^-24: s16 = 2^-24",
                 x, "row", 0, "float32", "float16",
                 check=lambda x, q, s: has_saturation(x[:2], q[:2], s[:2], "row", 0)
                 and list(s) == [10 * u, u, 0.0, u] and not q[2].any()
                 and q[3, :4].tolist() == [127, -127, 64, 1])

    t = 2.0**-149
    x = np.array([[190 * t, -190 * t, 128 * t, -129 * t, 127 * t, 3 * t, -2 * t, 0.0],
                  [63 * t, -63 * t, 5 * t, t, 0.0, 0.0, 0.0, 0.0],
                  [64 * t, -64 * t, 5 * t, -t, 0.0, 0.0, 0.0, 0.0]], F32)
    add_quantize(ff, "f32_subnormal_scales", "float32 scale 2^-149: ratios up to 190 saturate "
                 "to 127, -190 and -129 to -128; amax 63 * 2^-149: s rounds to 0, codes 0 in a "
                 "nonzero row; amax 64 * 2^-149: s = 2^-149", x, "row", 0, "float32", "float32",
                 check=lambda x, q, s: has_saturation(x[:1], q[:1], s[:1], "row", 0)
                 and list(s) == [t, 0.0, t] and not q[1].any()
                 and q[2, :4].tolist() == [64, -64, 5, -1])

    x = np.array([[1.0, -2.0, 3.0, 0.5, 0.25, -0.125, 7.0], [0.0] * 7,
                  [100.0, 50.0, -25.0, 12.5, 0.0, -0.0, 1.0], [-0.0, 0.0, -0.0] + [0.0] * 4], F32)
    add_quantize(ff, "zero_rows", "rows 1 and 3 all zero (+0 and -0): amax = 0, s = 0, codes 0", x,
                 "row", 0, "float32", "float32",
                 check=lambda x, q, s: s[1] == 0 and s[3] == 0 and not q[[1, 3]].any())

    xg = np.zeros((2, 96), F32)
    xg[0, :32] = np.linspace(-4, 4, 32).astype(F16).astype(F32)
    xg[0, 64:] = np.linspace(0.5, 96, 32).astype(F16).astype(F32)
    xg[1, 32:64] = -np.linspace(0.001, 1, 32).astype(F16).astype(F32)
    xg[1, 70] = -0.0
    add_quantize(ff, "zero_groups_f16", "per group of 32, fp16 source and scales: groups 1, 3 and "
                 "5 are zero (one holding -0): scale 0 and codes 0 there", xg, "group", 32,
                 "float16", "float16",
                 check=lambda x, q, s: s[1] == 0 and s[3] == 0 and s[5] == 0
                 and not q[0, 32:64].any() and not q[1, :32].any() and not q[1, 64:].any())

    x = np.array([[0.0, -0.0, 0.0], [-0.0, 0.0, 0.0]], F32)
    add_quantize(ff, "all_zero_tensor", "per tensor, every value +0 or -0: s = 0, codes 0", x,
                 "tensor", 0, "float32", "float32",
                 check=lambda x, q, s: s[0] == 0 and not q.any())

    x = np.array([[8319008.0, -8319008.0, 32752.0, -98256.0, 163760.0],
                  [8321039.0, -8321039.0, 32752.0, 98256.0, -163760.0]], F32)
    add_quantize(ff, "scale_f16_max", "fp16 scale at the largest finite value 65504: amax "
                 "65504 * 127 exactly, and amax / 127 = 65519.99 rounding down to 65504 "
                 "(ratios 0.5, 1.5, 2.5 tie)", x, "row", 0, "float32", "float16",
                 check=lambda x, q, s: list(s) == [65504.0, 65504.0]
                 and q[:, 2:].tolist() == [[0, -2, 2], [0, 2, -2]])

    # Codes computed with s16 = RN16(s) differ from codes computed with the float32 s.
    amax = F32(100.0)
    s32 = F32(amax / F32(127))
    vals = [float(F32(F32(k + 0.5) * s32)) for k in range(60, 127, 3)]
    x = np.array([[100.0] + vals + [-v for v in vals]], F32)

    def f16_changes(x, q, s):
        q32, _ = I.quantize(x, "row", 0, "float32")
        return float(s[0]) != float(s32) and not np.array_equal(q32, q)
    add_quantize(ff, "scale_f16_changes_codes", "amax 100: the fp16 scale RN16(100 / 127) differs "
                 "from the float32 one and near-tie codes computed with it differ", x, "row", 0,
                 "float32", "float16", check=f16_changes)

    x = np.array([[FLT_MAX, -FLT_MAX, 1e38, FLT_MIN, t, -1.0, 0.0],
                  [FLT_MIN, -FLT_MIN * 0.5, t, -t * 3, FLT_MIN * 0.25, 0.0, -0.0]], F32)
    add_quantize(ff, "f32_extremes", "float32 extremes: amax = FLT_MAX (tiny values give code 0) "
                 "and a row of subnormals and FLT_MIN", x, "row", 0, "float32", "float32",
                 check=lambda x, q, s: q[0, 0] == 127 and q[0, 1] == -127)
    x = np.array([[65504.0, -65504.0, u, -u, 1023 * u, 2.0**-14, -0.0, 1.0],
                  [1023 * u, -u, u * 512, 0.0, -0.0, u * 3, -u * 7, u]], F32)
    add_quantize(ff, "f16_src_extremes", "fp16 source: 65504, subnormals, -0; fp16 scales "
                 "RN16(65504 / 127) and a subnormal row scale", x, "row", 0, "float16", "float16")

    # Random cases: shapes with odd factors, every granularity, both source and scale types.
    rand = [
        (601, 13, 37, "tensor", 0, "float32", "float32", 4.0),
        (602, 1, 257, "row", 0, "float16", "float32", 2.0),
        (603, 37, 13, "row", 0, "float32", "float16", 1000.0),
        (604, 257, 1, "row", 0, "float32", "float32", 1.0),
        (605, 13, 64, "group", 32, "float16", "float16", 8.0),
        (606, 3, 128, "group", 64, "float32", "float16", 0.5),
        (607, 2, 256, "group", 128, "float32", "float32", 3.0),
        (608, 1, 1, "tensor", 0, "float16", "float16", 1.0),
    ]
    for seed, rows, cols, gran, grp, src, st, a in rand:
        d = Draws(seed)
        if src == "float16":
            x = d.f16u("x", -a, a, (rows, cols))
        else:
            x = d.uniform("x", -a, a, (rows, cols))
        tag = f"{gran}{grp if grp else ''}"
        add_quantize(ff, f"rand_{tag}_{rows}x{cols}_{src[5:]}_{st[5:]}",
                     f"random {rows} x {cols}, {gran}{' ' + str(grp) if grp else ''}, source "
                     f"{src}, {st} scales", x, gran, grp, src, st, prov=d.provenance())


# ---------------------------------------------------------------------------------------------
# dequant.h5
# ---------------------------------------------------------------------------------------------

def all_codes(rows: int) -> np.ndarray:
    return np.tile(np.arange(-128, 128, dtype=np.int64), (rows, 1)).astype(np.int8)


def exact_product(q: int, s) -> Fraction:
    return Fraction(q) * Fraction(float(s))


def find_double_rounding() -> tuple[int, float]:
    """(q, s) with s float32 such that RN16(RN32(q * s)) != RN16(q * s): RN32 lands on an fp16
    midpoint that the exact product is not on."""
    mid = 1.0 + 2.0**-11          # midpoint between fp16 1.0 and 1 + 2^-10
    for q in (3, 5, 7, 11, 13, 127):
        s0 = F32(mid / q)
        for d in range(-40, 41):
            s = s0
            for _ in range(abs(d)):
                s = np.nextafter(s, F32(np.inf if d > 0 else -np.inf), dtype=F32)
            p32 = F32(F32(q) * s)
            # above the midpoint: one rounding goes up, RN16 of the midpoint goes to even (down)
            if float(p32) == mid and exact_product(q, s) > Fraction(mid):
                return q, float(s)
    raise AssertionError("no double-rounding pair found")


def build_dequant(ff: FixtureFile) -> None:
    add_dequant(ff, "all_codes_f32", "every code -128 .. 127 with float32 scales 1 and 0.5 "
                "(exact products)", all_codes(2), [1.0, 0.5], "row", 0, "float32")

    u = 2.0**-24
    sc = [u, 1023 * u, 2.0**-14, 65504.0, 0.0, 1.0, 0.333251953125]
    add_dequant(ff, "all_codes_f16_scales", "every code with fp16 scales 2^-24, the largest "
                "subnormal, 2^-14, 65504 (fp16 output overflows to +-inf), 0 (negative codes give "
                "-0), 1, RN16(1/3)", all_codes(len(sc)), sc, "row", 0, "float16",
                check=lambda q, s, y32, y16: np.isinf(y16[3]).any()
                and np.signbit(y32[4][q[4] < 0]).all() and not np.signbit(y32[4][q[4] >= 0]).any())

    qd, sd = find_double_rounding()
    q = np.array([[qd, -qd, 1, -1, 127, -128]], np.int8)

    def double_rounds(q, s, y32, y16):
        exact = Fraction(qd) * Fraction(sd)
        one_rounding = F16(float(exact))   # Fraction -> float64 is exact here (< 53 bits)
        return float(y16[0, 0]) != float(one_rounding)
    add_dequant(ff, "f16_output_double_rounding", f"float32 scale chosen so that RN32({qd} * s) "
                "is an fp16 midpoint the exact product is not: RN16(RN32(q s)) differs from one "
                "rounding", q, [sd], "tensor", 0, "float32", check=double_rounds)

    t = 2.0**-149
    big = 1.5 * 2.0**126
    sc = [t, 3 * t, 1.5 * FLT_MIN, big, FLT_MAX, 0.0]
    some = np.array([-128, -127, -65, -64, -3, -2, -1, 0, 1, 2, 3, 5, 63, 64, 126, 127], np.int8)

    def f32_edges(q, s, y32, y16):
        return (np.isinf(y32[3]).any() and np.isinf(y16[4]).any()
                and np.signbit(y32[5][q[5] < 0]).all())
    add_dequant(ff, "f32_scale_extremes", "float32 scales 2^-149, 3 * 2^-149, "
                "1.5 * 2^-126, 1.5 * 2^126 (q s overflows to +-inf), FLT_MAX, 0; 16 codes from -128 to 127",
                np.tile(some, (len(sc), 1)),
                sc, "row", 0, "float32", check=f32_edges)

    def inexact(q, s, y32, y16):
        return any(exact_product(int(q[r, c]), s[r if len(s) > 1 else 0]) != Fraction(float(y32[r, c]))
                   for r in range(q.shape[0]) for c in range(q.shape[1]))
    rand = [
        (701, 13, 37, "tensor", 0, "float32"),
        (702, 37, 13, "row", 0, "float16"),
        (703, 257, 1, "row", 0, "float32"),
        (704, 4, 64, "group", 32, "float16"),
        (705, 2, 128, "group", 64, "float32"),
        (706, 1, 256, "group", 128, "float16"),
    ]
    for seed, rows, cols, gran, grp, st in rand:
        d = Draws(seed)
        q = d.codes("q", (rows, cols))
        n = I.scale_count(rows, cols, gran, grp)
        s = (d.f16u if st == "float16" else d.uniform)("scales", 2.0**-12, 2.0**-4, (n,))
        tag = f"{gran}{grp if grp else ''}"
        add_dequant(ff, f"rand_{tag}_{rows}x{cols}_{st[5:]}", f"random codes {rows} x {cols}, "
                    f"{gran}{' ' + str(grp) if grp else ''}, {st} scales", q, s, gran, grp, st,
                    prov=d.provenance(), check=inexact if st == "float32" and n > 1 else None)


# ---------------------------------------------------------------------------------------------
# w8a8.h5
# ---------------------------------------------------------------------------------------------

def epilogue_variants(acc, sa, sb, bias, relu):
    """Outputs of wrong epilogue orders, [M, N] float32 each (for the mutant claim)."""
    M, N = acc.shape
    out = {k: np.zeros((M, N), F32) for k in ("sa_first", "fused_scale", "bias_first",
                                              "relu_first")}
    with np.errstate(all="ignore"):
        for m in range(M):
            for n in range(N):
                a = I.f32_of_int(int(acc[m, n]))
                s_a, s_b = sa[m if len(sa) > 1 else 0], sb[n if len(sb) > 1 else 0]
                b = F32(0.0) if bias is None else bias[n]

                def tail(t, relu_=relu):
                    t = F32(t + b) if bias is not None else t
                    return t if not relu_ or np.isnan(t) or t > 0 else F32(0.0)
                out["sa_first"][m, n] = tail(F32(F32(a * s_a) * s_b))
                out["fused_scale"][m, n] = tail(F32(a * F32(s_a * s_b)))
                t = F32(a + b) if bias is not None else a
                t = F32(F32(t * s_b) * s_a)
                out["bias_first"][m, n] = t if not relu or t > 0 else F32(0.0)
                t = F32(F32(a * s_b) * s_a)
                t = t if not relu or t > 0 else F32(0.0)
                out["relu_first"][m, n] = F32(t + b) if bias is not None else t
    return out


def target_row(target: int, K: int) -> np.ndarray:
    """A B row with sum_k A0[k] B[k] = target for A0 = [127] * (K - 1) + [1]."""
    last = target % 127
    if last > 63:
        last -= 127
    S = (target - last) // 127
    assert abs(S) <= 128 * (K - 1)
    row = np.zeros(K, np.int64)
    left = S
    for k in range(K - 1):
        step = max(-128, min(127, left))
        row[k] = step
        left -= step
    assert left == 0
    row[K - 1] = last
    return row.astype(np.int8)


def build_w8a8(ff: FixtureFile) -> None:
    for seed, bias_type, relu in ((801, "float32", False), (802, "float16", True)):
        d = Draws(seed)
        M, N, K = 4, 8, 16
        A = d.codes("A", (M, K))
        B = d.codes("B", (N, K))
        sa = d.uniform("sa", 2.0**-9, 2.0**-5, (M,))
        sb = d.uniform("sb", 2.0**-9, 2.0**-5, (N,))
        bias = (d.f16u if bias_type == "float16" else d.uniform)("bias", -1.0, 1.0, (N,))

        def order_matters(acc, y32, y16, sa=sa, sb=sb, bias=bias, relu=relu):
            v = epilogue_variants(acc, sa, sb, bias, relu)
            return all(not np.array_equal(f32b(alt), f32b(y32)) for k, alt in v.items()
                       if k != "relu_first" or relu)
        add_w8a8(ff, f"epilogue_order_{bias_type[5:]}{'_relu' if relu else ''}",
                 "random 4 x 8 x 16, per-channel scales: applying sa before sb, the product "
                 "sa * sb, the bias before the scales" + (", or relu before the bias" if relu else "")
                 + " gives other bits", A, B, sa, sb, bias, bias_type, relu, prov=d.provenance(),
                 check=order_matters)

    K = 1057
    A = np.array([[127] * (K - 1) + [1], [-127] * (K - 1) + [-1]], np.int8)
    targets = [2**24 + 1, 2**24 + 3, 2**24 + 5, 2**24 + 7, 2**24 - 1]
    B = np.stack([target_row(t, K) for t in targets])

    def float_ties(acc, y32, y16):
        want = [2**24, 2**24 + 4, 2**24 + 4, 2**24 + 8, 2**24 - 1]
        return (acc[0].tolist() == targets and acc[1].tolist() == [-v for v in targets]
                and y32[0].tolist() == want and y32[1].tolist() == [-v for v in want])
    add_w8a8(ff, "acc_to_float_ties", "(float) acc at 2^24 + 1, + 3, + 5, + 7 (ties, to even) and "
             "2^24 - 1 (exact), and their negatives (scales 1, K = 1057)", A, B,
             [1.0], [1.0], check=float_ties)

    kmax = I.K_MAX
    add_w8a8(ff, "acc_max_k131071", "K = 131071, all -128 x -128: acc = 2^31 - 2^14, the largest "
             "int32 accumulation allowed (A, B stored as fill values)", None, None,
             [2.0**-16], [2.0**-15], fill=(1, 1, kmax, -128, -128),
             check=lambda acc, y32, y16: int(acc[0, 0]) == 2**31 - 2**14)
    add_w8a8(ff, "acc_min_k131071", "K = 131071, all -128 x 127: acc = -131071 * 16256, the most "
             "negative accumulation (A, B stored as fill values)", None, None, [2.0**-20],
             [2.0**-11], fill=(1, 1, kmax, -128, 127), relu=True, bias=[3000.0],
             bias_type="float32", check=lambda acc, y32, y16: int(acc[0, 0]) == -131071 * 16256)

    A = np.array([[3, -5, 7, 1], [-2, 4, 0, 9]], np.int8)
    B = np.array([[1, 2, 3, 4]] * 8, np.int8)
    sp = [math.nan, math.inf, -math.inf, -0.0, 0.0, FLT_MAX, 2.0**-149, 1.5]
    add_w8a8(ff, "bias_special_f32", "float32 bias NaN, +inf, -inf, -0, +0, FLT_MAX, 2^-149, 1.5; "
             "no relu", A, B, [0.5, 0.25], [1.0] * 8, sp, "float32",
             check=lambda acc, y32, y16: np.isnan(y32[:, 0]).all() and np.isinf(y32[:, 1:3]).all())
    sp16 = [math.nan, math.inf, -math.inf, -0.0, 65504.0, 2.0**-24, -1000.0, 0.5]
    add_w8a8(ff, "bias_special_f16_relu", "fp16 bias NaN, +inf, -inf, -0, 65504, 2^-24, -1000, "
             "0.5 with relu: NaN stays NaN, -inf and negatives become +0", A, B, [0.5, 0.25],
             [1.0] * 8, sp16, "float16", relu=True,
             check=lambda acc, y32, y16: np.isnan(y32[:, 0]).all()
             and (f32b(y32[:, 2]) == 0).all() and (f32b(y32[:, 6]) == 0).all())

    A = np.array([[-1]], np.int8)
    B = np.array([[1], [2], [0], [-1]], np.int8)
    s = [2.0**-100]
    add_w8a8(ff, "negzero_norelu", "acc -1, -2 times scales 2^-100 and 2^-100 underflow to -0, "
             "kept without relu (acc 0 and 1 give +0)", A, B, s, s,
             check=lambda acc, y32, y16: f32b(y32[0]).tolist() == [0x80000000, 0x80000000, 0, 0]
             and y16.view(np.uint16)[0].tolist() == [0x8000, 0x8000, 0, 0])
    add_w8a8(ff, "negzero_relu", "relu at -0: t = -0 becomes +0", A, B, s, s, relu=True,
             check=lambda acc, y32, y16: (f32b(y32) == 0).all())
    add_w8a8(ff, "negzero_bias_f16", "-0 + bias -0 stays -0, -0 + (+0) is +0, no relu", A, B, s,
             s, [-0.0, 0.0, -0.0, 0.0], "float16",
             check=lambda acc, y32, y16: f32b(y32[0]).tolist() == [0x80000000, 0, 0, 0])

    A = np.array([[127, 127]], np.int8)
    B = np.array([[127, 127], [-128, -128], [127, 127], [0, 0], [-128, -128]], np.int8)
    big = [2.0**100]
    bias = [-math.inf, 1.0, math.nan, math.inf, math.nan]
    for relu in (False, True):
        add_w8a8(ff, f"overflow_nan{'_relu' if relu else ''}", "scales 2^100 overflow t to +-inf; "
                 "bias -inf gives inf - inf = NaN, bias NaN, +inf on acc 0" +
                 ("; relu keeps NaN, turns -inf into +0" if relu else ""), A, B, big, big, bias,
                 "float32", relu=relu,
                 check=lambda acc, y32, y16, relu=relu: np.isnan(y32[0, [0, 2, 4]]).all()
                 and (f32b(y32[0, 1:2]).tolist() == ([0] if relu else [0xFF800000])))

    A = np.array([[1]], np.int8)
    tg = [65504.0, 65519.99609375, 65520.0, 65520.0, 1.5 * 2.0**-24, 0.5 * 2.0**-24,
          2.5 * 2.0**-24, 1 + 2.0**-11, 1 + 3 * 2.0**-11, 2.0**-25]
    sign = [1, 1, 1, -1, 1, 1, -1, 1, 1, -1]
    B = np.array([[sg] for sg in sign], np.int8)
    want16 = [0x7BFF, 0x7BFF, 0x7C00, 0xFC00, 0x0002, 0x0000, 0x8002, 0x3C00, 0x3C02, 0x8000]
    add_w8a8(ff, "f16_output_edges", "fp16 output: 65504, 65519.996 (rounds to 65504), +-65520 "
             "(+-inf), subnormal ties 1.5, 0.5, -2.5 x 2^-24, ties at 1 + 2^-11 and 1 + 3 * 2^-11, "
             "-2^-25 (-0)", A, B, [1.0], tg,
             check=lambda acc, y32, y16: y16.view(np.uint16)[0].tolist() == want16)

    rand = [
        (811, 1, 1, 1, "none", False, False),
        (812, 13, 37, 257, "float32", True, False),
        (814, 1, 257, 13, "none", True, False),
        (815, 257, 1, 13, "float32", False, False),
        (816, 16, 16, 8, "float16", True, False),
        (817, 13, 37, 37, "float16", True, True),
    ]
    for seed, M, N, K, bias_type, relu, per_tensor in rand:
        d = Draws(seed)
        A = d.codes("A", (M, K))
        B = d.codes("B", (N, K))
        sa = d.uniform("sa", 2.0**-10, 2.0**-6, (1 if per_tensor else M,))
        sb = d.uniform("sb", 2.0**-10, 2.0**-6, (1 if per_tensor else N,))
        bias = None
        if bias_type != "none":
            bias = (d.f16u if bias_type == "float16" else d.uniform)("bias", -4.0, 4.0, (N,))
        name = (f"rand_{M}x{N}x{K}" + ("" if bias_type == "none" else f"_bias_{bias_type[5:]}")
                + ("_relu" if relu else "") + ("_per_tensor" if per_tensor else ""))
        add_w8a8(ff, name, f"random {M} x {N} x {K}, "
                 f"{'per-tensor' if per_tensor else 'per-token x per-channel'} scales, bias "
                 f"{bias_type}, relu {int(relu)}", A, B, sa, sb, bias, bias_type, relu,
                 prov=d.provenance())


# ---------------------------------------------------------------------------------------------
# w8a16.h5
# ---------------------------------------------------------------------------------------------

def build_w8a16(ff: FixtureFile) -> None:
    rand = [
        (901, 1, 13, 257, "float16"),
        (902, 16, 13, 37, "float32"),
        (903, 4, 37, 8, "float16"),
        (904, 1, 1, 1, "float32"),
        (905, 1, 257, 13, "float32"),
    ]
    for seed, M, N, K, st in rand:
        d = Draws(seed)
        B = d.codes("B", (N, K))
        sb = (d.f16u if st == "float16" else d.uniform)("sb", 2.0**-10, 2.0**-4, (N,))
        X = d.f16u("X", -2.0, 2.0, (M, K))
        add_w8a16(ff, f"rand_{M}x{N}x{K}_{st[5:]}", f"random batch {M}, N {N}, K {K}, {st} "
                  "scales", B, sb, st, X, prov=d.provenance())

    u = 2.0**-24
    B = np.array([[127, -128, 1, -1, 0, 64, -64, 2]] * 5, np.int8)
    X = np.array([[65504.0, 65504.0, u, -u, 1.0, 0.5, -0.25, 2.0**-14],
                  [-65504.0, 1.0, 1023 * u, 2.0, 3.0, -0.0, 0.0, 100.0]], F32)
    add_w8a16(ff, "scale_extremes_f16", "fp16 scales 2^-24, the largest subnormal, 65504, 0, "
              "RN16(0.1) against fp16 activations at 65504 and subnormals", B,
              [u, 1023 * u, 65504.0, 0.0, 0.0999755859375], "float16", X,
              check=lambda y, a: (y[:, 3] == 0).all() and (a[:, 3] == 0).all()
              and abs(y[0, 2]) > 2**31)
    add_w8a16(ff, "scale_extremes_f32", "float32 scales 2^-149, FLT_MAX (terms near 2^149, exact in "
              "float64), 1/3, 1.5 * 2^-126, 0", B,
              [2.0**-149, FLT_MAX, float(F32(1 / 3)), 1.5 * FLT_MIN, 0.0], "float32", X,
              check=lambda y, a: np.isfinite(y).all() and abs(y[0, 1]) > 2**140)

    B = np.array([[127, 1, 127, -1], [1, 1, 1, 1], [127, -128, 64, -63]], np.int8)
    X = np.array([[65504.0, 2.0**-14, -65504.0, 2.0**-14], [1.0, -1.0, 1.0, -1.0],
                  [2.0**-24, 2.0**-24, -2.0**-24, 1.0]], F32)
    add_w8a16(ff, "cancellation", "exact cancellation (ystar 0 with sum_abs ~ 2^24) and a large "
              "pair cancelling around small terms: the float64 sum must be exact", B,
              [1.0, 0.5, 0.25], "float16", X,
              check=lambda y, a: y[1, 1] == 0 and a[1, 1] == 2.0 and y[0, 0] == 0 and a[0, 0] > 2**23)

    B = np.array([[1, -2, 3, 0], [0, 0, 0, 0], [-128, 127, 0, 5]], np.int8)
    X = np.array([[-0.0, 0.0, u, -65504.0], [math.inf, 1.0, 2.0, 3.0],
                  [math.nan, 1.0, -1.0, 0.5], [math.inf, math.inf, 1.0, 1.0]], F32)
    add_w8a16(ff, "special_activations", "fp16 activations -0, +0, subnormal, -65504, +inf "
              "(B = 0 makes inf * 0 = NaN), NaN, and +inf twice against weights of opposite signs (inf - inf = NaN)", B,
              [0.5, 0.25, 2.0**-7], "float16", X,
              check=lambda y, a: np.isinf(y[1, 0]) and np.isnan(y[1, 1]) and np.isnan(y[2]).all()
              and np.isnan(y[3, 0]) and np.isfinite(y[0]).all())


# ---------------------------------------------------------------------------------------------
# invalid.h5
# ---------------------------------------------------------------------------------------------

def expect_error(error: str, fn, *args) -> None:
    try:
        fn(*args)
    except I.Int8Error as e:
        assert e.name == error, f"expected {error}, the generator raised {e}"
        return
    raise AssertionError(f"expected {error}, the generator accepted the input")


def build_invalid(ff: FixtureFile) -> None:
    def quant(name, description, error, x, gran="row", group=0, src="float32", st="float32",
              rows=None, cols=None):
        x = np.asarray(x, F32)
        expect_error(error, I.quantize, x, gran, group, st)
        r, c = x.shape
        g = _case(ff, name, "quantize", description, None, expect="invalid", error=error,
                  rows=r if rows is None else rows, cols=c if cols is None else cols,
                  granularity=gran, group=group, src_type=src, scale_type=st)
        if src == "float16":
            ff.add_dataset(g, "x", f16b(x), bit_dtype="float16")
        else:
            ff.add_dataset(g, "x", f32b(x), bit_dtype="float32")

    quant("quantize_nan", "a NaN among the values to quantize", "int_nonfinite_input",
          [[1.0, math.nan, 2.0], [0.0, 0.0, 0.0]])
    quant("quantize_inf_f16", "+inf in an fp16 source", "int_nonfinite_input",
          [[1.0, 2.0], [math.inf, 0.0]], src="float16", st="float16")
    quant("quantize_group_not_dividing", "group 64 does not divide cols 96", "int_group_invalid",
          np.ones((1, 96), F32), gran="group", group=64)
    quant("quantize_f16_scale_overflow", "amax 8321040: amax / 127 = 65520 rounds to fp16 inf, a "
          "scale that cannot be stored", "int_scale_invalid", [[8321040.0, 1.0]], st="float16")
    quant("quantize_rows_zero", "rows = 0", "shape_invalid", np.zeros((0, 4), F32))

    def deq(name, description, error, q, scales, gran="row", group=0, st="float32"):
        q = np.asarray(q, np.int8)
        scales = np.asarray(scales, F32)
        expect_error(error, I.dequant, q, scales, gran, group)
        g = _case(ff, name, "dequant", description, None, expect="invalid", error=error,
                  rows=q.shape[0], cols=q.shape[1], granularity=gran, group=group,
                  scale_type=st)
        ff.add_dataset(g, "q", q)
        if st == "float16":
            ff.add_dataset(g, "scales", f16b(scales), bit_dtype="float16")
        else:
            ff.add_dataset(g, "scales", f32b(scales), bit_dtype="float32")

    q = np.array([[1, -2, 3], [4, 5, -6]], np.int8)
    deq("dequant_scale_negative", "a negative float32 scale", "int_scale_invalid", q, [1.0, -0.5])
    deq("dequant_scale_nan", "a NaN float32 scale", "int_scale_invalid", q, [math.nan, 1.0])
    deq("dequant_scale_inf_f16", "an fp16 scale +inf", "int_scale_invalid", q, [1.0, math.inf],
        st="float16")
    deq("dequant_scales_count", "3 scales for 2 rows", "size_mismatch", q, [1.0, 1.0, 1.0])
    deq("dequant_group_invalid", "group 32 does not divide cols 3", "int_group_invalid", q,
        [1.0, 1.0], gran="group", group=32)

    def mm(name, description, error, A, B, sa, sb, bias=None, bias_type="none", relu=False,
           fill=None, K=None):
        if fill is None:
            A = np.asarray(A, np.int8)
            B = np.asarray(B, np.int8)
            M, Ka = A.shape
            N = B.shape[0]
            expect_error(error, I.check_w8a8, A, B, sa, sb, bias)
        else:
            M, N, Ka, a, b = fill
            expect_error(error, I.check_w8a8, np.empty((M, Ka)), np.empty((N, Ka)), sa, sb, bias)
        g = _case(ff, name, "w8a8", description, None, expect="invalid", error=error, M=M, N=N,
                  K=Ka if K is None else K, relu=int(relu), bias=bias_type, sa_len=len(sa),
                  sb_len=len(sb))
        if fill is None:
            ff.add_dataset(g, "A", A)
            ff.add_dataset(g, "B", B)
        else:
            _fill_dataset(g, "A", (M, Ka), fill[3])
            _fill_dataset(g, "B", (N, Ka), fill[4])
        ff.add_dataset(g, "sa", f32b(sa), bit_dtype="float32")
        ff.add_dataset(g, "sb", f32b(sb), bit_dtype="float32")
        if bias_type == "float32":
            ff.add_dataset(g, "bias", f32b(bias), bit_dtype="float32")
        elif bias_type == "float16":
            ff.add_dataset(g, "bias", f16b(bias), bit_dtype="float16")

    A = np.array([[1, 2, 3], [4, 5, 6]], np.int8)
    B = np.array([[1, 0, -1]], np.int8)
    mm("w8a8_k_too_large", "K = 131072 = K_MAX + 1 (A, B as fill values -128)",
       "int_k_too_large", None, None, [1.0], [1.0], fill=(1, 1, I.K_MAX + 1, -128, -128))
    mm("w8a8_sa_nan", "sa[1] is NaN", "int_nonfinite_input", A, B, [1.0, math.nan], [1.0])
    mm("w8a8_sb_inf", "sb per tensor is +inf", "int_nonfinite_input", A, B, [1.0], [math.inf])
    mm("w8a8_sb_negative", "sb[0] is negative", "int_scale_invalid", A, B, [1.0, 1.0], [-0.5])
    mm("w8a8_k_zero", "K = 0", "shape_invalid", np.zeros((2, 0)), np.zeros((1, 0)), [1.0], [1.0])
    mm("w8a8_b_k_mismatch", "B has 4 columns for K = 3", "size_mismatch", A,
       np.array([[1, 0, -1, 2]], np.int8), [1.0], [1.0])
    mm("w8a8_sa_count", "3 sa values for M = 2", "size_mismatch", A, B, [1.0, 1.0, 1.0], [1.0])
    def w16(name, description, error, B, sb, X, st="float16"):
        B = np.asarray(B, np.int8)
        X = np.asarray(X, F32)
        expect_error(error, I.check_w8a16, B, np.asarray(sb, F32), X)
        g = _case(ff, name, "w8a16", description, None, expect="invalid", error=error,
                  M=X.shape[0], N=B.shape[0], K=B.shape[1], scale_type=st)
        ff.add_dataset(g, "B", B)
        if st == "float16":
            ff.add_dataset(g, "sb", f16b(sb), bit_dtype="float16")
        else:
            ff.add_dataset(g, "sb", f32b(sb), bit_dtype="float32")
        ff.add_dataset(g, "X", f16b(X), bit_dtype="float16")

    B = np.array([[1, -1, 2], [3, 0, -4]], np.int8)
    X = np.array([[1.0, 0.5, -2.0]], F32)
    w16("w8a16_sb_negative", "sb[1] is negative (fp16)", "int_scale_invalid", B, [1.0, -1.0], X)
    w16("w8a16_sb_inf", "sb[0] is +inf (fp16)", "int_nonfinite_input", B, [math.inf, 1.0], X)
    w16("w8a16_x_k_mismatch", "X has 2 columns for K = 3", "size_mismatch", B, [1.0, 1.0],
        np.array([[1.0, 2.0]], F32))
    w16("w8a16_m_zero", "batch M = 0", "shape_invalid", B, [1.0, 1.0], np.zeros((0, 3), F32))


FAMILIES = [("quantize", build_quantize), ("dequant", build_dequant), ("w8a8", build_w8a8),
            ("w8a16", build_w8a16), ("invalid", build_invalid)]


def families() -> list[tuple[str, str, callable]]:
    return [(FORMAT, fam, build) for fam, build in FAMILIES]
