"""Families of the SpQR format: golden/spqr/<family>.h5 (schema: reference/spec/fixtures.md, SpQR).

  dequant.h5   path dequant   the layer -> expected_w, the dense part's fp16 weights [m, n]
  gemv.h5      path gemv      the layer and x fp16 [batch, n] -> ystar, sum_abs [batch, m]
  invalid.h5   path gemv, expect = invalid, error = the name of the one rule the layer breaks

Case attributes beyond the common ones: m, n, outliers, has_perm (schema); batch (gemv); pair (cases
built in pairs from the same outliers, CSR and PTCSR); nan_sign = "any" where expected_w or ystar
holds a NaN; perm_kind (none, identity, reversed, random, act_order) on valid cases; for random
data count and transform (below).

Random inputs: one pinned stream per case (rng.md), distribution "u64"; every derived draw
(int_range, uniform01, uniform, permutation of rng.md) consumes the stream in the order that the
attribute `transform` lists, `count` is the total number of draws. fp16 values are uniform float32
draws rounded once to fp16 (RN16). An act-order permutation is the stable argsort of -h, h a
synthetic diagonal of uniform(0, 1) draws (descending h, ties in index order).

Every builder checks at generation time that the edge it claims is in its data (every code value,
NaN/inf where claimed, PTCSR padding present, CSR and PTCSR pairs giving equal ystar, each invalid
case breaking exactly its own rule).
"""

from __future__ import annotations

import numpy as np

from . import fp16
from . import spqr as sq
from .rng import Stream
from .schema import FixtureFile

FORMAT = "spqr"
FORMAT_VERSION = 1
F32 = np.float32
TILE = sq.TILE


def f16(v: float) -> int:
    return int(fp16.f32_to_f16(fp16.f32_bits([v]))[0])


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

    def unit(self, what: str, count: int) -> np.ndarray:
        self._note(what, "uniform01", count)
        return self.stream.uniform01_array(count)

    def uniform(self, what: str, a: float, b: float, count: int) -> np.ndarray:
        self._note(what, f"uniform({float(a)!r},{float(b)!r})", count)
        return self.stream.uniform_array(a, b, count)

    def f16u(self, what: str, a: float, b: float, count: int) -> np.ndarray:
        self._note(what, f"RN16(uniform({float(a)!r},{float(b)!r}))", count)
        return fp16.f32_to_f16(fp16.f32_bits(self.stream.uniform_array(a, b, count)))

    def perm(self, what: str, n: int) -> np.ndarray:
        self._note(what, f"permutation({n})", max(n - 1, 0))
        return self.stream.permutation_array(n).astype(np.int64)

    def provenance(self) -> dict:
        return {"seed": self.seed, "distribution": "u64", "count": self.stream.counter,
                "transform": "; ".join(self.parts)}


# ---------------------------------------------------------------------------------------------
# Layers
# ---------------------------------------------------------------------------------------------

# second-order statistics by kind: (s_s, z_s, s_z, z_z) ranges of uniform draws
STAT_RANGES = {
    "random": ((0.001953125, 0.046875), (0.25, 1.25), (-2.0, 2.0), (-2.0, 2.0)),
    "negative": ((-0.046875, -0.001953125), (-1.25, -0.25), (-8.0, -0.5), (-6.0, -0.5)),
}
NEAR_MAX = [0x7BFF, 0xFBFF, 0x7BFE, 0x7BC0, 0xFBC0, 0x7800, 0x77FF]   # 65504, -65504, 65472, ...
SMALL_ZEROS = [0.0, 1.0, 2.0, 3.0, 0.5, 7.0]


def draw_stats(dr: Draws, kind: str, tiles: int) -> np.ndarray:
    """[tiles, 4] fp16 bits (s_s, z_s, s_z, z_z) of one kind."""
    if kind in STAT_RANGES:
        cols = [dr.f16u(f"stats {name}", a, b, tiles)
                for name, (a, b) in zip(("s_s", "z_s", "s_z", "z_z"), STAT_RANGES[kind])]
        return np.stack(cols, axis=1).astype(np.uint16)
    if kind == "subnormal":
        mag = dr.ints("stats subnormal magnitude", 1023, 4 * tiles) + 1
        sign = dr.ints("stats sign", 2, 4 * tiles) << 15
        return (mag | sign).reshape(tiles, 4).astype(np.uint16)
    if kind == "near_max":
        # scales near +-65504, zeros small integers or halves: s and z overflow, vanish or stay
        # finite, so the weights meet inf, inf x 0 = NaN and large finite values
        big = dr.ints("stats near-max scale index", len(NEAR_MAX), 2 * tiles).reshape(tiles, 2)
        small = dr.ints("stats small zero index", len(SMALL_ZEROS), 2 * tiles).reshape(tiles, 2)
        big = np.array(NEAR_MAX, np.uint16)[big]
        small = np.array([f16(v) for v in SMALL_ZEROS], np.uint16)[small]
        return np.stack([big[:, 0], big[:, 1], small[:, 0], small[:, 1]], axis=1)
    if kind == "zero":
        pick = dr.ints("stats zero sign", 2, 4 * tiles)
        return (pick << 15).reshape(tiles, 4).astype(np.uint16)
    raise ValueError(kind)


def random_codes(dr: Draws, m: int, n: int):
    T = sq.tiles_c(n)
    q = dr.ints("q", 8, m * n).reshape(m, n)
    s_q = dr.ints("s_q", 8, m * T).reshape(m, T)
    z_q = dr.ints("z_q", 8, m * T).reshape(m, T)
    return q, s_q, z_q


