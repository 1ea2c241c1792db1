"""Family `fp16`: golden/fp16/<path>.h5, one file per conversion path of fp16.md.

Inputs come from three sources: exhaustive enumeration (16-bit to float32), constructions from exact
values (every 16-bit value, the exact midpoint to its successor and that midpoint's float32
neighbours), and the pinned stream. Expected outputs come from qgold_gen.fp16 and are checked here
against: tables written by hand (subnormal, overflow, specials), structural invariants (a midpoint
goes to the even neighbour, its neighbours go down and up), and numpy's own float16 cast for every
non-NaN fp16 case.
"""

from __future__ import annotations

import numpy as np

from . import fp16
from .rng import Stream
from .schema import FixtureFile

FORMAT = "fp16"
FORMAT_VERSION = 1
SIGN32 = 0x80000000
SIGN16 = 0x8000


# ---- exact float32 construction ----

def f32(v: float) -> int:
    """Bit pattern of the float32 equal to v; v must be exactly representable."""
    x = np.float32(v)
    assert float(x) == v, f"{v!r} is not a float32 value"
    return int(np.array([x], dtype=np.float32).view(np.uint32)[0])


def up(bits: int) -> int:
    """Next float32 above a positive finite value, by bit pattern (magnitudes are ordered)."""
    return bits + 1


def down(bits: int) -> int:
    return bits - 1


def both_signs32(pairs, sign_out: int):
    """[(x, expected)] for positive x -> the same list followed by its negated mirror."""
    return list(pairs) + [(x | SIGN32, e | sign_out) for x, e in pairs]


def _u32(a) -> np.ndarray:
    return np.asarray(a, dtype=np.uint32)


def _u16(a) -> np.ndarray:
    return np.asarray(a, dtype=np.uint16)


# ---- cross-checks shared by all f32 -> 16-bit cases ----

def _check_sign_and_nan(x: np.ndarray, y: np.ndarray, is_nan16) -> None:
    nan_in = fp16.f32_is_nan(x)
    assert np.array_equal(is_nan16(y), nan_in), "NaN in must be NaN out, and nothing else"
    assert np.array_equal(y >> 15, (x >> 31).astype(np.uint16)), "sign must be kept"


def _check_against_numpy_f16(x: np.ndarray, y: np.ndarray) -> None:
    """Independent cross-check: numpy's float32 -> float16 cast, on every non-NaN input."""
    keep = ~fp16.f32_is_nan(x)
    with np.errstate(over="ignore"):
        ref = fp16.f32_values(x[keep]).astype(np.float16).view(np.uint16)
    bad = np.flatnonzero(ref != y[keep])
    assert bad.size == 0, f"f32_to_f16 disagrees with numpy at x=0x{int(x[keep][bad[0]]):08x}"


def _check_table(x: np.ndarray, y: np.ndarray, table) -> None:
    want = _u16([e for _, e in table])
    bad = np.flatnonzero(want != y[:len(table)])
    assert bad.size == 0, (f"x=0x{int(x[bad[0]]):08x}: got 0x{int(y[bad[0]]):04x}, "
                           f"hand table says 0x{int(want[bad[0]]):04x}")


# ---- f32 -> f16 ----

def f16_boundary_inputs() -> tuple[np.ndarray, np.ndarray]:
    """For each fp16 h in 0x0000..0x7BFF, 8 inputs: h, m, m-, m+, -h, -m, -m-, -m+.

    m is the exact midpoint between h and its successor (2^16 for 0x7BFF: the value the next
    exponent would give). fp16 values carry 11 significant bits, so m needs 12: exact in float32
    and in float64. Returns (inputs, the h of each input's group).
    """
    h = np.arange(0x7C00, dtype=np.uint16)
    v = h.view(np.float16).astype(np.float64)  # numpy's decode: independent of fp16.f16_to_f32
    succ = np.append(v[1:], 2.0**16)
    mid = (v + succ) / 2
    m32 = mid.astype(np.float32)
    assert np.array_equal(m32.astype(np.float64), mid), "midpoints must be float32 values"
    hx = fp16.f32_bits(v.astype(np.float32))
    mx = fp16.f32_bits(m32)
    assert np.array_equal(hx, fp16.f16_to_f32(h))
    pos = np.stack([hx, mx, mx - 1, mx + 1], axis=1)  # midpoints are positive and nonzero
    x = np.concatenate([pos, pos | np.uint32(SIGN32)], axis=1).reshape(-1)
    return x.astype(np.uint32), np.repeat(h, 8)


