# bench/run_bench.py — `make bench-speed` (part of `make bench`): mingpt against PyTorch on this
# machine, in one run. Needs only Python 3's standard library; the PyTorch side runs under each
# interpreter given with --torch-py (Debian's /usr/bin/python3 = torch 1.13 by default).
#
#   python3 bench/run_bench.py --bin build/bench/bench_train [--configs S,M,T] [--quick]
#       [--torch-py /usr/bin/python3,build/torch-venv/bin/python] [--torch-modes eager,sdpa,...]
#       [--no-torch] [--no-recompute] [--recompute-batch 216] [--cache-dir build/bench-cache] [--no-wait]
#       [--pairs 3]
#
# Steps, every measurement in its own process (bench/bench_train.c, bench/torch_speed.py):
#   1. the machine's environment: CPU model and flags, threads, OPENBLAS_CORETYPE, torch versions,
#      the GEMM line (libraries and OpenBLAS core);
#   2. sgemm GFLOP/s of every GEMM implementation at 4096^3; MFU is against the best of them, over
#      both environments (one measurement can come out 5-10% low on a shared machine);
#   3. per config (S: nanoGPT's CPU config, M: nanoGPT's shakespeare-char model, T: the tutorial's
#      model; each with its own dropout): one untimed warm-up run (the GEMM calibration, cached
#      under --cache-dir per config), then mingpt fp32: median ms/iter, tok/s, MFU, peak RSS
#      against the memory the config needs, and the GEMM chosen per shape class with each
#      implementation's GFLOP/s at the model's shapes, and the library GEMMs' share of the step
#      (bench_train's gemm_share: what the step's MFU could be with everything else free);
#   4. PyTorch, per interpreter: eager, F.scaled_dot_product_attention, torch.compile and compile
#      + SDPA where that torch has them; thread settings: torch with MKL uses all threads, torch
#      on OpenBLAS (Debian's) both torch 1 + BLAS n and torch n + BLAS 1. The fastest mode over
#      all interpreters is "best PyTorch";
#   5. bf16 (S, M): mingpt --amp bf16 against mingpt fp32 and against PyTorch's
#      torch.autocast("cpu", dtype=torch.bfloat16) (eager and compile);
#   5b. paired rounds (--pairs N, default 3): per config and precision, mingpt and PyTorch's best
#      mode of steps 4-5 measured again back to back, N times, the order alternating (mingpt
#      first, then PyTorch first, ...); each round's ratio compares two runs a few seconds apart,
#      and the goals take the median of the rounds' ratios. Single runs minutes apart are not
#      enough on a virtual machine: on one, the same mingpt run took 12.4 or 15.5-16.8 ms in runs
#      minutes apart, in swings the guest cannot see (no steal time, nothing else running);
#   6. activation recomputation (--no-recompute skips it): the tutorial config (8/8/512, block 128,
#      batch 216, dropout 0.1), 1 warm-up + 2 timed iterations, with and without --checkpointing 1;
#   7. sampling chars/s of the S model on one core (KV cache);
#   8. tables and the goals (RATIO_GOALS ... SAMPLE_GOAL below), met or MISSED.
# Steps 2, 3 and mingpt's bf16 runs are repeated, labelled, in a second environment: with OPENBLAS_CORETYPE unset
# when it is set, else with OPENBLAS_CORETYPE=Prescott (what OpenBLAS falls back to on a CPU it
# does not know; the GEMM dispatch should route around it). The unlabelled runs never set it.
import argparse
import dataclasses
import glob
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

CONFIGS = {
    # name: n_layer, n_head, n_embd, block, batch, dropout, (warm-up, iters) mingpt, (warm-up, iters) torch
    "S": dict(n_layer=4, n_head=4, n_embd=128, block=64, batch=12, dropout=0.0, mg=(5, 60), pt=(5, 30)),
    "M": dict(n_layer=6, n_head=6, n_embd=384, block=256, batch=8, dropout=0.2, mg=(2, 15), pt=(2, 8)),
    "T": dict(n_layer=8, n_head=8, n_embd=512, block=128, batch=8, dropout=0.1, mg=(2, 15), pt=(2, 8)),
}
# The tutorial config (gpt2_train_cfg.yaml's model and batch) for activation recomputation.
RECOMPUTE = dict(n_layer=8, n_head=8, n_embd=512, block=128, batch=216, dropout=0.1, mg=(1, 2))
BF16_CONFIGS = ("S", "M")
VOCAB = 65   # tiny-shakespeare's character vocabulary

# Goals, each checked in step 8.
RATIO_GOALS = {"S": 2.0, "M": 1.5, "T": 1.3}     # mingpt tok/s over best PyTorch tok/s
MFU_GOAL_M = 0.70           # MFU on M against the best sgemm GFLOP/s measured in the run
BF16_GOAL_M = 1.5           # mingpt bf16 over fp32 on M, where bf16 runs on bf16 hardware
RECOMPUTE_RSS_CUT = 0.50    # peak RSS cut by at least this fraction
RECOMPUTE_SLOWDOWN = 1.40   # at most this much time per iteration
RSS_GOAL = 1.25             # peak RSS over the memory the config needs
BF16_RATIO_GOAL = 1.3       # mingpt bf16 tok/s over PyTorch's best bf16 autocast, on bf16 hardware
SAMPLE_GOAL = 5000          # chars/s on one core

