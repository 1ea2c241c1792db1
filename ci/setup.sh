#!/usr/bin/env bash
# Idempotent set-up for qgold on Debian/Ubuntu.
#
#   ci/setup.sh            what audit.sh and gpu.sh need: cmake, HDF5, the generators' venv
#   ci/setup.sh --cross    also what test.sh needs: clang (fuzzing), gcc-aarch64-linux-gnu, qemu-user,
#                          and the arm64 HDF5 runtime (multiarch) for the aarch64 build
#
# Installs with apt only what is missing; when everything is present it touches nothing and needs no
# network (GPU runners often have none). The venv (.venv) gets the pinned generator requirements; it
# is created with --system-site-packages so that, offline, a system numpy/h5py still serves.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CROSS=0
for a in "$@"; do
    case "$a" in
    --cross) CROSS=1 ;;
    -h | --help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option $a" >&2; exit 2 ;;
    esac
done

have() { command -v "$1" >/dev/null 2>&1; }
missing=()
have cmake || missing+=(cmake)
have make || missing+=(make)
have gcc || missing+=(gcc)
{ [ -f /usr/include/hdf5/serial/hdf5.h ] || [ -f /usr/include/hdf5.h ]; } || missing+=(libhdf5-dev)
have python3 || missing+=(python3)
# A venv needs python3-venv, unless the system python already has numpy and h5py (then it serves).
sys_py_ok() { python3 -c 'import numpy, h5py' >/dev/null 2>&1; }
if [ ! -x "$ROOT/.venv/bin/python" ] && ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1 && ! sys_py_ok; then
    missing+=(python3-venv)
fi
arm64=0
if [ "$CROSS" = 1 ]; then
    have clang || missing+=(clang)
    # libFuzzer's runtime ships separately from the compiler on Debian.
    ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-"$(uname -m)".a >/dev/null 2>&1 || missing+=(libclang-rt-dev)
    have aarch64-linux-gnu-gcc || missing+=(gcc-aarch64-linux-gnu)
    have qemu-aarch64 || missing+=(qemu-user)
    [ -e /usr/lib/aarch64-linux-gnu/libhdf5_serial.so.103 ] || arm64=1
fi

if [ ${#missing[@]} -gt 0 ] || [ "$arm64" = 1 ]; then
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO="sudo -n"
    if ! have apt-get; then
        echo "setup.sh: missing ${missing[*]}$([ "$arm64" = 1 ] && echo ' libhdf5-103-1:arm64') and no apt-get to install them" >&2
        exit 1
    fi
    echo "setup.sh: installing ${missing[*]}$([ "$arm64" = 1 ] && echo ' libhdf5-103-1:arm64')"
    if [ "$arm64" = 1 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
        $SUDO dpkg --add-architecture arm64
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq || { echo "setup.sh: apt-get update failed (offline?); cannot install ${missing[*]}" >&2; exit 1; }
    pkgs=("${missing[@]}")
    [ "$arm64" = 1 ] && pkgs+=(libhdf5-103-1:arm64)
    $SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi

# Generators' venv: present and importable means done.
VENV="$ROOT/.venv"
want_ok() { "$VENV/bin/python" -c 'import numpy, h5py' >/dev/null 2>&1; }
pins_ok() {
    "$VENV/bin/python" - "$ROOT/generators/requirements.txt" <<'PY' >/dev/null 2>&1
import sys, importlib.metadata as md
for line in open(sys.argv[1]):
    line = line.split('#')[0].strip()
    if not line or '==' not in line:
        continue
    name, ver = line.split('==')
    if md.version(name.strip()) != ver.strip():
        sys.exit(1)
PY
}
if [ ! -x "$VENV/bin/python" ] && ! python3 -m venv --system-site-packages "$VENV" >/dev/null 2>&1; then
    rm -rf "$VENV"
    if sys_py_ok; then
        echo "setup.sh: no venv support here; using the system python3, which has numpy and h5py"
        echo "setup.sh: ready ($(cmake --version | head -1); system python3)"
        exit 0
    fi
    echo "setup.sh: cannot create $VENV (python3-venv missing) and the system python3 lacks numpy/h5py" >&2
    exit 1
fi
if ! pins_ok; then
    if ! "$VENV/bin/python" -m pip install -q --disable-pip-version-check --retries 1 --timeout 20 -r "$ROOT/generators/requirements.txt"; then
        echo "setup.sh: could not install the pinned generator requirements (offline?); using what the system provides" >&2
    fi
fi
if ! want_ok; then
    # Some systems keep numpy/h5py where a venv cannot see them (user site, another prefix).
    if sys_py_ok; then
        rm -rf "$VENV"
        echo "setup.sh: ready ($(cmake --version | head -1); the venv cannot see numpy/h5py, using the system python3)"
        exit 0
    fi
    echo "setup.sh: the generators need numpy and h5py; neither pip nor the system provided them" >&2
    exit 1
fi
echo "setup.sh: ready ($(cmake --version | head -1); python $("$VENV/bin/python" -c 'import numpy, h5py; print("numpy", numpy.__version__, "h5py", h5py.__version__)'))"
