# bench/torch_profile.py — PyTorch's training step under torch.profiler, its time grouped into the
# categories of mingpt's per-op profile (`bench_train train --profile 1`, kernels/backend_profile.h),
# printed in the same table format ("PROF" lines). bench/run_bench.py --profile puts the two side
# by side; docs/performance.md has how to read them. Not part of `make test`.
#
#   OPENBLAS_NUM_THREADS=2 /usr/bin/python3 bench/torch_profile.py --torch_threads 1 \
#       --n_layer 4 --n_head 4 --n_embd 128 --block 64 --batch 12 --warmup 3 --iters 5 \
#       [--sdpa 1] [--amp bf16]
#
# The step is bench/torch_speed.py's (mingpt's): forward with loss, zero_grad, backward,
# clip_grad_norm_(1.0), AdamW. W warm-up steps, then N steps timed without the profiler
# (step_ms_unprofiled: the real speed), then N steps under torch.profiler (CPU activities,
# record_shapes off), whose events are classified:
#   - the phase, from record_function ranges around each part of the step: zero_grad -> zero,
#     clip_grad_norm_ -> clip, optimizer.step -> optimizer;
#   - in the forward, the module whose forward the op ran in (a record_function range per module,
#     opened by forward hooks): nn.Linear -> matmul.fwd.<role> (c_attn, attn_proj, c_fc, mlp_proj,
#     lm_head), LayerNorm -> layernorm.fwd, the attention's own ops (QK^T, mask, softmax, attention
#     dropout, att@V, or SDPA) -> attention.fwd, gelu -> gelu.fwd, the residual dropouts ->
#     dropout.fwd, the residual adds -> residual.fwd (mingpt fuses them into
#     residual_layernorm_forward, layernorm.fwd), embeddings and their sum -> embedding.fwd, the
#     loss -> crossentropy; anything else -> other.fwd;
#   - in the backward, the autograd node's forward op (the profiler's sequence number links them):
#     its forward category with .fwd -> .bwd (crossentropy stays crossentropy); gradient
#     accumulation into .grad -> other.bwd.
# Each category's time is the sum of its ops' self CPU time, so nothing counts twice. "(rest)" is
# the profiled steps' wall time not inside any op: Python, the module calls, the profiler's own
# cost. The profiled step is slower than the unprofiled one; shares are of the profiled step.
import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, record_function

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt import GPT, Block, CausalSelfAttention  # noqa: E402
from profile_compare import ORDER  # noqa: E402
from torch_speed import capabilities, UNAVAILABLE  # noqa: E402

LINEAR_ROLE = {"attn.c_attn": "c_attn", "attn.c_proj": "attn_proj", "mlp.c_fc": "c_fc", "mlp.c_proj": "mlp_proj",
               "lm_head": "lm_head"}
PHASES = {"step.zero_grad": "zero", "step.clip": "clip", "step.optimizer": "optimizer"}
LOSS_OPS = ("cross_entropy", "log_softmax", "nll_loss")


def add_module_ranges(model):
    """A record_function range "mod:<kind>:<name>" around every module's forward (hooks)."""
    stack = []

    def kind(m):
        if isinstance(m, nn.Linear): return "linear"
        if isinstance(m, nn.LayerNorm): return "layernorm"
        if isinstance(m, nn.Embedding): return "embedding"
        if isinstance(m, nn.Dropout): return "dropout"
        if isinstance(m, CausalSelfAttention): return "attention"
        if isinstance(m, Block): return "block"
        if isinstance(m, GPT): return "gpt"
        return "other"

    for name, m in model.named_modules():
        if isinstance(m, (nn.ModuleList, nn.ModuleDict)):
            continue
        label = f"mod:{kind(m)}:{name}"

        def pre(mod, inp, label=label):
            r = record_function(label)
            r.__enter__()
            stack.append(r)

        def post(mod, inp, out):
            stack.pop().__exit__(None, None, None)

        m.register_forward_pre_hook(pre)
        m.register_forward_hook(post)


