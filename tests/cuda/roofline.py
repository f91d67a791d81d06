#!/usr/bin/env python3
"""tests/cuda/roofline.py — on-paper roofline of one mingpt training step on one H100 SXM.

Walks the kernels the CUDA backend launches for one training step (model/gpt.c's op
sequence, kernels/cuda/*.cu as implemented) and counts, per op, the floating-point work
and the DRAM bytes (each kernel reads its inputs and writes its outputs once; tensors of
tens of MB do not stay in the 50 MB L2 between kernels). Prints the table used in
docs/gpu_performance.md. No GPU was used: these are estimates.

usage: python3 tests/cuda/roofline.py [--fp32] [--per-call] [--no-epilogues] [--round-activations]
                                      [--accumulate] [--cublas-attention]
  default: bf16 matmul inputs (use_amp), weights cast once per step (the weight-cast cache,
  Backend.cast_weights), bias / bias+GELU / bias gradient as cuBLASLt epilogues of the GEMMs;
  --per-call: every matmul rounds its weight itself, as before the cache;
  --fp32: fp32 matmul inputs (nothing rounded; attention on the cuBLAS path, the fused kernels
  being bf16/fp16 only);
  --no-epilogues: the bias add, bias+GELU, bias-gradient column sums and GELU backward as separate
  kernels (the cuBLAS path, as before cuBLASLt; also where cuBLASLt refuses a shape);
  --round-activations: the LayerNorm and attention outputs in fp32, rounded by each matmul that
  reads them (c_attn, c_fc, lm_head, attn.c_proj, forward and backward), as before their
  producers wrote the bf16 copies themselves (Backend.layernorm_forward_lp, attention_forward_lp);
  likewise the GELU output (mlp.c_proj, forward and dW) and c_fc's output gradient (c_fc's dout),
  which c_fc's and mlp.c_proj's epilogues now write only as bf16 (matmul_gelu_forward_lp's out_lp,
  matmul_backward_dgelu's dpre_lp), the attention backward's dqkv, which it now writes only as
  c_attn's bf16 dout operand (attention_backward_lp), and c_attn's output qkv, which its GEMM now
  writes only as bf16 and the fused attention kernels read so (matmul_forward_lp's out_lp, qkv_lp);
  --accumulate: a micro-step after the first of an optimizer step (gradient accumulation): the
  matmul backwards add into the parameter gradients (dW GEMMs with beta 1 read dweight; the
  bias-gradient epilogues write scratch and one kernel adds it to dbias). Default: the first
  micro-step after the gradients were zeroed (Backend.set_grad_write's GRAD_OVERWRITE: dweight
  and dbias written, never read), every step of the tutorial config (grad_accum_steps 1);
  --cublas-attention: attention on attention.cu's cuBLAS path in bf16 too (the CUDA backend's
  default, kernels/backend.h; without this flag bf16 counts the fused kernels of
  MINGPT_CUDA_ATTENTION=fused), c_attn's qkv then written and read in fp32
"""
import sys

# tutorial config (gpt2_train_cfg.yaml)
L, NH, C, T, B, V = 8, 8, 512, 128, 216, 65
hs = C // NH
BT = B * T
BTC = BT * C
BNT2 = B * NH * T * T
P = 12 * C * C * L + 13 * C * L + 2 * V * C + T * C + 2 * C   # parameters (25.35M)

PEAK_BF16 = 989e12      # dense bf16 tensor-core FLOP/s (H100 SXM)
PEAK_TF32 = 494e12      # not used: fp32 mode runs true fp32 GEMMs
PEAK_FP32 = 67e12       # fp32 CUDA-core FLOP/s (non-tensor; fp32 GEMMs, element-wise math)
BW = 3.35e12            # HBM3 bytes/s
# what a well-tuned kernel reaches in practice (for the "expected" column)
EFF_GEMM_BIG, EFF_GEMM_BATCHED, EFF_BW = 0.70, 0.35, 0.80

