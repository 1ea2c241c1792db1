"""INT4: nibble order and sign extension, quantize/dequantize, the GEMM epilogue, the W4A16 canonical
layout, the GPTQ and AWQ packers, the exact GEMV value, and the fixtures in golden/int4.

Expected values here are derived by hand from shared/specs/intq.md (the derivation is in the comment
next to each), or recomputed by an independent view written differently from qgold_gen.int4:
  * vectorized shifts and masks over whole word arrays (the generator packs with per-nibble loops);
  * numpy's own float16 conversion for fp16 values (the generator converts on bit patterns);
  * exact rational arithmetic (fractions.Fraction) for ystar and sum_abs.
"""

import math
import os
import re
import unittest
from fractions import Fraction

import h5py
import numpy as np

from qgold_gen import fam_int4
from qgold_gen import int4 as I4

GENERATORS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(GENERATORS)
INT4_GOLDEN = os.path.join(REPO, "golden", "int4")
ERRORS_H = os.path.join(REPO, "reference", "include", "qgold", "errors.h")
F32 = np.float32


def error_of(fn) -> str:
    try:
        fn()
    except I4.Int4Error as e:
        return e.name
    return "accepted"


def f16v(bits):
    """fp16 bits -> float64 through numpy's float16 (independent of qgold_gen.fp16)."""
    return np.asarray(bits, np.uint16).view(np.float16).astype(np.float64)


def f32v(bits):
    return np.asarray(bits, np.uint32).view(np.float32)


class Nibbles(unittest.TestCase):
    def test_low_nibble_first_and_twos_complement(self):
        # codes 1, -1, 7 (K = 3): byte 0 = low 1 | high 0xF (-1) = 0xF1; byte 1 = 7 | padding 0
        self.assertEqual(I4.pack_nibbles([[1, -1, 7]]).tolist(), [[0xF1, 0x07]])
        # -8 is nibble 8, 7 is nibble 7: byte = 0x78 for (-8, 7)
        self.assertEqual(I4.pack_nibbles([[-8, 7]]).tolist(), [[0x78]])

    def test_sign_extension(self):
        # byte 0x8F: low nibble 0xF = -1, high nibble 0x8 = -8; byte 0x70: 0, 7
        self.assertEqual(I4.unpack_nibbles([[0x8F, 0x70]], 4).tolist(), [[-1, -8, 0, 7]])
        every = np.arange(16, dtype=np.uint8).reshape(1, 16)        # low nibble k, high 0
        codes = I4.unpack_nibbles(every, 32)[0, 0::2]
        self.assertEqual(codes.tolist(), list(range(8)) + list(range(-8, 0)))

    def test_padding_nibble(self):
        self.assertEqual(I4.unpack_nibbles([[0x07]], 1).tolist(), [[7]])
        self.assertEqual(error_of(lambda: I4.unpack_nibbles([[0x17]], 1)), "int4_bad_padding")
        self.assertEqual(error_of(lambda: I4.unpack_nibbles([[0x07, 0x00]], 1)), "size_mismatch")


