#!/usr/bin/env bash
# bench/bench_eval.sh — `make bench-eval` (part of `make bench`): the cost of a full evaluation of
# char_cpu.yaml's test split (about 111k windows of 64 characters) with the default
# data_config.eval_stride (0 = block_size: each test character predicted once) against
# eval_stride=1 (every overlapping window, the evaluation before eval_stride), same run.
#
#   bash bench/bench_eval.sh [./mingpt] [SNAPSHOT]
#   EVAL_DIR=build/bench-eval EVAL_OVERRIDES="data_config.truncate=0.1" bash bench/bench_eval.sh
#
# 1. The snapshot: SNAPSHOT when given, else $EVAL_DIR/char_cpu_snapshot.bin, trained once with
#    `./mingpt --config-name char_cpu` (2000 iterations, about 2 minutes) when it is not there yet.
# 2. Two evaluation-only runs on it (a run whose snapshot already has max_iters iterations only
#    evaluates: "Nothing to train"), trainer_config.eval_iters=0 (the whole split), each in its own
#    run directory: the default stride, then eval_stride=1. Times are whole runs (wall clock,
#    start-up and data loading included, as a user sees them); losses from summary.json.
# Goals: the default >= 40x faster, losses within 0.02.
# EVAL_OVERRIDES are appended to every command (e.g. a smaller corpus for a smoke run; the
# snapshot must then be trained with the same data overrides, so use a fresh EVAL_DIR).
set -euo pipefail

BIN=${1:-./mingpt}
SNAP=${2:-}
DIR=${EVAL_DIR:-build/bench-eval}
read -r -a EXTRA <<<"${EVAL_OVERRIDES:-}"
[ -x "$BIN" ] || { echo "bench/bench_eval.sh: $BIN is not built (make mingpt)" >&2; exit 1; }
[ -f data/input.txt ] || { echo "bench/bench_eval.sh: data/input.txt is missing (make data)" >&2; exit 1; }
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
run() { "$BIN" --config-name char_cpu "$@" ${EXTRA[@]+"${EXTRA[@]}"}; }

if [ -z "$SNAP" ]; then
  SNAP=$DIR/char_cpu_snapshot.bin
  if [ ! -f "$SNAP" ]; then
    echo "bench-eval: training char_cpu.yaml into $SNAP (once)"
    run hydra.run.dir="$DIR/train" trainer_config.snapshot_path="$SNAP" > "$DIR/train.log" 2>&1 ||
      { tail -5 "$DIR/train.log" >&2; exit 1; }
  fi
fi
[ -f "$SNAP" ] || { echo "bench/bench_eval.sh: snapshot $SNAP not found" >&2; exit 1; }
SNAP=$(cd "$(dirname "$SNAP")" && pwd)/$(basename "$SNAP")
iters=$(run --cfg job -p trainer_config.max_iters)

# evaluate NAME OVERRIDES...: one evaluation-only run; prints "seconds loss"
evaluate() {
  local name=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  run hydra.run.dir="$DIR/$name" trainer_config.snapshot_path="$SNAP" trainer_config.eval_iters=0 "$@" \
    > "$DIR/$name.log" 2>&1 || { tail -5 "$DIR/$name.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  grep -q "Nothing to train" "$DIR/$name.log" ||
    { echo "bench/bench_eval.sh: $SNAP has fewer than $iters iterations: the run trained" >&2; exit 1; }
  echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" \
       "$(sed -n 's/.*"test_loss": \([-0-9.e+]*\).*/\1/p' "$DIR/$name/summary.json")"
}

echo "bench-eval: $SNAP ($iters iterations), whole test split"
read -r t_def l_def <<<"$(evaluate eval_default)"
echo "  default stride (block_size): $t_def s, test loss $l_def"
read -r t_one l_one <<<"$(evaluate eval_stride1 data_config.eval_stride=1)"
echo "  eval_stride=1 (every window): $t_one s, test loss $l_one"
awk -v td="$t_def" -v ld="$l_def" -v t1="$t_one" -v l1="$l_one" 'BEGIN {
  s = t1 / td; d = ld - l1; ad = d < 0 ? -d : d
  printf "RESULT eval default_s=%.2f stride1_s=%.2f speedup=%.1f default_loss=%.4f stride1_loss=%.4f diff=%+.4f " \
         "speedup_ge_40=%s within_0.02=%s\n", td, t1, s, ld, l1, d, (s >= 40 ? "yes" : "NO"), (ad <= 0.02 ? "yes" : "NO") }'
