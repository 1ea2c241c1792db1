#!/usr/bin/env bash
# Idempotent set-up for qgold on Debian/Ubuntu.
#
#   ci/setup.sh            what audit.sh and gpu.sh need: cmake, a C compiler, HDF5, the generators' venv
#   ci/setup.sh --cross    also what test.sh needs: clang + libFuzzer (fuzzing), the aarch64 cross compiler
#                          with its C library (libc6-dev-arm64-cross), qemu-user, and the arm64 HDF5 runtime
#                          (multiarch) for the aarch64 build
#   ci/setup.sh --fresh-root  also debootstrap, which ci/fresh.sh needs to build a clean Debian root
#   ci/setup.sh --ggml     also llama.cpp's ggml for the plugin.ggml test: the llama-cpp-python source
#                          package from PyPI (pip download), its ggml-base and ggml-cpu libraries built
#                          with CMake and installed with ggml's public headers into .venv/ggml
#   ci/setup.sh --offline  never touch the network (also chosen by itself when the package index does not
#                          answer within a few seconds, and by QG_OFFLINE=1)
#   QG_HDF5_PREFIX=DIR     an HDF5 C library outside the system paths (DIR/include, DIR/lib) instead of
#                          libhdf5-dev; its libraries (and those they need) must be on LD_LIBRARY_PATH
#
# Installs with apt only what is missing; when everything is present it touches nothing and needs no
# network (GPU runners often have none). Before returning it proves the toolchains by building: an HDF5
# program links (always), an aarch64 program links and runs under qemu and a libFuzzer program links
# (--cross). The venv (.venv) gets the pinned generator requirements; it is created with
# --system-site-packages so that, offline, a system numpy/h5py still serves.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CROSS=0
FRESH=0
GGML=0
OFFLINE=${QG_OFFLINE:-0}
for a in "$@"; do
    case "$a" in
    --cross) CROSS=1 ;;
    --fresh-root) FRESH=1 ;;
    --ggml) GGML=1 ;;
    --offline) OFFLINE=1 ;;
    -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option $a" >&2; exit 2 ;;
    esac
done
say() { echo "setup.sh: $*"; }
die() { echo "setup.sh: $*" >&2; exit 1; }

