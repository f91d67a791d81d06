#!/usr/bin/env bash
# Snapshots as a user's working files, through the mingpt binary:
#   * `mingpt info` (text and --json) on good, damaged and newer-minor files; it never modifies them
#   * (bad arguments, refused files and settings: tests/test_bad_snapshot_files.sh)
#   * keep_last 3 over 10 saves, save_best
#   * failed writes (RLIMIT_FSIZE, a full tmpfs): periodic saves warn and go on, the final one
#     stops with exit 1, the previous snapshot stays intact and loads
#   * signals: SIGUSR1 saves and training goes on to the same parameters (also a burst of them
#     during oneDNN GEMMs); SIGTERM stops within a
#     batch and the rerun ends where an uninterrupted run ends; a SIGTERM during an epoch-end
#     save stops at that epoch's end; a second SIGINT while saving abandons the write (exit 130)
#     and leaves the previous snapshot
#   * kill -9 at random moments (training and snapshot writes), 30 rounds: `info` always loads
#     the file on disk, and rerunning finishes
#   * a snapshot written by the CPU backend resumes on the (emulated) CUDA backend and back
#   * under mpirun: init_from, keep_last/save_best, SIGUSR1 to one rank, a changed seed
cd "$(dirname "$0")/.." && source tests/lib.sh
export OMP_NUM_THREADS=1
ROOT=$PWD
BDIR=${B:-build}
EDIT=$ROOT/$BDIR/tests/tools/snapedit
SLOW=$ROOT/$BDIR/tests/tools/slow_fsync.so
[ -x "$EDIT" ] && [ -f "$SLOW" ] || { bad "$EDIT and $SLOW are built (make test builds them)"; finish; exit 1; }

# a small model on 5% of tiny-shakespeare (about 6,000 iterations per epoch of 8 x 32)
base=(--config-name char_cpu data_config.truncate=0.05 data_config.block_size=32 gpt_config.n_layer=2 gpt_config.n_head=4
      gpt_config.n_embd=32 trainer_config.batch_size=8 trainer_config.eval_iters=2 trainer_config.eval_every=0
      trainer_config.save_every_iters=0 trainer_config.log_every=100 optimizer_config.warmup_iters=0
      optimizer_config.lr_decay_iters=0 hydra/job_logging=disabled)
