"""golden/gguf as a third party reads it: gguf-py's GGUFReader parses every valid file the family writes,
finds the tensors the index names at the offsets the generator's header walker computes, and its
decoding (numpy dequantization for Q4_K, Q5_K, Q6_K) hashes to the index's per-tensor values.

gguf is pinned in generators/requirements.txt. Without it this test fails, unless QG_ALLOW_NO_GGUF=1,
in which case it is skipped.
"""

import hashlib
import os
import tempfile
import unittest

import h5py
import numpy as np

from qgold_gen import fam_gguf, golden
from qgold_gen import kquants as kq

try:
    import gguf
    import gguf.quants
    GGUF_ERROR = None
except Exception as e:  # ImportError, or a broken install
    gguf = None
    GGUF_ERROR = f"{type(e).__name__}: {e}"


class GGUFFixtures(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = None
        if gguf is None:
            return
        cls.tmp = tempfile.TemporaryDirectory(prefix="qgold-gguf-")
        golden.write_families(cls.tmp.name, "gguf")
        cls.dir = os.path.join(cls.tmp.name, "gguf")

    @classmethod
    def tearDownClass(cls):
        if cls.tmp is not None:
            cls.tmp.cleanup()

    def setUp(self):
        if gguf is None:
            if os.environ.get("QG_ALLOW_NO_GGUF") == "1":
                self.skipTest(f"gguf not importable ({GGUF_ERROR}); QG_ALLOW_NO_GGUF=1")
            self.fail(f"golden/gguf needs the PyPI package gguf (generators/requirements.txt): {GGUF_ERROR}")

    def cases(self):
        with h5py.File(os.path.join(self.dir, "index.h5"), "r") as f:
            for name in f:
                a = f[name].attrs
                yield name, {k: a[k] for k in a}, {k: f[name][k][()] for k in f[name]}

    def test_files_match_index_hashes(self):
        n = 0
        for name, attrs, data in self.cases():
            with open(os.path.join(self.dir, attrs["file"]), "rb") as fh:
                b = fh.read()
            self.assertEqual(len(b), attrs["bytes"], name)
            self.assertEqual(hashlib.sha256(b).digest(), bytes(data["sha256"]), name)
            n += 1
        self.assertGreater(n, 30)

    def test_valid_files_read_by_gguf_py(self):
        checked = 0
        for name, attrs, data in self.cases():
            if attrs["expect"] != "valid":
                continue
            path = os.path.join(self.dir, attrs["file"])
            r = gguf.GGUFReader(path)
            names = attrs["tensors"].split(",") if attrs["tensors"] else []
            self.assertEqual([t.name for t in r.tensors], names, name)
            with open(path, "rb") as fh:
                walk = fam_gguf.Layout(fh.read())
            data_start = min((t.data_offset - w["offset"] for t, w in zip(r.tensors, walk.tensors)), default=0)
            for i, t in enumerate(r.tensors):
                # the walker's offsets are gguf-py's, relative to one data section start
                self.assertEqual(t.data_offset - walk.tensors[i]["offset"], data_start, f"{name}: {t.name}")
                kind = t.tensor_type.name
                raw = np.asarray(t.data)
                if kind in ("Q4_K", "Q5_K", "Q6_K"):
                    vals = np.asarray(gguf.quants.dequantize(raw.reshape(-1, raw.shape[-1]), t.tensor_type), np.float32)
                    payload = vals.astype("<f4").tobytes()
                elif kind == "Q8_K":  # gguf-py has no Q8_K decoder
                    payload = kq.dequantize_values("q8_k", raw.reshape(-1)).astype("<f4").tobytes()
                elif kind == "F32":
                    payload = raw.astype("<f4").tobytes()
                elif kind == "F16":
                    payload = raw.astype(np.float32).astype("<f4").tobytes()
                elif kind == "BF16":
                    payload = (raw.view(np.uint16).astype(np.uint32) << 16).astype("<u4").tobytes()
                else:
                    payload = raw.tobytes()
                self.assertEqual(hashlib.sha256(payload).digest(), bytes(data["tensor_sha256"][i]), f"{name}: {t.name} ({kind})")
                checked += 1
        self.assertGreater(checked, 20)

    def test_each_invalid_case_names_a_known_rule(self):
        rules = set()
        for name, attrs, _ in self.cases():
            if attrs["expect"] == "invalid":
                self.assertTrue(attrs["error"].startswith("gguf_"), name)
                rules.add(attrs["error"])
        # every rule of the spec has at least one file
        self.assertEqual(len(rules), 20, sorted(rules))


if __name__ == "__main__":
    unittest.main()
