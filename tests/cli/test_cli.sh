#!/bin/sh
# cli.qgold: exit codes and messages of the qgold CLI, including audits over broken fixture copies.
# usage: test_cli.sh QGOLD GOLDEN_DIR TMP_DIR [EMULATOR...]   (the emulator runs cross-built binaries)
set -u
QGOLD_BIN=$1 GOLDEN=$2 TMP=$3
shift 3
EMU="$*"
qgold_env() { v=$1; shift; env "$v" $EMU "$QGOLD_BIN" "$@"; }
. "$(dirname "$0")/testlib.sh"

check help 0 "usage: qgold" -- qgold --help
check no-args 2 "usage: qgold" -- qgold
check unknown-command 2 "unknown command" -- qgold frobnicate
check list-help 0 "usage: qgold list" -- qgold list --help
check audit-help 0 "usage: qgold audit" -- qgold audit --help
check list 0 "fp16.*f32_to_f16.*ref.*available" -- qgold list
check list-bad-format 2 "unknown format" -- qgold list --format nope
check audit-bad-format 2 "unknown format" -- qgold audit --format nope
check audit-bad-backend 2 "unknown backend" -- qgold audit --backend nope
check audit-missing-value 2 "needs a value" -- qgold audit --golden
check audit-extra-arg 2 "unexpected argument" -- qgold audit --frob
check bad-force-isa 2 "QG_FORCE_ISA" -- qgold_env QG_FORCE_ISA=sse9 audit
check audit-ref 0 "fp16.*f32_to_f16.*ref.*PASS" -- qgold audit --backend ref --golden "$GOLDEN" --json "$TMP/audit.json"
checks=$((checks + 1))
if grep -q '"rows"' "$TMP/audit.json" && grep -q '"verdict": "PASS"' "$TMP/audit.json"; then echo "ok   audit-json"; else echo "FAIL audit-json"; fails=$((fails + 1)); fi
check bench-quick 0 "f32_to_f16.*ref.*BW_read" -- qgold bench --format fp16 --backend ref --quick --json "$TMP/bench.json"
checks=$((checks + 1))
if [ "$(grep -c '"backend": "ref"' "$TMP/bench.json")" -eq 4 ]; then echo "ok   bench-json"; else echo "FAIL bench-json"; fails=$((fails + 1)); fi
check bench-no-format 2 "format is required" -- qgold bench
check bench-bad-reps 2 "reps must be" -- qgold bench --format fp16 --reps 2
check scalar-forced 0 "excluded by QG_FORCE_ISA=scalar" -- qgold_env QG_FORCE_ISA=scalar list

# quantize / dequant on raw files: any bytes are valid K-quant blocks, so a slice of a shipped file
# serves as deterministic input; dequant -> quantize -> dequant must run and sizes must be checked.
head -c 576 "$GOLDEN/rng/splitmix64.h5" > "$TMP/src.q4k"
check dequant-raw 0 "576 bytes of q4_k" -- qgold dequant --format q4_k --rows 2 --cols 512 --in "$TMP/src.q4k" --out "$TMP/v.f32"
check quantize-raw 0 "2 x 512 float32 -> 576 bytes" -- qgold quantize --format q4_k --rows 2 --cols 512 --in "$TMP/v.f32" --out "$TMP/b.q4k"
check quantize-wrong-size 1 "expected 8192" -- qgold quantize --format q4_k --rows 4 --cols 512 --in "$TMP/v.f32" --out "$TMP/x"
check quantize-bad-cols 2 "kq_cols_not_multiple" -- qgold quantize --format q6_k --rows 1 --cols 4544 --in "$TMP/v.f32" --out "$TMP/x"
check dequant-wrong-size 1 "expected 704" -- qgold dequant --format q5_k --rows 2 --cols 512 --in "$TMP/src.q4k" --out "$TMP/x"
check dequant-bad-format 2 "unknown K-quant format" -- qgold dequant --format q3_k --rows 2 --cols 512 --in "$TMP/src.q4k" --out "$TMP/x"
check quantize-missing 2 "are required" -- qgold quantize --format q4_k --rows 2

