"""K-quants: layouts, dequantization, the reference quantizers, dot integers, exact references, and
the K-quant fixtures in golden/.

Independent views used here, each written differently from qgold_gen.kquants:
  * a per-element decoder that follows the spec's element-mapping tables one element at a time;
  * exact rational arithmetic (fractions.Fraction) for dequantized values, dot identities and
    the float64 references;
  * a scalar transcription of the quantizers (numpy float32 scalars, one operation at a time, fp16
    rounding through numpy's own float16 cast), held to the vectorized code byte for byte;
  * error bounds derived from the stored scales (quantize -> dequantize stays within half a step).
"""

import os
import unittest
from fractions import Fraction

import h5py
import numpy as np

from qgold_gen import fam_kquants as fk
from qgold_gen import fp16
from qgold_gen import kquants as kq
from qgold_gen.rng import Stream

f32 = np.float32
GENERATORS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_GOLDEN = os.path.join(os.path.dirname(GENERATORS), "golden")
MIB = 1 << 20


def random_blocks(t, n, seed):
    b, _ = fk.random_bytes(seed, n * kq.BLOCK_BYTES[t])
    return b.reshape(n, -1)


def finite_d_blocks(t, n, seed):
    """Random blocks whose d (and dmin) are replaced by finite fp16 / float32 values."""
    b = random_blocks(t, n, seed).copy()
    s = Stream(seed + 1)
    if t == "q8_k":
        d = fp16.f32_bits(s.uniform_array(-4.0, 4.0, n))
        for k in range(4):
            b[:, k] = (d >> np.uint32(8 * k)) & np.uint32(0xFF)
        return b
    for off in ((0, 2) if t in ("q4_k", "q5_k") else (208,)):
        h = s.bits32_array(n) & np.uint32(0x7BFF)       # exponent field <= 30: finite
        b[:, off] = h & np.uint32(0xFF)
        b[:, off + 1] = h >> np.uint32(8)
    return b


# ---------------------------------------------------------------------------------------------
# Per-element decoding straight from the spec's tables (one element at a time)
# ---------------------------------------------------------------------------------------------

