#!/usr/bin/env bash
# tests/test_eval_signal.sh — a signal during a long evaluation (data_config.eval_stride=1 over
# tiny-shakespeare's whole test split, about 111k windows) stops it between two batches: the
# run saves a snapshot and exits 75 within 2 s of SIGTERM, and the snapshot resumes.
cd "$(dirname "$0")/.." && source tests/lib.sh
export OMP_NUM_THREADS=1
DATA=$PWD/data/input.txt
[ -f "$DATA" ] || { bad "data/input.txt exists (make data)"; finish; exit; }
run=($MINGPT -cp "$PWD" data_config.path=$DATA data_config.truncate=1.0 data_config.block_size=64 gpt_config.n_layer=2
     gpt_config.n_head=2 gpt_config.n_embd=32 trainer_config.batch_size=4 trainer_config.device=cpu
     trainer_config.use_amp=false trainer_config.log_every=1 trainer_config.eval_iters=0
     trainer_config.snapshot_path=$WORK/s.bin hydra.run.dir=$WORK/run)

"${run[@]}" trainer_config.max_iters=2 data_config.eval_stride=1 >"$WORK/a.log" 2>&1 &
pid=$!
for _ in $(seq 200); do grep -q "iter 2/2" "$WORK/a.log" 2>/dev/null && break; sleep 0.05; done
sleep 0.5   # well inside the evaluation (several seconds)
t0=$(date +%s%N)
kill -TERM $pid
wait $pid; rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
if [ "$rc" -eq 75 ] && [ "$ms" -lt 2000 ] &&
   grep -q "Interrupted by a signal during the evaluation at iteration 2: saving a snapshot" "$WORK/a.log" &&
   grep -q "Snapshot saved at epoch 1, iteration 2" "$WORK/a.log" && ! grep -q "test loss" "$WORK/a.log"; then
  ok "SIGTERM during the evaluation: exit 75 after $ms ms, snapshot saved"
else bad "SIGTERM during the evaluation (exit $rc after $ms ms)" "$(tail -6 "$WORK/a.log")"; fi
grep -q '"exit_status": 75' "$WORK/run/summary.json" && ok "summary.json records exit 75" \
  || bad "summary.json records exit 75" "$(cat "$WORK/run/summary.json")"

"${run[@]}" trainer_config.max_iters=4 >"$WORK/b.log" 2>&1; rc=$?
if [ "$rc" -eq 0 ] && grep -q "Resuming training from snapshot at Epoch 1, iteration 2" "$WORK/b.log" &&
   grep -q "^done: 4 iterations (2 this run)" "$WORK/b.log" && grep -q "test loss" "$WORK/b.log"; then
  ok "the snapshot resumes: 2 more iterations and the evaluation"
else bad "the snapshot resumes (exit $rc)" "$(tail -6 "$WORK/b.log")"; fi
finish
