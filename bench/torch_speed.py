# bench/torch_speed.py — PyTorch's time per training iteration for one config, one mode and one
# thread setting (bench/run_bench.py runs it in a fresh process per measurement, because
# OpenBLAS reads OPENBLAS_NUM_THREADS only at load time and torch.compile caches per process).
# Runs under any Python with torch (Debian's /usr/bin/python3 = torch 1.13, or a venv's).
#
#   OPENBLAS_NUM_THREADS=2 /usr/bin/python3 bench/torch_speed.py --torch_threads 1 \
#       --n_layer 4 --n_head 4 --n_embd 128 --block 64 --batch 12 --warmup 3 --iters 20 \
#       [--sdpa 1] [--compile 1] [--amp bf16]
#   /usr/bin/python3 bench/torch_speed.py --probe 1     # what this torch has (one RESULT line)
#
# One iteration = mingpt's: forward with loss, zero_grad, backward, clip_grad_norm_(1.0),
# AdamW step (minGPT's decay groups). Modes:
#   --sdpa 1     attention through F.scaled_dot_product_attention(is_causal=True) (torch >= 2.0)
#   --compile 1  the model through torch.compile (default backend, inductor); its first
#                iterations compile: compile_s = time of the warm-up iterations minus that many
#                median iterations
#   --amp bf16   forward (and loss) under torch.autocast(device, dtype=torch.bfloat16), as
#                PyTorch's mixed precision; the optimizer state stays fp32. --amp fp16 (CUDA):
#                float16 autocast with a GradScaler, as the tutorial.
#   --device cuda  on the GPU (timed after torch.cuda.synchronize(); TF32 off, as mingpt's fp32;
#                --tf32 1 allows TF32 tensor cores for fp32 matmuls, set_float32_matmul_precision('high'));
#                rss_kib is then the peak of torch.cuda.max_memory_allocated in KiB.
# Prints one RESULT line; exits 3 (with a message) when this torch lacks a requested mode.
import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt import GPT  # noqa: E402

UNAVAILABLE = 3


def peak_rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def capabilities():
    """What this torch offers the benchmark: SDPA, torch.compile, MKL as its BLAS (then
    OPENBLAS_NUM_THREADS means nothing to it and torch's own threads run its GEMMs)."""
    return dict(version=torch.__version__.split("+")[0],
                sdpa=int(hasattr(F, "scaled_dot_product_attention")),
                compile=int(hasattr(torch, "compile") and int(torch.__version__.split(".")[0]) >= 2),
                mkl=int(torch.backends.mkl.is_available()))


def main():
    ap = argparse.ArgumentParser()
    for k, d in [("n_layer", 4), ("n_head", 4), ("n_embd", 128), ("block", 64), ("batch", 12),
                 ("vocab", 65), ("warmup", 3), ("iters", 20), ("torch_threads", 1), ("sdpa", 0),
                 ("compile", 0), ("probe", 0), ("tf32", 0)]:
        ap.add_argument("--" + k, type=int, default=d)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--amp", choices=("fp32", "bf16", "fp16"), default="fp32")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    a = ap.parse_args()
    caps = capabilities()
    if a.probe:
        print("RESULT probe python=%s.%s %s" % (sys.version_info[0], sys.version_info[1],
                                               " ".join(f"{k}={v}" for k, v in caps.items())), flush=True)
        return 0
    for want, have in (("sdpa", "sdpa"), ("compile", "compile")):
        if getattr(a, want) and not caps[have]:
            print(f"torch_speed: torch {caps['version']} has no {want}", file=sys.stderr)
            return UNAVAILABLE
    torch.set_num_threads(a.torch_threads)
    dev = a.device
    if dev == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = bool(a.tf32)
        torch.backends.cudnn.allow_tf32 = bool(a.tf32)
    torch.manual_seed(1337)
    B, T, V = a.batch, a.block, a.vocab
    model = GPT(V, T, a.n_layer, a.n_head, a.n_embd, a.dropout, a.dropout, a.dropout, sdpa=bool(a.sdpa))
    model.to(dev).train()
    opt = model.configure_optimizer(1e-4, (0.9, 0.95), 1e-8, 0.1)
    fwd = torch.compile(model) if a.compile else model
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randint(0, V, (B, T), generator=g).to(dev), torch.randint(0, V, (B, T), generator=g).to(dev))
               for _ in range(4)]
    scaler = torch.cuda.amp.GradScaler() if a.amp == "fp16" else None
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    times = []
    for it in range(a.warmup + a.iters):
        x, y = batches[it % 4]
        sync()
        t0 = time.perf_counter()
        if a.amp != "fp32":
            with torch.autocast(dev, dtype=torch.bfloat16 if a.amp == "bf16" else torch.float16):
                _, loss = fwd(x, y)
        else:
            _, loss = fwd(x, y)
        opt.zero_grad(set_to_none=True)
        if scaler:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        sync()
        times.append(1e3 * (time.perf_counter() - t0))
    timed = times[a.warmup:]
    med = statistics.median(timed)
    compile_s = max(0.0, (sum(times[:a.warmup]) - a.warmup * med) * 1e-3) if a.compile else 0.0
    print(f"RESULT torch version={caps['version']} L={a.n_layer} H={a.n_head} C={a.n_embd} T={T} B={B} V={V} "
          f"dropout={a.dropout} sdpa={a.sdpa} compile={a.compile} amp={a.amp} tf32={a.tf32} "
          f"torch_threads={torch.get_num_threads()} blas_threads={os.environ.get('OPENBLAS_NUM_THREADS', '-')} "
          f"ms_median={med:.3f} ms_min={min(timed):.3f} ms_max={max(timed):.3f} tok_s={B * T / (med * 1e-3):.1f} "
          f"compile_s={compile_s:.1f} device={dev} "
          f"rss_kib={torch.cuda.max_memory_allocated() // 1024 if dev == 'cuda' else peak_rss_kib()} loss={loss.item():.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
