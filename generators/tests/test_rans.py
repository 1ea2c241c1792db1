"""rANS tiles: the vectorized coder of qgold_gen.rans against scalar transcriptions of the spec,
the spec's check vectors, container layout, round trips, the fixtures in golden/rans, and the
error of every corrupt case.

Independent views used here, each written differently from qgold_gen.rans:
  * a scalar encoder/decoder that follows the spec's coder text one symbol at a time with Python
    integers (lane loops in the spec's order, a Python list of words);
  * a normalization that keeps its candidates in a heap-free, sort-every-step loop;
  * predictors evaluated per element from the spec's table;
  * Adler-32 from its definition (two sums mod 65521);
  * CRC-32 one bit at a time from its definition (the container checksum);
  * the fused product with numpy float32 scalars, one operation at a time.
"""

import os
import struct
import tempfile
import unittest

import h5py
import numpy as np

from qgold_gen import fam_rans, fp16
from qgold_gen import rans as R
from qgold_gen.schema import FixtureFile, describe_file

GENERATORS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_GOLDEN = os.path.join(os.path.dirname(GENERATORS), "golden", "rans")
f32 = np.float32


# ---------------------------------------------------------------------------------------------
# Scalar transcriptions
# ---------------------------------------------------------------------------------------------

def normalize_slow(counts):
    c = [int(v) for v in counts]
    n = sum(c)
    if n == 0:
        return [4096] + [0] * 255
    f = [0 if v == 0 else max(1, (v * 4096) // n) for v in c]
    r = [(v * 4096) % n for v in c]
    raised = set()
    while sum(f) < 4096:
        cands = [s for s in range(256) if c[s] and s not in raised]
        best = cands[0]
        for s in cands[1:]:
            if r[s] > r[best]:
                best = s
        f[best] += 1
        raised.add(best)
    while sum(f) > 4096:
        best = 0
        for s in range(1, 256):
            if f[s] > f[best]:
                best = s
        f[best] -= 1
        assert f[best] >= 1
    return f


def predict_slow(b, mode):
    def at(r, c):
        return int(b[r][c]) if r >= 0 and c >= 0 else 0
    e = np.zeros((256, 256), np.uint8)
    for r in range(256):
        for c in range(256):
            v = at(r, c)
            if mode == 1:
                v -= at(r, c - 1)
            elif mode == 2:
                v -= at(r - 1, c)
            elif mode == 3:
                v = v - at(r, c - 1) - at(r - 1, c) + at(r - 1, c - 1)
            e[r][c] = v % 256
    return e


def encode_slow(e, freq):
    """The spec's coder text: per warp, t = 255..0, l = 31..0; stream = emitted list reversed."""
    freq = [int(v) for v in freq]
    cum = [sum(freq[:s]) for s in range(256)]
    init, ends, words = [0] * 256, [], []
    for w in range(8):
        x = [R.L] * 32
        out = []
        for t in range(255, -1, -1):
            for l in range(31, -1, -1):
                s = int(e[32 * w + l][t])
                f = freq[s]
                if f == 0:
                    raise R.RansError("rans_symbol_not_in_table")
                if x[l] >= (1 << 19) * f:
                    out.append(x[l] & 0xFFFF)
                    x[l] >>= 16
                x[l] = (x[l] // f) * 4096 + (x[l] % f) + cum[s]
        words += out[::-1]
        ends.append(len(words))
        init[32 * w:32 * w + 32] = x
    return init, ends, words


def decode_slow(init, ends, words, freq):
    freq = [int(v) for v in freq]
    cum = [sum(freq[:s]) for s in range(256)]
    e = np.zeros((256, 256), np.uint8)
    for w in range(8):
        pos, end = (ends[w - 1] if w else 0), ends[w]
        x = [int(v) for v in init[32 * w:32 * w + 32]]
        for t in range(256):
            for l in range(32):
                slot = x[l] & 4095
                s = 0
                while not cum[s] <= slot < cum[s] + freq[s]:
                    s += 1
                e[32 * w + l][t] = s
                x[l] = freq[s] * (x[l] >> 12) + slot - cum[s]
            for l in range(32):
                if x[l] < R.L:
                    if pos >= end:
                        raise R.RansError("rans_truncated")
                    x[l] = (x[l] << 16) | int(words[pos])
                    pos += 1
        if pos != end:
            raise R.RansError("rans_trailing_data")
        if any(v != R.L for v in x):
            raise R.RansError("rans_corrupt")
    return e


def adler_slow(data):
    a, b = 1, 0
    for byte in data:
        a = (a + byte) % 65521
        b = (b + a) % 65521
    return (b << 16) | a


def crc_slow(data, field_zero=False):
    """CRC-32 bit by bit: register all ones, reflected polynomial 0xEDB88320, result inverted; with
    field_zero, bytes 56..63 count as zero (the container checksum's rule)."""
    r = 0xFFFFFFFF
    for i, byte in enumerate(data):
        r ^= 0 if field_zero and 56 <= i < 64 else byte
        for _ in range(8):
            r = (r >> 1) ^ 0xEDB88320 if r & 1 else r >> 1
    return r ^ 0xFFFFFFFF


def flip_error(valid, i, bit):
    """The error the spec's validation order names for flipping `bit` of byte i of a valid
    container with checksums."""
    if i < 4:
        return "rans_bad_magic"
    if i in (4, 5) or (i == 9 and bit == 0):   # the version; flag bit 0 leaves bytes 56..63 nonzero
        return "rans_bad_header"
    if 48 <= i < 56 and not valid[i] >> bit & 1:
        return "rans_container_truncated"      # file_size grew past the length
    return "rans_container_checksum"


def gemv_slow(w, scales_bits, x16):
    M, K = w.shape
    B = x16.shape[0]
    q = w.view(np.int8)
    xf = fp16.f32_values(fp16.f16_to_f32(x16))
    s = fp16.f32_values(scales_bits)
    y = np.zeros((B, M), np.uint32)
    with np.errstate(invalid="ignore", over="ignore"):
        for b in range(B):
            for r in range(M):
                t = f32(0.0)
                for j in range(0, K, 256):
                    p = f32(0.0)
                    for c in range(j, min(K, j + 256)):
                        p = f32(p + f32(f32(q[r, c]) * xf[b, c]))
                    t = f32(t + p)
                y[b, r] = fp16.f32_bits(np.array([f32(t * s[r])]))[0]
    return y


def random_tile(seed, lo=0, hi=256):
    return np.random.default_rng(seed).integers(lo, hi, (256, 256)).astype(np.uint8)


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------

class TestNormalize(unittest.TestCase):
    def test_spec_check_vectors(self):
        c = np.ones(256, np.uint64)
        c[77] = 123456
        f = R.normalize(c)
        self.assertEqual(int(f[77]), 3841)
        self.assertTrue(np.all(np.delete(f, 77) == 1))
        for v in (1, 5, 256, 10**6):
            self.assertTrue(np.all(R.normalize(np.full(256, v, np.uint64)) == 16))

    def test_empty_and_single(self):
        self.assertEqual(R.normalize(np.zeros(256, np.uint64)).tolist(), [4096] + [0] * 255)
        c = np.zeros(256, np.uint64)
        c[9] = 3
        self.assertEqual(int(R.normalize(c)[9]), 4096)

    def test_against_slow(self):
        rng = np.random.default_rng(5)
        for trial in range(300):
            k = int(rng.integers(1, 257))
            c = np.zeros(256, np.uint64)
            idx = rng.choice(256, k, replace=False)
            scale = 10 ** int(rng.integers(0, 12))
            c[idx] = rng.integers(1, 1 + scale, k).astype(np.uint64)
            if trial % 3 == 0:
                c[idx[0]] = np.uint64(scale * 1000)
            f = R.normalize(c)
            self.assertEqual(f.tolist(), normalize_slow(c), c[c > 0])
            self.assertEqual(int(f.astype(np.int64).sum()), 4096)
            self.assertTrue(np.array_equal(f > 0, c > 0))


class TestPredictors(unittest.TestCase):
    def test_against_slow_and_inverse(self):
        for seed, (lo, hi) in ((1, (0, 256)), (2, (120, 136))):
            b = random_tile(seed, lo, hi)
            for mode in range(4):
                e = R.predict(b, mode)
                self.assertTrue(np.array_equal(e, predict_slow(b, mode)), mode)
                self.assertTrue(np.array_equal(R.unpredict(e, mode), b), mode)

    def test_auto(self):
        r, c = np.meshgrid(np.arange(256), np.arange(256), indexing="ij")
        k = np.where(np.arange(256) % 3 == 2, 2, 1)
        # row-constant steps 1, 1, 2: left leaves {1: 2/3, 2: 1/3}, gradient {0, 1, -1} a third
        # each (sum of count^2 5/9 against 3/9 of 65536^2); transposed for up; an additive
        # (separable) surface with varying steps is zero inside under gradient only
        self.assertEqual(R.auto_mode(((k[:, None] * c) & 255).astype(np.uint8)), 1)
        self.assertEqual(R.auto_mode(((k[None, :] * r) & 255).astype(np.uint8)), 2)
        self.assertEqual(R.auto_mode(((5 * r * r + 7 * c * c) & 255).astype(np.uint8)), 3)
        self.assertEqual(R.auto_mode(np.full((256, 256), 0x80, np.uint8)), 0)  # tie-free win
        self.assertEqual(R.auto_mode(np.zeros((256, 256), np.uint8)), 0)       # 4-way tie -> 0
        with self.assertRaises(R.RansError) as cm:
            R.predict(np.zeros((256, 256), np.uint8), 4)
        self.assertEqual(cm.exception.name, "rans_predictor_invalid")


class TestCoder(unittest.TestCase):
    def check_tile(self, e):
        freq = R.normalize(R.histogram(e))
        (ts,) = R.encode_symbols(e[None], freq)
        init, ends, words = encode_slow(e, freq)
        self.assertEqual(ts.init_state.tolist(), init)
        self.assertEqual(ts.warp_end.tolist(), ends)
        self.assertEqual(ts.words.tolist(), words)
        self.assertTrue(np.array_equal(decode_slow(init, ends, words, freq), e))
        dec = R.decode_symbols(ts.init_state, ts.warp_end, ts.words, freq)
        self.assertTrue(np.array_equal(dec, e))
        return ts

    def test_against_slow(self):
        e = random_tile(11)
        ts = self.check_tile(e)
        self.assertGreater(len(ts.words), 32000)
        skew = random_tile(12, 0, 4)
        skew[skew != 0] = random_tile(13)[skew != 0] % 5
        skew[31, 255], skew[32, 0], skew[255, 255] = 0x80, 0x7F, 0xFF
        self.check_tile(skew)

    def test_all_same_zero_words(self):
        for v in (0x00, 0x7F, 0x80, 0xFF):
            buf = R.encode(np.full((256, 256), v, np.uint8), np.zeros(256, np.uint32), 256, 256,
                           [0])
            h = R.check(buf)
            m = R.tile_meta(buf, h, 0)
            self.assertEqual(m.data_size, 1056)
            self.assertEqual(np.frombuffer(buf, "<u4", 256, m.data_offset).tolist(), [R.L] * 256)
            self.assertEqual(np.frombuffer(buf, "<u4", 8, m.data_offset + 1024).tolist(), [0] * 8)
            self.assertEqual(int(h.freq[v]), 4096)

    def test_symbol_not_in_table(self):
        e = np.zeros((1, 256, 256), np.uint8)
        e[0, 3, 3] = 9
        freq = np.zeros(256, np.uint16)
        freq[0] = 4096
        with self.assertRaises(R.RansError) as cm:
            R.encode_symbols(e, freq)
        self.assertEqual(cm.exception.name, "rans_symbol_not_in_table")

    def test_adler(self):
        rng = np.random.default_rng(3)
        for n in (0, 1, 5552, 65536):
            d = rng.integers(0, 256, n).astype(np.uint8).tobytes()
            self.assertEqual(R.adler32(d), adler_slow(d))
        self.assertEqual(R.adler32(bytes([0xFF]) * 65536), adler_slow(bytes([0xFF]) * 65536))

    def test_crc(self):
        self.assertEqual(crc_slow(b"123456789"), 0xCBF43926)
        rng = np.random.default_rng(5)
        for n in (0, 1, 63, 64, 65, 700):
            d = rng.integers(0, 256, n).astype(np.uint8).tobytes()
            want = crc_slow(d, True) if n >= 64 else None
            if want is not None:
                self.assertEqual(R.container_crc(d), want)


class TestContainer(unittest.TestCase):
    def test_layout(self):
        rng = np.random.default_rng(8)
        M, K = 300, 520
        w = rng.integers(0, 256, (M, K)).astype(np.uint8)
        scales = fp16.f32_bits(rng.standard_normal(M).astype(f32))
        buf = R.encode(w, scales, M, K, [0, 1, 2, 3, 255, 0], True)
        hdr = struct.unpack_from("<4sHHBBHHHIIIIQQQQ", buf)
        self.assertEqual(hdr[:8], (b"RANS", 2, 64, 12, 1, 256, 256, 256))
        self.assertEqual(hdr[8:12], (M, K, 2, 3))
        n = 6
        self.assertEqual(hdr[13], 576)
        self.assertEqual(hdr[12], 576 + 32 * n)
        self.assertEqual(hdr[14], len(buf))
        crc = crc_slow(buf, True)
        self.assertEqual(struct.unpack_from("<II", buf, 56), (crc, crc ^ 0xFFFFFFFF))
        pos = (576 + 32 * n + 4 * M + 15) // 16 * 16
        self.assertFalse(any(buf[576 + 32 * n + 4 * M:pos]))
        tiles = R.tiles_of(w, M, K)
        for i in range(n):
            off, size, ck, mode, res = struct.unpack_from("<QQIB11s", buf, 576 + 32 * i)
            self.assertEqual(off, pos)
            we = struct.unpack_from("<8I", buf, off + 1024)
            self.assertEqual(size, (1056 + 2 * we[7] + 15) // 16 * 16)
            self.assertFalse(any(buf[off + 1056 + 2 * we[7]:off + size]))
            self.assertEqual(ck, adler_slow(tiles[i // 3, i % 3].tobytes()))
            self.assertEqual(res, bytes(11))
            pos += size
        self.assertEqual(pos, len(buf))
        w2, s2 = R.decode(buf)
        self.assertTrue(np.array_equal(w2, w))
        self.assertTrue(np.array_equal(s2, scales))

    def test_checksum_flag_off_zero(self):
        buf = R.encode(np.ones((3, 3), np.uint8), np.zeros(3, np.uint32), 3, 3, None, False)
        self.assertEqual(struct.unpack_from("<I", buf, 576 + 16)[0], 0)
        self.assertEqual(buf[9], 0)
        self.assertEqual(buf[56:64], bytes(8))

    def test_empty(self):
        for M, K in ((0, 0), (5, 0), (0, 9)):
            buf = R.encode(np.zeros((M, K), np.uint8), np.zeros(M, np.uint32), M, K)
            self.assertEqual(len(buf), (576 + 4 * M + 15) // 16 * 16)
            self.assertEqual(struct.unpack_from("<H", buf, 64)[0], 4096)
            self.assertFalse(any(buf[66:576]))
            w, s = R.decode(buf)
            self.assertEqual(w.shape, (M, K))

    def test_round_trips(self):
        rng = np.random.default_rng(9)
        for M, K in ((1, 1), (255, 3), (257, 1), (2, 257), (256, 256), (33, 512)):
            w = rng.integers(0, 256, (M, K)).astype(np.uint8)
            if M * K > 1000:
                w = (w % 7).astype(np.uint8)
            n = -(-M // 256) * -(-K // 256)
            for modes in ([0] * n, [1] * n, [2] * n, [3] * n, None):
                buf = R.encode(w, np.zeros(M, np.uint32), M, K, modes, modes is None)
                self.assertTrue(np.array_equal(R.decode(buf)[0], w))
                self.assertEqual(buf, R.encode(w, np.zeros(M, np.uint32), M, K, modes,
                                               modes is None))

    def test_bad_mode_request(self):
        with self.assertRaises(R.RansError) as cm:
            R.encode(np.zeros((1, 1), np.uint8), np.zeros(1, np.uint32), 1, 1, [4])
        self.assertEqual(cm.exception.name, "rans_predictor_invalid")

    def test_every_bit_flip_and_cut(self):
        """Every single flipped bit of a checksummed container is the error the spec's order names
        (never accepted), and every proper prefix is a cut file."""
        rng = np.random.default_rng(4)
        M, K = 2, 260  # two tiles, an 8-byte gap before the payloads, payload padding
        w = (rng.integers(0, 256, (M, K)) % 9).astype(np.uint8)
        buf = R.encode(w, fp16.f32_bits(np.array([0.5, -2.0], f32)), M, K, [1, 0], True)
        h = R.check(buf)
        m0, m1 = R.tile_meta(buf, h, 0), R.tile_meta(buf, h, 1)
        ends = [m.data_offset + 1056 + 2 * struct.unpack_from("<I", buf, m.data_offset + 1052)[0]
                for m in (m0, m1)]
        self.assertLess(h.scales_offset + 4 * M, m0.data_offset)
        self.assertTrue(ends[0] < m1.data_offset or ends[1] < len(buf))
        got = {}
        for i in range(len(buf)):
            for bit in range(8):
                b = bytearray(buf)
                b[i] ^= 1 << bit
                with self.assertRaises(R.RansError, msg=(i, bit)) as cm:
                    R.check(bytes(b))
                got[(i, bit)] = cm.exception.name
        want = {(i, bit): flip_error(buf, i, bit) for i in range(len(buf)) for bit in range(8)}
        self.assertEqual(got, want)
        for n in range(len(buf)):
            with self.assertRaises(R.RansError, msg=n) as cm:
                R.decode(buf[:n])
            self.assertEqual(cm.exception.name, "rans_container_truncated", n)


class TestGemv(unittest.TestCase):
    def test_against_scalar(self):
        rng = np.random.default_rng(6)
        M, K, B = 5, 300, 3
        w = rng.integers(0, 256, (M, K)).astype(np.uint8)
        x = rng.integers(0, 0x10000, (B, K)).astype(np.uint16)
        x[x & 0x7C00 == 0x7C00] = 0x3C00      # finite here; specials below
        x[0, :8] = [0x0000, 0x8000, 0x0001, 0x8001, 0x7BFF, 0xFBFF, 0x03FF, 0x0400]
        scales = fp16.f32_bits(np.array([1.0, -0.5, 3e-8, 1e30, 0.0], f32))
        y32, y16 = R.gemv(w, scales, x)
        self.assertTrue(np.array_equal(y32, gemv_slow(w, scales, x)))
        self.assertTrue(np.array_equal(y16, fp16.f32_to_f16(y32.reshape(-1)).reshape(B, M)))
        buf = R.encode(w, scales, M, K)
        self.assertTrue(np.array_equal(R.gemv_container(buf, x)[0], y32))
        x[1, 7] = 0x7C00
        x[2, 9] = 0x7E00
        y32, _ = R.gemv(w, scales, x)
        slow = gemv_slow(w, scales, x)
        self.assertTrue(np.array_equal(fp16.f32_is_nan(y32), fp16.f32_is_nan(slow)))
        ok = ~fp16.f32_is_nan(y32)
        self.assertTrue(np.array_equal(y32[ok], slow[ok]))
        for bad in (np.zeros((0, K), np.uint16), np.zeros((17, K), np.uint16)):
            with self.assertRaises(R.RansError) as cm:
                R.gemv_container(buf, bad)
            self.assertEqual(cm.exception.name, "rans_batch_out_of_range")


@unittest.skipUnless(os.path.isdir(REPO_GOLDEN), "golden/rans not generated")
class TestGolden(unittest.TestCase):
    def cases(self, family):
        with h5py.File(os.path.join(REPO_GOLDEN, family + ".h5"), "r") as f:
            for name in f:
                g = f[name]
                yield name, dict(g.attrs), {k: g[k][()] for k in g}

    def test_corrupt_cases_fail_with_their_error(self):
        seen = set()
        for name, attrs, ds in self.cases("corrupt"):
            self.assertEqual(attrs["expect"], "invalid")
            buf = ds["container"].tobytes()
            with self.assertRaises(R.RansError, msg=name) as cm:
                R.decode(buf)
            self.assertEqual(cm.exception.name, attrs["error"], name)
            K = struct.unpack_from("<I", buf, 20)[0] if len(buf) >= 24 else 1
            with self.assertRaises(R.RansError, msg=name) as cm:
                R.gemv_container(buf, np.zeros((1, K), np.uint16))
            self.assertEqual(cm.exception.name, attrs["error"], name)
            seen.add(attrs["error"])
        self.assertEqual(seen, {"rans_bad_magic", "rans_bad_header", "rans_bad_table",
                                "rans_bad_tile_meta", "rans_bad_state", "rans_truncated",
                                "rans_trailing_data", "rans_corrupt", "rans_checksum",
                                "rans_container_checksum", "rans_container_truncated"})

    def test_encode_cases(self):
        for name, attrs, ds in self.cases("encode"):
            M, K = int(attrs["M"]), int(attrs["K"])
            self.assertEqual(ds["w_bytes"].shape, (M, K))
            buf = R.encode(ds["w_bytes"], ds["scales"], M, K, ds["modes"], bool(attrs["checksums"]))
            self.assertEqual(buf, ds["container"].tobytes(), name)
            w, s = R.decode(buf)
            self.assertTrue(np.array_equal(w, ds["w_bytes"]), name)
            self.assertTrue(np.array_equal(s, ds["scales"]), name)

    def test_gemv_cases(self):
        for name, attrs, ds in self.cases("gemv"):
            y32, y16 = R.gemv_container(ds["container"].tobytes(), ds["x"])
            nan = fp16.f32_is_nan(ds["expected_f32"])
            self.assertEqual(bool(nan.any()), attrs.get("nan_sign") == "any", name)
            self.assertTrue(np.array_equal(fp16.f32_is_nan(y32), nan), name)
            self.assertTrue(np.array_equal(y32[~nan], ds["expected_f32"][~nan]), name)
            self.assertTrue(np.array_equal(y16[~nan], ds["expected_f16"][~nan]), name)

    def test_normalize_cases(self):
        for name, attrs, ds in self.cases("normalize"):
            self.assertEqual(normalize_slow(ds["counts"]), ds["expected_freq"].tolist(), name)

    def test_size_budget(self):
        total = sum(os.path.getsize(os.path.join(REPO_GOLDEN, n)) for n in os.listdir(REPO_GOLDEN))
        self.assertLess(total, 2.5 * 2**20)


class TestDeterminism(unittest.TestCase):
    def test_families_twice(self):
        with tempfile.TemporaryDirectory() as tmp:
            for family, build in (("normalize", fam_rans.build_normalize),
                                  ("corrupt", fam_rans.build_corrupt)):
                hashes = []
                for k in range(2):
                    p = os.path.join(tmp, f"{family}{k}.h5")
                    with FixtureFile(p, "rans", family) as ff:
                        build(ff)
                    hashes.append({o: i.hash for o, i in describe_file(p).items()})
                self.assertEqual(hashes[0], hashes[1], family)


if __name__ == "__main__":
    unittest.main()
