"""Family `rng`: golden/rng/splitmix64.h5, the first values of each distribution of rng.md.

Every case draws from a fresh stream. The values are produced by the vectorized code and, as a
generation-time check, again by the scalar code; the two must agree element for element.
"""

from __future__ import annotations

import numpy as np

from .rng import Stream, float32_below
from .schema import FixtureFile

FORMAT = "rng"
FAMILY = "splitmix64"
FORMAT_VERSION = 1
PATH = "stream"
COUNT = 1000

ONE = np.float32(1.0)
ONE_NEXT = np.nextafter(ONE, np.float32(2.0), dtype=np.float32)  # 1 + 2^-23

# (case name, seed, distribution, parameters, description)
CASES = [
    ("u64_s0", 0, "u64", {}, "raw splitmix64 output, seed 0"),
    ("u64_smax", 0xFFFFFFFFFFFFFFFF, "u64", {},
     "raw output, seed 2^64-1: seed + (i+1)*gamma wraps modulo 2^64 from the first draw"),
    ("u64_s0123456789abcdef", 0x0123456789ABCDEF, "u64", {},
     "raw output, a seed using all 64 bits"),
    ("bits32_s7", 7, "bits32", {}, "bits32 takes the high half of each draw"),
    ("uniform01_s1", 1, "uniform01", {}, "uniform01: top 24 bits times 2^-24, exact, in [0, 1)"),
    ("uniform_s2", 2, "uniform", {"a": np.float32(-3.0), "b": np.float32(5.0)},
     "uniform on [-3, 5): three separately rounded float32 operations"),
    ("uniform_clamp_s11", 11, "uniform", {"a": ONE, "b": ONE_NEXT},
     "uniform on [1, 1+2^-23): a rounded result reaching b is clamped, so every value is 1.0"),
    ("int_range_s3_n10", 3, "int_range", {"n": 10}, "int_range(10): high 64 bits of out * n"),
    ("int_range_s4_n4294967296", 4, "int_range", {"n": 2**32},
     "int_range(2^32), the largest n: equals bits32"),
    ("int_range_s5_n1", 5, "int_range", {"n": 1}, "int_range(1), the smallest n: always 0"),
    ("int_range_s12_n1000003", 12, "int_range", {"n": 1000003},
     "int_range with a prime n needing the full 128-bit product"),
    ("permutation_s6_n1000", 6, "permutation", {"n": 1000},
     "Fisher-Yates permutation of 1000 from the top, one int_range draw per step"),
    ("permutation_s8_n2", 8, "permutation", {"n": 2}, "permutation of 2: exactly one draw"),
    ("permutation_s9_n1", 9, "permutation", {"n": 1}, "permutation of 1: no draw, identity"),
]


SEEDS = {name: seed for name, seed, *_ in CASES}


def draw(seed: int, distribution: str, params: dict, count: int) -> np.ndarray:
    """The first `count` values (for permutation: the n entries) with the vectorized code."""
    s = Stream(seed)
    if distribution == "u64":
        return s.u64_array(count)
    if distribution == "bits32":
        return s.bits32_array(count)
    if distribution == "uniform01":
        return s.uniform01_array(count)
    if distribution == "uniform":
        return s.uniform_array(params["a"], params["b"], count)
    if distribution == "int_range":
        return s.int_range_array(params["n"], count)
    if distribution == "permutation":
        return s.permutation_array(params["n"])
    raise ValueError(distribution)


def draw_scalar(seed: int, distribution: str, params: dict, count: int) -> np.ndarray:
    """The same values with the scalar code, one draw at a time."""
    s = Stream(seed)
    if distribution == "permutation":
        return s.permutation(params["n"])
    one = {
        "u64": s.u64,
        "bits32": s.bits32,
        "uniform01": s.uniform01,
        "uniform": lambda: s.uniform(params["a"], params["b"]),
        "int_range": lambda: s.int_range(params["n"]),
    }[distribution]
    dtype = {"u64": np.uint64, "uniform01": np.float32, "uniform": np.float32}.get(distribution,
                                                                                  np.uint32)
    return np.array([one() for _ in range(count)], dtype=dtype)


def _check_invariants(name: str, distribution: str, params: dict, values: np.ndarray) -> None:
    if distribution in ("uniform01", "uniform"):
        a = params.get("a", np.float32(0.0))
        b = params.get("b", np.float32(1.0))
        assert values.dtype == np.float32
        assert np.all(values >= a) and np.all(values < b), name
    if distribution == "int_range":
        assert int(values.max()) < params["n"], name
    if distribution == "permutation":
        assert np.array_equal(np.sort(values), np.arange(params["n"])), name
    if name == "uniform_clamp_s11":
        # Half of the draws (u > 1/2) round to b and are clamped; the other half round down to a.
        assert float32_below(ONE_NEXT) == ONE
        assert np.all(values == ONE), name
    if distribution == "int_range" and params["n"] == 2**32:
        assert np.array_equal(values, Stream(SEEDS[name]).bits32_array(len(values))), name
    if name == "int_range_s5_n1":
        assert not values.any()
    if len(values) > 2:
        assert len(np.unique(values)) > 1 or name in ("uniform_clamp_s11", "int_range_s5_n1"), name


def build(ff: FixtureFile) -> None:
    for name, seed, distribution, params, description in CASES:
        values = draw(seed, distribution, params, COUNT)
        scalar = draw_scalar(seed, distribution, params, COUNT)
        assert values.dtype == scalar.dtype and np.array_equal(
            values.view(np.uint8), scalar.view(np.uint8)), f"{name}: vectorized != scalar"
        _check_invariants(name, distribution, params, values)

        count = params["n"] if distribution == "permutation" else COUNT
        group = ff.add_case(name, format_version=FORMAT_VERSION, path=PATH,
                            description=description, seed=seed, distribution=distribution,
                            count=count, **params)
        if values.dtype == np.float32:
            ff.add_dataset(group, "values", values.view(np.uint32), bit_dtype="float32")
        else:
            ff.add_dataset(group, "values", values)
