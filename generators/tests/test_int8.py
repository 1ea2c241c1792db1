"""int8: qgold_gen.int8 against values worked out by hand from shared/specs/intq.md, and every
stored fixture of golden/int8 against an exact rational oracle written separately here.

The oracle (`Exact`) never uses binary floating-point arithmetic for a finite result: each IEEE
operation is computed exactly with fractions.Fraction and rounded to float32 or fp16 by an explicit
round-half-even on the scaled significand. qgold_gen.int8 instead uses numpy float32 scalars and
numpy's float16 conversion, so the two agree only if both follow the spec.
"""

import math
import os
import unittest
from fractions import Fraction

import h5py
import numpy as np

from qgold_gen import fam_int8
from qgold_gen import int8 as I

GENERATORS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_GOLDEN = os.path.join(os.path.dirname(GENERATORS), "golden", "int8")
F32 = np.float32
U = 2.0**-24          # smallest fp16 subnormal
T = 2.0**-149         # smallest float32 subnormal


# ---------------------------------------------------------------------------------------------
# Exact oracle
# ---------------------------------------------------------------------------------------------

def rne_fraction(x: Fraction) -> int:
    f = math.floor(x)
    d = x - f
    if d != Fraction(1, 2):
        return f + (1 if d > Fraction(1, 2) else 0)
    return f + (f & 1)


class Exact:
    """IEEE binary formats with p significand bits and minimum normal exponent emin."""

    def __init__(self, p: int, emin: int, emax: int):
        self.p, self.emin, self.emax = p, emin, emax

    def round(self, x: Fraction, sign_if_zero: bool = False) -> float:
        if x == 0:
            return -0.0 if sign_if_zero else 0.0
        neg = x < 0
        a = -x if neg else x
        e = a.numerator.bit_length() - a.denominator.bit_length()   # 2^e <= a < 2^(e+2)
        if Fraction(2) ** e > a:
            e -= 1
        if Fraction(2) ** (e + 1) <= a:
            e += 1
        e = max(e, self.emin)
        quantum = Fraction(2) ** (e - self.p + 1)
        r = rne_fraction(a / quantum) * quantum
        if r >= Fraction(2) ** (self.emax + 1):
            v = math.inf
        else:
            v = float(r)   # r has at most p <= 24 significant bits: exact as a float64
        return -v if neg else v

    def mul(self, a: float, b: float) -> float:
        if not (math.isfinite(a) and math.isfinite(b)):
            return a * b      # inf * 0 = NaN, inf * x = +-inf: the IEEE rules float64 follows
        neg = math.copysign(1, a) * math.copysign(1, b) < 0
        return self.round(Fraction(a) * Fraction(b), neg)

    def add(self, a: float, b: float) -> float:
        if not (math.isfinite(a) and math.isfinite(b)):
            return a + b
        both_neg = math.copysign(1, a) < 0 and math.copysign(1, b) < 0
        return self.round(Fraction(a) + Fraction(b), both_neg)

    def div(self, a: float, b: float) -> float:
        neg = math.copysign(1, a) * math.copysign(1, b) < 0
        return self.round(Fraction(a) / Fraction(b), neg)

    def conv(self, a: float) -> float:
        if not math.isfinite(a):
            return a
        return self.round(Fraction(a), math.copysign(1, a) < 0)


E32 = Exact(24, -126, 127)
E16 = Exact(11, -14, 15)


def oracle_quantize(x, granularity, group, scale_type):
    rows, cols = len(x), len(x[0])
    q = [[0] * cols for _ in range(rows)]
    scales = []
    for _, elems in I.blocks(rows, cols, granularity, group):
        amax = max(abs(x[r][c]) for r, c in elems)
        s = 0.0 if amax == 0 else E32.div(amax, 127.0)
        if scale_type == "float16":
            s = E16.conv(s)
        scales.append(s)
        for r, c in elems:
            if s == 0:
                continue
            ratio = E32.div(x[r][c], s)
            q[r][c] = max(-128, min(127, rne_fraction(Fraction(ratio))))
    return q, scales


