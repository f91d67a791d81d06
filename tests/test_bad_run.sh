#!/usr/bin/env bash
# A run that cannot succeed fails at start-up with a message naming the key, file or directory,
# never after training: absurd sizes and an empty snapshot path at bind time;
# directories that cannot be written, a world size the data cannot feed and a snapshot whose
# place in the epoch does not fit the data before the first step. Also: a run killed at start-up
# never leaves an earlier run's summary.json; a log file that stops taking writes is reported
# once and the run goes on; a NaN loss stops the run and keeps the last snapshot; the
# gradient-norm outlier detector (skip_spike_zscore) decides alike on every rank.
cd "$(dirname "$0")/.." && source tests/lib.sh
export OMP_NUM_THREADS=1   # tiny models: threads only add contention

DATA=$WORK/tiny.txt
printf 'hello world, this is a small corpus for mingpt error tests.\n%.0s' {1..20} > "$DATA"
small=(data_config.path=$DATA data_config.truncate=1.0 data_config.block_size=8 gpt_config.n_layer=1 gpt_config.n_head=2
       gpt_config.n_embd=8 trainer_config.batch_size=4 trainer_config.max_iters=2 trainer_config.device=cpu
       trainer_config.use_amp=false trainer_config.snapshot_path=$WORK/s.bin hydra.run.dir=$WORK/run)

echo "-- sizes and paths rejected when the config is bound (nothing trains, nothing is created)"
bad_input env-cuda-attention 2 'mingpt: error: MINGPT_CUDA_ATTENTION must be fused or cublas (got' -- env MINGPT_CUDA_ATTENTION=flash $MINGPT "${small[@]}" trainer_config.device=auto
bad_input env-cuda-epilogues 2 'mingpt: error: MINGPT_CUDA_EPILOGUES must be cublaslt or off (got' -- env MINGPT_CUDA_EPILOGUES=0 $MINGPT "${small[@]}" trainer_config.device=cuda
bad_input cfg-snapshot-path-empty 2 'trainer_config.snapshot_path must not be empty' -- $MINGPT "${small[@]}" trainer_config.snapshot_path=
bad_input cfg-snapshot-path-slash 2 'trainer_config.snapshot_path must name a file, not a directory' -- $MINGPT "${small[@]}" trainer_config.snapshot_path=$WORK/
bad_input cfg-n-layer-huge 2 'gpt_config.n_layer must be <= 4096 (GPT_MAX_LAYER), got 2147483647' -- $MINGPT "${small[@]}" gpt_config.n_layer=2147483647
bad_input cfg-n-embd-huge 2 'gpt_config.n_embd must be <= 262144 (GPT_MAX_EMBD)' -- $MINGPT "${small[@]}" gpt_config.n_embd=2147483646
bad_input cfg-n-head-huge 2 'gpt_config.n_head must be <= 262144 (GPT_MAX_EMBD)' -- $MINGPT "${small[@]}" gpt_config.n_head=1073741824
bad_input cfg-block-size-huge 2 'data_config.block_size must be <= 1048576 (GPT_MAX_BLOCK)' -- $MINGPT "${small[@]}" data_config.block_size=2147483647
bad_input cfg-params-huge 2 'parameters, more than mingpt' -- $MINGPT "${small[@]}" gpt_config.n_layer=4096 gpt_config.n_embd=65536
bad_input cfg-tokens-huge 2 'tokens per micro-batch, more than the limit of 2147483647' -- $MINGPT "${small[@]}" trainer_config.batch_size=2147483647
bad_input cfg-grad-accum-huge 2 'trainer_config.grad_accum_steps must be <= 1048576' -- $MINGPT "${small[@]}" trainer_config.grad_accum_steps=2147483647
bad_input cfg-rows-huge 2 'sequences per iteration, more than the limit' -- $MINGPT "${small[@]}" trainer_config.batch_size=4096 trainer_config.grad_accum_steps=1048576
bad_input cfg-activations-huge 2 'the activations of one micro-batch' -- $MINGPT "${small[@]}" data_config.block_size=1048576 trainer_config.batch_size=1024
bad_input cfg-bucket-cap-huge 2 'trainer_config.bucket_cap_mb must be in (0.0, 1048576.0]' -- $MINGPT "${small[@]}" trainer_config.bucket_cap_mb=1e300
bad_input cfg-skip-spike-negative 2 'trainer_config.skip_spike_zscore must be >= 0.0' -- $MINGPT "${small[@]}" trainer_config.skip_spike_zscore=-1
bad_input cfg-eval-stride-range 2 'data_config.eval_stride must be in [0, 8] (0 = data_config.block_size), got 9' -- $MINGPT "${small[@]}" data_config.eval_stride=9
bad_input cfg-eval-stride-negative 2 'data_config.eval_stride must be in [0, 8] (0 = data_config.block_size), got -1' -- $MINGPT "${small[@]}" data_config.eval_stride=-1
bad_input cfg-checkpointing-not-bool 2 'Error merging override trainer_config.activation_checkpointing=sometimes' -- $MINGPT "${small[@]}" trainer_config.activation_checkpointing=sometimes
[ ! -e $WORK/run ] && ok "config errors create no run directory" || bad "config errors create no run directory" "$(ls -R $WORK/run)"

