#!/usr/bin/env bash
# tests/cuda/gpu_bench.sh — the tutorial config (gpt2_train_cfg.yaml: 8 layers, 8 heads, 512 wide,
# block 128, batch 216, dropout 0.1) on one GPU, mingpt and PyTorch side by side in one run.
# Not part of `make test` (the CI machine has no GPU); `make gpu-bench` builds and runs it.
#
#   bash tests/cuda/gpu_bench.sh [OUTDIR]          (default build/gpu-bench)
#
# * mingpt: WARMUP (5) + ITERS (30) iterations with trainer_config.device=cuda, log_every=5, in
#   fp32 (no TF32), TF32 (trainer_config.matmul_precision=high, where the config has that key),
#   bf16 autocast (the default attention path, cuBLAS; also with MINGPT_CUDA_ATTENTION=fused: the
#   fused attention kernels, row bf16-fused; and with MINGPT_CUDA_EPILOGUES=off: no cuBLASLt
#   epilogues, row bf16-noepi) and fp16 autocast + the loss scaler; ms/iter is the
#   mean over the timed iterations' progress lines (each line's ms/iter covers its own 5
#   iterations).
# * PyTorch, when `$TORCH_PY -c "import torch"` works (default python3): bench/torch_speed.py on the
#   same model, batch, dropout and step (forward, backward, clip 1.0, AdamW) in eager, SDPA and
#   SDPA + torch.compile, in the same precisions (TORCH_MODES to choose, e.g. "eager sdpa").
# * One table: ms/iter, tokens/s, MFU (model FLOPs, model/gpt_cost.c's count, against the GPU's
#   dense bf16 peak: PEAK_TFLOPS, default 989 for an H100/H200, 312 for an A100) and mingpt's
#   time against PyTorch's best in the same precision (> 1: mingpt slower).
# * NCU=1 and ncu on PATH: Nsight Compute's kernel times over NCU_LAUNCHES (300) consecutive
#   launches of bf16 steps after the first NCU_SKIP (1500; a run of 40 iterations), summed by
#   kernel name (--clock-control none), once per attention path (default, then fused).
# MINGPT names the binary (default ./mingpt). Each result is also written to OUTDIR/results.txt.
set -u
cd "$(dirname "$0")/../.."
# absolute: a run resolves snapshot_path inside its hydra.run.dir
OUT=$(mkdir -p "${1:-build/gpu-bench}" && cd "${1:-build/gpu-bench}" && pwd) || exit 1
RES=$OUT/results.txt; : > "$RES"
MINGPT=${MINGPT:-./mingpt}
TORCH_PY=${TORCH_PY:-python3}
WARMUP=${WARMUP:-5}; ITERS=${ITERS:-30}
TORCH_MODES=${TORCH_MODES:-eager sdpa compile}
L=8 H=8 C=512 T=128 B=216 V=65
# model FLOPs per token as model/gpt_cost.c counts them (nanoGPT / PaLM convention)
FLOPS_TOK=$(awk -v L=$L -v C=$C -v V=$V -v T=$T 'BEGIN { printf "%.0f", 6 * (L*12*C*C + V*C) + 12*L*C*T }')
GPU=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
case ${PEAK_TFLOPS:-} in
  "") case $GPU in *H100*|*H200*|*GH200*) PEAK_TFLOPS=989 ;; *A100*) PEAK_TFLOPS=312 ;; *) PEAK_TFLOPS=0 ;; esac ;;
esac
echo "GPU: ${GPU:-unknown (no nvidia-smi)}; dense bf16 peak ${PEAK_TFLOPS} TFLOP/s; $(nproc) CPU cores"
echo "mingpt: $($MINGPT --version 2>/dev/null | head -1)"
echo "model: L=$L H=$H C=$C T=$T B=$B V=$V dropout 0.1, $((B*T)) tokens/iter, $(awk -v f=$FLOPS_TOK 'BEGIN{printf "%.1f", f/1e6}') MFLOP/token"
[ -f data/input.txt ] || make -s data >/dev/null

