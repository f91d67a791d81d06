#!/usr/bin/env bash
# tests/ddp/test_ddp.sh — data-parallel training on 1, 2 and 3 ranks, with OpenMPI's
# mpirun on this machine (-np 2 and -np 3 with --oversubscribe on 2 cores).
#
#   * 2 ranks x B equal 1 process x 2B with dropout on: averaged gradients within 1e-5 of each
#     tensor's largest magnitude, and after 5 AdamW steps every parameter tensor with >= 99.9% of
#     its elements within 1e-5 (tests/ddp_check.c: the criterion and its two exceptions);
#     the same with one bucket per tensor, one bucket, and over TCP instead of shared memory
#   * gradient accumulation: 2 micro-steps x B = 1 x 2B; 2 ranks x 2 micro-steps x B = 1 x 4B
#   * overlap: buckets whose all-reduce starts before the backward pass ends (> 1, 4 layers)
#   * -np 3 on a window count not divisible by 3: torch's padding, every window seen
#   * the real binary: resume 2 -> 1 and 1 -> 2 ranks mid-epoch equals an uninterrupted run;
#     SIGTERM to rank 1 only stops both at one iteration (exit 75) and the snapshot resumes;
#     kill -9 of a rank ends the job non-zero within 60 s and rerunning finishes; a sweep (-m)
#     runs every job on all ranks; errors from rank 1 carry "[rank 1]"
#   * evaluation: the test loss of 2 ranks equals one process's (1e-6) for the default stride,
#     eval_stride 5 and eval_stride 1 with eval_iters; 2 ranks with activation checkpointing
#     give the losses and parameters of 2 ranks without it, bit for bit; SIGTERM to rank 1
#     during a long evaluation stops both ranks (exit 75, snapshot saved)
cd "$(dirname "$0")/../.."
. tests/lib.sh
ROOT=$PWD
B=${B:-build}   # the build directory (make passes it: build/san under SAN=1)
CHECK=$ROOT/$B/tests/ddp_check
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS=$MPI_ASAN_OPTIONS   # every process here runs under mpirun (tests/lib.sh)
export MINGPT_MPI_LIB=$ROOT/$B/libmingpt_mpi.so   # ddp_check lives in $B/tests/
# containers: vader's single-copy (CMA) may be refused; one OpenMP thread per rank on 2 cores
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMP_NUM_THREADS=1
MPIRUN="mpirun --oversubscribe --bind-to none"

if ! command -v mpirun >/dev/null; then bad "mpirun is installed (make deps installs openmpi-bin)"; finish; exit; fi

# run NAME CMD...: CMD must succeed; its output is kept in $WORK/NAME.log
run() {
  local name=$1; shift
  if "$@" >"$WORK/$name.log" 2>&1; then return 0; fi
  bad "$name: exit $?" "$(tail -20 "$WORK/$name.log")"
  return 1
}
# same NAME WHAT A B [TOL]: ddp_check compare on two runs' files
same() {
  local out
  if out=$("$CHECK" compare --layers 4 --what "$2" "$3" "$4" --tol "${5:-1e-5}" 2>&1); then ok "$1 ($out)"
  else bad "$1" "$out"; fi
}

echo "-- train_step: ranks, buckets, transports, accumulation (dropout 0.1)"
cd "$WORK"
run one   "$CHECK" step --B 8 --out one &&
run two   $MPIRUN -np 2 "$CHECK" step --B 4 --out two &&
{ same "2 ranks x 4 = 1 x 8: gradients" grads one.grads two.grads
  same "2 ranks x 4 = 1 x 8: parameters after 5 AdamW steps" params one.params two.params; }
run tiny  $MPIRUN -np 2 "$CHECK" step --B 4 --cap_mb 0.000001 --out tiny &&
  same "one bucket per tensor" params one.params tiny.params
run huge  $MPIRUN -np 2 "$CHECK" step --B 4 --cap_mb 100000 --out huge &&
  same "one bucket" params one.params huge.params
run tcp   $MPIRUN -np 2 --mca btl tcp,self "$CHECK" step --B 4 --out tcp &&
  same "over TCP (--mca btl tcp,self)" params one.params tcp.params
run nbc   env MINGPT_MPI_PROGRESS=test $MPIRUN -np 2 -x MINGPT_MPI_PROGRESS "$CHECK" step --B 4 --cap_mb 0.3 --out nbc &&
  same "non-blocking all-reduces with progress calls (MINGPT_MPI_PROGRESS=test)" params one.params nbc.params