lp = 4 if "--fp32" in sys.argv else 2   # bytes of a matmul input element
fp32_mode = lp == 4
per_call = "--per-call" in sys.argv     # weights rounded per matmul (no weight-cast cache)
epilogues = "--no-epilogues" not in sys.argv   # cuBLASLt epilogues (kernels/cuda/matmul.cu)
# the LayerNorms and the attention write their outputs only as the matmuls' bf16 operands
# (kernels/backend.h)
ln_lp = not fp32_mode and "--round-activations" not in sys.argv
ln_out = lp if ln_lp else 4   # bytes such a producer writes per output element
# the matmul backwards overwrite their parameter gradients (the first micro-step of a step)
overwrite = "--accumulate" not in sys.argv
dw_bytes = 4 if overwrite else 8   # per dweight element: written (beta 0), or read and written
# the MLP's GELU output and c_fc's output gradient likewise, written by the GEMMs' epilogues (the
# fallback kernels without them) in bf16 only; the fp32 pre-activation (aux) is still kept
gelu_lp = ln_lp
gelu_out = lp if gelu_lp else 4
# the fused attention backward writes dqkv only as c_attn's bf16 dout operand (attention_backward_lp)
dqkv_out = ln_out
# the fused attention kernels (bf16/fp16 only, MINGPT_CUDA_ATTENTION=fused), or the cuBLAS path
fused_attention = not fp32_mode and "--cublas-attention" not in sys.argv
# c_attn's GEMM writes qkv only as bf16, which the fused attention kernels read (q, k, v)
# (Backend.attention_takes_lp)
qkv_lp = ln_lp and fused_attention
qkv_in = lp if qkv_lp else 4   # bytes per qkv element written by c_attn and read by the attention
ops = []   # (phase, name, flops, bytes, kind)


def op(phase, name, flops, nbytes, kind="mem"):
    ops.append((phase, name, float(flops), float(nbytes), kind))


def round_(phase, name, n):
    if not fp32_mode:
        op(phase, "round " + name, 0, n * (4 + lp))


def round_weight(phase, name, n):
    if per_call:
        round_(phase, name, n)


def matmul_fwd(phase, name, N, Cin, OC, bias=True, gelu=False, produced=False, out_lp=False):
    # gelu: the GELU output written as gelu_out bytes per element, the fp32 aux (pre) beside it;
    # out_lp: the output written only as bf16 (the epilogue's D; without it the fp32 GEMM output,
    # then one kernel adding the bias and rounding)
    out_b = lp if out_lp else 4
    round_weight(phase, name + " W", OC * Cin)
    if not produced:   # produced: its producer wrote x in bf16
        round_(phase, name + " x", N * Cin)
    if epilogues and (bias or gelu):
        # BIAS / GELU_AUX_BIAS epilogue on the fp32 accumulator: the bias read once; GELU also
        # writes the pre-activation (aux) beside D
        epi = " GEMM + bias+GELU epilogue" if gelu else " GEMM + bias epilogue"
        op(phase, name + epi, 2 * N * Cin * OC + (20 if gelu else 1) * N * OC,
           lp * (N * Cin + OC * Cin) + (4 + gelu_out if gelu else out_b) * N * OC + 4 * OC, "gemm")
        return
    op(phase, name + " GEMM", 2 * N * Cin * OC, lp * (N * Cin + OC * Cin) + 4 * N * OC, "gemm")
    if gelu:   # read the GEMM's pre, write it back biased, write the GELU output
        op(phase, name + " bias+GELU", 20 * N * OC, (8 + gelu_out) * N * OC)
    elif bias:
        op(phase, name + (" bias + round" if out_lp else " bias"), N * OC, (4 + out_b) * N * OC)


