#!/usr/bin/env bash
# tests/cuda/gpu_check.sh — the checks that need a real NVIDIA GPU (not part of `make test`: the
# CI machine has none). On a machine with one, after `make mingpt gpu-tests`:
#   bash tests/cuda/gpu_check.sh [DIR of the gpu-tests programs, default build/gpu-tests]
#   * the op, training, layout and loss-scaler suites linked against the nvcc objects, and the op
#     suite under compute-sanitizer memcheck and racecheck when it is on PATH;
#   * char_cpu.yaml (500 iterations) on the GPU in fp32, bf16 and fp16, and bf16 through the fused
#     attention kernels: the test loss within 2e-3 of the CPU's;
#   * 250 iterations, a snapshot, a resume to 500 on the GPU: the straight run's last log line;
#   * `mingpt sample --device cuda` prints the CPU's text, byte for byte.
# MINGPT names the binary (default ./mingpt); SAN_TIMEOUT bounds each compute-sanitizer run (600 s);
# SANITIZER=0 leaves compute-sanitizer out (a short rerun on a lent machine).
# Exits non-zero on any failure.
cd "$(dirname "$0")/../.."
. tests/lib.sh
DIR=${1:-build/gpu-tests}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
command -v nvidia-smi >/dev/null && nvidia-smi -L | head -1 || echo "(no nvidia-smi on PATH)"

echo "-- the suites on the GPU"
for t in "$DIR"/test_*; do
  case $t in *.d) continue ;; esac
  out=$(timeout 300 "$t" 2>&1) && ok "$(basename "$t")" || bad "$(basename "$t")" "$(grep -E 'ERROR|FAILED' <<<"$out")"
done
if [ "${SANITIZER:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    out=$(timeout ${SAN_TIMEOUT:-600} compute-sanitizer --tool $tool --error-exitcode 9 "$DIR/test_cuda_ops" 2>&1) \
      && ok "test_cuda_ops under compute-sanitizer $tool" || bad "test_cuda_ops under compute-sanitizer $tool" "$(tail -5 <<<"$out")"
  done
fi

echo "-- char_cpu.yaml on the GPU against the CPU"
C=(--config-name char_cpu trainer_config.max_iters=500 optimizer_config.lr_decay_iters=500 trainer_config.eval_every=250)
test_loss() { sed -n 's/^done: .*test loss \([0-9.]*\),.*/\1/p' "$1"; }
$MINGPT "${C[@]}" trainer_config.device=cpu trainer_config.snapshot_path=$WORK/cpu.bin hydra.run.dir=$WORK/cpu > $WORK/cpu.log 2>&1
ref=$(test_loss $WORK/cpu.log)
# (the last: bf16 through the fused attention kernels, MINGPT_CUDA_ATTENTION=fused; the default
# is the cuBLAS path, kernels/backend.h)
for amp in "false float16" "true bfloat16" "true float16" "true bfloat16 fused"; do
  set -- $amp
  n=g$1$2${3:+-$3}
  if [ -n "${3:-}" ]; then export MINGPT_CUDA_ATTENTION=$3; else unset MINGPT_CUDA_ATTENTION; fi
  $MINGPT "${C[@]}" trainer_config.device=cuda trainer_config.use_amp=$1 trainer_config.amp_dtype=$2 \
    trainer_config.snapshot_path=$WORK/$n.bin hydra.run.dir=$WORK/$n > $WORK/$n.log 2>&1
  got=$(test_loss $WORK/$n.log)
  what="use_amp=$1 amp_dtype=$2${3:+ MINGPT_CUDA_ATTENTION=$3}"
  awk -v a="$got" -v b="$ref" 'BEGIN { d = a - b; exit !(a != "" && b != "" && d < 2e-3 && d > -2e-3) }' \
    && ok "$what: test loss $got, CPU $ref" || bad "$what: test loss '$got', CPU '$ref'" "$(tail -5 $WORK/$n.log)"
done
unset MINGPT_CUDA_ATTENTION

echo "-- a resume on the GPU"
$MINGPT "${C[@]}" trainer_config.device=cuda trainer_config.max_iters=250 trainer_config.snapshot_path=$WORK/r.bin hydra.run.dir=$WORK/r > $WORK/r1.log 2>&1
$MINGPT "${C[@]}" trainer_config.device=cuda trainer_config.snapshot_path=$WORK/r.bin hydra.run.dir=$WORK/r > $WORK/r2.log 2>&1
a=$(grep -o 'iter 500/500 | loss [0-9.]*' $WORK/gfalsefloat16.log); b=$(grep -o 'iter 500/500 | loss [0-9.]*' $WORK/r2.log)
[ -n "$a" ] && [ "$a" = "$b" ] && ok "250 + 250 iterations = 500 straight ($a)" || bad "resume on the GPU: '$b', straight '$a'"

echo "-- sampling on the GPU"
for d in cpu cuda; do $MINGPT sample --snapshot $WORK/gfalsefloat16.bin --prompt "ROMEO:" --max_new_tokens 300 --seed 3 --device $d > $WORK/s_$d.txt 2>$WORK/s_$d.err; done
[ -s $WORK/s_cuda.txt ] && cmp -s $WORK/s_cpu.txt $WORK/s_cuda.txt && ok "sample --device cuda = --device cpu ($(wc -c < $WORK/s_cuda.txt) bytes)" \
  || bad "sample --device cuda differs from --device cpu" "$(cat $WORK/s_cuda.err)"
finish
