"""The pinned stream: scalar definition, counter form, vectorized code, derived distributions."""

import unittest

import numpy as np

from qgold_gen import rng
from qgold_gen.rng import MASK64, Stream

SEEDS = [0, 1, 7, 0x0123456789ABCDEF, 0x9E3779B97F4A7C15, MASK64]


class RawStream(unittest.TestCase):
    def test_known_answers_seed0(self):
        # splitmix64 seeded with 0: the first outputs of the well-known generator (state += gamma,
        # then mix), which the counter form reproduces with i + 1.
        want = [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F, 0xF88BB8A8724C81EC]
        s = Stream(0)
        self.assertEqual([s.u64() for _ in want], want)

    def test_counter_form(self):
        for seed in SEEDS:
            s = Stream(seed)
            seq = [s.u64() for _ in range(300)]
            self.assertEqual(seq, [rng.out(seed, i) for i in range(300)])
            # Jumping straight to a counter gives the same draws as getting there one by one.
            self.assertEqual(Stream(seed, counter=123).u64(), seq[123])

    def test_vectorized_equals_scalar(self):
        for seed in SEEDS:
            for start in (0, 5, 2**63, MASK64 - 3):  # the last one wraps i + 1 past 2^64
                vec = rng.out_array(seed, start, 8).tolist()
                self.assertEqual(vec, [rng.out(seed, (start + k) & MASK64) for k in range(8)])

    def test_counter_wraps(self):
        s = Stream(3, counter=MASK64)
        s.u64()
        self.assertEqual(s.counter, 0)
        v = Stream(3, counter=MASK64 - 1)
        a = v.u64_array(4)
        self.assertEqual(v.counter, 2)
        self.assertEqual(a.tolist(), [rng.out(3, c) for c in (MASK64 - 1, MASK64, 0, 1)])

    def test_one_draw_per_value(self):
        for name, call in [("u64", lambda s: s.u64()), ("bits32", lambda s: s.bits32()),
                           ("uniform01", lambda s: s.uniform01()),
                           ("uniform", lambda s: s.uniform(-1.0, 2.0)),
                           ("int_range", lambda s: s.int_range(17))]:
            s = Stream(9)
            call(s)
            self.assertEqual(s.counter, 1, name)


class Distributions(unittest.TestCase):
    def both(self, seed, scalar, vector, count=500):
        a, b = Stream(seed), Stream(seed)
        s = np.array([scalar(a) for _ in range(count)])
        v = vector(b, count)
        self.assertEqual(a.counter, b.counter)
        return s, v

    def test_bits32(self):
        for seed in SEEDS:
            s, v = self.both(seed, Stream.bits32, Stream.bits32_array)
            self.assertEqual(v.dtype, np.uint32)
            self.assertEqual(s.tolist(), v.tolist())
            self.assertEqual(v.tolist(), [rng.out(seed, i) >> 32 for i in range(500)])

    def test_uniform01(self):
        for seed in SEEDS:
            s, v = self.both(seed, Stream.uniform01, Stream.uniform01_array)
            self.assertEqual(v.dtype, np.float32)
            self.assertTrue(np.array_equal(s.astype(np.float32).view(np.uint32), v.view(np.uint32)))
            self.assertTrue(np.all((v >= 0) & (v < 1)))
            want = [(rng.out(seed, i) >> 40) / 2**24 for i in range(500)]
            self.assertEqual(v.astype(np.float64).tolist(), want)

    def test_uniform_in_range_and_scalar_equal(self):
        below_one = float(np.nextafter(np.float32(1), np.float32(0)))
        params = [(-3.0, 5.0), (1.0, float(np.nextafter(np.float32(1), np.float32(2)))),
                  (-70000.0, 70000.0), (-2.0**-14, 2.0**-14), (0.1875, 0.25), (-1.0, -0.5),
                  (below_one, 1.0), (-float(np.float32(1e30)), float(np.float32(1e30)))]
        for a, b in params:
            for seed in (0, 11, MASK64):
                s, v = self.both(seed, lambda st: st.uniform(a, b),
                                 lambda st, n: st.uniform_array(a, b, n), count=2000)
                self.assertTrue(np.array_equal(s.astype(np.float32).view(np.uint32),
                                               v.view(np.uint32)), (a, b, seed))
                self.assertTrue(np.all(v >= np.float32(a)) and np.all(v < np.float32(b)), (a, b))

    def test_uniform_operations_round_separately(self):
        # On [-3, 5): t = 8 and t*u are exact, so only the final addition rounds; float64 holds
        # -3 + 8u exactly, so rounding that once to float32 must give the same value.
        s = Stream(2)
        u = Stream(2).uniform01_array(1000).astype(np.float64)
        want = (-3.0 + 8.0 * u).astype(np.float32)
        self.assertTrue(np.array_equal(s.uniform_array(-3.0, 5.0, 1000), want))

    def test_uniform_clamp(self):
        b = np.nextafter(np.float32(1), np.float32(2))
        v = Stream(11).uniform_array(1.0, float(b), 1000)
        u = Stream(11).uniform01_array(1000)
        self.assertTrue(np.all(v == np.float32(1.0)))
        self.assertTrue(np.any(u > 0.5))  # so the clamp really fired

    def test_uniform_rejects(self):
        for a, b in [(1.0, 1.0), (2.0, 1.0), (0.1, 1.0), (0.0, float("inf"))]:
            with self.assertRaises(ValueError):
                Stream(0).uniform(a, b)

    def test_int_range_exact_128bit(self):
        big = [0, 1, 2**32 - 1, 2**32, 2**63, MASK64, MASK64 - 1, 0xDEADBEEFCAFEBABE]
        ns = [1, 2, 3, 10, 1000003, 2**31, 2**32 - 1, 2**32]
        o = np.array(big, dtype=np.uint64)
        for n in ns:
            got = rng._high64_times(o, n).tolist()
            self.assertEqual(got, [(x * n) >> 64 for x in big], n)
        for seed in SEEDS:
            for n in ns:
                s, v = self.both(seed, lambda st: st.int_range(n),
                                 lambda st, c: st.int_range_array(n, c))
                self.assertEqual(s.tolist(), v.tolist())
                self.assertTrue(int(v.max()) < n)
        with self.assertRaises(ValueError):
            Stream(0).int_range(0)
        with self.assertRaises(ValueError):
            Stream(0).int_range(2**32 + 1)

    def test_int_range_full_is_bits32(self):
        self.assertEqual(Stream(4).int_range_array(2**32, 100).tolist(),
                         Stream(4).bits32_array(100).tolist())

    def test_permutation(self):
        for n in (0, 1, 2, 3, 10, 1000):
            for seed in (6, 8, MASK64):
                a, b = Stream(seed), Stream(seed)
                p, q = a.permutation(n), b.permutation_array(n)
                self.assertEqual(p.tolist(), q.tolist())
                self.assertEqual(sorted(p.tolist()), list(range(n)))
                self.assertEqual(a.counter, max(n - 1, 0))
                self.assertEqual(b.counter, max(n - 1, 0))

    def test_permutation_by_hand(self):
        # n = 3: i = 2 swaps p[2] with p[int_range(3)], then i = 1 with p[int_range(2)].
        j2 = (rng.out(5, 0) * 3) >> 64
        j1 = (rng.out(5, 1) * 2) >> 64
        p = [0, 1, 2]
        p[2], p[j2] = p[j2], p[2]
        p[1], p[j1] = p[j1], p[1]
        self.assertEqual(Stream(5).permutation(3).tolist(), p)


if __name__ == "__main__":
    unittest.main()
