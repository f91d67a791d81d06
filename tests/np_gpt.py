"""tests/np_gpt.py — karpathy/minGPT's GPT forward pass in NumPy, float64, for the export test.

An independent reference for `mingpt export`'s files: it shares no code with mingpt (C) and
needs no PyTorch. The model is minGPT's (mingpt/model.py), in eval mode (no dropout):

    x = wte[idx] + wpe[0:T]
    for each block:  x = x + c_proj(attn(ln_1(x)));  x = x + mlp.c_proj(gelu(mlp.c_fc(ln_2(x))))
    logits = lm_head(ln_f(x))                               (lm_head has no bias)

    attn: q, k, v = split(c_attn(x)); per head softmax(q k^T / sqrt(hs) + causal mask) v
    ln:   (x - mean) / sqrt(var + 1e-5) * weight + bias     (torch.nn.LayerNorm, biased var)
    gelu: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  (minGPT's NewGELU)

Weights are a dict of minGPT's state_dict names to arrays (torch.nn.Linear layout:
weight (out, in)), as safetensors.numpy.load_file returns them; any float dtype.
"""
import math

import numpy as np


def state_dict_keys(L):
    """The keys of minGPT's state_dict for n_layer L, attn.bias buffers included."""
    keys = ["transformer.wte.weight", "transformer.wpe.weight"]
    for l in range(L):
        p = f"transformer.h.{l}."
        keys += [p + "ln_1.weight", p + "ln_1.bias", p + "attn.bias",
                 p + "attn.c_attn.weight", p + "attn.c_attn.bias", p + "attn.c_proj.weight", p + "attn.c_proj.bias",
                 p + "ln_2.weight", p + "ln_2.bias",
                 p + "mlp.c_fc.weight", p + "mlp.c_fc.bias", p + "mlp.c_proj.weight", p + "mlp.c_proj.bias"]
    return keys + ["transformer.ln_f.weight", "transformer.ln_f.bias", "lm_head.weight"]


def state_dict_shapes(V, T, L, C):
    """Each key's shape in minGPT (the causal-mask buffer attn.bias is (1, 1, T, T))."""
    shapes = {"transformer.wte.weight": (V, C), "transformer.wpe.weight": (T, C),
              "transformer.ln_f.weight": (C,), "transformer.ln_f.bias": (C,), "lm_head.weight": (V, C)}
    for l in range(L):
        p = f"transformer.h.{l}."
        shapes.update({p + "ln_1.weight": (C,), p + "ln_1.bias": (C,), p + "attn.bias": (1, 1, T, T),
                       p + "attn.c_attn.weight": (3 * C, C), p + "attn.c_attn.bias": (3 * C,),
                       p + "attn.c_proj.weight": (C, C), p + "attn.c_proj.bias": (C,),
                       p + "ln_2.weight": (C,), p + "ln_2.bias": (C,),
                       p + "mlp.c_fc.weight": (4 * C, C), p + "mlp.c_fc.bias": (4 * C,),
                       p + "mlp.c_proj.weight": (C, 4 * C), p + "mlp.c_proj.bias": (C,)})
    return shapes


def _linear(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


def _layernorm(x, w, b, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def _gelu(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _attention(x, sd, p, n_head):
    B, T, C = x.shape
    hs = C // n_head
    q, k, v = np.split(_linear(x, sd[p + "c_attn.weight"], sd[p + "c_attn.bias"]), 3, axis=-1)
    heads = lambda t: t.reshape(B, T, n_head, hs).transpose(0, 2, 1, 3)   # (B, nh, T, hs)
    q, k, v = heads(q), heads(k), heads(v)
    att = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hs)
    att = np.where(np.tril(np.ones((T, T), dtype=bool)), att, -np.inf)
    att = np.exp(att - att.max(axis=-1, keepdims=True))
    att /= att.sum(axis=-1, keepdims=True)
    y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
    return _linear(y, sd[p + "c_proj.weight"], sd[p + "c_proj.bias"])


def forward(sd, idx, n_layer, n_head):
    """logits (B, T, V) float64 of minGPT in eval mode for tokens idx (B, T) int."""
    sd = {k: np.asarray(v, dtype=np.float64) for k, v in sd.items()}
    T = idx.shape[1]
    x = sd["transformer.wte.weight"][idx] + sd["transformer.wpe.weight"][:T]
    for l in range(n_layer):
        p = f"transformer.h.{l}."
        x = x + _attention(_layernorm(x, sd[p + "ln_1.weight"], sd[p + "ln_1.bias"]), sd, p + "attn.", n_head)
        h = _gelu(_linear(_layernorm(x, sd[p + "ln_2.weight"], sd[p + "ln_2.bias"]),
                          sd[p + "mlp.c_fc.weight"], sd[p + "mlp.c_fc.bias"]))
        x = x + _linear(h, sd[p + "mlp.c_proj.weight"], sd[p + "mlp.c_proj.bias"])
    return _linear(_layernorm(x, sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"]), sd["lm_head.weight"])
