#!/usr/bin/env bash
# For GPU runners: build with CUDA, run the whole ctest suite with QG_REQUIRE_GPU=1 (a missing or broken
# GPU fails instead of skipping), then the audit and compute-sanitizer over the rANS fixtures and the
# K-quant ring kernel. JUnit goes
# to build/junit-gpu.xml. Nothing here waits on the network: set-up decides once whether the package
# index answers and, offline, uses what is installed.
#
#   QG_CUDA_ARCH   CUDA architectures to build (default: the runner's own GPU: 90a on Hopper, whose wgmma
#                  kernels need the architecture-specific target, else native; e.g. "80;90a")
#   QG_HDF5_PREFIX an HDF5 C library outside the system paths (DIR/include/hdf5.h, DIR/lib/libhdf5*.so and
#                  the libraries it needs), for a runner without libhdf5-dev and without a network
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
[ -z "${QG_HDF5_PREFIX:-}" ] || export LD_LIBRARY_PATH="$QG_HDF5_PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
T0=$(date +%s); TS=""
timed() { # timed LABEL: says how long the previous step took, then opens the next one
    local now; now=$(date +%s)
    [ -z "$TS" ] || printf '(%d s)\n' "$((now - TS))"
    TS=$now
    step "$* [at $((now - T0)) s]"
}
timed "set-up"
ci/setup.sh
if [ -z "${QG_CUDA_ARCH:-}" ]; then
    cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .' || true)
    if [ "$cc" = "90" ]; then QG_CUDA_ARCH=90a; else QG_CUDA_ARCH=native; fi
fi
timed "build (preset default, CUDA required, architectures $QG_CUDA_ARCH)"
configure_build default -DQG_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$QG_CUDA_ARCH"
# The gguf third oracle is CPU-side and checked by ci/test.sh; an offline runner may lack the package.
export QG_ALLOW_NO_GGUF=${QG_ALLOW_NO_GGUF:-1}
timed "ctest (QG_REQUIRE_GPU=1)"
QG_REQUIRE_GPU=1 ctest --test-dir build -j "$JOBS" --output-on-failure --no-tests=error --output-junit junit-gpu.xml
timed "qgold audit"
build/bin/qgold audit --json build/audit-gpu.json
# The rANS corrupt corpus must leave the device clean: no out-of-bounds access, no race, no trap.
timed "compute-sanitizer: rANS fixtures (corrupt corpus included) on CUDA"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1 || true)
if [ -n "$CS" ]; then
    "$CS" --error-exitcode 1 build/bin/golden_test --format rans --backend cuda --golden golden
    # The K-quant ring kernel (sm_90; elsewhere it never launches and the step checks nothing new) at every
    # batch of every type, shapes whose last block ends inside a 16-byte segment included: its rows by
    # tensor map where they allow it (the default), then by its cp.async copies everywhere
    timed "compute-sanitizer: the K-quant ring kernel (memcheck), tensor-map and cp.async copies"
    QG_CUDA_KQ_RING_MIN=1 "$CS" --tool memcheck --kernel-name kns=k_kq_gemm_ring --error-exitcode 1 build/bin/test_kq_gemm cuda
    QG_CUDA_KQ_TMA=0 QG_CUDA_KQ_RING_MIN=1 "$CS" --tool memcheck --kernel-name kns=k_kq_gemm_ring --error-exitcode 1 build/bin/test_kq_gemm cuda
    # The warpgroup kernel (sm_90a builds) from batch 1, its rows by tensor map: bounds, races, barriers
    timed "compute-sanitizer: the K-quant warpgroup kernel from batch 1 (memcheck, racecheck, synccheck)"
    for tool in memcheck racecheck synccheck; do
        QG_CUDA_KQ_WG_MIN=1 "$CS" --tool "$tool" --kernel-name kns=k_kq_gemm_wg --error-exitcode 1 build/bin/test_kq_gemm cuda q8_k
    done
    # CTAs of fewer row tiles: Q8_K's with 3 of 8 pinned (idle warps, rows split across CTAs) and Q5_K's
    # of 7 warps: races and bounds
    timed "compute-sanitizer: the ring kernel with 3 (Q8_K) and 7 (Q5_K) row tiles a CTA (racecheck, memcheck)"
    for tool in racecheck memcheck; do
        for v in "3 q8_k" "7 q5_k"; do
            QG_CUDA_KQ_RING_PH=4 QG_CUDA_KQ_RING_MIN=1 QG_CUDA_KQ_RING_LT="${v% *}" "$CS" --tool "$tool" --kernel-name kns=k_kq_gemm_ring \
                --error-exitcode 1 build/bin/test_kq_gemm cuda "${v#* }"
        done
    done
    # The INT4 ring kernel (M <= 16) forced, in CTAs of 7 warps: the addresses it carries across ring
    # groups, the copies it issues and its CTA barrier
    timed "compute-sanitizer: the INT4 ring kernel, 7 warps a CTA (memcheck, racecheck)"
    for tool in memcheck racecheck; do
        QG_CUDA_INT4_WS=0 QG_CUDA_INT4_RING_W=7 "$CS" --tool "$tool" --kernel-name kns=w4a16_tc_ring_kernel --error-exitcode 1 \
            build/bin/test_int4_cuda gemm
    done
else
    echo "compute-sanitizer not found: step skipped" >&2
fi
timed "done"