def random_dense(dr: Draws, m: int, n: int, stats_kind="random") -> np.ndarray:
    """Random codes; stats_kind: one kind for every tile, or a list with one kind per tile row."""
    T = sq.tiles_c(n)
    q, s_q, z_q = random_codes(dr, m, n)
    if isinstance(stats_kind, list):              # one kind per tile row, drawn row by row
        stats = np.concatenate([draw_stats(dr, k, T) for k in stats_kind])
    else:
        stats = draw_stats(dr, stats_kind, (m // TILE) * T)
    stats = stats.reshape(m // TILE, T, 4)
    return sq.pack(m, n, q, s_q, z_q, stats)


def nonzero_dense(m: int, n: int, dr: Draws) -> np.ndarray:
    """Random codes under statistics that make every weight nonzero: s = 2^-7 (s_q + 1) > 0 and
    z = 0.5 (z_q - 0.25), never an integer, so q - z != 0."""
    T = sq.tiles_c(n)
    q, s_q, z_q = random_codes(dr, m, n)
    st = np.array([f16(2.0**-7), f16(0.5), f16(-1.0), f16(0.25)], np.uint16)
    stats = np.broadcast_to(st, (m // TILE, T, 4))
    return sq.pack(m, n, q, s_q, z_q, stats)


def make_perm(dr: Draws, kind: str, n: int):
    if kind == "none":
        return None
    if kind == "identity":
        return np.arange(n, dtype=np.int64)
    if kind == "reversed":
        return np.arange(n - 1, -1, -1, dtype=np.int64)
    if kind == "random":
        return dr.perm("perm", n)
    if kind == "act_order":
        h = dr.uniform("act-order diagonal h", 0.0, 1.0, n)
        return np.argsort(-h, kind="stable").astype(np.int64)
    raise ValueError(kind)


def random_outlier_rows(dr: Draws, m: int, n: int, density: float, lo=-4.0, hi=4.0,
                        shuffled=False) -> list[list[int]]:
    """Each (row, column) is an outlier when a uniform01 draw is below `density`; values
    RN16(uniform(lo, hi)), a value +0 at column 0 (the word 0) replaced by -0; columns ascending,
    or in a random order per row (shuffled)."""
    if density <= 0:
        return [[] for _ in range(m)]
    mask = (dr.unit("outlier positions", m * n) < F32(density)).reshape(m, n)
    nnz = int(mask.sum())
    vals = dr.f16u("outlier values", lo, hi, nnz)
    keys = dr.ints("outlier order", 1 << 32, nnz) if shuffled else np.arange(nnz)
    rows, at = [], 0
    for r in range(m):
        cols = np.nonzero(mask[r])[0]
        k = len(cols)
        v, kk = vals[at:at + k], keys[at:at + k]
        at += k
        order = np.argsort(kk, kind="stable")
        rows.append([zero_safe(sq.word(int(cols[i]), int(v[i]))) for i in order])
    return rows


def zero_safe(w: int) -> int:
    return w if w != 0 else 0x80000000


def layer_with(m: int, n: int, dense, kind: str, rows=None, perm=None) -> sq.Layer:
    if kind == "none":
        return sq.Layer(m, n, dense, "none", perm=perm)
    if kind == "csr":
        ro, cv = sq.csr_from_rows(rows)
    else:
        ro, cv = sq.ptcsr_from_rows(rows)
    return sq.Layer(m, n, dense, kind, ro, cv, perm)


# ---------------------------------------------------------------------------------------------
# Writers
# ---------------------------------------------------------------------------------------------

def _case(ff: FixtureFile, name: str, path: str, description: str, L: sq.Layer,
          provenance: dict | None, **extra):
    prov = dict(provenance or {})
    g = ff.add_case(name, format_version=FORMAT_VERSION, path=path, description=description,
                    m=int(L.m), n=int(L.n), outliers=L.outliers,
                    has_perm=int(L.perm is not None), **prov, **extra)
    ff.add_dataset(g, "dense", np.asarray(L.dense, np.uint64).reshape(-1))
    if L.outliers != "none":
        ff.add_dataset(g, "row_offsets", np.asarray(L.row_offsets, np.int32).reshape(-1))
        ff.add_dataset(g, "col_vals", np.asarray(L.col_vals, np.uint32).reshape(-1))
    if L.perm is not None:
        ff.add_dataset(g, "perm", np.asarray(L.perm, np.uint16).reshape(-1))
    return g


def add_dequant(ff: FixtureFile, name: str, description: str, L: sq.Layer, perm_kind: str,
                provenance: dict | None = None) -> np.ndarray:
    assert sq.violations(L) == [], (name, sq.violations(L))
    w = sq.dequant(L.m, L.n, L.dense)
    extra = {"nan_sign": "any"} if fp16.f16_is_nan(w).any() else {}
    g = _case(ff, name, "dequant", description, L, provenance, perm_kind=perm_kind, **extra)
    ff.add_dataset(g, "expected_w", w, bit_dtype="float16")
    return w


def add_gemv(ff: FixtureFile, name: str, description: str, L: sq.Layer, x16, perm_kind: str,
             provenance: dict | None = None, pair: str | None = None) -> np.ndarray:
    assert sq.violations(L) == [], (name, sq.violations(L))
    x16 = np.asarray(x16, np.uint16)
    ys, sa = sq.gemv_reference(L, x16)
    extra = {"nan_sign": "any"} if np.isnan(ys).any() or np.isnan(sa).any() else {}
    if pair is not None:
        extra["pair"] = pair
    g = _case(ff, name, "gemv", description, L, provenance, batch=int(x16.shape[0]),
              perm_kind=perm_kind, **extra)
    ff.add_dataset(g, "x", x16, bit_dtype="float16")
    ff.add_dataset(g, "ystar", ys)
    ff.add_dataset(g, "sum_abs", sa)
    return ys


def add_pair(ff: FixtureFile, name: str, description: str, m: int, n: int, dense, rows, perm,
             perm_kind: str, x16, provenance: dict | None = None):
    """The same outliers as CSR and as PTCSR: two cases sharing `pair`, equal ystar; the PTCSR
    layout must hold padding (every pair exercises "a 0 word contributes nothing")."""
    out = []
    for kind in ("csr", "ptcsr"):
        L = layer_with(m, n, dense, kind, rows, perm)
        out.append(add_gemv(ff, f"{name}_{kind}", f"{description} ({kind.upper()})", L, x16,
                            perm_kind, provenance, pair=name))
        if kind == "ptcsr":
            assert (np.asarray(L.col_vals) == 0).any(), f"{name}: no PTCSR padding"
    a, b = out
    assert np.array_equal(a, b, equal_nan=True), f"{name}: CSR and PTCSR differ"
    return a


# ---------------------------------------------------------------------------------------------
# dequant.h5
# ---------------------------------------------------------------------------------------------

def every_code_layer() -> sq.Layer:
    """m = 64, n = 32: row r has s_q = r mod 8, z_q = (r div 8) mod 8, and in tile column t the
    codes q_j = (j + r + 3t) mod 8, so each of the 64 (s_q, z_q) pairs meets all 8 weight codes, in
    both tile columns; the 8 tiles have different handmade statistics (positive, negative,
    fractional)."""
    m, n = 64, 32
    T = 2
    r = np.arange(m)[:, None]
    j = np.arange(n)[None, :]
    q = (j % 16 + r + 3 * (j // 16)) % 8
    s_q = np.repeat((np.arange(m) % 8)[:, None], T, axis=1)
    z_q = np.repeat(((np.arange(m) // 8) % 8)[:, None], T, axis=1)
    vals = [(0.0125, 0.5, -0.75, 1.5), (0.03, 1.0, 2.25, -0.5), (-0.02, 0.75, 0.5, 3.0),
            (0.001, -1.25, 7.5, 0.125), (0.5, 0.0625, -3.0, 6.75), (0.0078125, 2.0, 1.0, 1.0),
            (-0.25, -0.5, 4.5, -2.0), (0.0001, 1.5, -0.1, 7.9)]
    stats = np.array([[f16(v) for v in t] for t in vals], np.uint16).reshape(m // TILE, T, 4)
    return sq.Layer(m, n, sq.pack(m, n, q, s_q, z_q, stats))


def build_dequant(ff: FixtureFile) -> None:
    L = every_code_layer()
    add_dequant(ff, "every_code", "every (s_q, z_q) pair 0..7 x 0..7 with every weight code 0..7; "
                "8 tiles with different second-order statistics", L, "none")
    f = sq.unpack(L.m, L.n, L.dense)
    combos = {(int(f["s_q"][r, t]), int(f["z_q"][r, t]), int(c)) for r in range(L.m)
              for t in range(2) for c in f["q"][r, 16 * t:16 * t + 16]}
    assert len(combos) == 512

    for seed, kind, (m, n), what in (
            (11, "random", (32, 48), "random positive scales, mixed-sign zeros"),
            (12, "negative", (32, 32), "negative second-order statistics (scales and zeros)"),
            (13, "subnormal", (16, 32), "fp16 subnormal second-order statistics of both signs: "
             "subnormal and zero weights"),
            (14, "near_max", (16, 48), "second-order statistics near +-65504: s, z and weights "
             "overflow to +-inf, inf x 0 gives NaN"),
            (15, "zero", (32, 64), "second-order statistics +0 and -0: signed-zero weights")):
        dr = Draws(seed)
        L = sq.Layer(m, n, random_dense(dr, m, n, kind))
        w = add_dequant(ff, f"stats_{kind}_s{seed}", f"{what}, {m} x {n}", L, "none",
                        dr.provenance())
        if kind == "near_max":
            assert fp16.f16_is_nan(w).any() and ((w & 0x7FFF) == 0x7C00).any()
        if kind == "subnormal":
            a = w & 0x7FFF
            assert ((a > 0) & (a < 0x400)).any()
        if kind == "zero":
            assert (w == 0x8000).any() and (w == 0).any() and not (w & 0x7FFF).any()
        if kind == "negative":
            assert (w & 0x8000).any() and (w & 0x7FFF).any()

    # inf and NaN statistics: not forbidden by the format; IEEE propagation, canonical NaN bits
    m, n = 16, 64
    dr = Draws(16)
    q, s_q, z_q = random_codes(dr, m, n)
    base = draw_stats(dr, "random", 4)
    specials = [(0, 0x7C00), (1, 0xFC00), (2, 0x7E00), (3, 0xFE01)]   # (tile, value)
    stats = base.copy()
    for (t, v), i in zip(specials, (0, 1, 2, 3)):
        stats[t, i] = v
    L = sq.Layer(m, n, sq.pack(m, n, q, s_q, z_q, stats.reshape(1, 4, 4)))
    w = add_dequant(ff, "stats_inf_nan_s16", "one special per tile: s_s = +inf, z_s = -inf, s_z = "
                    "NaN, z_z = -NaN (IEEE propagation; the NaN sign is not part of the contract)",
                    L, "none", dr.provenance())
    assert fp16.f16_is_nan(w).any() and ((w & 0x7FFF) == 0x7C00).any()

    sizes = [(16, 16), (16, 17), (16, 32), (16, 48), (16, 80), (16, 96), (16, 128), (16, 256),
             (32, 33)]
    for i, (m, n) in enumerate(sizes):
        seed = 30 + i
        dr = Draws(seed)
        L = sq.Layer(m, n, random_dense(dr, m, n, "random"))
        part = "" if n % 16 == 0 else f"; the last tile column has {16 - n % 16} padded columns " \
                                       "(codes 0, not part of expected_w)"
        add_dequant(ff, f"shape_m{m}_n{n}_s{seed}", f"random codes and statistics, {m} x {n}{part}",
                    L, "none", dr.provenance())

    m, n = 32, 48
    dr = Draws(50)
    dense = random_dense(dr, m, n, "random")
    perm = make_perm(dr, "random", n)
    rows = random_outlier_rows(dr, m, n, 0.1)
    L = layer_with(m, n, dense, "csr", rows, perm)
    add_dequant(ff, "outliers_and_perm_s50", "a layer with CSR outliers and a random permutation: "
                "expected_w is the dense part alone, in the permuted column order", L, "random",
                dr.provenance())


# ---------------------------------------------------------------------------------------------
# gemv.h5
# ---------------------------------------------------------------------------------------------

# (m, n, batch, outliers, perm kind, density)
SHAPES = [
    (16, 16, 1, "none", "none", 0.0),
    (16, 32, 2, "csr", "identity", 0.05),
    (32, 48, 3, "csr", "reversed", 0.05),
    (16, 80, 4, "ptcsr", "random", 0.05),
    (32, 96, 5, "csr", "act_order", 0.03),
    (16, 128, 6, "ptcsr", "none", 0.03),
    (32, 256, 7, "csr", "random", 0.02),
    (16, 4096, 2, "csr", "act_order", 0.005),
    (16, 11008, 1, "ptcsr", "random", 0.002),
    (16, 28672, 1, "csr", "none", 0.001),
    (16, 17, 16, "csr", "random", 0.1),
    (16, 4100, 1, "ptcsr", "reversed", 0.005),
    (4096, 16, 1, "csr", "random", 0.03),
    (16, 33, 10, "ptcsr", "act_order", 0.1),
    (32, 16, 9, "ptcsr", "none", 0.2),
]

DENSITIES = [(0.001, "0p1"), (0.01, "1"), (0.1, "10"), (0.5, "50"), (0.9, "90")]


def special_x(n: int, dr: Draws, count: int) -> np.ndarray:
    """fp16 activations: all +0; all -0; subnormals of both signs; a mix of +-0, subnormals,
    +-256 and normal values; then normal values with one +inf, one -inf, one NaN, +inf and -inf.
    (Large finite activations stay small enough that every finite ystar is below 65504: an fp16
    output of a correct kernel then stays finite.)"""
    k = np.arange(n)
    normal = dr.f16u("x", -1.0, 1.0, count * n).reshape(count, n).astype(np.int64)
    x = normal.copy()
    x[0] = 0x0000
    x[1] = 0x8000
    x[2] = np.where(k % 2 == 1, 0x8000, 0) | ((k * 37) % 1023 + 1)
    x[3] = np.where(k % 5 == 0, 0x8000, np.where(k % 5 == 1, 0x0001,
                    np.where(k % 5 == 2, 0x5C00, np.where(k % 5 == 3, 0xDC00, normal[3]))))
    x[4, n // 3] = 0x7C00
    x[5, n // 2] = 0xFC00
    x[6, 1] = 0x7E00
    x[7, 2], x[7, n - 1] = 0x7C00, 0xFC00
    return x.astype(np.uint16)


def build_gemv(ff: FixtureFile) -> None:
    for i, (m, n, batch, kind, pk, density) in enumerate(SHAPES):
        seed = 100 + i
        dr = Draws(seed)
        dense = random_dense(dr, m, n, "random")
        perm = make_perm(dr, pk, n)
        rows = random_outlier_rows(dr, m, n, density) if kind != "none" else None
        x = dr.f16u("x", -1.0, 1.0, batch * n).reshape(batch, n)
        L = layer_with(m, n, dense, kind, rows, perm)
        nnz = 0 if rows is None else sum(len(r) for r in rows)
        add_gemv(ff, f"shape_m{m}_n{n}_b{batch}_{kind}_s{seed}",
                 f"random layer {m} x {n}, {kind} outliers ({nnz}), permutation {pk}, "
                 f"batch {batch}",
                 L, x, pk, dr.provenance())

    # every code, and every kind of statistics, through the product
    L = every_code_layer()
    dr = Draws(130)
    x = dr.f16u("x", -1.0, 1.0, 11 * L.n).reshape(11, L.n)
    add_gemv(ff, "every_code_s130", "the every_code layer of dequant.h5 (every (s_q, z_q, q) "
             "combination), batch 11", L, x, "none", dr.provenance())

    m, n = 80, 32
    dr = Draws(131)
    kinds = ["random", "negative", "subnormal", "near_max", "zero"]
    dense = random_dense(dr, m, n, kinds)
    rows = random_outlier_rows(dr, m, n, 0.05)
    x = dr.f16u("x", -1.0, 1.0, 12 * n).reshape(12, n)
    ys = add_gemv(ff, "stats_kinds_csr_s131", "tile rows with random, negative, subnormal, "
                  "near-max (weights inf, NaN) and zero statistics; CSR outliers; batch 12",
                  layer_with(m, n, dense, "csr", rows), x, "none", dr.provenance())
    assert np.isnan(ys).any() and np.isfinite(ys).any()

    # outlier edges, each as a CSR/PTCSR pair
    m, n = 48, 64
    dr = Draws(140)
    dense = random_dense(dr, m, n)
    perm = make_perm(dr, "random", n)
    rows = random_outlier_rows(dr, m, n, 0.1)
    for r in [0, 5, 15, 17, 31] + list(range(32, 48)):
        rows[r] = []
    x = dr.f16u("x", -1.0, 1.0, 13 * n).reshape(13, n)
    add_pair(ff, "empty_rows_s140", "rows 0, 5, 15, 17 and 31 have no outliers and tile row 2 none "
             "at all (an empty PTCSR segment); random permutation; batch 13", m, n, dense, rows,
             perm, "random", x, dr.provenance())

    dr = Draws(142)
    dense = random_dense(dr, m, n)
    perm = make_perm(dr, "act_order", n)
    rows = random_outlier_rows(dr, m, n, 0.05)
    vals = dr.f16u("dense row values", -4.0, 4.0, 17 * n).reshape(17, n)
    order = dr.perm("dense row order", n)
    rows[3] = [zero_safe(sq.word(int(c), int(vals[16, c]))) for c in order]
    for k in range(16):
        rows[16 + k] = [zero_safe(sq.word(c, int(vals[k, c]))) for c in range(n)]
    x = dr.f16u("x", -1.0, 1.0, 14 * n).reshape(14, n)
    add_pair(ff, "dense_rows_s142", "row 3 has an outlier in every column (nnz = n, random order; "
             "its PTCSR segment is 16 n words, mostly padding); all 16 rows of tile row 1 are "
             "dense (no padding there); act-order permutation; batch 14", m, n, dense, rows, perm,
             "act_order", x, dr.provenance())
    assert max(len(r) for r in rows) == n

    m, n = 32, 128
    for i, (density, tag) in enumerate(DENSITIES):
        seed = 150 + i
        dr = Draws(seed)
        dense = random_dense(dr, m, n)
        pk = ("none", "random", "act_order", "reversed")[i % 4]
        perm = make_perm(dr, pk, n)
        rows = random_outlier_rows(dr, m, n, density, shuffled=(i % 2 == 1))
        batch = 1 + i % 3
        x = dr.f16u("x", -1.0, 1.0, batch * n).reshape(batch, n)
        nnz = sum(len(r) for r in rows)
        add_pair(ff, f"density_{tag}_s{seed}", f"outlier density {density:g} ({nnz} of {m * n}), "
                 f"{'random' if i % 2 else 'ascending'} order within rows, permutation {pk}, "
                 f"batch {batch}", m, n, dense, rows, perm, pk, x, dr.provenance())

    m, n = 32, 80
    dr = Draws(160)
    dense = random_dense(dr, m, n)
    perm = make_perm(dr, "reversed", n)
    rows = random_outlier_rows(dr, m, n, 0.05, shuffled=True)
    v = dr.f16u("column 0, n-1 and duplicate values", -4.0, 4.0, 5 * m)
    cols = dr.ints("duplicate columns", n, m)
    for r in range(m):
        rows[r] = ([zero_safe(sq.word(0, int(v[5 * r])))] + rows[r]
                   + [sq.word(n - 1, int(v[5 * r + 1]))])
        if r % 2 == 0:
            c = int(cols[r])
            rows[r] = [zero_safe(sq.word(c, int(v[5 * r + 2])))] + rows[r] + \
                [zero_safe(sq.word(c, int(v[5 * r + k]))) for k in (3, 4)]
    x = dr.f16u("x", -1.0, 1.0, 15 * n).reshape(15, n)
    add_pair(ff, "cols_first_last_dups_s160", "every row has outliers at columns 0 and n-1, even "
             "rows one column three times (duplicates add), every row in random order; reversed "
             "permutation; batch 15", m, n, dense, rows, perm, "reversed", x, dr.provenance())

    m, n = 16, 32784
    dr = Draws(162)
    dense = random_dense(dr, m, n)
    rows = random_outlier_rows(dr, m, n, 0.0005)
    high = [32767, 32768, 32769, 32775, n - 2, n - 1]
    v = dr.f16u("high column values", -4.0, 4.0, len(high) * 2)
    for i, c in enumerate(high):
        rows[(3 * i) % m].append(sq.word(c, int(v[2 * i])))
        rows[(3 * i + 7) % m].append(sq.word(c, int(v[2 * i + 1])))
    x = dr.f16u("x", -1.0, 1.0, n).reshape(1, n)
    ys = add_gemv(ff, "cols_high_s162", f"n = {n}: PTCSR outlier columns 32767, 32768, 32769, "
                  "32775, n-2 and n-1 (unsigned 16-bit columns, no sign extension)",
                  layer_with(m, n, dense, "ptcsr", rows), x, "none", dr.provenance())
    # the same outliers as CSR give the same ystar (not stored: the size budget)
    ys_csr, _ = sq.gemv_reference(layer_with(m, n, dense, "csr", rows), x)
    assert np.array_equal(ys, ys_csr)
    assert max(w & 0xFFFF for r in rows for w in r) >= 32768

    # x specials; inf/NaN at x'[0] where PTCSR padding is present (padding contributes nothing)
    m, n = 32, 48
    dr = Draws(170)
    dense = nonzero_dense(m, n, dr)
    assert (sq.dequant(m, n, dense) & 0x7FFF).all()
    rows = random_outlier_rows(dr, m, n, 0.08)
    pt = sq.ptcsr_from_rows(rows)
    assert all((pt[1][pt[0][R]:pt[0][R + 1]] == 0).any() for R in range(m // TILE))
    x = dr.f16u("x", -1.0, 1.0, 6 * n).reshape(6, n)
    x[0, 0], x[1, 0], x[2, 0] = 0x7C00, 0xFC00, 0x7E00
    x[3, 0], x[3, 5] = 0x7C00, 0x0001
    x[4, 0], x[4, n - 1] = 0x7C00, 0x7C00
    x[5, 0] = 0xFE00
    ys = add_pair(ff, "x0_inf_nan_padding_s170", "x[0] = +inf, -inf, NaN, -NaN with PTCSR padding "
                  "in every tile row and every weight nonzero: rows must give +-inf from w[r][0] "
                  "x[0] (NaN only where an outlier meets the opposite infinity), never NaN from "
                  "padding", m, n, dense, rows, None, "none", x, dr.provenance())
    assert np.isinf(ys[0]).any() and np.isinf(ys[1]).any() and np.isnan(ys[2]).all()

    dr = Draws(171)
    dense = nonzero_dense(m, n, dr)
    perm = make_perm(dr, "reversed", n)
    rows = random_outlier_rows(dr, m, n, 0.08)
    x = dr.f16u("x", -1.0, 1.0, 3 * n).reshape(3, n)
    x[0, n - 1], x[1, n - 1], x[2, n - 1] = 0x7C00, 0x7E00, 0xFC00
    x[2, 0] = 0x7C00
    ys = add_pair(ff, "xp0_inf_nan_padding_reversed_s171", "reversed permutation: x'[0] = x[n-1] "
                  "= +inf, NaN, -inf (and x[0] = +inf, which is x'[n-1]) with PTCSR padding",
                  m, n, dense, rows, perm, "reversed", x, dr.provenance())
    assert np.isinf(ys[0]).any()

    dr = Draws(172)
    m, n = 16, 32
    dense = nonzero_dense(m, n, dr)
    rows = random_outlier_rows(dr, m, n, 0.1)
    rows = [[w for w in r if w & 0xFFFF] for r in rows]
    for r in (1, 6, 11):
        rows[r] = [0x80000000] + rows[r]
    x = dr.f16u("x", -1.0, 1.0, 2 * n).reshape(2, n)
    x[0, 0] = 0x7C00
    ys = add_pair(ff, "minus_zero_outlier_s172", "outlier words 0x80000000 (value -0 at column 0) "
                  "are real outliers, not padding: with x[0] = +inf, -0 x inf = NaN in rows 1, 6 "
                  "and 11 only", m, n, dense, rows, None, "none", x, dr.provenance())
    assert set(np.nonzero(np.isnan(ys[0]))[0].tolist()) == {1, 6, 11}

    for seed, kind, pk in ((173, "csr", "random"), (174, "ptcsr", "act_order")):
        m, n = 16, 64
        dr = Draws(seed)
        dense = random_dense(dr, m, n)
        perm = make_perm(dr, pk, n)
        rows = random_outlier_rows(dr, m, n, 0.1)
        x = special_x(n, dr, 8)
        ys = add_gemv(ff, f"x_specials_{kind}_s{seed}", "activations all +0, all -0, subnormals, "
                      "+-0/subnormal/+-256 mix, one +inf, one -inf, one NaN, +inf with -inf; "
                      f"{kind.upper()} outliers, permutation {pk}",
                      layer_with(m, n, dense, kind, rows, perm), x, pk, dr.provenance())
        assert np.all(ys[0] == 0) and np.all(ys[1] == 0) and np.isnan(ys[6]).all()


# ---------------------------------------------------------------------------------------------
# invalid.h5
# ---------------------------------------------------------------------------------------------

def build_invalid(ff: FixtureFile) -> None:
    def base(seed, m=16, n=32, kind="csr", density=0.1, pk="none"):
        dr = Draws(seed)
        dense = random_dense(dr, m, n)
        perm = make_perm(dr, pk, n)
        rows = random_outlier_rows(dr, m, n, density) if kind != "none" else None
        L = layer_with(m, n, dense, kind, rows, perm)
        x = dr.f16u("x", -1.0, 1.0, n).reshape(1, n)
        return L, x, dr

    def add(name, description, L, x, error, dr=None):
        v = sq.violations(L) if error != sq.BATCH_RULE else (sq.violations(L) or [sq.BATCH_RULE])
        assert v == [error], (name, v)
        prov = dr.provenance() if dr is not None else {}
        g = _case(ff, name, "gemv", description, L, prov, batch=int(np.asarray(x).shape[0]),
                  expect="invalid", error=error)
        ff.add_dataset(g, "x", np.asarray(x, np.uint16), bit_dtype="float16")

    L, x, dr = base(400)
    n = L.n
    m = 24
    L2 = sq.Layer(m, n, np.zeros(2 * sq.tiles_c(n) * 16, np.uint64))
    add("m_24", "m = 24 is not a multiple of 16 (dense sized for 2 tile rows)", L2, x,
        "spqr_rows_not_multiple")
    add("m_0", "m = 0 (no tile row)", sq.Layer(0, n, np.zeros(0, np.uint64)), x,
        "spqr_rows_not_multiple")
    add("n_0", "n = 0", sq.Layer(16, 0, np.zeros(0, np.uint64)), np.zeros((1, 0), np.uint16),
        "spqr_cols_out_of_range")
    n_big = sq.MAX_N + 1
    add("n_65537", "n = 65537, one past the largest n; every buffer consistent with it (all-zero "
        "dense words)", sq.Layer(16, n_big, np.zeros(sq.dense_words(16, n_big), np.uint64)),
        np.zeros((1, n_big), np.uint16), "spqr_cols_out_of_range")

    L, x, dr = base(401)
    add("dense_short", "dense has one word fewer than (m/16) ceil(n/16) 16",
        sq.Layer(L.m, L.n, L.dense[:-1], L.outliers, L.row_offsets, L.col_vals), x,
        "spqr_size_mismatch", dr)
    L, x, dr = base(402, n=17)
    add("dense_long", "dense has one word more than (m/16) ceil(n/16) 16 (n = 17)",
        sq.Layer(L.m, L.n, np.append(L.dense, np.uint64(0)), L.outliers, L.row_offsets, L.col_vals),
        x, "spqr_size_mismatch", dr)
    L, x, dr = base(403)
    add("csr_offsets_short", "CSR row_offsets has m entries instead of m + 1",
        sq.Layer(L.m, L.n, L.dense, "csr", L.row_offsets[:-1], L.col_vals), x,
        "spqr_size_mismatch", dr)
    L, x, dr = base(404, kind="csr")
    add("ptcsr_offsets_csr_length", "outliers = ptcsr with m + 1 row_offsets (a CSR array)",
        sq.Layer(L.m, L.n, L.dense, "ptcsr", L.row_offsets, L.col_vals), x,
        "spqr_size_mismatch", dr)
    L, x, dr = base(405, pk="random")
    add("perm_short", "perm has n - 1 entries",
        sq.Layer(L.m, L.n, L.dense, L.outliers, L.row_offsets, L.col_vals, L.perm[:-1]), x,
        "spqr_size_mismatch", dr)

    for bit, seed, idx in ((62, 406, 5), (63, 407, 14)):
        L, x, dr = base(seed)
        d = L.dense.copy()
        d[idx] |= np.uint64(1) << np.uint64(bit)
        add(f"reserved_bit{bit}", f"dense word {idx} has bit {bit} set",
            sq.Layer(L.m, L.n, d, L.outliers, L.row_offsets, L.col_vals), x,
            "spqr_reserved_bits", dr)

    L, x, dr = base(408, m=32)
    d = L.dense.copy()
    idx = (1 * sq.tiles_c(L.n) + 1) * 16 + 7          # tile (1, 1), row 7: the odd copy of byte 3
    d[idx] ^= np.uint64(1) << np.uint64(54 + 2)
    add("fragment_mismatch", "tile (1, 1): rows 6 and 7 carry different copies of byte 3 of the "
        "second-order word", sq.Layer(L.m, L.n, d, L.outliers, L.row_offsets, L.col_vals), x,
        "spqr_fragment_mismatch", dr)

    L, x, dr = base(409)
    ro = L.row_offsets.astype(np.int64) + 1
    cv = np.concatenate([np.array([sq.word(1, f16(1.0))], np.uint32), L.col_vals])
    add("csr_offsets_not_zero", "CSR row_offsets[0] = 1 (the first word belongs to no row; the "
        "offsets are otherwise consistent)", sq.Layer(L.m, L.n, L.dense, "csr", ro.astype(np.int32),
                                                       cv), x, "spqr_offsets_not_zero", dr)
    L, x, dr = base(410, kind="ptcsr", density=0.15)
    ro = L.row_offsets.astype(np.int64) + 16
    cv = np.concatenate([np.full(16, sq.word(2, f16(0.5)), np.uint32), L.col_vals])
    add("ptcsr_offsets_not_zero", "PTCSR row_offsets[0] = 16 (segments otherwise consistent)",
        sq.Layer(L.m, L.n, L.dense, "ptcsr", ro.astype(np.int32), cv), x, "spqr_offsets_not_zero",
        dr)

    L, x, dr = base(411, density=0.2)
    ro = L.row_offsets.copy()
    ro[8] = ro[9] + 1                   # row 7 grows by ro[9] - ro[8] + 1, row 8 has length -1
    assert ro[8] <= ro[-1]
    add("csr_offsets_decreasing", "CSR row_offsets decrease once (first 0, last nnz)",
        sq.Layer(L.m, L.n, L.dense, "csr", ro, L.col_vals), x, "spqr_offsets_decreasing", dr)

    L, x, dr = base(412)
    add("csr_offsets_end_below_nnz", "CSR row_offsets[m] = nnz - 1 (col_vals has one word more)",
        sq.Layer(L.m, L.n, L.dense, "csr", L.row_offsets,
                 np.append(L.col_vals, np.uint32(sq.word(3, f16(1.0))))), x,
        "spqr_offsets_not_nnz", dr)
    L, x, dr = base(413)
    add("csr_offsets_end_above_nnz", "CSR row_offsets[m] = nnz + 1 (col_vals one word short)",
        sq.Layer(L.m, L.n, L.dense, "csr", L.row_offsets, L.col_vals[:-1]), x,
        "spqr_offsets_not_nnz", dr)

    L, x, dr = base(414)
    cv = L.col_vals.copy()
    cv[len(cv) // 2] = sq.word(L.n, f16(1.0))
    add("csr_col_eq_n", "a CSR outlier column equals n", sq.Layer(L.m, L.n, L.dense, "csr",
                                                                 L.row_offsets, cv), x,
        "spqr_outlier_col_out_of_range", dr)
    L, x, dr = base(415, n=17)
    cv = L.col_vals.copy()
    cv[0] = sq.word(20, f16(1.0))
    add("csr_col_in_padding", "n = 17: a CSR outlier column 20, inside the padded tile columns",
        sq.Layer(L.m, L.n, L.dense, "csr", L.row_offsets, cv), x, "spqr_outlier_col_out_of_range",
        dr)
    L, x, dr = base(416, kind="ptcsr")
    cv = L.col_vals.copy()
    cv[0] = sq.word(65535, f16(-2.0))
    add("ptcsr_col_65535", "a PTCSR outlier column 65535 with n = 32", sq.Layer(
        L.m, L.n, L.dense, "ptcsr", L.row_offsets, cv), x, "spqr_outlier_col_out_of_range", dr)

    L, x, dr = base(417, kind="none")
    ro = np.array([0, 17], np.int32)
    cv = np.array([sq.word(k % L.n, f16(0.25 * (k + 1))) for k in range(17)], np.uint32)
    add("ptcsr_segment_17", "a PTCSR segment of 17 words", sq.Layer(L.m, L.n, L.dense, "ptcsr", ro,
                                                                      cv), x,
        "spqr_ptcsr_segment_not_multiple", dr)
    L, x, dr = base(418, m=32, kind="none")
    ro = np.array([0, 8, 24], np.int32)
    cv = np.array([sq.word(k % L.n, f16(0.5)) for k in range(24)], np.uint32)
    add("ptcsr_segment_8", "PTCSR segments of 8 and 16 words (m = 32)",
        sq.Layer(L.m, L.n, L.dense, "ptcsr", ro, cv), x, "spqr_ptcsr_segment_not_multiple", dr)

    L, x, dr = base(419, kind="none")
    cv = np.zeros(32, np.uint32)
    cv[:16] = [sq.word(k + 1, f16(1.0)) for k in range(16)]
    add("ptcsr_zero_last_level", "a PTCSR segment of 32 words whose second level is all padding "
        "(16 x longest row would be 16)", sq.Layer(L.m, L.n, L.dense, "ptcsr",
                                                   np.array([0, 32], np.int32), cv), x,
        "spqr_ptcsr_segment_mismatch", dr)
    L, x, dr = base(420, kind="none")
    cv = np.zeros(32, np.uint32)
    cv[:16] = [sq.word(k + 1, f16(1.0)) for k in range(16)]
    cv[3] = 0
    cv[16 + 3] = sq.word(9, f16(2.0))
    cv[16 + 8] = sq.word(10, f16(3.0))
    add("ptcsr_word_after_padding", "row 3 of a PTCSR segment: level 0 is padding, level 1 holds "
        "an outlier", sq.Layer(L.m, L.n, L.dense, "ptcsr", np.array([0, 32], np.int32), cv), x,
        "spqr_ptcsr_segment_mismatch", dr)

    L, x, dr = base(421, pk="random")
    p = L.perm.copy()
    p[7] = p[20]
    add("perm_duplicate", "perm holds one index twice (and misses one)",
        sq.Layer(L.m, L.n, L.dense, L.outliers, L.row_offsets, L.col_vals, p), x,
        "spqr_perm_invalid", dr)
    L, x, dr = base(422, pk="random")
    p = L.perm.copy()
    p[int(np.argmax(p))] = L.n
    add("perm_out_of_range", "perm holds n (its largest entry replaced)",
        sq.Layer(L.m, L.n, L.dense, L.outliers, L.row_offsets, L.col_vals, p), x,
        "spqr_perm_invalid", dr)

    for seed, n, col, code in ((423, 17, 5, 3), (424, 33, 15, 7)):
        L, x, dr = base(seed, n=n)
        T = sq.tiles_c(n)
        d = L.dense.copy()
        idx = (T - 1) * 16 + 2                          # tile (0, T-1), row 2
        d[idx] |= np.uint64(code) << np.uint64(6 + 3 * col)
        add(f"padding_code_n{n}", f"n = {n}: padded column {col} of the last tile column has code "
            f"{code}", sq.Layer(L.m, L.n, d, L.outliers, L.row_offsets, L.col_vals), x,
            "spqr_padding_codes_nonzero", dr)

    L, x, dr = base(425)
    add("batch_0", "batch 0 (x has no rows)", L, np.zeros((0, L.n), np.uint16),
        "spqr_batch_out_of_range", dr)
    L, x, dr = base(426)
    x17 = dr.f16u("x rows 2..17", -1.0, 1.0, 16 * L.n).reshape(16, L.n)
    add("batch_17", "batch 17", L, np.concatenate([x, x17]), "spqr_batch_out_of_range", dr)


FAMILIES = [("dequant", build_dequant), ("gemv", build_gemv), ("invalid", build_invalid)]


def families() -> list[tuple[str, str, callable]]:
    return [(FORMAT, fam, build) for fam, build in FAMILIES]
