#!/usr/bin/env bash
# For GPU runners: build with CUDA, run the whole ctest suite with QG_REQUIRE_GPU=1 (a missing or broken
# GPU fails instead of skipping), then the audit. JUnit goes to build/junit-gpu.xml.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
step "set-up"
ci/setup.sh
step "build (preset default, CUDA required)"
configure_build default -DQG_CUDA=ON
# The gguf third oracle is CPU-side and checked by ci/test.sh; an offline runner may lack the package.
export QG_ALLOW_NO_GGUF=${QG_ALLOW_NO_GGUF:-1}
step "ctest (QG_REQUIRE_GPU=1)"
QG_REQUIRE_GPU=1 ctest --test-dir build -j "$JOBS" --output-on-failure --no-tests=error --output-junit junit-gpu.xml
step "qgold audit"
build/bin/qgold audit --json build/audit-gpu.json
# The rANS corrupt corpus must leave the device clean: no out-of-bounds access, no race, no trap.
step "compute-sanitizer: rANS fixtures (corrupt corpus included) on CUDA"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1 || true)
if [ -n "$CS" ]; then
    "$CS" --error-exitcode 1 build/bin/golden_test --format rans --backend cuda --golden golden
else
    echo "compute-sanitizer not found: step skipped" >&2
fi
