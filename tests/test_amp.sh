#!/usr/bin/env bash
# trainer_config.use_amp with amp_dtype as torch.autocast's per-device default, on the CPU backend:
# amp_dtype=auto (the default) trains in bfloat16 where the CPU has bf16 instructions (AVX512-BF16
# or AMX) and otherwise in float32 with one note; float16 only when asked for; the snapshot records
# the precision it trained in (`info`); a resume in another precision goes on, with one note naming
# both; bad values are refused naming the key. (The resolution for CUDA and for a CPU without
# bf16 instructions, whatever this machine is: tests/test_amp.c.)
cd "$(dirname "$0")/.." && source tests/lib.sh
export OMP_NUM_THREADS=1
[ -f data/input.txt ] || { echo "data/input.txt missing: run make data"; exit 1; }

run=(--config-name char_cpu data_config.path=$PWD/data/input.txt data_config.truncate=0.02 gpt_config.n_layer=1
     gpt_config.n_embd=32 gpt_config.n_head=2 data_config.block_size=16 trainer_config.batch_size=4
     trainer_config.eval_iters=1 trainer_config.log_every=100 trainer_config.device=cpu)
# train NAME ARGS...: a short run into $WORK/NAME (log NAME.log), its snapshot $WORK/NAME.bin
train() { local n=$1; shift; $MINGPT "${run[@]}" trainer_config.snapshot_path=$WORK/$n.bin hydra.run.dir=$WORK/$n "$@" > $WORK/$n.log 2>&1; }
precision() { $MINGPT info "$1" | sed -n 's/^precision: *//p'; }
if grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then native=bfloat16; else native=float32; fi

echo "-- the config: auto by default, the three values, others refused naming the key"
[ "$($MINGPT "${run[@]}" --cfg job -p trainer_config.amp_dtype)" = auto ] && ok "--cfg job: amp_dtype defaults to auto" \
  || bad "--cfg job: amp_dtype" "$($MINGPT "${run[@]}" --cfg job -p trainer_config.amp_dtype 2>&1)"
for v in auto bfloat16 float16; do
  [ "$($MINGPT "${run[@]}" trainer_config.amp_dtype=$v --cfg job -p trainer_config.amp_dtype 2>&1)" = $v ] && ok "amp_dtype=$v accepted" \
    || bad "amp_dtype=$v accepted"
done
bad_input cfg-amp-dtype-bad 2 'trainer_config.amp_dtype must be one of auto|bfloat16|float16, got '\''half'\''' -- $MINGPT "${run[@]}" trainer_config.amp_dtype=half trainer_config.max_iters=1 hydra.run.dir=$WORK/bad

echo "-- use_amp=true with the default amp_dtype on this CPU ($native)"
train auto trainer_config.use_amp=true trainer_config.max_iters=4; rc=$?
if [ $native = bfloat16 ]; then
  [ $rc = 0 ] && grep -qx "Backend: cpu, mixed precision (bfloat16 matmul inputs, fp32 master weights)" $WORK/auto.log \
    && ! grep -q '^note: use_amp' $WORK/auto.log && ok "auto on a CPU with bf16 instructions: bfloat16, no note" \
    || bad "auto on a bf16 CPU (rc $rc)" "$(head -12 $WORK/auto.log)"
else
  [ $rc = 0 ] && grep -qx "Backend: cpu, fp32" $WORK/auto.log \
    && [ "$(grep -c '^note: use_amp with amp_dtype=auto: this CPU has no bfloat16 instructions (AVX512-BF16 or AMX); training in float32$' $WORK/auto.log)" = 1 ] \
    && ok "auto on a CPU without bf16 instructions: float32, one note" || bad "auto without bf16 (rc $rc)" "$(head -12 $WORK/auto.log)"
fi
[ "$(precision $WORK/auto.bin)" = "$native matmul inputs, fp32 master weights" ] || [ $native = float32 -a "$(precision $WORK/auto.bin)" = float32 ] \
  && ok "info: the snapshot records $native" || bad "info: precision" "$($MINGPT info $WORK/auto.bin 2>&1 | head -8)"
[ "$($MINGPT info --json $WORK/auto.bin | python3 -c 'import json,sys; print(json.load(sys.stdin)["precision"])')" = $native ] \
  && ok "info --json: precision $native" || bad "info --json: precision"

echo "-- float16 only when asked for"
train f16 trainer_config.use_amp=true trainer_config.amp_dtype=float16 trainer_config.max_iters=4; rc=$?
[ $rc = 0 ] && grep -qx "Backend: cpu, mixed precision (float16 matmul inputs, fp32 master weights, dynamic loss scaling)" $WORK/f16.log \
  && [ "$(precision $WORK/f16.bin)" = "float16 matmul inputs, fp32 master weights" ] && ok "amp_dtype=float16: float16 (emulated), recorded" \
  || bad "amp_dtype=float16 (rc $rc)" "$(head -12 $WORK/f16.log)"
! grep -qw float16 $WORK/auto.log && ok "the default never trains in float16 on the CPU" || bad "float16 in the default's log" "$(grep -w float16 $WORK/auto.log)"
train fp32 trainer_config.use_amp=false trainer_config.amp_dtype=float16 trainer_config.max_iters=2 \
  && grep -qx "Backend: cpu, fp32" $WORK/fp32.log && [ "$(precision $WORK/fp32.bin)" = float32 ] \
  && ok "use_amp=false: float32 whatever amp_dtype says" || bad "use_amp=false" "$(head -12 $WORK/fp32.log)"

echo "-- a resume in another precision goes on, with one note"
cp $WORK/f16.bin $WORK/switch.bin
train switch trainer_config.use_amp=true trainer_config.max_iters=6; rc=$?
want="note: snapshot '$WORK/switch.bin' was trained in float16, this run trains in $native (use_amp=true, amp_dtype=auto on the cpu backend): it continues from the snapshot's fp32 weights and AdamW state"
[ $rc = 0 ] && [ "$(grep -cxF "$want" $WORK/switch.log)" = 1 ] && grep -q '^done: 6 iterations (2 this run)' $WORK/switch.log \
  && [ "$(precision $WORK/switch.bin | cut -d' ' -f1)" = $native ] \
  && ok "float16 snapshot, resumed with auto: one note, training goes on in $native" || bad "precision switch (rc $rc)" "$(grep -e note -e done $WORK/switch.log)"
train auto trainer_config.use_amp=true trainer_config.max_iters=6; rc=$?
[ $rc = 0 ] && ! grep -q 'was trained in' $WORK/auto.log && ok "the same precision: no note" || bad "same precision (rc $rc)" "$(grep note $WORK/auto.log)"
cp $WORK/auto.bin $WORK/back.bin
train back trainer_config.use_amp=true trainer_config.amp_dtype=float16 trainer_config.max_iters=8; rc=$?
[ $rc = 0 ] && grep -q "^note: snapshot '$WORK/back.bin' was trained in $native, this run trains in float16 (use_amp=true, amp_dtype=float16 on the cpu backend): .*, the fp16 loss scale starting afresh$" $WORK/back.log \
  && [ "$($MINGPT info --json $WORK/back.bin | python3 -c 'import json,sys; print(json.load(sys.stdin)["loss_scale"])')" = 65536.0 ] \
  && ok "into float16 from $native: the note, the loss scale from 2^16" || bad "into float16 (rc $rc)" "$(grep -e note -e done $WORK/back.log)"
finish
