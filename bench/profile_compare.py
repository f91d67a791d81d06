# bench/profile_compare.py — `make bench-profile`: the per-op time of one training step, mingpt's
# (`bench_train train --profile 1`, kernels/backend_profile.h) next to PyTorch's (torch.profiler,
# bench/torch_profile.py), by category, for each config and dtype: where the gap is, op by op.
# Needs only Python 3's standard library; the PyTorch side runs under --torch-py.
#
#   python3 bench/profile_compare.py --bin build/bench/bench_train [--configs S,M] [--amps fp32,bf16]
#       [--quick] [--torch-py /usr/bin/python3] [--torch-threads 1+2] [--no-torch]
#       [--cache-dir build/bench-cache]
#
# Configs and dropout are bench/run_bench.py's. Per config and dtype: mingpt, then PyTorch eager
# and SDPA (where that torch has F.scaled_dot_product_attention), each in its own process, each
# printing its own table ("PROF" lines, shown as they come), then one table side by side: per
# category ms per step and share of the step, the ratio PyTorch / mingpt. Iterations: mingpt 2
# warm-up + 10 timed, PyTorch 2 + 5 (--quick: 1 + 3 and 1 + 2). Threads: mingpt OMP_NUM_THREADS
# (unset: every core); PyTorch --torch-threads "T+B", T torch threads and B OpenBLAS threads
# (default 1+every core: the GEMMs threaded, as mingpt's). docs/performance.md explains the table.
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, HERE)
from run_bench import CONFIGS, VOCAB, model_args, parse_kv  # noqa: E402

TORCH_MODES = (("eager", 0), ("sdpa", 1))
ROLES = ("c_attn", "attn_proj", "c_fc", "mlp_proj", "lm_head", "other")
# The categories in table order (the forward, the backward, the optimizer, memory), shared with
# bench/torch_profile.py; kernels/backend_profile.c names mingpt's.
ORDER = (["cast", "embedding.fwd", "layernorm.fwd", "residual.fwd"] + [f"matmul.fwd.{r}" for r in ROLES] +
         ["attention.fwd", "gelu.fwd", "dropout.fwd", "other.fwd", "crossentropy"] +
         [f"matmul.bwd.{r}" for r in ROLES] +
         ["attention.bwd", "gelu.bwd", "layernorm.bwd", "residual.bwd", "dropout.bwd", "embedding.bwd", "other.bwd",
          "clip", "optimizer", "zero", "copy", "other"])


class Failed(Exception):
    pass


def run(cmd, env_extra, what):
    env = dict(os.environ, **env_extra)
    print(f"-- {what}: {' '.join(cmd)}", flush=True)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    except OSError as e:
        raise Failed(f"cannot run {cmd[0]}: {e.strerror}")
    if p.returncode != 0:
        lines = [ln.strip() for ln in (p.stderr or p.stdout).splitlines() if ln.strip()]
        why = lines[-1] if lines else "no output"
        raise Failed(f"{'n/a' if p.returncode == 3 else 'FAILED'} (exit {p.returncode}: {why})")
    for ln in p.stdout.splitlines():
        if ln.startswith(("RESULT", "PROF")):
            print("   " + ln, flush=True)
    return p.stdout


def parse_profile(out):
    """(RESULT dict, {category: [ms/step, share%, calls/step]}, rest ms, step ms) of one table."""
    result, cats, rest, step = None, {}, 0.0, 0.0
    for ln in out.splitlines():
        if ln.startswith("RESULT"):
            result = parse_kv(ln)
        if not ln.startswith("PROF "):
            continue
        f = ln.split()
        if f[1] == "op":
            continue
        cat, calls, ms, share = f[2], f[3], float(f[4]), float(f[5])
        if cat == "rest":
            rest = ms
        elif cat == "step":
            step = ms
        else:
            row = cats.setdefault(cat, [0.0, 0.0, 0.0])
            row[0] += ms
            row[1] += share
            row[2] += float(calls)
    if result is None or step <= 0:
        raise Failed("no profile in the output")
    return result, cats, rest, step