# Huge values that are meaningful are accepted and do not overflow: every test batch, a
# warm-up longer than any run (the rate stays positive), more epochs than will ever run.
out=$($MINGPT "${small[@]}" trainer_config.eval_iters=2147483647 trainer_config.max_epochs=2147483647 \
      optimizer_config.warmup_iters=9223372036854775807 optimizer_config.lr_decay_iters=9223372036854775807 2>&1)
grep -q 'iter 1/2 | loss [0-9.]* | lr [0-9]' <<<"$out" && grep -q '^done: 2 iterations' <<<"$out" \
  && ok "eval_iters, max_epochs, warmup_iters at their maximum: trains, positive lr" || bad "huge meaningful values" "$out"
rm -rf $WORK/run $WORK/s.bin

echo "-- directories that cannot be written: found before training"
# Root writes anywhere a mode allows; sysfs refuses new files even to root.
RO=$WORK/ro; mkdir -p $RO; chmod 555 $RO
if [ "$(id -u)" = 0 ]; then RO=/sys/kernel; fi
if [ ! -d $RO ] || touch $RO/probe 2>/dev/null; then
  rm -f $RO/probe; skip no-unwritable-dir "the unwritable-directory cases: no directory here refuses writes to this user"
else
  bad_input snap-dir-unwritable 1 'cannot write snapshot' -- $MINGPT "${small[@]}" trainer_config.snapshot_path=$RO/s.bin
  if grep -q 'Training:' $WORK/run/mingpt.log; then bad "unwritable snapshot directory: trained anyway"
  else ok "unwritable snapshot directory: no training"; fi
  bad_input run-dir-unwritable 1 'cannot write in output directory' -- $MINGPT "${small[@]}" hydra.run.dir=$RO hydra.output_subdir=null hydra/job_logging=disabled
  bad_input run-dir-uncreatable 1 'cannot create directory' -- $MINGPT "${small[@]}" hydra.run.dir=$RO/sub
fi
bad_input snap-dir-missing 1 'cannot write snapshot' -- $MINGPT "${small[@]}" trainer_config.snapshot_path=$WORK/nodir/s.bin
bad_input snap-dir-not-dir 1 'not a directory' -- $MINGPT "${small[@]}" trainer_config.snapshot_path=$DATA/s.bin
bad_input snap-path-is-dir 1 'is a directory; it must name a file' -- $MINGPT "${small[@]}" trainer_config.snapshot_path=$WORK
no_partial_files $WORK "no probe or temporary file left behind"
rm -rf $WORK/run

echo "-- summary.json: a killed run never shows an earlier run's success"
$MINGPT "${small[@]}" > $WORK/ok.log 2>&1 && grep -q '"exit_status": 0' $WORK/run/summary.json \
  && ok "a finished run: exit_status 0" || bad "a finished run: exit_status 0" "$(tail -3 $WORK/ok.log)"
