#!/bin/sh
# expect_verify_gpu.sh STATUS PATTERN QGOLD ARGS...
# expect_verify.sh for CUDA plugins: runs `QGOLD ARGS...` and prints its whole output (the verify table,
# so a failure on the GPU machine explains itself). When qgold says it could not run the plugin's CUDA
# kernels here (no device), the test is skipped (exit 77), unless QG_REQUIRE_GPU=1: then qgold itself
# reports a FAIL row, and the exit status and PATTERN decide as usual.
set -u
want=$1
pattern=$2
shift 2
out=$("$@" 2>&1)
got=$?
printf '%s\n' "$out"
if printf '%s\n' "$out" | grep -q "CUDA plugin kernel not run: " && [ "${QG_REQUIRE_GPU:-0}" != 1 ]; then
    echo "expect_verify_gpu: skipped: no usable CUDA device here (QG_REQUIRE_GPU=1 makes this a failure)"
    exit 77
fi
if [ "$got" -ne "$want" ]; then
    echo "expect_verify_gpu: exit status $got, expected $want" >&2
    exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
    echo "expect_verify_gpu: output does not match /$pattern/" >&2
    exit 1
fi
echo "expect_verify_gpu: exit $got and /$pattern/ as expected"
