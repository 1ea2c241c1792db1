"""Families of the K-quant formats: golden/<type>/<family>.h5 for type in q4_k, q5_k, q6_k, q8_k.

Files and the case attribute `path` (the schema of the case):
  dequant.h5   path dequant   blocks -> expected_f32 (float32 bits) and expected_f16 (one RNE rounding)
  quantize.h5  path quantize  x (float32 bits) -> expected_blocks (the reference quantizer)
  dot.h5       path dot_q8k   one weight row and one Q8_K row -> per-block S, M; ystar, sum_abs
  gemv.h5      path gemv      blocks [rows], x fp16 [batch, cols] -> ystar, sum_abs [batch, rows]
  invalid.h5   expect = invalid, error = the name the reference must return
dot.h5 exists for the weight formats q4_k, q5_k, q6_k only (the dot's activations are Q8_K);
gemv.h5 exists for all four (reference/spec/kquants.md defines the GEMV for every type).

Random inputs come from the pinned stream (rng.md). Where a case uses more than one kind of draw
(weights, then activations), they come from one stream in that order and `count` is the total.
Heavy-tailed data applies one float32 transform to `uniform` draws, recorded in the attribute
`transform`. Cases whose expected outputs hold a NaN carry `nan_sign = "any"`: NaNs produced by
arithmetic have no portable sign or payload (kquants.py), so any NaN is a match.

Every builder checks at generation time that the edge it claims is really in its data (stale
codes under sc = 0, scale -128, negative Q8_K d, first-wins ties, every code value...).
"""

from __future__ import annotations

import numpy as np

from . import fp16
from . import kquants as kq
from .rng import Stream
from .schema import FixtureFile

FORMAT_VERSION = 1
F32 = np.float32
HEAVY_C = F32(1.0009765625)  # 1 + 2^-10
HEAVY_TRANSFORM = "x = RN32(u / RN32(1.0009765625 - |u|)), u the uniform draws"

# fp16 specials for d / dmin: zeros, subnormals, normals, max finite, inf, NaNs (quiet, signalling)
F16_SPECIALS = [0x0000, 0x8000, 0x0001, 0x03FF, 0x8001, 0x0400, 0x3C00, 0x7BFF, 0xFBFF,
                0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x7FFF]
# float32 specials for the Q8_K d
F32_SPECIALS = [0x00000000, 0x80000000, 0x00000001, 0x007FFFFF, 0x80000001, 0x00800000,
                0x3F800000, 0xBF800000, 0x3B000000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000,
                0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001]


def _f16(v: float) -> int:
    return int(kq._f16_bits(np.array([v], F32))[0])


D_NORMAL = _f16(0.0123)
DMIN_NORMAL = _f16(0.0456)


def _nmax(t: str) -> int:
    return {"q4_k": 15, "q5_k": 31, "q6_k": 63}[t]


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------

class Draws:
    """One stream, drawn in order; `attrs()` describes what was drawn for the case attributes."""

    def __init__(self, seed: int, a: float = -1.0, b: float = 1.0, heavy: bool = False):
        self.seed, self.a, self.b, self.heavy = seed, a, b, heavy
        self.stream = Stream(seed)
        self.count = 0

    def values(self, n: int) -> np.ndarray:
        u = self.stream.uniform_array(self.a, self.b, n)
        self.count += n
        if self.heavy:
            u = u / (HEAVY_C - np.abs(u))
            assert u.dtype == F32
        return u

    def attrs(self) -> dict:
        out = {"seed": self.seed, "distribution": "uniform", "count": self.count,
               "a": F32(self.a), "b": F32(self.b)}
        if self.heavy:
            out["transform"] = HEAVY_TRANSFORM
        return out


