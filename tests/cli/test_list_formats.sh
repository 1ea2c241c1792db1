#!/bin/sh
# unit.formats.list: the golden tests' formats and backends (tests/CMakeLists.txt) are those `qgold list`
# registers as compiled into this build: every format x backend pair, no more, no fewer.
# usage: test_list_formats.sh QGOLD "FORMATS" "BACKENDS" [EMULATOR...]
set -u
QGOLD_BIN=$1 FORMATS=$2 BACKENDS=$3
shift 3
out=$("$@" "$QGOLD_BIN" list) || { echo "FAIL: qgold list exited $?"; exit 1; }
# Columns: format path backend tier status reason; a row is compiled unless its reason says otherwise.
have=$(printf '%s\n' "$out" | awk 'NR > 1 && !($5 == "unavailable" && $6 == "not" && $7 == "compiled:") { print $1 "." $3 }' | sort -u)
want=$(for f in $FORMATS; do for b in $BACKENDS; do echo "$f.$b"; done; done | sort -u)
if [ -z "$have" ]; then
    echo "FAIL: no kernel rows in qgold list"; printf '%s\n' "$out" | head -5; exit 1
fi
missing=$(printf '%s\n' "$have" | grep -vxF -e "$want")
extra=$(printf '%s\n' "$want" | grep -vxF -e "$have")
[ -n "$missing" ] && echo "FAIL: compiled (qgold list) but no golden test (tests/CMakeLists.txt):" $missing
[ -n "$extra" ] && echo "FAIL: golden test (tests/CMakeLists.txt) but not compiled (qgold list):" $extra
[ -z "$missing$extra" ] || exit 1
echo "ok: golden tests cover" $want