def forward_category(names, mod):
    """The category of a forward op that ran inside module range mod ("mod:<kind>:<name>"); names:
    its name and its enclosing ops' up to that range."""
    name = " ".join(names)
    if mod is None:
        return "other.fwd"
    _, kind, mname = mod.split(":", 2)
    if kind == "linear":
        for suffix, role in LINEAR_ROLE.items():
            if mname.endswith(suffix):
                return f"matmul.fwd.{role}"
        return "matmul.fwd.other"
    if kind == "layernorm":
        return "layernorm.fwd"
    if kind == "embedding":
        return "embedding.fwd"
    if kind == "dropout":
        return "attention.fwd" if mname.endswith("attn_dropout") else "dropout.fwd"
    if kind == "attention":
        return "attention.fwd"
    if kind == "block":
        return "gelu.fwd" if "gelu" in name else "residual.fwd"
    if kind == "gpt":
        return "crossentropy" if any(k in name for k in LOSS_OPS) else "embedding.fwd"
    return "other.fwd"


def is_wrapper(e):
    return e.name.startswith(("step.", "mod:", "ProfilerStep"))


def classify(events):
    """{category: [self_us, calls, set of op names]} over the profiled events."""
    fwd_of_seq = {}
    cat_of = {}

    def context(e):
        mod = node = phase = None
        names = []
        p = e
        while p is not None:
            n = p.name
            if mod is None and n.startswith("mod:"):
                mod = n
            if mod is None:
                names.append(n)
            if node is None and p.sequence_nr >= 0 and (n.startswith("autograd::engine::evaluate_function")
                                                          or n.endswith("Backward0") or "Backward" in n):
                node = p
            if n.startswith("step."):
                phase = n
                break
            p = p.cpu_parent
        return mod, node, phase, names

    # the forward first (sequence numbers of the forward ops), then the rest
    evs = sorted(events, key=lambda e: e.time_range.start)
    for e in evs:
        if is_wrapper(e):
            continue
        mod, node, phase, names = context(e)
        if phase == "step.forward":
            c = forward_category(names, mod)
            cat_of[e.id] = c
            if e.sequence_nr >= 0:   # several ops share a number: the last is the one that made the node
                fwd_of_seq[e.sequence_nr] = c
    for e in evs:
        if is_wrapper(e) or e.id in cat_of:
            continue
        mod, node, phase, _ = context(e)
        if phase in PHASES:
            c = PHASES[phase]
        elif phase == "step.backward":
            if "AccumulateGrad" in e.name or (node is None and _under(e, "AccumulateGrad")):
                c = "other.bwd"
            elif node is not None and node.sequence_nr in fwd_of_seq:
                f = fwd_of_seq[node.sequence_nr]
                c = f.replace(".fwd", ".bwd")
            else:
                c = "other.bwd"
        else:
            c = "other"
        cat_of[e.id] = c
    out = {}
    for e in evs:
        if is_wrapper(e):
            continue
        c = cat_of[e.id]
        row = out.setdefault(c, [0.0, 0, {}])
        row[0] += e.self_cpu_time_total
        # a call: an op whose parent is not an op of the same category
        par = e.cpu_parent
        if par is None or is_wrapper(par) or cat_of.get(par.id) != c:
            row[1] += 1
        if e.self_cpu_time_total > 0:
            key = e.name.replace("autograd::engine::evaluate_function: ", "")
            row[2][key] = row[2].get(key, 0) + e.self_cpu_time_total
    return out


def _under(e, text):
    p = e.cpu_parent
    while p is not None:
        if text in p.name:
            return True
        p = p.cpu_parent
    return False