# ---------------------------------------------------------------- mingpt
# mingpt_run NAME OVERRIDES...: prints the mean ms/iter of the timed iterations, or nothing
mingpt_run() {
  local name=$1; shift
  local n=$((WARMUP + ITERS)) dir=$OUT/run-$name
  rm -rf "$dir"; mkdir -p "$dir"
  $MINGPT trainer_config.device=cuda trainer_config.max_iters=$n trainer_config.log_every=5 \
    trainer_config.snapshot_path=$dir/snap.bin hydra.run.dir=$dir "$@" > "$OUT/mingpt-$name.log" 2>&1 || return 1
  sed -n 's/^epoch [0-9]* | iter \([0-9]*\)\/[0-9]* | .* | \([0-9.]*\) ms\/iter | .*/\1 \2/p' "$OUT/mingpt-$name.log" |
    awk -v w=$WARMUP '$1 > w { s += $2; k++ } END { if (k) printf "%.1f", s / k }'
}
declare -A MS
has_precision=0
$MINGPT --cfg job trainer_config.matmul_precision=high > /dev/null 2>&1 && has_precision=1
for mode in fp32 tf32 bf16 bf16-fused bf16-noepi fp16; do
  unset MINGPT_CUDA_ATTENTION MINGPT_CUDA_EPILOGUES   # set by bf16-fused, bf16-noepi (fp16, the last mode, clears them)
  case $mode in
    fp32) args=(trainer_config.use_amp=false) ;;
    tf32) [ $has_precision = 1 ] || { echo "mingpt tf32: n/a (no trainer_config.matmul_precision)"; continue; }
          args=(trainer_config.use_amp=false trainer_config.matmul_precision=high) ;;
    bf16) args=(trainer_config.use_amp=true trainer_config.amp_dtype=bfloat16) ;;
    # the same with the fused attention kernels instead of the cuBLAS path (kernels/backend.h)
    bf16-fused) args=(trainer_config.use_amp=true trainer_config.amp_dtype=bfloat16); export MINGPT_CUDA_ATTENTION=fused ;;
    # the same without cuBLASLt: cuBLAS GEMMs and the backend's bias, GELU and column-sum kernels
    bf16-noepi) args=(trainer_config.use_amp=true trainer_config.amp_dtype=bfloat16); export MINGPT_CUDA_EPILOGUES=off ;;
    fp16) args=(trainer_config.use_amp=true trainer_config.amp_dtype=float16) ;;
  esac
  ms=$(mingpt_run $mode "${args[@]}") || ms=""
  [ -n "$ms" ] || { echo "mingpt $mode: FAILED"; tail -5 "$OUT/mingpt-$mode.log"; continue; }
  MS[mingpt,$mode]=$ms
  echo "mingpt $mode: $ms ms/iter" | tee -a "$RES"
done

# ---------------------------------------------------------------- PyTorch
if $TORCH_PY -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  echo "PyTorch: $($TORCH_PY -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)')"
  for mode in fp32 tf32 bf16 fp16; do
    # TF32 only where mingpt has it too (or TORCH_TF32=1): the table compares like with like
    [ $mode = tf32 ] && [ $has_precision = 0 ] && [ "${TORCH_TF32:-0}" = 0 ] && continue
    for tm in $TORCH_MODES; do
      case $tm in eager) f=() ;; sdpa) f=(--sdpa 1) ;; compile) f=(--sdpa 1 --compile 1) ;; esac
      case $mode in fp32) p=(--amp fp32) ;; tf32) p=(--amp fp32 --tf32 1) ;; *) p=(--amp $mode) ;; esac
      line=$(timeout 600 $TORCH_PY bench/torch_speed.py --device cuda --n_layer $L --n_head $H --n_embd $C \
        --block $T --batch $B --vocab $V --dropout 0.1 --warmup $WARMUP --iters $ITERS "${f[@]}" "${p[@]}" 2>"$OUT/torch-$tm-$mode.err" | grep '^RESULT')
      ms=$(sed -n 's/.* ms_median=\([0-9.]*\) .*/\1/p' <<<"$line")
      [ -n "$ms" ] || { echo "torch $tm $mode: FAILED ($(tail -1 "$OUT/torch-$tm-$mode.err"))"; continue; }
      MS[torch-$tm,$mode]=$(printf "%.1f" "$ms")
      echo "torch $tm $mode: ${MS[torch-$tm,$mode]} ms/iter ($(sed -n 's/.* compile_s=\([0-9.]*\) .*/compile \1 s/p' <<<"$line"))" | tee -a "$RES"
    done
  done
