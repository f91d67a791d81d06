# bench/run_bench.py — `make bench-speed` (part of `make bench`): mingpt against PyTorch on this
# machine, in one run. Run with Debian's python (/usr/bin/python3, python3-torch).
#
#   /usr/bin/python3 bench/run_bench.py --bin build/bench/bench_train [--configs S,M,T] [--quick]
#
# For each config (S: nanoGPT's CPU config, M: nanoGPT's shakespeare-char model, T: the
# tutorial's model; each with its own dropout), in separate processes:
#   * mingpt: warm-up iterations, then timed ones (bench/bench_train.c): median ms/iter,
#     tokens/s, MFU against the sgemm peak measured at the start of this run, peak RSS against
#     the memory the config needs (params + grads + AdamW m, v + activations);
#   * PyTorch (bench/torch_speed.py): the same model, batch and optimizer with
#     torch threads 1 + BLAS threads 2, and torch threads 2 + BLAS threads 1; the better counts;
#   * the ratio of tokens/s, mingpt / PyTorch.
# Then sampling chars/s of the S model on one core (OMP_NUM_THREADS=1, KV cache).
# When OPENBLAS_CORETYPE is set, everything is repeated without it (labelled). With --bin-dnnl
# (the bench built on oneDNN's sgemm), the peak and mingpt's runs are repeated with it, to keep
# the GEMM library choice a measured one.
import argparse
import os
import re
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

CONFIGS = {
    # name: n_layer, n_head, n_embd, block, batch, dropout, (warm-up, iters) mingpt, (warm-up, iters) torch
    "S": dict(n_layer=4, n_head=4, n_embd=128, block=64, batch=12, dropout=0.0, mg=(5, 60), pt=(5, 30)),
    "M": dict(n_layer=6, n_head=6, n_embd=384, block=256, batch=8, dropout=0.2, mg=(2, 15), pt=(2, 8)),
    "T": dict(n_layer=8, n_head=8, n_embd=512, block=128, batch=8, dropout=0.1, mg=(2, 15), pt=(2, 8)),
}
TARGETS = {"S": 2.0, "M": 1.5, "T": 1.3}
VOCAB = 65   # tiny-shakespeare's character vocabulary


def parse_result(out):
    for line in out.splitlines():
        if line.startswith("RESULT"):
            return {k: v for k, v in re.findall(r"(\w+)=(\S+)", line)}
    raise RuntimeError("no RESULT line in:\n" + out)


def cpu_busy_fraction(seconds=1.0):
    """Fraction of all CPUs busy over `seconds` (this script is idle meanwhile)."""
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]
    t0, i0 = snap()
    time.sleep(seconds)
    t1, i1 = snap()
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


def wait_idle(label, max_wait=120):
    busy = cpu_busy_fraction()
    waited = 0
    while busy > 0.10 and waited < max_wait:
        time.sleep(4)
        waited += 5
        busy = cpu_busy_fraction()
    if busy > 0.10:
        print(f"  WARNING: the machine is {100 * busy:.0f}% busy with other work before {label}; "
              f"timings are unreliable", flush=True)
    return busy


