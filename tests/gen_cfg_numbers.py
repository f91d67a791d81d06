#!/usr/bin/python3
# tests/gen_cfg_numbers.py — regenerates tests/fixtures/cfg_numbers.txt: how the readers that
# config/cfg_number.h copies read a set of strings, the reference tests/test_cfg_text.c checks
# mingpt's grammars against:
#   yaml     PyYAML's SafeLoader resolver and constructor with OmegaConf's float resolver added
#            and its timestamp resolver removed (omegaconf._utils.get_yaml_loader), applied to the
#            string as a plain scalar;
#   pyint    CPython's int(s);
#   pyfloat  CPython's float(s).
# Strings: every string of up to 3 characters over a small alphabet, then hand-picked ones.
# Output lines, tab-separated: kind, string, then `null`, `bool 0|1`, `int N`, `float repr(x)`,
# `str`, or `error` (the constructor raises) for yaml; `ok N|repr(x)` or `bad` for the others.
# Deterministic; needs Debian's python3-yaml:  /usr/bin/python3 tests/gen_cfg_numbers.py
import itertools
import os
import re

import yaml


class OmegaConfLoader(yaml.SafeLoader):
    pass


OmegaConfLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:
         [-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?[0-9][0-9_]*(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)
OmegaConfLoader.yaml_implicit_resolvers = {
    key: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for key, resolvers in OmegaConfLoader.yaml_implicit_resolvers.items()
}

HAND = """0 -0 +0 00 0_ 0__ 08 017 0o17 0_17 0b1010 0b_ -0b11 0x1F 0X1F 0x_ 0xg 1_000 1__000 _1 1_
9223372036854775807 9223372036854775808 -9223372036854775808 -9223372036854775809
18446744073709551615 18446744073709551616 123456789012345678901234567890 0x7fffffffffffffff
0x8000000000000000 1:30 1:60 1:7 190:20:30 -1:30 1:30.5 +1:30.5 1:30. 1:3_0.5 1e3 1E3 1e-3 1.0e+3
1.e3 .5e3 .5e-3 .5E+3 1e1_0 1_0.5 1._5 1_.5 +.5 -.5 5. . ._ ._5 .e3 e3 1e 1e+ 1.5e 1.5e+ .inf .Inf
.INF -.inf +.inf .iNf .nan .NaN .NAN -.nan inf Inf INF -inf +inf infinity Infinity -iNfInItY nan NaN
-nan infinit infx nanx null Null NULL nUll ~ yes Yes YES yEs no No NO true True TRUE tRue false False
FALSE on On ON off Off OFF y Y n N 1.5 -1.5 +1.5 0.1 1e-08 1e16 1e400 -1e400 4.9e-324 0.0 -0.0
2.5e-3 12_34.5_6 1_2e1_0""".split()
SPACED = [" 1", "1 ", " 1.5 ", "  -2  ", " 1_0 ", "1 2", " inf ", " nan", "+ 1", "- 1", " ", ""]


def yaml_type(s):
    loader = OmegaConfLoader("")
    tag = loader.resolve(yaml.ScalarNode, s, (True, False))
    try:
        v = loader.construct_object(yaml.ScalarNode(tag, s))
    except ValueError:
        return "error"
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool %d" % v
    if isinstance(v, int):
        return "int %d" % v
    if isinstance(v, float):
        return "float %r" % v
    return "str"


def python(convert, s):
    try:
        v = convert(s)
    except ValueError:
        return "bad"
    return "ok %r" % v


def main():
    alphabet = "019_.e+-:x"
    strings = ["".join(t) for n in range(1, 4) for t in itertools.product(alphabet, repeat=n)]
    strings += [s for s in HAND if s not in strings]
    lines = []
    for s in strings:
        lines.append("yaml\t%s\t%s" % (s, yaml_type(s)))
    for s in strings + SPACED:
        lines.append("pyint\t%s\t%s" % (s, python(int, s)))
        lines.append("pyfloat\t%s\t%s" % (s, python(float, s)))
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "cfg_numbers.txt")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s: %d lines" % (out, len(lines)))


if __name__ == "__main__":
    main()
