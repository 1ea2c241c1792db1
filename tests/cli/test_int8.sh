#!/bin/sh
# cli.int8: `qgold int8 quantize|dequantize|gemm` on raw little-endian files: hand-checked bytes, every
# backend built here giving the reference's bytes, sizes checked, errors named, outputs atomic.
# usage: test_int8.sh QGOLD TMP_DIR [EMULATOR...]   (the emulator runs cross-built binaries)
set -u
QGOLD_BIN=$1 TMP=$2
shift 2
EMU="$*"
. "$(dirname "$0")/testlib.sh"
T=$TMP
# X = [127, 2.5, -3.5, 0.5] float32: amax 127, s = 1, codes rne(v): 127, 2 (tie to even), -4 (tie), 0 (tie)
printf '\000\000\376\102\000\000\040\100\000\000\140\300\000\000\000\077' > "$T/x.f32"
check quantize 0 "1 x 4 float32 -> 4 int8 codes" -- qgold int8 quantize --rows 1 --cols 4 --granularity row --in "$T/x.f32" --out "$T/q.i8" --scales-out "$T/s.f32"
bytes quantize-codes "$T/q.i8" "7f 02 fc 00"
bytes quantize-scale "$T/s.f32" "00 00 80 3f"
# fp16 scale: 0x3C00
check quantize-f16 0 "" -- qgold int8 quantize --rows 1 --cols 4 --scale f16 --in "$T/x.f32" --out "$T/q16.i8" --scales-out "$T/s.f16"
bytes quantize-f16-scale "$T/s.f16" "00 3c"
# dequantize: 127, 2, -4, 0 as float32; as fp16 0x57F0, 0x4000, 0xC400, 0
check dequantize 0 "1 x 4 int8 -> float32" -- qgold int8 dequantize --rows 1 --cols 4 --granularity row --in "$T/q.i8" --scales "$T/s.f32" --out "$T/y.f32"
bytes dequantize-f32 "$T/y.f32" "00 00 fe 42 00 00 00 40 00 00 80 c0 00 00 00 00"
check dequantize-f16 0 "" -- qgold int8 dequantize --rows 1 --cols 4 --in "$T/q.i8" --scales "$T/s.f32" --out "$T/y.f16" --out-type f16
bytes dequantize-f16 "$T/y.f16" "f0 57 00 40 00 c4 00 00"
# W8A8: A = [1 2 3], B = [[4 5 6], [-128 -128 -128]]: acc = [32, -768]
printf '\001\002\003' > "$T/a.i8"
printf '\004\005\006\200\200\200' > "$T/b.i8"
check gemm-i32 0 "W8A8 1 x 2 x 3 -> i32" -- qgold int8 gemm --m 1 --n 2 --k 3 --a "$T/a.i8" --b "$T/b.i8" --out "$T/acc.i32"
bytes gemm-i32 "$T/acc.i32" "20 00 00 00 00 fd ff ff"
# sa = 0.5, sb = 0.25, bias [1, 50], relu: [32/8 + 1, relu(-96 + 50)] = [5, +0]
printf '\000\000\000\077' > "$T/sa.f32"
printf '\000\000\200\076' > "$T/sb.f32"
printf '\000\000\200\077\000\000\110\102' > "$T/bias.f32"
check gemm-f32 0 "" -- qgold int8 gemm --m 1 --n 2 --k 3 --a "$T/a.i8" --b "$T/b.i8" --sa "$T/sa.f32" --sb "$T/sb.f32" --bias "$T/bias.f32" --relu --out "$T/y8.f32"
bytes gemm-f32 "$T/y8.f32" "00 00 a0 40 00 00 00 00"
check gemm-f16 0 "" -- qgold int8 gemm --m 1 --n 2 --k 3 --a "$T/a.i8" --b "$T/b.i8" --sa "$T/sa.f32" --sb "$T/sb.f32" --out-type f16 --out "$T/y8.f16"
bytes gemm-f16 "$T/y8.f16" "00 44 00 d6"
# W8A16: X = [0.5, 0.25, 1] fp16, B as above, sb = [2, 1] fp16: [(2 + 1.25 + 6) * 2, -128 * 1.75] = [18.5, -224]
printf '\000\070\000\064\000\074' > "$T/x.f16"
printf '\000\100\000\074' > "$T/sb.f16"
check w8a16 0 "W8A16 1 x 2 x 3" -- qgold int8 gemm --m 1 --n 2 --k 3 --x "$T/x.f16" --b "$T/b.i8" --sb "$T/sb.f16" --scale f16 --out "$T/y16.f32"
bytes w8a16 "$T/y16.f32" "00 00 94 41 00 00 60 c3"

