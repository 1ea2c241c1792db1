"""Writing all of golden/ and checking a golden/ directory against a fresh regeneration."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Callable

from . import fam_fp16, fam_kquants, fam_rng
from . import fam_spqr
from . import fam_rans
from . import fam_int8
from . import fam_gguf
from . import fam_int4
# qgold:imports-end
from .schema import (FixtureFile, Registry, SchemaError, attr_kind_value, describe_file,
                     manifest_entries, read_manifest, write_manifest)


@dataclass(frozen=True)
class Family:
    format: str
    family: str
    build: Callable[[FixtureFile], None]

    @property
    def rel(self) -> str:
        """File name relative to golden/ (always with '/', as in MANIFEST)."""
        return f"{self.format}/{self.family}.h5"


FAMILIES = [Family(fam_rng.FORMAT, fam_rng.FAMILY, fam_rng.build)] + [
    Family(fam_fp16.FORMAT, family, build) for family, build in fam_fp16.FAMILIES
] + [Family(fmt, family, build) for fmt, family, build in fam_kquants.families()]
FAMILIES += [Family(fmt, family, build) for fmt, family, build in fam_spqr.families()]
FAMILIES += [Family(fam_rans.FORMAT, family, build) for family, build in fam_rans.FAMILIES]
FAMILIES += [Family(fmt, family, build) for fmt, family, build in fam_int8.families()]
FAMILIES += [Family(fam_int4.FORMAT, family, build) for family, build in fam_int4.FAMILIES]
FAMILIES += [Family(fam_gguf.FORMAT, family, build) for family, build in fam_gguf.FAMILIES if fam_gguf.WRITABLE]
# qgold:families-end
# Formats whose generator cannot run here (a missing optional package, allowed by the environment):
# their files are neither written, removed nor compared, and --check says so.
UNCHECKED = {} if fam_gguf.WRITABLE else {fam_gguf.FORMAT: fam_gguf.UNAVAILABLE}
FORMATS = sorted({f.format for f in FAMILIES})


def selected(only: str | None) -> list[Family]:
    return [f for f in FAMILIES if only is None or f.format == only]


def fixture_files(golden: str, only: str | None = None) -> list[str]:
    """*.h5 files under golden/ (or golden/<only>/): relative, '/'-separated, sorted by bytes."""
    found = []
    root = os.path.join(golden, only) if only else golden
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in filenames:
            if name.endswith(".h5"):
                rel = os.path.relpath(os.path.join(dirpath, name), golden).replace(os.sep, "/")
                if rel.split("/")[0] not in UNCHECKED:
                    found.append(rel)
    return sorted(found, key=lambda r: r.encode("utf-8"))


def write_families(golden: str, only: str | None = None, log=None) -> list[str]:
    """Write the selected fixture files into golden/ (each through a temporary name)."""
    registry = Registry()
    written = []
    for fam in selected(only):
        path = os.path.join(golden, *fam.rel.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp"
        try:
            with FixtureFile(tmp, fam.format, fam.family, registry) as ff:
                fam.build(ff)
                cases = len(ff.case_names)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        written.append(fam.rel)
        if log:
            log(f"wrote {fam.rel}: {cases} cases, {os.path.getsize(path)} bytes")
    return written


def regenerate(golden: str, only: str | None = None, log=None) -> int:
    """Rewrite the fixtures and golden/MANIFEST; returns the number of MANIFEST lines.

    A full run also deletes *.h5 files no family produces any more. MANIFEST always describes every
    *.h5 file present afterwards (with --only, the other formats' files are hashed as they are).
    """
    if UNCHECKED:
        raise RuntimeError("cannot regenerate " + "; ".join(f"{k}: {v}" for k, v in UNCHECKED.items()))
    os.makedirs(golden, exist_ok=True)
    written = set(write_families(golden, only, log))
    if only is None:
        for rel in fixture_files(golden):
            if rel not in written:
                os.remove(os.path.join(golden, *rel.split("/")))
                if log:
                    log(f"removed stale {rel}")
    entries = []
    for rel in fixture_files(golden):
        entries += manifest_entries(rel, describe_file(os.path.join(golden, *rel.split("/"))))
    write_manifest(os.path.join(golden, "MANIFEST"), entries)
    return len(entries)


# ---------------------------------------------------------------------------------------------
# --check
# ---------------------------------------------------------------------------------------------

def _attr_diffs(have: dict, have_types: dict, want: dict, want_types: dict) -> list[str]:
    out = []
    for name in sorted(set(have) | set(want)):
        if name not in have:
            out.append(f"attribute {name} missing (regenerated has it)")
        elif name not in want:
            out.append(f"extra attribute {name} (not regenerated)")
        elif have_types[name] != want_types[name]:
            out.append(f"attribute {name} has type {have_types[name]} != regenerated "
                       f"{want_types[name]}")
        else:
            try:
                a, b = attr_kind_value(have[name]), attr_kind_value(want[name])
            except SchemaError as e:
                out.append(f"attribute {name}: {e}")
                continue
            if a != b:
                out.append(f"attribute {name} is {a[1]!r} != regenerated {b[1]!r}")
    return out


def _compare_objects(show: str, have: dict, want: dict) -> list[str]:
    problems = []
    for obj in sorted(set(have) | set(want), key=lambda o: o.encode("utf-8")):
        h, w = have.get(obj), want.get(obj)
        what = "dataset" if (h or w).kind == "dataset" else "attribute set"
        if h is None:
            problems.append(f"{show}: {obj}: missing {what} (regenerated has it)")
        elif w is None:
            problems.append(f"{show}: {obj}: extra {what} (not regenerated)")
        elif h.kind != w.kind:
            problems.append(f"{show}: {obj}: is a {h.kind}, regenerated has a {w.kind}")
        elif h.hash == w.hash and (h.kind == "dataset" or h.attr_types == w.attr_types):
            continue
        elif h.kind == "dataset":
            if h.dtype != w.dtype:
                problems.append(f"{show}: {obj}: dtype {h.dtype} != regenerated {w.dtype}")
            elif h.shape != w.shape:
                problems.append(f"{show}: {obj}: shape {_shape(h.shape)} != regenerated "
                                f"{_shape(w.shape)}")
            else:
                problems.append(f"{show}: {obj}: content hash differs from regenerated "
                                "(dataset changed or generator changed)")
        else:
            diffs = _attr_diffs(h.attrs, h.attr_types, w.attrs, w.attr_types)
            detail = diffs[0] if diffs else "canonical hash differs from regenerated"
            problems.append(f"{show}: {obj}: {detail}")
    return problems


def _shape(shape) -> str:
    return "(" + ",".join(str(d) for d in shape) + ")"


def check(golden: str, only: str | None = None,
          show_root: str | None = None) -> tuple[list[str], str]:
    """Compare golden/ with a fresh regeneration. Returns (problems in order, summary line).

    Problems are ordered by file, then object; MANIFEST problems come after those of the files,
    since a MANIFEST line is only worth checking once the file it describes is known to be right.
    """
    show_root = show_root if show_root is not None else golden

    def show(rel):
        return f"{show_root.rstrip('/')}/{rel}"

    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="qgold-regen-") as tmp:
        write_families(tmp, only)
        want = {rel: describe_file(os.path.join(tmp, *rel.split("/")))
                for rel in fixture_files(tmp, only)}

    if not os.path.isdir(golden):
        return [f"{show_root}: not a directory"], ""

    present = fixture_files(golden, only)
    # Lines MANIFEST must hold: those of every regenerated file, present in golden/ or not.
    want_lines = {(rel, obj): digest
                  for r in want for rel, obj, digest in manifest_entries(r, want[r])}
    for rel in sorted(set(present) | set(want), key=lambda r: r.encode("utf-8")):
        if rel not in present:
            problems.append(f"{show(rel)}: missing file (regenerated has it)")
            continue
        if rel not in want:
            problems.append(f"{show(rel)}: extra file not produced by the generators")
            continue
        try:
            have = describe_file(os.path.join(golden, *rel.split("/")))
        except Exception as e:  # a damaged file may fail in any h5py call; report, don't crash
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            problems.append(f"{show(rel)}: h5py cannot read the file (truncated or corrupt?): "
                            f"{reason}")
            continue
        problems += _compare_objects(show(rel), have, want[rel])

    manifest_path = os.path.join(golden, "MANIFEST")
    manifest_show = show("MANIFEST")
    n_lines = 0
    if not os.path.isfile(manifest_path):
        problems.append(f"{manifest_show}: missing")
    else:
        try:
            lines = read_manifest(manifest_path)
        except (SchemaError, UnicodeDecodeError) as e:
            problems.append(f"{manifest_show}: {e}")
        else:
            if only is not None:
                lines = {k: v for k, v in lines.items() if k[0].startswith(only + "/")}
            lines = {k: v for k, v in lines.items() if k[0].split("/")[0] not in UNCHECKED}
            n_lines = len(lines)
            for key in sorted(set(lines) | set(want_lines),
                              key=lambda k: (k[0].encode("utf-8"), k[1].encode("utf-8"))):
                rel, obj = key
                if key not in lines:
                    problems.append(f"{manifest_show}: no line for {rel} {obj}")
                elif key not in want_lines:
                    problems.append(f"{manifest_show}: line for {rel} {obj}, which is not "
                                    "regenerated")
                elif lines[key] != want_lines[key]:
                    problems.append(f"{manifest_show}: {rel} {obj}: hash differs from regenerated "
                                    "(MANIFEST stale or edited)")

    n_objects = sum(len(v) for v in want.values())
    summary = (f"{len(want)} files, {n_objects} objects and {n_lines} MANIFEST lines match the "
               f"regenerated fixtures")
    for fmt, why in UNCHECKED.items():
        summary += f" ({fmt}/ not checked: {why})"
    return problems, summary
