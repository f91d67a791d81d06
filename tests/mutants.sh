#!/usr/bin/env bash
# tests/mutants.sh — mutation testing: does the suite notice a plausible bug?
#
#   tests/mutants.sh [--list FILE] [--only ID,ID,...] [--no-baseline]
#   (`make mutants` runs it; MUTANTS_ONLY=ID,ID and MUTANTS_ARGS pass options through make)
#
# Each mutant of the list (tests/mutants.txt; its header describes the format) is one textual
# change to one source file: a flipped sign, a dropped call, an off-by-one bound, swapped
# operands, a skipped bucket, a wrong RNG key. For each, this script
#   1. applies it to a private copy of the source tree (the tracked and untracked-not-ignored
#      files of this checkout, synced into $MUTANTS_DIR/src, default build/mutants/src; only files
#      whose content changed are rewritten, so the copy's build directory stays valid from one
#      run to the next and each mutant rebuilds incrementally),
#   2. builds what its tests need in the copy (make -j$MUTANTS_JOBS, default 2),
#   3. runs its tests in order until one fails: the mutant is "caught" by that test; when all
#      pass it "survived",
#   4. restores the file with its old text and modification time, and deletes every build
#      output written while the mutant was in place (they hold the mutant), so that the next
#      mutant rebuilds only what it needs — never, say, the nvcc objects of a CUDA file that an
#      earlier mutant changed.
# A mutant whose search text is not in its file (or is there more often than its `occurrence`
# allows choosing) is "stale"; one that no longer compiles is "nobuild" — the list must then be
# fixed. Before the first mutant every test the list names runs once on the unmutated copy
# (the baseline): a test that fails there could not tell a mutant from the original.
#
# Output: one line per mutant while it runs, then the table (id, file, result, caught by, time,
# description) and the total time. Exit status 0 only when every mutant was caught.
# Logs of each mutant's build and tests: $MUTANTS_DIR/logs/<id>.log.
set -u
set -o pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
LIST=$ROOT/tests/mutants.txt
ONLY=${MUTANTS_ONLY:-}
BASELINE=1
JOBS=${MUTANTS_JOBS:-2}
TEST_TIMEOUT=${MUTANTS_TIMEOUT:-600}   # seconds per test run; a mutant that hangs is caught by the timeout
while [ $# -gt 0 ]; do
  case $1 in
    --list) LIST=$2; shift 2;;
    --only) ONLY=$2; shift 2;;
    --no-baseline) BASELINE=0; shift;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;;
    *) echo "mutants: unknown option '$1'" >&2; exit 2;;
  esac
