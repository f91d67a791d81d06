#!/bin/bash
# tests/cuda/test_step_counts.sh MINGPT EMU_SO — what one training step of the tutorial's model
# (gpt2_train_cfg.yaml: 8 layers, 8 heads, dropout 0.1, mixed precision) asks of a GPU, counted on
# the emulated CUDA backend, and the bytes it moves on paper (tests/cuda/roofline.py).
#
# The run is the tutorial config made small enough for the emulator (n_embd 128, so head size 16,
# which the fused attention kernels take; block_size 32, batch 2): the number of kernel launches
# does not depend on the widths, only on the layers and the ops. Counted with the fused attention
# (MINGPT_CUDA_ATTENTION=fused) in bf16 and fp16, and with the default attention path (cuBLAS,
# kernels/backend.h) in bf16. One step = the difference between a run
# of 2 iterations and a run of 1 (the same start-up, the same final evaluation), read from the
# emulator's exit statistics (EMU_STATS=2: totals, then launches per kernel name).
#
# Asserted (each of the three runs):
#   * kernel launches per step <= MAX_LAUNCHES (fused) or MAX_LAUNCHES_CUBLAS (the default), the
#     counts today (the GPU-speed goal is 160: lower these bounds whenever a fusion lands so that
#     no change brings launches back);
#   * the fusions that took the count there stay: no accumulate kernel (the first micro-step's
#     matmul backwards write their gradients: Backend.set_grad_write), one dropout kernel (the
#     embedding's: the residual dropouts run inside the LayerNorms, forward and backward), at most
#     one rounding kernel (lm_head's output gradient: every other matmul operand is written in
#     bf16/fp16 by its producer), no gradient scaling kernel (AdamW applies the unscale / clip
#     factor as it reads the gradients);
#   * exactly 2 memsets per step (the gradient buffer, the residual stream's gradient), at most
#     2 device-to-host copies (the losses and the optimizer tail's result) and at most 1 host wait
#     (both copied without waiting, Backend.download_async, and delivered together after the whole
#     step is queued; the batch's inputs, targets, dropout keys and the tail's scalars go through
#     upload_async's staging, so the host never waits for the previous step's kernels);
#   * the optimizer tail ran on the device: the norm's second kernel with the clip / skip decision
#     (ssq_final_tail_kernel) once per step, inside the step's graph with AdamW;
#   * the fused kernels ran: one fused attention forward per layer with MINGPT_CUDA_ATTENTION=fused,
#     none by default; no separate bias, bias + GELU, GELU-backward or bias-gradient column-sum
#     kernel (the cuBLASLt epilogues).
# And tests/cuda/roofline.py's bytes per bf16 step of the full-size tutorial config <= MAX_GB
# (fused attention) and MAX_GB_CUBLAS (the default attention path).
mingpt=$(realpath "${1:?usage: test_step_counts.sh MINGPT EMU_SO}") && emu_so=$(realpath "${2:?}") || exit 1
cd "$(dirname "$0")/../.." || exit 1
MAX_LAUNCHES=69    # today's count with the fused attention (bf16 and fp16); the goal is <= 160
MAX_LAUNCHES_CUBLAS=109  # today's count with the default (cuBLAS) attention path, bf16
MAX_GB=32.7        # roofline.py's total today, fused attention; the goal is <= 35
MAX_GB_CUBLAS=49.3 # the same with the default (cuBLAS) attention path (--cublas-attention)
N_LAYER=8
pass=0; fail=0
ok() { pass=$((pass+1)); echo "ok   $1"; }
ko() { fail=$((fail+1)); echo "FAIL $1"; [ -n "$2" ] && printf '%s\n' "$2" | tail -30 | sed 's/^/     /'; }
# under `make test SAN=1`: no leak report from the emulator's process-lifetime allocations
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT

# run ITERS DTYPE ATTENTION: the emulator's statistics of a run of ITERS iterations, "name count"
# lines plus "=launches N", "=memsets N", "=d2h N", "=waits N"; ATTENTION "fused" sets
# MINGPT_CUDA_ATTENTION=fused, "default" leaves it unset
run() {
    local out=$work/$2.$3.$1.txt
    (if [ "$3" = fused ]; then export MINGPT_CUDA_ATTENTION=fused; else unset MINGPT_CUDA_ATTENTION; fi
    MINGPT_CUDA_LIB=$emu_so EMU_STATS=2 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 timeout 600 "$mingpt" \
        data_config.path="$PWD/data/input.txt" gpt_config.n_embd=128 data_config.block_size=32 \
        trainer_config.batch_size=2 trainer_config.device=cuda trainer_config.amp_dtype="$2" \
        trainer_config.max_iters="$1" trainer_config.eval_iters=1 trainer_config.log_every=1 \
        hydra.run.dir="$work/run.$2.$3.$1" > "$out" 2>&1) || { echo "=failed"; cat "$out" >&2; return 1; }
    sed -n 's/^\[cuda-emu\] stats: \([0-9]*\) launches, \([0-9]*\) memsets, \([0-9]*\) device-to-host.*, \([0-9]*\) host waits$/=launches \1\n=memsets \2\n=d2h \3\n=waits \4/p' "$out"
    sed -n 's/^\[cuda-emu\] *\([0-9][0-9]*\)  \([A-Za-z_0-9]*\)$/\2 \1/p' "$out"
}
# value NAME FILE: the count of NAME in a run's statistics (0 when absent)
value() { awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }' "$2"; }