# run DIR [overrides...]: train in $WORK/DIR with snapshot s.bin there
run() { local d=$1; shift; $MINGPT "${base[@]}" hydra.run.dir=$WORK/$d trainer_config.snapshot_path=s.bin "$@"; }
# run_bg LOG DIR [overrides...]: run in the background, output to LOG; $! is mingpt's pid. With
# SLOW_FSYNC_MS set, every fsync lasts that long (tests/tools/slow_fsync.c), so a save can be
# caught while it runs.
run_bg() {
  local log=$1 d=$2; shift 2
  ( if [ -n "${SLOW_FSYNC_MS:-}" ]; then
      export LD_PRELOAD=$SLOW MINGPT_TEST_FSYNC_MS=$SLOW_FSYNC_MS ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
    fi
    exec $MINGPT "${base[@]}" hydra.run.dir=$WORK/$d trainer_config.snapshot_path=s.bin "$@" ) > "$log" 2>&1 &
}
# same_state A B: two snapshots equal byte for byte but for their config (CONF: the run directories differ)
same_state() { "$EDIT" "$1" $WORK/a.noconf drop CONF && "$EDIT" "$2" $WORK/b.noconf drop CONF && cmp -s $WORK/a.noconf $WORK/b.noconf; }
# wait_for FILE PATTERN: until FILE has a line matching PATTERN (at most 60 s)
wait_for() { for _ in $(seq 600); do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
# json EXPR: EXPR (Python, over the parsed document d) of the JSON on stdin
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

echo "-- mingpt info"
run info trainer_config.max_iters=30 trainer_config.eval_every=10 > $WORK/info.log 2>&1 || bad "training for info" "$(tail -3 $WORK/info.log)"
S=$WORK/info/s.bin
cp $S $WORK/info_copy.bin; touch -d '2020-01-01' $S
out=$($MINGPT info $S 2>&1)
grep -q "^format:       1.2, written by mingpt " <<<"$out" && grep -q "^model:        n_layer 2, n_head 4, n_embd 32, block_size 32" <<<"$out" &&
  grep -q "^progress:     0 epochs done, iteration 30 (240 samples into epoch 1), 30 AdamW steps" <<<"$out" &&
  grep -q "^seed:         1337" <<<"$out" && grep -q "^test loss:    last [0-9.]*, best [0-9.]* at iteration 30" <<<"$out" &&
  grep -q '^vocabulary:   59 characters: "\\n !' <<<"$out" && grep -q "^    n_embd: 32" <<<"$out" &&
  grep -q "bytes, CRC32 0x[0-9a-f]\{8\} ok)" <<<"$out" \
  && ok "info: format, writer, shape, progress, seed, test loss, vocabulary, config, CRC" || bad "info text" "$out"
js=$($MINGPT info $S --json 2>&1)
np=$(( 59 * 32 * 2 + 32 * 32 + 2 * (12 * 32 * 32 + 13 * 32) + 2 * 32 ))   # V, T, L, C = 59, 32, 2, 32
[ "$(json '" ".join(map(repr, (d["iter_num"], d["model"]["num_params"], d["world_size"], d["format_version"], len(d["vocab"]), d["vocab"][0], d["crc_ok"], d["writer"][:7])))' <<<"$js")" \
  = "30 $np 1 '1.2' 59 '\\n' True 'mingpt '" ] && ok "info --json (parsed by Python's json)" || bad "info --json" "$js"
cmp -s $S $WORK/info_copy.bin && [ "$(stat -c %Y $S)" = "$(date -d 2020-01-01 +%s)" ] && ok "info leaves the file as it was" \
  || bad "info modified the file"
"$EDIT" $S $WORK/newer.bin version 196609 add XTRA 16 add YTRA 0
out=$($MINGPT info $WORK/newer.bin 2>&1) && grep -q "note:.*format version 1.3, newer than this mingpt's 1.2: skipped 2 records it does not know (XTRA, YTRA)" <<<"$out" \
  && ok "info: a newer minor version loads; its unknown records are named in a note" || bad "info on a 1.3 file" "$out"
"$EDIT" $S $WORK/old.bin version 1 drop WRTR drop EVAL drop TENS drop PREC
out=$($MINGPT info $WORK/old.bin 2>&1) && grep -q "^format:       1.0, written by a mingpt from before format 1.1" <<<"$out" \
  && ok "info: a format 1.0 file loads" || bad "info on a 1.0 file" "$out"
# files written by the mingpt before format 1.1 (the fuzz seeds): they load, sample and export
old1=tests/fuzz/corpus/snapshot/tiny.bin
out=$($MINGPT info $old1 2>&1) && grep -q "^format:       1.0, written by a mingpt from before format 1.1" <<<"$out" &&
  $MINGPT sample --snapshot $old1 --prompt a --max_new_tokens 5 > /dev/null && $MINGPT export --snapshot $old1 --out $WORK/old1.safetensors > /dev/null &&
  $MINGPT info tests/fuzz/corpus/snapshot/no_dist.bin | grep -q "^world size:   not recorded" \
  && ok "snapshots written before format 1.1 load (info, sample, export)" || bad "snapshots of format 1.0" "$out"
echo "-- resume checks the snapshot's config (refusals: tests/test_bad_snapshot_files.sh)"
out=$(run info trainer_config.max_iters=40 optimizer_config.learning_rate=5e-4 trainer_config.batch_size=4 trainer_config.grad_accum_steps=2 2>&1)
grep -q "note: resuming with settings changed since the snapshot: trainer_config.batch_size x grad_accum_steps 8 x 1 -> 4 x 2 (the same global batch), .*optimizer_config.learning_rate 0.001 -> 0.0005" <<<"$out" \
  && grep -q "^done: 40 iterations (10 this run)" <<<"$out" && ok "allowed changes are noted and the run resumes" || bad "allowed changes" "$out"

echo "-- keep_last and save_best"
run keep trainer_config.max_iters=20 trainer_config.save_every_iters=2 trainer_config.keep_last=3 trainer_config.save_best=true \
    trainer_config.eval_every=4 optimizer_config.learning_rate=2e-2 > $WORK/keep.log 2>&1 || bad "keep_last run" "$(tail -3 $WORK/keep.log)"
n_saves=$(grep -c "^Snapshot saved at" $WORK/keep.log)
[ "$(cd $WORK/keep && ls s.iter*.bin s.bin | tr '\n' ' ')" = "s.bin s.iter16.bin s.iter18.bin s.iter20.bin " ] && [ "$n_saves" = 10 ] \
  && ok "keep_last 3 over $n_saves saves: s.iter16/18/20.bin and s.bin" || bad "keep_last 3 ($n_saves saves)" "$(ls $WORK/keep)"
[ "$($MINGPT info $WORK/keep/s.iter18.bin --json | json 'd["iter_num"]')" = 18 ] && cmp -s $WORK/keep/s.bin $WORK/keep/s.iter20.bin \
  && ok "each numbered file holds its iteration; the newest is the stable one" || bad "numbered files' contents"
best=$(sed -n 's/^epoch 1 | iter \([0-9]*\) | test loss \([0-9.]*\)$/\2 \1/p' $WORK/keep.log | sort -n | head -1)
got=$($MINGPT info $WORK/keep/s.best.bin --json | json '"%.4f %d" % (d["best_test_loss"], d["iter_num"])')
[ -n "$best" ] && [ "$got" = "$best" ] && ok "save_best: s.best.bin is the snapshot of the lowest test loss ($got; the losses: $(grep -c 'test loss' $WORK/keep.log))" \
  || bad "save_best (want '$best', got '$got')" "$(grep 'test loss\|Best' $WORK/keep.log)"

echo "-- failed writes"
run fsz trainer_config.max_iters=4 > /dev/null 2>&1 && cp $WORK/fsz/s.bin $WORK/fsz_before.bin || bad "a first snapshot"
size=$(stat -c %s $WORK/fsz_before.bin)
# RLIMIT_FSIZE below the snapshot's size: the periodic saves warn, the final one fails the run
(ulimit -f $((size / 2048)); exec $MINGPT "${base[@]}" hydra.run.dir=$WORK/fsz trainer_config.snapshot_path=s.bin \
    trainer_config.max_iters=10 trainer_config.save_every_iters=2) > $WORK/fsz.out 2> $WORK/fsz.err
rc=$?
warns=$(grep -c "^mingpt: warning: cannot write snapshot '$WORK/fsz/s.bin' (cannot write '$WORK/fsz/s.bin.tmp.[0-9]*': File too large); '$WORK/fsz/s.bin' still holds the snapshot of iteration 4; training goes on" $WORK/fsz.err)
errs=$(grep -c "^mingpt: error: cannot write snapshot '$WORK/fsz/s.bin' (cannot write '$WORK/fsz/s.bin.tmp.[0-9]*': File too large); '$WORK/fsz/s.bin' still holds the snapshot of iteration 4$" $WORK/fsz.err)
[ $rc = 1 ] && [ "$warns" = 2 ] && [ "$errs" = 1 ] && [ "$(wc -l < $WORK/fsz.err)" = 3 ] && grep -q "iter 10/10" $WORK/fsz.out \
  && ok "RLIMIT_FSIZE: the periodic saves (6, 8) warn, training goes on, the final save is one error, exit 1" || bad "RLIMIT_FSIZE (exit $rc)" "$(cat $WORK/fsz.err)"
cmp -s $WORK/fsz/s.bin $WORK/fsz_before.bin && $MINGPT info $WORK/fsz/s.bin > /dev/null && ok "the previous snapshot is intact and loads" \
  || bad "the previous snapshot after failed writes"
no_partial_files $WORK/fsz "no temporary file left by the failed writes"
MNT=$WORK/tmpfs; mkdir -p $MNT
if mount -t tmpfs -o size=$((size * 3 / 2)) tmpfs $MNT 2>/dev/null; then
  trap 'umount "$MNT" 2>/dev/null; rm -rf "$WORK"' EXIT
  cp $WORK/fsz_before.bin $MNT/s.bin   # the disk holds one snapshot; a second (the temp file) does not fit
  $MINGPT "${base[@]}" hydra.run.dir=$WORK/full trainer_config.snapshot_path=$MNT/s.bin trainer_config.max_iters=8 \
    trainer_config.save_every_iters=2 > $WORK/full.out 2> $WORK/full.err
  rc=$?
  [ $rc = 1 ] && [ "$(grep -c 'No space left on device); .* training goes on$' $WORK/full.err)" = 1 ] &&
    grep -q "^mingpt: error: cannot write snapshot '$MNT/s.bin' (.*No space left on device); '$MNT/s.bin' still holds the snapshot of iteration 4$" $WORK/full.err &&
    cmp -s $MNT/s.bin $WORK/fsz_before.bin && [ "$(ls $MNT)" = s.bin ] \
    && ok "a full tmpfs: the periodic save warns, the final one fails (exit 1), the snapshot is intact, no temp file" \
    || bad "a full tmpfs (exit $rc)" "$(cat $WORK/full.err; ls -la $MNT)"
  umount $MNT
else skip no-tmpfs "the full-disk case: cannot mount a tmpfs here (not root or no CAP_SYS_ADMIN)"; fi

echo "-- signals"
long=(trainer_config.max_iters=3000 trainer_config.log_every=100)
run plain "${long[@]}" > $WORK/plain.log 2>&1 || bad "an uninterrupted run" "$(tail -3 $WORK/plain.log)"
run_bg $WORK/usr1.log usr1 "${long[@]}"
pid=$!
wait_for $WORK/usr1.log "iter 300/" && kill -USR1 $pid
wait $pid; rc=$?
it=$(sed -n 's/^Snapshot requested by a signal (SIGUSR1) at iteration \([0-9]*\)$/\1/p' $WORK/usr1.log)
[ $rc = 0 ] && [ -n "$it" ] && [ "$it" -lt 3000 ] && grep -q "^Snapshot saved at epoch 1, iteration $it: " $WORK/usr1.log &&
  grep -q "^done: 3000 iterations" $WORK/usr1.log && ok "SIGUSR1: a snapshot at iteration $it, training went on to the end" \
  || bad "SIGUSR1 (exit $rc)" "$(grep -v '^epoch' $WORK/usr1.log)"
same_state $WORK/usr1/s.bin $WORK/plain/s.bin && ok "SIGUSR1: the final snapshot is byte for byte the uninterrupted run's" \
  || bad "SIGUSR1 changed the run"

# A burst of SIGUSR1 (one every 10 ms) while fp32 GEMMs run on oneDNN only: the handler must
# never run on a computing thread (oneDNN's JIT GEMM points the stack pointer into the heap, and
# a signal frame written there corrupts it: process/signal_thread.h). Every save is served, the
# run ends normally and where an uninterrupted run on the same GEMMs ends.
burst=(trainer_config.max_iters=600 trainer_config.log_every=100)
MINGPT_GEMM=onednn run plain_dnnl "${burst[@]}" > $WORK/plain_dnnl.log 2>&1 || bad "an uninterrupted oneDNN run" "$(tail -3 $WORK/plain_dnnl.log)"
MINGPT_GEMM=onednn run_bg $WORK/burst.log burst "${burst[@]}"
pid=$!
n=0
if wait_for $WORK/burst.log "iter 100/"; then while kill -USR1 $pid 2>/dev/null; do n=$((n + 1)); sleep 0.01; done; fi
wait $pid; rc=$?
saves=$(grep -c '^Snapshot requested by a signal (SIGUSR1)' $WORK/burst.log)
[ $rc = 0 ] && [ "$n" -ge 10 ] && [ "$saves" -ge 5 ] && grep -q "^done: 600 iterations" $WORK/burst.log &&
  same_state $WORK/burst/s.bin $WORK/plain_dnnl/s.bin && ok "SIGUSR1 every 10 ms on oneDNN GEMMs: $n signals, $saves saves, the run ends as the uninterrupted one" \
  || bad "SIGUSR1 burst (exit $rc, $n signals, $saves saves)" "$(grep -v '^epoch' $WORK/burst.log | tail -12)"

run_bg $WORK/term.log term "${long[@]}"
pid=$!
wait_for $WORK/term.log "iter 300/" && kill -TERM $pid
wait $pid; rc=$?
it=$(sed -n 's/^Interrupted by a signal at iteration \([0-9]*\): saving a snapshot$/\1/p' $WORK/term.log)
last=$(grep -o 'iter [0-9]*/3000' $WORK/term.log | tail -1 | sed 's/iter \([0-9]*\).*/\1/')
[ $rc = 75 ] && [ -n "$it" ] && [ "$it" -lt 3000 ] && [ "$it" -ge "$last" ] && ok "SIGTERM: exit 75 at iteration $it" \
  || bad "SIGTERM (exit $rc)" "$(grep -v '^epoch' $WORK/term.log)"
run term "${long[@]}" > $WORK/term2.log 2>&1 && grep -q "Resuming training from snapshot at Epoch 1, iteration $it$" $WORK/term2.log &&
  same_state $WORK/term/s.bin $WORK/plain/s.bin && ok "SIGTERM: the rerun resumes at $it and ends byte for byte as the uninterrupted run" \
  || bad "rerun after SIGTERM" "$(grep -v '^epoch' $WORK/term2.log | tail -5)"

# Between epochs: tiny epochs (1% of the corpus, 128 sequences per step: 9 iterations), a save
# at each epoch end made slow (1.5 s in fsync): SIGTERM after the epoch's evaluation, during
# that save, stops at the epoch's end, with no further batch.
ep=(data_config.truncate=0.01 trainer_config.batch_size=128 trainer_config.max_epochs=50 trainer_config.max_iters=0 trainer_config.save_every=1)
SLOW_FSYNC_MS=1500 run_bg $WORK/epoch.log epoch "${ep[@]}"
pid=$!
wait_for $WORK/epoch.log "^epoch 1 | iter [0-9]* | test loss" && sleep 0.3 && kill -TERM $pid
wait $pid; rc=$?
end1=$(sed -n 's/^epoch 1 | iter \([0-9]*\) | test loss.*/\1/p' $WORK/epoch.log)
[ $rc = 75 ] && grep -q "^Snapshot saved at epoch 1, iteration $end1: " $WORK/epoch.log &&
  grep -q "^Interrupted by a signal at iteration $end1: saving a snapshot$" $WORK/epoch.log && ! grep -q "^epoch 2 " $WORK/epoch.log &&
  [ "$(grep -c '^Snapshot saved' $WORK/epoch.log)" = 1 ] \
  && ok "SIGTERM during the epoch-end save: stops at the epoch's end (iteration $end1), no batch of epoch 2, exit 75" \
  || bad "SIGTERM between epochs (exit $rc)" "$(cat $WORK/epoch.log)"

# A second SIGINT while the interrupt's snapshot is being written (fsync made slow: 3 s); the
# snapshot on disk is the one of a first run (iteration 50).
run twice trainer_config.max_iters=50 > /dev/null 2>&1 && cp $WORK/twice/s.bin $WORK/twice_before.bin || bad "50 iterations"
SLOW_FSYNC_MS=3000 run_bg $WORK/twice.log twice "${long[@]}"
pid=$!
wait_for $WORK/twice.log "iter 300/" && kill -INT $pid
wait_for $WORK/twice.log "^Interrupted by a signal" && sleep 0.5 && kill -INT $pid
t0=$(date +%s); wait $pid; rc=$?; dt=$(( $(date +%s) - t0 ))
[ $rc = 130 ] && [ $dt -le 5 ] && grep -q "^mingpt: interrupted again while saving: the snapshot being written was abandoned; '$WORK/twice/s.bin' still holds the snapshot of iteration 50$" $WORK/twice.log \
  && ok "a second SIGINT while saving: the write is abandoned, exit 130 after ${dt} s" || bad "a second SIGINT while saving (exit $rc)" "$(grep -v '^epoch' $WORK/twice.log)"
cmp -s $WORK/twice/s.bin $WORK/twice_before.bin && [ "$($MINGPT info $WORK/twice/s.bin --json | json 'd["iter_num"]')" = 50 ] \
  && ok "the snapshot on disk is the previous one (iteration 50), whole" || bad "the snapshot after an abandoned write"
no_partial_files $WORK/twice "the abandoned write left no temporary file"

echo "-- kill -9 at random moments, 30 rounds"
kl=(trainer_config.max_iters=100000 trainer_config.save_every_iters=1 trainer_config.keep_last=2 trainer_config.log_every=1)
fails=0; loaded=0; mid_write=0
for round in $(seq 30); do
  # every other round, saves last 20 ms longer (in fsync), so that more kills land inside a write
  ms=$(( round % 2 ? 20 : 0 ))
  SLOW_FSYNC_MS=$ms run_bg $WORK/kill.log kill "${kl[@]}"
  pid=$!
  sleep 0.$(( RANDOM % 6 + 1 ))$(( RANDOM % 10 ))
  kill -9 $pid; wait $pid 2>/dev/null
  ls $WORK/kill/s.bin.tmp.$pid > /dev/null 2>&1 && mid_write=$((mid_write + 1))   # killed inside a save
  if [ -f $WORK/kill/s.bin ]; then
    if $MINGPT info $WORK/kill/s.bin > $WORK/kill_info.log 2>&1; then loaded=$((loaded + 1))
    else fails=$((fails + 1)); echo "round $round: $(cat $WORK/kill_info.log)"; fi
  elif grep -q "^Snapshot saved" $WORK/kill.log; then fails=$((fails + 1)); echo "round $round: the snapshot vanished"; fi
done
[ $fails = 0 ] && [ $loaded -ge 20 ] && ok "30 kill -9 rounds ($mid_write inside a snapshot write): info loaded the snapshot on disk every time ($loaded rounds had one)" \
  || bad "kill -9 rounds: $fails failures, $loaded loads"
it=$($MINGPT info $WORK/kill/s.bin --json | json 'd["iter_num"]')
out=$(run kill "${kl[@]}" trainer_config.max_iters=$((it + 5)) 2>&1)
grep -q "^done: $((it + 5)) iterations (5 this run)" <<<"$out" && ok "rerunning after the kills finishes (iteration $((it + 5)))" \
  || bad "rerunning after the kills" "$(tail -5 <<<"$out")"
no_partial_files $WORK/kill "the killed writers' temporary files were removed by the next save"
[ "$(ls $WORK/kill/s.iter*.bin | wc -l)" = 2 ] && ok "keep_last 2 held through the kills" || bad "keep_last after kills" "$(ls $WORK/kill)"

echo "-- the CPU backend's snapshot resumes on the (emulated) CUDA backend and back"
EMU_SO=$ROOT/$BDIR/emu/libmingpt_cuda.so
if [ -f "$EMU_SO" ]; then
  dev=(data_config.truncate=0.01 gpt_config.n_embd=16 gpt_config.n_head=2 trainer_config.batch_size=4 trainer_config.log_every=1)
  run devall "${dev[@]}" trainer_config.max_iters=9 > $WORK/devall.log 2>&1 || bad "CPU run of 9 iterations"
  run dev "${dev[@]}" trainer_config.max_iters=3 > /dev/null 2>&1 &&
  MINGPT_CUDA_LIB=$EMU_SO run dev "${dev[@]}" trainer_config.max_iters=6 trainer_config.device=cuda > $WORK/dev_cuda.log 2>&1 &&
  run dev "${dev[@]}" trainer_config.max_iters=9 > $WORK/dev_cpu.log 2>&1
  rc=$?
  if [ $rc = 0 ] && grep -q "^Backend: cuda" $WORK/dev_cuda.log && grep -q "Resuming training from snapshot at Epoch 1, iteration 3$" $WORK/dev_cuda.log &&
     grep -q "trainer_config.device cpu -> cuda" $WORK/dev_cuda.log && grep -q "Resuming training from snapshot at Epoch 1, iteration 6$" $WORK/dev_cpu.log; then
    if out=$($ROOT/$BDIR/tests/ddp_check snapshots $WORK/devall/s.bin $WORK/dev/s.bin --tol 1e-4 2>&1); then
      ok "CPU 3 -> CUDA (emulated) 6 -> CPU 9 iterations = 9 on the CPU within 1e-4 ($(tail -1 <<<"$out"))"
    else bad "CPU -> CUDA -> CPU against CPU" "$out"; fi
  else bad "CPU -> CUDA -> CPU resume (exit $rc)" "$(cat $WORK/dev_cuda.log $WORK/dev_cpu.log | grep -v '^epoch')"; fi
else skip no-nvcc "the CUDA snapshot cases: no emulated CUDA backend ($EMU_SO; built when nvcc is on PATH)"; fi

if ! command -v mpirun > /dev/null; then bad "mpirun is installed (make deps installs openmpi-bin)"; finish; exit; fi
echo "-- under mpirun (2 ranks)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="timeout 120 env ASAN_OPTIONS=$MPI_ASAN_OPTIONS mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1"
# a 128-wide model; ddp_check judges its parameters tensor by tensor (tests/ddp_check.c)
wide=(gpt_config.n_embd=128 trainer_config.eval_iters=1)
run wide "${wide[@]}" trainer_config.max_iters=2 > /dev/null 2>&1 && $MINGPT export --snapshot $WORK/wide/s.bin --out $WORK/w.safetensors > /dev/null \
  || bad "a 128-wide model exported"
run init1 "${wide[@]}" trainer_config.max_iters=6 trainer_config.init_from=$WORK/w.safetensors > /dev/null 2>&1 || bad "init_from, 1 process"
$MPIRUN -np 2 $MINGPT "${base[@]}" "${wide[@]}" hydra.run.dir=$WORK/init2 trainer_config.snapshot_path=s.bin trainer_config.max_iters=6 \
  trainer_config.batch_size=4 trainer_config.init_from=$WORK/w.safetensors trainer_config.keep_last=2 trainer_config.save_every_iters=2 \
  trainer_config.eval_every=2 trainer_config.save_best=true > $WORK/init2.log 2>&1 || bad "init_from on 2 ranks" "$(tail -5 $WORK/init2.log)"
if out=$($ROOT/$BDIR/tests/ddp_check snapshots $WORK/init1/s.bin $WORK/init2/s.bin 2>&1); then
  ok "init_from on 2 ranks x 4 = 1 process x 8 ($(tail -1 <<<"$out"))"; else bad "init_from on 2 ranks" "$out"; fi
[ "$(cd $WORK/init2 && ls s*.bin | tr '\n' ' ')" = "s.best.bin s.bin s.iter4.bin s.iter6.bin " ] && ok "keep_last 2 and save_best on 2 ranks" \
  || bad "files on 2 ranks" "$(ls $WORK/init2)"
# long enough (~4 s on an idle 2-core machine) that the ranks are still training when the
# signal comes: with 1500 iterations the job could end before the log showed iteration 300
mlong=(trainer_config.batch_size=4 trainer_config.max_iters=6000 trainer_config.log_every=100)
$MPIRUN -np 2 $MINGPT "${base[@]}" hydra.run.dir=$WORK/mplain trainer_config.snapshot_path=s.bin "${mlong[@]}" > $WORK/mplain.log 2>&1 \
  || bad "2 ranks without a signal" "$(tail -5 $WORK/mplain.log)"
# A job that ended before rank 1 acted on the signal (the log reached the file late) proves
# nothing either way: it is run once more, 8x longer (and the reference job with it).
for n in 6000 48000; do
  rm -rf $WORK/mpu
  $MPIRUN -np 2 $MINGPT "${base[@]}" hydra.run.dir=$WORK/mpu trainer_config.snapshot_path=s.bin "${mlong[@]}" \
    trainer_config.max_iters=$n > $WORK/mpu.log 2>&1 &
  mpid=$!
  wait_for $WORK/mpu.log "iter 100/"
  sent=0
  for p in $(pgrep -f "^$MINGPT .*hydra.run.dir=$WORK/mpu "); do
    tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && kill -USR1 $p && sent=1
  done
  wait $mpid; rc=$?
  it=$(sed -n 's/^Snapshot requested by a signal (SIGUSR1) at iteration \([0-9]*\)$/\1/p' $WORK/mpu.log)
  # no request seen and a clean end: the signal came too late (or not at all, sent=$sent)
  [ -z "$it" ] && [ $rc = 0 ] && [ $n = 6000 ] || break
  echo "  (the job ended before rank 1 acted on the signal, sent=$sent; again with max_iters=48000)"
done
[ $n = 6000 ] || $MPIRUN -np 2 $MINGPT "${base[@]}" hydra.run.dir=$WORK/mplain8 trainer_config.snapshot_path=s.bin "${mlong[@]}" \
  trainer_config.max_iters=$n > $WORK/mplain.log 2>&1 || bad "2 ranks without a signal, $n iterations" "$(tail -5 $WORK/mplain.log)"
plain=$WORK/mplain; [ $n = 6000 ] || plain=$WORK/mplain8
[ $rc = 0 ] && [ -n "$it" ] && grep -q "^Snapshot saved at epoch 1, iteration $it: " $WORK/mpu.log && grep -q "^done: $n iterations" $WORK/mpu.log \
  && ok "SIGUSR1 to rank 1: rank 0 saved at iteration $it, both went on to the end" || bad "SIGUSR1 to rank 1 (exit $rc)" "$(grep -v '^epoch' $WORK/mpu.log)"
same_state $plain/s.bin $WORK/mpu/s.bin && ok "... to the parameters of the same job without the signal (byte for byte)" \
  || bad "SIGUSR1 on 2 ranks changed the run"
out=$($MPIRUN -np 2 $MINGPT "${base[@]}" "${wide[@]}" hydra.run.dir=$WORK/init2 trainer_config.snapshot_path=s.bin trainer_config.max_iters=8 \
      trainer_config.batch_size=4 trainer_config.seed=7 2>&1); rc=$?
[ $rc = 2 ] && [ "$(grep -c 'trainer_config.seed: 1337 in the snapshot, 7 now' <<<"$out")" = 2 ] && ok "a changed seed: both ranks refuse (exit 2)" \
  || bad "a changed seed on 2 ranks (exit $rc)" "$out"
finish
