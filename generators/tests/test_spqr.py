"""SpQR: word layout, dequantization, CSR/PTCSR, validation, the exact product, and the SpQR
fixtures in golden/spqr.

Independent views used here, each written differently from qgold_gen.spqr:
  * a per-word decoder with Python integers that follows the spec's bit table field by field;
  * dequantization with numpy float16 scalars (each float16 operation is computed in float32 and
    rounded once, the same RN16 the spec asks for, through numpy's own conversion);
  * exact rational arithmetic (fractions.Fraction) for ystar and sum_abs, rounded once to float64;
  * a hand-written PTCSR layout built slot by slot from the spec's formula base + 16 l + k.
"""

import os
import re
import tempfile
import unittest
from fractions import Fraction

import h5py
import numpy as np

from qgold_gen import fam_spqr as fs
from qgold_gen import fp16
from qgold_gen import spqr as sq
from qgold_gen.rng import Stream
from qgold_gen.schema import FixtureFile, describe_file

GENERATORS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(GENERATORS)
REPO_GOLDEN = os.path.join(REPO, "golden")
SPQR_GOLDEN = os.path.join(REPO_GOLDEN, "spqr")
ERRORS_H = os.path.join(REPO, "reference", "include", "qgold", "errors.h")
MIB = 1 << 20


