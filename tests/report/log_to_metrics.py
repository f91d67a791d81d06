#!/usr/bin/env python3
"""Writes <run dir>/metrics.jsonl from <run dir>/mingpt.log, in the format of README "metrics.jsonl".

The test harness of `mingpt plot` / `mingpt runs` (tests/test_plot_runs.sh) uses it for runs whose
trainer does not write metrics.jsonl itself (a build before that feature); a run directory that
already has metrics.jsonl is left alone. Numbers come from the log's progress lines:
  epoch E | iter I/N | loss L | lr R | norm G | M ms/iter | S tok/s
  epoch E | iter I | test loss L
tokens = I x tokens_per_iter (the global batch x block_size, given on the command line); time_s =
seconds since the first log line. usage: log_to_metrics.py TOKENS_PER_ITER DIR...
"""
import datetime
import json
import os
import re
import sys

PREFIX = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]\[[^]]*\]\[INFO\] - (.*)$")
TRAIN = re.compile(r"^epoch (\d+) \| iter (\d+)/\d+ \| loss (\S+) \| lr (\S+) \| norm (\S+) \| (\S+) ms/iter \| (\S+) tok/s")
TEST = re.compile(r"^epoch (\d+) \| iter (\d+) \| test loss (\S+)")


def convert(run_dir, tokens_per_iter):
    out = os.path.join(run_dir, "metrics.jsonl")
    log = os.path.join(run_dir, "mingpt.log")
    if os.path.exists(out) or not os.path.exists(log):
        return
    lines, t0 = [], None
    for raw in open(log, encoding="utf-8"):
        m = PREFIX.match(raw.rstrip("\n"))
        if not m:
            continue
        t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        t0 = t if t0 is None else t0
        msg = m.group(2)
        if (g := TRAIN.match(msg)):
            it = int(g.group(2))
            lines.append({"iter": it, "epoch": int(g.group(1)), "loss": float(g.group(3)), "lr": float(g.group(4)),
                          "grad_norm": float(g.group(5)), "loss_scale": 1.0, "tokens_per_s": float(g.group(7)),
                          "ms_per_iter": float(g.group(6)), "mfu": None, "tokens": it * tokens_per_iter,
                          "time_s": round(t - t0, 3)})
        elif (g := TEST.match(msg)):
            it = int(g.group(2))
            lines.append({"iter": it, "epoch": int(g.group(1)), "test_loss": float(g.group(3)),
                          "tokens": it * tokens_per_iter, "time_s": round(t - t0, 3)})
    with open(out, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    for d in sys.argv[2:]:
        convert(d, int(sys.argv[1]))