# rans encode / decode / check on raw files (any bytes are int8 codes; scales are any 4-byte values).
head -c 21000 "$GOLDEN/rng/splitmix64.h5" > "$TMP/w.i8"
head -c 1200 "$GOLDEN/rng/splitmix64.h5" > "$TMP/s.f32"
check rans-help 0 "usage: qgold rans" -- qgold rans --help
check rans-no-sub 2 "needs a subcommand" -- qgold rans
check rans-bad-sub 2 "unknown rans subcommand" -- qgold rans frob
check rans-encode 0 "300 x 70 int8 -> .* ratio" -- qgold rans encode --rows 300 --cols 70 --in "$TMP/w.i8" --scales "$TMP/s.f32" --out "$TMP/w.rans" --checksums
check rans-check 0 "^OK .*ratio" -- qgold rans check "$TMP/w.rans"
check rans-decode 0 "300 x 70 int8" -- qgold rans decode --in "$TMP/w.rans" --out "$TMP/back.i8"
checks=$((checks + 1))
if cmp -s "$TMP/w.i8" "$TMP/back.i8"; then echo "ok   rans-roundtrip"; else echo "FAIL rans-roundtrip"; fails=$((fails + 1)); fi
check rans-encode-pred 0 "ratio" -- qgold rans encode --rows 300 --cols 70 --in "$TMP/w.i8" --scales "$TMP/s.f32" --out "$TMP/w3.rans" --predictor 3
check rans-bad-pred 2 "predictor takes" -- qgold rans encode --rows 300 --cols 70 --in "$TMP/w.i8" --scales "$TMP/s.f32" --out "$TMP/x" --predictor 7
check rans-wrong-size 1 "expected 21300" -- qgold rans encode --rows 300 --cols 71 --in "$TMP/w.i8" --scales "$TMP/s.f32" --out "$TMP/x"
head -c 1196 "$TMP/s.f32" > "$TMP/s299.f32"
check rans-wrong-scales 1 "expected 1200" -- qgold rans encode --rows 300 --cols 70 --in "$TMP/w.i8" --scales "$TMP/s299.f32" --out "$TMP/x"
check rans-missing 2 "needs --rows" -- qgold rans encode --rows 300
check rans-check-no-file 2 "needs a file" -- qgold rans check
check rans-check-missing 1 "cannot open" -- qgold rans check "$TMP/nope.rans"
head -c 100 "$TMP/w.rans" > "$TMP/short.rans"
check rans-check-short 1 "rans_container_truncated in the file length" -- qgold rans check "$TMP/short.rans"
{ printf 'SNAR'; tail -c +5 "$TMP/w.rans"; } > "$TMP/snar.rans"
check rans-check-snar 1 "rans_bad_magic" -- qgold rans check "$TMP/snar.rans"
check rans-decode-snar 1 "rans_bad_magic" -- qgold rans decode --in "$TMP/snar.rans" --out "$TMP/x"
{ head -c 20 "$TMP/w.rans"; printf "\\$(printf %o $(($(od -An -tu1 -j 20 -N1 "$TMP/w.rans") ^ 1)))"; tail -c +22 "$TMP/w.rans"; } > "$TMP/k.rans" # K (byte 20) bit 0 flipped
check rans-check-k-flip 1 "rans_container_checksum in the container" -- qgold rans check "$TMP/k.rans"
# One payload byte of the last tile changed: checksums make it an error located at tile 1.
# One payload byte of tile 1 changed: with checksums the whole-file CRC names it first; without them the
# tile's own decode does, with the tile's position.
flip_near_end() { cp "$1" "$2"; sz=$(wc -c < "$2"); off=$((sz - 40))
    old=$(od -An -tu1 -j "$off" -N1 "$2" | tr -d ' ')
    printf "$(printf '\\%03o' $(((old + 1) % 256)))" | dd of="$2" bs=1 seek="$off" conv=notrunc 2>/dev/null; }
flip_near_end "$TMP/w.rans" "$TMP/flip.rans"
check rans-check-flip 1 "rans_container_checksum in the container" -- qgold rans check "$TMP/flip.rans"
flip_near_end "$TMP/w3.rans" "$TMP/flip3.rans"
check rans-check-flip-nochecksum 1 "rans_.* in tile 1 (row 1, column 0" -- qgold rans check "$TMP/flip3.rans"

# Broken copies: a truncated file, a missing file, an empty directory.
cp -r "$GOLDEN" "$TMP/truncated"
f="$TMP/truncated/fp16/f32_to_f16.h5"
head -c "$(($(wc -c < "$f") / 2))" "$f" > "$f.part" && mv "$f.part" "$f"
check audit-truncated 1 "f32_to_f16.h5" -- qgold audit --backend ref --golden "$TMP/truncated"
cp -r "$GOLDEN" "$TMP/missing"
rm "$TMP/missing/fp16/bf16_to_f32.h5"
check audit-missing-file 1 "exercises path bf16_to_f32" -- qgold audit --backend ref --golden "$TMP/missing"
mkdir -p "$TMP/empty"
check audit-empty-dir 1 "no fixture files" -- qgold audit --backend ref --no-manifest --golden "$TMP/empty"