# PyTorch modes: name, --sdpa, --compile. bf16 (autocast) runs the modes in BF16_TORCH_MODES.
TORCH_MODES = {"eager": (0, 0), "sdpa": (1, 0), "compile": (0, 1), "compile+sdpa": (1, 1)}
BF16_TORCH_MODES = ("eager", "compile")
COMPILE_WARMUP = 3          # torch.compile compiles in its first iterations

CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


class MeasureError(Exception):
    """A measurement that did not produce a result; str() is what the tables show."""


@dataclasses.dataclass
class Variant:
    label: str          # "" for the machine's own environment
    slug: str           # directory name under --cache-dir
    extra: dict         # environment additions
    drop: tuple         # environment removals


@dataclasses.dataclass
class Opts:
    wait: bool          # wait for an idle machine and re-measure when other work interfered
    quick: bool
    cache_dir: str


# ---------------------------------------------------------------------------------------------
# Running one measurement

def parse_kv(line):
    return dict(re.findall(r"([\w-]+)=(\S+)", line))


def parse_result(out):
    for line in out.splitlines():
        if line.startswith("RESULT"):
            return parse_kv(line)
    raise MeasureError("no RESULT line")


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


def wait_idle(label, opts, max_wait=120):
    if not opts.wait:
        return
    busy = cpu_busy_fraction()
    waited = 0
    while busy > 0.10 and waited < max_wait:
        time.sleep(4)
        waited += 5
        busy = cpu_busy_fraction()
    if busy > 0.10:
        print(f"  WARNING: the machine is {100 * busy:.0f}% busy with other work before {label}; "
              f"timings are unreliable", flush=True)


def busy_cpu_seconds():
    """CPU seconds spent by everything on the machine so far (/proc/stat, non-idle)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def run(cmd, opts, what, extra=None, drop=()):
    """Runs one measurement after waiting for an idle machine and returns its stdout; repeats it
    (3 attempts) when other processes took more than 15% of a core while it ran, since on a
    2-core machine that skews the timing. Raises MeasureError when it fails."""
    env = dict(os.environ)
    for k in drop:
        env.pop(k, None)
    env.update(extra or {})
    attempts = 3 if opts.wait else 1
    for attempt in range(attempts):
        wait_idle(what, opts)
        b0, c0, t0 = busy_cpu_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN), time.time()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        except OSError as e:
            raise MeasureError(f"cannot run {cmd[0]}: {e.strerror}")
        b1, c1, t1 = busy_cpu_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN), time.time()
        if p.returncode != 0:
            # bench_train says what is wrong first; Python's last line is the exception
            lines = [ln.strip() for ln in (p.stderr or p.stdout).splitlines() if ln.strip()]
            why = (lines[-1] if "Traceback" in p.stderr else lines[0]) if lines else "no output"
            raise MeasureError(f"{'n/a' if p.returncode == 3 else 'FAILED'} (exit {p.returncode}: {why})")
        child = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
        other = max(0.0, (b1 - b0) - child) / max(1e-3, t1 - t0)
        if not opts.wait or other <= 0.15:
            return p.stdout
        print(f"  ({what}: other processes used {100 * other:.0f}% of a core meanwhile; "
              f"{'measuring again' if attempt + 1 < attempts else 'keeping this measurement, unreliable'})",
              flush=True)
    return p.stdout


def model_args(c):
    return ["--n_layer", str(c["n_layer"]), "--n_head", str(c["n_head"]), "--n_embd", str(c["n_embd"]),
            "--block", str(c["block"]), "--batch", str(c["batch"]), "--vocab", str(VOCAB),
            "--dropout", str(c["dropout"])]


def shape_str(c):
    return f"L{c['n_layer']} H{c['n_head']} C{c['n_embd']} T{c['block']} B{c['batch']} dropout {c['dropout']}"


# ---------------------------------------------------------------------------------------------
# mingpt measurements

def cache_env(opts, variant, name, fresh=False):
    """MINGPT_CACHE_DIR for one config in one environment: its own directory, so the classes a
    run prints are exactly that config's. fresh: remove the calibration files left there."""
    d = os.path.join(opts.cache_dir, variant.slug, name)
    os.makedirs(d, exist_ok=True)
    if fresh:
        for f in glob.glob(os.path.join(d, "gemm-*.txt")):
            os.remove(f)
    return dict(variant.extra, MINGPT_CACHE_DIR=os.path.abspath(d))


def measure_sgemm(binary, opts, variant):
    """GFLOP/s of every GEMM implementation at 4096^3: dict(desc, core, impls {name: GFLOP/s}, best)."""
    out = run([binary, "sgemm", "--n", "4096", "--reps", "2" if opts.quick else "4"], opts,
              f"sgemm peak{variant.label}", variant.extra, variant.drop)
    r = parse_result(out)
    desc = next((ln[5:] for ln in out.splitlines() if ln.startswith("GEMM ")), "?")
    impls = {k: float(v) for k, v in r.items()
             if k not in ("library", "openblas_core", "n", "threads", "gflops")}
    return dict(desc=desc, core=r["openblas_core"], impls=impls, best=float(r["gflops"]), library=r["library"])


