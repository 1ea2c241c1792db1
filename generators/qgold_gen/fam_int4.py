"""Families of the int4 formats: golden/int4/<family>.h5 (schema: reference/spec/intq.md).

  quantize.h5  path quantize       x -> expected_q (codes -8..7), expected_scales
  dequant.h5   path dequant        q, scales -> expected_f32, expected_f16
  gemm.h5      path gemm_packed    A_packed, B_packed, sa, sb, bias, relu -> expected_acc/_f32/_f16
  decode.h5    path w4a16_decode   canonical layout -> expected_w (float32, exact)
  gemv.h5      path w4a16_gemv     canonical layout, x fp16 [batch, K] -> ystar, sum_abs
  import.h5    paths import_gptq, import_awq: checkpoint words -> the canonical layout
  invalid.h5   every path, expect = invalid: inputs only, each case breaking one rule, its error

Random inputs: one pinned stream per case (rng.md), distribution "u64"; every derived draw
(int_range, uniform, permutation of rng.md) consumes the stream in the order the attribute
`transform` lists, `count` is the total number of draws. fp16 values are uniform float32 draws
rounded once to fp16 (RN16). Act-order: g_idx[k] = p[k] / g for a permutation p of 0..K-1 drawn
from the stream (act_order = "random"), or g_idx[k] = k / g stored explicitly ("identity").

Every builder checks at generation time that the edge it claims is in its data (ties, saturation,
padding nibbles, negative int32 words, the error an invalid case raises).
"""

from __future__ import annotations

import numpy as np

from . import fp16
from . import int4 as I4
from .rng import Stream
from .schema import FixtureFile

FORMAT = "int4"
FORMAT_VERSION = 1
F32 = np.float32


# ---------------------------------------------------------------------------------------------
# Draws from one stream
# ---------------------------------------------------------------------------------------------

class Draws:
    """One stream drawn in order; provenance() gives the case attributes describing the draws."""

    def __init__(self, seed: int):
        self.seed = seed
        self.stream = Stream(seed)
        self.parts: list[str] = []

    def _note(self, what: str, dist: str, count: int) -> None:
        if count:
            self.parts.append(f"{what} {dist} x{count}")

    def ints(self, what: str, n: int, count: int) -> np.ndarray:
        self._note(what, f"int_range({n})", count)
        return self.stream.int_range_array(n, count).astype(np.int64)

    def uniform(self, what: str, a: float, b: float, count: int) -> np.ndarray:
        self._note(what, f"uniform({float(a)!r},{float(b)!r})", count)
        return self.stream.uniform_array(a, b, count)

    def f16u(self, what: str, a: float, b: float, count: int) -> np.ndarray:
        self._note(what, f"RN16(uniform({float(a)!r},{float(b)!r}))", count)
        return I4.f16_bits(self.stream.uniform_array(a, b, count))

    def perm(self, what: str, n: int) -> np.ndarray:
        self._note(what, f"permutation({n})", max(n - 1, 0))
        return self.stream.permutation_array(n).astype(np.int64)

    def note(self, text: str) -> None:
        self.parts.append(text)

    def provenance(self) -> dict:
        return {"seed": self.seed, "distribution": "u64", "count": self.stream.counter,
                "transform": "; ".join(self.parts)}


def f16(v: float) -> int:
    return int(I4.f16_bits([v])[0])


def f32b(values) -> np.ndarray:
    return fp16.f32_bits(np.asarray(values, F32))


def _case(ff: FixtureFile, name: str, path: str, description: str, prov: dict | None, **attrs):
    # the C loader reads names into 64 bytes and descriptions into 256 (with the terminator)
    assert len(name) < 64 and len(description.encode("utf-8")) < 256, name
    assert len((prov or {}).get("transform", "").encode("utf-8")) < 256, name
    return ff.add_case(name, format_version=FORMAT_VERSION, path=path, description=description,
                       **dict(prov or {}), **attrs)


# ---------------------------------------------------------------------------------------------
# quantize.h5, dequant.h5
# ---------------------------------------------------------------------------------------------

def _x_bits(x, src_type):
    return I4.f16_bits(x) if src_type == "float16" else f32b(x)


def add_quantize(ff, name, description, x, granularity, group, scale_type, src_type="float32",
                 prov=None, check=None):
    xb = _x_bits(x, src_type)
    xv = I4.f16_values(xb) if src_type == "float16" else fp16.f32_values(xb)
    q, sb, info = I4.quantize(xv, granularity, group, scale_type)
    if check is not None:
        assert check(q, sb, info), name
    rows, cols = xv.shape
    g = _case(ff, name, "quantize", description, prov, rows=rows, cols=cols,
              granularity=granularity, group=group if granularity == "group" else 0,
              src_type=src_type, scale_type=scale_type)
    ff.add_dataset(g, "x", xb.reshape(rows, cols), bit_dtype=src_type)
    ff.add_dataset(g, "expected_q", q)
    ff.add_dataset(g, "expected_scales", sb, bit_dtype=scale_type)
    return q, sb, info


def ties(q, sb, info, x, scale_type):
    """Both signs of an exact half-way v / s present (computed independently in float64)."""
    s = I4.scale_values(sb, scale_type).astype(np.float64)
    r = np.asarray(x, np.float64) / s[:, None]
    frac = r - np.floor(r)
    return bool(((frac == 0.5) & (r > 0)).any() and ((frac == 0.5) & (r < 0)).any())


