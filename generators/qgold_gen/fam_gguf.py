"""Family `gguf`: small GGUF model files written by a third-party writer, and corrupt copies of them.

The files (golden/gguf/<case>.gguf) are written by the PyPI package `gguf` (llama.cpp's gguf-py,
pinned in requirements.txt) through its GGUFWriter. K-quant tensors hold blocks made by this
package's own quantizer (kquants.py); F32, F16 and BF16 tensors hold values from the pinned stream.
Every corrupt file is a valid file with one field changed, located by the header walker below (written
from ../shared/specs/gguf.md), so each violates exactly one rule of the spec.

GGUF files are not HDF5, so they enter golden/MANIFEST through an index: golden/gguf/index.h5 has one
case per .gguf file, whose attributes name the file, its expected verdict and error (and the byte
offset the reader must report), and whose datasets hold the file's SHA-256 and, for a valid file, the
SHA-256 of each tensor's float32 values (raw bytes for types qgold does not decode). MANIFEST covers
index.h5 like any fixture; the index covers the .gguf bytes (reference/spec/fixtures.md, `### GGUF`).

Without the `gguf` package the family cannot be written: build() raises, unless QG_ALLOW_NO_GGUF=1,
where golden.py leaves golden/gguf/ alone (UNAVAILABLE says why).
"""

from __future__ import annotations

import hashlib
import os
import struct

import numpy as np

from . import kquants as kq
from .rng import Stream
from .schema import FixtureFile

try:
    import gguf
    from gguf import GGMLQuantizationType as T
    from gguf import GGUFWriter
    UNAVAILABLE = None
except Exception as e:  # ImportError, or a broken install
    gguf = None
    UNAVAILABLE = f"the PyPI package gguf cannot be imported ({type(e).__name__}: {e})"

FORMAT = "gguf"
FAMILY = "index"
FORMAT_VERSION = 1
ALLOW_MISSING = os.environ.get("QG_ALLOW_NO_GGUF") == "1"
# False only where gguf is missing and QG_ALLOW_NO_GGUF=1: golden.py then leaves golden/gguf/ alone.
WRITABLE = UNAVAILABLE is None or not ALLOW_MISSING

# ggml type ids of the spec's covered types (block elements, block bytes).
GGML = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_K": (12, 256, 144), "Q5_K": (13, 256, 176),
        "Q6_K": (14, 256, 210), "Q8_K": (15, 256, 292), "BF16": (30, 1, 2), "Q8_0": (8, 32, 34)}
KQ = {"Q4_K": "q4_k", "Q5_K": "q5_k", "Q6_K": "q6_k", "Q8_K": "q8_k"}
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


# ---------------------------------------------------------------------------------------------
# Tensor contents
# ---------------------------------------------------------------------------------------------

def _uniform(seed: int, n: int, a: float, b: float) -> np.ndarray:
    return Stream(seed).uniform_array(a, b, n)