def parse_gemm_classes(out):
    classes = []
    for line in out.splitlines():
        if line.startswith("GEMMCLASS "):
            kv = parse_kv(line)
            fixed = {k: kv.pop(k) for k in ("op", "class", "timed", "threads", "impl")}
            fixed["gflops"] = {k: float(v) for k, v in kv.items()}
            classes.append(fixed)
    return classes


def warm_up(binary, opts, variant, name, c):
    """One untimed iteration, so the GEMM calibration of this config's classes never lands in
    a timed run (it is cached in the config's directory). Starts from an empty cache."""
    run([binary, "train"] + model_args(c) + ["--warmup", "0", "--iters", "1"], opts,
        f"warm-up {name}{variant.label}", cache_env(opts, variant, name, fresh=True), variant.drop)


def measure_mingpt(binary, opts, variant, name, c, peak, amp="fp32", checkpointing=False, iters=None):
    """One timed mingpt run: dict(ms, tok, mfu, rss, need, lowp_fast, classes) or dict(error)."""
    w, it = iters or ((1, 3) if opts.quick else c["mg"])
    extra = ["--warmup", str(w), "--iters", str(it), "--amp", amp]
    if checkpointing:
        extra += ["--checkpointing", "1"]
    what = f"mingpt {name} {amp}{' checkpointing' if checkpointing else ''}{variant.label}"
    try:
        out = run([binary, "train"] + model_args(c) + extra, opts, what,
                  cache_env(opts, variant, name), variant.drop)
        r = parse_result(out)
    except MeasureError as e:
        print(f"{what}: {e}", flush=True)
        return dict(error=str(e))
    ms = float(r["ms_median"])
    res = dict(ms=ms, tok=float(r["tok_s"]), mfu=float(r["flops_iter"]) / (ms * 1e-3) / (peak * 1e9) if peak else 0,
               rss=float(r["rss_kib"]) / 1024, need=float(r["need_kib"]) / 1024,
               lowp_fast=int(r.get("lowp_fast", "0")), params=int(r["params"]), classes=parse_gemm_classes(out),
               gemm_share=float(r.get("gemm_share", "0")), gemm_gflops=float(r.get("gemm_gflops", "0")))
    print(f"{what}: {shape_str(c)} ({res['params'] / 1e6:.2f}M params): {ms:.1f} ms/iter (median of {it}), "
          f"{res['tok']:.0f} tok/s, " + (f"MFU {100 * res['mfu']:.1f}%" if amp == "fp32" else
          f"{100 * res['mfu']:.1f}% of the fp32 sgemm peak (not an MFU: bf16 has its own)") + f", peak RSS {res['rss']:.1f} MiB "
          f"(needs {res['need']:.1f})" + (f", lowp_fast={res['lowp_fast']}" if amp != "fp32" else ""), flush=True)
    return res


def measure_sampling(binary, opts):
    """chars/s of the S model on one core: (in-window, over 500 characters), or a MeasureError text."""
    c = CONFIGS["S"]
    args = [binary, "sample", "--n_layer", str(c["n_layer"]), "--n_head", str(c["n_head"]),
            "--n_embd", str(c["n_embd"]), "--block", str(c["block"]), "--vocab", str(VOCAB)]
    env = dict(cache_env(opts, Variant("", "env", {}, ()), "sample", fresh=True), OMP_NUM_THREADS="1")
    try:
        run(args + ["--tokens", "50"], opts, "sampling warm-up", env)
        r = parse_result(run(args + ["--tokens", "500"], opts, "sampling", env))
    except MeasureError as e:
        return str(e)
    return float(r["in_window_chars_s"]), float(r["chars_s"])


# ---------------------------------------------------------------------------------------------
# PyTorch measurements

def probe_torch(py, opts):
    """dict(version, sdpa, compile, mkl) of one interpreter's torch, or dict(error)."""
    try:
        r = parse_result(run([py, os.path.join(HERE, "torch_speed.py"), "--probe", "1"],
                             Opts(False, opts.quick, opts.cache_dir), f"probe {py}"))
    except MeasureError as e:
        return dict(error=str(e))
    return dict(version=r["version"], python=r["python"], sdpa=int(r["sdpa"]), compile=int(r["compile"]),
                mkl=int(r["mkl"]))


def thread_settings(probe, threads):
    """(torch threads, BLAS threads or None): torch with MKL runs its GEMMs on its own threads;
    torch on OpenBLAS (Debian's) has two pools, so both splits are measured."""
    if probe["mkl"] or threads == 1:
        return [(threads, None)]
    return [(1, threads), (threads, 1)]


