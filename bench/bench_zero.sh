#!/usr/bin/env bash
# bench/bench_zero.sh [MINGPT] — `make bench-zero`: sharded data parallelism (trainer_config.zero_stage)
# on the CPU backend. The M model (n_layer 6, n_head 6, n_embd 384, block 256, dropout 0, fp32,
# 10.8M parameters) on 2 ranks x 1 thread (mpirun --bind-to core), global batch 16, at zero_stage
# 0, 1 and 2, interleaved: tokens/s (median ms per iteration after the warm-up), the peak RSS of
# each rank (/usr/bin/time), and the start-up line's bytes per rank for gradients and AdamW
# state against stage 0's. Stages 1 and 2 run twice: with the parameter all-gather overlapped
# with the next forward (the default) and blocking at the end of the step (MINGPT_ZERO_GATHER=blocking,
# rows "1b" and "2b"); the all-gather's busy and exposed ms per iteration come from the run's
# "all-gather:" summary line (averaged over the whole run, warm-up included).
#   ZERO_REPS (2), ZERO_ITERS (10), ZERO_WARMUP (2), ZERO_CAP_MB (bucket_cap_mb, 25),
#   ZERO_BIND (core), ZERO_MODEL ("6 6 384 256": n_layer n_head n_embd block; for a smoke test),
#   ZERO_CONFIGS ("0 1 1b 2 2b 2r": the rows to run; "2r": stage 2 with MINGPT_ZERO2_RING=overlap,
#   the ring with room for two consecutive buckets instead of the smallest)
set -euo pipefail

BIN=${1:-./mingpt}
REPS=${ZERO_REPS:-2}
ITERS=${ZERO_ITERS:-10}
WARMUP=${ZERO_WARMUP:-2}
CAP=${ZERO_CAP_MB:-25}
BIND=${ZERO_BIND:-core}
read -r NL NH NE T <<<"${ZERO_MODEL:-6 6 384 256}"
DATA=${ZERO_DATA:-data/input.txt}
B_GLOBAL=16
read -r -a CONFIGS <<<"${ZERO_CONFIGS:-0 1 1b 2 2b 2r}"
for c in "${CONFIGS[@]}"; do
  case $c in 0|1|1b|2|2b|2r) ;; *) echo "bench/bench_zero.sh: ZERO_CONFIGS: '$c' is not one of 0 1 1b 2 2b 2r" >&2; exit 2;; esac
done
[ "${CONFIGS[0]}" = 0 ] || { echo "bench/bench_zero.sh: ZERO_CONFIGS must start with 0 (the baseline)" >&2; exit 2; }

[ -x "$BIN" ] || { echo "bench/bench_zero.sh: $BIN is not built (make mingpt)" >&2; exit 1; }
[ -f "$DATA" ] || { echo "bench/bench_zero.sh: $DATA is missing (make data)" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "bench/bench_zero.sh: mpirun not found (make deps: openmpi-bin)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench/bench_zero.sh: /usr/bin/time not found (apt-get install time)" >&2; exit 1; }
[ "$ITERS" -gt "$((WARMUP + 1))" ] || { echo "bench/bench_zero.sh: ZERO_ITERS must exceed ZERO_WARMUP + 1" >&2; exit 1; }
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench_zero.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

echo "machine: $(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -1), $(nproc) CPUs; $(mpirun --version 2>/dev/null | head -1)"
echo "model: n_layer $NL, n_head $NH, n_embd $NE, block $T, dropout 0, fp32; 2 ranks x 1 thread (--bind-to $BIND), global batch $B_GLOBAL; bucket_cap_mb $CAP"
echo "runs: $ITERS iterations each, the first $WARMUP not timed; $REPS repetitions, interleaved"
echo

COMMON=(gpt_config.n_layer="$NL" gpt_config.n_head="$NH" gpt_config.n_embd="$NE" data_config.block_size="$T"
        data_config.path="$DATA" gpt_config.embd_pdrop=0 gpt_config.resid_pdrop=0 gpt_config.attn_pdrop=0
        trainer_config.use_amp=false trainer_config.device=cpu trainer_config.eval_iters=1 trainer_config.log_every=1
        trainer_config.max_iters="$ITERS" trainer_config.batch_size=$((B_GLOBAL / 2)) trainer_config.bucket_cap_mb="$CAP")