def side_by_side(title, columns):
    """columns: [(label, cats, rest, step)], mingpt's first; prints one row per category, the
    ratio of each other column to mingpt's ("-" where either side has no such time)."""
    seen = {c for _, cats, _, _ in columns for c in cats}
    order = [c for c in ORDER if c in seen] + sorted(seen - set(ORDER))
    print(f"\n== {title}")
    head = f"{'category':<22}" + "".join(f" | {label:>24}" for label, *_ in columns)
    if len(columns) > 1:
        head += "".join(f" | {columns[k][0].split(' (')[0] + '/mingpt':>21}" for k in range(1, len(columns)))
    print(head)
    print(f"{'':<22}" + "".join(f" | {'ms/step':>10} {'share%':>7} {'calls':>5}" for _ in columns)
          + "".join(f" | {'':>21}" for _ in columns[1:]))

    def cell(ms, share, calls=None):
        return f" | {ms:>10.3f} {share:>7.2f} " + (f"{calls:>5.0f}" if calls is not None else f"{'-':>5}")

    def ratio(a, b):
        return f" | {a / b:>21.2f}" if a > 0 and b > 0 else f" | {'-':>21}"

    for c in order:
        line = f"{c:<22}"
        vals = []
        for _, cats, _, step in columns:
            ms, _, calls = cats.get(c, [0.0, 0.0, 0.0])
            vals.append(ms)
            line += cell(ms, 100 * ms / step if step > 0 else 0.0, calls)
        line += "".join(ratio(v, vals[0]) for v in vals[1:])
        print(line)
    for name, idx in (("(rest)", 2), ("(step)", 3)):
        line = f"{name:<22}"
        vals = []
        for col in columns:
            ms, step = col[idx], col[3]
            vals.append(ms)
            line += cell(ms, 100 * ms / step if step > 0 else 0.0)
        line += "".join(ratio(v, vals[0]) for v in vals[1:])
        print(line)


def main():
    ap = argparse.ArgumentParser(description="mingpt's per-op step profile next to PyTorch's")
    ap.add_argument("--bin", default="build/bench/bench_train")
    ap.add_argument("--configs", default="S,M")
    ap.add_argument("--amps", default="fp32,bf16")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--torch-py", default="/usr/bin/python3")
    ap.add_argument("--torch-threads", default=f"1+{os.cpu_count()}")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--cache-dir", default="build/bench-cache")
    a = ap.parse_args()
    names = [n for n in a.configs.split(",") if n]
    bad = [n for n in names if n not in CONFIGS]
    if bad:
        print(f"profile_compare: --configs: unknown config {bad[0]} (known: {', '.join(CONFIGS)})", file=sys.stderr)
        return 2
    amps = [x for x in a.amps.split(",") if x]
    if any(x not in ("fp32", "bf16") for x in amps):
        print(f"profile_compare: --amps: each must be fp32 or bf16 (got '{a.amps}')", file=sys.stderr)
        return 2
    m = re.fullmatch(r"(\d+)\+(\d+)", a.torch_threads)
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        print(f"profile_compare: --torch-threads must be T+B, two positive counts (got '{a.torch_threads}')",
              file=sys.stderr)
        return 2
    tt, bt = m.group(1), m.group(2)
    if not os.access(a.bin, os.X_OK):
        print(f"profile_compare: --bin: {a.bin} is not an executable (build it with make bench-build)",
              file=sys.stderr)
        return 2
    mg_iters, pt_iters = ((1, 3), (1, 2)) if a.quick else ((2, 10), (2, 5))
    failures = 0
    for name in names:
        c = CONFIGS[name]
        cache = os.path.abspath(os.path.join(a.cache_dir, "profile", name))
        os.makedirs(cache, exist_ok=True)
        for amp in amps:
            columns = []
            try:
                out = run([a.bin, "train"] + model_args(c) + ["--warmup", str(mg_iters[0]), "--iters",
                                                              str(mg_iters[1]), "--amp", amp, "--profile", "1"],
                          {"MINGPT_CACHE_DIR": cache}, f"mingpt {name} {amp}")
                r, cats, rest, step = parse_profile(out)
                columns.append((f"mingpt ({float(r['ms_median']):.1f} ms)", cats, rest, step))
            except Failed as e:
                print(f"mingpt {name} {amp}: {e}", flush=True)
                failures += 1
                continue
            for mode, sdpa in ([] if a.no_torch else TORCH_MODES):
                cmd = [a.torch_py, os.path.join(HERE, "torch_profile.py"), "--torch_threads", tt, "--sdpa", str(sdpa),
                       "--amp", amp] + model_args(c) + ["--warmup", str(pt_iters[0]), "--iters", str(pt_iters[1])]
                try:
                    out = run(cmd, {"OMP_NUM_THREADS": tt, "OPENBLAS_NUM_THREADS": bt}, f"pytorch {name} {amp} {mode}")
                    r, cats, rest, step = parse_profile(out)
                    columns.append((f"torch {mode} ({float(r['ms_median_unprofiled']):.1f} ms)", cats, rest, step))
                except Failed as e:
                    print(f"pytorch {name} {amp} {mode}: {e}", flush=True)
                    if not str(e).startswith("n/a"):
                        failures += 1
            side_by_side(f"{name} {amp}: {c['n_layer']}/{c['n_head']}/{c['n_embd']}, block {c['block']}, "
                         f"batch {c['batch']}, dropout {c['dropout']}, vocab {VOCAB} "
                         f"(column heads: the unprofiled step; rows: the profiled one)", columns)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