# bench: shapes checked against the format's rules before anything runs; the one-core figure on its own
# buffers (a shape smaller than 64x4096 used to overrun); failures named, JSON replaced only on success.
check bench-help-shapes 0 "K a multiple of 256" -- qgold bench --help
check bench-help-spqr 0 "R a multiple of 16, at most 16777216; K at most 65536" -- qgold bench --help
check bench-q4k-small 0 "q4_k.*gemv.*16x256" -- qgold bench --format q4_k --quick --shapes 16x256 --batches 1
check bench-q8k-small 0 "q8_k.*gemv.*16x256" -- qgold bench --format q8_k --quick --shapes 16x256 --batches 1
check bench-kq-cols 2 "q4_k shape 16x100: K (columns) must be a multiple of 256" -- qgold bench --format q4_k --quick --shapes 16x100
check bench-spqr-rows 2 "spqr shape 100x4096: R (rows) must be a multiple of 16" -- qgold bench --format spqr --quick --shapes 100x4096
check bench-spqr-cols 2 "spqr shape 64x70000: K (columns) must be at most 65536" -- qgold bench --format spqr --quick --shapes 64x70000
check bench-shape-sign 2 "shapes takes RxK" -- qgold bench --format rans --quick --shapes 16x-256
check bench-shape-huge 2 "shapes takes RxK" -- qgold bench --format rans --quick --shapes 4294967296x256
check bench-fp16-shapes 2 "do not apply to fp16" -- qgold bench --format fp16 --quick --shapes 64x64
# --batches: each format's largest batch (spqr 16, K-quants 64 on the CUDA gemm path); a CPU path that
# takes fewer says which batch it skipped and still times the rest.
check bench-batch-spqr 2 "spqr takes batches 1..16, got 17" -- qgold bench --format spqr --quick --batches 1,17
check bench-batch-kq 2 "q4_k takes batches 1..64, got 65" -- qgold bench --format q4_k --quick --batches 65
check bench-batch-huge 2 "B in 1..4096" -- qgold bench --format int4 --quick --batches 4097
check bench-batch-skip 0 "skip: q4_k 16x256 gemv ref batch 32: this path takes batches 1..16" -- \
    qgold bench --format q4_k --backend ref --quick --shapes 16x256 --batches 1,32
mkdir -p "$TMP/json"
printf '{"previous": 1}\n' > "$TMP/json/keep.json"
cp "$TMP/json/keep.json" "$TMP/keep.orig"
asan_null="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1"
check bench-alloc-kq 1 "bench q4_k 33554432x33554432: cannot allocate .*[0-9] bytes" -- \
    qgold_env "$asan_null" bench --format q4_k --quick --shapes 33554432x33554432 --batches 1 --json "$TMP/json/keep.json"
checks=$((checks + 1))
if cmp -s "$TMP/json/keep.json" "$TMP/keep.orig" && [ "$(ls -A "$TMP/json")" = "keep.json" ]; then
    echo "ok   bench-alloc-json-kept"
else
    echo "FAIL bench-alloc-json-kept: the previous JSON was changed or a temporary file was left"; fails=$((fails + 1))
fi
check bench-alloc-rans 1 "bench rans 2147483647x2147483647: cannot allocate" -- \
    qgold_env "$asan_null" bench --format rans --quick --shapes 2147483647x2147483647 --batches 1
# Backends: one not compiled here is a usage error; one compiled but excluded here a failure.
qgold list > "$TMP/list.txt" 2>&1
if grep -q "q4_k .*gemv .*cuda .*not compiled" "$TMP/list.txt"; then
    check bench-cuda-not-built 2 "backend cuda is not built in this binary" -- qgold bench --format q4_k --backend cuda --quick
    check audit-cuda-not-built 1 "nothing was audited" -- qgold audit --backend cuda --golden "$GOLDEN"
else
    echo "skip bench-cuda-not-built, audit-cuda-not-built: this build has CUDA"
fi
for be in avx2 neon; do
    if grep -q "fp16 .*f32_to_f16 .*$be .*not compiled" "$TMP/list.txt"; then
        check "bench-$be-not-built" 2 "backend $be is not built in this binary" -- qgold bench --format fp16 --backend "$be" --quick
    else
        check "bench-$be-excluded" 1 "backend $be cannot run here" -- qgold_env QG_FORCE_ISA=scalar bench --format fp16 --backend "$be" --quick
    fi
done

# audit: the fixture directory and its MANIFEST are checked before anything is read.
check audit-help-manifest 0 "--no-manifest" -- qgold audit --help
check audit-no-dir 1 "cannot open golden directory $TMP/no_such_dir: No such file or directory" -- qgold audit --golden "$TMP/no_such_dir"
cp -r "$GOLDEN" "$TMP/nomanifest"
rm "$TMP/nomanifest/MANIFEST"
check audit-no-manifest 1 "nomanifest/MANIFEST: missing" -- qgold audit --backend ref --format fp16 --golden "$TMP/nomanifest"
check audit-empty-dir-manifest 1 "empty/MANIFEST: missing" -- qgold audit --backend ref --golden "$TMP/empty"
check audit-no-manifest-flag 0 "manifest: not checked" -- \
    qgold audit --backend ref --format fp16 --golden "$TMP/nomanifest" --no-manifest --json "$TMP/nomanifest.json"
checks=$((checks + 1))
if grep -q '"manifest": "not checked"' "$TMP/nomanifest.json" && grep -q '"verdict": "PASS"' "$TMP/nomanifest.json"; then
    echo "ok   audit-no-manifest-json"
else
    echo "FAIL audit-no-manifest-json"; fails=$((fails + 1))
fi

echo "$((checks - fails)) passed, $fails failed"
[ "$fails" -eq 0 ]
