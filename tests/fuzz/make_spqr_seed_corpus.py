#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_spqr_layer (tests/fuzz/corpus/spqr_layer): one input per
(outlier layout, fault) pair plus a few shapes, from a fixed seed so the corpus is reproducible.
The first bytes of an input choose the layer (see fuzz_spqr_layer.c); the rest are its contents."""

import os
import random
import sys

FAULTS = 12  # F_COUNT in fuzz_spqr_layer.c


def main() -> int:
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "spqr_layer")
    os.makedirs(out, exist_ok=True)
    rng = random.Random(0x5B0F)
    count = 0
    for kind in range(3):
        for fault in range(FAULTS):
            m_sel = rng.randrange(4)
            n = rng.choice([1, 15, 16, 17, 33, 100, 299])
            has_perm = 1 if fault == 8 else fault % 2  # fault 8 (F_PERMDUP) needs a permutation
            batch_sel = rng.randrange(16)
            b3 = kind | (has_perm << 2) | (batch_sel << 3)
            density = rng.choice([0, 1, 3, 7, 250])
            head = bytes([m_sel, (n - 1) & 0xFF, (n - 1) >> 8, b3, fault, density])
            body = bytes(rng.randrange(256) for _ in range(rng.choice([64, 512, 2048])))
            with open(os.path.join(out, f"k{kind}_f{fault:02d}"), "wb") as f:
                f.write(head + body)
            count += 1
    print(f"{count} seeds in {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
