#!/usr/bin/env python3
"""Generate tests/fixtures/gpt_tiny_bf16.bin: a bf16 mixed-precision training step of the model in
tests/fixtures/gpt_tiny.bin (same parameters and batch), two ways.

Run with Debian's torch:   /usr/bin/python3 tests/gen_bf16_fixture.py

1. "placement": mingpt's mixed precision written out in float64: every operand of every matmul
   (Linear input and weight; q, k, v, the attention probabilities; in the backward the incoming
   gradient, the saved inputs, the softmax gradient) rounded to bfloat16, the products summed in
   float64, everything else (LayerNorm, softmax, GELU, cross-entropy, bias) in float64. This is
   torch.autocast's placement of bf16 with fp32 outputs; mingpt must match it up to float32
   summation order.
2. "autocast": torch.autocast("cpu", dtype=torch.bfloat16) on float32 parameters, as a user of
   PyTorch would run it (autocast also rounds the matmul OUTPUTS to bf16, which mingpt does not,
   so the agreement is only within bf16's precision).

File: float32 little-endian, no header (the model and batch are gpt_tiny.bin's):
  logits (B,T,V) placement | loss placement | grads (P) placement |
  logits (B,T,V) autocast  | loss autocast  | grads (P) autocast
Output is deterministic.
"""
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_layout import param_shapes  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "fixtures", "gpt_tiny.bin")
OUT = os.path.join(HERE, "fixtures", "gpt_tiny_bf16.bin")

# ---- the model and batch of gpt_tiny.bin ----------------------------------------------------
raw = open(SRC, "rb").read()
V, T, L, NH, C, B = struct.unpack_from("<6i", raw, 0)
HS = C // NH
off = 24
idx = torch.from_numpy(np.frombuffer(raw, "<i4", B * T, off).astype(np.int64).reshape(B, T)); off += 4 * B * T
targets = torch.from_numpy(np.frombuffer(raw, "<i4", B * T, off).astype(np.int64).reshape(B, T)); off += 4 * B * T


SHAPES = param_shapes(V, T, L, C)
P = sum(math.prod(s) for _, s in SHAPES)
flat = np.frombuffer(raw, "<f4", P, off).astype(np.float64)
params0, o = {}, 0
for n, s in SHAPES:
    k = math.prod(s)
    params0[n] = torch.from_numpy(flat[o:o + k].reshape(s).copy())
    o += k


def bf(x):
    """x rounded to bfloat16 (round to nearest even), in x's dtype."""
    return x.to(torch.bfloat16).to(x.dtype)


class RMatmul(torch.autograd.Function):
    """a @ b with both operands rounded to bf16, and in the backward the incoming gradient too."""

    @staticmethod
    def forward(ctx, a, b):
        a, b = bf(a), bf(b)
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        g = bf(g)
        return g @ b.transpose(-2, -1), a.transpose(-2, -1) @ g


def mm(a, b):
    return RMatmul.apply(a, b)


def linear(x, w, bias=None, rounded=True):
    y = mm(x, w.t()) if rounded else x @ w.t()
    return y + bias if bias is not None else y


def forward(prm, rounded):
    """(logits, loss) in float64; rounded: mingpt's bf16 placement, else plain float64."""
    x = prm["transformer.wte.weight"][idx] + prm["transformer.wpe.weight"][torch.arange(T)]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        p = {n[len(f"transformer.h.{l}."):]: t for n, t in prm.items() if n.startswith(f"transformer.h.{l}.")}
        h = F.layer_norm(x, (C,), p["ln_1.weight"], p["ln_1.bias"], 1e-5)
        qkv = linear(h, p["attn.c_attn.weight"], p["attn.c_attn.bias"], rounded)
        q, k, v = (t.view(B, T, NH, HS).transpose(1, 2) for t in qkv.split(C, dim=2))
        s = (mm(q, k.transpose(-2, -1)) if rounded else q @ k.transpose(-2, -1)) / math.sqrt(HS)
        att = s.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = mm(att, v) if rounded else att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        x = x + linear(y, p["attn.c_proj.weight"], p["attn.c_proj.bias"], rounded)
        h = F.layer_norm(x, (C,), p["ln_2.weight"], p["ln_2.bias"], 1e-5)
        h = F.gelu(linear(h, p["mlp.c_fc.weight"], p["mlp.c_fc.bias"], rounded), approximate="tanh")
        x = x + linear(h, p["mlp.c_proj.weight"], p["mlp.c_proj.bias"], rounded)
    x = F.layer_norm(x, (C,), prm["transformer.ln_f.weight"], prm["transformer.ln_f.bias"], 1e-5)
    logits = linear(x, prm["lm_head.weight"], None, rounded)
    loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-1)
    return logits, loss


def step(dtype, autocast):
    prm = {n: t.to(dtype).clone().requires_grad_(True) for n, t in params0.items()}
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        if autocast:   # the same model in plain ops: autocast decides the precisions
            logits, loss = forward_plain(prm)
        else:
            logits, loss = forward(prm, rounded=True)
    loss.backward()
    grads = torch.cat([prm[n].grad.reshape(-1).to(torch.float64) for n, _ in SHAPES])
    return logits.detach().to(torch.float64), loss.detach().to(torch.float64), grads


def forward_plain(prm):
    return forward(prm, rounded=False)


lg_p, loss_p, g_p = step(torch.float64, autocast=False)
lg_a, loss_a, g_a = step(torch.float32, autocast=True)

# Self-checks: the placement differs from exact float64 by bf16-sized amounts (the rounding is
# real), and agrees with PyTorch's own autocast within bf16's precision.
with torch.no_grad():
    _, loss_exact = forward(params0, rounded=False)
rel = abs(loss_p.item() - loss_exact.item()) / abs(loss_exact.item())
assert 1e-6 < rel < 5e-2, rel
assert abs(loss_p.item() - loss_a.item()) / abs(loss_p.item()) < 3e-2, (loss_p.item(), loss_a.item())


def f32(t):
    return t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()


with open(OUT, "wb") as fh:
    fh.write(f32(lg_p) + f32(loss_p.reshape(1)) + f32(g_p) + f32(lg_a) + f32(loss_a.reshape(1)) + f32(g_a))
print(f"loss: float64 {loss_exact.item():.9g}, bf16 placement {loss_p.item():.9g} (rel {rel:.2e}), "
      f"torch.autocast {loss_a.item():.9g}")
print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)")
