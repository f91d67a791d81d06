# tests/lib.sh — helpers for the shell tests (sourced). Each check counts a pass, a failure or a
# skip; `finish` prints "N passed, N failed, N skipped" and exits non-zero on any failure.
set -u
MINGPT=${MINGPT:-$PWD/mingpt}
PASS=0; FAIL=0; SKIPPED=0
# Under `make test SAN=1`: Open MPI (not instrumented) keeps allocations until exit, some in
# components it has already unloaded, which LeakSanitizer can neither attribute nor suppress by
# name. Processes started by mpirun therefore run with leak detection off (ASan and UBSan stay
# on); single-process runs keep it. Later options win in ASAN_OPTIONS.
MPI_ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
WORK=$(mktemp -d /tmp/mingpt_test.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

ok()   { PASS=$((PASS+1)); echo "  ok   $1"; }
bad()  { FAIL=$((FAIL+1)); echo "  FAIL $1"; [ -n "${2:-}" ] && echo "$2" | sed 's/^/       | /' | head -20; }
# skip KEY REASON: a check that cannot run on this machine. It is no pass: `make test` records it
# in $MINGPT_SKIP_LOG and fails unless KEY is on tests/allowed_skips.txt with its condition true.
skip() {
  SKIPPED=$((SKIPPED+1)); echo "  SKIP [$1] $2"
  if [ -n "${MINGPT_SKIP_LOG:-}" ]; then printf '%s\t%s\t%s\n' "$1" "$(basename "$0")" "$2" >> "$MINGPT_SKIP_LOG"; fi
}

# expect_error NAME CODE PATTERN -- CMD...: CMD exits with CODE and its stderr matches PATTERN (grep -E).
expect_error() {
  local name=$1 code=$2 pattern=$3; shift 4
  local out rc
  out=$("$@" 2>&1 >/dev/null); rc=$?
  if [ "$rc" -ne "$code" ]; then bad "$name (exit $rc, want $code)" "$out"; return; fi
  if ! grep -Eq -- "$pattern" <<<"$out"; then bad "$name (stderr lacks /$pattern/)" "$out"; return; fi
  if grep -Eq 'Segmentation|Aborted|AddressSanitizer|core dumped' <<<"$out"; then bad "$name (crashed)" "$out"; return; fi
  ok "$name"
}

# bad_input ID CODE 'FRAGMENT' -- CMD...: one row of the bad-input table (docs/robustness.md). CMD
# exits with CODE, its stderr contains the literal FRAGMENT (grep -F), and it did not crash. The row
# `| ID | ... | FRAGMENT | CODE |` is checked against these calls by tests/test_bad_input_table.sh,
# so keep ID, CODE and FRAGMENT literal on the call line.
bad_input() {
  local id=$1 code=$2 frag=$3; shift 4
  local out rc
  out=$("$@" 2>&1 >/dev/null); rc=$?
  if [ "$rc" -ne "$code" ]; then bad "$id (exit $rc, want $code)" "$out"; return; fi
  if ! grep -Fq -- "$frag" <<<"$out"; then bad "$id (stderr lacks '$frag')" "$out"; return; fi
  if grep -Eq 'Segmentation|Aborted|AddressSanitizer|runtime error:|core dumped' <<<"$out"; then bad "$id (crashed)" "$out"; return; fi
  ok "$id"
}

# no_partial_files DIR NAME: no temporary or partial file (*.tmp.*, *.tmp) was left under DIR.
no_partial_files() {
  local left; left=$(find "$1" \( -name '*.tmp.*' -o -name '*.tmp' \) 2>/dev/null)
  if [ -n "$left" ]; then bad "$2 (left behind)" "$left"; else ok "$2"; fi
}

finish() { echo "$(basename "$0"): $PASS passed, $FAIL failed, $SKIPPED skipped"; [ "$FAIL" -eq 0 ]; }