# every optimized backend built and runnable here gives the reference's bytes
for be in avx2 neon cuda; do
    if qgold list --format int8 2>/dev/null | grep -E "w8a8 +$be" | grep -q " available"; then
        check "gemm-$be" 0 "" -- qgold int8 gemm --backend $be --m 1 --n 2 --k 3 --a "$T/a.i8" --b "$T/b.i8" --sa "$T/sa.f32" --sb "$T/sb.f32" --bias "$T/bias.f32" --relu --out "$T/y8.$be"
        bytes "gemm-$be-bytes" "$T/y8.$be" "00 00 a0 40 00 00 00 00"
        check "quantize-$be" 0 "" -- qgold int8 quantize --backend $be --rows 1 --cols 4 --in "$T/x.f32" --out "$T/q.$be" --scales-out "$T/s.$be"
        bytes "quantize-$be-bytes" "$T/q.$be" "7f 02 fc 00"
    fi
done

# errors: named, nothing written, an existing output kept
printf 'keep' > "$T/keep"
printf '\000\000\300\177\000\000\200\077' > "$T/nan.f32"
check nonfinite 1 "int_nonfinite_input" -- qgold int8 quantize --rows 1 --cols 2 --in "$T/nan.f32" --out "$T/keep" --scales-out "$T/keep.s"
bytes kept-on-error "$T/keep" "6b 65 65 70"
checks=$((checks + 1))
if [ -e "$T/keep.s" ]; then echo "FAIL scales written on an error"; fails=$((fails + 1)); else echo "ok   no-scales-on-error"; fi
check short-input 1 "" -- qgold int8 quantize --rows 1 --cols 5 --in "$T/x.f32" --out "$T/o" --scales-out "$T/o.s"
check sa-size 1 "size_mismatch" -- qgold int8 gemm --m 1 --n 2 --k 3 --a "$T/a.i8" --b "$T/b.i8" --sa "$T/bias.f32" --sb "$T/sb.f32" --out "$T/o"
check k-too-large 2 "int_k_too_large" -- qgold int8 gemm --m 1 --n 1 --k 131072 --a "$T/a.i8" --b "$T/b.i8" --out "$T/o"
check bad-group 2 "int_group_invalid" -- qgold int8 quantize --rows 1 --cols 4 --granularity group --group 48 --in "$T/x.f32" --out "$T/o" --scales-out "$T/o.s"
check group-without-gran 2 "--group is given exactly" -- qgold int8 quantize --rows 1 --cols 4 --group 32 --in "$T/x.f32" --out "$T/o" --scales-out "$T/o.s"
printf '\000\000\200\277' > "$T/neg.f32"
check negative-scale 1 "int_scale_invalid" -- qgold int8 dequantize --rows 1 --cols 4 --in "$T/q.i8" --scales "$T/neg.f32" --out "$T/o"
printf '\000\000\300\177' > "$T/nan1.f32"
check nan-sb 1 "int_nonfinite_input" -- qgold int8 gemm --m 1 --n 2 --k 3 --a "$T/a.i8" --b "$T/b.i8" --sa "$T/sa.f32" --sb "$T/nan1.f32" --out "$T/o"
check zero-dim 2 "shape_invalid" -- qgold int8 gemm --m 0 --n 2 --k 3 --a "$T/a.i8" --b "$T/b.i8" --out "$T/o"
check same-file 2 "" -- qgold int8 dequantize --rows 1 --cols 4 --in "$T/q.i8" --scales "$T/s.f32" --out "$T/q.i8"
check unknown-sub 2 "unknown subcommand" -- qgold int8 frob
check unknown-opt 2 "unknown option" -- qgold int8 gemm --frob
check foreign-opt 2 "does not apply to int8 quantize" -- qgold int8 quantize --relu --rows 1 --cols 4 --in "$T/x.f32" --out "$T/o" --scales-out "$T/o.s"
check bad-number 2 "" -- qgold int8 gemm --m -1 --n 2 --k 3 --a "$T/a.i8" --b "$T/b.i8" --out "$T/o"
check bad-backend 2 "unknown backend" -- qgold int8 gemm --backend sse --m 1 --n 2 --k 3 --a "$T/a.i8" --b "$T/b.i8" --out "$T/o"
check missing-scales 2 "needs --sa and --sb" -- qgold int8 gemm --m 1 --n 2 --k 3 --a "$T/a.i8" --b "$T/b.i8" --out-type f32 --out "$T/o"
check help 0 "usage: qgold int8" -- qgold int8 --help
checks=$((checks + 1))
if [ -e "$T/o" ]; then echo "FAIL an output was written by a failing command"; fails=$((fails + 1)); else echo "ok   no-output-on-errors"; fi

echo "cli.int8: $checks checks, $fails failed"
[ "$fails" -eq 0 ]