def _check_boundaries(y: np.ndarray, h: np.ndarray, inf: int) -> None:
    """Per group of 8: h -> h, m -> the even one of (h, h+1), m- -> h, m+ -> h+1; mirrored."""
    y = y.reshape(-1, 8).astype(np.int64)
    h = h.reshape(-1, 8)[:, 0].astype(np.int64)
    nxt = np.minimum(h + 1, inf)
    even = np.where(h % 2 == 0, h, h + 1)
    for sign, base in ((0, 0), (SIGN16, 4)):
        assert np.array_equal(y[:, base + 0], h | sign), "value must convert to itself"
        assert np.array_equal(y[:, base + 1], even | sign), "midpoint must go to the even neighbour"
        assert np.array_equal(y[:, base + 2], h | sign), "below the midpoint must round down"
        assert np.array_equal(y[:, base + 3], nxt | sign), "above the midpoint must round up"


F16_SUBNORMAL = both_signs32([
    # float32 subnormals and tiny normals: all far below 2^-25, so +-0
    (0x00000001, 0x0000), (0x00000002, 0x0000), (0x00000003, 0x0000), (0x00012345, 0x0000),
    (0x00400000, 0x0000), (0x007FFFFF, 0x0000), (0x00800000, 0x0000),
    (f32(2.0**-100), 0x0000), (f32(2.0**-30), 0x0000), (f32(2.0**-26), 0x0000),
    (f32(3 * 2.0**-27), 0x0000),
    # 2^-25, half the smallest subnormal: a tie between 0 (even) and 0x0001
    (down(f32(2.0**-25)), 0x0000), (f32(2.0**-25), 0x0000), (up(f32(2.0**-25)), 0x0001),
    (f32(3 * 2.0**-26), 0x0001),
    (down(f32(2.0**-24)), 0x0001), (f32(2.0**-24), 0x0001), (up(f32(2.0**-24)), 0x0001),
    # ties between subnormals: 1.5, 2.5, 3.5 units of 2^-24 go to 2, 2, 4
    (down(f32(3 * 2.0**-25)), 0x0001), (f32(3 * 2.0**-25), 0x0002), (up(f32(3 * 2.0**-25)), 0x0002),
    (f32(5 * 2.0**-25), 0x0002), (f32(7 * 2.0**-25), 0x0004),
    (f32(2.0**-15), 0x0200),
    (f32(1023 * 2.0**-24), 0x03FF),                  # largest subnormal
    (f32(2045 * 2.0**-25), 0x03FE),                  # tie 0x03FE / 0x03FF
    # tie between the largest subnormal and the smallest normal: 0x0400 is even
    (down(f32(2047 * 2.0**-25)), 0x03FF), (f32(2047 * 2.0**-25), 0x0400),
    (up(f32(2047 * 2.0**-25)), 0x0400),
    (down(f32(2.0**-14)), 0x0400), (f32(2.0**-14), 0x0400), (up(f32(2.0**-14)), 0x0400),
    (f32(2.0**-14 + 2.0**-25), 0x0400),              # tie 0x0400 / 0x0401
    (f32(2.0**-14 + 2.0**-24), 0x0401),
    (f32(2.0**-14 + 3 * 2.0**-25), 0x0402),          # tie 0x0401 / 0x0402
], SIGN16)

