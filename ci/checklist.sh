#!/usr/bin/env bash
# Walks README.md's "Adding a format" checklist with a test-only format, tq8 (tests/checklist/tq8/):
#   1. copies the tree (tracked and untracked files git does not ignore) to a scratch directory;
#   2. adds the format's own files (tests/checklist/tq8/tree/, each at the path the checklist names);
#   3. adds its table rows (tests/checklist/tq8/rows.txt), each just above its table's end marker;
#   4. counts the existing files that changed: each must be a table of the checklist, changed only by
#      whole inserted lines; a driver file or any other change fails;
#   5. regenerates the new format's fixture (regen.py --only tq8), builds, and requires `qgold list`
#      to show its rows and `golden.tq8.*` (every CPU backend built) to pass.
# Runs in a few minutes on 2 cores; ci/test.sh calls it. Usage: ci/checklist.sh [SCRATCH_DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

FMT=tq8
SRC=tests/checklist/$FMT
# The files a new format may edit: the tables of the checklist, nothing else.
TABLES="kernels/include/qgold/registry.h kernels/registry.c tests/harness/kinds.c generators/qgold_gen/golden.py
tests/bench/bench_formats.c tests/cli/qgold.c tests/cli/cmds.h reference/include/qgold/errors.h ci/mutants.txt"

SCRATCH=${1:-$(mktemp -d)}
KEEP=${1:+1}
cleanup() { [ -n "$KEEP" ] || rm -rf "$SCRATCH"; }
trap cleanup EXIT
step "checklist: scratch copy of the tree in $SCRATCH"
mkdir -p "$SCRATCH/tree"
git ls-files -z --cached --others --exclude-standard | grep -zv "^$SRC/" | tar --null -T - -cf - | tar -xf - -C "$SCRATCH/tree"
cp -a "$SCRATCH/tree" "$SCRATCH/before"

step "checklist: the format's own files"
own=0
while IFS= read -r -d '' f; do
    rel=${f#"$SRC/tree/"}
    if [ -e "$SCRATCH/tree/$rel" ]; then echo "checklist: $rel already exists: a new format's own file must be new" >&2; exit 1; fi
    mkdir -p "$(dirname "$SCRATCH/tree/$rel")"
    cp "$f" "$SCRATCH/tree/$rel"
    echo "  new  $rel"
    own=$((own + 1))
done < <(find "$SRC/tree" -type f -print0 | sort -z)

step "checklist: table rows"
while IFS='|' read -r file marker line; do
    file=$(echo "$file" | xargs); marker=$(echo "$marker" | xargs); line=$(echo "$line" | sed 's/^ //')
    case "$file" in ''|'#'*) continue ;; esac
    case " $(echo $TABLES) " in *" $file "*) ;; *) echo "checklist: $file is not a table of the checklist (a driver file would need an edit)" >&2; exit 1 ;; esac
    target="$SCRATCH/tree/$file"
    n=$(grep -c -- "$marker" "$target" || true)
    if [ "$n" != 1 ]; then echo "checklist: $file: the end marker '$marker' appears $n times (want 1)" >&2; exit 1; fi
    # The row takes the marker line's indentation and, inside a multi-line macro, its continuation.
    MARKER="$marker" LINE="$line" python3 - "$target" <<'EOF'
import os, sys
path = sys.argv[1]
marker, line = os.environ["MARKER"], os.environ["LINE"]
text = open(path).read().split("\n")
i = next(k for k, t in enumerate(text) if marker in t)
indent = text[i][: len(text[i]) - len(text[i].lstrip())]
cont = " \\" if i > 0 and text[i - 1].rstrip().endswith("\\") else ""
text.insert(i, indent + line + cont)
open(path, "w").write("\n".join(text))
EOF
    echo "  row  $file: $line"
done < "$SRC/rows.txt"

step "checklist: what changed outside the format's own files"
edited=0
bad=0
for f in $(cd "$SCRATCH/before" && find . -type f | sed 's|^\./||' | sort); do
    if ! cmp -s "$SCRATCH/before/$f" "$SCRATCH/tree/$f"; then
        edited=$((edited + 1))
        removed=$(diff "$SCRATCH/before/$f" "$SCRATCH/tree/$f" | grep -c '^<' || true)
        case " $(echo $TABLES) " in *" $f "*) kind=table ;; *) kind=driver ;; esac
        echo "  edited ($kind) $f: $(diff "$SCRATCH/before/$f" "$SCRATCH/tree/$f" | grep -c '^>' || true) lines added, $removed removed"
        if [ "$kind" = driver ] || [ "$removed" != 0 ]; then bad=1; fi
    fi
done
echo "checklist: $own new files of the format, $edited existing files edited (tables only: $([ $bad = 0 ] && echo yes || echo NO))"
[ "$bad" = 0 ] || { echo "checklist: adding $FMT needed more than table rows" >&2; exit 1; }

step "checklist: fixture, build, audit"
cd "$SCRATCH/tree"
"$(generators_python)" generators/regen.py --only "$FMT" >/dev/null
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DQG_CUDA=OFF -DQG_WERROR="$WERROR" >/dev/null
cmake --build build -j "$JOBS" --target qgold golden_test >/dev/null
build/bin/qgold list --format "$FMT"
rows=$(build/bin/qgold list --format "$FMT" | grep -c "^$FMT " || true)
[ "$rows" -ge 2 ] || { echo "checklist: qgold list shows $rows $FMT rows (want the ref and avx2 rows)" >&2; exit 1; }
ctest --test-dir build -R "^golden\\.$FMT\\." --output-on-failure --no-tests=error
echo "checklist: $FMT added by its own files and table rows only; its golden tests pass"