# One reachability decision, taken once and only when something must be fetched: the package index
# (pip's, else PyPI) answers an HTTP request within 5 s, or we are offline. Offline means no retries and
# no waits anywhere below.
NET=""
online() {
    if [ -z "$NET" ]; then
        NET=no
        if [ "$OFFLINE" != 1 ]; then
            local url
            url=$(python3 -m pip config get global.index-url 2>/dev/null || true)
            url=${url:-${PIP_INDEX_URL:-https://pypi.org/simple/}}
            if python3 - "$url" <<'PY' >/dev/null 2>&1; then NET=yes; fi
import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=5).close()
PY
        fi
        [ "$NET" = yes ] || say "offline (no answer from the package index in 5 s, or --offline): no downloads, using what is installed"
    fi
    [ "$NET" = yes ]
}

have() { command -v "$1" >/dev/null 2>&1; }
# QG_HDF5_PREFIX: a copy of the HDF5 C library outside the system paths (PREFIX/include/hdf5.h,
# PREFIX/lib/libhdf5*.so; CMake searches it first), for runners without libhdf5-dev and without a network.
H5P=${QG_HDF5_PREFIX:-}
[ -z "$H5P" ] || [ -f "$H5P/include/hdf5.h" ] || die "QG_HDF5_PREFIX=$H5P: no include/hdf5.h there"
hdf5_header() { [ -n "$H5P" ] || [ -f /usr/include/hdf5/serial/hdf5.h ] || [ -f /usr/include/hdf5.h ]; }
missing=()
have cmake || missing+=(cmake)
have make || missing+=(make)
have gcc || missing+=(gcc)
hdf5_header || missing+=(libhdf5-dev)
have python3 || missing+=(python3)
# A venv needs python3-venv, unless the system python already has numpy and h5py (then it serves).
sys_py_ok() { python3 -c 'import numpy, h5py' >/dev/null 2>&1; }
if [ ! -x "$ROOT/.venv/bin/python" ] && ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1 && ! sys_py_ok; then
    missing+=(python3-venv)
fi
[ "$FRESH" = 1 ] && ! have debootstrap && missing+=(debootstrap)
arm64=0
if [ "$CROSS" = 1 ]; then
    have clang || missing+=(clang)
    # libFuzzer's runtime ships separately from the compiler on Debian.
    ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-"$(uname -m)".a >/dev/null 2>&1 || missing+=(libclang-rt-dev)
    have aarch64-linux-gnu-gcc || missing+=(gcc-aarch64-linux-gnu)
    # The cross C library (crt files, libc headers) is only a Recommends of the compiler.
    [ -e /usr/aarch64-linux-gnu/lib/Scrt1.o ] || missing+=(libc6-dev-arm64-cross)
    have qemu-aarch64 || missing+=(qemu-user)
    [ -e /usr/lib/aarch64-linux-gnu/libhdf5_serial.so.103 ] || arm64=1
fi

if [ ${#missing[@]} -gt 0 ] || [ "$arm64" = 1 ]; then
    want="${missing[*]}"; [ "$arm64" = 1 ] && want+=" libhdf5-103-1:arm64"
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO="sudo -n"
    have apt-get || die "missing${want:+ }$want and no apt-get to install them"
    [ "$OFFLINE" = 1 ] && die "missing $want and --offline was given"
    say "installing $want"
    if [ "$arm64" = 1 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
        $SUDO dpkg --add-architecture arm64
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Bounded: a mirror that does not answer fails the update quickly instead of retrying for minutes.
    $SUDO apt-get update -qq -o Acquire::Retries=0 -o Acquire::http::Timeout=20 ||
        die "apt-get update failed (offline?); cannot install $want"
    pkgs=("${missing[@]}")
    [ "$arm64" = 1 ] && pkgs+=(libhdf5-103-1:arm64)
    $SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null || die "apt-get install $want failed"
fi

# Prove the toolchains by building before any configure: a missing piece fails here, named.
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <hdf5.h>\nint main(void){unsigned a,b,c;return H5get_libversion(&a,&b,&c)<0;}\n' >"$probe/h5.c"
if [ -n "$H5P" ]; then
    hinc=$H5P/include
    hlib=$(ls "$H5P"/lib/libhdf5_serial.so "$H5P"/lib/libhdf5.so 2>/dev/null | head -n 1 || true)
    [ -n "$hlib" ] || die "QG_HDF5_PREFIX=$H5P: no lib/libhdf5_serial.so or lib/libhdf5.so there"
else
    hinc=/usr/include/hdf5/serial; [ -d "$hinc" ] || hinc=/usr/include
    hlib=$(ls /usr/lib/"$(gcc -print-multiarch 2>/dev/null)"/libhdf5_serial.so /usr/lib/*/libhdf5_serial.so /usr/lib/*/libhdf5.so 2>/dev/null | head -n 1 || true)
fi
gcc -I"$hinc" "$probe/h5.c" -o "$probe/h5" ${hlib:+"$hlib"} ${hlib:--lhdf5} 2>"$probe/log" &&
    LD_LIBRARY_PATH="${H5P:+$H5P/lib:}${LD_LIBRARY_PATH:-}" "$probe/h5" ||
    { cat "$probe/log" >&2; die "an HDF5 program does not link (libhdf5-dev)"; }
if [ "$CROSS" = 1 ]; then
    printf '#include <stdio.h>\nint main(void){puts("aarch64 ok");return 0;}\n' >"$probe/a.c"
    aarch64-linux-gnu-gcc "$probe/a.c" -o "$probe/a" 2>"$probe/log" ||
        { cat "$probe/log" >&2; die "an aarch64 program does not link (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross)"; }
    QEMU_LD_PREFIX=/usr/aarch64-linux-gnu qemu-aarch64 "$probe/a" >/dev/null ||
        die "qemu-aarch64 cannot run an aarch64 program (qemu-user)"
    printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t*d,size_t n){(void)d;(void)n;return 0;}\n' >"$probe/f.c"
    clang -fsanitize=fuzzer,address,undefined "$probe/f.c" -o "$probe/f" 2>"$probe/log" ||
        { cat "$probe/log" >&2; die "a libFuzzer program does not link (clang, libclang-rt-dev)"; }
    say "toolchains proven: HDF5, aarch64 + qemu, libFuzzer"
else
    say "toolchain proven: HDF5"
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
        say "no venv support here; using the system python3, which has numpy and h5py"
        say "ready ($(cmake --version | head -1); system python3)"
        exit 0
    fi
    die "cannot create $VENV (python3-venv missing) and the system python3 lacks numpy/h5py"
fi
if ! pins_ok; then
    if online; then
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check --retries 0 --timeout 30 \
            -r "$ROOT/generators/requirements.txt" ||
            echo "setup.sh: could not install the pinned generator requirements; using what the system provides" >&2
    else
        say "pinned generator requirements not installed; using the system's numpy/h5py (gguf oracle may be absent)"
    fi
fi
if ! want_ok; then
    # Some systems keep numpy/h5py where a venv cannot see them (user site, another prefix).
    if sys_py_ok; then
        rm -rf "$VENV"
        say "ready ($(cmake --version | head -1); the venv cannot see numpy/h5py, using the system python3)"
        exit 0
    fi
    die "the generators need numpy and h5py; neither pip nor the system provided them"
fi
# llama.cpp's ggml (--ggml): present means done; offline means the plugin.ggml test skips, saying so.
GGML_PKG_VERSION=0.3.36
ggml_setup() {
    local prefix="$VENV/ggml" src="$VENV/src" work tarball
    if [ -e "$prefix/lib/libggml-cpu.so" ] && [ -e "$prefix/include/ggml-cpu.h" ]; then
        say "ggml: present in $prefix"
        return 0
    fi
    online || { say "ggml: offline, not installed; the plugin.ggml test will skip"; return 0; }
    mkdir -p "$src"
    tarball=$(ls "$src"/llama_cpp_python-"$GGML_PKG_VERSION".tar.gz 2>/dev/null | head -n 1 || true)
    if [ -z "$tarball" ]; then
        say "ggml: downloading the llama-cpp-python $GGML_PKG_VERSION source package"
        timeout 900 "$VENV/bin/python" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
            -d "$src" "llama-cpp-python==$GGML_PKG_VERSION" || die "ggml: pip download llama-cpp-python==$GGML_PKG_VERSION failed"
        tarball=$(ls "$src"/llama_cpp_python-"$GGML_PKG_VERSION".tar.gz | head -n 1)
    fi
    work="$src/llama_cpp_python-$GGML_PKG_VERSION"
    [ -d "$work" ] || tar -xzf "$tarball" -C "$src"
    # Only ggml's base and CPU libraries, as the package's own build makes them (AVX2 where the CPU has it).
    cmake -S "$work/vendor/llama.cpp" -B "$work/build-ggml" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
        -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_OPENMP=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_COMMON=OFF >"$work/ggml-configure.log" || die "ggml: configure failed (see $work/ggml-configure.log)"
    cmake --build "$work/build-ggml" -j"$(nproc)" --target ggml-base ggml-cpu >"$work/ggml-build.log" ||
        die "ggml: build failed (see $work/ggml-build.log)"
    mkdir -p "$prefix/lib" "$prefix/include"
    cp -P "$work"/build-ggml/bin/libggml-base.so* "$work"/build-ggml/bin/libggml-cpu.so* "$prefix/lib/"
    cp "$work"/vendor/llama.cpp/ggml/include/ggml*.h "$prefix/include/"
    say "ggml: installed into $prefix"
}
[ "$GGML" = 1 ] && ggml_setup
say "ready ($(cmake --version | head -1); python $("$VENV/bin/python" -c 'import numpy, h5py; print("numpy", numpy.__version__, "h5py", h5py.__version__)'))"
