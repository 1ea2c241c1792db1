"""SpQR inference format (3-bit weights in 16x16 tiles, bilevel statistics, fp16 outliers, optional
act-order permutation), written from the normative spec spqr.md and numerics.md.

Layout
  A layer has m output rows (a multiple of 16) and n input columns (1..65536), T = ceil(n/16) tile
  columns. The dense part is one uint64 word per (row, tile column), in memory order
  dense[((R * T) + t) * 16 + k] for tile row R, tile column t, row k of the tile:
      bits 0-2 s_q, 3-5 z_q, 6+3j..8+3j the code q_j of column 16t + j, 54-61 byte floor(k/2) of the
      tile's second-order word, 62-63 zero.
  The second-order word of a tile is s_s | z_s << 16 | s_z << 32 | z_z << 48 (fp16 bit patterns);
  rows 2b and 2b + 1 both carry byte b, and the two copies must agree.

Dequantization (every operation rounded to fp16 on its own, never fused)
      s   = RN16(s_s * RN16(s_q - s_z))
      z   = RN16(z_s * RN16(z_q - z_z))
      w_j = RN16(s   * RN16(q_j - z))
  An fp16 operation is computed in float32 (exact for +, -, x of two fp16 values) and rounded once
  to fp16 with fp16.f32_to_f16. numpy float32 element-wise operations are single IEEE roundings;
  every element sees exactly this sequence. The operands are fp16 values or the codes 0..7 (exact).

NaN bit patterns
  IEEE leaves the sign and payload of a NaN result open. So that the fixtures do not depend on the
  host, every float32 operation here rewrites a NaN result explicitly with the x86 SSE rule: a NaN
  operand propagates (the first one, quieted), an invalid operation (inf x 0, inf - inf) gives
  0xFFC00000. fp16.f32_to_f16 then keeps sign and top payload bits. Comparators accept any NaN
  where a NaN is expected (fixture attribute nan_sign = "any").

Outliers (additive fp16 values, in the permuted column space)
  word = column (bits 0-15) | fp16 value bits (bits 16-31).
  CSR:   row_offsets int32[m + 1]; row r's words are col_vals[ro[r] .. ro[r+1]).
  PTCSR: row_offsets int32[m/16 + 1]; tile row R's segment has 16 * (longest row) words, the l-th
         outlier of row 16R + k at ro[R] + 16 l + k, unused slots are the word 0, which contributes
         nothing (a CSR word 0 is a real outlier +0 at column 0 and does contribute +0 * x'[0]).

Product
  y[b][r] = sum_{j<n} w[r][j] x'_b[j] + sum over row r's outliers v x'_b[c], x'_b[i] = x_b[perm[i]].
  ystar is that sum's exact value correctly rounded to float64: every product of two fp16 values is
  exact in float64 (22 significant bits, exponent within [-48, 32]) and math.fsum returns the
  correctly rounded sum of exact float64 terms. Non-finite terms follow IEEE: a NaN term, or +inf
  together with -inf, gives NaN; otherwise an infinite term gives that infinity. sum_abs is the same
  over |term|.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import fp16

TILE = 16
MAX_N = 65536
MAX_BATCH = 16
OUTLIER_KINDS = ("none", "csr", "ptcsr")

F32 = np.float32
X86_DEFAULT_NAN = np.uint32(0xFFC00000)
F32_QUIET_BIT = np.uint32(0x00400000)

# Validation rules, in the order of the spec's validation list (the first that fails is returned).
RULES = (
    "spqr_rows_not_multiple",
    "spqr_cols_out_of_range",
    "spqr_size_mismatch",
    "spqr_reserved_bits",
    "spqr_fragment_mismatch",
    "spqr_offsets_not_zero",
    "spqr_offsets_decreasing",
    "spqr_offsets_not_nnz",
    "spqr_outlier_col_out_of_range",
    "spqr_ptcsr_segment_not_multiple",
    "spqr_ptcsr_segment_mismatch",
    "spqr_perm_invalid",
    "spqr_padding_codes_nonzero",
)
BATCH_RULE = "spqr_batch_out_of_range"


class SpqrError(ValueError):
    """Invalid SpQR input; `name` is the error name of errors.h the fixtures record."""

    def __init__(self, name: str, message: str):
        super().__init__(f"{name}: {message}")
        self.name = name


def tiles_c(n: int) -> int:
    return -(-int(n) // TILE)


def dense_words(m: int, n: int) -> int:
    return (int(m) // TILE) * tiles_c(n) * TILE


# ---------------------------------------------------------------------------------------------
# fp16 arithmetic: one float32 operation, NaN rewritten (module docstring), one rounding to fp16
# ---------------------------------------------------------------------------------------------

def f16_values(bits) -> np.ndarray:
    """fp16 bit patterns -> float32 values (exact; NaNs quieted, sign and payload kept)."""
    return fp16.f16_to_f32(np.asarray(bits, dtype=np.uint16)).view(F32)


def _nan_rule(r: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    nan = np.isnan(r)
    if not nan.any():
        return r
    a_bits = np.ascontiguousarray(a).view(np.uint32) | F32_QUIET_BIT
    b_bits = np.ascontiguousarray(b).view(np.uint32) | F32_QUIET_BIT
    fix = np.where(np.isnan(a), a_bits, np.where(np.isnan(b), b_bits, X86_DEFAULT_NAN))
    out = np.ascontiguousarray(r).view(np.uint32).copy()
    out[nan] = fix[nan]
    return out.view(F32)


def rn16_sub(a_bits, b_bits) -> np.ndarray:
    """RN16(a - b) of fp16 bit patterns (broadcast), as fp16 bits."""
    a, b = np.broadcast_arrays(f16_values(a_bits), f16_values(b_bits))
    with np.errstate(all="ignore"):
        r = _nan_rule(np.subtract(a, b, dtype=F32), a, b)
    return fp16.f32_to_f16(np.ascontiguousarray(r).view(np.uint32))


def rn16_mul(a_bits, b_bits) -> np.ndarray:
    """RN16(a * b) of fp16 bit patterns (broadcast), as fp16 bits."""
    a, b = np.broadcast_arrays(f16_values(a_bits), f16_values(b_bits))
    with np.errstate(all="ignore"):
        r = _nan_rule(np.multiply(a, b, dtype=F32), a, b)
    return fp16.f32_to_f16(np.ascontiguousarray(r).view(np.uint32))


# fp16 bit patterns of the codes 0..7 (exact small integers)
CODE_F16 = fp16.f32_to_f16(fp16.f32_bits(np.arange(8, dtype=F32)))


# ---------------------------------------------------------------------------------------------
# Dense part: packing and unpacking
# ---------------------------------------------------------------------------------------------

def second_order_words(stats) -> np.ndarray:
    """stats [..., 4] fp16 bits in the order s_s, z_s, s_z, z_z -> the 64-bit second-order words."""
    s = np.asarray(stats, dtype=np.uint64)
    return s[..., 0] | (s[..., 1] << np.uint64(16)) | (s[..., 2] << np.uint64(32)) \
        | (s[..., 3] << np.uint64(48))


def pack(m: int, n: int, q, s_q, z_q, stats) -> np.ndarray:
    """Codes and statistics -> dense words (uint64, flat, memory order).

    q: [m, n] codes 0..7 (permuted column space); s_q, z_q: [m, T] first-order codes 0..7, one per
    (row, tile column); stats: [m/16, T, 4] fp16 bits (s_s, z_s, s_z, z_z) per tile. Padded columns
    (j >= n in the last tile) get code 0.
    """
    m, n = int(m), int(n)
    if m % TILE or m <= 0 or not 1 <= n <= MAX_N:
        raise ValueError(f"pack needs m a positive multiple of 16 and 1 <= n <= 65536, got "
                         f"{m} x {n}")
    T = tiles_c(n)
    q = np.asarray(q, dtype=np.int64)
    s_q = np.asarray(s_q, dtype=np.int64)
    z_q = np.asarray(z_q, dtype=np.int64)
    stats = np.asarray(stats, dtype=np.uint16)
    if (q.shape != (m, n) or s_q.shape != (m, T) or z_q.shape != (m, T)
            or stats.shape != (m // TILE, T, 4)):
        raise ValueError("pack: inconsistent shapes")
    for what, a in (("q", q), ("s_q", s_q), ("z_q", z_q)):
        if a.size and (a.min() < 0 or a.max() > 7):
            raise ValueError(f"pack: {what} codes must be 0..7")
    qp = np.zeros((m, T * TILE), np.int64)
    qp[:, :n] = q
    word = (s_q | (z_q << 3)).astype(np.uint64)                       # [m, T]
    qt = qp.reshape(m, T, TILE).astype(np.uint64)
    for j in range(TILE):
        word |= qt[:, :, j] << np.uint64(6 + 3 * j)
    so = second_order_words(stats)                                      # [m/16, T]
    k = np.arange(m) % TILE
    frag = (so[np.arange(m) // TILE, :] >> (np.uint64(8) * (k // 2).astype(np.uint64))[:, None]) \
        & np.uint64(0xFF)
    word |= frag << np.uint64(54)
    # [m, T] row-major -> memory order [R][t][k]
    return np.ascontiguousarray(word.reshape(m // TILE, TILE, T).transpose(0, 2, 1)).reshape(-1)


def rows_view(m: int, n: int, dense) -> np.ndarray:
    """Dense words (memory order) -> [m, T] (row, tile column)."""
    T = tiles_c(n)
    d = np.asarray(dense, dtype=np.uint64).reshape(m // TILE, T, TILE)
    return np.ascontiguousarray(d.transpose(0, 2, 1)).reshape(m, T)


def unpack(m: int, n: int, dense) -> dict:
    """The fields of every word. q: [m, 16T] (padded columns included); s_q, z_q, frag, reserved:
    [m, T]; stats_even / stats_odd: [m/16, T, 4] the second-order word's four fp16 values rebuilt
    from the even rows / from the odd rows."""
    w = rows_view(m, n, dense)
    T = w.shape[1]
    q = np.stack([(w >> np.uint64(6 + 3 * j)) & np.uint64(7) for j in range(TILE)], axis=2)
    frag = (w >> np.uint64(54)) & np.uint64(0xFF)
    fr = frag.reshape(m // TILE, TILE, T)
    stats = {}
    for parity in (0, 1):
        so = np.zeros((m // TILE, T), np.uint64)
        for b in range(8):
            so |= fr[:, 2 * b + parity, :] << np.uint64(8 * b)
        stats[parity] = np.stack([(so >> np.uint64(16 * i)) & np.uint64(0xFFFF) for i in range(4)],
                                 axis=2).astype(np.uint16)
    return {
        "q": q.reshape(m, T * TILE).astype(np.uint8),
        "s_q": (w & np.uint64(7)).astype(np.uint8),
        "z_q": ((w >> np.uint64(3)) & np.uint64(7)).astype(np.uint8),
        "frag": frag.astype(np.uint8),
        "reserved": (w >> np.uint64(62)).astype(np.uint8),
        "stats_even": stats[0],
        "stats_odd": stats[1],
    }


def dequant(m: int, n: int, dense) -> np.ndarray:
    """The dense part's fp16 weights [m, n] (bits): w[r][j] multiplies x'[j]. Assumes the fragment
    copies agree (the even rows' copy is used)."""
    f = unpack(m, n, dense)
    st = np.repeat(f["stats_even"], TILE, axis=0)                       # [m, T, 4]
    s_s, z_s, s_z, z_z = (st[:, :, i] for i in range(4))
    s = rn16_mul(s_s, rn16_sub(CODE_F16[f["s_q"]], s_z))                 # [m, T]
    z = rn16_mul(z_s, rn16_sub(CODE_F16[f["z_q"]], z_z))
    T = s.shape[1]
    q = CODE_F16[f["q"]].reshape(m, T, TILE)
    w = rn16_mul(s[:, :, None], rn16_sub(q, z[:, :, None]))            # [m, T, 16]
    return np.ascontiguousarray(w.reshape(m, T * TILE)[:, :n])


# ---------------------------------------------------------------------------------------------
# Outliers
# ---------------------------------------------------------------------------------------------

def word(col: int, value_bits: int) -> int:
    return (int(value_bits) & 0xFFFF) << 16 | (int(col) & 0xFFFF)


def csr_from_rows(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Per-row lists of words (storage order) -> (row_offsets int32[m+1], col_vals uint32[nnz])."""
    ro = np.zeros(len(rows) + 1, np.int64)
    ro[1:] = np.cumsum([len(r) for r in rows])
    cv = np.array([w for r in rows for w in r], dtype=np.uint32)
    return ro.astype(np.int32), cv


def ptcsr_from_rows(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Per-row lists of words -> PTCSR (row_offsets int32[m/16+1], col_vals uint32). A word 0
    cannot be told from padding: refused."""
    m = len(rows)
    if m % TILE:
        raise ValueError("PTCSR needs m a multiple of 16")
    if any(w == 0 for r in rows for w in r):
        raise ValueError("a word 0 (column 0, value +0) cannot be stored in PTCSR")
    ro = [0]
    segments = []
    for R in range(m // TILE):
        tr = rows[R * TILE:(R + 1) * TILE]
        L = max(len(r) for r in tr)
        seg = np.zeros(TILE * L, np.uint32)
        for k, r in enumerate(tr):
            for l, w in enumerate(r):
                seg[TILE * l + k] = w
        segments.append(seg)
        ro.append(ro[-1] + seg.size)
    cv = np.concatenate(segments) if segments else np.zeros(0, np.uint32)
    return np.array(ro, np.int32), cv.astype(np.uint32)


def csr_to_ptcsr(m: int, row_offsets, col_vals) -> tuple[np.ndarray, np.ndarray]:
    return ptcsr_from_rows(csr_rows(m, row_offsets, col_vals))


def csr_rows(m: int, row_offsets, col_vals) -> list[list[int]]:
    ro = [int(v) for v in row_offsets]
    cv = [int(v) for v in col_vals]
    return [cv[ro[r]:ro[r + 1]] for r in range(m)]


def ptcsr_rows(m: int, row_offsets, col_vals) -> list[list[int]]:
    """Per-row words of a valid PTCSR layer in storage order, padding (word 0) left out."""
    ro = [int(v) for v in row_offsets]
    cv = np.asarray(col_vals, dtype=np.uint32)
    rows = []
    for R in range(m // TILE):
        seg = cv[ro[R]:ro[R + 1]].reshape(-1, TILE)          # [levels, 16]
        for k in range(TILE):
            rows.append([int(w) for w in seg[:, k] if w != 0])
    return rows


@dataclass
class Layer:
    m: int
    n: int
    dense: np.ndarray
    outliers: str = "none"
    row_offsets: np.ndarray | None = None
    col_vals: np.ndarray | None = None
    perm: np.ndarray | None = None

    def outlier_rows(self) -> list[list[int]]:
        if self.outliers == "none":
            return [[] for _ in range(self.m)]
        if self.outliers == "csr":
            return csr_rows(self.m, self.row_offsets, self.col_vals)
        return ptcsr_rows(self.m, self.row_offsets, self.col_vals)

    def max_terms(self) -> int:
        """n + the most outlier words of any row (PTCSR padding excluded): the bound's d."""
        return self.n + max((len(r) for r in self.outlier_rows()), default=0)


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------

def violations(L: Layer) -> list[str]:
    """Every rule the layer breaks, in the spec's order. A rule that cannot be evaluated because a
    rule it depends on failed (sizes need valid m and n, offsets need the right length, PTCSR
    segments need valid offsets) is not evaluated; each invalid fixture breaks exactly one rule."""
    out = []
    m, n = int(L.m), int(L.n)
    m_ok = m > 0 and m % TILE == 0
    n_ok = 1 <= n <= MAX_N
    if not m_ok:
        out.append("spqr_rows_not_multiple")
    if not n_ok:
        out.append("spqr_cols_out_of_range")
    if not (m_ok and n_ok):
        return out
    dense = np.asarray(L.dense, dtype=np.uint64).reshape(-1)
    ro = None if L.row_offsets is None else np.asarray(L.row_offsets, np.int64).reshape(-1)
    cv = None if L.col_vals is None else np.asarray(L.col_vals, np.uint32).reshape(-1)
    ro_len = {"none": None, "csr": m + 1, "ptcsr": m // TILE + 1}[L.outliers]
    size_ok = dense.size == dense_words(m, n)
    if ro_len is not None and (ro is None or ro.size != ro_len or cv is None):
        size_ok = False
    if L.perm is not None and np.asarray(L.perm).size != n:
        size_ok = False
    if not size_ok:
        out.append("spqr_size_mismatch")
        return out
    f = unpack(m, n, dense)
    if f["reserved"].any():
        out.append("spqr_reserved_bits")
    fr = f["frag"].reshape(m // TILE, 8, 2, -1)
    if (fr[:, :, 0, :] != fr[:, :, 1, :]).any():
        out.append("spqr_fragment_mismatch")
    if ro is not None:
        nnz = cv.size
        if ro[0] != 0:
            out.append("spqr_offsets_not_zero")
        decreasing = bool((np.diff(ro) < 0).any())
        if decreasing:
            out.append("spqr_offsets_decreasing")
        if ro[-1] != nnz:
            out.append("spqr_offsets_not_nnz")
        if nnz and int((cv & np.uint32(0xFFFF)).max()) >= n:
            out.append("spqr_outlier_col_out_of_range")
        if L.outliers == "ptcsr" and not decreasing and ro.min() >= 0 and ro.max() <= nnz:
            seg_len = np.diff(ro)
            if (seg_len % TILE).any():
                out.append("spqr_ptcsr_segment_not_multiple")
            else:
                mismatch = False
                for R in range(m // TILE):
                    seg = cv[ro[R]:ro[R + 1]].reshape(-1, TILE)
                    if seg.shape[0] == 0:
                        continue
                    nz = seg != 0
                    # a row's words must be a prefix of its slots (no word after a padding slot) ...
                    if (nz[1:] & ~nz[:-1]).any():
                        mismatch = True
                    # ... and the longest row must fill the last level
                    if not nz[-1].any():
                        mismatch = True
                if mismatch:
                    out.append("spqr_ptcsr_segment_mismatch")
    if L.perm is not None:
        p = np.asarray(L.perm, dtype=np.int64)
        if not np.array_equal(np.sort(p), np.arange(n)):
            out.append("spqr_perm_invalid")
    if n % TILE:
        if f["q"][:, n:].any():
            out.append("spqr_padding_codes_nonzero")
    return out


def validate(L: Layer) -> None:
    v = violations(L)
    if v:
        raise SpqrError(v[0], "invalid SpQR layer")


# ---------------------------------------------------------------------------------------------
# Exact product
# ---------------------------------------------------------------------------------------------

def ieee_exact_sum(terms) -> tuple[float, float]:
    """(sum, sum of |.|) of exact float64 terms, correctly rounded; IEEE rules for inf and NaN."""
    t = np.asarray(terms, dtype=np.float64).reshape(-1)
    if np.all(np.isfinite(t)):
        return math.fsum(t.tolist()), math.fsum(np.abs(t).tolist())
    nan = bool(np.isnan(t).any())
    pos, neg = bool(np.isposinf(t).any()), bool(np.isneginf(t).any())
    total = math.nan if nan or (pos and neg) else (math.inf if pos else -math.inf)
    return total, (math.nan if nan else math.inf)


def gather(L: Layer, x16) -> np.ndarray:
    """x' = x[:, perm] (fp16 bits [batch, n])."""
    x16 = np.asarray(x16, dtype=np.uint16)
    return x16 if L.perm is None else x16[:, np.asarray(L.perm, dtype=np.int64)]


def gemv_reference(L: Layer, x16) -> tuple[np.ndarray, np.ndarray]:
    """(ystar, sum_abs) float64 [batch, m] for fp16 activations x16 [batch, n] (original order)."""
    validate(L)
    x16 = np.asarray(x16, dtype=np.uint16)
    batch = x16.shape[0] if x16.ndim == 2 else -1
    if not 1 <= batch <= MAX_BATCH:
        raise SpqrError(BATCH_RULE, f"batch = {batch} is outside 1..16")
    if x16.shape[1] != L.n:
        raise ValueError(f"x has shape {x16.shape}, expected [batch, {L.n}]")
    w = f16_values(dequant(L.m, L.n, L.dense)).astype(np.float64)        # [m, n]
    xv = f16_values(gather(L, x16)).astype(np.float64)                   # [batch, n]
    rows = L.outlier_rows()
    ocol = [np.array([c & 0xFFFF for c in r], np.int64) for r in rows]
    oval = [f16_values(np.array([c >> 16 for c in r], np.uint16)).astype(np.float64) for r in rows]
    ystar = np.empty((batch, L.m), np.float64)
    sabs = np.empty((batch, L.m), np.float64)
    with np.errstate(invalid="ignore"):
        for b in range(batch):
            dense_terms = w * xv[b][None, :]                              # exact products
            for r in range(L.m):
                terms = np.concatenate([dense_terms[r], oval[r] * xv[b][ocol[r]]])
                ystar[b, r], sabs[b, r] = ieee_exact_sum(terms)
    return ystar, sabs
