#!/usr/bin/env python3
"""tests/export_check.py — `mingpt export`'s files read by the safetensors library and run in an
independent NumPy minGPT (tests/np_gpt.py). Run by tests/test_export.sh with build/pyenv's python
(tests/tools/pyenv.sh: numpy, safetensors and ml_dtypes from PyPI; no PyTorch).

    export_check.py LOGITS F32.safetensors BF16.safetensors F16.safetensors CORPUS TRUNCATE FIXTURE

FIXTURE is tests/fixtures/gpt_tiny.bin, PyTorch's logits of a small minGPT (tests/gen_gpt_fixture.py):
the NumPy model must reproduce them first (within 1e-5 of the largest |logit|), so it is checked
against PyTorch once, offline, and needs no PyTorch here.

LOGITS is tests/tools/logits' output for the snapshot the files were exported from: mingpt's own
logits (B, T, V) on fixed tokens. Each file is read with safetensors.numpy.load_file; its keys
must be exactly minGPT's state_dict (the attn.bias causal-mask buffers included) with minGPT's
shapes, and the NumPy model's logits on the same tokens must equal mingpt's within
  float32   1e-5 of the largest |logit| (the reference computes in float64);
  bfloat16  the file's tensors are bitwise the round-to-nearest-even of the float32 file's
  float16   (ml_dtypes' and NumPy's casts, as torch's .to(dtype)), and against mingpt's fp32
            logits they agree within 2^-8 (bf16: 8 mantissa bits) or 2^-11 (fp16: 11) times 16
            (error growth through the layers of this small model), relative to the largest |logit|.
The metadata must give the model's shape and the corpus's vocabulary (sorted distinct
characters of its first TRUNCATE fraction, as mingpt and chargpt build it).
"""
import json
import os
import sys

import ml_dtypes
import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import np_gpt  # noqa: E402

failures = 0


def check(ok, what):
    global failures
    print(f"  {'ok  ' if ok else 'FAIL'} {what}")
    failures += 0 if ok else 1


def read_logits(path):
    with open(path, "rb") as f:
        B, T, V = np.fromfile(f, "<i4", 3)
        tokens = np.fromfile(f, "<i4", B * T).reshape(B, T)
        logits = np.fromfile(f, "<f4", B * T * V).reshape(B, T, V)
    return tokens, logits.astype(np.float64)


def read_fixture(path):
    """gpt_tiny.bin (tests/fixtures/README.md): header, idx, targets, flat parameters, logits."""
    with open(path, "rb") as f:
        V, T, L, NH, C, B = (int(v) for v in np.fromfile(f, "<i4", 6))
        idx = np.fromfile(f, "<i4", B * T).reshape(B, T)
        np.fromfile(f, "<i4", B * T)   # targets
        shapes = np_gpt.state_dict_shapes(V, T, L, C)
        keys = [k for k in np_gpt.state_dict_keys(L) if not k.endswith(".attn.bias")]
        sd = {k: np.fromfile(f, "<f4", int(np.prod(shapes[k]))).reshape(shapes[k]) for k in keys}
        logits = np.fromfile(f, "<f4", B * T * V).reshape(B, T, V)
    return (L, NH), idx, sd, logits.astype(np.float64)


def main():
    logits_path, f32, bf16, f16, corpus, truncate, fixture = sys.argv[1:8]

    (L, NH), idx, sd, ref = read_fixture(fixture)
    err = np.abs(np_gpt.forward(sd, idx, L, NH) - ref).max() / np.abs(ref).max()
    check(err <= 1e-5, f"the NumPy minGPT reproduces PyTorch's logits of {os.path.basename(fixture)} within {err:.2e}")

    tokens, ref = read_logits(logits_path)
    scale = np.abs(ref).max()
    with safe_open(f32, "numpy") as f:
        meta = f.metadata()
    text = open(corpus, encoding="utf-8").read()
    text = text[: int(len(text) * float(truncate))]
    vocab = json.loads(meta["vocab"])
    check(vocab == sorted(set(text)), f"metadata vocab: the corpus's {len(vocab)} sorted characters")
    check(int(meta["vocab_size"]) == len(vocab) and meta["format"] == "pt" and meta["mingpt"].startswith("mingpt "),
          "metadata vocab_size, format, mingpt")
    check("gpt_config:" in meta["config"] and "n_layer: " + meta["n_layer"] in meta["config"], "metadata config")

    V, T, L, NH, C = (int(meta[k]) for k in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"))
    shapes = np_gpt.state_dict_shapes(V, T, L, C)
    sd32 = load_file(f32)
    check(sorted(sd32) == sorted(np_gpt.state_dict_keys(L)), f"float32: exactly minGPT's {len(shapes)} state_dict keys")
    check(all(sd32[k].shape == shapes[k] and sd32[k].dtype == np.float32 for k in sd32 if k in shapes),
          "float32: every tensor float32 of minGPT's shape")
    mask = np.tril(np.ones((T, T), dtype=np.float32)).reshape(1, 1, T, T)
    check(all(np.array_equal(sd32[k], mask) for k in sd32 if k.endswith(".attn.bias")),
          "float32: the attn.bias buffers are the causal mask")
    out32 = np_gpt.forward(sd32, tokens, L, NH)
    err = np.abs(out32 - ref).max() / scale
    check(err <= 1e-5, f"float32: logits within {err:.2e} of mingpt's (max |logit| {scale:.3f}; bound 1e-5)")

    for path, dtype, bits in ((bf16, ml_dtypes.bfloat16, 8), (f16, np.float16, 11)):
        name = np.dtype(dtype).name
        sd = load_file(path)
        rounded = {k: v.astype(dtype) for k, v in sd32.items()}
        same = sd.keys() == sd32.keys() and all(
            sd[k].dtype == np.dtype(dtype) and sd[k].shape == rounded[k].shape and
            sd[k].tobytes() == rounded[k].tobytes() for k in sd32)
        check(same, f"{name}: every tensor is the round-to-nearest-even of the float32 file")
        out = np_gpt.forward(sd, tokens, L, NH)
        err = np.abs(out - ref).max() / scale
        bound = 16 * 2.0 ** -bits
        check(0 < err <= bound, f"{name}: logits within {err:.2e} of mingpt's fp32 ones (bound {bound:.1e})")
    print(f"export_check: {failures} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