class QuantizeDequant(unittest.TestCase):
    def test_ties_round_to_even(self):
        # amax 7 gives s = 7 / 7 = 1 exactly; v / s = v: 2.5 -> 2, -2.5 -> -2, 3.5 -> 4, -0.5 -> 0,
        # 1.5 -> 2, 6.5 -> 6
        x = np.array([[7, 2.5, -2.5, 3.5, -0.5, 1.5, 6.5]], F32)
        q, sb, _ = I4.quantize(x, "row", 0, "float32")
        self.assertEqual(q.tolist(), [[7, 2, -2, 4, 0, 2, 6]])
        self.assertEqual(sb.tolist(), [0x3F800000])

    def test_fp16_scale_saturation(self):
        # amax = 10 * 2^-24: s = 10/7 * 2^-24, RN16 -> 2^-24 (0x0001, 1.43 rounds down);
        # v / s16 = +-10 -> 7 and -8 after saturation; -8.5 -> -8 (even), 8.5 -> 8 -> 7
        t = 2.0**-24
        x = np.array([[10 * t, -10 * t, 8.5 * t, -8.5 * t]], F32)
        q, sb, info = I4.quantize(x, "row", 0, "float16")
        self.assertEqual(sb.tolist(), [0x0001])
        self.assertEqual(q.tolist(), [[7, -8, 7, -8]])
        self.assertEqual(info["presat"].tolist(), [[10, -10, 8, -8]])

    def test_zero_row_and_division_not_reciprocal(self):
        q, sb, _ = I4.quantize(np.zeros((1, 4), F32), "row", 0, "float32")
        self.assertEqual((q.tolist(), sb.tolist()), ([[0, 0, 0, 0]], [0]))
        # amax = 0.7 (float32): s = RN32(0.7 / 7); v = 0.35 must give rne(0.35 / s) computed by
        # division. Exact rational check of the float32 quotient against the code.
        x = np.array([[0.7, 0.35, -0.45]], F32)
        q, sb, _ = I4.quantize(x, "row", 0, "float32")
        s = Fraction(float(f32v(sb)[0]))
        self.assertEqual(s, Fraction(float(F32(F32(0.7) / F32(7)))))
        for v, code in zip(x[0], q[0]):
            quotient = float(F32(Fraction(float(v)) / s))            # RN32 of the exact quotient
            self.assertEqual(int(np.rint(quotient)), int(code))

    def test_group_errors(self):
        x = np.ones((2, 32), F32)
        self.assertEqual(error_of(lambda: I4.quantize(x, "group", 24, "float32")),
                         "int_group_invalid")
        x[1, 3] = np.nan
        self.assertEqual(error_of(lambda: I4.quantize(x, "row", 0, "float32")),
                         "int_nonfinite_input")

    def test_dequant_one_rounding(self):
        # 0.1f = 13421773 * 2^-27; 7 * 13421773 = 93952411 (27 bits); RN32 keeps 24 bits:
        # 93952411 / 8 = 11744051.375 -> 11744051, so the result is 11744051 * 2^-24
        s = np.array([0.1], F32).view(np.uint32)
        y32, y16 = I4.dequant(np.array([[7, -8, 0]], np.int8), s, "float32", "row", 0)
        self.assertEqual(float(f32v(y32)[0, 0]), 11744051 * 2.0**-24)
        # -8 * 0.1f = -107374184 * 2^-27 exact in float32 (power-of-two multiple)
        self.assertEqual(float(f32v(y32)[0, 1]), -8 * 13421773 * 2.0**-27)
        self.assertEqual(int(y32[0, 2]), 0)                          # 0 * s = +0
        self.assertEqual(y16.tolist(), np.float16(f32v(y32)).view(np.uint16).tolist())

    def test_dequant_rejects_bad_scales(self):
        q = np.zeros((1, 2), np.int8)
        for s in (np.inf, np.nan, -0.5):
            self.assertEqual(error_of(lambda s=s: I4.dequant(
                q, np.array([s], F32).view(np.uint32), "float32", "row", 0)), "int_scale_invalid")


