#!/usr/bin/env bash
# End to end on tiny-shakespeare: a few hundred iterations of the small preset learn
# (test loss < 2.5), resume through the CLI continues to the same total, and sampling
# prints text from the vocabulary, the same on every backend.
cd "$(dirname "$0")/.." && source tests/lib.sh
[ -f data/input.txt ] || { echo "data/input.txt missing: run make data"; exit 1; }

run=(--config-name char_cpu trainer_config.snapshot_path=$WORK/e2e.bin trainer_config.max_iters=300
     trainer_config.eval_every=0 trainer_config.eval_iters=50 trainer_config.save_every_iters=0
     trainer_config.log_every=100 optimizer_config.lr_decay_iters=300 optimizer_config.warmup_iters=30
     hydra.run.dir=$WORK/run)

# 1. 200 iterations, stop (max_iters), then resume to 300.
$MINGPT "${run[@]}" trainer_config.max_iters=200 > $WORK/a.log 2>&1 || bad "first run" "$(tail $WORK/a.log)"
grep -q "Snapshot not found" $WORK/a.log && ok "fresh start" || bad "fresh start" "$(head $WORK/a.log)"
$MINGPT "${run[@]}" > $WORK/b.log 2>&1 || bad "resumed run" "$(tail $WORK/b.log)"
grep -q "Resuming training from snapshot at Epoch 1, iteration 200" $WORK/b.log && ok "resumes at iteration 200" \
  || bad "resumes at iteration 200" "$(head $WORK/b.log)"
grep -q "done: 300 iterations (100 this run)" $WORK/b.log && ok "stops at the same total" \
  || bad "stops at the same total" "$(tail -3 $WORK/b.log)"

loss=$(sed -n 's/.*test loss \([0-9.]*\).*/\1/p' $WORK/b.log | tail -1)
if [ -n "$loss" ] && awk "BEGIN{exit !($loss < 2.5)}"; then ok "test loss $loss < 2.5 after 300 iterations"
else bad "test loss '$loss' < 2.5 after 300 iterations" "$(tail -5 $WORK/b.log)"; fi

# matmul_precision=high: the CPU backend has no TF32; it says so and trains in true fp32.
$MINGPT "${run[@]}" trainer_config.max_iters=2 trainer_config.matmul_precision=high trainer_config.snapshot_path=$WORK/tf32.bin \
  hydra.run.dir=$WORK/tf32 > $WORK/tf32.log 2>&1 && grep -q "note: matmul_precision=high: the cpu backend has no TF32" $WORK/tf32.log \
  && grep -q "^Backend: cpu, fp32$" $WORK/tf32.log && ok "matmul_precision=high on the CPU: a note, true fp32" \
  || bad "matmul_precision=high on the CPU" "$(head -5 $WORK/tf32.log)"

# 2. A third run has nothing left to do and exits 0.
$MINGPT "${run[@]}" > $WORK/c.log 2>&1 && grep -q "Nothing to train" $WORK/c.log && ok "finished run is idempotent" \
  || bad "finished run is idempotent" "$(tail -3 $WORK/c.log)"
# its last line says why in words: no train loss of iterations that never ran (nan)
grep -Eq '^done: nothing to train: the snapshot is at iteration 300 \(max_iters 300\), test loss [0-9.]+, [0-9.]+ s$' $WORK/c.log \
  && ! grep -qi 'nan' $WORK/c.log && ok "the rerun's last line: nothing to train, at iteration 300 (max_iters 300)" \
  || bad "the rerun's last line" "$(tail -3 $WORK/c.log)"

# 3. Sampling: prompt + 300 characters, all from the corpus alphabet.
out=$($MINGPT sample --snapshot $WORK/e2e.bin --prompt "ROMEO:" --max_new_tokens 300 --seed 7 2>&1)
n=$(printf '%s' "$out" | wc -m)
[ "$n" -ge 300 ] && ok "sample prints $n characters" || bad "sample length $n" "$out"
[[ "$out" == ROMEO:* ]] && ok "sample starts with the prompt" || bad "sample starts with the prompt" "$out"
# every byte of the output (stderr included) is one of the corpus's bytes: the vocabulary
bytes() { od -An -v -tx1 | tr -s ' ' '\n' | sed '/^$/d' | LC_ALL=C sort -u; }
outside=$(LC_ALL=C comm -13 <(bytes < data/input.txt) <(printf '%s' "$out" | bytes) | tr '\n' ' ')
[ -z "$outside" ] && ok "sample is all from the corpus alphabet" || bad "sample has bytes outside the corpus: $outside" "$out"
out2=$($MINGPT sample --snapshot $WORK/e2e.bin --prompt "ROMEO:" --max_new_tokens 300 --seed 7 2>&1)
[ "$out" == "$out2" ] && ok "same seed, same sample" || bad "same seed, same sample"
out3=$($MINGPT sample --snapshot $WORK/e2e.bin --prompt "ROMEO:" --max_new_tokens 300 --seed 8 2>&1)
[ "$out" != "$out3" ] && ok "another seed, another sample" || bad "another seed, another sample"

# 4. The backend (--device): auto without a CUDA backend samples on the CPU; the emulated CUDA
# backend samples the same text. Its logits are the CPU's within 1e-5 (tests/cuda/test_cuda_layouts.c),
# so with the same seed a character could differ only where a draw fell within that much of a
# boundary between two characters; the 300 characters here (past block_size 64: the window slides)
# are the same.
out4=$(MINGPT_CUDA_LIB=$WORK/none.so $MINGPT sample --snapshot $WORK/e2e.bin --prompt "ROMEO:" --max_new_tokens 300 --seed 7 \
       --device auto 2>&1)
[ "$out" == "$out4" ] && ok "--device auto without a CUDA backend: the CPU's sample" || bad "--device auto falls back" "$out4"
EMU_SO=$PWD/${B:-build}/emu/libmingpt_cuda.so
if [ -f "$EMU_SO" ]; then
  out5=$(MINGPT_CUDA_LIB=$EMU_SO OMP_NUM_THREADS=1 $MINGPT sample --snapshot $WORK/e2e.bin --prompt "ROMEO:" --max_new_tokens 300 \
         --seed 7 --device cuda 2>&1)
  [ "$out" == "$out5" ] && ok "--device cuda (emulated): the CPU's sample" || bad "--device cuda (emulated) samples the CPU's text" \
    "$(diff <(echo "$out") <(echo "$out5") | head -8)"
else skip no-nvcc "--device cuda: no emulated CUDA backend ($EMU_SO; built when nvcc is on PATH)"; fi
finish