def build_quantize(ff: FixtureFile) -> None:
    def rand(seed, rows, cols, a, b, src="float32"):
        dr = Draws(seed)
        if src == "float16":
            x = I4.f16_values(dr.f16u("x", a, b, rows * cols)).reshape(rows, cols)
        else:
            x = dr.uniform("x", a, b, rows * cols).reshape(rows, cols)
        return x, dr

    spec = [  # name, rows, cols, granularity, group, scale, src, range
        ("row_f32", 4, 64, "row", 0, "float32", "float32", 1.0),
        ("row_f16scale", 4, 64, "row", 0, "float16", "float32", 1.0),
        ("group32_f32", 3, 128, "group", 32, "float32", "float32", 4.0),
        ("group64_f16src_f16scale", 2, 128, "group", 64, "float16", "float16", 2.0),
        ("group128_f32", 1, 256, "group", 128, "float32", "float32", 1000.0),
        ("tensor_f16scale_f16src", 3, 16, "tensor", 0, "float16", "float16", 0.5),
        ("odd_13x37_row_f16src", 13, 37, "row", 0, "float32", "float16", 60000.0),
    ]
    for i, (name, rows, cols, gran, group, st, src, a) in enumerate(spec):
        x, dr = rand(100 + i, rows, cols, -a, a, src)
        what = f"{gran}" + (f" {group}" if group else "")
        add_quantize(ff, name, f"random {rows} x {cols}, {what} scales ({st}), {src} input",
                     x, gran, group, st, src, dr.provenance())

    # zero rows and a zero group: amax = 0 gives s = 0 and codes 0 (-0.0 inputs included)
    x, dr = rand(121, 4, 64, -1.0, 1.0)
    x[1, :] = 0.0
    x[3, ::2] = -0.0
    x[3, 1::2] = 0.0
    x[2, 32:] = 0.0
    dr.note("then rows 1 and 3 and x[2, 32:] set to zero (row 3 alternating -0.0, +0.0)")
    add_quantize(ff, "zero_rows_group32_f16", "rows 1, 3 and one group of row 2 all zero (amax = 0: "
                 "scale 0, codes 0), fp16 scales", x, "group", 32, "float16", "float32",
                 dr.provenance(), check=lambda q, sb, info: (sb == 0).sum() == 5)

    # ties: amax = 7 * 2^e gives s = 2^e exactly; v = (k + 1/2) 2^e is a half-way case of both signs
    halves = [7.0] + [h for k in range(7) for h in (k + 0.5, -(k + 0.5))] + [-7.0]
    base = np.array(halves, np.float64)                              # 16 values
    for st in ("float32",):
        x = np.stack([base, base * 0.125, -base * 64.0, base * 2.0**-10]).astype(F32)
        assert np.array_equal(x.astype(np.float64), np.stack([base, base * 0.125, -base * 64.0,
                                                              base * 2.0**-10]))
        add_quantize(ff, f"ties_f{st[5:]}", "v / s = k + 0.5 exactly for k = 0..6, both signs, "
                     f"scale a power of two ({st}): round half to even", x, "row", 0, st,
                     check=lambda q, sb, info, x=x, st=st: ties(q, sb, info, x, st)
                     and np.array_equal(q[0], np.array([7, 0, 0, 2, -2, 2, -2, 4, -4, 4, -4, 6,
                                                        -6, 6, -6, -7], np.int8)))

    # saturation: an fp16 scale rounded down (subnormal: 10/7 * 2^-24 -> 2^-24) lets v / s reach
    # 10 and -10; 8.5 -> 8 saturates to 7, -8.5 -> -8 (even) does not saturate, -9 -> -8
    t = 2.0**-24
    sat = [10, -10, 8.5, -8.5, -9, 7.5, -7.5, 9, 8, -8, 1, -1, 0.5, -0.5, 1.5, 0]
    row1 = [v * 1.6 / 1.6 for v in sat]
    x = np.array([[v * t for v in sat], [v * t * 1.12 for v in row1]], np.float64)
    x = x.astype(F32)
    add_quantize(ff, "saturation_f16_subnormal_scale", "fp16 scale RN16(10/7 2^-24) = 2^-24 "
                 "(rounded down): v / s reaches +-10, 8.5 and -9, codes saturate to 7 and -8",
                 x, "row", 0, "float16",
                 check=lambda q, sb, info: info["presat"].max() >= 8 and info["presat"].min() <= -9
                 and q.max() == 7 and q.min() == -8 and int(sb[0]) == 0x0001)
    # float32 path: subnormal float32 inputs; s = RN32(10 * 2^-149 / 7) = 2^-149 saturates too
    k = np.array([10, -10, 9, -9, 8, -8, 7, 3, -3, 1, -1, 0, 5, -6, 2, -2], np.float64)
    x = np.stack([k * 2.0**-149, k * 2.0**-140, k * 2.0**-130]).astype(F32)
    assert np.array_equal(x.astype(np.float64), np.stack([k * 2.0**-149, k * 2.0**-140,
                                                          k * 2.0**-130]))
    add_quantize(ff, "saturation_f32_subnormal", "float32 subnormal inputs: s = RN32(amax / 7) "
                 "rounds (2^-149 for amax 10 * 2^-149), v / s reaches +-10: saturation",
                 x, "row", 0, "float32",
                 check=lambda q, sb, info: info["presat"][0].max() == 10
                 and info["presat"][0].min() == -10 and q.min() == -8 and q.max() == 7)

    # fp16 scale ranges: subnormal (random), rounded up (s16 > s), the largest fp16, underflow to 0
    x, dr = rand(130, 4, 32, -7.0 * 2.0**-19, 7.0 * 2.0**-19)
    add_quantize(ff, "f16scale_subnormal", "amax around 7 * 2^-19: fp16 scales subnormal "
                 "(below 2^-14), coarse", x, "row", 0, "float16", "float32", dr.provenance(),
                 check=lambda q, sb, info: bool(((sb & 0x7C00) == 0).all() and (sb != 0).all()))
    up = np.array([1.6 * 7.0 * t, -1.6 * 7.0 * t * 0.5, 1.6 * 7.0 * t * 0.75, 0.0] * 2, F32)
    big = np.array([458528.0, -458528.0, 65504.0, -229264.0, 100000.0, 0.0, -1.0, 327520.0], F32)
    tiny = np.array([2.0**-27, -2.0**-28, 2.0**-29, 0.0, -2.0**-27, 3 * 2.0**-30, 1e-9, -1e-9],
                    F32)
    x = np.stack([up, -up[::-1], big, (big * F32(458633.0 / 458528.0)).astype(F32), tiny])
    add_quantize(ff, "f16scale_edges", "fp16 scales: s = 1.6 * 2^-24 rounds up to 2^-23 (codes "
                 "|q| <= 6, smaller than a float32 scale gives); amax 7 * 65504 and 7 * 65519 give "
                 "65504 (max fp16); amax 2^-27 gives s16 = +0 and codes 0", x, "row", 0, "float16",
                 check=lambda q, sb, info: list(sb) == [2, 2, 0x7BFF, 0x7BFF, 0]
                 and np.abs(q[:2]).max() == 6 and not q[4].any())


def add_dequant(ff, name, description, q, sbits, scale_type, granularity, group, prov=None,
                check=None):
    q = np.asarray(q, np.int8)
    y32, y16 = I4.dequant(q, sbits, scale_type, granularity, group)
    if check is not None:
        assert check(y32, y16), name
    rows, cols = q.shape
    g = _case(ff, name, "dequant", description, prov, rows=rows, cols=cols,
              granularity=granularity, group=group if granularity == "group" else 0,
              src_type="float32", scale_type=scale_type)
    ff.add_dataset(g, "q", q)
    ff.add_dataset(g, "scales", np.asarray(sbits), bit_dtype=scale_type)
    ff.add_dataset(g, "expected_f32", y32, bit_dtype="float32")
    ff.add_dataset(g, "expected_f16", y16, bit_dtype="float16")