def matmul_bwd(phase, name, N, Cin, OC, bias=True, dinp=True, dgelu=None, produced=False, dout_produced=False):
    # dout_produced: its producer wrote dout in bf16 (matmul_backward_dgelu's dpre_lp)
    if not dout_produced:
        round_(phase, name + " dout", N * OC)
    if dinp:
        round_weight(phase, name + " W", OC * Cin)
        # dinp overwritten (beta 0): written, never read
        if dgelu:
            # matmul_backward_dgelu: DGELU_BGRAD epilogue, gelu'(pre) applied to the accumulator
            # (pre read, fp32), the row sums of the result (the previous layer's bias gradient)
            # beside (into the bias gradient itself when overwriting, else into scratch added to
            # it); D (c_fc's output gradient) written as gelu_out bytes per element
            op(phase, name + " dinp GEMM + dGELU+bgrad epilogue", 2 * N * Cin * OC + 21 * N * Cin,
               lp * (N * OC + OC * Cin) + (4 + gelu_out) * N * Cin + 4 * Cin, "gemm")
            if not overwrite:
                op(phase, dgelu + " dbias accumulate", Cin, 12 * Cin)
        else:
            op(phase, name + " dinp GEMM", 2 * N * Cin * OC, lp * (N * OC + OC * Cin) + 4 * N * Cin, "gemm")
    if not produced:
        round_(phase, name + " x", N * Cin)
    if epilogues and bias:
        # BGRADB epilogue: the column sums of the dout operand already in the GEMM (4 OC
        # written): into dbias itself when overwriting, else into scratch that one kernel then
        # adds to dbias (read 8 OC, write 4 OC)
        op(phase, name + " dW GEMM + bgrad epilogue", 2 * N * Cin * OC + N * OC,
           lp * (N * OC + N * Cin) + dw_bytes * OC * Cin + 4 * OC, "gemm")
        if not overwrite:
            op(phase, name + " dbias accumulate", OC, 12 * OC)
        return
    op(phase, name + " dW GEMM", 2 * N * Cin * OC, lp * (N * OC + N * Cin) + dw_bytes * OC * Cin, "gemm")
    if bias:
        op(phase, name + " dbias colsum", N * OC, 4 * N * OC)


# The fused attention (kernels/cuda/flash_attention.cu; bf16/fp16, hs a multiple of 16 up to
# 128, any T: the tutorial's hs 64, T 128): per head, the tiles it computes (16x32 units of a
# warp: 16 query rows x 32 keys; rows past T of a partial tile are computed too) and the rows
# of q/k/v/dy it loads (q, k, v as c_attn's bf16 output, dy fp32; a k/v tile is loaded again by every query tile
# that needs it; counted as DRAM reads, though a head's 32 KB of k and v may well stay in L2).
FA_ROWS, FA_COLS = 64, 32


