#!/bin/sh
# cli.gguf: qgold gguf info/check/dequant/extract on the golden GGUF files, and bad input.
# usage: test_gguf.sh QGOLD GOLDEN_DIR TMP_DIR [EMULATOR...]   (the emulator runs cross-built binaries)
set -u
QGOLD_BIN=$1 GOLDEN=$2 TMP=$3
shift 3
EMU="$*"
G=$GOLDEN/gguf
. "$(dirname "$0")/testlib.sh"
same() { # same NAME FILE1 FILE2
    checks=$((checks + 1))
    if cmp -s "$2" "$3"; then echo "ok   $1"; else echo "FAIL $1: $2 and $3 differ"; fails=$((fails + 1)); fi
}

# usage errors: exit 2
check help 0 "usage: qgold gguf info" -- qgold gguf --help
check no-sub 2 "subcommand is required" -- qgold gguf
check bad-sub 2 "unknown gguf subcommand" -- qgold gguf frob "$G/mixed_v3.gguf"
check info-no-file 2 "needs a FILE" -- qgold gguf info
check two-files 2 "one FILE only" -- qgold gguf info "$G/mixed_v3.gguf" "$G/align8.gguf"
check bad-option 2 "unexpected argument '--frob'" -- qgold gguf check "$G/mixed_v3.gguf" --frob
check gemv-on-info 2 "unexpected argument '--gemv'" -- qgold gguf info "$G/mixed_v3.gguf" --gemv
check bad-backend 2 "unknown backend 'frob'" -- qgold gguf check "$G/mixed_v3.gguf" --backend frob
check tensor-no-value 2 "needs a value" -- qgold gguf check "$G/mixed_v3.gguf" --tensor
check dequant-no-out 2 "needs --tensor NAME and --out" -- qgold gguf dequant "$G/mixed_v3.gguf" --tensor token_embd.weight
check extract-onto-input 2 "same file" -- qgold gguf extract "$G/mixed_v3.gguf" --tensor token_embd.weight --out "$G/mixed_v3.gguf"

# info
check info 0 "t.array_str.*array\[5 x string\]" -- qgold gguf info "$G/mixed_v3.gguf"
check info-nested 0 "t.array_nested.*array\[3 x array\] \[3 x i32\]" -- qgold gguf info "$G/mixed_v3.gguf"
check info-tensor 0 "blk.0.attn_q.weight *Q4_K *512 x 4 *1152 *0" -- qgold gguf info "$G/mixed_v3.gguf"
check info-per-type 0 "Q8_0 .*skipped" -- qgold gguf info "$G/align64_shapes.gguf"
check info-v2 0 "GGUF version 2" -- qgold gguf info "$G/mixed_v2.gguf"
check info-corrupt 1 "gguf_tensor_overlap: .*at byte" -- qgold gguf info "$G/overlap.gguf"

# check: valid files pass on every backend here, corrupt ones name their rule
check check-mixed 0 "7 tensors checked, 0 failed, 0 skipped" -- qgold gguf check "$G/mixed_v3.gguf"
check check-gemv 0 "gemv:" -- qgold gguf check "$G/mixed_v3.gguf" --gemv
check check-v2 0 "0 failed" -- qgold gguf check "$G/mixed_v2.gguf" --gemv
check check-skipped 0 "1 skipped (Q8_0)" -- qgold gguf check "$G/align64_shapes.gguf"
check check-glob 0 "3 tensors checked" -- qgold gguf check "$G/mixed_v3.gguf" --tensor 'blk.0.attn_*'
check check-glob-none 1 "no tensor of .* matches" -- qgold gguf check "$G/mixed_v3.gguf" --tensor 'nothing*'
check check-ref 0 "0 failed" -- qgold gguf check "$G/mixed_v3.gguf" --backend ref --gemv
# --backend: one not built here is a usage error, one built but excluded by QG_FORCE_ISA a failure
simd=$(qgold list --format q4_k | awk '$2 == "dequant" && ($3 == "avx2" || $3 == "neon") && $5 == "available" { print $3; exit }')
notbuilt=$(qgold list --format q4_k | awk '$2 == "dequant" && $5 == "unavailable" && /not compiled/ { print $3; exit }')
if [ -n "$notbuilt" ]; then
    check backend-not-built 2 "backend $notbuilt is not built" -- qgold gguf check "$G/mixed_v3.gguf" --backend "$notbuilt"
fi
if [ -n "$simd" ]; then
    check backend-simd 0 "0 failed" -- qgold gguf check "$G/mixed_v3.gguf" --backend "$simd" --gemv
    check backend-forced-off 1 "backend_unavailable" -- env QG_FORCE_ISA=scalar $EMU "$QGOLD_BIN" gguf check "$G/mixed_v3.gguf" --backend "$simd"
