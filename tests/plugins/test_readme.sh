#!/bin/sh
# plugin.readme: the example plugin printed in README.md (the C block after <!-- example_q4k.c -->) is
# tests/plugins/example_q4k.c, byte for byte, so the README's plugin is the one ctest builds.
# usage: test_readme.sh README EXAMPLE TMP_DIR
set -u
mkdir -p "$3"
awk '/<!-- example_q4k.c -->/ { on = 1; next } on && /^```c$/ { inblock = 1; next } inblock && /^```$/ { exit } inblock { print }' "$1" > "$3/readme_example.c"
if cmp -s "$3/readme_example.c" "$2"; then echo "ok: README's example plugin is $2"; exit 0; fi
echo "FAIL: README's example plugin differs from $2:"; diff "$3/readme_example.c" "$2" | head -20; exit 1
