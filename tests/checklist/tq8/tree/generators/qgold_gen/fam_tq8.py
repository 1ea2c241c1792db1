"""Family `tq8` (test-only format, reference/spec/tq8.md): golden/tq8/dequant.h5.

A row is a little-endian float32 scale followed by int8 codes; y = RN32(q * s), computed here as the
exact product in float64 rounded once to float32 (q * s has at most 32 significant bits, so the float64
product is exact and its float32 rounding is the single rounding the spec pins).
"""

from __future__ import annotations

import numpy as np

from .schema import FixtureFile

FORMAT = "tq8"
FORMAT_VERSION = 1


def _blocks(scales: np.ndarray, codes: np.ndarray) -> np.ndarray:
    rows = [np.concatenate([np.array([s], dtype="<f4").view(np.uint8), q.astype(np.int8).view(np.uint8)])
            for s, q in zip(scales, codes)]
    return np.concatenate(rows) if rows else np.zeros(0, np.uint8)


def _expected(scales: np.ndarray, codes: np.ndarray) -> np.ndarray:
    exact = codes.astype(np.float64) * scales.astype(np.float64)[:, None]
    return exact.astype(np.float32)


def build(ff: FixtureFile) -> None:
    rng = np.random.default_rng(8)  # fixture content only; fixed seed, regenerated identically
    cases = [
        ("random_3x37", 3, 37, "random codes and scales, a row length that is no multiple of 8"),
        ("one_1x1", 1, 1, "the smallest shape"),
        ("wide_2x64", 2, 64, "whole vectors only"),
    ]
    for name, rows, cols, description in cases:
        codes = rng.integers(-128, 128, size=(rows, cols))
        scales = (rng.standard_normal(rows) * 0.01).astype(np.float32)
        g = ff.add_case(name, format_version=FORMAT_VERSION, path="dequant", description=description, rows=rows, cols=cols)
        ff.add_dataset(g, "blocks", _blocks(scales, codes))
        ff.add_dataset(g, "expected", _expected(scales, codes).view(np.uint32), bit_dtype="float32")
    codes = np.zeros((1, 4), dtype=np.int64)
    g = ff.add_case("inf_scale", format_version=FORMAT_VERSION, path="dequant", description="an infinite scale",
                    expect="invalid", error="int_scale_invalid", rows=1, cols=4)
    ff.add_dataset(g, "blocks", _blocks(np.array([np.inf], np.float32), codes))


FAMILIES = [("dequant", build)]
