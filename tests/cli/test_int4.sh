#!/bin/sh
# cli.int4: `qgold int4 import|dequant|gemv` on raw little-endian files: hand-checked bytes (GPTQ v1 and
# v2 zeros, the AWQ interleave, act-order g_idx), every backend built here giving the reference's bytes,
# sizes checked, errors named, outputs atomic.
# usage: test_int4.sh QGOLD TMP_DIR [EMULATOR...]   (the emulator runs cross-built binaries)
set -u
QGOLD_BIN=$1 TMP=$2
shift 2
EMU="$*"
. "$(dirname "$0")/testlib.sh"
absent() { # absent NAME FILE
    checks=$((checks + 1))
    if [ -e "$2" ]; then echo "FAIL $1: $2 was written"; fails=$((fails + 1)); else echo "ok   $1"; fi
}
rep() { # rep COUNT OCTAL-ESCAPED-BYTES: the bytes COUNT times
    i=0; while [ $i -lt "$1" ]; do printf "$2"; i=$((i + 1)); done
}
part() { dd if="$1" bs=1 skip="$2" count="$3" 2>/dev/null; }
T=$TMP
W='\020\062\124\166'   # the int32 word 0x76543210: codes 0, 1, ..., 7 in nibbles 0..7
# N = 8, K = 32, g = 32 (one group). GPTQ qweight K/8 x N = 4 x 8 words, all 0x76543210: column n holds
# codes k % 8 for k = 0..31. qzeros 1 x N/8: 0x76543210, column n stores n. Scales all 1.0 (0x3C00).
rep 32 "$W" > "$T/gptq.qw"
printf "$W" > "$T/qz"
rep 8 '\000\074' > "$T/s8"
ROW=$(rep 4 ' 10 32 54 76' | sed 's/^ //')   # one canonical row: K/8 = 4 words 0x76543210
check import-gptq-v2 0 "" -- qgold int4 import --from gptq --version 2 --n 8 --k 32 --g 32 --qweight "$T/gptq.qw" --qzeros "$T/qz" --scales "$T/s8" --out "$T/v2"
bytes import-gptq-v2-zeros "$T/v2.zeros" "00 01 02 03 04 05 06 07"
bytes import-gptq-v2-scales "$T/v2.scales" "00 3c 00 3c 00 3c 00 3c 00 3c 00 3c 00 3c 00 3c"
part "$T/v2.qweight" 0 16 > "$T/r0"
bytes import-gptq-v2-row0 "$T/r0" "$ROW"
absent import-gptq-no-g_idx "$T/v2.g_idx"
# v1 stores zero - 1: the same word means zeros 1..8.
check import-gptq-v1 0 "" -- qgold int4 import --from gptq --n 8 --k 32 --g 32 --qweight "$T/gptq.qw" --qzeros "$T/qz" --scales "$T/s8" --out "$T/v1"
bytes import-gptq-v1-zeros "$T/v1.zeros" "01 02 03 04 05 06 07 08"
# act-order: g_idx all 0 (the one group holds all 32 columns) is copied.
rep 32 '\000\000\000\000' > "$T/gi0"
check import-gptq-g_idx 0 "" -- qgold int4 import --from gptq --version 2 --n 8 --k 32 --g 32 --qweight "$T/gptq.qw" --qzeros "$T/qz" --scales "$T/s8" --g-idx "$T/gi0" --out "$T/act"
bytes import-gptq-g_idx-bytes "$T/act.g_idx" "$(hex "$T/gi0")"
# AWQ: qweight K x N/8 = 32 x 1 words 0x76543210: nibble j holds column order[j] = 0,2,4,6,1,3,5,7, so
# column n has code 0,4,1,5,2,6,3,7 (n = 0..7) in every k; the zeros word the same way.
rep 32 "$W" > "$T/awq.qw"
check import-awq 0 "" -- qgold int4 import --from awq --n 8 --k 32 --g 32 --qweight "$T/awq.qw" --qzeros "$T/qz" --scales "$T/s8" --out "$T/awq"
bytes import-awq-zeros "$T/awq.zeros" "00 04 01 05 02 06 03 07"
part "$T/awq.qweight" 0 32 > "$T/awq01"
bytes import-awq-rows01 "$T/awq01" "$(rep 16 ' 00' | sed 's/^ //') $(rep 16 ' 44' | sed 's/^ //')"

