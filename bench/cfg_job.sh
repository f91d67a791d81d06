#!/usr/bin/env bash
# bench/cfg_job.sh — how long `mingpt --cfg job` takes (process start to exit), the median of
# N runs after a few warm-up runs. Target: under 20 ms (Hydra itself takes about half a second).
#   bash bench/cfg_job.sh [./mingpt] [N]
set -u
BIN=${1:-./mingpt}
N=${2:-51}
TARGET_MS=20
[ -x "$BIN" ] || { echo "bench/cfg_job.sh: $BIN is not built (make mingpt)"; exit 1; }
"$BIN" --cfg job > /dev/null || { echo "bench/cfg_job.sh: '$BIN --cfg job' failed"; exit 1; }

# Microsecond clock: bash's $EPOCHREALTIME (no fork), else date +%s%N.
now_us() {
  if [ -n "${EPOCHREALTIME:-}" ]; then local t=${EPOCHREALTIME/[.,]/}; echo $((10#$t))
  else echo $(( $(date +%s%N) / 1000 )); fi
}

# median_us ARGS...: the median wall time of `$BIN ARGS` over N runs, in microseconds.
median_us() {
  for _ in 1 2 3; do "$BIN" "$@" > /dev/null; done
  local times=() s e
  for _ in $(seq "$N"); do
    s=$(now_us); "$BIN" "$@" > /dev/null; e=$(now_us)
    times+=($((e - s)))
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n "$((N / 2 + 1))p"
}
fmt() { printf '%d.%02d' $(($1 / 1000)) $(($1 % 1000 / 10)); }

cfg=$(median_us --cfg job)
# --version without the CUDA and MPI libraries it would load to name their versions (cuBLAS
# alone costs ~60 ms): the process start-up and the libraries every command loads
ver=$(MINGPT_CUDA_LIB=/nonexistent MINGPT_MPI_LIB=/nonexistent median_us --version)
echo "mingpt --cfg job: median $(fmt "$cfg") ms over $N runs (target < $TARGET_MS ms)"
echo "mingpt --version: median $(fmt "$ver") ms (process start-up and shared libraries alone)"
if [ "$cfg" -ge $((TARGET_MS * 1000)) ]; then
  echo "  over the target; the start-up alone takes $(fmt "$ver") ms: see 'ldd $BIN' (libcublas costs ~60 ms to load)"
fi
