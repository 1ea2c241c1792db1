#!/bin/sh
# expect_verify.sh STATUS PATTERN QGOLD ARGS...
# Runs `QGOLD ARGS...` (a qgold verify call) and passes when it exits with STATUS and its output (stdout
# and stderr) matches the extended regular expression PATTERN: each broken plugin must be caught by the
# named check, and a verify that passes everything fails here.
set -u
want=$1
pattern=$2
shift 2
out=$("$@" 2>&1)
got=$?
printf '%s\n' "$out"
if [ "$got" -ne "$want" ]; then
    echo "expect_verify: exit status $got, expected $want" >&2
    exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
    echo "expect_verify: output does not match /$pattern/" >&2
    exit 1
fi
echo "expect_verify: exit $got and /$pattern/ as expected"
