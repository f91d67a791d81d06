#!/usr/bin/env bash
# tests/cuda/gpu_bundle.sh OUTDIR — packs what tests/cuda/gpu_check.sh and tests/cuda/gpu_bench.sh
# need into OUTDIR/gpu-bundle.tar.xz, for a GPU machine that has the NVIDIA driver and the CUDA 13
# libraries but none of mingpt's build dependencies and no network (e.g. a lent machine with
# another distribution): ./mingpt, build/libmingpt_cuda.so, build/gpu-tests/*, data/input.txt, and
# under gpu-libs/ the shared libraries they load that a base system lacks (libyaml, jansson,
# OpenBLAS, oneDNN, gfortran, cmocka, ...; not glibc, libstdc++, libgcc_s or the CUDA libraries,
# which that machine has in newer versions). Build first for that machine's CPU, e.g.
#   make OPT="-O3 -march=x86-64-v3" mingpt gpu-tests && bash tests/cuda/gpu_bundle.sh DIR
# and there, in a checkout of the same commit:
#   tar xJf DIR/gpu-bundle.tar.xz && . gpu-libs/env.sh && bash tests/cuda/gpu_check.sh
# env.sh puts gpu-libs/ and the folders holding the CUDA libraries the binaries need (found under
# /usr/local, /opt and /usr/lib when the loader does not see them) on LD_LIBRARY_PATH.
set -eu
cd "$(dirname "$0")/../.."
OUT=${1:?usage: gpu_bundle.sh OUTDIR}
mkdir -p "$OUT"
bins=(mingpt build/libmingpt_cuda.so build/gpu-tests/test_*)
bins=($(printf '%s\n' "${bins[@]}" | grep -v '\.d$'))
for f in "${bins[@]}" data/input.txt; do [ -f "$f" ] || { echo "gpu_bundle: $f missing (make mingpt gpu-tests data)" >&2; exit 1; }; done
stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/gpu-libs"
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libgcc_s|libstdc\+\+|libcuda|libcublas|libcudart|libnccl)'
ldd "${bins[@]}" | awk '/=> \//{print $1, $3}' | sort -u | while read -r name path; do
  grep -Eq "$skip" <<<"$name" || cp -L "$path" "$stage/gpu-libs/$name"
done
cat > "$stage/gpu-libs/env.sh" <<'ENV'
# sourced from the checkout's root after unpacking gpu-bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for lib in $(ldd build/libmingpt_cuda.so | awk '/not found/{print $1}'); do
  d=$(find /usr/local /opt /usr/lib -name "$lib" 2>/dev/null | head -1)
  [ -n "$d" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$(dirname "$d") || echo "gpu-libs/env.sh: $lib not found" >&2
done
ENV
tar -cJf "$OUT/gpu-bundle.tar.xz" "${bins[@]}" data/input.txt -C "$stage" gpu-libs
echo "gpu_bundle: $OUT/gpu-bundle.tar.xz ($(du -h "$OUT/gpu-bundle.tar.xz" | cut -f1)): ${#bins[@]} programs, $(ls "$stage/gpu-libs" | grep -vc env.sh) libraries"