[ -f data/input.txt ] || { echo "no data/input.txt (make data)"; exit 1; }
for cfg in "bfloat16 fused" "float16 fused" "bfloat16 default"; do
    set -- $cfg; att=$2; dt="$1, $2 attention"
    max=$MAX_LAUNCHES want_flash=$N_LAYER
    [ $att = default ] && max=$MAX_LAUNCHES_CUBLAS want_flash=0
    run 1 $1 $att > "$work/s1" 2> "$work/e1" && run 2 $1 $att > "$work/s2" 2> "$work/e2"
    if [ $? -ne 0 ] || ! grep -q '^=launches' "$work/s1" || ! grep -q '^=launches' "$work/s2"; then
        ko "$dt: the emulated runs" "$(cat "$work/e1" "$work/e2")"; continue
    fi
    d() { echo $(( $(value "$1" "$work/s2") - $(value "$1" "$work/s1") )); }
    launches=$(d =launches) memsets=$(d =memsets) d2h=$(d =d2h) waits=$(d =waits)
    echo "     $dt: one step = $launches launches, $memsets memsets, $d2h device-to-host copies, $waits host waits; by kernel:"
    awk '{print $1}' "$work/s1" "$work/s2" | grep -v '^=' | sort -u | while read -r k; do
        n=$(d "$k"); [ "$n" -ne 0 ] && printf '     %6d  %s\n' "$n" "$k"; done | sort -rn
    [ "$launches" -gt 0 ] && [ "$launches" -le $max ] &&
        ok "$dt: $launches kernel launches per step (<= $max; goal 160)" ||
        ko "$dt: $launches kernel launches per step, more than $max"
    [ "$memsets" -eq 2 ] && ok "$dt: 2 memsets per step" || ko "$dt: $memsets memsets per step, expected 2"
    [ "$d2h" -le 2 ] && ok "$dt: $d2h device-to-host copies per step (<= 2)" ||
        ko "$dt: $d2h device-to-host copies per step, expected at most 2"
    [ "$waits" -le 1 ] && ok "$dt: $waits host wait per step (<= 1: the optimizer tail's result and the losses read back together after the step; the batch is staged)" ||
        ko "$dt: $waits host waits per step, expected at most 1"
    flash=$(d flash_fwd_kernel)
    [ "$flash" -eq $want_flash ] && ok "$dt: the fused attention forward ran $flash times per step ($N_LAYER layers)" ||
        ko "$dt: fused attention forward launches per step: $flash, expected $want_flash"
    acc=$(d accumulate_kernel) dro=$(( $(d dropout_forward_kernel) + $(d dropout_backward_kernel) )) rnd=$(d round_kernel)
    [ "$acc" -eq 0 ] && ok "$dt: no accumulate kernel (the gradients written on the first micro-step)" ||
        ko "$dt: $acc accumulate kernel launches per step, expected 0"
    [ "$dro" -eq 1 ] && ok "$dt: one dropout kernel (the embedding's; the residual dropouts inside the LayerNorms)" ||
        ko "$dt: $dro dropout kernel launches per step, expected 1"
    tail=$(d ssq_final_tail_kernel)
    [ "$tail" -eq 1 ] && ok "$dt: the optimizer tail on the device (norm, clip / skip decision, AdamW in the step's graph)" ||
        ko "$dt: ssq_final_tail_kernel launches per step: $tail, expected 1"
    sc=$(d scale_kernel)
    [ "$sc" -eq 0 ] && ok "$dt: no gradient scaling kernel (the unscale / clip factor applied inside AdamW)" ||
        ko "$dt: $sc scale_kernel launches per step, expected 0"
    [ "$rnd" -le 1 ] && ok "$dt: $rnd rounding kernel per step (<= 1: the producers write the matmul operands)" ||
        ko "$dt: $rnd rounding kernel launches per step, expected at most 1"
    sep=$(( $(d add_bias_kernel) + $(d bias_gelu_kernel) + $(d gelu_backward_kernel) + $(d gelu_backward_inplace_kernel) + $(d colsum_partial_kernel) ))
    [ "$sep" -eq 0 ] && ok "$dt: no separate bias, bias + GELU, GELU backward or bias-gradient kernel (cuBLASLt epilogues)" ||
        ko "$dt: $sep separate bias / GELU / bias-gradient kernel launches per step"
done

for att in fused cublas; do
    max=$MAX_GB flag= goal="; goal 35"
    [ $att = cublas ] && max=$MAX_GB_CUBLAS flag=" --cublas-attention" goal=
    gb=$(python3 tests/cuda/roofline.py $flag | sed -n 's/^total: .*, \([0-9.]*\) GB moved$/\1/p')
    if [ -n "$gb" ] && awk -v g="$gb" -v m=$max 'BEGIN { exit !(g <= m) }'; then
        ok "roofline.py$flag: $gb GB per bf16 step of the tutorial config, $att attention (<= $max$goal)"
    else
        ko "roofline.py$flag: '$gb' GB per bf16 step, $att attention, expected <= $max"
    fi
done
echo "test_step_counts.sh: $pass passed, $fail failed"
[ $fail -eq 0 ]
