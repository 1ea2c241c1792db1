"""fp16 / bf16 converters: exhaustive and sampled checks against independent references."""

import unittest

import numpy as np

from qgold_gen import fam_fp16, fp16
from qgold_gen.rng import Stream

ALL16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)


def nearest_by_table(x_bits: np.ndarray, table: np.ndarray, top: float, inf_bits: int,
                     sign_shift: int) -> np.ndarray:
    """Reference rounding written differently from qgold_gen.fp16: look |x| up in the sorted table
    of all non-negative finite values of the 16-bit format (as float64), then compare |x| with the
    exact midpoint of its two neighbours. `top` stands for the value just past the largest finite
    one (2^16 for fp16, 2^128 for bf16), whose encoding is infinity. Finite non-NaN inputs only."""
    mag = np.abs(fp16.f32_values(x_bits).astype(np.float64))
    vals = np.append(table, top)
    i = np.searchsorted(vals, mag, side="right") - 1  # vals[i] <= mag < vals[i + 1]
    i = np.minimum(i, len(table) - 1)
    lo, hi = vals[i], vals[i + 1]
    mid = (lo + hi) / 2  # exact: one more bit than the 16-bit format holds
    pick_hi = (mag > mid) | ((mag == mid) & (i % 2 == 1))  # table index = encoding, even = even
    code = np.where(pick_hi, i + 1, i)
    code = np.where(mag >= top, inf_bits, np.minimum(code, inf_bits))
    sign = (x_bits >> 31).astype(np.int64) << sign_shift
    return (code | sign).astype(np.uint16)