$MINGPT "${small[@]}" trainer_config.max_iters=100000000 trainer_config.max_epochs=1000000 > $WORK/long.log 2>&1 &
pid=$!
for _ in $(seq 200); do grep -q '"exit_status": null' $WORK/run/summary.json 2>/dev/null && break; sleep 0.05; done
grep -q '"exit_status": null' $WORK/run/summary.json && ok "a running job's summary.json says exit_status null" \
  || bad "a running job's summary.json says exit_status null" "$(cat $WORK/run/summary.json)"
kill -9 $pid; wait $pid 2>/dev/null
if grep -q '"exit_status": 0' $WORK/run/summary.json; then
  bad "killed run: the earlier run's exit_status 0 is visible" "$(cat $WORK/run/summary.json)"
else ok "killed run: no stale exit_status 0"; fi
rm -rf $WORK/run $WORK/s.bin
$MINGPT "${small[@]}" data_config.path=$WORK/absent.txt > /dev/null 2>&1
[ ! -e $WORK/run ] && ok "a run failing at start-up leaves no directory of its own" \
  || bad "a run failing at start-up leaves no directory of its own" "$(ls -a $WORK/run)"
rm -rf $WORK/run

echo "-- the log file stops taking writes (file size limit): one message, the run goes on"
mkdir -p $WORK/run
head -c 64000 /dev/zero | tr '\0' 'x' > $WORK/run/mingpt.log; echo >> $WORK/run/mingpt.log
# 64 KiB: the log reaches it within a few lines, the snapshot (16 KB) and summary stay below.
# SIGXFSZ is not ignored here: the binary must ignore it itself.
(ulimit -f 64; exec $MINGPT "${small[@]}" trainer_config.max_iters=40 trainer_config.log_every=1) > $WORK/fsz.out 2> $WORK/fsz.err
rc=$?
[ $rc -eq 0 ] && grep -q '^done: 40 iterations' $WORK/fsz.out && ok "training went on to the end (exit 0)" \
  || bad "training went on to the end (exit $rc)" "$(tail -3 $WORK/fsz.out; cat $WORK/fsz.err)"
[ "$(grep -c "cannot write the log file '$WORK/run/mingpt.log': File too large" $WORK/fsz.err)" = 1 ] \
  && ok "one message names the log file and the error" || bad "one message names the log file and the error" "$(cat $WORK/fsz.err)"
[ "$(tail -c 1 $WORK/run/mingpt.log | od -An -c | tr -d ' ')" = '\n' ] && ok "no partial line left in the log" \
  || bad "no partial line left in the log" "$(tail -c 200 $WORK/run/mingpt.log)"
grep -q '"exit_status": 0' $WORK/run/summary.json && ok "summary.json written" || bad "summary.json written"
rm -rf $WORK/run $WORK/s.bin

echo "-- a snapshot whose place in the epoch does not fit the data"
$MINGPT "${small[@]}" trainer_config.max_iters=200 > /dev/null 2>&1 || bad "training 200 iterations"
bad_input resume-past-data 2 'does not match the data: it resumes its epoch after 800 samples' -- $MINGPT "${small[@]}" trainer_config.max_iters=300 data_config.truncate=0.5
rm -rf $WORK/run $WORK/s.bin

echo "-- NaN loss (fp32): stops at the iteration, the snapshot on disk is the last good one"
$MINGPT "${small[@]}" trainer_config.max_iters=1 > /dev/null 2>&1 && cp $WORK/s.bin $WORK/good.bin || bad "one good iteration"
bad_input nan-loss 1 'at iteration 3: the update is not applied; stopping' -- $MINGPT "${small[@]}" trainer_config.max_iters=10 optimizer_config.learning_rate=1e30
cmp -s $WORK/s.bin $WORK/good.bin && ok "the snapshot is byte for byte the one before the run" || bad "the snapshot was changed"
rm -f $WORK/s.bin
$MINGPT "${small[@]}" trainer_config.max_iters=10 optimizer_config.learning_rate=1e30 trainer_config.save_every_iters=1 > /dev/null 2>&1
out=$($MINGPT "${small[@]}" trainer_config.max_iters=1 2>&1)
grep -q 'Resuming training from snapshot at Epoch 1, iteration 1$' <<<"$out" \
  && ok "saving every iteration: the snapshot holds the last finite iteration (1)" || bad "snapshot after a NaN" "$out"
