#!/usr/bin/env bash
# bench/bench_ddp.sh — `make bench-ddp` (part of `make bench`): data-parallel training on the CPU,
# 1 rank x 2 threads against 2 ranks x 1 thread, side by side in one run.
#
#   bash bench/bench_ddp.sh [./mingpt]
#   DDP_REPS=3 DDP_ITERS=10 DDP_WARMUP=2 DDP_BINDS="core none" bash bench/bench_ddp.sh
#
# Model M (nanoGPT's shakespeare-char: n_layer 6, n_head 6, n_embd 384, block 256), dropout 0,
# fp32 (use_amp=false), device=cpu, on data/input.txt; the same global batch of 16 sequences in
# both configurations:
#   (a) 1 rank x 2 threads:  OMP_NUM_THREADS=2 ./mingpt ... batch_size=16
#   (b) 2 ranks x 1 thread:  mpirun -np 2 --bind-to core -x OMP_NUM_THREADS=1 ./mingpt ... batch_size=8
#       (and again with --bind-to none; DDP_BINDS lists the bindings, the first is the default:
#       on the 2-core development machine both trained equally fast (within about 1%), with less
#       time in the all-reduce under --bind-to core, which is also mpirun's default for 2 ranks)
# Each run trains DDP_ITERS iterations in its own temporary run directory (hydra.run.dir and
# snapshot_path there), logging every iteration. Steady state = iterations after the first
# DDP_WARMUP: tokens/s from the median ms/iter; all-reduce time and exposed time per iteration
# are medians of the log lines' figures: all-reduce (busy) = time some bucket was being
# reduced, exposed = time the trainer waited for the buckets after the backward, hidden =
# 1 - exposed / busy. (c) adds the other way to overlap on the CPU: MINGPT_MPI_PROGRESS=test,
# MPI_Iallreduce started per bucket and driven by MPI_Test between layers (DDP_TEST_MODE=0 skips it). The configurations are interleaved
# (a, b, b', a, b, b', ...) DDP_REPS times and the medians reported. Before each run the script
# waits for the machine to be idle, and a run during which other processes took more than 15%
# of a core is measured again (once).
set -euo pipefail

BIN=${1:-./mingpt}
REPS=${DDP_REPS:-3}
ITERS=${DDP_ITERS:-10}
WARMUP=${DDP_WARMUP:-2}
BINDS=${DDP_BINDS:-"core none"}     # the first is the default binding for (b)
DATA=${DDP_DATA:-data/input.txt}
B_GLOBAL=16
T=256

[ -x "$BIN" ] || { echo "bench/bench_ddp.sh: $BIN is not built (make mingpt)" >&2; exit 1; }
[ -f "$DATA" ] || { echo "bench/bench_ddp.sh: $DATA is missing (make data)" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "bench/bench_ddp.sh: mpirun not found (make deps: openmpi-bin)" >&2; exit 1; }
[ "$ITERS" -gt "$((WARMUP + 1))" ] || { echo "bench/bench_ddp.sh: DDP_ITERS must exceed DDP_WARMUP + 1" >&2; exit 1; }
if [ "$(nproc)" -lt 2 ]; then echo "bench/bench_ddp.sh: needs 2 cores, this machine has $(nproc)" >&2; exit 1; fi
# Open MPI refuses to start as root without these (README, "Data-parallel training").
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench_ddp.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# ------------------------------------------------------------------ machine
cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -1)
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}   (as the environment has it; not changed here)"
echo "machine: ${cpu:-?}, $(nproc) CPUs; $(mpirun --version 2>/dev/null | head -1)"
echo "model M: n_layer 6, n_head 6, n_embd 384, block $T, dropout 0, fp32; global batch $B_GLOBAL x $T tokens"
echo "runs: $ITERS iterations each, the first $WARMUP not timed; $REPS repetitions, interleaved"
echo

# ------------------------------------------------------------------ helpers
busy_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9; exit}' /proc/stat; }   # non-idle jiffies, all CPUs
HZ=$(getconf CLK_TCK)

