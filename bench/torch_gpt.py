# bench/torch_gpt.py — the same GPT, AdamW groups and training step as mingpt, in PyTorch
# (torch 1.13, Debian's /usr/bin/python3, or later). Used by bench/run_bench.py
# (speed) and bench/bench_quality.py (test loss); not part of `make test`.
#
# The model is karpathy/minGPT's (mingpt/model.py): wte + wpe, dropout, pre-LN blocks
# with c_attn C->3C, causal softmax attention, c_proj, MLP C->4C->C with tanh-GELU, ln_f,
# lm_head without bias. The one liberty taken, in PyTorch's favour: GELU is torch's fused
# F.gelu(approximate='tanh') (the same function as minGPT's NewGELU, one kernel instead
# of eight) and AdamW uses foreach=True (multi-tensor). With sdpa=True the attention is
# F.scaled_dot_product_attention(is_causal=True) (PyTorch >= 2.0; its fused kernels, same
# function, dropout on the attention weights as minGPT's attn_dropout).
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, C, NH, T, attn_pdrop, resid_pdrop, sdpa=False):
        super().__init__()
        self.sdpa = sdpa
        self.attn_pdrop = attn_pdrop
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.attn_dropout = nn.Dropout(attn_pdrop)
        self.resid_dropout = nn.Dropout(resid_pdrop)
        self.register_buffer("bias", torch.tril(torch.ones(T, T)).view(1, 1, T, T))
        self.n_head = NH
        self.n_embd = C

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        hs = C // self.n_head
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_pdrop if self.training else 0.0,
                                               is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class Block(nn.Module):
    def __init__(self, C, NH, T, attn_pdrop, resid_pdrop, sdpa=False):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, NH, T, attn_pdrop, resid_pdrop, sdpa)
        self.ln_2 = nn.LayerNorm(C)
        self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(C, 4 * C), c_proj=nn.Linear(4 * C, C),
                                      dropout=nn.Dropout(resid_pdrop)))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        m = self.mlp
        x = x + m.dropout(m.c_proj(F.gelu(m.c_fc(self.ln_2(x)), approximate="tanh")))
        return x


class GPT(nn.Module):
    def __init__(self, V, T, L, NH, C, embd_pdrop=0.0, resid_pdrop=0.0, attn_pdrop=0.0, sdpa=False):
        super().__init__()
        self.block_size = T
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(V, C), wpe=nn.Embedding(T, C), drop=nn.Dropout(embd_pdrop),
            h=nn.ModuleList([Block(C, NH, T, attn_pdrop, resid_pdrop, sdpa) for _ in range(L)]),
            ln_f=nn.LayerNorm(C)))
        self.lm_head = nn.Linear(C, V, bias=False)
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * L))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
        elif isinstance(module, nn.LayerNorm):
            torch.nn.init.zeros_(module.bias)
            torch.nn.init.ones_(module.weight)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device).unsqueeze(0)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)
        return logits, loss

    def configure_optimizer(self, lr, betas, eps, weight_decay, foreach=True):
        # minGPT's groups: decay Linear weights only; biases, LayerNorm and Embedding weights not.
        decay, no_decay = set(), set()
        for mn, m in self.named_modules():
            for pn, _ in m.named_parameters(recurse=False):
                fpn = f"{mn}.{pn}" if mn else pn
                if pn.endswith("bias"):
                    no_decay.add(fpn)
                elif pn.endswith("weight") and isinstance(m, nn.Linear):
                    decay.add(fpn)
                else:
                    no_decay.add(fpn)
        params = dict(self.named_parameters())
        assert len(decay & no_decay) == 0 and len(decay | no_decay) == len(params)
        groups = [
            {"params": [params[n] for n in sorted(decay)], "weight_decay": weight_decay},
            {"params": [params[n] for n in sorted(no_decay)], "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, foreach=foreach)


def lr_at(it, lr, warmup_iters, lr_decay_iters, min_lr):
    """trainer/adamw.c lr_at: linear warm-up lr*(it+1)/(warmup+1), then cosine to min_lr."""
    if it < warmup_iters:
        return lr * (it + 1) / (warmup_iters + 1)
    if lr_decay_iters <= 0:
        return lr
    if it > lr_decay_iters:
        return min_lr
    span = lr_decay_iters - warmup_iters
    r = (it - warmup_iters) / span if span > 0 else 1.0
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * r)) * (lr - min_lr)