def random_layer_parts(seed, m, n, stats_range=((2**-9, 0.046875), (0.25, 1.25), (-2, 2), (-2, 2))):
    s = Stream(seed)
    T = sq.tiles_c(n)
    q = s.int_range_array(8, m * n).reshape(m, n)
    s_q = s.int_range_array(8, m * T).reshape(m, T)
    z_q = s.int_range_array(8, m * T).reshape(m, T)
    stats = np.stack([fp16.f32_to_f16(fp16.f32_bits(s.uniform_array(a, b, (m // 16) * T)))
                      for a, b in stats_range], axis=1).reshape(m // 16, T, 4)
    return q, s_q, z_q, stats


def spec_decode_word(w):
    """Fields of one dense word straight from the spec's bit table (Python integers)."""
    w = int(w)
    return {"s_q": w & 7, "z_q": (w >> 3) & 7, "q": [(w >> (6 + 3 * j)) & 7 for j in range(16)],
            "frag": (w >> 54) & 0xFF, "top": w >> 62}


def h(bits):
    return np.array(int(bits), np.uint16).view(np.float16)


def spec_dequant_scalar(s_q, z_q, q, st):
    """w of one (row, column) with numpy float16 scalars: every operation rounded to fp16."""
    s_s, z_s, s_z, z_z = (h(v) for v in st)
    with np.errstate(all="ignore"):
        s = np.float16(s_s * np.float16(np.float16(s_q) - s_z))
        z = np.float16(z_s * np.float16(np.float16(z_q) - z_z))
        return np.float16(s * np.float16(np.float16(q) - z))


def exact_row(terms):
    """The exact sum of products of finite float64 pairs, correctly rounded to float64."""
    total = sum((Fraction(a) * Fraction(b) for a, b in terms), Fraction(0))
    return float(total)


def f16v(bits):
    return float(np.array(bits, np.uint16).view(np.float16))


def random_rows(seed, m, n, density):
    s = Stream(seed)
    mask = s.uniform01_array(m * n).reshape(m, n) < np.float32(density)
    vals = fp16.f32_to_f16(fp16.f32_bits(s.uniform_array(-4.0, 4.0, m * n))).reshape(m, n)
    rows = []
    for r in range(m):
        cols = np.nonzero(mask[r])[0][::-1]          # descending: order within a row is free
        rows.append([fs.zero_safe(sq.word(int(c), int(vals[r, c]))) for c in cols])
    return rows


# ---------------------------------------------------------------------------------------------
# Layout
# ---------------------------------------------------------------------------------------------

class Layout(unittest.TestCase):
    def test_word_bits_spec_example(self):
        # one tile: row k has s_q = k mod 8, z_q = 7 - k mod 8, q_j = (j + k) mod 8
        m, n = 16, 16
        q = (np.arange(16)[None, :] + np.arange(16)[:, None]) % 8
        s_q = (np.arange(16) % 8)[:, None]
        z_q = (7 - np.arange(16) % 8)[:, None]
        stats = np.array([[[0x3C00, 0xBC00, 0x1234, 0xABCD]]], np.uint16)
        d = sq.pack(m, n, q, s_q, z_q, stats)
        so = 0x3C00 | 0xBC00 << 16 | 0x1234 << 32 | 0xABCD << 48
        for k in range(16):
            want = (k % 8) | (7 - k % 8) << 3
            for j in range(16):
                want |= ((j + k) % 8) << (6 + 3 * j)
            want |= ((so >> (8 * (k // 2))) & 0xFF) << 54
            self.assertEqual(int(d[k]), want, k)
            self.assertEqual(int(d[k]) >> 62, 0)

    def test_memory_order(self):
        m, n = 32, 40                                  # T = 3, the last tile column padded
        q, s_q, z_q, stats = random_layer_parts(1, m, n)
        d = sq.pack(m, n, q, s_q, z_q, stats)
        self.assertEqual(d.size, sq.dense_words(m, n))
        T = 3
        for R in range(2):
            for t in range(T):
                so = int(sq.second_order_words(stats[R, t]))
                for k in range(16):
                    f = spec_decode_word(d[((R * T) + t) * 16 + k])
                    r = 16 * R + k
                    self.assertEqual(f["s_q"], s_q[r, t])
                    self.assertEqual(f["z_q"], z_q[r, t])
                    self.assertEqual(f["frag"], (so >> (8 * (k // 2))) & 0xFF)
                    for j in range(16):
                        c = 16 * t + j
                        self.assertEqual(f["q"][j], q[r, c] if c < n else 0, (R, t, k, j))

    def test_pack_unpack_round_trip(self):
        for seed, (m, n) in enumerate([(16, 16), (16, 17), (48, 100), (32, 4100)]):
            q, s_q, z_q, stats = random_layer_parts(10 + seed, m, n)
            d = sq.pack(m, n, q, s_q, z_q, stats)
            f = sq.unpack(m, n, d)
            np.testing.assert_array_equal(f["q"][:, :n], q)
            self.assertFalse(f["q"][:, n:].any())
            np.testing.assert_array_equal(f["s_q"], s_q)
            np.testing.assert_array_equal(f["z_q"], z_q)
            np.testing.assert_array_equal(f["stats_even"], stats)
            np.testing.assert_array_equal(f["stats_odd"], stats)
            self.assertFalse(f["reserved"].any())
            again = sq.pack(m, n, f["q"][:, :n], f["s_q"], f["z_q"], f["stats_even"])
            np.testing.assert_array_equal(again, d)

    def test_pack_refuses_bad_codes(self):
        q, s_q, z_q, stats = random_layer_parts(3, 16, 16)
        q[0, 0] = 8
        with self.assertRaises(ValueError):
            sq.pack(16, 16, q, s_q, z_q, stats)


# ---------------------------------------------------------------------------------------------
# Dequantization
# ---------------------------------------------------------------------------------------------

class Dequant(unittest.TestCase):
    def check_against_scalar(self, m, n, q, s_q, z_q, stats):
        d = sq.pack(m, n, q, s_q, z_q, stats)
        w = sq.dequant(m, n, d)
        for r in range(m):
            for c in range(n):
                t = c // 16
                want = spec_dequant_scalar(s_q[r, t], z_q[r, t], q[r, c], stats[r // 16, t])
                got = w[r, c]
                if np.isnan(want):
                    self.assertTrue(fp16.f16_is_nan(got), (r, c))
                else:
                    self.assertEqual(int(got), int(np.array(want).view(np.uint16)), (r, c))
        return w

    def test_random_statistics(self):
        m, n = 32, 40
        self.check_against_scalar(m, n, *random_layer_parts(20, m, n))

    def test_wide_statistics(self):
        # statistics over most of the fp16 range: products and differences round, overflow, vanish
        m, n = 16, 64
        q, s_q, z_q, _ = random_layer_parts(21, m, n)
        bits = Stream(22).bits32_array(16).astype(np.int64) & 0x7BFF    # finite, both signs
        bits |= (Stream(23).bits32_array(16).astype(np.int64) & 1) << 15
        stats = bits.astype(np.uint16).reshape(1, 4, 4)
        w = self.check_against_scalar(m, n, q, s_q, z_q, stats)
        self.assertTrue(fp16.f16_is_nan(w).any() or ((w & 0x7FFF) == 0x7C00).any()
                        or ((w & 0x7FFF) < 0x400).any())

    def test_specials_follow_ieee(self):
        m, n = 16, 64
        q, s_q, z_q, stats = random_layer_parts(24, m, n)
        stats = stats.copy()
        stats[0, 0, 0] = 0x7C00        # s_s = inf: s = +-inf or NaN (inf x 0), weights inf/NaN
        stats[0, 1, 1] = 0x0000        # z_s = 0: z = +-0
        stats[0, 2, 2] = 0x7E00        # s_z = NaN: the tile is NaN
        stats[0, 3, 3] = 0xFC00        # z_z = -inf: z = +-inf, q - z = -+inf
        w = self.check_against_scalar(m, n, q, s_q, z_q, stats)
        self.assertTrue(fp16.f16_is_nan(w[:, 32:48]).all())

    def test_subtract_then_multiply_two_roundings(self):
        # s = RN16(1.0009765625 * 5) = 5.00390625, z = 2^-10 * 6.5 (exact); q - z needs rounding for
        # q >= 1, so RN16(s * RN16(q - z)) differs from one rounding of s * (q - z) somewhere
        stats = np.array([[[fs.f16(1.0009765625), fs.f16(0.0009765625), fs.f16(0.0),
                            fs.f16(-0.5)]]], np.uint16)
        q = np.tile(np.arange(16) % 8, (16, 1))
        s_q = np.full((16, 1), 5)
        z_q = np.full((16, 1), 6)
        w = self.check_against_scalar(16, 16, q, s_q, z_q, stats)
        s = Fraction(5.00390625)
        z = Fraction(13, 2) / 1024
        once = [int(np.array(np.float16(float(s * (c - z)))).view(np.uint16)) for c in range(8)]
        self.assertEqual(f16v(sq.dequant(16, 16, sq.pack(16, 16, np.full((16, 16), 0), s_q, z_q,
                                                          stats))[0, 0]),
                         float(np.float16(float(-s * z))))     # 0 - z is exact: one rounding
        self.assertNotEqual([int(v) for v in w[0, :8]], once)


# ---------------------------------------------------------------------------------------------
# Outliers: CSR, PTCSR
# ---------------------------------------------------------------------------------------------

class Outliers(unittest.TestCase):
    def test_ptcsr_slots(self):
        m, n = 48, 64
        rows = random_rows(30, m, n, 0.1)
        rows[20] = [fs.zero_safe(sq.word(c, fs.f16(0.5 + c))) for c in range(n)]   # dense row
        rows[40] = []
        ro, cv = sq.ptcsr_from_rows(rows)
        self.assertEqual(ro.dtype, np.int32)
        self.assertEqual(ro.size, m // 16 + 1)
        for R in range(m // 16):
            L = max(len(rows[16 * R + k]) for k in range(16))
            self.assertEqual(ro[R + 1] - ro[R], 16 * L)
            for k in range(16):
                r = rows[16 * R + k]
                for l in range(L):
                    want = r[l] if l < len(r) else 0
                    self.assertEqual(int(cv[ro[R] + 16 * l + k]), want)
        self.assertEqual(sq.ptcsr_rows(m, ro, cv), rows)
        ro2, cv2 = sq.csr_from_rows(rows)
        self.assertEqual(sq.csr_rows(m, ro2, cv2), rows)
        pro, pcv = sq.csr_to_ptcsr(m, ro2, cv2)
        np.testing.assert_array_equal(pro, ro)
        np.testing.assert_array_equal(pcv, cv)

    def test_ptcsr_refuses_word_zero(self):
        rows = [[] for _ in range(16)]
        rows[3] = [0]
        with self.assertRaises(ValueError):
            sq.ptcsr_from_rows(rows)

    def test_padding_contributes_nothing_word_zero_in_csr_does(self):
        m, n = 16, 16
        q, s_q, z_q, stats = random_layer_parts(31, m, n)
        dense = sq.pack(m, n, q, s_q, z_q, stats)
        rows = [[] for _ in range(m)]
        rows[0] = [sq.word(3, fs.f16(1.0)), sq.word(4, fs.f16(2.0))]
        rows[1] = [sq.word(5, fs.f16(-1.0))]                 # PTCSR slot (l = 1, k = 1) is padding
        x = fp16.f32_to_f16(fp16.f32_bits(np.linspace(-1, 1, n, dtype=np.float32)))[None, :].copy()
        x[0, 0] = 0x7C00
        L_csr = fs.layer_with(m, n, dense, "csr", rows)
        L_pt = fs.layer_with(m, n, dense, "ptcsr", rows)
        self.assertTrue((L_pt.col_vals == 0).any())
        y1, a1 = sq.gemv_reference(L_csr, x)
        y2, a2 = sq.gemv_reference(L_pt, x)
        np.testing.assert_array_equal(y1, y2)
        np.testing.assert_array_equal(a1, a2)
        w = sq.dequant(m, n, dense)
        nonzero0 = (w[:, 0] & 0x7FFF) != 0
        self.assertTrue(np.isinf(y2[0, nonzero0]).all())
        # a CSR word 0 is the outlier +0 at column 0: +0 x inf = NaN
        rows[1] = rows[1] + [0]
        y3, _ = sq.gemv_reference(fs.layer_with(m, n, dense, "csr", rows), x)
        self.assertTrue(np.isnan(y3[0, 1]))
        # and a word 0x80000000 (-0 at column 0) is a real outlier in PTCSR too
        rows[1] = rows[1][:-1] + [0x80000000]
        y4, _ = sq.gemv_reference(fs.layer_with(m, n, dense, "ptcsr", rows), x)
        self.assertTrue(np.isnan(y4[0, 1]))
        self.assertEqual(np.isnan(y4[0]).sum(), 1 + int((~nonzero0).sum() - (~nonzero0[1])))


# ---------------------------------------------------------------------------------------------
# Exact product
# ---------------------------------------------------------------------------------------------

class Product(unittest.TestCase):
    def test_exact_sum_fraction(self):
        m, n = 32, 40
        q, s_q, z_q, stats = random_layer_parts(40, m, n)
        dense = sq.pack(m, n, q, s_q, z_q, stats)
        rows = random_rows(41, m, n, 0.2)
        rows[2] = rows[2] + rows[2]                       # duplicates add
        perm = Stream(42).permutation_array(n).astype(np.int64)
        x = fp16.f32_to_f16(fp16.f32_bits(Stream(43).uniform_array(-2.0, 2.0, 3 * n))).reshape(3, n)
        x[1, 7] = 0x0001                                  # subnormal activation
        x[2, :] = x[2, :] | 0x8000
        L = fs.layer_with(m, n, dense, "csr", rows, perm)
        ys, sa = sq.gemv_reference(L, x)
        self.assertEqual(L.max_terms(), n + max(len(r) for r in rows))
        w = sq.dequant(m, n, dense)
        for b in range(3):
            xp = [f16v(x[b, perm[i]]) for i in range(n)]
            for r in range(m):
                terms = [(f16v(w[r, j]), xp[j]) for j in range(n)]
                terms += [(f16v(wd >> 16), xp[wd & 0xFFFF]) for wd in rows[r]]
                self.assertEqual(ys[b, r], exact_row(terms), (b, r))
                self.assertEqual(sa[b, r], exact_row([(abs(a), abs(c)) for a, c in terms]), (b, r))

    def test_ieee_specials(self):
        self.assertTrue(np.isnan(sq.ieee_exact_sum([np.inf, -np.inf, 1.0])[0]))
        self.assertEqual(sq.ieee_exact_sum([np.inf, -np.inf])[1], np.inf)
        self.assertEqual(sq.ieee_exact_sum([np.inf, 1.0, 5.0]), (np.inf, np.inf))
        self.assertEqual(sq.ieee_exact_sum([-np.inf, 1.0])[0], -np.inf)
        y, a = sq.ieee_exact_sum([np.nan, 1.0])
        self.assertTrue(np.isnan(y) and np.isnan(a))
        self.assertEqual(sq.ieee_exact_sum([1e16, 1.0, -1e16]), (1.0, 2e16))

    def test_padded_columns_do_not_contribute(self):
        m, n = 16, 17
        q, s_q, z_q, stats = random_layer_parts(44, m, n)
        L = sq.Layer(m, n, sq.pack(m, n, q, s_q, z_q, stats))
        x = np.full((1, n), fs.f16(1.0), np.uint16)
        ys, _ = sq.gemv_reference(L, x)
        w = sq.dequant(m, n, L.dense)
        for r in range(m):
            self.assertEqual(ys[0, r], exact_row([(f16v(w[r, j]), 1.0) for j in range(n)]))

    def test_batch_rows_are_independent(self):
        m, n = 16, 48
        q, s_q, z_q, stats = random_layer_parts(45, m, n)
        L = fs.layer_with(m, n, sq.pack(m, n, q, s_q, z_q, stats), "ptcsr",
                          random_rows(46, m, n, 0.1))
        x = fp16.f32_to_f16(fp16.f32_bits(Stream(47).uniform_array(-1.0, 1.0, 16 * n)))
        x = x.reshape(16, n)
        ys, sa = sq.gemv_reference(L, x)
        for b in (0, 7, 15):
            y1, s1 = sq.gemv_reference(L, x[b:b + 1])
            np.testing.assert_array_equal(y1[0], ys[b])
            np.testing.assert_array_equal(s1[0], sa[b])
        for bad in (np.zeros((0, n), np.uint16), np.zeros((17, n), np.uint16)):
            with self.assertRaises(sq.SpqrError) as cm:
                sq.gemv_reference(L, bad)
            self.assertEqual(cm.exception.name, "spqr_batch_out_of_range")


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------

def errors_h_spqr_names():
    with open(ERRORS_H, encoding="utf-8") as fh:
        return set(re.findall(r"X\((spqr_[a-z0-9_]+),", fh.read()))


class Validation(unittest.TestCase):
    def base(self, kind="csr", n=32, m=32, perm=True):
        q, s_q, z_q, stats = random_layer_parts(50, m, n)
        perm_a = Stream(51).permutation_array(n).astype(np.int64) if perm else None
        return fs.layer_with(m, n, sq.pack(m, n, q, s_q, z_q, stats), kind,
                             random_rows(52, m, n, 0.15), perm_a)

    def expect(self, L, rule):
        self.assertEqual(sq.violations(L), [rule])
        with self.assertRaises(sq.SpqrError) as cm:
            sq.validate(L)
        self.assertEqual(cm.exception.name, rule)

    def test_valid(self):
        for kind in ("none", "csr", "ptcsr"):
            self.assertEqual(sq.violations(self.base(kind)), [])
            self.assertEqual(sq.violations(self.base(kind, n=17, perm=False)), [])

    def test_each_rule(self):
        L = self.base()
        self.expect(sq.Layer(24, L.n, L.dense), "spqr_rows_not_multiple")
        self.expect(sq.Layer(L.m, 0, np.zeros(0, np.uint64)), "spqr_cols_out_of_range")
        self.expect(sq.Layer(L.m, L.n, L.dense[1:], "csr", L.row_offsets, L.col_vals, L.perm),
                    "spqr_size_mismatch")
        self.expect(sq.Layer(L.m, L.n, L.dense, "csr", L.row_offsets, L.col_vals, L.perm[1:]),
                    "spqr_size_mismatch")
        d = L.dense.copy()
        d[3] |= np.uint64(1) << np.uint64(63)
        self.expect(sq.Layer(L.m, L.n, d, "csr", L.row_offsets, L.col_vals, L.perm),
                    "spqr_reserved_bits")
        d = L.dense.copy()
        d[16 + 14] ^= np.uint64(1) << np.uint64(61)      # row 14 of tile (0, 1): byte 7's even copy
        self.expect(sq.Layer(L.m, L.n, d, "csr", L.row_offsets, L.col_vals, L.perm),
                    "spqr_fragment_mismatch")
        ro = L.row_offsets.copy()
        ro[5] = ro[6] + 1
        self.expect(sq.Layer(L.m, L.n, L.dense, "csr", ro, L.col_vals, L.perm),
                    "spqr_offsets_decreasing")
        self.expect(sq.Layer(L.m, L.n, L.dense, "csr", L.row_offsets, L.col_vals[:-1], L.perm),
                    "spqr_offsets_not_nnz")
        cv = L.col_vals.copy()
        cv[-1] = (cv[-1] & np.uint32(0xFFFF0000)) | np.uint32(L.n)
        self.expect(sq.Layer(L.m, L.n, L.dense, "csr", L.row_offsets, cv, L.perm),
                    "spqr_outlier_col_out_of_range")
        p = L.perm.copy()
        p[0] = p[1]
        self.expect(sq.Layer(L.m, L.n, L.dense, "csr", L.row_offsets, L.col_vals, p),
                    "spqr_perm_invalid")
        P = self.base("ptcsr")
        self.expect(sq.Layer(P.m, P.n, P.dense, "ptcsr", P.row_offsets + 1,
                             np.concatenate([[np.uint32(0x3C000001)], P.col_vals]), P.perm),
                    "spqr_offsets_not_zero")
        cv = np.concatenate([P.col_vals, np.zeros(16, np.uint32)])
        ro = P.row_offsets.copy()
        ro[-1] += 16                                     # an all-padding last level
        self.expect(sq.Layer(P.m, P.n, P.dense, "ptcsr", ro, cv, P.perm),
                    "spqr_ptcsr_segment_mismatch")
        ro = P.row_offsets.copy()
        ro[1] += 1
        self.expect(sq.Layer(P.m, P.n, P.dense, "ptcsr", ro, P.col_vals, P.perm),
                    "spqr_ptcsr_segment_not_multiple")
        S = self.base("none", n=20)
        d = S.dense.copy()
        d[16 + 4] |= np.uint64(1) << np.uint64(6 + 3 * 9)  # tile column 1, column 25 >= 20
        self.expect(sq.Layer(S.m, S.n, d, "none", perm=S.perm), "spqr_padding_codes_nonzero")

    def test_rule_order(self):
        self.assertEqual(set(sq.RULES) | {sq.BATCH_RULE}, errors_h_spqr_names())
        L = self.base()
        d = L.dense.copy()
        d[0] |= np.uint64(3) << np.uint64(62)
        p = L.perm.copy()
        p[0] = p[1]
        bad = sq.Layer(L.m, L.n, d, "csr", L.row_offsets, L.col_vals, p)
        self.assertEqual(sq.violations(bad), ["spqr_reserved_bits", "spqr_perm_invalid"])
        with self.assertRaises(sq.SpqrError) as cm:
            sq.validate(bad)
        self.assertEqual(cm.exception.name, "spqr_reserved_bits")


# ---------------------------------------------------------------------------------------------
# Generation: determinism
# ---------------------------------------------------------------------------------------------

class Determinism(unittest.TestCase):
    def test_families_are_deterministic(self):
        with tempfile.TemporaryDirectory(prefix="qgold-spqr-") as tmp:
            hashes = []
            for k in range(2):
                per = {}
                for fam, build in (("dequant", fs.build_dequant), ("invalid", fs.build_invalid)):
                    path = os.path.join(tmp, f"{fam}{k}.h5")
                    with FixtureFile(path, "spqr", fam) as ff:
                        build(ff)
                    per[fam] = {o: i.hash for o, i in describe_file(path).items()}
                hashes.append(per)
            self.assertEqual(hashes[0], hashes[1])


# ---------------------------------------------------------------------------------------------
# The fixtures in golden/spqr
# ---------------------------------------------------------------------------------------------

def layer_of(g):
    a = g.attrs
    kind = a["outliers"]
    get = (lambda k: g[k][()] if k in g else None)
    return sq.Layer(int(a["m"]), int(a["n"]), g["dense"][()], kind, get("row_offsets"),
                    get("col_vals"), get("perm"))


def all_cases(fam):
    with h5py.File(os.path.join(SPQR_GOLDEN, fam + ".h5"), "r") as f:
        return {n: ({k: g[k][()] for k in g}, dict(g.attrs), layer_of(g)) for n, g in f.items()}


LAYER_TYPES = {"dense": np.uint64, "row_offsets": np.int32, "col_vals": np.uint32,
               "perm": np.uint16}


@unittest.skipUnless(os.path.isdir(SPQR_GOLDEN), "the repository has no SpQR fixtures yet")
class Fixtures(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cases = {fam: all_cases(fam) for fam in ("dequant", "gemv", "invalid")}

    def test_files(self):
        have = sorted(n[:-3] for n in os.listdir(SPQR_GOLDEN) if n.endswith(".h5"))
        self.assertEqual(have, sorted(fam for _, fam, _ in fs.families()))

    def test_schema(self):
        for fam, cases in self.cases.items():
            with h5py.File(os.path.join(SPQR_GOLDEN, fam + ".h5"), "r") as f:
                self.assertEqual(f.attrs["format"], "spqr")
                for name, g in f.items():
                    a = g.attrs
                    where = f"{fam} {name}"
                    self.assertEqual(a["case_id"], f"spqr.{fam}.{name}")
                    self.assertEqual(a["path"], "dequant" if fam == "dequant" else "gemv", where)
                    self.assertEqual(a["expect"] == "invalid", fam == "invalid", where)
                    for key in ("m", "n", "has_perm", "batch", "format_version", "count"):
                        if key in a:
                            self.assertEqual(g.attrs.get_id(key).dtype, np.int64, where)
                    self.assertEqual(g.attrs.get_id("seed").dtype, np.uint64, where)
                    kind = a["outliers"]
                    self.assertIn(kind, sq.OUTLIER_KINDS)
                    self.assertEqual(("row_offsets" in g), kind != "none", where)
                    self.assertEqual(("col_vals" in g), kind != "none", where)
                    self.assertEqual(("perm" in g), bool(a["has_perm"]), where)
                    for ds, dt in LAYER_TYPES.items():
                        if ds in g:
                            self.assertEqual(g[ds].dtype, np.dtype(dt), where)
                            self.assertEqual(g[ds].ndim, 1, where)
                    extra = set(g) - set(LAYER_TYPES)
                    if fam == "dequant":
                        self.assertEqual(extra, {"expected_w"}, where)
                        self.assertEqual(g["expected_w"].attrs["dtype"], "float16")
                        self.assertEqual(g["expected_w"].shape, (a["m"], a["n"]), where)
                    elif fam == "gemv":
                        self.assertEqual(extra, {"x", "ystar", "sum_abs"}, where)
                        self.assertEqual(g["x"].attrs["dtype"], "float16")
                        self.assertEqual(g["x"].shape, (a["batch"], a["n"]), where)
                        self.assertEqual(g["ystar"].dtype, np.float64)
                        self.assertEqual(g["ystar"].shape, (a["batch"], a["m"]), where)
                        self.assertEqual(g["sum_abs"].shape, (a["batch"], a["m"]), where)
                    else:
                        self.assertEqual(extra, {"x"}, where)
                        self.assertEqual(g["x"].shape[0], a["batch"], where)

    def test_recomputation(self):
        for name, (d, a, L) in self.cases["dequant"].items():
            self.assertEqual(sq.violations(L), [], name)
            w = sq.dequant(L.m, L.n, L.dense)
            np.testing.assert_array_equal(w, d["expected_w"], name)
            self.assertEqual(a.get("nan_sign") == "any", bool(fp16.f16_is_nan(w).any()), name)
        for name, (d, a, L) in self.cases["gemv"].items():
            ys, sa = sq.gemv_reference(L, d["x"])
            np.testing.assert_array_equal(ys, d["ystar"], name)
            np.testing.assert_array_equal(sa, d["sum_abs"], name)
            self.assertEqual(a.get("nan_sign") == "any", bool(np.isnan(ys).any()), name)

    def test_invalid_cases_break_exactly_their_rule(self):
        seen = set()
        for name, (d, a, L) in self.cases["invalid"].items():
            err = a["error"]
            seen.add(err)
            if err == sq.BATCH_RULE:
                self.assertEqual(sq.violations(L), [], name)
                self.assertNotIn(d["x"].shape[0], range(1, 17), name)
                with self.assertRaises(sq.SpqrError) as cm:
                    sq.gemv_reference(L, d["x"])
                self.assertEqual(cm.exception.name, err, name)
            else:
                self.assertEqual(sq.violations(L), [err], name)
                self.assertEqual(d["x"].shape, (1, max(L.n, 0)), name)
        self.assertEqual(seen, errors_h_spqr_names())
        cases = self.cases["invalid"]
        self.assertEqual(cases["m_0"][2].m, 0)
        self.assertGreater(cases["n_65537"][2].n, sq.MAX_N)
        self.assertEqual(cases["n_0"][2].n, 0)
        for k in ("batch_0", "batch_17"):
            self.assertIn(cases[k][0]["x"].shape[0], (0, 17))
        tops = {int(w) >> 62 for n in ("reserved_bit62", "reserved_bit63")
                for w in cases[n][0]["dense"]}
        self.assertTrue({1, 2} <= tops)

    def test_pairs(self):
        pairs = {}
        for name, (d, a, L) in self.cases["gemv"].items():
            if "pair" in a:
                pairs.setdefault(a["pair"], {})[a["outliers"]] = (d, L)
        self.assertGreaterEqual(len(pairs), 8)
        for p, both in pairs.items():
            self.assertEqual(set(both), {"csr", "ptcsr"}, p)
            (dc, Lc), (dp, Lp) = both["csr"], both["ptcsr"]
            np.testing.assert_array_equal(dc["ystar"], dp["ystar"], p)
            np.testing.assert_array_equal(dc["sum_abs"], dp["sum_abs"], p)
            np.testing.assert_array_equal(dc["x"], dp["x"], p)
            np.testing.assert_array_equal(dc["dense"], dp["dense"], p)
            self.assertEqual(Lc.outlier_rows(), Lp.outlier_rows(), p)
            self.assertNotIn(0, [int(w) for w in dc["col_vals"]], p)
            self.assertTrue((dp["col_vals"] == 0).any(), p)       # padding present

    def test_edges_present(self):
        gemv = self.cases["gemv"]
        every = list(self.cases["dequant"].values()) + list(gemv.values())
        ns = {L.n for _, _, L in every}
        ms = {L.m for _, _, L in every}
        self.assertTrue({16, 32, 48, 80, 96, 128, 256, 4096, 11008, 28672, 17, 4100} <= ns, ns)
        self.assertTrue({16, 32, 4096} <= ms, ms)
        self.assertTrue(all(L.m <= 32 for _, _, L in gemv.values() if L.n > 4096))
        self.assertTrue(all(L.n <= 32 for _, _, L in every if L.m >= 4096))
        self.assertTrue(set(range(1, 17)) <= {int(a["batch"]) for _, a, _ in gemv.values()})
        # every code in q, s_q, z_q
        for field in ("q", "s_q", "z_q"):
            vals = set()
            for _, _, L in every:
                f = sq.unpack(L.m, L.n, L.dense)
                vals |= set(np.unique(f[field][:, :L.n] if field == "q" else f[field]).tolist())
            self.assertEqual(vals, set(range(8)), field)
        # second-order statistics: negative, subnormal, near 65504, zero
        st = np.concatenate([sq.unpack(L.m, L.n, L.dense)["stats_even"].reshape(-1)
                             for _, _, L in every])
        mag = st & 0x7FFF
        self.assertTrue((st & 0x8000).any() and ((mag > 0) & (mag < 0x400)).any())
        self.assertTrue((mag == 0x7BFF).any() and (mag == 0).any())
        # permutations
        kinds = {a["perm_kind"] for _, a, _ in every}
        self.assertTrue({"none", "identity", "reversed", "random", "act_order"} <= kinds)
        for _, a, L in every:
            if a["perm_kind"] == "identity":
                np.testing.assert_array_equal(L.perm, np.arange(L.n))
            if a["perm_kind"] == "reversed":
                np.testing.assert_array_equal(L.perm, np.arange(L.n)[::-1])
            self.assertEqual(a["perm_kind"] == "none", L.perm is None)
        # outliers
        rows_all = [(L, L.outlier_rows()) for _, _, L in gemv.values()]
        self.assertIn("none", {L.outliers for L, _ in rows_all})
        self.assertTrue(any(L.outliers != "none" and any(len(r) == 0 for r in rows)
                            for L, rows in rows_all))
        self.assertTrue(any(any(len(r) == L.n for r in rows) for L, rows in rows_all))
        self.assertTrue(any(all(len(rows[16 * R + k]) == L.n for k in range(16))
                            for L, rows in rows_all for R in range(L.m // 16)))
        cols = [(L.n, {w & 0xFFFF for r in rows for w in r}) for L, rows in rows_all]
        self.assertTrue(any(0 in c and n - 1 in c for n, c in cols))
        self.assertTrue(any(max(c, default=0) >= 32768 for _, c in cols))
        dens = [sum(map(len, rows)) / (L.m * L.n) for L, rows in rows_all if L.outliers != "none"]
        self.assertLess(min(dens), 0.002)
        self.assertGreater(max(dens), 0.85)
        # activations: +-0, subnormal, inf, NaN; inf/NaN at x'[0] with PTCSR padding present
        xs = np.concatenate([d["x"].reshape(-1) for d, _, _ in gemv.values()])
        for bits in (0x0000, 0x8000, 0x0001, 0x7C00, 0xFC00):
            self.assertIn(bits, xs)
        self.assertTrue(fp16.f16_is_nan(xs).any())
        hit = set()
        for d, a, L in gemv.values():
            if L.outliers == "ptcsr" and (L.col_vals == 0).any():
                xp0 = sq.gather(L, d["x"])[:, 0]
                hit |= {"inf" if (v & 0x7FFF) == 0x7C00 else "nan" for v in xp0
                        if (v & 0x7C00) == 0x7C00}
                if L.perm is not None and L.perm[0] != 0 and ((xp0 & 0x7FFF) == 0x7C00).any():
                    hit.add("permuted")
        self.assertEqual(hit, {"inf", "nan", "permuted"})

    def test_finite_outputs_fit_fp16(self):
        # a correct kernel's fp16 output of a finite ystar must not overflow to inf
        for name, (d, _, _) in self.cases["gemv"].items():
            y = d["ystar"][np.isfinite(d["ystar"])]
            self.assertTrue(y.size == 0 or np.abs(y).max() < 65504, name)

    def test_size_budget(self):
        total = sum(os.path.getsize(os.path.join(SPQR_GOLDEN, n)) for n in os.listdir(SPQR_GOLDEN))
        self.assertLess(total, 2.5 * MIB)


if __name__ == "__main__":
    unittest.main()
