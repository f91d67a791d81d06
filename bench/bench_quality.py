# bench/bench_quality.py — `make bench-quality`: trains a config (default char_cpu.yaml, 2000
# iterations) with mingpt and the same model in PyTorch, and prints both test losses.
#
#   /usr/bin/python3 bench/bench_quality.py --mingpt ./mingpt --bench build/bench/bench_train \
#       [--config char_cpu.yaml] [--torch-init]
#
# Identical on both sides (read from `mingpt --cfg job`, i.e. mingpt's own resolved config):
#   * data: the corpus, vocabulary (sorted code points), contiguous split (train windows start
#     at 0 .. n_tr-T-1 with n_tr = floor(n * train_split), test windows at n_tr ..);
#   * batch order: torch.utils.data.DistributedSampler(num_replicas=1, rank=0, shuffle=True,
#     seed=trainer seed) over the train windows, set_epoch(epoch) with epoch counted from 1,
#     batches = consecutive batch_size slices, carried across epochs (trainer/trainer.c);
#   * evaluation: the evaluation windows of data_config.eval_stride (data/eval_windows.h: every
#     stride-th test window, default block_size, plus a tail window whose already-predicted
#     targets are -1), mean token loss over the first eval_iters batches of them in
#     DistributedSampler(seed) epoch-0 order, dropout off, at every eval_every iterations and
#     at the end;
#   * model: minGPT (bench/torch_gpt.py) with the config's sizes and dropouts;
#   * optimizer: AdamW with minGPT's decay groups (Linear weights only), betas, eps,
#     weight_decay; lr per iteration from trainer/adamw.c's lr_at (warm-up + cosine);
#     clip_grad_norm_(grad_norm_clip);
#   * initial weights: mingpt's gpt_init_weights(seed), dumped by `bench_train init` (so the
#     two runs differ only in arithmetic); --torch-init uses PyTorch's own N(0, 0.02) init.
import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt import GPT, lr_at  # noqa: E402


def resolved_config(mingpt, config):
    cfg_dir, cfg_file = os.path.split(os.path.abspath(config))
    name = os.path.splitext(cfg_file)[0]
    out = subprocess.run([mingpt, "--config-path", cfg_dir, "--config-name", name, "--cfg", "job"],
                         check=True, capture_output=True, text=True).stdout
    return yaml.safe_load(out), cfg_dir, name


def run_mingpt(mingpt, cfg_dir, name, workdir, overrides):
    snap = os.path.join(workdir, "quality_snapshot.bin")
    cmd = [mingpt, "--config-path", cfg_dir, "--config-name", name,
           f"trainer_config.snapshot_path={snap}"] + overrides
    # Run directory (.hydra/, mingpt.log, summary.json) in the scratch directory, not the tree;
    # a mingpt without Hydra run directories refuses the key, then it runs without it.
    t0 = time.time()
    p = subprocess.run(cmd + [f"hydra.run.dir={workdir}"], capture_output=True, text=True)
    if p.returncode == 2 and "hydra" in p.stderr:
        t0 = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True)
    else:
        cmd = cmd + [f"hydra.run.dir={workdir}"]
    print("$ " + " ".join(cmd), flush=True)
    dt = time.time() - t0
    if p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit(f"mingpt exited with {p.returncode}")
    curve = []
    for line in p.stdout.splitlines():
        m = re.search(r"iter (\d+)\s*\|\s*test loss ([0-9.]+)", line)
        if m:
            curve.append((int(m.group(1)), float(m.group(2))))
    if not curve:
        sys.stderr.write(p.stdout)
        raise SystemExit("no test loss in mingpt's output")
    return curve, dt