# Waits (up to 2 minutes) until the machine is less than 10% busy.
wait_idle() {
  local waited=0 b0 b1 busy
  while :; do
    b0=$(busy_ticks); sleep 1; b1=$(busy_ticks)
    busy=$(( (b1 - b0) * 100 / HZ / $(nproc) ))
    [ "$busy" -lt 10 ] && return 0
    if [ "$waited" -ge 120 ]; then
      echo "  WARNING: the machine is ${busy}% busy with other work; timings are unreliable"; return 0
    fi
    sleep 4; waited=$((waited + 5))
  done
}

COMMON=(gpt_config.n_layer=6 gpt_config.n_head=6 gpt_config.n_embd=384 data_config.block_size="$T"
        data_config.path="$DATA" data_config.truncate=1.0
        gpt_config.embd_pdrop=0 gpt_config.resid_pdrop=0 gpt_config.attn_pdrop=0
        trainer_config.use_amp=false trainer_config.device=cpu trainer_config.eval_iters=1
        trainer_config.log_every=1 trainer_config.max_iters="$ITERS" trainer_config.save_every_iters=0)

# run_one NAME: trains one configuration in a fresh run directory; its output goes to $WORK/NAME.log.
run_one() {
  local name=$1 dir="$WORK/run_$1"
  local -a cmd
  case $name in
    a)    cmd=(env OMP_NUM_THREADS=2 "$BIN" trainer_config.batch_size="$B_GLOBAL") ;;
    b_*)  cmd=(mpirun -np 2 --bind-to "${name#b_}" -x OMP_NUM_THREADS=1 "$BIN" trainer_config.batch_size=$((B_GLOBAL / 2))) ;;
    t)    cmd=(mpirun -np 2 --bind-to core -x OMP_NUM_THREADS=1 -x MINGPT_MPI_PROGRESS=test "$BIN"
                 trainer_config.batch_size=$((B_GLOBAL / 2))) ;;
  esac
  local attempt t0 t1 other
  for attempt in 1 2; do
    rm -rf "$dir"
    wait_idle
    t0=$(busy_ticks)
    local TIMEFORMAT='%R %U %S'
    if ! { time "${cmd[@]}" "${COMMON[@]}" hydra.run.dir="$dir" trainer_config.snapshot_path="$dir/snapshot.bin" \
             > "$WORK/$name.log" 2>&1 ; } 2> "$WORK/$name.time"; then
      echo "bench/bench_ddp.sh: run '$name' failed; its output:" >&2
      tail -n 30 "$WORK/$name.log" >&2
      exit 1
    fi
    t1=$(busy_ticks)
    # other processes' share of a core while the run ran: machine busy time minus the run's own CPU time
    other=$(awk -v d="$(( t1 - t0 ))" -v hz="$HZ" '{o = (d / hz - $2 - $3) / $1; print (o > 0 ? o : 0)}' "$WORK/$name.time")
    rm -rf "$dir"
    if awk -v o="$other" 'BEGIN{exit !(o <= 0.15)}'; then return 0; fi
    echo "  ($name: other processes used $(awk -v o="$other" 'BEGIN{printf "%.0f", 100*o}')% of a core meanwhile;" \
         "$([ $attempt = 1 ] && echo 'measuring again' || echo 'keeping it, unreliable'))"
  done
}

# parse NAME: prints "tok_s ms_iter busy_ms exposed_ms" for the steady state of $WORK/NAME.log:
# medians over the iterations after the first DDP_WARMUP of the per-line values (every iteration is
# logged; a line's all-reduce figures cover that iteration). busy/exposed are "-" for one process.
parse() {
  awk -v W="$WARMUP" -v tokens=$((B_GLOBAL * T)) '
    function median(a, c,   i, j, x) {
      for (i = 2; i <= c; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
      return (c % 2) ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
    }
    /^epoch [0-9]+ \| iter [0-9]+\/[0-9]+ \|/ {
      split($0, f, " \\| ")
      split(f[2], it, "[ /]"); k = it[2] + 0
      for (i in f) {
        if (f[i] ~ / ms\/iter$/ && f[i] !~ /^all-reduce/) { split(f[i], m, " "); ms[k] = m[1] }
        if (f[i] ~ /^all-reduce /) { split(f[i], m, "[ ,]+"); bk[k] = m[2]; ek[k] = m[4]; have_ar = 1 }
      }
      if (k > n) n = k
    }
    END {
      if (n <= W) { print "parse-error"; exit 1 }
      c = 0
      for (k = W + 1; k <= n; k++) { ++c; v[c] = ms[k]; b[c] = bk[k]; e[c] = ek[k] }
      med = median(v, c)
      if (have_ar) printf "%.1f %.1f %.1f %.1f\n", tokens * 1000 / med, med, median(b, c), median(e, c)
      else printf "%.1f %.1f - -\n", tokens * 1000 / med, med
    }' "$WORK/$1.log"
}

pct() { if [ "$1" = - ]; then echo -; else echo "$1%"; fi; }
median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) {print "-"; exit} print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# ------------------------------------------------------------------ runs
CONFIGS=(a)
for b in $BINDS; do CONFIGS+=("b_$b"); done
# the other way to overlap on the CPU (dist/comm_mpi.c): MPI_Iallreduce + MPI_Test between layers
[ "${DDP_TEST_MODE:-1}" = 1 ] && CONFIGS+=(t)
label() {
  case $1 in
    a)   echo "1 rank x 2 threads" ;;
    b_*) echo "2 ranks x 1 thread, --bind-to ${1#b_}" ;;
    t)   echo "2 ranks x 1 thread, Iallreduce+Test" ;;
  esac
}