else
  echo "PyTorch: not measured ($TORCH_PY has no torch with CUDA)"
fi

# ---------------------------------------------------------------- the table
tok_s() { awk -v ms=$1 -v n=$((B*T)) 'BEGIN { printf "%.0fk", n / (ms * 1e-3) / 1e3 }'; }
mfu()   { awk -v ms=$1 -v n=$((B*T)) -v f=$FLOPS_TOK -v p=$PEAK_TFLOPS 'BEGIN { if (p > 0) printf "%.1f%%", 100 * n * f / (ms * 1e-3) / (p * 1e12); else printf "n/a" }'; }
echo
echo "| precision | mingpt ms/iter | tokens/s | MFU | PyTorch eager | + SDPA | + torch.compile | mingpt / PyTorch's best |"
echo "|---|---|---|---|---|---|---|---|"
for mode in fp32 tf32 bf16 bf16-fused bf16-noepi fp16; do
  m=${MS[mingpt,$mode]:-}
  best=""; cells=""
  for tm in eager sdpa compile; do
    v=${MS[torch-$tm,${mode%-*}]:-}   # bf16-fused, bf16-noepi: against PyTorch's bf16
    cells="$cells | ${v:-n/a}"
    [ -n "$v" ] && { [ -z "$best" ] || awk -v a=$v -v b=$best 'BEGIN{exit !(a < b)}'; } && best=$v
  done
  [ -z "$m" ] && [ -z "$best" ] && continue
  ratio=n/a; [ -n "$m" ] && [ -n "$best" ] && ratio=$(awk -v a=$m -v b=$best 'BEGIN { printf "%.2fx", a / b }')
  if [ -n "$m" ]; then echo "| $mode | $m | $(tok_s $m) | $(mfu $m)$cells | $ratio |"
  else echo "| $mode | n/a | | $cells | n/a |"; fi
done | tee -a "$RES"

# ---------------------------------------------------------------- Nsight Compute
if [ "${NCU:-0}" = 1 ] && command -v ncu > /dev/null; then
  n=${NCU_LAUNCHES:-300}
  skip=${NCU_SKIP:-1500}
  for att in default fused; do
  echo; echo "Nsight Compute: $n launches of bf16 steps (after the first $skip), $att attention, by kernel"
  if [ $att = fused ]; then export MINGPT_CUDA_ATTENTION=fused; else unset MINGPT_CUDA_ATTENTION; fi
  ncu --clock-control none --launch-skip $skip --launch-count $n --csv --print-units base --metrics gpu__time_duration.sum \
    $MINGPT trainer_config.device=cuda trainer_config.max_iters=40 trainer_config.use_amp=true trainer_config.amp_dtype=bfloat16 \
    trainer_config.snapshot_path=$OUT/ncu-$att.bin hydra.run.dir=$OUT/ncu-$att > "$OUT/ncu-$att.csv" 2> "$OUT/ncu-$att.err"
  python3 - "$OUT/ncu-$att.csv" <<'EOF' | tee -a "$RES"
import csv, sys, collections, re
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows: print("(no ncu rows)"); sys.exit(0)
h = rows[0]; ki, vi = h.index("Kernel Name"), h.index("Metric Value")
t = collections.Counter(); n = collections.Counter()
for r in rows[1:]:
    name = re.sub(r"\(.*", "", r[ki]).strip()
    name = "cuBLAS GEMMs (nvjet / cutlass / sm90)" if re.search(r"nvjet|cutlass|gemm|sm90_|sm80_", name) else name
    t[name] += float(r[vi].replace(",", "")) / 1e3; n[name] += 1
tot = sum(t.values())
print("| kernel | launches | us | share |\n|---|---|---|---|")
for k, v in t.most_common(15): print(f"| `{k}` | {n[k]} | {v:.0f} | {100*v/tot:.0f}% |")
print(f"| all {sum(n.values())} | {sum(n.values())} | {tot:.0f} | 100% |")
EOF
  done
  unset MINGPT_CUDA_ATTENTION
fi