F16_TABLE = np.arange(0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
BF16_TABLE = fp16.f32_values(np.arange(0x7F80, dtype=np.uint32) << np.uint32(16)).astype(np.float64)


def sample_f32() -> np.ndarray:
    """Every exponent with a spread of fractions, the fixture inputs, and random bit patterns."""
    s = Stream(424242)
    parts = [s.bits32_array(1 << 20)]
    for e in range(256):
        frac = s.bits32_array(512) >> np.uint32(9)
        low = np.arange(64, dtype=np.uint32)  # smallest fractions ...
        parts.append((np.uint32(e << 23) | np.concatenate([frac, low, 0x7FFFFF - low])))
    parts.append(fam_fp16.f16_boundary_inputs()[0])
    parts.append(fam_fp16.bf16_boundary_inputs()[0])
    x = np.concatenate(parts).astype(np.uint32)
    return np.concatenate([x, x ^ np.uint32(0x80000000)])


class ToF32(unittest.TestCase):
    def test_f16_to_f32_matches_numpy(self):
        y = fp16.f16_to_f32(ALL16)
        nan = fp16.f16_is_nan(ALL16)
        ref = ALL16.view(np.float16).astype(np.float32).view(np.uint32)
        self.assertTrue(np.array_equal(y[~nan], ref[~nan]))
        self.assertTrue(np.all(fp16.f32_is_nan(y[nan])))
        self.assertTrue(np.array_equal(y >> 31, (ALL16 >> 15).astype(np.uint32)))

    def test_f16_round_trip_all(self):
        back = fp16.f32_to_f16(fp16.f16_to_f32(ALL16))
        nan = fp16.f16_is_nan(ALL16)
        self.assertTrue(np.array_equal(back[~nan], ALL16[~nan]))
        # NaNs come back as NaNs of the same sign, quieted.
        self.assertTrue(np.array_equal(back[nan], ALL16[nan] | np.uint16(0x0200)))

    def test_bf16_round_trip_all(self):
        y = fp16.bf16_to_f32(ALL16)
        self.assertTrue(np.array_equal(y >> np.uint32(16), ALL16.astype(np.uint32)))
        back = fp16.f32_to_bf16(y)
        nan = fp16.bf16_is_nan(ALL16)
        self.assertTrue(np.array_equal(back[~nan], ALL16[~nan]))
        self.assertTrue(np.array_equal(back[nan], ALL16[nan] | np.uint16(0x0040)))

    def test_f16_subnormals_exact(self):
        for k in range(1, 1024):
            self.assertEqual(fp16.f32_values(fp16.f16_to_f32([k]))[0], k * 2.0**-24)


class FromF32(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.x = sample_f32()
        cls.finite = (cls.x & np.uint32(0x7F800000)) != np.uint32(0x7F800000)

    def test_f32_to_f16_matches_numpy(self):
        keep = ~fp16.f32_is_nan(self.x)
        with np.errstate(over="ignore"):
            ref = fp16.f32_values(self.x[keep]).astype(np.float16).view(np.uint16)
        got = fp16.f32_to_f16(self.x[keep])
        bad = np.flatnonzero(ref != got)
        self.assertEqual(bad.size, 0, bad.size and f"first at x=0x{int(self.x[keep][bad[0]]):08x}")

    def test_f32_to_f16_matches_table_reference(self):
        x = self.x[self.finite]
        self.assertTrue(np.array_equal(fp16.f32_to_f16(x),
                                       nearest_by_table(x, F16_TABLE, 2.0**16, 0x7C00, 15)))

    def test_f32_to_bf16_matches_table_reference(self):
        x = self.x[self.finite]
        self.assertTrue(np.array_equal(fp16.f32_to_bf16(x),
                                       nearest_by_table(x, BF16_TABLE, 2.0**128, 0x7F80, 15)))

    def test_nan_and_inf(self):
        nan = fp16.f32_is_nan(self.x)
        for conv, is_nan in ((fp16.f32_to_f16, fp16.f16_is_nan),
                             (fp16.f32_to_bf16, fp16.bf16_is_nan)):
            y = conv(self.x)
            self.assertTrue(np.array_equal(is_nan(y), nan))
            self.assertTrue(np.array_equal(y >> 15, (self.x >> 31).astype(np.uint16)))
        self.assertEqual(fp16.f32_to_f16([0x7F800000, 0xFF800000]).tolist(), [0x7C00, 0xFC00])
        self.assertEqual(fp16.f32_to_bf16([0x7F800000, 0xFF800000]).tolist(), [0x7F80, 0xFF80])

    def test_chosen_nan_patterns(self):
        x = [0x7FC00000, 0x7F800001, 0x7F802000, 0xFFBFFFFF, 0x7F80FFFF, 0xFF808000]
        self.assertEqual(fp16.f32_to_f16(x).tolist(),
                         [0x7E00, 0x7E00, 0x7E01, 0xFFFF, 0x7E07, 0xFE04])
        self.assertEqual(fp16.f32_to_bf16(x).tolist(),
                         [0x7FC0, 0x7FC0, 0x7FC0, 0xFFFF, 0x7FC0, 0xFFC0])

    def test_hand_values(self):
        f32 = fam_fp16.f32
        cases = {f32(65520.0): 0x7C00, f32(65519.99609375): 0x7BFF, f32(2.0**-25): 0x0000,
                 f32(3 * 2.0**-26): 0x0001, f32(1.0): 0x3C00, f32(-2.0): 0xC000,
                 f32(1.0 + 2.0**-11): 0x3C00, f32(1.0 + 3 * 2.0**-11): 0x3C02,
                 0x80000000: 0x8000, 0x00000001: 0x0000, 0x80000001: 0x8000}
        self.assertEqual(fp16.f32_to_f16(list(cases)).tolist(), list(cases.values()))
        bf = {0x3F808000: 0x3F80, 0x3F818000: 0x3F82, 0x3F808001: 0x3F81, 0x7F7F8000: 0x7F80,
              0x7F7F7FFF: 0x7F7F, 0x80008000: 0x8000, 0x00008001: 0x0001}
        self.assertEqual(fp16.f32_to_bf16(list(bf)).tolist(), list(bf.values()))


if __name__ == "__main__":
    unittest.main()
