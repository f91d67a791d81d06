#!/usr/bin/env bash
# `mingpt export` read by others: a model trained on tiny-shakespeare is exported as float32,
# bfloat16 and float16 safetensors and tests/export_check.py reads each with the safetensors
# library into an independent NumPy minGPT (tests/np_gpt.py, itself checked against PyTorch's
# logits in tests/fixtures/gpt_tiny.bin) and compares its logits with mingpt's own
# (tests/tools/logits) on fixed tokens; then the float32 file goes back in as
# trainer_config.init_from. The Python side runs in build/pyenv (tests/tools/pyenv.sh: NumPy,
# safetensors and ml_dtypes from PyPI); without it the test fails, it does not skip.
cd "$(dirname "$0")/.." && source tests/lib.sh
export OMP_NUM_THREADS=1
BDIR=${B:-build}
LOGITS=$BDIR/tests/tools/logits
PYENV=build/pyenv
[ -x "$LOGITS" ] || { bad "$LOGITS is built (make test builds it)"; finish; exit 1; }

run=(--config-name char_cpu data_config.truncate=0.05 data_config.block_size=32 gpt_config.n_layer=2 gpt_config.n_head=4
     gpt_config.n_embd=48 trainer_config.batch_size=8 trainer_config.max_iters=60 trainer_config.eval_iters=2
     trainer_config.log_every=1000 trainer_config.device=cpu trainer_config.use_amp=false hydra.run.dir=$WORK/run)
$MINGPT "${run[@]}" trainer_config.snapshot_path=$WORK/m.bin > $WORK/train.log 2>&1 || { bad "training" "$(tail -5 $WORK/train.log)"; finish; exit 1; }
for d in float32 bfloat16 float16; do
  out=$($MINGPT export --snapshot $WORK/m.bin --out $WORK/m_$d.safetensors --dtype $d 2>&1) \
    && ok "export --dtype $d: $out" || bad "export --dtype $d" "$out"
done
"$LOGITS" $WORK/m.bin $WORK/logits.bin 3 7 || bad "tests/tools/logits"
no_partial_files $WORK "no temporary files left by export"

if sh tests/tools/pyenv.sh $PYENV; then
  if out=$($PYENV/bin/python tests/export_check.py $WORK/logits.bin $WORK/m_float32.safetensors \
           $WORK/m_bfloat16.safetensors $WORK/m_float16.safetensors data/input.txt 0.05 tests/fixtures/gpt_tiny.bin 2>&1); then
    ok "safetensors + NumPy minGPT: the exported model's logits (tests/export_check.py)"; echo "$out" | grep -E '^  (ok|FAIL)' | sed 's/^/     /'
  else bad "safetensors + NumPy minGPT: tests/export_check.py" "$out"; fi
else
  bad "the Python environment $PYENV (tests/tools/pyenv.sh failed)"
fi

# The exported file as init_from: a new run from it starts where the snapshot's weights are, so
# its first training loss is the snapshot's model's loss (a fresh init would give about ln V).
out=$($MINGPT "${run[@]}" trainer_config.snapshot_path=$WORK/ft.bin trainer_config.init_from=$WORK/m_float32.safetensors \
      trainer_config.max_iters=1 trainer_config.log_every=1 2>&1)
first=$(sed -n 's/^epoch 1 | iter 1\/1 | loss \([0-9.]*\).*/\1/p' <<<"$out")
fresh=$($MINGPT "${run[@]}" trainer_config.snapshot_path=$WORK/fresh.bin trainer_config.max_iters=1 trainer_config.log_every=1 2>&1 \
        | sed -n 's/^epoch 1 | iter 1\/1 | loss \([0-9.]*\).*/\1/p')
if grep -q "Training from the weights in $WORK/m_float32.safetensors" <<<"$out" && [ -n "$first" ] && [ -n "$fresh" ] &&
   awk -v a="$first" -v b="$fresh" 'BEGIN { exit !(a < b - 0.3) }'; then
  ok "init_from the export: first loss $first (from scratch: $fresh)"
else bad "init_from the export (first loss '$first', from scratch '$fresh')" "$out"; fi
finish