def measure_torch(py, probe, opts, name, c, mode, tt, bt, amp, inductor_dir=None):
    """One PyTorch run: a row dict with ms, tok, compile_s, rss, or status 'n/a ...' / 'FAILED ...'.
    inductor_dir: torch.compile's cache there (kept; the paired rounds reuse one), else a fresh one."""
    sdpa, comp = TORCH_MODES[mode]
    row = dict(config=name, py=py, version=probe.get("version", "?"), mode=mode, amp=amp,
               threads=f"{tt}+{bt}" if bt else f"{tt}", status="")
    if "error" in probe:
        return dict(row, status=probe["error"])
    missing = [f for f, on in (("sdpa", sdpa), ("compile", comp)) if on and not probe[f]]
    if missing:
        return dict(row, status=f"n/a (torch {probe['version']} has no {' or '.join(missing)})")
    w, it = (1, 3) if opts.quick else c["pt"]
    if comp:
        w = max(w, COMPILE_WARMUP)
    env = {"OMP_NUM_THREADS": str(tt)}
    if bt:
        env["OPENBLAS_NUM_THREADS"] = str(bt)
    cmd = ([py, os.path.join(HERE, "torch_speed.py"), "--torch_threads", str(tt), "--sdpa", str(sdpa),
            "--compile", str(comp), "--amp", amp] + model_args(c) + ["--warmup", str(w), "--iters", str(it)])
    what = f"pytorch {name} {amp} {mode} (torch {probe['version']}, threads {row['threads']})"
    inductor = None
    if comp and inductor_dir:
        env["TORCHINDUCTOR_CACHE_DIR"] = inductor_dir
    elif comp:
        # a fresh Inductor cache per measurement, so compile_s is a cold compile (unless run()
        # measures again), and nothing lands in /tmp
        os.makedirs(opts.cache_dir, exist_ok=True)
        inductor = env["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-", dir=opts.cache_dir)
    try:
        r = parse_result(run(cmd, opts, what, env))
    except MeasureError as e:
        print(f"{what}: {e}", flush=True)
        return dict(row, status=str(e))
    finally:
        if inductor:
            shutil.rmtree(inductor, ignore_errors=True)
    row.update(ms=float(r["ms_median"]), tok=float(r["tok_s"]), compile_s=float(r["compile_s"]),
               rss=float(r["rss_kib"]) / 1024)
    print(f"{what}: {row['ms']:.1f} ms/iter (median of {it}), {row['tok']:.0f} tok/s"
          + (f", compile {row['compile_s']:.1f} s" if comp else ""), flush=True)
    return row


def best_torch(rows, name, amp):
    ok = [r for r in rows if r["config"] == name and r["amp"] == amp and not r["status"]]
    return min(ok, key=lambda r: r["ms"]) if ok else None


def torch_label(r):
    return f"{r['mode']}, torch {r['version']}, threads {r['threads']}"


# ---------------------------------------------------------------------------------------------
# Output

def print_table(title, header, rows):
    """One markdown table (pasteable into docs/performance.md)."""
    print(f"\n{title}\n", flush=True)
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(str(x).replace("|", "\\|") for x in r) + " |")
    sys.stdout.flush()


def verdict(ok):
    return "met" if ok else "MISSED"


def cpu_info():
    model, flags = "?", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and model == "?":
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    return model, flags


def gemm_cell(m):
    """The step's library GEMMs: their share of the step's time and their own GFLOP/s there."""
    return f"{100 * m['gemm_share']:.0f}%, {m['gemm_gflops']:.0f}" if m.get("gemm_gflops") else "-"


def gemm_floor(m):
    """What the GEMMs alone cost: their ms per iteration, and the MFU the step would have if nothing
    else took any time (the model's FLOPs over the GEMMs' time, against the sgemm peak)."""
    gemm_ms = m["gemm_share"] * m["ms"]
    return gemm_ms, (m["mfu"] / m["gemm_share"] if m["gemm_share"] > 0 else 0)


def gemm_rows(classes):
    impls = list(classes[0]["gflops"]) if classes else []
    rows = [[k["op"], k["class"], k["timed"], k["threads"], k["impl"]]
            + [f"{k['gflops'][i]:.1f}" if k["gflops"].get(i, 0) > 0 else "-" for i in impls] for k in classes]
    return impls, rows


def error_of(*results):
    """The first error among measurement results (dicts), or None."""
    return next((r["error"] for r in results if "error" in r), None)




# ---------------------------------------------------------------------------------------------
# The steps

def environment(pys, opts):
    """Step 1: prints the machine's own environment; returns (threads, torch probes, variants)."""
    coretype = os.environ.get("OPENBLAS_CORETYPE")
    threads = int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count())
    model, flags = cpu_info()
    probes = {py: probe_torch(py, opts) for py in pys}
    print(f"machine: {model}, {os.cpu_count()} CPUs; flags: "
          + ", ".join(f"{f} {'yes' if f in flags else 'no'}" for f in CPU_FLAGS))
    print(f"threads: {threads} (OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '(unset)')}); "
          f"OPENBLAS_CORETYPE={coretype if coretype else '(unset)'}")
    for py, p in probes.items():
        print(f"PyTorch: {py}: " + (p["error"] if "error" in p else
              f"torch {p['version']} (Python {p['python']}; SDPA {'yes' if p['sdpa'] else 'no'}, "
              f"torch.compile {'yes' if p['compile'] else 'no'}, BLAS {'MKL' if p['mkl'] else 'not MKL (OpenBLAS)'})"))
    print("FLOPs per iteration = B*T * (6*N_linear + 12*L*C*T), N_linear = L*12*C^2 + V*C "
          "(Linear weights incl. lm_head; attention not discounted for the causal mask)", flush=True)
    variants = [Variant("", "env", {}, ())]
    if coretype:
        variants.append(Variant(" [OPENBLAS_CORETYPE unset]", "coretype-unset", {}, ("OPENBLAS_CORETYPE",)))
    else:
        variants.append(Variant(" [OPENBLAS_CORETYPE=Prescott]", "coretype-prescott",
                                {"OPENBLAS_CORETYPE": "Prescott"}, ()))
    return threads, probes, variants


