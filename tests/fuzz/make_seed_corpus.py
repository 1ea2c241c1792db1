#!/usr/bin/env python3
"""Writes the seed corpus of the fixture-loader fuzz target (tests/fuzz/corpus/loader/).

Seeds are made from a shipped fixture by deterministic damage: truncations at several lengths and
single-byte changes spread over the file, plus empty and non-HDF5 inputs. The pinned stream is not
needed here; positions come from a fixed arithmetic progression so the corpus is reproducible.
usage: make_seed_corpus.py GOLDEN_DIR OUT_DIR
"""
import os
import sys


def main():
    golden, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    src = open(os.path.join(golden, "rng", "splitmix64.h5"), "rb").read()
    seeds = {
        "empty": b"",
        "not_hdf5": b"this is not an HDF5 file\n" * 4,
        "signature_only": src[:8],
        "superblock_only": src[:96],
    }
    for frac in (8, 4, 2):
        seeds[f"truncated_1_of_{frac}"] = src[: len(src) // frac]
    seeds["truncated_last_byte"] = src[:-1]
    step = max(1, len(src) // 24)
    for k, pos in enumerate(range(0, len(src), step)):
        b = bytearray(src)
        b[pos] ^= 0xFF
        seeds[f"flip_{k:02d}_at_{pos}"] = bytes(b)
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as fh:
            fh.write(data)
    print(f"{len(seeds)} seeds in {out}")


if __name__ == "__main__":
    main()
