#!/bin/sh
# tests/cuda/check_spills.sh LOG — fails when the `nvcc --resource-usage` log of the CUDA
# build reports a kernel that spills registers or uses local memory (stack frame), or when
# the log is missing or empty. Prints one summary line per architecture.
log=${1:?usage: check_spills.sh resource-usage.log}
[ -s "$log" ] || { echo "check_spills: $log is missing or empty (build the CUDA objects first)"; exit 1; }
bad=$(grep -E "[1-9][0-9]* bytes (spill stores|spill loads|stack frame)" "$log")
if [ -n "$bad" ]; then
    echo "check_spills: register spills / local memory in $log:"
    echo "$bad"
    exit 1
fi
for arch in sm_80 sm_90; do
    n=$(grep -c "Compiling entry function .* for '$arch'" "$log")
    [ "$n" -gt 0 ] || { echo "check_spills: no kernels compiled for $arch in $log"; exit 1; }
    maxr=$(awk -v a="'$arch'" '/Compiling entry function/ {cur = ($NF == a)} cur && /Used [0-9]+ registers/ {for (i = 1; i <= NF; i++) if ($i == "Used") {r = $(i+1) + 0; if (r > m) m = r}} END {print m + 0}' "$log")
    echo "check_spills: $arch: $n kernels, 0 bytes spilled, at most $maxr registers per thread ($log)"
done
