#!/bin/sh
# tests/fuzz/run_fuzz.sh NAME BIN SECONDS OUTDIR — one libFuzzer target of `make fuzz` (mk/hardening.mk).
#
#   1. every file in tests/fuzz/regressions/NAME/ (inputs that once crashed) runs once;
#   2. BIN fuzzes for SECONDS s from the committed seeds tests/fuzz/corpus/NAME/ (read only) and
#      OUTDIR/corpus/NAME/ (what earlier runs found; new inputs go there, never into the checkout),
#      with tests/fuzz/NAME.dict when it exists.
# A crash, leak, timeout (> 10 s for one input) or out-of-memory (> 2048 MB) fails: its input is
# kept in OUTDIR/crashes/NAME/ and the command that reproduces it is printed.
name=${1:?usage: run_fuzz.sh NAME BIN SECONDS OUTDIR}; bin=${2:?}; secs=${3:?}; out=${4:?}
seeds=tests/fuzz/corpus/$name
regs=tests/fuzz/regressions/$name
corpus=$out/corpus/$name
crashes=$out/crashes/$name
log=$out/$name.log
mkdir -p "$corpus" "$crashes" || exit 2
# the sanitizers' own settings (not those of `make test SAN=1`, which send reports to files)
export ASAN_OPTIONS=${FUZZ_ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
unset LSAN_OPTIONS
set -- -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$crashes/"
[ -f "tests/fuzz/$name.dict" ] && set -- "$@" -dict="tests/fuzz/$name.dict"

failed() {  # what [input]: the sanitizer's report, the input, how to reproduce
  echo "FAILED: fuzz $name: $1"
  awk '/ERROR: |runtime error:|ALARM: |out-of-memory/ { on = 1 } on { print; if (++n == 50 || /^SUMMARY/) exit }' "$log"
  input=${2:-$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)}
  if [ -n "$input" ]; then
    echo "  input:     $input"
    echo "  reproduce: $bin $input"
    [ -n "$2" ] || echo "  minimize:  $bin -minimize_crash=1 -runs=100000 $input"
    [ -n "$2" ] || echo "  once fixed, keep it as a regression input: cp $input $regs/"
  fi
  echo "  full log:  $log"
  exit 1
}

if [ -d "$regs" ] && [ -n "$(ls -A "$regs")" ]; then
  n=$(ls -A "$regs" | wc -l)
  if ! "$bin" "$@" "$regs"/* >"$log" 2>&1; then
    failed "a regression input fails again" "$(sed -n 's/^Running: //p' "$log" | tail -1)"
  fi
  echo "fuzz $name: $n regression inputs pass"
fi

[ -d "$seeds" ] || { echo "FAILED: fuzz $name: no seed corpus $seeds"; exit 1; }
if ! "$bin" "$@" -max_total_time="$secs" -print_final_stats=1 "$corpus" "$seeds" >"$log" 2>&1; then
  failed "a crash, leak, timeout or out-of-memory input"
fi
stat() { sed -n "s/^stat::$1: *//p" "$log"; }
cov=$(grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE).*cov: ' "$log" | tail -1 | sed -n 's/.*cov: \([0-9]*\) ft: \([0-9]*\).*/\1 edges, \2 features/p')
echo "fuzz $name: ${secs} s, $(stat number_of_executed_units) inputs ($(stat average_exec_per_sec)/s), $cov," \
     "$(ls "$corpus" | wc -l) in $corpus, peak RSS $(stat peak_rss_mb) MB: no crash"
