#!/usr/bin/env python3
"""tests/export_check.py — `mingpt export`'s files in PyTorch (run by tests/test_export.sh with
build/pyenv's python: Debian's torch + safetensors from PyPI).

    export_check.py LOGITS F32.safetensors BF16.safetensors F16.safetensors CORPUS TRUNCATE

LOGITS is tests/tools/logits' output for the snapshot the files were exported from: mingpt's own
logits (B, T, V) on fixed tokens. Each file is read with safetensors.torch.load_file and loaded
strictly (every key, the attn.bias buffers included) into the project's minGPT reference in
PyTorch, bench/torch_gpt.py's GPT; its logits on the same tokens must equal mingpt's within
  float32   1e-5 of the largest |logit| (the issue's bound);
  bfloat16  the file's tensors are bitwise torch's own .to(torch.bfloat16) of the float32 file,
  float16   and so the logits are bitwise those of the float32 model rounded by torch; against
            mingpt's fp32 logits they agree within 2^-8 (bf16: 8 mantissa bits) or 2^-11 (fp16:
            11) times 16 (error growth through the layers of this small model), relative to the
            largest |logit|.
The metadata must give the model's shape and the corpus's vocabulary (sorted distinct
characters of its first TRUNCATE fraction, as mingpt and chargpt build it).
"""
import json
import os
import struct
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from torch_gpt import GPT  # noqa: E402

failures = 0


def check(ok, what):
    global failures
    print(f"  {'ok  ' if ok else 'FAIL'} {what}")
    failures += 0 if ok else 1


def read_logits(path):
    with open(path, "rb") as f:
        B, T, V = struct.unpack("<3i", f.read(12))
        tokens = torch.tensor(struct.unpack(f"<{B * T}i", f.read(4 * B * T)), dtype=torch.long).view(B, T)
        logits = torch.tensor(struct.unpack(f"<{B * T * V}f", f.read(4 * B * T * V))).view(B, T, V)
    return tokens, logits


def model_from(path, meta):
    V, T, L, NH, C = (int(meta[k]) for k in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"))
    m = GPT(V, T, L, NH, C)   # dropout 0
    sd = load_file(path)
    result = m.load_state_dict(sd, strict=True)   # raises on a missing or unexpected key
    m.eval()
    return m, sd, result


def main():
    logits_path, f32, bf16, f16, corpus, truncate = sys.argv[1:7]
    tokens, ref = read_logits(logits_path)
    scale = ref.abs().max().item()
    with safe_open(f32, "pt") as f:
        meta = f.metadata()
    text = open(corpus, encoding="utf-8").read()
    text = text[: int(len(text) * float(truncate))]
    vocab = json.loads(meta["vocab"])
    check(vocab == sorted(set(text)), f"metadata vocab: the corpus's {len(vocab)} sorted characters")
    check(int(meta["vocab_size"]) == len(vocab) and meta["format"] == "pt" and meta["mingpt"].startswith("mingpt "),
          "metadata vocab_size, format, mingpt")
    check("gpt_config:" in meta["config"] and "n_layer: " + meta["n_layer"] in meta["config"], "metadata config")

    m32, sd32, result = model_from(f32, meta)
    check(not result.missing_keys and not result.unexpected_keys, f"strict load_state_dict of {len(sd32)} tensors")
    with torch.no_grad():
        out32, _ = m32(tokens)
    err = (out32 - ref).abs().max().item() / scale
    check(err <= 1e-5, f"float32: logits within {err:.2e} of mingpt's (max |logit| {scale:.3f}; bound 1e-5)")

    for path, dtype, bits in ((bf16, torch.bfloat16, 8), (f16, torch.float16, 11)):
        name = str(dtype).replace("torch.", "")
        sd = load_file(path)
        same = all(sd[k].dtype == dtype and torch.equal(sd[k], sd32[k].to(dtype)) for k in sd32) and sd.keys() == sd32.keys()
        check(same, f"{name}: every tensor is torch's own rounding of the float32 file")
        m, _, _ = model_from(path, meta)
        rounded = GPT(*(int(meta[k]) for k in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd")))
        rounded.load_state_dict({k: v.to(dtype).float() for k, v in sd32.items()})
        rounded.eval()
        with torch.no_grad():
            out, _ = m(tokens)
            out_r, _ = rounded(tokens)
        check(torch.equal(out, out_r), f"{name}: logits equal those of the float32 model rounded by torch")
        err = (out - ref).abs().max().item() / scale
        bound = 16 * 2.0 ** -bits
        check(0 < err <= bound, f"{name}: logits within {err:.2e} of mingpt's fp32 ones (bound {bound:.1e})")
    print(f"export_check: {failures} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