run acc   "$CHECK" step --B 4 --accum 2 --out acc &&
{ same "grad_accum_steps 2 x 4 = 1 x 8: gradients" grads one.grads acc.grads
  same "grad_accum_steps 2 x 4 = 1 x 8: parameters" params one.params acc.params; }
run one16 "$CHECK" step --B 16 --out one16 &&
run acc2  $MPIRUN -np 2 "$CHECK" step --B 4 --accum 2 --out acc2 &&
  same "2 ranks x 2 micro-steps x 4 = 1 x 16" params one16.params acc2.params
# a 4-layer model cut into small buckets: the first ones start while the backward runs
if run overlap $MPIRUN -np 2 "$CHECK" step --B 4 --cap_mb 0.3 --out overlap; then
  early=$(sed -n 's/.*buckets started early: \([0-9.]*\) per step/\1/p' overlap.log)
  if awk -v e="${early:-0}" 'BEGIN { exit !(e > 1) }'; then ok "overlap: $early buckets per step start before the backward ends"
  else bad "overlap: $early buckets started early (want > 1)" "$(cat overlap.log)"; fi
fi
if run sampler3 $MPIRUN -np 3 "$CHECK" sampler --n 100; then ok "-np 3, 100 windows: $(grep sampler: sampler3.log)"; fi

# The NCCL path: 2 ranks on the emulated CUDA backend (mk/cuda.mk builds it with CUDA=1), whose
# emulated NCCL all-reduces over MPI between the processes, against the 2-rank CPU run.
EMU_SO=$ROOT/$B/emu/libmingpt_cuda.so
if [ -f "$EMU_SO" ]; then
  export MINGPT_CUDA_LIB=$EMU_SO
  # The two backends' GEMMs differ (the CPU's calibrated library against the emulator's cuBLAS on
  # OpenBLAS), so a near-zero gradient's rounding differs, and AdamW (eps 1e-8) steps such an
  # element by about lr * g / eps: its difference comes out lr / eps = 1e4 times the gradient's.
  # Up to 4.6e-5 of a bias tensor's largest magnitude on a host whose OpenBLAS runs its own
  # (Cooperlake) kernels, a dozen elements of a 128-element tensor: 1e-4 for the parameters here.
  run nccl $MPIRUN -np 2 "$CHECK" step --B 4 --device cuda --out nccl &&
  { same "NCCL (emulated CUDA, 2 ranks) = CPU (2 ranks): gradients, fp32" grads two.grads nccl.grads
    same "NCCL (emulated CUDA, 2 ranks) = CPU (2 ranks): parameters, fp32 (1e-4)" params two.params nccl.params 1e-4; }
  run cpubf $MPIRUN -np 2 "$CHECK" step --B 4 --dtype bf16 --out cpubf &&
  run ncclbf $MPIRUN -np 2 "$CHECK" step --B 4 --dtype bf16 --device cuda --out ncclbf &&
    same "NCCL (emulated CUDA, 2 ranks) = CPU (2 ranks): parameters, bf16 (2e-2)" params cpubf.params ncclbf.params 2e-2
  unset MINGPT_CUDA_LIB
else
  skip no-nvcc "the NCCL path: no emulated CUDA backend ($EMU_SO; built when nvcc is on PATH)"
fi
cd "$ROOT"
# DDP_ONLY=step: only the train_step checks above, the first ~15 s (tests/mutants.sh)
if [ "${DDP_ONLY:-}" = step ]; then finish; exit; fi

echo "-- the mingpt binary"
DATA=$ROOT/data/input.txt
# a small model with dropout on; 16 rows per global batch; one epoch is a few hundred iterations
common() {
  echo data_config.path=$DATA data_config.truncate=0.02 data_config.block_size=32 gpt_config.n_layer=2 \
    gpt_config.n_head=4 gpt_config.n_embd=128 trainer_config.use_amp=false trainer_config.device=cpu \
    trainer_config.log_every=1 trainer_config.eval_iters=2 trainer_config.save_every=1 hydra.run.dir=$WORK/run \
    trainer_config.collective_timeout_s=30 optimizer_config.learning_rate=3e-4
}
snap() { echo "trainer_config.snapshot_path=$WORK/$1.bin"; }
same_snap() {
  local out
  if out=$("$CHECK" snapshots "$WORK/$2.bin" "$WORK/$3.bin" 2>&1); then ok "$1 ($(echo "$out" | tail -1))"
  else bad "$1" "$out"; fi
}

