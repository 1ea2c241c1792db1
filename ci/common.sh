# Shared by the ci/ scripts: repository root, job count, CI strictness.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
JOBS=${QG_JOBS:-$(nproc 2>/dev/null || echo 2)}
# Warnings are errors in CI (CI=true) and wherever QG_WERROR=ON is set.
WERROR=OFF
if [ "${CI:-}" = true ] || [ "${QG_WERROR:-}" = ON ]; then WERROR=ON; fi
step() { printf '\n==== %s ====\n' "$*"; }
configure_build() { # configure_build PRESET [cmake -D args...]
    local preset=$1; shift
    cmake --preset "$preset" -DQG_WERROR="$WERROR" "$@" >/dev/null
    cmake --build --preset "$preset" -j "$JOBS"
}
# The generators' python: the venv ci/setup.sh made, else the system python3 (call after set-up).
generators_python() {
    if [ -x "$ROOT/.venv/bin/python" ]; then echo "$ROOT/.venv/bin/python"; else echo python3; fi
}