def load_mingpt_init(bench, shape, seed, workdir):
    V, T, L, NH, C = shape
    base = os.path.join(workdir, "init")
    subprocess.run([bench, "init", "--n_layer", str(L), "--n_head", str(NH), "--n_embd", str(C),
                    "--block", str(T), "--vocab", str(V), "--seed", str(seed), "--out", base], check=True)
    flat = np.fromfile(base + ".bin", dtype=np.float32)
    state = {}
    with open(base + ".txt") as f:
        for line in f:
            name, rows, cols, off = line.split()
            rows, cols, off = int(rows), int(cols), int(off)
            t = flat[off:off + rows * cols]
            state[name] = torch.from_numpy(t.reshape(rows) if cols == 1 else t.reshape(rows, cols).copy())
    return state


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mingpt", default="./mingpt")
    ap.add_argument("--bench", default="build/bench/bench_train")
    ap.add_argument("--config", default="char_cpu.yaml")
    ap.add_argument("--torch-init", action="store_true", help="PyTorch's own init instead of mingpt's weights")
    ap.add_argument("--torch-threads", type=int, default=1)
    ap.add_argument("--skip-mingpt", action="store_true")
    ap.add_argument("--max-iters", type=int, default=0, help="override trainer_config.max_iters (a quick check)")
    a = ap.parse_args()

    cfg, cfg_dir, name = resolved_config(a.mingpt, a.config)
    dc, gc, tc, oc = cfg["data_config"], cfg["gpt_config"], cfg["trainer_config"], cfg["optimizer_config"]
    T, B, seed = dc["block_size"], tc["batch_size"], tc["seed"]
    if dc.get("split", "contiguous") != "contiguous" or dc.get("truncate", 1.0) != 1.0:
        raise SystemExit("bench_quality.py mirrors the contiguous split of the whole corpus only")

    # ---- data (data/char_dataset.c)
    data_path = dc["path"] if os.path.isabs(dc["path"]) else os.path.join(os.getcwd(), dc["path"])
    with open(data_path, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n, V = len(text), len(chars)
    n_tr = math.floor(n * dc["train_split"])
    n_train, n_test = n_tr - T, n - T - n_tr
    train_start = torch.arange(0, n_train)
    test_start = torch.arange(n_tr, n_tr + n_test)
    offs = torch.arange(T + 1)

    def batch(starts):
        w = ids[starts.unsqueeze(1) + offs]
        return w[:, :-1], w[:, 1:]

    L, NH, C = gc["n_layer"], gc["n_head"], gc["n_embd"]
    max_iters = a.max_iters or tc["max_iters"]
    sampler_train = torch.utils.data.DistributedSampler(range(n_train), num_replicas=1, rank=0, shuffle=True, seed=seed)
    # evaluation windows (data/eval_windows.c): every stride-th test window, then the last one with
    # the targets the others already predict ignored
    stride = dc.get("eval_stride", 0) or T
    eval_start = test_start[::stride]
    tail_ignore = 0
    if (n_test - 1) % stride != 0:
        tail_ignore = (len(eval_start) - 1) * stride + T - (n_test - 1)
        eval_start = torch.cat([eval_start, test_start[-1:]])
    sampler_test = torch.utils.data.DistributedSampler(range(len(eval_start)), num_replicas=1, rank=0, shuffle=True,
                                                       seed=seed)
    test_order = torch.tensor(list(iter(sampler_test)))   # epoch 0
    iters_per_epoch = (len(sampler_train) + B - 1) // B
    total = min(iters_per_epoch * tc["max_epochs"], max_iters) if max_iters > 0 else iters_per_epoch * tc["max_epochs"]
    print(f"config {name}: n_layer {L} n_head {NH} n_embd {C} block {T} batch {B} vocab {V}; "
          f"{n_train} train / {n_test} test windows; {total} iterations; lr {oc['learning_rate']} "
          f"warmup {oc['warmup_iters']} decay to {oc['min_lr']} at {oc['lr_decay_iters']}; "
          f"betas {oc['betas']} eps {oc['eps']} wd {oc['weight_decay']}; clip {tc['grad_norm_clip']}; "
          f"dropout {gc['embd_pdrop']}/{gc['resid_pdrop']}/{gc['attn_pdrop']}", flush=True)

    with tempfile.TemporaryDirectory(prefix="mingpt_quality.") as work:
        # ---- mingpt
        if not a.skip_mingpt:
            over = [f"trainer_config.max_iters={a.max_iters}"] if a.max_iters else []
            m_curve, m_time = run_mingpt(a.mingpt, cfg_dir, name, work, over)
            print(f"mingpt : {m_time:.0f} s; test loss " +
                  ", ".join(f"{it}: {l:.4f}" for it, l in m_curve), flush=True)

        # ---- PyTorch
        torch.set_num_threads(a.torch_threads)
        torch.manual_seed(seed)
        model = GPT(V, T, L, NH, C, gc["embd_pdrop"], gc["resid_pdrop"], gc["attn_pdrop"])
        init = "PyTorch's init"
        if not a.torch_init:
            state = load_mingpt_init(a.bench, (V, T, L, NH, C), seed, work)
            sd = model.state_dict()
            for k, v in state.items():
                assert sd[k].shape == v.shape, (k, sd[k].shape, v.shape)
                sd[k].copy_(v)
            init = "mingpt's init"
        opt = model.configure_optimizer(oc["learning_rate"], tuple(oc["betas"]), oc["eps"], oc["weight_decay"])

        eval_iters, eval_every = tc["eval_iters"], tc["eval_every"]

        def evaluate():
            model.eval()
            nb = (len(test_order) + B - 1) // B
            if 0 < eval_iters < nb:
                nb = eval_iters
            tot, cnt = 0.0, 0
            with torch.no_grad():
                for j in range(nb):
                    rows = test_order[j * B:(j + 1) * B]
                    x, y = batch(eval_start[rows])
                    if tail_ignore:   # y is a view that shares x's memory
                        y = y.clone()
                        y[rows == len(eval_start) - 1, :tail_ignore] = -1
                    _, loss = model(x, y)
                    valid = int((y != -1).sum())
                    tot += loss.item() * valid
                    cnt += valid
            model.train()
            return tot / cnt

        t0 = time.time()
        it, epoch, t_curve = 0, 1, []
        while it < total:
            sampler_train.set_epoch(epoch)
            order = torch.tensor(list(iter(sampler_train)))
            for k in range(iters_per_epoch):
                if it >= total:
                    break
                x, y = batch(train_start[order[k * B:(k + 1) * B]])
                lr = lr_at(it, oc["learning_rate"], oc["warmup_iters"], oc["lr_decay_iters"], oc["min_lr"])
                for g in opt.param_groups:
                    g["lr"] = lr
                _, loss = model(x, y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if tc["grad_norm_clip"] > 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), tc["grad_norm_clip"])
                opt.step()
                it += 1
                if eval_every > 0 and it % eval_every == 0 and it < total:
                    t_curve.append((it, evaluate()))
            epoch += 1
        t_curve.append((it, evaluate()))
        t_time = time.time() - t0
        print(f"pytorch: {t_time:.0f} s ({init}); test loss " +
              ", ".join(f"{i}: {l:.4f}" for i, l in t_curve), flush=True)

    if not a.skip_mingpt:
        lm, lt = m_curve[-1][1], t_curve[-1][1]
        print(f"RESULT quality config={name} iters={total} mingpt_test_loss={lm:.4f} "
              f"pytorch_test_loss={lt:.4f} diff={lm - lt:+.4f} within_0.03={'yes' if abs(lm - lt) <= 0.03 else 'NO'}")


if __name__ == "__main__":
    main()