F16_OVERFLOW = both_signs32([
    (f32(32768.0), 0x7800),
    (f32(65472.0), 0x7BFE),
    (down(f32(65488.0)), 0x7BFE), (f32(65488.0), 0x7BFE), (up(f32(65488.0)), 0x7BFF),  # tie
    (down(f32(65504.0)), 0x7BFF), (f32(65504.0), 0x7BFF), (up(f32(65504.0)), 0x7BFF),
    (f32(65505.0), 0x7BFF), (f32(65519.0), 0x7BFF),
    (f32(65519.99609375), 0x7BFF),                    # largest float32 below 65520
    (f32(65520.0), 0x7C00),                           # tie 0x7BFF / 2^16: even is 2^16 -> inf
    (f32(65520.00390625), 0x7C00),                    # smallest float32 above 65520
    (f32(65535.99609375), 0x7C00), (f32(65536.0), 0x7C00), (f32(65536.0078125), 0x7C00),
    (f32(1e5), 0x7C00), (f32(1e10), 0x7C00), (f32(2.0**127), 0x7C00),
    (0x7F7FFFFF, 0x7C00),                             # FLT_MAX
], SIGN16)

F16_SPECIALS = both_signs32([
    (0x00000000, 0x0000),
    (0x7F800000, 0x7C00),
    (0x7FC00000, 0x7E00),   # quiet NaN
    (0x7FC00001, 0x7E00),
    (0x7FE00000, 0x7F00),
    (0x7F800001, 0x7E00),   # signalling NaN, payload only in the lowest bit
    (0x7F801FFF, 0x7E00),   # payload only in the 13 bits the conversion drops
    (0x7F802000, 0x7E01),   # signalling NaN, lowest payload bit that survives
    (0x7FBFFFFF, 0x7FFF),   # signalling NaN, full payload
    (0x7FFFFFFF, 0x7FFF),
], SIGN16)


def _stream_case(seed: int, distribution: str, count: int, a=None, b=None):
    s = Stream(seed)
    if distribution == "bits32":
        return s.bits32_array(count), {"count": count}
    x = s.uniform_array(a, b, count)
    return fp16.f32_bits(x).copy(), {"count": count, "a": np.float32(a), "b": np.float32(b)}


def _add(ff: FixtureFile, name: str, description: str, x: np.ndarray, y: np.ndarray,
         x_dtype: str, y_dtype: str, seed: int = 0, distribution: str = "handmade",
         params: dict | None = None) -> None:
    assert x.shape == y.shape and x.size > 1
    g = ff.add_case(name, format_version=FORMAT_VERSION, path=ff.family, description=description,
                    seed=seed, distribution=distribution, **(params or {}))
    ff.add_dataset(g, "x", x, bit_dtype=x_dtype)
    ff.add_dataset(g, "expected", y, bit_dtype=y_dtype)


def build_f32_to_f16(ff: FixtureFile) -> None:
    def add(name, description, x, table=None, **kw):
        x = _u32(x)
        y = fp16.f32_to_f16(x)
        _check_sign_and_nan(x, y, fp16.f16_is_nan)
        _check_against_numpy_f16(x, y)
        if table is not None:
            _check_table(x, y, table)
        _add(ff, name, description, x, y, "float32", "float16", **kw)
        return y

    x, h = f16_boundary_inputs()
    y = add("boundaries", "every finite fp16 value, the exact midpoint to its successor and the "
            "midpoint's float32 neighbours, both signs (ties to even, 65520 to inf)", x)
    _check_boundaries(y, h, fp16.F16_INF)

    add("subnormal", "float32 subnormals to +-0, 2^-25 ties to 0, fp16 subnormal ties and the "
        "subnormal/normal border 2^-14, both signs", [p for p, _ in F16_SUBNORMAL], F16_SUBNORMAL)

    x, params = _stream_case(5, "uniform", 8192, a=-2.0**-14, b=2.0**-14)
    y = add("subnormal_random_s5", "uniform values in [-2^-14, 2^-14): the fp16 subnormal range",
            x, seed=5, distribution="uniform", params=params)
    assert np.all((y & 0x7FFF) <= 0x0400)

    add("overflow", "the largest finite fp16 65504, the overflow threshold 65520 (a tie to inf) "
        "and its float32 neighbours, 2^16, huge values and FLT_MAX, both signs",
        [p for p, _ in F16_OVERFLOW], F16_OVERFLOW)

    add("specials", "+-0, +-inf, quiet and signalling NaNs of both signs, payloads in the high "
        "bits and only in the dropped low bits (must stay NaN)",
        [p for p, _ in F16_SPECIALS], F16_SPECIALS)

    for seed in (1, 2):
        x, params = _stream_case(seed, "bits32", 65536)
        add(f"random_bits_s{seed}", "random float32 bit patterns: every class, both signs", x,
            seed=seed, distribution="bits32", params=params)

    x, params = _stream_case(3, "uniform", 16384, a=-70000.0, b=70000.0)
    y = add("random_range_s3", "uniform values in [-70000, 70000): the whole finite fp16 range "
            "and past the overflow threshold", x, seed=3, distribution="uniform", params=params)
    assert np.any((y & 0x7FFF) == 0x7C00) and np.any((y & 0x7FFF) < 0x7C00)