def build_dequant(ff: FixtureFile) -> None:
    spec = [  # name, rows, cols, granularity, group, scale type
        ("row_f32", 4, 64, "row", 0, "float32"),
        ("group32_f32", 3, 128, "group", 32, "float32"),
        ("group64_f16", 2, 128, "group", 64, "float16"),
        ("odd_13x37_row_f32", 13, 37, "row", 0, "float32"),
    ]
    for i, (name, rows, cols, gran, group, st) in enumerate(spec):
        dr = Draws(200 + i)
        q = dr.ints("q + 8", 16, rows * cols).reshape(rows, cols) - 8
        S = len(I4.segments(rows, cols, gran, group))
        if st == "float16":
            sb = dr.f16u("scales", 0.0009765625, 0.125, S)
        else:
            sb = f32b(dr.uniform("scales", 0.0009765625, 0.125, S))   # full mantissas: q*s rounds
        add_dequant(ff, name, f"random codes, {gran} {st} scales, {rows} x {cols}", q, sb, st, gran,
                    group, dr.provenance())

    codes = np.tile(np.arange(-8, 8, dtype=np.int8), (6, 1))        # every code in every row
    s32 = [1.0, 0.1, 3.0e38, 0.0, 2.0**-149, 1.1754942e-38]
    add_dequant(ff, "every_code_f32_extremes", "all 16 codes times float32 scales 1, 0.1 (rounds), "
                "3e38 (|q| >= 2 overflows to inf), 0 (signed zeros), 2^-149 and a subnormal",
                codes, f32b(s32), "float32", "row", 0,
                check=lambda y32, y16: bool(np.isinf(fp16.f32_values(y32[2])).any())
                and bool((y32[3] == 0x80000000).any()))
    s16 = [0x3C00, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0x0000]
    add_dequant(ff, "every_code_f16_extremes", "all 16 codes times fp16 scales 1, 2^-24, the "
                "largest subnormal, the smallest normal, 65504 (fp16 output overflows to inf), 0",
                codes, np.array(s16, np.uint16), "float16", "row", 0,
                check=lambda y32, y16: bool(((y16[4] & 0x7FFF) == 0x7C00).any()))


# ---------------------------------------------------------------------------------------------
# gemm.h5
# ---------------------------------------------------------------------------------------------

def _packed_dataset(ff, group, name: str, packed: np.ndarray, fill: bool) -> None:
    """fill: a constant uint8 array stored as a dataset never written, whose declared fill value
    is what every read returns (no storage allocated); otherwise an ordinary dataset."""
    if not fill:
        ff.add_dataset(group, name, packed)
        return
    assert packed.size and (packed == packed.flat[0]).all()
    group.create_dataset(name, shape=packed.shape, dtype=np.uint8,
                         fillvalue=np.uint8(packed.flat[0]), track_times=False)


def add_gemm(ff, name, description, A, B, sa, sb, bias=None, bias_type="none", relu=False,
             prov=None, check=None, fill=False):
    A = np.asarray(A, np.int64)
    B = np.asarray(B, np.int64)
    M, K = A.shape
    N = B.shape[0]
    Ap, Bp = I4.pack_nibbles(A), I4.pack_nibbles(B)
    assert np.array_equal(I4.unpack_nibbles(Ap, K), A) and np.array_equal(I4.unpack_nibbles(Bp, K), B)
    sab, sbb = f32b(sa), f32b(sb)
    bb = None
    if bias_type == "float32":
        bb = f32b(bias)
    elif bias_type == "float16":
        bb = np.asarray(bias, np.uint16)
    acc, y32, y16 = I4.gemm_packed(Ap, Bp, M, N, K, sab, sbb, bb, bias_type, relu)
    if check is not None:
        assert check(acc, y32, y16), name
    extra = {"nan_sign": "any"} if fp16.f32_is_nan(y32).any() else {}
    g = _case(ff, name, "gemm_packed", description, prov, M=M, N=N, K=K, relu=int(relu),
              bias=bias_type, sa_len=len(sab), sb_len=len(sbb), **extra)
    _packed_dataset(ff, g, "A_packed", Ap, fill)
    _packed_dataset(ff, g, "B_packed", Bp, fill)
    ff.add_dataset(g, "sa", sab, bit_dtype="float32")
    ff.add_dataset(g, "sb", sbb, bit_dtype="float32")
    if bb is not None:
        ff.add_dataset(g, "bias", bb, bit_dtype=bias_type)
    ff.add_dataset(g, "expected_acc", acc)
    ff.add_dataset(g, "expected_f32", y32, bit_dtype="float32")
    ff.add_dataset(g, "expected_f16", y16, bit_dtype="float16")
    return acc, y32, y16