class Gemm(unittest.TestCase):
    def test_hand_product(self):
        # [1, -2, 3] . [-8, 7, 1] = -8 - 14 + 3 = -19; K = 3 is odd: one padding nibble per row
        A, B = I4.pack_nibbles([[1, -2, 3]]), I4.pack_nibbles([[-8, 7, 1]])
        one = np.array([1.0], F32).view(np.uint32)
        acc, y32, y16 = I4.gemm_packed(A, B, 1, 1, 3, one, one)
        self.assertEqual(acc.tolist(), [[-19]])
        self.assertEqual(float(f32v(y32)[0, 0]), -19.0)

    def test_epilogue_minus_zero_and_relu(self):
        # -1 * 2^-100 * 2^-100 underflows to -0.0 in float32; relu turns it into +0.0
        A, B = I4.pack_nibbles([[-1]]), I4.pack_nibbles([[1]])
        tiny = np.array([2.0**-100], F32).view(np.uint32)
        _, y32, y16 = I4.gemm_packed(A, B, 1, 1, 1, tiny, tiny)
        self.assertEqual((int(y32[0, 0]), int(y16[0, 0])), (0x80000000, 0x8000))
        _, y32, _ = I4.gemm_packed(A, B, 1, 1, 1, tiny, tiny, relu=True)
        self.assertEqual(int(y32[0, 0]), 0)
        nan_bias = np.array([np.nan], F32).view(np.uint32)
        _, y32, _ = I4.gemm_packed(A, B, 1, 1, 1, tiny, tiny, nan_bias, "float32", True)
        self.assertTrue(np.isnan(f32v(y32)[0, 0]))

    def test_epilogue_order(self):
        # t = RN32(RN32(acc * sb) * sa) with acc = 3 and sa = sb = 1 + 2^-23: each step rounded
        # once from the exact rational product (Fractions); a single rounding of 3 (1 + 2^-23)^2
        # gives a different float32, so the pinned two-step order is observable in this case
        A, B = I4.pack_nibbles([[3]]), I4.pack_nibbles([[1]])
        s = np.array([1 + 2.0**-23], F32)
        _, y32, _ = I4.gemm_packed(A, B, 1, 1, 1, s.view(np.uint32), s.view(np.uint32))
        t = float(F32(Fraction(3) * Fraction(float(s[0]))))
        t = float(F32(Fraction(t) * Fraction(float(s[0]))))
        self.assertEqual(float(f32v(y32)[0, 0]), t)
        one_rounding = float(F32(Fraction(3) * Fraction(float(s[0])) ** 2))
        self.assertNotEqual(t, one_rounding)       # the pinned two roundings are observable here

    def test_gemm_errors(self):
        A = I4.pack_nibbles([[1, 2, 3]])
        bad = A.copy()
        bad[0, 1] |= 0x10
        one = np.array([1.0], F32).view(np.uint32)
        self.assertEqual(error_of(lambda: I4.gemm_packed(bad, A, 1, 1, 3, one, one)),
                         "int4_bad_padding")
        self.assertEqual(error_of(lambda: I4.gemm_packed(A, A, 1, 1, I4.K_MAX + 1, one, one)),
                         "int_k_too_large")
        inf = np.array([np.inf], F32).view(np.uint32)
        self.assertEqual(error_of(lambda: I4.gemm_packed(A, A, 1, 1, 3, inf, one)),
                         "int_nonfinite_input")


