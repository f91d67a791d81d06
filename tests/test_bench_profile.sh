#!/usr/bin/env bash
# The per-op profile of a training step (kernels/backend_profile.h, `bench_train train --profile 1`):
# a profiled run trains bit for bit as an unprofiled one (fp32, bf16, and with the optional
# gelu_forward left out, which must stay out); every op the model and the trainer call through the
# Backend shows up in the table, matmuls under their role (none "other"), with the calls per step
# the model's structure gives; the rows and the rest add up to the step, the rest is small and not
# negative, and the step is the timed iterations' mean; every op pointer of struct Backend has a
# shim or a reason not to.
cd "$(dirname "$0")/.." && source tests/lib.sh
export OMP_NUM_THREADS=1
export MINGPT_CACHE_DIR=${MINGPT_CACHE_DIR:-$WORK/gemm-cache}
BENCH=${B:-build}/bench/bench_train
[ -x $BENCH ] || { echo "$BENCH missing: run make bench-build"; exit 1; }

L=2
tiny=(train --n_layer "$L" --n_head 2 --n_embd 32 --block 16 --batch 4 --dropout 0.1 --warmup 1 --iters 3 --losses 1)
# the GEMM calibration first, so that the compared runs read the same choices from the cache
$BENCH "${tiny[@]}" > /dev/null 2>&1

echo "-- a profiled run trains bit for bit as an unprofiled one"
for v in "fp32" "bf16" "fp32 --keep_gelu 1"; do
  read -r amp more <<<"$v"
  # shellcheck disable=SC2086
  $BENCH "${tiny[@]}" --amp $amp $more > $WORK/plain.out 2> $WORK/plain.err; rc1=$?
  # shellcheck disable=SC2086
  $BENCH "${tiny[@]}" --amp $amp $more --profile 1 > $WORK/prof.out 2> $WORK/prof.err; rc2=$?
  cp $WORK/prof.out "$WORK/prof-${v// /_}.out"
  n=$(grep -c '^LOSS ' $WORK/plain.out)
  [ $rc1 = 0 ] && [ $rc2 = 0 ] && [ "$n" = 4 ] && diff <(grep '^LOSS ' $WORK/plain.out) <(grep '^LOSS ' $WORK/prof.out) > /dev/null \
    && ok "$v: the 4 losses are the same bits with and without --profile" \
    || bad "$v: losses differ (or a run failed: $rc1 $rc2)" "$(diff <(grep '^LOSS ' $WORK/plain.out) <(grep '^LOSS ' $WORK/prof.out); cat $WORK/plain.err $WORK/prof.err)"
  ! grep -q '^PROF' $WORK/plain.out && ok "$v: no table without --profile" || bad "$v: a table without --profile"
done
fp32=$WORK/prof-fp32.out bf16=$WORK/prof-bf16.out keep=$WORK/prof-fp32_--keep_gelu_1.out

echo "-- every op the model and the trainer call appears"
# the ops the step calls through the Backend, read from the sources; the ones it does not call:
#   alloc free destroy describe mem_info grad_comm_create set_matmul_precision set_grad_write: no op
#   of the step (set_grad_write: a mode for the matmul backwards that follow)
#   attention_forward_cached: incremental inference only
#   crossentropy_forward crossentropy_softmax_backward: the fused crossentropy_forward_backward instead
#   cast_weights: bf16 only (checked there); upload download: called outside the `be->` spelling too
#   accumulate: ZeRO stage 2 only (several ranks; bench_train is one process)
#   scale: not on the step (adamw_update applies the unscale / clip factor as it reads the
#   gradients); loss_scaler_unscale_clip and grad_clip, outside train_step, still call it
#   layernorm_forward_lp attention_forward_lp matmul_*_lp: low precision only, timed in the rows
#   of the ops they stand for
skip_ops=" alloc free destroy describe mem_info grad_comm_create set_matmul_precision set_grad_write attention_forward_cached crossentropy_forward crossentropy_softmax_backward cast_weights accumulate scale layernorm_forward_lp attention_forward_lp matmul_forward_lp matmul_gelu_forward_lp matmul_backward_lp "
# The profile is of the CPU backend (a shim times host-memory ops only): an optional op that only
# the CUDA backend has (kernels/cpu/backend_cpu.c leaves it NULL) can have no row and no shim.
cpu_ops=" $(sed -n '/^Backend \*backend_cpu_create/,/^}/p' kernels/cpu/backend_cpu.c | grep -o '\.[a-z_]* = cpu_' | sed 's/^\.//; s/ = cpu_$//' | tr '\n' ' ') "
[[ $cpu_ops == *" matmul_forward "* && $cpu_ops == *" adamw_update "* ]] && ok "the CPU backend's ops read from backend_cpu_create" \
  || bad "the CPU backend's ops could not be read from kernels/cpu/backend_cpu.c: '$cpu_ops'"
