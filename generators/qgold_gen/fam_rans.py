"""Families of the rANS tile format: golden/rans/<family>.h5 (schema: fixtures.md, section rANS).

  normalize.h5  path normalize  counts -> expected_freq (the pinned integer normalization)
  encode.h5     path encode     w_bytes, scales, modes, checksums -> the exact container bytes
  gemv.h5       path gemv       container + x -> expected_f32 / expected_f16 (the pinned order)
  corrupt.h5    path corrupt    expect = invalid: one broken validation rule per case, its error
                                (checksummed containers edited to reach an inner rule carry a
                                recomputed container checksum; the checksum cases do not)

Every container is produced by qgold_gen.rans (written from the spec) and decoded back by its own
validating reader before it is stored; every claimed edge (zero words, frequency-1 symbols, the
mode auto picks, the error a corrupt case raises) is asserted at generation time.

Random data comes from the pinned stream (rng.md): `bits32` draws, whose little-endian bytes give
weight bytes in order; a further transform of those bytes is recorded in `transform`.
"""

from __future__ import annotations

import struct

import numpy as np

from . import fp16
from . import rans as R
from .rng import Stream
from .schema import FixtureFile

FORMAT = "rans"
FORMAT_VERSION = R.VERSION  # the container version of rans.md
F32 = np.float32
ROTATIONS = (0, 1)  # all-same tiles under modes left/up/gradient: byte rotations stored


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------

