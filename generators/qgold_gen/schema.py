"""Fixture container of reference/spec/fixtures.md: writer, canonical content hashes, MANIFEST.

Writer: one HDF5 file per (format, family), one group per case at the root, datasets without filters
or chunking, attributes with the exact types of the spec. Modification times are switched off on
the root group, every case group and every dataset, so that writing the same content twice gives
the same file bytes with the same HDF5 library.

Canonical hashes (what MANIFEST records; file bytes are never hashed):
  dataset:        sha256( "<dtype>:<shape>\\n" + little-endian element bytes in C order )
  attribute set:  sha256( concat over attributes sorted by name of "<name>=<kind>:<value>\\n" )
                  kind: str (UTF-8 text), int (decimal),
                        float (the float64's 8 big-endian bytes as 16 lower-case hex digits)
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
from dataclasses import dataclass

import h5py
import numpy as np

from . import __version__

SCHEMA_VERSION = 1
GENERATOR = f"qgold_gen {__version__}"
CASE_NAME_RE = re.compile(r"^[a-z0-9_]+$")
BIT_DTYPES = {"float16": np.uint16, "bfloat16": np.uint16, "float32": np.uint32}

# Element types a fixture dataset may have, by their canonical name.
CANONICAL_DTYPES = {
    np.dtype(n): n
    for n in ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
              "float32", "float64")
}


class SchemaError(Exception):
    """A fixture that the writer refuses to produce, or a file the hasher cannot canonicalize."""


# ---------------------------------------------------------------------------------------------
# Writer
# ---------------------------------------------------------------------------------------------

def _typed_attr(name: str, value):
    """Map an attribute value onto the one HDF5 type the spec allows for it."""
    if isinstance(value, str):
        if "\n" in value or "\r" in value:
            raise SchemaError(f"attribute {name}: strings must be one line")
        return value  # h5py writes str as a variable-length UTF-8 string
    if name == "seed":
        if not isinstance(value, (int, np.integer)) or not 0 <= int(value) < 2**64:
            raise SchemaError(f"attribute seed must be an unsigned 64-bit integer, got {value!r}")
        return np.uint64(int(value))
    if isinstance(value, (np.float32, np.float64)):
        return value
    if isinstance(value, (bool, np.bool_)):
        raise SchemaError(f"attribute {name}: booleans are not a fixture type")
    if isinstance(value, (int, np.integer)):
        if not -2**63 <= int(value) < 2**63:
            raise SchemaError(f"attribute {name}: {value} does not fit int64")
        return np.int64(int(value))
    raise SchemaError(f"attribute {name}: unsupported value {value!r} (use str, int, "
                      "np.float32 or np.float64)")


class Registry:
    """case_ids already written in this regeneration: they must be unique across all of golden/."""

    def __init__(self):
        self.case_ids: set[str] = set()

    def claim(self, case_id: str) -> None:
        if case_id in self.case_ids:
            raise SchemaError(f"duplicate case_id {case_id}")
        self.case_ids.add(case_id)


class FixtureFile:
    """golden/<format>/<family>.h5 being written. Use as a context manager."""

    def __init__(self, path: str, fmt: str, family: str, registry: Registry | None = None):
        self.path = path
        self.format = fmt
        self.family = family
        self.registry = registry if registry is not None else Registry()
        self.case_names: set[str] = set()

        fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
        fapl.set_libver_bounds(h5py.h5f.LIBVER_V18, h5py.h5f.LIBVER_V18)
        # h5py.File() takes no track_times; the root group's time tracking is a property of the
        # file creation property list, so the file is created through the low-level API.
        fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
        fcpl.set_obj_track_times(False)
        fid = h5py.h5f.create(os.fsencode(path), h5py.h5f.ACC_TRUNC, fapl=fapl, fcpl=fcpl)
        self.h5 = h5py.File(fid)
        self.h5.attrs["generator"] = GENERATOR
        self.h5.attrs["schema_version"] = np.int64(SCHEMA_VERSION)
        self.h5.attrs["format"] = fmt

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.h5 is not None:
            self.h5.close()
            self.h5 = None

    def add_case(self, name: str, *, format_version: int, path: str, description: str,
                 seed: int = 0, distribution: str = "handmade", expect: str = "valid",
                 error: str | None = None, **extra) -> h5py.Group:
        """Create the case group with the common attributes of fixtures.md (+ extra ones)."""
        if not CASE_NAME_RE.match(name):
            raise SchemaError(f"case name {name!r} is not [a-z0-9_]+")
        if name in self.case_names:
            raise SchemaError(f"{self.path}: duplicate case name {name}")
        if expect not in ("valid", "invalid"):
            raise SchemaError(f"case {name}: expect must be valid or invalid")
        if (expect == "invalid") != (error is not None):
            raise SchemaError(f"case {name}: error is required exactly when expect is invalid")
        if distribution == "handmade" and seed != 0:
            raise SchemaError(f"case {name}: handmade cases have seed 0")
        case_id = f"{self.format}.{self.family}.{name}"
        self.registry.claim(case_id)
        self.case_names.add(name)

        gcpl = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
        gcpl.set_obj_track_times(False)
        group = h5py.Group(h5py.h5g.create(self.h5.id, name.encode(), gcpl=gcpl))
        attrs = {
            "format": self.format,
            "format_version": int(format_version),
            "path": path,
            "case_id": case_id,
            "description": description,
            "seed": seed,
            "distribution": distribution,
            "expect": expect,
        }
        if error is not None:
            attrs["error"] = error
        for key, value in extra.items():
            if key in attrs:
                raise SchemaError(f"case {name}: attribute {key} given twice")
            attrs[key] = value
        for key, value in attrs.items():
            group.attrs[key] = _typed_attr(key, value)
        return group

    @staticmethod
    def add_dataset(group: h5py.Group, name: str, data: np.ndarray,
                    bit_dtype: str | None = None) -> h5py.Dataset:
        """Contiguous, unfiltered dataset; bit_dtype sets the `dtype` attribute of a bit pattern."""
        data = np.ascontiguousarray(data)
        if data.dtype not in CANONICAL_DTYPES:
            raise SchemaError(f"{name}: element type {data.dtype} is not a fixture type")
        if bit_dtype is not None and data.dtype != BIT_DTYPES[bit_dtype]:
            raise SchemaError(f"{name}: {bit_dtype} bit patterns are stored as "
                              f"{np.dtype(BIT_DTYPES[bit_dtype]).name}, not {data.dtype}")
        ds = group.create_dataset(name, data=data.astype(data.dtype.newbyteorder("<")),
                                  track_times=False)
        if bit_dtype is not None:
            ds.attrs["dtype"] = bit_dtype
        return ds


# ---------------------------------------------------------------------------------------------
# Canonical content hashes
# ---------------------------------------------------------------------------------------------

def dtype_name(dtype: np.dtype) -> str:
    name = CANONICAL_DTYPES.get(np.dtype(dtype).newbyteorder("="))
    if name is None:
        raise SchemaError(f"element type {dtype} is not a fixture type")
    return name


def dataset_header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    return f"{dtype_name(dtype)}:{','.join(str(d) for d in shape)}\n".encode("ascii")


def array_content(a: np.ndarray) -> bytes:
    """The canonical byte string of an array: header, then little-endian bytes in C order."""
    a = np.asarray(a)
    le = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
    return dataset_header(a.dtype, a.shape) + le.tobytes(order="C")


def hash_array(a: np.ndarray) -> str:
    return hashlib.sha256(array_content(a)).hexdigest()


def attr_kind_value(value) -> tuple[str, str]:
    """(kind, canonical text) of one scalar attribute value as h5py returns it."""
    if isinstance(value, bytes):
        return "str", value.decode("utf-8")
    if isinstance(value, str):
        return "str", value
    if isinstance(value, np.ndarray):
        if value.shape != ():
            raise SchemaError(f"non-scalar attribute (shape {value.shape})")
        value = value[()]
    if isinstance(value, (np.bytes_, np.str_)):
        return attr_kind_value(value.item())
    if isinstance(value, (bool, np.bool_)):
        raise SchemaError("boolean attribute")
    if isinstance(value, (int, np.integer)):
        return "int", str(int(value))
    if isinstance(value, (float, np.floating)):
        # float32 -> float64 is exact; the 8 big-endian bytes of the float64, in lower-case hex.
        return "float", struct.pack(">d", float(value)).hex()
    raise SchemaError(f"unsupported attribute value {value!r}")


def attrs_canonical(attrs: dict) -> bytes:
    lines = []
    for name in sorted(attrs, key=lambda n: n.encode("utf-8")):
        kind, text = attr_kind_value(attrs[name])
        lines.append(f"{name}={kind}:{text}\n")
    return "".join(lines).encode("utf-8")


def hash_attrs(attrs: dict) -> str:
    return hashlib.sha256(attrs_canonical(attrs)).hexdigest()


def read_attrs(obj) -> dict:
    return {name: obj.attrs[name] for name in obj.attrs}


def attr_type_name(obj, name: str) -> str:
    """HDF5 type of an attribute, in words (for reports: int64 vs uint64, vlen str vs bytes)."""
    dt = obj.attrs.get_id(name).dtype
    info = h5py.check_string_dtype(dt)
    if info is not None:
        length = "variable-length" if info.length is None else f"fixed-length {info.length}"
        return f"{length} {info.encoding} string"
    shape = obj.attrs.get_id(name).shape
    return dt.name + ("" if shape == () else f" shape {shape}")


# ---------------------------------------------------------------------------------------------
# Describing a whole file: every object, its canonical hash and what is needed to report a change
# ---------------------------------------------------------------------------------------------

@dataclass
class ObjectInfo:
    kind: str              # "dataset" or "attrs"
    hash: str              # canonical content hash
    dtype: str = ""        # datasets: canonical dtype name
    shape: tuple = ()      # datasets: shape
    attrs: dict | None = None       # attribute values (group attrs, or a dataset's own attrs)
    attr_types: dict | None = None  # attribute HDF5 types in words
    in_manifest: bool = True        # a dataset's own attributes are compared, not listed


def describe_file(path: str) -> dict[str, ObjectInfo]:
    """Every object of a fixture file keyed by its MANIFEST object name.

    Groups give "/@attrs" (root) and "/<case>@attrs"; datasets "/<case>/<name>". A dataset's own
    attributes (the `dtype` tag of bit patterns) appear as "/<case>/<name>@attrs" with
    in_manifest=False: MANIFEST has no line for them, the regeneration check compares them directly.
    Raises OSError (and friends) when h5py cannot open or read the file.
    """
    objects: dict[str, ObjectInfo] = {}
    with h5py.File(path, "r") as f:
        def attrs_info(obj, in_manifest=True):
            values = read_attrs(obj)
            return ObjectInfo("attrs", hash_attrs(values), attrs=values, in_manifest=in_manifest,
                              attr_types={n: attr_type_name(obj, n) for n in values})

        def visit(group, prefix):
            objects[(prefix or "/") + "@attrs"] = attrs_info(group)  # "/@attrs", "/<case>@attrs"
            for name in group:
                link = group.get(name, getlink=True)
                if not isinstance(link, h5py.HardLink):
                    raise SchemaError(f"{prefix}/{name}: links are not part of a fixture")
                obj = group[name]
                full = f"{prefix}/{name}"
                if isinstance(obj, h5py.Group):
                    visit(obj, full)
                else:
                    data = obj[()]
                    objects[full] = ObjectInfo("dataset", hash_array(data),
                                               dtype=dtype_name(obj.dtype), shape=obj.shape)
                    if len(obj.attrs):
                        objects[full + "@attrs"] = attrs_info(obj, in_manifest=False)

        visit(f, "")
    return objects


# ---------------------------------------------------------------------------------------------
# MANIFEST
# ---------------------------------------------------------------------------------------------

MANIFEST_HEADER = (
    "# qgold golden/MANIFEST: <sha256>  <file relative to golden/>  <object>\n"
    "# Canonical content hashes per reference/spec/fixtures.md (file bytes are not hashed).\n"
    "# Generated; do not edit. Regenerate with: python generators/regen.py\n"
)
_LINE_RE = re.compile(r"^([0-9a-f]{64})  (\S+)  (/\S*)$")


def manifest_key(entry: tuple[str, str, str]):
    return entry[0].encode("utf-8"), entry[1].encode("utf-8")


def manifest_entries(rel: str, objects: dict[str, ObjectInfo]) -> list[tuple[str, str, str]]:
    """(file, object, hash) lines of one file."""
    return [(rel, name, info.hash) for name, info in objects.items() if info.in_manifest]


def format_manifest(entries) -> str:
    body = "".join(f"{h}  {rel}  {obj}\n" for rel, obj, h in sorted(entries, key=manifest_key))
    return MANIFEST_HEADER + body


def write_manifest(path: str, entries) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(format_manifest(entries))
    os.replace(tmp, path)


def read_manifest(path: str) -> dict[tuple[str, str], str]:
    """{(file, object): hash}. A malformed or repeated line raises SchemaError naming it."""
    result: dict[tuple[str, str], str] = {}
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            m = _LINE_RE.match(line)
            if not m:
                raise SchemaError(f"line {number}: not '<sha256>  <file>  <object>': {line!r}")
            key = (m.group(2), m.group(3))
            if key in result:
                raise SchemaError(f"line {number}: {key[0]} {key[1]} listed twice")
            result[key] = m.group(1)
    return result
