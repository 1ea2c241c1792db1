"""The pinned random stream of reference/spec/rng.md: splitmix64 in counter form.

Two implementations live here on purpose:

* the scalar one (``out``, ``Stream.u64()`` ...) uses Python integers masked to 64 bits and is the
  literal transcription of the spec;
* the vectorized one (``out_array``, ``Stream.*_array()``) uses numpy ``uint64`` arrays, whose
  arithmetic wraps modulo 2^64 exactly like the spec's ``mod 2^64``.

The unit tests hold the two to identical results. Vectorized code only ever operates on arrays
(never on numpy scalars), because numpy warns on wrapping scalar arithmetic but not on arrays.
"""

from __future__ import annotations

import numpy as np

MASK64 = (1 << 64) - 1
GOLDEN_GAMMA = 0x9E3779B97F4A7C15
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB
TWO_POW_32 = 1 << 32

_U64 = np.uint64


def out(seed: int, i: int) -> int:
    """out(i) of the stream with this seed (Python ints, exact)."""
    z = (seed + (i + 1) * GOLDEN_GAMMA) & MASK64
    z = ((z ^ (z >> 30)) * MIX1) & MASK64
    z = ((z ^ (z >> 27)) * MIX2) & MASK64
    return z ^ (z >> 31)


def out_array(seed: int, start: int, count: int) -> np.ndarray:
    """out(start), ..., out(start + count - 1) as a uint64 array (wrapping numpy arithmetic)."""
    _check_u64(seed, "seed")
    _check_u64(start, "start")
    if count < 0:
        raise ValueError("count must be >= 0")
    # (i + 1) for i = start .. start+count-1, wrapped to 64 bits like every other step.
    idx = np.arange(count, dtype=_U64) + _U64((start + 1) & MASK64)
    z = idx * _U64(GOLDEN_GAMMA) + _U64(seed)
    z = (z ^ (z >> _U64(30))) * _U64(MIX1)
    z = (z ^ (z >> _U64(27))) * _U64(MIX2)
    return z ^ (z >> _U64(31))


def uniform01_from_out(o: int) -> np.float32:
    # The top 24 bits are an integer below 2^24, so both the conversion and the scaling by a power
    # of two are exact in float32.
    return np.float32(o >> 40) * np.float32(2.0**-24)


def int_range_from_out(o: int, n: int) -> int:
    # High 64 bits of the exact 128-bit product (Python ints are unbounded).
    return (o * n) >> 64


def float32_below(b: np.float32) -> np.float32:
    """The largest float32 strictly below b (b finite)."""
    return np.nextafter(np.float32(b), np.float32(-np.inf), dtype=np.float32)


def _check_u64(v: int, what: str) -> None:
    if not 0 <= int(v) <= MASK64:
        raise ValueError(f"{what} must be an unsigned 64-bit integer, got {v}")


def _check_n(n: int) -> int:
    n = int(n)
    if not 1 <= n <= TWO_POW_32:
        raise ValueError(f"int_range needs 1 <= n <= 2^32, got {n}")
    return n


def as_float32_exact(v: float, what: str) -> np.float32:
    """v as a float32, refusing values that float32 cannot hold exactly (or non-finite ones)."""
    f = np.float32(v)
    if not np.isfinite(f) or float(f) != float(v):
        raise ValueError(f"{what}={v!r} is not a finite float32 value")
    return f


def check_uniform_params(a: float, b: float) -> tuple[np.float32, np.float32]:
    a32 = as_float32_exact(a, "a")
    b32 = as_float32_exact(b, "b")
    if not a32 < b32:
        raise ValueError(f"uniform needs a < b, got a={a!r}, b={b!r}")
    if not np.isfinite(np.float32(b32) - np.float32(a32)):
        raise ValueError("uniform: b - a overflows float32")
    return a32, b32