# run C REP: one run of config C (stage, "b": blocking all-gather); prints
# "ms_per_iter rss_rank_a_kb rss_rank_b_kb gather_busy_ms gather_exposed_ms" (the gather's: - at stage 0)
run() {
  local c=$1 rep=$2 dir="$WORK/z$1.$2" z=${1:0:1} gather=overlap ring=min
  [ "$c" = "${z}b" ] && gather=blocking
  [ "$c" = "${z}r" ] && ring=overlap
  # each rank's peak RSS into its own file (two ranks writing to one stream can interleave the lines)
  if ! MINGPT_ZERO_GATHER=$gather MINGPT_ZERO2_RING=$ring mpirun -np 2 --bind-to "$BIND" -x OMP_NUM_THREADS=1 \
         -x MINGPT_ZERO_GATHER -x MINGPT_ZERO2_RING \
         sh -c 'exec /usr/bin/time -o "$0.$OMPI_COMM_WORLD_RANK" -f "peak-rss-kb %M" "$@"' "$WORK/z$c.$rep.rss" "$BIN" "${COMMON[@]}" \
         trainer_config.zero_stage="$z" hydra.run.dir="$dir" trainer_config.snapshot_path="$dir/snapshot.bin" \
         > "$WORK/z$c.$rep.log" 2>&1; then
    echo "bench/bench_zero.sh: zero_stage $z ($gather all-gather) failed; its output:" >&2; tail -n 30 "$WORK/z$c.$rep.log" >&2; exit 1
  fi
  python3 - "$dir/metrics.jsonl" "$WARMUP" "$WORK/z$c.$rep.log" "$z" "$gather" "$WORK/z$c.$rep.rss" <<'PY'
import json, re, statistics, sys
ms = [d["ms_per_iter"] for d in map(json.loads, open(sys.argv[1])) if "ms_per_iter" in d and d["iter"] > int(sys.argv[2])]
log = open(sys.argv[3], errors="replace").read()
rss = [m for r in (0, 1) for m in re.findall(r"peak-rss-kb (\d+)", open("%s.%d" % (sys.argv[6], r)).read())]
if len(rss) != 2: sys.exit("bench/bench_zero.sh: %d peak RSS lines in %s.0 and .1, want 2" % (len(rss), sys.argv[6]))
g = re.search(r"all-gather: (overlapped|blocking), [0-9.]+ per iteration[^,]*, ([0-9.]+) ms busy and ([0-9.]+) ms exposed", log)
if sys.argv[4] != "0" and not g: sys.exit("bench/bench_zero.sh: no all-gather summary line in %s" % sys.argv[3])
if g and g.group(1) != ("overlapped" if sys.argv[5] == "overlap" else "blocking"):
    sys.exit("bench/bench_zero.sh: %s says the all-gather was %s, not %s" % (sys.argv[3], g.group(1), sys.argv[5]))
print("%.1f %s %s %s" % (statistics.median(ms), " ".join(rss), g.group(2) if g else "-", g.group(3) if g else "-"))
PY
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

declare -A MS RSS GB GE
for rep in $(seq "$REPS"); do
  for c in "${CONFIGS[@]}"; do
    run "$c" "$rep" > "$WORK/z$c.$rep.res"   # (a failed run exits the script here)
    read -r ms ra rb gb ge < "$WORK/z$c.$rep.res"
    MS[$c]="${MS[$c]:-} $ms"; RSS[$c]="${RSS[$c]:-} $ra $rb"
    [ "$gb" != - ] && { GB[$c]="${GB[$c]:-} $gb"; GE[$c]="${GE[$c]:-} $ge"; }
    gather=""; [ "$gb" != - ] && gather=", all-gather $gb ms busy / $ge ms exposed per iteration"
    echo "  rep $rep, zero_stage $c: $ms ms/iter, peak RSS per rank $((ra / 1024)) and $((rb / 1024)) MiB$gather"
  done
done
echo
tokens=$((B_GLOBAL * T))
echo "(stage 1b, 2b: the parameter all-gather blocking at the end of the step; 1, 2: overlapped with the next forward;"
echo " 2, 2b: stage 2's smallest gradient ring (the largest bucket); 2r: the ring with room to overlap two buckets)"
printf '%-6s %-12s %-10s %-22s %-34s %s\n' stage "tokens/s" "vs 0" "peak RSS per rank" "all-gather ms/iter: busy, exposed" \
  "per rank: gradients, AdamW state (start-up line)"
for c in "${CONFIGS[@]}"; do
  med=$(printf '%s\n' ${MS[$c]} | median)
  [ "$c" = 0 ] && med0=$med
  rss=$(printf '%s\n' ${RSS[$c]} | sort -g | tail -1)
  gather="-"
  [ -n "${GB[$c]:-}" ] && gather="$(printf '%s\n' ${GB[$c]} | median), $(printf '%s\n' ${GE[$c]} | median) (median)"
  mem=$(sed -n 's/.*Memory per rank (zero_stage [0-9], 2 ranks): parameters [0-9]* bytes, gradients \([0-9]*\) bytes, optimizer state \([0-9]*\) bytes.*/\1 \2/p' "$WORK/z$c.1.log" | head -1)
  printf '%-6s %-12s %-10s %-22s %-34s %s\n' "$c" "$(awk -v t=$tokens -v m="$med" 'BEGIN {printf "%.0f", t * 1000 / m}')" \
    "$(awk -v a="$med0" -v m="$med" 'BEGIN {printf "%+.1f%%", 100 * (a / m - 1)}')" "$((rss / 1024)) MiB (max)" "$gather" \
    "$(awk -v m="$mem" 'BEGIN {split(m, a, " "); printf "%.1f MB, %.1f MB", a[1] / 1e6, a[2] / 1e6}')"
done