if grep -Eq 'iter [0-9]+/[0-9]+ \| loss -?nan' $WORK/run/mingpt.log; then bad "a NaN loss was logged as a training line"
else ok "no NaN training line"; fi
rm -rf $WORK/run $WORK/s.bin

if ! command -v mpirun > /dev/null; then bad "mpirun is installed (make deps installs openmpi-bin)"; finish; exit; fi
echo "-- data parallel: a world size the data cannot feed; outlier skips on every rank alike"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="timeout 120 env ASAN_OPTIONS=$MPI_ASAN_OPTIONS mpirun --oversubscribe --bind-to none"
# 50 characters, block 4, contiguous 90%: 41 train windows and 1 test window.
head -c 50 $DATA > $WORK/fifty.txt
# 12 characters at block 4: train_split 0.55 gives 6 train characters (2 windows), 0.42 gives 5 (1)
printf 'hello world\n' > $WORK/twelve.txt
bad_input world-too-big 2 'the training split has 2 windows, fewer than the 3 ranks of this job' -- $MPIRUN -np 3 $MINGPT "${small[@]}" data_config.path=$WORK/twelve.txt data_config.block_size=4 data_config.train_split=0.55
out=$($MPIRUN -np 2 $MINGPT "${small[@]}" data_config.path=$WORK/twelve.txt data_config.block_size=4 data_config.train_split=0.42 2>&1 >/dev/null)
grep -q '^\[rank 1\] mingpt: error: the training split has 1 window, fewer than the 2 ranks' <<<"$out" \
  && ok "every rank reports it (-np 2)" || bad "every rank reports it (-np 2)" "$out"
[ ! -e $WORK/s.bin ] && ok "no snapshot written" || bad "no snapshot written"
# A test split smaller than the world: evaluation is still exact (ranks without a window add nothing).
rm -rf $WORK/run $WORK/s.bin
l1=$($MINGPT "${small[@]}" data_config.path=$WORK/fifty.txt data_config.block_size=4 trainer_config.batch_size=8 2>&1 | sed -n 's/^done:.*test loss \([0-9.]*\).*/\1/p')
rm -f $WORK/s.bin
l2=$($MPIRUN -np 2 $MINGPT "${small[@]}" data_config.path=$WORK/fifty.txt data_config.block_size=4 trainer_config.batch_size=4 2>&1 | sed -n 's/^done:.*test loss \([0-9.]*\).*/\1/p')
[ -n "$l1" ] && [ "$l1" = "$l2" ] && ok "1 test window on 2 ranks: test loss $l2 = one process's" || bad "1 test window on 2 ranks: '$l2' vs '$l1'"
rm -rf $WORK/run $WORK/s.bin
# skip_spike_zscore tiny: about every other step after the 128-norm window fills is skipped.
# A decision taken on one rank only would leave the replicas different, and the snapshot
# refuses to save them ("replicas diverged").
out=$($MPIRUN -np 2 $MINGPT "${small[@]}" trainer_config.batch_size=2 trainer_config.max_iters=140 \
      trainer_config.log_every=1000 trainer_config.skip_spike_zscore=1e-9 2>&1)
n=$(grep -c 'is an outlier (z-score .* > trainer_config.skip_spike_zscore 1e-09): update skipped' <<<"$out")
[ "$n" -ge 1 ] && grep -q '^done: 140 iterations' <<<"$out" && grep -q '^Snapshot saved at epoch 1, iteration 140' <<<"$out" \
  && ok "skip_spike_zscore on 2 ranks: $n skips logged, identical replicas saved" || bad "skip_spike_zscore on 2 ranks" "$out"
finish
