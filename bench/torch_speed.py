# bench/torch_speed.py — PyTorch's time per training iteration for one config and one
# thread setting (bench/run_bench.py runs it in a fresh process per setting, because
# OpenBLAS reads OPENBLAS_NUM_THREADS only at load time).
#
#   OPENBLAS_NUM_THREADS=2 /usr/bin/python3 bench/torch_speed.py --torch_threads 1 \
#       --n_layer 4 --n_head 4 --n_embd 128 --block 64 --batch 12 --warmup 3 --iters 20
#
# One iteration = mingpt's: forward with loss, zero_grad, backward, clip_grad_norm_(1.0),
# AdamW step (minGPT's decay groups). Prints one RESULT line.
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt import GPT  # noqa: E402


def peak_rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def main():
    ap = argparse.ArgumentParser()
    for k, d in [("n_layer", 4), ("n_head", 4), ("n_embd", 128), ("block", 64), ("batch", 12),
                 ("vocab", 65), ("warmup", 3), ("iters", 20), ("torch_threads", 1)]:
        ap.add_argument("--" + k, type=int, default=d)
    ap.add_argument("--dropout", type=float, default=0.0)
    a = ap.parse_args()
    torch.set_num_threads(a.torch_threads)
    torch.manual_seed(1337)
    B, T, V = a.batch, a.block, a.vocab
    model = GPT(V, T, a.n_layer, a.n_head, a.n_embd, a.dropout, a.dropout, a.dropout)
    model.train()
    opt = model.configure_optimizer(1e-4, (0.9, 0.95), 1e-8, 0.1)
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randint(0, V, (B, T), generator=g), torch.randint(0, V, (B, T), generator=g))
               for _ in range(4)]
    times = []
    for it in range(a.warmup + a.iters):
        x, y = batches[it % 4]
        t0 = time.perf_counter()
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        t1 = time.perf_counter()
        if it >= a.warmup:
            times.append(1e3 * (t1 - t0))
    med = statistics.median(times)
    print(f"RESULT torch L={a.n_layer} H={a.n_head} C={a.n_embd} T={T} B={B} V={V} dropout={a.dropout} "
          f"torch_threads={torch.get_num_threads()} blas_threads={os.environ.get('OPENBLAS_NUM_THREADS', '?')} "
          f"ms_median={med:.3f} ms_min={min(times):.3f} ms_max={max(times):.3f} tok_s={B * T / (med * 1e-3):.1f} "
          f"rss_kib={peak_rss_kib()} loss={loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