def busy_cpu_seconds():
    """CPU seconds spent by everything on the machine so far (/proc/stat, non-idle)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def run(cmd, env_extra=None, env_drop=(), what="", attempts=3):
    """Runs one measurement; repeats it (up to `attempts` times) when other processes took
    more than 15% of a core while it ran, since on a 2-core machine that skews the timing."""
    env = dict(os.environ)
    for k in env_drop:
        env.pop(k, None)
    env.update(env_extra or {})
    for attempt in range(attempts):
        b0, c0, t0 = busy_cpu_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN), time.time()
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        b1, c1, t1 = busy_cpu_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN), time.time()
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited with {p.returncode}:\n{p.stdout}{p.stderr}")
        child = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
        other = max(0.0, (b1 - b0) - child) / max(1e-3, t1 - t0)
        if other <= 0.15:
            return parse_result(p.stdout)
        print(f"  ({what}: other processes used {100 * other:.0f}% of a core meanwhile; "
              f"{'measuring again' if attempt + 1 < attempts else 'keeping this measurement, unreliable'})",
              flush=True)
        wait_idle(what)
    return parse_result(p.stdout)


def model_args(c):
    return ["--n_layer", str(c["n_layer"]), "--n_head", str(c["n_head"]), "--n_embd", str(c["n_embd"]),
            "--block", str(c["block"]), "--batch", str(c["batch"]), "--vocab", str(VOCAB),
            "--dropout", str(c["dropout"])]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bench/bench_train")
    ap.add_argument("--bin-dnnl", default=None, help="bench_train built with oneDNN's sgemm")
    ap.add_argument("--configs", default="S,M,T")
    ap.add_argument("--quick", action="store_true", help="fewer iterations (smoke test)")
    ap.add_argument("--no-torch", action="store_true")
    a = ap.parse_args()
    names = [n for n in a.configs.split(",") if n]
    coretype = os.environ.get("OPENBLAS_CORETYPE")
    threads = os.environ.get("OMP_NUM_THREADS", str(os.cpu_count()))
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    print(f"machine: {cpu}, {os.cpu_count()} CPUs; OMP_NUM_THREADS={threads}; "
          f"OPENBLAS_CORETYPE={coretype if coretype else '(unset)'}", flush=True)
    print("FLOPs per iteration = B*T * (6*N_linear + 12*L*C*T), N_linear = L*12*C^2 + V*C "
          "(Linear weights incl. lm_head; attention not discounted for the causal mask)", flush=True)

    # (label, bench binary, env additions, env removals, run PyTorch too)
    variants = [("env", a.bin, {}, (), not a.no_torch)]
    if coretype:
        variants.append(("OPENBLAS_CORETYPE unset", a.bin, {}, ("OPENBLAS_CORETYPE",), not a.no_torch))
    if a.bin_dnnl and os.path.exists(a.bin_dnnl):
        variants.append(("oneDNN sgemm", a.bin_dnnl, {}, (), False))

    results, torch_res = {}, {}
    for vname, binary, extra, drop, with_torch in variants:
        label = "" if vname == "env" else f" [{vname}]"
        wait_idle("the sgemm peak")
        r = run([binary, "sgemm", "--n", "4096", "--reps", "2" if a.quick else "4"], extra, drop, "sgemm peak")
        peak = float(r["gflops"])
        core = f", OpenBLAS core {r['openblas_core']}" if r["library"] == "openblas" else ""
        print(f"sgemm peak{label}: {peak:.1f} GFLOP/s ({r['library']} sgemm 4096^3, {r['threads']} threads{core})",
              flush=True)
        for n in names:
            c = CONFIGS[n]
            w, it = (1, 3) if a.quick else c["mg"]
            wait_idle(f"mingpt {n}")
            r = run([binary, "train"] + model_args(c) + ["--warmup", str(w), "--iters", str(it)], extra, drop,
                    f"mingpt {n}")
            ms, tok = float(r["ms_median"]), float(r["tok_s"])
            mfu = float(r["flops_iter"]) / (ms * 1e-3) / (peak * 1e9)
            rss, need = float(r["rss_kib"]) / 1024, float(r["need_kib"]) / 1024
            results[(vname, n)] = dict(ms=ms, tok=tok, mfu=mfu, rss=rss, need=need, params=int(r["params"]))
            print(f"mingpt {n}{label}: L{c['n_layer']} H{c['n_head']} C{c['n_embd']} T{c['block']} "
                  f"B{c['batch']} dropout {c['dropout']} ({int(r['params']) / 1e6:.2f}M params): "
                  f"{ms:.1f} ms/iter (median of {it}), {tok:.0f} tok/s, MFU {100 * mfu:.1f}%, "
                  f"peak RSS {rss:.1f} MiB = {rss / need:.2f}x the {need:.1f} MiB it needs", flush=True)
        if not with_torch:
            continue
        for n in names:
            c = CONFIGS[n]
            w, it = (1, 3) if a.quick else c["pt"]
            best = None
            for tt, bt in ((1, 2), (2, 1)):
                wait_idle(f"PyTorch {n}")
                env = dict(extra, OMP_NUM_THREADS=str(tt), OPENBLAS_NUM_THREADS=str(bt))
                r = run(["/usr/bin/python3", os.path.join(HERE, "torch_speed.py"), "--torch_threads", str(tt)]
                        + model_args(c) + ["--warmup", str(w), "--iters", str(it)], env, drop, f"PyTorch {n}")
                ms = float(r["ms_median"])
                print(f"pytorch {n}{label}: torch threads {tt}, BLAS threads {bt}: {ms:.1f} ms/iter "
                      f"(median of {it}), {float(r['tok_s']):.0f} tok/s, peak RSS "
                      f"{float(r['rss_kib']) / 1024:.0f} MiB", flush=True)
                if best is None or ms < best[0]:
                    best = (ms, float(r["tok_s"]), tt, bt)
            torch_res[(vname, n)] = best

    # sampling, S model, one core
    wait_idle("sampling")
    c = CONFIGS["S"]
    r = run([a.bin, "sample", "--n_layer", str(c["n_layer"]), "--n_head", str(c["n_head"]),
             "--n_embd", str(c["n_embd"]), "--block", str(c["block"]), "--vocab", str(VOCAB),
             "--tokens", "500"], {"OMP_NUM_THREADS": "1"}, (), "sampling")
    sample_in, sample_all = float(r["in_window_chars_s"]), float(r["chars_s"])

    print()
    print("| config | mingpt ms/iter | tok/s | MFU | peak RSS / need | PyTorch ms/iter (threads torch+BLAS) | ratio | target |")
    print("|---|---|---|---|---|---|---|---|")
    for vname, _, _, _, _ in variants:
        for n in names:
            m = results[(vname, n)]
            tag = n if vname == "env" else f"{n} [{vname}]"
            tkey = (vname, n) if (vname, n) in torch_res else ("env", n)
            if tkey in torch_res:
                tms, ttok, tt, bt = torch_res[tkey]
                ratio = m["tok"] / ttok
                tstr = f"{tms:.1f} ({tt}+{bt})" + ("" if tkey[0] == vname else " [env]")
                verdict = f">= {TARGETS[n]}: {'met' if ratio >= TARGETS[n] else 'MISSED'}"
                rstr = f"{ratio:.2f}"
            else:
                tstr, rstr, verdict = "-", "-", "-"
            print(f"| {tag} | {m['ms']:.1f} | {m['tok']:.0f} | {100 * m['mfu']:.1f}% | "
                  f"{m['rss']:.0f}/{m['need']:.0f} MiB = {m['rss'] / m['need']:.2f}x | {tstr} | {rstr} | {verdict} |")
    print()
    if ("env", "M") in results:
        mfu = results[("env", "M")]["mfu"]
        print(f"MFU on M: {100 * mfu:.1f}% of the measured sgemm peak (target >= 60%: "
              f"{'met' if mfu >= 0.6 else 'MISSED'})")
    worst = max((results[k]["rss"] / results[k]["need"] for k in results if k[0] == "env"), default=0)
    print(f"peak RSS: at most {worst:.2f}x what the config needs (target <= 1.25x: "
          f"{'met' if worst <= 1.25 else 'MISSED'})")
    print(f"sampling, S model, one core (KV cache): {sample_in:.0f} chars/s while the context fits "
          f"block_size; {sample_all:.0f} chars/s over 500 characters (past block_size minGPT's "
          f"cropping recomputes the window per character) (target >= 5000: "
          f"{'met' if sample_in >= 5000 else 'MISSED'} in-window, "
          f"{'met' if sample_all >= 5000 else 'MISSED'} over 500)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
