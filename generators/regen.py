#!/usr/bin/env python3
"""Regenerate qgold's golden fixtures, or check that golden/ matches what the generators produce.

  python generators/regen.py          rewrite every fixture under golden/ and golden/MANIFEST
  python generators/regen.py --check  regenerate into a temporary directory and compare content
                                      hashes with golden/MANIFEST and with the files in golden/
  --golden DIR                        use DIR instead of the repository's golden/
  --only FORMAT                       restrict to one format (e.g. fp16, rng)

Exit status of --check: 0 when everything matches, 1 with the first difference named otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from qgold_gen import golden  # noqa: E402

DEFAULT_GOLDEN = os.path.join(os.path.dirname(HERE), "golden")
MAX_LISTED = 20


def display(path: str) -> str:
    """path relative to the working directory when below it (golden/fp16/...), else absolute."""
    path = os.path.abspath(path)
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description="Regenerate golden/ fixtures and MANIFEST deterministically, or --check them.")
    parser.add_argument("--check", action="store_true",
                        help="regenerate into a temporary directory and compare with DIR; "
                             "exit 1 naming the first difference")
    parser.add_argument("--golden", metavar="DIR", default=DEFAULT_GOLDEN,
                        help="golden directory (default: the repository's golden/)")
    parser.add_argument("--only", metavar="FORMAT", choices=golden.FORMATS,
                        help="only this format (" + ", ".join(golden.FORMATS) + ")")
    args = parser.parse_args(argv)

    regen_cmd = "python generators/regen.py"
    if os.path.abspath(args.golden) != os.path.abspath(DEFAULT_GOLDEN):
        regen_cmd += f" --golden {args.golden}"
    start = time.monotonic()

    if args.check:
        problems, summary = golden.check(args.golden, args.only, show_root=display(args.golden))
        elapsed = time.monotonic() - start
        if problems:
            print(f"regen --check: FAILED: {problems[0]}; run {regen_cmd} to regenerate",
                  file=sys.stderr)
            for p in problems[1:MAX_LISTED]:
                print(f"  also: {p}", file=sys.stderr)
            if len(problems) > MAX_LISTED:
                print(f"  ... and {len(problems) - MAX_LISTED} more", file=sys.stderr)
            print(f"regen --check: {len(problems)} difference(s) in {display(args.golden)} "
                  f"({elapsed:.1f} s)", file=sys.stderr)
            return 1
        print(f"regen --check: OK: {summary} in {display(args.golden)} ({elapsed:.1f} s)")
        return 0

    lines = golden.regenerate(args.golden, args.only, log=print)
    print(f"wrote {display(os.path.join(args.golden, 'MANIFEST'))}: {lines} lines "
          f"({time.monotonic() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