class Canonical(unittest.TestCase):
    def test_word_layout(self):
        # q[n][k] = k for k < 16: word 0 holds codes 0..7 at bits 4j (0x76543210), word 1 8..15
        q = np.arange(16).reshape(1, 16)
        self.assertEqual(I4.pack_canonical(q).tolist(), [[0x76543210, 0xFEDCBA98]])

    def test_decode_by_hand(self):
        # word 0x76543210 (codes 0..7), zero 3, scale 0.5 (fp16 0x3800): w = (k - 3) / 2
        w = I4.decode_w4a16(1, 8, 8, np.array([[0x76543210]], np.uint32),
                            np.array([[0x3800]], np.uint16), np.array([[3]], np.uint8))
        self.assertEqual(w.tolist(), [[-1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0]])
        # symmetric: z = 8, so code 0 gives -8 * s
        w = I4.decode_w4a16(1, 8, 8, np.array([[0x76543210]], np.uint32),
                            np.array([[0x3C00]], np.uint16))
        self.assertEqual(w.tolist(), [[-8.0, -7.0, -6.0, -5.0, -4.0, -3.0, -2.0, -1.0]])

    def test_act_order_groups(self):
        # K = 64, g = 32: g_idx swaps columns 0 and 63 between the two groups; scale 1 vs 2
        qw = I4.pack_canonical(np.full((1, 64), 9))                  # q - z = 1 everywhere
        s = np.array([[0x3C00, 0x4000]], np.uint16)
        gi = (np.arange(64) // 32).astype(np.int32)
        gi[0], gi[63] = 1, 0
        w = I4.decode_w4a16(1, 64, 32, qw, s, None, gi)
        self.assertEqual((w[0, 0], w[0, 1], w[0, 62], w[0, 63]), (2.0, 1.0, 2.0, 1.0))

    def test_validation_errors(self):
        qw = np.zeros((1, 8), np.uint32)
        s = np.full((1, 2), 0x3C00, np.uint16)
        ok = (np.arange(64) // 32).astype(np.int32)
        unbalanced = ok.copy()
        unbalanced[32] = 0
        cases = [
            (lambda: I4.validate_w4a16(1, 64, 32, qw, s, np.array([[16, 0]], np.uint8)),
             "int4_zero_out_of_range"),
            (lambda: I4.validate_w4a16(1, 64, 32, qw, s, None, np.where(ok == 1, 2, 0)),
             "int4_g_idx_invalid"),
            (lambda: I4.validate_w4a16(1, 64, 32, qw, s, None, unbalanced), "int4_g_idx_invalid"),
            (lambda: I4.validate_w4a16(1, 64, 16, qw, np.full((1, 4), 0x3C00, np.uint16)),
             "int_group_invalid"),
            (lambda: I4.validate_w4a16(1, 64, 32, qw, np.array([[0x3C00, 0x7C00]], np.uint16)),
             "int_scale_invalid"),
            (lambda: I4.validate_w4a16(1, 12, 12, qw[:, :1], s[:, :1]), "shape_invalid"),
            (lambda: I4.validate_w4a16(1, 64, 32, qw[:, :7], s), "size_mismatch"),
        ]
        for fn, name in cases:
            self.assertEqual(error_of(fn), name)
        I4.validate_w4a16(1, 64, 32, qw, s, None, ok)                # the valid one passes


class Checkpoints(unittest.TestCase):
    def test_awq_interleave_by_hand(self):
        # columns 0..7 hold codes 1..8; nibble j holds column [0,2,4,6,1,3,5,7][j], so the
        # nibbles from j = 0 are 1,3,5,7,2,4,6,8 and the word, high nibble first, 0x86427531
        # (bit 31 set: stored as the negative int32 0x86427531 - 2^32)
        q = np.tile(np.arange(1, 9).reshape(8, 1), (1, 8))
        src = I4.awq_pack(q, np.full((8, 1), 8), np.full((8, 1), 0x3C00, np.uint16))
        self.assertEqual(src["src_qweight"].dtype, np.int32)
        self.assertEqual(src["src_qweight"].tolist(), [[0x86427531 - 2**32]] * 8)
        self.assertEqual(src["src_qzeros"].tolist(), [[0x88888888 - 2**32]])

    def test_gptq_packs_along_k(self):
        # q[n][k] = (k + n) mod 16, K = N = 8: column 0's word holds k = 0..7 -> 0x76543210,
        # column 1's holds 1..8 -> 0x87654321 (negative as int32)
        q = (np.arange(8).reshape(1, 8) + np.arange(8).reshape(8, 1)) % 16
        src = I4.gptq_pack(q, np.full((8, 1), 8), np.full((8, 1), 0x3C00, np.uint16))
        self.assertEqual(src["src_qweight"].shape, (1, 8))
        self.assertEqual(int(src["src_qweight"][0, 0]), 0x76543210)
        self.assertEqual(int(src["src_qweight"][0, 1]), 0x87654321 - 2**32)

    def test_gptq_zero_conventions(self):
        # v1 stores zero - 1: effective 5 is stored 4 in every nibble (0x44444444); v2 stores 5;
        # the reader adds 1 back for v1; v1 stored 15 means 16, out of range
        q = np.zeros((8, 8), np.int64)
        s = np.full((8, 1), 0x3C00, np.uint16)
        v1 = I4.gptq_pack(q, I4.gptq_stored_zeros(np.full((8, 1), 5), 1), s)
        v2 = I4.gptq_pack(q, I4.gptq_stored_zeros(np.full((8, 1), 5), 2), s)
        self.assertEqual(v1["src_qzeros"].tolist(), [[0x44444444]])
        self.assertEqual(v2["src_qzeros"].tolist(), [[0x55555555]])
        self.assertEqual(I4.gptq_read(v1, 1)[1].tolist(), [[5]] * 8)
        self.assertEqual(I4.gptq_read(v2, 2)[1].tolist(), [[5]] * 8)
        # a symmetric v1 checkpoint stores 7 (0x77777777), meaning z = 8
        sym = I4.gptq_pack(q, I4.gptq_stored_zeros(np.full((8, 1), 8), 1), s)
        self.assertEqual(sym["src_qzeros"].tolist(), [[0x77777777]])
        bad = I4.gptq_pack(q, np.full((8, 1), 15), s)
        self.assertEqual(error_of(lambda: I4.check_import("gptq", 8, 8, 8, bad, None, 1)),
                         "int4_zero_out_of_range")
        I4.check_import("gptq", 8, 8, 8, bad, None, 2)              # v2: 15 is a valid zero

    def test_vectorized_views_agree(self):
        # random codes through both packers; read back with whole-array shifts (not loops)
        rs = np.random.RandomState(5)
        q = rs.randint(0, 16, (16, 64))
        z = rs.randint(1, 16, (16, 2))
        s = rs.randint(0x1000, 0x3000, (16, 2)).astype(np.uint16)
        shifts = (4 * np.arange(8)).astype(np.uint32)
        g = I4.gptq_pack(q, z - 1, s)
        qw = g["src_qweight"].view(np.uint32)                        # [K/8, N]
        nib = (qw[:, :, None] >> shifts) & 0xF                       # [K/8, N, 8]: k = 8i + j
        self.assertTrue(np.array_equal(nib.transpose(1, 0, 2).reshape(16, 64), q))
        a = I4.awq_pack(q, z, s)
        aw = a["src_qweight"].view(np.uint32)                        # [K, N/8]
        anib = (aw[:, :, None] >> shifts) & 0xF                      # [K, N/8, 8]
        cols = np.empty_like(anib)
        cols[:, :, list(I4.AWQ_ORDER)] = anib                        # nibble j -> column order[j]
        self.assertTrue(np.array_equal(cols.reshape(64, 16).T, q))
        self.assertTrue(np.array_equal(a["src_scales"], s.T))


class ExactSum(unittest.TestCase):
    def test_cancellation(self):
        # 2^60 + 1 - 2^60 = 1 exactly (a float64 loop gives 0)
        self.assertEqual(I4.exact_dot(np.array([2.0**60, 1.0, -2.0**60]), np.ones(3)), (1.0, 2.0**61 + 1))

    def test_inexact_products_use_fractions(self):
        # (1 + 2^-52)^2 is not a float64; (1 + 2^-52)^2 - 1 - 2^-51 = 2^-104 exactly
        a = 1 + 2.0**-52
        w, x = np.array([a, 1.0, 1.0]), np.array([a, -1.0, -2.0**-51])
        self.assertFalse(I4.products_exact(w, x)[0])
        self.assertTrue(I4.products_exact(w, x)[1:].all())
        self.assertEqual(I4.exact_dot(w, x)[0], 2.0**-104)

    def test_special_values(self):
        self.assertTrue(math.isnan(I4.exact_dot(np.array([0.0, 1.0]), np.array([np.inf, 1.0]))[0]))
        self.assertEqual(I4.exact_dot(np.array([2.0, 1.0]), np.array([np.inf, 1.0])),
                         (math.inf, math.inf))
        self.assertTrue(math.isnan(I4.exact_dot(np.array([1.0, 1.0]),
                                                np.array([np.inf, -np.inf]))[0]))


# ---------------------------------------------------------------------------------------------
# The fixtures in golden/int4, checked with the independent views
# ---------------------------------------------------------------------------------------------

def cases(family):
    path = os.path.join(INT4_GOLDEN, family + ".h5")
    with h5py.File(path, "r") as f:
        for name in f:
            yield name, {k: f[name].attrs[k] for k in f[name].attrs}, \
                {k: f[name][k][()] for k in f[name]}


def canonical_codes(qweight):
    """[N, K/8] uint32 -> [N, K] codes with whole-array shifts."""
    qw = np.asarray(qweight, np.uint32)
    nib = (qw[:, :, None] >> (4 * np.arange(8)).astype(np.uint32)) & 0xF
    return nib.reshape(qw.shape[0], -1).astype(np.int64)


def decoded(attrs, d):
    K, g = int(attrs["K"]), int(attrs["g"])
    q = canonical_codes(d["qweight"])
    gk = d["g_idx"].astype(np.int64) if "g_idx" in d else np.arange(K) // g
    z = d["zeros"].astype(np.int64) if "zeros" in d else np.full(d["scales"].shape, 8)
    return (q - z[:, gk]) * f16v(d["scales"])[:, gk]                # float64: exact here


@unittest.skipUnless(os.path.isdir(INT4_GOLDEN), "golden/int4 not generated")
class Fixtures(unittest.TestCase):
    def test_every_case_has_the_common_attributes(self):
        with open(ERRORS_H) as fh:
            names = set(re.findall(r"X\((\w+),", fh.read()))
        paths = {"quantize": {"quantize"}, "dequant": {"dequant"}, "gemm": {"gemm_packed"},
                 "decode": {"w4a16_decode"}, "gemv": {"w4a16_gemv"},
                 "import": {"import_gptq", "import_awq"}}
        paths["invalid"] = set().union(*paths.values())
        for family, _ in fam_int4.FAMILIES:
            seen = set()
            for name, attrs, d in cases(family):
                seen.add(attrs["path"])
                # the C loader's string buffers: name 64, description 256 bytes with the NUL
                self.assertLess(len(name), 64)
                self.assertLess(len(attrs["description"].encode("utf-8")), 256, name)
                self.assertEqual(attrs["format"], "int4")
                self.assertEqual(attrs["case_id"], f"int4.{family}.{name}")
                if attrs["expect"] == "invalid":
                    self.assertIn(attrs["error"], names, name)
                    self.assertEqual(family, "invalid")
                else:
                    self.assertNotEqual(family, "invalid")
            self.assertEqual(seen, paths[family], family)     # every path of the file exercised

    def test_quantize_codes(self):
        for name, attrs, d in cases("quantize"):
            x = (f16v(d["x"]) if attrs["src_type"] == "float16" else
                 f32v(d["x"]).astype(np.float64))
            s = (f16v(d["expected_scales"]) if attrs["scale_type"] == "float16" else
                 f32v(d["expected_scales"]).astype(np.float64))
            rows, cols = x.shape
            per = {"tensor": rows * cols, "row": cols, "group": int(attrs["group"])}
            sk = np.repeat(s, per[attrs["granularity"]]).reshape(rows, cols)
            # float32 quotient as numpy computes it, then half-even rounding and saturation
            with np.errstate(all="ignore"):
                r = np.where(sk == 0, 0, np.rint((x.astype(F32) / sk.astype(F32)).astype(F32)))
            self.assertTrue(np.array_equal(np.clip(r, -8, 7), d["expected_q"]), name)

    def test_dequant_values(self):
        for name, attrs, d in cases("dequant"):
            s = (f16v(d["scales"]).astype(F32) if attrs["scale_type"] == "float16"
                 else f32v(d["scales"]))
            rows, cols = d["q"].shape
            per = {"tensor": rows * cols, "row": cols, "group": int(attrs["group"])}
            sk = np.repeat(s, per[attrs["granularity"]]).reshape(rows, cols)
            with np.errstate(all="ignore"):
                want = (d["q"].astype(F32) * sk).astype(F32)
            self.assertTrue(np.array_equal(want.view(np.uint32), d["expected_f32"]), name)
            with np.errstate(all="ignore"):
                h = want.astype(np.float16).view(np.uint16)
            nan = np.isnan(want)
            self.assertTrue(np.array_equal(h[~nan], d["expected_f16"][~nan]), name)

    def test_gemm_acc(self):
        for name, attrs, d in cases("gemm"):
            K = int(attrs["K"])

            def codes(p):
                lo = (p & 0xF).astype(np.int64)
                hi = (p >> 4).astype(np.int64)
                c = np.stack([lo, hi], axis=2).reshape(p.shape[0], -1)[:, :K]
                return np.where(c >= 8, c - 16, c)
            acc = codes(d["A_packed"]) @ codes(d["B_packed"]).T
            self.assertTrue(np.array_equal(acc, d["expected_acc"]), name)
            if K % 2:
                self.assertFalse((d["A_packed"][:, -1] >> 4).any())

    def test_decode_values(self):
        for name, attrs, d in cases("decode"):
            want = decoded(attrs, d)
            got = f32v(d["expected_w"]).astype(np.float64)
            self.assertTrue(np.array_equal(got, want), name)
            self.assertTrue(np.array_equal(np.signbit(got), np.signbit(want)), name)

    def test_gemv_ystar_with_fractions(self):
        checked, skipped = 0, []
        for name, attrs, d in cases("gemv"):
            w = decoded(attrs, d)
            x = f16v(d["x"])
            if not (np.isfinite(x).all() and np.isfinite(w).all()):
                skipped.append(name)                # inf/NaN rows: test_gemv_special_values
                continue
            for b in range(x.shape[0]):
                for n in range(w.shape[0]):
                    terms = [Fraction(float(a)) * Fraction(float(c)) for a, c in zip(w[n], x[b])]
                    self.assertEqual(d["ystar"][b, n], float(sum(terms, Fraction(0))), name)
                    self.assertEqual(d["sum_abs"][b, n],
                                     float(sum((abs(t) for t in terms), Fraction(0))), name)
                    checked += 1
        self.assertGreater(checked, 0)
        self.assertEqual(skipped, ["special_x"])

    def test_gemv_special_values(self):
        d = dict((n, (a, v)) for n, a, v in cases("gemv"))["special_x"][1]
        ys = d["ystar"]
        # row 1 of x is 1.0 with +inf at column 5: a weight 0 there (row 0) gives inf * 0 = NaN,
        # every other output is +-inf with the sign of that weight; row 2 carries a NaN
        w5 = decoded({"K": 64, "g": 32}, d)[:, 5]
        self.assertTrue(np.isnan(ys[1, 0]) and w5[0] == 0)
        self.assertTrue(np.array_equal(ys[1, 1:], np.where(w5[1:] > 0, np.inf, -np.inf)))
        self.assertTrue(np.isnan(ys[2]).all())

    def test_imports_match_the_layouts(self):
        shifts = (4 * np.arange(8)).astype(np.uint32)
        seen = set()
        for name, attrs, d in cases("import"):
            kind = attrs["path"]
            seen.add(kind)
            N, K = int(attrs["N"]), int(attrs["K"])
            qw = d["src_qweight"].view(np.uint32)
            qz = d["src_qzeros"].view(np.uint32)
            zn = (qz[:, :, None] >> shifts) & 0xF                   # [G, N/8, 8]
            if kind == "import_gptq":
                q = ((qw[:, :, None] >> shifts) & 0xF).transpose(1, 0, 2).reshape(N, K)
                z = zn.reshape(zn.shape[0], N).T + (1 if attrs["version"] == 1 else 0)
            else:
                an = (qw[:, :, None] >> shifts) & 0xF
                cols = np.empty_like(an)
                cols[:, :, [0, 2, 4, 6, 1, 3, 5, 7]] = an
                q = cols.reshape(K, N).T
                zc = np.empty_like(zn)
                zc[:, :, [0, 2, 4, 6, 1, 3, 5, 7]] = zn
                z = zc.reshape(zc.shape[0], N).T
            self.assertTrue(np.array_equal(canonical_codes(d["qweight"]), q), name)
            self.assertTrue(np.array_equal(d["zeros"], z), name)
            self.assertTrue(np.array_equal(d["scales"], d["src_scales"].T), name)
            if attrs["has_g_idx"]:
                self.assertTrue(np.array_equal(d["g_idx"], d["src_g_idx"]), name)
        self.assertEqual(seen, {"import_gptq", "import_awq"})


if __name__ == "__main__":
    unittest.main()