# ---- f32 -> bf16 ----

def bf16_boundary_inputs() -> tuple[np.ndarray, np.ndarray]:
    """For each bf16 h in 0x0000..0x7F7F, 8 inputs: h, m, m-, m+, -h, -m, -m-, -m+.

    The midpoint is computed from values (float64 holds every float32 and 2^128 exactly), with 2^128
    as the successor of the largest finite bf16, and must land on the pattern (h << 16) | 0x8000.
    """
    h = np.arange(0x7F80, dtype=np.uint16)
    hx = h.astype(np.uint32) << np.uint32(16)
    v = fp16.f32_values(hx).astype(np.float64)
    succ = np.append(v[1:], 2.0**128)
    mid = (v + succ) / 2
    m32 = mid.astype(np.float32)
    assert np.array_equal(m32.astype(np.float64), mid), "midpoints must be float32 values"
    mx = fp16.f32_bits(m32)
    assert np.array_equal(mx, hx | np.uint32(0x8000))
    pos = np.stack([hx, mx, mx - 1, mx + 1], axis=1)
    x = np.concatenate([pos, pos | np.uint32(SIGN32)], axis=1).reshape(-1)
    return x.astype(np.uint32), np.repeat(h, 8)


BF16_SUBNORMAL = both_signs32([
    (0x00000001, 0x0000), (0x00007FFF, 0x0000),
    (0x00008000, 0x0000),                    # tie 0 / 0x0001: 0 is even
    (0x00008001, 0x0001), (0x0000FFFF, 0x0001), (0x00010000, 0x0001),
    (0x00018000, 0x0002), (0x00028000, 0x0002),   # ties go to the even neighbour
    (0x00400000, 0x0040), (0x007E8000, 0x007E),
    (0x007F7FFF, 0x007F), (0x007F8000, 0x0080),   # tie largest subnormal / smallest normal
    (0x007FFFFF, 0x0080), (0x00800000, 0x0080),
    (0x00808000, 0x0080), (0x00818000, 0x0082),
], SIGN16)

BF16_SPECIALS = both_signs32([
    (0x00000000, 0x0000),
    (0x7F800000, 0x7F80),
    (0x7FC00000, 0x7FC0),   # quiet NaN
    (0x7FC0FFFF, 0x7FC0),
    (0x7F800001, 0x7FC0),   # payload only in the low 16 bits: must not become inf
    (0x7F808000, 0x7FC0),   # low half exactly 0x8000: a plain tie-to-even would give inf
    (0x7F80FFFF, 0x7FC0),   # a plain round-up would give inf + 1 ulp, which is no longer this NaN
    (0x7F801FFF, 0x7FC0),
    (0x7F802000, 0x7FC0),
    (0x7F810000, 0x7FC1),   # signalling NaN, payload in the kept bits: quieted
    (0x7FBFFFFF, 0x7FFF),
    (0x7FFFFFFF, 0x7FFF),   # a plain round-up would carry into the sign bit
    (0x7F7E8000, 0x7F7E),   # tie, even stays finite
    (0x7F7F7FFF, 0x7F7F),
    (0x7F7F8000, 0x7F80),   # tie above the largest finite bf16: rounds to inf
    (0x7F7FFFFF, 0x7F80),   # FLT_MAX
], SIGN16)


