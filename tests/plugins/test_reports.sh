#!/bin/sh
# test_reports.sh TMPDIR QGOLD-VERIFY-COMMAND...
# The --json and --junit reports of a failing verify: both written, both well formed, and their counts
# agree with the table's summary line.
set -u
tmp=$1
shift
rm -rf "$tmp" && mkdir -p "$tmp" || exit 1
out=$("$@" --json "$tmp/v.json" --junit "$tmp/v.xml" 2>&1)
rc=$?
printf '%s\n' "$out"
fail() { echo "test_reports: $*" >&2; exit 1; }
[ "$rc" -eq 1 ] || fail "exit status $rc, expected 1 (the plugin is broken)"
summary=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$') || fail "no summary line"
p=$(echo "$summary" | cut -d' ' -f1)
f=$(echo "$summary" | cut -d' ' -f3)
[ "$f" -ge 1 ] || fail "no failed row"
ls "$tmp" | grep -v -E '^v\.(json|xml)$' && fail "temporary files left in $tmp"
python3 - "$tmp/v.json" "$tmp/v.xml" "$p" "$f" <<'PY' || fail "reports disagree with the table"
import json, sys, xml.etree.ElementTree as ET
j = json.load(open(sys.argv[1]))
p, f = int(sys.argv[3]), int(sys.argv[4])
rows = j["rows"]
assert j["passed"] == p and j["failed"] == f, (j["passed"], j["failed"], p, f)
assert sum(r["verdict"] == "FAIL" for r in rows) == f
assert all(r["kernel"].startswith("modes_") for r in rows)
t = ET.parse(sys.argv[2]).getroot()
assert t.tag == "testsuite" and int(t.get("failures")) == f, t.attrib
assert len(t.findall("testcase")) == int(t.get("tests"))
assert len([c for c in t.findall("testcase") if c.find("failure") is not None]) == f
print("test_reports: json and junit agree: %d passed, %d failed" % (p, f))
PY
