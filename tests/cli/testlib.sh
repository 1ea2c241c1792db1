# Shared by the CLI test scripts (sourced after QGOLD_BIN, TMP and EMU are set): a `qgold` that runs
# the binary under the emulator, a fresh TMP, and the checks, which count into $checks and $fails.
qgold() { $EMU "$QGOLD_BIN" "$@"; }
fails=0 checks=0
rm -rf "$TMP"; mkdir -p "$TMP"
check() { # check NAME EXPECTED_STATUS [grep-pattern] -- command...
    name=$1 want=$2 pat=$3; shift 4
    checks=$((checks + 1))
    out=$("$@" 2>&1); got=$?
    if [ "$got" -ne "$want" ]; then
        echo "FAIL $name: exit $got, expected $want"; echo "$out" | tail -5; fails=$((fails + 1)); return
    fi
    if [ -n "$pat" ] && ! printf '%s\n' "$out" | grep -q -- "$pat"; then
        echo "FAIL $name: output lacks '$pat'"; echo "$out" | tail -5; fails=$((fails + 1)); return
    fi
    echo "ok   $name"
}
# The bytes of a file as lower-case hex pairs separated by spaces.
hex() { od -An -tx1 -v "$1" | tr -s ' \n' '  ' | sed 's/^ //; s/ $//'; }
bytes() { # bytes NAME FILE EXPECTED_HEX
    checks=$((checks + 1))
    got=$(hex "$2")
    if [ "$got" = "$3" ]; then echo "ok   $1"; else echo "FAIL $1: bytes '$got', expected '$3'"; fails=$((fails + 1)); fi
}