printf '%-4s %-34s %10s %10s %14s %14s %8s\n' rep config "ms/iter" "tokens/s" "all-reduce ms" "exposed ms" hidden
for rep in $(seq "$REPS"); do
  for c in "${CONFIGS[@]}"; do
    run_one "$c"
    if ! res=$(parse "$c"); then
      echo "bench/bench_ddp.sh: no iteration lines in the output of '$c':" >&2; tail -n 20 "$WORK/$c.log" >&2; exit 1
    fi
    read -r tok ms busy exp <<< "$res"
    if [ "$busy" = - ]; then hid=-; else hid=$(awk -v b="$busy" -v e="$exp" 'BEGIN{printf "%.0f", (b > 0 ? 100 * (1 - e / b) : 100)}'); fi
    echo "$tok $ms $busy $exp $hid" >> "$WORK/$c.results"
    printf '%-4s %-34s %10s %10s %14s %14s %8s\n' "$rep" "$(label "$c")" "$ms" "$tok" "$busy" "$exp" "$(pct "$hid")"
  done
done

# ------------------------------------------------------------------ medians
echo
echo "medians over $REPS runs (steady state, iterations $((WARMUP + 1))-$ITERS):"
printf '  %-34s %10s %14s %14s %8s %10s\n' config "tokens/s" "all-reduce ms" "exposed ms" hidden "vs (a)"
tok_a=$(cut -d' ' -f1 "$WORK/a.results" | median)
for c in "${CONFIGS[@]}"; do
  tok=$(cut -d' ' -f1 "$WORK/$c.results" | median)
  busy=$(cut -d' ' -f3 "$WORK/$c.results" | awk '$1 != "-"' | median)
  exp=$(cut -d' ' -f4 "$WORK/$c.results" | awk '$1 != "-"' | median)
  hid=$(cut -d' ' -f5 "$WORK/$c.results" | awk '$1 != "-"' | median)
  ratio=$(awk -v t="$tok" -v a="$tok_a" 'BEGIN{printf "%.3f", t / a}')
  printf '  %-34s %10.0f %14s %14s %8s %10s\n' "$(label "$c")" "$tok" "$busy" "$exp" "$(pct "$hid")" "$ratio"
  echo "$c $tok $busy $exp $ratio $hid" >> "$WORK/medians"
done

echo
best=$(awk '$1 ~ /^b_/ {print $5, $1}' "$WORK/medians" | sort -g | tail -1 | cut -d' ' -f2)
default=b_${BINDS%% *}
echo "faster binding in this run: --bind-to ${best#b_} (default: --bind-to ${default#b_})"
read -r _ tok busy exp ratio hidden < <(grep "^$default " "$WORK/medians")
echo "goal: 2 ranks x 1 thread >= 90% of 1 rank x 2 threads' tokens/s with >= 50% of the all-reduce hidden"
echo "  --bind-to ${default#b_}: $(awk -v r="$ratio" 'BEGIN{printf "%.1f", 100 * r}')% of the tokens/s," \
     "${hidden}% hidden: $(awk -v r="$ratio" -v h="$hidden" 'BEGIN{print ((r >= 0.9 && h >= 50) ? "met" : "not met")}')"
