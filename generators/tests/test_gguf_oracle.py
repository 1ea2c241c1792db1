"""Third oracle: the PyPI package `gguf` (llama.cpp's gguf-py) dequantizes Q4_K, Q5_K and Q6_K in
numpy. Every block in the K-quant fixtures must decode to the same float32 bits there:

  * dequant cases: gguf's output against the stored expected_f32;
  * quantize (expected_blocks), gemv and dot cases (blocks): gguf's output against
    qgold_gen.kquants.dequantize.

A NaN matches any NaN of the same sign. gguf has no Q8_K decoder (research section 2.8); its block
size table is still checked for all four types.

gguf is pinned in generators/requirements.txt. Without it this test fails, unless the environment
sets QG_ALLOW_NO_GGUF=1, in which case it is skipped.
"""

import os
import unittest
import warnings

import h5py
import numpy as np

from qgold_gen import kquants as kq

try:
    import gguf
    import gguf.quants
    GGUF_ERROR = None
except Exception as e:  # ImportError, or a broken install
    gguf = None
    GGUF_ERROR = f"{type(e).__name__}: {e}"

GENERATORS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_GOLDEN = os.path.join(os.path.dirname(GENERATORS), "golden")
ALLOW_MISSING = os.environ.get("QG_ALLOW_NO_GGUF") == "1"


def require_gguf(test: unittest.TestCase) -> None:
    if gguf is not None:
        return
    if ALLOW_MISSING:
        test.skipTest(f"gguf not importable ({GGUF_ERROR}); skipped because QG_ALLOW_NO_GGUF=1")
    test.fail(f"the third oracle needs the PyPI package gguf (pinned in generators/requirements.txt:"
              f" pip install -r generators/requirements.txt), but it cannot be imported: "
              f"{GGUF_ERROR}. Set QG_ALLOW_NO_GGUF=1 to skip this test instead.")


def gguf_type(t: str):
    return {"q4_k": gguf.GGMLQuantizationType.Q4_K, "q5_k": gguf.GGMLQuantizationType.Q5_K,
            "q6_k": gguf.GGMLQuantizationType.Q6_K, "q8_k": gguf.GGMLQuantizationType.Q8_K}[t]


def gguf_dequant(t: str, blocks: np.ndarray) -> np.ndarray:
    """float32 bit patterns of gguf's decoding of whole blocks (any leading shape)."""
    data = np.ascontiguousarray(blocks, dtype=np.uint8).reshape(-1, kq.BLOCK_BYTES[t])
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # inf and NaN in d/dmin are legal inputs
        y = gguf.quants.dequantize(data, gguf_type(t))
    y = np.asarray(y)
    if y.dtype != np.float32:
        raise AssertionError(f"gguf returned {y.dtype}, not float32")
    return np.ascontiguousarray(y).reshape(-1).view(np.uint32)


def same_bits_or_same_sign_nan(got: np.ndarray, want: np.ndarray) -> str | None:
    """None when equal (NaN: any NaN of the same sign), else a description of the first difference."""
    got = np.asarray(got, np.uint32).reshape(-1)
    want = np.asarray(want, np.uint32).reshape(-1)
    if got.shape != want.shape:
        return f"{got.size} values != {want.size}"
    gnan = np.isnan(got.view(np.float32))
    wnan = np.isnan(want.view(np.float32))
    ok = np.where(wnan, gnan & ((got >> 31) == (want >> 31)), got == want)
    if ok.all():
        return None
    i = int(np.flatnonzero(~ok)[0])
    return (f"{np.count_nonzero(~ok)} differ; first at element {i}: gguf 0x{int(got[i]):08x} "
            f"({got.view(np.float32)[i]!r}), expected 0x{int(want[i]):08x} "
            f"({want.view(np.float32)[i]!r})")


@unittest.skipUnless(os.path.isdir(os.path.join(REPO_GOLDEN, "q4_k")),
                     "the repository has no K-quant fixtures yet")
class GgufOracle(unittest.TestCase):
    def setUp(self):
        require_gguf(self)

    def test_block_sizes(self):
        for t in kq.TYPES:
            self.assertEqual(gguf.GGML_QUANT_SIZES[gguf_type(t)], (256, kq.BLOCK_BYTES[t]), t)

    def test_fixture_blocks_decode_identically(self):
        checked = {t: 0 for t in kq.WEIGHT_TYPES}
        for t in kq.WEIGHT_TYPES:
            for fam in ("dequant", "quantize", "gemv", "dot"):
                path = os.path.join(REPO_GOLDEN, t, fam + ".h5")
                with h5py.File(path, "r") as f:
                    for name, g in f.items():
                        if g.attrs["expect"] != "valid":
                            continue
                        where = f"{t}/{fam}.h5 {name}"
                        if fam == "dequant":
                            blocks = g["blocks"][()]
                            want = g["expected_f32"][()]
                        else:
                            blocks = g["expected_blocks" if fam == "quantize" else "blocks"][()]
                            want = kq.dequantize_values(t, blocks).view(np.uint32)
                        with self.subTest(case=where):
                            problem = same_bits_or_same_sign_nan(gguf_dequant(t, blocks), want)
                            self.assertIsNone(problem, f"{where}: {problem}")
                        checked[t] += blocks.size // kq.BLOCK_BYTES[t]
        for t, n in checked.items():
            self.assertGreater(n, 100, f"{t}: only {n} blocks checked")

    def test_random_blocks(self):
        from qgold_gen.fam_kquants import random_bytes
        for t in kq.WEIGHT_TYPES:
            b, _ = random_bytes(4711, 512 * kq.BLOCK_BYTES[t])
            problem = same_bits_or_same_sign_nan(gguf_dequant(t, b), kq.dequantize_values(t, b)
                                                 .view(np.uint32))
            self.assertIsNone(problem, f"{t}: {problem}")


if __name__ == "__main__":
    unittest.main()