class Stream:
    """A (seed, counter) pair; every draw returns out(counter) and advances the counter."""

    def __init__(self, seed: int, counter: int = 0):
        _check_u64(seed, "seed")
        _check_u64(counter, "counter")
        self.seed = int(seed)
        self.counter = int(counter)

    # ---- scalar draws: the spec, line by line ----

    def u64(self) -> int:
        o = out(self.seed, self.counter)
        self.counter = (self.counter + 1) & MASK64  # the counter is a 64-bit unsigned integer
        return o

    def bits32(self) -> int:
        return self.u64() >> 32

    def uniform01(self) -> np.float32:
        return uniform01_from_out(self.u64())

    def uniform(self, a: float, b: float) -> np.float32:
        a32, b32 = check_uniform_params(a, b)
        u = self.uniform01()
        # Each line is one float32 operation on float32 operands: one rounding each, no FMA.
        t = np.float32(b32 - a32)
        r = np.float32(a32 + np.float32(t * u))
        if r >= b32:
            r = float32_below(b32)
        return r

    def int_range(self, n: int) -> int:
        return int_range_from_out(self.u64(), _check_n(n))

    def permutation(self, n: int) -> np.ndarray:
        if n < 0:
            raise ValueError("permutation needs n >= 0")
        p = list(range(n))
        for i in range(n - 1, 0, -1):
            j = self.int_range(i + 1)
            p[i], p[j] = p[j], p[i]
        return np.array(p, dtype=np.uint32)

    # ---- vectorized draws: `count` draws at once, same values as `count` scalar calls ----

    def u64_array(self, count: int) -> np.ndarray:
        o = out_array(self.seed, self.counter, count)
        self.counter = (self.counter + count) & MASK64
        return o

    def bits32_array(self, count: int) -> np.ndarray:
        return (self.u64_array(count) >> _U64(32)).astype(np.uint32)

    def uniform01_array(self, count: int) -> np.ndarray:
        top24 = (self.u64_array(count) >> _U64(40)).astype(np.float32)  # exact: < 2^24
        return top24 * np.float32(2.0**-24)

    def uniform_array(self, a: float, b: float, count: int) -> np.ndarray:
        a32, b32 = check_uniform_params(a, b)
        u = self.uniform01_array(count)
        t = np.float32(b32 - a32)
        # float32 array op float32 scalar stays float32 (NEP 50): one rounding per operation.
        r = a32 + t * u
        assert r.dtype == np.float32
        r[r >= b32] = float32_below(b32)
        return r

    def int_range_array(self, n: int, count: int) -> np.ndarray:
        return _high64_times(self.u64_array(count), _check_n(n)).astype(np.uint32)

    def int_range_each(self, ns: np.ndarray) -> np.ndarray:
        """One int_range draw per element of ns (a different n for each draw), as uint64."""
        ns = np.asarray(ns, dtype=_U64)
        if ns.size and (ns.min() < 1 or ns.max() > TWO_POW_32):
            raise ValueError("int_range needs 1 <= n <= 2^32")
        return _high64_times(self.u64_array(ns.size), ns)

    def permutation_array(self, n: int) -> np.ndarray:
        """Same as permutation(), with the n - 1 draws made at once; the swaps stay sequential."""
        if n < 0:
            raise ValueError("permutation needs n >= 0")
        p = np.arange(n, dtype=np.uint32)
        if n <= 1:
            return p
        tops = np.arange(n - 1, 0, -1, dtype=np.int64)  # i = n-1 down to 1, one draw each
        js = self.int_range_each(tops + 1)
        for i, j in zip(tops.tolist(), js.tolist()):
            p[i], p[j] = p[j], p[i]
        return p


def _high64_times(o: np.ndarray, n) -> np.ndarray:
    """floor(o * n / 2^64) for uint64 arrays o and 1 <= n <= 2^32, exactly, in 64-bit arithmetic.

    Split o = hi * 2^32 + lo with hi, lo < 2^32. Then o * n = hi*n * 2^32 + lo*n, where
    hi*n <= (2^32 - 1) * 2^32 < 2^64 and likewise lo*n, so neither product wraps. Since hi*n is an
    integer, floor((hi*n*2^32 + lo*n) / 2^64) = floor((hi*n + floor(lo*n / 2^32)) / 2^32), and the
    inner sum is at most (2^64 - 2^32) + (2^32 - 1) = 2^64 - 1, so it does not wrap either.
    """
    n = np.asarray(n, dtype=_U64)
    hi = o >> _U64(32)
    lo = o & _U64(0xFFFFFFFF)
    return (hi * n + ((lo * n) >> _U64(32))) >> _U64(32)