def print_table(rows, steps, step_s, f=sys.stdout):
    """The table of kernels/backend_profile.c's backend_profile_print, by category."""
    per = 1.0 / steps
    share = 100.0 / step_s if step_s > 0 else 0.0
    print("PROF %-36s %-22s %10s %10s %7s %10s" % ("op", "category", "calls/step", "ms/step", "share%", "gemm_ms"), file=f)
    ops = 0.0
    cats = sorted(rows, key=lambda c: ORDER.index(c) if c in ORDER else len(ORDER))
    for c in cats:
        us, calls, names = rows[c]
        s = us * 1e-6
        ops += s
        top = sorted(names.items(), key=lambda kv: -kv[1])[:2]
        op = "+".join(n for n, _ in top) or "-"
        print("PROF %-36s %-22s %10.2f %10.3f %7.2f %10s" % (op[:36].replace(" ", "_"), c, calls * per,
                                                             1e3 * s * per, s * share, "-"), file=f)
    print("PROF %-36s %-22s %10s %10.3f %7.2f %10s" % ("(rest)", "rest", "-", 1e3 * (step_s - ops) * per,
                                                      (step_s - ops) * share, "-"), file=f)
    print("PROF %-36s %-22s %10s %10.3f %7.2f %10s" % ("(step)", "step", "-", 1e3 * step_s * per, 100.0, "-"),
          file=f)


def main():
    ap = argparse.ArgumentParser()
    for k, d in [("n_layer", 4), ("n_head", 4), ("n_embd", 128), ("block", 64), ("batch", 12), ("vocab", 65),
                 ("warmup", 3), ("iters", 5), ("torch_threads", 1), ("sdpa", 0)]:
        ap.add_argument("--" + k, type=int, default=d)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--amp", choices=("fp32", "bf16"), default="fp32")
    a = ap.parse_args()
    if a.iters < 1:
        print(f"torch_profile: --iters must be at least 1 (got {a.iters})", file=sys.stderr)
        return 2
    caps = capabilities()
    if a.sdpa and not caps["sdpa"]:
        print(f"torch_profile: torch {caps['version']} has no sdpa", file=sys.stderr)
        return UNAVAILABLE
    torch.set_num_threads(a.torch_threads)
    torch.manual_seed(1337)
    B, T, V = a.batch, a.block, a.vocab
    model = GPT(V, T, a.n_layer, a.n_head, a.n_embd, a.dropout, a.dropout, a.dropout, sdpa=bool(a.sdpa))
    model.train()
    opt = model.configure_optimizer(1e-4, (0.9, 0.95), 1e-8, 0.1)
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randint(0, V, (B, T), generator=g), torch.randint(0, V, (B, T), generator=g)) for _ in range(4)]

    def step(it):
        x, y = batches[it % 4]
        with record_function("step.forward"):
            if a.amp == "bf16":
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    _, loss = model(x, y)
            else:
                _, loss = model(x, y)
        with record_function("step.zero_grad"):
            opt.zero_grad(set_to_none=True)
        with record_function("step.backward"):
            loss.backward()
        with record_function("step.clip"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        with record_function("step.optimizer"):
            opt.step()
        return loss

    it = 0
    for _ in range(a.warmup):
        step(it); it += 1
    plain = []
    for _ in range(a.iters):
        t0 = time.perf_counter(); step(it); it += 1
        plain.append(time.perf_counter() - t0)
    add_module_ranges(model)
    wall = 0.0
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(a.iters):
            t0 = time.perf_counter(); loss = step(it); it += 1
            wall += time.perf_counter() - t0
    rows = classify(prof.events())
    print(f"RESULT torch_profile version={caps['version']} L={a.n_layer} H={a.n_head} C={a.n_embd} T={T} B={B} V={V} "
          f"dropout={a.dropout} sdpa={a.sdpa} amp={a.amp} torch_threads={torch.get_num_threads()} "
          f"iters={a.iters} ms_median_unprofiled={1e3 * statistics.median(plain):.3f} "
          f"ms_profiled={1e3 * wall / a.iters:.3f} loss={loss.item():.4f}", flush=True)
    print_table(rows, a.iters, wall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
