"""minGPT's flat parameter layout as mingpt stores it (model/gpt.c, gpt_param_table): the one
list the fixture generators (tests/gen_gpt_fixture.py, tests/gen_bf16_fixture.py) share."""


def param_shapes(V, T, L, C):
    """(name, shape) in flat layout order; Linear weights are (out, in)."""
    s = [("transformer.wte.weight", (V, C)), ("transformer.wpe.weight", (T, C))]
    for l in range(L):
        p = f"transformer.h.{l}."
        s += [(p + "ln_1.weight", (C,)), (p + "ln_1.bias", (C,)),
              (p + "attn.c_attn.weight", (3 * C, C)), (p + "attn.c_attn.bias", (3 * C,)),
              (p + "attn.c_proj.weight", (C, C)), (p + "attn.c_proj.bias", (C,)),
              (p + "ln_2.weight", (C,)), (p + "ln_2.bias", (C,)),
              (p + "mlp.c_fc.weight", (4 * C, C)), (p + "mlp.c_fc.bias", (4 * C,)),
              (p + "mlp.c_proj.weight", (C, 4 * C)), (p + "mlp.c_proj.bias", (C,))]
    s += [("transformer.ln_f.weight", (C,)), ("transformer.ln_f.bias", (C,)),
          ("lm_head.weight", (V, C))]
    return s