fi
check check-no-tensors 0 "0 tensors checked" -- qgold gguf check "$G/no_tensors.gguf"
check check-json 0 "" -- qgold gguf check "$G/align64_shapes.gguf" --json "$TMP/check.json"
checks=$((checks + 1))
if grep -q '"status": "skipped"' "$TMP/check.json" && grep -q '"container": "ok"' "$TMP/check.json"; then echo "ok   json-content"
else echo "FAIL json-content"; fails=$((fails + 1)); fi
check check-json-corrupt 1 "gguf_bad_magic" -- qgold gguf check "$G/bad_magic.gguf" --json "$TMP/bad.json"
checks=$((checks + 1))
if grep -q '"container": "gguf_bad_magic"' "$TMP/bad.json"; then echo "ok   json-corrupt"; else echo "FAIL json-corrupt"; fails=$((fails + 1)); fi
check nonfinite 1 "FAIL.*blk.0.attn_q.weight.*gguf_block_nonfinite: block 5 (row 2, block 1 of the row)" -- qgold gguf check "$G/nonfinite_blocks.gguf"
check nonfinite-q5 1 "blk.0.attn_k.weight.*gguf_block_nonfinite: block 2" -- qgold gguf check "$G/nonfinite_blocks.gguf"
for c in bad_magic:gguf_bad_magic version_1:gguf_bad_version truncated_kv:gguf_truncated string_too_long:gguf_string_too_long \
         array_too_long:gguf_array_too_long tensor_count_huge:gguf_count_too_large value_type_13:gguf_value_type_unknown \
         nesting_9:gguf_nesting_too_deep duplicate_tensor:gguf_duplicate_tensor n_dims_5:gguf_n_dims_invalid dim_zero:gguf_dim_zero \
         shape_overflow:gguf_shape_overflow ne0_not_multiple:gguf_ne0_not_multiple offset_misaligned:gguf_offset_misaligned \
         out_of_bounds_truncated:gguf_tensor_out_of_bounds overlap:gguf_tensor_overlap alignment_12:gguf_alignment_invalid \
         name_65_bytes:gguf_tensor_name_too_long type_unknown:gguf_type_unknown; do
    check "corrupt-${c%%:*}" 1 "${c#*:}: .*at byte [0-9]" -- qgold gguf check "$G/${c%%:*}.gguf"
done
check missing-file 1 "io_failed: .*cannot open" -- qgold gguf check "$TMP/none.gguf"
check directory 1 "io_failed: .*not a regular file" -- qgold gguf check "$TMP"
: > "$TMP/empty.gguf"
check empty-file 1 "gguf_truncated: .*at byte 0" -- qgold gguf check "$TMP/empty.gguf"

# dequant and extract: the same bits as the raw-file tools
check extract-q4k 0 "rows 4, cols 512 (qgold dequant --format q4_k" -- qgold gguf extract "$G/mixed_v3.gguf" --tensor blk.0.attn_q.weight --out "$TMP/q4k.bin"
check dequant-raw 0 "" -- qgold dequant --format q4_k --rows 4 --cols 512 --in "$TMP/q4k.bin" --out "$TMP/raw.f32"
check dequant-q4k 0 "4 x 512" -- qgold gguf dequant "$G/mixed_v3.gguf" --tensor blk.0.attn_q.weight --out "$TMP/gguf.f32"
same dequant-matches-raw-tool "$TMP/raw.f32" "$TMP/gguf.f32"
check extract-3d 0 "rows 6, cols 256" -- qgold gguf extract "$G/align64_shapes.gguf" --tensor t3d --out "$TMP/t3d.bin"
check dequant-f16 0 "165 float32 values" -- qgold gguf dequant "$G/mixed_v3.gguf" --tensor token_embd.weight --out "$TMP/f16.f32"
checks=$((checks + 1))
if [ "$(wc -c < "$TMP/f16.f32")" -eq 660 ]; then echo "ok   dequant-f16-size"; else echo "FAIL dequant-f16-size"; fails=$((fails + 1)); fi
check dequant-f32 0 "" -- qgold gguf dequant "$G/mixed_v3.gguf" --tensor output_norm.weight --out "$TMP/f32.f32"
check extract-f32 0 "148 bytes" -- qgold gguf extract "$G/mixed_v3.gguf" --tensor output_norm.weight --out "$TMP/f32.bin"
same dequant-f32-is-bytes "$TMP/f32.f32" "$TMP/f32.bin"
check dequant-uncovered 1 "unsupported: .*Q8_0" -- qgold gguf dequant "$G/align64_shapes.gguf" --tensor skipped.q8_0 --out "$TMP/x.f32"
check extract-uncovered 0 "136 bytes" -- qgold gguf extract "$G/align64_shapes.gguf" --tensor skipped.q8_0 --out "$TMP/q80.bin"
check dequant-no-tensor 1 "no tensor named 'nope'" -- qgold gguf dequant "$G/mixed_v3.gguf" --tensor nope --out "$TMP/x.f32"
check dequant-corrupt 1 "gguf_dim_zero" -- qgold gguf dequant "$G/dim_zero.gguf" --tensor a.weight --out "$TMP/x.f32"
echo keep > "$TMP/keep.f32"
check dequant-unwritable 1 "io_failed: cannot write" -- qgold gguf dequant "$G/mixed_v3.gguf" --tensor output_norm.weight --out "$TMP/nodir/x.f32"
check dequant-failed-keeps 1 "" -- qgold gguf dequant "$G/dim_zero.gguf" --tensor a.weight --out "$TMP/keep.f32"
checks=$((checks + 1))
if [ "$(cat "$TMP/keep.f32")" = keep ]; then echo "ok   failed-run-keeps-output"; else echo "FAIL failed-run-keeps-output"; fails=$((fails + 1)); fi

echo "cli.gguf: $checks checks, $fails failed"
[ "$fails" -eq 0 ]
