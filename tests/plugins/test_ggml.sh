#!/bin/sh
# test_ggml.sh PLUGIN LIBDIR TMPDIR QGOLD-VERIFY-COMMAND...   (PLUGIN "-": not built; LIBDIR is then the prefix)
# qgold verify over llama.cpp's ggml kernels (tests/plugins/ggml_plugin.c). Skips (77) when the ggml
# libraries are not installed (ci/setup.sh --ggml). The verdicts are ggml's: any failure fails the test,
# and the table is kept in TMPDIR (ggml.json, ggml.xml) for the record.
set -u
plugin=$1 lib=$2 tmp=$3
if [ "$plugin" = - ]; then
    echo "plugin.ggml: skipped: no ggml public headers in $lib/include at configure time (ci/setup.sh --ggml installs llama-cpp-python's ggml there, then re-run cmake; offline runners and cross builds skip)"
    exit 77
fi
shift 3
if [ ! -e "$lib/libggml-cpu.so" ] || [ ! -e "$lib/libggml-base.so" ]; then
    echo "plugin.ggml: skipped: $lib has no libggml-base.so/libggml-cpu.so (ci/setup.sh --ggml installs them)"
    exit 77
fi
mkdir -p "$tmp"
QGOLD_GGML_LIB_DIR=$lib "$@" --plugin "$plugin" --json "$tmp/ggml.json" --junit "$tmp/ggml.xml"
