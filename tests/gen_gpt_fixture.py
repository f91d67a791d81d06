#!/usr/bin/env python3
"""Generate tests/fixtures/gpt_tiny.bin: a golden forward/backward of minGPT's GPT.

Run with Debian's torch:   /usr/bin/python3 tests/gen_gpt_fixture.py

The model is karpathy/minGPT's GPT (pre-LN blocks, causal self-attention,
tanh-GELU MLP, untied lm_head without bias, no dropout), written functionally
below. Everything is computed in float64 and rounded to float32 once on output.
File format: see tests/fixtures/README.md. Output is deterministic.
"""
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_layout import param_shapes  # noqa: E402

V, T, L, NH, C, B = 11, 8, 2, 2, 16, 3   # vocab, block_size, layers, heads, embd, batch
HS = C // NH                             # head size
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "gpt_tiny.bin")

torch.manual_seed(0)
DT = torch.float64


# ---- parameters, in the C side's flat order ---------------------------------
def init_param(name, shape):
    """Non-trivial random values so every code path matters."""
    if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name.endswith("ln_f.weight"):
        return 1.0 + 0.1 * torch.randn(shape, dtype=DT)   # LayerNorm gain around 1
    if name.endswith(".bias"):
        return 0.1 * torch.randn(shape, dtype=DT)         # biases (LN and Linear)
    return 0.3 * torch.randn(shape, dtype=DT)             # matrices / embeddings


SHAPES = param_shapes(V, T, L, C)
params = {n: init_param(n, s) for n, s in SHAPES}
P = sum(math.prod(s) for _, s in SHAPES)
assert P == V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C + V * C

# ---- inputs ------------------------------------------------------------------
idx = torch.randint(0, V, (B, T))
targets = torch.randint(0, V, (B, T))
ignored = torch.randperm(B * T)[:2]          # exactly two ignored targets
targets.view(-1)[ignored] = -1


# ---- the model (minGPT, functional) -------------------------------------------
def attention(x, p, naive=False):
    """CausalSelfAttention. naive=True uses explicit loops (self-check only)."""
    Bx, Tx, _ = x.shape
    qkv = F.linear(x, p["attn.c_attn.weight"], p["attn.c_attn.bias"])
    q, k, v = qkv.split(C, dim=2)
    q, k, v = (t.view(Bx, Tx, NH, HS).transpose(1, 2) for t in (q, k, v))  # (B,NH,T,HS)
    if not naive:
        att = (q @ k.transpose(-2, -1)) / math.sqrt(HS)
        mask = torch.tril(torch.ones(Tx, Tx, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = att @ v
    else:
        y = torch.zeros_like(q)
        for b in range(Bx):
            for h in range(NH):
                for t in range(Tx):
                    s = [sum(q[b, h, t, i] * k[b, h, u, i] for i in range(HS)) / math.sqrt(HS)
                         for u in range(t + 1)]                     # causal: u <= t only
                    m = max(s)
                    e = [torch.exp(si - m) for si in s]
                    z = sum(e)
                    for u in range(t + 1):
                        y[b, h, t] += (e[u] / z) * v[b, h, u]
    y = y.transpose(1, 2).contiguous().view(Bx, Tx, C)           # concat heads
    return F.linear(y, p["attn.c_proj.weight"], p["attn.c_proj.bias"])


def forward(prm, idx, targets, naive=False):
    """Returns (logits, loss)."""
    pos = torch.arange(idx.shape[1])
    x = prm["transformer.wte.weight"][idx] + prm["transformer.wpe.weight"][pos]
    for l in range(L):
        p = {n[len(f"transformer.h.{l}."):]: t for n, t in prm.items()
             if n.startswith(f"transformer.h.{l}.")}
        x = x + attention(F.layer_norm(x, (C,), p["ln_1.weight"], p["ln_1.bias"], 1e-5), p, naive)
        h = F.layer_norm(x, (C,), p["ln_2.weight"], p["ln_2.bias"], 1e-5)
        h = F.gelu(F.linear(h, p["mlp.c_fc.weight"], p["mlp.c_fc.bias"]), approximate="tanh")
        x = x + F.linear(h, p["mlp.c_proj.weight"], p["mlp.c_proj.bias"])
    x = F.layer_norm(x, (C,), prm["transformer.ln_f.weight"], prm["transformer.ln_f.bias"], 1e-5)
    logits = F.linear(x, prm["lm_head.weight"])                  # no bias
    loss = F.cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=-1)
    return logits, loss


# ---- reference forward + backward in float64 ----------------------------------
for t in params.values():
    t.requires_grad_(True)
logits, loss = forward(params, idx, targets)
loss.backward()

# ---- self-checks ----------------------------------------------------------------
with torch.no_grad():
    _, loss_naive = forward(params, idx, targets, naive=True)    # naive loops, all (b,h)
assert abs(loss.item() - loss_naive.item()) < 1e-12, (loss.item(), loss_naive.item())


def loss_wrt(name):
    """loss as a function of one parameter tensor (others held fixed)."""
    def f(t):
        prm = {n: (t if n == name else p.detach()) for n, p in params.items()}
        return forward(prm, idx, targets)[1]
    return f


for name in ["transformer.h.0.attn.c_attn.weight", "transformer.h.1.ln_1.bias",
             "transformer.wpe.weight", "lm_head.weight"]:
    x0 = params[name].detach().clone().requires_grad_(True)
    assert torch.autograd.gradcheck(loss_wrt(name), (x0,), eps=1e-6, atol=1e-7), name

# ---- write the fixture (little-endian) ---------------------------------------------
def f32(t):
    return t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()


def i32(t):
    return t.to(torch.int32).contiguous().numpy().astype("<i4").tobytes()


names = [n for n, _ in SHAPES]
flat_params = torch.cat([params[n].detach().reshape(-1) for n in names])
flat_grads = torch.cat([params[n].grad.reshape(-1) for n in names])
assert flat_params.numel() == P and flat_grads.numel() == P

os.makedirs(os.path.dirname(OUT), exist_ok=True)
with open(OUT, "wb") as fh:
    fh.write(struct.pack("<6i", V, T, L, NH, C, B))
    fh.write(i32(idx) + i32(targets))
    fh.write(f32(flat_params))
    fh.write(f32(logits))
    fh.write(f32(loss.reshape(1)))
    fh.write(f32(flat_grads))

print(f"P = {P}")
print(f"loss = {loss.item():.17g} (float32 {loss.float().item():.9g}), naive = {loss_naive.item():.17g}")
print(f"ignored target positions (flat) = {sorted(ignored.tolist())}")
print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)")