def amps_of(name):
    return ("fp32", "bf16") if name in BF16_CONFIGS else ("fp32",)


def mingpt_side(binary, opts, variants, names):
    """Steps 2, 3 and mingpt's bf16 runs, in each environment: (sgemm {slug: ...},
    results {(slug, config, amp): ...})."""
    sgemm, mg = {}, {}
    for v in variants:
        try:
            sgemm[v.slug] = measure_sgemm(binary, opts, v)
            print(f"GEMM{v.label}: {sgemm[v.slug]['desc']}", flush=True)
        except MeasureError as e:
            sgemm[v.slug] = dict(error=str(e), best=0.0, impls={})
            print(f"sgemm peak{v.label}: {e}", flush=True)
        for n in names:
            try:
                warm_up(binary, opts, v, n, CONFIGS[n])
            except MeasureError as e:
                print(f"warm-up {n}{v.label}: {e}", flush=True)
            for amp in amps_of(n):
                mg[(v.slug, n, amp)] = measure_mingpt(binary, opts, v, n, CONFIGS[n], sgemm[v.slug]["best"], amp)
    return sgemm, mg


def peak_all(sgemm, mg):
    """MFU against the best sgemm GFLOP/s of the whole run: every environment measures oneDNN the
    same way, and one 4096^3 measurement can come out 5-10% low on a shared machine (which would
    flatter the MFU). Rescales each result's MFU from its environment's best to that one."""
    peak = max((s["best"] for s in sgemm.values()), default=0.0)
    for (slug, _, _), m in mg.items():
        own = sgemm[slug]["best"]
        if "error" not in m and own > 0 and peak > 0:
            m["mfu"] *= own / peak
    for s in sgemm.values():
        s["run_best"] = peak


def torch_side(pys, probes, opts, names, modes, threads):
    """Steps 4 and PyTorch's bf16 runs, machine's own environment: one row per measurement."""
    rows = []
    for n in names:
        for amp in amps_of(n):
            for py in pys:
                settings = thread_settings(probes[py], threads) if "error" not in probes[py] else [(threads, None)]
                for mode in modes:
                    if amp == "bf16" and mode not in BF16_TORCH_MODES:
                        continue
                    for tt, bt in settings:
                        rows.append(measure_torch(py, probes[py], opts, n, CONFIGS[n], mode, tt, bt, amp))
    return rows


def recompute_side(binary, opts, variant, c, peak):
    """Step 6: {False: without, True: with --checkpointing 1}, each a measure_mingpt result."""
    try:
        warm_up(binary, opts, variant, "R", c)
    except MeasureError as e:
        print(f"warm-up of the recomputation config: {e}", flush=True)
    return {ck: measure_mingpt(binary, opts, variant, "R", c, peak, iters=c["mg"], checkpointing=ck)
            for ck in (False, True)}


def paired_side(binary, opts, variant, names, mg, trows, probes, sgemm, rounds):
    """Step 5b: {(config, amp): dict(mg=[ms...], pt=[ms...], ratios=[...], best=<torch row>)} for
    every config and precision with a mingpt result and a PyTorch one; rounds alternate the order."""
    out = {}
    for n in names:
        for amp in amps_of(n):
            best = best_torch(trows, n, amp)
            if not best or "error" in mg.get(("env", n, amp), {"error": 1}):
                continue
            tt, bt = (int(x) for x in best["threads"].split("+")) if "+" in best["threads"] else (
                int(best["threads"]), None)
            os.makedirs(opts.cache_dir, exist_ok=True)
            inductor = tempfile.mkdtemp(prefix="inductor-pairs-", dir=opts.cache_dir)
            r = dict(mg=[], pt=[], ratios=[], best=best)
            try:
                for k in range(rounds):
                    print(f"paired round {k + 1} of {rounds}, {n} {amp}: "
                          + ("mingpt first" if k % 2 == 0 else "PyTorch first"), flush=True)
                    ms = {}
                    for side in (("mg", "pt") if k % 2 == 0 else ("pt", "mg")):
                        if side == "mg":
                            m = measure_mingpt(binary, opts, variant, n, CONFIGS[n], sgemm[variant.slug]["best"], amp)
                            ms[side] = None if "error" in m else m["ms"]
                        else:
                            t = measure_torch(best["py"], probes[best["py"]], opts, n, CONFIGS[n], best["mode"], tt,
                                              bt, amp, inductor_dir=inductor)
                            ms[side] = None if t["status"] else t["ms"]
                    if ms["mg"] is None or ms["pt"] is None:
                        continue
                    r["mg"].append(ms["mg"])
                    r["pt"].append(ms["pt"])
                    r["ratios"].append(ms["pt"] / ms["mg"])
            finally:
                shutil.rmtree(inductor, ignore_errors=True)
            if r["ratios"]:
                out[(n, amp)] = r
    return out


