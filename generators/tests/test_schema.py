"""Writer types and refusals, canonical hashes, MANIFEST format."""

import hashlib
import os
import tempfile
import unittest

import h5py
import numpy as np

from qgold_gen import schema
from qgold_gen.schema import FixtureFile, Registry, SchemaError


class CanonicalHash(unittest.TestCase):
    def test_dataset_header_and_bytes(self):
        a = np.array([1, 2, 0x1234], dtype=np.uint16)
        want = b"uint16:3\n" + b"\x01\x00\x02\x00\x34\x12"
        self.assertEqual(schema.array_content(a), want)
        self.assertEqual(schema.hash_array(a), hashlib.sha256(want).hexdigest())
        # Big-endian input hashes as its little-endian bytes.
        self.assertEqual(schema.array_content(a.astype(">u2")), want)

    def test_header_shapes(self):
        self.assertEqual(schema.array_content(np.float64(1.0)),
                         b"float64:\n" + b"\x00" * 6 + b"\xf0\x3f")
        self.assertEqual(schema.array_content(np.zeros((2, 3), np.int32))[:10], b"int32:2,3\n")
        self.assertEqual(schema.array_content(np.zeros(0, np.uint8)), b"uint8:0\n")
        with self.assertRaises(SchemaError):
            schema.array_content(np.zeros(2, np.float16))

    def test_attrs_canonical(self):
        attrs = {"seed": np.uint64(2**64 - 1), "b": np.float32(1.5), "a": "x y", "n": np.int64(-3),
                 "B": np.float64(-0.1)}
        want = ("B=float:bfb999999999999a\n"
                "a=str:x y\n"
                "b=float:3ff8000000000000\n"
                "n=int:-3\n"
                "seed=int:18446744073709551615\n").encode()
        self.assertEqual(schema.attrs_canonical(attrs), want)
        self.assertEqual(schema.hash_attrs(attrs), hashlib.sha256(want).hexdigest())

    def test_manifest_round_trip(self):
        entries = [("rng/b.h5", "/c@attrs", "1" * 64), ("fp16/a.h5", "/x@attrs", "2" * 64),
                   ("fp16/a.h5", "/x/y", "3" * 64), ("fp16/a.h5", "/@attrs", "4" * 64)]
        text = schema.format_manifest(entries)
        body = [line for line in text.splitlines() if not line.startswith("#")]
        self.assertEqual(body, ["4" * 64 + "  fp16/a.h5  /@attrs",
                                "3" * 64 + "  fp16/a.h5  /x/y",
                                "2" * 64 + "  fp16/a.h5  /x@attrs",
                                "1" * 64 + "  rng/b.h5  /c@attrs"])
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "MANIFEST")
            schema.write_manifest(path, entries)
            self.assertEqual(schema.read_manifest(path),
                             {(f, o): h for f, o, h in entries})
            with open(path, "a") as fh:
                fh.write("zz  broken\n")
            with self.assertRaisesRegex(SchemaError, "line 8"):
                schema.read_manifest(path)


class Writer(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def write_sample(self, path, registry=None):
        with FixtureFile(path, "fmt", "fam", registry) as ff:
            g = ff.add_case("case_a", format_version=1, path="p", description="one line",
                            seed=5, distribution="uniform", count=3, a=np.float32(-1.0))
            ff.add_dataset(g, "x", np.array([1, 2, 3], np.uint32), bit_dtype="float32")
            ff.add_dataset(g, "y", np.array([1.5, 2.5], np.float64))
        return path

    def test_attribute_types(self):
        with h5py.File(self.write_sample(self.path("a.h5")), "r") as f:
            self.assertEqual(f.attrs["generator"], schema.GENERATOR)
            self.assertEqual(f.attrs.get_id("schema_version").dtype, np.int64)
            g = f["case_a"]
            types = {n: g.attrs.get_id(n).dtype for n in g.attrs}
            self.assertEqual(types["seed"], np.uint64)
            self.assertEqual(types["format_version"], np.int64)
            self.assertEqual(types["count"], np.int64)
            self.assertEqual(types["a"], np.float32)
            info = h5py.check_string_dtype(types["description"])
            self.assertEqual((info.encoding, info.length), ("utf-8", None))
            self.assertEqual(g.attrs["case_id"], "fmt.fam.case_a")
            self.assertNotIn("error", g.attrs)
            x = g["x"]
            self.assertEqual(x.attrs["dtype"], "float32")
            self.assertIsNone(x.chunks)
            self.assertIsNone(x.compression)
            self.assertEqual(x.id.get_create_plist().get_nfilters(), 0)
            self.assertNotIn("dtype", g["y"].attrs)

    def test_byte_reproducible(self):
        a = self.write_sample(self.path("a.h5"))
        b = self.write_sample(self.path("b.h5"))
        with open(a, "rb") as fa, open(b, "rb") as fb:
            self.assertEqual(fa.read(), fb.read())

    def test_refusals(self):
        reg = Registry()
        with FixtureFile(self.path("r.h5"), "fmt", "fam", reg) as ff:
            ff.add_case("c", format_version=1, path="p", description="d")
            with self.assertRaisesRegex(SchemaError, "duplicate case name"):
                ff.add_case("c", format_version=1, path="p", description="d")
            for bad in ("Upper", "a-b", "", "a/b"):
                with self.assertRaises(SchemaError):
                    ff.add_case(bad, format_version=1, path="p", description="d")
            with self.assertRaises(SchemaError):
                ff.add_case("two_lines", format_version=1, path="p", description="a\nb")
            with self.assertRaises(SchemaError):
                ff.add_case("bad_float", format_version=1, path="p", description="d", a=0.5)
            with self.assertRaises(SchemaError):
                ff.add_case("bad_invalid", format_version=1, path="p", description="d",
                            expect="invalid")
            g = ff.add_case("g", format_version=1, path="p", description="d")
            with self.assertRaises(SchemaError):
                ff.add_dataset(g, "x", np.zeros(3, np.uint32), bit_dtype="float16")
            with self.assertRaises(SchemaError):
                ff.add_dataset(g, "x", np.zeros(3, np.float16))
        # The same case_id again, from another file of the same run, is refused.
        with FixtureFile(self.path("s.h5"), "fmt", "fam", reg) as ff:
            with self.assertRaisesRegex(SchemaError, "duplicate case_id fmt.fam.c"):
                ff.add_case("c", format_version=1, path="p", description="d")

    def test_describe_file(self):
        objects = schema.describe_file(self.write_sample(self.path("a.h5")))
        self.assertEqual(sorted(objects), ["/@attrs", "/case_a/x", "/case_a/x@attrs", "/case_a/y",
                                           "/case_a@attrs"])
        self.assertEqual(objects["/case_a/x"].hash,
                         schema.hash_array(np.array([1, 2, 3], np.uint32)))
        self.assertFalse(objects["/case_a/x@attrs"].in_manifest)
        lines = schema.manifest_entries("fmt/fam.h5", objects)
        self.assertEqual(len(lines), 4)


if __name__ == "__main__":
    unittest.main()
