#!/usr/bin/env bash
# The whole suite, as CI runs it: set-up, build, regeneration check, ctest on this machine, a mutation
# check, the adding-a-format checklist, the ASan/UBSan build and its ctest, the aarch64 cross build and
# its ctest under qemu, and the libFuzzer build replaying its corpus. JUnit files land in each build directory.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
T0=$(date +%s)
elapsed() { echo "[$(($(date +%s) - T0)) s]"; }

step "set-up $(elapsed)"
ci/setup.sh --cross --ggml

step "build: preset default $(elapsed)"
# Without a GPU the CUDA code is only compiled, never run: sm_90a to machine code (ptxas checks its
# inline PTX and resources), sm_80 to PTX alone (the front end checks every sm_80 path; its ptxas pass,
# half that target's compile time, is skipped). A machine with a GPU builds the preset's targets.
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    configure_build default
else
    configure_build default -DCMAKE_CUDA_ARCHITECTURES="80-virtual;90a"
fi

step "regeneration check $(elapsed)"
"$(generators_python)" generators/regen.py --check

step "ctest: $(uname -m) $(elapsed)"
ctest --preset default -j "$JOBS" --output-junit junit.xml

if [ "$(uname -m)" = x86_64 ]; then
    # Kernels broken on purpose must make the tests ci/mutants.txt names fail; if they pass, the suite
    # cannot see the bugs it exists to catch. Every mutation switch in kernels/ has a line there.
    # shellcheck disable=SC2013
    for sw in $(grep -rhoE 'QG_MUTATION_[A-Z0-9_]+' kernels | sort -u); do
        m=$(printf '%s' "${sw#QG_MUTATION_}" | tr '[:upper:]' '[:lower:]')
        if ! grep -q "^${m}[[:space:]]" ci/mutants.txt; then
            echo "mutation check FAILED: $sw (kernels/) has no line in ci/mutants.txt" >&2
            exit 1
        fi
    done
    while read -r name tests <&3; do
        case $name in '' | '#'*) continue ;; esac
        if [ -z "$tests" ]; then
            echo "mutation check FAILED: ci/mutants.txt names no test for $name" >&2
            exit 1
        fi
        step "mutation check: $name $(elapsed)"
        cmake -S . -B "build-mutant-$name" -DQG_CUDA=OFF -DQG_MUTATION="$name" -DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1
        # The targets the tests run (tests/CMakeLists.txt writes the table at configure time).
        targets=
        for t in $tests; do
            exe=$(awk -v t="$t" '$1 == t { print $2 }' "build-mutant-$name/tests/test-targets.txt")
            if [ -z "$exe" ]; then
                echo "mutation check FAILED: ci/mutants.txt names $t, no test of this build" >&2
                exit 1
            fi
            targets="$targets $exe"
        done
        # shellcheck disable=SC2086
        cmake --build "build-mutant-$name" -j "$JOBS" --target $targets >/dev/null
        for t in $tests; do
            if ctest --test-dir "build-mutant-$name" -R "^$t\$" >/dev/null 2>&1; then
                echo "mutation check FAILED: $t passed with the $name mutant" >&2
                exit 1
            fi
            echo "ok: $t fails on the $name mutant"
        done
    done 3<ci/mutants.txt

    # Adding a format touches its own files and table rows only: walk the README's checklist with the
    # test-only format tq8 in a scratch copy (ci/checklist.sh).
    step "checklist: a test-only format added by table rows $(elapsed)"
    ci/checklist.sh
fi

step "build + ctest: preset asan $(elapsed)"
configure_build asan
ctest --preset asan -j "$JOBS" --output-junit junit.xml

step "build + ctest: preset aarch64 (qemu) $(elapsed)"
configure_build aarch64
ctest --preset aarch64 -j "$JOBS" --output-junit junit.xml

step "build: preset fuzz, corpus replay under libFuzzer $(elapsed)"
# Only the fuzz_* programs: the rest of this tree is the asan preset's, built again with clang.
cmake --preset fuzz -DQG_WERROR="$WERROR" >/dev/null
# shellcheck disable=SC2046
cmake --build --preset fuzz -j "$JOBS" --target $(cmake --build --preset fuzz --target help | grep -oE 'fuzz_[a-z0-9_]+' | sort -u)
# libhdf5 leaks on some corrupt inputs (suppressed); inputs that crash it are isolated in a forked
# child, whose libFuzzer handler still writes an artifact: keep those inside the build tree.
mkdir -p build-fuzz/artifacts
LSAN_OPTIONS="suppressions=$ROOT/tests/lsan.supp" build-fuzz/bin/fuzz_loader -runs=0 -artifact_prefix=build-fuzz/artifacts/ \
    tests/fuzz/corpus/loader 2>&1 | grep -E '^(Done|#[0-9]+ +DONE)'
# Every other target fuzz_<name> replays tests/fuzz/corpus/<name>.
for exe in build-fuzz/bin/fuzz_*; do
    t=${exe##*/fuzz_}
    [ "$t" = loader ] && continue
    echo "fuzz_$t:"
    "$exe" -runs=0 -artifact_prefix=build-fuzz/artifacts/ "tests/fuzz/corpus/$t" 2>&1 | grep -E '^(Done|#[0-9]+ +DONE)'
done
echo "fuzz corpus replayed under libFuzzer"

step "done $(elapsed)"