def median(xs):
    s = sorted(xs)
    return s[len(s) // 2] if len(s) % 2 else 0.5 * (s[len(s) // 2 - 1] + s[len(s) // 2])


def print_results(variants, names, sgemm, mg, trows, rc, rc_cfg, pairs):
    """Step 8, the tables (the goals apart)."""
    impls = next((s["impls"] for s in sgemm.values() if s["impls"]), {})
    print_table("sgemm GFLOP/s at 4096^3, all threads (MFU is against the best of them all)",
                ["environment", "OpenBLAS core"] + list(impls) + ["best"],
                [[v.label.strip() or "machine's own", s.get("error", s.get("core"))]
                 + [f"{s['impls'][i]:.1f}" if s["impls"].get(i, 0) > 0 else "n/a" for i in impls]
                 + [f"{s['best']:.1f}"] for v in variants for s in [sgemm[v.slug]]])

    rows = []
    for v in variants:
        for n in names:
            m, best = mg[(v.slug, n, "fp32")], best_torch(trows, n, "fp32")
            row = [n + v.label, shape_str(CONFIGS[n])]
            if "error" in m:
                rows.append(row + [m["error"], "", "", "", "", "", ""])
                continue
            rows.append(row + [f"{m['ms']:.1f}", f"{m['tok']:.0f}", f"{100 * m['mfu']:.1f}%",
                               gemm_cell(m),
                               f"{m['rss']:.0f} / {m['need']:.0f} MiB = {m['rss'] / m['need']:.2f}x",
                               f"{best['ms']:.1f} ({torch_label(best)})" if best else "-",
                               f"{best['ms'] / m['ms']:.2f}" if best else "-"])
    print_table("mingpt fp32 against the best PyTorch mode (ratio = PyTorch ms / mingpt ms = tokens/s ratio; "
                "labelled rows against the machine's own PyTorch)",
                ["config", "model", "mingpt ms/iter", "tok/s", "MFU", "GEMMs: share of the step, GFLOP/s",
                 "peak RSS / need", "best PyTorch ms/iter", "ratio"], rows)

    for v in variants:
        for n in names:
            m = mg[(v.slug, n, "fp32")]
            if "error" not in m and m["classes"]:
                cols, rows = gemm_rows(m["classes"])
                print_table(f"GEMM per shape class, {n}{v.label} (chosen implementation; GFLOP/s of each at the "
                            f"timed shape; class = ceil(log2) of M:N:K)",
                            ["op", "class", "timed MxNxK", "threads", "chosen"] + cols, rows)

    if trows:
        print_table("PyTorch, every mode (machine's own environment)",
                    ["config", "amp", "interpreter", "torch", "mode", "threads torch+BLAS", "ms/iter", "tok/s",
                     "compile s", "peak RSS MiB"],
                    [[r["config"], r["amp"], r["py"], r["version"], r["mode"], r["threads"]]
                     + ([r["status"], "", "", ""] if r["status"] else
                        [f"{r['ms']:.1f}", f"{r['tok']:.0f}",
                         f"{r['compile_s']:.1f}" if "compile" in r["mode"] else "-", f"{r['rss']:.0f}"])
                     for r in trows])

    rows = []
    for v in variants:
        for n in (n for n in names if n in BF16_CONFIGS):
            f32, b16 = mg[(v.slug, n, "fp32")], mg[(v.slug, n, "bf16")]
            pt = None if v.label else best_torch(trows, n, "bf16")
            err = error_of(f32, b16)
            if err:
                rows.append([n + v.label, err, "", "", "", "", ""])
                continue
            rows.append([n + v.label, f"{f32['ms']:.1f}", f"{b16['ms']:.1f}", f"{f32['ms'] / b16['ms']:.2f}",
                         "yes" if b16["lowp_fast"] else "no (bf16 runs in fp32)",
                         f"{pt['ms']:.1f} ({torch_label(pt)})" if pt else "-",
                         f"{pt['ms'] / b16['ms']:.2f}" if pt else "-"])
    if rows:
        print_table("bf16: mingpt --amp bf16 against mingpt fp32 and PyTorch torch.autocast(\"cpu\", bfloat16) "
                    "(ratios > 1: mingpt bf16 faster)",
                    ["config", "mingpt fp32 ms", "mingpt bf16 ms", "bf16 speed-up", "bf16 hardware (lowp_fast)",
                     "best PyTorch bf16 ms", "PyTorch bf16 ms / mingpt bf16 ms"], rows)

    if pairs:
        print_table("paired rounds: mingpt and PyTorch's best mode above, back to back, the order alternating "
                    "(ratio = PyTorch ms / mingpt ms within a round; the goals take the median)",
                    ["config", "amp", "PyTorch mode", "mingpt ms per round", "PyTorch ms per round",
                     "ratio per round", "median ratio"],
                    [[n, amp, torch_label(r["best"]), " ".join(f"{x:.1f}" for x in r["mg"]),
                      " ".join(f"{x:.1f}" for x in r["pt"]), " ".join(f"{x:.2f}" for x in r["ratios"]),
                      f"{median(r['ratios']):.2f}"] for (n, amp), r in pairs.items()])

    if rc:
        print_table(f"activation recomputation: {shape_str(rc_cfg)}, median of {rc_cfg['mg'][1]} iterations "
                    f"after {rc_cfg['mg'][0]} warm-up",
                    ["run", "ms/iter", "peak RSS MiB", "need MiB"],
                    [["--checkpointing 1" if ck else "without"]
                     + ([r["error"], "", ""] if "error" in r else
                        [f"{r['ms']:.1f}", f"{r['rss']:.0f}", f"{r['need']:.0f}"]) for ck, r in rc.items()])


def ratio_measured(pairs, key, m, best):
    """(ratio the goal is judged by, text): the median of the paired rounds where there are any, else
    the single runs' ratio; the text names both."""
    single = best["ms"] / m["ms"]
    text = f"{single:.2f} ({m['ms']:.1f} vs {best['ms']:.1f} ms: {torch_label(best)})"
    if key not in pairs:
        return single, text
    p = pairs[key]
    med = median(p["ratios"])
    return med, (f"{med:.2f}, the median of {len(p['ratios'])} paired rounds ("
                 + ", ".join(f"{x:.2f}" for x in p["ratios"]) + f"); the single runs above: {text}")


def goal_rows(names, sgemm, mg, trows, rc, sample, pairs):
    """Step 8, the goals: [goal, measured, met / MISSED / - (not measured) / n/a]."""
    rows = []
    for n in names:
        m, best, g = mg[("env", n, "fp32")], best_torch(trows, n, "fp32"), RATIO_GOALS[n]
        goal = f"{n} >= {g}x best PyTorch" + (" (earlier goal)" if n == "T" else "")
        if "error" in m or not best:
            rows.append([goal, m.get("error", "no PyTorch result"), "-"])
        else:
            r, text = ratio_measured(pairs, (n, "fp32"), m, best)
            floor = ""
            if m.get("gemm_share"):   # the goal's whole step against the GEMMs alone
                floor = (f"; the goal's step is {best['ms'] / g:.1f} ms, the GEMMs alone take "
                         f"{gemm_floor(m)[0]:.1f} ms at {m['gemm_gflops']:.0f} GFLOP/s")
            rows.append([goal, text + floor, verdict(r >= g)])
    if "M" in names:
        goal = f"MFU on M >= {100 * MFU_GOAL_M:.0f}% of the best sgemm"
        err = error_of(sgemm["env"], mg[("env", "M", "fp32")])
        mfu = mg[("env", "M", "fp32")].get("mfu", 0)
        m = mg[("env", "M", "fp32")]
        ceiling = (f"; the GEMMs take {100 * m['gemm_share']:.0f}% of the step at {m['gemm_gflops']:.0f} GFLOP/s "
                   f"({100 * m['gemm_gflops'] / sgemm['env']['run_best']:.0f}% of the peak): with nothing else, "
                   f"MFU {100 * gemm_floor(m)[1]:.1f}%") if not err and m.get("gemm_share") else ""
        rows.append([goal, err, "-"] if err else
                    [goal, f"{100 * mfu:.1f}% of {sgemm['env']['run_best']:.1f} GFLOP/s{ceiling}",
                     verdict(mfu >= MFU_GOAL_M)])
    for n in (n for n in names if n in BF16_CONFIGS):
        f32, b16 = mg[("env", n, "fp32")], mg[("env", n, "bf16")]
        if error_of(f32, b16):
            rows.append([f"bf16 on {n}", error_of(f32, b16), "-"])
            continue
        s = f32["ms"] / b16["ms"]
        if n == "M":
            rows.append([f"bf16 on M >= {BF16_GOAL_M}x mingpt fp32 (where the CPU has AVX512-BF16 or AMX)",
                         f"{s:.2f}x", verdict(s >= BF16_GOAL_M) if b16["lowp_fast"] else "n/a (no bf16 hardware)"])
        rows.append([f"bf16 on {n} never slower than fp32", f"{s:.2f}x", verdict(s >= 1.0)])
        best = best_torch(trows, n, "bf16")
        goal = f"bf16 on {n} >= {BF16_RATIO_GOAL}x PyTorch's best bf16 autocast (where the CPU has AVX512-BF16 or AMX)"
        if not best:
            rows.append([goal, "no PyTorch bf16 result", "-"])
        else:
            r, text = ratio_measured(pairs, (n, "bf16"), b16, best)
            rows.append([goal, text, verdict(r >= BF16_RATIO_GOAL) if b16["lowp_fast"] else "n/a (no bf16 hardware)"])
    if rc:
        no, ck = rc[False], rc[True]
        if error_of(no, ck):
            rows.append(["activation recomputation", error_of(no, ck), "-"])
        else:
            cut, slow = 1 - ck["rss"] / no["rss"], ck["ms"] / no["ms"]
            rows.append([f"recomputation cuts peak RSS by >= {100 * RECOMPUTE_RSS_CUT:.0f}%",
                         f"{100 * cut:.1f}% ({no['rss']:.0f} -> {ck['rss']:.0f} MiB)",
                         verdict(cut >= RECOMPUTE_RSS_CUT)])
            rows.append([f"recomputation costs <= +{100 * (RECOMPUTE_SLOWDOWN - 1):.0f}% time per iteration",
                         f"{100 * (slow - 1):+.1f}% ({no['ms']:.0f} -> {ck['ms']:.0f} ms)",
                         verdict(slow <= RECOMPUTE_SLOWDOWN)])
    fit = [mg[("env", n, "fp32")]["rss"] / mg[("env", n, "fp32")]["need"] for n in names
           if "error" not in mg[("env", n, "fp32")]]
    if fit:
        rows.append([f"peak RSS <= {RSS_GOAL}x what the config needs (earlier goal)", f"{max(fit):.2f}x",
                     verdict(max(fit) <= RSS_GOAL)])
    if isinstance(sample, str):
        rows.append([f"sampling >= {SAMPLE_GOAL} chars/s, one core", sample, "-"])
    else:
        rows.append([f"sampling >= {SAMPLE_GOAL} chars/s, one core, while the context fits block_size "
                     "(earlier goal)", f"{sample[0]:.0f}", verdict(sample[0] >= SAMPLE_GOAL)])
        # no goal: past block_size every character recomputes the cropped window (minGPT's
        # generate), T times the in-window work; measured for the record
        rows.append(["sampling over 500 characters, chars/s (no goal: past block_size minGPT's cropping "
                     "recomputes the window)", f"{sample[1]:.0f}", "-"])
    return rows


def main():
    ap = argparse.ArgumentParser(description="mingpt against PyTorch on this machine (make bench-speed)")
    ap.add_argument("--bin", default="build/bench/bench_train")
    ap.add_argument("--configs", default="S,M,T", help="comma-separated subset of S,M,T")
    ap.add_argument("--quick", action="store_true", help="fewer iterations (smoke test)")
    ap.add_argument("--torch-py", default="/usr/bin/python3",
                    help="Python interpreters with torch, separated by commas or spaces")
    ap.add_argument("--torch-modes", default=",".join(TORCH_MODES),
                    help=f"comma-separated subset of {','.join(TORCH_MODES)}")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--recompute", action=argparse.BooleanOptionalAction, default=True,
                    help="the activation recomputation rows (tutorial config, minutes)")
    ap.add_argument("--recompute-batch", type=int, default=RECOMPUTE["batch"],
                    help="batch of the recomputation config (smaller only for smoke tests)")
    ap.add_argument("--cache-dir", default="build/bench-cache", help="GEMM calibration caches of this run")
    ap.add_argument("--no-wait", action="store_true",
                    help="do not wait for an idle machine or re-measure (smoke tests on a busy machine)")
    ap.add_argument("--pairs", type=int, default=3,
                    help="paired rounds of mingpt and PyTorch's best mode per config and precision (0: none; "
                         "--quick: at most 1)")
    a = ap.parse_args()
    names = [n for n in a.configs.split(",") if n]
    modes = [m for m in a.torch_modes.split(",") if m]
    bad = [n for n in names if n not in CONFIGS] + [m for m in modes if m not in TORCH_MODES]
    if bad:
        ap.error(f"unknown config or PyTorch mode: {', '.join(bad)}")
    if a.recompute_batch < 1:
        ap.error("--recompute-batch must be >= 1")
    if a.pairs < 0:
        ap.error("--pairs must be >= 0")
    if not os.access(a.bin, os.X_OK):
        ap.error(f"{a.bin} is not an executable (make {a.bin})")
    opts = Opts(wait=not a.no_wait, quick=a.quick, cache_dir=a.cache_dir)
    pys = [] if a.no_torch else [p for p in re.split(r"[,\s]+", a.torch_py) if p]
    t_start = time.time()

    threads, probes, variants = environment(pys, opts)
    sgemm, mg = mingpt_side(a.bin, opts, variants, names)
    peak_all(sgemm, mg)
    trows = torch_side(pys, probes, opts, names, modes, threads)
    rounds = min(a.pairs, 1) if a.quick else a.pairs
    pairs = paired_side(a.bin, opts, variants[0], names, mg, trows, probes, sgemm, rounds) if rounds else {}
    rc_cfg = dict(RECOMPUTE, batch=a.recompute_batch)
    rc = recompute_side(a.bin, opts, variants[0], rc_cfg, sgemm["env"]["best"]) if a.recompute else None
    sample = measure_sampling(a.bin, opts)

    print_results(variants, names, sgemm, mg, trows, rc, rc_cfg, pairs)
    print_table("goals (machine's own environment, this run)", ["goal", "measured", "verdict"],
                goal_rows(names, sgemm, mg, trows, rc, sample, pairs))
    print(f"\nbench-speed took {time.time() - t_start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
