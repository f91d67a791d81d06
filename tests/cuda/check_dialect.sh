#!/bin/sh
# tests/cuda/check_dialect.sh — the gate on the CUDA kernel dialect (kernels/cuda/emu/README.md):
# every kernels/cuda/*.cu / *.cuh (the emulation layer in kernels/cuda/emu/ excepted) must
# launch through LAUNCH(...) only, and use no inline PTX, no CUB/Thrust and no logic under
# __CUDA_ARCH__, and reach the tensor cores only through nvcuda::wmma, so that the emulator
# runs exactly the code the GPU runs.
# Comments are stripped before matching (a comment may name what is forbidden).
# usage: check_dialect.sh [DIR]   (default kernels/cuda of this checkout)
dir=${1:-$(dirname "$0")/../../kernels/cuda}
files=$(ls "$dir"/*.cu "$dir"/*.cuh 2>/dev/null)
[ -n "$files" ] || { echo "check_dialect: no CUDA sources found"; exit 1; }
fail=0
for f in $files; do
    # strip // and /* */ comments and string literals, keep line numbers
    code=$(sed -e 's://.*$::' "$f" | awk '
        { line = $0; out = "";
          while (length(line) > 0) {
            if (incom) { i = index(line, "*/"); if (i == 0) { line = ""; break } line = substr(line, i + 2); incom = 0 }
            else { i = index(line, "/*"); if (i == 0) { out = out line; line = "" } else { out = out substr(line, 1, i - 1); line = substr(line, i + 2); incom = 1 } }
          }
          gsub(/"([^"\\]|\\.)*"/, "\"\"", out); print NR ": " out }')
    check() {  # pattern what
        hits=$(printf '%s\n' "$code" | grep -E "$1")
        if [ -n "$hits" ]; then
            echo "check_dialect: $f: $2:"; printf '%s\n' "$hits" | sed 's/^/    /'; fail=1
        fi
    }
    check '<<<' 'kernel launch with <<<...>>> (use LAUNCH(kernel, grid, block[, smem[, stream]])(args...))'
    check '(^|[^A-Za-z0-9_])(asm|__asm__|__asm)([^A-Za-z0-9_]|$)' 'inline assembly / PTX'
    check '(cub/|thrust/|cub::|thrust::|<cub>|<thrust>)' 'CUB / Thrust'
    check '__CUDA_ARCH__' '__CUDA_ARCH__ (architecture-specific logic the emulator cannot run)'
    check 'extern[[:space:]]+__shared__' 'extern __shared__ (use DYNAMIC_SHARED(T, name) from kernels/cuda/emu/launch.cuh)'
    # tensor cores only through nvcuda::wmma (kernels/cuda/emu/wmma_emu.h emulates it)
    check '(mma\.sync|wgmma|cp\.async|__nanosleep)' 'tensor-core PTX / async-copy / spin primitives the emulator lacks (use nvcuda::wmma)'
done
n=$(echo "$files" | wc -l)
if [ $fail -ne 0 ]; then echo "check_dialect: FAILED"; exit 1; fi
echo "check_dialect: $n CUDA sources follow the dialect (LAUNCH only; no <<<, asm, CUB/Thrust, __CUDA_ARCH__)"