def random_bytes(seed: int, nbytes: int) -> tuple[np.ndarray, dict]:
    """nbytes bytes: the little-endian bytes of ceil(nbytes/4) bits32 draws, in order."""
    draws = -(-nbytes // 4)
    w = Stream(seed).bits32_array(draws).astype(np.int64)
    b = np.stack([(w >> (8 * k)) & 0xFF for k in range(4)], axis=1).reshape(-1)[:nbytes]
    return b.astype(np.uint8), {"seed": seed, "distribution": "bits32", "count": draws}


def small_bytes(seed: int, M: int, K: int) -> tuple[np.ndarray, dict]:
    """Low-entropy weights: each random byte v becomes (v & 15) - 8, i.e. int8 in [-8, 7]."""
    b, prov = random_bytes(seed, M * K)
    prov["transform"] = "w = (int8) ((v & 15) - 8) for each byte v of the draws"
    return ((b.astype(np.int64) & 15) - 8).astype(np.uint8).reshape(M, K), prov


def tiny_bytes(seed: int, M: int, K: int) -> tuple[np.ndarray, dict]:
    """Two-bit weights: each random byte v becomes (v & 3) - 2, i.e. int8 in [-2, 1]."""
    b, prov = random_bytes(seed, M * K)
    prov["transform"] = "w = (int8) ((v & 3) - 2) for each byte v of the draws"
    return ((b.astype(np.int64) & 3) - 2).astype(np.uint8).reshape(M, K), prov


def ramp(M: int, K: int) -> np.ndarray:
    """Smooth handmade weights whose predictability differs per region, so auto picks different
    modes: rows/columns arithmetic progressions mod 256 with region-dependent slopes."""
    r = np.arange(M)[:, None]
    c = np.arange(K)[None, :]
    w = np.where(c < 256, 3 * c, np.where(r < 256, 5 * r, (r * c) % 7 + 2 * r + 3 * c))
    w = np.where((r >= 256) & (c < 256), 7 * c + ((r * 13) % 3), w)
    return (w & 0xFF).astype(np.uint8)


def row_scales(M: int) -> np.ndarray:
    """Handmade float32 scales (bits): (r mod 7 + 1) / 64, negated for every third row."""
    r = np.arange(M)
    s = ((r % 7) + 1).astype(F32) / F32(64.0)
    s = np.where(r % 3 == 2, -s, s).astype(F32)
    return fp16.f32_bits(s)


def signed_edges() -> np.ndarray:
    """256 x 256, zero except -128 and 127 at the lane classes (first/last lane of every warp,
    lanes 31/32) crossed with columns 0, 1, 31, 32, 254, 255 (alternating sign)."""
    w = np.zeros((256, 256), np.int64)
    lanes = sorted({32 * k for k in range(8)} | {32 * k + 31 for k in range(8)})
    cols = [0, 1, 31, 32, 254, 255]
    for a, r in enumerate(lanes):
        for b, c in enumerate(cols):
            w[r, c] = 0x80 if (a + b) % 2 == 0 else 0x7F
    w[255, 255] = 0x80
    w[31, 255], w[32, 255] = 0x7F, 0x80
    return w.astype(np.uint8)


def adversarial(mode: int) -> np.ndarray:
    """255 x 14 bytes whose mode-`mode` symbols inside the matrix are 1..255 (each 14 times, in a
    scrambled order): every one of them ends with frequency 1 against the padding's zeros."""
    i = np.arange(255 * 14)
    e = (1 + (i * 97) % 255).reshape(255, 14)
    tile = np.zeros((256, 256), np.int64)
    tile[:255, :14] = e
    b = R.unpredict(tile.astype(np.uint8), mode)[:255, :14]
    return b.copy()


# ---------------------------------------------------------------------------------------------
# Writers
# ---------------------------------------------------------------------------------------------

def _nan(*arrays) -> bool:
    return any(bool(fp16.f32_is_nan(a).any()) for a in arrays)


def _case(ff: FixtureFile, name: str, path: str, description: str, prov: dict | None, **attrs):
    return ff.add_case(name, format_version=FORMAT_VERSION, path=path, description=description,
                       **dict(prov or {}), **attrs)


def container_array(buf: bytes) -> np.ndarray:
    return np.frombuffer(buf, np.uint8).copy()


def stats(buf: bytes) -> list[dict]:
    """Per tile: mode, data_size, words per warp and the init states."""
    h = R.check(buf)
    out = []
    for i in range(h.n_tiles):
        m = R.tile_meta(buf, h, i)
        we = np.frombuffer(buf, "<u4", 8, m.data_offset + 1024).astype(np.int64)
        st = np.frombuffer(buf, "<u4", 256, m.data_offset).astype(np.int64)
        out.append({"mode": m.mode, "data_size": m.data_size, "words": int(we[-1]),
                    "warp_words": np.diff(np.concatenate([[0], we])), "states": st})
    return out


def add_encode(ff: FixtureFile, name: str, description: str, w: np.ndarray, M: int, K: int,
               modes, checksums: bool, prov: dict | None = None, scales=None) -> bytes:
    w = np.asarray(w, np.uint8).reshape(M, K)
    scales = row_scales(M) if scales is None else np.asarray(scales, np.uint32)
    n = R.ceil_div(M, 256) * R.ceil_div(K, 256)
    modes = np.asarray([255] * n if modes is None else modes, np.uint8).reshape(n)
    buf = R.encode(w, scales, M, K, modes, checksums)
    w2, s2 = R.decode(buf)
    assert np.array_equal(w2, w) and np.array_equal(s2, scales)
    assert R.encode(w, scales, M, K, modes, checksums) == buf  # deterministic
    g = _case(ff, name, "encode", description, prov, M=M, K=K, checksums=int(checksums))
    ff.add_dataset(g, "w_bytes", w)
    ff.add_dataset(g, "scales", scales, bit_dtype="float32")
    ff.add_dataset(g, "modes", modes)
    ff.add_dataset(g, "container", container_array(buf))
    return buf


def add_gemv(ff: FixtureFile, name: str, description: str, w: np.ndarray, scales, x16,
             modes=None, checksums: bool = False, prov: dict | None = None) -> tuple:
    w = np.asarray(w, np.uint8)
    M, K = w.shape
    scales = np.asarray(scales, np.uint32)
    x16 = np.asarray(x16, np.uint16)
    buf = R.encode(w, scales, M, K, modes, checksums)
    y32, y16 = R.gemv_container(buf, x16)
    y32b, y16b = R.gemv(w, scales, x16)
    assert np.array_equal(y32, y32b) and np.array_equal(y16, y16b)
    # batch invariance of the generator itself: each column alone gives the same bits
    for b in range(x16.shape[0]):
        assert np.array_equal(R.gemv(w, scales, x16[b:b + 1])[0][0], y32[b])
    extra = {"nan_sign": "any"} if _nan(y32) else {}
    g = _case(ff, name, "gemv", description, prov, M=M, K=K, batch=x16.shape[0], **extra)
    ff.add_dataset(g, "container", container_array(buf))
    ff.add_dataset(g, "w_bytes", w)
    ff.add_dataset(g, "scales", scales, bit_dtype="float32")
    ff.add_dataset(g, "x", x16, bit_dtype="float16")
    ff.add_dataset(g, "expected_f32", y32, bit_dtype="float32")
    ff.add_dataset(g, "expected_f16", y16, bit_dtype="float16")
    return y32, y16


# ---------------------------------------------------------------------------------------------
# normalize.h5
# ---------------------------------------------------------------------------------------------

def build_normalize(ff: FixtureFile) -> None:
    def add(name, description, counts, check=None, prov=None):
        counts = np.asarray(counts, np.uint64)
        freq = R.normalize(counts)
        assert int(freq.astype(np.int64).sum()) == 4096
        assert np.array_equal(freq > 0, counts > 0) or not counts.any()
        if check is not None:
            assert check(freq), name
        g = _case(ff, name, "normalize", description, prov)
        ff.add_dataset(g, "counts", counts)
        ff.add_dataset(g, "expected_freq", freq)

    c = np.zeros(256, np.uint64)
    add("all_zero", "no symbols at all (the empty container's table): freq[0] = 4096", c,
        lambda f: f[0] == 4096 and f[1:].sum() == 0)
    for s, n in ((0, 1), (0x80, 65536), (0xFF, 7)):
        c = np.zeros(256, np.uint64)
        c[s] = n
        add(f"one_symbol_{s:02x}_n{n}", f"only symbol {s} (count {n}): it gets 4096", c,
            lambda f, s=s: f[s] == 4096)
    add("uniform_256x7", "256 symbols tied at count 7: 16 each", np.full(256, 7, np.uint64),
        lambda f: np.all(f == 16))
    add("uniform_256x256", "256 symbols tied at count 256 (a uniform random tile): 16 each",
        np.full(256, 256, np.uint64), lambda f: np.all(f == 16))
    c = np.ones(256, np.uint64)
    c[0] = 65281
    add("singletons_255_dominant_0", "255 singletons plus a dominant symbol 0 (N = 65536): 1 each "
        "and 3841 (the over branch takes 239 from the dominant one)", c,
        lambda f: f[0] == 3841 and np.all(f[1:] == 1))
    c = np.ones(256, np.uint64)
    c[200] = 10**9
    add("singletons_255_dominant_200", "255 singletons plus a dominant symbol 200 (count 10^9)", c,
        lambda f: f[200] == 3841 and np.all(np.delete(f, 200) == 1))
    c = np.zeros(256, np.uint64)
    c[:3] = 1
    add("three_tied", "three symbols tied at 1: floors 1365, remainders tie, the short one goes to "
        "the lowest symbol", c, lambda f: f[:3].tolist() == [1366, 1365, 1365])
    c = np.zeros(256, np.uint64)
    c[[5, 9, 250]] = [3, 3, 1]
    add("remainder_ties", "counts 3, 3, 1 (N = 7): largest remainder first, ties to the lower "
        "symbol", c)
    c = np.zeros(256, np.uint64)
    c[[1, 2]] = [1, 2**40]
    add("huge_and_one", "counts 1 and 2^40: c * 4096 needs 64 bits, the rare one is raised to 1 "
        "and the over branch takes 1 from the big one", c, lambda f: f[1] == 1 and f[2] == 4095)
    c = np.zeros(256, np.uint64)
    c[:100] = 1
    c[100] = 4000
    add("many_raised_over", "100 singletons against 4000 (N = 4100): 100 raised to 1, the over "
        "branch trims the largest symbol only", c)
    c = np.array([(k * 37) % 11 for k in range(256)], np.uint64)
    add("mixed_with_zeros", "counts (37k mod 11): some symbols absent (frequency 0), many ties", c)
    c = np.zeros(256, np.uint64)
    c[7] = 4095
    c[8] = 1
    add("exact_4096", "counts summing to 4096: the table is the histogram itself", c,
        lambda f: f[7] == 4095 and f[8] == 1)
    for seed in (501, 502, 503):
        st = Stream(seed)
        k = st.bits32_array(256).astype(np.int64)
        # keep about a third of the symbols, with counts spread over many magnitudes
        counts = np.where(k % 3 == 0, (k >> 8) >> ((k >> 2) % 24), 0).astype(np.uint64)
        prov = {"seed": seed, "distribution": "bits32", "count": 256,
                "transform": "count[s] = (v >> 8) >> ((v >> 2) mod 24) if v mod 3 == 0 else 0, "
                             "v the s-th draw"}
        add(f"random_s{seed}", "random sparse counts over many magnitudes", counts, prov=prov)


# ---------------------------------------------------------------------------------------------
# encode.h5
# ---------------------------------------------------------------------------------------------

def build_encode(ff: FixtureFile) -> None:
    # all-same full tiles, mode none: a one-symbol table, zero words, every state 2^15
    for v in (0x7F, 0x80, 0xFF):
        buf = add_encode(ff, f"allsame_{v:02x}_none", f"one full tile of byte 0x{v:02X}, mode "
                         "none: freq 4096 for one symbol, zero words, every init state 2^15, "
                         "data_size 1056", np.full((256, 256), v, np.uint8), 256, 256, [0], True)
        (t,) = stats(buf)
        assert t["words"] == 0 and t["data_size"] == 1056 and np.all(t["states"] == R.L)
    buf = add_encode(ff, "allsame_00_modes", "four all-zero tiles (1 x 1024 of zeros, the rest "
                     "padding) under modes none, left, up, gradient: zero words each",
                     np.zeros((1, 1024), np.uint8), 1, 1024, [0, 1, 2, 3], False)
    assert all(t["words"] == 0 and t["data_size"] == 1056 and np.all(t["states"] == R.L)
               for t in stats(buf))
    vals = [0x7F, 0x80, 0xFF]
    for rot in ROTATIONS:
        row = [vals[(k + rot) % 3] for k in range(3)]
        w = np.concatenate([np.full((256, 256), v, np.uint8) for v in row], axis=1)
        add_encode(ff, f"allsame_pred_{rot}", "three full all-same tiles (" +
                   ", ".join(f"0x{v:02X}" for v in row) + ") under modes left, up, gradient: the "
                   "first column / first row / corner carry the byte, mod 256", w, 256, 768,
                   [1, 2, 3], rot == 1)

    # two-symbol tiles with a frequency-1 symbol
    w = np.full((256, 256), 0x80, np.uint8)
    w[32, 255] = 0x7F
    buf = add_encode(ff, "twosym_full", "full tile of 0x80 with one 0x7F at lane 32, column 255: "
                     "f(0x7F) = 1, f(0x80) = 4095", w, 256, 256, [0], True)
    f = R.check(buf).freq
    assert f[0x7F] == 1 and f[0x80] == 4095
    w = np.zeros((1, 1024), np.uint8)
    for j in range(4):
        w[0, 256 * j + 17 * (j + 1)] = 0x80
    buf = add_encode(ff, "twosym_modes", "one 0x80 among zeros in each of four tiles, modes none, "
                     "left, up, gradient: two symbols, f(0x80) = 1", w, 1, 1024, [0, 1, 2, 3], True)
    f = R.check(buf).freq
    assert f[0x80] == 1 and f[0] == 4095 and np.count_nonzero(f) == 2

    # uniform random bytes
    b, prov = random_bytes(601, 65536)
    buf = add_encode(ff, "uniform_full_s601", "one full tile of uniform random bytes, mode none: "
                     "table near 16 everywhere, the tile expands by about 2%", b.reshape(256, 256),
                     256, 256, [0], True, prov)
    (t,) = stats(buf)
    assert 1.0 < t["data_size"] / 65536 < 1.04, t["data_size"]
    b, prov = random_bytes(602, 40 * 1024)
    add_encode(ff, "uniform_rows40_s602", "40 rows of uniform random bytes (lanes 0..39, across "
               "the warp 0/1 edge) in four tiles, modes left, up, gradient, auto",
               b.reshape(40, 1024),
               40, 1024, [1, 2, 3, 255], False, prov)

    # adversarial tiles: every data symbol has frequency 1
    for mode in range(4):
        w = adversarial(mode)
        buf = add_encode(ff, f"adversarial_m{mode}", f"255 x 14 bytes whose mode-{mode} symbols "
                         "are 1..255, 14 each, all at frequency 1 against 3841 for 0: about 12 "
                         "bits per data symbol", w, 255, 14, [mode], mode % 2 == 1)
        f = R.check(buf).freq
        assert np.all(f[1:] == 1) and f[0] == 3841, f[:8]
        sym = R.predict(R.tiles_of(w, 255, 14)[0, 0], mode)
        assert np.all(f[sym[:255, :14]] == 1)

    # signedness at lane / warp / column edges
    w = signed_edges()
    w4 = np.concatenate([w, w, w, w], axis=1)
    buf = add_encode(ff, "signed_edges_modes", "-128 and 127 at the first/last lane of every "
                     "warp (lanes 31/32 included) and columns 0, 1, 31, 32, 254, 255; four copies "
                     "under modes auto (picks none), left, up, gradient", w4, 256, 1024,
                     [255, 1, 2, 3], True)
    assert [t["mode"] for t in stats(buf)] == [0, 1, 2, 3]

    # shapes: M, K in {1, 255, 256, 257, 512}, mixed modes and auto
    shapes = [(1, 1, 0), (1, 255, 1), (1, 257, 2), (255, 1, 3), (257, 1, 255), (1, 512, 255),
              (512, 1, 255), (2, 256, 2), (3, 513, 255)]
    for i, (M, K, mode) in enumerate(shapes):
        seed = 611 + i
        w, prov = small_bytes(seed, M, K)
        n = R.ceil_div(M, 256) * R.ceil_div(K, 256)
        modes = [mode] * n if mode != 255 else [255] * n
        add_encode(ff, f"shape_{M}x{K}_s{seed}", f"{M} x {K} low-entropy bytes (int8 in [-8, 7]), "
                   f"{n} tile(s), mode {'auto' if mode == 255 else mode}, padding outside the "
                   "matrix", w, M, K, modes, i % 2 == 0, prov)
    add_encode(ff, "ramp_255x255", "smooth 255 x 255 ramps (one tile, a padding row and column), "
               "mode auto", ramp(255, 255), 255, 255, None, False)
    w = ramp(257, 257)
    buf = add_encode(ff, "ramp_auto_257", "smooth 257 x 257 ramps whose best predictor differs "
                     "per tile: auto picks different modes", w, 257, 257, None, True)
    picked = {t["mode"] for t in stats(buf)}
    assert len(picked) >= 2, picked
    add_encode(ff, "ramp_mixed_257", "the same ramps with fixed per-tile modes gradient, none, "
               "up, left", w, 257, 257, [3, 0, 2, 1], False)
    w, prov = small_bytes(630, 3, 768)
    add_encode(ff, "mixed_modes_3x768_s630", "3 x 768 low-entropy bytes, modes auto, up, none per "
               "tile", w, 3, 768, [255, 2, 0], True, prov)

    # empty containers
    for M, K in ((0, 0), (2, 0), (0, 300)):
        buf = add_encode(ff, f"empty_{M}x{K}", f"M = {M}, K = {K}: no tiles, freq[0] = 4096, "
                         "file_size = 576 + 4M rounded up to 16", np.zeros((M, K), np.uint8), M, K,
                         [], False)
        assert len(buf) == R.round16(576 + 4 * M)


# ---------------------------------------------------------------------------------------------
# gemv.h5
# ---------------------------------------------------------------------------------------------

def random_x(stream: Stream, batch: int, K: int) -> np.ndarray:
    """fp16 activations from bits32 draws d: (d & 0x8FFF) + 0x3000, i.e. |x| in [2^-3, 2)."""
    d = stream.bits32_array(batch * K).astype(np.int64)
    return ((d & 0x8FFF) + 0x3000).astype(np.uint16).reshape(batch, K)


X_TRANSFORM = ("w = the bytes of the first ceil(M*K/4) draws (little-endian); x = (d & 0x8FFF) + "
               "0x3000 as fp16 bits for each further draw d")


def special_x(K: int) -> np.ndarray:
    """fp16 extremes, one batch column each: +-0, subnormals, +-65504, inf, -inf, NaN."""
    k = np.arange(K)
    normal = ((k * 29) % 31 + 0x3400).astype(np.int64) | np.where(k % 2, 0x8000, 0)
    x = np.zeros((8, K), np.int64)
    x[0] = 0x0000
    x[1] = 0x8000
    x[2] = np.where(k % 2, 0x8000, 0) | ((k * 37) % 1023 + 1)
    x[3] = np.where(k % 4 == 0, 0x7BFF, np.where(k % 4 == 1, 0xFBFF, normal))
    x[4] = normal
    x[4, 17] = 0x7C00
    x[5] = normal
    x[5, K - 1] = 0xFC00
    x[6] = normal
    x[6, 3] = 0x7E00
    x[7] = normal
    x[7, 1], x[7, 2] = 0x7C00, 0xFC00
    return x.astype(np.uint16)


def build_gemv(ff: FixtureFile) -> None:
    for i, (M, K, batch) in enumerate([(33, 600, 1), (7, 257, 2), (40, 512, 16), (1, 1, 1),
                                       (257, 3, 16)]):
        seed = 701 + i
        st = Stream(seed)
        nd = -(-M * K // 4)
        d = st.bits32_array(nd).astype(np.int64)
        w = np.stack([(d >> (8 * k)) & 0xFF for k in range(4)], 1).reshape(-1)[:M * K]
        w = w.astype(np.uint8).reshape(M, K)
        x = random_x(st, batch, K)
        prov = {"seed": seed, "distribution": "bits32", "count": nd + batch * K,
                "transform": X_TRANSFORM}
        add_gemv(ff, f"rand_{M}x{K}_b{batch}_s{seed}", f"uniform random int8 weights, {M} x {K} "
                 f"({R.ceil_div(K, 256)} tile column(s), partials summed in order), batch {batch}",
                 w, row_scales(M), x, None, i % 2 == 1, prov)

    # fp16 extremes in x against weights that hold 0, -128 and 127
    K = 300
    w = np.zeros((40, K), np.int64)
    w[:, ::3] = 0x80
    w[:, 1::3] = 0x7F
    w[5] = 0
    w[6] = 0x81
    w = w.astype(np.uint8)
    y32, _ = add_gemv(ff, "x_specials_b8", "x with +0, -0, subnormals, +-65504, +inf, -inf, NaN "
                      "and +inf with -inf, against -128/127/0 weights: exact zeros of both signs, "
                      "f16 overflow, inf*0 = NaN", w, row_scales(40), special_x(K), [1, 3])
    assert _nan(y32)
    K = 256
    w2 = np.zeros((16, K), np.int64)
    w2[:, :] = np.arange(K) % 256
    w2 = w2.astype(np.uint8)
    x = np.tile(special_x(K), (2, 1))
    y32, _ = add_gemv(ff, "x_specials_b16", "the fp16 extremes twice (batch 16) against every "
                      "byte value", w2, row_scales(16), x, [0])
    s = np.array([0x00000000, 0x80000000, 0x00000001, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000,
                  0x3F800000, 0x477FE000, 0x47800000, 0x33800000, 0x337FFFFF, 0xB3C00000],
                 np.uint32)
    w3, prov = random_bytes(720, 12 * 256)
    st = Stream(720, prov["count"])
    x = random_x(st, 2, 256)
    prov["count"] += 2 * 256
    prov["transform"] = X_TRANSFORM
    add_gemv(ff, "scale_specials_s720", "row scales +-0, smallest subnormal, +-FLT_MAX, +inf, 1, "
             "65504 and 65536 (f16 boundary), 2^-24 and around (f16 subnormal rounding)",
             w3.reshape(12, 256), s, x, [0], True, prov)


# ---------------------------------------------------------------------------------------------
# corrupt.h5
# ---------------------------------------------------------------------------------------------

def parse(buf: bytes):
    """(header, [(meta, TileStream)], scales) of a valid container, for rebuilding."""
    h = R.check(buf)
    tiles = []
    for i in range(h.n_tiles):
        m = R.tile_meta(buf, h, i)
        init = np.frombuffer(buf, "<u4", 256, m.data_offset).copy()
        we = np.frombuffer(buf, "<u4", 8, m.data_offset + 1024).copy()
        words = np.frombuffer(buf, "<u2", int(we[-1]), m.data_offset + 1056).copy()
        tiles.append((m, R.TileStream(init, we, words)))
    scales = np.frombuffer(buf, "<u4", h.M, h.scales_offset).copy()
    return h, tiles, scales


def rebuild(buf: bytes, edit) -> bytes:
    """Re-lay a valid container out with the pinned writer after edit(streams) changed streams."""
    h, tiles, scales = parse(buf)
    streams = [t for _, t in tiles]
    edit(streams)
    recs = [R.TileRecord(m.mode, s, m.checksum) for (m, _), s in zip(tiles, streams)]
    return R.write_container(h.M, h.K, h.freq, scales, recs, bool(h.flags & 1))


def patch(buf: bytes, off: int, fmt: str, value) -> bytes:
    b = bytearray(buf)
    struct.pack_into("<" + fmt, b, off, value)
    return bytes(b)


def meta_off(buf: bytes, index: int, field: int = 0) -> int:
    return R.check(buf).meta_offset + 32 * index + field


def payload_off(buf: bytes, index: int) -> int:
    return R.tile_meta(buf, R.check(buf), index).data_offset


def tile_container(tile: np.ndarray, M: int, K: int, mode: int) -> bytes:
    """A one-tile container of an arbitrary 256 x 256 tile (padding too), built with the coder."""
    sym = R.predict(tile, mode)[None]
    freq = R.normalize(R.histogram(sym))
    (ts,) = R.encode_symbols(sym, freq)
    return R.write_container(M, K, freq, row_scales(M), [R.TileRecord(mode, ts, 0)], False)


def build_corrupt(ff: FixtureFile) -> None:
    w, prov = tiny_bytes(801, 33, 257)
    base = R.encode(w, row_scales(33), 33, 257, [3, 0], True)
    hw, hprov = tiny_bytes(802, 1, 257)
    hbase = R.encode(hw, row_scales(1), 1, 257, [0, 1], True)
    hbase0 = R.encode(hw, row_scales(1), 1, 257, [0, 1], False)  # the same without checksums
    R.decode(hbase)
    R.decode(hbase0)
    hn = len(hbase)
    R.decode(base)
    n = len(base)
    same = R.encode(np.zeros((256, 512), np.uint8) + 0x80, row_scales(256), 256, 512, [0, 0],
                    False)
    one = R.encode(np.full((256, 256), 0x80, np.uint8), row_scales(256), 256, 256, [0], False)

    def add(name, error, description, buf, provenance=prov, reseal=True):
        """reseal: recompute the container checksum of an edited checksummed container, so that the
        rule the case is about fires rather than the checksum (which comes first)."""
        if reseal and len(buf) >= R.HEADER_SIZE and R.seal(buf) != buf:
            buf = R.seal(buf)
            description += " (container checksum recomputed after the edit)"
        try:
            R.decode(buf)
        except R.RansError as e:
            assert e.name == error, (name, e)
        else:
            raise AssertionError(f"{name}: accepted")
        g = _case(ff, name, "corrupt", description, provenance, expect="invalid", error=error)
        ff.add_dataset(g, "container", container_array(buf))

    base_note = "the 1 x 257 base container (2 tiles, modes none and left, checksums)"
    hm = None  # handmade provenance

    def hadd(name, error, description, buf, reseal=True):
        add(name, error, description, buf, hprov, reseal)

    # magic
    hadd("magic_rant", "rans_bad_magic", f"magic RANT instead of RANS; {base_note}",
         b"RANT" + hbase[4:], reseal=False)
    hadd("magic_snar", "rans_bad_magic", "magic byte-swapped to SNAR (a writer with the wrong "
         "endianness)", b"SNAR" + hbase[4:], reseal=False)
    hadd("magic_zero", "rans_bad_magic", "magic all zero bytes", bytes(4) + hbase[4:], reseal=False)
    hadd("magic_short_rx", "rans_bad_magic", "a 2-byte file RX: too short, and not the start of "
         "RANS", b"RX", reseal=False)

    # truncated files: every cut is this error, wherever it falls (checked before the checksum)
    for cut, what in ((0, "the empty file"), (2, "RA, the start of the magic"),
                      (40, "inside the header"), (63, "one byte short of the header"),
                      (64, "the header alone"), (575, "one byte short of the table"),
                      (hn - 100, "inside the last payload"), (hn - 1, "the last byte missing")):
        hadd(f"truncated_{cut}", "rans_container_truncated", f"the {hn}-byte {base_note} cut to "
             f"{cut} bytes: {what}", hbase[:cut], reseal=False)
    hadd("truncated_file_size_plus16", "rans_container_truncated", "file_size 16 more than the "
         "length (a file that lost its last 16 bytes looks like this; so does a file_size raised "
         "by damage)", patch(hbase, R.OFF_FILE_SIZE, "Q", hn + 16), reseal=False)

    # the container checksum: one flipped bit, the checksum left as written
    def flip(buf, off, bit):
        b = bytearray(buf)
        b[off] ^= 1 << bit
        return bytes(b)
    h0 = R.check(hbase)
    m1 = R.tile_meta(hbase, h0, 1)
    we1 = np.frombuffer(hbase, "<u4", 8, m1.data_offset + 1024)
    words_end = m1.data_offset + 1056 + 2 * int(we1[-1])
    gap = h0.scales_offset + 4 * h0.M
    assert gap < R.tile_meta(hbase, h0, 0).data_offset and words_end < len(hbase)
    for name, off, bit, what in (
            ("k_bit1", R.OFF_K, 1, "K 257 -> 259, tiles_c unchanged: version 1 decoded it as a "
             "1 x 259 matrix (the new columns are padding, which decodes to 0)"),
            ("m_bit1", R.OFF_M, 1, "M 1 -> 3, tiles_r unchanged (the two new scales would be "
             "read from the zero gap)"),
            ("scale_sign", h0.scales_offset + 3, 7, "the sign bit of scale[0]"),
            ("table_bit", R.TABLE_OFFSET + 2 * 5, 0, "bit 0 of freq[5]"),
            ("meta_offset_bit", h0.meta_offset + 32 + 4, 3, "bit 35 of tile 1's data_offset"),
            ("meta_predictor_bit", h0.meta_offset + 20, 0, "bit 0 of tile 0's predictor"),
            ("gap_bit", gap, 2, "a zero byte of the gap between the scales and the first payload"),
            ("state_bit", m1.data_offset + 4 * 9, 4, "bit 4 of tile 1's init_state[9]"),
            ("word_bit", m1.data_offset + 1056, 0, "bit 0 of tile 1's first word"),
            ("padding_bit", words_end, 6, "a zero padding byte after tile 1's words"),
            ("field_bit", R.OFF_CRC, 0, "bit 0 of the stored CRC-32"),
            ("complement_bit", R.OFF_CRC + 7, 7, "the top bit of the stored complement"),
            ("flags_bit1", R.OFF_FLAGS, 1, "flag bit 1 (unknown flags are checked after the "
             "checksum)")):
        hadd(f"crc_{name}", "rans_container_checksum", f"one flipped bit of the {base_note}: "
             f"{what}", flip(hbase, off, bit), reseal=False)
    hadd("crc_appended_byte", "rans_container_checksum", "one zero byte appended (file_size "
         "unchanged): the checksum covers the whole file and comes before the file_size rule",
         hbase + b"\0", reseal=False)
    hadd("crc_flag_set", "rans_container_checksum", "flag bit 0 set on the same container written "
         "without checksums: bytes 56-63 are zero, not the CRC-32",
         flip(hbase0, R.OFF_FLAGS, 0), reseal=False)
    hadd("header_flag_cleared", "rans_bad_header", "flag bit 0 cleared on the checksummed "
         "container: bytes 56-63 (the CRC-32 and its complement, never both zero) must then be "
         "zero", flip(hbase, R.OFF_FLAGS, 0), reseal=False)

    # header fields, one at a time
    for field, off, fmt, value in (
            ("version", R.OFF_VERSION, "H", 1), ("version", R.OFF_VERSION, "H", 3),
            ("header_size", R.OFF_HEADER_SIZE, "H", 128),
            ("header_size", R.OFF_HEADER_SIZE, "H", 0),
            ("scale_bits", R.OFF_SCALE_BITS, "B", 11), ("scale_bits", R.OFF_SCALE_BITS, "B", 13),
            ("flags", R.OFF_FLAGS, "B", 3), ("flags", R.OFF_FLAGS, "B", 0x81),
            ("lanes_per_tile", R.OFF_LANES, "H", 128), ("tile_rows", R.OFF_TILE_ROWS, "H", 128),
            ("tile_cols", R.OFF_TILE_COLS, "H", 512), ("tiles_r", R.OFF_TILES_R, "I", 2),
            ("tiles_c", R.OFF_TILES_C, "I", 1), ("tiles_c", R.OFF_TILES_C, "I", 3),
            ("file_size", R.OFF_FILE_SIZE, "Q", hn - 16)):
        hadd(f"header_{field}_{value:x}", "rans_bad_header", f"header field {field} = {value:#x} "
             "(the only field changed in the valid 1 x 257 base container)",
             patch(hbase, off, fmt, value))
    for value in (1, 1 << 63):
        hadd(f"header_reserved_{value:x}", "rans_bad_header", f"bytes 56-63 = {value:#x} in the "
             "1 x 257 base container written without checksums (there they must be zero)",
             patch(hbase0, R.OFF_CRC, "Q", value), reseal=False)

    # table
    tb = R.TABLE_OFFSET
    f = np.frombuffer(hbase, "<u2", 256, tb).astype(np.int64)
    s_big = int(np.argmax(f))

    def table(edit):
        g = f.copy()
        edit(g)
        b = bytearray(hbase)
        b[tb:tb + 512] = g.astype("<u2").tobytes()
        return bytes(b)

    hadd("table_sum_4095", "rans_bad_table", "frequency table sums to 4095 (largest entry - 1)",
         table(lambda g: g.__setitem__(s_big, g[s_big] - 1)))
    hadd("table_sum_4097", "rans_bad_table", "frequency table sums to 4097 (largest entry + 1)",
         table(lambda g: g.__setitem__(s_big, g[s_big] + 1)))
    hadd("table_all_zero", "rans_bad_table", "frequency table all zero",
         table(lambda g: g.__setitem__(slice(None), 0)))

    def wrap17(g):
        g[:] = 0
        g[:17] = 4096
    hadd("table_wrap_17x4096", "rans_bad_table", "seventeen entries of 4096: the sum 69632 is 4096 "
         "modulo 2^16 (the sum must be computed in >= 32 bits)", table(wrap17))

    def over(g):
        g[:] = 0
        g[0], g[1] = 65535, 4097
    hadd("table_entry_65535", "rans_bad_table", "entries 65535 and 4097 (both above 4096), whose "
         "sum is 4096 modulo 2^16", table(over))

    # tile metadata
    add("meta_offset_past_end", "rans_bad_tile_meta", "tile 1 data_offset = file_size (aligned, "
        "outside the file)", patch(base, meta_off(base, 1), "Q", n))
    add("meta_offset_overflow", "rans_bad_tile_meta", "tile 0 data_offset = 2^64 - 16: offset + "
        "size overflows 64 bits", patch(base, meta_off(base, 0), "Q", 2**64 - 16))
    add("meta_size_overflow", "rans_bad_tile_meta", "tile 1 data_size = 2^64 - 16: offset + size "
        "overflows 64 bits (the size cannot match warp_end either; both are this error)",
        patch(base, meta_off(base, 1, 8), "Q", 2**64 - 16))
    # misaligned: 8 zero bytes inserted before the last payload, its offset moved with it
    p1 = payload_off(base, 1)
    mis = bytearray(base[:p1] + bytes(8) + base[p1:])
    struct.pack_into("<Q", mis, meta_off(base, 1), p1 + 8)
    struct.pack_into("<Q", mis, R.OFF_FILE_SIZE, n + 8)
    add("meta_misaligned", "rans_bad_tile_meta", "tile 1 payload moved by 8 bytes (data_offset "
        "not a multiple of 16; file_size follows, the payload itself is intact)", bytes(mis))
    # overlap: two identical payloads, the second tile pointed at the first one
    add("meta_overlap", "rans_bad_tile_meta", "two all-0x80 tiles with identical payloads; "
        "tile 1 points at tile 0's payload (its own copy stays unused)",
        patch(same, meta_off(same, 1), "Q", payload_off(same, 0)), hm)
    add("meta_predictor_4", "rans_bad_tile_meta", "tile 1 predictor mode 4 (unknown)",
        patch(base, meta_off(base, 1, 20), "B", 4))
    add("meta_predictor_255", "rans_bad_tile_meta", "tile 0 predictor mode 255 (auto is a request, "
        "never stored)", patch(base, meta_off(base, 0, 20), "B", 255))
    add("meta_reserved_21", "rans_bad_tile_meta", "tile 0 reserved byte 21 = 1",
        patch(base, meta_off(base, 0, 21), "B", 1))
    add("meta_reserved_31", "rans_bad_tile_meta", "tile 1 reserved byte 31 = 0x80",
        patch(base, meta_off(base, 1, 31), "B", 0x80))
    we0 = np.frombuffer(base, "<u4", 8, payload_off(base, 0) + 1024)
    assert we0[1] > 0 and we0[7] > we0[1]
    add("warp_end_decreasing", "rans_bad_tile_meta", f"tile 0 warp_end[0] = warp_end[1] + 1 "
        f"({int(we0[1]) + 1} > {int(we0[1])}); warp_end[7] and data_size unchanged",
        patch(base, payload_off(base, 0) + 1024, "I", int(we0[1]) + 1))
    add("warp_end_vs_size", "rans_bad_tile_meta", "tile 0 warp_end[7] 8 words larger than "
        "data_size allows (still non-decreasing)",
        patch(base, payload_off(base, 0) + 1024 + 28, "I", int(we0[7]) + 8))
    big = bytearray(base + bytes(16))
    struct.pack_into("<Q", big, R.OFF_FILE_SIZE, n + 16)
    struct.pack_into("<Q", big, meta_off(base, 1, 8), R.tile_meta(base, R.check(base), 1).data_size
                     + 16)
    add("data_size_plus16", "rans_bad_tile_meta", "tile 1 (last) data_size 16 bytes larger than "
        "1056 + 2 * warp_end[7] rounded up, with the file grown by 16 zero bytes to hold it",
        bytes(big))
    small = patch(same, meta_off(same, 1, 8), "Q", 1040)
    add("data_size_1040", "rans_bad_tile_meta", "tile 1 data_size 1040, below the 1056 fixed part "
        "(all-0x80 tiles)", small, hm)

    # init states
    for lane, value in ((0, R.L - 1), (255, 2**31), (37, 0xFFFFFFFF), (100, 0)):
        add(f"state_{value:x}_lane{lane}", "rans_bad_state", f"tile 1 lane {lane} init state "
            f"{value:#x}, outside [2^15, 2^31)", patch(base, payload_off(base, 1) + 4 * lane, "I",
                                                      value))

    # decode-time errors
    def drop_last_word(streams):
        ts = streams[0]
        we = ts.warp_end.astype(np.int64)
        w = int(np.argmax(we == we[-1]))  # the first warp whose stream reaches the end
        assert we[w] > (we[w - 1] if w else 0)
        ts.words = np.delete(ts.words, we[w] - 1)
        ts.warp_end = np.where(np.arange(8) >= w, we - 1, we).astype(np.uint32)
    add("truncated_word", "rans_truncated", "tile 0 loses the last word of its last non-empty warp "
        "stream (the word decoded last); warp_end and data_size follow, layout re-pinned",
        rebuild(base, drop_last_word))

    def drop_first_warp_word(streams):
        ts = streams[0]
        we = ts.warp_end.astype(np.int64)
        assert we[0] > 0
        ts.words = np.delete(ts.words, we[0] - 1)
        ts.warp_end = (we - 1).astype(np.uint32)
    add("truncated_warp0", "rans_truncated", "tile 0 warp 0 loses its last word; the other warps "
        "keep theirs", rebuild(base, drop_first_warp_word))

    def add_word(streams):
        ts = streams[1]
        we = ts.warp_end.astype(np.int64)
        ts.words = np.insert(ts.words, we[0], 0x1234)
        ts.warp_end = (we + 1).astype(np.uint32)
    add("trailing_word", "rans_trailing_data", "tile 1 warp 0 has one extra word after the words "
        "it decodes (0x1234); warp_end and data_size follow", rebuild(base, add_word))

    def add_words_last(streams):
        ts = streams[0]
        we = ts.warp_end.astype(np.int64)
        ts.words = np.concatenate([ts.words, np.array([0, 0, 0], np.uint16)])
        we[7] += 3
        ts.warp_end = we.astype(np.uint32)
    add("trailing_warp7", "rans_trailing_data", "tile 0 warp 7 has three extra zero words",
        rebuild(base, add_words_last))

    st = payload_off(one, 0) + 4 * 5
    add("final_state", "rans_corrupt", "one all-0x80 tile (one-symbol table: states never change, "
        "no words): lane 5 starts at 2^15 + 1 and so ends there, not at 2^15",
        patch(one, st, "I", R.L + 1), hm)
    t = np.zeros((256, 256), np.uint8)
    t[:255, :255] = 0x11
    t[255, 255] = 0x22
    add("outside_corner", "rans_corrupt", "255 x 255 matrix whose tile holds 0x22 at (255, 255), "
        "outside the matrix (mode none, no checksums); the streams are otherwise valid",
        tile_container(t, 255, 255, 0), hm)
    t = np.zeros((256, 256), np.uint8)
    t[0, :3] = [1, 2, 3]
    t[0, 3] = 4
    add("outside_column", "rans_corrupt", "1 x 3 matrix whose tile holds 4 at (0, 3), one column "
        "past the matrix (mode left)", tile_container(t, 1, 3, 1), hm)
    t = np.zeros((256, 256), np.uint8)
    t[:2, :2] = 0x7F
    t[40, 1] = 0x80
    add("outside_row", "rans_corrupt", "2 x 256 matrix whose tile holds 0x80 at row 40 (mode "
        "up)", tile_container(t, 2, 256, 2), hm)

    ck = meta_off(base, 1, 16)
    add("checksum_off_by_one", "rans_checksum", "tile 1 checksum field + 1; payload intact",
        patch(base, ck, "I", (struct.unpack_from("<I", base, ck)[0] + 1) & 0xFFFFFFFF))
    w2 = w.copy()
    w2[20, 100] ^= 1
    other = R.encode(w2, row_scales(33), 33, 257, [3, 0], True)
    swapped = patch(other, meta_off(other, 0, 16), "I",
                    struct.unpack_from("<I", base, meta_off(base, 0, 16))[0])
    add("checksum_other_tile", "rans_checksum", "tile 0 decodes cleanly to a tile one bit away "
        "(w[20][100] ^ 1) but carries the original tile's Adler-32", swapped)


FAMILIES = [("normalize", build_normalize), ("encode", build_encode), ("gemv", build_gemv),
            ("corrupt", build_corrupt)]
