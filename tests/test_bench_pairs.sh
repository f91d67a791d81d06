#!/usr/bin/env bash
# make bench-speed's paired rounds (bench/run_bench.py --pairs): mingpt and PyTorch's best mode run
# back to back, the order alternating round by round, and the ratio goals judged by the median of the
# rounds' ratios, not by the single runs minutes apart. The driver runs here on stand-ins for
# bench_train and for a Python with torch (shell scripts printing the RESULT lines the driver parses,
# with the times a swinging machine gives: mingpt's single runs slow, its paired runs fast, PyTorch's
# paired runs varying round by round), so the driver's logic is checked in seconds, timing nothing.
cd "$(dirname "$0")/.." && source tests/lib.sh
export OMP_NUM_THREADS=2
LOG=$WORK/calls.log

# bench_train stand-in: sgemm, train and sample. A train run before any PyTorch run is one of the
# single runs (slow phase: fp32 15 ms, bf16 14 ms), after one a paired run (fp32 12 ms, bf16 10 ms).
cat > $WORK/bench_train <<'SH'
#!/usr/bin/env bash
cmd=$1; shift
amp=fp32; iters=0
while [ $# -gt 0 ]; do case $1 in --amp) amp=$2; shift;; --iters) iters=$2; shift;; esac; shift; done
case $cmd in
  sgemm) echo "GEMM stand-in"
         echo "RESULT sgemm n=4096 threads=2 library=stand-in openblas_core=None openblas=100.0 gflops=100.0";;
  train) if [ -e "$(dirname "$0")/torch_ran" ]; then phase=paired; else phase=single; fi
         case $phase-$amp in single-fp32) ms=15.0;; single-bf16) ms=14.0;; paired-fp32) ms=12.0;; *) ms=10.0;; esac
         [ "$iters" = 1 ] || echo "mg $amp $phase" >> "$(dirname "$0")/calls.log"
         echo "RESULT train params=818176 ms_median=$ms tok_s=1000.0 flops_iter=1e9 rss_kib=1000 need_kib=1000 amp=$amp lowp_fast=1 gemm_share=0.5 gemm_gflops=100.0";;
  sample) echo "RESULT sample in_window_chars_s=9000.0 chars_s=2000.0";;
esac
SH
# python-with-torch stand-in: the probe, then per mode fixed single-run times; the paired rounds
# (the 2nd and later runs of a mode) take the next time of a list, so the rounds' ratios differ.
cat > $WORK/python <<'SH'
#!/usr/bin/env bash
shift   # bench/torch_speed.py
d=$(dirname "$0"); amp=fp32; sdpa=0; comp=0; probe=0
while [ $# -gt 0 ]; do case $1 in --amp) amp=$2; shift;; --sdpa) sdpa=$2; shift;; --compile) comp=$2; shift;;
  --probe) probe=$2; shift;; esac; shift; done
if [ $probe = 1 ]; then echo "RESULT probe python=3.11 version=9.9 sdpa=1 compile=1 mkl=1"; exit 0; fi
touch "$d/torch_ran"
key=$amp-$sdpa-$comp; n=$(( $(cat "$d/n-$key" 2>/dev/null || echo 0) + 1 )); echo $n > "$d/n-$key"
case $key in
  fp32-0-0) ms=36.0;;
  fp32-0-1) set -- 28.0 28.0 40.0 30.0; ms=${!n};;   # single run 28; rounds 28, 40, 30
  bf16-0-0) ms=18.5;;
  bf16-0-1) set -- 17.0 17.0 17.0 17.0; ms=${!n};;
  *) ms=99.0;;
esac
[ $n = 1 ] || echo "pt $amp" >> "$d/calls.log"
echo "RESULT torch version=9.9 ms_median=$ms ms_min=$ms ms_max=$ms tok_s=1000.0 compile_s=1.0 rss_kib=1000"
SH
chmod +x $WORK/bench_train $WORK/python

bench() { python3 bench/run_bench.py --bin $WORK/bench_train --configs S --no-recompute --no-wait \
            --torch-py $WORK/python --torch-modes eager,compile --cache-dir $WORK/cache "$@"; }

echo "-- 3 paired rounds: the rounds alternate, the goals take the median round"
out=$(bench --pairs 3 2>&1); rc=$?
[ $rc = 0 ] && ok "bench-speed with the stand-ins exits 0" || bad "exit $rc" "$out"
# the calls of the rounds, in order: mingpt first in rounds 1 and 3, PyTorch first in round 2
want="mg fp32 paired|pt fp32|pt fp32|mg fp32 paired|mg fp32 paired|pt fp32|mg bf16 paired|pt bf16|pt bf16|mg bf16 paired|mg bf16 paired|pt bf16"
got=$(grep -E '^(mg [a-z0-9]+ paired|pt )' $LOG | paste -sd'|')
[ "$got" = "$want" ] && ok "rounds alternate the order: mingpt first, PyTorch first, mingpt first" \
  || bad "paired calls in this order: $got (want $want)" "$(cat $LOG)"
row=$(grep -E '^\| S \| fp32 \| compile' <<<"$out")
[ "$row" = "| S | fp32 | compile, torch 9.9, threads 2 | 12.0 12.0 12.0 | 28.0 40.0 30.0 | 2.33 3.33 2.50 | 2.50 |" ] \
  && ok "fp32 rounds: each round's ratio, and the median (2.50) rather than the mean (2.72)" \
  || bad "fp32 paired row: $row" "$(grep -A8 '^paired rounds' <<<"$out")"
goal=$(grep -E '^\| S >= 2.0x best PyTorch' <<<"$out")
[[ $goal == *"2.50, the median of 3 paired rounds (2.33, 3.33, 2.50); the single runs above: 1.87 (15.0 vs 28.0 ms"* \
   && $goal == *"| met |" ]] \
  && ok "the S goal: met on the median round (2.50), although the single runs read 1.87" || bad "S goal row: $goal"
goal=$(grep -E '^\| bf16 on S >= 1.3x' <<<"$out")
[[ $goal == *"1.70, the median of 3 paired rounds (1.70, 1.70, 1.70); the single runs above: 1.21 (14.0 vs 17.0 ms"* \
   && $goal == *"| met |" ]] \
  && ok "the bf16 goal against PyTorch's bf16: the median round (1.70, met), the single runs 1.21" || bad "bf16 goal row: $goal"

echo "-- no paired rounds: the single runs judge"
rm -f $WORK/torch_ran $WORK/n-* $LOG
out=$(bench --pairs 0 2>&1); rc=$?
goal=$(grep -E '^\| S >= 2.0x best PyTorch' <<<"$out")
[ $rc = 0 ] && ! grep -q '^paired rounds' <<<"$out" && ! grep -q '^paired round [0-9]' <<<"$out" \
  && [[ $goal == *"| 1.87 (15.0 vs 28.0 ms"* && $goal == *"| MISSED |" ]] \
  && ok "--pairs 0: no rounds, no table; the goal on the single runs (1.87, MISSED)" || bad "--pairs 0 (exit $rc): $goal" "$out"

echo "-- --quick: at most one round"
rm -f $WORK/torch_ran $WORK/n-* $LOG
out=$(bench --quick 2>&1); rc=$?
[ $rc = 0 ] && [ "$(grep -c '^paired round [0-9]' <<<"$out")" = 2 ] && grep -q '^paired round 1 of 1, S fp32' <<<"$out" \
  && ok "--quick: one round per precision" || bad "--quick rounds (exit $rc)" "$(grep '^paired' <<<"$out")"

expect_error "--pairs -1 is refused" 2 "pairs must be >= 0" -- bench --pairs -1
finish