run full ./mingpt $(common) $(snap full) trainer_config.batch_size=16 trainer_config.max_iters=12
# 2 ranks for 6 iterations, then 1 rank to 12 (global batch 16 throughout)
run r21a $MPIRUN -np 2 ./mingpt $(common) $(snap r21) trainer_config.batch_size=8 trainer_config.max_iters=6 &&
run r21b ./mingpt $(common) $(snap r21) trainer_config.batch_size=16 trainer_config.max_iters=12 &&
  same_snap "resume 2 ranks -> 1 rank mid-epoch = uninterrupted" full r21
run r12a ./mingpt $(common) $(snap r12) trainer_config.batch_size=16 trainer_config.max_iters=6 &&
run r12b $MPIRUN -np 2 ./mingpt $(common) $(snap r12) trainer_config.batch_size=8 trainer_config.max_iters=12 &&
  same_snap "resume 1 rank -> 2 ranks mid-epoch = uninterrupted" full r12
grep -q "Global batch: 16 sequences = batch_size 8 x grad_accum_steps 1 x world_size 2" "$WORK/r12b.log" &&
  ok "the global batch is printed" || bad "the global batch is printed" "$(head -20 "$WORK/r12b.log")"

# `mingpt sample` is one process and starts no MPI: under mpirun each rank prints the text one
# process samples (lines of the two ranks may interleave)
if run sample1 ./mingpt sample --snapshot $WORK/full.bin --prompt T --max_new_tokens 60 --seed 5 &&
   run sample2 $MPIRUN -np 2 ./mingpt sample --snapshot $WORK/full.bin --prompt T --max_new_tokens 60 --seed 5; then
  [ "$(sort "$WORK/sample2.log")" = "$(cat "$WORK/sample1.log" "$WORK/sample1.log" | sort)" ] &&
    ok "mpirun -np 2 mingpt sample: each rank samples the one-process text" ||
    bad "mpirun -np 2 mingpt sample" "$(cat "$WORK/sample2.log")"
fi

# -np 3 over a whole epoch of a window count not divisible by 3
for tr in 0.0030 0.0031 0.0032 0.0033; do
  N3=$(./mingpt $(common) gpt_config.n_embd=16 data_config.truncate=$tr trainer_config.max_iters=1 \
         trainer_config.snapshot_path=$WORK/probe$tr.bin 2>/dev/null | sed -n 's/.*Split (contiguous): \([0-9]*\) train windows.*/\1/p')
  [ -n "$N3" ] && [ $((N3 % 3)) -ne 0 ] && break
done
if run np3 $MPIRUN -np 3 ./mingpt $(common) gpt_config.n_embd=16 data_config.truncate=$tr trainer_config.batch_size=4 \
       trainer_config.max_epochs=1 $(snap np3); then
  want=$(( ( (N3 + 2) / 3 + 3 ) / 4 ))
  if [ $((N3 % 3)) -ne 0 ] && grep -q "Training: $want iterations per epoch" "$WORK/np3.log" &&
     grep -q "done: $want iterations" "$WORK/np3.log"; then ok "-np 3, $N3 train windows: one epoch of $want iterations"
  else bad "-np 3 epoch (N=$N3, want $want iterations)" "$(grep -E 'Training|done' "$WORK/np3.log")"; fi
fi