def build_gemm(ff: FixtureFile) -> None:
    spec = [  # M, N, K, sa_len, sb_len, bias, relu
        (1, 13, 8, 1, 13, "float32", False),
        (13, 37, 37, 13, 37, "float16", True),
        (4, 1, 257, 4, 1, "float32", True),
        (3, 5, 64, 3, 5, "float16", False),
    ]
    for i, (M, N, K, la, lb, bt, relu) in enumerate(spec):
        dr = Draws(300 + i)
        A = dr.ints("A + 8", 16, M * K).reshape(M, K) - 8
        B = dr.ints("B + 8", 16, N * K).reshape(N, K) - 8
        sa = dr.uniform("sa", 0.0009765625, 0.125, la)
        sb = dr.uniform("sb", 0.0009765625, 0.125, lb)
        bias = None
        if bt == "float32":
            bias = dr.uniform("bias", -2.0, 2.0, N)
        elif bt == "float16":
            bias = dr.f16u("bias", -2.0, 2.0, N)
        odd = " (odd K: padding nibble)" if K % 2 else ""
        add_gemm(ff, f"rand_{M}x{N}x{K}", f"random codes M {M} N {N} K {K}{odd}, sa_len {la}, "
                 f"sb_len {lb}, bias {bt}, relu {int(relu)}", A, B, sa, sb, bias, bt, relu,
                 dr.provenance())

    # every code pair: acc[m][n] = (m - 8) * (n - 8), K = 1 (one padding nibble per row)
    a = (np.arange(16) - 8).reshape(16, 1)
    add_gemm(ff, "every_code_pair", "K = 1: acc[m][n] = (m-8)(n-8), every product of two int4 "
             "codes (sign extension of each nibble)", a, a, [1.0], [1.0],
             check=lambda acc, y32, y16: acc[0, 0] == 64 and acc[0, 15] == -56)
    # the largest K (odd): codes -8 at even k and 0 at odd k make every byte 0x08, the padding
    # nibble included, so A and B are stored as fill values; acc = 65536 * 64 = 2^22
    K = I4.K_MAX
    kmax = np.where(np.arange(K) % 2 == 0, -8, 0).reshape(1, K)
    add_gemm(ff, "kmax_fill", f"K = {K}, the largest allowed (odd): every byte 0x08 (codes -8, 0, "
             "padding 0), acc = 2^22; A_packed and B_packed stored as fill values", kmax, kmax,
             [2.0**-10], [0.5], None, "none", False, fill=True,
             check=lambda acc, y32, y16: int(acc[0, 0]) == 2**22)
    add_gemm(ff, "mixed_extremes_k257", "K = 257, A all -8, B all 7 and -8: acc = -56 K and 64 K",
             np.full((2, 257), -8), np.stack([np.full(257, 7), np.full(257, -8)]), [1.0, 2.0],
             [1.0, 0.25], None, "none", False)
    # epilogue edges
    A = np.array([[-1, 0], [1, 0], [0, 0], [3, 5]])
    B = np.array([[1, 0], [2, 0], [-3, 7]])
    tiny = 2.0**-100
    add_gemm(ff, "relu_minus_zero", "RN32(-1 * 2^-100 * 2^-100) = -0.0: relu gives +0.0", A, B,
             [tiny], [tiny], None, "none", True,
             check=lambda acc, y32, y16: not (y32 == 0x80000000).any())
    add_gemm(ff, "no_relu_minus_zero", "RN32(-1 * 2^-100 * 2^-100) = -0.0 kept without relu (and "
             "fp16 -0.0)", A, B, [tiny], [tiny], None, "none", False,
             check=lambda acc, y32, y16: (y32 == 0x80000000).any() and (y16 == 0x8000).any())
    add_gemm(ff, "bias_f16_nan_inf_relu0", "fp16 bias NaN, +inf, -inf, relu 0: NaN stays NaN, "
             "+-inf", A, B, [0.5], [0.25], np.array([0x7E00, 0x7C00, 0xFC00], np.uint16), "float16",
             False, check=lambda acc, y32, y16: fp16.f32_is_nan(y32[:, 0]).all())
    add_gemm(ff, "bias_f32_nan_inf_relu1", "float32 bias NaN, +inf, -inf, relu 1: relu(NaN) = "
             "NaN, relu(-inf) = +0", A, B, [0.5], [0.25],
             [float("nan"), float("inf"), float("-inf")], "float32", True,
             check=lambda acc, y32, y16: fp16.f32_is_nan(y32[:, 0]).all()
             and (y32[:, 2] == 0).all())
    add_gemm(ff, "f16_output_overflow", "t = acc * 1000 * 1000 overflows fp16 (+-inf) but not "
             "float32", A, B, [1000.0], [1000.0],
             check=lambda acc, y32, y16: ((y16 & 0x7FFF) == 0x7C00).any())
    add_gemm(ff, "f32_overflow_inf_bias", "t = acc * 1e30 * 1e30 overflows float32 to +-inf; "
             "bias -inf/+inf/NaN: inf - inf = NaN", A, B, [1.0e30], [1.0e30],
             np.array([float("-inf"), float("inf"), float("nan")], F32), "float32", False,
             check=lambda acc, y32, y16: np.isinf(fp16.f32_values(y32)).any())


# ---------------------------------------------------------------------------------------------
# decode.h5, gemv.h5 (canonical W4A16)
# ---------------------------------------------------------------------------------------------