def spec_element(t, blk, e):
    """(code, scale value(s)) of element e of one block, per kquants.md's mapping tables."""
    blk = [int(v) for v in blk]
    if t in ("q4_k", "q5_k"):
        qs_off = 16 if t == "q4_k" else 48
        c, l = e // 64, e % 32
        byte = blk[qs_off + 32 * c + l]
        code = (byte & 0xF) if e % 64 < 32 else (byte >> 4)
        if t == "q5_k":
            code |= ((blk[16 + e % 32] >> (e // 32)) & 1) << 4
        q = blk[4:16]
        j = e // 32
        if j < 4:
            sc, m = q[j] & 63, q[j + 4] & 63
        else:
            sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4)
            m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4)
        return code, sc, m
    if t == "q6_k":
        h, r = e // 128, e % 128
        l = r % 32
        part = r // 32
        ql = blk[64 * h + l + (32 if part in (1, 3) else 0)]
        low = (ql & 0xF) if part < 2 else (ql >> 4)
        high = (blk[128 + 32 * h + l] >> (2 * part)) & 3
        sc = blk[192 + e // 16]
        return low | (high << 4), sc - 256 if sc >= 128 else sc
    v = blk[4 + e]
    return v - 256 if v >= 128 else v


class Layout(unittest.TestCase):
    def test_block_sizes(self):
        self.assertEqual(kq.BLOCK_BYTES, {"q4_k": 144, "q5_k": 176, "q6_k": 210, "q8_k": 292})

    def test_pack_unpack_round_trip(self):
        for t in kq.TYPES:
            b = random_blocks(t, 64, 7)
            self.assertTrue(np.array_equal(kq.pack(t, kq.unpack(t, b)), b), t)

    def test_scales_k4_all_pairs(self):
        sc = np.arange(64 * 8).reshape(-1, 8) % 64
        m = (sc * 5 + 3) % 64
        got_sc, got_m = kq.unpack_scales_k4(kq.pack_scales_k4(sc, m))
        self.assertTrue(np.array_equal(got_sc, sc) and np.array_equal(got_m, m))

    def test_element_mapping_matches_spec_tables(self):
        for t in kq.TYPES:
            b = random_blocks(t, 3, 8)
            f = kq.unpack(t, b)
            for i in range(3):
                for e in range(256):
                    got = spec_element(t, b[i], e)
                    if t in ("q4_k", "q5_k"):
                        want = (f["q"][i, e], f["sc"][i, e // 32], f["m"][i, e // 32])
                    elif t == "q6_k":
                        want = (f["q"][i, e], f["scales"][i, e // 16])
                    else:
                        want = f["qs"][i, e]
                    self.assertEqual(got, want if t == "q8_k" else tuple(int(v) for v in want),
                                     f"{t} block {i} element {e}")

    def test_field_offsets(self):
        b = np.zeros((1, 176), np.uint8)
        b[0, 0:4] = [0x34, 0x12, 0x78, 0x56]
        f = kq.unpack("q5_k", b)
        self.assertEqual((int(f["d"][0]), int(f["dmin"][0])), (0x1234, 0x5678))
        b6 = np.zeros((1, 210), np.uint8)
        b6[0, 208:210] = [0xCD, 0xAB]
        self.assertEqual(int(kq.unpack("q6_k", b6)["d"][0]), 0xABCD)
        b8 = np.zeros((1, 292), np.uint8)
        b8[0, 0:4] = [1, 2, 3, 0x84]
        b8[0, 260:262] = [0xFF, 0xFF]
        f8 = kq.unpack("q8_k", b8)
        self.assertEqual((int(f8["d"][0]), int(f8["bsums"][0, 0])), (0x84030201, -1))


# ---------------------------------------------------------------------------------------------
# Dequantization
# ---------------------------------------------------------------------------------------------

def exact_value(t, blk, e):
    """The exact real value of element e (Fraction), for finite d/dmin."""
    blk = np.asarray(blk)
    if t == "q8_k":
        d = Fraction(float(np.frombuffer(blk[0:4].tobytes(), "<f4")[0]))
        return d * spec_element(t, blk, e)
    if t == "q6_k":
        code, sc = spec_element(t, blk, e)
        d = Fraction(float(np.frombuffer(blk[208:210].tobytes(), "<f2")[0]))
        return d * sc * (code - 32)
    code, sc, m = spec_element(t, blk, e)
    d, dmin = (Fraction(float(v)) for v in np.frombuffer(blk[0:4].tobytes(), "<f2"))
    return d * sc * code - dmin * m


def zero_sign(t, blk, e):
    """Sign bit of an exactly zero result under IEEE rules: a product's sign is the XOR of its
    operands' signs (the integer factors are converted with +0 for 0); a - b with a == b is +0,
    except (-0) - (+0) = -0."""
    blk = np.asarray(blk)
    if t == "q8_k":
        d_neg = bool(blk[3] & 0x80)
        return d_neg ^ (spec_element(t, blk, e) < 0)
    if t == "q6_k":
        code, sc = spec_element(t, blk, e)
        return bool(blk[209] & 0x80) ^ (sc < 0) ^ (code - 32 < 0)
    code, sc, m = spec_element(t, blk, e)
    a_neg = bool(blk[1] & 0x80)                  # (D*sc)*code: sc, code >= 0
    b_neg = bool(blk[3] & 0x80)                  # Dmin*m
    a_zero = np.frombuffer(blk[0:2].tobytes(), "<f2")[0] * sc * code == 0
    return bool(a_zero and a_neg and not b_neg)


class Dequant(unittest.TestCase):
    def test_finite_blocks_are_the_exact_value_rounded_once(self):
        for t in kq.TYPES:
            b = finite_d_blocks(t, 4, 31)
            y = kq.dequantize_values(t, b)
            for i in range(4):
                for e in range(0, 256, 3):
                    exact = exact_value(t, b[i], e)
                    # The exact value needs at most 48 bits, so its float64 image is exact and
                    # the cast to float32 is the one rounding.
                    self.assertEqual(Fraction(float(exact)), exact)
                    want = np.float32(float(exact))
                    if exact == 0:
                        want = -want if zero_sign(t, b[i], e) else want
                    self.assertEqual(y[i * 256 + e].view(np.uint32), want.view(np.uint32),
                                     f"{t} block {i} element {e}")

    def test_specials_follow_ieee(self):
        for t in ("q4_k", "q5_k", "q6_k"):
            for v in fk.F16_SPECIALS:
                blk = fk.special_block(t, v, fk.DMIN_NORMAL, 0)
                y = kq.dequantize_values(t, blk).astype(np.float64)
                f = kq.unpack(t, blk)
                D = float(np.array([v], np.uint16).view(np.float16)[0])
                with np.errstate(all="ignore"):
                    if t == "q6_k":
                        ref = (D * np.repeat(f["scales"][0], 16)) * (f["q"][0] - 32)
                    else:
                        Dm = float(np.array([fk.DMIN_NORMAL], np.uint16).view(np.float16)[0])
                        ref = (D * np.repeat(f["sc"][0], 32)) * f["q"][0] - Dm * np.repeat(f["m"][0], 32)
                nan = np.isnan(ref)
                self.assertTrue(np.array_equal(np.isnan(y), nan), f"{t} d={v:#06x}")
                inf = np.isinf(ref)
                self.assertTrue(np.array_equal(np.isinf(y), inf) and
                                np.array_equal(np.sign(y[inf]), np.sign(ref[inf])), f"{t} d={v:#06x}")

    def test_nan_rule_is_x86(self):
        a = np.array([np.inf, np.nan, -np.nan, 1.0], f32)
        a[1] = np.array([0x7FC01234], np.uint32).view(f32)[0]
        b = np.array([0.0, 2.0, 3.0, np.nan], f32)
        b[3] = np.array([0xFF800001], np.uint32).view(f32)[0]        # signalling, negative
        got = kq._mul(a, b).view(np.uint32).tolist()
        self.assertEqual(got, [0xFFC00000, 0x7FC01234, int(a[2:3].view(np.uint32)[0]) | 0x400000,
                               0xFFC00001])
        both = kq._sub(np.array([a[1]], f32), np.array([b[3]], f32)).view(np.uint32)[0]
        self.assertEqual(int(both), 0x7FC01234)                       # the first operand wins
        self.assertEqual(int(kq._sub(np.array([np.inf], f32), np.array([np.inf], f32))
                             .view(np.uint32)[0]), 0xFFC00000)

    def test_validation(self):
        for t in kq.TYPES:
            bb = kq.BLOCK_BYTES[t]
            for cols, name in ((4544, "kq_cols_not_multiple"), (896, "kq_cols_not_multiple"),
                               (0, "kq_cols_not_multiple")):
                with self.assertRaises(kq.KQuantError) as cm:
                    kq.dequantize(t, np.zeros(18 * bb, np.uint8), 1, cols)
                self.assertEqual(cm.exception.name, name)
            with self.assertRaises(kq.KQuantError) as cm:
                kq.dequantize(t, np.zeros(3 * bb - 1, np.uint8), 1, 768)
            self.assertEqual(cm.exception.name, "kq_size_mismatch")
            with self.assertRaises(kq.KQuantError) as cm:
                kq.dequantize(t, np.zeros(0, np.uint8), 0, 256)
            self.assertEqual(cm.exception.name, "shape_invalid")
            w = np.zeros((1, bb), np.uint8)
            for batch in (17, 0):
                with self.assertRaises(kq.KQuantError) as cm:
                    kq.gemv_reference(t, w, 1, 256, np.zeros((batch, 256), np.uint16))
                self.assertEqual(cm.exception.name, "kq_batch_out_of_range")


# ---------------------------------------------------------------------------------------------
# Scalar transcription of the quantizers (research section 2), one float32 operation at a time
# ---------------------------------------------------------------------------------------------

def ni(v):
    s = np.array([f32(v) + f32(12582912.0)], dtype=f32)
    return (int(s.view(np.int32)[0]) & 0x7FFFFF) - 0x400000


def h_bits(v):
    """float32 -> fp16 bits through numpy's float16 cast (RNE), an implementation other than
    qgold_gen.fp16."""
    with np.errstate(over="ignore"):
        return int(np.array([v], f32).astype(np.float16).view(np.uint16)[0])


def h_val(bits):
    return f32(np.array([bits], np.uint16).view(np.float16).astype(f32)[0])


def s_qkx2(x, w, nmax, rmin, rdelta, nstep):
    n = len(x)
    mn, mx = x[0], x[0]
    sum_w = w[0]
    sum_x = sum_w * x[0]
    for i in range(1, n):
        if x[i] < mn:
            mn = x[i]
        if x[i] > mx:
            mx = x[i]
        sum_w = sum_w + w[i]
        sum_x = sum_x + w[i] * x[i]
    if mn > 0:
        mn = f32(0)
    if mx == mn:
        return f32(0), -mn, [0] * n
    iscale = f32(nmax) / (mx - mn)
    scale = f32(1) / iscale
    L, best = [], f32(0)
    for i in range(n):
        li = max(0, min(nmax, ni(iscale * (x[i] - mn))))
        L.append(li)
        diff = scale * f32(li) + mn - x[i]
        best = best + w[i] * (diff * diff)
    for step in range(nstep + 1):
        iscale = (f32(rmin) + f32(rdelta) * f32(step) + f32(nmax)) / (mx - mn)
        sl, sl2, sxl, La = f32(0), f32(0), f32(0), []
        for i in range(n):
            li = max(0, min(nmax, ni(iscale * (x[i] - mn))))
            La.append(li)
            sl = sl + w[i] * f32(li)
            sl2 = sl2 + w[i] * f32(li) * f32(li)
            sxl = sxl + w[i] * f32(li) * x[i]
        D = sum_w * sl2 - sl * sl
        if D > 0:
            ts = (sum_w * sxl - sum_x * sl) / D
            tm = (sl2 * sum_x - sl * sxl) / D
            if tm > 0:
                tm = f32(0)
                ts = sxl / sl2
            cur = f32(0)
            for i in range(n):
                diff = ts * f32(La[i]) + tm - x[i]
                cur = cur + w[i] * (diff * diff)
            if cur < best:
                L, best, scale, mn = La, cur, ts, tm
    return scale, -mn, L


def s_scale_min(q, j):
    if j < 4:
        return q[j] & 63, q[j + 4] & 63
    return (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4)


def s_quant_q45(x, t):
    nmax, rmin, nstep = (15, -1.0, 20) if t == "q4_k" else (31, -0.5, 15)
    scales, mins, L = [], [], [0] * 256
    max_scale, max_min = f32(0), f32(0)
    for j in range(8):
        xs = [x[32 * j + l] for l in range(32)]
        sum_x2 = f32(0)
        for v in xs:
            sum_x2 = sum_x2 + v * v
        av_x = np.sqrt(sum_x2 / f32(32))
        w = [av_x + abs(v) for v in xs]
        s, m, Lj = s_qkx2(xs, w, nmax, rmin, 0.1, nstep)
        scales.append(s)
        mins.append(m)
        L[32 * j: 32 * j + 32] = Lj
        if s > max_scale:
            max_scale = s
        if m > max_min:
            max_min = m
    inv_scale = f32(63) / max_scale if max_scale > 0 else f32(0)
    inv_min = f32(63) / max_min if max_min > 0 else f32(0)
    q = [0] * 12
    for j in range(8):
        ls = min(63, ni(inv_scale * scales[j]) & 0xFF)
        lm = min(63, ni(inv_min * mins[j]) & 0xFF)
        if j < 4:
            q[j], q[j + 4] = ls, lm
        else:
            q[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4)
            q[j - 4] |= (ls >> 4) << 6
            q[j] |= (lm >> 4) << 6
    d, dmin = h_bits(max_scale / f32(63)), h_bits(max_min / f32(63))
    for j in range(8):
        sc, m = s_scale_min(q, j)
        dd = h_val(d) * f32(sc)
        if dd == 0:
            continue
        dm = h_val(dmin) * f32(m)
        for ii in range(32):
            L[32 * j + ii] = max(0, min(nmax, ni((x[32 * j + ii] + dm) / dd)))
    out = [d & 0xFF, d >> 8, dmin & 0xFF, dmin >> 8] + q
    if t == "q4_k":
        for c in range(4):
            out += [L[64 * c + l] | (L[64 * c + l + 32] << 4) for l in range(32)]
    else:
        qh, ql = [0] * 32, []
        for c in range(4):
            for l in range(32):
                a, b = L[64 * c + l], L[64 * c + l + 32]
                if a > 15:
                    a -= 16
                    qh[l] |= 1 << (2 * c)
                if b > 15:
                    b -= 16
                    qh[l] |= 1 << (2 * c + 1)
                ql.append(a | (b << 4))
        out += qh + ql
    return bytes(out)


def s_qx(x, nmax):
    n = len(x)
    mx, amax = f32(0), f32(0)
    for v in x:
        if abs(v) > amax:
            amax, mx = abs(v), v
    if amax < f32(1e-15):
        return f32(0), [0] * n

    def sums(iscale):
        ls, slx, sl2 = [], f32(0), f32(0)
        for v in x:
            li = max(-nmax, min(nmax - 1, ni(iscale * v)))
            ls.append(li)
            w = v * v
            slx = slx + w * v * f32(li)
            sl2 = sl2 + w * f32(li) * f32(li)
        return ls, slx, sl2

    ls, slx, sl2 = sums(f32(-nmax) / mx)
    L = [li + nmax for li in ls]
    scale = slx / sl2 if sl2 != 0 else f32(0)
    best = scale * slx
    for step in range(-9, 10):
        if step == 0:
            continue
        ls, slx, sl2 = sums(-(f32(nmax) + f32(0.1) * f32(step)) / mx)
        if sl2 > 0 and slx * slx > best * sl2:
            L = [li + nmax for li in ls]
            scale = slx / sl2
            best = scale * slx
    return scale, L


def s_quant_q6(x):
    scales, L = [], []
    max_scale, max_abs = f32(0), f32(0)
    for g in range(16):
        s, Lg = s_qx([x[16 * g + l] for l in range(16)], 32)
        scales.append(s)
        L += Lg
        if abs(s) > max_abs:
            max_abs, max_scale = abs(s), s
    if max_abs < f32(1e-15):
        return bytes(210)
    iscale = f32(-128) / max_scale
    d = h_bits(f32(1) / iscale)
    sq = []
    for g in range(16):
        v = min(127, ni(iscale * scales[g])) & 0xFF
        sq.append(v - 256 if v >= 128 else v)
    for g in range(16):
        dd = h_val(d) * f32(sq[g])
        if dd == 0:
            continue
        for ii in range(16):
            L[16 * g + ii] = max(-32, min(31, ni(x[16 * g + ii] / dd))) + 32
    ql, qh = [], []
    for h in range(2):
        e = L[128 * h: 128 * h + 128]
        ql += [(e[l] & 0xF) | ((e[l + 64] & 0xF) << 4) for l in range(32)]
        ql += [(e[l + 32] & 0xF) | ((e[l + 96] & 0xF) << 4) for l in range(32)]
        qh += [(e[l] >> 4) | ((e[l + 32] >> 4) << 2) | ((e[l + 64] >> 4) << 4) | ((e[l + 96] >> 4) << 6)
               for l in range(32)]
    return bytes(ql + qh + [v & 0xFF for v in sq] + [d & 0xFF, d >> 8])


def s_quant_q8(x):
    mx, amax = f32(0), f32(0)
    for v in x:
        if abs(v) > amax:
            amax, mx = abs(v), v
    if amax == 0:
        return bytes(292)
    iscale = f32(-127) / mx
    qs = [((min(127, ni(iscale * v)) + 128) & 0xFF) - 128 for v in x]
    bsums = [sum(qs[16 * g: 16 * g + 16]) for g in range(16)]
    d = int(np.array([f32(1) / iscale], f32).view(np.uint32)[0])
    out = [(d >> (8 * k)) & 0xFF for k in range(4)] + [v & 0xFF for v in qs]
    for s in bsums:
        out += [s & 0xFF, (s >> 8) & 0xFF]
    return bytes(out)


SCALAR = {"q4_k": lambda x: s_quant_q45(x, "q4_k"), "q5_k": lambda x: s_quant_q45(x, "q5_k"),
          "q6_k": s_quant_q6, "q8_k": s_quant_q8}


HUGE_EXPO = {"q4_k": 23, "q5_k": 23, "q6_k": 29, "q8_k": 100}


def scalar_test_inputs(t):
    """Super-blocks (float32 [n, 256]) covering the quantizers' branches, including fp16
    overflow of d or dmin (for Q4_K/Q5_K at 2^23 only dmin overflows; larger inputs make the
    reference compute nearest_int(NaN), which the generator refuses)."""
    s = Stream(4242)
    u = s.uniform_array(-1, 1, 3 * 256).reshape(3, 256)
    rows = [u[0], u[1] / (fk.HEAVY_C - np.abs(u[1])), u[2] * f32(2.0**-30),
            u[0] * f32(2.0**20), u[1] * f32(2.0**HUGE_EXPO[t]), fk.stale_input()[0],
            fk.stale_input()[1],
            fk.ties_input().reshape(3, 256)[2], np.full(256, f32(-2.5)), np.zeros(256, f32),
            s.uniform_array(0.5, 2.0, 256), fk.edge_activations().reshape(3, 256)[0]]
    return np.stack(rows).astype(f32)


class QuantizeScalar(unittest.TestCase):
    def test_vectorized_equals_scalar_transcription(self):
        for t in kq.TYPES:
            x = scalar_test_inputs(t)
            with np.errstate(all="ignore"):
                vec = kq.quantize_blocks(t, x)
                for i in range(x.shape[0]):
                    want = SCALAR[t]([x[i, e] for e in range(256)])
                    self.assertEqual(vec[i].tobytes(), want, f"{t} super-block {i}")

    def test_blocks_are_independent(self):
        for t in kq.TYPES:
            x = scalar_test_inputs(t)
            whole = kq.quantize_blocks(t, x)
            for i in (0, 5, 9):
                self.assertTrue(np.array_equal(kq.quantize_blocks(t, x[i]), whole[i:i + 1]), t)

    def test_nearest_int(self):
        v = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.4999998, 4194303.0, -4194303.0], f32)
        self.assertEqual(kq.nearest_int(v).tolist(), [0, 2, 2, 0, -2, -2, 3, 4194303, -4194303])
        r = Stream(5).uniform_array(-4194303.0, 4194303.0, 100000)
        self.assertTrue(np.array_equal(kq.nearest_int(r), np.rint(r.astype(np.float64))))
        # outside the range: the same bit formula (f + 1.5*2^23 = 2^24 has low bits 0)
        self.assertEqual(kq.nearest_int(np.array([4194304.0, np.inf], f32)).tolist(),
                         [-4194304, -4194304])
        with self.assertRaises(kq.QuantizerDomainError):
            kq.nearest_int(np.array([np.nan], f32))


# ---------------------------------------------------------------------------------------------
# Quantize -> dequantize: within half a step of the stored scales
# ---------------------------------------------------------------------------------------------

def check_within_step(test, t, x, blocks):
    """Each element is within half of its sub-block's step of its input (plus the three float32
    roundings the requantization and dequantization do), or, outside the sub-block's
    representable range, decoded to the nearest end of that range."""
    y = kq.dequantize_values(t, blocks).astype(np.float64).reshape(-1, 256)
    x = x.astype(np.float64).reshape(-1, 256)
    f = kq.unpack(t, blocks)
    u = 2.0**-22
    if t == "q8_k":
        d = np.abs(kq.q8k_values(blocks)[0].astype(np.float64))[:, None]
        test.assertTrue(np.all(np.abs(y - x) <= d / 2 * (1 + u) + u * np.abs(x)), t)
        return
    if t == "q6_k":
        D = kq._f16_values(f["d"]).astype(np.float64)[:, None]
        step = np.repeat(D * f["scales"], 16, axis=1)              # signed step per element
        lo = np.minimum(step * -32, step * 31)
        hi = np.maximum(step * -32, step * 31)
        extra = np.zeros_like(step)
    else:
        nmax = 15 if t == "q4_k" else 31
        D = kq._f16_values(f["d"]).astype(np.float64)[:, None]
        Dm = kq._f16_values(f["dmin"]).astype(np.float64)[:, None]
        step = np.repeat(D * f["sc"], 32, axis=1)
        extra = np.repeat(Dm * f["m"], 32, axis=1)
        lo, hi = -extra, step * nmax - extra
    # Sub-blocks whose decoded step or min overflowed fp16 (the huge inputs) decode to inf/NaN;
    # no bound applies there.
    live = (step != 0) & np.isfinite(step) & np.isfinite(extra)
    a = np.abs(step)
    slack = u * (np.abs(x) + extra + 64 * a)
    inside = (x >= lo - a / 2) & (x <= hi + a / 2)
    ok_in = np.abs(y - x) <= a / 2 + slack
    with np.errstate(invalid="ignore"):
        ok_out = np.where(x < lo, np.abs(y - lo) <= slack, np.abs(y - hi) <= slack)
        bad = live & ~np.where(inside, ok_in, ok_out)
    test.assertFalse(bad.any(), f"{t}: {np.count_nonzero(bad)} elements off by more than half a "
                     f"step, first at {np.argwhere(bad)[:1].tolist()}")


class QuantizeBounds(unittest.TestCase):
    def test_within_half_a_step(self):
        s = Stream(777)
        u = s.uniform_array(-1, 1, 64 * 256)
        xs = [u, u / (fk.HEAVY_C - np.abs(u)), s.uniform_array(0.5, 2.0, 16 * 256),
              fk.stale_input().reshape(-1)]
        for t in kq.TYPES:
            for x in xs + [scalar_test_inputs(t).reshape(-1)]:
                check_within_step(self, t, x, kq.quantize_blocks(t, x))

    def test_q8k_properties(self):
        x = scalar_test_inputs("q8_k")
        b = kq.quantize_blocks("q8_k", x)
        f = kq.unpack("q8_k", b)
        finite = np.abs(x).max(axis=1) < 1e30
        self.assertTrue(np.all(np.abs(f["qs"][finite]) <= 127))
        self.assertTrue(np.array_equal(f["bsums"], f["qs"].reshape(-1, 16, 16).sum(axis=2)))
        d = kq.q8k_values(b)[0]
        for i in range(x.shape[0]):
            j = int(np.argmax(np.abs(x[i])))                        # the first of the largest
            if x[i, j] == 0:
                self.assertEqual(b[i].tobytes(), bytes(292))
                continue
            self.assertEqual(np.sign(d[i]), -np.sign(x[i, j]))
            self.assertEqual(f["qs"][i, j], -127)
        # +a before -a: d < 0; -a before +a: d > 0
        ties = kq.quantize_blocks("q8_k", fk.ties_input())
        self.assertEqual(np.sign(kq.q8k_values(ties)[0]).tolist(), [-1, 1, -1])

    def test_q6k_dominant_scale_is_minus_128(self):
        x = Stream(778).uniform_array(-1, 1, 32 * 256)
        f = kq.unpack("q6_k", kq.quantize_blocks("q6_k", x))
        self.assertTrue(np.all((f["scales"] == -128).any(axis=1)))

    def test_all_zero_blocks(self):
        z = np.zeros(256, f32)
        for t in kq.TYPES:
            self.assertEqual(kq.quantize(t, z, 1, 256), bytes(kq.BLOCK_BYTES[t]), t)


# ---------------------------------------------------------------------------------------------
# Dot with Q8_K: S, M identities and the exact references
# ---------------------------------------------------------------------------------------------

class Dot(unittest.TestCase):
    def setUp(self):
        s = Stream(901)
        self.acts = s.uniform_array(-1, 1, 768)
        self.q8k = np.frombuffer(kq.quantize("q8_k", self.acts, 1, 768), np.uint8)
        self.weights = {t: np.concatenate([finite_d_blocks(t, 2, 902).reshape(-1),
                                           fk.edge_weight_row(t)[2]]) for t in kq.WEIGHT_TYPES}

    def test_integer_identity_exact(self):
        """sum_k w_k x_k over exactly decoded weights equals sum_i (D dy S - Dm dy M) exactly."""
        dy = [Fraction(float(v)) for v in kq.q8k_values(self.q8k)[0]]
        qs = kq.unpack("q8_k", self.q8k)["qs"].reshape(-1)
        for t, w in self.weights.items():
            S, M = kq.dot_integers(t, w, self.q8k, 768)
            b = w.reshape(3, -1)
            lhs = sum(exact_value(t, b[k // 256], k % 256) * dy[k // 256] * int(qs[k])
                      for k in range(768))
            rhs = Fraction(0)
            for i in range(3):
                if t == "q6_k":
                    D = Fraction(float(np.frombuffer(b[i, 208:210].tobytes(), "<f2")[0]))
                    Dm = Fraction(0)
                else:
                    D, Dm = (Fraction(float(v)) for v in np.frombuffer(b[i, 0:4].tobytes(), "<f2"))
                rhs += D * dy[i] * int(S[i]) - Dm * dy[i] * int(M[i])
            self.assertEqual(lhs, rhs, t)
            if t == "q6_k":
                self.assertFalse(M.any())

    def test_q6k_bsums_form(self):
        """S = sum_g sc_g (sum code*q8) - 32 sum_g sc_g bsums[g] (the unsigned-code form)."""
        w = self.weights["q6_k"]
        S, _ = kq.dot_integers("q6_k", w, self.q8k, 768)
        f = kq.unpack("q6_k", w)
        a = kq.unpack("q8_k", self.q8k)
        alt = ((f["scales"] * (f["q"] * a["qs"]).reshape(-1, 16, 16).sum(axis=2)).sum(axis=1)
               - 32 * (f["scales"] * a["bsums"]).sum(axis=1))
        self.assertTrue(np.array_equal(S, alt))

    def test_extreme_integers_fit_int32(self):
        for t in kq.WEIGHT_TYPES:
            w = np.stack([fk.edge_weight_row(t)[2]] * 2)
            a = np.frombuffer(kq.quantize("q8_k", np.full(512, f32(-1.0)), 1, 512), np.uint8)
            S, M = kq.dot_integers(t, w, a, 512)
            self.assertTrue(np.all(np.abs(S.astype(np.int64)) < 2**31), t)
            self.assertTrue(np.all(kq.unpack("q8_k", a)["qs"] == -127))
            nmax = {"q4_k": 15, "q5_k": 31}.get(t)
            if nmax:
                self.assertEqual(int(S[0]), 8 * 63 * 32 * nmax * -127)
                self.assertEqual(int(M[0]), 8 * 63 * 32 * -127)
            else:
                self.assertEqual(int(S[0]), 16 * -128 * 16 * -32 * -127)

    def test_reference_is_exact_sum_rounded(self):
        d, qs = kq.q8k_values(self.q8k)
        for t, w in self.weights.items():
            ystar, sabs = kq.dot_reference(t, w, self.q8k, 768)
            wv = kq.dequantize(t, w, 1, 768).view(f32).reshape(-1)
            terms = [Fraction(float(wv[k])) * Fraction(float(d[k // 256])) * int(qs.reshape(-1)[k])
                     for k in range(768)]
            self.assertEqual(ystar, float(sum(terms)), t)          # float(Fraction) rounds once
            self.assertEqual(sabs, float(sum(abs(v) for v in terms)), t)


class Gemv(unittest.TestCase):
    def test_exact_and_ieee(self):
        t = "q5_k"
        w = fk.quantized_rows(t, Stream(950).uniform_array(-1, 1, 3 * 256).reshape(3, 256))
        x = fk.special_x(8, 256)
        ys, sa = kq.gemv_reference(t, w, 3, 256, x)
        W = kq.dequantize(t, w, 3, 256).view(f32).astype(np.float64)
        X = kq._f16_values(x).astype(np.float64)
        for b in range(8):
            for m in range(3):
                with np.errstate(invalid="ignore"):
                    p = W[m] * X[b]
                if np.all(np.isfinite(p)):
                    exact = sum(Fraction(float(W[m, k])) * Fraction(float(X[b, k]))
                                for k in range(256))
                    self.assertEqual(ys[b, m], float(exact))
                    self.assertEqual(sa[b, m], float(sum(abs(Fraction(float(v))) for v in p)))
                else:
                    with np.errstate(invalid="ignore"):
                        naive = float(np.sum(p))                   # IEEE: NaN/inf regardless of order
                    self.assertEqual(np.isnan(ys[b, m]), np.isnan(naive))
                    if not np.isnan(naive):
                        self.assertEqual(ys[b, m], naive)

    def test_ieee_exact_sum(self):
        self.assertTrue(np.isnan(kq.ieee_exact_sum([np.inf, -np.inf, 1.0])[0]))
        self.assertEqual(kq.ieee_exact_sum([np.inf, 5.0]), (np.inf, np.inf))
        self.assertEqual(kq.ieee_exact_sum([-np.inf, 5.0])[0], -np.inf)
        self.assertEqual(kq.ieee_exact_sum([1e16, 1.0, -1e16]), (1.0, 2e16))


# ---------------------------------------------------------------------------------------------
# The K-quant fixtures in golden/: schema, recomputation, edges, size budget
# ---------------------------------------------------------------------------------------------

SCHEMA = {
    "dequant": {"blocks": ("uint8", None), "expected_f32": ("uint32", "float32"),
                "expected_f16": ("uint16", "float16")},
    "quantize": {"x": ("uint32", "float32"), "expected_blocks": ("uint8", None)},
    "dot_q8k": {"blocks": ("uint8", None), "q8k": ("uint8", None), "expected_S": ("int32", None),
                "expected_M": ("int32", None), "ystar": ("float64", None),
                "sum_abs": ("float64", None)},
    "gemv": {"blocks": ("uint8", None), "x": ("uint16", "float16"), "ystar": ("float64", None),
             "sum_abs": ("float64", None)},
}
INPUTS = {"dequant": {"blocks"}, "gemv": {"blocks", "x"}}
FAMILY_FILES = {"dequant": "dequant", "quantize": "quantize", "dot_q8k": "dot", "gemv": "gemv"}


def kquant_files():
    for t in kq.TYPES:
        d = os.path.join(REPO_GOLDEN, t)
        if os.path.isdir(d):
            for name in sorted(os.listdir(d)):
                if name.endswith(".h5"):
                    yield t, name[:-3], os.path.join(d, name)


@unittest.skipUnless(os.path.isdir(os.path.join(REPO_GOLDEN, "q4_k")),
                     "the repository has no K-quant fixtures yet")
class Fixtures(unittest.TestCase):
    def test_files(self):
        have = {(t, fam) for t, fam, _ in kquant_files()}
        want = {(t, fam) for t, fam, _ in fk.families()}
        self.assertEqual(have, want)

    def test_schema_and_recomputation(self):
        for t, fam, path in kquant_files():
            bb = kq.BLOCK_BYTES[t]
            with h5py.File(path, "r") as f:
                self.assertEqual(f.attrs["format"], t)
                for name, g in f.items():
                    a = g.attrs
                    where = f"{t}/{fam}.h5 {name}"
                    self.assertEqual(a["format_version"], 1, where)
                    self.assertEqual(a["format"], t, where)
                    p = a["path"]
                    if a["expect"] == "invalid":
                        self.assertEqual(fam, "invalid")
                        self.assertEqual(set(g), INPUTS[p], where)
                        with self.assertRaises(kq.KQuantError) as cm:
                            if p == "dequant":
                                kq.dequantize(t, g["blocks"][()], int(a["rows"]), int(a["cols"]))
                            else:
                                kq.gemv_reference(t, g["blocks"][()], int(a["rows"]),
                                                  int(a["cols"]), g["x"][()])
                        self.assertEqual(cm.exception.name, a["error"], where)
                        continue
                    self.assertEqual(FAMILY_FILES[p], fam, where)
                    self.assertEqual(set(g), set(SCHEMA[p]), where)
                    for ds, (dtype, tag) in SCHEMA[p].items():
                        self.assertEqual(g[ds].dtype, np.dtype(dtype), f"{where}/{ds}")
                        self.assertEqual(g[ds].attrs.get("dtype"), tag, f"{where}/{ds}")
                    for key in ("rows", "cols", "batch"):
                        if key in a:
                            self.assertEqual(g.attrs.get_id(key).dtype, np.int64, where)
                    cols = int(a["cols"])
                    nb = cols // 256
                    if p == "dot_q8k":
                        blocks = g["blocks"][()]
                        self.assertEqual(blocks.shape, (nb * bb,), where)
                        self.assertEqual(g["q8k"].shape, (nb * 292,), where)
                        S, M = kq.dot_integers(t, blocks, g["q8k"][()], cols)
                        self.assertTrue(np.array_equal(S, g["expected_S"][()]), where)
                        self.assertTrue(np.array_equal(M, g["expected_M"][()]), where)
                        y, s = kq.dot_reference(t, blocks, g["q8k"][()], cols)
                        self.assertEqual((y, s), (g["ystar"][0], g["sum_abs"][0]), where)
                        continue
                    rows = int(a["rows"])
                    if p == "dequant":
                        self.assertEqual(g["blocks"].shape, (rows, nb * bb), where)
                        y = kq.dequantize(t, g["blocks"][()], rows, cols)
                        self.assertTrue(np.array_equal(y, g["expected_f32"][()]), where)
                        self.assertTrue(np.array_equal(
                            fp16.f32_to_f16(y.reshape(-1)).reshape(rows, cols),
                            g["expected_f16"][()]), where)
                        self.assertEqual(a.get("nan_sign") == "any",
                                         bool(fp16.f32_is_nan(y).any()), where)
                    elif p == "quantize":
                        x = g["x"][()]
                        self.assertEqual(x.shape, (rows, cols), where)
                        got = kq.quantize(t, x.view(f32), rows, cols)
                        self.assertEqual(got, g["expected_blocks"][()].tobytes(), where)
                        self.assertEqual(g["expected_blocks"].shape, (rows, nb * bb), where)
                    else:
                        batch = int(a["batch"])
                        self.assertEqual(g["x"].shape, (batch, cols), where)
                        ys, sa = kq.gemv_reference(t, g["blocks"][()], rows, cols, g["x"][()])
                        self.assertEqual(g["ystar"].shape, (batch, rows), where)
                        np.testing.assert_array_equal(ys, g["ystar"][()], where)
                        np.testing.assert_array_equal(sa, g["sum_abs"][()], where)

    def test_edges_present(self):
        def cases(t, fam):
            with h5py.File(os.path.join(REPO_GOLDEN, t, fam + ".h5"), "r") as f:
                return {n: {k: g[k][()] for k in g} | {"@": dict(g.attrs)} for n, g in f.items()}

        shapes, batches = set(), set()
        for t in kq.TYPES:
            for fam in ("dequant", "gemv"):
                for c in cases(t, fam).values():
                    shapes.add((int(c["@"]["rows"]), int(c["@"]["cols"])))
                    if fam == "gemv":
                        batches.add(int(c["@"]["batch"]))
            deq = cases(t, "dequant")
            allb = np.concatenate([c["blocks"].reshape(-1, kq.BLOCK_BYTES[t]) for c in deq.values()])
            f = kq.unpack(t, allb)
            if t == "q8_k":
                self.assertEqual(set(f["qs"].reshape(-1).tolist()), set(range(-128, 128)))
                ds = set(f["d"].tolist())
            else:
                self.assertEqual(set(f["q"].reshape(-1).tolist()), set(range(fk._nmax(t) + 1)))
                ds = set(f["d"].tolist())
                if t != "q6_k":
                    ds |= set(f["dmin"].tolist())
                    self.assertEqual(set(f["sc"].reshape(-1).tolist()), set(range(64)))
                else:
                    self.assertIn(-128, f["scales"])
                    self.assertEqual(set(f["scales"].reshape(-1).tolist()), set(range(-128, 128)))
                self.assertTrue({0x0000, 0x0001, 0x03FF, 0x7BFF, 0x7C00, 0x7E00} <= ds, t)
                self.assertGreater(fk.stale_subblocks(t, allb), 0)
            qz = cases(t, "quantize")
            qb = np.concatenate([c["expected_blocks"].reshape(-1, kq.BLOCK_BYTES[t])
                                 for c in qz.values()])
            if t == "q8_k":
                s = np.sign(kq.q8k_values(qb)[0])
                self.assertTrue((s < 0).any() and (s > 0).any() and (s == 0).any())
            else:
                self.assertGreater(fk.stale_subblocks(t, qb), 0, t)
            seeds = {int(c["@"]["seed"]) for c in qz.values() if c["@"]["distribution"] != "handmade"}
            self.assertGreaterEqual(len(seeds), 6, t)
        for rows in (1, 2, 3, 7, 8, 9, 17):
            self.assertTrue(any(r == rows for r, _ in shapes), rows)
        for cols in (256, 768, 14336):
            self.assertTrue(any(c == cols for _, c in shapes), cols)
        self.assertTrue(all(r <= 2 for r, c in shapes if c == 14336))   # the size budget
        self.assertTrue(set(range(1, 10)) | {16} <= batches)

    def test_size_budget(self):
        sizes = {}
        for t, fam, path in kquant_files():
            sizes[f"{t}/{fam}"] = os.path.getsize(path)
        self.assertLessEqual(sum(sizes.values()), 5 * MIB, sizes)
        total = 0
        for dirpath, _, names in os.walk(REPO_GOLDEN):
            total += sum(os.path.getsize(os.path.join(dirpath, n)) for n in names)
        self.assertLess(total, 16 * MIB)


if __name__ == "__main__":
    unittest.main()
