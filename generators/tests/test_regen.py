"""regen.py end to end: determinism and what --check reports on a damaged copy of golden/ (whether the
repository's golden/ is current is ctest's golden.regen_check)."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

GENERATORS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REGEN = os.path.join(GENERATORS, "regen.py")


def run(*args):
    p = subprocess.run([sys.executable, REGEN, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


class Regen(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        try:
            import gguf  # noqa: F401  (a full regeneration writes golden/gguf with it)
        except ImportError:
            if os.environ.get("QG_ALLOW_NO_GGUF") == "1":
                raise unittest.SkipTest("the gguf package is absent (QG_ALLOW_NO_GGUF=1): a full regeneration "
                                        "needs it; ci/test.sh runs these tests where it is installed")
        cls.tmp = tempfile.TemporaryDirectory(prefix="qgold-test-")
        cls.base = os.path.join(cls.tmp.name, "base")
        rc, out = run("--golden", cls.base)
        assert rc == 0, out

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def copy(self):
        d = tempfile.mkdtemp(dir=self.tmp.name)
        dst = os.path.join(d, "golden")
        shutil.copytree(self.base, dst)
        return dst

    def check_fails(self, golden, only, *needles):
        """--check on the one format the damage is in (a full check regenerates every format; the
        full check's own paths are test_check_clean, test_only and test_missing_and_extra_file)."""
        rc, out = run("--check", "--only", only, "--golden", golden)
        self.assertEqual(rc, 1, out)
        first = out.splitlines()[0]
        for needle in needles:
            self.assertIn(needle, first)
        self.assertIn("regen.py", first)
        return first

    def test_help(self):
        rc, out = run("--help")
        self.assertEqual(rc, 0)
        self.assertIn("--check", out)

    def test_check_clean(self):
        rc, out = run("--check", "--golden", self.copy())
        self.assertEqual(rc, 0, out)
        self.assertEqual(len(out.strip().splitlines()), 1)
        self.assertIn("OK", out)

    def test_regen_deterministic(self):
        other = os.path.join(self.tmp.name, "again")
        rc, out = run("--golden", other)
        self.assertEqual(rc, 0, out)
        for dirpath, _, files in os.walk(self.base):
            for name in files:
                a = os.path.join(dirpath, name)
                b = os.path.join(other, os.path.relpath(a, self.base))
                with open(a, "rb") as fa, open(b, "rb") as fb:
                    self.assertEqual(fa.read(), fb.read(), name)

    def test_changed_value(self):
        g = self.copy()
        with h5py.File(os.path.join(g, "fp16", "f32_to_f16.h5"), "r+") as f:
            f["boundaries/expected"][7] ^= 1
        self.check_fails(g, "fp16", "fp16/f32_to_f16.h5", "/boundaries/expected",
                         "content hash differs from regenerated")

    def test_wrong_dtype(self):
        g = self.copy()
        with h5py.File(os.path.join(g, "fp16", "f16_to_f32.h5"), "r+") as f:
            data = f["all_f16/x"][()]
            del f["all_f16/x"]
            ds = f["all_f16"].create_dataset("x", data=data.astype(np.uint32))
            ds.attrs["dtype"] = "float16"
        self.check_fails(g, "fp16", "fp16/f16_to_f32.h5", "/all_f16/x",
                         "dtype uint32 != regenerated uint16")

    def test_missing_dataset(self):
        g = self.copy()
        with h5py.File(os.path.join(g, "rng", "splitmix64.h5"), "r+") as f:
            del f["u64_s0/values"]
        self.check_fails(g, "rng", "rng/splitmix64.h5", "/u64_s0/values", "missing dataset")

    def test_truncated_file(self):
        g = self.copy()
        path = os.path.join(g, "fp16", "bf16_to_f32.h5")
        with open(path, "r+b") as fh:
            fh.truncate(os.path.getsize(path) // 2)
        self.check_fails(g, "fp16", "fp16/bf16_to_f32.h5", "cannot read")

    def test_changed_attribute_type(self):
        g = self.copy()
        with h5py.File(os.path.join(g, "rng", "splitmix64.h5"), "r+") as f:
            f["bits32_s7"].attrs["seed"] = np.int64(7)  # same value, int64 instead of uint64
        self.check_fails(g, "rng", "rng/splitmix64.h5", "/bits32_s7@attrs", "seed", "int64",
                         "uint64")

    def test_dataset_tag_changed(self):
        g = self.copy()
        with h5py.File(os.path.join(g, "fp16", "f32_to_bf16.h5"), "r+") as f:
            f["specials/expected"].attrs["dtype"] = "float16"
        self.check_fails(g, "fp16", "fp16/f32_to_bf16.h5", "/specials/expected@attrs", "dtype")

    def test_missing_and_extra_file(self):
        g = self.copy()
        os.rename(os.path.join(g, "fp16", "f32_to_bf16.h5"), os.path.join(g, "fp16", "zz.h5"))
        self.check_fails(g, "fp16", "fp16/f32_to_bf16.h5", "missing file")
        rc, out = run("--check", "--golden", g)
        self.assertIn("fp16/zz.h5: extra file", out)

    def test_manifest_edited(self):
        g = self.copy()
        path = os.path.join(g, "MANIFEST")
        with open(path) as fh:
            lines = fh.readlines()
        i = next(k for k, line in enumerate(lines) if "/boundaries/x" in line)
        lines[i] = ("0" * 64) + lines[i][64:]
        with open(path, "w") as fh:
            fh.writelines(lines)
        self.check_fails(g, "fp16", "MANIFEST", "/boundaries/x", "hash differs")

    def test_manifest_line_missing(self):
        g = self.copy()
        path = os.path.join(g, "MANIFEST")
        with open(path) as fh:
            lines = [line for line in fh if "/all_bf16@attrs" not in line]
        with open(path, "w") as fh:
            fh.writelines(lines)
        self.check_fails(g, "fp16", "MANIFEST", "/all_bf16@attrs", "no line")

    def test_only(self):
        g = self.copy()
        with h5py.File(os.path.join(g, "fp16", "f32_to_f16.h5"), "r+") as f:
            f["specials/x"][0] ^= 1
        rc, out = run("--check", "--only", "rng", "--golden", g)
        self.assertEqual(rc, 0, out)
        rc, out = run("--check", "--only", "fp16", "--golden", g)
        self.assertEqual(rc, 1, out)
        # Regenerating just fp16 repairs it and keeps MANIFEST complete.
        rc, out = run("--only", "fp16", "--golden", g)
        self.assertEqual(rc, 0, out)
        rc, out = run("--check", "--golden", g)
        self.assertEqual(rc, 0, out)


if __name__ == "__main__":
    unittest.main()