# SIGTERM to rank 1 only: every rank stops at the same iteration, rank 0 saves, exit 75
# each rank's exit code goes to $WORK/<name>.rc; mpirun lets the other rank finish after one exits non-zero
long_run() {
  local name=$1; shift
  $MPIRUN -np 2 --mca orte_abort_on_non_zero_status 0 sh -c \
    '"$0" "$@"; rc=$?; echo "rank $OMPI_COMM_WORLD_RANK exit $rc" >>'"$WORK/$name.rc"'; exit $rc' \
    ./mingpt $(common) $(snap "$name") trainer_config.batch_size=8 trainer_config.max_iters=100000 "$@"
}
long_run term >"$WORK/term.log" 2>&1 &
mpid=$!
rank_pid() {   # the pid of rank $1 of the job started above
  local p
  for p in $(pgrep -f "^./mingpt.*$2.bin"); do
    tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && { echo "$p"; return; }
  done
}
for _ in $(seq 100); do grep -q "iter 5/" "$WORK/term.log" 2>/dev/null && break; sleep 0.2; done
r1=$(rank_pid 1 term)
[ -n "$r1" ] && kill -TERM "$r1"
wait $mpid; rc=$?
stop_iter=$(sed -n 's/.*Interrupted by a signal at iteration \([0-9]*\).*/\1/p' "$WORK/term.log")
if [ -n "$r1" ] && [ -n "$stop_iter" ] && ! grep -q "improperly" "$WORK/term.log" &&
   [ "$(sort "$WORK/term.rc" 2>/dev/null)" = "$(printf 'rank 0 exit 75\nrank 1 exit 75')" ]; then
  ok "SIGTERM to rank 1: both ranks stop at iteration $stop_iter and exit 75"
else bad "SIGTERM to rank 1 (rank 1 pid '${r1}', exit $rc, stop iteration '$stop_iter')" "$(cat "$WORK/term.rc"; tail -15 "$WORK/term.log")"; fi
if run term2 $MPIRUN -np 2 ./mingpt $(common) $(snap term) trainer_config.batch_size=8 trainer_config.max_iters=$((stop_iter + 3)) &&
   grep -q "Resuming training from snapshot at Epoch 1, iteration $stop_iter" "$WORK/term2.log" &&
   grep -q "done: $((stop_iter + 3)) iterations (3 this run)" "$WORK/term2.log"; then ok "the interrupted job resumes"
else bad "the interrupted job resumes" "$(tail -5 "$WORK/term2.log")"; fi

# kill -9 of rank 1: the job ends non-zero within 60 s; rerunning finishes from the snapshot. Here
# mpirun is told not to end the job when a rank exits non-zero (as srun without --kill-on-bad-exit),
# so it is the survivors' collective_timeout_s (30 s) watchdog that ends it.
long_run kill trainer_config.save_every_iters=3 >"$WORK/kill.log" 2>&1 &
mpid=$!
for _ in $(seq 100); do grep -q "iter 7/" "$WORK/kill.log" 2>/dev/null && break; sleep 0.2; done
r1=$(rank_pid 1 kill); t0=$(date +%s)
[ -n "$r1" ] && kill -KILL "$r1"
( sleep 60; kill -KILL $mpid 2>/dev/null ) & guard=$!
wait $mpid; rc=$?; dt=$(( $(date +%s) - t0 ))
kill $guard 2>/dev/null
if [ -n "$r1" ] && [ "$rc" -ne 0 ] && [ "$dt" -lt 60 ]; then ok "kill -9 of rank 1: the job exits $rc after ${dt} s"
else bad "kill -9 of rank 1 (pid '$r1', exit $rc after ${dt} s)" "$(tail -15 "$WORK/kill.log")"; fi
kill_iter=$(sed -n 's/.*Snapshot saved at epoch 1, iteration \([0-9]*\).*/\1/p' "$WORK/kill.log" | tail -1)
if run kill2 $MPIRUN -np 2 ./mingpt $(common) $(snap kill) trainer_config.batch_size=8 trainer_config.max_iters=$((kill_iter + 5)) &&
   grep -q "Resuming training from snapshot at Epoch 1, iteration $kill_iter" "$WORK/kill2.log" &&
   grep -q "done: $((kill_iter + 5)) iterations" "$WORK/kill2.log"
then ok "rerunning after kill -9 resumes and finishes"
else bad "rerunning after kill -9" "$(tail -5 "$WORK/kill2.log")"; fi

# a sweep runs each job on every rank, in one sweep directory
if run sweep $MPIRUN -np 2 ./mingpt -m $(common) trainer_config.batch_size=4 trainer_config.max_iters=2,3 \
       hydra.sweep.dir=$WORK/sweep trainer_config.snapshot_path=s.bin &&
   grep -q '"iters": 2' "$WORK/sweep/0/summary.json" && grep -q '"iters": 3' "$WORK/sweep/1/summary.json" &&
   [ "$(ls "$WORK/sweep")" = "$(printf '0\n1\nmultirun.yaml')" ]; then ok "-m sweep: every job on both ranks"