called=$(grep -ho 'be->[a-z_]*(' model/gpt.c trainer/*.c | sed 's/be->//; s/($//' | sort -u)
missing="" checked=0
for op in $called; do
  [[ $skip_ops == *" $op "* ]] && continue
  [[ $cpu_ops == *" $op "* ]] || continue   # CUDA only
  checked=$((checked + 1))
  grep -Eq "^PROF $op(\[[a-z_]+\])? " $fp32 || missing="$missing $op"
done
[ -n "$called" ] && [ -z "$missing" ] && ok "each of the $checked ops the sources call in a step has a row (fp32)" \
  || bad "ops without a row:$missing" "$(grep '^PROF' $fp32)"
grep -q '^PROF cast_weights ' $bf16 && ! grep -q '^PROF cast_weights ' $fp32 \
  && ok "cast_weights appears in bf16 only" || bad "cast_weights row" "$(grep cast $bf16 $fp32)"
! grep -q '^PROF gelu_forward ' $keep && grep -q '^PROF gelu_forward ' $fp32 \
  && ok "--keep_gelu 1: gelu_forward stays absent (the shim keeps an optional op NULL)" || bad "gelu_forward with --keep_gelu" "$(grep gelu $keep)"
missing=""
for role in c_attn attn_proj mlp_proj lm_head; do
  grep -q "^PROF matmul_forward\[$role\] " $fp32 && grep -q "^PROF matmul_backward\[$role\] " $fp32 || missing="$missing $role"
done
grep -q '^PROF matmul_gelu_forward\[c_fc\] ' $fp32 && grep -q '^PROF matmul_backward\[c_fc\] ' $fp32 || missing="$missing c_fc"
[ -z "$missing" ] && ! grep -q '\[other\]' $fp32 $bf16 && ok "matmuls split into the 5 roles, none 'other'" \
  || bad "matmul roles:$missing" "$(grep '^PROF matmul' $fp32)"
# calls per step the structure gives: per block one c_attn, attn_proj, c_fc, mlp_proj product and one
# attention; lm_head once; dropout: the embedding's and 2 per block (the attention's is inside it);
# LayerNorm backward: 2 per block and ln_f; AdamW: one call per parameter tensor (2 + 12 L + 2 + 1)
calls() { awk -v op="$1" '$1 == "PROF" && $2 == op { print $4 }' $fp32; }
want="matmul_forward[c_attn]=$L matmul_forward[attn_proj]=$L matmul_gelu_forward[c_fc]=$L matmul_forward[mlp_proj]=$L
      matmul_forward[lm_head]=1 attention_forward=$L attention_backward=$L matmul_backward[lm_head]=1
      dropout_forward=$((1 + 2 * L)) layernorm_backward=$((2 * L + 1)) encoder_forward=1 adamw_update=$((5 + 12 * L))"
wrong=""
for kv in $want; do
  got=$(calls "${kv%=*}")
  [ "$got" = "${kv#*=}.00" ] || wrong="$wrong ${kv%=*}:$got(want ${kv#*=})"
done
[ -z "$wrong" ] && ok "calls per step as the model's structure gives them" || bad "calls per step:$wrong" "$(grep '^PROF' $fp32)"

echo "-- the rows and the rest add up to the step"
for f in $fp32 $bf16; do
  read -r sum rest step < <(awk '$1 == "PROF" && $2 != "op" && $3 != "step" { s += $5 } $3 == "rest" { r = $5 }
                                 $3 == "step" { t = $5 } END { print s, r, t }' $f)
  read -r lo hi < <(grep '^RESULT' $f | sed 's/.*ms_min=\([0-9.]*\) ms_max=\([0-9.]*\).*/\1 \2/')
  awk -v s="$sum" -v r="$rest" -v t="$step" -v lo="$lo" -v hi="$hi" 'BEGIN {
        exit !(t > 0 && (s - t < 0.01 + 0.001 * t) && (t - s < 0.01 + 0.001 * t) && r >= 0 && r <= 0.25 * t \
               && t >= lo - 0.001 && t <= hi + 0.001) }' \
    && ok "$(basename $f): rows + rest = $sum ms = the step $step ms; rest $rest ms (>= 0, <= 25%); the step within [$lo, $hi]" \
    || bad "$(basename $f): rows + rest $sum, rest $rest, step $step, iterations in [$lo, $hi]" "$(grep -E '^(PROF|RESULT)' $f)"
done

echo "-- every op pointer of the Backend is wrapped, or is not an op of the step"
members=$(sed -n '/^struct Backend {/,/^};/p' kernels/backend.h | grep -o '(\*[a-z_]*)' | tr -d '(*)' | sort -u)
not_ops=" alloc free destroy describe set_matmul_precision set_grad_write grad_comm_create mem_info "
unwrapped=""
for mbr in $members; do
  [[ $not_ops == *" $mbr "* ]] && continue
  [[ $cpu_ops == *" $mbr "* ]] || continue   # CUDA only: the profiled CPU backend leaves it NULL
  grep -q "WRAP($mbr)" kernels/backend_profile.c || unwrapped="$unwrapped $mbr"
done
[ -n "$members" ] && [ -z "$unwrapped" ] && ok "all $(wc -w <<<"$members") members read; every op has a shim" \
  || bad "ops of struct Backend without a shim in kernels/backend_profile.c (WRAP):$unwrapped"

finish