def make_g_idx(dr: Draws | None, K: int, g: int, kind: str):
    """None ("none"), k / g ("identity"), or p[k] / g for a drawn permutation p ("random")."""
    if kind == "none":
        return None
    if kind == "identity":
        return (np.arange(K) // g).astype(np.int32)
    p = dr.perm("act-order permutation p", K)
    dr.note(f"g_idx[k] = p[k] / {g}")
    gi = (p // g).astype(np.int32)
    assert not np.array_equal(gi, np.arange(K) // g) or K == g
    return gi


def random_w4a16(dr: Draws, N: int, K: int, g: int, zeros: bool, act: str,
                 srange=(0.0009765625, 0.0625)):
    G = K // g
    q = dr.ints("q", 16, N * K).reshape(N, K)
    s16 = dr.f16u("scales", srange[0], srange[1], N * G).reshape(N, G)
    z = dr.ints("zeros", 16, N * G).reshape(N, G).astype(np.uint8) if zeros else None
    gi = make_g_idx(dr, K, g, act)
    return q, s16, z, gi


def _w4a16_case(ff, name, path, description, prov, N, K, g, q, s16, z, gi, act, **extra):
    qweight = I4.pack_canonical(q)
    assert np.array_equal(I4.unpack_canonical(qweight, K), q)
    w = I4.decode_w4a16(N, K, g, qweight, s16, z, gi)
    grp = _case(ff, name, path, description, prov, N=N, K=K, g=g, has_zeros=int(z is not None),
                has_g_idx=int(gi is not None), act_order=act, **extra)
    ff.add_dataset(grp, "qweight", qweight)
    ff.add_dataset(grp, "scales", np.asarray(s16, np.uint16), bit_dtype="float16")
    if z is not None:
        ff.add_dataset(grp, "zeros", np.asarray(z, np.uint8))
    if gi is not None:
        ff.add_dataset(grp, "g_idx", np.asarray(gi, np.int32))
    return grp, w


def add_decode(ff, name, description, N, K, g, q, s16, z=None, gi=None, act="none", prov=None,
               check=None):
    grp, w = _w4a16_case(ff, name, "w4a16_decode", description, prov, N, K, g, q, s16, z, gi, act)
    if check is not None:
        assert check(w), name
    ff.add_dataset(grp, "expected_w", fp16.f32_bits(w), bit_dtype="float32")


def add_gemv(ff, name, description, N, K, g, q, s16, z, gi, x16, act="none", prov=None,
             check=None):
    x16 = np.asarray(x16, np.uint16)
    qweight = I4.pack_canonical(q)
    w = I4.decode_w4a16(N, K, g, qweight, s16, z, gi)
    ys, sa = I4.gemv_exact(w, x16)
    if check is not None:
        assert check(ys, sa), name
    # batch invariance of the expected values: each row of x alone gives the same ystar
    for b in range(x16.shape[0]):
        y1, _ = I4.gemv_exact(w, x16[b:b + 1])
        assert np.array_equal(y1[0], ys[b], equal_nan=True)
    extra = {"nan_sign": "any"} if np.isnan(ys).any() else {}
    grp, _ = _w4a16_case(ff, name, "w4a16_gemv", description, prov, N, K, g, q, s16, z, gi, act,
                         batch=x16.shape[0], **extra)
    ff.add_dataset(grp, "x", x16, bit_dtype="float16")
    ff.add_dataset(grp, "ystar", ys)
    ff.add_dataset(grp, "sum_abs", sa)


def build_decode(ff: FixtureFile) -> None:
    spec = [  # name, N, K, g, zeros, act-order
        ("g32_n13_k64", 13, 64, 32, True, "none"),
        ("g128_n2_k256", 2, 256, 128, True, "none"),
        ("gk_n37_k40", 37, 40, 40, True, "none"),
        ("k8_n13_sym", 13, 8, 8, False, "none"),
        ("n1_k64_g32", 1, 64, 32, True, "none"),
        ("act_random_g32_n2_k256", 2, 256, 32, True, "random"),
        ("act_identity_g32_n2_k256", 2, 256, 32, True, "identity"),
        ("act_random_g64_n3_k128_sym", 3, 128, 64, False, "random"),
    ]
    for i, (name, N, K, g, zeros, act) in enumerate(spec):
        dr = Draws(400 + i)
        q, s16, z, gi = random_w4a16(dr, N, K, g, zeros, act)
        add_decode(ff, name, f"random codes N {N} K {K} g {g}, "
                   f"{'zeros' if zeros else 'symmetric (z = 8)'}, act-order {act}", N, K, g, q, s16,
                   z, gi, act, dr.provenance())

    # every (q, z) pair: q[n][k] = k, z[n] = n, so q - z covers -15..15; scales per row
    q = np.tile(np.arange(16), (16, 1))
    z = np.arange(16, dtype=np.uint8).reshape(16, 1)
    s = np.array([0x3C00, 0x0001, 0x03FF, 0x0400, 0x4000, 0x0000, 0x3555, 0x2E66,
                  0x7800, 0x0200, 0x3C01, 0x5640, 0x1400, 0x7BFE, 0x0010, 0x7BFF],
                 np.uint16).reshape(16, 1)
    add_decode(ff, "every_q_z_pair_extreme_scales", "K = g = 16: q = k, z = n, every difference "
               "-15..15, scales 1, 2^-24, largest subnormal, smallest normal, 0 (signed zeros), "
               "65504 (row 15: -15 * 65504) and others", 16, 16, 16, q, s, z,
               check=lambda w: bool((fp16.f32_bits(w) == 0x80000000).any())
               and float(np.abs(w).max()) == 15 * 65504.0)
    dr = Draws(420)
    q, s16, z, gi = random_w4a16(dr, 4, 64, 32, True, "none")
    s16 = (s16 & 0x03FF) | 1
    dr.note("then scales = (scales & 0x3FF) | 1 (fp16 subnormals)")
    add_decode(ff, "subnormal_scales", "every scale an fp16 subnormal: (q - z) * s exact in "
               "float32", 4, 64, 32, q, s16, z, None, "none", dr.provenance())


def special_x(K: int) -> np.ndarray:
    """4 fp16 rows: signed zeros and subnormals; a +inf; a NaN; +-65504 and -inf."""
    x = np.zeros((4, K), np.uint16)
    x[0, 0::2] = 0x8000
    x[0, 1::4] = 0x0001
    x[0, 3::4] = 0x83FF
    x[1, :] = 0x3C00
    x[1, 5] = 0x7C00
    x[2, :] = 0xBC00
    x[2, 7] = 0x7E00
    x[3, 0::2] = 0x7BFF
    x[3, 1::2] = 0xFBFF
    x[3, K - 1] = 0xFC00
    return x


def build_gemv(ff: FixtureFile) -> None:
    spec = [  # name, N, K, g, zeros, act, batch
        ("g32_n13_k64_b1", 13, 64, 32, True, "none", 1),
        ("g64_n37_k128_sym_b2", 37, 128, 64, False, "none", 2),
        ("g128_n5_k256_b4", 5, 256, 128, True, "none", 4),
        ("gk_k8_n257_b1", 257, 8, 8, True, "none", 1),
        ("gk_n1_k296_sym_b3", 1, 296, 296, False, "none", 3),
        ("act_random_g32_n3_k256", 3, 256, 32, True, "random", 2),
        ("act_identity_g32_n3_k256", 3, 256, 32, True, "identity", 2),
        ("act_random_gk_n8_k64_sym", 8, 64, 64, False, "random", 1),
        ("n4_k32_gk_b16", 4, 32, 32, True, "none", 16),
    ]
    for i, (name, N, K, g, zeros, act, batch) in enumerate(spec):
        dr = Draws(500 + i)
        q, s16, z, gi = random_w4a16(dr, N, K, g, zeros, act)
        x = dr.f16u("x", -4.0, 4.0, batch * K).reshape(batch, K)
        add_gemv(ff, name, f"random N {N} K {K} g {g}, {'zeros' if zeros else 'symmetric'}, "
                 f"act-order {act}, batch {batch}", N, K, g, q, s16, z, gi, x, act, dr.provenance())

    dr = Draws(520)
    q, s16, z, gi = random_w4a16(dr, 5, 64, 32, True, "none")
    q[0, 5] = 0
    z[0, 0] = 0
    dr.note("then q[0][5] = 0 and zeros[0][0] = 0 (a zero weight meets the +inf of x row 1); "
            "x: handmade rows (signed zeros and subnormals, +inf, NaN, +-65504 and -inf)")
    add_gemv(ff, "special_x", "x rows: +-0 and subnormals; +inf (inf * 0 = NaN in row 0); NaN; "
             "+-65504 with -inf", 5, 64, 32, q, s16, z, None, special_x(64), "none",
             dr.provenance(), check=lambda ys, sa: np.isnan(ys[2]).all() and np.isnan(ys[1, 0])
             and np.isinf(ys[1, 1:]).all())
    dr = Draws(521)
    q, s16, z, gi = random_w4a16(dr, 4, 64, 64, True, "none")
    s16 = (s16 & 0x03FF) | 0x7800
    x = dr.f16u("x", 32768.0, 65504.0, 64).reshape(1, 64)
    x = x | (dr.ints("x sign", 2, 64).reshape(1, 64) << 15).astype(np.uint16)
    dr.note("then scales = (scales & 0x3FF) | 0x7800")
    add_gemv(ff, "huge_scales_huge_x", "scales and x in [32768, 65504]: products near 6e10, "
             "exact in float64", 4, 64, 64, q, s16, z, None, x, "none", dr.provenance())
    dr = Draws(522)
    q, s16, z, gi = random_w4a16(dr, 4, 64, 32, True, "none")
    s16 = (s16 & 0x03FF) | 1
    x = (dr.ints("x", 1024, 2 * 64) | (dr.ints("x sign", 2, 2 * 64) << 15)).astype(np.uint16)
    dr.note("then scales = (scales & 0x3FF) | 1; x = fp16 subnormal bits x | sign << 15")
    add_gemv(ff, "subnormal_scales_subnormal_x", "fp16 subnormal scales and activations: products "
             "of 2^-48 magnitude and up to 24 significant bits, ystar far below 2^-14", 4, 64, 32, q, s16,
             z, None, x.reshape(2, 64), "none", dr.provenance(),
             check=lambda ys, sa: bool((sa > 0).all() and (np.abs(ys) < 2.0**-20).all()))
    # cancellation: row 0 is 15 * 65504 everywhere and x alternates +1, -1 except x[0] = 1 + 2^-10:
    # the big terms cancel exactly, ystar = 15 * 65504 * 2^-10 while sum_abs = 32 * 15 * 65504
    K = 32
    q = np.full((2, K), 15, np.int64)
    q[1, 1::2] = 1
    z = np.zeros((2, 1), np.uint8)
    s16 = np.array([[0x7BFF], [0x0001]], np.uint16)
    x = np.tile(np.array([0x3C00, 0xBC00], np.uint16), (1, K // 2))
    x[0, 0] = 0x3C01
    add_gemv(ff, "cancellation", "terms +-15 * 65504 cancel exactly except 15 * 65504 * 2^-10: "
             "ystar 2^-15 of sum_abs (the bound's relative term); row 1 at the fp16 subnormal "
             "scale", 2, K, K, q, s16, z, None, x,
             "none", check=lambda ys, sa: ys[0, 0] == 15 * 65504 * 2.0**-10)


# ---------------------------------------------------------------------------------------------
# import.h5
# ---------------------------------------------------------------------------------------------

def add_import(ff, name, description, kind, q, z_eff, s16, g, gi=None, version=2, prov=None,
               check=None, stored=None, act="none"):
    """kind "gptq" or "awq"; z_eff: effective zeros [N, G]; stored: GPTQ stored zeros override."""
    q = np.asarray(q, np.int64)
    N, K = q.shape
    z_eff = np.asarray(z_eff, np.int64)
    if kind == "gptq":
        zs = I4.gptq_stored_zeros(z_eff, version) if stored is None else stored
        src = I4.gptq_pack(q, zs, s16)
        rq, rz, rs = I4.gptq_read(src, version)
    else:
        src = I4.awq_pack(q, z_eff, s16)
        rq, rz, rs = I4.awq_read(src)
    assert np.array_equal(rq, q) and np.array_equal(rz, z_eff) and np.array_equal(rs, s16)
    if check is not None:
        assert check(src), name
    qweight = I4.pack_canonical(q)
    zeros = z_eff.astype(np.uint8)
    I4.validate_w4a16(N, K, g, qweight, s16, zeros, gi)
    assert (gi is None) == (act == "none")
    attrs = dict(N=N, K=K, g=g, has_g_idx=int(gi is not None), act_order=act)
    if kind == "gptq":
        attrs["version"] = version
    grp = _case(ff, name, f"import_{kind}", description, prov, **attrs)
    for key in ("src_qweight", "src_qzeros"):
        ff.add_dataset(grp, key, src[key])
    ff.add_dataset(grp, "src_scales", src["src_scales"], bit_dtype="float16")
    if gi is not None:
        ff.add_dataset(grp, "src_g_idx", np.asarray(gi, np.int32))
    ff.add_dataset(grp, "qweight", qweight)
    ff.add_dataset(grp, "scales", np.asarray(s16, np.uint16), bit_dtype="float16")
    ff.add_dataset(grp, "zeros", zeros)
    if gi is not None:
        ff.add_dataset(grp, "g_idx", np.asarray(gi, np.int32))


def negative_words(src) -> bool:
    return bool((src["src_qweight"] < 0).any())


def build_import(ff: FixtureFile) -> None:
    spec = [  # name, kind, version, N, K, g, act
        ("gptq_v1_g32_n16_k64", "gptq", 1, 16, 64, 32, "none"),
        ("gptq_v2_g64_n8_k128", "gptq", 2, 8, 128, 64, "none"),
        ("gptq_v1_g128_act_random", "gptq", 1, 8, 256, 128, "random"),
        ("gptq_v2_g128_act_identity", "gptq", 2, 8, 256, 128, "identity"),
        ("gptq_v2_gk_n40_k104", "gptq", 2, 40, 104, 104, "none"),
        ("gptq_v1_k8_n8", "gptq", 1, 8, 8, 8, "none"),
        ("awq_g32_n16_k64", "awq", 0, 16, 64, 32, "none"),
        ("awq_g128_n8_k256", "awq", 0, 8, 256, 128, "none"),
        ("awq_gk_n40_k104", "awq", 0, 40, 104, 104, "none"),
    ]
    for i, (name, kind, version, N, K, g, act) in enumerate(spec):
        dr = Draws(600 + i)
        G = K // g
        q = dr.ints("q", 16, N * K).reshape(N, K)
        s16 = dr.f16u("scales", 0.0009765625, 0.0625, N * G).reshape(N, G)
        if kind == "gptq" and version == 1:
            z = dr.ints("zeros - 1", 15, N * G).reshape(N, G) + 1    # v1 holds 1..15 only
        else:
            z = dr.ints("zeros", 16, N * G).reshape(N, G)
        gi = make_g_idx(dr, K, g, act)
        what = f"GPTQ v{version}" if kind == "gptq" else "AWQ"
        add_import(ff, name, f"{what} N {N} K {K} g {g}, g_idx {act}", kind, q, z, s16, g, gi,
                   version, dr.provenance(), check=negative_words, act=act)

    # zero conventions: symmetric checkpoints (v1 stores 7, v2 stores 8: both mean z = 8)
    dr = Draws(620)
    q = dr.ints("q", 16, 16 * 64).reshape(16, 64)
    s16 = dr.f16u("scales", 0.0009765625, 0.0625, 16 * 2).reshape(16, 2)
    for version in (1, 2):
        add_import(ff, f"gptq_v{version}_symmetric", f"GPTQ v{version} symmetric checkpoint: "
                   f"every stored zero {8 - (version == 1)}, effective zero 8", "gptq", q,
                   np.full((16, 2), 8), s16, 32, None, version, dr.provenance(),
                   check=lambda src, v=version: bool(
                       (src["src_qzeros"].view(np.uint32) == (0x77777777 if v == 1
                                                              else 0x88888888)).all()))
    # every zero value (v2 and AWQ: 0..15; v1: stored 0..14 = effective 1..15), distinct per column
    N, K, g = 16, 32, 32
    dr = Draws(621)
    q = dr.ints("q", 16, N * K).reshape(N, K)
    s16 = dr.f16u("scales", 0.0009765625, 0.0625, N).reshape(N, 1)
    zall = np.arange(16).reshape(16, 1)
    add_import(ff, "awq_every_zero", "AWQ: column n has zero n (0..15), interleaved in qzeros",
               "awq", q, zall, s16, g, None, 0, dr.provenance(),
               check=lambda src: int(src["src_qzeros"].view(np.uint32)[0, 0]) == 0x75316420)
    # handmade interleave word: columns 0..7 of row k hold codes 1..8
    N, K = 8, 8
    q = np.tile(np.arange(1, 9).reshape(8, 1), (1, K))
    s16 = np.full((N, 1), 0x3C00, np.uint16)
    add_import(ff, "awq_interleave_word", "AWQ: column c holds code c + 1, so every qweight word "
               "is 0x86427531 (nibble j = column [0,2,4,6,1,3,5,7][j])", "awq", q,
               np.full((N, 1), 8), s16, K, None, 0,
               check=lambda src: bool((src["src_qweight"].view(np.uint32) == 0x86427531).all()))


# ---------------------------------------------------------------------------------------------
# invalid.h5
# ---------------------------------------------------------------------------------------------

def build_invalid(ff: FixtureFile) -> None:
    def expect(error, fn):
        try:
            fn()
        except I4.Int4Error as e:
            assert e.name == error, f"{error} expected, generator raised {e}"
            return
        raise AssertionError(f"{error} expected, generator accepted the case")

    def case(name, description, path, error, prov=None, **attrs):
        return _case(ff, name, path, description, prov, expect="invalid", error=error, **attrs)

    # quantize
    def quant(name, description, x, granularity, group, error, scale_type="float32"):
        x = np.asarray(x, F32)
        expect(error, lambda: I4.quantize(x, granularity, group, scale_type))
        rows, cols = x.shape
        g = case(name, description, "quantize", error, rows=rows, cols=cols,
                 granularity=granularity, group=group, src_type="float32", scale_type=scale_type)
        ff.add_dataset(g, "x", f32b(x), bit_dtype="float32")

    base = np.linspace(-1.0, 1.0, 64, dtype=F32).reshape(2, 32)
    for label, v in (("nan", np.nan),):
        x = base.copy()
        x[1, 17] = v
        quant(f"quantize_{label}", f"x[1][17] = {label}: int_nonfinite_input", x, "row", 0,
              "int_nonfinite_input")
    x = base.copy()
    x[0, 5] = 7.0 * 65520.0
    quant("quantize_f16_scale_overflow", "amax 7 * 65520: RN16(amax / 7) = inf", x, "row", 0,
          "int_scale_invalid", "float16")
    quant("quantize_group_not_dividing", "group 24 does not divide cols = 32", base, "group", 24,
          "int_group_invalid")

    # dequant
    def deq(name, description, sbits, scale_type, error):
        q = (np.arange(64) % 16 - 8).astype(np.int8).reshape(2, 32)
        expect(error, lambda: I4.dequant(q, sbits, scale_type, "row", 0))
        g = case(name, description, "dequant", error, rows=2, cols=32, granularity="row",
                 group=0, src_type="float32", scale_type=scale_type)
        ff.add_dataset(g, "q", q)
        ff.add_dataset(g, "scales", np.asarray(sbits), bit_dtype=scale_type)

    deq("dequant_scale_negative_f32", "float32 scale -0.5", f32b([1.0, -0.5]), "float32",
        "int_scale_invalid")
    deq("dequant_scale_inf_f16", "fp16 scale +inf", np.array([0x3C00, 0x7C00], np.uint16),
        "float16", "int_scale_invalid")

    # gemm_packed
    def gemm(name, description, Ap, Bp, M, N, K, error, sa=(1.0,), sb=(1.0,), fill=False):
        Ap, Bp = np.asarray(Ap, np.uint8), np.asarray(Bp, np.uint8)
        sab, sbb = f32b(sa), f32b(sb)
        expect(error, lambda: I4.gemm_packed(Ap, Bp, M, N, K, sab, sbb))
        g = case(name, description, "gemm_packed", error, M=M, N=N, K=K, relu=0, bias="none",
                 sa_len=len(sab), sb_len=len(sbb))
        _packed_dataset(ff, g, "A_packed", Ap, fill)
        _packed_dataset(ff, g, "B_packed", Bp, fill)
        ff.add_dataset(g, "sa", sab, bit_dtype="float32")
        ff.add_dataset(g, "sb", sbb, bit_dtype="float32")

    A = I4.pack_nibbles(np.arange(2 * 7).reshape(2, 7) % 16 - 8)
    B = I4.pack_nibbles(np.arange(3 * 7).reshape(3, 7) % 15 - 7)
    Abad = A.copy()
    Abad[1, 3] |= 0x10
    gemm("gemm_bad_padding_a", "K = 7: A_packed row 1's padding nibble is 1", Abad, B, 2, 3, 7,
         "int4_bad_padding")
    Bbad = B.copy()
    Bbad[2, 3] |= 0x80
    gemm("gemm_bad_padding_b", "K = 7: B_packed row 2's padding nibble is 8 (-8)", A, Bbad, 2, 3, 7,
         "int4_bad_padding")
    big = np.full((1, (I4.K_MAX + 1) // 2), 0x88, np.uint8)         # every code -8
    gemm("gemm_k_too_large", f"K = {I4.K_MAX + 1} > {I4.K_MAX} (every code -8; A_packed and "
         "B_packed stored as fill values)", big, big, 1, 1, I4.K_MAX + 1, "int_k_too_large",
         fill=True)
    gemm("gemm_k_zero", "K = 0", np.zeros((2, 0), np.uint8), np.zeros((3, 0), np.uint8), 2, 3, 0,
         "shape_invalid")
    gemm("gemm_a_short", "K = 7 but A_packed rows hold 3 bytes (floor(K/2) instead of ceil)",
         A[:, :3], B, 2, 3, 7, "size_mismatch")
    gemm("gemm_sa_nan", "sa = NaN", A, B, 2, 3, 7, "int_nonfinite_input", sa=(np.nan,))

    # w4a16 canonical (decode and gemv)
    def w4(name, description, path, error, N, K, g, qweight, scales, zeros=None, gi=None, x=None):
        if x is None:
            expect(error, lambda: I4.validate_w4a16(N, K, g, qweight, scales, zeros, gi))
        else:
            expect(error, lambda: I4.gemv_w4a16(N, K, g, qweight, scales, zeros, gi, x))
        attrs = dict(N=N, K=K, g=g, has_zeros=int(zeros is not None), has_g_idx=int(gi is not None))
        if path == "w4a16_gemv":
            attrs["batch"] = int(np.shape(x)[0])
        grp = case(name, description, path, error, **attrs)
        ff.add_dataset(grp, "qweight", np.asarray(qweight, np.uint32))
        ff.add_dataset(grp, "scales", np.asarray(scales, np.uint16), bit_dtype="float16")
        if zeros is not None:
            ff.add_dataset(grp, "zeros", np.asarray(zeros, np.uint8))
        if gi is not None:
            ff.add_dataset(grp, "g_idx", np.asarray(gi, np.int32))
        if x is not None:
            ff.add_dataset(grp, "x", np.asarray(x, np.uint16), bit_dtype="float16")

    N, K, g = 4, 64, 32
    qw = I4.pack_canonical(np.arange(N * K).reshape(N, K) % 16)
    sc = np.full((N, 2), 0x2C00, np.uint16)
    zs = np.full((N, 2), 3, np.uint8)
    ident = (np.arange(K) // g).astype(np.int32)
    dec = "w4a16_decode"
    for label, bits in (("inf", 0x7C00), ("negative", 0xAC00)):
        s = sc.copy()
        s[2, 1] = bits
        w4(f"dec_scale_{label}", f"scales[2][1] = {label} (0x{bits:04x})", dec,
           "int_scale_invalid", N, K, g, qw, s, zs)
    z = zs.copy()
    z[3, 0] = 16
    w4("dec_zero_16", "zeros[3][0] = 16", dec, "int4_zero_out_of_range", N, K, g, qw, sc, z)
    gi = ident.copy()
    gi[40] = 2
    w4("dec_g_idx_out_of_range", "g_idx[40] = 2 = G", dec, "int4_g_idx_invalid", N, K, g, qw, sc,
       zs, gi)
    w4("dec_g_idx_unbalanced", "g_idx gives group 0 33 columns and group 1 31 (a valid "
       "assignment holds g per group)", dec, "int4_g_idx_invalid", N, K, g, qw, sc, zs,
       np.where(np.arange(K) == 32, 0, ident).astype(np.int32))
    w4("dec_group_16", "g = 16 (divides K = 64 but is not 32, 64, 128 or K)", dec,
       "int_group_invalid", N, K, 16, qw, np.full((N, 4), 0x2C00, np.uint16),
       np.full((N, 4), 3, np.uint8))
    w4("dec_group_not_dividing", "g = 64 with K = 96 (in the set but not dividing K)", dec,
       "int_group_invalid", N, 96, 64, I4.pack_canonical(np.zeros((N, 96), np.int64)),
       np.full((N, 1), 0x2C00, np.uint16))
    w4("dec_k_not_multiple_of_8", "K = 12, g = K", dec, "shape_invalid", N, 12, 12,
       np.zeros((N, 1), np.uint32), np.full((N, 1), 0x2C00, np.uint16))
    w4("dec_n_zero", "N = 0", dec, "shape_invalid", 0, K, g, np.zeros((0, 8), np.uint32),
       np.zeros((0, 2), np.uint16))
    w4("dec_qweight_short", "qweight has K/8 - 1 words per row", dec, "size_mismatch", N, K, g,
       qw[:, :-1], sc, zs)
    # gemv: the same layout rules (one of them here) and the activations' shape
    x = np.full((1, K), 0x3C00, np.uint16)
    s = sc.copy()
    s[2, 1] = 0x7C00
    w4("gemv_scale_inf", "scales[2][1] = +inf (0x7c00)", "w4a16_gemv", "int_scale_invalid", N, K,
       g, qw, s, zs, None, x)
    w4("gemv_x_short", "x has K - 8 columns", "w4a16_gemv", "size_mismatch", N, K, g, qw, sc, zs,
       None, x[:, 8:])

    # importers
    def imp(name, description, kind, error, N, K, g, src, gi=None, version=2):
        def run():
            I4.check_import(kind, N, K, g, src, gi, version)
        expect(error, run)
        attrs = dict(N=N, K=K, g=g, has_g_idx=int(gi is not None))
        if kind == "gptq":
            attrs["version"] = version
        grp = case(name, description, f"import_{kind}", error, **attrs)
        ff.add_dataset(grp, "src_qweight", src["src_qweight"])
        ff.add_dataset(grp, "src_qzeros", src["src_qzeros"])
        ff.add_dataset(grp, "src_scales", src["src_scales"], bit_dtype="float16")
        if gi is not None:
            ff.add_dataset(grp, "src_g_idx", np.asarray(gi, np.int32))

    N, K, g = 16, 64, 32
    q = np.arange(N * K).reshape(N, K) % 16
    s16 = np.full((N, 2), 0x2C00, np.uint16)
    z = np.full((N, 2), 5)
    gsrc = I4.gptq_pack(q, z, s16)
    zs15 = z.copy()
    zs15[9, 1] = 15
    imp("gptq_v1_stored_15", "GPTQ v1 stores 15 for column 9 group 1: effective zero 16",
        "gptq", "int4_zero_out_of_range", N, K, g, I4.gptq_pack(q, zs15, s16), None, 1)
    gi = ident.copy()
    gi[63] = 5
    imp("gptq_g_idx_out_of_range", "src_g_idx[63] = 5 >= G = 2", "gptq", "int4_g_idx_invalid", N,
        K, g, gsrc, gi)
    for kind, packer in (("gptq", I4.gptq_pack), ("awq", I4.awq_pack)):
        for label, bits in ((("inf", 0x7C00),) if kind == "gptq" else (("nan", 0x7E00),)):
            s = s16.copy()
            s[7, 0] = bits
            imp(f"{kind}_scale_{label}", f"src_scales[0][7] = {label}", kind, "int_scale_invalid",
                N, K, g, packer(q, z, s))
        if kind == "gptq":
            imp("gptq_group_not_dividing", "g = 128 with K = 64 (in the set, not dividing K)",
                kind, "int_group_invalid", N, K, 128, packer(q, z[:, :1], s16[:, :1]))
        else:
            imp("awq_group_48", "g = 48 (not in the set, and not dividing K = 64)", kind,
                "int_group_invalid", N, K, 48, packer(q, z[:, :1], s16[:, :1]))
        if kind == "gptq":
            # N = 12: qweight [K/8, 12] is fine but qzeros cannot hold N/8 words
            src = {"src_qweight": gsrc["src_qweight"][:, :12].copy(),
                   "src_qzeros": gsrc["src_qzeros"][:, :1].copy(),
                   "src_scales": gsrc["src_scales"][:, :12].copy()}
        else:
            a = I4.awq_pack(q, z, s16)
            src = {"src_qweight": a["src_qweight"][:, :1].copy(),
                   "src_qzeros": a["src_qzeros"][:, :1].copy(),
                   "src_scales": a["src_scales"][:, :12].copy()}
        imp(f"{kind}_n_not_multiple_of_8", "N = 12 (the packed zeros need N a multiple of 8)",
            kind, "shape_invalid", 12, K, g, src)
        full = packer(q, z, s16)
        short = dict(full)
        short["src_qweight"] = full["src_qweight"][:-1].copy()
        imp(f"{kind}_qweight_short", "src_qweight has one row too few", kind, "size_mismatch", N,
            K, g, short)


FAMILIES = [("quantize", build_quantize), ("dequant", build_dequant), ("gemm", build_gemm),
            ("decode", build_decode), ("gemv", build_gemv), ("import", build_import),
            ("invalid", build_invalid)]