def _tensor(kind: str, shape: tuple, seed: int):
    """(array for GGUFWriter, raw dtype or None, float32 values or None) of a tensor of `shape`
    (numpy order: the last axis is ne0)."""
    n = int(np.prod(shape))
    if kind in KQ:
        x = _uniform(seed, n, -2.0, 2.0)
        blocks = kq.quantize_blocks(KQ[kind], x)
        rows = n // shape[-1]
        data = blocks.reshape(rows, -1).reshape(*shape[:-1], -1)
        return data, getattr(T, kind), kq.dequantize_values(KQ[kind], blocks).reshape(-1)
    if kind == "F32":
        v = _uniform(seed, n, -4.0, 4.0).reshape(shape)
        return v, None, v.reshape(-1)
    if kind == "F16":
        v = _uniform(seed, n, -4.0, 4.0).astype(np.float16).reshape(shape)
        return v, None, v.astype(np.float32).reshape(-1)
    if kind == "BF16":
        v = _uniform(seed, n, -4.0, 4.0)
        bits = (v.view(np.uint32) >> 16).astype(np.uint16)  # truncation: any bf16 bits will do
        vals = (bits.astype(np.uint32) << 16).view(np.float32)
        return bits.reshape(shape), T.BF16, vals
    if kind == "Q8_0":  # a type qgold lists and skips: arbitrary bytes
        raw = (Stream(seed).bits32_array(n // 32 * 34) & 0xFF).astype(np.uint8)
        return raw.reshape(*shape[:-1], shape[-1] // 32 * 34), T.Q8_0, None
    raise ValueError(kind)


def write_gguf(path: str, kvs: list, tensors: list, alignment: int | None = None) -> list:
    """A GGUF file through GGUFWriter. kvs: (key, kind, value); tensors: (name, kind, shape, seed).
    Returns [(name, kind, float32 values or None, raw bytes)] in file order."""
    w = GGUFWriter(path, "qgold")
    for key, kind, value in kvs:
        getattr(w, "add_" + kind)(key, value)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    out = []
    for name, kind, shape, seed in tensors:
        data, raw, vals = _tensor(kind, shape, seed)
        w.add_tensor(name, data, raw_dtype=raw)
        out.append((name, kind, vals, np.ascontiguousarray(data).tobytes()))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out


# ---------------------------------------------------------------------------------------------
# A header walker (from the spec): where every field is, so corruptions hit exactly one field
# ---------------------------------------------------------------------------------------------

class Layout:
    def __init__(self, b: bytes):
        self.kv = []       # dicts: key, key_at, type_at, value_at, type, (array) count_at, elem_at
        self.tensors = []  # dicts: name, info_at, ndims_at, dims_at [..], type_at, offset_at, ne, type, offset
        self.nested_type_at = []  # type field offsets of nested array bodies, by depth (2, 3, ...)
        p = 8
        self.n_tensors, self.n_kv = struct.unpack_from("<QQ", b, p)
        p = 24
        for _ in range(self.n_kv):
            kv = {"key_at": p}
            n = struct.unpack_from("<Q", b, p)[0]
            kv["key"] = b[p + 8:p + 8 + n].decode()
            p += 8 + n
            kv["type_at"] = p
            kv["type"] = struct.unpack_from("<I", b, p)[0]
            p += 4
            kv["value_at"] = p
            p = self._value(b, p, kv["type"], kv, 1)
            self.kv.append(kv)
        for _ in range(self.n_tensors):
            t = {"info_at": p}
            n = struct.unpack_from("<Q", b, p)[0]
            t["name"] = b[p + 8:p + 8 + n].decode()
            p += 8 + n
            t["ndims_at"] = p
            nd = struct.unpack_from("<I", b, p)[0]
            p += 4
            t["dims_at"] = [p + 8 * i for i in range(nd)]
            t["ne"] = list(struct.unpack_from(f"<{nd}Q", b, p))
            p += 8 * nd
            t["type_at"] = p
            t["type"] = struct.unpack_from("<I", b, p)[0]
            t["offset_at"] = p + 4
            t["offset"] = struct.unpack_from("<Q", b, p + 4)[0]
            p += 12
            self.tensors.append(t)
        self.infos_end = p

    def _value(self, b, p, t, kv, depth):
        if t in SCALAR:
            return p + SCALAR[t]
        if t == 8:
            return p + 8 + struct.unpack_from("<Q", b, p)[0]
        assert t == 9
        if depth > 1:
            self.nested_type_at.append((depth, p))
        et, n = struct.unpack_from("<IQ", b, p)
        if kv is not None and depth == 1:
            kv["elem_at"], kv["count_at"] = p, p + 4
        p += 12
        for _ in range(n):
            p = self._value(b, p, et, None, depth + 1)
        return p

    def kv_named(self, key):
        return next(k for k in self.kv if k["key"] == key)


def _put(b: bytearray, at: int, fmt: str, value) -> None:
    struct.pack_into(fmt, b, at, value)


# ---------------------------------------------------------------------------------------------
# The files
# ---------------------------------------------------------------------------------------------

MIXED_KVS = [
    ("general.name", "string", "qgold mixed fixture"),
    ("t.u8", "uint8", 250), ("t.i8", "int8", -100), ("t.u16", "uint16", 65000),
    ("t.i16", "int16", -32000), ("t.u32", "uint32", 4000000000), ("t.i32", "int32", -2000000000),
    ("t.f32", "float32", 0.15625), ("t.bool", "bool", True), ("t.u64", "uint64", 2**63 + 5),
    ("t.i64", "int64", -(2**62)), ("t.f64", "float64", -1.0e300),
    ("t.empty_string", "string", ""),
    ("t.utf8", "string", "Gr\u00fc\u00dfe \u2603"),
    ("t.array_i32", "array", list(range(-3, 40))),
    ("t.array_f32", "array", [0.5, -1.25, 3.0]),
    ("t.array_str", "array", ["<s>", "</s>", "hello", "", "\u00e9t\u00e9"]),
    ("t.array_nested", "array", [[1, 2, 3], [4], [5, 6]]),
]

MIXED_TENSORS = [
    ("blk.0.attn_q.weight", "Q4_K", (4, 512), 101),
    ("blk.0.attn_k.weight", "Q5_K", (3, 256), 102),
    ("blk.0.ffn_down.weight", "Q6_K", (2, 768), 103),
    ("blk.0.act.q8k", "Q8_K", (2, 256), 104),
    ("token_embd.weight", "F16", (5, 33), 105),
    ("output_norm.weight", "F32", (37,), 106),
    ("blk.0.attn_norm.bf16", "BF16", (3, 19), 107),
]

SHAPES_TENSORS = [
    ("t3d", "Q4_K", (2, 3, 256), 201),
    ("t4d", "F16", (2, 1, 3, 5), 202),
    ("t1d_q6", "Q6_K", (512,), 203),
    ("skipped.q8_0", "Q8_0", (2, 64), 204),
    ("tiny", "F32", (1,), 205),
]

# (case, description, kvs, tensors, alignment, version)
VALID = [
    ("mixed_v3", "every covered type, every KV value type incl. nested and string arrays, default alignment 32",
     MIXED_KVS, MIXED_TENSORS, None, 3),
    ("mixed_v2", "the mixed file as version 2 (same layout: 64-bit counts)", MIXED_KVS, MIXED_TENSORS, None, 2),
    ("align64_shapes", "general.alignment 64; 1-D, 3-D and 4-D tensors; a Q8_0 tensor listed as skipped",
     [("general.name", "string", "shapes")], SHAPES_TENSORS, 64, 3),
    ("align8", "general.alignment 8, the smallest allowed", [("t.u32", "uint32", 1)], MIXED_TENSORS[:3], 8, 3),
    ("no_tensors", "key-values only, zero tensors", MIXED_KVS[:4], [], None, 3),
]

BASE_TENSORS = [("a.weight", "Q4_K", (2, 256), 301), ("b.weight", "F16", (2, 16), 302),
                ("c.weight", "Q6_K", (1, 256), 303)]
BASE_KVS = [("t.name", "string", "corrupt base"), ("t.arr", "array", [1, 2, 3]),
            ("t.deep", "array", [[[[[[[[1]]]]]]]])]  # depth 8: the deepest allowed


def _corruptions(b: bytes, L: Layout):
    """(case, description, error, offset or -1, bytes) for every rule of the spec."""
    def patched(*edits):
        c = bytearray(b)
        for at, fmt, v in edits:
            _put(c, at, fmt, v)
        return bytes(c)

    name_kv = L.kv_named("t.name")
    arr_kv = L.kv_named("t.arr")
    t0, t1, t2 = L.tensors
    out = [
        ("bad_magic", "first byte changed: not GGUF", "gguf_bad_magic", 0, patched((0, "<B", ord("X")))),
        ("version_1", "version 1 (32-bit counts)", "gguf_bad_version", 4, patched((4, "<I", 1))),
        ("version_4", "version 4", "gguf_bad_version", 4, patched((4, "<I", 4))),
        ("big_endian", "version written big-endian", "gguf_bad_version", 4, patched((4, ">I", 3))),
        ("truncated_header", "file cut inside the header counts", "gguf_truncated", 16, b[:20]),
        ("truncated_kv", "file cut inside a string value", "gguf_truncated", name_kv["value_at"] + 8,
         b[:name_kv["value_at"] + 8 + 3]),
        ("string_too_long", "a string value of length 2^20 + 1", "gguf_string_too_long", name_kv["value_at"],
         patched((name_kv["value_at"], "<Q", 2**20 + 1))),
        ("key_huge_length", "a key of length 2^63", "gguf_string_too_long", name_kv["key_at"],
         patched((name_kv["key_at"], "<Q", 2**63))),
        ("array_too_long", "an array of 2^32 + 1 elements", "gguf_array_too_long", arr_kv["count_at"],
         patched((arr_kv["count_at"], "<Q", 2**32 + 1))),
        ("array_past_end", "an array of 2^32 u64 elements, past the end of the file", "gguf_truncated",
         arr_kv["count_at"] + 8, patched((arr_kv["elem_at"], "<I", 10), (arr_kv["count_at"], "<Q", 2**32))),
        ("tensor_count_huge", "tensor_count 2^20 + 1", "gguf_count_too_large", 8, patched((8, "<Q", 2**20 + 1))),
        ("kv_count_huge", "kv_count 2^64 - 1", "gguf_count_too_large", 16, patched((16, "<Q", 2**64 - 1))),
        ("value_type_13", "a key-value of type 13", "gguf_value_type_unknown", name_kv["type_at"],
         patched((name_kv["type_at"], "<I", 13))),
        ("array_elem_type_99", "an array element type 99", "gguf_value_type_unknown", arr_kv["elem_at"],
         patched((arr_kv["elem_at"], "<I", 99))),
        ("duplicate_tensor", "the third tensor renamed to the first's name", "gguf_duplicate_tensor", t2["info_at"],
         patched(*[(t2["info_at"] + 8 + i, "<B", ord(ch)) for i, ch in enumerate(t0["name"])])),
        ("n_dims_0", "n_dims 0", "gguf_n_dims_invalid", t1["ndims_at"], patched((t1["ndims_at"], "<I", 0))),
        ("n_dims_5", "n_dims 5", "gguf_n_dims_invalid", t1["ndims_at"], patched((t1["ndims_at"], "<I", 5))),
        ("dim_zero", "a row count of 0", "gguf_dim_zero", t0["dims_at"][1], patched((t0["dims_at"][1], "<Q", 0))),
        ("shape_overflow", "ne0 * ne1 overflows 64 bits", "gguf_shape_overflow", t0["dims_at"][1],
         patched((t0["dims_at"][1], "<Q", 2**62))),
        ("bytes_overflow", "the byte size of an F16 tensor overflows 64 bits (its element count does not)",
         "gguf_shape_overflow", t1["dims_at"][0], patched((t1["dims_at"][0], "<Q", 2**63), (t1["dims_at"][1], "<Q", 1))),
        ("ne0_not_multiple", "Q4_K ne0 = 384, not a multiple of 256", "gguf_ne0_not_multiple", t0["dims_at"][0],
         patched((t0["dims_at"][0], "<Q", 384))),
        ("type_unknown", "tensor type id 99", "gguf_type_unknown", t1["type_at"], patched((t1["type_at"], "<I", 99))),
        ("offset_misaligned", "a tensor offset 8 past an alignment multiple", "gguf_offset_misaligned", t1["offset_at"],
         patched((t1["offset_at"], "<Q", t1["offset"] + 8))),
        ("out_of_bounds_offset", "the last tensor moved past the end of the file", "gguf_tensor_out_of_bounds", t2["info_at"],
         patched((t2["offset_at"], "<Q", t2["offset"] + 4096))),
        ("out_of_bounds_truncated", "the file cut 1 byte short of the end of the tensor that ends last",
         "gguf_tensor_out_of_bounds", *_truncate_to_last(b, L)),
        ("offset_huge", "a tensor offset of 2^64 - 32: data start + offset overflows", "gguf_tensor_out_of_bounds",
         t2["info_at"], patched((t2["offset_at"], "<Q", 2**64 - 32))),
        ("overlap", "the second tensor's offset set to the first's", "gguf_tensor_overlap", t1["info_at"],
         patched((t1["offset_at"], "<Q", t0["offset"]))),
        ("alignment_12", "general.alignment 12", "gguf_alignment_invalid", -1, None),
        ("alignment_0", "general.alignment 0", "gguf_alignment_invalid", -1, None),
    ]
    return out


def _truncate_to_last(b: bytes, L: Layout) -> tuple[int, bytes]:
    """(info offset of the tensor that ends last, the file cut one byte short of that end)."""
    data_start = -(-L.infos_end // 32) * 32
    ends = []
    for t in L.tensors:
        _, be, bb = next(v for v in GGML.values() if v[0] == t["type"])
        nbytes = t["ne"][0] // be * bb * int(np.prod(t["ne"][1:]))
        ends.append((data_start + t["offset"] + nbytes, t["info_at"]))
    end, info_at = max(ends)
    return info_at, b[:end - 1]


def _sha(data: bytes) -> np.ndarray:
    return np.frombuffer(hashlib.sha256(data).digest(), np.uint8).copy()


def _write_bytes(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def build(ff: FixtureFile) -> None:
    if UNAVAILABLE is not None:
        raise RuntimeError(f"golden/gguf needs {UNAVAILABLE}: pip install -r generators/requirements.txt "
                           "(QG_ALLOW_NO_GGUF=1 leaves golden/gguf/ unchecked instead)")
    out_dir = os.path.dirname(os.path.abspath(ff.path))

    def add(case, desc, data, expect, error=None, offset=-1, tensors=None):
        fname = f"{case}.gguf"
        _write_bytes(os.path.join(out_dir, fname), data)
        extra = {"file": fname, "bytes": len(data)}
        if expect == "invalid":
            extra["offset"] = int(offset)
        g = ff.add_case(case, format_version=FORMAT_VERSION, path="check", description=desc, expect=expect,
                        error=error, **extra)
        ff.add_dataset(g, "sha256", _sha(data))
        if tensors is not None:
            names = [t[0] for t in tensors]
            g.attrs["tensors"] = ",".join(names)  # names have no comma
            hashes = np.stack([_sha(v.astype("<f4").tobytes() if v is not None else raw) for _, _, v, raw in tensors]) \
                if tensors else np.zeros((0, 32), np.uint8)
            ff.add_dataset(g, "tensor_sha256", hashes)

    tmp = os.path.join(out_dir, ".gguf-writer.tmp")
    try:
        for case, desc, kvs, tensors, align, version in VALID:
            contents = write_gguf(tmp, kvs, tensors, align)
            with open(tmp, "rb") as fh:
                b = bytearray(fh.read())
            _put(b, 4, "<I", version)
            add(case, desc, bytes(b), "valid", tensors=contents)

        # Non-finite block scales: a valid container whose K-quant blocks break ggml's row rule.
        contents = write_gguf(tmp, [("t.name", "string", "nonfinite")], MIXED_TENSORS[:3])
        with open(tmp, "rb") as fh:
            b = bytearray(fh.read())
        L = Layout(bytes(b))
        data_start = -(-L.infos_end // 32) * 32
        q4, q5, q6 = L.tensors
        _put(b, data_start + q4["offset"] + 144 * 5, "<H", 0x7C00)      # block 5: d = +inf
        _put(b, data_start + q5["offset"] + 176 * 2 + 2, "<H", 0x7E00)  # block 2: dmin = NaN
        _put(b, data_start + q6["offset"] + 210 * 3 + 208, "<H", 0xFC00)  # block 3: d = -inf
        add("nonfinite_blocks", "Q4_K d = inf (block 5), Q5_K dmin = NaN (block 2), Q6_K d = -inf (block 3)",
            bytes(b), "invalid", "gguf_block_nonfinite", -1)

        # The corrupt files: one field of a small valid file each.
        write_gguf(tmp, BASE_KVS, BASE_TENSORS)
        with open(tmp, "rb") as fh:
            base = fh.read()
        L = Layout(base)
        for case, desc, error, offset, data in _corruptions(base, L):
            if case.startswith("alignment_"):
                value = int(case.split("_")[1])
                write_gguf(tmp, BASE_KVS, BASE_TENSORS, alignment=32)  # the writer pads to 32 either way
                with open(tmp, "rb") as fh:
                    a = bytearray(fh.read())
                kv = Layout(bytes(a)).kv_named("general.alignment")
                _put(a, kv["value_at"], "<I", value)
                data, offset = bytes(a), kv["value_at"]
            add(case, desc, data, "invalid", error, offset)
        # one level deeper than allowed: the innermost array becomes an array of one empty array
        deep = _deeper(base, L)
        add("nesting_9", "arrays nested 9 levels deep", deep[0], "invalid", "gguf_nesting_too_deep", deep[1])
        write_gguf(tmp, BASE_KVS, [("n" * 65, "F16", (2, 16), 401)])
        with open(tmp, "rb") as fh:
            data = fh.read()
        add("name_65_bytes", "a tensor name of 65 bytes", data, "invalid", "gguf_tensor_name_too_long",
            Layout(data).tensors[0]["info_at"])
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _deeper(base: bytes, L: Layout) -> tuple[bytes, int]:
    """The base file with its depth-8 nesting made depth 9: the innermost array [1] (type i32, count 1,
    one i32) is replaced by an array of one empty i32 array (type array, count 1, then type i32, count 0),
    which is 12 bytes longer; t.deep is rebuilt in place and the rest of the file shifted."""
    depth, at = max(L.nested_type_at)
    assert depth == 8
    old = struct.pack("<IQi", 5, 1, 1)
    assert base[at:at + len(old)] == old
    new = struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 5, 0)
    return base[:at] + new + base[at + len(old):], at + 12


FAMILIES = [(FAMILY, build)]
