#!/bin/sh
# cli.badinput: every qgold command fed bad input: each check asserts the exit status, the error name or
# message, that nothing crashed (no sanitizer report) and what happened to the output file (not
# created, or byte-identical to before).
# usage: test_badinput.sh QGOLD GOLDEN_DIR TMP_DIR [EMULATOR...]   (the emulator runs cross-built binaries)
set -u
QGOLD_BIN=$1 GOLDEN=$2 TMP=$3
shift 3
EMU="$*"
case $GOLDEN in /*) ;; *) GOLDEN=$(pwd)/$GOLDEN ;; esac # symlinks to it are made elsewhere
unset QGOLD_GOLDEN QG_FORCE_ISA
qgold() { $EMU "$QGOLD_BIN" "$@"; }
qgold_env() { v=$1; shift; env "$v" $EMU "$QGOLD_BIN" "$@"; }
# limited BLOCKS cmd...: a file-size limit (ulimit -f units); SIGXFSZ ignored, so write() fails with EFBIG
limited() { (trap '' XFSZ; ulimit -f "$1"; shift; "$@"); }
fails=0 checks=0
rm -rf "$TMP"; mkdir -p "$TMP"

# check NAME STATUS PATTERN FILES -- command...
#   FILES: "-", or space-separated assertions on files after the command:
#     absent=PATH       PATH does not exist        same=PATH=COPY   PATH is byte-identical to COPY
#     notemp=DIR        no temporary .NAME.XXXXXX file left in DIR
check() {
    name=$1 want=$2 pat=$3 files=$4; shift 5
    checks=$((checks + 1))
    out=$("$@" 2>&1); got=$?
    why=""
    if [ "$got" -ne "$want" ]; then why="exit $got, expected $want"
    elif [ -n "$pat" ] && ! printf '%s\n' "$out" | grep -q -- "$pat"; then why="output lacks '$pat'"
    elif printf '%s\n' "$out" | grep -q 'Sanitizer\|runtime error:'; then why="sanitizer report"
    fi
    if [ -z "$why" ] && [ "$files" != "-" ]; then
        for f in $files; do
            case $f in
            absent=*) p=${f#absent=}; [ -e "$p" ] && why="$p exists" ;;
            same=*) p=${f#same=}; c=${p#*=}; p=${p%%=*}; cmp -s "$p" "$c" || why="$p changed" ;;
            notemp=*) p=${f#notemp=}; [ -n "$(find "$p" -maxdepth 1 -name '.*.??????' 2>/dev/null)" ] && why="temporary file left in $p" ;;
            esac
        done
    fi
    if [ -n "$why" ]; then
        echo "FAIL $name: $why"; printf '%s\n' "$out" | tail -5; fails=$((fails + 1)); return
    fi
    echo "ok   $name"
}

# ---- inputs: float32 values written byte by byte (little-endian) ----
# f32 x8: 1.0 -0.5 0.25 -2.0 0.75 -1.5 3.0 -0.125 (32 bytes), doubled to N bytes
printf '\000\000\200\077\000\000\000\277\000\000\200\076\000\000\000\300\000\000\100\077\000\000\300\277\000\000\100\100\000\000\000\276' > "$TMP/v32"
grow() { # grow SRC BYTES DST: SRC repeated up to exactly BYTES
    cp "$1" "$3.tmp"
    while [ "$(wc -c < "$3.tmp")" -lt "$2" ]; do cat "$3.tmp" "$3.tmp" > "$3.tmp2"; mv "$3.tmp2" "$3.tmp"; done
    head -c "$2" "$3.tmp" > "$3"; rm -f "$3.tmp"
}
grow "$TMP/v32" 32768 "$TMP/v.f32"   # 8 x 1024 ordinary values
mkdir -p "$TMP/out"
echo "previous contents" > "$TMP/old"
keep() { cp "$TMP/old" "$1"; } # an existing output file whose loss the checks would see

# ==== A: a failed write leaves the previous output intact; input and output may not be one file ====
head -c 9344 /dev/zero > "$TMP/z.q8k"      # 8 x 1024 of q8_k: 32768 bytes of floats out
keep "$TMP/out/q.bin"
check A.quantize-efbig 1 "cannot write .*File too large" "same=$TMP/out/q.bin=$TMP/old notemp=$TMP/out" -- \
    limited 4 qgold quantize --format q8_k --rows 8 --cols 1024 --in "$TMP/v.f32" --out "$TMP/out/q.bin"
keep "$TMP/out/v.f32"
check A.dequant-efbig 1 "cannot write .*File too large" "same=$TMP/out/v.f32=$TMP/old notemp=$TMP/out" -- \
    limited 4 qgold dequant --format q8_k --rows 8 --cols 1024 --in "$TMP/z.q8k" --out "$TMP/out/v.f32"
head -c 21000 "$GOLDEN/rng/splitmix64.h5" > "$TMP/w.i8"
head -c 1200 "$GOLDEN/rng/splitmix64.h5" > "$TMP/s.f32"
qgold rans encode --rows 300 --cols 70 --in "$TMP/w.i8" --scales "$TMP/s.f32" --out "$TMP/w.rans" > /dev/null 2>&1
keep "$TMP/out/e.rans"
check A.rans-encode-efbig 1 "cannot write .*File too large" "same=$TMP/out/e.rans=$TMP/old notemp=$TMP/out" -- \
    limited 4 qgold rans encode --rows 300 --cols 70 --in "$TMP/w.i8" --scales "$TMP/s.f32" --out "$TMP/out/e.rans"
keep "$TMP/out/d.i8"
check A.rans-decode-efbig 1 "cannot write .*File too large" "same=$TMP/out/d.i8=$TMP/old notemp=$TMP/out" -- \
    limited 4 qgold rans decode --in "$TMP/w.rans" --out "$TMP/out/d.i8"
keep "$TMP/out/a.json"
check A.audit-json-efbig 1 "cannot write .*File too large" "same=$TMP/out/a.json=$TMP/old notemp=$TMP/out" -- \
    limited 4 qgold audit --backend ref --golden "$GOLDEN" --json "$TMP/out/a.json"
if [ -w /dev/full ]; then
    check A.devfull 1 "cannot write /dev/full: No space left on device" - -- \
        qgold quantize --format q8_k --rows 8 --cols 1024 --in "$TMP/v.f32" --out /dev/full
fi
check A.no-such-dir 1 "cannot write .*No such file or directory" "absent=$TMP/nodir" -- \
    qgold quantize --format q8_k --rows 8 --cols 1024 --in "$TMP/v.f32" --out "$TMP/nodir/q.bin"
cp "$TMP/v.f32" "$TMP/same.f32"
check A.same-file 2 "same file" "same=$TMP/same.f32=$TMP/v.f32" -- \
    qgold quantize --format q8_k --rows 8 --cols 1024 --in "$TMP/same.f32" --out "$TMP/same.f32"
ln "$TMP/same.f32" "$TMP/out/hardlink.f32"
check A.same-file-hardlink 2 "same file" "same=$TMP/same.f32=$TMP/v.f32" -- \
    qgold quantize --format q8_k --rows 8 --cols 1024 --in "$TMP/same.f32" --out "$TMP/out/hardlink.f32"
check A.same-file-other-path 2 "same file" "same=$TMP/same.f32=$TMP/v.f32" -- \
    qgold quantize --format q8_k --rows 8 --cols 1024 --in "$TMP/same.f32" --out "$TMP/out/../same.f32"
cp "$TMP/w.rans" "$TMP/same.rans"
check A.rans-same-file 2 "same file" "same=$TMP/same.rans=$TMP/w.rans" -- \
    qgold rans decode --in "$TMP/same.rans" --out "$TMP/out/../same.rans"
check A.quantize-ok 0 "8 x 1024 float32 -> 9344 bytes" "notemp=$TMP/out" -- \
    qgold quantize --format q8_k --rows 8 --cols 1024 --in "$TMP/v.f32" --out "$TMP/out/q.bin"

# ==== B: size products are checked; nothing is allocated from an unchecked size ====
head -c 8192 /dev/zero > "$TMP/p8k"
check B.quantize-overflow 2 "shape_invalid.*rows 1050892457676, cols 4388352" "absent=$TMP/out/ov.bin" -- \
    qgold quantize --format q4_k --rows 1050892457676 --cols 4388352 --in "$TMP/p8k" --out "$TMP/out/ov.bin"
check B.dequant-overflow 2 "shape_invalid" "absent=$TMP/out/ov.f32" -- \
    qgold dequant --format q6_k --rows 1099511627776 --cols 1099511627776 --in "$TMP/p8k" --out "$TMP/out/ov.f32"
check B.rans-encode-huge 1 "expected 18446744065119617025" "absent=$TMP/out/ov.rans" -- \
    qgold rans encode --rows 4294967295 --cols 4294967295 --in "$TMP/p8k" --scales "$TMP/p8k" --out "$TMP/out/ov.rans"
mkdir -p "$TMP/adir"
check B.rans-check-dir 1 "is a directory" - -- qgold rans check "$TMP/adir"
check B.rows-plus 2 "rows must be an integer in 1\.\.1099511627776, got '+8'" "absent=$TMP/out/x" -- \
    qgold quantize --format q8_k --rows +8 --cols 1024 --in "$TMP/v.f32" --out "$TMP/out/x"
check B.cols-space 2 "cols must be an integer" "absent=$TMP/out/x" -- \
    qgold quantize --format q8_k --rows 8 --cols " 1024" --in "$TMP/v.f32" --out "$TMP/out/x"
check B.rans-rows-plus 2 "rows must be an integer in 0\.\.4294967295, got '+300'" "absent=$TMP/out/x" -- \
    qgold rans encode --rows +300 --cols 70 --in "$TMP/w.i8" --scales "$TMP/s.f32" --out "$TMP/out/x"
check B.rans-rows-overflow 2 "rows must be an integer in 0\.\.4294967295, got '18446744073709551617'" "absent=$TMP/out/x" -- \
    qgold rans encode --rows 18446744073709551617 --cols 2 --in "$TMP/w.i8" --scales "$TMP/s.f32" --out "$TMP/out/x"

# ==== C: messages and exit statuses ====
check C.dir-input 1 "is a directory" "absent=$TMP/out/x" -- \
    qgold quantize --format q4_k --rows 1 --cols 256 --in "$TMP/adir" --out "$TMP/out/x"
check C.write-says-why 1 "cannot write $TMP/adir: Is a directory" - -- \
    qgold quantize --format q8_k --rows 8 --cols 1024 --in "$TMP/v.f32" --out "$TMP/adir"
check C.decode-checksums 2 "checksums applies to encode" "absent=$TMP/out/x" -- \
    qgold rans decode --checksums --in "$TMP/w.rans" --out "$TMP/out/x"
check C.list-format-missing 2 "option --format needs a value" - -- qgold list --format
check C.bench-format-missing 2 "option --format needs a value" - -- qgold bench --format
check C.quantize-cols-exit2 2 "kq_cols_not_multiple" "absent=$TMP/out/x" -- \
    qgold quantize --format q6_k --rows 1 --cols 4544 --in "$TMP/v.f32" --out "$TMP/out/x"
check C.dequant-cols-exit2 2 "kq_cols_not_multiple" "absent=$TMP/out/x" -- \
    qgold dequant --format q4_k --rows 1 --cols 896 --in "$TMP/v.f32" --out "$TMP/out/x"
check C.help-exit-status 0 "2 wrong arguments" - -- qgold quantize --help
check C.force-isa-list 2 "QG_FORCE_ISA='bogus' is not one of scalar, avx2, neon" - -- qgold_env QG_FORCE_ISA=bogus list
check C.force-isa-audit 2 "QG_FORCE_ISA='bogus' is not one of scalar, avx2, neon" - -- qgold_env QG_FORCE_ISA=bogus audit
check C.force-isa-dequant 2 "QG_FORCE_ISA='bogus' is not one of scalar, avx2, neon" "absent=$TMP/out/x" -- \
    qgold_env QG_FORCE_ISA=bogus dequant --format q8_k --rows 8 --cols 1024 --in "$TMP/z.q8k" --out "$TMP/out/x"
# --quick: a binary that wrongly accepts the number runs only the short smoke measurement
check C.reps-trailing 2 "reps must be an integer in 7..63, got '7abc'" - -- qgold bench --format fp16 --backend ref --quick --reps 7abc
check C.threads-sign 2 "threads must be an integer in 1..256, got '+4'" - -- qgold bench --format fp16 --backend ref --quick --threads +4

# ==== D: inputs outside the quantizer's domain: a warning, or with --strict an error and no output ====
nan4='\000\000\300\177' big4='\236\311\177\177' # NaN, 3.4e38
{ head -c 4100 "$TMP/v.f32"; printf "$nan4"; tail -c +4105 "$TMP/v.f32"; } > "$TMP/nan.f32" # row 1, element 1
check D.nan-warns 0 "warning: kq_input_out_of_domain.*row 1, block 0 (columns 0..255); 1 of 32 blocks" "notemp=$TMP/out" -- \
    qgold quantize --format q4_k --rows 8 --cols 1024 --in "$TMP/nan.f32" --out "$TMP/out/nan.q4k"
keep "$TMP/out/strict.q4k"
check D.nan-strict 1 "kq_input_out_of_domain.*row 1, block 0" "same=$TMP/out/strict.q4k=$TMP/old" -- \
    qgold quantize --strict --format q4_k --rows 8 --cols 1024 --in "$TMP/nan.f32" --out "$TMP/out/strict.q4k"
check D.nan-strict-new 1 "kq_input_out_of_domain.*1 of 32 blocks" "absent=$TMP/out/strict2.q4k" -- \
    qgold quantize --strict --format q4_k --rows 8 --cols 1024 --in "$TMP/nan.f32" --out "$TMP/out/strict2.q4k"
i=0; : > "$TMP/big.f32"; while [ $i -lt 256 ]; do printf "$big4" >> "$TMP/big.f32"; i=$((i + 1)); done
check D.huge-warns 0 "warning: kq_input_out_of_domain.*row 0, block 0 (columns 0..255); 1 of 1 blocks" - -- \
    qgold quantize --format q6_k --rows 1 --cols 256 --in "$TMP/big.f32" --out "$TMP/out/big.q6k"
check D.huge-strict 1 "kq_input_out_of_domain" "absent=$TMP/out/big2.q6k" -- \
    qgold quantize --format q5_k --rows 1 --cols 256 --in "$TMP/big.f32" --out "$TMP/out/big2.q6k" --strict
check D.clean-no-warning 0 "" - -- sh -c 'out=$("$@" 2>&1) || exit $?; case $out in *warning*) exit 3 ;; esac' sh $EMU "$QGOLD_BIN" \
    quantize --strict --format q4_k --rows 8 --cols 1024 --in "$TMP/v.f32" --out "$TMP/out/clean.q4k"

# ==== E: the fixture directory is found at run time, not compiled in ====
mkdir -p "$TMP/reloc/bin"
cp "$QGOLD_BIN" "$TMP/reloc/bin/qgold"
reloc() { $EMU "$TMP/reloc/bin/qgold" "$@"; }
check E.copied-binary 1 "no fixture directory found.*/reloc/bin/qgold-golden.path (absent)" - -- reloc audit --format fp16 --backend ref
ln -s "$GOLDEN" "$TMP/golden-link"
check E.env 0 "golden $TMP/golden-link;" - -- env QGOLD_GOLDEN="$TMP/golden-link" $EMU "$TMP/reloc/bin/qgold" audit --format fp16 --backend ref
check E.env-not-dir 1 "QGOLD_GOLDEN=$TMP/nope is not a directory" - -- env QGOLD_GOLDEN="$TMP/nope" $EMU "$TMP/reloc/bin/qgold" audit
mkdir -p "$TMP/reloc/share/qgold"
ln -s "$GOLDEN" "$TMP/reloc/share/qgold/golden"
check E.install-layout 0 "golden .*/reloc/bin/.*share/qgold/golden;" - -- reloc audit --format fp16 --backend ref
check E.build-tree 0 "golden $GOLDEN;" - -- qgold audit --format fp16 --backend ref

echo "$((checks - fails)) passed, $fails failed"
[ "$fails" -eq 0 ]