def oracle_epilogue(acc: int, sb: float, sa: float, bias, relu: bool) -> float:
    t = E32.mul(E32.mul(E32.conv(float(acc)), sb), sa)
    if bias is not None:
        t = E32.add(t, bias)
    if relu and not math.isnan(t) and not t > 0:
        t = 0.0
    return t


def same_value(a: float, b: float) -> bool:
    """Equal including the sign of zero; any NaN matches any NaN."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1, a) == math.copysign(1, b)


def f32v(bits):
    return np.asarray(bits, np.uint32).view(np.float32).astype(np.float64)


def f16v(bits):
    return np.asarray(bits, np.uint16).view(np.float16).astype(np.float64)


def stored(ds):
    """Values of a dataset: fp16 and float32 bit patterns decoded, integers as they are."""
    data = ds[()]
    tag = ds.attrs.get("dtype")
    if tag == "float16":
        return f16v(data)
    if tag == "float32":
        return f32v(data)
    return data


# ---------------------------------------------------------------------------------------------
# Hand-computed values
# ---------------------------------------------------------------------------------------------

class Quantize(unittest.TestCase):
    def q(self, row, scale_type="float32", granularity="row", group=0):
        q, s = I.quantize(np.array([row], F32), granularity, group, scale_type)
        return q[0].tolist(), [float(v) for v in s]

    def test_ties_round_half_to_even(self):
        # amax = 127 -> s = 1, so v / s = v: halves go to the even neighbour, both signs.
        q, s = self.q([127, 2.5, -2.5, 3.5, -3.5, 0.5, -0.5, 126.5, -126.5, 1.5, -1.5])
        self.assertEqual(s, [1.0])
        self.assertEqual(q, [127, 2, -2, 4, -4, 0, 0, 126, -126, 2, -2])

    def test_ties_at_scale_three(self):
        # amax = 381 -> s = 3 exactly; 22.5 / 3 = 7.5 (exact division) -> 8; -4.5 / 3 = -1.5 -> -2
        q, s = self.q([381, 22.5, -4.5, 7.5, 1.5], "float16")
        self.assertEqual(s, [3.0])
        self.assertEqual(q, [127, 8, -2, 2, 0])

    def test_saturation_with_subnormal_fp16_scale(self):
        # amax = 190 u: s = 190/127 u = 1.496 u, RN16 -> u (2^-24). Ratios 190 and -190 round to
        # 190 / -190 and saturate to 127 / -128; 128 saturates; -128 fits; 100.5 ties to 100.
        q, s = self.q([190 * U, -190 * U, 128 * U, -128 * U, 100.5 * U], "float16")
        self.assertEqual(s, [U])
        self.assertEqual(q, [127, -128, 127, -128, 100])

    def test_saturation_tie_127_5_and_minus_128_5(self):
        # s16 = 10 u (from amax 129 * 10 u: 10.16 u rounds to 10 u). 127.5 -> 128 -> 127;
        # -128.5 -> -128 (even) stays; -129 -> -128.
        q, s = self.q([1290 * U, 1275 * U, -1285 * U, -1290 * U], "float16")
        self.assertEqual(s, [10 * U])
        self.assertEqual(q, [127, 127, -128, -128])

    def test_float32_scale_underflow_gives_zero_codes(self):
        # amax = 63 * 2^-149: 63/127 < 1/2 of the smallest subnormal -> s = 0 -> every code 0.
        q, s = self.q([63 * T, -5 * T, T])
        self.assertEqual((q, s), ([0, 0, 0], [0.0]))
        q, s = self.q([64 * T, -5 * T, T])   # 64/127 > 1/2 -> s = 2^-149, ratios exact
        self.assertEqual((q, s), ([64, -5, 1], [T]))

    def test_fp16_scale_max_and_overflow(self):
        # 8321039 / 127 = 65519.99 -> RN16 = 65504; 8321040 / 127 = 65520 -> RN16 = inf: rejected.
        q, s = self.q([8321039.0, 98256.0], "float16")   # 98256 / 65504 = 1.5 -> 2
        self.assertEqual((q, s), ([127, 2], [65504.0]))
        with self.assertRaises(I.Int8Error) as cm:
            self.q([8321040.0], "float16")
        self.assertEqual(cm.exception.name, "int_scale_invalid")

    def test_zero_row_and_groups(self):
        q, s = I.quantize(np.array([[0.0, -0.0], [1.0, -0.5]], F32), "row", 0, "float32")
        self.assertEqual(q.tolist(), [[0, 0], [127, -64]])   # -0.5 / RN32(1/127) = -63.5 -> -64
        self.assertEqual(float(s[0]), 0.0)
        x = np.zeros((1, 64), F32)
        x[0, 40] = 3.0
        q, s = I.quantize(x, "group", 32, "float32")
        self.assertEqual([float(v) for v in s], [0.0, float(F32(3.0) / F32(127.0))])
        self.assertEqual(int(q[0, 40]), 127)

    def test_division_not_reciprocal(self):
        # Against the exact oracle on near-ties: a v * RN32(1/s) quantizer disagrees somewhere.
        s = F32(F32(1.0) / F32(127.0))
        inv = F32(F32(1.0) / s)
        row = [1.0]
        for k in range(10, 120, 7):
            c = F32(F32(k + 0.5) * s)
            row += [float(np.nextafter(c, F32(-1), dtype=F32)), float(c),
                    float(np.nextafter(c, F32(2), dtype=F32))]
        q, _ = self.q(row)
        want, _ = oracle_quantize([row], "row", 0, "float32")
        self.assertEqual(q, want[0])
        recip = [max(-128, min(127, I.rne(float(F32(F32(v) * inv))))) for v in row]
        self.assertNotEqual(recip, q)

    def test_rejections(self):
        cases = [
            ("int_nonfinite_input", np.array([[1.0, np.nan]], F32), "row", 0),
            ("int_nonfinite_input", np.array([[-np.inf]], F32), "tensor", 0),
            ("int_group_invalid", np.ones((1, 96), F32), "group", 64),
            ("shape_invalid", np.ones((0, 4), F32), "row", 0),
        ]
        for name, x, gran, group in cases:
            with self.assertRaises(I.Int8Error) as cm:
                I.quantize(x, gran, group, "float32")
            self.assertEqual(cm.exception.name, name)


class Dequant(unittest.TestCase):
    def test_one_rounding_to_f32_two_to_f16(self):
        # s = RN32(1/3) is not 1/3, so q * s needs a rounding: compare with the exact oracle.
        s = float(F32(1.0) / F32(3.0))
        y32, y16 = I.dequant(np.array([[3, -3, 127]], np.int8), np.array([s], F32), "tensor", 0)
        for i, q in enumerate([3, -3, 127]):
            want = E32.mul(float(q), s)
            self.assertTrue(same_value(float(y32[0, i]), want))
            self.assertTrue(same_value(float(y16[0, i]), E16.conv(want)))

    def test_zero_scale_gives_signed_zero(self):
        # RN32(q * 0): -0 for negative codes, +0 otherwise (IEEE sign of a product).
        y32, _ = I.dequant(np.array([[-5, 0, 5]], np.int8), np.array([0.0], F32), "tensor", 0)
        self.assertEqual(y32.view(np.uint32)[0].tolist(), [0x80000000, 0, 0])

    def test_fp16_overflow_and_double_rounding(self):
        y32, y16 = I.dequant(np.array([[127, -128]], np.int8), np.array([65504.0], F32),
                             "tensor", 0)
        self.assertEqual(y32[0].tolist(), [127 * 65504.0, -128 * 65504.0])
        self.assertEqual(y16.view(np.uint16)[0].tolist(), [0x7C00, 0xFC00])
        q, s = fam_int8.find_double_rounding()
        _, y16 = I.dequant(np.array([[q]], np.int8), np.array([s], F32), "tensor", 0)
        exact = Fraction(q) * Fraction(s)
        self.assertEqual(float(y16[0, 0]), E16.conv(E32.round(exact)))
        self.assertNotEqual(float(y16[0, 0]), E16.round(exact))

    def test_rejections(self):
        q = np.array([[1, 2]], np.int8)
        for name, s, gran, group in [("int_scale_invalid", [-1.0], "row", 0),
                                     ("int_scale_invalid", [np.nan], "row", 0),
                                     ("int_scale_invalid", [np.inf], "row", 0),
                                     ("size_mismatch", [1.0, 1.0], "row", 0),
                                     ("int_group_invalid", [1.0], "group", 32)]:
            with self.assertRaises(I.Int8Error) as cm:
                I.dequant(q, np.array(s, F32), gran, group)
            self.assertEqual(cm.exception.name, name)


class W8A8(unittest.TestCase):
    def one(self, acc_row, sa, sb, bias=None, relu=False):
        """A = [[1]] against B = [[a]] for each a in acc_row gives acc = a (|a| <= 127)."""
        A = np.array([[1]], np.int8)
        B = np.array([[a] for a in acc_row], np.int8)
        return I.w8a8(A, B, np.array(sa, F32), np.array(sb, F32),
                      None if bias is None else np.array(bias, F32), relu)

    def test_sb_before_sa(self):
        # sb = 2^126 first, then sa = 2^-126: acc 1 gives 1; acc 127 gives 127 * 2^126 > FLT_MAX,
        # +inf, and inf * 2^-126 stays inf (sa first would give 127 * 2^-126 * 2^126 = 127).
        acc, y32, _ = self.one([1, 127], [2.0**-126], [2.0**126])
        self.assertEqual(acc[0].tolist(), [1, 127])
        self.assertEqual(y32[0].tolist(), [1.0, math.inf])

    def test_bias_after_scales_relu_last(self):
        # acc = 1, sb = 2, sa = 1, bias 1: 1 * 2 * 1 + 1 = 3 (bias first would give 4).
        _, y32, _ = self.one([1], [1.0], [2.0], [1.0])
        self.assertEqual(y32.tolist(), [[3.0]])
        # acc = -1, bias 0.5, relu: -1 + 0.5 = -0.5 -> +0 (relu before bias would give 0.5).
        _, y32, _ = self.one([-1], [1.0], [1.0], [0.5], relu=True)
        self.assertEqual(y32.view(np.uint32).tolist(), [[0]])

    def test_float_of_acc_ties_to_even(self):
        # 2^24 + 1 and 2^24 + 3 are halfway between float32 neighbours (spacing 2 above 2^24).
        A = np.array([[127] * 1056 + [1]], np.int8)
        B = np.stack([fam_int8.target_row(t, 1057) for t in (2**24 + 1, 2**24 + 3)])
        acc, y32, _ = I.w8a8(A, B, np.array([1.0], F32), np.array([1.0], F32))
        self.assertEqual(acc[0].tolist(), [2**24 + 1, 2**24 + 3])
        self.assertEqual(y32[0].tolist(), [2.0**24, 2.0**24 + 4])

    def test_relu_negative_zero_and_nan(self):
        # -1 * 2^-100 * 2^-100 underflows to -0; relu turns it into +0; NaN passes relu.
        _, y32, y16 = self.one([-1], [2.0**-100], [2.0**-100])
        self.assertEqual((int(y32.view(np.uint32)[0, 0]), int(y16.view(np.uint16)[0, 0])),
                         (0x80000000, 0x8000))
        _, y32, _ = self.one([-1], [2.0**-100], [2.0**-100], relu=True)
        self.assertEqual(int(y32.view(np.uint32)[0, 0]), 0)
        _, y32, _ = self.one([-1, 1], [1.0], [1.0, 1.0], [np.nan, -np.inf], relu=True)
        self.assertTrue(math.isnan(y32[0, 0]))
        self.assertEqual(int(y32.view(np.uint32)[0, 1]), 0)

    def test_fp16_output(self):
        # 65519.996 -> 65504, 65520 -> inf, 1.5 u -> 2 u (tie to even), 0.5 u -> 0
        _, _, y16 = self.one([1, 1, 1, 1], [1.0], [65519.99609375, 65520.0, 1.5 * U, 0.5 * U])
        self.assertEqual(y16.view(np.uint16)[0].tolist(), [0x7BFF, 0x7C00, 0x0002, 0x0000])

    def test_accumulator_extreme(self):
        K = I.K_MAX
        A = np.full((1, K), -128, np.int8)
        acc = I.accumulate(A, A)
        self.assertEqual(int(acc[0, 0]), 2**31 - 2**14)
        with self.assertRaises(I.Int8Error) as cm:
            I.check_w8a8(np.zeros((1, K + 1)), np.zeros((1, K + 1)), [1.0], [1.0], None)
        self.assertEqual(cm.exception.name, "int_k_too_large")

    def test_scale_rejections(self):
        A = np.ones((2, 3), np.int8)
        B = np.ones((1, 3), np.int8)
        for name, sa, sb in [("int_nonfinite_input", [np.nan], [1.0]),
                             ("int_nonfinite_input", [1.0], [np.inf]),
                             ("int_scale_invalid", [1.0], [-1.0]),
                             ("size_mismatch", [1.0] * 3, [1.0])]:
            with self.assertRaises(I.Int8Error) as cm:
                I.w8a8(A, B, np.array(sa, F32), np.array(sb, F32))
            self.assertEqual(cm.exception.name, name)

    def test_epilogue_matches_exact_oracle(self):
        rng = np.random.default_rng(5)   # test inputs only; the oracle decides
        A = rng.integers(-128, 128, (5, 9)).astype(np.int8)
        B = rng.integers(-128, 128, (7, 9)).astype(np.int8)
        sa = rng.uniform(1e-3, 1e-1, 5).astype(F32)
        sb = rng.uniform(1e-3, 1e-1, 7).astype(F32)
        bias = rng.uniform(-3, 3, 7).astype(F32)
        acc, y32, y16 = I.w8a8(A, B, sa, sb, bias, True)
        for m in range(5):
            for n in range(7):
                a = sum(int(A[m, k]) * int(B[n, k]) for k in range(9))
                want = oracle_epilogue(a, float(sb[n]), float(sa[m]), float(bias[n]), True)
                self.assertEqual(int(acc[m, n]), a)
                self.assertTrue(same_value(float(y32[m, n]), want))
                self.assertTrue(same_value(float(y16[m, n]), E16.conv(want)))


class W8A16(unittest.TestCase):
    def test_small_exact(self):
        # 0.5 * 1 * 1 + 0.5 * -2 * 3 = -2.5; sum_abs 0.5 + 3 = 3.5
        y, a = I.w8a16_exact(np.array([[1, -2]], np.int8), np.array([0.5], F32),
                             np.array([[1.0, 3.0]], np.float16))
        self.assertEqual((y.tolist(), a.tolist()), ([[-2.5]], [[3.5]]))

    def test_cancellation_is_exact(self):
        # 127 * 65504 + 1 * 2^-24 - 127 * 65504 = 2^-24 exactly (a float64 loop would give 0).
        y, a = I.w8a16_exact(np.array([[127, 1, 127]], np.int8), np.array([1.0], F32),
                             np.array([[65504.0, U, -65504.0]], np.float16))
        self.assertEqual(y[0, 0], U)
        self.assertEqual(a[0, 0], 2 * 127 * 65504.0 + U)

    def test_specials(self):
        B = np.array([[1, 0], [0, 0], [1, -1]], np.int8)
        y, a = I.w8a16_exact(B, np.array([1.0, 1.0, 1.0], F32),
                             np.array([[np.inf, 1.0], [np.inf, np.inf]], np.float16))
        self.assertEqual(y[0, 0], math.inf)           # inf * 1 + 0 * 1
        self.assertTrue(math.isnan(y[0, 1]))          # 0 * inf
        self.assertTrue(math.isnan(y[1, 2]))          # inf - inf

    def test_fraction_fallback(self):
        # Operands with 53-bit significands: the product does not fit a float64; the term is a
        # Fraction and the sum is rounded once.
        a = 1 + 2.0**-52
        t = I.exact_term(a, 3.0, a)
        self.assertIsInstance(t, Fraction)
        self.assertEqual(t, Fraction(a) * 3 * Fraction(a))
        total, _ = I.exact_sum([t, -3.0])
        self.assertEqual(total, float(Fraction(a) * 3 * Fraction(a) - 3))
        self.assertIsInstance(I.exact_term(float(F32(1 / 3)), 127.0, 65504.0), float)


# ---------------------------------------------------------------------------------------------
# The stored fixtures against the oracle
# ---------------------------------------------------------------------------------------------

@unittest.skipUnless(os.path.isdir(REPO_GOLDEN), "golden/int8 not generated")
class Fixtures(unittest.TestCase):
    def cases(self, family):
        f = h5py.File(os.path.join(REPO_GOLDEN, family + ".h5"), "r")
        self.addCleanup(f.close)
        return [(name, f[name]) for name in f]

    def test_quantize(self):
        for name, g in self.cases("quantize"):
            a = g.attrs
            x = stored(g["x"]).tolist()
            q, s = oracle_quantize(x, a["granularity"], int(a["group"]), a["scale_type"])
            self.assertEqual(g["expected_q"][()].tolist(), q, name)
            self.assertEqual(stored(g["expected_scales"]).tolist(), s, name)

    def test_dequant(self):
        for name, g in self.cases("dequant"):
            a = g.attrs
            q = g["q"][()]
            s = stored(g["scales"])
            y32 = stored(g["expected_f32"])
            y16 = stored(g["expected_f16"])
            rows, cols = q.shape
            for i, elems in I.blocks(rows, cols, a["granularity"], int(a["group"])):
                for r, c in elems:
                    want = E32.mul(float(q[r, c]), float(s[i]))
                    self.assertTrue(same_value(y32[r, c], want), (name, r, c))
                    self.assertTrue(same_value(y16[r, c], E16.conv(want)), (name, r, c))

    def test_w8a8(self):
        for name, g in self.cases("w8a8"):
            a = g.attrs
            A, B = g["A"][()].astype(np.int64), g["B"][()].astype(np.int64)
            sa, sb = stored(g["sa"]), stored(g["sb"])
            bias = stored(g["bias"]) if "bias" in g else None
            self.assertEqual(a["bias"] == "none", bias is None)
            acc = g["expected_acc"][()]
            y32, y16 = stored(g["expected_f32"]), stored(g["expected_f16"])
            for m in range(int(a["M"])):
                for n in range(int(a["N"])):
                    s = 0
                    for k in range(int(a["K"])):       # the definition, one product at a time
                        s += int(A[m, k]) * int(B[n, k])
                    self.assertEqual(int(acc[m, n]), s, name)
                    want = oracle_epilogue(s, float(sb[n if len(sb) > 1 else 0]),
                                           float(sa[m if len(sa) > 1 else 0]),
                                           None if bias is None else float(bias[n]),
                                           bool(a["relu"]))
                    self.assertTrue(same_value(y32[m, n], want), (name, m, n))
                    self.assertTrue(same_value(y16[m, n], E16.conv(want)), (name, m, n))
            self.assertEqual(a.get("nan_sign") == "any", bool(np.isnan(y32).any()), name)

    def test_w8a16(self):
        for name, g in self.cases("w8a16"):
            B = g["B"][()]
            sb, X = stored(g["sb"]), stored(g["X"])
            ys, sabs = g["ystar"][()], g["sum_abs"][()]
            for m in range(X.shape[0]):
                for n in range(B.shape[0]):
                    terms = [float(sb[n]) * float(B[n, k]) * float(X[m, k])
                             if not all(map(math.isfinite, (sb[n], X[m, k]))) else
                             Fraction(float(sb[n])) * int(B[n, k]) * Fraction(float(X[m, k]))
                             for k in range(B.shape[1])]
                    fl = [t for t in terms if isinstance(t, float)]
                    if fl and any(math.isnan(t) for t in fl) or (math.inf in fl and -math.inf in fl):
                        self.assertTrue(math.isnan(ys[m, n]), (name, m, n))
                    elif math.inf in fl or -math.inf in fl:
                        self.assertEqual(ys[m, n], math.inf if math.inf in fl else -math.inf)
                    else:
                        self.assertEqual(ys[m, n], float(sum(terms, Fraction(0))), (name, m, n))
                        self.assertEqual(sabs[m, n], float(sum((abs(t) for t in terms),
                                                               Fraction(0))), (name, m, n))

    def test_invalid_cases_raise_their_error(self):
        for name, g in self.cases("invalid"):
            a = g.attrs
            self.assertEqual(a["expect"], "invalid")
            with self.assertRaises(I.Int8Error, msg=name) as cm:
                if a["path"] == "quantize":
                    x = stored(g["x"]).astype(np.float32).reshape(int(a["rows"]), int(a["cols"]))
                    I.quantize(x, a["granularity"], int(a["group"]), a["scale_type"])
                elif a["path"] == "dequant":
                    I.dequant(g["q"][()], stored(g["scales"]).astype(np.float32),
                              a["granularity"], int(a["group"]))
                elif a["path"] == "w8a8":
                    bias = stored(g["bias"]) if "bias" in g else None
                    I.check_w8a8(np.empty(g["A"].shape), np.empty(g["B"].shape),
                                 stored(g["sa"]), stored(g["sb"]), bias)
                else:
                    I.check_w8a16(g["B"][()], stored(g["sb"]), stored(g["X"]))
            self.assertEqual(cm.exception.name, a["error"], name)

    def test_fill_value_datasets(self):
        for family in ("w8a8", "invalid"):
            for name, g in self.cases(family):
                if g.attrs["path"] == "w8a8" and int(g.attrs["K"]) >= I.K_MAX:
                    for ds in ("A", "B"):
                        self.assertEqual(g[ds].id.get_storage_size(), 0, name)
                        v = g[ds][()]
                        self.assertEqual(int(v.min()), int(v.max()), name)

    def test_edge_coverage(self):
        """The section-4 edges each appear in the stored data."""
        seen = set()
        for name, g in self.cases("quantize"):
            a = g.attrs
            seen.add(("gran", a["granularity"], int(a["group"])))
            seen.add(("src", a["src_type"]))
            seen.add(("scale", a["scale_type"]))
            for dim in (int(a["rows"]), int(a["cols"])):
                seen.add(("dim", dim))
        for name, g in self.cases("w8a8"):
            a = g.attrs
            seen.add(("bias", a["bias"]))
            seen.add(("relu", int(a["relu"])))
            seen.add(("sa_len1", int(a["sa_len"]) == 1 and int(a["M"]) > 1))
            seen.add(("K", int(a["K"])))
        for want in [("gran", "tensor", 0), ("gran", "row", 0), ("gran", "group", 32),
                     ("gran", "group", 64), ("gran", "group", 128), ("src", "float16"),
                     ("scale", "float16"), ("dim", 1), ("dim", 13), ("dim", 37), ("dim", 257),
                     ("bias", "float16"), ("bias", "float32"), ("bias", "none"), ("relu", 1),
                     ("sa_len1", True), ("K", I.K_MAX), ("K", 8)]:
            self.assertIn(want, seen)
        errors = {g.attrs["error"] for _, g in self.cases("invalid")}
        self.assertEqual(errors, {"int_nonfinite_input", "int_k_too_large", "int_scale_invalid",
                                  "int_group_invalid", "shape_invalid", "size_mismatch"})

    def test_string_attributes_fit_the_loader(self):
        """The C fixture loader reads string attributes of fewer than 256 bytes."""
        for family in ("quantize", "dequant", "w8a8", "w8a16", "invalid"):
            for name, g in self.cases(family):
                for key, value in g.attrs.items():
                    if isinstance(value, str):
                        self.assertLess(len(value.encode()), 256, (family, name, key))

    def test_size_budget(self):
        total = sum(os.path.getsize(os.path.join(REPO_GOLDEN, n)) for n in os.listdir(REPO_GOLDEN))
        self.assertLess(total, 512 * 1024)


if __name__ == "__main__":
    unittest.main()