done
case $LIST in /*) ;; *) LIST=$PWD/$LIST;; esac
[ -f "$LIST" ] || { echo "mutants: no list $LIST" >&2; exit 2; }

WORK=${MUTANTS_DIR:-$ROOT/build/mutants}
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd)
SRC=$WORK/src
LOGS=$WORK/logs
ORIG=$WORK/orig       # the pristine copy of the file a mutant changes, while it is changed
mkdir -p "$SRC" "$LOGS" "$ORIG"
T0=$(date +%s)

# The copy's build is its own (B=build inside the copy), with its own GEMM calibration cache.
export MINGPT_CACHE_DIR=$SRC/build/gemm-cache
unset MINGPT_SKIP_LOG B
# One OpenMP and OpenBLAS thread per test, as mk/cuda.mk runs the emulated suites: on a loaded
# 2-core machine spinning OpenMP teams made single tests up to 100x slower (MUTANTS_THREADS
# overrides it; the tests of thread-count invariance set their own counts).
export OMP_NUM_THREADS=${MUTANTS_THREADS:-1} OPENBLAS_NUM_THREADS=${MUTANTS_THREADS:-1}
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}

# ---------------------------------------------------------------- the copy
# A file left mutated by an interrupted run is put back first (its pristine text is in $ORIG),
# with a new modification time: what was built from the mutant is rebuilt.
restore_all() {
  local f
  (cd "$ORIG" && find . -type f -print) | while IFS= read -r f; do
    f=${f#./}; cp "$ORIG/$f" "$SRC/$f" && rm -f "$ORIG/$f"
  done
}
restore_all
# Ctrl-C or a kill while a mutant is in place: put the file back before leaving.
trap 'restore_all; exit 130' INT TERM

sync_tree() {
  local n=0 f
  local new=$WORK/files.new old=$WORK/files.list
  git -C "$ROOT" ls-files -co --exclude-standard > "$new" || return 1
  while IFS= read -r f; do
    [ -f "$ROOT/$f" ] || continue              # deleted in the checkout, not yet in git
    if ! cmp -s "$ROOT/$f" "$SRC/$f"; then
      mkdir -p "$(dirname "$SRC/$f")" && cp "$ROOT/$f" "$SRC/$f" && n=$((n+1))
    fi
  done < "$new"
  # files no longer in the checkout leave the copy too
  if [ -f "$old" ]; then
    sort "$old" > "$old.s"; sort "$new" > "$new.s"
    comm -23 "$old.s" "$new.s" | while IFS= read -r f; do rm -f "$SRC/$f"; done
    rm -f "$old.s" "$new.s"
  fi
  mv "$new" "$old"
  # the corpus (ignored, not tracked) and ../shared (references, data), as the checkout sees them
  if [ -f "$ROOT/data/input.txt" ] && ! cmp -s "$ROOT/data/input.txt" "$SRC/data/input.txt"; then
    cp "$ROOT/data/input.txt" "$SRC/data/input.txt"
  fi
  if [ -d "$ROOT/../shared" ] && [ ! -e "$WORK/shared" ]; then ln -s "$(cd "$ROOT/../shared" && pwd)" "$WORK/shared"; fi
  echo "mutants: source copy $SRC ($n files updated)"
}
sync_tree || { echo "mutants: cannot list the checkout's files" >&2; exit 2; }

# ---------------------------------------------------------------- the list
# Parsed by Python into one record per mutant, fields separated by ASCII unit separators (0x1f):
# id, file, find, replace, occurrence, tests, needs, env, description (find and replace escaped
# to one line: a newline as \n, a backslash as \\).
PY=python3
parse_list() {
  $PY - "$1" <<'EOF'
import sys
recs, cur = [], None
def flush():
    if cur is not None: recs.append(cur)
for ln_no, raw in enumerate(open(sys.argv[1], encoding="utf-8"), 1):
    line = raw.rstrip("\n")
    if not line.strip() or line.lstrip().startswith("#"):
        continue
    if line.startswith("[") and line.rstrip().endswith("]"):
        flush(); cur = {"id": line.strip()[1:-1], "line": ln_no}
        continue
    if cur is None or ":" not in line:
        sys.exit(f"{sys.argv[1]}:{ln_no}: expected '[id]' or 'key: value'")
    k, v = line.split(":", 1)
    k = k.strip(); v = v[1:] if v.startswith(" ") else v
    if k in ("find", "replace") and k in cur:   # continuation lines: a multi-line text
        cur[k] += "\n" + v
    else:
        cur[k] = v
flush()
seen = set()
for r in recs:
    for k in ("file", "find", "tests", "desc"):
        if k not in r: sys.exit(f"{sys.argv[1]}:{r['line']}: [{r['id']}] lacks '{k}:'")
    if r["id"] in seen: sys.exit(f"{sys.argv[1]}:{r['line']}: duplicate id {r['id']}")
    seen.add(r["id"])
    f = [r["id"], r["file"], r["find"].replace("\\", "\\\\").replace("\n", "\\n"),
         r.get("replace", "").replace("\\", "\\\\").replace("\n", "\\n"),
         r.get("occurrence", "0"), r["tests"], r.get("needs", ""), r.get("env", ""), r["desc"]]
    print("\x1f".join(f))
EOF
}
RECORDS=$WORK/records
parse_list "$LIST" > "$RECORDS" || { echo "mutants: cannot parse $LIST" >&2; exit 2; }
if [ -n "$ONLY" ]; then
  awk -F'\x1f' -v only=",$ONLY," 'index(only, "," $1 ",")' "$RECORDS" > "$RECORDS.only" && mv "$RECORDS.only" "$RECORDS"
fi
NMUT=$(wc -l < "$RECORDS")
[ "$NMUT" -gt 0 ] || { echo "mutants: no mutant selected" >&2; exit 2; }

# apply FILE FIND REPLACE OCCURRENCE: replace the OCCURRENCE-th (1-based) literal FIND in FILE.
# OCCURRENCE 0 (no `occurrence:` in the list): FIND must occur exactly once. Exit 3 when FIND
# is absent or has fewer occurrences (stale), 4 when it is ambiguous (printing the count).
apply_mutant() {
  $PY - "$@" <<'EOF'
import sys
path, find, repl, occ = sys.argv[1:5]
import re
dec = lambda s: re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), s)
find, repl = dec(find), dec(repl)
text = open(path, encoding="utf-8").read()
n = text.count(find)
k = max(int(occ), 1)
if n < k: sys.exit(3)
if occ == "0" and n > 1:
    print(n); sys.exit(4)
pos = -1
for _ in range(k):
    pos = text.find(find, pos + 1)
open(path, "w", encoding="utf-8").write(text[:pos] + repl + text[pos + len(find):])
print(n)
EOF
}

# ---------------------------------------------------------------- tests
# A test is named by kind:
#   unit:NAME        the cmocka program tests/NAME.c ($B/tests/NAME)
#   cuda:NAME        an emulated CUDA suite tests/cuda/NAME.c ($B/cuda-tests/NAME), one thread
#   sh:PATH          a shell test (bash PATH), after building the mutant's `needs:` (e.g. mingpt)
#   make:TARGET      a make target of the copy (builds and runs it)
# test_targets TEST: the make targets it needs built (a shell test's are its mutant's `needs:`).
test_targets() {
  case $1 in
    unit:*) echo "build/tests/${1#unit:}";;
    cuda:*) echo "build/cuda-tests/${1#cuda:}";;
  esac
}
setenv() { [ $# -eq 0 ] || export "$@"; }
run_test() {   # run_test TEST LOG [VAR=VALUE...]
  local t=$1 log=$2; shift 2
  case $t in
    unit:*) (cd "$SRC" && setenv "$@" && timeout "$TEST_TIMEOUT" "build/tests/${t#unit:}") < /dev/null >> "$log" 2>&1;;
    cuda:*) (cd "$SRC" && setenv "$@" && timeout "$TEST_TIMEOUT" "build/cuda-tests/${t#cuda:}") < /dev/null >> "$log" 2>&1;;
    sh:*)   (cd "$SRC" && setenv "$@" && timeout "$TEST_TIMEOUT" bash "${t#sh:}") < /dev/null >> "$log" 2>&1;;
    make:*) (cd "$SRC" && setenv "$@" && timeout "$TEST_TIMEOUT" make --no-print-directory -j"$JOBS" "${t#make:}") < /dev/null >> "$log" 2>&1;;
    *) echo "mutants: unknown test kind '$t'" >> "$log"; return 2;;
  esac
}
build_for() {  # build_for LOG TEST... [-- NEEDS...]: build every target those tests need
  local log=$1; shift
  local targets=() t
  for t in "$@"; do
    case $t in
      -*) ;;
      unit:*|cuda:*|sh:*|make:*) targets+=($(test_targets "$t"));;
      *) targets+=("$t");;     # a `needs:` target
    esac
  done
  [ ${#targets[@]} -eq 0 ] && return 0
  (cd "$SRC" && make --no-print-directory -j"$JOBS" "${targets[@]}") < /dev/null >> "$log" 2>&1
}

# ---------------------------------------------------------------- baseline
if [ "$BASELINE" = 1 ]; then
  BLOG=$LOGS/baseline.log; : > "$BLOG"
  # every (environment, test) pair of the list, once
  pairs=$(awk -F'\x1f' '{ n = split($6, t, " "); for (i = 1; i <= n; i++) print $8 "\x1f" t[i] }' "$RECORDS" | awk '!s[$0]++')
  all_tests=$(awk -F'\x1f' '{print $6}' "$RECORDS" | tr ' ' '\n' | grep -v '^$' | awk '!s[$0]++')
  all_needs=$(awk -F'\x1f' '{print $7}' "$RECORDS" | tr ' ' '\n' | grep -v '^$' | awk '!s[$0]++')
  tb=$(date +%s)
  echo "mutants: baseline: build and run $(echo "$pairs" | wc -l) tests on the unmutated copy"
  # shellcheck disable=SC2086
  if ! build_for "$BLOG" $all_tests $all_needs; then
    tail -40 "$BLOG"; echo "mutants: the unmutated copy does not build (log: $BLOG)"; exit 2
  fi
  bad_base=""
  while IFS=$'\x1f' read -r envs t; do
    t1=$(date +%s)
    echo "== baseline $envs $t" >> "$BLOG"
    # shellcheck disable=SC2086
    if run_test "$t" "$BLOG" $envs; then echo "  baseline ok   ${envs:+$envs }$t ($(( $(date +%s) - t1 )) s)"
    else echo "  baseline FAIL ${envs:+$envs }$t"; bad_base="$bad_base ${envs:+$envs }$t"; fi
  done <<< "$pairs"
  if [ -n "$bad_base" ]; then
    echo "mutants: these tests fail without any mutant:$bad_base (log: $BLOG)"; exit 2
  fi
  echo "mutants: baseline passed in $(( $(date +%s) - tb )) s"
fi

# ---------------------------------------------------------------- the mutants
RESULTS=$WORK/results; : > "$RESULTS"
i=0
while IFS=$'\x1f' read -r id file find repl occ tests needs envs desc; do
  i=$((i+1))
  log=$LOGS/$id.log; : > "$log"
  tm=$(date +%s)
  result="" by="-"
  if [ ! -f "$SRC/$file" ]; then
    result=stale; by="no file $file"
  else
    mkdir -p "$(dirname "$ORIG/$file")" && cp -p "$SRC/$file" "$ORIG/$file"
    touch "$WORK/stamp"; sleep 0.01   # outputs newer than the stamp were built from the mutant
    n=$(apply_mutant "$SRC/$file" "$find" "$repl" "$occ"); rc=$?
    if [ $rc -eq 3 ]; then
      result=stale; by="text not found"
    elif [ $rc -eq 4 ]; then
      result=stale; by="text found $n times (add occurrence:)"
    else
      (cd "$SRC" && git diff --no-index -U1 "$ORIG/$file" "$file") >> "$log" 2>&1
      # shellcheck disable=SC2086
      if ! build_for "$log" $tests $needs; then
        result=nobuild; by="compile error"
      else
        result=survived
        for t in $tests; do
          echo "== $t" >> "$log"
          # shellcheck disable=SC2086
          run_test "$t" "$log" $envs; trc=$?
          if [ $trc -ne 0 ]; then
            result=caught; by=$t
            [ $trc -eq 124 ] && by="$t (timeout)"
            break
          fi
        done
      fi
    fi
    # back to the original text and time; what was built meanwhile goes (the GEMM calibration
    # cache stays: it depends on the machine, not on the source)
    cp -p "$ORIG/$file" "$SRC/$file" && rm -f "$ORIG/$file"
    find "$SRC/build" -path "$SRC/build/gemm-cache" -prune -o -type f -newer "$WORK/stamp" -print0 | xargs -0r rm -f
  fi
  dt=$(( $(date +%s) - tm ))
  printf '%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\n' "$id" "$file" "$result" "$by" "$dt" "$desc" >> "$RESULTS"
  printf 'mutant %2d/%d %-26s %-9s %-28s %4d s\n' "$i" "$NMUT" "$id" "$result" "$by" "$dt"
done < "$RECORDS"

# ---------------------------------------------------------------- the table
TOTAL=$(( $(date +%s) - T0 ))
echo
echo "| # | mutant | file | result | caught by | time | description |"
echo "|---|---|---|---|---|---|---|"
awk -F'\x1f' '{ printf "| %d | %s | %s | %s | %s | %d s | %s |\n", NR, $1, $2, $3, $4, $5, $6 }' "$RESULTS"
caught=$(awk -F'\x1f' '$3=="caught"' "$RESULTS" | wc -l)
survived=$(awk -F'\x1f' '$3=="survived"' "$RESULTS" | wc -l)
stale=$(awk -F'\x1f' '$3=="stale"' "$RESULTS" | wc -l)
nobuild=$(awk -F'\x1f' '$3=="nobuild"' "$RESULTS" | wc -l)
echo
printf 'mutants: %d caught, %d survived, %d stale, %d nobuild of %d; total time %d:%02d (%d s)\n' \
  "$caught" "$survived" "$stale" "$nobuild" "$NMUT" $((TOTAL/60)) $((TOTAL%60)) "$TOTAL"
[ "$caught" -eq "$NMUT" ]