def random_bytes(seed: int, nbytes: int) -> tuple[np.ndarray, dict]:
    """nbytes bytes: the little-endian bytes of ceil(nbytes/4) bits32 draws, in order."""
    draws = -(-nbytes // 4)
    w = Stream(seed).bits32_array(draws).astype(np.int64)
    b = np.stack([(w >> (8 * k)) & 0xFF for k in range(4)], axis=1).reshape(-1)[:nbytes]
    return b.astype(np.uint8), {"seed": seed, "distribution": "bits32", "count": draws}


def _x16(values: np.ndarray) -> np.ndarray:
    return kq._f16_bits(values)


def _has_nan(*arrays) -> bool:
    for a in arrays:
        a = np.asarray(a)
        if a.dtype == np.uint32 and fp16.f32_is_nan(a).any():
            return True
        if a.dtype == np.float64 and np.isnan(a).any():
            return True
    return False


# ---------------------------------------------------------------------------------------------
# Hand-built blocks
# ---------------------------------------------------------------------------------------------

def k4_block(t: str, d: int, dmin: int, sc, m, q) -> np.ndarray:
    return kq.pack(t, {"d": [d], "dmin": [dmin], "sc": [sc], "m": [m], "q": [q]})[0]


def q6_block(d: int, scales, q) -> np.ndarray:
    return kq.pack("q6_k", {"d": [d], "scales": [scales], "q": [q]})[0]


def q8_block(d_bits: int, qs) -> np.ndarray:
    qs = np.asarray(qs, np.int64)
    return kq.pack("q8_k", {"d": [d_bits], "qs": [qs],
                            "bsums": [qs.reshape(16, 16).sum(axis=1)]})[0]


def code_pattern(t: str, shift: int = 0) -> np.ndarray:
    """256 codes cycling through every value of the format, offset by `shift`."""
    n = _nmax(t) + 1 if t != "q8_k" else 256
    return (np.arange(QK) * 7 + shift) % n


QK = kq.QK_K
SC_MIX = [0, 1, 2, 63, 31, 17, 45, 8]
M_MIX = [0, 63, 5, 1, 32, 0, 9, 60]
Q6_SC_MIX = [0, -128, 127, -1, 1, 64, -64, 5, -7, 100, -100, 33, 0, -128, 2, 127]


def special_block(t: str, d: int, dmin: int, shift: int) -> np.ndarray:
    """A block with the given d (and dmin) whose scales include 0 and the extremes and whose codes
    include 0 and the largest code, so inf and NaN in d/dmin meet zeros (inf * 0 = NaN)."""
    if t in ("q4_k", "q5_k"):
        return k4_block(t, d, dmin, np.roll(SC_MIX, shift), np.roll(M_MIX, shift),
                        code_pattern(t, shift))
    if t == "q6_k":
        return q6_block(d, np.roll(Q6_SC_MIX, shift), code_pattern(t, shift))
    return q8_block(d, code_pattern(t, shift) - 128)


def every_code_blocks(t: str) -> np.ndarray:
    """Blocks that hold every code value and every scale (and min) value of the format."""
    if t in ("q4_k", "q5_k"):
        out = []
        for r in range(8):
            sc = 8 * r + np.arange(8)
            out.append(k4_block(t, D_NORMAL, DMIN_NORMAL, sc, 63 - sc,
                                np.arange(QK) % (_nmax(t) + 1)))
        return np.stack(out)
    if t == "q6_k":
        return np.stack([q6_block(D_NORMAL, -128 + 16 * r + np.arange(16), np.arange(QK) % 64)
                         for r in range(16)])
    d = kq._f32(0.03125).reshape(1).view(np.uint32)[0]
    return np.stack([q8_block(int(d), np.arange(QK) - 128),
                     q8_block(int(d) | 0x80000000, (np.arange(QK) * 37) % 256 - 128)])


def stale_blocks(t: str) -> np.ndarray:
    """Sub-blocks with scale 0 whose codes are not 0 (they dequantize to -Dm*m, or to 0)."""
    if t in ("q4_k", "q5_k"):
        top = _nmax(t)
        return np.stack([
            k4_block(t, D_NORMAL, DMIN_NORMAL, [0, 0, 5, 0, 63, 0, 1, 0], [7, 0, 3, 63, 0, 12, 0, 1],
                     code_pattern(t, 3)),
            k4_block(t, D_NORMAL, DMIN_NORMAL, [0] * 8, [0, 1, 2, 3, 60, 61, 62, 63],
                     np.full(QK, top)),
            # d = 0 with non-zero scales: every sub-block collapses to -Dm*m
            k4_block(t, 0x0000, DMIN_NORMAL, [63, 1, 2, 3, 4, 5, 6, 7], M_MIX, code_pattern(t, 1)),
        ])
    if t == "q6_k":
        sc = [0, 5, 0, -128, 0, 0, 127, 0, 0, 1, 0, -1, 0, 0, 0, 9]
        return np.stack([q6_block(D_NORMAL, sc, code_pattern(t, 3)),
                         q6_block(D_NORMAL, [0] * 16, np.full(QK, 63)),
                         q6_block(0x0000, Q6_SC_MIX, code_pattern(t, 1))])
    # Q8_K has no sub-block scales; d = +-0 over non-zero quants is its analogue.
    return np.stack([q8_block(0x00000000, code_pattern(t, 5) - 128),
                     q8_block(0x80000000, code_pattern(t, 9) - 128)])


def constant_blocks(t: str) -> np.ndarray:
    """Blocks whose 256 outputs are all equal (one code, one scale everywhere)."""
    if t in ("q4_k", "q5_k"):
        return np.stack([k4_block(t, D_NORMAL, DMIN_NORMAL, [9] * 8, [4] * 8, np.full(QK, 5)),
                         k4_block(t, D_NORMAL, DMIN_NORMAL, [63] * 8, [63] * 8,
                                  np.full(QK, _nmax(t)))])
    if t == "q6_k":
        return np.stack([q6_block(D_NORMAL, [-3] * 16, np.full(QK, 40)),
                         q6_block(D_NORMAL, [-128] * 16, np.full(QK, 0))])
    return np.stack([q8_block(0x3F000000, np.full(QK, -7)), q8_block(0xBE000000, np.full(QK, 127))])


def d_special_blocks(t: str, which: str) -> np.ndarray:
    """One block per special value of d (which = 'd') or of dmin (which = 'dmin'), or pairs of
    specials in both (which = 'both')."""
    if t == "q8_k":
        vals = F32_SPECIALS if which == "d" else []
        return np.stack([special_block(t, v, 0, i) for i, v in enumerate(vals)])
    if which == "d":
        return np.stack([special_block(t, v, DMIN_NORMAL, i) for i, v in enumerate(F16_SPECIALS)])
    if which == "dmin":
        return np.stack([special_block(t, D_NORMAL, v, i) for i, v in enumerate(F16_SPECIALS)])
    pairs = [(0x7C00, 0x7C00), (0x7C00, 0xFC00), (0x7E00, 0x7C00), (0x7C00, 0xFE01),
             (0xFE00, 0x7E00), (0x0001, 0x7BFF), (0x7BFF, 0x7BFF), (0x0000, 0x7C00), (0x8000, 0x8000)]
    return np.stack([special_block(t, a, b, i) for i, (a, b) in enumerate(pairs)])


# ---------------------------------------------------------------------------------------------
# Generation-time checks of claimed edges
# ---------------------------------------------------------------------------------------------

def stale_subblocks(t: str, blocks: np.ndarray) -> int:
    """Number of sub-blocks whose effective scale D*sc is 0 while their codes are not all the same
    (codes the quantizer left from its first pass)."""
    f = kq.unpack(t, blocks)
    if t in ("q4_k", "q5_k"):
        dd = kq._f16_values(f["d"])[:, None] * f["sc"].astype(F32)
        q = f["q"].reshape(-1, 8, 32)
    else:
        dd = kq._f16_values(f["d"])[:, None] * f["scales"].astype(F32)
        q = f["q"].reshape(-1, 16, 16)
    varied = q.max(axis=2) != q.min(axis=2)
    return int(np.count_nonzero((dd == 0) & varied))


def q8_d_signs(blocks: np.ndarray) -> np.ndarray:
    return np.sign(kq.q8k_values(blocks)[0])


# ---------------------------------------------------------------------------------------------
# Writers
# ---------------------------------------------------------------------------------------------

def _common(ff: FixtureFile, name: str, path: str, description: str, provenance: dict | None,
            nan: bool = False, **attrs):
    prov = dict(provenance or {})
    if nan:
        attrs["nan_sign"] = "any"
    return ff.add_case(name, format_version=FORMAT_VERSION, path=path, description=description,
                       **prov, **attrs)


def add_dequant(ff: FixtureFile, name: str, description: str, blocks: np.ndarray, rows: int,
                cols: int, provenance: dict | None = None) -> np.ndarray:
    t = ff.format
    blocks = np.asarray(blocks, np.uint8).reshape(rows, -1)
    y = kq.dequantize(t, blocks, rows, cols)
    y16 = fp16.f32_to_f16(y.reshape(-1)).reshape(rows, cols)
    g = _common(ff, name, "dequant", description, provenance, nan=_has_nan(y), rows=rows,
                cols=cols)
    ff.add_dataset(g, "blocks", blocks)
    ff.add_dataset(g, "expected_f32", y, bit_dtype="float32")
    ff.add_dataset(g, "expected_f16", y16, bit_dtype="float16")
    return y


def add_quantize(ff: FixtureFile, name: str, description: str, x: np.ndarray,
                 provenance: dict | None = None) -> np.ndarray:
    t = ff.format
    x = np.ascontiguousarray(x, F32)
    rows, cols = x.shape
    blocks = np.frombuffer(kq.quantize(t, x, rows, cols), np.uint8).reshape(rows, -1)
    g = _common(ff, name, "quantize", description, provenance, rows=rows, cols=cols)
    ff.add_dataset(g, "x", x.view(np.uint32), bit_dtype="float32")
    ff.add_dataset(g, "expected_blocks", blocks)
    return blocks


def add_dot(ff: FixtureFile, name: str, description: str, blocks: np.ndarray,
            activations: np.ndarray, provenance: dict | None = None) -> tuple:
    t = ff.format
    blocks = np.asarray(blocks, np.uint8).reshape(-1)
    cols = activations.size
    q8k = np.frombuffer(kq.quantize("q8_k", activations, 1, cols), np.uint8)
    S, M = kq.dot_integers(t, blocks, q8k, cols)
    ystar, sabs = kq.dot_reference(t, blocks, q8k, cols)
    g = _common(ff, name, "dot_q8k", description, provenance, nan=bool(np.isnan(ystar)), cols=cols)
    ff.add_dataset(g, "blocks", blocks)
    ff.add_dataset(g, "q8k", q8k)
    ff.add_dataset(g, "expected_S", S)
    ff.add_dataset(g, "expected_M", M)
    ff.add_dataset(g, "ystar", np.array([ystar], np.float64))
    ff.add_dataset(g, "sum_abs", np.array([sabs], np.float64))
    return q8k, S, M


def add_gemv(ff: FixtureFile, name: str, description: str, blocks: np.ndarray, rows: int,
             cols: int, x16: np.ndarray, provenance: dict | None = None) -> tuple:
    t = ff.format
    blocks = np.asarray(blocks, np.uint8).reshape(rows, -1)
    x16 = np.asarray(x16, np.uint16)
    ystar, sabs = kq.gemv_reference(t, blocks, rows, cols, x16)
    g = _common(ff, name, "gemv", description, provenance, nan=_has_nan(ystar, sabs), rows=rows,
                cols=cols, batch=x16.shape[0])
    ff.add_dataset(g, "blocks", blocks)
    ff.add_dataset(g, "x", x16, bit_dtype="float16")
    ff.add_dataset(g, "ystar", ystar)
    ff.add_dataset(g, "sum_abs", sabs)
    return ystar, sabs


def quantized_rows(t: str, x: np.ndarray) -> np.ndarray:
    rows, cols = x.shape
    return np.frombuffer(kq.quantize(t, x, rows, cols), np.uint8).reshape(rows, -1)


# ---------------------------------------------------------------------------------------------
# dequant.h5
# ---------------------------------------------------------------------------------------------

def build_dequant(ff: FixtureFile) -> None:
    t = ff.format
    bb = kq.BLOCK_BYTES[t]

    add_dequant(ff, "zero_block", "one all-zero block: every output +0", np.zeros(bb, np.uint8),
                1, 256)
    add_dequant(ff, "constant_blocks", "two blocks with one code and one scale everywhere: "
                "constant outputs", constant_blocks(t), 2, 256)

    ev = every_code_blocks(t)
    what = {"q4_k": "every 4-bit code in every sub-block, every 6-bit scale and min value",
            "q5_k": "every 5-bit code in every sub-block, every 6-bit scale and min value",
            "q6_k": "every 6-bit code, every int8 scale -128..127",
            "q8_k": "every int8 quant -128..127, d positive and negative"}[t]
    add_dequant(ff, "every_code", what, ev, ev.shape[0], 256)
    f = kq.unpack(t, ev)
    if t in ("q4_k", "q5_k"):
        assert set(f["q"].reshape(-1).tolist()) == set(range(_nmax(t) + 1))
        assert set(f["sc"].reshape(-1).tolist()) == set(range(64)) == set(f["m"].reshape(-1).tolist())
    elif t == "q6_k":
        assert set(f["q"].reshape(-1).tolist()) == set(range(64))
        assert set(f["scales"].reshape(-1).tolist()) == set(range(-128, 128))
    else:
        assert set(f["qs"].reshape(-1).tolist()) == set(range(-128, 128))

    st = stale_blocks(t)
    add_dequant(ff, "stale_codes", "sub-blocks with scale 0 (or d = 0) over non-zero codes: the "
                "codes must not leak into the output" if t != "q8_k" else
                "d = +0 and -0 over non-zero quants", st, st.shape[0], 256)
    if t != "q8_k":
        assert stale_subblocks(t, st) >= 8

    ds = d_special_blocks(t, "d")
    y = add_dequant(ff, "d_specials", "d = +-0, fp16 subnormals, smallest normal, 1, +-max finite, "
                    "+-inf, quiet/signalling NaNs over codes and scales with zeros (IEEE: inf*0 "
                    "= NaN)" if t != "q8_k" else "float32 d = +-0, subnormals, +-1, +-FLT_MAX "
                    "(d*127 overflows), +-inf, NaNs over every quant (inf*0 = NaN)",
                    ds, ds.shape[0], 256)
    assert fp16.f32_is_nan(y).any() and ((y & 0x7FFFFFFF) == 0x7F800000).any()
    if t != "q8_k":
        add_dequant(ff, "dmin_specials", "dmin = every special of d_specials with a normal d",
                    d_special_blocks(t, "dmin"), len(F16_SPECIALS), 256)
        add_dequant(ff, "both_specials", "specials in d and dmin at once: inf - inf, NaN against "
                    "inf, subnormal against max finite", d_special_blocks(t, "both"), 9, 256)

    for seed, rows, cols in ((11, 3, 768), (12, 17, 256), (13, 1, 14336)):
        b, prov = random_bytes(seed, rows * cols // 256 * bb)
        add_dequant(ff, f"random_bytes_s{seed}", f"random bytes as {rows} x {cols} blocks: "
                    "decoding is total (any d, any scale, any code)", b, rows, cols, prov)

    dr = Draws(21)
    x = dr.values(7 * 256).reshape(7, 256)
    add_dequant(ff, "quantized_smooth_s21", "blocks the reference quantizer makes from uniform "
                "[-1, 1) values, 7 x 256", quantized_rows(t, x), 7, 256, dr.attrs())
    dr = Draws(22, heavy=True)
    x = dr.values(2 * 768).reshape(2, 768)
    add_dequant(ff, "quantized_heavy_s22", "blocks the reference quantizer makes from "
                "heavy-tailed values, 2 x 768", quantized_rows(t, x), 2, 768, dr.attrs())
    dr = Draws(23)
    x = dr.values(8 * 256).reshape(8, 256)
    add_dequant(ff, "quantized_smooth_s23", "quantized uniform values, 8 x 256", quantized_rows(t, x),
                8, 256, dr.attrs())
    dr = Draws(24, a=-4.0, b=4.0)
    x = dr.values(9 * 256).reshape(9, 256)
    add_dequant(ff, "quantized_smooth_s24", "quantized uniform [-4, 4) values, 9 x 256",
                quantized_rows(t, x), 9, 256, dr.attrs())


# ---------------------------------------------------------------------------------------------
# quantize.h5
# ---------------------------------------------------------------------------------------------

def stale_input() -> np.ndarray:
    """2 x 256 handmade: sub-blocks of 16 whose magnitudes differ by up to 2^-12, so the small
    ones get scale 0 against the largest (Q4_K/Q5_K: below 1/126 of it, Q6_K: below 1/256)."""
    i = np.arange(512)
    base = (((i * 37) % 61) - 30).astype(F32) / F32(32.0)
    expo = np.array([0, -9, -12, -3, -10, 0, -11, -8, -12, -2, -9, -10, 0, -12, -7, -11] * 2)
    return (base * (F32(2.0) ** expo.repeat(16).astype(F32))).reshape(2, 256)


def ties_input() -> np.ndarray:
    """1 x 768 handmade: +2 before -2 (block 0), -2 before +2 (block 1), and block 2 led by 127
    with halves elsewhere, so that Q8_K's iscale is exactly -1 and 0.5-ties meet nearest_int."""
    x = np.zeros((3, 256), F32)
    base = ((np.arange(256) % 9) - 4).astype(F32) / F32(4.0)
    x[0] = base
    x[0, 3], x[0, 10] = 2.0, -2.0
    x[1] = base
    x[1, 3], x[1, 10] = -2.0, 2.0
    x[2] = (((np.arange(256) * 5) % 21) - 10).astype(F32) + F32(0.5)
    x[2, 0] = 127.0
    x[2, 200] = -127.0
    return x.reshape(1, 768)


def build_quantize(ff: FixtureFile) -> None:
    t = ff.format
    add_quantize(ff, "zero", "an all-zero super-block", np.zeros((1, 256), F32))
    add_quantize(ff, "constant", "constant super-blocks: 0.75 and -2.5",
                 np.stack([np.full(256, 0.75, F32), np.full(256, -2.5, F32)]))
    g = ((np.arange(256) // 16) - 7.5).astype(F32) * F32(0.25)
    add_quantize(ff, "constant_groups", "every group of 16 constant, groups differ (flat "
                 "sub-blocks of 16 and 32)", g.reshape(1, 256))
    outl = (((np.arange(256) * 13) % 17) - 8).astype(F32) / F32(64.0)
    outl[77] = 50.0
    add_quantize(ff, "outlier", "small values with one outlier of 50", outl.reshape(1, 256))

    b = add_quantize(ff, "stale_scales", "sub-blocks 2^-7..2^-12 smaller than the largest: "
                     "scale 0 keeps the first-pass codes", stale_input())
    if t != "q8_k":
        assert stale_subblocks(t, b) > 0, f"{t}: no stale sub-block in stale_scales"

    b = add_quantize(ff, "ties", "+-max ties in one block (the first wins: d < 0, then d > 0), "
                     "and a block led by 127 whose halves are exact nearest_int ties", ties_input())
    if t == "q8_k":
        assert q8_d_signs(b).tolist() == [-1, 1, -1], q8_d_signs(b)
        qs = kq.unpack(t, b)["qs"][2]
        # iscale = -1 exactly: each k + 0.5 goes to the even neighbour of -(k + 0.5)
        x2 = ties_input().reshape(3, 256)[2]
        want = -np.rint(x2.astype(np.float64)).astype(np.int64)
        assert np.array_equal(qs, want)
    if t == "q6_k":
        assert (kq.unpack(t, b)["scales"] == -128).any()

    seen = {"neg128": False, "dneg": False, "dpos": False}
    quant_cases = [
        ("smooth_s101", Draws(101), (3, 768), "uniform [-1, 1) values"),
        ("smooth_s102", Draws(102, a=0.5, b=2.0), (2, 256),
         "uniform [0.5, 2): all positive, the fitted min is clamped to 0"),
        ("smooth_s103", Draws(103, a=-3.0, b=-1.0), (1, 256), "uniform [-3, -1): all negative"),
        ("smooth_s104", Draws(104), (1, 14336), "uniform [-1, 1), one 14336-wide row"),
        ("smooth_s105", Draws(105, a=-100.0, b=100.0), (7, 256), "uniform [-100, 100)"),
        ("heavy_s111", Draws(111, heavy=True), (9, 256), "heavy-tailed values (|x| up to 1024)"),
        ("heavy_s112", Draws(112, heavy=True), (2, 768), "heavy-tailed values"),
        ("heavy_s113", Draws(113, heavy=True), (8, 256), "heavy-tailed values"),
    ]
    for name, dr, (rows, cols), what in quant_cases:
        x = dr.values(rows * cols).reshape(rows, cols)
        b = add_quantize(ff, name, f"{what}, {rows} x {cols}", x, dr.attrs())
        if t == "q6_k":
            seen["neg128"] |= bool((kq.unpack(t, b)["scales"] == -128).any())
        if t == "q8_k":
            s = q8_d_signs(b)
            seen["dneg"] |= bool((s < 0).any())
            seen["dpos"] |= bool((s > 0).any())
    if t == "q6_k":
        assert seen["neg128"]
    if t == "q8_k":
        assert seen["dneg"] and seen["dpos"]

    dr = Draws(121)
    u = dr.values(2 * 256).reshape(2, 256)
    prov = dr.attrs()
    prov["transform"] = "x = u * 2^-30"
    b = add_quantize(ff, "tiny_s121", "uniform values times 2^-30: d (and dmin) underflow to fp16 "
                     "+-0, so every sub-block keeps its first-pass codes", u * F32(2.0**-30), prov)
    if t in ("q4_k", "q5_k", "q6_k"):
        f = kq.unpack(t, b)
        assert np.all((f["d"] & 0x7FFF) == 0) and stale_subblocks(t, b) > 0  # d may be -0
    expo = {"q4_k": 23, "q5_k": 23, "q6_k": 29, "q8_k": 100}[t]
    dr = Draws(123)
    u = dr.values(2 * 256).reshape(2, 256)
    prov = dr.attrs()
    prov["transform"] = f"x = u * 2^{expo}"
    what = {"q4_k": "dmin overflows fp16 to inf (requantization sees (x + inf)/d)",
            "q5_k": "dmin overflows fp16 to inf (requantization sees (x + inf)/d)",
            "q6_k": "d overflows fp16 to -inf (requantization sees x/inf)",
            "q8_k": "large finite values: d near 2^93"}[t]
    b = add_quantize(ff, "huge_s123", f"uniform values times 2^{expo}: {what}",
                     u * F32(2.0**expo), prov)
    f = kq.unpack(t, b)
    if t in ("q4_k", "q5_k"):
        assert np.all(f["dmin"] == 0x7C00) and not np.any(f["d"] & 0x7FFF == 0x7C00)
    if t == "q6_k":
        assert np.all((f["d"] & 0x7FFF) == 0x7C00)

    dr = Draws(122)
    u = dr.values(2 * 256).reshape(2, 256)
    prov = dr.attrs()
    prov["transform"] = "x = u * 2^-8"
    b = add_quantize(ff, "small_s122", "uniform values times 2^-8: d is an fp16 subnormal",
                     u * F32(2.0**-8), prov)
    if t in ("q4_k", "q5_k", "q6_k"):
        d = kq.unpack(t, b)["d"] & 0x7FFF
        assert np.all((d > 0) & (d < 0x0400)), d


# ---------------------------------------------------------------------------------------------
# dot.h5 (weight formats)
# ---------------------------------------------------------------------------------------------

def edge_weight_row(t: str) -> np.ndarray:
    """3 blocks: every code (with scale -128 for Q6_K), stale codes under scale 0, extremes."""
    ev = every_code_blocks(t)
    st = stale_blocks(t)
    if t in ("q4_k", "q5_k"):
        ext = k4_block(t, D_NORMAL, DMIN_NORMAL, [63] * 8, [63] * 8, np.full(QK, _nmax(t)))
    else:
        ext = q6_block(D_NORMAL, [-128] * 16, np.zeros(QK, np.int64))  # q - 32 = -32 everywhere
    return np.stack([ev[0], st[0], ext])


def edge_activations() -> np.ndarray:
    """768 handmade activations: +max before -max, -max before +max, all zero."""
    x = np.zeros((3, 256), F32)
    base = (((np.arange(256) * 11) % 23) - 11).astype(F32) / F32(8.0)
    x[0] = base
    x[0, 5], x[0, 200] = 3.0, -3.0
    x[1] = -base
    x[1, 9], x[1, 100] = -3.0, 3.0
    return x.reshape(-1)


def build_dot(ff: FixtureFile) -> None:
    t = ff.format
    for seed, cols, heavy in ((201, 256, False), (202, 768, False), (203, 14336, False),
                              (204, 768, True), (205, 256, True)):
        dr = Draws(seed, heavy=heavy)
        w = dr.values(cols).reshape(1, cols)
        a = dr.values(cols)
        what = "heavy-tailed" if heavy else "uniform [-1, 1)"
        add_dot(ff, f"{'heavy' if heavy else 'rand'}_c{cols}_s{seed}",
                f"{what} weights (quantized) and activations (Q8_K), {cols} wide",
                quantized_rows(t, w), a, dr.attrs())

    q8k, S, M = add_dot(ff, "edges", "every code, stale codes under scale 0"
                        + (", scale -128" if t == "q6_k" else "") + " and extreme codes against "
                        "Q8_K blocks with +max first (d < 0), -max first (d > 0) and all zero "
                        "(d = 0)", edge_weight_row(t), edge_activations())
    assert q8_d_signs(q8k).tolist() == [-1, 1, 0]
    if t == "q6_k":
        assert not M.any()

    ext_w = np.stack([edge_weight_row(t)[2]] * 2)
    ext_a = np.concatenate([np.full(256, 0.5, F32), np.full(256, -0.5, F32)])
    q8k, S, M = add_dot(ff, "extreme_integers", "largest codes and scales against quants of "
                        "+-127: the largest |S| and |M| the format can produce", ext_w, ext_a)
    f = kq.unpack("q8_k", q8k)
    assert np.all(np.abs(f["qs"]) == 127)


# ---------------------------------------------------------------------------------------------
# gemv.h5 (weight formats)
# ---------------------------------------------------------------------------------------------

GEMV_SHAPES = [(1, 256, 1), (2, 768, 2), (3, 256, 3), (7, 768, 4), (8, 256, 5), (9, 256, 6),
               (17, 256, 7), (8, 768, 8), (9, 768, 9), (17, 256, 16), (2, 14336, 3)]


def special_x(batch_rows: int, cols: int) -> np.ndarray:
    """fp16 activations [8, cols]: +0, -0, subnormals, mixed, then +inf, -inf, NaN, +inf with -inf."""
    k = np.arange(cols)
    normal = kq._f16_bits((((k * 29) % 31) - 15).astype(F32) / F32(16.0))
    x = np.zeros((8, cols), np.int64)
    x[0] = 0x0000
    x[1] = 0x8000
    x[2] = np.where(k % 2, 0x8000, 0) | ((k * 37) % 1023 + 1)            # subnormals, both signs
    x[3] = np.where(k % 5 == 0, 0x8000, np.where(k % 5 == 1, 0x0001,
                    np.where(k % 5 == 2, 0x7BFF, np.where(k % 5 == 3, 0xFBFF, normal))))
    x[4] = normal
    x[4, 17] = 0x7C00
    x[5] = normal
    x[5, 40] = 0xFC00
    x[6] = normal
    x[6, 3] = 0x7E00
    x[7] = normal
    x[7, 1], x[7, 2] = 0x7C00, 0xFC00
    assert batch_rows == 8
    return x.astype(np.uint16)


def build_gemv(ff: FixtureFile) -> None:
    t = ff.format
    bb = kq.BLOCK_BYTES[t]
    for i, (rows, cols, batch) in enumerate(GEMV_SHAPES):
        seed = 301 + i
        dr = Draws(seed)
        w = dr.values(rows * cols).reshape(rows, cols)
        x = _x16(dr.values(batch * cols)).reshape(batch, cols)
        add_gemv(ff, f"rand_r{rows}_c{cols}_b{batch}_s{seed}",
                 f"quantized uniform weights, fp16 uniform activations, {rows} x {cols}, "
                 f"batch {batch}", quantized_rows(t, w), rows, cols, x, dr.attrs())

    dr = Draws(330)
    w = np.concatenate([quantized_rows(t, dr.values(2 * 256).reshape(2, 256)),
                        np.zeros((1, bb), np.uint8)])
    ys, _ = add_gemv(ff, "x_specials_s330", "activations +0, -0, subnormals, +-max finite, +inf, "
                     "-inf, NaN, +inf with -inf; the third weight row is all zero (inf * 0)",
                     w, 3, 256, special_x(8, 256), dr.attrs())
    assert np.isnan(ys[4:, :]).any() and np.isinf(ys).any() and np.all(ys[0] == 0)

    dr = Draws(331)
    if t == "q8_k":
        specials = [0x00000000, 0x80000000, 0x00000001, 0x007FFFFF, 0x7F7FFFFF, 0x7F800000,
                    0xFF800000, 0x7FC00000, 0xFFC00000]
    else:
        specials = [0x0000, 0x8000, 0x0001, 0x03FF, 0x7BFF, 0x7C00, 0xFC00, 0x7E00, 0xFE00]
    w = np.stack([special_block(t, v, DMIN_NORMAL, i) for i, v in enumerate(specials)])
    x = _x16(dr.values(2 * 256)).reshape(2, 256)
    ys, _ = add_gemv(ff, "d_specials_s331", "weights whose d is +-0, subnormal, max finite, +-inf, "
                     "NaN, fp16 uniform activations", w, len(specials), 256, x, dr.attrs())
    assert np.isnan(ys).any() and np.isfinite(ys).any()
    if t in ("q4_k", "q5_k"):
        w = np.stack([special_block(t, D_NORMAL, v, i) for i, v in enumerate(specials)])
        dr = Draws(332)
        x = _x16(dr.values(256)).reshape(1, 256)
        add_gemv(ff, "dmin_specials_s332", "weights whose dmin is +-0, subnormal, max finite, "
                 "+-inf, NaN", w, len(specials), 256, x, dr.attrs())

    dr = Draws(333)
    x = _x16(dr.values(2 * 768)).reshape(2, 768)
    ys, sa = add_gemv(ff, "zero_weights_s333", "all-zero weight blocks: every output +0",
                      np.zeros((2, 3 * bb), np.uint8), 2, 768, x, dr.attrs())
    assert not ys.any() and not sa.any()


# ---------------------------------------------------------------------------------------------
# invalid.h5
# ---------------------------------------------------------------------------------------------

def build_invalid(ff: FixtureFile) -> None:
    t = ff.format
    bb = kq.BLOCK_BYTES[t]
    for cols in (4544, 896):
        nbytes = -(-cols // 256) * bb
        b, prov = random_bytes(400 + cols % 97, nbytes)
        g = _common(ff, f"dequant_cols_{cols}", "dequant", f"cols = {cols} is not a multiple of "
                    "256 (blocks hold ceil(cols/256) blocks)", prov, rows=1, cols=cols,
                    expect="invalid", error="kq_cols_not_multiple")
        ff.add_dataset(g, "blocks", b.reshape(1, -1))
        try:
            kq.dequantize(t, b, 1, cols)
            raise AssertionError("accepted")
        except kq.KQuantError as e:
            assert e.name == "kq_cols_not_multiple"

    b, prov = random_bytes(410, 3 * bb - 1)
    g = _common(ff, "dequant_short_by_one", "dequant", "1 x 768 with blocks one byte short", prov,
                rows=1, cols=768, expect="invalid", error="kq_size_mismatch")
    ff.add_dataset(g, "blocks", b.reshape(1, -1))
    try:
        kq.dequantize(t, b, 1, 768)
        raise AssertionError("accepted")
    except kq.KQuantError as e:
        assert e.name == "kq_size_mismatch"

    # every type has a GEMV
    dr = Draws(420)
    w = quantized_rows(t, dr.values(2 * 256).reshape(2, 256))
    x = _x16(dr.values(17 * 256)).reshape(17, 256)
    g = _common(ff, "gemv_batch_17", "gemv", "batch 17 is outside 1..16", dr.attrs(), rows=2,
                cols=256, batch=17, expect="invalid", error="kq_batch_out_of_range")
    ff.add_dataset(g, "blocks", w)
    ff.add_dataset(g, "x", x, bit_dtype="float16")
    try:
        kq.gemv_reference(t, w, 2, 256, x)
        raise AssertionError("accepted")
    except kq.KQuantError as e:
        assert e.name == "kq_batch_out_of_range"


def families() -> list[tuple[str, str, callable]]:
    """(format, family, builder) of every K-quant fixture file."""
    out = []
    for t in kq.TYPES:
        out += [(t, "dequant", build_dequant), (t, "quantize", build_quantize)]
        if t in kq.WEIGHT_TYPES:
            out.append((t, "dot", build_dot))
        out.append((t, "gemv", build_gemv))
        out.append((t, "invalid", build_invalid))
    return out