def _bf16_subnormal_inputs() -> list[int]:
    """Hand table, then every bf16 subnormal midpoint with its float32 neighbours, both signs."""
    x = [p for p, _ in BF16_SUBNORMAL]
    for h in range(0x80):
        m = (h << 16) | 0x8000
        x += [m, m - 1, m + 1, (m | SIGN32), (m - 1) | SIGN32, (m + 1) | SIGN32]
    return x


def build_f32_to_bf16(ff: FixtureFile) -> None:
    def add(name, description, x, table=None, **kw):
        x = _u32(x)
        y = fp16.f32_to_bf16(x)
        _check_sign_and_nan(x, y, fp16.bf16_is_nan)
        if table is not None:
            _check_table(x, y, table)
        _add(ff, name, description, x, y, "float32", "bfloat16", **kw)
        return y

    x, h = bf16_boundary_inputs()
    y = add("boundaries", "every finite bf16 value, the exact midpoint to its successor and the "
            "midpoint's float32 neighbours, both signs (0x7F7F8000 ties to inf)", x)
    _check_boundaries(y, h, 0x7F80)

    add("subnormal", "float32 subnormals and bf16 subnormal midpoints (ties to even, up into the "
        "smallest normal), both signs", _bf16_subnormal_inputs(), BF16_SUBNORMAL)

    add("specials", "+-0, +-inf, NaNs of both signs with payloads high and only in the low 16 bits "
        "(must stay NaN), rounding up to inf from the largest finite bf16",
        [p for p, _ in BF16_SPECIALS], BF16_SPECIALS)

    for seed in (1, 2):
        x, params = _stream_case(seed, "bits32", 65536)
        add(f"random_bits_s{seed}", "random float32 bit patterns: every class, both signs", x,
            seed=seed, distribution="bits32", params=params)


# ---- 16-bit -> f32 ----

def build_f16_to_f32(ff: FixtureFile) -> None:
    x = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    y = fp16.f16_to_f32(x)
    nan = fp16.f16_is_nan(x)
    assert np.array_equal(fp16.f32_is_nan(y), nan)
    assert np.array_equal(y >> 31, (x >> 15).astype(np.uint32))
    ref = x.view(np.float16).astype(np.float32).view(np.uint32)
    assert np.array_equal(y[~nan], ref[~nan]), "f16_to_f32 disagrees with numpy"
    assert np.array_equal(fp16.f32_to_f16(y)[~nan], x[~nan]), "f16 -> f32 -> f16 must round trip"
    _add(ff, "all_f16",
         "all 65536 fp16 bit patterns in order: zeros, subnormals, normals, inf, NaN",
         x, y, "float16", "float32")


def build_bf16_to_f32(ff: FixtureFile) -> None:
    x = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    y = fp16.bf16_to_f32(x)
    nan = fp16.bf16_is_nan(x)
    assert np.array_equal(fp16.f32_is_nan(y), nan)
    assert np.array_equal(y & np.uint32(0xFFFF), np.zeros_like(y))
    assert np.array_equal(fp16.f32_to_bf16(y)[~nan], x[~nan]), "bf16 -> f32 -> bf16 must round trip"
    _add(ff, "all_bf16",
         "all 65536 bf16 bit patterns in order: zeros, subnormals, normals, inf, NaN",
         x, y, "bfloat16", "float32")


FAMILIES = [
    ("f32_to_f16", build_f32_to_f16),
    ("f16_to_f32", build_f16_to_f32),
    ("f32_to_bf16", build_f32_to_bf16),
    ("bf16_to_f32", build_bf16_to_f32),
]
