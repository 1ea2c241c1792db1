#!/usr/bin/env python3
"""Writes the seed corpora of the rANS fuzz targets (tests/fuzz/corpus/rans_decode/, rans_roundtrip/).

rans_decode: the containers of the shipped rANS fixtures (encode cases up to 20 KiB, every corrupt
case), plus deterministic damage to two of them: truncations and byte changes at positions from a fixed
arithmetic progression (header, table, metadata, states, words, padding).
rans_roundtrip: option bytes and weight patterns in the layout fuzz_rans_roundtrip.c reads (M, K as
little-endian u16 mod 301, one option byte, then weight bytes).
usage: make_rans_seed_corpus.py GOLDEN_DIR OUT_DIR   (OUT_DIR gets rans_decode/ and rans_roundtrip/)
"""
import os
import struct
import sys

import h5py


def write(d, name, data):
    with open(os.path.join(d, name), "wb") as fh:
        fh.write(bytes(data))


def decode_seeds(golden, out):
    os.makedirs(out, exist_ok=True)
    n = 0
    small = []
    for family, limit in (("encode", 20480), ("corrupt", None)):
        with h5py.File(os.path.join(golden, "rans", family + ".h5"), "r") as f:
            for case in sorted(f.keys()):
                c = f[case]["container"][()].tobytes()
                if limit is not None and len(c) > limit:
                    continue
                write(out, f"{family}_{case}", c)
                n += 1
                if family == "encode" and 2000 < len(c) <= limit:
                    small.append((case, c))
    write(out, "empty", b"")
    write(out, "magic_only", b"RANS")
    n += 2
    for case, c in small[:2]:
        for frac in (2, 3):
            write(out, f"trunc_{case}_1_of_{frac}", c[: len(c) // frac])
            n += 1
        step = max(1, len(c) // 20)
        for k, pos in enumerate(range(0, len(c), step)):
            b = bytearray(c)
            b[pos] ^= 0x5A
            write(out, f"flip_{case}_{k:02d}_at_{pos}", b)
            n += 1
    return n


def roundtrip_seeds(out):
    os.makedirs(out, exist_ok=True)
    seeds = {
        "empty_0x0": struct.pack("<HHB", 0, 0, 0),
        "one_by_one": struct.pack("<HHB", 1, 1, 0x08) + b"\x80",
        "all_same_256": struct.pack("<HHB", 256, 256, 0x00) + b"\x7f",
        "two_symbol_257": struct.pack("<HHB", 257, 3, 0x4c) + b"\x05" * 200 + b"\x80",
        "ramp_auto": struct.pack("<HHB", 255, 257, 0xf4) + bytes(range(256)),
        "per_tile_modes": struct.pack("<HHB", 300, 300, 0x0f) + bytes([0, 1, 2, 3]) + bytes((i * 7) % 256 for i in range(997)),
        "gradient": struct.pack("<HHB", 40, 260, 0x13) + bytes((i * i) % 253 for i in range(1031)),
        "signed_edges": struct.pack("<HHB", 64, 256, 0x2a) + b"\x7f\x80" * 31 + b"\x00",
    }
    for name, data in seeds.items():
        write(out, name, data)
    return len(seeds)


def main():
    golden, out = sys.argv[1], sys.argv[2]
    a = decode_seeds(golden, os.path.join(out, "rans_decode"))
    b = roundtrip_seeds(os.path.join(out, "rans_roundtrip"))
    print(f"{a} + {b} seeds in {out}")


if __name__ == "__main__":
    main()