# dequant of the v2 import: w[n][k] = (k % 8 - n) * 1; row 0 starts 0, 1, ..., 7 (float32).
check dequant 0 "" -- qgold int4 dequant --n 8 --k 32 --g 32 --qweight "$T/v2.qweight" --scales "$T/v2.scales" --zeros "$T/v2.zeros" --out "$T/w.f32"
part "$T/w.f32" 0 32 > "$T/w0"
bytes dequant-row0 "$T/w0" "00 00 00 00 00 00 80 3f 00 00 00 40 00 00 40 40 00 00 80 40 00 00 a0 40 00 00 c0 40 00 00 e0 40"
part "$T/w.f32" 128 8 > "$T/w1"
bytes dequant-row1 "$T/w1" "00 00 80 bf 00 00 00 00"
check dequant-f16 0 "" -- qgold int4 dequant --n 8 --k 32 --g 32 --qweight "$T/v2.qweight" --scales "$T/v2.scales" --zeros "$T/v2.zeros" --out "$T/w.f16" --out-type f16
part "$T/w.f16" 64 4 > "$T/h1"
bytes dequant-f16-row1 "$T/h1" "00 bc 00 00"
# gemv with x = 1.0: y[n] = 4 * (28 - 8 n) = 112, 80, 48, 16, -16, -48, -80, -112.
rep 32 '\000\074' > "$T/x1"
check gemv 0 "" -- qgold int4 gemv --n 8 --k 32 --g 32 --qweight "$T/v2.qweight" --scales "$T/v2.scales" --zeros "$T/v2.zeros" --x "$T/x1" --batch 1 --out "$T/y.f32"
bytes gemv-f32 "$T/y.f32" "00 00 e0 42 00 00 a0 42 00 00 40 42 00 00 80 41 00 00 80 c1 00 00 40 c2 00 00 a0 c2 00 00 e0 c2"
check gemv-f16 0 "" -- qgold int4 gemv --n 8 --k 32 --g 32 --qweight "$T/v2.qweight" --scales "$T/v2.scales" --zeros "$T/v2.zeros" --x "$T/x1" --batch 1 --out "$T/y.f16" --out-type f16
bytes gemv-f16-bytes "$T/y.f16" "00 57 00 55 00 52 00 4c 00 cc 00 d2 00 d5 00 d7"
# Every SIMD backend built and runnable here gives the reference's bytes (integers: exact in any order).
for be in avx2 neon; do
    out=$(qgold int4 gemv --n 8 --k 32 --g 32 --qweight "$T/v2.qweight" --scales "$T/v2.scales" --zeros "$T/v2.zeros" --x "$T/x1" --batch 1 --out "$T/y.$be" --backend $be 2>&1); st=$?
    if [ $st -eq 0 ]; then bytes gemv-$be "$T/y.$be" "$(hex "$T/y.f32")"
        check dequant-$be 0 "" -- qgold int4 dequant --n 8 --k 32 --g 32 --qweight "$T/v2.qweight" --scales "$T/v2.scales" --zeros "$T/v2.zeros" --out "$T/w.$be" --backend $be
        bytes dequant-$be-bytes "$T/w.$be" "$(hex "$T/w.f32")"
    else echo "skip gemv-$be: $out"; fi
done

# Errors: named, the right exit status, nothing written.
check bad-from 2 "gptq or awq" -- qgold int4 import --from marlin --n 8 --k 32 --g 32 --qweight "$T/gptq.qw" --qzeros "$T/qz" --scales "$T/s8" --out "$T/bad"
check bad-group 2 "int_group_invalid" -- qgold int4 dequant --n 8 --k 32 --g 16 --qweight "$T/v2.qweight" --scales "$T/v2.scales" --out "$T/bad.f32"
check bad-k 2 "shape_invalid" -- qgold int4 dequant --n 8 --k 12 --g 12 --qweight "$T/v2.qweight" --scales "$T/v2.scales" --out "$T/bad.f32"
check bad-n-import 2 "shape_invalid" -- qgold int4 import --from awq --n 4 --k 32 --g 32 --qweight "$T/awq.qw" --qzeros "$T/qz" --scales "$T/s8" --out "$T/bad"
check bad-option 2 "does not apply" -- qgold int4 dequant --n 8 --k 32 --g 32 --qweight "$T/v2.qweight" --scales "$T/v2.scales" --x "$T/x1" --out "$T/bad.f32"
check bad-number 2 "" -- qgold int4 dequant --n -8 --k 32 --g 32 --qweight "$T/v2.qweight" --scales "$T/v2.scales" --out "$T/bad.f32"
part "$T/gptq.qw" 0 127 > "$T/short.qw"
check short-qweight 1 "has 127 bytes, expected 128" -- qgold int4 dequant --n 8 --k 32 --g 32 --qweight "$T/short.qw" --scales "$T/v2.scales" --out "$T/bad.f32"
absent short-qweight-no-output "$T/bad.f32"
printf '\000\001\002\003\020\005\006\007' > "$T/z16"
check zero-16 1 "int4_zero_out_of_range" -- qgold int4 dequant --n 8 --k 32 --g 32 --qweight "$T/v2.qweight" --scales "$T/v2.scales" --zeros "$T/z16" --out "$T/bad.f32"
rep 32 '\001\000\000\000' > "$T/gi1"
check g_idx-out-of-range 1 "int4_g_idx_invalid" -- qgold int4 dequant --n 8 --k 32 --g 32 --qweight "$T/v2.qweight" --scales "$T/v2.scales" --g-idx "$T/gi1" --out "$T/bad.f32"
printf '\000\000\000\360' > "$T/qz15"
check gptq-v1-stored-15 1 "int4_zero_out_of_range" -- qgold int4 import --from gptq --version 1 --n 8 --k 32 --g 32 --qweight "$T/gptq.qw" --qzeros "$T/qz15" --scales "$T/s8" --out "$T/bad"
absent gptq-v1-no-output "$T/bad.qweight"
check awq-g_idx 2 "gptq only" -- qgold int4 import --from awq --n 8 --k 32 --g 32 --qweight "$T/awq.qw" --qzeros "$T/qz" --scales "$T/s8" --g-idx "$T/gi0" --out "$T/bad"
# An inf scale is int_scale_invalid, and an existing output keeps its bytes.
{ rep 7 '\000\074'; printf '\000\174'; } > "$T/sinf"
printf 'old' > "$T/keep.f32"
check scale-inf 1 "int_scale_invalid" -- qgold int4 gemv --n 8 --k 32 --g 32 --qweight "$T/v2.qweight" --scales "$T/sinf" --x "$T/x1" --batch 1 --out "$T/keep.f32"
bytes scale-inf-kept "$T/keep.f32" "6f 6c 64"
check same-file 2 "" -- qgold int4 dequant --n 8 --k 32 --g 32 --qweight "$T/v2.qweight" --scales "$T/v2.scales" --out "$T/v2.qweight"
check help 0 "canonical layout" -- qgold int4 --help

echo "cli.int4: $checks checks, $fails failed"
[ "$fails" -eq 0 ]
