#!/bin/sh
# test_install.sh BUILD_DIR TMPDIR OUTSIDE_SRC CMAKE
# Installs the build into TMPDIR/prefix, then configures, builds and tests the outside project (a plugin
# written against the installed qgold only: find_package(qgold CONFIG), qgold::plugin,
# qgold_add_plugin_test), whose test runs the installed `qgold verify` on it.
set -eu
build=$1 tmp=$2 src=$3 cmake=$4
rm -rf "$tmp"
mkdir -p "$tmp"
"$cmake" --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log"
for f in bin/qgold include/qgold/plugin.h; do
    [ -e "$tmp/prefix/$f" ] || { echo "test_install: $f not installed" >&2; exit 1; }
done
ls "$tmp"/prefix/lib*/cmake/qgold/qgoldConfig.cmake >/dev/null
ls "$tmp"/prefix/share/qgold/golden/MANIFEST >/dev/null
# Nothing of the build or source tree may be needed: the golden pointer file is not installed.
"$cmake" -S "$src" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release
"$cmake" --build "$tmp/build"
cd "$tmp/build"
"$(dirname "$cmake")/ctest" --output-on-failure
echo "test_install: the outside project built its plugin against $tmp/prefix and its verify test passed"
