#!/usr/bin/env bash
# oneDNN 3.x as an optional GEMM library (kernels/cpu/gemm_dnnl3.h) beside Debian's linked oneDNN
# 2.x: --version says where it is or why not (MINGPT_DNNL3_LIB pointing nowhere, or at a library
# that is not oneDNN 3); where `make onednn3` installed it, the dynamic loader binds every symbol
# libdnnl.so.3 needs from oneDNN to libdnnl.so.3 itself, none to libdnnl.so.2 (RTLD_DEEPBIND:
# without it the two export ~180 of the same names, brgemm_desc_init and dnnl_primitive_execute
# among them, and 3.x's own calls would land in 2.x's code).
cd "$(dirname "$0")/.." && source tests/lib.sh
M=$MINGPT

# make test SAN=1: oneDNN 3 is refused before any library is looked for (ASan aborts on RTLD_DEEPBIND)
out=$(MINGPT_DNNL3_LIB=/no/such/libdnnl.so.3 $M --version 2>&1)
if grep -qxF 'oneDNN 3: not used in a sanitizer build (ASan refuses RTLD_DEEPBIND)' <<<"$out"; then
  ok "sanitizer build: oneDNN 3 refused, and --version says why"
  grep -q '^GEMM: .*; oneDNN 3 not found' <<<"$out" && ok "GEMM line: oneDNN 3 not found" || bad "GEMM line without oneDNN 3" "$out"
  skip no-onednn3 "ASan refuses RTLD_DEEPBIND: oneDNN 3 stays off in a sanitizer build"
  finish; exit
fi
grep -qxF 'oneDNN 3: no oneDNN 3 at MINGPT_DNNL3_LIB=/no/such/libdnnl.so.3 (no such file)' <<<"$out" \
  && ok "MINGPT_DNNL3_LIB to nowhere: said, not used" || bad "MINGPT_DNNL3_LIB to nowhere" "$out"
grep -q '^GEMM: .*; oneDNN 3 not found' <<<"$out" && ok "GEMM line: oneDNN 3 not found" || bad "GEMM line without oneDNN 3" "$out"
dnnl2=$(ldd "$M" | awk '/libdnnl\.so\.2/ {print $3}')
if [ -n "$dnnl2" ]; then
  out=$(MINGPT_DNNL3_LIB=$dnnl2 $M --version 2>&1)
  grep -q "^oneDNN 3: $dnnl2 is not oneDNN 3.x" <<<"$out" && ok "oneDNN 2.x given as oneDNN 3: refused, said" \
    || bad "oneDNN 2.x given as oneDNN 3" "$out"
fi

if [ ! -f build/onednn3/.ready ]; then
  skip no-onednn3 "oneDNN 3 is opt-in (make onednn3) and not installed here"
  finish; exit
fi
lib=$PWD/build/onednn3/lib/libdnnl.so.3
out=$($M --version 2>&1)
grep -Eq "^oneDNN 3: 3\.[0-9]+\.[0-9]+ \(.*build/onednn3/lib/libdnnl\.so\.3\)$" <<<"$out" \
  && ok "found next to mingpt: $(grep '^oneDNN 3:' <<<"$out")" || bad "oneDNN 3 found next to mingpt" "$out"
grep -Eq '^GEMM: .* \+ oneDNN 2\.[0-9.]+ \(.*\) \+ oneDNN 3\.[0-9.]+,' <<<"$out" && ok "GEMM line names both oneDNNs" \
  || bad "GEMM line names both oneDNNs" "$out"
MINGPT_DNNL3_LIB=$lib $M --version 2>&1 | grep -q "^oneDNN 3: 3\..* ($lib)$" && ok "MINGPT_DNNL3_LIB names it" \
  || bad "MINGPT_DNNL3_LIB names it" "$(MINGPT_DNNL3_LIB=$lib $M --version 2>&1)"
# The loader's bindings of libdnnl.so.3's references (all made at dlopen: RTLD_NOW).
log=$(LD_DEBUG=bindings $M --version 2>&1 >/dev/null | grep 'binding file .*libdnnl\.so\.3 ')
own=$(grep -c 'to [^ ]*libdnnl\.so\.3 \[' <<<"$log")
to2=$(grep 'to [^ ]*libdnnl\.so\.2 \[' <<<"$log")
[ "$own" -gt 100 ] && ok "libdnnl.so.3 binds its own symbols ($own bindings)" || bad "libdnnl.so.3 binds its own symbols" "$own"
[ -z "$to2" ] && ok "no symbol of libdnnl.so.3 bound to libdnnl.so.2" \
  || bad "symbols of libdnnl.so.3 bound to libdnnl.so.2" "$(head -5 <<<"$to2")"
finish