else bad "-m sweep" "$(tail -5 "$WORK/sweep.log"; ls -R "$WORK/sweep" 2>&1 | head)"; fi

# errors from other ranks name them; the job's exit code is the config error's
out=$($MPIRUN -np 2 ./mingpt $(common) data_config.path=$WORK/missing.txt 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -q "^\[rank 1\] mingpt: error: .*missing.txt" <<<"$out"; then ok "errors of rank 1 are prefixed [rank 1] (exit 2)"
else bad "rank prefix on errors (exit $rc)" "$out"; fi

echo "-- evaluation (eval_stride, eval_iters) and activation checkpointing: 1 rank = 2 ranks"
summary() { sed -n "s/.*\"$1\": \([-0-9.e+]*\).*/\1/p" "$WORK/run/summary.json"; }
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-6 * (a < 0 ? -a : a)) }'; }
run evsnap ./mingpt $(common) $(snap ev) trainer_config.batch_size=8 trainer_config.max_iters=3
for ev in "data_config.eval_stride=0 trainer_config.eval_iters=0" "data_config.eval_stride=5 trainer_config.eval_iters=0" \
          "data_config.eval_stride=1 trainer_config.eval_iters=3"; do
  # the snapshot has 3 iterations: these runs only evaluate
  run ev1 ./mingpt $(common) $(snap ev) trainer_config.batch_size=8 trainer_config.max_iters=3 $ev && l1=$(summary test_loss) &&
  run ev2 $MPIRUN -np 2 ./mingpt $(common) $(snap ev) trainer_config.batch_size=4 trainer_config.max_iters=3 $ev &&
  l2=$(summary test_loss) &&
  if close "$l1" "$l2" && grep -q "Nothing to train" "$WORK/ev2.log"; then ok "evaluation, $ev: 2 ranks $l2 = 1 rank $l1"
  else bad "evaluation, $ev: 2 ranks '$l2', 1 rank '$l1'" "$(tail -5 "$WORK/ev2.log")"; fi
done
for ck in false true; do
  run "ck$ck" $MPIRUN -np 2 ./mingpt $(common) $(snap "ck$ck") trainer_config.batch_size=4 trainer_config.max_iters=4 \
    trainer_config.activation_checkpointing=$ck && eval "loss_$ck=\$(summary final_train_loss)/\$(summary test_loss)"
done
if [ -n "${loss_true:-}" ] && [ "$loss_true" = "${loss_false:-}" ] && grep -q "Activation checkpointing:" "$WORK/cktrue.log" &&
   out=$("$CHECK" snapshots "$WORK/ckfalse.bin" "$WORK/cktrue.bin" --tol 0 2>&1) && grep -q "; bitwise identical$" <<<"$out"; then
  ok "2 ranks with activation checkpointing = without: losses $loss_true, parameters bitwise"
else bad "2 ranks with activation checkpointing = without (losses '${loss_true:-}' / '${loss_false:-}')" "${out:-}"; fi

# SIGTERM to rank 1 during a long evaluation (every window of the whole test split): both ranks
# stop before their next batch, exit 75, and the snapshot is saved
long_run evterm data_config.truncate=1.0 trainer_config.max_iters=1 data_config.eval_stride=1 trainer_config.eval_iters=0 \
  >"$WORK/evterm.log" 2>&1 &
mpid=$!
for _ in $(seq 300); do grep -q "iter 1/1" "$WORK/evterm.log" 2>/dev/null && break; sleep 0.1; done
sleep 0.5
r1=$(rank_pid 1 evterm)
[ -n "$r1" ] && kill -TERM "$r1"
wait $mpid
if [ -n "$r1" ] && grep -q "Interrupted by a signal during the evaluation at iteration 1" "$WORK/evterm.log" &&
   grep -q "Snapshot saved at epoch 1, iteration 1" "$WORK/evterm.log" &&
   [ "$(sort "$WORK/evterm.rc" 2>/dev/null)" = "$(printf 'rank 0 exit 75\nrank 1 exit 75')" ]; then
  ok "SIGTERM to rank 1 during the evaluation: both ranks exit 75, snapshot saved"
else bad "SIGTERM to rank 1 during the evaluation (rank 1 pid '$r1')" "$(cat "$WORK/evterm.rc" 2>/dev/null; tail -8 "$WORK/evterm.log")"; fi

finish