def fused_tiles():
    fq = fkv = 0          # forward and dq kernel: units of work, k/v rows loaded
    for q0 in range(0, T, FA_ROWS):
        nk = (min(q0 + FA_ROWS, T) - 1) // FA_COLS + 1
        for kt in range(nk):
            k0 = kt * FA_COLS
            fkv += min(FA_COLS, T - k0)
            fq += sum(1 for w in range(FA_ROWS // 16) if q0 + 16 * w < T and q0 + 16 * w + 15 >= k0)
    dkv = dq_rows = 0     # dk/dv kernel: units of work, q/dy rows loaded
    nq = (T + FA_COLS - 1) // FA_COLS
    for k0 in range(0, T, FA_ROWS):
        for qt in range(k0 // FA_COLS, nq):
            q0 = qt * FA_COLS
            dq_rows += min(FA_COLS, T - q0)
            dkv += sum(1 for w in range(FA_ROWS // 16) if k0 + 16 * w < T and k0 + 16 * w <= q0 + FA_COLS - 1)
    return fq * 16 * FA_COLS, fkv, dkv * 16 * FA_COLS, dq_rows


def attention_fwd(phase):
    if fused_attention:   # one fused kernel: q k^T and P v (wmma) on the computed tiles only
        pairs, kv_rows, _, _ = fused_tiles()
        BNH = B * NH
        op(phase, "attn fused forward (flash)", 4 * pairs * hs * BNH,
           qkv_in * BTC + 2 * qkv_in * hs * kv_rows * BNH + (4 + ln_out) * BTC + 4 * BNH * T, "bgemm")
        return
    op(phase, "attn permute q,k,v", 0, 4 * 3 * BTC + lp * 3 * BTC)
    op(phase, "attn q k^T GEMM (batched)", 2 * BNT2 * hs, lp * 2 * BTC + 4 * BNT2, "bgemm")
    op(phase, "attn causal softmax+dropout", 8 * BNT2, 4 * BNT2 * 2 + lp * BNT2 * (0 if fp32_mode and False else 1))
    op(phase, "attn att v GEMM (batched)", 2 * BNT2 * hs, lp * (BNT2 + BTC) + 4 * BTC, "bgemm")
    op(phase, "attn unpermute", 0, 8 * BTC)


def attention_bwd(phase):
    if fused_attention:   # dq kernel (S, dP recomputed, dq; D = rowsum(dy y)), then the dk/dv kernel
        # dq, dk, dv written once each: as c_attn's bf16 dout operand (attention_backward_lp), no
        # fp32 dqkv
        pairs, kv_rows, pairs_kv, q_rows = fused_tiles()
        BNH = B * NH
        op(phase, "attn fused dq (+ D)", 6 * pairs * hs * BNH,
           (qkv_in + 2 * 4) * BTC + 2 * qkv_in * hs * kv_rows * BNH + dqkv_out * BTC + 3 * 4 * BNH * T, "bgemm")
        op(phase, "attn fused dk, dv", 8 * pairs_kv * hs * BNH,
           2 * qkv_in * BTC + (qkv_in + 4) * hs * q_rows * BNH + 2 * dqkv_out * BTC + 2 * 4 * q_rows * BNH, "bgemm")
        return
    op(phase, "attn permute q,k,v + dout", 0, 4 * 4 * BTC + lp * 4 * BTC)
    op(phase, "attn dropout(att) operand", BNT2, 4 * BNT2 + lp * BNT2)
    op(phase, "attn dv = att^T dy GEMM", 2 * BNT2 * hs, lp * (BNT2 + BTC) + 4 * BTC, "bgemm")
    op(phase, "attn datt = dy v^T GEMM", 2 * BNT2 * hs, lp * 2 * BTC + 4 * BNT2, "bgemm")
    op(phase, "attn softmax backward", 6 * BNT2, 8 * BNT2 + lp * BNT2)
    op(phase, "attn dq, dk GEMMs", 4 * BNT2 * hs, lp * (2 * BNT2 + 2 * BTC) + 8 * BTC, "bgemm")
    op(phase, "attn unpermute dq,dk,dv -> dqkv", 0, 4 * 3 * BTC + 4 * 3 * BTC)


# ---------------------------------------------------------------- forward
if not per_call and not fp32_mode:   # the weight-cast cache: the whole flat buffer, once per step
    op("fwd", "cast weights (all P, once per step)", 0, P * (4 + lp))
op("fwd", "encoder + dropout", 2 * BTC, 4 * BTC * 2 + 8 * BTC)
op("fwd", "layernorm ln_1 (layer 0)", 8 * BTC, (4 + ln_out) * BTC)
for l in range(L):
    ph = "fwd/layer"
    matmul_fwd(ph, "c_attn", BT, C, 3 * C, produced=ln_lp, out_lp=qkv_lp)
    attention_fwd(ph)
    matmul_fwd(ph, "attn.c_proj", BT, C, C, produced=ln_lp)
    # the branch's dropout inside the residual add (Backend.residual_dropout_layernorm_forward):
    # read a and the branch, write res and the LayerNorm's output; the branch is not written back
    op(ph, "residual + dropout + ln_2", 10 * BTC, (12 + ln_out) * BTC)
    matmul_fwd(ph, "c_fc", BT, C, 4 * C, gelu=True, produced=ln_lp)
    matmul_fwd(ph, "mlp.c_proj", BT, 4 * C, C, produced=gelu_lp)
    op(ph, "residual + dropout + next LN", 10 * BTC, (12 + ln_out) * BTC)
matmul_fwd("fwd", "lm_head", BT, C, V, bias=False, produced=ln_lp)
op("fwd", "cross-entropy + dlogits (fused)", 7 * BT * V, 8 * BT * V)

# ---------------------------------------------------------------- backward
# Activation gradients (dln, dfch_gelu, dfch, datty, dqkv, dbranch) are overwritten by the one op
# that writes each (kernels/backend.h): no zeroing, and each is written without being read.
# dres accumulates through the LayerNorm backwards (read + write) from one zeroing.
# A LayerNorm backward is one kernel (kernels/cuda/layernorm.cu): dinp (read dout, inp, dinp;
# write dinp: 16 BTC) then the chunk's column sums re-reading dout and inp (8 BTC, counted here
# although the block has just read those rows and L2 likely serves them); the chunk partials
# and their in-order finalize are 2C per 32 rows, negligible.
# The LayerNorm backward that finishes the gradient entering a residual branch's dropout also
# writes the branch's gradient through the mask (Backend.layernorm_backward_dropout), as the
# c_proj backward's operand (lp bytes: bf16, or fp32 in fp32 mode) which that matmul takes as
# it is (no dropout pass, no rounding of its dout); before block 0 the embedding's, in fp32 for
# the encoder backward.
matmul_bwd("bwd", "lm_head", BT, C, V, bias=False, produced=ln_lp)
op("bwd", "zero dres + ln_f backward + dropout", 21 * BTC, 4 * BTC + 16 * BTC + 8 * BTC + lp * BTC)
for l in range(L):
    ph = "bwd/layer"
    if epilogues:   # matmul_backward_dgelu: GELU backward and c_fc's bias gradient in c_proj's dinp GEMM
        matmul_bwd(ph, "mlp.c_proj", BT, 4 * C, C, dgelu="c_fc", produced=gelu_lp, dout_produced=True)
        matmul_bwd(ph, "c_fc", BT, C, 4 * C, bias=False, produced=ln_lp, dout_produced=gelu_lp)
    else:   # (the fused op's fallback: the GEMM, GELU backward, column sums, then dpre rounded)
        matmul_bwd(ph, "mlp.c_proj", BT, 4 * C, C, produced=gelu_lp, dout_produced=True)
        op(ph, "GELU backward", 20 * 4 * BTC, 48 * BTC)
        matmul_bwd(ph, "c_fc", BT, C, 4 * C, produced=ln_lp)
    op(ph, "ln_2 backward + dropout", 21 * BTC, 16 * BTC + 8 * BTC + lp * BTC)
    matmul_bwd(ph, "attn.c_proj", BT, C, C, produced=ln_lp, dout_produced=True)
    attention_bwd(ph)
    matmul_bwd(ph, "c_attn", BT, C, 3 * C, produced=ln_lp, dout_produced=ln_lp)
    if l < L - 1:
        op(ph, "ln_1 backward + dropout", 21 * BTC, 16 * BTC + 8 * BTC + lp * BTC)
    else:   # block 0, the last one back: the embedding dropout's gradient, fp32
        op(ph, "ln_1 backward (layer 0) + embedding dropout", 21 * BTC, 16 * BTC + 8 * BTC + 4 * BTC)
# (the encoder backward's token bucketing runs on the device in one block: a radix pass reads
# the 110 KB of tokens twice and writes 221 KB of sorted keys, negligible next to the 8 BTC terms)
op("bwd", "encoder backward", 0, 8 * BTC + 8 * BTC)

# ---------------------------------------------------------------- optimizer
op("opt", "zero grads", 0, 4 * P)
op("opt", "sum of squares (norm, overflow check)", 2 * P, 4 * P)
# AdamW: one launch over every tensor (adamw_segments_kernel), the unscale / clip factor applied
# as it reads the gradients (no pass of its own); its segment table (24 bytes per tensor, 2.4 KB
# for the tutorial) is read from cache, not counted
op("opt", "AdamW (unscale + clip folded in)", 13 * P, 28 * P)


def t_bound(flops, nbytes, kind):
    if kind in ("gemm", "bgemm"):
        peak = PEAK_FP32 if fp32_mode else PEAK_BF16
        return max(flops / peak, nbytes / BW)
    return max(flops / PEAK_FP32, nbytes / BW)


def t_expected(flops, nbytes, kind):
    if kind in ("gemm", "bgemm"):
        peak = PEAK_FP32 if fp32_mode else PEAK_BF16
        eff = EFF_GEMM_BIG if kind == "gemm" else EFF_GEMM_BATCHED
        return max(flops / (peak * eff), nbytes / (BW * EFF_BW))
    return max(flops / PEAK_FP32, nbytes / (BW * EFF_BW))


groups = {}
for ph, name, fl, by, kind in ops:
    key = (ph, name)
    g = groups.setdefault(key, [0, 0.0, 0.0, kind, 0.0, 0.0])
    g[0] += 1
    g[1] += fl
    g[2] += by
    g[4] += t_bound(fl, by, kind)
    g[5] += t_expected(fl, by, kind)

tot_f = sum(g[1] for g in groups.values())
tot_b = sum(g[2] for g in groups.values())
tot_t = sum(g[4] for g in groups.values())
tot_e = sum(g[5] for g in groups.values())
gemm_f = sum(g[1] for g in groups.values() if g[3] != "mem")
gemm_t = sum(g[4] for g in groups.values() if g[3] != "mem")
mem_t = sum(g[4] for g in groups.values() if g[3] == "mem")
gemm_e = sum(g[5] for g in groups.values() if g[3] != "mem")
mem_e = sum(g[5] for g in groups.values() if g[3] == "mem")

print(f"config: L {L}, NH {NH}, C {C}, T {T}, B {B}, V {V}: {BT} tokens/step, {P/1e6:.2f}M parameters, "
      f"matmul inputs {'fp32' if fp32_mode else 'bf16'}"
      f"{'' if fp32_mode else (', weights rounded per matmul' if per_call else ', weights cast once per step')}"
      f"{', cuBLASLt epilogues' if epilogues else ', bias/GELU/bias-gradient kernels (no epilogues)'}"
      f"{', fused attention' if fused_attention else ', cuBLAS attention'}")
print(f"{'phase':10} {'op (x count)':46} {'GFLOP':>9} {'MB':>9} {'bound ms':>9} {'exp. ms':>8}")
for (ph, name), (n, fl, by, kind, tb, te) in groups.items():
    label = f"{name} x{n}" if n > 1 else name
    print(f"{ph:10} {label:46} {fl/1e9:9.2f} {by/1e6:9.1f} {tb*1e3:9.3f} {te*1e3:8.3f}")
att = [g for (ph, name), g in groups.items() if name.startswith("attn ")]
print(f"\nattention ({'fused kernels: forward, dq, dk/dv' if fused_attention else 'cuBLAS path: permutes, batched GEMMs, softmax'}): "
      f"{sum(g[0] for g in att)} launches, {sum(g[2] for g in att)/1e9:.1f} GB, {sum(g[4] for g in att)*1e3:.1f} ms bound, "
      f"{sum(g[5] for g in att)*1e3:.1f} ms expected")
model_flops = 6 * P * BT + 12 * L * T * C * BT   # PaLM's count: 6N per token + attention
print(f"\ntotal: {tot_f/1e12:.3f} TFLOP executed ({gemm_f/1e12:.3f} in GEMMs), {tot_b/1e9:.1f} GB moved")
print(f"roofline bound: {tot_t*1e3:.1f} ms/step (GEMMs {gemm_t*1e3:.1f} ms, memory-bound ops {mem_t*1e3:.1f} ms)")
print(f"expected:       {tot_e*1e3:.1f} ms/step (GEMMs {gemm_e*1e3:.1f} ms at {EFF_GEMM_BIG:.0%}/{EFF_GEMM_BATCHED:.0%} "
      f"of peak, memory-bound ops {mem_e*1e3:.1f} ms at {EFF_BW:.0%} of {BW/1e12:.2f} TB/s)")
print(f"model FLOPs (6N + 12 L T C per token): {model_flops/1e12:.3f} TFLOP/step")
for label, t in (("bound", tot_t), ("expected", tot_e)):
    print(f"{label:9}: {BT/t:,.0f} tokens/s, MFU {model_flops/t/PEAK_BF16:.1%} of {PEAK_BF16/1e12:.0f} TFLOP/s")
print(f"100% MFU would be {model_flops/PEAK_BF16*1e3:.2f} ms/step, {BT/(model_flops/PEAK_BF16):,.0f} tokens/s")
